/*
 * mem.h: the accounting allocator (the public half of the API is in
 * snug.h; the process's memory as the kernel sees it is read by sysinfo.h).
 *
 * Every byte snug allocates comes from snug_mem_alloc and is charged to one
 * category. The counters are exact: they are updated inside the allocator in
 * the same step as the allocation, with atomics, so that threads can allocate
 * concurrently and the peak never misses a spike.
 *
 * What a block holds (and is charged):
 *   small (request < SNUG_MEM_LARGE_BYTES): from the C library, 64-byte
 *     aligned; it asks for a 64-byte header plus the request rounded up to
 *     64 bytes and is charged what the library really holds for that (the
 *     chunk's usable size plus its size word: with glibc, at most 64
 *     bytes more);
 *   large: the header plus the request rounded up to whole pages, from mmap,
 *     populated (every page resident) on the calling thread before it is
 *     returned, and given back to the system by snug_mem_free; charged
 *     exactly that. A large block that a pool is at hand for is made
 *     resident on the pool's threads instead (populate.h: 2.4x as fast on
 *     2 cores for the weights), from snug_mem_alloc_unpopulated.
 * All memory returned is zero-filled and 64-byte aligned.
 */
#ifndef SNUG_MEM_H
#define SNUG_MEM_H

#include "common.h"

enum {
    SNUG_MEM_ALIGN = 64,                 /* alignment of every block */
    SNUG_MEM_HEADER_BYTES = 64,          /* bookkeeping in front of a block */
    SNUG_MEM_LARGE_BYTES = 64 * 1024     /* from here on, blocks come from mmap */
};

/* Carving one block into parts: count parts of size bytes each, every one
 * starting SNUG_MEM_ALIGN-aligned, at offset *at; *first gets where the
 * first begins and *at moves past the last. False on overflow. Pure. */
static inline bool snug_mem_carve(size_t *at, size_t size, size_t count, size_t *first)
{
    size_t bytes;
    if (!snug_mul_size(snug_round_up(size, SNUG_MEM_ALIGN), count, &bytes)) return false;
    *first = *at;
    return snug_add_size(*at, bytes, at);
}

/* Allocates n zeroed bytes charged to cat. Returns NULL and fills err (which
 * may be NULL) with SNUG_NOMEM when the request would take the total past
 * the capacity (the message names the category, the request, the capacity
 * and what each category holds), when fault injection selects this
 * allocation, or when the system has no memory. n = 0 gives a valid block. */
void *snug_mem_alloc(snug_mem_cat cat, size_t n, snug_error *err);

/* As snug_mem_alloc, charged alike, but a large block (SNUG_MEM_LARGE_BYTES
 * and up) is left for snug_mem_populate to make resident, piece by piece,
 * when its owner chooses (a KV cache made resident while serving begins);
 * until then its pages read as zero and the resident set does not hold
 * them. A small block is resident at once, as from snug_mem_alloc. */
void *snug_mem_alloc_unpopulated(snug_mem_cat cat, size_t n, snug_error *err);

/* Makes bytes [offset, offset + len) of block p (from snug_mem_alloc*)
 * resident and writable, on the calling thread (callers spread ranges over
 * threads: populate.h on a pool's, the KV cache a layer at a time on the
 * model's pool). Fails with SNUG_INVALID when the range leaves the block,
 * SNUG_NOMEM when the system will not back the pages (part of them may be
 * resident then). Resident pages are left as they are. */
snug_status snug_mem_populate(void *p, size_t offset, size_t len, snug_error *err);

/* Allocates for a library that cannot survive a failed allocation (jansson
 * drops bytes and corrupts its own state when one fails mid-parse): the
 * block is counted like any other, but neither the capacity nor fault
 * injection applies to it, and it is not counted by snug_mem_alloc_count.
 * Callers bound such use beforehand with snug_mem_admit. If the system
 * itself refuses the memory, the process aborts with a message: going on
 * would corrupt memory. Never returns NULL. */
void *snug_mem_alloc_exempt(snug_mem_cat cat, size_t n);

/* Admits work that will make exempt allocations of up to n bytes: fails
 * with SNUG_NOMEM (the message as for snug_mem_alloc) when n more bytes
 * would not fit under the capacity now, or when fault injection selects
 * it; it counts as one allocation for fault injection. Nothing is held
 * afterwards either way. */
snug_status snug_mem_admit(snug_mem_cat cat, size_t n, snug_error *err);

/* Frees a block from snug_mem_alloc and takes its bytes off its category.
 * NULL is ignored. The pointer is invalid afterwards; freeing a pointer that
 * is not a live block aborts. */
void snug_mem_free(void *p);

/* Returns the bytes a request of n bytes holds (header and rounding
 * included): exactly for large blocks, a bound for small ones (the C
 * library's own rounding decides; with glibc it is never exceeded); 0 when
 * n is too large to be represented. Pure. */
size_t snug_mem_held_bytes(size_t n);

/* The bytes the live block p is charged. */
size_t snug_mem_block_bytes(const void *p);

/* Writes "weights 1.00 GiB, kv_cache 0 B, ..., total ..." into buf (size
 * bytes, truncated to fit). */
void snug_mem_describe(char *buf, size_t size);

/* The number of allocations (and admissions) made so far by this process,
 * exempt ones aside: what fault injection counts. */
int64_t snug_mem_alloc_count(void);

/* Copies a NUL-terminated string into a new block of category cat. Returns
 * NULL and fills err on failure. */
char *snug_mem_strdup(snug_mem_cat cat, const char *s, snug_error *err);

/* Makes every readable segment of the program and of each library it has
 * loaded resident (code, read-only data: MADV_POPULATE_READ, or a read of
 * each page where the kernel lacks it), so that no code path first taken
 * later, in serving, faults a page in past what the memory plan measured.
 * Costs the size of those segments in resident set (a few MiB); *bytes
 * (may be NULL) gets the bytes it covered. Fails with SNUG_IO naming the
 * object when a segment cannot be made resident. */
snug_status snug_proc_prefault_code(size_t *bytes, snug_error *err);

/* The stack each thread that runs steps is made resident to, below the
 * frame that calls snug_proc_prefault_stack: far more than any call chain
 * of a step goes (their frames are a few KiB), so that a path first taken
 * in serving, deeper than the memory plan's profile went, touches no page
 * past what the plan measured (seen without it: a page more than U, in
 * about one run in eight of test_planner's stress). */
enum { SNUG_STACK_PREFAULT_BYTES = 64 * 1024 };

/* Makes SNUG_STACK_PREFAULT_BYTES of the calling thread's stack, below the
 * caller's frame, resident (writes a byte in each page, deepest last).
 * Never fails: every thread's stack is far larger. */
void snug_proc_prefault_stack(void);

/* ---- the event log: every allocation and free, timestamped -------------
 * What the memory timeline (snug profile --timeline) is drawn from: not
 * sampled, so no spike is missed. Off unless started; when on, each
 * allocation and free appends one event to a log of fixed size made at
 * start (events past its end are counted as dropped, never allocated).
 * A large block's allocation is recorded when its bytes are charged, before
 * it is populated (which may take a second), and an RSS event follows once
 * the allocator returns it (for a block left unpopulated, another follows
 * once its owner has populated it: snug_mem_trace_populated); its free is
 * recorded once it is unmapped.
 * Start, stop and reading the log must not race with allocations on other
 * threads (call them between phases); recording itself is thread-safe. */

typedef enum snug_mem_event_kind {
    SNUG_MEM_EVENT_ALLOC = 0,
    SNUG_MEM_EVENT_FREE = 1,
    SNUG_MEM_EVENT_MARK = 2,    /* a phase begins: its label */
    SNUG_MEM_EVENT_RSS = 3      /* the resident set after a large block was populated */
} snug_mem_event_kind;

typedef struct snug_mem_event {
    int64_t ns;                 /* since snug_mem_trace_start (CLOCK_MONOTONIC) */
    size_t bytes;               /* what the block is charged; 0 for a mark */
    size_t rss;                 /* the process's resident set right after the event, for
                                 * marks and large blocks (mmap, munmap); 0 when not read */
    const char *label;          /* a mark's name (a string that outlives the log); else NULL */
    uint32_t kind;              /* a snug_mem_event_kind */
    uint32_t cat;               /* the block's category; 0 for a mark */
} snug_mem_event;

typedef struct snug_mem_trace {
    const snug_mem_event *events;   /* in the order recorded (by ns within a thread) */
    size_t n_events;
    int64_t dropped;                /* events that did not fit */
    size_t start_bytes[SNUG_MEM_N_CATS]; /* each category's bytes when the log started */
} snug_mem_trace;

/* Starts a log of at most max_events events (one block of category other,
 * made before the start, so it is in start_bytes). A log already running is
 * stopped first. Fails with SNUG_NOMEM (nothing started). */
snug_status snug_mem_trace_start(size_t max_events, snug_error *err);

/* Records that the phase `label` begins (label must outlive the log), with
 * the process's RSS. Nothing happens when no log runs. */
void snug_mem_trace_mark(const char *label);

/* Records the process's RSS (an event of kind SNUG_MEM_EVENT_RSS, block
 * p's category) once p's owner has made it resident (populate.h): what
 * the allocator records itself for a block it populates. Nothing happens
 * when no log runs. p must be a live block. */
void snug_mem_trace_populated(const void *p);

/* The running log, valid until snug_mem_trace_stop; all zero when none. */
void snug_mem_trace_get(snug_mem_trace *out);

/* Stops the log and frees it; nothing happens when none runs. */
void snug_mem_trace_stop(void);

#endif /* SNUG_MEM_H */
