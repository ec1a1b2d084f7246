/*
 * ref_model.h: a float64 reference forward pass of Hugging Face
 * LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM, for tests only. It reads a Hugging
 * Face model directory (config.json + model.safetensors, or
 * model.safetensors.index.json + shards) by itself and shares no code with
 * src/: it is the oracle snug's model forward is checked against. Written
 * plainly, in double, for tiny models (a few layers, hidden of a few hundred,
 * tens of tokens).
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
};

/* What the reference takes from config.json. */
typedef struct ref_config {
    bool is_qwen2; /* model_type "qwen2": q/k/v biases, no o bias */
    int hidden_size, intermediate_size, n_layers, n_heads, n_kv_heads, head_dim, vocab_size;
    double rms_norm_eps, rope_theta;
    enum ref_rope_kind rope_kind;
    double rope_factor;                           /* linear, llama3 */
    double rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    double rope_original_max_pos;                 /* llama3 */
    bool tie_word_embeddings;
    bool attention_bias; /* Llama: q/k/v/o biases */
    int sliding_window;  /* Mistral: a query sees this many positions, itself included; 0: all */
} ref_config;

typedef struct ref_model ref_model;

/* Reads and checks the config.json at path into *cfg. Defaults as
 * transformers: num_key_value_heads = num_attention_heads, head_dim =
 * hidden/heads, rms_norm_eps 1e-6, rope_theta 10000, tie_word_embeddings
 * false, attention_bias false. Accepts model_type "llama", "mistral" (with sliding_window) and "qwen2";
 * rejects what the reference does not implement (other rope types,
 * hidden_act other than silu, mlp_bias). Returns 0, or -1 with a message
 * on stderr. */
int ref_config_load(const char *path, ref_config *cfg);

/* Writes the head_dim/2 rotary inverse frequencies of cfg (with its rope
 * scaling applied) to inv_freq. */
void ref_rope_inv_freq(const ref_config *cfg, double *inv_freq);

/* Rotates one head x (head_dim values, half-split layout: x[i] pairs with
 * x[i + head_dim/2]) in place to position pos. */
void ref_rope_apply(double *x, int head_dim, int pos, const double *inv_freq);

/* Loads dir/config.json and the weights (f32, f16, bf16 or f64, converted to
 * double). Returns the model (free with ref_model_free), or NULL with a
 * message on stderr; nothing is left allocated on failure. */
ref_model *ref_model_load(const char *dir);

/* Frees m and everything it holds; NULL is a no-op. */
void ref_model_free(ref_model *m);

/* The model's configuration (valid while m lives). */
const ref_config *ref_model_config(const ref_model *m);

/* vocab_size of m. */
int ref_model_vocab(const ref_model *m);

/* Causal forward over one sequence of n tokens at positions 0..n-1; writes
 * the logits of every position to logits (n x vocab, row-major). Returns 0,
 * or -1 with a message on stderr (a token out of range, n < 1, no memory). */
int ref_model_forward(const ref_model *m, const int32_t *tokens, int n, double *logits);

#endif /* SNUG_TESTS_REF_MODEL_H */
