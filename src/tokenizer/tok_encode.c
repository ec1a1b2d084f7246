/*
 * tok_encode.c: text to ids: added tokens split out first, then (per text
 * segment) sentencepiece normalization or byte-level pre-splitting, then BPE
 * over each piece with a priority queue of candidate merges.
 */
#include "tok_internal.h"

#include "base/mem.h"
#include "unicode.h"

#include <string.h>

typedef struct piece {
    size_t off, len; /* in the segment being pre-split */
} piece;

typedef struct sym {
    uint32_t start, len; /* bytes of the word */
    int32_t id;          /* -1: no token covers it (sentencepiece) */
    int32_t prev, next;  /* -1: none */
} sym;

typedef struct cand {
    double priority;     /* lower first */
    uint32_t pos;        /* the left symbol's start: ties go leftmost */
    int32_t left, right;
    uint32_t left_len, right_len; /* the symbols' lengths when queued */
    int32_t result;
} cand;

/* A word already encoded: most words of a text repeat. Direct-mapped, so
 * its memory is fixed: words up to 24 bytes that encode to at most 8 ids. */
enum { CACHE_SLOTS = 4096, CACHE_WORD = 24, CACHE_IDS = 8 };

typedef struct cache_slot {
    uint64_t hash;
    uint8_t len, n_ids;     /* len 0: empty */
    char word[CACHE_WORD];
    int32_t ids[CACHE_IDS];
} cache_slot;

struct snug_tok_encoder {
    const snug_tokenizer *tok;
    cache_slot *cache;      /* [CACHE_SLOTS] */
    snug_regex_matcher *matchers[TOK_MAX_PRETOK];
    int32_t *ids;
    size_t n_ids, cap_ids;
    char *buf;           /* a normalized or prefixed segment */
    size_t cap_buf;
    piece *pieces[2];
    size_t cap_pieces[2];
    sym *syms;
    size_t cap_syms;
    cand *heap;
    size_t cap_heap;
    snug_nfc_buf nfc;    /* a segment normalized to NFC */
};

/* Makes room for need elements of elem bytes at *p (keeping the old ones). */
static snug_status grow(void **p, size_t *cap, size_t need, size_t elem, snug_error *err)
{
    if (need <= *cap) return SNUG_OK;
    size_t c = SNUG_MAX(need, SNUG_MAX(*cap * 2, (size_t)64));
    void *n = snug_mem_alloc(SNUG_MEM_OTHER, c * elem, err);
    if (!n) return SNUG_NOMEM;
    if (*cap) memcpy(n, *p, *cap * elem);
    snug_mem_free(*p);
    *p = n;
    *cap = c;
    return SNUG_OK;
}

static snug_status push_id(snug_tok_encoder *e, int32_t id, snug_error *err)
{
    snug_status st = grow((void **)&e->ids, &e->cap_ids, e->n_ids + 1, sizeof *e->ids, err);
    if (st == SNUG_OK) e->ids[e->n_ids++] = id;
    return st;
}

snug_status snug_tok_encoder_create(const snug_tokenizer *tok, snug_tok_encoder **out,
                                    snug_error *err)
{
    snug_tok_encoder *e = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *e, err);
    if (!e) return SNUG_NOMEM;
    e->tok = tok;
    e->cache = snug_mem_alloc(SNUG_MEM_OTHER, CACHE_SLOTS * sizeof *e->cache, err);
    if (!e->cache) {
        snug_tok_encoder_free(e);
        return SNUG_NOMEM;
    }
    for (int32_t i = 0; i < tok->n_pretok; i++) {
        snug_status st = snug_regex_matcher_create(tok->pretok[i].re, &e->matchers[i], err);
        if (st != SNUG_OK) {
            snug_tok_encoder_free(e);
            return st;
        }
    }
    *out = e;
    return SNUG_OK;
}

void snug_tok_encoder_free(snug_tok_encoder *e)
{
    if (!e) return;
    for (int32_t i = 0; i < TOK_MAX_PRETOK; i++) snug_regex_matcher_free(e->matchers[i]);
    snug_mem_free(e->ids);
    snug_mem_free(e->buf);
    snug_mem_free(e->pieces[0]);
    snug_mem_free(e->pieces[1]);
    snug_mem_free(e->syms);
    snug_mem_free(e->heap);
    snug_mem_free(e->cache);
    snug_nfc_buf_free(&e->nfc);
    snug_mem_free(e);
}

/* ---- BPE over one word ------------------------------------------------------ */

static bool cand_before(const cand *a, const cand *b)
{
    return a->priority < b->priority || (a->priority == b->priority && a->pos < b->pos);
}

static void heap_push(snug_tok_encoder *e, size_t *n, cand c)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!cand_before(&c, &e->heap[up])) break;
        e->heap[i] = e->heap[up];
        i = up;
    }
    e->heap[i] = c;
}

static cand heap_pop(snug_tok_encoder *e, size_t *n)
{
    cand top = e->heap[0], last = e->heap[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, best = i;
        const cand *b = &last;
        if (l < *n && cand_before(&e->heap[l], b)) best = l, b = &e->heap[l];
        if (l + 1 < *n && cand_before(&e->heap[l + 1], b)) best = l + 1;
        if (best == i) break;
        e->heap[i] = e->heap[best];
        i = best;
    }
    if (*n) e->heap[i] = last;
    return top;
}

/* Queues the merge of symbols l and r if the tokenizer has one. */
static void queue_pair(snug_tok_encoder *e, const char *w, size_t *n, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return;
    const snug_tokenizer *t = e->tok;
    const sym *a = &e->syms[l], *b = &e->syms[r];
    cand c = {.pos = a->start, .left = l, .right = r, .left_len = a->len, .right_len = b->len};
    if (t->merge_mode == TOK_MERGE_RANKS) {
        int32_t rank;
        if (!tok_merge_find(t, a->id, b->id, &rank, &c.result)) return;
        c.priority = rank;
    } else {
        c.result = tok_lookup(t, w + a->start, (size_t)a->len + b->len);
        if (c.result < 0) return;
        c.priority = -(double)t->entries[c.result].score;
    }
    heap_push(e, n, c);
}

/* Length of the UTF-8 character at s (1 for a byte that starts none). */
static size_t char_len(const unsigned char *s, size_t n)
{
    size_t k = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
               : (s[0] & 0xF8) == 0xF0 ? 4 : 1;
    if (k > n) return 1;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 1;
    return k;
}

/* Emits the ids of a symbol no token covers: its bytes' fallback tokens
 * (sentencepiece), or the unknown token, or (byte-level without one, as
 * Hugging Face's BPE does) nothing. */
static snug_status emit_unknown(snug_tok_encoder *e, const char *w, const sym *s, snug_error *err)
{
    const snug_tokenizer *t = e->tok;
    if (t->kind == TOK_BYTE_LEVEL) return t->unk >= 0 ? push_id(e, t->unk, err) : SNUG_OK;
    for (uint32_t i = 0; i < s->len; i++) {
        int32_t id = t->byte_ids[(unsigned char)w[s->start + i]];
        if (id < 0) { /* no byte fallback: one unknown token for the symbol */
            if (t->unk < 0)
                return snug_errorf(err, SNUG_INVALID, "%s: the text has a character no token "
                                   "covers, and there is no unknown token", t->source);
            return push_id(e, t->unk, err);
        }
        snug_status st = push_id(e, id, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

static uint64_t word_hash(const char *w, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)w[i]) * 0x100000001B3ull;
    return h | 1; /* never 0 */
}

/* Encodes one pre-token (a word) by BPE, appending its ids. */
static snug_status bpe_word_uncached(snug_tok_encoder *e, const char *w, size_t n, snug_error *err);

static snug_status bpe_word(snug_tok_encoder *e, const char *w, size_t n, snug_error *err)
{
    if (n == 0) return SNUG_OK;
    if (n > CACHE_WORD) return bpe_word_uncached(e, w, n, err);
    uint64_t h = word_hash(w, n);
    cache_slot *c = &e->cache[h % CACHE_SLOTS];
    if (c->hash == h && c->len == n && memcmp(c->word, w, n) == 0) {
        snug_status st = grow((void **)&e->ids, &e->cap_ids, e->n_ids + c->n_ids, sizeof *e->ids, err);
        if (st != SNUG_OK) return st;
        if (c->n_ids) memcpy(e->ids + e->n_ids, c->ids, c->n_ids * sizeof *c->ids);
        e->n_ids += c->n_ids;
        return SNUG_OK;
    }
    size_t before = e->n_ids;
    snug_status st = bpe_word_uncached(e, w, n, err);
    size_t made = e->n_ids - before;
    if (st == SNUG_OK && made <= CACHE_IDS) {
        c->hash = h;
        c->len = (uint8_t)n;
        c->n_ids = (uint8_t)made;
        memcpy(c->word, w, n);
        if (made) memcpy(c->ids, e->ids + before, made * sizeof *c->ids); /* e->ids may be NULL */
    }
    return st;
}

static snug_status bpe_word_uncached(snug_tok_encoder *e, const char *w, size_t n, snug_error *err)
{
    const snug_tokenizer *t = e->tok;
    if (t->ignore_merges) {
        int32_t id = tok_lookup(t, w, n);
        if (id >= 0) return push_id(e, id, err);
    }
    snug_status st = grow((void **)&e->syms, &e->cap_syms, n, sizeof *e->syms, err);
    /* n - 1 first candidates, then at most two per merge */
    if (st == SNUG_OK) st = grow((void **)&e->heap, &e->cap_heap, 3 * n, sizeof *e->heap, err);
    if (st != SNUG_OK) return st;
    int32_t count = 0;
    for (size_t i = 0; i < n;) {
        size_t k = t->kind == TOK_BYTE_LEVEL ? 1 : char_len((const unsigned char *)w + i, n - i);
        int32_t id = t->kind == TOK_BYTE_LEVEL ? t->byte_ids[(unsigned char)w[i]] : tok_lookup(t, w + i, k);
        e->syms[count] = (sym){(uint32_t)i, (uint32_t)k, id, count - 1, -1};
        if (count) e->syms[count - 1].next = count;
        count++;
        i += k;
    }
    size_t queued = 0;
    for (int32_t i = 0; i + 1 < count; i++) queue_pair(e, w, &queued, i, i + 1);
    while (queued) {
        cand c = heap_pop(e, &queued);
        sym *a = &e->syms[c.left], *b = &e->syms[c.right];
        if (a->len != c.left_len || b->len != c.right_len || a->next != c.right) continue; /* stale */
        a->len += b->len;
        a->id = c.result;
        a->next = b->next;
        if (b->next >= 0) e->syms[b->next].prev = c.left;
        b->len = 0;
        queue_pair(e, w, &queued, a->prev, c.left);
        queue_pair(e, w, &queued, c.left, a->next);
    }
    for (int32_t i = 0; i >= 0 && st == SNUG_OK; i = e->syms[i].next)
        st = e->syms[i].id >= 0 ? push_id(e, e->syms[i].id, err) : emit_unknown(e, w, &e->syms[i], err);
    return st;
}

/* ---- pre-tokenization ------------------------------------------------------- */

static snug_status add_piece(snug_tok_encoder *e, int which, size_t *n, size_t off, size_t len,
                             snug_error *err)
{
    if (len == 0) return SNUG_OK;
    snug_status st = grow((void **)&e->pieces[which], &e->cap_pieces[which], *n + 1,
                          sizeof(piece), err);
    if (st == SNUG_OK) e->pieces[which][(*n)++] = (piece){off, len};
    return st;
}

/* Splits every piece of e->pieces[0] (in seg) by stage k into e->pieces[1]. */
static snug_status split_stage(snug_tok_encoder *e, int32_t k, const char *seg, size_t *n_in,
                               snug_error *err)
{
    const tok_pretok *p = &e->tok->pretok[k];
    size_t n_out = 0;
    snug_status st = SNUG_OK;
    for (size_t i = 0; i < *n_in && st == SNUG_OK; i++) {
        piece in = e->pieces[0][i];
        const char *s = seg + in.off;
        size_t pos = 0, from = 0, b, end;
        while (st == SNUG_OK && from < in.len) {
            int rc = snug_regex_find(p->re, e->matchers[k], s, in.len, from, &b, &end);
            if (rc < 0)
                return snug_errorf(err, SNUG_INVALID, "%s: the pre-tokenizer regex gave up on "
                                   "this text (PCRE2 error %d)", e->tok->source, rc);
            if (rc == 0) break;
            if (end == b) { /* an empty match splits nothing: look further on */
                from = b + char_len((const unsigned char *)s + b, in.len - b);
                continue;
            }
            if (p->behavior == TOK_SPLIT_ISOLATED || b > pos)
                st = add_piece(e, 1, &n_out, in.off + pos, b - pos, err);
            if (st == SNUG_OK && p->behavior == TOK_SPLIT_ISOLATED)
                st = add_piece(e, 1, &n_out, in.off + b, end - b, err);
            pos = from = end;
        }
        if (st == SNUG_OK) st = add_piece(e, 1, &n_out, in.off + pos, in.len - pos, err);
    }
    if (st != SNUG_OK) return st;
    piece *tmp = e->pieces[0];
    size_t cap = e->cap_pieces[0];
    e->pieces[0] = e->pieces[1];
    e->cap_pieces[0] = e->cap_pieces[1];
    e->pieces[1] = tmp;
    e->cap_pieces[1] = cap;
    *n_in = n_out;
    return SNUG_OK;
}

static snug_status encode_byte_level(snug_tok_encoder *e, const char *seg, size_t len,
                                     snug_error *err)
{
    const snug_tokenizer *t = e->tok;
    snug_status st;
    if (t->byte_level_prefix_space && seg[0] != ' ') {
        st = grow((void **)&e->buf, &e->cap_buf, len + 1, 1, err);
        if (st != SNUG_OK) return st;
        e->buf[0] = ' ';
        memcpy(e->buf + 1, seg, len);
        seg = e->buf;
        len++;
    }
    size_t n = 0;
    st = add_piece(e, 0, &n, 0, len, err);
    for (int32_t k = 0; k < t->n_pretok && st == SNUG_OK; k++) st = split_stage(e, k, seg, &n, err);
    for (size_t i = 0; i < n && st == SNUG_OK; i++)
        st = bpe_word(e, seg + e->pieces[0][i].off, e->pieces[0][i].len, err);
    return st;
}

static const char SPACE_MARK[] = "\xE2\x96\x81"; /* U+2581 */

static snug_status encode_sentencepiece(snug_tok_encoder *e, const char *seg, size_t len,
                                        bool at_start, snug_error *err)
{
    const snug_tokenizer *t = e->tok;
    snug_status st = grow((void **)&e->buf, &e->cap_buf, 3 * len + 3, 1, err);
    if (st != SNUG_OK) return st;
    size_t o = 0;
    if (t->spm_prepend == TOK_PREPEND_EVERY || (t->spm_prepend == TOK_PREPEND_FIRST && at_start)) {
        memcpy(e->buf, SPACE_MARK, 3);
        o = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (seg[i] == ' ' && t->spm_escape_spaces) {
            memcpy(e->buf + o, SPACE_MARK, 3);
            o += 3;
        } else {
            e->buf[o++] = seg[i];
        }
    }
    if (!t->spm_split && !t->spm_word_starts) return bpe_word(e, e->buf, o, err);
    /* a word starts at every space mark (Metaspace split), or where no token
     * can reach across: at the first mark of every run of them */
    size_t begin = 0;
    for (size_t i = 1; i <= o && st == SNUG_OK; i++) {
        bool mark = i + 3 <= o && memcmp(e->buf + i, SPACE_MARK, 3) == 0;
        bool after_mark = i >= 3 && memcmp(e->buf + i - 3, SPACE_MARK, 3) == 0;
        if (i == o || (mark && (t->spm_split || !after_mark))) {
            st = bpe_word(e, e->buf + begin, i - begin, err);
            begin = i;
        }
    }
    return st;
}

static snug_status encode_segment(snug_tok_encoder *e, const char *seg, size_t len, bool at_start,
                                  snug_error *err)
{
    if (len == 0) return SNUG_OK;
    if (e->tok->nfc) {
        snug_status st = snug_utf8_nfc(seg, len, &e->nfc, &seg, &len, err);
        if (st != SNUG_OK) return st;
    }
    return e->tok->kind == TOK_BYTE_LEVEL ? encode_byte_level(e, seg, len, err)
                                          : encode_sentencepiece(e, seg, len, at_start, err);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The added token that starts at text[pos], or NULL. */
static const tok_added *added_at(const snug_tokenizer *t, const char *text, size_t len, size_t pos,
                                 bool parse_special)
{
    if (!t->added_first[(unsigned char)text[pos]]) return NULL;
    for (int32_t i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        if (a->special && !parse_special) continue;
        size_t n;
        const char *s = tok_text(t, a->id, &n);
        if (n <= len - pos && memcmp(text + pos, s, n) == 0) return a;
    }
    return NULL;
}

snug_status snug_tok_encode(snug_tok_encoder *e, const char *text, size_t len,
                            const snug_tok_encode_opts *opts, const int32_t **ids, size_t *n_ids,
                            snug_error *err)
{
    const snug_tokenizer *t = e->tok;
    e->n_ids = 0;
    snug_status st = SNUG_OK;
    if (opts->add_special && t->add_bos && t->bos >= 0) st = push_id(e, t->bos, err);
    size_t seg = 0, pos = 0;
    while (pos < len && st == SNUG_OK) {
        const tok_added *a = added_at(t, text, len, pos, opts->parse_special);
        if (!a) {
            pos++;
            continue;
        }
        size_t end = pos;
        if (a->lstrip)
            while (end > seg && is_space(text[end - 1])) end--;
        st = encode_segment(e, text + seg, end - seg, seg == 0, err);
        if (st == SNUG_OK) st = push_id(e, a->id, err);
        pos += t->entries[a->id].len;
        if (a->rstrip)
            while (pos < len && is_space(text[pos])) pos++;
        seg = pos;
    }
    if (st == SNUG_OK) st = encode_segment(e, text + seg, len - seg, seg == 0, err);
    if (st == SNUG_OK && opts->add_special && t->add_eos && t->eos >= 0) st = push_id(e, t->eos, err);
    if (st != SNUG_OK) return st;
    *ids = e->ids;
    *n_ids = e->n_ids;
    return SNUG_OK;
}
