/*
 * qdot.h: integer dot products of block-format weight rows (base/quant.h)
 * with activations quantized to 8 bits, the arithmetic the block-format
 * matrix-vector kernels do (as llama.cpp's do): this is their scalar
 * reference.
 *
 * Activations (x8) go in blocks of 32 elements: a float scale d (max |x| /
 * 127 over the block, or over its 256 for a K-quant), the 32 integers
 * round(x / d) in [-127, 127], and the sums of each half (16 integers: the
 * K-quants' sub-blocks of 16 need them). A weight
 * block in integer form (snug_qblock) meets the x8 blocks it covers: per
 * block of 32, the sum over its sub-blocks of sc times the integer dot of
 * q with the x8 integers (and mn times the x8 integers' sum), so that
 *   dot = sum over x8 blocks of  d_x (d_w isum - dmin_w msum)
 * with isum and msum exact in 32-bit integers.
 */
#ifndef SNUG_QDOT_H
#define SNUG_QDOT_H

#include "base/common.h"

enum { SNUG_X8_BLOCK = 32 };

typedef struct snug_x8_block {
    float d;            /* the scale: x ~ d q */
    int16_t sum16[2];   /* sums of q[0..16) and q[16..32) */
    int8_t q[SNUG_X8_BLOCK];
} snug_x8_block;

/* Quantizes k elements of x into k / 32 blocks for weights of block
 * format wdt, as llama.cpp quantizes activations for each: for a K-quant
 * (blocks of 256; k a multiple of 256) one float scale d = max |x| / 127
 * over each 256 elements (its Q8_K), for the others over each 32, rounded
 * to a half float (its Q8_0); q = x 127 / max |x| rounded to the nearest, ties
 * to even (as llama.cpp rounds). Zeros give d 0
 * and q 0. */
void snug_x8_quantize(const float *x, int64_t k, snug_dtype wdt, snug_x8_block *out);

/* Elements [e0, e0 + len) of row xr as snug_x8_quantize leaves them for
 * weights wdt: each d q as a float, the groups they fall in read whole
 * from xr (whose length is a multiple of the group). The blocked matmul
 * packs x so for block-format weights, so that a row of x meets the
 * weights at the same levels whatever the batch. */
void snug_x8_levels(const float *xr, int64_t e0, int64_t len, snug_dtype wdt, float *out);

/* The dot product of one row of block-format weights wdt (k elements,
 * block b at row + b stride bytes) with x8 (k / 32 blocks), by integer dot
 * products as above. */
float snug_qdot_ref(snug_dtype wdt, const void *row, size_t stride, const snug_x8_block *x8, int64_t k);

#endif /* SNUG_QDOT_H */
