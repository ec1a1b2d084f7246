/*
 * timeline.c: the allocator's event log as an SVG chart (timeline.h).
 *
 * Layout (pixels): the plot in the middle, the title and two lines above
 * it, the phase labels in rows right above the plot, the legend on the
 * right, the time axis below.
 */
#include "timeline.h"

#include "base/fileio.h"
#include "base/strbuf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum {
    WIDTH = 1280, HEIGHT = 720,
    PLOT_X = 90, PLOT_Y = 130, PLOT_W = 880, PLOT_H = 500,
    LEGEND_X = PLOT_X + PLOT_W + 30,
    LABEL_ROWS = 3, LABEL_ROW_H = 16,
    N_MARKS_MAX = 64
};

#define GIB ((double)(1u << 30))

/* The bands drawn: the allocator's categories, and the windowed layers'
 * KV cache apart from the rest of its category. */
enum { BAND_KV_WINDOW = SNUG_MEM_N_CATS, N_BANDS };

/* Bottom to top in the stack, with their colours. */
static const struct {
    int band;
    const char *name, *colour;
} g_stack[N_BANDS] = {
    {SNUG_MEM_WEIGHTS, "weights", "#4e79a7"},
    {SNUG_MEM_KV, "kv cache", "#59a14f"},
    {BAND_KV_WINDOW, "kv cache, windowed layers", "#8cd17d"},
    {SNUG_MEM_ACTIVATIONS, "activations", "#f28e2b"},
    {SNUG_MEM_STAGING, "staging", "#b07aa1"},
    {SNUG_MEM_OTHER, "other", "#bab0ac"},
};

/* ---- the data: the log replayed into columns ----------------------------- */

typedef struct column {
    size_t cat[N_BANDS];           /* the state at the column's highest total */
    size_t total;
    size_t rss;                    /* the highest RSS read in the column; 0: none */
} column;

typedef struct mark {
    const char *label;
    double s;                      /* seconds since the log started */
} mark;

typedef struct chart {
    column col[PLOT_W];
    mark marks[N_MARKS_MAX];
    int n_marks;
    double t_end;                  /* seconds covered */
    double y_max;                  /* bytes at the top of the plot */
    size_t peak_cat[N_BANDS], peak_total, peak_rss;
} chart;

static size_t sum_of(const size_t *cat)
{
    size_t s = 0;
    for (int c = 0; c < N_BANDS; c++) s += cat[c];
    return s;
}

/* The band an allocation or free ev goes to: the windowed layers' when it
 * is their cache's block (of charge window_block, once the cache is made:
 * after the mark of that phase, *cache_made; a free while that band holds
 * one), else its category's. */
static int band_of(const snug_mem_event *ev, size_t window_block, bool cache_made, const size_t *now)
{
    bool window = window_block > 0 && ev->cat == SNUG_MEM_KV && ev->bytes == window_block &&
                  (ev->kind == SNUG_MEM_EVENT_ALLOC ? cache_made : now[BAND_KV_WINDOW] >= window_block);
    return window ? BAND_KV_WINDOW : (int)ev->cat;
}

/* Replays the log: each column starts with the state the last one ended
 * in and keeps the moment of its highest total. */
static void replay(const snug_mem_trace *t, size_t window_block, chart *ch)
{
    int64_t end_ns = 1;
    for (size_t i = 0; i < t->n_events; i++) end_ns = SNUG_MAX(end_ns, t->events[i].ns);
    ch->t_end = (double)end_ns / 1e9;
    size_t now[N_BANDS] = {0};
    memcpy(now, t->start_bytes, sizeof t->start_bytes);
    bool cache_made = false;
    size_t e = 0;
    for (int x = 0; x < PLOT_W; x++) {
        column *c = &ch->col[x];
        memcpy(c->cat, now, sizeof now);
        c->total = sum_of(now);
        int64_t until = x == PLOT_W - 1 ? INT64_MAX : (int64_t)((double)end_ns * (x + 1) / PLOT_W);
        for (; e < t->n_events && t->events[e].ns < until; e++) {
            const snug_mem_event *ev = &t->events[e];
            if (ev->kind == SNUG_MEM_EVENT_ALLOC) now[band_of(ev, window_block, cache_made, now)] += ev->bytes;
            if (ev->kind == SNUG_MEM_EVENT_FREE) now[band_of(ev, window_block, cache_made, now)] -= ev->bytes;
            if (ev->kind == SNUG_MEM_EVENT_MARK)
                cache_made |= strcmp(ev->label, "populate") == 0 || strcmp(ev->label, "reserve") == 0;
            if (ev->kind == SNUG_MEM_EVENT_MARK && ch->n_marks < N_MARKS_MAX)
                ch->marks[ch->n_marks++] = (mark){ev->label, (double)ev->ns / 1e9};
            c->rss = SNUG_MAX(c->rss, ev->rss);
            size_t total = sum_of(now);
            if (total > c->total) {
                memcpy(c->cat, now, sizeof now);
                c->total = total;
            }
        }
        for (int k = 0; k < N_BANDS; k++)
            ch->peak_cat[k] = SNUG_MAX(ch->peak_cat[k], c->cat[k]);
        ch->peak_total = SNUG_MAX(ch->peak_total, c->total);
        ch->peak_rss = SNUG_MAX(ch->peak_rss, c->rss);
    }
}

/* ---- axes ------------------------------------------------------------------ */

/* A tick step of 1, 2 or 5 times a power of ten giving at most max_ticks
 * ticks over span; *decimals is how many a label needs. */
static double tick_step(double span, int max_ticks, int *decimals)
{
    double raw = span / max_ticks, p = pow(10, floor(log10(raw)));
    double step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    *decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    return step;
}

static double x_of(const chart *ch, double s) { return PLOT_X + s / ch->t_end * PLOT_W; }

static double y_of(const chart *ch, double bytes) { return PLOT_Y + PLOT_H - bytes / ch->y_max * PLOT_H; }

static void draw_axes(snug_strbuf *t, const chart *ch)
{
    int dec;
    double step = tick_step(ch->y_max / GIB, 8, &dec);
    snug_strbuf_printf(t, "<g font-size=\"12\" fill=\"#333\">\n");
    for (double v = 0; v <= ch->y_max / GIB + 1e-12; v += step) {
        double y = y_of(ch, v * GIB);
        snug_strbuf_printf(t, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", PLOT_X, y,
            PLOT_X + PLOT_W, y);
        snug_strbuf_printf(t, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.*f</text>\n", PLOT_X - 6, y + 4,
            dec, v);
    }
    step = tick_step(ch->t_end, 10, &dec);
    for (double s = 0; s <= ch->t_end + 1e-12; s += step) {
        double x = x_of(ch, s);
        snug_strbuf_printf(t, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n", x,
            PLOT_Y + PLOT_H, x, PLOT_Y + PLOT_H + 5);
        snug_strbuf_printf(t, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.*f</text>\n", x,
            PLOT_Y + PLOT_H + 19, dec, s);
    }
    snug_strbuf_printf(t, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n",
        PLOT_X, PLOT_Y, PLOT_W, PLOT_H);
    snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">time (seconds)</text>\n",
        PLOT_X + PLOT_W / 2, PLOT_Y + PLOT_H + 42);
    snug_strbuf_printf(t, "<text transform=\"translate(%d %d) rotate(-90)\" text-anchor=\"middle\" "
        "font-size=\"13\">memory (GiB)</text>\n", PLOT_X - 58, PLOT_Y + PLOT_H / 2);
    snug_strbuf_printf(t, "</g>\n");
}

/* ---- the stack, the lines, the phases, the legend ------------------------- */

/* The top of the categories 0..k of column x. */
static size_t stack_top(const chart *ch, int x, int k)
{
    size_t s = 0;
    for (int i = 0; i <= k; i++) s += ch->col[x].cat[g_stack[i].band];
    return s;
}

/* The y of the top of the categories 0..level in column x; level -1: 0. */
static double level_y(const chart *ch, int x, int level)
{
    return y_of(ch, level < 0 ? 0 : (double)stack_top(ch, x, level));
}

/* One filled band per category: the top of its level left to right, then
 * the top of the level below right to left, a step wherever a column
 * differs from the one before. */
static void draw_stack(snug_strbuf *t, const chart *ch)
{
    for (int k = 0; k < N_BANDS; k++) {
        if (ch->peak_cat[g_stack[k].band] == 0) continue;
        snug_strbuf_printf(t, "<path fill=\"%s\" stroke=\"none\" d=\"", g_stack[k].colour);
        double prev = level_y(ch, 0, k);
        snug_strbuf_printf(t, "M%d %.1f ", PLOT_X, prev);
        for (int x = 1; x < PLOT_W; x++) {
            double y = level_y(ch, x, k);
            if (y != prev) snug_strbuf_printf(t, "L%d %.1f L%d %.1f ", PLOT_X + x, prev, PLOT_X + x, y);
            prev = y;
        }
        snug_strbuf_printf(t, "L%d %.1f ", PLOT_X + PLOT_W, prev);
        prev = level_y(ch, PLOT_W - 1, k - 1);
        snug_strbuf_printf(t, "L%d %.1f ", PLOT_X + PLOT_W, prev);
        for (int x = PLOT_W - 2; x >= 0; x--) {
            double y = level_y(ch, x, k - 1);
            if (y != prev) snug_strbuf_printf(t, "L%d %.1f L%d %.1f ", PLOT_X + x + 1, prev, PLOT_X + x + 1, y);
            prev = y;
        }
        snug_strbuf_printf(t, "L%d %.1f Z\"/>\n", PLOT_X, prev);
    }
}

static void draw_rss(snug_strbuf *t, const chart *ch)
{
    if (ch->peak_rss == 0) return;
    snug_strbuf_printf(t, "<polyline fill=\"none\" stroke=\"#111\" stroke-width=\"1.5\" points=\"");
    for (int x = 0; x < PLOT_W; x++)
        if (ch->col[x].rss) snug_strbuf_printf(t, "%.1f,%.1f ", PLOT_X + x + 0.5, y_of(ch, (double)ch->col[x].rss));
    snug_strbuf_printf(t, "\"/>\n");
}

/* A horizontal line at bytes, labelled at the plot's right end above the
 * line (below it when below is set: the capacity sits just under the
 * budget, and the two labels must not meet). */
static void draw_level(snug_strbuf *t, const chart *ch, size_t bytes, const char *colour, const char *dash,
                       const char *what, bool below)
{
    if (bytes == 0) return;
    char b[32];
    double y = y_of(ch, (double)bytes);
    snug_strbuf_printf(t, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"%s\"/>\n", PLOT_X, y, PLOT_X + PLOT_W, y, colour, dash);
    snug_strbuf_printf(t, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"%s\" text-anchor=\"end\">%s %s</text>\n",
        PLOT_X + PLOT_W - 4, below ? y + 13 : y - 4, colour, what, snug_fmt_bytes(bytes, b));
}

/* Each phase: a dashed line at its start and a label "name 1.23 s" in the
 * first row above the plot where it does not overlap the one before; when
 * every row is taken, the emptiest row, moved right, with a leader line. */
static void draw_phases(snug_strbuf *t, const chart *ch)
{
    double row_end[LABEL_ROWS];
    for (int r = 0; r < LABEL_ROWS; r++) row_end[r] = -1e9;
    snug_strbuf_printf(t, "<g font-size=\"11\" fill=\"#222\">\n");
    for (int m = 0; m < ch->n_marks; m++) {
        const mark *k = &ch->marks[m];
        double x = x_of(ch, k->s);
        double len = (m + 1 < ch->n_marks ? ch->marks[m + 1].s : ch->t_end) - k->s;
        char label[96];
        if (m + 1 < ch->n_marks) /* the last one has no end */
            snprintf(label, sizeof label, "%s %.*f s", k->label ? k->label : "?", len < 0.1 ? 3 : 1,
                     len);
        else
            snprintf(label, sizeof label, "%s", k->label ? k->label : "?");
        double w = 6.2 * (double)strlen(label) + 6;
        int row = -1;
        for (int r = 0; r < LABEL_ROWS && row < 0; r++)
            if (row_end[r] < x) row = r;
        double lx = x + 2;
        if (row < 0) {
            row = 0;
            for (int r = 1; r < LABEL_ROWS; r++)
                if (row_end[r] < row_end[row]) row = r;
            lx = row_end[row] + 4;
        }
        if (lx + w > WIDTH - 4) lx = WIDTH - 4 - w;
        row_end[row] = lx + w;
        double ly = PLOT_Y - 8 - (LABEL_ROWS - 1 - row) * LABEL_ROW_H;
        snug_strbuf_printf(t, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#666\" "
            "stroke-dasharray=\"3 3\"/>\n", x, PLOT_Y, x, PLOT_Y + PLOT_H);
        snug_strbuf_printf(t, "<polyline fill=\"none\" stroke=\"#999\" points=\"%.1f,%d %.1f,%.1f %.1f,%.1f\"/>\n",
            x, PLOT_Y, x, ly + 3, lx, ly + 3);
        snug_strbuf_printf(t, "<text x=\"%.1f\" y=\"%.1f\">", lx + 2, ly);
        snug_strbuf_xml(t, label);
        snug_strbuf_printf(t, "</text>\n");
    }
    snug_strbuf_printf(t, "</g>\n");
}

static void draw_legend(snug_strbuf *t, const chart *ch, const snug_timeline_opts *o)
{
    char b[32];
    int y = PLOT_Y + 4;
    snug_strbuf_printf(t, "<g font-size=\"12\" fill=\"#222\">\n");
    snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">allocator (peak)</text>\n", LEGEND_X, y);
    y += 10;
    for (int k = N_BANDS - 1; k >= 0; k--) { /* top of the stack first, as drawn */
        if (g_stack[k].band == BAND_KV_WINDOW && ch->peak_cat[BAND_KV_WINDOW] == 0) continue; /* (no such group) */
        snug_strbuf_printf(t, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", LEGEND_X, y,
            g_stack[k].colour);
        snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\">%s %s</text>\n", LEGEND_X + 20, y + 12, g_stack[k].name,
            snug_fmt_bytes(ch->peak_cat[g_stack[k].band], b));
        y += 20;
    }
    snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\">total %s (top of the stack)</text>\n", LEGEND_X, y + 12,
        snug_fmt_bytes(ch->peak_total, b));
    y += 30;
    snug_strbuf_printf(t, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#111\" stroke-width=\"1.5\"/>\n",
        LEGEND_X, y + 7, LEGEND_X + 14, y + 7);
    snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\">process resident set</text>\n", LEGEND_X + 20, y + 11);
    snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\" fill=\"#555\">(peak %s)</text>\n", LEGEND_X + 20, y + 26,
        ch->peak_rss ? snug_fmt_bytes(ch->peak_rss, b) : "not read");
    y += 40;
    if (o->budget) {
        snug_strbuf_printf(t, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#d62728\" stroke-width=\"1.5\" "
            "stroke-dasharray=\"6 3\"/>\n", LEGEND_X, y + 7, LEGEND_X + 14, y + 7);
        snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\">budget C</text>\n", LEGEND_X + 20, y + 11);
        y += 20;
    }
    if (o->capacity) {
        snug_strbuf_printf(t, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#7f4f00\" stroke-width=\"1.5\" "
            "stroke-dasharray=\"2 2\"/>\n", LEGEND_X, y + 7, LEGEND_X + 14, y + 7);
        snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\">allocator capacity</text>\n", LEGEND_X + 20, y + 11);
        snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\" fill=\"#555\">after the plan: C - U - R</text>\n",
            LEGEND_X + 20, y + 26);
        y += 40;
    }
    snug_strbuf_printf(t, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#666\" stroke-dasharray=\"3 3\"/>\n",
        LEGEND_X + 7, y, LEGEND_X + 7, y + 14);
    snug_strbuf_printf(t, "<text x=\"%d\" y=\"%d\">a phase begins</text>\n", LEGEND_X + 20, y + 11);
    snug_strbuf_printf(t, "</g>\n");
}

snug_status snug_timeline_svg(const snug_mem_trace *t, const snug_timeline_opts *o, char **svg,
                              size_t *len, snug_error *err)
{
    *svg = NULL;
    *len = 0;
    if (!t->events || t->n_events == 0)
        return snug_errorf(err, SNUG_INVALID, "memory timeline: the event log is empty");
    chart *ch = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *ch, err);
    if (!ch) return snug_error_prefix(err, SNUG_NOMEM, "memory timeline: ");
    replay(t, o->kv_window_block, ch);
    double top = (double)SNUG_MAX(SNUG_MAX(ch->peak_total, ch->peak_rss), o->budget);
    int dec;
    double step = tick_step(top * 1.04 / GIB, 8, &dec) * GIB;
    ch->y_max = SNUG_MAX(ceil(top * 1.04 / step) * step, step);

    snug_strbuf out = {.err = err};
    snug_strbuf_printf(&out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "font-family=\"DejaVu Sans, Arial, sans-serif\">\n"
        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", WIDTH, HEIGHT, WIDTH, HEIGHT);
    snug_strbuf_printf(&out, "<text x=\"%d\" y=\"28\" font-size=\"18\" font-weight=\"bold\">", PLOT_X);
    snug_strbuf_xml(&out, o->title ? o->title : "memory over time");
    snug_strbuf_printf(&out, "</text>\n");
    if (o->subtitle) {
        snug_strbuf_printf(&out, "<text x=\"%d\" y=\"50\" font-size=\"12\" fill=\"#333\">", PLOT_X);
        snug_strbuf_xml(&out, o->subtitle);
        snug_strbuf_printf(&out, "</text>\n");
    }
    snug_strbuf_printf(&out, "<text x=\"%d\" y=\"68\" font-size=\"11\" fill=\"#555\">from the allocator's log of "
        "%zu events (every allocation and free)%s</text>\n", PLOT_X, t->n_events,
        t->dropped ? "; the log filled up: the chart ends at its last event" : "");
    draw_axes(&out, ch);
    draw_stack(&out, ch);
    draw_level(&out, ch, o->capacity, "#7f4f00", "2 2", "allocator capacity", true);
    draw_level(&out, ch, o->budget, "#d62728", "6 3", "budget", false);
    draw_rss(&out, ch);
    draw_phases(&out, ch);
    draw_legend(&out, ch, o);
    snug_strbuf_printf(&out, "</svg>\n");
    snug_mem_free(ch);
    if (out.failed) {
        snug_strbuf_free(&out);
        return snug_error_prefix(err, SNUG_NOMEM, "memory timeline: ");
    }
    *svg = out.p;
    *len = out.len;
    return SNUG_OK;
}

snug_status snug_timeline_write(const char *path, const snug_mem_trace *t,
                                const snug_timeline_opts *o, snug_error *err)
{
    char *svg = NULL;
    size_t len = 0;
    int fd = -1;
    snug_status st = snug_timeline_svg(t, o, &svg, &len, err);
    if (st == SNUG_OK) st = snug_file_create(path, &fd, err);
    if (st == SNUG_OK) st = snug_pwrite_full(fd, svg, len, 0, path, err);
    if (fd >= 0) {
        snug_status cst = snug_file_close(fd, path, st == SNUG_OK ? err : NULL);
        if (st == SNUG_OK) st = cst;
    }
    snug_mem_free(svg);
    return st;
}
