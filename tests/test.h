/*
 * test.h: the unit-test harness. Each test file defines static test
 * functions and calls RUN() for each from main, then returns test_summary().
 * Every test also checks that the accounting allocator's total is back
 * where it was when the test started: a test that leaks fails.
 *
 * Output, one line per test: "ok - name" or "FAIL - name", with the failed
 * checks above it; the last line is "N passed, M failed". tests/run adds
 * the lines of every test program up.
 */
#ifndef SNUG_TEST_H
#define SNUG_TEST_H

#include "snug.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_test_failed_checks;
static int g_tests_passed, g_tests_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            g_test_failed_checks++;                                             \
            printf("  check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                                \
            printf("\n");                                                       \
        }                                                                       \
    } while (0)

/* Checks a status; on failure prints the error message too. */
#define CHECK_OK(expr, err)                                                      \
    do {                                                                         \
        snug_status st_ = (expr);                                                \
        CHECK(st_ == SNUG_OK, "%s returned %s: %s", #expr, snug_status_str(st_), \
              (err)->msg);                                                       \
    } while (0)

/* Checks that expr fails with status want and a message containing text. */
#define CHECK_FAILS(expr, err, want, text)                                        \
    do {                                                                          \
        (err)->msg[0] = '\0';                                                     \
        snug_status st_ = (expr);                                                 \
        CHECK(st_ == (want), "%s returned %s, expected %s (message: %s)", #expr,  \
              snug_status_str(st_), snug_status_str(want), (err)->msg);           \
        CHECK(strstr((err)->msg, (text)) != NULL,                                 \
              "message \"%s\" does not contain \"%s\"", (err)->msg, (text));      \
    } while (0)

static inline void run_test(const char *name, void (*fn)(void))
{
    size_t before = 0, after = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &before, NULL, false);
    g_test_failed_checks = 0;
    fn();
    snug_mem_status(SNUG_MEM_TOTAL, &after, NULL, false);
    if (after != before) {
        g_test_failed_checks++;
        printf("  leak: the allocator held %zu bytes before the test and %zu after\n", before,
               after);
    }
    if (g_test_failed_checks == 0) {
        g_tests_passed++;
        printf("ok - %s\n", name);
    } else {
        g_tests_failed++;
        printf("FAIL - %s\n", name);
    }
    fflush(stdout);
}

#define RUN(fn) run_test(#fn, fn)

static inline int test_summary(void)
{
    printf("%d passed, %d failed\n", g_tests_passed, g_tests_failed);
    return g_tests_failed ? 1 : 0;
}

/* The out-of-memory loop (from SQLite's tests): runs op(ctx) with
 * allocation k failing, for k = 1, 2, ... until op succeeds (then undo(ctx),
 * which may be NULL, releases what it made). Every failure must return
 * SNUG_NOMEM with a message and leave the allocator's total where it was.
 * Returns the number of failures before the success, or -1 when op never
 * succeeded within max tries. */
static inline int test_oom_loop(const char *what, snug_status (*op)(void *ctx, snug_error *err),
                                void (*undo)(void *ctx), void *ctx, int max)
{
    size_t base = 0, now = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &base, NULL, false);
    for (int k = 1; k <= max; k++) {
        snug_error err = {0};
        snug_mem_fail_at(k);
        snug_status st = op(ctx, &err);
        snug_mem_fail_at(0);
        if (st == SNUG_OK) {
            if (undo) undo(ctx);
            return k - 1;
        }
        CHECK(st == SNUG_NOMEM && err.msg[0], "%s, failing allocation %d: %s: %s", what, k,
              snug_status_str(st), err.msg);
        snug_mem_status(SNUG_MEM_TOTAL, &now, NULL, false);
        CHECK(now == base, "%s, failing allocation %d: %zu bytes held, %zu before", what, k, now,
              base);
    }
    CHECK(false, "%s never succeeded in %d tries", what, max);
    return -1;
}

/* Makes a fresh temporary directory (under $TMPDIR or /tmp) into buf. */
static inline void test_tmpdir(char *buf, size_t size)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, size, "%s/snug-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        abort();
    }
}

/* Removes a directory tree made by a test. */
static inline void test_rmtree(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

/* Writes n bytes to path; aborts on failure (test setup). */
static inline void test_write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

#endif /* SNUG_TEST_H */
