/*
 * test_loader.c: loading a rank's weights.
 *
 * Every parameter of every rank is compared, bit for bit, with a naive
 * reference that reads each whole checkpoint tensor and slices it here, by
 * this file's own reading of the tensor-parallel layout (not params.c's):
 * for tp 1, 2, 4, 8 on a GQA model (2 KV heads: split at tp 2, replicated
 * at 4 and 8) with a padded vocabulary and its own lm_head, and on a
 * Qwen2-like model (biases, tied embeddings), on a Llama with attention
 * biases and a head_dim that is not hidden / heads, from sharded and single-file
 * checkpoints, with and without dtype conversion. Also: special values
 * through conversion, byte counts against inspect's prediction, staging
 * back to 0 and sized to the conversions (a bf16 checkpoint with f32 norms
 * stages only the norms), the out-of-memory loop, truncated files, and checkpoints that
 * do not match the model.
 */
#include "kernels/linear.h"
#include "test.h"

#include "formats/checkpoint.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/json.h"
#include "model/loader.h"
#include "convert/mkmodel.h"
#include "model/params.h"
#include "formats/st_writer.h"

#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

/* The test models: a GQA Llama (2 KV heads, padded vocabulary, own
 * lm_head), a Qwen2 (biases, tied embeddings), and (wide) a Llama with
 * attention_bias and head_dim 16 != hidden / heads. */
static snug_model_config model_wide(void);

static snug_model_config model(bool qwen)
{
    snug_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = qwen ? SNUG_ARCH_QWEN2 : SNUG_ARCH_LLAMA;
    snprintf(c.architecture, sizeof c.architecture, "%s", qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM");
    c.hidden_size = 64, c.intermediate_size = 96, c.n_layers = 2, c.n_heads = 8;
    c.n_kv_heads = qwen ? 8 : 2, c.head_dim = 8, c.vocab_size = qwen ? 999 : 1001;
    c.max_position_embeddings = 256, c.rms_norm_eps = 1e-5, c.rope_theta = 10000;
    c.rope_scaling.factor = 1, c.tie_word_embeddings = qwen, c.qkv_bias = qwen;
    c.bos_token_id = 1, c.n_eos = 1, c.eos_token_ids[0] = 2;
    c.dtype = SNUG_DTYPE_BF16;
    return c;
}

static snug_model_config model_wide(void)
{
    snug_model_config c = model(false);
    c.head_dim = 16, c.n_kv_heads = 4, c.qkv_bias = true, c.o_bias = true;
    return c;
}

static void make(const char *sub, const snug_model_config *c, snug_dtype dt, int shards, char *out)
{
    snprintf(out, 512, "%s/%s", g_dir, sub);
    mkdir(out, 0755);
    snug_error err = {0};
    snug_mkmodel_opts o = {.dtype = dt, .n_shards = shards, .seed = 5};
    if (snug_mkmodel(c, &o, out, NULL, &err) != SNUG_OK) {
        printf("setup: %s\n", err.msg);
        abort();
    }
}

/* A whole checkpoint tensor as floats (libc memory). */
static float *whole(const snug_checkpoint *ck, const char *name, int64_t *rows, int64_t *cols)
{
    const snug_st_file *f;
    const snug_st_tensor *t = snug_checkpoint_find(ck, name, &f);
    if (!t) return NULL;
    size_t n = (size_t)snug_st_numel(t), es = snug_dtype_size(t->dtype);
    void *raw = malloc(n * es);
    float *out = malloc(n * sizeof *out);
    snug_error err;
    if (snug_st_read(f, t, 0, raw, n * es, &err) != SNUG_OK) abort();
    snug_convert(out, SNUG_DTYPE_F32, raw, t->dtype, n);
    free(raw);
    *rows = t->shape[0];
    *cols = t->n_dims == 2 ? t->shape[1] : 1;
    return out;
}

/* Appends rows [r0, r0 + n) and columns [c0, c0 + nc) of a rows x cols
 * tensor to out at *o. */
static void take(const float *x, int64_t cols, int64_t r0, int64_t n, int64_t c0, int64_t nc, float *out,
                 size_t *o)
{
    for (int64_t r = r0; r < r0 + n; r++)
        for (int64_t c = c0; c < c0 + nc; c++) out[(*o)++] = x[r * cols + c];
}

/* What parameter `name` of rank r of tp must hold, by this test's own
 * reading of the layout; n receives its element count. */
static float *expected(const snug_checkpoint *ck, const snug_model_config *c, int tp, int r,
                       const char *name, size_t *n)
{
    int64_t rows, cols, hd = c->head_dim, hq = c->n_heads / tp;
    int layer = -1;
    char part[64] = "", t[128];
    sscanf(name, "layers.%d.%63s", &layer, part);
    float *out = calloc(1 << 20, sizeof *out);
    size_t o = 0;
    /* the KV heads this rank holds */
    int64_t kv0, nkv;
    if (c->n_kv_heads % tp == 0) {
        nkv = c->n_kv_heads / tp;
        kv0 = r * nkv;
    } else {
        nkv = 1;
        kv0 = r / (tp / c->n_kv_heads);
    }
    if (strcmp(name, "embed_tokens") == 0 || strcmp(name, "lm_head") == 0) {
        float *x = whole(ck, strcmp(name, "lm_head") == 0 ? "lm_head.weight" : "model.embed_tokens.weight",
                         &rows, &cols);
        int64_t per = (c->vocab_size + tp - 1) / tp, b = r * per;
        int64_t real = b >= rows ? 0 : SNUG_MIN(per, rows - b);
        take(x, cols, b, real, 0, cols, out, &o);
        o += (size_t)((per - real) * cols); /* padding rows stay zero */
        free(x);
    } else if (strcmp(name, "norm") == 0) {
        float *x = whole(ck, "model.norm.weight", &rows, &cols);
        take(x, 1, 0, rows, 0, 1, out, &o);
        free(x);
    } else if (strcmp(part, "input_layernorm") == 0 || strcmp(part, "post_attention_layernorm") == 0) {
        snprintf(t, sizeof t, "model.layers.%d.%s.weight", layer, part);
        float *x = whole(ck, t, &rows, &cols);
        take(x, 1, 0, rows, 0, 1, out, &o);
        free(x);
    } else if (strcmp(part, "qkv") == 0 || strcmp(part, "qkv_bias") == 0) {
        const char *kind = strcmp(part, "qkv") == 0 ? "weight" : "bias";
        const char *proj[3] = {"q_proj", "k_proj", "v_proj"};
        for (int k = 0; k < 3; k++) {
            snprintf(t, sizeof t, "model.layers.%d.self_attn.%s.%s", layer, proj[k], kind);
            float *x = whole(ck, t, &rows, &cols);
            if (k == 0)
                take(x, cols, r * hq * hd, hq * hd, 0, cols, out, &o);
            else
                take(x, cols, kv0 * hd, nkv * hd, 0, cols, out, &o);
            free(x);
        }
    } else if (strcmp(part, "o_proj_bias") == 0) {
        snprintf(t, sizeof t, "model.layers.%d.self_attn.o_proj.bias", layer);
        float *x = whole(ck, t, &rows, &cols);
        take(x, 1, 0, rows, 0, 1, out, &o);
        free(x);
    } else if (strcmp(part, "o_proj") == 0) {
        snprintf(t, sizeof t, "model.layers.%d.self_attn.o_proj.weight", layer);
        float *x = whole(ck, t, &rows, &cols);
        take(x, cols, 0, rows, r * hq * hd, hq * hd, out, &o);
        free(x);
    } else if (strcmp(part, "gate_up") == 0) {
        int64_t ff = c->intermediate_size / tp;
        const char *proj[2] = {"gate_proj", "up_proj"};
        for (int k = 0; k < 2; k++) {
            snprintf(t, sizeof t, "model.layers.%d.mlp.%s.weight", layer, proj[k]);
            float *x = whole(ck, t, &rows, &cols);
            take(x, cols, r * ff, ff, 0, cols, out, &o);
            free(x);
        }
    } else if (strcmp(part, "down_proj") == 0) {
        int64_t ff = c->intermediate_size / tp;
        snprintf(t, sizeof t, "model.layers.%d.mlp.down_proj.weight", layer);
        float *x = whole(ck, t, &rows, &cols);
        take(x, cols, 0, rows, r * ff, ff, out, &o);
        free(x);
    } else {
        free(out);
        return NULL;
    }
    *n = o;
    return out;
}

/* Loads every rank of dir at tp as dt and compares each parameter. */
static void check_all_ranks(const char *dir, const snug_model_config *c, int tp, snug_dtype dt)
{
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(dir, &ck, &err), &err);
    if (!ck) return;
    uint64_t predicted[8];
    CHECK_OK(snug_params_rank_bytes(c, tp, dt, predicted, &err), &err);
    for (int r = 0; r < tp; r++) {
        snug_load_opts o = {.tp = tp, .rank = r, .dtype = dt};
        snug_weights *w = NULL;
        snug_load_stats s;
        CHECK_OK(snug_weights_load(ck, &o, &w, &s, &err), &err);
        if (!w) continue;
        CHECK(s.weight_bytes == predicted[r], "tp %d rank %d: %llu bytes, inspect predicts %llu", tp, r,
              (unsigned long long)s.weight_bytes, (unsigned long long)predicted[r]);
        size_t staging;
        snug_mem_status(SNUG_MEM_STAGING, &staging, NULL, false);
        CHECK(staging == 0, "staging is back to 0 after the load (%zu)", staging);
        int bad = 0;
        uint64_t ref_bytes = 0;
        for (int32_t i = 0; i < w->table.n_params; i++) {
            const snug_param *p = &w->table.params[i];
            size_t n = 0;
            float *want = expected(ck, c, tp, r, p->name, &n);
            ref_bytes += n * snug_dtype_size(dt);
            if (!want || n != snug_param_numel(p)) {
                printf("  %s: reference has %zu elements, parameter %llu\n", p->name, n,
                       (unsigned long long)snug_param_numel(p));
                bad++;
                free(want);
                continue;
            }
            float *got = malloc(n * sizeof *got);
            if (p->packed) { /* the matmul's panel layout: read back row by row */
                snug_linear lin = {dt, p->rows, p->cols, snug_weights_data(w, i)};
                for (int64_t row = 0; row < p->rows; row++) snug_linear_row(&lin, row, got + row * p->cols);
            } else {
                snug_convert(got, SNUG_DTYPE_F32, snug_weights_data(w, i), dt, n);
            }
            for (size_t k = 0; k < n; k++) {
                /* the reference is f32; the weights hold it rounded to dt */
                float ref = want[k];
                uint16_t h = 0;
                if (dt == SNUG_DTYPE_BF16) h = snug_f32_to_bf16(ref), ref = snug_bf16_to_f32(h);
                if (dt == SNUG_DTYPE_F16) h = snug_f32_to_f16(ref), ref = snug_f16_to_f32(h);
                if (memcmp(&ref, &got[k], 4) != 0) {
                    if (bad < 3) printf("  tp %d rank %d %s[%zu]: %g, want %g\n", tp, r, p->name, k, got[k], ref);
                    bad++;
                    break;
                }
            }
            free(want);
            free(got);
        }
        CHECK(ref_bytes == s.weight_bytes, "tp %d rank %d: the reference holds %llu bytes, the load %llu",
              tp, r, (unsigned long long)ref_bytes, (unsigned long long)s.weight_bytes);
        /* the same load cut into many small reads and conversions, on 3 threads */
        snug_load_opts small = {.tp = tp, .rank = r, .dtype = dt, .item_bytes = 700,
                                .staging_bytes = 3 * 700, .n_threads = 3};
        snug_weights *w2 = NULL;
        snug_load_stats s2 = {0};
        CHECK_OK(snug_weights_load(ck, &small, &w2, &s2, &err), &err);
        CHECK(w2 && w2->arena_bytes == w->arena_bytes &&
              memcmp(w2->arena, w->arena, (size_t)w->arena_bytes) == 0,
              "tp %d rank %d: small reads give the same bytes", tp, r);
        CHECK(s2.staging_bytes <= 3 * snug_round_up(700, SNUG_MEM_ALIGN) &&
              s.staging_bytes <= SNUG_LOAD_STAGING_BYTES,
              "tp %d rank %d: staging of %zu and %zu bytes within the configured 3 x 700 and default",
              tp, r, s2.staging_bytes, s.staging_bytes);
        snug_weights_free(w2);
        CHECK(bad == 0, "tp %d rank %d as %s: %d parameters differ from the reference", tp, r,
              snug_dtype_name(dt), bad);
        snug_weights_free(w);
    }
    snug_checkpoint_close(ck);
}

static void test_gqa_every_tp(void)
{
    snug_model_config c = model(false);
    char one[512], many[512];
    make("gqa1", &c, SNUG_DTYPE_BF16, 1, one);
    make("gqa3", &c, SNUG_DTYPE_BF16, 3, many);
    for (int tp = 1; tp <= 8; tp *= 2) {
        check_all_ranks(one, &c, tp, SNUG_DTYPE_BF16);
        check_all_ranks(many, &c, tp, SNUG_DTYPE_BF16);
    }
    check_all_ranks(many, &c, 4, SNUG_DTYPE_F32); /* bf16 -> f32 is exact */
    check_all_ranks(many, &c, 2, SNUG_DTYPE_F16);
    char half[512];
    make("gqa16", &c, SNUG_DTYPE_F16, 2, half);
    check_all_ranks(half, &c, 2, SNUG_DTYPE_F32); /* f16 -> f32 is exact */
    check_all_ranks(half, &c, 8, SNUG_DTYPE_BF16);
}

static void test_qwen2_every_tp(void)
{
    snug_model_config c = model(true);
    char one[512], many[512];
    make("qwen1", &c, SNUG_DTYPE_F32, 1, one);
    make("qwen2", &c, SNUG_DTYPE_F32, 2, many);
    for (int tp = 1; tp <= 8; tp *= 2) {
        check_all_ranks(one, &c, tp, SNUG_DTYPE_F32);
        check_all_ranks(many, &c, tp, SNUG_DTYPE_BF16); /* f32 -> bf16 rounds to nearest even */
    }
    check_all_ranks(one, &c, 8, SNUG_DTYPE_F16);
}

static void test_head_dim_and_attention_bias(void)
{
    snug_model_config c = model_wide();
    char d[512];
    make("wide", &c, SNUG_DTYPE_F32, 2, d);
    for (int tp = 1; tp <= 8; tp *= 2) check_all_ranks(d, &c, tp, tp == 2 ? SNUG_DTYPE_BF16 : SNUG_DTYPE_F32);
}

static void test_bytes_read_are_the_shards(void)
{
    snug_model_config c = model(false);
    char d[512];
    make("bytes", &c, SNUG_DTYPE_BF16, 2, d);
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(d, &ck, &err), &err);
    if (!ck) return;
    for (int r = 0; r < 8; r++) {
        snug_load_opts o = {.tp = 8, .rank = r, .dtype = SNUG_DTYPE_BF16};
        snug_weights *w = NULL;
        snug_load_stats s;
        size_t w0, w1;
        snug_mem_status(SNUG_MEM_WEIGHTS, &w0, NULL, false);
        CHECK_OK(snug_weights_load(ck, &o, &w, &s, &err), &err);
        if (!w) continue;
        snug_mem_status(SNUG_MEM_WEIGHTS, &w1, NULL, false);
        /* vocab 1001 over 8 ranks: 126 rows each, padding is never read */
        int64_t per = 126, real = SNUG_MIN(per, SNUG_MAX(0, 1001 - r * per));
        uint64_t padding = 2 * (uint64_t)(per - real) * 64 * 2;
        CHECK(s.bytes_read == s.weight_bytes - padding, "rank %d read %llu bytes for %llu of weights "
              "(%llu of them padding)", r, (unsigned long long)s.bytes_read,
              (unsigned long long)s.weight_bytes, (unsigned long long)padding);
        CHECK(w1 - w0 == s.weights_held && s.weights_held == snug_mem_block_bytes(w->arena),
              "the weights are one allocation");
        CHECK(w->arena_bytes - s.weight_bytes < 64 * (uint64_t)w->table.n_params,
              "the layout adds only alignment to the weights");
        CHECK(s.load_peak_bytes < s.weights_held + (1 << 20), "no staging for a load without "
              "conversion: peak %zu for %zu held", s.load_peak_bytes, s.weights_held);
        snug_weights_free(w);
    }
    snug_checkpoint_close(ck);
}

static void test_special_values(void)
{
    snug_model_config c = model(false);
    char d[512];
    make("special", &c, SNUG_DTYPE_F32, 1, d);
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(d, &ck, &err), &err);
    if (!ck) return;
    const snug_st_file *f;
    const snug_st_tensor *t = snug_checkpoint_find(ck, "model.norm.weight", &f);
    float v[64];
    for (int i = 0; i < 64; i++) v[i] = (float)i / 7.0f;
    v[0] = INFINITY, v[1] = -INFINITY, v[2] = NAN, v[3] = 1e-40f /* subnormal */, v[4] = 65520.0f;
    v[5] = 1.0f + 0x1p-8f, v[6] = 1.0f + 0x1p-11f, v[7] = -0.0f, v[8] = 0x1p-25f, v[9] = 70000.0f;
    FILE *out = fopen(f->path, "r+b");
    fseek(out, (long)(f->data_start + t->begin), SEEK_SET);
    fwrite(v, 4, 64, out);
    fclose(out);
    snug_dtype dts[2] = {SNUG_DTYPE_BF16, SNUG_DTYPE_F16};
    for (int k = 0; k < 2; k++) {
        snug_load_opts o = {.tp = 1, .dtype = dts[k]};
        snug_weights *w = NULL;
        CHECK_OK(snug_weights_load(ck, &o, &w, NULL, &err), &err);
        if (!w) continue;
        const uint16_t *h = snug_weights_data(w, snug_weights_find(w, "norm"));
        int bad = 0;
        for (int i = 0; i < 64; i++) {
            uint16_t want = k == 0 ? snug_f32_to_bf16(v[i]) : snug_f32_to_f16(v[i]);
            bad += h[i] != want;
        }
        CHECK(bad == 0, "%s: %d special values converted wrongly", snug_dtype_name(dts[k]), bad);
        bool nan = (h[2] & (k == 0 ? 0x7F80 : 0x7C00)) == (k == 0 ? 0x7F80 : 0x7C00) &&
                   (h[2] & (k == 0 ? 0x7F : 0x3FF));
        CHECK(nan, "NaN stays NaN: %04x", h[2]);
        if (k == 0)
            CHECK(h[0] == 0x7F80 && h[1] == 0xFF80 && h[3] != 0 && h[7] == 0x8000,
                  "bf16: infinities, an f32 subnormal kept, -0");
        else
            CHECK(h[0] == 0x7C00 && h[4] == 0x7C00 && h[9] == 0x7C00 && h[3] == 0 && h[8] == 0,
                  "f16: infinities, overflow to infinity, underflow to zero");
        snug_weights_free(w);
    }
    snug_checkpoint_close(ck);
}

/* Rewrites the single-file checkpoint in src as dst with its matrices in
 * bf16 and its 1-D tensors (the norms) kept in f32, as a GGUF import has
 * them. */
static void write_bf16_with_f32_norms(const char *src, const char *dst, const snug_model_config *c)
{
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    if (snug_checkpoint_open(src, &ck, &err) != SNUG_OK) abort();
    int32_t n = (int32_t)ck->n_tensors;
    snug_st_out *outs = calloc((size_t)n, sizeof *outs);
    for (int32_t i = 0; i < n; i++) {
        const snug_st_tensor *t = ck->entries[i].tensor;
        outs[i] = (snug_st_out){.name = t->name, .dtype = t->n_dims == 1 ? SNUG_DTYPE_F32 : SNUG_DTYPE_BF16,
                                .n_dims = t->n_dims, .shape = {t->shape[0], t->n_dims == 2 ? t->shape[1] : 0}};
    }
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dst);
    snug_st_writer *w = NULL;
    if (snug_st_writer_create(p, outs, n, &w, &err) != SNUG_OK) abort();
    for (int32_t i = 0; i < n; i++) {
        int64_t rows, cols;
        float *x = whole(ck, outs[i].name, &rows, &cols);
        size_t numel = (size_t)(rows * cols), es = snug_dtype_size(outs[i].dtype);
        void *out = malloc(numel * es);
        snug_convert(out, outs[i].dtype, x, SNUG_DTYPE_F32, numel);
        if (snug_st_writer_write(w, i, 0, out, numel * es, &err) != SNUG_OK) abort();
        free(out);
        free(x);
    }
    if (snug_st_writer_finish(w, &err) != SNUG_OK) abort();
    json_t *cfg = snug_config_to_json(c);
    snprintf(p, sizeof p, "%s/config.json", dst);
    if (snug_json_write_file(cfg, p, &err) != SNUG_OK) abort();
    json_decref(cfg);
    free(outs);
    snug_checkpoint_close(ck);
}

/* A bf16 checkpoint whose only f32 tensors are its norms, loaded as bf16:
 * the staging is sized to the norms (one slot per thread that can use one,
 * each a norm's bytes rounded up to 64), not the default 64 MiB, so the
 * load peaks at the weights. */
static void test_staging_sized_to_conversions(void)
{
    snug_model_config c = model(false);
    c.hidden_size = 256, c.intermediate_size = 512, c.head_dim = 32, c.vocab_size = 4096;
    char f32[512], mixed[512];
    make("norms-f32", &c, SNUG_DTYPE_F32, 1, f32);
    snprintf(mixed, sizeof mixed, "%s/norms-mixed", g_dir);
    mkdir(mixed, 0755);
    write_bf16_with_f32_norms(f32, mixed, &c);
    /* the converting reads: 2 norms per layer and the final one, each whole */
    int64_t n_norms = 2 * (int64_t)c.n_layers + 1;
    size_t slot = snug_round_up((size_t)c.hidden_size * sizeof(float), SNUG_MEM_ALIGN);

    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(mixed, &ck, &err), &err);
    if (!ck) return;
    snug_weights *ref = NULL;
    static const int32_t threads[] = {1, 2, 3, 8};
    for (size_t k = 0; k < SNUG_ARRAY_LEN(threads); k++) {
        int32_t nt = threads[k];
        snug_load_opts o = {.tp = 1, .dtype = SNUG_DTYPE_BF16, .n_threads = nt};
        snug_weights *w = NULL;
        snug_load_stats s;
        size_t peak_staging = 0;
        snug_mem_status(SNUG_MEM_STAGING, NULL, NULL, true);
        CHECK_OK(snug_weights_load(ck, &o, &w, &s, &err), &err);
        if (!w) continue;
        snug_mem_status(SNUG_MEM_STAGING, NULL, &peak_staging, false);
        size_t want = (size_t)SNUG_MIN((int64_t)nt, n_norms) * slot;
        CHECK(s.staging_bytes == want, "%d threads: staging of %zu bytes, want %lld slots of %zu = %zu",
              nt, s.staging_bytes, (long long)SNUG_MIN((int64_t)nt, n_norms), slot, want);
        CHECK(s.staging_held >= s.staging_bytes && s.staging_held <= snug_mem_held_bytes(s.staging_bytes) &&
              peak_staging == s.staging_held + s.pack_held, "%d threads: the staging is one block of %zu bytes "
              "(held %zu, and %zu of packing scratch; category peak %zu)", nt, s.staging_bytes, s.staging_held,
              s.pack_held, peak_staging);
        double ratio = (double)s.load_peak_bytes / (double)s.weight_bytes;
        CHECK(ratio <= 1.01, "%d threads: load peak / weights %.4f (peak %zu, weights %llu)", nt, ratio,
              s.load_peak_bytes, (unsigned long long)s.weight_bytes);
        if (!ref) {
            ref = w;
            continue;
        }
        CHECK(w->arena_bytes == ref->arena_bytes && memcmp(w->arena, ref->arena, (size_t)w->arena_bytes) == 0,
              "%d threads give the bytes 1 thread gives", nt);
        snug_weights_free(w);
    }
    snug_weights_free(ref);
    /* every parameter against the reference, at tp 1 and 2, and as f32,
     * where the matrices convert and the norms do not */
    snug_checkpoint_close(ck);
    for (int tp = 1; tp <= 2; tp *= 2) check_all_ranks(mixed, &c, tp, SNUG_DTYPE_BF16);
    check_all_ranks(mixed, &c, 2, SNUG_DTYPE_F32);
}

typedef struct oom_ctx {
    const snug_checkpoint *ck;
    snug_load_opts opts;
} oom_ctx;

static snug_status load_oom(void *p, snug_error *err)
{
    oom_ctx *x = p;
    snug_weights *w = NULL;
    snug_status st = snug_weights_load(x->ck, &x->opts, &w, NULL, err);
    snug_weights_free(w);
    return st;
}

static void test_out_of_memory_loop(void)
{
    snug_model_config c = model(true);
    char d[512];
    make("oom", &c, SNUG_DTYPE_F32, 2, d);
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(d, &ck, &err), &err);
    if (!ck) return;
    oom_ctx x = {ck, {.tp = 2, .rank = 1, .dtype = SNUG_DTYPE_BF16, .n_threads = 2}};
    int n = test_oom_loop("load with conversion", load_oom, NULL, &x, 500);
    CHECK(n >= 8, "the load makes several allocations (%d)", n);
    x.opts.dtype = SNUG_DTYPE_F32;
    test_oom_loop("load without conversion", load_oom, NULL, &x, 500);
    snug_checkpoint_close(ck);
}

static void test_truncated(void)
{
    snug_model_config c = model(false);
    char d[512], p[600];
    make("trunc", &c, SNUG_DTYPE_BF16, 2, d);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", d);
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(d, &ck, &err), &err);
    if (!ck) return;
    struct stat sb;
    stat(p, &sb);
    CHECK(truncate(p, sb.st_size / 2) == 0, "truncate the second shard mid-tensor");
    size_t before;
    snug_mem_status(SNUG_MEM_TOTAL, &before, NULL, false);
    snug_load_opts o = {.tp = 2, .rank = 0};
    snug_weights *w = NULL;
    CHECK_FAILS(snug_weights_load(ck, &o, &w, NULL, &err), &err, SNUG_IO, "did it shrink while open?");
    CHECK(strstr(err.msg, "model-00002-of-00002.safetensors") != NULL, "names the shard: %s", err.msg);
    size_t after;
    snug_mem_status(SNUG_MEM_TOTAL, &after, NULL, false);
    CHECK(after == before && w == NULL, "nothing left allocated");
    snug_checkpoint_close(ck);
    CHECK_FAILS(snug_checkpoint_open(d, &ck, &err), &err, SNUG_FORMAT, "the file is truncated");
}

/* Writes a checkpoint of c as f32 zeros, with one tensor dropped, one
 * added and one reshaped (each optional). */
static void write_variant(const char *dir, const snug_model_config *c, const char *drop,
                          const char *add, const char *reshape, snug_dtype odd_dtype_for)
{
    snug_error err = {0};
    snug_tensor_spec *specs = NULL;
    int32_t n = 0;
    if (snug_params_checkpoint_tensors(c, &specs, &n, &err) != SNUG_OK) abort();
    snug_st_out *outs = calloc((size_t)n + 1, sizeof *outs);
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (drop && strcmp(specs[i].name, drop) == 0) continue;
        outs[k] = (snug_st_out){.name = specs[i].name, .dtype = SNUG_DTYPE_F32, .n_dims = specs[i].n_dims,
                                .shape = {specs[i].rows, specs[i].cols}};
        if (reshape && strcmp(specs[i].name, reshape) == 0) outs[k].shape[0] += 1;
        if (odd_dtype_for && i == 1) outs[k].dtype = SNUG_DTYPE_I32;
        k++;
    }
    if (add) outs[k++] = (snug_st_out){.name = add, .dtype = SNUG_DTYPE_F32, .n_dims = 1, .shape = {4}};
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    snug_st_writer *w = NULL;
    if (snug_st_writer_create(p, outs, k, &w, &err) != SNUG_OK || snug_st_writer_finish(w, &err) != SNUG_OK)
        abort();
    json_t *cfg = snug_config_to_json(c);
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (snug_json_write_file(cfg, p, &err) != SNUG_OK) abort();
    json_decref(cfg);
    free(outs);
    snug_mem_free(specs);
}

/* Loads rank 1 of 2 from a variant checkpoint; *err gets the message. */
static snug_status load_variant(const char *sub, const char *drop, const char *add,
                                const char *reshape, bool odd, snug_error *err)
{
    snug_model_config c = model(false);
    char d[512];
    snprintf(d, sizeof d, "%s/%s", g_dir, sub);
    mkdir(d, 0755);
    write_variant(d, &c, drop, add, reshape, odd ? SNUG_DTYPE_I32 : SNUG_DTYPE_NONE);
    snug_checkpoint *ck = NULL;
    snug_status st = snug_checkpoint_open(d, &ck, err);
    if (st != SNUG_OK) return st;
    snug_load_opts o = {.tp = 2, .rank = 1};
    snug_weights *w = NULL;
    st = snug_weights_load(ck, &o, &w, NULL, err);
    snug_weights_free(w);
    snug_checkpoint_close(ck);
    return st;
}

static void expect_load_error(const char *sub, const char *drop, const char *add, const char *reshape,
                              bool odd, snug_status want, const char *text)
{
    snug_error err = {0};
    CHECK_FAILS(load_variant(sub, drop, add, reshape, odd, &err), &err, want, text);
}

static void test_checkpoint_must_match(void)
{
    expect_load_error("missing", "model.layers.1.mlp.up_proj.weight", NULL, NULL, false, SNUG_FORMAT,
                      "the checkpoint lacks 1 tensor the model needs: 'model.layers.1.mlp.up_proj.weight'");
    expect_load_error("unused", NULL, "model.layers.0.self_attn.extra.weight", NULL, false, SNUG_FORMAT,
                      "the checkpoint holds 1 tensor the model does not use: "
                      "'model.layers.0.self_attn.extra.weight'");
    expect_load_error("escaped", NULL, "model.layers.0.extra\x1b[31m\xc2\x9b.weight", NULL, false, SNUG_FORMAT,
                      "does not use: 'model.layers.0.extra\\x1b[31m\\xc2\\x9b.weight'");
    snug_error e = {0};
    CHECK_OK(load_variant("ignorable", NULL, "model.layers.0.self_attn.rotary_emb.inv_freq", NULL,
                          false, &e), &e);
    expect_load_error("shape", NULL, NULL, "model.layers.0.self_attn.k_proj.weight", false, SNUG_FORMAT,
                      "tensor 'model.layers.0.self_attn.k_proj.weight' has shape [17, 64]; the config "
                      "implies [16, 64]");
    expect_load_error("dtype", NULL, NULL, NULL, true, SNUG_UNSUPPORTED,
                      "dtype I32 is not a weight type snug loads (F32, F16, BF16)");
    snug_load_opts o = {.tp = 3};
    snug_model_config c = model(false);
    char d[512];
    make("tp3", &c, SNUG_DTYPE_BF16, 1, d);
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(d, &ck, &err), &err);
    snug_weights *w = NULL;
    CHECK_FAILS(snug_weights_load(ck, &o, &w, NULL, &err), &err, SNUG_INVALID,
                "tensor-parallel size 3 does not fit this model: num_attention_heads 8 is not divisible "
                "by it; sizes that work: 1, 2, 4, 8");
    snug_checkpoint_close(ck);
}

int main(void)
{
    test_tmpdir(g_dir, sizeof g_dir);
    RUN(test_gqa_every_tp);
    RUN(test_qwen2_every_tp);
    RUN(test_head_dim_and_attention_bias);
    RUN(test_bytes_read_are_the_shards);
    RUN(test_special_values);
    RUN(test_staging_sized_to_conversions);
    RUN(test_out_of_memory_loop);
    RUN(test_truncated);
    RUN(test_checkpoint_must_match);
    test_rmtree(g_dir);
    return test_summary();
}
