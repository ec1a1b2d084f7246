/*
 * to_gguf.c: a Hugging Face model directory written as a GGUF file.
 */
#include "to_gguf.h"

#include "base/dtype.h"
#include "base/fileio.h"
#include "base/mem.h"
#include "convert.h"
#include "formats/checkpoint.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_writer.h"
#include "formats/pooling.h"
#include "model/params.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { ALIGNMENT = 32, STAGING_BYTES = 16 << 20, EXTRA_TENSORS = 2 };

/* One tensor of the file: a checkpoint tensor's bytes, or values the
 * converter computed (the rope factors). */
typedef struct out_tensor {
    char name[SNUG_PARAM_NAME_BYTES];   /* the GGUF name */
    const snug_st_tensor *src;          /* NULL: values */
    const snug_st_file *file;
    const float *values;
    uint32_t type, n_dims;
    uint64_t ne[2];                     /* innermost first */
    uint64_t bytes, offset;
    int64_t head_rows;                  /* > 0: rows permuted into interleaved pairs, per head of this many */
    bool plus_one;                      /* an RMSNorm weight held as w, the norm multiplying by 1 + w
                                         * (Gemma): written F32 as 1 + w, as llama.cpp stores it */
} out_tensor;

typedef struct to_gguf {
    const snug_checkpoint *ck;
    const snug_arch_info *fam;
    out_tensor *t;
    int32_t n;
    float rope_freqs[SNUG_MAX_ROPE_FACTORS];
    snug_pooling_info pooling;  /* an embedding model's (its {arch}.pooling_type) */
    snug_tokenizer *tok;        /* the directory's, where GGUF can hold it; else NULL */
} to_gguf;

/* The GGUF type of a float dtype; 0 with *ok false for any other. */
static uint32_t ggml_type_of(snug_dtype dt, bool *ok)
{
    *ok = true;
    if (dt == SNUG_DTYPE_F32) return SNUG_GGML_F32;
    if (dt == SNUG_DTYPE_F16) return SNUG_GGML_F16;
    if (dt == SNUG_DTYPE_BF16) return SNUG_GGML_BF16;
    *ok = false;
    return 0;
}

/* Appends a tensor of values (F32, n of them). */
static void add_values(to_gguf *g, const char *name, const float *values, int32_t n)
{
    out_tensor *o = &g->t[g->n++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", name);
    o->values = values;
    o->type = SNUG_GGML_F32;
    o->n_dims = 1;
    o->ne[0] = (uint64_t)n;
    o->ne[1] = 1;
    o->bytes = 4 * (uint64_t)n;
}

/* Whether checkpoint tensor name holds rows that rope turns: q_proj's and
 * k_proj's weight or bias. */
static bool rotary_rows(const char *name)
{
    return strstr(name, "self_attn.q_proj.") != NULL || strstr(name, "self_attn.k_proj.") != NULL;
}

/* Lists the file's tensors: every checkpoint tensor the model uses (under
 * its GGUF name, each of a float type), then the rope factors. */
static snug_status list_tensors(to_gguf *g, snug_error *err)
{
    const snug_checkpoint *ck = g->ck;
    const snug_model_config *c = &ck->config;
    char shown[SNUG_SHOWN_MAX];
    char text_buf[1100];
    for (int64_t i = 0; i < ck->n_tensors; i++) {
        const snug_st_tensor *t = ck->entries[i].tensor;
        const char *text_name = snug_checkpoint_text_name(ck, t->name, text_buf, sizeof text_buf);
        if (!text_name) continue; /* a multimodal checkpoint's vision tower: the file holds the text model */
        size_t len = strlen(text_name);
        if ((len >= 19 && strcmp(text_name + len - 19, "rotary_emb.inv_freq") == 0) ||
            (c->tie_word_embeddings && strcmp(text_name, "lm_head.weight") == 0))
            continue; /* what the loader ignores too */
        out_tensor *o = &g->t[g->n];
        memset(o, 0, sizeof *o);
        bool ok;
        o->type = ggml_type_of(t->dtype, &ok);
        if (!snug_gguf_tensor_name(c->arch, text_name, o->name, sizeof o->name))
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s' has no GGUF name in a %s model", ck->dir,
                               snug_str_shown(t->name, shown, sizeof shown), snug_gguf_arch_name(c->arch));
        if (!ok || t->n_dims < 1 || t->n_dims > 2)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s' is %s of %d dimensions; snug writes GGUF "
                               "from F32, F16 or BF16 matrices and vectors", ck->dir, o->name,
                               snug_dtype_name(t->dtype), t->n_dims);
        o->src = t;
        o->file = ck->files[ck->entries[i].file];
        o->n_dims = (uint32_t)t->n_dims;
        o->ne[0] = (uint64_t)(t->n_dims == 2 ? t->shape[1] : t->shape[0]);
        o->ne[1] = t->n_dims == 2 ? (uint64_t)t->shape[0] : 1;
        o->bytes = t->end - t->begin;
        if (g->fam->gguf_interleaved && rotary_rows(text_name))
            o->head_rows = c->head_dim;
        if (c->norm_plus_one && t->n_dims == 1 && snug_params_is_norm(text_name)) {
            o->plus_one = true;
            o->type = SNUG_GGML_F32;
            o->bytes = 4 * o->ne[0];
        }
        g->n++;
    }
    const snug_rope_scaling *rs = &c->rope_scaling;
    if (rs->type == SNUG_ROPE_LLAMA3) {
        snug_gguf_llama3_factors(c, g->rope_freqs);
        add_values(g, "rope_freqs.weight", g->rope_freqs, snug_config_rot_dims(c) / 2);
    } else if (rs->type == SNUG_ROPE_LONGROPE) {
        add_values(g, "rope_factors_long.weight", rs->long_factor, rs->n_factors);
        add_values(g, "rope_factors_short.weight", rs->short_factor, rs->n_factors);
    }
    uint64_t off = 0;
    for (int32_t i = 0; i < g->n; i++) {
        g->t[i].offset = off;
        off += snug_round_up(g->t[i].bytes, ALIGNMENT);
    }
    return SNUG_OK;
}

/* Builds (or, with h->p NULL, measures) the whole header. */
static snug_status build_header(const to_gguf *g, snug_gguf_header *h, uint64_t n_kv, snug_error *err)
{
    const snug_model_config *c = &g->ck->config;
    snug_gguf_put_start(h, (uint64_t)g->n, n_kv);
    snug_gguf_model_keys(h, c, ALIGNMENT);
    if (g->tok) {
        snug_status st = snug_tokenizer_put_gguf(g->tok, h, c->bos_token_id < 0, c->n_eos == 0, err);
        if (st != SNUG_OK) return st;
    }
    if (g->pooling.type != SNUG_POOL_NONE) { /* an embedding model's, as llama.cpp's converter writes it */
        char key[96];
        snprintf(key, sizeof key, "%s.pooling_type", snug_gguf_arch_name(g->ck->config.arch));
        snug_gguf_put_u32(h, key, (uint32_t)g->pooling.type);
    }
    for (int32_t i = 0; i < g->n; i++)
        snug_gguf_put_tensor(h, g->t[i].name, g->t[i].n_dims, g->t[i].ne, g->t[i].type, g->t[i].offset);
    snug_gguf_put_pad(h, ALIGNMENT);
    return SNUG_OK;
}

/* Writes tensor o's data at file offset `at`, through the two staging
 * buffers of STAGING_BYTES. */
static snug_status write_tensor(const out_tensor *o, int fd, const char *path, uint64_t at, unsigned char *a,
                                unsigned char *b, snug_error *err)
{
    if (o->values) return snug_pwrite_full(fd, o->values, (size_t)o->bytes, at, path, err);
    if (o->plus_one) { /* a norm: its values to F32, 1 added (a vector: within the staging) */
        size_t n = (size_t)o->ne[0];
        if (n * sizeof(float) > STAGING_BYTES)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s': %zu values do not fit the staging", path,
                               o->name, n);
        snug_status st = snug_st_read(o->file, o->src, 0, a, (size_t)(o->src->end - o->src->begin), err);
        if (st != SNUG_OK) return st;
        float *v = (float *)(void *)b;
        snug_convert(v, SNUG_DTYPE_F32, a, o->src->dtype, n);
        for (size_t e = 0; e < n; e++) v[e] += 1.0f;
        return snug_pwrite_full(fd, v, n * sizeof(float), at, path, err);
    }
    /* a bias's values are its rows when they are permuted */
    int64_t n_rows = o->n_dims == 2 ? (int64_t)o->ne[1] : o->head_rows > 0 ? (int64_t)o->ne[0] : 1;
    size_t row_bytes = (size_t)(o->bytes / (uint64_t)n_rows);
    int64_t step_rows = o->head_rows > 0 ? o->head_rows : (int64_t)SNUG_MAX((size_t)1, STAGING_BYTES / row_bytes);
    if ((size_t)step_rows * row_bytes > STAGING_BYTES)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s': a head of %lld rows of %zu bytes is more than "
                           "the %d bytes of staging", path, o->name, (long long)step_rows, row_bytes, STAGING_BYTES);
    snug_status st = SNUG_OK;
    for (int64_t r = 0; st == SNUG_OK && r < n_rows; r += step_rows) {
        int64_t n = SNUG_MIN(step_rows, n_rows - r);
        size_t bytes = (size_t)n * row_bytes;
        st = snug_st_read(o->file, o->src, (uint64_t)r * row_bytes, a, bytes, err);
        if (st == SNUG_OK && o->head_rows > 0) snug_rotary_rows_permute(a, b, n, o->head_rows, row_bytes, true);
        if (st == SNUG_OK) st = snug_pwrite_full(fd, o->head_rows > 0 ? b : a, bytes, at + (uint64_t)r * row_bytes, path, err);
    }
    return st;
}

/* Writes g's header and data to the new file path. */
static snug_status write_file(const to_gguf *g, const char *path, snug_error *err)
{
    snug_gguf_header h = {0};
    snug_status st = build_header(g, &h, 0, err);
    if (st != SNUG_OK) return st;
    uint64_t n_kv = h.n_kv;
    h = (snug_gguf_header){.cap = h.len};
    h.p = snug_mem_alloc(SNUG_MEM_STAGING, h.cap, err);
    unsigned char *a = h.p ? snug_mem_alloc(SNUG_MEM_STAGING, STAGING_BYTES, err) : NULL;
    unsigned char *b = a ? snug_mem_alloc(SNUG_MEM_STAGING, STAGING_BYTES, err) : NULL;
    int fd = -1;
    st = b ? snug_file_create(path, &fd, err) : snug_error_prefix(err, SNUG_NOMEM, "%s: ", path);
    if (st == SNUG_OK) st = build_header(g, &h, n_kv, err);
    if (st == SNUG_OK) st = snug_pwrite_full(fd, h.p, h.len, 0, path, err);
    for (int32_t i = 0; st == SNUG_OK && i < g->n; i++) st = write_tensor(&g->t[i], fd, path, h.len + g->t[i].offset, a, b, err);
    if (fd >= 0) {
        snug_status cs = snug_file_close(fd, path, st == SNUG_OK ? err : NULL);
        if (st == SNUG_OK) st = cs;
        if (st != SNUG_OK) unlink(path);
    }
    snug_mem_free(b);
    snug_mem_free(a);
    snug_mem_free(h.p);
    return st;
}

/* The tokenizer of dir into g->tok where GGUF can hold it; else the
 * reason into info. */
static void take_tokenizer(to_gguf *g, const char *dir, snug_to_gguf_info *info)
{
    snug_error e = {0};
    snug_tokenizer *tok = NULL;
    snug_status st = snug_tokenizer_load(dir, &tok, &e);
    if (st == SNUG_OK) {
        snug_gguf_header m = {0}; /* measured only: the writer refuses before it puts a key */
        st = snug_tokenizer_put_gguf(tok, &m, false, false, &e);
    }
    if (st != SNUG_OK) {
        snug_tokenizer_free(tok);
        tok = NULL;
        snprintf(info->why_not, sizeof info->why_not, "%.250s", e.msg);
    }
    g->tok = tok;
    info->vocab = tok != NULL;
}

snug_status snug_convert_to_gguf(const char *dir, const char *out_path, snug_to_gguf_info *info, snug_error *err)
{
    snug_to_gguf_info none;
    if (!info) info = &none;
    *info = (snug_to_gguf_info){0};
    snug_checkpoint *ck = NULL;
    to_gguf g = {0};
    snug_status st = snug_checkpoint_open(dir, &ck, err);
    if (st != SNUG_OK) return st;
    const snug_model_config *c = &ck->config;
    g.ck = ck;
    g.fam = snug_arch_get(c->arch);
    snug_rope_type rt = c->rope_scaling.type;
    if (ck->gguf)
        st = snug_errorf(err, SNUG_INVALID, "%s: already a GGUF file", dir);
    else if (rt != SNUG_ROPE_DEFAULT && rt != SNUG_ROPE_LINEAR && rt != SNUG_ROPE_LLAMA3 && rt != SNUG_ROPE_LONGROPE)
        st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: rope scaling '%s' has no GGUF form snug writes (default, "
                         "linear, llama3, longrope)", dir, snug_rope_type_name(rt));
    else if (c->sliding_window > 0 && g.fam->window != SNUG_WINDOW_NONE &&
             (g.fam->window != SNUG_WINDOW_PATTERN || snug_config_sliding_pattern(c) <= 0))
        st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: a sliding window of %lld %s has no GGUF key for %s", dir,
                         (long long)c->sliding_window,
                         g.fam->window == SNUG_WINDOW_PATTERN ? "on layers in no every-n-th pattern" : "",
                         snug_gguf_arch_name(c->arch));
    if (st == SNUG_OK && g.fam->window == SNUG_WINDOW_PATTERN &&
        c->query_pre_attn_scalar != snug_gguf_query_pre_attn_scalar(c))
        st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: query_pre_attn_scalar %g has no GGUF key: llama.cpp takes %g "
                         "for this shape", dir, c->query_pre_attn_scalar, snug_gguf_query_pre_attn_scalar(c));
    if (st == SNUG_OK) st = snug_pooling_read(dir, &g.pooling, err);
    if (st == SNUG_OK) {
        g.t = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)(ck->n_tensors + EXTRA_TENSORS) * sizeof *g.t, err);
        st = g.t ? list_tensors(&g, err) : snug_error_prefix(err, SNUG_NOMEM, "%s: ", dir);
    }
    if (st == SNUG_OK) take_tokenizer(&g, dir, info);
    if (st == SNUG_OK) st = write_file(&g, out_path, err);
    snug_tokenizer_free(g.tok);
    snug_mem_free(g.t);
    snug_checkpoint_close(ck);
    return st;
}
