/*
 * test_mem.c: the accounting allocator: exact byte counts, peaks and
 * their reset, the capacity and its message, fault injection, concurrent
 * allocation, resident memory, and the jansson and PCRE2 hooks.
 */
#include "test.h"

#include "base/mem.h"
#include "base/json.h"
#include "tokenizer/regex.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static size_t cur_of(snug_mem_cat c)
{
    size_t cur;
    snug_mem_status(c, &cur, NULL, false);
    return cur;
}

static size_t peak_of(snug_mem_cat c)
{
    size_t peak;
    snug_mem_status(c, NULL, &peak, false);
    return peak;
}

static void test_held_bytes_rule(void)
{
    /* small: header 64 + request rounded up to 64, plus at most 64 for the C library */
    CHECK(snug_mem_held_bytes(0) == 64 + 64, "held(0) = %zu", snug_mem_held_bytes(0));
    CHECK(snug_mem_held_bytes(1) == 128 + 64, "held(1) = %zu", snug_mem_held_bytes(1));
    CHECK(snug_mem_held_bytes(64) == 128 + 64, "held(64) = %zu", snug_mem_held_bytes(64));
    CHECK(snug_mem_held_bytes(65) == 192 + 64, "held(65) = %zu", snug_mem_held_bytes(65));
    size_t big = SNUG_MEM_LARGE_BYTES;
    size_t want = (big + 64 + page() - 1) / page() * page();
    CHECK(snug_mem_held_bytes(big) == want, "held(%zu) = %zu, want %zu (exact for large blocks)",
          big, snug_mem_held_bytes(big), want);
    CHECK(snug_mem_held_bytes(SIZE_MAX - 10) == 0, "an impossible size holds 0");
}

static void test_exact_counts(void)
{
    size_t base_w = cur_of(SNUG_MEM_WEIGHTS), base_t = cur_of(SNUG_MEM_TOTAL);
    size_t sizes[] = {1, 64, 65, 1000, 4096, 64 * 1024, 1 << 20, (1 << 20) + 1, 3 * 1000 * 1000};
    void *p[SNUG_ARRAY_LEN(sizes)];
    size_t expect = 0;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(sizes); i++) {
        snug_error err = {0};
        p[i] = snug_mem_alloc(SNUG_MEM_WEIGHTS, sizes[i], &err);
        CHECK(p[i] != NULL, "alloc %zu: %s", sizes[i], err.msg);
        if (!p[i]) return;
        CHECK(((uintptr_t)p[i] & 63) == 0, "block %zu is 64-byte aligned", i);
        expect += snug_mem_block_bytes(p[i]);
        CHECK(cur_of(SNUG_MEM_WEIGHTS) - base_w == expect, "after %zu allocs: %zu held, want %zu",
              i + 1, cur_of(SNUG_MEM_WEIGHTS) - base_w, expect);
        bool zero = true;
        for (size_t k = 0; k < sizes[i]; k++) zero &= ((unsigned char *)p[i])[k] == 0;
        CHECK(zero, "block of %zu bytes is zero-filled", sizes[i]);
        memset(p[i], 0xAB, sizes[i]);
    }
    /* large blocks are charged exactly header + request in whole pages;
     * small ones what the C library's chunk holds: the request it was given
     * (header + request rounded to 64) plus 8 to 64 bytes */
    size_t pg = page(), large = 0, large_want = 0;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(sizes); i++) {
        size_t got = snug_mem_block_bytes(p[i]);
        if (sizes[i] >= SNUG_MEM_LARGE_BYTES) {
            large += got;
        } else {
            size_t req = 64 + (sizes[i] + 63) / 64 * 64;
            CHECK(got >= req + 8 && got <= req + 64, "block of %zu bytes charged %zu (asked %zu)",
                  sizes[i], got, req);
        }
    }
    large_want = ((64 * 1024 + 64 + pg - 1) / pg + ((1 << 20) + 64 + pg - 1) / pg +
                  ((1 << 20) + 65 + pg - 1) / pg + (3000000 + 64 + pg - 1) / pg) * pg;
    CHECK(large == large_want, "large blocks charged %zu, written out %zu", large, large_want);
    CHECK(cur_of(SNUG_MEM_TOTAL) - base_t == expect, "total follows weights");
    /* free in a different order */
    size_t order[] = {3, 0, 8, 5, 1, 7, 2, 6, 4};
    for (size_t k = 0; k < SNUG_ARRAY_LEN(order); k++) {
        size_t i = order[k];
        expect -= snug_mem_block_bytes(p[i]);
        snug_mem_free(p[i]);
        CHECK(cur_of(SNUG_MEM_WEIGHTS) - base_w == expect, "after freeing %zu: %zu, want %zu", i,
              cur_of(SNUG_MEM_WEIGHTS) - base_w, expect);
    }
    CHECK(cur_of(SNUG_MEM_WEIGHTS) == base_w, "weights back to baseline");
    snug_mem_free(NULL);
}

static void test_categories_are_separate(void)
{
    size_t kv0 = cur_of(SNUG_MEM_KV), act0 = cur_of(SNUG_MEM_ACTIVATIONS);
    void *a = snug_mem_alloc(SNUG_MEM_KV, 1000, NULL);
    void *b = snug_mem_alloc(SNUG_MEM_ACTIVATIONS, 200000, NULL);
    CHECK(cur_of(SNUG_MEM_KV) - kv0 == snug_mem_block_bytes(a), "kv charged");
    CHECK(cur_of(SNUG_MEM_ACTIVATIONS) - act0 == snug_mem_held_bytes(200000), "activations charged");
    snug_mem_free(a);
    snug_mem_free(b);
    CHECK(cur_of(SNUG_MEM_KV) == kv0 && cur_of(SNUG_MEM_ACTIVATIONS) == act0, "both back");
    CHECK(strcmp(snug_mem_cat_name(SNUG_MEM_KV), "kv_cache") == 0, "kv name");
    CHECK(strcmp(snug_mem_cat_name(SNUG_MEM_TOTAL), "total") == 0, "total name");
}

static void test_peak_and_reset(void)
{
    snug_mem_status(SNUG_MEM_STAGING, NULL, NULL, true);
    size_t base = cur_of(SNUG_MEM_STAGING);
    CHECK(peak_of(SNUG_MEM_STAGING) == base, "after reset peak == current (%zu vs %zu)",
          peak_of(SNUG_MEM_STAGING), base);
    void *a = snug_mem_alloc(SNUG_MEM_STAGING, 1 << 20, NULL);
    void *b = snug_mem_alloc(SNUG_MEM_STAGING, 1 << 21, NULL);
    size_t both = snug_mem_held_bytes(1 << 20) + snug_mem_held_bytes(1 << 21);
    snug_mem_free(a);
    snug_mem_free(b);
    void *c = snug_mem_alloc(SNUG_MEM_STAGING, 100, NULL);
    size_t cur, peak;
    snug_mem_status(SNUG_MEM_STAGING, &cur, &peak, false);
    CHECK(peak - base == both, "peak saw both blocks at once: %zu, want %zu", peak - base, both);
    CHECK(cur - base == snug_mem_block_bytes(c), "current is the small block");
    snug_mem_status(SNUG_MEM_STAGING, &cur, &peak, true);
    CHECK(peak - base == both, "the call that resets still reports the old peak");
    snug_mem_status(SNUG_MEM_STAGING, &cur, &peak, false);
    CHECK(peak == cur, "after reset peak %zu == current %zu", peak, cur);
    size_t small = snug_mem_block_bytes(c);
    snug_mem_free(c);
    snug_mem_status(SNUG_MEM_STAGING, &cur, &peak, false);
    CHECK(peak - base == small, "peak does not drop on free");
}

static void test_capacity(void)
{
    size_t total = cur_of(SNUG_MEM_TOTAL);
    snug_mem_set_capacity(total + (4 << 20));
    CHECK(snug_mem_capacity() == total + (4 << 20), "capacity reads back");
    snug_error err = {0};
    void *a = snug_mem_alloc(SNUG_MEM_WEIGHTS, 3 << 20, &err);
    CHECK(a != NULL, "3 MiB fits in 4 MiB: %s", err.msg);
    size_t before = cur_of(SNUG_MEM_TOTAL);
    void *b = snug_mem_alloc(SNUG_MEM_KV, 2 << 20, &err);
    CHECK(b == NULL, "2 more MiB do not fit");
    CHECK(err.status == SNUG_NOMEM, "status %s", snug_status_str(err.status));
    CHECK(strstr(err.msg, "kv_cache request of 2097152 bytes") != NULL, "names the category and "
          "request: %s", err.msg);
    CHECK(strstr(err.msg, "would pass the capacity") != NULL, "says why: %s", err.msg);
    CHECK(strstr(err.msg, "capacity ") != NULL && strstr(err.msg, "MiB") != NULL,
          "names the capacity: %s", err.msg);
    CHECK(strstr(err.msg, "held: weights 3.00 MiB") != NULL, "says what weights hold: %s", err.msg);
    CHECK(strstr(err.msg, "kv_cache") && strstr(err.msg, "activations") &&
          strstr(err.msg, "staging") && strstr(err.msg, "other"), "lists every category: %s",
          err.msg);
    CHECK(cur_of(SNUG_MEM_TOTAL) == before, "a refused request changes nothing");
    snug_mem_free(a);
    snug_mem_set_capacity(SIZE_MAX);
    /* within 2 MiB of SIZE_MAX: no capacity stops it; the system must refuse it cleanly */
    b = snug_mem_alloc(SNUG_MEM_OTHER, SIZE_MAX - (1u << 20), &err);
    CHECK(b == NULL && err.status == SNUG_NOMEM && strstr(err.msg, "refused by the system"),
          "an impossible request is refused: %s", err.msg);
    b = snug_mem_alloc(SNUG_MEM_KV, 2 << 20, &err);
    CHECK(b != NULL, "fits again without a capacity");
    snug_mem_free(b);
}

static void test_fault_injection(void)
{
    snug_error err = {0};
    snug_mem_fail_at(2);
    void *a = snug_mem_alloc(SNUG_MEM_OTHER, 10, &err);
    void *b = snug_mem_alloc(SNUG_MEM_OTHER, 10, &err);
    CHECK(a != NULL, "allocation 1 succeeds");
    CHECK(b == NULL && err.status == SNUG_NOMEM, "allocation 2 fails");
    CHECK(strstr(err.msg, "fault injection") != NULL, "message: %s", err.msg);
    void *c = snug_mem_alloc(SNUG_MEM_OTHER, 10, &err);
    CHECK(c != NULL, "allocation 3 succeeds again");
    snug_mem_free(a);
    snug_mem_free(c);
    snug_mem_fail_at(0);
}

enum { N_THREADS = 4, N_BLOCKS = 2000 };

typedef struct churn_arg {
    int id;
    void *kept[10];
} churn_arg;

/* Allocates and frees thousands of blocks of every category, then keeps 10
 * weights blocks of a known size. */
static void *thread_churn(void *p)
{
    churn_arg *arg = p;
    static void *blocks[N_THREADS][N_BLOCKS];
    void **keep = blocks[arg->id];
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(arg->id + 1);
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < N_BLOCKS; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t n = (size_t)(x % 5000) + (i % 100 == 0 ? 200000 : 0);
            keep[i] = snug_mem_alloc((snug_mem_cat)(i % SNUG_MEM_N_CATS), n, NULL);
            if (!keep[i]) abort();
        }
        for (int i = 0; i < N_BLOCKS; i++) snug_mem_free(keep[i]);
    }
    for (int i = 0; i < 10; i++)
        arg->kept[i] = snug_mem_alloc(SNUG_MEM_WEIGHTS, 1000 + (size_t)arg->id, NULL);
    return NULL;
}

static void *thread_keep(void *arg)
{
    void **out = arg;
    for (int i = 0; i < 100; i++) out[i] = snug_mem_alloc(SNUG_MEM_ACTIVATIONS, 777 + (size_t)i * 3000, NULL);
    return NULL;
}

static void test_concurrent_counts(void)
{
    size_t base[SNUG_MEM_N_CATS + 1];
    for (int c = 0; c <= SNUG_MEM_N_CATS; c++) base[c] = cur_of((snug_mem_cat)c);
    pthread_t th[N_THREADS];
    void *blocks[N_THREADS][100];
    for (int i = 0; i < N_THREADS; i++) pthread_create(&th[i], NULL, thread_keep, blocks[i]);
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    size_t expect = 0;
    for (int i = 0; i < N_THREADS; i++)
        for (int k = 0; k < 100; k++) expect += snug_mem_block_bytes(blocks[i][k]);
    CHECK(cur_of(SNUG_MEM_ACTIVATIONS) - base[SNUG_MEM_ACTIVATIONS] == expect,
          "concurrent allocations counted exactly: %zu vs %zu",
          cur_of(SNUG_MEM_ACTIVATIONS) - base[SNUG_MEM_ACTIVATIONS], expect);
    for (int i = 0; i < N_THREADS; i++)
        for (int k = 0; k < 100; k++) snug_mem_free(blocks[i][k]);
    CHECK(cur_of(SNUG_MEM_ACTIVATIONS) == base[SNUG_MEM_ACTIVATIONS], "and freed exactly");
}

static void test_concurrent_churn(void)
{
    size_t base[SNUG_MEM_N_CATS + 1];
    for (int c = 0; c <= SNUG_MEM_N_CATS; c++) base[c] = cur_of((snug_mem_cat)c);
    snug_mem_status(SNUG_MEM_TOTAL, NULL, NULL, true);
    pthread_t th[N_THREADS];
    churn_arg args[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        args[i].id = i;
        pthread_create(&th[i], NULL, thread_churn, &args[i]);
    }
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    size_t kept = 0;
    for (int i = 0; i < N_THREADS; i++)
        for (int k = 0; k < 10; k++) kept += snug_mem_block_bytes(args[i].kept[k]);
    CHECK(cur_of(SNUG_MEM_WEIGHTS) - base[SNUG_MEM_WEIGHTS] == kept,
          "after 200,000 concurrent allocations and frees the weights hold exactly the kept "
          "%zu bytes (got %zu)", kept, cur_of(SNUG_MEM_WEIGHTS) - base[SNUG_MEM_WEIGHTS]);
    for (int c = 1; c < SNUG_MEM_N_CATS; c++)
        CHECK(cur_of((snug_mem_cat)c) == base[c], "%s back to baseline",
              snug_mem_cat_name((snug_mem_cat)c));
    CHECK(cur_of(SNUG_MEM_TOTAL) - base[SNUG_MEM_TOTAL] == kept, "the total agrees");
    CHECK(peak_of(SNUG_MEM_TOTAL) > cur_of(SNUG_MEM_TOTAL), "the peak saw the churn");
    for (int i = 0; i < N_THREADS; i++)
        for (int k = 0; k < 10; k++) snug_mem_free(args[i].kept[k]);
}

static void test_resident_memory(void)
{
    snug_error err = {0};
    size_t rss0, hwm0, rss1, hwm1, rss2;
    CHECK_OK(snug_proc_mem(&rss0, &hwm0, &err), &err);
    size_t n = 64 << 20;
    void *p = snug_mem_alloc(SNUG_MEM_WEIGHTS, n, &err);
    CHECK(p != NULL, "64 MiB: %s", err.msg);
    CHECK_OK(snug_proc_mem(&rss1, &hwm1, &err), &err);
    CHECK(rss1 >= rss0 + n - (1 << 20), "a large block is resident at once: RSS grew %zu bytes",
          rss1 - rss0);
    CHECK(hwm1 >= rss1, "high-water mark >= RSS");
    snug_mem_free(p);
    CHECK_OK(snug_proc_mem(&rss2, NULL, &err), &err);
    CHECK(rss2 + n - (1 << 20) <= rss1, "freeing returns it to the system: %zu -> %zu", rss1, rss2);
    snug_status st = snug_proc_hwm_reset(&err);
    if (st == SNUG_OK) {
        size_t rss3, hwm3;
        CHECK_OK(snug_proc_mem(&rss3, &hwm3, &err), &err);
        CHECK(hwm3 < hwm1, "after the reset the high-water mark dropped (%zu -> %zu)", hwm1, hwm3);
        CHECK(hwm3 <= rss3 + (8 << 20), "and is near the RSS (%zu vs %zu)", hwm3, rss3);
    } else {
        CHECK(st == SNUG_UNSUPPORTED && strstr(err.msg, "clear_refs"), "says why: %s", err.msg);
    }
}

#if defined(__SANITIZE_ADDRESS__)
#define RSS_IS_MEANINGFUL 0 /* every touch also touches the sanitizer's shadow */
#else
#define RSS_IS_MEANINGFUL 1
#endif

/* Measures, on a fresh thread, what making its stack resident adds. */
static void *stack_growth(void *arg)
{
    size_t *grew = arg, r0 = 0, r1 = 0, r2 = 0;
    snug_proc_rss_exact(&r0, NULL);
    snug_proc_prefault_stack();
    snug_proc_rss_exact(&r1, NULL);
    snug_proc_prefault_stack(); /* a second time: nothing new */
    snug_proc_rss_exact(&r2, NULL);
    grew[0] = r1 - r0;
    grew[1] = r2 - r1;
    return NULL;
}

/* The exact resident set counts each page touched, to the page; a thread's
 * stack made resident is SNUG_STACK_PREFAULT_BYTES, once. */
static void test_resident_to_the_page(void)
{
    snug_error err = {0};
    enum { PAGES = 100, TOUCHED = 37 };
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *m = mmap(NULL, (size_t)PAGES * (size_t)page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED, "mmap");
    if (m == MAP_FAILED) return;
    size_t r0 = 0, r1 = 0;
    CHECK_OK(snug_proc_rss_exact(&r0, &err), &err); /* once to bring its own pages in */
    CHECK_OK(snug_proc_rss_exact(&r0, &err), &err);
    for (int i = 0; i < TOUCHED; i++) m[(size_t)i * 2 * (size_t)page] = 1;
    CHECK_OK(snug_proc_rss_exact(&r1, &err), &err);
    if (RSS_IS_MEANINGFUL)
        CHECK(r1 - r0 == (size_t)TOUCHED * (size_t)page, "%d pages touched: the resident set "
              "grew %zu bytes", TOUCHED, r1 - r0);
    munmap(m, (size_t)PAGES * (size_t)page);

    size_t grew[2] = {0, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, stack_growth, grew) == 0, "a thread");
    pthread_join(t, NULL);
    /* the pages below the caller's frame it had not touched yet, at most all of them */
    if (RSS_IS_MEANINGFUL)
        CHECK(grew[0] + 2 * (size_t)page >= SNUG_STACK_PREFAULT_BYTES &&
              grew[0] <= SNUG_STACK_PREFAULT_BYTES + (size_t)page && grew[1] == 0,
              "the stack made resident: %zu bytes, then %zu more", grew[0], grew[1]);
}

static void test_jansson_hooks(void)
{
    size_t base = cur_of(SNUG_MEM_OTHER);
    json_t *o = NULL;
    snug_error err = {0};
    const char text[] = "{\"a\": [1, 2, 3], \"b\": {\"c\": \"a longer string value here\"}}";
    CHECK_OK(snug_json_parse(text, sizeof text - 1, "t.json", &o, &err), &err);
    CHECK(cur_of(SNUG_MEM_OTHER) > base, "jansson's nodes are charged to other");
    json_decref(o);
    CHECK(cur_of(SNUG_MEM_OTHER) == base, "and released on decref");
    /* jansson out of memory: fail its first allocation */
    snug_mem_fail_at(1);
    char want[96]; /* admitted for what jansson will take for this text (json.h) */
    snprintf(want, sizeof want, "t.json: parsing 58 bytes of JSON: out of memory: other request of %zu bytes",
             snug_json_parse_bound(text, sizeof text - 1));
    CHECK(snug_json_parse_bound(text, sizeof text - 1) < 58 * SNUG_JSON_BYTES_PER_TEXT_BYTE + SNUG_JSON_BYTES_FIXED,
          "under the old 192 a byte");
    CHECK_FAILS(snug_json_parse(text, sizeof text - 1, "t.json", &o, &err), &err, SNUG_NOMEM, want);
    snug_mem_fail_at(0);
    CHECK(cur_of(SNUG_MEM_OTHER) == base, "nothing leaked on failure");
}

static snug_status regex_oom(void *ctx, snug_error *err)
{
    (void)ctx;
    snug_regex *re = NULL;
    snug_regex_matcher *m = NULL;
    snug_status st = snug_regex_compile("a+b", &re, err);
    if (st == SNUG_OK) st = snug_regex_matcher_create(re, &m, err);
    snug_regex_matcher_free(m);
    snug_regex_free(re);
    return st;
}

static void test_pcre2_hooks(void)
{
    size_t base = cur_of(SNUG_MEM_OTHER);
    snug_regex *re = NULL;
    snug_regex_matcher *m = NULL;
    snug_error err = {0};
    CHECK_OK(snug_regex_compile("\\p{L}+|\\p{N}{1,3}", &re, &err), &err);
    CHECK_OK(snug_regex_matcher_create(re, &m, &err), &err);
    CHECK(cur_of(SNUG_MEM_OTHER) > base, "PCRE2's pattern and match data are charged to other");
    const char *s = "h\xc3\xa9llo 12345 \xff\xfe ab";
    size_t b = 0, e = 0;
    CHECK(snug_regex_find(re, m, s, strlen(s), 0, &b, &e) == 1 && b == 0 && e == 6,
          "letters incl. a 2-byte one: [%zu, %zu)", b, e);
    CHECK(snug_regex_find(re, m, s, strlen(s), 6, &b, &e) == 1 && b == 7 && e == 10,
          "1-3 digits: [%zu, %zu)", b, e);
    CHECK(snug_regex_find(re, m, s, strlen(s), 12, &b, &e) == 1 && b == 16 && e == 18,
          "invalid UTF-8 bytes are skipped, not an error: [%zu, %zu)", b, e);
    CHECK(snug_regex_find(re, m, s, strlen(s), 18, &b, &e) == 0, "no more matches");
    snug_regex_matcher_free(m);
    snug_regex_free(re);
    CHECK(cur_of(SNUG_MEM_OTHER) == base, "freed back to baseline");
    CHECK_FAILS(snug_regex_compile("(unclosed", &re, &err), &err, SNUG_FORMAT,
                "regex rejected at offset 9");
    CHECK(cur_of(SNUG_MEM_OTHER) == base, "a rejected pattern leaks nothing");
    CHECK(test_oom_loop("regex", regex_oom, NULL, NULL, 50) >= 3, "compile and matcher allocate");
    /* catastrophic backtracking is cut off, not waited for */
    CHECK_OK(snug_regex_compile("(a+)+$", &re, &err), &err);
    CHECK_OK(snug_regex_matcher_create(re, &m, &err), &err);
    char evil[64];
    memset(evil, 'a', 40);
    evil[40] = 'b';
    int rc = snug_regex_find(re, m, evil, 41, 0, &b, &e);
    CHECK(rc < 0 || rc == 0, "a hostile pattern ends (%d)", rc);
    snug_regex_matcher_free(m);
    snug_regex_free(re);
}

static void test_status_names(void)
{
    CHECK(strcmp(snug_status_str(SNUG_NOMEM), "SNUG_NOMEM") == 0, "NOMEM");
    CHECK(strcmp(snug_status_str(SNUG_FORMAT), "SNUG_FORMAT") == 0, "FORMAT");
    CHECK(strcmp(snug_status_str((snug_status)-99), "SNUG_UNKNOWN_STATUS") == 0, "unknown");
}

/* The event log: one event per allocation and free, exact bytes, marks
 * with the RSS; replaying it from start_bytes gives today's counters. */
static void test_trace_events(void)
{
    snug_error err = {0};
    CHECK_OK(snug_mem_trace_start(64, &err), &err);
    snug_mem_trace_mark("first");
    void *a = snug_mem_alloc(SNUG_MEM_WEIGHTS, 1000, &err);
    void *b = snug_mem_alloc(SNUG_MEM_KV, 100000, &err);
    size_t ha = snug_mem_block_bytes(a), hb = snug_mem_block_bytes(b);
    snug_mem_free(a);
    snug_mem_trace_mark("second");
    snug_mem_trace t;
    snug_mem_trace_get(&t);
    CHECK(t.n_events == 6 && t.dropped == 0, "%zu events, %lld dropped", t.n_events,
          (long long)t.dropped);
    static const struct { uint32_t kind, cat; } want[] = {
        {SNUG_MEM_EVENT_MARK, 0}, {SNUG_MEM_EVENT_ALLOC, SNUG_MEM_WEIGHTS},
        {SNUG_MEM_EVENT_ALLOC, SNUG_MEM_KV}, {SNUG_MEM_EVENT_RSS, SNUG_MEM_KV},
        {SNUG_MEM_EVENT_FREE, SNUG_MEM_WEIGHTS}, {SNUG_MEM_EVENT_MARK, 0}};
    const size_t bytes[] = {0, ha, hb, 0, ha, 0};
    for (size_t i = 0; i < t.n_events && i < 6; i++) {
        const snug_mem_event *e = &t.events[i];
        CHECK(e->kind == want[i].kind && e->cat == want[i].cat, "event %zu: kind %u cat %u", i,
              e->kind, e->cat);
        if (e->kind != SNUG_MEM_EVENT_MARK)
            CHECK(e->bytes == bytes[i] && !e->label, "event %zu: %zu bytes", i, e->bytes);
        else
            CHECK(e->bytes == 0 && e->label, "mark %zu: %zu bytes", i, e->bytes);
        /* the RSS is read for marks and the large block (before and after it is
         * populated), never for the small one */
        bool large = i == 2 || i == 3, mark = e->kind == SNUG_MEM_EVENT_MARK;
        CHECK((e->rss > 0) == (mark || large), "event %zu: RSS %zu", i, e->rss);
        if (i == 3)
            CHECK(e->rss >= t.events[2].rss + hb - SNUG_MEM_HEADER_BYTES - 4096,
                  "populated: RSS %zu after, %zu before a block of %zu", e->rss,
                  t.events[2].rss, hb);
        CHECK(i == 0 || e->ns >= t.events[i - 1].ns, "time runs forward at %zu", i);
    }
    CHECK(t.n_events == 6 && strcmp(t.events[0].label, "first") == 0 &&
          strcmp(t.events[5].label, "second") == 0, "mark labels");
    /* replay */
    size_t now[SNUG_MEM_N_CATS];
    memcpy(now, t.start_bytes, sizeof now);
    for (size_t i = 0; i < t.n_events; i++) {
        const snug_mem_event *e = &t.events[i];
        if (e->kind == SNUG_MEM_EVENT_ALLOC) now[e->cat] += e->bytes;
        if (e->kind == SNUG_MEM_EVENT_FREE) now[e->cat] -= e->bytes;
    }
    for (int c = 0; c < SNUG_MEM_N_CATS; c++)
        CHECK(now[c] == cur_of((snug_mem_cat)c), "replayed %s: %zu, counter %zu",
              snug_mem_cat_name((snug_mem_cat)c), now[c], cur_of((snug_mem_cat)c));
    snug_mem_free(b);
    snug_mem_trace_stop();
    snug_mem_trace_get(&t);
    CHECK(t.events == NULL && t.n_events == 0, "stopped: no log");
    snug_mem_trace_mark("ignored"); /* no log: nothing happens */
    snug_mem_trace_stop();          /* twice: nothing happens */
}

/* A full log drops what does not fit, counts it, and allocates nothing. */
static void test_trace_full(void)
{
    snug_error err = {0};
    CHECK_OK(snug_mem_trace_start(3, &err), &err);
    int64_t allocs = snug_mem_alloc_count();
    for (int i = 0; i < 5; i++) snug_mem_free(snug_mem_alloc(SNUG_MEM_OTHER, 10, &err));
    snug_mem_trace t;
    snug_mem_trace_get(&t);
    CHECK(t.n_events == 3 && t.dropped == 7, "%zu kept, %lld dropped", t.n_events,
          (long long)t.dropped);
    CHECK(snug_mem_alloc_count() - allocs == 5, "the log itself allocated nothing");
    snug_mem_trace_stop();
}

static void *thread_churn_traced(void *arg)
{
    (void)arg;
    for (int k = 0; k < 200; k++) snug_mem_free(snug_mem_alloc(SNUG_MEM_ACTIVATIONS, 64 + k, NULL));
    return NULL;
}

/* Threads allocating at once: every event recorded once. */
static void test_trace_concurrent(void)
{
    snug_error err = {0};
    CHECK_OK(snug_mem_trace_start(N_THREADS * 400 + 10, &err), &err);
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) pthread_create(&th[i], NULL, thread_churn_traced, NULL);
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    snug_mem_trace t;
    snug_mem_trace_get(&t);
    int64_t alloc = 0, freed = 0, n_alloc = 0;
    for (size_t i = 0; i < t.n_events; i++) {
        if (t.events[i].kind == SNUG_MEM_EVENT_ALLOC) alloc += (int64_t)t.events[i].bytes, n_alloc++;
        if (t.events[i].kind == SNUG_MEM_EVENT_FREE) freed += (int64_t)t.events[i].bytes;
    }
    CHECK(t.n_events == N_THREADS * 400 && t.dropped == 0 && n_alloc == N_THREADS * 200 &&
          alloc == freed && alloc > 0,
          "%zu events, %lld allocations, %lld bytes in, %lld out", t.n_events, (long long)n_alloc,
          (long long)alloc, (long long)freed);
    snug_mem_trace_stop();
}

static snug_status trace_start_op(void *ctx, snug_error *err)
{
    (void)ctx;
    return snug_mem_trace_start(1000, err);
}

static void trace_stop_undo(void *ctx)
{
    (void)ctx;
    snug_mem_trace_stop();
}

static void test_trace_oom(void)
{
    CHECK(test_oom_loop("event log", trace_start_op, trace_stop_undo, NULL, 5) == 1,
          "the log's one block fails cleanly");
    snug_error err = {0};
    CHECK_FAILS(snug_mem_trace_start(SIZE_MAX / 8, &err), &err, SNUG_NOMEM, "too large");
}

int main(void)
{
    RUN(test_held_bytes_rule);
    RUN(test_exact_counts);
    RUN(test_categories_are_separate);
    RUN(test_peak_and_reset);
    RUN(test_capacity);
    RUN(test_fault_injection);
    RUN(test_concurrent_counts);
    RUN(test_concurrent_churn);
    RUN(test_resident_memory);
    RUN(test_resident_to_the_page);
    RUN(test_jansson_hooks);
    RUN(test_pcre2_hooks);
    RUN(test_status_names);
    RUN(test_trace_events);
    RUN(test_trace_full);
    RUN(test_trace_concurrent);
    RUN(test_trace_oom);
    return test_summary();
}
