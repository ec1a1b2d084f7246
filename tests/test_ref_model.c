/*
 * test_ref_model.c: checks the float64 reference model (tests/support/
 * ref_model.c) that snug's forward pass is tested against: stories260K's
 * logits and greedy ids against the llama2.c run.c fixture, rotary
 * frequencies and rotations worked out by hand (partial rotary, longrope's
 * frequencies and attention factor), hand-computable tiny models in
 * f16/bf16/f32 (Qwen2 biases, Llama attention_bias, tied and untied heads),
 * tiny Qwen3, Phi3 and Gemma3 models against a forward pass written out in
 * the test (per-head q/k norms, head_dim apart from hidden/heads, fused qkv
 * and gate_up, partial rotary, longrope, sliding window; Gemma3's norms of
 * 1 + w around attention and the MLP, GELU, embedding scale in the
 * checkpoint's dtype, sliding layers with their own window and rope base),
 * Gemma3's config defaults, and malformed directories and configs.
 */
#include "test.h"

#include "support/ref_model.h"

#include <complex.h>
#include <stdint.h>
#include <time.h>

/* ---- stories260K against llama2.c --------------------------------------------- */

#define FIX_MAX_IDS 1024

typedef struct fixture {
    int32_t prompt[FIX_MAX_IDS], ids[FIX_MAX_IDS];
    int n_prompt, n_ids;
    int n_logit_rows;
    int pos[2], token[2];
    double max[2], first8[2][8];
} fixture;

static int parse_ids(const char *s, int32_t *out)
{
    int n = 0;
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s || n == FIX_MAX_IDS) break;
        out[n++] = (int32_t)v;
        s = end;
    }
    return n;
}

/* Reads the first [case] of tests/data/stories260K/greedy.txt. */
static bool fixture_read(fixture *fx)
{
    memset(fx, 0, sizeof *fx);
    FILE *f = fopen("tests/data/stories260K/greedy.txt", "r");
    if (!f) return false;
    static char line[65536];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "[case]", 6) == 0 && ++cases > 1) break;
        if (cases != 1) continue;
        if (strncmp(line, "prompt_ids = ", 13) == 0) fx->n_prompt = parse_ids(line + 13, fx->prompt);
        if (strncmp(line, "ids = ", 6) == 0) fx->n_ids = parse_ids(line + 6, fx->ids);
        if (strncmp(line, "logits = ", 9) == 0 && fx->n_logit_rows < 2) {
            int r = fx->n_logit_rows;
            double *v = fx->first8[r];
            int argmax;
            if (sscanf(line + 9, "pos=%d token=%d argmax=%d max=%lf first8: %lf %lf %lf %lf %lf %lf %lf %lf",
                       &fx->pos[r], &fx->token[r], &argmax, &fx->max[r], &v[0], &v[1], &v[2],
                       &v[3], &v[4], &v[5], &v[6], &v[7]) == 12)
                fx->n_logit_rows++;
        }
    }
    fclose(f);
    return fx->n_prompt > 0 && fx->n_ids > fx->n_prompt && fx->n_logit_rows == 2;
}

static int argmax(const double *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static void test_stories260k_logits(void)
{
    static fixture fx;
    CHECK(fixture_read(&fx), "could not parse tests/data/stories260K/greedy.txt");
    ref_model *m = ref_model_load("models/stories260K");
    CHECK(m != NULL, "load models/stories260K");
    if (!m || fx.n_logit_rows != 2) goto done;
    int V = ref_model_vocab(m);
    CHECK(V == 512, "vocab %d", V);
    CHECK(fx.pos[0] == 0 && fx.pos[1] == 1, "fixture rows are positions 0 and 1");
    int32_t toks[2] = {fx.token[0], fx.token[1]};
    double *logits = malloc(2 * (size_t)V * sizeof(double));
    CHECK(ref_model_forward(m, toks, 2, logits) == 0, "forward");
    double max_err = 0.0;
    for (int r = 0; r < 2; r++) {
        const double *row = logits + (size_t)r * V;
        double mx = row[argmax(row, V)];
        max_err = fmax(max_err, fabs(mx - fx.max[r]));
        for (int i = 0; i < 8; i++) max_err = fmax(max_err, fabs(row[i] - fx.first8[r][i]));
    }
    /* the argmax of each row is the next token of the run */
    CHECK(argmax(logits, V) == fx.ids[1] && argmax(logits + V, V) == fx.ids[2],
          "argmax %d %d, fixture %d %d", argmax(logits, V), argmax(logits + V, V), fx.ids[1],
          fx.ids[2]);
    printf("  stories260K logits vs llama2.c (max + first 8, 2 positions): max |err| %.3g\n",
           max_err);
    CHECK(max_err < 1e-4, "max |err| %.3g >= 1e-4", max_err);
    free(logits);
done:
    ref_model_free(m);
}

static void test_stories260k_greedy(void)
{
    enum { N_CHECK = 64 }; /* ids compared (prompt included) */
    static fixture fx;
    CHECK(fixture_read(&fx), "could not parse tests/data/stories260K/greedy.txt");
    ref_model *m = ref_model_load("models/stories260K");
    CHECK(m != NULL, "load models/stories260K");
    if (!m || fx.n_ids < N_CHECK) goto done;
    int V = ref_model_vocab(m);
    int32_t ids[N_CHECK];
    double *logits = malloc((size_t)N_CHECK * V * sizeof(double));
    memcpy(ids, fx.prompt, (size_t)fx.n_prompt * sizeof(int32_t));
    for (int i = 0; i < fx.n_prompt; i++)
        CHECK(fx.prompt[i] == fx.ids[i], "prompt id %d: %d vs %d", i, fx.prompt[i], fx.ids[i]);
    clock_t t0 = clock();
    int n = fx.n_prompt, first_diff = -1;
    for (; n < N_CHECK; n++) {
        if (ref_model_forward(m, ids, n, logits) != 0) break;
        ids[n] = argmax(logits + (size_t)(n - 1) * V, V);
        if (ids[n] != fx.ids[n] && first_diff < 0) first_diff = n;
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("  stories260K greedy: %d of %d ids match llama2.c (%.2f s, full recompute per step)\n",
           first_diff < 0 ? n : first_diff, N_CHECK, secs);
    CHECK(n == N_CHECK && first_diff < 0, "first different id at %d (got %d, want %d)",
          first_diff, first_diff >= 0 ? ids[first_diff] : -1,
          first_diff >= 0 ? fx.ids[first_diff] : -1);
    free(logits);
done:
    ref_model_free(m);
}

/* ---- rotary embedding ------------------------------------------------------------ */

static ref_config rope_cfg(int head_dim, double theta)
{
    ref_config c;
    memset(&c, 0, sizeof c);
    c.head_dim = head_dim;
    c.rope_theta = theta;
    c.rope_kind = REF_ROPE_DEFAULT;
    c.rope_factor = 1.0;
    return c;
}

static void test_rope(void)
{
    ref_config c = rope_cfg(8, 10000.0);
    double inv[4];
    ref_rope_inv_freq(&c, inv);
    /* 1 / 10000^(2i/8) = 10^(-i) */
    double want_inv[4] = {1.0, 0.1, 0.01, 0.001};
    double err = 0.0;
    for (int i = 0; i < 4; i++) err = fmax(err, fabs(inv[i] - want_inv[i]) / want_inv[i]);
    CHECK(err < 1e-15, "default inv_freq rel err %.3g", err);

    /* position 0 is the identity */
    double x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    memcpy(y, x, sizeof x);
    ref_rope_apply(y, 8, 0, inv);
    CHECK(memcmp(x, y, sizeof x) == 0, "position 0 changed the vector");

    /* position 3: the pair (x[i], x[i+4]) is the complex number x[i] + i x[i+4]
     * turned by the angle 3 * 10^(-i) */
    memcpy(y, x, sizeof x);
    ref_rope_apply(y, 8, 3, inv);
    double rot_err = 0.0;
    for (int i = 0; i < 4; i++) {
        double complex z = (x[i] + I * x[i + 4]) * cexp(I * 3.0 * want_inv[i]);
        rot_err = fmax(rot_err, fmax(fabs(y[i] - creal(z)), fabs(y[i + 4] - cimag(z))));
    }
    /* and one pair by hand: cos 3 = -0.98999249660044542, sin 3 = 0.14112000805986721;
     * (1, 5) -> (cos 3 - 5 sin 3, 5 cos 3 + sin 3) */
    rot_err = fmax(rot_err, fabs(y[0] - (-0.98999249660044542 - 5 * 0.14112000805986721)));
    rot_err = fmax(rot_err, fabs(y[4] - (5 * -0.98999249660044542 + 0.14112000805986721)));
    printf("  rope at position 3: max |err| %.3g\n", rot_err);
    CHECK(rot_err < 1e-14, "rotation error %.3g", rot_err);

    /* linear: every frequency divided by the factor */
    c.rope_kind = REF_ROPE_LINEAR;
    c.rope_factor = 4.0;
    ref_rope_inv_freq(&c, inv);
    err = 0.0;
    for (int i = 0; i < 4; i++) err = fmax(err, fabs(inv[i] - want_inv[i] / 4.0) / want_inv[i]);
    CHECK(err < 1e-15, "linear inv_freq rel err %.3g", err);

    /* llama3 with head_dim 16, theta 10000, factor 8, low 1, high 4, original 8192:
     * base inv_freq[i] = 10^(-i/2), wavelength 2 pi 10^(i/2). The high-frequency
     * bound is 8192/4 = 2048, the low one 8192/1 = 8192:
     *   i = 0..5: wavelength <= 1987 < 2048: unchanged
     *   i = 6: wavelength 6283.19, between: smooth = (8192/6283.19 - 1)/3 = 0.1012658,
     *          inv = 1e-3 * ((1 - smooth)/8 + smooth) = 2.1360754e-4
     *   i = 7: wavelength 19869 > 8192: 10^(-3.5) / 8 = 3.9528471e-5 */
    c = rope_cfg(16, 10000.0);
    c.rope_kind = REF_ROPE_LLAMA3;
    c.rope_factor = 8.0;
    c.rope_low_freq_factor = 1.0;
    c.rope_high_freq_factor = 4.0;
    c.rope_original_max_pos = 8192.0;
    double inv16[8];
    ref_rope_inv_freq(&c, inv16);
    double want16[8] = {1.0, 0.31622776601683794, 0.1, 0.031622776601683794, 0.01,
                        0.0031622776601683794, 2.1360754402756864e-4, 3.952847075210474e-05};
    err = 0.0;
    for (int i = 0; i < 8; i++) err = fmax(err, fabs(inv16[i] - want16[i]) / want16[i]);
    printf("  llama3 inv_freq: max rel err %.3g\n", err);
    CHECK(err < 1e-12, "llama3 inv_freq rel err %.3g", err);
}

/* ---- hand-made tiny models ----------------------------------------------------------- */

/* The tiny model: hidden 4, 2 heads of dim 2 sharing 1 kv head, intermediate
 * 2, vocab 3, one layer. v_proj is zero with bias (1, 2), so every head's
 * attention output is (1, 2) at every position whatever q and k are; o_proj
 * is the identity (plus o bias for Llama), down_proj is zero. So the logits
 * of token t at any position are head . rmsnorm(embed[t] + (1,2,1,2) + bo) * norm. */
enum flaw {
    FLAW_NONE,
    FLAW_WRONG_SHAPE,  /* q_proj declared (4, 3) */
    FLAW_NO_BIAS,      /* q_proj.bias missing */
    FLAW_PAST_END,     /* the file ends 4 bytes before the last tensor's data does */
    FLAW_SIZE,         /* the last tensor's data_offsets span 4 bytes more than its shape */
    FLAW_HEADER_LEN,   /* header length larger than the file */
    FLAW_BAD_CONFIG,   /* config.json is not JSON */
    FLAW_NO_HIDDEN,    /* config.json has no hidden_size */
    FLAW_NO_WEIGHTS,   /* no model.safetensors */
};

typedef struct tensor_spec {
    const char *name, *dtype;
    int d0, d1; /* d1 = 0: a vector */
    const void *data;
} tensor_spec;

static const uint16_t EMBED_F16[12] = {
    0x3C00, 0x3800, 0xC000, 0x3400, /* 1, 0.5, -2, 0.25 */
    0x3E00, 0xBA00, 0x3C00, 0x0000, /* 1.5, -0.75, 1, 0 */
    0xBC00, 0x3C00, 0x0001, 0x3C00, /* -1, 1, 2^-24 (subnormal), 1 */
};
static const double EMBED[12] = {1, 0.5, -2, 0.25, 1.5, -0.75, 1, 0, -1, 1, 0x1p-24, 1};
static const uint16_t ONES_BF16[4] = {0x3F80, 0x3F80, 0x3F80, 0x3F80};
static const uint16_t NORM_BF16[4] = {0x3F80, 0x4000, 0xBF00, 0x3F80}; /* 1, 2, -0.5, 1 */
static const double NORM[4] = {1, 2, -0.5, 1};
static const uint16_t ZEROS_BF16[8] = {0};
static const uint16_t VBIAS_BF16[2] = {0x3F80, 0x4000}; /* 1, 2 */
static const float ONES_F32[4] = {1, 1, 1, 1};
static const float ZEROS_F32[8] = {0};
static const float EYE_F32[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
static const float ANY_F32[16] = {0.3f, -0.2f, 0.7f, 1.1f, -0.4f, 0.9f, 0.1f, -1.3f,
                                  0.6f, 0.2f,  -0.8f, 0.5f, 1.2f,  -0.6f, 0.4f, 0.05f};
static const float OBIAS_F32[4] = {0.5f, 0, 0, -0.5f};
static const float HEAD_F32[12] = {0.5f, -1, 2, 0.25f, 1, 1, 1, 1, -0.5f, 0.75f, 0, -2};

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    test_write_file(path, text, strlen(text));
}

static size_t dtype_size(const char *dtype)
{
    return strcmp(dtype, "F32") == 0 ? 4 : 2;
}

/* Writes dir/name, a safetensors file holding the tensors of specs. */
static void write_safetensors(const char *dir, const char *name, const tensor_spec *specs, int n,
                              enum flaw flaw)
{
    static char header[8192];
    static unsigned char file[16384];
    size_t hl = 0, off = 0;
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)specs[i].d0 * (size_t)(specs[i].d1 ? specs[i].d1 : 1) *
                       dtype_size(specs[i].dtype);
        size_t end = off + bytes + (flaw == FLAW_SIZE && i == n - 1 ? 4 : 0);
        if (specs[i].d1)
            hl += (size_t)snprintf(header + hl, sizeof header - hl,
                                   ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                                   specs[i].name, specs[i].dtype, specs[i].d0, specs[i].d1, off, end);
        else
            hl += (size_t)snprintf(header + hl, sizeof header - hl,
                                   ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                                   specs[i].name, specs[i].dtype, specs[i].d0, off, end);
        off += bytes;
    }
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "}");
    uint64_t len = flaw == FLAW_HEADER_LEN ? 1u << 20 : hl;
    for (int i = 0; i < 8; i++) file[i] = (unsigned char)(len >> (8 * i));
    memcpy(file + 8, header, hl);
    size_t pos = 8 + hl;
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)specs[i].d0 * (size_t)(specs[i].d1 ? specs[i].d1 : 1) *
                       dtype_size(specs[i].dtype);
        memcpy(file + pos, specs[i].data, bytes);
        pos += bytes;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    test_write_file(path, file, flaw == FLAW_PAST_END ? pos - 4 : pos);
}

/* Writes the tiny model into dir: Qwen2 with tied embeddings, or Llama
 * with attention_bias and its own lm_head; in one model.safetensors, or
 * (sharded) in two shards named by model.safetensors.index.json. */
static void write_tiny(const char *dir, bool qwen2, bool sharded, enum flaw flaw)
{
    char config[1024];
    snprintf(config, sizeof config,
             "{\"model_type\": \"%s\", \"hidden_act\": \"silu\", %s\"intermediate_size\": 2, "
             "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "
             "\"vocab_size\": 3, \"rms_norm_eps\": 1e-6, \"rope_theta\": 100.0, "
             "\"rope_scaling\": null, \"tie_word_embeddings\": %s, \"attention_bias\": %s}",
             qwen2 ? "qwen2" : "llama", flaw == FLAW_NO_HIDDEN ? "" : "\"hidden_size\": 4, ",
             qwen2 ? "true" : "false", qwen2 ? "false" : "true");
    write_text(dir, "config.json", flaw == FLAW_BAD_CONFIG ? "{\"model_type\": " : config);
    if (flaw == FLAW_NO_WEIGHTS) return;
    tensor_spec specs[20];
    int n = 0;
    specs[n++] = (tensor_spec){"model.embed_tokens.weight", "F16", 3, 4, EMBED_F16};
    specs[n++] = (tensor_spec){"model.layers.0.input_layernorm.weight", "BF16", 4, 0, ONES_BF16};
    specs[n++] = (tensor_spec){"model.layers.0.self_attn.q_proj.weight", "F32", 4,
                               flaw == FLAW_WRONG_SHAPE ? 3 : 4, ANY_F32};
    if (flaw != FLAW_NO_BIAS)
        specs[n++] = (tensor_spec){"model.layers.0.self_attn.q_proj.bias", "F32", 4, 0, ANY_F32};
    specs[n++] = (tensor_spec){"model.layers.0.self_attn.k_proj.weight", "F32", 2, 4, ANY_F32 + 8};
    specs[n++] = (tensor_spec){"model.layers.0.self_attn.k_proj.bias", "F32", 2, 0, ANY_F32 + 4};
    specs[n++] = (tensor_spec){"model.layers.0.self_attn.v_proj.weight", "BF16", 2, 4, ZEROS_BF16};
    specs[n++] = (tensor_spec){"model.layers.0.self_attn.v_proj.bias", "BF16", 2, 0, VBIAS_BF16};
    specs[n++] = (tensor_spec){"model.layers.0.self_attn.o_proj.weight", "F32", 4, 4, EYE_F32};
    if (!qwen2)
        specs[n++] = (tensor_spec){"model.layers.0.self_attn.o_proj.bias", "F32", 4, 0, OBIAS_F32};
    specs[n++] = (tensor_spec){"model.layers.0.post_attention_layernorm.weight", "F32", 4, 0, ONES_F32};
    specs[n++] = (tensor_spec){"model.layers.0.mlp.gate_proj.weight", "F32", 2, 4, ANY_F32};
    specs[n++] = (tensor_spec){"model.layers.0.mlp.up_proj.weight", "F32", 2, 4, ANY_F32 + 4};
    specs[n++] = (tensor_spec){"model.layers.0.mlp.down_proj.weight", "F32", 4, 2, ZEROS_F32};
    specs[n++] = (tensor_spec){"model.norm.weight", "BF16", 4, 0, NORM_BF16};
    if (!qwen2) specs[n++] = (tensor_spec){"lm_head.weight", "F32", 3, 4, HEAD_F32};
    if (!sharded) {
        write_safetensors(dir, "model.safetensors", specs, n, flaw);
        return;
    }
    int half = n / 2;
    write_safetensors(dir, "model-00001-of-00002.safetensors", specs, half, flaw);
    write_safetensors(dir, "model-00002-of-00002.safetensors", specs + half, n - half, flaw);
    static char index[8192];
    size_t len = (size_t)snprintf(index, sizeof index, "{\"metadata\": {}, \"weight_map\": {");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(index + len, sizeof index - len, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                                i ? ", " : "", specs[i].name, i < half ? 1 : 2);
    snprintf(index + len, sizeof index - len, "}}");
    write_text(dir, "model.safetensors.index.json", index);
}

static void check_tiny(bool qwen2, bool sharded)
{
    char dir[4096];
    test_tmpdir(dir, sizeof dir);
    write_tiny(dir, qwen2, sharded, FLAW_NONE);
    ref_model *m = ref_model_load(dir);
    CHECK(m != NULL, "load the tiny %s model", qwen2 ? "qwen2" : "llama");
    if (m) {
        int32_t toks[4] = {2, 0, 1, 2};
        double logits[4 * 3];
        CHECK(ref_model_forward(m, toks, 4, logits) == 0, "forward");
        double err = 0.0;
        for (int t = 0; t < 4; t++) {
            double y[4], ss = 0.0;
            for (int i = 0; i < 4; i++) {
                y[i] = EMBED[toks[t] * 4 + i] + (i % 2 ? 2.0 : 1.0) +
                       (qwen2 ? 0.0 : (double)OBIAS_F32[i]);
                ss += y[i] * y[i];
            }
            for (int i = 0; i < 4; i++) y[i] = y[i] / sqrt(ss / 4 + 1e-6) * NORM[i];
            for (int j = 0; j < 3; j++) {
                double want = 0.0;
                for (int i = 0; i < 4; i++)
                    want += (qwen2 ? EMBED[j * 4 + i] : (double)HEAD_F32[j * 4 + i]) * y[i];
                err = fmax(err, fabs(logits[t * 3 + j] - want));
            }
        }
        printf("  tiny %s model (f16/bf16/f32, %s head, %s): max |err| %.3g\n",
               qwen2 ? "qwen2" : "llama", qwen2 ? "tied" : "own", sharded ? "2 shards" : "1 file",
               err);
        CHECK(err < 1e-12, "tiny model logits error %.3g", err);
        int32_t bad = 3;
        CHECK(ref_model_forward(m, &bad, 1, logits) != 0, "token 3 of vocab 3 accepted");
    }
    ref_model_free(m);
    test_rmtree(dir);
}

static void test_tiny_models(void)
{
    check_tiny(true, false);
    check_tiny(false, false);
    check_tiny(true, true);
    check_tiny(false, true);
}

static void test_malformed(void)
{
    CHECK(ref_model_load("tests/data/no-such-model-dir") == NULL, "missing directory loaded");
    static const struct {
        enum flaw flaw;
        const char *what;
    } cases[] = {
        {FLAW_WRONG_SHAPE, "wrong shape"},     {FLAW_NO_BIAS, "missing q bias"},
        {FLAW_PAST_END, "data past the end"},  {FLAW_SIZE, "offsets do not match the shape"},
        {FLAW_HEADER_LEN, "header length"},
        {FLAW_BAD_CONFIG, "config not JSON"},  {FLAW_NO_HIDDEN, "no hidden_size"},
        {FLAW_NO_WEIGHTS, "no safetensors"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[4096];
        test_tmpdir(dir, sizeof dir);
        write_tiny(dir, true, false, cases[i].flaw);
        ref_model *m = ref_model_load(dir);
        CHECK(m == NULL, "%s: loaded", cases[i].what);
        ref_model_free(m);
        test_rmtree(dir);
    }
}

/* ---- partial rotary and longrope --------------------------------------------------- */

static void test_rope_partial(void)
{
    /* head_dim 8, rotary_dim 4, theta 100: the frequencies are taken over the 4
     * rotary dims, 100^(-0/4) = 1 and 100^(-2/4) = 0.1 (over the head they
     * would be 1 and 100^(-2/8) = 0.316) */
    ref_config c = rope_cfg(8, 100.0);
    c.rotary_dim = 4;
    double inv[2];
    ref_rope_inv_freq(&c, inv);
    CHECK(fabs(inv[0] - 1.0) < 1e-15 && fabs(inv[1] - 0.1) < 1e-15,
          "partial inv_freq %.17g %.17g, want 1 0.1", inv[0], inv[1]);

    /* position 2: (x0, x2) turned by 2 rad, (x1, x3) by 0.2 rad (rotate_half
     * within the 4 rotary dims); x4..x7 exactly as they were. Then the same
     * with attention factor 1.5: the 4 rotary values times 1.5, the rest not. */
    for (int scaled = 0; scaled < 2; scaled++) {
        double af = scaled ? 1.5 : 1.0;
        c.rope_attn_factor = scaled ? 1.5 : 0.0; /* 0: 1, as a hand-made config */
        double x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
        memcpy(y, x, sizeof x);
        ref_rope_rotate(&c, y, 2, inv);
        double err = 0.0;
        for (int i = 0; i < 2; i++) {
            double complex z = af * (x[i] + I * x[i + 2]) * cexp(I * 2.0 * inv[i]);
            err = fmax(err, fmax(fabs(y[i] - creal(z)), fabs(y[i + 2] - cimag(z))));
        }
        /* by hand: cos 2 = -0.41614683654714241, sin 2 = 0.90929742682568170;
         * (1, 3) -> af (cos 2 - 3 sin 2, 3 cos 2 + sin 2) */
        err = fmax(err, fabs(y[0] - af * (-0.41614683654714241 - 3 * 0.90929742682568170)));
        err = fmax(err, fabs(y[2] - af * (3 * -0.41614683654714241 + 0.90929742682568170)));
        printf("  partial rope (4 of 8 dims, attention factor %g) at position 2: max |err| %.3g\n",
               af, err);
        CHECK(err < 1e-14, "partial rotation error %.3g (factor %g)", err, af);
        CHECK(memcmp(x + 4, y + 4, 4 * sizeof(double)) == 0,
              "values past rotary_dim changed (factor %g): %g %g %g %g", af, y[4], y[5], y[6], y[7]);
    }
}

/* Writes config text into a new directory's config.json and loads it. */
static int load_config_text(const char *text, ref_config *cfg)
{
    char dir[4096], path[4200];
    test_tmpdir(dir, sizeof dir);
    write_text(dir, "config.json", text);
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = ref_config_load(path, cfg);
    test_rmtree(dir);
    return rc;
}

static void test_longrope_config(void)
{
    /* Phi-3-like: hidden 16, 2 heads of 8, partial 0.5 -> rotary_dim 4, two
     * frequencies, base 1 and 10000^(-2/4) = 0.01. max 131072 / original 4096 =
     * 32, attention factor sqrt(1 + ln 32 / ln 4096) = sqrt(1 + 5/12) =
     * sqrt(17/12) = 1.1902380714238083. short {1, 2}: {1, 0.005}; long {4, 8}:
     * {0.25, 0.00125}. Spelled "su", as older Phi-3 configs do. */
    static const char *fmt =
        "{\"model_type\": \"phi3\", \"hidden_size\": 16, \"intermediate_size\": 8, "
        "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 4, "
        "\"partial_rotary_factor\": 0.5, \"max_position_embeddings\": 131072, "
        "\"original_max_position_embeddings\": %s, \"sliding_window\": 2047, "
        "\"rope_scaling\": {\"type\": \"%s\", \"short_factor\": [1, 2], "
        "\"long_factor\": %s%s}}";
    char text[1024];
    ref_config c;
    snprintf(text, sizeof text, fmt, "4096", "su", "[4, 8]", "");
    CHECK(load_config_text(text, &c) == 0, "load the longrope config");
    CHECK(c.rope_kind == REF_ROPE_LONGROPE && c.rotary_dim == 4 && c.head_dim == 8 &&
              c.rope_n_factors == 2 && !c.rope_long,
          "kind %d rotary_dim %d head_dim %d factors %d long %d", (int)c.rope_kind, c.rotary_dim,
          c.head_dim, c.rope_n_factors, (int)c.rope_long);
    CHECK(c.fused_qkv && c.fused_gate_up && !c.qkv_bias && !c.o_bias && !c.qk_norm,
          "phi3 description: fused %d %d biases %d %d qk_norm %d", (int)c.fused_qkv,
          (int)c.fused_gate_up, (int)c.qkv_bias, (int)c.o_bias, (int)c.qk_norm);
    CHECK(c.sliding_window == 2047, "phi3 sliding_window %d", c.sliding_window);
    CHECK(fabs(c.rms_norm_eps - 1e-5) < 1e-20, "phi3 default rms_norm_eps %g", c.rms_norm_eps);
    double af_err = fabs(c.rope_attn_factor - 1.1902380714238083);
    printf("  longrope attention factor %.17g, |err| %.3g\n", c.rope_attn_factor, af_err);
    CHECK(af_err < 1e-15, "longrope attention factor %.17g", c.rope_attn_factor);
    double inv[2], err = 0.0;
    ref_rope_inv_freq(&c, inv);
    err = fmax(fabs(inv[0] - 1.0), fabs(inv[1] - 0.005) / 0.005);
    c.rope_long = true;
    ref_rope_inv_freq(&c, inv);
    err = fmax(err, fmax(fabs(inv[0] - 0.25) / 0.25, fabs(inv[1] - 0.00125) / 0.00125));
    CHECK(err < 1e-14, "longrope inv_freq rel err %.3g", err);

    /* attention_factor given: taken as it is; an original equal to the maximum: 1 */
    snprintf(text, sizeof text, fmt, "4096", "longrope", "[4, 8]", ", \"attention_factor\": 1.25");
    CHECK(load_config_text(text, &c) == 0 && c.rope_attn_factor == 1.25,
          "given attention_factor: %g", c.rope_attn_factor);
    snprintf(text, sizeof text, fmt, "131072", "longrope", "[4, 8]", "");
    CHECK(load_config_text(text, &c) == 0 && c.rope_attn_factor == 1.0,
          "factor 1: attention factor %g", c.rope_attn_factor);

    /* refused: a list of the wrong length, a factor <= 0, yarn */
    snprintf(text, sizeof text, fmt, "4096", "longrope", "[4, 8, 16]", "");
    CHECK(load_config_text(text, &c) != 0, "long_factor of 3 for 2 frequencies accepted");
    snprintf(text, sizeof text, fmt, "4096", "longrope", "[4, 0]", "");
    CHECK(load_config_text(text, &c) != 0, "long_factor 0 accepted");
    snprintf(text, sizeof text, fmt, "4096", "yarn", "[4, 8]", "");
    CHECK(load_config_text(text, &c) != 0, "rope type yarn accepted");

    /* partial rotary outside phi3, a sliding layer, an odd rotary_dim: refused */
    static const char *bad[] = {
        "{\"model_type\": \"llama\", \"hidden_size\": 16, \"intermediate_size\": 8, "
        "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 4, "
        "\"partial_rotary_factor\": 0.5}",
        "{\"model_type\": \"qwen3\", \"hidden_size\": 16, \"intermediate_size\": 8, "
        "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"vocab_size\": 4, "
        "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
        "{\"model_type\": \"phi3\", \"hidden_size\": 16, \"intermediate_size\": 8, "
        "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 4, "
        "\"partial_rotary_factor\": 0.375}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(load_config_text(bad[i], &c) != 0, "bad config %zu accepted", i);

    /* qwen3: head_dim 128 when absent (Qwen3Config's default), no biases */
    CHECK(load_config_text("{\"model_type\": \"qwen3\", \"hidden_size\": 16, "
                           "\"intermediate_size\": 8, \"num_hidden_layers\": 1, "
                           "\"num_attention_heads\": 2, \"vocab_size\": 4}", &c) == 0 &&
              c.head_dim == 128 && c.rotary_dim == 128 && c.qk_norm && !c.qkv_bias && !c.o_bias,
          "qwen3 defaults: head_dim %d rotary_dim %d qk_norm %d biases %d %d", c.head_dim,
          c.rotary_dim, (int)c.qk_norm, (int)c.qkv_bias, (int)c.o_bias);
}

/* ---- tiny Qwen3 and Phi3 models against a forward written out here ---------------- */

/* One layer, one head sharing one kv head, hidden 4, intermediate 2, vocab 3,
 * head_dim D (qwen3: 2, which is not hidden / heads; phi3: 4 with rotary_dim
 * R = 2). Weights are 0.9 sin(1.7 i + seed) in f32, norms 1 + 0.5 sin(...),
 * so that every part changes the logits. */
typedef struct tiny2 {
    int D, R;
    float embed[12], attn_norm[4], wq[16], wk[16], wv[16], wo[16], q_norm[4], k_norm[4];
    float ffn_norm[4], gate[8], up[8], down[8], norm[4], head[12];
    float qkv[48], gate_up[16]; /* phi3's fused copies */
} tiny2;

/* What the expected forward does; the variants prove the test can fail. */
typedef struct tiny2_run {
    bool qk_norm, swap_gate_up;
    int R, window;       /* rotary dims; window 0: all */
    double inv[2], af;   /* rotary frequencies (R / 2), attention factor */
} tiny2_run;

static void fill(float *w, int n, double seed, double base, double amp)
{
    for (int i = 0; i < n; i++) w[i] = (float)(base + amp * sin(1.7 * i + seed));
}

static void tiny2_make(tiny2 *m, int D, int R)
{
    memset(m, 0, sizeof *m);
    m->D = D;
    m->R = R;
    fill(m->embed, 12, 0.1, 0, 0.9);
    fill(m->attn_norm, 4, 0.2, 1, 0.5);
    fill(m->wq, 4 * D, 0.3, 0, 0.9);
    fill(m->wk, 4 * D, 0.4, 0, 0.9);
    fill(m->wv, 4 * D, 0.5, 0, 0.9);
    fill(m->wo, 4 * D, 0.6, 0, 0.9);
    fill(m->q_norm, D, 0.7, 1, 0.5);
    fill(m->k_norm, D, 0.8, 1, 0.5);
    fill(m->ffn_norm, 4, 0.9, 1, 0.5);
    fill(m->gate, 8, 1.0, 0, 0.9);
    fill(m->up, 8, 1.1, 0, 0.9);
    fill(m->down, 8, 1.2, 0, 0.9);
    fill(m->norm, 4, 1.3, 1, 0.5);
    fill(m->head, 12, 1.4, 0, 0.9);
    memcpy(m->qkv, m->wq, 4 * D * sizeof(float));
    memcpy(m->qkv + 4 * D, m->wk, 4 * D * sizeof(float));
    memcpy(m->qkv + 8 * D, m->wv, 4 * D * sizeof(float));
    memcpy(m->gate_up, m->gate, 8 * sizeof(float));
    memcpy(m->gate_up + 8, m->up, 8 * sizeof(float));
}

/* y (n) = x / rms(x) * w */
static void tiny_rms(double *y, const double *x, const float *w, int n)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    for (int i = 0; i < n; i++) y[i] = x[i] / sqrt(ss / n + 1e-6) * w[i];
}

/* y (rows) = W (rows, cols) x */
static void tiny_mul(double *y, const float *w, const double *x, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        y[r] = 0.0;
        for (int c = 0; c < cols; c++) y[r] += (double)w[r * cols + c] * x[c];
    }
}

/* Turns head x (D) at position t: the pair (x[i], x[i + R/2]) as one complex
 * number, times af e^(i t inv[i]); x[R..D) as it is. */
static void tiny_rope(double *x, int t, const tiny2_run *r)
{
    int half = r->R / 2;
    for (int i = 0; i < half; i++) {
        double complex z = r->af * (x[i] + I * x[i + half]) * cexp(I * t * r->inv[i]);
        x[i] = creal(z);
        x[i + half] = cimag(z);
    }
}

/* The logits (n x 3) of tokens toks under run r, written from the
 * definitions (Qwen3Attention, Phi3Attention, the Llama MLP). */
static void tiny2_expect(const tiny2 *m, const tiny2_run *r, const int32_t *toks, int n,
                         double *logits)
{
    int D = m->D;
    double x[4][4], q[4][4], k[4][4], v[4][4], h[4];
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < 4; i++) x[t][i] = m->embed[toks[t] * 4 + i];
        tiny_rms(h, x[t], m->attn_norm, 4);
        tiny_mul(q[t], m->wq, h, D, 4);
        tiny_mul(k[t], m->wk, h, D, 4);
        tiny_mul(v[t], m->wv, h, D, 4);
        if (r->qk_norm) {
            tiny_rms(q[t], q[t], m->q_norm, D);
            tiny_rms(k[t], k[t], m->k_norm, D);
        }
        tiny_rope(q[t], t, r);
        tiny_rope(k[t], t, r);
    }
    for (int t = 0; t < n; t++) {
        double p[4], sum = 0.0, a[4] = {0}, o[4], g[2], u[2], mid[2], d[4], y[4];
        int s0 = r->window && t - r->window + 1 > 0 ? t - r->window + 1 : 0;
        for (int s = s0; s <= t; s++) {
            double dot = 0.0;
            for (int i = 0; i < D; i++) dot += q[t][i] * k[s][i];
            p[s] = exp(dot / sqrt((double)D)); /* small scores: no max needed */
            sum += p[s];
        }
        for (int s = s0; s <= t; s++)
            for (int i = 0; i < D; i++) a[i] += p[s] / sum * v[s][i];
        tiny_mul(o, m->wo, a, 4, D);
        for (int i = 0; i < 4; i++) x[t][i] += o[i];
        tiny_rms(h, x[t], m->ffn_norm, 4);
        tiny_mul(g, r->swap_gate_up ? m->up : m->gate, h, 2, 4);
        tiny_mul(u, r->swap_gate_up ? m->gate : m->up, h, 2, 4);
        for (int i = 0; i < 2; i++) mid[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        tiny_mul(d, m->down, mid, 4, 2);
        for (int i = 0; i < 4; i++) x[t][i] += d[i];
        tiny_rms(y, x[t], m->norm, 4);
        tiny_mul(logits + t * 3, m->head, y, 3, 4);
    }
}

/* Writes m into dir as qwen3 (separate projections, q/k norms) or phi3 (fused
 * qkv_proj and gate_up_proj) with config text cfg_text; without_q_norm
 * leaves q_norm out (a flaw the loader must catch). */
static void tiny2_write(const char *dir, const tiny2 *m, bool phi3, const char *cfg_text,
                        bool without_q_norm)
{
    int D = m->D;
    write_text(dir, "config.json", cfg_text);
    tensor_spec specs[20];
    int n = 0;
    specs[n++] = (tensor_spec){"model.embed_tokens.weight", "F32", 3, 4, m->embed};
    specs[n++] = (tensor_spec){"model.layers.0.input_layernorm.weight", "F32", 4, 0, m->attn_norm};
    if (phi3) {
        specs[n++] = (tensor_spec){"model.layers.0.self_attn.qkv_proj.weight", "F32", 3 * D, 4, m->qkv};
    } else {
        specs[n++] = (tensor_spec){"model.layers.0.self_attn.q_proj.weight", "F32", D, 4, m->wq};
        specs[n++] = (tensor_spec){"model.layers.0.self_attn.k_proj.weight", "F32", D, 4, m->wk};
        specs[n++] = (tensor_spec){"model.layers.0.self_attn.v_proj.weight", "F32", D, 4, m->wv};
        if (!without_q_norm)
            specs[n++] = (tensor_spec){"model.layers.0.self_attn.q_norm.weight", "F32", D, 0, m->q_norm};
        specs[n++] = (tensor_spec){"model.layers.0.self_attn.k_norm.weight", "F32", D, 0, m->k_norm};
    }
    specs[n++] = (tensor_spec){"model.layers.0.self_attn.o_proj.weight", "F32", 4, D, m->wo};
    specs[n++] = (tensor_spec){"model.layers.0.post_attention_layernorm.weight", "F32", 4, 0, m->ffn_norm};
    if (phi3) {
        specs[n++] = (tensor_spec){"model.layers.0.mlp.gate_up_proj.weight", "F32", 4, 4, m->gate_up};
    } else {
        specs[n++] = (tensor_spec){"model.layers.0.mlp.gate_proj.weight", "F32", 2, 4, m->gate};
        specs[n++] = (tensor_spec){"model.layers.0.mlp.up_proj.weight", "F32", 2, 4, m->up};
    }
    specs[n++] = (tensor_spec){"model.layers.0.mlp.down_proj.weight", "F32", 4, 2, m->down};
    specs[n++] = (tensor_spec){"model.norm.weight", "F32", 4, 0, m->norm};
    specs[n++] = (tensor_spec){"lm_head.weight", "F32", 3, 4, m->head};
    write_safetensors(dir, "model.safetensors", specs, n, FLAW_NONE);
}

static double max_diff(const double *a, const double *b, int n)
{
    double d = 0.0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d;
}

/* Runs m from dir and compares with the expected logits of run r; variants
 * (other runs) must differ from r by more than 1e-6, far above the 1e-12 it
 * allows, so that the check could fail. */
static void tiny2_check(ref_model *m, const tiny2 *t, const tiny2_run *r, const tiny2_run *variants,
                        int n_variants, const char *what)
{
    enum { N = 4 };
    static const int32_t toks[N] = {2, 0, 1, 2};
    double got[N * 3], want[N * 3], other[N * 3];
    CHECK(ref_model_forward(m, toks, N, got) == 0, "%s: forward", what);
    tiny2_expect(t, r, toks, N, want);
    double err = max_diff(got, want, N * 3), sep = INFINITY;
    for (int i = 0; i < n_variants; i++) {
        tiny2_expect(t, &variants[i], toks, N, other);
        sep = fmin(sep, max_diff(other, want, N * 3));
    }
    printf("  %s: max |err| %.3g (nearest wrong variant %.3g away)\n", what, err, sep);
    CHECK(err < 1e-12, "%s: logits error %.3g", what, err);
    CHECK(sep > 1e-6, "%s: a variant is only %.3g away: the check could not fail", what, sep);
}

static void test_tiny_qwen3(void)
{
    static tiny2 t;
    tiny2_make(&t, 2, 2);
    static const char *cfg =
        "{\"model_type\": \"qwen3\", \"hidden_act\": \"silu\", \"hidden_size\": 4, "
        "\"intermediate_size\": 2, \"num_hidden_layers\": 1, \"num_attention_heads\": 1, "
        "\"num_key_value_heads\": 1, \"head_dim\": 2, \"vocab_size\": 3, \"rms_norm_eps\": 1e-6, "
        "\"rope_theta\": 100.0, \"tie_word_embeddings\": false, \"attention_bias\": false, "
        "\"use_sliding_window\": false, \"sliding_window\": null}";
    char dir[4096];
    test_tmpdir(dir, sizeof dir);
    tiny2_write(dir, &t, false, cfg, false);
    ref_model *m = ref_model_load(dir);
    CHECK(m != NULL, "load the tiny qwen3 model");
    if (m) {
        /* head_dim 2: one frequency, theta^0 = 1 */
        tiny2_run r = {.qk_norm = true, .R = 2, .inv = {1.0}, .af = 1.0};
        tiny2_run no_norm = r, gate_up = r;
        no_norm.qk_norm = false;
        gate_up.swap_gate_up = true;
        tiny2_run variants[] = {no_norm, gate_up};
        tiny2_check(m, &t, &r, variants, 2, "tiny qwen3 (q/k norm per head, head_dim 2 of hidden 4)");
    }
    ref_model_free(m);
    test_rmtree(dir);

    test_tmpdir(dir, sizeof dir);
    tiny2_write(dir, &t, false, cfg, true);
    m = ref_model_load(dir);
    CHECK(m == NULL, "qwen3 without q_norm loaded");
    ref_model_free(m);
    test_rmtree(dir);
}

static void test_tiny_phi3(void)
{
    static tiny2 t;
    tiny2_make(&t, 4, 2);
    static const char *fmt =
        "{\"model_type\": \"phi3\", \"hidden_act\": \"silu\", \"hidden_size\": 4, "
        "\"intermediate_size\": 2, \"num_hidden_layers\": 1, \"num_attention_heads\": 1, "
        "\"num_key_value_heads\": 1, \"vocab_size\": 3, \"rms_norm_eps\": 1e-6, "
        "\"rope_theta\": 100.0, \"partial_rotary_factor\": 0.5, \"tie_word_embeddings\": false, "
        "\"max_position_embeddings\": 8192, \"original_max_position_embeddings\": 4096, %s}";
    char dir[4096], cfg[2048];

    /* partial rotary (2 of 4 dims), fused qkv and gate_up, no window, default rope */
    snprintf(cfg, sizeof cfg, fmt, "\"sliding_window\": null, \"rope_scaling\": null");
    test_tmpdir(dir, sizeof dir);
    tiny2_write(dir, &t, true, cfg, false);
    ref_model *m = ref_model_load(dir);
    CHECK(m != NULL, "load the tiny phi3 model");
    if (m) {
        tiny2_run r = {.R = 2, .inv = {1.0}, .af = 1.0};
        tiny2_run full = r, gate_up = r;
        full.R = 4; /* the whole head turned: frequencies 1, 100^(-1/2) */
        full.inv[1] = 0.1;
        gate_up.swap_gate_up = true;
        tiny2_run variants[] = {full, gate_up};
        tiny2_check(m, &t, &r, variants, 2, "tiny phi3 (fused qkv/gate_up, rope on 2 of 4 dims)");
    }
    ref_model_free(m);
    test_rmtree(dir);

    /* longrope and a window of 2: 8192 / 4096 = 2, attention factor
     * sqrt(1 + ln 2 / ln 4096) = sqrt(13/12); the one frequency 1 / 2.5 (short)
     * or 1 / 5 (long) */
    snprintf(cfg, sizeof cfg, fmt,
             "\"sliding_window\": 2, \"rope_scaling\": {\"type\": \"longrope\", "
             "\"short_factor\": [2.5], \"long_factor\": [5.0]}");
    test_tmpdir(dir, sizeof dir);
    tiny2_write(dir, &t, true, cfg, false);
    m = ref_model_load(dir);
    CHECK(m != NULL, "load the tiny phi3 longrope model");
    if (m) {
        double af = sqrt(13.0 / 12.0);
        tiny2_run r = {.R = 2, .window = 2, .inv = {1.0 / 2.5}, .af = af};
        tiny2_run no_window = r, no_af = r, longf = r;
        no_window.window = 0;
        no_af.af = 1.0;
        longf.inv[0] = 1.0 / 5.0;
        tiny2_run variants[] = {no_window, no_af, longf};
        tiny2_check(m, &t, &r, variants, 3, "tiny phi3 longrope short, window 2");
        ref_model_set_rope_long(m, true);
        tiny2_run variants_long[] = {r};
        tiny2_check(m, &t, &longf, variants_long, 1, "tiny phi3 longrope long, window 2");
    }
    ref_model_free(m);
    test_rmtree(dir);
}

/* ---- a tiny Gemma 3 against a forward written out here ---------------------------- */

/* Three layers (0 and 2 sliding, 1 full), hidden 6, two heads of dim 4
 * sharing one kv head (q_dim 8 beside hidden 6), intermediate 3, vocab 5.
 * Weights 0.9 sin(1.7 i + seed), norm weights 0.5 sin(...) (offsets from 1),
 * every value a bfloat16 so that the same model can be written in F32 and
 * in BF16. */
enum { TG_H = 6, TG_HEADS = 2, TG_D = 4, TG_QD = 8, TG_KVD = 4, TG_I = 3, TG_V = 5, TG_L = 3, TG_N = 6 };

typedef struct tg_layer {
    float attn_norm[TG_H], wq[TG_QD * TG_H], wk[TG_KVD * TG_H], wv[TG_KVD * TG_H], wo[TG_H * TG_QD];
    float q_norm[TG_D], k_norm[TG_D], post_attn[TG_H], pre_ffn[TG_H], post_ffn[TG_H];
    float gate[TG_I * TG_H], up[TG_I * TG_H], down[TG_H * TG_I];
} tg_layer;

typedef struct tinyg {
    float embed[TG_V * TG_H], norm[TG_H], head[TG_V * TG_H];
    tg_layer L[TG_L];
    uint16_t bf16[2048]; /* BF16 copies of the tensors as they are written */
    int n_bf16;
} tinyg;

/* What the expected forward does; the variants prove the test can fail. */
enum tg_act { TG_GELU_TANH, TG_GELU_ERF, TG_SILU };
typedef struct tg_run {
    double embed_scale;
    bool plus_one;         /* norms multiply by 1 + w (false: by w) */
    bool sandwich;         /* the attention and MLP outputs normed before the residual */
    enum tg_act act;
    bool sliding[TG_L];    /* the layers with the window and the local rope */
    int window;            /* the sliding layers' */
    bool window_all;       /* the window on every layer */
    double inv_local[2], inv_full[2];
    double score_div;      /* scores are q.k / sqrt(this) */
} tg_run;

/* w (n) = 0.9 sin(1.7 i + seed) (norms: 0.5 sin), rounded to bfloat16 values. */
static void tg_fill(float *w, int n, double seed, double amp)
{
    fill(w, n, seed, 0, amp);
    for (int i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &w[i], 4);
        bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
        memcpy(&w[i], &bits, 4);
    }
}

static void tg_make(tinyg *m)
{
    memset(m, 0, sizeof *m);
    tg_fill(m->embed, TG_V * TG_H, 0.1, 0.9);
    tg_fill(m->norm, TG_H, 0.2, 0.5);
    tg_fill(m->head, TG_V * TG_H, 0.3, 0.9);
    for (int l = 0; l < TG_L; l++) {
        tg_layer *L = &m->L[l];
        double s = 1.0 + l;
        tg_fill(L->attn_norm, TG_H, s + 0.01, 0.5);
        tg_fill(L->wq, TG_QD * TG_H, s + 0.02, 0.9);
        tg_fill(L->wk, TG_KVD * TG_H, s + 0.03, 0.9);
        tg_fill(L->wv, TG_KVD * TG_H, s + 0.04, 0.9);
        tg_fill(L->wo, TG_H * TG_QD, s + 0.05, 0.9);
        tg_fill(L->q_norm, TG_D, s + 0.06, 0.5);
        tg_fill(L->k_norm, TG_D, s + 0.07, 0.5);
        tg_fill(L->post_attn, TG_H, s + 0.08, 0.5);
        tg_fill(L->pre_ffn, TG_H, s + 0.09, 0.5);
        tg_fill(L->post_ffn, TG_H, s + 0.10, 0.5);
        tg_fill(L->gate, TG_I * TG_H, s + 0.11, 0.9);
        tg_fill(L->up, TG_I * TG_H, s + 0.12, 0.9);
        tg_fill(L->down, TG_H * TG_I, s + 0.13, 0.9);
    }
}

/* y (n) = x / rms(x) * (1 + w), or * w without plus_one; y may be x */
static void tg_rms(double *y, const double *x, const float *w, int n, bool plus_one)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * ((plus_one ? 1.0 : 0.0) + w[i]);
}

/* Turns head x (4 values) at position t: (x0, x2) as one complex number by
 * t inv[0], (x1, x3) by t inv[1] (NeoX's half split). */
static void tg_rope(double *x, int t, const double *inv)
{
    for (int i = 0; i < 2; i++) {
        double complex z = (x[i] + I * x[i + 2]) * cexp(I * t * inv[i]);
        x[i] = creal(z);
        x[i + 2] = cimag(z);
    }
}

/* The logits (n x vocab) of toks under run r, written from
 * Gemma3ForCausalLM's definition; head NULL: tied to the embeddings. */
static void tg_expect(const tinyg *m, const tg_run *r, const float *head, const int32_t *toks, int n,
                      double *logits)
{
    double x[TG_N][TG_H];
    for (int t = 0; t < n; t++)
        for (int i = 0; i < TG_H; i++) x[t][i] = m->embed[toks[t] * TG_H + i] * r->embed_scale;
    for (int l = 0; l < TG_L; l++) {
        const tg_layer *L = &m->L[l];
        int window = r->sliding[l] || r->window_all ? r->window : 0;
        const double *inv = r->sliding[l] ? r->inv_local : r->inv_full;
        double q[TG_N][TG_QD], k[TG_N][TG_KVD], v[TG_N][TG_KVD], h[TG_H];
        for (int t = 0; t < n; t++) {
            tg_rms(h, x[t], L->attn_norm, TG_H, r->plus_one);
            tiny_mul(q[t], L->wq, h, TG_QD, TG_H);
            tiny_mul(k[t], L->wk, h, TG_KVD, TG_H);
            tiny_mul(v[t], L->wv, h, TG_KVD, TG_H);
            for (int hd = 0; hd < TG_HEADS; hd++) {
                tg_rms(q[t] + hd * TG_D, q[t] + hd * TG_D, L->q_norm, TG_D, r->plus_one);
                tg_rope(q[t] + hd * TG_D, t, inv);
            }
            tg_rms(k[t], k[t], L->k_norm, TG_D, r->plus_one);
            tg_rope(k[t], t, inv);
        }
        for (int t = 0; t < n; t++) {
            double a[TG_QD] = {0}, o[TG_H], g[TG_I], u[TG_I], mid[TG_I], d[TG_H];
            int s0 = window && t - window + 1 > 0 ? t - window + 1 : 0;
            for (int hd = 0; hd < TG_HEADS; hd++) { /* both heads read kv head 0 */
                double p[TG_N], sum = 0.0;
                for (int s = s0; s <= t; s++) {
                    double dot = 0.0;
                    for (int i = 0; i < TG_D; i++) dot += q[t][hd * TG_D + i] * k[s][i];
                    p[s] = exp(dot / sqrt(r->score_div)); /* small scores: no max needed */
                    sum += p[s];
                }
                for (int s = s0; s <= t; s++)
                    for (int i = 0; i < TG_D; i++) a[hd * TG_D + i] += p[s] / sum * v[s][i];
            }
            tiny_mul(o, L->wo, a, TG_H, TG_QD);
            if (r->sandwich) tg_rms(o, o, L->post_attn, TG_H, r->plus_one);
            for (int i = 0; i < TG_H; i++) x[t][i] += o[i];
            tg_rms(h, x[t], L->pre_ffn, TG_H, r->plus_one);
            tiny_mul(g, L->gate, h, TG_I, TG_H);
            tiny_mul(u, L->up, h, TG_I, TG_H);
            for (int i = 0; i < TG_I; i++) {
                double z = g[i];
                double act = r->act == TG_SILU       ? z / (1.0 + exp(-z))
                             : r->act == TG_GELU_ERF ? 0.5 * z * (1.0 + erf(z / sqrt(2.0)))
                                                     : 0.5 * z * (1.0 + tanh(sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
                mid[i] = act * u[i];
            }
            tiny_mul(d, L->down, mid, TG_H, TG_I);
            if (r->sandwich) tg_rms(d, d, L->post_ffn, TG_H, r->plus_one);
            for (int i = 0; i < TG_H; i++) x[t][i] += d[i];
        }
    }
    for (int t = 0; t < n; t++) {
        double y[TG_H];
        tg_rms(y, x[t], m->norm, TG_H, r->plus_one);
        tiny_mul(logits + t * TG_V, head ? head : m->embed, y, TG_V, TG_H);
    }
}

/* The tensor spec of w (n values, d0 x d1) as dtype: the floats, or their
 * bfloat16 bits kept in m. */
static tensor_spec tg_spec(tinyg *m, const char *name, const char *dtype, int d0, int d1, const float *w)
{
    if (strcmp(dtype, "F32") == 0) return (tensor_spec){name, dtype, d0, d1, w};
    uint16_t *bits = m->bf16 + m->n_bf16;
    for (int i = 0; i < d0 * (d1 ? d1 : 1); i++) {
        uint32_t b;
        memcpy(&b, &w[i], 4);
        bits[i] = (uint16_t)(b >> 16); /* exact: the values are bfloat16s */
    }
    m->n_bf16 += d0 * (d1 ? d1 : 1);
    return (tensor_spec){name, dtype, d0, d1, bits};
}

/* Writes m into dir in dtype ("F32" or "BF16") with config text cfg_text,
 * with lm_head.weight when untied; without_pre_ffn leaves layer 1's
 * pre_feedforward_layernorm out (a flaw the loader must catch). */
static void tg_write(const char *dir, tinyg *m, const char *dtype, const char *cfg_text, bool untied,
                     bool without_pre_ffn)
{
    static char names[TG_L][13][64];
    static const char *const suffix[13] = {
        "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
        "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm", "post_attention_layernorm",
        "pre_feedforward_layernorm", "post_feedforward_layernorm", "mlp.gate_proj", "mlp.up_proj",
        "mlp.down_proj"};
    write_text(dir, "config.json", cfg_text);
    m->n_bf16 = 0;
    tensor_spec specs[48];
    int n = 0;
    specs[n++] = tg_spec(m, "model.embed_tokens.weight", dtype, TG_V, TG_H, m->embed);
    for (int l = 0; l < TG_L; l++) {
        tg_layer *L = &m->L[l];
        const float *data[13] = {L->attn_norm, L->wq,       L->wk,      L->wv,      L->wo,   L->q_norm, L->k_norm,
                                 L->post_attn, L->pre_ffn,  L->post_ffn, L->gate,   L->up,   L->down};
        const int d0[13] = {TG_H, TG_QD, TG_KVD, TG_KVD, TG_H, TG_D, TG_D, TG_H, TG_H, TG_H, TG_I, TG_I, TG_H};
        const int d1[13] = {0, TG_H, TG_H, TG_H, TG_QD, 0, 0, 0, 0, 0, TG_H, TG_H, TG_I};
        for (int i = 0; i < 13; i++) {
            if (without_pre_ffn && l == 1 && i == 8) continue;
            snprintf(names[l][i], sizeof names[l][i], "model.layers.%d.%s.weight", l, suffix[i]);
            specs[n++] = tg_spec(m, names[l][i], dtype, d0[i], d1[i], data[i]);
        }
    }
    specs[n++] = tg_spec(m, "model.norm.weight", dtype, TG_H, 0, m->norm);
    if (untied) specs[n++] = tg_spec(m, "lm_head.weight", dtype, TG_V, TG_H, m->head);
    write_safetensors(dir, "model.safetensors", specs, n, FLAW_NONE);
}

/* Runs the model in dir and compares with run r; each variant of r (one
 * thing done otherwise) must be more than 1e-6 away, far above the 1e-12
 * allowed, so that the check could fail. */
static void tg_check(const char *dir, const tinyg *t, const float *head, const tg_run *r, const char *what)
{
    static const int32_t toks[TG_N] = {3, 0, 4, 1, 2, 3};
    double got[TG_N * TG_V], want[TG_N * TG_V], other[TG_N * TG_V];
    ref_model *m = ref_model_load(dir);
    CHECK(m != NULL, "%s: load", what);
    if (!m) return;
    CHECK(ref_model_forward(m, toks, TG_N, got) == 0, "%s: forward", what);
    tg_expect(t, r, head, toks, TG_N, want);
    double err = max_diff(got, want, TG_N * TG_V), sep = INFINITY;
    enum { N_VARIANTS = 13 };
    tg_run v[N_VARIANTS];
    for (int i = 0; i < N_VARIANTS; i++) v[i] = *r;
    v[0].plus_one = false;                                 /* norms times w */
    v[1].sandwich = false;                                 /* no norms after attention and the MLP */
    v[2].act = TG_SILU;
    v[3].act = TG_GELU_ERF;                                /* GELU exactly, not its tanh form */
    v[4].window = 0;                                       /* no window */
    v[5].window_all = true;                                /* the window on the full layer too */
    v[6].window = r->window + 1;                           /* one key more */
    memcpy(v[7].inv_local, r->inv_full, sizeof r->inv_full); /* the full layers' rope everywhere */
    v[8].inv_full[0] *= 2, v[8].inv_full[1] *= 2;          /* linear scaling left out */
    v[9].score_div = TG_D;                                 /* scores / sqrt(head_dim) */
    v[10].embed_scale = r->embed_scale == 2.453125 ? (double)sqrtf(6.0f) : 2.453125; /* the other cast */
    v[11].embed_scale = 1.0;                               /* no embedding scale */
    for (int l = 0; l < TG_L; l++) v[12].sliding[l] = true; /* every layer sliding */
    for (int i = 0; i < N_VARIANTS; i++) {
        tg_expect(t, &v[i], head, toks, TG_N, other);
        double d = max_diff(other, want, TG_N * TG_V);
        CHECK(d > 1e-6, "%s: variant %d is only %.3g away: the check could not fail", what, i, d);
        sep = fmin(sep, d);
    }
    printf("  %s: max |err| %.3g (nearest wrong variant %.3g away)\n", what, err, sep);
    CHECK(err < 1e-12, "%s: logits error %.3g", what, err);
    ref_model_free(m);
}

static void test_tiny_gemma3(void)
{
    static tinyg t;
    tg_make(&t);
    /* head_dim 4: two frequencies, base^0 = 1 and base^(-1/2); full layers
     * 10000 with linear factor 2: 1/2, 1/200; sliding layers 100, unscaled: 1, 1/10 */
    static const char *fmt =
        "{\"architectures\": [\"Gemma3ForCausalLM\"], \"model_type\": \"gemma3_text\", "
        "\"hidden_size\": 6, \"intermediate_size\": 3, \"num_hidden_layers\": 3, "
        "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 4, \"vocab_size\": 5, "
        "\"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, "
        "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}, \"rope_local_base_freq\": 100.0, "
        "\"query_pre_attn_scalar\": 3, \"sliding_window\": 3, \"hidden_activation\": \"gelu_pytorch_tanh\", "
        "\"final_logit_softcapping\": null, \"attn_logit_softcapping\": null, \"torch_dtype\": \"%s\", %s}";
    tg_run r = {.plus_one = true, .sandwich = true, .act = TG_GELU_TANH, .sliding = {true, false, true},
                .window = 3, .inv_local = {1.0, 0.1}, .inv_full = {0.5, 0.005}, .score_div = 3.0};
    char dir[4096], cfg[2048];

    /* bfloat16, sliding layers named by layer_types, tied embeddings by
     * default (no tie_word_embeddings); hidden_act is not Gemma's field, and
     * is not read. sqrt(6) = 2.4494898 in float32 becomes 2.453125 in
     * bfloat16 (2^-6 apart there: 156.77 of them, rounded to 157) */
    snprintf(cfg, sizeof cfg, fmt, "bfloat16",
             "\"hidden_act\": \"silu\", \"layer_types\": [\"sliding_attention\", \"full_attention\", "
             "\"sliding_attention\"]");
    test_tmpdir(dir, sizeof dir);
    tg_write(dir, &t, "BF16", cfg, false, false);
    r.embed_scale = 2.453125;
    tg_check(dir, &t, NULL, &r, "tiny gemma3 bf16 (layer_types, tied, sqrt(6) as bf16 2.453125)");
    test_rmtree(dir);

    /* float32, sliding_window_pattern 2 (layers 0 and 2 slide), its own lm_head:
     * sqrt(6) as the float32 torch.tensor holds it */
    snprintf(cfg, sizeof cfg, fmt, "float32", "\"sliding_window_pattern\": 2, \"tie_word_embeddings\": false");
    test_tmpdir(dir, sizeof dir);
    tg_write(dir, &t, "F32", cfg, true, false);
    r.embed_scale = (double)sqrtf(6.0f);
    tg_check(dir, &t, t.head, &r, "tiny gemma3 f32 (pattern 2, own lm_head, sqrt(6) in f32)");
    test_rmtree(dir);

    /* a layer without pre_feedforward_layernorm is refused */
    test_tmpdir(dir, sizeof dir);
    tg_write(dir, &t, "F32", cfg, true, true);
    ref_model *m = ref_model_load(dir);
    CHECK(m == NULL, "gemma3 without pre_feedforward_layernorm loaded");
    ref_model_free(m);
    test_rmtree(dir);
}

/* Gemma3TextConfig's defaults and the fields refused. */
static void test_gemma3_config(void)
{
    static const char *base =
        "{\"model_type\": \"gemma3_text\", \"hidden_size\": 1152, \"intermediate_size\": 8, "
        "\"num_hidden_layers\": 13, \"num_attention_heads\": 4, \"vocab_size\": 4%s}";
    char text[2048];
    ref_config c;
    snprintf(text, sizeof text, base, "");
    CHECK(load_config_text(text, &c) == 0, "load the bare gemma3 config");
    bool slid = true;
    for (int l = 0; l < 13; l++) slid &= c.layer_sliding[l] == (l != 5 && l != 11);
    CHECK(c.n_kv_heads == 4 && c.head_dim == 256 && c.rope_theta == 1e6 && c.tie_word_embeddings &&
              c.query_pre_attn_scalar == 256 && c.sliding_window == 4096 && c.rope_local_theta == 10000 &&
              c.act == REF_ACT_GELU_TANH && c.qk_norm && c.norm_plus_one && c.sandwich_norms && slid &&
              c.rms_norm_eps == 1e-6 && !c.qkv_bias && !c.o_bias,
          "gemma3 defaults: kv %d head_dim %d theta %g tied %d qpas %g window %d local %g act %d slid %d",
          c.n_kv_heads, c.head_dim, c.rope_theta, (int)c.tie_word_embeddings, c.query_pre_attn_scalar,
          c.sliding_window, c.rope_local_theta, (int)c.act, (int)slid);
    /* the embedding scale: sqrt(1152) = 33.941125 (float32 33.94112396); in
     * bfloat16 steps of 2^-2 there: 34; in float16 steps of 2^-5: 1086 of
     * them, 33.9375; with no dtype (or float32) the float32 */
    CHECK(c.embed_scale == (double)sqrtf(1152.0f), "no dtype: embed_scale %.9g", c.embed_scale);
    snprintf(text, sizeof text, base, ", \"torch_dtype\": \"bfloat16\"");
    CHECK(load_config_text(text, &c) == 0 && c.embed_scale == 34.0, "bfloat16: embed_scale %.9g", c.embed_scale);
    snprintf(text, sizeof text, base, ", \"dtype\": \"float16\"");
    CHECK(load_config_text(text, &c) == 0 && c.embed_scale == 33.9375, "float16: embed_scale %.9g", c.embed_scale);
    snprintf(text, sizeof text, base, ", \"torch_dtype\": \"float32\"");
    CHECK(load_config_text(text, &c) == 0 && c.embed_scale == (double)sqrtf(1152.0f), "float32: embed_scale %.9g",
          c.embed_scale);
    /* sliding_window null: no window, the layers still sliding (their rope) */
    snprintf(text, sizeof text, base, ", \"sliding_window\": null, \"sliding_window_pattern\": 4");
    CHECK(load_config_text(text, &c) == 0 && c.sliding_window == 0 && c.layer_sliding[0] && !c.layer_sliding[3] &&
              c.layer_sliding[4] && !c.layer_sliding[7],
          "null window: %d, layers 0 3 4 7 sliding %d %d %d %d", c.sliding_window, (int)c.layer_sliding[0],
          (int)c.layer_sliding[3], (int)c.layer_sliding[4], (int)c.layer_sliding[7]);

    /* soft-caps, as transformers' Gemma 3 applies them when set */
    snprintf(text, sizeof text, base, ", \"final_logit_softcapping\": 30.0, \"attn_logit_softcapping\": 50.0");
    CHECK(load_config_text(text, &c) == 0 && c.final_softcap == 30.0 && c.attn_softcap == 50.0,
          "gemma3 soft-caps: %g %g", c.final_softcap, c.attn_softcap);
    static const char *const bad[] = {
        ", \"final_logit_softcapping\": 0",
        ", \"attn_logit_softcapping\": \"50\"",
        ", \"hidden_activation\": \"gelu\"",
        ", \"use_bidirectional_attention\": true",
        ", \"layer_types\": [\"sliding_attention\", \"full_attention\"]",
        ", \"layer_types\": [\"sliding_attention\", \"sliding_attention\", \"sliding_attention\", "
        "\"sliding_attention\", \"sliding_attention\", \"global\", \"sliding_attention\", \"sliding_attention\", "
        "\"sliding_attention\", \"sliding_attention\", \"sliding_attention\", \"full_attention\", "
        "\"sliding_attention\"]",
        ", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}",
        ", \"query_pre_attn_scalar\": 0",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, base, bad[i]);
        CHECK(load_config_text(text, &c) != 0, "gemma3 config with %s accepted", bad[i]);
    }
}

int main(void)
{
    RUN(test_stories260k_logits);
    RUN(test_stories260k_greedy);
    RUN(test_rope);
    RUN(test_rope_partial);
    RUN(test_longrope_config);
    RUN(test_tiny_models);
    RUN(test_tiny_qwen3);
    RUN(test_tiny_phi3);
    RUN(test_tiny_gemma3);
    RUN(test_gemma3_config);
    RUN(test_malformed);
    return test_summary();
}
