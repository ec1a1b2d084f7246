/*
 * fileio.h: whole reads and writes on file descriptors, with short reads,
 * short writes and EINTR handled and every failure reported with the path.
 */
#ifndef SNUG_FILEIO_H
#define SNUG_FILEIO_H

#include "common.h"

/* Opens path for reading and returns its descriptor and size. Fails with
 * SNUG_IO when it cannot be opened or is not a regular file. */
snug_status snug_file_open_read(const char *path, int *fd, uint64_t *size, snug_error *err);

/* What a file reader keeps of a descriptor it is handed: a copy of name
 * (for messages; category other, the caller frees it with snug_mem_free)
 * into *path and the file's size (fstat) into *size. Fails with SNUG_NOMEM
 * or SNUG_IO, the message naming name, leaving nothing allocated. */
snug_status snug_file_adopt(int fd, const char *name, char **path, uint64_t *size,
                            snug_error *err);

/* Creates (or truncates) path for writing, mode 0644. */
snug_status snug_file_create(const char *path, int *fd, snug_error *err);

/* Syncs the file's data to its disk and closes fd (always closed). */
snug_status snug_file_close(int fd, const char *path, snug_error *err);

/* Reads exactly n bytes at offset off into buf. A file that ends before
 * off + n (one that shrank since its size was checked) fails with SNUG_IO
 * and a message saying so; so does a read error. `path` is for messages. */
snug_status snug_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path,
                            snug_error *err);

/* Reads n_rows segments of seg_bytes each: segment i from file offset
 * off + i * src_stride into buf + i * dst_stride. Same failures as
 * snug_pread_full. */
snug_status snug_pread_strided(int fd, void *buf, size_t seg_bytes, size_t n_rows,
                               uint64_t off, uint64_t src_stride, size_t dst_stride,
                               const char *path, snug_error *err);

/* Writes exactly n bytes at offset off. */
snug_status snug_pwrite_full(int fd, const void *buf, size_t n, uint64_t off, const char *path,
                             snug_error *err);

/* Reads a whole file (at most max_bytes; larger is an error naming the
 * limit) into a new block of category other, NUL-terminated. The caller owns
 * *buf and frees it with snug_mem_free; *len excludes the NUL. */
snug_status snug_file_read_all(const char *path, size_t max_bytes, char **buf, size_t *len,
                               snug_error *err);

/* Returns true when path names an existing regular file. */
bool snug_file_exists(const char *path);

/* Joins dir and name with a '/' into out (size bytes). Fails with
 * SNUG_INVALID when the result does not fit. */
snug_status snug_path_join(char *out, size_t size, const char *dir, const char *name,
                           snug_error *err);

#endif /* SNUG_FILEIO_H */
