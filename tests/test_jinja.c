/*
 * test_jinja.c: chat templates. The real templates of nine families
 * against Jinja's renderings (tests/data/chat; Qwen3's with and without
 * thinking, with reasoning and tool calls, from renderings.tsv), templates of other
 * families written here with the text Jinja renders from them, Jinja's
 * whitespace rules, Python's printing of values, filters, tests and
 * methods, the constructs refused at compile time, runtime errors and
 * limits, what a failed render says about itself (its kind, its text
 * without the place, the input's values its loops were at), the
 * out-of-memory loop, and renders from several threads.
 */
#include "test.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "chat/jinja.h"
#include "base/json.h"

#include <pthread.h>

#define DATA "tests/data/chat/"

/* ---- helpers -------------------------------------------------------------------- */

/* Compiles and renders text with the variables in vars_json (NULL: none).
 * On success *out is the rendered text (snug_mem_free). */
static snug_status render_with(const char *text, const char *vars_json,
                               const snug_template_limits *lim, char **out, size_t *len,
                               snug_error *err)
{
    snug_template *t = NULL;
    json_t *vars = NULL;
    snug_status st = snug_template_compile(text, strlen(text), "tmpl", &t, err);
    if (st == SNUG_OK && vars_json)
        st = snug_json_parse(vars_json, strlen(vars_json), "vars", &vars, err);
    if (st == SNUG_OK) st = snug_template_render_limited(t, vars, lim, out, len, err);
    json_decref(vars);
    snug_template_free(t);
    return st;
}

/* Checks that text renders to exactly want. */
#define CHECK_RENDER(text, vars_json, want)                                                  \
    do {                                                                                     \
        snug_error err_ = {0};                                                               \
        char *out_ = NULL;                                                                   \
        size_t len_ = 0;                                                                     \
        snug_status st_ = render_with((text), (vars_json), NULL, &out_, &len_, &err_);       \
        CHECK(st_ == SNUG_OK, "render of %s: %s: %s", #text, snug_status_str(st_), err_.msg); \
        if (st_ == SNUG_OK) {                                                                \
            size_t want_len_ = strlen(want);                                                 \
            CHECK(len_ == want_len_ && memcmp(out_, (want), want_len_) == 0 &&               \
                      out_[len_] == '\0',                                                    \
                  "render of %s:\n got: [%s]\nwant: [%s]", #text, out_, (want));             \
        }                                                                                    \
        snug_mem_free(out_);                                                                 \
    } while (0)

/* Checks that text fails (at compile or render) with status want and a
 * message containing msg. */
#define CHECK_RENDER_FAILS(text, vars_json, want, want_msg)                                       \
    do {                                                                                     \
        snug_error err_ = {0};                                                               \
        char *out_ = NULL;                                                                   \
        size_t len_ = 0;                                                                     \
        snug_status st_ = render_with((text), (vars_json), NULL, &out_, &len_, &err_);       \
        CHECK(st_ == (want) && strstr(err_.msg, (want_msg)) != NULL,                              \
              "%s: got %s (%s), want %s with \"%s\"", #text, snug_status_str(st_), err_.msg, \
              snug_status_str(want), (want_msg));                                                 \
        CHECK(st_ != SNUG_OK || out_ == NULL, "no output on failure");                       \
        snug_mem_free(out_);                                                                 \
    } while (0)

/* Checks that text fails to compile with status want and a message
 * containing msg. */
#define CHECK_COMPILE_FAILS(text, want, want_msg)                                                 \
    do {                                                                                     \
        snug_error err_ = {0};                                                               \
        snug_template *t_ = NULL;                                                            \
        snug_status st_ = snug_template_compile((text), strlen(text), "tmpl", &t_, &err_);   \
        CHECK(st_ == (want) && strstr(err_.msg, (want_msg)) != NULL && t_ == NULL,                \
              "compile %s: got %s (%s), want %s with \"%s\"", #text, snug_status_str(st_),   \
              err_.msg, snug_status_str(want), (want_msg));                                       \
        snug_template_free(t_);                                                              \
    } while (0)

static char *read_text(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    snug_error err = {0};
    snug_status st = snug_file_read_all(path, 1 << 20, &text, &len, &err);
    CHECK(st == SNUG_OK, "reading %s: %s", path, err.msg);
    return text;
}

/* Loads a tokenizer_config.json. Their model_max_length can be 1e30,
 * beyond jansson's integers: read integers as reals. */
static json_t *load_config(const char *path)
{
    char *text = read_text(path);
    json_error_t jerr;
    json_t *cfg = text ? json_loads(text, JSON_DECODE_INT_AS_REAL, &jerr) : NULL;
    CHECK(cfg != NULL, "%s: %s", path, text ? jerr.text : "unreadable");
    snug_mem_free(text);
    return cfg;
}

/* bos_token / eos_token of a tokenizer_config.json: a string, or an
 * AddedToken object with "content". NULL when absent. */
static json_t *special_token(json_t *cfg, const char *key)
{
    json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? v : NULL;
}

/* Renders the chat_template of DATA<config> with DATA<messages> (a list
 * of messages, or an object with "messages" and "tools") as transformers
 * does: the config's bos and eos tokens (when not null), the tools,
 * add_generation_prompt as prompt, and kwargs (a JSON object's text, or
 * NULL) as more variables. */
static snug_status render_case(const char *config, const char *messages, bool prompt,
                               const char *kwargs, char **out, size_t *len, snug_error *err)
{
    char cfg_path[256], msg_path[256];
    snprintf(cfg_path, sizeof cfg_path, DATA "%s", config);
    snprintf(msg_path, sizeof msg_path, DATA "%s", messages);
    json_t *vars = NULL, *kw = kwargs ? json_loads(kwargs, 0, NULL) : NULL;
    snug_template *t = NULL;
    json_t *cfg = load_config(cfg_path);
    snug_status st = SNUG_OK;
    if (!cfg) return SNUG_FORMAT;
    char *msg_text = read_text(msg_path);
    json_error_t jerr;
    json_t *data = msg_text ? json_loads(msg_text, 0, &jerr) : NULL;
    snug_mem_free(msg_text);
    json_t *msgs = json_is_object(data) ? json_object_get(data, "messages") : data;
    json_t *tools = json_is_object(data) ? json_object_get(data, "tools") : NULL;
    json_t *tmpl = json_object_get(cfg, "chat_template");
    CHECK(json_is_string(tmpl) && json_is_array(msgs) && (!kwargs || json_is_object(kw)),
          "%s: chat_template, messages and kwargs", config);
    if (!json_is_string(tmpl) || !json_is_array(msgs) || (kwargs && !json_is_object(kw))) {
        st = SNUG_FORMAT;
        goto done;
    }
    vars = kw ? json_copy(kw) : json_object();
    json_object_set(vars, "messages", msgs);
    json_object_set_new(vars, "add_generation_prompt", json_boolean(prompt));
    if (tools) json_object_set(vars, "tools", tools);
    if (special_token(cfg, "bos_token")) json_object_set(vars, "bos_token", special_token(cfg, "bos_token"));
    if (special_token(cfg, "eos_token")) json_object_set(vars, "eos_token", special_token(cfg, "eos_token"));
    st = snug_template_compile(json_string_value(tmpl), json_string_length(tmpl), config, &t, err);
    if (st == SNUG_OK) st = snug_template_render(t, vars, out, len, err);
done:
    snug_template_free(t);
    json_decref(vars);
    json_decref(kw);
    json_decref(data);
    json_decref(cfg);
    return st;
}

/* render_case with add_generation_prompt true and no kwargs. */
static snug_status render_config(const char *config, const char *messages, char **out,
                                 size_t *len, snug_error *err)
{
    return render_case(config, messages, true, NULL, out, len, err);
}

/* Checks that render_case gives exactly the bytes of DATA<rendered>. */
static void check_rendering(const char *config, const char *messages, bool prompt,
                            const char *kwargs, const char *rendered)
{
    char path[256];
    snprintf(path, sizeof path, DATA "%s", rendered);
    char *want = read_text(path), *got = NULL;
    size_t len = 0;
    snug_error err = {0};
    snug_status st = render_case(config, messages, prompt, kwargs, &got, &len, &err);
    CHECK(st == SNUG_OK, "%s: %s", rendered, err.msg);
    if (st == SNUG_OK && want) {
        bool same = len == strlen(want) && memcmp(got, want, len) == 0;
        size_t at = 0;
        while (at < len && want[at] && got[at] == want[at]) at++;
        CHECK(same, "%s: differs from %s at byte %zu of %zu (want %zu):\n%s", config, rendered,
              at, len, strlen(want), got);
    }
    snug_mem_free(got);
    snug_mem_free(want);
}

static void check_fixture(const char *config, const char *messages, const char *rendered)
{
    check_rendering(config, messages, true, NULL, rendered);
}

/* ---- real templates --------------------------------------------------------------- */

static void test_fixtures(void)
{
    check_fixture("gemma-2b-it.tokenizer_config.json", "messages-no-system.json",
                  "gemma-2b-it.rendered.txt");
    check_fixture("mistral-v0.3.tokenizer_config.json", "messages.json",
                  "mistral-v0.3.rendered.txt");
    check_fixture("mistral-v0.3.v0.2-style.tokenizer_config.json", "messages-no-system.json",
                  "mistral-v0.3.v0.2-style.rendered.txt");
    check_fixture("phi-3-mini.tokenizer_config.json", "messages.json", "phi-3-mini.rendered.txt");
    check_fixture("qwen2.5.tokenizer_config.json", "messages.json", "qwen2.5.rendered.txt");
    check_fixture("smollm2-135m.tokenizer_config.json", "messages.json",
                  "smollm2-135m.rendered.txt");
    check_fixture("tinyllama-1.1b-chat.tokenizer_config.json", "messages.json",
                  "tinyllama-1.1b-chat.rendered.txt");
}

/* The renderings render.py made with Jinja2 (Qwen3 with and without
 * thinking, over a conversation with reasoning and tool calls; Phi-3.5),
 * one per row of renderings.tsv: output, config, messages, prompt, kwargs. */
static void test_renderings(void)
{
    char *table = read_text(DATA "renderings.tsv");
    int rows = 0;
    for (char *line = table, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *f[5];
        int n = 0;
        for (char *p = line; n < 5 && p; n++) {
            f[n] = p;
            p = strchr(p, '\t');
            if (p) *p++ = '\0';
        }
        CHECK(n == 5, "renderings.tsv: a row of %d fields", n);
        if (n != 5) continue;
        char config[128];
        snprintf(config, sizeof config, "%s.tokenizer_config.json", f[1]);
        check_rendering(config, f[2], strcmp(f[3], "1") == 0, strcmp(f[4], "-") ? f[4] : NULL, f[0]);
        rows++;
    }
    CHECK(rows >= 12, "renderings.tsv: %d rows", rows);
    snug_mem_free(table);
}

/* Templates that refuse a system message fail with their own text. */
static void test_fixture_raise_exception(void)
{
    char *out = NULL;
    size_t len = 0;
    snug_error err = {0};
    snug_status st = render_config("gemma-2b-it.tokenizer_config.json", "messages.json", &out,
                                   &len, &err);
    CHECK(st == SNUG_INVALID && out == NULL, "gemma with a system message: %s",
          snug_status_str(st));
    CHECK(strcmp(err.msg, "gemma-2b-it.tokenizer_config.json: System role not supported") == 0,
          "message: %s", err.msg);
    st = render_config("mistral-v0.3.v0.2-style.tokenizer_config.json", "messages.json", &out,
                       &len, &err);
    CHECK(st == SNUG_INVALID && out == NULL, "v0.2-style Mistral: %s", snug_status_str(st));
    CHECK(strcmp(err.msg, "mistral-v0.3.v0.2-style.tokenizer_config.json: Conversation roles "
                          "must alternate user/assistant/user/assistant/...") == 0,
          "message: %s", err.msg);
    /* and with err NULL, the same status */
    st = render_config("gemma-2b-it.tokenizer_config.json", "messages.json", &out, &len, NULL);
    CHECK(st == SNUG_INVALID, "without a message buffer: %s", snug_status_str(st));
}

/* ---- other families, written here --------------------------------------------------- */

static const char g_messages[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"You are a helpful assistant.\"},"
    " {\"role\": \"user\", \"content\": \"Hello! What is 2+2?\"},"
    " {\"role\": \"assistant\", \"content\": \"4.\"},"
    " {\"role\": \"user\", \"content\": \"And 3+3?\"}],"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true}";

static const char g_messages_no_system[] =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Hello! What is 2+2?\"},"
    " {\"role\": \"assistant\", \"content\": \"4.\"},"
    " {\"role\": \"user\", \"content\": \"And 3+3?\"}],"
    " \"bos_token\": \"<|begin_of_text|>\", \"add_generation_prompt\": false}";

/* Llama 2: [INST] with the system prompt folded into the first user turn. */
static const char g_llama2[] =
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- set sys_text = messages[0]['content'] -%}\n"
    "    {%- set rest = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set sys_text = none -%}\n"
    "    {%- set rest = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for m in rest -%}\n"
    "    {%- if (m['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{- raise_exception('Roles must alternate user and assistant') -}}\n"
    "    {%- endif -%}\n"
    "    {%- if m['role'] == 'user' -%}\n"
    "        {%- if loop.first and sys_text is not none -%}\n"
    "            {%- set text = '<<SYS>>\\n' + sys_text + '\\n<</SYS>>\\n\\n' + m['content'] -%}\n"
    "        {%- else -%}\n"
    "            {%- set text = m['content'] -%}\n"
    "        {%- endif -%}\n"
    "        {{- bos_token + '[INST] ' + text.strip() + ' [/INST]' -}}\n"
    "    {%- elif m['role'] == 'assistant' -%}\n"
    "        {{- ' ' + m['content'].strip() + ' ' + eos_token -}}\n"
    "    {%- endif -%}\n"
    "{%- endfor -%}\n";

static void test_llama2_style(void)
{
    CHECK_RENDER(g_llama2, g_messages,
                 "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! What is 2+2? "
                 "[/INST] 4. </s><s>[INST] And 3+3? [/INST]");
    CHECK_RENDER(g_llama2,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \" Hi \"}], \"bos_token\": "
                 "\"<s>\", \"eos_token\": \"</s>\"}",
                 "<s>[INST] Hi [/INST]");
    CHECK_RENDER_FAILS(g_llama2,
                       "{\"messages\": [{\"role\": \"assistant\", \"content\": \"x\"}], "
                       "\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}",
                       SNUG_INVALID, "tmpl: Roles must alternate user and assistant");
}

/* Llama 3: header ids, bos_token first, a default system turn at index 0. */
static const char g_llama3[] =
    "{{- bos_token }}\n"
    "{%- for message in messages %}\n"
    "    {%- if loop.index0 == 0 and message['role'] != 'system' %}\n"
    "        {{- '<|start_header_id|>system<|end_header_id|>\\n\\nDefault system.<|eot_id|>' }}\n"
    "    {%- endif %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n";

static void test_llama3_style(void)
{
    CHECK_RENDER(g_llama3,
                 "{\"messages\": [{\"role\": \"system\", \"content\": \"You are a helpful "
                 "assistant.\"}, {\"role\": \"user\", \"content\": \"Hello! What is 2+2?\"}], "
                 "\"bos_token\": \"<|begin_of_text|>\", \"add_generation_prompt\": true}",
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a "
                 "helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello! "
                 "What is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK_RENDER(g_llama3, g_messages_no_system,
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nDefault "
                 "system.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello! What is "
                 "2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n4.<|eot_id|><|"
                 "start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>");
}

/* ChatML without whitespace control: trim_blocks at work, and the newline
 * after the generation prompt's }} that Jinja keeps. */
static const char g_chatml[] =
    "{% for message in messages %}\n"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' }}\n"
    "{% endfor %}\n"
    "{% if add_generation_prompt %}\n"
    "{{ '<|im_start|>assistant\\n' }}\n"
    "{% endif %}\n";

static void test_chatml_style(void)
{
    CHECK_RENDER(g_chatml, g_messages,
                 "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                 "Hello! What is 2+2?<|im_end|>\n<|im_start|>assistant\n4.<|im_end|>\n"
                 "<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n\n");
    CHECK_RENDER(g_chatml,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"Q\"}], "
                 "\"add_generation_prompt\": false}",
                 "<|im_start|>user\nQ<|im_end|>\n");
}

/* messages[0] handled first, then messages[1:]; a namespace carries state
 * out of the loop; lstrip_blocks removes the indentation of block tags
 * but not of {{ }}. */
static const char g_rest[] =
    "{% set ns = namespace(turns=0, system='') %}\n"
    "{% if messages[0].role == 'system' %}\n"
    "    {% set ns.system = messages[0].content %}\n"
    "    {% set convo = messages[1:] %}\n"
    "{% else %}\n"
    "    {% set convo = messages %}\n"
    "{% endif %}\n"
    "System: {{ ns.system if ns.system else 'none' }}\n"
    "{% for m in convo %}\n"
    "    {% set ns.turns = ns.turns + 1 %}\n"
    "    {{ loop.index }}. {{ m.role | capitalize }}: {{ m.content }}\n"
    "{% endfor %}\n"
    "Turns: {{ ns.turns }}\n";

static void test_first_then_rest_with_namespace(void)
{
    CHECK_RENDER(g_rest, g_messages,
                 "System: You are a helpful assistant.\n    1. User: Hello! What is 2+2?\n    2. "
                 "Assistant: 4.\n    3. User: And 3+3?\nTurns: 3");
    CHECK_RENDER(g_rest, g_messages_no_system,
                 "System: none\n    1. User: Hello! What is 2+2?\n    2. Assistant: 4.\n    3. "
                 "User: And 3+3?\nTurns: 3");
}

/* Tool definitions through tojson (indented and compact; ensure_ascii is
 * off, so "—" and "°" stay as they are). */
static const char g_tools[] =
    "{%- if tools is defined and tools %}\n"
    "{{- 'Tools:\\n' }}\n"
    "{%- for t in tools %}\n"
    "{{- t | tojson(indent=4) }}\n"
    "{{- '\\n\\n' }}\n"
    "{%- endfor %}\n"
    "{%- endif %}\n"
    "{%- for m in messages %}\n"
    "{{- m.role ~ ': ' ~ (m.content | tojson) ~ '\\n' }}\n"
    "{%- endfor %}\n"
    "{{- tools | tojson }}";

static void test_tools_tojson(void)
{
    CHECK_RENDER(
        g_tools,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Say \\\"hi\\\"\\nthen\\tstop \\\\ "
        "ok\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
        "\"description\": \"Get the weather \u2014 in \u00b0C\", \"parameters\": {\"type\": "
        "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
        "[\"city\"]}}}]}",
        "Tools:\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": "
        "\"get_weather\",\n        \"description\": \"Get the weather \u2014 in \u00b0C\",\n      "
        "  \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n "
        "               \"city\": {\n                    \"type\": \"string\"\n                "
        "}\n            },\n            \"required\": [\n                \"city\"\n           "
        " ]\n        }\n    }\n}\n\nuser: \"Say \\\"hi\\\"\\nthen\\tstop \\\\ ok\"\n[{\"type\": "
        "\"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the weather "
        "\u2014 in \u00b0C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": "
        "{\"type\": \"string\"}}, \"required\": [\"city\"]}}}]");
}

/* A recursive macro over a JSON schema, as tool-use templates have. */
static void test_macro_recursion(void)
{
    CHECK_RENDER("{%- macro render_type(spec) -%}\n"
                 "    {%- if spec.type == 'string' -%}str\n"
                 "    {%- elif spec.type == 'integer' -%}int\n"
                 "    {%- elif spec.type == 'array' -%}list[{{ render_type(spec['items']) }}]\n"
                 "    {%- elif spec.type == 'object' -%}dict\n"
                 "    {%- else -%}Any\n"
                 "    {%- endif -%}\n"
                 "{%- endmacro -%}\n"
                 "{%- for name, spec in params | dictsort -%}\n"
                 "{{ name }}: {{ render_type(spec) }}{{ ', ' if not loop.last }}\n"
                 "{%- endfor -%}",
                 "{\"params\": {\"b\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}}, "
                 "\"a\": {\"type\": \"string\"}, \"c\": {\"type\": \"object\"}, \"d\": {\"type\": "
                 "\"null\"}}}",
                 "a: str, b: list[int], c: dict, d: Any");
    CHECK_RENDER("{% macro f(a, b=a ~ '!') %}{{ a }}{{ b }}{% endmacro %}{{ f('x') }}|{{ f('x', "
                 "'y') }}|{{ f(b='q', a='p') }}|{{ f }}",
                 NULL, "xx!|xy|pq|<Macro 'f'>");
    CHECK_RENDER("{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}"
                 "{% for x in [5] %}{{ m() }}{% endfor %}",
                 NULL, "11");
}

/* ---- Jinja's rules, one at a time ---------------------------------------------------- */

static void test_whitespace_control(void)
{
    /* trim_blocks: the newline after a block tag goes; lstrip_blocks: the
     * indentation before it; neither for {{ }} */
    CHECK_RENDER("  {% if true %}\n  x\n  {% endif %}\n  y  \n", NULL, "  x\n  y  ");
    CHECK_RENDER("{{ 1 }}\n{{ 2 }}\n", NULL, "1\n2");
    /* "-" strips every whitespace character on its side, newlines too */
    CHECK_RENDER("a  \n\n  {{- 1 -}}  \n\n  b", NULL, "a1b");
    CHECK_RENDER("a \u00a0\u3000{%- if 1 %}x{% endif %}", NULL, "ax");
    /* "+" keeps what lstrip_blocks / trim_blocks would remove */
    CHECK_RENDER("  {%+ if 1 %}x{% endif %}", NULL, "  x");
    CHECK_RENDER("{% if 1 +%}\nx{% endif %}", NULL, "\nx");
    /* comments strip like blocks */
    CHECK_RENDER("a\n  {# note #}\nb", NULL, "a\nb");
    CHECK_RENDER("{#- x -#}  \n ok", NULL, "ok");
    /* raw blocks, and the newline Jinja keeps after {% raw %} */
    CHECK_RENDER("{% raw %}\n  {{ x }}{% if %}\n{% endraw %}", NULL, "\n  {{ x }}{% if %}\n");
    /* one final newline of the template is dropped, \r\n and \r become \n */
    CHECK_RENDER("a\r\nb\rc\n\n", NULL, "a\nb\nc\n");
    /* brackets keep %} and }} inside a tag from ending it */
    CHECK_RENDER("{{ {'a': {'b': '}}'}} }}", NULL, "{'a': {'b': '}}'}}");
    /* lstrip only applies at the start of a line */
    CHECK_RENDER("{{ 1 }}  {% if 1 %}x{% endif %}", NULL, "1  x");
}

static void test_printing_values(void)
{
    CHECK_RENDER("{{ none }} {{ true }} {{ False }} {{ 7 }} {{ -0.0 }} {{ 1.0 }} {{ 0.1 + 0.2 }} "
                 "{{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.0001 }} {{ 1/3 }} {{ 2.5e-7 }}",
                 NULL,
                 "None True False 7 -0.0 1.0 0.30000000000000004 1e+16 1000000000000000.0 1e-05 "
                 "0.0001 0.3333333333333333 2.5e-07");
    CHECK_RENDER("{{ [1, 'a', none, true, 1.5, {'k': [1e20]}] }} {{ (1,) }} {{ () }} "
                 "{{ range(3) }} {{ range(1, 10, 2) }}",
                 NULL, "[1, 'a', None, True, 1.5, {'k': [1e+20]}] (1,) () range(0, 3) range(1, 10, 2)");
    CHECK_RENDER("{{ [\"it's\", 'say \"x\"', 'a\\nb\\\\', '\\x01\\u00a0\u00e9'] }}", NULL,
                 "[\"it's\", 'say \"x\"', 'a\\nb\\\\', '\\x01\\xa0\u00e9']");
    CHECK_RENDER("{{ undefined_name }}|{{ [undefined_name] }}|{{ {'a': 1}.items() }}", NULL,
                 "|[Undefined]|dict_items([('a', 1)])");
    CHECK_RENDER("{% set ns = namespace(a=1, b='x') %}{{ ns }}", NULL, "<Namespace {'a': 1, 'b': 'x'}>");
    CHECK_RENDER("{% for x in [1, 2] %}{{ loop }}{% endfor %}", NULL,
                 "<LoopContext 1/2><LoopContext 2/2>");
    CHECK_RENDER("{{ 'a' ~ 1 ~ none ~ [2] }}", NULL, "a1None[2]");
}

static void test_string_literals(void)
{
    CHECK_RENDER("{{ 'a\\tb\\x41\\u00e9\\U0001F600\\101\\q\\'' }}|{{ \"x\\\ny\" }}|{{ 'a' 'b' }}",
                 NULL, "a\tbA\u00e9\U0001F600A\\q'|xy|ab");
    CHECK_RENDER("{{ '\\\u00e9' }}", NULL, "\\xe9"); /* Python's backslashreplace quirk */
    CHECK_RENDER("{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 1.5e3 }} {{ 1_0.5 }}", NULL,
                 "31 15 5 1000 1500.0 10.5");
}

static void test_operators(void)
{
    CHECK_RENDER("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 5 % -3 }} {{ 7 / 2 }} {{ 4 / 2 }} "
                 "{{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -5.5 % 2 }} {{ 1e300 * 1e10 }}",
                 NULL, "3 -4 2 -1 3.5 2.0 1024 0.5 3.0 0.5 inf");
    CHECK_RENDER("{{ 'ab' * 2 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ true + true }} {{ 1 ~ 2 * 3 }} "
                 "{{ - 2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ not 1 == 2 }} {{ -1|abs }}",
                 NULL, "abab [1, 1] [1, 2] 2 16 4 64 True 1"); /* Jinja: (-2) ** 2, (2 ** 3) ** 2 */
    CHECK_RENDER("{{ 1 == 1.0 }}{{ (1, 2) == [1, 2] }}{{ [1, 2] < [1, 3] }}{{ 1 < 2 < 3 }}"
                 "{{ 3 > 2 > 2 }}{{ 'a' in 'cat' }}{{ 'x' not in ['x'] }}{{ 'k' in {'k': 0} }}",
                 NULL, "TrueFalseTrueTrueFalseTrueFalseTrue");
    CHECK_RENDER("{{ none or 'x' }}|{{ 0 and 1 }}|{{ 1 if 0 }}|{{ 1 if 0 else 2 if 0 else 3 }}",
                 NULL, "x|0||3");
}

static void test_filters(void)
{
    const char *vars = "{\"m\": [{\"role\": \"system\", \"content\": \" S \"}, {\"role\": \"user\", "
                       "\"content\": \"U\"}], \"d\": {\"b\": 1, \"a\": [1, 2]}}";
    CHECK_RENDER("{{ m | selectattr('role', 'equalto', 'user') | list | length }}|"
                 "{{ m | rejectattr('role', 'equalto', 'user') | map(attribute='role') | list }}|"
                 "{{ m | map(attribute='role') | join(', ') }}|{{ m | map(attribute='x', "
                 "default='-') | join }}|{{ m[0].content | trim }}|{{ m | first | tojson }}|"
                 "{{ (m | last).role }}|{{ m | length }}{{ 'h\u00e9' | count }}",
                 vars, "1|['system']|system, user|--|S|{\"role\": \"system\", \"content\": \" S \"}|user|22");
    CHECK_RENDER("{{ d | tojson }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(indent=2) }}|"
                 "{{ d | dictsort }}|{{ d | items | list }}|{{ d | list }}",
                 vars,
                 "{\"b\": 1, \"a\": [1, 2]}|{\"a\": [1, 2], \"b\": 1}|{\n  \"b\": 1,\n  \"a\": [\n  "
                 "  1,\n    2\n  ]\n}|[('a', [1, 2]), ('b', 1)]|[('b', 1), ('a', [1, 2])]|['b', 'a']");
    CHECK_RENDER("{{ 'Hello World' | upper }}|{{ 'hELLO wORLD' | capitalize }}|{{ 'hello "
                 "world-foo (bar' | title }}|{{ \"they're\" | title }}|{{ 'ABC' | lower }}|{{ "
                 "'stra\u00dfe' | upper }}|{{ '\u041f\u0440\u0438' | upper }}",
                 NULL, "HELLO WORLD|Hello world|Hello World-Foo (Bar|They're|abc|STRASSE|\u041f\u0420\u0418");
    CHECK_RENDER("{{ x | default('d') }}{{ '' | default('e', true) }}{{ none | default('n') }}"
                 "{{ 0 | d(5) }}",
                 NULL, "deNone0");
    CHECK_RENDER("{{ '5' | int + 1 }} {{ '12.7' | int }} {{ 'x' | int }} {{ 'x' | int(-1) }} "
                 "{{ '0x1A' | int(base=16) }} {{ 3.9 | int }} {{ '2.5' | float }} {{ 'y' | float }} "
                 "{{ 5 | float }} {{ -3 | abs }} {{ 2.5 | round }} {{ 2.675 | round(2) }} {{ 42 | "
                 "round }} {{ 2.1 | round(0, 'ceil') }}",
                 NULL, "6 12 0 -1 26 3 2.5 0.0 5.0 3 2.0 2.67 42 3.0");
    CHECK_RENDER("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'aaa' | "
                 "replace('a', 'b', 2) }}|{{ [3, 1, 2] | sort }}|{{ ['b', 'A', 'a'] | sort }}|"
                 "{{ ['a', 'A', 'b'] | unique | list }}|{{ [1, 2, 3] | sum }}|{{ [1, 2, 3] | max }}|"
                 "{{ [1, 2, 3] | reverse | list }}|{{ 'abc' | reverse }}|{{ [1, 2, 3, 4] | "
                 "select('odd') | list }}|{{ [1, 2, 3] | string }}|{{ 'abc' | list }}",
                 NULL,
                 "a\n  b\n\n  c|  a\n  b|bba|[1, 2, 3]|['A', 'a', 'b']|['a', 'b']|6|3|[3, 2, 1]|cba|"
                 "[1, 3]|[1, 2, 3]|['a', 'b', 'c']");
    /* Jinja's generator filters have no length */
    CHECK_RENDER_FAILS("{{ [1, 2] | select('odd') | length }}", NULL, SNUG_INVALID, "has no len()");
}

static void test_tests_and_methods(void)
{
    CHECK_RENDER("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 'a' is string }}"
                 "{{ 1.5 is number }}{{ true is number }}{{ {} is mapping }}{{ [] is iterable }}"
                 "{{ 'a' is sequence }}{{ true is true }}{{ 1 is true }}{{ 3 is odd }}"
                 "{{ 4 is divisibleby 2 }}{{ 'a' is in 'abc' }}{{ x is not defined }}"
                 "{{ 1 is integer }}{{ 1.0 is float }}{{ 'Ab' is lower }}",
                 NULL, "FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueFalse");
    CHECK_RENDER("{{ '  x  '.strip() }}|{{ 'xxhixx'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|"
                 "{{ '  a  b '.split() }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'abc'.startswith('a') }}"
                 "{{ 'abc'.endswith(('x', 'c')) }}|{{ 'a b'.title() }}|{{ 'ab'.upper() }}|"
                 "{{ 'hello'.find('l') }}{{ 'hello'.count('l') }}|{{ '-'.join(['a', 'b']) }}|"
                 "{{ 'x</think>y'.split('</think>')[-1].lstrip('\\n') }}",
                 NULL, "x|hixx|['a', 'b', '', 'c']|['a', 'b']|['a b', 'c']|TrueTrue|A B|AB|22|a-b|y");
    CHECK_RENDER("{% set d = {'a': 1} %}{{ d.items() | list }}{{ d.keys() | list }}"
                 "{{ d.values() | list }}{{ d.get('b', 5) }}{{ d.get('a') }}{{ d.get('z') }}"
                 "{{ d.update is defined }}{{ d.items is defined }}",
                 NULL, "[('a', 1)]['a'][1]51NoneFalseTrue");
}

static void test_statements(void)
{
    /* for: else, filter, loop variables, unpacking, break and continue */
    CHECK_RENDER("{% for x in [] %}a{% else %}empty{% endfor %}"
                 "{% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}/{{ loop.length }}{% endfor %}"
                 "{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}"
                 "{% for x in [1, 2] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.revindex }}"
                 "{{ loop.cycle('a', 'b') }}{% endfor %}",
                 NULL, "empty1/22/2a=1-2-2a1--1b");
    CHECK_RENDER("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}"
                 "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
                 NULL, "13");
    /* Jinja runs a for's else unless an iteration reached the end of the body */
    CHECK_RENDER("{% for x in [1] %}{% break %}{% else %}E{% endfor %}", NULL, "E");
    /* scopes: a set in a loop iteration is gone after it; a namespace is not */
    CHECK_RENDER("{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}|{% endfor %}"
                 "{{ x }}",
                 NULL, "01|02|0");
    CHECK_RENDER("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}"
                 "{% set blk %}x{{ 1 }}{% endset %}[{{ blk }}]{% set up | upper %}abc{% endset %}"
                 "{{ up }}{% print 5, 6 %}",
                 NULL, "12(1, 2)[x1]ABC56");
    CHECK_RENDER("{% generation %}g{{ 1 }}{% endgeneration %}", NULL, "g1");
}

/* Behaviors found by comparing with Jinja on fuzzed templates. */
static void test_jinja_quirks(void)
{
    /* generator filters fail only when consumed, as Python generators do */
    CHECK_RENDER("{% set g = [1] | selectattr('a.b') %}{{ [1, 2] | items is defined }}ok", NULL,
                 "Trueok");
    CHECK_RENDER_FAILS("{% set g = 5 | select %}{{ g | list }}", NULL, SNUG_INVALID,
                       "'int' object is not iterable");
    CHECK_RENDER_FAILS("{{ [1, 2] | items | list }}", NULL, SNUG_INVALID,
                       "can only get item pairs from a mapping");
    /* a generator is consumed once */
    CHECK_RENDER("{% set g = [1, 2, 3] | select %}{{ g | first }}{{ g | list }}{{ g | list }}",
                 NULL, "1[2, 3][]");
    /* an opening tag with nothing after it ends the template quietly */
    CHECK_RENDER("a{#", NULL, "a");
    CHECK_RENDER("a\n{%- raw -%} \x1e", NULL, "a");
    /* repr of containers met again inside themselves */
    CHECK_RENDER("{% set ns = namespace(a=1) %}{% set ns.s = ns %}{{ ns }}|{{ ns.s.s.a }}", NULL,
                 "<Namespace {'a': 1, 's': <Namespace {...}>}>|1");
    CHECK_RENDER("{% set ns = namespace() %}{% set ns.l = [ns, 1] %}{{ ns.l }}|{% set x = [1] %}"
                 "{{ [x, x] }}",
                 NULL, "[<Namespace {'l': [...]}>, 1]|[[1], [1]]");
    /* Jinja's map(attribute=, default=) replaces only undefined, and only
     * with a default other than none */
    CHECK_RENDER("{{ 'ab' | map(attribute='x') | list }}{{ [{}] | map(attribute='x', default=0) | "
                 "list }}",
                 NULL, "[Undefined, Undefined][0]");
    /* Jinja's indent splits lines as str.splitlines does */
    CHECK_RENDER("{{ 'a\\r\\nb\\x0bc' | indent(1) }}", NULL, "a\n b\n c");
}

static void test_input_values(void)
{
    CHECK_RENDER("{{ i }} {{ f }} {{ b }} {{ n }} {{ s }} {{ l }} {{ o }}",
                 "{\"i\": -5, \"f\": 2.0, \"b\": true, \"n\": null, \"s\": \"\u00e9\", \"l\": [1, "
                 "2.5], \"o\": {\"z\": 1, \"a\": 2}}",
                 "-5 2.0 True None \u00e9 [1, 2.5] {'z': 1, 'a': 2}");
    CHECK_RENDER("no variables", NULL, "no variables");
    /* vars must be an object */
    snug_template *t = NULL;
    snug_error err = {0};
    CHECK_OK(snug_template_compile("x", 1, "tmpl", &t, &err), &err);
    json_t *arr = json_array();
    char *out = NULL;
    size_t len = 0;
    CHECK_FAILS(snug_template_render(t, arr, &out, &len, &err), &err, SNUG_INVALID,
                "must be a JSON object");
    json_decref(arr);
    CHECK(strcmp(snug_template_name(t), "tmpl") == 0, "name");
    snug_template_free(t);
}

/* ---- refused constructs and errors ------------------------------------------------- */

static void test_unsupported_constructs(void)
{
    CHECK_COMPILE_FAILS("{% extends 'base' %}", SNUG_UNSUPPORTED, "tmpl:1:4: the 'extends' tag is not supported");
    CHECK_COMPILE_FAILS("a\n  {% include 'x' %}", SNUG_UNSUPPORTED, "tmpl:2:6: the 'include' tag");
    CHECK_COMPILE_FAILS("{% import 'x' as y %}", SNUG_UNSUPPORTED, "'import' tag");
    CHECK_COMPILE_FAILS("{% from 'x' import y %}", SNUG_UNSUPPORTED, "'from' tag");
    CHECK_COMPILE_FAILS("{% block b %}{% endblock %}", SNUG_UNSUPPORTED, "'block' tag");
    CHECK_COMPILE_FAILS("{% call m() %}{% endcall %}", SNUG_UNSUPPORTED, "'call' tag");
    CHECK_COMPILE_FAILS("{% filter upper %}x{% endfilter %}", SNUG_UNSUPPORTED, "'filter' tag");
    CHECK_COMPILE_FAILS("{% with a = 1 %}{% endwith %}", SNUG_UNSUPPORTED, "'with' tag");
    CHECK_COMPILE_FAILS("{{ x | urlize }}", SNUG_UNSUPPORTED, "tmpl:1:8: the filter 'urlize' is not supported");
    CHECK_COMPILE_FAILS("{% if x %}{{ x | nosuch }}{% endif %}", SNUG_UNSUPPORTED, "the filter 'nosuch'");
    CHECK_COMPILE_FAILS("{{ x is nosuch }}", SNUG_UNSUPPORTED, "tmpl:1:9: the test 'nosuch' is not supported");
    CHECK_COMPILE_FAILS("{{ x.format(1) }}", SNUG_UNSUPPORTED, "tmpl:1:12: the method 'format' is not supported");
    CHECK_COMPILE_FAILS("{{ messages.append(1) }}", SNUG_UNSUPPORTED, "the method 'append'");
    CHECK_COMPILE_FAILS("{% for x in y recursive %}{% endfor %}", SNUG_UNSUPPORTED, "recursive loops");
    CHECK_COMPILE_FAILS("{% for x in y %}{% macro m() %}{% endmacro %}{% endfor %}", SNUG_UNSUPPORTED,
                        "a macro defined inside a loop");
    CHECK_COMPILE_FAILS("{{ f(*args) }}", SNUG_UNSUPPORTED, "*args and **kwargs");
    CHECK_COMPILE_FAILS("{{ cycler('a') }}", SNUG_UNSUPPORTED, "the global 'cycler'");
    CHECK_COMPILE_FAILS("{{ x.__class__ }}", SNUG_UNSUPPORTED, "'__'");
    CHECK_COMPILE_FAILS("{{ 99999999999999999999 }}", SNUG_UNSUPPORTED, "beyond 64 bits");
    /* syntax errors */
    CHECK_COMPILE_FAILS("{% if x %}", SNUG_FORMAT, "expected 'elif' or 'else' or 'endif'");
    CHECK_COMPILE_FAILS("{% endif %}", SNUG_FORMAT, "unknown tag 'endif'");
    CHECK_COMPILE_FAILS("{{ }}", SNUG_FORMAT, "expected an expression");
    CHECK_COMPILE_FAILS("{{ (1 }}", SNUG_FORMAT, "unexpected '}'");
    CHECK_COMPILE_FAILS("{{ 'open }}", SNUG_FORMAT, "unterminated string");
    CHECK_COMPILE_FAILS("{# open", SNUG_FORMAT, "missing end of comment");
    CHECK_COMPILE_FAILS("{% break %}", SNUG_FORMAT, "'break' outside loop");
    CHECK_COMPILE_FAILS("{% do x %}", SNUG_FORMAT, "unknown tag 'do'");
    CHECK_COMPILE_FAILS("{{ x is defined if y }}", SNUG_FORMAT, "expected end of print statement");
    CHECK_COMPILE_FAILS("ok \xff", SNUG_FORMAT, "not valid UTF-8");
    /* too deep */
    char deep[600];
    size_t n = 0;
    n += (size_t)snprintf(deep + n, sizeof deep - n, "{{ ");
    for (int i = 0; i < 150; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 150; i++) deep[n++] = ')';
    snprintf(deep + n, sizeof deep - n, " }}");
    CHECK_COMPILE_FAILS(deep, SNUG_UNSUPPORTED, "nesting deeper than");
    /* without a message buffer, the same status */
    snug_template *t = NULL;
    CHECK(snug_template_compile("{% include 'x' %}", 17, "tmpl", &t, NULL) == SNUG_UNSUPPORTED && !t,
          "status without err");
}

static void test_runtime_errors(void)
{
    CHECK_RENDER_FAILS("{{ m() }}", "{\"m\": [1]}", SNUG_INVALID, "tmpl:1:5: 'list' object is not callable");
    CHECK_RENDER_FAILS("{{ strftime_now('%Y') }}", NULL, SNUG_INVALID, "'strftime_now' is undefined");
    CHECK_RENDER_FAILS("{{ x.y }}", NULL, SNUG_INVALID, "'x' is undefined");
    CHECK_RENDER_FAILS("{{ m[0].a.b }}", "{\"m\": [{}]}", SNUG_INVALID, "'a' is undefined");
    CHECK_RENDER_FAILS("{{ 1 + 'a' }}", NULL, SNUG_INVALID, "unsupported operand type(s) for +");
    CHECK_RENDER_FAILS("{{ 1 / 0 }}", NULL, SNUG_INVALID, "division by zero");
    CHECK_RENDER_FAILS("{{ x | tojson }}", NULL, SNUG_INVALID, "Undefined is not JSON serializable");
    CHECK_RENDER_FAILS("{{ 1 < 'a' }}", NULL, SNUG_INVALID, "'<' not supported");
    CHECK_RENDER_FAILS("{% for a, b in [[1]] %}{% endfor %}", NULL, SNUG_INVALID, "not enough values to unpack");
    CHECK_RENDER_FAILS("{% set x = 1 %}{% set x.a = 2 %}", NULL, SNUG_INVALID, "non-namespace object");
    CHECK_RENDER_FAILS("{{ range(200000) | length }}", NULL, SNUG_INVALID, "range too big");
    CHECK_RENDER_FAILS("{{ raise_exception('Stop: ' ~ 42) }}", NULL, SNUG_INVALID, "tmpl: Stop: 42");
    /* a client's bytes in a message: escaped, never raw (ESC recolours a terminal) */
    CHECK_RENDER_FAILS("{{ raise_exception('Unknown role: ' ~ m.role) }}",
                       "{\"m\": {\"role\": \"\\u001b[31mx\\u009b\"}}", SNUG_INVALID,
                       "tmpl: Unknown role: \\x1b[31mx\\xc2\\x9b");
    CHECK_RENDER_FAILS("{{ m[k].a }}", "{\"m\": {}, \"k\": \"\\u001b]0;t\\u0007\"}", SNUG_INVALID,
                       "'\\x1b]0;t\\x07' is undefined");
    CHECK_COMPILE_FAILS("{{ a \x1b }}", SNUG_FORMAT, "unexpected character '\\x1b'");
    CHECK_RENDER_FAILS("{{ [1] | select }}", NULL, SNUG_UNSUPPORTED, "printing a generator");
    CHECK_RENDER_FAILS("{{ 'x' % 1 }}", NULL, SNUG_UNSUPPORTED, "printf-style");
    CHECK_RENDER_FAILS("{{ 2 ** 70 }}", NULL, SNUG_UNSUPPORTED, "beyond 64 bits");
    CHECK_RENDER_FAILS("{{ '\u0391' | lower }}", NULL, SNUG_UNSUPPORTED, "U+0391");
}

/* ---- what a failed render says about itself ------------------------------------------ */

static const char g_trace_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"},"
    " {\"role\": \"user\", \"content\": \"u\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"function\":"
    " {\"name\": \"f\", \"arguments\": \"{}\"}}]}],"
    " \"tools\": [{\"name\": \"t\"}]}";

/* Renders text with vars under lim (NULL: the defaults) into *f and
 * checks that it fails with status want, the message after text_at being
 * exactly text, after the place "tmpl:LINE:COL: " or "tmpl: ". */
static void check_trace(const char *text, const json_t *vars, const snug_template_limits *lim,
                        snug_status want, snug_template_fail kind, const char *want_text,
                        snug_template_failure *f)
{
    snug_template *t = NULL;
    snug_error err = {0};
    char *out = NULL;
    size_t len = 0;
    memset(f, 0x5a, sizeof *f);
    CHECK_OK(snug_template_compile(text, strlen(text), "tmpl", &t, &err), &err);
    if (!t) return;
    snug_status st = snug_template_render_traced(t, vars, lim, f, &out, &len, &err);
    CHECK(st == want && out == NULL, "%s: %s (%s), want %s", text, snug_status_str(st), err.msg,
          snug_status_str(want));
    CHECK(f->kind == kind, "%s: kind %d, want %d", text, (int)f->kind, (int)kind);
    CHECK(f->text_at <= strlen(err.msg) && strcmp(err.msg + f->text_at, want_text) == 0 &&
              strncmp(err.msg, "tmpl", 4) == 0 && f->text_at >= 6 &&
              strncmp(err.msg + f->text_at - 2, ": ", 2) == 0,
          "%s: message \"%s\", text_at %zu, want the text \"%s\"", text, err.msg, f->text_at,
          want_text);
    snug_mem_free(out);
    snug_template_free(t);
}

/* The failure names the kind of error, its text without its place, and the
 * input's arrays and objects the loops around it were at, innermost first,
 * through slices, namespaces and loops over other values. */
static void test_failure_trace(void)
{
    json_t *vars = NULL;
    snug_error err = {0};
    CHECK_OK(snug_json_parse(g_trace_vars, strlen(g_trace_vars), "vars", &vars, &err), &err);
    if (!vars) return;
    const json_t *msgs = json_object_get(vars, "messages");
    const json_t *call = json_array_get(json_object_get(json_array_get(msgs, 2), "tool_calls"), 0);
    const json_t *tool = json_array_get(json_object_get(vars, "tools"), 0);
    snug_template_failure f;

    /* a string where a mapping was expected, two loops deep over a slice */
    check_trace("{% for m in messages[1:] %}{% for c in m.tool_calls | default([]) %}"
                "{% for k, v in c.function.arguments | items %}{% endfor %}{% endfor %}{% endfor %}",
                vars, NULL, SNUG_INVALID, SNUG_TEMPLATE_FAIL_ERROR,
                "can only get item pairs from a mapping", &f);
    CHECK(f.n_items == 2 && f.items[0] == call && f.items[1] == json_array_get(msgs, 2),
          "items: %d: %p %p", f.n_items, (void *)f.items[0], (void *)f.items[1]);

    /* raise_exception in a loop over a namespace's copy of the messages */
    check_trace("{% set ns = namespace(ms=messages) %}{% for m in ns.ms %}{% if m.role == 'user' %}"
                "{{ raise_exception('no users: ' + m.content) }}{% endif %}{% endfor %}",
                vars, NULL, SNUG_INVALID, SNUG_TEMPLATE_FAIL_RAISED, "no users: u", &f);
    CHECK(f.n_items == 1 && f.items[0] == json_array_get(msgs, 1), "raised: %d items",
          f.n_items);

    /* None where a string is added: the tools loop inside the messages loop */
    check_trace("{% for m in messages %}{% for t in tools %}{{ t.name + none }}{% endfor %}"
                "{% endfor %}",
                vars, NULL, SNUG_INVALID, SNUG_TEMPLATE_FAIL_ERROR,
                "unsupported operand type(s) for +: 'str' and 'NoneType'", &f);
    CHECK(f.n_items == 2 && f.items[0] == tool && f.items[1] == json_array_get(msgs, 0),
          "tools in messages: %d items", f.n_items);

    /* loops over numbers and over values the template made are not the input's */
    check_trace("{% for m in messages %}{% for i in range(2) %}{{ i + m.role }}{% endfor %}"
                "{% endfor %}",
                vars, NULL, SNUG_INVALID, SNUG_TEMPLATE_FAIL_ERROR,
                "unsupported operand type(s) for +: 'int' and 'str'", &f);
    CHECK(f.n_items == 1 && f.items[0] == json_array_get(msgs, 0), "range: %d items", f.n_items);
    check_trace("{% for d in [{'a': 1}] %}{{ d.a + 'x' }}{% endfor %}", vars, NULL, SNUG_INVALID,
                SNUG_TEMPLATE_FAIL_ERROR, "unsupported operand type(s) for +: 'int' and 'str'", &f);
    CHECK(f.n_items == 0, "a literal's loop: %d items", f.n_items);

    /* outside any loop */
    check_trace("{{ messages[0].content + 1 }}", vars, NULL, SNUG_INVALID,
                SNUG_TEMPLATE_FAIL_ERROR, "unsupported operand type(s) for +: 'str' and 'int'", &f);
    CHECK(f.n_items == 0, "no loop: %d items", f.n_items);

    /* an error a generator kept until it was consumed (at the user message, not at the
     * system message where the same filter ran unconsumed) */
    check_trace("{% for m in messages %}{% set g = [1] | select('divisibleby', 0) %}"
                "{% if m.role == 'user' %}{{ g | list }}{% endif %}{% endfor %}",
                vars, NULL, SNUG_INVALID, SNUG_TEMPLATE_FAIL_ERROR,
                "integer division or modulo by zero", &f);
    CHECK(f.n_items == 1 && f.items[0] == json_array_get(msgs, 1), "generator: %d items",
          f.n_items);

    /* a limit */
    snug_template_limits lim;
    snug_template_limits_default(&lim);
    lim.steps_max = 50;
    check_trace("{% for m in messages %}{% for i in range(100) %}{{ i }}{% endfor %}{% endfor %}",
                vars, &lim, SNUG_INVALID, SNUG_TEMPLATE_FAIL_LIMIT,
                "rendering takes more than the limit of 50 steps", &f);
    CHECK(f.n_items == 1 && f.items[0] == json_array_get(msgs, 0), "limit: %d items", f.n_items);

    /* success: nothing */
    snug_template *t = NULL;
    char *out = NULL;
    size_t len = 0;
    memset(&f, 0x5a, sizeof f);
    CHECK_OK(snug_template_compile("{{ messages | length }}", 23, "tmpl", &t, &err), &err);
    if (t) CHECK_OK(snug_template_render_traced(t, vars, NULL, &f, &out, &len, &err), &err);
    CHECK(f.kind == SNUG_TEMPLATE_FAIL_NONE && f.n_items == 0 && out && strcmp(out, "3") == 0,
          "success: kind %d, %d items", (int)f.kind, f.n_items);
    snug_mem_free(out);
    snug_template_free(t);
    json_decref(vars);
}

/* Renders text under lim and checks that it fails with a message. */
static void check_limit(const char *text, const snug_template_limits *lim, const char *msg)
{
    snug_error err = {0};
    char *out = NULL;
    size_t len = 0;
    snug_status st = render_with(text, NULL, lim, &out, &len, &err);
    CHECK(st == SNUG_INVALID && strstr(err.msg, msg) != NULL, "%s: %s: %s (want \"%s\")", text,
          snug_status_str(st), err.msg, msg);
    snug_mem_free(out);
}

static void test_limits(void)
{
    snug_template_limits lim;
    snug_template_limits_default(&lim);
    CHECK(lim.output_bytes_max == 16u << 20 && lim.iterations_max == 1000000, "defaults");
    /* the defaults stop hostile templates quickly */
    check_limit("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                NULL, "iterations");
    check_limit("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", NULL,
                "passes the limit of 16777216 bytes");
    check_limit("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", NULL, "deeper than");
    check_limit("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ "
                "ns.s %}{% endfor %}",
                NULL, "too large");
    /* and each limit can be set */
    lim.iterations_max = 10;
    check_limit("{% for i in range(11) %}{% endfor %}", &lim, "more than the limit of 10 iterations");
    snug_template_limits_default(&lim);
    lim.steps_max = 1000;
    check_limit("{% for i in range(1000) %}{{ i }}{% endfor %}", &lim, "1000 steps");
    snug_template_limits_default(&lim);
    lim.output_bytes_max = 100;
    check_limit("{% for i in range(101) %}x{% endfor %}", &lim, "limit of 100 bytes");
    snug_template_limits_default(&lim);
    lim.memory_bytes_max = 1 << 20;
    check_limit("{% set ns = namespace(l=[0]) %}{% for i in range(30) %}{% set ns.l = ns.l + "
                "ns.l %}{% endfor %}",
                &lim, "bytes of memory");
    snug_template_limits_default(&lim);
    lim.depth_max = 20;
    char nested[128];
    size_t k = 0;
    k += (size_t)snprintf(nested, sizeof nested, "{{ ");
    for (int i = 0; i < 30; i++) nested[k++] = '[';
    nested[k++] = '1';
    for (int i = 0; i < 30; i++) nested[k++] = ']';
    snprintf(nested + k, sizeof nested - k, " }}");
    check_limit(nested, &lim, "deeper than the limit of 20");
    /* within the limits, the same templates render */
    snug_template_limits_default(&lim);
    char *out = NULL;
    size_t len = 0;
    snug_error err = {0};
    CHECK_OK(render_with("{% for i in range(10) %}x{% endfor %}", NULL, &lim, &out, &len, &err), &err);
    CHECK(len == 10, "rendered %zu bytes", len);
    snug_mem_free(out);
}

/* ---- memory --------------------------------------------------------------------- */

typedef struct oom_ctx {
    const char *text;
    size_t text_len;
    json_t *vars;
    char *want;
} oom_ctx;

static snug_status oom_op(void *p, snug_error *err)
{
    oom_ctx *c = p;
    snug_template *t = NULL;
    char *out = NULL;
    size_t len = 0;
    snug_status st = snug_template_compile(c->text, c->text_len, "mistral", &t, err);
    if (st == SNUG_OK) st = snug_template_render(t, c->vars, &out, &len, err);
    if (st == SNUG_OK) {
        CHECK(len == strlen(c->want) && memcmp(out, c->want, len) == 0, "render under OOM loop");
        snug_mem_free(out);
    }
    snug_template_free(t);
    return st;
}

static void test_oom_compile_and_render(void)
{
    json_t *msgs = NULL;
    json_t *cfg = load_config(DATA "mistral-v0.3.tokenizer_config.json");
    char *msg_text = read_text(DATA "messages.json");
    json_error_t jerr;
    msgs = json_loads(msg_text, 0, &jerr);
    snug_mem_free(msg_text);
    json_t *vars = json_pack("{sOsbssss}", "messages", msgs, "add_generation_prompt", 1,
                             "bos_token", "<s>", "eos_token", "</s>");
    oom_ctx c = {.vars = vars, .want = read_text(DATA "mistral-v0.3.rendered.txt")};
    json_t *tmpl = json_object_get(cfg, "chat_template");
    c.text = json_string_value(tmpl);
    c.text_len = json_string_length(tmpl);
    int failures = test_oom_loop("compile and render mistral-v0.3", oom_op, NULL, &c, 10000);
    CHECK(failures >= 10, "the OOM loop failed %d allocations before succeeding", failures);
    /* a template with every kind of value kept in variables and namespaces */
    c.text = "{% set ns = namespace(l=[], s='') %}{% for m in messages %}"
             "{% set ns.l = ns.l + [m.role] %}{% set ns.s = ns.s ~ m.content[:3] %}"
             "{% set kept = {'r': m.role, 'l': ns.l} %}{% endfor %}{% set t = (1, 'a') %}"
             "{{ ns.l | tojson }}{{ ns.s }}{{ t }}{{ messages | selectattr('role', 'equalto', "
             "'user') | map(attribute='content') | join('|') }}";
    c.text_len = strlen(c.text);
    snug_mem_free(c.want);
    c.want = snug_mem_strdup(SNUG_MEM_OTHER,
                             "[\"system\", \"user\", \"assistant\", \"user\"]YouHel4.And(1, 'a')"
                             "Hello! What is 2+2?|And 3+3?",
                             NULL);
    failures = test_oom_loop("namespaces and generators", oom_op, NULL, &c, 10000);
    CHECK(failures > 10, "the OOM loop failed %d allocations before succeeding", failures);
    snug_mem_free(c.want);
    json_decref(vars);
    json_decref(msgs);
    json_decref(cfg);
}

/* ---- threads ------------------------------------------------------------------- */

typedef struct thread_job {
    const snug_template *t;
    const json_t *vars;
    char *out;
    size_t len;
    snug_status st;
} thread_job;

static void *render_thread(void *p)
{
    thread_job *job = p;
    for (int i = 0; i < 50 && job->st == SNUG_OK; i++) {
        snug_mem_free(job->out);
        job->out = NULL;
        job->st = snug_template_render(job->t, job->vars, &job->out, &job->len, NULL);
    }
    return NULL;
}

static void test_threads_share_a_template(void)
{
    enum { N_THREADS = 4 };
    snug_template *t = NULL;
    snug_error err = {0};
    json_t *vars = NULL;
    CHECK_OK(snug_template_compile(g_rest, strlen(g_rest), "rest", &t, &err), &err);
    CHECK_OK(snug_json_parse(g_messages, strlen(g_messages), "vars", &vars, &err), &err);
    thread_job jobs[N_THREADS];
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        jobs[i] = (thread_job){.t = t, .vars = vars};
        pthread_create(&th[i], NULL, render_thread, &jobs[i]);
    }
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N_THREADS; i++) {
        CHECK(jobs[i].st == SNUG_OK && jobs[i].out &&
                  strncmp(jobs[i].out, "System: You are a helpful assistant.\n", 37) == 0 &&
                  jobs[i].len == strlen(jobs[i].out),
              "thread %d: %s", i, snug_status_str(jobs[i].st));
        snug_mem_free(jobs[i].out);
    }
    json_decref(vars);
    snug_template_free(t);
}

int main(void)
{
    snug_json_init();
    RUN(test_fixtures);
    RUN(test_renderings);
    RUN(test_fixture_raise_exception);
    RUN(test_llama2_style);
    RUN(test_llama3_style);
    RUN(test_chatml_style);
    RUN(test_first_then_rest_with_namespace);
    RUN(test_tools_tojson);
    RUN(test_macro_recursion);
    RUN(test_whitespace_control);
    RUN(test_printing_values);
    RUN(test_string_literals);
    RUN(test_operators);
    RUN(test_filters);
    RUN(test_tests_and_methods);
    RUN(test_statements);
    RUN(test_jinja_quirks);
    RUN(test_input_values);
    RUN(test_unsupported_constructs);
    RUN(test_runtime_errors);
    RUN(test_failure_trace);
    RUN(test_limits);
    RUN(test_oom_compile_and_render);
    RUN(test_threads_share_a_template);
    return test_summary();
}
