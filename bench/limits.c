/*
 * limits.c: the limits bench/load measures a load against, in the same run.
 *
 *   limits touch BYTES        first touch of BYTES of fresh anonymous memory, two ways:
 *                             plain (one thread writes every 4 KiB page, no huge pages)
 *                             and as snug allocates (huge pages, populated by all
 *                             threads); the best of three tries of each
 *   limits load-touch DIR BYTES
 *                             what a start cannot do without, in one process: the
 *                             weights loaded as snug load does, then BYTES of fresh memory
 *                             touched as snug allocates, with the weights still held (on
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

static int touch(size_t n)
{
    double best_plain = 1e30, best_snug = 1e30;
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
        void *q = snug_mem_alloc(SNUG_MEM_WEIGHTS, n, &err);
        if (!q) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        best_snug = SNUG_MIN(best_snug, now() - t0);
        snug_mem_free(q);
    }
    report("touch_plain", best_plain, n);
    report("touch_snug", best_snug, n);
    return 0;
}

static int load_touch(const char *dir, size_t n)
{
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    snug_weights *w = NULL;
    void *q = NULL;
    int rc = 1;
    snug_load_opts lo = {0};
    snug_load_stats stats;
    double t0 = now();
    if (snug_checkpoint_open(dir, &ck, &err) != SNUG_OK ||
        snug_weights_load(ck, &lo, &w, &stats, &err) != SNUG_OK)
        goto done;
    report("load", now() - t0, stats.weight_bytes);
    t0 = now();
    q = snug_mem_alloc(SNUG_MEM_KV, n, &err);
    if (!q) goto done;
    report("touch_after_load", now() - t0, n);
    rc = 0;
done:
    if (rc) fprintf(stderr, "limits: %s\n", err.msg);
    snug_mem_free(q);
    snug_weights_free(w);
    snug_checkpoint_close(ck);
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
    if (argc == 4 && strcmp(argv[1], "load-touch") == 0)
        return load_touch(argv[2], (size_t)strtoull(argv[3], NULL, 10));
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "plain") == 0)
        return plain(argv[2], argc == 4 ? snug_dtype_from_torch(argv[3]) : SNUG_DTYPE_NONE);
    fprintf(stderr, "usage: limits touch BYTES | limits load-touch DIR "
                    "BYTES | limits plain DIR [DTYPE]\n");
    return 2;
}
