/*
 * http_head.c: the strict request-head and chunked-body reader (http_head.h).
 */
#include "http_head.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* trailers: few and short, well within what libmicrohttpd keeps for a
 * request besides its head, so that it never answers them itself */
enum { LEADING_EMPTY_LINES = 4, CHUNK_SIZE_DIGITS = 16, TRAILER_LINE_BYTES = 1024, TRAILER_FIELDS = 8 };

/* RFC 9110 5.6.2: token characters. */
static bool is_tchar(unsigned char c)
{
    if (c >= '0' && c <= '9') return true;
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_vchar(unsigned char c) { return c > 0x20 && c < 0x7f; }

static snug_http_result refuse(snug_http_refusal *r, int status, const char *code,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static snug_http_result refuse(snug_http_refusal *r, int status, const char *code,
                               const char *fmt, ...)
{
    r->status = status;
    r->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
    return SNUG_HTTP_BAD;
}

static snug_http_result malformed(snug_http_head *h, const char *what)
{
    return refuse(&h->refusal, 400, "malformed_request", "malformed request head: %s", what);
}

void snug_http_head_reset(snug_http_head *h) { *h = (snug_http_head){0}; }

bool snug_http_head_keeps_alive(const snug_http_head *h)
{
    return h->minor >= 1 ? !h->conn_close : h->conn_keep_alive && !h->conn_close;
}

/* Scans the request line p[0 .. n) (without its CRLF) in order, method,
 * target, version, and refuses at the first byte that breaks a rule;
 * complete says whether n is the whole line or only what has arrived (then
 * SNUG_HTTP_MORE when nothing is wrong yet). It goes on from where the last
 * call stopped (h->rl_*), so each byte is looked at once, and a line
 * refused as it dribbles in is refused for the same reason when it comes
 * at once. Fills h's request line when the whole line passes (and returns
 * SNUG_HTTP_MORE: the fields follow). */
static snug_http_result scan_request_line(snug_http_head *h, const char *p, size_t n, bool complete,
                                          const snug_http_limits *lim)
{
    static const char shape[] = "HTTP/0.0"; /* '0': any digit */
    size_t i = h->rl_at;
    for (; h->rl_part == 0 && i < n; i++) { /* the method */
        if (p[i] == ' ') {
            if (i == 0) return malformed(h, "the request line does not begin with a method");
            h->rl_part = 1;
            h->rl_target = i + 1;
        } else if (i + 1 >= sizeof h->method) {
            return refuse(&h->refusal, 501, "not_implemented", "no such method (over %zu "
                          "characters)", sizeof h->method - 1);
        } else if (!is_tchar((unsigned char)p[i])) {
            return malformed(h, "the method is not a token");
        }
    }
    for (; h->rl_part == 1 && i < n; i++) { /* the target */
        unsigned char c = (unsigned char)p[i];
        const char *t = p + h->rl_target;
        size_t tn = i - h->rl_target;
        if (c == ' ') {
            bool options = h->rl_target == 8 && memcmp(p, "OPTIONS", 7) == 0;
            if (tn == 0 || !(t[0] == '/' || (tn == 1 && t[0] == '*' && options) ||
                             (tn >= 7 && strncasecmp(t, "http://", 7) == 0) ||
                             (tn >= 8 && strncasecmp(t, "https://", 8) == 0)))
                return malformed(h, "the request target is neither a path nor an absolute URI");
            h->rl_part = 2;
            h->rl_version = i + 1;
            continue;
        }
        if (tn >= lim->target_bytes)
            return refuse(&h->refusal, 414, "uri_too_long", "the request target is over the limit "
                          "of %zu bytes", lim->target_bytes);
        if (!is_vchar(c)) return malformed(h, "the request target has a byte outside VCHAR");
        if (c == '%' && i + 2 >= n && !complete) break; /* %00 or not: wait and see */
        if (c == '%' && i + 2 < n && p[i + 1] == '0' && p[i + 2] == '0')
            return malformed(h, "the request target has %00 in it");
    }
    for (; h->rl_part == 2 && i < n; i++) { /* the version */
        size_t k = i - h->rl_version;
        bool digit = k < 8 && shape[k] == '0';
        if (k >= 8 || (digit ? p[i] < '0' || p[i] > '9' : p[i] != shape[k]))
            return malformed(h, "the version is not HTTP/D.D");
    }
    h->rl_at = i;
    if (!complete) return SNUG_HTTP_MORE;
    if (h->rl_part < 2) return malformed(h, "the request line is not METHOD SP TARGET SP VERSION");
    const char *v = p + h->rl_version, *t = p + h->rl_target;
    size_t tn = h->rl_version - 1 - h->rl_target;
    if (n - h->rl_version != 8) return malformed(h, "the version is not HTTP/D.D");
    if (v[5] != '1' || v[7] > '1')
        return refuse(&h->refusal, 505, "http_version_not_supported", "HTTP/%c.%c: this server "
                      "speaks HTTP/1.1 and HTTP/1.0", v[5], v[7]);
    memcpy(h->method, p, h->rl_target - 1);
    h->method[h->rl_target - 1] = 0;
    size_t pn = 0;
    while (pn < tn && pn < sizeof h->path - 1 && t[pn] != '?') pn++;
    memcpy(h->path, t, pn);
    h->path[pn] = 0;
    h->target_len = tn;
    h->minor = v[7] - '0';
    h->have_request_line = true;
    return SNUG_HTTP_MORE;
}

/* True when the comma-separated list v[0 .. n) holds token (any case). */
static bool list_has(const char *v, size_t n, const char *token)
{
    size_t tn = strlen(token);
    for (size_t i = 0; i < n;) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        size_t s = i;
        while (i < n && v[i] != ',') i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
        if (e - s == tn && strncasecmp(v + s, token, tn) == 0) return true;
    }
    return false;
}

static bool name_is(const char *p, size_t n, const char *name)
{
    return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

/* One header field line p[0 .. n) (without its CRLF). */
static snug_http_result field_line(snug_http_head *h, const char *p, size_t n,
                                   const snug_http_limits *lim)
{
    if (p[0] == ' ' || p[0] == '\t') return malformed(h, "a folded header line (obs-fold)");
    if (++h->n_fields > lim->fields)
        return refuse(&h->refusal, 431, "headers_too_large", "over %d header fields", lim->fields);
    const char *colon = memchr(p, ':', n);
    if (!colon) return malformed(h, "a header line without a colon");
    size_t nn = (size_t)(colon - p);
    if (nn == 0) return malformed(h, "a header line with an empty name");
    for (size_t i = 0; i < nn; i++)
        if (!is_tchar((unsigned char)p[i]))
            return malformed(h, p[i] == ' ' || p[i] == '\t'
                                    ? "whitespace between a header's name and its colon"
                                    : "a header name that is not a token");
    const char *v = colon + 1, *end = p + n;
    for (const char *q = v; q < end; q++) {
        unsigned char c = (unsigned char)*q;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return malformed(h, "a control character or NUL in a header value");
    }
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
    size_t vn = (size_t)(end - v);
    if (name_is(p, nn, "Content-Length")) {
        if (++h->n_length > 1) return malformed(h, "Content-Length given more than once");
        if (vn == 0) return malformed(h, "Content-Length is not a number of bytes");
        uint64_t x = 0;
        for (size_t i = 0; i < vn; i++) {
            if (v[i] < '0' || v[i] > '9') return malformed(h, "Content-Length is not 1*DIGIT");
            if (x > (UINT64_MAX - 9) / 10)
                return refuse(&h->refusal, 413, "body_too_large", "Content-Length is over the "
                              "limit of %llu bytes", (unsigned long long)lim->body_bytes);
            x = x * 10 + (uint64_t)(v[i] - '0');
        }
        h->has_length = true;
        h->content_length = x;
    } else if (name_is(p, nn, "Transfer-Encoding")) {
        h->n_te++;
        h->chunked = h->n_te == 1 && vn == 7 && strncasecmp(v, "chunked", 7) == 0;
    } else if (name_is(p, nn, "Host")) {
        h->n_host++;
    } else if (name_is(p, nn, "Expect")) {
        h->expect_continue |= vn == 12 && strncasecmp(v, "100-continue", 12) == 0;
    } else if (name_is(p, nn, "Connection")) {
        h->conn_close |= list_has(v, vn, "close");
        h->conn_keep_alive |= list_has(v, vn, "keep-alive");
    }
    return SNUG_HTTP_MORE;
}

/* The head is whole: the rules between fields. */
static snug_http_result whole_head(snug_http_head *h, const snug_http_limits *lim)
{
    if (h->n_te > 0 && h->minor == 0) return malformed(h, "Transfer-Encoding in HTTP/1.0");
    if (h->n_te > 0 && h->n_length > 0)
        return malformed(h, "both Transfer-Encoding and Content-Length");
    if (h->n_te > 0 && !h->chunked)
        return refuse(&h->refusal, 501, "not_implemented", "Transfer-Encoding: only chunked, "
                      "alone, is implemented");
    if (h->minor >= 1 && h->n_host != 1)
        return malformed(h, h->n_host ? "more than one Host header" : "no Host header (HTTP/1.1 "
                         "needs one)");
    if (h->has_length && h->content_length > lim->body_bytes)
        return refuse(&h->refusal, 413, "body_too_large", "the request body is over the limit of "
                      "%llu bytes", (unsigned long long)lim->body_bytes);
    return SNUG_HTTP_OK;
}

/* The bytes of an unfinished line, p[0 .. n): the request line is
 * scanned as far as it goes (a CR at the very end may be its CRLF's);
 * in a field line a CR already followed by something is refused. */
static snug_http_result partial_line(snug_http_head *h, const char *p, size_t n,
                                     const snug_http_limits *lim)
{
    if (!h->have_request_line) return scan_request_line(h, p, n && p[n - 1] == '\r' ? n - 1 : n, false, lim);
    size_t from = h->partial_at > 0 ? h->partial_at - 1 : 0; /* a CR last time may meet its LF now */
    const char *cr = n > from ? memchr(p + from, '\r', n - from) : NULL;
    h->partial_at = n;
    return cr && cr + 1 < p + n ? malformed(h, "a CR not followed by LF") : SNUG_HTTP_MORE;
}

snug_http_result snug_http_head_read(snug_http_head *h, const char *buf, size_t len,
                                     const snug_http_limits *lim)
{
    if (h->head_len) return whole_head(h, lim); /* read before: the same verdict */
    size_t end = SNUG_MIN(len, lim->head_bytes); /* past the limit, nothing is read */
    snug_http_result res = SNUG_HTTP_MORE;
    while (res == SNUG_HTTP_MORE && h->pos < end) {
        const char *lf = memchr(buf + h->pos, '\n', end - h->pos);
        if (!lf) {
            h->pos = end;
            break;
        }
        size_t at = (size_t)(lf - buf);
        h->pos = at + 1;
        h->partial_at = 0;
        const char *line = buf + h->line_start;
        size_t n = at - h->line_start;
        h->line_start = h->pos;
        bool crlf = n > 0 && line[n - 1] == '\r';
        if (!h->have_request_line) {
            /* scanned as it would have been while it arrived, then whole */
            res = scan_request_line(h, line, crlf ? n - 1 : n, false, lim);
            if (res != SNUG_HTTP_MORE) return res;
            if (!crlf) return malformed(h, "a line not ended by CRLF");
            if (n == 1) { /* an empty line before the request line */
                if (h->pos > 2 * LEADING_EMPTY_LINES) return malformed(h, "empty lines, no request");
                continue;
            }
            res = scan_request_line(h, line, n - 1, true, lim);
            continue;
        }
        if (!crlf) return malformed(h, "a line not ended by CRLF");
        n--;
        if (memchr(line, '\r', n)) return malformed(h, "a CR not followed by LF");
        if (n == 0) {
            h->head_len = h->pos;
            return whole_head(h, lim);
        }
        res = field_line(h, line, n, lim);
    }
    if (res != SNUG_HTTP_MORE) return res;
    if (end > h->line_start) {
        res = partial_line(h, buf + h->line_start, end - h->line_start, lim);
        if (res != SNUG_HTTP_MORE) return res;
    }
    if (len >= lim->head_bytes)
        return refuse(&h->refusal, 431, "headers_too_large", "the request head is over the limit "
                      "of %zu bytes", lim->head_bytes);
    return SNUG_HTTP_MORE;
}

/* ---- chunked bodies ---------------------------------------------------------- */

enum {
    CH_SIZE,       /* hex digits of a chunk's size */
    CH_EXT,        /* a chunk extension, to CR */
    CH_SIZE_LF,    /* the LF after the size line's CR */
    CH_DATA,       /* the chunk's bytes */
    CH_DATA_CR,    /* the CR after them */
    CH_DATA_LF,    /* and its LF */
    CH_TRAILER,    /* the start of a trailer line, or the final CR */
    CH_TRAILER_LINE, /* a trailer field line, to its CR */
    CH_TRAILER_LF, /* the LF after a trailer line */
    CH_END_LF,     /* the LF after the final CR */
};

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static snug_http_result chunk_bad(snug_http_refusal *r, const char *what)
{
    return refuse(r, 400, "malformed_request", "malformed chunked body: %s", what);
}

snug_http_result snug_http_chunks_read(snug_http_chunks *c, const char *p, size_t n,
                                       const snug_http_limits *lim, size_t *used,
                                       snug_http_refusal *r)
{
    size_t i = 0;
    snug_http_result res = SNUG_HTTP_MORE;
    while (i < n && res == SNUG_HTTP_MORE) {
        unsigned char b = (unsigned char)p[i];
        if (c->state == CH_DATA) { /* the bulk: skip over the chunk's bytes at once */
            size_t take = (size_t)SNUG_MIN((uint64_t)(n - i), c->left);
            i += take;
            c->left -= take;
            if (c->left == 0) c->state = CH_DATA_CR;
            continue;
        }
        i++;
        switch (c->state) {
        case CH_SIZE: {
            int x = hex_value(b);
            if (x >= 0) {
                if (++c->digits > CHUNK_SIZE_DIGITS) res = chunk_bad(r, "a chunk size over 16 digits");
                else c->left = c->left << 4 | (uint64_t)x;
            } else if (c->digits == 0) {
                res = chunk_bad(r, "a chunk size that is not hexadecimal");
            } else if (b == ';') {
                c->state = CH_EXT;
            } else if (b == '\r') {
                c->state = CH_SIZE_LF;
            } else {
                res = chunk_bad(r, "a chunk size that is not hexadecimal");
            }
            break;
        }
        case CH_EXT:
            if (b == '\r') c->state = CH_SIZE_LF;
            else if ((b < 0x20 && b != '\t') || b == 0x7f)
                res = chunk_bad(r, "a control character in a chunk extension");
            else if (++c->line > TRAILER_LINE_BYTES) res = chunk_bad(r, "a chunk extension too long");
            break;
        case CH_SIZE_LF:
            if (b != '\n') {
                res = chunk_bad(r, "a chunk size line not ended by CRLF");
                break;
            }
            if (c->left > lim->body_bytes || c->total + c->left > lim->body_bytes) {
                res = refuse(r, 413, "body_too_large", "the request body is over the limit of "
                             "%llu bytes", (unsigned long long)lim->body_bytes);
                break;
            }
            c->total += c->left;
            c->line = 0;
            c->state = c->left ? CH_DATA : CH_TRAILER;
            c->digits = 0;
            break;
        case CH_DATA_CR:
            if (b == '\r') c->state = CH_DATA_LF;
            else res = chunk_bad(r, "a chunk's data not followed by CRLF");
            break;
        case CH_DATA_LF:
            if (b == '\n') c->state = CH_SIZE;
            else res = chunk_bad(r, "a chunk's data not followed by CRLF");
            break;
        case CH_TRAILER:
            if (b == '\r') c->state = CH_END_LF;
            else if (!is_tchar(b)) res = chunk_bad(r, "a trailer line that is not a field");
            else if (++c->trailers > TRAILER_FIELDS)
                res = refuse(r, 431, "headers_too_large", "over %d trailer fields", TRAILER_FIELDS);
            else c->state = CH_TRAILER_LINE, c->line = 1, c->colon = false;
            break;
        case CH_TRAILER_LINE:
            if (b == '\r' && !c->colon) res = chunk_bad(r, "a trailer line without a colon");
            else if (b == '\r') c->state = CH_TRAILER_LF;
            else if ((b < 0x20 && b != '\t') || b == 0x7f) res = chunk_bad(r, "a control character in a trailer");
            else if (++c->line > TRAILER_LINE_BYTES)
                res = refuse(r, 431, "headers_too_large", "a trailer line over %d bytes", TRAILER_LINE_BYTES);
            else if (b == ':') c->colon = true;
            else if (!c->colon && !is_tchar(b)) res = chunk_bad(r, "a trailer name that is not a token");
            break;
        case CH_TRAILER_LF:
            if (b == '\n') c->state = CH_TRAILER;
            else res = chunk_bad(r, "a trailer line not ended by CRLF");
            break;
        case CH_END_LF:
            if (b == '\n') res = SNUG_HTTP_OK;
            else res = chunk_bad(r, "the body's last line not ended by CRLF");
            break;
        default:
            res = chunk_bad(r, "an unknown state");
        }
    }
    *used = i;
    return res;
}
