/*
 * tool_calls.c: tool-call formats and their parsing (tool_calls.h).
 */
#include "tool_calls.h"

#include <string.h>

static const snug_tool_format FORMATS[] = {
    {SNUG_TOOLS_JSON, "json", "", "", "", ", ", "", "[", "]", "", "arguments", 0},
    {SNUG_TOOLS_HERMES, "hermes", "", "<tool_call>\n", "\n</tool_call>", "\n", "", "", "", "<tool_call>", "arguments",
     0},
    {SNUG_TOOLS_MISTRAL, "mistral", "[TOOL_CALLS] [", "", "", ", ", "]", "", "", "[TOOL_CALLS]", "arguments", 9},
    {SNUG_TOOLS_LLAMA3, "llama3", "", "", "", "; ", "", "", "", "", "parameters", 0},
};

static const char PYTHON_TAG[] = "<|python_tag|>";

const snug_tool_format *snug_tool_format_of(const char *template_text)
{
    const char *t = template_text ? template_text : "";
    if (strstr(t, "<tool_call>")) return &FORMATS[SNUG_TOOLS_HERMES];
    if (strstr(t, "[TOOL_CALLS]")) return &FORMATS[SNUG_TOOLS_MISTRAL];
    if (strstr(t, PYTHON_TAG) || strstr(t, "ipython")) return &FORMATS[SNUG_TOOLS_LLAMA3];
    return &FORMATS[SNUG_TOOLS_JSON];
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && is_ws(*p)) p++;
    return p;
}

/* Takes the text lit at *p (moving past it); false when it is not there. */
static bool take(const char **p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0) return false;
    *p += n;
    return true;
}

/* The JSON value at *p (moving past it), or NULL. */
static json_t *value_at(const char **p, const char *end)
{
    json_error_t e;
    json_t *v = json_loadb(*p, (size_t)(end - *p), JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &e);
    if (v) *p += e.position;
    return v;
}

/* Whether name is the function name of one of tools. */
static bool known(const json_t *tools, const char *name)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const char *n = json_string_value(json_object_get(json_object_get(json_array_get(tools, i), "function"), "name"));
        if (n && strcmp(n, name) == 0) return true;
    }
    return false;
}

/* Appends the call that v writes ({"name": N, "arguments" or "parameters":
 * an object, or a string of one}) to calls; false when v is not one. */
static bool add_call(json_t *calls, const json_t *v, const json_t *tools)
{
    const char *name = json_string_value(json_object_get(v, "name"));
    if (!json_is_object(v) || !name || !known(tools, name)) return false;
    const json_t *a = json_object_get(v, "arguments");
    if (!a) a = json_object_get(v, "parameters");
    json_t *args = NULL;
    if (!a)
        args = json_object();
    else if (json_is_object(a))
        args = json_incref((json_t *)a);
    else if (json_is_string(a))
        args = json_loadb(json_string_value(a), json_string_length(a), 0, NULL);
    if (!json_is_object(args)) {
        json_decref(args);
        return false;
    }
    json_t *call = json_pack("{s:s, s:o}", "name", name, "arguments", args);
    return call && json_array_append_new(calls, call) == 0;
}

/* Appends the calls of v (a call, or a list of calls when list) to calls. */
static bool add_calls(json_t *calls, const json_t *v, const json_t *tools, bool list)
{
    if (!list || !json_is_array(v)) return add_call(calls, v, tools);
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!add_call(calls, json_array_get(v, i), tools)) return false;
    return json_array_size(v) > 0;
}

/* Takes the call at *p (whitespace before it skipped) into calls; false
 * when what is there is not one. */
static bool take_call(const char **p, const char *end, const json_t *tools, json_t *calls)
{
    *p = skip_ws(*p, end);
    json_t *v = value_at(p, end);
    bool ok = v && add_call(calls, v, tools);
    json_decref(v);
    return ok;
}

/* The calls from p on, in format f: true when the rest of the text is
 * exactly calls (whitespace around them aside; a last Hermes block may lack
 * its closing tag, the output having ended there). */
static bool read_calls(const snug_tool_format *f, const char *p, const char *end, const json_t *tools, json_t *calls)
{
    p = skip_ws(p, end);
    switch (f->style) {
    case SNUG_TOOLS_HERMES:
        while (p < end) {
            if (!take(&p, end, "<tool_call>") || !take_call(&p, end, tools, calls)) return false;
            p = skip_ws(p, end);
            if (!take(&p, end, "</tool_call>") && p < end) return false;
            p = skip_ws(p, end);
        }
        return json_array_size(calls) > 0;
    case SNUG_TOOLS_MISTRAL: {
        if (!take(&p, end, "[TOOL_CALLS]")) return false;
        p = skip_ws(p, end);
        json_t *v = value_at(&p, end);
        bool ok = json_is_array(v) && add_calls(calls, v, tools, true);
        json_decref(v);
        return ok && skip_ws(p, end) == end;
    }
    case SNUG_TOOLS_LLAMA3:
        take(&p, end, PYTHON_TAG);
        for (;;) {
            if (!take_call(&p, end, tools, calls)) return false;
            p = skip_ws(p, end);
            if (p == end) return true;
            if (!take(&p, end, ";")) return false;
        }
    case SNUG_TOOLS_JSON: {
        json_t *v = value_at(&p, end);
        bool ok = v && add_calls(calls, v, tools, true);
        json_decref(v);
        return ok && skip_ws(p, end) == end;
    }
    }
    return false;
}

snug_status snug_tool_calls_parse(const snug_tool_format *f, const char *text, size_t len, const json_t *tools,
                                  json_t **calls, size_t *content_len, snug_error *err)
{
    *calls = NULL;
    *content_len = len;
    const char *end = text + len, *at = text;
    if (f->marker[0]) { /* the calls begin at the first marker */
        size_t m = strlen(f->marker);
        while (at + m <= end && memcmp(at, f->marker, m) != 0) at++;
        if (at + m > end) return SNUG_OK;
    }
    json_t *found = json_array();
    if (!found) return snug_errorf(err, SNUG_NOMEM, "tool calls: no memory");
    if (!read_calls(f, at, end, tools, found)) {
        json_decref(found);
        return SNUG_OK;
    }
    while (at > text && is_ws(at[-1])) at--;
    *calls = found;
    *content_len = (size_t)(at - text);
    return SNUG_OK;
}

size_t snug_tool_calls_streamable(const snug_tool_format *f, const char *text, size_t len, bool *calls_at)
{
    *calls_at = false;
    if (!f->marker[0]) { /* calls are the whole output: held while it may be */
        const char *p = skip_ws(text, text + len);
        size_t n = (size_t)(text + len - p), tag = strlen(PYTHON_TAG);
        if (n == 0) return 0;
        bool tagged = f->style == SNUG_TOOLS_LLAMA3 && memcmp(p, PYTHON_TAG, SNUG_MIN(n, tag)) == 0;
        if (*p == '{' || (*p == '[' && f->style == SNUG_TOOLS_JSON) || (tagged && n >= tag)) {
            *calls_at = true;
            return (size_t)(p - text);
        }
        return tagged ? 0 : len;
    }
    size_t m = strlen(f->marker);
    for (size_t i = 0; i < len; i++) {
        size_t n = SNUG_MIN(m, len - i);
        if (memcmp(text + i, f->marker, n) != 0) continue;
        *calls_at = n == m;
        return i; /* the marker, or a piece of it the text ends with */
    }
    return len;
}
