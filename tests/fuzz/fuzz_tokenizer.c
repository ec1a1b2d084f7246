/*
 * fuzz_tokenizer.c: fuzzes the tokenizer: (a) reading tokenizer.json text
 * (and the native SentencePiece, llama2.c and GGUF vocabulary files), and
 * (b) encoding arbitrary bytes (invalid UTF-8 included) and decoding the
 * ids again, whole and streamed, with small real tokenizers.
 *
 * The first byte of an input picks what it is:
 *   'j'  the rest is a tokenizer.json, written to a file in a private
 *        temporary directory and loaded; one that loads must encode and
 *        decode a few texts (and the input itself) without failing;
 *   'P', 'L', 'F'  the same for a SentencePiece tokenizer.model, a llama2.c
 *        tokenizer.bin (both parsed from memory) and a GGUF file (a memfd);
 *   's', 'g', 'q'  the second byte's bits 0 and 1 are add_special and
 *        parse_special, the rest is text encoded with stories260K's
 *        tok512.bin (SentencePiece-style, byte fallback), GPT-2's
 *        encoder.json + vocab.bpe (byte-level) or Qwen2's vocab.json +
 *        merges.txt (byte-level with NFC), loaded once from tests/data (run
 *        from the repository root). Any other first byte is one of these
 *        seven by its value modulo 7.
 * Whatever encodes must decode (whole and streamed, the same bytes), and
 * without special tokens give back the text (NFC of it for Qwen2; not for
 * SentencePiece text holding U+2581, which decodes as a space). The driver
 * in fuzz_common.h checks failures, parses again without a message buffer
 * and with one allocation failing, and checks that nothing leaks.
 *
 * The seeds in tests/fuzz/tokenizer/ (written by make-tokenizer-seeds.py)
 * are small tokenizer.json files of every kind snug reads (byte-level with
 * Split, ByteLevel, Digits and NFC; SentencePiece-style with Prepend/Replace
 * or Metaspace and byte fallback; added tokens; merges as strings and as
 * pairs), a few that break one rule each (near-*), and texts for each
 * tokenizer (valid and invalid UTF-8, special-token text, decomposed
 * characters).
 */
#include "fuzz_common.h"
#include "base/mem.h"
#include "formats/gguf.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { MODE_JSON, MODE_SPM, MODE_GPT2, MODE_QWEN2, MODE_SPM_FILE, MODE_LLAMA2C_FILE, MODE_GGUF_FILE,
       N_MODES };

/* The real tokenizers, loaded once before the first input (so that the
 * driver's leak check sees them in its baseline), and the temporary
 * tokenizer.json of JSON inputs. */
static struct {
    bool ready;
    snug_tokenizer *tok[4]; /* [MODE_SPM], [MODE_GPT2], [MODE_QWEN2] */
    char dir[256], path[300];
} g;

/* What a parse made: the encoder holding the ids, or a loaded tokenizer. */
static struct {
    int mode;
    snug_tok_encode_opts opts;
    snug_tok_encoder *enc;
    const int32_t *ids;
    size_t n_ids;
    snug_tokenizer *loaded;
} g_out;

static void cleanup(void)
{
    unlink(g.path);
    rmdir(g.dir);
}

static void init(void)
{
    static const char *const paths[4] = {NULL, "tests/data/stories260K/tok512.bin",
                                         "tests/data/tokenizers/gpt2-openai/encoder.json",
                                         "tests/data/tokenizers/qwen2-native"};
    for (int m = MODE_SPM; m <= MODE_QWEN2; m++) {
        snug_error err = {0};
        if (snug_tokenizer_load(paths[m], &g.tok[m], &err) != SNUG_OK) {
            fprintf(stderr, "fuzz_tokenizer: %s (run from the repository root)\n", err.msg);
            abort();
        }
    }
    const char *base = getenv("TMPDIR");
    snprintf(g.dir, sizeof g.dir, "%s/snug-fuzz-XXXXXX", base && *base ? base : "/tmp");
    REQUIRE(mkdtemp(g.dir) != NULL);
    snprintf(g.path, sizeof g.path, "%s/tokenizer.json", g.dir);
    atexit(cleanup);
    g.ready = true;
}

static int mode_of(const fuzz_input *in)
{
    if (in->size == 0) return MODE_JSON;
    switch (in->data[0]) {
    case 'j': return MODE_JSON;
    case 's': return MODE_SPM;
    case 'g': return MODE_GPT2;
    case 'q': return MODE_QWEN2;
    case 'P': return MODE_SPM_FILE;
    case 'L': return MODE_LLAMA2C_FILE;
    case 'F': return MODE_GGUF_FILE;
    default: return in->data[0] % N_MODES;
    }
}

/* Decodes ids whole and one at a time; both must succeed and agree. The
 * whole decoding is returned (snug_mem_free). */
static char *decode_both(const snug_tokenizer *t, const int32_t *ids, size_t n, bool skip,
                         size_t *len)
{
    snug_error err = {0};
    char *whole = NULL;
    REQUIRE(snug_tok_decode(t, ids, n, skip, &whole, len, &err) == SNUG_OK);
    size_t cap = snug_tokenizer_max_token_bytes(t) + 64, o = 0;
    char *chunk = malloc(cap);
    REQUIRE(chunk != NULL);
    snug_tok_stream s;
    snug_tok_stream_init(&s, t, skip);
    for (size_t i = 0; i < n; i++) {
        size_t got = 0;
        REQUIRE(snug_tok_stream_push(&s, ids[i], chunk, cap, &got, &err) == SNUG_OK);
        REQUIRE(o + got <= *len && memcmp(whole + o, chunk, got) == 0);
        o += got;
    }
    size_t rest = snug_tok_stream_finish(&s, chunk, cap);
    REQUIRE(o + rest == *len && memcmp(whole + o, chunk, rest) == 0);
    free(chunk);
    return whole;
}

/* Encodes text with t, decodes it both ways; false when encoding failed
 * (cleanly: a regex that gave up, say). */
static bool round_trip(const snug_tokenizer *t, const char *text, size_t n, bool parse_special)
{
    snug_tok_encoder *enc = NULL;
    snug_error err = {0};
    snug_tok_encode_opts o = {.add_special = true, .parse_special = parse_special};
    const int32_t *ids = NULL;
    size_t n_ids = 0, len = 0;
    REQUIRE(snug_tok_encoder_create(t, &enc, &err) == SNUG_OK);
    snug_status st = snug_tok_encode(enc, text, n, &o, &ids, &n_ids, &err);
    if (st == SNUG_OK) {
        for (size_t i = 0; i < n_ids; i++) REQUIRE(ids[i] >= 0 && ids[i] < snug_tokenizer_n_vocab(t));
        snug_mem_free(decode_both(t, ids, n_ids, false, &len));
        snug_mem_free(decode_both(t, ids, n_ids, true, &len));
    } else {
        REQUIRE(err.status == st && err.msg[0] && st != SNUG_NOMEM);
    }
    snug_tok_encoder_free(enc);
    return st == SNUG_OK;
}

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    memset(&g_out, 0, sizeof g_out);
    *parsed = &g_out;
    g_out.mode = mode_of(in);
    const uint8_t *rest = in->size ? in->data + 1 : in->data;
    size_t n = in->size ? in->size - 1 : 0;
    if (g_out.mode == MODE_JSON) {
        FILE *f = fopen(g.path, "wb");
        REQUIRE(f && fwrite(rest, 1, n, f) == n && fclose(f) == 0);
        return snug_tokenizer_load(g.path, &g_out.loaded, err);
    }
    if (g_out.mode == MODE_SPM_FILE) return tok_parse_spm(in->name, rest, n, &g_out.loaded, err);
    if (g_out.mode == MODE_LLAMA2C_FILE) return tok_parse_llama2c(in->name, rest, n, &g_out.loaded, err);
    if (g_out.mode == MODE_GGUF_FILE) {
        int fd = memfd_create("fuzz", MFD_CLOEXEC);
        REQUIRE(fd >= 0 && (n == 0 || write(fd, rest, n) == (ssize_t)n));
        snug_gguf_file *f = NULL;
        snug_status st = snug_gguf_open_fd(fd, in->name, &f, err);
        if (st == SNUG_OK) st = tok_from_gguf(f, &g_out.loaded, err);
        snug_gguf_close(f);
        close(fd);
        return st;
    }
    uint8_t flags = n ? rest[0] : 0;
    const char *text = n ? (const char *)rest + 1 : "";
    size_t len = n ? n - 1 : 0;
    g_out.opts = (snug_tok_encode_opts){.add_special = flags & 1, .parse_special = (flags >> 1) & 1};
    snug_status st = snug_tok_encoder_create(g.tok[g_out.mode], &g_out.enc, err);
    if (st == SNUG_OK) st = snug_tok_encode(g_out.enc, text, len, &g_out.opts, &g_out.ids, &g_out.n_ids, err);
    if (st != SNUG_OK) {
        snug_tok_encoder_free(g_out.enc);
        g_out.enc = NULL;
        /* messages name the tokenizer's file, not the input: make them name both */
        if (err) snug_error_prefix(err, st, "%s: ", in->name);
    }
    return st;
}

static void check(const fuzz_input *in, void *parsed)
{
    (void)parsed;
    const uint8_t *rest = in->size ? in->data + 1 : in->data;
    size_t n = in->size ? in->size - 1 : 0;
    if (g_out.loaded) {
        snug_tokenizer *t = g_out.loaded;
        static const char *const texts[] = {"Hello world", " leading  spaces\n\n", "1234567 caf\xc3\xa9",
                                            "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\xa6\x99 \xff\xfe"};
        for (size_t i = 0; i < SNUG_ARRAY_LEN(texts); i++)
            for (int special = 0; special < 2; special++) round_trip(t, texts[i], strlen(texts[i]), special);
        round_trip(t, (const char *)rest, SNUG_MIN(n, (size_t)256), true);
        snug_tokenizer_free(t);
        return;
    }
    const snug_tokenizer *t = g.tok[g_out.mode];
    const char *text = n ? (const char *)rest + 1 : "";
    size_t len = n ? n - 1 : 0, out_len = 0;
    for (size_t i = 0; i < g_out.n_ids; i++) REQUIRE(g_out.ids[i] >= 0 && g_out.ids[i] < t->n_vocab);
    char *out = decode_both(t, g_out.ids, g_out.n_ids, false, &out_len);
    bool exact = !g_out.opts.add_special && !g_out.opts.parse_special;
    if (t->kind == TOK_SENTENCEPIECE && memmem(text, len, "\xE2\x96\x81", 3)) exact = false;
    if (exact) {
        const char *want = text;
        size_t want_len = len;
        snug_nfc_buf b = {0};
        if (t->nfc) REQUIRE(snug_utf8_nfc(text, len, &b, &want, &want_len, NULL) == SNUG_OK);
        if (out_len != want_len || memcmp(out, want, want_len) != 0) {
            fprintf(stderr, "decode(encode(text)) is not the text (%zu bytes, %zu decoded)\n",
                    want_len, out_len);
            abort();
        }
        snug_nfc_buf_free(&b);
    }
    snug_mem_free(out);
    snug_tok_encoder_free(g_out.enc);
}

static fuzz_target g_target = {NULL, false, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g.ready) init();
    g_target.name = g.path;
    fuzz_drive(&g_target, data, size);
    return 0;
}
