/*
 * openai_tools.c: a chat reply's tool calls in OpenAI's shapes
 * (server_impl.h): read out of the model's text in its format
 * (chat/tool_calls.h), written as message.tool_calls or as a stream's
 * tool-call delta, with ids of their own.
 */
#include "server_impl.h"

#include "base/mem.h"
#include "base/json.h"

#include <string.h>

static const char ID_CHARS[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/* A call id of n characters (alphanumeric) from key, into id. */
static void call_id(uint64_t key, int n, char *id)
{
    for (int i = 0; i < n; i++) { /* splitmix64's steps */
        key += 0x9E3779B97F4A7C15ull;
        uint64_t z = key;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        id[i] = ID_CHARS[(z ^ (z >> 31)) % (sizeof ID_CHARS - 1)];
    }
    id[n] = '\0';
}

void tool_call_id(const snug_api_request *req, uint64_t key, size_t k, char id[40])
{
    int n = req->tool_format->id_chars;
    memcpy(id, "call_", 6);
    call_id(key * 31 + k, n ? n : 24, n ? id : id + 5);
}

void tool_calls_put(snug_strbuf *b, const snug_api_request *req, const json_t *calls, uint64_t key, bool delta)
{
    snug_strbuf_printf(b, "\"tool_calls\":[");
    for (size_t k = 0; k < json_array_size(calls); k++) {
        const json_t *c = json_array_get(calls, k);
        char id[40];
        tool_call_id(req, key, k, id);
        char *args = snug_json_dumps(json_object_get(c, "arguments"), false);
        const char *name = json_string_value(json_object_get(c, "name"));
        snug_strbuf_printf(b, "%s{", k ? "," : "");
        if (delta) snug_strbuf_printf(b, "\"index\":%zu,", k);
        snug_strbuf_printf(b, "\"id\":\"%s\",\"type\":\"function\",\"function\":{\"name\":\"", id);
        snug_strbuf_json(b, name, strlen(name));
        snug_strbuf_printf(b, "\",\"arguments\":\"");
        if (args) snug_strbuf_json(b, args, strlen(args));
        else b->failed = true; /* no memory for the arguments' text */
        snug_strbuf_printf(b, "\"}}");
        snug_mem_free(args);
    }
    snug_strbuf_printf(b, "]");
}

void tool_use_id(uint64_t key, size_t k, char id[40])
{
    memcpy(id, "toolu_", 6);
    call_id(key * 31 + k, 24, id + 6);
}

size_t tool_reply_streamable(const snug_api_request *req, tool_stream *t, const char *text, size_t len)
{
    const snug_tool_format *f = req->tool_format;
    if (t->calls) return t->sent; /* held to the end */
    if (!f->marker[0] && t->sent > 0) return len; /* a whole-output format already found content */
    bool at = false;
    size_t n = t->sent + snug_tool_calls_streamable(f, text + t->sent, len - t->sent, &at);
    t->calls = at;
    return n;
}
