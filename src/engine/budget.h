/*
 * budget.h: how many bytes this process may use, the C the memory plan
 * divides among weights, activations, serving state and the KV cache.
 *
 * Either the user says (--memory BYTES), or the budget is a fraction
 * (--memory-fraction, default 0.9) of the memory the process may use:
 *   - the memory cgroup's limit, where one is set: cgroup v2 `memory.max`,
 *     v1 `memory.limit_in_bytes`, the smallest along the path from the
 *     process's cgroup up to the root of the hierarchy's mount;
 *   - else, and also when the limit is above it (a limit the machine cannot
 *     give is no limit), MemAvailable from /proc/meminfo plus what the
 *     process already holds (its resident set).
 * Where neither the user nor a cgroup limits it, the planner caps the KV
 * cache (planner.h SNUG_KV_CACHE_DEFAULT_CAP), so that a plain start does
 * not take most of a shared host.
 * The cgroup is found from /proc/self/cgroup and the hierarchy's mount from
 * /proc/self/mountinfo, so that v1, v2, hybrid layouts and cgroup
 * namespaces (a container seeing its own cgroup as "/") all work.
 */
#ifndef SNUG_BUDGET_H
#define SNUG_BUDGET_H

#include "base/common.h"
#include "base/sysinfo.h"

enum { SNUG_BUDGET_PATH_BYTES = SNUG_SYSINFO_PATH_BYTES };

/* Where the budget came from. */
typedef enum snug_budget_source {
    SNUG_BUDGET_FLAG = 0,     /* --memory */
    SNUG_BUDGET_CGROUP_V2,    /* a fraction of memory.max */
    SNUG_BUDGET_CGROUP_V1,    /* a fraction of memory.limit_in_bytes */
    SNUG_BUDGET_MEMINFO       /* a fraction of MemAvailable + the process's RSS */
} snug_budget_source;

typedef struct snug_budget_opts {
    size_t memory_bytes;      /* --memory; 0: not given */
    double fraction;          /* --memory-fraction in (0, 1]; 0: the default 0.9 */
    const char *root;         /* prefix of /proc and /sys paths (tests); NULL: none */
    size_t rss_bytes;         /* what the process holds; 0: read /proc/self/status */
} snug_budget_opts;

typedef struct snug_budget {
    size_t bytes;                         /* C */
    snug_budget_source source;
    double fraction;                      /* what was taken (1 with --memory) */
    size_t limit_bytes;                   /* what it was taken of */
    size_t available_bytes;               /* MemAvailable + RSS (0 with --memory) */
    char file[SNUG_BUDGET_PATH_BYTES];    /* the cgroup file or /proc/meminfo; "" with --memory */
} snug_budget;

/* Works out the budget. Fails with SNUG_INVALID for a fraction outside
 * (0, 1], with SNUG_IO or SNUG_FORMAT (naming the file) when /proc cannot
 * be read or parsed; an unreadable or malformed cgroup file is not an
 * error: that hierarchy then sets no limit. Allocates only transiently. */
snug_status snug_budget_resolve(const snug_budget_opts *opts, snug_budget *out, snug_error *err);

/* "memory flag", "cgroup v2", "cgroup v1", "meminfo"; never NULL. */
const char *snug_budget_source_name(snug_budget_source source);

/* One line for people: "6.00 GiB (--memory)", "0.9 of the cgroup v2 limit
 * 8.00 GiB (/sys/fs/cgroup/x/memory.max)", "0.9 of MemAvailable + RSS
 * 23.1 GiB" into buf (size bytes). Returns buf. */
char *snug_budget_describe(const snug_budget *b, char *buf, size_t size);

#endif /* SNUG_BUDGET_H */
