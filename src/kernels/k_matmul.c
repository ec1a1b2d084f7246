/*
 * k_matmul.c: the threaded driver of the SIMD matmuls: splits the weight
 * rows across OpenMP threads, then runs the instruction set's matrix-vector
 * routine (n <= SNUG_GEMV_MAX_N) or the blocked GEMM loops around its
 * packing routine and micro-kernel (see k_impl.h).
 *
 * The GEMM packs all of x once per call, into the shared part of the
 * scratch (each thread packs a share of the panels, then all wait at a
 * barrier), so that no thread re-packs x for each block of weight rows.
 * It is packed block-major (all panels' slices of one kc block of k
 * together), so that the mc rows of x one block runs over are contiguous.
 * Each thread then runs the BLIS loops over its own weight rows: nc rows,
 * kc deep, mc rows of x; each register panel of w is packed just before
 * its first use (so it is in L1 for the mr-row tiles of x that follow),
 * while the next panel is prefetched into L2.
 *
 * Threads get weight rows in units of a whole register tile and a whole
 * number of 64-byte lines of y, so no two threads write the same line of
 * y. Each output element is computed by the same sequence of operations
 * whatever the number of threads, so results do not depend on n_threads.
 */
#include "base/dtype.h"
#include "k_impl.h"

#include <omp.h>
#include <string.h>

/* Bytes of one thread's packed block of w. */
static size_t b_bytes(void)
{
    return snug_round_up((size_t)SNUG_GEMM_KC_MAX * SNUG_GEMM_NC_MAX * sizeof(float), 64);
}

/* Bytes of all of x packed (n rows padded to a tile, k to a pair of words). */
static size_t a_bytes(int64_t n, int64_t k)
{
    return snug_round_up((size_t)(n + SNUG_GEMM_MR_MAX) * (size_t)(k + 2) * sizeof(float), 64);
}

size_t snug_matmul_scratch_bytes(int32_t n_threads, int64_t n_max, int64_t k_max)
{
    if (n_threads < 1) n_threads = 1;
    if (n_max < 1) n_max = 1;
    if (k_max < 1) k_max = 1;
    return (size_t)n_threads * b_bytes() + a_bytes(n_max, k_max);
}

/* 32-bit words per (k step, row) of packed x. */
static int64_t a_words(const snug_gemm_ops *g) { return g->pairs && !g->a_bf16 ? 2 : 1; }

/* k steps of a packed row of x or w over `len` elements. */
static int64_t steps_of(const snug_gemm_ops *g, int64_t len) { return g->pairs ? (len + 1) / 2 : len; }

/* Packs panels [p_first, p_last) of x (n rows of k; `panels` in all) into
 * ap, block-major: the kc-deep slices of every panel for one block of k
 * are together (block pc from word steps_of(pc) * panels * mr * aw, then
 * each panel's ksteps * mr * aw words of it), so that the slices a thread
 * runs over for one block are one contiguous run (no cache set conflicts
 * between them, as panels a whole k apart would have). */
static void pack_a(const snug_gemm_ops *g, uint32_t *ap, const float *x, int64_t n, int64_t k,
                   int64_t panels, int64_t p_first, int64_t p_last)
{
    const int64_t mr = g->mr, aw = a_words(g);
    for (int64_t p = p_first; p < p_last; p++) {
        int64_t rv = SNUG_MIN(mr, n - p * mr); /* real rows of the panel */
        const float *x0 = x + p * mr * k;
        for (int64_t pc = 0; pc < k; pc += g->kc) {
            int64_t q0 = steps_of(g, pc), ks = steps_of(g, SNUG_MIN((int64_t)g->kc, k - pc));
            uint32_t *pan = ap + (q0 * panels + p * ks) * mr * aw;
            if (!g->pairs) {
                for (int64_t q = 0; q < ks; q++) {
                    float *d = (float *)(void *)(pan + q * mr);
                    for (int64_t i = 0; i < mr; i++) d[i] = i < rv ? x0[i * k + pc + q] : 0.0f;
                }
            } else if (g->a_bf16) {
                for (int64_t q = 0; q < ks; q++)
                    for (int64_t i = 0; i < mr; i++) {
                        uint32_t lo = 0, hi = 0;
                        int64_t e = pc + 2 * q;
                        if (i < rv) {
                            lo = snug_f32_to_bf16(x0[i * k + e]);
                            hi = e + 1 < k ? snug_f32_to_bf16(x0[i * k + e + 1]) : 0;
                        }
                        pan[q * mr + i] = lo | hi << 16;
                    }
            } else {
                for (int64_t q = 0; q < ks; q++) {
                    float *d = (float *)(void *)(pan + q * mr * 2);
                    int64_t e = pc + 2 * q;
                    for (int64_t i = 0; i < mr; i++) {
                        d[2 * i] = i < rv ? x0[i * k + e] : 0.0f;
                        d[2 * i + 1] = i < rv && e + 1 < k ? x0[i * k + e + 1] : 0.0f;
                    }
                }
            }
        }
    }
}

/* Where the driver is in the weight: the block of rows [jc, jc + nc) and
 * elements [pc, pc + kc); a register panel is nr rows of it. */
typedef struct wpos {
    int64_t jc, nc, pc, kc;
} wpos;

/* The panel `ahead` panels after panel jr of block p (same rows the next
 * kc when past the block's rows; none past the thread's rows o1): its
 * first row, last row and elements. False when there is none. */
static bool panel_ahead(const snug_gemm_ops *g, wpos p, int64_t jr, int64_t ahead, int64_t k,
                        int64_t o1, int64_t *r0, int64_t *r1, int64_t *e0, int64_t *len)
{
    int64_t j = jr + ahead * g->nr;
    while (j >= p.nc) {
        j -= p.nc;
        p.pc += p.kc;
        if (p.pc >= k) {
            p.pc = 0;
            p.jc += p.nc;
            p.nc = SNUG_MIN((int64_t)g->nc, o1 - p.jc);
            if (p.nc <= 0) return false;
        }
        p.kc = SNUG_MIN((int64_t)g->kc, k - p.pc);
    }
    *r0 = p.jc + j;
    *r1 = p.jc + SNUG_MIN(p.nc, j + g->nr);
    *e0 = p.pc;
    *len = p.kc;
    return true;
}

/* Asks for part `part` of `parts` of that panel to be fetched into L2 (the
 * parts split its rows' bytes evenly into 64-byte lines). */
static void prefetch_part(const void *w, size_t esz, int64_t k, int64_t r0, int64_t r1, int64_t e0,
                          int64_t len, int64_t part, int64_t parts)
{
    int64_t lines = ((int64_t)esz * len + 63) / 64, total = lines * (r1 - r0);
    for (int64_t i = total * part / parts; i < total * (part + 1) / parts; i++) {
        int64_t r = r0 + i / lines, l = i % lines;
        __builtin_prefetch((const char *)w + ((size_t)r * (size_t)k + (size_t)e0) * esz +
                               (size_t)l * 64,
                           0, 2);
    }
}

/* One thread's share: weight rows [o0, o1) against all n rows of x, packed
 * whole in ap; bp is the thread's block of packed w. While the tiles of
 * one register panel run, the panel PREFETCH_AHEAD panels on is fetched
 * into L2 a part per tile. */
enum { PREFETCH_AHEAD = 2 };

static void gemm_thread(const snug_gemm_ops *g, float *y, const uint32_t *ap, int64_t n,
                        const void *w, snug_dtype wdt, int64_t k, int64_t m, int64_t o0,
                        int64_t o1, uint32_t *bp)
{
    const int64_t nr = g->nr, mr = g->mr, aw = a_words(g), panels = (n + mr - 1) / mr;
    const size_t esz = snug_dtype_size(wdt);
    for (int64_t jc = o0; jc < o1; jc += g->nc) {
        int64_t nc = SNUG_MIN((int64_t)g->nc, o1 - jc);
        for (int64_t pc = 0; pc < k; pc += g->kc) {
            int64_t kc = SNUG_MIN((int64_t)g->kc, k - pc);
            int64_t ksteps = steps_of(g, kc), q0 = steps_of(g, pc);
            wpos here = {jc, nc, pc, kc};
            const uint32_t *ablock = ap + q0 * panels * mr * aw; /* this block of k, packed */
            for (int64_t ic = 0; ic < n; ic += g->mc) {
                int64_t mc = SNUG_MIN((int64_t)g->mc, n - ic);
                int64_t tiles = (mc + mr - 1) / mr;
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    uint32_t *panel = bp + (jr / nr) * ksteps * nr;
                    int32_t nr_v = (int32_t)SNUG_MIN(nr, nc - jr);
                    int64_t r0 = 0, r1 = 0, e0 = 0, len = 0;
                    bool pf = ic == 0 &&
                              panel_ahead(g, here, jr, PREFETCH_AHEAD, k, o1, &r0, &r1, &e0, &len);
                    if (ic == 0) g->pack_b(panel, w, wdt, k, jc + jr, nr_v, pc, kc, g->nr, g->pairs);
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        if (pf) prefetch_part(w, esz, k, r0, r1, e0, len, ir / mr, tiles);
                        g->micro(ksteps, ablock + ((ic + ir) / mr) * ksteps * mr * aw, panel,
                                 y + (ic + ir) * m + jc + jr, m, (int32_t)SNUG_MIN(mr, mc - ir),
                                 nr_v, pc > 0);
                    }
                }
            }
        }
    }
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

snug_insn snug_matmul_blocked_insn(const snug_gemm_ops *g, int64_t n)
{
    return n <= SNUG_GEMV_MAX_N ? g->gemv_insn : g->insn;
}

void snug_matmul_blocked(const snug_gemm_ops *g, float *y, const float *x, int64_t n,
                         const void *w, snug_dtype wdt, int64_t k, int64_t m, void *scratch,
                         int32_t n_threads)
{
    if (n <= 0 || m <= 0) return;
    if (k <= 0) {
        memset(y, 0, (size_t)n * (size_t)m * sizeof(float));
        return;
    }
    SNUG_ASSERT(g->kc <= SNUG_GEMM_KC_MAX && g->nc <= SNUG_GEMM_NC_MAX &&
                g->mc <= SNUG_GEMM_MC_MAX && g->mr <= SNUG_GEMM_MR_MAX && g->nc % g->nr == 0 &&
                g->kc % 2 == 0 && g->mc % g->mr == 0);
    bool gemv = n <= SNUG_GEMV_MAX_N;
    /* rows go to threads in units of a register tile (or 8 rows) that are
     * also a whole number of 16-float lines of y */
    int64_t tile = gemv ? 8 : g->nr;
    int64_t unit = tile / gcd64(tile, 16) * 16;
    int64_t units = (m + unit - 1) / unit;
    int64_t nt = SNUG_MAX(1, SNUG_MIN((int64_t)n_threads, units));
    /* tiny products are not worth waking threads for */
    if ((double)n * (double)k * (double)m < 65536.0) nt = 1;
    unsigned char *s = scratch;
    uint32_t *ap = (uint32_t *)(void *)(s + (size_t)nt * b_bytes());
    int64_t panels = (n + g->mr - 1) / g->mr;
    if (nt == 1) {
        if (gemv) {
            g->gemv(y, x, n, w, wdt, k, m, 0, m);
        } else {
            pack_a(g, ap, x, n, k, panels, 0, panels);
            gemm_thread(g, y, ap, n, w, wdt, k, m, 0, m, (uint32_t *)scratch);
        }
        return;
    }
#pragma omp parallel num_threads((int)nt)
    {
        int64_t tid = omp_get_thread_num(), nth = omp_get_num_threads();
        int64_t o0 = SNUG_MIN(m, units * tid / nth * unit);
        int64_t o1 = SNUG_MIN(m, units * (tid + 1) / nth * unit);
        if (gemv) {
            if (o0 < o1) g->gemv(y, x, n, w, wdt, k, m, o0, o1);
        } else {
            pack_a(g, ap, x, n, k, panels, panels * tid / nth, panels * (tid + 1) / nth);
#pragma omp barrier
            if (o0 < o1)
                gemm_thread(g, y, ap, n, w, wdt, k, m, o0, o1,
                            (uint32_t *)(void *)(s + (size_t)tid * b_bytes()));
        }
    }
}
