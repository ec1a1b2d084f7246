/*
 * convert.c: llama2.c and GGUF imports. Each importer describes where every
 * Hugging Face tensor of the model lies in its file (a plan); one writer
 * then streams them into model.safetensors. The list of tensors and their
 * shapes comes from the parameter table, so an import always has exactly
 * the tensors the loader expects.
 */
#include "convert.h"

#include "formats/config.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "formats/gguf.h"
#include "base/json.h"
#include "model/params.h"
#include "formats/st_writer.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { STAGING_BYTES = 16 << 20 };

/* Where one Hugging Face tensor comes from. */
typedef struct plan_tensor {
    char name[SNUG_PARAM_NAME_BYTES];
    int32_t n_dims;
    int64_t rows, cols;     /* cols = 1 for vectors */
    snug_dtype dtype;       /* F32, F16 or BF16, as in the source */
    uint64_t offset;        /* file offset of its data */
    int32_t rope_heads;     /* > 0: permute rows of this many heads */
    bool minus_one;         /* an RMSNorm weight the source holds as 1 + w where the
                             * checkpoint holds w (Gemma's GGUF sums): F32, 1 taken off */
} plan_tensor;

typedef struct plan {
    snug_model_config cfg;
    bool interleaved;       /* the source's q and k rows rotate pairs (2i, 2i + 1): permuted */
    int fd;
    const char *path;
    int32_t n;
    plan_tensor *t;
} plan;

/* Fills the plan's tensor list (names, shapes, rope heads) with the
 * checkpoint tensors of its config; the importer then sets dtype and
 * offset. */
static snug_status plan_init(plan *p, snug_error *err)
{
    snug_tensor_spec *specs = NULL;
    int32_t n = 0;
    snug_status st = snug_params_checkpoint_tensors(&p->cfg, &specs, &n, err);
    if (st != SNUG_OK) return st;
    p->t = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n * sizeof *p->t, err);
    if (p->t) {
        p->n = n;
        for (int32_t k = 0; k < n; k++) {
            plan_tensor *pt = &p->t[k];
            memset(pt, 0, sizeof *pt);
            memcpy(pt->name, specs[k].name, sizeof pt->name);
            pt->n_dims = specs[k].n_dims;
            pt->rows = specs[k].rows;
            pt->cols = specs[k].cols;
            if (p->interleaved && strstr(pt->name, "q_proj.weight")) pt->rope_heads = p->cfg.n_heads;
            if (p->interleaved && strstr(pt->name, "k_proj.weight")) pt->rope_heads = p->cfg.n_kv_heads;
        }
    } else {
        st = SNUG_NOMEM;
    }
    snug_mem_free(specs);
    return st;
}

static plan_tensor *plan_find(plan *p, const char *name)
{
    for (int32_t i = 0; i < p->n; i++)
        if (strcmp(p->t[i].name, name) == 0) return &p->t[i];
    return NULL;
}

void snug_rotary_rows_permute(const unsigned char *src, unsigned char *dst, int64_t n_rows, int64_t head_dim,
                              size_t row_bytes, bool to_interleaved)
{
    int64_t half = head_dim / 2;
    for (int64_t h = 0; h < n_rows / head_dim; h++)
        for (int64_t p = 0; p < 2; p++)
            for (int64_t i = 0; i < half; i++) {
                size_t split = (size_t)(h * head_dim + p * half + i), pairs = (size_t)(h * head_dim + 2 * i + p);
                memcpy(dst + (to_interleaved ? pairs : split) * row_bytes,
                       src + (to_interleaved ? split : pairs) * row_bytes, row_bytes);
            }
}

/* Streams one tensor from the source file into the writer. */
static snug_status copy_tensor(const plan *p, int32_t i, const snug_st_writer *w,
                               unsigned char *a, unsigned char *b, snug_error *err)
{
    const plan_tensor *t = &p->t[i];
    size_t row_bytes = (size_t)t->cols * snug_dtype_size(t->dtype);
    if (row_bytes > STAGING_BYTES) /* the config limits keep rows within 16 MiB */
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s': a row of %zu bytes does "
                           "not fit the %d-byte staging buffer", p->path, t->name, row_bytes,
                           STAGING_BYTES);
    int64_t step = (int64_t)(STAGING_BYTES / row_bytes);
    if (t->rope_heads > 0) {
        int64_t hd = p->cfg.head_dim;
        step = SNUG_MAX(hd, step / hd * hd);
        if ((size_t)step * row_bytes > STAGING_BYTES)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s': one head's rows do not "
                               "fit the %d-byte staging buffer", p->path, t->name, STAGING_BYTES);
    }
    for (int64_t r0 = 0; r0 < t->rows; r0 += step) {
        int64_t n = SNUG_MIN(step, t->rows - r0);
        size_t bytes = (size_t)n * row_bytes;
        snug_status st = snug_pread_full(p->fd, a, bytes, t->offset + (uint64_t)r0 * row_bytes,
                                         p->path, err);
        if (st != SNUG_OK) return snug_error_context(err, st, p->path, "tensor '%s': ", t->name);
        const unsigned char *out = a;
        if (t->minus_one)
            for (size_t e = 0; e < bytes / sizeof(float); e++) {
                float v;
                memcpy(&v, a + e * sizeof v, sizeof v);
                v -= 1.0f;
                memcpy(a + e * sizeof v, &v, sizeof v);
            }
        if (t->rope_heads > 0) {
            snug_rotary_rows_permute(a, b, n, p->cfg.head_dim, row_bytes, false);
            out = b;
        }
        st = snug_st_writer_write(w, i, (uint64_t)r0 * row_bytes, out, bytes, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

/* Writes config.json and model.safetensors of a complete plan. */
static snug_status plan_write(const plan *p, const char *outdir, snug_error *err)
{
    char path[4096];
    snug_st_writer *w = NULL;
    unsigned char *a = NULL, *b = NULL;
    snug_st_out *outs = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)p->n * sizeof *outs, err);
    snug_status st = outs ? SNUG_OK : SNUG_NOMEM;
    for (int32_t i = 0; st == SNUG_OK && i < p->n; i++) {
        const plan_tensor *t = &p->t[i];
        outs[i] = (snug_st_out){.name = t->name, .dtype = t->dtype, .n_dims = t->n_dims,
                                .shape = {t->rows, t->cols}};
    }
    if (st == SNUG_OK) st = snug_path_join(path, sizeof path, outdir, "model.safetensors", err);
    if (st == SNUG_OK) st = snug_st_writer_create(path, outs, p->n, &w, err);
    if (st != SNUG_OK) goto done;
    a = snug_mem_alloc(SNUG_MEM_STAGING, STAGING_BYTES, err);
    b = snug_mem_alloc(SNUG_MEM_STAGING, STAGING_BYTES, err);
    if (!a || !b) st = SNUG_NOMEM;
    for (int32_t i = 0; st == SNUG_OK && i < p->n; i++) st = copy_tensor(p, i, w, a, b, err);
    if (st == SNUG_OK) {
        st = snug_st_writer_finish(w, err);
        w = NULL;
    }
    if (st != SNUG_OK) goto done;
    json_t *cfg = snug_config_to_json(&p->cfg);
    if (!cfg) {
        st = snug_errorf(err, SNUG_NOMEM, "out of memory building config.json");
        goto done;
    }
    st = snug_path_join(path, sizeof path, outdir, "config.json", err);
    if (st == SNUG_OK) st = snug_json_write_file(cfg, path, err);
    json_decref(cfg);
done:
    snug_st_writer_abort(w);
    snug_mem_free(a);
    snug_mem_free(b);
    snug_mem_free(outs);
    return st;
}

/* ---- llama2.c ------------------------------------------------------------- */

#define LLAMA2C_MAGIC 0x616B3432u /* "ak42" */

static int32_t le_i32(const unsigned char *b)
{
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24);
}

/* Places the next `count` tensors of rows x cols floats, one per layer (or
 * one when layer_fmt names no layer), at *off onward. */
static snug_status llama2c_place(plan *p, const char *fmt, int32_t count, uint64_t *off,
                                 snug_error *err)
{
    for (int32_t l = 0; l < count; l++) {
        char name[SNUG_PARAM_NAME_BYTES];
        snprintf(name, sizeof name, fmt, l);
        plan_tensor *t = plan_find(p, name);
        if (!t) return snug_errorf(err, SNUG_INTERNAL, "no tensor '%s' in the plan", name);
        t->dtype = SNUG_DTYPE_F32;
        t->offset = *off;
        *off += (uint64_t)t->rows * (uint64_t)t->cols * 4;
    }
    return SNUG_OK;
}

#define L_ "model.layers.%d."

snug_status snug_convert_llama2c(const char *path, const char *outdir, snug_error *err)
{
    plan p = {.path = path, .fd = -1, .interleaved = true};
    uint64_t size;
    unsigned char h[256];
    snug_status st = snug_file_open_read(path, &p.fd, &size, err);
    if (st != SNUG_OK) return st;
    if (size < 28) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: file is %llu bytes; a llama2.c header needs 28",
                         path, (unsigned long long)size);
        goto done;
    }
    st = snug_pread_full(p.fd, h, (size_t)SNUG_MIN(size, (uint64_t)sizeof h), 0, path, err);
    if (st != SNUG_OK) goto done;
    int version = 0;
    const unsigned char *dims = h;
    uint64_t data = 28;
    bool shared;
    if ((uint32_t)le_i32(h) == LLAMA2C_MAGIC) {
        version = le_i32(h + 4);
        if (version != 1) {
            st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: llama2.c export version %d; snug "
                             "converts the legacy format and version 1 (float32)", path, version);
            goto done;
        }
        if (size < 256) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: version 1 header needs 256 bytes", path);
            goto done;
        }
        dims = h + 8;
        data = 256;
        shared = h[36] != 0;
    } else {
        shared = le_i32(h + 20) > 0;
    }
    int32_t d[7];
    for (int i = 0; i < 7; i++) d[i] = le_i32(dims + 4 * i);
    if (d[5] < 0 && d[5] != INT32_MIN) d[5] = -d[5];
    static const char *const names[] = {"dim", "hidden_dim", "n_layers", "n_heads",
                                        "n_kv_heads", "vocab_size", "seq_len"};
    static const int32_t limits[] = {1 << 16, 1 << 18, 1024, 1024, 1024, 1 << 22, 1 << 24};
    for (int i = 0; i < 7; i++)
        if (d[i] < 1 || d[i] > limits[i]) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: header field %s is %d; expected 1 to %d",
                             path, names[i], d[i], limits[i]);
            goto done;
        }
    if (d[0] % d[3] != 0 || d[3] % d[4] != 0 || (d[0] / d[3]) % 2 != 0) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: header: dim %d, n_heads %d, n_kv_heads %d do not "
                         "give whole, even heads shared evenly", path, d[0], d[3], d[4]);
        goto done;
    }
    snug_model_config *c = &p.cfg;
    memset(c, 0, sizeof *c);
    c->arch = SNUG_ARCH_LLAMA;
    snprintf(c->architecture, sizeof c->architecture, "LlamaForCausalLM");
    c->hidden_size = d[0], c->intermediate_size = d[1], c->n_layers = d[2];
    c->n_heads = d[3], c->n_kv_heads = d[4], c->vocab_size = d[5];
    c->max_position_embeddings = d[6];
    c->head_dim = d[0] / d[3];
    c->rms_norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    c->rope_scaling.factor = 1.0;
    c->tie_word_embeddings = shared;
    c->dtype = SNUG_DTYPE_F32;
    /* llama2.c's data separates stories with BOS, and run.c stops when it
     * samples BOS: both end a sequence (eos_token_id [2, 1]). */
    c->bos_token_id = 1;
    c->n_eos = 2;
    c->eos_token_ids[0] = 2;
    c->eos_token_ids[1] = 1;
    st = snug_config_validate(c, path, err);
    if (st == SNUG_OK) st = plan_init(&p, err);
    if (st != SNUG_OK) goto done;

    uint64_t off = data;
    int32_t L = c->n_layers;
    if (version == 0) {
        st = llama2c_place(&p, "model.embed_tokens.weight", 1, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "input_layernorm.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "self_attn.q_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "self_attn.k_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "self_attn.v_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "self_attn.o_proj.weight", L, &off, err);
        if (st == SNUG_OK)
            st = llama2c_place(&p, L_ "post_attention_layernorm.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "mlp.gate_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "mlp.down_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "mlp.up_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, "model.norm.weight", 1, &off, err);
        off += 2 * (uint64_t)c->max_position_embeddings * (uint64_t)(c->head_dim / 2) * 4;
    } else {
        st = llama2c_place(&p, L_ "input_layernorm.weight", L, &off, err);
        if (st == SNUG_OK)
            st = llama2c_place(&p, L_ "post_attention_layernorm.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, "model.norm.weight", 1, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, "model.embed_tokens.weight", 1, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "self_attn.q_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "self_attn.k_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "self_attn.v_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "self_attn.o_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "mlp.gate_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "mlp.down_proj.weight", L, &off, err);
        if (st == SNUG_OK) st = llama2c_place(&p, L_ "mlp.up_proj.weight", L, &off, err);
    }
    if (st == SNUG_OK && !shared) st = llama2c_place(&p, "lm_head.weight", 1, &off, err);
    if (st != SNUG_OK) goto done;
    if (off != size) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: the header implies %llu bytes but the file has "
                         "%llu", path, (unsigned long long)off, (unsigned long long)size);
        goto done;
    }
    st = plan_write(&p, outdir, err);
done:
    snug_mem_free(p.t);
    close(p.fd);
    return st;
}

/* ---- GGUF ------------------------------------------------------------------ */

/* True when two GGUF tensors hold the same bytes. */
static snug_status gguf_same_bytes(const snug_gguf_file *g, const snug_gguf_tensor *a,
                                   const snug_gguf_tensor *b, bool *same, snug_error *err)
{
    *same = false;
    if (a->type != b->type || a->bytes != b->bytes || a->n_dims != b->n_dims ||
        memcmp(a->ne, b->ne, sizeof a->ne) != 0)
        return SNUG_OK;
    enum { CHUNK = 1 << 20 };
    unsigned char *x = snug_mem_alloc(SNUG_MEM_STAGING, 2 * CHUNK, err);
    if (!x) return SNUG_NOMEM;
    snug_status st = SNUG_OK;
    bool equal = true;
    for (uint64_t o = 0; equal && o < a->bytes; o += CHUNK) {
        size_t n = (size_t)SNUG_MIN((uint64_t)CHUNK, a->bytes - o);
        st = snug_pread_full(g->fd, x, n, g->data_start + a->offset + o, g->path, err);
        if (st == SNUG_OK) st = snug_pread_full(g->fd, x + CHUNK, n, g->data_start + b->offset + o, g->path, err);
        if (st != SNUG_OK) break;
        equal = memcmp(x, x + CHUNK, n) == 0;
    }
    snug_mem_free(x);
    *same = st == SNUG_OK && equal;
    return st;
}

snug_status snug_convert_gguf(const char *path, const char *outdir, snug_error *err)
{
    snug_gguf_file *g = NULL;
    plan p = {.path = path, .fd = -1};
    snug_status st = snug_gguf_open(path, &g, err);
    if (st == SNUG_OK) st = snug_gguf_model_config(g, &p.cfg, err);
    if (st == SNUG_OK && p.cfg.n_rope_freq_factors > 0)
        st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor 'rope_freqs.weight' (per-frequency rotary factors, as "
                         "llama.cpp stores Llama 3.1's rope scaling) has no config.json form; snug runs the GGUF "
                         "file as it is", path);
    if (st != SNUG_OK) goto done;
    p.interleaved = p.cfg.rope_interleaved;
    p.cfg.rope_interleaved = false; /* the rows are written in half-split order */
    p.fd = g->fd;
    const snug_gguf_tensor *emb = snug_gguf_find_tensor(g, "token_embd.weight");
    const snug_gguf_tensor *out = snug_gguf_find_tensor(g, "output.weight");
    bool tied = !out;
    if (out) st = gguf_same_bytes(g, emb, out, &tied, err);
    if (st != SNUG_OK) goto done;
    p.cfg.tie_word_embeddings = tied;
    st = plan_init(&p, err);
    if (st != SNUG_OK) goto done;
    int64_t used = tied && out ? 1 : 0; /* a tied output.weight is accounted for */
    for (int32_t i = 0; i < p.n; i++) {
        plan_tensor *t = &p.t[i];
        char name[SNUG_PARAM_NAME_BYTES] = "(none)";
        const snug_gguf_tensor *gt = snug_gguf_tensor_name(p.cfg.arch, t->name, name, sizeof name)
                                         ? snug_gguf_find_tensor(g, name) : NULL;
        if (!gt) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: no tensor '%s' (for %s)", path, name, t->name);
            goto done;
        }
        used++;
        uint64_t want0 = (uint64_t)t->cols, want1 = t->n_dims == 2 ? (uint64_t)t->rows : 1;
        if (gt->n_dims != (uint32_t)t->n_dims || gt->ne[0] != (t->n_dims == 2 ? want0 : (uint64_t)t->rows) ||
            (t->n_dims == 2 && gt->ne[1] != want1)) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s' has shape [%llu, %llu] (ggml "
                             "order); the config implies [%llu, %llu]", path, name,
                             (unsigned long long)gt->ne[0], (unsigned long long)gt->ne[1],
                             (unsigned long long)(t->n_dims == 2 ? want0 : (uint64_t)t->rows),
                             (unsigned long long)want1);
            goto done;
        }
        switch (gt->type) {
        case SNUG_GGML_F32: t->dtype = SNUG_DTYPE_F32; break;
        case SNUG_GGML_F16: t->dtype = SNUG_DTYPE_F16; break;
        case SNUG_GGML_BF16: t->dtype = SNUG_DTYPE_BF16; break;
        default:
            st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s' is %s; only F32, F16 and "
                             "BF16 tensors can be converted", path, name,
                             snug_ggml_type_name(gt->type));
            goto done;
        }
        t->offset = g->data_start + gt->offset;
        t->minus_one = snug_arch_get(p.cfg.arch)->norm_plus_one && snug_params_is_norm(t->name);
        if (t->minus_one && t->dtype != SNUG_DTYPE_F32) {
            st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s' is %s; a %s norm (held as 1 + w) converts from F32",
                             path, name, snug_ggml_type_name(gt->type), snug_arch_get(p.cfg.arch)->gguf);
            goto done;
        }
    }
    p.cfg.norm_plus_one = snug_arch_get(p.cfg.arch)->norm_plus_one; /* as the directory written holds them */
    if (used != g->n_tensors) {
        for (int64_t k = 0; k < g->n_tensors; k++) {
            bool known = tied && out && strcmp(g->tensors[k].name, "output.weight") == 0;
            for (int32_t i = 0; !known && i < p.n; i++) {
                char name[SNUG_PARAM_NAME_BYTES];
                known = snug_gguf_tensor_name(p.cfg.arch, p.t[i].name, name, sizeof name) &&
                        strcmp(name, g->tensors[k].name) == 0;
            }
            if (!known) {
                char shown[SNUG_SHOWN_MAX];
                st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor '%s' has no place in a "
                                 "%s model", path, snug_str_shown(g->tensors[k].name, shown, sizeof shown),
                                 snug_arch_get(p.cfg.arch)->gguf);
                goto done;
            }
        }
    }
    st = plan_write(&p, outdir, err);
done:
    snug_mem_free(p.t);
    snug_gguf_close(g);
    return st;
}
