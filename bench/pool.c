/*
 * pool.c: what an empty run of the worker pool (src/base/pool.h) costs,
 * against an empty OpenMP parallel region in the same process and against
 * the floor of any hand-off between two threads measured in the same run (a
 * cache line bounced between two threads and back: a run needs at least
 * that, the bump going out and the done count coming back).
 *
 *   pool [THREADS]     default 2
 *
 * Prints, in ns per run (medians over batches):
 *   - the floor (one round trip of a cache line between two threads);
 *   - the pool with its workers spinning (back-to-back runs);
 *   - `#pragma omp parallel num_threads(THREADS)`, empty, back-to-back:
 *     libgomp's cost depends on OMP_WAIT_POLICY (printed): active spins,
 *     passive sleeps at once, unset spins a while then sleeps;
 *   - both after a 5 ms pause (the pool's workers asleep on the futex;
 *     libgomp's asleep with passive, but with the policy unset its spin
 *     can outlast 5 ms: then this is its awake cost under a cold cache);
 *   - the pool after pauses around its default spin time (the cliff where
 *     runs start paying a wake-up), which is what that default rests on.
 * Not part of make test.
 */
#include "base/pool.h"
#include "base/sysinfo.h"
#include "stats.h"

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { BATCHES = 15, WAKE_SAMPLES = 101 };

static double now(void) { return snug_now_seconds(); }

static void sleep_us(int64_t us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* ---- the floor: a cache line there and back ---------------------------- */

static _Alignas(64) _Atomic int64_t g_ball;
static int64_t g_volleys;

static void *ping_partner(void *arg)
{
    (void)arg;
    for (int64_t i = 0; i < g_volleys; i++) {
        while (atomic_load_explicit(&g_ball, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&g_ball, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

/* ns for one round trip of a cache line between two threads. */
static double round_trip_ns(void)
{
    double per[BATCHES];
    g_volleys = 20000;
    for (int b = 0; b < BATCHES; b++) {
        atomic_store(&g_ball, 0);
        pthread_t t;
        if (pthread_create(&t, NULL, ping_partner, NULL) != 0) return 0;
        double t0 = now();
        for (int64_t i = 0; i < g_volleys; i++) {
            atomic_store_explicit(&g_ball, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&g_ball, memory_order_acquire) != 2 * i + 2) {
            }
        }
        per[b] = (now() - t0) / (double)g_volleys * 1e9;
        pthread_join(t, NULL);
    }
    return bench_median(per, BATCHES);
}

/* ---- the pool and OpenMP --------------------------------------------- */

static void empty(void *ctx, int32_t t, int32_t n) { (void)ctx, (void)t, (void)n; }

static volatile int g_sink;

/* ns per empty run, back to back. */
static double pool_run_ns(snug_pool *p, int runs)
{
    double per[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now();
        for (int i = 0; i < runs; i++) snug_pool_run(p, empty, NULL);
        per[b] = (now() - t0) / runs * 1e9;
    }
    return bench_median(per, BATCHES);
}

static double omp_region_ns(int threads, int runs)
{
    double per[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now();
        for (int i = 0; i < runs; i++) {
#pragma omp parallel num_threads(threads)
            g_sink = 0;
        }
        per[b] = (now() - t0) / runs * 1e9;
    }
    return bench_median(per, BATCHES);
}

/* One run's ns after a pause of gap_us, median and 90th percentile. */
static void after_pause(snug_pool *p, int threads, int64_t gap_us, double *med, double *p90)
{
    double v[WAKE_SAMPLES];
    for (int i = 0; i < WAKE_SAMPLES; i++) {
        sleep_us(gap_us);
        double t0 = now();
        if (p) {
            snug_pool_run(p, empty, NULL);
        } else {
#pragma omp parallel num_threads(threads)
            g_sink = 0;
        }
        v[i] = (now() - t0) * 1e9;
    }
    *med = bench_median(v, WAKE_SAMPLES);
    *p90 = bench_percentile(v, WAKE_SAMPLES, 0.9);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    const char *policy = getenv("OMP_WAIT_POLICY");
    snug_error err = {0};
    snug_pool *p = NULL;
    if (snug_pool_create(threads, 0, &p, &err) != SNUG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%d threads, %d CPUs for this process (snug_cpu_count), OMP_WAIT_POLICY %s, "
           "pool spin %d us\n", threads, snug_cpu_count(), policy ? policy : "unset",
           (int)SNUG_POOL_SPIN_US_DEFAULT);

    /* the pool first, then OpenMP, so that neither's spinning threads take
     * the cores from the other's measurement (libgomp's team spins on after
     * a region unless OMP_WAIT_POLICY is passive; the pool is freed first) */
    double floor = round_trip_ns();
    pool_run_ns(p, 1000); /* warm */
    double pool_ns = pool_run_ns(p, 20000);
    double pool_med, pool_p90;
    after_pause(p, threads, 5000, &pool_med, &pool_p90);
    static const int64_t gaps[] = {20, 100, 300, 450, 550, 1000};
    double gap_med[SNUG_ARRAY_LEN(gaps)], gap_p90[SNUG_ARRAY_LEN(gaps)];
    for (size_t i = 0; i < SNUG_ARRAY_LEN(gaps); i++)
        after_pause(p, threads, gaps[i], &gap_med[i], &gap_p90[i]);
    snug_pool_free(p);

    omp_region_ns(threads, 1000); /* warm: libgomp's team exists */
    double omp_ns = omp_region_ns(threads, 20000);
    double omp_med, omp_p90;
    after_pause(NULL, threads, 5000, &omp_med, &omp_p90);

    printf("floor: a cache line between two threads and back  %9.0f ns\n", floor);
    printf("empty run, back to back (workers awake)\n");
    printf("  pool                                           %9.0f ns  (%.1fx the floor)\n",
           pool_ns, pool_ns / floor);
    printf("  omp parallel                                   %9.0f ns  (%.1fx the floor, %.2fx "
           "the pool)\n", omp_ns, omp_ns / floor, omp_ns / pool_ns);
    printf("empty run after a 5 ms pause (workers asleep)        median        p90\n");
    printf("  pool                                           %9.0f ns %9.0f ns\n", pool_med,
           pool_p90);
    printf("  omp parallel                                   %9.0f ns %9.0f ns\n", omp_med,
           omp_p90);
    printf("pool: empty run after a pause of (default spin %d us)\n",
           (int)SNUG_POOL_SPIN_US_DEFAULT);
    for (size_t i = 0; i < SNUG_ARRAY_LEN(gaps); i++)
        printf("  %5lld us                                       %9.0f ns %9.0f ns\n",
               (long long)gaps[i], gap_med[i], gap_p90[i]);
    return 0;
}
