/*
 * k_qlanes.c: the block formats whose panels lay their rows across a
 * vector's lanes (Q4_K, Q6_K, Q8_0, Q5_0 and Q4_0, linear.h's interleaved
 * layouts) times x
 * quantized to 8 bits (qdot.h), for any number of rows of x: their
 * matrix-vector products (n <= 4) and their 8-bit GEMM, on vpdpbusd zmm,
 * vpdpbusd ymm (AVX-VNNI, or AVX-512 VNNI with VL) and vpmaddubsw ymm.
 * The arithmetic is snug_qdot_ref's: per sub-block an exact integer sum,
 * scaled in float.
 *
 * A panel's 16 rows are a vector's lanes: one 64-byte line of a block
 * holds one 4-byte word of every row's values, which meets x's 4 values
 * broadcast, one product per row of x, the line read once for every row
 * of x: nothing is unpacked per call beyond masks and shifts.
 *   Q4_K: word s holds values 4 (s % 8) .. + 3 of sub-block 2 (s / 8) in
 *   its low nibbles, of sub-block 2 (s / 8) + 1 in its high. The low
 *   nibbles (v & 15) meet the first's x, the high ones left in place
 *   (v & 240: 16 times the value, a sixteenth in the scale) the second's
 *   (on vpmaddubsw, whose 16-bit sums would saturate, shifted down). Per
 *   sub-block of 32 the sums are scaled by d sc less dmin mn times x's sum
 *   over it (q4k_scales works the six-bit fields out for 16 rows at once,
 *   from 12 planes of 16 bytes, one per scale byte).
 *   Q6_K: a word of ql (low nibbles one block of 32, high another) and one
 *   of qh (two bits for each of four) make two vectors of values as stored
 *   (q + 32, 0..63) with a shift, a mask and a select each; per sub-block
 *   of 16 the sums are scaled by d sc, and the + 32 is taken away once a
 *   block: 32 d times the scales times x's sums of 16 (sum16), by 16-bit
 *   dot products (vpdpwssd, or vpmaddwd).
 *   Q8_0: a line's signed values made unsigned by flipping the sign bit
 *   (+ 128), whose part, 128 d_x times x's sum over the block, comes off
 *   in float (q80_xc); per block of 32 x's d and the rows' d (on
 *   vpmaddubsw, whose pair sums of 255 x 127 would saturate, |w| meets x
 *   with w's sign instead).
 *   Q5_0, Q4_0: a line's low and high nibbles (Q5_0's with their fifth
 *   bits from qh through a table, Q50_SPREAD) are the stored values, q +
 *   16 or q + 8, whose part comes off as Q8_0's 128 does.
 * The integer sums are exact (at most 8 products of 240, 63 or 255 by 127
 * a lane, 4 a product). Per block of 256 (of 32 for Q8_0) x's d multiplies
 * them in.
 *
 * The GEMM (x from snug_qlanes_pack_x: its x8 blocks in tiles of 8 rows,
 * then each 32 values' sum as a float, for Q8_0 times 128 d) takes its thread's panels for one
 * block of x's rows at a time (as many as stay in 1 MiB of L2), each
 * panel's scales worked out once for the block (on vpmaddubsw, and for
 * a block of more than 2 tiles, Q6_K's values too, q6k_unpack_ymm: in its
 * tiles they took 8 of a line's 33 instructions; the measurements beside
 * the call in snug_qlanes_gemm), then register
 * tiles of QZ_NX (zmm) or QY_NX (ymm) rows of x over every block of k, their sums
 * for y in the thread's scratch between blocks. Every pass over a panel
 * that reads it from memory asks for the panel QL_AHEAD further on. A
 * narrow last panel goes through a copy widened to 16 rows
 * (snug_linear_group_widen).
 */
#include "k_impl.h"

#include "base/dtype.h"
#include "linear.h"
#include "qdot.h"

#include <stddef.h>
#include <string.h>

enum {
    Q4K_GROUP = 16 * 144, /* bytes of a full panel's block index */
    Q6K_GROUP = 16 * 210,
    Q4K_VALUES = 256,     /* where a Q4_K group's lines of values start */
    Q6K_HIGH = 2048,      /* where a Q6_K group's lines of high bits (qh) start */
    Q6K_SCALES = 3072,    /* its scale bytes' planes, and its d */
    Q6K_D = 3328,
    Q80_GROUP = 16 * 34,  /* bytes of a full panel's Q8_0 block index: 16 d, then 8 lines of values */
    Q80_VALUES = 32,
    Q50_GROUP = 16 * 22,  /* Q5_0's: 16 d, a line of the 16 rows' qh, then 4 lines of nibbles */
    Q50_HIGH = 32,
    Q50_VALUES = 96,
    Q40_GROUP = 16 * 18,  /* Q4_0's: 16 d, then 4 lines of nibbles */
    Q40_VALUES = 32,
    QL_SCL = 512,         /* floats of a block's worked-out scales (q4k_scales, q6k_scales) */
    Q6K_UNPACKED = 4096,  /* bytes of a Q6_K group's values unpacked, a byte each (q6k_unpack_ymm) */
    QL_XT = 8            /* rows of x in a tile of the GEMM's x, and the most a register tile takes */
};

/* Bytes of a full panel's block index of dt (Q4_K, Q6_K, Q8_0, Q5_0 or Q4_0). */
static size_t ql_group_bytes(snug_dtype dt)
{
    return dt == SNUG_DTYPE_Q6_K   ? Q6K_GROUP
           : dt == SNUG_DTYPE_Q8_0 ? Q80_GROUP
           : dt == SNUG_DTYPE_Q5_0 ? Q50_GROUP
           : dt == SNUG_DTYPE_Q4_0 ? Q40_GROUP
                                   : Q4K_GROUP;
}

/* Whether dt is one of the interleaved formats of blocks of 32 (Q8_0,
 * Q5_0, Q4_0), one scale and no sub-blocks, whose values are stored
 * unsigned with an offset (Q8_0's made so, ql_offset). */
static inline bool ql_b32(snug_dtype dt)
{
    return dt == SNUG_DTYPE_Q8_0 || dt == SNUG_DTYPE_Q5_0 || dt == SNUG_DTYPE_Q4_0;
}

/* The offset of dt's unsigned values (ql_b32): 128 (Q8_0's flipped sign
 * bit), 16 (Q5_0's stored q + 16), 8 (Q4_0's q + 8). */
static inline float ql_offset(snug_dtype dt)
{
    return dt == SNUG_DTYPE_Q8_0 ? 128.0f : dt == SNUG_DTYPE_Q5_0 ? 16.0f : 8.0f;
}

/* Rows of the GEMM's x: n in whole tiles of QL_XT. */
static int64_t ql_x_rows(int64_t n) { return (n + QL_XT - 1) / QL_XT * QL_XT; }

enum { QL_ACC = 16 * 16 * sizeof(float) }; /* a tile's sums' bytes, before the scales in the scratch */

size_t snug_qlanes_x_bytes(int64_t n, int64_t k)
{
    return (size_t)ql_x_rows(n) * (size_t)(k / 32) * (sizeof(snug_x8_block) + sizeof(float));
}

/* The thread's scratch of the GEMM (tb): a tile's sums (QL_ACC), then per
 * block of 256 its scales (QL_SCL floats), a narrow panel's groups widened
 * (ql_panel_prep), and Q6_K's values unpacked (ql_unpacked_at); the
 * formats of blocks of 32 use only the widened groups, from the scales'
 * place. */
size_t snug_qlanes_scratch_bytes(int64_t k)
{
    return QL_ACC + SNUG_MAX((size_t)(k / 256) * (QL_SCL * sizeof(float) + Q6K_GROUP + Q6K_UNPACKED),
                             (size_t)(k / 32) * Q80_GROUP);
}

/* Where the scratch tb of rows of k (snug_qlanes_scratch_bytes) holds
 * Q6_K's unpacked values (q6k_unpack_ymm). */
static inline uint8_t *ql_unpacked_at(void *tb, int64_t k)
{
    return (uint8_t *)tb + QL_ACC + (size_t)(k / 256) * (QL_SCL * sizeof(float) + Q6K_GROUP);
}

#if defined(__x86_64__) || defined(__i386__)
#include "k_quant_unpack.h"

#define T_VNNI_AVX __attribute__((target("avx2,fma,f16c,avxvnni")))
#define T_VNNI_AVX_INL __attribute__((target("avx2,fma,f16c,avxvnni"), always_inline)) static inline
#define T_VNNI_512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))
#define T_VNNI_512_INL                                                                               \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni"), always_inline)) static inline

/* The six-bit sc and mn of a full-width Q4_K group's 8 sub-blocks (base/
 * quant.c's fields), 16 rows at a time, from its 12 planes of scale bytes. */
T_Q_INL void q4k_fields(const uint8_t *g, __m128i sc[8], __m128i mn[8])
{
    __m128i pl[12];
    for (int i = 0; i < 12; i++) pl[i] = _mm_loadu_si128((const __m128i *)(const void *)(g + 64 + 16 * i));
    const __m128i m63 = _mm_set1_epi8(63), m15 = _mm_set1_epi8(15), top2 = _mm_set1_epi8((char)0xC0);
    for (int j = 0; j < 4; j++) {
        sc[j] = _mm_and_si128(pl[j], m63);
        mn[j] = _mm_and_si128(pl[j + 4], m63);
        sc[j + 4] = _mm_or_si128(_mm_and_si128(pl[j + 8], m15), _mm_srli_epi16(_mm_and_si128(pl[j], top2), 2));
        mn[j + 4] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(pl[j + 8], 4), m15),
                                 _mm_srli_epi16(_mm_and_si128(pl[j + 4], top2), 2));
    }
}

/* The d sc and dmin mn of a full-width group's 8 sub-blocks for its 16
 * rows into scl (sub-block j's d sc at 16 j, its dmin mn at 128 + 16 j;
 * the odd sub-blocks' d sc a sixteenth: their values are multiplied in
 * unshifted). */
T_Q_INL void q4k_scales(const uint8_t *g, float *scl)
{
    __m128i sc[8], mn[8];
    q4k_fields(g, sc, mn);
    for (int h = 0; h < 2; h++) {
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + 16 * h)));
        __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + 32 + 16 * h)));
        for (int j = 0; j < 8; j++) {
            __m128i s = h ? _mm_srli_si128(sc[j], 8) : sc[j], m = h ? _mm_srli_si128(mn[j], 8) : mn[j];
            __m256 f = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(s)));
            if (j % 2) f = _mm256_mul_ps(f, _mm256_set1_ps(1.0f / 16.0f));
            _mm256_storeu_ps(scl + 16 * j + 8 * h, f);
            _mm256_storeu_ps(scl + 128 + 16 * j + 8 * h, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m))));
        }
    }
}

/* Q4_K's scales for vpmaddubsw, applied in integers: at byte 64 j + 4 r
 * row r's sc of sub-block j twice as 16 bits (vpmaddwd's multiplier, so
 * that widening the 16-bit sums scales them for free; each byte paired
 * with itself and widened, two instructions for 8 rows); at 512 + 64 c + 4 r
 * its mn of sub-blocks 2c and 2c + 1 as 16 bits; at 768 its d, at 832 its
 * dmin (floats). */
T_Q_INL void q4k_scales_int(const uint8_t *g, uint8_t *sci)
{
    __m128i sc[8], mn[8];
    q4k_fields(g, sc, mn);
    for (int j = 0; j < 8; j++) {
        _mm256_storeu_si256((__m256i *)(void *)(sci + 64 * j), _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc[j], sc[j])));
        _mm256_storeu_si256((__m256i *)(void *)(sci + 64 * j + 32), _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sc[j], sc[j])));
    }
    for (int c = 0; c < 4; c++) {
        __m128i lo = _mm_unpacklo_epi8(mn[2 * c], mn[2 * c + 1]), hi = _mm_unpackhi_epi8(mn[2 * c], mn[2 * c + 1]);
        _mm256_storeu_si256((__m256i *)(void *)(sci + 512 + 64 * c), _mm256_cvtepu8_epi16(lo));
        _mm256_storeu_si256((__m256i *)(void *)(sci + 512 + 64 * c + 32), _mm256_cvtepu8_epi16(hi));
    }
    for (int h = 0; h < 2; h++) {
        _mm256_storeu_ps((float *)(void *)(sci + 768 + 32 * h),
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + 16 * h))));
        _mm256_storeu_ps((float *)(void *)(sci + 832 + 32 * h),
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + 32 + 16 * h))));
    }
}

/* A full-width Q6_K group's 16 planes of scale bytes, and each row's sc
 * of sub-blocks 2c and 2c + 1 as two 16-bit integers at pairs + 64 c (the
 * + 32's part: q6k_plus32_*). */
T_Q_INL void q6k_planes(const uint8_t *g, __m128i pl[16], uint8_t *pairs)
{
    for (int i = 0; i < 16; i++) pl[i] = _mm_loadu_si128((const __m128i *)(const void *)(g + Q6K_SCALES + 16 * i));
    for (int c = 0; c < 8; c++) {
        __m128i lo = _mm_unpacklo_epi8(pl[2 * c], pl[2 * c + 1]), hi = _mm_unpackhi_epi8(pl[2 * c], pl[2 * c + 1]);
        _mm256_storeu_si256((__m256i *)(void *)(pairs + 64 * c), _mm256_cvtepi8_epi16(lo));
        _mm256_storeu_si256((__m256i *)(void *)(pairs + 64 * c + 32), _mm256_cvtepi8_epi16(hi));
    }
}

/* Q6_K's scales for vpmaddubsw, applied in integers: at byte 64 i + 4 r
 * row r's sc of sub-block i twice as 16 bits (vpmaddwd's multiplier,
 * made as q4k_scales_int makes its own but sign-extended: Q6_K's sc are
 * signed); at 1024 q6k_planes' pairs; at 1536 its d (floats). */
T_Q_INL void q6k_scales_int(const uint8_t *g, uint8_t *sci)
{
    __m128i pl[16];
    q6k_planes(g, pl, sci + 1024);
    for (int i = 0; i < 16; i++) {
        _mm256_storeu_si256((__m256i *)(void *)(sci + 64 * i), _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(pl[i], pl[i])));
        _mm256_storeu_si256((__m256i *)(void *)(sci + 64 * i + 32), _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(pl[i], pl[i])));
    }
    for (int h = 0; h < 2; h++)
        _mm256_storeu_ps((float *)(void *)(sci + 1536 + 32 * h),
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + Q6K_D + 16 * h))));
}

/* A full-width Q6_K group's scales for its 16 rows into scl: d sc of
 * sub-block i (of 16 values) at 16 i; at 256 (bytes 1024) q6k_planes'
 * pairs; at 384 -32 d (the values are multiplied in as stored, q + 32). */
T_Q_INL void q6k_scales(const uint8_t *g, float *scl)
{
    __m128i pl[16];
    q6k_planes(g, pl, (uint8_t *)(void *)(scl + 256));
    for (int h = 0; h < 2; h++) {
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + Q6K_D + 16 * h)));
        for (int i = 0; i < 16; i++) {
            __m128i s8 = h ? _mm_srli_si128(pl[i], 8) : pl[i];
            _mm256_storeu_ps(scl + 16 * i + 8 * h, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8))));
        }
        _mm256_storeu_ps(scl + 384 + 8 * h, _mm256_mul_ps(d, _mm256_set1_ps(-32.0f)));
    }
}

/* Block g's scales of dt (Q4_K or Q6_K) into scl: in integers for
 * vpmaddubsw (ints: q4k_scales_int, q6k_scales_int), else as floats. */
T_Q_INL void ql_scales(snug_dtype dt, const uint8_t *g, bool ints, float *scl)
{
    if (dt == SNUG_DTYPE_Q6_K && ints) q6k_scales_int(g, (uint8_t *)(void *)scl);
    else if (dt == SNUG_DTYPE_Q6_K) q6k_scales(g, scl);
    else if (ints) q4k_scales_int(g, (uint8_t *)(void *)scl);
    else q4k_scales(g, scl);
}

/* Block b of panel p as a full-width group: in place, or (a narrow panel)
 * widened into pad. */
static const uint8_t *ql_group(const snug_linear *w, int64_t p, int64_t b, uint8_t *pad)
{
    const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const uint8_t *g = (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, w->k, p) +
                       (size_t)b * (size_t)width * (ql_group_bytes(w->dtype) / SNUG_PANEL);
    if (width == SNUG_PANEL) return g;
    snug_linear_group_widen(w->dtype, g, width, pad);
    return pad;
}

/* Panels ahead of the one it reads that a pass asks for (into L2). Not
 * measured against other distances: the runs that compared 1, 2 and 4
 * were taken while GCC had dropped the prefetches (ql_fetch). */
enum { QL_AHEAD = 2 };

/* The first group of panel p + QL_AHEAD (NULL past the matrix's full
 * panels): where what a pass over panel p asks for starts (ql_ahead_at). */
static const uint8_t *ql_next(const snug_linear *w, int64_t p)
{
    if ((p + QL_AHEAD + 1) * SNUG_PANEL > w->m) return NULL;
    return (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, w->k, p + QL_AHEAD);
}

/* Panel p of w as a pass over its blocks reads it: its first group in
 * place (NULL for a narrow panel, whose groups ql_group widens one at a
 * time) and ql_next's first (NULL past the full panels), found once, so that
 * the pass steps by the group's bytes instead of computing every block's
 * offset (under perf, those calls were 3% of a Q4_K_M decode). */
typedef struct ql_panel {
    const uint8_t *base, *next;
} ql_panel;

static inline ql_panel ql_panel_at(const snug_linear *w, int64_t p)
{
    bool full = w->m - p * SNUG_PANEL >= SNUG_PANEL;
    return (ql_panel){full ? (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, w->k, p) : NULL,
                      ql_next(w, p)};
}

/* Block b's group of panel pn (p of w; gb its bytes), as ql_group. */
static inline const uint8_t *ql_block(const ql_panel *pn, const snug_linear *w, int64_t p, int64_t b, size_t gb,
                                      uint8_t *pad)
{
    return pn->base ? pn->base + (size_t)b * gb : ql_group(w, p, b, pad);
}

/* Block b's group from a, the first group of a panel QL_AHEAD on (gb its
 * bytes; NULL for none). */
static inline const uint8_t *ql_ahead_at(const uint8_t *a, int64_t b, size_t gb)
{
    return a ? a + (size_t)b * gb : NULL;
}

/* Block b's group QL_AHEAD panels on (NULL past the full panels). */
static inline const uint8_t *ql_block_next(const ql_panel *pn, int64_t b, size_t gb)
{
    return ql_ahead_at(pn->next, b, gb);
}

/* Each 32 values' sum of NX rows of x at block b (x8 rows kb blocks
 * apart) as floats: the matrix-vector paths' (the GEMM's come packed). */
static void q4k_x_sums(const snug_x8_block *x8, int64_t kb, int64_t b, int nx, float xs[][8])
{
    for (int t = 0; t < nx; t++)
        for (int c = 0; c < 8; c++) {
            const snug_x8_block *xb = &x8[t * kb + 8 * b + c];
            xs[t][c] = (float)(xb->sum16[0] + xb->sum16[1]);
        }
}

/* acc + the dots of the unsigned bytes u with x's 4 signed bytes at p
 * broadcast (vpdpbusd's memory broadcast: no instruction to load it). */
T_Z_INL __m512i ql_dot_zmm(__m512i acc, __m512i u, const int8_t *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)(const void *)p));
    return acc;
}

/* Where a block's x lies for a register tile: row t's 8 blocks of 32 at
 * q + t rs + c cs (bytes; c the block of 32), their sums as floats at
 * s + t srs + c scs. */
typedef struct ql_xs {
    const uint8_t *q;
    size_t rs, cs;
    const float *s;
    size_t srs, scs;
} ql_xs;

/* x's q values of row t, block of 32 c, from value 4 j (x at one block). */
static inline const int8_t *ql_xq(const ql_xs *x, int t, int c, int j)
{
    return (const int8_t *)(const void *)(x->q + (size_t)t * x->rs + (size_t)c * x->cs +
                                          offsetof(snug_x8_block, q)) + 4 * j;
}

static inline float ql_xsum(const ql_xs *x, int t, int c) { return x->s[(size_t)t * x->srs + (size_t)c * x->scs]; }

static inline float ql_xd(const ql_xs *x, int t)
{
    float d;
    memcpy(&d, x->q + (size_t)t * x->rs + offsetof(snug_x8_block, d), sizeof d);
    return d;
}

/* What a pass over a block asks for meanwhile, a line at a time: far, a
 * group QL_AHEAD panels on (into L2: a pass over a panel asks for a later
 * panel's groups as it goes, ql_next, so that its pass finds them there),
 * and near, the next group (into L1: without it one row of x ran the
 * matrix-vector product 25% slower than the layout before, on ymm);
 * either NULL for none. */
typedef struct ql_pf {
    const uint8_t *far, *near;
} ql_pf;

/* The hints for line i of pf's groups. */
T_Q_INL void ql_fetch(const ql_pf *pf, int i)
{
    /* (with a target of its own: GCC 12 drops the prefetches of a function
     * without one that it inlines into one with) */
    if (pf->far) __builtin_prefetch(pf->far + 64 * (size_t)i, 0, 2);
    if (pf->near) __builtin_prefetch(pf->near + 64 * (size_t)i, 0, 3);
}

/* Chains of integer sums per row of x in a register tile of nx rows:
 * with few rows, lines go to 2 or 4 chains in turn (folded after), so that
 * a product does not wait on the one before (vpdpbusd's latency is 5
 * cycles: one row of x on one chain ran the matrix-vector product 15%
 * slower than the layout before). */
static inline int ql_chains(int nx) { return nx <= 2 ? 4 : nx <= 4 ? 2 : 1; }

/* Where line j's sum of row t of x goes among the chains. */
static inline int ql_at(int j, int nx, int t) { return (j % ql_chains(nx)) * nx + t; }

/* The chains of il and ih (sub-blocks' integer sums of NX rows of x)
 * added into their first. */
T_Z_INL void ql_fold_zmm(__m512i il[], __m512i ih[], const int NX)
{
#pragma GCC unroll 8
    for (int i = NX; i < ql_chains(NX) * NX; i++) {
        il[i % NX] = _mm512_add_epi32(il[i % NX], il[i]);
        ih[i % NX] = _mm512_add_epi32(ih[i % NX], ih[i]);
    }
}

/* ql_fold_zmm on ymm. */
T_Q_INL void ql_fold_ymm(__m256i il[], __m256i ih[], const int NX)
{
#pragma GCC unroll 8
    for (int i = NX; i < ql_chains(NX) * NX; i++) {
        il[i % NX] = _mm256_add_epi32(il[i % NX], il[i]);
        ih[i % NX] = _mm256_add_epi32(ih[i % NX], ih[i]);
    }
}

/* A block's sums blk of NX rows of x (at x) times x's d into acc[t], or
 * (accm non-NULL) into NX rows of 16 floats at accm. */
T_Z_INL void ql_finish_zmm(const __m512 blk[], const ql_xs *x, const int NX, __m512 acc[], float *accm)
{
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        if (accm)
            _mm512_storeu_ps(accm + 16 * t, _mm512_fmadd_ps(blk[t], _mm512_set1_ps(ql_xd(x, t)),
                                                            _mm512_loadu_ps(accm + 16 * t)));
        else acc[t] = _mm512_fmadd_ps(blk[t], _mm512_set1_ps(ql_xd(x, t)), acc[t]);
    }
}

/* One block (its full-width group g, scales scl) against NX rows of x (at
 * x) into acc[t] (lanes: the 16 rows of the panel): acc in registers, or
 * (accm non-NULL) NX rows of 16 floats at accm; meanwhile the group at pf
 * asked for (ql_fetch). */
T_Z_INL void q4k_block_zmm(const uint8_t *g, const float *scl, const ql_xs *x, const int NX, __m512 acc[],
                           float *accm, ql_pf pf)
{
    for (int i = 0; i < 4; i++) ql_fetch(&pf, i);
    const __m512i lo = _mm512_set1_epi8(15), hi = _mm512_set1_epi8((char)0xF0);
    __m512 blk[QL_XT];
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) blk[t] = _mm512_setzero_ps();
#pragma GCC unroll 1
    for (int c = 0; c < 4; c++) { /* blocks of 32 2c (low nibbles) and 2c + 1 (high) */
        __m512i il[QL_XT], ih[QL_XT];
#pragma GCC unroll 8
        for (int t = 0; t < ql_chains(NX) * NX; t++) il[t] = ih[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m512i v = _mm512_loadu_si512((const void *)(g + Q4K_VALUES + 64 * (8 * c + j)));
            ql_fetch(&pf, 4 + 8 * c + j);
            __m512i vl = _mm512_and_si512(v, lo), vh = _mm512_and_si512(v, hi);
#pragma GCC unroll 8
            for (int t = 0; t < NX; t++) {
                il[ql_at(j, NX, t)] = ql_dot_zmm(il[ql_at(j, NX, t)], vl, ql_xq(x, t, 2 * c, j));
                ih[ql_at(j, NX, t)] = ql_dot_zmm(ih[ql_at(j, NX, t)], vh, ql_xq(x, t, 2 * c + 1, j));
            }
        }
        ql_fold_zmm(il, ih, NX);
        const __m512 s0 = _mm512_loadu_ps(scl + 32 * c), s1 = _mm512_loadu_ps(scl + 32 * c + 16);
        const __m512 m0 = _mm512_loadu_ps(scl + 128 + 32 * c), m1 = _mm512_loadu_ps(scl + 128 + 32 * c + 16);
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) {
            blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(il[t]), s0, blk[t]);
            blk[t] = _mm512_fnmadd_ps(m0, _mm512_set1_ps(ql_xsum(x, t, 2 * c)), blk[t]);
            blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ih[t]), s1, blk[t]);
            blk[t] = _mm512_fnmadd_ps(m1, _mm512_set1_ps(ql_xsum(x, t, 2 * c + 1)), blk[t]);
        }
    }
    ql_finish_zmm(blk, x, NX, acc, accm);
}

/* Q6_K's values of blocks of 32 4h + m (lo) and 4h + 2 + m (hi) at the
 * word from value 4 j (j < 8) of its 16 rows, as stored (q + 32, 0..63):
 * the low and high nibbles of ql word 16 h + 8 m + j, and two bits each of
 * qh word 8 h + j. */
T_Z_INL void q6k_values_zmm(const uint8_t *g, int h, int m, int j, __m512i *lo, __m512i *hi)
{
    const __m512i low4 = _mm512_set1_epi8(15), bits45 = _mm512_set1_epi8(0x30);
    __m512i q = _mm512_loadu_si512((const void *)(g + 64 * (16 * h + 8 * m + j)));
    __m512i qh = _mm512_loadu_si512((const void *)(g + Q6K_HIGH + 64 * (8 * h + j)));
    /* (the shifts cross bytes: the bits they move in are masked away) */
    __m512i h_lo = _mm512_and_si512(m ? _mm512_slli_epi16(qh, 2) : _mm512_slli_epi16(qh, 4), bits45);
    __m512i h_hi = _mm512_and_si512(m ? _mm512_srli_epi16(qh, 2) : qh, bits45);
    *lo = _mm512_ternarylogic_epi32(q, h_lo, low4, 0xE4);                        /* low4 ? q : h_lo */
    *hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(q, 4), h_hi, low4, 0xE4); /* low4 ? q >> 4 : h_hi */
}

/* Q6_K's q4k_block_zmm: x's sums of 16 (sum16, as 16-bit pairs) times the
 * rows' scales (vpdpwssd) take the + 32 of the values away first; then per
 * half of the block, per sub-block of 16, the values of two blocks of 32 at
 * a time (q6k_values_zmm). */
T_Z_INL void q6k_block_zmm(const uint8_t *g, const float *scl, const ql_xs *x, const int NX, __m512 acc[],
                           float *accm, ql_pf pf)
{
    for (int i = 0; i < 5; i++) ql_fetch(&pf, 48 + i);
    __m512 blk[QL_XT];
    const __m512 m32d = _mm512_loadu_ps(scl + 384);
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        __m512i c = _mm512_setzero_si512();
        for (int b = 0; b < 8; b++) {
            int32_t pair;
            memcpy(&pair, ql_xq(x, t, b, 0) - offsetof(snug_x8_block, q) + offsetof(snug_x8_block, sum16), 4);
            c = _mm512_dpwssd_epi32(c, _mm512_loadu_si512((const void *)(scl + 256 + 16 * b)), _mm512_set1_epi32(pair));
        }
        blk[t] = _mm512_mul_ps(_mm512_cvtepi32_ps(c), m32d);
    }
#pragma GCC unroll 1
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 1
        for (int sb = 0; sb < 2; sb++)
#pragma GCC unroll 2
            for (int m = 0; m < 2; m++) { /* blocks of 32 4h + m and 4h + 2 + m, their sub-block sb */
                __m512i il[QL_XT], ih[QL_XT];
#pragma GCC unroll 8
                for (int t = 0; t < ql_chains(NX) * NX; t++) il[t] = ih[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int j = 4 * sb; j < 4 * sb + 4; j++) {
                    __m512i vl, vh;
                    q6k_values_zmm(g, h, m, j, &vl, &vh);
                    ql_fetch(&pf, 4 * (4 * h + 2 * sb + m) + j - 4 * sb);
                    if (m == 0) ql_fetch(&pf, Q6K_HIGH / 64 + 8 * h + j);
#pragma GCC unroll 8
                    for (int t = 0; t < NX; t++) {
                        il[ql_at(j, NX, t)] = ql_dot_zmm(il[ql_at(j, NX, t)], vl, ql_xq(x, t, 4 * h + m, j));
                        ih[ql_at(j, NX, t)] = ql_dot_zmm(ih[ql_at(j, NX, t)], vh, ql_xq(x, t, 4 * h + 2 + m, j));
                    }
                }
                ql_fold_zmm(il, ih, NX);
                const __m512 s0 = _mm512_loadu_ps(scl + 16 * (2 * (4 * h + m) + sb));
                const __m512 s1 = _mm512_loadu_ps(scl + 16 * (2 * (4 * h + 2 + m) + sb));
#pragma GCC unroll 8
                for (int t = 0; t < NX; t++) {
                    blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(il[t]), s0, blk[t]);
                    blk[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ih[t]), s1, blk[t]);
                }
            }
    ql_finish_zmm(blk, x, NX, acc, accm);
}

/* The correction of row t of x (x at one block of 32) for weights whose
 * values are stored off + q (ql_offset): off d times the sum of x's q; the
 * GEMM's come packed (snug_qlanes_pack_x), the matrix-vector paths' are
 * worked out (x->s NULL). */
static inline float ql_xc(const ql_xs *x, int t, float off)
{
    if (x->s) return ql_xsum(x, t, 0);
    const snug_x8_block *b = (const snug_x8_block *)(const void *)(x->q + (size_t)t * x->rs);
    return off * b->d * (float)(b->sum16[0] + b->sum16[1]);
}

/* The chains of il (ql_chains) added into their first. */
T_Z_INL void q80_fold_zmm(__m512i il[], const int NX)
{
#pragma GCC unroll 8
    for (int i = NX; i < ql_chains(NX) * NX; i++) il[i % NX] = _mm512_add_epi32(il[i % NX], il[i]);
}

/* One Q8_0 block (its full-width group g) against NX rows of x (at x)
 * into acc[t] (lanes: the 16 rows of the panel); meanwhile the group at
 * pf asked for. The values, made unsigned by + 128 (the sign bit
 * flipped), meet x's; per row of x, d_x times the sum less x's correction
 * (ql_xc), times the rows' d. */
T_Z_INL void q80_block_zmm(const uint8_t *g, const ql_xs *x, const int NX, __m512 acc[], ql_pf pf)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)g));
    __m512i il[QL_XT];
#pragma GCC unroll 8
    for (int t = 0; t < ql_chains(NX) * NX; t++) il[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        __m512i v = _mm512_xor_si512(_mm512_loadu_si512((const void *)(g + Q80_VALUES + 64 * j)), flip);
        ql_fetch(&pf, j);
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) il[ql_at(j, NX, t)] = ql_dot_zmm(il[ql_at(j, NX, t)], v, ql_xq(x, t, 0, j));
    }
    ql_fetch(&pf, 8);
    q80_fold_zmm(il, NX);
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        __m512 s = _mm512_fmsub_ps(_mm512_cvtepi32_ps(il[t]), _mm512_set1_ps(ql_xd(x, t)), _mm512_set1_ps(ql_xc(x, t, 128.0f)));
        acc[t] = _mm512_fmadd_ps(s, dw, acc[t]);
    }
}

/* The fifth bits of Q5_0: for each 4-bit n, the word whose byte b holds
 * bit b of n at its bit 4 (a vector's lanes index it by their qh shifted). */
static const int32_t Q50_SPREAD[16] = {0x00000000, 0x00000010, 0x00001000, 0x00001010, 0x00100000, 0x00100010,
                                       0x00101000, 0x00101010, 0x10000000, 0x10000010, 0x10001000, 0x10001010,
                                       0x10100000, 0x10100010, 0x10101000, 0x10101010};

/* One Q5_0 block (FIVE) or Q4_0 block (its full-width group g) against NX
 * rows of x (at x) into acc[t]: line s's low nibbles (values 4 s ..) and
 * high ones (16 + 4 s ..), for Q5_0 each with its fifth bits from the rows'
 * qh (Q50_SPREAD, by vpermd), are the values as stored (q + 16, 0..31, or
 * q + 8, 0..15) and meet x's; per row of x, d_x times the sum less the
 * offset times d_x times x's sum (ql_xc), times the rows' d. */
T_Z_INL void qnib_block_zmm(const uint8_t *g, const ql_xs *x, const int NX, __m512 acc[], ql_pf pf, const bool FIVE)
{
    const __m512i lo4 = _mm512_set1_epi8(15), spread = _mm512_loadu_si512((const void *)Q50_SPREAD);
    const __m512i qh = FIVE ? _mm512_loadu_si512((const void *)(g + Q50_HIGH)) : _mm512_setzero_si512();
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)g));
    __m512i il[QL_XT], ih[QL_XT];
#pragma GCC unroll 8
    for (int t = 0; t < ql_chains(NX) * NX; t++) il[t] = ih[t] = _mm512_setzero_si512();
    ql_fetch(&pf, 0), ql_fetch(&pf, 1);
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        __m512i v = _mm512_loadu_si512((const void *)(g + (FIVE ? Q50_VALUES : Q40_VALUES) + 64 * s));
        __m512i vl = _mm512_and_si512(v, lo4), vh = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
        if (FIVE) {
            vl = _mm512_or_si512(vl, _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 4 * s), spread));
            vh = _mm512_or_si512(vh, _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 16 + 4 * s), spread));
        }
        ql_fetch(&pf, 2 + s);
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) {
            il[ql_at(s, NX, t)] = ql_dot_zmm(il[ql_at(s, NX, t)], vl, ql_xq(x, t, 0, s));
            ih[ql_at(s, NX, t)] = ql_dot_zmm(ih[ql_at(s, NX, t)], vh, ql_xq(x, t, 0, 4 + s));
        }
    }
    ql_fold_zmm(il, ih, NX);
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        __m512 s = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(il[t], ih[t])), _mm512_set1_ps(ql_xd(x, t)),
                                   _mm512_set1_ps(ql_xc(x, t, FIVE ? 16.0f : 8.0f)));
        acc[t] = _mm512_fmadd_ps(s, dw, acc[t]);
    }
}

/* Two Q8_0 blocks (the full-width groups at g, one after the other)
 * against NX rows of x (at x0 and x1) into NX rows of 16 floats at accm:
 * q80_block_zmm's arithmetic with two blocks' independent sums (the GEMM's
 * tiles: 8 rows of x on one block's 8 chains left vpdpbusd waiting, and
 * their sums spilled); meanwhile the two groups at pf asked for. */
T_Z_INL void q80_pair_zmm(const uint8_t *g, const ql_xs *x0, const ql_xs *x1, const int NX, float *accm, ql_pf pf)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i il[QL_XT], ih[QL_XT];
#pragma GCC unroll 8
    for (int t = 0; t < ql_chains(NX) * NX; t++) il[t] = ih[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        __m512i vl = _mm512_xor_si512(_mm512_loadu_si512((const void *)(g + Q80_VALUES + 64 * j)), flip);
        __m512i vh = _mm512_xor_si512(_mm512_loadu_si512((const void *)(g + Q80_GROUP + Q80_VALUES + 64 * j)), flip);
        ql_fetch(&pf, 2 * j), ql_fetch(&pf, 2 * j + 1);
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) {
            il[ql_at(j, NX, t)] = ql_dot_zmm(il[ql_at(j, NX, t)], vl, ql_xq(x0, t, 0, j));
            ih[ql_at(j, NX, t)] = ql_dot_zmm(ih[ql_at(j, NX, t)], vh, ql_xq(x1, t, 0, j));
        }
    }
    ql_fetch(&pf, 16);
    ql_fold_zmm(il, ih, NX);
    const __m512 d0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)g));
    const __m512 d1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(g + Q80_GROUP)));
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        __m512 s0 = _mm512_fmsub_ps(_mm512_cvtepi32_ps(il[t]), _mm512_set1_ps(ql_xd(x0, t)), _mm512_set1_ps(ql_xc(x0, t, 128.0f)));
        __m512 s1 = _mm512_fmsub_ps(_mm512_cvtepi32_ps(ih[t]), _mm512_set1_ps(ql_xd(x1, t)), _mm512_set1_ps(ql_xc(x1, t, 128.0f)));
        _mm512_storeu_ps(accm + 16 * t, _mm512_fmadd_ps(s1, d1, _mm512_fmadd_ps(s0, d0, _mm512_loadu_ps(accm + 16 * t))));
    }
}

/* Rows of x per zmm register tile of the GEMM. */
enum { QZ_NX = 8 };

/* The matrix-vector product of NT rows of x8 with panels [p0, p1). */
T_Z_INL void ql_gemv_n_zmm(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p0,
                            int64_t p1, const int NT)
{
    const int64_t kb = w->k / 32, nb = w->k / 256;
    const size_t gb = ql_group_bytes(w->dtype);
    _Alignas(64) float scl[QL_SCL];
    _Alignas(64) uint8_t pad[Q6K_GROUP];
    float xs[SNUG_GEMV_MAX_N][8];
    for (int64_t p = p0; p < p1; p++) {
        const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
        const ql_panel pn = ql_panel_at(w, p);
        __m512 acc[SNUG_GEMV_MAX_N];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
        for (int64_t c = 0; ql_b32(w->dtype) && c < kb; c++) {
            const uint8_t *g = ql_block(&pn, w, p, c, gb, pad);
            const ql_xs x = {(const uint8_t *)(x8 + c), (size_t)kb * sizeof *x8, 0, NULL, 0, 0};
            const ql_pf pf = {ql_block_next(&pn, c, gb), g == pad ? NULL : g + gb};
            if (w->dtype == SNUG_DTYPE_Q8_0) q80_block_zmm(g, &x, NT, acc, pf);
            else qnib_block_zmm(g, &x, NT, acc, pf, w->dtype == SNUG_DTYPE_Q5_0);
        }
        for (int64_t b = 0; !ql_b32(w->dtype) && b < nb; b++) {
            const uint8_t *g = ql_block(&pn, w, p, b, gb, pad);
            const ql_xs x = {(const uint8_t *)(x8 + 8 * b), (size_t)kb * sizeof *x8, sizeof *x8, xs[0], 8, 1};
            const ql_pf pf = {ql_block_next(&pn, b, gb), g == pad ? NULL : g + gb};
            ql_scales(w->dtype, g, false, scl);
            if (w->dtype == SNUG_DTYPE_Q6_K) q6k_block_zmm(g, scl, &x, NT, acc, NULL, pf);
            else {
                q4k_x_sums(x8, kb, b, NT, xs);
                q4k_block_zmm(g, scl, &x, NT, acc, NULL, pf);
            }
        }
        const __mmask16 keep = (__mmask16)((1u << width) - 1u);
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(y + t * ldy + p * SNUG_PANEL, keep, acc[t]);
    }
}

T_Z void snug_qlanes_gemv_zmm(float *y, int64_t ldy, const snug_x8_block *x8, int64_t n, const snug_linear *w,
                           int64_t p0, int64_t p1)
{
    switch (n) {
    case 1: ql_gemv_n_zmm(y, ldy, x8, w, p0, p1, 1); break;
    case 2: ql_gemv_n_zmm(y, ldy, x8, w, p0, p1, 2); break;
    case 3: ql_gemv_n_zmm(y, ldy, x8, w, p0, p1, 3); break;
    default: ql_gemv_n_zmm(y, ldy, x8, w, p0, p1, 4); break;
    }
}

/* The GEMM's x (snug_qlanes_pack_x) in tiles of QL_XT rows: tile i's x8
 * blocks (block of 32 c, row t at (c QL_XT + t) of the tile's), then
 * after every tile's the sums likewise (the formats of blocks of 32: times
 * their offset and d, ql_xc). Rows
 * past n are zeros. */


/* Where x's block of 32 c of rows t0 .. (in one tile, from its row
 * t0 % QL_XT) lies. */
static ql_xs ql_x_at(const void *xt, int64_t n, int64_t kb, int64_t t0, int64_t c)
{
    const snug_x8_block *x8 = xt;
    const float *sums = (const float *)(const void *)(x8 + ql_x_rows(n) * kb);
    size_t first = (size_t)((t0 / QL_XT * kb + c) * QL_XT + t0 % QL_XT);
    return (ql_xs){(const uint8_t *)(x8 + first), sizeof *x8, QL_XT * sizeof *x8, sums + first, 1, QL_XT};
}

/* A register tile of the GEMM: NX rows of x from t0 against every block
 * of panel p of w (its groups at gs, a group apart, their scales at scl),
 * into y (the panel's columns), summing in accm (NX x 16 floats); asking
 * for the groups from ahead on (the panel's first tile: ql_next's; NULL
 * for the others). */
T_Z_INL void ql_tile_zmm(float *y, int64_t ldy, const void *xt, int64_t n, int64_t t0, const uint8_t *gs,
                          const float *scl, const snug_linear *w, int64_t p, const uint8_t *ahead, float *accm,
                          const bool SIX, const int NX)
{
    const int64_t nb = w->k / 256, width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) _mm512_storeu_ps(accm + 16 * t, _mm512_setzero_ps());
    const size_t gb = ql_group_bytes(w->dtype);
    for (int64_t b = 0; b < nb; b++) {
        const ql_xs x = ql_x_at(xt, n, 8 * nb, t0, 8 * b);
        const ql_pf next = {ql_ahead_at(ahead, b, gb), gs + (size_t)(b + 1) * gb};
        if (SIX) q6k_block_zmm(gs + (size_t)b * gb, scl + b * QL_SCL, &x, NX, NULL, accm, next);
        else q4k_block_zmm(gs + (size_t)b * gb, scl + b * QL_SCL, &x, NX, NULL, accm, next);
    }
    const __mmask16 keep = (__mmask16)((1u << width) - 1u);
    for (int t = 0; t < NX && t0 + t < n; t++)
        _mm512_mask_storeu_ps(y + (t0 + t) * ldy + p * SNUG_PANEL, keep, _mm512_loadu_ps(accm + 16 * t));
}

/* ql_tile_zmm for the formats of blocks of 32 (ql_b32): Q8_0 two blocks at
 * a time (q80_pair_zmm), an odd last one alone; Q5_0 (NIB and FIVE) and
 * Q4_0 (NIB), whose low and high nibbles make two chains already, one at
 * a time. (Passes over a part of k at a time, so that the part of the
 * panel stays in L1 for every tile, measured level.) */
T_Z_INL void ql32_tile_zmm(float *y, int64_t ldy, const void *xt, int64_t n, int64_t t0, const uint8_t *gs,
                           const snug_linear *w, int64_t p, const uint8_t *ahead, float *accm, const bool NIB,
                           const bool FIVE, const int NX)
{
    const size_t gb = FIVE ? Q50_GROUP : Q40_GROUP;
    const int64_t kb = w->k / 32, width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) _mm512_storeu_ps(accm + 16 * t, _mm512_setzero_ps());
    int64_t c = 0;
    for (; c + 1 < kb && !NIB; c += 2) {
        const ql_xs x0 = ql_x_at(xt, n, kb, t0, c), x1 = ql_x_at(xt, n, kb, t0, c + 1);
        q80_pair_zmm(gs + (size_t)c * Q80_GROUP, &x0, &x1, NX, accm,
                     (ql_pf){ql_ahead_at(ahead, c, Q80_GROUP), gs + (size_t)(c + 2) * Q80_GROUP});
    }
    __m512 acc[QL_XT];
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) acc[t] = _mm512_loadu_ps(accm + 16 * t);
    for (; c < kb && NIB; c++) {
        const ql_xs x = ql_x_at(xt, n, kb, t0, c);
        qnib_block_zmm(gs + (size_t)c * gb, &x, NX, acc, (ql_pf){ql_ahead_at(ahead, c, gb), gs + (size_t)(c + 1) * gb},
                       FIVE);
    }
    if (c < kb && !NIB) {
        const ql_xs x = ql_x_at(xt, n, kb, t0, c);
        q80_block_zmm(gs + (size_t)c * Q80_GROUP, &x, NX, acc, (ql_pf){ql_ahead_at(ahead, c, Q80_GROUP), NULL});
    }
    const __mmask16 keep = (__mmask16)((1u << width) - 1u);
    for (int t = 0; t < NX && t0 + t < n; t++) _mm512_mask_storeu_ps(y + (t0 + t) * ldy + p * SNUG_PANEL, keep, acc[t]);
}

/* Rows of x per block of the GEMM: as many as keep their x8 rows and sums
 * (44 bytes a 32 values) in 1 MiB, whole tiles of nx. */
static int64_t ql_x_block(int64_t k, int64_t nx)
{
    int64_t rows = (int64_t)((size_t)1 << 20) / ((k / 32) * 44);
    return SNUG_MAX(nx, rows / nx * nx);
}

/* The groups of panel p, full width (a narrow one widened into tb after
 * the scales), and their scales (ql_scales, ints as there; the formats of
 * blocks of 32 have none
 * but its d) into tb after a tile's sums. */
T_Q_INL const uint8_t *ql_panel_prep(const snug_linear *w, int64_t p, bool ints, uint8_t *tb, float **scl)
{
    const bool q80 = ql_b32(w->dtype);
    const int64_t nb = w->k / (q80 ? 32 : 256), width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t gb = ql_group_bytes(w->dtype);
    *scl = (float *)(void *)(tb + QL_ACC);
    uint8_t *wide = tb + QL_ACC + (q80 ? 0 : (size_t)nb * QL_SCL * sizeof(float));
    const uint8_t *gs = (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, w->k, p);
    if (width < SNUG_PANEL) {
        for (int64_t b = 0; b < nb; b++)
            snug_linear_group_widen(w->dtype, gs + (size_t)b * (size_t)width * (gb / SNUG_PANEL), width, wide + (size_t)b * gb);
        gs = wide;
    }
    for (int64_t b = 0; b < nb && !q80; b++) ql_scales(w->dtype, gs + (size_t)b * gb, ints, *scl + b * QL_SCL);
    return gs;
}

T_Z void snug_qlanes_gemm_zmm(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0,
                           int64_t p1, void *tb)
{
    float *accm = tb;
    const bool six = w->dtype == SNUG_DTYPE_Q6_K, q5 = w->dtype == SNUG_DTYPE_Q5_0;
    const bool nib = q5 || w->dtype == SNUG_DTYPE_Q4_0;
    const int64_t xblock = ql_x_block(w->k, QZ_NX);
    for (int64_t x0 = 0; x0 < n; x0 += xblock)
        for (int64_t p = p0; p < p1; p++) {
            float *scl;
            const uint8_t *gs = ql_panel_prep(w, p, false, tb, &scl), *ahead = ql_next(w, p);
            for (int64_t t0 = x0; t0 < SNUG_MIN(n, x0 + xblock) && ql_b32(w->dtype); t0 += QZ_NX) {
                switch (SNUG_MIN((int64_t)QZ_NX, n - t0)) {
                case 1: ql32_tile_zmm(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, accm, nib, q5, 1); break;
                case 2: ql32_tile_zmm(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, accm, nib, q5, 2); break;
                case 3: ql32_tile_zmm(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, accm, nib, q5, 3); break;
                case 4: ql32_tile_zmm(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, accm, nib, q5, 4); break;
                case 5: ql32_tile_zmm(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, accm, nib, q5, 5); break;
                case 6: ql32_tile_zmm(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, accm, nib, q5, 6); break;
                case 7: ql32_tile_zmm(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, accm, nib, q5, 7); break;
                default: ql32_tile_zmm(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, accm, nib, q5, 8); break;
                }
            }
            for (int64_t t0 = x0; t0 < SNUG_MIN(n, x0 + xblock) && !ql_b32(w->dtype); t0 += QZ_NX) {
                switch (SNUG_MIN((int64_t)QZ_NX, n - t0)) {
                case 1: ql_tile_zmm(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 1); break;
                case 2: ql_tile_zmm(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 2); break;
                case 3: ql_tile_zmm(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 3); break;
                case 4: ql_tile_zmm(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 4); break;
                case 5: ql_tile_zmm(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 5); break;
                case 6: ql_tile_zmm(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 6); break;
                case 7: ql_tile_zmm(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 7); break;
                default: ql_tile_zmm(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 8); break;
                }
            }
        }
}

T_Q void snug_qlanes_pack_x(void *xt, const float *x, int64_t n, int64_t k, snug_dtype wdt, int64_t t0, int64_t t1,
                            snug_x8_block *tmp)
{
    const int64_t kb = k / 32;
    snug_x8_block *x8 = xt;
    float *sums = (float *)(void *)(x8 + ql_x_rows(n) * kb);
    if (t1 >= n) t1 = ql_x_rows(n); /* the last tile's rows past n: zeros */
    for (int64_t t = t0; t < t1; t++) {
        if (t < n) snug_x8_quantize_avx2(x + t * k, k, wdt, tmp);
        else memset(tmp, 0, (size_t)kb * sizeof *tmp);
        for (int64_t c = 0; c < kb; c++) {
            size_t at = (size_t)((t / QL_XT * kb + c) * QL_XT + t % QL_XT);
            x8[at] = tmp[c];
            sums[at] = (float)(tmp[c].sum16[0] + tmp[c].sum16[1]);
            if (ql_b32(wdt)) sums[at] *= ql_offset(wdt) * tmp[c].d; /* (ql_xc) */
        }
    }
}

/* Rows of x per ymm register tile of the GEMM. */
enum { QY_NX = 4 };

/* The first nv floats of v (all 8 from nv 8 up) to dst. */
T_Q_INL void ql_store_half(float *dst, __m256 v, int64_t nv)
{
    if (nv >= 8) {
        _mm256_storeu_ps(dst, v);
        return;
    }
    float buf[8];
    _mm256_storeu_ps(buf, v);
    memcpy(dst, buf, (size_t)nv * sizeof(float));
}

/* A panel's width (<= 16) outputs, a rows 0..8 and b the rest, to dst. */
T_Q_INL void ql_store_ymm(float *dst, __m256 a, __m256 b, int64_t width)
{
    ql_store_half(dst, a, width);
    if (width > 8) ql_store_half(dst + 8, b, width - 8);
}

/* ql_finish_zmm with 8 lanes. */
T_Q_INL void ql_finish_ymm(const __m256 blk[], const ql_xs *x, const int NX, __m256 acc[], float *accm)
{
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        if (accm)
            _mm256_storeu_ps(accm + 8 * t, _mm256_fmadd_ps(blk[t], _mm256_set1_ps(ql_xd(x, t)),
                                                           _mm256_loadu_ps(accm + 8 * t)));
        else acc[t] = _mm256_fmadd_ps(blk[t], _mm256_set1_ps(ql_xd(x, t)), acc[t]);
    }
}

/* x's sums of blocks of 32 2c and 2c + 1 of row t (x at one block) as a
 * pair of 16 bits (each at most 32 x 127). */
static inline int32_t ql_xpair(const ql_xs *x, int t, int c)
{
    const snug_x8_block *a = (const snug_x8_block *)(const void *)(ql_xq(x, t, 2 * c, 0) - offsetof(snug_x8_block, q));
    const snug_x8_block *b = (const snug_x8_block *)(const void *)(ql_xq(x, t, 2 * c + 1, 0) - offsetof(snug_x8_block, q));
    uint32_t sa = (uint16_t)(a->sum16[0] + a->sum16[1]), sb = (uint16_t)(b->sum16[0] + b->sum16[1]);
    return (int32_t)(sa | sb << 16);
}

/* One line of NH halves (their values vl and vh) against NX rows of x
 * (x's words of line j in its blocks of 32 bl and bh) into the 16-bit
 * sums il and ih (vpmaddubsw, the pairs added by vpaddw). */
T_Q_INL void ql_line_maddubs(__m256i il[][QL_XT], __m256i ih[][QL_XT], const __m256i vl[], const __m256i vh[],
                             const ql_xs *x, int bl, int bh, int j, const int NX, const int NH)
{
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        int32_t a, b;
        memcpy(&a, ql_xq(x, t, bl, j), 4), memcpy(&b, ql_xq(x, t, bh, j), 4);
#pragma GCC unroll 2
        for (int i = 0; i < NH; i++) {
            il[i][t] = _mm256_add_epi16(il[i][t], _mm256_maddubs_epi16(vl[i], _mm256_set1_epi32(a)));
            ih[i][t] = _mm256_add_epi16(ih[i][t], _mm256_maddubs_epi16(vh[i], _mm256_set1_epi32(b)));
        }
    }
}

/* bi[i][t] += il's and ih's 16-bit sums widened by vpmaddwd with the
 * scales at s0 + 32 i and s1 + 32 i (half i's 8 rows). */
T_Q_INL void ql_widen_maddwd(__m256i bi[][QL_XT], __m256i il[][QL_XT], __m256i ih[][QL_XT], const uint8_t *s0,
                             const uint8_t *s1, const int NX, const int NH)
{
#pragma GCC unroll 2
    for (int i = 0; i < NH; i++) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(s0 + 32 * i));
        const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s1 + 32 * i));
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++)
            bi[i][t] = _mm256_add_epi32(bi[i][t], _mm256_add_epi32(_mm256_madd_epi16(il[i][t], a), _mm256_madd_epi16(ih[i][t], b)));
    }
}

/* Halves h .. h + NH - 1 of one Q4_K block (NH 1, or 2 for both halves
 * from h 0) on vpmaddubsw with its scales in integers (q4k_scales_int at
 * sci), half h + i into acc[i] (or accm, NH 1): per row of x the
 * sub-blocks' 16-bit sums, widened by vpmaddwd with the scale, add up in
 * 32 bits over the block, the minimums' part likewise (mn times x's sums,
 * vpmaddwd); then d and dmin once a block (at most 8 x 63 x 32 x 15 x 127
 * in 32 bits). Both halves in one pass share each line's broadcasts of x
 * and the loop around them: with one row of x, 207 instructions a sub-block
 * pair against 230 in two passes (decode of a Q4_K_M 1B on Zen 3, 6 runs
 * in turn: 1.10x tokens/s); more rows would spill. The same floats either
 * way. */
T_Q_INL void q4k_block_int(const uint8_t *g, int h, const int NH, const uint8_t *sci, const ql_xs *x, const int NX,
                           __m256 *const acc[], float *accm, ql_pf pf)
{
    for (int i = 0; i < 4; i++) ql_fetch(&pf, i);
    const __m256i lo = _mm256_set1_epi8(15);
    __m256i bi[2][QL_XT];
    __m256 blk[2][QL_XT];
#pragma GCC unroll 2
    for (int i = 0; i < NH; i++) {
        const __m256 dmin = _mm256_loadu_ps((const float *)(const void *)(sci + 832 + 32 * (h + i)));
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) {
            __m256i bm = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++)
                bm = _mm256_add_epi32(bm, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(sci + 512 + 64 * c + 32 * (h + i))),
                                                            _mm256_set1_epi32(ql_xpair(x, t, c))));
            blk[i][t] = _mm256_mul_ps(_mm256_cvtepi32_ps(bm), dmin);
            bi[i][t] = _mm256_setzero_si256();
        }
    }
#pragma GCC unroll 1
    for (int c = 0; c < 4; c++) {
        __m256i il[2][QL_XT], ih[2][QL_XT];
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) il[0][t] = ih[0][t] = il[1][t] = ih[1][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m256i vl[2], vh[2];
#pragma GCC unroll 2
            for (int i = 0; i < NH; i++) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(g + Q4K_VALUES + 64 * (8 * c + j) + 32 * (h + i)));
                vl[i] = _mm256_and_si256(v, lo), vh[i] = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo);
            }
            ql_fetch(&pf, 4 + 8 * c + j);
            ql_line_maddubs(il, ih, vl, vh, x, 2 * c, 2 * c + 1, j, NX, NH);
        }
        ql_widen_maddwd(bi, il, ih, sci + 64 * (2 * c) + 32 * h, sci + 64 * (2 * c + 1) + 32 * h, NX, NH);
    }
#pragma GCC unroll 2
    for (int i = 0; i < NH; i++) {
        const __m256 d = _mm256_loadu_ps((const float *)(const void *)(sci + 768 + 32 * (h + i)));
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) blk[i][t] = _mm256_fmsub_ps(_mm256_cvtepi32_ps(bi[i][t]), d, blk[i][t]);
        ql_finish_ymm(blk[i], x, NX, acc[i], accm);
    }
}

/* Half hr of Q6_K's values as q6k_values_zmm, on AVX2. */
T_Q_INL void q6k_values_ymm(const uint8_t *g, int hr, int h, int m, int j, __m256i *lo, __m256i *hi)
{
    const __m256i low4 = _mm256_set1_epi8(15), bits45 = _mm256_set1_epi8(0x30);
    __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(g + 64 * (16 * h + 8 * m + j) + 32 * hr));
    __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(g + Q6K_HIGH + 64 * (8 * h + j) + 32 * hr));
    __m256i h_lo = _mm256_and_si256(m ? _mm256_slli_epi16(qh, 2) : _mm256_slli_epi16(qh, 4), bits45);
    __m256i h_hi = _mm256_and_si256(m ? _mm256_srli_epi16(qh, 2) : qh, bits45);
    *lo = _mm256_or_si256(_mm256_and_si256(q, low4), h_lo);
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), h_hi);
}

/* The values of the nb groups of a Q6_K panel at gs (full width) as
 * q6k_values_ymm makes them, into un: half hr's of block b from
 * Q6K_UNPACKED / 2 (hr nb + b), line (h, m, j)'s low and high vectors at
 * 64 (16 h + 8 m + j) after. Once per panel and block of x's rows, so
 * that the GEMM's tiles take them with two loads a line instead of the
 * eight instructions that assemble them (q6k_block_int, UN). */
T_Q_INL void q6k_unpack_ymm(const uint8_t *gs, int64_t nb, uint8_t *un)
{
    for (int hr = 0; hr < 2; hr++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *half = un + (size_t)(hr * nb + b) * (Q6K_UNPACKED / 2);
            for (int line = 0; line < 32; line++) {
                __m256i lo, hi;
                q6k_values_ymm(gs + (size_t)b * Q6K_GROUP, hr, line / 16, line / 8 % 2, line % 8, &lo, &hi);
                _mm256_storeu_si256((__m256i *)(void *)(half + 64 * line), lo);
                _mm256_storeu_si256((__m256i *)(void *)(half + 64 * line + 32), hi);
            }
        }
}

/* blk[t] (8 rows) = m32d times the sum over the block's 8 blocks of 32 b
 * of x's two sums of 16 (sum16) times the rows' sc pair at pairs + 64 b
 * (16-bit, q6k_scales' layout): the + 32 of Q6_K's stored values, taken
 * away once a block. */
T_Q_INL void q6k_plus32_ymm(const uint8_t *pairs, const ql_xs *x, const int NX, __m256 m32d, __m256 blk[])
{
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        __m256i c = _mm256_setzero_si256();
        for (int b = 0; b < 8; b++) {
            int32_t pair;
            memcpy(&pair, ql_xq(x, t, b, 0) - offsetof(snug_x8_block, q) + offsetof(snug_x8_block, sum16), 4);
            __m256i sc = _mm256_loadu_si256((const __m256i *)(const void *)(pairs + 64 * b));
            c = _mm256_add_epi32(c, _mm256_madd_epi16(sc, _mm256_set1_epi32(pair)));
        }
        blk[t] = _mm256_mul_ps(_mm256_cvtepi32_ps(c), m32d);
    }
}

/* Halves hr .. hr + NH - 1 of one Q6_K block (NH 1, or 2 for both from
 * hr 0, sharing x's broadcasts as q4k_block_int does) on vpmaddubsw with
 * its scales in integers (q6k_scales_int at sci), half hr + i into acc[i]
 * (or accm, NH 1); g its group, or (UN, NH 1) half hr's values unpacked
 * (q6k_unpack_ymm's, from the half's start): two lines' 16-bit pair sums
 * (at most 2 x 2 x 63 x 127) widened by vpmaddwd with the sub-block's scale, added up in 32 bits over
 * the block (at most 16 x 127 x 4 x 63 x 127 x 16); d once a block. */
T_Q_INL void q6k_block_int(const uint8_t *g, int hr, const int NH, const bool UN, const uint8_t *sci, const ql_xs *x,
                           const int NX, __m256 *const acc[], float *accm, ql_pf pf)
{
    for (int i = 0; i < 5; i++) ql_fetch(&pf, 48 + i);
    __m256 blk[2][QL_XT];
    __m256i bi[2][QL_XT];
#pragma GCC unroll 2
    for (int i = 0; i < NH; i++) {
        const __m256 d = _mm256_loadu_ps((const float *)(const void *)(sci + 1536 + 32 * (hr + i)));
        q6k_plus32_ymm(sci + 1024 + 32 * (hr + i), x, NX, _mm256_mul_ps(d, _mm256_set1_ps(-32.0f)), blk[i]);
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) bi[i][t] = _mm256_setzero_si256();
    }
#pragma GCC unroll 1
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 1
        for (int sb = 0; sb < 2; sb++)
#pragma GCC unroll 2
            for (int m = 0; m < 2; m++)
#pragma GCC unroll 2
                for (int jp = 0; jp < 2; jp++) { /* lines 4 sb + 2 jp and the next */
                    __m256i il[2][QL_XT], ih[2][QL_XT];
#pragma GCC unroll 8
                    for (int t = 0; t < NX; t++) il[0][t] = ih[0][t] = il[1][t] = ih[1][t] = _mm256_setzero_si256();
#pragma GCC unroll 2
                    for (int j = 4 * sb + 2 * jp; j < 4 * sb + 2 * jp + 2; j++) {
                        __m256i vl[2], vh[2];
#pragma GCC unroll 2
                        for (int i = 0; i < NH && UN; i++) {
                            vl[i] = _mm256_loadu_si256((const __m256i *)(const void *)(g + 64 * (16 * h + 8 * m + j)));
                            vh[i] = _mm256_loadu_si256((const __m256i *)(const void *)(g + 64 * (16 * h + 8 * m + j) + 32));
                        }
#pragma GCC unroll 2
                        for (int i = 0; i < NH && !UN; i++) q6k_values_ymm(g, hr + i, h, m, j, &vl[i], &vh[i]);
                        ql_fetch(&pf, 4 * (4 * h + 2 * sb + m) + j - 4 * sb);
                        if (m == 0) ql_fetch(&pf, Q6K_HIGH / 64 + 8 * h + j);
                        ql_line_maddubs(il, ih, vl, vh, x, 4 * h + m, 4 * h + 2 + m, j, NX, NH);
                    }
                    ql_widen_maddwd(bi, il, ih, sci + 64 * (2 * (4 * h + m) + sb) + 32 * hr,
                                    sci + 64 * (2 * (4 * h + 2 + m) + sb) + 32 * hr, NX, NH);
                }
#pragma GCC unroll 2
    for (int i = 0; i < NH; i++) {
        const __m256 d = _mm256_loadu_ps((const float *)(const void *)(sci + 1536 + 32 * (hr + i)));
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) blk[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(bi[i][t]), d, blk[i][t]);
        ql_finish_ymm(blk[i], x, NX, acc[i], accm);
    }
}

/* The ymm paths: one per instruction (k_qlanes_ymm.h). */
#define QLY_NAME(x) x##_maddubs
#define QLY_T T_Q
#define QLY_INL T_Q_INL
#define QLY_VNNI 0
#define QLY_GEMM 1
#include "k_qlanes_ymm.h"

#define QLY_NAME(x) x##_vnni_avx
#define QLY_T T_VNNI_AVX
#define QLY_INL T_VNNI_AVX_INL
#define QLY_VNNI 1
#define QLY_DPBUSD _mm256_dpbusd_avx_epi32
#define QLY_GEMM 1
#include "k_qlanes_ymm.h"

#define QLY_NAME(x) x##_vnni_512
#define QLY_T T_VNNI_512
#define QLY_INL T_VNNI_512_INL
#define QLY_VNNI 1
#define QLY_DPBUSD _mm256_dpbusd_epi32
#define QLY_GEMM 0
#include "k_qlanes_ymm.h"
#else
void snug_qlanes_pack_x(void *xt, const float *x, int64_t n, int64_t k, snug_dtype wdt, int64_t t0, int64_t t1,
                        snug_x8_block *tmp)
{
    (void)xt, (void)x, (void)n, (void)k, (void)wdt, (void)t0, (void)t1, (void)tmp;
}
#endif
