/*
 * limits.c: the limits bench/load measures a load against, in the same run.
 *
 *   limits touch BYTES        first touch of BYTES of fresh anonymous memory, two ways:
 *                             plain (one thread writes every 4 KiB page, no huge pages)
 *                             and as snug allocates the weights (huge pages, populated
 *                             on a pool of a thread per CPU: base/populate.h); the best
 *                             of three tries of each
 *   limits touch-once BYTES   one first touch of BYTES as snug allocates the activation
 *                             arena and the serving state (populated on a pool of a thread
 *                             per CPU), not the best of three: what a start meets after its
 *                             caller let the machine settle (the tries after the first reuse
 *                             what the first freed, which a VM backs faster)
 *   limits load-touch DIR BYTES [THREADS]
 *                             what a start cannot do without, in one process: the
 *                             weights loaded as snug load does, then BYTES of fresh memory
 *                             touched as snug allocates the KV cache (populated on a pool),
 *                             with the weights still held, both on THREADS threads
 *                             (default: a thread per CPU the process may use) (on
 *                             a VM whose host backs a few GiB fast, then slowly, the two
 *                             cost more together than apart: bench/start says more)
 *   limits plain DIR [DTYPE]  a plain load: each tensor of the checkpoint read with one
 *                             pread into its own freshly allocated memory (then, when
 *                             DTYPE differs, converted into another fresh block)
 *
 * Each prints "name seconds GB/s" lines. Not part of make test.
 */
#include "formats/checkpoint.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/pool.h"
#include "base/populate.h"
#include "base/sysinfo.h"
#include "model/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void report(const char *name, double secs, size_t bytes)
{
    printf("%s %.3f %.3f\n", name, secs, (double)bytes / secs / 1e9);
}

/* The pool snug would populate on: n threads (0: a thread per CPU the
 * process may use, snug's default). */
static snug_pool *cpu_pool(int32_t n)
{
    snug_error err = {0};
    snug_pool *pool = NULL;
    if (snug_pool_create(n > 0 ? n : snug_cpu_count(), 0, &pool, &err) != SNUG_OK)
        fprintf(stderr, "limits: %s\n", err.msg);
    return pool;
}

static int touch(size_t n)
{
    double best_plain = 1e30, best_snug = 1e30;
    snug_pool *pool = cpu_pool(0);
    if (!pool) return 1;
    for (int k = 0; k < 3; k++) {
        double t0 = now();
        unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return 1;
        madvise(p, n, MADV_NOHUGEPAGE);
        for (size_t o = 0; o < n; o += 4096) p[o] = 1;
        best_plain = SNUG_MIN(best_plain, now() - t0);
        munmap(p, n);
        snug_error err = {0};
        t0 = now();
        void *q = snug_populate_alloc(SNUG_MEM_WEIGHTS, n, pool, &err);
        if (!q) {
            fprintf(stderr, "%s\n", err.msg);
            snug_pool_free(pool);
            return 1;
        }
        best_snug = SNUG_MIN(best_snug, now() - t0);
        snug_mem_free(q);
    }
    snug_pool_free(pool);
    report("touch_plain", best_plain, n);
    report("touch_snug", best_snug, n);
    return 0;
}

static int touch_once(size_t n)
{
    snug_pool *pool = cpu_pool(0);
    if (!pool) return 1;
    snug_error err = {0};
    double t0 = now();
    void *q = snug_populate_alloc(SNUG_MEM_ACTIVATIONS, n, pool, &err);
    double secs = now() - t0;
    snug_pool_free(pool);
    if (!q) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    snug_mem_free(q);
    report("touch_once", secs, n);
    return 0;
}

static int load_touch(const char *dir, size_t n, int32_t threads)
{
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    snug_weights *w = NULL;
    void *q = NULL;
    int rc = 1;
    snug_load_opts lo = {.n_threads = threads};
    snug_load_stats stats;
    snug_pool *pool = cpu_pool(threads);
    double t0 = now();
    if (!pool || snug_checkpoint_open(dir, &ck, &err) != SNUG_OK ||
        snug_weights_load(ck, &lo, &w, &stats, &err) != SNUG_OK)
        goto done;
    report("load", now() - t0, stats.weight_bytes);
    t0 = now();
    q = snug_populate_alloc(SNUG_MEM_KV, n, pool, &err);
    if (!q) goto done;
    report("touch_after_load", now() - t0, n);
    rc = 0;
done:
    if (rc) fprintf(stderr, "limits: %s\n", err.msg);
    snug_mem_free(q);
    snug_weights_free(w);
    snug_checkpoint_close(ck);
    snug_pool_free(pool);
    return rc;
}

static int plain(const char *dir, snug_dtype dt)
{
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    if (snug_checkpoint_open(dir, &ck, &err) != SNUG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    void **bufs = calloc((size_t)ck->n_tensors, sizeof *bufs);
    size_t total = 0;
    int rc = 0;
    double t0 = now();
    for (int64_t i = 0; i < ck->n_tensors && rc == 0; i++) {
        const snug_st_tensor *t = ck->entries[i].tensor;
        size_t n = (size_t)(t->end - t->begin);
        void *raw = malloc(n ? n : 1);
        if (!raw || snug_st_read(ck->files[ck->entries[i].file], t, 0, raw, n, &err) != SNUG_OK) {
            rc = 1;
            free(raw);
            break;
        }
        if (dt != SNUG_DTYPE_NONE && dt != t->dtype) {
            size_t numel = (size_t)snug_st_numel(t);
            bufs[i] = malloc(numel * snug_dtype_size(dt) + 1);
            snug_convert(bufs[i], dt, raw, t->dtype, numel);
            free(raw);
            total += numel * snug_dtype_size(dt);
        } else {
            bufs[i] = raw;
            total += n;
        }
    }
    report("plain_load", now() - t0, total);
    for (int64_t i = 0; i < ck->n_tensors; i++) free(bufs[i]);
    free(bufs);
    snug_checkpoint_close(ck);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "touch") == 0) return touch((size_t)strtoull(argv[2], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "touch-once") == 0) return touch_once((size_t)strtoull(argv[2], NULL, 10));
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "load-touch") == 0)
        return load_touch(argv[2], (size_t)strtoull(argv[3], NULL, 10), argc == 5 ? atoi(argv[4]) : 0);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "plain") == 0)
        return plain(argv[2], argc == 4 ? snug_dtype_from_torch(argv[3]) : SNUG_DTYPE_NONE);
    fprintf(stderr, "usage: limits touch BYTES | limits touch-once BYTES | limits load-touch DIR "
                    "BYTES [THREADS] | limits plain DIR [DTYPE]\n");
    return 2;
}
