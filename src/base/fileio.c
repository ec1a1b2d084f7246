/*
 * fileio.c: pread/pwrite loops and small whole-file helpers.
 */
#include "fileio.h"

#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { IO_CHUNK = 1 << 30 }; /* largest single read or write request */

snug_status snug_file_open_read(const char *path, int *fd, uint64_t *size, snug_error *err)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is then
     * refused as not a regular file, and the flag is cleared for reads. */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f < 0) return snug_errorf(err, SNUG_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        int e = errno;
        close(f);
        return snug_errorf(err, SNUG_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return snug_errorf(err, SNUG_IO, "%s: not a regular file", path);
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(f);
        return snug_errorf(err, SNUG_IO, "%s: cannot set blocking reads: %s", path, strerror(e));
    }
    *fd = f;
    *size = (uint64_t)sb.st_size;
    return SNUG_OK;
}

snug_status snug_file_adopt(int fd, const char *name, char **path, uint64_t *size,
                            snug_error *err)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return snug_errorf(err, SNUG_IO, "%s: cannot stat: %s", name, strerror(errno));
    *path = snug_mem_strdup(SNUG_MEM_OTHER, name, err);
    if (!*path) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", name);
    *size = (uint64_t)sb.st_size;
    return SNUG_OK;
}

snug_status snug_file_create(const char *path, int *fd, snug_error *err)
{
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f < 0) return snug_errorf(err, SNUG_IO, "%s: cannot create: %s", path, strerror(errno));
    *fd = f;
    return SNUG_OK;
}

snug_status snug_file_close(int fd, const char *path, snug_error *err)
{
    snug_status st = SNUG_OK;
    if (fdatasync(fd) != 0)
        st = snug_errorf(err, SNUG_IO, "%s: cannot sync: %s", path, strerror(errno));
    if (close(fd) != 0 && st == SNUG_OK)
        st = snug_errorf(err, SNUG_IO, "%s: cannot close: %s", path, strerror(errno));
    return st;
}

snug_status snug_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path,
                            snug_error *err)
{
    unsigned char *p = buf;
    size_t done = 0;
    while (done < n) {
        size_t want = SNUG_MIN(n - done, (size_t)IO_CHUNK);
        ssize_t r = pread(fd, p + done, want, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            return snug_errorf(err, SNUG_IO, "%s: read of %zu bytes at offset %llu failed: %s",
                               path, n, (unsigned long long)off, strerror(errno));
        }
        if (r == 0)
            return snug_errorf(err, SNUG_IO,
                               "%s: file ended at byte %llu while reading %zu bytes at offset "
                               "%llu (did it shrink while open?)",
                               path, (unsigned long long)(off + done), n,
                               (unsigned long long)off);
        done += (size_t)r;
    }
    return SNUG_OK;
}

snug_status snug_pread_strided(int fd, void *buf, size_t seg_bytes, size_t n_rows,
                               uint64_t off, uint64_t src_stride, size_t dst_stride,
                               const char *path, snug_error *err)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < n_rows; i++) {
        snug_status st = snug_pread_full(fd, p + i * dst_stride, seg_bytes,
                                         off + (uint64_t)i * src_stride, path, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

snug_status snug_pwrite_full(int fd, const void *buf, size_t n, uint64_t off, const char *path,
                             snug_error *err)
{
    const unsigned char *p = buf;
    size_t done = 0;
    while (done < n) {
        size_t want = SNUG_MIN(n - done, (size_t)IO_CHUNK);
        ssize_t w = pwrite(fd, p + done, want, (off_t)(off + done));
        if (w < 0) {
            if (errno == EINTR) continue;
            return snug_errorf(err, SNUG_IO, "%s: write of %zu bytes at offset %llu failed: %s",
                               path, n, (unsigned long long)off, strerror(errno));
        }
        if (w == 0)
            return snug_errorf(err, SNUG_IO, "%s: write at offset %llu made no progress", path,
                               (unsigned long long)(off + done));
        done += (size_t)w;
    }
    return SNUG_OK;
}

snug_status snug_file_read_all(const char *path, size_t max_bytes, char **buf, size_t *len,
                               snug_error *err)
{
    int fd = -1;
    uint64_t size = 0;
    char *data = NULL;
    snug_status st = snug_file_open_read(path, &fd, &size, err);
    if (st != SNUG_OK) return st;
    if (size > max_bytes) {
        char a[32], b[32];
        st = snug_errorf(err, SNUG_FORMAT, "%s: file is %s; at most %s is accepted", path,
                         snug_fmt_bytes((size_t)size, a), snug_fmt_bytes(max_bytes, b));
        goto done;
    }
    data = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)size + 1, err);
    if (!data) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", path);
        goto done;
    }
    st = snug_pread_full(fd, data, (size_t)size, 0, path, err);
    if (st != SNUG_OK) goto done;
    data[size] = '\0';
    *buf = data;
    *len = (size_t)size;
    data = NULL;
done:
    snug_mem_free(data);
    close(fd);
    return st;
}

bool snug_file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

snug_status snug_path_join(char *out, size_t size, const char *dir, const char *name,
                           snug_error *err)
{
    size_t dl = strlen(dir);
    bool slash = dl > 0 && dir[dl - 1] == '/';
    int n = snprintf(out, size, "%s%s%s", dir, slash || dl == 0 ? "" : "/", name);
    if (n < 0 || (size_t)n >= size)
        return snug_errorf(err, SNUG_INVALID, "path too long: %s/%s", dir, name);
    return SNUG_OK;
}
