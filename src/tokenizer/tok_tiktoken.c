/*
 * tok_tiktoken.c: Llama 3's tokenizer.model in tiktoken's format: one
 * "base64-of-the-token's-bytes rank" per line, the rank being the id.
 *
 * Tokens are raw bytes (byte-level); a piece merges by rank, lowest first
 * (score = -rank), and a piece that is a token is that token (tiktoken
 * looks a piece up before merging). Text is pre-split by Llama 3's regex.
 * The file has 128000 ranks; the 256 special tokens Llama 3 defines follow
 * them (meta-llama/llama-models, models/llama3/tokenizer.py): 128000
 * <|begin_of_text|> (bos), 128001 <|end_of_text|> (eos), ...,
 * 128008 <|eom_id|>, 128009 <|eot_id|> (both also end a sequence), then
 * <|reserved_special_token_2|> and on up to id 128255. A tiktoken file of
 * another size belongs to another family, whose special tokens and regex
 * snug does not know: it is refused.
 */
#include "tok_internal.h"


#include <stdio.h>
#include <string.h>

enum {
    LLAMA3_N_BASE = 128000,
    LLAMA3_N_SPECIAL = 256,
    LLAMA3_BOS = 128000, LLAMA3_EOS = 128001, LLAMA3_EOM = 128008, LLAMA3_EOT = 128009,
    TIKTOKEN_MAX_LINE = 4096  /* base64 characters of one token */
};

/* The named special tokens, from id 128000; reserved ones follow. */
static const char *const LLAMA3_SPECIAL[] = {
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
    "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
    "<|image|>"};

static int b64_value(uint8_t c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes strict base64 (length a multiple of 4, '=' only as padding);
 * false when malformed. */
static bool b64_decode(const uint8_t *s, size_t n, uint8_t *out, size_t *out_len)
{
    if (n == 0 || n % 4 != 0) return false;
    size_t pad = s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0, o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            bool padding = i + k >= n - pad;
            int d = padding ? 0 : b64_value(s[i + k]);
            if (d < 0) return false;
            v = v << 6 | (uint32_t)d;
        }
        out[o++] = (uint8_t)(v >> 16);
        if (i + 4 < n || pad < 2) out[o++] = (uint8_t)(v >> 8);
        if (i + 4 < n || pad < 1) out[o++] = (uint8_t)v;
    }
    /* the bits padding drops must be zero (a canonical encoding) */
    if (pad == 2 && (b64_value(s[n - 3]) & 0xF)) return false;
    if (pad == 1 && (b64_value(s[n - 2]) & 0x3)) return false;
    *out_len = o;
    return true;
}

/* Splits a line into its base64 (*b64_len bytes at its start) and the
 * decimal rank after one space; false when it is not that. */
static bool split_line(const uint8_t *line, size_t n, size_t *b64_len, int64_t *rank)
{
    size_t sp = 0;
    while (sp < n && line[sp] != ' ') sp++;
    if (sp == 0 || sp + 1 >= n || n - sp - 1 > 9) return false;
    int64_t r = 0;
    for (size_t i = sp + 1; i < n; i++) {
        if (line[i] < '0' || line[i] > '9') return false;
        r = r * 10 + (line[i] - '0');
    }
    *b64_len = sp;
    *rank = r;
    return true;
}

bool tok_looks_like_tiktoken(const uint8_t *data, size_t len)
{
    size_t n = 0;
    while (n < len && n < TIKTOKEN_MAX_LINE && data[n] != '\n') n++;
    if (n < len && data[n] != '\n') return false;
    if (n > 0 && data[n - 1] == '\r') n--;
    size_t b64_len;
    int64_t rank;
    if (!split_line(data, n, &b64_len, &rank)) return false;
    for (size_t i = 0; i < b64_len; i++)
        if (b64_value(data[i]) < 0 && data[i] != '=') return false;
    return true;
}

/* Calls each line (without its end, CR LF or LF) with its number (1-based);
 * empty lines are skipped, as tiktoken does. */
typedef snug_status (*line_fn)(void *ctx, const uint8_t *line, size_t n, size_t number,
                               snug_error *err);

static snug_status each_line(const uint8_t *data, size_t len, line_fn fn, void *ctx,
                             snug_error *err)
{
    size_t number = 0;
    for (size_t pos = 0; pos < len;) {
        const uint8_t *nl = memchr(data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - data) : len, n = end - pos;
        number++;
        if (n > 0 && data[pos + n - 1] == '\r') n--;
        if (n > 0) {
            snug_status st = fn(ctx, data + pos, n, number, err);
            if (st != SNUG_OK) return st;
        }
        pos = end + 1;
    }
    return SNUG_OK;
}

typedef struct scan {
    const char *name;
    snug_tokenizer *t;   /* NULL while counting */
    int64_t n;
    uint8_t *buf;        /* decoded bytes of one token */
} scan;

static snug_status on_line(void *ctx, const uint8_t *line, size_t n, size_t number, snug_error *err)
{
    scan *s = ctx;
    size_t b64_len, k;
    int64_t rank;
    char shown[48];
    if (!split_line(line, n, &b64_len, &rank))
        return tok_bad(err, s->name, "line %zu: '%s' is not \"base64 rank\"", number,
                       snug_bytes_shown(line, n, shown, sizeof shown));
    if (b64_len > TIKTOKEN_MAX_LINE)
        return tok_bad(err, s->name, "line %zu: a token of more than %d base64 characters", number,
                       TIKTOKEN_MAX_LINE);
    if (!b64_decode(line, b64_len, s->buf, &k))
        return tok_bad(err, s->name, "line %zu: '%s' is not base64", number,
                       snug_bytes_shown(line, b64_len, shown, sizeof shown));
    if (!s->t) {
        if (++s->n > (1 << 24) - LLAMA3_N_SPECIAL)
            return tok_bad(err, s->name, "more than %d tokens", (1 << 24) - LLAMA3_N_SPECIAL);
        return SNUG_OK;
    }
    if (rank >= s->n)
        return tok_bad(err, s->name, "line %zu: rank %lld is outside 0 to %lld (the file has %lld "
                       "tokens)", number, (long long)rank, (long long)s->n - 1, (long long)s->n);
    snug_status st = tok_set(s->t, (int32_t)rank, (const char *)s->buf, k, -(float)rank, TOK_NORMAL, err);
    if (st != SNUG_OK) return snug_error_context(err, st, s->name, "line %zu: ", number);
    return SNUG_OK;
}

/* Adds Llama 3's special tokens from id 128000. */
static snug_status add_specials(snug_tokenizer *t, snug_error *err)
{
    for (int32_t i = 0; i < LLAMA3_N_SPECIAL; i++) {
        char text[64];
        int32_t n_named = (int32_t)SNUG_ARRAY_LEN(LLAMA3_SPECIAL);
        if (i < n_named)
            snprintf(text, sizeof text, "%s", LLAMA3_SPECIAL[i]);
        else
            snprintf(text, sizeof text, "<|reserved_special_token_%d|>", i - n_named + 2);
        snug_status st = tok_set(t, LLAMA3_N_BASE + i, text, strlen(text), 0, TOK_SPECIAL, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

static snug_status build(const char *name, const uint8_t *data, size_t len, snug_tokenizer **out,
                         snug_error *err)
{
    uint8_t buf[TIKTOKEN_MAX_LINE];
    scan s = {.name = name, .buf = buf};
    snug_status st = each_line(data, len, on_line, &s, err); /* checks the lines, counts them */
    if (st != SNUG_OK) return st;
    if (s.n != LLAMA3_N_BASE)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: a tiktoken file of %lld tokens; snug knows "
                           "Llama 3's (%d tokens: its special tokens and pre-split regex)", name,
                           (long long)s.n, LLAMA3_N_BASE);
    st = tok_create(name, TOK_BYTE_LEVEL, LLAMA3_N_BASE + LLAMA3_N_SPECIAL, &s.t, err);
    if (st != SNUG_OK) return st;
    st = each_line(data, len, on_line, &s, err);
    if (st == SNUG_OK) st = add_specials(s.t, err);
    if (st == SNUG_OK) st = tok_index(s.t, err);
    for (int b = 0; b < 256 && st == SNUG_OK; b++)
        if (s.t->byte_ids[b] < 0) st = tok_bad(err, name, "byte 0x%02X has no token of its own", b);
    for (int32_t id = LLAMA3_N_BASE; id < s.t->n_vocab && st == SNUG_OK; id++)
        st = tok_add_added(s.t, id, true, false, false, err);
    if (st == SNUG_OK) st = tok_add_split(s.t, TOK_REGEX_LLAMA3, TOK_SPLIT_ISOLATED, err);
    if (st != SNUG_OK) {
        snug_tokenizer_free(s.t);
        return st;
    }
    snug_tokenizer *t = s.t;
    t->merge_mode = TOK_MERGE_SCORES;
    t->ignore_merges = true;
    t->bos = LLAMA3_BOS;
    t->eos = LLAMA3_EOS;
    t->add_bos = true;
    t->eos_ids[0] = LLAMA3_EOS;
    t->eos_ids[1] = LLAMA3_EOM;
    t->eos_ids[2] = LLAMA3_EOT;
    t->n_eos_ids = 3;
    *out = t;
    return SNUG_OK;
}

snug_status tok_parse_tiktoken(const char *name, const uint8_t *data, size_t len,
                               snug_tokenizer **out, snug_error *err)
{
    return tok_native_parse(build, name, data, len, out, err);
}

snug_status tok_read_tiktoken(const char *path, snug_tokenizer **out, snug_error *err)
{
    return tok_native_read(build, path, out, err);
}
