/*
 * k_impl.h: internal to src/kernels: how the per-instruction-set files fill
 * a snug_kernels table, and the pieces of the blocked matmul that each
 * instruction set supplies to the one driver in k_matmul.c.
 *
 * The matmul y (n, m) = x (n, k) w^T splits the m weight rows across
 * threads. For n <= SNUG_GEMV_MAX_N a matrix-vector routine streams the
 * thread's rows once for all n rows of x. Above, a blocked GEMM (the BLIS
 * loop order: nc weight rows, kc deep, mc rows of x, then nr x mr register
 * tiles): a block of w is packed, converted to f32 (or kept as bf16 pairs
 * for vdpbf16ps), into panels of nr rows laid out k-major, so that one k
 * step of a panel is nr consecutive values; the micro-kernel broadcasts mr
 * values of x and does mr x nr/width FMAs per k step.
 */
#ifndef SNUG_K_IMPL_H
#define SNUG_K_IMPL_H

#include "kernels/kernels.h"

/* n up to this goes through the matrix-vector path. */
#define SNUG_GEMV_MAX_N 4

/* Upper bounds on any instruction set's blocks (the scratch is sized from
 * these, so it does not depend on the instruction set). */
#define SNUG_GEMM_KC_MAX 256
#define SNUG_GEMM_NC_MAX 480
#define SNUG_GEMM_MC_MAX 192
/* x is packed whole (every row, all of k) when it fits in this many bytes,
 * and then the weight is streamed one register panel at a time. */
#define SNUG_GEMM_A_FULL_BYTES ((size_t)1 << 20)

/* One instruction set's GEMM pieces.
 *
 * Packed x ("a"): panels of mr rows of x, each a run of k steps of mr
 * 32-bit values (step q: row i at q * mr + i), rows past n zero; a value is
 * a float, or for pairs the bf16 pair (x[2q], x[2q + 1]) rounded to nearest
 * even (low half first), odd k padded with zero. The driver packs it.
 * Packed w ("b"): panels of nr rows the same way (step q: row j at
 * q * nr + j), packed by pack_b. */
typedef struct snug_gemm_ops {
    int32_t mr, nr;     /* register tile: mr rows of x by nr rows of w */
    int32_t kc, nc, mc; /* cache blocks: depth, rows of w, rows of x */
    bool pairs;         /* w and x as bf16 pairs (k steps of 2), w must be BF16 */

    /* Packs rows [o0, o0 + rows) of w (row-major (m, k) of dtype wdt; rows
     * <= nc), elements [p0, p0 + kc) of each, into ceil(rows / nr) panels of
     * ksteps x nr 32-bit values (ksteps = kc, or (kc + 1) / 2 for pairs),
     * panel after panel; rows past the end are zero. With prefetch, asks
     * for the same rows' next kc elements to be fetched into the cache. */
    void (*pack_b)(void *bp, const void *w, snug_dtype wdt, int64_t k, int64_t o0, int64_t rows,
                   int64_t p0, int64_t kc, int32_t nr, bool pairs, bool prefetch);

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

/* Scratch bytes one thread uses (packed w block, then packed x). */
size_t snug_matmul_thread_bytes(void);

/* The AVX2 pieces the AVX-512 tables reuse (k_avx2.c): the packing of w
 * (8 x 8 transposes work for any nr that is a multiple of 8) and the
 * matrix-vector path (memory-bound, so 256-bit vectors suffice). Only call
 * them when the CPU has AVX2, FMA and F16C. */
void snug_avx2_pack_b(void *bp, const void *w, snug_dtype wdt, int64_t k, int64_t o0,
                      int64_t rows, int64_t p0, int64_t kc, int32_t nr, bool pairs,
                      bool prefetch);
void snug_avx2_gemv(float *y, const float *x, int64_t n, const void *w, snug_dtype wdt,
                    int64_t k, int64_t m, int64_t o0, int64_t o1);

/* Fill a table for one instruction set (k_scalar.c, k_avx2.c, k_avx512.c).
 * The SIMD ones are only called once the CPU is known to support them. */
void snug_kernels_fill_scalar(snug_kernels *k);
void snug_kernels_fill_avx2(snug_kernels *k);
void snug_kernels_fill_avx512(snug_kernels *k);
void snug_kernels_fill_avx512bf16(snug_kernels *k);

#endif /* SNUG_K_IMPL_H */
