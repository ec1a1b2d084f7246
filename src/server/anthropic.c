/*
 * anthropic.c: answers in Anthropic's Messages shapes (server_impl.h): a
 * whole message of content blocks (thinking, text, tool_use), and a
 * stream's events in the order that API documents: message_start, then
 * per block content_block_start, its deltas and content_block_stop, then
 * message_delta and message_stop, with ping to keep a quiet stream open.
 * openai.c runs the request and hands these writers its reply's parts.
 */
#include "server_impl.h"

#include "base/json.h"
#include "base/mem.h"

#include <string.h>

enum { BLOCK_NONE = 0, BLOCK_THINKING, BLOCK_TEXT, BLOCK_TOOL_USE }; /* the block a stream has open */

const char *anthropic_stop_reason(snug_finish f, bool calls)
{
    if (calls) return "tool_use";
    switch (f) {
    case SNUG_FINISH_STOP_STRING: return "stop_sequence";
    case SNUG_FINISH_MAX_TOKENS:
    case SNUG_FINISH_MODEL_LENGTH: return "max_tokens";
    default: return "end_turn";
    }
}

/* "stop_reason":...,"stop_sequence":... */
static void put_stop(snug_strbuf *b, const anthropic_end *e)
{
    snug_strbuf_printf(b, "\"stop_reason\":\"%s\",\"stop_sequence\":", anthropic_stop_reason(e->finish, e->calls));
    if (e->finish == SNUG_FINISH_STOP_STRING && e->stop && !e->calls) snug_strbuf_json_string(b, e->stop, e->n_stop);
    else snug_strbuf_printf(b, "null");
}

static void put_usage(snug_strbuf *b, const anthropic_usage *u)
{
    snug_strbuf_printf(b, "\"usage\":{\"input_tokens\":%lld,\"output_tokens\":%lld,"
                       "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":%lld}",
                       (long long)(u->prompt - u->cached), (long long)u->output, (long long)u->cached);
}

/* A tool_use block of call k of calls, its input whole (not streaming) or
 * empty (a stream's block start). */
static void put_tool_use(snug_strbuf *b, const json_t *calls, size_t k, uint64_t key, bool input)
{
    const json_t *c = json_array_get(calls, k);
    const char *name = json_string_value(json_object_get(c, "name"));
    char id[40];
    tool_use_id(key, k, id);
    snug_strbuf_printf(b, "{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":", id);
    snug_strbuf_json_string(b, name, strlen(name));
    snug_strbuf_printf(b, ",\"input\":");
    char *args = input ? snug_json_dumps(json_object_get(c, "arguments"), false) : NULL;
    if (input && !args) b->failed = true;
    snug_strbuf_printf(b, "%s}", args ? args : "{}");
    snug_mem_free(args);
}

void anthropic_put_message(snug_strbuf *b, const anthropic_message *m)
{
    snug_strbuf_printf(b, "{\"id\":\"%s\",\"type\":\"message\",\"role\":\"assistant\",\"model\":", m->id);
    snug_strbuf_json_string(b, m->model, strlen(m->model));
    snug_strbuf_printf(b, ",\"content\":[");
    bool any = false;
    if (m->has_thinking) { /* (a signature only Anthropic's own models can check: none) */
        snug_strbuf_printf(b, "{\"type\":\"thinking\",\"thinking\":");
        snug_strbuf_json_string(b, m->thinking, m->n_thinking);
        snug_strbuf_printf(b, ",\"signature\":\"\"}");
        any = true;
    }
    if (m->n_text > 0 || (!m->end.calls && !m->has_thinking)) {
        snug_strbuf_printf(b, "%s{\"type\":\"text\",\"text\":", any ? "," : "");
        snug_strbuf_json_string(b, m->text, m->n_text);
        snug_strbuf_printf(b, "}");
        any = true;
    }
    for (size_t k = 0; k < json_array_size(m->calls); k++) {
        if (any || k) snug_strbuf_put(b, ",", 1);
        put_tool_use(b, m->calls, k, m->key, true);
    }
    snug_strbuf_printf(b, "],");
    put_stop(b, &m->end);
    snug_strbuf_put(b, ",", 1);
    put_usage(b, &m->usage);
    snug_strbuf_printf(b, "}");
}

/* One event: "event: TYPE\ndata: " then the caller's JSON and end_event. */
static void begin_event(snug_strbuf *b, const char *type) { snug_strbuf_printf(b, "event: %s\ndata: ", type); }

static void end_event(snug_strbuf *b) { snug_strbuf_printf(b, "\n\n"); }

void anthropic_stream_start(snug_strbuf *b, const char *id, const char *model, const anthropic_usage *u)
{
    begin_event(b, "message_start");
    snug_strbuf_printf(b, "{\"type\":\"message_start\",\"message\":{\"id\":\"%s\",\"type\":\"message\","
                       "\"role\":\"assistant\",\"model\":", id);
    snug_strbuf_json_string(b, model, strlen(model));
    snug_strbuf_printf(b, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,");
    put_usage(b, u);
    snug_strbuf_printf(b, "}}");
    end_event(b);
    anthropic_stream_ping(b);
}

/* Closes the open block, if any. */
static void close_block(snug_strbuf *b, anthropic_stream *s)
{
    if (s->open == BLOCK_NONE) return;
    begin_event(b, "content_block_stop");
    snug_strbuf_printf(b, "{\"type\":\"content_block_stop\",\"index\":%d}", s->n_blocks - 1);
    end_event(b);
    s->open = BLOCK_NONE;
}

void anthropic_stream_text(snug_strbuf *b, anthropic_stream *s, bool thinking, const char *text, size_t n)
{
    if (n == 0) return;
    int kind = thinking ? BLOCK_THINKING : BLOCK_TEXT;
    if (s->open != kind) {
        close_block(b, s);
        begin_event(b, "content_block_start");
        snug_strbuf_printf(b, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":%s}", s->n_blocks,
                           thinking ? "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}"
                                    : "{\"type\":\"text\",\"text\":\"\"}");
        end_event(b);
        s->open = kind;
        s->n_blocks++;
    }
    begin_event(b, "content_block_delta");
    snug_strbuf_printf(b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"%s\",\"%s\":",
                       s->n_blocks - 1, thinking ? "thinking_delta" : "text_delta", thinking ? "thinking" : "text");
    snug_strbuf_json_string(b, text, n);
    snug_strbuf_printf(b, "}}");
    end_event(b);
}

void anthropic_stream_calls(snug_strbuf *b, anthropic_stream *s, const json_t *calls, uint64_t key)
{
    for (size_t k = 0; k < json_array_size(calls); k++) {
        close_block(b, s);
        begin_event(b, "content_block_start");
        snug_strbuf_printf(b, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":", s->n_blocks);
        put_tool_use(b, calls, k, key, false);
        snug_strbuf_printf(b, "}");
        end_event(b);
        char *args = snug_json_dumps(json_object_get(json_array_get(calls, k), "arguments"), false);
        if (!args) b->failed = true;
        begin_event(b, "content_block_delta");
        snug_strbuf_printf(b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"input_json_delta\","
                           "\"partial_json\":", s->n_blocks);
        snug_strbuf_json_string(b, args ? args : "", args ? strlen(args) : 0);
        snug_strbuf_printf(b, "}}");
        end_event(b);
        snug_mem_free(args);
        s->open = BLOCK_TOOL_USE;
        s->n_blocks++;
        s->calls = true;
    }
}

void anthropic_stream_end(snug_strbuf *b, anthropic_stream *s, const anthropic_end *e, const anthropic_usage *u)
{
    if (s->n_blocks == 0) { /* nothing generated: one empty text block, as a message has */
        begin_event(b, "content_block_start");
        snug_strbuf_printf(b, "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
                           "{\"type\":\"text\",\"text\":\"\"}}");
        end_event(b);
        s->open = BLOCK_TEXT;
        s->n_blocks = 1;
    }
    close_block(b, s);
    begin_event(b, "message_delta");
    snug_strbuf_printf(b, "{\"type\":\"message_delta\",\"delta\":{");
    put_stop(b, e);
    snug_strbuf_printf(b, "},");
    put_usage(b, u);
    snug_strbuf_printf(b, "}");
    end_event(b);
    begin_event(b, "message_stop");
    snug_strbuf_printf(b, "{\"type\":\"message_stop\"}");
    end_event(b);
}

void anthropic_stream_ping(snug_strbuf *b)
{
    begin_event(b, "ping");
    snug_strbuf_printf(b, "{\"type\":\"ping\"}");
    end_event(b);
}

void anthropic_stream_error(snug_strbuf *b, const char *type, const char *message)
{
    begin_event(b, "error");
    snug_strbuf_printf(b, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":", type);
    snug_strbuf_json_string(b, message, strlen(message));
    snug_strbuf_printf(b, "}}");
    end_event(b);
}
