/*
 * ref_model.h: a float64 reference forward pass of Hugging Face
 * LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM /
 * Phi3ForCausalLM / Gemma3ForCausalLM (text only) / Gemma2ForCausalLM, for tests only. It reads
 * a Hugging Face model directory (config.json + model.safetensors, or
 * model.safetensors.index.json + shards) by itself and shares no code with
 * src/: it is the oracle snug's model forward is checked against. Written
 * plainly, in double, for tiny models (a few layers, hidden of a few
 * hundred, tens of tokens).
 *
 * The families differ only in what ref_config describes (biases, per-head
 * q/k norms, fused projections, how much of each head rope turns, rope
 * scaling, which layers slide and their window and rope base, norms of
 * 1 + w, norms around attention and the MLP, the MLP's activation, the
 * embedding and attention scales); the forward pass reads those fields and
 * has no branch on the family's name.
 *
 * Uses malloc/free (not snug's accounting allocator) and reports failures
 * on stderr.
 */
#ifndef SNUG_TESTS_REF_MODEL_H
#define SNUG_TESTS_REF_MODEL_H

#include <stdbool.h>
#include <stdint.h>

enum ref_rope_kind {
    REF_ROPE_DEFAULT = 0, /* rope_scaling null or rope_type "default" */
    REF_ROPE_LINEAR,      /* inv_freq / factor */
    REF_ROPE_LLAMA3,      /* transformers' _compute_llama3_parameters */
    REF_ROPE_LONGROPE,    /* "longrope" (older configs: "su"): inv_freq[i] / factor[i], with
                           * factor the short or the long list, and cos/sin scaled */
};

/* Most rotary frequencies a longrope factor list may hold (rotary_dim / 2). */
#define REF_ROPE_MAX_FACTORS 256

/* Most layers a config may have (the reference is for tiny models). */
#define REF_MAX_LAYERS 256

/* The MLP's activation of the gate: down(act(gate(x)) * up(x)). */
enum ref_activation {
    REF_ACT_SILU = 0,  /* g / (1 + e^-g) (hidden_act "silu") */
    REF_ACT_GELU_TANH, /* 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) (gemma3's
                        * hidden_activation "gelu_pytorch_tanh") */
};

/* What the reference takes from config.json. A test may fill one by hand
 * for the rope functions: there rotary_dim 0 means head_dim and
 * rope_attn_factor 0 means 1. */
typedef struct ref_config {
    bool qkv_bias;      /* q/k/v projections have biases (qwen2 always; others: attention_bias) */
    bool o_bias;        /* o_proj has a bias (llama, mistral, qwen3: attention_bias) */
    bool qk_norm;       /* qwen3: RMSNorm over each head of q and of k, before rope */
    bool fused_qkv;     /* phi3: self_attn.qkv_proj.weight, rows q, then k, then v */
    bool fused_gate_up; /* phi3: mlp.gate_up_proj.weight, rows gate, then up */
    int hidden_size, intermediate_size, n_layers, n_heads, n_kv_heads, head_dim, vocab_size;
    int rotary_dim; /* the first rotary_dim values of each head are turned (int(head_dim *
                     * partial_rotary_factor), phi3); the rest pass through */
    double rms_norm_eps, rope_theta;
    enum ref_rope_kind rope_kind;
    double rope_factor;                           /* linear, llama3; longrope: max pos / original */
    double rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    double rope_original_max_pos;                 /* llama3, longrope */
    double rope_attn_factor; /* cos and sin are multiplied by it (longrope; else 1) */
    int rope_n_factors;      /* longrope: rotary_dim / 2 */
    double rope_short_factor[REF_ROPE_MAX_FACTORS], rope_long_factor[REF_ROPE_MAX_FACTORS];
    bool rope_long;          /* longrope: divide by long_factor (true) or short_factor */
    bool tie_word_embeddings;
    bool attention_bias; /* as config.json says (see qkv_bias, o_bias for what it means) */
    int sliding_window;  /* a query of a sliding layer sees this many positions, itself
                          * included; 0: all */
    bool layer_sliding[REF_MAX_LAYERS]; /* layer l is a sliding layer (mistral, phi3: every
                                         * layer; gemma3: as layer_types or the pattern say) */
    double rope_local_theta; /* > 0: the sliding layers rotate with this base, default rope
                              * without scaling (gemma3's rope_local_base_freq); 0: as the
                              * other layers */
    bool norm_plus_one;  /* gemma3: every RMSNorm multiplies by 1 + w, the checkpoint holding w
                          * (the loader adds the 1) */
    bool sandwich_norms; /* gemma3: post_attention_layernorm normalizes the attention output
                          * before the residual, pre_feedforward_layernorm is the MLP's input
                          * norm and post_feedforward_layernorm normalizes its output */
    enum ref_activation act;
    double attn_softcap; /* > 0: attention scores become c tanh(s / c) (gemma2: 50 by default) */
    double final_softcap;/* > 0: logits likewise (gemma2: 30) */
    double embed_scale;  /* the embeddings are multiplied by it: 1; gemma3: sqrt(hidden_size)
                          * as a float32, cast to the checkpoint's torch_dtype */
    double query_pre_attn_scalar; /* scores are q.k / sqrt(this) (gemma3); 0: head_dim */
} ref_config;

typedef struct ref_model ref_model;

/* Reads and checks the config.json at path into *cfg. Defaults as
 * transformers: num_key_value_heads = num_attention_heads, head_dim =
 * hidden/heads (qwen3: 128), rms_norm_eps 1e-6 (phi3: 1e-5), rope_theta
 * 10000, tie_word_embeddings false, attention_bias false,
 * partial_rotary_factor 1. Accepts model_type "llama", "mistral" (with
 * sliding_window), "qwen2", "qwen3", "phi3" (with sliding_window: Phi3Model
 * masks with it whenever it is a number, as Mistral does) and "gemma3_text".
 *
 * Gemma3 (Gemma3TextConfig's defaults where they differ: num_key_value_heads
 * 4, head_dim 256, rope_theta 1000000, tie_word_embeddings true): norms of
 * 1 + w, sandwich norms, q/k norms per head, hidden_activation (default
 * "gelu_pytorch_tanh", the only one accepted; hidden_act is not read, as
 * transformers does not), query_pre_attn_scalar (default 256), the
 * embedding scale sqrt(hidden_size) cast to torch_dtype (or "dtype";
 * bfloat16 and float16 round it, anything else or none keeps the float32),
 * sliding layers from layer_types ("sliding_attention" / "full_attention",
 * one per layer) or else sliding_window_pattern p (default 6: layer i slides
 * unless (i + 1) % p == 0), sliding_window (default 4096; null: no window,
 * the sliding layers still rotating with their own base), rope_local_base_freq
 * (default 10000) for the sliding layers while rope_theta and rope_scaling
 * rotate the full ones. final_logit_softcapping and attn_logit_softcapping
 * (Gemma 2's) must be null or absent, use_bidirectional_attention false.
 *
 * Longrope (phi3's rope_scaling type "longrope" or "su"; any family may
 * name it, as in transformers): the factor is max_position_embeddings /
 * original_max_position_embeddings (without an original: rope_scaling.factor,
 * default 1), the attention factor rope_scaling.attention_factor if given,
 * else sqrt(1 + ln(factor) / ln(original)) when factor > 1, else 1; it scales
 * cos and sin whichever list is used. transformers picks long_factor per
 * forward call when the sequence is longer than the original context and
 * short_factor otherwise; servers pick once, from the context they are given
 * (llama.cpp: long when n_ctx exceeds the original). So the pick is the
 * caller's: cfg->rope_long is false (short) after loading; see
 * ref_model_set_rope_long.
 *
 * Rejects what the reference does not implement (other rope types,
 * hidden_act other than silu, mlp_bias, use_sliding_window, layer_types
 * other than full_attention outside gemma3, partial rotary outside phi3,
 * rope_parameters, more than REF_MAX_LAYERS layers). Returns 0, or -1 with a
 * message on stderr. */
int ref_config_load(const char *path, ref_config *cfg);

/* Writes the rotary_dim/2 rotary inverse frequencies of cfg (with its rope
 * scaling applied; longrope: the list cfg->rope_long picks) to inv_freq. */
void ref_rope_inv_freq(const ref_config *cfg, double *inv_freq);

/* Rotates one head x (head_dim values, half-split layout: x[i] pairs with
 * x[i + head_dim/2]) in place to position pos. */
void ref_rope_apply(double *x, int head_dim, int pos, const double *inv_freq);

/* Rotates one head x (cfg->head_dim values) in place to position pos as the
 * model does: the first rotary_dim values by ref_rope_apply(x, rotary_dim,
 * ...) (rotate_half within those), then multiplied by rope_attn_factor; the
 * values after rotary_dim are left as they are. inv_freq is
 * ref_rope_inv_freq's. */
void ref_rope_rotate(const ref_config *cfg, double *x, int pos, const double *inv_freq);

/* Loads dir/config.json and the weights (f32, f16, bf16 or f64, converted to
 * double; norms of 1 + w held with the 1 added). Returns the model (free with
 * ref_model_free), or NULL with a message on stderr; nothing is left
 * allocated on failure. */
ref_model *ref_model_load(const char *dir);

/* Frees m and everything it holds; NULL is a no-op. */
void ref_model_free(ref_model *m);

/* Longrope: chooses long_factor (true) or short_factor (false, as loaded)
 * for m's later forward calls; see ref_config_load for why this is the
 * caller's choice. No effect for other rope types. */
void ref_model_set_rope_long(ref_model *m, bool rope_long);

/* The model's configuration (valid while m lives). */
const ref_config *ref_model_config(const ref_model *m);

/* vocab_size of m. */
int ref_model_vocab(const ref_model *m);

/* Causal forward over one sequence of n tokens at positions 0..n-1; writes
 * the logits of every position to logits (n x vocab, row-major). Returns 0,
 * or -1 with a message on stderr (a token out of range, n < 1, no memory). */
int ref_model_forward(const ref_model *m, const int32_t *tokens, int n, double *logits);

/* As ref_model_forward, the final norm's output of every position instead
 * (n x hidden_size): what an embedding is pooled from. */
int ref_model_hidden(const ref_model *m, const int32_t *tokens, int n, double *hidden);

#endif /* SNUG_TESTS_REF_MODEL_H */
