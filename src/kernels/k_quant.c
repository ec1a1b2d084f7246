/*
 * k_quant.c: the matrix-vector product of block-format weights (base/quant.h,
 * in the panel layout of linear.h) with up to 4 rows of x quantized to 8
 * bits (qdot.h), by integer dot products, on three instructions:
 * vpmaddubsw ymm (AVX2), vpdpbusd ymm (AVX-VNNI, or AVX-512 VNNI with VL)
 * and vpdpbusd zmm (AVX-512 VNNI). The arithmetic is snug_qdot_ref's: per 32
 * elements an exact integer sum, scaled in float.
 *
 * Each weight block is first unpacked into chunks of 32 signed 8-bit
 * values with the float scale of each half (d sc of its sub-block) and,
 * for the formats with minimums, each half's offset (dmin mn): for Q5_K
 * with vector
 * shifts and masks, for the others (Q4_1, Q5_1, Q2_K, Q3_K) through
 * snug_quant_unpack. Unsigned-times-signed instructions take |w| and x
 * with w's sign (vpsignb; a masked subtraction in zmm), so every format
 * runs the one dot: sum over a chunk of w x exact in 32-bit lanes (four
 * products a lane, or two pairs of vpmaddubsw's 16-bit sums, which cannot
 * saturate: |w| <= 128, |x| <= 127). Per row of w and of x the lanes
 * accumulate in float across the blocks and are added up once at the end
 * of the panel; the minimums' terms (dmin mn times x's half sums) are
 * added in scalar. Q4_K, Q6_K, Q8_0, Q5_0 and Q4_0, whose panels lay their
 * rows out across vectors (linear.h), have paths of their own
 * (k_qlanes.c).
 */
#include "k_impl.h"

#include "cpu.h"

#include "base/dtype.h"
#include "base/quant.h"
#include "linear.h"
#include "qdot.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "k_quant_unpack.h"

/* The dots of |w| with x carrying w's sign, 8 lanes of 4 products each
 * (|w| <= 128, |x| <= 127), and of unsigned w (<= 127) with x. */
T_Q_INL __m256i udot_maddubs(__m256i u, __m256i x)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
}

#define T_VNNI_AVX __attribute__((target("avx2,fma,f16c,avxvnni")))
#define T_VNNI_AVX_INL __attribute__((target("avx2,fma,f16c,avxvnni"), always_inline)) static inline
#define T_VNNI_512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define T_VNNI_512_INL                                                                               \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"), always_inline)) static inline

T_VNNI_AVX_INL __m256i udot_vnni_avx(__m256i u, __m256i x)
{
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, x);
}

T_VNNI_512_INL __m256i udot_vnni_512(__m256i u, __m256i x)
{
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
}

T_VNNI_AVX_INL __m256i sdot_vnni_avx(__m256i acc, __m256i u, __m256i x, __m256i s)
{
    return _mm256_dpwssd_avx_epi32(acc, _mm256_maddubs_epi16(u, x), s);
}

T_VNNI_512_INL __m256i sdot_vnni_512(__m256i acc, __m256i u, __m256i x, __m256i s)
{
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, x), s);
}

/* The 16-bit scales sc16 (eight, the same in both 128-bit halves) spread
 * for QB_SDOT: scale lo in every lane of the low half, hi in the high. */
T_Q_INL __m256i scale_lanes(__m256i sc16, int lo, int hi)
{
    const char l0 = (char)(2 * lo), l1 = (char)(2 * lo + 1), h0 = (char)(2 * hi), h1 = (char)(2 * hi + 1);
    return _mm256_shuffle_epi8(sc16, _mm256_setr_epi8(l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, l0, l1, l0, l1,
                                                      h0, h1, h0, h1, h0, h1, h0, h1, h0, h1, h0, h1, h0, h1, h0, h1));
}

/* acc + the dots of u (unsigned, <= 63) with x (|x| <= 127), in pairs of
 * 16-bit sums (at most 2 63 127: no saturation), each times its 16-bit
 * scale s (|s| <= 128), four products a 32-bit lane. */
T_Q_INL __m256i sdot_maddubs(__m256i acc, __m256i u, __m256i x, __m256i s)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), s));
}

/* k_scales_vec of two blocks' scales at a and b, one a 128-bit half. */
T_Q_INL __m256i k_scales_vec2(const uint8_t *a, const uint8_t *b)
{
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)a)),
                                        _mm_loadu_si128((const __m128i *)(const void *)b), 1);
    __m256i low6 = _mm256_and_si256(v, _mm256_set1_epi32(0x3F3F3F3F));
    __m256i u2 = _mm256_srlv_epi32(_mm256_shuffle_epi32(v, 0xAA), _mm256_setr_epi32(0, 4, 0, 0, 0, 4, 0, 0));
    __m256i top = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(v, 6), _mm256_set1_epi32(0x03030303)), 4);
    __m256i high = _mm256_or_si256(_mm256_and_si256(u2, _mm256_set1_epi32(0x0F0F0F0F)), top);
    return _mm256_unpacklo_epi32(low6, high);
}

/* The horizontal sum of v. */
T_Q_INL float hsum4(__m128 v)
{
    __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Bytes ahead of the block being read that the matrix-vector path fetches. */
enum { QGEMV_AHEAD = 4096 };
#define QGEMV_HINT _MM_HINT_T0

/* The bodies, once per instruction (k_quant_body.h). */
#define QB_NAME(x) x##_maddubs
#define QB_T T_Q
#define QB_INL T_Q_INL
#define QB_UDOT udot_maddubs
#define QB_SDOT sdot_maddubs
#include "k_quant_body.h"

#define QB_NAME(x) x##_vnni_avx
#define QB_T T_VNNI_AVX
#define QB_INL T_VNNI_AVX_INL
#define QB_UDOT udot_vnni_avx
#define QB_SDOT sdot_vnni_avx
#include "k_quant_body.h"

#define QB_NAME(x) x##_vnni_512
#define QB_T T_VNNI_512
#define QB_INL T_VNNI_512_INL
#define QB_UDOT udot_vnni_512
#define QB_SDOT sdot_vnni_512
#include "k_quant_body.h"

/* ---- dequantized slices for the GEMM --------------------------------------- */

/* One block (bs values) of type t at b as floats into out: the same
 * products and differences as snug_quant_dequantize, so the same floats. */
T_Q_INL void dequant_block(snug_qtype t, const uint8_t *b, int64_t bs, float *out)
{
    qchunk c[8];
    unpack_chunks(t, b, c);
    for (int64_t ch = 0; ch < bs / 32; ch++)
        for (int q = 0; q < 4; q++) {
            __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(c[ch].q + 8 * q))));
            __m256 r = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(c[ch].scale[q / 2]), v), _mm256_set1_ps(c[ch].corr[q / 2]));
            _mm256_storeu_ps(out + 32 * ch + 8 * q, r);
        }
}

T_Q void snug_quant_slice_f32_avx2(const snug_linear *w, int64_t p, int64_t e0, int64_t len, float *dst)
{
    const snug_qtype t = (snug_qtype)snug_dtype_qtype(w->dtype);
    const int64_t bs = snug_qtype_block(t), width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t bb = snug_qtype_block_bytes(t);
    const uint8_t *panel = (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, w->k, p);
    _Alignas(32) float rows[SNUG_PANEL][256];
    for (int64_t j = width; j < SNUG_PANEL; j++) memset(rows[j], 0, sizeof rows[j]);
    for (int64_t b = e0 / bs; b * bs < e0 + len; b++) {
        int64_t lo = SNUG_MAX(e0, b * bs), hi = SNUG_MIN(e0 + len, (b + 1) * bs);
        for (int64_t j = 0; j < width; j++) {
            uint8_t bl[256]; /* one block (at most 210 bytes) */
            snug_linear_group_block(w->dtype, panel + (size_t)(b * width) * bb, width, j, bl);
            dequant_block(t, bl, bs, rows[j]);
        }
        for (int64_t e = lo; e < hi; e += 8) /* 8 x 8 tiles turned over: dst step e holds element e of each row */
            for (int jg = 0; jg < SNUG_PANEL; jg += 8) {
                __m256 r[8];
                for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(&rows[jg + i][e - b * bs]);
                snug_transpose8(r);
                for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (e - e0 + i) * SNUG_PANEL + jg, r[i]);
            }
    }
}

/* ---- the matrix-vector path on zmm (AVX-512 VNNI) ----------------------------- */

/* Prefetches the cache lines that begin within the bytes of one block,
 * QGEMV_AHEAD ahead. */
T_Z_INL void fetch_zmm(const uint8_t *at, size_t bb)
{
    uintptr_t a = ((uintptr_t)at + QGEMV_AHEAD + 63) & ~(uintptr_t)63, end = (uintptr_t)at + QGEMV_AHEAD + bb;
    for (; a < end; a += 64) _mm_prefetch((const char *)a, QGEMV_HINT);
}

/* Two rows' 32 bytes, a at the low half, b at the high. */
T_Z_INL __m512i load_pair(const uint8_t *a, const uint8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a)), load256(b), 1);
}

/* lo in the low 8 lanes, hi in the high 8 (AVX-512F: no DQ needed). */
T_Z_INL __m512 halves_ps(float lo, float hi)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(lo)), _mm256_castps_pd(_mm256_set1_ps(hi)), 1));
}

/* The high 8 lanes of v. */
T_Z_INL __m256 high_ps(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

/* The 32 bytes at p in both halves. */
T_Z_INL __m512i load_twice(const void *p) { return _mm512_broadcast_i64x4(load256(p)); }

/* acc + the dots of u (unsigned, <= 63) with x (|x| <= 127) in pairs of
 * 16-bit sums, each times its 16-bit scale in s (QB_SDOT on zmm). */
T_Z_INL __m512i sdot_zmm(__m512i acc, __m512i u, __m512i x, __m512i s)
{
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, x), s);
}

/* The 16-bit scale j of each row of a pair in every 16-bit lane of its
 * half: z holds each row's eight 16-bit scales twice (row 0 in lanes 0 and
 * 1, row 1 in 2 and 3). */
T_Z_INL __m512i pair_scale(__m512i z, int j)
{
    return _mm512_shuffle_epi8(z, _mm512_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8))));
}

/* Q5_K as panel_q5k does, two rows to a zmm: the halves of each
 * block pair's 64 values and scales meet x's chunk in both halves. */
T_Z_INL void panel_q5k_zmm(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p,
                              const int NT)
{
    const int64_t k = w->k, kb = k / 32, nb = k / 256;
    const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t bb = 176;
    const uint8_t *panel = (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, k, p);
    __m512 acc[SNUG_GEMV_MAX_N][SNUG_PANEL / 2];
    __m256 cacc[SNUG_GEMV_MAX_N][SNUG_PANEL / 2];
    for (int t = 0; t < NT; t++)
        for (int64_t r = 0; r < SNUG_PANEL / 2; r++) acc[t][r] = _mm512_setzero_ps(), cacc[t][r] = _mm256_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(0xF);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blocks = panel + (size_t)(b * width) * bb;
        __m256i xsum[SNUG_GEMV_MAX_N];
        float dx[SNUG_GEMV_MAX_N];
        for (int t = 0; t < NT; t++) {
            const snug_x8_block *xb = &x8[t * kb + 8 * b];
            xsum[t] = x8_chunk_sums(xb);
            dx[t] = xb->d;
        }
        for (int64_t r = 0; r < width; r += 2) {
            const bool two = r + 1 < width; /* a narrow panel's last row goes alone (its pair: itself) */
            const uint8_t *bl0 = blocks + (size_t)r * bb, *bl1 = two ? bl0 + bb : bl0;
            fetch_zmm(bl0, 2 * bb);
            __m256i sm = k_scales_vec2(bl0 + 4, bl1 + 4), zero = _mm256_setzero_si256();
            __m256i sc_pair = _mm256_unpacklo_epi8(sm, zero), mn_pair = _mm256_unpackhi_epi8(sm, zero);
            __m512i zsc = _mm512_shuffle_i64x2(_mm512_castsi256_si512(sc_pair), _mm512_castsi256_si512(sc_pair), 0x50);
            uint32_t h0, h1;
            memcpy(&h0, bl0, 4), memcpy(&h1, bl1, 4);
            __m128 dd = _mm_cvtph_ps(_mm_setr_epi32((int)h0, (int)h1, 0, 0)); /* d0 dmin0 d1 dmin1 */
            const uint8_t *qs0 = bl0 + 48, *qs1 = bl1 + 48;
            __m512i hbits = load_pair(bl0 + 16, bl1 + 16);
            __m512i ia[SNUG_GEMV_MAX_N], ib[SNUG_GEMV_MAX_N];
            for (int t = 0; t < NT; t++) ia[t] = ib[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int pp = 0; pp < 4; pp++) {
                __m512i v = load_pair(qs0 + 32 * pp, qs1 + 32 * pp);
                __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                __m512i b0 = _mm512_set1_epi8((char)(1 << (2 * pp))), b1 = _mm512_set1_epi8((char)(2 << (2 * pp)));
                lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hbits, b0), lo, _mm512_set1_epi8(16));
                hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(hbits, b1), hi, _mm512_set1_epi8(16));
                __m512i s_lo = pair_scale(zsc, 2 * pp), s_hi = pair_scale(zsc, 2 * pp + 1);
                for (int t = 0; t < NT; t++) {
                    const snug_x8_block *xb = &x8[t * kb + 8 * b + 2 * pp];
                    ia[t] = sdot_zmm(ia[t], lo, load_twice(xb[0].q), s_lo);
                    ib[t] = sdot_zmm(ib[t], hi, load_twice(xb[1].q), s_hi);
                }
            }
            for (int t = 0; t < NT; t++) {
                float f[4];
                _mm_storeu_ps(f, _mm_mul_ps(dd, _mm_set1_ps(dx[t])));
                __m256 mscale = _mm256_setr_ps(f[1], f[1], f[1], f[1], f[3], f[3], f[3], f[3]);
                __m256 mins = _mm256_cvtepi32_ps(_mm256_madd_epi16(mn_pair, xsum[t]));
                cacc[t][r / 2] = _mm256_fmadd_ps(mins, mscale, cacc[t][r / 2]);
                __m512 dv = halves_ps(f[0], f[2]);
                acc[t][r / 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ia[t], ib[t])), dv, acc[t][r / 2]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int64_t r = 0; r < width; r++) {
            __m512 a = acc[t][r / 2];
            __m256 half = r % 2 ? high_ps(a) : _mm512_castps512_ps256(a);
            __m256 c = cacc[t][r / 2];
            __m128 ch = r % 2 ? _mm256_extractf128_ps(c, 1) : _mm256_castps256_ps128(c);
            y[t * ldy + p * SNUG_PANEL + r] = hsum8(half) - hsum4(ch);
        }
}

/* Panels [p0, p1) for NT rows of x: Q5_K on zmm (the interleaved formats:
 * k_qlanes.c), the others as the vpdpbusd ymm path. */
T_Z_INL void qgemv_n_zmm(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p0,
                            int64_t p1, const int NT)
{
    const snug_qtype qt = (snug_qtype)snug_dtype_qtype(w->dtype);
    for (int64_t p = p0; p < p1; p++) {
        switch (qt) {
        case SNUG_QTYPE_Q5_K: panel_q5k_zmm(y, ldy, x8, w, p, NT); break;
        default: qgemv_n_vnni_512(y, ldy, x8, w, p, p + 1, NT); break;
        }
    }
}

/* The snug_qgemv_fn of vpdpbusd zmm. */
T_Z static void qgemv_zmm(float *y, int64_t ldy, const snug_x8_block *x8, int64_t n, const snug_linear *w,
                             int64_t p0, int64_t p1)
{
    if (snug_linear_interleaved(w->dtype)) {
        snug_qlanes_gemv_zmm(y, ldy, x8, n, w, p0, p1);
        return;
    }
    switch (n) {
    case 1: qgemv_n_zmm(y, ldy, x8, w, p0, p1, 1); break;
    case 2: qgemv_n_zmm(y, ldy, x8, w, p0, p1, 2); break;
    case 3: qgemv_n_zmm(y, ldy, x8, w, p0, p1, 3); break;
    default: qgemv_n_zmm(y, ldy, x8, w, p0, p1, 4); break;
    }
}


int32_t snug_qgemv_kinds(snug_isa isa, snug_qgemv_kind out[SNUG_QGEMV_KINDS])
{
    int32_t n = 0;
    if (isa < SNUG_ISA_AVX2) return 0;
    snug_cpu cpu = snug_cpu_probe();
    out[n++] = (snug_qgemv_kind){qgemv_maddubs, SNUG_INSN_MADDUBS_YMM};
    if (isa >= SNUG_ISA_AVX512 && cpu.avx512_vnni) {
        out[n++] = (snug_qgemv_kind){qgemv_vnni_512, SNUG_INSN_DPBUSD_YMM};
        out[n++] = (snug_qgemv_kind){qgemv_zmm, SNUG_INSN_DPBUSD_ZMM};
    }
    else if (cpu.avx_vnni)
        out[n++] = (snug_qgemv_kind){qgemv_vnni_avx, SNUG_INSN_DPBUSD_YMM};
    return n;
}
#else
int32_t snug_qgemv_kinds(snug_isa isa, snug_qgemv_kind out[SNUG_QGEMV_KINDS])
{
    (void)isa, (void)out;
    return 0;
}

void snug_quant_slice_f32_avx2(const snug_linear *w, int64_t p, int64_t e0, int64_t len, float *dst)
{
    snug_linear_quant_slice_f32(w, p, e0, len, dst);
}


#endif
