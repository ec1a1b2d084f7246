/*
 * fuzz_tool_calls.c: fuzzes the reading of tool calls out of a model's
 * reply (snug_tool_calls_parse, snug_tool_calls_streamable): a reply is
 * whatever the model wrote, so any bytes.
 *
 * The input's first byte picks the format (json, hermes, mistral, llama3),
 * the rest is the reply. Calls found must be of the two tools given, with
 * object arguments; the content before them must lie within the reply and
 * end where no whitespace is; what may stream must lie within the reply,
 * and when calls are said to begin there, the reply there must begin a
 * call or its marker. The driver in fuzz_common.h also runs it with one
 * allocation failing and checks for leaks.
 */
#include "base/json.h"
#include "chat/tool_calls.h"
#include "fuzz_common.h"

static const char *const NAME = "fuzz/reply.txt";

static const char TOOLS[] = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}},"
                            " {\"type\": \"function\", \"function\": {\"name\": \"add\"}}]";
static const char *const TEMPLATES[] = {"", "<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"};

typedef struct parsed_reply {
    const snug_tool_format *f;
    json_t *calls;
    size_t content_len;
} parsed_reply;

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    if (in->size == 0) return snug_errorf(err, SNUG_INVALID, "%s: empty", in->name);
    snug_json_init();
    parsed_reply *p = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *p, err);
    json_t *tools = json_loads(TOOLS, 0, NULL);
    if (!p || !tools) {
        snug_mem_free(p);
        json_decref(tools);
        return snug_errorf(err, SNUG_NOMEM, "%s: no memory", in->name);
    }
    p->f = snug_tool_format_of(TEMPLATES[in->data[0] % 4]);
    snug_status st = snug_tool_calls_parse(p->f, (const char *)in->data + 1, in->size - 1, tools, &p->calls,
                                           &p->content_len, err);
    json_decref(tools);
    if (st != SNUG_OK) {
        snug_mem_free(p);
        return snug_error_prefix(err, st, "%s: ", in->name);
    }
    *parsed = p;
    return SNUG_OK;
}

static void check(const fuzz_input *in, void *parsed)
{
    parsed_reply *p = parsed;
    const char *text = (const char *)in->data + 1;
    size_t len = in->size - 1;
    REQUIRE(p->content_len <= len);
    if (p->calls) {
        REQUIRE(json_array_size(p->calls) > 0);
        REQUIRE(p->content_len == 0 || memchr(" \t\r\n", text[p->content_len - 1], 4) == NULL);
        for (size_t i = 0; i < json_array_size(p->calls); i++) {
            const json_t *c = json_array_get(p->calls, i);
            const char *name = json_string_value(json_object_get(c, "name"));
            REQUIRE(name && (strcmp(name, "get_weather") == 0 || strcmp(name, "add") == 0));
            REQUIRE(json_is_object(json_object_get(c, "arguments")));
        }
    } else {
        REQUIRE(p->content_len == len);
    }
    bool at = false;
    size_t n = snug_tool_calls_streamable(p->f, text, len, &at);
    REQUIRE(n <= len);
    if (at) REQUIRE(n < len && memchr("{[<", text[n], 3) != NULL);
    json_decref(p->calls);
    snug_mem_free(p);
}

static const fuzz_target g_target = {NAME, false, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_target, data, size);
    return 0;
}
