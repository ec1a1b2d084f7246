/*
 * k_avx512.c: the AVX-512 matmul micro-kernels over the panel layout
 * (linear.h). Everything else (the matrix-vector path, which memory
 * bounds, the elementwise kernels and attention) is the AVX2 table's.
 *
 * A register tile is 8 rows of x by up to three panels (48 rows of w; 24
 * zmm accumulators); per k step one 64-byte load per panel (one step of a
 * whole panel), eight broadcasts of x:
 *   f32:         vfmadd231ps on the floats as they are;
 *   f16:         vcvtph2ps, then vfmadd231ps;
 *   bf16 (FMA):  per step of two elements, the low halves shifted up and
 *                the high halves masked are floats: two vfmadd231ps per
 *                broadcast pair of x;
 *   bf16 (dp):   vdpbf16ps on the pairs as they are, x rounded to bf16
 *                pairs when packed (avx512bf16 only).
 * Which bf16 kernel runs is the table's bf16_insn: snug_kernels_calibrate
 * measures both (on a Xeon vfmadd231ps zmm does twice the flops of
 * vdpbf16ps, on Zen 4 the other way round).
 */
#include "base/dtype.h"
#include "k_impl.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define T_512_INL                                                                             \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"), always_inline)) \
    static inline
#define T_512BF                                                                         \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#define T_512BF_INL                                                                          \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c"),   \
                   always_inline)) static inline

enum { MR = 8 };

/* The start of every micro-kernel: the tile's accumulators at zero. */
#define ZERO_TILE(NP)                                                                    \
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                 \
        _Pragma("GCC unroll 3") for (int j = 0; j < (NP); j++) acc[i][j] = _mm512_setzero_ps()

/* The end of every micro-kernel: rows i < mr_v of the tile into c. */
#define STORE_TILE(NP)                                                                   \
    do {                                                                                 \
        _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                             \
        {                                                                                \
            if (i >= mr_v) break;                                                        \
            float *d = c + i * ldc;                                                      \
            _Pragma("GCC unroll 3") for (int j = 0; j < (NP); j++)                       \
            {                                                                            \
                if (add) acc[i][j] = _mm512_add_ps(_mm512_loadu_ps(d + 16 * j), acc[i][j]); \
                _mm512_storeu_ps(d + 16 * j, acc[i][j]);                                 \
            }                                                                            \
        }                                                                                \
    } while (0)

/* f32 (F16 false) or f16 panels: kc steps of 16 values. */
T_512_INL void tile_f(int64_t kc, const float *a, const void *const b[3], float *c, int64_t ldc,
                      int32_t mr_v, bool add, const snug_prefetch *pf, const int NP, const bool F16)
{
    __m512 acc[MR][3];
    ZERO_TILE(NP);
    for (int64_t e = 0; e < kc; e++) {
        snug_prefetch_step(pf, e);
        __m512 w[3];
#pragma GCC unroll 3
        for (int j = 0; j < NP; j++)
            w[j] = F16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)b[j] + 16 * e)))
                       : _mm512_loadu_ps((const float *)b[j] + 16 * e);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512 t = _mm512_set1_ps(a[e * MR + i]);
#pragma GCC unroll 3
            for (int j = 0; j < NP; j++) acc[i][j] = _mm512_fmadd_ps(t, w[j], acc[i][j]);
        }
    }
    STORE_TILE(NP);
}

/* bf16 pairs widened in registers: (kc + 1) / 2 steps; a holds floats. */
T_512_INL void tile_bf16_fma(int64_t kc, const float *a, const void *const b[3], float *c,
                             int64_t ldc, int32_t mr_v, bool add, const snug_prefetch *pf, const int NP)
{
    __m512 acc[MR][3];
    const __m512i hi_mask = _mm512_set1_epi32((int32_t)0xFFFF0000u);
    ZERO_TILE(NP);
    for (int64_t q = 0; q < (kc + 1) / 2; q++) {
        snug_prefetch_step(pf, q);
        __m512 w[3];
#pragma GCC unroll 3
        for (int j = 0; j < NP; j++)
            w[j] = _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_loadu_si512((const void *)((const uint32_t *)b[j] + 16 * q)), 16));
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512 t = _mm512_set1_ps(a[2 * q * MR + i]);
#pragma GCC unroll 3
            for (int j = 0; j < NP; j++) acc[i][j] = _mm512_fmadd_ps(t, w[j], acc[i][j]);
        }
        /* the odd halves load the step again (from L1): keeping the
         * loaded pairs in registers across the even half's FMAs would take
         * three more than the 32 (24 accumulators), and the compiler would
         * spill accumulators instead; the empty asm makes it load again */
#pragma GCC unroll 3
        for (int j = 0; j < NP; j++) {
            const uint32_t *bj = (const uint32_t *)b[j] + 16 * q;
            __asm__("" : "+r"(bj));
            w[j] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_loadu_si512((const void *)bj), hi_mask));
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512 t = _mm512_set1_ps(a[(2 * q + 1) * MR + i]);
#pragma GCC unroll 3
            for (int j = 0; j < NP; j++) acc[i][j] = _mm512_fmadd_ps(t, w[j], acc[i][j]);
        }
    }
    STORE_TILE(NP);
}

#define MICRO_512(name, body)                                                                \
    T_512 static void name(int64_t kc, const void *a, const void *const b[3], int32_t np,    \
                           float *c, int64_t ldc, int32_t mr_v, bool add,                   \
                           const snug_prefetch *pf)                                         \
    {                                                                                        \
        if (np == 3) body(3);                                                                \
        else if (np == 2) body(2);                                                           \
        else body(1);                                                                        \
    }
#define BODY_F32(NP) tile_f(kc, a, b, c, ldc, mr_v, add, pf, NP, false)
#define BODY_F16(NP) tile_f(kc, a, b, c, ldc, mr_v, add, pf, NP, true)
#define BODY_BF16(NP) tile_bf16_fma(kc, a, b, c, ldc, mr_v, add, pf, NP)
MICRO_512(micro_avx512_f32, BODY_F32)
MICRO_512(micro_avx512_f16, BODY_F16)
MICRO_512(micro_avx512_bf16, BODY_BF16)

/* vdpbf16ps on the pairs: (kc + 1) / 2 steps; a holds bf16 pairs. */
T_512BF_INL void tile_bf16_dp(int64_t kc, const uint32_t *a, const void *const b[3], float *c,
                              int64_t ldc, int32_t mr_v, bool add, const snug_prefetch *pf,
                              const int NP)
{
    __m512 acc[MR][3];
    ZERO_TILE(NP);
    for (int64_t q = 0; q < (kc + 1) / 2; q++) {
        snug_prefetch_step(pf, q);
        __m512bh w[3];
#pragma GCC unroll 3
        for (int j = 0; j < NP; j++)
            w[j] = (__m512bh)_mm512_loadu_si512((const void *)((const uint32_t *)b[j] + 16 * q));
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) {
            __m512bh t = (__m512bh)_mm512_set1_epi32((int32_t)a[q * MR + i]);
#pragma GCC unroll 3
            for (int j = 0; j < NP; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], t, w[j]);
        }
    }
    STORE_TILE(NP);
}

T_512BF static void micro_avx512_bf16_dp(int64_t kc, const void *a, const void *const b[3],
                                         int32_t np, float *c, int64_t ldc, int32_t mr_v, bool add,
                                         const snug_prefetch *pf)
{
    if (np == 3) tile_bf16_dp(kc, a, b, c, ldc, mr_v, add, pf, 3);
    else if (np == 2) tile_bf16_dp(kc, a, b, c, ldc, mr_v, add, pf, 2);
    else tile_bf16_dp(kc, a, b, c, ldc, mr_v, add, pf, 1);
}

/* Whole panels of x for the float kinds: 8 elements of each of the 8 rows
 * at a time through one 8 x 8 transpose; the block's end as the driver
 * packs it (an odd length padded with a zero step). */
T_512 static void pack_x_f32(uint32_t *pan, const float *x0, int64_t k, int64_t pc, int64_t len)
{
    float *d = (float *)(void *)pan;
    int64_t ks = (len + 1) & ~(int64_t)1, q = 0;
    for (; q + 8 <= len; q += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) r[i] = _mm256_loadu_ps(x0 + i * k + pc + q);
        snug_transpose8(r);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) _mm256_storeu_ps(d + (q + i) * MR, r[i]);
    }
    for (; q < ks; q++)
        for (int i = 0; i < MR; i++) d[q * MR + i] = q < len ? x0[i * k + pc + q] : 0.0f;
}

/* Whole panels of x for vdpbf16ps: 16 elements of each row rounded to bf16
 * pairs by vcvtneps2bf16 (nearest even; it takes denormals for zero), 8
 * pairs of the 8 rows through one 8 x 8 transpose; the block's end one
 * pair at a time. */
T_512BF static void pack_x_bf16(uint32_t *pan, const float *x0, int64_t k, int64_t pc, int64_t len)
{
    int64_t ks = (len + 1) / 2, q = 0;
    for (; 2 * (q + 8) <= len; q += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++)
            r[i] = _mm256_castsi256_ps((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x0 + i * k + pc + 2 * q)));
        snug_transpose8(r);
#pragma GCC unroll 8
        for (int i = 0; i < MR; i++) _mm256_storeu_ps((float *)(void *)(pan + (q + i) * MR), r[i]);
    }
    for (; q < ks; q++)
        for (int i = 0; i < MR; i++) {
            const float *xr = x0 + i * k + pc;
            uint32_t lo = snug_f32_to_bf16(xr[2 * q]), hi = 2 * q + 1 < len ? snug_f32_to_bf16(xr[2 * q + 1]) : 0;
            pan[q * MR + i] = lo | hi << 16;
        }
}

T_512 static void bf16_to_f32_avx512(float *dst, const uint32_t *src, int64_t ksteps)
{
    const __m512i hi_mask = _mm512_set1_epi32((int32_t)0xFFFF0000u);
    for (int64_t q = 0; q < ksteps; q++) {
        __m512i v = _mm512_loadu_si512((const void *)(src + 16 * q));
        _mm512_storeu_ps(dst + 32 * q, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
        _mm512_storeu_ps(dst + 32 * q + 16, _mm512_castsi512_ps(_mm512_and_si512(v, hi_mask)));
    }
}

const snug_matmul_ops snug_avx512_matmul_ops = {
    .gemv = snug_avx2_gemv,
    .gemv_insn = SNUG_INSN_FMA_YMM,
    .f32 = {micro_avx512_f32, MR, 256, false, SNUG_INSN_FMA_ZMM, pack_x_f32},
    .f16 = {micro_avx512_f16, MR, 256, false, SNUG_INSN_FMA_ZMM, pack_x_f32},
    .bf16_fma = {micro_avx512_bf16, MR, 256, false, SNUG_INSN_FMA_ZMM, pack_x_f32},
    .convert_min_n = 24,
    .bf16_to_f32 = bf16_to_f32_avx512,
    .quant_slice = snug_quant_slice_f32_avx2,
};

const snug_matmul_ops snug_avx512bf16_matmul_ops = {
    .gemv = snug_avx2_gemv,
    .gemv_insn = SNUG_INSN_FMA_YMM,
    .f32 = {micro_avx512_f32, MR, 256, false, SNUG_INSN_FMA_ZMM, pack_x_f32},
    .f16 = {micro_avx512_f16, MR, 256, false, SNUG_INSN_FMA_ZMM, pack_x_f32},
    .bf16_fma = {micro_avx512_bf16, MR, 256, false, SNUG_INSN_FMA_ZMM, pack_x_f32},
    .bf16_dp = {micro_avx512_bf16_dp, MR, 256, true, SNUG_INSN_DPBF16_ZMM, pack_x_bf16},
    .convert_min_n = 24,
    .bf16_to_f32 = bf16_to_f32_avx512,
    .quant_slice = snug_quant_slice_f32_avx2,
};

void snug_kernels_fill_avx512(snug_kernels *k)
{
    snug_kernels_fill_avx2(k);
    k->isa = SNUG_ISA_AVX512;
    k->mm = &snug_avx512_matmul_ops;
    k->bf16_insn = SNUG_INSN_FMA_ZMM;
}

void snug_kernels_fill_avx512bf16(snug_kernels *k)
{
    snug_kernels_fill_avx2(k);
    k->isa = SNUG_ISA_AVX512_BF16;
    k->mm = &snug_avx512bf16_matmul_ops;
    k->bf16_insn = SNUG_INSN_FMA_ZMM;
}

#else /* not x86: never chosen (snug_isa_detect says scalar) */

void snug_kernels_fill_avx512(snug_kernels *k) { snug_kernels_fill_scalar(k); }
void snug_kernels_fill_avx512bf16(snug_kernels *k) { snug_kernels_fill_scalar(k); }

#endif
