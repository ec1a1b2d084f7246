/*
 * fuzz_jinja.c: fuzzes chat templates: the input is template text, which
 * is compiled (snug_template_compile) and rendered (snug_template_render_
 * limited, small limits so that every input finishes quickly) with a
 * conversation that has a system prompt, tool calls, a tool result and tool
 * definitions. Compile and render together are the "parse" of the shared
 * driver (fuzz_common.h), so an allocation fails in either; a failure must
 * be clean and name the template. A template that renders must render
 * again, with fault injection off, to the same bytes.
 */
#include "fuzz_common.h"
#include "chat/jinja.h"
#include "base/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAME = "fuzz/template.jinja";

static const char g_vars_text[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are helpful.\\n\"},"
    "{\"role\": \"user\", \"content\": \"What is the weather in Paris? \\u00e9\\u65e5\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\","
    " \"id\": \"call12345\", \"function\": {\"name\": \"get_weather\", \"arguments\":"
    " {\"city\": \"Paris\", \"days\": [1, 2.5, null, true]}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"content\": \"{\\\"t\\\": 20}\"},"
    "{\"role\": \"assistant\", \"content\": \" It is 20 \\\"C\\\". \"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"thanks\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
    " \"description\": \"Weather\", \"parameters\": {\"type\": \"object\", \"properties\":"
    " {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}],"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true}";

/* The variables, parsed once (outside the driver's measurements). */
static json_t *g_vars;

typedef struct rendered {
    snug_template *t;
    char *out;
    size_t len;
} rendered;

static rendered g_result;

static void fuzz_limits(snug_template_limits *lim)
{
    snug_template_limits_default(lim);
    lim->output_bytes_max = 1 << 20;
    lim->memory_bytes_max = 16 << 20;
    lim->steps_max = 200 * 1000;
    lim->iterations_max = 20 * 1000;
    lim->depth_max = 200;
}

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    snug_template_limits lim;
    fuzz_limits(&lim);
    memset(&g_result, 0, sizeof g_result);
    snug_status st =
        snug_template_compile((const char *)in->data, in->size, in->name, &g_result.t, err);
    if (st != SNUG_OK) return st;
    st = snug_template_render_limited(g_result.t, g_vars, &lim, &g_result.out, &g_result.len, err);
    if (st != SNUG_OK) {
        snug_template_free(g_result.t);
        g_result.t = NULL;
        return st;
    }
    *parsed = &g_result;
    return SNUG_OK;
}

static void check(const fuzz_input *in, void *parsed)
{
    (void)in;
    rendered *r = parsed;
    REQUIRE(r->out != NULL && r->out[r->len] == '\0');
    snug_template_limits lim;
    fuzz_limits(&lim);
    char *again = NULL;
    size_t len = 0;
    snug_error err = {0};
    snug_status st = snug_template_render_limited(r->t, g_vars, &lim, &again, &len, &err);
    if (st != SNUG_OK) {
        fprintf(stderr, "the second render failed: %s\n", err.msg);
        abort();
    }
    REQUIRE(len == r->len && memcmp(again, r->out, len) == 0);
    snug_mem_free(again);
    snug_mem_free(r->out);
    snug_template_free(r->t);
}

static const fuzz_target g_target = {NAME, false, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_vars) {
        snug_error err = {0};
        if (snug_json_parse(g_vars_text, strlen(g_vars_text), "vars", &g_vars, &err) != SNUG_OK) {
            fprintf(stderr, "fuzz_jinja: %s\n", err.msg);
            abort();
        }
    }
    fuzz_drive(&g_target, data, size);
    return 0;
}
