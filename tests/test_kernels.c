/*
 * test_kernels.c: the numeric kernels. The scalar kernels are checked
 * against plain double-precision loops written here; every SIMD table the
 * CPU supports is checked against the scalar one (the others print
 * "skipped: cpu lacks ..."). Sizes are awkward on purpose: not multiples of
 * the vector width, the register tile or the cache blocks.
 *
 * Tolerances (as kernels.h states them), on |got - want|:
 *   matmul f32/f16/bf16 weights:   1e-5 * sum_i |x_i w_i|
 *   matmul bf16 on avx512bf16:     1e-2 * sum_i |x_i w_i| (x rounded to bf16)
 *   rmsnorm, silu_mul, rope:       1e-5 * the sum of |terms| of the result
 *   add, add_bias, load, store:    exact (bit for bit, NaNs included)
 *   attention:                     2e-5 * sum_j p_j |v_j| (p the softmax
 *                                  weights: the output's sum of |terms|)
 * The max error of each family is printed, relative to that bound's scale.
 */
#include "base/dtype.h"
#include "base/quant.h"
#include "kernels/k_impl.h"
#include "kernels/kernels.h"
#include "kernels/qdot.h"
#include "test.h"

#include <stdint.h>

/* ---- helpers ---------------------------------------------------------------- */

typedef struct {
    uint64_t s;
} rng_t;

static uint32_t rng_u32(rng_t *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (uint32_t)(r->s >> 11);
}

/* uniform in [-1, 1) */
static float rng_f(rng_t *r) { return (float)((double)rng_u32(r) / 2147483648.0 - 1.0); }

static void fill(rng_t *r, float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = rng_f(r);
}

/* n random values stored as dt (malloc'd) */
static void *make_typed(rng_t *r, snug_dtype dt, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof(float));
    fill(r, f, n);
    void *out = malloc((n ? n : 1) * snug_dtype_size(dt));
    snug_convert(out, dt, f, SNUG_DTYPE_F32, n);
    free(f);
    return out;
}

static double typed_at(const void *p, snug_dtype dt, size_t i)
{
    if (dt == SNUG_DTYPE_MXFP8_E4M3 || dt == SNUG_DTYPE_MXFP8_E5M2) { /* blocks of 32 likewise */
        const uint8_t *b = (const uint8_t *)p + i / 32 * 33;
        return ldexp((double)snug_fp8_to_f32(b[1 + i % 32], snug_mxfp8_elem(dt)), (int)b[0] - 127);
    }
    if (dt == SNUG_DTYPE_Q8_0) { /* blocks of 32 from p (kernels.h's snug_kv_view) */
        const uint8_t *b = (const uint8_t *)p + i / 32 * 34;
        return (double)(snug_f16_to_f32((uint16_t)(b[0] | b[1] << 8)) * (float)(int8_t)b[2 + i % 32]);
    }
    if (dt == SNUG_DTYPE_F32) return ((const float *)p)[i];
    if (dt == SNUG_DTYPE_F16) return snug_f16_to_f32(((const uint16_t *)p)[i]);
    return snug_bf16_to_f32(((const uint16_t *)p)[i]);
}

/* Scratch for every shape these tests multiply (n <= 512, k <= 4096). */
static void *scratch_alloc(int32_t n_threads)
{
    size_t b = snug_round_up(snug_matmul_scratch_bytes(n_threads, 1100, 4096), 64);
    return aligned_alloc(64, b);
}

static const snug_dtype wdts[] = {SNUG_DTYPE_F32, SNUG_DTYPE_F16, SNUG_DTYPE_BF16};

/* The SIMD tables this CPU runs; prints a "skipped" line for the others. */
static int simd_isas(snug_isa *out, const char *what)
{
    snug_isa best = snug_isa_detect();
    int n = 0;
    for (int i = SNUG_ISA_AVX2; i < SNUG_ISA_COUNT; i++) {
        if ((snug_isa)i <= best)
            out[n++] = (snug_isa)i;
        else
            printf("  %s %s: skipped: cpu lacks %s\n", what, snug_isa_name((snug_isa)i),
                   snug_isa_name((snug_isa)i));
    }
    return n;
}

static snug_kernels kernels_of(snug_isa isa)
{
    snug_kernels k;
    snug_error err = {0};
    snug_status st = snug_kernels_init(&k, isa, &err);
    if (st != SNUG_OK) {
        printf("snug_kernels_init(%s): %s\n", snug_isa_name(isa), err.msg);
        abort();
    }
    return k;
}

/* ---- dispatch ------------------------------------------------------------- */

static void test_isa_detect_and_init(void)
{
    snug_isa best = snug_isa_detect();
    printf("  detected: %s\n", snug_isa_name(best));
    CHECK(best >= SNUG_ISA_SCALAR && best < SNUG_ISA_COUNT, "detect returned %d", (int)best);
    for (int i = 0; i < SNUG_ISA_COUNT; i++) {
        snug_isa isa = (snug_isa)i, back = SNUG_ISA_COUNT;
        CHECK(snug_isa_from_name(snug_isa_name(isa), &back) && back == isa, "name %s",
              snug_isa_name(isa));
        snug_kernels k;
        snug_error err = {0};
        if (isa <= best) {
            CHECK_OK(snug_kernels_init(&k, isa, &err), &err);
            CHECK(k.isa == isa && (k.mm != NULL) == (isa != SNUG_ISA_SCALAR) && k.rmsnorm &&
                      k.silu_mul && k.gelu_tanh_mul && k.add && k.add_bias && k.rope && k.store && k.load &&
                      k.attention,
                  "table of %s incomplete", snug_isa_name(isa));
        } else {
            CHECK_FAILS(snug_kernels_init(&k, isa, &err), &err, SNUG_UNSUPPORTED,
                        snug_isa_name(isa));
            CHECK(strstr(err.msg, snug_isa_name(best)) != NULL, "message names %s: %s",
                  snug_isa_name(best), err.msg);
        }
    }
    snug_isa x;
    CHECK(!snug_isa_from_name("avx9", &x), "unknown name accepted");
    CHECK(strcmp(snug_isa_name((snug_isa)99), "unknown") == 0, "name of a bad isa");
    snug_kernels k;
    snug_error err = {0};
    CHECK_FAILS(snug_kernels_init(&k, (snug_isa)7, &err), &err, SNUG_INVALID, "unknown");
    size_t s1 = snug_matmul_scratch_bytes(1, 32, 2048), s2 = snug_matmul_scratch_bytes(2, 32, 2048);
    CHECK(s1 > 0 && s1 % 64 == 0 && s2 > s1 && snug_matmul_scratch_bytes(1, 64, 2048) > s1 &&
              snug_matmul_scratch_bytes(1, 32, 4096) > s1 &&
              snug_matmul_scratch_bytes(1, 32, 2048) >= 4 * 32 * 2048,
          "scratch bytes %zu, %zu", s1, s2);
}

/* What snug_matmul_insn says each table runs: this file's own reading of
 * the dispatch (k_matmul.c, k_avx2.c, k_avx512.c): n <= 4 the
 * matrix-vector path (ymm FMAs); above, the table's GEMM: ymm FMAs on
 * avx2, zmm FMAs on avx512, and for bf16 on avx512bf16 the table's
 * bf16_insn (FMA unless set or calibrated to vdpbf16ps). */
static void test_matmul_insn(void)
{
    static const struct {
        snug_isa isa;
        bool dp; /* bf16 set to vdpbf16ps */
        snug_dtype wdt;
        int64_t n;
        snug_insn want;
    } cases[] = {
        {SNUG_ISA_SCALAR, false, SNUG_DTYPE_BF16, 512, SNUG_INSN_SCALAR},
        {SNUG_ISA_SCALAR, false, SNUG_DTYPE_F32, 1, SNUG_INSN_SCALAR},
        {SNUG_ISA_AVX2, false, SNUG_DTYPE_F32, 512, SNUG_INSN_FMA_YMM},
        {SNUG_ISA_AVX2, false, SNUG_DTYPE_BF16, 32, SNUG_INSN_FMA_YMM},
        {SNUG_ISA_AVX2, false, SNUG_DTYPE_F16, 1, SNUG_INSN_FMA_YMM},
        {SNUG_ISA_AVX512, false, SNUG_DTYPE_F32, 32, SNUG_INSN_FMA_ZMM},
        {SNUG_ISA_AVX512, false, SNUG_DTYPE_BF16, 512, SNUG_INSN_FMA_ZMM},
        {SNUG_ISA_AVX512, false, SNUG_DTYPE_BF16, 5, SNUG_INSN_FMA_ZMM},
        {SNUG_ISA_AVX512, false, SNUG_DTYPE_F16, 4, SNUG_INSN_FMA_YMM},
        {SNUG_ISA_AVX512, false, SNUG_DTYPE_F16, 5, SNUG_INSN_FMA_ZMM},
        {SNUG_ISA_AVX512_BF16, false, SNUG_DTYPE_BF16, 512, SNUG_INSN_FMA_ZMM},
        {SNUG_ISA_AVX512_BF16, true, SNUG_DTYPE_BF16, 512, SNUG_INSN_DPBF16_ZMM},
        {SNUG_ISA_AVX512_BF16, true, SNUG_DTYPE_BF16, 5, SNUG_INSN_DPBF16_ZMM},
        {SNUG_ISA_AVX512_BF16, true, SNUG_DTYPE_BF16, 1, SNUG_INSN_FMA_YMM},
        {SNUG_ISA_AVX512_BF16, true, SNUG_DTYPE_F32, 512, SNUG_INSN_FMA_ZMM},
        {SNUG_ISA_AVX512_BF16, true, SNUG_DTYPE_F16, 32, SNUG_INSN_FMA_ZMM},
    };
    snug_isa best = snug_isa_detect();
    snug_error err = {0};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cases); i++) {
        if (cases[i].isa > best) continue; /* its table cannot be made here */
        snug_kernels k = kernels_of(cases[i].isa);
        if (cases[i].dp) CHECK_OK(snug_kernels_set_bf16(&k, SNUG_INSN_DPBF16_ZMM, &err), &err);
        snug_insn got = snug_matmul_insn(&k, cases[i].wdt, cases[i].n);
        CHECK(got == cases[i].want, "%s%s, %s weights, n %lld: %s, want %s", snug_isa_name(cases[i].isa),
              cases[i].dp ? " (dp)" : "", snug_dtype_name(cases[i].wdt), (long long)cases[i].n,
              snug_insn_name(got), snug_insn_name(cases[i].want));
        CHECK(snug_insn_isa(got) <= cases[i].isa, "%s needs %s, more than the table's %s",
              snug_insn_name(got), snug_isa_name(snug_insn_isa(got)), snug_isa_name(cases[i].isa));
    }
    snug_bf16_choice c = SNUG_BF16_DP;
    CHECK(snug_bf16_choice_from_name("auto", &c) && c == SNUG_BF16_AUTO &&
              snug_bf16_choice_from_name("fma", &c) && c == SNUG_BF16_FMA &&
              snug_bf16_choice_from_name("vdpbf16ps", &c) && c == SNUG_BF16_DP &&
              !snug_bf16_choice_from_name("dp", &c) && !snug_bf16_choice_from_name(NULL, &c),
          "--bf16-matmul names");
    for (int i = SNUG_ISA_SCALAR; i <= (int)best; i++) { /* FMA pins every table's own FMA */
        snug_kernels k = kernels_of((snug_isa)i);
        snug_kernels_set_bf16(&k, SNUG_INSN_DPBF16_ZMM, NULL);
        CHECK_OK(snug_kernels_choose_bf16(&k, SNUG_BF16_FMA, &err), &err);
        CHECK(k.bf16_insn == snug_matmul_insn(&k, SNUG_DTYPE_F32, 512), "%s: FMA pinned: %s",
              snug_isa_name((snug_isa)i), snug_insn_name(k.bf16_insn));
    }
    for (int i = SNUG_ISA_SCALAR; i <= (int)best && i < SNUG_ISA_AVX512_BF16; i++) {
        snug_kernels k = kernels_of((snug_isa)i);
        CHECK_FAILS(snug_kernels_set_bf16(&k, SNUG_INSN_DPBF16_ZMM, &err), &err, SNUG_UNSUPPORTED,
                    "vdpbf16ps");
    }
    if (best >= SNUG_ISA_AVX512_BF16) {
        snug_kernels k = kernels_of(SNUG_ISA_AVX512_BF16);
        snug_kernels_calibrate(&k);
        double f = k.calib_gflops[SNUG_INSN_FMA_ZMM], d = k.calib_gflops[SNUG_INSN_DPBF16_ZMM];
        printf("  calibration: vfmadd231ps zmm %.1f GFLOP/s, vdpbf16ps zmm %.1f GFLOP/s: %s\n", f, d,
               snug_insn_name(k.bf16_insn));
        CHECK(f > 0 && d > 0, "both candidates measured: %g, %g", f, d);
        CHECK(k.bf16_insn == (d >= 1.15 * f ? SNUG_INSN_DPBF16_ZMM : SNUG_INSN_FMA_ZMM),
              "the faster kept (15%% in favour of the FMA): %s", snug_insn_name(k.bf16_insn));
    }
    if (snug_qgemm_runs()) { /* AVX-512 VNNI: the block formats' vpdpbusd ymm and zmm paths measured too */
        snug_kernels k = kernels_of(best);
        snug_kernels_calibrate(&k);
        double y = k.calib_gflops[SNUG_INSN_DPBUSD_YMM], z = k.calib_gflops[SNUG_INSN_DPBUSD_ZMM];
        printf("  calibration: block formats, one row: vpdpbusd ymm %.1f, vpdpbusd zmm %.1f GOP/s: %s\n", y, z,
               snug_insn_name(k.qgemv_insn));
        CHECK(y > 0 && z > 0, "both matrix-vector paths measured: %g, %g", y, z);
        CHECK(k.qgemv_insn == (z > y ? SNUG_INSN_DPBUSD_ZMM : SNUG_INSN_DPBUSD_YMM), "the faster kept: %s",
              snug_insn_name(k.qgemv_insn));
    }
    CHECK(snug_insn_flops(SNUG_INSN_SCALAR) == 0 && snug_insn_flops(SNUG_INSN_FMA_YMM) == 16 &&
              snug_insn_flops(SNUG_INSN_FMA_ZMM) == 32 && snug_insn_flops(SNUG_INSN_DPBF16_ZMM) == 64,
          "flops per instruction");
    CHECK(strcmp(snug_insn_name(SNUG_INSN_DPBF16_ZMM), "vdpbf16ps zmm") == 0 &&
              strcmp(snug_insn_name(SNUG_INSN_FMA_YMM), "vfmadd231ps ymm") == 0 &&
              strcmp(snug_insn_name((snug_insn)9), "unknown") == 0,
          "instruction names");
}

/* ---- matmul ----------------------------------------------------------------- */

/* sum_i x[t][i] w[o][i] in double, and sum_i |x w| */
static void matmul_ref(const float *x, const void *w, snug_dtype wdt, int64_t n, int64_t k,
                       int64_t m, double *ref, double *mag)
{
    double *wd = malloc((size_t)(m * k + 1) * sizeof(double));
    for (int64_t i = 0; i < m * k; i++) wd[i] = typed_at(w, wdt, (size_t)i);
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = 0; o < m; o++) {
            double s = 0, a = 0;
            for (int64_t i = 0; i < k; i++) {
                double v = (double)x[t * k + i] * wd[o * k + i];
                s += v;
                a += fabs(v);
            }
            ref[t * m + o] = s;
            mag[t * m + o] = a;
        }
    free(wd);
}

typedef struct {
    int64_t n, k, m;
} shape;

static int n_shapes(shape *s, int max)
{
    static const int64_t ns[] = {1, 2, 3, 4, 5, 7, 16, 17, 33, 100};
    static const int64_t ks[] = {1, 3, 17, 129, 1000};
    static const int64_t ms[] = {1, 5, 31, 257};
    int c = 0;
    for (size_t a = 0; a < SNUG_ARRAY_LEN(ns); a++)
        for (size_t b = 0; b < SNUG_ARRAY_LEN(ks); b++)
            for (size_t d = 0; d < SNUG_ARRAY_LEN(ms); d++)
                if (c < max) s[c++] = (shape){ns[a], ks[b], ms[d]};
    /* across the blocks: kc (128 or 256), mc (512), the bf16 conversion
     * from 24 rows, panels of 16 rows with a narrow last one */
    if (c < max) s[c++] = (shape){1030, 70, 40};
    if (c < max) s[c++] = (shape){24, 513, 48};
    if (c < max) s[c++] = (shape){23, 256, 49};
    if (c < max) s[c++] = (shape){150, 600, 500};
    if (c < max) s[c++] = (shape){300, 1000, 260}; /* two mc blocks */
    if (c < max) s[c++] = (shape){4, 2051, 777};
    /* several nc blocks and kc blocks per thread, edge tiles in both (38: a
     * 2-row tile of the 6-row bf16-pairs kernel) */
    if (c < max) s[c++] = (shape){38, 1100, 1000};
    if (c < max) s[c++] = (shape){397, 530, 611};
    return c;
}

/* w (m x k of dt, row-major) packed into the panel layout (malloc'd data). */
static snug_linear pack_linear(const void *w, snug_dtype dt, int64_t m, int64_t k)
{
    size_t bytes = snug_linear_bytes(dt, m, k);
    void *d = malloc(bytes ? bytes : 1);
    snug_linear_pack(d, w, dt, m, k);
    return (snug_linear){dt, m, k, d};
}

/* A table and the bf16 instruction it is set to: every GEMM path there is. */
typedef struct {
    snug_kernels k;
    const char *name;
} variant;

static int variants_of(variant *out)
{
    snug_isa isas[SNUG_ISA_COUNT];
    int n_isa = simd_isas(isas, "matmul"), n = 0;
    snug_error err = {0};
    for (int i = 0; i < n_isa; i++) {
        out[n] = (variant){kernels_of(isas[i]), snug_isa_name(isas[i])};
        n++;
        if (isas[i] == SNUG_ISA_AVX512_BF16) {
            out[n] = (variant){kernels_of(isas[i]), "avx512bf16 (vdpbf16ps)"};
            CHECK_OK(snug_kernels_set_bf16(&out[n].k, SNUG_INSN_DPBF16_ZMM, &err), &err);
            n++;
        }
    }
    return n;
}

/* variants_of, and each table again with every other matrix-vector path
 * of block formats its CPU has (the table's own is the best) and the f32
 * GEMM on dequantized slices, and with every other 8-bit GEMM its CPU has
 * (vpmaddubsw ymm, vpdpbusd ymm, zmm). */
static int qgemv_variants_of(variant *out)
{
    static char names[SNUG_ISA_COUNT + 1][SNUG_QGEMM_KINDS][64];
    int n = variants_of(out), base = n;
    snug_error err = {0};
    for (int v = 0; v < base; v++) {
        if (out[v].k.bf16_insn == SNUG_INSN_DPBF16_ZMM) continue;
        snug_qgemv_kind kinds[SNUG_QGEMV_KINDS];
        snug_qgemm_kind gk[SNUG_QGEMM_KINDS];
        int32_t nk = snug_qgemv_kinds(out[v].k.isa, kinds), ng = snug_qgemm_kinds(out[v].k.isa, gk);
        /* variant i: the matrix-vector path i (the table's own past the others), and the f32 GEMM (i
         * = 0), the 8-bit GEMM i - 1 (past the others: the table's own) */
        for (int32_t i = 0; i < SNUG_MAX(nk - 1, ng); i++) {
            out[n] = out[v];
            if (i < nk - 1) CHECK_OK(snug_kernels_set_qgemv(&out[n].k, kinds[i].insn, &err), &err);
            if (i < ng) {
                out[n].k.qgemm = i == 0 ? NULL : gk[i - 1].fn;
                out[n].k.qgemm_insn = i == 0 ? SNUG_INSN_SCALAR : gk[i - 1].insn;
            }
            snprintf(names[v][i], sizeof names[0][0], "%s (%s, %s GEMM)", out[v].name,
                     snug_insn_name(out[n].k.qgemv_insn),
                     out[n].k.qgemm ? snug_insn_name(out[n].k.qgemm_insn) : "f32");
            out[n].name = names[v][i];
            n++;
        }
    }
    return n;
}

/* The scalar table's product y (n rows of x by lin) against the float64
 * ref: each error relative to mag within 1e-5, the worst into *worst. */
static void scalar_vs_ref(const snug_linear *lin, int64_t n, const float *y, const double *ref,
                          const double *mag, double *worst)
{
    int bad = 0;
    for (int64_t i = 0; i < n * lin->m; i++) {
        double e = fabs(y[i] - ref[i]) / (mag[i] + 1e-30);
        *worst = SNUG_MAX(*worst, e);
        if (!(e <= 1e-5) && bad++ < 3)
            CHECK(false, "scalar %s n=%ld k=%ld m=%ld [%ld]: %g vs %g", snug_dtype_name(lin->dtype), (long)n,
                  (long)lin->k, (long)lin->m, (long)i, y[i], ref[i]);
    }
}

/* Runs the SIMD table kv on lin with 1 thread and with the pool's, against
 * the scalar table's y: each product's error relative to mag within 1e-5
 * (1e-2 for vdpbf16ps above 4 rows, which rounds x to bf16), the worst
 * into *worst. The pool's run writes into rows of y 3 floats wider
 * (snug_matmul_into), which must keep their 3 columns past m. Returns 1
 * when the 1- and 2-thread products differ. */
static int simd_vs_scalar(const variant *kv, const snug_linear *lin, const float *x, int64_t n,
                          const float *y, const double *mag, void *scratch, snug_pool *pool, double *worst)
{
    int64_t m = lin->m;
    bool dp = kv->k.bf16_insn == SNUG_INSN_DPBF16_ZMM && lin->dtype == SNUG_DTYPE_BF16;
    double tol = dp && n > 4 ? 1e-2 : 1e-5;
    const int64_t ldy = m + 3;
    float *y1 = malloc((size_t)(n * m) * sizeof(float)), *y2 = malloc((size_t)(n * ldy) * sizeof(float));
    for (int64_t i = 0; i < n * m; i++) y1[i] = NAN;
    for (int64_t i = 0; i < n * ldy; i++) y2[i] = -7.0f;
    snug_matmul(&kv->k, y1, x, n, lin, scratch, NULL);
    snug_matmul_into(&kv->k, y2, ldy, x, n, lin, scratch, pool);
    int bad = 0;
    for (int64_t i = 0; i < n * m; i++) {
        double e = fabs((double)y1[i] - y[i]) / (mag[i] + 1e-30);
        *worst = SNUG_MAX(*worst, e);
        if (!(e <= tol) && bad++ < 3)
            CHECK(false, "%s %s n=%ld k=%ld m=%ld [%ld]: %g vs scalar %g", kv->name, snug_dtype_name(lin->dtype),
                  (long)n, (long)lin->k, (long)m, (long)i, y1[i], y[i]);
    }
    int differ = 0;
    for (int64_t t = 0; t < n; t++) {
        differ |= memcmp(y1 + t * m, y2 + t * ldy, (size_t)m * sizeof(float)) != 0;
        for (int64_t o = m; o < ldy; o++) differ |= y2[t * ldy + o] != -7.0f;
    }
    free(y1);
    free(y2);
    return differ;
}

static void test_matmul(void)
{
    shape shapes[256];
    int ns = n_shapes(shapes, 256);
    variant kv[SNUG_ISA_COUNT + 1];
    int n_var = variants_of(kv);
    snug_kernels ks = kernels_of(SNUG_ISA_SCALAR);
    void *scratch = scratch_alloc(2);
    snug_pool *pool = NULL;
    snug_error err = {0};
    CHECK_OK(snug_pool_create(2, 0, &pool, &err), &err);
    rng_t r = {0x1234567u};
    double worst_scalar = 0, worst[SNUG_ISA_COUNT + 1][3] = {{0}};
    int thread_mismatch = 0;
    for (size_t d = 0; d < SNUG_ARRAY_LEN(wdts); d++) {
        snug_dtype wdt = wdts[d];
        for (int si = 0; si < ns; si++) {
            int64_t n = shapes[si].n, k = shapes[si].k, m = shapes[si].m;
            float *x = malloc((size_t)(n * k) * sizeof(float));
            fill(&r, x, (size_t)(n * k));
            void *w = make_typed(&r, wdt, (size_t)(m * k));
            snug_linear lin = pack_linear(w, wdt, m, k);
            double *ref = malloc((size_t)(n * m) * sizeof(double));
            double *mag = malloc((size_t)(n * m) * sizeof(double));
            float *y = malloc((size_t)(n * m) * sizeof(float));
            matmul_ref(x, w, wdt, n, k, m, ref, mag);
            snug_matmul(&ks, y, x, n, &lin, scratch, pool);
            scalar_vs_ref(&lin, n, y, ref, mag, &worst_scalar);
            for (int v = 0; v < n_var; v++)
                thread_mismatch += simd_vs_scalar(&kv[v], &lin, x, n, y, mag, scratch, pool, &worst[v][d]);
            free(x);
            free(w);
            free((void *)lin.data);
            free(ref);
            free(mag);
            free(y);
        }
    }
    CHECK(thread_mismatch == 0, "%d products differ between 1 and 2 threads (or wrote past their columns)", thread_mismatch);
    printf("  matmul scalar vs double: max err %.3g of sum|terms| (tolerance 1e-5), %d shapes x 3 "
           "dtypes\n",
           worst_scalar, ns);
    for (int v = 0; v < n_var; v++)
        printf("  matmul %s vs scalar: max err f32 %.3g, f16 %.3g, bf16 %.3g of sum|terms|\n",
               kv[v].name, worst[v][0], worst[v][1], worst[v][2]);
    snug_pool_free(pool);
    free(scratch);
}

/* A row of x gives the same floats whatever the step's other rows: past
 * SNUG_GEMV_MAX_N rows (from 5, where AVX2 runs the matrix-vector path in
 * passes and other tables the GEMM) every row of n rows equals that row of
 * 40 (the GEMM) bit for bit, for each dtype, on each instruction set the
 * machine runs, with k in and past one GEMM block and an odd one. */
static void test_matmul_rows_invariant(void)
{
    static const int64_t ks[] = {1, 129, 256, 1000, 2051}, m = 50, n_ref = 40;
    snug_pool *pool = NULL;
    snug_error err = {0};
    CHECK_OK(snug_pool_create(2, 0, &pool, &err), &err);
    void *scratch = scratch_alloc(2);
    rng_t r = {0x5EED5u};
    int differ = 0, cases = 0;
    for (int isa = SNUG_ISA_AVX2; isa <= (int)snug_isa_detect(); isa++) {
        snug_kernels kt = kernels_of((snug_isa)isa);
        for (size_t d = 0; d < SNUG_ARRAY_LEN(wdts); d++)
            for (size_t ki = 0; ki < SNUG_ARRAY_LEN(ks); ki++) {
                int64_t k = ks[ki];
                float *x = malloc((size_t)(n_ref * k) * sizeof(float));
                fill(&r, x, (size_t)(n_ref * k));
                void *w = make_typed(&r, wdts[d], (size_t)(m * k));
                snug_linear lin = pack_linear(w, wdts[d], m, k);
                float *ref = malloc((size_t)(n_ref * m) * sizeof(float)), *y = malloc((size_t)(n_ref * m) * sizeof(float));
                snug_matmul(&kt, ref, x, n_ref, &lin, scratch, pool);
                for (int64_t n = SNUG_GEMV_MAX_N + 1; n <= 17; n++, cases++) {
                    snug_matmul(&kt, y, x, n, &lin, scratch, pool);
                    if (memcmp(y, ref, (size_t)(n * m) * sizeof(float)) != 0 && differ++ < 3)
                        CHECK(false, "%s %s k=%ld: %ld rows differ from the same rows of %ld",
                              snug_isa_name((snug_isa)isa), snug_dtype_name(wdts[d]), (long)k, (long)n, (long)n_ref);
                }
                free(x);
                free(w);
                free((void *)lin.data);
                free(ref);
                free(y);
            }
    }
    printf("  rows of 5 to 17 against the same rows of 40: %d of %d cases differ\n", differ, cases);
    snug_pool_free(pool);
    free(scratch);
}

/* The driver (k_matmul.c) with plain-C micro-kernels that compute what
 * the SIMD ones do, on every machine: x packing for 8-row tiles as floats
 * and as bf16 pairs, panels three at a time, the narrow last panel, k
 * blocks, 512-row blocks of x and the bf16-to-f32 conversion path. */
enum { MOCK_MR = 8 };

static float bf16_lo(uint32_t u) { return snug_bf16_to_f32((uint16_t)(u & 0xFFFF)); }
static float bf16_hi(uint32_t u) { return snug_bf16_to_f32((uint16_t)(u >> 16)); }

/* One value of step q of panel slice b, lane l, for each kind. */
static float mock_w_f32(const void *b, int64_t q, int l) { return ((const float *)b)[q * 16 + l]; }
static float mock_w_f16(const void *b, int64_t q, int l)
{
    return snug_f16_to_f32(((const uint16_t *)b)[q * 16 + l]);
}

/* The weight the mocks' prefetch requests must stay inside (set before
 * each call of the driver), and the requests that fell outside it. */
static const char *mock_w_begin, *mock_w_end;
static _Atomic int mock_pf_outside;

static void mock_prefetch(const snug_prefetch *pf, int64_t steps)
{
    if (pf->np > 0 && pf->count > steps) mock_pf_outside++; /* more lines than steps to fetch them at */
    for (int32_t j = 0; j < pf->np; j++)
        for (int64_t q = pf->first; q < pf->first + pf->count; q++) {
            const char *line = pf->base[j] + q * 64;
            if (line < mock_w_begin || line >= mock_w_end) mock_pf_outside++;
        }
}

static void mock_store(const float acc[MOCK_MR][48], int32_t np, float *c, int64_t ldc, int32_t mr_v,
                       bool add)
{
    for (int32_t i = 0; i < mr_v; i++)
        for (int32_t j = 0; j < 16 * np; j++) c[i * ldc + j] = (add ? c[i * ldc + j] : 0.0f) + acc[i][j];
}

static void mock_micro_f(int64_t kc, const void *a, const void *const b[3], int32_t np, float *c,
                         int64_t ldc, int32_t mr_v, bool add, const snug_prefetch *pf,
                         float (*wv)(const void *, int64_t, int))
{
    mock_prefetch(pf, kc);
    const float *x = a;
    float acc[MOCK_MR][48] = {{0}};
    for (int64_t e = 0; e < kc; e++)
        for (int i = 0; i < MOCK_MR; i++)
            for (int32_t j = 0; j < np; j++)
                for (int l = 0; l < 16; l++) acc[i][16 * j + l] += x[e * MOCK_MR + i] * wv(b[j], e, l);
    mock_store(acc, np, c, ldc, mr_v, add);
}

static void mock_f32(int64_t kc, const void *a, const void *const b[3], int32_t np, float *c,
                     int64_t ldc, int32_t mr_v, bool add, const snug_prefetch *pf)
{
    mock_micro_f(kc, a, b, np, c, ldc, mr_v, add, pf, mock_w_f32);
}

static void mock_f16(int64_t kc, const void *a, const void *const b[3], int32_t np, float *c,
                     int64_t ldc, int32_t mr_v, bool add, const snug_prefetch *pf)
{
    mock_micro_f(kc, a, b, np, c, ldc, mr_v, add, pf, mock_w_f16);
}

static void mock_bf16_fma(int64_t kc, const void *a, const void *const b[3], int32_t np, float *c,
                          int64_t ldc, int32_t mr_v, bool add, const snug_prefetch *pf)
{
    mock_prefetch(pf, (kc + 1) / 2);
    const float *x = a;
    float acc[MOCK_MR][48] = {{0}};
    for (int64_t q = 0; q < (kc + 1) / 2; q++)
        for (int i = 0; i < MOCK_MR; i++)
            for (int32_t j = 0; j < np; j++)
                for (int l = 0; l < 16; l++) {
                    uint32_t w = ((const uint32_t *)b[j])[q * 16 + l];
                    acc[i][16 * j + l] += x[2 * q * MOCK_MR + i] * bf16_lo(w);
                    acc[i][16 * j + l] += x[(2 * q + 1) * MOCK_MR + i] * bf16_hi(w);
                }
    mock_store(acc, np, c, ldc, mr_v, add);
}

static void mock_bf16_dp(int64_t kc, const void *a, const void *const b[3], int32_t np, float *c,
                         int64_t ldc, int32_t mr_v, bool add, const snug_prefetch *pf)
{
    mock_prefetch(pf, (kc + 1) / 2);
    const uint32_t *x = a;
    float acc[MOCK_MR][48] = {{0}};
    for (int64_t q = 0; q < (kc + 1) / 2; q++)
        for (int i = 0; i < MOCK_MR; i++)
            for (int32_t j = 0; j < np; j++)
                for (int l = 0; l < 16; l++) {
                    uint32_t w = ((const uint32_t *)b[j])[q * 16 + l], v = x[q * MOCK_MR + i];
                    acc[i][16 * j + l] += bf16_lo(v) * bf16_lo(w) + bf16_hi(v) * bf16_hi(w);
                }
    mock_store(acc, np, c, ldc, mr_v, add);
}

static void mock_gemv(float *y, int64_t ldy, const float *x, int64_t n, const snug_linear *w, int64_t p0,
                      int64_t p1)
{
    for (int64_t o = p0 * 16; o < SNUG_MIN(w->m, p1 * 16); o++)
        for (int64_t t = 0; t < n; t++) {
            float s = 0;
            for (int64_t e = 0; e < w->k; e++) s += x[t * w->k + e] * snug_linear_elem(w, o, e);
            y[t * ldy + o] = s;
        }
}

static void mock_to_f32(float *dst, const uint32_t *src, int64_t ksteps)
{
    for (int64_t q = 0; q < ksteps; q++)
        for (int l = 0; l < 16; l++) {
            dst[32 * q + l] = bf16_lo(src[16 * q + l]);
            dst[32 * q + 16 + l] = bf16_hi(src[16 * q + l]);
        }
}

static void test_matmul_driver(void)
{
    const snug_matmul_ops mock = {
        .gemv = mock_gemv,
        .gemv_insn = SNUG_INSN_FMA_YMM,
        .f32 = {mock_f32, MOCK_MR, 128, false, SNUG_INSN_FMA_ZMM},
        .f16 = {mock_f16, MOCK_MR, 256, false, SNUG_INSN_FMA_ZMM},
        .bf16_fma = {mock_bf16_fma, MOCK_MR, 256, false, SNUG_INSN_FMA_ZMM},
        .bf16_dp = {mock_bf16_dp, MOCK_MR, 256, true, SNUG_INSN_DPBF16_ZMM},
        .convert_min_n = 24,
        .bf16_to_f32 = mock_to_f32,
    };
    static const shape shapes[] = {{5, 1, 1},      {7, 3, 50},      {17, 129, 31}, {24, 257, 47},
                                   {33, 1000, 97}, {100, 257, 481}, {9, 300, 1000}, {530, 131, 20}};
    snug_kernels ks = kernels_of(SNUG_ISA_SCALAR), kt = ks;
    kt.mm = &mock;
    void *scratch = scratch_alloc(2);
    snug_pool *pool = NULL;
    snug_error err = {0};
    CHECK_OK(snug_pool_create(2, 0, &pool, &err), &err);
    rng_t r = {77};
    double worst_f = 0, worst_dp = 0;
    for (size_t si = 0; si < SNUG_ARRAY_LEN(shapes); si++) {
        int64_t n = shapes[si].n, k = shapes[si].k, m = shapes[si].m;
        float *x = malloc((size_t)(n * k) * sizeof(float));
        fill(&r, x, (size_t)(n * k));
        float *want = malloc((size_t)(n * m) * sizeof(float));
        float *got = malloc((size_t)(n * m) * sizeof(float));
        double *ref = malloc((size_t)(n * m) * sizeof(double));
        double *mag = malloc((size_t)(n * m) * sizeof(double));
        for (size_t d = 0; d < SNUG_ARRAY_LEN(wdts); d++) {
            void *w = make_typed(&r, wdts[d], (size_t)(m * k));
            snug_linear lin = pack_linear(w, wdts[d], m, k);
            matmul_ref(x, w, wdts[d], n, k, m, ref, mag);
            snug_matmul(&ks, want, x, n, &lin, NULL, NULL);
            for (int dp = 0; dp < 2; dp++) {
                if (dp && wdts[d] != SNUG_DTYPE_BF16) continue;
                kt.bf16_insn = dp ? SNUG_INSN_DPBF16_ZMM : SNUG_INSN_FMA_ZMM;
                for (int64_t i = 0; i < n * m; i++) got[i] = NAN;
                mock_w_begin = lin.data;
                mock_w_end = mock_w_begin + snug_linear_bytes(lin.dtype, m, k);
                mock_pf_outside = 0;
                snug_matmul(&kt, got, x, n, &lin, scratch, pool);
                CHECK(mock_pf_outside == 0, "driver %s n=%ld k=%ld m=%ld: %d prefetch lines outside the weight",
                      snug_dtype_name(wdts[d]), (long)n, (long)k, (long)m, mock_pf_outside);
                double tol = dp ? 1e-2 : 1e-5, *worst = dp ? &worst_dp : &worst_f;
                int bad = 0;
                for (int64_t i = 0; i < n * m; i++) {
                    double e = fabs((double)got[i] - want[i]) / (mag[i] + 1e-30);
                    *worst = SNUG_MAX(*worst, e);
                    if (!(e <= tol) && bad++ < 3)
                        CHECK(false, "driver%s %s n=%ld k=%ld m=%ld [%ld]: %g vs scalar %g",
                              dp ? " (dp)" : "", snug_dtype_name(wdts[d]), (long)n, (long)k, (long)m,
                              (long)i, got[i], want[i]);
                }
            }
            free((void *)lin.data);
            free(w);
        }
        free(x);
        free(want);
        free(got);
        free(ref);
        free(mag);
    }
    printf("  driver with C micro-kernels vs scalar: max err %.3g (tolerance 1e-5), bf16 pairs "
           "dot %.3g (tolerance 1e-2)\n",
           worst_f, worst_dp);
    snug_pool_free(pool);
    free(scratch);
}

/* ---- block formats ---------------------------------------------------- */

/* m rows of k elements of block format dt as a file holds them (row-major
 * blocks): random bits, with every half-float scale and offset a finite
 * value of the size real files have (random halves are often NaN or
 * 65504). */
static uint8_t *make_quant(rng_t *r, snug_dtype dt, int64_t m, int64_t k)
{
    uint32_t t = snug_dtype_qtype(dt);
    static const struct {
        uint32_t t;
        int n;
        int off[2];
    } halves[] = {{SNUG_QTYPE_Q4_0, 1, {0, 0}},   {SNUG_QTYPE_Q4_1, 2, {0, 2}},
                  {SNUG_QTYPE_Q5_0, 1, {0, 0}},   {SNUG_QTYPE_Q5_1, 2, {0, 2}},
                  {SNUG_QTYPE_Q8_0, 1, {0, 0}},   {SNUG_QTYPE_Q2_K, 2, {80, 82}},
                  {SNUG_QTYPE_Q3_K, 1, {108, 0}}, {SNUG_QTYPE_Q4_K, 2, {0, 2}},
                  {SNUG_QTYPE_Q5_K, 2, {0, 2}},   {SNUG_QTYPE_Q6_K, 1, {208, 0}}};
    size_t bytes = snug_qtype_bytes(t, m * k), bb = snug_qtype_block_bytes(t);
    uint8_t *q = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) q[i] = (uint8_t)rng_u32(r);
    for (size_t h = 0; h < SNUG_ARRAY_LEN(halves); h++) {
        if (halves[h].t != t) continue;
        for (size_t b = 0; b < bytes / bb; b++)
            for (int i = 0; i < halves[h].n; i++) {
                uint16_t v = snug_f32_to_f16(rng_f(r) * 0.05f);
                q[b * bb + (size_t)halves[h].off[i]] = (uint8_t)(v & 0xFF);
                q[b * bb + (size_t)halves[h].off[i] + 1] = (uint8_t)(v >> 8);
            }
    }
    return q;
}

/* Every block format in the panel layout: its bytes are the file's, rows
 * and elements read back are the exact dequantization, packing a panel in
 * place equals packing the whole; and the matmul: the scalar reference
 * against float64 over the dequantized weights, every SIMD table against
 * the scalar one, 1 and 2 threads bit for bit. */
static void test_matmul_quant(void)
{
    static const struct {
        int64_t n, k, m;
    } shapes[] = {{1, 256, 16}, {3, 512, 31}, {5, 256, 50}, {17, 768, 40}, {70, 512, 33}, {2, 1024, 7}, {4, 512, 48}, {1, 2048, 19},
      {150, 8192, 18}, /* (x in two k slices in the 8-bit GEMM) */
      {9, 96, 21}, {12, 1152, 17}}; /* (blocks of 32 only: an odd count, Gemma's width) */
    variant kv[4 * (SNUG_ISA_COUNT + 1)];
    int n_var = qgemv_variants_of(kv);
    snug_kernels ks = kernels_of(SNUG_ISA_SCALAR);
    void *scratch = scratch_alloc(2);
    snug_pool *pool = NULL;
    snug_error err = {0};
    CHECK_OK(snug_pool_create(2, 0, &pool, &err), &err);
    rng_t r = {0xC0FFEEu};
    double worst_scalar = 0, worst_simd = 0;
    int thread_mismatch = 0, layout_bad = 0;
    for (int d = SNUG_DTYPE_Q8_0; d <= SNUG_DTYPE_Q6_K; d++) {
        snug_dtype dt = (snug_dtype)d;
        uint32_t t = snug_dtype_qtype(dt);
        for (size_t si = 0; si < SNUG_ARRAY_LEN(shapes); si++) {
            int64_t n = shapes[si].n, k = shapes[si].k, m = shapes[si].m;
            if (k % snug_qtype_block(t) != 0) continue;
            uint8_t *q = make_quant(&r, dt, m, k);
            size_t bytes = snug_qtype_bytes(t, m * k);
            CHECK(snug_linear_bytes(dt, m, k) == bytes, "%s %ldx%ld: %zu bytes in the layout, the file's %zu",
                  snug_dtype_name(dt), (long)m, (long)k, snug_linear_bytes(dt, m, k), bytes);
            CHECK(snug_linear_bytes(dt, m, k + 16) == 0, "%s: a k that splits a block", snug_dtype_name(dt));
            float *wf = malloc((size_t)(m * k) * sizeof(float)), *row = malloc((size_t)k * sizeof(float));
            snug_quant_dequantize((snug_qtype)t, q, wf, m * k);
            snug_linear lin = pack_linear(q, dt, m, k);
            /* in-place packing, as the loader does: rows at their raw offsets */
            uint8_t *inplace = malloc(bytes), *tmp = malloc(snug_linear_pack_scratch_bytes(dt, k));
            for (int64_t o = 0; o < m; o++)
                memcpy(inplace + snug_linear_raw_offset(dt, m, k, o), q + (size_t)o * (bytes / (size_t)m), bytes / (size_t)m);
            for (int64_t p = 0; p * SNUG_PANEL < m; p++) snug_linear_pack_panel(inplace, dt, m, k, p, tmp);
            if (memcmp(inplace, lin.data, bytes) != 0) layout_bad++;
            /* the vector slices equal the portable ones, float for float */
            if (snug_isa_detect() >= SNUG_ISA_AVX2) {
                float *s1 = malloc(sizeof(float) * SNUG_PANEL * 256), *s2 = malloc(sizeof(float) * SNUG_PANEL * 256);
                for (int64_t p = 0; p * SNUG_PANEL < m; p++)
                    for (int64_t e0 = 0; e0 < k; e0 += 256) {
                        memset(s1, 0, sizeof(float) * SNUG_PANEL * 256), memset(s2, 0, sizeof(float) * SNUG_PANEL * 256);
                        snug_linear_quant_slice_f32(&lin, p, e0, SNUG_MIN((int64_t)256, k - e0), s1);
                        snug_quant_slice_f32_avx2(&lin, p, e0, SNUG_MIN((int64_t)256, k - e0), s2);
                        if (memcmp(s1, s2, sizeof(float) * SNUG_PANEL * 256) != 0) layout_bad++;
                    }
                free(s1);
                free(s2);
            }
            for (int64_t o = 0; o < m; o++) {
                snug_linear_row(&lin, o, row);
                if (memcmp(row, wf + o * k, (size_t)k * sizeof(float)) != 0) layout_bad++;
                int64_t e = (int64_t)(rng_u32(&r) % (uint32_t)k);
                if (snug_linear_elem(&lin, o, e) != wf[o * k + e]) layout_bad++;
            }
            float *x = malloc((size_t)(n * k) * sizeof(float));
            fill(&r, x, (size_t)(n * k));
            double *ref = malloc((size_t)(n * m) * sizeof(double)), *mag = malloc((size_t)(n * m) * sizeof(double));
            float *y = malloc((size_t)(n * m) * sizeof(float));
            /* the reference of x as quantized to 8 bits, on every path */
            float *xq = malloc((size_t)(n * k) * sizeof(float));
            snug_x8_block *x8 = malloc((size_t)(k / SNUG_X8_BLOCK) * sizeof *x8);
            for (int64_t t = 0; t < n; t++) {
                snug_x8_quantize(x + t * k, k, dt, x8);
                for (int64_t e = 0; e < k; e++)
                    xq[t * k + e] = x8[e / 32].d * (float)x8[e / 32].q[e % 32];
            }
            matmul_ref(xq, wf, SNUG_DTYPE_F32, n, k, m, ref, mag);
            free(xq);
            free(x8);
            snug_matmul(&ks, y, x, n, &lin, scratch, pool);
            scalar_vs_ref(&lin, n, y, ref, mag, &worst_scalar);
            for (int v = 0; v < n_var; v++)
                thread_mismatch += simd_vs_scalar(&kv[v], &lin, x, n, y, mag, scratch, pool, &worst_simd);
            free(q);
            free(wf);
            free(row);
            free((void *)lin.data);
            free(inplace);
            free(tmp);
            free(x);
            free(ref);
            free(mag);
            free(y);
        }
    }
    CHECK(layout_bad == 0, "%d block-format layout (or vector slice) checks failed", layout_bad);
    CHECK(thread_mismatch == 0, "%d block-format products differ between 1 and 2 threads", thread_mismatch);
    printf("  block formats (10 types x %zu shapes): scalar vs double max err %.3g, SIMD tables vs scalar %.3g "
           "of sum|terms| (tolerance 1e-5)\n",
           SNUG_ARRAY_LEN(shapes), worst_scalar, worst_simd);
    snug_pool_free(pool);
    free(scratch);
}

/* The 8-bit activations and the integer dot products over them (qdot.h):
 * every x8 value within half a step of x, the step d = max |x| / 127 (of
 * 256 elements for the K-quants; for the others of 32 and rounded to a
 * half, which adds up to 127 x 2^-11 d); the reference dot equal to the
 * float64 dot of the dequantized weights with the dequantized x8 (1e-5 of
 * the sum of |terms|), and within the proven bound of the float64 dot with
 * x itself (sum of |w| d times that half step), for every block format,
 * rows read from the file's layout and from the panels. */
static void test_qdot(void)
{
    rng_t r = {0xD07u};
    static const int64_t ks[] = {256, 512, 1024};
    double worst_x8 = 0, worst_exact = 0, worst_bound = 0;
    int x8_bad = 0, x8_vec_bad = 0;
    for (int d = SNUG_DTYPE_Q8_0; d <= SNUG_DTYPE_Q6_K; d++) {
        snug_dtype dt = (snug_dtype)d;
        uint32_t t = snug_dtype_qtype(dt);
        size_t bb = snug_qtype_block_bytes(t);
        for (size_t ki = 0; ki < SNUG_ARRAY_LEN(ks); ki++) {
            int64_t k = ks[ki], m = 21; /* a full panel and a narrow one */
            uint8_t *q = make_quant(&r, dt, m, k);
            snug_linear lin = pack_linear(q, dt, m, k);
            float *x = malloc((size_t)k * sizeof(float)), *wf = malloc((size_t)k * sizeof(float));
            uint8_t *prow = malloc(snug_qtype_bytes(t, k));
            fill(&r, x, (size_t)k);
            x[k / 3] *= 20.0f; /* one outlier, as activations have */
            snug_x8_block *x8 = malloc((size_t)(k / SNUG_X8_BLOCK) * sizeof *x8);
            snug_x8_quantize(x, k, dt, x8);
            /* the GEMM's vector quantizer gives the same blocks, bit for bit,
             * here and on a row with a zero group, a NaN, an infinity and
             * a subnormal */
            if (snug_isa_detect() >= SNUG_ISA_AVX2) {
                snug_x8_block *v8 = malloc((size_t)(k / SNUG_X8_BLOCK) * sizeof *v8);
                snug_x8_quantize_avx2(x, k, dt, v8);
                if (memcmp(v8, x8, (size_t)(k / SNUG_X8_BLOCK) * sizeof *v8) != 0) x8_vec_bad++;
                float *odd = malloc((size_t)k * sizeof(float));
                memcpy(odd, x, (size_t)k * sizeof(float));
                for (int64_t e = 0; e < (k >= 512 ? 256 : 32); e++) odd[e] = 0.0f; /* a whole group where k allows */
                odd[k - 100] = NAN, odd[k - 5] = INFINITY, odd[k - 40] = -1e-40f;
                snug_x8_block *s8 = malloc((size_t)(k / SNUG_X8_BLOCK) * sizeof *s8);
                snug_x8_quantize(odd, k, dt, s8);
                snug_x8_quantize_avx2(odd, k, dt, v8);
                if (memcmp(v8, s8, (size_t)(k / SNUG_X8_BLOCK) * sizeof *v8) != 0) x8_vec_bad++;
                free(odd);
                free(s8);
                free(v8);
            }
            /* half a step, and for the formats of 32 the half-float rounding of
             * d (x was quantized against d before its rounding, as llama.cpp
             * does): up to 127 x 2^-11 d more */
            double half = snug_qtype_block(t) == 256 ? 0.5001 : 0.5 + 127.0 / 2048.0;
            for (int64_t b = 0; b < k / SNUG_X8_BLOCK; b++) {
                int32_t sum = 0;
                for (int i = 0; i < SNUG_X8_BLOCK; i++) {
                    double xv = x[b * SNUG_X8_BLOCK + i], e = fabs(xv - (double)x8[b].d * x8[b].q[i]);
                    worst_x8 = SNUG_MAX(worst_x8, e / ((double)x8[b].d + 1e-30));
                    if (e > half * x8[b].d || x8[b].q[i] < -127) x8_bad++;
                    sum += x8[b].q[i];
                }
                if (sum != x8[b].sum16[0] + x8[b].sum16[1]) x8_bad++;
            }
            /* snug_x8_levels gives the same d q for any span of the row */
            float lv[1024];
            int64_t e0 = (int64_t)(rng_u32(&r) % (uint32_t)k), want = (int64_t)(1 + rng_u32(&r) % 700);
            int64_t len = SNUG_MIN(k - e0, want);
            snug_x8_levels(x, e0, len, dt, lv);
            for (int64_t e = e0; e < e0 + len; e++)
                if (lv[e - e0] != x8[e / 32].d * (float)x8[e / 32].q[e % 32]) x8_bad++;
            for (int64_t o = 0; o < m; o++) {
                size_t rb = snug_qtype_bytes(t, k);
                snug_quant_dequantize((snug_qtype)t, q + (size_t)o * rb, wf, k);
                double exact = 0, mag = 0, dot = 0, bound = 0;
                for (int64_t e = 0; e < k; e++) {
                    const snug_x8_block *xb = &x8[e / SNUG_X8_BLOCK];
                    double xq = (double)xb->d * xb->q[e % SNUG_X8_BLOCK];
                    exact += wf[e] * xq;
                    mag += fabs(wf[e] * xq);
                    dot += (double)wf[e] * x[e];
                    bound += fabs((double)wf[e]) * xb->d * half;
                }
                for (int64_t b = 0; b < k / snug_qtype_block(t); b++) /* the row's blocks as the panel holds them */
                    snug_linear_block_bytes(&lin, o, b, prow + (size_t)b * bb);
                float from_file = snug_qdot_ref(dt, q + (size_t)o * rb, bb, x8, k);
                float from_panel = snug_qdot_ref(dt, prow, bb, x8, k);
                CHECK(memcmp(&from_file, &from_panel, sizeof(float)) == 0, "%s k=%ld row %ld: file %g, panel %g",
                      snug_dtype_name(dt), (long)k, (long)o, from_file, from_panel);
                double e1 = fabs(from_file - exact) / (mag + 1e-30);
                worst_exact = SNUG_MAX(worst_exact, e1);
                CHECK(e1 <= 1e-5, "%s k=%ld row %ld: %g, float64 over the x8 values %g", snug_dtype_name(dt), (long)k,
                      (long)o, from_file, exact);
                double e2 = fabs(from_file - dot);
                worst_bound = SNUG_MAX(worst_bound, e2 / (bound + 1e-30));
                CHECK(e2 <= bound * 1.0001 + 1e-5 * mag, "%s k=%ld row %ld: %g vs float64 dot %g, bound %g",
                      snug_dtype_name(dt), (long)k, (long)o, from_file, dot, bound);
            }
            free(q);
            free((void *)lin.data);
            free(x);
            free(wf);
            free(prow);
            free(x8);
        }
    }
    CHECK(x8_bad == 0, "%d x8 values or sums wrong", x8_bad);
    CHECK(x8_vec_bad == 0, "%d rows where the AVX2 quantizer's blocks differ from snug_x8_quantize's", x8_vec_bad);
    printf("  x8 (the AVX2 quantizer bit for bit: %s): worst |x - d q| %.3f of d (bound 0.5, 0.562 with a half d); qdot vs float64 over x8 %.3g of sum|terms| "
           "(tolerance 1e-5); vs float64 over x %.3f of the bound sum |w| d / 2\n",
           snug_isa_detect() >= SNUG_ISA_AVX2 ? "checked" : "not on this CPU", worst_x8, worst_exact, worst_bound);
}

/* The panel layout: sizes (bf16 pads an odd k to a pair), every element
 * where linear.h says, and the in-place packing of the loader equal to the
 * whole-matrix packing. */
static void test_linear_layout(void)
{
    static const int64_t ms[] = {1, 15, 16, 17, 40}, ks[] = {1, 2, 7, 64};
    rng_t r = {5};
    for (size_t d = 0; d < SNUG_ARRAY_LEN(wdts); d++)
        for (size_t a = 0; a < SNUG_ARRAY_LEN(ms); a++)
            for (size_t b = 0; b < SNUG_ARRAY_LEN(ks); b++) {
                snug_dtype dt = wdts[d];
                int64_t m = ms[a], k = ks[b];
                size_t es = snug_dtype_size(dt), bytes = snug_linear_bytes(dt, m, k);
                size_t want = dt == SNUG_DTYPE_BF16 ? (size_t)m * (size_t)((k + 1) / 2) * 4
                                                    : (size_t)(m * k) * es;
                CHECK(bytes == want, "%s %ldx%ld: %zu bytes, want %zu", snug_dtype_name(dt), (long)m,
                      (long)k, bytes, want);
                void *w = make_typed(&r, dt, (size_t)(m * k));
                snug_linear lin = pack_linear(w, dt, m, k);
                int bad = 0;
                for (int64_t o = 0; o < m; o++)
                    for (int64_t e = 0; e < k; e++) {
                        float got = snug_linear_elem(&lin, o, e), ref = (float)typed_at(w, dt, (size_t)(o * k + e));
                        if (memcmp(&got, &ref, 4) != 0) bad++;
                    }
                CHECK(bad == 0, "%s %ldx%ld: %d elements read back wrong", snug_dtype_name(dt), (long)m,
                      (long)k, bad);
                float *row = malloc((size_t)k * sizeof *row);
                bad = 0;
                for (int64_t o = 0; o < m; o++) {
                    snug_linear_row(&lin, o, row);
                    for (int64_t e = 0; e < k; e++) {
                        float ref = (float)typed_at(w, dt, (size_t)(o * k + e));
                        if (memcmp(&row[e], &ref, 4) != 0) bad++;
                    }
                }
                CHECK(bad == 0, "%s %ldx%ld: %d elements of rows read back wrong", snug_dtype_name(dt),
                      (long)m, (long)k, bad);
                free(row);
                /* the loader's way: rows at their raw offsets, then each panel in place */
                unsigned char *raw = calloc(1, bytes), *tmp = malloc(snug_linear_pack_scratch_bytes(dt, k));
                for (int64_t o = 0; o < m; o++)
                    memcpy(raw + snug_linear_raw_offset(dt, m, k, o), (const char *)w + (size_t)(o * k) * es,
                           (size_t)k * es);
                for (int64_t p = 0; p * SNUG_PANEL < m; p++) snug_linear_pack_panel(raw, dt, m, k, p, tmp);
                CHECK(memcmp(raw, lin.data, bytes) == 0, "%s %ldx%ld: in-place packing differs",
                      snug_dtype_name(dt), (long)m, (long)k);
                free(raw);
                free(tmp);
                free(w);
                free((void *)lin.data);
            }
    CHECK(snug_linear_bytes(SNUG_DTYPE_I32, 4, 4) == 0 && !snug_linear_supports(SNUG_DTYPE_I32),
          "unsupported dtype");
}

/* Where linear.h puts byte i of block j of a group of w rows of Q4_K,
 * Q6_K, Q8_0, Q5_0 or Q4_0 (the interleaved layouts). */
static size_t interleaved_at(snug_dtype dt, int64_t w, int64_t j, int i)
{
    if (dt == SNUG_DTYPE_Q8_0)
        return i < 2 ? (size_t)(2 * j + i) : (size_t)(2 * w + 4 * (((i - 2) / 4) * w + j) + (i - 2) % 4);
    if (dt == SNUG_DTYPE_Q4_0)
        return i < 2 ? (size_t)(2 * j + i) : (size_t)(2 * w + 4 * (((i - 2) / 4) * w + j) + (i - 2) % 4);
    if (dt == SNUG_DTYPE_Q5_0)
        return i < 2   ? (size_t)(2 * j + i)
               : i < 6 ? (size_t)(2 * w + 4 * j + i - 2)
                       : (size_t)(6 * w + 4 * (((i - 6) / 4) * w + j) + (i - 6) % 4);
    if (dt == SNUG_DTYPE_Q6_K)
        return i < 192   ? (size_t)(4 * ((i / 4) * w + j) + i % 4)
               : i < 208 ? (size_t)(192 * w + (i - 192) * w + j)
                         : (size_t)(208 * w + 2 * j + i - 208);
    return i < 2    ? (size_t)(2 * j + i)
           : i < 4  ? (size_t)(2 * w + 2 * j + i - 2)
           : i < 16 ? (size_t)(4 * w + (i - 4) * w + j)
                    : (size_t)(16 * w + 4 * (((i - 16) / 4) * w + j) + (i - 16) % 4);
}

/* The interleaved layouts (linear.h: Q4_K, Q6_K, Q8_0, Q5_0, Q4_0): every byte of every
 * block where the comment says, for full and narrow panels; each block
 * read back whole; a narrow panel's groups widened to 16 rows with zero
 * rows past its width. */
static void test_linear_interleaved(void)
{
    static const int64_t ms[] = {1, 15, 16, 17, 40}, ks[] = {256, 768};
    static const snug_dtype dts[] = {SNUG_DTYPE_Q4_K, SNUG_DTYPE_Q6_K, SNUG_DTYPE_Q8_0, SNUG_DTYPE_Q5_0, SNUG_DTYPE_Q4_0};
    rng_t r = {0x1A7Eu};
    int misplaced = 0, read_bad = 0, wide_bad = 0, interleaved = 0;
    for (int d = SNUG_DTYPE_Q8_0; d <= SNUG_DTYPE_Q6_K; d++) interleaved += snug_linear_interleaved((snug_dtype)d);
    CHECK(interleaved == 5 && snug_linear_interleaved(SNUG_DTYPE_Q4_K) && snug_linear_interleaved(SNUG_DTYPE_Q6_K) &&
              snug_linear_interleaved(SNUG_DTYPE_Q8_0) && snug_linear_interleaved(SNUG_DTYPE_Q5_0) &&
              snug_linear_interleaved(SNUG_DTYPE_Q4_0),
          "interleaved formats: %d", interleaved);
    for (size_t di = 0; di < SNUG_ARRAY_LEN(dts); di++)
        for (size_t a = 0; a < SNUG_ARRAY_LEN(ms); a++)
            for (size_t c = 0; c < SNUG_ARRAY_LEN(ks); c++) {
                snug_dtype dt = dts[di];
                int64_t m = ms[a], k = ks[c], nb = k / snug_qtype_block(snug_dtype_qtype(dt));
                const int bb = (int)snug_qtype_block_bytes(snug_dtype_qtype(dt));
                uint8_t *q = make_quant(&r, dt, m, k);
                snug_linear lin = pack_linear(q, dt, m, k);
                const uint8_t *data = lin.data;
                for (int64_t o = 0; o < m; o++)
                    for (int64_t b = 0; b < nb; b++) {
                        int64_t p = o / 16, j = o % 16, w = SNUG_MIN((int64_t)16, m - 16 * p);
                        const uint8_t *g = data + (size_t)(p * 16 * nb * bb) + (size_t)(b * w * bb);
                        const uint8_t *bl = q + (size_t)(o * nb + b) * (size_t)bb;
                        for (int i = 0; i < bb; i++)
                            if (g[interleaved_at(dt, w, j, i)] != bl[i]) misplaced++;
                        uint8_t back[256], wide[16 * 256], one[256];
                        snug_linear_block_bytes(&lin, o, b, back);
                        if (memcmp(back, bl, (size_t)bb) != 0) read_bad++;
                        if (j > 0) continue;
                        snug_linear_group_widen(dt, g, w, wide);
                        for (int64_t jj = 0; jj < 16; jj++) {
                            snug_linear_group_block(dt, wide, 16, jj, one);
                            for (int i = 0; i < bb; i++)
                                if (one[i] != (jj < w ? q[(size_t)((o + jj) * nb + b) * (size_t)bb + (size_t)i] : 0))
                                    wide_bad++;
                        }
                    }
                free(q);
                free((void *)lin.data);
            }
    CHECK(misplaced == 0, "%d bytes not where linear.h puts them", misplaced);
    CHECK(read_bad == 0, "%d blocks read back wrong", read_bad);
    CHECK(wide_bad == 0, "%d bytes of widened groups wrong", wide_bad);
}

/* ---- elementwise ---------------------------------------------------------- */

static const int64_t lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 64, 100, 1001};

static void test_elementwise_scalar(void)
{
    snug_kernels s = kernels_of(SNUG_ISA_SCALAR);
    rng_t r = {99};
    double worst_rms = 0, worst_silu = 0, worst_rope = 0, worst_gelu = 0;
    for (size_t li = 0; li < SNUG_ARRAY_LEN(lens); li++) {
        int64_t n = lens[li];
        float *x = malloc((size_t)n * 2 * sizeof(float)), *y = malloc((size_t)n * 2 * sizeof(float));
        fill(&r, x, (size_t)n * 2);
        for (size_t d = 0; d < SNUG_ARRAY_LEN(wdts); d++) {
            void *w = make_typed(&r, wdts[d], (size_t)n);
            s.rmsnorm(y, x, w, wdts[d], n, 1e-5f);
            double ss = 0;
            for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
            double rr = 1.0 / sqrt(ss / (double)n + 1e-5);
            for (int64_t i = 0; i < n; i++) {
                double want = x[i] * rr * typed_at(w, wdts[d], (size_t)i);
                double e = fabs(y[i] - want) / (fabs(want) + 1e-30);
                worst_rms = SNUG_MAX(worst_rms, e);
            }
            free(w);
        }
        s.silu_mul(y, x, n);
        for (int64_t i = 0; i < n; i++) {
            double g = x[i], want = g / (1.0 + exp(-g)) * x[n + i];
            worst_silu = SNUG_MAX(worst_silu, fabs(y[i] - want) / (fabs(want) + 1e-30));
        }
        s.gelu_tanh_mul(y, x, n); /* against transformers' form, 0.5 g (1 + tanh(...)) */
        for (int64_t i = 0; i < n; i++) {
            double g = x[i], want = 0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * x[n + i];
            worst_gelu = SNUG_MAX(worst_gelu, fabs(y[i] - want) / (fabs(g * x[n + i]) + 1e-30));
        }
        if (n % 2 == 0) {
            float *cs = malloc((size_t)n * sizeof(float));
            for (int64_t i = 0; i < n / 2; i++) {
                double th = 0.37 * (double)i + 0.1;
                cs[2 * i] = (float)cos(th);
                cs[2 * i + 1] = (float)sin(th);
            }
            memcpy(y, x, (size_t)n * sizeof(float));
            s.rope(y, cs, (int32_t)n);
            int64_t h = n / 2;
            for (int64_t i = 0; i < h; i++) {
                double a = x[i], b = x[i + h], c = cs[2 * i], sn = cs[2 * i + 1];
                double w0 = a * c - b * sn, w1 = b * c + a * sn, m = fabs(a * c) + fabs(b * sn);
                worst_rope = SNUG_MAX(worst_rope, fabs(y[i] - w0) / m);
                worst_rope = SNUG_MAX(worst_rope, fabs(y[i + h] - w1) / m);
            }
            free(cs);
        }
        free(x);
        free(y);
    }
    printf("  scalar vs double: rmsnorm %.3g, silu_mul %.3g, gelu_tanh_mul %.3g (of |g u|), rope %.3g (relative; "
           "tolerance 1e-5)\n", worst_rms, worst_silu, worst_gelu, worst_rope);
    CHECK(worst_rms <= 1e-5 && worst_silu <= 1e-5 && worst_gelu <= 1e-5 && worst_rope <= 1e-5, "scalar elementwise");

    /* store and load: the dtype.h conversions exactly, on special values too */
    float sp[] = {0.0f, -0.0f, 1.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 1e-8f,
                  6e-8f, 3e-5f, 1.00390625f, 1.01171875f, -2.5e-39f, 3.4e38f};
    uint32_t snan_bits = 0x7F800001u, nan2_bits = 0xFFC12345u;
    float snan, nan2;
    memcpy(&snan, &snan_bits, 4);
    memcpy(&nan2, &nan2_bits, 4);
    float src[17];
    memcpy(src, sp, sizeof sp);
    src[15] = snan;
    src[16] = nan2;
    uint16_t h16[17];
    int bad = 0;
    s.store(h16, SNUG_DTYPE_BF16, src, 17);
    for (int i = 0; i < 17; i++) bad += h16[i] != snug_f32_to_bf16(src[i]);
    s.store(h16, SNUG_DTYPE_F16, src, 17);
    for (int i = 0; i < 17; i++) bad += h16[i] != snug_f32_to_f16(src[i]);
    CHECK(bad == 0, "%d scalar stores differ from dtype.h", bad);
    CHECK((h16[15] & 0x7E00) == 0x7E00, "f16 of a signalling NaN is quiet: %04x", h16[15]);
}

/* Runs every elementwise kernel of table v and of the scalar table on the
 * same input; returns the worst error relative to the scale. */
static void test_elementwise_simd(void)
{
    snug_isa isas[SNUG_ISA_COUNT];
    int n_isa = simd_isas(isas, "elementwise");
    snug_kernels s = kernels_of(SNUG_ISA_SCALAR);
    rng_t r = {7};
    for (int v = 0; v < n_isa; v++) {
        snug_kernels kv = kernels_of(isas[v]);
        double worst_rms = 0, worst_silu = 0, worst_rope = 0, worst_gelu = 0;
        int inexact = 0;
        for (size_t li = 0; li < SNUG_ARRAY_LEN(lens); li++) {
            int64_t n = lens[li];
            size_t nb = (size_t)n * 2 * sizeof(float);
            float *x = malloc(nb), *a = malloc(nb), *b = malloc(nb);
            fill(&r, x, (size_t)n * 2);
            x[0] *= 40.0f; /* silu far out on both sides */
            if (n > 1) x[1] = -95.0f;
            for (size_t d = 0; d < SNUG_ARRAY_LEN(wdts); d++) {
                void *w = make_typed(&r, wdts[d], (size_t)n);
                s.rmsnorm(a, x, w, wdts[d], n, 1e-6f);
                memcpy(b, x, (size_t)n * sizeof(float));
                kv.rmsnorm(b, b, w, wdts[d], n, 1e-6f); /* in place */
                for (int64_t i = 0; i < n; i++)
                    worst_rms = SNUG_MAX(worst_rms, fabs(a[i] - b[i]) / (fabs(a[i]) + 1e-30));
                memcpy(a, x, (size_t)n * sizeof(float));
                memcpy(b, x, (size_t)n * sizeof(float));
                s.add_bias(a, w, wdts[d], n);
                kv.add_bias(b, w, wdts[d], n);
                inexact += memcmp(a, b, (size_t)n * sizeof(float)) != 0;
                s.load(a, w, wdts[d], n);
                kv.load(b, w, wdts[d], n);
                inexact += memcmp(a, b, (size_t)n * sizeof(float)) != 0;
                uint16_t *ha = malloc((size_t)n * 4), *hb = malloc((size_t)n * 4);
                s.store(ha, wdts[d], x, n);
                kv.store(hb, wdts[d], x, n);
                inexact += memcmp(ha, hb, (size_t)n * snug_dtype_size(wdts[d])) != 0;
                free(ha);
                free(hb);
                free(w);
            }
            s.silu_mul(a, x, n);
            kv.silu_mul(b, x, n);
            for (int64_t i = 0; i < n; i++) {
                double scale = fabs(x[i] * x[n + i]); /* |g u| bounds |silu(g) u| */
                worst_silu = SNUG_MAX(worst_silu, fabs(a[i] - b[i]) / (scale + 1e-30));
            }
            s.gelu_tanh_mul(a, x, n);
            kv.gelu_tanh_mul(b, x, n);
            for (int64_t i = 0; i < n; i++)
                worst_gelu = SNUG_MAX(worst_gelu, fabs(a[i] - b[i]) / (fabs(x[i] * x[n + i]) + 1e-30));
            memcpy(a, x, nb);
            memcpy(b, x, nb);
            s.add(a, x + n, n);
            kv.add(b, x + n, n);
            inexact += memcmp(a, b, (size_t)n * sizeof(float)) != 0;
            if (n % 2 == 0) {
                float *cs = malloc((size_t)n * sizeof(float));
                for (int64_t i = 0; i < n / 2; i++) {
                    cs[2 * i] = cosf(0.21f * (float)i);
                    cs[2 * i + 1] = sinf(0.21f * (float)i);
                }
                memcpy(a, x, (size_t)n * sizeof(float));
                memcpy(b, x, (size_t)n * sizeof(float));
                s.rope(a, cs, (int32_t)n);
                kv.rope(b, cs, (int32_t)n);
                int64_t h = n / 2;
                for (int64_t i = 0; i < n; i++) {
                    int64_t j = i < h ? i : i - h;
                    double m = fabs(x[j] * cs[2 * j]) + fabs(x[j + h] * cs[2 * j + 1]) +
                               fabs(x[j] * cs[2 * j + 1]) + fabs(x[j + h] * cs[2 * j]);
                    worst_rope = SNUG_MAX(worst_rope, fabs(a[i] - b[i]) / (m + 1e-30));
                }
                free(cs);
            }
            free(x);
            free(a);
            free(b);
        }
        /* store on special values: bit for bit with the scalar */
        float src[40];
        uint32_t specials[] = {0x7F800001u, 0xFFC12345u, 0x7F800000u, 0xFF800000u, 0x80000000u,
                               0x3F808000u, 0x3F818000u, 0x477FF000u, 0x477FEFFFu, 0x33000001u,
                               0x00000001u, 0x387FC000u, 0x7F7FFFFFu, 0x3F7FFFFFu, 0xBF808001u,
                               0x33800000u};
        for (int i = 0; i < 40; i++) {
            uint32_t u = specials[i % SNUG_ARRAY_LEN(specials)];
            memcpy(&src[i], &u, 4);
        }
        for (size_t d = 1; d < SNUG_ARRAY_LEN(wdts); d++) {
            uint16_t ha[40], hb[40];
            s.store(ha, wdts[d], src, 40);
            kv.store(hb, wdts[d], src, 40);
            for (int i = 0; i < 40; i++)
                CHECK(ha[i] == hb[i], "%s store %s of %08x: %04x, scalar %04x",
                      snug_isa_name(isas[v]), snug_dtype_name(wdts[d]),
                      specials[i % SNUG_ARRAY_LEN(specials)], hb[i], ha[i]);
        }
        /* the KV cache's Q8_0 and MXFP8 stores: the quantizers' blocks bit for
         * bit, ties (Q8_0's x / d at k + 1/2: away from zero) and zero blocks
         * among them */
        for (int n = 32; n <= 256; n *= 2) {
            float *x = malloc((size_t)n * sizeof(float));
            uint8_t *qa = malloc((size_t)n / 32 * 34), *qb = malloc((size_t)n / 32 * 34);
            fill(&r, x, (size_t)n);
            static const float ties[] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 126.5f, -126.5f, 0.0f, -0.0f, 1e-3f};
            for (size_t i = 0; i < SNUG_ARRAY_LEN(ties); i++) x[i] = ties[i];
            if (n >= 64)
                for (int i = 32; i < 64; i++) x[i] = 0.0f;
            if (n >= 128) x[100] = 3e4f; /* a scale near half's top */
            snug_quant_quantize(SNUG_QTYPE_Q8_0, x, qa, n);
            kv.store(qb, SNUG_DTYPE_Q8_0, x, n);
            CHECK(memcmp(qa, qb, (size_t)n / 32 * 34) == 0, "%s Q8_0 store of %d values differs from the quantizer",
                  snug_isa_name(isas[v]), n);
            s.store(qb, SNUG_DTYPE_Q8_0, x, n);
            CHECK(memcmp(qa, qb, (size_t)n / 32 * 34) == 0, "scalar Q8_0 store of %d values", n);
            /* and MXFP8's: ties between codes, subnormal codes, values past 448 (saturated) */
            for (int f = 0; f < 2; f++) {
                snug_dtype mdt = f ? SNUG_DTYPE_MXFP8_E5M2 : SNUG_DTYPE_MXFP8_E4M3;
                /* (with 480 the largest, E4M3's scale is 1 and E5M2's 2^-7: a hair past
                 * half a subnormal step, 0x1.000002p-10 and 0x1.000002p-24, rounds up,
                 * where a float's subnormal would have rounded it to the tie first) */
                static const float mx_cases[] = {257.0f, 464.0f, -480.0f, 9.0f, 10.0f, 11.0f, 0x1p-10f, 0x1.8p-9f,
                                                 -0x1p-17f, 0x1.4p-15f, 1e-38f, -0.0f, 0x1.000002p-10f,
                                                 -0x1.000002p-10f, 0x1.000002p-24f};
                for (size_t i = 0; i < SNUG_ARRAY_LEN(mx_cases); i++) x[i] = mx_cases[i];
                snug_mxfp8_quantize(mdt, x, qa, n);
                kv.store(qb, mdt, x, n);
                CHECK(memcmp(qa, qb, (size_t)n / 32 * 33) == 0, "%s %s store of %d values differs from the quantizer",
                      snug_isa_name(isas[v]), snug_dtype_name(mdt), n);
                s.store(qb, mdt, x, n);
                CHECK(memcmp(qa, qb, (size_t)n / 32 * 33) == 0, "scalar %s store of %d values", snug_dtype_name(mdt), n);
                if (n != 256) continue;
                /* every code the quantizer writes, under scales from 2^-127 to 2^119, read
                 * back (load: attention's load8 and elem1) bit for bit as the scalar's */
                uint8_t blocks[8 * 33];
                float ra[256], rb[256];
                for (int b = 0; b < 8; b++) {
                    blocks[33 * b] = (uint8_t)(b == 0 ? 0 : 246 - 35 * (b - 1));
                    for (int e = 0; e < 32; e++) {
                        int code = 32 * b + e;
                        bool inf_nan = f ? (code & 0x7C) == 0x7C : (code & 0x7F) == 0x7F; /* never written */
                        blocks[33 * b + 1 + e] = (uint8_t)(inf_nan ? 0 : code);
                    }
                }
                s.load(ra, blocks, mdt, 256);
                kv.load(rb, blocks, mdt, 256);
                CHECK(memcmp(ra, rb, sizeof ra) == 0, "%s %s load differs from the scalar", snug_isa_name(isas[v]),
                      snug_dtype_name(mdt));
            }
            free(x);
            free(qa);
            free(qb);
        }
        printf("  %s vs scalar: rmsnorm %.3g, silu_mul %.3g, gelu_tanh_mul %.3g, rope %.3g (tolerance 1e-5); "
               "add/add_bias/load/store exact\n",
               snug_isa_name(isas[v]), worst_rms, worst_silu, worst_gelu, worst_rope);
        CHECK(worst_rms <= 1e-5 && worst_silu <= 1e-5 && worst_gelu <= 1e-5 && worst_rope <= 1e-5,
              "%s elementwise", snug_isa_name(isas[v]));
        CHECK(inexact == 0, "%s: %d exact kernels differ from scalar", snug_isa_name(isas[v]),
              inexact);
    }
}

/* ---- attention -------------------------------------------------------------- */

typedef struct {
    int32_t block_size, n_group, n_q, pos0, window, head_dim;
    snug_dtype dt;
    float softcap;
} attn_case;

typedef struct {
    snug_attn_args a;
    void *k, *v;
    int32_t *table;
    float *q, *out;
    size_t out_n;
} attn_setup;

/* A paged cache with blocks in a shuffled order, strides padded, and NaN in
 * every position the queries must not see. */
static attn_setup attn_make(rng_t *r, attn_case c)
{
    attn_setup s;
    memset(&s, 0, sizeof s);
    int32_t hd = c.head_dim, n_pos = c.pos0 + c.n_q;
    int32_t n_blocks_used = (n_pos + c.block_size - 1) / c.block_size;
    int32_t n_blocks = n_blocks_used * 2 + 3;
    /* (a cache of blocks of 32 keeps its rows whole blocks: its padding one block) */
    bool q8 = c.dt == SNUG_DTYPE_Q8_0, mx = c.dt == SNUG_DTYPE_MXFP8_E4M3 || c.dt == SNUG_DTYPE_MXFP8_E5M2;
    size_t stride = (size_t)c.block_size * hd + (q8 || mx ? 32 : 5), total = stride * (size_t)n_blocks;
    size_t bytes = snug_dtype_bytes(c.dt, (int64_t)total);
    s.k = malloc(bytes);
    s.v = malloc(bytes);
    float *nanbuf = malloc(total * sizeof(float));
    for (size_t i = 0; i < total; i++) nanbuf[i] = NAN;
    for (size_t i = 0; i < total && (q8 || mx); i += 32) { /* a NaN scale (Q8_0), an infinite one (MXFP8) */
        uint8_t nan_block[34] = {0x00, 0x7E, 1};
        memset(nan_block + 1, 0x7E, 33 * mx);
        if (mx) nan_block[0] = 0xFF;
        size_t bb = q8 ? 34 : 33;
        memcpy((uint8_t *)s.k + i / 32 * bb, nan_block, bb);
        memcpy((uint8_t *)s.v + i / 32 * bb, nan_block, bb);
    }
    if (!q8 && !mx) snug_convert(s.k, c.dt, nanbuf, SNUG_DTYPE_F32, total);
    if (!q8 && !mx) snug_convert(s.v, c.dt, nanbuf, SNUG_DTYPE_F32, total);
    s.table = malloc((size_t)n_blocks_used * sizeof(int32_t));
    for (int32_t b = 0; b < n_blocks_used; b++) s.table[b] = (b * 7 + 5) % n_blocks;
    /* real keys and values at positions 0 .. n_pos - 1 */
    float *row = malloc((size_t)hd * sizeof(float));
    for (int32_t p = 0; p < n_pos; p++) {
        size_t off = (size_t)s.table[p / c.block_size] * stride + (size_t)(p % c.block_size) * hd;
        for (int kv = 0; kv < 2; kv++) {
            char *at = (char *)(kv ? s.v : s.k) + snug_dtype_bytes(c.dt, (int64_t)off);
            fill(r, row, (size_t)hd);
            if (q8) snug_quant_quantize(SNUG_QTYPE_Q8_0, row, at, hd);
            else if (mx) snug_mxfp8_quantize(c.dt, row, at, hd);
            else snug_convert(at, c.dt, row, SNUG_DTYPE_F32, (size_t)hd);
        }
    }
    free(row);
    free(nanbuf);
    int64_t qrow = (int64_t)c.n_group * hd + 3, orow = (int64_t)c.n_group * (hd + 1) + 1;
    s.q = malloc((size_t)(qrow * c.n_q) * sizeof(float));
    fill(r, s.q, (size_t)(qrow * c.n_q));
    for (size_t i = 0; i < (size_t)(qrow * c.n_q); i++) s.q[i] *= 3.0f; /* peaky softmax */
    s.out_n = (size_t)(orow * c.n_q);
    s.out = malloc(s.out_n * sizeof(float));
    s.a = (snug_attn_args){
        .q = s.q,
        .q_row_stride = qrow,
        .q_head_stride = hd,
        .out = s.out,
        .out_row_stride = orow,
        .out_head_stride = hd + 1,
        .n_group = c.n_group,
        .n_q = c.n_q,
        .pos0 = c.pos0,
        .window = c.window,
        .head_dim = hd,
        .scale = 1.0f / sqrtf((float)hd),
        .softcap = c.softcap,
        .kv = {.k = s.k, .v = s.v, .dtype = c.dt, .block_stride = stride, .block_table = s.table,
               .block_size = c.block_size},
    };
    return s;
}

static void attn_free(attn_setup *s)
{
    free(s->k);
    free(s->v);
    free(s->table);
    free(s->q);
    free(s->out);
}

/* out of query t, head g, element d in double, and its scale sum_j p_j |v_jd| */
static void attn_ref(const snug_attn_args *a, int32_t t, int32_t g, double *want, double *scale)
{
    const snug_kv_view *kv = &a->kv;
    int32_t hd = a->head_dim, last = a->pos0 + t;
    int32_t first = a->window > 0 ? SNUG_MAX(0, last - a->window + 1) : 0;
    const float *q = a->q + t * a->q_row_stride + g * a->q_head_stride;
    int32_t n = last - first + 1;
    double *s = malloc((size_t)n * sizeof(double)), mx = -INFINITY, l = 0;
    for (int32_t j = 0; j < n; j++) {
        int32_t p = first + j;
        size_t off = (size_t)kv->block_table[p / kv->block_size] * kv->block_stride +
                     (size_t)(p % kv->block_size) * hd;
        double d = 0;
        for (int32_t i = 0; i < hd; i++) d += (double)q[i] * typed_at(kv->k, kv->dtype, off + i);
        s[j] = d * a->scale;
        if (a->softcap > 0) s[j] = a->softcap * tanh(s[j] / a->softcap);
        mx = SNUG_MAX(mx, s[j]);
    }
    for (int32_t i = 0; i < hd; i++) want[i] = scale[i] = 0;
    for (int32_t j = 0; j < n; j++) {
        int32_t p = first + j;
        size_t off = (size_t)kv->block_table[p / kv->block_size] * kv->block_stride +
                     (size_t)(p % kv->block_size) * hd;
        double e = exp(s[j] - mx);
        l += e;
        for (int32_t i = 0; i < hd; i++) {
            double v = typed_at(kv->v, kv->dtype, off + i);
            want[i] += e * v;
            scale[i] += e * fabs(v);
        }
    }
    for (int32_t i = 0; i < hd; i++) {
        want[i] /= l;
        scale[i] /= l;
    }
    free(s);
}

static void test_attention(void)
{
    snug_isa isas[SNUG_ISA_COUNT];
    int n_isa = simd_isas(isas, "attention");
    snug_kernels s = kernels_of(SNUG_ISA_SCALAR), kv[SNUG_ISA_COUNT];
    for (int i = 0; i < n_isa; i++) kv[i] = kernels_of(isas[i]);
    static const int32_t bss[] = {1, 3, 8, 16};
    static const int32_t groups[] = {1, 2, 4, 9};
    static const struct {
        int32_t n_q, pos0;
    } runs[] = {{1, 0}, {1, 40}, {5, 7}, {3, 70}, {33, 2}}; /* 33: more than one tile of rows */
    static const int32_t windows[] = {0, 6};
    static const int32_t hds[] = {16, 20, 64, 264}, hds_q8[] = {32, 64, 256, 96};
    static const snug_dtype kvdts[] = {SNUG_DTYPE_F32, SNUG_DTYPE_F16, SNUG_DTYPE_BF16, SNUG_DTYPE_Q8_0,
                                       SNUG_DTYPE_MXFP8_E4M3, SNUG_DTYPE_MXFP8_E5M2};
    double worst_s = 0, worst_v[SNUG_ISA_COUNT] = {0};
    rng_t r = {4242};
    int n_cases = 0;
    for (size_t d = 0; d < SNUG_ARRAY_LEN(kvdts); d++)
        for (size_t bi = 0; bi < SNUG_ARRAY_LEN(bss); bi++)
            for (size_t gi = 0; gi < SNUG_ARRAY_LEN(groups); gi++)
                for (size_t ri = 0; ri < SNUG_ARRAY_LEN(runs); ri++)
                    for (size_t wi = 0; wi < SNUG_ARRAY_LEN(windows); wi++) {
                        /* head sizes in rotation, to keep the test short */
                        int32_t hd = (d >= 3 ? hds_q8 : hds)[(d + bi + gi + ri + wi) % 4]; /* (the blocks of 32) */
                        /* a third of the cases soft-capped (Gemma 2's 50 would barely bite here) */
                        float cap = (d + bi + gi + ri + wi) % 3 == 1 ? 2.5f : 0.0f;
                        attn_case c = {bss[bi], groups[gi], runs[ri].n_q, runs[ri].pos0,
                                       windows[wi], hd, kvdts[d], cap};
                        attn_setup st = attn_make(&r, c);
                        n_cases++;
                        float *got_s = malloc(st.out_n * sizeof(float));
                        for (size_t i = 0; i < st.out_n; i++) st.out[i] = -7.0f;
                        s.attention(&st.a);
                        memcpy(got_s, st.out, st.out_n * sizeof(float));
                        double *want = malloc((size_t)hd * sizeof(double));
                        double *scale = malloc((size_t)hd * sizeof(double));
                        float **got_v = malloc((size_t)(n_isa + 1) * sizeof(float *));
                        for (int v = 0; v < n_isa; v++) {
                            for (size_t i = 0; i < st.out_n; i++) st.out[i] = -7.0f;
                            kv[v].attention(&st.a);
                            got_v[v] = malloc(st.out_n * sizeof(float));
                            memcpy(got_v[v], st.out, st.out_n * sizeof(float));
                        }
                        int bad = 0;
                        for (int32_t t = 0; t < c.n_q; t++)
                            for (int32_t g = 0; g < c.n_group; g++) {
                                attn_ref(&st.a, t, g, want, scale);
                                size_t o = (size_t)(t * st.a.out_row_stride +
                                                    g * st.a.out_head_stride);
                                for (int32_t i = 0; i < hd; i++) {
                                    /* (a Q8_0 row can be all zeros in a dimension: scale 0) */
                                    double e = fabs(got_s[o + i] - want[i]) / SNUG_MAX(scale[i], 1e-30);
                                    worst_s = SNUG_MAX(worst_s, e);
                                    if (!(e <= 2e-5) && bad++ < 3)
                                        CHECK(false, "scalar attention %s bs=%d g=%d nq=%d pos0=%d "
                                              "win=%d hd=%d: [%d][%d][%d] %g vs %g",
                                              snug_dtype_name(c.dt), c.block_size, c.n_group,
                                              c.n_q, c.pos0, c.window, hd, t, g, i, got_s[o + i],
                                              want[i]);
                                    for (int v = 0; v < n_isa; v++) {
                                        double ev = fabs(got_v[v][o + i] - got_s[o + i]) / SNUG_MAX(scale[i], 1e-30);
                                        worst_v[v] = SNUG_MAX(worst_v[v], ev);
                                        if (!(ev <= 2e-5) && bad++ < 3)
                                            CHECK(false, "%s attention %s bs=%d g=%d nq=%d pos0=%d "
                                                  "win=%d hd=%d: [%d][%d][%d] %g vs scalar %g",
                                                  snug_isa_name(isas[v]), snug_dtype_name(c.dt),
                                                  c.block_size, c.n_group, c.n_q, c.pos0,
                                                  c.window, hd, t, g, i, got_v[v][o + i],
                                                  got_s[o + i]);
                                    }
                                }
                            }
                        /* the padding between heads and rows is left alone */
                        for (int v = -1; v < n_isa; v++) {
                            const float *o = v < 0 ? got_s : got_v[v];
                            int touched = 0;
                            for (size_t i = 0; i < st.out_n; i++) {
                                size_t in_row = i % (size_t)st.a.out_row_stride;
                                bool pad = in_row % (size_t)(hd + 1) == (size_t)hd ||
                                           in_row >= (size_t)c.n_group * (hd + 1);
                                if (pad && o[i] != -7.0f) touched++;
                            }
                            CHECK(touched == 0, "%s attention wrote %d padding floats",
                                  v < 0 ? "scalar" : snug_isa_name(isas[v]), touched);
                        }
                        for (int v = 0; v < n_isa; v++) free(got_v[v]);
                        free(got_v);
                        free(want);
                        free(scale);
                        free(got_s);
                        attn_free(&st);
                    }
    printf("  attention scalar vs double: max err %.3g of sum p|v| (tolerance 2e-5), %d cases\n",
           worst_s, n_cases);
    for (int v = 0; v < n_isa; v++)
        printf("  attention %s vs scalar: max err %.3g of sum p|v|\n", snug_isa_name(isas[v]),
               worst_v[v]);
}

int main(void)
{
    RUN(test_isa_detect_and_init);
    RUN(test_matmul_insn);
    RUN(test_matmul);
    RUN(test_matmul_driver);
    RUN(test_matmul_rows_invariant);
    RUN(test_matmul_quant);
    RUN(test_qdot);
    RUN(test_linear_layout);
    RUN(test_linear_interleaved);
    RUN(test_elementwise_scalar);
    RUN(test_elementwise_simd);
    RUN(test_attention);
    return test_summary();
}
