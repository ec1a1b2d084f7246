/*
 * test_tokenizer.c: tokenizer.json tokenizers against reference ids:
 * llama.cpp's vectors (Llama 2 SentencePiece and GPT-2 vocabularies) and
 * the Hugging Face conformance vectors (83 multilingual inputs for TinyLlama
 * and GPT-2, and two long texts); detokenize(tokenize(s)) == s, and a
 * stream of the same ids one at a time gives the same bytes.
 */
#include "test.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "base/json.h"
#include "tokenizer/regex.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"
#include "formats/gguf_writer.h"

#include <sys/stat.h>

/* Splits a llama.cpp .inp file into its test strings (libc memory). */
static int read_inputs(const char *path, char ***out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static char data[1 << 20];
    size_t n = fread(data, 1, sizeof data - 1, f);
    fclose(f);
    data[n] = '\0';
    const char sep[] = "\n__ggml_vocab_test__\n";
    int count = 0;
    char **list = malloc(256 * sizeof *list);
    char *p = data;
    for (;;) {
        char *q = strstr(p, sep);
        if (!q) break;
        *q = '\0';
        list[count++] = p;
        p = q + strlen(sep);
    }
    *out = list;
    return count;
}

/* Reads the expected id lines of a .out file. */
static int read_outputs(const char *path, char ***out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static char data[1 << 20];
    size_t n = fread(data, 1, sizeof data - 1, f);
    fclose(f);
    data[n] = '\0';
    int count = 0;
    char **list = malloc(256 * sizeof *list);
    for (char *p = data, *q; *p; p = q + 1) {
        q = strchr(p, '\n');
        if (!q) break;
        *q = '\0';
        list[count++] = p;
    }
    *out = list;
    return count;
}

/* Encodes s and formats the ids as " 1 2 3" (llama.cpp's .out style). */
static void ids_line(snug_tok_encoder *enc, const char *s, size_t len, bool add_special, char *line,
                     size_t cap, const int32_t **ids_out, size_t *n_out)
{
    snug_tok_encode_opts o = {.add_special = add_special};
    const int32_t *ids = NULL;
    size_t n = 0;
    snug_error err = {0};
    line[0] = '\0';
    if (snug_tok_encode(enc, s, len, &o, &ids, &n, &err) != SNUG_OK) {
        snprintf(line, cap, "error: %s", err.msg);
        return;
    }
    size_t o2 = 0;
    for (size_t i = 0; i < n && o2 < cap; i++) o2 += (size_t)snprintf(line + o2, cap - o2, " %d", ids[i]);
    if (ids_out) *ids_out = ids, *n_out = n;
}

/* Checks decode(ids) == text, and that streaming gives the same bytes. */
static bool round_trips(const snug_tokenizer *tok, const int32_t *ids, size_t n, const char *text,
                        size_t len, bool skip_special)
{
    snug_error err = {0};
    char *out = NULL;
    size_t out_len = 0;
    if (snug_tok_decode(tok, ids, n, skip_special, &out, &out_len, &err) != SNUG_OK) return false;
    bool ok = out_len == len && memcmp(out, text, len) == 0;
    snug_tok_stream s;
    snug_tok_stream_init(&s, tok, skip_special);
    char *buf = malloc(len + 4096), chunk[4096];
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t got = 0;
        if (snug_tok_stream_push(&s, ids[i], chunk, sizeof chunk, &got, &err) != SNUG_OK) ok = false;
        if (o + got > len + 4096) break;
        memcpy(buf + o, chunk, got);
        o += got;
    }
    o += snug_tok_stream_finish(&s, buf + o, 8);
    ok = ok && o == out_len && memcmp(buf, out, o) == 0;
    free(buf);
    snug_mem_free(out);
    return ok;
}

static void run_llamacpp_vectors(const char *tokenizer, const char *base)
{
    char inp[256], outp[256];
    snprintf(inp, sizeof inp, "tests/data/tokenizer/%s.inp", base);
    snprintf(outp, sizeof outp, "tests/data/tokenizer/%s.out", base);
    char **ins = NULL, **outs = NULL;
    int n_in = read_inputs(inp, &ins), n_out = read_outputs(outp, &outs);
    CHECK(n_in > 0 && n_in == n_out, "%s: %d inputs, %d outputs", base, n_in, n_out);
    snug_error err = {0};
    snug_tokenizer *tok = NULL;
    snug_tok_encoder *enc = NULL;
    CHECK_OK(snug_tokenizer_load(tokenizer, &tok, &err), &err);
    if (tok) CHECK_OK(snug_tok_encoder_create(tok, &enc, &err), &err);
    int bad = 0, bad_trip = 0;
    for (int i = 0; enc && i < n_in && i < n_out; i++) {
        char line[8192];
        const int32_t *ids = NULL;
        size_t n = 0;
        ids_line(enc, ins[i], strlen(ins[i]), false, line, sizeof line, &ids, &n);
        if (strcmp(line, outs[i]) != 0) {
            if (bad < 4) printf("  %s #%d \"%.40s\": got%s\n    want%s\n", base, i, ins[i], line, outs[i]);
            bad++;
        } else if (!round_trips(tok, ids, n, ins[i], strlen(ins[i]), false)) {
            if (bad_trip < 4) printf("  %s #%d \"%.40s\" does not decode back\n", base, i, ins[i]);
            bad_trip++;
        }
    }
    CHECK(bad == 0, "%s: %d of %d strings give other ids than llama.cpp's", base, bad, n_in);
    CHECK(bad_trip == 0, "%s: %d strings do not round-trip", base, bad_trip);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    free(ins);
    free(outs);
}

static void test_llamacpp_spm(void)
{
    run_llamacpp_vectors("tests/data/tokenizers/llama2/tokenizer.json", "ggml-vocab-llama-spm.gguf");
}

static void test_llamacpp_gpt2(void)
{
    run_llamacpp_vectors("tests/data/tokenizers/gpt2/tokenizer.json", "ggml-vocab-gpt-2.gguf");
}

/* The 83 multilingual inputs against one tokenizer's reference ids. */
static void run_multilingual(const char *tokenizer, const char *refs, bool add_special)
{
    snug_error err = {0};
    json_t *ref = NULL;
    /* multilingual_inputs.json is a list; snug_json_parse wants an object */
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(snug_file_read_all("tests/data/tokenizer/hf/multilingual_inputs.json", 1 << 24, &text, &len, &err), &err);
    json_error_t jerr;
    snug_json_init();
    json_t *list = json_loadb(text, len, 0, &jerr);
    snug_mem_free(text);
    CHECK_OK(snug_json_load_file(refs, 1 << 24, &ref, &err), &err);
    snug_tokenizer *tok = NULL;
    snug_tok_encoder *enc = NULL;
    CHECK_OK(snug_tokenizer_load(tokenizer, &tok, &err), &err);
    if (tok) CHECK_OK(snug_tok_encoder_create(tok, &enc, &err), &err);
    const json_t *results = json_object_get(ref, "entries");
    int bad = 0, bad_trip = 0, checked = 0;
    for (size_t i = 0; enc && list && i < json_array_size(list); i++) {
        const json_t *item = json_array_get(list, i);
        const char *id = json_string_value(json_object_get(item, "id"));
        const char *s = json_string_value(json_object_get(item, "text"));
        const json_t *want = NULL;
        if (json_is_object(results)) want = json_object_get(json_object_get(results, id), "input_ids");
        for (size_t k = 0; !want && json_is_array(results) && k < json_array_size(results); k++) {
            const json_t *r = json_array_get(results, k);
            const char *rid = json_string_value(json_object_get(r, "id"));
            if (rid && strcmp(rid, id) == 0) want = json_object_get(r, "input_ids");
        }
        if (!want) continue;
        checked++;
        snug_tok_encode_opts o = {.add_special = add_special};
        const int32_t *ids;
        size_t n;
        bool same = snug_tok_encode(enc, s, strlen(s), &o, &ids, &n, &err) == SNUG_OK &&
                    n == json_array_size(want);
        for (size_t k = 0; same && k < n; k++) same = ids[k] == json_integer_value(json_array_get(want, k));
        if (!same) {
            if (bad < 3) {
                printf("  %s %s: got", tokenizer, id);
                for (size_t k = 0; k < n && k < 30; k++) printf(" %d", ids[k]);
                printf("\n    want");
                for (size_t k = 0; k < json_array_size(want) && k < 30; k++)
                    printf(" %lld", (long long)json_integer_value(json_array_get(want, k)));
                printf("\n");
            }
            bad++;
        } else if (!round_trips(tok, ids, n, s, strlen(s), true)) {
            if (bad_trip < 3) printf("  %s %s does not decode back\n", tokenizer, id);
            bad_trip++;
        }
    }
    CHECK(checked == 83, "%s: %d vectors checked", refs, checked);
    CHECK(bad == 0, "%s: %d of %d multilingual inputs differ", tokenizer, bad, checked);
    CHECK(bad_trip == 0, "%s: %d inputs do not round-trip", tokenizer, bad_trip);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    json_decref(list);
    json_decref(ref);
}

static void test_multilingual_tinyllama(void)
{
    run_multilingual("tests/data/tokenizers/llama2/tokenizer.json",
                     "tests/data/tokenizer/hf/tinyllama_multilingual.json", true);
}

static void test_multilingual_gpt2(void)
{
    run_multilingual("tests/data/tokenizers/gpt2/tokenizer.json",
                     "tests/data/tokenizer/hf/gpt2_multilingual.json", false);
}

/* One long text with its reference ids (and, when given, decoded text). */
static void run_long_text(const char *tokenizer, const char *ref_path, bool add_special)
{
    snug_error err = {0};
    json_t *ref = NULL;
    snug_tokenizer *tok = NULL;
    snug_tok_encoder *enc = NULL;
    CHECK_OK(snug_json_load_file(ref_path, 1 << 24, &ref, &err), &err);
    CHECK_OK(snug_tokenizer_load(tokenizer, &tok, &err), &err);
    if (tok) CHECK_OK(snug_tok_encoder_create(tok, &enc, &err), &err);
    if (!ref || !enc) goto done;
    const char *s = json_string_value(json_object_get(ref, "text"));
    const json_t *want = json_object_get(ref, "token_ids");
    snug_tok_encode_opts o = {.add_special = add_special};
    const int32_t *ids;
    size_t n;
    CHECK_OK(snug_tok_encode(enc, s, strlen(s), &o, &ids, &n, &err), &err);
    size_t diff = 0;
    while (diff < n && diff < json_array_size(want) && ids[diff] == json_integer_value(json_array_get(want, diff))) diff++;
    CHECK(n == json_array_size(want) && diff == n, "%s: %zu ids, want %zu; first difference at %zu",
          ref_path, n, json_array_size(want), diff);
    const char *decoded = json_string_value(json_object_get(ref, "decoded_text"));
    char *out = NULL;
    size_t len = 0;
    CHECK_OK(snug_tok_decode(tok, ids, n, false, &out, &len, &err), &err);
    if (decoded) CHECK(out && strcmp(out, decoded) == 0, "%s: decodes as the reference does", ref_path);
    snug_mem_free(out);
done:
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    json_decref(ref);
}

static void test_long_texts(void)
{
    run_long_text("tests/data/tokenizers/llama2/tokenizer.json", "tests/data/tokenizer/hf/llama_encoded.json", true);
    run_long_text("tests/data/tokenizers/gpt2/tokenizer.json", "tests/data/tokenizer/hf/gpt2_encoded_tokens.json", false);
}

/* Encodes every test string with both tokenizers; returns how many differ. */
static int count_differences(const snug_tokenizer *a, const snug_tokenizer *b, bool parse_special)
{
    char **ins = NULL;
    int n_in = read_inputs("tests/data/tokenizer/ggml-vocab-llama-spm.gguf.inp", &ins);
    const char *extra[] = {"<s>[INST] special <|im_start|>text</s> <unk>", "  leading and trailing  ",
                           "numbers 1234567 and 3.14159", "\xf0\x9f\xa6\x99 emoji \xe2\x80\x94 dash",
                           "\xff\xfe invalid utf-8 \xc3"};
    snug_tok_encoder *ea = NULL, *eb = NULL;
    snug_error err = {0};
    int bad = 0;
    if (snug_tok_encoder_create(a, &ea, &err) != SNUG_OK || snug_tok_encoder_create(b, &eb, &err) != SNUG_OK)
        bad = -1;
    for (int i = 0; bad >= 0 && i < n_in + (int)SNUG_ARRAY_LEN(extra); i++) {
        const char *s = i < n_in ? ins[i] : extra[i - n_in];
        snug_tok_encode_opts o = {.add_special = true, .parse_special = parse_special};
        const int32_t *x, *y;
        size_t nx, ny;
        snug_status sa = snug_tok_encode(ea, s, strlen(s), &o, &x, &nx, &err);
        snug_status sb = snug_tok_encode(eb, s, strlen(s), &o, &y, &ny, &err);
        if (sa != sb || (sa == SNUG_OK && (nx != ny || memcmp(x, y, nx * sizeof *x) != 0))) {
            if (bad < 3) printf("  \"%.40s\" encodes differently\n", s);
            bad++;
        }
    }
    snug_tok_encoder_free(ea);
    snug_tok_encoder_free(eb);
    free(ins);
    return bad;
}

/* Gemma's tokenizer.json is Llama 2's kind (a sentencepiece BPE with byte
 * fallback, no pre-tokenizer) but for two stages: its normalizer only
 * replaces spaces by U+2581, prepending none, and its decoder strips no
 * leading space. Llama 2's file with those two stages changed, as Gemma's
 * are: a text encodes as Llama 2's encodes it without the space it
 * prepends (" " + s as s), and the ids decode to the text itself, its
 * leading space kept. */
static void test_gemma_style_spm(void)
{
    char dir[256], path[300];
    test_tmpdir(dir, sizeof dir);
    snug_error err = {0};
    json_error_t jerr;
    json_t *root = json_load_file("tests/data/tokenizers/llama2/tokenizer.json", 0, &jerr);
    CHECK(root != NULL, "llama2 tokenizer.json: %s", jerr.text);
    if (!root) return;
    json_t *norms = json_object_get(json_object_get(root, "normalizer"), "normalizers");
    CHECK(json_array_size(norms) == 2 && strcmp(json_string_value(json_object_get(json_array_get(norms, 0), "type")),
                                                "Prepend") == 0, "llama2's normalizers: Prepend, Replace");
    json_object_set(root, "normalizer", json_array_get(norms, 1)); /* Replace alone */
    json_object_set_new(root, "decoder", json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}]}", "type",
                                                   "Sequence", "decoders", "type", "Replace", "pattern", "String",
                                                   "\xe2\x96\x81", "content", " ", "type", "ByteFallback",
                                                   "type", "Fuse"));
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(json_dump_file(root, path, 0) == 0, "write %s", path);
    json_decref(root);
    snug_tokenizer *llama = NULL, *gemma = NULL;
    snug_tok_encoder *el = NULL, *eg = NULL;
    CHECK_OK(snug_tokenizer_load("tests/data/tokenizers/llama2/tokenizer.json", &llama, &err), &err);
    CHECK_OK(snug_tokenizer_load(path, &gemma, &err), &err);
    if (llama && gemma) {
        CHECK_OK(snug_tok_encoder_create(llama, &el, &err), &err);
        CHECK_OK(snug_tok_encoder_create(gemma, &eg, &err), &err);
    }
    static const char *const texts[] = {"Hello world", "  two leading spaces", "tabs\tand\nnewlines",
                                        "\xc3\xa9t\xc3\xa9 \xe2\x80\x94 \xf0\x9f\xa6\x99", "x"};
    for (size_t i = 0; el && eg && i < SNUG_ARRAY_LEN(texts); i++) {
        char spaced[128];
        snprintf(spaced, sizeof spaced, " %s", texts[i]);
        snug_tok_encode_opts o = {.add_special = true};
        const int32_t *x, *y;
        size_t nx = 0, ny = 0;
        CHECK_OK(snug_tok_encode(el, texts[i], strlen(texts[i]), &o, &x, &nx, &err), &err);
        int32_t want[128];
        memcpy(want, x, SNUG_MIN(nx, (size_t)128) * sizeof *x);
        CHECK_OK(snug_tok_encode(eg, spaced, strlen(spaced), &o, &y, &ny, &err), &err);
        CHECK(nx == ny && nx <= 128 && memcmp(want, y, nx * sizeof *y) == 0,
              "\"%s\": Gemma's normalizer on \" \" + text gives Llama 2's ids of the text (%zu, %zu ids)", texts[i],
              nx, ny);
        CHECK_OK(snug_tok_encode(eg, texts[i], strlen(texts[i]), &o, &y, &ny, &err), &err);
        char *text = NULL;
        size_t len = 0;
        CHECK_OK(snug_tok_decode(gemma, y, ny, true, &text, &len, &err), &err);
        CHECK(text && strcmp(text, texts[i]) == 0 && (texts[i][0] == ' ' || y[1] != want[1]),
              "\"%s\": no space prepended, and it decodes back as it was: \"%s\"", texts[i], text ? text : "");
        snug_mem_free(text);
    }
    snug_tok_encoder_free(el);
    snug_tok_encoder_free(eg);
    snug_tokenizer_free(llama);
    snug_tokenizer_free(gemma);
    test_rmtree(dir);
}

static void test_written_json_reads_back(void)
{
    const char *dirs[] = {"llama2", "gpt2", "mistral-v0.3", "smollm2-135m", "phi-3-mini"};
    char tmp[256];
    test_tmpdir(tmp, sizeof tmp);
    for (size_t i = 0; i < SNUG_ARRAY_LEN(dirs); i++) {
        char src[256];
        snprintf(src, sizeof src, "tests/data/tokenizers/%s/tokenizer.json", dirs[i]);
        snug_error err = {0};
        snug_tokenizer *a = NULL, *b = NULL;
        CHECK_OK(snug_tokenizer_load(src, &a, &err), &err);
        if (a) CHECK_OK(tok_write_json(a, tmp, &err), &err);
        if (a) CHECK_OK(snug_tokenizer_load(tmp, &b, &err), &err);
        if (a && b) {
            CHECK(count_differences(a, b, false) == 0 && count_differences(a, b, true) == 0,
                  "%s: the written tokenizer.json encodes as the original", dirs[i]);
            CHECK(a->bos == b->bos && a->eos == b->eos && a->add_bos == b->add_bos &&
                  a->n_added == b->n_added, "%s: specials kept", dirs[i]);
        }
        snug_tokenizer_free(a);
        snug_tokenizer_free(b);
    }
    test_rmtree(tmp);
}

/* Every tokenizer GGUF can hold, written as a GGUF file's tokenizer.ggml.*
 * keys (snug_tokenizer_put_gguf) and read back by the GGUF reader, encodes
 * the inputs as the original does, with the same specials and template
 * (sentencepiece vocabularies merged by a list too, the list turned into
 * scores); those it cannot (added tokens that strip whitespace, Mistral
 * v0.3's prefix space only at the start) are refused before a key is put,
 * saying why. */
static void test_written_gguf_reads_back(void)
{
    static const struct {
        const char *path;
        const char *refused; /* NULL: GGUF holds it; else what the refusal says */
    } cases[] = {{"tests/data/tokenizers/gpt2/tokenizer.json", NULL},
                 {"tests/data/tokenizers/smollm2-135m/tokenizer.json", NULL},
                 {"tests/data/tokenizers/llama3-tiktoken", NULL},
                 {"tests/data/tokenizers/qwen2-native", NULL},
                 {"tests/data/tokenizers/llama2-native/tokenizer.model", NULL},
                 {"tests/data/tokenizers/llama2c/tokenizer.bin", NULL},
                 {"tests/data/tokenizers/gguf-vocab/ggml-vocab-gpt-2.gguf", NULL},
                 {"tests/data/tokenizers/gguf-vocab/ggml-vocab-llama-spm.gguf", NULL},
                 {"tests/data/tokenizers/llama2/tokenizer.json", NULL},
                 {"tests/data/tokenizers/tinyllama-1.1b-chat", NULL},
                 {"models/stories260K", NULL},
                 {"tests/data/tokenizers/phi-3-mini/tokenizer.json", "lstrip/rstrip"},
                 {"tests/data/tokenizers/mistral-v0.3/tokenizer.json", "sentencepiece options"}};
    char tmp[256], path[300];
    test_tmpdir(tmp, sizeof tmp);
    snprintf(path, sizeof path, "%s/vocab.gguf", tmp);
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cases); i++) {
        snug_error err = {0};
        snug_tokenizer *a = NULL, *b = NULL;
        CHECK_OK(snug_tokenizer_load(cases[i].path, &a, &err), &err);
        if (!a) continue;
        snug_gguf_header h = {0};
        snug_gguf_put_start(&h, 0, 0);
        size_t start = h.len;
        snug_status st = snug_tokenizer_put_gguf(a, &h, true, true, &err);
        if (cases[i].refused) {
            CHECK(st == SNUG_UNSUPPORTED && h.len == start && strstr(err.msg, cases[i].refused),
                  "%s: refused before a key, saying why: %s", cases[i].path, err.msg);
            snug_tokenizer_free(a);
            continue;
        }
        CHECK_OK(st, &err);
        uint64_t n_kv = h.n_kv;
        h = (snug_gguf_header){.cap = h.len, .p = malloc(h.len)};
        snug_gguf_put_start(&h, 0, n_kv);
        CHECK_OK(snug_tokenizer_put_gguf(a, &h, true, true, &err), &err);
        CHECK(h.len == h.cap && h.n_kv == n_kv, "%s: the same header measured and written", cases[i].path);
        test_write_file(path, h.p, h.len);
        free(h.p);
        CHECK_OK(snug_tokenizer_load(path, &b, &err), &err);
        if (b) {
            CHECK(count_differences(a, b, false) == 0 && count_differences(a, b, true) == 0,
                  "%s: the written GGUF vocabulary encodes as the original", cases[i].path);
            CHECK(a->n_vocab == b->n_vocab && a->bos == b->bos && a->eos == b->eos && a->add_bos == b->add_bos &&
                      a->add_eos == b->add_eos && a->n_added == b->n_added && a->kind == b->kind,
                  "%s: size, specials and kind kept", cases[i].path);
            CHECK((!a->chat_template && !b->chat_template) ||
                      (a->chat_template && b->chat_template && strcmp(a->chat_template, b->chat_template) == 0),
                  "%s: the chat template kept", cases[i].path);
        }
        snug_tokenizer_free(a);
        snug_tokenizer_free(b);
    }
    test_rmtree(tmp);
}

/* Writes text as dir/tokenizer.json and tries to load it. */
static snug_status load_text(const char *dir, const char *text, snug_error *err)
{
    char p[512];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    test_write_file(p, text, strlen(text));
    snug_tokenizer *t = NULL;
    snug_status st = snug_tokenizer_load(p, &t, err);
    snug_tokenizer_free(t);
    return st;
}

#define SPM_HEAD "{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, " \
                 "\"content\": \"\xe2\x96\x81\"}, \"model\": {\"type\": \"BPE\", \"byte_fallback\": true, "
#define BL_HEAD "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "

static void test_bad_tokenizer_json(void)
{
    char dir[256];
    test_tmpdir(dir, sizeof dir);
    snug_error err = {0};
    CHECK_FAILS(load_text(dir, SPM_HEAD "\"vocab\": {\"a\": 0, \"b\": -3}, \"merges\": []}}", &err), &err,
                SNUG_FORMAT, "vocab: token 'b' has id -3; expected 0 to 16777215");
    CHECK(strstr(err.msg, "tokenizer.json") != NULL, "names the file: %s", err.msg);
    CHECK_FAILS(load_text(dir, SPM_HEAD "\"vocab\": {\"a\": 0, \"b\": 0}, \"merges\": []}}", &err), &err,
                SNUG_FORMAT, "token id 0 is given twice");
    CHECK_FAILS(load_text(dir, SPM_HEAD "\"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a c\"]}}", &err),
                &err, SNUG_FORMAT, "merge 0 ('a' 'c') names a right part that is not a token");
    CHECK_FAILS(load_text(dir, SPM_HEAD "\"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}", &err),
                &err, SNUG_FORMAT, "merge 0 ('a' 'b') makes 'ab', which is not a token");
    CHECK_FAILS(load_text(dir, SPM_HEAD "\"vocab\": {\"<0xZZ>\": 0}, \"merges\": []}}", &err), &err,
                SNUG_FORMAT, "vocab: byte token 0 is '<0xZZ>'; expected <0x00> to <0xFF>");
    CHECK_FAILS(load_text(dir, SPM_HEAD "\"vocab\": {\"<0x-1>\": 0}, \"merges\": []}}", &err), &err,
                SNUG_FORMAT, "byte token 0 is '<0x-1>'");
    CHECK_FAILS(load_text(dir, SPM_HEAD "\"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b c\"]}}", &err),
                &err, SNUG_FORMAT, "merge 0 'a b c' is not two tokens separated by a space");
    CHECK_FAILS(load_text(dir, "{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(unclosed\"}, "
                               "\"behavior\": \"Isolated\"}, \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": "
                               "{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}", &err),
                &err, SNUG_FORMAT, "pre-tokenizer regex: regex rejected at offset 9");
    CHECK_FAILS(load_text(dir, "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", &err), &err,
                SNUG_UNSUPPORTED, "model type 'WordPiece' is not supported (BPE is)");
    CHECK_FAILS(load_text(dir, BL_HEAD "\"vocab\": {\"\xc3\x28\": 0}, \"merges\": []}}", &err), &err,
                SNUG_FORMAT, "not valid JSON");
    CHECK_FAILS(load_text(dir, BL_HEAD "\"vocab\": {\"\xe2\x82\xac\": 0}, \"merges\": []}}", &err), &err,
                SNUG_FORMAT, "token 0 '\xe2\x82\xac' is not written in the byte-level alphabet");
    CHECK_FAILS(load_text(dir, BL_HEAD "\"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": "
                               "[{\"id\": 5, \"content\": \"\"}]}", &err), &err,
                SNUG_FORMAT, "added_tokens entry 0: no content");
    CHECK_FAILS(load_text(dir, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}", &err), &err,
                SNUG_UNSUPPORTED, "neither a byte-level nor a sentencepiece-style BPE tokenizer");
    test_rmtree(dir);
}

/* Whether msg has a raw control byte or a byte of invalid UTF-8. */
static bool raw_bytes(const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        if (*p < 0x20 || *p == 0x7F) return true;
    return !snug_utf8_valid(msg, strlen(msg));
}

/* Token texts with a terminal escape and bytes that are not UTF-8 (a JSON
 * file can carry only the escape, as \u001b; merges.txt carries any byte):
 * each message names them escaped, never raw. */
static void test_messages_escape_file_bytes(void)
{
    char dir[256], p[512];
    test_tmpdir(dir, sizeof dir);
    snug_error err = {0};
    CHECK_FAILS(load_text(dir, BL_HEAD "\"vocab\": {\"\\u001b[31m\xe2\x82\xac\": 0}, \"merges\": []}}", &err),
                &err, SNUG_FORMAT, "token 0 '\\x1b[31m\xe2\x82\xac' is not written in the byte-level alphabet");
    CHECK(!raw_bytes(err.msg), "no raw bytes in: %s", err.msg);
    CHECK_FAILS(load_text(dir, "{\"model\": {\"type\": \"\\u001b]0;pwned\\u0007\", \"vocab\": {}}}", &err),
                &err, SNUG_UNSUPPORTED, "model type '\\x1b]0;pwned\\x07' is not supported");
    CHECK(!raw_bytes(err.msg), "no raw bytes in: %s", err.msg);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    remove(p);
    snprintf(p, sizeof p, "%s/vocab.json", dir);
    static const char vocab[] = "{\"a\": 0, \"b\": 1, \"ab\": 2}";
    test_write_file(p, vocab, sizeof vocab - 1);
    snprintf(p, sizeof p, "%s/merges.txt", dir);
    static const char merges[] = "#version: 0.2\na b\n\x1b[31m\xff b\n";
    test_write_file(p, merges, sizeof merges - 1);
    snug_tokenizer *t = NULL;
    CHECK_FAILS(snug_tokenizer_load(p, &t, &err), &err, SNUG_FORMAT,
                "line 3: '\\x1b[31m\\xff b' is not written in the byte-level alphabet");
    CHECK(!raw_bytes(err.msg), "no raw bytes in: %s", err.msg);
    snug_tokenizer_free(t);
    test_rmtree(dir);
}

static snug_status load_oom(void *ctx, snug_error *err)
{
    snug_tokenizer *t = NULL;
    snug_tok_encoder *e = NULL;
    snug_status st = snug_tokenizer_load(ctx, &t, err);
    if (st == SNUG_OK) st = snug_tok_encoder_create(t, &e, err);
    if (st == SNUG_OK) {
        snug_tok_encode_opts o = {.add_special = true, .parse_special = true};
        const int32_t *ids;
        size_t n;
        const char text[] = "<|im_start|>user Hello, world! 12345<|im_end|>";
        st = snug_tok_encode(e, text, sizeof text - 1, &o, &ids, &n, err);
    }
    snug_tok_encoder_free(e);
    snug_tokenizer_free(t);
    return st;
}

static void test_out_of_memory_loop(void)
{
    CHECK(test_oom_loop("smollm2 load and encode", load_oom, NULL,
                        (void *)"tests/data/tokenizers/smollm2-135m/tokenizer.json", 2000) > 10,
          "loading and encoding allocate");
}

/* Each token's bytes, one after another, are the text's bytes: what the
 * decoder gives, with the leading space a SentencePiece tokenizer strips;
 * special tokens stand for nothing. */
static void test_token_bytes(void)
{
    const char *dirs[] = {"llama2", "gpt2", "mistral-v0.3", "smollm2-135m", "phi-3-mini", "llama3-tiktoken"};
    const char *text = "Lily said: \"héllo, 世界 😀\" {\"a\": [1, 2.5]}\n\tend";
    for (size_t i = 0; i < SNUG_ARRAY_LEN(dirs); i++) {
        char src[256];
        snprintf(src, sizeof src, "tests/data/tokenizers/%s", dirs[i]);
        snug_error err = {0};
        snug_tokenizer *t = NULL;
        snug_tok_encoder *enc = NULL;
        CHECK_OK(snug_tokenizer_load(src, &t, &err), &err);
        if (!t) continue;
        CHECK_OK(snug_tok_encoder_create(t, &enc, &err), &err);
        const int32_t *ids = NULL;
        size_t n = 0;
        snug_tok_encode_opts eo = {.add_special = true, .parse_special = false};
        if (enc) CHECK_OK(snug_tok_encode(enc, text, strlen(text), &eo, &ids, &n, &err), &err);
        size_t cap = snug_tokenizer_max_token_bytes(t) + 8, len = 0;
        char *joined = malloc(n * cap + 1), *decoded = NULL, piece[512];
        for (size_t k = 0; k < n && cap <= sizeof piece; k++) {
            size_t m = snug_tokenizer_token_bytes(t, ids[k], piece, sizeof piece);
            memcpy(joined + len, piece, m);
            len += m;
        }
        size_t dlen = 0;
        if (n) CHECK_OK(snug_tok_decode(t, ids, n, true, &decoded, &dlen, &err), &err);
        const char *j = joined;
        if (len > 0 && j[0] == ' ' && text[0] != ' ') j++, len--; /* the space SentencePiece strips */
        CHECK(decoded && len == dlen && memcmp(j, decoded, len) == 0 && dlen == strlen(text),
              "%s: the tokens' bytes joined: \"%.*s\", decoded \"%s\"", dirs[i], (int)len, j, decoded);
        if (snug_tokenizer_bos(t) >= 0)
            CHECK(snug_tokenizer_token_bytes(t, snug_tokenizer_bos(t), piece, sizeof piece) == 0, "%s: BOS is no text",
                  dirs[i]);
        CHECK(snug_tokenizer_token_bytes(t, -1, piece, sizeof piece) == 0 &&
                  snug_tokenizer_token_bytes(t, snug_tokenizer_n_vocab(t), piece, sizeof piece) == 0,
              "%s: ids outside the vocabulary", dirs[i]);
        snug_mem_free(decoded);
        free(joined);
        snug_tok_encoder_free(enc);
        snug_tokenizer_free(t);
    }
}

/* Splits text by each of the n patterns in turn, as Hugging Face's Split
 * with "Isolated" does (each match a piece, and each stretch between
 * matches one), and writes the pieces joined by '|' into out. */
static bool split_isolated(const char *const *patterns, int n, const char *text, char *out, size_t size)
{
    char pieces[2][512];
    snprintf(pieces[0], sizeof pieces[0], "%s", text);
    int cur = 0;
    for (int k = 0; k < n; k++) {
        snug_regex *re = NULL;
        snug_regex_matcher *m = NULL;
        if (snug_regex_compile(patterns[k], &re, NULL) != SNUG_OK ||
            snug_regex_matcher_create(re, &m, NULL) != SNUG_OK) {
            snug_regex_free(re);
            return false;
        }
        char *src = pieces[cur], *dst = pieces[!cur];
        size_t o = 0;
        dst[0] = '\0';
        for (char *piece = src, *next; piece; piece = next) { /* each piece of the stage before */
            next = strchr(piece, '|');
            size_t len = next ? (size_t)(next - piece) : strlen(piece), at = 0, b, e;
            if (next) next++;
            while (at < len) {
                bool found = snug_regex_find(re, m, piece, len, at, &b, &e) == 1 && e > b;
                size_t stop = found ? b : len;
                if (stop > at) o += (size_t)snprintf(dst + o, 512 - o, "%s%.*s", o ? "|" : "", (int)(stop - at), piece + at);
                if (found) o += (size_t)snprintf(dst + o, 512 - o, "%s%.*s", o ? "|" : "", (int)(e - b), piece + b);
                at = found ? e : len;
            }
        }
        cur = !cur;
        snug_regex_matcher_free(m);
        snug_regex_free(re);
    }
    snprintf(out, size, "%s", pieces[cur]);
    return true;
}

/* The pre-splits of GGUF files whose tokenizer.ggml.pre is gpt-4o (o200k:
 * Phi-4-mini) or deepseek-r1-qwen (three splits in turn), on text worked
 * out by hand from the patterns. */
static void test_pre_splits(void)
{
    char got[512];
    const char *o200k[] = {TOK_REGEX_O200K};
    CHECK(split_isolated(o200k, 1, "Hello WORLD's 12345 don't\n\nokay/", got, sizeof got) &&
          strcmp(got, "Hello| WORLD's| |123|45| don't|\n\n|okay|/") == 0, "o200k: %s", got);
    CHECK(split_isolated(o200k, 1, "camelCase iPhone", got, sizeof got) && strcmp(got, "camel|Case| i|Phone") == 0,
          "o200k splits before capitals: %s", got);
    CHECK(split_isolated((const char *const *)TOK_REGEX_DEEPSEEK3, 3, "Hello 12345 \xe4\xb8\x96\xe7\x95\x8c!", got,
                         sizeof got) &&
          strcmp(got, "Hello| |123|45| |\xe4\xb8\x96\xe7\x95\x8c|!") == 0, "deepseek-v3: %s", got);
}

int main(void)
{
    RUN(test_llamacpp_spm);
    RUN(test_llamacpp_gpt2);
    RUN(test_pre_splits);
    RUN(test_multilingual_tinyllama);
    RUN(test_multilingual_gpt2);
    RUN(test_long_texts);
    RUN(test_written_json_reads_back);
    RUN(test_written_gguf_reads_back);
    RUN(test_gemma_style_spm);
    RUN(test_bad_tokenizer_json);
    RUN(test_messages_escape_file_bytes);
    RUN(test_out_of_memory_loop);
    RUN(test_token_bytes);
    return test_summary();
}
