/*
 * strbuf.h: a growing text buffer in the accounting allocator's memory
 * (category other), for documents assembled piece by piece: an SVG chart,
 * an HTTP response body. Once an allocation fails the buffer stays failed:
 * later appends do nothing, and the caller checks `failed` once at the end.
 */
#ifndef SNUG_STRBUF_H
#define SNUG_STRBUF_H

#include "common.h"

typedef struct snug_strbuf {
    char *p;               /* NUL-terminated once anything was appended */
    size_t len, cap;
    size_t max;            /* most bytes it may hold; 0: no limit */
    bool failed;           /* an allocation failed or max was passed */
    snug_error *err;       /* where the failure is told (may be NULL) */
} snug_strbuf;

/* Appends printf-style text. */
void snug_strbuf_printf(snug_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends n bytes. */
void snug_strbuf_put(snug_strbuf *b, const char *s, size_t n);

/* Appends n bytes as the inside of a JSON string: quotes, backslashes and
 * control characters escaped (invalid UTF-8 bytes become U+FFFD). */
void snug_strbuf_json(snug_strbuf *b, const char *s, size_t n);

/* Appends n bytes as a whole JSON string: quoted, the inside as
 * snug_strbuf_json escapes it. */
void snug_strbuf_json_string(snug_strbuf *b, const char *s, size_t n);

/* Appends s with &, <, > and " escaped for XML and HTML. */
void snug_strbuf_xml(snug_strbuf *b, const char *s);

/* Empties the buffer, keeping its memory for what comes next (and its
 * failure, if any). */
void snug_strbuf_clear(snug_strbuf *b);

/* Frees the text and zeroes the buffer (keeping max and err). */
void snug_strbuf_free(snug_strbuf *b);

#endif /* SNUG_STRBUF_H */
