/*
 * timeline.h: the memory timeline, an SVG chart drawn from the allocator's
 * event log (base/mem.h, snug_mem_trace_*): what each category held over
 * time, stacked (weights, kv cache, activations, staging, other), the
 * process's resident set beside the allocator's total, the budget and the
 * allocator's capacity as lines, and the phases that the log's marks name.
 *
 * The chart is exact, not sampled: the log has every allocation and free.
 * It is drawn in columns one pixel wide, and each column shows the moment of
 * its highest total, so no spike is narrower than a column or lost in one.
 */
#ifndef SNUG_TIMELINE_H
#define SNUG_TIMELINE_H

#include "base/common.h"
#include "base/mem.h"

typedef struct snug_timeline_opts {
    const char *title;      /* the first line, e.g. "snug profile models/x" (escaped here) */
    const char *subtitle;   /* a second line (the plan in a sentence); NULL: none */
    size_t budget;          /* C, drawn as a line; 0: none */
    size_t capacity;        /* the allocator's capacity after the plan (C - U - R); 0: none */
    size_t kv_window_block; /* the charge of the windowed layers' KV cache (plan_report.h's
                             * window_kv_block): a kv cache block of that charge made once
                             * the cache is (the phase "populate" or "reserve") is drawn as a
                             * band of its own; 0: none */
} snug_timeline_opts;

/* Draws the log t as a standalone SVG document into a new block of
 * category other (*svg, NUL-terminated, *len bytes without the NUL; free it
 * with snug_mem_free). A log that dropped events is drawn up to its last
 * recorded event, and the chart says so. Fails with SNUG_INVALID for a log
 * with no events, or SNUG_NOMEM. */
snug_status snug_timeline_svg(const snug_mem_trace *t, const snug_timeline_opts *o, char **svg,
                              size_t *len, snug_error *err);

/* snug_timeline_svg written to the file path (created or truncated).
 * Fails as it does, or with SNUG_IO naming the file. */
snug_status snug_timeline_write(const char *path, const snug_mem_trace *t,
                                const snug_timeline_opts *o, snug_error *err);

#endif /* SNUG_TIMELINE_H */
