/*
 * test_budget.c: byte counts as people write them (snug_parse_bytes) and
 * the memory budget (engine/budget.h) from --memory, cgroup v2 and v1
 * limits and /proc/meminfo, over fake /proc and /sys trees made in a
 * temporary directory: nested cgroups, a container's namespaced root,
 * hybrid layouts, "max", v1's "unlimited", a limit above what the machine
 * has, unreadable and malformed files.
 */
#include "test.h"

#include "base/mem.h"
#include "engine/budget.h"

#include <string.h>
#include <sys/stat.h>

static char g_root[4096];

static void test_parse_bytes(void)
{
    static const struct { const char *s; size_t want; } good[] = {
        {"1", 1}, {"4096", 4096}, {"512B", 512}, {"6GiB", 6ull << 30}, {"6gib", 6ull << 30},
        {"1500MB", 1500000000ull}, {"512MiB", 512ull << 20}, {"64M", 64ull << 20},
        {"64k", 64ull << 10}, {"2KB", 2000}, {"1.5GiB", 3ull << 29}, {"0.5K", 512},
        {"1.0000000001KiB", 1024}, {"2TB", 2000000000000ull}, {"1T", 1ull << 40},
        {"0.1MB", 100000}, {"1.9999B", 1},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(good); i++) {
        size_t got = 0;
        CHECK(snug_parse_bytes(good[i].s, &got) && got == good[i].want, "'%s' gave %zu, want %zu",
              good[i].s, got, good[i].want);
    }
    static const char *const bad[] = {"", "0", "0MiB", "-1", "+5", " 5", "5 ", "5 MiB", "1e9",
                                      "GiB", ".5G", "5.G", "5XB", "5MiBs", "5iB", "0.4B",
                                      "99999999999999999999", "16777216TiB", "1..5M", "0x10"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(bad); i++) {
        size_t got = 7;
        CHECK(!snug_parse_bytes(bad[i], &got) && got == 7, "'%s' was accepted (%zu)", bad[i], got);
    }
    CHECK(!snug_parse_bytes(NULL, &(size_t){0}), "NULL accepted");
}

/* Writes text to g_root + rel, making the directories on the way. */
static void put(const char *rel, const char *text)
{
    char path[8192];
    snprintf(path, sizeof path, "%s%s", g_root, rel);
    for (char *p = path + strlen(g_root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    test_write_file(path, text, strlen(text));
}

/* A fresh fake root with /proc/meminfo giving MemAvailable of avail_kb. */
static void fresh_root(unsigned long long avail_kb)
{
    if (g_root[0]) test_rmtree(g_root);
    test_tmpdir(g_root, sizeof g_root);
    char text[256];
    snprintf(text, sizeof text, "MemTotal:       32000000 kB\nMemFree:         1000 kB\n"
             "MemAvailable:   %llu kB\nBuffers:   5 kB\n", avail_kb);
    put("/proc/meminfo", text);
}

static snug_budget resolve_ok(double fraction, size_t rss)
{
    snug_budget b;
    memset(&b, 0xAA, sizeof b);
    snug_error err = {0};
    snug_budget_opts o = {.fraction = fraction, .root = g_root, .rss_bytes = rss};
    CHECK_OK(snug_budget_resolve(&o, &b, &err), &err);
    return b;
}

static const char *const MOUNTS_V2 =
    "22 1 0:21 / /sys rw - sysfs sysfs rw\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
static const char *const MOUNTS_V1 =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static void test_flag(void)
{
    snug_budget b;
    snug_error err = {0};
    snug_budget_opts o = {.memory_bytes = 6ull << 30, .fraction = 0.5, .root = "/nonexistent"};
    CHECK_OK(snug_budget_resolve(&o, &b, &err), &err);
    CHECK(b.bytes == 6ull << 30 && b.source == SNUG_BUDGET_FLAG && b.fraction == 1,
          "--memory sets the budget outright: %zu from %s", b.bytes, snug_budget_source_name(b.source));
    char line[256];
    CHECK(strcmp(snug_budget_describe(&b, line, sizeof line), "6.00 GiB (--memory)") == 0, "%s", line);
    o.memory_bytes = 0;
    o.fraction = 1.5;
    CHECK_FAILS(snug_budget_resolve(&o, &b, &err), &err, SNUG_INVALID, "must be in (0, 1], got 1.5");
    o.fraction = -0.1;
    CHECK_FAILS(snug_budget_resolve(&o, &b, &err), &err, SNUG_INVALID, "(0, 1]");
}

static void test_meminfo(void)
{
    /* no cgroup files at all: MemAvailable plus what the process holds */
    fresh_root(8000000);
    snug_budget b = resolve_ok(0, 100ull << 20);
    size_t want_limit = 8000000ull * 1024 + (100ull << 20);
    CHECK(b.source == SNUG_BUDGET_MEMINFO && b.limit_bytes == want_limit &&
          b.available_bytes == want_limit && b.bytes == (size_t)((double)want_limit * 0.9) &&
          b.fraction == 0.9 && strcmp(b.file, "/proc/meminfo") == 0,
          "meminfo: %s %zu of %zu", snug_budget_source_name(b.source), b.bytes, b.limit_bytes);
    b = resolve_ok(0.5, 1 << 20);
    CHECK(b.bytes == (8000000ull * 1024 + (1 << 20)) / 2, "half: %zu", b.bytes);

    /* a v2 cgroup whose memory.max is "max" all the way up: no limit */
    put("/proc/self/cgroup", "0::/user.slice/session-1.scope\n");
    put("/proc/self/mountinfo", MOUNTS_V2);
    put("/sys/fs/cgroup/memory.max", "max\n");
    put("/sys/fs/cgroup/user.slice/memory.max", "max\n");
    put("/sys/fs/cgroup/user.slice/session-1.scope/memory.max", "max\n");
    b = resolve_ok(0, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_MEMINFO, "'max' is no limit: %s", snug_budget_source_name(b.source));

    /* a limit above what the machine has is no limit either */
    put("/sys/fs/cgroup/user.slice/memory.max", "1099511627776\n");
    b = resolve_ok(0, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_MEMINFO && b.limit_bytes == 8000000ull * 1024 + (1 << 20),
          "a 1 TiB limit on an 8 GB machine: %s", snug_budget_source_name(b.source));

    /* no MemAvailable line: a clear error */
    put("/proc/meminfo", "MemTotal: 100 kB\n");
    snug_error err = {0};
    snug_budget_opts o = {.root = g_root, .rss_bytes = 1};
    CHECK_FAILS(snug_budget_resolve(&o, &b, &err), &err, SNUG_FORMAT,
                "/proc/meminfo: no MemAvailable line");
    char bad_root[4200];
    snprintf(bad_root, sizeof bad_root, "%s/missing", g_root);
    o.root = bad_root;
    CHECK_FAILS(snug_budget_resolve(&o, &b, &err), &err, SNUG_IO, "/proc/meminfo: cannot open");
}

static void test_cgroup_v2(void)
{
    fresh_root(16000000);
    put("/proc/self/cgroup", "0::/system.slice/snug.service\n");
    put("/proc/self/mountinfo", MOUNTS_V2);
    put("/sys/fs/cgroup/memory.max", "max\n");
    put("/sys/fs/cgroup/system.slice/memory.max", "8589934592\n");
    put("/sys/fs/cgroup/system.slice/snug.service/memory.max", "max\n");
    snug_budget b = resolve_ok(0, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_CGROUP_V2 && b.limit_bytes == 8589934592ull &&
          b.bytes == (size_t)(8589934592.0 * 0.9) &&
          strcmp(b.file, "/sys/fs/cgroup/system.slice/memory.max") == 0,
          "a parent's limit applies: %s %zu (%s)", snug_budget_source_name(b.source), b.limit_bytes, b.file);
    char line[512];
    snug_budget_describe(&b, line, sizeof line);
    CHECK(strstr(line, "0.9 of the cgroup v2 limit 8.00 GiB (/sys/fs/cgroup/system.slice/memory.max)"),
          "%s", line);

    /* the smallest along the path wins */
    put("/sys/fs/cgroup/system.slice/snug.service/memory.max", "2147483648\n");
    b = resolve_ok(1, 1 << 20);
    CHECK(b.limit_bytes == 2147483648ull && b.bytes == 2147483648ull &&
          strcmp(b.file, "/sys/fs/cgroup/system.slice/snug.service/memory.max") == 0,
          "the leaf's smaller limit: %zu (%s)", b.limit_bytes, b.file);

    /* malformed and unreadable files set no limit */
    put("/sys/fs/cgroup/system.slice/snug.service/memory.max", "lots\n");
    put("/sys/fs/cgroup/system.slice/memory.max", "123abc\n");
    b = resolve_ok(0, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_MEMINFO, "garbage limits: %s", snug_budget_source_name(b.source));

    /* a container: its cgroup is "/" in its namespace, and the mount's root too */
    fresh_root(16000000);
    put("/proc/self/cgroup", "0::/\n");
    put("/proc/self/mountinfo",
        "600 500 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
    put("/sys/fs/cgroup/memory.max", "4294967296\n");
    b = resolve_ok(0.5, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_CGROUP_V2 && b.bytes == 2147483648ull &&
          strcmp(b.file, "/sys/fs/cgroup/memory.max") == 0,
          "container root: %s %zu (%s)", snug_budget_source_name(b.source), b.bytes, b.file);

    /* a bind-mounted cgroup: the mount's root is the cgroup itself */
    fresh_root(16000000);
    put("/proc/self/cgroup", "0::/kubepods/pod1/c1\n");
    put("/proc/self/mountinfo",
        "600 500 0:26 /kubepods/pod1/c1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
    put("/sys/fs/cgroup/memory.max", "3221225472\n");
    b = resolve_ok(1, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_CGROUP_V2 && b.bytes == 3221225472ull,
          "mount root stripped: %s %zu", snug_budget_source_name(b.source), b.bytes);
}

static void test_cgroup_v1(void)
{
    fresh_root(20000000);
    /* hybrid: memory on v1, the unified hierarchy without the controller */
    put("/proc/self/cgroup", "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n"
        "3:cpuset,cpu:/\n0::/\n");
    put("/proc/self/mountinfo", MOUNTS_V1);
    put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", "9223372036854771712\n");
    snug_budget b = resolve_ok(0, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_MEMINFO, "v1 unlimited: %s", snug_budget_source_name(b.source));
    put("/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", "6442450944\n");
    b = resolve_ok(0, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_CGROUP_V1 && b.limit_bytes == 6442450944ull &&
          strcmp(b.file, "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes") == 0,
          "v1 limit: %s %zu (%s)", snug_budget_source_name(b.source), b.limit_bytes, b.file);

    /* both hierarchies limit: the smaller decides */
    put("/sys/fs/cgroup/unified/memory.max", "5368709120\n");
    b = resolve_ok(0, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_CGROUP_V2 && b.limit_bytes == 5368709120ull,
          "the smaller of v1 and v2: %s %zu", snug_budget_source_name(b.source), b.limit_bytes);

    /* a mount point with an escaped space */
    fresh_root(20000000);
    put("/proc/self/cgroup", "4:memory:/x\n");
    put("/proc/self/mountinfo", "35 31 0:32 / /cg\\040mem rw - cgroup cgroup rw,memory\n");
    put("/cg mem/x/memory.limit_in_bytes", "1073741824\n");
    b = resolve_ok(1, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_CGROUP_V1 && b.bytes == 1073741824ull,
          "escaped mount point: %s %zu", snug_budget_source_name(b.source), b.bytes);

    /* nonsense in /proc/self/cgroup and mountinfo: no cgroup, no crash */
    put("/proc/self/cgroup", "garbage\n::\n4:memory:\n:memory:relative\n\n");
    put("/proc/self/mountinfo", "1 2 3\n - \n35 31 0:32 / /cg rw - cgroup\n");
    b = resolve_ok(0, 1 << 20);
    CHECK(b.source == SNUG_BUDGET_MEMINFO, "nonsense: %s", snug_budget_source_name(b.source));
}

/* The real machine: whatever it has, the budget is positive and below what
 * the machine has plus what the process holds. */
static void test_this_machine(void)
{
    snug_budget b;
    snug_error err = {0};
    snug_budget_opts o = {0};
    CHECK_OK(snug_budget_resolve(&o, &b, &err), &err);
    size_t rss = 0;
    CHECK_OK(snug_proc_mem(&rss, NULL, &err), &err);
    CHECK(b.bytes > 0 && b.bytes <= b.limit_bytes && b.limit_bytes <= b.available_bytes,
          "%zu of %zu (available %zu)", b.bytes, b.limit_bytes, b.available_bytes);
    char line[512];
    printf("  this machine: %s\n", snug_budget_describe(&b, line, sizeof line));
}

static snug_status resolve_op(void *ctx, snug_error *err)
{
    (void)ctx;
    snug_budget b;
    snug_budget_opts o = {.root = g_root, .rss_bytes = 1};
    return snug_budget_resolve(&o, &b, err);
}

static void test_oom(void)
{
    fresh_root(1000000);
    CHECK(test_oom_loop("budget", resolve_op, NULL, NULL, 10) == 2, "two allocations fail cleanly");
}

int main(void)
{
    RUN(test_parse_bytes);
    RUN(test_flag);
    RUN(test_meminfo);
    RUN(test_cgroup_v2);
    RUN(test_cgroup_v1);
    RUN(test_this_machine);
    RUN(test_oom);
    if (g_root[0]) test_rmtree(g_root);
    return test_summary();
}
