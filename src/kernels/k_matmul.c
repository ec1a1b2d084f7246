/*
 * k_matmul.c: the threaded driver of the SIMD matmuls: splits the weight
 * rows across OpenMP threads, then runs the instruction set's matrix-vector
 * routine (n <= SNUG_GEMV_MAX_N) or the blocked GEMM loops around its
 * packing routines and micro-kernel (see k_impl.h).
 *
 * Each output element is computed by the same sequence of operations
 * whatever the number of threads (row blocks are aligned to the register
 * tile), so results do not depend on n_threads.
 */
#include "dtype.h"
#include "kernels/k_impl.h"

#include <omp.h>
#include <string.h>

static size_t b_bytes(void)
{
    return snug_round_up((size_t)SNUG_GEMM_KC_MAX * SNUG_GEMM_NC_MAX * sizeof(float), 64);
}

static size_t a_bytes(void)
{
    size_t block = (size_t)SNUG_GEMM_MC_MAX * SNUG_GEMM_KC_MAX * sizeof(float);
    return snug_round_up(SNUG_MAX(block, SNUG_GEMM_A_FULL_BYTES), 64);
}

size_t snug_matmul_thread_bytes(void) { return b_bytes() + a_bytes(); }

/* Packs rows [t0, t0 + rows) of x, elements [p0, p0 + kc) of each, as
 * ceil(rows / mr) panels pstride 32-bit values apart (see k_impl.h). */
static void pack_a(uint32_t *ap, const float *x, int64_t k, int64_t t0, int64_t rows, int64_t p0,
                   int64_t kc, int32_t mr, bool pairs, int64_t pstride)
{
    int64_t ksteps = pairs ? (kc + 1) / 2 : kc;
    for (int64_t i0 = 0; i0 < rows; i0 += mr) {
        uint32_t *pan = ap + (i0 / mr) * pstride;
        for (int32_t i = 0; i < mr; i++) {
            if (i0 + i >= rows) {
                for (int64_t q = 0; q < ksteps; q++) pan[q * mr + i] = 0;
                continue;
            }
            const float *xr = x + (t0 + i0 + i) * k + p0;
            if (pairs) {
                for (int64_t q = 0; q < ksteps; q++) {
                    uint32_t lo = snug_f32_to_bf16(xr[2 * q]);
                    uint32_t hi = 2 * q + 1 < kc ? snug_f32_to_bf16(xr[2 * q + 1]) : 0;
                    pan[q * mr + i] = lo | hi << 16;
                }
            } else {
                for (int64_t q = 0; q < ksteps; q++) memcpy(&pan[q * mr + i], &xr[q], 4);
            }
        }
    }
}

/* One thread's share: weight rows [o0, o1), all n rows of x. When all of x
 * fits packed, it is packed once and the weight streams one register panel
 * at a time (each row read front to back); otherwise the BLIS order, with
 * each weight panel packed on its first use. */
static void gemm_thread(const snug_gemm_ops *g, float *y, const float *x, int64_t n,
                        const void *w, snug_dtype wdt, int64_t k, int64_t m, int64_t o0,
                        int64_t o1, unsigned char *scratch)
{
    uint32_t *bp = (uint32_t *)(void *)scratch;
    uint32_t *ap = (uint32_t *)(void *)(scratch + b_bytes());
    const int64_t nr = g->nr, mr = g->mr;
    int64_t ksteps_all = g->pairs ? (k + 1) / 2 : k;
    int64_t n_pad = (n + mr - 1) / mr * mr;
    bool a_full = (size_t)n_pad * (size_t)ksteps_all * 4 <= a_bytes();
    if (a_full) pack_a(ap, x, k, 0, n, 0, k, g->mr, g->pairs, ksteps_all * mr);
    int64_t nc_blk = a_full ? nr : g->nc, mc_blk = a_full ? n : g->mc;
    for (int64_t jc = o0; jc < o1; jc += nc_blk) {
        int64_t nc = SNUG_MIN(nc_blk, o1 - jc);
        for (int64_t pc = 0; pc < k; pc += g->kc) {
            int64_t kc = SNUG_MIN((int64_t)g->kc, k - pc);
            int64_t ksteps = g->pairs ? (kc + 1) / 2 : kc;
            for (int64_t ic = 0; ic < n; ic += mc_blk) {
                int64_t mc = SNUG_MIN(mc_blk, n - ic);
                const uint32_t *a = ap;
                int64_t a_stride = ksteps * mr;
                if (a_full) {
                    a = ap + (g->pairs ? pc / 2 : pc) * mr;
                    a_stride = ksteps_all * mr;
                } else {
                    pack_a(ap, x, k, ic, mc, pc, kc, g->mr, g->pairs, a_stride);
                }
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    uint32_t *panel = bp + (jr / nr) * ksteps * nr;
                    int32_t nr_v = (int32_t)SNUG_MIN(nr, nc - jr);
                    if (ic == 0)
                        g->pack_b(panel, w, wdt, k, jc + jr, nr_v, pc, kc, g->nr, g->pairs,
                                  a_full);
                    for (int64_t ir = 0; ir < mc; ir += mr)
                        g->micro(ksteps, a + (ir / mr) * a_stride, panel,
                                 y + (ic + ir) * m + jc + jr, m,
                                 (int32_t)SNUG_MIN(mr, mc - ir), nr_v, pc > 0);
                }
            }
        }
    }
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
                g->mc <= SNUG_GEMM_MC_MAX && g->nc % g->nr == 0 && g->kc % 2 == 0 &&
                g->mc % g->mr == 0);
    bool gemv = n <= SNUG_GEMV_MAX_N;
    /* rows go to threads in units of a register tile (or 8 rows) */
    int64_t unit = gemv ? 8 : g->nr;
    int64_t units = (m + unit - 1) / unit;
    int64_t nt = SNUG_MAX(1, SNUG_MIN((int64_t)n_threads, units));
    /* tiny products are not worth waking threads for */
    if ((double)n * (double)k * (double)m < 65536.0) nt = 1;
    size_t per_thread = snug_matmul_thread_bytes();
    if (nt == 1) {
        if (gemv)
            g->gemv(y, x, n, w, wdt, k, m, 0, m);
        else
            gemm_thread(g, y, x, n, w, wdt, k, m, 0, m, scratch);
        return;
    }
#pragma omp parallel num_threads((int)nt)
    {
        int64_t tid = omp_get_thread_num(), nth = omp_get_num_threads();
        int64_t o0 = SNUG_MIN(m, units * tid / nth * unit);
        int64_t o1 = SNUG_MIN(m, units * (tid + 1) / nth * unit);
        if (o0 < o1) {
            if (gemv)
                g->gemv(y, x, n, w, wdt, k, m, o0, o1);
            else
                gemm_thread(g, y, x, n, w, wdt, k, m, o0, o1,
                            (unsigned char *)scratch + (size_t)tid * per_thread);
        }
    }
}
