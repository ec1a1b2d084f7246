/*
 * regex.h: PCRE2 (8-bit, UTF with Unicode properties, JIT-compiled where
 * the library supports it) with its memory charged to the accounting
 * allocator (category other; the JIT's executable code is mapped by PCRE2
 * itself and is not).
 *
 * A compiled pattern is read-only and shared by threads; each thread
 * matches with its own matcher. Subjects may be invalid UTF-8: invalid
 * bytes never match (PCRE2_MATCH_INVALID_UTF). Matching is bounded (match
 * and depth limits), so that a hostile pattern cannot hang a thread.
 */
#ifndef SNUG_REGEX_H
#define SNUG_REGEX_H

#include "base/common.h"

typedef struct snug_regex snug_regex;
typedef struct snug_regex_matcher snug_regex_matcher;

/* Compiles pattern (UTF-8, NUL-terminated). A pattern PCRE2 rejects fails
 * with SNUG_FORMAT and PCRE2's message and offset. Free with
 * snug_regex_free after every matcher made from it. */
snug_status snug_regex_compile(const char *pattern, snug_regex **out, snug_error *err);

/* Makes one thread's match state for re. Free with snug_regex_matcher_free. */
snug_status snug_regex_matcher_create(const snug_regex *re, snug_regex_matcher **out,
                                      snug_error *err);

/* Finds the first match of re in subject[0..len) starting at or after byte
 * `start`. Returns 1 and sets [*begin, *end) when found, 0 when not, and a
 * negative PCRE2 code when matching failed (a limit was reached). */
int snug_regex_find(const snug_regex *re, snug_regex_matcher *m, const char *subject, size_t len,
                    size_t start, size_t *begin, size_t *end);

/* Frees a matcher / a compiled pattern; NULL is ignored. */
void snug_regex_matcher_free(snug_regex_matcher *m);
void snug_regex_free(snug_regex *re);

#endif /* SNUG_REGEX_H */
