/*
 * tok_decode.c: ids to text, one id at a time, holding back the bytes of a
 * UTF-8 character until it is complete; and the tokenizer's accessors.
 */
#include "tok_internal.h"

#include "base/mem.h"

#include <string.h>

int32_t snug_tokenizer_n_vocab(const snug_tokenizer *tok) { return tok->n_vocab; }
int32_t snug_tokenizer_bos(const snug_tokenizer *tok) { return tok->bos; }
const char *snug_tokenizer_chat_template(const snug_tokenizer *tok) { return tok->chat_template; }
const char *snug_tokenizer_bos_text(const snug_tokenizer *tok) { return tok->bos_text ? tok->bos_text : ""; }
const char *snug_tokenizer_eos_text(const snug_tokenizer *tok) { return tok->eos_text ? tok->eos_text : ""; }
size_t snug_tokenizer_max_token_bytes(const snug_tokenizer *tok) { return tok->max_token_bytes; }

int32_t snug_tokenizer_eos_ids(const snug_tokenizer *tok, int32_t *ids, int32_t max)
{
    for (int32_t i = 0; i < tok->n_eos_ids && i < max; i++) ids[i] = tok->eos_ids[i];
    return tok->n_eos_ids;
}

void snug_tok_stream_init(snug_tok_stream *s, const snug_tokenizer *tok, bool skip_special)
{
    memset(s, 0, sizeof *s);
    s->tok = tok;
    s->skip_special = skip_special;
}

/* The bytes token id stands for (sentencepiece: U+2581 read as a space),
 * into out; returns their count. */
static size_t token_bytes(const snug_tokenizer *t, int32_t id, char *out)
{
    const tok_entry *e = &t->entries[id];
    if (e->attr == TOK_BYTE) {
        out[0] = (char)e->byte;
        return 1;
    }
    size_t n;
    const char *s = tok_text(t, id, &n);
    if (t->kind == TOK_BYTE_LEVEL) {
        memcpy(out, s, n);
        return n;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
            out[o++] = ' ';
            i += 3;
        } else {
            out[o++] = s[i++];
        }
    }
    return o;
}

/* How many of the n bytes at p end on a character boundary, the rest being
 * the start of a character that more bytes could complete. */
static size_t complete_prefix(const unsigned char *p, size_t n)
{
    size_t back = n < 3 ? n : 3;
    for (size_t k = 1; k <= back; k++) {
        unsigned char c = p[n - k];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        size_t want = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return want > k ? n - k : n; /* incomplete: hold back its k bytes */
    }
    return n;
}

snug_status snug_tok_stream_push(snug_tok_stream *s, int32_t id, char *out, size_t cap, size_t *n,
                                 snug_error *err)
{
    const snug_tokenizer *t = s->tok;
    *n = 0;
    if (id < 0 || id >= t->n_vocab || t->entries[id].attr == TOK_UNUSED)
        return snug_errorf(err, SNUG_INVALID, "%s: token id %d is not in the vocabulary",
                           t->source, id);
    tok_attr attr = (tok_attr)t->entries[id].attr;
    if (s->skip_special && (attr == TOK_SPECIAL || attr == TOK_UNKNOWN)) return SNUG_OK;
    if (cap < (size_t)s->n_pending + t->max_token_bytes)
        return snug_errorf(err, SNUG_INVALID, "decode buffer of %zu bytes is too small", cap);
    memcpy(out, s->pending, (size_t)s->n_pending);
    size_t len = (size_t)s->n_pending + token_bytes(t, id, out + s->n_pending);
    size_t skip = 0;
    if (!s->started && len > 0) {
        s->started = true;
        if (t->strip_leading_space && out[0] == ' ') skip = 1;
    }
    size_t keep = complete_prefix((const unsigned char *)out + skip, len - skip) + skip;
    s->n_pending = (int)(len - keep);
    memcpy(s->pending, out + keep, (size_t)s->n_pending);
    if (skip) memmove(out, out + 1, keep - 1);
    *n = keep - skip;
    return SNUG_OK;
}

size_t snug_tokenizer_token_bytes(const snug_tokenizer *tok, int32_t id, char *out, size_t cap)
{
    if (id < 0 || id >= tok->n_vocab) return 0;
    tok_attr attr = (tok_attr)tok->entries[id].attr;
    if (attr == TOK_UNUSED || attr == TOK_SPECIAL || attr == TOK_UNKNOWN) return 0;
    SNUG_ASSERT(cap >= tok->max_token_bytes);
    return token_bytes(tok, id, out);
}

size_t snug_tok_stream_finish(snug_tok_stream *s, char *out, size_t cap)
{
    size_t n = SNUG_MIN((size_t)s->n_pending, cap);
    memcpy(out, s->pending, n);
    s->n_pending = 0;
    return n;
}

snug_status snug_tok_decode(const snug_tokenizer *tok, const int32_t *ids, size_t n_ids,
                            bool skip_special, char **out, size_t *len, snug_error *err)
{
    size_t chunk = tok->max_token_bytes + 8, cap = n_ids * (tok->max_token_bytes + 1) + 8;
    char *buf = snug_mem_alloc(SNUG_MEM_OTHER, cap + chunk, err);
    if (!buf) return SNUG_NOMEM;
    snug_tok_stream s;
    snug_tok_stream_init(&s, tok, skip_special);
    size_t o = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t got;
        snug_status st = snug_tok_stream_push(&s, ids[i], buf + o, cap + chunk - o, &got, err);
        if (st != SNUG_OK) {
            snug_mem_free(buf);
            return st;
        }
        o += got;
    }
    o += snug_tok_stream_finish(&s, buf + o, cap + chunk - o);
    buf[o] = '\0';
    *out = buf;
    *len = o;
    return SNUG_OK;
}
