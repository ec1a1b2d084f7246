/*
 * procfile.h: reading a file whose size the kernel does not report (/proc,
 * /sys) into the caller's buffer, with no allocation. A leaf of base/: the
 * allocator (mem.c) reads the process's memory counters with it, and it
 * calls nothing of snug's but the error messages (common.h).
 */
#ifndef SNUG_PROCFILE_H
#define SNUG_PROCFILE_H

#include "common.h"

/* Reads a file whose size the kernel does not report (/proc, /sys) until
 * end of file into the caller's buf (max + 1 bytes), NUL-terminated; *len
 * excludes the NUL. Fails with SNUG_IO when it cannot be read and with
 * SNUG_FORMAT when it holds more than max bytes (buf then holds the first
 * max). err may be NULL. Never allocates. */
snug_status snug_file_read_text(const char *path, char *buf, size_t max, size_t *len,
                                snug_error *err);

/* Opens /proc/self/statm for snug_proc_statm_rss: a descriptor (the caller
 * closes it), or -1 when it cannot be opened. */
int snug_proc_statm_open(void);

/* The resident set, in bytes, from fd (snug_proc_statm_open): its second
 * field, in pages of page_bytes. One pread, nothing allocated, safe on any
 * thread; 0 when it cannot be read (fd -1 included). */
size_t snug_proc_statm_rss(int fd, size_t page_bytes);

#endif /* SNUG_PROCFILE_H */
