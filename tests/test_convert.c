/*
 * test_convert.c: llama2.c and GGUF imports: both copies of stories260K
 * convert to identical tensors; the q/k rows are permuted from the
 * interleaved to the half-split rotary layout (checked element by element
 * against the raw llama2.c file); the version-1 llama2.c layout converts
 * like the legacy one; the bundled model is what the converter makes;
 * broken inputs are refused with their reason; out of memory anywhere
 * leaks nothing.
 */
#include "test.h"

#include "convert/to_gguf.h"
#include "formats/pooling.h"

#include "formats/checkpoint.h"
#include "convert/convert.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"

#include <sys/stat.h>

static char g_dir[256];
static const char *const BIN = "tests/data/stories260K/stories260K.bin";
static const char *const GGUF = "tests/data/stories260K/stories260K.gguf";

static void sub(char *out, const char *name)
{
    snprintf(out, 512, "%s/%s", g_dir, name);
    mkdir(out, 0755);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    *n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    return buf;
}

/* Counts the tensors of two checkpoints that have equal names, shapes,
 * dtypes and bytes; -1 when the sets differ. */
static int64_t count_identical(const char *dir_a, const char *dir_b)
{
    snug_error err = {0};
    snug_checkpoint *a = NULL, *b = NULL;
    int64_t same = -1;
    if (snug_checkpoint_open(dir_a, &a, &err) != SNUG_OK || snug_checkpoint_open(dir_b, &b, &err) != SNUG_OK) {
        printf("  open: %s\n", err.msg);
        goto done;
    }
    if (a->n_tensors != b->n_tensors) goto done;
    same = 0;
    for (int64_t i = 0; i < a->n_tensors; i++) {
        const snug_st_tensor *ta = a->entries[i].tensor, *tb = b->entries[i].tensor;
        if (strcmp(ta->name, tb->name) != 0 || ta->dtype != tb->dtype || ta->n_dims != tb->n_dims ||
            memcmp(ta->shape, tb->shape, sizeof ta->shape) != 0)
            continue;
        size_t n = (size_t)(ta->end - ta->begin);
        unsigned char *x = malloc(n), *y = malloc(n);
        if (snug_st_read(a->files[0], ta, 0, x, n, &err) == SNUG_OK &&
            snug_st_read(b->files[0], tb, 0, y, n, &err) == SNUG_OK && memcmp(x, y, n) == 0)
            same++;
        free(x);
        free(y);
    }
done:
    snug_checkpoint_close(a);
    snug_checkpoint_close(b);
    return same;
}

static void test_bin_and_gguf_identical(void)
{
    char a[512], b[512];
    sub(a, "from-bin");
    sub(b, "from-gguf");
    snug_error err = {0};
    CHECK_OK(snug_convert_llama2c(BIN, a, &err), &err);
    CHECK_OK(snug_convert_gguf(GGUF, b, &err), &err);
    int64_t same = count_identical(a, b);
    CHECK(same == 47, "all 47 tensors identical between the two imports (%lld)", (long long)same);
    snug_model_config ca, cb;
    CHECK_OK(snug_config_load(a, &ca, &err), &err);
    CHECK_OK(snug_config_load(b, &cb, &err), &err);
    CHECK(ca.tie_word_embeddings && cb.tie_word_embeddings, "both tied (the GGUF's output.weight equals token_embd)");
    CHECK(ca.max_position_embeddings == 512 && cb.max_position_embeddings == 2048,
          "each keeps its own context length (512 from llama2.c, 2048 from GGUF)");
    CHECK(ca.n_kv_heads == 4 && cb.n_kv_heads == 4 && ca.vocab_size == 512 && cb.vocab_size == 512,
          "shapes agree");
    CHECK(cb.bos_token_id == 1 && cb.n_eos == 1 && cb.eos_token_ids[0] == 2, "GGUF bos/eos");
    CHECK(ca.bos_token_id == 1 && ca.n_eos == 2 && ca.eos_token_ids[0] == 2 && ca.eos_token_ids[1] == 1,
          "llama2.c: EOS and BOS both end a story, as in run.c (%d ids)", ca.n_eos);
    CHECK(count_identical(a, "models/stories260K") == 47, "the bundled model is this conversion");
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/model.safetensors", a);
    snprintf(p2, sizeof p2, "models/stories260K/model.safetensors");
    size_t n1 = 0, n2 = 0;
    unsigned char *x = slurp(p1, &n1), *y = slurp(p2, &n2);
    CHECK(x && y && n1 == n2 && memcmp(x, y, n1) == 0, "byte for byte");
    free(x);
    free(y);
}

static void test_rotary_permutation(void)
{
    char a[512];
    sub(a, "perm");
    snug_error err = {0};
    CHECK_OK(snug_convert_llama2c(BIN, a, &err), &err);
    size_t n = 0;
    unsigned char *raw = slurp(BIN, &n);
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(a, &ck, &err), &err);
    if (!raw || !ck) goto done;
    /* legacy layout: header 28, embeddings 512x64, rms_att 5x64, then wq 5x(64x64), wk 5x(32x64) */
    const int dim = 64, hd = 8, L = 5;
    const float *wq = (const float *)(raw + 28) + 512 * dim + L * dim;
    const float *wk = wq + L * dim * dim;
    int bad = 0;
    for (int l = 0; l < L; l++) {
        char name[96];
        const snug_st_file *f;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.weight", l);
        const snug_st_tensor *t = snug_checkpoint_find(ck, name, &f);
        float q[64 * 64], k[32 * 64];
        if (!t || snug_st_read(f, t, 0, q, sizeof q, &err) != SNUG_OK) { bad++; continue; }
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_proj.weight", l);
        t = snug_checkpoint_find(ck, name, &f);
        if (!t || snug_st_read(f, t, 0, k, sizeof k, &err) != SNUG_OK) { bad++; continue; }
        for (int h = 0; h < 8; h++)
            for (int p = 0; p < 2; p++)
                for (int i = 0; i < hd / 2; i++) {
                    int out = h * hd + p * hd / 2 + i, in = h * hd + 2 * i + p;
                    bad += memcmp(&q[out * dim], &wq[(l * dim + in) * dim], dim * 4) != 0;
                    if (h < 4) bad += memcmp(&k[out * dim], &wk[(l * 32 + in) * dim], dim * 4) != 0;
                }
    }
    CHECK(bad == 0, "%d q/k rows are not where the half-split layout puts them", bad);
done:
    free(raw);
    snug_checkpoint_close(ck);
}

/* Writes the version-1 ("ak42") layout of the legacy stories260K.bin. */
static void write_v1(const char *path)
{
    size_t n = 0;
    unsigned char *raw = slurp(BIN, &n);
    const int dim = 64, hid = 172, L = 5, V = 512, kv = 32;
    const float *w = (const float *)(raw + 28);
    const float *emb = w, *rms_att = emb + V * dim, *wq = rms_att + L * dim, *wk = wq + L * dim * dim,
                *wv = wk + L * kv * dim, *wo = wv + L * kv * dim, *rms_ffn = wo + L * dim * dim,
                *w1 = rms_ffn + L * dim, *w2 = w1 + L * hid * dim, *w3 = w2 + L * dim * hid,
                *rms_final = w3 + L * hid * dim;
    FILE *f = fopen(path, "wb");
    unsigned char header[256] = {0};
    uint32_t magic = 0x616B3432;
    int32_t version = 1;
    memcpy(header, &magic, 4);
    memcpy(header + 4, &version, 4);
    memcpy(header + 8, raw, 28);
    header[36] = 1; /* shared classifier */
    fwrite(header, 1, 256, f);
    fwrite(rms_att, 4, (size_t)L * dim, f);
    fwrite(rms_ffn, 4, (size_t)L * dim, f);
    fwrite(rms_final, 4, dim, f);
    fwrite(emb, 4, (size_t)V * dim, f);
    fwrite(wq, 4, (size_t)L * dim * dim, f);
    fwrite(wk, 4, (size_t)L * kv * dim, f);
    fwrite(wv, 4, (size_t)L * kv * dim, f);
    fwrite(wo, 4, (size_t)L * dim * dim, f);
    fwrite(w1, 4, (size_t)L * hid * dim, f);
    fwrite(w2, 4, (size_t)L * dim * hid, f);
    fwrite(w3, 4, (size_t)L * hid * dim, f);
    fclose(f);
    free(raw);
}

static void test_llama2c_version1(void)
{
    char a[512], b[512], v1[600];
    sub(a, "legacy");
    sub(b, "v1");
    snprintf(v1, sizeof v1, "%s/stories260K-v1.bin", g_dir);
    write_v1(v1);
    snug_error err = {0};
    CHECK_OK(snug_convert_llama2c(BIN, a, &err), &err);
    CHECK_OK(snug_convert_llama2c(v1, b, &err), &err);
    CHECK(count_identical(a, b) == 47, "version 1 converts to the same tensors");
}

static void test_broken_inputs(void)
{
    char out[512], p[600];
    sub(out, "broken");
    snug_error err = {0};
    size_t n = 0;
    unsigned char *raw = slurp(BIN, &n);
    snprintf(p, sizeof p, "%s/cut.bin", g_dir);
    test_write_file(p, raw, n - 4);
    CHECK_FAILS(snug_convert_llama2c(p, out, &err), &err, SNUG_FORMAT,
                "the header implies 1056540 bytes but the file has 1056536");
    int32_t neg = -3;
    unsigned char *bad = malloc(n);
    memcpy(bad, raw, n);
    memcpy(bad + 12, &neg, 4); /* n_heads */
    test_write_file(p, bad, n);
    CHECK_FAILS(snug_convert_llama2c(p, out, &err), &err, SNUG_FORMAT, "header field n_heads is -3");
    int32_t three = 3;
    memcpy(bad, raw, n);
    memcpy(bad + 12, &three, 4);
    test_write_file(p, bad, n);
    CHECK_FAILS(snug_convert_llama2c(p, out, &err), &err, SNUG_FORMAT, "n_heads 3");
    test_write_file(p, raw, 10);
    CHECK_FAILS(snug_convert_llama2c(p, out, &err), &err, SNUG_FORMAT, "a llama2.c header needs 28");
    free(raw);
    free(bad);

    raw = slurp(GGUF, &n);
    bad = malloc(n);
    memcpy(bad, raw, n);
    /* the value follows the key, its 4-byte type and its 8-byte length */
    unsigned char *arch = memmem(bad, n, "general.architecture", 20);
    if (arch) arch[20 + 4 + 8 + 4] = 'x';
    snprintf(p, sizeof p, "%s/arch.gguf", g_dir);
    test_write_file(p, bad, n);
    CHECK_FAILS(snug_convert_gguf(p, out, &err), &err, SNUG_UNSUPPORTED,
                "general.architecture is 'llamx'; snug runs llama, qwen2, qwen3, phi3, gemma3");
    /* make token_embd Q4_0: its info's type is 4 bytes after the dims */
    memcpy(bad, raw, n);
    unsigned char *ti = memmem(bad, n, "token_embd.weight", 17);
    if (ti) {
        uint32_t q4 = 2;
        memcpy(ti + 17 + 4 + 16, &q4, 4);
    }
    snprintf(p, sizeof p, "%s/q4.gguf", g_dir);
    test_write_file(p, bad, n);
    CHECK_FAILS(snug_convert_gguf(p, out, &err), &err, SNUG_UNSUPPORTED,
                "tensor 'token_embd.weight' is Q4_0; only F32, F16 and BF16");
    free(raw);
    free(bad);
}

static snug_status convert_bin_oom(void *ctx, snug_error *err)
{
    return snug_convert_llama2c(BIN, ctx, err);
}

static snug_status convert_gguf_oom(void *ctx, snug_error *err)
{
    return snug_convert_gguf(GGUF, ctx, err);
}

static void test_out_of_memory_loop(void)
{
    char out[512];
    sub(out, "oom");
    CHECK(test_oom_loop("llama2c import", convert_bin_oom, NULL, out, 3000) > 5, "llama2c import");
    CHECK(test_oom_loop("GGUF import", convert_gguf_oom, NULL, out, 3000) > 5, "GGUF import");
}

/* An embedding model's pooling as its checkpoint says it: the
 * sentence-transformers directory tests/data/embedding-mean (mean,
 * Normalize), the same written to GGUF (pooling_type 1, llama.cpp's), a
 * language model (none), and modules.json files that are broken. */
static void test_pooling(void)
{
    snug_error err = {0};
    snug_pooling_info p;
    CHECK_OK(snug_pooling_read("tests/data/embedding-mean", &p, &err), &err);
    CHECK(p.type == SNUG_POOL_MEAN && p.normalize, "sentence-transformers: type %d, normalize %d", (int)p.type,
          p.normalize);
    char dir[256], path[320];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/e.gguf", dir);
    CHECK_OK(snug_convert_to_gguf("tests/data/embedding-mean", path, NULL, &err), &err);
    CHECK_OK(snug_pooling_read(path, &p, &err), &err);
    CHECK(p.type == SNUG_POOL_MEAN && p.normalize, "its GGUF: type %d", (int)p.type);
    CHECK_OK(snug_pooling_read("models/stories260K", &p, &err), &err);
    CHECK(p.type == SNUG_POOL_NONE, "a language model: type %d", (int)p.type);
    snprintf(path, sizeof path, "%s/modules.json", dir);
    test_write_file(path, "{\"a\": 1}", 8);
    CHECK_FAILS(snug_pooling_read(dir, &p, &err), &err, SNUG_INVALID, "expected a list of modules");
    static const char escape[] = "[{\"type\": \"sentence_transformers.models.Pooling\", \"path\": \"../x\"}]";
    test_write_file(path, escape, sizeof escape - 1);
    CHECK_FAILS(snug_pooling_read(dir, &p, &err), &err, SNUG_INVALID, "leaves the directory");
    test_rmtree(dir);
}

int main(void)
{
    test_tmpdir(g_dir, sizeof g_dir);
    RUN(test_bin_and_gguf_identical);
    RUN(test_rotary_permutation);
    RUN(test_llama2c_version1);
    RUN(test_broken_inputs);
    RUN(test_out_of_memory_loop);
    RUN(test_pooling);
    test_rmtree(g_dir);
    return test_summary();
}
