/*
 * gguf_model.h: a GGUF file read as a model of one of the families
 * formats/arch.h lists: its configuration from llama.cpp's metadata keys,
 * and llama.cpp's names of its tensors against the Hugging Face ones.
 */
#ifndef SNUG_GGUF_MODEL_H
#define SNUG_GGUF_MODEL_H

#include "base/common.h"
#include "config.h"
#include "gguf.h"
#include "gguf_writer.h"

/* Reads the model configuration of a GGUF file whose general.architecture
 * is a family snug runs (an unknown one is refused naming those it runs):
 * the {arch}.* keys (sizes, key_length as the head size, rope.dimension_count
 * as the rotary dimensions, rope base and scaling, norm epsilon), the
 * vocabulary size from token_embd.weight, bos/eos from tokenizer.ggml.*,
 * Llama 3.1's rope_freqs.weight; validated. tie_word_embeddings is left
 * false (the caller sees whether output.weight is there); rope_interleaved
 * is the family's (llama.cpp permutes the q and k rows of llama only). */
snug_status snug_gguf_model_config(const snug_gguf_file *g, snug_model_config *cfg, snug_error *err);

/* The llama.cpp name of a Hugging Face tensor name of a model of family
 * arch ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight")
 * into out; false when it has none. */
bool snug_gguf_tensor_name(snug_arch arch, const char *hf, char *out, size_t size);

/* The Hugging Face name of a llama.cpp tensor name of a model of family
 * arch into out ("blk.3.ffn_up.weight" is mlp.gate_up_proj for Phi-3,
 * mlp.up_proj for the others); false when it has none. */
bool snug_gguf_hf_name(snug_arch arch, const char *gguf, char *out, size_t size);

/* The general.architecture llama.cpp writes for family arch ("llama" for
 * Mistral, which has no name of its own there). */
const char *snug_gguf_arch_name(snug_arch arch);

/* Puts the keys of config c as llama.cpp's converter writes them, the
 * reverse of snug_gguf_model_config: general.architecture and .alignment
 * (align), the {arch}.* sizes (key_length, value_length and
 * rope.dimension_count always), rope base, norm epsilon, linear scaling's
 * type and factor, LongRoPE's original length and attention factor, and
 * the bos/eos ids. Tensors that carry configuration (rope_freqs,
 * rope_factors_*) are the caller's. */
void snug_gguf_model_keys(snug_gguf_header *h, const snug_model_config *c, uint32_t align);

/* Llama 3.1's rope scaling (c's llama3 rope_scaling) as llama.cpp's
 * converter writes it into rope_freqs.weight, one factor per rotary
 * frequency i of wavelength w (unscaled) into out: 1 where w < original /
 * high, factor where w > original / low, else 1 / ((1 - s) / factor + s)
 * with s = (original / w - low) / (high - low). */
void snug_gguf_llama3_factors(const snug_model_config *c, float *out);

/* Whether GGUF tensor `name` is configuration rather than a weight
 * (rope_freqs.weight: read into the config by snug_gguf_model_config). */
bool snug_gguf_config_tensor(const char *name);

/* The query_pre_attn_scalar llama.cpp gives a gemma3 file, which has no
 * key for it: the head size, but hidden / heads for the 62-layer 27B (as
 * Google's configs have it). */
double snug_gguf_query_pre_attn_scalar(const snug_model_config *c);

#endif /* SNUG_GGUF_MODEL_H */
