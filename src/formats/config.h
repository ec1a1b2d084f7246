/*
 * config.h: the model configuration of the families formats/arch.h lists,
 * read from a Hugging Face config.json and validated.
 */
#ifndef SNUG_CONFIG_H
#define SNUG_CONFIG_H

#include "base/common.h"
#include "arch.h"

#include <jansson.h>

typedef enum snug_rope_type {
    SNUG_ROPE_DEFAULT = 0,
    SNUG_ROPE_LINEAR,
    SNUG_ROPE_DYNAMIC,
    SNUG_ROPE_LLAMA3,
    SNUG_ROPE_YARN,
    SNUG_ROPE_LONGROPE
} snug_rope_type;

/* The largest sizes snug accepts (beyond any released model, small enough
 * that every product of them fits the arithmetic and the loader's staging). */
enum {
    SNUG_MAX_HIDDEN = 1 << 20,
    SNUG_MAX_INTERMEDIATE = 1 << 22,
    SNUG_MAX_LAYERS = 4096,
    SNUG_MAX_HEADS = 4096,
    SNUG_MAX_HEAD_DIM = 4096,
    SNUG_MAX_Q_DIM = 1 << 20,          /* heads x head_dim */
    SNUG_MAX_VOCAB = 1 << 24,
    SNUG_MAX_POSITIONS = 1 << 28,
    SNUG_MAX_ROPE_FACTORS = 256        /* per-frequency rotary factors (head_dim <= 512) */
};

typedef struct snug_rope_scaling {
    snug_rope_type type;
    double factor;                        /* linear, dynamic, llama3, yarn */
    double low_freq_factor;               /* llama3 */
    double high_freq_factor;              /* llama3 */
    int64_t original_max_position_embeddings; /* llama3, yarn, longrope; 0 when not given */
    double beta_fast, beta_slow;          /* yarn (defaults 32 and 1) */
    double mscale, mscale_all_dim;        /* yarn (0 when not given) */
    double attention_factor;              /* yarn, longrope (0 when not given: derived) */
    int32_t n_factors;                    /* longrope: the rotary frequencies (n_rot / 2) ... */
    float short_factor[SNUG_MAX_ROPE_FACTORS]; /* ... each divided by one of these up to */
    float long_factor[SNUG_MAX_ROPE_FACTORS];  /* original_max_position_embeddings, beyond by these */
} snug_rope_scaling;

enum { SNUG_MAX_EOS_IDS = 8, SNUG_MAX_LABELS = 16 };

typedef struct snug_model_config {
    snug_arch arch;
    char architecture[64];        /* as config.json names it: "LlamaForCausalLM" */
    int32_t hidden_size;
    int32_t intermediate_size;
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t n_rot;                /* dimensions of a head the rotary embedding turns (the
                                   * first n_rot; partial_rotary_factor x head_dim); 0: all */
    int32_t vocab_size;
    int64_t max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;
    snug_rope_scaling rope_scaling;
    bool tie_word_embeddings;
    bool qkv_bias;                /* q/k/v projections have biases (Qwen2, attention_bias) */
    bool o_bias;                  /* o_proj has a bias (Llama attention_bias) */
    snug_dtype dtype;             /* torch_dtype / dtype; SNUG_DTYPE_NONE when absent */
    int32_t bos_token_id;         /* -1 when absent */
    int32_t n_eos;
    int32_t eos_token_ids[SNUG_MAX_EOS_IDS];
    int64_t sliding_window;       /* 0: none */
    uint8_t sliding[SNUG_MAX_LAYERS / 8]; /* bit l % 8 of byte l / 8: layer l attends through the
                                   * window (every layer for the families whose window is
                                   * uniform); snug_config_layer_window reads it */
    double rope_local_theta;      /* the sliding layers' rope base, unscaled (Gemma 3's
                                   * rope_local_base_freq); 0: rope_theta and rope_scaling */
    double query_pre_attn_scalar; /* attention scores are q.k / sqrt(this) (Gemma); 0: head_dim */
    double attn_softcap;          /* > 0: each attention score s becomes c tanh(s / c) (Gemma 2's
                                   * attn_logit_softcapping); 0: none */
    double final_softcap;         /* > 0: each logit, likewise (final_logit_softcapping) */
    bool multimodal;              /* the text model of a multimodal checkpoint (config.json's
                                   * text_config of Gemma3ForConditionalGeneration): its tensors
                                   * under another prefix, a vision tower beside them */
    int32_t n_labels;             /* a sequence classifier (config.json's
                                   * *ForSequenceClassification: a reranker's head): its labels
                                   * (num_labels, or id2label's count; 2 by default, as
                                   * transformers has it), scored from the last token's final
                                   * norm output by score.weight; 0: a causal language model */
    bool norm_plus_one;           /* each RMSNorm weight as held is w, the norm multiplying by
                                   * 1 + w (Gemma's Hugging Face checkpoints); the loader adds
                                   * the 1 (GGUF files hold the sum: false) */
    bool rope_interleaved;        /* q and k rows pair dimensions (2i, 2i + 1) for the rotary
                                   * embedding, as llama.cpp stores them, not (i, i + d / 2) */
    int32_t n_rope_freq_factors;  /* 0, or head_dim / 2: each rotary frequency i divided by
                                   * rope_freq_factors[i] (a GGUF file's rope_freqs.weight:
                                   * Llama 3.1's scaling as llama.cpp stores it) */
    float rope_freq_factors[SNUG_MAX_ROPE_FACTORS];
} snug_model_config;

/* Parses and validates config.json text (len bytes). name is used in
 * messages. On failure the message names the file and the field and says
 * what was expected; an unknown architecture names the supported ones. */
snug_status snug_config_parse(const char *text, size_t len, const char *name,
                              snug_model_config *cfg, snug_error *err);

/* Reads and validates DIR/config.json. */
snug_status snug_config_load(const char *dir, snug_model_config *cfg, snug_error *err);

/* Checks the invariants of a filled-in config: every size in [1, its
 * SNUG_MAX_* limit], kv heads dividing heads, an even head_dim, sane norm
 * and rope settings, token ids inside the vocabulary. Every reader of model
 * shapes (config.json, GGUF, llama2.c) ends with it. name is used in
 * messages, which name the field. */
snug_status snug_config_validate(const snug_model_config *cfg, const char *name,
                                 snug_error *err);

/* Builds the config.json object of cfg (Hugging Face field names; a GGUF
 * file's per-frequency rotary factors, which config.json has no field for,
 * as "rope_freq_factors"). The caller owns the returned reference; NULL
 * when out of memory. */
json_t *snug_config_to_json(const snug_model_config *cfg);

/* The model_type string of an architecture ("llama", "mistral", "qwen2"). */
const char *snug_arch_model_type(snug_arch arch);

/* The dimensions of each head that rope turns: n_rot, or head_dim when 0. */
int32_t snug_config_rot_dims(const snug_model_config *cfg);

/* The window layer l attends through (the last that many positions, its
 * own included), or 0 for all of them. */
int64_t snug_config_layer_window(const snug_model_config *cfg, int32_t l);

/* Marks layers [0, n_layers) sliding or not: pattern 0 makes every layer
 * sliding, pattern p > 0 every layer but each p-th (layers p - 1, 2p - 1,
 * ...), as Gemma's sliding_window_pattern and llama.cpp's swa pattern. */
void snug_config_set_sliding(snug_model_config *cfg, int32_t pattern);

/* The pattern snug_config_set_sliding would give cfg's sliding layers: 0
 * when every layer slides, p when every p-th attends to all; -1 when they
 * follow no such pattern (as layer_types may have it). */
int32_t snug_config_sliding_pattern(const snug_model_config *cfg);

/* The rope scaling type's name ("default", "linear", ...). */
const char *snug_rope_type_name(snug_rope_type t);

/* Bytes of K and V per token over all layers, for n_kv_heads KV heads (the
 * model's, or one rank's) and a cache of element type kv_dtype. */
size_t snug_config_kv_bytes_per_token(const snug_model_config *cfg, int32_t n_kv_heads,
                                      snug_dtype kv_dtype);

#endif /* SNUG_CONFIG_H */
