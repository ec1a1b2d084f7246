/*
 * fuzz_http_head.c: fuzzes the gate's strict reader of request heads and
 * chunked bodies (server/http_head.h). Each input is a request as a client
 * would send it. The head is read three ways: all at once, a byte at a
 * time, and in pieces whose sizes come from the input; all three must give
 * the same verdict (result, head length, refusal status and code). A
 * refusal must be one of the statuses and codes the header lists, with a
 * printable message. A whole head must end in an empty line, have a token
 * method, a target that begins as the rules allow, HTTP/1.0 or 1.1, and a
 * body framing that is one of none, Content-Length within the limit, or
 * chunked alone. A chunked body after it is read all at once and a byte at
 * a time: the same verdict, at the same place.
 */
#include "server/http_head.h"
#include "fuzz_common.h"

#include <string.h>

static const snug_http_limits LIMITS = {.head_bytes = 2048, .target_bytes = 512, .fields = 16,
                                        .body_bytes = 4096};

typedef struct verdict {
    snug_http_result res;
    size_t head_len;
    int status;
    const char *code;
} verdict;

/* Reads the head of data[0 .. size) handing it over in pieces of step
 * bytes (0: sizes taken from the data itself), into *h. */
static verdict read_head(const uint8_t *data, size_t size, size_t step, snug_http_head *h)
{
    snug_http_head_reset(h);
    snug_http_result res = SNUG_HTTP_MORE;
    size_t have = 0, k = 0;
    while (res == SNUG_HTTP_MORE && have < size) {
        size_t piece = step ? step : (size_t)(1 + data[k++ % size] % 7);
        have = SNUG_MIN(size, have + piece);
        res = snug_http_head_read(h, (const char *)data, have, &LIMITS);
    }
    verdict v = {res, res == SNUG_HTTP_OK ? h->head_len : 0, 0, NULL};
    if (res == SNUG_HTTP_BAD) {
        v.status = h->refusal.status;
        v.code = h->refusal.code;
    }
    return v;
}

static void require_refusal(const snug_http_refusal *r)
{
    static const struct { int status; const char *code; } known[] = {
        {400, "malformed_request"}, {413, "body_too_large"}, {414, "uri_too_long"},
        {431, "headers_too_large"}, {501, "not_implemented"}, {505, "http_version_not_supported"}};
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok |= r->status == known[i].status && strcmp(r->code, known[i].code) == 0;
    REQUIRE(ok);
    size_t n = strlen(r->message);
    REQUIRE(n > 0 && n < sizeof r->message);
    for (size_t i = 0; i < n; i++) REQUIRE(r->message[i] >= 0x20 && r->message[i] < 0x7f);
}

static void require_head(const snug_http_head *h, const uint8_t *data, size_t size)
{
    REQUIRE(h->head_len >= 4 && h->head_len <= size && h->head_len <= LIMITS.head_bytes);
    REQUIRE(memcmp(data + h->head_len - 4, "\r\n\r\n", 4) == 0 || h->head_len == 4);
    REQUIRE(h->method[0] != 0 && strlen(h->method) < sizeof h->method);
    REQUIRE(h->path[0] == '/' || h->path[0] == '*' || h->path[0] == 'h' || h->path[0] == 'H');
    REQUIRE(h->minor == 0 || h->minor == 1);
    REQUIRE(!(h->chunked && h->has_length));
    REQUIRE(!h->has_length || h->content_length <= LIMITS.body_bytes);
    REQUIRE(h->minor == 0 || h->n_host == 1);
    REQUIRE(h->target_len <= LIMITS.target_bytes);
}

/* Reads a chunked body in pieces of step bytes. */
static verdict read_chunks(const uint8_t *p, size_t n, size_t step, size_t *end)
{
    snug_http_chunks c = {0};
    snug_http_refusal r = {0};
    snug_http_result res = SNUG_HTTP_MORE;
    size_t at = 0;
    while (res == SNUG_HTTP_MORE && at < n) {
        size_t piece = SNUG_MIN(step, n - at), used = 0;
        res = snug_http_chunks_read(&c, (const char *)p + at, piece, &LIMITS, &used, &r);
        REQUIRE(used <= piece);
        REQUIRE(res != SNUG_HTTP_MORE || used == piece);
        at += used;
    }
    REQUIRE(c.total <= LIMITS.body_bytes);
    if (res == SNUG_HTTP_BAD) require_refusal(&r);
    *end = at;
    return (verdict){res, 0, res == SNUG_HTTP_BAD ? r.status : 0, res == SNUG_HTTP_BAD ? r.code : NULL};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    snug_http_head a, b, c;
    verdict va = read_head(data, size, size ? size : 1, &a);
    verdict vb = read_head(data, size, 1, &b);
    verdict vc = read_head(data, size, 0, &c);
    REQUIRE(va.res == vb.res && va.res == vc.res);
    REQUIRE(va.head_len == vb.head_len && va.head_len == vc.head_len);
    REQUIRE(va.status == vb.status && va.status == vc.status);
    if (va.res == SNUG_HTTP_BAD) {
        REQUIRE(strcmp(va.code, vb.code) == 0 && strcmp(va.code, vc.code) == 0);
        require_refusal(&a.refusal);
    }
    if (va.res != SNUG_HTTP_OK) return 0;
    require_head(&a, data, size);
    REQUIRE(snug_http_head_read(&a, (const char *)data, size, &LIMITS) == SNUG_HTTP_OK); /* again: the same */
    if (!a.chunked) return 0;
    const uint8_t *body = data + a.head_len;
    size_t n = size - a.head_len, end1 = 0, end2 = 0;
    verdict c1 = read_chunks(body, n, n ? n : 1, &end1);
    verdict c2 = read_chunks(body, n, 1, &end2);
    REQUIRE(c1.res == c2.res && c1.status == c2.status);
    REQUIRE(c1.res != SNUG_HTTP_OK || end1 == end2);
    return 0;
}
