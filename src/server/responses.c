/*
 * responses.c: answers in OpenAI's Responses shapes (server_impl.h): the
 * response object (its output items: reasoning, a message of output_text,
 * a function_call per call; the request's fields repeated; usage), and a
 * stream's events in that API's order, each numbered: response.created and
 * response.in_progress, then per item output_item.added, its content part
 * and deltas (output_text, reasoning_text, function_call_arguments) and
 * their done events, output_item.done, then response.completed or
 * response.incomplete with the whole response. openai.c runs the request
 * and hands these writers its reply's parts.
 */
#include "server_impl.h"

#include "base/json.h"
#include "base/mem.h"

#include <string.h>

enum { ITEM_NONE = 0, ITEM_REASONING, ITEM_MESSAGE }; /* the item a stream has open */

/* v as JSON, or fallback (a JSON text) when v is NULL. */
static void put_value(snug_strbuf *b, const json_t *v, const char *fallback)
{
    char *text = v ? snug_json_dumps(v, false) : NULL;
    if (v && !text) b->failed = true;
    snug_strbuf_printf(b, "%s", text ? text : fallback);
    snug_mem_free(text);
}

/* The id of output item index of a reply keyed key: prefix and 16 hex digits. */
static void item_id(const char *prefix, uint64_t key, int index, char id[40])
{
    uint64_t z = (key + (uint64_t)index * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    snprintf(id, 40, "%s%016llx", prefix, (unsigned long long)(z ^ z >> 29));
}

static bool incomplete(const responses_reply *r)
{
    return r->finish == SNUG_FINISH_MAX_TOKENS || r->finish == SNUG_FINISH_MODEL_LENGTH;
}

/* The items a reply's output has: a reasoning item when it reasoned, a
 * message when it has content (or nothing else), a function_call per call. */
static bool has_reasoning(const responses_reply *r) { return r->n_reasoning > 0; }

static bool has_message(const responses_reply *r)
{
    return r->n_text > 0 || (json_array_size(r->calls) == 0 && !has_reasoning(r));
}

static void put_reasoning_item(snug_strbuf *b, const char *id, const char *text, size_t n, bool done)
{
    snug_strbuf_printf(b, "{\"type\":\"reasoning\",\"id\":\"%s\",\"summary\":[],\"content\":[", id);
    if (done) {
        snug_strbuf_printf(b, "{\"type\":\"reasoning_text\",\"text\":");
        snug_strbuf_json_string(b, text, n);
        snug_strbuf_printf(b, "}");
    }
    snug_strbuf_printf(b, "],\"status\":\"%s\"}", done ? "completed" : "in_progress");
}

static void put_text_part(snug_strbuf *b, const char *text, size_t n)
{
    snug_strbuf_printf(b, "{\"type\":\"output_text\",\"text\":");
    snug_strbuf_json_string(b, text, n);
    snug_strbuf_printf(b, ",\"annotations\":[],\"logprobs\":[]}");
}

/* A message item: done (its text whole) or as it begins; cut: the reply
 * ran out of tokens in it (status incomplete). */
static void put_message_item(snug_strbuf *b, const char *id, const char *text, size_t n, bool done, bool cut)
{
    snug_strbuf_printf(b, "{\"type\":\"message\",\"id\":\"%s\",\"status\":\"%s\",\"role\":\"assistant\",\"content\":[",
                       id, !done ? "in_progress" : cut ? "incomplete" : "completed");
    if (done) put_text_part(b, text, n);
    snug_strbuf_printf(b, "]}");
}

/* Call k of calls as a function_call item (its arguments when done, else ""). */
static void put_call_item(snug_strbuf *b, const responses_reply *r, size_t k, int index, bool done)
{
    const json_t *c = json_array_get(r->calls, k);
    const char *name = json_string_value(json_object_get(c, "name"));
    char id[40], call[40];
    item_id("fc_", r->key, index, id);
    tool_call_id(r->req, r->key, k, call);
    snug_strbuf_printf(b, "{\"type\":\"function_call\",\"id\":\"%s\",\"call_id\":\"%s\",\"name\":", id, call);
    snug_strbuf_json_string(b, name, strlen(name));
    snug_strbuf_printf(b, ",\"arguments\":");
    char *args = done ? snug_json_dumps(json_object_get(c, "arguments"), false) : NULL;
    if (done && !args) b->failed = true;
    snug_strbuf_json_string(b, args ? args : "", args ? strlen(args) : 0);
    snug_strbuf_printf(b, ",\"status\":\"%s\"}", done ? "completed" : "in_progress");
    snug_mem_free(args);
}

void responses_put(snug_strbuf *b, const responses_reply *r)
{
    const json_t *src = r->req->source;
    const char *status = r->in_progress ? "in_progress" : incomplete(r) ? "incomplete" : "completed";
    snug_strbuf_printf(b, "{\"id\":\"%s\",\"object\":\"response\",\"created_at\":%lld,\"status\":\"%s\","
                       "\"background\":false,\"error\":null,\"incomplete_details\":%s,\"instructions\":", r->id,
                       (long long)r->created, status,
                       !r->in_progress && incomplete(r) ? "{\"reason\":\"max_output_tokens\"}" : "null");
    put_value(b, json_object_get(src, "instructions"), "null");
    snug_strbuf_printf(b, ",\"max_output_tokens\":");
    put_value(b, json_object_get(src, "max_output_tokens"), "null");
    snug_strbuf_printf(b, ",\"metadata\":");
    put_value(b, json_object_get(src, "metadata"), "{}");
    snug_strbuf_printf(b, ",\"model\":");
    snug_strbuf_json_string(b, r->model, strlen(r->model));
    snug_strbuf_printf(b, ",\"output\":[");
    int index = 0;
    char id[40];
    if (!r->in_progress) {
        if (has_reasoning(r)) {
            item_id("rs_", r->key, index++, id);
            put_reasoning_item(b, id, r->reasoning, r->n_reasoning, true);
        }
        if (has_message(r)) {
            if (index) snug_strbuf_put(b, ",", 1);
            item_id("msg_", r->key, index++, id);
            put_message_item(b, id, r->text, r->n_text, true, incomplete(r));
        }
        for (size_t k = 0; k < json_array_size(r->calls); k++, index++) {
            if (index) snug_strbuf_put(b, ",", 1);
            put_call_item(b, r, k, index, true);
        }
    }
    snug_strbuf_printf(b, "],\"parallel_tool_calls\":%s,\"previous_response_id\":null,\"reasoning\":",
                       r->req->parallel_tool_calls ? "true" : "false");
    put_value(b, json_object_get(src, "reasoning"), "{\"effort\":null,\"summary\":null}");
    snug_strbuf_printf(b, ",\"store\":false,\"temperature\":");
    put_value(b, json_object_get(src, "temperature"), "1.0");
    snug_strbuf_printf(b, ",\"text\":");
    put_value(b, json_object_get(src, "text"), "{\"format\":{\"type\":\"text\"}}");
    snug_strbuf_printf(b, ",\"tool_choice\":");
    put_value(b, json_object_get(src, "tool_choice"), r->req->tools ? "\"auto\"" : "\"none\"");
    snug_strbuf_printf(b, ",\"tools\":");
    put_value(b, json_object_get(src, "tools"), "[]");
    snug_strbuf_printf(b, ",\"top_p\":");
    put_value(b, json_object_get(src, "top_p"), "1.0");
    snug_strbuf_printf(b, ",\"truncation\":\"disabled\",\"usage\":");
    if (r->in_progress)
        snug_strbuf_printf(b, "null");
    else
        snug_strbuf_printf(b, "{\"input_tokens\":%lld,\"input_tokens_details\":{\"cached_tokens\":%lld},"
                           "\"output_tokens\":%lld,\"output_tokens_details\":{\"reasoning_tokens\":%lld},"
                           "\"total_tokens\":%lld}", (long long)r->prompt, (long long)r->cached, (long long)r->output,
                           (long long)r->reasoning_tokens, (long long)(r->prompt + r->output));
    snug_strbuf_printf(b, ",\"user\":");
    put_value(b, json_object_get(src, "user"), "null");
    snug_strbuf_printf(b, "}");
}

/* "event: TYPE\ndata: {"type":"TYPE","sequence_number":N," then the
 * caller's fields and end_event. */
static void begin_event(snug_strbuf *b, responses_stream *s, const char *type)
{
    snug_strbuf_printf(b, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%lld,", type, type,
                       (long long)s->seq++);
}

static void end_event(snug_strbuf *b) { snug_strbuf_printf(b, "}\n\n"); }

/* The response whole (or as it begins) as event type. */
static void response_event(snug_strbuf *b, responses_stream *s, const char *type, const responses_reply *r)
{
    begin_event(b, s, type);
    snug_strbuf_printf(b, "\"response\":");
    responses_put(b, r);
    end_event(b);
}

void responses_stream_start(snug_strbuf *b, responses_stream *s, const responses_reply *r)
{
    response_event(b, s, "response.created", r);
    response_event(b, s, "response.in_progress", r);
}

/* Ends the open item: its text's done events and output_item.done (cut:
 * the reply ran out of tokens in it). */
static void close_item(snug_strbuf *b, responses_stream *s, bool cut)
{
    if (s->open == ITEM_NONE) return;
    bool reasoning = s->open == ITEM_REASONING;
    const char *text = s->text.p ? s->text.p : "";
    int index = s->n_items - 1;
    begin_event(b, s, reasoning ? "response.reasoning_text.done" : "response.output_text.done");
    snug_strbuf_printf(b, "\"item_id\":\"%s\",\"output_index\":%d,\"content_index\":0,\"text\":", s->item, index);
    snug_strbuf_json_string(b, text, s->text.len);
    if (!reasoning) snug_strbuf_printf(b, ",\"logprobs\":[]");
    end_event(b);
    begin_event(b, s, "response.content_part.done");
    snug_strbuf_printf(b, "\"item_id\":\"%s\",\"output_index\":%d,\"content_index\":0,\"part\":", s->item, index);
    if (reasoning) {
        snug_strbuf_printf(b, "{\"type\":\"reasoning_text\",\"text\":");
        snug_strbuf_json_string(b, text, s->text.len);
        snug_strbuf_printf(b, "}");
    } else {
        put_text_part(b, text, s->text.len);
    }
    end_event(b);
    begin_event(b, s, "response.output_item.done");
    snug_strbuf_printf(b, "\"output_index\":%d,\"item\":", index);
    if (reasoning) put_reasoning_item(b, s->item, text, s->text.len, true);
    else put_message_item(b, s->item, text, s->text.len, true, cut);
    end_event(b);
    s->open = ITEM_NONE;
    snug_strbuf_clear(&s->text);
}

/* Opens an item of kind (the open one closed first): output_item.added
 * and its content_part.added. */
static void open_item(snug_strbuf *b, responses_stream *s, int kind, uint64_t key)
{
    close_item(b, s, false);
    bool reasoning = kind == ITEM_REASONING;
    int index = s->n_items++;
    item_id(reasoning ? "rs_" : "msg_", key, index, s->item);
    begin_event(b, s, "response.output_item.added");
    snug_strbuf_printf(b, "\"output_index\":%d,\"item\":", index);
    if (reasoning) put_reasoning_item(b, s->item, "", 0, false);
    else put_message_item(b, s->item, "", 0, false, false);
    end_event(b);
    begin_event(b, s, "response.content_part.added");
    snug_strbuf_printf(b, "\"item_id\":\"%s\",\"output_index\":%d,\"content_index\":0,\"part\":", s->item, index);
    if (reasoning) snug_strbuf_printf(b, "{\"type\":\"reasoning_text\",\"text\":\"\"}");
    else put_text_part(b, "", 0);
    end_event(b);
    s->open = kind;
}

void responses_stream_text(snug_strbuf *b, responses_stream *s, bool reasoning, const char *text, size_t n,
                           uint64_t key)
{
    if (n == 0) return;
    int kind = reasoning ? ITEM_REASONING : ITEM_MESSAGE;
    if (s->open != kind) open_item(b, s, kind, key);
    begin_event(b, s, reasoning ? "response.reasoning_text.delta" : "response.output_text.delta");
    snug_strbuf_printf(b, "\"item_id\":\"%s\",\"output_index\":%d,\"content_index\":0,\"delta\":", s->item,
                       s->n_items - 1);
    snug_strbuf_json_string(b, text, n);
    if (!reasoning) snug_strbuf_printf(b, ",\"logprobs\":[]");
    end_event(b);
    snug_strbuf_put(&s->text, text, n);
}

void responses_stream_calls(snug_strbuf *b, responses_stream *s, const responses_reply *r)
{
    close_item(b, s, false);
    for (size_t k = 0; k < json_array_size(r->calls); k++) {
        int index = s->n_items++;
        char id[40];
        item_id("fc_", r->key, index, id);
        begin_event(b, s, "response.output_item.added");
        snug_strbuf_printf(b, "\"output_index\":%d,\"item\":", index);
        put_call_item(b, r, k, index, false);
        end_event(b);
        char *args = snug_json_dumps(json_object_get(json_array_get(r->calls, k), "arguments"), false);
        if (!args) b->failed = true;
        for (int done = 0; done < 2; done++) {
            begin_event(b, s, done ? "response.function_call_arguments.done" : "response.function_call_arguments.delta");
            snug_strbuf_printf(b, "\"item_id\":\"%s\",\"output_index\":%d,\"%s\":", id, index, done ? "arguments" : "delta");
            snug_strbuf_json_string(b, args ? args : "", args ? strlen(args) : 0);
            end_event(b);
        }
        snug_mem_free(args);
        begin_event(b, s, "response.output_item.done");
        snug_strbuf_printf(b, "\"output_index\":%d,\"item\":", index);
        put_call_item(b, r, k, index, true);
        end_event(b);
    }
}

void responses_stream_end(snug_strbuf *b, responses_stream *s, const responses_reply *r)
{
    if (s->n_items == 0) open_item(b, s, ITEM_MESSAGE, r->key); /* nothing: an empty message, as the reply has */
    close_item(b, s, incomplete(r));
    response_event(b, s, incomplete(r) ? "response.incomplete" : "response.completed", r);
}

void responses_stream_error(snug_strbuf *b, responses_stream *s, const char *code, const char *message)
{
    begin_event(b, s, "error");
    snug_strbuf_printf(b, "\"code\":\"%s\",\"message\":", code);
    snug_strbuf_json_string(b, message, strlen(message));
    snug_strbuf_printf(b, ",\"param\":null");
    end_event(b);
}

void responses_stream_free(responses_stream *s) { snug_strbuf_free(&s->text); }
