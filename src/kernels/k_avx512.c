/*
 * k_avx512.c: the AVX-512 kernels. Only the GEMM micro-kernels differ from
 * the AVX2 table (k_avx2.c), whose other kernels these tables reuse: the
 * packing of w (8 x 8 transposes, any nr that is a multiple of 8), the
 * memory-bound matrix-vector path, the elementwise kernels and attention.
 *
 *   avx512:     an 8 x 48 f32 register tile (24 zmm accumulators), the
 *               AVX2 micro-kernel's structure with 16-lane vectors; bf16
 *               weights with few rows of x take the AVX2 pairs kernel, as
 *               in the AVX2 table.
 *   avx512bf16: for bf16 weights, the same tile with vdpbf16ps: w packed as
 *               bf16 pairs (two k steps per 32-bit lane, no conversion), x
 *               rounded to bf16 pairs when packed; f32 and f16 weights take
 *               the avx512 path.
 */
#include "base/dtype.h"
#include "k_impl.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define T_512BF                                                                         \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))

enum { MR = 8, NR = 48 };

#define ZERO_ROW(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = c##i##0, c##i##2 = c##i##0

#define ALL_ROWS(X) X(0); X(1); X(2); X(3); X(4); X(5); X(6); X(7)

#define STORE_ROW(i)                                                                \
    do {                                                                            \
        float *d_ = dst + (i) * ld;                                                 \
        if (add_now) {                                                              \
            c##i##0 = _mm512_add_ps(_mm512_loadu_ps(d_), c##i##0);                  \
            c##i##1 = _mm512_add_ps(_mm512_loadu_ps(d_ + 16), c##i##1);             \
            c##i##2 = _mm512_add_ps(_mm512_loadu_ps(d_ + 32), c##i##2);             \
        }                                                                           \
        _mm512_storeu_ps(d_, c##i##0);                                              \
        _mm512_storeu_ps(d_ + 16, c##i##1);                                         \
        _mm512_storeu_ps(d_ + 32, c##i##2);                                         \
    } while (0)

/* The end of both micro-kernels: a full tile straight into c, an edge tile
 * through a local tile and then only its real part. */
#define STORE_TILE()                                                                     \
    do {                                                                                 \
        float tile[MR * NR];                                                             \
        bool full = mr_v == MR && nr_v == NR;                                            \
        float *dst = full ? c : tile;                                                    \
        int64_t ld = full ? ldc : NR;                                                    \
        bool add_now = full && add;                                                      \
        STORE_ROW(0); STORE_ROW(1); STORE_ROW(2); STORE_ROW(3);                         \
        STORE_ROW(4); STORE_ROW(5); STORE_ROW(6); STORE_ROW(7);                         \
        if (!full)                                                                       \
            for (int32_t i = 0; i < mr_v; i++)                                           \
                for (int32_t j = 0; j < nr_v; j++)                                       \
                    c[i * ldc + j] = add ? c[i * ldc + j] + tile[i * NR + j]             \
                                         : tile[i * NR + j];                             \
    } while (0)

/* The tile of c is read and written at the end: start fetching it (each
 * row's 48 floats span up to four lines). */
#define PREFETCH_TILE()                                                                  \
    do {                                                                                 \
        for (int32_t i_ = 0; i_ < mr_v; i_++)                                            \
            for (int32_t j_ = 0; j_ < NR; j_ += 16)                                      \
                _mm_prefetch((const char *)(c + i_ * ldc + j_), _MM_HINT_T0);            \
        for (int32_t i_ = 0; i_ < mr_v; i_++)                                            \
            _mm_prefetch((const char *)(c + i_ * ldc + NR - 1), _MM_HINT_T0);            \
    } while (0)

#define FMA_ROW(i)                                          \
    do {                                                    \
        __m512 t_ = _mm512_set1_ps(a[i]);                \
        c##i##0 = _mm512_fmadd_ps(t_, b0, c##i##0);         \
        c##i##1 = _mm512_fmadd_ps(t_, b1, c##i##1);         \
        c##i##2 = _mm512_fmadd_ps(t_, b2, c##i##2);         \
    } while (0)

T_512 static void micro_avx512(int64_t ksteps, const void *ap, const void *bv, float *c,
                               int64_t ldc, int32_t mr_v, int32_t nr_v, bool add)
{
    const float *a = ap, *b = bv;
    PREFETCH_TILE();
    ALL_ROWS(ZERO_ROW);
    for (int64_t p = 0; p < ksteps; p++) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), b2 = _mm512_loadu_ps(b + 32);
        ALL_ROWS(FMA_ROW);
        a += MR;
        b += NR;
    }
    STORE_TILE();
}

#define DP_ROW(i)                                                                  \
    do {                                                                           \
        __m512bh t_ = (__m512bh)_mm512_set1_epi32((int32_t)a[i]);                  \
        c##i##0 = _mm512_dpbf16_ps(c##i##0, t_, b0);                               \
        c##i##1 = _mm512_dpbf16_ps(c##i##1, t_, b1);                               \
        c##i##2 = _mm512_dpbf16_ps(c##i##2, t_, b2);                               \
    } while (0)

/* ap and bv: panels of bf16 pairs (the low half the even k). */
T_512BF static void micro_avx512bf16(int64_t ksteps, const void *ap, const void *bv, float *c,
                                     int64_t ldc, int32_t mr_v, int32_t nr_v, bool add)
{
    const uint32_t *a = ap, *b = bv;
    PREFETCH_TILE();
    ALL_ROWS(ZERO_ROW);
    for (int64_t p = 0; p < ksteps; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512((const void *)b);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512((const void *)(b + 16));
        __m512bh b2 = (__m512bh)_mm512_loadu_si512((const void *)(b + 32));
        ALL_ROWS(DP_ROW);
        a += MR;
        b += NR;
    }
    STORE_TILE();
}

static const snug_gemm_ops avx512_ops = {
    .mr = MR,
    .nr = NR,
    .kc = 128,
    .nc = 480,
    .mc = 192,
    .pairs = false,
    .insn = SNUG_INSN_FMA_ZMM,
    .gemv_insn = SNUG_INSN_FMA_YMM,
    .pack_b = snug_avx2_pack_b,
    .micro = micro_avx512,
    .gemv = snug_avx2_gemv,
};

static const snug_gemm_ops avx512bf16_ops = {
    .mr = MR,
    .nr = NR,
    .kc = 256,
    .nc = 480,
    .mc = 192,
    .pairs = true,
    .a_bf16 = true,
    .insn = SNUG_INSN_DPBF16_ZMM,
    .gemv_insn = SNUG_INSN_FMA_YMM,
    .pack_b = snug_avx2_pack_b,
    .micro = micro_avx512bf16,
    .gemv = snug_avx2_gemv,
};

/* as the AVX2 table: bf16 with few rows of x through the pairs kernel */
static const snug_gemm_ops *ops_avx512(snug_dtype wdt, int64_t n)
{
    return wdt == SNUG_DTYPE_BF16 && n < SNUG_PAIRS_MAX_N ? &snug_avx2_pairs_ops : &avx512_ops;
}

static const snug_gemm_ops *ops_avx512bf16(snug_dtype wdt)
{
    return wdt == SNUG_DTYPE_BF16 ? &avx512bf16_ops : &avx512_ops;
}

static void matmul_avx512(float *y, const float *x, int64_t n, const void *w, snug_dtype wdt,
                          int64_t k, int64_t m, void *scratch, int32_t n_threads)
{
    snug_matmul_blocked(ops_avx512(wdt, n), y, x, n, w, wdt, k, m, scratch, n_threads);
}

static void matmul_avx512bf16(float *y, const float *x, int64_t n, const void *w,
                              snug_dtype wdt, int64_t k, int64_t m, void *scratch,
                              int32_t n_threads)
{
    snug_matmul_blocked(ops_avx512bf16(wdt), y, x, n, w, wdt, k, m, scratch, n_threads);
}

static snug_insn matmul_insn_avx512(snug_dtype wdt, int64_t n)
{
    return snug_matmul_blocked_insn(ops_avx512(wdt, n), n);
}

static snug_insn matmul_insn_avx512bf16(snug_dtype wdt, int64_t n)
{
    return snug_matmul_blocked_insn(ops_avx512bf16(wdt), n);
}

void snug_kernels_fill_avx512(snug_kernels *k)
{
    snug_kernels_fill_avx2(k);
    k->isa = SNUG_ISA_AVX512;
    k->matmul = matmul_avx512;
    k->matmul_insn = matmul_insn_avx512;
}

void snug_kernels_fill_avx512bf16(snug_kernels *k)
{
    snug_kernels_fill_avx2(k);
    k->isa = SNUG_ISA_AVX512_BF16;
    k->matmul = matmul_avx512bf16;
    k->matmul_insn = matmul_insn_avx512bf16;
}

#else /* not x86: never chosen (snug_isa_detect says scalar) */

void snug_kernels_fill_avx512(snug_kernels *k) { snug_kernels_fill_scalar(k); }
void snug_kernels_fill_avx512bf16(snug_kernels *k) { snug_kernels_fill_scalar(k); }

#endif
