/*
 * k_impl.h: internal to src/kernels: how the per-instruction-set files fill
 * a snug_kernels table, and the pieces of the blocked matmul that each
 * instruction set supplies to the one driver in k_matmul.c.
 *
 * The matmul y (n, m) = x (n, k) w^T splits the m weight rows across
 * threads. For n <= SNUG_GEMV_MAX_N a matrix-vector routine streams the
 * thread's rows once for all n rows of x. Above, a blocked GEMM: all of x
 * is packed once per call (shared by the threads), then the BLIS loop
 * order over each thread's rows (nc weight rows, kc deep, mc rows of x,
 * then nr x mr register tiles): each register panel of w is packed,
 * converted to f32 (or kept as bf16 pairs), into nr rows laid out k-major,
 * so that one k step of a panel is nr consecutive values; the micro-kernel
 * broadcasts mr values of x and does mr x nr/width FMAs per k step.
 */
#ifndef SNUG_K_IMPL_H
#define SNUG_K_IMPL_H

#include "kernels.h"

/* n up to this goes through the matrix-vector path. */
#define SNUG_GEMV_MAX_N 4

/* Upper bounds on any instruction set's blocks and register tile rows of x
 * (the scratch is sized from these, so it does not depend on the
 * instruction set). */
#define SNUG_GEMM_KC_MAX 512
#define SNUG_GEMM_NC_MAX 480
#define SNUG_GEMM_MC_MAX 384
#define SNUG_GEMM_MR_MAX 8

/* One instruction set's GEMM pieces.
 *
 * Packed x ("a"), made once per call for all threads by the driver: panels
 * of mr rows of x, each a run of k steps of mr values (step q: row i at
 * q * mr + i), rows past n zero; the driver stores them block-major (the
 * micro-kernel sees one panel's run for one kc block of k). A value is one of:
 *   !pairs:           a float x[q] (32 bits);
 *   pairs, a_bf16:    the bf16 pair (x[2q], x[2q + 1]) rounded to nearest
 *                     even, low half first (32 bits);
 *   pairs, !a_bf16:   the float pair (x[2q], x[2q + 1]) (64 bits).
 * With pairs, odd k is padded with zero.
 * Packed w ("b"): panels of nr rows the same way (step q: row j at
 * q * nr + j), 32 bits each: a float, or with pairs the bf16 pair
 * (w[2q], w[2q + 1]), low half first; packed by pack_b. */
typedef struct snug_gemm_ops {
    int32_t mr, nr;     /* register tile: mr rows of x by nr rows of w */
    int32_t kc, nc, mc; /* cache blocks: depth, rows of w, rows of x */
    bool pairs;         /* w as bf16 pairs (k steps of 2), w must be BF16 */
    bool a_bf16;        /* with pairs: x as bf16 pairs, else as float pairs */
    snug_insn insn;      /* the multiply-add of micro */
    snug_insn gemv_insn; /* the multiply-add of gemv */

    /* Packs rows [o0, o0 + rows) of w (row-major (m, k) of dtype wdt; rows
     * <= nc), elements [p0, p0 + kc) of each, into ceil(rows / nr) panels of
     * ksteps x nr 32-bit values (ksteps = kc, or (kc + 1) / 2 for pairs),
     * panel after panel; rows past the end are zero. */
    void (*pack_b)(void *bp, const void *w, snug_dtype wdt, int64_t k, int64_t o0, int64_t rows,
                   int64_t p0, int64_t kc, int32_t nr, bool pairs);

    /* One register tile over ksteps k steps of the packed panels ap (mr
     * wide) and bp (nr wide). Writes (add: adds to) c[i * ldc + j] for
     * i < mr_v, j < nr_v. */
    void (*micro)(int64_t ksteps, const void *ap, const void *bp, float *c, int64_t ldc,
                  int32_t mr_v, int32_t nr_v, bool add);

    /* The matrix-vector path: y[t][o] for t < n (<= SNUG_GEMV_MAX_N) and
     * o in [o0, o1). */
    void (*gemv)(float *y, const float *x, int64_t n, const void *w, snug_dtype wdt, int64_t k,
                 int64_t m, int64_t o0, int64_t o1);
} snug_gemm_ops;

/* The threaded matmul driver (k_matmul.c), the same for every SIMD
 * instruction set: the contract of snug_kernels.matmul. */
void snug_matmul_blocked(const snug_gemm_ops *g, float *y, const float *x, int64_t n,
                         const void *w, snug_dtype wdt, int64_t k, int64_t m, void *scratch,
                         int32_t n_threads);

/* The instruction snug_matmul_blocked runs with g for n rows of x: its
 * gemv's or its micro-kernel's (the contract of snug_kernels.matmul_insn). */
snug_insn snug_matmul_blocked_insn(const snug_gemm_ops *g, int64_t n);

/* The AVX2 pieces the AVX-512 tables reuse (k_avx2.c): the packing of w
 * (8 x 8 transposes work for any nr that is a multiple of 8) and the
 * matrix-vector path (memory-bound, so 256-bit vectors suffice). Only call
 * them when the CPU has AVX2, FMA and F16C. */
void snug_avx2_pack_b(void *bp, const void *w, snug_dtype wdt, int64_t k, int64_t o0,
                      int64_t rows, int64_t p0, int64_t kc, int32_t nr, bool pairs);
void snug_avx2_gemv(float *y, const float *x, int64_t n, const void *w, snug_dtype wdt,
                    int64_t k, int64_t m, int64_t o0, int64_t o1);

/* The AVX2 bf16-pairs GEMM (a 6 x 8 tile: w packed as bf16 pairs with a
 * pure 32-bit transposition, converted in the micro-kernel by unpacking
 * against zero; x as float pairs). The f32 tables (AVX2 and AVX-512F) use
 * it for bf16 weights when n < SNUG_PAIRS_MAX_N, where the conversion of
 * the f32 panels would cost more than few rows of x can amortize. */
#define SNUG_PAIRS_MAX_N 128
extern const snug_gemm_ops snug_avx2_pairs_ops;

/* Fill a table for one instruction set (k_scalar.c, k_avx2.c, k_avx512.c).
 * The SIMD ones are only called once the CPU is known to support them. */
void snug_kernels_fill_scalar(snug_kernels *k);
void snug_kernels_fill_avx2(snug_kernels *k);
void snug_kernels_fill_avx512(snug_kernels *k);
void snug_kernels_fill_avx512bf16(snug_kernels *k);

#endif /* SNUG_K_IMPL_H */
