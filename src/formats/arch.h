/*
 * arch.h: the model families snug runs, one table entry each: how the
 * family is named (Hugging Face architecture and model_type, llama.cpp's
 * GGUF architecture) and what its forward pass and checkpoints hold beyond
 * a Llama's. The config readers, the parameter table (and so the loader,
 * `inspect` and the memory plan), the GGUF name map and the forward pass
 * read these flags rather than testing for a family by name: a new family
 * is an entry here plus whatever kernel it needs.
 */
#ifndef SNUG_ARCH_H
#define SNUG_ARCH_H

#include "base/common.h"

typedef enum snug_arch {
    SNUG_ARCH_LLAMA = 0,
    SNUG_ARCH_MISTRAL = 1,
    SNUG_ARCH_QWEN2 = 2,
    SNUG_ARCH_QWEN3 = 3,
    SNUG_ARCH_PHI3 = 4,
    SNUG_ARCH_GEMMA3 = 5,
    SNUG_ARCH_GEMMA2 = 6
} snug_arch;

/* Which layers attend through a sliding window when config.json gives one. */
typedef enum snug_window_rule {
    SNUG_WINDOW_NONE = 0,    /* none: the field is ignored (Llama; Phi-3, as llama.cpp and vLLM do) */
    SNUG_WINDOW_ALL,         /* every layer (Mistral) */
    SNUG_WINDOW_FROM_LAYER,  /* use_sliding_window, from max_window_layers on (Qwen2, Qwen3) */
    SNUG_WINDOW_PATTERN      /* the layers layer_types names "sliding_attention", else all but
                              * every sliding_window_pattern-th (Gemma 3: five of six) */
} snug_window_rule;

/* The MLP's activation of the gate: silu(gate) * up, or gelu(gate) * up with
 * GELU's tanh approximation (transformers' gelu_pytorch_tanh). */
typedef enum snug_activation { SNUG_ACT_SILU = 0, SNUG_ACT_GELU_TANH } snug_activation;

typedef struct snug_arch_info {
    snug_arch arch;
    const char *architecture;   /* config.json's "architectures": "Qwen3ForCausalLM" */
    const char *model_type;     /* config.json's "model_type": "qwen3" */
    const char *gguf;           /* general.architecture of its GGUF files; NULL: another
                                 * family's (llama.cpp writes Mistral as "llama") */
    bool qkv_bias;              /* q, k and v always have biases, o none (Qwen2) */
    bool attention_bias;        /* config.json's attention_bias gives q, k, v and o biases */
    bool qk_norm;               /* an RMSNorm over each head of q and of k, before rope
                                 * (self_attn.q_norm / k_norm; GGUF attn_q_norm / attn_k_norm) */
    bool fused_qkv;             /* q, k and v rows in one tensor, in that order
                                 * (self_attn.qkv_proj; GGUF attn_qkv) */
    bool fused_gate_up;         /* gate rows then up rows in one tensor
                                 * (mlp.gate_up_proj; GGUF ffn_up, without ffn_gate) */
    bool partial_rotary;        /* rope may turn only the first dimensions of a head
                                 * (partial_rotary_factor; GGUF rope.dimension_count) */
    bool gguf_interleaved;      /* llama.cpp permutes q and k rows to rotate pairs (2i, 2i + 1);
                                 * the others rotate (i, i + d / 2) as Hugging Face (NeoX) */
    snug_window_rule window;
    snug_activation act;
    bool sandwich_norms;        /* norms after attention and after the MLP as well, before each
                                 * joins the residual (Gemma: post_attention_layernorm is the
                                 * one after attention, pre_feedforward_layernorm the MLP's input
                                 * norm, post_feedforward_layernorm after it; GGUF
                                 * post_attention_norm, ffn_norm, post_ffw_norm) */
    bool norm_plus_one;         /* Hugging Face checkpoints hold each RMSNorm weight as w and
                                 * the norm multiplies by 1 + w (GGUF files hold the sum) */
    bool embed_scale;           /* the embeddings are multiplied by sqrt(hidden_size) */
    bool local_rope;            /* sliding layers rotate with a base of their own
                                 * (rope_local_base_freq; GGUF rope.freq_base_swa) */
    bool config_defaults;       /* config.json may leave sizes out: transformers' config class
                                 * gives them (Gemma3TextConfig's, Gemma2Config's) */
    int32_t window_pattern;     /* SNUG_WINDOW_PATTERN's default: every n-th layer full (Gemma 3:
                                 * 6; Gemma 2: 2, the even layers sliding) */
    bool softcap;               /* attention scores and final logits may be soft-capped
                                 * (attn_logit_softcapping, final_logit_softcapping: Gemma 2 by
                                 * default 50 and 30) */
    const char *multimodal;     /* the "architectures" name of the family's image-and-text
                                 * checkpoints, whose text model snug runs (text_config, the
                                 * language_model tensors); NULL: none */
    const char *multimodal_type;/* their model_type */
} snug_arch_info;

/* The entry of a family; never NULL for a snug_arch value. */
const snug_arch_info *snug_arch_get(snug_arch arch);

/* The family config.json's "architectures" entry names, its "model_type"
 * names, or a GGUF file's general.architecture names; NULL when snug does
 * not run it. */
const snug_arch_info *snug_arch_by_architecture(const char *architecture);
const snug_arch_info *snug_arch_by_model_type(const char *model_type);
const snug_arch_info *snug_arch_by_gguf(const char *gguf);

/* The family whose multimodal checkpoints config.json's "architectures"
 * entry (or, when that is NULL, its model_type) names; NULL when none. */
const snug_arch_info *snug_arch_by_multimodal(const char *architecture, const char *model_type);

/* The families, for messages: "LlamaForCausalLM (llama), ..." or, with
 * gguf, the GGUF architecture names "llama, qwen2, ...". */
const char *snug_arch_list(bool gguf);

#endif /* SNUG_ARCH_H */
