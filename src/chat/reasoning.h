/*
 * reasoning.h: a reasoning model's reply split into its think block (the
 * reasoning) and the answer after it (the content), whole or as it streams.
 *
 * Models that think (Qwen3, QwQ, the DeepSeek-R1 distills) write
 * <think> reasoning </think> answer; an R1 distill's generation prompt
 * already ends in <think>, so its reply starts inside the block. The rules,
 * the same whole and streamed (any cut of the text into pieces gives the same
 * parts):
 *   - outside the block, a reply whose first text (after whitespace) is the
 *     opening tag has a block; any other reply is all content, as it is;
 *   - the reasoning is the text between the tags, whitespace at both ends
 *     left out; without a closing tag (a reply cut short) all the rest is
 *     reasoning and the content is empty;
 *   - the content is the text after the closing tag, whitespace at its start
 *     left out (Qwen3's template writes "\n</think>\n\n" and strips the same
 *     when the turn comes back).
 * Streaming holds back what may still be part of a tag (the end of the text
 * that begins "</think>", or a start that begins "<think>") and whitespace
 * that may turn out to end the reasoning. Pure functions; nothing allocates.
 */
#ifndef SNUG_REASONING_H
#define SNUG_REASONING_H

#include "base/common.h"

typedef struct snug_reasoning_format {
    const char *name;               /* "think" */
    const char *open, *close;       /* "<think>", "</think>" */
} snug_reasoning_format;

/* The reasoning format a chat template shows: a template that names the
 * closing tag </think> (Qwen3's, QwQ's and the R1 distills' split or strip
 * a turn's reasoning) gives the think format; any other (or NULL) gives NULL:
 * the model's replies are all content. The format is a constant. Pure. */
const snug_reasoning_format *snug_reasoning_format_of(const char *template_text);

/* Whether a rendered prompt of len bytes ends inside the think block: its
 * last text, whitespace apart, is the opening tag (an R1 distill's "<think>\n").
 * Qwen3 with enable_thinking false ends with an empty closed block: not
 * inside. Pure. */
bool snug_reasoning_prompt_inside(const snug_reasoning_format *f, const char *prompt, size_t len);

/* A reply's two parts, as byte ranges of its text. */
typedef struct snug_reasoning_parts {
    bool has_reasoning;             /* the reply has a think block (maybe empty) */
    size_t reasoning_at, reasoning_len;
    size_t content_at, content_len;
} snug_reasoning_parts;

/* Splits the len bytes of a whole reply (inside: the prompt ended inside the
 * block, snug_reasoning_prompt_inside) by the rules above. Pure. */
void snug_reasoning_split(const snug_reasoning_format *f, bool inside, const char *text, size_t len,
                          snug_reasoning_parts *out);

/* A streamed reply's place in the rules. */
typedef struct snug_reasoning_stream {
    uint8_t phase;                  /* before the block, in it, after it, or no block */
    bool reasoning_started;         /* in the block: reasoning other than whitespace came */
    bool content_started;           /* after the block: content other than whitespace came */
    size_t block_at;                /* where the block's text begins */
    size_t scan_at;                 /* the closing tag is not found before here */
    size_t reasoning_sent;          /* reasoning given out up to here */
    size_t content_at;              /* where the content begins (once known) */
} snug_reasoning_stream;

/* What of a streamed reply may go out now: the reasoning's next bytes
 * [reasoning_from, reasoning_to) (each byte once), and the content so far,
 * [content_at, content_end) (the caller keeps what of it it sent: tool calls
 * hold content back too). */
typedef struct snug_reasoning_delta {
    size_t reasoning_from, reasoning_to;
    size_t content_at, content_end;
} snug_reasoning_delta;

/* Starts a stream's state (inside as for snug_reasoning_split). */
void snug_reasoning_stream_init(snug_reasoning_stream *s, bool inside);

/* Given the len bytes of the reply so far (each call's text extends the
 * last's; end: the reply is whole, nothing is held), fills d and moves s on.
 * At the end the reasoning given out, joined, and the content are
 * snug_reasoning_split's. s->phase says whether a block was found
 * (snug_reasoning_stream_has_block). Pure. */
void snug_reasoning_stream_next(const snug_reasoning_format *f, snug_reasoning_stream *s, const char *text,
                                size_t len, bool end, snug_reasoning_delta *d);

/* Whether the stream has found a think block (it is in it or past it). */
bool snug_reasoning_stream_has_block(const snug_reasoning_stream *s);

#endif /* SNUG_REASONING_H */
