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
 */
#ifndef SNUG_CONSTRAIN_H
#define SNUG_CONSTRAIN_H

#include "base/common.h"
#include "grammar/tokmask.h"
#include "stop.h"
#include "tokenizer/tokenizer.h"

enum {
    SNUG_CONSTRAIN_STACKS = 64,       /* a sequence's matcher: stacks, ... */
    SNUG_CONSTRAIN_DEPTH = 64,        /* ... and frames a stack */
    SNUG_CONSTRAIN_CACHE = 128,       /* masks cached */
    SNUG_CONSTRAIN_STATE_INTS = 1024  /* the largest state cached (stack lengths and frames) */
};

typedef struct snug_constrainer {
    const snug_vocab_trie *trie;      /* NULL: no constrained decoding (no tokenizer) */
    int32_t n_vocab;
    uint32_t *mask;                   /* [(n_vocab + 31) / 32] the mask being applied */
    void *scratch;                    /* the mask walk's */
    snug_tokmask_cache cache;
    uint8_t *token_text;              /* [token_cap] a sampled token's bytes */
    size_t token_cap;                 /* max_token_bytes */
    int64_t masks;                    /* masks applied, and ... */
    int64_t walks;                    /* ... of those, computed (not found in the cache) */
    double walk_seconds;              /* the time they took */
} snug_constrainer;

/* Bytes the shared part needs in the serving state for a vocabulary of
 * n_vocab tokens of at most max_token_bytes bytes each (the mask, the
 * scratch, the cache, a token's bytes). Pure. */
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
 * comes from the cache, or from a walk that is then cached. Returns the
 * tokens left (0: the sequence cannot go on). */
int32_t snug_constrain_mask(snug_constrainer *c, uint64_t key, const snug_gmatch *m, const snug_stop_params *stop,
                            float *logits);

/* Whether m's text is a whole match that nothing can extend: the grammar
 * is done. */
bool snug_constrain_complete(const snug_gmatch *m);

#endif /* SNUG_CONSTRAIN_H */
