/*
 * sysinfo.h: what the kernel says about this process and its machine, read
 * from /proc and the cgroup file systems: the resident set and its
 * high-water mark (snug_proc_mem, snug_proc_rss_exact and
 * snug_proc_hwm_reset, declared in snug.h), the resident set for the
 * allocator's event log, MemAvailable, the memory cgroups' limits, and the
 * CPUs this process may use (the affinity mask capped by the cgroups' CPU
 * quota).
 *
 * The one place snug reads these files. Each function here reads what its
 * contract says and nothing more; what the numbers mean for a budget or a
 * thread count is its caller's business (engine/budget.c, base/pool.c).
 * The cgroup of a controller is found from /proc/self/cgroup, and walked
 * from the process's own cgroup up to the hierarchy's mount: a limit or
 * quota set anywhere above the process applies to it. A cgroup file that
 * cannot be read or does not parse sets no limit. Linux only.
 */
#ifndef SNUG_SYSINFO_H
#define SNUG_SYSINFO_H

#include "common.h"
#include "procfile.h" /* snug_proc_statm_*: the allocator's reader, down in the leaf */

enum { SNUG_SYSINFO_PATH_BYTES = 512 };

/* MemAvailable of root + "/proc/meminfo" (root "" for the machine's; tests
 * give a fake tree), in bytes, into *bytes. Fails with SNUG_INVALID when the
 * path does not fit, SNUG_IO when the file cannot be read and SNUG_FORMAT
 * when it has no MemAvailable line (before Linux 3.14), each message naming
 * the file. Allocates nothing. */
snug_status snug_meminfo_available(const char *root, size_t *bytes, snug_error *err);

/* A memory limit of one cgroup hierarchy. */
typedef struct snug_cgroup_limit {
    bool set;                              /* false: this hierarchy sets none */
    uint64_t bytes;                        /* the smallest limit on the way up */
    char file[SNUG_SYSINFO_PATH_BYTES];    /* the file that sets it, without root */
} snug_cgroup_limit;

/* The memory limits of the process's cgroups under root (root "" for the
 * machine's): *v2 from cgroup v2's memory.max ("max": none), *v1 from v1's
 * memory.limit_in_bytes (2^62 or more: none), each the smallest along the
 * path from the process's cgroup (/proc/self/cgroup) up to the root of the
 * hierarchy's mount (/proc/self/mountinfo: v1, v2, hybrid layouts and a
 * cgroup namespace that mounts its own cgroup as "/"). What cannot be read
 * or parsed sets nothing. Fails only with SNUG_NOMEM (two transient buffers
 * of category other, 1 MiB each, for /proc/self/cgroup and mountinfo). */
snug_status snug_cgroup_memory_limits(const char *root, snug_cgroup_limit *v2,
                                      snug_cgroup_limit *v1, snug_error *err);

/* The number of CPUs this process may run on: those of its affinity mask
 * (sched_getaffinity), capped by the CPU quota of its cgroup and of every
 * cgroup above it (v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us,
 * rounded up to whole CPUs), found through /proc/self/cgroup, falling back
 * to /sys/fs/cgroup itself. At least 1; never fails (what cannot be read
 * does not cap). Reads a few small files: call it at start-up, not per
 * step. */
int32_t snug_cpu_count(void);

/* The CPU cap that cgroup files say, from their contents (any may be NULL =
 * absent): cpu_max_v2 is cgroup v2's cpu.max ("QUOTA PERIOD", QUOTA "max"
 * for none), quota_v1 and period_v1 are v1's cpu.cfs_quota_us (-1 for none)
 * and cpu.cfs_period_us. Returns ceil(quota / period), the smaller of the
 * two when both versions give one, or 0 when there is no cap or the text
 * does not parse (a positive decimal integer each, surrounding whitespace
 * allowed). Pure. */
int32_t snug_cpu_quota_parse(const char *cpu_max_v2, const char *quota_v1, const char *period_v1);

/* The cgroup half of snug_cpu_count, for tests: the smallest CPU cap of the
 * cgroups that proc_self_cgroup (the text of /proc/self/cgroup, NULL for
 * none: both paths "/") names and of those above them, read from the
 * hierarchies mounted at fs_root ("/sys/fs/cgroup": v2 there, v1 in
 * fs_root/cpu, cpu,cpuacct or cpuacct,cpu); 0 for none. Files that cannot
 * be read cap nothing. */
int32_t snug_cpu_cgroup_cap(const char *proc_self_cgroup, const char *fs_root);

#endif /* SNUG_SYSINFO_H */
