/*
 * budget.c: the memory budget from --memory, the memory cgroup's limit or
 * /proc/meminfo (see budget.h for the rules). The files are read by
 * base/sysinfo.h; what is here is which figure to take and how much of it.
 */
#include "budget.h"

#include "base/sysinfo.h"

#include <stdio.h>
#include <string.h>

snug_status snug_budget_resolve(const snug_budget_opts *opts, snug_budget *out, snug_error *err)
{
    snug_budget b = {0};
    snug_status st = SNUG_OK;
    const char *root = opts->root ? opts->root : "";
    double fraction = opts->fraction == 0 ? 0.9 : opts->fraction;
    if (!(fraction > 0 && fraction <= 1))
        return snug_errorf(err, SNUG_INVALID, "--memory-fraction must be in (0, 1], got %g",
                           opts->fraction);
    if (opts->memory_bytes) {
        b.bytes = b.limit_bytes = opts->memory_bytes;
        b.source = SNUG_BUDGET_FLAG;
        b.fraction = 1;
        *out = b;
        return SNUG_OK;
    }
    size_t avail, rss = opts->rss_bytes;
    st = snug_meminfo_available(root, &avail, err);
    if (st == SNUG_FORMAT && err) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return snug_errorf(err, st, "%s; give the budget with --memory", why);
    }
    if (st != SNUG_OK) return st;
    if (rss == 0 && (st = snug_proc_mem(&rss, NULL, err)) != SNUG_OK) return st;
    b.available_bytes = avail + rss;
    b.limit_bytes = b.available_bytes;
    b.source = SNUG_BUDGET_MEMINFO;
    snprintf(b.file, sizeof b.file, "/proc/meminfo");

    /* a cgroup's limit, v2's before v1's, when the machine could give it */
    snug_cgroup_limit limits[2];
    st = snug_cgroup_memory_limits(root, &limits[0], &limits[1], err);
    if (st != SNUG_OK) return snug_error_prefix(err, st, "memory budget: ");
    for (int i = 0; i < 2; i++) {
        if (limits[i].set && limits[i].bytes <= b.limit_bytes) {
            b.limit_bytes = (size_t)limits[i].bytes;
            b.source = i == 0 ? SNUG_BUDGET_CGROUP_V2 : SNUG_BUDGET_CGROUP_V1;
            snprintf(b.file, sizeof b.file, "%s", limits[i].file);
        }
    }
    b.fraction = fraction;
    b.bytes = (size_t)((double)b.limit_bytes * fraction);
    *out = b;
    return SNUG_OK;
}

const char *snug_budget_source_name(snug_budget_source source)
{
    switch (source) {
    case SNUG_BUDGET_FLAG: return "memory flag";
    case SNUG_BUDGET_CGROUP_V2: return "cgroup v2";
    case SNUG_BUDGET_CGROUP_V1: return "cgroup v1";
    case SNUG_BUDGET_MEMINFO: return "meminfo";
    }
    return "unknown";
}

char *snug_budget_describe(const snug_budget *b, char *buf, size_t size)
{
    char c[32], l[32];
    snug_fmt_bytes(b->bytes, c);
    snug_fmt_bytes(b->limit_bytes, l);
    if (b->source == SNUG_BUDGET_FLAG)
        snprintf(buf, size, "%s (--memory)", c);
    else if (b->source == SNUG_BUDGET_MEMINFO)
        snprintf(buf, size, "%s = %g of MemAvailable + RSS %s (%s)", c, b->fraction, l, b->file);
    else
        snprintf(buf, size, "%s = %g of the %s limit %s (%s)", c, b->fraction,
                 snug_budget_source_name(b->source), l, b->file);
    return buf;
}
