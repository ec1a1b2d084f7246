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
 * for the formats with minimums, each half's offset (dmin mn): for Q8_0
 * the bytes as they are, for Q4_0, Q5_0, Q4_K, Q5_K and Q6_K with vector
 * shifts and masks, for the others (Q4_1, Q5_1, Q2_K, Q3_K) through
 * snug_quant_unpack. Unsigned-times-signed instructions take |w| and x
 * with w's sign (vpsignb; a masked subtraction in zmm), so every format
 * runs the one dot: sum over a chunk of w x exact in 32-bit lanes (four
 * products a lane, or two pairs of vpmaddubsw's 16-bit sums, which cannot
 * saturate: |w| <= 128, |x| <= 127). Per row of w and of x the lanes
 * accumulate in float across the blocks and are added up once at the end
 * of the panel; the minimums' terms (dmin mn times x's half sums) are
 * added in scalar.
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

#define T_Q __attribute__((target("avx2,fma,f16c")))
#define T_Q_INL __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

/* One unpacked chunk of 32 weights: w = scale[h] q - corr[h] for the half
 * h (16 elements) of each q. */
typedef struct qchunk {
    int8_t q[32];
    float scale[2];
    float corr[2];
} qchunk;

/* The float of a little-endian half at p (F16C: every machine with AVX2
 * that snug runs the SIMD kernels on has it). */
__attribute__((target("f16c"), always_inline)) static inline float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* Any block through its integer form (the formats without a vector
 * unpacking). */
static void chunks_generic(snug_qtype t, const uint8_t *b, qchunk *c)
{
    snug_qblock w;
    snug_quant_unpack(t, b, &w);
    for (int32_t ch = 0; ch < w.n / 32; ch++)
        for (int h = 0; h < 2; h++) {
            int32_t s = (32 * ch + 16 * h) / w.sub;
            c[ch].scale[h] = w.d * (float)w.sc[s];
            c[ch].corr[h] = w.dmin * (float)w.mn[s];
            for (int e = 0; e < 16; e++) c[ch].q[16 * h + e] = (int8_t)w.q[32 * ch + 16 * h + e];
        }
}

T_Q_INL __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
T_Q_INL void store256(void *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }

/* The bits (one per byte, bit e of the 32-bit mask at qh) as 0 or `value`
 * in 32 bytes. */
T_Q_INL __m256i bits_to_bytes(uint32_t qh, int8_t value)
{
    const __m256i shuf = _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll, 0x0303030303030303ll);
    __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(on, _mm256_set1_epi8(value));
}

/* The 32 values of a Q4_0 or Q5_0 block at b as stored (0..15, 0..31:
 * q + 8, q + 16). */
T_Q_INL __m256i legacy_u(snug_qtype t, const uint8_t *b)
{
    bool five = t == SNUG_QTYPE_Q5_0;
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + (five ? 6 : 2)));
    __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0xF));
    if (!five) return u;
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    return _mm256_or_si256(u, bits_to_bytes(qh, 16));
}

/* The 32 signed values of a Q8_0, Q4_0 or Q5_0 block at b. */
T_Q_INL __m256i legacy_q(snug_qtype t, const uint8_t *b)
{
    if (t == SNUG_QTYPE_Q8_0) return load256(b + 2);
    return _mm256_sub_epi8(legacy_u(t, b), _mm256_set1_epi8(t == SNUG_QTYPE_Q5_0 ? 16 : 8));
}

/* Chunks 2 pp and 2 pp + 1 of a Q4_K (five false) or Q5_K block whose
 * nibbles are qs (128 bytes) and, for Q5_K, high bits hbits (its 32 qh
 * bytes): values 0..15 or 0..31 into *lo and *hi. */
T_Q_INL void k45_pair(const uint8_t *qs, __m256i hbits, int pp, bool five, __m256i *lo, __m256i *hi)
{
    const __m256i low4 = _mm256_set1_epi8(0xF), sixteen = _mm256_set1_epi8(16);
    __m256i v = load256(qs + 32 * pp);
    *lo = _mm256_and_si256(v, low4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    if (!five) return;
    __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * pp))), b1 = _mm256_set1_epi8((char)(2 << (2 * pp)));
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, b0), b0), sixteen));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, b1), b1), sixteen));
}

/* The low nibbles of the four chunks of half h (128 values) of a Q6_K
 * block at b, in chunk order, into lo4, and that half's qh bytes into *hb. */
T_Q_INL void q6k_half(const uint8_t *b, int h, __m256i lo4[4], __m256i *hb)
{
    const __m256i low4 = _mm256_set1_epi8(0xF);
    __m256i a = load256(b + 64 * h), a2 = load256(b + 64 * h + 32);
    *hb = load256(b + 128 + 32 * h);
    lo4[0] = _mm256_and_si256(a, low4), lo4[1] = _mm256_and_si256(a2, low4);
    lo4[2] = _mm256_and_si256(_mm256_srli_epi16(a, 4), low4), lo4[3] = _mm256_and_si256(_mm256_srli_epi16(a2, 4), low4);
}

/* Chunk g of a Q6_K half from q6k_half: the values as stored, 0..63 (q + 32). */
T_Q_INL __m256i q6k_chunk(const __m256i lo4[4], __m256i hb, int g)
{
    /* chunk g's two bits of each qh byte, masked where they lie and moved to
     * bits 4..6 (no bit crosses a byte once masked) */
    __m256i hi2 = _mm256_and_si256(hb, _mm256_set1_epi8((char)(3 << (2 * g))));
    hi2 = g < 2 ? _mm256_slli_epi16(hi2, 4 - 2 * g) : g == 3 ? _mm256_srli_epi16(hi2, 2) : hi2;
    return _mm256_or_si256(lo4[g], hi2);
}

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

/* The horizontal sum of v. */
T_Q_INL float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The six-bit scales (bytes 0..8) and minimums (bytes 8..16) of a Q4_K or
 * Q5_K block, from the 16 bytes at s (its 12 and 4 that follow): the
 * format's bit layout moved with 32-bit masks, in one vector. */
T_Q_INL __m128i k_scales_vec(const uint8_t *s)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s); /* u0 u1 u2 - */
    __m128i low6 = _mm_and_si128(v, _mm_set1_epi32(0x3F3F3F3F));  /* out[0], out[2] */
    __m128i u2 = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0xAA), _mm_setr_epi32(0, 4, 0, 0));
    __m128i top = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(v, 6), _mm_set1_epi32(0x03030303)), 4);
    __m128i high = _mm_or_si128(_mm_and_si128(u2, _mm_set1_epi32(0x0F0F0F0F)), top); /* out[1], out[3] */
    return _mm_unpacklo_epi32(low6, high);
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
#define QB_VNNI 0
#define QB_UDOT_FROM(acc, u, x) _mm256_add_epi32(acc, udot_maddubs(u, x))
#include "k_quant_body.h"

#define QB_NAME(x) x##_vnni_avx
#define QB_T T_VNNI_AVX
#define QB_INL T_VNNI_AVX_INL
#define QB_UDOT udot_vnni_avx
#define QB_SDOT sdot_vnni_avx
#define QB_VNNI 1
#define QB_UDOT_FROM _mm256_dpbusd_avx_epi32
#include "k_quant_body.h"

#define QB_NAME(x) x##_vnni_512
#define QB_T T_VNNI_512
#define QB_INL T_VNNI_512_INL
#define QB_UDOT udot_vnni_512
#define QB_SDOT sdot_vnni_512
#define QB_VNNI 1
#define QB_UDOT_FROM _mm256_dpbusd_epi32
#include "k_quant_body.h"

/* ---- dequantized slices for the GEMM --------------------------------------- */

/* The chunks (1 or 8) of the block at b of type t: its signed values and
 * each half's scale and offset (w = scale q - corr). */
T_Q_INL void unpack_chunks(snug_qtype t, const uint8_t *b, qchunk *c)
{
    switch (t) {
    case SNUG_QTYPE_Q8_0:
    case SNUG_QTYPE_Q4_0:
    case SNUG_QTYPE_Q5_0:
        store256(c->q, legacy_q(t, b));
        c->scale[0] = c->scale[1] = half_at(b);
        c->corr[0] = c->corr[1] = 0.0f;
        return;
    case SNUG_QTYPE_Q4_K:
    case SNUG_QTYPE_Q5_K: {
        bool five = t == SNUG_QTYPE_Q5_K;
        uint8_t scm[16];
        _mm_storeu_si128((__m128i *)(void *)scm, k_scales_vec(b + 4));
        const uint8_t *sc = scm, *mn = sc + 8, *qs = b + (five ? 48 : 16);
        float d = half_at(b), dmin = half_at(b + 2);
        __m256i hbits = five ? load256(b + 16) : _mm256_setzero_si256();
        for (int pp = 0; pp < 4; pp++) {
            __m256i lo, hi;
            k45_pair(qs, hbits, pp, five, &lo, &hi);
            store256(c[2 * pp].q, lo);
            store256(c[2 * pp + 1].q, hi);
        }
        for (int j = 0; j < 8; j++) {
            c[j].scale[0] = c[j].scale[1] = d * (float)sc[j];
            c[j].corr[0] = c[j].corr[1] = dmin * (float)mn[j];
        }
        return;
    }
    case SNUG_QTYPE_Q6_K: {
        const int8_t *sc = (const int8_t *)(const void *)(b + 192);
        float d = half_at(b + 208);
        for (int h = 0; h < 2; h++) {
            __m256i lo4[4], hb;
            q6k_half(b, h, lo4, &hb);
            for (int g = 0; g < 4; g++) {
                qchunk *o = &c[4 * h + g];
                store256(o->q, _mm256_sub_epi8(q6k_chunk(lo4, hb, g), _mm256_set1_epi8(32)));
                o->scale[0] = d * (float)sc[8 * h + 2 * g], o->scale[1] = d * (float)sc[8 * h + 2 * g + 1];
                o->corr[0] = o->corr[1] = 0.0f;
            }
        }
        return;
    }
    default: chunks_generic(t, b, c); return;
    }
}

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
        for (int64_t j = 0; j < width; j++) dequant_block(t, panel + (size_t)(b * width + j) * bb, bs, rows[j]);
        for (int64_t e = lo; e < hi; e += 8) /* 8 x 8 tiles turned over: dst step e holds element e of each row */
            for (int jg = 0; jg < SNUG_PANEL; jg += 8) {
                __m256 r[8];
                for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(&rows[jg + i][e - b * bs]);
                snug_transpose8(r);
                for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (e - e0 + i) * SNUG_PANEL + jg, r[i]);
            }
    }
}

/* ---- the GEMM on 8-bit products (AVX-512 VNNI) -------------------------------- */

#define T_GEMM __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define T_GEMM_INL __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline

/* Bytes of one chunk (32 values) of a group of 16 rows of x in the GEMM's
 * layout: 8 quads x 16 rows of q + 128, then 16 floats each of d, the
 * first half's sum and the second's. */
enum { XT_CHUNK = 8 * 64 + 3 * 64, XT_D = 512, XT_S0 = 576, XT_S1 = 640 };

/* Rows of w per register tile (one float accumulator each, over the 16
 * rows of x of a group in its lanes). */
enum { QT_NR = 8 };

/* Whether the format's scales change every 16 values (a chunk's halves
 * differ) rather than every 32. */
static bool sub16(snug_qtype t) { return t == SNUG_QTYPE_Q2_K || t == SNUG_QTYPE_Q3_K || t == SNUG_QTYPE_Q6_K; }

/* Whether the format's blocks have minimums (w = scale q - corr). */
static bool has_corr(snug_qtype t)
{
    return t == SNUG_QTYPE_Q4_1 || t == SNUG_QTYPE_Q5_1 || t == SNUG_QTYPE_Q2_K || t == SNUG_QTYPE_Q4_K ||
           t == SNUG_QTYPE_Q5_K;
}

/* Chunks per scale of x (snug_x8_quantize: 256 values for the K-quants,
 * 32 for the others). */
static int64_t x_group_chunks(snug_qtype t) { return snug_qtype_block(t) == 256 ? 8 : 1; }

T_GEMM void snug_x8_quantize_avx512(const float *x, int64_t k, snug_dtype wdt, snug_x8_block *out)
{
    const int64_t group = x_group_chunks((snug_qtype)snug_dtype_qtype(wdt)) * 32;
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    for (int64_t g = 0; g < k / group; g++) {
        const float *xg = x + g * group;
        __m512 amax = _mm512_setzero_ps();
        for (int64_t i = 0; i < group; i += 16) /* a NaN's lane keeps amax (the scalar loop ignores NaNs too) */
            amax = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(xg + i)), abs_mask)),
                                 amax);
        float am = _mm512_reduce_max_ps(amax), d = am / 127.0f;
        if (group == 32) d = snug_f16_to_f32(snug_f32_to_f16(d));
        __m512 id = _mm512_set1_ps(am > 0.0f ? 127.0f / am : 0.0f);
        for (int64_t b = 0; b < group / 32; b++) {
            snug_x8_block *o = &out[g * (group / 32) + b];
            o->d = d;
            for (int h = 0; h < 2; h++) {
                __m512 f = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(xg + 32 * b + 16 * h), id), magic);
                __m512i v = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(f), _mm512_set1_epi32(0x007FFFFF)),
                                             _mm512_set1_epi32(0x00400000));
                v = _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
                _mm_storeu_si128((__m128i *)(void *)(o->q + 16 * h), _mm512_cvtepi32_epi8(v));
                o->sum16[h] = (int16_t)_mm512_reduce_add_epi32(v);
            }
        }
    }
}

size_t snug_qgemm_x_bytes(int64_t n, int64_t k)
{
    return (size_t)((n + SNUG_QGEMM_XROWS - 1) / SNUG_QGEMM_XROWS) * (size_t)(k / 32) * XT_CHUNK;
}

size_t snug_qgemm_panel_bytes(int64_t k) { return (size_t)k * 25 + 256; }

T_GEMM void snug_qgemm_pack_x(void *xt, const float *x, int64_t n, int64_t k, snug_dtype wdt, int64_t g0,
                              int64_t g1, snug_x8_block *tmp)
{
    const int64_t kb = k / 32;
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *xg = (uint8_t *)xt + (size_t)(g * kb) * XT_CHUNK;
        for (int64_t i = 0; i < SNUG_QGEMM_XROWS; i++) {
            int64_t t = g * SNUG_QGEMM_XROWS + i;
            if (t < n) snug_x8_quantize_avx512(x + t * k, k, wdt, tmp);
            else memset(tmp, 0, (size_t)kb * sizeof *tmp);
            for (int64_t c = 0; c < kb; c++) {
                uint8_t *xc = xg + (size_t)c * XT_CHUNK;
                uint32_t words[8];
                store256(words, _mm256_xor_si256(load256(tmp[c].q), _mm256_set1_epi8((char)0x80)));
                for (int j = 0; j < 8; j++) memcpy(xc + 64 * j + 4 * i, &words[j], 4);
                float f[3] = {tmp[c].d, (float)tmp[c].sum16[0], (float)tmp[c].sum16[1]};
                for (int s = 0; s < 3; s++) memcpy(xc + XT_D + 64 * s + 4 * i, &f[s], 4);
            }
        }
    }
}

/* Where a repacked panel slice's parts lie in the thread's scratch: the
 * values (chunk c, row r: 32 signed bytes at q + (16 c + r) 32); per block
 * b (of the slice) and row r, the scale of each of the block's pb parts
 * (16 or 32 values) at sc + (16 b + r) pb, its minimum term (formats with
 * one) at co likewise, and 128 times the sum over the block's parts of
 * scale times the sum of q (the + 128 that x's bytes carry, taken away
 * once) at kk + 16 b + r. A block is also a scale group of x. */
typedef struct qpanel {
    const uint8_t *q;
    float *sc, *co, *kk;
} qpanel;

/* The horizontal sum of v. */
T_GEMM_INL float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }

/* The sums of each 16 bytes of the signed values v (lanes 0, 1: the first
 * chunk of 32 values' halves; as 64-bit lanes of the sad of v + 128). */
T_GEMM_INL __m256i half_sums(__m256i v)
{
    __m256i s = _mm256_sad_epu8(_mm256_xor_si256(v, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
    /* lanes (0 + 1), (2 + 3) as 32-bit words 0 and 1 */
    __m256i t = _mm256_add_epi64(s, _mm256_srli_si256(s, 8));
    t = _mm256_permutevar8x32_epi32(t, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
    return _mm256_sub_epi32(t, _mm256_set1_epi32(16 * 128));
}

/* One Q4_K or Q5_K block at bl of row r (slice block b): its 8 chunks'
 * values, the scales and minimums of its 8 parts, and kk. */
T_GEMM_INL void repack_k45(const uint8_t *bl, bool five, int64_t b, int64_t r, uint8_t *q, float *sc, float *co,
                           float *kk)
{
    const uint8_t *qs = bl + (five ? 48 : 16);
    __m256i hbits = five ? load256(bl + 16) : _mm256_setzero_si256();
    __m256i wsum = _mm256_setzero_si256(); /* the 8 chunks' sums of q */
    for (int pp = 0; pp < 4; pp++) {
        __m256i lo, hi;
        k45_pair(qs, hbits, pp, five, &lo, &hi);
        int64_t c = 8 * b + 2 * pp;
        store256(q + (size_t)(c * SNUG_PANEL + r) * 32, lo);
        store256(q + (size_t)((c + 1) * SNUG_PANEL + r) * 32, hi);
        __m256i s = _mm256_sad_epu8(lo, _mm256_setzero_si256()), t = _mm256_sad_epu8(hi, _mm256_setzero_si256());
        /* (q >= 0: the sad with zero is the sum) each one's total, as words 0 and 1 of every 64 bits */
        __m256i st = _mm256_add_epi64(_mm256_unpacklo_epi64(s, t), _mm256_unpackhi_epi64(s, t)); /* s01 t01 s23 t23 */
        __m128i both = _mm_add_epi64(_mm256_castsi256_si128(st), _mm256_extracti128_si256(st, 1)); /* s t */
        __m256i two = _mm256_broadcastq_epi64(_mm_shuffle_epi32(both, 0x08));
        wsum = _mm256_mask_blend_epi32((__mmask8)(3u << (2 * pp)), wsum, two);
    }
    __m128i sm = k_scales_vec(bl + 4);
    __m256 d = _mm256_set1_ps(half_at(bl)), dmin = _mm256_set1_ps(half_at(bl + 2));
    __m256 scv = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm)));
    __m256 cov = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))));
    _mm256_storeu_ps(sc + (b * SNUG_PANEL + r) * 8, scv);
    _mm256_storeu_ps(co + (b * SNUG_PANEL + r) * 8, cov);
    kk[b * SNUG_PANEL + r] = 128.0f * hsum8(_mm256_mul_ps(scv, _mm256_cvtepi32_ps(wsum)));
}

/* One Q6_K block at bl of row r (slice block b): its 8 chunks' values
 * (signed), the scales of its 16 parts, and kk. */
T_GEMM_INL void repack_q6k(const uint8_t *bl, int64_t b, int64_t r, uint8_t *q, float *sc, float *kk)
{
    __m512i wsum = _mm512_setzero_si512(); /* the 16 parts' sums of q */
    for (int h = 0; h < 2; h++) {
        __m256i lo4[4], hb;
        q6k_half(bl, h, lo4, &hb);
        for (int g = 0; g < 4; g++) {
            __m256i v = _mm256_sub_epi8(q6k_chunk(lo4, hb, g), _mm256_set1_epi8(32));
            int64_t c = 8 * b + 4 * h + g;
            store256(q + (size_t)(c * SNUG_PANEL + r) * 32, v);
            __m512i two = _mm512_castsi256_si512(half_sums(v)); /* words 0, 1 */
            int sh = 2 * (4 * h + g);
            wsum = _mm512_or_si512(wsum, _mm512_maskz_permutexvar_epi32((__mmask16)(3u << sh),
                                                                        _mm512_sub_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(sh)),
                                                                        two));
        }
    }
    __m512 scv = _mm512_mul_ps(_mm512_set1_ps(half_at(bl + 208)),
                               _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(bl + 192)))));
    _mm512_storeu_ps(sc + (b * SNUG_PANEL + r) * 16, scv);
    kk[b * SNUG_PANEL + r] = 128.0f * hsum16(_mm512_mul_ps(scv, _mm512_cvtepi32_ps(wsum)));
}

/* One Q8_0 block at bl of row r (slice block b): its values as they are,
 * its scale, and kk. */
T_GEMM_INL void repack_q8(const uint8_t *bl, int64_t b, int64_t r, uint8_t *q, float *sc, float *kk)
{
    __m256i v = load256(bl + 2), hs = half_sums(v);
    store256(q + (size_t)(b * SNUG_PANEL + r) * 32, v);
    float d = half_at(bl);
    sc[b * SNUG_PANEL + r] = d;
    kk[b * SNUG_PANEL + r] = 128.0f * d * (float)(_mm256_extract_epi32(hs, 0) + _mm256_extract_epi32(hs, 1));
}

/* Any block (bs values) at bl of row r (slice block b), or zeros (bl NULL),
 * through its chunks: pb parts a block, PART values each. */
T_GEMM_INL void repack_any(snug_qtype t, const uint8_t *bl, int64_t b, int64_t r, int64_t ncb, int64_t pb,
                           bool corr, uint8_t *q, float *sc, float *co, float *kk)
{
    qchunk ch[8];
    if (bl) unpack_chunks(t, bl, ch);
    else memset(ch, 0, sizeof ch);
    float k128 = 0.0f;
    float *scr = sc + (b * SNUG_PANEL + r) * pb, *cor = co + (b * SNUG_PANEL + r) * pb;
    for (int64_t cc = 0; cc < ncb; cc++) {
        __m256i v = load256(ch[cc].q);
        store256(q + (size_t)((b * ncb + cc) * SNUG_PANEL + r) * 32, v);
        int32_t hs[8];
        store256(hs, half_sums(v));
        if (pb == 2 * ncb) {
            for (int h = 0; h < 2; h++) {
                scr[2 * cc + h] = ch[cc].scale[h];
                if (corr) cor[2 * cc + h] = ch[cc].corr[h];
                k128 += ch[cc].scale[h] * (float)hs[h];
            }
        } else {
            scr[cc] = ch[cc].scale[0];
            if (corr) cor[cc] = ch[cc].corr[0];
            k128 += ch[cc].scale[0] * (float)(hs[0] + hs[1]);
        }
    }
    kk[b * SNUG_PANEL + r] = 128.0f * k128;
}

/* Chunks [c0, c1) of panel p of w (c0 and c1 on block boundaries) into the
 * layout of qpanel at tb; rows past a narrow panel's width are zeros. */
T_GEMM_INL qpanel qgemm_repack(const snug_linear *w, int64_t p, int64_t c0, int64_t c1, uint8_t *tb)
{
    const snug_qtype t = (snug_qtype)snug_dtype_qtype(w->dtype);
    const int64_t bs = snug_qtype_block(t), ncb = bs / 32, nc = c1 - c0, nb = nc / ncb;
    const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const bool corr = has_corr(t);
    const int64_t pb = sub16(t) ? 2 * ncb : ncb, parts = nb * pb;
    const size_t bb = snug_qtype_block_bytes(t);
    const uint8_t *blocks = (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, w->k, p) +
                            (size_t)(c0 / ncb * width) * bb;
    uint8_t *q = tb;
    float *sc = (float *)(void *)(tb + (size_t)nc * 512), *co = sc + parts * SNUG_PANEL;
    float *kk = co + (corr ? parts * SNUG_PANEL : 0);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t r = 0; r < SNUG_PANEL; r++) {
            const uint8_t *bl = r < width ? blocks + (size_t)(b * width + r) * bb : NULL;
            if (bl && (t == SNUG_QTYPE_Q4_K || t == SNUG_QTYPE_Q5_K)) repack_k45(bl, t == SNUG_QTYPE_Q5_K, b, r, q, sc, co, kk);
            else if (bl && t == SNUG_QTYPE_Q6_K) repack_q6k(bl, b, r, q, sc, kk);
            else if (bl && t == SNUG_QTYPE_Q8_0) repack_q8(bl, b, r, q, sc, kk);
            else repack_any(t, bl, b, r, ncb, pb, corr, q, sc, co, kk);
        }
    return (qpanel){q, sc, co, kk};
}

/* acc + the dots of x's 16 words (unsigned bytes) with the word at p
 * (signed bytes) broadcast, with vpdpbusd's memory broadcast (the
 * compiler loads it apart: one more instruction to issue a product). */
T_GEMM_INL __m512i dpbusd_bcast(__m512i acc, __m512i x, const uint8_t *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(x), "m"(*(const int32_t *)(const void *)p));
    return acc;
}

/* QT_NR rows of a repacked panel slice (rows r0.. of qp, nc chunks) against
 * one group of 16 rows of x (xg: its chunk c0), into acc (lanes: rows of
 * x). Per part of PART values: the integer sums (x's bytes carry + 128),
 * times the part's scale, less its minimum times x's sum; per scale group
 * of x (GROUP chunks) less kk, times x's d. */
T_GEMM_INL void qgemm_tile(const qpanel *qp, int64_t r0, const uint8_t *xg, int64_t nc, const int PART,
                           const int GROUP, const bool CORR, __m512 acc[QT_NR])
{
    const int64_t parts_per_chunk = PART == 16 ? 2 : 1;
    for (int64_t c0 = 0; c0 < nc; c0 += GROUP) {
        __m512 blk[QT_NR];
#pragma GCC unroll 8
        for (int r = 0; r < QT_NR; r++) blk[r] = _mm512_set1_ps(-qp->kk[(c0 / GROUP) * SNUG_PANEL + r0 + r]);
        const int64_t pb = GROUP * (32 / PART);
        for (int64_t c = c0; c < c0 + GROUP; c++) {
            const uint8_t *xc = xg + (size_t)c * XT_CHUNK, *qc = qp->q + (size_t)(c * SNUG_PANEL + r0) * 32;
#pragma GCC unroll 2
            for (int h = 0; h < (int)parts_per_chunk; h++) {
                const int nq = PART / 4, j0 = 4 * h;
                __m512i is[QT_NR];
#pragma GCC unroll 8
                for (int r = 0; r < QT_NR; r++) is[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int j = j0; j < j0 + nq; j++) {
                    __m512i xv = _mm512_loadu_si512((const void *)(xc + 64 * j));
#pragma GCC unroll 8
                    for (int r = 0; r < QT_NR; r++) is[r] = dpbusd_bcast(is[r], xv, qc + 32 * r + 4 * j);
                }
                int64_t part = (c0 / GROUP * SNUG_PANEL + r0) * pb + (c - c0) * parts_per_chunk + h;
                __m512 sx = _mm512_setzero_ps();
                if (CORR)
                    sx = PART == 16 ? _mm512_loadu_ps((const float *)(const void *)(xc + (h ? XT_S1 : XT_S0)))
                                    : _mm512_add_ps(_mm512_loadu_ps((const float *)(const void *)(xc + XT_S0)),
                                                    _mm512_loadu_ps((const float *)(const void *)(xc + XT_S1)));
#pragma GCC unroll 8
                for (int r = 0; r < QT_NR; r++) {
                    blk[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r]), _mm512_set1_ps(qp->sc[part + r * pb]),
                                             blk[r]);
                    if (CORR) blk[r] = _mm512_fnmadd_ps(_mm512_set1_ps(qp->co[part + r * pb]), sx, blk[r]);
                }
            }
        }
        __m512 dx = _mm512_loadu_ps((const float *)(const void *)(xg + (size_t)c0 * XT_CHUNK + XT_D));
#pragma GCC unroll 8
        for (int r = 0; r < QT_NR; r++) acc[r] = _mm512_fmadd_ps(blk[r], dx, acc[r]);
    }
}

/* acc (QT_NR rows of w from column o0, wv of them real; lanes rows t0.. of
 * x, tv of them real) into y, or added to it: turned over by gathers, one
 * row of x (QT_NR columns of y) at a time. */
T_GEMM_INL void qgemm_store(float *y, int64_t ldy, int64_t t0, int64_t tv, int64_t o0, int64_t wv,
                            const __m512 acc[QT_NR], bool add)
{
    _Alignas(64) float buf[QT_NR][SNUG_QGEMM_XROWS];
    for (int r = 0; r < QT_NR; r++) _mm512_store_ps(buf[r], acc[r]);
    const __m256i across = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
    const __mmask8 keep = (__mmask8)((1u << wv) - 1u);
    for (int64_t i = 0; i < tv; i++) {
        __m256 v = _mm256_i32gather_ps(&buf[0][i], across, 4);
        float *yr = y + (t0 + i) * ldy + o0;
        if (add) v = _mm256_add_ps(v, _mm256_maskz_loadu_ps(keep, yr));
        _mm256_mask_storeu_ps(yr, keep, v);
    }
}

/* One slice (chunks [c0, c1)) of panel p against every group of x. */
T_GEMM_INL void qgemm_panel_slice(float *y, int64_t ldy, const uint8_t *xt, int64_t n, const snug_linear *w,
                                  int64_t p, int64_t c0, int64_t c1, uint8_t *tb, const int PART, const int GROUP,
                                  const bool CORR)
{
    const int64_t kb = w->k / 32, width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    qpanel qp = qgemm_repack(w, p, c0, c1, tb);
    for (int64_t g = 0; g * SNUG_QGEMM_XROWS < n; g++) {
        const uint8_t *xg = xt + (size_t)(g * kb + c0) * XT_CHUNK;
        int64_t tv = SNUG_MIN((int64_t)SNUG_QGEMM_XROWS, n - g * SNUG_QGEMM_XROWS);
        for (int64_t r0 = 0; r0 < width; r0 += QT_NR) {
            __m512 acc[QT_NR];
            for (int r = 0; r < QT_NR; r++) acc[r] = _mm512_setzero_ps();
            qgemm_tile(&qp, r0, xg, c1 - c0, PART, GROUP, CORR, acc);
            qgemm_store(y, ldy, g * SNUG_QGEMM_XROWS, tv, p * SNUG_PANEL + r0, SNUG_MIN((int64_t)QT_NR, width - r0),
                        acc, c0 > 0);
        }
    }
}

/* Panels per block that a thread takes through every k slice before the
 * next (their rows of y stay in the cache between slices). */
enum { QGEMM_PANEL_BLOCK = 8 };

/* Bytes of x's groups a k slice may take: they stay in the core's cache
 * while every panel of a block meets them. */
#define QGEMM_X_CACHE ((size_t)1536 * 1024) /* (measured: 1.5 MiB of a 2 MiB L2 beat 0.75 and 3) */

static int64_t qgemm_slice_chunks(int64_t n, int64_t k)
{
    size_t groups = (size_t)((n + SNUG_QGEMM_XROWS - 1) / SNUG_QGEMM_XROWS);
    int64_t fit = (int64_t)(QGEMM_X_CACHE / (groups * XT_CHUNK)) / 8 * 8; /* whole blocks of 256 */
    return SNUG_MAX((int64_t)8, SNUG_MIN(k / 32, fit));
}

T_GEMM void snug_qgemm_vnni512(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0,
                               int64_t p1, void *tb)
{
    const snug_qtype t = (snug_qtype)snug_dtype_qtype(w->dtype);
    const int64_t kb = w->k / 32, sc = qgemm_slice_chunks(n, w->k);
    const bool s16 = sub16(t), corr = has_corr(t), k256 = x_group_chunks(t) == 8;
    for (int64_t pb = p0; pb < p1; pb += QGEMM_PANEL_BLOCK)
        for (int64_t c0 = 0; c0 < kb; c0 += sc) {
            int64_t c1 = SNUG_MIN(kb, c0 + sc);
            for (int64_t p = pb; p < SNUG_MIN(p1, pb + QGEMM_PANEL_BLOCK); p++) {
                if (s16 && corr) qgemm_panel_slice(y, ldy, xt, n, w, p, c0, c1, tb, 16, 8, true);
                else if (s16) qgemm_panel_slice(y, ldy, xt, n, w, p, c0, c1, tb, 16, 8, false);
                else if (corr && k256) qgemm_panel_slice(y, ldy, xt, n, w, p, c0, c1, tb, 32, 8, true);
                else if (corr) qgemm_panel_slice(y, ldy, xt, n, w, p, c0, c1, tb, 32, 1, true);
                else qgemm_panel_slice(y, ldy, xt, n, w, p, c0, c1, tb, 32, 1, false);
            }
        }
}

/* ---- the matrix-vector path on zmm (AVX-512 VNNI) ----------------------------- */

/* Prefetches the cache lines that begin within the bytes of one block,
 * QGEMV_AHEAD ahead. */
T_GEMM_INL void fetch_zmm(const uint8_t *at, size_t bb)
{
    uintptr_t a = ((uintptr_t)at + QGEMV_AHEAD + 63) & ~(uintptr_t)63, end = (uintptr_t)at + QGEMV_AHEAD + bb;
    for (; a < end; a += 64) _mm_prefetch((const char *)a, QGEMV_HINT);
}

/* Two rows' 32 bytes, a at the low half, b at the high. */
T_GEMM_INL __m512i load_pair(const uint8_t *a, const uint8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a)), load256(b), 1);
}

/* The 32 bytes at p in both halves. */
T_GEMM_INL __m512i load_twice(const void *p) { return _mm512_broadcast_i64x4(load256(p)); }

/* acc + the dots of u (unsigned, <= 63) with x (|x| <= 127) in pairs of
 * 16-bit sums, each times its 16-bit scale in s (QB_SDOT on zmm). */
T_GEMM_INL __m512i sdot_zmm(__m512i acc, __m512i u, __m512i x, __m512i s)
{
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, x), s);
}

/* The 16-bit scale j of each row of a pair in every 16-bit lane of its
 * half: z holds each row's eight 16-bit scales twice (row 0 in lanes 0 and
 * 1, row 1 in 2 and 3). */
T_GEMM_INL __m512i pair_scale(__m512i z, int j)
{
    return _mm512_shuffle_epi8(z, _mm512_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8))));
}

/* Q4_K and Q5_K as panel_k45 does, two rows to a zmm: the halves of each
 * block pair's 64 values and scales meet x's chunk in both halves. */
T_GEMM_INL void panel_k45_zmm(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p,
                              const int NT, const bool five)
{
    const int64_t k = w->k, kb = k / 32, nb = k / 256;
    const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t bb = five ? 176 : 144;
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
            xsum[t] = _mm256_broadcastsi128_si256(_mm_setr_epi16(
                (int16_t)(xb[0].sum16[0] + xb[0].sum16[1]), (int16_t)(xb[1].sum16[0] + xb[1].sum16[1]),
                (int16_t)(xb[2].sum16[0] + xb[2].sum16[1]), (int16_t)(xb[3].sum16[0] + xb[3].sum16[1]),
                (int16_t)(xb[4].sum16[0] + xb[4].sum16[1]), (int16_t)(xb[5].sum16[0] + xb[5].sum16[1]),
                (int16_t)(xb[6].sum16[0] + xb[6].sum16[1]), (int16_t)(xb[7].sum16[0] + xb[7].sum16[1])));
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
            const uint8_t *qs0 = bl0 + (five ? 48 : 16), *qs1 = bl1 + (five ? 48 : 16);
            __m512i hbits = five ? load_pair(bl0 + 16, bl1 + 16) : _mm512_setzero_si512();
            __m512i ia[SNUG_GEMV_MAX_N], ib[SNUG_GEMV_MAX_N];
            for (int t = 0; t < NT; t++) ia[t] = ib[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int pp = 0; pp < 4; pp++) {
                __m512i v = load_pair(qs0 + 32 * pp, qs1 + 32 * pp);
                __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                if (five) {
                    __m512i b0 = _mm512_set1_epi8((char)(1 << (2 * pp))), b1 = _mm512_set1_epi8((char)(2 << (2 * pp)));
                    lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(hbits, b0), lo, _mm512_set1_epi8(16));
                    hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(hbits, b1), hi, _mm512_set1_epi8(16));
                }
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
                __m512 dv = _mm512_insertf32x8(_mm512_set1_ps(f[0]), _mm256_set1_ps(f[2]), 1);
                acc[t][r / 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ia[t], ib[t])), dv, acc[t][r / 2]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int64_t r = 0; r < width; r++) {
            __m512 a = acc[t][r / 2];
            __m256 half = r % 2 ? _mm512_extractf32x8_ps(a, 1) : _mm512_castps512_ps256(a);
            __m256 c = cacc[t][r / 2];
            __m128 ch = r % 2 ? _mm256_extractf128_ps(c, 1) : _mm256_castps256_ps128(c);
            y[t * ldy + p * SNUG_PANEL + r] = hsum8(half) - hsum4(ch);
        }
}

/* Q6_K as panel_q6k does, two rows to a zmm. */
T_GEMM_INL void panel_q6k_zmm(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p,
                              const int NT)
{
    const int64_t k = w->k, kb = k / 32, nb = k / 256;
    const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t bb = 210;
    const uint8_t *panel = (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, k, p);
    __m512 acc[SNUG_GEMV_MAX_N][SNUG_PANEL / 2];
    for (int t = 0; t < NT; t++)
        for (int64_t r = 0; r < SNUG_PANEL / 2; r++) acc[t][r] = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(0xF);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blocks = panel + (size_t)(b * width) * bb;
        __m512i xsum[SNUG_GEMV_MAX_N]; /* x's sums of the 16 sub-blocks, 16 bits each, in both halves */
        float dx[SNUG_GEMV_MAX_N];
        for (int t = 0; t < NT; t++) {
            const snug_x8_block *xb = &x8[t * kb + 8 * b];
            __m256i s = _mm256_setr_epi16(xb[0].sum16[0], xb[0].sum16[1], xb[1].sum16[0], xb[1].sum16[1],
                                          xb[2].sum16[0], xb[2].sum16[1], xb[3].sum16[0], xb[3].sum16[1],
                                          xb[4].sum16[0], xb[4].sum16[1], xb[5].sum16[0], xb[5].sum16[1],
                                          xb[6].sum16[0], xb[6].sum16[1], xb[7].sum16[0], xb[7].sum16[1]);
            xsum[t] = _mm512_broadcast_i64x4(s);
            dx[t] = xb->d;
        }
        for (int64_t r = 0; r < width; r += 2) {
            const bool two = r + 1 < width;
            const uint8_t *bl0 = blocks + (size_t)r * bb, *bl1 = two ? bl0 + bb : bl0;
            fetch_zmm(bl0, 2 * bb);
            /* each row's 16 scales as 16 bits: row 0 in the low half */
            __m512i sc16 = _mm512_cvtepi8_epi16(_mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(bl0 + 192))),
                _mm_loadu_si128((const __m128i *)(const void *)(bl1 + 192)), 1));
            __m512i ia[SNUG_GEMV_MAX_N];
            for (int t = 0; t < NT; t++)
                ia[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_madd_epi16(sc16, xsum[t]), 5));
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m512i a = load_pair(bl0 + 64 * h, bl1 + 64 * h), a2 = load_pair(bl0 + 64 * h + 32, bl1 + 64 * h + 32);
                __m512i hb = load_pair(bl0 + 128 + 32 * h, bl1 + 128 + 32 * h);
                __m512i lo4[4] = {_mm512_and_si512(a, low4), _mm512_and_si512(a2, low4),
                                  _mm512_and_si512(_mm512_srli_epi16(a, 4), low4),
                                  _mm512_and_si512(_mm512_srli_epi16(a2, 4), low4)};
                /* the half's 8 scales of each row, twice: row 0 in lanes 0 and 1 */
                __m512i zsc = _mm512_shuffle_i64x2(sc16, sc16, h ? 0xF5 : 0xA0);
#pragma GCC unroll 4
                for (int g = 0; g < 4; g++) {
                    __m512i hi2 = _mm512_and_si512(hb, _mm512_set1_epi8((char)(3 << (2 * g))));
                    hi2 = g < 2 ? _mm512_slli_epi16(hi2, 4 - 2 * g) : g == 3 ? _mm512_srli_epi16(hi2, 2) : hi2;
                    __m512i u = _mm512_or_si512(lo4[g], hi2);
                    /* sub-block 2 g in the first 16 values (lanes 0, 2), 2 g + 1 in the next (1, 3) */
                    __m512i s = _mm512_mask_blend_epi64((__mmask8)0xCC, pair_scale(zsc, 2 * g), pair_scale(zsc, 2 * g + 1));
                    for (int t = 0; t < NT; t++)
                        ia[t] = sdot_zmm(ia[t], u, load_twice(x8[t * kb + 8 * b + 4 * h + g].q), s);
                }
            }
            uint16_t d0, d1;
            memcpy(&d0, bl0 + 208, 2), memcpy(&d1, bl1 + 208, 2);
            __m128 dd = _mm_cvtph_ps(_mm_setr_epi16((short)d0, (short)d1, 0, 0, 0, 0, 0, 0));
            for (int t = 0; t < NT; t++) {
                float f[4];
                _mm_storeu_ps(f, _mm_mul_ps(dd, _mm_set1_ps(dx[t])));
                __m512 dv = _mm512_insertf32x8(_mm512_set1_ps(f[0]), _mm256_set1_ps(f[1]), 1);
                acc[t][r / 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[t]), dv, acc[t][r / 2]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int64_t r = 0; r < width; r++) {
            __m512 a = acc[t][r / 2];
            y[t * ldy + p * SNUG_PANEL + r] = hsum8(r % 2 ? _mm512_extractf32x8_ps(a, 1) : _mm512_castps512_ps256(a));
        }
}

/* Panels [p0, p1) for NT rows of x: Q4_K, Q5_K and Q6_K on zmm, the others
 * as the vpdpbusd ymm path. */
T_GEMM_INL void qgemv_n_zmm(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p0,
                            int64_t p1, const int NT)
{
    const snug_qtype qt = (snug_qtype)snug_dtype_qtype(w->dtype);
    for (int64_t p = p0; p < p1; p++) {
        switch (qt) {
        case SNUG_QTYPE_Q4_K: panel_k45_zmm(y, ldy, x8, w, p, NT, false); break;
        case SNUG_QTYPE_Q5_K: panel_k45_zmm(y, ldy, x8, w, p, NT, true); break;
        case SNUG_QTYPE_Q6_K: panel_q6k_zmm(y, ldy, x8, w, p, NT); break;
        default: qgemv_n_vnni_512(y, ldy, x8, w, p, p + 1, NT); break;
        }
    }
}

/* The snug_qgemv_fn of vpdpbusd zmm. */
T_GEMM static void qgemv_zmm(float *y, int64_t ldy, const snug_x8_block *x8, int64_t n, const snug_linear *w,
                             int64_t p0, int64_t p1)
{
    switch (n) {
    case 1: qgemv_n_zmm(y, ldy, x8, w, p0, p1, 1); break;
    case 2: qgemv_n_zmm(y, ldy, x8, w, p0, p1, 2); break;
    case 3: qgemv_n_zmm(y, ldy, x8, w, p0, p1, 3); break;
    default: qgemv_n_zmm(y, ldy, x8, w, p0, p1, 4); break;
    }
}

bool snug_qgemm_runs(void)
{
    snug_cpu cpu = snug_cpu_probe();
    return cpu.isa >= SNUG_ISA_AVX512 && cpu.avx512_vnni;
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

size_t snug_qgemm_panel_bytes(int64_t k) { return (size_t)k * 25 + 256; }

size_t snug_qgemm_x_bytes(int64_t n, int64_t k)
{
    return (size_t)((n + SNUG_QGEMM_XROWS - 1) / SNUG_QGEMM_XROWS) * (size_t)(k / 32) * 704;
}

void snug_x8_quantize_avx512(const float *x, int64_t k, snug_dtype wdt, snug_x8_block *out)
{
    snug_x8_quantize(x, k, wdt, out);
}

void snug_qgemm_pack_x(void *xt, const float *x, int64_t n, int64_t k, snug_dtype wdt, int64_t g0, int64_t g1,
                       snug_x8_block *tmp)
{
    (void)xt, (void)x, (void)n, (void)k, (void)wdt, (void)g0, (void)g1, (void)tmp;
}

void snug_qgemm_vnni512(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0,
                        int64_t p1, void *tb)
{
    (void)y, (void)ldy, (void)xt, (void)n, (void)w, (void)p0, (void)p1, (void)tb;
}

bool snug_qgemm_runs(void) { return false; }
#endif
