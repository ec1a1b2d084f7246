/*
 * test_pool.c: the worker pool (every thread index once per run, back-to-
 * back runs, runs that find the workers asleep, the barrier, the static
 * split, the dynamic counter, failures and leaks) and the CPU count.
 * A watchdog (alarm) turns a lost wake-up, which would hang, into a failure.
 */
#include "test.h"

#include "base/mem.h"
#include "base/pool.h"
#include "base/sysinfo.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_THREADS = 8, WATCHDOG_SECONDS = 300 };

/* One counter per thread, each on its own cache line. */
typedef struct padded_count {
    alignas(64) int64_t n;
} padded_count;

static void sleep_us(int64_t us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static snug_pool *make_pool(int32_t n, int32_t spin_us)
{
    snug_error err = {0};
    snug_pool *p = NULL;
    CHECK_OK(snug_pool_create(n, spin_us, &p, &err), &err);
    return p;
}

/* ---- one call per thread ---------------------------------------------- */

typedef struct calls_ctx {
    _Atomic int32_t calls[MAX_THREADS + 1];
    _Atomic int32_t wrong_n;       /* calls whose n_threads was not the pool's */
    _Atomic int32_t out_of_range;  /* calls whose thread index was outside [0, n) */
    _Atomic int32_t zero_elsewhere;/* thread 0 called on another thread than the caller */
    int32_t n;
    pthread_t caller;
} calls_ctx;

static void count_calls(void *arg, int32_t t, int32_t n)
{
    calls_ctx *c = arg;
    if (n != c->n) atomic_fetch_add(&c->wrong_n, 1);
    if (t < 0 || t >= n || t > MAX_THREADS) {
        atomic_fetch_add(&c->out_of_range, 1);
        return;
    }
    if (t == 0 && !pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->zero_elsewhere, 1);
    atomic_fetch_add(&c->calls[t], 1);
}

static void test_run_calls_each_thread_once(void)
{
    const int32_t counts[] = {1, 2, 3, 8}; /* 8: more threads than the machine's cores */
    for (size_t k = 0; k < SNUG_ARRAY_LEN(counts); k++) {
        int32_t n = counts[k];
        snug_pool *p = make_pool(n, 50);
        if (!p) return;
        CHECK(snug_pool_threads(p) == n, "snug_pool_threads = %d, want %d", snug_pool_threads(p), n);
        for (int run = 0; run < 3; run++) {
            calls_ctx c = {.n = n, .caller = pthread_self()};
            snug_pool_run(p, count_calls, &c);
            for (int32_t t = 0; t < n; t++)
                CHECK(atomic_load(&c.calls[t]) == 1, "%d threads, run %d: thread %d called %d times",
                      n, run, t, atomic_load(&c.calls[t]));
            CHECK(atomic_load(&c.calls[n]) == 0, "%d threads: no call past the last thread", n);
            CHECK(c.wrong_n == 0, "%d threads: %d calls got another n_threads", n, c.wrong_n);
            CHECK(c.out_of_range == 0, "%d threads: %d calls outside [0, n)", n, c.out_of_range);
            CHECK(c.zero_elsewhere == 0, "%d threads: thread 0 ran off the caller", n);
        }
        snug_pool_free(p);
    }
    snug_pool_free(NULL);
}

/* ---- many runs -------------------------------------------------------- */

typedef struct counts_ctx {
    padded_count per_thread[MAX_THREADS];
} counts_ctx;

static void bump(void *arg, int32_t t, int32_t n)
{
    (void)n;
    ((counts_ctx *)arg)->per_thread[t].n++;
}

static void test_back_to_back_runs(void)
{
    const int32_t counts[] = {2, 3};
    enum { RUNS = 10000 };
    for (size_t k = 0; k < SNUG_ARRAY_LEN(counts); k++) {
        int32_t n = counts[k];
        snug_pool *p = make_pool(n, 0);
        if (!p) return;
        counts_ctx c = {0};
        for (int r = 0; r < RUNS; r++) snug_pool_run(p, bump, &c);
        for (int32_t t = 0; t < n; t++)
            CHECK(c.per_thread[t].n == RUNS, "%d threads: thread %d ran %lld times, want %d", n, t,
                  (long long)c.per_thread[t].n, RUNS);
        snug_pool_free(p);
    }
}

static void test_runs_that_wake_sleepers(void)
{
    enum { RUNS = 40, SPIN_US = 50, GAP_US = 2000 };
    snug_pool *p = make_pool(3, SPIN_US);
    if (!p) return;
    counts_ctx c = {0};
    for (int r = 0; r < RUNS; r++) {
        sleep_us(GAP_US); /* 40 spin times: the workers are asleep */
        snug_pool_run(p, bump, &c);
        if (r % 2) snug_pool_run(p, bump, &c); /* and one right after, when they are awake */
    }
    int64_t want = RUNS + RUNS / 2;
    for (int32_t t = 0; t < 3; t++)
        CHECK(c.per_thread[t].n == want, "thread %d ran %lld times, want %lld", t,
              (long long)c.per_thread[t].n, (long long)want);
    snug_pool_free(p);
}

/* The scheduler state of thread tid of this process ('R' running or
 * runnable, 'S' asleep, ...), from /proc; '?' when it cannot be read. */
static char thread_state(pid_t tid)
{
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return '?';
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *paren = strrchr(text, ')'); /* "tid (name) S ..." */
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

typedef struct tid_ctx {
    _Atomic pid_t tid[MAX_THREADS];
} tid_ctx;

static void note_tid(void *arg, int32_t t, int32_t n)
{
    (void)n;
    atomic_store(&((tid_ctx *)arg)->tid[t], (pid_t)syscall(SYS_gettid));
}

/* Idle workers stop spinning after spin_us: after a pause of 100 ms, two
 * workers with a 50 us spin are asleep and used almost no CPU; one with a
 * spin of 10 s is still running or runnable (not asleep: CPU time would
 * depend on what else the machine runs). */
static void test_idle_workers_sleep(void)
{
    tid_ctx c = {0};
    snug_pool *p = make_pool(3, 50);
    if (!p) return;
    snug_pool_run(p, note_tid, &c);
    double t0 = cpu_seconds();
    sleep_us(100000);
    double asleep = cpu_seconds() - t0;
    CHECK(asleep < 0.010, "two workers with a 50 us spin used %.1f ms of CPU in a 100 ms pause",
          asleep * 1e3);
    for (int t = 1; t < 3; t++)
        CHECK(thread_state(c.tid[t]) == 'S', "worker %d with a 50 us spin is in state %c after "
              "100 ms idle, want S (asleep)", t, thread_state(c.tid[t]));
    snug_pool_free(p); /* wakes and joins sleeping workers */

    p = make_pool(2, 10 * 1000 * 1000);
    if (!p) return;
    snug_pool_run(p, note_tid, &c);
    sleep_us(100000);
    char state = thread_state(c.tid[1]);
    CHECK(state == 'R', "a worker with a 10 s spin is in state %c after 100 ms idle, want R "
          "(spinning)", state);
    snug_pool_free(p); /* stops a spinning worker */
}

/* ---- the barrier ------------------------------------------------------- */

typedef struct barrier_ctx {
    snug_pool *pool;
    int32_t iters;
    int64_t slot[MAX_THREADS];     /* phase 1: thread t writes slot t (plain memory) */
    padded_count bad[MAX_THREADS]; /* phase 2: reads that did not see phase 1 */
    padded_count round;            /* the run's number, written by the caller between runs */
} barrier_ctx;

static void barrier_phases(void *arg, int32_t t, int32_t n)
{
    barrier_ctx *c = arg;
    for (int32_t i = 0; i < c->iters; i++) {
        int64_t stamp = (c->round.n * c->iters + i) * MAX_THREADS;
        c->slot[t] = stamp + t;
        snug_pool_barrier(c->pool, t);
        for (int32_t u = 0; u < n; u++)
            if (c->slot[u] != stamp + u) c->bad[t].n++;
        snug_pool_barrier(c->pool, t); /* nobody writes the next phase 1 before all have read */
    }
}

static void test_barrier(void)
{
    const int32_t counts[] = {1, 2, 3, 8};
    for (size_t k = 0; k < SNUG_ARRAY_LEN(counts); k++) {
        int32_t n = counts[k];
        snug_pool *p = make_pool(n, 50);
        if (!p) return;
        barrier_ctx c = {.pool = p, .iters = n > 2 ? 300 : 3000};
        enum { RUNS = 10 };
        for (c.round.n = 0; c.round.n < RUNS; c.round.n++) snug_pool_run(p, barrier_phases, &c);
        for (int32_t t = 0; t < n; t++)
            CHECK(c.bad[t].n == 0, "%d threads: thread %d read %lld stale slots after the barrier",
                  n, t, (long long)c.bad[t].n);
        int64_t last = ((RUNS - 1) * (int64_t)c.iters + c.iters - 1) * MAX_THREADS;
        for (int32_t t = 0; t < n; t++)
            CHECK(c.slot[t] == last + t, "%d threads: slot %d holds %lld, want %lld", n, t,
                  (long long)c.slot[t], (long long)(last + t));
        snug_pool_free(p);
    }
}

/* ---- the static split -------------------------------------------------- */

static void test_split(void)
{
    int64_t cases = 0, gaps = 0, unaligned = 0, partial = 0, unbalanced = 0, inverted = 0;
    char first_bad[200] = "";
    const int64_t big[] = {4096, 4097, 151936, 1000003};
    for (int64_t n = 0; n < 200 + (int64_t)SNUG_ARRAY_LEN(big); n++) {
        int64_t items = n < 200 ? n : big[n - 200];
        for (int64_t unit = 1; unit <= 9; unit++) {
            for (int32_t nt = 1; nt <= 12; nt++) {
                cases++;
                int64_t expect_begin = 0, lo = INT64_MAX, hi = 0;
                bool bad = false;
                for (int32_t t = 0; t < nt; t++) {
                    int64_t b = -1, e = -1;
                    snug_pool_split(items, unit, t, nt, &b, &e);
                    if (b != expect_begin) gaps++, bad = true;      /* contiguous, disjoint */
                    if (e < b) inverted++, bad = true;
                    if (b % unit != 0) unaligned++, bad = true;
                    if (e != items && (e - b) % unit != 0) partial++, bad = true;
                    lo = SNUG_MIN(lo, e - b);
                    hi = e - b > hi ? e - b : hi;
                    expect_begin = e;
                }
                if (expect_begin != items) gaps++, bad = true; /* covers [0, n) */
                if (hi - lo > unit) unbalanced++, bad = true;
                if (bad && !first_bad[0])
                    snprintf(first_bad, sizeof first_bad, "n %lld, unit %lld, %d threads",
                             (long long)items, (long long)unit, nt);
            }
        }
    }
    CHECK(gaps == 0, "%lld of %lld splits leave a gap, overlap or miss the end (first: %s)",
          (long long)gaps, (long long)cases, first_bad);
    CHECK(inverted == 0, "%lld parts end before they begin (first: %s)", (long long)inverted,
          first_bad);
    CHECK(unaligned == 0, "%lld parts begin off a unit boundary (first: %s)", (long long)unaligned,
          first_bad);
    CHECK(partial == 0, "%lld parts not ending at n hold a partial unit (first: %s)",
          (long long)partial, first_bad);
    CHECK(unbalanced == 0, "%lld splits differ by more than a unit (first: %s)",
          (long long)unbalanced, first_bad);

    int64_t b, e;
    snug_pool_split(0, 4, 2, 3, &b, &e);
    CHECK(b == 0 && e == 0, "n = 0: an empty part [0, 0), got [%lld, %lld)", (long long)b,
          (long long)e);
    snug_pool_split(2, 1, 0, 4, &b, &e);
    CHECK(b == e, "n = 2 < 4 threads: thread 0 idles, got [%lld, %lld)", (long long)b,
          (long long)e);
    snug_pool_split(9, 4, 1, 2, &b, &e);
    CHECK(b == 4 && e == 9, "9 items in units of 4 over 2 threads: [4, 9) for thread 1 (the extra "
          "unit goes with the short one), got [%lld, %lld)", (long long)b, (long long)e);
}

/* ---- the dynamic counter ----------------------------------------------- */

enum { N_ITEMS = 20000 };

typedef struct next_ctx {
    snug_pool *pool;
    int64_t n;
    _Atomic int32_t taken[N_ITEMS];
    padded_count per_thread[MAX_THREADS];
} next_ctx;

static void take_items(void *arg, int32_t t, int32_t n)
{
    (void)n;
    next_ctx *c = arg;
    for (int64_t i; (i = snug_pool_next(c->pool, c->n)) >= 0;) {
        atomic_fetch_add_explicit(&c->taken[i], 1, memory_order_relaxed);
        c->per_thread[t].n++;
    }
}

static void test_next(void)
{
    snug_pool *p = make_pool(3, 0);
    if (!p) return;
    static next_ctx c;
    memset(&c, 0, sizeof c);
    c.pool = p;
    const int64_t sizes[] = {N_ITEMS, 0, 1, 7, N_ITEMS}; /* each run starts again from 0 */
    for (size_t k = 0; k < SNUG_ARRAY_LEN(sizes); k++) {
        c.n = sizes[k];
        for (int64_t i = 0; i < N_ITEMS; i++) atomic_store(&c.taken[i], 0);
        memset(c.per_thread, 0, sizeof c.per_thread);
        snug_pool_run(p, take_items, &c);
        int64_t once = 0, other = 0, sum = 0;
        for (int64_t i = 0; i < N_ITEMS; i++) {
            int32_t v = atomic_load(&c.taken[i]);
            if (i < c.n) once += v == 1;
            else other += v != 0;
        }
        for (int t = 0; t < 3; t++) sum += c.per_thread[t].n;
        CHECK(once == c.n, "n = %lld: %lld indexes taken exactly once", (long long)c.n,
              (long long)once);
        CHECK(other == 0, "n = %lld: %lld indexes past n taken", (long long)c.n, (long long)other);
        CHECK(sum == c.n, "n = %lld: the threads took %lld in all", (long long)c.n, (long long)sum);
    }
    snug_pool_free(p);
}

/* ---- failures ---------------------------------------------------------- */

static snug_status create_op(void *ctx, snug_error *err)
{
    return snug_pool_create(4, 50, (snug_pool **)ctx, err);
}

static void free_op(void *ctx) { snug_pool_free(*(snug_pool **)ctx); }

static void test_create_failures(void)
{
    snug_pool *p = NULL;
    int failures = test_oom_loop("snug_pool_create", create_op, free_op, &p, 10);
    CHECK(failures == 1, "create makes one allocation (failed %d times before succeeding)",
          failures);

    snug_error err = {0};
    p = (snug_pool *)&err; /* must be set to NULL on failure */
    CHECK_FAILS(snug_pool_create(0, 0, &p, &err), &err, SNUG_INVALID, "0 threads");
    CHECK(p == NULL, "*out is NULL after a failure");
    CHECK_FAILS(snug_pool_create(SNUG_POOL_THREADS_MAX + 1, 0, &p, &err), &err, SNUG_INVALID,
                "a pool has 1 to 4096");
    CHECK_FAILS(snug_pool_create(2, -1, &p, &err), &err, SNUG_INVALID, "spin time -1 us");

    /* the pool's memory is charged to "other" */
    size_t before, during;
    snug_mem_status(SNUG_MEM_OTHER, &before, NULL, false);
    p = make_pool(MAX_THREADS, 0);
    snug_mem_status(SNUG_MEM_OTHER, &during, NULL, false);
    CHECK(during - before >= MAX_THREADS * 64, "the pool holds %zu bytes of other, at least a "
          "cache line per thread", during - before);
    snug_pool_free(p);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1 /* their shadow memory needs an unlimited address space */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

/* In a child whose address space has room for two more thread stacks, a
 * pool of 64 threads cannot start all its workers (glibc reuses the stacks
 * of threads that have ended, up to 40 MiB, so a few more may start):
 * SNUG_INTERNAL naming pthread_create, *out NULL, the started workers
 * joined and nothing held. The child reports by its exit status (one bit
 * per failed fact). */
static void test_create_thread_failure(void)
{
#ifdef UNDER_SANITIZER
    printf("  (skipped under a sanitizer: it needs the address space unlimited)\n");
#else
    pid_t pid = fork();
    if (pid == 0) {
        size_t stack = 0, before = 0, after = 0;
        unsigned long vm_pages = 0;
        pthread_attr_t attr;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%lu", &vm_pages) != 1) _exit(64);
        fclose(f);
        if (pthread_getattr_default_np(&attr) != 0 || pthread_attr_getstacksize(&attr, &stack))
            _exit(64);
        size_t room = (size_t)vm_pages * (size_t)sysconf(_SC_PAGESIZE) + 2 * stack + stack / 2;
        struct rlimit rl = {room, room};
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(64);
        snug_mem_status(SNUG_MEM_TOTAL, &before, NULL, false);
        snug_error err = {0};
        snug_pool *p = (snug_pool *)&err;
        snug_status st = snug_pool_create(64, 50, &p, &err);
        snug_mem_status(SNUG_MEM_TOTAL, &after, NULL, false);
        printf("  (with the address space limited: %s: %s)\n", snug_status_str(st), err.msg);
        fflush(stdout);
        _exit((st != SNUG_INTERNAL) | (!strstr(err.msg, "pthread_create")) << 1 |
              (p != NULL) << 2 | (after != before) << 3);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and wait");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 64, "the child set its limit (status %#x)",
          status);
    int bits = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    CHECK(WIFEXITED(status), "the child exited (status %#x): no crash, no hang on a join", status);
    CHECK(bits == 64 || !(bits & 1), "a failed pthread_create gives SNUG_INTERNAL");
    CHECK(bits == 64 || !(bits & 2), "the message names pthread_create");
    CHECK(bits == 64 || !(bits & 4), "*out is NULL after the failure");
    CHECK(bits == 64 || !(bits & 8), "the allocator holds what it held before");
#endif
}

static snug_pool *g_reentered;

static void run_again(void *arg, int32_t t, int32_t n)
{
    (void)arg, (void)n;
    if (t == 0) snug_pool_run(g_reentered, run_again, NULL);
}

static void test_reentry_aborts(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3); /* the assertion's message */
        g_reentered = make_pool(2, 50);
        snug_pool_run(g_reentered, run_again, NULL);
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork and wait");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
          "snug_pool_run from inside fn aborts (status %#x)", status);
}

/* ---- the CPU count ----------------------------------------------------- */

static void test_cpu_quota_parse(void)
{
    CHECK(snug_cpu_quota_parse("max 100000\n", NULL, NULL) == 0, "v2 \"max\": no cap");
    CHECK(snug_cpu_quota_parse("150000 100000\n", NULL, NULL) == 2, "v2 1.5 CPUs round up to 2");
    CHECK(snug_cpu_quota_parse("50000 100000", NULL, NULL) == 1, "v2 half a CPU is 1");
    CHECK(snug_cpu_quota_parse("400000 100000", NULL, NULL) == 4, "v2 4 CPUs");
    CHECK(snug_cpu_quota_parse(NULL, "-1\n", "100000\n") == 0, "v1 -1: no cap");
    CHECK(snug_cpu_quota_parse(NULL, "200000\n", "100000\n") == 2, "v1 2 CPUs");
    CHECK(snug_cpu_quota_parse(NULL, "250001", "100000") == 3, "v1 2.5 CPUs round up to 3");
    CHECK(snug_cpu_quota_parse("300000 100000", "100000", "100000") == 1,
          "both versions: the smaller cap");
    CHECK(snug_cpu_quota_parse("garbage", NULL, NULL) == 0, "v2 garbage: no cap");
    CHECK(snug_cpu_quota_parse("150000", NULL, NULL) == 0, "v2 without a period: no cap");
    CHECK(snug_cpu_quota_parse("150000 100000 7", NULL, NULL) == 0, "v2 trailing junk: no cap");
    CHECK(snug_cpu_quota_parse("0 100000", NULL, NULL) == 0, "v2 zero quota: no cap");
    CHECK(snug_cpu_quota_parse("", NULL, NULL) == 0, "v2 empty: no cap");
    CHECK(snug_cpu_quota_parse(NULL, "200000", NULL) == 0, "v1 without a period: no cap");
    CHECK(snug_cpu_quota_parse(NULL, "abc", "100000") == 0, "v1 garbage: no cap");
    CHECK(snug_cpu_quota_parse(NULL, "200000", "0") == 0, "v1 zero period: no cap");
    CHECK(snug_cpu_quota_parse("99999999999999999999 1", NULL, NULL) == 0,
          "v2 overflowing quota: no cap");
    CHECK(snug_cpu_quota_parse("9000000000000 1", NULL, NULL) == INT32_MAX,
          "v2 a huge quota caps at INT32_MAX");
    CHECK(snug_cpu_quota_parse(NULL, NULL, NULL) == 0, "nothing: no cap");
}

/* Writes text into dir/rel, making the folders on the way. */
static void put(const char *dir, const char *rel, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    for (char *slash = path + 1; (slash = strchr(slash, '/')); slash++) {
        *slash = '\0';
        mkdir(path, 0755);
        *slash = '/';
    }
    test_write_file(path, text, strlen(text));
}

static void test_cpu_cgroup_cap(void)
{
    char root[4096], v2[4200], v1[4200];
    test_tmpdir(root, sizeof root);
    snprintf(v2, sizeof v2, "%s/v2", root);
    snprintf(v1, sizeof v1, "%s/v1", root);
    /* v2: a quota on /a, none on /a/b (where the process is), another on /a/c */
    put(v2, "a/cpu.max", "300000 100000\n");
    put(v2, "a/b/cpu.max", "max 100000\n");
    put(v2, "a/c/cpu.max", "150000 100000\n");
    CHECK(snug_cpu_cgroup_cap("0::/a/b\n", v2) == 3, "v2: a parent's quota caps (got %d)",
          snug_cpu_cgroup_cap("0::/a/b\n", v2));
    CHECK(snug_cpu_cgroup_cap("0::/a/c\n", v2) == 2, "v2: the smallest quota on the way up "
          "(got %d)", snug_cpu_cgroup_cap("0::/a/c\n", v2));
    CHECK(snug_cpu_cgroup_cap("0::/a/c/\n", v2) == 2, "v2: a trailing slash (got %d)",
          snug_cpu_cgroup_cap("0::/a/c/\n", v2));
    CHECK(snug_cpu_cgroup_cap("0::/\n", v2) == 0, "v2: the root without cpu.max: no cap (got "
          "%d)", snug_cpu_cgroup_cap("0::/\n", v2));
    put(v2, "cpu.max", "100000 100000\n");
    CHECK(snug_cpu_cgroup_cap("0::/not/mounted/here\n", v2) == 1, "v2: a path not under the "
          "mount (another namespace) falls back to the mount itself (got %d)",
          snug_cpu_cgroup_cap("0::/not/mounted/here\n", v2));
    CHECK(snug_cpu_cgroup_cap(NULL, v2) == 1, "v2: no /proc/self/cgroup reads the mount (got %d)",
          snug_cpu_cgroup_cap(NULL, v2));

    /* v1 (a hybrid system: a v2 line without a cpu controller as well) */
    const char *text = "12:cpu,cpuacct:/docker/c1\n3:memory:/docker/c1\n0::/\n";
    put(v1, "cpu,cpuacct/docker/c1/cpu.cfs_quota_us", "-1\n");
    put(v1, "cpu,cpuacct/docker/c1/cpu.cfs_period_us", "100000\n");
    put(v1, "cpu,cpuacct/docker/cpu.cfs_quota_us", "400000\n");
    put(v1, "cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
    CHECK(snug_cpu_cgroup_cap(text, v1) == 4, "v1: the parent's quota (got %d)",
          snug_cpu_cgroup_cap(text, v1));
    put(v1, "cpu,cpuacct/docker/c1/cpu.cfs_quota_us", "150000\n");
    CHECK(snug_cpu_cgroup_cap(text, v1) == 2, "v1: the process's own, smaller quota (got %d)",
          snug_cpu_cgroup_cap(text, v1));
    CHECK(snug_cpu_cgroup_cap("4:memory:/docker/c1\n", v1) == 0, "v1: a line without the cpu "
          "controller names no path: the hierarchy's root caps nothing (got %d)",
          snug_cpu_cgroup_cap("4:memory:/docker/c1\n", v1));
    CHECK(snug_cpu_cgroup_cap("garbage\n\n::\n", v1) == 0, "garbage lines: no cap (got %d)",
          snug_cpu_cgroup_cap("garbage\n\n::\n", v1));
    test_rmtree(root);
}

static void test_cpu_count(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
    int32_t affinity = CPU_COUNT(&set);
    int32_t n = snug_cpu_count();
    CHECK(n >= 1, "snug_cpu_count() = %d, at least 1", n);
    CHECK(n <= affinity, "snug_cpu_count() = %d, at most the %d CPUs of the affinity mask", n,
          affinity);
    printf("  (snug_cpu_count: %d of %d CPUs in the affinity mask)\n", n, affinity);
}

int main(void)
{
    alarm(WATCHDOG_SECONDS); /* a lost wake-up hangs: end the program instead */
    RUN(test_run_calls_each_thread_once);
    RUN(test_back_to_back_runs);
    RUN(test_runs_that_wake_sleepers);
    RUN(test_idle_workers_sleep);
    RUN(test_barrier);
    RUN(test_split);
    RUN(test_next);
    RUN(test_create_failures);
    RUN(test_create_thread_failure);
    RUN(test_reentry_aborts);
    RUN(test_cpu_quota_parse);
    RUN(test_cpu_cgroup_cap);
    RUN(test_cpu_count);
    return test_summary();
}
