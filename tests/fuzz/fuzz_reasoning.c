/*
 * fuzz_reasoning.c: fuzzes the split of a thinking model's reply into
 * reasoning and content (chat/reasoning.h): a reply is whatever the model
 * wrote, so any bytes.
 *
 * The input's first byte says whether the prompt ended inside the think
 * block (bit 0) and seeds where the reply is cut as it streams; the rest is
 * the reply. The whole split's ranges must lie within the reply, the
 * reasoning without whitespace at its ends, the content without it at its
 * start when there is a block; streamed in the seeded pieces, each reasoning
 * piece must follow the last, the content's start must not move once some
 * went out, and the pieces joined must be the whole split's parts.
 */
#include "chat/reasoning.h"
#include "fuzz_common.h"

static const char *const NAME = "fuzz/reply.txt";

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    if (in->size == 0) return snug_errorf(err, SNUG_INVALID, "%s: empty", in->name);
    *parsed = NULL; /* the split allocates nothing: check() does the work */
    return SNUG_OK;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void check(const fuzz_input *in, void *parsed)
{
    (void)parsed;
    const snug_reasoning_format *f = snug_reasoning_format_of("</think>");
    bool inside = in->data[0] & 1;
    const char *text = (const char *)in->data + 1;
    size_t len = in->size - 1;
    snug_reasoning_parts p;
    snug_reasoning_split(f, inside, text, len, &p);
    REQUIRE(p.content_at <= len && p.content_len <= len - p.content_at);
    REQUIRE(p.content_at + p.content_len == len);
    if (p.has_reasoning) {
        REQUIRE(p.reasoning_at <= len && p.reasoning_len <= len - p.reasoning_at);
        REQUIRE(p.reasoning_len == 0 || (!is_ws(text[p.reasoning_at]) && !is_ws(text[p.reasoning_at + p.reasoning_len - 1])));
        REQUIRE(p.content_len == 0 || !is_ws(text[p.content_at]));
    } else {
        REQUIRE(p.content_at == 0 && !inside);
    }
    /* streamed in pieces */
    snug_reasoning_stream s;
    snug_reasoning_stream_init(&s, inside);
    uint32_t x = in->data[0] * 2654435761u + 1;
    size_t r_joined = 0, r_last = 0, c_sent = 0, c_at = 0, at = 0;
    bool c_started = false;
    for (;;) {
        x = x * 1103515245u + 12345u;
        at += 1 + (x >> 16) % 5;
        if (at > len) at = len;
        snug_reasoning_delta d;
        snug_reasoning_stream_next(f, &s, text, at, at == len, &d);
        REQUIRE(d.reasoning_from <= d.reasoning_to && d.reasoning_to <= at);
        REQUIRE(d.content_at <= d.content_end && d.content_end <= at);
        if (d.reasoning_to > d.reasoning_from) {
            REQUIRE(p.has_reasoning && d.reasoning_from >= r_last && c_sent == 0);
            /* the pieces are the reasoning's bytes, in order */
            REQUIRE(r_joined + (d.reasoning_to - d.reasoning_from) <= p.reasoning_len);
            REQUIRE(memcmp(text + d.reasoning_from, text + p.reasoning_at + r_joined, d.reasoning_to - d.reasoning_from) == 0);
            r_joined += d.reasoning_to - d.reasoning_from;
            r_last = d.reasoning_to;
        }
        if (d.content_end > d.content_at) {
            if (c_started) REQUIRE(d.content_at == c_at);
            c_at = d.content_at;
            c_started = true;
            c_sent = d.content_end - d.content_at;
        }
        if (at == len) break;
    }
    REQUIRE(r_joined == (p.has_reasoning ? p.reasoning_len : 0));
    REQUIRE(snug_reasoning_stream_has_block(&s) == p.has_reasoning);
    REQUIRE(c_sent == p.content_len);
    REQUIRE(c_sent == 0 || c_at == p.content_at);
}

static const fuzz_target g_target = {NAME, false, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_target, data, size);
    return 0;
}
