/*
 * test_populate.c: a large block made resident on a pool's threads
 * (base/populate.h): every page of the range resident afterwards and none
 * far outside it (mincore, to the page), on the caller alone and on pools
 * of 1 and 2 threads; the block zeroed and charged as snug_mem_alloc
 * charges it; the RSS event in the log; the failures that a test can
 * reach (a range that leaves the block, an allocation that fails). The
 * system refusing to back a piece needs a memory cgroup's limit: not
 * reachable here.
 */
#include "test.h"

#include "base/mem.h"
#include "base/pool.h"
#include "base/populate.h"

#include <sys/mman.h>
#include <unistd.h>

enum { MIB = 1 << 20, HUGE = 2 * MIB };

static size_t page_bytes(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* Counts the resident pages of [from, to) (addresses rounded out to
 * pages), and how many there are. */
static size_t resident_pages(uintptr_t from, uintptr_t to, size_t *n_pages)
{
    size_t page = page_bytes();
    from -= from % page;
    to = snug_round_up(to, page);
    size_t n = (to - from) / page, got = 0;
    *n_pages = n;
    if (n == 0) return 0;
    unsigned char *vec = malloc(n);
    if (!vec || mincore((void *)from, to - from, vec) != 0) {
        CHECK(false, "mincore of %zu pages failed", n);
        free(vec);
        return 0;
    }
    for (size_t i = 0; i < n; i++) got += vec[i] & 1;
    free(vec);
    return got;
}

static snug_pool *pool_of(int32_t n)
{
    snug_error err = {0};
    snug_pool *p = NULL;
    if (n > 0) CHECK_OK(snug_pool_create(n, 0, &p, &err), &err);
    return p;
}

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 4096)
        if (p[i]) return false;
    return n == 0 || p[n - 1] == 0;
}

/* A range inside an unpopulated block: all of it resident, nothing outside
 * the huge pages it touches (a huge page is made resident whole). */
static void range_on(int32_t n_threads)
{
    snug_error err = {0};
    snug_pool *pool = pool_of(n_threads);
    size_t n = 48 * MIB + 12345;
    unsigned char *b = snug_mem_alloc_unpopulated(SNUG_MEM_OTHER, n, &err);
    CHECK(b != NULL, "unpopulated block of %zu: %s", n, err.msg);
    if (!b) goto done;
    size_t off = 5 * MIB + 777, len = 30 * MIB + 4321, pages;
    uintptr_t first = (uintptr_t)b + off, end = first + len;
    size_t before = resident_pages(first, end, &pages);
    CHECK(before < pages, "%d threads: %zu of %zu pages resident before", n_threads, before, pages);
    CHECK_OK(snug_populate_range(b, off, len, pool, &err), &err);
    size_t got = resident_pages(first, end, &pages);
    CHECK(got == pages, "%d threads: %zu of the range's %zu pages resident", n_threads, got, pages);
    uintptr_t lo = first - first % HUGE, hi = snug_round_up(end, HUGE);
    size_t outside = resident_pages(hi, (uintptr_t)b + n, &pages);
    CHECK(outside == 0, "%d threads: %zu of %zu pages past the range resident", n_threads, outside, pages);
    outside = resident_pages((uintptr_t)b + HUGE, lo, &pages); /* the header's huge page aside */
    CHECK(outside == 0, "%d threads: %zu of %zu pages before the range resident", n_threads, outside, pages);
    CHECK(all_zero(b + off, len), "%d threads: the range reads as zero", n_threads);
    b[off] = 1, b[off + len - 1] = 2; /* writable */
    CHECK_OK(snug_populate_range(b, off, len, pool, &err), &err); /* again: left as it is */
    CHECK(b[off] == 1 && b[off + len - 1] == 2, "%d threads: a second populate keeps the bytes", n_threads);
    CHECK_OK(snug_populate_range(b, n, 0, pool, &err), &err); /* empty, at the end */
    snug_mem_free(b);
done:
    snug_pool_free(pool);
}

static void test_range_caller(void) { range_on(0); }
static void test_range_one_thread(void) { range_on(1); }
static void test_range_two_threads(void) { range_on(2); }

/* snug_populate_alloc: the whole block resident, zeroed, charged exactly as
 * snug_mem_alloc charges it; a small block as from snug_mem_alloc. */
static void alloc_on(int32_t n_threads)
{
    snug_error err = {0};
    snug_pool *pool = pool_of(n_threads);
    size_t n = 40 * MIB + 64, cur0 = 0, cur1 = 0, pages;
    snug_mem_status(SNUG_MEM_KV, &cur0, NULL, false);
    unsigned char *b = snug_populate_alloc(SNUG_MEM_KV, n, pool, &err);
    CHECK(b != NULL, "%d threads: %s", n_threads, err.msg);
    if (b) {
        snug_mem_status(SNUG_MEM_KV, &cur1, NULL, false);
        CHECK(cur1 - cur0 == snug_mem_held_bytes(n) && snug_mem_block_bytes(b) == snug_mem_held_bytes(n),
              "%d threads: charged %zu, held %zu, expected %zu", n_threads, cur1 - cur0,
              snug_mem_block_bytes(b), snug_mem_held_bytes(n));
        size_t got = resident_pages((uintptr_t)b, (uintptr_t)b + n, &pages);
        CHECK(got == pages, "%d threads: %zu of %zu pages resident", n_threads, got, pages);
        CHECK(all_zero(b, n), "%d threads: zero-filled", n_threads);
        snug_mem_free(b);
    }
    unsigned char *s = snug_populate_alloc(SNUG_MEM_KV, 1000, pool, &err);
    CHECK(s && all_zero(s, 1000), "%d threads: a small block: %s", n_threads, err.msg);
    snug_mem_free(s);
    snug_pool_free(pool);
}

static void test_alloc_caller(void) { alloc_on(0); }
static void test_alloc_one_thread(void) { alloc_on(1); }
static void test_alloc_two_threads(void) { alloc_on(2); }

/* The event log has the resident set after the pool populated the block. */
static void test_trace_event(void)
{
    snug_error err = {0};
    snug_pool *pool = pool_of(2);
    size_t n = 32 * MIB;
    CHECK_OK(snug_mem_trace_start(16, &err), &err);
    void *b = snug_populate_alloc(SNUG_MEM_ACTIVATIONS, n, pool, &err);
    CHECK(b != NULL, "%s", err.msg);
    snug_mem_trace t;
    snug_mem_trace_get(&t);
    /* the allocator's: charged (RSS before), returned unpopulated; then populate.c's */
    CHECK(t.n_events == 3, "%zu events", t.n_events);
    if (t.n_events == 3) {
        const snug_mem_event *e = t.events;
        CHECK(e[0].kind == SNUG_MEM_EVENT_ALLOC && e[1].kind == SNUG_MEM_EVENT_RSS &&
              e[2].kind == SNUG_MEM_EVENT_RSS && e[2].cat == SNUG_MEM_ACTIVATIONS,
              "kinds %u %u %u, last category %u", e[0].kind, e[1].kind, e[2].kind, e[2].cat);
        CHECK(e[2].rss >= e[0].rss + n - MIB, "populated: RSS %zu after, %zu before a block of %zu",
              e[2].rss, e[0].rss, n);
    }
    snug_mem_free(b);
    snug_mem_trace_stop();
    snug_pool_free(pool);
}

/* A range that leaves the block: refused before anything is populated. */
static void test_range_outside(void)
{
    snug_error err = {0};
    snug_pool *pool = pool_of(2);
    size_t n = 8 * MIB, pages;
    unsigned char *b = snug_mem_alloc_unpopulated(SNUG_MEM_OTHER, n, &err);
    CHECK(b != NULL, "%s", err.msg);
    if (b) {
        size_t size = snug_mem_block_bytes(b) - SNUG_MEM_HEADER_BYTES;
        CHECK_FAILS(snug_populate_range(b, HUGE, size, pool, &err), &err, SNUG_INVALID, "populate: bytes");
        CHECK_FAILS(snug_populate_range(b, SIZE_MAX, 2, pool, &err), &err, SNUG_INVALID, "of a block of");
        size_t got = resident_pages((uintptr_t)b + HUGE, (uintptr_t)b + n, &pages);
        CHECK(got == 0, "nothing populated: %zu of %zu pages resident", got, pages);
        snug_mem_free(b);
    }
    snug_pool_free(pool);
}

/* An allocation that fails (fault injection, or past the capacity): NULL,
 * SNUG_NOMEM with its message, nothing held. */
static snug_status alloc_op(void *ctx, snug_error *err)
{
    void *b = snug_populate_alloc(SNUG_MEM_OTHER, 4 * MIB, ctx, err);
    snug_mem_free(b);
    return b ? SNUG_OK : err->status;
}

static void test_alloc_fails(void)
{
    snug_pool *pool = pool_of(2);
    /* the pool holds a block of its own: the loop's baseline includes it */
    CHECK(test_oom_loop("populate_alloc", alloc_op, NULL, pool, 4) == 1, "one allocation");
    snug_error err = {0};
    size_t cap = snug_mem_capacity(), cur = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &cur, NULL, false);
    snug_mem_set_capacity(cur + MIB);
    void *b = snug_populate_alloc(SNUG_MEM_OTHER, 4 * MIB, pool, &err);
    CHECK(!b && err.status == SNUG_NOMEM && strstr(err.msg, "capacity"), "past the capacity: %s", err.msg);
    snug_mem_set_capacity(cap);
    snug_pool_free(pool);
}

int main(void)
{
    RUN(test_range_caller);
    RUN(test_range_one_thread);
    RUN(test_range_two_threads);
    RUN(test_alloc_caller);
    RUN(test_alloc_one_thread);
    RUN(test_alloc_two_threads);
    RUN(test_trace_event);
    RUN(test_range_outside);
    RUN(test_alloc_fails);
    return test_summary();
}
