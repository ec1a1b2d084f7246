/*
 * quant.c: ggml's quantized block formats: shapes and the exact scalar
 * dequantization (quant.h).
 *
 * Each block's bytes, in order (h: a little-endian IEEE half, the scale
 * d or the offset dmin / m; element e of the block, q its integer):
 *   Q4_0  18: d h, qs[16]             q = nibble (e < 16: low of qs[e],
 *                                      else high of qs[e - 16]) - 8; d q
 *   Q4_1  20: d h, m h, qs[16]        q = nibble as Q4_0; d q + m
 *   Q5_0  22: d h, qh u32, qs[16]     q = nibble | bit e of qh << 4, - 16
 *   Q5_1  24: d h, m h, qh u32, qs[16]  as Q5_0 without the - 16; d q + m
 *   Q8_0  34: d h, qs[32] int8        q = qs[e]; q d
 *   Q2_K  84: scales[16], qs[64], d h, dmin h
 *             16 sub-blocks of 16: scale low nibble, min high nibble;
 *             q = 2 bits of qs[32 (e / 128) + e % 32] at 2 ((e % 128) / 32);
 *             (d sc) q - (dmin mn)
 *   Q3_K 110: hmask[32], qs[64], scales[12], d h
 *             16 six-bit signed scales (sc - 32), low 4 bits from
 *             scales[0..8] (nibbles), high 2 from scales[8..12];
 *             q = 2 bits as Q2_K, - 4 unless bit e / 32 of hmask[e % 32];
 *             (d sc) q
 *   Q4_K 144: d h, dmin h, scales[12], qs[128]
 *             8 sub-blocks of 32, six-bit scale and min each;
 *             q = nibble (e % 64 < 32: low) of qs[32 (e / 64) + e % 32];
 *             (d sc) q - (dmin mn)
 *   Q5_K 176: d h, dmin h, scales[12], qh[32], qs[128]
 *             as Q4_K, q | bit e / 32 of qh[e % 32] << 4
 *   Q6_K 210: ql[128], qh[64], scales[16] int8, d h
 *             16 sub-blocks of 16; in each half of 128 (c), low 4 bits
 *             from ql[64 c + e % 64] (high nibble from e % 128 >= 64), high
 *             2 from qh[32 c + e % 32] at 2 ((e % 128) / 32); q - 32;
 *             (d sc) q
 */
#include "quant.h"

#include "dtype.h"

#include <math.h>
#include <string.h>

typedef struct qtype_info {
    const char *name;
    int64_t block;
    size_t bytes;
} qtype_info;

static const qtype_info g_qtypes[] = {
    [SNUG_QTYPE_Q4_0] = {"Q4_0", 32, 18},   [SNUG_QTYPE_Q4_1] = {"Q4_1", 32, 20},
    [SNUG_QTYPE_Q5_0] = {"Q5_0", 32, 22},   [SNUG_QTYPE_Q5_1] = {"Q5_1", 32, 24},
    [SNUG_QTYPE_Q8_0] = {"Q8_0", 32, 34},   [SNUG_QTYPE_Q2_K] = {"Q2_K", 256, 84},
    [SNUG_QTYPE_Q3_K] = {"Q3_K", 256, 110}, [SNUG_QTYPE_Q4_K] = {"Q4_K", 256, 144},
    [SNUG_QTYPE_Q5_K] = {"Q5_K", 256, 176}, [SNUG_QTYPE_Q6_K] = {"Q6_K", 256, 210},
};

const snug_qtype snug_qtypes[10] = {SNUG_QTYPE_Q8_0, SNUG_QTYPE_Q4_0, SNUG_QTYPE_Q4_1,
                                    SNUG_QTYPE_Q5_0, SNUG_QTYPE_Q5_1, SNUG_QTYPE_Q2_K,
                                    SNUG_QTYPE_Q3_K, SNUG_QTYPE_Q4_K, SNUG_QTYPE_Q5_K,
                                    SNUG_QTYPE_Q6_K};

bool snug_qtype_known(uint32_t t)
{
    return t < SNUG_ARRAY_LEN(g_qtypes) && g_qtypes[t].name != NULL;
}

const char *snug_qtype_name(uint32_t t) { return snug_qtype_known(t) ? g_qtypes[t].name : "unknown"; }

int64_t snug_qtype_block(uint32_t t) { return snug_qtype_known(t) ? g_qtypes[t].block : 0; }

size_t snug_qtype_block_bytes(uint32_t t) { return snug_qtype_known(t) ? g_qtypes[t].bytes : 0; }

size_t snug_qtype_bytes(uint32_t t, int64_t n)
{
    if (!snug_qtype_known(t) || n < 0 || n % g_qtypes[t].block != 0) return 0;
    return (size_t)(n / g_qtypes[t].block) * g_qtypes[t].bytes;
}

size_t snug_dtype_bytes(snug_dtype dt, int64_t n)
{
    if (n < 0) return 0;
    if (snug_dtype_is_quant(dt)) return snug_qtype_bytes(snug_dtype_qtype(dt), n);
    if (snug_dtype_is_mxfp8(dt))
        return n % SNUG_MXFP8_BLOCK ? 0 : (size_t)(n / SNUG_MXFP8_BLOCK) * SNUG_MXFP8_BLOCK_BYTES;
    return (size_t)n * snug_dtype_size(dt);
}

snug_dtype snug_mxfp8_elem(snug_dtype dt)
{
    return dt == SNUG_DTYPE_MXFP8_E5M2 ? SNUG_DTYPE_F8_E5M2 : SNUG_DTYPE_F8_E4M3;
}

uint8_t snug_mxfp8_scale(float amax, snug_dtype dt, float *inv)
{
    uint32_t bits;
    memcpy(&bits, &amax, 4);
    int e = (int)((bits >> 23) & 0xFF) - 127 - (dt == SNUG_DTYPE_MXFP8_E5M2 ? 15 : 8);
    e = e < -127 ? -127 : e > 127 ? 127 : e;
    *inv = snug_e8m0_to_f32((uint8_t)(127 - e)); /* 2^-e */
    return (uint8_t)(e + 127);
}

void snug_mxfp8_quantize(snug_dtype dt, const float *x, void *dst, int64_t n)
{
    snug_dtype fmt = snug_mxfp8_elem(dt);
    uint8_t *b = dst;
    for (int64_t i = 0; i < n; i += SNUG_MXFP8_BLOCK, b += SNUG_MXFP8_BLOCK_BYTES) {
        float amax = 0.0f, inv;
        for (int e = 0; e < SNUG_MXFP8_BLOCK; e++) amax = fmaxf(amax, fabsf(x[i + e]));
        b[0] = snug_mxfp8_scale(amax, dt, &inv);
        for (int e = 0; e < SNUG_MXFP8_BLOCK; e++) b[1 + e] = snug_f32_to_fp8(x[i + e] * inv, fmt);
    }
}

void snug_mxfp8_dequantize(snug_dtype dt, const void *src, float *dst, int64_t n)
{
    snug_dtype fmt = snug_mxfp8_elem(dt);
    const uint8_t *b = src;
    for (int64_t i = 0; i < n; i += SNUG_MXFP8_BLOCK, b += SNUG_MXFP8_BLOCK_BYTES)
        for (int e = 0; e < SNUG_MXFP8_BLOCK; e++)
            dst[i + e] = snug_fp8_to_f32(b[1 + e], fmt) * snug_e8m0_to_f32(b[0]);
}

/* A little-endian half at p, as a float (exact). */
static float half_at(const uint8_t *p) { return snug_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 4-bit value of element e (< 32) of a 32-element block's qs[16]. */
static int nibble32(const uint8_t *qs, int e) { return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4; }

/* Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: one sub-block of 32, scale 1. */
static void unpack_legacy(snug_qtype t, const uint8_t *b, snug_qblock *o)
{
    bool has_min = t == SNUG_QTYPE_Q4_1 || t == SNUG_QTYPE_Q5_1;
    bool five = t == SNUG_QTYPE_Q5_0 || t == SNUG_QTYPE_Q5_1;
    o->n = o->sub = 32;
    o->d = half_at(b);
    o->dmin = has_min ? -half_at(b + 2) : 0.0f;
    o->sc[0] = 1;
    o->mn[0] = has_min ? 1 : 0;
    if (t == SNUG_QTYPE_Q8_0) {
        for (int e = 0; e < 32; e++) o->q[e] = (int8_t)b[2 + e];
        return;
    }
    const uint8_t *p = b + (has_min ? 4 : 2);
    uint32_t qh = five ? u32_at(p) : 0;
    const uint8_t *qs = p + (five ? 4 : 0);
    int offset = has_min ? 0 : (five ? 16 : 8);
    for (int e = 0; e < 32; e++) o->q[e] = (int16_t)((nibble32(qs, e) | (int)((qh >> e) & 1u) << 4) - offset);
}

static void unpack_q2_k(const uint8_t *b, snug_qblock *o)
{
    const uint8_t *scales = b, *qs = b + 16;
    o->n = 256, o->sub = 16;
    o->d = half_at(b + 80), o->dmin = half_at(b + 82);
    for (int i = 0; i < 16; i++) o->sc[i] = scales[i] & 0xF, o->mn[i] = scales[i] >> 4;
    for (int e = 0; e < 256; e++) o->q[e] = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

static void unpack_q3_k(const uint8_t *b, snug_qblock *o)
{
    const uint8_t *hmask = b, *qs = b + 32, *scales = b + 96;
    o->n = 256, o->sub = 16;
    o->d = half_at(b + 108), o->dmin = 0.0f;
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? scales[i] & 0xF : scales[i - 8] >> 4;
        int hi = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
        o->sc[i] = (int16_t)((lo | hi << 4) - 32), o->mn[i] = 0;
    }
    for (int e = 0; e < 256; e++) {
        int q = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        o->q[e] = (int16_t)((hmask[e % 32] >> (e / 32)) & 1 ? q : q - 4);
    }
}

/* Q4_K (qh NULL) and Q5_K: eight sub-blocks of 32 with six-bit scales and
 * mins packed in b[4..16]. */
static void unpack_q4_q5_k(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, snug_qblock *o)
{
    const uint8_t *s = b + 4;
    o->n = 256, o->sub = 32;
    o->d = half_at(b), o->dmin = half_at(b + 2);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            o->sc[j] = s[j] & 63, o->mn[j] = s[j + 4] & 63;
        } else {
            o->sc[j] = (int16_t)((s[j + 4] & 0xF) | (s[j - 4] >> 6) << 4);
            o->mn[j] = (int16_t)((s[j + 4] >> 4) | (s[j] >> 6) << 4);
        }
    }
    for (int e = 0; e < 256; e++) {
        int q = (qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0xF;
        if (qh) q |= ((qh[e % 32] >> (e / 32)) & 1) << 4;
        o->q[e] = (int16_t)q;
    }
}

static void unpack_q6_k(const uint8_t *b, snug_qblock *o)
{
    const uint8_t *ql = b, *qh = b + 128;
    o->n = 256, o->sub = 16;
    o->d = half_at(b + 208), o->dmin = 0.0f;
    for (int i = 0; i < 16; i++) o->sc[i] = (int8_t)b[192 + i], o->mn[i] = 0;
    for (int e = 0; e < 256; e++) {
        int c = e / 128, w = e % 128;
        int lo = (ql[64 * c + w % 64] >> (4 * (w / 64))) & 0xF;
        int hi = (qh[32 * c + w % 32] >> (2 * (w / 32))) & 3;
        o->q[e] = (int16_t)((lo | hi << 4) - 32);
    }
}

void snug_quant_unpack(snug_qtype t, const void *src, snug_qblock *out)
{
    const uint8_t *b = src;
    switch (t) {
    case SNUG_QTYPE_Q4_0:
    case SNUG_QTYPE_Q4_1:
    case SNUG_QTYPE_Q5_0:
    case SNUG_QTYPE_Q5_1:
    case SNUG_QTYPE_Q8_0: unpack_legacy(t, b, out); break;
    case SNUG_QTYPE_Q2_K: unpack_q2_k(b, out); break;
    case SNUG_QTYPE_Q3_K: unpack_q3_k(b, out); break;
    case SNUG_QTYPE_Q4_K: unpack_q4_q5_k(b, NULL, b + 16, out); break;
    case SNUG_QTYPE_Q5_K: unpack_q4_q5_k(b, b + 16, b + 48, out); break;
    case SNUG_QTYPE_Q6_K: unpack_q6_k(b, out); break;
    }
}

void snug_quant_dequantize(snug_qtype t, const void *src, float *dst, int64_t n)
{
    SNUG_ASSERT(snug_qtype_known((uint32_t)t) && n % g_qtypes[t].block == 0);
    const uint8_t *b = src;
    snug_qblock q;
    for (int64_t i = 0; i < n; i += g_qtypes[t].block, b += g_qtypes[t].bytes) {
        snug_quant_unpack(t, b, &q);
        for (int32_t s = 0; s < q.n / q.sub; s++) {
            /* the reference's order: the sub-block's scale and min first */
            float ds = q.d * (float)q.sc[s], dm = q.dmin * (float)q.mn[s];
            for (int32_t e = s * q.sub; e < (s + 1) * q.sub; e++) dst[i + e] = ds * (float)q.q[e] - dm;
        }
    }
}

/* ---- quantization ------------------------------------------------------- */

bool snug_qtype_quantizable(uint32_t t)
{
    return t == SNUG_QTYPE_Q8_0 || t == SNUG_QTYPE_Q4_0 || t == SNUG_QTYPE_Q5_0 || t == SNUG_QTYPE_Q4_K ||
           t == SNUG_QTYPE_Q5_K || t == SNUG_QTYPE_Q6_K;
}

static void put_half(uint8_t *p, float f)
{
    uint16_t h = snug_f32_to_f16(f);
    p[0] = (uint8_t)(h & 0xFF), p[1] = (uint8_t)(h >> 8);
}

/* f rounded to the nearest half float: the scale a block stores, which
 * its values are quantized against. */
static float half_round(float f) { return snug_f16_to_f32(snug_f32_to_f16(f)); }

/* The integer nearest v, ties away from zero, clamped to [lo, hi]. */
static int nearest(float v, int lo, int hi)
{
    float r = v < 0.0f ? -floorf(-v + 0.5f) : floorf(v + 0.5f);
    return r < (float)lo ? lo : r > (float)hi ? hi : (int)r;
}

/* The element of x[0..n) of the largest magnitude, with its sign. */
static float signed_max(const float *x, int n)
{
    float m = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > fabsf(m)) m = x[i];
    return m;
}

/* Q8_0, Q4_0, Q5_0: one scale for 32 values. Q8_0 symmetric (d = max |x|
 * / 127), the others with 2^(bits - 1) levels on the side of the largest
 * magnitude (d = that value / -2^(bits - 1), as ggml's reference does). */
static void quantize_legacy(snug_qtype t, const float *x, uint8_t *b)
{
    int q[32];
    if (t == SNUG_QTYPE_Q8_0) {
        float d = half_round(fabsf(signed_max(x, 32)) / 127.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
        put_half(b, d);
        for (int e = 0; e < 32; e++) b[2 + e] = (uint8_t)(int8_t)nearest(x[e] * id, -127, 127);
        return;
    }
    int half = t == SNUG_QTYPE_Q5_0 ? 16 : 8;
    float d = half_round(signed_max(x, 32) / (float)-half), id = d != 0.0f ? 1.0f / d : 0.0f;
    put_half(b, d);
    for (int e = 0; e < 32; e++) q[e] = nearest(x[e] * id, -half, half - 1) + half;
    uint8_t *qs = b + 2;
    if (t == SNUG_QTYPE_Q5_0) {
        uint32_t qh = 0;
        for (int e = 0; e < 32; e++) qh |= (uint32_t)(q[e] >> 4) << e;
        for (int i = 0; i < 4; i++) b[2 + i] = (uint8_t)(qh >> (8 * i));
        qs = b + 6;
    }
    for (int e = 0; e < 16; e++) qs[e] = (uint8_t)((q[e] & 0xF) | (q[e + 16] & 0xF) << 4);
}

/* Q4_K (qh NULL) and Q5_K: 8 sub-blocks of 32, each x ~ (d sc) q - (dmin
 * mn) with q in [0, 15] ([0, 31] for Q5_K): the sub-block's range from
 * min(0, its minimum) to its maximum in 15 (31) steps, the steps and the
 * minimums in 6 bits of d and dmin; Q5_K's fifth bits go to qh. */
static void quantize_q4_q5_k(const float *x, uint8_t *b, uint8_t *qh, uint8_t *qs)
{
    const int top = qh ? 31 : 15;
    float step[8], low[8], dmax = 0.0f, mmax = 0.0f;
    for (int j = 0; j < 8; j++) {
        float lo = 0.0f, hi = 0.0f;
        for (int e = 0; e < 32; e++) lo = fminf(lo, x[32 * j + e]), hi = fmaxf(hi, x[32 * j + e]);
        step[j] = (hi - lo) / (float)top, low[j] = -lo;
        dmax = fmaxf(dmax, step[j]), mmax = fmaxf(mmax, low[j]);
    }
    float d = half_round(dmax / 63.0f), dmin = half_round(mmax / 63.0f);
    put_half(b, d), put_half(b + 2, dmin);
    int sc[8], mn[8];
    uint8_t *s = b + 4;
    memset(s, 0, 12);
    memset(qs, 0, 128);
    if (qh) memset(qh, 0, 32);
    for (int j = 0; j < 8; j++) {
        sc[j] = d > 0.0f ? nearest(step[j] / d, 0, 63) : 0;
        mn[j] = dmin > 0.0f ? nearest(low[j] / dmin, 0, 63) : 0;
        if (j < 4) {
            s[j] = (uint8_t)sc[j], s[j + 4] = (uint8_t)mn[j];
        } else {
            s[j + 4] = (uint8_t)((sc[j] & 0xF) | (mn[j] & 0xF) << 4);
            s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            s[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
    for (int e = 0; e < 256; e++) {
        int j = e / 32;
        float ds = d * (float)sc[j];
        int q = ds > 0.0f ? nearest((x[e] + dmin * (float)mn[j]) / ds, 0, top) : 0;
        qs[32 * (e / 64) + e % 32] |= (uint8_t)((q & 0xF) << (4 * ((e % 64) / 32)));
        if (qh) qh[e % 32] |= (uint8_t)((q >> 4) << (e / 32));
    }
}

/* Q6_K: 16 sub-blocks of 16, x ~ (d sc) q with q in [-32, 31] on the side
 * of the sub-block's largest magnitude, sc a signed 8-bit multiple of d. */
static void quantize_q6_k(const float *x, uint8_t *b)
{
    float scale[16], smax = 0.0f;
    for (int j = 0; j < 16; j++) {
        scale[j] = signed_max(x + 16 * j, 16) / -32.0f;
        if (fabsf(scale[j]) > fabsf(smax)) smax = scale[j];
    }
    float d = half_round(smax / -128.0f);
    put_half(b + 208, d);
    uint8_t *ql = b, *qh = b + 128;
    memset(b, 0, 208);
    for (int j = 0; j < 16; j++) b[192 + j] = (uint8_t)(int8_t)(d != 0.0f ? nearest(scale[j] / d, -128, 127) : 0);
    for (int e = 0; e < 256; e++) {
        float ds = d * (float)(int8_t)b[192 + e / 16];
        int q = (ds != 0.0f ? nearest(x[e] / ds, -32, 31) : 0) + 32;
        int c = e / 128, w = e % 128;
        ql[64 * c + w % 64] |= (uint8_t)((q & 0xF) << (4 * (w / 64)));
        qh[32 * c + w % 32] |= (uint8_t)((q >> 4) << (2 * (w / 32)));
    }
}

void snug_quant_quantize(snug_qtype t, const float *src, void *dst, int64_t n)
{
    SNUG_ASSERT(snug_qtype_quantizable((uint32_t)t) && n % g_qtypes[t].block == 0);
    uint8_t *b = dst;
    for (int64_t i = 0; i < n; i += g_qtypes[t].block, b += g_qtypes[t].bytes) {
        if (t == SNUG_QTYPE_Q4_K) quantize_q4_q5_k(src + i, b, NULL, b + 16);
        else if (t == SNUG_QTYPE_Q5_K) quantize_q4_q5_k(src + i, b, b + 16, b + 48);
        else if (t == SNUG_QTYPE_Q6_K) quantize_q6_k(src + i, b);
        else quantize_legacy(t, src + i, b);
    }
}
