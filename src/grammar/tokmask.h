/*
 * tokmask.h: which tokens of a vocabulary a grammar allows next: the mask
 * the sampler applies before it samples a constrained sequence.
 *
 * The vocabulary's token texts (their bytes: the tokenizer's decoding of
 * each id alone) go into a trie, numbered in preorder so that a node's
 * subtree is the nodes after it up to its size. A mask is a walk of the
 * trie from a matcher state (matcher.h): a child is entered only when the
 * state takes its byte (a refused byte skips its whole subtree), with a
 * copy of the state advanced by it in the level's own memory; the tokens
 * that end at an entered node are allowed. Tokens with no bytes (special
 * tokens) are never allowed here: the caller decides about EOS (allowed
 * where the matcher is accepting).
 *
 * Nothing in snug_tokmask_compute allocates: its scratch is sized by
 * snug_tokmask_scratch_bytes.
 */
#ifndef SNUG_GRAMMAR_TOKMASK_H
#define SNUG_GRAMMAR_TOKMASK_H

#include "matcher.h"

typedef struct snug_vocab_trie {
    int32_t n_vocab;
    int32_t n_nodes;      /* node 0 is the root (the empty text) */
    int32_t depth_max;    /* the longest token, in bytes */
    const int32_t *size;  /* (n_nodes): nodes in the subtree, the node included */
    const uint8_t *byte;  /* (n_nodes): the byte on the edge into the node */
    const int32_t *tok_first; /* (n_nodes + 1): the tokens ending at node i are ids[tok_first[i] ..
                               * tok_first[i + 1]) */
    const int32_t *ids;
    const int32_t *text_first; /* (n_vocab + 1): token i's bytes are text[text_first[i] .. text_first[i + 1]) */
    const uint8_t *text;
    size_t bytes;         /* what the trie holds, this struct included */
} snug_vocab_trie;

/* Builds the trie of n_vocab tokens, token i's text the lens[i] bytes at
 * texts[i] (lens[i] 0: never allowed). Fails with SNUG_NOMEM (nothing
 * held, *out NULL). The caller frees *out with snug_vocab_trie_free. */
snug_status snug_vocab_trie_build(const uint8_t *const *texts, const int32_t *lens, int32_t n_vocab,
                                  snug_vocab_trie **out, snug_error *err);

void snug_vocab_trie_free(snug_vocab_trie *t);

/* Bytes of scratch a walk (snug_tokmask_compute, snug_tokmask_walk_begin)
 * needs for a trie whose longest token has token_bytes_max bytes (its
 * depth_max, or more) and matchers of these limits. Pure. */
size_t snug_tokmask_scratch_bytes(int32_t token_bytes_max, int32_t max_stacks, int32_t max_depth);

/* Sets in mask ((n_vocab + 31) / 32 words, cleared first) bit i for each
 * token i whose bytes state takes, one after another; state is not
 * changed. scratch: snug_tokmask_scratch_bytes(t->depth_max or more, state's limits), 8-byte
 * aligned. Returns how many tokens are allowed; *overflowed (may be NULL)
 * tells whether some token was left out because advancing by it passed
 * the matcher's limits. */
int32_t snug_tokmask_compute(const snug_vocab_trie *t, const snug_gmatch *state, void *scratch, uint32_t *mask,
                             bool *overflowed);

/* A mask computed in pieces: a walk of the trie that stops at a deadline
 * and goes on where it stopped, so that a long walk (a wide state over a
 * large vocabulary) can be spread over steps instead of stalling one. All
 * of its state is in the caller's scratch and mask.
 *
 * A context walk (snug_tokmask_walk_begin_context) starts from the top
 * frames of a stack taken alone (snug_gmatch_from_stack), and sorts the
 * tokens three ways: allowed whatever lies below those frames (the mask),
 * refused whatever lies below, and unsure: refused by the frames alone,
 * but after some of the token's bytes the frames were done (a stack came
 * out empty), so that what lies below decides the rest. The unsure ids go
 * to the caller's list; when more than its capacity would (or more than
 * unsure_bytes_cap of their bytes), the walk stops with unsure_full set. */
typedef struct snug_tokmask_walk {
    const snug_vocab_trie *t;
    char *levels;            /* (depth_max + 1) matchers' memory, level_bytes each */
    size_t level_bytes;
    snug_gmatch *state;      /* [depth_max + 1] level 0: the start state (a copy) */
    snug_byteset *next;      /* [depth_max + 1] the bytes each level's state takes */
    int32_t *node, *child;   /* [depth_max + 1] the node each level expands, its next child */
    int32_t *popped;         /* [depth_max + 1] a context walk: whether the frames were done at
                              * the level or above it */
    int32_t depth;           /* levels open; 0: done */
    uint32_t *mask;
    int32_t allowed;
    bool overflowed;
    bool context;            /* a context walk: */
    int32_t *unsure;         /* [unsure_cap] the unsure tokens' ids */
    int32_t unsure_cap, n_unsure;
    int64_t unsure_bytes, unsure_bytes_cap; /* their bytes, and the most they may have */
    bool unsure_full;        /* more than the caps: the walk stopped, its lists are not whole */
} snug_tokmask_walk;

/* Starts w: the mask of state (copied into scratch: state may change or
 * go after this) into mask (cleared), over scratch as for
 * snug_tokmask_compute. The grammar of state must outlive the walk. */
void snug_tokmask_walk_begin(snug_tokmask_walk *w, const snug_vocab_trie *t, const snug_gmatch *state, void *scratch,
                             uint32_t *mask);

/* Starts w as a context walk from state (one stack: the frames alone)
 * into mask (cleared), the unsure ids into unsure (unsure_cap of them, at
 * most unsure_bytes_cap bytes together), over scratch as for
 * snug_tokmask_compute. The grammar of state must outlive the walk. */
void snug_tokmask_walk_begin_context(snug_tokmask_walk *w, const snug_vocab_trie *t, const snug_gmatch *state,
                                     void *scratch, uint32_t *mask, int32_t *unsure, int32_t unsure_cap,
                                     int64_t unsure_bytes_cap);

/* Goes on with w until it is done or the clock (snug_now_seconds) passes
 * deadline (<= 0: none; looked at every 256 nodes); true when done (the
 * mask, w->allowed and w->overflowed are then complete). */
bool snug_tokmask_walk_run(snug_tokmask_walk *w, double deadline);

/* A cache of masks by grammar and matcher state, in caller memory of a
 * fixed size: a constrained sequence returns to the same states again and
 * again (inside a JSON string, after each token), sequences under the same
 * grammar share them, and a state's mask is a pure function of the grammar
 * and the state. The caller names the grammar by a key (equal keys: the
 * same grammar); a state is looked up as a set of stacks (order does not
 * matter). A state whose stacks and frames together pass state_ints is not
 * kept. A full cache replaces its least recently used entry. */
typedef struct snug_tokmask_cache {
    int32_t n_entries, n_vocab, state_ints;
    int32_t used;       /* entries filled */
    uint64_t clock;     /* uses so far */
    char *entries;      /* n_entries of entry_bytes each */
    size_t entry_bytes;
    int64_t hits, misses;
} snug_tokmask_cache;

/* Bytes of caller memory a cache of n_entries masks of n_vocab tokens,
 * each for a state of at most state_ints stack lengths and frames, needs.
 * Pure. */
size_t snug_tokmask_cache_bytes(int32_t n_entries, int32_t n_vocab, int32_t state_ints);

/* Makes c an empty cache over mem (snug_tokmask_cache_bytes of the same
 * arguments, 8-byte aligned, the caller's). */
void snug_tokmask_cache_init(snug_tokmask_cache *c, void *mem, int32_t n_entries, int32_t n_vocab,
                             int32_t state_ints);

/* The mask cached for state under grammar key (the same stacks in any
 * order), or NULL; *allowed (may be NULL) gets its count. A hit makes it
 * the most recently used. Valid until the next snug_tokmask_cache_put. */
const uint32_t *snug_tokmask_cache_get(snug_tokmask_cache *c, uint64_t key, const snug_gmatch *state,
                                       int32_t *allowed);

/* Keeps mask (allowed tokens of it) for state under grammar key, in place
 * of the least recently used entry when the cache is full; nothing when
 * the state is larger than the cache's state_ints. */
void snug_tokmask_cache_put(snug_tokmask_cache *c, uint64_t key, const snug_gmatch *state, const uint32_t *mask,
                            int32_t allowed);

/* Drops every mask kept under grammar key (their entries are the first
 * replaced): for a key that will stand for another grammar. */
void snug_tokmask_cache_drop(snug_tokmask_cache *c, uint64_t key);

#endif /* SNUG_GRAMMAR_TOKMASK_H */
