/*
 * matmul.c: the matmul kernel at the shapes of a Llama-3.2-1B layer against
 * limits measured in the same run (bench/limits.h).
 *
 *   matmul [THREADS [ISA [DTYPE [--l1 | --peak | --gemv | --scaling]]]]
 *                                    defaults: 2, the best the CPU runs (ISA
 *                                    "-" for it too), bf16; DTYPE a torch name
 *                                    or a block format (q4_k, q6_k, q8_0, ...:
 *                                    seeded values quantized by snug's own
 *                                    quantizer); --l1 (block formats) prints
 *                                    only the kernel's ceiling below, as JSON;
 *                                    --peak only the best peak of the
 *                                    instructions that could serve DTYPE on
 *                                    THREADS threads (bench_peaks), as JSON;
 *                                    --gemv (block formats) only the
 *                                    matrix-vector product's compute limit
 *                                    below, as JSON; --scaling only the GEMM
 *                                    at 512 rows on 1 thread against
 *                                    THREADS, call by call in turn
 *                                    (print_scaling)
 *
 * The weights are packed in the kernels' panel layout, as the loader holds
 * them (a block format's interleaved across its rows where linear.h says). For bf16 the kernels' instruction is chosen by the same calibration
 * a model makes (snug_kernels_calibrate); the bench prints what it measured
 * and which one ran.
 *
 * n = 1 (decode) is memory-bound: weight GB/s against the read bandwidth
 * (measured before and after; the ratio uses the better). The weights are
 * spread over copies that together exceed the caches, and the calls cycle
 * through them, as a forward pass goes through layers. n = 32 and n = 512
 * are compute-bound: GFLOP/s (2 n k m / time) against the best peak of
 * every multiply-add instruction the machine has that could serve the
 * dtype (vfmadd231ps ymm and zmm, vdpbf16ps zmm for bf16, and for block
 * formats the 8-bit products, vpdpbusd and vpmaddubsw), measured on the
 * same threads: the machine's limit, whichever instruction ran. Then
 * the row sweep: a 2048 x 8192 bf16 matmul for 1 to 32 rows of x, whose
 * time must grow smoothly (8 rows within 1.3 x 4 rows).
 *
 * For a block format, first the kernel's ceiling on this core: its 8-bit
 * GEMM on one thread over one panel of 16 rows (k 1024) and 64 rows of x,
 * all held in L1 and x quantized once, so that nothing but its own
 * instructions limits it, against the same thread's peak of its
 * instruction, and beside it the rate of vpdpbusd zmm taking its x by
 * broadcast from memory as these kernels do (bench_dpbusd_bcast_rate).
 * What a matmul or a step reaches against the peak cannot exceed this
 * ratio. Not part of make test.
 */
#include "base/dtype.h"
#include "base/quant.h"
#include "kernels/k_impl.h"
#include "kernels/kernels.h"
#include "kernels/qdot.h"
#include "limits.h"
#include "stats.h"

#include <math.h>
#include <stdint.h>
#include <strings.h>

/* The weight dtype named name: a torch name or a block format's, either
 * case (SNUG_DTYPE_NONE for neither). */
static snug_dtype weight_dtype(const char *name)
{
    snug_dtype dt = snug_dtype_from_torch(name);
    for (int d = 1; d < SNUG_DTYPE_COUNT && dt == SNUG_DTYPE_NONE; d++)
        if (snug_dtype_is_quant((snug_dtype)d) && snug_qtype_quantizable(snug_dtype_qtype((snug_dtype)d)) &&
            strcasecmp(name, snug_dtype_name((snug_dtype)d)) == 0)
            dt = (snug_dtype)d;
    return dt;
}

typedef struct {
    const char *name;
    int64_t k, m;
} shape;

/* The block-format GEMM's ceiling (the comment at the top): its GOP/s on
 * one thread with everything in L1, the thread's peak of its instruction
 * and the broadcast rate (0 without AVX-512 VNNI), printed as JSON (json)
 * or a line. Returns false (nothing printed) where kern runs no 8-bit GEMM
 * for wdt. */
static bool print_l1_ceiling(const snug_kernels *kern, snug_dtype wdt, bool json)
{
    const int64_t k = 1024, m = SNUG_PANEL, n = 64;
    if (!kern->qgemm || !snug_dtype_is_quant(wdt)) return false;
    snug_qtype qt = snug_dtype_qtype(wdt);
    size_t wbytes = snug_linear_bytes(wdt, m, k), rbytes = snug_qtype_bytes(qt, k * m);
    size_t xbytes = SNUG_MAX(snug_qgemm_x_bytes(n, k), snug_qlanes_x_bytes(n, k));
    size_t tbytes = SNUG_MAX(snug_qgemm_panel_bytes(k), snug_qlanes_scratch_bytes(k));
    float *v = malloc((size_t)(n * k) * sizeof(float)), *y = malloc((size_t)(n * m) * sizeof(float));
    void *raw = malloc(rbytes), *tmp = malloc((size_t)(k / SNUG_X8_BLOCK) * sizeof(snug_x8_block));
    unsigned char *w = aligned_alloc(64, snug_round_up(wbytes, 64));
    void *xt = aligned_alloc(64, snug_round_up(xbytes, 64)), *tb = aligned_alloc(64, snug_round_up(tbytes, 64));
    for (int64_t i = 0; i < n * k; i++) v[i] = (float)(((uint64_t)i * 11400714819323198485ull) >> 44) / 1048576.0f - 0.5f;
    snug_quant_quantize(qt, v, raw, k * m);
    snug_linear_pack(w, raw, wdt, m, k);
    snug_qgemm_pack_x(xt, v, n, k, wdt, 0, (n + SNUG_QGEMM_XROWS - 1) / SNUG_QGEMM_XROWS, tmp);
    snug_linear lin = {wdt, m, k, w};
    const long reps = 2000;
    double best = 1e30;
    for (int tr = 0; tr < 9; tr++) {
        double t0 = bench_now();
        for (long r = 0; r < reps; r++) kern->qgemm(y, m, xt, n, &lin, 0, 1, tb);
        best = SNUG_MIN(best, (bench_now() - t0) / (double)reps);
    }
    double ops = 2.0 * (double)(n * k * m) / best, peak = bench_insn_peak(kern->qgemm_insn, 1, 9);
    double bcast = kern->qgemm_insn == SNUG_INSN_DPBUSD_ZMM ? bench_dpbusd_bcast_rate(1, 9) : 0;
    if (json)
        printf("{\"dtype\": \"%s\", \"insn\": \"%s\", \"l1_gops\": %.1f, \"peak_gops\": %.1f, \"bcast_gops\": %.1f}\n",
               snug_dtype_name(wdt), snug_insn_name(kern->qgemm_insn), ops / 1e9, peak / 1e9, bcast / 1e9);
    else {
        printf("the kernel's ceiling (1 thread, one panel of k %ld and %ld rows of x in L1): %.1f GOP/s = %.2f of %s's "
               "peak (%.1f)", (long)k, (long)n, ops / 1e9, peak > 0 ? ops / peak : 0.0, snug_insn_name(kern->qgemm_insn),
               peak / 1e9);
        if (bcast > 0) printf("; vpdpbusd zmm with x by broadcast: %.2f of it", bcast / peak);
        printf("\n");
    }
    free(v), free(y), free(raw), free(tmp), free(w), free(xt), free(tb);
    return true;
}

/* The matrix-vector limit's trials: at most GEMV_TRIALS, for GEMV_WINDOW
 * seconds (and at least 9). */
enum { GEMV_TRIALS = 2048 };
#define GEMV_WINDOW 1.5

/* One thread's share of the matrix-vector measurement: its own panels of
 * a matrix that fits in its L2, called again and again. */
typedef struct gemv_job {
    const snug_kernels *kern;
    const snug_linear *w;
    const snug_x8_block *x8;
    float *y;
    long reps;
    int64_t panels; /* each thread's */
} gemv_job;

static void gemv_part(void *ctx, int32_t thread, int32_t n_threads)
{
    (void)n_threads;
    const gemv_job *j = ctx;
    int64_t p0 = thread * j->panels;
    for (long r = 0; r < j->reps; r++)
        j->kern->qgemv(j->y, j->w->m, j->x8, 1, j->w, p0, p0 + j->panels);
}

/* The block-format matrix-vector product's compute limit: the weight bytes
 * per second of the kernel decode runs (one row of x) on `threads` threads
 * at once, each over its own 4 panels (64 rows, k 4096: 147 KiB of Q4_K,
 * 215 of Q6_K, 272 of Q8_0), held in L2, so that memory does not limit it:
 * what a decode step of those weights could reach with the bandwidth
 * unbounded. A trial (400 calls) takes a few milliseconds, and a host's
 * neighbours can halve a core's rate for seconds at a time (on a Zen 3 VM
 * the best of 9 trials in a row read 30-54 GB/s of Q4_K from one run to
 * the next): so trials go on for GEMV_WINDOW seconds and the limit is the
 * best, their median printed beside it. Printed as JSON; false (nothing
 * printed) without a kernel for wdt. */
static bool print_gemv_limit(const snug_kernels *kern, snug_dtype wdt, int threads)
{
    const int64_t k = 4096, per = 4, m = (int64_t)threads * per * SNUG_PANEL;
    snug_error err = {0};
    snug_pool *pool = NULL;
    if (!kern->qgemv || !snug_dtype_is_quant(wdt) || snug_pool_create(threads, 0, &pool, &err) != SNUG_OK)
        return false;
    snug_qtype qt = snug_dtype_qtype(wdt);
    size_t wbytes = snug_linear_bytes(wdt, m, k);
    float *v = malloc((size_t)(m * k) * sizeof(float)), *y = malloc((size_t)m * sizeof(float));
    void *raw = malloc(snug_qtype_bytes(qt, k * m));
    snug_x8_block *x8 = malloc((size_t)(k / SNUG_X8_BLOCK) * sizeof *x8);
    unsigned char *w = aligned_alloc(64, snug_round_up(wbytes, 64));
    for (int64_t i = 0; i < m * k; i++) v[i] = (float)(((uint64_t)i * 11400714819323198485ull) >> 44) / 1048576.0f - 0.5f;
    snug_quant_quantize(qt, v, raw, k * m);
    snug_linear_pack(w, raw, wdt, m, k);
    snug_x8_quantize(v, k, wdt, x8);
    snug_linear lin = {wdt, m, k, w};
    gemv_job job = {kern, &lin, x8, y, 400, per};
    double t[GEMV_TRIALS];
    int trials = 0;
    for (double start = bench_now(); trials < GEMV_TRIALS && (trials < 9 || bench_now() - start < GEMV_WINDOW);) {
        double t0 = bench_now();
        snug_pool_run(pool, gemv_part, &job);
        t[trials++] = bench_now() - t0;
    }
    double bytes = (double)wbytes * (double)job.reps, median = bench_median(t, trials); /* sorts t */
    printf("{\"dtype\": \"%s\", \"threads\": %d, \"insn\": \"%s\", \"gemv_gbs\": %.2f, \"gemv_gbs_median\": %.2f, "
           "\"trials\": %d, \"window_s\": %.1f}\n", snug_dtype_name(wdt), threads, snug_insn_name(kern->qgemv_insn),
           bytes / t[0] / 1e9, bytes / median / 1e9, trials, GEMV_WINDOW);
    snug_pool_free(pool);
    free(v), free(y), free(raw), free(x8), free(w);
    return true;
}

/* copies copies of an m x k matrix of wdt (seeded values, quantized by
 * snug's own quantizer for a block format) in the kernels' panel layout,
 * one after another, 64-byte aligned (free() it). */
static unsigned char *packed_weights(snug_dtype wdt, int64_t k, int64_t m, int copies)
{
    size_t wbytes = snug_linear_bytes(wdt, m, k);
    unsigned char *w = aligned_alloc(64, snug_round_up(wbytes * (size_t)copies, 64));
    float *tmp = malloc((size_t)(k * m) * sizeof(float));
    bool quant = snug_dtype_is_quant(wdt);
    void *raw = malloc(quant ? snug_qtype_bytes(snug_dtype_qtype(wdt), k * m) : (size_t)(k * m) * snug_dtype_size(wdt));
    for (int64_t i = 0; i < k * m; i++) tmp[i] = (float)(((uint64_t)i * 11400714819323198485ull) >> 44) / 1048576.0f - 0.5f;
    if (quant) snug_quant_quantize(snug_dtype_qtype(wdt), tmp, raw, k * m);
    else snug_convert(raw, wdt, tmp, SNUG_DTYPE_F32, (size_t)(k * m));
    for (int c = 0; c < copies; c++) snug_linear_pack(w + (size_t)c * wbytes, raw, wdt, m, k);
    free(tmp);
    free(raw);
    return w;
}

/* --scaling: the GEMM of each of the layer's matrices at 512 rows of x on
 * one thread and on `threads`, call by call in turn in this one process
 * (the two orders alternating), so that both meet the same minutes of the
 * host and its neighbours: each one's best and median GFLOP/s, against
 * the peak of the instruction that ran on as many threads, and the ratios
 * of the two. The best calls' ratio is how far the kernels scale;
 * the medians' the host's share of what a run meets. Returns false where
 * a pool or the buffers cannot be made. */
static bool print_scaling(const snug_kernels *kern, snug_dtype wdt, int threads)
{
    static const shape shapes[] = {{"qkv", 2048, 3072}, {"o", 2048, 2048}, {"gate_up", 2048, 16384}, {"down", 8192, 2048}};
    enum { CALLS = 16, N = 512 };
    snug_error err = {0};
    snug_pool *pools[2] = {NULL, NULL};
    if (snug_pool_create(1, 0, &pools[0], &err) != SNUG_OK || snug_pool_create(threads, 0, &pools[1], &err) != SNUG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        snug_pool_free(pools[0]);
        return false;
    }
    void *scratch = aligned_alloc(64, snug_round_up(snug_matmul_scratch_bytes(threads, N, 8192), 64));
    float *x = aligned_alloc(64, (size_t)N * 8192 * sizeof(float)), *y = aligned_alloc(64, (size_t)N * 16384 * sizeof(float));
    for (size_t i = 0; i < (size_t)N * 8192; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    snug_insn insn = snug_matmul_insn(kern, wdt, N);
    double p1 = bench_insn_peak(insn, 1, 9) / 1e9, pn = bench_insn_peak(insn, threads, 9) / 1e9;
    printf("isa %s, %s weights, %d rows of x, 1 thread against %d, %d calls each in turn; ran %s, its peak %.1f "
           "GFLOP/s on 1 thread, %.1f on %d\n", snug_isa_name(kern->isa), snug_dtype_name(wdt), N, threads, CALLS,
           snug_insn_name(insn), p1, pn, threads);
    for (size_t s = 0; s < SNUG_ARRAY_LEN(shapes); s++) {
        int64_t k = shapes[s].k, m = shapes[s].m;
        unsigned char *w = packed_weights(wdt, k, m, 1);
        snug_linear lin = {wdt, m, k, w};
        double t[2][CALLS], flops = 2.0 * (double)N * (double)k * (double)m;
        for (int c = 0; c < 2; c++) snug_matmul(kern, y, x, N, &lin, scratch, pools[c]); /* warm */
        for (int r = 0; r < CALLS; r++)
            for (int i = 0; i < 2; i++) {
                int c = (r + i) % 2;
                double t0 = bench_now();
                snug_matmul(kern, y, x, N, &lin, scratch, pools[c]);
                t[c][r] = bench_now() - t0;
            }
        double m1 = flops / bench_median(t[0], CALLS) / 1e9, b1 = flops / t[0][0] / 1e9; /* (sorted) */
        double mn = flops / bench_median(t[1], CALLS) / 1e9, bn = flops / t[1][0] / 1e9;
        printf("%-8s k=%-5ld m=%-6ld 1 thread best %6.1f median %6.1f GFLOP/s (%.2f, %.2f of the peak); %d threads "
               "best %6.1f median %6.1f (%.2f, %.2f); %d / 1: best %.2f, median %.2f\n", shapes[s].name, (long)k, (long)m,
               b1, m1, p1 > 0 ? b1 / p1 : 0.0, p1 > 0 ? m1 / p1 : 0.0, threads, bn, mn, pn > 0 ? bn / pn : 0.0,
               pn > 0 ? mn / pn : 0.0, threads, bn / b1, mn / m1);
        free(w);
    }
    free(scratch), free(x), free(y);
    snug_pool_free(pools[0]), snug_pool_free(pools[1]);
    return true;
}

int main(int argc, char **argv)
{
    bench_omp_passive(argv);
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    snug_isa isa = snug_isa_detect();
    if (argc > 2 && strcmp(argv[2], "-") != 0 && !snug_isa_from_name(argv[2], &isa)) {
        fprintf(stderr, "unknown instruction set %s\n", argv[2]);
        return 2;
    }
    snug_dtype wdt = argc > 3 ? weight_dtype(argv[3]) : SNUG_DTYPE_BF16;
    if (!snug_dtype_is_weight(wdt) && !snug_dtype_is_quant(wdt)) {
        fprintf(stderr, "unknown weight dtype\n");
        return 2;
    }
    snug_kernels kern;
    snug_error err = {0};
    if (snug_kernels_init(&kern, isa, &err) != SNUG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    snug_kernels_calibrate(&kern);
    if (argc > 4 && strcmp(argv[4], "--l1") == 0) return print_l1_ceiling(&kern, wdt, true) ? 0 : 1;
    if (argc > 4 && strcmp(argv[4], "--gemv") == 0) return print_gemv_limit(&kern, wdt, threads) ? 0 : 1;
    if (argc > 4 && strcmp(argv[4], "--scaling") == 0) return print_scaling(&kern, wdt, threads) ? 0 : 1;
    if (argc > 4 && strcmp(argv[4], "--peak") == 0) {
        double peaks[SNUG_INSN_COUNT], best = bench_peaks(wdt, threads, 9, peaks);
        int at = 0;
        for (int i = 0; i < SNUG_INSN_COUNT; i++)
            if (peaks[i] > peaks[at]) at = i;
        printf("{\"dtype\": \"%s\", \"threads\": %d, \"insn\": \"%s\", \"peak_gflops\": %.1f}\n",
               snug_dtype_name(wdt), threads, snug_insn_name((snug_insn)at), best / 1e9);
        return best > 0 ? 0 : 1;
    }
    snug_pool *pool = NULL;
    if (snug_pool_create(threads, 0, &pool, &err) != SNUG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const size_t bw_bytes = (size_t)512 << 20;
    double bw0 = bench_read_bandwidth(bw_bytes, threads, 5);
    double peaks[SNUG_INSN_COUNT];
    double best_peak = bench_peaks(wdt, threads, 9, peaks);
    static const shape shapes[] = {{"qkv", 2048, 3072},
                                   {"o", 2048, 2048},
                                   {"gate_up", 2048, 16384},
                                   {"down", 8192, 2048}};
    static const int64_t ns[] = {1, 32, 512};
    printf("isa %s, %d threads, %s weights\n", snug_isa_name(isa), threads, snug_dtype_name(wdt));
    printf("read bandwidth %.1f GB/s; peaks (GFLOP/s, %d threads):", bw0 / 1e9, threads);
    for (int i = 0; i < SNUG_INSN_COUNT; i++)
        if (peaks[i] > 0) printf(" %s %.1f", snug_insn_name((snug_insn)i), peaks[i] / 1e9);
    printf("; best %.1f\n", best_peak / 1e9);
    if (kern.calib_gflops[SNUG_INSN_DPBF16_ZMM] > 0)
        printf("calibration (1 thread, L1): f32-panel vfmadd231ps zmm %.1f GFLOP/s, vdpbf16ps zmm %.1f "
               "GFLOP/s: bf16 runs %s\n",
               kern.calib_gflops[SNUG_INSN_FMA_ZMM], kern.calib_gflops[SNUG_INSN_DPBF16_ZMM],
               snug_insn_name(kern.bf16_insn));
    print_l1_ceiling(&kern, wdt, false);
    void *scratch = aligned_alloc(64, snug_round_up(snug_matmul_scratch_bytes(threads, 512, 8192), 64));
    size_t x_max = 512 * 8192, y_max = 512 * 16384;
    float *x = aligned_alloc(64, x_max * sizeof(float));
    float *y = aligned_alloc(64, y_max * sizeof(float));
    for (size_t i = 0; i < x_max; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    double worst_bw = 1e9, worst_peak = 1e9;
    for (size_t s = 0; s < SNUG_ARRAY_LEN(shapes); s++) {
        int64_t k = shapes[s].k, m = shapes[s].m;
        size_t wbytes = snug_linear_bytes(wdt, m, k);
        int copies = (int)SNUG_MAX(1, (size_t)(256 << 20) / wbytes);
        unsigned char *w = packed_weights(wdt, k, m, copies);
        for (size_t ni = 0; ni < SNUG_ARRAY_LEN(ns); ni++) {
            int64_t n = ns[ni];
            double flops = 2.0 * (double)n * (double)k * (double)m;
            int reps = (int)SNUG_MAX(3, SNUG_MIN(4 * copies, 3e9 / flops));
            if (n > 1) reps = (int)SNUG_MAX(3, SNUG_MIN(50, 3e10 / flops));
            snug_linear lin = {wdt, m, k, w};
            snug_matmul(&kern, y, x, n, &lin, scratch, pool); /* warm */
            double best = 1e30, total = 0;
            for (int r = 0; r < reps; r++) {
                lin.data = w + (size_t)(r % copies) * wbytes;
                double t0 = bench_now();
                snug_matmul(&kern, y, x, n, &lin, scratch, pool);
                double dt = bench_now() - t0;
                total += dt;
                if (dt < best) best = dt;
            }
            double mean = total / reps;
            snug_insn insn = snug_matmul_insn(&kern, wdt, n);
            if (n == 1) {
                double gbs = (double)wbytes / mean;
                printf("%-8s k=%-5ld m=%-6ld n=%-4ld %8.3f ms  %6.1f GB/s  ratio %.2f "
                       "(best %.2f) of bandwidth; %s\n",
                       shapes[s].name, (long)k, (long)m, (long)n, mean * 1e3, gbs / 1e9,
                       gbs / bw0, (double)wbytes / best / bw0, snug_insn_name(insn));
                worst_bw = SNUG_MIN(worst_bw, gbs / bw0);
            } else {
                double gf = flops / mean;
                printf("%-8s k=%-5ld m=%-6ld n=%-4ld %8.3f ms  %6.1f GFLOP/s  ", shapes[s].name,
                       (long)k, (long)m, (long)n, mean * 1e3, gf / 1e9);
                if (best_peak > 0)
                    printf("ratio %.2f (best %.2f) of the best peak; ran %s (%.2f of its own)\n",
                           gf / best_peak, flops / best / best_peak, snug_insn_name(insn),
                           peaks[insn] > 0 ? gf / peaks[insn] : 0.0);
                else
                    printf("no instruction peak (scalar)\n");
                if (best_peak > 0) worst_peak = SNUG_MIN(worst_peak, gf / best_peak);
            }
        }
        free(w);
    }
    double rows[BENCH_ROWS_COUNT];
    bench_rows_ms(&kern, pool, rows);
    printf("rows sweep, bf16 k=%d m=%d:", BENCH_ROWS_K, BENCH_ROWS_M);
    for (int r = 0; r < BENCH_ROWS_COUNT; r++) printf(" n=%ld %.3f ms", (long)bench_rows_n[r], rows[r]);
    printf("\n  8 rows / 4 rows %.2f (goal <= 1.3; 8 rows at the peak of %s alone: %.2f); ms per row 4 -> 32: "
           "%.3f -> %.3f\n",
           rows[4] / rows[2], snug_insn_name(snug_matmul_insn(&kern, SNUG_DTYPE_BF16, 8)),
           bench_rows_floor(&kern, peaks, rows), rows[2] / 4, rows[6] / 32);
    double bw1 = bench_read_bandwidth(bw_bytes, threads, 5);
    printf("read bandwidth after: %.1f GB/s (before %.1f)\n", bw1 / 1e9, bw0 / 1e9);
    if (worst_peak < 1e9)
        printf("worst ratio: n=1 %.2f of bandwidth, n>1 %.2f of the best peak\n", worst_bw, worst_peak);
    else
        printf("worst ratio: n=1 %.2f of bandwidth (scalar kernels: no instruction peak)\n", worst_bw);
    snug_pool_free(pool);
    free(scratch);
    free(x);
    free(y);
    return 0;
}
