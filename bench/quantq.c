/*
 * quantq.c: the quality of quantizing on load, on a model too large for
 * make test: DIR loaded with its float matrices quantized to each block
 * format (snug_load_opts.quant) against DIR loaded in bf16:
 *   - each matrix of layer 0 and the embedding times the same x (8 rows of
 *     a fixed pattern): the RMS of the difference of the products over the
 *     RMS of bf16's (the arithmetic: weights and 8-bit activations);
 *   - the logits over the same tokens, teacher-forced in one step: the RMS
 *     of the difference over the RMS of the bf16 logits, and the share of
 *     positions whose top token agrees.
 * On a synthesized model (seeded random weights, flat logits over a large
 * vocabulary) the logits move several times more than the products do
 * (measured: 16 layers of the 1B shape, Q8_0's 0.7% per product become 7%
 * in the logits; 2 layers 3%), and a top token is one of many nearly equal:
 * the bounds of those columns are set for that, the products' are tight.
 *
 *   build/bench/quantq DIR [THREADS] [--check]
 *
 * The tokens are seeded pseudo-random ids (a synthesized model has no text
 * to read; the measure is of the arithmetic, not of the language). With
 * --check the exit status is 1 when a format is outside its stated bound
 * (the table's last columns), so that CI can run it. Prints one line per
 * format. Not part of the library.
 */
#include "base/mem.h"
#include "base/dtype.h"
#include "base/sysinfo.h"
#include "engine/blocks.h"
#include "formats/checkpoint.h"
#include "kernels/kernels.h"
#include "kernels/linear.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_TOKENS = 128, BLOCK = 16 };

/* DIR's weights with its float matrices quantized to quant (NONE: bf16). */
static snug_weights *load_as(const snug_checkpoint *ck, snug_dtype quant, int32_t threads, snug_error *err)
{
    snug_weights *w = NULL;
    snug_load_opts lo = {.tp = 1, .dtype = SNUG_DTYPE_BF16, .quant = quant, .n_threads = threads};
    return snug_weights_load(ck, &lo, &w, NULL, err) == SNUG_OK ? w : NULL;
}

/* The logits of the first vocab ids at every one of n positions of tokens
 * under weights w, into out (n x vocab). */
static bool logits_of(const snug_checkpoint *ck, const snug_weights *w, int32_t threads, const int32_t *tokens,
                      int n, float *out, int32_t vocab, snug_error *err)
{
    snug_model *m = NULL;
    snug_kvcache kv = {0};
    snug_block_pool pool = {0};
    snug_block_table tb = {0};
    bool ok = false;
    snug_model_opts mo = {.shape = {n, 1, n, threads}, .isa = -1};
    if (snug_model_create(&ck->config, w, &mo, &m, err) != SNUG_OK) goto done;
    const snug_model_dims *d = snug_model_get_dims(m);
    int32_t n_blocks = (n + BLOCK - 1) / BLOCK;
    snug_kv_shape ks = {d->n_layers, d->n_kv_heads, d->head_dim, BLOCK, SNUG_DTYPE_BF16};
    if (snug_kvcache_create(&ks, n_blocks, snug_model_pool(m), &kv, err) != SNUG_OK ||
        snug_block_pool_init(&pool, n_blocks, BLOCK, false, err) != SNUG_OK ||
        snug_block_table_init(&tb, n, BLOCK, err) != SNUG_OK)
        goto done;
    if (!snug_block_table_grow(&tb, &pool, n, BLOCK)) goto done;
    snug_step_seq seq = {n, 0, tb.ids, tb.n, SNUG_LOGITS_ALL, NULL, 0};
    snug_step step = {tokens, n, &seq, 1, 0};
    const float *lg;
    int32_t rows;
    if (snug_model_forward(m, &kv, &step, &lg, &rows, err) != SNUG_OK) goto done;
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * (size_t)vocab, lg + (size_t)i * (size_t)d->vocab_rows, (size_t)vocab * sizeof(float));
    ok = true;
done:
    if (tb.ids) snug_block_table_release(&tb, &pool);
    snug_block_table_free(&tb);
    snug_block_pool_free(&pool);
    snug_kvcache_free(&kv);
    snug_model_free(m);
    return ok;
}

/* The worst relative RMS difference between the products of bf16 weights
 * wb and quantized wq for the matrices of layer 0 and the embedding, 8 rows
 * of a fixed x each. */
static double products_error(const snug_weights *wb, const snug_weights *wq)
{
    static const char *const names[] = {"layers.0.qkv", "layers.0.o_proj", "layers.0.gate_up", "layers.0.down_proj",
                                        "embed_tokens"};
    enum { ROWS = 8 };
    snug_error err = {0};
    snug_kernels k;
    if (snug_kernels_init(&k, snug_isa_detect(), &err) != SNUG_OK) return 1e9;
    double worst = 0;
    for (size_t j = 0; j < sizeof names / sizeof names[0]; j++) {
        int32_t i = snug_weights_find(wb, names[j]);
        if (i < 0 || !wb->table.params[i].packed) continue;
        const snug_param *pb = &wb->table.params[i], *pq = &wq->table.params[i];
        if (pq->split) continue; /* (a quantizing load never splits) */
        snug_linear lb = {pb->dtype, pb->rows, pb->cols, snug_weights_data(wb, i)};
        snug_linear lq = {pq->dtype, pq->rows, pq->cols, snug_weights_data(wq, i)};
        size_t nx = (size_t)ROWS * (size_t)pb->cols, ny = (size_t)ROWS * (size_t)pb->rows;
        float *x = malloc(nx * sizeof(float)), *yb = malloc(ny * sizeof(float)), *yq = malloc(ny * sizeof(float));
        size_t sb = (snug_matmul_scratch_bytes(1, ROWS, pb->cols) + 63) / 64 * 64;
        void *scratch = aligned_alloc(64, sb);
        if (!x || !yb || !yq || !scratch) return 1e9;
        for (size_t e = 0; e < nx; e++) x[e] = sinf((float)e * 1.7f) * cosf((float)e * 0.31f);
        snug_matmul(&k, yb, x, ROWS, &lb, scratch, NULL);
        snug_matmul(&k, yq, x, ROWS, &lq, scratch, NULL);
        double e2 = 0, s2 = 0;
        for (size_t e = 0; e < ny; e++) e2 += ((double)yq[e] - yb[e]) * ((double)yq[e] - yb[e]), s2 += (double)yb[e] * yb[e];
        worst = fmax(worst, sqrt(e2 / s2));
        free(x);
        free(yb);
        free(yq);
        free(scratch);
    }
    return worst;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: build/bench/quantq DIR [THREADS] [--check]\n");
        return 2;
    }
    int32_t threads = argc > 2 && argv[2][0] != '-' ? atoi(argv[2]) : snug_cpu_count();
    bool check = argc > 2 && strcmp(argv[argc - 1], "--check") == 0;
    static const struct {
        snug_dtype quant;
        double prod_max, rms_max, top1_min; /* the stated bounds */
    } cases[] = {{SNUG_DTYPE_Q8_0, 0.010, 0.10, 0.70}, {SNUG_DTYPE_Q6_K, 0.025, 0.28, 0.40},
                 {SNUG_DTYPE_Q4_K, 0.10, 0.90, 0.02}, {SNUG_DTYPE_Q4_0, 0.12, 0.95, 0.02}};
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    snug_weights *wb = NULL;
    if (snug_checkpoint_open(argv[1], &ck, &err) != SNUG_OK || !(wb = load_as(ck, SNUG_DTYPE_NONE, threads, &err))) {
        fprintf(stderr, "bench/quantq: %s\n", err.msg);
        return 1;
    }
    int32_t vocab = (int32_t)ck->config.vocab_size;
    int32_t tokens[N_TOKENS];
    uint32_t seed = 12345;
    for (int i = 0; i < N_TOKENS; i++) {
        seed = seed * 1664525u + 1013904223u;
        tokens[i] = (int32_t)((seed >> 8) % (uint32_t)vocab);
    }
    float *ref = malloc(sizeof(float) * N_TOKENS * (size_t)vocab), *got = malloc(sizeof(float) * N_TOKENS * (size_t)vocab);
    if (!ref || !got || !logits_of(ck, wb, threads, tokens, N_TOKENS, ref, vocab, &err)) {
        fprintf(stderr, "bench/quantq: bf16: %s\n", err.msg);
        return 1;
    }
    double ref2 = 0;
    for (size_t i = 0; i < (size_t)N_TOKENS * (size_t)vocab; i++) ref2 += (double)ref[i] * ref[i];
    int bad = 0;
    printf("bench/quantq: %s, %d positions, against bf16 (bounds after each figure)\n%-6s %20s %22s %20s\n", argv[1],
           N_TOKENS, "format", "products RMS err", "logits RMS err", "top-1 agree");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snug_weights *wq = load_as(ck, cases[c].quant, threads, &err);
        double prod = wq ? products_error(wb, wq) : 1e9;
        if (!wq || !logits_of(ck, wq, threads, tokens, N_TOKENS, got, vocab, &err)) {
            fprintf(stderr, "bench/quantq: %s: %s\n", snug_dtype_name(cases[c].quant), err.msg);
            return 1;
        }
        snug_weights_free(wq);
        double e2 = 0;
        int agree = 0;
        for (int t = 0; t < N_TOKENS; t++) {
            int a = 0, b = 0;
            for (int i = 0; i < vocab; i++) {
                double dv = (double)got[(size_t)t * vocab + i] - ref[(size_t)t * vocab + i];
                e2 += dv * dv;
                if (ref[(size_t)t * vocab + i] > ref[(size_t)t * vocab + a]) a = i;
                if (got[(size_t)t * vocab + i] > got[(size_t)t * vocab + b]) b = i;
            }
            agree += a == b;
        }
        double rms = sqrt(e2 / ref2), top1 = (double)agree / N_TOKENS;
        bool in = prod <= cases[c].prod_max && rms <= cases[c].rms_max && top1 >= cases[c].top1_min;
        bad += !in;
        printf("%-6s %12.4f (%5.3f) %14.4f (%5.2f) %12.3f (%5.2f)%s\n", snug_dtype_name(cases[c].quant), prod,
               cases[c].prod_max, rms, cases[c].rms_max, top1, cases[c].top1_min, in ? "" : "  OUTSIDE");
    }
    free(ref);
    free(got);
    snug_weights_free(wb);
    snug_checkpoint_close(ck);
    return check && bad ? 1 : 0;
}
