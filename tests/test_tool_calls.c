/*
 * test_tool_calls.c: tool calls (chat/tool_calls.h): the format each
 * family's chat template shows, the calls read from fixed model outputs of
 * each format (and outputs that are content), what may stream while a
 * reply is undecided, and the round trip of a call and its result through
 * the two templates in tests/data/chat that take tools (Qwen2.5, Hermes
 * style; Mistral v0.3): the tools and the call are rendered as the model
 * writes them, and the call the template wrote reads back as the call.
 */
#include "support/chat_config.h"
#include "test.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "base/json.h"
#include "chat/chat.h"
#include "chat/tool_calls.h"

#include <string.h>

#define MODEL "models/stories260K"

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather now\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}}}}}]";

/* tests/data/chat's config of name (support/chat_config.h), counted as a
 * check. */
static json_t *config_of(const char *name)
{
    json_t *c = chat_config_load(name);
    CHECK(c != NULL, "tests/data/chat/%s.tokenizer_config.json has a chat_template", name);
    return c;
}

static void test_format_of_templates(void)
{
    static const struct {
        const char *config, *format;
    } cases[] = {{"qwen2.5", "hermes"}, {"mistral-v0.3", "mistral"}, {"tinyllama-1.1b-chat", "json"},
                 {"phi-3-mini", "json"}, {"gemma-2b-it", "json"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *c = config_of(cases[i].config);
        const snug_tool_format *f = snug_tool_format_of(json_string_value(json_object_get(c, "chat_template")));
        CHECK(strcmp(f->name, cases[i].format) == 0, "%s: %s, expected %s", cases[i].config, f->name, cases[i].format);
        json_decref(c);
    }
    /* Llama 3.1's template speaks of the ipython role and <|python_tag|> */
    CHECK(snug_tool_format_of("{%- if message.role == \"ipython\" %}<|python_tag|>{%- endif %}")->style ==
              SNUG_TOOLS_LLAMA3, "llama3");
    CHECK(snug_tool_format_of(NULL)->style == SNUG_TOOLS_JSON, "no template: json");
}

/* Parses out (in the format of style) against TOOLS: want_calls calls (0:
 * content), the first's name and arguments (compact JSON), the content's
 * length. */
static void check_parse(snug_tool_style style, const char *out, size_t want_calls, const char *name, const char *args,
                        size_t want_content)
{
    static const char *const templates[] = {"", "<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"};
    const snug_tool_format *f = snug_tool_format_of(templates[style]);
    json_t *tools = json_loads(TOOLS, 0, NULL), *calls = NULL;
    size_t content = 0;
    snug_error err = {0};
    CHECK_OK(snug_tool_calls_parse(f, out, strlen(out), tools, &calls, &content, &err), &err);
    CHECK(json_array_size(calls) == want_calls && (want_calls > 0) == (calls != NULL),
          "%s: %zu calls from %s, expected %zu", f->name, json_array_size(calls), out, want_calls);
    CHECK(content == want_content, "%s: content of %zu bytes, expected %zu: %s", f->name, content, want_content, out);
    if (want_calls && calls) {
        const json_t *c = json_array_get(calls, 0);
        char *a = snug_json_dumps(json_object_get(c, "arguments"), false);
        CHECK(strcmp(json_string_value(json_object_get(c, "name")), name) == 0 && a && strcmp(a, args) == 0,
              "%s: %s(%s), expected %s(%s)", f->name, json_string_value(json_object_get(c, "name")), a ? a : "?", name,
              args);
        snug_mem_free(a);
    }
    json_decref(calls);
    json_decref(tools);
}

/* Fixed outputs of each family, calls and not. */
static void test_parse_outputs(void)
{
    check_parse(SNUG_TOOLS_HERMES,
                "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
                "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>",
                2, "get_weather", "{\"city\":\"Paris\"}", 12);
    check_parse(SNUG_TOOLS_HERMES, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}", 1, "add", "{\"a\":1}", 0);
    check_parse(SNUG_TOOLS_HERMES, "<tool_call>\n{\"name\": \"mul\", \"arguments\": {}}\n</tool_call>", 0, NULL, NULL, 57);
    check_parse(SNUG_TOOLS_HERMES, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}\n</tool_call>", 0, NULL,
                NULL, 62);
    check_parse(SNUG_TOOLS_HERMES, "It is sunny in Paris.", 0, NULL, NULL, 21);
    check_parse(SNUG_TOOLS_MISTRAL,
                "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, {\"name\": \"get_weather\", "
                "\"arguments\": {\"city\": \"Oslo\"}}]",
                2, "add", "{\"a\":1,\"b\":2}", 0);
    check_parse(SNUG_TOOLS_MISTRAL, "Sure. [TOOL_CALLS] [{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 5}\"}]", 1, "add",
                "{\"a\":5}", 5);
    check_parse(SNUG_TOOLS_MISTRAL, "[TOOL_CALLS] [] and more", 0, NULL, NULL, 24);
    check_parse(SNUG_TOOLS_LLAMA3,
                "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}; "
                "{\"name\": \"add\", \"parameters\": {\"a\": 2}}",
                2, "get_weather", "{\"city\":\"Rome\"}", 0);
    check_parse(SNUG_TOOLS_LLAMA3, " {\"name\": \"add\", \"parameters\": {}}\n", 1, "add", "{}", 0);
    check_parse(SNUG_TOOLS_LLAMA3, "{\"name\": \"add\", \"parameters\": {}} and then", 0, NULL, NULL, 42);
    check_parse(SNUG_TOOLS_LLAMA3, "The answer is 3.", 0, NULL, NULL, 16);
    check_parse(SNUG_TOOLS_JSON, "[{\"name\": \"add\", \"arguments\": {\"b\": 1}}, {\"name\": \"add\"}]", 2, "add",
                "{\"b\":1}", 0);
    check_parse(SNUG_TOOLS_JSON, "{\"name\": \"get_weather\", \"arguments\": [1]}", 0, NULL, NULL, 41);
    check_parse(SNUG_TOOLS_JSON, "{\"city\": \"Paris\"}", 0, NULL, NULL, 17);
}

/* What may stream of an undecided reply. */
static void test_streamable(void)
{
    static const struct {
        const char *tpl, *text;
        size_t want;
        bool calls;
    } cases[] = {
        {"<tool_call>", "Hi <tool", 3, false},       {"<tool_call>", "Hi <tool_call>\n{", 3, true},
        {"<tool_call>", "Hi <b>", 6, false},          {"<tool_call>", "<", 0, false},
        {"[TOOL_CALLS]", "ok [TOOL_CALLS] [", 3, true}, {"<|python_tag|>", "  {\"na", 2, true},
        {"<|python_tag|>", "<|pyth", 0, false},       {"<|python_tag|>", "<|python_tag|>{", 0, true},
        {"<|python_tag|>", "Sure, {x}", 9, false},    {"<|python_tag|>", "  ", 0, false},
        {"", "[{\"name\"", 0, true},                  {"", "No [calls]", 10, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool at = !cases[i].calls;
        size_t n = snug_tool_calls_streamable(snug_tool_format_of(cases[i].tpl), cases[i].text, strlen(cases[i].text), &at);
        CHECK(n == cases[i].want && at == cases[i].calls, "%s: \"%s\": %zu (calls %d), expected %zu (calls %d)",
              cases[i].tpl, cases[i].text, n, at, cases[i].want, cases[i].calls);
    }
}

/* Renders config's template over a call of get_weather and its result
 * with TOOLS; checks that the text has each of pieces, and that the call
 * the template wrote (from call_at to call_end) reads back as the call. */
static void round_trip(const char *config, const char *id, const char *const *pieces, size_t n_pieces,
                       const char *call_at, const char *call_end)
{
    snug_error err = {0};
    snug_tokenizer *tok = NULL;
    json_t *c = config_of(config);
    char msgs[1024];
    snprintf(msgs, sizeof msgs,
             "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
             " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"%s\", \"type\": \"function\","
             " \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
             " {\"role\": \"tool\", \"tool_call_id\": \"%s\", \"content\": \"22 C\"}]",
             id, id);
    json_t *messages = json_loads(msgs, 0, NULL), *tools = json_loads(TOOLS, 0, NULL), *calls = NULL;
    char *out = NULL;
    size_t len = 0, content = 0;
    CHECK_OK(snug_tokenizer_load(MODEL, &tok, &err), &err);
    const char *tpl = json_string_value(json_object_get(c, "chat_template"));
    if (!tok || !messages || !tools || !tpl) goto out;
    snug_chat_input in = {.messages = messages, .tools = tools, .add_generation_prompt = true};
    CHECK_OK(snug_chat_apply_template(tpl, tok, &in, NULL, &out, &len, &err), &err);
    if (!out) goto out;
    for (size_t i = 0; i < n_pieces; i++)
        CHECK(strstr(out, pieces[i]) != NULL, "%s: the rendering lacks %s:\n%s", config, pieces[i], out);
    const char *a = strstr(out, call_at), *b = a ? strstr(a, call_end) : NULL;
    CHECK(a && b, "%s: the call is not in the rendering:\n%s", config, out);
    if (!a || !b) goto out;
    const snug_tool_format *f = snug_tool_format_of(tpl);
    CHECK_OK(snug_tool_calls_parse(f, a, (size_t)(b - a), tools, &calls, &content, &err), &err);
    char *args = calls ? snug_json_dumps(json_object_get(json_array_get(calls, 0), "arguments"), false) : NULL;
    CHECK(json_array_size(calls) == 1 && args && strcmp(args, "{\"city\":\"Paris\"}") == 0,
          "%s: the call written reads back as %zu calls, %s: %.*s", config, json_array_size(calls), args ? args : "-",
          (int)(b - a), a);
    snug_mem_free(args);
out:
    json_decref(calls);
    snug_mem_free(out);
    json_decref(messages);
    json_decref(tools);
    json_decref(c);
    snug_tokenizer_free(tok);
}

static void test_round_trip_qwen(void)
{
    static const char *const pieces[] = {
        "# Tools\n\nYou may call one or more functions",
        "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather now\", "
        "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
        "[\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"add\"",
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call><|im_end|>\n",
        "<|im_start|>user\n<tool_response>\n22 C\n</tool_response><|im_end|>\n<|im_start|>assistant\n"};
    round_trip("qwen2.5", "call_1", pieces, sizeof pieces / sizeof pieces[0], "assistant\n<tool_call>", "<|im_end|>");
}

static void test_round_trip_mistral(void)
{
    static const char *const pieces[] = {
        "[AVAILABLE_TOOLS] [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
        "\"The weather now\", \"parameters\": {\"type\": \"object\"",
        "[/AVAILABLE_TOOLS][INST] Weather in Paris?[/INST]",
        "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1b2c3d4e\"}]",
        "[TOOL_RESULTS] {\"content\": 22 C, \"call_id\": \"a1b2c3d4e\"}[/TOOL_RESULTS]"};
    round_trip("mistral-v0.3", "a1b2c3d4e", pieces, sizeof pieces / sizeof pieces[0], "[TOOL_CALLS]", "</s>");
}

int main(void)
{
    snug_json_init();
    RUN(test_format_of_templates);
    RUN(test_parse_outputs);
    RUN(test_streamable);
    RUN(test_round_trip_qwen);
    RUN(test_round_trip_mistral);
    return test_summary();
}
