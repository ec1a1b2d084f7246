/*
 * to_gguf.h: a Hugging Face model directory written as a GGUF file, named
 * and laid out as llama.cpp's converter writes the family (its
 * general.architecture, {arch}.* keys and tensor names; the q and k rows of
 * llama and mistral permuted into llama.cpp's interleaved rotary order;
 * Llama 3.1's rope scaling as rope_freqs.weight, LongRoPE's factors as
 * rope_factors_short/long.weight). Tensors keep their F32, F16 or BF16
 * bytes. The directory's tokenizer goes in as llama.cpp's tokenizer.ggml.*
 * keys (tokenizer/tokenizer.h's snug_tokenizer_put_gguf) where GGUF can
 * hold it; otherwise the file has no vocabulary, and the info says why.
 */
#ifndef SNUG_TO_GGUF_H
#define SNUG_TO_GGUF_H

#include "base/common.h"

/* What a conversion wrote beside the model. */
typedef struct snug_to_gguf_info {
    bool vocab;        /* the tokenizer's keys are in the file */
    char why_not[256]; /* else: why not (no tokenizer, or none GGUF can hold) */
} snug_to_gguf_info;

/* Writes the model of directory dir to the file out_path (replaced when
 * it exists; removed again on a failure), and what it wrote beside it into
 * *info (may be NULL). Tensors are streamed through bounded staging,
 * whatever their size. A rope scaling with no GGUF form (dynamic, yarn) or
 * a tensor of another type is refused, naming it. */
snug_status snug_convert_to_gguf(const char *dir, const char *out_path, snug_to_gguf_info *info, snug_error *err);

#endif /* SNUG_TO_GGUF_H */
