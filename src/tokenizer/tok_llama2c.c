/*
 * tok_llama2c.c: llama2.c tokenizer.bin files: an int32 max_token_length,
 * then for every token a float32 score, an int32 length and its bytes
 * (little-endian; the count is what the file holds).
 *
 * The pieces are SentencePiece's with U+2581 written as a plain space (it
 * is turned back), BOS and EOS are written "\n<s>\n" and "\n</s>\n" (named
 * <s> and </s> here) and token 0 is the unknown token. When token 3 is
 * shaped like a byte token ("<0x..>"), tokens 3 to 258 are the byte
 * fallback and must be exactly <0x00> to <0xFF>; a token shaped like one
 * anywhere else is an error. Pieces merge by score; a space is put in front
 * of the text, as llama2.c's encoder does.
 */
#include "tok_internal.h"

#include "base/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { LLAMA2C_MAX_TOKEN_BYTES = 65536, LLAMA2C_BYTE_FIRST = 3 };

static const char SPACE_MARK[] = "\xE2\x96\x81"; /* U+2581 */

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Counts the tokens, checking that each fits in the file and in
 * max_token_length. */
static snug_status count_tokens(const char *name, const uint8_t *data, size_t len, int32_t *n_out,
                                snug_error *err)
{
    if (len < 4) return tok_bad(err, name, "%zu bytes: too short for a llama2.c tokenizer", len);
    int32_t max_len = (int32_t)rd32(data);
    if (max_len < 1 || max_len > LLAMA2C_MAX_TOKEN_BYTES)
        return tok_bad(err, name, "max_token_length is %d; expected 1 to %d", max_len,
                       LLAMA2C_MAX_TOKEN_BYTES);
    size_t pos = 4;
    int64_t n = 0;
    while (pos < len) {
        if (len - pos < 8)
            return tok_bad(err, name, "token %lld: truncated at byte %zu (score and length need 8)",
                           (long long)n, pos);
        int32_t k = (int32_t)rd32(data + pos + 4);
        if (k < 0 || k > max_len)
            return tok_bad(err, name, "token %lld has length %d; expected 0 to max_token_length %d",
                           (long long)n, k, max_len);
        if ((size_t)k > len - pos - 8)
            return tok_bad(err, name, "token %lld: truncated (%d bytes of text, %zu left)",
                           (long long)n, k, len - pos - 8);
        pos += 8 + (size_t)k;
        if (++n > (1 << 24)) return tok_bad(err, name, "more than %d tokens", 1 << 24);
    }
    if (n == 0) return tok_bad(err, name, "no tokens");
    *n_out = (int32_t)n;
    return SNUG_OK;
}

/* The piece of a token: spaces as U+2581; the BOS/EOS spellings named. */
static size_t piece_text(const uint8_t *s, size_t k, char *out)
{
    if (k == 5 && memcmp(s, "\n<s>\n", 5) == 0) {
        memcpy(out, "<s>", 3);
        return 3;
    }
    if (k == 6 && memcmp(s, "\n</s>\n", 6) == 0) {
        memcpy(out, "</s>", 4);
        return 4;
    }
    size_t o = 0;
    for (size_t i = 0; i < k; i++) {
        if (s[i] == ' ') {
            memcpy(out + o, SPACE_MARK, 3);
            o += 3;
        } else {
            out[o++] = (char)s[i];
        }
    }
    return o;
}

/* Text shaped like a byte token: "<0x" ... ">". */
static bool looks_like_byte(const uint8_t *s, size_t k)
{
    return k >= 4 && memcmp(s, "<0x", 3) == 0 && s[k - 1] == '>';
}

static snug_status build(const char *name, const uint8_t *data, size_t len, snug_tokenizer **out,
                         snug_error *err)
{
    int32_t n = 0;
    snug_tokenizer *t = NULL;
    char *buf = NULL;
    snug_status st = count_tokens(name, data, len, &n, err);
    if (st == SNUG_OK) st = tok_create(name, TOK_SENTENCEPIECE, n, &t, err);
    if (st != SNUG_OK) goto done;
    buf = snug_mem_alloc(SNUG_MEM_OTHER, 3 * LLAMA2C_MAX_TOKEN_BYTES, err);
    if (!buf) {
        st = SNUG_NOMEM;
        goto done;
    }
    size_t pos = 4;
    bool byte_layout = false; /* token 3 is shaped like a byte token */
    for (int32_t id = 0; id < n && st == SNUG_OK; id++) {
        const uint8_t *s = data + pos + 8;
        size_t k = rd32(data + pos + 4);
        bool in_bytes = id >= LLAMA2C_BYTE_FIRST && id < LLAMA2C_BYTE_FIRST + 256;
        float score;
        uint32_t bits = rd32(data + pos);
        memcpy(&score, &bits, sizeof score);
        pos += 8 + k;
        if (!isfinite(score)) {
            st = tok_bad(err, name, "token %d has a score that is not finite", id);
            break;
        }
        tok_attr attr = id == 0 ? TOK_UNKNOWN : id <= 2 ? TOK_SPECIAL : TOK_NORMAL;
        if (id == LLAMA2C_BYTE_FIRST) byte_layout = looks_like_byte(s, k) && n >= LLAMA2C_BYTE_FIRST + 256;
        char shown[32];
        if (looks_like_byte(s, k) && !(in_bytes && byte_layout)) {
            st = tok_bad(err, name, "token %d '%s' looks like a byte token, but byte tokens are "
                         "3 to 258, from <0x00>", id, snug_bytes_shown(s, k, shown, sizeof shown));
            break;
        }
        if (in_bytes && byte_layout) {
            char want[8];
            snprintf(want, sizeof want, "<0x%02X>", (unsigned)(id - LLAMA2C_BYTE_FIRST));
            if (k != 6 || memcmp(s, want, 6) != 0) {
                st = tok_bad(err, name, "token %d is '%s'; byte tokens 3 to 258 must be <0x00> "
                             "to <0xFF> in order (expected %s)", id, snug_bytes_shown(s, k, shown, sizeof shown),
                             want);
                break;
            }
            attr = TOK_BYTE;
        }
        if (k == 0 && attr == TOK_NORMAL) {
            st = tok_bad(err, name, "token %d has empty text", id);
            break;
        }
        size_t m = piece_text(s, k, buf);
        st = tok_set(t, id, buf, m, score, attr, err);
    }
    if (st != SNUG_OK) goto done;
    t->merge_mode = TOK_MERGE_SCORES;
    t->spm_escape_spaces = true;
    t->spm_prepend = TOK_PREPEND_EVERY;
    t->strip_leading_space = true;
    t->unk = 0;
    t->bos = n > 1 ? 1 : -1;
    t->eos = n > 2 ? 2 : -1;
    t->add_bos = t->bos >= 0;
    st = tok_index(t, err);
    for (int32_t id = 0; id < 3 && id < n && st == SNUG_OK; id++)
        if (t->entries[id].len > 0) st = tok_add_added(t, id, true, false, false, err);
done:
    snug_mem_free(buf);
    if (st != SNUG_OK) {
        snug_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SNUG_OK;
}

snug_status tok_parse_llama2c(const char *name, const uint8_t *data, size_t len,
                              snug_tokenizer **out, snug_error *err)
{
    return tok_native_parse(build, name, data, len, out, err);
}

snug_status tok_read_llama2c(const char *path, snug_tokenizer **out, snug_error *err)
{
    return tok_native_read(build, path, out, err);
}
