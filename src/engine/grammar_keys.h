/*
 * grammar_keys.h: the keys under which the mask cache (grammar/tokmask.h)
 * keeps each grammar's masks. Equal grammars share a key, and so their
 * masks, across requests and over time; two different grammars never do,
 * even when their hashes collide.
 *
 * A grammar comes with two keyed hashes of its content (grammar.h's
 * snug_grammar_hash under two secrets of the engine's): h, the key it asks
 * for, and a digest. It takes key h when no entry has it, when the live
 * grammar holding it is equal to it (compared whole, once, as a sequence
 * starts), or when the entry is retired (no holder left: its grammar is
 * gone) with the same digest; otherwise the next key after h that it can
 * take. A retired entry keeps its key's masks meaningful for a later equal
 * grammar; when the table needs its place, it is evicted, and its key's
 * masks must be dropped from the cache (snug_tokmask_cache_drop) before
 * anything else looks them up.
 *
 * The table lives in caller memory of a fixed size; nothing here
 * allocates.
 */
#ifndef SNUG_GRAMMAR_KEYS_H
#define SNUG_GRAMMAR_KEYS_H

#include "base/common.h"
#include "grammar/grammar.h"

typedef struct snug_grammar_key {
    uint64_t key;
    uint64_t digest;
    const snug_grammar *g; /* a live grammar under the key (one of its holders'); NULL: retired */
    int32_t holders;
    bool used;             /* false: the entry is free */
    uint64_t last_use;     /* when it was last taken or let go: the oldest retired goes first */
} snug_grammar_key;

typedef struct snug_grammar_keys {
    snug_grammar_key *e; /* [cap] */
    int32_t cap;
    uint64_t clock;
    int64_t collisions;  /* grammars that met another under their hash's key */
} snug_grammar_keys;

/* Bytes of caller memory a table of cap entries needs. Pure. */
size_t snug_grammar_keys_bytes(int32_t cap);

/* Makes t an empty table over mem (snug_grammar_keys_bytes(cap), 8-byte
 * aligned, the caller's). cap must exceed the grammars that can be live
 * at once (one a sequence slot). */
void snug_grammar_keys_init(snug_grammar_keys *t, void *mem, int32_t cap);

/* Takes a key for grammar g, whose hash is h and digest d (equal grammars
 * must have equal hashes and digests), into *key (above). g must live
 * until it is released. When a retired entry had to make room, *dropped
 * is set and *dropped_key is the key whose masks the caller must drop
 * now. Fails (false) only when every entry is held by a live grammar. */
bool snug_grammar_keys_take(snug_grammar_keys *t, uint64_t h, uint64_t d, const snug_grammar *g, uint64_t *key,
                            bool *dropped, uint64_t *dropped_key);

/* Lets go of one hold of key by grammar g (taken before); other, another
 * holder's grammar (equal to g), stands for the key when g goes, or NULL
 * when g was the last: the entry is then retired, its masks kept. */
void snug_grammar_keys_release(snug_grammar_keys *t, uint64_t key, const snug_grammar *g,
                               const snug_grammar *other);

#endif /* SNUG_GRAMMAR_KEYS_H */
