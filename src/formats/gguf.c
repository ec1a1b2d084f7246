/*
 * gguf.c: GGUF header, key-value and tensor-info parsing with every count,
 * length and offset checked against the file before use.
 */
#include "gguf.h"

#include "base/mem.h"
#include "base/fileio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { READ_BUF = 64 * 1024 };

typedef struct ggml_type_info {
    const char *name;
    uint32_t block;  /* elements per block */
    uint32_t bytes;  /* bytes per block */
} ggml_type_info;

/* The ggml types whose sizes snug knows (from ggml's type traits). */
static const ggml_type_info g_ggml_types[] = {
    [0] = {"F32", 1, 4},       [1] = {"F16", 1, 2},       [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},    [6] = {"Q5_0", 32, 22},    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},    [9] = {"Q8_1", 32, 36},    [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110}, [12] = {"Q4_K", 256, 144}, [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210}, [15] = {"Q8_K", 256, 292}, [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},      [26] = {"I32", 1, 4},      [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},      [30] = {"BF16", 1, 2},
};

/* ggml's names of the types snug does not know the layout of (for
 * messages): the i-quants, ternary and FP4 formats. */
static const char *const g_ggml_other_names[] = {
    [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL",
    [21] = "IQ3_S",   [22] = "IQ2_S",  [23] = "IQ4_XS",  [29] = "IQ1_M", [34] = "TQ1_0",
    [35] = "TQ2_0",   [39] = "MXFP4",
};

const char *snug_ggml_type_name(uint32_t type)
{
    if (type < SNUG_ARRAY_LEN(g_ggml_types) && g_ggml_types[type].name)
        return g_ggml_types[type].name;
    if (type < SNUG_ARRAY_LEN(g_ggml_other_names) && g_ggml_other_names[type])
        return g_ggml_other_names[type];
    return "unknown";
}

static const size_t g_scalar_size[SNUG_GGUF_N_TYPES] = {
    [SNUG_GGUF_UINT8] = 1, [SNUG_GGUF_INT8] = 1,    [SNUG_GGUF_UINT16] = 2,
    [SNUG_GGUF_INT16] = 2, [SNUG_GGUF_UINT32] = 4,  [SNUG_GGUF_INT32] = 4,
    [SNUG_GGUF_FLOAT32] = 4, [SNUG_GGUF_BOOL] = 1,  [SNUG_GGUF_UINT64] = 8,
    [SNUG_GGUF_INT64] = 8, [SNUG_GGUF_FLOAT64] = 8,
};

static const char *gguf_type_name(snug_gguf_type t)
{
    static const char *const names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32",
                                        "float32", "bool", "string", "array", "uint64", "int64",
                                        "float64"};
    return t < SNUG_GGUF_N_TYPES ? names[t] : "unknown";
}

/* A bounds-checked sequential reader over the file. */
typedef struct reader {
    int fd;
    const char *path;
    uint64_t size;
    uint64_t pos;
    uint64_t buf_off;
    size_t buf_len;
    unsigned char buf[READ_BUF];
} reader;

static snug_status truncated(const reader *r, uint64_t need, const char *what, snug_error *err)
{
    return snug_errorf(err, SNUG_FORMAT, "%s: %s needs %llu bytes at offset %llu but the file "
                       "has %llu (truncated or a wrong length)", r->path, what,
                       (unsigned long long)need, (unsigned long long)r->pos,
                       (unsigned long long)r->size);
}

static snug_status rd(reader *r, void *dst, uint64_t n, const char *what, snug_error *err)
{
    if (n > r->size - r->pos) return truncated(r, n, what, err);
    unsigned char *d = dst;
    while (n > 0) {
        if (r->pos < r->buf_off || r->pos >= r->buf_off + r->buf_len) {
            size_t want = (size_t)SNUG_MIN((uint64_t)READ_BUF, r->size - r->pos);
            snug_status st = snug_pread_full(r->fd, r->buf, want, r->pos, r->path, err);
            if (st != SNUG_OK) return st;
            r->buf_off = r->pos;
            r->buf_len = want;
        }
        size_t at = (size_t)(r->pos - r->buf_off);
        size_t k = (size_t)SNUG_MIN(n, (uint64_t)(r->buf_len - at));
        if (d) {
            memcpy(d, r->buf + at, k);
            d += k;
        }
        r->pos += k;
        n -= k;
    }
    return SNUG_OK;
}

static snug_status skip(reader *r, uint64_t n, const char *what, snug_error *err)
{
    if (n > r->size - r->pos) return truncated(r, n, what, err);
    r->pos += n;
    return SNUG_OK;
}

static snug_status rd_u32(reader *r, uint32_t *v, const char *what, snug_error *err)
{
    unsigned char b[4];
    snug_status st = rd(r, b, 4, what, err);
    if (st == SNUG_OK) *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return st;
}

static snug_status rd_u64(reader *r, uint64_t *v, const char *what, snug_error *err)
{
    unsigned char b[8];
    snug_status st = rd(r, b, 8, what, err);
    if (st != SNUG_OK) return st;
    *v = 0;
    for (int i = 7; i >= 0; i--) *v = (*v << 8) | b[i];
    return SNUG_OK;
}

/* A string pool that grows; strings are referred to by offset until the
 * parse ends, then by pointer. */
typedef struct pool {
    char *data;
    size_t len, cap;
} pool;

static snug_status pool_add(pool *p, uint64_t n, uint64_t *off, const char *path, snug_error *err)
{
    if (p->len + n + 1 > p->cap) {
        size_t cap = SNUG_MAX(p->cap * 2, (size_t)(p->len + n + 1));
        cap = SNUG_MAX(cap, (size_t)4096);
        char *d = snug_mem_alloc(SNUG_MEM_OTHER, cap, err);
        if (!d) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", path);
        if (p->len) memcpy(d, p->data, p->len);
        snug_mem_free(p->data);
        p->data = d;
        p->cap = cap;
    }
    *off = p->len;
    p->len += n + 1;
    p->data[p->len - 1] = '\0';
    return SNUG_OK;
}

/* Reads a GGUF string (u64 length + bytes, at most max) into the pool. */
static snug_status rd_string(reader *r, pool *p, uint64_t max, const char *what, uint64_t *off,
                             uint64_t *len, snug_error *err)
{
    uint64_t n;
    snug_status st = rd_u64(r, &n, what, err);
    if (st != SNUG_OK) return st;
    if (n > max)
        return snug_errorf(err, SNUG_FORMAT, "%s: %s is %llu bytes long; at most %llu are "
                           "accepted", r->path, what, (unsigned long long)n, (unsigned long long)max);
    if (n > r->size - r->pos) return truncated(r, n, what, err);
    st = pool_add(p, n, off, r->path, err);
    if (st == SNUG_OK) st = rd(r, p->data + *off, n, what, err);
    if (st != SNUG_OK) return st;
    if (memchr(p->data + *off, '\0', (size_t)n))
        return snug_errorf(err, SNUG_FORMAT, "%s: %s contains a NUL byte", r->path, what);
    if (len) *len = n;
    return SNUG_OK;
}

/* Reads a scalar value of type t into kv; key_shown: its key as messages
 * show it (snug_str_shown). */
static snug_status rd_scalar(reader *r, snug_gguf_type t, snug_gguf_kv *kv, const char *key_shown,
                             snug_error *err)
{
    unsigned char b[8] = {0};
    size_t n = g_scalar_size[t];
    snug_status st = rd(r, b, n, "a value", err);
    if (st != SNUG_OK) return snug_error_context(err, st, r->path, "key '%s': ", key_shown);
    uint64_t u = 0;
    for (int i = (int)n - 1; i >= 0; i--) u = (u << 8) | b[i];
    switch (t) {
    case SNUG_GGUF_INT8: kv->v.i = (int8_t)u; break;
    case SNUG_GGUF_INT16: kv->v.i = (int16_t)u; break;
    case SNUG_GGUF_INT32: kv->v.i = (int32_t)u; break;
    case SNUG_GGUF_INT64: kv->v.i = (int64_t)u; break;
    case SNUG_GGUF_FLOAT32: {
        float f;
        uint32_t w = (uint32_t)u;
        memcpy(&f, &w, 4);
        kv->v.f = f;
        break;
    }
    case SNUG_GGUF_FLOAT64: memcpy(&kv->v.f, &u, 8); break;
    case SNUG_GGUF_BOOL:
        if (u > 1)
            return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': bool value %llu is neither "
                               "0 nor 1", r->path, key_shown, (unsigned long long)u);
        kv->v.u = u;
        break;
    default: kv->v.u = u; break;
    }
    return SNUG_OK;
}

/* Reads (and checks) an array value: element type, count, elements.
 * key_shown: its key as messages show it (snug_str_shown). */
static snug_status rd_array(reader *r, snug_gguf_kv *kv, const char *key_shown, snug_error *err)
{
    uint32_t et;
    uint64_t n;
    snug_status st = rd_u32(r, &et, "an array type", err);
    if (st == SNUG_OK) st = rd_u64(r, &n, "an array length", err);
    if (st != SNUG_OK) return snug_error_context(err, st, r->path, "key '%s': ", key_shown);
    if (et >= SNUG_GGUF_N_TYPES || et == SNUG_GGUF_ARRAY)
        return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': array element type %u is %s",
                           r->path, key_shown, et, et == SNUG_GGUF_ARRAY ? "a nested array (not "
                           "supported)" : "unknown");
    kv->v.arr.type = (snug_gguf_type)et;
    kv->v.arr.n = n;
    kv->v.arr.offset = r->pos;
    if (et != SNUG_GGUF_STRING) {
        uint64_t bytes;
        if (!snug_mul_u64(n, g_scalar_size[et], &bytes) || bytes > r->size - r->pos)
            return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': array of %llu elements runs "
                               "past the end of the file", r->path, key_shown, (unsigned long long)n);
        if (et == SNUG_GGUF_BOOL) {
            for (uint64_t i = 0; i < n; i++) {
                unsigned char b;
                st = rd(r, &b, 1, "an array element", err);
                if (st != SNUG_OK) return st;
                if (b > 1)
                    return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': bool element %llu "
                                       "is %u, neither 0 nor 1", r->path, key_shown,
                                       (unsigned long long)i, b);
            }
            return SNUG_OK;
        }
        return skip(r, bytes, "an array", err);
    }
    if (n > (r->size - r->pos) / 8)
        return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': array of %llu strings runs past "
                           "the end of the file", r->path, key_shown, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        st = rd_u64(r, &len, "a string length", err);
        if (st == SNUG_OK && len > r->size - r->pos) st = truncated(r, len, "a string", err);
        if (st == SNUG_OK) st = skip(r, len, "a string", err);
        if (st != SNUG_OK)
            return snug_error_context(err, st, r->path, "key '%s': element %llu: ", key_shown, (unsigned long long)i);
    }
    return SNUG_OK;
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(((const snug_gguf_kv *)a)->key, ((const snug_gguf_kv *)b)->key);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const snug_gguf_tensor *const *)a)[0]->name,
                  ((const snug_gguf_tensor *const *)b)[0]->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const snug_gguf_tensor *x = *(const snug_gguf_tensor *const *)a;
    const snug_gguf_tensor *y = *(const snug_gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static snug_status rd_kvs(reader *r, pool *p, snug_gguf_file *f, snug_error *err)
{
    for (int64_t i = 0; i < f->n_kv; i++) {
        snug_gguf_kv *kv = &f->kv[i];
        uint64_t koff, klen;
        snug_status st = rd_string(r, p, SNUG_GGUF_MAX_KEY_BYTES, "a key", &koff, &klen, err);
        if (st != SNUG_OK) return snug_error_context(err, st, r->path, "key %lld: ", (long long)i);
        if (klen == 0) return snug_errorf(err, SNUG_FORMAT, "%s: key %lld is empty", r->path, (long long)i);
        kv->key = (const char *)(uintptr_t)koff;
        char key[SNUG_SHOWN_MAX]; /* as messages show it: file bytes, escaped */
        snug_str_shown(p->data + koff, key, sizeof key);
        uint32_t t;
        st = rd_u32(r, &t, "a value type", err);
        if (st != SNUG_OK) return snug_error_context(err, st, r->path, "key '%s': ", key);
        if (t >= SNUG_GGUF_N_TYPES)
            return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': value type %u is unknown",
                               r->path, key, t);
        kv->type = (snug_gguf_type)t;
        if (t == SNUG_GGUF_STRING) {
            uint64_t soff, slen;
            st = rd_string(r, p, UINT64_MAX, "a string value", &soff, &slen, err);
            if (st != SNUG_OK) return snug_error_context(err, st, r->path, "key '%s': ", key);
            kv->v.str.s = (const char *)(uintptr_t)soff;
            kv->v.str.len = slen;
        } else if (t == SNUG_GGUF_ARRAY) {
            st = rd_array(r, kv, key, err);
        } else {
            st = rd_scalar(r, (snug_gguf_type)t, kv, key, err);
        }
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

static snug_status rd_tensor_infos(reader *r, pool *p, snug_gguf_file *f, snug_error *err)
{
    for (int64_t i = 0; i < f->n_tensors; i++) {
        snug_gguf_tensor *t = &f->tensors[i];
        uint64_t noff, nlen;
        snug_status st = rd_string(r, p, SNUG_GGUF_MAX_NAME_BYTES, "a tensor name", &noff, &nlen, err);
        if (st != SNUG_OK) return snug_error_context(err, st, r->path, "tensor %lld: ", (long long)i);
        if (nlen == 0)
            return snug_errorf(err, SNUG_FORMAT, "%s: tensor %lld has an empty name", r->path,
                               (long long)i);
        t->name = (const char *)(uintptr_t)noff;
        char name[SNUG_SHOWN_MAX]; /* as messages show it: file bytes, escaped */
        snug_str_shown(p->data + noff, name, sizeof name);
        st = rd_u32(r, &t->n_dims, "a dimension count", err);
        if (st != SNUG_OK) return snug_error_context(err, st, r->path, "tensor '%s': ", name);
        if (t->n_dims < 1 || t->n_dims > SNUG_GGUF_MAX_DIMS)
            return snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s': %u dimensions; expected "
                               "1 to %d", r->path, name, t->n_dims, SNUG_GGUF_MAX_DIMS);
        uint64_t numel = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            st = rd_u64(r, &t->ne[d], "a dimension", err);
            if (st != SNUG_OK) return snug_error_context(err, st, r->path, "tensor '%s': ", name);
            if (t->ne[d] > (uint64_t)INT64_MAX || !snug_mul_u64(numel, t->ne[d], &numel) ||
                numel > (uint64_t)INT64_MAX)
                return snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s': element count "
                                   "overflows", r->path, name);
        }
        for (uint32_t d = t->n_dims; d < SNUG_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        st = rd_u32(r, &t->type, "an element type", err);
        if (st == SNUG_OK) st = rd_u64(r, &t->offset, "a data offset", err);
        if (st != SNUG_OK) return snug_error_context(err, st, r->path, "tensor '%s': ", name);
        if (t->type >= SNUG_ARRAY_LEN(g_ggml_types) || !g_ggml_types[t->type].name)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s': ggml type %u (%s) is not "
                               "one snug reads; it reads " SNUG_GGUF_MODEL_TYPES, r->path, name, t->type,
                               snug_ggml_type_name(t->type));
        const ggml_type_info *ti = &g_ggml_types[t->type];
        if (t->ne[0] % ti->block != 0)
            return snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s': first dimension %llu is "
                               "not a multiple of the %s block size %u", r->path, name,
                               (unsigned long long)t->ne[0], ti->name, ti->block);
        if (!snug_mul_u64(numel / ti->block, ti->bytes, &t->bytes))
            return snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s': byte size overflows",
                               r->path, name);
    }
    return SNUG_OK;
}

/* Builds the by-name table and checks tensor names unique and the data
 * ranges aligned, inside the file and apart. */
static snug_status check_layout(snug_gguf_file *f, snug_error *err)
{
    snug_status st = SNUG_OK;
    char shown[SNUG_SHOWN_MAX];
    int64_t n = f->n_tensors;
    size_t bytes = (size_t)SNUG_MAX(n, 1) * sizeof *f->by_name;
    f->by_name = snug_mem_alloc(SNUG_MEM_OTHER, bytes, err);
    const snug_gguf_tensor **by = snug_mem_alloc(SNUG_MEM_OTHER, bytes, err);
    if (!f->by_name || !by) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", f->path);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, (size_t)n, sizeof *f->by_name, cmp_tensor_name);
    for (int64_t i = 1; i < n; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s' appears twice", f->path,
                             snug_str_shown(f->by_name[i]->name, shown, sizeof shown));
            goto done;
        }
    memcpy(by, f->by_name, (size_t)n * sizeof *by);
    qsort(by, (size_t)n, sizeof *by, cmp_tensor_offset);
    uint64_t data_bytes = f->file_size - f->data_start, end = 0;
    for (int64_t i = 0; i < n; i++) {
        const snug_gguf_tensor *t = by[i];
        const char *name = snug_str_shown(t->name, shown, sizeof shown); /* for messages */
        uint64_t last;
        if (t->offset % f->alignment != 0) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s': data offset %llu is not a "
                             "multiple of the alignment %llu", f->path, name,
                             (unsigned long long)t->offset, (unsigned long long)f->alignment);
            goto done;
        }
        if (!snug_add_u64(t->offset, t->bytes, &last) || last > data_bytes) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s': data [%llu, +%llu) runs past "
                             "the end of the file (%llu bytes of data)", f->path, name,
                             (unsigned long long)t->offset, (unsigned long long)t->bytes,
                             (unsigned long long)data_bytes);
            goto done;
        }
        if (t->offset < end) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s': data at %llu overlaps the "
                             "previous tensor, which ends at %llu", f->path, name,
                             (unsigned long long)t->offset, (unsigned long long)end);
            goto done;
        }
        end = last;
    }
done:
    snug_mem_free((void *)by);
    return st;
}

static snug_status parse(reader *r, snug_gguf_file *f, snug_error *err)
{
    pool p = {0};
    unsigned char magic[4];
    uint64_t n_tensors, n_kv;
    snug_status st;
    if (r->size < 24) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: file is %llu bytes; a GGUF header needs 24",
                         r->path, (unsigned long long)r->size);
        goto done;
    }
    st = rd(r, magic, 4, "the magic", err);
    if (st == SNUG_OK && memcmp(magic, "GGUF", 4) != 0)
        st = snug_errorf(err, SNUG_FORMAT, "%s: not a GGUF file (it does not start with "
                         "\"GGUF\")", r->path);
    if (st == SNUG_OK) st = rd_u32(r, &f->version, "the version", err);
    if (st == SNUG_OK && f->version != 2 && f->version != 3)
        st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: GGUF version %u; snug reads versions 2 "
                         "and 3", r->path, f->version);
    if (st == SNUG_OK) st = rd_u64(r, &n_tensors, "the tensor count", err);
    if (st == SNUG_OK) st = rd_u64(r, &n_kv, "the key count", err);
    if (st != SNUG_OK) goto done;
    /* A key takes at least 13 bytes, a tensor info at least 28. */
    if (n_kv > SNUG_GGUF_MAX_COUNT || n_kv > (r->size - r->pos) / 13) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: key count %llu is more than the file can hold",
                         r->path, (unsigned long long)n_kv);
        goto done;
    }
    if (n_tensors > SNUG_GGUF_MAX_COUNT || n_tensors > (r->size - r->pos) / 28) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: tensor count %llu is more than the file can hold",
                         r->path, (unsigned long long)n_tensors);
        goto done;
    }
    f->n_kv = (int64_t)n_kv;
    f->n_tensors = (int64_t)n_tensors;
    f->kv = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_kv * sizeof *f->kv, err);
    f->tensors = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_tensors * sizeof *f->tensors, err);
    if (!f->kv || !f->tensors) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", r->path);
        goto done;
    }
    st = rd_kvs(r, &p, f, err);
    if (st == SNUG_OK) st = rd_tensor_infos(r, &p, f, err);
    if (st != SNUG_OK) goto done;
    /* Offsets become pointers now that the pool no longer moves. */
    f->strings = p.data;
    p.data = NULL;
    for (int64_t i = 0; i < f->n_kv; i++) {
        f->kv[i].key = f->strings + (uintptr_t)f->kv[i].key;
        if (f->kv[i].type == SNUG_GGUF_STRING)
            f->kv[i].v.str.s = f->strings + (uintptr_t)f->kv[i].v.str.s;
    }
    for (int64_t i = 0; i < f->n_tensors; i++)
        f->tensors[i].name = f->strings + (uintptr_t)f->tensors[i].name;

    /* Keys must be unique (checked on a sorted copy; the file order stays). */
    snug_gguf_kv *sorted = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)SNUG_MAX(f->n_kv, 1) * sizeof *sorted, err);
    if (!sorted) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", r->path);
        goto done;
    }
    memcpy(sorted, f->kv, (size_t)f->n_kv * sizeof *sorted);
    qsort(sorted, (size_t)f->n_kv, sizeof *sorted, cmp_kv);
    char shown[SNUG_SHOWN_MAX];
    for (int64_t i = 1; i < f->n_kv && st == SNUG_OK; i++)
        if (strcmp(sorted[i - 1].key, sorted[i].key) == 0)
            st = snug_errorf(err, SNUG_FORMAT, "%s: key '%s' appears twice", r->path,
                             snug_str_shown(sorted[i].key, shown, sizeof shown));
    snug_mem_free(sorted);
    if (st != SNUG_OK) goto done;

    f->alignment = 32;
    const snug_gguf_kv *al = snug_gguf_find(f, "general.alignment");
    if (al) {
        if (al->type != SNUG_GGUF_UINT32) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: key 'general.alignment' must be a uint32, "
                             "found a %s", r->path, gguf_type_name(al->type));
            goto done;
        }
        if (al->v.u == 0 || (al->v.u & (al->v.u - 1)) != 0) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: key 'general.alignment' must be a power of "
                             "two, found %llu", r->path, (unsigned long long)al->v.u);
            goto done;
        }
        f->alignment = al->v.u;
    }
    uint64_t start = snug_round_up(r->pos, f->alignment);
    /* a vocabulary-only file (llama.cpp writes them) may end with its metadata */
    if (start > r->size && f->n_tensors == 0) start = r->size;
    if (start > r->size) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: the data section would start at %llu, past the "
                         "end of the file (%llu bytes)", r->path, (unsigned long long)start,
                         (unsigned long long)r->size);
        goto done;
    }
    f->data_start = start;
    st = check_layout(f, err);
done:
    snug_mem_free(p.data);
    return st;
}

snug_status snug_gguf_open_fd(int fd, const char *name, snug_gguf_file **out, snug_error *err)
{
    snug_status st;
    reader *r = NULL;
    snug_gguf_file *f = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *f, err);
    if (!f) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", name);
    f->fd = fd;
    st = snug_file_adopt(fd, name, &f->path, &f->file_size, err);
    if (st != SNUG_OK) goto fail;
    r = snug_mem_alloc(SNUG_MEM_STAGING, sizeof *r, err);
    if (!r) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", name);
        goto fail;
    }
    r->fd = fd;
    r->path = f->path;
    r->size = f->file_size;
    st = parse(r, f, err);
    if (st != SNUG_OK) goto fail;
    snug_mem_free(r);
    *out = f;
    return SNUG_OK;
fail:
    snug_mem_free(r);
    snug_gguf_close(f);
    return st;
}

/* As snug_st_open: open, parse the descriptor, own it (see the comment
 * there for why the two are not one function). */
snug_status snug_gguf_open(const char *path, snug_gguf_file **out, snug_error *err)
{
    int fd;
    uint64_t size;
    snug_status st = snug_file_open_read(path, &fd, &size, err);
    if (st != SNUG_OK) return st;
    st = snug_gguf_open_fd(fd, path, out, err);
    if (st != SNUG_OK) {
        close(fd);
        return st;
    }
    (*out)->owns_fd = true;
    return SNUG_OK;
}

void snug_gguf_close(snug_gguf_file *f)
{
    if (!f) return;
    if (f->owns_fd) close(f->fd);
    snug_mem_free(f->kv);
    snug_mem_free(f->tensors);
    snug_mem_free((void *)f->by_name);
    snug_mem_free(f->strings);
    snug_mem_free(f->path);
    snug_mem_free(f);
}

const snug_gguf_kv *snug_gguf_find(const snug_gguf_file *f, const char *key)
{
    for (int64_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kv[i].key, key) == 0) return &f->kv[i];
    return NULL;
}

const snug_gguf_tensor *snug_gguf_find_tensor(const snug_gguf_file *f, const char *name)
{
    int64_t lo = 0, hi = f->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Finds key; reports absence per `required`. Returns NULL when absent. */
static const snug_gguf_kv *lookup(const snug_gguf_file *f, const char *key, bool required,
                                  bool *present, snug_status *st, snug_error *err)
{
    const snug_gguf_kv *kv = snug_gguf_find(f, key);
    if (present) *present = kv != NULL;
    *st = SNUG_OK;
    if (!kv && required)
        *st = snug_errorf(err, SNUG_FORMAT, "%s: key '%s' is missing", f->path, key);
    return kv;
}

snug_status snug_gguf_get_int(const snug_gguf_file *f, const char *key, bool required,
                              int64_t lo, int64_t hi, int64_t *out, bool *present,
                              snug_error *err)
{
    snug_status st;
    const snug_gguf_kv *kv = lookup(f, key, required, present, &st, err);
    if (!kv) return st;
    bool is_signed = kv->type == SNUG_GGUF_INT8 || kv->type == SNUG_GGUF_INT16 ||
                     kv->type == SNUG_GGUF_INT32 || kv->type == SNUG_GGUF_INT64;
    bool is_unsigned = kv->type == SNUG_GGUF_UINT8 || kv->type == SNUG_GGUF_UINT16 ||
                       kv->type == SNUG_GGUF_UINT32 || kv->type == SNUG_GGUF_UINT64;
    if (!is_signed && !is_unsigned)
        return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': expected an integer, found a %s",
                           f->path, key, gguf_type_name(kv->type));
    bool in = is_signed ? kv->v.i >= lo && kv->v.i <= hi
                        : kv->v.u <= (uint64_t)INT64_MAX && (int64_t)kv->v.u >= lo &&
                              (int64_t)kv->v.u <= hi;
    if (!in)
        return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': %lld is outside [%lld, %lld]",
                           f->path, key, is_signed ? (long long)kv->v.i : (long long)kv->v.u,
                           (long long)lo, (long long)hi);
    *out = is_signed ? kv->v.i : (int64_t)kv->v.u;
    return SNUG_OK;
}

snug_status snug_gguf_get_float(const snug_gguf_file *f, const char *key, bool required,
                                double lo, double hi, double *out, bool *present,
                                snug_error *err)
{
    snug_status st;
    const snug_gguf_kv *kv = lookup(f, key, required, present, &st, err);
    if (!kv) return st;
    if (kv->type != SNUG_GGUF_FLOAT32 && kv->type != SNUG_GGUF_FLOAT64)
        return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': expected a float, found a %s",
                           f->path, key, gguf_type_name(kv->type));
    if (!(kv->v.f >= lo && kv->v.f <= hi))
        return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': %g is outside [%g, %g]", f->path,
                           key, kv->v.f, lo, hi);
    *out = kv->v.f;
    return SNUG_OK;
}

snug_status snug_gguf_get_string(const snug_gguf_file *f, const char *key, bool required,
                                 const char **out, bool *present, snug_error *err)
{
    snug_status st;
    const snug_gguf_kv *kv = lookup(f, key, required, present, &st, err);
    if (!kv) return st;
    if (kv->type != SNUG_GGUF_STRING)
        return snug_errorf(err, SNUG_FORMAT, "%s: key '%s': expected a string, found a %s",
                           f->path, key, gguf_type_name(kv->type));
    *out = kv->v.str.s;
    return SNUG_OK;
}
