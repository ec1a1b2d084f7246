/*
 * qdot.h: integer dot products of block-format weight rows (base/quant.h)
 * with activations quantized to 8 bits, the arithmetic the block-format
 * matrix-vector kernels do (as llama.cpp's do): this is their scalar
 * reference.
 *
 * Activations (x8) go in blocks of 32 elements: a float scale d = max |x| /
 * 127, the 32 integers round(x / d) in [-127, 127], and their sum. A weight
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
    int32_t sum;        /* sum of q */
    int8_t q[SNUG_X8_BLOCK];
} snug_x8_block;

/* Quantizes k elements of x (k a multiple of 32) into k / 32 blocks. A
 * block of zeros has d 0 and q 0. */
void snug_x8_quantize(const float *x, int64_t k, snug_x8_block *out);

/* The dot product of one row of block-format weights wdt (k elements,
 * block b at row + b stride bytes) with x8 (k / 32 blocks), by integer dot
 * products as above. */
float snug_qdot_ref(snug_dtype wdt, const void *row, size_t stride, const snug_x8_block *x8, int64_t k);

#endif /* SNUG_QDOT_H */
