/*
 * ctxmask.h: masks that grammars share. A JSON string is the same rules
 * in every schema, and nearly every token may come inside one; a mask
 * cache keyed by grammar (tokmask.h) cannot share it between two schemas,
 * so a request that brings a schema of its own (a tool call) would walk
 * the whole vocabulary again for each of its strings.
 *
 * A state's mask is the union of its stacks' (a token is allowed when
 * some stack takes its bytes). A stack's top frame and those below it
 * down to the first that reads a byte of its own once the frames above it
 * are done (for a string: its characters' rules and the string rule, whose
 * closing quote is its own) are its context: what they take does not
 * depend on the grammar around them. (When those frames reach too many
 * rules, the top frame alone is the context.) A context walk (tokmask.h) of those frames alone
 * sorts the vocabulary into the tokens they allow whatever lies below,
 * those they refuse, and a short list of unsure ones (a string's closing
 * quote and what may follow it), which the stack itself decides, a token
 * at a time.
 *
 * A context is named by its canonical form: the elements left in each of
 * its frames and every rule they reach, rules numbered in the order they
 * are met and byte sets written out, so that the same rules in two
 * grammars (whatever their numbers there) have the same form, and
 * different rules never do. A cache keeps each context's mask and unsure
 * list under its whole form (compared whole, not by a hash alone). When
 * full, it replaces the least recently used of the contexts found at most
 * once (a grammar whose every token reaches a new context cannot push out
 * the strings that every request comes back to), or of all when none
 * was.
 *
 * Nothing here allocates: memory comes from the caller.
 */
#ifndef SNUG_GRAMMAR_CTXMASK_H
#define SNUG_GRAMMAR_CTXMASK_H

#include "tokmask.h"

enum {
    SNUG_CTX_FRAMES_MAX = 16,  /* frames a context takes at most */
    SNUG_CTX_RULES_MAX = 1024  /* rules a context's form may reach */
};

/* Bytes of scratch snug_ctx_form needs. Pure. */
size_t snug_ctx_form_scratch_bytes(void);

/* Writes the canonical form of stack i's context in m (the stack must not
 * be empty) into form (cap ints) and returns its length, with *from the
 * context's first frame (the stack's frames [from, len) are its context);
 * -1 when even the top frame's form passes cap ints or
 * SNUG_CTX_RULES_MAX rules (such a context is not shared). scratch: snug_ctx_form_scratch_bytes, 4-byte
 * aligned. Linear in the form. */
int32_t snug_ctx_form(const snug_gmatch *m, int32_t i, int32_t *form, int32_t cap, void *scratch, int32_t *from);

/* A context's entry in the cache: its mask ((n_vocab + 31) / 32 words)
 * and unsure tokens, or wide: its unsure tokens passed the list's caps,
 * so that a state with this context is walked whole instead. */
typedef struct snug_ctxmask {
    bool wide;
    const uint32_t *mask;
    const int32_t *unsure;
    int32_t n_unsure;
    int64_t unsure_bytes; /* their bytes: what trying them costs */
    int32_t allowed;      /* tokens in mask */
} snug_ctxmask;

/* The cache, in caller memory of a fixed size. */
typedef struct snug_ctxmask_cache {
    int32_t n_entries, n_vocab, form_cap, unsure_cap;
    int32_t used;
    uint64_t clock;
    char *entries;       /* n_entries of entry_bytes each */
    size_t entry_bytes;
    int64_t hits, misses;
} snug_ctxmask_cache;

/* Bytes of caller memory a cache of n_entries contexts of at most
 * form_cap ints of form and unsure_cap unsure tokens each, over n_vocab
 * tokens, needs. Pure. */
size_t snug_ctxmask_cache_bytes(int32_t n_entries, int32_t n_vocab, int32_t form_cap, int32_t unsure_cap);

/* Makes c an empty cache over mem (snug_ctxmask_cache_bytes of the same
 * arguments, 8-byte aligned, the caller's). */
void snug_ctxmask_cache_init(snug_ctxmask_cache *c, void *mem, int32_t n_entries, int32_t n_vocab, int32_t form_cap,
                             int32_t unsure_cap);

/* Looks up the context of this form (len ints); true with *out filled
 * (valid until the next put) when cached. A hit makes it the most
 * recently used. */
bool snug_ctxmask_cache_get(snug_ctxmask_cache *c, const int32_t *form, int32_t len, snug_ctxmask *out);

/* Keeps what a context walk found for the context of this form: its mask
 * and unsure tokens (n_unsure <= the cache's unsure_cap, unsure_bytes of
 * them), or wide (mask and unsure not read), in place of another when
 * full (above); nothing when len passes the cache's form_cap. */
void snug_ctxmask_cache_put(snug_ctxmask_cache *c, const int32_t *form, int32_t len, bool wide,
                            const uint32_t *mask, int32_t allowed, const int32_t *unsure, int32_t n_unsure,
                            int64_t unsure_bytes);

/* What the functions below return when they cannot make a mask. */
enum {
    SNUG_CTX_MISSING = -1, /* a stack's context is not cached */
    SNUG_CTX_NOT = -2,     /* a context too large to keep or too wide to use: the state is
                            * walked whole */
    SNUG_CTX_LATER = -3    /* more unsure tokens to try than the budget: in pieces, later */
};

/* The scratch of the functions below, the caller's. */
typedef struct snug_ctx_scratch {
    int32_t *form;   /* [form_cap] a context's form */
    int32_t form_cap;
    void *form_mem;  /* [snug_ctx_form_scratch_bytes()] */
    void *check_mem; /* [snug_gmatch_bytes of the states' limits] a stack alone, trying a token */
    /* for snug_ctxmask_make only (its context walks): */
    void *walk_mem;          /* [snug_tokmask_scratch_bytes of the trie and the states' limits] */
    uint32_t *walk_mask;     /* [(n_vocab + 31) / 32] */
    int32_t *unsure;         /* [unsure_cap] */
    int32_t unsure_cap;
    int64_t unsure_bytes_cap;
} snug_ctx_scratch;

/* Adds to mask the tokens that ctx (stack i's context's entry, just
 * found or walked) lets stack i of m take: its mask, then its unsure
 * tokens tried on the stack whole. */
void snug_ctxmask_add_found(const snug_vocab_trie *t, const snug_gmatch *m, int32_t i, const snug_ctxmask *ctx,
                            const snug_ctx_scratch *s, uint32_t *mask);

/* Adds to mask (over trie t's vocabulary) the tokens stack i of m takes,
 * from its context cached in c (snug_ctxmask_add_found), when its unsure
 * tokens' bytes are within *budget (NULL: no limit), which they are taken
 * from. Returns 0, or SNUG_CTX_MISSING / SNUG_CTX_NOT / SNUG_CTX_LATER
 * (mask unchanged). */
int32_t snug_ctxmask_add(snug_ctxmask_cache *c, const snug_vocab_trie *t, const snug_gmatch *m, int32_t i,
                         const snug_ctx_scratch *s, int64_t *budget, uint32_t *mask);

/* Makes the mask of state m into mask from its stacks' contexts cached in
 * c (snug_ctxmask_add of each), when their unsure tokens' bytes are
 * within budget: the same mask as snug_tokmask_compute's, overflow aside
 * (a stack alone holds fewer stacks). Looks every context up first
 * (without counting a use): a state it cannot make costs only its
 * stacks' forms. Returns the tokens allowed, or SNUG_CTX_MISSING
 * (*missing: the first stack whose context is not cached) / SNUG_CTX_NOT /
 * SNUG_CTX_LATER (mask then not written). */
int32_t snug_ctxmask_compose(snug_ctxmask_cache *c, const snug_vocab_trie *t, const snug_gmatch *m,
                             const snug_ctx_scratch *s, int64_t budget, uint32_t *mask, int32_t *missing);

/* Begins w, a context walk of stack i of m's context (not cached) over
 * s's walk memory, and writes the context's form into form (s->form_cap
 * ints): returns its length. form must stay as it is until the walk ends
 * (snug_ctxmask_walk_end). */
int32_t snug_ctxmask_walk_begin(snug_tokmask_walk *w, const snug_vocab_trie *t, const snug_gmatch *m, int32_t i,
                                const snug_ctx_scratch *s, int32_t *form);

/* After w (begun by snug_ctxmask_walk_begin for stack i of m) is done:
 * keeps what it found in c under form (len ints), and adds stack i's
 * tokens to mask (snug_ctxmask_add_found). Returns 0, or SNUG_CTX_NOT
 * when the context is too wide to use (mask unchanged). */
int32_t snug_ctxmask_walk_end(snug_ctxmask_cache *c, const snug_vocab_trie *t, const snug_gmatch *m, int32_t i,
                              const snug_tokmask_walk *w, const snug_ctx_scratch *s, const int32_t *form,
                              int32_t len, uint32_t *mask);

/* Makes the mask of state m into mask as snug_ctxmask_compose does (no
 * budget), walking each context not cached whole (a context walk over
 * s's walk_mem, its unsure tokens within s's caps) and keeping it in c:
 * what the engine does in pieces, at once. Returns the tokens allowed, or
 * SNUG_CTX_NOT (a context too large or too wide: walk the state whole);
 * *walked (may be NULL) gets the context walks made. */
int32_t snug_ctxmask_make(snug_ctxmask_cache *c, const snug_vocab_trie *t, const snug_gmatch *m,
                          const snug_ctx_scratch *s, uint32_t *mask, int32_t *walked);

/* Tokens set in mask (of n_vocab). Pure. */
int32_t snug_ctxmask_count(const uint32_t *mask, int32_t n_vocab);

#endif /* SNUG_GRAMMAR_CTXMASK_H */
