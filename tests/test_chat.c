/*
 * test_chat.c: a chat template applied to a conversation
 * (snug_chat_apply_template) with the bundled model's tokenizer: the text
 * of a turn after a tool call, and what a failed render says about itself
 * (its kind, which message, the text without the template's place) while
 * err keeps the whole detail.
 */
#include "test.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "base/json.h"
#include "chat/chat.h"

#define MODEL "models/stories260K"
#define TINYLLAMA "tests/data/chat/tinyllama-1.1b-chat.jinja"

/* A tool call's turn as snug_api_parse hands it on: the assistant's null
 * content made "". */
static const char g_tool_turn[] =
    "[{\"role\": \"user\", \"content\": \"What is 6*7?\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"x\","
    " \"type\": \"function\", \"function\": {\"name\": \"calc\", \"arguments\": \"{\\\"e\\\": 1}\"}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"x\", \"content\": \"42\"},"
    " {\"role\": \"developer\", \"content\": \"be brief\"},"
    " {\"role\": \"user\", \"content\": \"thanks\"}]";

typedef struct chat_case {
    snug_tokenizer *tok;
    json_t *messages;
    char *tinyllama;
} chat_case;

static bool open_case(chat_case *c, const char *messages)
{
    snug_error err = {0};
    size_t len = 0;
    *c = (chat_case){0};
    CHECK_OK(snug_tokenizer_load(MODEL, &c->tok, &err), &err);
    json_error_t jerr;
    c->messages = json_loads(messages, 0, &jerr);
    CHECK(json_is_array(c->messages), "messages: %s", jerr.text);
    CHECK_OK(snug_file_read_all(TINYLLAMA, 1 << 20, &c->tinyllama, &len, &err), &err);
    return c->tok && c->messages && c->tinyllama;
}

static void close_case(chat_case *c)
{
    snug_tokenizer_free(c->tok);
    json_decref(c->messages);
    snug_mem_free(c->tinyllama);
}

/* Applies text to c's messages and checks that it fails with status want,
 * the failure's kind and message index, and the text after text_at. */
static void check_failure(const chat_case *c, const char *text, snug_status want,
                          snug_template_fail kind, int64_t message, const char *want_text)
{
    snug_chat_failure f;
    snug_error err = {0};
    char *out = NULL;
    size_t len = 0;
    memset(&f, 0x5a, sizeof f);
    snug_chat_input in = {.messages = c->messages, .add_generation_prompt = true};
    snug_status st = snug_chat_apply_template(text, c->tok, &in, &f, &out, &len, &err);
    CHECK(st == want && out == NULL, "%.60s: %s (%s), want %s", text ? text : "(none)",
          snug_status_str(st), err.msg, snug_status_str(want));
    CHECK(f.kind == kind && f.message == message, "%.60s: kind %d, message %lld; want %d, %lld",
          text ? text : "(none)", (int)f.kind, (long long)f.message, (int)kind,
          (long long)message);
    CHECK(f.text_at <= strlen(err.msg) && strcmp(err.msg + f.text_at, want_text) == 0,
          "%.60s: message \"%s\" at %zu, want \"%s\"", text ? text : "(none)", err.msg,
          f.text_at, want_text);
    snug_mem_free(out);
}

/* TinyLlama's template over a turn after a tool call: the assistant's
 * empty content, the tool's and developer's messages skipped (the
 * template has no branch for them). */
static void test_tool_call_turn(void)
{
    chat_case c;
    if (open_case(&c, g_tool_turn)) {
        snug_chat_failure f;
        snug_error err = {0};
        char *out = NULL;
        size_t len = 0;
        memset(&f, 0x5a, sizeof f);
        snug_chat_input in = {.messages = c.messages, .add_generation_prompt = true};
        CHECK_OK(snug_chat_apply_template(c.tinyllama, c.tok, &in, &f, &out, &len, &err), &err);
        const char *want = "<|user|>\nWhat is 6*7?</s>\n<|assistant|>\n</s>\n<|user|>\nthanks</s>\n"
                           "<|assistant|>\n";
        CHECK(out && len == strlen(want) && strcmp(out, want) == 0, "rendered:\n[%s]\nwant:\n[%s]",
              out ? out : "", want);
        CHECK(f.kind == SNUG_TEMPLATE_FAIL_NONE && f.message == -1, "success: kind %d, message %lld",
              (int)f.kind, (long long)f.message);
        snug_mem_free(out);
    }
    close_case(&c);
}

/* continue_final (transformers' continue_final_message, Anthropic's
 * prefill): the text ends right after the last message's content (found
 * stripped: "time " is found as "time"), no end of turn, no generation
 * prompt; a template that does not write the content fails. */
static void test_continue_final(void)
{
    chat_case c;
    if (open_case(&c, "[{\"role\": \"user\", \"content\": \"Tell me a story\"},"
                      " {\"role\": \"assistant\", \"content\": \"Once upon a time \"}]")) {
        snug_error err = {0};
        char *out = NULL;
        size_t len = 0;
        snug_chat_input in = {.messages = c.messages, .continue_final = true};
        CHECK_OK(snug_chat_apply_template(c.tinyllama, c.tok, &in, NULL, &out, &len, &err), &err);
        const char *want = "<|user|>\nTell me a story</s>\n<|assistant|>\nOnce upon a time";
        CHECK(out && len == strlen(want) && strcmp(out, want) == 0, "continued:\n[%s]\nwant:\n[%s]", out ? out : "",
              want);
        snug_mem_free(out);
        out = NULL;
        CHECK_FAILS(snug_chat_apply_template("{% for m in messages %}{{ m.role }}{% endfor %}", c.tok, &in, NULL, &out,
                                             &len, &err),
                    &err, SNUG_INVALID, "did not write the final message's content");
        CHECK(out == NULL, "a failed continuation holds no text");
    }
    close_case(&c);
}

/* The null content an OpenAI client sends after a tool call, given to the
 * template as it is: the template adds None to a string. The detail stays
 * in err; the failure says which message. */
static void test_null_content_reaches_the_template(void)
{
    chat_case c;
    if (open_case(&c, "[{\"role\": \"user\", \"content\": \"hi\"},"
                      " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": []},"
                      " {\"role\": \"user\", \"content\": \"thanks\"}]"))
        check_failure(&c, c.tinyllama, SNUG_INVALID, SNUG_TEMPLATE_FAIL_ERROR, 1,
                      "unsupported operand type(s) for +: 'str' and 'NoneType'");
    close_case(&c);
}

/* Which message a failure was at: through a loop over a message's
 * tool_calls and over a slice; a raise_exception with its own text; a
 * limit; none outside a loop, and none for failures that are not the
 * render's. */
static void test_failure_names_the_message(void)
{
    chat_case c;
    if (open_case(&c, g_tool_turn)) {
        /* a template written for arguments as a mapping (what transformers passes) */
        check_failure(&c,
                      "{% for m in messages[1:] %}{% for call in m.tool_calls | default([]) %}"
                      "{% for k, v in call.function.arguments | items %}{{ k }}{% endfor %}"
                      "{% endfor %}{% endfor %}",
                      SNUG_INVALID, SNUG_TEMPLATE_FAIL_ERROR, 1,
                      "can only get item pairs from a mapping");
        check_failure(&c,
                      "{% for m in messages %}{% if m.role not in ['system', 'user', 'assistant',"
                      " 'tool'] %}{{ raise_exception('Unknown role: ' + m.role) }}{% endif %}"
                      "{% endfor %}",
                      SNUG_INVALID, SNUG_TEMPLATE_FAIL_RAISED, 3, "Unknown role: developer");
        check_failure(&c, "{% for m in messages %}{{ 'x' * 100000000 }}{% endfor %}",
                      SNUG_INVALID, SNUG_TEMPLATE_FAIL_LIMIT, 0,
                      "a repetition of 100000000 is too large");
        check_failure(&c, "{{ messages[0].content + 1 }}", SNUG_INVALID, SNUG_TEMPLATE_FAIL_ERROR,
                      -1, "unsupported operand type(s) for +: 'str' and 'int'");
        check_failure(&c, "{% for m in messages %}{% include 'x' %}{% endfor %}", SNUG_UNSUPPORTED,
                      SNUG_TEMPLATE_FAIL_NONE, -1,
                      "chat_template:1:27: the 'include' tag is not supported");
        check_failure(&c, NULL, SNUG_INVALID, SNUG_TEMPLATE_FAIL_NONE, -1,
                      "the model has no chat template (tokenizer_config.json: chat_template)");
    }
    close_case(&c);
}

int main(void)
{
    snug_json_init();
    RUN(test_tool_call_turn);
    RUN(test_continue_final);
    RUN(test_null_content_reaches_the_template);
    RUN(test_failure_names_the_message);
    return test_summary();
}
