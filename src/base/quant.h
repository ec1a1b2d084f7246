/*
 * quant.h: the quantized block formats of llama.cpp's GGUF files that snug
 * reads (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K to Q6_K): their
 * names, block shapes, and the exact scalar dequantization.
 *
 * A tensor of such a type is a sequence of blocks, each covering `block`
 * consecutive elements of a row (32, or 256 for the K-quants) in `bytes`
 * bytes: scales as IEEE half floats (little-endian) and small integers
 * packed in bits. A row's length must be a multiple of the block.
 *
 * snug_quant_dequantize follows the format to the bit: every value is what
 * llama.cpp's reference dequantization (gguf-py's gguf.quants) computes in
 * float32, the same products and sums in the same order, none fused (the
 * build is ISO C, which does not contract a * b + c into one rounding). The
 * fixtures of tests/data/quant check it value by value.
 */
#ifndef SNUG_QUANT_H
#define SNUG_QUANT_H

#include "common.h"

#include <string.h>

/* The formats, numbered as ggml numbers its types (the GGUF tensor type). */
typedef enum snug_qtype {
    SNUG_QTYPE_Q4_0 = 2,
    SNUG_QTYPE_Q4_1 = 3,
    SNUG_QTYPE_Q5_0 = 6,
    SNUG_QTYPE_Q5_1 = 7,
    SNUG_QTYPE_Q8_0 = 8,
    SNUG_QTYPE_Q2_K = 10,
    SNUG_QTYPE_Q3_K = 11,
    SNUG_QTYPE_Q4_K = 12,
    SNUG_QTYPE_Q5_K = 13,
    SNUG_QTYPE_Q6_K = 14,
} snug_qtype;

/* The ggml type ids above, in order: for listing them ("the supported
 * types are ..."). */
extern const snug_qtype snug_qtypes[10];

/* True when ggml type id t is one of the formats above. */
bool snug_qtype_known(uint32_t t);

/* "Q4_K" and so on; "unknown" for anything else. */
const char *snug_qtype_name(uint32_t t);

/* Elements per block (32 or 256) and bytes per block; 0 when unknown. */
int64_t snug_qtype_block(uint32_t t);
size_t snug_qtype_block_bytes(uint32_t t);

/* Bytes of n elements (a multiple of the block); 0 when t is unknown or n
 * is not a multiple. */
size_t snug_qtype_bytes(uint32_t t, int64_t n);

/* Bytes of n consecutive values of dt: n times its size for a float
 * type, whole blocks for a block format (n a multiple of its block); 0
 * for SNUG_DTYPE_NONE or n not a multiple. */
size_t snug_dtype_bytes(snug_dtype dt, int64_t n);

/* The KV cache's FP8 blocks (SNUG_DTYPE_MXFP8_E4M3, _E5M2; MXFP8's
 * layout): 33 bytes per 32 values, a scale byte s (E8M0: 2^(s - 127); s 0
 * read as 2^-127) then 32 FP8 codes (dtype.h's snug_fp8_to_f32 of the
 * element format snug_mxfp8_elem). A block's scale is 2^X with X =
 * floor(log2 max |x|) less the element format's largest exponent (8 for
 * E4M3, 15 for E5M2), within [-127, 127] (-127 for an all-zero block);
 * each value is snug_f32_to_fp8 of x times 2^-X (saturating). */
enum { SNUG_MXFP8_BLOCK = 32, SNUG_MXFP8_BLOCK_BYTES = 33 };

/* Whether dt is one of the MXFP8 dtypes. */
static inline bool snug_dtype_is_mxfp8(snug_dtype dt)
{
    return dt == SNUG_DTYPE_MXFP8_E4M3 || dt == SNUG_DTYPE_MXFP8_E5M2;
}

/* The element format (SNUG_DTYPE_F8_E4M3 or _E5M2) of an MXFP8 dtype. */
snug_dtype snug_mxfp8_elem(snug_dtype dt);

/* 2^(s - 127) of a scale byte (s 0: 2^-127, a float subnormal); in line,
 * as attention reads one for every block of 32 values. */
static inline float snug_e8m0_to_f32(uint8_t s)
{
    uint32_t bits = s ? (uint32_t)s << 23 : 0x00400000u;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* One block's scale byte for values whose largest magnitude is amax, and
 * 2^-X (what the values are multiplied by before their codes). */
uint8_t snug_mxfp8_scale(float amax, snug_dtype dt, float *inv);

/* Quantizes n floats (a multiple of 32) into MXFP8 blocks of dt at dst,
 * and the reverse. */
void snug_mxfp8_quantize(snug_dtype dt, const float *x, void *dst, int64_t n);
void snug_mxfp8_dequantize(snug_dtype dt, const void *src, float *dst, int64_t n);

/* One block in integer form: element e is
 *   (d sc[e / sub]) q[e] - (dmin mn[e / sub])
 * in float32, which is what snug_quant_dequantize computes. The legacy
 * formats have one sub-block of 32 with sc 1 (and for Q4_1 / Q5_1 mn 1,
 * dmin = -m); Q3_K and Q6_K have no mins (mn 0). Integer dot products over
 * 8-bit activations work on this form: per sub-block the sum of q times
 * the activations' integers, times sc, and the activations' sum times mn. */
typedef struct snug_qblock {
    int32_t n, sub;            /* elements (32 or 256), elements per sub-block (16, 32) */
    float d, dmin;
    int16_t q[256];
    int16_t sc[16], mn[16];    /* per sub-block */
} snug_qblock;

/* Unpacks the block at src of type t (known) into out. */
void snug_quant_unpack(snug_qtype t, const void *src, snug_qblock *out);

/* Dequantizes n elements (a multiple of the block) from the blocks at src
 * into dst, as described above. t must be known. */
void snug_quant_dequantize(snug_qtype t, const void *src, float *dst, int64_t n);

/* Whether snug quantizes to t: Q8_0, Q4_0, Q5_0, Q4_K, Q5_K and Q6_K. */
bool snug_qtype_quantizable(uint32_t t);

/* Quantizes n floats (a multiple of the block) into blocks of t
 * (quantizable) at dst: each block's scales from its own values (Q8_0:
 * max |x| / 127; Q4_0, Q5_0: the value of largest magnitude over -8 or
 * -16; Q4_K, Q5_K: each sub-block's range, min(0, lowest) to highest, in
 * 15 or 31 steps; Q6_K: each sub-block's largest magnitude over -32; the sub-block
 * scales in 6 or 8 bits of the block's half-float ones), each value
 * rounded to the nearest level of the scales as stored (ties away from
 * zero): for Q8_0, Q4_0 and Q5_0, what snug_quant_dequantize gives back is
 * within half a level (d / 2) of x. Zeros come back as zeros. */
void snug_quant_quantize(snug_qtype t, const float *src, void *dst, int64_t n);

#endif /* SNUG_QUANT_H */
