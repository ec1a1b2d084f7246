/*
 * pool.c: the worker pool (persistent threads that spin, then sleep on a
 * futex). How many CPUs the process may use is sysinfo.c's (snug_cpu_count).
 *
 * A run, seen from the caller (thread 0): publish fn and ctx, reset the done
 * and work counters, bump the generation word (the release that publishes
 * them), wake the workers with one FUTEX_WAKE if the sleepers counter says
 * any sleeps, run thread 0's share, then spin until the done counter says
 * every worker has finished.
 * Seen from a worker: wait for the generation to move past the one it last
 * ran (spinning for spin_us, then sleeping on the word), run its share, count
 * itself done, and wait again: the spin starts afresh after every run, so
 * that the back-to-back runs of a forward step never find it asleep.
 * The sleep and the wake cannot miss each other: a worker adds itself to the
 * sleepers and then reads the generation; the caller bumps the generation and
 * then reads the sleepers (all sequentially consistent, so at least one of
 * the two sees the other's write), and FUTEX_WAIT itself compares the word,
 * so a bump between the worker's check and its wait returns at once.
 */
#include "pool.h"

#include "mem.h"
#include "sysinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * Why SNUG_POOL_SPIN_US_DEFAULT is 500 us (bench/pool.c, 2 threads on the
 * 2-vCPU VM, Dec 2026, other jobs on the machine, so ranges): a run costs
 * 0.05-0.6 us when the workers spin, and 20-30 us (median; p90 35-130 us)
 * when one must be woken from the futex, the kernel's wake-up and the
 * scheduler's latency, which libgomp's passive wait pays on every region
 * (10-20 us there). The gaps between the runs of one forward step are a
 * kernel's length (under ~100 us at decode) and the gap between two decode
 * steps (sampling, scheduling, the HTTP side) a few hundred us: after
 * pauses of 20, 100 and 300 us a run still cost 0.2-0.7 us, after 450 us
 * and more (past the spin, the sleep's own slack included) 15-60 us. 500 us
 * keeps the workers awake through a busy server's gaps, while an idle one
 * gives its cores back within half a millisecond: at most 500 us of a core
 * per worker per idle period, against 20-30 us saved on every run after it.
 */

/* A thread's own state, on cache lines of its own. */
typedef struct pool_thread {
    alignas(64) snug_pool *pool;
    pthread_t tid;
    int32_t index;          /* its thread index (0: whoever calls snug_pool_run) */
    uint32_t sense;         /* its barrier sense: flips at every barrier */
    _Atomic int32_t cpu;    /* the CPU it last ran on, as far as it noted; -1 before */
} pool_thread;

struct snug_pool {
    /* set at creation, read by all */
    int32_t n_threads;
    int32_t n_started;      /* workers running (n_threads - 1 once created) */
    int64_t spin_ns;
    bool oversubscribed;    /* more threads than snug_cpu_count(): waiters yield */
    pool_thread *threads;   /* (n_threads), in the same block, after this struct */

    /* what the workers wait on, and the run it starts: written by the
     * caller before the generation is bumped (in_run by the caller only),
     * read by workers after */
    alignas(64) _Atomic uint32_t gen;   /* the futex word: bumped once per run */
    _Atomic int32_t n_sleepers;         /* workers asleep on gen, or about to be */
    _Atomic bool stop;                  /* set before the last bump: workers exit */
    _Atomic bool in_run;                /* the caller is in snug_pool_run (catches reentry) */
    snug_pool_fn fn;
    void *ctx;

    alignas(64) _Atomic int32_t n_done; /* workers finished with this run */
    alignas(64) _Atomic int64_t next;   /* snug_pool_next's counter */
    alignas(64) _Atomic int32_t barrier_count; /* threads arrived at the barrier */
    _Atomic uint32_t barrier_sense;     /* flips when the last one arrives */
};

/* ---- waiting --------------------------------------------------------- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the vDSO: no system call */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A bounded spin: spinner_step pauses once and says whether to go on
 * spinning. The clock is read every 64 pauses, the first read starting the
 * span, so that short waits never read it; once the pool's spin time has
 * passed it answers false for good.
 * Every SPIN_YIELD_NS of spinning it yields the CPU once. At every clock
 * read a thread also notes its CPU, and when another thread of the pool
 * last ran there it makes room: it yields, and a worker still sharing at
 * the next clock read moves itself to another CPU of its affinity mask (set
 * without that CPU, then set back). Why: the scheduler may wake a sleeping
 * worker onto the caller's CPU (always, on the 2-vCPU VM of the
 * measurements, likely because the guest takes the other, halted vCPU for
 * busy) and the two then share that CPU while the other idles: a worker
 * spinning there after its share held the caller off for ~1 ms, a
 * scheduler slice, per run; yielding alone brought that to ~10 us per run
 * but left the threads stacked, as the load balancer never saw both
 * runnable; yield-then-move costs ~28 us for a run that wakes a sleeper
 * (mostly the wake itself) and leaves the threads apart. Threads on CPUs
 * of their own wait less than a clock read between back-to-back runs and
 * make no system call. When the pool has more threads than the process has
 * CPUs, sharing is unavoidable: it yields at every step instead of pausing
 * and never moves, so that a spinning thread does not hold a core that a
 * thread with work needs (3 threads on 2 CPUs: 800 us a run with pauses,
 * 5-8 us with yields). */
enum { SPIN_YIELD_NS = 20 * 1000 };

typedef struct spinner {
    uint32_t steps;
    bool expired;
    bool shared_before;     /* the last clock read found another thread on this CPU */
    int64_t t0, t_yield;
    int64_t yield_ns;       /* yield at least this often (SPIN_YIELD_NS) */
} spinner;

/* Moves the calling thread off cpu: its affinity mask without cpu, then
 * the mask as it was (the thread stays where the first call put it). Yields
 * instead when that cannot be done (cpu is its only one, or a mask larger
 * than cpu_set_t). */
static void move_off_cpu(int32_t cpu)
{
    cpu_set_t mask, others;
    if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof mask, &mask) != 0) {
        sched_yield();
        return;
    }
    others = mask;
    CPU_CLR(cpu, &others);
    if (CPU_COUNT(&others) == 0 || sched_setaffinity(0, sizeof others, &others) != 0) {
        sched_yield();
        return;
    }
    /* the mask as it was. Should the process's own have shrunk meanwhile (a
     * cpuset changed) the kernel refuses it: the narrower mask stays, which
     * holds only CPUs the process was allowed, and the next move restores
     * from whatever the mask is then */
    int restored = sched_setaffinity(0, sizeof mask, &mask);
    (void)restored;
}

/* Notes the CPU that thread self runs on in its slot (a store only when it
 * moved) and returns it. */
static int32_t publish_cpu(snug_pool *p, int32_t self)
{
    int32_t cpu = sched_getcpu(); /* glibc reads it from rseq: no system call */
    _Atomic int32_t *slot = &p->threads[self].cpu;
    if (atomic_load_explicit(slot, memory_order_relaxed) != cpu)
        atomic_store_explicit(slot, cpu, memory_order_relaxed);
    return cpu;
}

/* True when a thread of p other than self last ran on cpu. */
static bool cpu_shared(const snug_pool *p, int32_t self, int32_t cpu)
{
    for (int32_t i = 0; i < p->n_threads; i++)
        if (i != self && atomic_load_explicit(&p->threads[i].cpu, memory_order_relaxed) == cpu)
            return true;
    return false;
}

/* One step of thread self's spin: false once the spin time is over. */
static inline bool spinner_step(spinner *s, snug_pool *p, int32_t self)
{
    if (s->expired) return false;
    if (p->oversubscribed) sched_yield();
    else cpu_relax();
    if ((++s->steps & (p->oversubscribed ? 0 : 63)) != 0) return true;
    int64_t t = now_ns();
    if (s->t0 == 0) s->t0 = s->t_yield = t;
    if (t - s->t0 >= p->spin_ns) {
        s->expired = true;
        return false;
    }
    int32_t cpu = publish_cpu(p, self);
    bool shared = cpu_shared(p, self, cpu);
    if (shared && s->shared_before && self != 0 && !p->oversubscribed) {
        /* still there after yielding once: make room for good */
        move_off_cpu(cpu);
        publish_cpu(p, self);
        s->t_yield = t;
        shared = false;
    } else if (shared || t - s->t_yield >= s->yield_ns) {
        /* the other thread first (a caller waiting for this worker's
         * count is done at once), then move if it comes to that */
        sched_yield();
        s->t_yield = t;
    }
    s->shared_before = shared;
    return true;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
    /* returns at a wake, at once when *word != expected, or spuriously
     * (EINTR): the caller checks the word again in every case */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Waits until the generation differs from seen and returns it: spins for
 * the pool's spin time, then sleeps on the word (see the file's comment for
 * why no wake is lost). */
static uint32_t wait_generation(snug_pool *p, int32_t self, uint32_t seen)
{
    spinner s = {.yield_ns = SPIN_YIELD_NS};
    for (;;) {
        uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen) return g;
        if (spinner_step(&s, p, self)) continue;
        atomic_store_explicit(&p->threads[self].cpu, -1, memory_order_relaxed); /* on none */
        atomic_fetch_add_explicit(&p->n_sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&p->gen, memory_order_seq_cst) == seen) futex_wait(&p->gen, seen);
        atomic_fetch_sub_explicit(&p->n_sleepers, 1, memory_order_relaxed);
    }
}

static void *worker_main(void *arg)
{
    pool_thread *th = arg;
    snug_pool *p = th->pool;
    uint32_t seen = 0; /* the generation at creation */
    for (;;) {
        seen = wait_generation(p, th->index, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        publish_cpu(p, th->index);
        p->fn(p->ctx, th->index, p->n_threads);
        atomic_fetch_add_explicit(&p->n_done, 1, memory_order_release);
    }
    return NULL;
}

/* Stops the workers started so far (n_started) and joins them. */
static void pool_stop(snug_pool *p)
{
    atomic_store_explicit(&p->stop, true, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_seq_cst);
    futex_wake_all(&p->gen);
    for (int32_t i = 1; i <= p->n_started; i++) pthread_join(p->threads[i].tid, NULL);
    p->n_started = 0;
}

/* ---- the pool -------------------------------------------------------- */

snug_status snug_pool_create(int32_t n_threads, int32_t spin_us, snug_pool **out, snug_error *err)
{
    snug_status st = SNUG_OK;
    snug_pool *p = NULL;
    *out = NULL;
    if (n_threads < 1 || n_threads > SNUG_POOL_THREADS_MAX) {
        st = snug_errorf(err, SNUG_INVALID, "thread pool: %d threads; a pool has 1 to %d",
                         (int)n_threads, (int)SNUG_POOL_THREADS_MAX);
        goto fail;
    }
    if (spin_us < 0) {
        st = snug_errorf(err, SNUG_INVALID,
                         "thread pool: spin time %d us; it is 0 (the default) or more",
                         (int)spin_us);
        goto fail;
    }
    /* one block: the pool, then each thread's state */
    size_t at = 0, at_pool, at_threads;
    bool fits = snug_mem_carve(&at, sizeof(snug_pool), 1, &at_pool) &&
                snug_mem_carve(&at, sizeof(pool_thread), (size_t)n_threads, &at_threads);
    SNUG_ASSERT(fits); /* n_threads is bounded */
    char *block = snug_mem_alloc(SNUG_MEM_OTHER, at, err);
    if (!block) {
        st = snug_error_prefix(err, SNUG_NOMEM, "thread pool of %d threads: ", (int)n_threads);
        goto fail;
    }
    p = (snug_pool *)(block + at_pool);
    p->n_threads = n_threads;
    p->spin_ns = (int64_t)(spin_us ? spin_us : SNUG_POOL_SPIN_US_DEFAULT) * 1000;
    p->threads = (pool_thread *)(block + at_threads);
    p->oversubscribed = n_threads > snug_cpu_count();
    atomic_init(&p->in_run, false);
    atomic_init(&p->gen, 0);
    atomic_init(&p->n_sleepers, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->n_done, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->barrier_count, 0);
    atomic_init(&p->barrier_sense, 0);
    for (int32_t i = 0; i < n_threads; i++) {
        p->threads[i].pool = p;
        p->threads[i].index = i;
        atomic_init(&p->threads[i].cpu, -1);
    }
    for (int32_t i = 1; i < n_threads; i++) {
        int rc = pthread_create(&p->threads[i].tid, NULL, worker_main, &p->threads[i]);
        if (rc != 0) {
            st = snug_errorf(err, SNUG_INTERNAL,
                             "thread pool: starting worker %d of %d: pthread_create: %s",
                             (int)i, (int)(n_threads - 1), strerror(rc));
            goto fail;
        }
        p->n_started = i;
    }
    *out = p;
    return SNUG_OK;
fail:
    if (p) {
        pool_stop(p);
        snug_mem_free(p);
    }
    return st;
}

void snug_pool_run(snug_pool *p, snug_pool_fn fn, void *ctx)
{
    SNUG_ASSERT(!atomic_load_explicit(&p->in_run, memory_order_relaxed)); /* reentered */
    atomic_store_explicit(&p->in_run, true, memory_order_relaxed);
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    int32_t n = p->n_threads;
    bool woke = false;
    if (n > 1) {
        /* the workers are all between runs: they read fn and ctx only after
         * seeing the bump, and touched n_done last before this call saw it
         * reach n - 1 */
        p->fn = fn;
        p->ctx = ctx;
        publish_cpu(p, 0);
        atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->gen, 1, memory_order_seq_cst);
        woke = atomic_load_explicit(&p->n_sleepers, memory_order_seq_cst) > 0;
        if (woke) futex_wake_all(&p->gen);
    }
    fn(ctx, 0, n);
    if (n > 1) {
        /* after a wake, yield at every clock read: the scheduler may have
         * put the woken worker on this CPU, where it cannot have said so */
        spinner s = {.yield_ns = woke ? 0 : SPIN_YIELD_NS};
        while (atomic_load_explicit(&p->n_done, memory_order_acquire) != n - 1)
            if (!spinner_step(&s, p, 0)) sched_yield(); /* a slow worker */
    }
    atomic_store_explicit(&p->in_run, false, memory_order_relaxed);
}

void snug_pool_barrier(snug_pool *p, int32_t thread)
{
    SNUG_ASSERT(thread >= 0 && thread < p->n_threads);
    if (p->n_threads == 1) return;
    pool_thread *th = &p->threads[thread];
    uint32_t sense = th->sense ^ 1u;
    th->sense = sense;
    /* acq_rel: the last arrival's add follows every other arrival's (one
     * release sequence), so its release of the sense publishes all writes
     * made before the barrier by any thread */
    if (atomic_fetch_add_explicit(&p->barrier_count, 1, memory_order_acq_rel) == p->n_threads - 1) {
        atomic_store_explicit(&p->barrier_count, 0, memory_order_relaxed);
        atomic_store_explicit(&p->barrier_sense, sense, memory_order_release);
        return;
    }
    spinner s = {.yield_ns = SPIN_YIELD_NS};
    while (atomic_load_explicit(&p->barrier_sense, memory_order_acquire) != sense)
        if (!spinner_step(&s, p, thread)) sched_yield(); /* more threads than cores */
}

void snug_pool_split(int64_t n, int64_t unit, int32_t t, int32_t nt, int64_t *begin, int64_t *end)
{
    SNUG_ASSERT(nt >= 1 && t >= 0 && t < nt && unit >= 1);
    if (n < 0) n = 0;
    int64_t units = n / unit + (n % unit != 0);
    int64_t base = units / nt, extra = units % nt;
    /* the last `extra` threads take one unit more */
    int64_t first_extra = nt - extra;
    int64_t u0 = t * base + (t > first_extra ? t - first_extra : 0);
    int64_t u1 = u0 + base + (t >= first_extra);
    *begin = SNUG_MIN(u0 * unit, n);
    *end = SNUG_MIN(u1 * unit, n);
}

int64_t snug_pool_next(snug_pool *p, int64_t n)
{
    int64_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    return i < n ? i : -1;
}

int32_t snug_pool_threads(const snug_pool *p) { return p->n_threads; }

void snug_pool_free(snug_pool *p)
{
    if (!p) return;
    SNUG_ASSERT(!atomic_load_explicit(&p->in_run, memory_order_relaxed));
    pool_stop(p);
    snug_mem_free(p);
}
