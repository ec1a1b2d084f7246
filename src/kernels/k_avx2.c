/*
 * k_avx2.c: the AVX2 + FMA + F16C kernels (8 floats per vector), compiled
 * through target attributes whatever -march says, and only run after
 * snug_isa_detect has seen the CPU support them.
 *
 * matmul, over the panel layout (linear.h) under the driver of k_matmul.c:
 * a 6 x 16 register tile (12 accumulators; per k step two loads of the
 * weight panel, six broadcasts of x), f16 widened with vcvtph2ps and bf16
 * pairs with a shift (the low half) and a mask (the high half); from
 * convert_min_n rows of x bf16 slices are widened to f32 once per block
 * instead; a tile of fewer rows than 6 computes only its own. n <= 16 goes
 * through a matrix-vector routine that streams one panel at a time, 4 rows
 * of x a pass (the later passes find the panel in L2; past 4 rows two
 * panels at a time, each block of 256 elements summed as the GEMM sums it,
 * so that a row's result does not depend on its step's other rows). On
 * Zen 3, 8 rows ran in 1.4-1.9 times 4 rows' time (nine runs) where the
 * 6 x 16 tiles took 2.0-2.5, and 16 in 1.9-2.9 times against 2.0-4.4
 * (bench/matmul's row sweep; one pass of 8 rows, a half panel at a time
 * to fit the registers, measured slower). The AVX-512 tables use it up to
 * 4 rows.
 * attention: for head sizes that are a multiple of 8 up to 128, a tile of
 * query rows and heads against chunks of up to 32 keys, each chunk's keys
 * and values converted once per tile (the keys transposed, so that scores
 * are broadcast-FMAs), an online softmax with a vectorized exp; other head
 * sizes one query row at a time.
 */
#include "base/dtype.h"
#include "base/quant.h"
#include "k_impl.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define T_AVX2_INL __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

/* ---- loads and conversions ---------------------------------------------- */

/* The bytes before element index i of a cache of dtype dt: for the blocks
 * of 32, those of the block holding it (base/quant.h's snug_dtype_bytes,
 * in line). */
T_AVX2_INL size_t kv_bytes(snug_dtype dt, int64_t i)
{
    if (dt == SNUG_DTYPE_F32) return (size_t)i * 4;
    if (dt == SNUG_DTYPE_Q8_0) return (size_t)(i / 32) * 34;
    if (snug_dtype_is_mxfp8(dt)) return (size_t)(i / 32) * SNUG_MXFP8_BLOCK_BYTES;
    return (size_t)i * 2;
}

/* Q8_0's block holding value i of blocks from p (kernels.h's snug_kv_view),
 * and its scale. */
T_AVX2_INL const uint8_t *q80_block_at(const void *p, int64_t i, float *d)
{
    const uint8_t *b = (const uint8_t *)p + kv_bytes(SNUG_DTYPE_Q8_0, i);
    *d = _cvtsh_ss((unsigned short)(b[0] | b[1] << 8));
    return b;
}

/* An MXFP8 block's scale, as the factors its codes' floats (mx_codes8) take:
 * the scale times 2^120 (E4M3) or 2^112 (E5M2) in one factor where that is
 * a float (scales up to 2^7 and 2^15: every block the cache writes in
 * practice), else 2^120 or 2^112 and then the scale. Either way the exact
 * product rounds once, as the scalar's value times scale does. */
typedef struct mx_scale {
    __m256 f1, f2;
    bool two;
} mx_scale;

T_AVX2_INL mx_scale mx_scale_of(uint8_t s, snug_dtype dt)
{
    uint32_t shift = dt == SNUG_DTYPE_MXFP8_E4M3 ? 120 : 112;
    mx_scale m;
    m.two = s + shift > 254;
    float f1, f2 = snug_e8m0_to_f32(s);
    uint32_t bits = (m.two ? 127 + shift : s + shift) << 23; /* s 0 (2^-127) gives 2^(shift - 127) too */
    memcpy(&f1, &bits, 4);
    m.f1 = _mm256_set1_ps(f1);
    m.f2 = _mm256_set1_ps(f2);
    return m;
}

/* MXFP8's block holding value i of blocks from p, and its scale. */
T_AVX2_INL const uint8_t *mx_block_at(const void *p, int64_t i, snug_dtype dt, mx_scale *scale)
{
    const uint8_t *b = (const uint8_t *)p + kv_bytes(dt, i);
    *scale = mx_scale_of(b[0], dt);
    return b;
}

/* The values of 8 FP8 codes (bytes at c) of MXFP8 dtype dt, times the
 * block's scale m, as snug_fp8_to_f32 and snug_e8m0_to_f32 make them: each
 * code's sign and magnitude bits placed in a float's (exponent and mantissa
 * low in its exponent field: a code's subnormals are the float's), which is
 * the code's value times 2^-120 (E4M3) or 2^-112 (E5M2), then m's factors.
 * Four instructions: the codes that mean infinity or NaN (never written:
 * the quantizer saturates) read as finite values. */
T_AVX2_INL __m256 mx_values8(const uint8_t *c, snug_dtype dt, const mx_scale *m)
{
    __m256i x = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)c));
    __m256i bits = dt == SNUG_DTYPE_MXFP8_E4M3
                       ? _mm256_and_si256(_mm256_slli_epi32(x, 20), _mm256_set1_epi32((int)0x87F00000u))
                       : _mm256_and_si256(_mm256_slli_epi32(x, 21), _mm256_set1_epi32((int)0x8FE00000u));
    __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(bits), m->f1);
    return m->two ? _mm256_mul_ps(v, m->f2) : v;
}

/* 8 elements of dtype dt at element index i of p, as floats (the blocks of
 * 32, Q8_0 and MXFP8: i a multiple of 8, so that they lie in one block). */
T_AVX2_INL __m256 load8(const void *p, snug_dtype dt, int64_t i)
{
    if (snug_dtype_is_mxfp8(dt)) {
        mx_scale m;
        const uint8_t *b = mx_block_at(p, i, dt, &m);
        return mx_values8(b + 1 + i % 32, dt, &m);
    }
    if (dt == SNUG_DTYPE_Q8_0) {
        float d;
        const uint8_t *b = q80_block_at(p, i, &d);
        __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + i % 32));
        return _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    }
    if (dt == SNUG_DTYPE_BF16) {
        __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    if (dt == SNUG_DTYPE_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_loadu_ps((const float *)p + i);
}

T_AVX2_INL float elem1(const void *p, snug_dtype dt, int64_t i)
{
    if (snug_dtype_is_mxfp8(dt)) {
        const uint8_t *b = (const uint8_t *)p + kv_bytes(dt, i);
        return snug_fp8_to_f32(b[1 + i % 32], snug_mxfp8_elem(dt)) * snug_e8m0_to_f32(b[0]);
    }
    if (dt == SNUG_DTYPE_Q8_0) {
        float d;
        const uint8_t *b = q80_block_at(p, i, &d);
        return d * (float)(int8_t)b[2 + i % 32];
    }
    if (dt == SNUG_DTYPE_BF16) return snug_bf16_to_f32(((const uint16_t *)p)[i]);
    if (dt == SNUG_DTYPE_F16) return snug_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

/* n elements of dtype dt from element index i of p as floats into dst (32-byte
 * aligned), n a multiple of 8; for the blocks of 32 (Q8_0, MXFP8) i and n
 * whole blocks, each block's scale read once for its 32 values. */
T_AVX2_INL void row_f32(float *dst, const void *p, snug_dtype dt, int64_t i, int32_t n)
{
    if (snug_dtype_is_mxfp8(dt)) {
        for (int32_t d = 0; d < n; d += 32) {
            mx_scale m;
            const uint8_t *b = mx_block_at(p, i + d, dt, &m);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) _mm256_store_ps(dst + d + 8 * k, mx_values8(b + 1 + 8 * k, dt, &m));
        }
    } else if (dt == SNUG_DTYPE_Q8_0) {
        for (int32_t d = 0; d < n; d += 32) {
            float scale;
            const uint8_t *b = q80_block_at(p, i + d, &scale);
            __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + 8 * k));
                _mm256_store_ps(dst + d + 8 * k, _mm256_mul_ps(sc, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
            }
        }
    } else {
        for (int32_t d = 0; d < n; d += 8) _mm256_store_ps(dst + d, load8(p, dt, i + d));
    }
}

T_AVX2_INL float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

T_AVX2_INL float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* e^x for each lane: x clamped to [-87.3, 88.37] (so 2^n stays a normal
 * float), n = round(x / ln 2), e^r for |r| <= ln2 / 2 by a degree-7
 * Taylor polynomial (relative error about 1e-8 before rounding). */
T_AVX2_INL __m256 exp8(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.37f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* ---- the matmul over the panel layout ------------------------------------ */

/* The high halves of bf16 pairs, and the low halves shifted up: each a
 * float (a bf16 is the top half of its float). */
T_AVX2_INL __m256 pairs_hi8(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int32_t)0xFFFF0000u)));
}
T_AVX2_INL __m256 pairs_lo8(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }

/* One full panel's 16 values of step e (dt F32 or F16) as two vectors. */
T_AVX2_INL void step16(const void *b, const snug_dtype dt, int64_t e, __m256 *lo, __m256 *hi)
{
    if (dt == SNUG_DTYPE_F16) {
        const __m128i *p = (const __m128i *)(const void *)((const uint16_t *)b + e * 16);
        *lo = _mm256_cvtph_ps(_mm_loadu_si128(p));
        *hi = _mm256_cvtph_ps(_mm_loadu_si128(p + 1));
    } else {
        *lo = _mm256_loadu_ps((const float *)b + e * 16);
        *hi = _mm256_loadu_ps((const float *)b + e * 16 + 8);
    }
}

/* Rows of x up to which the AVX2 table's matrix-vector path serves
 * unquantized weights (snug_matmul_ops.gemv_max_n). */
enum { AVX2_GEMV_MAX_N = 16 };

/* Lines the matrix-vector path prefetches ahead of its loads. */
enum { GEMV_AHEAD = 48 };

/* Elements of k a block of the AVX2 GEMM kinds takes (their kc). */
enum { AVX2_KC = 256 };

/* The matrix-vector path over PG full panels from b (each 16 rows, panel
 * stride `stride` bytes) for NT rows of x: y[t][o0 + l]. Accumulates the
 * even and the odd elements of bf16 pairs in the same registers. BLOCKED
 * (the passes past SNUG_GEMV_MAX_N rows) sums each block of AVX2_KC
 * elements on its own and adds it to y, in the GEMM's order, so that a
 * row's result is the GEMM's bit for bit whether its step has 5 rows or
 * 500 (a reranked document alone and in a batch). */
T_AVX2_INL void gemv_panels(float *y, const float *x, int64_t k, int64_t ldy, const unsigned char *b,
                            size_t stride, int64_t o0, const snug_dtype dt, const int NT,
                            const int PG, const bool BLOCKED)
{
    /* bf16: the odd elements in accumulators of their own for one or two
     * rows of x (ao), so that each accumulator takes one FMA a step: with
     * both in one, a step waits two FMA latencies (4 cycles a line, the
     * limit in L2, measured); with more rows of x there are chains enough */
    const bool split = dt == SNUG_DTYPE_BF16 && NT * PG <= 2 && !BLOCKED;
    const int64_t kb = BLOCKED ? AVX2_KC : k;
    for (int64_t e0 = 0; e0 < k; e0 += kb) {
        const int64_t e1 = SNUG_MIN(k, e0 + kb);
        __m256 acc[SNUG_GEMV_MAX_N][2][2], ao[2][2][2];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++)
#pragma GCC unroll 2
            for (int g = 0; g < PG; g++) acc[t][g][0] = acc[t][g][1] = _mm256_setzero_ps();
        if (split)
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++)
#pragma GCC unroll 2
                for (int g = 0; g < PG; g++) ao[t][g][0] = ao[t][g][1] = _mm256_setzero_ps();
        if (dt == SNUG_DTYPE_BF16) {
            const int64_t pairs = k / 2; /* whole pairs; an odd k's last step after */
            static const float zero_f = 0.0f;
            for (int64_t q = e0 / 2; q < (e1 + 1) / 2; q++) {
                /* one line per step and panel: fetch well ahead of the loads */
#pragma GCC unroll 2
                for (int g = 0; g < PG; g++)
                    _mm_prefetch((const char *)(b + g * stride + (q + GEMV_AHEAD) * 64), _MM_HINT_T0);
                __m256i v[2][2];
#pragma GCC unroll 2
                for (int g = 0; g < PG; g++) {
                    v[g][0] = _mm256_loadu_si256((const __m256i *)(const void *)(b + g * stride + q * 64));
                    v[g][1] = _mm256_loadu_si256((const __m256i *)(const void *)(b + g * stride + q * 64 + 32));
                }
                /* the odd end's step: its high halves are zero, and x has no element there */
                const float *xo_at = q < pairs ? x + 2 * q + 1 : &zero_f;
                const int64_t xo_stride = q < pairs ? k : 0;
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    __m256 xe = _mm256_broadcast_ss(x + t * k + 2 * q);
                    __m256 xo = _mm256_broadcast_ss(xo_at + t * xo_stride);
#pragma GCC unroll 2
                    for (int g = 0; g < PG; g++)
#pragma GCC unroll 2
                        for (int h = 0; h < 2; h++) {
                            acc[t][g][h] = _mm256_fmadd_ps(xe, pairs_lo8(v[g][h]), acc[t][g][h]);
                            if (split)
                                ao[t][g][h] = _mm256_fmadd_ps(xo, pairs_hi8(v[g][h]), ao[t][g][h]);
                            else
                                acc[t][g][h] = _mm256_fmadd_ps(xo, pairs_hi8(v[g][h]), acc[t][g][h]);
                        }
                }
            }
            if (split)
#pragma GCC unroll 2
                for (int t = 0; t < NT; t++)
#pragma GCC unroll 2
                    for (int g = 0; g < PG; g++) {
                        acc[t][g][0] = _mm256_add_ps(acc[t][g][0], ao[t][g][0]);
                        acc[t][g][1] = _mm256_add_ps(acc[t][g][1], ao[t][g][1]);
                    }
        } else {
            size_t sb = dt == SNUG_DTYPE_F16 ? 32 : 64;
            for (int64_t e = e0; e < e1; e++) {
                if (sb == 64 || (e & 1) == 0)
#pragma GCC unroll 2
                    for (int g = 0; g < PG; g++)
                        _mm_prefetch((const char *)(b + g * stride + (size_t)e * sb + GEMV_AHEAD * 64), _MM_HINT_T0);
                __m256 w[2][2];
#pragma GCC unroll 2
                for (int g = 0; g < PG; g++) step16(b + g * stride, dt, e, &w[g][0], &w[g][1]);
#pragma GCC unroll 4
                for (int t = 0; t < NT; t++) {
                    __m256 xv = _mm256_broadcast_ss(x + t * k + e);
#pragma GCC unroll 2
                    for (int g = 0; g < PG; g++)
#pragma GCC unroll 2
                        for (int h = 0; h < 2; h++) acc[t][g][h] = _mm256_fmadd_ps(xv, w[g][h], acc[t][g][h]);
                }
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++)
#pragma GCC unroll 2
            for (int g = 0; g < PG; g++)
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    float *d = y + t * ldy + o0 + g * 16 + 8 * h;
                    _mm256_storeu_ps(d, e0 ? _mm256_add_ps(_mm256_loadu_ps(d), acc[t][g][h]) : acc[t][g][h]);
                }
    }
}

/* gemv_panels for nt (1 to 4) rows with pg panels (2 only for nt <= 2)
 * and blocked, as constants. */
T_AVX2_INL void gemv_pass(float *y, const float *x, int64_t k, int64_t ldy, const unsigned char *b, size_t stride,
                          int64_t o0, const snug_dtype dt, int64_t nt, int pg, bool blocked)
{
    switch (nt + 4 * (pg - 1) + 8 * blocked) {
    case 1: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 1, 1, false); break;
    case 2: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 2, 1, false); break;
    case 3: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 3, 1, false); break;
    case 4: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 4, 1, false); break;
    case 9: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 1, 1, true); break;
    case 10: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 2, 1, true); break;
    case 11: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 3, 1, true); break;
    case 12: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 4, 1, true); break;
    case 13: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 1, 2, true); break;
    default: gemv_panels(y, x, k, ldy, b, stride, o0, dt, 2, 2, true); break; /* 14 */
    }
}

T_AVX2_INL void gemv_dt(float *y, int64_t ldy, const float *x, int64_t n, const snug_linear *w, int64_t p0,
                        int64_t p1, const snug_dtype dt)
{
    const int64_t k = w->k, m = w->m, full = m / SNUG_PANEL;
    const size_t stride = snug_linear_panel_offset(dt, m, k, 1);
    const unsigned char *base = w->data;
    const bool blocked = n > SNUG_GEMV_MAX_N; /* rows the GEMM would take on other machines */
    int64_t p = p0, pf = SNUG_MIN(p1, full);
    /* past SNUG_GEMV_MAX_N rows, passes of 4 rows over two panels in turn,
     * then the last 1 or 2 rows over both at once: their 2 or 4 chains of
     * dependent multiply-adds per panel (the GEMM's order, no split) would
     * leave the FMA units idle half the time or more */
    for (int64_t np; p < pf; p += np) {
        np = blocked && p + 1 < pf ? 2 : 1;
        for (int64_t t0 = 0; t0 < n; t0 += SNUG_GEMV_MAX_N) { /* later passes find the panels in L2 */
            const int64_t nt = SNUG_MIN(n - t0, (int64_t)SNUG_GEMV_MAX_N);
            const bool both = blocked && np == 2 && nt <= 2;
            for (int64_t j = 0; j < (both ? 1 : np); j++)
                gemv_pass(y + t0 * ldy, x + t0 * k, k, ldy, base + (p + j) * stride, stride, (p + j) * 16, dt, nt,
                          both ? 2 : 1, blocked);
        }
    }
    /* the narrow last panel (a few rows of one matrix): element by element;
     * past SNUG_GEMV_MAX_N rows as the GEMM's edge tile sums them (a
     * multiply-add chain per block of AVX2_KC, the blocks added in turn) */
    for (int64_t o = full * SNUG_PANEL; p1 > full && o < m; o++)
        for (int64_t t = 0; t < n; t++) {
            float s = 0.0f;
            for (int64_t e = 0; !blocked && e < k; e++) s += x[t * k + e] * snug_linear_elem(w, o, e);
            for (int64_t e0 = 0; blocked && e0 < k; e0 += AVX2_KC) {
                float blk = 0.0f;
                for (int64_t e = e0; e < SNUG_MIN(k, e0 + AVX2_KC); e++)
                    blk = fmaf(x[t * k + e], snug_linear_elem(w, o, e), blk);
                s = e0 ? s + blk : blk;
            }
            y[t * ldy + o] = s;
        }
}

T_AVX2 void snug_avx2_gemv(float *y, int64_t ldy, const float *x, int64_t n, const snug_linear *w, int64_t p0,
                           int64_t p1)
{
    SNUG_ASSERT(n >= 1 && n <= AVX2_GEMV_MAX_N);
    if (w->dtype == SNUG_DTYPE_BF16)
        gemv_dt(y, ldy, x, n, w, p0, p1, SNUG_DTYPE_BF16);
    else if (w->dtype == SNUG_DTYPE_F16)
        gemv_dt(y, ldy, x, n, w, p0, p1, SNUG_DTYPE_F16);
    else
        gemv_dt(y, ldy, x, n, w, p0, p1, SNUG_DTYPE_F32);
}

/* The micro-kernel: NR (<= MR) rows of x against one full panel (two
 * vectors per step), dt F32, F16, or BF16 pairs widened in registers; a
 * holds MR floats per element. A tile of fewer rows than MR (the rest of
 * n) computes only its own (with all MR, a tile of 2 cost as much as one
 * of 6). */
enum { MR = 6 };

T_AVX2_INL void micro_panel(int64_t kc, const float *a, const void *b, float *c, int64_t ldc,
                            bool add, const snug_prefetch *pf, const snug_dtype dt, const int NR)
{
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < NR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    if (dt == SNUG_DTYPE_BF16) {
        const __m256i *bp = b;
        for (int64_t q = 0; q < (kc + 1) / 2; q++) {
            snug_prefetch_step(pf, q);
            __m256 e0 = pairs_lo8(_mm256_loadu_si256(bp + 2 * q));
            __m256 e1 = pairs_lo8(_mm256_loadu_si256(bp + 2 * q + 1));
#pragma GCC unroll 6
            for (int i = 0; i < NR; i++) {
                __m256 t = _mm256_broadcast_ss(a + 2 * q * MR + i);
                acc[i][0] = _mm256_fmadd_ps(t, e0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(t, e1, acc[i][1]);
            }
            __m256 o0 = pairs_hi8(_mm256_loadu_si256(bp + 2 * q));
            __m256 o1 = pairs_hi8(_mm256_loadu_si256(bp + 2 * q + 1));
#pragma GCC unroll 6
            for (int i = 0; i < NR; i++) {
                __m256 t = _mm256_broadcast_ss(a + (2 * q + 1) * MR + i);
                acc[i][0] = _mm256_fmadd_ps(t, o0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(t, o1, acc[i][1]);
            }
        }
    } else {
        for (int64_t e = 0; e < kc; e++) {
            snug_prefetch_step(pf, e);
            __m256 w0, w1;
            step16(b, dt, e, &w0, &w1);
#pragma GCC unroll 6
            for (int i = 0; i < NR; i++) {
                __m256 t = _mm256_broadcast_ss(a + e * MR + i);
                acc[i][0] = _mm256_fmadd_ps(t, w0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(t, w1, acc[i][1]);
            }
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < NR; i++) {
        float *d = c + i * ldc;
        if (add) {
            acc[i][0] = _mm256_add_ps(_mm256_loadu_ps(d), acc[i][0]);
            acc[i][1] = _mm256_add_ps(_mm256_loadu_ps(d + 8), acc[i][1]);
        }
        _mm256_storeu_ps(d, acc[i][0]);
        _mm256_storeu_ps(d + 8, acc[i][1]);
    }
}

/* micro_panel over np panels for mr_v rows (the first panel's call does
 * all of the prefetch). */
T_AVX2_INL void micro_panels(int64_t kc, const float *a, const void *const b[3], int32_t np, float *c, int64_t ldc,
                             bool add, const snug_prefetch *pf, const snug_dtype dt, const int NR)
{
    const snug_prefetch none = {.count = 0};
    for (int32_t j = 0; j < np; j++) micro_panel(kc, a, b[j], c + 16 * j, ldc, add, j ? &none : pf, dt, NR);
}

#define MICRO_AVX2(name, dt)                                                                        \
    T_AVX2 static void name(int64_t kc, const void *a, const void *const b[3], int32_t np, float *c, \
                            int64_t ldc, int32_t mr_v, bool add, const snug_prefetch *pf)          \
    {                                                                                               \
        switch (mr_v) {                                                                             \
        case 1: micro_panels(kc, a, b, np, c, ldc, add, pf, dt, 1); break;                          \
        case 2: micro_panels(kc, a, b, np, c, ldc, add, pf, dt, 2); break;                          \
        case 3: micro_panels(kc, a, b, np, c, ldc, add, pf, dt, 3); break;                          \
        case 4: micro_panels(kc, a, b, np, c, ldc, add, pf, dt, 4); break;                          \
        case 5: micro_panels(kc, a, b, np, c, ldc, add, pf, dt, 5); break;                          \
        default: micro_panels(kc, a, b, np, c, ldc, add, pf, dt, MR); break;                        \
        }                                                                                           \
    }
MICRO_AVX2(micro_avx2_f32, SNUG_DTYPE_F32)
MICRO_AVX2(micro_avx2_f16, SNUG_DTYPE_F16)
MICRO_AVX2(micro_avx2_bf16, SNUG_DTYPE_BF16)

T_AVX2 static void bf16_to_f32_avx2(float *dst, const uint32_t *src, int64_t ksteps)
{
    for (int64_t q = 0; q < ksteps; q++) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)(src + 16 * q));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(src + 16 * q + 8));
        _mm256_storeu_ps(dst + 32 * q, pairs_lo8(v0));
        _mm256_storeu_ps(dst + 32 * q + 8, pairs_lo8(v1));
        _mm256_storeu_ps(dst + 32 * q + 16, pairs_hi8(v0));
        _mm256_storeu_ps(dst + 32 * q + 24, pairs_hi8(v1));
    }
}

const snug_matmul_ops snug_avx2_matmul_ops = {
    .gemv = snug_avx2_gemv,
    .gemv_insn = SNUG_INSN_FMA_YMM,
    .gemv_max_n = AVX2_GEMV_MAX_N,
    .f32 = {micro_avx2_f32, MR, AVX2_KC, false, SNUG_INSN_FMA_YMM},
    .f16 = {micro_avx2_f16, MR, AVX2_KC, false, SNUG_INSN_FMA_YMM},
    .bf16_fma = {micro_avx2_bf16, MR, AVX2_KC, false, SNUG_INSN_FMA_YMM},
    .convert_min_n = 24,
    .bf16_to_f32 = bf16_to_f32_avx2,
    .quant_slice = snug_quant_slice_f32_avx2,
};

/* ---- elementwise kernels ------------------------------------------------- */

T_AVX2 static void rmsnorm_avx2(float *y, const float *x, const void *w, snug_dtype wdt,
                                int64_t dim, float eps)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 16 <= dim; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    float ss = hsum8(_mm256_add_ps(s0, s1));
    for (; i < dim; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)dim + eps);
    __m256 rv = _mm256_set1_ps(r);
    i = 0;
    for (; i + 8 <= dim; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), rv),
                                              load8(w, wdt, i)));
    for (; i < dim; i++) y[i] = x[i] * r * elem1(w, wdt, i);
}

T_AVX2 static void silu_mul_avx2(float *h, const float *gu, int64_t inter)
{
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= inter; i += 8) {
        __m256 g = _mm256_loadu_ps(gu + i), u = _mm256_loadu_ps(gu + inter + i);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u));
    }
    for (; i < inter; i++) {
        float g = gu[i];
        h[i] = g / (1.0f + expf(-g)) * gu[inter + i];
    }
}

/* gelu(g) up as g / (1 + e^(-2z)), z = sqrt(2 / pi) (g + 0.044715 g^3):
 * silu's form at 2z (exp8 clamps the far ends: 0 and g come out). */
T_AVX2 static void gelu_tanh_mul_avx2(float *h, const float *gu, int64_t inter)
{
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), c = _mm256_set1_ps(0.044715f), k = _mm256_set1_ps(-1.5957691216057308f);
    for (; i + 8 <= inter; i += 8) {
        __m256 g = _mm256_loadu_ps(gu + i), u = _mm256_loadu_ps(gu + inter + i);
        __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(c, g), _mm256_mul_ps(g, g), g);
        __m256 e = exp8(_mm256_mul_ps(k, inner));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u));
    }
    for (; i < inter; i++) {
        float g = gu[i];
        h[i] = g / (1.0f + expf(-1.5957691216057308f * (g + 0.044715f * g * g * g))) * gu[inter + i];
    }
}

T_AVX2 static void add_avx2(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

T_AVX2 static void add_bias_avx2(float *y, const void *b, snug_dtype bdt, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), load8(b, bdt, i)));
    for (; i < n; i++) y[i] += elem1(b, bdt, i);
}

T_AVX2 static void rope_avx2(float *x, const float *cos_sin, int32_t head_dim)
{
    int32_t h = head_dim / 2, i = 0;
    for (; i + 8 <= h; i += 8) {
        __m256 lo = _mm256_loadu_ps(cos_sin + 2 * i), hi = _mm256_loadu_ps(cos_sin + 2 * i + 8);
        /* de-interleave (c0 s0 c1 s1 ...) into c and s, in order */
        __m256 c = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
        __m256 s = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
        c = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(c), _MM_SHUFFLE(3, 1, 2, 0)));
        s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), _MM_SHUFFLE(3, 1, 2, 0)));
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + h);
        _mm256_storeu_ps(x + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
        _mm256_storeu_ps(x + i + h, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)));
    }
    for (; i < h; i++) {
        float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
        float a = x[i], b = x[i + h];
        x[i] = a * c - b * s;
        x[i + h] = b * c + a * s;
    }
}

/* 8 floats to bf16, rounding to nearest even; NaNs become quiet NaNs. */
T_AVX2_INL __m128i to_bf16x8(__m256 v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)),
                                                   lsb),
                                  16);
    __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, qnan, nan);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* A block's 32 values x into v, and their largest magnitude (a NaN left
 * out, as the quantizers leave it). */
T_AVX2_INL float block_amax(const float *x, __m256 v[4])
{
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_loadu_ps(x + 8 * j);
        m = _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v[j]), m);
    }
    return hmax8(m);
}

/* 32 values in 32-bit lanes (q[0] the first 8) as bytes at dst: signed
 * (int8) or not. (The packs interleave 128-bit lanes: the permute puts
 * them back.) */
T_AVX2_INL void store_bytes32(uint8_t *dst, const __m256i q[4], bool is_signed)
{
    __m256i w = is_signed ? _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]))
                          : _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3]));
    w = _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)(void *)dst, w);
}

/* One Q8_0 block of x[0..32) at b, as snug_quant_quantize makes it: d the
 * half nearest max |x| / 127, each value the integer nearest x / d (ties
 * away from zero), within +-127. */
T_AVX2_INL void store_q80_block(uint8_t *b, const float *x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    unsigned short h = _cvtss_sh(block_amax(x, v) / 127.0f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    float d = _cvtsh_ss(h), id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256i q[4];
    for (int j = 0; j < 4; j++) {
        __m256 t = _mm256_mul_ps(v[j], _mm256_set1_ps(id));
        __m256 r = _mm256_floor_ps(_mm256_add_ps(_mm256_andnot_ps(sign, t), _mm256_set1_ps(0.5f)));
        r = _mm256_min_ps(r, _mm256_set1_ps(127.0f));
        q[j] = _mm256_cvttps_epi32(_mm256_or_ps(r, _mm256_and_ps(sign, t)));
    }
    b[0] = (uint8_t)(h & 0xFF), b[1] = (uint8_t)(h >> 8);
    store_bytes32(b + 2, q, true);
}

/* One MXFP8 block of dt of x[0..32) at b, as snug_mxfp8_quantize makes it:
 * each value times 2^-X to its nearest code (ties to even: a normal one
 * through its bits, a subnormal one in whole steps), saturating at the
 * largest finite, its sign kept. */
T_AVX2_INL void store_mx_block(uint8_t *b, const float *x, snug_dtype dt)
{
    bool e5 = dt == SNUG_DTYPE_MXFP8_E5M2;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    float inv;
    b[0] = snug_mxfp8_scale(block_amax(x, v), dt, &inv);
    const __m256 top = _mm256_set1_ps(e5 ? 57344.0f : 448.0f), down = _mm256_set1_ps(e5 ? 0x1p-112f : 0x1p-120f);
    const __m256 sub = _mm256_set1_ps(e5 ? 0x1p16f : 0x1p9f), sub_steps = _mm256_set1_ps(e5 ? 4.0f : 8.0f);
    const __m256i max_code = _mm256_set1_epi32(e5 ? 0x7B : 0x7E), one = _mm256_set1_epi32(1);
    const __m128i shift = _mm_cvtsi32_si128(e5 ? 21 : 20);
    const __m256i half = _mm256_set1_epi32(e5 ? (1 << 20) - 1 : (1 << 19) - 1);
    __m256i c[4];
    for (int j = 0; j < 4; j++) {
        __m256 y = _mm256_mul_ps(v[j], _mm256_set1_ps(inv)), a = _mm256_andnot_ps(sign, y);
        __m256i bits = _mm256_castps_si256(_mm256_mul_ps(a, down));
        __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(bits, shift), one);
        __m256i code = _mm256_srl_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, half), lsb), shift);
        /* below the smallest normal: whole steps of the subnormals (a float's would round twice) */
        __m256 steps = _mm256_mul_ps(a, sub);
        code = _mm256_blendv_epi8(code, _mm256_cvtps_epi32(steps),
                                  _mm256_castps_si256(_mm256_cmp_ps(steps, sub_steps, _CMP_LT_OQ)));
        code = _mm256_blendv_epi8(max_code, code, _mm256_castps_si256(_mm256_cmp_ps(a, top, _CMP_LE_OQ)));
        c[j] = _mm256_or_si256(code, _mm256_srli_epi32(_mm256_castps_si256(_mm256_and_ps(y, sign)), 24));
    }
    store_bytes32(b + 1, c, false);
}

T_AVX2 static void store_avx2(void *dst, snug_dtype dt, const float *src, int64_t n)
{
    if (snug_dtype_is_mxfp8(dt)) { /* n a multiple of 32 */
        for (int64_t i = 0; i < n; i += 32)
            store_mx_block((uint8_t *)dst + kv_bytes(dt, i), src + i, dt);
        return;
    }
    if (dt == SNUG_DTYPE_Q8_0) { /* n a multiple of 32 */
        for (int64_t i = 0; i < n; i += 32) store_q80_block((uint8_t *)dst + kv_bytes(dt, i), src + i);
        return;
    }
    if (dt == SNUG_DTYPE_F32) {
        memmove(dst, src, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
    int64_t i = 0;
    if (dt == SNUG_DTYPE_F16) {
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(d + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        for (; i < n; i++) d[i] = snug_f32_to_f16(src[i]);
    } else {
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(d + i), to_bf16x8(_mm256_loadu_ps(src + i)));
        for (; i < n; i++) d[i] = snug_f32_to_bf16(src[i]);
    }
}

T_AVX2 static void load_avx2(float *dst, const void *src, snug_dtype dt, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8(src, dt, i));
    for (; i < n; i++) dst[i] = elem1(src, dt, i);
}

/* ---- attention ------------------------------------------------------------ */

enum { ATT_CHUNK = 32, ATT_HEADS = 8, ATT_PIECE = 256 };

T_AVX2_INL float dot_f32(const float *a, const float *b, int32_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y[i] = y[i] * c + p * v[i] (c == 1: y += p v). */
T_AVX2_INL void axpy_f32(float *y, float p, const float *v, int32_t n)
{
    __m256 pv = _mm256_set1_ps(p);
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += p * v[i];
}

T_AVX2_INL void scale_f32(float *y, float c, int32_t n)
{
    __m256 cv = _mm256_set1_ps(c);
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(cv, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= c;
}

/* n elements of the cache from element index i as floats: a pointer into
 * the cache when it is f32, else converted into tmp. */
T_AVX2_INL const float *kv_f32(const void *base, snug_dtype dt, int64_t i, int32_t n, float *tmp)
{
    if (dt == SNUG_DTYPE_F32) return (const float *)base + i;
    int32_t d = 0;
    for (; d + 8 <= n; d += 8) _mm256_storeu_ps(tmp + d, load8(base, dt, i + d));
    for (; d < n; d++) tmp[d] = elem1(base, dt, i + d);
    return tmp;
}

/* ---- blocked attention ------------------------------------------------------
 * For head_dim a multiple of 8 up to ATT_HD_MAX: a tile of up to ATT_QROWS
 * query rows by ATT_HEADS heads of the group against keys in chunks of up
 * to ATT_CHUNK positions of one cache block. Each chunk's keys are
 * converted once per tile, transposed (kt[d][j], 8 x 8 blocks), and its
 * values converted once (vt[j][d]); then each query vector gets its 32
 * scores as four vectors of broadcast-FMAs (no horizontal sums), masked
 * to the keys it sees, an online-softmax update with the vectorized exp,
 * and out += p V. The running max and sum of each query vector of the
 * tile live in small arrays. */
enum { ATT_QROWS = 32, ATT_HD_MAX = 128 };

/* cap tanh(s / cap), as cap (2 / (1 + e^(-2 s / cap)) - 1) (exp8 clamps
 * the far ends: -cap and cap come out). */
T_AVX2_INL __m256 softcap8(__m256 s, float cap)
{
    const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f), c = _mm256_set1_ps(cap);
    __m256 e = exp8(_mm256_mul_ps(s, _mm256_set1_ps(-2.0f / cap)));
    return _mm256_mul_ps(c, _mm256_sub_ps(_mm256_div_ps(two, _mm256_add_ps(one, e)), one));
}

/* Scores of one query vector against the chunk: s[c] for keys 8c..8c+7,
 * times scale (soft-capped when softcap > 0), -inf outside [lo, hi). */
T_AVX2_INL void att_scores(const float *q, const float *kt, int32_t hd, float scale, float softcap, int32_t lo,
                           int32_t hi, __m256 s[4])
{
    /* even and odd d in separate accumulators: eight FMA chains */
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, u0 = s0, u1 = s0, u2 = s0, u3 = s0;
    for (int32_t d = 0; d < hd; d += 2) {
        __m256 b = _mm256_broadcast_ss(q + d), c = _mm256_broadcast_ss(q + d + 1);
        const float *r = kt + d * ATT_CHUNK;
        s0 = _mm256_fmadd_ps(b, _mm256_load_ps(r), s0);
        s1 = _mm256_fmadd_ps(b, _mm256_load_ps(r + 8), s1);
        s2 = _mm256_fmadd_ps(b, _mm256_load_ps(r + 16), s2);
        s3 = _mm256_fmadd_ps(b, _mm256_load_ps(r + 24), s3);
        u0 = _mm256_fmadd_ps(c, _mm256_load_ps(r + ATT_CHUNK), u0);
        u1 = _mm256_fmadd_ps(c, _mm256_load_ps(r + ATT_CHUNK + 8), u1);
        u2 = _mm256_fmadd_ps(c, _mm256_load_ps(r + ATT_CHUNK + 16), u2);
        u3 = _mm256_fmadd_ps(c, _mm256_load_ps(r + ATT_CHUNK + 24), u3);
    }
    s[0] = _mm256_add_ps(s0, u0);
    s[1] = _mm256_add_ps(s1, u1);
    s[2] = _mm256_add_ps(s2, u2);
    s[3] = _mm256_add_ps(s3, u3);
    const __m256 sc = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lov = _mm256_set1_epi32(lo - 1), hiv = _mm256_set1_epi32(hi);
    for (int c = 0; c < 4; c++) {
        __m256i j = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                     _mm256_set1_epi32(8 * c));
        __m256i in = _mm256_and_si256(_mm256_cmpgt_epi32(j, lov), _mm256_cmpgt_epi32(hiv, j));
        __m256 scaled = _mm256_mul_ps(s[c], sc);
        if (softcap > 0.0f) scaled = softcap8(scaled, softcap);
        s[c] = _mm256_blendv_ps(ninf, scaled, _mm256_castsi256_ps(in));
    }
}

/* out = out * corr + sum_{j in [lo, hi)} p[j] v[j] (v rows hd apart):
 * 64 floats of out at a time in eight accumulators (independent FMA
 * chains), then 8 at a time. */
T_AVX2_INL void att_pv(float *out, const float *p, const float *v, int32_t hd, int32_t lo,
                       int32_t hi, float corr)
{
    const __m256 cv = _mm256_set1_ps(corr);
    int32_t d = 0;
    for (; d + 64 <= hd; d += 64) {
        __m256 o[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) o[i] = _mm256_mul_ps(_mm256_loadu_ps(out + d + 8 * i), cv);
        for (int32_t j = lo; j < hi; j++) {
            __m256 b = _mm256_broadcast_ss(p + j);
            const float *r = v + j * hd + d;
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) o[i] = _mm256_fmadd_ps(b, _mm256_load_ps(r + 8 * i), o[i]);
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(out + d + 8 * i, o[i]);
    }
    for (; d < hd; d += 8) {
        __m256 o = _mm256_mul_ps(_mm256_loadu_ps(out + d), cv), o2 = _mm256_setzero_ps();
        int32_t j = lo;
        for (; j + 2 <= hi; j += 2) {
            o = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_load_ps(v + j * hd + d), o);
            o2 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j + 1), _mm256_load_ps(v + (j + 1) * hd + d), o2);
        }
        if (j < hi) o = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_load_ps(v + j * hd + d), o);
        _mm256_storeu_ps(out + d, _mm256_add_ps(o, o2));
    }
}

T_AVX2 static void attention_blocked(const snug_attn_args *a)
{
    const snug_kv_view *kv = &a->kv;
    const int32_t hd = a->head_dim;
    float kt[ATT_HD_MAX * ATT_CHUNK] __attribute__((aligned(32)));
    float vt[ATT_CHUNK * ATT_HD_MAX] __attribute__((aligned(32)));
    float kr[8 * ATT_HD_MAX] __attribute__((aligned(32))); /* 8 keys' rows, for the blocks of 32 */
    float p[ATT_CHUNK] __attribute__((aligned(32)));
    float mx[ATT_QROWS * ATT_HEADS], l[ATT_QROWS * ATT_HEADS];
    const bool blocks = kv->dtype == SNUG_DTYPE_Q8_0 || snug_dtype_is_mxfp8(kv->dtype);
    for (int32_t t0 = 0; t0 < a->n_q; t0 += ATT_QROWS) {
        int32_t nq = SNUG_MIN(ATT_QROWS, a->n_q - t0);
        for (int32_t g0 = 0; g0 < a->n_group; g0 += ATT_HEADS) {
            int32_t ng = SNUG_MIN(ATT_HEADS, a->n_group - g0);
            for (int32_t t = 0; t < nq; t++)
                for (int32_t g = 0; g < ng; g++) {
                    float *out = a->out + (t0 + t) * a->out_row_stride + (g0 + g) * a->out_head_stride;
                    memset(out, 0, (size_t)hd * sizeof(float));
                    mx[t * ATT_HEADS + g] = -INFINITY;
                    l[t * ATT_HEADS + g] = 0.0f;
                }
            int32_t last = a->pos0 + t0 + nq - 1;
            int32_t first = a->window > 0 ? SNUG_MAX(0, a->pos0 + t0 - a->window + 1) : 0;
            for (int32_t pos = first; pos <= last;) {
                /* a chunk spans blocks when runs of 8 positions stay inside one
                 * (blocks of a multiple of 8, the chunk starting on one): small
                 * blocks then still fill the whole chunk */
                int32_t bs = kv->block_size, off = pos % bs;
                int32_t span = bs % 8 == 0 && pos % 8 == 0 ? ATT_CHUNK : bs - off;
                int32_t cnt = SNUG_MIN(SNUG_MIN(ATT_CHUNK, span), last + 1 - pos);
#define KV_AT(j) ((int64_t)kv->block_table[(pos + (j)) / bs] * (int64_t)kv->block_stride + \
                  (int64_t)((pos + (j)) % bs) * hd)
                /* the chunk's keys transposed, its values as floats */
                int32_t j = 0;
                for (; j + 8 <= cnt; j += 8) {
                    int64_t base = KV_AT(j); /* 8 positions in one block */
                    if (blocks) /* a scale a block of 32: the 8 rows as floats first */
                        for (int i = 0; i < 8; i++) row_f32(kr + i * hd, kv->k, kv->dtype, base + i * hd, hd);
                    for (int32_t d = 0; d < hd; d += 8) {
                        __m256 r[8];
#pragma GCC unroll 8
                        for (int i = 0; i < 8; i++)
                            r[i] = blocks ? _mm256_load_ps(kr + i * hd + d) : load8(kv->k, kv->dtype, base + i * hd + d);
                        snug_transpose8(r);
#pragma GCC unroll 8
                        for (int i = 0; i < 8; i++) _mm256_store_ps(kt + (d + i) * ATT_CHUNK + j, r[i]);
                    }
                }
                for (; j < ATT_CHUNK; j++)
                    for (int32_t d = 0; d < hd; d++)
                        kt[d * ATT_CHUNK + j] = j < cnt ? elem1(kv->k, kv->dtype, KV_AT(j) + d) : 0.0f;
                for (j = 0; j < cnt; j++) row_f32(vt + j * hd, kv->v, kv->dtype, KV_AT(j), hd);
                /* the next chunk's lines on their way while this one computes: a
                 * block holds every head of a layer, so one head's rows lie far
                 * apart, where the hardware's prefetchers do not follow */
                for (int32_t jj = cnt; jj < cnt + SNUG_MIN(ATT_CHUNK, last + 1 - (pos + cnt)); jj++) {
                    int64_t at = KV_AT(jj);
                    size_t o0 = kv_bytes(kv->dtype, at), o1 = kv_bytes(kv->dtype, at + hd);
                    for (size_t o = o0; o < o1; o += 64) {
                        _mm_prefetch((const char *)kv->k + o, _MM_HINT_T0);
                        _mm_prefetch((const char *)kv->v + o, _MM_HINT_T0);
                    }
                }
#undef KV_AT
                for (int32_t t = 0; t < nq; t++) {
                    int32_t lt = a->pos0 + t0 + t;
                    int32_t ft = a->window > 0 ? SNUG_MAX(0, lt - a->window + 1) : 0;
                    int32_t lo = SNUG_MAX(0, ft - pos), hi = SNUG_MIN(cnt, lt - pos + 1);
                    if (lo >= hi) continue;
                    for (int32_t g = 0; g < ng; g++) {
                        const float *q = a->q + (t0 + t) * a->q_row_stride + (g0 + g) * a->q_head_stride;
                        float *out = a->out + (t0 + t) * a->out_row_stride + (g0 + g) * a->out_head_stride;
                        __m256 s[4];
                        att_scores(q, kt, hd, a->scale, a->softcap, lo, hi, s);
                        float cmax = hmax8(_mm256_max_ps(_mm256_max_ps(s[0], s[1]), _mm256_max_ps(s[2], s[3])));
                        float *m = &mx[t * ATT_HEADS + g];
                        float nm = SNUG_MAX(*m, cmax);
                        float corr = expf(*m - nm);
                        *m = nm;
                        __m256 nmv = _mm256_set1_ps(nm), sum = _mm256_setzero_ps();
                        for (int c = 0; c < 4; c++) {
                            __m256 mask = _mm256_cmp_ps(s[c], _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ);
                            __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(s[c], nmv)), mask);
                            _mm256_store_ps(p + 8 * c, e);
                            sum = _mm256_add_ps(sum, e);
                        }
                        l[t * ATT_HEADS + g] = l[t * ATT_HEADS + g] * corr + hsum8(sum);
                        att_pv(out, p, vt, hd, lo, hi, corr);
                    }
                }
                pos += cnt;
            }
            for (int32_t t = 0; t < nq; t++)
                for (int32_t g = 0; g < ng; g++) {
                    float *out = a->out + (t0 + t) * a->out_row_stride + (g0 + g) * a->out_head_stride;
                    float lv = l[t * ATT_HEADS + g];
                    scale_f32(out, lv > 0.0f ? 1.0f / lv : 0.0f, hd);
                }
        }
    }
}

T_AVX2 static void attention_avx2(const snug_attn_args *a)
{
    if (a->head_dim % 8 == 0 && a->head_dim <= ATT_HD_MAX) {
        attention_blocked(a);
        return;
    }
    const snug_kv_view *kv = &a->kv;
    const int32_t hd = a->head_dim;
    float s[ATT_HEADS][ATT_CHUNK] __attribute__((aligned(32)));
    float tmp[ATT_PIECE] __attribute__((aligned(32)));
    float mx[ATT_HEADS], l[ATT_HEADS];
    for (int32_t t = 0; t < a->n_q; t++) {
        int32_t last = a->pos0 + t;
        int32_t first = a->window > 0 ? SNUG_MAX(0, last - a->window + 1) : 0;
        for (int32_t g0 = 0; g0 < a->n_group; g0 += ATT_HEADS) {
            int32_t ng = SNUG_MIN(ATT_HEADS, a->n_group - g0);
            const float *q[ATT_HEADS];
            float *out[ATT_HEADS];
            for (int32_t g = 0; g < ng; g++) {
                q[g] = a->q + t * a->q_row_stride + (g0 + g) * a->q_head_stride;
                out[g] = a->out + t * a->out_row_stride + (g0 + g) * a->out_head_stride;
                memset(out[g], 0, (size_t)hd * sizeof(float));
                mx[g] = -INFINITY;
                l[g] = 0.0f;
            }
            for (int32_t p = first; p <= last;) {
                int32_t off = p % kv->block_size;
                int32_t cnt = SNUG_MIN(SNUG_MIN(ATT_CHUNK, kv->block_size - off), last + 1 - p);
                int64_t base = (int64_t)kv->block_table[p / kv->block_size] *
                                   (int64_t)kv->block_stride +
                               (int64_t)off * hd;
                /* scores: each key converted once for every head */
                for (int32_t j = 0; j < cnt; j++) {
                    for (int32_t g = 0; g < ng; g++) s[g][j] = 0.0f;
                    for (int32_t d0 = 0; d0 < hd; d0 += ATT_PIECE) {
                        int32_t len = SNUG_MIN(ATT_PIECE, hd - d0);
                        const float *kj = kv_f32(kv->k, kv->dtype, base + j * hd + d0, len, tmp);
                        for (int32_t g = 0; g < ng; g++) s[g][j] += dot_f32(q[g] + d0, kj, len);
                    }
                }
                /* the online softmax: new max, rescale, weights */
                for (int32_t g = 0; g < ng; g++) {
                    float cmax = -INFINITY;
                    for (int32_t j = 0; j < cnt; j++) {
                        s[g][j] *= a->scale;
                        if (a->softcap > 0.0f) s[g][j] = a->softcap * tanhf(s[g][j] / a->softcap);
                        cmax = SNUG_MAX(cmax, s[g][j]);
                    }
                    float nm = SNUG_MAX(mx[g], cmax);
                    if (nm > mx[g]) {
                        float corr = expf(mx[g] - nm);
                        l[g] *= corr;
                        scale_f32(out[g], corr, hd);
                        mx[g] = nm;
                    }
                    __m256 nmv = _mm256_set1_ps(nm);
                    float sum = 0.0f;
                    int32_t j = 0;
                    for (; j + 8 <= cnt; j += 8) {
                        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s[g] + j), nmv));
                        _mm256_storeu_ps(s[g] + j, e);
                        sum += hsum8(e);
                    }
                    for (; j < cnt; j++) {
                        s[g][j] = expf(s[g][j] - nm);
                        sum += s[g][j];
                    }
                    l[g] += sum;
                }
                /* out += weights times values, each value converted once */
                for (int32_t j = 0; j < cnt; j++) {
                    for (int32_t d0 = 0; d0 < hd; d0 += ATT_PIECE) {
                        int32_t len = SNUG_MIN(ATT_PIECE, hd - d0);
                        const float *vj = kv_f32(kv->v, kv->dtype, base + j * hd + d0, len, tmp);
                        for (int32_t g = 0; g < ng; g++) axpy_f32(out[g] + d0, s[g][j], vj, len);
                    }
                }
                p += cnt;
            }
            for (int32_t g = 0; g < ng; g++) scale_f32(out[g], l[g] > 0.0f ? 1.0f / l[g] : 0.0f, hd);
        }
    }
}

void snug_kernels_fill_avx2(snug_kernels *k)
{
    k->isa = SNUG_ISA_AVX2;
    k->mm = &snug_avx2_matmul_ops;
    k->bf16_insn = SNUG_INSN_FMA_YMM;
    k->rmsnorm = rmsnorm_avx2;
    k->silu_mul = silu_mul_avx2;
    k->gelu_tanh_mul = gelu_tanh_mul_avx2;
    k->add = add_avx2;
    k->add_bias = add_bias_avx2;
    k->rope = rope_avx2;
    k->store = store_avx2;
    k->load = load_avx2;
    k->attention = attention_avx2;
}

#else /* not x86: never chosen (snug_isa_detect says scalar) */

void snug_kernels_fill_avx2(snug_kernels *k) { snug_kernels_fill_scalar(k); }

#endif
