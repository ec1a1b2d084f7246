/*
 * k_scalar.c: the portable kernels, the reference the SIMD ones are tested
 * against. Plain loops that accumulate in float in index order; they favour
 * being obviously right over speed.
 */
#include "base/dtype.h"
#include "base/quant.h"
#include "k_impl.h"

#include <math.h>
#include <string.h>

/* Element i of a buffer of dtype dt (F32, F16, BF16, or the blocks of 32
 * of Q8_0 or MXFP8 from the buffer's start: kernels.h's snug_kv_view) as a
 * float. */
static inline float elem_f32(const void *p, snug_dtype dt, int64_t i)
{
    if (snug_dtype_is_mxfp8(dt)) {
        const uint8_t *b = (const uint8_t *)p + (size_t)(i / 32) * SNUG_MXFP8_BLOCK_BYTES;
        return snug_fp8_to_f32(b[1 + i % 32], snug_mxfp8_elem(dt)) * snug_e8m0_to_f32(b[0]);
    }
    if (dt == SNUG_DTYPE_Q8_0) {
        const uint8_t *b = (const uint8_t *)p + (size_t)(i / 32) * 34;
        return snug_f16_to_f32((uint16_t)(b[0] | b[1] << 8)) * (float)(int8_t)b[2 + i % 32];
    }
    if (dt == SNUG_DTYPE_F32) return ((const float *)p)[i];
    if (dt == SNUG_DTYPE_F16) return snug_f16_to_f32(((const uint16_t *)p)[i]);
    return snug_bf16_to_f32(((const uint16_t *)p)[i]);
}

static void rmsnorm_scalar(float *y, const float *x, const void *w, snug_dtype wdt, int64_t dim,
                           float eps)
{
    float ss = 0.0f;
    for (int64_t i = 0; i < dim; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int64_t i = 0; i < dim; i++) y[i] = x[i] * r * elem_f32(w, wdt, i);
}

static void silu_mul_scalar(float *h, const float *gu, int64_t inter)
{
    for (int64_t i = 0; i < inter; i++) {
        float g = gu[i];
        h[i] = g / (1.0f + expf(-g)) * gu[inter + i];
    }
}

/* The argument of GELU's tanh form, doubled and negated: e^(this) is what
 * 1 + tanh(z) = 2 / (1 + e^(-2z)) needs. */
static float gelu_neg2z(float g) { return -1.5957691216057308f * (g + 0.044715f * g * g * g); }

static void gelu_tanh_mul_scalar(float *h, const float *gu, int64_t inter)
{
    for (int64_t i = 0; i < inter; i++) {
        float g = gu[i];
        h[i] = g / (1.0f + expf(gelu_neg2z(g))) * gu[inter + i];
    }
}

static void add_scalar(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

static void add_bias_scalar(float *y, const void *b, snug_dtype bdt, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += elem_f32(b, bdt, i);
}

static void rope_scalar(float *x, const float *cos_sin, int32_t head_dim)
{
    int32_t h = head_dim / 2;
    for (int32_t i = 0; i < h; i++) {
        float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
        float a = x[i], b = x[i + h];
        x[i] = a * c - b * s;
        x[i + h] = b * c + a * s;
    }
}

static void store_scalar(void *dst, snug_dtype dt, const float *src, int64_t n)
{
    if (dt == SNUG_DTYPE_Q8_0) {
        snug_quant_quantize(SNUG_QTYPE_Q8_0, src, dst, n);
    } else if (snug_dtype_is_mxfp8(dt)) {
        snug_mxfp8_quantize(dt, src, dst, n);
    } else if (dt == SNUG_DTYPE_F32) {
        memmove(dst, src, (size_t)n * sizeof(float));
    } else if (dt == SNUG_DTYPE_F16) {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = snug_f32_to_f16(src[i]);
    } else {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = snug_f32_to_bf16(src[i]);
    }
}

static void load_scalar(float *dst, const void *src, snug_dtype dt, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = elem_f32(src, dt, i);
}

/* One key at a time: the running max m, the running sum l and the output
 * (accumulated in place in out) are rescaled when the max grows. */
static void attention_scalar(const snug_attn_args *a)
{
    const snug_kv_view *kv = &a->kv;
    int32_t hd = a->head_dim;
    for (int32_t t = 0; t < a->n_q; t++) {
        int32_t last = a->pos0 + t;
        int32_t first = a->window > 0 ? SNUG_MAX(0, last - a->window + 1) : 0;
        for (int32_t g = 0; g < a->n_group; g++) {
            const float *q = a->q + t * a->q_row_stride + g * a->q_head_stride;
            float *out = a->out + t * a->out_row_stride + g * a->out_head_stride;
            float mx = -INFINITY, l = 0.0f;
            for (int32_t d = 0; d < hd; d++) out[d] = 0.0f;
            for (int32_t p = first; p <= last; p++) {
                int64_t off = (int64_t)kv->block_table[p / kv->block_size] *
                                  (int64_t)kv->block_stride +
                              (int64_t)(p % kv->block_size) * hd;
                float s = 0.0f;
                for (int32_t d = 0; d < hd; d++) s += q[d] * elem_f32(kv->k, kv->dtype, off + d);
                s *= a->scale;
                if (a->softcap > 0.0f) s = a->softcap * tanhf(s / a->softcap);
                if (s > mx) {
                    float corr = expf(mx - s);
                    l *= corr;
                    for (int32_t d = 0; d < hd; d++) out[d] *= corr;
                    mx = s;
                }
                float e = expf(s - mx);
                l += e;
                for (int32_t d = 0; d < hd; d++) out[d] += e * elem_f32(kv->v, kv->dtype, off + d);
            }
            float inv = l > 0.0f ? 1.0f / l : 0.0f;
            for (int32_t d = 0; d < hd; d++) out[d] *= inv;
        }
    }
}

void snug_kernels_fill_scalar(snug_kernels *k)
{
    k->isa = SNUG_ISA_SCALAR;
    k->mm = NULL; /* snug_matmul's own scalar loops */
    k->bf16_insn = SNUG_INSN_SCALAR;
    k->rmsnorm = rmsnorm_scalar;
    k->silu_mul = silu_mul_scalar;
    k->gelu_tanh_mul = gelu_tanh_mul_scalar;
    k->add = add_scalar;
    k->add_bias = add_bias_scalar;
    k->rope = rope_scalar;
    k->store = store_scalar;
    k->load = load_scalar;
    k->attention = attention_scalar;
}
