/*
 * model.c: the forward pass of a Llama-family model over one step's batch,
 * and the size of its activation arena.
 */
#include "model.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/quant.h"
#include "base/pool.h"
#include "base/populate.h"
#include "base/sysinfo.h"
#include "params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ATTN_ROWS_PER_ITEM = 32 }; /* query rows one attention work item takes */
/* The MLP's rows at a time: a step of more tokens runs it in parts of at
 * most this many rows (as equal as can be, so that none is small enough
 * for the matrix-vector path), so that its gate/up and activation buffers
 * and the down projection's packed x hold this many rows, not the step's
 * (a 1B's 2048-token step: 456.54 MiB of arena without parts, 264.52 with;
 * the weights are read once more per part, ~1% of the part's time). */
enum { MLP_ROWS = 512 };

/* A weight matrix as its parameter holds it: one snug_linear, or for a
 * parameter split by format (params.h) a part per source, whose outputs
 * are consecutive columns of y. */
typedef struct matrix_parts {
    int32_t n;
    int64_t m; /* all parts' rows */
    snug_linear part[SNUG_PARAM_MAX_SOURCES];
} matrix_parts;

typedef struct layer_weights {
    const void *attn_norm;  /* (hidden) */
    matrix_parts qkv;       /* (qkv_dim, hidden) */
    const void *qkv_bias;   /* (qkv_dim) or NULL */
    const void *q_norm;     /* (head_dim) each q head's RMSNorm weight, or NULL */
    const void *k_norm;     /* (head_dim) each k head's, or NULL */
    matrix_parts o_proj;    /* (hidden, q_dim) */
    const void *o_bias;     /* (hidden) or NULL */
    const void *attn_post_norm; /* (hidden) the attention output's norm, or NULL */
    const void *mlp_norm;   /* (hidden) */
    const void *mlp_post_norm;  /* (hidden) the MLP output's norm, or NULL */
    matrix_parts gate_up;   /* (2 * intermediate, hidden): gate rows, then up rows */
    matrix_parts down;      /* (hidden, intermediate) */
    int32_t window;         /* the positions a query sees (its own included); 0: all */
    int32_t kv_index;       /* where its keys and values are in a cache of two groups
                             * (snug_kvcache.window): its index among the layers of its group */
} layer_weights;

/* The arena's buffers, f32 unless said; T = n_tokens_max, L = n_logits_max. */
typedef struct arena_buffers {
    float *x;        /* (T, hidden) the residual stream */
    float *xn;       /* (T, hidden) normed input of a projection, or its output */
    float *qkv;      /* (T, qkv_dim) */
    float *attn;     /* (T, q_dim) attention output */
    float *gate_up;  /* (M, 2 * intermediate), M = min(T, MLP_ROWS): a part of the step's rows */
    float *h;        /* (M, intermediate) SwiGLU output */
    float *cos_sin;  /* (R T, head_dim) cos and sin of each token's rotary angles, interleaved
                      * (the first n_rot of each row); R = n_rope_tables, the sliding
                      * layers' table after the others' */
    float *lg_in;    /* (L, hidden) the rows whose logits are wanted, normed */
    float *logits;   /* (L, vocab_rows) */
    void *scratch;   /* snug_matmul_scratch_bytes for T rows of the hidden and attention
                      * widths and M of the intermediate */
} arena_buffers;

struct snug_model {
    snug_model_config cfg;
    snug_model_dims dims;
    snug_step_shape shape;
    snug_kernels kern;
    snug_dtype wdt;
    snug_dtype embed_dt;      /* the embedding table's type (a block format as the file holds it) */
    snug_dtype norm_dt;       /* the RMSNorm weights' type: F32 where held as 1 + w, else wdt */
    float embed_scale;        /* the embeddings are multiplied by it (Gemma: sqrt(hidden)), or 1 */
    float attn_scale;         /* attention scores are q.k times it: 1 / sqrt(query_pre_attn_scalar
                               * or head_dim) */
    const void *embed;        /* (vocab_rows, hidden) row-major; NULL when tied */
    const void *final_norm;   /* (hidden) */
    matrix_parts lm_head;     /* (vocab_rows, hidden); also the embedding when tied */
    matrix_parts score;       /* a classifier's head (n_labels, hidden); n 0 otherwise */
    layer_weights *layers;    /* [n_layers], category other */
    int32_t n_rot;            /* the dimensions of each head rope turns (the first n_rot) */
    float rope_mscale;        /* cos and sin are scaled by it: LongRoPE's attention factor, else 1 */
    int32_t window_max;       /* the widest of their windows (0: none) */
    float *inv_freq;          /* [n_rope_tables n_rot / 2] rotary frequencies (the sliding
                               * layers' after the others'), category other */
    snug_allreduce_fn allreduce;
    void *allreduce_ctx;
    snug_pool *pool;          /* the threads every step runs on */
    bool pool_borrowed;       /* opts.pool's: not freed with the model */
    unsigned char *arena;     /* category activations */
    arena_buffers buf;
};

snug_status snug_model_dims_make(const snug_model_config *cfg, int32_t tp, int32_t rank,
                                 snug_model_dims *dims, snug_error *err)
{
    snug_param_table t;
    memset(dims, 0, sizeof *dims);
    snug_status st = snug_params_build(cfg, tp, rank, &t, err);
    if (st != SNUG_OK) return st;
    int64_t v_begin = 0, v_len = 0;
    st = snug_shard_range(cfg->vocab_size, rank, tp, true, "vocab_size", &v_begin, &v_len, NULL, err);
    if (st == SNUG_OK) {
        *dims = (snug_model_dims){
            .tp = tp, .rank = rank, .n_layers = cfg->n_layers, .hidden = cfg->hidden_size,
            .head_dim = cfg->head_dim, .n_q_heads = t.n_q_heads, .n_kv_heads = t.n_kv_heads,
            .q_dim = t.n_q_heads * cfg->head_dim, .kv_dim = t.n_kv_heads * cfg->head_dim,
            .qkv_dim = (t.n_q_heads + 2 * t.n_kv_heads) * cfg->head_dim,
            .intermediate = t.intermediate, .vocab_rows = t.vocab_rows,
            .vocab_begin = (int32_t)v_begin, .vocab_len = (int32_t)v_len,
            .n_rope_tables = snug_arch_get(cfg->arch)->local_rope ? 2 : 1};
        for (int32_t l = 0; l < cfg->n_layers; l++) dims->n_window_layers += snug_config_layer_window(cfg, l) > 0;
    }
    snug_params_free(&t);
    return st;
}

/* Lays the arena's buffers out from base (NULL: only sizes them); returns
 * the bytes they take, 0 on overflow. The one place the layout lives, so
 * that the size function and the carving cannot disagree. */
static size_t layout_arena(const snug_model_dims *d, const snug_step_shape *s, unsigned char *base,
                           arena_buffers *b)
{
    size_t T = (size_t)s->n_tokens_max, L = (size_t)s->n_logits_max, M = SNUG_MIN(T, (size_t)MLP_ROWS);
    size_t scratch = SNUG_MAX(snug_matmul_scratch_bytes(s->n_threads, s->n_tokens_max, SNUG_MAX(d->hidden, d->q_dim)),
                              snug_matmul_scratch_bytes(s->n_threads, (int64_t)M, SNUG_MAX(d->hidden, d->intermediate)));
    struct { void **dst; size_t rows, cols, elem; } parts[] = {
        {(void **)&b->x, T, (size_t)d->hidden, 4},
        {(void **)&b->xn, T, (size_t)d->hidden, 4},
        {(void **)&b->qkv, T, (size_t)d->qkv_dim, 4},
        {(void **)&b->attn, T, (size_t)d->q_dim, 4},
        {(void **)&b->gate_up, M, 2 * (size_t)d->intermediate, 4},
        {(void **)&b->h, M, (size_t)d->intermediate, 4},
        {(void **)&b->cos_sin, (size_t)SNUG_MAX(1, d->n_rope_tables) * T, (size_t)d->head_dim, 4},
        {(void **)&b->lg_in, L, (size_t)d->hidden, 4},
        {(void **)&b->logits, L, (size_t)d->vocab_rows, 4},
        {(void **)&b->scratch, 1, scratch, 1},
    };
    size_t off = 0;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(parts); i++) {
        size_t n;
        if (!snug_mul_size(parts[i].rows, parts[i].cols, &n) || !snug_mul_size(n, parts[i].elem, &n) ||
            !snug_add_size(n, SNUG_MEM_ALIGN - 1, &n))
            return 0;
        n = snug_round_up(n - (SNUG_MEM_ALIGN - 1), SNUG_MEM_ALIGN);
        if (base) *parts[i].dst = base + off;
        if (!snug_add_size(off, n, &off)) return 0;
    }
    return off;
}

/* The shape's fields are in range (n_logits_max and n_threads resolved). */
static bool shape_valid(const snug_step_shape *s)
{
    return s->n_tokens_max >= 1 && s->n_tokens_max <= (1 << 24) && s->n_seqs_max >= 1 &&
           s->n_seqs_max <= s->n_tokens_max && s->n_logits_max >= 1 &&
           s->n_logits_max <= s->n_tokens_max && s->n_threads >= 1 && s->n_threads <= 1024;
}

/* shape with its defaults filled in. */
static snug_step_shape resolve_shape(const snug_step_shape *s)
{
    snug_step_shape r = *s;
    if (r.n_logits_max == 0) r.n_logits_max = r.n_seqs_max;
    if (r.n_threads == 0) r.n_threads = snug_cpu_count();
    return r;
}

double snug_model_step_flops(const snug_model_dims *dims, int64_t n_tokens, int32_t n_layers,
                             int64_t logits_rows)
{
    double per_layer = (double)dims->hidden * (dims->qkv_dim + dims->q_dim) + 3.0 * dims->hidden * dims->intermediate;
    return 2.0 * ((double)n_tokens * per_layer * n_layers + (double)logits_rows * dims->hidden * dims->vocab_rows);
}

size_t snug_model_activation_bytes(const snug_model_dims *dims, const snug_step_shape *shape)
{
    snug_step_shape s = resolve_shape(shape);
    if (shape->n_threads <= 0 || !shape_valid(&s)) return 0;
    arena_buffers b;
    size_t n = layout_arena(dims, &s, NULL, &b);
    return n ? snug_mem_held_bytes(n) : 0;
}

/* LongRoPE's attention factor: the config's, else sqrt(1 + ln s / ln o)
 * for s = max_position_embeddings / o > 1 (o the original length), else 1,
 * as transformers derives it. */
static double longrope_mscale(const snug_model_config *cfg)
{
    const snug_rope_scaling *rs = &cfg->rope_scaling;
    if (rs->attention_factor > 0) return rs->attention_factor;
    double orig = (double)rs->original_max_position_embeddings;
    double s = (double)cfg->max_position_embeddings / orig;
    return s <= 1.0 || orig <= 1.0 ? 1.0 : sqrt(1.0 + log(s) / log(orig));
}

/* The rotary frequencies of cfg as transformers defines them, computed in
 * double and rounded to float (transformers computes in float: the two may
 * differ in the last bit), for a model that runs sequences of up to
 * max_len positions (LongRoPE's choice of factors), and the factor cos and
 * sin are scaled by into *mscale; where the sliding layers rotate with a
 * base of their own, theirs after (rope_local_theta, unscaled). */
static snug_status rope_frequencies(const snug_model_config *cfg, int64_t max_len, float *inv_freq, float *mscale,
                                    snug_error *err)
{
    if (snug_arch_get(cfg->arch)->local_rope) {
        int32_t rot = snug_config_rot_dims(cfg);
        for (int32_t i = 0; i < rot / 2; i++)
            inv_freq[rot / 2 + i] = (float)(1.0 / pow(cfg->rope_local_theta, (double)(2 * i) / (double)rot));
    }
    const snug_rope_scaling *rs = &cfg->rope_scaling;
    int32_t rot = snug_config_rot_dims(cfg), half = rot / 2;
    if (rs->type != SNUG_ROPE_DEFAULT && rs->type != SNUG_ROPE_LINEAR && rs->type != SNUG_ROPE_LLAMA3 &&
        rs->type != SNUG_ROPE_LONGROPE)
        return snug_errorf(err, SNUG_UNSUPPORTED,
                           "config.json: rope_scaling type \"%s\" is not supported by the forward "
                           "pass (supported: default, linear, llama3, longrope)",
                           snug_rope_type_name(rs->type));
    bool longrope = rs->type == SNUG_ROPE_LONGROPE;
    const float *factors = max_len > rs->original_max_position_embeddings ? rs->long_factor : rs->short_factor;
    *mscale = longrope ? (float)longrope_mscale(cfg) : 1.0f;
    for (int32_t i = 0; i < half; i++) {
        double f = 1.0 / pow(cfg->rope_theta, (double)(2 * i) / (double)rot);
        if (longrope) {
            f /= (double)factors[i];
        } else if (rs->type == SNUG_ROPE_LINEAR) {
            f /= rs->factor;
        } else if (rs->type == SNUG_ROPE_LLAMA3) {
            double orig = (double)rs->original_max_position_embeddings;
            double low_wavelen = orig / rs->low_freq_factor, high_wavelen = orig / rs->high_freq_factor;
            double wavelen = 2 * M_PI / f;
            if (wavelen > low_wavelen) {
                f /= rs->factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = (orig / wavelen - rs->low_freq_factor) /
                                (rs->high_freq_factor - rs->low_freq_factor);
                f = (1 - smooth) * f / rs->factor + smooth * f;
            }
        }
        if (i < cfg->n_rope_freq_factors) f /= (double)cfg->rope_freq_factors[i]; /* (a GGUF's llama3) */
        inv_freq[i] = (float)f;
    }
    return SNUG_OK;
}

/* The parameter called name (with %d for layer) as a pointer; NULL when the
 * weights do not have it. */
static const void *param(const snug_weights *w, const char *fmt, int32_t layer)
{
    char name[SNUG_PARAM_NAME_BYTES];
    snprintf(name, sizeof name, fmt, layer);
    int32_t i = snug_weights_find(w, name);
    return i < 0 ? NULL : snug_weights_data(w, i);
}

/* The packed matrix called name (with %d for layer) into *out; false when
 * the weights do not have it as one. */
static bool matrix(const snug_weights *w, const char *fmt, int32_t layer, matrix_parts *out)
{
    char name[SNUG_PARAM_NAME_BYTES];
    snprintf(name, sizeof name, fmt, layer);
    int32_t i = snug_weights_find(w, name);
    if (i < 0 || !w->table.params[i].packed) return false;
    const snug_param *p = &w->table.params[i];
    out->n = snug_param_parts(p);
    out->m = p->rows;
    for (int32_t s = 0; s < out->n; s++) {
        snug_param_part part = snug_param_source_part(p, s, w->dtype);
        out->part[s] = (snug_linear){part.dtype, part.rows, p->cols,
                                     (const char *)snug_weights_data(w, i) + part.offset};
    }
    return true;
}

/* y (n, w->m) = x (n, k) w^T, a part at a time. */
static void matmul(const snug_model *m, float *y, const float *x, int32_t n, const matrix_parts *w)
{
    for (int32_t s = 0, col = 0; s < w->n; col += (int32_t)w->part[s].m, s++)
        snug_matmul_into(&m->kern, y + col, w->m, x, n, &w->part[s], m->buf.scratch, m->pool);
}

/* Points m's weights at w's parameters; fails naming a missing one. */
static snug_status bind_weights(snug_model *m, const snug_weights *w, snug_error *err)
{
    const char *missing = NULL;
    bool tied = m->cfg.tie_word_embeddings;
    bool qk_norm = snug_arch_get(m->cfg.arch)->qk_norm, sandwich = snug_arch_get(m->cfg.arch)->sandwich_norms;
    m->embed = tied ? NULL : param(w, "embed_tokens", 0);
    int32_t ei = tied ? -1 : snug_weights_find(w, "embed_tokens");
    m->embed_dt = ei >= 0 && w->table.params[ei].dtype != SNUG_DTYPE_NONE ? w->table.params[ei].dtype : w->dtype;
    m->final_norm = param(w, "norm", 0);
    if (!tied && !m->embed) missing = "embed_tokens";
    else if (!m->final_norm) missing = "norm";
    else if (!matrix(w, tied ? "embed_tokens" : "lm_head", 0, &m->lm_head)) missing = tied ? "embed_tokens" : "lm_head";
    else if (m->cfg.n_labels > 0 && !matrix(w, "score", 0, &m->score)) missing = "score";
    for (int32_t l = 0; l < m->dims.n_layers && !missing; l++) {
        layer_weights *L = &m->layers[l];
        L->attn_norm = param(w, "layers.%d.input_layernorm", l);
        L->qkv_bias = m->cfg.qkv_bias ? param(w, "layers.%d.qkv_bias", l) : NULL;
        L->q_norm = qk_norm ? param(w, "layers.%d.q_norm", l) : NULL;
        L->k_norm = qk_norm ? param(w, "layers.%d.k_norm", l) : NULL;
        L->o_bias = m->cfg.o_bias ? param(w, "layers.%d.o_proj_bias", l) : NULL;
        L->mlp_norm = param(w, "layers.%d.post_attention_layernorm", l);
        L->attn_post_norm = sandwich ? param(w, "layers.%d.attn_post_norm", l) : NULL;
        L->mlp_post_norm = sandwich ? param(w, "layers.%d.mlp_post_norm", l) : NULL;
        bool mats = matrix(w, "layers.%d.qkv", l, &L->qkv) && matrix(w, "layers.%d.o_proj", l, &L->o_proj) &&
                    matrix(w, "layers.%d.gate_up", l, &L->gate_up) && matrix(w, "layers.%d.down_proj", l, &L->down);
        if (!L->attn_norm || !mats || !L->mlp_norm || (m->cfg.qkv_bias && !L->qkv_bias) ||
            (m->cfg.o_bias && !L->o_bias) || (qk_norm && (!L->q_norm || !L->k_norm)) ||
            (sandwich && (!L->attn_post_norm || !L->mlp_post_norm)))
            missing = "a layer parameter";
    }
    if (missing)
        return snug_errorf(err, SNUG_INVALID, "model: the weights have no %s (loaded for another model?)",
                           missing);
    return SNUG_OK;
}

snug_status snug_model_isa_resolve(int isa, snug_isa *out, snug_error *err)
{
    *out = isa < 0 ? snug_isa_detect() : (snug_isa)isa;
    const char *env = isa < 0 ? getenv("SNUG_ISA") : NULL;
    if (env && *env && !snug_isa_from_name(env, out))
        return snug_errorf(err, SNUG_INVALID, "SNUG_ISA: expected scalar, avx2, avx512 or avx512bf16, got '%s'", env);
    return SNUG_OK;
}

snug_status snug_model_create(const snug_model_config *cfg, const snug_weights *w,
                              const snug_model_opts *opts, snug_model **out, snug_error *err)
{
    snug_model *m = NULL;
    snug_status st;
    snug_step_shape s = resolve_shape(&opts->shape);
    if (!shape_valid(&s)) {
        st = snug_errorf(err, SNUG_INVALID,
                         "model: step shape out of range (%d tokens, %d sequences, %d logit rows, "
                         "%d threads)", s.n_tokens_max, s.n_seqs_max, s.n_logits_max, s.n_threads);
        goto fail;
    }
    m = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *m, err);
    if (!m) {
        st = snug_error_prefix(err, SNUG_NOMEM, "model: ");
        goto fail;
    }
    m->cfg = *cfg;
    m->shape = s;
    m->wdt = w->dtype;
    m->allreduce = opts->allreduce;
    m->allreduce_ctx = opts->allreduce_ctx;
    snug_isa isa;
    st = snug_model_isa_resolve(opts->isa, &isa, err);
    if (st == SNUG_OK) st = snug_kernels_init(&m->kern, isa, err);
    /* measured only where it matters: bf16 weights */
    if (st == SNUG_OK && (opts->bf16 != SNUG_BF16_AUTO || w->dtype == SNUG_DTYPE_BF16))
        st = snug_kernels_choose_bf16(&m->kern, opts->bf16, err);
    if (st == SNUG_OK) st = snug_model_dims_make(cfg, w->table.tp, w->table.rank, &m->dims, err);
    if (st != SNUG_OK) goto fail;
    if (m->dims.tp > 1 && !m->allreduce) {
        st = snug_errorf(err, SNUG_INVALID, "model: tensor parallel (tp %d) needs an all-reduce", m->dims.tp);
        goto fail;
    }
    m->layers = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)m->dims.n_layers * sizeof *m->layers, err);
    m->n_rot = snug_config_rot_dims(cfg);
    m->inv_freq = m->layers ? snug_mem_alloc(SNUG_MEM_OTHER,
                                             (size_t)m->dims.n_rope_tables * (size_t)(m->n_rot / 2) * sizeof(float), err)
                            : NULL;
    m->norm_dt = cfg->norm_plus_one ? SNUG_DTYPE_F32 : m->wdt;
    /* sqrt(hidden): rounded to the weights' type where the checkpoint is
     * Hugging Face's (transformers and vLLM cast it to the embedding's
     * dtype: 33.94 becomes 34 in bf16 for hidden 1152), exact for GGUF
     * files, as llama.cpp scales */
    m->embed_scale = 1.0f;
    if (snug_arch_get(cfg->arch)->embed_scale) {
        m->embed_scale = sqrtf((float)cfg->hidden_size);
        if (cfg->norm_plus_one && m->wdt == SNUG_DTYPE_BF16) m->embed_scale = snug_bf16_to_f32(snug_f32_to_bf16(m->embed_scale));
        if (cfg->norm_plus_one && m->wdt == SNUG_DTYPE_F16) m->embed_scale = snug_f16_to_f32(snug_f32_to_f16(m->embed_scale));
    }
    m->attn_scale = 1.0f / sqrtf(cfg->query_pre_attn_scalar > 0 ? (float)cfg->query_pre_attn_scalar
                                                                : (float)cfg->head_dim);
    if (!m->inv_freq) {
        st = snug_error_prefix(err, SNUG_NOMEM, "model: ");
        goto fail;
    }
    int64_t max_len = opts->max_model_len > 0 ? opts->max_model_len : cfg->max_position_embeddings;
    st = rope_frequencies(cfg, max_len, m->inv_freq, &m->rope_mscale, err);
    if (st == SNUG_OK) st = bind_weights(m, w, err);
    if (st != SNUG_OK) goto fail;
    for (int32_t l = 0, n_full = 0, n_window = 0; l < m->dims.n_layers; l++) {
        int64_t lw = snug_config_layer_window(cfg, l);
        m->layers[l].window = lw > 0 && lw < INT32_MAX ? (int32_t)lw : 0;
        m->layers[l].kv_index = m->layers[l].window > 0 ? n_window++ : n_full++;
        m->window_max = SNUG_MAX(m->window_max, m->layers[l].window);
    }
    size_t bytes = layout_arena(&m->dims, &s, NULL, &m->buf);
    if (bytes == 0) {
        st = snug_errorf(err, SNUG_INVALID, "model: the activation arena's size overflows");
        goto fail;
    }
    m->pool_borrowed = opts->pool != NULL;
    if (opts->pool && snug_pool_threads(opts->pool) != s.n_threads) {
        st = snug_errorf(err, SNUG_INVALID, "model: a borrowed pool of %d threads for steps of %d",
                         snug_pool_threads(opts->pool), s.n_threads);
        goto fail;
    }
    if (opts->pool) m->pool = opts->pool;
    else st = snug_pool_create(s.n_threads, 0, &m->pool, err);
    if (st != SNUG_OK) goto fail;
    m->arena = snug_populate_alloc(SNUG_MEM_ACTIVATIONS, bytes, m->pool, err); /* resident on the pool's threads */
    if (!m->arena) {
        st = snug_error_prefix(err, SNUG_NOMEM, "model: activation arena: ");
        goto fail;
    }
    layout_arena(&m->dims, &s, m->arena, &m->buf);
    *out = m;
    return SNUG_OK;
fail:
    snug_model_free(m);
    return st;
}

void snug_model_free(snug_model *m)
{
    if (!m) return;
    if (!m->pool_borrowed) snug_pool_free(m->pool);
    snug_mem_free(m->arena);
    snug_mem_free(m->inv_freq);
    snug_mem_free(m->layers);
    snug_mem_free(m);
}

const snug_model_dims *snug_model_get_dims(const snug_model *m) { return &m->dims; }
snug_isa snug_model_isa(const snug_model *m) { return m->kern.isa; }
const snug_kernels *snug_model_kernels(const snug_model *m) { return &m->kern; }
snug_pool *snug_model_pool(const snug_model *m) { return m->pool; }
const snug_step_shape *snug_model_step_shape(const snug_model *m) { return &m->shape; }

/* Checks a step against the model's shape and the cache; counts its logit
 * rows into *n_rows. */
/* Checks that the blocks of `table` (n entries) that a step of q's tokens
 * reads or writes, those of positions first .. pos0 + n_tokens - 1, are in
 * the cache's n_blocks (what `which` names in messages). */
static snug_status check_table(const snug_step_seq *q, int32_t i, const int32_t *table, int32_t n, int64_t first,
                               int32_t block_size, int32_t n_blocks, const char *which, snug_error *err)
{
    int64_t need = ((int64_t)q->pos0 + q->n_tokens + block_size - 1) / block_size;
    if (!table || n < need)
        return snug_errorf(err, SNUG_INVALID, "step: sequence %d: %d %sblocks do not cover position %d", i, table ? n : 0,
                           which, q->pos0 + q->n_tokens - 1);
    for (int64_t b = SNUG_MAX(0, first) / block_size; b < need; b++)
        if (table[b] < 0 || table[b] >= n_blocks)
            return snug_errorf(err, SNUG_INVALID, "step: sequence %d: %sblock %d is outside the cache (%d blocks)", i,
                               which, table[b], n_blocks);
    return SNUG_OK;
}

/* Checks a step against the model's shape and the cache; counts its logit
 * rows into *n_rows. */
static snug_status check_step(const snug_model *m, const snug_kvcache *kv, const snug_step *step,
                              int32_t *n_rows, snug_error *err)
{
    const snug_step_shape *s = &m->shape;
    const snug_kv_shape *ks = &kv->shape;
    const snug_kvcache *w = kv->window;
    int32_t n_kv_layers = ks->n_layers + (w ? w->shape.n_layers : 0);
    int32_t runs = step->n_layers > 0 ? SNUG_MIN(step->n_layers, m->dims.n_layers) : m->dims.n_layers;
    bool layers = n_kv_layers == m->dims.n_layers || (!w && ks->n_layers == runs); /* (snug_step) */
    if (!layers || ks->n_kv_heads != m->dims.n_kv_heads ||
        ks->head_dim != m->dims.head_dim || (!kv->data && ks->n_layers > 0) ||
        (w && (w->shape.n_layers != m->dims.n_window_layers || w->shape.n_kv_heads != ks->n_kv_heads ||
               w->shape.head_dim != ks->head_dim || w->shape.dtype != ks->dtype || !w->data)))
        return snug_errorf(err, SNUG_INVALID, "step: the kv cache was made for another model");
    if (step->n_tokens < 1 || step->n_tokens > s->n_tokens_max || step->n_seqs < 1 ||
        step->n_seqs > s->n_seqs_max)
        return snug_errorf(err, SNUG_INVALID,
                           "step: %d tokens in %d sequences (the model takes 1..%d tokens in 1..%d)",
                           step->n_tokens, step->n_seqs, s->n_tokens_max, s->n_seqs_max);
    int64_t total = 0, rows = 0;
    for (int32_t i = 0; i < step->n_seqs; i++) {
        const snug_step_seq *q = &step->seqs[i];
        if (q->n_tokens < 1 || q->pos0 < 0 || (int64_t)q->pos0 + q->n_tokens > m->cfg.max_position_embeddings ||
            !q->block_table || q->logits < SNUG_LOGITS_NONE || q->logits > SNUG_LOGITS_POOL_SUM)
            return snug_errorf(err, SNUG_INVALID,
                               "step: sequence %d: %d tokens from position %d, logits mode %d (positions "
                               "end at %lld; modes are NONE, LAST, ALL and the pooled ones)", i, q->n_tokens, q->pos0,
                               (int)q->logits,
                               (long long)m->cfg.max_position_embeddings);
        snug_status st = check_table(q, i, q->block_table, q->n_blocks, 0, ks->block_size, kv->n_blocks, "", err);
        /* the window group's: from the first key the step's first query sees */
        if (st == SNUG_OK && w)
            st = check_table(q, i, q->window_table, q->n_window_blocks, (int64_t)q->pos0 - m->window_max + 1,
                             w->shape.block_size, w->n_blocks, "window ", err);
        if (st != SNUG_OK) return st;
        total += q->n_tokens;
        rows += q->logits == SNUG_LOGITS_ALL ? q->n_tokens : q->logits != SNUG_LOGITS_NONE ? 1 : 0;
        if (snug_logits_pooled(q->logits) && m->dims.hidden > m->dims.vocab_rows)
            return snug_errorf(err, SNUG_INVALID, "step: sequence %d: a pooled row of %d floats does not fit a row "
                               "of %d logits", i, m->dims.hidden, m->dims.vocab_rows);
    }
    if (total != step->n_tokens)
        return snug_errorf(err, SNUG_INVALID, "step: the sequences hold %lld tokens, the step %d",
                           (long long)total, step->n_tokens);
    if (rows > s->n_logits_max)
        return snug_errorf(err, SNUG_INVALID, "step: %lld logit rows asked for (the model makes up to %d)",
                           (long long)rows, s->n_logits_max);
    for (int32_t t = 0; t < step->n_tokens; t++)
        if (step->tokens[t] < 0 || step->tokens[t] >= m->cfg.vocab_size)
            return snug_errorf(err, SNUG_INVALID, "step: token %d is %d, outside the vocabulary (0..%d)", t,
                               step->tokens[t], m->cfg.vocab_size - 1);
    *n_rows = (int32_t)rows;
    return SNUG_OK;
}

/* One pool run's arguments: what the op of model.c it runs reads. */
typedef struct op_job {
    const snug_model *m;
    snug_kvcache *kv;
    const snug_step *step;
    int32_t layer;
    int32_t n;          /* rows (tokens) */
    float *x;           /* the residual stream, or the rows normed in place */
    const float *y;     /* added to x first (NULL: nothing) */
    const void *bias;   /* added to x with y (NULL: none) */
    float *out;         /* where the normed rows go */
    const void *w;      /* the norm's weight */
} op_job;

/* Runs fn for job j on the model's pool, or on the caller alone when the
 * op has one row (waking the workers would cost more than it saves). */
static void run_op(const snug_model *m, snug_pool_fn fn, op_job *j, bool alone)
{
    if (alone) fn(j, 0, 1);
    else snug_pool_run(m->pool, fn, j);
}

/* x[t] = the embedding row of token t (zero where another rank holds it),
 * for thread `thread`'s share of the rows. */
static void embed_part(void *ctx, int32_t thread, int32_t n_threads)
{
    const op_job *j = ctx;
    const snug_model *m = j->m;
    const snug_model_dims *d = &m->dims;
    bool blocks = snug_dtype_is_quant(m->embed_dt);
    size_t row_bytes = blocks ? snug_qtype_bytes(snug_dtype_qtype(m->embed_dt), d->hidden)
                              : (size_t)d->hidden * snug_dtype_size(m->embed_dt);
    int64_t t0, t1;
    snug_pool_split(j->n, 1, thread, n_threads, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        float *x = m->buf.x + (size_t)t * (size_t)d->hidden;
        int32_t local = j->step->tokens[t] - d->vocab_begin;
        if (local >= 0 && local < d->vocab_len && !m->embed)
            snug_linear_row(&m->lm_head.part[0], local, x); /* tied: the lm_head's row */
        else if (local >= 0 && local < d->vocab_len && blocks)
            snug_quant_dequantize((snug_qtype)snug_dtype_qtype(m->embed_dt),
                                  (const char *)m->embed + (size_t)local * row_bytes, x, d->hidden);
        else if (local >= 0 && local < d->vocab_len)
            m->kern.load(x, (const char *)m->embed + (size_t)local * row_bytes, m->embed_dt, d->hidden);
        else
            memset(x, 0, (size_t)d->hidden * sizeof(float));
        if (m->embed_scale != 1.0f)
            for (int32_t e = 0; e < d->hidden; e++) x[e] *= m->embed_scale;
    }
}

/* Reorders a head vector whose rotary pairs are (2i, 2i + 1) (llama.cpp's
 * q and k rows) into the half-split order the rope kernel and the cache
 * use, (i, i + d / 2): scores q.k do not change, as q and k move alike. */
static void half_split(float *x, int32_t head_dim)
{
    float tmp[SNUG_MAX_HEAD_DIM];
    int32_t h = head_dim / 2;
    for (int32_t i = 0; i < h; i++) tmp[i] = x[2 * i], tmp[i + h] = x[2 * i + 1];
    memcpy(x, tmp, (size_t)head_dim * sizeof(float));
}

/* The cos and sin of every token's rotary angles, as transformers computes
 * them: angle = float(position) * inv_freq in float (each times LongRoPE's
 * attention factor: the rotation scales q and k by it). */
static void rope_tables(const snug_model *m, const snug_step *step)
{
    int32_t half = m->n_rot / 2;
    for (int32_t r = 0; r < m->dims.n_rope_tables; r++) {
        const float *inv_freq = m->inv_freq + (size_t)r * (size_t)half;
        float mscale = r == 0 ? m->rope_mscale : 1.0f; /* (the sliding layers' rotation is unscaled) */
        int32_t t = 0;
        for (int32_t i = 0; i < step->n_seqs; i++) {
            const snug_step_seq *q = &step->seqs[i];
            for (int32_t j = 0; j < q->n_tokens; j++, t++) {
                float *cs = m->buf.cos_sin + ((size_t)r * (size_t)step->n_tokens + (size_t)t) * (size_t)m->dims.head_dim;
                float pos = (float)(q->pos0 + j);
                for (int32_t k = 0; k < half; k++) {
                    float a = pos * inv_freq[k];
                    cs[2 * k] = cosf(a) * mscale;
                    cs[2 * k + 1] = sinf(a) * mscale;
                }
            }
        }
    }
}

/* For thread `thread`'s share of the rows: x[t] += y[t] (+ bias) when y is
 * given, then out[t] = rmsnorm(x[t]) * w when w is given (out may be y's
 * buffer: each row is added before it is normed over). */
static void add_norm_part(void *ctx, int32_t thread, int32_t n_threads)
{
    const op_job *j = ctx;
    const snug_model *m = j->m;
    int64_t h = m->dims.hidden, t0, t1;
    float eps = (float)m->cfg.rms_norm_eps;
    snug_pool_split(j->n, 1, thread, n_threads, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        if (j->y) m->kern.add(j->x + t * h, j->y + t * h, h);
        if (j->bias) m->kern.add_bias(j->x + t * h, j->bias, m->wdt, h);
        if (j->w) m->kern.rmsnorm(j->out + t * h, j->x + t * h, j->w, m->norm_dt, h, eps);
    }
}

/* x += y (+ bias) then out = rmsnorm(x) * w, row by row (y, bias, w may be
 * NULL), for the step's n rows of hidden floats. */
static void add_norm(const snug_model *m, float *x, const float *y, const void *bias, float *out,
                     const void *w, int32_t n)
{
    op_job j = {.m = m, .n = n, .x = x, .y = y, .bias = bias, .out = out, .w = w};
    run_op(m, add_norm_part, &j, n <= 1);
}

/* Sums a buffer over the ranks (nothing to do on one). */
static snug_status reduce(const snug_model *m, float *buf, int64_t n, snug_error *err)
{
    if (m->dims.tp == 1 || m->allreduce(buf, n, m->allreduce_ctx)) return SNUG_OK;
    return snug_errorf(err, SNUG_INTERNAL, "step: the all-reduce across %d ranks failed", m->dims.tp);
}

/* The cache layer l's keys and values are in (kv, or its window group's),
 * with q's table of it into *table and the layer's index there into *li. */
static const snug_kvcache *layer_cache(const snug_model *m, const snug_kvcache *kv, const snug_step_seq *q,
                                       int32_t l, const int32_t **table, int32_t *li)
{
    const layer_weights *L = &m->layers[l];
    *li = kv->window ? L->kv_index : l;
    *table = kv->window && L->window > 0 ? q->window_table : q->block_table;
    return kv->window && L->window > 0 ? kv->window : kv;
}

/* Biases, rotary embeddings and the cache write of the qkv rows of thread
 * `thread`'s share of the tokens. */
static void qkv_finish(const op_job *j, int32_t thread, int32_t n_threads)
{
    const snug_model *m = j->m;
    const snug_step *step = j->step;
    snug_kvcache *kv = j->kv;
    const snug_model_dims *d = &m->dims;
    const layer_weights *L = &m->layers[j->layer];
    int32_t n_seqs = step->n_seqs;
    float eps = (float)m->cfg.rms_norm_eps;
    int64_t t0, t1;
    snug_pool_split(step->n_tokens, 1, thread, n_threads, &t0, &t1);
    /* Each token finds its sequence by walking the (few) sequences. */
    for (int32_t t = (int32_t)t0; t < t1; t++) {
        int32_t i = 0, first = 0;
        while (i < n_seqs && first + step->seqs[i].n_tokens <= t) first += step->seqs[i++].n_tokens;
        const snug_step_seq *q = &step->seqs[i];
        int32_t pos = q->pos0 + (t - first);
        float *row = m->buf.qkv + (size_t)t * (size_t)d->qkv_dim;
        /* the sliding layers' angles where they have their own */
        bool local = d->n_rope_tables > 1 && L->window > 0;
        const float *cs = m->buf.cos_sin + ((local ? (size_t)step->n_tokens : 0) + (size_t)t) * (size_t)d->head_dim;
        if (L->qkv_bias) m->kern.add_bias(row, L->qkv_bias, m->wdt, d->qkv_dim);
        for (int32_t h = 0; h < d->n_q_heads + d->n_kv_heads; h++) {
            float *head = row + (size_t)h * (size_t)d->head_dim;
            if (L->q_norm) /* q heads, then k heads: each normed over itself */
                m->kern.rmsnorm(head, head, h < d->n_q_heads ? L->q_norm : L->k_norm, m->norm_dt, d->head_dim, eps);
            if (m->cfg.rope_interleaved) half_split(head, d->head_dim);
            m->kern.rope(head, cs, m->n_rot);
        }
        const int32_t *table;
        int32_t li;
        const snug_kvcache *c = layer_cache(m, kv, q, j->layer, &table, &li);
        int32_t block = table[pos / c->shape.block_size], slot = pos % c->shape.block_size;
        for (int32_t h = 0; h < d->n_kv_heads; h++) {
            const float *k = row + d->q_dim + (size_t)h * (size_t)d->head_dim;
            m->kern.store(snug_kvcache_at(c, li, block, false, h, slot), c->shape.dtype, k, d->head_dim);
            m->kern.store(snug_kvcache_at(c, li, block, true, h, slot), c->shape.dtype, k + d->kv_dim, d->head_dim);
        }
    }
}

/* Attention of one layer's work item: (sequence, KV head, run of up to
 * ATTN_ROWS_PER_ITEM query rows). */
static void attention_item(const op_job *j, int64_t item)
{
    const snug_model *m = j->m;
    const snug_step *step = j->step;
    const snug_model_dims *d = &m->dims;
    int32_t group = d->n_q_heads / d->n_kv_heads;
    int32_t window = m->layers[j->layer].window;
    /* Find the item's sequence, head and row run. */
    int64_t rest = item;
    int32_t i = 0, first = 0;
    for (;;) {
        int64_t runs = (step->seqs[i].n_tokens + ATTN_ROWS_PER_ITEM - 1) / ATTN_ROWS_PER_ITEM;
        if (rest < runs * d->n_kv_heads) break;
        rest -= runs * d->n_kv_heads;
        first += step->seqs[i++].n_tokens;
    }
    const snug_step_seq *q = &step->seqs[i];
    int32_t head = (int32_t)(rest % d->n_kv_heads), run = (int32_t)(rest / d->n_kv_heads);
    int32_t r0 = run * ATTN_ROWS_PER_ITEM, nr = SNUG_MIN(ATTN_ROWS_PER_ITEM, q->n_tokens - r0);
    size_t t0 = (size_t)(first + r0);
    snug_attn_args a = {
        .q = m->buf.qkv + t0 * (size_t)d->qkv_dim + (size_t)head * (size_t)group * (size_t)d->head_dim,
        .q_row_stride = d->qkv_dim,
        .q_head_stride = d->head_dim,
        .out = m->buf.attn + t0 * (size_t)d->q_dim + (size_t)head * (size_t)group * (size_t)d->head_dim,
        .out_row_stride = d->q_dim,
        .out_head_stride = d->head_dim,
        .n_group = group,
        .n_q = nr,
        .pos0 = q->pos0 + r0,
        .window = window,
        .head_dim = d->head_dim,
        .scale = m->attn_scale,
        .softcap = (float)m->cfg.attn_softcap,
    };
    const int32_t *table;
    int32_t li;
    const snug_kvcache *c = layer_cache(m, j->kv, q, j->layer, &table, &li);
    a.kv = snug_kvcache_view(c, li, head, table);
    m->kern.attention(&a);
}

/* The step's qkv rows finished and written to the cache (each thread its
 * tokens), then, once every thread's are in, attention: work items taken
 * one at a time by whichever thread is free. */
static void qkv_attention_part(void *ctx, int32_t thread, int32_t n_threads)
{
    const op_job *j = ctx;
    const snug_model_dims *d = &j->m->dims;
    qkv_finish(j, thread, n_threads);
    snug_pool_barrier(j->m->pool, thread);
    int64_t n_items = 0;
    for (int32_t i = 0; i < j->step->n_seqs; i++)
        n_items += (int64_t)d->n_kv_heads * ((j->step->seqs[i].n_tokens + ATTN_ROWS_PER_ITEM - 1) / ATTN_ROWS_PER_ITEM);
    for (int64_t item; (item = snug_pool_next(j->m->pool, n_items)) >= 0;) attention_item(j, item);
}

/* h[t] = act(gate[t]) * up[t] for thread `thread`'s share of the rows (act
 * the family's: silu, or GELU's tanh form). */
static void activation_part(void *ctx, int32_t thread, int32_t n_threads)
{
    const op_job *j = ctx;
    const arena_buffers *b = &j->m->buf;
    int64_t inter = j->m->dims.intermediate, t0, t1;
    bool gelu = snug_arch_get(j->m->cfg.arch)->act == SNUG_ACT_GELU_TANH;
    snug_pool_split(j->n, 1, thread, n_threads, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        if (gelu) j->m->kern.gelu_tanh_mul(b->h + t * inter, b->gate_up + t * 2 * inter, inter);
        else j->m->kern.silu_mul(b->h + t * inter, b->gate_up + t * 2 * inter, inter);
    }
}

/* Gemma 2's final soft-cap, c tanh(x / c), over rows of logits (j->x,
 * j->n rows): thread `thread`'s share of them. */
static void softcap_part(void *ctx, int32_t thread, int32_t n_threads)
{
    const op_job *j = ctx;
    float c = (float)j->m->cfg.final_softcap;
    size_t w = (size_t)j->m->dims.vocab_rows;
    int64_t r0, r1;
    snug_pool_split(j->n, 1, thread, n_threads, &r0, &r1);
    for (float *x = j->x + (size_t)r0 * w, *end = j->x + (size_t)r1 * w; x < end; x++) *x = c * tanhf(*x / c);
}

/* One decoder layer over the step's n tokens. On entry x is the residual
 * stream less the previous layer's MLP output (pending, in xn; NULL for the
 * first layer), which this layer adds before its first norm; on return its
 * own MLP output is pending in xn. */
static snug_status run_layer(const snug_model *m, snug_kvcache *kv, const snug_step *step, int32_t l,
                             const float *pending, snug_error *err)
{
    const snug_model_dims *d = &m->dims;
    const layer_weights *L = &m->layers[l];
    const arena_buffers *b = &m->buf;
    int32_t n = step->n_tokens;
    snug_status st;

    add_norm(m, b->x, pending, NULL, b->xn, L->attn_norm, n);
    matmul(m, b->qkv, b->xn, n, &L->qkv);
    op_job j = {.m = m, .kv = kv, .step = step, .layer = l, .n = n};
    snug_pool_run(m->pool, qkv_attention_part, &j);
    matmul(m, b->xn, b->attn, n, &L->o_proj);
    if ((st = reduce(m, b->xn, (int64_t)n * d->hidden, err)) != SNUG_OK) return st;
    if (L->attn_post_norm) add_norm(m, b->xn, NULL, NULL, b->xn, L->attn_post_norm, n); /* before the residual */
    add_norm(m, b->x, b->xn, L->o_bias, b->xn, L->mlp_norm, n);

    /* the MLP in parts of rows (MLP_ROWS): each part's down projection
     * writes the rows of xn its gate/up projection has read */
    int32_t parts = (n + MLP_ROWS - 1) / MLP_ROWS;
    for (int32_t p = 0, r0 = 0; p < parts; p++) {
        int32_t rows = n / parts + (p < n % parts);
        float *xn = b->xn + (size_t)r0 * d->hidden;
        matmul(m, b->gate_up, xn, rows, &L->gate_up);
        j.n = rows;
        run_op(m, activation_part, &j, rows <= 1);
        matmul(m, xn, b->h, rows, &L->down);
        r0 += rows;
    }
    st = reduce(m, b->xn, (int64_t)n * d->hidden, err);
    if (st == SNUG_OK && L->mlp_post_norm) add_norm(m, b->xn, NULL, NULL, b->xn, L->mlp_post_norm, n);
    return st;
}

/* The final norm and lm_head for the rows that want logits; then, after
 * them, the pooled rows: each one the final norm's output of its
 * sequence's tokens (normed in place: the residual stream is not needed
 * after the step), the last's, the first's or their sum. */
static void logits_rows(const snug_model *m, const snug_step *step)
{
    const snug_model_dims *d = &m->dims;
    const arena_buffers *b = &m->buf;
    size_t H = (size_t)d->hidden;
    int32_t r = 0, t = 0;
    for (int32_t i = 0; i < step->n_seqs; i++) {
        const snug_step_seq *q = &step->seqs[i];
        for (int32_t j = q->n_tokens - snug_step_seq_vocab_rows(q); j < q->n_tokens; j++, r++)
            memcpy(b->lg_in + (size_t)r * H, b->x + (size_t)(t + j) * H, H * sizeof(float));
        t += q->n_tokens;
    }
    if (r > 0) {
        add_norm(m, b->lg_in, NULL, NULL, b->lg_in, m->final_norm, r);
        matmul(m, b->logits, b->lg_in, r, &m->lm_head);
        if (m->cfg.final_softcap > 0) { /* Gemma 2's: c tanh(x / c), the order kept */
            op_job j = {.m = m, .n = r, .x = b->logits};
            run_op(m, softcap_part, &j, false);
        }
    }
    t = 0;
    for (int32_t i = 0; i < step->n_seqs; t += step->seqs[i].n_tokens, i++) {
        const snug_step_seq *q = &step->seqs[i];
        if (!snug_logits_pooled(q->logits)) continue;
        int32_t from = q->logits == SNUG_LOGITS_POOL_LAST ? q->n_tokens - 1 : 0;
        int32_t to = q->logits == SNUG_LOGITS_POOL_FIRST ? 1 : q->n_tokens;
        float *x = b->x + (size_t)(t + from) * H, *out = b->logits + (size_t)r++ * (size_t)d->vocab_rows;
        add_norm(m, x, NULL, NULL, x, m->final_norm, to - from);
        memset(out, 0, H * sizeof(float));
        for (int32_t j = 0; j < to - from; j++)
            for (size_t k = 0; k < H; k++) out[k] += x[(size_t)j * H + k];
    }
}

snug_status snug_model_forward(snug_model *m, snug_kvcache *kv, const snug_step *step,
                               const float **logits, int32_t *n_rows, snug_error *err)
{
    int32_t rows = 0;
    snug_status st = check_step(m, kv, step, &rows, err);
    if (st != SNUG_OK) return st;
    op_job j = {.m = m, .step = step, .n = step->n_tokens};
    run_op(m, embed_part, &j, step->n_tokens <= 1);
    if ((st = reduce(m, m->buf.x, (int64_t)step->n_tokens * m->dims.hidden, err)) != SNUG_OK) return st;
    rope_tables(m, step);
    int32_t n_layers = step->n_layers > 0 ? SNUG_MIN(step->n_layers, m->dims.n_layers) : m->dims.n_layers;
    for (int32_t l = 0; l < n_layers; l++)
        if ((st = run_layer(m, kv, step, l, l > 0 ? m->buf.xn : NULL, err)) != SNUG_OK) return st;
    /* the last layer's MLP output joins the residual stream */
    if (n_layers > 0) add_norm(m, m->buf.x, m->buf.xn, NULL, NULL, NULL, step->n_tokens);
    if (rows > 0) logits_rows(m, step);
    *logits = m->buf.logits;
    *n_rows = rows;
    return SNUG_OK;
}

snug_status snug_model_classify(snug_model *m, const float *hidden, float *scores, snug_error *err)
{
    if (m->cfg.n_labels < 1)
        return snug_errorf(err, SNUG_INVALID, "the model is no classifier: it has no score head");
    matmul(m, scores, hidden, 1, &m->score);
    return SNUG_OK;
}
