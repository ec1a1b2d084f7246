/*
 * populate.h: making a large block resident on a pool's threads.
 *
 * The allocator (mem.h) makes a large block resident on the thread that
 * asks for it; it cannot spread the work over threads itself, since the
 * pool (pool.h) allocates through it. Where a block is large and a pool is
 * at hand (the weights while they load, the activation arena, the KV
 * cache), its owner takes it from snug_mem_alloc_unpopulated and makes it
 * resident here, in pieces that whichever thread of the pool is free
 * takes. This module sits above both and neither calls it.
 */
#ifndef SNUG_POPULATE_H
#define SNUG_POPULATE_H

#include "common.h"
#include "pool.h"

/* Makes bytes [offset, offset + len) of block p (from snug_mem_alloc*)
 * resident and writable on the threads of pool (NULL, or a pool of one
 * thread: on the calling thread), in pieces of at most 64 MiB aligned to
 * 2 MiB (the huge pages), as many as four per thread where the range is
 * large enough to make pieces of 2 MiB; then records the resident set in
 * the event log (snug_mem_trace_populated). Uses one snug_pool_run, so
 * not from inside one. Fails with SNUG_INVALID when the range leaves the
 * block (nothing populated), SNUG_NOMEM when the system will not back a
 * piece (the first failure stops the pieces not yet begun; those done stay
 * resident). */
snug_status snug_populate_range(void *p, size_t offset, size_t len, snug_pool *pool, snug_error *err);

/* snug_mem_alloc(cat, n, err) with a large block made resident on pool's
 * threads (snug_populate_range over all of it). Charged alike; NULL and
 * err filled (SNUG_NOMEM) when either step fails, with nothing held. */
void *snug_populate_alloc(snug_mem_cat cat, size_t n, snug_pool *pool, snug_error *err);

#endif /* SNUG_POPULATE_H */
