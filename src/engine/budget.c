/*
 * budget.c: the memory budget from --memory, the memory cgroup's limit or
 * /proc/meminfo (see budget.h for the rules).
 *
 * Files under /proc and /sys report no size, so they are read until end of
 * file into bounded buffers (snug_file_read_text). Every cgroup file that
 * cannot be read or does not hold a number is taken as "no limit here": a
 * process outside any memory cgroup still gets a budget from /proc/meminfo.
 */
#include "budget.h"

#include "base/device.h"
#include "base/procfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    PROC_FILE_MAX = 1 << 20,      /* /proc/self/mountinfo of a busy host fits */
    LIMIT_FILE_MAX = 64,          /* "max\n" or a decimal count */
};

/* cgroup v1 writes PAGE_COUNTER_MAX pages for "no limit" (about 2^63 bytes);
 * anything from here on is no limit. */
static const uint64_t V1_UNLIMITED = 1ull << 62;

/* root + path into out (size bytes); false when it does not fit. */
static bool rooted(char *out, size_t size, const char *root, const char *path)
{
    int n = snprintf(out, size, "%s%s", root, path);
    return n >= 0 && (size_t)n < size;
}

/* MemAvailable from the text of /proc/meminfo, in bytes. */
static bool meminfo_available(const char *text, size_t *bytes)
{
    const char *p = strstr(text, "MemAvailable:");
    if (!p) return false;
    p += strlen("MemAvailable:");
    char *end;
    errno = 0;
    unsigned long long kb = strtoull(p, &end, 10);
    if (end == p || errno != 0 || kb > SIZE_MAX / 1024) return false;
    *bytes = (size_t)kb * 1024;
    return true;
}

/* True when the comma-separated list s (n bytes) has the item word. */
static bool has_item(const char *s, size_t n, const char *word)
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

/* The cgroup path of hierarchy v (2: the unified one, "0::path"; 1: the v1
 * hierarchy with the memory controller) from /proc/self/cgroup text into
 * out; false when there is none. */
static bool cgroup_path(const char *text, int v, char *out, size_t size)
{
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        size_t n = eol ? (size_t)(eol - line) : strlen(line);
        const char *c1 = memchr(line, ':', n);
        const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            const char *ctl = c1 + 1, *path = c2 + 1;
            size_t ctl_n = (size_t)(c2 - ctl), path_n = n - (size_t)(path - line);
            bool match = v == 2 ? (c1 - line == 1 && line[0] == '0' && ctl_n == 0)
                                : has_item(ctl, ctl_n, "memory");
            if (match && path_n > 0 && path[0] == '/' && path_n < size) {
                memcpy(out, path, path_n);
                out[path_n] = '\0';
                return true;
            }
        }
        line = eol ? eol + 1 : line + n;
    }
    return false;
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

/* The mount point and mount root of hierarchy v (2: cgroup2; 1: cgroup
 * with the memory option) from /proc/self/mountinfo text. */
static bool cgroup_mount(const char *text, int v, char *point, char *mroot, size_t size)
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
            bool match = v == 2 ? (type_n == 7 && memcmp(sep, "cgroup2", 7) == 0)
                                : (type_n == 6 && memcmp(sep, "cgroup", 6) == 0 && super &&
                                   has_item(super + 1, super_n, "memory"));
            if (match && unescape(f[3], fl[3], mroot, size) && unescape(f[4], fl[4], point, size))
                return true;
        }
        line = eol ? eol + 1 : line + n;
    }
    return false;
}

/* The limit in the file at path (v2: "max" or bytes; v1: bytes, huge for
 * none); false when there is no limit or the file cannot be read. */
static bool read_limit(const char *path, int v, uint64_t *limit)
{
    char buf[LIMIT_FILE_MAX + 1];
    size_t len;
    if (snug_file_read_text(path, buf, LIMIT_FILE_MAX, &len, NULL) != SNUG_OK) return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 10);
    if (end == buf || errno != 0 || (*end != '\n' && *end != '\0')) return false; /* "max" too */
    if (v == 1 && x >= V1_UNLIMITED) return false;
    *limit = x;
    return true;
}

/* The smallest limit of hierarchy v along the process's cgroup path, up to
 * the mount's root, into *limit and its file into file; false when none. */
static bool hierarchy_limit(const char *root, const char *cgroup_text, const char *mount_text,
                            int v, uint64_t *limit, char *file, size_t size)
{
    char cg[SNUG_BUDGET_PATH_BYTES], point[SNUG_BUDGET_PATH_BYTES], mroot[SNUG_BUDGET_PATH_BYTES];
    if (!cgroup_path(cgroup_text, v, cg, sizeof cg)) return false;
    if (!cgroup_mount(mount_text, v, point, mroot, sizeof point)) return false;
    /* the path below the mount: the cgroup path less the mount's root
     * (a container may mount its own cgroup as the root) */
    const char *rel = cg;
    size_t rl = strlen(mroot);
    if (strcmp(mroot, "/") != 0 && strncmp(cg, mroot, rl) == 0 && (cg[rl] == '/' || !cg[rl]))
        rel = cg + rl;
    char dir[3 * SNUG_BUDGET_PATH_BYTES], path[3 * SNUG_BUDGET_PATH_BYTES + 32];
    int n = snprintf(dir, sizeof dir, "%s%s%s", root, point, rel);
    if (n < 0 || (size_t)n >= sizeof dir) return false;
    size_t base = strlen(root) + strlen(point);
    const char *name = v == 2 ? "memory.max" : "memory.limit_in_bytes";
    bool found = false;
    for (;;) {
        size_t dl = strlen(dir);
        while (dl > base && dir[dl - 1] == '/') dir[--dl] = '\0';
        snprintf(path, sizeof path, "%s/%s", dir, name);
        uint64_t x;
        if (read_limit(path, v, &x) && (!found || x < *limit)) {
            *limit = x;
            snprintf(file, size, "%s", path + strlen(root));
            found = true;
        }
        if (dl <= base) break;
        char *slash = strrchr(dir + base, '/');
        if (!slash) break;
        *slash = '\0';
    }
    return found;
}

snug_status snug_budget_resolve(const snug_budget_opts *opts, snug_budget *out, snug_error *err)
{
    snug_budget b = {0};
    char *text = NULL, *cg = NULL;
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
    char path[SNUG_BUDGET_PATH_BYTES];
    size_t len, avail, rss = opts->rss_bytes;
    text = snug_mem_alloc(SNUG_MEM_OTHER, PROC_FILE_MAX + 1, err);
    cg = snug_mem_alloc(SNUG_MEM_OTHER, PROC_FILE_MAX + 1, err);
    if (!text || !cg) {
        st = snug_error_prefix(err, SNUG_NOMEM, "memory budget: ");
        goto done;
    }
    if (!rooted(path, sizeof path, root, "/proc/meminfo")) {
        st = snug_errorf(err, SNUG_INVALID, "memory budget: root path too long");
        goto done;
    }
    st = snug_file_read_text(path, text, PROC_FILE_MAX, &len, err);
    if (st != SNUG_OK) goto done;
    if (!meminfo_available(text, &avail)) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: no MemAvailable line (Linux 3.14 or later has "
                         "one); give the budget with --memory", path);
        goto done;
    }
    if (rss == 0 && (st = snug_proc_mem(&rss, NULL, err)) != SNUG_OK) goto done;
    b.available_bytes = avail + rss;
    b.limit_bytes = b.available_bytes;
    b.source = SNUG_BUDGET_MEMINFO;
    snprintf(b.file, sizeof b.file, "/proc/meminfo");

    /* the memory cgroups: no file, no limit */
    char mpath[SNUG_BUDGET_PATH_BYTES];
    size_t cg_len, m_len;
    if (rooted(path, sizeof path, root, "/proc/self/cgroup") &&
        rooted(mpath, sizeof mpath, root, "/proc/self/mountinfo") &&
        snug_file_read_text(path, cg, PROC_FILE_MAX, &cg_len, NULL) == SNUG_OK &&
        snug_file_read_text(mpath, text, PROC_FILE_MAX, &m_len, NULL) == SNUG_OK) {
        for (int v = 2; v >= 1; v--) {
            uint64_t limit = 0;
            char file[SNUG_BUDGET_PATH_BYTES] = "";
            if (hierarchy_limit(root, cg, text, v, &limit, file, sizeof file) &&
                limit <= b.limit_bytes) {
                b.limit_bytes = (size_t)limit;
                b.source = v == 2 ? SNUG_BUDGET_CGROUP_V2 : SNUG_BUDGET_CGROUP_V1;
                snprintf(b.file, sizeof b.file, "%s", file);
            }
        }
    }
    b.fraction = fraction;
    b.bytes = (size_t)((double)b.limit_bytes * fraction);
    *out = b;
done:
    snug_mem_free(text);
    snug_mem_free(cg);
    return st;
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
