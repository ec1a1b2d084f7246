/*
 * k_matmul.c: the threaded driver of the matmuls over the panel layout
 * (linear.h, k_impl.h): the scalar reference loops, the split of a
 * weight's panels across threads, the matrix-vector path and the blocked
 * GEMM around each instruction set's micro-kernels.
 *
 * The GEMM packs all of x once per call, into the shared part of the
 * scratch (each thread packs a share of the panels of x, then all wait at
 * a barrier). It is packed block-major (all panels' slices of one kc block
 * of k together), so that the rows of x one block runs over are one
 * contiguous run. Up to 64 rows of x (batched decode), each thread then
 * streams its weight panels three at a time from start to end, every
 * register tile of x meeting each k block's slices (48 x kc values) while
 * they are in L1, and the micro-kernels fetching the next slices into L2
 * as they compute. With more rows (prefill), it takes its panels in blocks
 * of 24 (384 rows of w), and for each, each block of up to SNUG_GEMM_MC
 * rows of x and each block of k, the panels three at a time: those slices
 * of w meet every register tile of x of the block (in L2), adding into a
 * tile of y that stays in L2 across the k blocks. The weight is read from
 * memory once per block of rows of x, never re-packed: time grows smoothly
 * with the rows of x.
 *
 * The threads are a snug_pool's: one run per call (the GEMM waits at the
 * pool's barrier once x is packed). Threads get whole panels (16 rows of
 * w, one 64-byte line of y each), so no two threads write the same line of
 * y. Each output element is computed by the same sequence of operations
 * whatever the number of threads, so results do not depend on it.
 */
#include "base/dtype.h"
#include "base/pool.h"
#include "base/quant.h"
#include "k_impl.h"
#include "qdot.h"

#include <string.h>

/* Bytes of one thread's private scratch for rows of k elements: three
 * panel slices as f32 (the converted bf16 of the convert path) and one
 * padded narrow panel slice, or a repacked block-format panel (the 8-bit
 * GEMM), or the interleaved formats' scales and widened panel, whichever
 * is more. */
static size_t thread_bytes(int64_t k)
{
    size_t slices = (size_t)4 * SNUG_PANEL * SNUG_GEMM_KC_MAX * sizeof(float);
    return snug_round_up(SNUG_MAX(SNUG_MAX(slices, snug_qgemm_panel_bytes(k)), snug_qlanes_scratch_bytes(k)), 64);
}

/* Bytes of all of x packed: n rows padded to a tile, k to a pair and one
 * spare step. */
static size_t a_bytes(int64_t n, int64_t k)
{
    return snug_round_up((size_t)(n + SNUG_GEMM_MR_MAX) * (size_t)(k + 2) * sizeof(float), 64);
}

size_t snug_matmul_scratch_bytes(int32_t n_threads, int64_t n_max, int64_t k_max)
{
    if (n_threads < 1) n_threads = 1;
    if (n_max < 1) n_max = 1;
    if (k_max < 1) k_max = 1;
    return (size_t)n_threads * thread_bytes(k_max) + a_bytes(n_max, k_max);
}

/* ---- the scalar reference ------------------------------------------------ */

/* The scalar loops' job: rows [o0, o1) of w for each thread's share. */
typedef struct scalar_job {
    float *y;
    int64_t ldy;
    const float *x;
    int64_t n;
    const snug_linear *w;
} scalar_job;

/* y[t][o] = sum_i x[t][i] w[o][i] accumulated in float in index order, for
 * thread t's share of the rows of w. */
static void matmul_scalar(void *ctx, int32_t thread, int32_t n_threads)
{
    const scalar_job *j = ctx;
    int64_t k = j->w->k, m = j->w->m, o0, o1;
    snug_pool_split(m, 1, thread, n_threads, &o0, &o1);
    if (snug_dtype_is_quant(j->w->dtype) && j->n <= SNUG_GEMV_MAX_N) {
        /* the integer reference: each block of x quantized to 8 bits as it
         * meets a block of weights */
        uint32_t qt = snug_dtype_qtype(j->w->dtype);
        int64_t bs = snug_qtype_block(qt);
        snug_x8_block x8[256 / SNUG_X8_BLOCK];
        uint8_t wb[256]; /* one block of w (at most 210 bytes) */
        size_t bb = snug_qtype_block_bytes(qt);
        for (int64_t o = o0; o < o1; o++)
            for (int64_t t = 0; t < j->n; t++) {
                float acc = 0.0f;
                for (int64_t b = 0; b < k / bs; b++) {
                    snug_x8_quantize(j->x + t * k + b * bs, bs, j->w->dtype, x8);
                    snug_linear_block_bytes(j->w, o, b, wb);
                    acc += snug_qdot_ref(j->w->dtype, wb, bb, x8, bs);
                }
                j->y[t * j->ldy + o] = acc;
            }
        return;
    }
    if (snug_dtype_is_quant(j->w->dtype)) {
        /* a block at a time, dequantized once for up to 64 rows of x (at
         * their 8-bit levels, as every path takes x for block formats) */
        uint32_t qt = snug_dtype_qtype(j->w->dtype);
        int64_t bs = snug_qtype_block(qt);
        float blk[256], acc[64], xl[256];
        for (int64_t o = o0; o < o1; o++)
            for (int64_t t0 = 0; t0 < j->n; t0 += 64) {
                int64_t nt = SNUG_MIN((int64_t)64, j->n - t0);
                for (int64_t t = 0; t < nt; t++) acc[t] = 0.0f;
                for (int64_t b = 0; b < k / bs; b++) {
                    snug_linear_row_block(j->w, o, b, blk);
                    for (int64_t t = 0; t < nt; t++) {
                        snug_x8_levels(j->x + (t0 + t) * k, b * bs, bs, j->w->dtype, xl);
                        for (int64_t i = 0; i < bs; i++) acc[t] += xl[i] * blk[i];
                    }
                }
                for (int64_t t = 0; t < nt; t++) j->y[(t0 + t) * j->ldy + o] = acc[t];
            }
        return;
    }
    for (int64_t o = o0; o < o1; o++) {
        for (int64_t t = 0; t < j->n; t++) {
            const float *xt = j->x + t * k;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i++) acc += xt[i] * snug_linear_elem(j->w, o, i);
            j->y[t * j->ldy + o] = acc;
        }
    }
}

/* ---- packing x ----------------------------------------------------------- */

/* k steps of x in a block of len elements: floats, padded to an even
 * count (the bf16-pair kinds read the step after an odd end), or pairs. */
static int64_t a_steps(const snug_gemm_kind *g, int64_t len)
{
    return g->a_bf16 ? (len + 1) / 2 : (len + 1) & ~(int64_t)1;
}

/* Packs panels [p_first, p_last) of x (n rows of k; `panels` in all) into
 * ap, block-major: the kc-deep slices of every panel for one block of k
 * are together (block pc from word a_steps(pc) * panels * mr, then each
 * panel's a_steps(len) * mr words of it). */
static void pack_a(const snug_gemm_kind *g, uint32_t *ap, const float *x, int64_t n, int64_t k,
                   int64_t panels, int64_t p_first, int64_t p_last, snug_dtype x8_for)
{
    const int64_t mr = g->mr;
    float rounded[SNUG_GEMM_KC_MAX];
    for (int64_t p = p_first; p < p_last; p++) {
        int64_t rv = SNUG_MIN(mr, n - p * mr); /* real rows of the panel */
        const float *x0 = x + p * mr * k;
        for (int64_t pc = 0; pc < k; pc += g->kc) {
            int64_t len = SNUG_MIN((int64_t)g->kc, k - pc), ks = a_steps(g, len);
            uint32_t *pan = ap + (a_steps(g, pc) * panels + p * ks) * mr;
            if (x8_for != SNUG_DTYPE_NONE) { /* x at its 8-bit levels, a row at a time */
                SNUG_ASSERT(!g->a_bf16);
                for (int64_t i = 0; i < mr; i++) {
                    if (i < rv) snug_x8_levels(x0 + i * k, pc, len, x8_for, rounded);
                    float *d = (float *)(void *)pan;
                    for (int64_t q = 0; q < ks; q++) d[q * mr + i] = i < rv && q < len ? rounded[q] : 0.0f;
                }
            } else if (g->pack_x && rv == mr) {
                g->pack_x(pan, x0, k, pc, len);
            } else if (!g->a_bf16) {
                for (int64_t q = 0; q < ks; q++) {
                    float *d = (float *)(void *)(pan + q * mr);
                    for (int64_t i = 0; i < mr; i++)
                        d[i] = i < rv && q < len ? x0[i * k + pc + q] : 0.0f;
                }
            } else {
                for (int64_t i = 0; i < mr; i++) {
                    const float *xr = x0 + i * k + pc;
                    if (i >= rv) {
                        for (int64_t q = 0; q < ks; q++) pan[q * mr + i] = 0;
                        continue;
                    }
                    int64_t q = 0;
                    for (; 2 * q + 1 < len; q++)
                        pan[q * mr + i] = (uint32_t)snug_f32_to_bf16(xr[2 * q]) | (uint32_t)snug_f32_to_bf16(xr[2 * q + 1]) << 16;
                    if (q < ks) pan[q * mr + i] = snug_f32_to_bf16(xr[2 * q]); /* an odd end */
                }
            }
        }
    }
}

/* ---- the weight's slices --------------------------------------------------- */

/* Bytes of one step of a full panel: 16 floats, halves or bf16 pairs. */
static size_t step_bytes(snug_dtype dt) { return dt == SNUG_DTYPE_F16 ? 32 : 64; }

/* Elements per step of the layout: 2 for bf16 pairs. */
static int64_t step_elems(snug_dtype dt) { return dt == SNUG_DTYPE_BF16 ? 2 : 1; }

/* Copies elements [pc, pc + len) of the narrow panel p (width < 16) into
 * dst as a full-width slice (lanes past the width zero), in w's format. */
static void pad_panel(void *dst, const snug_linear *w, int64_t p, int64_t pc, int64_t len)
{
    int64_t width = w->m - p * SNUG_PANEL, se = step_elems(w->dtype);
    int64_t q0 = pc / se, steps = (len + se - 1) / se;
    size_t es = w->dtype == SNUG_DTYPE_F16 ? 2 : 4;
    const unsigned char *src = (const unsigned char *)w->data +
                               snug_linear_panel_offset(w->dtype, w->m, w->k, p) +
                               (size_t)q0 * (size_t)width * es;
    unsigned char *d = dst;
    memset(d, 0, (size_t)steps * step_bytes(w->dtype));
    for (int64_t q = 0; q < steps; q++)
        memcpy(d + (size_t)q * step_bytes(w->dtype), src + (size_t)q * (size_t)width * es,
               (size_t)width * es);
}

/* Panel p's slice at element pc (a full panel). */
static const void *panel_slice(const snug_linear *w, int64_t p, int64_t pc)
{
    return (const unsigned char *)w->data + snug_linear_panel_offset(w->dtype, w->m, w->k, p) +
           (size_t)(pc / step_elems(w->dtype)) * step_bytes(w->dtype);
}

/* Asks for part `part` of `parts` of the slices [pc, pc + len) of panels
 * [p, p + np) of w to be fetched into L2 (the parts split their lines
 * evenly). */
static void prefetch_part(const snug_linear *w, int64_t p, int64_t np, int64_t pc, int64_t len,
                          int64_t part, int64_t parts)
{
    int64_t se = step_elems(w->dtype);
    int64_t lines = ((len + se - 1) / se * (int64_t)step_bytes(w->dtype) + 63) / 64, total = lines * np;
    int64_t i = total * part / parts, end = total * (part + 1) / parts;
    while (i < end) {
        int64_t j = i / lines, l = i % lines, n = SNUG_MIN(lines - l, end - i);
        const char *base = (const char *)panel_slice(w, p + j, pc) + l * 64;
        for (int64_t q = 0; q < n; q++) __builtin_prefetch(base + q * 64, 0, 2);
        i += n;
    }
}

/* ---- the blocked GEMM ------------------------------------------------------- */

/* Up to this many rows of x, the GEMM streams each weight panel once from
 * start to end: three panels at a time, all their k blocks in a row, every
 * register tile of x meeting each slice while it is in L1 (x, n x k
 * floats, stays in L2). While the tiles compute, the next slice (the next
 * k block, or the next three panels' first) is fetched into L2, a share per
 * tile spread over its steps, so that memory and arithmetic overlap. bf16
 * slices are not converted to f32 here (a few tiles do not repay the
 * stores); block formats are dequantized, on every path (their integer
 * kernels are to come). */
enum { GEMM_STREAM_MAX_N = 64 };

const snug_gemm_kind *snug_matmul_kind(const snug_kernels *kt, const snug_matmul_ops *o,
                                       snug_dtype wdt, int64_t n, bool *convert)
{
    *convert = false;
    if (snug_dtype_is_quant(wdt)) { /* dequantized slices on the f32 kind */
        *convert = true;
        return &o->f32;
    }
    if (wdt == SNUG_DTYPE_F32) return &o->f32;
    if (wdt == SNUG_DTYPE_F16) return &o->f16;
    if (kt->bf16_insn == SNUG_INSN_DPBF16_ZMM && o->bf16_dp.micro) return &o->bf16_dp;
    if (o->bf16_to_f32 && n > GEMM_STREAM_MAX_N && n >= o->convert_min_n) {
        *convert = true;
        return &o->f32;
    }
    return &o->bf16_fma;
}

/* Panels of w per block of the thread's share (a multiple of the three a
 * register tile takes). */
enum { GEMM_NC_PANELS = 24 };

/* The f32 slice [pc, pc + len) of panel p of block-format w (the
 * contract of snug_linear_quant_slice_f32), in vectors where o has them. */
static void quant_slice(const snug_matmul_ops *o, const snug_linear *w, int64_t p, int64_t pc, int64_t len,
                        float *dst)
{
    if (o->quant_slice && pc % 8 == 0 && len % 8 == 0) o->quant_slice(w, p, pc, len, dst);
    else snug_linear_quant_slice_f32(w, p, pc, len, dst);
}

/* The slice [pc, pc + len) of panel p of w as the kind's micro-kernel
 * reads it: the layout itself, or, converting, as f32 in conv (bf16 pairs
 * widened; block formats dequantized, which also serves a narrow panel). */
static const void *slice_of(const snug_matmul_ops *o, const snug_linear *w, int64_t p, int64_t pc, int64_t len,
                            bool convert, float *conv)
{
    void (*to_f32)(float *, const uint32_t *, int64_t) = o->bf16_to_f32;
    if (snug_dtype_is_quant(w->dtype)) {
        quant_slice(o, w, p, pc, len, conv);
        return conv;
    }
    if (!convert) return panel_slice(w, p, pc);
    to_f32(conv, panel_slice(w, p, pc), (len + 1) / 2);
    return conv;
}

/* Lines of a slice of len elements of one full panel. */
static int64_t slice_lines(snug_dtype dt, int64_t len)
{
    int64_t se = step_elems(dt);
    return ((len + se - 1) / se * (int64_t)step_bytes(dt) + 63) / 64;
}

/* One thread's share, the full panels [p0, p1) of w, in that order (the
 * contract of gemm_thread). */
static void gemm_thread_stream(const snug_gemm_kind *g, bool convert,
                               const snug_matmul_ops *o, float *conv, float *y,
                               int64_t ldy, const uint32_t *ap, int64_t n, const snug_linear *w, int64_t p0,
                               int64_t p1)
{
    const int64_t mr = g->mr, k = w->k, panels_a = (n + mr - 1) / mr;
    for (int64_t jp = p0; jp < p1; jp += 3) {
        int32_t np = (int32_t)SNUG_MIN(3, p1 - jp);
        for (int64_t pc = 0; pc < k; pc += g->kc) {
            int64_t len = SNUG_MIN((int64_t)g->kc, k - pc);
            const uint32_t *ablock = ap + a_steps(g, pc) * panels_a * mr;
            int64_t ks_a = a_steps(g, len);
            const void *b[3] = {NULL, NULL, NULL};
            for (int32_t j = 0; j < np; j++)
                b[j] = slice_of(o, w, jp + j, pc, len, convert, conv + (size_t)j * SNUG_PANEL * SNUG_GEMM_KC_MAX);
            snug_prefetch pf = {.np = 0};
            int64_t nx_p = jp, nx_pc = pc + g->kc;
            if (nx_pc >= k) nx_p = jp + 3, nx_pc = 0;
            if (nx_p < p1 && !convert) {
                pf.np = (int32_t)SNUG_MIN(3, p1 - nx_p);
                for (int32_t j = 0; j < pf.np; j++) pf.base[j] = panel_slice(w, nx_p + j, nx_pc);
            }
            /* (after a short last k block a share may be more lines than the
             * tile has steps: the rest is left to the hardware prefetcher) */
            int64_t lines = pf.np ? slice_lines(w->dtype, SNUG_MIN((int64_t)g->kc, k - nx_pc)) : 0;
            int64_t tiles = panels_a, steps = (g->a_bf16 || w->dtype == SNUG_DTYPE_BF16) && !convert ? (len + 1) / 2 : len;
            for (int64_t t = 0; t < tiles; t++) {
                pf.first = lines * t / tiles;
                pf.count = SNUG_MIN(steps, lines * (t + 1) / tiles - pf.first);
                g->micro(len, ablock + t * ks_a * mr, b, np, y + t * mr * ldy + jp * SNUG_PANEL, ldy,
                         (int32_t)SNUG_MIN(mr, n - t * mr), pc > 0, &pf);
            }
        }
    }
}

/* One thread's share: the full panels [p0, p1) of w against all n rows of
 * x, packed whole in ap; tb is the thread's private scratch. */
static void gemm_thread(const snug_gemm_kind *g, bool convert, const snug_matmul_ops *o,
                        float *y, int64_t ldy, const uint32_t *ap, int64_t n, const snug_linear *w, int64_t p0,
                        int64_t p1, unsigned char *tb)
{
    const int64_t mr = g->mr, k = w->k, panels_a = (n + mr - 1) / mr;
    const int64_t mc_max = SNUG_GEMM_MC / mr * mr; /* whole tiles of x per block */
    float *conv = (float *)(void *)tb;               /* 3 converted slices */
    const snug_prefetch none = {.count = 0};
    if (n <= GEMM_STREAM_MAX_N) {
        gemm_thread_stream(g, convert, o, conv, y, ldy, ap, n, w, p0, p1);
        return;
    }
    /* blocks of the thread's panels whose tile of y (mc x 384 floats) stays
     * in L2 while every k block adds to it */
    for (int64_t jc = p0; jc < p1; jc += GEMM_NC_PANELS) {
        int64_t jc_end = SNUG_MIN(p1, jc + GEMM_NC_PANELS);
        for (int64_t ic = 0; ic < n; ic += mc_max) {
            int64_t mc = SNUG_MIN(mc_max, n - ic);
            for (int64_t pc = 0; pc < k; pc += g->kc) {
                int64_t len = SNUG_MIN((int64_t)g->kc, k - pc);
                const uint32_t *ablock = ap + a_steps(g, pc) * panels_a * mr;
                int64_t ks_a = a_steps(g, len);
                for (int64_t jp = jc; jp < jc_end; jp += 3) {
                    int32_t np = (int32_t)SNUG_MIN(3, jc_end - jp);
                    const void *b[3] = {NULL, NULL, NULL};
                    for (int32_t j = 0; j < np; j++)
                        b[j] = slice_of(o, w, jp + j, pc, len, convert,
                                        conv + (size_t)j * SNUG_PANEL * SNUG_GEMM_KC_MAX);
                    /* the next slices (the next three panels, or the block's first
                     * at the next k block) fetched into L2 a part per tile */
                    int64_t nx_p = jp + 3, nx_pc = pc;
                    if (nx_p >= jc_end) nx_p = jc, nx_pc = pc + g->kc;
                    int64_t nx_len = SNUG_MIN((int64_t)g->kc, k - nx_pc), tiles = (mc + mr - 1) / mr;
                    int64_t nx_np = SNUG_MIN(3, jc_end - nx_p);
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        if (nx_pc < k && !snug_dtype_is_quant(w->dtype))
                            prefetch_part(w, nx_p, nx_np, nx_pc, nx_len, ir / mr, tiles);
                        g->micro(len, ablock + ((ic + ir) / mr) * ks_a * mr, b, np,
                                 y + (ic + ir) * ldy + jp * SNUG_PANEL, ldy, (int32_t)SNUG_MIN(mr, mc - ir),
                                 pc > 0, &none);
                    }
                }
            }
        }
    }
}

/* The narrow last panel's rows past m must not be written: the micro-kernels
 * write whole panels, so a matrix whose m is not a multiple of 16 runs its
 * last panel's tiles into a local tile first. */
static void gemm_thread_edge(const snug_gemm_kind *g, bool convert,
                             const snug_matmul_ops *o, float *y, int64_t ldy,
                             const uint32_t *ap, int64_t n, const snug_linear *w, int64_t p,
                             unsigned char *tb)
{
    const int64_t mr = g->mr, k = w->k, m = w->m, panels_a = (n + mr - 1) / mr;
    const int64_t width = m - p * SNUG_PANEL;
    float *conv = (float *)(void *)tb;
    const snug_prefetch none = {.count = 0};
    unsigned char *padded = tb + (size_t)3 * SNUG_PANEL * SNUG_GEMM_KC_MAX * sizeof(float);
    float tile[SNUG_GEMM_MR_MAX * SNUG_PANEL];
    for (int64_t ir = 0; ir < n; ir += mr) {
        int32_t mr_v = (int32_t)SNUG_MIN(mr, n - ir);
        for (int64_t pc = 0; pc < k; pc += g->kc) {
            int64_t len = SNUG_MIN((int64_t)g->kc, k - pc);
            const uint32_t *ablock = ap + a_steps(g, pc) * panels_a * mr;
            const void *b[3] = {padded, NULL, NULL};
            if (snug_dtype_is_quant(w->dtype)) {
                quant_slice(o, w, p, pc, len, conv);
                b[0] = conv;
            } else {
                pad_panel(padded, w, p, pc, len);
                if (convert) {
                    o->bf16_to_f32(conv, b[0], (len + 1) / 2);
                    b[0] = conv;
                }
            }
            g->micro(len, ablock + (ir / mr) * a_steps(g, len) * mr, b, 1, tile, SNUG_PANEL, mr_v,
                     pc > 0, &none);
        }
        for (int32_t i = 0; i < mr_v; i++)
            memcpy(y + (ir + i) * ldy + p * SNUG_PANEL, tile + i * SNUG_PANEL,
                   (size_t)width * sizeof(float));
    }
}

/* Chunks of a matrix-vector product per thread of the pool, taken one at a
 * time: enough that the threads finish together, few enough that taking
 * one costs nothing beside its panels. */
enum { GEMV_CHUNKS_PER_THREAD = 8 };

/* One call's work, shared by its threads. */
typedef struct matmul_job {
    const snug_matmul_ops *o;
    snug_qgemv_fn qgemv;     /* block formats, n <= 4: the integer path over x8 */
    snug_qgemm_fn qgemm;     /* block formats, n > 4: the 8-bit GEMM, or NULL */
    snug_x8_block *x8;       /* x quantized, in the scratch */
    const snug_gemm_kind *g; /* NULL: the matrix-vector path */
    bool convert;
    float *y;
    int64_t ldy;             /* floats from one row of y to the next */
    const float *x;
    int64_t n;
    const snug_linear *w;
    unsigned char *scratch;
    uint32_t *ap;            /* x packed (the GEMM), in the scratch after the threads' parts */
    int32_t nt;              /* threads that take a share (the pool's others only wait) */
    snug_pool *pool;         /* NULL: the caller alone */
} matmul_job;

/* Rows of x up to which o's gemv serves an unquantized matrix. */
static int64_t gemv_max_n(const snug_matmul_ops *o) { return o->gemv_max_n ? o->gemv_max_n : SNUG_GEMV_MAX_N; }

/* Panels [p0, p1) of job j's matrix-vector product. */
static void gemv_panels(const matmul_job *j, int64_t p0, int64_t p1)
{
    if (j->qgemv) j->qgemv(j->y, j->ldy, j->x8, j->n, j->w, p0, p1);
    else j->o->gemv(j->y, j->ldy, j->x, j->n, j->w, p0, p1);
}

/* Chunks of panels of a GEMM per thread of the pool, taken one at a time
 * as the matrix-vector path's are: a thread that the host or its neighbours
 * slow takes fewer, so that the step does not wait on it at the end. */
enum { GEMM_CHUNKS_PER_THREAD = 4 };

/* Panels per chunk when nt threads share panels panels, about per_thread
 * chunks a thread (GEMV_ or GEMM_CHUNKS_PER_THREAD): whole multiples of unit
 * (the panels a register tile takes together; 1 where any count serves). */
static int64_t chunk_panels(int64_t panels, int64_t nt, int64_t per_thread, int64_t unit)
{
    int64_t per = SNUG_MAX(1, panels / (nt * per_thread));
    return (per + unit - 1) / unit * unit;
}

/* Thread tid's share of job j: chunks of panels taken from the pool's
 * counter (a matrix-vector product's, GEMV_CHUNKS_PER_THREAD a thread; a
 * GEMM's, after every thread has packed or quantized its share of x and
 * waited at the pool's barrier for the others', GEMM_CHUNKS_PER_THREAD, the
 * float GEMM's narrow last panel, if any, a chunk of its own); without a
 * pool, every panel. A panel's sums are the same floats whichever thread
 * takes it. */
static void matmul_part(void *ctx, int32_t tid, int32_t n_pool)
{
    (void)n_pool;
    const matmul_job *j = ctx;
    int64_t nth = j->nt, m = j->w->m, panels = (m + SNUG_PANEL - 1) / SNUG_PANEL, full = m / SNUG_PANEL;
    unsigned char *tb = j->scratch + (size_t)tid * thread_bytes(j->w->k);
    if (j->qgemm) { /* each thread quantizes its share of x's groups of rows, then takes panels */
        int64_t groups = (j->n + SNUG_QGEMM_XROWS - 1) / SNUG_QGEMM_XROWS, g0 = 0, g1 = 0;
        if (tid < nth) snug_pool_split(groups, 1, tid, (int32_t)nth, &g0, &g1);
        if (g0 < g1)
            snug_qgemm_pack_x(j->ap, j->x, j->n, j->w->k, j->w->dtype, g0, g1, (snug_x8_block *)(void *)tb);
        if (!j->pool) {
            j->qgemm(j->y, j->ldy, j->ap, j->n, j->w, 0, panels, tb);
            return;
        }
        snug_pool_barrier(j->pool, tid);
        int64_t per = chunk_panels(panels, nth, GEMM_CHUNKS_PER_THREAD, 1), chunks = (panels + per - 1) / per;
        for (int64_t c; tid < nth && (c = snug_pool_next(j->pool, chunks)) >= 0;)
            j->qgemm(j->y, j->ldy, j->ap, j->n, j->w, c * per, SNUG_MIN(panels, (c + 1) * per), tb);
        return;
    }
    if (!j->g) { /* memory-bound: smaller chunks, as the others' traffic slows a thread too */
        if (!j->pool) {
            gemv_panels(j, 0, panels);
            return;
        }
        int64_t per = chunk_panels(panels, nth, GEMV_CHUNKS_PER_THREAD, 1), chunks = (panels + per - 1) / per;
        for (int64_t c; (c = snug_pool_next(j->pool, chunks)) >= 0;)
            gemv_panels(j, c * per, SNUG_MIN(panels, (c + 1) * per));
        return;
    }
    int64_t panels_a = (j->n + j->g->mr - 1) / j->g->mr, a0 = 0, a1 = 0;
    if (tid < nth) snug_pool_split(panels_a, 1, tid, (int32_t)nth, &a0, &a1);
    pack_a(j->g, j->ap, j->x, j->n, j->w->k, panels_a, a0, a1,
           snug_dtype_is_quant(j->w->dtype) ? j->w->dtype : SNUG_DTYPE_NONE);
    if (!j->pool) {
        if (full > 0) gemm_thread(j->g, j->convert, j->o, j->y, j->ldy, j->ap, j->n, j->w, 0, full, tb);
        if (full < panels) gemm_thread_edge(j->g, j->convert, j->o, j->y, j->ldy, j->ap, j->n, j->w, full, tb);
        return;
    }
    snug_pool_barrier(j->pool, tid);
    int64_t per = chunk_panels(full, nth, GEMM_CHUNKS_PER_THREAD, 3), chunks = (full + per - 1) / per + (full < panels);
    for (int64_t c; tid < nth && (c = snug_pool_next(j->pool, chunks)) >= 0;) {
        if (c * per >= full) gemm_thread_edge(j->g, j->convert, j->o, j->y, j->ldy, j->ap, j->n, j->w, full, tb);
        else gemm_thread(j->g, j->convert, j->o, j->y, j->ldy, j->ap, j->n, j->w, c * per,
                         SNUG_MIN(full, (c + 1) * per), tb);
    }
}

void snug_matmul_blocked(const snug_kernels *kt, const snug_matmul_ops *o, float *y, int64_t ldy,
                         const float *x, int64_t n, const snug_linear *w, void *scratch, snug_pool *pool)
{
    int64_t k = w->k, m = w->m;
    if (n <= 0 || m <= 0) return;
    if (k <= 0) {
        for (int64_t t = 0; t < n; t++) memset(y + t * ldy, 0, (size_t)m * sizeof(float));
        return;
    }
    matmul_job j = {.o = o, .y = y, .ldy = ldy, .x = x, .n = n, .w = w, .scratch = scratch, .pool = pool};
    int32_t n_pool = pool ? snug_pool_threads(pool) : 1;
    j.ap = (uint32_t *)(void *)(j.scratch + (size_t)n_pool * thread_bytes(k));
    bool quant = snug_dtype_is_quant(w->dtype);
    if (n <= SNUG_GEMV_MAX_N && quant && kt->qgemv) {
        /* x to 8 bits once, in the packed x's place (n k / 32 blocks of 40
         * bytes: less than its 4 (n + 12) (k + 2)) */
        snug_x8_block *x8 = (snug_x8_block *)(void *)j.ap;
        for (int64_t t = 0; t < n; t++) snug_x8_quantize(x + t * k, k, w->dtype, x8 + t * (k / SNUG_X8_BLOCK));
        j.qgemv = kt->qgemv;
        j.x8 = x8;
    } else if (quant && kt->qgemm) { /* x quantized by the threads (matmul_part) */
        SNUG_ASSERT(snug_qgemm_x_bytes(n, k) <= a_bytes(n, k) && snug_qlanes_x_bytes(n, k) <= a_bytes(n, k));
        j.qgemm = kt->qgemm;
    } else if (n > gemv_max_n(o) || quant) {
        j.g = snug_matmul_kind(kt, o, w->dtype, n, &j.convert);
        SNUG_ASSERT(j.g->micro && j.g->kc <= SNUG_GEMM_KC_MAX && j.g->kc % 2 == 0 &&
                    j.g->mr <= SNUG_GEMM_MR_MAX);
    }
    int64_t nt = SNUG_MAX(1, SNUG_MIN((int64_t)n_pool, (m + SNUG_PANEL - 1) / SNUG_PANEL));
    /* tiny products are not worth waking threads for */
    if ((double)n * (double)k * (double)m < 65536.0) nt = 1;
    j.nt = (int32_t)nt;
    if (nt == 1) {
        j.pool = NULL;
        matmul_part(&j, 0, 1);
        return;
    }
    snug_pool_run(pool, matmul_part, &j);
}

/* ---- the public side ------------------------------------------------------- */

void snug_matmul_into(const snug_kernels *k, float *y, int64_t ldy, const float *x, int64_t n,
                      const snug_linear *w, void *scratch, snug_pool *pool)
{
    if (!k->mm || (snug_dtype_is_quant(w->dtype) && n <= SNUG_GEMV_MAX_N && !k->qgemv)) {
        scalar_job j = {y, ldy, x, n, w};
        if (pool) snug_pool_run(pool, matmul_scalar, &j);
        else matmul_scalar(&j, 0, 1);
        return;
    }
    snug_matmul_blocked(k, k->mm, y, ldy, x, n, w, scratch, pool);
}

void snug_matmul(const snug_kernels *k, float *y, const float *x, int64_t n, const snug_linear *w,
                 void *scratch, snug_pool *pool)
{
    snug_matmul_into(k, y, w->m, x, n, w, scratch, pool);
}

int64_t snug_matmul_gemv_rows(const snug_kernels *k, snug_dtype wdt)
{
    return snug_dtype_is_quant(wdt) || !k->mm ? SNUG_GEMV_MAX_N : gemv_max_n(k->mm);
}

snug_insn snug_matmul_insn(const snug_kernels *k, snug_dtype wdt, int64_t n)
{
    if (n <= SNUG_GEMV_MAX_N && snug_dtype_is_quant(wdt)) return k->qgemv_insn;
    if (snug_dtype_is_quant(wdt) && k->qgemm) return k->qgemm_insn;
    if (!k->mm) return SNUG_INSN_SCALAR;
    if (n <= snug_matmul_gemv_rows(k, wdt)) return k->mm->gemv_insn;
    bool convert;
    return snug_matmul_kind(k, k->mm, wdt, n, &convert)->insn;
}
