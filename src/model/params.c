/*
 * params.c: the parameter table and shard arithmetic.
 */
#include "params.h"

#include "base/quant.h"

#include "kernels/linear.h"

#include "base/mem.h"
#include "base/dtype.h"

#include <stdio.h>
#include <string.h>

snug_status snug_shard_range(int64_t dim, int32_t rank, int32_t world, bool pad,
                             const char *what, int64_t *begin, int64_t *len, int64_t *held,
                             snug_error *err)
{
    if (world < 1 || rank < 0 || rank >= world || dim < 0)
        return snug_errorf(err, SNUG_INVALID, "%s: rank %d of %d is not a valid shard", what,
                           rank, world);
    if (!pad) {
        if (dim % world != 0)
            return snug_errorf(err, SNUG_INVALID, "%s of %lld does not split %d ways", what,
                               (long long)dim, world);
        int64_t per = dim / world;
        *begin = per * rank;
        *len = per;
        if (held) *held = per;
        return SNUG_OK;
    }
    int64_t per = (dim + world - 1) / world;
    int64_t b = SNUG_MIN(per * rank, dim);
    *begin = b;
    *len = SNUG_MIN(per, dim - b);
    if (held) *held = per;
    return SNUG_OK;
}

/* Why tp does not work for cfg, or NULL when it does. */
static const char *tp_problem(const snug_model_config *cfg, int32_t tp)
{
    if (cfg->n_heads % tp != 0) return "num_attention_heads";
    if (cfg->intermediate_size % tp != 0) return "intermediate_size";
    if (cfg->n_kv_heads % tp != 0 && tp % cfg->n_kv_heads != 0) return "num_key_value_heads";
    return NULL;
}

snug_status snug_params_check_tp(const snug_model_config *cfg, int32_t tp, snug_error *err)
{
    if (tp < 1) return snug_errorf(err, SNUG_INVALID, "tensor-parallel size %d must be >= 1", tp);
    const char *why = tp_problem(cfg, tp);
    if (!why) return SNUG_OK;
    char ok[256];
    size_t o = 0;
    ok[0] = '\0';
    for (int32_t t = 1; t <= 64 && o < sizeof ok; t++)
        if (!tp_problem(cfg, t))
            o += (size_t)snprintf(ok + o, sizeof ok - o, "%s%d", o ? ", " : "", t);
    int32_t val = strcmp(why, "num_attention_heads") == 0   ? cfg->n_heads
                  : strcmp(why, "intermediate_size") == 0 ? cfg->intermediate_size
                                                          : cfg->n_kv_heads;
    return snug_errorf(err, SNUG_INVALID, "tensor-parallel size %d does not fit this model: "
                       "%s %d %s; sizes that work: %s", tp, why, val,
                       strcmp(why, "num_key_value_heads") == 0
                           ? "neither splits evenly nor divides it"
                           : "is not divisible by it", ok);
}

typedef struct table_builder {
    snug_param_table *t;
    int32_t cap;
} table_builder;

static snug_param *add_param(table_builder *b, snug_shard_kind kind, int32_t layer,
                             int32_t n_dims, int64_t rows, int64_t cols, const char *fmt, int arg)
{
    SNUG_ASSERT(b->t->n_params < b->cap);
    snug_param *p = &b->t->params[b->t->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, fmt, arg);
    p->kind = kind;
    p->layer = layer;
    p->n_dims = n_dims;
    p->rows = rows;
    p->cols = n_dims == 1 ? 1 : cols;
    return p;
}

/* Adds a source reading rows [row_begin, +n_rows) and columns [col_begin,
 * +n_cols) of a rows x cols checkpoint tensor into parameter row dst_row. */
static void add_source(snug_param *p, int32_t n_dims, int64_t rows, int64_t cols,
                       int64_t row_begin, int64_t n_rows, int64_t col_begin, int64_t n_cols,
                       int64_t dst_row, const char *fmt, int arg)
{
    SNUG_ASSERT(p->n_sources < SNUG_PARAM_MAX_SOURCES);
    snug_param_source *s = &p->sources[p->n_sources++];
    snprintf(s->tensor, sizeof s->tensor, fmt, arg);
    s->n_dims = n_dims;
    s->rows = rows;
    s->cols = n_dims == 1 ? 1 : cols;
    s->row_begin = row_begin;
    s->n_rows = n_rows;
    s->col_begin = col_begin;
    s->n_cols = n_dims == 1 ? 1 : n_cols;
    s->dst_row = dst_row;
}

/* Adds a replicated 1-D parameter read whole from one tensor. */
static snug_param *add_vector(table_builder *b, int32_t layer, int64_t n, const char *pname,
                              const char *tname)
{
    snug_param *p = add_param(b, SNUG_SHARD_REPLICATED, layer, 1, n, 1, pname, layer);
    add_source(p, 1, n, 1, 0, n, 0, 1, 0, tname, layer);
    return p;
}

/* Adds an RMSNorm weight: add_vector, marked plus_one where the config
 * holds norms as offsets from 1. */
static void add_norm(table_builder *b, const snug_model_config *cfg, int32_t layer, int64_t n, const char *pname,
                     const char *tname)
{
    add_vector(b, layer, n, pname, tname)->plus_one = cfg->norm_plus_one;
}

/* Adds the fused q/k/v weight (n_dims 2) or bias (n_dims 1) of a layer:
 * this rank's q rows, then its k and v rows, from q_proj, k_proj and
 * v_proj, or from the row ranges of one qkv_proj (q, k, v rows in turn)
 * when the family fuses them. */
static void add_qkv(table_builder *b, const snug_model_config *cfg, int32_t layer,
                    int32_t n_dims, int64_t q_begin, int64_t kv_begin)
{
    const snug_param_table *t = b->t;
    int64_t hd = cfg->head_dim, h = cfg->hidden_size;
    int64_t q_rows = (int64_t)t->n_q_heads * hd, kv_rows = (int64_t)t->n_kv_heads * hd;
    int64_t full_q = (int64_t)cfg->n_heads * hd, full_kv = (int64_t)cfg->n_kv_heads * hd;
    const char *suffix = n_dims == 2 ? "weight" : "bias";
    char pname[64], tq[96], tk[96], tv[96];
    snprintf(pname, sizeof pname, "layers.%%d.qkv%s", n_dims == 2 ? "" : "_bias");
    snug_param *p = add_param(b, SNUG_SHARD_COLUMN, layer, n_dims, q_rows + 2 * kv_rows, h,
                              pname, layer);
    p->packed = n_dims == 2;
    if (snug_arch_get(cfg->arch)->fused_qkv) {
        int64_t all = full_q + 2 * full_kv;
        snprintf(tq, sizeof tq, "model.layers.%%d.self_attn.qkv_proj.%s", suffix);
        add_source(p, n_dims, all, h, q_begin, q_rows, 0, h, 0, tq, layer);
        add_source(p, n_dims, all, h, full_q + kv_begin, kv_rows, 0, h, q_rows, tq, layer);
        add_source(p, n_dims, all, h, full_q + full_kv + kv_begin, kv_rows, 0, h, q_rows + kv_rows, tq, layer);
        return;
    }
    snprintf(tq, sizeof tq, "model.layers.%%d.self_attn.q_proj.%s", suffix);
    snprintf(tk, sizeof tk, "model.layers.%%d.self_attn.k_proj.%s", suffix);
    snprintf(tv, sizeof tv, "model.layers.%%d.self_attn.v_proj.%s", suffix);
    add_source(p, n_dims, full_q, h, q_begin, q_rows, 0, h, 0, tq, layer);
    add_source(p, n_dims, full_kv, h, kv_begin, kv_rows, 0, h, q_rows, tk, layer);
    add_source(p, n_dims, full_kv, h, kv_begin, kv_rows, 0, h, q_rows + kv_rows, tv, layer);
}

/* Adds the fused gate/up weight of a layer: this rank's gate rows, then
 * its up rows, from gate_proj and up_proj, or from the two halves of one
 * gate_up_proj when the family fuses them. */
static void add_gate_up(table_builder *b, const snug_model_config *cfg, int32_t layer, int64_t ff_begin,
                        int64_t ff_len)
{
    int64_t h = cfg->hidden_size, ff = cfg->intermediate_size;
    snug_param *p = add_param(b, SNUG_SHARD_COLUMN, layer, 2, 2 * ff_len, h, "layers.%d.gate_up", layer);
    p->packed = true;
    if (snug_arch_get(cfg->arch)->fused_gate_up) {
        const char *name = "model.layers.%d.mlp.gate_up_proj.weight";
        add_source(p, 2, 2 * ff, h, ff_begin, ff_len, 0, h, 0, name, layer);
        add_source(p, 2, 2 * ff, h, ff + ff_begin, ff_len, 0, h, ff_len, name, layer);
        return;
    }
    add_source(p, 2, ff, h, ff_begin, ff_len, 0, h, 0, "model.layers.%d.mlp.gate_proj.weight", layer);
    add_source(p, 2, ff, h, ff_begin, ff_len, 0, h, ff_len, "model.layers.%d.mlp.up_proj.weight", layer);
}

snug_status snug_params_build(const snug_model_config *cfg, int32_t tp, int32_t rank,
                              snug_param_table *out, snug_error *err)
{
    memset(out, 0, sizeof *out);
    snug_status st = snug_params_check_tp(cfg, tp, err);
    if (st != SNUG_OK) return st;
    if (rank < 0 || rank >= tp)
        return snug_errorf(err, SNUG_INVALID, "rank %d is outside 0..%d", rank, tp - 1);

    snug_param_table t = {.tp = tp, .rank = rank};
    int64_t q_begin, q_len, kv_begin, kv_len, ff_begin, ff_len, v_begin, v_len, v_held;
    st = snug_shard_range(cfg->n_heads, rank, tp, false, "num_attention_heads", &q_begin,
                          &q_len, NULL, err);
    if (st == SNUG_OK) {
        if (cfg->n_kv_heads % tp == 0) /* split the KV heads */
            st = snug_shard_range(cfg->n_kv_heads, rank, tp, false, "num_key_value_heads",
                                  &kv_begin, &kv_len, NULL, err);
        else /* one KV head per rank, replicated over tp / n_kv ranks */
            st = snug_shard_range(cfg->n_kv_heads, rank / (tp / cfg->n_kv_heads),
                                  cfg->n_kv_heads, false, "num_key_value_heads", &kv_begin,
                                  &kv_len, NULL, err);
    }
    if (st == SNUG_OK)
        st = snug_shard_range(cfg->intermediate_size, rank, tp, false, "intermediate_size",
                              &ff_begin, &ff_len, NULL, err);
    if (st == SNUG_OK)
        st = snug_shard_range(cfg->vocab_size, rank, tp, true, "vocab_size", &v_begin, &v_len,
                              &v_held, err);
    if (st != SNUG_OK) return st;
    t.n_q_heads = (int32_t)q_len;
    t.n_kv_heads = (int32_t)kv_len;
    t.kv_head_begin = (int32_t)kv_begin;
    t.intermediate = (int32_t)ff_len;
    t.vocab_rows = (int32_t)v_held;

    st = snug_config_validate(cfg, "model config", err);
    if (st != SNUG_OK) return st;
    const snug_arch_info *fam = snug_arch_get(cfg->arch);
    int32_t per_layer = 6 + (cfg->qkv_bias ? 1 : 0) + (cfg->o_bias ? 1 : 0) + (fam->qk_norm ? 2 : 0) +
                        (fam->sandwich_norms ? 2 : 0);
    int32_t cap = 3 + (cfg->n_labels > 0) + per_layer * cfg->n_layers; /* n_layers <= SNUG_MAX_LAYERS */
    t.params = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)cap * sizeof *t.params, err);
    if (!t.params) return snug_error_prefix(err, SNUG_NOMEM, "parameter table: ");
    table_builder b = {&t, cap};

    int64_t h = cfg->hidden_size, hd = cfg->head_dim, ff = cfg->intermediate_size;
    int64_t v = cfg->vocab_size;
    snug_param *p = add_param(&b, SNUG_SHARD_VOCAB, -1, 2, v_held, h, "embed_tokens", 0);
    add_source(p, 2, v, h, v_begin, v_len, 0, h, 0, "model.embed_tokens.weight", 0);
    p->packed = cfg->tie_word_embeddings; /* also the lm_head */
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        add_norm(&b, cfg, l, h, "layers.%d.input_layernorm", "model.layers.%d.input_layernorm.weight");
        add_qkv(&b, cfg, l, 2, q_begin * hd, kv_begin * hd);
        if (cfg->qkv_bias) add_qkv(&b, cfg, l, 1, q_begin * hd, kv_begin * hd);
        if (fam->qk_norm) {
            add_norm(&b, cfg, l, hd, "layers.%d.q_norm", "model.layers.%d.self_attn.q_norm.weight");
            add_norm(&b, cfg, l, hd, "layers.%d.k_norm", "model.layers.%d.self_attn.k_norm.weight");
        }
        int64_t q_cols = q_len * hd;
        p = add_param(&b, SNUG_SHARD_ROW, l, 2, h, q_cols, "layers.%d.o_proj", l);
        p->packed = true;
        add_source(p, 2, h, (int64_t)cfg->n_heads * hd, 0, h, q_begin * hd, q_cols, 0,
                   "model.layers.%d.self_attn.o_proj.weight", l);
        if (cfg->o_bias)
            add_vector(&b, l, h, "layers.%d.o_proj_bias", "model.layers.%d.self_attn.o_proj.bias");
        /* the MLP's input norm (Llama's post_attention_layernorm; Gemma's
         * pre_feedforward_layernorm, with a norm after attention and one
         * after the MLP) */
        if (fam->sandwich_norms) {
            add_norm(&b, cfg, l, h, "layers.%d.attn_post_norm", "model.layers.%d.post_attention_layernorm.weight");
            add_norm(&b, cfg, l, h, "layers.%d.post_attention_layernorm",
                     "model.layers.%d.pre_feedforward_layernorm.weight");
        } else {
            add_norm(&b, cfg, l, h, "layers.%d.post_attention_layernorm",
                     "model.layers.%d.post_attention_layernorm.weight");
        }
        add_gate_up(&b, cfg, l, ff_begin, ff_len);
        p = add_param(&b, SNUG_SHARD_ROW, l, 2, h, ff_len, "layers.%d.down_proj", l);
        p->packed = true;
        add_source(p, 2, h, ff, 0, h, ff_begin, ff_len, 0, "model.layers.%d.mlp.down_proj.weight", l);
        if (fam->sandwich_norms)
            add_norm(&b, cfg, l, h, "layers.%d.mlp_post_norm", "model.layers.%d.post_feedforward_layernorm.weight");
    }
    p = add_param(&b, SNUG_SHARD_REPLICATED, -1, 1, h, 1, "norm", 0);
    p->plus_one = cfg->norm_plus_one;
    add_source(p, 1, h, 1, 0, h, 0, 1, 0, "model.norm.weight", 0);
    if (!cfg->tie_word_embeddings) {
        p = add_param(&b, SNUG_SHARD_VOCAB, -1, 2, v_held, h, "lm_head", 0);
        p->packed = true;
        add_source(p, 2, v, h, v_begin, v_len, 0, h, 0, "lm_head.weight", 0);
    }
    if (cfg->n_labels > 0) { /* a classifier's head: every rank's whole (rank 0 scores) */
        p = add_param(&b, SNUG_SHARD_REPLICATED, -1, 2, cfg->n_labels, h, "score", 0);
        p->packed = true;
        add_source(p, 2, cfg->n_labels, h, 0, cfg->n_labels, 0, h, 0, "score.weight", 0);
    }
    *out = t;
    return SNUG_OK;
}

snug_status snug_params_checkpoint_tensors(const snug_model_config *cfg, snug_tensor_spec **specs,
                                           int32_t *n, snug_error *err)
{
    snug_param_table t;
    snug_status st = snug_params_build(cfg, 1, 0, &t, err);
    if (st != SNUG_OK) return st;
    int32_t count = 0;
    for (int32_t i = 0; i < t.n_params; i++) count += t.params[i].n_sources;
    snug_tensor_spec *out = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)count * sizeof *out, err);
    if (out) {
        int32_t k = 0;
        for (int32_t i = 0; i < t.n_params; i++)
            for (int32_t s = 0; s < t.params[i].n_sources; s++) {
                const snug_param_source *src = &t.params[i].sources[s];
                /* a fused tensor feeds its parameter's sources one after another: listed once */
                if (s > 0 && strcmp(src->tensor, t.params[i].sources[s - 1].tensor) == 0) continue;
                memcpy(out[k].name, src->tensor, sizeof out[k].name);
                out[k].n_dims = src->n_dims;
                out[k].rows = src->rows;
                out[k].cols = src->cols;
                k++;
            }
        *specs = out;
        *n = k;
    } else {
        st = snug_error_prefix(err, SNUG_NOMEM, "checkpoint tensor list: ");
    }
    snug_params_free(&t);
    return st;
}

void snug_params_free(snug_param_table *table)
{
    snug_mem_free(table->params);
    table->params = NULL;
    table->n_params = 0;
}

bool snug_params_is_norm(const char *name)
{
    size_t len = strlen(name);
    return len >= 11 && strcmp(name + len - 11, "norm.weight") == 0;
}

uint64_t snug_param_numel(const snug_param *p) { return (uint64_t)p->rows * (uint64_t)p->cols; }

int32_t snug_param_parts(const snug_param *p) { return p->split ? p->n_sources : 1; }

snug_param_part snug_param_source_part(const snug_param *p, int32_t s, snug_dtype dt)
{
    if (p->dtype != SNUG_DTYPE_NONE) dt = p->dtype;
    if (!p->split) return (snug_param_part){dt, p->rows, p->sources[s].dst_row, 0, 0};
    snug_param_part part = {p->sources[0].dtype, p->sources[0].n_rows, 0, 0, 0};
    for (int32_t i = 1; i <= s; i++) {
        part.offset = snug_round_up(part.offset + snug_linear_bytes(part.dtype, part.rows, p->cols), 64);
        part.panel += (part.rows + SNUG_PANEL - 1) / SNUG_PANEL;
        part.dtype = p->sources[i].dtype;
        part.rows = p->sources[i].n_rows;
    }
    return part;
}

uint64_t snug_param_bytes(const snug_param *p, snug_dtype dt)
{
    if (p->split) {
        snug_param_part last = snug_param_source_part(p, p->n_sources - 1, dt);
        return last.offset + snug_linear_bytes(last.dtype, last.rows, p->cols);
    }
    if (p->dtype != SNUG_DTYPE_NONE) dt = p->dtype;
    if (p->packed) return (uint64_t)snug_linear_bytes(dt, p->rows, p->cols);
    if (snug_dtype_is_quant(dt)) return (uint64_t)p->rows * snug_qtype_bytes(snug_dtype_qtype(dt), p->cols);
    return snug_param_numel(p) * snug_dtype_size(dt);
}

/* A source of block format sdt whose slice (at tensor-parallel size tp)
 * must be whole blocks: an error naming the tensor otherwise. */
static snug_status check_blocks(const snug_param_source *src, snug_dtype sdt, int32_t tp, snug_error *err)
{
    int64_t block = snug_qtype_block(snug_dtype_qtype(sdt));
    if (src->col_begin % block == 0 && src->n_cols % block == 0) return SNUG_OK;
    return snug_errorf(err, SNUG_INVALID, "tensor '%s' (%s, blocks of %lld): tensor parallel %d "
                       "gives a rank columns [%lld, %lld) of its %lld, which cuts a block; a tp "
                       "whose share of %lld columns is a multiple of %lld works", src->tensor,
                       snug_dtype_name(sdt), (long long)block, tp, (long long)src->col_begin,
                       (long long)(src->col_begin + src->n_cols), (long long)src->cols,
                       (long long)src->cols, (long long)block);
}

/* The block format a float matrix whose rows have k elements is
 * quantized to for `quant`: quant itself when k is whole blocks of it,
 * else the 32-element format closest in bits (Q4_K: Q5_0, Q6_K: Q8_0, as
 * llama.cpp falls back; Q5_K: Q5_0, where llama.cpp's Q5_1 is not written), else none (SNUG_DTYPE_NONE: kept in floats). */
static snug_dtype quant_for(snug_dtype quant, int64_t k)
{
    if (quant == SNUG_DTYPE_NONE) return SNUG_DTYPE_NONE;
    if (k % snug_qtype_block(snug_dtype_qtype(quant)) == 0) return quant;
    snug_dtype fallback = quant == SNUG_DTYPE_Q4_K || quant == SNUG_DTYPE_Q5_K ? SNUG_DTYPE_Q5_0
                          : quant == SNUG_DTYPE_Q6_K                         ? SNUG_DTYPE_Q8_0
                                                                             : quant;
    return k % 32 == 0 ? fallback : SNUG_DTYPE_NONE;
}

/* Sets p's formats from its sources (the contract of
 * snug_params_set_dtypes, for one parameter). */
static snug_status set_dtype(snug_param *p, snug_dtype wdt, snug_dtype quant, snug_source_dtype_fn source_dtype,
                             void *ctx, int32_t tp, snug_error *err)
{
    p->split = false;
    for (int32_t s = 0; s < p->n_sources; s++) {
        snug_param_source *src = &p->sources[s];
        snug_dtype sdt = source_dtype(ctx, src->tensor), q = quant_for(quant, src->n_cols);
        src->dtype = p->plus_one ? SNUG_DTYPE_F32 : wdt; /* 1 + w kept exact, as transformers computes it */
        if (p->n_dims == 2 && !snug_dtype_is_quant(sdt) && q != SNUG_DTYPE_NONE) {
            src->dtype = q; /* quantized while loading */
            continue;
        }
        if (!snug_dtype_is_quant(sdt)) continue;
        if (p->n_dims != 2)
            return snug_errorf(err, SNUG_UNSUPPORTED, "tensor '%s' is %s: only matrices may be of a block "
                               "format (norms and biases are F32, F16 or BF16)", src->tensor,
                               snug_dtype_name(sdt));
        snug_status st = check_blocks(src, sdt, tp, err);
        if (st != SNUG_OK) return st;
        src->dtype = sdt;
    }
    p->dtype = p->sources[0].dtype;
    for (int32_t s = 1; p->packed && s < p->n_sources; s++) p->split |= p->sources[s].dtype != p->dtype;
    return SNUG_OK;
}

snug_status snug_params_set_dtypes(snug_param_table *table, snug_dtype wdt, snug_dtype quant,
                                   snug_source_dtype_fn source_dtype, void *ctx, snug_error *err)
{
    for (int32_t i = 0; i < table->n_params; i++) {
        snug_status st = set_dtype(&table->params[i], wdt, quant, source_dtype, ctx, table->tp, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

snug_status snug_param_held_bytes(const snug_param *p, snug_dtype dt, snug_dtype quant,
                                  snug_source_dtype_fn source_dtype, void *ctx, int32_t tp, uint64_t *bytes,
                                  snug_error *err)
{
    snug_param held = *p;
    snug_status st = set_dtype(&held, dt, quant, source_dtype, ctx, tp, err);
    if (st == SNUG_OK) *bytes = snug_param_bytes(&held, dt);
    return st;
}

uint64_t snug_params_bytes(const snug_param_table *table, snug_dtype dt)
{
    uint64_t n = 0;
    for (int32_t i = 0; i < table->n_params; i++) n += snug_param_bytes(&table->params[i], dt);
    return n;
}

uint64_t snug_params_layout(const snug_param_table *table, snug_dtype dt, uint64_t *offsets)
{
    uint64_t end = 0;
    for (int32_t i = 0; i < table->n_params; i++) {
        end = snug_round_up(end, 64);
        if (offsets) offsets[i] = end;
        end += snug_param_bytes(&table->params[i], dt);
    }
    return end;
}

snug_status snug_params_count(const snug_model_config *cfg, uint64_t *n, snug_error *err)
{
    snug_param_table t;
    snug_status st = snug_params_build(cfg, 1, 0, &t, err);
    if (st != SNUG_OK) return st;
    *n = 0;
    for (int32_t i = 0; i < t.n_params; i++) *n += snug_param_numel(&t.params[i]);
    snug_params_free(&t);
    return SNUG_OK;
}

snug_status snug_params_rank_bytes(const snug_model_config *cfg, int32_t tp, snug_dtype dt,
                                   uint64_t *bytes, snug_error *err)
{
    return snug_params_rank_held_bytes(cfg, tp, dt, SNUG_DTYPE_NONE, NULL, NULL, bytes, err);
}

snug_status snug_params_rank_held_bytes(const snug_model_config *cfg, int32_t tp, snug_dtype dt, snug_dtype quant,
                                        snug_source_dtype_fn source_dtype, void *ctx, uint64_t *bytes,
                                        snug_error *err)
{
    snug_status st = SNUG_OK;
    for (int32_t r = 0; r < tp && st == SNUG_OK; r++) {
        snug_param_table t;
        st = snug_params_build(cfg, tp, r, &t, err);
        if (st != SNUG_OK) return st;
        bytes[r] = source_dtype ? 0 : snug_params_bytes(&t, dt);
        for (int32_t i = 0; source_dtype && st == SNUG_OK && i < t.n_params; i++) {
            uint64_t b = 0;
            st = snug_param_held_bytes(&t.params[i], dt, quant, source_dtype, ctx, tp, &b, err);
            bytes[r] += b;
        }
        snug_params_free(&t);
    }
    return st;
}
