/*
 * common.h: what every module of snug uses: the public header, error
 * reporting, assertions and overflow-checked arithmetic.
 */
#ifndef SNUG_COMMON_H
#define SNUG_COMMON_H

#include "snug.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Aborts with file and line when a broken invariant is found. The library
 * never calls exit(); this is for states that cannot happen. */
#define SNUG_ASSERT(cond)                                                     \
    do {                                                                      \
        if (!(cond)) snug_assert_fail(#cond, __FILE__, __LINE__);             \
    } while (0)

/* Prints the failed condition with its place and aborts. Never returns. */
_Noreturn void snug_assert_fail(const char *cond, const char *file, int line);

/* Writes a printf-style message into err (when err is not NULL), sets
 * err->status and returns status, so that callers can write
 * `return snug_errorf(err, SNUG_FORMAT, "...", ...)`. */
snug_status snug_errorf(snug_error *err, snug_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As snug_errorf with fmt's arguments in ap, the message led by place
 * ("PLACE: message"; place NULL or "": the message alone): what every
 * module's "fail here" helper formats through, so that none writes its own
 * vsnprintf. */
snug_status snug_verrorf_at(snug_error *err, snug_status status, const char *place, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Puts a printf-style prefix in front of the message already in err (for
 * adding context such as the file being read; err may be NULL) and returns
 * status, the failure being passed on:
 * `return snug_error_prefix(err, st, "%s: ", path);`. */
snug_status snug_error_prefix(snug_error *err, snug_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds context after the file name that starts a message: "FILE: rest"
 * becomes "FILE: <context>rest" (a message that does not start with FILE
 * gets "FILE: <context>" in front), so that messages read file first, then
 * the key or tensor, then the rule. err may be NULL. Returns status. */
snug_status snug_error_context(snug_error *err, snug_status status, const char *file,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Formats a byte count for people ("1.50 GiB", "512 B") into buf, which must
 * hold at least 32 bytes. Returns buf. */
char *snug_fmt_bytes(size_t bytes, char *buf);

/* Parses a byte count as people write it: digits, an optional fraction
 * ("1.5"), then an optional unit: none or B (bytes); KB, MB, GB, TB (powers
 * of 1000); KiB, MiB, GiB, TiB and the bare K, M, G, T (powers of 1024).
 * Units are case-insensitive; no spaces, signs or exponents. A fraction is
 * taken exactly and rounded down to whole bytes. Returns false for anything
 * else, for zero, and for counts that do not fit in size_t. */
bool snug_parse_bytes(const char *s, size_t *out);

/* Formats an integer with thousands separators ("16,060,522,496") into buf,
 * which must hold at least 32 bytes. Returns buf. */
char *snug_fmt_int(int64_t value, char *buf);

/* Seconds on the monotonic clock (for measuring spans; no epoch). */
double snug_now_seconds(void);

/* Returns true when the n bytes at s are well-formed UTF-8 (no overlong
 * forms, no surrogates, nothing above U+10FFFF). */
bool snug_utf8_valid(const void *s, size_t n);

/* A buffer for snug_bytes_shown that holds a quoted name or value of 200
 * bytes and more ("..." after what fits). */
enum { SNUG_SHOWN_MAX = 208 };

/* Writes the n bytes at s (bytes from a file or a client: a GGUF key or
 * string, a tensor name) into out, cap >= 8 bytes, NUL-terminated, as text
 * that is safe to quote in a message and print on a terminal: printable
 * ASCII and well-formed UTF-8 as they are, a backslash as \, and every
 * other byte (control bytes such as ESC, DEL, the C1 controls
 * U+0080..U+009F, bytes that are not well-formed UTF-8) as \xhh. What does
 * not fit is cut at a character and "..." put after it. Returns out, for
 * use as a printf argument. Allocates nothing. */
char *snug_bytes_shown(const void *s, size_t n, char *out, size_t cap);

/* snug_bytes_shown of the NUL-terminated s (NULL: ""). */
char *snug_str_shown(const char *s, char *out, size_t cap);

/* Overflow-checked size arithmetic: returns false when the result does not
 * fit, leaving *out unspecified. */
static inline bool snug_mul_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool snug_add_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}
static inline bool snug_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool snug_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* Rounds n up to a multiple of align (a power of two); no overflow check. */
static inline size_t snug_round_up(size_t n, size_t align)
{
    return (n + align - 1) & ~(align - 1);
}

#define SNUG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SNUG_MAX(a, b) ((a) > (b) ? (a) : (b))
#define SNUG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif /* SNUG_COMMON_H */
