/*
 * pool.h: a pool of persistent worker threads for the forward pass (how
 * many CPUs it may use: snug_cpu_count, sysinfo.h).
 *
 * snug_pool_run runs one function on every thread of the pool at once (the
 * caller is thread 0) and returns when all have returned: what an OpenMP
 * parallel region does, without its dependence on OMP_WAIT_POLICY. An idle
 * worker spins (pause instruction) for a bounded time, so that the hundreds
 * of runs of a forward step find it awake (a run then costs no system call),
 * and then sleeps on a futex, so that a server between steps leaves the
 * cores to others. A waiting thread that finds another thread of the pool
 * on its CPU (the scheduler puts woken threads there) yields, and a worker
 * then moves itself to another CPU of its affinity mask (the mask without
 * that CPU, then restored): the mask is what it was afterwards, the CPU
 * not. Inside a run: a barrier, a static split of n items and a dynamic
 * counter. Linux only (futex, sched_getaffinity).
 */
#ifndef SNUG_POOL_H
#define SNUG_POOL_H

#include "common.h"

typedef struct snug_pool snug_pool;

/* What a run calls on every thread: thread in [0, n_threads); thread 0 is the
 * caller of snug_pool_run. */
typedef void (*snug_pool_fn)(void *ctx, int32_t thread, int32_t n_threads);

enum {
    SNUG_POOL_THREADS_MAX = 4096,   /* the most threads a pool may have */
    SNUG_POOL_SPIN_US_DEFAULT = 500 /* spin_us = 0 means this; see pool.c for why */
};

/* Starts n_threads - 1 persistent workers (n_threads in [1,
 * SNUG_POOL_THREADS_MAX]; 1 = no workers, every run on the caller). spin_us:
 * how long an idle worker spins before it sleeps on a futex (0 =
 * SNUG_POOL_SPIN_US_DEFAULT); also how long a thread spins at a barrier, or
 * the caller for the workers to finish, before it yields the CPU between
 * checks. One block of category SNUG_MEM_OTHER holds the pool, with each
 * thread's state on cache lines of its own. The caller owns *out (free it
 * with snug_pool_free). Fails with SNUG_INVALID (an argument out of range),
 * SNUG_NOMEM, or SNUG_INTERNAL when a thread cannot be started (the message
 * says which and why); on failure the workers already started are stopped
 * and joined, nothing is held and *out is NULL. */
snug_status snug_pool_create(int32_t n_threads, int32_t spin_us, snug_pool **out, snug_error *err);

/* Runs fn(ctx, t, n) on all n threads of the pool at once (t = 0 on the
 * calling thread, after the workers have been started on theirs) and returns
 * when every call has returned; everything the calls wrote is visible to the
 * caller then. Resets the counter of snug_pool_next. Allocates nothing and
 * makes no system call while the workers are spinning on CPUs of their own
 * (one futex wake when any sleeps; sched_yield while it waits on a worker
 * that shares its CPU, or on one slower than 20 us). Not reentrant: one
 * thread at a time, never from inside fn (that aborts). */
void snug_pool_run(snug_pool *p, snug_pool_fn fn, void *ctx);

/* Inside fn: waits until every thread of the current run has reached it;
 * writes made before it by any thread are visible to all after it. Every
 * thread of the run must call it equally often. A sense-reversing barrier
 * that spins, yielding the CPU between checks after spin_us. Allocates
 * nothing. thread is fn's own thread index. */
void snug_pool_barrier(snug_pool *p, int32_t thread);

/* The static split: the part [*begin, *end) of n items (n >= 0) that thread t
 * of nt takes. The parts are contiguous, in thread order, cover [0, n)
 * exactly, begin on multiples of unit (>= 1) and hold whole units but for the
 * one that ends at n; their sizes differ by at most unit (the later threads
 * take the extra units, so that the part ending in a short unit is not also
 * short of units). An empty part has *begin == *end. Pure; aborts when
 * t is not in [0, nt) or unit < 1. */
void snug_pool_split(int64_t n, int64_t unit, int32_t t, int32_t nt, int64_t *begin, int64_t *end);

/* Inside fn, dynamic work: the next index of n items from a counter that
 * every snug_pool_run resets to 0 (an atomic fetch-add), or -1 once all n
 * are taken. Every index in [0, n) goes to exactly one call across the
 * threads of a run; use one n per run. */
int64_t snug_pool_next(snug_pool *p, int64_t n);

/* The number of threads of the pool, the caller included. */
int32_t snug_pool_threads(const snug_pool *p);

/* Stops the workers (waking those that sleep), joins them and frees the
 * pool; p is invalid afterwards. Must not be called during a run. NULL is
 * ignored. */
void snug_pool_free(snug_pool *p);

#endif /* SNUG_POOL_H */
