/*
 * blocks.c: the KV cache's block pool (a stack of free ids) and per-sequence
 * block tables.
 */
#include "blocks.h"

#include "base/device.h"

void snug_block_pool_attach(snug_block_pool *pool, int32_t *ids, int32_t n_blocks)
{
    SNUG_ASSERT(n_blocks >= 0);
    *pool = (snug_block_pool){.free_ids = ids};
    /* Pushed in reverse so that block 0 is handed out first. */
    for (int32_t i = 0; i < n_blocks; i++) pool->free_ids[i] = n_blocks - 1 - i;
    pool->n_blocks = pool->n_free = n_blocks;
}

snug_status snug_block_pool_init(snug_block_pool *pool, int32_t n_blocks, snug_error *err)
{
    *pool = (snug_block_pool){0};
    if (n_blocks < 0) return snug_errorf(err, SNUG_INVALID, "block pool: %d blocks", n_blocks);
    int32_t *ids = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_blocks * sizeof(int32_t), err);
    if (!ids) return snug_error_prefix(err, SNUG_NOMEM, "block pool: ");
    snug_block_pool_attach(pool, ids, n_blocks);
    return SNUG_OK;
}

void snug_block_pool_free(snug_block_pool *pool)
{
    snug_mem_free(pool->free_ids);
    *pool = (snug_block_pool){0};
}

int32_t snug_blocks_for_tokens(int64_t n_tokens, int32_t block_size)
{
    return (int32_t)((n_tokens + block_size - 1) / block_size);
}

snug_status snug_block_table_init(snug_block_table *table, int64_t max_tokens,
                                  int32_t block_size, snug_error *err)
{
    *table = (snug_block_table){0};
    if (block_size < 1 || max_tokens < 1 || max_tokens > INT32_MAX)
        return snug_errorf(err, SNUG_INVALID, "block table: %lld tokens in blocks of %d",
                           (long long)max_tokens, block_size);
    int32_t cap = snug_blocks_for_tokens(max_tokens, block_size);
    table->ids = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)cap * sizeof(int32_t), err);
    if (!table->ids) return snug_error_prefix(err, SNUG_NOMEM, "block table: ");
    table->cap = cap;
    return SNUG_OK;
}

void snug_block_table_attach(snug_block_table *table, int32_t *ids, int32_t cap)
{
    SNUG_ASSERT(cap >= 0);
    *table = (snug_block_table){.ids = ids, .cap = cap};
}

void snug_block_table_free(snug_block_table *table)
{
    SNUG_ASSERT(table->n == 0);
    snug_mem_free(table->ids);
    *table = (snug_block_table){0};
}

bool snug_block_table_grow(snug_block_table *table, snug_block_pool *pool, int64_t n_tokens,
                           int32_t block_size)
{
    if (n_tokens > (int64_t)table->cap * block_size) return false;
    int32_t need = snug_blocks_for_tokens(n_tokens, block_size);
    if (need <= table->n) return true;
    if (need - table->n > pool->n_free) return false;
    while (table->n < need) table->ids[table->n++] = pool->free_ids[--pool->n_free];
    return true;
}

void snug_block_table_release(snug_block_table *table, snug_block_pool *pool)
{
    while (table->n > 0) {
        SNUG_ASSERT(pool->n_free < pool->n_blocks);
        pool->free_ids[pool->n_free++] = table->ids[--table->n];
    }
}
