/*
 * gguf_llama.h: a GGUF file of the llama architecture read as a model: its
 * configuration and the llama.cpp names of its tensors.
 */
#ifndef SNUG_GGUF_LLAMA_H
#define SNUG_GGUF_LLAMA_H

#include "base/common.h"
#include "config.h"
#include "gguf.h"

/* Reads the model configuration of a GGUF file of the llama architecture
 * (llama.* keys, the vocabulary size from token_embd.weight, bos/eos from
 * tokenizer.ggml.*) and validates it; tie_word_embeddings is left false,
 * rope_interleaved true (llama.cpp stores q and k rows that way). */
snug_status snug_gguf_llama_config(const snug_gguf_file *g, snug_model_config *cfg, snug_error *err);

/* The llama.cpp name of a Hugging Face tensor name of a llama model
 * ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight")
 * into out; false when it has none. */
bool snug_gguf_tensor_name(const char *hf, char *out, size_t size);

/* The Hugging Face name of a llama.cpp tensor name into out; false when
 * it has none. */
bool snug_gguf_hf_name(const char *gguf, char *out, size_t size);

/* Whether GGUF tensor `name` is configuration rather than a weight
 * (rope_freqs.weight: read into the config by snug_gguf_llama_config). */
bool snug_gguf_config_tensor(const char *name);

#endif /* SNUG_GGUF_LLAMA_H */
