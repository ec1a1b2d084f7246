/*
 * http_head.h: a strict reader of HTTP/1.1 request heads and chunked
 * bodies (RFC 9112), for the server's gate (gate.h) to check every request
 * before libmicrohttpd sees it.
 *
 * The head is read line by line as its bytes arrive (each byte looked at
 * once), so that a head that is wrong says so as soon as its first wrong
 * line is in, and one that dribbles in costs no more than one that comes
 * at once. What it refuses, and with what:
 *   400 malformed_request  a request line other than METHOD SP TARGET SP
 *                          HTTP/D.D CRLF; a line not ended by CRLF; a field
 *                          line without a colon, with whitespace before it,
 *                          folded (starting with SP or HTAB), with an empty
 *                          or non-token name, or with a control character
 *                          (HTAB aside) or NUL in its value; a target with
 *                          a byte outside VCHAR or a %00; Content-Length
 *                          other than 1*DIGIT, or given twice; Content-
 *                          Length with Transfer-Encoding; Transfer-Encoding
 *                          in HTTP/1.0; HTTP/1.1 without exactly one Host;
 *                          a chunk size not followed at once by ';' or CRLF;
 *                          a target of "*" other than OPTIONS;
 *   414 uri_too_long       a target over the limit;
 *   431 headers_too_large  a head over its byte limit, or too many fields;
 *   413 body_too_large     a Content-Length over the body limit;
 *   501 not_implemented    a Transfer-Encoding other than "chunked";
 *   505 http_version_not_supported  HTTP/D.D other than 1.0 and 1.1.
 * Nothing here allocates; every index is checked against the length given.
 */
#ifndef SNUG_HTTP_HEAD_H
#define SNUG_HTTP_HEAD_H

#include "base/common.h"

typedef struct snug_http_limits {
    size_t head_bytes;             /* the whole head, its blank line included */
    size_t target_bytes;           /* the request target */
    int32_t fields;                /* header fields */
    uint64_t body_bytes;           /* a body (Content-Length, or chunks in all) */
} snug_http_limits;

typedef enum snug_http_result {
    SNUG_HTTP_MORE,                /* no verdict yet: more bytes are needed */
    SNUG_HTTP_OK,                  /* a whole head (or body), within the rules */
    SNUG_HTTP_BAD                  /* refused: status, code and message say why */
} snug_http_result;

/* What a refusal answers. */
typedef struct snug_http_refusal {
    int status;                    /* 400, 413, 414, 431, 501, 505 */
    const char *code;              /* malformed_request, ... (a constant) */
    char message[160];
} snug_http_refusal;

/* A request head being read, and when whole, what it says. Zero-fill it
 * (or snug_http_head_reset) before the first byte of each request. */
typedef struct snug_http_head {
    /* reading */
    size_t pos;                    /* bytes read so far (complete lines) */
    size_t line_start;             /* where the line being read begins */
    size_t partial_at;             /* an unfinished field line's bytes looked at so far */
    size_t rl_at;                  /* the request line: bytes scanned so far, ... */
    int rl_part;                   /* ... in which part (0 method, 1 target, 2 version), ... */
    size_t rl_target, rl_version;  /* ... and where the target and the version begin */
    bool have_request_line;
    /* the request line */
    char method[16];               /* longer methods are refused (none is) */
    char path[64];                 /* the target up to '?', cut to fit */
    size_t target_len;
    int minor;                     /* HTTP/1.minor */
    /* the fields that frame the body and the connection */
    int32_t n_fields, n_host, n_length, n_te;
    bool has_length, chunked;
    uint64_t content_length;
    bool conn_close, conn_keep_alive;
    bool expect_continue;          /* Expect: 100-continue (the client waits to send its body) */
    /* a whole head */
    size_t head_len;               /* its bytes, the blank line included */
    snug_http_refusal refusal;     /* with SNUG_HTTP_BAD */
} snug_http_head;

/* Starts h over for a new request. */
void snug_http_head_reset(snug_http_head *h);

/* Reads on in buf[0 .. len), the request's bytes so far (the same prefix
 * as the last call, perhaps longer): SNUG_HTTP_MORE until the blank line
 * that ends the head, SNUG_HTTP_OK with h->head_len then, or SNUG_HTTP_BAD
 * with h->refusal at the first byte that breaks a rule (or when the head
 * outgrows the limits). Up to 4 empty lines before the request line are
 * passed over (RFC 9112 2.2). */
snug_http_result snug_http_head_read(snug_http_head *h, const char *buf, size_t len,
                                     const snug_http_limits *lim);

/* True when the connection stays open after this request's answer (HTTP/1.1
 * without Connection: close, HTTP/1.0 with Connection: keep-alive). */
bool snug_http_head_keeps_alive(const snug_http_head *h);

/* A chunked body being read (zero-fill it before its first byte). */
typedef struct snug_http_chunks {
    int state;
    int digits;                    /* of the size being read */
    uint64_t left;                 /* of the chunk being read */
    uint64_t total;                /* the chunks' bytes so far */
    size_t line;                   /* bytes of the extension or trailer line being read */
    bool colon;                    /* the trailer line has had its colon */
    int trailers;                  /* trailer fields so far */
} snug_http_chunks;

/* Reads the next n bytes of a chunked body: SNUG_HTTP_MORE when all were
 * taken and the body goes on; SNUG_HTTP_OK when it ended within them (*used
 * says where: the bytes after belong to the next request); SNUG_HTTP_BAD
 * with *r filled (400 for broken framing, 413 when the chunks pass
 * lim->body_bytes). *used is always what was taken. */
snug_http_result snug_http_chunks_read(snug_http_chunks *c, const char *p, size_t n,
                                       const snug_http_limits *lim, size_t *used,
                                       snug_http_refusal *r);

#endif /* SNUG_HTTP_HEAD_H */
