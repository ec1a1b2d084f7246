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

/* Whether the format's scales change every 16 values (a chunk's halves
 * differ) rather than every 32. */
static bool sub16(snug_qtype t) { return t == SNUG_QTYPE_Q2_K || t == SNUG_QTYPE_Q3_K || t == SNUG_QTYPE_Q6_K; }

size_t snug_qgemm_panel_bytes(int64_t k) { return (size_t)k * 24 + 256; }

/* Panel p of w repacked for the kernel below, into at (snug_qgemm_panel_bytes
 * (k) bytes): for each chunk c of 32 values and each quad j (4 values) of
 * it, 16 rows x 4 bytes, row r's values 32 c + 4 j .. + 4 as q + 128 (so
 * unsigned; rows past a narrow panel's width hold 128 with scale 0), at
 * u + ((8 c + j) 16 + r) 4; then the scale of each half h of each chunk
 * for the 16 rows at sc + (2 c + h) 16, and what to take away per unit of
 * x's half sum at co + (2 c + h) 16 (corr + 128 scale): for each row, w =
 * scale u - co over x's 8-bit integers. */
T_GEMM_INL void repack_panel(const snug_linear *w, int64_t p, uint8_t *at, uint8_t **u_out, float **sc_out,
                             float **co_out)
{
    const snug_qtype t = (snug_qtype)snug_dtype_qtype(w->dtype);
    const int64_t k = w->k, kb = k / 32, bs = snug_qtype_block(t), nb = k / bs, nc = bs / 32;
    const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t bb = snug_qtype_block_bytes(t);
    const uint8_t *panel = (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, k, p);
    uint8_t *u = at;
    float *sc = (float *)(void *)(at + (size_t)SNUG_PANEL * (size_t)k), *co = sc + kb * 2 * SNUG_PANEL;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t r = 0; r < SNUG_PANEL; r++) {
            qchunk ch[8];
            if (r < width) {
                unpack_chunks(t, panel + (size_t)(b * width + r) * bb, ch);
            } else {
                memset(ch, 0, sizeof ch);
            }
            for (int64_t cc = 0; cc < nc; cc++) {
                int64_t c = b * nc + cc;
                /* the 8 quads of the row to their places: 32-bit words 4 apart */
                __m256i q = _mm256_xor_si256(load256(ch[cc].q), flip);
                uint32_t words[8];
                store256(words, q);
                uint32_t *dst = (uint32_t *)(void *)(u + (size_t)(c * 8) * 64) + r;
                for (int j = 0; j < 8; j++) dst[j * 16] = words[j];
                for (int h = 0; h < 2; h++) {
                    sc[(c * 2 + h) * SNUG_PANEL + r] = ch[cc].scale[h];
                    co[(c * 2 + h) * SNUG_PANEL + r] = ch[cc].corr[h] + 128.0f * ch[cc].scale[h];
                }
            }
        }
    *u_out = u, *sc_out = sc, *co_out = co;
}

/* Rows [t0, t0 + MR) of x (rows past mr_v read row t0 and are dropped)
 * against the repacked panel: y[t][16 p + r] for r < width. xs holds per
 * row and chunk d, d S16[0], d S16[1]. */
enum { QGEMM_MR = 8 }; /* rows of x per tile */

/* NJ quads (4 values each) from quad j0 of chunk c, 16 rows of the
 * repacked panel (uc: the chunk's bytes) against the tile's rows: summed
 * in integers, then into acc scaled (scv times x's d) less cov times x's
 * sum over those values (xs entry 1 + h, or both halves with h < 0). */
T_GEMM_INL void qgemm_part(__m512 acc[QGEMM_MR], const snug_x8_block *const xr[QGEMM_MR],
                           const float *const xsr[QGEMM_MR], int64_t c, const uint8_t *uc, const int j0,
                           const int NJ, __m512 scv, __m512 cov, const int h)
{
    __m512i ia[QGEMM_MR];
#pragma GCC unroll 8
    for (int i = 0; i < QGEMM_MR; i++) ia[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = j0; j < j0 + NJ; j++) {
        __m512i wv = _mm512_loadu_si512((const void *)(uc + j * 64));
#pragma GCC unroll 8
        for (int i = 0; i < QGEMM_MR; i++) {
            int32_t q4;
            memcpy(&q4, xr[i][c].q + 4 * j, 4);
            ia[i] = _mm512_dpbusd_epi32(ia[i], wv, _mm512_set1_epi32(q4));
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < QGEMM_MR; i++) {
        const float *x3 = xsr[i] + c * 3;
        float xsum = h < 0 ? x3[1] + x3[2] : x3[1 + h];
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[i]), _mm512_mul_ps(scv, _mm512_set1_ps(x3[0])), acc[i]);
        acc[i] = _mm512_fnmadd_ps(cov, _mm512_set1_ps(xsum), acc[i]);
    }
}

/* Rows [t0, t0 + mr_v) of x (up to QGEMM_MR; the tile's other rows read
 * row t0 and are dropped) against the repacked panel: y[t][16 p + r] for r
 * < width. xs holds per row and chunk d, d S16[0], d S16[1]. */
T_GEMM_INL void qgemm_tile(float *y, int64_t ldy, const snug_x8_block *x8, const float *xs, int64_t kb,
                           const uint8_t *u, const float *sc, const float *co, int64_t t0, int32_t mr_v,
                           int64_t p, int64_t width, const bool SUB16)
{
    __m512 acc[QGEMM_MR];
    const snug_x8_block *xr[QGEMM_MR];
    const float *xsr[QGEMM_MR];
#pragma GCC unroll 8
    for (int i = 0; i < QGEMM_MR; i++) {
        int64_t t = t0 + (i < mr_v ? i : 0);
        acc[i] = _mm512_setzero_ps();
        xr[i] = x8 + t * kb;
        xsr[i] = xs + t * kb * 3;
    }
    for (int64_t c = 0; c < kb; c++) {
        const uint8_t *uc = u + (size_t)(c * 8) * 64;
        const float *s0 = sc + c * 2 * SNUG_PANEL, *c0 = co + c * 2 * SNUG_PANEL;
        if (SUB16) {
            qgemm_part(acc, xr, xsr, c, uc, 0, 4, _mm512_loadu_ps(s0), _mm512_loadu_ps(c0), 0);
            qgemm_part(acc, xr, xsr, c, uc, 4, 4, _mm512_loadu_ps(s0 + SNUG_PANEL), _mm512_loadu_ps(c0 + SNUG_PANEL), 1);
        } else {
            qgemm_part(acc, xr, xsr, c, uc, 0, 8, _mm512_loadu_ps(s0), _mm512_loadu_ps(c0), -1);
        }
    }
    __mmask16 keep = (__mmask16)((1u << width) - 1u);
    for (int i = 0; i < mr_v; i++) _mm512_mask_storeu_ps(y + (t0 + i) * ldy + p * SNUG_PANEL, keep, acc[i]);
}

T_GEMM void snug_qgemm_vnni512(float *y, int64_t ldy, const snug_x8_block *x8, const float *xs, int64_t n,
                               const snug_linear *w, int64_t p0, int64_t p1, void *tb)
{
    const snug_qtype t = (snug_qtype)snug_dtype_qtype(w->dtype);
    const int64_t kb = w->k / 32;
    const bool s16 = sub16(t);
    for (int64_t p = p0; p < p1; p++) {
        uint8_t *u;
        float *sc, *co;
        repack_panel(w, p, tb, &u, &sc, &co);
        int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
        for (int64_t t0 = 0; t0 < n; t0 += 8) {
            int32_t mr_v = (int32_t)SNUG_MIN((int64_t)8, n - t0);
            if (s16) qgemm_tile(y, ldy, x8, xs, kb, u, sc, co, t0, mr_v, p, width, true);
            else qgemm_tile(y, ldy, x8, xs, kb, u, sc, co, t0, mr_v, p, width, false);
        }
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
    if (isa >= SNUG_ISA_AVX512 && cpu.avx512_vnni)
        out[n++] = (snug_qgemv_kind){qgemv_vnni_512, SNUG_INSN_DPBUSD_YMM};
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

size_t snug_qgemm_panel_bytes(int64_t k) { return (size_t)k * 24 + 256; }

void snug_qgemm_vnni512(float *y, int64_t ldy, const snug_x8_block *x8, const float *xs, int64_t n,
                        const snug_linear *w, int64_t p0, int64_t p1, void *tb)
{
    (void)y, (void)ldy, (void)x8, (void)xs, (void)n, (void)w, (void)p0, (void)p1, (void)tb;
}

bool snug_qgemm_runs(void) { return false; }
#endif
