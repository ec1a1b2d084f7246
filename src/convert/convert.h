/*
 * convert.h: imports of llama2.c checkpoints and GGUF files as Hugging Face
 * model directories (config.json + model.safetensors).
 *
 * Both formats store the rows of q_proj and k_proj in the interleaved-pair
 * rotary layout; Hugging Face checkpoints use the half-split layout
 * (rotate_half), so each head's rows are permuted on the way: output row
 * p * head_dim/2 + i of a head is input row 2i + p. Tensors are streamed
 * through two bounded staging buffers, whatever their size.
 */
#ifndef SNUG_CONVERT_H
#define SNUG_CONVERT_H

#include "base/common.h"
#include "formats/config.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"

/* Permutes the rows of whole heads (n_rows, a multiple of head_dim, rows
 * of row_bytes) between the interleaved rotary order (row 2i + p of a
 * head) and the half-split one (row p * head_dim/2 + i): into interleaved
 * when to_interleaved, else out of it. src and dst do not overlap. */
void snug_rotary_rows_permute(const unsigned char *src, unsigned char *dst, int64_t n_rows, int64_t head_dim,
                              size_t row_bytes, bool to_interleaved);

/* Converts a llama2.c checkpoint (the legacy float32 format, or version 1
 * with the "ak42" magic) into outdir (which must exist). The file's size
 * must be exactly what its header implies. */
snug_status snug_convert_llama2c(const char *path, const char *outdir, snug_error *err);

/* Converts a GGUF file of the llama architecture with F32, F16 or BF16
 * tensors into outdir. An output.weight identical to token_embd.weight (or
 * absent) becomes tied embeddings. */
snug_status snug_convert_gguf(const char *path, const char *outdir, snug_error *err);

#endif /* SNUG_CONVERT_H */
