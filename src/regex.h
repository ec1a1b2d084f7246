/*
 * regex.h: PCRE2 (8-bit, UTF and Unicode properties, JIT-compiled where the
 * library supports it) with its memory charged to the accounting allocator.
 * Compiled patterns and their match data are charged to category other;
 * the JIT's executable code is mapped by PCRE2 itself and is not.
 */
#ifndef SNUG_REGEX_H
#define SNUG_REGEX_H

#include "common.h"

typedef struct snug_regex snug_regex;

/* Compiles pattern (UTF-8) with PCRE2_UTF | PCRE2_UCP. A pattern PCRE2
 * rejects fails with SNUG_FORMAT and PCRE2's message and offset. The
 * result is used by one thread at a time; free it with snug_regex_free. */
snug_status snug_regex_compile(const char *pattern, snug_regex **out, snug_error *err);

/* Finds the first match in subject[0..len) starting at or after byte
 * `start`. Returns 1 and sets [*begin, *end) when found, 0 when not, and a
 * negative number when matching failed (a resource limit). */
int snug_regex_find(snug_regex *re, const char *subject, size_t len, size_t start,
                    size_t *begin, size_t *end);

/* Frees a compiled pattern; NULL is ignored. */
void snug_regex_free(snug_regex *re);

#endif /* SNUG_REGEX_H */
