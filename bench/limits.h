/*
 * limits.h: the hardware limits the compute benchmarks compare against,
 * measured in the same run (static functions: each bench program is its own
 * program and includes this):
 *
 *   bench_read_bandwidth  a STREAM-like read: n_threads threads each sum
 *                         their contiguous share of a buffer much larger
 *                         than the caches, eight independent accumulators
 *                         (AVX2 loads when the CPU has it); bytes/s
 *   bench_insn_peak       a register-only loop of independent chains of
 *                         one multiply-add instruction per thread: the one
 *                         the matmul kernels run for the weight dtype and
 *                         batch (snug_kernels.matmul_insn): vfmadd231ps ymm
 *                         or zmm (2 flops per lane), vdpbf16ps zmm (4 per
 *                         lane), vpdpbusd / vpmaddubsw ymm (2 operations per
 *                         8-bit product); flop/s (op/s), 0 for the scalar
 *                         kernels
 *
 * Each returns the best of a few tries (the machine is noisy). A program
 * that measures a limit right before a step it times calls
 * bench_omp_passive first.
 */
#ifndef SNUG_BENCH_LIMITS_H
#define SNUG_BENCH_LIMITS_H

#include "base/mem.h"
#include "base/dtype.h"
#include "kernels/kernels.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* Makes this process's OpenMP threads sleep as soon as a region ends: when
 * OMP_WAIT_POLICY is unset, sets it to passive and runs the program again
 * (argv as given; libgomp reads it once, when it is loaded). Without it
 * libgomp's idle threads spin (300,000 pause loops, about 10 ms on a Xeon)
 * after each limit reading, on the CPUs the step measured right after needs:
 * 2 threads of a 1B Q4_K_M decode then ran at 0.39 of the bandwidth instead
 * of 0.80. Returns only when the policy was set already or exec failed. */
static inline void bench_omp_passive(char **argv)
{
    if (getenv("OMP_WAIT_POLICY")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);
}

/* A buffer of `bytes` for bench_read_bandwidth_in, from snug's allocator as
 * the weights are (the same huge pages, so that the limit and the decode
 * read memory the same way), first touched by the n_threads threads that
 * read it; NULL when it cannot be had. Free with snug_mem_free. */
static float *bench_bandwidth_buffer(size_t bytes, int n_threads)
{
    size_t n = bytes / sizeof(float) / 64 * 64;
    float *buf = snug_mem_alloc_unpopulated(SNUG_MEM_OTHER, n * sizeof(float), NULL);
    if (!buf) return NULL;
#pragma omp parallel num_threads(n_threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t b = n / 64 * (size_t)t / (size_t)nt * 64, e = n / 64 * (size_t)(t + 1) / (size_t)nt * 64;
        for (size_t i = b; i < e; i++) buf[i] = (float)(i & 7);
    }
    return buf;
}

/* Read bandwidth in bytes/s over the buffer from bench_bandwidth_buffer
 * (bytes as given there), best of `tries` passes. A buffer read again
 * right away may sit partly in the last-level cache: between readings
 * something else must have gone through it (a decode step's weights). */
static double bench_read_bandwidth_in(const float *buf, size_t bytes, int n_threads, int tries)
{
    size_t n = bytes / sizeof(float) / 64 * 64;
    bool avx2 = snug_isa_detect() >= SNUG_ISA_AVX2;
    double best = 1e30, sink = 0;
    for (int k = 0; k < tries; k++) {
        double t0 = 0;
#pragma omp parallel num_threads(n_threads) reduction(+ : sink)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            size_t b = n / 64 * (size_t)t / (size_t)nt * 64;
            size_t e = n / 64 * (size_t)(t + 1) / (size_t)nt * 64;
            /* the clock starts once every thread is up (waking sleeping
             * threads is not reading) */
#pragma omp barrier
#pragma omp master
            t0 = bench_now();
#pragma omp barrier
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
    if (sink == 42.4242) printf(" ");
    return (double)(n * sizeof(float)) / best;
}

/* Read bandwidth in bytes/s over a new buffer of `bytes` (say 4x the
 * last-level cache or more), best of `tries` passes; 0 when the buffer
 * cannot be had. */
static double bench_read_bandwidth(size_t bytes, int n_threads, int tries)
{
    float *buf = bench_bandwidth_buffer(bytes, n_threads);
    if (!buf) return 0;
    double bw = bench_read_bandwidth_in(buf, bytes, n_threads, tries);
    snug_mem_free(buf);
    return bw;
}

#ifdef BENCH_X86
/* The peak loops: register-only chains of one instruction, as many
 * independent accumulators as cover its latency at full throughput (an FMA
 * has latency 4 on two ports: 8 chains or more; on an Emerald Rapids 8
 * chains of zmm FMAs reach 0.88 of the rate 12 and 16 reach, and vdpbf16ps
 * zmm, at about a quarter of the FMA's instruction rate, is flat from 8).
 * The accumulators are separate variables, not an array, and the empty asm
 * keeps each in a register: a loop that stores them every step is bound by
 * the stores (the zmm FMA loop this replaced, an array, measured 100
 * GFLOP/s on 2 threads where this one measures 330). Each function is compiled for its instruction
 * set alone, so the binary runs anywhere; call one only when
 * snug_isa_detect() reaches snug_insn_isa() of its instruction. */
#define BENCH_ACC12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define BENCH_ACC16(X) BENCH_ACC12(X) X(12) X(13) X(14) X(15)
/* (two statements: a "+v" counts twice against asm's 30 operands) */
#define BENCH_LIVE8(o)                                                                  \
    __asm__ volatile("" : "+v"(a##o##0), "+v"(a##o##1), "+v"(a##o##2), "+v"(a##o##3), \
                          "+v"(a##o##4), "+v"(a##o##5), "+v"(a##o##6), "+v"(a##o##7))
#define BENCH_LIVE12() \
    BENCH_LIVE8(); \
    __asm__ volatile("" : "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11))
#define BENCH_LIVE16() \
    BENCH_LIVE8(); \
    __asm__ volatile("" : "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11), "+v"(a12), "+v"(a13), \
                          "+v"(a14), "+v"(a15))

enum { BENCH_CHAINS_YMM = 12, BENCH_CHAINS_ZMM = 16 };

/* iters x 12 chains of vfmadd231ps ymm (16 registers: 12 chains and the
 * two operands) */
__attribute__((target("avx2,fma"))) static float bench_loop_fma_ymm(long iters)
{
    __m256 m = _mm256_set1_ps(0.999999f), d = _mm256_set1_ps(1e-7f);
#define INIT(j) __m256 a##j = _mm256_set1_ps(0.1f * (float)((j) + 1));
#define STEP(j) a##j = _mm256_fmadd_ps(a##j, m, d);
#define SUM(j) s = _mm256_add_ps(s, a##j);
    BENCH_ACC12(INIT)
    for (long i = 0; i < iters; i++) {
        BENCH_ACC12(STEP)
        BENCH_LIVE12();
    }
    __m256 s = _mm256_setzero_ps();
    BENCH_ACC12(SUM)
#undef INIT
#undef STEP
#undef SUM
    return _mm256_cvtss_f32(s);
}

/* iters x 16 chains of vfmadd231ps zmm */
__attribute__((target("avx512f"))) static float bench_loop_fma_zmm(long iters)
{
    __m512 m = _mm512_set1_ps(0.999999f), d = _mm512_set1_ps(1e-7f);
#define INIT(j) __m512 a##j = _mm512_set1_ps(0.1f * (float)((j) + 1));
#define STEP(j) a##j = _mm512_fmadd_ps(a##j, m, d);
#define SUM(j) s = _mm512_add_ps(s, a##j);
    BENCH_ACC16(INIT)
    for (long i = 0; i < iters; i++) {
        BENCH_ACC16(STEP)
        BENCH_LIVE16();
    }
    __m512 s = _mm512_setzero_ps();
    BENCH_ACC16(SUM)
#undef INIT
#undef STEP
#undef SUM
    return _mm512_reduce_add_ps(s);
}

/* iters x 16 chains of vdpbf16ps zmm (each lane adds 1 x 1 + 1 x 1) */
__attribute__((target("avx512f,avx512bf16"))) static float bench_loop_dpbf16_zmm(long iters)
{
    __m512bh ones = (__m512bh)_mm512_set1_epi32(0x3F803F80);
#define INIT(j) __m512 a##j = _mm512_set1_ps(0.1f * (float)((j) + 1));
#define STEP(j) a##j = _mm512_dpbf16_ps(a##j, ones, ones);
#define SUM(j) s = _mm512_add_ps(s, a##j);
    BENCH_ACC16(INIT)
    for (long i = 0; i < iters; i++) {
        BENCH_ACC16(STEP)
        BENCH_LIVE16();
    }
    __m512 s = _mm512_setzero_ps();
    BENCH_ACC16(SUM)
#undef INIT
#undef STEP
#undef SUM
    return _mm512_reduce_add_ps(s);
}

/* iters x 12 chains of the 8-bit integer multiply-add of insn in ymm:
 * vpdpbusd (VEX, AVX-VNNI; or EVEX, AVX-512 VNNI with VL, whichever the CPU
 * has: the same loop, two encodings) or vpmaddubsw + vpaddw (what the AVX2
 * path adds up with) */
#define BENCH_LOOP_DPBUSD_YMM(NAME, TARGET, DPBUSD)                                \
    __attribute__((target(TARGET))) static float NAME(long iters)                  \
    {                                                                              \
        __m256i u = _mm256_set1_epi8(3), x = _mm256_set1_epi8(-2);                 \
        BENCH_ACC12(BENCH_INIT_I32)                                                \
        for (long i = 0; i < iters; i++) {                                         \
            BENCH_ACC12(BENCH_STEP_##DPBUSD)                                       \
            BENCH_LIVE12();                                                        \
        }                                                                          \
        __m256i s = _mm256_setzero_si256();                                        \
        BENCH_ACC12(BENCH_SUM_I32)                                                 \
        return (float)_mm256_extract_epi32(s, 0);                                  \
    }
#define BENCH_INIT_I32(j) __m256i a##j = _mm256_set1_epi32((j) + 1);
#define BENCH_STEP_VEX(j) a##j = _mm256_dpbusd_avx_epi32(a##j, u, x);
#define BENCH_STEP_EVEX(j) a##j = _mm256_dpbusd_epi32(a##j, u, x);
#define BENCH_SUM_I32(j) s = _mm256_add_epi32(s, a##j);
BENCH_LOOP_DPBUSD_YMM(bench_loop_dpbusd_vex, "avx2,avxvnni", VEX)
BENCH_LOOP_DPBUSD_YMM(bench_loop_dpbusd_evex, "avx2,avx512f,avx512vl,avx512vnni", EVEX)

__attribute__((target("avx2"))) static float bench_loop_maddubs_ymm(long iters)
{
    __m256i u = _mm256_set1_epi8(3), x = _mm256_set1_epi8(-2);
#define INIT(j) __m256i a##j = _mm256_set1_epi16((short)((j) + 1));
#define STEP(j) __asm__("" : "+v"(u)); a##j = _mm256_add_epi16(a##j, _mm256_maddubs_epi16(u, x));
#define SUM(j) s = _mm256_add_epi16(s, a##j);
    BENCH_ACC12(INIT)
    for (long i = 0; i < iters; i++) {
        BENCH_ACC12(STEP)
        BENCH_LIVE12();
    }
    __m256i s = _mm256_setzero_si256();
    BENCH_ACC12(SUM)
#undef INIT
#undef STEP
#undef SUM
    return (float)_mm256_extract_epi16(s, 0);
}

/* A loop of iters x 16 chains of vpdpbusd zmm (AVX-512 VNNI), each
 * chain's step DPBUSD_ZMM_STEP_##X: x a register (REG), or (BCAST) as the
 * lanes kernels take it, 4 bytes from memory (L1) broadcast to every lane,
 * a different word for each chain. */
#define BENCH_LOOP_DPBUSD_ZMM(NAME, X)                                             \
    __attribute__((target("avx512f,avx512vnni"))) static inline float NAME(long iters) \
    {                                                                              \
        _Alignas(64) int32_t xw[16];                                               \
        for (int j = 0; j < 16; j++) xw[j] = (int32_t)(0x01FE01FEu + (uint32_t)j); \
        __m512i u = _mm512_set1_epi8(3), x = _mm512_set1_epi8(-2);                 \
        BENCH_ACC16(BENCH_INIT_ZMM_I32)                                            \
        for (long i = 0; i < iters; i++) {                                         \
            BENCH_ACC16(DPBUSD_ZMM_STEP_##X)                                       \
            BENCH_LIVE16();                                                        \
        }                                                                          \
        __m512i s = _mm512_setzero_si512();                                        \
        BENCH_ACC16(BENCH_SUM_ZMM_I32)                                             \
        (void)x, (void)xw;                                                         \
        return (float)_mm512_reduce_add_epi32(s);                                  \
    }
#define BENCH_INIT_ZMM_I32(j) __m512i a##j = _mm512_set1_epi32((j) + 1);
#define BENCH_SUM_ZMM_I32(j) s = _mm512_add_epi32(s, a##j);
#define DPBUSD_ZMM_STEP_REG(j) a##j = _mm512_dpbusd_epi32(a##j, u, x);
#define DPBUSD_ZMM_STEP_BCAST(j) __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(a##j) : "v"(u), "m"(xw[j]));
BENCH_LOOP_DPBUSD_ZMM(bench_loop_dpbusd_zmm, REG)
BENCH_LOOP_DPBUSD_ZMM(bench_loop_dpbusd_bcast_zmm, BCAST)

/* The ymm vpdpbusd loop this CPU can run; NULL for none. */
static float (*bench_dpbusd_loop(void))(long)
{
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl")) return bench_loop_dpbusd_evex;
    if (__builtin_cpu_supports("avxvnni")) return bench_loop_dpbusd_vex;
    return NULL;
}
#endif

#ifdef BENCH_X86
/* Seconds of the fastest of `tries` runs of loop(iters) on n_threads
 * threads at once: short tries (tens of ms), so that the best of several
 * catches one that nothing else on the machine interrupted. */
static inline double bench_loop_seconds(float (*loop)(long), long iters, int n_threads, int tries)
{
    double best = 1e30, sink = 0;
    for (int k = 0; k < tries; k++) {
        double t0 = bench_now();
#pragma omp parallel num_threads(n_threads) reduction(+ : sink)
        sink += loop(iters);
        double dt = bench_now() - t0;
        if (dt < best) best = dt;
    }
    if (sink == 42.4242) printf(" ");
    return best;
}
#endif

/* Arithmetic peak in flop/s of n_threads threads each running a loop of
 * insn alone (bench_loop_*; snug_insn_flops flops per instruction: an FMA
 * 2 per lane, vdpbf16ps 4). 0 for SNUG_INSN_SCALAR (the scalar kernels have
 * no one instruction to measure) or an instruction this CPU lacks. Best of
 * `tries`. */
static double bench_insn_peak(snug_insn insn, int n_threads, int tries)
{
#ifdef BENCH_X86
    if (insn == SNUG_INSN_SCALAR || snug_insn_flops(insn) == 0 ||
        snug_insn_isa(insn) > snug_isa_detect() || (insn == SNUG_INSN_DPBUSD_YMM && !bench_dpbusd_loop()) ||
        (insn == SNUG_INSN_DPBUSD_ZMM && !__builtin_cpu_supports("avx512vnni")))
        return 0;
    const long iters = 2 * 1000 * 1000;
    bool ymm = insn == SNUG_INSN_FMA_YMM || insn == SNUG_INSN_DPBUSD_YMM || insn == SNUG_INSN_MADDUBS_YMM;
    int chains = ymm ? BENCH_CHAINS_YMM : BENCH_CHAINS_ZMM;
    double flops_per_iter = (double)chains * snug_insn_flops(insn);
    float (*loop)(long) = insn == SNUG_INSN_FMA_YMM       ? bench_loop_fma_ymm
                          : insn == SNUG_INSN_FMA_ZMM     ? bench_loop_fma_zmm
                          : insn == SNUG_INSN_DPBUSD_YMM  ? bench_dpbusd_loop()
                          : insn == SNUG_INSN_DPBUSD_ZMM  ? bench_loop_dpbusd_zmm
                          : insn == SNUG_INSN_MADDUBS_YMM ? bench_loop_maddubs_ymm
                                                          : bench_loop_dpbf16_zmm;
    return flops_per_iter * (double)iters * n_threads / bench_loop_seconds(loop, iters, n_threads, tries);
#else
    (void)insn, (void)n_threads, (void)tries;
    return 0;
#endif
}

/* The rate in op/s (2 an 8-bit product) of n_threads threads each running
 * vpdpbusd zmm with its x broadcast from memory, one word per product, as
 * the block formats' kernels take it (bench_loop_dpbusd_bcast_zmm): what
 * such a kernel could reach with nothing else to do. 0 without AVX-512
 * VNNI. Best of `tries`. */
static inline double bench_dpbusd_bcast_rate(int n_threads, int tries)
{
#ifdef BENCH_X86
    if (!__builtin_cpu_supports("avx512vnni")) return 0;
    const long iters = 2 * 1000 * 1000;
    double ops_per_iter = (double)BENCH_CHAINS_ZMM * snug_insn_flops(SNUG_INSN_DPBUSD_ZMM);
    return ops_per_iter * (double)iters * n_threads /
           bench_loop_seconds(bench_loop_dpbusd_bcast_zmm, iters, n_threads, tries);
#else
    (void)n_threads, (void)tries;
    return 0;
#endif
}

/* "vdpbf16ps zmm, 2 threads" into buf (size bytes), or "scalar kernels: no
 * instruction peak". Returns buf. */
static inline const char *bench_insn_label(snug_insn insn, int n_threads, char *buf, size_t size)
{
    if (insn == SNUG_INSN_SCALAR)
        snprintf(buf, size, "scalar kernels: no instruction peak");
    else
        snprintf(buf, size, "%s, %d thread%s", snug_insn_name(insn), n_threads,
                 n_threads == 1 ? "" : "s");
    return buf;
}

/* The peak of every multiply-add instruction this CPU has that could serve
 * weights of dtype wdt (the FMAs for any; vdpbf16ps for bf16) into
 * peaks[insn] (flop/s; 0 for those it lacks), the best of them returned:
 * the machine's limit, whichever instruction the kernels run. */
static inline double bench_peaks(snug_dtype wdt, int n_threads, int tries, double peaks[SNUG_INSN_COUNT])
{
    double best = 0;
    for (int i = 0; i < SNUG_INSN_COUNT; i++) {
        snug_insn insn = (snug_insn)i;
        peaks[i] = 0;
        if (insn == SNUG_INSN_SCALAR || (insn == SNUG_INSN_DPBF16_ZMM && wdt != SNUG_DTYPE_BF16)) continue;
        bool int8 = insn == SNUG_INSN_DPBUSD_YMM || insn == SNUG_INSN_MADDUBS_YMM || insn == SNUG_INSN_DPBUSD_ZMM;
        if (int8 && !snug_dtype_is_quant(wdt)) continue; /* 8-bit products serve block formats only */
        peaks[i] = bench_insn_peak(insn, n_threads, tries);
        if (peaks[i] > best) best = peaks[i];
    }
    return best;
}

/* Prints the peaks as JSON members ("vfmadd231ps ymm": GFLOP/s, ...) of the
 * instructions measured. */
static inline void bench_peaks_json(const double peaks[SNUG_INSN_COUNT])
{
    const char *sep = "";
    for (int i = 0; i < SNUG_INSN_COUNT; i++)
        if (peaks[i] > 0) {
            printf("%s\"%s\": %.1f", sep, snug_insn_name((snug_insn)i), peaks[i] / 1e9);
            sep = ", ";
        }
}

/* The rows of x of the row sweep (bench/matmul, bench/generate --json's
 * rows_ms): a 2048-wide input to 8192 outputs (an up_proj of the 1B) in
 * bf16, the matmul's time as the rows grow. */
static const int64_t bench_rows_n[] = {1, 2, 4, 5, 8, 16, 32};
enum { BENCH_ROWS_K = 2048, BENCH_ROWS_M = 8192, BENCH_ROWS_COUNT = 7 };

/* The mean milliseconds of snug_matmul with kern on pool over a packed
 * 2048 x 8192 bf16 matrix (copies cycled through so that the weights come from memory,
 * as in a forward pass) for each of bench_rows_n into ms. */
static inline void bench_rows_ms(const snug_kernels *kern, snug_pool *pool, double ms[BENCH_ROWS_COUNT])
{
    const int64_t k = BENCH_ROWS_K, m = BENCH_ROWS_M;
    size_t wbytes = snug_linear_bytes(SNUG_DTYPE_BF16, m, k);
    int copies = 8; /* 256 MiB: past every cache */
    unsigned char *w = aligned_alloc(64, wbytes * (size_t)copies);
    uint16_t *raw = malloc((size_t)(k * m) * sizeof *raw);
    float *x = aligned_alloc(64, (size_t)(32 * k) * sizeof(float));
    float *y = aligned_alloc(64, (size_t)(32 * m) * sizeof(float));
    int32_t n_threads = pool ? snug_pool_threads(pool) : 1;
    void *scratch = aligned_alloc(64, snug_round_up(snug_matmul_scratch_bytes(n_threads, 32, k), 64));
    for (int64_t i = 0; i < k * m; i++)
        raw[i] = snug_f32_to_bf16((float)(((uint64_t)i * 11400714819323198485ull) >> 44) / 1048576.0f - 0.5f);
    for (int c = 0; c < copies; c++) snug_linear_pack(w + (size_t)c * wbytes, raw, SNUG_DTYPE_BF16, m, k);
    for (int64_t i = 0; i < 32 * k; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (int r = 0; r < BENCH_ROWS_COUNT; r++) {
        int reps = 24;
        double total = 0;
        for (int i = 0; i < reps + 2; i++) {
            snug_linear lin = {SNUG_DTYPE_BF16, m, k, w + (size_t)(i % copies) * wbytes};
            double t0 = bench_now();
            snug_matmul(kern, y, x, bench_rows_n[r], &lin, scratch, pool);
            if (i >= 2) total += bench_now() - t0;
        }
        ms[r] = total / reps * 1e3;
    }
    free(w);
    free(raw);
    free(x);
    free(y);
    free(scratch);
}

/* What the row sweep's goal (8 rows within 1.3 times 4 rows' time) is up
 * against: 8 rows' product (2 x 8 x BENCH_ROWS_K x BENCH_ROWS_M) at the
 * peak of the instruction kern runs it on (peaks: bench_peaks's, FLOP/s)
 * over ms's 4 rows' time; 0 without that peak. Above 1.3 no kernel on
 * that instruction could meet the goal (on an AVX2 machine whose FMA peak
 * is about 200 GFLOP/s and whose bandwidth reads the 4 rows' 32 MiB in
 * 1 ms, 8 rows need 1.34 ms of multiply-adds). */
static inline double bench_rows_floor(const snug_kernels *kern, const double peaks[SNUG_INSN_COUNT],
                                      const double ms[BENCH_ROWS_COUNT])
{
    double peak = peaks[snug_matmul_insn(kern, SNUG_DTYPE_BF16, 8)];
    if (!(peak > 0) || !(ms[2] > 0)) return 0;
    return 2.0 * 8 * BENCH_ROWS_K * BENCH_ROWS_M / peak * 1e3 / ms[2];
}

#endif /* SNUG_BENCH_LIMITS_H */
