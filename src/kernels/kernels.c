/*
 * kernels.c: choosing the kernels: instruction-set names, filling a
 * snug_kernels table from what the CPU supports (cpu.c reads it). (The size
 * of the scratch memory matmul needs is k_matmul.c's.)
 */
#include "k_impl.h"

#include "cpu.h"
#include "qdot.h"

#include "base/mem.h"
#include "base/dtype.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const insn_names[SNUG_INSN_COUNT] = {"scalar",         "vfmadd231ps ymm", "vfmadd231ps zmm",
                                                         "vdpbf16ps zmm",  "vpmaddubsw ymm",  "vpdpbusd ymm",
                                                         "vpdpbusd zmm"};

const char *snug_insn_name(snug_insn insn)
{
    if ((int)insn < 0 || insn >= SNUG_INSN_COUNT) return "unknown";
    return insn_names[insn];
}

int32_t snug_insn_flops(snug_insn insn)
{
    switch (insn) {
    case SNUG_INSN_FMA_YMM: return 8 * 2;
    case SNUG_INSN_FMA_ZMM: return 16 * 2;
    case SNUG_INSN_DPBF16_ZMM: return 16 * 2 * 2; /* per lane: two products, two adds */
    case SNUG_INSN_MADDUBS_YMM: return 32 * 2;   /* 32 byte products and their sums */
    case SNUG_INSN_DPBUSD_YMM: return 8 * 4 * 2; /* per lane: four products, four adds */
    case SNUG_INSN_DPBUSD_ZMM: return 16 * 4 * 2;
    default: return 0;
    }
}

snug_isa snug_insn_isa(snug_insn insn)
{
    switch (insn) {
    case SNUG_INSN_FMA_YMM:
    case SNUG_INSN_MADDUBS_YMM:
    case SNUG_INSN_DPBUSD_YMM: return SNUG_ISA_AVX2;
    case SNUG_INSN_DPBUSD_ZMM:
    case SNUG_INSN_FMA_ZMM: return SNUG_ISA_AVX512;
    case SNUG_INSN_DPBF16_ZMM: return SNUG_ISA_AVX512_BF16;
    default: return SNUG_ISA_SCALAR;
    }
}

static const char *const isa_names[SNUG_ISA_COUNT] = {"scalar", "avx2", "avx512", "avx512bf16"};

const char *snug_isa_name(snug_isa isa)
{
    if ((int)isa < 0 || isa >= SNUG_ISA_COUNT) return "unknown";
    return isa_names[isa];
}

bool snug_isa_from_name(const char *name, snug_isa *out)
{
    if (!name) return false;
    for (int i = 0; i < SNUG_ISA_COUNT; i++) {
        if (strcmp(name, isa_names[i]) == 0) {
            *out = (snug_isa)i;
            return true;
        }
    }
    return false;
}

snug_status snug_kernels_init(snug_kernels *k, snug_isa isa, snug_error *err)
{
    if ((int)isa < 0 || isa >= SNUG_ISA_COUNT)
        return snug_errorf(err, SNUG_INVALID, "unknown instruction set %d", (int)isa);
    snug_isa best = snug_isa_detect();
    if (isa > best)
        return snug_errorf(err, SNUG_UNSUPPORTED,
                           "this CPU cannot run the %s kernels (it supports up to %s)",
                           snug_isa_name(isa), snug_isa_name(best));
    memset(k, 0, sizeof *k);
    switch (isa) {
    case SNUG_ISA_SCALAR: snug_kernels_fill_scalar(k); break;
    case SNUG_ISA_AVX2: snug_kernels_fill_avx2(k); break;
    case SNUG_ISA_AVX512: snug_kernels_fill_avx512(k); break;
    default: snug_kernels_fill_avx512bf16(k); break;
    }
    k->isa = isa;
    snug_qgemv_kind kinds[SNUG_QGEMV_KINDS];
    int32_t n = snug_qgemv_kinds(isa, kinds);
    k->qgemv = n ? kinds[n - 1].fn : NULL;
    k->qgemv_insn = n ? kinds[n - 1].insn : SNUG_INSN_SCALAR;
    snug_qgemm_kind gk[SNUG_QGEMM_KINDS];
    int32_t ng = snug_qgemm_kinds(isa, gk);
    k->qgemm = ng ? gk[ng - 1].fn : NULL;
    k->qgemm_insn = ng ? gk[ng - 1].insn : SNUG_INSN_SCALAR;
    return SNUG_OK;
}

snug_status snug_kernels_set_qgemv(snug_kernels *k, snug_insn insn, snug_error *err)
{
    if (insn == SNUG_INSN_SCALAR) {
        k->qgemv = NULL, k->qgemv_insn = insn;
        return SNUG_OK;
    }
    snug_qgemv_kind kinds[SNUG_QGEMV_KINDS];
    int32_t n = snug_qgemv_kinds(k->isa, kinds);
    for (int32_t i = 0; i < n; i++)
        if (kinds[i].insn == insn) {
            k->qgemv = kinds[i].fn, k->qgemv_insn = insn;
            return SNUG_OK;
        }
    return snug_errorf(err, SNUG_UNSUPPORTED, "the %s kernels on this CPU have no %s matrix-vector path for "
                       "block formats", snug_isa_name(k->isa), snug_insn_name(insn));
}

/* ---- choosing the bf16 kernel by measurement ------------------------------- */

enum {
    CAL_K = 128,          /* one k block: x and w stay in L1 and L2 */
    CAL_PANELS = 3,       /* one register tile's panels */
    CAL_TILES = 4,        /* tiles of x per pass (32 rows) */
    CAL_PASSES = 3        /* best of */
};

/* The calibration's data: CAL_TILES tiles of mr rows of x (values of
 * either packing serve: the time does not depend on them), three panels of
 * CAL_K f32 steps of w (or half as many words of bf16 pairs), one tile of
 * y. */
typedef struct cal_data {
    _Alignas(64) uint32_t a[(size_t)CAL_TILES * SNUG_GEMM_MR_MAX * (CAL_K + 2)];
    _Alignas(64) uint32_t w[CAL_PANELS * SNUG_PANEL * CAL_K];
    _Alignas(64) float c[SNUG_GEMM_MR_MAX * CAL_PANELS * SNUG_PANEL];
} cal_data;

/* One thread's GFLOP/s of kind g's micro-kernel on L1-resident data d:
 * the best of CAL_PASSES passes of about 2 ms each. */
static double calibrate_kind(const snug_gemm_kind *g, cal_data *d)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(d->a); i++) d->a[i] = 0x3F803F80u; /* 1.0 as bf16 pairs, ~1.0 as f32 */
    for (size_t i = 0; i < SNUG_ARRAY_LEN(d->w); i++) d->w[i] = 0x3F003F00u;
    const void *b[3] = {d->w, d->w + SNUG_PANEL * CAL_K, d->w + 2 * SNUG_PANEL * CAL_K};
    size_t a_tile = (size_t)g->mr * (size_t)(g->a_bf16 ? CAL_K / 2 : CAL_K);
    const snug_prefetch none = {.count = 0};
    double best = 0;
    for (int pass = 0; pass < CAL_PASSES; pass++) {
        int64_t calls = 0;
        double t0 = snug_now_seconds(), t = t0;
        while (t - t0 < 2e-3) {
            for (int r = 0; r < 16; r++)
                for (int i = 0; i < CAL_TILES; i++)
                    g->micro(CAL_K, d->a + i * a_tile, b, CAL_PANELS, d->c, CAL_PANELS * SNUG_PANEL, g->mr,
                             r > 0, &none);
            calls += 16 * CAL_TILES;
            t = snug_now_seconds();
        }
        double flops = 2.0 * (double)calls * g->mr * CAL_PANELS * SNUG_PANEL * CAL_K;
        best = SNUG_MAX(best, flops / (t - t0) * 1e-9);
    }
    return best;
}

/* ---- choosing the block formats' matrix-vector path by measurement --------- */

enum {
    QCAL_ROWS = 64, /* four panels */
    QCAL_K = 4096   /* 16 Q4_K blocks a row: 144 KiB of weights, in L2 */
};

/* The data of the measurement: Q4_K weights in the panel layout (their
 * bytes arbitrary but for finite scales: the time does not depend on
 * them), one row of x quantized, one of y. */
typedef struct qcal_data {
    _Alignas(64) uint8_t w[QCAL_ROWS * (QCAL_K / 256) * 144];
    snug_x8_block x8[QCAL_K / SNUG_X8_BLOCK];
    float y[QCAL_ROWS];
} qcal_data;

/* One thread's GOP/s of the matrix-vector path fn on d at one row of x:
 * the best of CAL_PASSES passes of about 2 ms each. */
static double calibrate_qgemv(snug_qgemv_fn fn, qcal_data *d)
{
    const snug_linear w = {SNUG_DTYPE_Q4_K, QCAL_ROWS, QCAL_K, d->w};
    double best = 0;
    for (int pass = 0; pass < CAL_PASSES; pass++) {
        int64_t calls = 0;
        double t0 = snug_now_seconds(), t = t0;
        while (t - t0 < 2e-3) {
            for (int r = 0; r < 16; r++) fn(d->y, QCAL_ROWS, d->x8, 1, &w, 0, QCAL_ROWS / SNUG_PANEL);
            calls += 16;
            t = snug_now_seconds();
        }
        best = SNUG_MAX(best, 2.0 * (double)calls * QCAL_ROWS * QCAL_K / (t - t0) * 1e-9);
    }
    return best;
}

/* Measures each of k's matrix-vector paths of block formats (where there
 * is more than one on vpdpbusd) and keeps the fastest. */
static void calibrate_qgemv_kinds(snug_kernels *k)
{
    snug_qgemv_kind kinds[SNUG_QGEMV_KINDS];
    int32_t n = snug_qgemv_kinds(k->isa, kinds), first = 0;
    while (first < n && kinds[first].insn == SNUG_INSN_MADDUBS_YMM) first++; /* (vpdpbusd beats it where both are) */
    if (n - first < 2) return;
    qcal_data *d = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *d, NULL);
    if (!d) return; /* no memory to measure with: the default stays */
    for (size_t b = 0; b < sizeof d->w / 144; b++) { /* 16 blocks to each group of the panels, in their places */
        uint8_t bl[144];
        for (size_t i = 0; i < sizeof bl; i++) bl[i] = (uint8_t)((144 * b + i) * 37u + 11u);
        uint16_t h = snug_f32_to_f16(0.01f); /* d and dmin */
        memcpy(bl, &h, 2), memcpy(bl + 2, &h, 2);
        snug_linear_group_place(SNUG_DTYPE_Q4_K, d->w + SNUG_PANEL * 144 * (b / SNUG_PANEL), SNUG_PANEL,
                                (int64_t)(b % SNUG_PANEL), bl);
    }
    float x[QCAL_K];
    for (int i = 0; i < QCAL_K; i++) x[i] = (float)(i % 17) - 8.0f;
    snug_x8_quantize(x, QCAL_K, SNUG_DTYPE_Q4_K, d->x8);
    double best = 0;
    for (int32_t i = first; i < n; i++) {
        double g = calibrate_qgemv(kinds[i].fn, d);
        k->calib_gflops[kinds[i].insn] = g;
        if (g > best) best = g, k->qgemv = kinds[i].fn, k->qgemv_insn = kinds[i].insn;
    }
    snug_mem_free(d);
}

void snug_kernels_calibrate(snug_kernels *k)
{
    memset(k->calib_gflops, 0, sizeof k->calib_gflops);
    calibrate_qgemv_kinds(k);
    if (!k->mm || !k->mm->bf16_dp.micro) return; /* one candidate: nothing to choose */
    const snug_gemm_kind *fma = &k->mm->f32, *dp = &k->mm->bf16_dp;
    cal_data *d = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *d, NULL);
    if (!d) return; /* no memory to measure with: the FMA stays */
    double g_fma = calibrate_kind(fma, d), g_dp = calibrate_kind(dp, d);
    snug_mem_free(d);
    /* the FMA path has done the same bf16 work as f32 after its conversion:
     * it is measured on the f32 panels that the larger batches use */
    k->calib_gflops[fma->insn] = g_fma;
    k->calib_gflops[dp->insn] = g_dp;
    k->bf16_insn = g_dp >= 1.15 * g_fma ? dp->insn : fma->insn;
}

const char *snug_kernels_describe(const snug_kernels *k, snug_dtype wdt, char *buf, size_t size)
{
    int64_t rows = snug_matmul_gemv_rows(k, wdt);
    int n = snprintf(buf, size, "%s; %s matmuls on %s, up to %ld rows on %s", snug_isa_name(k->isa),
                     snug_dtype_name(wdt), snug_insn_name(snug_matmul_insn(k, wdt, rows + 1)), (long)rows,
                     snug_insn_name(snug_matmul_insn(k, wdt, 1)));
    const char *sep = " (calibrated, one thread: ";
    for (int i = 0; i < SNUG_INSN_COUNT && n >= 0 && (size_t)n < size; i++)
        if (k->calib_gflops[i] > 0) {
            n += snprintf(buf + n, size - (size_t)n, "%s%s %.1f", sep, snug_insn_name((snug_insn)i),
                          k->calib_gflops[i]);
            sep = ", ";
        }
    if (n >= 0 && (size_t)n < size && sep[0] == ',') snprintf(buf + n, size - (size_t)n, " GFLOP/s)");
    return buf;
}

bool snug_bf16_choice_from_name(const char *name, snug_bf16_choice *out)
{
    static const char *const names[] = {"auto", "fma", "vdpbf16ps"};
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (snug_bf16_choice)i;
            return true;
        }
    return false;
}

snug_status snug_kernels_choose_bf16(snug_kernels *k, snug_bf16_choice choice, snug_error *err)
{
    if (choice == SNUG_BF16_AUTO) {
        snug_kernels_calibrate(k);
        return SNUG_OK;
    }
    if (choice == SNUG_BF16_DP) return snug_kernels_set_bf16(k, SNUG_INSN_DPBF16_ZMM, err);
    return snug_kernels_set_bf16(k, k->mm ? k->mm->bf16_fma.insn : SNUG_INSN_SCALAR, err);
}

snug_status snug_kernels_set_bf16(snug_kernels *k, snug_insn insn, snug_error *err)
{
    bool fma = k->mm && (insn == k->mm->bf16_fma.insn);
    bool dp = k->mm && k->mm->bf16_dp.micro && insn == k->mm->bf16_dp.insn;
    if (!k->mm && insn == SNUG_INSN_SCALAR) fma = true;
    if (!fma && !dp)
        return snug_errorf(err, SNUG_UNSUPPORTED, "the %s kernels cannot run bf16 weights on %s",
                           snug_isa_name(k->isa), snug_insn_name(insn));
    k->bf16_insn = insn;
    return SNUG_OK;
}
