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
 * The peak is that of the instruction the matmul kernels run for these
 * weights and that many rows (snug_kernels.matmul_insn: vdpbf16ps zmm for
 * bf16 weights on avx512bf16, vfmadd231ps zmm or ymm otherwise), on the
 * same threads; the table names it. The scalar kernels have none.
 *
 * The limits are measured right before and right after (the machine is
 * noisy: bandwidth readings vary by up to 2x); ratios use the better of
 * the two. Not part of make test.
 *   build/bench/generate DIR [THREADS] [--decode-batch-only]
 * --decode-batch-only runs only the batch-32 decode (no limits, no batch 1,
 * no prefill) and prints its tokens/s on one line (bench/serve compares the
 * server's throughput with it).
 */
#include "model/blocks.h"
#include "formats/checkpoint.h"
#include "base/device.h"
#include "base/dtype.h"
#include "model/kvcache.h"
#include "limits.h"
#include "model/loader.h"
#include "model/model.h"

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
    double per_layer = (double)d->hidden * (d->qkv_dim + d->q_dim) + 3.0 * d->hidden * d->intermediate;
    return 2.0 * (per_layer * d->n_layers + (logits ? (double)d->hidden * d->vocab_rows : 0));
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
        seqs[i] = (snug_step_seq){n, pos, b->tables[i].ids, b->tables[i].n, logits};
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
 * the seconds and flops of the timed steps into *tb and *fl_b. */
static double decode_batch_timed(bench *b, double *tb, double *fl_b)
{
    run_step(b, BATCH, CONTEXT, 0, SNUG_LOGITS_LAST);
    *tb = *fl_b = 0;
    for (int s = 0; s < WARMUP + DECODE_STEPS; s++) {
        double t = run_step(b, BATCH, 1, CONTEXT + s, SNUG_LOGITS_LAST);
        if (s >= WARMUP) {
            *tb += t;
            *fl_b += BATCH * (token_flops(b->d, true) + attn_flops(b->d, CONTEXT + s));
        }
    }
    release_all(b);
    return BATCH * DECODE_STEPS / *tb;
}

static double decode_batch(bench *b)
{
    double tb, fl_b;
    return decode_batch_timed(b, &tb, &fl_b);
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
    if (argc < 2) {
        fprintf(stderr, "usage: build/bench/generate DIR [THREADS] [--decode-batch-only]\n");
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : omp_get_max_threads();
    bool batch_only = argc > 3 && strcmp(argv[3], "--decode-batch-only") == 0;
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
    int32_t n_blocks = BATCH * ((PREFILL + BLOCK - 1) / BLOCK + 2);
    snug_kv_shape ks = {b.d->n_layers, b.d->n_kv_heads, b.d->head_dim, BLOCK, SNUG_DTYPE_BF16};
    if (snug_kvcache_create(&ks, n_blocks, &b.kv, &err) != SNUG_OK || snug_block_pool_init(&b.pool, n_blocks, BLOCK, false, &err) != SNUG_OK) {
        fprintf(stderr, "bench/generate: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; i < BATCH; i++)
        if (snug_block_table_init(&b.tables[i], PREFILL + 64, BLOCK, &err) != SNUG_OK) return 1;

    /* Bytes a decode step of one token reads: every weight (the embedding
     * table only as the lm_head, when tied; one row otherwise) and the cache. */
    size_t row = (size_t)b.d->hidden * snug_dtype_size(w->dtype);
    double weight_read = (double)w->arena_bytes - (ck->config.tie_word_embeddings ? 0 : (double)b.d->vocab_rows * row - row);
    double kv_per_pos = (double)snug_kv_block_bytes(&ks) / BLOCK;

    if (batch_only) {
        double tpsb = decode_batch(&b);
        printf("decode, batch %d: %.2f tokens/s (%s weights, %d threads, kernels %s)\n", BATCH, tpsb,
               snug_dtype_torch_name(w->dtype), threads, snug_isa_name(isa));
        bench_free(&b, w, ck);
        return 0;
    }
    printf("bench/generate: %s, %s weights (%.2f GB), %d threads, kernels %s\n", argv[1],
           snug_dtype_torch_name(w->dtype), (double)w->arena_bytes / 1e9, threads, snug_isa_name(isa));
    snug_kernels kern;
    if (snug_kernels_init(&kern, isa, &err) != SNUG_OK) {
        fprintf(stderr, "bench/generate: %s\n", err.msg);
        return 1;
    }
    /* the instruction of the matmuls of each compute-bound step, and its peak */
    snug_insn insn_p = kern.matmul_insn(w->dtype, PREFILL), insn_b = kern.matmul_insn(w->dtype, BATCH);
    double bw0 = bench_read_bandwidth((size_t)1 << 30, threads, 3);
    double peak_p0 = bench_insn_peak(insn_p, threads, 9);
    double peak_b0 = insn_b == insn_p ? peak_p0 : bench_insn_peak(insn_b, threads, 9);

    /* Decode, batch 1: a CONTEXT-token prompt, then single steps. */
    run_step(&b, 1, CONTEXT, 0, SNUG_LOGITS_LAST);
    double t1 = 0;
    for (int s = 0; s < WARMUP + DECODE_STEPS; s++) {
        double t = run_step(&b, 1, 1, CONTEXT + s, SNUG_LOGITS_LAST);
        if (s >= WARMUP) t1 += t;
    }
    release_all(&b);
    double tps1 = DECODE_STEPS / t1;
    double bytes1 = weight_read + kv_per_pos * (CONTEXT + WARMUP + DECODE_STEPS / 2.0);

    /* Prefill of PREFILL tokens in one step (best of two). */
    double tp = 1e30;
    for (int k = 0; k < 2; k++) {
        tp = SNUG_MIN(tp, run_step(&b, 1, PREFILL, 0, SNUG_LOGITS_LAST));
        release_all(&b);
    }
    double fl_p = token_flops(b.d, false) * PREFILL + token_flops(b.d, true) - token_flops(b.d, false);
    for (int p = 0; p < PREFILL; p++) fl_p += attn_flops(b.d, p);

    /* Decode, batch BATCH: each sequence with a CONTEXT-token prompt. */
    double tb, fl_b;
    double tpsb = decode_batch_timed(&b, &tb, &fl_b);

    double bw1 = bench_read_bandwidth((size_t)1 << 30, threads, 3);
    double peak_p1 = bench_insn_peak(insn_p, threads, 9);
    double peak_b1 = insn_b == insn_p ? peak_p1 : bench_insn_peak(insn_b, threads, 9);
    double bw = SNUG_MAX(bw0, bw1), peak_p = SNUG_MAX(peak_p0, peak_p1), peak_b = SNUG_MAX(peak_b0, peak_b1);
    char lp[64], lb[64];
    bench_insn_label(insn_p, threads, lp, sizeof lp);
    bench_insn_label(insn_b, threads, lb, sizeof lb);
    printf("limits: read bandwidth %.1f / %.1f GB/s (before / after); peak of %s %.1f / %.1f GFLOP/s",
           bw0 / 1e9, bw1 / 1e9, lp, peak_p0 / 1e9, peak_p1 / 1e9);
    if (insn_b != insn_p) printf("; of %s %.1f / %.1f GFLOP/s", lb, peak_b0 / 1e9, peak_b1 / 1e9);
    printf("\n\n");
    printf("%-22s %10s %10s %15s %8s %7s  %s\n", "", "tokens/s", "GFLOP/s", "limit", "ratio", "goal", "limit of");
    printf("%-22s %10.2f %10.1f %9.2f tok/s %8.2f %7s  %s\n", "decode, batch 1", tps1,
           tps1 * token_flops(b.d, true) / 1e9, bw / bytes1, tps1 / (bw / bytes1), ">=0.9", "read bandwidth");
    const struct {
        const char *name, *goal, *label;
        double flops_per_s, peak;
    } rows[2] = {{"prefill, 512 tokens", ">=0.75", lp, fl_p / tp, peak_p},
                 {"decode, batch 32", "", lb, fl_b / tb, peak_b}};
    double tok_per_s[2] = {PREFILL / tp, tpsb};
    for (int r = 0; r < 2; r++) {
        if (rows[r].peak > 0)
            printf("%-22s %10.1f %10.1f %7.1f GFLOP/s %8.2f %7s  %s\n", rows[r].name, tok_per_s[r],
                   rows[r].flops_per_s / 1e9, rows[r].peak / 1e9, rows[r].flops_per_s / rows[r].peak,
                   rows[r].goal, rows[r].label);
        else
            printf("%-22s %10.1f %10.1f %15s %8s %7s  %s\n", rows[r].name, tok_per_s[r],
                   rows[r].flops_per_s / 1e9, "-", "-", rows[r].goal, rows[r].label);
    }
    printf("%-22s %10s %10s %15s %8.2f %7s\n", "  batch 32 / batch 1", "", "", "", tpsb / tps1, ">=8");
    printf("\n(decode, batch 1 reads %.2f GB per token; limit = bandwidth / that)\n", bytes1 / 1e9);

    bench_free(&b, w, ck);
    return 0;
}
