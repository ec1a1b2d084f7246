/*
 * test_gguf.c: the GGUF reader on the real stories260K file: header,
 * keys of each kind, the typed getters and their messages, tensor infos
 * and the data layout; out of memory at every allocation of an open.
 */
#include "test.h"

#include "base/device.h"
#include "formats/gguf.h"

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

int main(void)
{
    RUN(test_stories_header);
    RUN(test_out_of_memory_loop);
    return test_summary();
}
