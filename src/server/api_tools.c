/*
 * api_tools.c: a chat request's `tools`, `tool_choice` and
 * `parallel_tool_calls` (api_impl.h). With tool_choice "required" or a
 * named function the reply must be calls: they are compiled into the
 * request's grammar, in the model's tool-call format (chat/tool_calls.h),
 * each function's arguments kept to its parameters schema, so that every
 * call parses and validates.
 */
#include "api_impl.h"

#include "base/strbuf.h"
#include "grammar/schema.h"

#include <stdio.h>
#include <string.h>

enum { TOOLS_MAX = 128, NAME_MAX_CHARS = 64 };

static const char NAME_CHARS[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";

/* The function name of tools[i] (a checked tool), as a JSON string. */
static const json_t *tool_name(const json_t *tools, size_t i)
{
    return json_object_get(json_object_get(json_array_get(tools, i), "function"), "name");
}

/* Whether s is a function name OpenAI takes: 1 to 64 letters, digits,
 * underscores and dashes. */
static bool good_name(const json_t *s)
{
    const char *t = json_string_value(s);
    size_t n = t ? json_string_length(s) : 0;
    return n > 0 && n <= NAME_MAX_CHARS && strspn(t, NAME_CHARS) == n;
}

/* Checks tools[i]: {"type": "function", "function": {"name", "description",
 * "parameters", "strict"}}, its name not one of those before it. */
static snug_status check_tool(const json_t *tools, size_t i, snug_api_error *err)
{
    static const char *const keys[] = {"type", "function", NULL}, *const fn_keys[] = {"name", "description",
                                                                                       "parameters", "strict", NULL};
    char at[64];
    const json_t *t = json_array_get(tools, i), *fn = json_object_get(t, "function");
    snprintf(at, sizeof at, "tools[%zu]", i);
    if (!json_is_object(t) || !json_is_object(fn))
        return api_wrong(err, at, "a tool {\"type\": \"function\", \"function\": {\"name\": ...}}", t);
    snug_status st = api_only_keys(t, at, keys, err);
    if (st != SNUG_OK) return st;
    snprintf(at, sizeof at, "tools[%zu].type", i);
    if (!api_is_str(json_object_get(t, "type"), "function")) return api_wrong(err, at, "\"function\"", json_object_get(t, "type"));
    snprintf(at, sizeof at, "tools[%zu].function", i);
    st = api_only_keys(fn, at, fn_keys, err);
    if (st != SNUG_OK) return st;
    const json_t *name = json_object_get(fn, "name"), *desc = api_opt(fn, "description");
    const json_t *params = api_opt(fn, "parameters"), *strict = api_opt(fn, "strict");
    snprintf(at, sizeof at, "tools[%zu].function.name", i);
    if (!good_name(name)) return api_wrong(err, at, "a name of 1 to 64 letters, digits, underscores and dashes", name);
    for (size_t k = 0; k < i; k++)
        if (json_equal(name, tool_name(tools, k)))
            return api_bad(err, at, "\"%s\" names tools[%zu] too: each function has its own name",
                           json_string_value(name), k);
    snprintf(at, sizeof at, "tools[%zu].function.description", i);
    if (desc && !json_is_string(desc)) return api_wrong(err, at, "a string", desc);
    snprintf(at, sizeof at, "tools[%zu].function.parameters", i);
    if (params && !json_is_object(params)) return api_wrong(err, at, "a JSON schema (an object)", params);
    snprintf(at, sizeof at, "tools[%zu].function.strict", i);
    if (strict && !json_is_boolean(strict)) return api_wrong(err, at, "true or false", strict);
    return SNUG_OK;
}

/* api_gbnf_literal of a NUL-terminated s. */
static void put_literal(snug_strbuf *b, const char *s) { api_gbnf_literal(b, s, strlen(s)); }

/* The grammar of the calls a reply must be: in the format f, one call or
 * (parallel) one or more, each of a function in tools (only (name) when
 * given), {"name": "N", "<args>": ARGS} with ARGS its parameters' JSON. */
static snug_status calls_grammar(snug_api_request *r, const snug_tool_format *f, const char *only,
                                 snug_api_error *err)
{
    snug_error e = {0};
    snug_strbuf g = {.err = &e};
    bool several = r->parallel_tool_calls && !only;
    const char *begin = several && f->several_begin[0] ? f->several_begin : f->begin;
    const char *end = several && f->several_end[0] ? f->several_end : f->end;
    snug_strbuf_printf(&g, "root ::= ");
    put_literal(&g, begin);
    snug_strbuf_printf(&g, "call ");
    if (several) {
        snug_strbuf_printf(&g, "( ");
        put_literal(&g, f->sep);
        snug_strbuf_printf(&g, "call )* ");
    }
    put_literal(&g, end);
    snug_strbuf_printf(&g, "\ncall ::= ");
    put_literal(&g, f->open);
    snug_strbuf_printf(&g, "( ");
    snug_status st = SNUG_OK;
    bool first = true;
    for (size_t i = 0; i < json_array_size(r->tools); i++) { /* inline: the names' common start is merged */
        const char *name = json_string_value(tool_name(r->tools, i));
        if (only && strcmp(name, only) != 0) continue;
        char head[160];
        snprintf(head, sizeof head, "{\"name\": \"%s\", \"%s\": ", name, f->args_key);
        snug_strbuf_printf(&g, "%s", first ? "" : "| ");
        put_literal(&g, head);
        snug_strbuf_printf(&g, "tool%zu-args \"}\" ", i);
        first = false;
    }
    snug_strbuf_printf(&g, ") ");
    put_literal(&g, f->close);
    snug_strbuf_printf(&g, "\n");
    json_t *none = json_pack("{s:s, s:{}}", "type", "object", "properties");
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(r->tools); i++) {
        const char *name = json_string_value(tool_name(r->tools, i));
        if (only && strcmp(name, only) != 0) continue;
        const json_t *params = api_opt(json_object_get(json_array_get(r->tools, i), "function"), "parameters");
        char rule[32], what[64];
        snprintf(what, sizeof what, "tools[%zu].function.parameters", i);
        snprintf(rule, sizeof rule, "tool%zu-args", i);
        st = none ? snug_schema_to_gbnf_rule(params ? params : none, what, rule, &g, &e) : SNUG_NOMEM;
        if (st != SNUG_OK) st = api_compile_failed(err, what, st, &e);
    }
    json_decref(none);
    snug_schema_gbnf_shared(&g);
    if (st == SNUG_OK && g.failed) st = api_overloaded(err, &e);
    if (st == SNUG_OK) st = api_compile(r, g.p, g.len, "tool_choice", err);
    snug_strbuf_free(&g);
    return st;
}

/* tool_choice: "none", "auto", "required" or {"type": "function",
 * "function": {"name": N}} naming one of the tools; *only gets N. */
static snug_status read_choice(const json_t *body, snug_api_request *r, const char **only, snug_api_error *err)
{
    static const char *const keys[] = {"type", "function", NULL}, *const fn_keys[] = {"name", NULL};
    static const char WHAT[] = "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
    const json_t *c = api_opt(body, "tool_choice");
    *only = NULL;
    r->tool_choice = r->tools ? SNUG_TOOL_CHOICE_AUTO : SNUG_TOOL_CHOICE_NONE;
    if (!c) return SNUG_OK;
    if (api_is_str(c, "none")) r->tool_choice = SNUG_TOOL_CHOICE_NONE;
    else if (api_is_str(c, "required")) r->tool_choice = SNUG_TOOL_CHOICE_REQUIRED;
    else if (json_is_object(c)) r->tool_choice = SNUG_TOOL_CHOICE_FUNCTION;
    else if (!api_is_str(c, "auto")) return api_wrong(err, "tool_choice", WHAT, c);
    if (r->tool_choice == SNUG_TOOL_CHOICE_FUNCTION) {
        const json_t *fn = json_object_get(c, "function"), *name = json_object_get(fn, "name");
        snug_status st = api_only_keys(c, "tool_choice", keys, err);
        if (st == SNUG_OK && json_is_object(fn)) st = api_only_keys(fn, "tool_choice.function", fn_keys, err);
        if (st != SNUG_OK) return st;
        if (!api_is_str(json_object_get(c, "type"), "function") || !json_is_string(name))
            return api_wrong(err, "tool_choice", WHAT, c);
        *only = json_string_value(name);
        for (size_t i = 0; i < json_array_size(r->tools); i++)
            if (json_equal(name, tool_name(r->tools, i)))
                return SNUG_OK;
        char shown[72];
        return api_bad(err, "tool_choice.function.name", "\"%s\" is not one of the request's tools",
                       snug_bytes_shown(*only, json_string_length(name), shown, sizeof shown));
    }
    if (r->tool_choice == SNUG_TOOL_CHOICE_REQUIRED && !r->tools)
        return api_bad(err, "tool_choice", "\"required\" needs tools to call: the request has none");
    return SNUG_OK;
}

snug_status api_parse_tools(const json_t *body, const snug_api_limits *lim, snug_api_request *r, snug_api_error *err)
{
    const json_t *tools = api_opt(body, "tools"), *parallel = api_opt(body, "parallel_tool_calls");
    r->parallel_tool_calls = true;
    if (parallel && !json_is_boolean(parallel)) return api_wrong(err, "parallel_tool_calls", "true or false", parallel);
    if (parallel) r->parallel_tool_calls = json_is_true(parallel);
    if (tools && !json_is_array(tools)) return api_wrong(err, "tools", "a list of tools", tools);
    if (json_array_size(tools) > TOOLS_MAX)
        return api_bad(err, "tools", "has %zu tools; at most %d are accepted", json_array_size(tools), TOOLS_MAX);
    for (size_t i = 0; i < json_array_size(tools); i++) {
        snug_status st = check_tool(tools, i, err);
        if (st != SNUG_OK) return st;
    }
    r->tools = json_array_size(tools) > 0 ? tools : NULL;
    r->tool_format = lim->tool_format ? lim->tool_format : snug_tool_format_of(NULL);
    const char *only = NULL;
    snug_status st = read_choice(body, r, &only, err);
    if (st != SNUG_OK || (r->tool_choice != SNUG_TOOL_CHOICE_REQUIRED && r->tool_choice != SNUG_TOOL_CHOICE_FUNCTION))
        return st;
    if (r->grammar)
        return api_bad(err, "tool_choice", "a reply that must call a tool cannot also keep to a response_format "
                                           "or grammar: ask for one or the other");
    return calls_grammar(r, r->tool_format, only, err);
}
