/*
 * st_writer.c: safetensors headers and positioned tensor writes.
 */
#include "st_writer.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/json.h"

#include <string.h>
#include <unistd.h>

bool snug_st_out_bytes(const snug_st_out *t, uint64_t *bytes)
{
    uint64_t n = snug_dtype_size(t->dtype);
    for (int i = 0; i < t->n_dims; i++)
        if (t->shape[i] < 0 || !snug_mul_u64(n, (uint64_t)t->shape[i], &n)) return false;
    *bytes = n;
    return true;
}

/* Builds the header JSON and the tensors' places. */
static snug_status header_json(const snug_st_out *tensors, int32_t n, snug_st_writer *w,
                               json_t **out, snug_error *err)
{
    json_t *root = json_object();
    if (!root || json_object_set_new(root, "__metadata__", json_pack("{s:s}", "format", "pt")) != 0) {
        json_decref(root);
        return snug_errorf(err, SNUG_NOMEM, "%s: out of memory building the header", w->path);
    }
    uint64_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        const snug_st_out *t = &tensors[i];
        uint64_t bytes = 0, end = 0;
        if (t->n_dims > SNUG_ST_MAX_DIMS || !snug_st_out_bytes(t, &bytes) ||
            !snug_add_u64(off, bytes, &end)) {
            json_decref(root);
            return snug_errorf(err, SNUG_INVALID, "%s: tensor '%s' is too large", w->path,
                               t->name);
        }
        json_t *shape = json_array();
        for (int k = 0; shape && k < t->n_dims; k++)
            if (json_array_append_new(shape, json_integer(t->shape[k])) != 0) {
                json_decref(shape);
                shape = NULL;
            }
        json_t *e = shape ? json_pack("{s:s, s:o, s:[I, I]}", "dtype", snug_dtype_name(t->dtype),
                                      "shape", shape, "data_offsets", (json_int_t)off,
                                      (json_int_t)(off + bytes))
                          : NULL;
        if (!e || json_object_set_new(root, t->name, e) != 0) {
            json_decref(root);
            return snug_errorf(err, SNUG_NOMEM, "%s: out of memory building the header",
                               w->path);
        }
        w->begin[i] = off;
        w->size[i] = bytes;
        off += bytes;
    }
    *out = root;
    return SNUG_OK;
}

snug_status snug_st_writer_create(const char *path, const snug_st_out *tensors, int32_t n,
                                  snug_st_writer **out, snug_error *err)
{
    snug_status st;
    json_t *root = NULL;
    char *text = NULL;
    snug_json_init();
    snug_st_writer *w = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *w, err);
    if (!w) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", path);
    w->fd = -1;
    w->n = n;
    w->path = snug_mem_strdup(SNUG_MEM_OTHER, path, err);
    w->begin = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n * sizeof *w->begin, err);
    w->size = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n * sizeof *w->size, err);
    if (!w->path || !w->begin || !w->size) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", path);
        goto fail;
    }
    st = header_json(tensors, n, w, &root, err);
    if (st != SNUG_OK) goto fail;
    if ((size_t)json_object_size(root) != (size_t)n + 1) {
        st = snug_errorf(err, SNUG_INVALID, "%s: tensor names are not distinct", path);
        goto fail;
    }
    text = snug_json_dumps(root, false);
    if (!text) {
        st = snug_errorf(err, SNUG_NOMEM, "%s: out of memory formatting the header", path);
        goto fail;
    }
    size_t len = strlen(text);
    size_t padded = snug_round_up(len, 8);
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++) prefix[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    w->data_start = 8 + padded;
    st = snug_file_create(path, &w->fd, err);
    if (st == SNUG_OK) st = snug_pwrite_full(w->fd, prefix, 8, 0, path, err);
    if (st == SNUG_OK) st = snug_pwrite_full(w->fd, text, len, 8, path, err);
    if (st == SNUG_OK && padded > len)
        st = snug_pwrite_full(w->fd, "        ", padded - len, 8 + len, path, err);
    if (st != SNUG_OK) goto fail;
    uint64_t total = n ? w->begin[n - 1] + w->size[n - 1] : 0;
    if (ftruncate(w->fd, (off_t)(w->data_start + total)) != 0) {
        st = snug_errorf(err, SNUG_IO, "%s: cannot size the file", path);
        goto fail;
    }
    snug_mem_free(text);
    json_decref(root);
    *out = w;
    return SNUG_OK;
fail:
    snug_mem_free(text);
    json_decref(root);
    snug_st_writer_abort(w);
    return st;
}

snug_status snug_st_writer_write(const snug_st_writer *w, int32_t i, uint64_t offset,
                                 const void *data, size_t n, snug_error *err)
{
    SNUG_ASSERT(i >= 0 && i < w->n);
    uint64_t end;
    if (!snug_add_u64(offset, n, &end) || end > w->size[i])
        return snug_errorf(err, SNUG_INVALID, "%s: write of %zu bytes at %llu is outside tensor "
                           "%d (%llu bytes)", w->path, n, (unsigned long long)offset, i,
                           (unsigned long long)w->size[i]);
    return snug_pwrite_full(w->fd, data, n, w->data_start + w->begin[i] + offset, w->path, err);
}

static void writer_free(snug_st_writer *w)
{
    snug_mem_free(w->begin);
    snug_mem_free(w->size);
    snug_mem_free(w->path);
    snug_mem_free(w);
}

snug_status snug_st_writer_finish(snug_st_writer *w, snug_error *err)
{
    snug_status st = snug_file_close(w->fd, w->path, err);
    w->fd = -1;
    if (st != SNUG_OK) unlink(w->path);
    writer_free(w);
    return st;
}

void snug_st_writer_abort(snug_st_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        if (w->path) unlink(w->path);
    }
    writer_free(w);
}
