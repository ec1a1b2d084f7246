/*
 * test_timeline.c: the memory timeline drawn from the allocator's event log
 * (engine/timeline.h): the peaks it shows are the log's exact ones (a spike
 * shorter than a column included), the phases are labelled without
 * overlapping, text is escaped, the document is balanced, and failures free
 * everything.
 */
#include "test.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "engine/timeline.h"

#include <stdlib.h>
#include <string.h>

static size_t count_of(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* Checks that every element opened is closed (the ones the chart uses). */
static void check_balanced(const char *svg)
{
    static const char *const tags[][2] = {{"<text", "</text>"}, {"<g ", "</g>"},
                                          {"<svg ", "</svg>"}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(tags); i++)
        CHECK(count_of(svg, tags[i][0]) == count_of(svg, tags[i][1]), "%s: %zu opened, %zu closed",
              tags[i][0], count_of(svg, tags[i][0]), count_of(svg, tags[i][1]));
    CHECK(strncmp(svg, "<?xml", 5) == 0, "starts with the XML declaration");
    size_t n = strlen(svg);
    CHECK(n > 7 && strcmp(svg + n - 7, "</svg>\n") == 0, "ends with </svg>");
}

/* The phase labels "name N s": where each one is, so that overlaps show. */
typedef struct placed {
    double x0, x1, y;
} placed;

static int phase_labels(const char *svg, const char *const *names, int n, placed *out)
{
    int found = 0;
    for (int i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "\">%s", names[i]);
        const char *p = strstr(svg, key);
        while (p && p[strlen(key)] != ' ' && p[strlen(key)] != '<') p = strstr(p + 1, key);
        if (!p) continue;
        const char *tag = p;
        while (tag > svg && strncmp(tag, "<text", 5) != 0) tag--;
        double x = 0, y = 0;
        if (sscanf(tag, "<text x=\"%lf\" y=\"%lf\"", &x, &y) != 2) continue;
        const char *end = strstr(p, "</text>");
        out[found++] = (placed){x, x + 6.0 * (double)(end - p - 2), y};
    }
    return found;
}

/* A log with a weight load, a 4 MiB spike freed at once, a KV cache and
 * four phases microseconds apart. */
static void make_log(void **w, void **kv, size_t *hw, size_t *ha, size_t *hk)
{
    snug_error err = {0};
    CHECK_OK(snug_mem_trace_start(1024, &err), &err);
    snug_mem_trace_mark("load");
    *w = snug_mem_alloc(SNUG_MEM_WEIGHTS, 3u << 20, &err);
    snug_mem_trace_mark("reset");
    void *a = snug_mem_alloc(SNUG_MEM_ACTIVATIONS, 4u << 20, &err);
    *ha = snug_mem_block_bytes(a);
    snug_mem_free(a);
    snug_mem_trace_mark("profile");
    snug_mem_trace_mark("plan");
    *kv = snug_mem_alloc(SNUG_MEM_KV, 2u << 20, &err);
    snug_mem_trace_mark("ready");
    *hw = snug_mem_block_bytes(*w);
    *hk = snug_mem_block_bytes(*kv);
}

static void test_chart(void)
{
    snug_error err = {0};
    void *w = NULL, *kv = NULL;
    size_t hw = 0, ha = 0, hk = 0;
    make_log(&w, &kv, &hw, &ha, &hk);
    snug_mem_trace t;
    snug_mem_trace_get(&t);
    size_t start = 0;
    for (int c = 0; c < SNUG_MEM_N_CATS; c++) start += t.start_bytes[c];
    snug_timeline_opts o = {.title = "model <a&b>", .subtitle = "plan \"x\"", .budget = 16u << 20,
                            .capacity = 15u << 20};
    char *svg = NULL;
    size_t len = 0;
    CHECK_OK(snug_timeline_svg(&t, &o, &svg, &len, &err), &err);
    if (!svg) goto out;
    CHECK(strlen(svg) == len, "length %zu, strlen %zu", len, strlen(svg));
    check_balanced(svg);
    CHECK(strstr(svg, "model &lt;a&amp;b&gt;") && !strstr(svg, "<a&b>"), "title escaped");
    CHECK(strstr(svg, "plan &quot;x&quot;") != NULL, "subtitle escaped");
    /* the legend's peaks are the log's: the spike is in, shorter than a column as it is */
    char want[96], b[2][32];
    snprintf(want, sizeof want, ">weights %s<", snug_fmt_bytes(hw, b[0]));
    CHECK(strstr(svg, want) != NULL, "legend has '%s'", want);
    snprintf(want, sizeof want, ">activations %s<", snug_fmt_bytes(ha, b[0]));
    CHECK(strstr(svg, want) != NULL, "legend has '%s'", want);
    snprintf(want, sizeof want, ">kv cache %s<", snug_fmt_bytes(hk, b[0]));
    CHECK(strstr(svg, want) != NULL, "legend has '%s'", want);
    snprintf(want, sizeof want, ">total %s (top", snug_fmt_bytes(start + hw + ha, b[0]));
    CHECK(strstr(svg, want) != NULL, "legend has '%s'", want);
    CHECK(strstr(svg, ">staging 0 B<") != NULL, "a category never used shows 0 B");
    CHECK(count_of(svg, "<path fill=") == 4, "a band for each category used (weights, kv, "
          "activations, other): %zu", count_of(svg, "<path fill="));
    snprintf(want, sizeof want, "budget %s</text>", snug_fmt_bytes(o.budget, b[0]));
    CHECK(strstr(svg, want) != NULL, "the budget line is labelled");
    CHECK(strstr(svg, "allocator capacity 15.00 MiB</text>") != NULL, "the capacity line is labelled");
    CHECK(strstr(svg, "memory (GiB)") && strstr(svg, "time (seconds)"), "axes named");
    CHECK(!strstr(svg, "filled up"), "nothing dropped");
    /* five phases within microseconds: every label placed, none overlapping another */
    static const char *const names[] = {"load", "reset", "profile", "plan", "ready"};
    placed at[5];
    int n = phase_labels(svg, names, 5, at);
    CHECK(n == 5, "%d of 5 phase labels", n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            CHECK(at[i].y != at[j].y || at[i].x0 >= at[j].x1 || at[j].x0 >= at[i].x1,
                  "labels %d and %d overlap: [%.1f, %.1f] and [%.1f, %.1f] at y %.1f", i, j,
                  at[i].x0, at[i].x1, at[j].x0, at[j].x1, at[i].y);
    /* the file is the same bytes */
    char dir[256], path[300];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.svg", dir);
    CHECK_OK(snug_timeline_write(path, &t, &o, &err), &err);
    char *file = NULL;
    size_t flen = 0;
    CHECK_OK(snug_file_read_all(path, 1 << 24, &file, &flen, &err), &err);
    CHECK(file && flen == len && memcmp(file, svg, len) == 0, "the file holds the chart");
    snug_mem_free(file);
    CHECK_FAILS(snug_timeline_write("/nonexistent-dir/t.svg", &t, &o, &err), &err, SNUG_IO,
                "/nonexistent-dir/t.svg");
    test_rmtree(dir);
out:
    snug_mem_free(svg);
    snug_mem_free(w);
    snug_mem_free(kv);
    snug_mem_trace_stop();
}

/* A plan whose windowed layers have a cache of their own: a profile
 * scratch cache of the window's size first (before the cache is made: the
 * kv cache's band), then the cache of every other layer and the windowed
 * layers' of that size: the legend shows each band's peak, and a band of
 * its own for the window group. */
static void test_window_band(void)
{
    snug_error err = {0};
    CHECK_OK(snug_mem_trace_start(256, &err), &err);
    snug_mem_trace_mark("profile");
    void *scratch = snug_mem_alloc(SNUG_MEM_KV, 1u << 20, &err);
    size_t hw = snug_mem_block_bytes(scratch);
    snug_mem_free(scratch);
    snug_mem_trace_mark("populate");
    void *kv = snug_mem_alloc(SNUG_MEM_KV, 3u << 20, &err), *win = snug_mem_alloc(SNUG_MEM_KV, 1u << 20, &err);
    size_t hk = snug_mem_block_bytes(kv);
    snug_mem_trace_mark("ready");
    snug_mem_free(win);
    snug_mem_trace t;
    snug_mem_trace_get(&t);
    snug_timeline_opts o = {.title = "windows", .kv_window_block = hw};
    char *svg = NULL, want[96], b[32];
    size_t len = 0;
    CHECK_OK(snug_timeline_svg(&t, &o, &svg, &len, &err), &err);
    snprintf(want, sizeof want, ">kv cache %s<", snug_fmt_bytes(hk, b));
    CHECK(svg && strstr(svg, want), "the other layers' band peaks at their cache: '%s'", want);
    snprintf(want, sizeof want, ">kv cache, windowed layers %s<", snug_fmt_bytes(hw, b));
    CHECK(svg && strstr(svg, want), "the window group's band: '%s'", want);
    snug_mem_free(svg);
    o.kv_window_block = 0; /* one band, as without a window group */
    CHECK_OK(snug_timeline_svg(&t, &o, &svg, &len, &err), &err);
    snprintf(want, sizeof want, ">kv cache %s<", snug_fmt_bytes(hk + hw, b));
    CHECK(svg && strstr(svg, want) && !strstr(svg, "windowed layers"), "one kv band: '%s'", want);
    snug_mem_free(svg);
    snug_mem_free(kv);
    snug_mem_trace_stop();
}

static void test_empty_and_full(void)
{
    snug_error err = {0};
    snug_mem_trace t;
    snug_mem_trace_get(&t); /* no log */
    char *svg = NULL;
    size_t len = 0;
    snug_timeline_opts o = {0};
    CHECK_FAILS(snug_timeline_svg(&t, &o, &svg, &len, &err), &err, SNUG_INVALID, "empty");
    CHECK(svg == NULL && len == 0, "nothing returned");
    /* a log of 3 events, given 5: drawn up to the third, and it says so */
    CHECK_OK(snug_mem_trace_start(3, &err), &err);
    for (int i = 0; i < 5; i++) snug_mem_trace_mark("m");
    snug_mem_trace_get(&t);
    CHECK(t.n_events == 3 && t.dropped == 2, "%zu events, %lld dropped", t.n_events,
          (long long)t.dropped);
    CHECK_OK(snug_timeline_svg(&t, &o, &svg, &len, &err), &err);
    CHECK(svg && strstr(svg, "the log filled up"), "the chart says the log filled up");
    if (svg) check_balanced(svg);
    snug_mem_free(svg);
    snug_mem_trace_stop();
}

typedef struct oom_ctx {
    snug_mem_trace t;
    char *svg;
} oom_ctx;

static snug_status draw_op(void *ctx, snug_error *err)
{
    oom_ctx *c = ctx;
    size_t len;
    return snug_timeline_svg(&c->t, &(snug_timeline_opts){.title = "t", .budget = 1 << 30},
                             &c->svg, &len, err);
}

static void undo_op(void *ctx)
{
    oom_ctx *c = ctx;
    snug_mem_free(c->svg);
    c->svg = NULL;
}

/* Every allocation of the drawing failing in turn: SNUG_NOMEM, nothing held. */
static void test_oom(void)
{
    void *w = NULL, *kv = NULL;
    size_t hw, ha, hk;
    make_log(&w, &kv, &hw, &ha, &hk);
    oom_ctx c = {0};
    snug_mem_trace_get(&c.t); /* a snapshot: what the drawing adds to the log is not in it */
    int fails = test_oom_loop("timeline", draw_op, undo_op, &c, 100);
    CHECK(fails >= 2, "%d allocations failed in turn", fails);
    snug_mem_free(w);
    snug_mem_free(kv);
    snug_mem_trace_stop();
}

int main(void)
{
    RUN(test_chart);
    RUN(test_window_band);
    RUN(test_empty_and_full);
    RUN(test_oom);
    return test_summary();
}
