/*
 * constrain.h: constrained decoding for the engine's sequences. A sequence
 * under a grammar (grammar/grammar.h: GBNF, a JSON schema, a tool call)
 * samples only tokens whose bytes the grammar takes next, and an
 * end-of-sequence token only where the text so far is a whole match; the
 * token sampled advances its matcher.
 *
 * The serving state keeps one snug_constrainer for every sequence: the
 * vocabulary's trie (built once from the tokenizer, before the plan), the
 * mask being applied, the mask walk's scratch, and a cache of masks by
 * grammar and state (grammar/tokmask.h) that sequences under the same
 * grammar share: after the first few, nearly every mask is a lookup. Each
 * sequence keeps its matcher in memory of its own there
 * (snug_constrain_seq_bytes). Nothing here allocates but
 * snug_constrain_trie_build.
 *
 * A wide state (one whose next byte may be most bytes: inside a JSON
 * string) not in that cache is made from its stacks' contexts
 * (grammar/ctxmask.h), which every grammar shares: the union of their
 * masks, and the few unsure tokens tried on the stacks themselves. So a
 * request with a schema of its own pays for its strings only the first
 * time any grammar meets them.
 *
 * A mask that is not cached (and not made so) is a walk of the whole
 * vocabulary's trie (tens of milliseconds for a wide state over 128k
 * tokens), or for a wide state a walk of each context not cached yet:
 * the engine does not make a step wait for it. It holds such a sequence out of steps and walks
 * its mask in pieces (snug_constrain_walk_start/_continue) within a share
 * of each step's time, so that sequences under hard grammars cannot stall
 * the others.
 */
#ifndef SNUG_CONSTRAIN_H
#define SNUG_CONSTRAIN_H

#include "base/common.h"
#include "grammar/ctxmask.h"
#include "grammar/tokmask.h"
#include "stop.h"
#include "tokenizer/tokenizer.h"

enum {
    SNUG_CONSTRAIN_STACKS = 64,       /* a sequence's matcher: stacks, ... */
    SNUG_CONSTRAIN_DEPTH = 64,        /* ... and frames a stack */
    SNUG_CONSTRAIN_CACHE = 128,       /* masks cached */
    SNUG_CONSTRAIN_STATE_INTS = 1024, /* the largest state cached (stack lengths and frames) */
    SNUG_CONSTRAIN_WIDE_BYTES = 64,   /* a state is wide when its next byte may be this many */
    SNUG_CONSTRAIN_CONTEXTS = 24,     /* contexts' masks cached (a JSON string's state has 11 stacks,
                                       * one per UTF-8 lead byte's range, each a context) */
    SNUG_CONSTRAIN_FORM_INTS = 2048,  /* the largest context form cached (a string's: ~540) */
    SNUG_CONSTRAIN_UNSURE = 4096,     /* a context's unsure tokens at most (a string's: ~700 of
                                       * Llama 3's 128k; more: its states are
                                       * walked whole), ... */
    SNUG_CONSTRAIN_UNSURE_BYTES = 32768, /* ... and their bytes */
    SNUG_CONSTRAIN_COMPOSE_BYTES = 8192  /* the unsure tokens' bytes a state's mask may try at once,
                                          * when a step's sequences are checked (~0.8 ms; a JSON
                                          * string's: ~3,100); more: in pieces, as walks are */
};

/* The time a step gives to mask walks: this share of its forward pass, at
 * least SNUG_CONSTRAIN_WALK_MIN_S (a request beside walks keeps 1 / 1.1 of
 * its speed); with nothing to run, walks go on in slices of
 * SNUG_CONSTRAIN_WALK_IDLE_S. */
#define SNUG_CONSTRAIN_WALK_SHARE 0.1
#define SNUG_CONSTRAIN_WALK_MIN_S 0.0005
#define SNUG_CONSTRAIN_WALK_IDLE_S 0.02

typedef struct snug_constrainer {
    const snug_vocab_trie *trie;      /* NULL: no constrained decoding (no tokenizer) */
    int32_t n_vocab;
    uint32_t *mask;                   /* [(n_vocab + 31) / 32] the mask being applied */
    uint32_t *walk_mask;              /* [(n_vocab + 31) / 32] the walk in pieces' */
    void *scratch;                    /* the mask walk's (one at a time: whole, or in pieces) */
    snug_tokmask_walk walk;           /* the walk in pieces, while walking */
    bool walking;
    bool walk_begun;                  /* a walk of the vocabulary is under way (else the next is
                                       * chosen when the walk goes on) */
    bool walk_context;                /* that walk is a context's (else the state's whole) */
    snug_gmatch walk_state;           /* the state whose mask the walk is for (its copy) */
    void *walk_state_mem;             /* [snug_constrain_seq_bytes()] */
    uint32_t *walk_made;              /* [(n_vocab + 31) / 32] its mask, made from its stacks' contexts */
    int32_t walk_stack;               /* the stacks before this one are in it */
    int32_t *walk_form;               /* [SNUG_CONSTRAIN_FORM_INTS] the walked context's form */
    int32_t walk_form_len;
    snug_ctxmask_cache contexts;
    snug_ctx_scratch ctx_scratch;     /* a context's form (SNUG_CONSTRAIN_FORM_INTS), a stack alone;
                                       * a context walk's: scratch, walk_mask, its unsure tokens */
    uint64_t walk_key;                /* its grammar's key */
    int32_t walk_owner;               /* whose it is (the caller's tag: a slot) */
    uint32_t walk_gen;                /* (and the caller's generation of it) */
    snug_tokmask_cache cache;
    uint8_t *token_text;              /* [token_cap] a sampled token's bytes */
    size_t token_cap;                 /* max_token_bytes */
    int64_t masks;                    /* masks applied, and ... */
    int64_t walks;                    /* walks of the vocabulary: masks computed whole, and contexts */
    int64_t composed;                 /* masks made from their contexts */
    int64_t walks_abandoned;          /* walks in pieces given up (their owner went, or a whole walk
                                       * needed the scratch) */
    double walk_seconds;              /* the time walks took */
} snug_constrainer;

/* Bytes the shared part needs in the serving state for a vocabulary of
 * n_vocab tokens of at most max_token_bytes bytes each (the masks, the
 * scratch, the caches of states and contexts, a token's bytes). Pure. */
size_t snug_constrain_bytes(int32_t n_vocab, size_t max_token_bytes);

/* Bytes of one sequence's matcher (SNUG_CONSTRAIN_STACKS x DEPTH). Pure. */
size_t snug_constrain_seq_bytes(void);

/* Makes c over mem (snug_constrain_bytes of the same arguments, 64-byte
 * aligned) with no trie yet: snug_constrain_mask needs one set. */
void snug_constrainer_attach(snug_constrainer *c, void *mem, int32_t n_vocab, size_t max_token_bytes);

/* Builds the trie of the bytes (snug_tokenizer_token_bytes) of tokens 0 ..
 * n_vocab - 1 of tok (ids past the tokenizer's have none). Fails with
 * SNUG_NOMEM; *out is NULL then. The caller frees it with
 * snug_vocab_trie_free. */
snug_status snug_constrain_trie_build(const snug_tokenizer *tok, int32_t n_vocab, snug_vocab_trie **out,
                                      snug_error *err);

/* Masks logits (n_vocab of them, c's) for the sequence in state m under
 * the grammar of key: a token the grammar does not take next gets
 * -infinity; stop's EOS ids keep their logit where m is accepting (and EOS
 * is not ignored), and any other token with no bytes is masked. The mask
 * comes from the cache, or from a whole walk that is then cached (a walk
 * in pieces is given up for it). Returns the tokens left (0: the sequence
 * cannot go on). */
int32_t snug_constrain_mask(snug_constrainer *c, uint64_t key, const snug_gmatch *m, const snug_stop_params *stop,
                            float *logits);

/* Whether a sequence's matcher (SNUG_CONSTRAIN_STACKS x DEPTH) holds the
 * start of g: SNUG_INVALID with a message naming the limits when not.
 * Allocates nothing (the matcher is tried on the stack). Every front end's
 * grammar passes here (snug_engine_check; the server at parse time too, to
 * name the field). */
snug_status snug_constrain_check_start(const snug_grammar *g, snug_error *err);

/* Whether the mask of state m under the grammar of key is cached (a
 * lookup: it becomes the most recently used), or made now from its
 * contexts and cached (a wide state whose contexts are all cached). */
bool snug_constrain_cached(snug_constrainer *c, uint64_t key, const snug_gmatch *m);

/* Starts a walk in pieces of m's mask under the grammar of key (m is
 * copied; its grammar must outlive the walk), for owner (a tag the caller
 * keeps: owner and gen); one at a time, replacing any walk not done. A
 * wide state's walk is of its contexts not cached, one after another,
 * then its mask is made from them (or, when one of them is too wide for
 * that, a walk of the state whole). */
void snug_constrain_walk_start(snug_constrainer *c, uint64_t key, const snug_gmatch *m, int32_t owner,
                               uint32_t gen);

/* Goes on with the walk until it is done or the clock passes deadline;
 * true when done: its mask is then cached and c is not walking. */
bool snug_constrain_walk_continue(snug_constrainer *c, double deadline);

/* Gives the walk up (counted in walks_abandoned); nothing when none. */
void snug_constrain_walk_abandon(snug_constrainer *c);

/* Whether m's text is a whole match that nothing can extend: the grammar
 * is done. */
bool snug_constrain_complete(const snug_gmatch *m);

#endif /* SNUG_CONSTRAIN_H */
