/*
 * test_tok_native.c: the native tokenizer readers (SentencePiece and
 * tiktoken tokenizer.model, vocab.json + merges.txt, llama2.c
 * tokenizer.bin, GGUF vocabularies) and NFC normalization:
 *   - llama.cpp's vectors from the Llama 2 tokenizer.model, llama2.c's
 *     tokenizer.bin, GPT-2's encoder.json + vocab.bpe and both
 *     ggml-vocab-*.gguf; the Hugging Face multilingual vectors from
 *     TinyLlama's tokenizer.model and GPT-2's native files;
 *   - Llama 3 and Qwen2: the native tokenizer and the tokenizer.json written
 *     from it give the same ids on every fixture string, and hand-checked
 *     expectations (digit grouping, special tokens, NFC);
 *   - stories260K's tok512.bin encodes "Once upon a time" as llama2.c does;
 *   - decode(encode(s)) == s (NFC(s) for Qwen2), whole and streamed;
 *   - NFC against vectors made with Python's unicodedata, and by hand;
 *     the bounds and boundaries unicode.c relies on, for every code point,
 *     against utf8proc's own decompositions; its out-of-memory loop;
 *   - out-of-memory loops; malformed files of every format, each rejected
 *     with a message naming the file and the entry.
 */
#include "test.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "formats/gguf.h"
#include "base/json.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#define TD "tests/data/tokenizers/"

/* ---- helpers ---------------------------------------------------------------- */

/* Reads a whole file into a NUL-terminated malloc'd block (test scaffolding). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = (size_t)n;
    return buf;
}

/* A list of test strings (pointers into one malloc'd block). */
typedef struct strings {
    char *data;
    const char *s[512];
    size_t len[512];
    int n;
} strings;

/* The test strings of a llama.cpp .inp file. */
static void read_inputs(const char *path, strings *out)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    memset(out, 0, sizeof *out);
    out->data = slurp(path, NULL);
    for (char *p = out->data, *q; p && (q = strstr(p, sep)) && out->n < 512; p = q + strlen(sep)) {
        *q = '\0';
        out->s[out->n] = p;
        out->len[out->n++] = (size_t)(q - p);
    }
}

/* The lines of a llama.cpp .out file. */
static void read_lines(const char *path, strings *out)
{
    memset(out, 0, sizeof *out);
    out->data = slurp(path, NULL);
    for (char *p = out->data, *q; p && *p && (q = strchr(p, '\n')) && out->n < 512; p = q + 1) {
        *q = '\0';
        out->s[out->n] = p;
        out->len[out->n++] = (size_t)(q - p);
    }
}

/* The texts of the multilingual conformance inputs (their ids in ids_out). */
static json_t *multilingual_inputs(void)
{
    snug_error err = {0};
    json_t *list = NULL;
    CHECK_OK(snug_json_load_file_opts("tests/data/tokenizer/hf/multilingual_inputs.json", 1 << 24,
                                      SNUG_JSON_ANY_VALUE, &list, &err), &err);
    return list;
}

static snug_tokenizer *load(const char *path)
{
    snug_error err = {0};
    snug_tokenizer *t = NULL;
    CHECK_OK(snug_tokenizer_load(path, &t, &err), &err);
    return t;
}

/* Encodes s; formats the ids as " 1 2 3" into line (llama.cpp's style). */
static bool encode(snug_tok_encoder *enc, const char *s, size_t len, bool add_special,
                   bool parse_special, const int32_t **ids, size_t *n)
{
    snug_tok_encode_opts o = {.add_special = add_special, .parse_special = parse_special};
    snug_error err = {0};
    snug_status st = snug_tok_encode(enc, s, len, &o, ids, n, &err);
    CHECK_OK(st, &err);
    return st == SNUG_OK;
}

static void format_ids(const int32_t *ids, size_t n, char *line, size_t cap)
{
    size_t o = 0;
    line[0] = '\0';
    for (size_t i = 0; i < n && o < cap; i++) o += (size_t)snprintf(line + o, cap - o, " %d", ids[i]);
}

/* decode(ids) == want, and a stream of the ids one at a time gives the same. */
static bool decodes_to(const snug_tokenizer *tok, const int32_t *ids, size_t n, const char *want,
                       size_t want_len, bool skip_special)
{
    snug_error err = {0};
    char *out = NULL, chunk[4096];
    size_t out_len = 0;
    if (snug_tok_decode(tok, ids, n, skip_special, &out, &out_len, &err) != SNUG_OK) return false;
    bool ok = out_len == want_len && memcmp(out, want, want_len) == 0;
    snug_tok_stream s;
    snug_tok_stream_init(&s, tok, skip_special);
    char *buf = malloc(out_len + 4096);
    size_t o = 0;
    for (size_t i = 0; i < n && ok; i++) {
        size_t got = 0;
        ok = snug_tok_stream_push(&s, ids[i], chunk, sizeof chunk, &got, &err) == SNUG_OK &&
             o + got <= out_len;
        if (ok) memcpy(buf + o, chunk, got);
        o += got;
    }
    if (ok) o += snug_tok_stream_finish(&s, buf + o, 8);
    ok = ok && o == out_len && memcmp(buf, out, o) == 0;
    free(buf);
    snug_mem_free(out);
    return ok;
}

/* NFC of s (a malloc'd copy) for round trips through Qwen2. */
static char *nfc_of(const char *s, size_t n, size_t *out_len)
{
    snug_nfc_buf b = {0};
    const char *o = NULL;
    snug_error err = {0};
    char *copy = NULL;
    CHECK_OK(snug_utf8_nfc(s, n, &b, &o, out_len, &err), &err);
    if (o) {
        copy = malloc(*out_len + 1);
        memcpy(copy, o, *out_len);
    }
    snug_nfc_buf_free(&b);
    return copy;
}

/* ---- reference vectors --------------------------------------------------------- */

/* llama.cpp's vectors through one tokenizer; decoding gives each string back. */
static void run_llamacpp(snug_tokenizer *tok, const char *what, const char *base)
{
    char inp[256], outp[256];
    snprintf(inp, sizeof inp, "tests/data/tokenizer/%s.inp", base);
    snprintf(outp, sizeof outp, "tests/data/tokenizer/%s.out", base);
    strings in, out;
    read_inputs(inp, &in);
    read_lines(outp, &out);
    CHECK(in.n > 0 && in.n == out.n, "%s: %d inputs, %d outputs", base, in.n, out.n);
    snug_error err = {0};
    snug_tok_encoder *enc = NULL;
    if (tok) CHECK_OK(snug_tok_encoder_create(tok, &enc, &err), &err);
    int bad = 0, bad_trip = 0;
    for (int i = 0; enc && i < in.n && i < out.n; i++) {
        const int32_t *ids = NULL;
        size_t n = 0;
        char line[8192];
        if (!encode(enc, in.s[i], in.len[i], false, false, &ids, &n)) continue;
        format_ids(ids, n, line, sizeof line);
        if (strcmp(line, out.s[i]) != 0) {
            if (bad < 3) printf("  %s #%d \"%.40s\": got%s\n    want%s\n", what, i, in.s[i], line, out.s[i]);
            bad++;
        } else if (!decodes_to(tok, ids, n, in.s[i], in.len[i], false)) {
            if (bad_trip < 3) printf("  %s #%d \"%.40s\" does not decode back\n", what, i, in.s[i]);
            bad_trip++;
        }
    }
    CHECK(enc && bad == 0, "%s: %d of %d strings give other ids than llama.cpp's", what, bad, in.n);
    CHECK(bad_trip == 0, "%s: %d strings do not decode back", what, bad_trip);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    free(in.data);
    free(out.data);
}

static void test_llamacpp_spm_native(void)
{
    const char *base = "ggml-vocab-llama-spm.gguf";
    run_llamacpp(load(TD "llama2-native/tokenizer.model"), "llama2 tokenizer.model", base);
    run_llamacpp(load(TD "llama2c/tokenizer.bin"), "llama2.c tokenizer.bin", base);
    run_llamacpp(load(TD "gguf-vocab/ggml-vocab-llama-spm.gguf"), "llama-spm gguf", base);
}

static void test_llamacpp_gpt2_native(void)
{
    const char *base = "ggml-vocab-gpt-2.gguf";
    run_llamacpp(load(TD "gpt2-openai/encoder.json"), "gpt2 encoder.json", base);
    run_llamacpp(load(TD "gpt2-openai"), "gpt2 directory", base);
    run_llamacpp(load(TD "gpt2/vocab.json"), "gpt2 vocab.json", base);
    run_llamacpp(load(TD "gguf-vocab/ggml-vocab-gpt-2.gguf"), "gpt-2 gguf", base);
}

/* The multilingual inputs against one tokenizer's reference ids. */
static void run_multilingual(const char *path, const char *refs, bool add_special)
{
    snug_error err = {0};
    json_t *list = multilingual_inputs(), *ref = NULL;
    CHECK_OK(snug_json_load_file(refs, 1 << 24, &ref, &err), &err);
    snug_tokenizer *tok = load(path);
    snug_tok_encoder *enc = NULL;
    if (tok) CHECK_OK(snug_tok_encoder_create(tok, &enc, &err), &err);
    const json_t *entries = json_object_get(ref, "entries");
    int bad = 0, bad_trip = 0, checked = 0;
    for (size_t i = 0; enc && i < json_array_size(list); i++) {
        const json_t *item = json_array_get(list, i);
        const char *id = json_string_value(json_object_get(item, "id"));
        const char *s = json_string_value(json_object_get(item, "text"));
        const json_t *want = json_object_get(json_object_get(entries, id), "input_ids");
        for (size_t k = 0; !want && json_is_array(entries) && k < json_array_size(entries); k++) {
            const json_t *r = json_array_get(entries, k);
            const char *rid = json_string_value(json_object_get(r, "id"));
            if (rid && strcmp(rid, id) == 0) want = json_object_get(r, "input_ids");
        }
        if (!want) continue;
        checked++;
        const int32_t *ids = NULL;
        size_t n = 0;
        bool same = encode(enc, s, strlen(s), add_special, false, &ids, &n) && n == json_array_size(want);
        for (size_t k = 0; same && k < n; k++) same = ids[k] == json_integer_value(json_array_get(want, k));
        if (!same) {
            if (bad < 3) printf("  %s %s differs\n", path, id);
            bad++;
        } else if (!decodes_to(tok, ids, n, s, strlen(s), true)) {
            if (bad_trip < 3) printf("  %s %s does not decode back\n", path, id);
            bad_trip++;
        }
    }
    CHECK(checked == 83, "%s: %d vectors checked", refs, checked);
    CHECK(bad == 0, "%s: %d of %d multilingual inputs differ", path, bad, checked);
    CHECK(bad_trip == 0, "%s: %d inputs do not decode back", path, bad_trip);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    json_decref(list);
    json_decref(ref);
}

static void test_multilingual_native(void)
{
    /* TinyLlama's directory: tokenizer.model with its tokenizer_config.json */
    run_multilingual(TD "tinyllama-1.1b-chat", "tests/data/tokenizer/hf/tinyllama_multilingual.json", true);
    run_multilingual(TD "gpt2-openai/encoder.json", "tests/data/tokenizer/hf/gpt2_multilingual.json", false);
}

/* One long text with its reference ids. */
static void run_long_text(const char *path, const char *ref_path, bool add_special)
{
    snug_error err = {0};
    json_t *ref = NULL;
    CHECK_OK(snug_json_load_file(ref_path, 1 << 24, &ref, &err), &err);
    snug_tokenizer *tok = load(path);
    snug_tok_encoder *enc = NULL;
    if (tok) CHECK_OK(snug_tok_encoder_create(tok, &enc, &err), &err);
    const char *s = json_string_value(json_object_get(ref, "text"));
    const json_t *want = json_object_get(ref, "token_ids");
    const int32_t *ids = NULL;
    size_t n = 0, same = 0;
    if (enc && s && encode(enc, s, strlen(s), add_special, false, &ids, &n))
        while (same < n && same < json_array_size(want) &&
               ids[same] == json_integer_value(json_array_get(want, same)))
            same++;
    CHECK(n == json_array_size(want) && same == n, "%s: %zu ids, want %zu; first difference at %zu",
          path, n, json_array_size(want), same);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    json_decref(ref);
}

static void test_long_texts_native(void)
{
    run_long_text(TD "llama2-native/tokenizer.model", "tests/data/tokenizer/hf/llama_encoded.json", true);
    run_long_text(TD "gpt2-openai/encoder.json", "tests/data/tokenizer/hf/gpt2_encoded_tokens.json", false);
}

/* ---- native and written tokenizer.json agree ------------------------------------ */

/* Strings beyond the fixtures: special tokens of each family, digits,
 * text NFC changes, spaces, invalid UTF-8. */
static const char *const EXTRA[] = {
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>",
    "<s>[INST] special </s> <unk> <|endoftext|> <|reserved_special_token_200|>",
    "numbers 1234567 and 3.14159, 1,000,000 and 0x7fff 12345678901234567890",
    "  leading and trailing  ", "\t tabs\t\tand\n\n\nnewlines \r\n", "I'LL DON'T We'Re",
    "caf\xc3\xa9 cafe\xcc\x81 \xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab \xe2\x84\xab \xef\xac\xac",
    "\xf0\x9f\xa6\x99 emoji \xe2\x80\x94 dash \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9",
    "\xff\xfe invalid utf-8 \xc3 and \xe2\x82 cut \xed\xa0\x80 surrogate",
};

/* The strings every comparison runs over: both .inp files, the multilingual
 * inputs and EXTRA. Calls fn(ctx, s, len) for each. */
static void each_string(void (*fn)(void *ctx, const char *s, size_t len), void *ctx)
{
    const char *files[] = {"tests/data/tokenizer/ggml-vocab-llama-spm.gguf.inp",
                           "tests/data/tokenizer/ggml-vocab-gpt-2.gguf.inp"};
    for (size_t f = 0; f < SNUG_ARRAY_LEN(files); f++) {
        strings in;
        read_inputs(files[f], &in);
        for (int i = 0; i < in.n; i++) fn(ctx, in.s[i], in.len[i]);
        free(in.data);
    }
    json_t *list = multilingual_inputs();
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *s = json_string_value(json_object_get(json_array_get(list, i), "text"));
        if (s) fn(ctx, s, strlen(s));
    }
    json_decref(list);
    for (size_t i = 0; i < SNUG_ARRAY_LEN(EXTRA); i++) fn(ctx, EXTRA[i], strlen(EXTRA[i]));
}

typedef struct compare_ctx {
    snug_tok_encoder *a, *b;
    int n, bad;
} compare_ctx;

static void compare_one(void *ctx, const char *s, size_t len)
{
    compare_ctx *c = ctx;
    for (int special = 0; special < 2; special++) {
        snug_tok_encode_opts o = {.add_special = true, .parse_special = special};
        const int32_t *x, *y;
        size_t nx = 0, ny = 0;
        snug_error err = {0};
        snug_status sa = snug_tok_encode(c->a, s, len, &o, &x, &nx, &err);
        snug_status sb = snug_tok_encode(c->b, s, len, &o, &y, &ny, &err);
        c->n++;
        if (sa != SNUG_OK || sb != SNUG_OK || nx != ny || memcmp(x, y, nx * sizeof *x) != 0) {
            if (c->bad < 3) printf("  \"%.40s\" (special %d) encodes differently\n", s, special);
            c->bad++;
        }
    }
}

/* Writes tokenizer.json from the native tokenizer at path, reads it back,
 * and compares the two on every string. */
static void run_written_json(const char *path)
{
    char tmp[256];
    test_tmpdir(tmp, sizeof tmp);
    snug_error err = {0};
    snug_tokenizer *a = load(path), *b = NULL;
    if (a) CHECK_OK(tok_write_json(a, tmp, &err), &err);
    if (a) b = load(tmp);
    compare_ctx c = {0};
    if (a && b) {
        CHECK_OK(snug_tok_encoder_create(a, &c.a, &err), &err);
        CHECK_OK(snug_tok_encoder_create(b, &c.b, &err), &err);
    }
    if (c.a && c.b) each_string(compare_one, &c);
    CHECK(c.n >= 360 && c.bad == 0, "%s: %d of %d encodings differ from its written tokenizer.json",
          path, c.bad, c.n);
    if (a && b)
        CHECK(a->bos == b->bos && a->eos == b->eos && a->add_bos == b->add_bos &&
              a->n_added == b->n_added && a->nfc == b->nfc && a->n_vocab == b->n_vocab,
              "%s: specials, added tokens and normalization kept", path);
    snug_tok_encoder_free(c.a);
    snug_tok_encoder_free(c.b);
    snug_tokenizer_free(a);
    snug_tokenizer_free(b);
    test_rmtree(tmp);
}

static void test_written_json_llama3(void) { run_written_json(TD "llama3-tiktoken/tokenizer.model"); }
static void test_written_json_qwen2(void) { run_written_json(TD "qwen2-native"); }

static void test_written_json_others(void)
{
    run_written_json(TD "llama2-native/tokenizer.model");
    run_written_json(TD "gpt2-openai");
    run_written_json("tests/data/stories260K/tok512.bin");
}

/* ---- hand-checked expectations ------------------------------------------------------ */

/* The texts of ids joined by '|' into buf. */
static void pieces(const snug_tokenizer *t, const int32_t *ids, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        size_t k;
        const char *s = tok_text(t, ids[i], &k);
        o += (size_t)snprintf(buf + o, cap - o, "%s%.*s", i ? "|" : "", (int)k, s);
    }
}

/* Encodes s and checks its ids (want, n_want of them). */
static void expect_ids(snug_tok_encoder *enc, const char *s, bool add_special, bool parse_special,
                       const int32_t *want, size_t n_want)
{
    const int32_t *ids = NULL;
    size_t n = 0;
    char got[512];
    if (!encode(enc, s, strlen(s), add_special, parse_special, &ids, &n)) return;
    format_ids(ids, n, got, sizeof got);
    CHECK(n == n_want && memcmp(ids, want, n * sizeof *ids) == 0, "\"%s\": got%s", s, got);
}

static bool contains(const int32_t *ids, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

static void test_llama3_expectations(void)
{
    snug_tokenizer *t = load(TD "llama3-tiktoken/tokenizer.model");
    snug_tok_encoder *enc = NULL;
    snug_error err = {0};
    if (t) CHECK_OK(snug_tok_encoder_create(t, &enc, &err), &err);
    if (!enc) goto done;
    const int32_t *ids = NULL;
    size_t n = 0;
    char buf[256];
    /* digits in groups of up to three, left to right */
    if (encode(enc, "1234567", 7, false, false, &ids, &n)) {
        pieces(t, ids, n, buf, sizeof buf);
        CHECK(strcmp(buf, "123|456|7") == 0, "1234567 splits as %s", buf);
    }
    expect_ids(enc, "Hello world", true, false, (const int32_t[]){128000, 9906, 1917}, 3);
    expect_ids(enc, "Hello, world!", false, false, (const int32_t[]){9906, 11, 1917, 0}, 4);
    expect_ids(enc, "<|eot_id|>", false, true, (const int32_t[]){128009}, 1);
    expect_ids(enc, "<|start_header_id|>user<|end_header_id|>", false, true,
               (const int32_t[]){128006, 882, 128007}, 3);
    if (encode(enc, "<|eot_id|>", 10, false, false, &ids, &n))
        CHECK(!contains(ids, n, 128009) && n > 1, "without parse_special, <|eot_id|> is text");
    CHECK(t->bos == 128000 && t->eos == 128001 && t->add_bos, "bos 128000, eos 128001, add_bos");
    int32_t eos[8];
    int32_t n_eos = snug_tokenizer_eos_ids(t, eos, 8);
    CHECK(n_eos == 3 && eos[0] == 128001 && eos[1] == 128008 && eos[2] == 128009,
          "end-of-sequence ids 128001 128008 128009 (%d of them)", n_eos);
    const struct {
        int32_t id;
        const char *text;
    } named[] = {{128002, "<|reserved_special_token_0|>"}, {128004, "<|finetune_right_pad_id|>"},
                 {128005, "<|step_id|>"}, {128008, "<|eom_id|>"}, {128010, "<|python_tag|>"},
                 {128011, "<|image|>"}, {128012, "<|reserved_special_token_2|>"},
                 {128255, "<|reserved_special_token_245|>"}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(named); i++) {
        size_t k;
        const char *s = tok_text(t, named[i].id, &k);
        CHECK(k == strlen(named[i].text) && memcmp(s, named[i].text, k) == 0 &&
              t->entries[named[i].id].attr == TOK_SPECIAL, "token %d is %s", named[i].id, named[i].text);
    }
    CHECK(strcmp(snug_tokenizer_bos_text(t), "<|begin_of_text|>") == 0, "bos text");
done:
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(t);
}

static void test_qwen2_expectations(void)
{
    snug_tokenizer *t = load(TD "qwen2-native");
    snug_tok_encoder *enc = NULL;
    snug_error err = {0};
    if (t) CHECK_OK(snug_tok_encoder_create(t, &enc, &err), &err);
    if (!enc) goto done;
    const int32_t *ids = NULL, *ids2 = NULL;
    size_t n = 0, n2 = 0;
    char buf[256];
    /* every digit its own token */
    if (encode(enc, "1234567", 7, false, false, &ids, &n)) {
        pieces(t, ids, n, buf, sizeof buf);
        CHECK(strcmp(buf, "1|2|3|4|5|6|7") == 0, "1234567 splits as %s", buf);
    }
    expect_ids(enc, "Hello world", true, false, (const int32_t[]){9707, 1879}, 2);
    expect_ids(enc, "Hello, world!", false, false, (const int32_t[]){9707, 11, 1879, 0}, 4);
    expect_ids(enc, "<|im_start|>user<|im_end|>", false, true, (const int32_t[]){151644, 872, 151645}, 3);
    expect_ids(enc, "<|endoftext|>", false, true, (const int32_t[]){151643}, 1);
    if (encode(enc, "<|im_end|>", 10, false, false, &ids, &n))
        CHECK(!contains(ids, n, 151645), "without parse_special, <|im_end|> is text");
    CHECK(t->nfc && t->bos == -1 && t->eos == 151645 && !t->add_bos,
          "Qwen2: NFC, no bos, eos <|im_end|>, no bos added");
    /* NFC: a decomposed e-acute encodes as the composed one */
    int32_t composed[16];
    size_t nc = 0;
    if (encode(enc, "caf\xc3\xa9", 5, false, false, &ids, &n)) {
        nc = SNUG_MIN(n, (size_t)16);
        memcpy(composed, ids, nc * sizeof *ids);
    }
    if (encode(enc, "cafe\xcc\x81", 6, false, false, &ids2, &n2))
        CHECK(n2 == nc && memcmp(ids2, composed, nc * sizeof *ids2) == 0,
              "\"cafe\\u0301\" encodes as \"caf\\u00e9\"");
done:
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(t);
}

/* stories260K: llama2.c's run.c encodes "Once upon a time" (with BOS) as
 * 1 403 407 261 378 (shared/fixtures/stories260K/greedy.txt, prompt_ids). */
static void test_tok512_once_upon_a_time(void)
{
    const char *paths[] = {"tests/data/stories260K/tok512.bin", "tests/data/stories260K/stories260K.gguf"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(paths); i++) {
        snug_tokenizer *t = load(paths[i]);
        snug_tok_encoder *enc = NULL;
        snug_error err = {0};
        if (t) CHECK_OK(snug_tok_encoder_create(t, &enc, &err), &err);
        if (enc) expect_ids(enc, "Once upon a time", true, false, (const int32_t[]){1, 403, 407, 261, 378}, 5);
        const int32_t ids[] = {1, 403, 407, 261, 378};
        if (t) CHECK(decodes_to(t, ids, 5, "Once upon a time", 16, true), "%s decodes back", paths[i]);
        if (t) CHECK(strcmp(snug_tokenizer_bos_text(t), "<s>") == 0 &&
                     strcmp(snug_tokenizer_eos_text(t), "</s>") == 0, "%s: <s> and </s>", paths[i]);
        snug_tok_encoder_free(enc);
        snug_tokenizer_free(t);
    }
}

/* ---- round trips ---------------------------------------------------------------------- */

typedef struct trip_ctx {
    const snug_tokenizer *t;
    snug_tok_encoder *enc;
    int n, bad;
} trip_ctx;

static void trip_one(void *ctx, const char *s, size_t len)
{
    trip_ctx *c = ctx;
    const int32_t *ids = NULL;
    size_t n = 0, want_len = len;
    char *want = NULL;
    if (!encode(c->enc, s, len, true, false, &ids, &n)) return;
    if (c->t->nfc) want = nfc_of(s, len, &want_len); /* Qwen2 gives back NFC(s) */
    c->n++;
    if (!decodes_to(c->t, ids, n, want ? want : s, want_len, true)) {
        if (c->bad < 3) printf("  %s: \"%.40s\" does not decode back\n", c->t->source, s);
        c->bad++;
    }
    free(want);
}

static void test_round_trips_native(void)
{
    const char *paths[] = {TD "llama3-tiktoken/tokenizer.model", TD "qwen2-native",
                           TD "llama2-native/tokenizer.model", TD "gpt2-openai",
                           TD "llama2c/tokenizer.bin", "tests/data/stories260K/tok512.bin"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(paths); i++) {
        trip_ctx c = {.t = load(paths[i])};
        snug_error err = {0};
        if (c.t) CHECK_OK(snug_tok_encoder_create(c.t, &c.enc, &err), &err);
        if (c.enc) each_string(trip_one, &c);
        CHECK(c.n >= 180 && c.bad == 0, "%s: %d of %d strings do not decode back", paths[i], c.bad, c.n);
        snug_tok_encoder_free(c.enc);
        snug_tokenizer_free((snug_tokenizer *)c.t);
    }
}

/* ---- NFC -------------------------------------------------------------------------------- */

static size_t utf8_put(uint32_t cp, char *o)
{
    if (cp < 0x80) return (size_t)(o[0] = (char)cp, 1);
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 63)),
               o[2] = (char)(0x80 | (cp & 63)), 3;
    return o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 63)),
           o[2] = (char)(0x80 | ((cp >> 6) & 63)), o[3] = (char)(0x80 | (cp & 63)), 4;
}

/* Every vector of tests/data/unicode/nfc.txt (made with Python's unicodedata,
 * Unicode 14.0.0; NFC of assigned characters is stable from version to
 * version, so a later utf8proc gives the same). */
static void test_nfc_vectors(void)
{
    char *data = slurp("tests/data/unicode/nfc.txt", NULL);
    CHECK(data != NULL, "tests/data/unicode/nfc.txt");
    snug_nfc_buf b = {0};
    int n = 0, bad = 0;
    for (char *line = data, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (line[0] == '#') continue;
        char in[4096], want[4096];
        size_t ni = 0, nw = 0;
        int side = 0;
        for (char *p = line; *p;) {
            if (*p == ';' || *p == ' ') {
                side |= *p++ == ';';
                continue;
            }
            uint32_t cp = (uint32_t)strtoul(p, &p, 16);
            if (side)
                nw += utf8_put(cp, want + nw);
            else
                ni += utf8_put(cp, in + ni);
        }
        const char *out = NULL;
        size_t out_len = 0;
        snug_error err = {0};
        n++;
        if (snug_utf8_nfc(in, ni, &b, &out, &out_len, &err) != SNUG_OK || out_len != nw ||
            memcmp(out, want, nw) != 0) {
            if (bad < 3) printf("  NFC of %s is wrong\n", line);
            bad++;
        }
    }
    CHECK(n > 5000 && bad == 0, "%d of %d NFC vectors wrong (Unicode %s)", bad, n, snug_unicode_version());
    snug_nfc_buf_free(&b);
    free(data);
}

static void expect_nfc(const char *in, const char *want, const char *what)
{
    snug_nfc_buf b = {0};
    const char *out = NULL;
    size_t n = 0;
    snug_error err = {0};
    CHECK_OK(snug_utf8_nfc(in, strlen(in), &b, &out, &n, &err), &err);
    CHECK(out && n == strlen(want) && memcmp(out, want, n) == 0, "%s: NFC gives \"%.*s\"", what,
          (int)n, out ? out : "");
    snug_nfc_buf_free(&b);
}

static void test_nfc_cases(void)
{
    expect_nfc("caf\xc3\xa9", "caf\xc3\xa9", "composed e-acute stays");
    expect_nfc("cafe\xcc\x81", "caf\xc3\xa9", "e + U+0301 composes");
    expect_nfc("\xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab", "\xed\x95\x9c", "Hangul L V T composes to U+D55C");
    expect_nfc("\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81", "Hangul LV + T composes to U+AC01");
    expect_nfc("\xed\x95\x9c\xea\xb8\x80", "\xed\x95\x9c\xea\xb8\x80", "Hangul syllables stay");
    /* U+0301 (class 230) after U+0316 (220): reordered, then a + U+0301 composes */
    expect_nfc("a\xcc\x81\xcc\x96", "\xc3\xa1\xcc\x96", "combining marks reordered by class");
    expect_nfc("\xe2\x84\xab", "\xc3\x85", "U+212B ANGSTROM SIGN becomes U+00C5");
    expect_nfc("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc", "U+0958 (an exclusion) stays decomposed");
    expect_nfc("\xff" "e\xcc\x81\xc3", "\xff\xc3\xa9\xc3", "invalid bytes pass through");
    expect_nfc("e\xff\xcc\x81", "e\xff\xcc\x81", "nothing composes across an invalid byte");
    expect_nfc("\xed\xa0\x80\xcc\x81", "\xed\xa0\x80\xcc\x81", "a surrogate's bytes pass through");
    expect_nfc("", "", "empty text");
    /* invalid bytes between combining marks: copied, and nothing reorders
     * or composes across them */
    expect_nfc("a\xcc\x81\xff\xcc\x96", "\xc3\xa1\xff\xcc\x96",
               "a + U+0301 composes; U+0316 after an invalid byte stays after it");
    expect_nfc("a\xcc\x96\x80\xcc\x81", "a\xcc\x96\x80\xcc\x81",
               "U+0301 after an invalid byte does not compose with the a before it");
    expect_nfc("\xcc\x81\xfe\xcc\x96", "\xcc\x81\xfe\xcc\x96",
               "U+0301 (230) and U+0316 (220) either side of an invalid byte keep their order");
    expect_nfc("\xcc\x81\xcc\x96\xe0\x80\xcc\x81\xcc\x96",
               "\xcc\x96\xcc\x81\xe0\x80\xcc\x96\xcc\x81",
               "marks reordered on each side of an overlong form, not across it");
    /* utf8proc 2.8 composes an LV syllable with U+11A7 (no trailing
     * consonant: T index 0) and drops the U+11A7; snug must not */
    expect_nfc("\xea\xb0\x80\xe1\x86\xa7", "\xea\xb0\x80\xe1\x86\xa7", "U+AC00 U+11A7 stays");
    expect_nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa7", "\xea\xb0\x80\xe1\x86\xa7",
               "U+1100 U+1161 compose to U+AC00; U+11A7 stays after it");
    /* marks new in Unicode 15.0 */
    expect_nfc("\xf0\x9e\x82\x8f\xe0\xb8\xb9", "\xe0\xb8\xb9\xf0\x9e\x82\x8f",
               "U+1E08F (class 230, Unicode 15) sorts after U+0E39 (class 103)");
    expect_nfc("e\xf0\x90\xbb\xbd\xcc\x81", "\xc3\xa9\xf0\x90\xbb\xbd",
               "U+10EFD (class 220, Unicode 15) sorts before U+0301, which composes with e");
    CHECK(atoi(snug_unicode_version()) >= 15, "Unicode version %s", snug_unicode_version());
    CHECK(snug_utf8_nfc_quick("plain ASCII text", 16), "ASCII is NFC");
    CHECK(snug_utf8_nfc_quick("\xe4\xb8\xad\xe6\x96\x87 caf\xc3\xa9", 13), "CJK and composed text are NFC");
    CHECK(!snug_utf8_nfc_quick("e\xcc\x81", 3), "e + U+0301 may change");
    CHECK(snug_unicode_ccc(0x0301) == 230 && snug_unicode_ccc(0x0316) == 220 &&
          snug_unicode_ccc('a') == 0 && snug_unicode_ccc(0x110000) == 0 &&
          snug_unicode_ccc(0xFFFFFFFFu) == 0 && snug_unicode_ccc(0x10EFD) == 220,
          "combining classes");
    CHECK(snug_utf8_nfc_quick("\xea\xb0\x80\xe1\x86\xa7", 6) &&
          !snug_utf8_nfc_quick("\xea\xb0\x80\xe1\x86\xa8", 6),
          "U+11A7 is an NFC boundary, U+11A8 (a trailing consonant) is not");
}

/* The bounds and the boundaries unicode.c relies on, for every code point,
 * against utf8proc's own canonical decompositions (what the generator of
 * snug's former NFC tables checked of them): NFC makes at most 2 code
 * points and 3 bytes of each byte of a character; a character the quick
 * check passes is of class 0 and kept by NFC; the last code point of every
 * primary composite's decomposition (which ends its composition pair;
 * Hangul V and T jamo among them) fails the quick check; composing never
 * makes text longer. */
static void test_nfc_every_code_point(void)
{
    snug_nfc_buf b = {0};
    int n = 0, n_pairs = 0, bad_bound = 0, bad_boundary = 0, bad_second = 0, bad_longer = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        n++;
        char in[4], nfd[64], part[64];
        size_t n_in = utf8_put(cp, in), n_nfd = 0, n_part = 0;
        const char *out = NULL;
        size_t n_out = 0;
        snug_error err = {0};
        if (snug_utf8_nfc(in, n_in, &b, &out, &n_out, &err) != SNUG_OK) {
            if (bad_bound++ < 3) printf("  NFC of U+%04X failed: %s\n", cp, err.msg);
            continue;
        }
        utf8proc_int32_t d[16];
        int boundclass = 0;
        utf8proc_ssize_t m = utf8proc_decompose_char(
            (utf8proc_int32_t)cp, d, 16, UTF8PROC_STABLE | UTF8PROC_COMPOSE, &boundclass);
        if (m < 1 || m > 16 || (size_t)m > 2 * n_in) {
            if (bad_bound++ < 3)
                printf("  U+%04X decomposes into %td code points\n", cp, (ptrdiff_t)m);
            continue;
        }
        for (utf8proc_ssize_t k = 0; k < m; k++) n_nfd += utf8_put((uint32_t)d[k], nfd + n_nfd);
        if (n_nfd > 3 * n_in || n_out > 3 * n_in) {
            if (bad_bound++ < 3) printf("  U+%04X: NFD %zu bytes, NFC %zu\n", cp, n_nfd, n_out);
        }
        bool kept = n_out == n_in && memcmp(out, in, n_in) == 0;
        if (snug_utf8_nfc_quick(in, n_in) && (snug_unicode_ccc(cp) != 0 || !kept)) {
            if (bad_boundary++ < 3)
                printf("  U+%04X passes the quick check but is no boundary\n", cp);
        }
        if (!kept || m < 2) continue;
        /* a primary composite: its decomposition's last code point ends a pair */
        n_pairs++;
        char last[4];
        size_t n_last = utf8_put((uint32_t)d[m - 1], last);
        if (snug_utf8_nfc_quick(last, n_last)) {
            if (bad_second++ < 3)
                printf("  U+%04X ends the pair of U+%04X but passes the quick check\n",
                       (unsigned)d[m - 1], cp);
        }
        for (utf8proc_ssize_t k = 0; k + 1 < m; k++)
            n_part += utf8_put((uint32_t)d[k], part + n_part);
        if (snug_utf8_nfc(part, n_part, &b, &out, &n_out, &err) != SNUG_OK ||
            n_in > n_out + n_last) {
            if (bad_longer++ < 3) printf("  U+%04X is longer than the pair it composes from\n", cp);
        }
    }
    CHECK(n == 0x110000 - 0x800 && bad_bound == 0, "%d of %d code points break the bounds",
          bad_bound, n);
    CHECK(bad_boundary == 0, "%d code points pass the quick check but are no NFC boundary",
          bad_boundary);
    CHECK(n_pairs > 11172 + 900 && bad_second == 0 && bad_longer == 0,
          "of %d primary composites, %d end with a boundary and %d are longer than their pair",
          n_pairs, bad_second, bad_longer);
    snug_nfc_buf_free(&b);
}

/* NFC's own out-of-memory loop: the text, then code points for each chunk. */
static snug_status oom_nfc(void *ctx, snug_error *err)
{
    const char *const *texts = ctx; /* input, its NFC */
    snug_nfc_buf b = {0};
    const char *out = NULL;
    size_t n = 0;
    snug_status st = snug_utf8_nfc(texts[0], strlen(texts[0]), &b, &out, &n, err);
    if (st == SNUG_OK)
        CHECK(n == strlen(texts[1]) && memcmp(out, texts[1], n) == 0, "NFC gives \"%.*s\"",
              (int)n, out);
    snug_nfc_buf_free(&b);
    return st;
}

static void test_nfc_out_of_memory(void)
{
    const char *texts[2] = {
        "ab cafe\xcc\x81 a\xcc\x81\xcc\x96\xff \xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab",
        "ab caf\xc3\xa9 \xc3\xa1\xcc\x96\xff \xed\x95\x9c"};
    int fails = test_oom_loop("NFC", oom_nfc, NULL, (void *)texts, 100);
    CHECK(fails >= 2, "NFC made only %d allocations", fails);
}

/* ---- out of memory ------------------------------------------------------------------------ */

typedef struct oom_ctx {
    const char *path;
    snug_tokenizer *t;
    const snug_tokenizer *enc_tok;
    const char *text;
} oom_ctx;

static snug_status oom_load(void *ctx, snug_error *err)
{
    oom_ctx *c = ctx;
    return snug_tokenizer_load(c->path, &c->t, err);
}

static void oom_unload(void *ctx)
{
    oom_ctx *c = ctx;
    snug_tokenizer_free(c->t);
    c->t = NULL;
}

static snug_status oom_encode(void *ctx, snug_error *err)
{
    oom_ctx *c = ctx;
    snug_tok_encoder *enc = NULL;
    snug_tok_encode_opts o = {.add_special = true, .parse_special = true};
    const int32_t *ids;
    size_t n;
    snug_status st = snug_tok_encoder_create(c->enc_tok, &enc, err);
    if (st == SNUG_OK) st = snug_tok_encode(enc, c->text, strlen(c->text), &o, &ids, &n, err);
    snug_tok_encoder_free(enc);
    return st;
}

/* ---- small native files written by the tests ------------------------------------------------ */

/* A growable byte buffer (libc memory: test scaffolding). */
typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = SNUG_MAX(b->cap * 2, b->n + n + 256);
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }

static void pb_varint(bytes *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v) c |= 0x80;
        put(b, &c, 1);
    } while (v);
}

static void pb_len_field(bytes *b, uint32_t field, const void *data, size_t n)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    put(b, data, n);
}

static void pb_int_field(bytes *b, uint32_t field, uint64_t v)
{
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, v);
}

/* What a tiny SentencePiece model has, and the ways to break it. */
typedef struct spm_opts {
    int model_type;           /* 2: BPE */
    int remove_extra_ws;      /* 0 */
    int bad_type;             /* a piece of this type (0: none) */
    const char *byte_piece;   /* text of the first BYTE piece (NULL: "<0x00>") */
    bool duplicate;           /* a normal piece twice */
    int64_t bos_id;           /* 1 */
    bool charsmap;            /* normalization rules */
    bool score_nan;
} spm_opts;

static void spm_piece(bytes *b, const char *text, float score, int type)
{
    bytes p = {0};
    pb_len_field(&p, 1, text, strlen(text));
    uint32_t bits;
    memcpy(&bits, &score, 4);
    pb_varint(&p, 2 << 3 | 5);
    put_u32(&p, bits);
    if (type != 1) pb_int_field(&p, 3, (uint64_t)type);
    pb_len_field(b, 1, p.p, p.n);
    free(p.p);
}

/* A SentencePiece BPE model: <unk> <s> </s>, 256 byte pieces, a few
 * normal pieces; written to path. */
static void write_spm(const char *path, const spm_opts *o, size_t cut)
{
    bytes b = {0}, t = {0}, n = {0};
    spm_piece(&b, "<unk>", 0, 2);
    spm_piece(&b, "<s>", 0, 3);
    spm_piece(&b, "</s>", 0, 3);
    for (int i = 0; i < 256; i++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", i);
        spm_piece(&b, i == 0 && o->byte_piece ? o->byte_piece : s, 0, 6);
    }
    const char *normal[] = {"\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(normal); i++)
        spm_piece(&b, normal[i], o->score_nan && i == 2 ? NAN : -(float)i, 1);
    if (o->duplicate) spm_piece(&b, "ab", -9, 1);
    if (o->bad_type) spm_piece(&b, "zz", -10, o->bad_type);
    pb_int_field(&t, 3, (uint64_t)o->model_type);
    pb_int_field(&t, 35, 1);
    pb_int_field(&t, 40, 0);
    pb_int_field(&t, 41, (uint64_t)o->bos_id);
    pb_int_field(&t, 42, 2);
    pb_int_field(&t, 43, (uint64_t)-1); /* pad_id -1: a 10-byte varint */
    pb_len_field(&b, 2, t.p, t.n);
    pb_len_field(&n, 1, "identity", 8);
    if (o->charsmap) pb_len_field(&n, 2, "\x01\x02\x03", 3);
    pb_int_field(&n, 3, 1);
    pb_int_field(&n, 4, (uint64_t)o->remove_extra_ws);
    pb_len_field(&b, 3, n.p, n.n);
    test_write_file(path, b.p, b.n - SNUG_MIN(cut, b.n));
    free(b.p);
    free(t.p);
    free(n.p);
}

static const spm_opts SPM_OK = {.model_type = 2, .bos_id = 1};

/* A llama2.c tokenizer.bin: <unk>, "\n<s>\n", "\n</s>\n", the byte tokens,
 * then normal tokens; byte3 replaces the first byte token's text. */
static void write_llama2c(const char *path, int32_t max_len, const char *byte3, const char *extra,
                          float extra_score, size_t cut)
{
    bytes b = {0};
    put_u32(&b, (uint32_t)max_len);
    const char *first[] = {"<unk>", "\n<s>\n", "\n</s>\n"};
    char s[16];
    for (int i = 0; i < 3 + 256 + 4; i++) {
        const char *text = s;
        float score = 0;
        const char *normal[] = {" ", "a", " a", "b"};
        if (i < 3)
            text = first[i];
        else if (i < 259)
            snprintf(s, sizeof s, "<0x%02X>", i - 3);
        else
            text = normal[i - 259], score = -(float)(i - 259);
        if (i == 3 && byte3) text = byte3;
        put(&b, &score, 4);
        put_u32(&b, (uint32_t)strlen(text));
        put(&b, text, strlen(text));
    }
    if (extra) {
        put(&b, &extra_score, 4);
        put_u32(&b, (uint32_t)strlen(extra));
        put(&b, extra, strlen(extra));
    }
    test_write_file(path, b.p, b.n - SNUG_MIN(cut, b.n));
    free(b.p);
}

/* Writes text into dir/name. */
static void write_text(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    test_write_file(p, text, strlen(text));
}

/* A tiny GPT-2 vocabulary: the 256 bytes (in GPT-2's alphabet), "Ġa",
 * "ab" and "Ġab", merges "Ġ a", "a b", "Ġa b". */
static void write_gpt2(const char *dir, const char *extra_vocab, const char *extra_merges)
{
    bytes v = {0};
    put(&v, "{", 1);
    for (int i = 0; i < 256; i++) {
        char c[3] = {0}, e[32];
        size_t k = tok_byte_to_char((uint8_t)i, c);
        const char *esc = c[0] == '"' ? "\\\"" : c[0] == '\\' ? "\\\\" : NULL;
        snprintf(e, sizeof e, "\"%s%.*s\": %d,", esc ? esc : "", esc ? 0 : (int)k, c, i);
        put(&v, e, strlen(e));
    }
    const char *tail = "\"\xc4\xa0" "a\": 256, \"ab\": 257, \"\xc4\xa0" "ab\": 258";
    put(&v, tail, strlen(tail));
    if (extra_vocab) put(&v, extra_vocab, strlen(extra_vocab));
    put(&v, "}", 2);
    write_text(dir, "vocab.json", (const char *)v.p);
    char merges[512];
    snprintf(merges, sizeof merges, "#version: 0.2\n\xc4\xa0 a\na b\n\xc4\xa0" "a b\n%s",
             extra_merges ? extra_merges : "");
    write_text(dir, "merges.txt", merges);
    free(v.p);
}

/* A tiktoken file of n lines: the 256 bytes first, then distinct 2- and
 * 3-byte tokens; `edit` changes one line (its number and new text). */
static void write_tiktoken(const char *path, int n, int edit_line, const char *edit_text)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    bytes b = {0};
    for (int i = 0; i < n; i++) {
        uint8_t t[3];
        size_t k;
        if (i < 256) {
            t[0] = (uint8_t)i, k = 1;
        } else if (i < 256 + 65536) {
            t[0] = (uint8_t)((i - 256) >> 8), t[1] = (uint8_t)(i - 256), k = 2;
        } else {
            int j = i - 256 - 65536;
            t[0] = 'x', t[1] = (uint8_t)(j >> 8), t[2] = (uint8_t)j, k = 3;
        }
        char line[64];
        size_t o = 0;
        uint32_t v = (uint32_t)t[0] << 16 | (k > 1 ? (uint32_t)t[1] << 8 : 0) | (k > 2 ? t[2] : 0);
        line[o++] = b64[v >> 18 & 63];
        line[o++] = b64[v >> 12 & 63];
        line[o++] = k > 1 ? b64[v >> 6 & 63] : '=';
        line[o++] = k > 2 ? b64[v & 63] : '=';
        o += (size_t)snprintf(line + o, sizeof line - o, " %d\n", i);
        if (i + 1 == edit_line) {
            put(&b, edit_text, strlen(edit_text));
            put(&b, "\n", 1);
        } else {
            put(&b, line, o);
        }
    }
    test_write_file(path, b.p, b.n);
    free(b.p);
}

/* ---- GGUF files written by the tests ------------------------------------------------------- */

static void gg_string(bytes *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void gg_kv_string(bytes *b, const char *key, const char *value)
{
    gg_string(b, key);
    put_u32(b, SNUG_GGUF_STRING);
    gg_string(b, value);
}

static void gg_kv_u32(bytes *b, const char *key, uint32_t v)
{
    gg_string(b, key);
    put_u32(b, SNUG_GGUF_UINT32);
    put_u32(b, v);
}

static void gg_kv_strings(bytes *b, const char *key, const char *const *s, size_t n)
{
    gg_string(b, key);
    put_u32(b, SNUG_GGUF_ARRAY);
    put_u32(b, SNUG_GGUF_STRING);
    put_u64(b, n);
    for (size_t i = 0; i < n; i++) gg_string(b, s[i]);
}

static void gg_kv_words(bytes *b, const char *key, snug_gguf_type type, const void *v, size_t n)
{
    gg_string(b, key);
    put_u32(b, SNUG_GGUF_ARRAY);
    put_u32(b, type);
    put_u64(b, n);
    put(b, v, n * 4);
}

/* What a tiny GGUF vocabulary has, and the ways to break it. */
typedef struct gg_opts {
    const char *model;        /* "llama" or "gpt2" */
    const char *pre;          /* gpt2: tokenizer.ggml.pre (NULL: absent) */
    int32_t bad_type;         /* a token type to put on token 5 (0: none) */
    bool short_scores;        /* one score fewer than tokens */
    const char *token5;       /* llama: the text of token 5 (a byte token) */
    const char *bad_merge;    /* gpt2: an extra merge */
    uint32_t bos;             /* bos id */
} gg_opts;

/* Writes a GGUF file with a small vocabulary, no tensors, padded to 32. */
static void write_gguf(const char *path, const gg_opts *o)
{
    bytes kv = {0}, b = {0};
    int n_kv = 0;
    bool llama = strcmp(o->model, "llama") == 0;
    const char *tokens[8];
    float scores[8] = {0, 0, 0, 0, 0, -1, -2, -3};
    int32_t types[8] = {2, 3, 3, 1, 1, 1, 1, 1};
    size_t n = 8;
    if (llama) {
        const char *t[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "\xe2\x96\x81" "a", "b", "ab"};
        memcpy(tokens, t, sizeof tokens);
        if (o->token5) tokens[5] = o->token5, types[5] = 6;
    } else {
        const char *t[] = {"<|endoftext|>", "a", "b", "\xc4\xa0", "ab", "\xc4\xa0" "a", "\xc4\xa0" "ab", "c"};
        memcpy(tokens, t, sizeof tokens);
        types[0] = 3, types[1] = types[2] = 1;
    }
    if (o->bad_type) types[5] = o->bad_type;
    gg_kv_string(&kv, "general.architecture", llama ? "llama" : "gpt2"), n_kv++;
    gg_kv_string(&kv, "tokenizer.ggml.model", o->model), n_kv++;
    if (o->pre) gg_kv_string(&kv, "tokenizer.ggml.pre", o->pre), n_kv++;
    gg_kv_strings(&kv, "tokenizer.ggml.tokens", tokens, n), n_kv++;
    gg_kv_words(&kv, "tokenizer.ggml.scores", SNUG_GGUF_FLOAT32, scores, o->short_scores ? n - 1 : n), n_kv++;
    gg_kv_words(&kv, "tokenizer.ggml.token_type", SNUG_GGUF_INT32, types, n), n_kv++;
    if (!llama) {
        const char *m[] = {"\xc4\xa0 a", "a b", "\xc4\xa0" "a b", o->bad_merge};
        gg_kv_strings(&kv, "tokenizer.ggml.merges", m, o->bad_merge ? 4 : 3), n_kv++;
    }
    gg_kv_u32(&kv, "tokenizer.ggml.bos_token_id", o->bos), n_kv++;
    gg_kv_u32(&kv, "tokenizer.ggml.eos_token_id", llama ? 2 : 0), n_kv++;
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, 0);
    put_u64(&b, (uint64_t)n_kv);
    put(&b, kv.p, kv.n);
    while (b.n % 32) put(&b, "", 1);
    test_write_file(path, b.p, b.n);
    free(kv.p);
    free(b.p);
}

static void test_small_native_files(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    snug_error err = {0};
    /* a tiny SentencePiece model */
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    write_spm(p, &SPM_OK, 0);
    snug_tokenizer *t = load(dir);
    snug_tok_encoder *enc = NULL;
    if (t) CHECK_OK(snug_tok_encoder_create(t, &enc, &err), &err);
    /* " ab a" -> U+2581 ab U+2581 a; "c" is no piece: byte fallback 0x63 -> <0x63> (id 3 + 0x63) */
    if (enc) expect_ids(enc, "ab a", true, false, (const int32_t[]){1, 264, 262}, 3);
    if (enc) expect_ids(enc, "ac", false, false, (const int32_t[]){262, 3 + 0x63}, 2);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(t);
    /* a tiny tiktoken file of Llama 3's size */
    snprintf(p, sizeof p, "%s/tiktoken.model", dir);
    write_tiktoken(p, 128000, 0, NULL);
    t = load(p);
    if (t) CHECK(t->n_vocab == 128256 && t->n_added == 256 && t->ignore_merges, "tiktoken: Llama 3 layout");
    snug_tokenizer_free(t);
    /* a tiny GPT-2 vocabulary: "ab" merges, " ab" too */
    char gdir[512];
    snprintf(gdir, sizeof gdir, "%s/gpt2", dir);
    CHECK(mkdir(gdir, 0755) == 0, "mkdir");
    write_gpt2(gdir, NULL, NULL);
    t = load(gdir);
    enc = NULL;
    if (t) CHECK_OK(snug_tok_encoder_create(t, &enc, &err), &err);
    if (enc) expect_ids(enc, "ab ab", false, false, (const int32_t[]){257, 258}, 2);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(t);
    /* GGUF vocabularies of both models */
    snprintf(p, sizeof p, "%s/llama.gguf", dir);
    write_gguf(p, &(gg_opts){.model = "llama", .bos = 1});
    t = load(p);
    enc = NULL;
    if (t) CHECK_OK(snug_tok_encoder_create(t, &enc, &err), &err);
    if (enc) expect_ids(enc, "ab a", true, false, (const int32_t[]){1, 5, 6, 5}, 4);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(t);
    snprintf(p, sizeof p, "%s/gpt2.gguf", dir);
    write_gguf(p, &(gg_opts){.model = "gpt2", .pre = "gpt-2", .bos = 0});
    t = load(p);
    enc = NULL;
    if (t) CHECK_OK(snug_tok_encoder_create(t, &enc, &err), &err);
    if (enc) expect_ids(enc, "ab ab<|endoftext|>", false, true, (const int32_t[]){4, 6, 0}, 3);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(t);
    test_rmtree(dir);
}

static void test_out_of_memory_native(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    write_spm(p, &SPM_OK, 0);
    char gdir[512];
    snprintf(gdir, sizeof gdir, "%s/gpt2", dir);
    CHECK(mkdir(gdir, 0755) == 0, "mkdir");
    write_gpt2(gdir, NULL, NULL);
    write_text(gdir, "tokenizer_config.json", "{\"tokenizer_class\": \"Qwen2Tokenizer\"}");
    char gg[512];
    snprintf(gg, sizeof gg, "%s/v.gguf", dir);
    write_gguf(gg, &(gg_opts){.model = "gpt2", .pre = "qwen2", .bos = 0});
    const char *paths[] = {"tests/data/stories260K/tok512.bin", p, gdir, gg};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(paths); i++) {
        oom_ctx c = {.path = paths[i]};
        int fails = test_oom_loop(paths[i], oom_load, oom_unload, &c, 2000);
        CHECK(fails > 5, "%s: loading made only %d allocations", paths[i], fails);
    }
    /* encoding through NFC (the tiny Qwen2-style vocabulary) */
    oom_ctx c = {.path = gdir};
    snug_error err = {0};
    CHECK_OK(snug_tokenizer_load(gdir, &c.t, &err), &err);
    c.enc_tok = c.t;
    c.text = "ab cafe\xcc\x81 a\xcc\x81\xcc\x96 \xe1\x84\x92\xe1\x85\xa1 ab";
    if (c.t) CHECK(c.t->nfc, "the tiny vocabulary normalizes to NFC");
    if (c.t) test_oom_loop("encoding with NFC", oom_encode, NULL, &c, 2000);
    snug_tokenizer_free(c.t);
    test_rmtree(dir);
}

/* tiktoken: a Llama 3-sized file makes a few hundred allocations, so the
 * failing one is sampled (every one of the first 40, then every 37th). */
static void test_out_of_memory_tiktoken(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    write_tiktoken(p, 128000, 0, NULL);
    size_t len = 0;
    char *data = slurp(p, &len);
    size_t base = 0, now = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &base, NULL, false);
    int tries = 0;
    for (int64_t k = 1; data && tries < 1000; k += k < 40 ? 1 : 37, tries++) {
        snug_error err = {0};
        snug_tokenizer *t = NULL;
        snug_mem_fail_at(k);
        snug_status st = tok_parse_tiktoken(p, (const uint8_t *)data, len, &t, &err);
        snug_mem_fail_at(0);
        snug_tokenizer_free(t);
        snug_mem_status(SNUG_MEM_TOTAL, &now, NULL, false);
        CHECK(now == base, "failing allocation %lld: %zu bytes held, %zu before", (long long)k, now, base);
        if (st == SNUG_OK) break;
        CHECK(st == SNUG_NOMEM && err.msg[0], "failing allocation %lld: %s: %s", (long long)k,
              snug_status_str(st), err.msg);
    }
    CHECK(tries > 40 && tries < 1000, "%d tries", tries);
    free(data);
    test_rmtree(dir);
}

/* ---- malformed files ------------------------------------------------------------------------------ */

/* Loads path, which must fail with status want and a message containing
 * text and naming the file (or the one beside it that is wrong). */
static void expect_bad(const char *path, snug_status want, const char *text)
{
    snug_error err = {0};
    snug_tokenizer *t = NULL;
    char dir[512];
    tok_dir_of(path, dir, sizeof dir);
    CHECK_FAILS(snug_tokenizer_load(path, &t, &err), &err, want, text);
    CHECK(strstr(err.msg, dir) != NULL, "message \"%s\" names the file", err.msg);
    snug_tokenizer_free(t);
}

static void test_malformed_spm(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    spm_opts o;
    write_spm(p, &SPM_OK, 7);
    expect_bad(p, SNUG_FORMAT, "truncated or malformed protobuf");
    o = SPM_OK, o.model_type = 1;
    write_spm(p, &o, 0);
    expect_bad(p, SNUG_UNSUPPORTED, "model type UNIGRAM is not supported");
    o = SPM_OK, o.remove_extra_ws = 1;
    write_spm(p, &o, 0);
    expect_bad(p, SNUG_UNSUPPORTED, "remove_extra_whitespaces");
    o = SPM_OK, o.charsmap = true;
    write_spm(p, &o, 0);
    expect_bad(p, SNUG_UNSUPPORTED, "normalizer 'identity' has normalization rules");
    o = SPM_OK, o.bad_type = 9;
    write_spm(p, &o, 0);
    expect_bad(p, SNUG_FORMAT, "piece 265 'zz' has type 9");
    o = SPM_OK, o.byte_piece = "<0xZZ>";
    write_spm(p, &o, 0);
    expect_bad(p, SNUG_FORMAT, "piece 3: byte token 3 is '<0xZZ>'");
    o = SPM_OK, o.byte_piece = "<0x-1>";
    write_spm(p, &o, 0);
    expect_bad(p, SNUG_FORMAT, "'<0x-1>'");
    o = SPM_OK, o.duplicate = true;
    write_spm(p, &o, 0);
    expect_bad(p, SNUG_FORMAT, "tokens 263 and 265 have the same text 'ab'");
    o = SPM_OK, o.bos_id = 999;
    write_spm(p, &o, 0);
    expect_bad(p, SNUG_FORMAT, "trainer_spec bos_id 999 is not -1 or a piece");
    o = SPM_OK, o.score_nan = true;
    write_spm(p, &o, 0);
    expect_bad(p, SNUG_FORMAT, "piece 261 'b' has a score that is not finite");
    test_write_file(p, "\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12);
    expect_bad(p, SNUG_FORMAT, "truncated or malformed protobuf at byte");
    test_write_file(p, "\x0a\x80", 2);
    expect_bad(p, SNUG_FORMAT, "truncated or malformed protobuf at byte");
    test_rmtree(dir);
}

static void test_malformed_tiktoken(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    test_write_file(p, "IQ== 0\nIg== 1\n!!!! 2\n", 21);
    expect_bad(p, SNUG_FORMAT, "line 3: '!!!!' is not base64");
    test_write_file(p, "IQ== 0\nIg=A 1\n", 14);
    expect_bad(p, SNUG_FORMAT, "line 2: 'Ig=A' is not base64");
    test_write_file(p, "IQ== 0\nIg==\n", 12);
    expect_bad(p, SNUG_FORMAT, "line 2: 'Ig==' is not \"base64 rank\"");
    test_write_file(p, "IQ== 0\nIg== 1\n", 14);
    expect_bad(p, SNUG_UNSUPPORTED, "a tiktoken file of 2 tokens; snug knows Llama 3's");
    write_tiktoken(p, 128000, 2, "AQ== 0");
    expect_bad(p, SNUG_FORMAT, "line 2: ");
    expect_bad(p, SNUG_FORMAT, "token id 0 is given twice");
    write_tiktoken(p, 128000, 5, "BA== 128000");
    expect_bad(p, SNUG_FORMAT, "line 5: rank 128000 is outside 0 to 127999");
    write_tiktoken(p, 128000, 66, "eP// 65");
    expect_bad(p, SNUG_FORMAT, "byte 0x41 has no token of its own");
    write_tiktoken(p, 128000, 300, "AAA= 299");
    expect_bad(p, SNUG_FORMAT, "have the same text");
    test_rmtree(dir);
}

static void test_malformed_llama2c(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/tokenizer.bin", dir);
    write_llama2c(p, 8, NULL, NULL, 0, 3);
    expect_bad(p, SNUG_FORMAT, "token 262: truncated");
    write_llama2c(p, 0, NULL, NULL, 0, 0);
    expect_bad(p, SNUG_FORMAT, "max_token_length is 0");
    write_llama2c(p, 8, NULL, "longer than eight", 0, 0);
    expect_bad(p, SNUG_FORMAT, "token 263 has length 17; expected 0 to max_token_length 8");
    write_llama2c(p, 8, "<0xZZ>", NULL, 0, 0);
    expect_bad(p, SNUG_FORMAT, "token 3 is '<0xZZ>'; byte tokens 3 to 258");
    write_llama2c(p, 8, "<0x-1>", NULL, 0, 0);
    expect_bad(p, SNUG_FORMAT, "token 3 is '<0x-1>'");
    write_llama2c(p, 8, NULL, "<0x41>", 0, 0);
    expect_bad(p, SNUG_FORMAT, "token 263 '<0x41>' looks like a byte token");
    write_llama2c(p, 8, NULL, "zz", NAN, 0);
    expect_bad(p, SNUG_FORMAT, "token 263 has a score that is not finite");
    write_llama2c(p, 8, NULL, " a", -9, 0);
    expect_bad(p, SNUG_FORMAT, "have the same text");
    test_write_file(p, "\x08\x00", 2);
    expect_bad(p, SNUG_FORMAT, "too short for a llama2.c tokenizer");
    test_rmtree(dir);
}

static void test_malformed_gpt2(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/vocab.json", dir);
    write_gpt2(dir, NULL, "a zz\n");
    expect_bad(p, SNUG_FORMAT, "merges.txt: line 5: merge 'a zz' names a right part that is not a token");
    write_gpt2(dir, NULL, "b a\n");
    expect_bad(p, SNUG_FORMAT, "line 5: merge 'b a' names a result that is not a token");
    write_gpt2(dir, NULL, "a  b\n");
    expect_bad(p, SNUG_FORMAT, "line 5: 'a  b' is not two tokens separated by a space");
    write_gpt2(dir, ", \"zz\": 16777216", NULL);
    expect_bad(p, SNUG_FORMAT, "token 'zz' has id out of range");
    write_gpt2(dir, ", \"zz\": 257", NULL);
    expect_bad(p, SNUG_FORMAT, "token id 257 is given twice");
    write_gpt2(dir, ", \"\\u4e2d\": 300", NULL);
    expect_bad(p, SNUG_FORMAT, "is not written in the byte-level alphabet");
    write_gpt2(dir, NULL, NULL);
    write_text(dir, "tokenizer_config.json", "{\"tokenizer_class\": \"BertTokenizer\"}");
    expect_bad(p, SNUG_UNSUPPORTED, "tokenizer_class 'BertTokenizer'");
    write_text(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {\"x1\": {\"content\": \"<x>\"}}}");
    expect_bad(p, SNUG_FORMAT, "added_tokens_decoder: 'x1' is not an id");
    write_text(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {\"300\": {\"content\": \"<x>\"}}}");
    write_text(dir, "added_tokens.json", "{\"<y>\": 300}");
    expect_bad(p, SNUG_FORMAT, "'<y>' has id 300, which tokenizer_config.json gives to '<x>'");
    write_text(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {\"300\": {\"content\": \"<x>\"}, "
                                            "\"0300\": {\"content\": \"<z>\"}}}");
    expect_bad(p, SNUG_FORMAT, "added token 300 is both '<");
    write_text(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {\"300\": {\"content\": \"<x>\"}}}");
    write_text(dir, "added_tokens.json", "{\"<y>\": 257}");
    expect_bad(p, SNUG_FORMAT, "token 257 is 'ab', but the added tokens say '<y>'");
    write_text(dir, "added_tokens.json", "{}");
    write_text(dir, "tokenizer_config.json", "{\"eos_token\": \"<nope>\"}");
    expect_bad(p, SNUG_FORMAT, "eos_token '<nope>' is not in the vocabulary");
    unlink(p);
    snprintf(p, sizeof p, "%s/merges.txt", dir);
    expect_bad(p, SNUG_IO, "vocab.json and merges.txt go together");
    test_rmtree(dir);
}

static void test_malformed_gguf(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/v.gguf", dir);
    write_gguf(p, &(gg_opts){.model = "bert", .bos = 1});
    expect_bad(p, SNUG_UNSUPPORTED, "tokenizer.ggml.model 'bert' is not supported");
    write_gguf(p, &(gg_opts){.model = "gpt2", .pre = "falcon", .bos = 0});
    expect_bad(p, SNUG_UNSUPPORTED, "tokenizer.ggml.pre 'falcon' is not supported");
    write_gguf(p, &(gg_opts){.model = "gpt2", .bos = 0});
    expect_bad(p, SNUG_UNSUPPORTED, "tokenizer.ggml.pre '(absent)'");
    write_gguf(p, &(gg_opts){.model = "llama", .bad_type = 9, .bos = 1});
    expect_bad(p, SNUG_FORMAT, "tokenizer.ggml.token_type: token 5 has type 9");
    write_gguf(p, &(gg_opts){.model = "llama", .short_scores = true, .bos = 1});
    expect_bad(p, SNUG_FORMAT, "key 'tokenizer.ggml.scores' has 7 elements; tokenizer.ggml.tokens has 8");
    write_gguf(p, &(gg_opts){.model = "llama", .token5 = "<0xZZ>", .bos = 1});
    expect_bad(p, SNUG_FORMAT, "byte token 5 is '<0xZZ>'");
    write_gguf(p, &(gg_opts){.model = "llama", .bos = 8});
    expect_bad(p, SNUG_FORMAT, "tokenizer.ggml.bos_token_id': 8 is not a token");
    write_gguf(p, &(gg_opts){.model = "gpt2", .pre = "gpt-2", .bad_merge = "a q", .bos = 0});
    expect_bad(p, SNUG_FORMAT, "tokenizer.ggml.merges entry 3: ");
    expect_bad(p, SNUG_FORMAT, "names a right part that is not a token");
    write_gguf(p, &(gg_opts){.model = "gpt2", .pre = "gpt-2", .bad_merge = "ab", .bos = 0});
    expect_bad(p, SNUG_FORMAT, "entry 3 'ab' is not two tokens separated by a space");
    test_rmtree(dir);
}

static void test_load_paths(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    expect_bad(dir, SNUG_IO, "no tokenizer found");
    snprintf(p, sizeof p, "%s/nope", dir);
    expect_bad(p, SNUG_IO, "no such tokenizer file or model directory");
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    test_write_file(p, "hello\n", 6);
    expect_bad(p, SNUG_UNSUPPORTED, "not a tokenizer file snug knows");
    /* a directory holding only tokenizer.bin is found */
    snprintf(p, sizeof p, "%s/tokenizer.bin", dir);
    write_llama2c(p, 8, NULL, NULL, 0, 0);
    snug_tokenizer *t = load(dir);
    CHECK(t && t->n_vocab == 263 && t->bos == 1, "a directory with tokenizer.bin loads");
    snug_tokenizer_free(t);
    /* tokenizer.model wins over tokenizer.bin, and its configs are read */
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    write_spm(p, &SPM_OK, 0);
    write_text(dir, "tokenizer_config.json", "{\"add_bos_token\": false, \"chat_template\": \"{{x}}\"}");
    write_text(dir, "generation_config.json", "{\"eos_token_id\": [2, 1, 2]}");
    t = load(dir);
    int32_t eos[8] = {0};
    if (t)
        CHECK(t->n_vocab == 265 && !t->add_bos && snug_tokenizer_chat_template(t) &&
              snug_tokenizer_eos_ids(t, eos, 8) == 2 && eos[0] == 2 && eos[1] == 1,
              "tokenizer.model first, with its configs (eos ids once each)");
    snug_tokenizer_free(t);
    test_rmtree(dir);
}

int main(void)
{
    RUN(test_llamacpp_spm_native);
    RUN(test_llamacpp_gpt2_native);
    RUN(test_multilingual_native);
    RUN(test_long_texts_native);
    RUN(test_written_json_llama3);
    RUN(test_written_json_qwen2);
    RUN(test_written_json_others);
    RUN(test_llama3_expectations);
    RUN(test_qwen2_expectations);
    RUN(test_tok512_once_upon_a_time);
    RUN(test_round_trips_native);
    RUN(test_nfc_vectors);
    RUN(test_nfc_cases);
    RUN(test_nfc_every_code_point);
    RUN(test_nfc_out_of_memory);
    RUN(test_small_native_files);
    RUN(test_out_of_memory_native);
    RUN(test_out_of_memory_tiktoken);
    RUN(test_malformed_spm);
    RUN(test_malformed_tiktoken);
    RUN(test_malformed_llama2c);
    RUN(test_malformed_gpt2);
    RUN(test_malformed_gguf);
    RUN(test_load_paths);
    return test_summary();
}
