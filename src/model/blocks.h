/*
 * blocks.h: the block allocator of the paged KV cache and the block tables
 * of sequences.
 *
 * The cache is cut into n_blocks blocks of block_size token positions. A
 * pool hands out block ids from a free list (a stack: the most recently
 * freed block is reused first, while it is still warm in the caches); a
 * sequence's block table lists its blocks in position order, so position p
 * lives in block table->ids[p / block_size] at slot p % block_size.
 *
 * Nothing here allocates once made: the pool's free list and each table's
 * id array are sized at creation (a table for the longest sequence the
 * server accepts), and a growing sequence only moves block ids.
 */
#ifndef SNUG_BLOCKS_H
#define SNUG_BLOCKS_H

#include "base/common.h"

typedef struct snug_block_pool {
    int32_t n_blocks;
    int32_t n_free;
    int32_t *free_ids;   /* [n_blocks]; the first n_free are free, the top is the last */
} snug_block_pool;

typedef struct snug_block_table {
    int32_t *ids;        /* [cap] block ids in position order */
    int32_t n;           /* blocks held */
    int32_t cap;         /* most blocks this table can hold */
} snug_block_table;

/* Makes a pool of n_blocks free blocks (ids 0 .. n_blocks - 1; n_blocks >=
 * 0). The free list is charged to category other. */
snug_status snug_block_pool_init(snug_block_pool *pool, int32_t n_blocks, snug_error *err);

/* As snug_block_pool_init, over storage the caller keeps (ids: n_blocks
 * entries that outlive the pool; the serving state's, made up front).
 * Never fails, never allocates; do not snug_block_pool_free such a pool. */
void snug_block_pool_attach(snug_block_pool *pool, int32_t *ids, int32_t n_blocks);

/* Frees the pool's free list; the pool may be zero-filled. */
void snug_block_pool_free(snug_block_pool *pool);

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

/* Grows table until it covers n_tokens positions, taking blocks from pool.
 * Returns false, changing nothing, when the pool has too few free blocks or
 * the table's capacity is too small; the caller decides (wait, preempt).
 * Never allocates. */
bool snug_block_table_grow(snug_block_table *table, snug_block_pool *pool, int64_t n_tokens,
                           int32_t block_size);

/* Gives every block of table back to pool (in reverse order, so that the
 * sequence's first block is reused first) and empties the table. */
void snug_block_table_release(snug_block_table *table, snug_block_pool *pool);

#endif /* SNUG_BLOCKS_H */
