/*
 * k_avx2.c: the AVX2 + FMA + F16C kernels (8 floats per vector), compiled
 * through target attributes whatever -march says, and only run after
 * snug_isa_detect has seen the CPU support them.
 *
 * matmul: a 4 x 24 register tile (12 accumulators; per k step three loads
 * of the packed weight panel and four broadcasts of x) under the blocked
 * driver of k_matmul.c; the weight panels are packed with 8 x 8 transposes,
 * converting bf16 with a 16-bit shift and f16 with vcvtph2ps. bf16 weights
 * with fewer than SNUG_PAIRS_MAX_N rows of x take a 6 x 8 tile over panels
 * of bf16 pairs instead (packing a pure transposition, the conversion in
 * the micro-kernel). n <= 4 goes through a matrix-vector routine that
 * streams a few weight rows at a time.
 * attention: for head sizes that are a multiple of 8 up to 128, a tile of
 * query rows and heads against chunks of up to 32 keys, each chunk's keys
 * and values converted once per tile (the keys transposed, so that scores
 * are broadcast-FMAs), an online softmax with a vectorized exp; other head
 * sizes one query row at a time.
 */
#include "base/dtype.h"
#include "k_impl.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define T_AVX2_INL __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

enum { MR = 4, NR = 24 };

/* ---- loads and conversions ---------------------------------------------- */

/* 8 elements of dtype dt at element index i of p, as floats. */
T_AVX2_INL __m256 load8(const void *p, snug_dtype dt, int64_t i)
{
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
    if (dt == SNUG_DTYPE_BF16) return snug_bf16_to_f32(((const uint16_t *)p)[i]);
    if (dt == SNUG_DTYPE_F16) return snug_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
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

/* ---- packing the weight ------------------------------------------------- */

/* The 8 x 8 transpose of r[0..7] in place. */
T_AVX2_INL void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* k step q of row `row` (elements p0.. of the block, kc of them) as 32
 * bits: the float's bits, or a bf16 pair (the odd end padded with zero). */
T_AVX2_INL uint32_t pack_elem(const void *w, snug_dtype dt, bool pairs, int64_t k, int64_t row,
                              int64_t p0, int64_t kc, int64_t q)
{
    const uint16_t *w16 = (const uint16_t *)w + row * k + p0;
    if (pairs) {
        uint32_t lo = w16[2 * q], hi = 2 * q + 1 < kc ? w16[2 * q + 1] : 0;
        return lo | hi << 16;
    }
    float f = elem1(w, dt, row * k + p0 + q);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Eight k steps of one row from element index i, as 32-bit lanes. */
T_AVX2_INL __m256 pack_load8(const void *w, snug_dtype dt, bool pairs, int64_t i)
{
    if (pairs) return _mm256_loadu_ps((const float *)(const void *)((const uint16_t *)w + i));
    return load8(w, dt, i);
}

T_AVX2_INL void pack_b_dt(void *bpv, const void *w, const snug_dtype dt, const bool pairs,
                          int64_t k, int64_t o0, int64_t rows, int64_t p0, int64_t kc,
                          int32_t nr)
{
    uint32_t *bp = bpv;
    int64_t ksteps = pairs ? (kc + 1) / 2 : kc;
    int64_t kfull = pairs ? kc / 2 : kc; /* steps with every element in the block */
    int64_t kvec = kfull & ~(int64_t)7;
    int64_t step = pairs ? 2 : 1; /* elements per k step */
    int64_t panels = (rows + nr - 1) / nr;
    for (int64_t j = 0; j < panels; j++) {
        uint32_t *pan = bp + j * ksteps * nr;
        for (int64_t r0 = 0; r0 < nr; r0 += 8) {
            int64_t o = o0 + j * nr + r0;
            int64_t valid = SNUG_MAX(0, SNUG_MIN(8, o0 + rows - o));
            int64_t q = 0;
            if (valid == 8) {
                for (; q < kvec; q += 8) {
                    __m256 v[8];
#pragma GCC unroll 8
                    for (int i = 0; i < 8; i++)
                        v[i] = pack_load8(w, dt, pairs, (o + i) * k + p0 + q * step);
                    transpose8(v);
#pragma GCC unroll 8
                    for (int i = 0; i < 8; i++)
                        _mm256_storeu_ps((float *)(void *)(pan + (q + i) * nr + r0), v[i]);
                }
            }
            for (; q < ksteps; q++)
                for (int64_t i = 0; i < 8; i++)
                    pan[q * nr + r0 + i] =
                        i < valid ? pack_elem(w, dt, pairs, k, o + i, p0, kc, q) : 0;
        }
    }
}

T_AVX2 void snug_avx2_pack_b(void *bp, const void *w, snug_dtype wdt, int64_t k, int64_t o0,
                             int64_t rows, int64_t p0, int64_t kc, int32_t nr, bool pairs)
{
    if (pairs)
        pack_b_dt(bp, w, SNUG_DTYPE_BF16, true, k, o0, rows, p0, kc, nr);
    else if (wdt == SNUG_DTYPE_BF16)
        pack_b_dt(bp, w, SNUG_DTYPE_BF16, false, k, o0, rows, p0, kc, nr);
    else if (wdt == SNUG_DTYPE_F16)
        pack_b_dt(bp, w, SNUG_DTYPE_F16, false, k, o0, rows, p0, kc, nr);
    else
        pack_b_dt(bp, w, SNUG_DTYPE_F32, false, k, o0, rows, p0, kc, nr);
}

/* ---- the micro-kernel ---------------------------------------------------- */

#define FMA_ROW(i)                                          \
    do {                                                    \
        __m256 t_ = _mm256_broadcast_ss(a + (i));           \
        c##i##0 = _mm256_fmadd_ps(t_, b0, c##i##0);         \
        c##i##1 = _mm256_fmadd_ps(t_, b1, c##i##1);         \
        c##i##2 = _mm256_fmadd_ps(t_, b2, c##i##2);         \
    } while (0)

#define STORE_ROW(i, dst, ld)                                                         \
    do {                                                                              \
        float *d_ = (dst) + (i) * (ld);                                               \
        if (add) {                                                                    \
            c##i##0 = _mm256_add_ps(_mm256_loadu_ps(d_), c##i##0);                    \
            c##i##1 = _mm256_add_ps(_mm256_loadu_ps(d_ + 8), c##i##1);                \
            c##i##2 = _mm256_add_ps(_mm256_loadu_ps(d_ + 16), c##i##2);               \
        }                                                                             \
        _mm256_storeu_ps(d_, c##i##0);                                                \
        _mm256_storeu_ps(d_ + 8, c##i##1);                                            \
        _mm256_storeu_ps(d_ + 16, c##i##2);                                           \
    } while (0)

T_AVX2 static void micro_avx2(int64_t ksteps, const void *ap, const void *bv, float *c,
                              int64_t ldc, int32_t mr_v, int32_t nr_v, bool add)
{
    const float *a = ap, *b = bv;
    /* the tile of c is read and written at the end: start fetching it now */
    for (int32_t i = 0; i < mr_v; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
    __m256 c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
    for (int64_t p = 0; p < ksteps; p++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), b2 = _mm256_loadu_ps(b + 16);
        /* keeps the three weight vectors in registers: otherwise compilers
         * fold them into each FMA as memory operands, 16 loads per 12 FMAs */
        __asm__("" : "+x"(b0), "+x"(b1), "+x"(b2));
        FMA_ROW(0);
        FMA_ROW(1);
        FMA_ROW(2);
        FMA_ROW(3);
        a += MR;
        b += NR;
    }
    if (mr_v == MR && nr_v == NR) {
        STORE_ROW(0, c, ldc);
        STORE_ROW(1, c, ldc);
        STORE_ROW(2, c, ldc);
        STORE_ROW(3, c, ldc);
        return;
    }
    /* an edge tile: through a local tile, then only the real part */
    float tile[MR * NR];
    bool add_tile = add;
    add = false;
    STORE_ROW(0, tile, NR);
    STORE_ROW(1, tile, NR);
    STORE_ROW(2, tile, NR);
    STORE_ROW(3, tile, NR);
    for (int32_t i = 0; i < mr_v; i++)
        for (int32_t j = 0; j < nr_v; j++)
            c[i * ldc + j] = add_tile ? c[i * ldc + j] + tile[i * NR + j] : tile[i * NR + j];
}

/* The bf16-pairs micro-kernel: a 6 x 8 tile over panels of w packed as
 * bf16 pairs (pure 16-bit data, no conversion when packed) and x packed as
 * float pairs. Per k step pair: one 256-bit load of 8 rows' pairs,
 * unpacked against zero into two vectors of floats (rows 0, 1, 4, 5 and
 * 2, 3, 6, 7, each lane pair the row's even and odd element; a bf16 is the
 * high half of its float), six 64-bit broadcasts of x's pairs, 12 FMAs.
 * Each accumulator lane pair holds a row's even and odd partial sums,
 * which one horizontal add per row of x joins (and puts in row order). */
enum { MR2 = 6, NR2 = 8 };

/* The tile's first R rows of x (R <= MR2: the edge tiles do only the rows
 * they have). */
T_AVX2_INL void pairs_rows(int64_t ksteps, const float *a, const uint32_t *b, float *c,
                           int64_t ldc, const int R, int32_t nr_v, bool add)
{
    const __m256i zero = _mm256_setzero_si256();
    for (int i = 0; i < R; i++) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    __m256 l[MR2], h[MR2];
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) l[i] = h[i] = _mm256_setzero_ps();
    int64_t q = 0;
    if (R <= 3) {
        /* few rows: a second set of accumulators for odd k step pairs, so
         * that enough FMA chains are in flight to cover their latency */
        __m256 l2[3], h2[3];
#pragma GCC unroll 3
        for (int i = 0; i < R; i++) l2[i] = h2[i] = _mm256_setzero_ps();
        for (; q + 2 <= ksteps; q += 2) {
            __m256i p0 = _mm256_loadu_si256((const __m256i *)(const void *)b);
            __m256i p1 = _mm256_loadu_si256((const __m256i *)(const void *)(b + NR2));
            __m256 wl0 = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, p0));
            __m256 wh0 = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, p0));
            __m256 wl1 = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, p1));
            __m256 wh1 = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, p1));
#pragma GCC unroll 3
            for (int i = 0; i < R; i++) {
                __m256 t0 = _mm256_castpd_ps(_mm256_broadcast_sd((const double *)(const void *)(a + 2 * i)));
                __m256 t1 = _mm256_castpd_ps(
                    _mm256_broadcast_sd((const double *)(const void *)(a + 2 * MR2 + 2 * i)));
                l[i] = _mm256_fmadd_ps(t0, wl0, l[i]);
                h[i] = _mm256_fmadd_ps(t0, wh0, h[i]);
                l2[i] = _mm256_fmadd_ps(t1, wl1, l2[i]);
                h2[i] = _mm256_fmadd_ps(t1, wh1, h2[i]);
            }
            a += 4 * MR2;
            b += 2 * NR2;
        }
#pragma GCC unroll 3
        for (int i = 0; i < R; i++) {
            l[i] = _mm256_add_ps(l[i], l2[i]);
            h[i] = _mm256_add_ps(h[i], h2[i]);
        }
    }
    for (; q < ksteps; q++) {
        __m256i p = _mm256_loadu_si256((const __m256i *)(const void *)b);
        __m256 wl = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, p));
        __m256 wh = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, p));
#pragma GCC unroll 6
        for (int i = 0; i < R; i++) {
            __m256 t = _mm256_castpd_ps(_mm256_broadcast_sd((const double *)(const void *)(a + 2 * i)));
            l[i] = _mm256_fmadd_ps(t, wl, l[i]);
            h[i] = _mm256_fmadd_ps(t, wh, h[i]);
        }
        a += 2 * MR2;
        b += NR2;
    }
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        __m256 r = _mm256_hadd_ps(l[i], h[i]);
        float *d = c + i * ldc;
        if (nr_v == NR2) {
            if (add) r = _mm256_add_ps(_mm256_loadu_ps(d), r);
            _mm256_storeu_ps(d, r);
        } else {
            float t[NR2];
            _mm256_storeu_ps(t, r);
            for (int32_t j = 0; j < nr_v; j++) d[j] = add ? d[j] + t[j] : t[j];
        }
    }
}

T_AVX2 static void micro_avx2_pairs(int64_t ksteps, const void *ap, const void *bv, float *c,
                                    int64_t ldc, int32_t mr_v, int32_t nr_v, bool add)
{
    const float *a = ap;
    const uint32_t *b = bv;
    switch (mr_v) {
    case 1: pairs_rows(ksteps, a, b, c, ldc, 1, nr_v, add); break;
    case 2: pairs_rows(ksteps, a, b, c, ldc, 2, nr_v, add); break;
    case 3: pairs_rows(ksteps, a, b, c, ldc, 3, nr_v, add); break;
    case 4: pairs_rows(ksteps, a, b, c, ldc, 4, nr_v, add); break;
    case 5: pairs_rows(ksteps, a, b, c, ldc, 5, nr_v, add); break;
    default: pairs_rows(ksteps, a, b, c, ldc, 6, nr_v, add); break;
    }
}

/* ---- the matrix-vector path ---------------------------------------------- */

/* Rows [o, o + R) of w against NT rows of x. */
T_AVX2_INL void gemv_rows(float *y, const float *x, const void *w, const snug_dtype dt,
                          int64_t k, int64_t m, int64_t o, const int NT, const int R)
{
    __m256 acc[SNUG_GEMV_MAX_N][4];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[t][r] = _mm256_setzero_ps();
    int64_t k8 = k & ~(int64_t)7;
    const int64_t esz = dt == SNUG_DTYPE_F32 ? 4 : 2;
    const char *ahead = (const char *)w + (o + R) * k * esz; /* the next group's rows */
    for (int64_t p = 0; p < k8; p += 8) {
        /* rows of a few KiB are too short for the hardware prefetcher to
         * get ahead: fetch the next group's line at this offset */
        if (((p * esz) & 63) == 0)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) _mm_prefetch(ahead + (r * k + p) * esz, _MM_HINT_T0);
        __m256 xv[SNUG_GEMV_MAX_N];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) xv[t] = _mm256_loadu_ps(x + t * k + p);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 wv = load8(w, dt, (o + r) * k + p);
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) acc[t][r] = _mm256_fmadd_ps(xv[t], wv, acc[t][r]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            float s = hsum8(acc[t][r]);
            for (int64_t p = k8; p < k; p++) s += x[t * k + p] * elem1(w, dt, (o + r) * k + p);
            y[t * m + o + r] = s;
        }
}

T_AVX2_INL void gemv_nt(float *y, const float *x, const void *w, const snug_dtype dt, int64_t k,
                        int64_t m, int64_t o0, int64_t o1, const int NT)
{
    const int R = NT == 4 ? 3 : 4;
    int64_t o = o0;
    for (; o + R <= o1; o += R) gemv_rows(y, x, w, dt, k, m, o, NT, R);
    for (; o < o1; o++) gemv_rows(y, x, w, dt, k, m, o, NT, 1);
}

T_AVX2_INL void gemv_dt(float *y, const float *x, int64_t n, const void *w, const snug_dtype dt,
                        int64_t k, int64_t m, int64_t o0, int64_t o1)
{
    switch (n) {
    case 1: gemv_nt(y, x, w, dt, k, m, o0, o1, 1); break;
    case 2: gemv_nt(y, x, w, dt, k, m, o0, o1, 2); break;
    case 3: gemv_nt(y, x, w, dt, k, m, o0, o1, 3); break;
    default: gemv_nt(y, x, w, dt, k, m, o0, o1, 4); break;
    }
}

T_AVX2 void snug_avx2_gemv(float *y, const float *x, int64_t n, const void *w, snug_dtype wdt,
                           int64_t k, int64_t m, int64_t o0, int64_t o1)
{
    SNUG_ASSERT(n >= 1 && n <= SNUG_GEMV_MAX_N);
    if (wdt == SNUG_DTYPE_BF16)
        gemv_dt(y, x, n, w, SNUG_DTYPE_BF16, k, m, o0, o1);
    else if (wdt == SNUG_DTYPE_F16)
        gemv_dt(y, x, n, w, SNUG_DTYPE_F16, k, m, o0, o1);
    else
        gemv_dt(y, x, n, w, SNUG_DTYPE_F32, k, m, o0, o1);
}

static const snug_gemm_ops avx2_ops = {
    .mr = MR,
    .nr = NR,
    .kc = 256,
    .nc = 96,
    .mc = 192,
    .pairs = false,
    .insn = SNUG_INSN_FMA_YMM,
    .gemv_insn = SNUG_INSN_FMA_YMM,
    .pack_b = snug_avx2_pack_b,
    .micro = micro_avx2,
    .gemv = snug_avx2_gemv,
};

const snug_gemm_ops snug_avx2_pairs_ops = {
    .mr = MR2,
    .nr = NR2,
    .kc = 512,
    .nc = 64,
    .mc = 192,
    .pairs = true,
    .a_bf16 = false,
    .insn = SNUG_INSN_FMA_YMM,
    .gemv_insn = SNUG_INSN_FMA_YMM,
    .pack_b = snug_avx2_pack_b,
    .micro = micro_avx2_pairs,
    .gemv = snug_avx2_gemv,
};

/* bf16 with few rows of x: the pairs kernel (its packing is a pure 32-bit
 * transposition, which a few rows cannot amortize); with many, the f32
 * panels, whose conversion is paid once per weight */
static const snug_gemm_ops *ops_avx2(snug_dtype wdt, int64_t n)
{
    return wdt == SNUG_DTYPE_BF16 && n < SNUG_PAIRS_MAX_N ? &snug_avx2_pairs_ops : &avx2_ops;
}

static void matmul_avx2(float *y, const float *x, int64_t n, const void *w, snug_dtype wdt,
                        int64_t k, int64_t m, void *scratch, int32_t n_threads)
{
    snug_matmul_blocked(ops_avx2(wdt, n), y, x, n, w, wdt, k, m, scratch, n_threads);
}

static snug_insn matmul_insn_avx2(snug_dtype wdt, int64_t n)
{
    return snug_matmul_blocked_insn(ops_avx2(wdt, n), n);
}

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

T_AVX2 static void store_avx2(void *dst, snug_dtype dt, const float *src, int64_t n)
{
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

/* Scores of one query vector against the chunk: s[c] for keys 8c..8c+7,
 * times scale, -inf outside [lo, hi). */
T_AVX2_INL void att_scores(const float *q, const float *kt, int32_t hd, float scale, int32_t lo,
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
        s[c] = _mm256_blendv_ps(ninf, _mm256_mul_ps(s[c], sc), _mm256_castsi256_ps(in));
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

T_AVX2_INL float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

T_AVX2 static void attention_blocked(const snug_attn_args *a)
{
    const snug_kv_view *kv = &a->kv;
    const int32_t hd = a->head_dim;
    float kt[ATT_HD_MAX * ATT_CHUNK] __attribute__((aligned(32)));
    float vt[ATT_CHUNK * ATT_HD_MAX] __attribute__((aligned(32)));
    float p[ATT_CHUNK] __attribute__((aligned(32)));
    float mx[ATT_QROWS * ATT_HEADS], l[ATT_QROWS * ATT_HEADS];
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
                    for (int32_t d = 0; d < hd; d += 8) {
                        __m256 r[8];
#pragma GCC unroll 8
                        for (int i = 0; i < 8; i++) r[i] = load8(kv->k, kv->dtype, base + i * hd + d);
                        transpose8(r);
#pragma GCC unroll 8
                        for (int i = 0; i < 8; i++) _mm256_store_ps(kt + (d + i) * ATT_CHUNK + j, r[i]);
                    }
                }
                for (; j < ATT_CHUNK; j++)
                    for (int32_t d = 0; d < hd; d++)
                        kt[d * ATT_CHUNK + j] = j < cnt ? elem1(kv->k, kv->dtype, KV_AT(j) + d) : 0.0f;
                for (j = 0; j < cnt; j++) {
                    int64_t at = KV_AT(j);
                    for (int32_t d = 0; d < hd; d += 8)
                        _mm256_store_ps(vt + j * hd + d, load8(kv->v, kv->dtype, at + d));
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
                        att_scores(q, kt, hd, a->scale, lo, hi, s);
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
    k->matmul = matmul_avx2;
    k->matmul_insn = matmul_insn_avx2;
    k->rmsnorm = rmsnorm_avx2;
    k->silu_mul = silu_mul_avx2;
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
