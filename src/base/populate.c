/*
 * populate.c: a block's range cut into pieces that a pool's threads make
 * resident, each through snug_mem_populate.
 *
 * Why on all threads: the kernel zeroes each page it backs, and a thread
 * does that at a fraction of the memory's bandwidth. Measured on the 2-core
 * VM (Dec 2026, other jobs beside it; median of 5, interleaved), a block of
 * 2.47 GB (a Llama-3.2-1B's bf16 weights): the calling thread alone 0.45 s,
 * a pool of 2 threads 0.19 s (the OpenMP region that did it before, 2
 * threads: 0.18 s); 457 MiB (its activation arena): 0.065, 0.036 and
 * 0.045 s; 156 MiB (its serving state, left to the allocator: the 8 ms do
 * not matter): 0.022, 0.014 and 0.017 s. Earlier, 2.5 GB: MAP_POPULATE
 * 0.55 GB/s, one thread touching 4 KiB pages 0.58, both threads populating
 * 4 KiB pages 3.6-4.1, huge pages 1.2 (the kernel compacting memory to find
 * them) to 11.7.
 */
#include "populate.h"

#include "mem.h"

#include <stdatomic.h>

enum {
    PIECE_MIN = 2 << 20,    /* a huge page: pieces begin on their boundaries */
    PIECE_MAX = 64 << 20,   /* a piece is at most this (one madvise call) */
    PIECES_PER_THREAD = 4   /* with dynamic taking, evens out threads slowed by others */
};

/* One populate: pieces of `piece` bytes from base (the range's first byte
 * rounded down to PIECE_MIN), each cut to the range [first, end). */
typedef struct populate_job {
    void *block;            /* the block, as snug_mem_populate takes it */
    uintptr_t first, end;
    uintptr_t base;
    size_t piece;
    int64_t n_pieces;
    snug_pool *pool;
    atomic_int failed;
    snug_error why;         /* the first failure's */
} populate_job;

static void populate_pieces(void *ctx, int32_t thread, int32_t n_threads)
{
    (void)thread;
    populate_job *j = ctx;
    for (int64_t i = 0; i < j->n_pieces; i++) {
        int64_t k = n_threads > 1 ? snug_pool_next(j->pool, j->n_pieces) : i;
        if (k < 0 || atomic_load(&j->failed)) break; /* given up: take no more memory */
        uintptr_t lo = SNUG_MAX(j->first, j->base + (uintptr_t)k * j->piece);
        uintptr_t hi = SNUG_MIN(j->end, j->base + (uintptr_t)(k + 1) * j->piece);
        snug_error e;
        if (snug_mem_populate(j->block, lo - (uintptr_t)j->block, hi - lo, &e) != SNUG_OK &&
            atomic_exchange(&j->failed, 1) == 0)
            j->why = e;
    }
}

snug_status snug_populate_range(void *p, size_t offset, size_t len, snug_pool *pool, snug_error *err)
{
    size_t size = snug_mem_block_bytes(p) - SNUG_MEM_HEADER_BYTES, end;
    if (!snug_add_size(offset, len, &end) || end > size)
        return snug_errorf(err, SNUG_INVALID, "populate: bytes %zu + %zu of a block of %zu", offset, len,
                           size);
    if (len == 0) return SNUG_OK;
    int32_t n_threads = pool ? snug_pool_threads(pool) : 1;
    populate_job j = {.block = p, .first = (uintptr_t)p + offset, .pool = pool};
    j.end = j.first + len;
    j.base = j.first - j.first % PIECE_MIN;
    size_t span = (size_t)(j.end - j.base);
    j.piece = n_threads == 1 ? (size_t)PIECE_MAX
                             : snug_round_up(span / ((size_t)n_threads * PIECES_PER_THREAD), PIECE_MIN);
    j.piece = SNUG_MAX((size_t)PIECE_MIN, SNUG_MIN((size_t)PIECE_MAX, j.piece));
    j.n_pieces = (int64_t)((span + j.piece - 1) / j.piece);
    atomic_init(&j.failed, 0);
    if (n_threads > 1 && j.n_pieces > 1)
        snug_pool_run(pool, populate_pieces, &j);
    else
        populate_pieces(&j, 0, 1);
    snug_mem_trace_populated(p);
    if (!atomic_load(&j.failed)) return SNUG_OK;
    if (err) *err = j.why;
    return j.why.status;
}

void *snug_populate_alloc(snug_mem_cat cat, size_t n, snug_pool *pool, snug_error *err)
{
    void *p = snug_mem_alloc_unpopulated(cat, n, err);
    if (!p || n < SNUG_MEM_LARGE_BYTES) return p; /* a small block is resident already */
    if (snug_populate_range(p, 0, n, pool, err) == SNUG_OK) return p;
    snug_mem_free(p);
    return NULL;
}
