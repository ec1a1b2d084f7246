/*
 * procfile.h: reading a file whose size the kernel does not report (/proc,
 * /sys) into the caller's buffer, with no allocation. A leaf of base/: the
 * allocator (device.c) reads the process's memory counters with it, and it
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

#endif /* SNUG_PROCFILE_H */
