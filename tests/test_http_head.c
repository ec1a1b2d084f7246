/*
 * test_http_head.c: the gate's strict reader of request heads and chunked
 * bodies (server/http_head.h): each rule of RFC 9112 it enforces gives its
 * status and code, whole or byte by byte alike; what a good head says
 * (method, path, version, framing, keep-alive); chunked bodies end where
 * they end, and break where they break.
 */
#include "test.h"

#include "server/http_head.h"

static const snug_http_limits LIMITS = {.head_bytes = 16384, .target_bytes = 8192, .fields = 100,
                                        .body_bytes = 1 << 20};

/* Reads text (n bytes) at once, and again a byte at a time: the verdicts
 * must agree; returns the first's. */
static snug_http_result read_both(const char *text, size_t n, snug_http_head *h)
{
    snug_http_head b;
    snug_http_head_reset(h);
    snug_http_result whole = snug_http_head_read(h, text, n, &LIMITS);
    snug_http_head_reset(&b);
    snug_http_result dribbled = SNUG_HTTP_MORE;
    for (size_t k = 1; k <= n && dribbled == SNUG_HTTP_MORE; k++)
        dribbled = snug_http_head_read(&b, text, k, &LIMITS);
    CHECK(whole == dribbled && (whole != SNUG_HTTP_BAD || b.refusal.status == h->refusal.status),
          "%.40s: whole %d (%d), byte by byte %d (%d)", text, whole, h->refusal.status, dribbled,
          b.refusal.status);
    return whole;
}

static void test_refusals(void)
{
    static const struct { const char *text; int status; const char *code; } cases[] = {
        {"GARBAGE\r\n\r\n", 400, "malformed_request"},
        {"\x16\x03\x01\x02\x00", 400, "malformed_request"}, /* a TLS hello */
        {"GET / HTTP/1.1\nHost: x\n\n", 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: x\r\nX: 1\r\n folded\r\n\r\n", 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: x\r\nX-\x01: 1\r\n\r\n", 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: x\r\nA: B\x7f\r\n\r\n", 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: x\r\n: empty\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1e3\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "malformed_request"},
        {"GET / HTTP/1.1\r\n\r\n", 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "malformed_request"},
        {"POST /v1/completions%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed_request"},
        {"GET /health?x=%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed_request"},
        {"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed_request"},
        {"GET / HTTP/1.x\r\nHost: x\r\n\r\n", 400, "malformed_request"},
        {"GET /\r\nHost: x\r\n\r\n", 400, "malformed_request"},
        {"GET nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed_request"},
        {"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed_request"},
        {"\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed_request"},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "not_implemented"},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", 501, "not_implemented"},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501, "not_implemented"},
        {"GETGETGETGETGETGETGET / HTTP/1.1\r\nHost: x\r\n\r\n", 501, "not_implemented"},
        {"GET / HTTP/9.9\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"},
        {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n", 413, "body_too_large"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551616\r\n\r\n", 413, "body_too_large"},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cases); i++) {
        snug_http_head h;
        snug_http_result r = read_both(cases[i].text, strlen(cases[i].text), &h);
        CHECK(r == SNUG_HTTP_BAD && h.refusal.status == cases[i].status &&
              strcmp(h.refusal.code, cases[i].code) == 0 && h.refusal.message[0],
              "case %zu (%.40s): result %d, %d %s (%s), expected %d %s", i, cases[i].text, r,
              h.refusal.status, h.refusal.code ? h.refusal.code : "-", h.refusal.message,
              cases[i].status, cases[i].code);
    }
    /* a NUL in a value, and the limits: a long target, a big head, many fields */
    static const char nul[] = "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\0junk\r\n\r\n";
    snug_http_head h;
    CHECK(read_both(nul, sizeof nul - 1, &h) == SNUG_HTTP_BAD && h.refusal.status == 400,
          "a NUL in a value: %d", h.refusal.status);
    static char big[40000];
    int n = snprintf(big, sizeof big, "GET /");
    memset(big + n, 'a', 9000);
    n += 9000;
    n += snprintf(big + n, sizeof big - (size_t)n, " HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(read_both(big, (size_t)n, &h) == SNUG_HTTP_BAD && h.refusal.status == 414,
          "a 9000-byte target: %d", h.refusal.status);
    n = snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(big + n, 'b', 17000);
    n += 17000;
    n += snprintf(big + n, sizeof big - (size_t)n, "\r\n\r\n");
    CHECK(read_both(big, (size_t)n, &h) == SNUG_HTTP_BAD && h.refusal.status == 431,
          "a 17 KB head: %d", h.refusal.status);
    n = snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: x\r\n");
    for (int f = 0; f < 100; f++) n += snprintf(big + n, sizeof big - (size_t)n, "X-%d: %d\r\n", f, f);
    n += snprintf(big + n, sizeof big - (size_t)n, "\r\n");
    CHECK(read_both(big, (size_t)n, &h) == SNUG_HTTP_BAD && h.refusal.status == 431,
          "101 fields: %d", h.refusal.status);
}

static void test_good_heads(void)
{
    static const char get[] = "\r\nGET /health?verbose=1 HTTP/1.1\r\nHost: x\r\nX-Tab:\tvalue\r\n\r\nextra";
    snug_http_head h;
    CHECK(read_both(get, sizeof get - 1, &h) == SNUG_HTTP_OK, "GET");
    CHECK(h.head_len == sizeof get - 1 - 5 && strcmp(h.method, "GET") == 0 &&
          strcmp(h.path, "/health") == 0 && h.minor == 1 && !h.has_length && !h.chunked &&
          snug_http_head_keeps_alive(&h),
          "GET: %zu bytes, %s %s 1.%d", h.head_len, h.method, h.path, h.minor);
    static const char post[] = "POST /v1/completions HTTP/1.1\r\nhost: x\r\nContent-Length: 17\r\n"
                               "Connection: close\r\nExpect: 100-continue\r\n\r\n";
    CHECK(read_both(post, sizeof post - 1, &h) == SNUG_HTTP_OK && h.has_length &&
          h.content_length == 17 && !snug_http_head_keeps_alive(&h) && h.expect_continue,
          "POST: length %llu, keeps alive %d", (unsigned long long)h.content_length,
          snug_http_head_keeps_alive(&h));
    static const char old[] = "GET /v1/models HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n";
    CHECK(read_both(old, sizeof old - 1, &h) == SNUG_HTTP_OK && h.minor == 0 &&
          snug_http_head_keeps_alive(&h), "HTTP/1.0 keep-alive");
    static const char chunked[] = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n";
    CHECK(read_both(chunked, sizeof chunked - 1, &h) == SNUG_HTTP_OK && h.chunked, "chunked");
    static const char part[] = "GET / HTTP/1.1\r\nHost: x\r\n";
    snug_http_head_reset(&h);
    CHECK(snug_http_head_read(&h, part, sizeof part - 1, &LIMITS) == SNUG_HTTP_MORE, "a part: more");
}

/* Reads body at once and a byte at a time; returns the first's verdict. */
static snug_http_result chunks_both(const char *body, size_t n, size_t *end, int *status)
{
    snug_http_chunks c = {0};
    snug_http_refusal r = {0};
    size_t used = 0;
    snug_http_result whole = snug_http_chunks_read(&c, body, n, &LIMITS, &used, &r);
    *end = used;
    *status = whole == SNUG_HTTP_BAD ? r.status : 0;
    snug_http_chunks d = {0};
    snug_http_result one = SNUG_HTTP_MORE;
    size_t at = 0;
    while (one == SNUG_HTTP_MORE && at < n) {
        size_t u = 0;
        one = snug_http_chunks_read(&d, body + at, 1, &LIMITS, &u, &r);
        at += u;
    }
    CHECK(one == whole && (whole != SNUG_HTTP_OK || at == used), "%.30s: byte by byte %d at %zu, "
          "whole %d at %zu", body, one, at, whole, used);
    return whole;
}

static void test_chunks(void)
{
    size_t end = 0;
    int status = 0;
    static const char good[] = "5;name=v\r\nhello\r\n3\r\nabc\r\n0\r\nTrailer: t\r\n\r\nGET";
    CHECK(chunks_both(good, sizeof good - 1, &end, &status) == SNUG_HTTP_OK && end == sizeof good - 4,
          "a body with an extension and a trailer ends at %zu", end);
    static const char *const bad[] = {"zz\r\n", "-1\r\n", "3\r\nabcX\r\n", "00000000000000002\r\nab\r\n0\r\n\r\n",
                                      "3\nabc\r\n", "0\r\nX\r\n", "0\r\n\rX"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(bad); i++)
        CHECK(chunks_both(bad[i], strlen(bad[i]), &end, &status) == SNUG_HTTP_BAD && status == 400,
              "bad body %zu (%s): status %d", i, bad[i], status);
    static const char ws[] = "3 \r\nabc\r\n0\r\n\r\n"; /* libmicrohttpd would refuse it in HTML */
    CHECK(chunks_both(ws, sizeof ws - 1, &end, &status) == SNUG_HTTP_BAD && status == 400,
          "whitespace after a chunk size: %d", status);
    char many[512];
    int m = snprintf(many, sizeof many, "0\r\n");
    for (int f = 0; f < 9; f++) m += snprintf(many + m, sizeof many - (size_t)m, "T%d: v\r\n", f);
    snprintf(many + m, sizeof many - (size_t)m, "\r\n");
    CHECK(chunks_both(many, strlen(many), &end, &status) == SNUG_HTTP_BAD && status == 431,
          "9 trailer fields: %d", status);
    static char long_trailer[2100];
    m = snprintf(long_trailer, sizeof long_trailer, "0\r\nT: ");
    memset(long_trailer + m, 'v', 1100);
    snprintf(long_trailer + m + 1100, sizeof long_trailer - (size_t)m - 1100, "\r\n\r\n");
    CHECK(chunks_both(long_trailer, strlen(long_trailer), &end, &status) == SNUG_HTTP_BAD && status == 431,
          "a 1100-byte trailer line: %d", status);
    static const char huge[] = "100001\r\n";
    CHECK(chunks_both(huge, sizeof huge - 1, &end, &status) == SNUG_HTTP_BAD && status == 413,
          "a chunk over the limit: %d", status);
    static const char part[] = "10\r\n0123456789";
    CHECK(chunks_both(part, sizeof part - 1, &end, &status) == SNUG_HTTP_MORE && end == sizeof part - 1,
          "a body cut short: more");
}

int main(void)
{
    RUN(test_refusals);
    RUN(test_good_heads);
    RUN(test_chunks);
    return test_summary();
}
