/*
 * test_model.c: the forward pass against the float64 reference
 * (tests/support/ref_model.c, which shares no code with src/) on synthetic
 * random-weight models of each feature, against llama2.c's run.c on the
 * bundled stories260K, and batching, chunked prefill and the paged cache
 * against running each sequence alone in one go.
 */
#include "engine/blocks.h"
#include "formats/checkpoint.h"
#include "formats/safetensors.h"
#include "base/mem.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "convert/mkmodel.h"
#include "convert/to_gguf.h"
#include "formats/st_writer.h"
#include "base/json.h"
#include "model/model.h"
#include "support/ref_model.h"
#include "base/dtype.h"
#include "test.h"

#include <ftw.h>
#include <pthread.h>
#include <unistd.h>

enum { MAX_TOKENS = 64, BLOCK = 4, N_BLOCKS = 96 };
#define WEIGHT_STD 0.1

/* A loaded model with its cache and a pool of its blocks. */
typedef struct rig {
    snug_checkpoint *ck;
    snug_weights *w;
    snug_model *m;
    snug_kvcache kv;
    snug_block_pool pool;
} rig;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_tree(const char *dir) { nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS); }

/* A small Llama config that tests then change. */
static snug_model_config small_config(void)
{
    snug_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = SNUG_ARCH_LLAMA;
    snprintf(c.architecture, sizeof c.architecture, "LlamaForCausalLM");
    c.hidden_size = 96, c.intermediate_size = 136, c.n_layers = 2, c.n_heads = 6, c.n_kv_heads = 2;
    c.head_dim = 16, c.vocab_size = 301, c.max_position_embeddings = 256;
    c.rms_norm_eps = 1e-5, c.rope_theta = 10000.0;
    c.rope_scaling.type = SNUG_ROPE_DEFAULT, c.rope_scaling.factor = 1.0;
    c.bos_token_id = 1, c.n_eos = 1, c.eos_token_ids[0] = 2;
    c.dtype = SNUG_DTYPE_F32;
    return c;
}

/* Opens dir's model with config instead of its own (NULL: its own), its
 * weights at wdt (SNUG_DTYPE_NONE: the checkpoint's) and float matrices
 * quantized to quant (or not: NONE), and the given cache dtype and step
 * shape. */
static bool rig_open_blocks(rig *r, const char *dir, const snug_model_config *config, snug_dtype wdt,
                            snug_dtype quant, snug_dtype kv_dtype, int32_t n_tokens_max, int32_t n_seqs_max,
                            int32_t n_logits_max, int32_t n_blocks, snug_error *err);

static bool rig_open_as(rig *r, const char *dir, const snug_model_config *config, snug_dtype wdt, snug_dtype quant,
                        snug_dtype kv_dtype, int32_t n_tokens_max, int32_t n_seqs_max, int32_t n_logits_max,
                        snug_error *err)
{
    return rig_open_blocks(r, dir, config, wdt, quant, kv_dtype, n_tokens_max, n_seqs_max, n_logits_max, N_BLOCKS,
                           err);
}

/* rig_open_as with a cache of n_blocks blocks of BLOCK positions. */
static bool rig_open_blocks(rig *r, const char *dir, const snug_model_config *config, snug_dtype wdt,
                            snug_dtype quant, snug_dtype kv_dtype, int32_t n_tokens_max, int32_t n_seqs_max,
                            int32_t n_logits_max, int32_t n_blocks, snug_error *err)
{
    memset(r, 0, sizeof *r);
    snug_load_opts lo = {.tp = 1, .dtype = wdt, .quant = quant};
    if (snug_checkpoint_open(dir, &r->ck, err) != SNUG_OK) return false;
    if (config) r->ck->config = *config;
    if (snug_weights_load(r->ck, &lo, &r->w, NULL, err) != SNUG_OK) return false;
    snug_model_opts mo = {.shape = {n_tokens_max, n_seqs_max, n_logits_max, 2}, .isa = -1};
    if (snug_model_create(&r->ck->config, r->w, &mo, &r->m, err) != SNUG_OK) return false;
    const snug_model_dims *d = snug_model_get_dims(r->m);
    snug_kv_shape ks = {d->n_layers, d->n_kv_heads, d->head_dim, BLOCK, kv_dtype};
    if (snug_kvcache_create(&ks, n_blocks, snug_model_pool(r->m), &r->kv, err) != SNUG_OK) return false;
    return snug_block_pool_init(&r->pool, n_blocks, BLOCK, false, err) == SNUG_OK;
}

/* Opens dir's model as the checkpoint holds it. */
static bool rig_open(rig *r, const char *dir, snug_dtype kv_dtype, int32_t n_tokens_max, int32_t n_seqs_max,
                     int32_t n_logits_max, snug_error *err)
{
    return rig_open_as(r, dir, NULL, SNUG_DTYPE_NONE, SNUG_DTYPE_NONE, kv_dtype, n_tokens_max, n_seqs_max,
                       n_logits_max, err);
}

static void rig_close(rig *r)
{
    snug_block_pool_free(&r->pool);
    snug_kvcache_free(&r->kv);
    snug_model_free(r->m);
    snug_weights_free(r->w);
    snug_checkpoint_close(r->ck);
}

/* Writes a synthetic checkpoint of cfg into a new temporary directory. */
static bool make_model(const snug_model_config *cfg, snug_dtype dt, char *dir, snug_error *err)
{
    snprintf(dir, 64, "%s/snug-test-model-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return false;
    snug_model_config c = *cfg;
    c.dtype = dt;
    /* Weights larger than mkmodel's default 0.02 so that attention is
     * peaked (scores of a few units): with nearly uniform attention a wrong
     * rotary embedding or cache read would hide inside the bf16 tolerance. */
    snug_mkmodel_opts o = {.dtype = dt, .n_shards = 1, .seed = 7, .n_threads = 1, .std = WEIGHT_STD};
    return snug_mkmodel(&c, &o, dir, NULL, err) == SNUG_OK;
}

/* Deterministic token ids in [0, vocab). */
static void fill_tokens(int32_t *t, int n, int vocab, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % (uint32_t)vocab);
    }
}

/* Runs tokens [from, n) of one sequence in chunks of `chunk` through the
 * model with every row's logits, the table holding [0, from) already;
 * copies the real-vocabulary logits of position p into out + p vocab. The
 * table is left holding the blocks. */
static bool run_chunks_from(rig *r, snug_block_table *table, const int32_t *tokens, int from, int n, int chunk,
                            float *out, snug_error *err)
{
    const snug_model_dims *d = snug_model_get_dims(r->m);
    for (int p = from; p < n; p += chunk) {
        int len = SNUG_MIN(chunk, n - p);
        if (!snug_block_table_grow(table, &r->pool, p + len, BLOCK)) return false;
        snug_step_seq seq = {len, p, table->ids, table->n, SNUG_LOGITS_ALL, NULL, 0};
        snug_step step = {tokens + p, len, &seq, 1, 0};
        const float *lg;
        int32_t rows;
        if (snug_model_forward(r->m, &r->kv, &step, &lg, &rows, err) != SNUG_OK || rows != len) return false;
        for (int i = 0; i < len; i++)
            memcpy(out + (size_t)(p + i) * (size_t)d->vocab_len, lg + (size_t)i * (size_t)d->vocab_rows,
                   (size_t)d->vocab_len * sizeof(float));
    }
    return true;
}

/* Runs tokens [0, n) of one sequence in chunks of `chunk` through the
 * model with every row's logits; copies the real-vocabulary logits into
 * out (n x vocab). The table must be empty; it is left holding the blocks. */
static bool run_chunks(rig *r, snug_block_table *table, const int32_t *tokens, int n, int chunk, float *out,
                       snug_error *err)
{
    return run_chunks_from(r, table, tokens, 0, n, chunk, out, err);
}

/* max |a - ref| / max |ref| over n values. */
static double rel_err(const float *a, const double *ref, size_t n)
{
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - ref[i]));
        scale = fmax(scale, fabs(ref[i]));
    }
    return scale > 0 ? diff / scale : diff;
}

/* Checks cfg's model (weights dt, cache kv_dt) against the reference on a
 * 40-token sequence, prefilled in chunks of 7; tolerance tol. */
static void check_against_reference(const char *what, const snug_model_config *cfg, snug_dtype dt,
                                    snug_dtype kv_dt, double tol)
{
    snug_error err = {0};
    char dir[64];
    rig r;
    snug_block_table table = {0};
    ref_model *ref = NULL;
    enum { N = 40 };
    int32_t tokens[N];
    float *got = malloc((size_t)N * (size_t)cfg->vocab_size * sizeof(float));
    double *want = malloc((size_t)N * (size_t)cfg->vocab_size * sizeof(double));
    fill_tokens(tokens, N, cfg->vocab_size, 11);
    bool ok = make_model(cfg, dt, dir, &err);
    CHECK(ok, "%s: mkmodel: %s", what, err.msg);
    if (ok) ok = rig_open(&r, dir, kv_dt, 16, 4, 16, &err);
    CHECK(ok, "%s: open: %s", what, err.msg);
    if (ok) ok = snug_block_table_init(&table, MAX_TOKENS, BLOCK, &err) == SNUG_OK;
    if (ok) ok = run_chunks(&r, &table, tokens, N, 7, got, &err);
    CHECK(ok, "%s: forward: %s", what, err.msg);
    ref = ok ? ref_model_load(dir) : NULL;
    CHECK(!ok || ref, "%s: reference load", what);
    if (ref && cfg->rope_scaling.type == SNUG_ROPE_LONGROPE) /* snug picks by the length it runs: the config's */
        ref_model_set_rope_long(ref, cfg->max_position_embeddings > cfg->rope_scaling.original_max_position_embeddings);
    if (ref) {
        CHECK(ref_model_forward(ref, tokens, N, want) == 0, "%s: reference forward", what);
        double e = rel_err(got, want, (size_t)N * (size_t)cfg->vocab_size);
        printf("  %-44s max relative error %.3g (tolerance %.0e, %s)\n", what, e, tol,
               snug_isa_name(snug_model_isa(r.m)));
        CHECK(e <= tol, "%s: max relative error %.3g > %.0e", what, e, tol);
    }
    ref_model_free(ref);
    if (table.ids) snug_block_table_release(&table, &r.pool);
    snug_block_table_free(&table);
    rig_close(&r);
    rm_tree(dir);
    free(got);
    free(want);
}

static void test_gqa_f32(void)
{
    snug_model_config c = small_config();
    check_against_reference("GQA (6 heads, 2 kv), f32 weights, f32 cache", &c, SNUG_DTYPE_F32,
                            SNUG_DTYPE_F32, 1e-4);
}

/* A step of more tokens than the MLP takes at a time (MLP_ROWS, 512) runs
 * it in parts (here 367, 367 and 366 rows): every position's logits as the
 * reference's, and as the same tokens in steps of one part each. */
static void test_mlp_parts(void)
{
    snug_error err = {0};
    snug_model_config c = small_config();
    c.max_position_embeddings = 1200;
    enum { N = 1100, PART = 367 };
    char dir[64] = "";
    rig r;
    memset(&r, 0, sizeof r);
    snug_block_table table = {0};
    ref_model *ref = NULL;
    int32_t *tokens = malloc(N * sizeof *tokens);
    float *got = malloc((size_t)N * (size_t)c.vocab_size * sizeof(float));
    float *parts = malloc((size_t)N * (size_t)c.vocab_size * sizeof(float));
    double *want = malloc((size_t)N * (size_t)c.vocab_size * sizeof(double));
    fill_tokens(tokens, N, c.vocab_size, 23);
    bool ok = make_model(&c, SNUG_DTYPE_F32, dir, &err) &&
              rig_open_blocks(&r, dir, NULL, SNUG_DTYPE_NONE, SNUG_DTYPE_NONE, SNUG_DTYPE_F32, N, 1, N,
                              N / BLOCK + 1, &err) &&
              snug_block_table_init(&table, N, BLOCK, &err) == SNUG_OK;
    CHECK(ok, "setup: %s", err.msg);
    if (ok) ok = run_chunks(&r, &table, tokens, N, N, got, &err);
    CHECK(ok, "one step of %d tokens: %s", N, err.msg);
    if (ok) {
        snug_block_table_release(&table, &r.pool);
        ok = run_chunks(&r, &table, tokens, N, PART, parts, &err);
        CHECK(ok, "steps of %d: %s", PART, err.msg);
    }
    ref = ok ? ref_model_load(dir) : NULL;
    CHECK(!ok || ref, "reference load");
    if (ref) {
        CHECK(ref_model_forward(ref, tokens, N, want) == 0, "reference forward");
        double e = rel_err(got, want, (size_t)N * (size_t)c.vocab_size);
        double diff = 0, scale = 0;
        for (size_t i = 0; i < (size_t)N * (size_t)c.vocab_size; i++)
            diff = fmax(diff, fabs((double)got[i] - parts[i])), scale = fmax(scale, fabs((double)parts[i]));
        printf("  %d tokens in one step (the MLP in 3 parts): max relative error %.3g against the reference, "
               "%.3g against steps of %d\n", N, e, diff / scale, PART);
        CHECK(e <= 1e-4, "max relative error %.3g > 1e-4", e);
        CHECK(diff / scale <= 1e-5, "against steps of %d: %.3g > 1e-5", PART, diff / scale);
    }
    ref_model_free(ref);
    if (table.ids) snug_block_table_release(&table, &r.pool);
    snug_block_table_free(&table);
    rig_close(&r);
    rm_tree(dir);
    free(tokens), free(got), free(parts), free(want);
}

static void test_gqa_bf16(void)
{
    snug_model_config c = small_config();
    check_against_reference("GQA, bf16 weights, bf16 cache", &c, SNUG_DTYPE_BF16, SNUG_DTYPE_BF16, 2e-2);
    check_against_reference("GQA, f16 weights, f16 cache", &c, SNUG_DTYPE_F16, SNUG_DTYPE_F16, 2e-2);
}

static void test_qwen2_like(void)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_QWEN2;
    snprintf(c.architecture, sizeof c.architecture, "Qwen2ForCausalLM");
    c.qkv_bias = true, c.tie_word_embeddings = true, c.rms_norm_eps = 1e-6, c.rope_theta = 1e6;
    check_against_reference("Qwen2-like (q/k/v biases, tied embeddings)", &c, SNUG_DTYPE_F32,
                            SNUG_DTYPE_F32, 1e-4);
    check_against_reference("Qwen2-like, bf16", &c, SNUG_DTYPE_BF16, SNUG_DTYPE_BF16, 2e-2);
}

static void test_llama3_rope(void)
{
    snug_model_config c = small_config();
    c.rope_theta = 500000.0;
    /* original_max_position_embeddings small so that all three bands of
     * the llama3 scaling (scaled, smoothed, kept) are used at head_dim 16. */
    c.rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_LLAMA3, .factor = 8.0, .low_freq_factor = 1.0,
                                         .high_freq_factor = 4.0, .original_max_position_embeddings = 64};
    check_against_reference("llama3 rope scaling", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
    c.rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_LINEAR, .factor = 4.0};
    check_against_reference("linear rope scaling", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
}

/* Per-frequency rotary factors (a GGUF file's rope_freqs.weight), computed
 * as llama.cpp's converter does from Llama 3.1's scaling, give the logits
 * the llama3 rope_scaling of config.json gives (1e-5 of their largest). */
static void test_rope_freq_factors(void)
{
    snug_model_config c = small_config();
    c.rope_theta = 500000.0;
    c.rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_LLAMA3, .factor = 8.0, .low_freq_factor = 1.0,
                                         .high_freq_factor = 4.0, .original_max_position_embeddings = 64};
    char dir[64];
    snug_error err = {0};
    CHECK(make_model(&c, SNUG_DTYPE_F32, dir, &err), "mkmodel: %s", err.msg);
    snug_model_config f = c;
    f.rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_DEFAULT, .factor = 1.0};
    f.n_rope_freq_factors = c.head_dim / 2;
    int kinds[3] = {0};
    for (int32_t i = 0; i < f.n_rope_freq_factors; i++) {
        double freq = 1.0 / pow(c.rope_theta, (double)(2 * i) / c.head_dim), wavelen = 2 * M_PI / freq;
        double s = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
        int kind = wavelen < 64.0 / 4.0 ? 0 : wavelen > 64.0 ? 2 : 1;
        kinds[kind]++;
        f.rope_freq_factors[i] = kind == 0 ? 1.0f : kind == 2 ? 8.0f : (float)(1.0 / ((1 - s) / 8.0 + s));
    }
    CHECK(kinds[0] && kinds[1] && kinds[2], "every band: %d kept, %d smoothed, %d scaled", kinds[0], kinds[1], kinds[2]);
    enum { N = 40 };
    int32_t tokens[N];
    fill_tokens(tokens, N, c.vocab_size, 99);
    float *a = malloc(sizeof(float) * N * 301), *b = malloc(sizeof(float) * N * 301);
    rig ra, rb;
    memset(&ra, 0, sizeof ra), memset(&rb, 0, sizeof rb);
    snug_block_table ta = {0}, tb = {0};
    bool ok = rig_open(&ra, dir, SNUG_DTYPE_F32, N, 1, N, &err) && snug_block_table_init(&ta, N, BLOCK, &err) == SNUG_OK &&
              run_chunks(&ra, &ta, tokens, N, N, a, &err);
    CHECK(ok, "llama3 config: %s", err.msg);
    ok = ok && rig_open_as(&rb, dir, &f, SNUG_DTYPE_NONE, SNUG_DTYPE_NONE, SNUG_DTYPE_F32, N, 1, N, &err) &&
         snug_block_table_init(&tb, N, BLOCK, &err) == SNUG_OK && run_chunks(&rb, &tb, tokens, N, N, b, &err);
    CHECK(ok, "factors: %s", err.msg);
    double diff = 0, mx = 0;
    for (int i = 0; ok && i < N * c.vocab_size; i++) diff = fmax(diff, fabs(a[i] - b[i])), mx = fmax(mx, fabs(a[i]));
    printf("  per-frequency rotary factors vs llama3 rope_scaling: max logit difference %.3g of %.3g (tolerance "
           "1e-5 of it)\n", diff, mx);
    CHECK(ok && diff <= 1e-5 * mx, "factors and llama3 scaling differ by %g", diff);
    if (ta.ids) snug_block_table_release(&ta, &ra.pool);
    if (tb.ids) snug_block_table_release(&tb, &rb.pool);
    snug_block_table_free(&ta);
    snug_block_table_free(&tb);
    rig_close(&ra);
    rig_close(&rb);
    free(a);
    free(b);
    rm_tree(dir);
}

static void test_sliding_window(void)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_MISTRAL;
    snprintf(c.architecture, sizeof c.architecture, "MistralForCausalLM");
    c.sliding_window = 6; /* 40 tokens: most queries lose keys */
    check_against_reference("Mistral-like, sliding window 6", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
}

static void test_head_dim(void)
{
    snug_model_config c = small_config();
    c.hidden_size = 80, c.n_heads = 4, c.n_kv_heads = 1, c.head_dim = 32; /* q_dim 128 != hidden 80 */
    c.o_bias = true, c.qkv_bias = true;                                    /* Llama attention_bias */
    check_against_reference("head_dim 32 != hidden/heads 20, MQA, biases", &c, SNUG_DTYPE_F32,
                            SNUG_DTYPE_F32, 1e-4);
}

/* Max |a - b| over n floats. */
/* Qwen3: an RMSNorm over each q and k head before rope, head_dim 32 beside
 * hidden 96 / 6 heads, no biases. */
static void test_qwen3_like(void)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_QWEN3, c.head_dim = 32, c.rms_norm_eps = 1e-6;
    snprintf(c.architecture, sizeof c.architecture, "Qwen3ForCausalLM");
    check_against_reference("Qwen3 (q/k norms, head_dim 32), f32", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
    check_against_reference("Qwen3 (q/k norms, head_dim 32), bf16", &c, SNUG_DTYPE_BF16, SNUG_DTYPE_BF16, 2e-2);
}

/* A Phi-3 with LongRoPE's factors set (short ones up to position 64, long
 * ones beyond): original 64 of 256 positions runs on the long factors and
 * the derived attention factor; original 256 on the short ones, with an
 * attention factor given. */
static snug_model_config phi3_config(int64_t original, double attention_factor)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_PHI3, c.n_rot = 8;
    snprintf(c.architecture, sizeof c.architecture, "Phi3ForCausalLM");
    snug_rope_scaling *lr = &c.rope_scaling;
    *lr = (snug_rope_scaling){.type = SNUG_ROPE_LONGROPE, .factor = 1, .n_factors = 4,
                              .original_max_position_embeddings = original, .attention_factor = attention_factor};
    for (int i = 0; i < 4; i++) lr->short_factor[i] = 1.0f + 0.5f * (float)i, lr->long_factor[i] = 2.0f + 3.0f * (float)i;
    return c;
}

/* Phi-3: fused qkv_proj and gate_up_proj, rope on 8 of 16 dimensions,
 * LongRoPE both ways. */
static void test_phi3_like(void)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_PHI3, c.n_rot = 8;
    snprintf(c.architecture, sizeof c.architecture, "Phi3ForCausalLM");
    check_against_reference("Phi-3 (fused, rope on 8 of 16), f32", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
    c = phi3_config(64, 0);
    check_against_reference("Phi-3, LongRoPE long factors (64 of 256)", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
    c = phi3_config(256, 0.9);
    check_against_reference("Phi-3, LongRoPE short factors, factor 0.9", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
}

/* A small Gemma 3: head_dim 32 beside hidden 96 / 6 heads, four layers of
 * which 0, 1 and 3 slide (pattern 3) through a window of 5 (every 40-token
 * run crosses it) and rotate with their own base 10000 beside the full
 * layer's 1e6, scores / sqrt(24) (query_pre_attn_scalar apart from
 * head_dim), norms of 1 + w around attention and the MLP, GELU, tied
 * embeddings scaled by sqrt(96). */
static snug_model_config gemma3_config(void)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_GEMMA3, c.n_layers = 4, c.head_dim = 32, c.rms_norm_eps = 1e-6;
    snprintf(c.architecture, sizeof c.architecture, "Gemma3ForCausalLM");
    c.rope_theta = 1e6, c.rope_local_theta = 10000.0, c.query_pre_attn_scalar = 24.0;
    c.norm_plus_one = true, c.tie_word_embeddings = true, c.sliding_window = 5;
    snug_config_set_sliding(&c, 3);
    return c;
}

/* Gemma 3 against the reference. f32 at 1e-4 and half weights and cache at
 * 2e-2, as the other families: f32 differs from the float64 reference only
 * by float rounding (1e-6 seen), bf16/f16 by rounding every key and value
 * the cache holds to 8 or 11 bits (a few 1e-3 seen). Those 2e-2 hide the
 * embedding scale's cast to the weights' type (sqrt(96) = 9.7979590 as
 * 9.8125 in bf16, 9.796875 in f16), so f16 weights run once more with an
 * f32 cache, at 1e-5: every product then is f32 over weights held exactly
 * (9e-7 seen), while an uncast scale moves the logits by 1.2e-4. (bf16
 * weights cannot be held to that: where vdpbf16ps measures faster, the
 * kernels round the activations to bf16.) */
static void test_gemma3_like(void)
{
    snug_model_config c = gemma3_config();
    check_against_reference("Gemma 3 (window 5 on 3 of 4), tied, f32", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
    check_against_reference("Gemma 3, tied, bf16", &c, SNUG_DTYPE_BF16, SNUG_DTYPE_BF16, 2e-2);
    check_against_reference("Gemma 3, tied, f16", &c, SNUG_DTYPE_F16, SNUG_DTYPE_F16, 2e-2);
    check_against_reference("Gemma 3, f16 weights, f32 cache", &c, SNUG_DTYPE_F16, SNUG_DTYPE_F32, 1e-5);
    c.tie_word_embeddings = false;
    check_against_reference("Gemma 3, own lm_head, f32", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
    /* layers as layer_types may name them, in no pattern: 1 and 2 slide */
    c = gemma3_config();
    memset(c.sliding, 0, sizeof c.sliding);
    c.sliding[0] = (uint8_t)(1u << 1 | 1u << 2);
    check_against_reference("Gemma 3, layers 1 and 2 of 4 sliding, f32", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
    /* linear scaling turns the full layers only; the sliding ones keep
     * their base unscaled */
    c = gemma3_config();
    c.rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_LINEAR, .factor = 4.0};
    check_against_reference("Gemma 3, linear rope scaling 4 (full layers)", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
}

/* A small Gemma 2: Gemma 3's shape without q/k norms and with one rope
 * base, every other layer sliding (0 and 2 of 4) through a window of 5,
 * attention scores soft-capped at 3 and logits at 2 (small caps, so that
 * they bite on random weights; Gemma 2's own are 50 and 30). */
static snug_model_config gemma2_config(void)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_GEMMA2, c.n_layers = 4, c.head_dim = 32, c.rms_norm_eps = 1e-6;
    snprintf(c.architecture, sizeof c.architecture, "Gemma2ForCausalLM");
    c.rope_theta = 10000.0, c.query_pre_attn_scalar = 24.0;
    c.norm_plus_one = true, c.tie_word_embeddings = true, c.sliding_window = 5;
    c.attn_softcap = 3.0, c.final_softcap = 2.0;
    snug_config_set_sliding(&c, 2);
    return c;
}

/* Gemma 2 against the reference, f32 and bf16 as the other families, with
 * its soft-caps and without (over ranks: test_tensor_parallel). */
static void test_gemma2_like(void)
{
    snug_model_config c = gemma2_config();
    check_against_reference("Gemma 2 (window 5 on 2 of 4, soft-caps 3 and 2), f32", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32,
                            1e-4);
    check_against_reference("Gemma 2, bf16", &c, SNUG_DTYPE_BF16, SNUG_DTYPE_BF16, 2e-2);
    c.attn_softcap = c.final_softcap = 0;
    check_against_reference("Gemma 2 without soft-caps, f32", &c, SNUG_DTYPE_F32, SNUG_DTYPE_F32, 1e-4);
}

/* The model writer make_model uses (mkmodel, snug_config_to_json) writes
 * what makes a Gemma 3 as the reference reads it (layer_types,
 * rope_local_base_freq, query_pre_attn_scalar, hidden_activation,
 * torch_dtype for the embedding scale), and its norm weights as offsets
 * from 1, near 0. */
static void test_gemma3_writer(void)
{
    snug_model_config c = gemma3_config();
    memset(c.sliding, 0, sizeof c.sliding);
    c.sliding[0] = (uint8_t)(1u << 0 | 1u << 2); /* 0 and 2 slide, 1 and 3 not: no pattern */
    snug_error err = {0};
    char dir[64], path[128];
    bool ok = make_model(&c, SNUG_DTYPE_BF16, dir, &err);
    CHECK(ok, "mkmodel: %s", err.msg);
    if (!ok) return;
    snprintf(path, sizeof path, "%s/config.json", dir);
    ref_config rc;
    ok = ref_config_load(path, &rc) == 0;
    CHECK(ok, "the reference reads %s", path);
    if (ok) {
        bool layers = rc.n_layers == 4;
        for (int l = 0; l < 4; l++) layers &= rc.layer_sliding[l] == (l == 0 || l == 2);
        CHECK(layers && rc.sliding_window == 5, "layer_types: %d layers, window %d", rc.n_layers, rc.sliding_window);
        CHECK(rc.rope_local_theta == 10000.0 && rc.rope_theta == 1e6, "rope bases %g (local), %g", rc.rope_local_theta,
              rc.rope_theta);
        CHECK(rc.query_pre_attn_scalar == 24.0 && rc.head_dim == 32, "query_pre_attn_scalar %g, head_dim %d",
              rc.query_pre_attn_scalar, rc.head_dim);
        CHECK(rc.act == REF_ACT_GELU_TANH && rc.norm_plus_one && rc.sandwich_norms && rc.qk_norm,
              "gelu %d, 1 + w %d, sandwich %d, q/k norms %d", (int)rc.act, (int)rc.norm_plus_one,
              (int)rc.sandwich_norms, (int)rc.qk_norm);
        /* sqrt(96) = 9.7979590 in float32; bfloat16 steps of 2^-4 there: 9.8125 */
        CHECK(rc.embed_scale == 9.8125 && rc.tie_word_embeddings, "embed_scale %.9g (bfloat16), tied %d",
              rc.embed_scale, (int)rc.tie_word_embeddings);
    }
    /* every norm (input, post-attention, pre- and post-feedforward, q, k,
     * final) near 0: mkmodel's 0.02 spread around 0, not around 1 */
    snug_st_file *f = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ok = snug_st_open(path, &f, &err) == SNUG_OK;
    CHECK(ok, "open %s: %s", path, err.msg);
    int n_norms = 0;
    double worst = 0;
    for (int64_t i = 0; ok && i < f->n_tensors; i++) {
        const snug_st_tensor *t = &f->tensors[i];
        size_t len = strlen(t->name);
        if (len < 11 || strcmp(t->name + len - 11, "norm.weight") != 0) continue;
        uint16_t v[96];
        size_t n = (size_t)snug_st_numel(t);
        ok = t->dtype == SNUG_DTYPE_BF16 && n <= 96 && snug_st_read(f, t, 0, v, n * 2, &err) == SNUG_OK;
        CHECK(ok, "%s: %s", t->name, err.msg);
        for (size_t j = 0; ok && j < n; j++) worst = fmax(worst, fabs((double)snug_bf16_to_f32(v[j])));
        n_norms++;
    }
    printf("  mkmodel's Gemma 3: %d norm weights, max |w| %.3g (offsets from 1)\n", n_norms, worst);
    CHECK(n_norms == 4 * 6 + 1 && worst < 0.2, "%d norms, max |w| %.3g", n_norms, worst);
    snug_st_close(f);
    rm_tree(dir);
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

/* Four sequences of different lengths, run (a) each alone (sequence 0 one
 * token per step, the others in one step each) and (b) together in shared
 * steps: the first two thirds of each prompt in chunks of 5 (sequence 2's
 * chunks asking for no logits but the last, sequence 1's for the last row
 * only, the others for every row), then one token per step, as decoding
 * does, with sequence 3 starting on the blocks sequence 1 frees. Blocks of
 * 4 positions, so every sequence crosses block boundaries. Every logit row
 * (b) produces equals (a) within 1e-5 of the row scale. */
static void test_batch_chunks_blocks(void)
{
    snug_error err = {0};
    snug_model_config c = small_config();
    char dir[64];
    rig r;
    enum { NS = 4 };
    const int len[NS] = {23, 9, 30, 17};
    int32_t tok[NS][32];
    float *alone[NS] = {0}, *got[NS] = {0};
    bool have[NS][32];
    memset(have, 0, sizeof have);
    snug_block_table tb[NS] = {{0}};
    bool ok = make_model(&c, SNUG_DTYPE_F32, dir, &err) && rig_open(&r, dir, SNUG_DTYPE_F32, 40, 4, 40, &err);
    CHECK(ok, "setup: %s", err.msg);
    const snug_model_dims *d = ok ? snug_model_get_dims(r.m) : NULL;
    size_t V = (size_t)c.vocab_size;
    for (int s = 0; s < NS && ok; s++) {
        fill_tokens(tok[s], len[s], c.vocab_size, 100u + (uint32_t)s);
        alone[s] = calloc((size_t)len[s] * V, sizeof(float));
        got[s] = calloc((size_t)len[s] * V, sizeof(float));
        ok = snug_block_table_init(&tb[s], MAX_TOKENS, BLOCK, &err) == SNUG_OK &&
             run_chunks(&r, &tb[s], tok[s], len[s], s == 0 ? 1 : len[s], alone[s], &err);
        snug_block_table_release(&tb[s], &r.pool);
    }
    CHECK(ok, "each alone: %s", err.msg);
    int done[NS] = {0};
    bool live[NS] = {true, true, true, false};
    int32_t step_tokens[40];
    snug_step_seq seqs[NS];
    int steps = 0, decode_steps = 0, rows_checked = 0;
    while (ok && (live[0] || live[1] || live[2] || live[3])) {
        int n = 0, ns = 0, which[NS];
        bool decoding = true;
        for (int s = 0; s < NS; s++) {
            if (!live[s]) continue;
            int prompt = len[s] * 2 / 3;
            int take = done[s] < prompt ? SNUG_MIN(5, prompt - done[s]) : 1;
            decoding &= take == 1;
            snug_logits_mode mode = SNUG_LOGITS_ALL;
            if (take == 1) mode = SNUG_LOGITS_LAST;
            else if (s == 2) mode = done[s] + take == prompt ? SNUG_LOGITS_LAST : SNUG_LOGITS_NONE;
            else if (s == 1) mode = SNUG_LOGITS_LAST;
            if (!snug_block_table_grow(&tb[s], &r.pool, done[s] + take, BLOCK)) ok = false;
            memcpy(step_tokens + n, tok[s] + done[s], (size_t)take * sizeof(int32_t));
            seqs[ns] = (snug_step_seq){take, done[s], tb[s].ids, tb[s].n, mode, NULL, 0};
            which[ns++] = s;
            n += take;
        }
        snug_step step = {step_tokens, n, seqs, ns, 0};
        const float *lg;
        int32_t rows;
        ok = ok && snug_model_forward(r.m, &r.kv, &step, &lg, &rows, &err) == SNUG_OK;
        for (int i = 0, row = 0; ok && i < ns; i++) {
            int s = which[i], nt = seqs[i].n_tokens;
            int from = seqs[i].logits == SNUG_LOGITS_ALL ? 0 : seqs[i].logits == SNUG_LOGITS_LAST ? nt - 1 : nt;
            for (int j = from; j < nt; j++, row++) {
                memcpy(got[s] + (size_t)(done[s] + j) * V, lg + (size_t)row * (size_t)d->vocab_rows, V * sizeof(float));
                have[s][done[s] + j] = true;
                rows_checked++;
            }
            done[s] += nt;
            if (done[s] == len[s]) {
                live[s] = false;
                snug_block_table_release(&tb[s], &r.pool);
                if (s == 1) live[3] = true; /* reuses sequence 1's blocks */
            }
            if (i == ns - 1) CHECK(row == rows, "step %d: %d rows, the model made %d", steps, row, rows);
        }
        steps++;
        decode_steps += decoding;
    }
    CHECK(ok, "batched: %s", err.msg);
    printf("  %d shared steps (%d of them decoding only), %d logit rows compared\n", steps, decode_steps, rows_checked);
    for (int s = 0; s < NS && ok; s++) {
        double scale = 0, e = 0;
        for (size_t i = 0; i < (size_t)len[s] * V; i++) scale = fmax(scale, fabs(alone[s][i]));
        for (int t = 0; t < len[s]; t++)
            if (have[s][t]) e = fmax(e, max_diff(got[s] + (size_t)t * V, alone[s] + (size_t)t * V, V) / scale);
        printf("  sequence %d (%2d tokens): batched vs alone max relative difference %.3g\n", s, len[s], e);
        CHECK(e <= 1e-5, "sequence %d: %.3g", s, e);
        CHECK(have[s][len[s] - 1] && have[s][len[s] * 2 / 3 - 1], "sequence %d: rows missing", s);
    }
    CHECK(!ok || r.pool.n_free == N_BLOCKS, "%d of %d blocks free at the end", r.pool.n_free, N_BLOCKS);
    for (int s = 0; s < NS; s++) {
        if (tb[s].ids) snug_block_table_release(&tb[s], &r.pool);
        snug_block_table_free(&tb[s]);
        free(alone[s]);
        free(got[s]);
    }
    rig_close(&r);
    rm_tree(dir);
}

/* The arena is exactly snug_model_activation_bytes, and a step allocates
 * nothing: no category's peak moves. Bad steps are refused before work. */
static void test_arena_and_bad_steps(void)
{
    snug_error err = {0};
    snug_model_config c = small_config();
    char dir[64];
    rig r;
    bool ok = make_model(&c, SNUG_DTYPE_BF16, dir, &err);
    size_t act0 = 0;
    snug_mem_status(SNUG_MEM_ACTIVATIONS, &act0, NULL, false);
    ok = ok && rig_open(&r, dir, SNUG_DTYPE_BF16, 24, 3, 5, &err);
    CHECK(ok, "setup: %s", err.msg);
    if (ok) {
        size_t act = 0, peak = 0, total = 0, total_peak = 0;
        snug_mem_status(SNUG_MEM_ACTIVATIONS, &act, NULL, false);
        snug_step_shape shape = {24, 3, 5, 2};
        size_t want = snug_model_activation_bytes(snug_model_get_dims(r.m), &shape);
        CHECK(act - act0 == want, "activations hold %zu bytes, the size function says %zu", act - act0, want);
        printf("  activation arena: %zu bytes for 24 tokens, 3 sequences, 5 logit rows, 2 threads\n", want);
        snug_block_table tb = {0};
        ok = snug_block_table_init(&tb, MAX_TOKENS, BLOCK, &err) == SNUG_OK &&
             snug_block_table_grow(&tb, &r.pool, 24, BLOCK);
        int32_t toks[24];
        fill_tokens(toks, 24, c.vocab_size, 5);
        snug_mem_status(SNUG_MEM_TOTAL, &total, &total_peak, true);
        int64_t allocs = snug_mem_alloc_count();
        snug_step_seq seq = {24, 0, tb.ids, tb.n, SNUG_LOGITS_LAST, NULL, 0};
        snug_step step = {toks, 24, &seq, 1, 0};
        const float *lg;
        int32_t rows;
        CHECK_OK(snug_model_forward(r.m, &r.kv, &step, &lg, &rows, &err), &err);
        snug_mem_status(SNUG_MEM_TOTAL, NULL, &peak, false);
        CHECK(peak == total && snug_mem_alloc_count() == allocs, "a step allocated: peak %zu after %zu, %lld allocations",
              peak, total, (long long)(snug_mem_alloc_count() - allocs));
        /* Refused steps. */
        snug_step_seq big = {25, 0, tb.ids, tb.n, SNUG_LOGITS_LAST, NULL, 0};
        snug_step s_big = {toks, 25, &big, 1, 0};
        CHECK_FAILS(snug_model_forward(r.m, &r.kv, &s_big, &lg, &rows, &err), &err, SNUG_INVALID, "25 tokens");
        snug_step_seq all = {24, 0, tb.ids, tb.n, SNUG_LOGITS_ALL, NULL, 0};
        snug_step s_all = {toks, 24, &all, 1, 0};
        CHECK_FAILS(snug_model_forward(r.m, &r.kv, &s_all, &lg, &rows, &err), &err, SNUG_INVALID, "24 logit rows");
        snug_step_seq short_table = {24, 0, tb.ids, 2, SNUG_LOGITS_LAST, NULL, 0};
        snug_step s_short = {toks, 24, &short_table, 1, 0};
        CHECK_FAILS(snug_model_forward(r.m, &r.kv, &s_short, &lg, &rows, &err), &err, SNUG_INVALID,
                    "2 blocks do not cover position 23");
        int32_t bad_ids[6] = {0, 1, 2, 999, 4, 5};
        snug_step_seq six = {6, 0, tb.ids, tb.n, SNUG_LOGITS_LAST, NULL, 0};
        snug_step s_bad = {bad_ids, 6, &six, 1, 0};
        CHECK_FAILS(snug_model_forward(r.m, &r.kv, &s_bad, &lg, &rows, &err), &err, SNUG_INVALID,
                    "token 3 is 999, outside the vocabulary");
        snug_step s_count = {toks, 7, &six, 1, 0};
        CHECK_FAILS(snug_model_forward(r.m, &r.kv, &s_count, &lg, &rows, &err), &err, SNUG_INVALID,
                    "the sequences hold 6 tokens, the step 7");
        /* a cache of the first layer only serves a step through that layer (the profile's), and
         * no other: not a whole step, not one through two layers */
        snug_kv_shape first = r.kv.shape;
        first.n_layers = 1;
        snug_kvcache one = {0};
        CHECK_OK(snug_kvcache_create(&first, r.kv.n_blocks, NULL, &one, &err), &err);
        snug_step s_first = {toks, 24, &seq, 1, 1};
        CHECK_OK(snug_model_forward(r.m, &one, &s_first, &lg, &rows, &err), &err);
        CHECK(rows == 1, "a step through one layer: %d rows", rows);
        CHECK_FAILS(snug_model_forward(r.m, &one, &step, &lg, &rows, &err), &err, SNUG_INVALID,
                    "made for another model");
        snug_step s_two = {toks, 24, &seq, 1, 2};
        CHECK_FAILS(snug_model_forward(r.m, &one, &s_two, &lg, &rows, &err), &err, SNUG_INVALID,
                    "made for another model");
        snug_kvcache_free(&one);
        snug_block_table_release(&tb, &r.pool);
        snug_block_table_free(&tb);
    }
    rig_close(&r);
    rm_tree(dir);
}

/* Unsupported rope scalings are refused when the model is made. */
static void test_unsupported_rope(void)
{
    snug_error err = {0};
    snug_model_config c = small_config();
    char dir[64];
    rig r;
    c.rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_YARN, .factor = 4.0, .beta_fast = 32, .beta_slow = 1,
                                         .original_max_position_embeddings = 64};
    bool ok = make_model(&c, SNUG_DTYPE_F32, dir, &err);
    CHECK(ok, "mkmodel: %s", err.msg);
    if (ok) {
        bool opened = rig_open(&r, dir, SNUG_DTYPE_F32, 8, 1, 1, &err);
        CHECK(!opened && err.status == SNUG_UNSUPPORTED && strstr(err.msg, "rope_scaling type \"yarn\""),
              "yarn: %s", err.msg);
        rig_close(&r);
    }
    rm_tree(dir);
}

/* The bundled stories260K: logits rows of llama2.c's run.c (in the greedy
 * fixture: max and first 8 logits at positions 0 and 1) within 1e-4. */
static void test_stories260k_logits(void)
{
    snug_error err = {0};
    rig r;
    bool ok = rig_open(&r, "models/stories260K", SNUG_DTYPE_F32, 8, 1, 8, &err);
    CHECK(ok, "open: %s", err.msg);
    FILE *f = fopen("tests/data/stories260K/greedy.txt", "r");
    CHECK(f != NULL, "fixture");
    char line[4096];
    int checked = 0;
    snug_block_table tb = {0};
    ok = ok && f && snug_block_table_init(&tb, MAX_TOKENS, BLOCK, &err) == SNUG_OK;
    double worst = 0;
    while (ok && fgets(line, sizeof line, f)) {
        int pos, token, argmax;
        float mx, first[8];
        if (sscanf(line, "logits = pos=%d token=%d argmax=%d max=%f first8: %f %f %f %f %f %f %f %f", &pos, &token,
                   &argmax, &mx, &first[0], &first[1], &first[2], &first[3], &first[4], &first[5], &first[6],
                   &first[7]) != 12 || pos != checked % 2)
            continue;
        /* Positions 0 and 1 are BOS (1) then the row's token, as in the fixture. */
        int32_t toks[2] = {1, token};
        if (pos == 0) {
            snug_block_table_release(&tb, &r.pool);
            snug_block_table_grow(&tb, &r.pool, 2, BLOCK);
        }
        snug_step_seq seq = {1, pos, tb.ids, tb.n, SNUG_LOGITS_LAST, NULL, 0};
        snug_step step = {&toks[pos], 1, &seq, 1, 0};
        const float *lg;
        int32_t rows;
        ok = snug_model_forward(r.m, &r.kv, &step, &lg, &rows, &err) == SNUG_OK;
        CHECK(ok, "forward: %s", err.msg);
        int best = 0;
        for (int i = 1; ok && i < 512; i++) if (lg[i] > lg[best]) best = i;
        CHECK(best == argmax, "position %d: argmax %d, run.c %d", pos, best, argmax);
        worst = fmax(worst, fabs(lg[best] - mx));
        for (int i = 0; i < 8; i++) worst = fmax(worst, fabs(lg[i] - first[i]));
        checked++;
    }
    printf("  stories260K: %d logits rows against run.c, max difference %.3g (tolerance 1e-4)\n", checked, worst);
    CHECK(checked >= 4 && worst <= 1e-4, "%d rows, max difference %.3g", checked, worst);
    if (f) fclose(f);
    if (tb.ids) snug_block_table_release(&tb, &r.pool);
    snug_block_table_free(&tb);
    rig_close(&r);
}

/* Quantizing on load (--dtype q8_0 ...), on the bundled model: its logits
 * over llama2.c's greedy run (tests/data/stories260K/greedy.txt, 64 of its
 * ids, teacher-forced) against the model loaded in bf16, as the RMS of the
 * difference over the RMS of the bf16 logits and the share of positions
 * whose top token agrees, within each format's stated bound; run in one
 * step (the GEMM with x at its 8-bit levels) and a token at a time (the
 * integer matrix-vector path), which agree with each other to 1% of the
 * logits' RMS (the sums' order differs, and a last-bit difference that
 * moves an activation across a rounding boundary moves it a whole level:
 * mostly 1e-7, up to 0.5% seen). The matrices (k = 64 and 172) take the fallbacks: Q4_K as
 * Q5_0, Q6_K as Q8_0, down_proj (172 columns) stays bf16. */
static void test_quantize_on_load(void)
{
    static const int32_t ids[64] = {1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426,
                                    338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426,
                                    385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266,
                                    267, 337, 335, 312, 432, 398, 312, 286, 267, 414, 270, 333, 415, 426, 13,  438};
    static const struct {
        snug_dtype quant;
        double rms_max, top1_min; /* stated tolerances */
    } cases[] = {{SNUG_DTYPE_Q8_0, 0.02, 0.95}, {SNUG_DTYPE_Q6_K, 0.02, 0.95},
                 {SNUG_DTYPE_Q4_K, 0.10, 0.85}, {SNUG_DTYPE_Q4_0, 0.15, 0.80}};
    enum { N = 64, V = 512 };
    snug_error err = {0};
    float *ref = malloc(sizeof(float) * N * V), *got = malloc(sizeof(float) * N * V), *one = malloc(sizeof(float) * N * V);
    rig r;
    snug_block_table tb = {0};
    bool ok = rig_open_as(&r, "models/stories260K", NULL, SNUG_DTYPE_BF16, SNUG_DTYPE_NONE, SNUG_DTYPE_F32, N, 1, N, &err) &&
              snug_block_table_init(&tb, N, BLOCK, &err) == SNUG_OK && run_chunks(&r, &tb, ids, N, N, ref, &err);
    CHECK(ok, "bf16: %s", err.msg);
    if (tb.ids) snug_block_table_release(&tb, &r.pool);
    snug_block_table_free(&tb);
    rig_close(&r);
    double ref2 = 0;
    for (int i = 0; i < N * V; i++) ref2 += (double)ref[i] * ref[i];
    for (size_t c = 0; ok && c < SNUG_ARRAY_LEN(cases); c++) {
        memset(&tb, 0, sizeof tb);
        ok = rig_open_as(&r, "models/stories260K", NULL, SNUG_DTYPE_BF16, cases[c].quant, SNUG_DTYPE_F32, N, 1, N, &err) &&
             snug_block_table_init(&tb, N, BLOCK, &err) == SNUG_OK && run_chunks(&r, &tb, ids, N, N, got, &err);
        if (ok) snug_block_table_release(&tb, &r.pool);
        ok = ok && run_chunks(&r, &tb, ids, N, 1, one, &err);
        CHECK(ok, "%s: %s", snug_dtype_name(cases[c].quant), err.msg);
        if (tb.ids) snug_block_table_release(&tb, &r.pool);
        snug_block_table_free(&tb);
        rig_close(&r);
        double e2 = 0, paths2 = 0;
        int agree = 0;
        for (int t = 0; ok && t < N; t++) {
            int a = 0, b = 0;
            for (int i = 0; i < V; i++) {
                double dv = (double)got[t * V + i] - ref[t * V + i], dp = (double)got[t * V + i] - one[t * V + i];
                e2 += dv * dv, paths2 += dp * dp;
                if (ref[t * V + i] > ref[t * V + a]) a = i;
                if (got[t * V + i] > got[t * V + b]) b = i;
            }
            agree += a == b;
        }
        double rms = sqrt(e2 / ref2), paths = sqrt(paths2 / ref2), top1 = (double)agree / N;
        printf("  stories260K --dtype %s vs bf16: logits RMS error %.4f of theirs (bound %.2f), top-1 agreement "
               "%.3f (at least %.2f); one step vs a token at a time %.2g\n",
               snug_dtype_name(cases[c].quant), rms, cases[c].rms_max, top1, cases[c].top1_min, paths);
        CHECK(rms <= cases[c].rms_max && top1 >= cases[c].top1_min, "%s: RMS %.4f, top-1 %.3f",
              snug_dtype_name(cases[c].quant), rms, top1);
        CHECK(paths <= 0.01, "%s: one step and a token at a time differ by %.3g", snug_dtype_name(cases[c].quant),
              paths);
    }
    free(ref);
    free(got);
    free(one);
}

/* ---- tensor parallelism, ranks as threads of this process ------------------ */

enum { TP_MAX = 4, TP_N = 40 };

/* An all-reduce between threads: each rank publishes its buffer, all sum
 * every buffer in rank order (so all get the same bits), then copy. */
typedef struct tp_shared {
    pthread_barrier_t barrier;
    float *slots[TP_MAX];
    int tp;
} tp_shared;

typedef struct tp_rank {
    tp_shared *sh;
    int rank;
    const char *dir;
    const int32_t *tokens;
    float *logits;          /* (TP_N, vocab) every rank fills its columns */
    int vocab;
    bool ok, pad_zero;
    snug_error err;
} tp_rank;

static bool tp_allreduce(float *buf, int64_t n, void *ctx)
{
    tp_rank *r = ctx;
    tp_shared *sh = r->sh;
    float *sum = calloc((size_t)n, sizeof(float));
    if (!sum) return false;
    sh->slots[r->rank] = buf;
    pthread_barrier_wait(&sh->barrier);
    for (int k = 0; k < sh->tp; k++)
        for (int64_t i = 0; i < n; i++) sum[i] += sh->slots[k][i];
    pthread_barrier_wait(&sh->barrier);
    memcpy(buf, sum, (size_t)n * sizeof(float));
    free(sum);
    return true;
}

static void *tp_run_rank(void *arg)
{
    tp_rank *r = arg;
    snug_checkpoint *ck = NULL;
    snug_weights *w = NULL;
    snug_model *m = NULL;
    snug_kvcache kv = {0};
    snug_block_pool pool = {0};
    snug_block_table tb = {0};
    snug_load_opts lo = {.tp = r->sh->tp, .rank = r->rank, .n_threads = 1};
    snug_model_opts mo = {.shape = {8, 1, 8, 1}, .isa = -1, .allreduce = tp_allreduce, .allreduce_ctx = r};
    r->ok = snug_checkpoint_open(r->dir, &ck, &r->err) == SNUG_OK &&
            snug_weights_load(ck, &lo, &w, NULL, &r->err) == SNUG_OK &&
            snug_model_create(&ck->config, w, &mo, &m, &r->err) == SNUG_OK;
    const snug_model_dims *d = r->ok ? snug_model_get_dims(m) : NULL;
    if (r->ok) {
        snug_kv_shape ks = {d->n_layers, d->n_kv_heads, d->head_dim, BLOCK, SNUG_DTYPE_F32};
        r->ok = snug_kvcache_create(&ks, N_BLOCKS, snug_model_pool(m), &kv, &r->err) == SNUG_OK &&
                snug_block_pool_init(&pool, N_BLOCKS, BLOCK, false, &r->err) == SNUG_OK &&
                snug_block_table_init(&tb, MAX_TOKENS, BLOCK, &r->err) == SNUG_OK;
    }
    r->pad_zero = true;
    /* Every rank runs every step (a failing rank would leave the others
     * waiting at the barrier: the test's steps cannot fail but by a bug). */
    for (int p = 0; r->ok && p < TP_N; p += 8) {
        int n = SNUG_MIN(8, TP_N - p);
        snug_block_table_grow(&tb, &pool, p + n, BLOCK);
        snug_step_seq seq = {n, p, tb.ids, tb.n, SNUG_LOGITS_ALL, NULL, 0};
        snug_step step = {r->tokens + p, n, &seq, 1, 0};
        const float *lg;
        int32_t rows;
        r->ok = snug_model_forward(m, &kv, &step, &lg, &rows, &r->err) == SNUG_OK;
        for (int i = 0; r->ok && i < n; i++) {
            const float *row = lg + (size_t)i * (size_t)d->vocab_rows;
            memcpy(r->logits + (size_t)(p + i) * (size_t)r->vocab + d->vocab_begin, row, (size_t)d->vocab_len * sizeof(float));
            for (int j = d->vocab_len; j < d->vocab_rows; j++) r->pad_zero &= row[j] == 0.0f;
        }
    }
    if (tb.ids) snug_block_table_release(&tb, &pool);
    snug_block_table_free(&tb);
    snug_block_pool_free(&pool);
    snug_kvcache_free(&kv);
    snug_model_free(m);
    snug_weights_free(w);
    snug_checkpoint_close(ck);
    return NULL;
}

/* tp ranks (threads, each with its own weights, cache and model, summing
 * through tp_allreduce) give the reference's logits for model c: o_proj
 * and down_proj row-parallel, qkv and gate_up column-parallel (Phi-3's
 * fused tensors read as their q, k, v rows and their two halves per rank),
 * the KV heads split (tp 2) or replicated (tp 4 over 2 KV heads), the
 * vocabulary split with padding rows that stay zero. */
static void tensor_parallel_case(const char *what, snug_model_config c)
{
    snug_error err = {0};
    c.n_heads = 8, c.n_kv_heads = 2; /* vocab 301 */
    char dir[64];
    int32_t tokens[TP_N];
    fill_tokens(tokens, TP_N, c.vocab_size, 21);
    size_t n_logits = (size_t)TP_N * (size_t)c.vocab_size;
    double *want = malloc(n_logits * sizeof(double));
    float *got = calloc(n_logits, sizeof(float));
    ref_model *ref = NULL;
    bool ok = make_model(&c, SNUG_DTYPE_F32, dir, &err);
    CHECK(ok, "mkmodel: %s", err.msg);
    ref = ok ? ref_model_load(dir) : NULL;
    if (ref && c.rope_scaling.type == SNUG_ROPE_LONGROPE)
        ref_model_set_rope_long(ref, c.max_position_embeddings > c.rope_scaling.original_max_position_embeddings);
    ok = ok && ref && ref_model_forward(ref, tokens, TP_N, want) == 0;
    for (int tp = 2; ok && tp <= 4; tp += 2) {
        tp_shared sh = {.tp = tp};
        tp_rank ranks[TP_MAX];
        pthread_t th[TP_MAX];
        pthread_barrier_init(&sh.barrier, NULL, (unsigned)tp);
        memset(got, 0, n_logits * sizeof(float));
        for (int k = 0; k < tp; k++) {
            ranks[k] = (tp_rank){.sh = &sh, .rank = k, .dir = dir, .tokens = tokens, .logits = got, .vocab = c.vocab_size};
            pthread_create(&th[k], NULL, tp_run_rank, &ranks[k]);
        }
        bool all = true, pads = true;
        for (int k = 0; k < tp; k++) {
            pthread_join(th[k], NULL);
            CHECK(ranks[k].ok, "tp %d rank %d: %s", tp, k, ranks[k].err.msg);
            all &= ranks[k].ok;
            pads &= ranks[k].pad_zero;
        }
        pthread_barrier_destroy(&sh.barrier);
        if (!all) break;
        double e = rel_err(got, want, n_logits);
        printf("  %s, tensor parallel %d (ranks as threads): max relative error %.3g (tolerance 1e-04)\n", what, tp, e);
        CHECK(e <= 1e-4, "%s, tp %d: %.3g", what, tp, e);
        CHECK(pads, "%s, tp %d: a padding row of the vocabulary is not 0", what, tp);
    }
    CHECK(ok, "%s: reference", what);
    ref_model_free(ref);
    rm_tree(dir);
    free(want);
    free(got);
}

static void test_tensor_parallel(void)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_QWEN2, c.qkv_bias = true, c.tie_word_embeddings = true;
    snprintf(c.architecture, sizeof c.architecture, "Qwen2ForCausalLM");
    tensor_parallel_case("Qwen2 (biases, tied)", c);
    c = small_config();
    c.arch = SNUG_ARCH_QWEN3, c.head_dim = 32;
    snprintf(c.architecture, sizeof c.architecture, "Qwen3ForCausalLM");
    tensor_parallel_case("Qwen3 (q/k norms)", c);
    c = phi3_config(64, 0);
    tensor_parallel_case("Phi-3 (fused, LongRoPE)", c);
    c = gemma3_config();
    tensor_parallel_case("Gemma 3 (sandwich norms, windows, 2 bases)", c);
    c = gemma2_config();
    tensor_parallel_case("Gemma 2 (soft-caps, every other layer sliding)", c);
}

/* One [case] of tests/data/arch/greedy.txt: llama.cpp's run of a GGUF file
 * of another family (its prompt ids, greedy ids and each step's margin
 * between its top two logits). */
typedef struct family_case {
    char file[64];
    int32_t ids[64];     /* the prompt's ids, then the greedy ids */
    int n_prompt, n_greedy;
    double margins[32];
} family_case;

/* Reads the whitespace-separated numbers after "key = " of line into out
 * (at most max); their count, or -1 when the line is not that key's. */
static int read_numbers(const char *line, const char *key, double *out, int max)
{
    size_t k = strlen(key);
    if (strncmp(line, key, k) != 0 || strncmp(line + k, " = ", 3) != 0) return -1;
    int n = 0;
    char *end;
    for (const char *c = line + k + 3; n < max; c = end) {
        double v = strtod(c, &end);
        if (end == c) break;
        out[n++] = v;
    }
    return n;
}

/* Reads case k (0, 1, ...) of tests/data/arch/greedy.txt into *c. */
static bool family_case_load(int k, family_case *c)
{
    FILE *f = fopen("tests/data/arch/greedy.txt", "r");
    if (!f) return false;
    char line[1024];
    int at = -1;
    double v[64];
    memset(c, 0, sizeof *c);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "[case]", 6) == 0) at++;
        if (at != k) continue;
        int n;
        if (sscanf(line, "file = %63s", c->file) == 1) continue;
        if ((n = read_numbers(line, "prompt_ids", v, 32)) >= 0) {
            for (int i = 0; i < n; i++) c->ids[i] = (int32_t)v[i];
            c->n_prompt = n;
        } else if ((n = read_numbers(line, "greedy", v, 32)) >= 0) {
            for (int i = 0; i < n; i++) c->ids[c->n_prompt + i] = (int32_t)v[i];
            c->n_greedy = n;
        } else if ((n = read_numbers(line, "margins", c->margins, 32)) >= 0 && n != c->n_greedy) {
            c->n_greedy = 0; /* malformed */
        }
    }
    fclose(f);
    return c->file[0] && c->n_prompt > 0 && c->n_greedy > 0;
}

/* The GGUF files llama.cpp made of Qwen2 (q/k/v biases, tied), Qwen3 (a
 * norm per q and k head, head_dim 128 beside hidden 256), Phi-3 (fused
 * qkv and gate-up, rope on 48 of 64 dimensions) and Gemma 3 (a window of 8
 * on five layers of six, their own rope base, sandwich norms, GELU), Q8_0, fed llama.cpp's own
 * greedy continuation (teacher-forced): at every step whose margin between
 * llama.cpp's top two logits is at least 0.5, snug's argmax is llama.cpp's
 * id; at the others, llama.cpp's id is within 0.5 of snug's top logit
 * (llama.cpp quantizes activations to 8 bits: near-ties may swap). */
static void test_llamacpp_families(void)
{
    for (int k = 0; k < 4; k++) {
        family_case c;
        bool ok = family_case_load(k, &c);
        CHECK(ok, "tests/data/arch/greedy.txt: case %d", k);
        if (!ok) continue;
        char path[128];
        snprintf(path, sizeof path, "tests/data/arch/%s", c.file);
        snug_error err = {0};
        rig r;
        snug_block_table table = {0};
        int n = c.n_prompt + c.n_greedy - 1;
        float *lg = NULL;
        ok = rig_open(&r, path, SNUG_DTYPE_F32, 64, 1, 64, &err) &&
             snug_block_table_init(&table, MAX_TOKENS, BLOCK, &err) == SNUG_OK;
        int vocab = ok ? snug_model_get_dims(r.m)->vocab_len : 0;
        lg = ok ? malloc((size_t)n * (size_t)vocab * sizeof(float)) : NULL;
        ok = ok && lg && run_chunks(&r, &table, c.ids, n, n, lg, &err);
        CHECK(ok, "%s: %s", path, err.msg);
        int agree = 0, checked = 0;
        for (int s = 0; ok && s < c.n_greedy; s++) {
            const float *row = lg + (size_t)(c.n_prompt - 1 + s) * (size_t)vocab;
            int best = 0;
            for (int j = 1; j < vocab; j++)
                if (row[j] > row[best]) best = j;
            int32_t want = c.ids[c.n_prompt + s];
            agree += best == want;
            if (c.margins[s] >= 0.5) {
                checked++;
                CHECK(best == want, "%s step %d: argmax %d, llama.cpp %d (margin %.3f)", c.file, s, best, want,
                      c.margins[s]);
            } else {
                CHECK(row[best] - row[want] <= 0.5f, "%s step %d: llama.cpp's %d is %.3f below the top (%d)",
                      c.file, s, want, (double)(row[best] - row[want]), best);
            }
        }
        if (ok)
            printf("  %-22s argmax = llama.cpp's at %d of %d steps (all %d with margin >= 0.5)\n", c.file, agree,
                   c.n_greedy, checked);
        free(lg);
        if (table.ids) snug_block_table_release(&table, &r.pool);
        snug_block_table_free(&table);
        rig_close(&r);
    }
}

/* Logits (n x vocab) of the model at path for tokens [0, n), in one step;
 * false with err set on a failure. */
static bool logits_of(const char *path, const int32_t *tokens, int n, float *out, snug_error *err)
{
    rig r;
    snug_block_table table = {0};
    bool ok = rig_open(&r, path, SNUG_DTYPE_F32, 64, 1, 64, err) &&
              snug_block_table_init(&table, MAX_TOKENS, BLOCK, err) == SNUG_OK &&
              run_chunks(&r, &table, tokens, n, n, out, err);
    if (table.ids) snug_block_table_release(&table, &r.pool);
    snug_block_table_free(&table);
    rig_close(&r);
    return ok;
}

/* The same weights as a Hugging Face directory and as the GGUF file snug
 * writes of it (convert/to_gguf.h: llama.cpp's names, fused tensors, the q
 * and k rows of llama permuted into interleaved pairs, Llama 3.1's scaling
 * as rope_freqs and LongRoPE's factors as tensors, Gemma's norms as 1 + w
 * and its window as keys) give the same logits:
 * bit for bit where the file holds what the directory does, within 1e-6
 * of the largest where rope_freqs stands for the llama3 formula. */
static void test_hf_and_gguf(void)
{
    snug_model_config cs[6];
    const char *what[6] = {"Llama, llama3 rope, q/k rows interleaved", "Qwen2, biases, tied", "Qwen3, q/k norms",
                           "Phi-3, fused, rope on 8 of 16, LongRoPE", "Gemma 3, window 5 on 2 of 3, 1 + w norms",
                           "Gemma 2, soft-caps 3 and 2 as keys"};
    for (int k = 0; k < 6; k++) cs[k] = small_config();
    cs[0].rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 1,
                                             .high_freq_factor = 4, .original_max_position_embeddings = 64};
    cs[1].arch = SNUG_ARCH_QWEN2, cs[1].qkv_bias = true, cs[1].tie_word_embeddings = true;
    cs[2].arch = SNUG_ARCH_QWEN3, cs[2].head_dim = 32;
    cs[3].arch = SNUG_ARCH_PHI3, cs[3].n_rot = 8;
    snug_rope_scaling *lr = &cs[3].rope_scaling;
    *lr = (snug_rope_scaling){.type = SNUG_ROPE_LONGROPE, .factor = 1, .n_factors = 4,
                              .original_max_position_embeddings = 64};
    for (int i = 0; i < 4; i++) lr->short_factor[i] = 1.0f + 0.5f * (float)i, lr->long_factor[i] = 2.0f + 3.0f * (float)i;
    snug_model_config *gm = &cs[4]; /* the norms written to the file as 1 + w, the window and rope bases as keys */
    gm->arch = SNUG_ARCH_GEMMA3, gm->n_layers = 3, gm->head_dim = 24, gm->tie_word_embeddings = true;
    gm->sliding_window = 5, gm->rope_theta = 1e6, gm->rope_local_theta = 1e4, gm->query_pre_attn_scalar = 24;
    gm->norm_plus_one = true;
    snug_config_set_sliding(gm, 3);
    cs[5] = gemma2_config();
    cs[5].query_pre_attn_scalar = 32; /* (GGUF has no key for it: llama.cpp takes head_dim) */
    enum { N = 24 };
    int32_t tokens[N];
    fill_tokens(tokens, N, cs[0].vocab_size, 5);
    for (int k = 0; k < 6; k++) {
        snug_model_config *c = &cs[k];
        snprintf(c->architecture, sizeof c->architecture, "%s", snug_arch_get(c->arch)->architecture);
        snug_error err = {0};
        char dir[64], gguf[96];
        size_t n = (size_t)N * (size_t)c->vocab_size;
        float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
        bool ok = make_model(c, SNUG_DTYPE_F32, dir, &err);
        snprintf(gguf, sizeof gguf, "%s/model.gguf", dir);
        ok = ok && snug_convert_to_gguf(dir, gguf, NULL, &err) == SNUG_OK;
        CHECK(ok, "%s: writing: %s", what[k], err.msg);
        ok = ok && logits_of(dir, tokens, N, a, &err) && logits_of(gguf, tokens, N, b, &err);
        CHECK(ok, "%s: running: %s", what[k], err.msg);
        double diff = 0, scale = 0;
        for (size_t i = 0; ok && i < n; i++) {
            diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
            scale = fmax(scale, fabs((double)a[i]));
        }
        double tol = c->rope_scaling.type == SNUG_ROPE_LLAMA3 ? 1e-6 * scale : 0;
        if (ok) printf("  %-42s Hugging Face vs GGUF: max logit difference %.3g of %.3g\n", what[k], diff, scale);
        CHECK(ok && diff <= tol, "%s: max difference %.3g > %.3g", what[k], diff, tol);
        rm_tree(dir);
        free(a);
        free(b);
    }
}

/* dir's checkpoint rewritten at mm as the Hub stores a Gemma 3 with
 * images: config.json's text_config holding the text model's fields
 * (sizes left to Gemma3TextConfig's defaults where they equal them; the
 * dtype and the ids at the top level), its tensors under
 * "language_model.", a vision tower and projector beside them. */
static bool write_multimodal(const char *dir, const char *mm, snug_error *err)
{
    char path[160];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *text = NULL, *root = json_object(), *vision = json_object();
    bool ok = snug_json_load_file(path, (size_t)1 << 20, &text, err) == SNUG_OK && root && vision;
    if (ok) {
        static const char *const moved[] = {"architectures", "torch_dtype", "dtype", "eos_token_id", "bos_token_id"};
        for (size_t i = 0; i < SNUG_ARRAY_LEN(moved); i++) {
            json_t *v = json_object_get(text, moved[i]);
            if (v && strcmp(moved[i], "architectures") != 0) json_object_set(root, moved[i], v);
            json_object_del(text, moved[i]);
        }
        json_object_del(text, "max_position_embeddings"); /* as Gemma3TextConfig's default, 131072, runs it */
        json_object_set_new(root, "architectures", json_pack("[s]", "Gemma3ForConditionalGeneration"));
        json_object_set_new(root, "model_type", json_string("gemma3"));
        json_object_set(root, "text_config", text);
        json_object_set_new(vision, "model_type", json_string("siglip_vision_model"));
        json_object_set(root, "vision_config", vision);
        mkdir(mm, 0755);
        snprintf(path, sizeof path, "%s/config.json", mm);
        ok = snug_json_write_file(root, path, err) == SNUG_OK;
    }
    json_decref(text), json_decref(root), json_decref(vision);
    snug_st_file *f = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ok = ok && snug_st_open(path, &f, err) == SNUG_OK;
    int32_t n = ok ? (int32_t)f->n_tensors : 0;
    snug_st_out *outs = calloc((size_t)n + 2, sizeof *outs);
    char (*names)[128] = calloc((size_t)n, sizeof *names);
    for (int32_t i = 0; ok && i < n; i++) {
        snprintf(names[i], sizeof names[i], "language_model.%s", f->tensors[i].name);
        outs[i] = (snug_st_out){names[i], f->tensors[i].dtype, f->tensors[i].n_dims,
                                {f->tensors[i].shape[0], f->tensors[i].shape[1]}};
    }
    outs[n] = (snug_st_out){"vision_tower.vision_model.embeddings.patch_embedding.weight", SNUG_DTYPE_F32, 2, {8, 12}};
    outs[n + 1] = (snug_st_out){"multi_modal_projector.mm_input_projection_weight", SNUG_DTYPE_F32, 2, {12, 4}};
    snug_st_writer *w = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors", mm);
    ok = ok && snug_st_writer_create(path, outs, n + 2, &w, err) == SNUG_OK;
    static unsigned char buf[1 << 20];
    for (int32_t i = 0; ok && i < n + 2; i++) {
        uint64_t bytes = 0;
        snug_st_out_bytes(&outs[i], &bytes);
        ok = bytes <= sizeof buf;
        memset(buf, 0, (size_t)bytes);
        if (ok && i < n) ok = snug_st_read(f, &f->tensors[i], 0, buf, (size_t)bytes, err) == SNUG_OK;
        ok = ok && snug_st_writer_write(w, i, 0, buf, (size_t)bytes, err) == SNUG_OK;
    }
    if (ok) ok = snug_st_writer_finish(w, err) == SNUG_OK;
    else snug_st_writer_abort(w);
    snug_st_close(f);
    free(outs);
    free(names);
    return ok;
}

/* The text model of a Gemma3ForConditionalGeneration checkpoint (the
 * Hub's layout: text_config, "language_model." tensors, a vision tower
 * beside them) runs as the same weights in a Gemma3ForCausalLM directory
 * do, bit for bit, the vision tower counted and left out. */
static void test_gemma3_multimodal(void)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_GEMMA3, c.n_layers = 3, c.head_dim = 24, c.tie_word_embeddings = true;
    c.sliding_window = 5, c.rope_theta = 1e6, c.rope_local_theta = 1e4, c.query_pre_attn_scalar = 24;
    c.norm_plus_one = true, c.max_position_embeddings = 131072;
    snug_config_set_sliding(&c, 3);
    snprintf(c.architecture, sizeof c.architecture, "Gemma3ForCausalLM");
    enum { N = 16 };
    int32_t tokens[N];
    fill_tokens(tokens, N, c.vocab_size, 9);
    snug_error err = {0};
    char dir[64], mm[96];
    size_t n = (size_t)N * (size_t)c.vocab_size;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    bool ok = make_model(&c, SNUG_DTYPE_F32, dir, &err);
    snprintf(mm, sizeof mm, "%s/mm", dir);
    ok = ok && write_multimodal(dir, mm, &err);
    CHECK(ok, "writing the multimodal checkpoint: %s", err.msg);
    snug_checkpoint *ck = NULL;
    ok = ok && snug_checkpoint_open(mm, &ck, &err) == SNUG_OK;
    CHECK(ok && ck->config.multimodal && ck->config.arch == SNUG_ARCH_GEMMA3 && ck->n_vision == 2 &&
              ck->config.max_position_embeddings == 131072 && ck->config.n_layers == 3,
          "opened as Gemma 3's text model, 2 vision tensors: %s", err.msg);
    snug_checkpoint_close(ck);
    ok = ok && logits_of(dir, tokens, N, a, &err) && logits_of(mm, tokens, N, b, &err);
    CHECK(ok, "running: %s", err.msg);
    double diff = 0;
    for (size_t i = 0; ok && i < n; i++) diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
    CHECK(ok && diff == 0, "text model of the multimodal checkpoint: max logit difference %.3g", diff);
    rm_tree(dir);
    free(a);
    free(b);
}

/* A model of windowed and full layers with its cache in two groups
 * (kvcache.h's window): the windowed layers' keys and values in blocks of
 * their own, of which a sequence keeps only those its next step's window
 * reaches (the older ones given back, -1 in its table, and taken again by
 * later positions: a block's old contents must never be read). The same
 * tokens, in chunks across the window's edge and then one by one, give the
 * logits of the cache of one group bit for bit, in f32 and bf16. */
static void test_window_group(void)
{
    snug_model_config c = small_config();
    c.arch = SNUG_ARCH_GEMMA3, c.n_layers = 3, c.head_dim = 24, c.tie_word_embeddings = true;
    c.sliding_window = 6, c.rope_theta = 1e6, c.rope_local_theta = 1e4, c.query_pre_attn_scalar = 24;
    c.norm_plus_one = true;
    snug_config_set_sliding(&c, 3); /* layers 0 and 1 windowed, 2 full */
    snprintf(c.architecture, sizeof c.architecture, "Gemma3ForCausalLM");
    enum { N = 44, PREFILL = 23, W_BLOCKS = 6 }; /* a window of 6 and a chunk of 7 reach 4 blocks of 4 */
    int32_t tokens[N];
    fill_tokens(tokens, N, c.vocab_size, 21);
    for (int pass = 0; pass < 2; pass++) {
        snug_dtype kdt = pass == 0 ? SNUG_DTYPE_F32 : SNUG_DTYPE_BF16;
        snug_error err = {0};
        char dir[64];
        rig r;
        snug_block_table table = {0};
        size_t n = (size_t)N * (size_t)c.vocab_size;
        float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
        bool ok = make_model(&c, SNUG_DTYPE_F32, dir, &err) && rig_open(&r, dir, kdt, 16, 1, 16, &err) &&
                  snug_block_table_init(&table, MAX_TOKENS, BLOCK, &err) == SNUG_OK &&
                  run_chunks(&r, &table, tokens, PREFILL, 7, a, &err) &&
                  run_chunks_from(&r, &table, tokens, PREFILL, N, 1, a, &err);
        CHECK(ok, "one group: %s", err.msg);
        /* the grouped caches: the full layer's, the windowed layers' */
        const snug_model_dims *d = ok ? snug_model_get_dims(r.m) : NULL;
        snug_kvcache full = {0}, win = {0};
        snug_kv_shape fs = {1, d ? d->n_kv_heads : 1, d ? d->head_dim : 2, BLOCK, kdt}, ws = fs;
        ws.n_layers = 2;
        ok = ok && snug_kvcache_create(&fs, N_BLOCKS, NULL, &full, &err) == SNUG_OK &&
             snug_kvcache_create(&ws, W_BLOCKS, NULL, &win, &err) == SNUG_OK;
        full.window = &win;
        int32_t ftab[MAX_TOKENS / BLOCK], wtab[MAX_TOKENS / BLOCK], free_w[W_BLOCKS], n_free = W_BLOCKS, reused = 0;
        for (int i = 0; i < W_BLOCKS; i++) free_w[i] = W_BLOCKS - 1 - i;
        for (int i = 0; i < MAX_TOKENS / BLOCK; i++) ftab[i] = i, wtab[i] = -1;
        for (int p = 0; ok && p < N;) {
            int len = p < PREFILL ? SNUG_MIN(7, PREFILL - p) : 1;
            /* give back the window blocks no query from p on sees, take those p .. p + len - 1 need */
            for (int bl = 0; (bl + 1) * BLOCK <= p - c.sliding_window + 1; bl++)
                if (wtab[bl] >= 0) free_w[n_free++] = wtab[bl], wtab[bl] = -1;
            int nb = (p + len + BLOCK - 1) / BLOCK;
            for (int bl = 0; bl < nb; bl++)
                if (wtab[bl] < 0 && (bl + 1) * BLOCK > p - c.sliding_window + 1) {
                    ok = ok && n_free > 0;
                    if (!ok) break;
                    wtab[bl] = free_w[--n_free];
                    reused += bl >= W_BLOCKS;
                }
            snug_step_seq seq = {len, p, ftab, nb, SNUG_LOGITS_ALL, wtab, nb};
            snug_step step = {tokens + p, len, &seq, 1, 0};
            const float *lg;
            int32_t rows;
            ok = ok && snug_model_forward(r.m, &full, &step, &lg, &rows, &err) == SNUG_OK && rows == len;
            for (int i = 0; ok && i < len; i++)
                memcpy(b + (size_t)(p + i) * (size_t)c.vocab_size, lg + (size_t)i * (size_t)d->vocab_rows,
                       (size_t)c.vocab_size * sizeof(float));
            p += len;
        }
        CHECK(ok, "two groups: %s", err.msg);
        CHECK(reused > 0, "the window group's blocks were taken again (%d times)", reused);
        size_t same = 0;
        for (size_t i = 0; ok && i < n; i++) same += a[i] == b[i];
        CHECK(ok && same == n, "%s cache: two groups give one group's logits (%zu of %zu equal)",
              snug_dtype_name(kdt), same, n);
        if (ok) printf("  two groups, %s cache: %d positions, %d window blocks taken again, logits bit for bit\n",
                       snug_dtype_name(kdt), N, reused);
        /* a window table that does not reach the step's window is refused before anything runs */
        snug_step_seq bad = {1, N - 1, ftab, (N + BLOCK - 1) / BLOCK, SNUG_LOGITS_LAST, wtab, (N + BLOCK - 1) / BLOCK};
        int32_t keep = wtab[(N - 1 - c.sliding_window + 1) / BLOCK];
        wtab[(N - 1 - c.sliding_window + 1) / BLOCK] = -1;
        snug_step bstep = {tokens, 1, &bad, 1, 0};
        const float *lg;
        int32_t rows;
        if (ok)
            CHECK_FAILS(snug_model_forward(r.m, &full, &bstep, &lg, &rows, &err), &err, SNUG_INVALID,
                        "window block -1 is outside the cache");
        wtab[(N - 1 - c.sliding_window + 1) / BLOCK] = keep;
        snug_kvcache_free(&win);
        full.window = NULL;
        snug_kvcache_free(&full);
        if (table.ids) snug_block_table_release(&table, &r.pool);
        snug_block_table_free(&table);
        if (d) rig_close(&r);
        rm_tree(dir);
        free(a);
        free(b);
    }
}


/* The 8-bit caches (--kv-cache-dtype q8_0, fp8_e4m3, fp8_e5m2) against an
 * f32 one, beside bf16's: a Llama of head_dim 64 with peaked attention
 * (weights of std 0.1) and 1024 random tokens teacher-forced in steps of
 * 64, every position's logits. Stated bounds on the logits' RMS error
 * relative to their RMS and on top-1 agreement (measured: bf16 0.0035 and
 * 0.996; q8_0 0.0111 and 0.988; fp8_e4m3 0.0621 and 0.908; fp8_e5m2 0.1137
 * and 0.864): q8_0 <= 0.02 and >= 0.97, fp8_e4m3 <= 0.10 and >= 0.85,
 * fp8_e5m2 <= 0.18 and >= 0.80 (tests/cli: llama.cpp's greedy ids on its
 * Q4_K_M file through each). A cache of blocks of 32 whose head_dim is
 * not a multiple of 32 is refused, naming it; a block's bytes. */
static void test_kv_8bit(void)
{
    enum { N = 1024, CHUNK = 64 };
    snug_model_config c = small_config();
    c.hidden_size = 128, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64, c.max_position_embeddings = 2048;
    char dir[64];
    snug_error err = {0};
    bool ok = make_model(&c, SNUG_DTYPE_F32, dir, &err);
    CHECK(ok, "mkmodel: %s", err.msg);
    static const snug_dtype dts[] = {SNUG_DTYPE_F32, SNUG_DTYPE_BF16, SNUG_DTYPE_Q8_0, SNUG_DTYPE_MXFP8_E4M3,
                                     SNUG_DTYPE_MXFP8_E5M2};
    /* the stated bounds of each (RMS error, top-1): none for bf16 */
    static const double max_rms[] = {0, 1, 0.02, 0.10, 0.18}, min_top1[] = {0, 0, 0.97, 0.85, 0.80};
    float *lg[5] = {NULL, NULL, NULL, NULL, NULL};
    int32_t *tokens = malloc(N * sizeof(int32_t));
    fill_tokens(tokens, N, (int)c.vocab_size, 99);
    int vocab = 0;
    for (int d = 0; ok && d < 5; d++) {
        rig r;
        snug_block_table table = {0};
        ok = rig_open_blocks(&r, dir, NULL, SNUG_DTYPE_NONE, SNUG_DTYPE_NONE, dts[d], CHUNK, 1, CHUNK, N / BLOCK, &err) &&
             snug_block_table_init(&table, N, BLOCK, &err) == SNUG_OK;
        vocab = ok ? snug_model_get_dims(r.m)->vocab_len : 0;
        lg[d] = ok ? malloc((size_t)N * (size_t)vocab * sizeof(float)) : NULL;
        ok = ok && lg[d] && run_chunks(&r, &table, tokens, N, CHUNK, lg[d], &err);
        CHECK(ok, "%s cache: %s", snug_kv_dtype_name(dts[d]), err.msg);
        if (table.ids) snug_block_table_release(&table, &r.pool);
        snug_block_table_free(&table);
        rig_close(&r);
    }
    for (int d = 1; ok && d < 5; d++) {
        double e2 = 0, r2 = 0;
        int agree = 0;
        for (int p = 0; p < N; p++) {
            const float *a = lg[d] + (size_t)p * (size_t)vocab, *ref = lg[0] + (size_t)p * (size_t)vocab;
            int ba = 0, br = 0;
            for (int j = 0; j < vocab; j++) {
                e2 += ((double)a[j] - ref[j]) * ((double)a[j] - ref[j]);
                r2 += (double)ref[j] * ref[j];
                if (a[j] > a[ba]) ba = j;
                if (ref[j] > ref[br]) br = j;
            }
            agree += ba == br;
        }
        double rms = sqrt(e2 / r2), top1 = (double)agree / N;
        printf("  %s cache against f32, %d positions: logits' RMS error %.4f of their RMS, top-1 agreement %.3f\n",
               snug_kv_dtype_name(dts[d]), N, rms, top1);
        CHECK(rms <= max_rms[d] && top1 >= min_top1[d], "%s cache: RMS error %.4f (bound %.2f), top-1 %.3f (bound %.2f)",
              snug_kv_dtype_name(dts[d]), rms, max_rms[d], top1, min_top1[d]);
    }
    for (int d = 0; d < 5; d++) free(lg[d]);
    free(tokens);
    rm_tree(dir);

    /* the bundled model's head_dim 8 cannot be blocks of 32 */
    snug_kv_shape bad = {5, 4, 8, BLOCK, SNUG_DTYPE_Q8_0};
    snug_kvcache none;
    CHECK(snug_kvcache_create(&bad, 4, NULL, &none, &err) == SNUG_INVALID && strstr(err.msg, "head_dim") &&
              strstr(err.msg, "8"),
          "q8_0 cache of head_dim 8: %s", err.msg);
    CHECK(snug_kv_block_bytes(&bad) == 0, "q8_0 block bytes of head_dim 8");
    bad.head_dim = 64;
    CHECK(snug_kv_block_bytes(&bad) == (size_t)2 * 5 * BLOCK * 4 * 68, "q8_0 block bytes of head_dim 64: %zu",
          snug_kv_block_bytes(&bad));
    bad.dtype = SNUG_DTYPE_MXFP8_E5M2;
    CHECK(snug_kv_block_bytes(&bad) == (size_t)2 * 5 * BLOCK * 4 * 66, "fp8_e5m2 block bytes of head_dim 64: %zu",
          snug_kv_block_bytes(&bad));
    bad.head_dim = 48;
    CHECK(snug_kvcache_create(&bad, 4, NULL, &none, &err) == SNUG_INVALID && strstr(err.msg, "fp8_e5m2") &&
              strstr(err.msg, "48"),
          "fp8_e5m2 cache of head_dim 48: %s", err.msg);
}

int main(void)
{
    RUN(test_gqa_f32);
    RUN(test_gqa_bf16);
    RUN(test_mlp_parts);
    RUN(test_qwen2_like);
    RUN(test_llama3_rope);
    RUN(test_head_dim);
    RUN(test_qwen3_like);
    RUN(test_phi3_like);
    RUN(test_gemma3_like);
    RUN(test_gemma3_writer);
    RUN(test_gemma2_like);
    RUN(test_sliding_window);
    RUN(test_batch_chunks_blocks);
    RUN(test_arena_and_bad_steps);
    RUN(test_unsupported_rope);
    RUN(test_stories260k_logits);
    RUN(test_quantize_on_load);
    RUN(test_rope_freq_factors);
    RUN(test_tensor_parallel);
    RUN(test_llamacpp_families);
    RUN(test_hf_and_gguf);
    RUN(test_gemma3_multimodal);
    RUN(test_window_group);
    RUN(test_kv_8bit);
    return test_summary();
}
