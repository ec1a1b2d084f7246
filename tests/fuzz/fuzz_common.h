/*
 * fuzz_common.h: the driver every fuzz harness shares. For each input it
 *   1. parses it with a message buffer and checks the outcome: a success is
 *      exercised by the harness (and freed), a failure must carry its status
 *      in the buffer and a non-empty message that names the file, and must
 *      not be SNUG_NOMEM (nothing was made to fail);
 *   2. parses it again without a message buffer (err NULL): same status;
 *   3. parses it twice more (with and without a buffer) with one of the
 *      allocations the first parse made failing, picked by the input's hash:
 *      the outcome must be clean either way, and the same both times;
 * and after every parse the allocator must hold what it held before (no
 * leak). Every violation aborts, which libFuzzer reports.
 */
#ifndef SNUG_FUZZ_COMMON_H
#define SNUG_FUZZ_COMMON_H

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                                      \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* One input: its bytes, a memfd holding them (for readers of files), and the
 * name messages must mention. */
typedef struct fuzz_input {
    const uint8_t *data;
    size_t size;
    int fd;
    const char *name;
} fuzz_input;

/* A parser under test: parse() makes *parsed from the input (err may be
 * NULL); check() exercises a successful result and frees it. check() runs
 * with fault injection off. */
typedef struct fuzz_target {
    const char *name;
    bool needs_fd;
    snug_status (*parse)(const fuzz_input *in, void **parsed, snug_error *err);
    void (*check)(const fuzz_input *in, void *parsed);
} fuzz_target;

/* Checks a failure: a failing status mirrored in err, a message naming the file. */
static inline void fuzz_check_failure(snug_status st, const snug_error *err, const char *name)
{
    REQUIRE(st != SNUG_OK);
    REQUIRE(err->status == st);
    REQUIRE(err->msg[0] != '\0');
    REQUIRE(strstr(err->msg, name) != NULL);
}

static inline snug_status fuzz_run_once(const fuzz_target *t, const fuzz_input *in,
                                        int64_t fail_at, bool with_err, int64_t *allocs)
{
    size_t before = 0, after = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &before, NULL, false);
    int64_t n_allocs = snug_mem_alloc_count();
    snug_error err = {0};
    void *parsed = NULL;
    snug_mem_fail_at(fail_at);
    snug_status st = t->parse(in, &parsed, with_err ? &err : NULL);
    snug_mem_fail_at(0);
    if (allocs) *allocs = snug_mem_alloc_count() - n_allocs;
    if (st == SNUG_OK) {
        t->check(in, parsed);
    } else {
        if (with_err) fuzz_check_failure(st, &err, in->name);
        if (fail_at == 0) REQUIRE(st != SNUG_NOMEM);
    }
    snug_mem_status(SNUG_MEM_TOTAL, &after, NULL, false);
    if (after != before) {
        fprintf(stderr, "leak: the allocator held %zu bytes before and %zu after (%s)\n", before,
                after, st == SNUG_OK ? "parsed" : err.msg);
        abort();
    }
    return st;
}

/* Runs the four parses of one input (see the top of this file). */
static inline void fuzz_drive(const fuzz_target *t, const uint8_t *data, size_t size)
{
    fuzz_input in = {.data = data, .size = size, .fd = -1, .name = t->name};
    if (t->needs_fd) {
        in.fd = memfd_create("fuzz", MFD_CLOEXEC);
        REQUIRE(in.fd >= 0);
        for (size_t done = 0; done < size;) {
            ssize_t w = write(in.fd, data + done, size - done);
            REQUIRE(w > 0);
            done += (size_t)w;
        }
    }
    int64_t allocs = 0;
    snug_status st = fuzz_run_once(t, &in, 0, true, &allocs);
    REQUIRE(fuzz_run_once(t, &in, 0, false, NULL) == st);
    if (allocs > 0) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a picks the allocation to fail */
        for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 1099511628211ull;
        int64_t k = 1 + (int64_t)(h % (uint64_t)allocs);
        st = fuzz_run_once(t, &in, k, true, NULL);
        REQUIRE(fuzz_run_once(t, &in, k, false, NULL) == st);
    }
    if (in.fd >= 0) close(in.fd);
}

#endif /* SNUG_FUZZ_COMMON_H */
