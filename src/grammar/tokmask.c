/*
 * tokmask.c: the vocabulary trie and the mask walk of tokmask.h. The trie
 * is built from the tokens sorted by their bytes: each token shares with
 * the one before it the path of their common prefix, so nodes come out in
 * preorder and a node's subtree is contiguous.
 */
#include "tokmask.h"

#include "base/hash.h"

#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

typedef struct tok_ref {
    const uint8_t *text;
    int32_t len, id;
} tok_ref;

static int by_bytes(const void *a, const void *b)
{
    const tok_ref *x = a, *y = b;
    int32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->text, y->text, (size_t)n) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

snug_status snug_vocab_trie_build(const uint8_t *const *texts, const int32_t *lens, int32_t n_vocab,
                                  snug_vocab_trie **out, snug_error *err)
{
    *out = NULL;
    int64_t total = 1, n = 0; /* nodes: at most 1 + every byte of every token */
    for (int32_t i = 0; i < n_vocab; i++)
        if (lens[i] > 0) total += lens[i], n++;
    tok_ref *refs = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)(n ? n : 1) * sizeof *refs, err);
    int32_t *path = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)total * sizeof *path, err); /* node at each depth */
    size_t text_bytes = (size_t)(total - 1);
    size_t bytes = sizeof(snug_vocab_trie) + (size_t)total * (2 * sizeof(int32_t) + 1) + sizeof(int32_t) +
                   (size_t)(n ? n : 1) * sizeof(int32_t) + ((size_t)n_vocab + 1) * sizeof(int32_t) + text_bytes + 8;
    char *mem = refs && path ? snug_mem_alloc(SNUG_MEM_OTHER, bytes, err) : NULL;
    if (!mem) {
        snug_mem_free(refs);
        snug_mem_free(path);
        return SNUG_NOMEM;
    }
    int64_t k = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (lens[i] > 0) refs[k++] = (tok_ref){texts[i], lens[i], i};
    qsort(refs, (size_t)n, sizeof *refs, by_bytes);

    snug_vocab_trie *t = (snug_vocab_trie *)(void *)mem;
    int32_t *size = (int32_t *)(void *)(mem + sizeof *t), *tok_first = size + total, *ids = tok_first + total + 1;
    int32_t *text_first = ids + (n ? n : 1);
    uint8_t *byte = (uint8_t *)(text_first + n_vocab + 1), *text = byte + total;
    text_first[0] = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        int32_t len = lens[i] > 0 ? lens[i] : 0;
        if (len) memcpy(text + text_first[i], texts[i], (size_t)len);
        text_first[i + 1] = text_first[i] + len;
    }
    int32_t nodes = 1, depth = 0, depth_max = 0; /* path[0..depth]: the nodes of the current path */
    path[0] = 0, byte[0] = 0, tok_first[0] = 0;
    int32_t n_ids = 0;
    for (int64_t i = 0; i < n; i++) {
        const tok_ref *r = &refs[i];
        int32_t common = 0;
        if (i > 0) {
            const tok_ref *p = &refs[i - 1];
            while (common < p->len && common < r->len && p->text[common] == r->text[common]) common++;
        }
        /* leave the nodes past the common prefix: their subtrees are complete */
        for (; depth > common; depth--) size[path[depth]] = nodes - path[depth];
        for (; depth < r->len; depth++) { /* a new node per remaining byte */
            int32_t node = nodes++;
            byte[node] = r->text[depth];
            tok_first[node] = n_ids;
            path[depth + 1] = node;
        }
        ids[n_ids++] = r->id;
        if (r->len > depth_max) depth_max = r->len;
    }
    for (; depth > 0; depth--) size[path[depth]] = nodes - path[depth];
    size[0] = nodes;
    /* a token ends at a node made for it or at the previous token's end (a
     * duplicate): node i's tokens run to the next node's first */
    tok_first[nodes] = n_ids;
    snug_mem_free(path);
    snug_mem_free(refs);
    *t = (snug_vocab_trie){.n_vocab = n_vocab, .n_nodes = nodes, .depth_max = depth_max, .size = size, .byte = byte,
                           .tok_first = tok_first, .ids = ids, .text_first = text_first, .text = text,
                           .bytes = bytes};
    *out = t;
    return SNUG_OK;
}

void snug_vocab_trie_free(snug_vocab_trie *t) { snug_mem_free(t); }

/* A walk's memory: a matcher per level (level 0 the start state, level
 * k + 1 the state after a token's first k + 1 bytes), then per level the
 * matcher's header, the bytes its state takes, and the node and next
 * child the walk is at. */
static size_t level_bytes(int32_t max_stacks, int32_t max_depth)
{
    return snug_round_up(snug_gmatch_bytes(max_stacks, max_depth), 8);
}

static size_t per_level_bytes(void) { return sizeof(snug_gmatch) + sizeof(snug_byteset) + 3 * sizeof(int32_t); }

size_t snug_tokmask_scratch_bytes(int32_t token_bytes_max, int32_t max_stacks, int32_t max_depth)
{
    size_t levels = (size_t)token_bytes_max + 1;
    return levels * (level_bytes(max_stacks, max_depth) + per_level_bytes());
}

void snug_tokmask_walk_begin(snug_tokmask_walk *w, const snug_vocab_trie *t, const snug_gmatch *state, void *scratch,
                             uint32_t *mask)
{
    size_t levels = (size_t)t->depth_max + 1, lb = level_bytes(state->max_stacks, state->max_depth);
    char *b = scratch;
    *w = (snug_tokmask_walk){.t = t, .levels = b, .level_bytes = lb, .mask = mask};
    w->state = (snug_gmatch *)(void *)(b + levels * lb);
    w->next = (snug_byteset *)(void *)(w->state + levels);
    w->node = (int32_t *)(void *)(w->next + levels);
    w->child = w->node + levels;
    w->popped = w->child + levels;
    memset(mask, 0, ((size_t)t->n_vocab + 31) / 32 * sizeof *mask);
    snug_gmatch_clone(&w->state[0], w->levels, state);
    snug_gmatch_next_bytes(&w->state[0], &w->next[0]);
    w->node[0] = 0, w->child[0] = 1, w->popped[0] = 0, w->depth = 1;
}

void snug_tokmask_walk_begin_context(snug_tokmask_walk *w, const snug_vocab_trie *t, const snug_gmatch *state,
                                     void *scratch, uint32_t *mask, int32_t *unsure, int32_t unsure_cap,
                                     int64_t unsure_bytes_cap)
{
    snug_tokmask_walk_begin(w, t, state, scratch, mask);
    w->context = true;
    w->unsure = unsure, w->unsure_cap = unsure_cap, w->unsure_bytes_cap = unsure_bytes_cap;
    w->popped[0] = snug_gmatch_accepting(&w->state[0]);
}

/* A context walk: the tokens of node c's subtree are unsure (the frames
 * were done above it, and they refuse its byte). false when the lists are
 * full: the walk stops. */
static bool add_unsure(snug_tokmask_walk *w, int32_t c)
{
    const snug_vocab_trie *t = w->t;
    for (int32_t i = t->tok_first[c], end = t->tok_first[c + t->size[c]]; i < end; i++) {
        int32_t id = t->ids[i];
        w->unsure_bytes += t->text_first[id + 1] - t->text_first[id];
        if (w->n_unsure >= w->unsure_cap || w->unsure_bytes > w->unsure_bytes_cap) {
            w->unsure_full = true;
            w->depth = 0;
            return false;
        }
        w->unsure[w->n_unsure++] = id;
    }
    return true;
}

bool snug_tokmask_walk_run(snug_tokmask_walk *w, double deadline)
{
    const snug_vocab_trie *t = w->t;
    for (uint32_t steps = 1; w->depth > 0; steps++) {
        int32_t l = w->depth - 1, n = w->node[l], c = w->child[l];
        if (c >= n + t->size[n]) { /* every child of the node looked at */
            w->depth--;
            continue;
        }
        w->child[l] = c + t->size[c];
        if (!snug_byteset_has(&w->next[l], t->byte[c])) { /* the whole subtree is refused (or unsure) */
            if (w->popped[l] && !add_unsure(w, c)) return true;
            continue;
        }
        snug_gmatch *m = &w->state[l + 1];
        snug_gmatch_result r = snug_gmatch_advance_from(m, w->levels + (size_t)(l + 1) * w->level_bytes, &w->state[l],
                                                        t->byte[c]);
        if (r != SNUG_GMATCH_OK) {
            w->overflowed |= r == SNUG_GMATCH_OVERFLOW;
            if (w->popped[l] && !add_unsure(w, c)) return true;
            continue;
        }
        for (int32_t i = t->tok_first[c]; i < t->tok_first[c + 1]; i++) {
            w->mask[t->ids[i] >> 5] |= 1u << (t->ids[i] & 31);
            w->allowed++;
        }
        if (t->size[c] > 1) { /* into its subtree */
            snug_gmatch_next_bytes(m, &w->next[l + 1]);
            w->popped[l + 1] = w->context && (w->popped[l] || snug_gmatch_accepting(m));
            w->node[l + 1] = c, w->child[l + 1] = c + 1;
            w->depth++;
        }
        if (deadline > 0 && (steps & 255) == 0 && snug_now_seconds() >= deadline) return w->depth == 0;
    }
    return true;
}

int32_t snug_tokmask_compute(const snug_vocab_trie *t, const snug_gmatch *state, void *scratch, uint32_t *mask,
                             bool *overflowed)
{
    snug_tokmask_walk w;
    snug_tokmask_walk_begin(&w, t, state, scratch, mask);
    snug_tokmask_walk_run(&w, 0);
    if (overflowed) *overflowed = w.overflowed;
    return w.allowed;
}

/* ---- the cache ------------------------------------------------------------------ */

/* One entry: its header, the state's stack lengths and frames (packed),
 * then the mask. */
typedef struct cache_head {
    uint64_t key, hash, last_use;
    int32_t n_stacks, allowed;
} cache_head;

static size_t mask_words(int32_t n_vocab) { return ((size_t)n_vocab + 31) / 32; }

static size_t entry_size(int32_t n_vocab, int32_t state_ints)
{
    size_t e = sizeof(cache_head) + (size_t)state_ints * sizeof(int32_t) + mask_words(n_vocab) * sizeof(uint32_t);
    return (e + 7) / 8 * 8;
}

size_t snug_tokmask_cache_bytes(int32_t n_entries, int32_t n_vocab, int32_t state_ints)
{
    return (size_t)n_entries * entry_size(n_vocab, state_ints);
}

void snug_tokmask_cache_init(snug_tokmask_cache *c, void *mem, int32_t n_entries, int32_t n_vocab,
                             int32_t state_ints)
{
    *c = (snug_tokmask_cache){.n_entries = n_entries, .n_vocab = n_vocab, .state_ints = state_ints,
                              .entries = mem, .entry_bytes = entry_size(n_vocab, state_ints)};
}

/* A stack's hash (FNV-1a over its depth and frames). */
static uint64_t stack_hash(const int32_t *f, int32_t d)
{
    return snug_hash_bytes(snug_hash_bytes(SNUG_HASH_SEED, &d, sizeof d), f, (size_t)d * sizeof *f);
}

/* The state's hash, the same whatever the order of its stacks. */
static uint64_t state_hash(const snug_gmatch *s)
{
    uint64_t h = (uint64_t)s->n;
    for (int32_t i = 0; i < s->n; i++) h += stack_hash(s->frames + (size_t)i * (size_t)s->max_depth, s->len[i]);
    return h;
}

/* The ints a state takes packed: its stack lengths and frames. */
static int64_t state_ints(const snug_gmatch *s)
{
    int64_t n = s->n;
    for (int32_t i = 0; i < s->n; i++) n += s->len[i];
    return n;
}

static cache_head *entry(const snug_tokmask_cache *c, int32_t i)
{
    return (cache_head *)(void *)(c->entries + (size_t)i * c->entry_bytes);
}

static int32_t *entry_lens(cache_head *e) { return (int32_t *)(e + 1); }

static uint32_t *entry_mask(const snug_tokmask_cache *c, cache_head *e)
{
    return (uint32_t *)(void *)((char *)(e + 1) + (size_t)c->state_ints * sizeof(int32_t));
}

/* Whether entry e holds state s: the same stacks (each of s found in e; no
 * duplicates in either, so equal counts make the sets equal). */
static bool entry_is(const cache_head *e, const snug_gmatch *s)
{
    if (e->n_stacks != s->n) return false;
    const int32_t *lens = (const int32_t *)(e + 1), *frames = lens + e->n_stacks;
    for (int32_t i = 0; i < s->n; i++) {
        const int32_t *f = s->frames + (size_t)i * (size_t)s->max_depth;
        bool found = false;
        for (int32_t j = 0, at = 0; j < e->n_stacks && !found; at += lens[j], j++)
            found = lens[j] == s->len[i] && memcmp(frames + at, f, (size_t)lens[j] * sizeof *f) == 0;
        if (!found) return false;
    }
    return true;
}

const uint32_t *snug_tokmask_cache_get(snug_tokmask_cache *c, uint64_t key, const snug_gmatch *state,
                                       int32_t *allowed)
{
    uint64_t h = state_hash(state);
    for (int32_t i = 0; i < c->used; i++) {
        cache_head *e = entry(c, i);
        if (e->hash != h || e->key != key || !entry_is(e, state)) continue;
        e->last_use = ++c->clock;
        c->hits++;
        if (allowed) *allowed = e->allowed;
        return entry_mask(c, e);
    }
    c->misses++;
    return NULL;
}

void snug_tokmask_cache_put(snug_tokmask_cache *c, uint64_t key, const snug_gmatch *state, const uint32_t *mask,
                            int32_t allowed)
{
    if (c->n_entries == 0 || state_ints(state) > c->state_ints) return;
    int32_t victim = c->used;
    if (c->used < c->n_entries) {
        c->used++;
    } else {
        victim = 0;
        for (int32_t i = 1; i < c->used; i++)
            if (entry(c, i)->last_use < entry(c, victim)->last_use) victim = i;
    }
    cache_head *e = entry(c, victim);
    *e = (cache_head){.key = key, .hash = state_hash(state), .last_use = ++c->clock, .n_stacks = state->n,
                      .allowed = allowed};
    int32_t *lens = entry_lens(e), *frames = lens + state->n, at = 0;
    for (int32_t i = 0; i < state->n; i++) {
        lens[i] = state->len[i];
        memcpy(frames + at, state->frames + (size_t)i * (size_t)state->max_depth, (size_t)state->len[i] * sizeof *frames);
        at += state->len[i];
    }
    memcpy(entry_mask(c, e), mask, mask_words(c->n_vocab) * sizeof *mask);
}

void snug_tokmask_cache_drop(snug_tokmask_cache *c, uint64_t key)
{
    for (int32_t i = 0; i < c->used; i++) {
        cache_head *e = entry(c, i);
        if (e->key == key && e->n_stacks >= 0) *e = (cache_head){.n_stacks = -1}; /* matches no state, used last */
    }
}
