/*
 * k_impl.h: internal to src/kernels: how the per-instruction-set files fill
 * a snug_kernels table, and the pieces of the matmul that each instruction
 * set supplies to the one driver in k_matmul.c.
 *
 * The matmul y (n, m) = x (n, k) w^T reads w in its panel layout
 * (linear.h: panels of 16 rows, k-major). The driver splits the panels
 * across threads. For n <= SNUG_GEMV_MAX_N a matrix-vector routine streams
 * the thread's panels once for all n rows of x. Above, a blocked GEMM: all
 * of x is packed once per call (shared by the threads) into panels of mr
 * rows, k-major, in blocks of kc elements; each thread then runs, for each
 * block of k and of mc rows of x, over its weight panels three at a time,
 * each register tile of mr rows of x against those (up to) 48 rows of w
 * read straight from the layout (the narrow last panel of a matrix through
 * a zero-padded copy; bf16 slices converted to f32 first on the paths that
 * say so).
 */
#ifndef SNUG_K_IMPL_H
#define SNUG_K_IMPL_H

#include "kernels.h"

/* n up to this goes through the matrix-vector path. */
#define SNUG_GEMV_MAX_N 4

/* Upper bounds on any kind's k block and register tile rows of x, and the
 * rows of x in one block (the scratch is sized from these). */
#define SNUG_GEMM_KC_MAX 512
#define SNUG_GEMM_MR_MAX 12
#define SNUG_GEMM_MC 512

/* One register tile: mr_v (<= the kind's mr) rows of packed x a against
 * np (1 to 3) panels of w, b[j] the start of panel j's slice of the k
 * block (kc elements; a panel steps 16 values at a time: floats, f16
 * halves, or bf16 pairs for kc / 2 rounded up steps). Writes (add: adds to)
 * c[i * ldc + 16 j + l] for i < mr_v, j < np, l < 16. The packed x holds
 * mr values per k step (rows past n zero): floats (one per element; for
 * the bf16-pair kinds one more zero step when kc is odd), or with a_bf16
 * bf16 pairs (x[2q], x[2q + 1]) rounded to nearest even, low half first.
 * pf: the lines to fetch meanwhile (snug_prefetch; count 0 for none). */
typedef struct snug_prefetch snug_prefetch;
typedef void (*snug_micro_fn)(int64_t kc, const void *a, const void *const b[3], int32_t np,
                              float *c, int64_t ldc, int32_t mr_v, bool add,
                              const snug_prefetch *pf);

/* What a micro-kernel fetches into L2 while it computes (the weight slices
 * the next call will read, so that memory and arithmetic overlap): the
 * 64-byte lines [first, first + count) from each of base[0 .. np), one
 * line of each at each of its first count k steps (count is at most its
 * steps: a slice has at most one line per step). */
struct snug_prefetch {
    const char *base[3];
    int32_t np;
    int64_t first, count;
};

/* The prefetch of step q of a micro-kernel (pf as above). */
static inline void snug_prefetch_step(const snug_prefetch *pf, int64_t q)
{
    if (q >= pf->count) return;
    for (int32_t j = 0; j < pf->np; j++) __builtin_prefetch(pf->base[j] + (pf->first + q) * 64, 0, 2);
}

/* Packs one whole panel of x (mr rows of k elements from x0, every row
 * real) for the k block [pc, pc + len) into pan, as the driver's portable
 * packing does: ksteps x mr 32-bit values (see snug_micro_fn). */
typedef void (*snug_pack_x_fn)(uint32_t *pan, const float *x0, int64_t k, int64_t pc, int64_t len);

/* A GEMM kind: a micro-kernel and the blocking that suits it. */
typedef struct snug_gemm_kind {
    snug_micro_fn micro; /* NULL: the instruction set has none */
    int32_t mr;          /* rows of x per register tile (<= SNUG_GEMM_MR_MAX) */
    int32_t kc;          /* elements per k block (even, <= SNUG_GEMM_KC_MAX) */
    bool a_bf16;         /* x packed as bf16 pairs */
    snug_insn insn;      /* the multiply-add of micro */
    snug_pack_x_fn pack_x; /* a vectorized packing of whole panels of x (NULL: the driver's) */
} snug_gemm_kind;

/* What one instruction set supplies to the driver. */
typedef struct snug_matmul_ops {
    /* y[t][o] for t < n (<= SNUG_GEMV_MAX_N) and the rows o of panels
     * [p0, p1) of w (the narrow last panel included); y rows ldy floats
     * apart. */
    void (*gemv)(float *y, int64_t ldy, const float *x, int64_t n, const snug_linear *w, int64_t p0,
                 int64_t p1);
    snug_insn gemv_insn;
    /* Rows of x up to which gemv serves an unquantized matrix (0:
     * SNUG_GEMV_MAX_N); gemv takes up to this many. */
    int32_t gemv_max_n;
    snug_gemm_kind f32, f16;
    snug_gemm_kind bf16_fma; /* bf16 pairs widened to floats in registers */
    snug_gemm_kind bf16_dp;  /* vdpbf16ps on bf16 pairs (micro NULL without it) */
    /* From this many rows of x, bf16 weights on the FMA kinds convert each
     * slice of panels to f32 once (bf16_to_f32) and run the f32 kind. */
    int32_t convert_min_n;
    /* ksteps steps of one full bf16 panel (16 pairs each) into 2 ksteps
     * steps of 16 floats: an f32 panel slice. */
    void (*bf16_to_f32)(float *dst, const uint32_t *src, int64_t ksteps);
    /* snug_linear_quant_slice_f32's contract, in vectors (NULL: it). */
    void (*quant_slice)(const snug_linear *w, int64_t p, int64_t e0, int64_t len, float *dst);
} snug_matmul_ops;

/* A matrix-vector path of block-format weights (k_quant.c): y[t][o] for
 * t < n (<= SNUG_GEMV_MAX_N) and the rows o of panels [p0, p1) of w (the
 * narrow last panel included), from x8 (n rows of w->k / 32 blocks, row t
 * at x8 + t k / 32), by integer dot products as snug_qdot_ref; y rows ldy
 * floats apart. */
typedef void (*snug_qgemv_fn)(float *y, int64_t ldy, const struct snug_x8_block *x8, int64_t n,
                              const snug_linear *w, int64_t p0, int64_t p1);

typedef struct snug_qgemv_kind {
    snug_qgemv_fn fn;
    snug_insn insn; /* its integer multiply-add */
} snug_qgemv_kind;

enum { SNUG_QGEMV_KINDS = 3 };

/* The block-format matrix-vector paths this CPU runs under the instruction
 * set isa, the best last (vpmaddubsw ymm from AVX2; vpdpbusd ymm where
 * AVX-VNNI or AVX-512 VNNI is there; with AVX-512 VNNI then the zmm path,
 * two rows of Q4_K, Q5_K and Q6_K to a vector), into out; returns their count (0
 * below AVX2). Pure apart from reading the CPU. */
int32_t snug_qgemv_kinds(snug_isa isa, snug_qgemv_kind out[SNUG_QGEMV_KINDS]);

/* snug_linear_quant_slice_f32 on AVX2 (k_quant.c; for e0 and len
 * multiples of 8): every block of the slice dequantized by row in vectors,
 * then turned over 8 x 8 at a time. */
void snug_quant_slice_f32_avx2(const snug_linear *w, int64_t p, int64_t e0, int64_t len, float *dst);

/* The block-format GEMM on 8-bit products (k_qgemm.c), by integer dot
 * products as snug_qdot_ref (the same sums, in float in another order).
 * x goes first into groups of SNUG_QGEMM_XROWS rows (snug_qgemm_pack_x:
 * groups [g0, g1) of n rows of k elements quantized for weights wdt, on
 * AVX2, through tmp (k / 32 blocks), into xt of
 * snug_qgemm_x_bytes(n, k)). A snug_qgemm_fn then sets y[t][o] for t < n
 * and the rows o of panels [p0, p1) of w (narrow last panel included),
 * unpacking each panel's k slices into tb (snug_qgemm_panel_bytes(w->k)
 * bytes, 64-byte aligned). snug_qgemm_kinds: the instructions this CPU
 * runs it on under isa, the best last (vpmaddubsw ymm from AVX2; vpdpbusd
 * ymm with AVX-VNNI; vpdpbusd zmm with AVX-512 VNNI); returns their count. snug_qgemm_runs: whether
 * the CPU has AVX-512 VNNI. */
enum { SNUG_QGEMM_XROWS = 16, SNUG_QGEMM_KINDS = 3 };
typedef void (*snug_qgemm_fn)(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0,
                              int64_t p1, void *tb);
typedef struct snug_qgemm_kind {
    snug_qgemm_fn fn;
    snug_insn insn;
} snug_qgemm_kind;
/* snug_x8_quantize on AVX2 (k_x8.c: the GEMMs' rows of x): the same
 * blocks, bit for bit. */
void snug_x8_quantize_avx2(const float *x, int64_t k, snug_dtype wdt, struct snug_x8_block *out);
size_t snug_qgemm_x_bytes(int64_t n, int64_t k);
void snug_qgemm_pack_x(void *xt, const float *x, int64_t n, int64_t k, snug_dtype wdt, int64_t g0, int64_t g1,
                       struct snug_x8_block *tmp);
size_t snug_qgemm_panel_bytes(int64_t k);
int32_t snug_qgemm_kinds(snug_isa isa, snug_qgemm_kind out[SNUG_QGEMM_KINDS]);
bool snug_qgemm_runs(void);

/* The interleaved block formats (Q4_K, Q6_K, Q8_0, Q5_0, Q4_0: snug_linear_interleaved;
 * k_qlanes.c): snug_qgemv_fns of each instruction for them (the vpdpbusd
 * ymm ones: AVX-VNNI's and AVX-512 VL's), and snug_qgemm_fns, whose x is
 * snug_qlanes_pack_x's (rows [t0, t1) of x, quantized for weights wdt
 * through tmp (k / 32 blocks), into their places in xt, in tiles of 8
 * rows; the rows of the last tile past n zeros when t1 reaches n;
 * snug_qlanes_x_bytes(n, k) in all) and whose tb holds
 * snug_qlanes_scratch_bytes(k). Only call those of an instruction the CPU
 * has. */
size_t snug_qlanes_x_bytes(int64_t n, int64_t k);
size_t snug_qlanes_scratch_bytes(int64_t k);
void snug_qlanes_pack_x(void *xt, const float *x, int64_t n, int64_t k, snug_dtype wdt, int64_t t0, int64_t t1,
                        struct snug_x8_block *tmp);
void snug_qlanes_gemv_zmm(float *y, int64_t ldy, const struct snug_x8_block *x8, int64_t n, const snug_linear *w,
                       int64_t p0, int64_t p1);
void snug_qlanes_gemv_maddubs(float *y, int64_t ldy, const struct snug_x8_block *x8, int64_t n, const snug_linear *w,
                           int64_t p0, int64_t p1);
void snug_qlanes_gemv_vnni_avx(float *y, int64_t ldy, const struct snug_x8_block *x8, int64_t n, const snug_linear *w,
                            int64_t p0, int64_t p1);
void snug_qlanes_gemv_vnni_512(float *y, int64_t ldy, const struct snug_x8_block *x8, int64_t n, const snug_linear *w,
                            int64_t p0, int64_t p1);
void snug_qlanes_gemm_zmm(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0,
                       int64_t p1, void *tb);
void snug_qlanes_gemm_maddubs(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0,
                           int64_t p1, void *tb);
void snug_qlanes_gemm_vnni_avx(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0,
                            int64_t p1, void *tb);

/* The threaded matmul driver (k_matmul.c), the same for every SIMD
 * instruction set: the contract of snug_matmul. */
void snug_matmul_blocked(const snug_kernels *kt, const snug_matmul_ops *o, float *y, int64_t ldy,
                         const float *x, int64_t n, const snug_linear *w, void *scratch, snug_pool *pool);

/* The kind snug_matmul_blocked runs for weights of dtype wdt and n > 4
 * rows of x under the table kt (its bf16 choice), and whether it converts
 * bf16 slices to f32 first. */
const snug_gemm_kind *snug_matmul_kind(const snug_kernels *kt, const snug_matmul_ops *o,
                                       snug_dtype wdt, int64_t n, bool *convert);

/* The matmul pieces of each instruction set (k_avx2.c, k_avx512.c). Only
 * use them once the CPU is known to support them. */
extern const snug_matmul_ops snug_avx2_matmul_ops;
extern const snug_matmul_ops snug_avx512_matmul_ops;
extern const snug_matmul_ops snug_avx512bf16_matmul_ops;

/* The AVX2 matrix-vector path, which the AVX-512 tables reuse where the
 * memory, not the arithmetic, is the limit. */
void snug_avx2_gemv(float *y, int64_t ldy, const float *x, int64_t n, const snug_linear *w, int64_t p0,
                    int64_t p1);

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* The 8 x 8 transpose of r[0..7] in place (for the AVX2 and AVX-512 files). */
__attribute__((target("avx2"), always_inline)) static inline void snug_transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
#endif

/* Fill a table for one instruction set (k_scalar.c, k_avx2.c, k_avx512.c).
 * The SIMD ones are only called once the CPU is known to support them. */
void snug_kernels_fill_scalar(snug_kernels *k);
void snug_kernels_fill_avx2(snug_kernels *k);
void snug_kernels_fill_avx512(snug_kernels *k);
void snug_kernels_fill_avx512bf16(snug_kernels *k);

#endif /* SNUG_K_IMPL_H */
