/*
 * sysinfo.c: the /proc and cgroup readers (see sysinfo.h).
 *
 * Files under /proc and /sys report no size, so they are read until end of
 * file into bounded buffers (snug_file_read_text). The parsing is shared:
 * "Key: N kB" lines (status, smaps_rollup, meminfo), decimal integers with
 * blanks around them (cgroup files), the lines of /proc/self/cgroup, and
 * the walk from a cgroup up to its hierarchy's mount.
 */
#include "sysinfo.h"

#include "mem.h"
#include "procfile.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    PROC_FILE_MAX = 1 << 20,      /* /proc/self/mountinfo of a busy host fits */
    CG_PATH_BYTES = 4096,         /* a cgroup directory under its fs root */
    CG_TEXT_BYTES = 128           /* a cgroup file: "max\n", a count, "QUOTA PERIOD" */
};

/* cgroup v1 writes PAGE_COUNTER_MAX pages for "no limit" (about 2^63 bytes);
 * anything from here on is no limit. */
static const uint64_t V1_UNLIMITED = 1ull << 62;

/* ---- shared parsing ---------------------------------------------------- */

/* Reads the start of a small file into buf (size bytes), NUL-terminated:
 * all of it, or what fits when it is longer; false when it cannot be read. */
static bool read_start(const char *path, char *buf, size_t size)
{
    size_t len;
    return snug_file_read_text(path, buf, size - 1, &len, NULL) != SNUG_IO;
}

/* The "Key:   123 kB" field key names in text, in bytes; false when text has
 * none or it does not fit in size_t. */
static bool kb_field(const char *text, const char *key, size_t *bytes)
{
    const char *p = strstr(text, key);
    if (!p) return false;
    p += strlen(key);
    char *end;
    errno = 0;
    unsigned long long kb = strtoull(p, &end, 10);
    if (end == p || errno != 0 || kb > SIZE_MAX / 1024) return false;
    *bytes = (size_t)kb * 1024;
    return true;
}

/* Parses a decimal integer (an optional '-', then digits) at *s after
 * blanks, moving *s past it; false when there is none or it overflows. */
static bool parse_int(const char **s, int64_t *out)
{
    const char *c = *s;
    while (*c == ' ' || *c == '\t' || *c == '\n') c++;
    bool neg = *c == '-';
    if (neg) c++;
    if (*c < '0' || *c > '9') return false;
    int64_t v = 0;
    for (; *c >= '0' && *c <= '9'; c++)
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *c - '0', &v))
            return false;
    *out = neg ? -v : v;
    *s = c;
    return true;
}

/* True when only blanks are left at s. */
static bool only_blanks(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    return *s == '\0';
}

/* True when the comma-separated list s (n bytes) has the item word. */
static bool list_has(const char *s, size_t n, const char *word)
{
    size_t w = strlen(word);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && s[j] != ',') j++;
        if (j - i == w && memcmp(s + i, word, w) == 0) return true;
        i = j + 1;
    }
    return false;
}

/* The cgroup path (at *path, *len bytes, beginning with '/') of a hierarchy
 * in /proc/self/cgroup text: cgroup v2's ("0::PATH") when controller is
 * NULL, else that of the v1 hierarchy whose line lists controller; the
 * first such line. False when there is none. */
static bool cgroup_path(const char *text, const char *controller, const char **path, size_t *len)
{
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        size_t n = eol ? (size_t)(eol - line) : strlen(line);
        const char *c1 = memchr(line, ':', n);
        const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            const char *ctl = c1 + 1, *p = c2 + 1;
            size_t ctl_n = (size_t)(c2 - ctl), p_n = n - (size_t)(p - line);
            bool match = controller ? list_has(ctl, ctl_n, controller)
                                    : c1 - line == 1 && line[0] == '0' && ctl_n == 0;
            if (match && p_n > 0 && p[0] == '/') {
                *path = p;
                *len = p_n;
                return true;
            }
        }
        line = eol ? eol + 1 : line + n;
    }
    return false;
}

/* Calls visit(dir, ctx) on the cgroup directory dir and on each directory
 * above it, the first base_len bytes of dir (the hierarchy's mount point)
 * last; trailing '/' are dropped first. Cuts dir down as it goes. */
static void cgroup_walk(char *dir, size_t base_len, void (*visit)(const char *dir, void *ctx),
                        void *ctx)
{
    for (;;) {
        size_t dl = strlen(dir);
        while (dl > base_len && dir[dl - 1] == '/') dir[--dl] = '\0';
        visit(dir, ctx);
        if (dl <= base_len) break;
        char *slash = strrchr(dir + base_len, '/');
        if (!slash) break;
        *slash = '\0';
    }
}

/* ---- the process's memory ---------------------------------------------- */

snug_status snug_proc_mem(size_t *rss, size_t *hwm, snug_error *err)
{
    char text[8192];
    size_t used = 0;
    snug_status st = snug_file_read_text("/proc/self/status", text, sizeof text - 1, &used, err);
    if (st == SNUG_IO) return st; /* a longer file still has VmRSS and VmHWM in its start */
    size_t r = 0, h = 0;
    if (!kb_field(text, "VmRSS:", &r) || !kb_field(text, "VmHWM:", &h))
        return snug_errorf(err, SNUG_UNSUPPORTED,
                           "/proc/self/status: no VmRSS/VmHWM lines (not a Linux /proc?)");
    if (rss) *rss = r;
    if (hwm) *hwm = h;
    return SNUG_OK;
}

snug_status snug_proc_rss_exact(size_t *rss, snug_error *err)
{
    char text[4096];
    if (read_start("/proc/self/smaps_rollup", text, sizeof text) && kb_field(text, "\nRss:", rss))
        return SNUG_OK;
    return snug_proc_mem(rss, NULL, err); /* before Linux 4.14: the counters' sum */
}

snug_status snug_proc_hwm_reset(snug_error *err)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return snug_errorf(err, SNUG_UNSUPPORTED,
                           "cannot reset the high-water mark: /proc/self/clear_refs: %s "
                           "(the kernel or its sandbox does not allow it; peaks are then "
                           "measured from process start)", strerror(errno));
    ssize_t w;
    do {
        w = write(fd, "5", 1);
    } while (w < 0 && errno == EINTR);
    int e = errno;
    close(fd);
    if (w != 1)
        return snug_errorf(err, SNUG_UNSUPPORTED,
                           "cannot reset the high-water mark: writing 5 to "
                           "/proc/self/clear_refs failed: %s (needs Linux 4.0 or later)",
                           strerror(e));
    return SNUG_OK;
}

/* ---- the machine's memory and the memory cgroups ------------------------ */

/* root + path into out (size bytes); false when it does not fit. */
static bool rooted(char *out, size_t size, const char *root, const char *path)
{
    int n = snprintf(out, size, "%s%s", root, path);
    return n >= 0 && (size_t)n < size;
}

snug_status snug_meminfo_available(const char *root, size_t *bytes, snug_error *err)
{
    char path[SNUG_SYSINFO_PATH_BYTES], text[16384]; /* meminfo is about 1.5 KiB */
    size_t len;
    if (!rooted(path, sizeof path, root, "/proc/meminfo"))
        return snug_errorf(err, SNUG_INVALID, "%s/proc/meminfo: path too long", root);
    snug_status st = snug_file_read_text(path, text, sizeof text - 1, &len, err);
    if (st != SNUG_OK) return st;
    if (!kb_field(text, "MemAvailable:", bytes))
        return snug_errorf(err, SNUG_FORMAT, "%s: no MemAvailable line (Linux 3.14 or later has "
                           "one)", path);
    return SNUG_OK;
}

static bool is_octal(char c) { return c >= '0' && c <= '7'; }

/* Copies a mountinfo field (n bytes at s, with \ooo escapes) into out. */
static bool unescape(const char *s, size_t n, char *out, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o + 1 >= size) return false;
        if (s[i] == '\\' && i + 3 < n && is_octal(s[i + 1]) && is_octal(s[i + 2]) &&
            is_octal(s[i + 3]) && s[i + 1] <= '3') {
            out[o++] = (char)((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 | (s[i + 3] - '0'));
            i += 3;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return true;
}

/* The mount point and mount root of a hierarchy from /proc/self/mountinfo
 * text: cgroup2's when controller is NULL, else that of the v1 cgroup mount
 * with the controller among its options. */
static bool cgroup_mount(const char *text, const char *controller, char *point, char *mroot,
                         size_t size)
{
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        size_t n = eol ? (size_t)(eol - line) : strlen(line);
        /* id parent major:minor root mount-point options [optional...] - type source super */
        const char *f[6];
        size_t fl[6], k = 0, i = 0;
        while (k < 6 && i < n) {
            while (i < n && line[i] == ' ') i++;
            size_t b = i;
            while (i < n && line[i] != ' ') i++;
            if (i > b) f[k] = line + b, fl[k++] = i - b;
        }
        const char *sep = NULL;
        for (size_t j = 0; j + 3 <= n; j++)
            if (memcmp(line + j, " - ", 3) == 0) {
                sep = line + j + 3;
                break;
            }
        if (k >= 5 && sep) {
            size_t rest = n - (size_t)(sep - line);
            const char *sp = memchr(sep, ' ', rest);
            size_t type_n = sp ? (size_t)(sp - sep) : rest;
            const char *super = sp ? memrchr(sep, ' ', rest) : NULL;
            size_t super_n = super ? n - (size_t)(super + 1 - line) : 0;
            bool match = !controller ? (type_n == 7 && memcmp(sep, "cgroup2", 7) == 0)
                                     : (type_n == 6 && memcmp(sep, "cgroup", 6) == 0 && super &&
                                        list_has(super + 1, super_n, controller));
            if (match && unescape(f[3], fl[3], mroot, size) && unescape(f[4], fl[4], point, size))
                return true;
        }
        line = eol ? eol + 1 : line + n;
    }
    return false;
}

/* What the walk of one memory hierarchy keeps. */
typedef struct limit_walk {
    const char *name;          /* memory.max or memory.limit_in_bytes */
    bool v1;
    size_t root_len;           /* of the fake root, left out of out->file */
    snug_cgroup_limit *out;
} limit_walk;

/* One directory of a memory hierarchy: its limit, when it is the smallest yet. */
static void visit_limit(const char *dir, void *ctx)
{
    limit_walk *w = ctx;
    char path[3 * SNUG_SYSINFO_PATH_BYTES + 32], text[CG_TEXT_BYTES];
    snprintf(path, sizeof path, "%s/%s", dir, w->name);
    const char *c = text;
    int64_t x;
    if (!read_start(path, text, sizeof text) || !parse_int(&c, &x) || x < 0 ||
        (*c != '\n' && *c != '\0')) /* "max" too */
        return;
    if (w->v1 && (uint64_t)x >= V1_UNLIMITED) return;
    if (!w->out->set || (uint64_t)x < w->out->bytes) {
        w->out->set = true;
        w->out->bytes = (uint64_t)x;
        snprintf(w->out->file, sizeof w->out->file, "%s", path + w->root_len);
    }
}

/* The smallest memory limit of one hierarchy (controller NULL: v2; "memory":
 * v1) along the process's cgroup path, up to the mount's root, into *out. */
static void hierarchy_limit(const char *root, const char *cgroup_text, const char *mount_text,
                            const char *controller, snug_cgroup_limit *out)
{
    char cg[SNUG_SYSINFO_PATH_BYTES], point[SNUG_SYSINFO_PATH_BYTES];
    char mroot[SNUG_SYSINFO_PATH_BYTES];
    const char *cg_path;
    size_t cg_len;
    if (!cgroup_path(cgroup_text, controller, &cg_path, &cg_len) || cg_len >= sizeof cg) return;
    memcpy(cg, cg_path, cg_len);
    cg[cg_len] = '\0';
    if (!cgroup_mount(mount_text, controller, point, mroot, sizeof point)) return;
    /* the path below the mount: the cgroup path less the mount's root
     * (a container may mount its own cgroup as the root) */
    const char *rel = cg;
    size_t rl = strlen(mroot);
    if (strcmp(mroot, "/") != 0 && strncmp(cg, mroot, rl) == 0 && (cg[rl] == '/' || !cg[rl]))
        rel = cg + rl;
    char dir[3 * SNUG_SYSINFO_PATH_BYTES];
    int n = snprintf(dir, sizeof dir, "%s%s%s", root, point, rel);
    if (n < 0 || (size_t)n >= sizeof dir) return;
    limit_walk w = {controller ? "memory.limit_in_bytes" : "memory.max", controller != NULL,
                    strlen(root), out};
    cgroup_walk(dir, strlen(root) + strlen(point), visit_limit, &w);
}

snug_status snug_cgroup_memory_limits(const char *root, snug_cgroup_limit *v2,
                                      snug_cgroup_limit *v1, snug_error *err)
{
    *v2 = (snug_cgroup_limit){0};
    *v1 = (snug_cgroup_limit){0};
    snug_status st = SNUG_OK;
    char *cg = snug_mem_alloc(SNUG_MEM_OTHER, PROC_FILE_MAX + 1, err);
    char *mounts = cg ? snug_mem_alloc(SNUG_MEM_OTHER, PROC_FILE_MAX + 1, err) : NULL;
    if (!mounts) {
        st = SNUG_NOMEM;
        goto done;
    }
    /* no file, no limit */
    char path[SNUG_SYSINFO_PATH_BYTES], mpath[SNUG_SYSINFO_PATH_BYTES];
    size_t cg_len, m_len;
    if (rooted(path, sizeof path, root, "/proc/self/cgroup") &&
        rooted(mpath, sizeof mpath, root, "/proc/self/mountinfo") &&
        snug_file_read_text(path, cg, PROC_FILE_MAX, &cg_len, NULL) == SNUG_OK &&
        snug_file_read_text(mpath, mounts, PROC_FILE_MAX, &m_len, NULL) == SNUG_OK) {
        hierarchy_limit(root, cg, mounts, NULL, v2);
        hierarchy_limit(root, cg, mounts, "memory", v1);
    }
done:
    snug_mem_free(cg);
    snug_mem_free(mounts);
    return st;
}

/* ---- the CPUs ------------------------------------------------------------ */

/* ceil(quota / period) in int32_t; 0 unless both are positive. */
static int32_t quota_cpus(int64_t quota, int64_t period)
{
    if (quota <= 0 || period <= 0) return 0;
    int64_t cpus = quota / period + (quota % period != 0);
    return cpus > INT32_MAX ? INT32_MAX : (int32_t)cpus;
}

/* The cap cgroup v2's cpu.max text gives, 0 for none or garbage. */
static int32_t parse_cpu_max(const char *s)
{
    int64_t quota, period;
    const char *c = s;
    while (*c == ' ' || *c == '\t') c++;
    if (strncmp(c, "max", 3) == 0) return 0;
    if (!parse_int(&c, &quota) || !parse_int(&c, &period) || !only_blanks(c)) return 0;
    return quota_cpus(quota, period);
}

/* The cap cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us give. */
static int32_t parse_cfs(const char *quota_s, const char *period_s)
{
    int64_t quota, period;
    if (!parse_int(&quota_s, &quota) || !only_blanks(quota_s)) return 0;
    if (quota < 0) return 0; /* -1: no quota */
    if (!period_s || !parse_int(&period_s, &period) || !only_blanks(period_s)) return 0;
    return quota_cpus(quota, period);
}

/* The smaller of two caps, 0 meaning none. */
static int32_t min_cap(int32_t a, int32_t b)
{
    if (a == 0) return b;
    if (b == 0) return a;
    return a < b ? a : b;
}

int32_t snug_cpu_quota_parse(const char *cpu_max_v2, const char *quota_v1, const char *period_v1)
{
    int32_t v2 = cpu_max_v2 ? parse_cpu_max(cpu_max_v2) : 0;
    int32_t v1 = quota_v1 ? parse_cfs(quota_v1, period_v1) : 0;
    return min_cap(v2, v1);
}

/* One directory of a CPU hierarchy: *(int32_t *)cap lowered to its quota.
 * v2 reads cpu.max, v1 cpu.cfs_quota_us and cpu.cfs_period_us. */
static void visit_cap(const char *dir, int32_t *cap, bool v2)
{
    char file[CG_PATH_BYTES + 32], a[CG_TEXT_BYTES], b[CG_TEXT_BYTES];
    if (v2) {
        snprintf(file, sizeof file, "%s/cpu.max", dir);
        if (read_start(file, a, sizeof a)) *cap = min_cap(*cap, parse_cpu_max(a));
    } else {
        snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", dir);
        bool have_quota = read_start(file, a, sizeof a);
        snprintf(file, sizeof file, "%s/cpu.cfs_period_us", dir);
        if (have_quota && read_start(file, b, sizeof b)) *cap = min_cap(*cap, parse_cfs(a, b));
    }
}

static void visit_cap_v2(const char *dir, void *cap) { visit_cap(dir, cap, true); }
static void visit_cap_v1(const char *dir, void *cap) { visit_cap(dir, cap, false); }

/* The smallest cap set in the cgroup path (len bytes) of the hierarchy
 * mounted at mount, or in any cgroup above it; 0 for none. */
static int32_t hierarchy_cap(const char *mount, const char *path, size_t len, bool v2)
{
    char dir[CG_PATH_BYTES];
    int w = snprintf(dir, sizeof dir, "%s%.*s", mount, (int)len, path);
    if (w <= 0 || w >= (int)sizeof dir) return 0;
    int32_t cap = 0;
    cgroup_walk(dir, strlen(mount), v2 ? visit_cap_v2 : visit_cap_v1, &cap);
    return cap;
}

int32_t snug_cpu_cgroup_cap(const char *proc_self_cgroup, const char *fs_root)
{
    const char *text = proc_self_cgroup ? proc_self_cgroup : "";
    const char *v2_path = "/", *v1_path = "/";
    size_t v2_len = 1, v1_len = 1;
    cgroup_path(text, NULL, &v2_path, &v2_len);
    cgroup_path(text, "cpu", &v1_path, &v1_len);
    int32_t cap = hierarchy_cap(fs_root, v2_path, v2_len, true);
    /* v1's cpu hierarchy, under one of its usual names */
    static const char *const v1_names[] = {"cpu", "cpu,cpuacct", "cpuacct,cpu"};
    char v1_root[CG_PATH_BYTES];
    for (size_t i = 0; i < SNUG_ARRAY_LEN(v1_names); i++) {
        int w = snprintf(v1_root, sizeof v1_root, "%s/%s", fs_root, v1_names[i]);
        if (w <= 0 || w >= (int)sizeof v1_root || access(v1_root, F_OK) != 0) continue;
        cap = min_cap(cap, hierarchy_cap(v1_root, v1_path, v1_len, false));
        break;
    }
    return cap;
}

int32_t snug_cpu_count(void)
{
    cpu_set_t set[16]; /* 16,384 CPUs */
    int32_t n = 0;
    if (sched_getaffinity(0, sizeof set, set) == 0) n = (int32_t)CPU_COUNT_S(sizeof set, set);
    if (n < 1) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 && online < INT32_MAX ? (int32_t)online : 1;
    }
    char text[8192];
    int32_t cap = snug_cpu_cgroup_cap(
        read_start("/proc/self/cgroup", text, sizeof text) ? text : NULL, "/sys/fs/cgroup");
    if (cap > 0 && cap < n) n = cap;
    return n;
}
