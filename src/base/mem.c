/*
 * mem.c: the accounting allocator (current and peak bytes per category,
 * capacity, fault injection, the event log) and the process's code and
 * stacks made resident. The kernel's figures for the process (RSS, its
 * high-water mark) are read by sysinfo.c.
 *
 * The counters below (and the event log, when one runs) are the only
 * global state in snug.
 */
#include "mem.h"

#include "procfile.h"

#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BLOCK_MAGIC 0x736e7567626c6b31ull  /* "snugblk1" */
#define FREED_MAGIC 0x736e756766726565ull  /* "snugfree" */

typedef struct mem_counter {
    _Atomic size_t cur;
    _Atomic size_t peak;
} mem_counter;

/* g_counters[SNUG_MEM_TOTAL] is the total over all categories. */
static mem_counter g_counters[SNUG_MEM_N_CATS + 1];
static _Atomic size_t g_capacity = SIZE_MAX;
static _Atomic int64_t g_n_allocs;
static _Atomic int64_t g_fail_at; /* allocation number that fails; 0 = none */

/* The event log (snug_mem_trace_start): part of the allocator's state. */
static _Atomic(snug_mem_event *) g_trace;
static size_t g_trace_cap;
static _Atomic size_t g_trace_used;
static _Atomic int64_t g_trace_dropped;
static int64_t g_trace_t0;
static int g_trace_statm = -1;      /* /proc/self/statm, open while a log runs */
static size_t g_page_bytes;
static size_t g_trace_start[SNUG_MEM_N_CATS];

/* The header in front of every block; exactly SNUG_MEM_HEADER_BYTES long. */
/* The header in front of every block; exactly SNUG_MEM_HEADER_BYTES long. */
typedef struct block_header {
    size_t held;        /* bytes charged to cat */
    uint32_t cat;
    uint32_t is_mapped;
    unsigned char pad[SNUG_MEM_HEADER_BYTES - 24];
    uint64_t magic;     /* last, right before the caller's bytes */
} block_header;

_Static_assert(sizeof(block_header) == SNUG_MEM_HEADER_BYTES, "header size");

/* A small block is charged what the C library holds for it: its usable size
 * plus the one size word in front of every chunk. The request to the
 * library is header + request rounded to 64; glibc's chunk for it is larger
 * by its size word, rounding to 16 and a remainder too small to split off
 * (less than 32 bytes), so at most 64 bytes: that bound is taken against
 * the capacity before the library is asked, and the difference given back. */
enum { CHUNK_WORD = sizeof(size_t), CHUNK_SLACK = 64 };

static size_t page_bytes(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

const char *snug_mem_cat_name(snug_mem_cat cat)
{
    switch (cat) {
    case SNUG_MEM_WEIGHTS: return "weights";
    case SNUG_MEM_KV: return "kv_cache";
    case SNUG_MEM_ACTIVATIONS: return "activations";
    case SNUG_MEM_STAGING: return "staging";
    case SNUG_MEM_OTHER: return "other";
    case SNUG_MEM_TOTAL: return "total";
    }
    return "unknown";
}

/* The request a block of n bytes makes to the system (header included). */
static size_t request_bytes(size_t n)
{
    size_t with_header;
    if (!snug_add_size(n, SNUG_MEM_HEADER_BYTES, &with_header)) return 0;
    size_t align = n < SNUG_MEM_LARGE_BYTES ? SNUG_MEM_ALIGN : page_bytes();
    if (with_header > SIZE_MAX - align) return 0;
    return snug_round_up(with_header, align);
}

size_t snug_mem_held_bytes(size_t n)
{
    size_t req = request_bytes(n);
    if (req == 0 || n >= SNUG_MEM_LARGE_BYTES) return req;
    return req + CHUNK_SLACK;
}

size_t snug_mem_block_bytes(const void *p)
{
    const block_header *h = (const block_header *)((const unsigned char *)p - SNUG_MEM_HEADER_BYTES);
    SNUG_ASSERT(h->magic == BLOCK_MAGIC);
    return h->held;
}

static void peak_raise(mem_counter *c, size_t now)
{
    size_t peak = atomic_load(&c->peak);
    while (now > peak && !atomic_compare_exchange_weak(&c->peak, &peak, now)) {
    }
}

static void counter_add(mem_counter *c, size_t n)
{
    peak_raise(c, atomic_fetch_add(&c->cur, n) + n);
}

/* Takes n bytes of the total against the capacity; false (and nothing
 * taken) when the total would pass it. The total's peak is raised only once
 * the memory is really held (peak_raise after success). */
static bool total_reserve(size_t n)
{
    mem_counter *t = &g_counters[SNUG_MEM_TOTAL];
    size_t cur = atomic_load(&t->cur);
    size_t cap = atomic_load(&g_capacity);
    do {
        if (cur > cap || n > cap - cur) return false;
    } while (!atomic_compare_exchange_weak(&t->cur, &cur, cur + n));
    return true;
}

void snug_mem_describe(char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int c = 0; c <= SNUG_MEM_N_CATS && o < size; c++) {
        char b[32];
        size_t cur = atomic_load(&g_counters[c].cur);
        int n = snprintf(buf + o, size - o, "%s%s %s", c ? ", " : "",
                         snug_mem_cat_name((snug_mem_cat)c), snug_fmt_bytes(cur, b));
        if (n < 0) break;
        o += (size_t)n;
    }
}

static void nomem_message(char *buf, size_t size, snug_mem_cat cat, size_t n, const char *why)
{
    char held[512], req[32], cap[32];
    snug_mem_describe(held, sizeof held);
    size_t c = atomic_load(&g_capacity);
    snprintf(buf, size, "out of memory: %s request of %zu bytes (%s) %s; capacity %s; held: %s",
             snug_mem_cat_name(cat), n, snug_fmt_bytes(n, req), why,
             c == SIZE_MAX ? "unlimited" : snug_fmt_bytes(c, cap), held);
}

static void *nomem(snug_error *err, snug_mem_cat cat, size_t n, const char *why)
{
    if (err) {
        nomem_message(err->msg, sizeof err->msg, cat, n, why);
        err->status = SNUG_NOMEM;
    }
    return NULL;
}

enum {
    HUGE_PAGE_BYTES = 2 << 20,       /* blocks this large are 2 MiB-aligned, huge-paged */
    POPULATE_CHUNK = 64 << 20        /* populated in pieces of this size */
};

/* Makes [p, p + len) resident, writable, on the calling thread, a piece at
 * a time (spreading a large block over threads is populate.c's, above the
 * allocator: the allocator cannot call the pool, which allocates through
 * it). MADV_POPULATE_WRITE reports a failure (where touching would be
 * killed); before Linux 5.14 it does not exist and the pages are touched
 * instead. Stops at the first piece the system will not back. */
static bool populate(unsigned char *p, size_t len)
{
    for (size_t begin = 0; begin < len; begin += POPULATE_CHUNK) {
        size_t n = SNUG_MIN((size_t)POPULATE_CHUNK, len - begin);
        if (madvise(p + begin, n, MADV_POPULATE_WRITE) == 0) continue;
        if (errno != EINVAL) return false;
        for (size_t o = 0; o < n; o += 4096) ((volatile unsigned char *)p)[begin + o] = 0;
    }
    return true;
}

/* Maps len bytes (a multiple of the page size) of anonymous memory, 2 MiB-
 * aligned with transparent huge pages asked for when len is at least 2 MiB,
 * and makes every page resident, or only the first (the block's header)
 * when resident is false. NULL with errno set on failure. */
static void *map_block(size_t len, bool resident)
{
    bool huge = len >= HUGE_PAGE_BYTES;
    if (huge && len > SIZE_MAX - HUGE_PAGE_BYTES) {
        errno = ENOMEM;
        return NULL;
    }
    size_t map_len = huge ? len + HUGE_PAGE_BYTES : len;
    unsigned char *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                            -1, 0);
    if (m == MAP_FAILED) return NULL;
    unsigned char *p = m;
    if (huge) { /* keep the aligned middle; give the ends back */
        p = (unsigned char *)snug_round_up((uintptr_t)m, HUGE_PAGE_BYTES);
        if (p > m) munmap(m, (size_t)(p - m));
        size_t tail = (size_t)(m + map_len - (p + len));
        if (tail) munmap(p + len, tail);
        madvise(p, len, MADV_HUGEPAGE); /* a hint: ignored where huge pages are off */
    }
    if (!populate(p, resident ? len : SNUG_MEM_HEADER_BYTES)) {
        munmap(p, len);
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

/* Counts an allocation attempt; true when fault injection fails it. */
static bool injected_failure(int64_t *k)
{
    *k = atomic_fetch_add(&g_n_allocs, 1) + 1;
    int64_t fail_at = atomic_load(&g_fail_at);
    return fail_at > 0 && *k == fail_at;
}

static void *injected(snug_error *err, snug_mem_cat cat, size_t n, int64_t k)
{
    char why[96];
    snprintf(why, sizeof why, "failed by fault injection (allocation %lld)", (long long)k);
    return nomem(err, cat, n, why);
}

/* Gets a block for a request of n bytes from the system: mmap for large
 * blocks (req bytes, page-rounded; made resident unless resident is false),
 * the C library for small ones. *held receives what the block really holds. */
static unsigned char *system_alloc(size_t n, size_t req, bool resident, size_t *held)
{
    if (n >= SNUG_MEM_LARGE_BYTES) {
        *held = req;
        return map_block(req, resident);
    }
    unsigned char *base = aligned_alloc(SNUG_MEM_ALIGN, req);
    if (!base) return NULL;
    memset(base, 0, req);
    *held = malloc_usable_size(base) + CHUNK_WORD;
    return base;
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Appends one event to the running log, if any; with_rss reads the
 * resident set for it (marks and large blocks: a read costs a system call). */
static void trace_record(snug_mem_event_kind kind, uint32_t cat, size_t bytes, const char *label,
                         bool with_rss)
{
    snug_mem_event *log = atomic_load_explicit(&g_trace, memory_order_acquire);
    if (!log) return;
    size_t i = atomic_fetch_add(&g_trace_used, 1);
    if (i >= g_trace_cap) {
        atomic_fetch_add(&g_trace_dropped, 1);
        return;
    }
    size_t rss = with_rss ? snug_proc_statm_rss(g_trace_statm, g_page_bytes) : 0;
    log[i] = (snug_mem_event){now_ns() - g_trace_t0, bytes, rss, label, (uint32_t)kind, cat};
}

static void *finish_block(unsigned char *base, snug_mem_cat cat, size_t n, size_t held)
{
    counter_add(&g_counters[cat], held);
    /* a large block's allocation was recorded when its bytes were taken (the
     * counter's view), before populating it; now the resident set it reached */
    if (n >= SNUG_MEM_LARGE_BYTES)
        trace_record(SNUG_MEM_EVENT_RSS, (uint32_t)cat, 0, NULL, true);
    else
        trace_record(SNUG_MEM_EVENT_ALLOC, (uint32_t)cat, held, NULL, false);
    peak_raise(&g_counters[SNUG_MEM_TOTAL], atomic_load(&g_counters[SNUG_MEM_TOTAL].cur));
    block_header *h = (block_header *)base;
    h->magic = BLOCK_MAGIC;
    h->cat = (uint32_t)cat;
    h->is_mapped = n >= SNUG_MEM_LARGE_BYTES;
    h->held = held;
    return base + SNUG_MEM_HEADER_BYTES;
}

/* snug_mem_alloc and snug_mem_alloc_unpopulated. */
static void *alloc_block(snug_mem_cat cat, size_t n, bool resident, snug_error *err)
{
    SNUG_ASSERT(cat >= 0 && cat < SNUG_MEM_N_CATS);
    int64_t k;
    if (injected_failure(&k)) return injected(err, cat, n, k);
    size_t req = request_bytes(n), bound = snug_mem_held_bytes(n), held = 0;
    if (req == 0) return nomem(err, cat, n, "is too large to represent");
    if (!total_reserve(bound)) return nomem(err, cat, n, "would pass the capacity");
    bool large = n >= SNUG_MEM_LARGE_BYTES; /* then bound is exact */
    if (large) trace_record(SNUG_MEM_EVENT_ALLOC, (uint32_t)cat, bound, NULL, true);
    unsigned char *base = system_alloc(n, req, resident, &held);
    mem_counter *total = &g_counters[SNUG_MEM_TOTAL];
    if (!base) {
        int e = errno;
        if (large) trace_record(SNUG_MEM_EVENT_FREE, (uint32_t)cat, bound, NULL, true);
        atomic_fetch_sub(&total->cur, bound);
        char why[96];
        snprintf(why, sizeof why, "was refused by the system (%s)", strerror(e));
        return nomem(err, cat, n, why);
    }
    /* the reservation was a bound: settle it to what is held */
    if (held <= bound)
        atomic_fetch_sub(&total->cur, bound - held);
    else
        atomic_fetch_add(&total->cur, held - bound);
    return finish_block(base, cat, n, held);
}

void *snug_mem_alloc(snug_mem_cat cat, size_t n, snug_error *err)
{
    return alloc_block(cat, n, true, err);
}

void *snug_mem_alloc_unpopulated(snug_mem_cat cat, size_t n, snug_error *err)
{
    return alloc_block(cat, n, false, err);
}

snug_status snug_mem_populate(void *p, size_t offset, size_t len, snug_error *err)
{
    const block_header *h = (const block_header *)((unsigned char *)p - SNUG_MEM_HEADER_BYTES);
    SNUG_ASSERT(h->magic == BLOCK_MAGIC && "populate of a pointer that is not a live block");
    size_t size = h->held - SNUG_MEM_HEADER_BYTES, end;
    if (!snug_add_size(offset, len, &end) || end > size)
        return snug_errorf(err, SNUG_INVALID, "populate: bytes %zu + %zu of a block of %zu",
                           offset, len, size);
    if (!h->is_mapped || len == 0) return SNUG_OK; /* the C library's: written when made */
    long page_size = sysconf(_SC_PAGESIZE);
    uintptr_t from = (uintptr_t)p + offset, to = from + len;
    uintptr_t page = page_size > 0 ? (uintptr_t)page_size : 4096;
    from -= from % page; /* a block's pages are all its own: it is mapped alone */
    to = snug_round_up(to, page);
    if (populate((unsigned char *)from, (size_t)(to - from))) return SNUG_OK;
    char bytes[32];
    return snug_errorf(err, SNUG_NOMEM, "out of memory: the system would not back %s of a "
                       "block it had mapped", snug_fmt_bytes(to - from, bytes));
}

void *snug_mem_alloc_exempt(snug_mem_cat cat, size_t n)
{
    SNUG_ASSERT(cat >= 0 && cat < SNUG_MEM_N_CATS);
    size_t req = request_bytes(n), held = 0;
    if (req && n >= SNUG_MEM_LARGE_BYTES)
        trace_record(SNUG_MEM_EVENT_ALLOC, (uint32_t)cat, snug_mem_held_bytes(n), NULL, true);
    unsigned char *base = req ? system_alloc(n, req, true, &held) : NULL;
    if (!base) {
        char msg[SNUG_ERROR_MSG_BYTES];
        nomem_message(msg, sizeof msg, cat, n, "was refused by the system where failing is "
                      "not survivable");
        fprintf(stderr, "snug: %s\n", msg);
        abort();
    }
    atomic_fetch_add(&g_counters[SNUG_MEM_TOTAL].cur, held);
    return finish_block(base, cat, n, held);
}

snug_status snug_mem_admit(snug_mem_cat cat, size_t n, snug_error *err)
{
    SNUG_ASSERT(cat >= 0 && cat < SNUG_MEM_N_CATS);
    int64_t k;
    if (injected_failure(&k)) {
        injected(err, cat, n, k);
        return SNUG_NOMEM;
    }
    size_t cur = atomic_load(&g_counters[SNUG_MEM_TOTAL].cur);
    size_t cap = atomic_load(&g_capacity);
    if (cur > cap || n > cap - cur) {
        nomem(err, cat, n, "would pass the capacity");
        return SNUG_NOMEM;
    }
    return SNUG_OK;
}

void snug_mem_free(void *p)
{
    if (!p) return;
    unsigned char *base = (unsigned char *)p - SNUG_MEM_HEADER_BYTES;
    block_header *h = (block_header *)base;
    SNUG_ASSERT(h->magic == BLOCK_MAGIC && "free of a pointer that is not a live block");
    SNUG_ASSERT(h->cat < SNUG_MEM_N_CATS);
    size_t held = h->held;
    snug_mem_cat cat = (snug_mem_cat)h->cat;
    bool mapped = h->is_mapped;
    h->magic = FREED_MAGIC;
    atomic_fetch_sub(&g_counters[cat].cur, held);
    atomic_fetch_sub(&g_counters[SNUG_MEM_TOTAL].cur, held);
    if (mapped)
        SNUG_ASSERT(munmap(base, held) == 0);
    else
        free(base);
    trace_record(SNUG_MEM_EVENT_FREE, (uint32_t)cat, held, NULL, mapped);
}

char *snug_mem_strdup(snug_mem_cat cat, const char *s, snug_error *err)
{
    size_t n = strlen(s) + 1;
    char *d = snug_mem_alloc(cat, n, err);
    if (d) memcpy(d, s, n);
    return d;
}

void snug_mem_status(snug_mem_cat cat, size_t *cur, size_t *peak, bool reset)
{
    SNUG_ASSERT(cat >= 0 && cat <= SNUG_MEM_TOTAL);
    mem_counter *c = &g_counters[cat];
    size_t now = atomic_load(&c->cur);
    if (cur) *cur = now;
    if (peak) *peak = atomic_load(&c->peak);
    if (reset) {
        /* An allocation racing with the store may have raised the peak just
         * before it; raising again to the current value afterwards keeps
         * peak >= current whatever the interleaving. */
        atomic_store(&c->peak, atomic_load(&c->cur));
        peak_raise(c, atomic_load(&c->cur));
    }
}

void snug_mem_set_capacity(size_t bytes) { atomic_store(&g_capacity, bytes); }

size_t snug_mem_capacity(void) { return atomic_load(&g_capacity); }

void snug_mem_fail_at(int64_t n)
{
    atomic_store(&g_fail_at, n > 0 ? atomic_load(&g_n_allocs) + n : 0);
}

int64_t snug_mem_alloc_count(void) { return atomic_load(&g_n_allocs); }

typedef struct prefault_ctx {
    size_t page, bytes;
    snug_status st;
    snug_error *err;
} prefault_ctx;

static int prefault_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    prefault_ctx *c = arg;
    for (int i = 0; i < info->dlpi_phnum && c->st == SNUG_OK; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R) || ph->p_memsz == 0) continue;
        uintptr_t begin = (uintptr_t)(info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(c->page - 1);
        uintptr_t end = snug_round_up((size_t)(info->dlpi_addr + ph->p_vaddr + ph->p_memsz), c->page);
        if (madvise((void *)begin, end - begin, MADV_POPULATE_READ) != 0) {
            if (errno != EINVAL && errno != ENOSYS) {
                c->st = snug_errorf(c->err, SNUG_IO, "making %s resident: %s",
                                    info->dlpi_name[0] ? info->dlpi_name : "the program",
                                    strerror(errno));
                break;
            }
            volatile unsigned char sink = 0; /* a kernel without MADV_POPULATE_READ */
            for (uintptr_t a = begin; a < end; a += c->page) sink ^= *(volatile unsigned char *)a;
            (void)sink;
        }
        c->bytes += end - begin;
    }
    return c->st == SNUG_OK ? 0 : 1;
}

snug_status snug_proc_prefault_code(size_t *bytes, snug_error *err)
{
    long page = sysconf(_SC_PAGESIZE);
    prefault_ctx c = {page > 0 ? (size_t)page : 4096, 0, SNUG_OK, err};
    dl_iterate_phdr(prefault_object, &c);
    if (bytes) *bytes = c.bytes;
    return c.st;
}

__attribute__((noinline)) void snug_proc_prefault_stack(void)
{
    volatile unsigned char pages[SNUG_STACK_PREFAULT_BYTES];
    for (size_t at = sizeof pages; at > 0; at = at > 4096 ? at - 4096 : 0) pages[at - 1] = 0;
    pages[0] = 0;
}

snug_status snug_mem_trace_start(size_t max_events, snug_error *err)
{
    snug_mem_trace_stop();
    size_t bytes;
    if (!snug_mul_size(max_events, sizeof(snug_mem_event), &bytes))
        return snug_errorf(err, SNUG_NOMEM, "memory event log of %zu events: too large", max_events);
    snug_mem_event *log = snug_mem_alloc(SNUG_MEM_OTHER, bytes, err);
    if (!log) return snug_error_prefix(err, SNUG_NOMEM, "memory event log: ");
    for (int c = 0; c < SNUG_MEM_N_CATS; c++) g_trace_start[c] = atomic_load(&g_counters[c].cur);
    g_trace_statm = snug_proc_statm_open(); /* -1: no RSS, still a log */
    long page = sysconf(_SC_PAGESIZE);
    g_page_bytes = page > 0 ? (size_t)page : 4096;
    g_trace_cap = max_events;
    atomic_store(&g_trace_used, 0);
    atomic_store(&g_trace_dropped, 0);
    g_trace_t0 = now_ns();
    atomic_store_explicit(&g_trace, log, memory_order_release);
    return SNUG_OK;
}

void snug_mem_trace_mark(const char *label)
{
    trace_record(SNUG_MEM_EVENT_MARK, 0, 0, label, true);
}

void snug_mem_trace_populated(const void *p)
{
    const block_header *h = (const block_header *)((const unsigned char *)p - SNUG_MEM_HEADER_BYTES);
    SNUG_ASSERT(h->magic == BLOCK_MAGIC && "trace of a pointer that is not a live block");
    trace_record(SNUG_MEM_EVENT_RSS, h->cat, 0, NULL, true);
}

void snug_mem_trace_get(snug_mem_trace *out)
{
    memset(out, 0, sizeof *out);
    snug_mem_event *log = atomic_load(&g_trace);
    if (!log) return;
    out->events = log;
    out->n_events = SNUG_MIN(atomic_load(&g_trace_used), g_trace_cap);
    out->dropped = atomic_load(&g_trace_dropped);
    memcpy(out->start_bytes, g_trace_start, sizeof g_trace_start);
}

void snug_mem_trace_stop(void)
{
    snug_mem_event *log = atomic_exchange(&g_trace, NULL);
    if (g_trace_statm >= 0) close(g_trace_statm);
    g_trace_statm = -1;
    snug_mem_free(log);
}
