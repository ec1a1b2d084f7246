/*
 * qdot.c: the scalar reference of the block-format dot products over 8-bit
 * activations (qdot.h).
 */
#include "qdot.h"

#include "base/dtype.h"
#include "base/quant.h"

#include <math.h>
#include <string.h>

/* The group of 256 (a K-quant's, one float scale: llama.cpp's Q8_K) or 32
 * (the others', a half scale: its Q8_0) that x is quantized in for wdt. */
static int64_t group_of(snug_dtype wdt) { return snug_qtype_block(snug_dtype_qtype(wdt)) == 256 ? 256 : SNUG_X8_BLOCK; }

/* The scale d of group xg (n elements) and the factor id that x takes to
 * its integer: d = max |x| / 127 (rounded to a half for groups of 32), id
 * = 127 / max |x| (0 for zeros). */
static void group_scale(const float *xg, int64_t n, float *d, float *id)
{
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++) { /* (not fmaxf and fabsf: calls, where this is a vector loop) */
        float a = xg[i] < 0.0f ? -xg[i] : xg[i];
        amax = a > amax ? a : amax;
    }
    *d = amax / 127.0f;
    if (n == SNUG_X8_BLOCK) *d = snug_f16_to_f32(snug_f32_to_f16(*d));
    *id = amax > 0.0f ? 127.0f / amax : 0.0f;
}

/* x's integer at factor id: x id rounded to the nearest, ties to even, as
 * llama.cpp rounds its activations (the float's own rounding after adding
 * 1.5 2^23, exact for |x id| < 2^22; anything else, a NaN included, comes
 * out in range), clamped to [-127, 127]. */
static int8_t level(float x, float id)
{
    float f = x * id + 12582912.0f;
    int32_t i;
    memcpy(&i, &f, sizeof i);
    int32_t v = (i & 0x007FFFFF) - 0x00400000;
    return (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
}

void snug_x8_quantize(const float *x, int64_t k, snug_dtype wdt, snug_x8_block *out)
{
    int64_t group = group_of(wdt);
    for (int64_t g = 0; g < k / group; g++) {
        const float *xg = x + g * group;
        float d, id;
        group_scale(xg, group, &d, &id);
        for (int64_t b = 0; b < group / SNUG_X8_BLOCK; b++) {
            snug_x8_block *o = &out[g * (group / SNUG_X8_BLOCK) + b];
            o->d = d;
            o->sum16[0] = o->sum16[1] = 0;
            for (int i = 0; i < SNUG_X8_BLOCK; i++) {
                o->q[i] = level(xg[b * SNUG_X8_BLOCK + i], id);
                o->sum16[i / 16] = (int16_t)(o->sum16[i / 16] + o->q[i]);
            }
        }
    }
}

void snug_x8_levels(const float *xr, int64_t e0, int64_t len, snug_dtype wdt, float *out)
{
    int64_t group = group_of(wdt);
    for (int64_t g0 = e0 / group * group; g0 < e0 + len; g0 += group) {
        float d, id;
        group_scale(xr + g0, group, &d, &id);
        for (int64_t e = SNUG_MAX(g0, e0); e < SNUG_MIN(g0 + group, e0 + len); e++) out[e - e0] = d * (float)level(xr[e], id);
    }
}

float snug_qdot_ref(snug_dtype wdt, const void *row, size_t stride, const snug_x8_block *x8, int64_t k)
{
    uint32_t t = snug_dtype_qtype(wdt);
    int64_t bs = snug_qtype_block(t);
    snug_qblock w;
    float acc = 0.0f;
    for (int64_t b = 0; b < k / bs; b++) {
        snug_quant_unpack((snug_qtype)t, (const unsigned char *)row + (size_t)b * stride, &w);
        for (int32_t c = 0; c < w.n / SNUG_X8_BLOCK; c++) {
            const snug_x8_block *xb = &x8[b * bs / SNUG_X8_BLOCK + c];
            int32_t isum = 0, msum = 0;
            for (int32_t e0 = c * SNUG_X8_BLOCK; e0 < (c + 1) * SNUG_X8_BLOCK; e0 += w.sub < SNUG_X8_BLOCK ? w.sub : SNUG_X8_BLOCK) {
                int32_t s = e0 / w.sub, len = w.sub < SNUG_X8_BLOCK ? w.sub : SNUG_X8_BLOCK, dot = 0, xs = 0;
                for (int32_t e = e0; e < e0 + len; e++) {
                    dot += (int32_t)w.q[e] * xb->q[e - c * SNUG_X8_BLOCK];
                    xs += xb->q[e - c * SNUG_X8_BLOCK];
                }
                isum += w.sc[s] * dot;
                msum += w.mn[s] * xs;
            }
            acc += xb->d * (w.d * (float)isum - w.dmin * (float)msum);
        }
    }
    return acc;
}
