/*
 * to_gguf.h: a Hugging Face model directory written as a GGUF file, named
 * and laid out as llama.cpp's converter writes the family (its
 * general.architecture, {arch}.* keys and tensor names; the q and k rows of
 * llama and mistral permuted into llama.cpp's interleaved rotary order;
 * Llama 3.1's rope scaling as rope_freqs.weight, LongRoPE's factors as
 * rope_factors_short/long.weight). Tensors keep their F32, F16 or BF16
 * bytes. No vocabulary is written: the file holds the model, and the
 * tokenizer stays in the directory.
 */
#ifndef SNUG_TO_GGUF_H
#define SNUG_TO_GGUF_H

#include "base/common.h"

/* Writes the model of directory dir to the file out_path (replaced when
 * it exists; removed again on a failure). Tensors are streamed through bounded staging, whatever
 * their size. A rope scaling with no GGUF form (dynamic, yarn) or a tensor
 * of another type is refused, naming it. */
snug_status snug_convert_to_gguf(const char *dir, const char *out_path, snug_error *err);

#endif /* SNUG_TO_GGUF_H */
