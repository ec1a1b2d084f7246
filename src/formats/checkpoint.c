/*
 * checkpoint.c: the shard index and model directories.
 */
#include "checkpoint.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/json.h"
#include "gguf.h"
#include "gguf_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { INDEX_MAX_BYTES = 256 << 20 };

static int cmp_index_entry(const void *a, const void *b)
{
    return strcmp(((const snug_index_entry *)a)->tensor, ((const snug_index_entry *)b)->tensor);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks that a shard path is a plain file name inside the directory. */
static snug_status check_file_name(const char *name, const char *tensor, const char *fname,
                                   snug_error *err)
{
    size_t len = strlen(fname);
    const char *why = NULL;
    if (len == 0)
        why = "is empty";
    else if (len > SNUG_INDEX_MAX_FILE_NAME)
        why = "is longer than 255 bytes";
    else if (fname[0] == '/')
        why = "is an absolute path";
    else if (strcmp(fname, ".") == 0 || strcmp(fname, "..") == 0)
        why = "names a directory";
    else if (strchr(fname, '/') || strchr(fname, '\\'))
        why = "contains a path separator";
    char shown[2][SNUG_SHOWN_MAX];
    if (why)
        return snug_errorf(err, SNUG_FORMAT, "%s: weight_map: tensor '%s': file name "
                           "'%s' %s; expected a plain file name in the model directory",
                           name, snug_str_shown(tensor, shown[0], sizeof shown[0]),
                           snug_str_shown(fname, shown[1], 104), why);
    return SNUG_OK;
}

static snug_status index_fill(const json_t *map, const char *name, snug_index *ix,
                              snug_error *err)
{
    const char *key;
    json_t *v;
    size_t pool = 0;
    size_t n = json_object_size(map);
    char d[96], shown[SNUG_SHOWN_MAX];
    json_object_foreach((json_t *)map, key, v) {
        size_t kl = strlen(key);
        if (kl == 0 || kl > SNUG_ST_MAX_NAME_BYTES)
            return snug_errorf(err, SNUG_FORMAT, "%s: weight_map: tensor name of %zu bytes; "
                               "expected 1 to %d", name, kl, SNUG_ST_MAX_NAME_BYTES);
        if (!json_is_string(v))
            return snug_errorf(err, SNUG_FORMAT, "%s: weight_map: tensor '%s': expected a "
                               "file name, found %s", name, snug_str_shown(key, shown, sizeof shown),
                               snug_json_describe(v, d, sizeof d));
        snug_status st = check_file_name(name, key, json_string_value(v), err);
        if (st != SNUG_OK) return st;
        pool += kl + 1 + json_string_length(v) + 1;
    }
    ix->entries = snug_mem_alloc(SNUG_MEM_OTHER, n * sizeof *ix->entries, err);
    ix->files = snug_mem_alloc(SNUG_MEM_OTHER, n * sizeof *ix->files, err);
    ix->strings = snug_mem_alloc(SNUG_MEM_OTHER, pool, err);
    if (!ix->entries || !ix->files || !ix->strings) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", name);

    /* Copy names; collect the distinct file names (sorted, deduplicated). */
    char *s = ix->strings;
    const char **fnames = ix->files;
    size_t i = 0;
    json_object_foreach((json_t *)map, key, v) {
        size_t kl = strlen(key), vl = json_string_length(v);
        memcpy(s, key, kl + 1);
        ix->entries[i].tensor = s;
        s += kl + 1;
        memcpy(s, json_string_value(v), vl + 1);
        fnames[i] = s;
        s += vl + 1;
        i++;
    }
    const char **file_of = snug_mem_alloc(SNUG_MEM_OTHER, n * sizeof *file_of, err);
    if (!file_of) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", name);
    memcpy(file_of, fnames, n * sizeof *file_of);
    qsort(fnames, n, sizeof *fnames, cmp_str);
    size_t nf = 0;
    for (size_t k = 0; k < n; k++)
        if (nf == 0 || strcmp(fnames[nf - 1], fnames[k]) != 0) fnames[nf++] = fnames[k];
    snug_status st = SNUG_OK;
    if (nf > SNUG_INDEX_MAX_FILES) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: weight_map names %zu files; at most %d are "
                         "accepted", name, nf, SNUG_INDEX_MAX_FILES);
    } else {
        ix->n_files = (int32_t)nf;
        for (size_t k = 0; k < n; k++) {
            const char **hit = bsearch(&file_of[k], fnames, nf, sizeof *fnames, cmp_str);
            SNUG_ASSERT(hit);
            ix->entries[k].file = (int32_t)(hit - fnames);
        }
        ix->n_entries = (int64_t)n;
        qsort(ix->entries, n, sizeof *ix->entries, cmp_index_entry);
    }
    snug_mem_free(file_of);
    return st;
}

snug_status snug_index_parse(const char *text, size_t len, const char *name, snug_index **out,
                             snug_error *err)
{
    json_t *root = NULL;
    char d[96];
    snug_index *ix = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *ix, err);
    if (!ix) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", name);
    snug_status st = snug_json_parse(text, len, name, &root, err);
    if (st != SNUG_OK) goto fail;
    const json_t *meta = json_object_get(root, "metadata");
    if (meta && !json_is_null(meta)) {
        if (!json_is_object(meta)) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: field 'metadata': expected an object, "
                             "found %s", name, snug_json_describe(meta, d, sizeof d));
            goto fail;
        }
        int64_t total = 0;
        char mname[512];
        snprintf(mname, sizeof mname, "%s: metadata", name);
        st = snug_json_get_int(meta, "total_size", mname, false, 0, INT64_MAX, &total, NULL,
                               err);
        if (st != SNUG_OK) goto fail;
    }
    const json_t *map = json_object_get(root, "weight_map");
    if (!map) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: field 'weight_map' is missing; expected an "
                         "object mapping tensor names to shard files", name);
        goto fail;
    }
    if (!json_is_object(map)) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: field 'weight_map': expected an object "
                         "mapping tensor names to shard files, found %s", name,
                         snug_json_describe(map, d, sizeof d));
        goto fail;
    }
    if (json_object_size(map) == 0) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: field 'weight_map' is empty", name);
        goto fail;
    }
    if (json_object_size(map) > SNUG_ST_MAX_TENSORS) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: weight_map lists %zu tensors; at most %d are "
                         "accepted", name, json_object_size(map), SNUG_ST_MAX_TENSORS);
        goto fail;
    }
    st = index_fill(map, name, ix, err);
    if (st != SNUG_OK) goto fail;
    json_decref(root);
    *out = ix;
    return SNUG_OK;
fail:
    json_decref(root);
    snug_index_free(ix);
    return st;
}

void snug_index_free(snug_index *ix)
{
    if (!ix) return;
    snug_mem_free(ix->entries);
    snug_mem_free((void *)ix->files);
    snug_mem_free(ix->strings);
    snug_mem_free(ix);
}

static int cmp_ckpt_entry(const void *a, const void *b)
{
    return strcmp(((const snug_ckpt_entry *)a)->tensor->name,
                  ((const snug_ckpt_entry *)b)->tensor->name);
}

/* Checks shard i as soon as it is open, so that a hostile index cannot make
 * snug open many large shards before it finds out: the shard is not
 * another name for an earlier one (a link), and it holds exactly the
 * tensors the index assigns to it (count[i] of them). */
static snug_status check_shard(const snug_checkpoint *ck, const snug_index *ix, int32_t i,
                               const int64_t *count, const char *index_path, snug_error *err)
{
    const snug_st_file *f = ck->files[i];
    char shown[3][SNUG_SHOWN_MAX];
    struct stat si;
    if (fstat(f->fd, &si) != 0)
        return snug_errorf(err, SNUG_IO, "%s: cannot stat: %s", f->path, strerror(errno));
    for (int32_t k = 0; k < i; k++) {
        struct stat sk;
        if (fstat(ck->files[k]->fd, &sk) == 0 && sk.st_dev == si.st_dev && sk.st_ino == si.st_ino)
            return snug_errorf(err, SNUG_FORMAT, "%s: shards '%s' and '%s' are the same file",
                               index_path, snug_str_shown(ix->files[k], shown[0], sizeof shown[0]),
                               snug_str_shown(ix->files[i], shown[1], sizeof shown[1]));
    }
    for (int64_t k = 0; k < f->n_tensors; k++) {
        snug_index_entry key = {.tensor = f->tensors[k].name};
        const snug_index_entry *e =
            bsearch(&key, ix->entries, (size_t)ix->n_entries, sizeof key, cmp_index_entry);
        if (!e || e->file != i)
            return snug_errorf(err, SNUG_FORMAT, "%s: shard '%s' holds tensor '%s', which the "
                               "index %s", index_path, snug_str_shown(ix->files[i], shown[0], sizeof shown[0]),
                               snug_str_shown(f->tensors[k].name, shown[1], sizeof shown[1]),
                               e ? "assigns to another shard" : "does not list");
    }
    if (f->n_tensors != count[i]) { /* fewer than assigned: name the first missing one */
        for (int64_t k = 0; k < ix->n_entries; k++)
            if (ix->entries[k].file == i && !snug_st_find(f, ix->entries[k].tensor))
                return snug_errorf(err, SNUG_FORMAT, "%s: lists tensor '%s' in shard '%s', "
                                   "which does not hold it", index_path,
                                   snug_str_shown(ix->entries[k].tensor, shown[0], sizeof shown[0]),
                                   snug_str_shown(ix->files[i], shown[1], sizeof shown[1]));
    }
    return SNUG_OK;
}

/* Opens the shards named by the index, checking each as it opens. */
static snug_status open_sharded(snug_checkpoint *ck, const char *index_path, snug_error *err)
{
    char *text = NULL;
    size_t len = 0;
    snug_index *ix = NULL;
    int64_t *count = NULL;
    char path[4096];
    snug_status st = snug_file_read_all(index_path, INDEX_MAX_BYTES, &text, &len, err);
    if (st == SNUG_OK) st = snug_index_parse(text, len, index_path, &ix, err);
    snug_mem_free(text);
    if (st != SNUG_OK) return st;
    ck->files = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)ix->n_files * sizeof *ck->files, err);
    count = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)ix->n_files * sizeof *count, err);
    ck->entries = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)ix->n_entries * sizeof *ck->entries, err);
    if (!ck->files || !count || !ck->entries) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", index_path);
        goto done;
    }
    for (int64_t k = 0; k < ix->n_entries; k++) count[ix->entries[k].file]++;
    for (int32_t i = 0; i < ix->n_files; i++) {
        st = snug_path_join(path, sizeof path, ck->dir, ix->files[i], err);
        if (st != SNUG_OK) goto done;
        if (!snug_file_exists(path)) {
            char shown[SNUG_SHOWN_MAX];
            st = snug_errorf(err, SNUG_FORMAT, "%s: names shard '%s', which is not a file in "
                             "%s", index_path, snug_str_shown(ix->files[i], shown, sizeof shown), ck->dir);
            goto done;
        }
        st = snug_st_open(path, &ck->files[i], err);
        if (st != SNUG_OK) goto done;
        ck->n_files = i + 1;
        st = check_shard(ck, ix, i, count, index_path, err);
        if (st != SNUG_OK) goto done;
    }
    for (int64_t k = 0; k < ix->n_entries; k++) {
        const snug_index_entry *e = &ix->entries[k];
        ck->entries[k].tensor = snug_st_find(ck->files[e->file], e->tensor);
        ck->entries[k].file = e->file;
        SNUG_ASSERT(ck->entries[k].tensor); /* check_shard saw every one */
    }
    ck->n_tensors = ix->n_entries;
    ck->sharded = true;
done:
    snug_mem_free(count);
    snug_index_free(ix);
    return st;
}

static snug_status open_single(snug_checkpoint *ck, const char *path, snug_error *err)
{
    ck->files = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *ck->files, err);
    if (!ck->files) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", path);
    snug_status st = snug_st_open(path, &ck->files[0], err);
    if (st != SNUG_OK) return st;
    ck->n_files = 1;
    const snug_st_file *f = ck->files[0];
    ck->entries = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)f->n_tensors * sizeof *ck->entries, err);
    if (!ck->entries) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", path);
    for (int64_t k = 0; k < f->n_tensors; k++) {
        ck->entries[k].tensor = &f->tensors[k];
        ck->entries[k].file = 0;
    }
    ck->n_tensors = f->n_tensors;
    return SNUG_OK;
}

static int cmp_st_tensor(const void *a, const void *b)
{
    return strcmp(((const snug_st_tensor *)a)->name, ((const snug_st_tensor *)b)->name);
}

/* The Hugging Face name and the element type of GGUF tensor t of path into
 * name and *dt, or an error naming the tensor. */
static snug_status gguf_tensor_of(const char *path, snug_arch arch, const snug_gguf_tensor *t, char *name,
                                  size_t size, snug_dtype *dt, snug_error *err)
{
    char shown[SNUG_SHOWN_MAX];
    if (!snug_gguf_hf_name(arch, t->name, name, size))
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s' has no place in a %s model", path,
                           snug_str_shown(t->name, shown, sizeof shown), snug_arch_get(arch)->gguf);
    *dt = t->type == SNUG_GGML_F32 ? SNUG_DTYPE_F32
          : t->type == SNUG_GGML_F16 ? SNUG_DTYPE_F16
          : t->type == SNUG_GGML_BF16 ? SNUG_DTYPE_BF16
                                      : snug_dtype_from_qtype(t->type);
    if (*dt == SNUG_DTYPE_NONE)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s' is %s, not a type of a model's "
                           "weights; snug reads " SNUG_GGUF_MODEL_TYPES, path,
                           snug_str_shown(t->name, shown, sizeof shown),
                           snug_ggml_type_name(t->type));
    if (t->n_dims < 1 || t->n_dims > 2)
        return snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s' has %u dimensions; a model's "
                           "have 1 or 2", path, snug_str_shown(t->name, shown, sizeof shown), t->n_dims);
    return SNUG_OK;
}

/* A GGUF file as a checkpoint of one file: its configuration from its keys
 * (for llama, the q and k rows in llama.cpp's interleaved rotary order,
 * which the config records; tied embeddings when it has no output.weight),
 * its tensors under their Hugging Face names and shapes, read where the
 * file holds them. */
static snug_status open_gguf(snug_checkpoint *ck, const char *path, snug_error *err)
{
    snug_gguf_file *g = NULL;
    snug_st_file *f = NULL;
    char name[256];
    snug_dtype dt;
    size_t strings = 0;
    snug_status st = snug_gguf_open(path, &g, err);
    if (st == SNUG_OK) st = snug_gguf_model_config(g, &ck->config, err);
    int64_t n_weights = 0;
    for (int64_t i = 0; st == SNUG_OK && i < g->n_tensors; i++) {
        if (snug_gguf_config_tensor(g->tensors[i].name)) continue; /* read into the config */
        st = gguf_tensor_of(path, ck->config.arch, &g->tensors[i], name, sizeof name, &dt, err);
        strings += strlen(name) + 1;
        n_weights++;
    }
    if (st != SNUG_OK) goto done;
    ck->config.tie_word_embeddings = snug_gguf_find_tensor(g, "output.weight") == NULL;
    ck->files = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *ck->files, err);
    f = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *f, err);
    if (f) {
        f->fd = -1;
        f->path = snug_mem_strdup(SNUG_MEM_OTHER, path, err);
        f->strings = snug_mem_alloc(SNUG_MEM_OTHER, strings, err);
        f->tensors = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)g->n_tensors * sizeof *f->tensors, err);
    }
    ck->entries = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)g->n_tensors * sizeof *ck->entries, err);
    if (!ck->files || !f || !f->path || !f->strings || !f->tensors || !ck->entries) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", path);
        goto done;
    }
    f->fd = dup(g->fd);
    if (f->fd < 0) {
        st = snug_errorf(err, SNUG_IO, "%s: %s", path, strerror(errno));
        goto done;
    }
    f->owns_fd = true;
    f->file_size = g->file_size;
    f->data_start = g->data_start;
    char *at = f->strings;
    for (int64_t i = 0, n = 0; i < g->n_tensors; i++) {
        const snug_gguf_tensor *t = &g->tensors[i];
        if (snug_gguf_config_tensor(t->name)) continue;
        snug_st_tensor *x = &f->tensors[n++];
        gguf_tensor_of(path, ck->config.arch, t, name, sizeof name, &dt, NULL);
        memcpy(at, name, strlen(name) + 1);
        x->name = at;
        at += strlen(name) + 1;
        x->dtype = dt;
        x->n_dims = (int32_t)t->n_dims;
        x->shape[0] = (int64_t)(t->n_dims == 2 ? t->ne[1] : t->ne[0]);
        x->shape[1] = t->n_dims == 2 ? (int64_t)t->ne[0] : 0;
        x->begin = t->offset;
        x->end = t->offset + t->bytes;
    }
    f->n_tensors = n_weights;
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_st_tensor);
    ck->files[0] = f;
    ck->n_files = 1;
    f = NULL;
    for (int64_t k = 0; k < ck->files[0]->n_tensors; k++) {
        ck->entries[k].tensor = &ck->files[0]->tensors[k];
        ck->entries[k].file = 0;
    }
    ck->n_tensors = ck->files[0]->n_tensors;
done:
    snug_st_close(f);
    snug_gguf_close(g);
    return st;
}

/* The name a multimodal checkpoint stores text-model tensor `name` under,
 * into buf; name itself otherwise. */
static const char *stored_name(const snug_checkpoint *ck, const char *name, char *buf, size_t size)
{
    if (ck->text_names == 1) return snprintf(buf, size, "language_model.%s", name) < (int)size ? buf : name;
    if (ck->text_names == 2 && strncmp(name, "model.", 6) == 0)
        return snprintf(buf, size, "model.language_model.%s", name + 6) < (int)size ? buf : name;
    return name;
}

const char *snug_checkpoint_text_name(const snug_checkpoint *ck, const char *stored, char *buf, size_t size)
{
    if (ck->text_names == 1)
        return strncmp(stored, "language_model.", 15) == 0 ? stored + 15 : NULL;
    if (ck->text_names == 2) {
        if (strncmp(stored, "model.language_model.", 21) == 0)
            return snprintf(buf, size, "model.%s", stored + 21) < (int)size ? buf : NULL;
        return strncmp(stored, "model.", 6) == 0 ? NULL : stored; /* lm_head.weight stays */
    }
    return stored;
}

/* How a multimodal checkpoint names its text model (text_names), and its
 * vision tower's size: everything else. */
static void find_text_names(snug_checkpoint *ck)
{
    if (!ck->config.multimodal) return;
    for (int64_t i = 0; i < ck->n_tensors && !ck->text_names; i++) {
        const char *n = ck->entries[i].tensor->name;
        ck->text_names = strncmp(n, "language_model.", 15) == 0 ? 1 : strncmp(n, "model.language_model.", 21) == 0 ? 2 : 0;
    }
    char buf[1100];
    for (int64_t i = 0; i < ck->n_tensors; i++) {
        const snug_st_tensor *t = ck->entries[i].tensor;
        if (!snug_checkpoint_text_name(ck, t->name, buf, sizeof buf)) {
            ck->n_vision++;
            ck->vision_bytes += t->end - t->begin;
        }
    }
}

snug_status snug_checkpoint_open(const char *dir, snug_checkpoint **out, snug_error *err)
{
    char index_path[4096], single_path[4096];
    snug_status st;
    snug_checkpoint *ck = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *ck, err);
    if (!ck) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", dir);
    ck->dir = snug_mem_strdup(SNUG_MEM_OTHER, dir, err);
    if (!ck->dir) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", dir);
        goto fail;
    }
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode)) { /* a file: GGUF */
        ck->gguf = true;
        st = open_gguf(ck, dir, err);
        if (st != SNUG_OK) goto fail;
        *out = ck;
        return SNUG_OK;
    }
    st = snug_config_load(dir, &ck->config, err);
    if (st == SNUG_OK)
        st = snug_path_join(index_path, sizeof index_path, dir, "model.safetensors.index.json",
                            err);
    if (st == SNUG_OK)
        st = snug_path_join(single_path, sizeof single_path, dir, "model.safetensors", err);
    if (st != SNUG_OK) goto fail;
    if (snug_file_exists(index_path))
        st = open_sharded(ck, index_path, err);
    else if (snug_file_exists(single_path))
        st = open_single(ck, single_path, err);
    else
        st = snug_errorf(err, SNUG_FORMAT, "%s: holds neither model.safetensors nor "
                         "model.safetensors.index.json", dir);
    if (st != SNUG_OK) goto fail;
    qsort(ck->entries, (size_t)ck->n_tensors, sizeof *ck->entries, cmp_ckpt_entry);
    find_text_names(ck);
    *out = ck;
    return SNUG_OK;
fail:
    snug_checkpoint_close(ck);
    return st;
}

void snug_checkpoint_close(snug_checkpoint *ck)
{
    if (!ck) return;
    for (int32_t i = 0; i < ck->n_files; i++) snug_st_close(ck->files[i]);
    snug_mem_free(ck->files);
    snug_mem_free(ck->entries);
    snug_mem_free(ck->dir);
    snug_mem_free(ck);
}

const snug_st_tensor *snug_checkpoint_find(const snug_checkpoint *ck, const char *text_name,
                                           const snug_st_file **file)
{
    char buf[1100];
    const char *name = stored_name(ck, text_name, buf, sizeof buf);
    int64_t lo = 0, hi = ck->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ck->entries[mid].tensor->name, name);
        if (c == 0) {
            if (file) *file = ck->files[ck->entries[mid].file];
            return ck->entries[mid].tensor;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

snug_dtype snug_checkpoint_tensor_dtype(void *ck, const char *name)
{
    const snug_st_tensor *t = snug_checkpoint_find(ck, name, NULL);
    return t ? t->dtype : SNUG_DTYPE_NONE;
}

snug_dtype snug_checkpoint_weight_dtype(const snug_checkpoint *ck)
{
    if (ck->config.dtype != SNUG_DTYPE_NONE) return ck->config.dtype;
    const snug_st_tensor *t = snug_checkpoint_find(ck, "model.embed_tokens.weight", NULL); /* (as the text model names it) */
    if (t && snug_dtype_is_weight(t->dtype)) return t->dtype;
    return SNUG_DTYPE_F32;
}
