/*
 * dtype.h: element types (their names in safetensors, PyTorch and GGUF, and
 * their sizes) and conversions between the floating-point weight types.
 */
#ifndef SNUG_DTYPE_H
#define SNUG_DTYPE_H

#include "common.h"

/* Bytes per element; 0 for SNUG_DTYPE_NONE. */
size_t snug_dtype_size(snug_dtype dt);

/* The safetensors name ("F32", "BF16", ...); "NONE" for SNUG_DTYPE_NONE. */
const char *snug_dtype_name(snug_dtype dt);

/* Parses a safetensors dtype name (never a block format); SNUG_DTYPE_NONE
 * when unknown. */
snug_dtype snug_dtype_from_name(const char *name);

/* Parses a dtype as people and config files write it: "bf16", "bfloat16",
 * "f16", "float16", "half", "f32", "float32", "float" (case-insensitive).
 * SNUG_DTYPE_NONE when it is none of the weight types. */
snug_dtype snug_dtype_from_torch(const char *name);

/* The PyTorch name of a weight type ("bfloat16", "float16", "float32"). */
const char *snug_dtype_torch_name(snug_dtype dt);

/* True for llama.cpp's block formats (SNUG_DTYPE_Q8_0 .. SNUG_DTYPE_Q6_K),
 * whose snug_dtype_size is 0: base/quant.h has their blocks. */
bool snug_dtype_is_quant(snug_dtype dt);

/* The ggml type id (a snug_qtype) of a block format; 0 for any other dtype. */
uint32_t snug_dtype_qtype(snug_dtype dt);

/* The block format of ggml type id t; SNUG_DTYPE_NONE when t is none of
 * them. */
snug_dtype snug_dtype_from_qtype(uint32_t t);

/* True for the types snug loads weights in: F32, F16, BF16. */
bool snug_dtype_is_weight(snug_dtype dt);

/* Scalar conversions; f32 to bf16 and f16 round to nearest even, keep
 * infinities and turn NaNs into quiet NaNs. */
float snug_bf16_to_f32(uint16_t h);
uint16_t snug_f32_to_bf16(float f);
float snug_f16_to_f32(uint16_t h);
uint16_t snug_f32_to_f16(float f);

/* FP8 codes of fmt (SNUG_DTYPE_F8_E4M3: 4 exponent bits of bias 7, no
 * infinity, 448 the largest; SNUG_DTYPE_F8_E5M2: 5 of bias 15, 57344 the
 * largest finite) and floats: a code's value exactly; a float's nearest
 * code (ties to even), saturating at the largest finite (NaN too), the
 * sign kept. */
float snug_fp8_to_f32(uint8_t c, snug_dtype fmt);
uint8_t snug_f32_to_fp8(float y, snug_dtype fmt);

/* Converts n elements between any two weight types (F32, F16, BF16). src
 * and dst must not overlap unless the types are the same. */
void snug_convert(void *dst, snug_dtype dst_dtype, const void *src, snug_dtype src_dtype,
                  size_t n);

#endif /* SNUG_DTYPE_H */
