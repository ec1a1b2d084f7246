/*
 * limits.h: the hardware limits the compute benchmarks compare against,
 * measured in the same run (static functions: each bench program is its own
 * program and includes this):
 *
 *   bench_read_bandwidth  a STREAM-like read: n_threads threads each sum
 *                         their contiguous share of a buffer much larger
 *                         than the caches, eight independent accumulators
 *                         (AVX2 loads when the CPU has it); bytes/s
 *   bench_fma_peak        a register-only loop of independent FMAs per
 *                         thread: vfmadd231ps ymm (avx2), zmm (avx512), or
 *                         vdpbf16ps zmm (avx512bf16, 4 flops per lane pair);
 *                         flop/s
 *
 * Each returns the best of a few tries (the machine is noisy).
 */
#ifndef SNUG_BENCH_LIMITS_H
#define SNUG_BENCH_LIMITS_H

#include "base/device.h"
#include "kernels/kernels.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BENCH_X86 1
#endif

static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#ifdef BENCH_X86
__attribute__((target("avx2"))) static double bench_sum_avx2(const float *p, size_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
        a4 = _mm256_add_ps(a4, _mm256_load_ps(p + i + 32));
        a5 = _mm256_add_ps(a5, _mm256_load_ps(p + i + 40));
        a6 = _mm256_add_ps(a6, _mm256_load_ps(p + i + 48));
        a7 = _mm256_add_ps(a7, _mm256_load_ps(p + i + 56));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    float f[8];
    _mm256_storeu_ps(f, s);
    return (double)f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#endif

static double bench_sum_plain(const float *p, size_t n)
{
    float a[8] = {0};
    for (size_t i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) a[j] += p[i + j];
    return (double)a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

/* Read bandwidth in bytes/s over a buffer of `bytes` (say 4x the last-level
 * cache or more), best of `tries` passes; 0 when the buffer cannot be had. */
static double bench_read_bandwidth(size_t bytes, int n_threads, int tries)
{
    size_t n = bytes / sizeof(float) / 64 * 64;
    /* From snug's allocator, as the weights are: the same (huge) pages, so
     * the limit and the decode read memory the same way. */
    float *buf = snug_mem_alloc(SNUG_MEM_OTHER, n * sizeof(float), NULL);
    if (!buf) return 0;
    bool avx2 = snug_isa_detect() >= SNUG_ISA_AVX2;
    double best = 1e30, sink = 0;
#pragma omp parallel num_threads(n_threads)
    { /* first touch by the threads that read */
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t b = n / 64 * (size_t)t / (size_t)nt * 64, e = n / 64 * (size_t)(t + 1) / (size_t)nt * 64;
        for (size_t i = b; i < e; i++) buf[i] = (float)(i & 7);
    }
    for (int k = 0; k < tries; k++) {
        double t0 = bench_now();
#pragma omp parallel num_threads(n_threads) reduction(+ : sink)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            size_t b = n / 64 * (size_t)t / (size_t)nt * 64;
            size_t e = n / 64 * (size_t)(t + 1) / (size_t)nt * 64;
#ifdef BENCH_X86
            sink += avx2 ? bench_sum_avx2(buf + b, e - b) : bench_sum_plain(buf + b, e - b);
#else
            (void)avx2;
            sink += bench_sum_plain(buf + b, e - b);
#endif
        }
        double dt = bench_now() - t0;
        if (dt < best) best = dt;
    }
    snug_mem_free(buf);
    if (sink == 42.4242) printf(" ");
    return (double)(n * sizeof(float)) / best;
}

#ifdef BENCH_X86
/* iters x 12 independent FMAs of 8 lanes */
__attribute__((target("avx2,fma"))) static float bench_fma_avx2(long iters)
{
    __m256 m = _mm256_set1_ps(0.999999f), d = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(0.1f), a1 = _mm256_set1_ps(0.2f), a2 = _mm256_set1_ps(0.3f),
           a3 = _mm256_set1_ps(0.4f), a4 = _mm256_set1_ps(0.5f), a5 = _mm256_set1_ps(0.6f),
           a6 = _mm256_set1_ps(0.7f), a7 = _mm256_set1_ps(0.8f), a8 = _mm256_set1_ps(0.9f),
           a9 = _mm256_set1_ps(1.0f), a10 = _mm256_set1_ps(1.1f), a11 = _mm256_set1_ps(1.2f);
    for (long i = 0; i < iters; i++) {
        a0 = _mm256_fmadd_ps(a0, m, d);
        a1 = _mm256_fmadd_ps(a1, m, d);
        a2 = _mm256_fmadd_ps(a2, m, d);
        a3 = _mm256_fmadd_ps(a3, m, d);
        a4 = _mm256_fmadd_ps(a4, m, d);
        a5 = _mm256_fmadd_ps(a5, m, d);
        a6 = _mm256_fmadd_ps(a6, m, d);
        a7 = _mm256_fmadd_ps(a7, m, d);
        a8 = _mm256_fmadd_ps(a8, m, d);
        a9 = _mm256_fmadd_ps(a9, m, d);
        a10 = _mm256_fmadd_ps(a10, m, d);
        a11 = _mm256_fmadd_ps(a11, m, d);
        __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    return _mm256_cvtss_f32(s);
}

/* iters x 12 independent FMAs (or dot products of bf16 pairs) of 16 lanes */
__attribute__((target("avx512f,avx512bf16"))) static float bench_fma_avx512(long iters, bool bf16)
{
    __m512 a[12];
    for (int j = 0; j < 12; j++) a[j] = _mm512_set1_ps(0.1f * (float)j);
    __m512 m = _mm512_set1_ps(0.999999f), d = _mm512_set1_ps(1e-7f);
    __m512bh mb = (__m512bh)_mm512_set1_epi32(0x3F803F80), db = mb;
    if (bf16) {
        for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
            for (int j = 0; j < 12; j++) a[j] = _mm512_dpbf16_ps(a[j], mb, db);
            __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]));
        }
    } else {
        for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
            for (int j = 0; j < 12; j++) a[j] = _mm512_fmadd_ps(a[j], m, d);
            __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]));
        }
    }
    __m512 s = a[0];
    for (int j = 1; j < 12; j++) s = _mm512_add_ps(s, a[j]);
    return _mm512_reduce_add_ps(s);
}
#endif

/* Arithmetic peak in flop/s of n_threads threads for the matmul inner
 * instruction of isa (an FMA counts 2 flops per lane, vdpbf16ps 4); 0 for
 * scalar. Best of `tries`. */
static double bench_fma_peak(snug_isa isa, int n_threads, int tries)
{
#ifdef BENCH_X86
    if (isa == SNUG_ISA_SCALAR || isa > snug_isa_detect()) return 0;
    const long iters = 20 * 1000 * 1000;
    double flops_per_iter = isa == SNUG_ISA_AVX2 ? 12.0 * 8 * 2
                            : isa == SNUG_ISA_AVX512 ? 12.0 * 16 * 2
                                                     : 12.0 * 16 * 4;
    double best = 1e30, sink = 0;
    for (int k = 0; k < tries; k++) {
        double t0 = bench_now();
#pragma omp parallel num_threads(n_threads) reduction(+ : sink)
        sink += isa == SNUG_ISA_AVX2 ? bench_fma_avx2(iters)
                                     : bench_fma_avx512(iters, isa == SNUG_ISA_AVX512_BF16);
        double dt = bench_now() - t0;
        if (dt < best) best = dt;
    }
    if (sink == 42.4242) printf(" ");
    return flops_per_iter * (double)iters * n_threads / best;
#else
    (void)isa, (void)n_threads, (void)tries;
    return 0;
#endif
}

#endif /* SNUG_BENCH_LIMITS_H */
