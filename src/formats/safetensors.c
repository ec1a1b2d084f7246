/*
 * safetensors.c: header validation, the tensor table and bounds-checked
 * reads. The rules are those of the reference implementation (header length
 * limits, UTF-8 JSON object, known dtypes, shape/offset agreement, offsets
 * contiguous from 0 and covering the file exactly) plus snug's own limits
 * (no duplicate keys, no unknown keys, shape entries below 2^48, at most
 * 1,000,000 tensors, names of 1 to 1,024 bytes).
 */
#include "safetensors.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static snug_status bad(snug_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static snug_status bad(snug_error *err, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    snug_status st = snug_verrorf_at(err, SNUG_FORMAT, path, fmt, ap);
    va_end(ap);
    return st;
}

char *snug_st_shape_str(const int64_t *shape, int n_dims, char *buf, size_t size)
{
    size_t o = 0;
    o += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < n_dims && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < size) snprintf(buf + o, size - o, "]");
    return buf;
}

uint64_t snug_st_numel(const snug_st_tensor *t)
{
    uint64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= (uint64_t)t->shape[i];
    return n;
}

/* Reads one integer from a JSON array element into [0, limit). */
static bool json_uint(const json_t *v, uint64_t limit, uint64_t *out)
{
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < 0 || (uint64_t)x >= limit) return false;
    *out = (uint64_t)x;
    return true;
}

/* Validates one tensor entry and fills t (name excluded). */
static snug_status parse_tensor(const char *path, const char *tensor_name, const json_t *entry,
                                snug_st_tensor *t, snug_error *err)
{
    char d[96], name[SNUG_SHOWN_MAX], shown[SNUG_SHOWN_MAX]; /* name: as messages show it */
    snug_str_shown(tensor_name, name, sizeof name);
    if (!json_is_object(entry))
        return bad(err, path, "tensor '%s': expected an object with dtype, shape and "
                   "data_offsets, found %s", name, snug_json_describe(entry, d, sizeof d));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)entry, key, v) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 &&
            strcmp(key, "data_offsets") != 0)
            return bad(err, path, "tensor '%s': unknown key '%s' (a tensor entry has only "
                       "dtype, shape and data_offsets)", name,
                       snug_str_shown(key, shown, sizeof shown));
    }
    const json_t *jd = json_object_get(entry, "dtype");
    const json_t *js = json_object_get(entry, "shape");
    const json_t *jo = json_object_get(entry, "data_offsets");
    if (!jd) return bad(err, path, "tensor '%s': missing key 'dtype'", name);
    if (!js) return bad(err, path, "tensor '%s': missing key 'shape'", name);
    if (!jo) return bad(err, path, "tensor '%s': missing key 'data_offsets'", name);
    if (!json_is_string(jd))
        return bad(err, path, "tensor '%s': dtype must be a string, found %s", name,
                   snug_json_describe(jd, d, sizeof d));
    t->dtype = snug_dtype_from_name(json_string_value(jd));
    if (t->dtype == SNUG_DTYPE_NONE)
        return bad(err, path, "tensor '%s': unknown dtype '%s' (known: F64 F32 F16 BF16 "
                   "I64 I32 I16 I8 U64 U32 U16 U8 BOOL F8_E4M3 F8_E5M2 F8_E8M0 C64)", name,
                   snug_bytes_shown(json_string_value(jd), json_string_length(jd), shown, 44));
    if (!json_is_array(js))
        return bad(err, path, "tensor '%s': shape must be an array of integers, found %s", name,
                   snug_json_describe(js, d, sizeof d));
    size_t n_dims = json_array_size(js);
    if (n_dims > SNUG_ST_MAX_DIMS)
        return bad(err, path, "tensor '%s': shape has %zu dimensions; at most %d are accepted",
                   name, n_dims, SNUG_ST_MAX_DIMS);
    t->n_dims = (int32_t)n_dims;
    uint64_t numel = 1;
    for (size_t i = 0; i < n_dims; i++) {
        uint64_t dim;
        if (!json_uint(json_array_get(js, i), (uint64_t)SNUG_ST_MAX_DIM_VALUE, &dim))
            return bad(err, path, "tensor '%s': shape entry %zu must be an integer in [0, 2^48), "
                       "found %s", name, i, snug_json_describe(json_array_get(js, i), d, sizeof d));
        t->shape[i] = (int64_t)dim;
        if (!snug_mul_u64(numel, dim, &numel))
            return bad(err, path, "tensor '%s': element count of the shape overflows 64 bits",
                       name);
    }
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return bad(err, path, "tensor '%s': data_offsets must be an array of two integers "
                   "[begin, end], found %s", name, snug_json_describe(jo, d, sizeof d));
    if (!json_uint(json_array_get(jo, 0), UINT64_MAX, &t->begin) ||
        !json_uint(json_array_get(jo, 1), UINT64_MAX, &t->end))
        return bad(err, path, "tensor '%s': data_offsets entries must be non-negative integers",
                   name);
    if (t->begin > t->end)
        return bad(err, path, "tensor '%s': data_offsets begin %llu is after end %llu", name,
                   (unsigned long long)t->begin, (unsigned long long)t->end);
    uint64_t nbytes;
    if (!snug_mul_u64(numel, snug_dtype_size(t->dtype), &nbytes))
        return bad(err, path, "tensor '%s': byte size of the shape overflows 64 bits", name);
    if (nbytes != t->end - t->begin) {
        char s[256];
        return bad(err, path, "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but dtype "
                   "%s and shape %s need %llu", name, (unsigned long long)t->begin,
                   (unsigned long long)t->end, (unsigned long long)(t->end - t->begin),
                   snug_dtype_name(t->dtype), snug_st_shape_str(t->shape, t->n_dims, s, sizeof s),
                   (unsigned long long)nbytes);
    }
    return SNUG_OK;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const snug_st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(((const snug_st_tensor *)a)->name, ((const snug_st_tensor *)b)->name);
}

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(((const snug_st_meta *)a)->key, ((const snug_st_meta *)b)->key);
}

/* Checks that the tensors, sorted by offset, tile [0, data_bytes) exactly. */
static snug_status check_layout(snug_st_file *f, uint64_t data_bytes, snug_error *err)
{
    uint64_t expected = 0;
    char shown[SNUG_SHOWN_MAX];
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const snug_st_tensor *t = &f->tensors[i];
        if (t->begin < expected)
            return bad(err, f->path, "tensor '%s': data_offsets [%llu, %llu] overlap the "
                       "previous tensor, which ends at %llu", snug_str_shown(t->name, shown, sizeof shown),
                       (unsigned long long)t->begin, (unsigned long long)t->end,
                       (unsigned long long)expected);
        if (t->begin > expected)
            return bad(err, f->path, "tensor '%s': data_offsets [%llu, %llu] leave a gap of "
                       "%llu bytes after offset %llu (tensors must be contiguous from 0)",
                       snug_str_shown(t->name, shown, sizeof shown), (unsigned long long)t->begin,
                       (unsigned long long)t->end,
                       (unsigned long long)(t->begin - expected), (unsigned long long)expected);
        expected = t->end;
    }
    if (expected > data_bytes) {
        const snug_st_tensor *t = &f->tensors[f->n_tensors - 1];
        return bad(err, f->path, "tensor '%s': data ends at byte %llu of the data section, "
                   "which has only %llu bytes (the file is truncated)", snug_str_shown(t->name, shown, sizeof shown),
                   (unsigned long long)expected, (unsigned long long)data_bytes);
    }
    if (expected < data_bytes)
        return bad(err, f->path, "%llu trailing bytes after the last tensor (data ends at "
                   "%llu, the data section has %llu)", (unsigned long long)(data_bytes - expected),
                   (unsigned long long)expected, (unsigned long long)data_bytes);
    return SNUG_OK;
}

/* Builds the tables from the parsed header. */
static snug_status parse_header(snug_st_file *f, const json_t *root, snug_error *err)
{
    const char *key;
    json_t *v;
    const json_t *meta = json_object_get(root, "__metadata__");
    size_t n_entries = json_object_size(root);
    size_t n_tensors = n_entries - (meta ? 1 : 0);
    if (n_tensors > SNUG_ST_MAX_TENSORS)
        return bad(err, f->path, "header lists %zu tensors; at most %d are accepted", n_tensors,
                   SNUG_ST_MAX_TENSORS);
    char d[96], shown[SNUG_SHOWN_MAX];
    if (meta && !json_is_object(meta))
        return bad(err, f->path, "__metadata__ must be an object of strings, found %s",
                   snug_json_describe(meta, d, sizeof d));
    size_t n_meta = meta ? json_object_size(meta) : 0;

    size_t pool = 0;
    json_object_foreach((json_t *)root, key, v) {
        if (v == meta) continue;
        size_t len = strlen(key);
        if (len == 0) return bad(err, f->path, "a tensor has an empty name");
        if (len > SNUG_ST_MAX_NAME_BYTES)
            return bad(err, f->path, "tensor name of %zu bytes ('%s') is longer than the "
                       "limit of %d bytes", len, snug_str_shown(key, shown, 44),
                       SNUG_ST_MAX_NAME_BYTES);
        pool += len + 1;
    }
    if (meta) {
        json_object_foreach((json_t *)meta, key, v) {
            if (!json_is_string(v))
                return bad(err, f->path, "__metadata__ entry '%s' must be a string, found %s",
                           snug_str_shown(key, shown, sizeof shown), snug_json_describe(v, d, sizeof d));
            pool += strlen(key) + 1 + json_string_length(v) + 1;
        }
    }

    f->tensors = snug_mem_alloc(SNUG_MEM_OTHER, n_tensors * sizeof *f->tensors, err);
    f->meta = snug_mem_alloc(SNUG_MEM_OTHER, n_meta * sizeof *f->meta, err);
    f->strings = snug_mem_alloc(SNUG_MEM_OTHER, pool, err);
    if (!f->tensors || !f->meta || !f->strings) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", f->path);

    char *s = f->strings;
    int64_t nt = 0;
    json_object_foreach((json_t *)root, key, v) {
        if (v == meta) continue;
        snug_st_tensor *t = &f->tensors[nt];
        size_t len = strlen(key);
        memcpy(s, key, len + 1);
        t->name = s;
        s += len + 1;
        snug_status st = parse_tensor(f->path, t->name, v, t, err);
        if (st != SNUG_OK) return st;
        nt++;
    }
    f->n_tensors = nt;
    int64_t nm = 0;
    if (meta) {
        json_object_foreach((json_t *)meta, key, v) {
            size_t kl = strlen(key), vl = json_string_length(v);
            memcpy(s, key, kl + 1);
            f->meta[nm].key = s;
            s += kl + 1;
            memcpy(s, json_string_value(v), vl + 1);
            f->meta[nm].value = s;
            s += vl + 1;
            nm++;
        }
    }
    f->n_meta = nm;

    qsort(f->tensors, (size_t)nt, sizeof *f->tensors, cmp_by_offset);
    snug_status st = check_layout(f, f->file_size - f->data_start, err);
    if (st != SNUG_OK) return st;
    qsort(f->tensors, (size_t)nt, sizeof *f->tensors, cmp_by_name);
    qsort(f->meta, (size_t)nm, sizeof *f->meta, cmp_meta);
    return SNUG_OK;
}

snug_status snug_st_open_fd(int fd, const char *name, snug_st_file **out, snug_error *err)
{
    snug_status st;
    char *header = NULL;
    json_t *root = NULL;
    snug_st_file *f = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *f, err);
    if (!f) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", name);
    f->fd = fd;
    st = snug_file_adopt(fd, name, &f->path, &f->file_size, err);
    if (st != SNUG_OK) goto fail;
    if (f->file_size < 8) {
        st = bad(err, name, "file is %llu bytes; a safetensors file starts with an 8-byte "
                 "header length", (unsigned long long)f->file_size);
        goto fail;
    }
    unsigned char lenbuf[8];
    st = snug_pread_full(fd, lenbuf, 8, 0, name, err);
    if (st != SNUG_OK) goto fail;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | lenbuf[i];
    if (n < SNUG_ST_MIN_HEADER_BYTES) {
        st = bad(err, name, "header length %llu is below the minimum of %d",
                 (unsigned long long)n, SNUG_ST_MIN_HEADER_BYTES);
        goto fail;
    }
    if (n > SNUG_ST_MAX_HEADER_BYTES) {
        st = bad(err, name, "header length %llu is above the limit of %d bytes",
                 (unsigned long long)n, SNUG_ST_MAX_HEADER_BYTES);
        goto fail;
    }
    if (n > f->file_size - 8) {
        st = bad(err, name, "header length %llu runs past the end of the file (%llu bytes)",
                 (unsigned long long)n, (unsigned long long)f->file_size);
        goto fail;
    }
    f->data_start = 8 + n;
    header = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n, err);
    if (!header) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", name);
        goto fail;
    }
    st = snug_pread_full(fd, header, (size_t)n, 8, name, err);
    if (st != SNUG_OK) goto fail;
    if (!snug_utf8_valid(header, (size_t)n)) {
        st = bad(err, name, "header is not valid UTF-8");
        goto fail;
    }
    if (memchr(header, '\0', (size_t)n)) {
        st = bad(err, name, "header contains a NUL byte");
        goto fail;
    }
    char hname[SNUG_ERROR_MSG_BYTES / 2];
    snprintf(hname, sizeof hname, "%s: header", name);
    st = snug_json_parse(header, (size_t)n, hname, &root, err);
    if (st != SNUG_OK) goto fail;
    snug_mem_free(header);
    header = NULL;
    st = parse_header(f, root, err);
    if (st != SNUG_OK) goto fail;
    json_decref(root);
    *out = f;
    return SNUG_OK;
fail:
    json_decref(root);
    snug_mem_free(header);
    snug_st_close(f);
    return st;
}

/* The same three steps as snug_gguf_open (open, parse the descriptor, own
 * it); they stay two functions because the handles differ in type and C
 * offers no way to share them without casting function pointers. */
snug_status snug_st_open(const char *path, snug_st_file **out, snug_error *err)
{
    int fd;
    uint64_t size;
    snug_status st = snug_file_open_read(path, &fd, &size, err);
    if (st != SNUG_OK) return st;
    st = snug_st_open_fd(fd, path, out, err);
    if (st != SNUG_OK) {
        close(fd);
        return st;
    }
    (*out)->owns_fd = true;
    return SNUG_OK;
}

void snug_st_close(snug_st_file *f)
{
    if (!f) return;
    if (f->owns_fd) close(f->fd);
    snug_mem_free(f->tensors);
    snug_mem_free(f->meta);
    snug_mem_free(f->strings);
    snug_mem_free(f->path);
    snug_mem_free(f);
}

const snug_st_tensor *snug_st_find(const snug_st_file *f, const char *name)
{
    int64_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return &f->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *snug_st_meta_get(const snug_st_file *f, const char *key)
{
    snug_st_meta probe = {.key = key};
    const snug_st_meta *m = bsearch(&probe, f->meta, (size_t)f->n_meta, sizeof probe, cmp_meta);
    return m ? m->value : NULL;
}

snug_status snug_st_check_weight(const snug_st_file *f, const snug_st_tensor *t, snug_error *err)
{
    char shown[SNUG_SHOWN_MAX];
    if (snug_dtype_is_weight(t->dtype)) return SNUG_OK;
    return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s': dtype %s is not a weight type "
                       "snug loads (F32, F16, BF16)", f->path, snug_str_shown(t->name, shown, sizeof shown),
                       snug_dtype_name(t->dtype));
}

/* Checks that [offset, offset + n) lies inside tensor t. */
static snug_status check_range(const snug_st_file *f, const snug_st_tensor *t, uint64_t offset,
                               uint64_t n, snug_error *err)
{
    char shown[SNUG_SHOWN_MAX];
    uint64_t size = t->end - t->begin, last;
    if (!snug_add_u64(offset, n, &last) || last > size)
        return snug_errorf(err, SNUG_INVALID, "%s: tensor '%s': read of %llu bytes at offset "
                           "%llu is outside its %llu bytes", f->path, snug_str_shown(t->name, shown, sizeof shown),
                           (unsigned long long)n, (unsigned long long)offset,
                           (unsigned long long)size);
    return SNUG_OK;
}

snug_status snug_st_read(const snug_st_file *f, const snug_st_tensor *t, uint64_t offset,
                         void *dst, size_t n, snug_error *err)
{
    char shown[SNUG_SHOWN_MAX];
    snug_status st = check_range(f, t, offset, n, err);
    if (st != SNUG_OK) return st;
    st = snug_pread_full(f->fd, dst, n, f->data_start + t->begin + offset, f->path, err);
    if (st != SNUG_OK)
        snug_error_context(err, st, f->path, "tensor '%s': ", snug_str_shown(t->name, shown, sizeof shown));
    return st;
}

snug_status snug_st_read_strided(const snug_st_file *f, const snug_st_tensor *t,
                                 uint64_t offset, size_t seg_bytes, size_t n_rows,
                                 uint64_t src_stride, void *dst, size_t dst_stride,
                                 snug_error *err)
{
    char shown[SNUG_SHOWN_MAX];
    if (n_rows == 0) return SNUG_OK;
    uint64_t last_start;
    if (!snug_mul_u64(src_stride, n_rows - 1, &last_start) ||
        !snug_add_u64(last_start, offset, &last_start))
        return snug_errorf(err, SNUG_INVALID, "%s: tensor '%s': strided read overflows",
                           f->path, snug_str_shown(t->name, shown, sizeof shown));
    snug_status st = check_range(f, t, last_start, seg_bytes, err);
    if (st != SNUG_OK) return st;
    st = snug_pread_strided(f->fd, dst, seg_bytes, n_rows, f->data_start + t->begin + offset,
                            src_stride, dst_stride, f->path, err);
    if (st != SNUG_OK)
        snug_error_context(err, st, f->path, "tensor '%s': ", snug_str_shown(t->name, shown, sizeof shown));
    return st;
}
