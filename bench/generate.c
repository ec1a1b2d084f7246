/*
 * generate.c: the forward pass's speed against limits measured in the same
 * run (bench/limits.h), on a checkpoint given on the command line (bench/
 * generate makes a Llama-3.2-1B-shaped bf16 one):
 *
 *   decode, batch 1     tokens/s against bandwidth / bytes read per token
 *                       (every weight the step reads, and the cache)
 *   prefill, 512 tokens tokens/s and GFLOP/s against the arithmetic peak
 *   decode, batch 32    tokens/s against batch 1, GFLOP/s against the peak
 *
 * The peak is the best of every multiply-add instruction the machine has
 * that could serve the weights (vfmadd231ps ymm and zmm, vdpbf16ps zmm for
 * bf16), on the same threads: the machine's limit, not the instruction the
 * kernels chose (the table names that one, and the calibration that chose
 * it). Then the matmul's time of a 2048 x 8192 bf16 matrix as the rows of
 * x grow (1 to 32): it must grow smoothly. --json prints all of it as one
 * object. The scalar kernels have no peak.
 *
 * The limits are measured right before and right after (the machine is
 * noisy: bandwidth readings vary by up to 2x); ratios use the better of
 * the two. Each decode step is also held against a reading of its limit
 * right before it (bandwidth for batch 1, the best instruction's peak for
 * batch 32, and for each of the two prefills), the median step (the better
 * prefill) reported beside the aggregate. Not part of make test.
 *   build/bench/generate DIR [THREADS] [--decode-batch-only] [--decode-context N]
 *                        [--kv-cache-dtype bf16|f16|f32|q8_0|fp8_e4m3|fp8_e5m2] [--json]
 * --decode-batch-only runs only the batch-32 decode and the prefill (no
 * limits, no batch 1) and prints their tokens/s on a line each (bench/serve
 * compares the server's throughput with them). --decode-context N runs only
 * a decode at batch 1 after an N-token prompt (prefilled PREFILL tokens a
 * step) and prints its tokens/s (bench/swa: a windowed layer's attention
 * reads its window whatever the length, a global layer's every position).
 * --kv-cache-dtype holds the cache in that dtype (default bf16; bench/
 * kvquant compares them).
 */
#include "engine/blocks.h"
#include "formats/checkpoint.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/sysinfo.h"
#include "model/kvcache.h"
#include "limits.h"
#include "stats.h"
#include "model/loader.h"
#include "model/model.h"

#include <unistd.h>

enum { PREFILL = 512, BATCH = 32, CONTEXT = 16, DECODE_STEPS = 12, WARMUP = 2, BLOCK = 16 };
_Static_assert(BATCH * CONTEXT <= PREFILL, "the batched prompts are one step");

typedef struct bench {
    snug_model *m;
    const snug_model_dims *d;
    int32_t vocab;
    snug_kvcache kv;
    snug_block_pool pool;
    snug_block_table tables[BATCH];
} bench;

/* Flops of the matrix products of one token (the lm_head when logits). */
static double token_flops(const snug_model_dims *d, bool logits)
{
    return snug_model_step_flops(d, 1, d->n_layers, logits ? 1 : 0);
}

/* Flops of attention for one token at position pos (q.k and p.v). */
static double attn_flops(const snug_model_dims *d, int64_t pos)
{
    return 4.0 * (double)(pos + 1) * d->head_dim * d->n_q_heads * d->n_layers;
}

/* Runs one step: seqs[i] gets n tokens at position pos each. */
static double run_step(bench *b, int n_seqs, int n, int pos, snug_logits_mode logits)
{
    static int32_t tokens[PREFILL];
    snug_step_seq seqs[BATCH];
    int32_t vocab = b->vocab;
    for (int i = 0; i < n_seqs * n; i++) tokens[i] = (int32_t)((i * 7919 + pos * 104729) % vocab);
    for (int i = 0; i < n_seqs; i++) {
        if (!snug_block_table_grow(&b->tables[i], &b->pool, pos + n, BLOCK)) {
            fprintf(stderr, "bench/generate: out of blocks\n");
            exit(1);
        }
        seqs[i] = (snug_step_seq){n, pos, b->tables[i].ids, b->tables[i].n, logits, NULL, 0};
    }
    snug_step step = {tokens, n_seqs * n, seqs, n_seqs, 0};
    const float *lg;
    int32_t rows;
    snug_error err = {0};
    double t0 = bench_now();
    if (snug_model_forward(b->m, &b->kv, &step, &lg, &rows, &err) != SNUG_OK) {
        fprintf(stderr, "bench/generate: %s\n", err.msg);
        exit(1);
    }
    return bench_now() - t0;
}

static void release_all(bench *b)
{
    for (int i = 0; i < BATCH; i++) snug_block_table_release(&b->tables[i], &b->pool);
}

/* Decode at batch BATCH, each sequence with a CONTEXT-token prompt: tokens/s;
 * the seconds and flops of the timed steps into *tb and *fl_b. With
 * peak_insn not scalar, each timed step right after a short reading of that
 * instruction's peak on `threads` threads, and *step_median the median of
 * the steps' GFLOP/s against the peak of their moment (else 0). */
static double decode_batch_timed(bench *b, double *tb, double *fl_b, snug_insn peak_insn, int threads,
                                 double *step_median)
{
    double ratio[DECODE_STEPS];
    run_step(b, BATCH, CONTEXT, 0, SNUG_LOGITS_LAST);
    *tb = *fl_b = 0;
    for (int s = 0; s < WARMUP + DECODE_STEPS; s++) {
        double peak = s >= WARMUP && peak_insn != SNUG_INSN_SCALAR ? bench_insn_peak(peak_insn, threads, 3) : 0;
        double t = run_step(b, BATCH, 1, CONTEXT + s, SNUG_LOGITS_LAST);
        if (s >= WARMUP) {
            double fl = BATCH * (token_flops(b->d, true) + attn_flops(b->d, CONTEXT + s));
            *tb += t;
            *fl_b += fl;
            ratio[s - WARMUP] = peak > 0 ? fl / t / peak : 0;
        }
    }
    release_all(b);
    *step_median = bench_median(ratio, DECODE_STEPS);
    return BATCH * DECODE_STEPS / *tb;
}

static double decode_batch(bench *b)
{
    double tb, fl_b, med;
    return decode_batch_timed(b, &tb, &fl_b, SNUG_INSN_SCALAR, 1, &med);
}

/* The format of the model's matrices: the one most of their elements are
 * in (a block format of a quantized file, or the weights' type), named in
 * label with any other format they hold ("Q4_K+Q6_K"). */
static snug_dtype matrices_dtype(const snug_weights *w, char *label, size_t size)
{
    uint64_t bytes[SNUG_DTYPE_COUNT] = {0};
    for (int32_t i = 0; i < w->table.n_params; i++) {
        const snug_param *p = &w->table.params[i];
        if (p->n_dims != 2) continue;
        for (int32_t s = 0; s < p->n_sources; s++) {
            snug_dtype d = p->sources[s].dtype != SNUG_DTYPE_NONE ? p->sources[s].dtype : w->dtype;
            bytes[d] += (uint64_t)p->sources[s].n_rows * (uint64_t)p->cols;
        }
    }
    int best = 0;
    for (int d = 1; d < SNUG_DTYPE_COUNT; d++)
        if (bytes[d] > bytes[best]) best = d;
    int n = snprintf(label, size, "%s", snug_dtype_is_quant((snug_dtype)best) ? snug_dtype_name((snug_dtype)best)
                                                                          : snug_dtype_torch_name((snug_dtype)best));
    for (int d = 1; d < SNUG_DTYPE_COUNT && n > 0 && (size_t)n < size; d++)
        if (d != best && bytes[d] > 0) n += snprintf(label + n, size - (size_t)n, "+%s", snug_dtype_name((snug_dtype)d));
    return (snug_dtype)best;
}

static void bench_free(bench *b, snug_weights *w, snug_checkpoint *ck)
{
    for (int i = 0; i < BATCH; i++) snug_block_table_free(&b->tables[i]);
    snug_block_pool_free(&b->pool);
    snug_kvcache_free(&b->kv);
    snug_model_free(b->m);
    snug_weights_free(w);
    snug_checkpoint_close(ck);
}

int main(int argc, char **argv)
{
    bench_omp_passive(argv);
    if (argc < 2) {
        fprintf(stderr, "usage: build/bench/generate DIR [THREADS] [--decode-batch-only] [--decode-context N] "
                        "[--kv-cache-dtype bf16|f16|f32|q8_0|fp8_e4m3|fp8_e5m2] [--json]\n");
        return 2;
    }
    int threads = argc > 2 && argv[2][0] != '-' ? atoi(argv[2]) : snug_cpu_count();
    bool batch_only = false, json = false;
    int context = 0;
    snug_dtype kv_dtype = SNUG_DTYPE_BF16;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--decode-batch-only") == 0) batch_only = true;
        if (strcmp(argv[i], "--json") == 0) json = true;
        if (strcmp(argv[i], "--decode-context") == 0 && i + 1 < argc) context = atoi(argv[++i]);
        if (strcmp(argv[i], "--kv-cache-dtype") == 0 && i + 1 < argc) {
            i++;
            kv_dtype = snug_kv_dtype_from_name(argv[i]);
            if (kv_dtype == SNUG_DTYPE_NONE) {
                fprintf(stderr, "bench/generate: --kv-cache-dtype %s: expected bf16, f16, f32, q8_0, fp8_e4m3 or "
                                "fp8_e5m2\n", argv[i]);
                return 2;
            }
        }
    }
    if (context < 0 || context > (1 << 20)) {
        fprintf(stderr, "bench/generate: --decode-context %d: expected 1 to %d\n", context, 1 << 20);
        return 2;
    }
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    snug_weights *w = NULL;
    bench b = {0};
    snug_load_opts lo = {.tp = 1, .n_threads = threads};
    if (snug_checkpoint_open(argv[1], &ck, &err) != SNUG_OK || snug_weights_load(ck, &lo, &w, NULL, &err) != SNUG_OK) {
        fprintf(stderr, "bench/generate: %s\n", err.msg);
        return 1;
    }
    snug_model_opts mo = {.shape = {PREFILL, BATCH, BATCH, threads}, .isa = -1};
    if (snug_model_create(&ck->config, w, &mo, &b.m, &err) != SNUG_OK) {
        fprintf(stderr, "bench/generate: %s\n", err.msg);
        return 1;
    }
    b.d = snug_model_get_dims(b.m);
    b.vocab = ck->config.vocab_size;
    snug_isa isa = snug_model_isa(b.m);
    const snug_kernels *kern = snug_model_kernels(b.m);
    int32_t n_blocks = SNUG_MAX(BATCH * ((PREFILL + BLOCK - 1) / BLOCK + 2), (context + 64) / BLOCK + 2);
    snug_kv_shape ks = {b.d->n_layers, b.d->n_kv_heads, b.d->head_dim, BLOCK, kv_dtype};
    if (snug_kvcache_create(&ks, n_blocks, snug_model_pool(b.m), &b.kv, &err) != SNUG_OK || snug_block_pool_init(&b.pool, n_blocks, BLOCK, false, &err) != SNUG_OK) {
        fprintf(stderr, "bench/generate: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; i < BATCH; i++)
        if (snug_block_table_init(&b.tables[i], SNUG_MAX(PREFILL, context) + 64, BLOCK, &err) != SNUG_OK) return 1;

    /* Bytes a decode step of one token reads: every weight (the embedding
     * table only as the lm_head, when tied; one row otherwise) and the cache. */
    char label[64];
    snug_dtype mdt = matrices_dtype(w, label, sizeof label);
    double weight_read = (double)w->arena_bytes;
    int32_t ei = snug_weights_find(w, "embed_tokens");
    if (!ck->config.tie_word_embeddings && ei >= 0) { /* held in its own format: a GGUF's is a block format */
        const snug_param *e = &w->table.params[ei];
        double table = (double)snug_param_bytes(e, w->dtype);
        weight_read -= table - table / (double)e->rows;
    }
    double kv_per_pos = (double)snug_kv_block_bytes(&ks) / BLOCK;

    if (context > 0) { /* decode at batch 1 after a long prompt */
        for (int p = 0; p < context; p += PREFILL)
            run_step(&b, 1, SNUG_MIN(PREFILL, context - p), p, p + PREFILL >= context ? SNUG_LOGITS_LAST : SNUG_LOGITS_NONE);
        double t = 0;
        for (int s = 0; s < WARMUP + DECODE_STEPS; s++) {
            double dt = run_step(&b, 1, 1, context + s, SNUG_LOGITS_LAST);
            if (s >= WARMUP) t += dt;
        }
        if (json)
            printf("{\"decode_context\": %d, \"decode_tps\": %.4f, \"threads\": %d, \"kv_cache_dtype\": \"%s\"}\n",
                   context, DECODE_STEPS / t, threads, snug_kv_dtype_name(kv_dtype));
        else
            printf("decode after %d tokens: %.2f tokens/s (%s weights, %s cache, %d threads, kernels %s)\n", context,
                   DECODE_STEPS / t, label, snug_kv_dtype_name(kv_dtype), threads, snug_isa_name(isa));
        release_all(&b);
        bench_free(&b, w, ck);
        return 0;
    }
    if (batch_only) {
        double tpsb = decode_batch(&b), tp = 1e30;
        for (int k = 0; k < 2; k++) {
            tp = SNUG_MIN(tp, run_step(&b, 1, PREFILL, 0, SNUG_LOGITS_LAST));
            release_all(&b);
        }
        printf("decode, batch %d: %.2f tokens/s (%s weights, %d threads, kernels %s)\n", BATCH, tpsb,
               label, threads, snug_isa_name(isa));
        printf("prefill, %d tokens: %.2f tokens/s\n", PREFILL, PREFILL / tp);
        bench_free(&b, w, ck);
        return 0;
    }
    if (!json)
        printf("bench/generate: %s, %s weights (%.2f GB), %d threads, kernels %s\n", argv[1],
               label, (double)w->arena_bytes / 1e9, threads, snug_isa_name(isa));
    /* the instruction of the matmuls of each compute-bound step, and the
     * limit: the best peak of every instruction that could serve the weights */
    snug_insn insn_p = snug_matmul_insn(kern, mdt, PREFILL), insn_b = snug_matmul_insn(kern, mdt, BATCH);
    double peaks0[SNUG_INSN_COUNT], peaks1[SNUG_INSN_COUNT], peaks[SNUG_INSN_COUNT];
    double bw0 = bench_read_bandwidth((size_t)1 << 30, threads, 3);
    double best0 = bench_peaks(mdt, threads, 9, peaks0);

    /* Decode, batch 1: a CONTEXT-token prompt, then single steps, each right
     * after a reading of the bandwidth of its own (a quarter of the bytes a
     * step reads): the machine's bandwidth swings by 2x within seconds, so
     * each step is held against the limit of its moment, and the median of
     * those ratios is the figure (the before / after limits stay for the
     * aggregate) */
    run_step(&b, 1, CONTEXT, 0, SNUG_LOGITS_LAST);
    /* one buffer for those readings, touched once: a new one each time
     * would sit partly in the last-level cache from its first touch (a
     * Xeon's 260 MB hold most of a 1B Q4_K_M's quarter). At least twice
     * the last-level cache, so that reading it also pushes the weights out
     * of it: every model then reads its weights from memory, where a small
     * one would keep a share of them in a large cache between steps and a
     * large one none (on a Xeon with 480 MB of it, a 0.8 GB Q4_K_M read
     * 0.66 of the bandwidth beside 0.59 for a 2.4 GB one, whose matrices
     * run at the same speed from memory). */
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t bw_step_bytes = SNUG_MAX((size_t)(weight_read / 4), llc > 0 ? 2 * (size_t)llc : 0);
    float *bw_step_buf = bench_bandwidth_buffer(bw_step_bytes, threads);
    double t1 = 0, step_ratio[DECODE_STEPS];
    double bytes1 = weight_read + kv_per_pos * (CONTEXT + WARMUP + DECODE_STEPS / 2.0);
    for (int s = 0; s < WARMUP + DECODE_STEPS; s++) {
        /* after the pool's workers have stopped spinning: they are not reading */
        if (s >= WARMUP) nanosleep(&(struct timespec){0, 2000L * SNUG_POOL_SPIN_US_DEFAULT}, NULL);
        double bw_now = s >= WARMUP && bw_step_buf ? bench_read_bandwidth_in(bw_step_buf, bw_step_bytes, threads, 1) : 0;
        double t = run_step(&b, 1, 1, CONTEXT + s, SNUG_LOGITS_LAST);
        if (s >= WARMUP) {
            t1 += t;
            step_ratio[s - WARMUP] = bw_now > 0 ? bytes1 / t / bw_now : 0;
        }
    }
    release_all(&b);
    snug_mem_free(bw_step_buf);
    double tps1 = DECODE_STEPS / t1;
    double r_decode1_steps = bench_median(step_ratio, DECODE_STEPS);

    /* The compute-bound steps are held against the best instruction's peak
     * the same way: each also against a reading of it right before it (the
     * machine's other tenants take 10-30% of the arithmetic for seconds at
     * a time), the aggregate against the best of before and after. */
    snug_insn peak_insn = SNUG_INSN_SCALAR;
    for (int i = 0; i < SNUG_INSN_COUNT; i++)
        if (peaks0[i] > 0 && (peak_insn == SNUG_INSN_SCALAR || peaks0[i] > peaks0[peak_insn])) peak_insn = (snug_insn)i;

    /* Prefill of PREFILL tokens in one step (best of two). */
    double fl_p = token_flops(b.d, false) * PREFILL + token_flops(b.d, true) - token_flops(b.d, false);
    for (int p = 0; p < PREFILL; p++) fl_p += attn_flops(b.d, p);
    double tp = 1e30, r_prefill_step = 0;
    for (int k = 0; k < 2; k++) {
        double peak = peak_insn != SNUG_INSN_SCALAR ? bench_insn_peak(peak_insn, threads, 3) : 0;
        double t = run_step(&b, 1, PREFILL, 0, SNUG_LOGITS_LAST);
        tp = SNUG_MIN(tp, t);
        if (peak > 0) r_prefill_step = SNUG_MAX(r_prefill_step, fl_p / t / peak);
        release_all(&b);
    }

    /* Decode, batch BATCH: each sequence with a CONTEXT-token prompt. */
    double tb, fl_b, r_batch_steps;
    double tpsb = decode_batch_timed(&b, &tb, &fl_b, peak_insn, threads, &r_batch_steps);

    /* The matmul's time as the rows of x grow (the same kernels). */
    double rows_ms[BENCH_ROWS_COUNT];
    bench_rows_ms(kern, snug_model_pool(b.m), rows_ms);

    double bw1 = bench_read_bandwidth((size_t)1 << 30, threads, 3);
    double best1 = bench_peaks(mdt, threads, 9, peaks1);
    double bw = SNUG_MAX(bw0, bw1), best = SNUG_MAX(best0, best1);
    for (int i = 0; i < SNUG_INSN_COUNT; i++) peaks[i] = SNUG_MAX(peaks0[i], peaks1[i]);
    double r_decode1 = tps1 / (bw / bytes1), r_prefill = best > 0 ? fl_p / tp / best : 0;
    double r_batch = best > 0 ? fl_b / tb / best : 0;
    if (json) {
        printf("{\"isa\": \"%s\", \"threads\": %d, \"dtype\": \"%s\", \"weights_gb\": %.3f, ", snug_isa_name(isa),
               threads, label, (double)w->arena_bytes / 1e9);
        printf("\"prefill_insn\": \"%s\", \"batch32_insn\": \"%s\", \"decode1_insn\": \"%s\", ", snug_insn_name(insn_p),
               snug_insn_name(insn_b), snug_insn_name(snug_matmul_insn(kern, mdt, 1)));
        printf("\"calibration_gflops\": {");
        const char *sep = "";
        for (int i = 0; i < SNUG_INSN_COUNT; i++)
            if (kern->calib_gflops[i] > 0) {
                printf("%s\"%s\": %.1f", sep, snug_insn_name((snug_insn)i), kern->calib_gflops[i]);
                sep = ", ";
            }
        printf("}, \"bf16_insn\": \"%s\", \"bf16_insn_why\": \"%s\", \"peaks_gflops\": {",
               snug_insn_name(kern->bf16_insn),
               kern->calib_gflops[SNUG_INSN_DPBF16_ZMM] > 0
                   ? "the faster of the two in the calibration (the FMA unless vdpbf16ps is 15% faster)"
                   : "the only bf16 GEMM this instruction set has");
        bench_peaks_json(peaks);
        printf("}, \"best_peak_gflops\": %.1f, \"bandwidth_gbs\": %.2f, ", best / 1e9, bw / 1e9);
        printf("\"decode1_step_ratio_median\": %.3f, \"prefill_step_ratio\": %.3f, \"batch32_step_ratio_median\": %.3f, ",
               r_decode1_steps, r_prefill_step, r_batch_steps);
        printf("\"decode1_tps\": %.2f, \"decode1_ratio\": %.3f, \"prefill_tps\": %.1f, \"prefill_gflops\": %.1f, "
               "\"prefill_ratio\": %.3f, \"batch32_tps\": %.1f, \"batch32_gflops\": %.1f, \"batch32_ratio\": %.3f, "
               "\"batch32_over_batch1\": %.2f, \"rows\": [",
               tps1, r_decode1, PREFILL / tp, fl_p / tp / 1e9, r_prefill, tpsb, fl_b / tb / 1e9, r_batch, tpsb / tps1);
        for (int r = 0; r < BENCH_ROWS_COUNT; r++) printf("%s%ld", r ? ", " : "", (long)bench_rows_n[r]);
        printf("], \"rows_ms\": [");
        for (int r = 0; r < BENCH_ROWS_COUNT; r++) printf("%s%.3f", r ? ", " : "", rows_ms[r]);
        printf("], \"rows_floor\": %.2f}\n", bench_rows_floor(kern, peaks, rows_ms));
        bench_free(&b, w, ck);
        return 0;
    }
    printf("limits: read bandwidth %.1f / %.1f GB/s (before / after); peaks (GFLOP/s, %d threads, before / after):",
           bw0 / 1e9, bw1 / 1e9, threads);
    for (int i = 0; i < SNUG_INSN_COUNT; i++)
        if (peaks[i] > 0) printf(" %s %.1f / %.1f;", snug_insn_name((snug_insn)i), peaks0[i] / 1e9, peaks1[i] / 1e9);
    printf(" the limit is the best: %.1f\n", best / 1e9);
    if (kern->calib_gflops[SNUG_INSN_DPBF16_ZMM] > 0)
        printf("bf16 kernel chosen by calibration: %s (one thread in L1: f32-panel vfmadd231ps zmm %.1f, "
               "vdpbf16ps zmm %.1f GFLOP/s)\n",
               snug_insn_name(kern->bf16_insn), kern->calib_gflops[SNUG_INSN_FMA_ZMM],
               kern->calib_gflops[SNUG_INSN_DPBF16_ZMM]);
    printf("\n%-22s %10s %10s %15s %8s %7s  %s\n", "", "tokens/s", "GFLOP/s", "limit", "ratio", "goal", "ran");
    printf("%-22s %10.2f %10.1f %9.2f tok/s %8.2f %7s  %s (limit: read bandwidth)\n", "decode, batch 1", tps1,
           tps1 * token_flops(b.d, true) / 1e9, bw / bytes1, r_decode1, ">=0.9",
           snug_insn_name(snug_matmul_insn(kern, mdt, 1)));
    const struct {
        const char *name, *goal;
        snug_insn insn;
        double tps, flops_per_s, ratio;
    } rows[2] = {{"prefill, 512 tokens", ">=0.75", insn_p, PREFILL / tp, fl_p / tp, r_prefill},
                 {"decode, batch 32", ">=0.65", insn_b, tpsb, fl_b / tb, r_batch}};
    for (int r = 0; r < 2; r++) {
        if (best > 0)
            printf("%-22s %10.1f %10.1f %7.1f GFLOP/s %8.2f %7s  %s\n", rows[r].name, rows[r].tps,
                   rows[r].flops_per_s / 1e9, best / 1e9, rows[r].ratio, rows[r].goal, snug_insn_name(rows[r].insn));
        else
            printf("%-22s %10.1f %10.1f %15s %8s %7s  %s\n", rows[r].name, rows[r].tps, rows[r].flops_per_s / 1e9,
                   "-", "-", rows[r].goal, snug_insn_name(rows[r].insn));
    }
    printf("%-22s %10s %10s %15s %8.2f\n", "  batch 32 / batch 1", "", "", "", tpsb / tps1);
    printf("\nmatmul %dx%d bf16, ms by rows of x:", BENCH_ROWS_K, BENCH_ROWS_M);
    for (int r = 0; r < BENCH_ROWS_COUNT; r++) printf(" %ld: %.3f", (long)bench_rows_n[r], rows_ms[r]);
    printf("\n  8 rows / 4 rows %.2f (goal <= 1.3; 8 rows at the peak of %s alone: %.2f); ms per row at 4, 8, "
           "16, 32: %.3f %.3f %.3f %.3f (goal: falling)\n",
           rows_ms[4] / rows_ms[2], snug_insn_name(snug_matmul_insn(kern, SNUG_DTYPE_BF16, 8)),
           bench_rows_floor(kern, peaks, rows_ms), rows_ms[2] / 4, rows_ms[4] / 8, rows_ms[5] / 16, rows_ms[6] / 32);
    printf("(decode, batch 1 reads %.2f GB per token; limit = bandwidth / that; each step against the bandwidth\n"
           " read right before it: median %.2f)\n", bytes1 / 1e9, r_decode1_steps);
    if (peak_insn != SNUG_INSN_SCALAR)
        printf("(against the peak of %s read right before each step: prefill %.2f (the better of two), decode\n"
               " batch 32 %.2f (the median step))\n",
               snug_insn_name(peak_insn), r_prefill_step, r_batch_steps);

    bench_free(&b, w, ck);
    return 0;
}
