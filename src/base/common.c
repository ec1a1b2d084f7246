/*
 * common.c: status names, error messages, assertions, formatting helpers and
 * UTF-8 validation shared by every module.
 */
#include "common.h"

#include <inttypes.h>
#include <ctype.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *snug_status_str(snug_status status)
{
    switch (status) {
    case SNUG_OK: return "SNUG_OK";
    case SNUG_NOMEM: return "SNUG_NOMEM";
    case SNUG_IO: return "SNUG_IO";
    case SNUG_FORMAT: return "SNUG_FORMAT";
    case SNUG_INVALID: return "SNUG_INVALID";
    case SNUG_UNSUPPORTED: return "SNUG_UNSUPPORTED";
    case SNUG_INTERNAL: return "SNUG_INTERNAL";
    case SNUG_BUSY: return "SNUG_BUSY";
    }
    return "SNUG_UNKNOWN_STATUS";
}

_Noreturn void snug_assert_fail(const char *cond, const char *file, int line)
{
    fprintf(stderr, "snug: assertion failed at %s:%d: %s\n", file, line, cond);
    fflush(stderr);
    abort();
}

snug_status snug_errorf(snug_error *err, snug_status status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

snug_status snug_verrorf_at(snug_error *err, snug_status status, const char *place, const char *fmt, va_list ap)
{
    if (!err) return status;
    char msg[SNUG_ERROR_MSG_BYTES];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return place && *place ? snug_errorf(err, status, "%s: %s", place, msg) : snug_errorf(err, status, "%s", msg);
}

snug_status snug_error_prefix(snug_error *err, snug_status status, const char *fmt, ...)
{
    if (!err) return status;
    char prefix[SNUG_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n > 0) {
        size_t plen = SNUG_MIN((size_t)n, sizeof prefix - 1);
        size_t mlen = strnlen(err->msg, sizeof err->msg - 1);
        size_t keep = SNUG_MIN(mlen, sizeof err->msg - 1 - SNUG_MIN(plen, sizeof err->msg - 1));
        memmove(err->msg + plen, err->msg, keep);
        memcpy(err->msg, prefix, SNUG_MIN(plen, sizeof err->msg - 1));
        err->msg[SNUG_MIN(plen + keep, sizeof err->msg - 1)] = '\0';
    }
    err->status = status;
    return status;
}

snug_status snug_error_context(snug_error *err, snug_status status, const char *file,
                               const char *fmt, ...)
{
    if (!err) return status;
    char ctx[SNUG_ERROR_MSG_BYTES / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    size_t fl = strlen(file);
    const char *rest = err->msg;
    if (strncmp(err->msg, file, fl) == 0 && strncmp(err->msg + fl, ": ", 2) == 0)
        rest = err->msg + fl + 2;
    char msg[SNUG_ERROR_MSG_BYTES];
    size_t o = 0;
    const char *parts[] = {file, ": ", ctx, rest};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(parts); i++) {
        size_t n = SNUG_MIN(strlen(parts[i]), sizeof msg - 1 - o);
        memcpy(msg + o, parts[i], n);
        o += n;
    }
    msg[o] = '\0';
    memcpy(err->msg, msg, o + 1);
    err->status = status;
    return status;
}

char *snug_fmt_bytes(size_t bytes, char *buf)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < SNUG_ARRAY_LEN(units)) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, 32, "%zu B", bytes);
    else
        snprintf(buf, 32, "%.2f %s", v, units[u]);
    return buf;
}

/* The multiplier of a byte-count unit (see snug_parse_bytes); 0 if unknown. */
static uint64_t byte_unit(const char *u)
{
    static const struct { const char *name; uint64_t mult; } units[] = {
        {"", 1}, {"b", 1},
        {"k", 1ull << 10}, {"kib", 1ull << 10}, {"kb", 1000ull},
        {"m", 1ull << 20}, {"mib", 1ull << 20}, {"mb", 1000000ull},
        {"g", 1ull << 30}, {"gib", 1ull << 30}, {"gb", 1000000000ull},
        {"t", 1ull << 40}, {"tib", 1ull << 40}, {"tb", 1000000000000ull},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(units); i++)
        if (strcasecmp(u, units[i].name) == 0) return units[i].mult;
    return 0;
}

bool snug_parse_bytes(const char *s, size_t *out)
{
    if (!s || !isdigit((unsigned char)*s)) return false;
    uint64_t whole = 0, frac = 0, scale = 1;
    const char *p = s;
    for (; isdigit((unsigned char)*p); p++)
        if (!snug_mul_u64(whole, 10, &whole) || !snug_add_u64(whole, (uint64_t)(*p - '0'), &whole))
            return false;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p)) return false;
        for (; isdigit((unsigned char)*p); p++) {
            if (scale >= 1000000000000000000ull) continue; /* digits past 1e-18 cannot matter */
            frac = frac * 10 + (uint64_t)(*p - '0');
            scale *= 10;
        }
    }
    uint64_t mult = byte_unit(p), bytes;
    if (mult == 0 || !snug_mul_u64(whole, mult, &bytes)) return false;
    /* frac / scale of a unit, exactly: frac < scale <= 1e18 and mult <= 2^40,
     * so the product is done in 128 bits */
    unsigned __int128 part = (unsigned __int128)frac * mult / scale;
    if (!snug_add_u64(bytes, (uint64_t)part, &bytes) || bytes == 0 || bytes > SIZE_MAX)
        return false;
    *out = (size_t)bytes;
    return true;
}

char *snug_fmt_int(int64_t value, char *buf)
{
    char digits[32];
    uint64_t mag = value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value;
    int n = snprintf(digits, sizeof digits, "%" PRIu64, mag);
    size_t o = 0;
    if (value < 0) buf[o++] = '-';
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

/* The length of the well-formed UTF-8 character at p (n >= 1 bytes there),
 * or 0 when it is not one (no overlong forms, no surrogates, nothing above
 * U+10FFFF). */
static size_t utf8_char(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;      /* no overlong forms */
        if (c == 0xED) hi = 0x9F;      /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;      /* no overlong forms */
        if (c == 0xF4) hi = 0x8F;      /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if (p[k] < 0x80 || p[k] > 0xBF) return 0;
    return len;
}

bool snug_utf8_valid(const void *s, size_t n)
{
    const unsigned char *p = s;
    for (size_t i = 0, len; i < n; i += len)
        if ((len = utf8_char(p + i, n - i)) == 0) return false;
    return true;
}

/* The piece of text that shows the character at p (n >= 1 bytes there),
 * into piece (8 bytes); returns its length and sets *len to the bytes of p
 * it shows. */
static size_t shown_piece(const unsigned char *p, size_t n, char *piece, size_t *len)
{
    *len = utf8_char(p, n);
    bool c1 = *len == 2 && p[0] == 0xC2 && p[1] < 0xA0; /* U+0080..U+009F: controls */
    if (p[0] == '\\') {
        memcpy(piece, "\\\\", 2);
        return 2;
    }
    if ((p[0] >= 0x20 && p[0] < 0x7F) || (*len > 1 && !c1)) {
        memcpy(piece, p, *len);
        return *len;
    }
    *len = 1;
    snprintf(piece, 8, "\\x%02x", p[0]);
    return 4;
}

char *snug_bytes_shown(const void *s, size_t n, char *out, size_t cap)
{
    SNUG_ASSERT(cap >= 8);
    const unsigned char *p = s;
    char piece[8];
    size_t total = 0, len;
    for (size_t i = 0; i < n && total < cap; i += len) total += shown_piece(p + i, n - i, piece, &len);
    size_t room = total < cap ? cap - 1 : cap - 4; /* cut: "..." takes 3 */
    size_t o = 0;
    for (size_t i = 0; i < n; i += len) {
        size_t k = shown_piece(p + i, n - i, piece, &len);
        if (o + k > room) break;
        memcpy(out + o, piece, k);
        o += k;
    }
    if (total >= cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

char *snug_str_shown(const char *s, char *out, size_t cap)
{
    return snug_bytes_shown(s ? s : "", s ? strlen(s) : 0, out, cap);
}

double snug_now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
