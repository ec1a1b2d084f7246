/*
 * matmul.c: the matmul kernel at the shapes of a Llama-3.2-1B layer, bf16
 * weights, against limits measured in the same run (bench/limits.h).
 *
 *   matmul [THREADS [ISA [DTYPE]]]   defaults: 2, the best the CPU runs, bf16
 *
 * n = 1 (decode) is memory-bound: weight GB/s against the read bandwidth
 * (measured before and after; the ratio uses the better). The weights are
 * spread over copies that together exceed the caches, and the calls cycle
 * through them, as a forward pass goes through layers. n = 32 and n = 512
 * are compute-bound: GFLOP/s (2 n k m / time) against the peak of the
 * instruction the kernel runs for that dtype and n (snug_kernels.
 * matmul_insn: vdpbf16ps zmm for bf16 on avx512bf16, vfmadd231ps zmm or
 * ymm otherwise; the scalar kernels have none), measured on the same
 * threads. Not part of make test.
 */
#include "base/dtype.h"
#include "kernels/kernels.h"
#include "limits.h"

#include <math.h>
#include <stdint.h>

typedef struct {
    const char *name;
    int64_t k, m;
} shape;

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    snug_isa isa = snug_isa_detect();
    if (argc > 2 && !snug_isa_from_name(argv[2], &isa)) {
        fprintf(stderr, "unknown instruction set %s\n", argv[2]);
        return 2;
    }
    snug_dtype wdt = argc > 3 ? snug_dtype_from_torch(argv[3]) : SNUG_DTYPE_BF16;
    if (!snug_dtype_is_weight(wdt)) {
        fprintf(stderr, "unknown weight dtype\n");
        return 2;
    }
    snug_kernels kern;
    snug_error err = {0};
    if (snug_kernels_init(&kern, isa, &err) != SNUG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const size_t bw_bytes = (size_t)512 << 20;
    double bw0 = bench_read_bandwidth(bw_bytes, threads, 5);
    static const shape shapes[] = {{"qkv", 2048, 3072},
                                   {"o", 2048, 2048},
                                   {"gate_up", 2048, 16384},
                                   {"down", 8192, 2048}};
    static const int64_t ns[] = {1, 32, 512};
    /* the peak of each instruction the compute-bound calls (n > 1) run */
    double peak_of[SNUG_INSN_COUNT] = {0};
    printf("isa %s, %d threads, %s weights\n", snug_isa_name(isa), threads,
           snug_dtype_name(wdt));
    printf("read bandwidth %.1f GB/s", bw0 / 1e9);
    for (size_t ni = 1; ni < SNUG_ARRAY_LEN(ns); ni++) {
        snug_insn insn = kern.matmul_insn(wdt, ns[ni]);
        char label[64];
        if (ni == 1 || insn != kern.matmul_insn(wdt, ns[ni - 1])) {
            if (insn != SNUG_INSN_SCALAR && peak_of[insn] == 0)
                peak_of[insn] = bench_insn_peak(insn, threads, 9);
            printf("; n=%ld: limit %s", (long)ns[ni], bench_insn_label(insn, threads, label, sizeof label));
            if (insn != SNUG_INSN_SCALAR) printf(", peak %.1f GFLOP/s", peak_of[insn] / 1e9);
        }
    }
    printf("\n");
    size_t esz = snug_dtype_size(wdt);
    void *scratch = aligned_alloc(64, snug_round_up(snug_matmul_scratch_bytes(threads, 512, 8192), 64));
    size_t x_max = 512 * 8192, y_max = 512 * 16384;
    float *x = aligned_alloc(64, x_max * sizeof(float));
    float *y = aligned_alloc(64, y_max * sizeof(float));
    for (size_t i = 0; i < x_max; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    double worst_bw = 1e9, worst_peak = 1e9;
    for (size_t s = 0; s < SNUG_ARRAY_LEN(shapes); s++) {
        int64_t k = shapes[s].k, m = shapes[s].m;
        size_t wbytes = (size_t)(k * m) * esz;
        int copies = (int)SNUG_MAX(1, (size_t)(256 << 20) / wbytes);
        void *w = aligned_alloc(64, snug_round_up(wbytes * (size_t)copies, 64));
        float *tmp = malloc((size_t)(k * m) * sizeof(float));
        for (int64_t i = 0; i < k * m; i++)
            tmp[i] = (float)(((uint64_t)i * 11400714819323198485ull) >> 44) / 1048576.0f - 0.5f;
        for (int c = 0; c < copies; c++)
            snug_convert((char *)w + (size_t)c * wbytes, wdt, tmp, SNUG_DTYPE_F32,
                         (size_t)(k * m));
        free(tmp);
        for (size_t ni = 0; ni < SNUG_ARRAY_LEN(ns); ni++) {
            int64_t n = ns[ni];
            double flops = 2.0 * (double)n * (double)k * (double)m;
            int reps = (int)SNUG_MAX(3, SNUG_MIN(4 * copies, 3e9 / flops));
            if (n > 1) reps = (int)SNUG_MAX(3, SNUG_MIN(50, 3e10 / flops));
            kern.matmul(y, x, n, w, wdt, k, m, scratch, threads); /* warm */
            double best = 1e30, total = 0;
            for (int r = 0; r < reps; r++) {
                const void *wc = (const char *)w + (size_t)(r % copies) * wbytes;
                double t0 = bench_now();
                kern.matmul(y, x, n, wc, wdt, k, m, scratch, threads);
                double dt = bench_now() - t0;
                total += dt;
                if (dt < best) best = dt;
            }
            double mean = total / reps;
            if (n == 1) {
                double gbs = (double)wbytes / mean;
                printf("%-8s k=%-5ld m=%-6ld n=%-4ld %8.3f ms  %6.1f GB/s  ratio %.2f "
                       "(best %.2f)\n",
                       shapes[s].name, (long)k, (long)m, (long)n, mean * 1e3, gbs / 1e9,
                       gbs / bw0, (double)wbytes / best / bw0);
                worst_bw = SNUG_MIN(worst_bw, gbs / bw0);
            } else {
                double gf = flops / mean, peak = peak_of[kern.matmul_insn(wdt, n)];
                printf("%-8s k=%-5ld m=%-6ld n=%-4ld %8.3f ms  %6.1f GFLOP/s  ", shapes[s].name,
                       (long)k, (long)m, (long)n, mean * 1e3, gf / 1e9);
                if (peak > 0)
                    printf("ratio %.2f (best %.2f) of %s\n", gf / peak, flops / best / peak,
                           snug_insn_name(kern.matmul_insn(wdt, n)));
                else
                    printf("no instruction peak (scalar)\n");
                if (peak > 0) worst_peak = SNUG_MIN(worst_peak, gf / peak);
            }
        }
        free(w);
    }
    double bw1 = bench_read_bandwidth(bw_bytes, threads, 5);
    printf("read bandwidth after: %.1f GB/s (before %.1f)\n", bw1 / 1e9, bw0 / 1e9);
    if (worst_peak < 1e9)
        printf("worst ratio: n=1 %.2f of bandwidth, n>1 %.2f of the instruction's peak\n", worst_bw,
               worst_peak);
    else
        printf("worst ratio: n=1 %.2f of bandwidth (scalar kernels: no instruction peak)\n", worst_bw);
    free(scratch);
    free(x);
    free(y);
    return 0;
}
