/*
 * common.c: status names, error messages, assertions, formatting helpers and
 * UTF-8 validation shared by every module.
 */
#include "common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool snug_utf8_valid(const void *s, size_t n)
{
    const unsigned char *p = s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
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
            return false;
        }
        if (n - i < len) return false;
        if (p[i + 1] < lo || p[i + 1] > hi) return false;
        for (size_t k = 2; k < len; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
        i += len;
    }
    return true;
}
