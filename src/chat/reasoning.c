/*
 * reasoning.c: a reply's think block and answer, whole or streamed
 * (reasoning.h). One set of rules: the whole split and the stream walk the
 * same phases, so that a stream's pieces join into the whole split's parts.
 */
#include "reasoning.h"

#include <string.h>

static const snug_reasoning_format THINK = {"think", "<think>", "</think>"};

enum { BEFORE = 0, IN_BLOCK, AFTER, PLAIN };

const snug_reasoning_format *snug_reasoning_format_of(const char *template_text)
{
    return template_text && strstr(template_text, THINK.close) ? &THINK : NULL;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The first byte at or after at, before len, that is not whitespace (len: none). */
static size_t skip_ws(const char *t, size_t at, size_t len)
{
    while (at < len && is_ws(t[at])) at++;
    return at;
}

/* to moved back over whitespace, not below from. */
static size_t trim_end(const char *t, size_t from, size_t to)
{
    while (to > from && is_ws(t[to - 1])) to--;
    return to;
}

/* Where tag first begins in t[from, len), or len when nowhere. */
static size_t find(const char *t, size_t from, size_t len, const char *tag)
{
    size_t n = strlen(tag);
    if (from >= len || len - from < n) return len;
    const char *p = memmem(t + from, len - from, tag, n);
    return p ? (size_t)(p - t) : len;
}

/* The length of the longest end of t[from, len) that begins tag (shorter
 * than the tag: the tag is not there whole). */
static size_t partial_tail(const char *t, size_t from, size_t len, const char *tag)
{
    size_t n = strlen(tag), k = len - from < n - 1 ? len - from : n - 1;
    for (; k > 0; k--)
        if (memcmp(t + len - k, tag, k) == 0) return k;
    return 0;
}

bool snug_reasoning_prompt_inside(const snug_reasoning_format *f, const char *prompt, size_t len)
{
    if (!f) return false;
    size_t end = trim_end(prompt, 0, len), n = strlen(f->open);
    return end >= n && memcmp(prompt + end - n, f->open, n) == 0;
}

void snug_reasoning_stream_init(snug_reasoning_stream *s, bool inside)
{
    memset(s, 0, sizeof *s);
    s->phase = inside ? IN_BLOCK : BEFORE;
}

bool snug_reasoning_stream_has_block(const snug_reasoning_stream *s)
{
    return s->phase == IN_BLOCK || s->phase == AFTER;
}

/* Before the block: decides whether the reply opens one (moving s into it),
 * is plain content, or cannot tell yet (false: hold everything). */
static bool decide_start(const snug_reasoning_format *f, snug_reasoning_stream *s, const char *text,
                         size_t len, bool end)
{
    size_t at = skip_ws(text, 0, len), n = len - at, olen = strlen(f->open);
    if (n >= olen && memcmp(text + at, f->open, olen) == 0) {
        s->phase = IN_BLOCK;
        s->block_at = s->scan_at = s->reasoning_sent = at + olen;
        return true;
    }
    if (!end && (n == 0 || (n < olen && memcmp(text + at, f->open, n) == 0))) return false;
    s->phase = PLAIN;
    s->content_at = 0;
    s->content_started = true;
    return true;
}

/* In the block: the reasoning that may go out, and the move past the
 * closing tag when it has come. */
static void in_block(const snug_reasoning_format *f, snug_reasoning_stream *s, const char *text, size_t len,
                     bool end, snug_reasoning_delta *d)
{
    size_t clen = strlen(f->close);
    size_t c = find(text, SNUG_MAX(s->scan_at, s->block_at), len, f->close);
    bool closed = c < len;
    /* what is surely reasoning: up to the tag, or all but what may begin it */
    size_t limit = closed ? c : end ? len : len - partial_tail(text, s->block_at, len, f->close);
    limit = SNUG_MAX(limit, s->reasoning_sent); /* (a tail that may begin the tag never reaches back
                                                 * into what was sent: that was held then too) */
    if (!s->reasoning_started) /* leading whitespace: never sent */
        s->reasoning_sent = skip_ws(text, s->reasoning_sent, limit);
    size_t to = trim_end(text, s->reasoning_sent, limit); /* whitespace that may end it: held */
    d->reasoning_from = s->reasoning_sent;
    d->reasoning_to = to;
    if (to > s->reasoning_sent) {
        s->reasoning_sent = to;
        s->reasoning_started = true;
    }
    if (closed) {
        s->phase = AFTER;
        s->content_at = c + clen;
    } else if (len >= clen) {
        s->scan_at = SNUG_MAX(s->scan_at, len - clen + 1); /* no match can begin before */
    }
}

void snug_reasoning_stream_next(const snug_reasoning_format *f, snug_reasoning_stream *s, const char *text,
                                size_t len, bool end, snug_reasoning_delta *d)
{
    memset(d, 0, sizeof *d);
    if (s->phase == BEFORE && !decide_start(f, s, text, len, end)) return;
    if (s->phase == IN_BLOCK) in_block(f, s, text, len, end, d);
    if (s->phase == IN_BLOCK) { /* no content yet */
        d->content_at = d->content_end = len;
        return;
    }
    if (s->phase == AFTER && !s->content_started) { /* whitespace after the tag: dropped */
        s->content_at = skip_ws(text, s->content_at, len);
        s->content_started = s->content_at < len;
    }
    d->content_at = s->content_at;
    d->content_end = s->content_started ? len : s->content_at;
}

void snug_reasoning_split(const snug_reasoning_format *f, bool inside, const char *text, size_t len,
                          snug_reasoning_parts *out)
{
    snug_reasoning_stream s;
    snug_reasoning_delta d;
    snug_reasoning_stream_init(&s, inside);
    snug_reasoning_stream_next(f, &s, text, len, true, &d); /* the whole text: one delta */
    *out = (snug_reasoning_parts){.has_reasoning = snug_reasoning_stream_has_block(&s)};
    if (out->has_reasoning) {
        out->reasoning_at = d.reasoning_from;
        out->reasoning_len = d.reasoning_to - d.reasoning_from;
    }
    out->content_at = d.content_at;
    out->content_len = d.content_end - d.content_at;
}
