/*
 * test_api_request.c: OpenAI completions and chat completions bodies into
 * snug_api_request. Good requests check every parsed value (chat messages
 * as the template will see them: nulls dropped, an assistant's null
 * content ""); bad ones check the HTTP status, the param, a piece of the
 * message, that the message is valid UTF-8 and that nothing is left held;
 * the OOM loop fails each allocation of a large good request in turn.
 */
#include "base/mem.h"
#include "base/json.h"
#include "grammar/matcher.h"
#include "server/api_request.h"
#include "test.h"

enum { N_VOCAB = 1000 };

static snug_api_limits limits(void)
{
    snug_api_limits l;
    snug_api_limits_default(&l);
    l.n_vocab = N_VOCAB;
    return l;
}

/* Parses the NUL-terminated body; on failure prints why. */
static snug_status parse(snug_api_kind kind, const char *body, snug_api_request *r,
                         snug_api_error *e)
{
    snug_api_limits l = limits();
    return snug_api_parse(kind, body, strlen(body), &l, r, e);
}

static bool parses(snug_api_kind kind, const char *body, snug_api_request *r)
{
    snug_api_error e = {0};
    snug_status st = parse(kind, body, r, &e);
    CHECK(st == SNUG_OK, "%s did not parse: %d %s: %s", body, e.status, e.param, e.message);
    return st == SNUG_OK;
}

/* Checks that len bytes of body fail under l with an HTTP status, param
 * and message piece, the request zeroed and nothing held. */
static void check_bad_n(snug_api_kind kind, const char *body, size_t len,
                        const snug_api_limits *l, int status, const char *param,
                        const char *piece)
{
    size_t before = 0, after = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &before, NULL, false);
    snug_api_request r;
    snug_api_error e;
    memset(&r, 0x5a, sizeof r);
    snug_status st = snug_api_parse(kind, body, len, l, &r, &e);
    snug_mem_status(SNUG_MEM_TOTAL, &after, NULL, false);
    const char *shown = !body ? "(null)" : len < 200 ? body : "(long body)";
    len = SNUG_MIN(len, 200);
    CHECK(st == (status == 503 ? SNUG_NOMEM : SNUG_INVALID), "%.*s: %s", (int)len, shown,
          snug_status_str(st));
    CHECK(e.status == status, "%.*s: status %d, expected %d", (int)len, shown, e.status, status);
    CHECK(strcmp(e.param, param) == 0, "%.*s: param \"%s\", expected \"%s\" (%s)", (int)len,
          shown, e.param, param, e.message);
    CHECK(strstr(e.message, piece) != NULL, "%.*s: message \"%s\" lacks \"%s\"", (int)len, shown,
          e.message, piece);
    CHECK(param[0] == '\0' || strncmp(e.message, param, strlen(param)) == 0,
          "message \"%s\" does not start with the param", e.message);
    CHECK(e.type && strcmp(e.type, status == 503 ? "server_error" : "invalid_request_error") == 0,
          "%.*s: type %s", (int)len, shown, e.type ? e.type : "NULL");
    CHECK(snug_utf8_valid(e.message, strlen(e.message)), "message is not UTF-8: %s", e.message);
    CHECK(r.root == NULL && r.prompts == NULL && r.logit_bias == NULL && r.grammar == NULL, "request not zeroed");
    CHECK(after == before, "%.*s: %zu bytes held, %zu before", (int)len, shown, after, before);
    snug_api_request_free(&r);
}

static void check_bad(snug_api_kind kind, const char *body, const char *param, const char *piece)
{
    snug_api_limits l = limits();
    check_bad_n(kind, body, strlen(body), &l, 400, param, piece);
}

static bool near(float a, double b) { return fabs(a - b) < 1e-6; }

/* ---- good requests -------------------------------------------------------- */

static void test_completions_every_field(void)
{
    const char *body =
        "{\"model\": \"tiny\", \"prompt\": \"Once upon\", \"max_tokens\": 32,"
        " \"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 40, \"min_p\": 0.05,"
        " \"repetition_penalty\": 1.1, \"frequency_penalty\": 0.5, \"presence_penalty\": -0.5,"
        " \"seed\": 42, \"logit_bias\": {\"5\": 10, \"999\": -100, \"0\": 0.5},"
        " \"stop\": [\"\\n\\n\", \"END\"], \"stop_token_ids\": [3, 4], \"ignore_eos\": true,"
        " \"n\": 2, \"stream\": true, \"stream_options\": {\"include_usage\": true},"
        " \"logprobs\": 5, \"echo\": true, \"user\": \"x\", \"best_of\": 2, \"suffix\": \"\","
        " \"return_tokens_as_token_ids\": true, \"service_tier\": \"auto\"}";
    snug_api_request r;
    if (!parses(SNUG_API_COMPLETIONS, body, &r)) return;
    CHECK(r.kind == SNUG_API_COMPLETIONS, "kind");
    CHECK(r.model && strcmp(r.model, "tiny") == 0, "model %s", r.model);
    CHECK(r.n_prompts == 1 && r.prompts[0].text && r.prompts[0].text_len == 9 &&
              memcmp(r.prompts[0].text, "Once upon", 9) == 0 && r.prompts[0].ids == NULL,
          "prompt");
    CHECK(r.messages == NULL, "no messages on completions");
    CHECK(r.max_tokens == 32 && r.stop.max_tokens == 32, "max_tokens %d", r.max_tokens);
    const snug_sampling_params *s = &r.sampling;
    CHECK(near(s->temperature, 0.5) && near(s->top_p, 0.9f) && s->top_k == 40 &&
              near(s->min_p, 0.05f) && near(s->repetition_penalty, 1.1f) &&
              near(s->frequency_penalty, 0.5) && near(s->presence_penalty, -0.5),
          "sampling %g %g %d %g %g %g %g", s->temperature, s->top_p, s->top_k, s->min_p,
          s->repetition_penalty, s->frequency_penalty, s->presence_penalty);
    CHECK(s->has_seed && s->seed == 42, "seed");
    CHECK(s->n_logit_bias == 3 && s->logit_bias == r.logit_bias, "logit_bias count %d",
          s->n_logit_bias);
    if (s->n_logit_bias == 3) {
        CHECK(s->logit_bias[0].id == 5 && s->logit_bias[0].bias == 10, "bias 0");
        CHECK(s->logit_bias[1].id == 999 && s->logit_bias[1].bias == -100, "bias 1");
        CHECK(s->logit_bias[2].id == 0 && s->logit_bias[2].bias == 0.5f, "bias 2");
    }
    CHECK(r.stop.n_stop == 2 && r.stop.stop_len[0] == 2 && memcmp(r.stop.stop[0], "\n\n", 2) == 0 &&
              r.stop.stop_len[1] == 3 && memcmp(r.stop.stop[1], "END", 3) == 0,
          "stop strings");
    CHECK(r.stop.n_eos == 2 && r.stop.eos_ids[0] == 3 && r.stop.eos_ids[1] == 4, "stop ids");
    CHECK(r.stop.ignore_eos, "ignore_eos");
    CHECK(r.n == 2 && r.stream && r.include_usage, "n, stream, include_usage");
    CHECK(r.logprobs == 5 && r.echo, "logprobs %d, echo", r.logprobs);
    CHECK(r.tokens_as_ids, "return_tokens_as_token_ids");
    CHECK(r.add_generation_prompt, "add_generation_prompt not read on completions");
    snug_error e = {0};
    CHECK_OK(snug_stop_params_validate(&r.stop, &e), &e);
    snug_api_request_free(&r);
    CHECK(r.root == NULL && r.prompts == NULL, "freed request zeroed");
}

static void test_defaults(void)
{
    snug_api_request r;
    if (parses(SNUG_API_COMPLETIONS, "{\"prompt\": \"hi\", \"logprobs\": null, \"n\": null}", &r)) {
        snug_sampling_params d;
        snug_sampling_params_default(&d);
        CHECK(r.model == NULL && r.n == 1 && r.logprobs == -1 && r.max_tokens == 0, "defaults");
        CHECK(!r.stream && !r.include_usage && !r.echo, "flags");
        CHECK(memcmp(&r.sampling, &d, sizeof d) == 0, "sampling defaults");
        CHECK(r.stop.n_stop == 0 && r.stop.n_eos == 0 && !r.stop.ignore_eos &&
                  r.stop.max_tokens == 0,
              "stop defaults");
        snug_api_request_free(&r);
    }
    if (parses(SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", &r)) {
        CHECK(r.kind == SNUG_API_CHAT && r.add_generation_prompt && r.logprobs == -1 &&
                  r.prompts == NULL && r.n_prompts == 0,
              "chat defaults");
        snug_api_request_free(&r);
    }
    /* stream_options without stream is checked, then ignored */
    if (parses(SNUG_API_COMPLETIONS,
               "{\"prompt\": \"hi\", \"stream_options\": {\"include_usage\": true}}", &r)) {
        CHECK(!r.stream && !r.include_usage, "include_usage only when streaming");
        snug_api_request_free(&r);
    }
    /* integral reals count as integers; top_k -1 is off */
    if (parses(SNUG_API_COMPLETIONS,
               "{\"prompt\": [1.0, 2], \"n\": 2.0, \"top_k\": -1, \"seed\": -1, \"stop\": []}",
               &r)) {
        CHECK(r.n == 2 && r.sampling.top_k == 0 && r.sampling.seed == UINT64_MAX &&
                  r.sampling.has_seed && r.prompts[0].ids[0] == 1 && r.stop.n_stop == 0,
              "n %d, top_k %d", r.n, r.sampling.top_k);
        snug_api_request_free(&r);
    }
    snug_api_request zero = {0};
    snug_api_request_free(&zero); /* a zeroed request is ignored */
}

static void test_prompt_shapes(void)
{
    snug_api_request r;
    if (parses(SNUG_API_COMPLETIONS, "{\"prompt\": [\"a\", \"bc\", \"d\\u00e9f\"]}", &r)) {
        CHECK(r.n_prompts == 3, "three prompts");
        const char *want[] = {"a", "bc", "d\xc3\xa9" "f"};
        for (int i = 0; i < r.n_prompts && i < 3; i++)
            CHECK(r.prompts[i].ids == NULL && r.prompts[i].text_len == strlen(want[i]) &&
                      memcmp(r.prompts[i].text, want[i], strlen(want[i])) == 0,
                  "prompt %d", i);
        snug_api_request_free(&r);
    }
    if (parses(SNUG_API_COMPLETIONS, "{\"prompt\": [7, 0, 999]}", &r)) {
        CHECK(r.n_prompts == 1 && r.prompts[0].text == NULL && r.prompts[0].n_ids == 3 &&
                  r.prompts[0].ids[0] == 7 && r.prompts[0].ids[1] == 0 &&
                  r.prompts[0].ids[2] == 999,
              "one list of ids");
        snug_api_request_free(&r);
    }
    if (parses(SNUG_API_COMPLETIONS, "{\"prompt\": [[1, 2], [3], [4, 5, 6]]}", &r)) {
        int32_t want[3][3] = {{1, 2}, {3}, {4, 5, 6}};
        int64_t lens[3] = {2, 1, 3};
        CHECK(r.n_prompts == 3, "three id prompts");
        for (int i = 0; i < r.n_prompts && i < 3; i++) {
            CHECK(r.prompts[i].text == NULL && r.prompts[i].n_ids == lens[i], "prompt %d", i);
            for (int j = 0; j < lens[i] && j < r.prompts[i].n_ids; j++)
                CHECK(r.prompts[i].ids[j] == want[i][j], "prompt %d id %d", i, j);
        }
        snug_api_request_free(&r);
    }
}

static void test_chat_every_field(void)
{
    const char *body =
        "{\"model\": \"m\", \"messages\": ["
        " {\"role\": \"system\", \"content\": \"be brief\"},"
        " {\"role\": \"developer\", \"content\": \"\"},"
        " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"one\"},"
        "   {\"type\": \"text\", \"text\": \"two\"}], \"name\": \"bob\"},"
        " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\","
        "   \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]},"
        " {\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": \"c1\"},"
        " {\"role\": \"assistant\"},"
        " {\"role\": \"user\", \"content\": []}],"
        " \"max_tokens\": 100, \"max_completion_tokens\": 50, \"logprobs\": true,"
        " \"top_logprobs\": 3, \"add_generation_prompt\": false, \"seed\": -1, \"top_k\": -1,"
        " \"temperature\": 0, \"stop\": \"###\","
        " \"ignore_eos\": false, \"stream\": false, \"stream_options\": {\"include_usage\": true},"
        " \"tools\": [], \"tool_choice\": \"none\", \"parallel_tool_calls\": true,"
        " \"response_format\": {\"type\": \"text\"}, \"user\": null, \"store\": false,"
        " \"metadata\": null, \"service_tier\": \"default\", \"modalities\": [\"text\"]}";
    snug_api_request r;
    if (!parses(SNUG_API_CHAT, body, &r)) return;
    CHECK(r.kind == SNUG_API_CHAT && strcmp(r.model, "m") == 0, "kind, model");
    CHECK(r.max_tokens == 50 && r.stop.max_tokens == 50, "max_completion_tokens wins: %d",
          r.max_tokens);
    CHECK(r.logprobs == 3, "top_logprobs %d", r.logprobs);
    CHECK(!r.add_generation_prompt && !r.echo && !r.stream && !r.include_usage, "flags");
    CHECK(r.sampling.has_seed && r.sampling.seed == UINT64_MAX && r.sampling.top_k == 0 &&
              r.sampling.temperature == 0,
          "sampling");
    CHECK(r.stop.n_stop == 1 && r.stop.stop_len[0] == 3 && memcmp(r.stop.stop[0], "###", 3) == 0,
          "stop as a string");
    CHECK(json_is_array(r.messages) && json_array_size(r.messages) == 7, "messages");
    char *text = snug_json_dumps(r.messages, false);
    const char *want =
        "[{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"developer\",\"content\":\"\"},"
        "{\"role\":\"user\",\"content\":\"one\\ntwo\",\"name\":\"bob\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\","
        "\"function\":{\"name\":\"f\",\"arguments\":{}}}]},"
        "{\"role\":\"tool\",\"content\":\"42\",\"tool_call_id\":\"c1\"},"
        "{\"role\":\"assistant\",\"content\":\"\"},"
        "{\"role\":\"user\",\"content\":\"\"}]";
    CHECK(text && strcmp(text, want) == 0, "messages normalized:\n  got  %s\n  want %s", text,
          want);
    snug_mem_free(text);
    snug_api_request_free(&r);

    if (parses(SNUG_API_CHAT,
               "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true,"
               " \"max_tokens\": 7}",
               &r)) {
        CHECK(r.logprobs == 0 && r.max_tokens == 7, "logprobs without top_logprobs: %d",
              r.logprobs);
        snug_api_request_free(&r);
    }
}

/* What every OpenAI client sends back after a tool call, with nulls where
 * fields are omitted: the assistant's null content becomes "" (a template
 * adds it to a string), null members are dropped from the messages, their
 * tool calls and functions (a template finds them undefined, not None),
 * and what is not null stays as it was. */
static void test_chat_nulls_after_a_tool_call(void)
{
    const char *body =
        "{\"messages\": ["
        " {\"role\": \"system\", \"content\": \"s\", \"name\": null},"
        " {\"role\": \"user\", \"content\": \"What is 6*7?\"},"
        " {\"role\": \"assistant\", \"content\": null, \"refusal\": null, \"tool_calls\": [{\"id\": \"x\","
        "   \"type\": \"function\", \"index\": null, \"function\": {\"name\": \"calc\","
        "   \"arguments\": \"{\\\"e\\\": \\\"6*7\\\"}\", \"extra\": null}}]},"
        " {\"role\": \"tool\", \"tool_call_id\": \"x\", \"content\": \"42\", \"name\": \"calc\"},"
        " {\"role\": \"assistant\", \"tool_calls\": null, \"tool_call_id\": null},"
        " {\"role\": \"user\", \"content\": \"thanks\", \"name\": \"bob\"}]}";
    snug_api_request r;
    if (!parses(SNUG_API_CHAT, body, &r)) return;
    char *text = snug_json_dumps(r.messages, false);
    const char *want =
        "[{\"role\":\"system\",\"content\":\"s\"},"
        "{\"role\":\"user\",\"content\":\"What is 6*7?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"x\","
        "\"type\":\"function\",\"function\":{\"name\":\"calc\","
        "\"arguments\":{\"e\":\"6*7\"}}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"x\",\"content\":\"42\",\"name\":\"calc\"},"
        "{\"role\":\"assistant\",\"content\":\"\"},"
        "{\"role\":\"user\",\"content\":\"thanks\",\"name\":\"bob\"}]";
    CHECK(text && strcmp(text, want) == 0, "messages normalized:\n  got  %s\n  want %s", text,
          want);
    /* the two filled contents share one string */
    CHECK(json_object_get(json_array_get(r.messages, 2), "content") ==
              json_object_get(json_array_get(r.messages, 4), "content"),
          "one empty string");
    snug_mem_free(text);
    snug_api_request_free(&r);
}

/* A thinking model's turn sent back: under "reasoning" only (vLLM's newer
 * name, which snug sends beside reasoning_content) it is also given to the
 * template as reasoning_content, the one templates read; where both are
 * given, or only reasoning_content, nothing changes. */
static void test_chat_reasoning_sent_back(void)
{
    const char *body =
        "{\"messages\": ["
        " {\"role\": \"user\", \"content\": \"a\"},"
        " {\"role\": \"assistant\", \"content\": \"b\", \"reasoning\": \"r1\", \"reasoning_content\": null},"
        " {\"role\": \"user\", \"content\": \"c\"},"
        " {\"role\": \"assistant\", \"content\": \"d\", \"reasoning\": \"r2\", \"reasoning_content\": \"rc2\"},"
        " {\"role\": \"assistant\", \"content\": \"e\", \"reasoning_content\": \"rc3\"},"
        " {\"role\": \"user\", \"content\": \"f\"}]}";
    snug_api_request r;
    if (!parses(SNUG_API_CHAT, body, &r)) return;
    char *text = snug_json_dumps(r.messages, false);
    const char *want =
        "[{\"role\":\"user\",\"content\":\"a\"},"
        "{\"role\":\"assistant\",\"content\":\"b\",\"reasoning\":\"r1\",\"reasoning_content\":\"r1\"},"
        "{\"role\":\"user\",\"content\":\"c\"},"
        "{\"role\":\"assistant\",\"content\":\"d\",\"reasoning\":\"r2\",\"reasoning_content\":\"rc2\"},"
        "{\"role\":\"assistant\",\"content\":\"e\",\"reasoning_content\":\"rc3\"},"
        "{\"role\":\"user\",\"content\":\"f\"}]";
    CHECK(text && strcmp(text, want) == 0, "reasoning sent back:\n  got  %s\n  want %s", text, want);
    snug_mem_free(text);
    snug_api_request_free(&r);
}

#define AMSG "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]"

/* Anthropic's Messages body read as the chat it means: system first,
 * text blocks joined, thinking as the turn's reasoning, tool_use as
 * tool_calls (input as arguments), each tool_result as a tool message
 * before the user's text, tools as functions, tool_choice tool as the
 * function (and no parallel calls), stop_sequences as stop strings, and
 * thinking as enable_thinking and, where the model has a think block, a
 * budget. */
static void test_anthropic_messages(void)
{
    const char *body =
        "{\"model\": \"m\", \"max_tokens\": 9, \"system\": [{\"type\": \"text\", \"text\": \"be\"}, "
        "{\"type\": \"text\", \"text\": \"brief\"}], \"messages\": ["
        " {\"role\": \"user\", \"content\": \"weather?\"},"
        " {\"role\": \"assistant\", \"content\": [{\"type\": \"thinking\", \"thinking\": \"a tool\", \"signature\": \"s\"},"
        "  {\"type\": \"text\", \"text\": \"Checking.\"}, {\"type\": \"tool_use\", \"id\": \"toolu_1\", \"name\": \"w\","
        "  \"input\": {\"city\": \"Paris\"}}]},"
        " {\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"toolu_1\", \"content\": "
        "  [{\"type\": \"text\", \"text\": \"sunny\"}]}, {\"type\": \"text\", \"text\": \"and then?\"}]}],"
        " \"tools\": [{\"name\": \"w\", \"description\": \"the weather\", \"input_schema\": {\"type\": \"object\","
        "  \"properties\": {\"city\": {\"type\": \"string\"}}}}],"
        " \"tool_choice\": {\"type\": \"tool\", \"name\": \"w\", \"disable_parallel_tool_use\": true},"
        " \"stop_sequences\": [\"END\"], \"temperature\": 0.5, \"top_k\": 7, \"metadata\": {\"user_id\": \"u\"},"
        " \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 300}}";
    snug_api_request r;
    snug_api_limits l = limits();
    l.think_budget = true;
    snug_api_error e = {0};
    snug_status st = snug_api_parse(SNUG_API_MESSAGES, body, strlen(body), &l, &r, &e);
    CHECK(st == SNUG_OK, "the Messages body: %d %s", e.status, e.message);
    if (st != SNUG_OK) return;
    char *text = snug_json_dumps(r.messages, false);
    const char *want =
        "[{\"role\":\"system\",\"content\":\"be\\nbrief\"},"
        "{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"content\":\"Checking.\",\"reasoning_content\":\"a tool\","
        "\"tool_calls\":[{\"id\":\"toolu_1\",\"type\":\"function\",\"function\":{\"name\":\"w\","
        "\"arguments\":{\"city\":\"Paris\"}}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"toolu_1\",\"content\":\"sunny\"},"
        "{\"role\":\"user\",\"content\":\"and then?\"}]";
    CHECK(text && strcmp(text, want) == 0, "messages:\n  got  %s\n  want %s", text, want);
    snug_mem_free(text);
    CHECK(r.kind == SNUG_API_CHAT && r.dialect == SNUG_API_ANTHROPIC && !r.count_only && r.max_tokens == 9 &&
              r.stop.n_stop == 1 && r.stop.stop_len[0] == 3 && memcmp(r.stop.stop[0], "END", 3) == 0 &&
              near(r.sampling.temperature, 0.5) && r.sampling.top_k == 7,
          "max_tokens %d, %d stop strings, temperature %g, top_k %d", r.max_tokens, r.stop.n_stop,
          r.sampling.temperature, r.sampling.top_k);
    CHECK(r.tools && json_array_size(r.tools) == 1 && r.tool_choice == SNUG_TOOL_CHOICE_FUNCTION &&
              !r.parallel_tool_calls && r.grammar && strcmp(r.grammar_param, "tool_choice") == 0,
          "tools: %zu, choice %d, parallel %d", json_array_size(r.tools), (int)r.tool_choice, r.parallel_tool_calls);
    CHECK(json_is_true(json_object_get(r.chat_template_kwargs, "enable_thinking")) &&
              r.thinking_token_budget == 300,
          "thinking: enable_thinking and a budget of %d", r.thinking_token_budget);
    snug_api_request_free(&r);
    /* no think block to budget: enable_thinking alone; count_tokens takes no max_tokens */
    l.think_budget = false;
    const char *count = "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
                        "\"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 5}}";
    st = snug_api_parse(SNUG_API_MESSAGES_COUNT, count, strlen(count), &l, &r, &e);
    CHECK(st == SNUG_OK && r.count_only && r.thinking_token_budget == -1 && r.max_tokens == 0,
          "count_tokens: %s", e.message);
    snug_api_request_free(&r);
    /* Anthropic's own rules, each a 400 naming its field */
    typedef struct { snug_api_kind kind; const char *body, *param, *piece; } acase;
    static const acase bad[] = {
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", "max_tokens", "is required"},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"messages\": []}", "messages", "a non-empty list"},
        {SNUG_API_MESSAGES, "{\"max_tokens\": 1, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}", "model", "a string"},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"messages\": [{\"role\": \"system\", \"content\": \"x\"}]}",
         "messages[0].role", "top-level system"},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"messages\": [{\"role\": \"user\", \"content\": "
         "[{\"type\": \"tool_use\", \"id\": \"a\", \"name\": \"b\", \"input\": {}}]}]}", "messages[0].content[0].type",
         "a user message takes blocks"},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"messages\": [{\"role\": \"assistant\", \"content\": "
         "[{\"type\": \"tool_use\", \"id\": \"a\", \"name\": \"b\", \"input\": \"{}\"}]}]}", "messages[0].content[0].input",
         "an object"},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"temperature\": 1.5, " AMSG "}", "temperature", "from 0 to 1"},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"stop\": [\"a\"], " AMSG "}", "stop", "unknown field"},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"tool_choice\": {\"type\": \"required\"}, " AMSG "}",
         "tool_choice.type", "\"any\""},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"tools\": [{\"type\": \"bash_20250124\", \"name\": \"bash\"}], "
         AMSG "}", "tools[0].type", "server tools"},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"thinking\": {\"type\": \"enabled\"}, " AMSG "}",
         "thinking.budget_tokens", "an integer"},
        {SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 1, \"metadata\": {\"user\": 1}, " AMSG "}", "metadata.user",
         ""},
        {SNUG_API_MESSAGES_COUNT, "{\"model\": \"m\", \"max_tokens\": 1, " AMSG "}", "max_tokens", "unknown field"},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(bad); i++) check_bad(bad[i].kind, bad[i].body, bad[i].param, bad[i].piece);
}

/* A prefill: chat's continue_final_message (vLLM's) continues the last
 * message, the assistant's, with no generation prompt; Anthropic's last
 * assistant message is one, its text not ending in whitespace. */
static void test_continue_final(void)
{
    snug_api_request r;
    if (parses(SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", "
               "\"content\": \"b\"}], \"continue_final_message\": true}", &r)) {
        CHECK(r.continue_final_message && !r.add_generation_prompt, "continue_final_message, no generation prompt");
        snug_api_request_free(&r);
    }
    if (parses(SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 4, \"messages\": [{\"role\": \"user\", "
               "\"content\": \"a\"}, {\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"Once\"}]}]}",
               &r)) {
        CHECK(r.continue_final_message && !r.add_generation_prompt, "Anthropic's prefill continues");
        snug_api_request_free(&r);
    }
    check_bad(SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"continue_final_message\": true}",
              "continue_final_message", "must be the assistant's");
    check_bad(SNUG_API_CHAT, "{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\"}], \"continue_final_message\": "
              "true, \"add_generation_prompt\": true}", "continue_final_message", "add_generation_prompt false");
    check_bad(SNUG_API_MESSAGES, "{\"model\": \"m\", \"max_tokens\": 4, \"messages\": [{\"role\": \"user\", \"content\": "
              "\"a\"}, {\"role\": \"assistant\", \"content\": \"Once \"}]}", "messages[1].content", "cannot end with whitespace");
}

/* OpenAI's Responses body read as the chat it means: instructions first,
 * input items as messages (a reasoning item and the assistant's text one
 * turn, its function call joined to it, the call's output a tool
 * message), function tools as chat's, text.format as response_format,
 * max_output_tokens as max_tokens, reasoning.effort as the template's
 * reasoning_effort; the body kept for the answer; errors name the
 * Responses fields, those the chat parser finds too. */
static void test_responses(void)
{
    const char *body =
        "{\"model\": \"m\", \"instructions\": \"be brief\", \"max_output_tokens\": 7, \"input\": ["
        " {\"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"weather?\"}]},"
        " {\"type\": \"reasoning\", \"id\": \"rs_1\", \"summary\": [], \"content\": [{\"type\": \"reasoning_text\", \"text\": \"a tool\"}]},"
        " {\"type\": \"message\", \"role\": \"assistant\", \"content\": [{\"type\": \"output_text\", \"text\": \"Checking.\"}]},"
        " {\"type\": \"function_call\", \"call_id\": \"call_1\", \"name\": \"w\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"},"
        " {\"type\": \"function_call_output\", \"call_id\": \"call_1\", \"output\": \"sunny\"},"
        " {\"role\": \"user\", \"content\": \"and then?\"}],"
        " \"tools\": [{\"type\": \"function\", \"name\": \"w\", \"parameters\": {\"type\": \"object\"}, \"strict\": true}],"
        " \"tool_choice\": \"auto\", \"parallel_tool_calls\": false, \"reasoning\": {\"effort\": \"low\"},"
        " \"text\": {\"format\": {\"type\": \"json_object\"}}, \"store\": true, \"metadata\": {\"k\": \"v\"}}";
    snug_api_request r;
    snug_api_limits l = limits();
    snug_api_error e = {0};
    snug_status st = snug_api_parse(SNUG_API_RESPONSES_CREATE, body, strlen(body), &l, &r, &e);
    CHECK(st == SNUG_OK, "the Responses body: %d %s", e.status, e.message);
    if (st != SNUG_OK) return;
    char *text = snug_json_dumps(r.messages, false);
    const char *want =
        "[{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"reasoning_content\":\"a tool\",\"content\":\"Checking.\","
        "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"w\","
        "\"arguments\":{\"city\":\"Paris\"}}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"},"
        "{\"role\":\"user\",\"content\":\"and then?\"}]";
    CHECK(text && strcmp(text, want) == 0, "messages:\n  got  %s\n  want %s", text, want);
    snug_mem_free(text);
    CHECK(r.dialect == SNUG_API_RESPONSES && r.source && json_object_get(r.source, "instructions") &&
              r.max_tokens == 7 && r.tools && r.tool_choice == SNUG_TOOL_CHOICE_AUTO && !r.parallel_tool_calls &&
              r.grammar && strcmp(r.grammar_param, "response_format") == 0 &&
              strcmp(json_string_value(json_object_get(r.chat_template_kwargs, "reasoning_effort")), "low") == 0,
          "max_tokens %d, tool_choice %d, grammar from %s", r.max_tokens, (int)r.tool_choice,
          r.grammar_param ? r.grammar_param : "none");
    snug_api_request_free(&r);
    typedef struct { const char *body, *param, *piece; } rcase;
    static const rcase bad[] = {
        {"{\"input\": \"x\", \"previous_response_id\": \"resp_1\"}", "previous_response_id", "keeps no responses"},
        {"{\"model\": \"m\"}", "input", "is required"},
        {"{\"input\": []}", "input", "a non-empty list"},
        {"{\"input\": [{\"type\": \"item_reference\", \"id\": \"x\"}]}", "input[0].type", "keeps no items"},
        {"{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\"}]}]}", "input[0].content[0].type",
         "only text is taken"},
        {"{\"input\": [{\"type\": \"function_call\", \"call_id\": \"c\", \"name\": \"f\", \"arguments\": {}}]}",
         "input[0].arguments", "a JSON string"},
        {"{\"input\": \"x\", \"tools\": [{\"type\": \"web_search\"}]}", "tools[0].type", "only function tools"},
        {"{\"input\": \"x\", \"max_output_tokens\": 0}", "max_output_tokens", "[1, "},
        {"{\"input\": \"x\", \"max_tokens\": 5}", "max_tokens", "unknown field"},
        {"{\"input\": \"x\", \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"n\", \"schema\": "
         "{\"type\": \"string\", \"pattern\": \"a\"}}}}", "text.format.schema", "pattern"},
        {"{\"input\": \"x\", \"tools\": [{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"type\": "
         "\"object\", \"properties\": {\"a\": {\"format\": \"date\"}}}}], \"tool_choice\": \"required\"}",
         "tools[0].parameters", "format"},
        {"{\"input\": \"x\", \"truncation\": \"auto\"}", "truncation", "disabled"},
        {"{\"input\": \"x\", \"reasoning\": {\"effort\": \"max\"}}", "reasoning.effort", "\"high\""},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(bad); i++) check_bad(SNUG_API_RESPONSES_CREATE, bad[i].body, bad[i].param, bad[i].piece);
}

/* No field is silently ignored: an unknown one, one of the other
 * endpoint's, or one asking for what the server does not do is a 400
 * naming it. */
/* ---- bad requests ------------------------------------------------------------ */

typedef struct bad_case {
    snug_api_kind kind;
    const char *body;
    const char *param;
    const char *piece;
} bad_case;

#define C SNUG_API_COMPLETIONS
#define T SNUG_API_CHAT
#define MSG "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]"

static void run_cases(const bad_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        check_bad(cases[i].kind, cases[i].body, cases[i].param, cases[i].piece);
}

static void test_fields_refused(void)
{
    static const bad_case cases[] = {
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"frobnicate\": {\"deep\": [1]}}", "frobnicate", "unknown field"},
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"\": null}", "", "unknown field"},
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"Temperature\": 0}", "Temperature", "unknown field"},
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"messages\": []}", "messages", "/v1/completions"},
        {SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"echo\": true}", "echo",
         "/v1/chat/completions"},
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"best_of\": 3}", "best_of", "other than n"},
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"best_of\": 0}", "best_of", "at least 1"},
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"suffix\": \"end\"}", "suffix", "not supported"},
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"service_tier\": \"flex\"}", "service_tier", "auto"},
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"user\": 5}", "user", "a string"},
        {SNUG_API_COMPLETIONS, "{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": true, \"more\": 1}}",
         "stream_options.more", "unknown field"},
        {SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": 1}",
         "response_format", "an object"},
        {SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": "
                        "\"required\"}", "tool_choice", "needs tools"},
        {SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"functions\": [{}]}",
         "functions", "deprecated"},
        {SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"store\": true}", "store",
         "stored"},
        {SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"metadata\": {}}",
         "metadata", "stored"},
        {SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"modalities\": "
                        "[\"text\", \"audio\"]}", "modalities", "text"},
        {SNUG_API_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"parallel_tool_calls\": "
                        "1}", "parallel_tool_calls", "true or false"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* chat_template_kwargs (vLLM's and llama-server's: the template's extra
 * variables) and thinking_token_budget (vLLM's) read; the template's own
 * variables and a top-level enable_thinking refused, pointing to the kwargs. */
static void test_thinking_fields(void)
{
    snug_api_request r;
    if (parses(SNUG_API_CHAT, "{" MSG ", \"chat_template_kwargs\": {\"enable_thinking\": false, "
                              "\"custom\": [1, \"a\"]}, \"thinking_token_budget\": 7}", &r)) {
        const json_t *kw = r.chat_template_kwargs;
        CHECK(json_is_false(json_object_get(kw, "enable_thinking")) &&
                  json_array_size(json_object_get(kw, "custom")) == 2 && json_object_size(kw) == 2,
              "chat_template_kwargs as sent");
        CHECK(r.thinking_token_budget == 7, "thinking_token_budget %d", (int)r.thinking_token_budget);
        snug_api_request_free(&r);
    }
    if (parses(SNUG_API_CHAT, "{" MSG ", \"chat_template_kwargs\": {}, \"thinking_token_budget\": 0}", &r)) {
        CHECK(r.chat_template_kwargs == NULL, "empty kwargs: none");
        CHECK(r.thinking_token_budget == 0, "a budget of 0 closes the block at once: %d", (int)r.thinking_token_budget);
        snug_api_request_free(&r);
    }
    if (parses(SNUG_API_CHAT, "{" MSG ", \"chat_template_kwargs\": null, \"thinking_token_budget\": null}", &r)) {
        CHECK(r.chat_template_kwargs == NULL && r.thinking_token_budget == -1, "nulls: omitted");
        snug_api_request_free(&r);
    }
    if (parses(SNUG_API_CHAT, "{" MSG "}", &r)) {
        CHECK(r.chat_template_kwargs == NULL && r.thinking_token_budget == -1, "defaults: no kwargs, no budget");
        snug_api_request_free(&r);
    }
    static const bad_case cases[] = {
        {T, "{" MSG ", \"chat_template_kwargs\": [1]}", "chat_template_kwargs",
         "expected an object of template variables"},
        {T, "{" MSG ", \"chat_template_kwargs\": {\"messages\": []}}", "chat_template_kwargs.messages",
         "request's own field"},
        {T, "{" MSG ", \"chat_template_kwargs\": {\"tools\": []}}", "chat_template_kwargs.tools",
         "request's own field"},
        {T, "{" MSG ", \"chat_template_kwargs\": {\"add_generation_prompt\": false}}",
         "chat_template_kwargs.add_generation_prompt", "request's own field"},
        {T, "{" MSG ", \"thinking_token_budget\": -1}", "thinking_token_budget", "[0, 16777216]"},
        {T, "{" MSG ", \"thinking_token_budget\": 1.5}", "thinking_token_budget", "got the number 1.5"},
        {T, "{" MSG ", \"enable_thinking\": false}", "enable_thinking", "chat_template_kwargs"},
        {C, "{\"prompt\": \"x\", \"chat_template_kwargs\": {}}", "chat_template_kwargs", "unknown field"},
        {C, "{\"prompt\": \"x\", \"thinking_token_budget\": 5}", "thinking_token_budget", "unknown field"},
    };
    run_cases(cases, SNUG_ARRAY_LEN(cases));
}

/* response_format and grammar: what compiles into a grammar, and each way
 * one fails, named down to the place in the schema or grammar. */
static void test_structured(void)
{
    static const struct {
        snug_api_kind kind;
        const char *body, *from;
    } good[] = {
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_object\"}}", "response_format"},
        {C, "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
            "{\"name\": \"p-1\", \"strict\": true, \"schema\": {\"type\": \"object\", \"properties\": "
            "{\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}}}", "response_format"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\"}}}",
         "response_format"},
        {C, "{\"prompt\": \"x\", \"grammar\": \"root ::= [a-z]+ \\\"!\\\"\"}", "grammar"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"text\"}, \"grammar\": \"root ::= \\\"a\\\"\"}", "grammar"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"text\"}}", NULL},
        {C, "{\"prompt\": \"x\", \"json_schema\": {\"type\": \"object\"}}", "json_schema"},
        {C, "{\"prompt\": \"x\", \"guided_json\": \"{\\\"type\\\": \\\"integer\\\"}\"}", "guided_json"},
        {T, "{" MSG ", \"guided_json\": {\"enum\": [1, 2]}}", "guided_json"},
        {C, "{\"prompt\": \"x\", \"guided_choice\": [\"yes\", \"no \\\"really\\\"\", \"\\u00e9t\\u00e9\"]}", "guided_choice"},
        {C, "{\"prompt\": \"x\", \"guided_grammar\": \"root ::= [0-9]+\"}", "guided_grammar"},
        {T, "{" MSG ", \"structured_outputs\": {\"json\": {\"type\": \"array\"}}}", "structured_outputs.json"},
        {C, "{\"prompt\": \"x\", \"structured_outputs\": {\"choice\": [\"a\", \"b\"]}}", "structured_outputs.choice"},
        {C, "{\"prompt\": \"x\", \"structured_outputs\": {\"grammar\": \"root ::= \\\"a\\\"\"}}",
         "structured_outputs.grammar"},
        {C, "{\"prompt\": \"x\", \"structured_outputs\": {\"json_object\": true}}", "structured_outputs.json_object"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snug_api_request r;
        snug_api_error e = {0};
        snug_api_limits l = limits();
        snug_status st = snug_api_parse(good[i].kind, good[i].body, strlen(good[i].body), &l, &r, &e);
        CHECK(st == SNUG_OK, "%s: %s", good[i].body, e.message);
        if (st != SNUG_OK) continue;
        CHECK(good[i].from ? r.grammar && r.grammar->n_rules > 0 && strcmp(r.grammar_param, good[i].from) == 0
                           : r.grammar == NULL,
              "%s: grammar %p from %s", good[i].body, (void *)r.grammar, r.grammar_param ? r.grammar_param : "-");
        snug_api_request_free(&r);
    }
    static const bad_case bad[] = {
        {T, "{" MSG ", \"response_format\": {\"type\": \"xml\"}}", "response_format.type", "\"json_schema\""},
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_object\", \"schema\": {}}}",
         "response_format.schema", "unknown field"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_schema\"}}", "response_format.json_schema",
         "required"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"a b\"}}}",
         "response_format.json_schema.name", "letters, digits"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"strict\": \"yes\"}}}",
         "response_format.json_schema.strict", "true or false"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schemas\": {}}}}",
         "response_format.json_schema.schemas", "unknown field"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": []}}}",
         "response_format.json_schema.schema", "a JSON schema"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": false}}}",
         "response_format.json_schema.schema", "no value"},
        {C, "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": "
            "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"string\", \"pattern\": \"^a\"}}}}}}",
         "response_format.json_schema.schema", "properties.id"},
        {C, "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": "
            "{\"$ref\": \"#/$defs/missing\"}}}}", "response_format.json_schema.schema", "missing"},
        {C, "{\"prompt\": \"x\", \"grammar\": \"root ::= item\\nitem ::= [a-\"}", "grammar", "line 2"},
        {C, "{\"prompt\": \"x\", \"grammar\": \"root ::= undefined\"}", "grammar", "undefined"},
        {C, "{\"prompt\": \"x\", \"grammar\": \"root ::= root \\\"a\\\"\"}", "grammar", "left"},
        {C, "{\"prompt\": \"x\", \"grammar\": \"\"}", "grammar", "non-empty"},
        {C, "{\"prompt\": \"x\", \"grammar\": 5}", "grammar", "GBNF"},
        {T, "{" MSG ", \"response_format\": {\"type\": \"json_object\"}, \"grammar\": \"root ::= \\\"a\\\"\"}",
         "grammar", "one constraint"},
        {C, "{\"prompt\": \"x\", \"guided_json\": {\"type\": \"integer\"}, \"guided_choice\": [\"a\"]}", "guided_choice",
         "guided_json gives one already"},
        {C, "{\"prompt\": \"x\", \"guided_regex\": \"[a-z]+\"}", "guided_regex", "regular expression"},
        {C, "{\"prompt\": \"x\", \"guided_choice\": []}", "guided_choice", "a list of 1 to 1024 strings"},
        {C, "{\"prompt\": \"x\", \"guided_choice\": [\"a\", 3]}", "guided_choice[1]", "a non-empty string"},
        {C, "{\"prompt\": \"x\", \"guided_json\": \"{\\\"type\\\": \"}", "guided_json", "JSON schema's text"},
        {C, "{\"prompt\": \"x\", \"guided_json\": {\"type\": \"string\", \"format\": \"date\"}}", "guided_json",
         "format"},
        {C, "{\"prompt\": \"x\", \"guided_grammar\": \"root ::= x\"}", "guided_grammar", "guided_grammar: line 1"},
        {C, "{\"prompt\": \"x\", \"structured_outputs\": {\"regex\": \"a\"}}", "structured_outputs.regex",
         "regular expression"},
        {C, "{\"prompt\": \"x\", \"structured_outputs\": {\"json\": {}, \"choice\": [\"a\"]}}", "structured_outputs",
         "one of json"},
        {C, "{\"prompt\": \"x\", \"structured_outputs\": {\"xml\": 1}}", "structured_outputs.xml", "unknown field"},
        {C, "{\"prompt\": \"x\", \"json_schema\": [1]}", "json_schema", "a JSON schema"},
        /* 60 optional bytes in a row: a place that begins more alternatives than a matcher follows */
        {C, "{\"prompt\": \"x\", \"grammar\": \"root ::= x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x "
            "x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x \\\"z\\\"\\nx ::= \\\"a\\\"?\"}",
         "grammar", "can begin 61 alternatives at once"},
    };
    run_cases(bad, sizeof bad / sizeof bad[0]);
}

/* Whether text is a whole match of g. */
static bool grammar_matches(const snug_grammar *g, const char *text)
{
    enum { STACKS = 64, DEPTH = 64 };
    void *mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_gmatch_bytes(STACKS, DEPTH), NULL);
    snug_gmatch m;
    snug_error err = {0};
    bool ok = mem && snug_gmatch_start(&m, mem, STACKS, DEPTH, g, &err) == SNUG_OK &&
              snug_gmatch_advance_bytes(&m, text, strlen(text), NULL) == SNUG_GMATCH_OK && snug_gmatch_accepting(&m);
    snug_mem_free(mem);
    return ok;
}

/* A request parsed under a model's chat template takes the tool-call
 * format the template shows (snug_api_limits_set_template, as the server
 * does at start): Qwen2.5's <tool_call> (Hermes) and Mistral v0.3's
 * [TOOL_CALLS]; a required call is constrained to that format, and no
 * longer to plain JSON. */
static void test_tool_format_from_template(void)
{
    static const char BODY[] =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"required\", "
        "\"parallel_tool_calls\": false, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"add\", "
        "\"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, "
        "\"required\": [\"a\"], \"additionalProperties\": false}}}]}";
    static const char CALL[] = "{\"name\": \"add\", \"arguments\": {\"a\": 7}}";
    static const struct {
        const char *config;
        snug_tool_style style;
        const char *call_text; /* the one call in the format */
    } cases[] = {
        {"qwen2.5", SNUG_TOOLS_HERMES, "<tool_call>\n%s\n</tool_call>"},
        {"mistral-v0.3", SNUG_TOOLS_MISTRAL, "[TOOL_CALLS] [%s]"},
        {"tinyllama-1.1b-chat", SNUG_TOOLS_JSON, "%s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256], text[256];
        snprintf(path, sizeof path, "tests/data/chat/%s.tokenizer_config.json", cases[i].config);
        json_error_t je;
        json_t *c = json_load_file(path, JSON_DECODE_INT_AS_REAL, &je);
        const char *tpl = json_string_value(json_object_get(c, "chat_template"));
        CHECK(tpl, "%s: a chat template (%s)", path, je.text);
        snug_api_limits l = limits();
        snug_api_limits_set_template(&l, tpl);
        snug_api_request r;
        snug_api_error e = {0};
        snug_status st = snug_api_parse(SNUG_API_CHAT, BODY, strlen(BODY), &l, &r, &e);
        CHECK(st == SNUG_OK, "%s: %s", cases[i].config, e.message);
        json_decref(c);
        if (st != SNUG_OK) continue;
        CHECK(r.tool_format && r.tool_format->style == cases[i].style, "%s: tool format %s", cases[i].config,
              r.tool_format ? r.tool_format->name : "none");
        CHECK(r.grammar && strcmp(r.grammar_param, "tool_choice") == 0, "%s: a grammar from tool_choice",
              cases[i].config);
        snprintf(text, sizeof text, cases[i].call_text, CALL);
        CHECK(r.grammar && grammar_matches(r.grammar, text), "%s: the grammar takes %s", cases[i].config, text);
        if (cases[i].style != SNUG_TOOLS_JSON)
            CHECK(r.grammar && !grammar_matches(r.grammar, CALL), "%s: the grammar refuses plain JSON %s",
                  cases[i].config, CALL);
        snug_api_request_free(&r);
    }
    snug_api_limits l = limits();
    CHECK(l.tool_format && l.tool_format->style == SNUG_TOOLS_JSON, "the default format is plain JSON");
    snug_api_limits_set_template(&l, NULL);
    CHECK(l.tool_format && l.tool_format->style == SNUG_TOOLS_JSON, "no template: plain JSON");
}

static void test_wrong_types(void)
{
    static const bad_case cases[] = {
        {C, "{\"prompt\": \"x\", \"temperature\": \"hot\"}", "temperature",
         "expected a number in [0, 2], got the string \"hot\""},
        {C, "{\"prompt\": \"x\", \"n\": 1.5}", "n", "expected an integer in [1, 16], got the number 1.5"},
        {C, "{\"prompt\": \"x\", \"stream\": 1}", "stream", "expected true or false, got the integer 1"},
        {C, "{\"prompt\": \"x\", \"stop\": 3}", "stop", "got the integer 3"},
        {T, "{\"messages\": {}}", "messages", "expected a non-empty list of messages, got an object"},
        {C, "{\"prompt\": \"x\", \"model\": 5}", "model", "expected a string"},
        {C, "{\"prompt\": \"x\", \"top_k\": \"5\"}", "top_k", "expected an integer in [-1, 2147483647]"},
        {C, "{\"prompt\": \"x\", \"seed\": 1.5}", "seed", "expected an integer, got the number 1.5"},
        {C, "{\"prompt\": \"x\", \"seed\": true}", "seed", "got true"},
        {C, "{\"prompt\": \"x\", \"logit_bias\": [1]}", "logit_bias", "got an array of 1"},
        {C, "{\"prompt\": \"x\", \"logit_bias\": {\"5\": \"up\"}}", "logit_bias",
         "token 5: expected a bias in [-100, 100], got the string \"up\""},
        {C, "{\"prompt\": \"x\", \"stop_token_ids\": 5}", "stop_token_ids", "a list of at most 8"},
        {C, "{\"prompt\": \"x\", \"stop_token_ids\": [\"5\"]}", "stop_token_ids[0]",
         "expected a token id in [0, 1000)"},
        {C, "{\"prompt\": \"x\", \"ignore_eos\": \"yes\"}", "ignore_eos", "true or false"},
        {C, "{\"prompt\": \"x\", \"echo\": 0}", "echo", "true or false"},
        {C, "{\"prompt\": \"x\", \"return_tokens_as_token_ids\": \"yes\"}", "return_tokens_as_token_ids", "true or false"},
        {C, "{\"prompt\": \"x\", \"stream_options\": true}", "stream_options", "expected an object"},
        {C, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": {\"include_usage\": 1}}",
         "stream_options.include_usage", "true or false"},
        {C, "{\"prompt\": \"x\", \"logprobs\": true}", "logprobs", "an integer in [0, 20], got true"},
        {T, "{" MSG ", \"logprobs\": 2}", "logprobs", "true or false"},
        {T, "{" MSG ", \"top_logprobs\": \"2\"}", "top_logprobs", "an integer in [0, 20]"},
        {T, "{" MSG ", \"add_generation_prompt\": \"no\"}", "add_generation_prompt", "true or false"},
        {C, "{\"prompt\": \"x\", \"max_tokens\": \"10\"}", "max_tokens", "got the string \"10\""},
        {T, "{" MSG ", \"max_completion_tokens\": []}", "max_completion_tokens", "got an array"},
        {C, "{\"prompt\": \"x\", \"min_p\": {}}", "min_p", "got an object"},
        {C, "{\"prompt\": \"x\", \"repetition_penalty\": false}", "repetition_penalty", "got false"},
    };
    run_cases(cases, SNUG_ARRAY_LEN(cases));
}

static void test_out_of_range(void)
{
    static const bad_case cases[] = {
        {C, "{\"prompt\": \"x\", \"max_tokens\": 0}", "max_tokens",
         "expected an integer in [1, 16777216], got the integer 0"},
        {C, "{\"prompt\": \"x\", \"max_tokens\": -5}", "max_tokens", "[1, 16777216]"},
        {C, "{\"prompt\": \"x\", \"max_tokens\": 16777217}", "max_tokens", "16777217"},
        {C, "{\"prompt\": \"x\", \"max_tokens\": 1e30}", "max_tokens", "[1, 16777216]"},
        {T, "{" MSG ", \"max_tokens\": 5, \"max_completion_tokens\": 0}", "max_completion_tokens",
         "got the integer 0"},
        {T, "{" MSG ", \"max_tokens\": 0, \"max_completion_tokens\": 5}", "max_tokens", "[1, "},
        {C, "{\"prompt\": \"x\", \"temperature\": 2.5}", "temperature", "[0, 2], got the number 2.5"},
        {C, "{\"prompt\": \"x\", \"temperature\": -0.1}", "temperature", "[0, 2]"},
        {C, "{\"prompt\": \"x\", \"top_p\": 0}", "top_p", "expected a number in (0, 1], got the integer 0"},
        {C, "{\"prompt\": \"x\", \"top_p\": 1.01}", "top_p", "(0, 1]"},
        {C, "{\"prompt\": \"x\", \"top_p\": 1e-300}", "top_p", "(0, 1], got 0"}, /* 0 as a float */
        {C, "{\"prompt\": \"x\", \"top_k\": -2}", "top_k", "an integer in [-1, 2147483647], got the integer -2"},
        {C, "{\"prompt\": \"x\", \"top_k\": 3000000000}", "top_k", "got the integer 3000000000"},
        {C, "{\"prompt\": \"x\", \"min_p\": 1.5}", "min_p", "[0, 1]"},
        {C, "{\"prompt\": \"x\", \"repetition_penalty\": 0}", "repetition_penalty", "(0, 2]"},
        {C, "{\"prompt\": \"x\", \"repetition_penalty\": 2.01}", "repetition_penalty", "(0, 2]"},
        {C, "{\"prompt\": \"x\", \"frequency_penalty\": -2.5}", "frequency_penalty", "[-2, 2]"},
        {C, "{\"prompt\": \"x\", \"presence_penalty\": 3}", "presence_penalty", "[-2, 2]"},
        {C, "{\"prompt\": \"x\", \"seed\": 1e300}", "seed", "expected an integer"},
        {C, "{\"prompt\": \"x\", \"logit_bias\": {\"5\": 101}}", "logit_bias", "token 5: expected a bias in [-100, 100]"},
        {C, "{\"prompt\": \"x\", \"logit_bias\": {\"1000\": 1}}", "logit_bias",
         "the key \"1000\" is not a token id in [0, 1000)"},
        {C, "{\"prompt\": \"x\", \"logit_bias\": {\"-1\": 1}}", "logit_bias", "\"-1\" is not a token id"},
        {C, "{\"prompt\": \"x\", \"logit_bias\": {\"05\": 1}}", "logit_bias", "\"05\" is not a token id"},
        {C, "{\"prompt\": \"x\", \"logit_bias\": {\"\": 1}}", "logit_bias", "\"\" is not a token id"},
        {C, "{\"prompt\": \"x\", \"logit_bias\": {\"99999999999999999999\": 1}}", "logit_bias", "is not a token id"},
        {C, "{\"prompt\": \"x\", \"n\": 0}", "n", "[1, 16]"},
        {C, "{\"prompt\": \"x\", \"n\": 17}", "n", "[1, 16], got the integer 17"},
        {C, "{\"prompt\": \"x\", \"logprobs\": 21}", "logprobs", "[0, 20]"},
        {C, "{\"prompt\": \"x\", \"logprobs\": -1}", "logprobs", "[0, 20]"},
        {T, "{" MSG ", \"logprobs\": true, \"top_logprobs\": 21}", "top_logprobs", "[0, 20]"},
        {T, "{" MSG ", \"top_logprobs\": 2}", "top_logprobs", "only accepted when logprobs is true"},
        {T, "{" MSG ", \"logprobs\": false, \"top_logprobs\": 0}", "top_logprobs", "logprobs is true"},
        {C, "{\"prompt\": \"x\", \"stop\": \"\"}", "stop", "a non-empty string of at most 256 bytes"},
        {C, "{\"prompt\": \"x\", \"stop\": [\"a\", \"\"]}", "stop[1]", "got the string \"\""},
        {C, "{\"prompt\": \"x\", \"stop\": [\"a\", 5]}", "stop[1]", "got the integer 5"},
        {C, "{\"prompt\": \"x\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", "stop",
         "has 5 strings; at most 4"},
        {C, "{\"prompt\": \"x\", \"stop_token_ids\": [1, 1000]}", "stop_token_ids[1]",
         "[0, 1000), got the integer 1000"},
        {C, "{\"prompt\": \"x\", \"stop_token_ids\": [-1]}", "stop_token_ids[0]", "got the integer -1"},
        {C, "{\"prompt\": \"x\", \"stop_token_ids\": [1,2,3,4,5,6,7,8,9]}", "stop_token_ids",
         "a list of at most 8 token ids, got an array of 9"},
    };
    run_cases(cases, SNUG_ARRAY_LEN(cases));

    /* A stop string of 257 bytes, and one of exactly 256 that is accepted. */
    char body[700], s[300];
    memset(s, 'a', 257);
    s[257] = '\0';
    snprintf(body, sizeof body, "{\"prompt\": \"x\", \"stop\": [\"%s\"]}", s);
    check_bad(C, body, "stop[0]", "at most 256 bytes");
    s[256] = '\0';
    snprintf(body, sizeof body, "{\"prompt\": \"x\", \"stop\": [\"%s\"]}", s);
    snug_api_request r;
    if (parses(C, body, &r)) {
        CHECK(r.stop.n_stop == 1 && r.stop.stop_len[0] == 256, "a 256-byte stop string");
        snug_api_request_free(&r);
    }
}

static void test_bad_prompts(void)
{
    static const bad_case cases[] = {
        {C, "{}", "prompt", "is required"},
        {C, "{\"prompt\": null}", "prompt", "is required"},
        {C, "{\"prompt\": \"\"}", "prompt", "expected a non-empty string, got the string \"\""},
        {C, "{\"prompt\": []}", "prompt", "got an array of 0"},
        {C, "{\"prompt\": 5}", "prompt", "a list of lists of token ids, got the integer 5"},
        {C, "{\"prompt\": {}}", "prompt", "got an object"},
        {C, "{\"prompt\": [\"a\", \"\"]}", "prompt[1]", "a non-empty string"},
        {C, "{\"prompt\": [\"a\", 5]}", "prompt[1]", "a non-empty string (as prompt[0] is), got the integer 5"},
        {C, "{\"prompt\": [1, -1]}", "prompt[1]", "a token id in [0, 1000), got the integer -1"},
        {C, "{\"prompt\": [1, 1000]}", "prompt[1]", "got the integer 1000"},
        {C, "{\"prompt\": [1, \"a\"]}", "prompt[1]", "a token id"},
        {C, "{\"prompt\": [1.5]}", "prompt[0]", "a token id in [0, 1000), got the number 1.5"},
        {C, "{\"prompt\": [[1], []]}", "prompt[1]", "a non-empty list of token ids, got an array of 0"},
        {C, "{\"prompt\": [[1], [2, 5000]]}", "prompt[1][1]", "got the integer 5000"},
        {C, "{\"prompt\": [[1], 2]}", "prompt[1]", "a list of token ids (as prompt[0] is)"},
        {C, "{\"prompt\": [{}]}", "prompt[0]", "a string, a token id or a list of token ids"},
        {C, "{\"prompt\": [null]}", "prompt[0]", "got null"},
        {C, "{\"prompt\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\","
            "\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}",
         "prompt", "is a list of 17 prompts; at most 16"},
    };
    run_cases(cases, SNUG_ARRAY_LEN(cases));
}

static void test_bad_messages(void)
{
    static const bad_case cases[] = {
        {T, "{}", "messages", "is required"},
        {T, "{\"messages\": null}", "messages", "is required"},
        {T, "{\"messages\": []}", "messages", "got an array of 0"},
        {T, "{\"messages\": \"hi\"}", "messages", "got the string \"hi\""},
        {T, "{\"messages\": [5]}", "messages[0]", "an object with a role and content"},
        {T, "{\"messages\": [{\"content\": \"x\"}]}", "messages[0].role", "is required"},
        {T, "{" MSG ", \"x\": 1, \"messages\": 2}", "", "duplicate"},
        {T, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"robot\","
            " \"content\": \"x\"}]}",
         "messages[1].role", "\"system\", \"developer\", \"user\", \"assistant\", \"tool\", got the string \"robot\""},
        {T, "{\"messages\": [{\"role\": 1, \"content\": \"x\"}]}", "messages[0].role", "got the integer 1"},
        {T, "{\"messages\": [{\"role\": \"user\"}]}", "messages[0].content",
         "is required for a message of role \"user\""},
        {T, "{\"messages\": [{\"role\": \"system\", \"content\": null}]}", "messages[0].content", "is required"},
        {T, "{\"messages\": [{\"role\": \"tool\"}]}", "messages[0].content", "\"tool\""},
        {T, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages[0].content",
         "a string or a list of text parts, got the integer 5"},
        {T, "{\"messages\": [{\"role\": \"user\", \"content\": [\"x\"]}]}", "messages[0].content[0]",
         "got the string \"x\""},
        {T, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\","
            " \"image_url\": {\"url\": \"x\"}}]}]}",
         "messages[0].content[0].type", "only text content is supported, got the type \"image_url\""},
        {T, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"text\": \"x\"}]}]}",
         "messages[0].content[0].type", "got nothing"},
        {T, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"},"
            " {\"type\": \"text\", \"text\": 7}]}]}",
         "messages[0].content[1].text", "expected a string, got the integer 7"},
        {T, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}",
         "messages[0].content[0].text", "got nothing"},
        /* fields a template prints as strings */
        {T, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"name\": 3}]}",
         "messages[0].name", "expected a string, got the integer 3"},
        {T, "{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\", \"reasoning\": 3}]}",
         "messages[0].reasoning", "expected a string, got the integer 3"},
        {T, "{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\", \"reasoning_content\": [\"r\"]}]}",
         "messages[0].reasoning_content", "expected a string, got an array"},
        {T, "{\"messages\": [{\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": 7}]}",
         "messages[0].tool_call_id", "expected a string, got the integer 7"},
        {T, "{\"messages\": [{\"role\": \"tool\", \"content\": null, \"tool_call_id\": \"x\"}]}",
         "messages[0].content", "is required for a message of role \"tool\""},
        {T, "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": {}}]}",
         "messages[0].tool_calls", "expected a list of tool calls, got an object"},
        {T, "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [null]}]}",
         "messages[0].tool_calls[0]", "expected an object {\"type\": \"function\", \"function\": {...}}, got null"},
        {T, "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": 1,"
            " \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}]}",
         "messages[0].tool_calls[0].id", "expected a string, got the integer 1"},
        {T, "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"x\"}]}]}",
         "messages[0].tool_calls[0].function", "expected an object {\"name\": ..., \"arguments\": ...}, got nothing"},
        {T, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\","
            " \"content\": null, \"tool_calls\": [{\"function\": {\"name\": null, \"arguments\": \"{}\"}}]}]}",
         "messages[1].tool_calls[0].function.name", "expected a string, got null"},
        {T, "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\":"
            " {\"name\": \"f\", \"arguments\": {\"a\": 1}}}]}]}",
         "messages[0].tool_calls[0].function.arguments", "expected a string, got an object"},
    };
    run_cases(cases, SNUG_ARRAY_LEN(cases));
}

/* ---- bad bodies ----------------------------------------------------------------- */

static void test_bad_bodies(void)
{
    snug_api_limits l = limits();
    check_bad_n(C, "", 0, &l, 400, "", "the request body is empty");
    check_bad_n(C, NULL, 0, &l, 400, "", "empty");
    check_bad(C, "{\"prompt\": \"x\xff\"}", "", "not valid UTF-8");
    check_bad(C, "{\"prompt\": \"\xed\xa0\x80\"}", "", "not valid UTF-8"); /* a surrogate */
    check_bad(C, "[1,2]", "", "the body is not a JSON object: got an array of 2");
    check_bad(T, "\"hi\"", "", "the body is not valid JSON: line 1, column 4: '[' or '{' expected");
    check_bad(C, "{\"prompt\": \"x\", \"prompt\": \"y\"}", "", "duplicate");
    check_bad(C, "{\"prompt\": \"x\",}", "", "the body is not valid JSON: line 1, column");
    check_bad(C, "{\"prompt\": \"x\"", "", "not valid JSON");
    check_bad(C, "{\"prompt\": \"x\", \"temperature\": 1e999}", "", "not valid JSON");
    check_bad(C, "{\"prompt\": \"x\", \"seed\": 99999999999999999999}", "", "not valid JSON");
    check_bad(C, "{\"prompt\": \"\\u0000\"}", "", "not valid JSON");
    check_bad(C, "   ", "", "not valid JSON");
    /* jansson's "near '...'" cuts a character in two: the message is mended. */
    check_bad(C, "{\"prompt\": \"d\\u00e\xc7\x99\"}", "", "not valid JSON");

    /* 10,000 nested brackets: rejected by the scan, quickly, before jansson. */
    size_t n = 10000;
    char *deep = malloc(2 * n + 1);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    double t0 = snug_now_seconds();
    check_bad(C, deep, "", "nests arrays and objects more than 64 deep");
    memset(deep, '{', n); /* unbalanced and invalid too, but deep first */
    check_bad(T, deep, "", "more than 64 deep");
    double dt = snug_now_seconds() - t0;
    CHECK(dt < 0.05, "the depth checks took %.3f s", dt);
    free(deep);

    /* Brackets inside strings (and escaped quotes) do not count. */
    char body[400];
    snprintf(body, sizeof body, "{\"prompt\": \"%s\\\"%s\", \"stop_token_ids\": [1]}",
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
             "{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{");
    snug_api_request r;
    if (parses(C, body, &r)) snug_api_request_free(&r);
    /* Exactly at the limit passes the scan; one more fails. */
    l.max_depth = 5;
    const char *at5 = "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}]}]}";
    snug_api_error e;
    CHECK(snug_api_parse(T, at5, strlen(at5), &l, &r, &e) == SNUG_OK, "depth 5: %s", e.message);
    snug_api_request_free(&r);
    const char *at6 = "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\","
                      " \"more\": [1]}]}]}";
    check_bad_n(T, at6, strlen(at6), &l, 400, "", "more than 5 deep");

    /* A body of 2 MiB with the default limit of 1 MiB is a 413. */
    size_t big = 2u << 20;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    memcpy(huge, "{\"prompt\": \"x\"}", 15);
    l = limits();
    check_bad_n(C, huge, big, &l, 413, "", "the request body is 2097152 bytes; at most 1048576");
    snug_api_error e2;
    snug_api_parse(C, huge, big, &l, &r, &e2);
    CHECK(e2.code && strcmp(e2.code, "body_too_large") == 0, "code %s", e2.code);
    check_bad_n(C, huge, (1u << 20) + 1, &l, 413, "", "1048577 bytes");
    CHECK(snug_api_parse(C, huge, 1u << 20, &l, &r, &e2) == SNUG_OK, "1 MiB exactly: %s",
          e2.message);
    snug_api_request_free(&r);
    free(huge);
}

static void test_model_length(void)
{
    snug_api_limits l = limits();
    l.max_model_len = 4096;
    const char *body = "{\"prompt\": \"x\", \"max_tokens\": 5000}";
    check_bad_n(C, body, strlen(body), &l, 400, "max_tokens",
                "is 5000, more than the model's context of 4096 tokens");
    const char *chat = "{" MSG ", \"max_completion_tokens\": 4097}";
    check_bad_n(T, chat, strlen(chat), &l, 400, "max_completion_tokens", "4096 tokens");
    snug_api_request r;
    snug_api_error e;
    const char *fits = "{\"prompt\": \"x\", \"max_tokens\": 4096}";
    CHECK(snug_api_parse(C, fits, strlen(fits), &l, &r, &e) == SNUG_OK && r.max_tokens == 4096,
          "max_tokens = the model length: %s", e.message);
    snug_api_request_free(&r);

    /* Other limits follow lim. */
    l.max_n = 2;
    l.max_prompts = 2;
    const char *n3 = "{\"prompt\": \"x\", \"n\": 3}";
    check_bad_n(C, n3, strlen(n3), &l, 400, "n", "[1, 2]");
    const char *p3 = "{\"prompt\": [[1], [2], [3]]}";
    check_bad_n(C, p3, strlen(p3), &l, 400, "prompt", "is a list of 3 prompts; at most 2");
}

static void test_logit_bias_limit(void)
{
    char *body = malloc(8192);
    size_t n = (size_t)snprintf(body, 8192, "{\"prompt\": \"x\", \"logit_bias\": {");
    for (int i = 0; i < 301; i++)
        n += (size_t)snprintf(body + n, 8192 - n, "%s\"%d\": 1", i ? ", " : "", i);
    snprintf(body + n, 8192 - n, "}}");
    check_bad(C, body, "logit_bias", "has 301 entries; at most 300");
    char *cut = strstr(body, ", \"300\": 1");
    snprintf(cut, 8, "}}");
    snug_api_request r;
    if (parses(C, body, &r)) {
        CHECK(r.sampling.n_logit_bias == 300 && r.logit_bias[299].id == 299, "300 entries");
        snug_api_request_free(&r);
    }
    free(body);
}

/* Error messages stay valid UTF-8 when a long value is cut short. */
static void test_messages_utf8(void)
{
    char body[1200], s[700] = "";
    for (int i = 0; i < 200; i++) strcat(s, "\xc3\xa9"); /* é */
    snprintf(body, sizeof body, "{\"prompt\": \"x\", \"temperature\": \"%s\"}", s);
    check_bad(C, body, "temperature", "got the string \"");
    snprintf(body, sizeof body,
             "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"%s\"}]}]}", s);
    check_bad(T, body, "messages[0].content[0].type", "only text content");
    snprintf(body, sizeof body, "{\"prompt\": \"x\", \"logit_bias\": {\"%s\": 1}}", s);
    check_bad(C, body, "logit_bias", "is not a token id");
    /* a client's control bytes are shown escaped, never raw */
    check_bad(C, "{\"prompt\": \"x\", \"temperature\": \"\\u001b[31mhot\"}", "temperature",
              "got the string \"\\x1b[31mhot\"");
    check_bad(T, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"\\u001b]0;x\\u0007\"}]}]}",
              "messages[0].content[0].type", "got the type \"\\x1b]0;x\\x07\"");
    check_bad(C, "{\"prompt\": \"x\", \"logit_bias\": {\"\\u001b[2J\": 1}}", "logit_bias",
              "the key \"\\x1b[2J\" is not a token id");
}

/* err and lim may be NULL. */
static void test_null_err_and_limits(void)
{
    snug_api_request r;
    const char *bad = "{\"prompt\": \"x\", \"n\": 0}";
    CHECK(snug_api_parse(C, bad, strlen(bad), NULL, &r, NULL) == SNUG_INVALID, "bad, no err");
    CHECK(r.root == NULL, "zeroed");
    const char *good = "{\"prompt\": [2000000000]}"; /* the default n_vocab is INT32_MAX */
    CHECK(snug_api_parse(C, good, strlen(good), NULL, &r, NULL) == SNUG_OK &&
              r.prompts[0].ids[0] == 2000000000,
          "good, no err, no limits");
    snug_api_request_free(&r);
    snug_api_limits d;
    snug_api_limits_default(&d);
    CHECK(d.max_body_bytes == 1u << 20 && d.max_depth == 64 && d.n_vocab == INT32_MAX &&
              d.max_n == 16 && d.max_prompts == 16 && d.max_model_len == 0,
          "defaults");
}

/* ---- out of memory ---------------------------------------------------------------- */

typedef struct oom_ctx {
    snug_api_kind kind;
    char *body;
    snug_api_request r;
} oom_ctx;

static snug_status oom_parse(void *ctx, snug_error *err)
{
    oom_ctx *c = ctx;
    snug_api_limits l = limits();
    snug_api_error e;
    snug_status st = snug_api_parse(c->kind, c->body, strlen(c->body), &l, &c->r, &e);
    if (st == SNUG_OK) return SNUG_OK;
    CHECK(st == SNUG_NOMEM && e.status == 503 && e.code && strcmp(e.code, "overloaded") == 0 &&
              strcmp(e.type, "server_error") == 0 && e.param[0] == '\0',
          "%s: status %d, code %s: %s", snug_status_str(st), e.status, e.code, e.message);
    CHECK(c->r.root == NULL && c->r.prompts == NULL && c->r.logit_bias == NULL, "zeroed");
    return snug_errorf(err, st, "%s", e.message);
}

static void oom_free(void *ctx) { snug_api_request_free(&((oom_ctx *)ctx)->r); }

/* Embeddings' and rerank's bodies: the inputs as completions' prompt
 * shapes (texts, ids), documents as strings or {"text": ...}, the limits
 * and every bad field named. */
static void test_embeddings_and_rerank(void)
{
    snug_api_request r;
    if (parses(SNUG_API_EMBEDDINGS, "{\"input\": [[1, 2], [3]], \"encoding_format\": \"base64\", \"dimensions\": 8}",
               &r)) {
        CHECK(r.kind == SNUG_API_EMBEDDINGS && r.n_prompts == 2 && r.prompts[1].n_ids == 1 && r.prompts[1].ids[0] == 3 &&
                  r.base64 && r.dimensions == 8, "embeddings of two id lists, base64");
        snug_api_request_free(&r);
    }
    if (parses(SNUG_API_RERANK, "{\"query\": \"q\", \"documents\": [\"a\", {\"text\": \"bc\"}], \"top_n\": 5}", &r)) {
        CHECK(r.kind == SNUG_API_RERANK && r.n_prompts == 2 && r.prompts[1].text_len == 2 && r.query_len == 1 &&
                  r.top_n == 2 && r.return_documents, "rerank: top_n at most the documents (%d)", r.top_n);
        snug_api_request_free(&r);
    }
    static const bad_case bad[] = {
        {SNUG_API_EMBEDDINGS, "{\"model\": \"m\"}", "input", "is required"},
        {SNUG_API_EMBEDDINGS, "{\"input\": \"\"}", "input", "a non-empty string"},
        {SNUG_API_EMBEDDINGS, "{\"input\": [\"a\", 1]}", "input[1]", "as input[0] is"},
        {SNUG_API_EMBEDDINGS, "{\"input\": [99999]}", "input[0]", "a token id in [0, 1000)"},
        {SNUG_API_EMBEDDINGS, "{\"input\": \"a\", \"encoding_format\": \"int8\"}", "encoding_format", "base64"},
        {SNUG_API_EMBEDDINGS, "{\"input\": \"a\", \"dimensions\": 0}", "dimensions", "[1, "},
        {SNUG_API_EMBEDDINGS, "{\"input\": \"a\", \"prompt\": \"b\"}", "prompt", "unknown field"},
        {SNUG_API_RERANK, "{\"documents\": [\"a\"]}", "query", "a non-empty string"},
        {SNUG_API_RERANK, "{\"query\": \"q\", \"documents\": \"a\"}", "documents", "a non-empty list"},
        {SNUG_API_RERANK, "{\"query\": \"q\", \"documents\": [{\"text\": \"a\", \"title\": \"t\"}]}", "documents[0]",
         "its text alone"},
        {SNUG_API_RERANK, "{\"query\": \"q\", \"documents\": [1]}", "documents[0]", "a string"},
        {SNUG_API_RERANK, "{\"query\": \"q\", \"documents\": [\"a\"], \"top_n\": 0}", "top_n", "[1, "},
        {SNUG_API_RERANK, "{\"query\": \"q\", \"documents\": [\"a\"], \"texts\": []}", "texts", "unknown field"},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(bad); i++) check_bad(bad[i].kind, bad[i].body, bad[i].param, bad[i].piece);
    /* more inputs than the limit */
    snug_api_limits l = limits();
    l.max_inputs = 2;
    const char *three = "{\"input\": [\"a\", \"b\", \"c\"]}";
    check_bad_n(SNUG_API_EMBEDDINGS, three, strlen(three), &l, 400, "input", "at most 2");
}

static void test_oom(void)
{
    size_t cap = 256 * 1024, n = 0;
    oom_ctx c = {.kind = C, .body = malloc(cap)};
    n += (size_t)snprintf(c.body + n, cap - n, "{\"prompt\": [");
    for (int i = 0; i < 16; i++) {
        n += (size_t)snprintf(c.body + n, cap - n, "%s[", i ? ", " : "");
        for (int j = 0; j < 500; j++)
            n += (size_t)snprintf(c.body + n, cap - n, "%s%d", j ? ", " : "", (i * 500 + j) % 1000);
        n += (size_t)snprintf(c.body + n, cap - n, "]");
    }
    n += (size_t)snprintf(c.body + n, cap - n, "], \"logit_bias\": {");
    for (int i = 0; i < 300; i++)
        n += (size_t)snprintf(c.body + n, cap - n, "%s\"%d\": -1.5", i ? ", " : "", i);
    snprintf(c.body + n, cap - n, "}, \"stop\": [\"a\", \"b\"], \"stop_token_ids\": [1, 2]}");
    int fails = test_oom_loop("completions", oom_parse, NULL, &c, 50);
    CHECK(fails == 3, "completions: %d allocations failed cleanly, expected 3 (admit, prompts, "
                      "logit_bias)", fails);
    CHECK(c.r.n_prompts == 16 && c.r.prompts[15].n_ids == 500 &&
              c.r.prompts[15].ids[499] == (15 * 500 + 499) % 1000 &&
              c.r.sampling.n_logit_bias == 300,
          "the large request parsed");
    oom_free(&c);

    n = 0;
    c.kind = T;
    n += (size_t)snprintf(c.body + n, cap - n, "{\"messages\": [");
    for (int i = 0; i < 50; i++)
        n += (size_t)snprintf(c.body + n, cap - n,
                              "%s{\"role\": \"user\", \"content\": [{\"type\": \"text\", "
                              "\"text\": \"part %d\"}, {\"type\": \"text\", \"text\": \"more\"}]},"
                              " {\"role\": \"assistant\", \"content\": \"ok %d\"},"
                              " {\"role\": \"assistant\", \"content\": null, \"tool_calls\":"
                              " [{\"function\": {\"name\": \"f\", \"arguments\": \"%s\"}}]}",
                              i ? ", " : "", i, i, i ? "x" : "{}"); /* one of them a JSON object */
    snprintf(c.body + n, cap - n, "], \"logit_bias\": {\"1\": 2}}");
    fails = test_oom_loop("chat", oom_parse, NULL, &c, 50);
    CHECK(fails == 5, "chat: %d allocations failed cleanly, expected 5 (admit, admit, join "
                      "buffer, the arguments' parse, logit_bias)", fails);
    const json_t *m = json_array_get(c.r.messages, 147), *filled = json_array_get(c.r.messages, 149);
    CHECK(m && strcmp(json_string_value(json_object_get(m, "content")), "part 49\nmore") == 0,
          "joined content");
    CHECK(filled && strcmp(json_string_value(json_object_get(filled, "content")), "") == 0,
          "an assistant's null content made \"\"");
    oom_free(&c);
    /* Anthropic's Messages: every allocation of the translation fails cleanly */
    c.kind = SNUG_API_MESSAGES;
    snprintf(c.body, cap, "{\"model\": \"m\", \"max_tokens\": 4, \"system\": \"s\", \"messages\": ["
             "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"q\"}]},"
             "{\"role\": \"assistant\", \"content\": [{\"type\": \"thinking\", \"thinking\": \"t\", \"signature\": \"\"},"
             "{\"type\": \"tool_use\", \"id\": \"i\", \"name\": \"f\", \"input\": {\"a\": 1}}]},"
             "{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"i\", \"content\": \"r\"}]}],"
             "\"tools\": [{\"name\": \"f\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"}}],"
             "\"tool_choice\": {\"type\": \"any\"}, \"stop_sequences\": [\"x\"], \"thinking\": {\"type\": \"disabled\"}}");
    fails = test_oom_loop("messages", oom_parse, NULL, &c, 400);
    CHECK(fails >= 20 && c.r.dialect == SNUG_API_ANTHROPIC && json_array_size(c.r.messages) == 4 &&
              c.r.tool_choice == SNUG_TOOL_CHOICE_REQUIRED,
          "messages: %d allocations failed cleanly, then %zu messages", fails, json_array_size(c.r.messages));
    oom_free(&c);
    free(c.body);

    /* A capacity too small for the parse's admission: a 503, nothing held. */
    size_t cur = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &cur, NULL, false);
    size_t old = snug_mem_capacity();
    snug_mem_set_capacity(cur + 1024);
    snug_api_limits l = limits();
    const char *body = "{\"prompt\": \"x\"}";
    check_bad_n(C, body, strlen(body), &l, 503, "", SNUG_API_BUSY_MESSAGE);
    snug_api_request r;
    snug_api_error e;
    snug_api_parse(C, body, strlen(body), &l, &r, &e);
    CHECK(strcmp(e.message, SNUG_API_BUSY_MESSAGE) == 0 && strstr(e.detail, "would pass the capacity"),
          "the client is told in its words (%s), the allocator's account kept for the log (%s)",
          e.message, e.detail);
    snug_mem_set_capacity(old);

    /* A body whose parse could never fit the server's memory for requests: 413 before parsing */
    l.parse_bytes_max = 100 * 1024;
    size_t len;
    char *many = malloc(4 * 4096 + 64);
    len = (size_t)sprintf(many, "{\"prompt\": [[");
    for (int i = 0; i < 4096; i++) len += (size_t)sprintf(many + len, "%s0", i ? "," : "");
    len += (size_t)sprintf(many + len, "]]}");
    check_bad_n(C, many, len, &l, 413, "", "parsing this body's JSON would take");
    free(many);
    const char *small = "{\"prompt\": \"x\", \"n\": 0}"; /* under the limit: its own 400 */
    check_bad_n(C, small, strlen(small), &l, 400, "n", "");
}

int main(void)
{
    RUN(test_completions_every_field);
    RUN(test_defaults);
    RUN(test_prompt_shapes);
    RUN(test_chat_every_field);
    RUN(test_chat_nulls_after_a_tool_call);
    RUN(test_chat_reasoning_sent_back);
    RUN(test_anthropic_messages);
    RUN(test_responses);
    RUN(test_continue_final);
    RUN(test_embeddings_and_rerank);
    RUN(test_fields_refused);
    RUN(test_thinking_fields);
    RUN(test_structured);
    RUN(test_wrong_types);
    RUN(test_out_of_range);
    RUN(test_bad_prompts);
    RUN(test_bad_messages);
    RUN(test_bad_bodies);
    RUN(test_model_length);
    RUN(test_logit_bias_limit);
    RUN(test_messages_utf8);
    RUN(test_null_err_and_limits);
    RUN(test_tool_format_from_template);
    RUN(test_oom);
    return test_summary();
}
