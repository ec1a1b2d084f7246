/*
 * k_quant_unpack.h: block-format weights (base/quant.h) unpacked in AVX2
 * vectors, shared by the matrix-vector path (k_quant.c) and the 8-bit GEMM
 * (k_qgemm.c): each format's values as bytes, its scales, and whole blocks
 * as chunks of 32 signed values with each half's scale and offset. Private
 * to kernels/, x86 only (included inside the files' x86 part); every
 * function here is static inline.
 */
#ifndef SNUG_K_QUANT_UNPACK_H
#define SNUG_K_QUANT_UNPACK_H

#include "base/quant.h"
#include "qdot.h"

#include <immintrin.h>
#include <string.h>

#define T_Q __attribute__((target("avx2,fma,f16c")))
#define T_Q_INL __attribute__((target("avx2,fma,f16c"), always_inline)) static inline
/* AVX-512 with VNNI (the zmm paths) */
#define T_Z __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define T_Z_INL __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) static inline

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
static inline void chunks_generic(snug_qtype t, const uint8_t *b, qchunk *c)
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

/* The 16 half sums (sum16) of the 8 x8 blocks at xb (a K-quant's group of
 * 256 values), as 16-bit lanes in order. */
T_Q_INL __m256i x8_half_sums(const snug_x8_block *xb)
{
    return _mm256_setr_epi16(xb[0].sum16[0], xb[0].sum16[1], xb[1].sum16[0], xb[1].sum16[1], xb[2].sum16[0],
                             xb[2].sum16[1], xb[3].sum16[0], xb[3].sum16[1], xb[4].sum16[0], xb[4].sum16[1],
                             xb[5].sum16[0], xb[5].sum16[1], xb[6].sum16[0], xb[6].sum16[1], xb[7].sum16[0],
                             xb[7].sum16[1]);
}

/* The 8 chunks' sums of the same blocks (each at most 32 x 127: exact in
 * 16 bits), in both 128-bit halves. */
T_Q_INL __m256i x8_chunk_sums(const snug_x8_block *xb)
{
    __m256i h = x8_half_sums(xb);
    return _mm256_broadcastsi128_si256(_mm_hadd_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
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
    case SNUG_QTYPE_Q2_K:
    case SNUG_QTYPE_Q3_K: {
        /* 2-bit values of chunk c: bits 2 (c % 4) of the 32 bytes at qs + 32 (c / 4); Q3_K's high
         * bit (bit c of its hmask bytes) clear takes 4 away */
        bool three = t == SNUG_QTYPE_Q3_K;
        const uint8_t *qs = b + (three ? 32 : 16);
        __m256i hmask = three ? load256(b) : _mm256_setzero_si256();
        for (int ch = 0; ch < 8; ch++) {
            __m256i v = load256(qs + 32 * (ch / 4));
            __m256i q = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * (ch % 4))), _mm256_set1_epi8(3));
            if (three) {
                __m256i bit = _mm256_set1_epi8((char)(1 << ch));
                __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
                q = _mm256_sub_epi8(q, _mm256_andnot_si256(set, _mm256_set1_epi8(4)));
            }
            store256(c[ch].q, q);
        }
        float d = half_at(b + (three ? 108 : 80)), dmin = three ? 0.0f : half_at(b + 82);
        const uint8_t *sc = b + (three ? 96 : 0);
        for (int s = 0; s < 16; s++) {
            int scale, min = 0;
            if (three) {
                int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4, hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
                scale = (lo | hi << 4) - 32;
            } else {
                scale = sc[s] & 0xF, min = sc[s] >> 4;
            }
            c[s / 2].scale[s % 2] = d * (float)scale;
            c[s / 2].corr[s % 2] = dmin * (float)min;
        }
        return;
    }
    default: chunks_generic(t, b, c); return;
    }
}


#endif /* SNUG_K_QUANT_UNPACK_H */
