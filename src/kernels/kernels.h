/*
 * kernels.h: the numeric kernels of the forward pass, in one table of
 * function pointers per instruction set.
 *
 * Every kernel has a portable scalar version, always built: it is the
 * reference the SIMD versions are tested against. The SIMD versions (AVX2 +
 * FMA + F16C, AVX-512F, AVX-512F + AVX-512 BF16) are compiled with target
 * attributes into the same binary, whatever -march says, and one is chosen
 * at run time from what CPUID and XGETBV report; a lower one can be asked
 * for (tests, benchmarks, SNUG_ISA=scalar|avx2|avx512|avx512bf16).
 * There is no global state: the chosen table lives in a snug_kernels value
 * that its user (the model) keeps.
 *
 * Activations are f32. Matrices are f32, f16 or bf16 in the panel layout
 * of linear.h; vectors (norms, biases, embedding rows) row-major. The KV
 * cache is f32, f16 or bf16.
 *
 * Threads: snug_matmul runs on a snug_pool (base/pool.h), one run per call
 * (over the weight's panels, so each thread streams its own rows of the
 * weight); call it from outside any run of that pool. Every other kernel
 * is single-threaded and may be called from inside runs. No kernel
 * allocates: the scratch memory matmul needs comes from the caller (the
 * activation arena), sized by snug_matmul_scratch_bytes.
 *
 * Tolerances against the scalar version (tests/test_kernels.c states and
 * checks them): elementwise kernels and f32/f16 products to float rounding
 * (a relative 1e-5 of the sum of |terms|); bf16 products on the AVX-512 BF16
 * kernel (vdpbf16ps) round the activations to bf16 first (as llama.cpp and
 * the accelerators do), a relative 1e-2 of the sum of |terms|.
 */
#ifndef SNUG_KERNELS_H
#define SNUG_KERNELS_H

#include "base/common.h"
#include "base/pool.h"
#include "linear.h"

typedef enum snug_isa {
    SNUG_ISA_SCALAR = 0,      /* portable C: the reference */
    SNUG_ISA_AVX2 = 1,        /* AVX2 + FMA + F16C */
    SNUG_ISA_AVX512 = 2,      /* AVX-512F (+ AVX2, FMA, F16C) */
    SNUG_ISA_AVX512_BF16 = 3, /* AVX-512F + AVX-512 BF16 (vdpbf16ps) */
    SNUG_ISA_COUNT = 4
} snug_isa;

/* The multiply-add instruction in the inner loop of a matmul: what its
 * arithmetic peak is measured with (bench/). */
typedef enum snug_insn {
    SNUG_INSN_SCALAR = 0,     /* the portable C loops: no one instruction */
    SNUG_INSN_FMA_YMM = 1,    /* vfmadd231ps ymm: 8 lanes x 2 flops */
    SNUG_INSN_FMA_ZMM = 2,    /* vfmadd231ps zmm: 16 lanes x 2 flops */
    SNUG_INSN_DPBF16_ZMM = 3, /* vdpbf16ps zmm: 16 lanes x 2 bf16 products added */
    SNUG_INSN_MADDUBS_YMM = 4, /* vpmaddubsw ymm: 32 u8 x s8 products, added in pairs */
    SNUG_INSN_DPBUSD_YMM = 5, /* vpdpbusd ymm: 8 lanes x 4 u8 x s8 products added */
    SNUG_INSN_DPBUSD_ZMM = 6, /* vpdpbusd zmm: 16 lanes of them (AVX-512 VNNI) */
    SNUG_INSN_COUNT = 7
} snug_insn;

/* "scalar", "vfmadd231ps ymm", "vfmadd231ps zmm", "vdpbf16ps zmm",
 * "vpmaddubsw ymm", "vpdpbusd ymm", "vpdpbusd zmm"; never NULL ("unknown"
 * out of range). */
const char *snug_insn_name(snug_insn insn);

/* The flops one instruction does (16, 32, 64; for the 8-bit integer ones
 * their operations, a product and a sum each: 64); 0 for SNUG_INSN_SCALAR
 * or out of range. Pure. */
int32_t snug_insn_flops(snug_insn insn);

/* The least instruction set that has insn (an FMA, vpmaddubsw, vpdpbusd
 * ymm: AVX2, the last only with AVX-VNNI or AVX-512 VNNI besides; a zmm
 * FMA, vpdpbusd zmm: AVX512, the last with AVX-512 VNNI besides;
 * vdpbf16ps: AVX512_BF16; scalar: SCALAR). Pure. */
snug_isa snug_insn_isa(snug_insn insn);

/* The best instruction set this CPU and OS support (CPUID feature bits and
 * the XGETBV register-state mask; cpu.c reads them). Pure apart from
 * reading the CPU. */
snug_isa snug_isa_detect(void);

/* "scalar", "avx2", "avx512", "avx512bf16"; never NULL. */
const char *snug_isa_name(snug_isa isa);

/* Parses a name of snug_isa_name; false when unknown. */
bool snug_isa_from_name(const char *name, snug_isa *out);

/* Where one query row's keys and values live in the paged cache, for one KV
 * head of one layer: the key of position p is at element
 *   k + block_table[p / block_size] * block_stride + (p % block_size) * head_dim
 * (and the value likewise from v). */
typedef struct snug_kv_view {
    const void *k, *v;
    snug_dtype dtype;            /* F32, F16, BF16, or Q8_0: blocks of 32 (an f16 scale, 32 int8)
                                  * from k and from v, value i in block i / 32, each row of
                                  * head_dim values (a multiple of 32) whole blocks */
    size_t block_stride;         /* values from one block to the next */
    const int32_t *block_table;  /* the sequence's blocks, in order */
    int32_t block_size;          /* positions per block */
} snug_kv_view;

/* The attention of a group of query heads that share one KV head (GQA),
 * for a run of consecutive query positions of one sequence. */
typedef struct snug_attn_args {
    const float *q;        /* head g of query t: q + t * q_row_stride + g * q_head_stride */
    int64_t q_row_stride;  /* floats from query position t to t + 1 */
    int64_t q_head_stride; /* floats from head g to g + 1 of the group */
    float *out;          /* same layout as q, with the strides below */
    int64_t out_row_stride, out_head_stride;
    int32_t n_group;     /* query heads sharing this KV head */
    int32_t n_q;         /* query positions */
    int32_t pos0;        /* position of query 0; query t sees keys 0 .. pos0 + t */
    int32_t window;      /* > 0: query at position p sees only keys > p - window */
    int32_t head_dim;
    float scale;         /* usually 1 / sqrt(head_dim) */
    float softcap;       /* > 0: each scaled score s becomes softcap tanh(s / softcap) (Gemma 2's
                          * attention soft-capping); 0: none */
    snug_kv_view kv;
} snug_attn_args;

struct snug_matmul_ops;
struct snug_x8_block;

typedef struct snug_kernels {
    snug_isa isa;

    /* The instruction set's matmul pieces (NULL: the scalar loops). */
    const struct snug_matmul_ops *mm;

    /* The instruction bf16 weights run with more than 4 rows of x:
     * vfmadd231ps (the pairs widened to floats) or vdpbf16ps (x rounded
     * to bf16). snug_kernels_init sets the FMA; snug_kernels_calibrate
     * measures both where both exist and keeps the faster. */
    snug_insn bf16_insn;

    /* The matrix-vector path of block-format weights (up to 4 rows of x,
     * quantized to 8 bits: kernels/qdot.h), NULL for the scalar
     * reference, and its instruction (k_impl.h's snug_qgemv_fn). */
    void (*qgemv)(float *y, int64_t ldy, const struct snug_x8_block *x8, int64_t n, const snug_linear *w,
                  int64_t p0, int64_t p1);
    snug_insn qgemv_insn;

    /* Block-format weights with more than 4 rows of x run 8-bit products
     * (k_impl.h's snug_qgemm_fn; snug_kernels_init sets the best the CPU
     * has: vpdpbusd zmm, vpdpbusd ymm, vpmaddubsw ymm) rather than the f32
     * GEMM on dequantized slices (NULL), and its instruction. */
    void (*qgemm)(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0, int64_t p1,
                  void *tb);
    snug_insn qgemm_insn;

    /* What snug_kernels_calibrate measured: one thread's GFLOP/s of the
     * bf16 GEMM on each candidate instruction (0: not measured). */
    double calib_gflops[SNUG_INSN_COUNT];

    /* y = x / sqrt(mean(x^2) + eps) * w, one row of dim elements; w of dtype
     * wdt. y may equal x. */
    void (*rmsnorm)(float *y, const float *x, const void *w, snug_dtype wdt, int64_t dim,
                    float eps);

    /* h[i] = silu(gu[i]) * gu[inter + i] for i < inter (gate, then up). */
    void (*silu_mul)(float *h, const float *gu, int64_t inter);

    /* h[i] = gelu(gu[i]) * gu[inter + i] for i < inter, GELU in its tanh
     * form, 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))), computed as
     * g / (1 + e^(-2 sqrt(2 / pi) (g + 0.044715 g^3))), the same value. */
    void (*gelu_tanh_mul)(float *h, const float *gu, int64_t inter);

    /* y[i] += x[i] for i < n. */
    void (*add)(float *y, const float *x, int64_t n);

    /* y[i] += b[i] for i < n; b of dtype bdt. */
    void (*add_bias)(float *y, const void *b, snug_dtype bdt, int64_t n);

    /* Rotary embedding of one head vector x (head_dim elements) in the
     * half-split layout: for i < head_dim / 2, with c = cos_sin[2i] and
     * s = cos_sin[2i + 1]:
     *   x[i] = x[i] c - x[i + h] s;  x[i + h] = x[i + h] c + x[i] s  (h = head_dim/2). */
    void (*rope)(float *x, const float *cos_sin, int32_t head_dim);

    /* Stores n floats as dtype dt (F32, F16 or BF16, rounding to nearest
     * even; Q8_0 blocks exactly as snug_quant_quantize makes them, n a
     * multiple of 32): the KV cache write. */
    void (*store)(void *dst, snug_dtype dt, const float *src, int64_t n);

    /* Loads n elements of dtype dt as floats: embedding rows. */
    void (*load)(float *dst, const void *src, snug_dtype dt, int64_t n);

    /* Causal attention over the paged cache with a numerically stable
     * (online) softmax: out = softmax(scale q . K^T) V for each query row and
     * head of the group. out is the accumulator, so it must not overlap
     * q. Allocates nothing; uses up to about 40 KiB of stack. */
    void (*attention)(const snug_attn_args *a);
} snug_kernels;

/* Fills *k with the kernels of isa. Fails with SNUG_UNSUPPORTED, naming the
 * instruction set and the one detected, when this CPU cannot run it. */
snug_status snug_kernels_init(snug_kernels *k, snug_isa isa, snug_error *err);

/* How the bf16 GEMM instruction is chosen (--bf16-matmul). */
typedef enum snug_bf16_choice {
    SNUG_BF16_AUTO = 0, /* measured: snug_kernels_calibrate */
    SNUG_BF16_FMA = 1,  /* the table's FMA (x kept in f32) */
    SNUG_BF16_DP = 2    /* vdpbf16ps (avx512bf16 only) */
} snug_bf16_choice;

/* "auto", "fma", "vdpbf16ps" into *out; false for another name. */
bool snug_bf16_choice_from_name(const char *name, snug_bf16_choice *out);

/* Sets k's bf16 instruction as choice says: AUTO calibrates, FMA takes the
 * table's FMA, DP vdpbf16ps (SNUG_UNSUPPORTED, naming the table, where
 * the table has none). */
snug_status snug_kernels_choose_bf16(snug_kernels *k, snug_bf16_choice choice, snug_error *err);

/* Measures the candidate bf16 GEMM kernels of k's instruction set (about
 * 12 ms on one thread, L1-resident data) and keeps the faster in
 * k->bf16_insn, preferring the FMA (which does not round x to bf16)
 * unless vdpbf16ps is at least 15% faster; likewise the block formats'
 * matrix-vector paths on vpdpbusd ymm and zmm where both run (on Q4_K
 * weights in L2, one row of x), keeping the faster in k->qgemv; records
 * the rates in k->calib_gflops. Nothing to measure on tables with one
 * candidate. Its data (about 50 and 150 KiB, category other) is freed
 * before it returns; without the memory for it the defaults stay. */
void snug_kernels_calibrate(snug_kernels *k);

/* One line saying what k runs for weights of dtype wdt: "avx512bf16; bf16
 * matmuls on vdpbf16ps zmm, up to 4 rows on vfmadd231ps ymm (calibrated,
 * one thread: vfmadd231ps zmm 112.4, vdpbf16ps zmm 225.5 GFLOP/s)" into buf
 * (size bytes, truncated). Returns buf. */
const char *snug_kernels_describe(const snug_kernels *k, snug_dtype wdt, char *buf, size_t size);

/* Makes bf16 weights run insn (SNUG_INSN_DPBF16_ZMM, or the table's FMA);
 * SNUG_UNSUPPORTED when the table cannot. Tests and benchmarks. */
snug_status snug_kernels_set_bf16(snug_kernels *k, snug_insn insn, snug_error *err);

/* Makes block-format weights run the matrix-vector path of insn
 * (SNUG_INSN_MADDUBS_YMM, SNUG_INSN_DPBUSD_YMM, or SNUG_INSN_SCALAR for the
 * reference loops); SNUG_UNSUPPORTED when this CPU or the table cannot.
 * Tests and benchmarks. */
snug_status snug_kernels_set_qgemv(snug_kernels *k, snug_insn insn, snug_error *err);

/* y (n, m) = x (n, k) times the transpose of w (m, k): y[t][o] = sum_i
 * x[t][i] w[o][i]. x and y are dense row-major f32; w is in the panel
 * layout (linear.h). Reads each weight once for the whole batch when n
 * <= 4 (the matrix-vector path) and once per block of up to 512 rows of x
 * above. Runs on the threads of pool (NULL: the caller alone; tiny
 * products also run on the caller alone); results do not depend on the
 * number of threads. They may on the number of rows of x, in the last
 * bits: the matrix-vector path (up to 4 rows, bf16's odd elements summed
 * apart for 1 and 2) and the GEMM (its instruction, its k blocks) add in
 * different orders. Block-format weights (base/quant.h) meet x quantized
 * to 8 bits (kernels/qdot.h: groups of 256 for the K-quants, 32 for the
 * others), as llama.cpp quantizes activations, on every path: up to 4 rows
 * by integer dot products (k->qgemv, or snug_qdot_ref's loops), more rows
 * with x at its 8-bit levels in float against slices of the weights
 * dequantized, so that a row's result does not depend on the batch beyond
 * the order of the sums. scratch holds snug_matmul_scratch_bytes(T, N, K)
 * bytes, 64-byte aligned, with the pool's threads <= T, n <= N, w->k <= K.
 * y must not overlap x or w. */
void snug_matmul(const snug_kernels *k, float *y, const float *x, int64_t n, const snug_linear *w,
                 void *scratch, snug_pool *pool);

/* As snug_matmul, with y's rows ldy (>= w->m) floats apart: w's outputs
 * are columns [0, w->m) of a wider y (one part of a matrix whose row
 * ranges are held in different formats); the other columns are left as
 * they are. */
void snug_matmul_into(const snug_kernels *k, float *y, int64_t ldy, const float *x, int64_t n,
                      const snug_linear *w, void *scratch, snug_pool *pool);

/* The instruction the inner loop of snug_matmul runs for weights of dtype
 * wdt and n rows of x under k. Pure. */
snug_insn snug_matmul_insn(const snug_kernels *k, snug_dtype wdt, int64_t n);

/* Rows of x up to which snug_matmul runs the matrix-vector path for
 * weights of dtype wdt under k (SNUG_GEMV_MAX_N, 4; on AVX2 16 for
 * unquantized weights, in passes of 4 rows per panel: cheaper there than
 * the GEMM's tiles up to that many, measured). Pure. */
int64_t snug_matmul_gemv_rows(const snug_kernels *k, snug_dtype wdt);

/* The scratch bytes snug_matmul needs when run on up to n_threads threads
 * with up to n_max rows of x of up to k_max elements: per thread, slices
 * of three panels converted to f32 and a padded copy of a narrow panel (a
 * constant), and all of x packed once, shared by the threads (about
 * 4 (n_max + 12) (k_max + 2) bytes). Pure. */
size_t snug_matmul_scratch_bytes(int32_t n_threads, int64_t n_max, int64_t k_max);

#endif /* SNUG_KERNELS_H */
