/*
 * test_gguf.c: the GGUF reader on the real stories260K file: header,
 * keys of each kind, the typed getters and their messages, tensor infos
 * and the data layout; out of memory at every allocation of an open;
 * messages that quote a file's bytes (keys, strings, tensor names) show
 * control bytes and invalid UTF-8 escaped, never raw.
 */
#include "test.h"

#include "base/mem.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"

#include <stdio.h>

static const char *const GGUF = "tests/data/stories260K/stories260K.gguf";

static void test_stories_header(void)
{
    snug_error err = {0};
    snug_gguf_file *g = NULL;
    CHECK_OK(snug_gguf_open(GGUF, &g, &err), &err);
    if (!g) return;
    CHECK(g->version == 3 && g->n_kv == 19 && g->n_tensors == 48, "v%u, %lld keys, %lld tensors",
          g->version, (long long)g->n_kv, (long long)g->n_tensors);
    CHECK(g->alignment == 32 && g->data_start == 14176, "alignment %llu, data at %llu",
          (unsigned long long)g->alignment, (unsigned long long)g->data_start);
    const char *s = NULL;
    CHECK_OK(snug_gguf_get_string(g, "general.architecture", true, &s, NULL, &err), &err);
    CHECK(s && strcmp(s, "llama") == 0, "architecture llama");
    int64_t v = 0;
    CHECK_OK(snug_gguf_get_int(g, "llama.embedding_length", true, 1, 1 << 20, &v, NULL, &err), &err);
    CHECK(v == 64, "embedding_length %lld", (long long)v);
    CHECK_OK(snug_gguf_get_int(g, "llama.context_length", true, 1, 1 << 20, &v, NULL, &err), &err);
    CHECK(v == 2048, "context_length");
    double eps = 0;
    CHECK_OK(snug_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", true, 0, 1, &eps, NULL, &err), &err);
    CHECK(eps == (double)1e-5f, "eps is the float32 1e-5: %.17g", eps);
    const snug_gguf_kv *tokens = snug_gguf_find(g, "tokenizer.ggml.tokens");
    CHECK(tokens && tokens->type == SNUG_GGUF_ARRAY && tokens->v.arr.type == SNUG_GGUF_STRING &&
          tokens->v.arr.n == 512, "512 token strings");
    bool present = true;
    CHECK_OK(snug_gguf_get_int(g, "llama.nope", false, 0, 1, &v, &present, &err), &err);
    CHECK(!present, "absent key reported absent");
    CHECK_FAILS(snug_gguf_get_int(g, "llama.nope", true, 0, 1, &v, NULL, &err), &err, SNUG_FORMAT,
                "key 'llama.nope' is missing");
    CHECK_FAILS(snug_gguf_get_int(g, "general.architecture", true, 0, 1, &v, NULL, &err), &err,
                SNUG_FORMAT, "expected an integer, found a string");
    CHECK_FAILS(snug_gguf_get_int(g, "llama.block_count", true, 0, 4, &v, NULL, &err), &err,
                SNUG_FORMAT, "5 is outside [0, 4]");
    CHECK_FAILS(snug_gguf_get_float(g, "llama.block_count", true, 0, 4, &eps, NULL, &err), &err,
                SNUG_FORMAT, "expected a float, found a uint32");
    const snug_gguf_tensor *t = snug_gguf_find_tensor(g, "blk.4.ffn_down.weight");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 172 && t->ne[1] == 64 && t->type == SNUG_GGML_F32 &&
          t->bytes == 172 * 64 * 4 && t->offset == 1082880, "ffn_down info");
    CHECK(strcmp(snug_ggml_type_name(12), "Q4_K") == 0 && strcmp(snug_ggml_type_name(99), "unknown") == 0,
          "type names");
    snug_gguf_close(g);
}

static snug_status open_oom(void *ctx, snug_error *err)
{
    snug_gguf_file *g = NULL;
    snug_status st = snug_gguf_open(ctx, &g, err);
    snug_gguf_close(g);
    return st;
}

static void test_out_of_memory_loop(void)
{
    int n = test_oom_loop("GGUF open", open_oom, NULL, (void *)GGUF, 500);
    CHECK(n > 3, "the open needs several allocations (%d)", n);
}

/* ---- messages that quote the file's bytes ------------------------------------------- */

/* Writes a GGUF v3 file at path: the keys (each a string value, or of the
 * unknown value type 99 when its value is NULL, which ends the file), then
 * one tensor named tensor with 9 dimensions (out of range) when tensor is
 * not NULL. */
static void write_gguf(const char *path, const char *const *keys, const char *const *values, int n_keys,
                       const char *tensor)
{
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL, "cannot write %s", path);
    if (!fp) return;
    uint32_t version = 3, type;
    uint64_t n_tensors = tensor ? 1 : 0, n_kv = (uint64_t)n_keys, len;
    fwrite("GGUF", 1, 4, fp);
    fwrite(&version, 4, 1, fp);
    fwrite(&n_tensors, 8, 1, fp);
    fwrite(&n_kv, 8, 1, fp);
    for (int i = 0; i < n_keys; i++) {
        len = strlen(keys[i]);
        fwrite(&len, 8, 1, fp);
        fwrite(keys[i], 1, len, fp);
        type = values[i] ? 8 : 99; /* 8: string */
        fwrite(&type, 4, 1, fp);
        if (!values[i]) break;
        len = strlen(values[i]);
        fwrite(&len, 8, 1, fp);
        fwrite(values[i], 1, len, fp);
    }
    if (tensor) {
        uint32_t n_dims = 9;
        len = strlen(tensor);
        fwrite(&len, 8, 1, fp);
        fwrite(tensor, 1, len, fp);
        fwrite(&n_dims, 4, 1, fp);
    }
    static const char pad[64] = {0}; /* room, so that no count looks larger than the file */
    fwrite(pad, 1, sizeof pad, fp);
    fclose(fp);
}

/* Whether msg has a raw control byte or a byte of invalid UTF-8. */
static bool raw_bytes(const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        if (*p < 0x20 || *p == 0x7F) return true;
    return !snug_utf8_valid(msg, strlen(msg));
}

/* A key, a string value and a tensor name with a terminal escape and bytes
 * that are not UTF-8: each message names them escaped. */
static void test_messages_escape_file_bytes(void)
{
    static const char PATH[] = "build/tests/escapes.gguf";
    snug_error err = {0};
    snug_gguf_file *g = NULL;
    const char *keys1[] = {"evil\x1b[31m\xff key"}, *values1[] = {NULL};
    write_gguf(PATH, keys1, values1, 1, NULL);
    CHECK_FAILS(snug_gguf_open(PATH, &g, &err), &err, SNUG_FORMAT, "key 'evil\\x1b[31m\\xff key': value type 99");
    CHECK(!raw_bytes(err.msg), "no raw bytes in: %s", err.msg);

    const char *keys2[] = {"general.architecture"}, *values2[] = {"\x1b]0;pwned\x07\xc3\x28llama\xc2\x9b"};
    write_gguf(PATH, keys2, values2, 1, NULL);
    CHECK_OK(snug_gguf_open(PATH, &g, &err), &err);
    if (g) {
        snug_model_config cfg;
        CHECK_FAILS(snug_gguf_model_config(g, &cfg, &err), &err, SNUG_UNSUPPORTED,
                    "general.architecture is '\\x1b]0;pwned\\x07\\xc3(llama\\xc2\\x9b'");
        CHECK(!raw_bytes(err.msg), "no raw bytes in: %s", err.msg);
        snug_gguf_close(g);
        g = NULL;
    }

    write_gguf(PATH, keys2, (const char *[]){"llama"}, 1, "blk.0\x1b[2J\xe2\x82.weight");
    CHECK_FAILS(snug_gguf_open(PATH, &g, &err), &err, SNUG_FORMAT,
                "tensor 'blk.0\\x1b[2J\\xe2\\x82.weight': 9 dimensions");
    CHECK(!raw_bytes(err.msg), "no raw bytes in: %s", err.msg);
    snug_gguf_close(g);
    remove(PATH);
}

/* snug_bytes_shown: what is kept, what is escaped, where it cuts. */
static void test_bytes_shown(void)
{
    static const struct {
        const char *in, *want;
        size_t cap;
    } cases[] = {
        {"plain.key_1", "plain.key_1", 64},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 64},
        {"a\\b\tc\x7f", "a\\\\b\\x09c\\x7f", 64},
        {"\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80", "\\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80", 64},
        {"\xc2\x85", "\\xc2\\x85", 64},
        {"abcdefghij", "abcd...", 8},
        {"abcdefg", "abcdefg", 8},
        {"ab\x1b" "cdefg", "ab...", 8},
        {"ab\xc3\xa9\xc3\xa9xyz", "ab\xc3\xa9...", 9},
        {"ab\xc3\xa9\xc3\xa9xyz", "ab\xc3\xa9\xc3\xa9xyz", 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        snug_str_shown(cases[i].in, out, cases[i].cap);
        CHECK(strcmp(out, cases[i].want) == 0 && strlen(out) < cases[i].cap, "case %zu: \"%s\", expected \"%s\"", i,
              out, cases[i].want);
    }
    char out[16];
    CHECK(strcmp(snug_bytes_shown("a\0b", 3, out, sizeof out), "a\\x00b") == 0, "a NUL byte: %s", out);
    CHECK(strcmp(snug_str_shown(NULL, out, sizeof out), "") == 0, "NULL: \"%s\"", out);
}

/* llama.cpp's tensor names per family, both ways: ffn_up is up_proj beside
 * ffn_gate (Llama, Qwen) and gate_up_proj where gate and up share it
 * (Phi-3); the q/k norms and fused qkv map; unknown names do not. */
static void test_tensor_names(void)
{
    static const struct {
        snug_arch arch;
        const char *hf, *gguf;
    } pairs[] = {
        {SNUG_ARCH_LLAMA, "model.layers.3.mlp.up_proj.weight", "blk.3.ffn_up.weight"},
        {SNUG_ARCH_QWEN3, "model.layers.0.mlp.gate_proj.weight", "blk.0.ffn_gate.weight"},
        {SNUG_ARCH_PHI3, "model.layers.7.mlp.gate_up_proj.weight", "blk.7.ffn_up.weight"},
        {SNUG_ARCH_PHI3, "model.layers.7.self_attn.qkv_proj.weight", "blk.7.attn_qkv.weight"},
        {SNUG_ARCH_QWEN3, "model.layers.12.self_attn.k_norm.weight", "blk.12.attn_k_norm.weight"},
        {SNUG_ARCH_QWEN2, "model.layers.1.self_attn.v_proj.bias", "blk.1.attn_v.bias"},
        {SNUG_ARCH_QWEN2, "lm_head.weight", "output.weight"},
    };
    char out[128];
    for (size_t i = 0; i < SNUG_ARRAY_LEN(pairs); i++) {
        CHECK(snug_gguf_tensor_name(pairs[i].arch, pairs[i].hf, out, sizeof out) && strcmp(out, pairs[i].gguf) == 0,
              "%s -> %s (got %s)", pairs[i].hf, pairs[i].gguf, out);
        CHECK(snug_gguf_hf_name(pairs[i].arch, pairs[i].gguf, out, sizeof out) && strcmp(out, pairs[i].hf) == 0,
              "%s -> %s (got %s)", pairs[i].gguf, pairs[i].hf, out);
    }
    CHECK(!snug_gguf_tensor_name(SNUG_ARCH_PHI3, "model.layers.0.mlp.up_proj.weight", out, sizeof out),
          "Phi-3 has no separate up_proj");
    CHECK(!snug_gguf_hf_name(SNUG_ARCH_PHI3, "blk.0.ffn_gate.weight", out, sizeof out), "Phi-3 has no ffn_gate");
    CHECK(!snug_gguf_hf_name(SNUG_ARCH_LLAMA, "blk.-1.ffn_up.weight", out, sizeof out), "a negative layer");
    CHECK(!snug_gguf_hf_name(SNUG_ARCH_LLAMA, "blk.0.attn_sinks", out, sizeof out), "an unknown tensor");
}

int main(void)
{
    RUN(test_stories_header);
    RUN(test_out_of_memory_loop);
    RUN(test_messages_escape_file_bytes);
    RUN(test_bytes_shown);
    RUN(test_tensor_names);
    return test_summary();
}
