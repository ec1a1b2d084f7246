/*
 * limits.c: the limits bench/load measures a load against, in the same run.
 *
 *   limits touch BYTES   first touch of BYTES of fresh anonymous memory, two ways:
 *                        plain (one thread writes every 4 KiB page, no huge pages)
 *                        and as snug allocates (huge pages, populated by all threads)
 *   limits plain DIR     a plain load: each tensor of the checkpoint read with one
 *                        pread into its own freshly allocated memory
 *
 * Each prints "name seconds GB/s" lines. Not part of make test.
 */
#include "checkpoint.h"
#include "device.h"
#include "fileio.h"

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
    double t0 = now();
    unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    madvise(p, n, MADV_NOHUGEPAGE);
    for (size_t o = 0; o < n; o += 4096) p[o] = 1;
    report("touch_plain", now() - t0, n);
    munmap(p, n);
    snug_error err = {0};
    t0 = now();
    void *q = snug_mem_alloc(SNUG_MEM_WEIGHTS, n, &err);
    if (!q) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    report("touch_snug", now() - t0, n);
    snug_mem_free(q);
    return 0;
}

static int plain(const char *dir)
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
        bufs[i] = malloc(n ? n : 1);
        if (!bufs[i] || snug_st_read(ck->files[ck->entries[i].file], t, 0, bufs[i], n, &err) != SNUG_OK)
            rc = 1;
        total += n;
    }
    report("plain_read", now() - t0, total);
    for (int64_t i = 0; i < ck->n_tensors; i++) free(bufs[i]);
    free(bufs);
    snug_checkpoint_close(ck);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "touch") == 0) return touch((size_t)strtoull(argv[2], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "plain") == 0) return plain(argv[2]);
    fprintf(stderr, "usage: limits touch BYTES | limits plain DIR\n");
    return 2;
}
