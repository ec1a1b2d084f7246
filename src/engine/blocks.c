/*
 * blocks.c: the KV cache's block pool with prefix caching, and the
 * sequences' block tables (blocks.h).
 */
#include "blocks.h"

#include "base/mem.h"
#include "base/rng.h"

#include <string.h>

/* ---- the pool's one block ---------------------------------------------------- */

/* Where each array lives in the pool's block; every array 64-byte aligned. */
typedef struct pool_layout {
    size_t empty_ids, ref, hash, salt, gen, parent, parent_gen, lru_prev, lru_next, chain;
    size_t bucket, hashed, tokens, total;
} pool_layout;

/* An array of n elements of each bytes, as one part of the block. */
static bool take(size_t *at, size_t n, size_t each, size_t *where)
{
    size_t bytes;
    return snug_mul_size(n, each, &bytes) && snug_mem_carve(at, bytes, 1, where);
}

static bool pool_carve(int64_t n_blocks, int32_t block_size, pool_layout *l)
{
    memset(l, 0, sizeof *l);
    if (n_blocks < 0 || n_blocks > INT32_MAX || block_size < 1) return false;
    size_t n = (size_t)n_blocks, at = 0, per_block_tokens;
    if (!snug_mul_size(n, (size_t)block_size, &per_block_tokens)) return false;
    bool ok = take(&at, n, sizeof(int32_t), &l->empty_ids) &&
              take(&at, n, sizeof(int32_t), &l->ref) &&
              take(&at, n, sizeof(uint64_t), &l->hash) &&
              take(&at, n, sizeof(uint64_t), &l->salt) &&
              take(&at, n, sizeof(uint32_t), &l->gen) &&
              take(&at, n, sizeof(int32_t), &l->parent) &&
              take(&at, n, sizeof(uint32_t), &l->parent_gen) &&
              take(&at, n, sizeof(int32_t), &l->lru_prev) &&
              take(&at, n, sizeof(int32_t), &l->lru_next) &&
              take(&at, n, sizeof(int32_t), &l->chain) &&
              take(&at, SNUG_MAX(n, (size_t)1), sizeof(int32_t), &l->bucket) &&
              take(&at, n, sizeof(uint8_t), &l->hashed) &&
              take(&at, per_block_tokens, sizeof(int32_t), &l->tokens);
    /* at least a large block, so that what it is charged is exactly known */
    l->total = SNUG_MAX(at, (size_t)SNUG_MEM_LARGE_BYTES);
    return ok;
}

size_t snug_block_pool_bytes(int64_t n_blocks, int32_t block_size)
{
    pool_layout l;
    return pool_carve(n_blocks, block_size, &l) ? snug_mem_held_bytes(l.total) : 0;
}

snug_status snug_block_pool_init(snug_block_pool *pool, int32_t n_blocks, int32_t block_size,
                                 bool caching, snug_error *err)
{
    *pool = (snug_block_pool){0};
    pool_layout l;
    if (!pool_carve(n_blocks, block_size, &l))
        return snug_errorf(err, SNUG_INVALID, "block pool: %d blocks of %d positions",
                           n_blocks, block_size);
    unsigned char *b = snug_mem_alloc(SNUG_MEM_OTHER, l.total, err);
    if (!b) return snug_error_prefix(err, SNUG_NOMEM, "block pool: ");
    snug_block_pool p = {
        .n_blocks = n_blocks, .block_size = block_size, .caching = caching,
        .n_ready = n_blocks, .n_free = n_blocks, .n_empty = n_blocks, .hash_mask = UINT64_MAX,
        .lru_head = -1, .lru_tail = -1, .n_buckets = SNUG_MAX(n_blocks, 1), .block = b,
        .empty_ids = (int32_t *)(b + l.empty_ids), .ref = (int32_t *)(b + l.ref),
        .hash = (uint64_t *)(b + l.hash), .salt = (uint64_t *)(b + l.salt),
        .gen = (uint32_t *)(b + l.gen), .parent = (int32_t *)(b + l.parent),
        .parent_gen = (uint32_t *)(b + l.parent_gen), .lru_prev = (int32_t *)(b + l.lru_prev),
        .lru_next = (int32_t *)(b + l.lru_next), .chain = (int32_t *)(b + l.chain),
        .bucket = (int32_t *)(b + l.bucket), .hashed = b + l.hashed,
        .tokens = (int32_t *)(b + l.tokens)};
    /* pushed in reverse so that block 0 is handed out first */
    for (int32_t i = 0; i < n_blocks; i++) {
        p.empty_ids[i] = n_blocks - 1 - i;
        p.ref[i] = 0;
        p.gen[i] = 0;
        p.hashed[i] = 0;
        p.chain[i] = p.lru_prev[i] = p.lru_next[i] = -1;
    }
    for (int32_t i = 0; i < p.n_buckets; i++) p.bucket[i] = -1;
    *pool = p;
    return SNUG_OK;
}

void snug_block_pool_set_ready(snug_block_pool *pool, int32_t n_ready)
{
    SNUG_ASSERT(n_ready >= 0 && n_ready <= pool->n_blocks);
    if (n_ready < pool->n_ready) { /* only a pool nothing was taken from */
        SNUG_ASSERT(pool->n_empty == pool->n_ready && pool->n_free == pool->n_empty);
        for (int32_t i = 0; i < n_ready; i++) pool->empty_ids[i] = n_ready - 1 - i;
        pool->n_empty = pool->n_free = pool->n_ready = n_ready;
        return;
    }
    /* the lowest of the new blocks on top: handed out in id order */
    for (int32_t b = n_ready - 1; b >= pool->n_ready; b--) pool->empty_ids[pool->n_empty++] = b;
    pool->n_free += n_ready - pool->n_ready;
    pool->n_ready = n_ready;
}

void snug_block_pool_counts(const snug_block_pool *pool, snug_block_counts *out)
{
    *out = (snug_block_counts){.total = pool->n_blocks, .ready = pool->n_ready,
                               .used = pool->n_ready - pool->n_free, .cached = pool->n_cached,
                               .evictable = pool->n_evictable, .evictions = pool->n_evictions,
                               .caching = pool->caching};
}

void snug_block_pool_free(snug_block_pool *pool)
{
    snug_mem_free(pool->block);
    *pool = (snug_block_pool){0};
}

/* ---- hashing and the table of cached blocks ---------------------------------- */

uint64_t snug_block_hash(uint64_t parent_hash, uint64_t salt, const int32_t *tokens,
                         int32_t block_size)
{
    uint64_t h = snug_mix64(parent_hash ^ 0x9e3779b97f4a7c15ull) ^ snug_mix64(salt + 0x632be59bd9b4e019ull);
    for (int32_t i = 0; i < block_size; i++)
        h = snug_mix64(h + (uint64_t)(uint32_t)tokens[i] + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
    return h;
}

static int32_t bucket_of(const snug_block_pool *pool, uint64_t hash)
{
    return (int32_t)(hash % (uint64_t)pool->n_buckets);
}

/* The registered block with hash holding tokens after the block parent
 * (generation parent_gen; -1: first) under salt; -1 when none. */
static int32_t find(const snug_block_pool *pool, uint64_t hash, int32_t parent, uint32_t parent_gen,
                    uint64_t salt, const int32_t *tokens)
{
    size_t bytes = (size_t)pool->block_size * sizeof(int32_t);
    for (int32_t b = pool->bucket[bucket_of(pool, hash)]; b >= 0; b = pool->chain[b]) {
        if (pool->hash[b] != hash || pool->salt[b] != salt || pool->parent[b] != parent) continue;
        if (parent >= 0 && pool->parent_gen[b] != parent_gen) continue;
        if (memcmp(pool->tokens + (size_t)b * (size_t)pool->block_size, tokens, bytes) == 0)
            return b;
    }
    return -1;
}

/* Takes block b's hash away: out of its bucket, its generation moved on. */
static void unhash(snug_block_pool *pool, int32_t b)
{
    int32_t *link = &pool->bucket[bucket_of(pool, pool->hash[b])];
    while (*link != b) link = &pool->chain[*link];
    *link = pool->chain[b];
    pool->chain[b] = -1;
    pool->hashed[b] = 0;
    pool->gen[b]++;
    pool->n_cached--;
}

static void lru_remove(snug_block_pool *pool, int32_t b)
{
    int32_t prev = pool->lru_prev[b], next = pool->lru_next[b];
    if (prev >= 0) pool->lru_next[prev] = next; else pool->lru_head = next;
    if (next >= 0) pool->lru_prev[next] = prev; else pool->lru_tail = prev;
    pool->lru_prev[b] = pool->lru_next[b] = -1;
    pool->n_evictable--;
}

/* Puts b first on the LRU list: the first evicted. */
static void lru_prepend(snug_block_pool *pool, int32_t b)
{
    pool->lru_next[b] = pool->lru_head;
    pool->lru_prev[b] = -1;
    if (pool->lru_head >= 0) pool->lru_prev[pool->lru_head] = b; else pool->lru_tail = b;
    pool->lru_head = b;
    pool->n_evictable++;
}

static void lru_append(snug_block_pool *pool, int32_t b)
{
    pool->lru_prev[b] = pool->lru_tail;
    pool->lru_next[b] = -1;
    if (pool->lru_tail >= 0) pool->lru_next[pool->lru_tail] = b; else pool->lru_head = b;
    pool->lru_tail = b;
    pool->n_evictable++;
}

int32_t snug_block_pool_match(const snug_block_pool *pool, const int32_t *tokens, int64_t n_tokens,
                              uint64_t salt, int32_t *ids, int32_t *n_evictable)
{
    int32_t n = 0, bs = pool->block_size;
    *n_evictable = 0;
    if (!pool->caching || pool->n_cached == 0) return 0;
    uint64_t h = 0;
    int32_t parent = -1;
    for (int64_t at = 0; at + bs <= n_tokens; at += bs) {
        const int32_t *t = tokens + at;
        h = snug_block_hash(h, salt, t, bs) & pool->hash_mask;
        int32_t b = find(pool, h, parent, parent >= 0 ? pool->gen[parent] : 0, salt, t);
        if (b < 0) break;
        ids[n++] = b;
        *n_evictable += pool->ref[b] == 0;
        parent = b;
    }
    return n;
}

int32_t snug_block_pool_reset_cache(snug_block_pool *pool)
{
    int32_t dropped = 0;
    for (int32_t b = 0; b < pool->n_blocks; b++) {
        if (!pool->hashed[b]) continue;
        if (pool->ref[b] == 0) {
            lru_remove(pool, b);
            pool->empty_ids[pool->n_empty++] = b;
        }
        unhash(pool, b);
        dropped++;
    }
    return dropped;
}

bool snug_block_pool_check(const snug_block_pool *pool, snug_error *err)
{
    int32_t refd = 0, cached = 0, on_lru = 0, in_buckets = 0;
    for (int32_t b = 0; b < pool->n_blocks; b++) {
        if (pool->ref[b] < 0)
            return snug_errorf(err, SNUG_INTERNAL, "block %d: reference count %d", b, pool->ref[b]), false;
        if (b >= pool->n_ready && (pool->ref[b] != 0 || pool->hashed[b]))
            return snug_errorf(err, SNUG_INTERNAL, "block %d is not ready (of %d) but in use or "
                               "cached", b, pool->n_ready), false;
        refd += pool->ref[b] > 0;
        cached += pool->hashed[b];
    }
    for (int32_t b = pool->lru_head, prev = -1; b >= 0; prev = b, b = pool->lru_next[b]) {
        if (pool->ref[b] != 0 || !pool->hashed[b] || pool->lru_prev[b] != prev || ++on_lru > pool->n_blocks)
            return snug_errorf(err, SNUG_INTERNAL, "LRU list: block %d (ref %d, hashed %d)", b,
                               pool->ref[b], pool->hashed[b]), false;
    }
    for (int32_t k = 0; k < pool->n_buckets; k++)
        for (int32_t b = pool->bucket[k]; b >= 0; b = pool->chain[b])
            if (!pool->hashed[b] || bucket_of(pool, pool->hash[b]) != k || ++in_buckets > pool->n_blocks)
                return snug_errorf(err, SNUG_INTERNAL, "hash bucket %d: block %d", k, b), false;
    for (int32_t i = 0; i < pool->n_empty; i++) {
        int32_t b = pool->empty_ids[i];
        if (b < 0 || b >= pool->n_ready || pool->ref[b] != 0 || pool->hashed[b])
            return snug_errorf(err, SNUG_INTERNAL, "empty block %d is in use or cached", b), false;
    }
    if (cached != pool->n_cached || in_buckets != cached || on_lru != pool->n_evictable ||
        pool->n_free != pool->n_empty + pool->n_evictable ||
        pool->n_empty + pool->n_evictable + refd != pool->n_ready)
        return snug_errorf(err, SNUG_INTERNAL, "block pool counts: %d ready blocks = %d empty + %d "
                           "evictable + %d referenced?; cached %d (counted %d, in buckets %d), "
                           "free %d, on the LRU list %d", pool->n_ready, pool->n_empty,
                           pool->n_evictable, refd, cached, pool->n_cached, in_buckets,
                           pool->n_free, on_lru), false;
    return true;
}

/* ---- tables ------------------------------------------------------------------- */

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

void snug_block_table_share(snug_block_table *table, snug_block_pool *pool, int32_t n)
{
    SNUG_ASSERT(table->n == 0 && n <= table->cap);
    for (int32_t i = 0; i < n; i++) {
        int32_t b = table->ids[i];
        SNUG_ASSERT(pool->hashed[b]);
        if (pool->ref[b]++ == 0) {
            lru_remove(pool, b);
            pool->n_free--;
        }
    }
    table->n = n;
}

/* Takes a block for new contents: an empty one, else the least recently
 * used cached one (its hash dropped). The pool has a free block. */
static int32_t take_block(snug_block_pool *pool)
{
    int32_t b;
    if (pool->n_empty > 0) {
        b = pool->empty_ids[--pool->n_empty];
    } else {
        b = pool->lru_head;
        SNUG_ASSERT(b >= 0);
        lru_remove(pool, b);
        unhash(pool, b);
        pool->n_evictions++;
    }
    pool->n_free--;
    pool->ref[b] = 1;
    return b;
}

bool snug_block_table_grow(snug_block_table *table, snug_block_pool *pool, int64_t n_tokens,
                           int32_t block_size)
{
    if (n_tokens > (int64_t)table->cap * block_size) return false;
    int32_t need = snug_blocks_for_tokens(n_tokens, block_size);
    if (need <= table->n) return true;
    if (need - table->n > pool->n_free) return false;
    while (table->n < need) table->ids[table->n++] = take_block(pool);
    return true;
}

void snug_block_table_register(snug_block_table *table, snug_block_pool *pool,
                               const int32_t *tokens, int64_t n_computed, uint64_t salt,
                               int32_t *n_done)
{
    if (!pool->caching) return;
    int32_t bs = pool->block_size;
    int64_t full = SNUG_MIN(n_computed / bs, (int64_t)table->n);
    for (int32_t i = *n_done; i < full; i++) {
        int32_t b = table->ids[i], parent = i > 0 ? table->ids[i - 1] : -1;
        if (pool->hashed[b]) continue; /* found in the cache */
        if (parent >= 0 && !pool->hashed[parent]) continue; /* its prefix is not findable */
        const int32_t *t = tokens + (int64_t)i * bs;
        uint64_t h = snug_block_hash(parent >= 0 ? pool->hash[parent] : 0, salt, t, bs) &
                     pool->hash_mask;
        uint32_t pg = parent >= 0 ? pool->gen[parent] : 0;
        int32_t twin = find(pool, h, parent, pg, salt, t);
        if (twin >= 0) { /* computed twice (admitted together): keep the cached one */
            if (pool->ref[twin]++ == 0) {
                lru_remove(pool, twin);
                pool->n_free--;
            }
            table->ids[i] = twin;
            SNUG_ASSERT(pool->ref[b] == 1); /* unhashed: this table's alone */
            pool->ref[b] = 0;
            pool->empty_ids[pool->n_empty++] = b;
            pool->n_free++;
            continue;
        }
        pool->hash[b] = h;
        pool->salt[b] = salt;
        pool->parent[b] = parent;
        pool->parent_gen[b] = pg;
        memcpy(pool->tokens + (size_t)b * (size_t)bs, t, (size_t)bs * sizeof(int32_t));
        int32_t k = bucket_of(pool, h);
        pool->chain[b] = pool->bucket[k];
        pool->bucket[k] = b;
        pool->hashed[b] = 1;
        pool->n_cached++;
    }
    if (full > *n_done) *n_done = (int32_t)full;
}

/* Gives a table's reference to b back: at the last, b becomes evictable
 * when cached (the first evicted when `early`, else the last), empty
 * otherwise. */
static void give_back(snug_block_pool *pool, int32_t b, bool early)
{
    SNUG_ASSERT(pool->ref[b] > 0);
    if (--pool->ref[b] > 0) return;
    if (pool->hashed[b] && pool->caching) {
        if (early) lru_prepend(pool, b);
        else lru_append(pool, b);
    } else {
        if (pool->hashed[b]) unhash(pool, b);
        pool->empty_ids[pool->n_empty++] = b;
    }
    pool->n_free++;
}

void snug_block_table_release(snug_block_table *table, snug_block_pool *pool)
{
    while (table->n > 0) {
        int32_t b = table->ids[--table->n];
        if (b >= 0) give_back(pool, b, false);
    }
}

void snug_block_table_drop_front(snug_block_table *table, snug_block_pool *pool, int32_t n)
{
    for (int32_t i = 0; i < SNUG_MIN(n, table->n); i++)
        if (table->ids[i] >= 0) {
            give_back(pool, table->ids[i], true);
            table->ids[i] = -1;
        }
}

void snug_block_table_take(snug_block_table *table, snug_block_pool *pool, const int32_t *ids, int32_t n)
{
    SNUG_ASSERT(table->n == 0 && n <= table->cap);
    for (int32_t i = 0; i < n; i++) {
        int32_t b = ids[i];
        table->ids[i] = b;
        if (b >= 0 && pool->ref[b]++ == 0) {
            lru_remove(pool, b);
            pool->n_free--;
        }
    }
    table->n = n;
}

/* ---- a window group's pool: blocks found through the full group's ------------- */

/* The hash a window-group block is linked under: the full group's block of
 * the same positions and its generation. */
static uint64_t link_hash(const snug_block_pool *pool, int32_t full, uint32_t full_gen)
{
    return snug_mix64(((uint64_t)(uint32_t)full << 32 | full_gen) ^ 0x51ed2701f3a5c7b9ull) & pool->hash_mask;
}

int32_t snug_block_pool_find_linked(const snug_block_pool *pool, int32_t full, uint32_t full_gen)
{
    if (!pool->caching || pool->n_cached == 0) return -1;
    uint64_t h = link_hash(pool, full, full_gen);
    for (int32_t b = pool->bucket[bucket_of(pool, h)]; b >= 0; b = pool->chain[b])
        if (pool->hash[b] == h && pool->parent[b] == full && pool->parent_gen[b] == full_gen) return b;
    return -1;
}

void snug_block_pool_link(snug_block_pool *pool, int32_t b, int32_t full, uint32_t full_gen)
{
    if (!pool->caching || pool->hashed[b] || snug_block_pool_find_linked(pool, full, full_gen) >= 0) return;
    uint64_t h = link_hash(pool, full, full_gen);
    pool->hash[b] = h;
    pool->salt[b] = 0;
    pool->parent[b] = full;
    pool->parent_gen[b] = full_gen;
    int32_t k = bucket_of(pool, h);
    pool->chain[b] = pool->bucket[k];
    pool->bucket[k] = b;
    pool->hashed[b] = 1;
    pool->n_cached++;
}
