/*
 * blocks.h: the block pool of the paged KV cache, with automatic prefix
 * caching, and the block tables of sequences.
 *
 * The cache is cut into n_blocks blocks of block_size token positions; a
 * sequence's block table lists its blocks in position order, so position p
 * lives in block table->ids[p / block_size] at slot p % block_size.
 *
 * Every block has a reference count: the tables that hold it. A block a
 * table filled (block_size computed positions) can be registered under a
 * hash chained from its parent block's hash, the cache salt and its own
 * token ids; a later sequence whose tokens begin the same way takes
 * references to those blocks instead of computing them again. A lookup is
 * confirmed against what the block stores: its token ids, its salt, and
 * its parent's identity (block id and generation: a block's generation
 * moves on whenever it loses its hash), so that by induction a hit holds
 * exactly the keys and values of the same prefix, whatever the hash
 * collides with.
 *
 * A block whose count falls to 0 keeps its contents and its hash on an LRU
 * list of evictable blocks (a sequence's blocks are put there last block
 * first, so a prefix loses its tail before its head). A table that grows
 * takes empty blocks first, then evicts the least recently used cached
 * one: n_free counts both, since either can be taken at once. With caching
 * off, a released block goes straight back to the empty blocks (a stack:
 * the most recently freed is reused first, while it is warm).
 *
 * Nothing here allocates once the pool is made: every array is in the
 * pool's one block, sized for n_blocks by the pure snug_block_pool_bytes
 * (the memory plan counts it), and a growing sequence only moves ids.
 */
#ifndef SNUG_BLOCKS_H
#define SNUG_BLOCKS_H

#include "base/common.h"

typedef struct snug_block_pool {
    int32_t n_blocks;
    int32_t block_size;
    bool caching;          /* registration and lookups on */
    int32_t n_ready;       /* blocks 0 .. n_ready - 1 may be handed out (the rest are not
                            * resident yet: snug_block_pool_set_ready) */
    int32_t n_free;        /* blocks a table may take now: empty + evictable */
    int32_t n_empty;       /* of those, holding nothing: empty_ids[0 .. n_empty) */
    int32_t n_evictable;   /* of those, cached with no reference: on the LRU list */
    int32_t n_cached;      /* blocks with a hash, referenced or not */
    int64_t n_evictions;   /* cached blocks taken for new contents, since made */
    uint64_t hash_mask;    /* ANDed into every hash: a test hook (0 makes all collide) */
    int32_t lru_head, lru_tail; /* least and most recently used evictable; -1: none */
    int32_t n_buckets;
    void *block;           /* the one allocation */
    int32_t *empty_ids;    /* [n_blocks] a stack */
    int32_t *ref;          /* [n_blocks] references */
    uint64_t *hash;        /* [n_blocks] valid where hashed */
    uint64_t *salt;        /* [n_blocks] the salt it was registered under */
    uint32_t *gen;         /* [n_blocks] generation: moves on when the hash is dropped */
    int32_t *parent;       /* [n_blocks] the block before it in its sequence; -1: first */
    uint32_t *parent_gen;  /* [n_blocks] that block's generation at registration */
    int32_t *lru_prev, *lru_next; /* [n_blocks] the LRU list's links */
    int32_t *chain;        /* [n_blocks] the next block in its hash bucket; -1: last */
    int32_t *bucket;       /* [n_buckets] the first block of each hash bucket; -1: none */
    uint8_t *hashed;       /* [n_blocks] 1 when registered */
    int32_t *tokens;       /* [n_blocks x block_size] the ids a registered block holds */
} snug_block_pool;

typedef struct snug_block_table {
    int32_t *ids;        /* [cap] block ids in position order */
    int32_t n;           /* blocks held */
    int32_t cap;         /* most blocks this table can hold */
} snug_block_table;

/* What the pool holds now, as /metrics and the page report it. */
typedef struct snug_block_counts {
    int32_t total;         /* n_blocks */
    int32_t ready;         /* may be handed out (resident) */
    int32_t used;          /* held by tables: ready - free */
    int32_t cached;        /* with a hash, held or not */
    int32_t evictable;     /* cached, held by none (counted as free) */
    int64_t evictions;     /* cached blocks taken for new contents, since made */
    bool caching;          /* prefix caching on */
} snug_block_counts;

/* pool's counts into *out. Reads only. */
void snug_block_pool_counts(const snug_block_pool *pool, snug_block_counts *out);

/* The bytes the allocator charges the pool of n_blocks blocks of
 * block_size positions; 0 when out of range. Pure. */
size_t snug_block_pool_bytes(int64_t n_blocks, int32_t block_size);

/* Makes a pool of n_blocks empty blocks (ids 0 .. n_blocks - 1, handed out
 * in that order) of block_size positions, caching on or off, in one block
 * of category other. Fails with SNUG_INVALID or SNUG_NOMEM; then nothing is
 * held. */
snug_status snug_block_pool_init(snug_block_pool *pool, int32_t n_blocks, int32_t block_size,
                                 bool caching, snug_error *err);

/* Lets blocks 0 .. n_ready - 1 be handed out (all of them after init).
 * Raising it makes blocks that have become resident empty blocks; lowering
 * it is only for a pool nothing has been taken from (a cache made resident
 * after the pool: init, then set_ready(0), then raise as it is populated). */
void snug_block_pool_set_ready(snug_block_pool *pool, int32_t n_ready);

/* Frees the pool's block; the pool may be zero-filled. */
void snug_block_pool_free(snug_block_pool *pool);

/* The hash of a full block holding tokens[0 .. block_size) after the block
 * whose hash is parent_hash (0 for a sequence's first block), under salt.
 * Pure (the pool's hash_mask is applied by the pool). */
uint64_t snug_block_hash(uint64_t parent_hash, uint64_t salt, const int32_t *tokens,
                         int32_t block_size);

/* The cached prefix of tokens[0 .. n_tokens) in whole blocks under salt:
 * writes the blocks' ids to ids (room for n_tokens / block_size) and
 * returns how many; *n_evictable gets how many of them have no reference
 * now (taking them lowers n_free). Reads only; 0 with caching off. */
int32_t snug_block_pool_match(const snug_block_pool *pool, const int32_t *tokens, int64_t n_tokens,
                              uint64_t salt, int32_t *ids, int32_t *n_evictable);

/* Drops every hash (blocks in use keep their contents for their tables;
 * the evictable ones become empty) and returns how many blocks had one. */
int32_t snug_block_pool_reset_cache(snug_block_pool *pool);

/* Checks the pool's invariants (counts against the arrays, the LRU list,
 * the buckets); false, with a message, on the first that fails. For tests. */
bool snug_block_pool_check(const snug_block_pool *pool, snug_error *err);

/* Makes an empty table for sequences of up to max_tokens positions in
 * blocks of block_size (its id array, category other). */
snug_status snug_block_table_init(snug_block_table *table, int64_t max_tokens,
                                  int32_t block_size, snug_error *err);

/* As snug_block_table_init, over storage the caller keeps (ids: cap
 * entries that outlive the table). Never fails, never allocates; do not
 * snug_block_table_free such a table. */
void snug_block_table_attach(snug_block_table *table, int32_t *ids, int32_t cap);

/* Frees the table's id array (its blocks must have been released); the
 * table may be zero-filled. */
void snug_block_table_free(snug_block_table *table);

/* The blocks needed to hold n_tokens positions. */
int32_t snug_blocks_for_tokens(int64_t n_tokens, int32_t block_size);

/* Takes a reference to each of the n blocks that snug_block_pool_match
 * wrote to the empty table's ids: the table then holds them. */
void snug_block_table_share(snug_block_table *table, snug_block_pool *pool, int32_t n);

/* Grows table until it covers n_tokens positions, taking empty blocks, then
 * evicting the least recently used cached ones. Returns false, changing
 * nothing, when the pool has too few free blocks or the table's capacity is
 * too small; the caller decides (wait, preempt). Never allocates. */
bool snug_block_table_grow(snug_block_table *table, snug_block_pool *pool, int64_t n_tokens,
                           int32_t block_size);

/* Registers the table's blocks that tokens[0 .. n_computed) fill, from
 * block *n_done on (the blocks before it were registered, found in the
 * cache or passed over), under salt; *n_done moves past them. A block
 * whose exact twin is already cached (the same prefix, computed by another
 * sequence at the same time) is replaced in the table by the twin, and
 * given back empty, so that the chain goes on from the twin. A block whose
 * parent has no hash (the cache was reset) is passed over. The table's ids
 * may change: call it between steps. No-op with caching off. */
void snug_block_table_register(snug_block_table *table, snug_block_pool *pool,
                               const int32_t *tokens, int64_t n_computed, uint64_t salt,
                               int32_t *n_done);

/* Gives every block of table back to pool and empties the table: a block
 * whose last reference this was becomes evictable when it is cached (last
 * block first), empty otherwise. Entries of -1 (given back already) are
 * passed over. */
void snug_block_table_release(snug_block_table *table, snug_block_pool *pool);

/* Gives back the table's blocks before entry n (those a sequence's window
 * has left behind), leaving -1 in their place: a cached one becomes the
 * first to be evicted. */
void snug_block_table_drop_front(snug_block_table *table, snug_block_pool *pool, int32_t n);

/* Fills the empty table with ids[0 .. n), -1 (a hole) or a block of pool,
 * taking a reference to each block (an evictable one leaves the LRU list). */
void snug_block_table_take(snug_block_table *table, snug_block_pool *pool, const int32_t *ids, int32_t n);

/* A window group's pool (a model whose windowed layers keep their keys and
 * values in blocks of their own, kvcache.h) finds its blocks through the
 * full group's: a block is linked to the full group's block of the same
 * positions and that block's generation, which identify a prefix exactly
 * (snug_block_pool_match's confirmation). snug_block_pool_link registers
 * window block b so (nothing when caching is off, b is cached already, or
 * another block is linked there: b then stays the sequence's own);
 * snug_block_pool_find_linked finds it again (-1: none). */
void snug_block_pool_link(snug_block_pool *pool, int32_t b, int32_t full, uint32_t full_gen);
int32_t snug_block_pool_find_linked(const snug_block_pool *pool, int32_t full, uint32_t full_gen);

#endif /* SNUG_BLOCKS_H */
