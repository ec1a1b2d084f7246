/*
 * qdot.c: the scalar reference of the block-format dot products over 8-bit
 * activations (qdot.h).
 */
#include "qdot.h"

#include "base/dtype.h"
#include "base/quant.h"

#include <math.h>

void snug_x8_quantize(const float *x, int64_t k, snug_x8_block *out)
{
    for (int64_t b = 0; b < k / SNUG_X8_BLOCK; b++) {
        const float *xb = x + b * SNUG_X8_BLOCK;
        snug_x8_block *o = &out[b];
        float amax = 0.0f;
        for (int i = 0; i < SNUG_X8_BLOCK; i++) amax = fmaxf(amax, fabsf(xb[i]));
        o->d = amax / 127.0f;
        float id = o->d > 0.0f ? 1.0f / o->d : 0.0f;
        o->sum = 0;
        for (int i = 0; i < SNUG_X8_BLOCK; i++) {
            float v = roundf(xb[i] * id);
            o->q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
            o->sum += o->q[i];
        }
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
