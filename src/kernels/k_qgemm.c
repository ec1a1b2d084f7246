/*
 * k_qgemm.c: the GEMM of block-format weights (base/quant.h, in the panel
 * layout of linear.h) with more than 4 rows of x, on 8-bit products as
 * snug_qdot_ref's: x quantized to 8 bits as llama.cpp does (qdot.h), w's
 * values as signed bytes, per part of 16 or 32 values an exact integer
 * sum, scaled in float.
 *
 * x goes first into groups of 16 rows (snug_qgemm_pack_x, quantized on
 * AVX2: on AVX-512 no faster, 0.26 against 0.28 ns a value): per chunk of 32
 * values, 8 quads of 64 bytes, each holding 4 values (q + 128, unsigned)
 * of every row of the group as 32-bit words, then the rows' scales and
 * half sums as floats. A register tile holds 8 rows of w (4 on ymm) in
 * float accumulators whose lanes are rows of x, and for each quad
 * multiplies one vector of x's words by one row's word broadcast
 * (vpdpbusd zmm, whose memory operand broadcasts it; vpdpbusd ymm with
 * AVX-VNNI; vpmaddubsw ymm on AVX2). Per part the integer sums are scaled
 * by the part's scale and less its minimum times x's sum over the part;
 * per block (x's scale group) x's d multiplies them in, less what the
 * + 128 of x's bytes added (128 times the block's sum over parts of scale
 * times the sum of q: kk, worked out in the repack).
 *
 * w is unpacked per k slice of a panel into the thread's scratch
 * (qgemm_repack: the values of chunk c and row r as 32 signed bytes; per
 * block and row each part's scale and minimum term, and kk), in vectors
 * for Q5_K, through their chunks for the others. k
 * slices keep x's groups in 1.5 MiB of the core's L2; panels in blocks of
 * 8 keep their rows of y there between slices (the first slice stores y,
 * the others add to it: the same operations whatever the threads).
 *
 * Q4_K, Q6_K, Q8_0, Q5_0 and Q4_0, whose panels are laid out for the GEMM at load
 * (linear.h), go to k_qlanes.c's GEMM instead, with its own x
 * (snug_qlanes_pack_x).
 */
#include "k_impl.h"

#include "cpu.h"

#include "base/dtype.h"
#include "base/quant.h"
#include "linear.h"
#include "qdot.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include "k_quant_unpack.h"

#define T_VNNI_AVX __attribute__((target("avx2,fma,f16c,avxvnni")))
#define T_VNNI_AVX_INL __attribute__((target("avx2,fma,f16c,avxvnni"), always_inline)) static inline


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

size_t snug_qgemm_x_bytes(int64_t n, int64_t k)
{
    return (size_t)((n + SNUG_QGEMM_XROWS - 1) / SNUG_QGEMM_XROWS) * (size_t)(k / 32) * XT_CHUNK;
}

size_t snug_qgemm_panel_bytes(int64_t k) { return (size_t)k * 25 + 256; }

T_Q void snug_qgemm_pack_x(void *xt, const float *x, int64_t n, int64_t k, snug_dtype wdt, int64_t g0, int64_t g1,
                           snug_x8_block *tmp)
{
    const int64_t kb = k / 32;
    if (snug_linear_interleaved(wdt)) {
        snug_qlanes_pack_x(xt, x, n, k, wdt, g0 * SNUG_QGEMM_XROWS, SNUG_MIN(n, g1 * SNUG_QGEMM_XROWS), tmp);
        return;
    }
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *xg = (uint8_t *)xt + (size_t)(g * kb) * XT_CHUNK;
        for (int64_t i = 0; i < SNUG_QGEMM_XROWS; i++) {
            int64_t t = g * SNUG_QGEMM_XROWS + i;
            if (t < n) snug_x8_quantize_avx2(x + t * k, k, wdt, tmp);
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

/* The sums of each 16 bytes of the signed values v (lanes 0, 1: the first
 * chunk of 32 values' halves; as 64-bit lanes of the sad of v + 128). */
T_Q_INL __m256i half_sums(__m256i v)
{
    __m256i s = _mm256_sad_epu8(_mm256_xor_si256(v, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
    /* lanes (0 + 1), (2 + 3) as 32-bit words 0 and 1 */
    __m256i t = _mm256_add_epi64(s, _mm256_srli_si256(s, 8));
    t = _mm256_permutevar8x32_epi32(t, _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
    return _mm256_sub_epi32(t, _mm256_set1_epi32(16 * 128));
}

/* One Q5_K block at bl of row r (slice block b): its 8 chunks'
 * values, the scales and minimums of its 8 parts, and kk. */
T_Q_INL void repack_q5k(const uint8_t *bl, int64_t b, int64_t r, uint8_t *q, float *sc, float *co,
                           float *kk)
{
    const uint8_t *qs = bl + 48;
    __m256i hbits = load256(bl + 16);
    __m256i wsum = _mm256_setzero_si256(); /* the 8 chunks' sums of q */
    for (int pp = 0; pp < 4; pp++) {
        __m256i lo, hi;
        k45_pair(qs, hbits, pp, true, &lo, &hi);
        int64_t c = 8 * b + 2 * pp;
        store256(q + (size_t)(c * SNUG_PANEL + r) * 32, lo);
        store256(q + (size_t)((c + 1) * SNUG_PANEL + r) * 32, hi);
        __m256i s = _mm256_sad_epu8(lo, _mm256_setzero_si256()), t = _mm256_sad_epu8(hi, _mm256_setzero_si256());
        /* (q >= 0: the sad with zero is the sum) each one's total, as words 0 and 1 of every 64 bits */
        __m256i st = _mm256_add_epi64(_mm256_unpacklo_epi64(s, t), _mm256_unpackhi_epi64(s, t)); /* s01 t01 s23 t23 */
        __m128i both = _mm_add_epi64(_mm256_castsi256_si128(st), _mm256_extracti128_si256(st, 1)); /* s t */
        /* into words 2 pp and 2 pp + 1: the pair moved up by a variable permute, the rest kept */
        __m256i two = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_shuffle_epi32(both, 0x08)),
                                                  _mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                                   _mm256_set1_epi32(2 * pp)));
        __m256i mine = _mm256_cmpeq_epi32(_mm256_srli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), 1),
                                          _mm256_set1_epi32(pp));
        wsum = _mm256_blendv_epi8(wsum, two, mine);
    }
    __m128i sm = k_scales_vec(bl + 4);
    __m256 d = _mm256_set1_ps(half_at(bl)), dmin = _mm256_set1_ps(half_at(bl + 2));
    __m256 scv = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm)));
    __m256 cov = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))));
    _mm256_storeu_ps(sc + (b * SNUG_PANEL + r) * 8, scv);
    _mm256_storeu_ps(co + (b * SNUG_PANEL + r) * 8, cov);
    kk[b * SNUG_PANEL + r] = 128.0f * hsum8(_mm256_mul_ps(scv, _mm256_cvtepi32_ps(wsum)));
}

/* Any block (bs values) at bl of row r (slice block b), or zeros (bl NULL),
 * through its chunks: pb parts a block, PART values each. */
T_Q_INL void repack_any(snug_qtype t, const uint8_t *bl, int64_t b, int64_t r, int64_t ncb, int64_t pb,
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

/* How far ahead of the block it unpacks the repack asks for w's bytes (a
 * hint: no access): the panel's blocks stream in order, and without it
 * the loads of w stalled the repack (a quarter of the GEMM's samples at 8
 * rows of x on a Xeon; with it, Q4_K at 8 and 32 rows ran 0.8 of the time,
 * Q8_0 at 8 rows 0.75; 16 KiB did no better). */
enum { QGEMM_PREFETCH = 8192 };

/* Chunks [c0, c1) of panel p of w (c0 and c1 on block boundaries) into the
 * layout of qpanel at tb; rows past a narrow panel's width are zeros. */
T_Q_INL qpanel qgemm_repack(const snug_linear *w, int64_t p, int64_t c0, int64_t c1, uint8_t *tb)
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
            if (bl) _mm_prefetch((const char *)(uintptr_t)((uintptr_t)bl + QGEMM_PREFETCH), _MM_HINT_T0);
            if (bl && t == SNUG_QTYPE_Q5_K) repack_q5k(bl, b, r, q, sc, co, kk);
            else repack_any(t, bl, b, r, ncb, pb, corr, q, sc, co, kk);
        }
    return (qpanel){q, sc, co, kk};
}

/* acc + the dots of x's 16 words (unsigned bytes) with the word at p
 * (signed bytes) broadcast, with vpdpbusd's memory broadcast (the
 * compiler loads it apart: one more instruction to issue a product). */
T_Z_INL __m512i dpbusd_bcast(__m512i acc, __m512i x, const uint8_t *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(x), "m"(*(const int32_t *)(const void *)p));
    return acc;
}

/* QT_NR rows of a repacked panel slice (rows r0.. of qp, nc chunks) against
 * one group of 16 rows of x (xg: its chunk c0), into acc (lanes: rows of
 * x). Per part of PART values: the integer sums (x's bytes carry + 128),
 * times the part's scale, less its minimum times x's sum; per scale group
 * of x (GROUP chunks) less kk, times x's d. */
T_Z_INL void tile_zmm(const qpanel *qp, int64_t r0, const uint8_t *xg, int64_t nc, const int PART,
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
T_Z_INL void store_zmm(float *y, int64_t ldy, int64_t t0, int64_t tv, int64_t o0, int64_t wv,
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
T_Z_INL void panel_slice_zmm(float *y, int64_t ldy, const uint8_t *xt, int64_t n, const snug_linear *w,
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
            tile_zmm(&qp, r0, xg, c1 - c0, PART, GROUP, CORR, acc);
            store_zmm(y, ldy, g * SNUG_QGEMM_XROWS, tv, p * SNUG_PANEL + r0, SNUG_MIN((int64_t)QT_NR, width - r0),
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

/* The parts, scale groups and minimums a format's tile needs (each a
 * constant of the inlined tile), and the call of f(ARGS..., PART, GROUP,
 * CORR) with the constants of shape s. */
typedef enum qshape { QSHAPE_16_CORR, QSHAPE_16, QSHAPE_32_K_CORR, QSHAPE_32_CORR, QSHAPE_32 } qshape;
#define QSHAPE_CALL(s, f, ...)                                                                                  \
    switch (s) {                                                                                                \
    case QSHAPE_16_CORR: f(__VA_ARGS__, 16, 8, true); break;                                                    \
    case QSHAPE_16: f(__VA_ARGS__, 16, 8, false); break;                                                        \
    case QSHAPE_32_K_CORR: f(__VA_ARGS__, 32, 8, true); break;                                                  \
    case QSHAPE_32_CORR: f(__VA_ARGS__, 32, 1, true); break;                                                    \
    default: f(__VA_ARGS__, 32, 1, false); break;                                                               \
    }

static qshape qshape_of(snug_qtype t)
{
    bool s16 = sub16(t), corr = has_corr(t), k256 = x_group_chunks(t) == 8;
    return s16 ? (corr ? QSHAPE_16_CORR : QSHAPE_16) : corr ? (k256 ? QSHAPE_32_K_CORR : QSHAPE_32_CORR) : QSHAPE_32;
}

/* One instruction's slice of one panel (chunks [c0, c1) of panel p against
 * every group of x) for tiles of shape s. */
typedef void (*qslice_fn)(float *y, int64_t ldy, const uint8_t *xt, int64_t n, const snug_linear *w, int64_t p,
                          int64_t c0, int64_t c1, uint8_t *tb, qshape s);

/* Panels [p0, p1) of w against x's groups, every instruction's: blocks of
 * QGEMM_PANEL_BLOCK panels, each through every k slice in turn. */
static void qgemm_run(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0,
                      int64_t p1, void *tb, qslice_fn slice)
{
    const int64_t kb = w->k / 32, sc = qgemm_slice_chunks(n, w->k);
    const qshape s = qshape_of((snug_qtype)snug_dtype_qtype(w->dtype));
    for (int64_t pb = p0; pb < p1; pb += QGEMM_PANEL_BLOCK)
        for (int64_t c0 = 0; c0 < kb; c0 += sc)
            for (int64_t p = pb; p < SNUG_MIN(p1, pb + QGEMM_PANEL_BLOCK); p++)
                slice(y, ldy, xt, n, w, p, c0, SNUG_MIN(kb, c0 + sc), tb, s);
}

/* The zmm tile's qslice_fn and snug_qgemm_fn. */
T_Z static void slice_zmm(float *y, int64_t ldy, const uint8_t *xt, int64_t n, const snug_linear *w, int64_t p,
                          int64_t c0, int64_t c1, uint8_t *tb, qshape s)
{
    QSHAPE_CALL(s, panel_slice_zmm, y, ldy, xt, n, w, p, c0, c1, tb)
}

static void qgemm_zmm(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0, int64_t p1,
                      void *tb)
{
    if (snug_linear_interleaved(w->dtype)) {
        snug_qlanes_gemm_zmm(y, ldy, xt, n, w, p0, p1, tb);
        return;
    }
    qgemm_run(y, ldy, xt, n, w, p0, p1, tb, slice_zmm);
}

/* Rows of w per ymm register tile. */
enum { QY_NR = 4 };

#define QY_NAME(x) x##_maddubs
#define QY_T T_Q
#define QY_INL T_Q_INL
#define QY_VNNI 0
#include "k_qgemm_ymm.h"

#define QY_NAME(x) x##_vnni_avx
#define QY_T T_VNNI_AVX
#define QY_INL T_VNNI_AVX_INL
#define QY_VNNI 1
#include "k_qgemm_ymm.h"

bool snug_qgemm_runs(void)
{
    snug_cpu cpu = snug_cpu_probe();
    return cpu.isa >= SNUG_ISA_AVX512 && cpu.avx512_vnni;
}

int32_t snug_qgemm_kinds(snug_isa isa, snug_qgemm_kind out[SNUG_QGEMM_KINDS])
{
    int32_t n = 0;
    if (isa < SNUG_ISA_AVX2) return 0;
    snug_cpu cpu = snug_cpu_probe();
    out[n++] = (snug_qgemm_kind){qgemm_maddubs, SNUG_INSN_MADDUBS_YMM};
    if (cpu.avx_vnni) out[n++] = (snug_qgemm_kind){qgemm_vnni_avx, SNUG_INSN_DPBUSD_YMM};
    if (isa >= SNUG_ISA_AVX512 && cpu.avx512_vnni) out[n++] = (snug_qgemm_kind){qgemm_zmm, SNUG_INSN_DPBUSD_ZMM};
    return n;
}
#else
size_t snug_qgemm_panel_bytes(int64_t k) { return (size_t)k * 25 + 256; }

size_t snug_qgemm_x_bytes(int64_t n, int64_t k)
{
    return (size_t)((n + SNUG_QGEMM_XROWS - 1) / SNUG_QGEMM_XROWS) * (size_t)(k / 32) * 704;
}

void snug_qgemm_pack_x(void *xt, const float *x, int64_t n, int64_t k, snug_dtype wdt, int64_t g0, int64_t g1,
                       snug_x8_block *tmp)
{
    (void)xt, (void)x, (void)n, (void)k, (void)wdt, (void)g0, (void)g1, (void)tmp;
}


bool snug_qgemm_runs(void) { return false; }

int32_t snug_qgemm_kinds(snug_isa isa, snug_qgemm_kind out[SNUG_QGEMM_KINDS])
{
    (void)isa, (void)out;
    return 0;
}
#endif
