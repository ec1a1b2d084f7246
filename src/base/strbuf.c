/*
 * strbuf.c: the growing text buffer (strbuf.h).
 */
#include "strbuf.h"

#include "mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Makes room for n more bytes and the NUL; false once failed. */
static bool reserve(snug_strbuf *b, size_t n)
{
    if (b->failed) return false;
    size_t need;
    if (!snug_add_size(b->len, n + 1, &need) || (b->max && need > b->max + 1)) {
        b->failed = true;
        if (b->err) snug_errorf(b->err, SNUG_NOMEM, "text of more than %zu bytes", b->max);
        return false;
    }
    if (need <= b->cap) return true;
    size_t cap = SNUG_MAX(need, b->cap * 2);
    cap = SNUG_MAX(cap, (size_t)256);
    if (b->max) cap = SNUG_MIN(cap, b->max + 1);
    char *q = snug_mem_alloc(SNUG_MEM_OTHER, cap, b->err);
    if (!q) {
        b->failed = true;
        return false;
    }
    if (b->p) memcpy(q, b->p, b->len + 1);
    snug_mem_free(b->p);
    b->p = q;
    b->cap = cap;
    return true;
}

void snug_strbuf_put(snug_strbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void snug_strbuf_printf(snug_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* The length of the valid UTF-8 character at s (n bytes left), 0 if none. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
               : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    return snug_utf8_valid(s, len) ? len : 0;
}

void snug_strbuf_json_string(snug_strbuf *b, const char *s, size_t n)
{
    snug_strbuf_put(b, "\"", 1);
    snug_strbuf_json(b, s, n);
    snug_strbuf_put(b, "\"", 1);
}

void snug_strbuf_json(snug_strbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n && !b->failed) {
        size_t run = i; /* bytes that need no escape go in one piece */
        while (run < n && u[run] >= 0x20 && u[run] < 0x80 && u[run] != '"' && u[run] != '\\') run++;
        if (run > i) {
            snug_strbuf_put(b, s + i, run - i);
            i = run;
            continue;
        }
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            snug_strbuf_put(b, e, 2);
            i++;
        } else if (c < 0x20) {
            static const char *const named[] = {['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n",
                                                ['\r'] = "\\r", ['\t'] = "\\t"};
            if (c < SNUG_ARRAY_LEN(named) && named[c])
                snug_strbuf_put(b, named[c], 2);
            else
                snug_strbuf_printf(b, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_char(u + i, n - i);
            if (len) {
                snug_strbuf_put(b, s + i, len);
                i += len;
            } else {
                snug_strbuf_put(b, "\xEF\xBF\xBD", 3);
                i++;
            }
        }
    }
}

void snug_strbuf_xml(snug_strbuf *b, const char *s)
{
    for (; *s && !b->failed; s++) {
        switch (*s) {
        case '&': snug_strbuf_put(b, "&amp;", 5); break;
        case '<': snug_strbuf_put(b, "&lt;", 4); break;
        case '>': snug_strbuf_put(b, "&gt;", 4); break;
        case '"': snug_strbuf_put(b, "&quot;", 6); break;
        default: snug_strbuf_put(b, s, 1);
        }
    }
}

void snug_strbuf_clear(snug_strbuf *b)
{
    b->len = 0;
    if (b->p) b->p[0] = 0;
}

void snug_strbuf_free(snug_strbuf *b)
{
    snug_mem_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}
