/*
 * test_generate.c: one sequence from prompt to finish on a small synthetic
 * model carrying a real tokenizer (TinyLlama's, with its chat template):
 * the chat prompt's ids, streamed text against decoding the ids, seeds,
 * stop strings, the model length, and that a generation allocates nothing.
 */
#include "chat/chat.h"
#include "formats/checkpoint.h"
#include "base/device.h"
#include "base/fileio.h"
#include "engine/generate.h"
#include "base/json.h"
#include "convert/mkmodel.h"
#include "test.h"

#include <ftw.h>
#include <unistd.h>

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Copies file name from tests/data/tokenizers/tinyllama-1.1b-chat into dir. */
static bool copy_file(const char *name, const char *dir)
{
    char src[256], dst[256], *text = NULL;
    size_t len = 0;
    snprintf(src, sizeof src, "tests/data/tokenizers/tinyllama-1.1b-chat/%s", name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    if (snug_file_read_all(src, 1 << 26, &text, &len, NULL) != SNUG_OK) return false;
    FILE *f = fopen(dst, "wb");
    bool ok = f && fwrite(text, 1, len, f) == len;
    if (f) ok = fclose(f) == 0 && ok;
    snug_mem_free(text);
    return ok;
}

typedef struct fixture {
    char dir[64];
    snug_checkpoint *ck;
    snug_weights *w;
    snug_tokenizer *tok;
    snug_tok_encoder *enc;
    snug_generator *g;
} fixture;

/* A TinyLlama-shaped vocabulary (32,000) on a tiny body, with TinyLlama's
 * tokenizer files, loaded, with a generator of max_len positions. */
static bool fixture_open(fixture *f, int64_t max_len, int32_t vocab, snug_error *err)
{
    memset(f, 0, sizeof *f);
    snug_model_config c;
    if (snug_preset_config("tinyllama-1.1b", &c, err) != SNUG_OK) return false;
    c.hidden_size = 32, c.intermediate_size = 48, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2;
    c.head_dim = 8, c.dtype = SNUG_DTYPE_BF16, c.vocab_size = vocab;
    snprintf(f->dir, sizeof f->dir, "%s/snug-test-gen-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snug_mkmodel_opts o = {.dtype = SNUG_DTYPE_BF16, .n_shards = 1, .seed = 3, .n_threads = 1};
    snug_load_opts lo = {.tp = 1};
    snug_generator_opts go = {.max_len = max_len, .prefill_chunk = 8, .isa = -1};
    return mkdtemp(f->dir) && snug_mkmodel(&c, &o, f->dir, NULL, err) == SNUG_OK &&
           copy_file("tokenizer.model", f->dir) && copy_file("tokenizer_config.json", f->dir) &&
           snug_checkpoint_open(f->dir, &f->ck, err) == SNUG_OK &&
           snug_weights_load(f->ck, &lo, &f->w, NULL, err) == SNUG_OK &&
           snug_tokenizer_load(f->dir, &f->tok, err) == SNUG_OK &&
           snug_tok_encoder_create(f->tok, &f->enc, err) == SNUG_OK &&
           snug_generator_create(&f->ck->config, f->w, f->tok, &go, &f->g, err) == SNUG_OK;
}

static void fixture_close(fixture *f)
{
    snug_generator_free(f->g);
    snug_tok_encoder_free(f->enc);
    snug_tokenizer_free(f->tok);
    snug_weights_free(f->w);
    snug_checkpoint_close(f->ck);
    if (f->dir[0]) nftw(f->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

typedef struct text_sink {
    char buf[8192];
    size_t n;
    int calls;
} text_sink;

static bool collect(const char *s, size_t n, void *ctx)
{
    text_sink *t = ctx;
    if (t->n + n < sizeof t->buf) memcpy(t->buf + t->n, s, n);
    t->n += n;
    t->calls++;
    return true;
}

/* The chat prompt, its ids, streamed text == decode(ids), no allocation. */
static void test_chat_stream(void)
{
    snug_error err = {0};
    fixture f;
    bool ok = fixture_open(&f, 256, 32000, &err);
    CHECK(ok, "setup: %s", err.msg);
    char *text = NULL;
    size_t len = 0;
    json_t *msgs = NULL;
    if (ok) {
        snug_json_init();
        msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", "Write a haiku about memory.");
        CHECK_OK(snug_chat_apply(f.tok, msgs, true, &text, &len, &err), &err);
    }
    if (text) {
        const char *want = "<|user|>\nWrite a haiku about memory.</s>\n<|assistant|>\n";
        CHECK(strcmp(text, want) == 0, "rendered %s", text);
        snug_tok_encode_opts eo = {.add_special = false, .parse_special = true};
        const int32_t *ids;
        size_t n_ids;
        CHECK_OK(snug_tok_encode(f.enc, text, len, &eo, &ids, &n_ids, &err), &err);
        int32_t prompt[64];
        size_t n_prompt = SNUG_MIN(n_ids, (size_t)64);
        memcpy(prompt, ids, n_prompt * sizeof(int32_t));
        CHECK(n_prompt > 10 && prompt[0] == 529 && prompt[n_prompt - 1] == 13, "prompt ids %d ... %d (%zu)", prompt[0],
              prompt[n_prompt - 1], n_prompt);
        /* "</s>" in the template text became the EOS token itself. */
        bool has_eos = false;
        for (size_t i = 0; i < n_prompt; i++) has_eos |= prompt[i] == 2;
        CHECK(has_eos, "the template's </s> is token 2");

        snug_sampling_params sp;
        snug_sampling_params_default(&sp);
        sp.seed = 42, sp.has_seed = true, sp.temperature = 0.8f, sp.top_p = 0.95f;
        snug_stop_params stop;
        snug_stop_params_default(&stop);
        stop.max_tokens = 40;
        stop.ignore_eos = true;
        text_sink sink = {0};
        snug_gen_result res;
        int64_t allocs = snug_mem_alloc_count();
        CHECK_OK(snug_generate(f.g, prompt, (int64_t)n_prompt, &sp, &stop, collect, &sink, &res, &err), &err);
        CHECK(snug_mem_alloc_count() == allocs, "generation allocated %lld times",
              (long long)(snug_mem_alloc_count() - allocs));
        CHECK(res.n_generated == 40 && res.finish == SNUG_FINISH_MAX_TOKENS, "%lld tokens, finish %s",
              (long long)res.n_generated, snug_finish_name(res.finish));
        CHECK(memcmp(res.ids, prompt, n_prompt * sizeof(int32_t)) == 0, "ids start with the prompt");
        char *dec = NULL;
        size_t dec_len = 0;
        CHECK_OK(snug_tok_decode(f.tok, res.ids + n_prompt, (size_t)res.n_generated, true, &dec, &dec_len, &err), &err);
        CHECK(dec && dec_len == sink.n && memcmp(dec, sink.buf, dec_len) == 0,
              "streamed %zu bytes in %d pieces, decode gives %zu", sink.n, sink.calls, dec_len);
        snug_mem_free(dec);

        /* The same seed gives the same ids; another seed other ids. */
        int32_t first[40];
        memcpy(first, res.ids + n_prompt, sizeof first);
        CHECK_OK(snug_generate(f.g, prompt, (int64_t)n_prompt, &sp, &stop, NULL, NULL, &res, &err), &err);
        CHECK(memcmp(first, res.ids + n_prompt, sizeof first) == 0, "same seed, different ids");
        sp.seed = 43;
        CHECK_OK(snug_generate(f.g, prompt, (int64_t)n_prompt, &sp, &stop, NULL, NULL, &res, &err), &err);
        CHECK(memcmp(first, res.ids + n_prompt, sizeof first) != 0, "another seed, same ids");

        /* A stop string cut from the middle of the first text ends there. */
        if (sink.n > 12) {
            sp.seed = 42;
            CHECK_OK(snug_stop_params_add_string(&stop, sink.buf + 6, 4, &err), &err);
            text_sink cut = {0};
            CHECK_OK(snug_generate(f.g, prompt, (int64_t)n_prompt, &sp, &stop, collect, &cut, &res, &err), &err);
            char *hit = memmem(sink.buf, sink.n, sink.buf + 6, 4);
            size_t want_n = (size_t)(hit - sink.buf);
            CHECK(res.finish == SNUG_FINISH_STOP_STRING && cut.n == want_n && memcmp(cut.buf, sink.buf, want_n) == 0,
                  "stop string: finish %s, %zu bytes (want %zu)", snug_finish_name(res.finish), cut.n, want_n);
        }
        /* Bad parameters are refused. */
        sp.top_p = 0;
        CHECK_FAILS(snug_generate(f.g, prompt, (int64_t)n_prompt, &sp, &stop, NULL, NULL, &res, &err), &err,
                    SNUG_INVALID, "top_p");
    }
    json_decref(msgs);
    snug_mem_free(text);
    fixture_close(&f);
}

/* A sequence ends at the generator's length; a prompt that fills it is refused. */
static void test_model_length(void)
{
    snug_error err = {0};
    fixture f;
    bool ok = fixture_open(&f, 20, 32000, &err);
    CHECK(ok, "setup: %s", err.msg);
    if (ok) {
        int32_t prompt[20] = {1, 450, 4996, 17354, 1701, 29916};
        snug_sampling_params sp;
        snug_sampling_params_default(&sp);
        sp.temperature = 0;
        snug_stop_params stop;
        snug_stop_params_default(&stop);
        stop.ignore_eos = true;
        snug_gen_result res;
        CHECK_OK(snug_generate(f.g, prompt, 6, &sp, &stop, NULL, NULL, &res, &err), &err);
        CHECK(res.finish == SNUG_FINISH_MODEL_LENGTH && res.n_prompt + res.n_generated == 20, "finish %s at %lld",
              snug_finish_name(res.finish), (long long)(res.n_prompt + res.n_generated));
        CHECK_FAILS(snug_generate(f.g, prompt, 20, &sp, &stop, NULL, NULL, &res, &err), &err, SNUG_INVALID,
                    "a prompt of 20 tokens (1 to 19 fit;");
    }
    fixture_close(&f);
}

/* A model whose vocabulary is larger than its tokenizer's (padded
 * embeddings, as Qwen2 has): ids past the tokenizer have no text, and are
 * not an error. */
static void test_ids_past_tokenizer(void)
{
    snug_error err = {0};
    fixture f;
    bool ok = fixture_open(&f, 64, 32064, &err);
    CHECK(ok, "setup: %s", err.msg);
    if (ok) {
        int32_t prompt[3] = {1, 450, 4996};
        snug_logit_bias bias = {32050, 100.0f};
        snug_sampling_params sp;
        snug_sampling_params_default(&sp);
        sp.temperature = 0, sp.logit_bias = &bias, sp.n_logit_bias = 1;
        snug_stop_params stop;
        snug_stop_params_default(&stop);
        stop.max_tokens = 3;
        text_sink sink = {0};
        snug_gen_result res;
        CHECK_OK(snug_generate(f.g, prompt, 3, &sp, &stop, collect, &sink, &res, &err), &err);
        CHECK(res.n_generated == 3 && res.ids[3] == 32050 && res.ids[5] == 32050 && sink.n == 0,
              "%lld tokens, first %d, %zu bytes of text", (long long)res.n_generated, res.ids[3], sink.n);
    }
    fixture_close(&f);
}

int main(void)
{
    RUN(test_chat_stream);
    RUN(test_model_length);
    RUN(test_ids_past_tokenizer);
    return test_summary();
}
