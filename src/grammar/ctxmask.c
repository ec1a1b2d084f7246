/*
 * ctxmask.c: contexts' canonical forms and their cache (ctxmask.h).
 *
 * A form is ints: the number of frames; each frame's elements from its
 * place to the end of its alternative; then each rule reached, in the
 * order it was first met, as its number of alternatives and each
 * alternative's elements. An element is 1 and its byte set's 8 words, or
 * 2 and the rule's number in the form; 0 ends an alternative.
 */
#include "ctxmask.h"

#include "base/hash.h"

#include <string.h>

enum { RULE_SLOTS = 2 * SNUG_CTX_RULES_MAX, FORM_SET = 1, FORM_REF = 2, FORM_END = 0 };

/* The form's scratch: rule numbers in the form, by rule (open addressing;
 * a key is the rule + 1, 0 free), and the rules in the order met. */
typedef struct form_scratch {
    int32_t key[RULE_SLOTS], index[RULE_SLOTS];
    int32_t order[SNUG_CTX_RULES_MAX];
} form_scratch;

typedef struct form_writer {
    const snug_grammar *g;
    form_scratch *s;
    int32_t n_rules;
    int32_t *form, cap, len;
} form_writer;

size_t snug_ctx_form_scratch_bytes(void) { return sizeof(form_scratch); }

static bool put(form_writer *w, int32_t v)
{
    if (w->len >= w->cap) return false;
    w->form[w->len++] = v;
    return true;
}

/* Rule r's number in the form, r numbered next when first met; -1 past
 * SNUG_CTX_RULES_MAX rules. */
static int32_t rule_index(form_writer *w, int32_t r)
{
    uint32_t h = (uint32_t)r * 2654435761u;
    for (uint32_t at = h % RULE_SLOTS;; at = (at + 1) % RULE_SLOTS) {
        if (w->s->key[at] == r + 1) return w->s->index[at];
        if (w->s->key[at] != 0) continue;
        if (w->n_rules >= SNUG_CTX_RULES_MAX) return -1;
        w->s->key[at] = r + 1, w->s->index[at] = w->n_rules;
        w->s->order[w->n_rules] = r;
        return w->n_rules++;
    }
}

/* The elements from place pos to the end of its alternative, and the end.
 * false past the caps. */
static bool put_elems(form_writer *w, int32_t pos)
{
    for (;; pos++) {
        const snug_gelem *e = &w->g->elems[pos];
        if (e->kind == SNUG_GE_SET) {
            if (!put(w, FORM_SET)) return false;
            for (int k = 0; k < 8; k++)
                if (!put(w, (int32_t)w->g->sets[e->value].bits[k])) return false;
        } else if (e->kind == SNUG_GE_REF) {
            int32_t r = rule_index(w, e->value);
            if (r < 0 || !put(w, FORM_REF) || !put(w, r)) return false;
        } else {
            return put(w, FORM_END);
        }
    }
}

/* Whether the elements from place pos to the end of its alternative read
 * a byte themselves (not only through rules). */
static bool reads_a_byte(const snug_grammar *g, int32_t pos)
{
    for (; g->elems[pos].kind == SNUG_GE_SET || g->elems[pos].kind == SNUG_GE_REF; pos++)
        if (g->elems[pos].kind == SNUG_GE_SET) return true;
    return false;
}

/* The form of frames [lo, d) of stack f into form (cap ints): its length,
 * or -1 past the caps. */
static int32_t form_of(const snug_grammar *g, const int32_t *f, int32_t lo, int32_t d, int32_t *form, int32_t cap,
                       form_scratch *scratch)
{
    form_writer w = {.g = g, .s = scratch, .form = form, .cap = cap};
    memset(w.s->key, 0, sizeof w.s->key);
    if (!put(&w, d - lo)) return -1;
    for (int32_t k = lo; k < d; k++)
        if (!put_elems(&w, f[k])) return -1;
    for (int32_t q = 0; q < w.n_rules; q++) { /* (rules met on the way join the list) */
        int32_t r = w.s->order[q];
        if (!put(&w, g->alt_first[r + 1] - g->alt_first[r])) return -1;
        for (int32_t a = g->alt_first[r]; a < g->alt_first[r + 1]; a++)
            if (!put_elems(&w, g->alts[a])) return -1;
    }
    return w.len;
}

int32_t snug_ctx_form(const snug_gmatch *m, int32_t i, int32_t *form, int32_t cap, void *scratch, int32_t *from)
{
    const snug_grammar *g = m->g;
    int32_t d = m->len[i];
    const int32_t *f = m->frames + (size_t)i * (size_t)m->max_depth;
    SNUG_ASSERT(d > 0);
    /* the top frame, then down to a frame that reads a byte of its own once the frames above are done */
    int32_t lo = d - 1;
    while (lo > 0 && d - lo < SNUG_CTX_FRAMES_MAX)
        if (reads_a_byte(g, f[--lo])) break;
    int32_t len = form_of(g, f, lo, d, form, cap, scratch);
    if (len < 0 && lo < d - 1) /* the frames below reach too many rules: the top frame alone */
        len = form_of(g, f, lo = d - 1, d, form, cap, scratch);
    *from = lo;
    return len;
}

/* ---- the cache ------------------------------------------------------------------ */

/* One entry: its header, the form (form_cap ints), the unsure ids
 * (unsure_cap), the mask. */
typedef struct ctx_head {
    uint64_t hash, last_use;
    int64_t unsure_bytes;
    int32_t len, wide, n_unsure, allowed;
    int32_t uses;   /* lookups that found it */
} ctx_head;

static size_t mask_words(int32_t n_vocab) { return ((size_t)n_vocab + 31) / 32; }

static size_t entry_size(int32_t n_vocab, int32_t form_cap, int32_t unsure_cap)
{
    size_t e = sizeof(ctx_head) + ((size_t)form_cap + (size_t)unsure_cap) * sizeof(int32_t) +
               mask_words(n_vocab) * sizeof(uint32_t);
    return (e + 7) / 8 * 8;
}

size_t snug_ctxmask_cache_bytes(int32_t n_entries, int32_t n_vocab, int32_t form_cap, int32_t unsure_cap)
{
    return (size_t)n_entries * entry_size(n_vocab, form_cap, unsure_cap);
}

void snug_ctxmask_cache_init(snug_ctxmask_cache *c, void *mem, int32_t n_entries, int32_t n_vocab, int32_t form_cap,
                             int32_t unsure_cap)
{
    *c = (snug_ctxmask_cache){.n_entries = n_entries, .n_vocab = n_vocab, .form_cap = form_cap,
                              .unsure_cap = unsure_cap, .entries = mem,
                              .entry_bytes = entry_size(n_vocab, form_cap, unsure_cap)};
}

static ctx_head *entry(const snug_ctxmask_cache *c, int32_t i)
{
    return (ctx_head *)(void *)(c->entries + (size_t)i * c->entry_bytes);
}

static int32_t *entry_form(ctx_head *e) { return (int32_t *)(e + 1); }

static int32_t *entry_unsure(const snug_ctxmask_cache *c, ctx_head *e) { return entry_form(e) + c->form_cap; }

static uint32_t *entry_mask(const snug_ctxmask_cache *c, ctx_head *e)
{
    return (uint32_t *)(entry_unsure(c, e) + c->unsure_cap);
}

static uint64_t form_hash(const int32_t *form, int32_t len)
{
    return snug_hash_bytes(SNUG_HASH_SEED, form, (size_t)len * sizeof *form);
}

/* The entry of this form, or NULL. */
static ctx_head *find(const snug_ctxmask_cache *c, const int32_t *form, int32_t len)
{
    uint64_t h = form_hash(form, len);
    for (int32_t i = 0; i < c->used; i++) {
        ctx_head *e = entry(c, i);
        if (e->hash == h && e->len == len && memcmp(entry_form(e), form, (size_t)len * sizeof *form) == 0) return e;
    }
    return NULL;
}

bool snug_ctxmask_cache_get(snug_ctxmask_cache *c, const int32_t *form, int32_t len, snug_ctxmask *out)
{
    ctx_head *e = find(c, form, len);
    if (!e) {
        c->misses++;
        return false;
    }
    e->last_use = ++c->clock;
    e->uses += e->uses < INT32_MAX;
    c->hits++;
    *out = (snug_ctxmask){.wide = e->wide, .mask = entry_mask(c, e), .unsure = entry_unsure(c, e),
                          .n_unsure = e->n_unsure, .unsure_bytes = e->unsure_bytes, .allowed = e->allowed};
    return true;
}

void snug_ctxmask_cache_put(snug_ctxmask_cache *c, const int32_t *form, int32_t len, bool wide,
                            const uint32_t *mask, int32_t allowed, const int32_t *unsure, int32_t n_unsure,
                            int64_t unsure_bytes)
{
    if (c->n_entries == 0 || len > c->form_cap) return;
    SNUG_ASSERT(wide || n_unsure <= c->unsure_cap);
    int32_t victim = c->used;
    if (c->used < c->n_entries) {
        c->used++;
    } else { /* the least recently used of those found at most once, or of all when none was */
        victim = 0;
        for (int32_t i = 1; i < c->used; i++) {
            const ctx_head *e = entry(c, i), *v = entry(c, victim);
            bool once = e->uses <= 1, v_once = v->uses <= 1;
            if (once != v_once ? once : e->last_use < v->last_use) victim = i;
        }
    }
    ctx_head *e = entry(c, victim);
    *e = (ctx_head){.hash = form_hash(form, len), .last_use = ++c->clock, .len = len, .wide = wide,
                    .n_unsure = wide ? 0 : n_unsure, .unsure_bytes = wide ? 0 : unsure_bytes,
                    .allowed = wide ? 0 : allowed};
    memcpy(entry_form(e), form, (size_t)len * sizeof *form);
    if (wide) return;
    if (n_unsure) memcpy(entry_unsure(c, e), unsure, (size_t)n_unsure * sizeof *unsure);
    memcpy(entry_mask(c, e), mask, mask_words(c->n_vocab) * sizeof *mask);
}

void snug_ctxmask_add_found(const snug_vocab_trie *t, const snug_gmatch *m, int32_t i, const snug_ctxmask *ctx,
                            const snug_ctx_scratch *s, uint32_t *mask)
{
    size_t words = mask_words(t->n_vocab);
    for (size_t w = 0; w < words; w++) mask[w] |= ctx->mask[w];
    for (int32_t k = 0; k < ctx->n_unsure; k++) {
        int32_t id = ctx->unsure[k];
        if (mask[id >> 5] >> (id & 31) & 1) continue;
        snug_gmatch one;
        snug_gmatch_from_stack(&one, s->check_mem, m, i, 0);
        size_t n = (size_t)(t->text_first[id + 1] - t->text_first[id]);
        if (snug_gmatch_advance_bytes(&one, t->text + t->text_first[id], n, NULL) == SNUG_GMATCH_OK)
            mask[id >> 5] |= 1u << (id & 31);
    }
}

int32_t snug_ctxmask_add(snug_ctxmask_cache *c, const snug_vocab_trie *t, const snug_gmatch *m, int32_t i,
                         const snug_ctx_scratch *s, int64_t *budget, uint32_t *mask)
{
    if (m->len[i] == 0) return 0; /* the whole match: no token's bytes */
    int32_t from, len = snug_ctx_form(m, i, s->form, s->form_cap, s->form_mem, &from);
    if (len < 0) return SNUG_CTX_NOT;
    snug_ctxmask ctx;
    if (!snug_ctxmask_cache_get(c, s->form, len, &ctx)) return SNUG_CTX_MISSING;
    if (ctx.wide) return SNUG_CTX_NOT;
    if (budget && ctx.unsure_bytes > *budget) return SNUG_CTX_LATER;
    if (budget) *budget -= ctx.unsure_bytes;
    snug_ctxmask_add_found(t, m, i, &ctx, s, mask);
    return 0;
}

int32_t snug_ctxmask_compose(snug_ctxmask_cache *c, const snug_vocab_trie *t, const snug_gmatch *m,
                             const snug_ctx_scratch *s, int64_t budget, uint32_t *mask, int32_t *missing)
{
    /* first, without trying a token or counting a use: every context there, and their unsure
     * tokens within the budget (a state that cannot be made now costs only its forms) */
    int64_t need = 0;
    for (int32_t i = 0; i < m->n; i++) {
        if (m->len[i] == 0) continue;
        int32_t from, len = snug_ctx_form(m, i, s->form, s->form_cap, s->form_mem, &from);
        const ctx_head *e = len < 0 ? NULL : find(c, s->form, len);
        if (len < 0 || (e && e->wide)) return SNUG_CTX_NOT;
        if (!e) {
            *missing = i;
            return SNUG_CTX_MISSING;
        }
        if ((need += e->unsure_bytes) > budget) return SNUG_CTX_LATER;
    }
    memset(mask, 0, mask_words(t->n_vocab) * sizeof *mask);
    for (int32_t i = 0; i < m->n; i++) {
        int32_t r = snug_ctxmask_add(c, t, m, i, s, &budget, mask);
        if (r == SNUG_CTX_MISSING) *missing = i;
        if (r < 0) return r;
    }
    return snug_ctxmask_count(mask, t->n_vocab);
}

int32_t snug_ctxmask_walk_begin(snug_tokmask_walk *w, const snug_vocab_trie *t, const snug_gmatch *m, int32_t i,
                                const snug_ctx_scratch *s, int32_t *form)
{
    int32_t from, len = snug_ctx_form(m, i, form, s->form_cap, s->form_mem, &from);
    snug_gmatch alone; /* (copied by the walk: the check's memory is free again after) */
    snug_gmatch_from_stack(&alone, s->check_mem, m, i, from);
    snug_tokmask_walk_begin_context(w, t, &alone, s->walk_mem, s->walk_mask, s->unsure, s->unsure_cap,
                                    s->unsure_bytes_cap);
    return len;
}

int32_t snug_ctxmask_walk_end(snug_ctxmask_cache *c, const snug_vocab_trie *t, const snug_gmatch *m, int32_t i,
                              const snug_tokmask_walk *w, const snug_ctx_scratch *s, const int32_t *form,
                              int32_t len, uint32_t *mask)
{
    snug_ctxmask_cache_put(c, form, len, w->unsure_full, w->mask, w->allowed, w->unsure, w->n_unsure,
                           w->unsure_bytes);
    if (w->unsure_full) return SNUG_CTX_NOT;
    snug_ctxmask found = {.mask = w->mask, .unsure = w->unsure, .n_unsure = w->n_unsure};
    snug_ctxmask_add_found(t, m, i, &found, s, mask);
    return 0;
}

int32_t snug_ctxmask_make(snug_ctxmask_cache *c, const snug_vocab_trie *t, const snug_gmatch *m,
                          const snug_ctx_scratch *s, uint32_t *mask, int32_t *walked)
{
    int32_t r = 0, walks = 0;
    memset(mask, 0, mask_words(t->n_vocab) * sizeof *mask);
    for (int32_t i = 0; i < m->n && r == 0; i++) {
        r = snug_ctxmask_add(c, t, m, i, s, NULL, mask);
        if (r != SNUG_CTX_MISSING) continue;
        snug_tokmask_walk w;
        int32_t len = snug_ctxmask_walk_begin(&w, t, m, i, s, s->form);
        snug_tokmask_walk_run(&w, 0);
        walks++;
        r = snug_ctxmask_walk_end(c, t, m, i, &w, s, s->form, len, mask);
    }
    if (walked) *walked = walks;
    return r == 0 ? snug_ctxmask_count(mask, t->n_vocab) : r;
}

int32_t snug_ctxmask_count(const uint32_t *mask, int32_t n_vocab)
{
    int32_t n = 0;
    for (size_t w = 0; w < mask_words(n_vocab); w++) n += __builtin_popcount(mask[w]);
    return n;
}
