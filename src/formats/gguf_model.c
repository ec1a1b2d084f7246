/*
 * gguf_model.c: a GGUF file read as a model: its configuration from the
 * {arch}.* and tokenizer.ggml.* keys, and the llama.cpp names of its
 * tensors against the Hugging Face ones.
 */
#include "gguf_model.h"

#include "base/fileio.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The llama.cpp names of the tensors of a model: the whole-model ones,
 * and each layer's (after "model.layers.N." and "blk.N."). A pair holds
 * for every family but where `when` says: ffn_up is up_proj beside
 * ffn_gate, or gate and up rows in one (Phi-3's gate_up_proj); ffn_norm is
 * Llama's post_attention_layernorm, but Gemma's pre_feedforward_layernorm
 * (its post_attention_layernorm follows attention: post_attention_norm). */
typedef enum pair_when { FOR_ALL = 0, FOR_SPLIT_GATE_UP, FOR_FUSED_GATE_UP, FOR_PRE_NORMS, FOR_SANDWICH_NORMS } pair_when;

typedef struct name_pair {
    const char *hf, *gguf;
    pair_when when;
} name_pair;

static const name_pair g_fixed[] = {{"model.embed_tokens.weight", "token_embd.weight", FOR_ALL},
                                    {"model.norm.weight", "output_norm.weight", FOR_ALL},
                                    {"lm_head.weight", "output.weight", FOR_ALL}};

static const name_pair g_per_layer[] = {{"input_layernorm.weight", "attn_norm.weight", FOR_ALL},
                                        {"self_attn.q_proj.weight", "attn_q.weight", FOR_ALL},
                                        {"self_attn.k_proj.weight", "attn_k.weight", FOR_ALL},
                                        {"self_attn.v_proj.weight", "attn_v.weight", FOR_ALL},
                                        {"self_attn.qkv_proj.weight", "attn_qkv.weight", FOR_ALL},
                                        {"self_attn.q_proj.bias", "attn_q.bias", FOR_ALL},
                                        {"self_attn.k_proj.bias", "attn_k.bias", FOR_ALL},
                                        {"self_attn.v_proj.bias", "attn_v.bias", FOR_ALL},
                                        {"self_attn.q_norm.weight", "attn_q_norm.weight", FOR_ALL},
                                        {"self_attn.k_norm.weight", "attn_k_norm.weight", FOR_ALL},
                                        {"self_attn.o_proj.weight", "attn_output.weight", FOR_ALL},
                                        {"self_attn.o_proj.bias", "attn_output.bias", FOR_ALL},
                                        {"post_attention_layernorm.weight", "ffn_norm.weight", FOR_PRE_NORMS},
                                        {"pre_feedforward_layernorm.weight", "ffn_norm.weight", FOR_SANDWICH_NORMS},
                                        {"post_attention_layernorm.weight", "post_attention_norm.weight",
                                         FOR_SANDWICH_NORMS},
                                        {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", FOR_SANDWICH_NORMS},
                                        {"mlp.gate_proj.weight", "ffn_gate.weight", FOR_SPLIT_GATE_UP},
                                        {"mlp.up_proj.weight", "ffn_up.weight", FOR_SPLIT_GATE_UP},
                                        {"mlp.gate_up_proj.weight", "ffn_up.weight", FOR_FUSED_GATE_UP},
                                        {"mlp.down_proj.weight", "ffn_down.weight", FOR_ALL}};

/* Whether pair p holds for family arch. */
static bool pair_holds(const name_pair *p, snug_arch arch)
{
    const snug_arch_info *fam = snug_arch_get(arch);
    switch (p->when) {
    case FOR_SPLIT_GATE_UP: return !fam->fused_gate_up;
    case FOR_FUSED_GATE_UP: return fam->fused_gate_up;
    case FOR_PRE_NORMS: return !fam->sandwich_norms;
    case FOR_SANDWICH_NORMS: return fam->sandwich_norms;
    default: return true;
    }
}

/* The other name of `name` (to_gguf: a Hugging Face name; else a GGUF one)
 * into out; false when it has none. */
static bool map_name(snug_arch arch, const char *name, bool to_gguf, char *out, size_t size)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_fixed); i++)
        if (strcmp(name, to_gguf ? g_fixed[i].hf : g_fixed[i].gguf) == 0) {
            snprintf(out, size, "%s", to_gguf ? g_fixed[i].gguf : g_fixed[i].hf);
            return true;
        }
    int layer = -1, used = 0;
    if (sscanf(name, to_gguf ? "model.layers.%d.%n" : "blk.%d.%n", &layer, &used) != 1 || used == 0 ||
        layer < 0)
        return false;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_per_layer); i++) {
        const name_pair *p = &g_per_layer[i];
        if (pair_holds(p, arch) && strcmp(name + used, to_gguf ? p->hf : p->gguf) == 0) {
            snprintf(out, size, to_gguf ? "blk.%d.%s" : "model.layers.%d.%s", layer,
                     to_gguf ? p->gguf : p->hf);
            return true;
        }
    }
    return false;
}

bool snug_gguf_tensor_name(snug_arch arch, const char *hf, char *out, size_t size)
{
    return map_name(arch, hf, true, out, size);
}

bool snug_gguf_hf_name(snug_arch arch, const char *gguf, char *out, size_t size)
{
    return map_name(arch, gguf, false, out, size);
}

bool snug_gguf_config_tensor(const char *name)
{
    return strcmp(name, "rope_freqs.weight") == 0 || strcmp(name, "rope_factors_long.weight") == 0 ||
           strcmp(name, "rope_factors_short.weight") == 0;
}

/* The n F32 values of tensor `name` of g, each finite and above 0, into
 * out: LongRoPE's factors. */
static snug_status read_factors(const snug_gguf_file *g, const char *name, int64_t n, float *out, snug_error *err)
{
    const snug_gguf_tensor *t = snug_gguf_find_tensor(g, name);
    if (!t || t->type != SNUG_GGML_F32 || t->n_dims != 1 || t->ne[0] != (uint64_t)n)
        return snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s' is %s%s of %llu values; expected F32, one value per "
                           "rotary frequency (%lld)", g->path, name, t ? "" : "missing: ",
                           t ? snug_ggml_type_name(t->type) : "none", t ? (unsigned long long)t->ne[0] : 0ULL,
                           (long long)n);
    snug_status st = snug_pread_full(g->fd, out, (size_t)n * sizeof(float), g->data_start + t->offset, g->path, err);
    for (int64_t i = 0; st == SNUG_OK && i < n; i++)
        if (!(isfinite(out[i]) && out[i] > 0.0f && out[i] <= 1e6f))
            st = snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s': value %lld is %g; expected a factor in (0, 1e6]",
                             g->path, name, (long long)i, (double)out[i]);
    return st;
}

/* LongRoPE as llama.cpp's phi3 files hold it: tensors rope_factors_short
 * and rope_factors_long, {arch}.rope.scaling.original_context_length and
 * (when given) {arch}.rope.scaling.attn_factor. */
static snug_status read_longrope(const snug_gguf_file *g, const char *arch, snug_model_config *c, snug_error *err)
{
    snug_rope_scaling *rs = &c->rope_scaling;
    int64_t half = snug_config_rot_dims(c) / 2;
    if (half > SNUG_MAX_ROPE_FACTORS)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: LongRoPE over %lld rotary frequencies, more than the %d snug "
                           "takes", g->path, (long long)half, SNUG_MAX_ROPE_FACTORS);
    rs->type = SNUG_ROPE_LONGROPE;
    rs->n_factors = (int32_t)half;
    snug_status st = read_factors(g, "rope_factors_short.weight", half, rs->short_factor, err);
    if (st == SNUG_OK) st = read_factors(g, "rope_factors_long.weight", half, rs->long_factor, err);
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", arch);
    if (st == SNUG_OK)
        st = snug_gguf_get_int(g, key, true, 1, SNUG_MAX_POSITIONS, &rs->original_max_position_embeddings, NULL, err);
    snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", arch);
    if (st == SNUG_OK) st = snug_gguf_get_float(g, key, false, 1e-6, 1e6, &rs->attention_factor, NULL, err);
    return st;
}

/* c's per-frequency rotary factors from the tensor rope_freqs.weight, when
 * g has it: F32, one per rotary frequency, each finite and positive; no
 * other rope scaling beside it. */
static snug_status rope_freq_factors(const snug_gguf_file *g, snug_model_config *c, snug_error *err)
{
    const snug_gguf_tensor *t = snug_gguf_find_tensor(g, "rope_freqs.weight");
    c->n_rope_freq_factors = 0;
    if (!t) return SNUG_OK;
    int64_t half = snug_config_rot_dims(c) / 2;
    if (t->type != SNUG_GGML_F32 || t->n_dims != 1 || t->ne[0] != (uint64_t)half)
        return snug_errorf(err, SNUG_FORMAT, "%s: tensor 'rope_freqs.weight' is %s of %llu values; expected F32, "
                           "one value per rotary frequency (rotary dimensions %d / 2 = %lld)", g->path,
                           snug_ggml_type_name(t->type), (unsigned long long)t->ne[0], snug_config_rot_dims(c),
                           (long long)half);
    if (half > SNUG_MAX_ROPE_FACTORS)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor 'rope_freqs.weight': %lld rotary factors, more than "
                           "the %d snug takes", g->path, (long long)half, SNUG_MAX_ROPE_FACTORS);
    if (c->rope_scaling.type != SNUG_ROPE_DEFAULT)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor 'rope_freqs.weight' beside "
                           "rope.scaling.type '%s': one rope scaling at a time", g->path,
                           snug_rope_type_name(c->rope_scaling.type));
    snug_status st = snug_pread_full(g->fd, c->rope_freq_factors, (size_t)half * sizeof(float),
                                     g->data_start + t->offset, g->path, err);
    if (st != SNUG_OK) return st;
    for (int64_t i = 0; i < half; i++)
        if (!(isfinite(c->rope_freq_factors[i]) && c->rope_freq_factors[i] > 0.0f))
            return snug_errorf(err, SNUG_FORMAT, "%s: tensor 'rope_freqs.weight': value %lld is %g; expected a "
                               "finite factor above 0", g->path, (long long)i, (double)c->rope_freq_factors[i]);
    c->n_rope_freq_factors = (int32_t)half;
    return SNUG_OK;
}

/* The value of key "{arch}.{suffix}" of g as an integer in [lo, hi] into
 * *v (left as it is when absent and not required). */
static snug_status arch_int(const snug_gguf_file *g, const char *arch, const char *suffix, bool required,
                            int64_t lo, int64_t hi, int64_t *v, snug_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return snug_gguf_get_int(g, key, required, lo, hi, v, NULL, err);
}

/* As arch_int, for a real that may be absent. */
static snug_status arch_float(const snug_gguf_file *g, const char *arch, const char *suffix, double lo,
                              double hi, double *v, snug_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return snug_gguf_get_float(g, key, false, lo, hi, v, NULL, err);
}

/* The sizes of c from the {arch}.* keys: hidden, MLP, layers, heads, KV
 * heads, head size (key_length, else hidden / heads), rotary dimensions
 * (rope.dimension_count, else all) and positions. */
static snug_status read_sizes(const snug_gguf_file *g, const snug_arch_info *fam, snug_model_config *c,
                              snug_error *err)
{
    const char *a = fam->gguf;
    int64_t v[5] = {0};
    static const char *const keys[] = {"embedding_length", "feed_forward_length", "block_count",
                                       "attention.head_count", "context_length"};
    snug_status st = SNUG_OK;
    for (int i = 0; i < 5 && st == SNUG_OK; i++) st = arch_int(g, a, keys[i], true, 1, INT32_MAX, &v[i], err);
    if (st != SNUG_OK) return st;
    c->hidden_size = (int32_t)v[0], c->intermediate_size = (int32_t)v[1];
    c->n_layers = (int32_t)v[2], c->n_heads = (int32_t)v[3];
    c->max_position_embeddings = v[4];
    int64_t x = c->n_heads;
    st = arch_int(g, a, "attention.head_count_kv", false, 1, INT32_MAX, &x, err);
    if (st != SNUG_OK) return st;
    c->n_kv_heads = (int32_t)x;
    x = c->hidden_size % c->n_heads == 0 ? c->hidden_size / c->n_heads : 0;
    st = arch_int(g, a, "attention.key_length", false, 2, 4096, &x, err);
    if (st != SNUG_OK) return st;
    if (x == 0)
        return snug_errorf(err, SNUG_FORMAT, "%s: %s.attention.head_count %d does not divide "
                           "%s.embedding_length %d and no %s.attention.key_length gives the head size",
                           g->path, a, c->n_heads, a, c->hidden_size, a);
    c->head_dim = (int32_t)x;
    st = arch_int(g, a, "rope.dimension_count", false, 0, 4096, &x, err);
    if (st != SNUG_OK) return st;
    if (x != c->head_dim && (!fam->partial_rotary || x < 2 || x > c->head_dim || x % 2 != 0))
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: %s.rope.dimension_count %lld is not the head size %d "
                           "(%s)", g->path, a, (long long)x, c->head_dim,
                           fam->partial_rotary ? "expected an even count up to it"
                                               : "partial rotary embeddings are not part of this architecture");
    c->n_rot = x == c->head_dim ? 0 : (int32_t)x;
    return SNUG_OK;
}

/* c's rope base and scaling, and its norm epsilon. */
static snug_status read_rope(const snug_gguf_file *g, const snug_arch_info *fam, snug_model_config *c,
                             snug_error *err)
{
    const char *a = fam->gguf;
    c->rms_norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    snug_status st = arch_float(g, a, "attention.layer_norm_rms_epsilon", 1e-30, 0.5, &c->rms_norm_eps, err);
    if (st == SNUG_OK) st = arch_float(g, a, "rope.freq_base", 1e-6, 1e15, &c->rope_theta, err);
    if (st != SNUG_OK) return st;
    c->rope_scaling.factor = 1.0;
    const char *scaling = NULL;
    bool has = false;
    char key[128], shown[SNUG_SHOWN_MAX];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    st = snug_gguf_get_string(g, key, false, &scaling, &has, err);
    if (st != SNUG_OK) return st;
    if (snug_gguf_find_tensor(g, "rope_factors_long.weight") || snug_gguf_find_tensor(g, "rope_factors_short.weight"))
        return read_longrope(g, a, c, err);
    if (has && strcmp(scaling, "none") != 0) {
        if (strcmp(scaling, "linear") != 0)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: %s '%s' is not supported by the GGUF "
                               "import (linear is)", g->path, key, snug_str_shown(scaling, shown, sizeof shown));
        c->rope_scaling.type = SNUG_ROPE_LINEAR;
        snprintf(key, sizeof key, "%s.rope.scaling.factor", a);
        st = snug_gguf_get_float(g, key, true, 1.0, 1e6, &c->rope_scaling.factor, NULL, err);
        if (st != SNUG_OK) return st;
    }
    return rope_freq_factors(g, c, err);
}

/* The sliding window of a family whose layers slide in a pattern (Gemma
 * 3 and 2), as llama.cpp reads it: {arch}.attention.sliding_window
 * (required), {arch}.attention.sliding_window_pattern (every that many-th
 * layer attends to all; the family's 6 or 2 when absent), Gemma 3's
 * sliding layers' rope base {arch}.rope.freq_base_swa (10000 when absent,
 * unscaled), Gemma 2's soft-caps, and the query scale llama.cpp gives
 * these files (snug_gguf_query_pre_attn_scalar). */
static snug_status read_window(const snug_gguf_file *g, const snug_arch_info *fam, snug_model_config *c,
                               snug_error *err)
{
    const char *a = fam->gguf;
    int64_t window = 0, pattern = fam->window_pattern;
    snug_status st = arch_int(g, a, "attention.sliding_window", true, 1, (int64_t)1 << 28, &window, err);
    if (st == SNUG_OK) st = arch_int(g, a, "attention.sliding_window_pattern", false, 1, SNUG_MAX_LAYERS, &pattern, err);
    c->rope_local_theta = fam->local_rope ? 10000.0 : 0;
    if (st == SNUG_OK && fam->local_rope) st = arch_float(g, a, "rope.freq_base_swa", 1e-6, 1e15, &c->rope_local_theta, err);
    /* Gemma 2's soft-caps ({arch}.attn_logit_softcapping, .final_logit_softcapping: 0 when absent) */
    if (st == SNUG_OK && fam->softcap) st = arch_float(g, a, "attn_logit_softcapping", 0, 1e9, &c->attn_softcap, err);
    if (st == SNUG_OK && fam->softcap) st = arch_float(g, a, "final_logit_softcapping", 0, 1e9, &c->final_softcap, err);
    if (st != SNUG_OK) return st;
    c->sliding_window = window;
    snug_config_set_sliding(c, (int32_t)pattern);
    c->query_pre_attn_scalar = snug_gguf_query_pre_attn_scalar(c);
    return SNUG_OK;
}

double snug_gguf_query_pre_attn_scalar(const snug_model_config *c)
{
    bool big = (c->arch == SNUG_ARCH_GEMMA3 && c->n_layers == 62) || (c->arch == SNUG_ARCH_GEMMA2 && c->n_layers == 46);
    return big && c->hidden_size % c->n_heads == 0 ? (double)(c->hidden_size / c->n_heads) : (double)c->head_dim;
}

snug_status snug_gguf_model_config(const snug_gguf_file *g, snug_model_config *c, snug_error *err)
{
    const char *arch = NULL;
    snug_status st = snug_gguf_get_string(g, "general.architecture", true, &arch, NULL, err);
    if (st != SNUG_OK) return st;
    char shown[SNUG_SHOWN_MAX];
    const snug_arch_info *fam = snug_arch_by_gguf(arch);
    if (!fam)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: general.architecture is '%s'; snug runs %s",
                           g->path, snug_str_shown(arch, shown, sizeof shown), snug_arch_list(true));
    memset(c, 0, sizeof *c);
    c->arch = fam->arch;
    snprintf(c->architecture, sizeof c->architecture, "%s", fam->architecture);
    c->rope_interleaved = fam->gguf_interleaved;
    c->qkv_bias = fam->qkv_bias || (fam->attention_bias && snug_gguf_find_tensor(g, "blk.0.attn_q.bias"));
    c->o_bias = !fam->qkv_bias && fam->attention_bias && snug_gguf_find_tensor(g, "blk.0.attn_output.bias");
    st = read_sizes(g, fam, c, err);
    if (st == SNUG_OK) st = read_rope(g, fam, c, err);
    if (st == SNUG_OK && fam->window == SNUG_WINDOW_PATTERN) st = read_window(g, fam, c, err);
    if (st != SNUG_OK) return st;
    const snug_gguf_tensor *emb = snug_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2)
        return snug_errorf(err, SNUG_FORMAT, "%s: no 2-D tensor 'token_embd.weight'", g->path);
    int64_t x = (int64_t)SNUG_MIN(emb->ne[1], (uint64_t)INT32_MAX);
    st = arch_int(g, fam->gguf, "vocab_size", false, 1, INT32_MAX, &x, err);
    if (st != SNUG_OK) return st;
    c->vocab_size = (int32_t)x;
    int64_t bos = -1, eos = -1;
    bool has_eos = false;
    st = snug_gguf_get_int(g, "tokenizer.ggml.bos_token_id", false, 0, INT32_MAX, &bos, NULL, err);
    if (st == SNUG_OK)
        st = snug_gguf_get_int(g, "tokenizer.ggml.eos_token_id", false, 0, INT32_MAX, &eos,
                               &has_eos, err);
    if (st != SNUG_OK) return st;
    c->bos_token_id = (int32_t)bos;
    if (has_eos) c->eos_token_ids[c->n_eos++] = (int32_t)eos;
    c->dtype = emb->type == SNUG_GGML_BF16  ? SNUG_DTYPE_BF16
               : emb->type == SNUG_GGML_F16 ? SNUG_DTYPE_F16
                                            : SNUG_DTYPE_F32;
    return snug_config_validate(c, g->path, err);
}

const char *snug_gguf_arch_name(snug_arch arch)
{
    const snug_arch_info *fam = snug_arch_get(arch);
    return fam->gguf ? fam->gguf : "llama";
}

/* "{arch}.{suffix}" into key (size bytes); returns key. */
static const char *arch_key(char *key, size_t size, const char *arch, const char *suffix)
{
    snprintf(key, size, "%s.%s", arch, suffix);
    return key;
}

void snug_gguf_model_keys(snug_gguf_header *h, const snug_model_config *c, uint32_t align)
{
    const snug_rope_scaling *rs = &c->rope_scaling;
    const char *a = snug_gguf_arch_name(c->arch);
    char k[128];
    snug_gguf_put_string(h, "general.architecture", a);
    snug_gguf_put_u32(h, "general.alignment", align);
    snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "embedding_length"), (uint32_t)c->hidden_size);
    snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "feed_forward_length"), (uint32_t)c->intermediate_size);
    snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "block_count"), (uint32_t)c->n_layers);
    snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "attention.head_count"), (uint32_t)c->n_heads);
    snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "attention.key_length"), (uint32_t)c->head_dim);
    snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "attention.value_length"), (uint32_t)c->head_dim);
    snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "rope.dimension_count"), (uint32_t)snug_config_rot_dims(c));
    snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "context_length"),
                      (uint32_t)SNUG_MIN(c->max_position_embeddings, (int64_t)UINT32_MAX));
    snug_gguf_put_f32(h, arch_key(k, sizeof k, a, "rope.freq_base"), (float)c->rope_theta);
    snug_gguf_put_f32(h, arch_key(k, sizeof k, a, "attention.layer_norm_rms_epsilon"), (float)c->rms_norm_eps);
    if (rs->type == SNUG_ROPE_LINEAR) {
        snug_gguf_put_string(h, arch_key(k, sizeof k, a, "rope.scaling.type"), "linear");
        snug_gguf_put_f32(h, arch_key(k, sizeof k, a, "rope.scaling.factor"), (float)rs->factor);
    } else if (rs->type == SNUG_ROPE_LONGROPE) {
        snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "rope.scaling.original_context_length"),
                          (uint32_t)rs->original_max_position_embeddings);
        if (rs->attention_factor > 0)
            snug_gguf_put_f32(h, arch_key(k, sizeof k, a, "rope.scaling.attn_factor"), (float)rs->attention_factor);
    }
    if (snug_arch_get(c->arch)->window == SNUG_WINDOW_PATTERN && c->sliding_window > 0) {
        snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "attention.sliding_window"), (uint32_t)c->sliding_window);
        snug_gguf_put_u32(h, arch_key(k, sizeof k, a, "attention.sliding_window_pattern"),
                          (uint32_t)snug_config_sliding_pattern(c));
        if (snug_arch_get(c->arch)->local_rope)
            snug_gguf_put_f32(h, arch_key(k, sizeof k, a, "rope.freq_base_swa"), (float)c->rope_local_theta);
    }
    if (c->attn_softcap > 0) snug_gguf_put_f32(h, arch_key(k, sizeof k, a, "attn_logit_softcapping"), (float)c->attn_softcap);
    if (c->final_softcap > 0)
        snug_gguf_put_f32(h, arch_key(k, sizeof k, a, "final_logit_softcapping"), (float)c->final_softcap);
    if (c->bos_token_id >= 0) snug_gguf_put_u32(h, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_token_id);
    if (c->n_eos > 0) snug_gguf_put_u32(h, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_token_ids[0]);
}

void snug_gguf_llama3_factors(const snug_model_config *c, float *out)
{
    const snug_rope_scaling *rs = &c->rope_scaling;
    int32_t rot = snug_config_rot_dims(c);
    double orig = (double)rs->original_max_position_embeddings;
    for (int32_t i = 0; i < rot / 2; i++) {
        double w = 2 * M_PI * pow(c->rope_theta, (double)(2 * i) / (double)rot);
        double f = 1.0;
        if (w > orig / rs->low_freq_factor) {
            f = rs->factor;
        } else if (w >= orig / rs->high_freq_factor) {
            double s = (orig / w - rs->low_freq_factor) / (rs->high_freq_factor - rs->low_freq_factor);
            f = 1.0 / ((1 - s) / rs->factor + s);
        }
        out[i] = (float)f;
    }
}
