/*
 * procfile.c: /proc and /sys files read whole into a bounded buffer of the
 * caller's (procfile.h). Kept apart from fileio.c, which allocates through
 * mem.c, so that the allocator can read the process's counters without
 * the two files calling each other.
 */
#include "procfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

snug_status snug_file_read_text(const char *path, char *buf, size_t max, size_t *len,
                                snug_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return snug_errorf(err, SNUG_IO, "%s: cannot open: %s", path, strerror(errno));
    snug_status st = SNUG_OK;
    size_t used = 0;
    for (;;) {
        ssize_t r = read(fd, buf + used, max + 1 - used);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            st = snug_errorf(err, SNUG_IO, "%s: cannot read: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        used += (size_t)r;
        if (used > max) {
            st = snug_errorf(err, SNUG_FORMAT, "%s: longer than %zu bytes", path, max);
            break;
        }
    }
    close(fd);
    *len = SNUG_MIN(used, max);
    buf[*len] = '\0';
    return st;
}

int snug_proc_statm_open(void) { return open("/proc/self/statm", O_RDONLY | O_CLOEXEC); }

size_t snug_proc_statm_rss(int fd, size_t page_bytes)
{
    char text[128];
    ssize_t n = fd >= 0 ? pread(fd, text, sizeof text - 1, 0) : -1;
    if (n <= 0) return 0;
    text[n] = 0;
    unsigned long long size = 0, resident = 0;
    if (sscanf(text, "%llu %llu", &size, &resident) != 2) return 0;
    return (size_t)resident * page_bytes;
}
