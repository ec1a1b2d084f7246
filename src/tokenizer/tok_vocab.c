/*
 * tok_vocab.c: building a tokenizer: token texts and their index, merges,
 * added tokens, pre-tokenizer stages; GPT-2's byte-level alphabet; and the
 * merge list derived from token priorities.
 */
#include "tok_internal.h"

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char TOK_REGEX_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char TOK_REGEX_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char TOK_REGEX_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char TOK_REGEX_O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char *const TOK_REGEX_DEEPSEEK3[3] = {
    "\\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
    return h ^ (h >> 29);
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

snug_status tok_create(const char *source, tok_kind kind, int32_t n_vocab, snug_tokenizer **out,
                       snug_error *err)
{
    if (n_vocab < 1 || n_vocab > (1 << 24))
        return snug_errorf(err, SNUG_FORMAT, "%s: vocabulary of %d tokens; expected 1 to %d",
                           source, n_vocab, 1 << 24);
    snug_tokenizer *t = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *t, err);
    if (!t) return SNUG_NOMEM;
    t->kind = kind;
    t->n_vocab = n_vocab;
    t->bos = t->eos = t->unk = -1;
    for (int i = 0; i < 256; i++) t->byte_ids[i] = -1;
    t->source = snug_mem_strdup(SNUG_MEM_OTHER, source, err);
    t->entries = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_vocab * sizeof *t->entries, err);
    t->text_cap = (size_t)n_vocab * 8 + 1024;
    t->text = snug_mem_alloc(SNUG_MEM_OTHER, t->text_cap, err);
    if (!t->source || !t->entries || !t->text) {
        snug_tokenizer_free(t);
        return SNUG_NOMEM;
    }
    *out = t;
    return SNUG_OK;
}

/* Appends bytes to the text pool, growing it; returns the offset. */
static snug_status pool_append(snug_tokenizer *t, const char *s, size_t n, uint32_t *off,
                               snug_error *err)
{
    if (t->text_len + n > UINT32_MAX)
        return snug_errorf(err, SNUG_FORMAT, "%s: token texts exceed 4 GiB", t->source);
    if (t->text_len + n > t->text_cap) {
        size_t cap = SNUG_MAX(t->text_cap * 2, t->text_len + n);
        char *d = snug_mem_alloc(SNUG_MEM_OTHER, cap, err);
        if (!d) return SNUG_NOMEM;
        memcpy(d, t->text, t->text_len);
        snug_mem_free(t->text);
        t->text = d;
        t->text_cap = cap;
    }
    memcpy(t->text + t->text_len, s, n);
    *off = (uint32_t)t->text_len;
    t->text_len += n;
    return SNUG_OK;
}

bool tok_parse_byte_token(const char *s, size_t n, uint8_t *byte)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return false;
    unsigned v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                            : 16u;
        if (d > 15) return false;
        v = v * 16 + d;
    }
    *byte = (uint8_t)v;
    return true;
}

snug_status tok_set(snug_tokenizer *t, int32_t id, const char *text, size_t len, float score,
                    tok_attr attr, snug_error *err)
{
    if (id < 0 || id >= t->n_vocab)
        return snug_errorf(err, SNUG_FORMAT, "%s: token id %d is outside the vocabulary (0 to %d)",
                           t->source, id, t->n_vocab - 1);
    tok_entry *e = &t->entries[id];
    char shown[48];
    if (e->attr != TOK_UNUSED)
        return snug_errorf(err, SNUG_FORMAT, "%s: token id %d is given twice", t->source, id);
    if (len == 0 && attr == TOK_NORMAL)
        return snug_errorf(err, SNUG_FORMAT, "%s: token %d has empty text", t->source, id);
    if (attr == TOK_BYTE && t->kind == TOK_SENTENCEPIECE && !tok_parse_byte_token(text, len, &e->byte))
        return snug_errorf(err, SNUG_FORMAT, "%s: byte token %d is '%s'; expected <0x00> to "
                           "<0xFF>", t->source, id, snug_bytes_shown(text, len, shown, sizeof shown));
    snug_status st = pool_append(t, text, len, &e->off, err);
    if (st != SNUG_OK) return st;
    e->len = (uint32_t)len;
    e->score = score;
    e->attr = (uint8_t)attr;
    if (len > t->max_token_bytes) t->max_token_bytes = len;
    return SNUG_OK;
}

int32_t tok_lookup(const snug_tokenizer *t, const char *text, size_t len)
{
    if (!t->hash) return -1;
    uint32_t mask = t->hash_cap - 1;
    for (uint32_t i = (uint32_t)hash_bytes(text, len) & mask;; i = (i + 1) & mask) {
        int32_t id = t->hash[i];
        if (id < 0) return -1;
        const tok_entry *e = &t->entries[id];
        if (e->len == len && memcmp(t->text + e->off, text, len) == 0) return id;
    }
}

int32_t tok_find_any(const snug_tokenizer *t, const char *text, size_t len)
{
    int32_t id = tok_lookup(t, text, len);
    for (int32_t i = 0; id < 0 && i < t->n_vocab; i++) {
        const tok_entry *e = &t->entries[i];
        if (e->attr != TOK_UNUSED && e->len == len && memcmp(t->text + e->off, text, len) == 0) id = i;
    }
    return id;
}

/* True when text has a U+2581 right after a character that is not one. */
static bool joins_before_space_mark(const char *s, size_t n)
{
    static const char mark[] = "\xE2\x96\x81";
    for (size_t k = 1; k + 3 <= n; k++)
        if (memcmp(s + k, mark, 3) == 0 && !(k >= 3 && memcmp(s + k - 3, mark, 3) == 0)) return true;
    return false;
}

snug_status tok_index(snug_tokenizer *t, snug_error *err)
{
    t->hash_cap = pow2_at_least((uint64_t)t->n_vocab * 2);
    t->hash = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)t->hash_cap * sizeof *t->hash, err);
    if (!t->hash) return SNUG_NOMEM;
    memset(t->hash, 0xFF, (size_t)t->hash_cap * sizeof *t->hash);
    uint32_t mask = t->hash_cap - 1;
    t->spm_word_starts = t->kind == TOK_SENTENCEPIECE;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const tok_entry *e = &t->entries[id];
        if (e->attr == TOK_BYTE) t->byte_ids[e->byte] = id;
        if (e->attr != TOK_NORMAL) continue;
        const char *s = t->text + e->off;
        if (t->spm_word_starts && joins_before_space_mark(s, e->len)) t->spm_word_starts = false;
        uint32_t i = (uint32_t)hash_bytes(s, e->len) & mask;
        for (; t->hash[i] >= 0; i = (i + 1) & mask) {
            const tok_entry *o = &t->entries[t->hash[i]];
            char shown[64];
            if (o->len == e->len && memcmp(t->text + o->off, s, e->len) == 0)
                return snug_errorf(err, SNUG_FORMAT, "%s: tokens %d and %d have the same text "
                                   "'%s'", t->source, t->hash[i], id,
                                   snug_bytes_shown(s, e->len, shown, sizeof shown));
        }
        t->hash[i] = id;
    }
    if (t->kind == TOK_BYTE_LEVEL) /* a byte without a token is dropped, as in Hugging Face's BPE */
        for (int b = 0; b < 256; b++) {
            char c = (char)b;
            t->byte_ids[b] = tok_lookup(t, &c, 1);
        }
    return SNUG_OK;
}

static uint64_t merge_key(int32_t left, int32_t right)
{
    return ((uint64_t)(uint32_t)(left + 1) << 32) | (uint32_t)(right + 1);
}

static uint32_t merge_slot(const snug_tokenizer *t, uint64_t key)
{
    uint32_t mask = t->merge_cap - 1;
    uint32_t i = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    while (t->merges[i].key != 0 && t->merges[i].key != key) i = (i + 1) & mask;
    return i;
}

bool tok_merge_find(const snug_tokenizer *t, int32_t left, int32_t right, int32_t *rank,
                    int32_t *result)
{
    if (!t->merges || left < 0 || right < 0) return false;
    uint32_t i = merge_slot(t, merge_key(left, right));
    if (t->merges[i].key == 0) return false;
    *rank = t->merges[i].rank;
    *result = t->merges[i].result;
    return true;
}

snug_status tok_add_merge(snug_tokenizer *t, const char *left, size_t left_len,
                          const char *right, size_t right_len, snug_error *err)
{
    int32_t n = t->n_merges;
    int32_t a = tok_lookup(t, left, left_len), b = tok_lookup(t, right, right_len);
    char shown[3][48];
    if (a < 0 || b < 0)
        return snug_errorf(err, SNUG_FORMAT, "%s: merge %d ('%s' '%s') names %s that is not a "
                           "token", t->source, n, snug_bytes_shown(left, left_len, shown[0], sizeof shown[0]),
                           snug_bytes_shown(right, right_len, shown[1], sizeof shown[1]),
                           a < 0 ? "a left part" : "a right part");
    char both[512];
    if (left_len + right_len > sizeof both)
        return snug_errorf(err, SNUG_FORMAT, "%s: merge %d is longer than %zu bytes", t->source, n,
                           sizeof both);
    memcpy(both, left, left_len);
    memcpy(both + left_len, right, right_len);
    int32_t r = tok_lookup(t, both, left_len + right_len);
    if (r < 0)
        return snug_errorf(err, SNUG_FORMAT, "%s: merge %d ('%s' '%s') makes '%s', which is "
                           "not a token", t->source, n, snug_bytes_shown(left, left_len, shown[0], sizeof shown[0]),
                           snug_bytes_shown(right, right_len, shown[1], sizeof shown[1]),
                           snug_bytes_shown(both, left_len + right_len, shown[2], sizeof shown[2]));
    if ((uint64_t)(n + 1) * 2 > t->merge_cap) { /* grow: rehash into twice the room */
        uint32_t old_cap = t->merge_cap;
        struct tok_merge *old = t->merges;
        uint32_t cap = pow2_at_least((uint64_t)(n + 1) * 4);
        struct tok_merge *m = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)cap * sizeof *m, err);
        if (!m) return SNUG_NOMEM;
        t->merges = m;
        t->merge_cap = cap;
        for (uint32_t i = 0; i < old_cap; i++)
            if (old[i].key) t->merges[merge_slot(t, old[i].key)] = old[i];
        snug_mem_free(old);
    }
    uint64_t key = merge_key(a, b);
    uint32_t i = merge_slot(t, key);
    /* as Hugging Face's tokenizers builds its map, a pair listed twice keeps its last rank */
    t->merges[i] = (struct tok_merge){key, n, r};
    t->n_merges = n + 1;
    return SNUG_OK;
}

static int cmp_added(const void *a, const void *b, void *ctx);

snug_status tok_add_added(snug_tokenizer *t, int32_t id, bool special, bool lstrip, bool rstrip,
                          snug_error *err)
{
    if (id < 0 || id >= t->n_vocab || t->entries[id].attr == TOK_UNUSED || t->entries[id].len == 0)
        return snug_errorf(err, SNUG_FORMAT, "%s: added token %d is not a token with text",
                           t->source, id);
    for (int32_t i = 0; i < t->n_added; i++)
        if (t->added[i].id == id) return SNUG_OK;
    tok_added *a = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)(t->n_added + 1) * sizeof *a, err);
    if (!a) return SNUG_NOMEM;
    if (t->n_added) memcpy(a, t->added, (size_t)t->n_added * sizeof *a);
    a[t->n_added] = (tok_added){id, special, lstrip, rstrip};
    snug_mem_free(t->added);
    t->added = a;
    t->n_added++;
    qsort_r(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added, t);
    return SNUG_OK;
}

/* Longest text first (so the longest match wins), then by id. */
static int cmp_added(const void *a, const void *b, void *ctx)
{
    const snug_tokenizer *t = ctx;
    const tok_added *x = a, *y = b;
    uint32_t lx = t->entries[x->id].len, ly = t->entries[y->id].len;
    if (lx != ly) return lx > ly ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

snug_status tok_add_split(snug_tokenizer *t, const char *pattern, tok_split_behavior behavior,
                          snug_error *err)
{
    if (t->n_pretok == TOK_MAX_PRETOK)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: more than %d pre-tokenizer stages",
                           t->source, TOK_MAX_PRETOK);
    tok_pretok *p = &t->pretok[t->n_pretok];
    snug_status st = snug_regex_compile(pattern, &p->re, err);
    if (st != SNUG_OK) return snug_error_context(err, st, t->source, "pre-tokenizer regex: ");
    p->pattern = snug_mem_strdup(SNUG_MEM_OTHER, pattern, err);
    if (!p->pattern) {
        snug_regex_free(p->re);
        return SNUG_NOMEM;
    }
    p->behavior = behavior;
    t->n_pretok++;
    return SNUG_OK;
}

snug_status tok_add_digits(snug_tokenizer *t, snug_error *err)
{
    return tok_add_split(t, "\\p{N}", TOK_SPLIT_ISOLATED, err);
}

snug_status tok_set_string(char **dst, const char *src, snug_error *err)
{
    char *d = snug_mem_strdup(SNUG_MEM_OTHER, src, err);
    if (!d) return SNUG_NOMEM;
    snug_mem_free(*dst);
    *dst = d;
    return SNUG_OK;
}

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves; the 68
 * others (0-32, 127-160, 173) for U+0100 onwards, in byte order. */
static bool byte_prints_as_itself(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

size_t tok_byte_to_char(uint8_t b, char out[2])
{
    unsigned x = b, cp = b;
    if (!byte_prints_as_itself(x)) cp = 256u + (x <= 32 ? x : x <= 160 ? x - 127u + 33u : 67u);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* The byte a code point of the alphabet stands for; -1 when none. */
static int char_to_byte(unsigned cp)
{
    if (cp < 256) return byte_prints_as_itself(cp) ? (int)cp : -1;
    unsigned k = cp - 256;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(k - 33 + 127);
    return k == 67 ? 173 : -1;
}

bool tok_chars_to_bytes(const char *s, size_t n, char *out, size_t *out_len)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        unsigned cp;
        if (c < 0x80) {
            cp = c;
            i++;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < n && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
            cp = ((c & 0x1Fu) << 6) | ((unsigned char)s[i + 1] & 0x3Fu);
            i += 2;
        } else {
            return false;
        }
        int b = char_to_byte(cp);
        if (b < 0) return false;
        out[o++] = (char)b;
    }
    *out_len = o;
    return true;
}

snug_status tok_finish(snug_tokenizer *t, snug_error *err)
{
    const struct {
        const char *what;
        int32_t id;
    } ids[] = {{"bos", t->bos}, {"eos", t->eos}, {"unk", t->unk}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(ids); i++)
        if (ids[i].id >= t->n_vocab || (ids[i].id >= 0 && t->entries[ids[i].id].attr == TOK_UNUSED))
            return snug_errorf(err, SNUG_FORMAT, "%s: the %s token %d is not in the vocabulary",
                               t->source, ids[i].what, ids[i].id);
    for (int32_t i = 0; i < t->n_eos_ids; i++)
        if (t->eos_ids[i] < 0 || t->eos_ids[i] >= t->n_vocab)
            return snug_errorf(err, SNUG_FORMAT, "%s: end-of-sequence id %d is not in the "
                               "vocabulary", t->source, t->eos_ids[i]);
    bool listed = t->eos < 0;
    for (int32_t i = 0; i < t->n_eos_ids; i++) listed |= t->eos_ids[i] == t->eos;
    if (!listed && t->n_eos_ids < TOK_MAX_EOS) t->eos_ids[t->n_eos_ids++] = t->eos;
    memset(t->added_first, 0, sizeof t->added_first);
    for (int32_t i = 0; i < t->n_added; i++) {
        size_t n;
        const char *s = tok_text(t, t->added[i].id, &n);
        t->added_first[(unsigned char)s[0]] = true;
    }
    size_t text_max = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) text_max = SNUG_MAX(text_max, (size_t)t->entries[i].len);
    t->max_token_bytes = text_max;
    return SNUG_OK;
}

void snug_tokenizer_free(snug_tokenizer *t)
{
    if (!t) return;
    for (int32_t i = 0; i < t->n_pretok; i++) {
        snug_regex_free(t->pretok[i].re);
        snug_mem_free(t->pretok[i].pattern);
    }
    snug_mem_free(t->entries);
    snug_mem_free(t->text);
    snug_mem_free(t->hash);
    snug_mem_free(t->merges);
    snug_mem_free(t->added);
    snug_mem_free(t->chat_template);
    snug_mem_free(t->bos_text);
    snug_mem_free(t->eos_text);
    snug_mem_free(t->source);
    snug_mem_free(t);
}

/* A candidate merge while deriving a merge list. */
typedef struct derived {
    double priority; /* lower first */
    int32_t token, left, right;
} derived;

/* By priority; ties keep token order, then the halves' ids. */
static int cmp_derived(const void *a, const void *b)
{
    const derived *x = a, *y = b;
    if (x->priority != y->priority) return x->priority < y->priority ? -1 : 1;
    if (x->token != y->token) return x->token < y->token ? -1 : 1;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

snug_status tok_derive_merges(const snug_tokenizer *t, int32_t **pairs, int32_t *n_merges,
                              snug_error *err)
{
    size_t cap = 1024, n = 0;
    derived *d = snug_mem_alloc(SNUG_MEM_OTHER, cap * sizeof *d, err);
    if (!d) return SNUG_NOMEM;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const tok_entry *e = &t->entries[id];
        if (e->attr != TOK_NORMAL || e->len < 2) continue;
        const char *s = t->text + e->off;
        for (uint32_t k = 1; k < e->len; k++) {
            int32_t l = tok_lookup(t, s, k), r = tok_lookup(t, s + k, e->len - k);
            if (l < 0 || r < 0) continue;
            if (n == cap) {
                derived *g = snug_mem_alloc(SNUG_MEM_OTHER, cap * 2 * sizeof *g, err);
                if (!g) {
                    snug_mem_free(d);
                    return SNUG_NOMEM;
                }
                memcpy(g, d, n * sizeof *d);
                snug_mem_free(d);
                d = g;
                cap *= 2;
            }
            /* scores: higher first; ranks (tiktoken): the token's id is its rank */
            d[n++] = (derived){t->merge_mode == TOK_MERGE_SCORES ? -(double)e->score : (double)id,
                               id, l, r};
        }
    }
    qsort(d, n, sizeof *d, cmp_derived);
    int32_t *out = snug_mem_alloc(SNUG_MEM_OTHER, SNUG_MAX(n, (size_t)1) * 2 * sizeof *out, err);
    if (!out) {
        snug_mem_free(d);
        return SNUG_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[i].left;
        out[2 * i + 1] = d[i].right;
    }
    snug_mem_free(d);
    *pairs = out;
    *n_merges = (int32_t)n;
    return SNUG_OK;
}

static int cmp_merge_rank(const void *a, const void *b)
{
    const struct tok_merge *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

snug_status tok_merge_pairs(const snug_tokenizer *t, int32_t **pairs, int32_t *n_merges, snug_error *err)
{
    if (t->merge_mode == TOK_MERGE_SCORES) return tok_derive_merges(t, pairs, n_merges, err);
    int32_t n = 0;
    snug_status st = SNUG_OK;
    struct tok_merge *m = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)SNUG_MAX(t->n_merges, 1) * sizeof *m, err);
    int32_t *p = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)SNUG_MAX(t->n_merges, 1) * 2 * sizeof *p, err);
    if (!m || !p) st = SNUG_NOMEM;
    for (uint32_t i = 0; st == SNUG_OK && i < t->merge_cap; i++)
        if (t->merges[i].key) m[n++] = t->merges[i];
    if (st == SNUG_OK) qsort(m, (size_t)n, sizeof *m, cmp_merge_rank);
    for (int32_t i = 0; st == SNUG_OK && i < n; i++) {
        p[2 * i] = (int32_t)(m[i].key >> 32) - 1;
        p[2 * i + 1] = (int32_t)(m[i].key & 0xFFFFFFFFu) - 1;
    }
    snug_mem_free(m);
    if (st != SNUG_OK) {
        snug_mem_free(p);
        p = NULL, n = 0;
    }
    *pairs = p;
    *n_merges = n;
    return st;
}
