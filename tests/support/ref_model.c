/*
 * ref_model.c: the float64 reference forward pass of Hugging Face
 * LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM /
 * Phi3ForCausalLM / Gemma3ForCausalLM (see ref_model.h). Reads config.json
 * with jansson and the safetensors files with stdio; nothing from src/.
 *
 * The forward pass follows transformers' modeling_llama.py step by step, with
 * what modeling_qwen3.py, modeling_phi3.py and modeling_gemma3.py add:
 *   x = embed_tokens[token] * embed_scale   (gemma3: sqrt(hidden) in the weights' dtype)
 *   per layer: h = rmsnorm(x) * input_layernorm
 *              q, k, v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv
 *                (phi3: one qkv_proj whose rows are Wq, Wk, Wv)
 *              qwen3, gemma3: each head of q and of k = rmsnorm(head) * q_norm / k_norm
 *              rotate the first rotary_dim values of each head of q and k
 *                (half-split rotate_half layout within them) to the position,
 *                cos and sin scaled by the rope attention factor (longrope);
 *                gemma3's sliding layers with their own base, unscaled
 *              a = causal softmax(q k^T / sqrt(head_dim or query_pre_attn_scalar)) v,
 *                kv head = q head / group, keys limited to the last sliding_window
 *                positions on the sliding layers when set
 *              o = a Wo^T + bo;  gemma3: o = rmsnorm(o) * post_attention_layernorm
 *              x += o
 *              h = rmsnorm(x) * post_attention_layernorm (gemma3: pre_feedforward_layernorm)
 *              d = (act(h Wg^T) * (h Wu^T)) Wd^T, act silu (gemma3: gelu, tanh form)
 *                (phi3: one gate_up_proj whose rows are Wg, Wu)
 *              gemma3: d = rmsnorm(d) * post_feedforward_layernorm
 *              x += d
 *   logits = (rmsnorm(x) * norm) lm_head^T   (lm_head = embed_tokens when tied)
 * Fused tensors are split into the separate matrices when loaded, and
 * gemma3's norms of 1 + w get their 1 then, so the forward pass is one for
 * every family. Every step is done in double, one plain loop at a time.
 */
#include "support/ref_model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REF_MAX_SHARDS 64
#define REF_MAX_HEADER (64u << 20)

typedef struct ref_layer {
    double *attn_norm;       /* (hidden) */
    double *wq, *wk, *wv;    /* (q_dim, hidden), (kv_dim, hidden), (kv_dim, hidden) */
    double *wo;              /* (hidden, q_dim) */
    double *bq, *bk, *bv;    /* (q_dim), (kv_dim), (kv_dim); NULL when absent */
    double *bo;              /* (hidden); NULL when absent */
    double *q_norm, *k_norm; /* (head_dim) each; NULL unless qk_norm */
    double *attn_post_norm;  /* (hidden) the attention output's norm; NULL unless sandwich */
    double *ffn_norm;        /* (hidden) the MLP's input norm */
    double *ffn_post_norm;   /* (hidden) the MLP output's norm; NULL unless sandwich */
    double *w_gate, *w_up;   /* (inter, hidden) */
    double *w_down;          /* (hidden, inter) */
} ref_layer;

struct ref_model {
    ref_config cfg;
    double *embed;    /* (vocab, hidden) */
    ref_layer *layers; /* (n_layers) */
    double *norm;     /* (hidden) */
    double *lm_head;  /* (vocab, hidden); points at embed when tied */
    double *inv_freq; /* (rotary_dim / 2) */
    ref_config rope_local;  /* cfg with the sliding layers' rope (rope_local_theta > 0) */
    double *inv_freq_local; /* (rotary_dim / 2) theirs; NULL when they rotate as the others */
};

/* One safetensors file: its parsed header and where the data begins. */
typedef struct ref_shard {
    char *path;
    FILE *f;
    json_t *header;
    long long data_start, file_size;
} ref_shard;

typedef struct ref_files {
    ref_shard shards[REF_MAX_SHARDS];
    int n;
} ref_files;

/* ---- config.json ----------------------------------------------------------- */

static int get_int(json_t *root, const char *key, int *out, bool required, int dflt,
                   const char *path)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) {
            fprintf(stderr, "ref_model: %s: missing \"%s\"\n", path, key);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24)) {
        fprintf(stderr, "ref_model: %s: \"%s\" must be an integer in [1, 2^24]\n", path, key);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_num(json_t *obj, const char *key, double *out, bool required, double dflt,
                   const char *path)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) {
            fprintf(stderr, "ref_model: %s: missing \"%s\"\n", path, key);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    if (!json_is_number(v)) {
        fprintf(stderr, "ref_model: %s: \"%s\" must be a number\n", path, key);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

static int get_bool(json_t *root, const char *key, bool *out, bool dflt, const char *path)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v)) {
        fprintf(stderr, "ref_model: %s: \"%s\" must be true or false\n", path, key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* Reads the longrope factor list rs[key] (n positive numbers) into out. */
static int get_factors(json_t *rs, const char *key, int n, double *out, const char *path)
{
    json_t *a = json_object_get(rs, key);
    if (!json_is_array(a) || json_array_size(a) != (size_t)n) {
        fprintf(stderr, "ref_model: %s: rope_scaling.%s must be a list of %d numbers "
                "(rotary_dim / 2)\n", path, key, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_number(v) || !(json_number_value(v) > 0)) {
            fprintf(stderr, "ref_model: %s: rope_scaling.%s[%d] must be a number > 0\n", path,
                    key, i);
            return -1;
        }
        out[i] = json_number_value(v);
    }
    return 0;
}

/* Longrope, as transformers' _compute_longrope_parameters: the factor is
 * max_position_embeddings / original_max_position_embeddings when the config
 * names an original (phi3 at the top level; rope_scaling's is taken too),
 * else rope_scaling.factor with the original = max_position_embeddings; the
 * attention factor is rope_scaling.attention_factor, or sqrt(1 + ln(factor) /
 * ln(original)) when factor > 1, or 1. Needs cfg->rotary_dim. */
static int parse_longrope(json_t *root, json_t *rs, ref_config *cfg, const char *path)
{
    int n = cfg->rotary_dim / 2, max_pos = 0;
    cfg->rope_kind = REF_ROPE_LONGROPE;
    if (n > REF_ROPE_MAX_FACTORS) {
        fprintf(stderr, "ref_model: %s: longrope with more than %d frequencies\n", path,
                REF_ROPE_MAX_FACTORS);
        return -1;
    }
    cfg->rope_n_factors = n;
    if (get_factors(rs, "short_factor", n, cfg->rope_short_factor, path) ||
        get_factors(rs, "long_factor", n, cfg->rope_long_factor, path) ||
        get_int(root, "max_position_embeddings", &max_pos, true, 0, path))
        return -1;
    json_t *orig = json_object_get(root, "original_max_position_embeddings");
    if (!orig || json_is_null(orig)) orig = json_object_get(rs, "original_max_position_embeddings");
    if (orig && !json_is_null(orig)) {
        if (!json_is_integer(orig) || json_integer_value(orig) < 1) {
            fprintf(stderr, "ref_model: %s: original_max_position_embeddings must be an "
                    "integer >= 1\n", path);
            return -1;
        }
        cfg->rope_original_max_pos = (double)json_integer_value(orig);
        cfg->rope_factor = (double)max_pos / cfg->rope_original_max_pos;
    } else {
        cfg->rope_original_max_pos = max_pos;
        if (get_num(rs, "factor", &cfg->rope_factor, false, 1.0, path)) return -1;
    }
    double computed = cfg->rope_factor <= 1.0
                          ? 1.0
                          : sqrt(1.0 + log(cfg->rope_factor) / log(cfg->rope_original_max_pos));
    if (get_num(rs, "attention_factor", &cfg->rope_attn_factor, false, computed, path)) return -1;
    if (!(cfg->rope_attn_factor > 0) || !isfinite(cfg->rope_attn_factor)) {
        fprintf(stderr, "ref_model: %s: longrope attention factor %g is not a number > 0\n",
                path, cfg->rope_attn_factor);
        return -1;
    }
    return 0;
}

static int parse_rope_scaling(json_t *root, json_t *rs, ref_config *cfg, const char *path)
{
    cfg->rope_kind = REF_ROPE_DEFAULT;
    cfg->rope_factor = 1.0;
    cfg->rope_attn_factor = 1.0;
    if (!rs || json_is_null(rs)) return 0;
    if (!json_is_object(rs)) {
        fprintf(stderr, "ref_model: %s: rope_scaling must be an object or null\n", path);
        return -1;
    }
    json_t *t = json_object_get(rs, "rope_type");
    if (!t) t = json_object_get(rs, "type");
    const char *type = json_string_value(t);
    if (!type) {
        fprintf(stderr, "ref_model: %s: rope_scaling has no rope_type\n", path);
        return -1;
    }
    if (strcmp(type, "default") == 0) return 0;
    if (strcmp(type, "linear") == 0) {
        cfg->rope_kind = REF_ROPE_LINEAR;
        if (get_num(rs, "factor", &cfg->rope_factor, true, 0, path)) return -1;
    } else if (strcmp(type, "llama3") == 0) {
        cfg->rope_kind = REF_ROPE_LLAMA3;
        if (get_num(rs, "factor", &cfg->rope_factor, true, 0, path) ||
            get_num(rs, "low_freq_factor", &cfg->rope_low_freq_factor, true, 0, path) ||
            get_num(rs, "high_freq_factor", &cfg->rope_high_freq_factor, true, 0, path) ||
            get_num(rs, "original_max_position_embeddings", &cfg->rope_original_max_pos, true, 0,
                    path))
            return -1;
        if (!(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor) ||
            !(cfg->rope_low_freq_factor > 0) || !(cfg->rope_original_max_pos > 0)) {
            fprintf(stderr, "ref_model: %s: llama3 rope_scaling needs 0 < low < high\n", path);
            return -1;
        }
    } else if (strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0) {
        if (parse_longrope(root, rs, cfg, path)) return -1;
    } else {
        fprintf(stderr, "ref_model: %s: rope type \"%s\" not implemented\n", path, type);
        return -1;
    }
    if (!(cfg->rope_factor > 0)) {
        fprintf(stderr, "ref_model: %s: rope_scaling factor must be > 0\n", path);
        return -1;
    }
    return 0;
}

/* Refuses layer_types other than "full_attention" (qwen2/qwen3 name the
 * sliding layers there). */
static int check_layer_types(json_t *root, const char *path)
{
    json_t *lt = json_object_get(root, "layer_types");
    if (!lt || json_is_null(lt)) return 0;
    size_t i;
    json_t *v;
    if (!json_is_array(lt)) goto bad;
    json_array_foreach(lt, i, v) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "full_attention") != 0) goto bad;
    }
    return 0;
bad:
    fprintf(stderr, "ref_model: %s: layer_types other than \"full_attention\" not implemented\n",
            path);
    return -1;
}

/* v rounded to the nearest value (ties to even) with mant_bits bits after
 * the leading one: a bfloat16 (7) or float16 (10) of a normal v > 0. */
static double round_mantissa(double v, int mant_bits)
{
    int e;
    frexp(v, &e); /* v = f 2^e, f in [0.5, 1): the leading bit is 2^(e - 1) */
    double quantum = ldexp(1.0, e - 1 - mant_bits);
    return nearbyint(v / quantum) * quantum;
}

/* A soft-cap field: absent, dflt; null, 0 (none); else a number > 0. */
static int get_softcap(json_t *root, const char *key, double dflt, double *out, const char *path)
{
    json_t *v = json_object_get(root, key);
    *out = !v ? dflt : 0;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || !(json_number_value(v) > 0)) {
        fprintf(stderr, "ref_model: %s: %s must be a number > 0 or null\n", path, key);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

/* Gemma3TextConfig's fields beyond Llama's, or Gemma2Config's (gemma2: no
 * q/k norms, one rope base, every other layer sliding, soft-caps 50 and 30
 * by default) (see ref_config_load): needs cfg->n_layers and
 * cfg->hidden_size. */
static int parse_gemma(json_t *root, ref_config *cfg, bool gemma2, const char *path)
{
    if (get_softcap(root, "attn_logit_softcapping", gemma2 ? 50.0 : 0, &cfg->attn_softcap, path) ||
        get_softcap(root, "final_logit_softcapping", gemma2 ? 30.0 : 0, &cfg->final_softcap, path))
        return -1;
    bool bidirectional = false;
    if (get_bool(root, "use_bidirectional_attention", &bidirectional, false, path)) return -1;
    if (bidirectional) {
        fprintf(stderr, "ref_model: %s: use_bidirectional_attention not implemented\n", path);
        return -1;
    }
    json_t *act = json_object_get(root, "hidden_activation");
    if (act && !json_is_null(act) &&
        (!json_is_string(act) || strcmp(json_string_value(act), "gelu_pytorch_tanh") != 0)) {
        fprintf(stderr, "ref_model: %s: hidden_activation other than gelu_pytorch_tanh not "
                "implemented\n", path);
        return -1;
    }
    cfg->act = REF_ACT_GELU_TANH;
    cfg->norm_plus_one = cfg->sandwich_norms = true;
    cfg->qk_norm = !gemma2;
    if (get_num(root, "query_pre_attn_scalar", &cfg->query_pre_attn_scalar, false, 256.0, path) ||
        get_num(root, "rope_local_base_freq", &cfg->rope_local_theta, false, gemma2 ? cfg->rope_theta : 10000.0,
                path))
        return -1;
    if (!(cfg->query_pre_attn_scalar > 0) || !(cfg->rope_local_theta > 0)) {
        fprintf(stderr, "ref_model: %s: query_pre_attn_scalar and rope_local_base_freq must be "
                "> 0\n", path);
        return -1;
    }
    /* sliding_window: 4096 when absent, null for none (the sliding layers
     * keep their rope base: Gemma3DecoderLayer picks it by layer type) */
    json_t *sw = json_object_get(root, "sliding_window");
    if (sw && json_is_null(sw)) cfg->sliding_window = 0;
    else if (get_int(root, "sliding_window", &cfg->sliding_window, false, 4096, path)) return -1;
    /* which layers slide: layer_types, else every layer but each
     * sliding_window_pattern-th */
    json_t *lt = json_object_get(root, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || json_array_size(lt) != (size_t)cfg->n_layers) {
            fprintf(stderr, "ref_model: %s: layer_types must be a list of num_hidden_layers "
                    "entries\n", path);
            return -1;
        }
        for (int l = 0; l < cfg->n_layers; l++) {
            const char *t = json_string_value(json_array_get(lt, (size_t)l));
            bool sliding = t && strcmp(t, "sliding_attention") == 0;
            if (!sliding && !(t && strcmp(t, "full_attention") == 0)) {
                fprintf(stderr, "ref_model: %s: layer_types[%d] is neither \"sliding_attention\" "
                        "nor \"full_attention\"\n", path, l);
                return -1;
            }
            cfg->layer_sliding[l] = sliding;
        }
    } else {
        int pattern = gemma2 ? 2 : 6;
        if (get_int(root, "sliding_window_pattern", &pattern, false, pattern, path)) return -1;
        for (int l = 0; l < cfg->n_layers; l++) cfg->layer_sliding[l] = (l + 1) % pattern != 0;
    }
    /* Gemma3TextScaledWordEmbedding: embed_scale = torch.tensor(hidden **
     * 0.5), a float32, multiplied in as embed_scale.to(weight.dtype) */
    json_t *dt = json_object_get(root, "dtype");
    if (!dt || json_is_null(dt)) dt = json_object_get(root, "torch_dtype");
    const char *dtype = json_string_value(dt);
    cfg->embed_scale = (double)(float)sqrt((double)cfg->hidden_size);
    if (dtype && strcmp(dtype, "bfloat16") == 0) cfg->embed_scale = round_mantissa(cfg->embed_scale, 7);
    if (dtype && strcmp(dtype, "float16") == 0) cfg->embed_scale = round_mantissa(cfg->embed_scale, 10);
    return 0;
}

int ref_config_load(const char *path, ref_config *cfg)
{
    int rc = -1;
    json_error_t jerr;
    memset(cfg, 0, sizeof *cfg);
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        fprintf(stderr, "ref_model: %s: %s (line %d)\n", path, jerr.text, jerr.line);
        goto done;
    }
    if (!json_is_object(root)) {
        fprintf(stderr, "ref_model: %s: not a JSON object\n", path);
        goto done;
    }
    const char *type = json_string_value(json_object_get(root, "model_type"));
    bool llama = type && strcmp(type, "llama") == 0, mistral = type && strcmp(type, "mistral") == 0;
    bool qwen2 = type && strcmp(type, "qwen2") == 0, qwen3 = type && strcmp(type, "qwen3") == 0;
    bool phi3 = type && strcmp(type, "phi3") == 0, gemma2 = type && strcmp(type, "gemma2") == 0;
    bool gemma3 = gemma2 || (type && strcmp(type, "gemma3_text") == 0); /* (the Gemma path: both) */
    if (!llama && !mistral && !qwen2 && !qwen3 && !phi3 && !gemma3) {
        fprintf(stderr, "ref_model: %s: model_type must be \"llama\", \"mistral\", \"qwen2\", "
                "\"qwen3\", \"phi3\", \"gemma2\" or \"gemma3_text\"\n", path);
        goto done;
    }
    json_t *rp = json_object_get(root, "rope_parameters");
    if (rp && !json_is_null(rp)) {
        fprintf(stderr, "ref_model: %s: rope_parameters not implemented\n", path);
        goto done;
    }
    /* Mistral and Phi3 (Phi3Model takes the sliding-window mask whenever
     * config.sliding_window is not None): attention sees the last
     * sliding_window positions (itself included) when it is a number; null
     * means no window. Qwen2/Qwen3 have it only with use_sliding_window,
     * refused below. */
    cfg->sliding_window = 0;
    if ((mistral || phi3) && json_is_integer(json_object_get(root, "sliding_window"))) {
        json_int_t w = json_integer_value(json_object_get(root, "sliding_window"));
        if (w < 0 || w > (1 << 30)) {
            fprintf(stderr, "ref_model: %s: sliding_window %lld out of range\n", path, (long long)w);
            goto done;
        }
        cfg->sliding_window = (int)w;
    }
    /* (Gemma3TextConfig has hidden_activation instead, read below) */
    const char *act = gemma3 ? NULL : json_string_value(json_object_get(root, "hidden_act"));
    if (act && strcmp(act, "silu") != 0) {
        fprintf(stderr, "ref_model: %s: hidden_act \"%s\" not implemented\n", path, act);
        goto done;
    }
    bool mlp_bias = false, use_sliding = false;
    double partial = 1.0;
    if (get_int(root, "hidden_size", &cfg->hidden_size, true, 0, path) ||
        get_int(root, "intermediate_size", &cfg->intermediate_size, true, 0, path) ||
        get_int(root, "num_hidden_layers", &cfg->n_layers, true, 0, path) ||
        get_int(root, "num_attention_heads", &cfg->n_heads, true, 0, path) ||
        get_int(root, "num_key_value_heads", &cfg->n_kv_heads, false, gemma3 ? 4 : cfg->n_heads,
                path) ||
        get_int(root, "vocab_size", &cfg->vocab_size, true, 0, path) ||
        get_num(root, "rms_norm_eps", &cfg->rms_norm_eps, false, phi3 ? 1e-5 : 1e-6, path) ||
        get_num(root, "rope_theta", &cfg->rope_theta, false, gemma3 && !gemma2 ? 1000000.0 : 10000.0, path) ||
        get_num(root, "partial_rotary_factor", &partial, false, 1.0, path) ||
        get_bool(root, "tie_word_embeddings", &cfg->tie_word_embeddings, gemma3, path) ||
        get_bool(root, "attention_bias", &cfg->attention_bias, false, path) ||
        get_bool(root, "mlp_bias", &mlp_bias, false, path) ||
        get_bool(root, "use_sliding_window", &use_sliding, false, path) ||
        (!gemma3 && check_layer_types(root, path)))
        goto done;
    if (cfg->n_layers > REF_MAX_LAYERS) {
        fprintf(stderr, "ref_model: %s: more than %d layers\n", path, REF_MAX_LAYERS);
        goto done;
    }
    /* Qwen3Config's head_dim defaults to 128, Gemma3TextConfig's to 256; the
     * others' to hidden / heads. */
    int head_dim_default = qwen3 ? 128 : gemma3 ? 256 : cfg->hidden_size / cfg->n_heads;
    if (!qwen3 && !gemma3 && cfg->hidden_size % cfg->n_heads != 0 &&
        !json_object_get(root, "head_dim")) {
        fprintf(stderr, "ref_model: %s: hidden_size not divisible by heads\n", path);
        goto done;
    }
    if (get_int(root, "head_dim", &cfg->head_dim, false, head_dim_default, path)) goto done;
    if (mlp_bias || use_sliding) {
        fprintf(stderr, "ref_model: %s: mlp_bias / use_sliding_window not implemented\n", path);
        goto done;
    }
    if (cfg->n_heads % cfg->n_kv_heads != 0 || cfg->head_dim % 2 != 0) {
        fprintf(stderr, "ref_model: %s: heads %% kv heads or head_dim %% 2 is not 0\n", path);
        goto done;
    }
    /* What the family is, as fields the forward pass reads. Qwen2: q/k/v
     * biases always, never an o bias. Phi3: no biases at all (Phi3Attention
     * makes qkv_proj and o_proj with bias=False whatever attention_bias
     * says), fused qkv and gate_up. Qwen3: attention_bias on all four, per-head
     * q/k norms. Llama, Mistral: attention_bias on all four. Gemma3: as
     * Qwen3, and what parse_gemma3 reads. Mistral and Phi3 slide on every
     * layer (when sliding_window is set). */
    cfg->qkv_bias = qwen2 || (!phi3 && cfg->attention_bias);
    cfg->o_bias = !qwen2 && !phi3 && cfg->attention_bias;
    cfg->qk_norm = qwen3;
    cfg->fused_qkv = cfg->fused_gate_up = phi3;
    cfg->act = REF_ACT_SILU;
    cfg->embed_scale = 1.0;
    for (int l = 0; l < cfg->n_layers; l++) cfg->layer_sliding[l] = mistral || phi3;
    if (gemma3 && parse_gemma(root, cfg, gemma2, path)) goto done;
    /* Phi3 turns the first int(head_dim * partial_rotary_factor) values of
     * each head (apply_rotary_pos_emb splits off the rest); the others'
     * rope covers the whole head. */
    if (partial != 1.0 && !phi3) {
        fprintf(stderr, "ref_model: %s: partial_rotary_factor is read for phi3 only\n", path);
        goto done;
    }
    cfg->rotary_dim = (int)((double)cfg->head_dim * partial);
    if (!(partial > 0 && partial <= 1.0) || cfg->rotary_dim < 2 || cfg->rotary_dim % 2 != 0) {
        fprintf(stderr, "ref_model: %s: partial_rotary_factor %g gives rotary_dim %d (must be "
                "even, in [2, head_dim])\n", path, partial, cfg->rotary_dim);
        goto done;
    }
    if (parse_rope_scaling(root, json_object_get(root, "rope_scaling"), cfg, path)) goto done;
    rc = 0;
done:
    json_decref(root);
    return rc;
}

/* ---- rotary embedding -------------------------------------------------------- */

/* rotary_dim, with 0 (a hand-made config) meaning the whole head */
static int rope_dims(const ref_config *cfg)
{
    return cfg->rotary_dim > 0 ? cfg->rotary_dim : cfg->head_dim;
}

void ref_rope_inv_freq(const ref_config *cfg, double *inv_freq)
{
    int d = rope_dims(cfg);
    for (int i = 0; i < d / 2; i++) {
        double f = 1.0 / pow(cfg->rope_theta, (double)(2 * i) / (double)d);
        if (cfg->rope_kind == REF_ROPE_LINEAR) {
            f = f / cfg->rope_factor;
        } else if (cfg->rope_kind == REF_ROPE_LLAMA3) {
            double orig = cfg->rope_original_max_pos;
            double low = cfg->rope_low_freq_factor, high = cfg->rope_high_freq_factor;
            double low_freq_wavelen = orig / low;
            double high_freq_wavelen = orig / high;
            double wavelen = 2.0 * M_PI / f;
            if (wavelen > low_freq_wavelen) {
                f = f / cfg->rope_factor;
            } else if (wavelen < high_freq_wavelen) {
                /* unchanged */
            } else {
                double smooth = (orig / wavelen - low) / (high - low);
                f = (1.0 - smooth) * f / cfg->rope_factor + smooth * f;
            }
        } else if (cfg->rope_kind == REF_ROPE_LONGROPE) {
            f = f / (cfg->rope_long ? cfg->rope_long_factor[i] : cfg->rope_short_factor[i]);
        }
        inv_freq[i] = f;
    }
}

void ref_rope_apply(double *x, int head_dim, int pos, const double *inv_freq)
{
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        double angle = (double)pos * inv_freq[i];
        double c = cos(angle), s = sin(angle);
        double x1 = x[i], x2 = x[i + half];
        x[i] = x1 * c - x2 * s;
        x[i + half] = x2 * c + x1 * s;
    }
}

void ref_rope_rotate(const ref_config *cfg, double *x, int pos, const double *inv_freq)
{
    int d = rope_dims(cfg);
    double scale = cfg->rope_attn_factor > 0 ? cfg->rope_attn_factor : 1.0;
    ref_rope_apply(x, d, pos, inv_freq);
    if (scale != 1.0)
        for (int i = 0; i < d; i++) x[i] *= scale;
}

/* ---- safetensors --------------------------------------------------------------- */

static void files_close(ref_files *fs)
{
    for (int i = 0; i < fs->n; i++) {
        if (fs->shards[i].f) fclose(fs->shards[i].f);
        json_decref(fs->shards[i].header);
        free(fs->shards[i].path);
    }
    fs->n = 0;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Opens one safetensors file and parses its header into fs. */
static int shard_open(ref_files *fs, const char *dir, const char *name)
{
    if (fs->n == REF_MAX_SHARDS) {
        fprintf(stderr, "ref_model: more than %d shards\n", REF_MAX_SHARDS);
        return -1;
    }
    ref_shard *s = &fs->shards[fs->n++];
    memset(s, 0, sizeof *s);
    unsigned char len8[8];
    char *text = NULL;
    int rc = -1;
    s->path = join_path(dir, name);
    if (!s->path) goto done;
    s->f = fopen(s->path, "rb");
    if (!s->f) {
        fprintf(stderr, "ref_model: cannot open %s\n", s->path);
        goto done;
    }
    if (fseeko(s->f, 0, SEEK_END) != 0) goto done;
    s->file_size = (long long)ftello(s->f);
    if (fseeko(s->f, 0, SEEK_SET) != 0) goto done;
    if (fread(len8, 1, 8, s->f) != 8) {
        fprintf(stderr, "ref_model: %s: shorter than 8 bytes\n", s->path);
        goto done;
    }
    unsigned long long hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    if (hlen > REF_MAX_HEADER || (long long)hlen > s->file_size - 8) {
        fprintf(stderr, "ref_model: %s: header length %llu out of range\n", s->path, hlen);
        goto done;
    }
    text = malloc(hlen + 1);
    if (!text || fread(text, 1, hlen, s->f) != hlen) {
        fprintf(stderr, "ref_model: %s: cannot read the header\n", s->path);
        goto done;
    }
    json_error_t jerr;
    s->header = json_loadb(text, hlen, 0, &jerr);
    if (!s->header || !json_is_object(s->header)) {
        fprintf(stderr, "ref_model: %s: header is not a JSON object\n", s->path);
        goto done;
    }
    s->data_start = 8 + (long long)hlen;
    rc = 0;
done:
    free(text);
    return rc;
}

/* Opens dir/model.safetensors, or every shard the index names. */
static int files_open(ref_files *fs, const char *dir)
{
    int rc = -1;
    json_t *index = NULL;
    char *index_path = join_path(dir, "model.safetensors.index.json");
    if (!index_path) goto done;
    FILE *probe = fopen(index_path, "rb");
    if (!probe) {
        rc = shard_open(fs, dir, "model.safetensors");
        goto done;
    }
    fclose(probe);
    json_error_t jerr;
    index = json_load_file(index_path, 0, &jerr);
    json_t *map = json_object_get(index, "weight_map");
    if (!json_is_object(map)) {
        fprintf(stderr, "ref_model: %s: no weight_map object\n", index_path);
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(map, key, val) {
        const char *file = json_string_value(val);
        if (!file || strchr(file, '/')) {
            fprintf(stderr, "ref_model: %s: bad shard name for %s\n", index_path, key);
            goto done;
        }
        bool seen = false;
        for (int i = 0; i < fs->n; i++) {
            const char *p = fs->shards[i].path;
            size_t pl = strlen(p), fl = strlen(file);
            if (pl > fl && strcmp(p + pl - fl, file) == 0 && p[pl - fl - 1] == '/') seen = true;
        }
        if (!seen && shard_open(fs, dir, file)) goto done;
    }
    rc = 0;
done:
    json_decref(index);
    free(index_path);
    return rc;
}

static double f16_to_double(unsigned h)
{
    int sign = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = ldexp((double)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp((double)(m | 1024), e - 25);
    return sign ? -v : v;
}

static double bf16_to_double(unsigned h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return (double)f;
}

/* Reads tensor name, which must have exactly the shape (d0) or (d0, d1)
 * (d1 = 0 for a vector), into a new double array *out. A missing tensor is
 * an error when required; otherwise *out stays NULL. */
static int tensor_read(ref_files *fs, const char *name, int d0, int d1, bool required,
                       double **out)
{
    ref_shard *s = NULL;
    json_t *t = NULL;
    unsigned char *raw = NULL;
    int rc = -1;
    *out = NULL;
    for (int i = 0; i < fs->n && !t; i++) {
        t = json_object_get(fs->shards[i].header, name);
        s = &fs->shards[i];
    }
    if (!t) {
        if (!required) return 0;
        fprintf(stderr, "ref_model: tensor %s not found\n", name);
        return -1;
    }
    const char *dtype = json_string_value(json_object_get(t, "dtype"));
    json_t *shape = json_object_get(t, "shape");
    json_t *offs = json_object_get(t, "data_offsets");
    size_t want_rank = d1 ? 2 : 1;
    size_t esize = 0;
    if (dtype && strcmp(dtype, "F32") == 0) esize = 4;
    else if (dtype && (strcmp(dtype, "F16") == 0 || strcmp(dtype, "BF16") == 0)) esize = 2;
    else if (dtype && strcmp(dtype, "F64") == 0) esize = 8;
    if (!esize) {
        fprintf(stderr, "ref_model: %s: dtype %s not supported\n", name, dtype ? dtype : "?");
        goto done;
    }
    if (!json_is_array(shape) || json_array_size(shape) != want_rank ||
        json_integer_value(json_array_get(shape, 0)) != d0 ||
        (d1 && json_integer_value(json_array_get(shape, 1)) != d1)) {
        if (d1) fprintf(stderr, "ref_model: %s: shape is not [%d, %d]\n", name, d0, d1);
        else fprintf(stderr, "ref_model: %s: shape is not [%d]\n", name, d0);
        goto done;
    }
    size_t count = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    long long begin = json_integer_value(json_array_get(offs, 0));
    long long end = json_integer_value(json_array_get(offs, 1));
    if (!json_is_array(offs) || json_array_size(offs) != 2 || begin < 0 || end < begin ||
        (unsigned long long)(end - begin) != count * esize) {
        fprintf(stderr, "ref_model: %s: data_offsets do not match the shape\n", name);
        goto done;
    }
    if (end > s->file_size - s->data_start) {
        fprintf(stderr, "ref_model: %s: data runs past the end of %s\n", name, s->path);
        goto done;
    }
    raw = malloc(count * esize);
    *out = malloc(count * sizeof(double));
    if (!raw || !*out) {
        fprintf(stderr, "ref_model: %s: out of memory\n", name);
        goto done;
    }
    if (fseeko(s->f, (off_t)(s->data_start + begin), SEEK_SET) != 0 ||
        fread(raw, esize, count, s->f) != count) {
        fprintf(stderr, "ref_model: %s: read failed\n", name);
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        const unsigned char *p = raw + i * esize;
        if (esize == 4) {
            float f;
            memcpy(&f, p, 4);
            (*out)[i] = f;
        } else if (esize == 8) {
            memcpy(&(*out)[i], p, 8);
        } else {
            unsigned h = (unsigned)p[0] | (unsigned)p[1] << 8;
            (*out)[i] = dtype[0] == 'F' ? f16_to_double(h) : bf16_to_double(h);
        }
    }
    rc = 0;
done:
    free(raw);
    if (rc != 0) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- the model ------------------------------------------------------------------ */

void ref_model_free(ref_model *m)
{
    if (!m) return;
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layers; l++) {
            ref_layer *L = &m->layers[l];
            double *all[] = {L->attn_norm, L->wq,       L->wk,     L->wv,           L->wo,
                             L->bq,        L->bk,       L->bv,     L->bo,           L->q_norm,
                             L->k_norm,    L->attn_post_norm,      L->ffn_norm,     L->ffn_post_norm,
                             L->w_gate,    L->w_up,     L->w_down};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
        }
        free(m->layers);
    }
    if (m->lm_head != m->embed) free(m->lm_head);
    free(m->embed);
    free(m->norm);
    free(m->inv_freq);
    free(m->inv_freq_local);
    free(m);
}

/* Reads the fused matrix name, whose rows are n blocks of rows[i] rows of
 * cols values each, and splits it into n new arrays *parts[i]. On failure
 * the parts made so far stay in *parts[] for the caller to free. */
static int tensor_read_split(ref_files *fs, const char *name, int cols, int n, const int *rows,
                             double **parts[])
{
    int total = 0;
    for (int i = 0; i < n; i++) total += rows[i];
    double *fused = NULL;
    if (tensor_read(fs, name, total, cols, true, &fused)) return -1;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t count = (size_t)rows[i] * (size_t)cols;
        *parts[i] = malloc(count * sizeof(double));
        if (!*parts[i]) {
            fprintf(stderr, "ref_model: %s: out of memory\n", name);
            free(fused);
            return -1;
        }
        memcpy(*parts[i], fused + off, count * sizeof(double));
        off += count;
    }
    free(fused);
    return 0;
}

/* w (n values, or NULL) becomes 1 + w: what a norm of 1 + w multiplies by. */
static void plus_one(double *w, int n)
{
    for (int i = 0; w && i < n; i++) w[i] += 1.0;
}

static int load_layer(ref_files *fs, const ref_config *c, int l, ref_layer *L)
{
    int H = c->hidden_size, I = c->intermediate_size, D = c->head_dim;
    int qd = c->n_heads * D, kvd = c->n_kv_heads * D;
    char n[128];
#define RT(field, suffix, d0, d1, req)                                                \
    do {                                                                              \
        snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix);                       \
        if (tensor_read(fs, n, d0, d1, req, &L->field)) return -1;                    \
    } while (0)
    RT(attn_norm, "input_layernorm.weight", H, 0, true);
    if (c->fused_qkv) {
        int rows[3] = {qd, kvd, kvd};
        double **parts[3] = {&L->wq, &L->wk, &L->wv};
        snprintf(n, sizeof n, "model.layers.%d.self_attn.qkv_proj.weight", l);
        if (tensor_read_split(fs, n, H, 3, rows, parts)) return -1;
    } else {
        RT(wq, "self_attn.q_proj.weight", qd, H, true);
        RT(wk, "self_attn.k_proj.weight", kvd, H, true);
        RT(wv, "self_attn.v_proj.weight", kvd, H, true);
    }
    RT(wo, "self_attn.o_proj.weight", H, qd, true);
    if (c->qkv_bias) {
        RT(bq, "self_attn.q_proj.bias", qd, 0, true);
        RT(bk, "self_attn.k_proj.bias", kvd, 0, true);
        RT(bv, "self_attn.v_proj.bias", kvd, 0, true);
    }
    if (c->o_bias) RT(bo, "self_attn.o_proj.bias", H, 0, true);
    if (c->qk_norm) {
        RT(q_norm, "self_attn.q_norm.weight", D, 0, true);
        RT(k_norm, "self_attn.k_norm.weight", D, 0, true);
    }
    if (c->sandwich_norms) {
        RT(attn_post_norm, "post_attention_layernorm.weight", H, 0, true);
        RT(ffn_norm, "pre_feedforward_layernorm.weight", H, 0, true);
        RT(ffn_post_norm, "post_feedforward_layernorm.weight", H, 0, true);
    } else {
        RT(ffn_norm, "post_attention_layernorm.weight", H, 0, true);
    }
    if (c->fused_gate_up) {
        int rows[2] = {I, I};
        double **parts[2] = {&L->w_gate, &L->w_up};
        snprintf(n, sizeof n, "model.layers.%d.mlp.gate_up_proj.weight", l);
        if (tensor_read_split(fs, n, H, 2, rows, parts)) return -1;
    } else {
        RT(w_gate, "mlp.gate_proj.weight", I, H, true);
        RT(w_up, "mlp.up_proj.weight", I, H, true);
    }
    RT(w_down, "mlp.down_proj.weight", H, I, true);
#undef RT
    if (c->norm_plus_one) {
        plus_one(L->attn_norm, H);
        plus_one(L->q_norm, D);
        plus_one(L->k_norm, D);
        plus_one(L->attn_post_norm, H);
        plus_one(L->ffn_norm, H);
        plus_one(L->ffn_post_norm, H);
    }
    return 0;
}

ref_model *ref_model_load(const char *dir)
{
    ref_files fs = {0};
    ref_model *m = calloc(1, sizeof *m);
    char *cfg_path = join_path(dir, "config.json");
    bool ok = false;
    if (!m || !cfg_path) goto done;
    if (ref_config_load(cfg_path, &m->cfg)) goto done;
    const ref_config *c = &m->cfg;
    if (files_open(&fs, dir)) goto done;
    m->inv_freq = malloc((size_t)(c->rotary_dim / 2) * sizeof(double));
    m->layers = calloc((size_t)c->n_layers, sizeof(ref_layer));
    if (!m->inv_freq || !m->layers) goto done;
    ref_rope_inv_freq(c, m->inv_freq);
    if (c->rope_local_theta > 0) { /* the sliding layers': default rope, their own base */
        m->rope_local = *c;
        m->rope_local.rope_theta = c->rope_local_theta;
        m->rope_local.rope_kind = REF_ROPE_DEFAULT;
        m->rope_local.rope_factor = m->rope_local.rope_attn_factor = 1.0;
        m->inv_freq_local = malloc((size_t)(c->rotary_dim / 2) * sizeof(double));
        if (!m->inv_freq_local) goto done;
        ref_rope_inv_freq(&m->rope_local, m->inv_freq_local);
    }
    if (tensor_read(&fs, "model.embed_tokens.weight", c->vocab_size, c->hidden_size, true,
                    &m->embed))
        goto done;
    for (int l = 0; l < c->n_layers; l++)
        if (load_layer(&fs, c, l, &m->layers[l])) goto done;
    if (tensor_read(&fs, "model.norm.weight", c->hidden_size, 0, true, &m->norm)) goto done;
    if (c->norm_plus_one) plus_one(m->norm, c->hidden_size);
    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
    } else if (tensor_read(&fs, "lm_head.weight", c->vocab_size, c->hidden_size, true,
                           &m->lm_head)) {
        goto done;
    }
    ok = true;
done:
    files_close(&fs);
    free(cfg_path);
    if (!ok) {
        if (!m || !cfg_path) fprintf(stderr, "ref_model: out of memory\n");
        ref_model_free(m);
        m = NULL;
    }
    return m;
}

void ref_model_set_rope_long(ref_model *m, bool rope_long)
{
    m->cfg.rope_long = rope_long;
    ref_rope_inv_freq(&m->cfg, m->inv_freq);
}

const ref_config *ref_model_config(const ref_model *m)
{
    return &m->cfg;
}

int ref_model_vocab(const ref_model *m)
{
    return m->cfg.vocab_size;
}

/* y (rows) = W (rows, cols) x (cols) + b (rows, or NULL) */
static void matvec(double *y, const double *w, const double *x, const double *b, int rows,
                   int cols)
{
    for (int r = 0; r < rows; r++) {
        double s = 0.0;
        for (int k = 0; k < cols; k++) s += w[(size_t)r * cols + k] * x[k];
        y[r] = s + (b ? b[r] : 0.0);
    }
}

/* y = x / sqrt(mean(x^2) + eps) * w (y may be x) */
static void rmsnorm(double *y, const double *x, const double *w, int n, double eps)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * w[i];
}

/* ref_model_forward, or with hidden the final norm's output instead of the
 * logits (n x hidden_size). */
static int forward(const ref_model *m, const int32_t *tokens, int n, double *logits, bool hidden)
{
    const ref_config *c = &m->cfg;
    int H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, D = c->head_dim;
    int qd = c->n_heads * D, kvd = c->n_kv_heads * D, group = c->n_heads / c->n_kv_heads;
    int rc = -1;
    if (n < 1) {
        fprintf(stderr, "ref_model_forward: n = %d\n", n);
        return -1;
    }
    for (int t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= V) {
            fprintf(stderr, "ref_model_forward: token %d out of range\n", (int)tokens[t]);
            return -1;
        }
    }
    size_t un = (size_t)n;
    double *x = malloc(un * H * sizeof(double));     /* (n, hidden) residual stream */
    double *h = malloc((size_t)H * sizeof(double));  /* (hidden) */
    double *q = malloc(un * qd * sizeof(double));    /* (n, q_dim) */
    double *k = malloc(un * kvd * sizeof(double));   /* (n, kv_dim) */
    double *v = malloc(un * kvd * sizeof(double));   /* (n, kv_dim) */
    double *att = malloc((size_t)qd * sizeof(double)); /* (q_dim) one position's heads */
    double *sc = malloc(un * sizeof(double));        /* (n) scores of one head */
    double *tmp = malloc((size_t)H * sizeof(double)); /* (hidden) */
    double *g = malloc((size_t)I * sizeof(double));  /* (inter) */
    double *u = malloc((size_t)I * sizeof(double));  /* (inter) */
    if (!x || !h || !q || !k || !v || !att || !sc || !tmp || !g || !u) {
        fprintf(stderr, "ref_model_forward: out of memory\n");
        goto done;
    }
    for (int t = 0; t < n; t++)
        for (int i = 0; i < H; i++)
            x[(size_t)t * H + i] = m->embed[(size_t)tokens[t] * H + i] * c->embed_scale;
    double scale = 1.0 / sqrt(c->query_pre_attn_scalar > 0 ? c->query_pre_attn_scalar : (double)D);

    for (int l = 0; l < c->n_layers; l++) {
        const ref_layer *L = &m->layers[l];
        /* a sliding layer's window, and its rope where it has its own */
        int window = c->layer_sliding[l] ? c->sliding_window : 0;
        bool local = c->layer_sliding[l] && m->inv_freq_local;
        const ref_config *rc = local ? &m->rope_local : c;
        const double *inv_freq = local ? m->inv_freq_local : m->inv_freq;
        /* q, k, v of every position, rotated to its position */
        for (int t = 0; t < n; t++) {
            rmsnorm(h, x + (size_t)t * H, L->attn_norm, H, c->rms_norm_eps);
            matvec(q + (size_t)t * qd, L->wq, h, L->bq, qd, H);
            matvec(k + (size_t)t * kvd, L->wk, h, L->bk, kvd, H);
            matvec(v + (size_t)t * kvd, L->wv, h, L->bv, kvd, H);
            for (int hd = 0; hd < c->n_heads; hd++) {
                double *qh = q + (size_t)t * qd + (size_t)hd * D;
                if (L->q_norm) rmsnorm(qh, qh, L->q_norm, D, c->rms_norm_eps);
                ref_rope_rotate(rc, qh, t, inv_freq);
            }
            for (int hd = 0; hd < c->n_kv_heads; hd++) {
                double *kh = k + (size_t)t * kvd + (size_t)hd * D;
                if (L->k_norm) rmsnorm(kh, kh, L->k_norm, D, c->rms_norm_eps);
                ref_rope_rotate(rc, kh, t, inv_freq);
            }
        }
        /* causal attention, o_proj, residual; then the MLP and its residual */
        for (int t = 0; t < n; t++) {
            for (int hd = 0; hd < c->n_heads; hd++) {
                int kvh = hd / group;
                const double *qh = q + (size_t)t * qd + (size_t)hd * D;
                double mx = -INFINITY;
                /* keys s with t - s < window (all when 0) */
                int s0 = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
                for (int s = s0; s <= t; s++) {
                    const double *kh = k + (size_t)s * kvd + (size_t)kvh * D;
                    double dot = 0.0;
                    for (int i = 0; i < D; i++) dot += qh[i] * kh[i];
                    sc[s] = dot * scale;
                    if (c->attn_softcap > 0) sc[s] = c->attn_softcap * tanh(sc[s] / c->attn_softcap);
                    if (sc[s] > mx) mx = sc[s];
                }
                double sum = 0.0;
                for (int s = s0; s <= t; s++) {
                    sc[s] = exp(sc[s] - mx);
                    sum += sc[s];
                }
                double *ah = att + (size_t)hd * D;
                for (int i = 0; i < D; i++) ah[i] = 0.0;
                for (int s = s0; s <= t; s++) {
                    const double *vh = v + (size_t)s * kvd + (size_t)kvh * D;
                    for (int i = 0; i < D; i++) ah[i] += sc[s] / sum * vh[i];
                }
            }
            double *xt = x + (size_t)t * H;
            matvec(tmp, L->wo, att, L->bo, H, qd);
            if (L->attn_post_norm) rmsnorm(tmp, tmp, L->attn_post_norm, H, c->rms_norm_eps);
            for (int i = 0; i < H; i++) xt[i] += tmp[i];
            rmsnorm(h, xt, L->ffn_norm, H, c->rms_norm_eps);
            matvec(g, L->w_gate, h, NULL, I, H);
            matvec(u, L->w_up, h, NULL, I, H);
            for (int i = 0; i < I; i++) {
                double a = c->act == REF_ACT_GELU_TANH
                               ? 0.5 * g[i] * (1.0 + tanh(sqrt(2.0 / M_PI) *
                                                          (g[i] + 0.044715 * g[i] * g[i] * g[i])))
                               : g[i] / (1.0 + exp(-g[i]));
                g[i] = a * u[i];
            }
            matvec(tmp, L->w_down, g, NULL, H, I);
            if (L->ffn_post_norm) rmsnorm(tmp, tmp, L->ffn_post_norm, H, c->rms_norm_eps);
            for (int i = 0; i < H; i++) xt[i] += tmp[i];
        }
    }
    for (int t = 0; t < n; t++) {
        rmsnorm(hidden ? logits + (size_t)t * H : h, x + (size_t)t * H, m->norm, H, c->rms_norm_eps);
        if (!hidden) matvec(logits + (size_t)t * V, m->lm_head, h, NULL, V, H);
        for (int v = 0; !hidden && c->final_softcap > 0 && v < V; v++) {
            double *x = logits + (size_t)t * V + v;
            *x = c->final_softcap * tanh(*x / c->final_softcap);
        }
    }
    rc = 0;
done:
    free(x);
    free(h);
    free(q);
    free(k);
    free(v);
    free(att);
    free(sc);
    free(tmp);
    free(g);
    free(u);
    return rc;
}

int ref_model_forward(const ref_model *m, const int32_t *tokens, int n, double *logits)
{
    return forward(m, tokens, n, logits, false);
}

int ref_model_hidden(const ref_model *m, const int32_t *tokens, int n, double *hidden)
{
    return forward(m, tokens, n, hidden, true);
}
