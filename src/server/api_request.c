/*
 * api_request.c: an OpenAI completions or chat completions body into a
 * checked snug_api_request, or an OpenAI-shaped error naming the field.
 *
 * The order: the bytes (size, UTF-8, nesting depth), the JSON (admitted and
 * parsed by snug_json_parse), then the fields: the prompt or the messages,
 * sampling, stopping, output. The first rule broken is the one reported.
 * The field readers below treat an absent field and JSON null alike, and
 * leave the default in place for both.
 */
#include "api_impl.h"

#include "base/mem.h"
#include "base/json.h"
#include "engine/spec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void snug_api_limits_default(snug_api_limits *l)
{
    *l = (snug_api_limits){
        .max_body_bytes = 1u << 20,
        .max_depth = 64,
        .n_vocab = INT32_MAX,
        .max_n = 16,
        .max_prompts = 16,
        .max_inputs = 256,
        .max_model_len = 0,
        .tool_format = snug_tool_format_of(NULL),
    };
}

void snug_api_limits_set_template(snug_api_limits *l, const char *template_text)
{
    l->tool_format = snug_tool_format_of(template_text);
}

/* ---- errors (api_fields.c makes them) ----------------------------------- */

/* ---- field readers -------------------------------------------------------
 * Each reads obj[key]; absent or null leaves *out as it is. A value of the
 * wrong type or out of range is a 400 naming key. */

/* A JSON integer, or a real with an integral value in int64 range (as
 * OpenAI's server takes 2.0 for 2), into *out. */
static bool as_int(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return true;
    }
    if (!json_is_real(v)) return false;
    double x = json_real_value(v);
    if (!(x >= -0x1p63 && x < 0x1p63) || x != floor(x)) return false;
    *out = (int64_t)x;
    return true;
}

static snug_status get_int(const json_t *obj, const char *key, int64_t lo, int64_t hi,
                           int64_t *out, bool *present, snug_api_error *err)
{
    const json_t *v = api_opt(obj, key);
    if (present) *present = v != NULL;
    if (!v) return SNUG_OK;
    int64_t x = 0;
    if (!as_int(v, &x) || x < lo || x > hi) {
        char what[96];
        if (hi == INT64_MAX && lo == INT64_MIN)
            snprintf(what, sizeof what, "an integer");
        else
            snprintf(what, sizeof what, "an integer in [%lld, %lld]", (long long)lo,
                     (long long)hi);
        return api_wrong(err, key, what, v);
    }
    *out = x;
    return SNUG_OK;
}

/* A number in [lo, hi], or in (lo, hi] when lo_open. */
static snug_status get_real(const json_t *obj, const char *key, double lo, double hi,
                            bool lo_open, float *out, snug_api_error *err)
{
    const json_t *v = api_opt(obj, key);
    if (!v) return SNUG_OK;
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(x) || x < lo || (lo_open && x == lo) || x > hi) {
        char what[96];
        snprintf(what, sizeof what, "a number in %c%g, %g]", lo_open ? '(' : '[', lo, hi);
        return api_wrong(err, key, what, v);
    }
    *out = (float)x;
    return SNUG_OK;
}

static snug_status get_bool(const json_t *obj, const char *key, bool *out, snug_api_error *err)
{
    const json_t *v = api_opt(obj, key);
    if (!v) return SNUG_OK;
    if (!json_is_boolean(v)) return api_wrong(err, key, "true or false", v);
    *out = json_is_true(v);
    return SNUG_OK;
}

static snug_status get_string(const json_t *obj, const char *key, const char **out,
                              snug_api_error *err)
{
    const json_t *v = api_opt(obj, key);
    if (!v) return SNUG_OK;
    if (!json_is_string(v)) return api_wrong(err, key, "a string", v);
    *out = json_string_value(v);
    return SNUG_OK;
}

/* Checks that the JSON array list (named param) holds 1 or more token ids
 * in [0, n_vocab); writes them to dst when it is not NULL. */
static snug_status read_ids(const json_t *list, const char *param, int32_t n_vocab,
                            int32_t *dst, snug_api_error *err)
{
    char what[64], at[64];
    snprintf(what, sizeof what, "a token id in [0, %d)", (int)n_vocab);
    if (json_array_size(list) == 0) return api_wrong(err, param, "a non-empty list of token ids", list);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *v = json_array_get(list, i);
        int64_t id = -1;
        if (!as_int(v, &id) || id < 0 || id >= n_vocab)
            return api_wrong(err, api_path(at, "%s[%zu]", param, i), what, v);
        if (dst) dst[i] = (int32_t)id;
    }
    return SNUG_OK;
}

/* ---- the body ------------------------------------------------------------ */

/* The deepest nesting of arrays and objects in the n bytes of JSON text at
 * s, counting brackets outside strings (exact for valid JSON); stops once
 * past max, so a hostile body costs one pass. */
static int json_depth(const char *s, size_t n, int max)
{
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < n && deepest <= max; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\')
                i++; /* the escaped byte cannot end the string */
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            depth++;
            deepest = SNUG_MAX(deepest, depth);
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return deepest;
}

/* The checks made before jansson sees the bytes. */
static snug_status check_bytes(const char *body, size_t len, const snug_api_limits *lim,
                               snug_api_error *err)
{
    if (len == 0) return api_bad(err, "", "the request body is empty; expected a JSON object");
    if (len > lim->max_body_bytes) {
        api_bad(err, "", "the request body is %zu bytes; at most %zu are accepted", len,
            lim->max_body_bytes);
        err->status = 413;
        err->code = "body_too_large";
        return SNUG_INVALID;
    }
    if (!snug_utf8_valid(body, len)) return api_bad(err, "", "the request body is not valid UTF-8");
    if (json_depth(body, len, lim->max_depth) > lim->max_depth)
        return api_bad(err, "", "the request body nests arrays and objects more than %d deep",
                   lim->max_depth);
    return SNUG_OK;
}

/* Parses the body into *root with snug_json_parse, whose messages
 * ("body: not valid JSON: line 1, ...", "body: expected a JSON object at
 * the top, found ...") are reworded for a client. */
static snug_status parse_json(const char *body, size_t len, const snug_api_limits *lim,
                              json_t **root, snug_api_error *err)
{
    snug_error e = {0};
    size_t need = lim->parse_bytes_max ? snug_json_parse_bound(body, len) : 0;
    if (need > lim->parse_bytes_max) {
        err->status = 413;
        err->type = "invalid_request_error";
        err->code = "body_too_large";
        err->param[0] = '\0';
        snprintf(err->message, sizeof err->message, "parsing this body's JSON would take %.1f MiB, "
                 "more than the server's %.1f MiB of memory for requests: send fewer, larger "
                 "values (many small numbers or objects cost the most)", need / 1048576.0,
                 lim->parse_bytes_max / 1048576.0);
        return SNUG_INVALID;
    }
    snug_status st = snug_json_parse(body, len, "body", root, &e);
    if (st == SNUG_NOMEM) return api_overloaded(err, &e);
    if (st == SNUG_OK) return SNUG_OK;
    const char *invalid = strstr(e.msg, "not valid JSON: ");
    const char *found = strstr(e.msg, ", found ");
    if (invalid) return api_bad(err, "", "the body is %s", invalid);
    if (found) return api_bad(err, "", "the body is not a JSON object: got %s", found + 8);
    return api_bad(err, "", "the body is not a JSON object (%s)", e.msg);
}

/* ---- completions: the prompt ------------------------------------------- */

static const char PROMPT_WHAT[] = "a non-empty string, a list of strings, a list of token ids "
                                  "or a list of lists of token ids";

/* Walks the prompt p: with out and ids NULL it checks p and counts its
 * prompts and token ids into *n_prompts and *n_ids; given room for those,
 * it fills them in from the p that was checked. */
static snug_status walk_prompt(const json_t *p, const char *field, int max, const snug_api_limits *lim,
                               snug_api_prompt *out, int32_t *ids, size_t *n_prompts, size_t *n_ids,
                               snug_api_error *err)
{
    char first_at[64];
    size_t n = json_array_size(p);
    const json_t *first = json_array_get(p, 0);
    int64_t id;
    *n_prompts = *n_ids = 0;
    if (json_is_string(p)) { /* one text */
        if (json_string_length(p) == 0) return api_wrong(err, field, "a non-empty string", p);
        if (out) out[0] = (snug_api_prompt){json_string_value(p), json_string_length(p), NULL, 0};
        *n_prompts = 1;
        return SNUG_OK;
    }
    if (!json_is_array(p) || n == 0) return api_wrong(err, field, PROMPT_WHAT, p);
    if (as_int(first, &id) || json_is_number(first)) { /* one list of ids */
        snug_status st = read_ids(p, field, lim->n_vocab, ids, err);
        if (st != SNUG_OK) return st;
        if (out) out[0] = (snug_api_prompt){NULL, 0, ids, (int64_t)n};
        *n_prompts = 1;
        *n_ids = n;
        return SNUG_OK;
    }
    if (!json_is_string(first) && !json_is_array(first))
        return api_wrong(err, api_path(first_at, "%s[0]", field), "a string, a token id or a list of token ids",
                         first);
    if (n > (size_t)max)
        return api_bad(err, field, "is a list of %zu %s; at most %d are accepted", n,
                       strcmp(field, "prompt") == 0 ? "prompts" : "inputs", max);
    char what[96];
    for (size_t i = 0; i < n; i++) { /* texts, or lists of ids */
        const json_t *v = json_array_get(p, i);
        char at[64];
        api_path(at, "%s[%zu]", field, i);
        if (json_is_string(first)) {
            snprintf(what, sizeof what, "a non-empty string (as %s[0] is)", field);
            if (!json_is_string(v) || json_string_length(v) == 0) return api_wrong(err, at, what, v);
            if (out)
                out[i] = (snug_api_prompt){json_string_value(v), json_string_length(v), NULL, 0};
        } else {
            snprintf(what, sizeof what, "a list of token ids (as %s[0] is)", field);
            if (!json_is_array(v)) return api_wrong(err, at, what, v);
            snug_status st = read_ids(v, at, lim->n_vocab, ids ? ids + *n_ids : NULL, err);
            if (st != SNUG_OK) return st;
            if (out)
                out[i] = (snug_api_prompt){NULL, 0, ids + *n_ids, (int64_t)json_array_size(v)};
            *n_ids += json_array_size(v);
        }
    }
    *n_prompts = n;
    return SNUG_OK;
}

/* Reads the required prompt (the field of that name: "prompt", or an
 * embedding's "input"; at most max of them) into r->prompts: one block,
 * the prompts followed by every token id. */
static snug_status parse_prompt(const json_t *body, const char *field, int max, const snug_api_limits *lim,
                                snug_api_request *r, snug_api_error *err)
{
    const json_t *p = api_opt(body, field);
    if (!p) return api_bad(err, field, "is required: expected %s", PROMPT_WHAT);
    size_t n_prompts = 0, n_ids = 0;
    snug_status st = walk_prompt(p, field, max, lim, NULL, NULL, &n_prompts, &n_ids, err);
    if (st != SNUG_OK) return st;
    snug_error e = {0};
    r->prompts = snug_mem_alloc(SNUG_MEM_OTHER,
                                n_prompts * sizeof *r->prompts + n_ids * sizeof(int32_t), &e);
    if (!r->prompts) return api_overloaded(err, &e);
    r->n_prompts = (int)n_prompts;
    int32_t *ids = (int32_t *)(r->prompts + n_prompts);
    return walk_prompt(p, field, max, lim, r->prompts, ids, &n_prompts, &n_ids, err);
}

/* ---- chat: the messages ---------------------------------------------------- */

static const char *const ROLES[] = {"system", "developer", "user", "assistant", "tool"};
static const char ROLES_WHAT[] =
    "one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\"";

static bool is_role(const char *s)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(ROLES); i++)
        if (strcmp(s, ROLES[i]) == 0) return true;
    return false;
}

/* A 400 unless obj[key] is a string (named param); absent or null passes
 * unless required. */
static snug_status check_string(const json_t *obj, const char *key, bool required,
                                const char *param, snug_api_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if ((!v || json_is_null(v)) && !required) return SNUG_OK;
    return json_is_string(v) ? SNUG_OK : api_wrong(err, param, "a string", v);
}

/* Checks messages[i].tool_calls when given: a list of objects, each with a
 * function {"name": string, "arguments": string} (what templates print)
 * and, when given, a string id and type. */
static snug_status check_tool_calls(const json_t *m, size_t i, snug_api_error *err)
{
    const json_t *calls = api_opt(m, "tool_calls");
    char at[64];
    if (!calls) return SNUG_OK;
    if (!json_is_array(calls))
        return api_wrong(err, api_path(at, "messages[%zu].tool_calls", i), "a list of tool calls", calls);
    snug_status st = SNUG_OK;
    for (size_t k = 0; st == SNUG_OK && k < json_array_size(calls); k++) {
        const json_t *call = json_array_get(calls, k), *fn = json_object_get(call, "function");
        if (!json_is_object(call))
            return api_wrong(err, api_path(at, "messages[%zu].tool_calls[%zu]", i, k),
                         "an object {\"type\": \"function\", \"function\": {...}}", call);
        st = check_string(call, "id", false, api_path(at, "messages[%zu].tool_calls[%zu].id", i, k),
                          err);
        if (st == SNUG_OK)
            st = check_string(call, "type", false,
                              api_path(at, "messages[%zu].tool_calls[%zu].type", i, k), err);
        if (st == SNUG_OK && !json_is_object(fn))
            st = api_wrong(err, api_path(at, "messages[%zu].tool_calls[%zu].function", i, k),
                       "an object {\"name\": ..., \"arguments\": ...}", fn);
        if (st == SNUG_OK)
            st = check_string(fn, "name", true,
                              api_path(at, "messages[%zu].tool_calls[%zu].function.name", i, k), err);
        if (st == SNUG_OK)
            st = check_string(fn, "arguments", true,
                              api_path(at, "messages[%zu].tool_calls[%zu].function.arguments", i, k),
                              err);
    }
    return st;
}

/* Checks messages[i]'s content: a string or a list of text parts (or null
 * or absent for an assistant, as after a tool call). *join_bytes gets the
 * bytes its text parts take joined, or 0 when it is not a list. */
static snug_status check_content(const json_t *m, size_t i, const char *role, size_t *join_bytes,
                                 snug_api_error *err)
{
    char at[64];
    const json_t *content = api_opt(m, "content");
    api_path(at, "messages[%zu].content", i);
    if (!content) {
        if (strcmp(role, "assistant") == 0) return SNUG_OK;
        return api_bad(err, at, "is required for a message of role \"%s\"", role);
    }
    if (json_is_string(content)) return SNUG_OK;
    if (!json_is_array(content)) return api_wrong(err, at, "a string or a list of text parts", content);
    for (size_t j = 0; j < json_array_size(content); j++) {
        const json_t *part = json_array_get(content, j);
        const json_t *type = api_opt(part, "type"), *text = api_opt(part, "text");
        if (!json_is_object(part))
            return api_wrong(err, api_path(at, "messages[%zu].content[%zu]", i, j),
                         "an object {\"type\": \"text\", \"text\": ...}", part);
        api_path(at, "messages[%zu].content[%zu].type", i, j);
        if (!json_is_string(type)) return api_wrong(err, at, "\"text\"", type);
        if (strcmp(json_string_value(type), "text") != 0) {
            char shown[48];
            return api_bad(err, at, "only text content is supported, got the type \"%s\"",
                           snug_bytes_shown(json_string_value(type), json_string_length(type), shown,
                                            sizeof shown));
        }
        if (!json_is_string(text))
            return api_wrong(err, api_path(at, "messages[%zu].content[%zu].text", i, j), "a string", text);
        *join_bytes += json_string_length(text) + (j > 0);
    }
    return SNUG_OK;
}

/* Checks messages[i]: an object with a known role, a content (see
 * check_content), and, when given, a string name, tool_call_id,
 * reasoning_content and reasoning and well-formed tool_calls: every field a template prints as a string is
 * one, so that no template meets a None or a number where it adds text.
 * *join_bytes as for check_content. */
static snug_status check_message(const json_t *m, size_t i, size_t *join_bytes,
                                 snug_api_error *err)
{
    char at[64];
    *join_bytes = 0;
    if (!json_is_object(m))
        return api_wrong(err, api_path(at, "messages[%zu]", i), "an object with a role and content", m);
    const json_t *role = api_opt(m, "role");
    api_path(at, "messages[%zu].role", i);
    if (!role) return api_bad(err, at, "is required: expected %s", ROLES_WHAT);
    if (!json_is_string(role) || !is_role(json_string_value(role)))
        return api_wrong(err, at, ROLES_WHAT, role);
    snug_status st = check_content(m, i, json_string_value(role), join_bytes, err);
    if (st == SNUG_OK) st = check_string(m, "name", false, api_path(at, "messages[%zu].name", i), err);
    if (st == SNUG_OK)
        st = check_string(m, "tool_call_id", false, api_path(at, "messages[%zu].tool_call_id", i),
                          err);
    for (int k = 0; st == SNUG_OK && k < 2; k++) {
        const char *key = k == 0 ? "reasoning_content" : "reasoning";
        st = check_string(m, key, false, api_path(at, "messages[%zu].%s", i, key), err);
    }
    if (st == SNUG_OK) st = check_tool_calls(m, i, err);
    return st;
}

/* Replaces m's list of text parts by one string: the parts' texts joined
 * with "\n" (as vLLM does), built in buf. */
static void join_parts(json_t *m, char *buf)
{
    const json_t *content = json_object_get(m, "content");
    size_t n = 0;
    for (size_t j = 0; j < json_array_size(content); j++) {
        const json_t *text = json_object_get(json_array_get(content, j), "text");
        if (j > 0) buf[n++] = '\n';
        memcpy(buf + n, json_string_value(text), json_string_length(text));
        n += json_string_length(text);
    }
    json_t *s = json_stringn_nocheck(buf, n);
    SNUG_ASSERT(s != NULL && json_object_set_new(m, "content", s) == 0);
}

/* Removes obj's members that are null (the API reads null as omitted), so
 * that a template finds them undefined rather than None. Only frees. */
static void drop_nulls(json_t *obj)
{
    const char *key;
    json_t *v;
    void *next;
    json_object_foreach_safe(obj, next, key, v) {
        if (json_is_null(v)) json_object_del(obj, key);
    }
}

/* What setting a member of the object m may allocate in jansson: the
 * member's entry (under 128 bytes with a short key) and, when the table
 * grows first, its new buckets (16 bytes each, at most twice the members). */
static size_t set_bytes(const json_t *m)
{
    return snug_mem_held_bytes(128) + snug_mem_held_bytes(32 * (json_object_size(m) + 1));
}

/* Whether m gives its reasoning under vLLM's newer name only ("reasoning"
 * as a string, "reasoning_content" absent or null): what templates read
 * is then set from it. */
static bool reasoning_renamed(const json_t *m)
{
    return json_is_string(json_object_get(m, "reasoning")) && !json_is_string(json_object_get(m, "reasoning_content"));
}

/* Makes the checked messages what a template expects: a list of text
 * parts joined into one string (in buf), an assistant's null or absent
 * content the empty string (the shared empty), null members dropped, in
 * the message and in its tool calls, and reasoning given as "reasoning"
 * (what snug and vLLM send back beside reasoning_content, and what some
 * clients keep) also as reasoning_content, the name the templates read
 * (Qwen3's, DeepSeek-R1's). */
static void normalize_message(json_t *m, char *buf, json_t *empty)
{
    json_t *content = json_object_get(m, "content");
    if (json_is_array(content))
        join_parts(m, buf);
    else if (!json_is_string(content))
        SNUG_ASSERT(json_object_set(m, "content", empty) == 0);
    bool renamed = reasoning_renamed(m);
    drop_nulls(m);
    if (renamed) SNUG_ASSERT(json_object_set(m, "reasoning_content", json_object_get(m, "reasoning")) == 0);
    json_t *calls = json_object_get(m, "tool_calls");
    for (size_t k = 0; k < json_array_size(calls); k++) {
        drop_nulls(json_array_get(calls, k));
        drop_nulls(json_object_get(json_array_get(calls, k), "function"));
    }
}

/* Replaces each tool call's arguments in msgs, a JSON string, by the
 * object it holds, as chat templates take them (transformers' tool-use
 * templates print or walk a mapping; vLLM hands them one too); arguments
 * that are not a JSON object stay the string. Fails with SNUG_NOMEM. */
static snug_status arguments_as_objects(json_t *msgs, snug_error *e)
{
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *calls = json_object_get(json_array_get(msgs, i), "tool_calls");
        for (size_t k = 0; k < json_array_size(calls); k++) {
            json_t *fn = json_object_get(json_array_get(calls, k), "function");
            const json_t *a = json_object_get(fn, "arguments");
            const char *text = json_string_value(a);
            json_t *v = NULL;
            if (!text || text[strspn(text, " \t\r\n")] != '{') continue; /* no object: no parse */
            if (snug_json_parse(json_string_value(a), json_string_length(a), "arguments", &v, e) == SNUG_NOMEM)
                return SNUG_NOMEM;
            if (json_is_object(v)) SNUG_ASSERT(json_object_set_new(fn, "arguments", v) == 0); /* replaces: no entry made */
            else json_decref(v);
        }
    }
    return SNUG_OK;
}

/* Reads the required messages, checks each, and normalizes them for the
 * chat template (normalize_message, then arguments_as_objects). jansson's
 * allocations for the new strings and members are admitted first. */
static snug_status parse_messages(json_t *body, snug_api_request *r, snug_api_error *err)
{
    json_t *msgs = json_object_get(body, "messages");
    if (!msgs || json_is_null(msgs))
        return api_bad(err, "messages", "is required: expected a non-empty list of messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return api_wrong(err, "messages", "a non-empty list of messages", msgs);
    size_t admit = 0, longest = 0, join = 0;
    bool fill = false; /* some content becomes the empty string */
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        const json_t *m = json_array_get(msgs, i), *content;
        snug_status st = check_message(m, i, &join, err);
        if (st != SNUG_OK) return st;
        content = json_object_get(m, "content");
        if (reasoning_renamed(m)) admit += set_bytes(m);
        if (json_is_array(content)) {
            /* a json_string_t (under 64 bytes) and its copy of the text */
            admit += snug_mem_held_bytes(64) + snug_mem_held_bytes(join + 1) + set_bytes(m);
            longest = SNUG_MAX(longest, join + 1);
        } else if (!json_is_string(content)) {
            admit += set_bytes(m);
            fill = true;
        }
    }
    if (fill) admit += snug_mem_held_bytes(64) + snug_mem_held_bytes(1); /* the empty string */
    r->messages = msgs;
    snug_error e = {0};
    char *buf = NULL;
    snug_status st = admit ? snug_mem_admit(SNUG_MEM_OTHER, admit, &e) : SNUG_OK;
    if (st == SNUG_OK && longest) {
        buf = snug_mem_alloc(SNUG_MEM_OTHER, longest, &e);
        if (!buf) st = SNUG_NOMEM;
    }
    json_t *empty = st == SNUG_OK && fill ? json_string_nocheck("") : NULL;
    SNUG_ASSERT(!fill || st != SNUG_OK || empty != NULL);
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(msgs); i++)
        normalize_message(json_array_get(msgs, i), buf, empty);
    json_decref(empty);
    snug_mem_free(buf);
    if (st == SNUG_OK) st = arguments_as_objects(msgs, &e);
    return st == SNUG_OK ? SNUG_OK : api_overloaded(err, &e);
}

/* ---- sampling ------------------------------------------------------------ */

/* The float fields of snug_sampling_params and their ranges. */
static const struct real_field {
    const char *key;
    double lo, hi;
    bool lo_open; /* lo itself is out of range */
    size_t offset;
} REAL_FIELDS[] = {
    {"temperature", 0, 2, false, offsetof(snug_sampling_params, temperature)},
    {"top_p", 0, 1, true, offsetof(snug_sampling_params, top_p)},
    {"min_p", 0, 1, false, offsetof(snug_sampling_params, min_p)},
    {"repetition_penalty", 0, 2, true, offsetof(snug_sampling_params, repetition_penalty)},
    {"frequency_penalty", -2, 2, false, offsetof(snug_sampling_params, frequency_penalty)},
    {"presence_penalty", -2, 2, false, offsetof(snug_sampling_params, presence_penalty)},
};

/* Parses a logit_bias key: a token id in canonical decimal (no sign, no
 * leading zero, so that two keys never name one token) below n_vocab. */
static bool token_key(const char *s, int32_t n_vocab, int32_t *out)
{
    int64_t x = 0;
    if (s[0] == '\0' || (s[0] == '0' && s[1] != '\0')) return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        x = x * 10 + (*s - '0');
        if (x >= n_vocab) return false;
    }
    *out = (int32_t)x;
    return true;
}

/* Reads logit_bias into r->logit_bias (owned) and r->sampling. */
static snug_status parse_logit_bias(const json_t *body, int32_t n_vocab, snug_api_request *r,
                                    snug_api_error *err)
{
    const json_t *lb = api_opt(body, "logit_bias");
    if (!lb) return SNUG_OK;
    if (!json_is_object(lb))
        return api_wrong(err, "logit_bias", "an object of token ids to biases in [-100, 100]", lb);
    size_t n = json_object_size(lb);
    if (n > SNUG_API_LOGIT_BIAS_MAX)
        return api_bad(err, "logit_bias", "has %zu entries; at most %d are accepted", n,
                   SNUG_API_LOGIT_BIAS_MAX);
    if (n == 0) return SNUG_OK;
    snug_error e = {0};
    r->logit_bias = snug_mem_alloc(SNUG_MEM_OTHER, n * sizeof *r->logit_bias, &e);
    if (!r->logit_bias) return api_overloaded(err, &e);
    const char *key;
    json_t *v;
    int32_t i = 0;
    json_object_foreach((json_t *)lb, key, v) {
        snug_logit_bias *b = &r->logit_bias[i++];
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        char got[96], shown[48];
        if (!token_key(key, n_vocab, &b->id))
            return api_bad(err, "logit_bias", "the key \"%s\" is not a token id in [0, %d)",
                       snug_str_shown(key, shown, sizeof shown), (int)n_vocab);
        if (!(x >= -100 && x <= 100))
            return api_bad(err, "logit_bias", "token %d: expected a bias in [-100, 100], got %s",
                       b->id, snug_json_describe(v, got, sizeof got));
        b->bias = (float)x;
    }
    r->sampling.logit_bias = r->logit_bias;
    r->sampling.n_logit_bias = i;
    return SNUG_OK;
}

/* Reads the sampling fields into r->sampling and checks the whole with
 * snug_sampling_params_validate (whose message starts with the param). */
static snug_status parse_sampling(const json_t *body, const snug_api_limits *lim,
                                  snug_api_request *r, snug_api_error *err)
{
    snug_sampling_params *s = &r->sampling;
    snug_status st = SNUG_OK;
    for (size_t i = 0; st == SNUG_OK && i < SNUG_ARRAY_LEN(REAL_FIELDS); i++) {
        const struct real_field *f = &REAL_FIELDS[i];
        st = get_real(body, f->key, f->lo, f->hi, f->lo_open,
                      (float *)((char *)s + f->offset), err);
    }
    int64_t top_k = 0, seed = 0;
    if (st == SNUG_OK) st = get_int(body, "top_k", -1, INT32_MAX, &top_k, NULL, err);
    if (st == SNUG_OK) st = get_int(body, "seed", INT64_MIN, INT64_MAX, &seed, &s->has_seed, err);
    if (st == SNUG_OK) st = parse_logit_bias(body, lim->n_vocab, r, err);
    if (st != SNUG_OK) return st;
    s->top_k = top_k == -1 ? 0 : (int32_t)top_k; /* -1 and 0 both mean off */
    s->seed = (uint64_t)seed;
    snug_error e = {0};
    if (snug_sampling_params_validate(s, lim->n_vocab, &e) == SNUG_OK) return SNUG_OK;
    char param[64] = "";
    const char *rest = e.msg;
    size_t n = strcspn(e.msg, ":");
    if (e.msg[n] == ':' && n < sizeof param) { /* "top_p: expected ..." */
        api_path(param, "%.*s", (int)n, e.msg);
        rest = e.msg + n + 1 + (e.msg[n + 1] == ' ');
    }
    return api_bad(err, param, "%s", rest);
}

/* ---- stopping -------------------------------------------------------------- */

/* Adds the stop string v (named param) to r->stop. */
static snug_status add_stop(const json_t *v, const char *param, snug_api_request *r,
                            snug_api_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "a non-empty string of at most %d bytes", SNUG_STOP_STRING_MAX);
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) > SNUG_STOP_STRING_MAX)
        return api_wrong(err, param, what, v);
    snug_error e = {0};
    if (snug_stop_params_add_string(&r->stop, json_string_value(v), json_string_length(v), &e) !=
        SNUG_OK)
        return api_bad(err, param, "%s", e.msg);
    return SNUG_OK;
}

/* Reads max_tokens or max_completion_tokens (key) into *out when given:
 * 1 to SNUG_API_MAX_TOKENS_MAX and, when the model's context is known, no
 * more than it (no prompt could leave room for more). */
static snug_status get_max_tokens(const json_t *body, const char *key,
                                  const snug_api_limits *lim, int64_t *out, snug_api_error *err)
{
    bool given = false;
    snug_status st = get_int(body, key, 1, SNUG_API_MAX_TOKENS_MAX, out, &given, err);
    if (st == SNUG_OK && given && lim->max_model_len > 0 && *out > lim->max_model_len)
        return api_bad(err, key, "is %lld, more than the model's context of %lld tokens",
                   (long long)*out, (long long)lim->max_model_len);
    return st;
}

/* Reads stop, stop_token_ids, ignore_eos and max_tokens (for chat,
 * max_completion_tokens wins over it) into r->stop and r->max_tokens. */
static snug_status parse_stop(const json_t *body, const snug_api_limits *lim,
                              snug_api_request *r, snug_api_error *err)
{
    const json_t *stop = api_opt(body, "stop"), *ids = api_opt(body, "stop_token_ids");
    char at[64];
    snug_status st = SNUG_OK;
    if (json_is_array(stop) && json_array_size(stop) > SNUG_API_STOP_STRINGS_MAX)
        return api_bad(err, "stop", "has %zu strings; at most %d are accepted",
                   json_array_size(stop), SNUG_API_STOP_STRINGS_MAX);
    if (stop && !json_is_array(stop)) st = add_stop(stop, "stop", r, err);
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(stop); i++)
        st = add_stop(json_array_get(stop, i), api_path(at, "stop[%zu]", i), r, err);
    if (st != SNUG_OK) return st;

    if (ids && (!json_is_array(ids) || json_array_size(ids) > SNUG_API_STOP_TOKEN_IDS_MAX)) {
        char what[64];
        snprintf(what, sizeof what, "a list of at most %d token ids", SNUG_API_STOP_TOKEN_IDS_MAX);
        return api_wrong(err, "stop_token_ids", what, ids);
    }
    int32_t id[SNUG_API_STOP_TOKEN_IDS_MAX];
    if (json_array_size(ids) > 0) st = read_ids(ids, "stop_token_ids", lim->n_vocab, id, err);
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(ids); i++)
        SNUG_ASSERT(snug_stop_params_add_eos(&r->stop, id[i], NULL) == SNUG_OK);
    if (st == SNUG_OK) st = get_bool(body, "ignore_eos", &r->stop.ignore_eos, err);

    int64_t max_tokens = 0;
    if (st == SNUG_OK) st = get_max_tokens(body, "max_tokens", lim, &max_tokens, err);
    if (st == SNUG_OK && r->kind == SNUG_API_CHAT)
        st = get_max_tokens(body, "max_completion_tokens", lim, &max_tokens, err);
    r->max_tokens = r->stop.max_tokens = (int32_t)max_tokens;
    return st;
}

/* ---- output ---------------------------------------------------------------- */

/* The template's own variables, which chat_template_kwargs may not set:
 * the request has fields for them. */
static const char *const KWARGS_RESERVED[] = {"messages", "tools", "add_generation_prompt", NULL};

/* Reads chat_template_kwargs (an object of template variables, checked
 * not to name the template's own) and thinking_token_budget (an integer
 * of at least 0) into r. */
static snug_status parse_thinking(const json_t *body, snug_api_request *r, snug_api_error *err)
{
    const json_t *kw = api_opt(body, "chat_template_kwargs");
    int64_t budget = -1;
    if (kw && !json_is_object(kw))
        return api_wrong(err, "chat_template_kwargs", "an object of template variables, such as "
                         "{\"enable_thinking\": false}", kw);
    for (size_t i = 0; kw && KWARGS_RESERVED[i]; i++)
        if (json_object_get(kw, KWARGS_RESERVED[i])) {
            char at[64];
            return api_bad(err, api_path(at, "chat_template_kwargs.%s", KWARGS_RESERVED[i]),
                           "is set by the request's own field (%s), not as a template variable",
                           KWARGS_RESERVED[i]);
        }
    r->chat_template_kwargs = json_object_size(kw) ? kw : NULL;
    snug_status st = get_int(body, "thinking_token_budget", 0, SNUG_API_MAX_TOKENS_MAX, &budget, NULL, err);
    r->thinking_token_budget = (int32_t)budget;
    return st;
}

/* Reads n, stream, stream_options, logprobs (and chat's top_logprobs), echo
 * (completions) and add_generation_prompt (chat). stream_options without
 * stream is checked and otherwise ignored. */
static snug_status parse_output(const json_t *body, const snug_api_limits *lim,
                                snug_api_request *r, snug_api_error *err)
{
    int64_t n = 1, logprobs = -1, top = 0;
    bool want_logprobs = false, top_given = false;
    const json_t *so = api_opt(body, "stream_options"), *usage = api_opt(so, "include_usage");
    snug_status st = get_int(body, "n", 1, lim->max_n, &n, NULL, err);
    if (st == SNUG_OK) st = get_bool(body, "stream", &r->stream, err);
    if (st == SNUG_OK && so && !json_is_object(so))
        st = api_wrong(err, "stream_options", "an object", so);
    if (st == SNUG_OK && usage && !json_is_boolean(usage))
        st = api_wrong(err, "stream_options.include_usage", "true or false", usage);
    static const char *const so_keys[] = {"include_usage", NULL};
    if (st == SNUG_OK && so) st = api_only_keys(so, "stream_options", so_keys, err);
    if (r->kind == SNUG_API_COMPLETIONS) {
        if (st == SNUG_OK)
            st = get_int(body, "logprobs", 0, SNUG_API_LOGPROBS_MAX, &logprobs, NULL, err);
        if (st == SNUG_OK) st = get_bool(body, "echo", &r->echo, err);
    } else {
        if (st == SNUG_OK) st = get_bool(body, "logprobs", &want_logprobs, err);
        if (st == SNUG_OK)
            st = get_int(body, "top_logprobs", 0, SNUG_API_LOGPROBS_MAX, &top, &top_given, err);
        if (st == SNUG_OK && top_given && !want_logprobs)
            st = api_bad(err, "top_logprobs", "is only accepted when logprobs is true");
        if (want_logprobs) logprobs = top;
        bool agp_given = api_opt(body, "add_generation_prompt") != NULL;
        if (st == SNUG_OK)
            st = get_bool(body, "add_generation_prompt", &r->add_generation_prompt, err);
        if (st == SNUG_OK) st = get_bool(body, "continue_final_message", &r->continue_final_message, err);
        if (st == SNUG_OK && r->continue_final_message) {
            const json_t *last = json_array_get(r->messages, json_array_size(r->messages) - 1);
            if (agp_given && r->add_generation_prompt)
                st = api_bad(err, "continue_final_message", "continues the last message: it takes "
                             "add_generation_prompt false (or left out), not true");
            else if (!api_is_str(json_object_get(last, "role"), "assistant"))
                st = api_bad(err, "continue_final_message", "continues the last message, which must be the "
                             "assistant's");
            r->add_generation_prompt = false;
        }
    }
    if (st == SNUG_OK) st = get_bool(body, "return_tokens_as_token_ids", &r->tokens_as_ids, err);
    if (st == SNUG_OK && r->kind == SNUG_API_CHAT) st = parse_thinking(body, r, err);
    r->n = (int)n;
    r->logprobs = (int)logprobs;
    r->include_usage = r->stream && json_is_true(usage);
    return st;
}

/* ---- fields taken, fields refused ------------------------------------------- */

/* The top-level fields this parser reads, for both kinds. */
static const char *const FIELDS_BOTH[] = {
    "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "n", "stream",
    "stream_options", "stop", "stop_token_ids", "ignore_eos", "logit_bias", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "cache_salt", "return_tokens_as_token_ids", "speculative",
    "speculative.n_max",
    "logprobs", "response_format", "grammar", "json_schema", "guided_json", "guided_choice", "guided_grammar",
    "guided_regex", "structured_outputs", NULL};
static const char *const FIELDS_COMPLETIONS[] = {"prompt", "echo", NULL};
static const char *const FIELDS_CHAT[] = {"messages", "max_completion_tokens", "top_logprobs",
                                          "add_generation_prompt", "continue_final_message", "tools", "tool_choice",
                                          "parallel_tool_calls", "chat_template_kwargs",
                                          "thinking_token_budget", NULL};

/* Checks a field of OpenAI's API that the parser does not read: taken when
 * its value asks for what the server does anyway (best_of equal to n, no
 * suffix, no tools, no storing, the
 * default service tier, text output, a user id), refused with a 400 naming
 * it otherwise; any other field is unknown, also a 400. */
static snug_status check_other_field(const char *key, const json_t *v,
                                     const snug_api_request *r, snug_api_error *err)
{
    bool chat = r->kind == SNUG_API_CHAT;
    int64_t best = 0;
    if (strcmp(key, "user") == 0) /* an end user's id, for the caller's own records */
        return json_is_null(v) || json_is_string(v) ? SNUG_OK : api_wrong(err, key, "a string", v);
    if (strcmp(key, "service_tier") == 0)
        return json_is_null(v) || api_is_str(v, "auto") || api_is_str(v, "default")
                   ? SNUG_OK
                   : api_unsupported(err, key, "only the tiers \"auto\" and \"default\" are served");
    if (!chat && strcmp(key, "best_of") == 0) {
        if (json_is_null(v)) return SNUG_OK;
        if (!as_int(v, &best) || best < 1) return api_wrong(err, key, "an integer of at least 1", v);
        return best == r->n ? SNUG_OK
                            : api_unsupported(err, key, "ranking candidates (best_of other than n) is not supported");
    }
    if (!chat && strcmp(key, "suffix") == 0)
        return api_empty_value(v) ? SNUG_OK : api_unsupported(err, key, "a suffix (insertion) is not supported");
    if (chat && (strcmp(key, "functions") == 0 || strcmp(key, "function_call") == 0))
        return json_is_null(v) ? SNUG_OK
                               : api_unsupported(err, key, "the deprecated functions API is not served: "
                                                           "use tools and tool_choice");
    if (chat && strcmp(key, "enable_thinking") == 0) /* vLLM and llama-server take it as a kwarg */
        return api_bad(err, key, "is a chat template variable: send it in chat_template_kwargs "
                       "({\"chat_template_kwargs\": {\"enable_thinking\": false}}), as vLLM and "
                       "llama-server take it");
    if (chat && strcmp(key, "store") == 0)
        return api_empty_value(v) ? SNUG_OK : api_unsupported(err, key, "stored completions are not supported");
    if (chat && strcmp(key, "metadata") == 0)
        return json_is_null(v) ? SNUG_OK
                               : api_unsupported(err, key, "metadata goes with stored completions, not supported here");
    if (chat && strcmp(key, "modalities") == 0)
        return json_is_null(v) || (json_array_size(v) == 1 && api_is_str(json_array_get(v, 0), "text"))
                   ? SNUG_OK
                   : api_unsupported(err, key, "only [\"text\"] output is produced");
    return api_bad(err, key,
               "unknown field: %s takes no field of that name (the README's API section lists the fields it takes)",
               chat ? "/v1/chat/completions" : "/v1/completions");
}

/* Every top-level field of the body is one the parser read or one that
 * check_other_field takes: nothing is silently ignored. */
static snug_status check_fields(const json_t *body, const snug_api_request *r, snug_api_error *err)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)body, key, v) {
        if (api_listed(FIELDS_BOTH, key) || api_listed(r->kind == SNUG_API_CHAT ? FIELDS_CHAT : FIELDS_COMPLETIONS, key))
            continue;
        snug_status st = check_other_field(key, v, r, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

/* ---- the request ------------------------------------------------------------ */

/* Reads every field of the parsed r->root into r. */
static snug_status parse_fields(snug_api_kind kind, const snug_api_limits *lim,
                                snug_api_request *r, snug_api_error *err)
{
    r->kind = kind;
    r->n = 1;
    r->logprobs = -1;
    r->add_generation_prompt = true;
    r->thinking_token_budget = -1;
    snug_sampling_params_default(&r->sampling);
    snug_stop_params_default(&r->stop);
    snug_status st = get_string(r->root, "model", &r->model, err);
    bool speculative = true, n_max_given = false;
    int64_t n_max = 0;
    if (st == SNUG_OK) st = get_bool(r->root, "speculative", &speculative, err);
    if (st == SNUG_OK) st = get_int(r->root, "speculative.n_max", 0, SNUG_SPEC_TOKENS_MAX, &n_max, &n_max_given, err);
    r->no_speculation = !speculative || (n_max_given && n_max == 0);
    r->spec_max = (int32_t)n_max;
    if (st == SNUG_OK) st = get_string(r->root, "cache_salt", &r->cache_salt, err);
    if (st == SNUG_OK && r->cache_salt) {
        r->cache_salt_len = json_string_length(api_opt(r->root, "cache_salt"));
        if (r->cache_salt_len == 0) st = api_bad(err, "cache_salt", "must be a non-empty string");
    }
    if (st == SNUG_OK)
        st = kind == SNUG_API_CHAT ? parse_messages(r->root, r, err)
                                   : parse_prompt(r->root, "prompt", lim->max_prompts, lim, r, err);
    if (st == SNUG_OK) st = parse_sampling(r->root, lim, r, err);
    if (st == SNUG_OK) st = parse_stop(r->root, lim, r, err);
    if (st == SNUG_OK) st = parse_output(r->root, lim, r, err);
    if (st == SNUG_OK) st = check_fields(r->root, r, err);
    if (st == SNUG_OK) st = api_parse_structured(r->root, r, err);
    if (st == SNUG_OK && kind == SNUG_API_CHAT) st = api_parse_tools(r->root, lim, r, err);
    return st;
}

/* An embeddings body: input (completions' prompt shapes, at most
 * lim->max_inputs), model, encoding_format, dimensions and user. */
static snug_status parse_embeddings(const snug_api_limits *lim, snug_api_request *r, snug_api_error *err)
{
    static const char *const fields[] = {"input", "model", "encoding_format", "dimensions", "user", NULL};
    r->kind = SNUG_API_EMBEDDINGS;
    r->n = 1;
    r->logprobs = -1;
    snug_sampling_params_default(&r->sampling);
    snug_stop_params_default(&r->stop);
    const json_t *format = api_opt(r->root, "encoding_format"), *user = api_opt(r->root, "user");
    int64_t dims = 0;
    const char *key;
    const json_t *v;
    json_object_foreach(r->root, key, v) if (!api_listed(fields, key))
        return api_bad(err, key, "unknown field: /v1/embeddings takes no field of that name (input, model, "
                       "encoding_format, dimensions, user)");
    snug_status st = get_string(r->root, "model", &r->model, err);
    if (st == SNUG_OK && format && !api_is_str(format, "float") && !api_is_str(format, "base64"))
        st = api_wrong(err, "encoding_format", "\"float\" or \"base64\"", format);
    if (st == SNUG_OK && user && !json_is_string(user)) st = api_wrong(err, "user", "a string", user);
    if (st == SNUG_OK) st = get_int(r->root, "dimensions", 1, INT32_MAX, &dims, NULL, err);
    if (st == SNUG_OK) st = parse_prompt(r->root, "input", lim->max_inputs, lim, r, err);
    r->base64 = api_is_str(format, "base64");
    r->dimensions = (int32_t)dims;
    return st;
}

/* A rerank body (Jina's and Cohere's, as vLLM and llama-server take it):
 * query, documents (strings, or {"text": ...}; at most lim->max_inputs),
 * top_n, return_documents, instruction (the reranker's task), model. */
static snug_status parse_rerank(const snug_api_limits *lim, snug_api_request *r, snug_api_error *err)
{
    static const char *const fields[] = {"model", "query", "documents", "top_n", "return_documents",
                                         "instruction", NULL};
    r->kind = SNUG_API_RERANK;
    r->n = 1;
    r->logprobs = -1;
    r->return_documents = true;
    snug_sampling_params_default(&r->sampling);
    snug_stop_params_default(&r->stop);
    const char *key;
    const json_t *v;
    json_object_foreach(r->root, key, v) if (!api_listed(fields, key))
        return api_bad(err, key, "unknown field: /v1/rerank takes no field of that name (query, documents, top_n, "
                       "return_documents, instruction, model)");
    const json_t *query = api_opt(r->root, "query"), *docs = api_opt(r->root, "documents");
    int64_t top = 0;
    bool top_given = false;
    if (!json_is_string(query) || json_string_length(query) == 0)
        return api_wrong(err, "query", "a non-empty string", query);
    if (!json_is_array(docs) || json_array_size(docs) == 0)
        return api_wrong(err, "documents", "a non-empty list of strings or {\"text\": ...} objects", docs);
    if (json_array_size(docs) > (size_t)lim->max_inputs)
        return api_bad(err, "documents", "is a list of %zu; at most %d are accepted", json_array_size(docs),
                       lim->max_inputs);
    snug_status st = get_string(r->root, "model", &r->model, err);
    if (st == SNUG_OK) st = get_string(r->root, "instruction", &r->instruction, err);
    if (st == SNUG_OK) st = get_bool(r->root, "return_documents", &r->return_documents, err);
    if (st == SNUG_OK) st = get_int(r->root, "top_n", 1, INT32_MAX, &top, &top_given, err);
    if (st != SNUG_OK) return st;
    size_t n = json_array_size(docs);
    snug_error e = {0};
    r->prompts = snug_mem_alloc(SNUG_MEM_OTHER, n * sizeof *r->prompts, &e);
    if (!r->prompts) return api_overloaded(err, &e);
    r->n_prompts = (int)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(docs, i), *text = json_is_object(d) ? api_opt(d, "text") : d;
        char at[64];
        if (json_is_object(d) && json_object_size(d) != 1)
            return api_bad(err, api_path(at, "documents[%zu]", i), "a document object holds its text alone");
        if (!json_is_string(text))
            return api_wrong(err, api_path(at, "documents[%zu]", i), "a string or {\"text\": a string}", d);
        r->prompts[i] = (snug_api_prompt){json_string_value(text), json_string_length(text), NULL, 0};
    }
    r->query = json_string_value(query);
    r->query_len = json_string_length(query);
    r->top_n = top_given ? (int)SNUG_MIN(top, (int64_t)n) : (int)n;
    return SNUG_OK;
}

/* An error the chat parser gave a Responses request, its field named as
 * the client sent it: response_format as text.format (its json_schema's
 * fields as the format's own), max_tokens as max_output_tokens, messages
 * as input (the indexes may differ: instructions come first), a tool's
 * function.x as its x. The message starts with the param; both change. */
static void responses_names(snug_api_error *err)
{
    static const struct { const char *chat, *theirs; } names[] = {
        {"response_format.json_schema", "text.format"}, {"response_format", "text.format"},
        {"max_tokens", "max_output_tokens"}, {"messages", "input"}};
    char param[64], msg[sizeof err->message];
    size_t n = strlen(err->param);
    snprintf(param, sizeof param, "%s", err->param);
    for (size_t i = 0; i < SNUG_ARRAY_LEN(names); i++) {
        size_t k = strlen(names[i].chat);
        if (n < k || strncmp(err->param, names[i].chat, k) != 0 || (err->param[k] && err->param[k] != '.' &&
                                                                     err->param[k] != '['))
            continue;
        snprintf(param, sizeof param, "%s%s", names[i].theirs, err->param + k);
        break;
    }
    char *fn = strncmp(param, "tools[", 6) == 0 ? strstr(param, "].function") : NULL;
    if (fn) memmove(fn + 1, fn + 10, strlen(fn + 10) + 1);
    if (n == 0 || strcmp(param, err->param) == 0) return;
    if (strncmp(err->message, err->param, n) == 0) {
        snprintf(msg, sizeof msg, "%s%s", param, err->message + n);
        snprintf(err->message, sizeof err->message, "%s", msg);
    }
    snprintf(err->param, sizeof err->param, "%s", param);
}

snug_status snug_api_parse(snug_api_kind kind, const char *body, size_t len,
                           const snug_api_limits *lim, snug_api_request *out,
                           snug_api_error *err)
{
    snug_api_limits defaults;
    snug_api_error scratch;
    if (!lim) {
        snug_api_limits_default(&defaults);
        lim = &defaults;
    }
    if (!err) err = &scratch;
    memset(err, 0, sizeof *err);
    memset(out, 0, sizeof *out);
    snug_status st = check_bytes(body, len, lim, err);
    if (st == SNUG_OK) st = parse_json(body, len, lim, &out->root, err);
    bool other = kind == SNUG_API_MESSAGES || kind == SNUG_API_MESSAGES_COUNT || kind == SNUG_API_RESPONSES_CREATE;
    if (st == SNUG_OK && other) { /* another API's body read as the chat it means; the body kept */
        json_t *chat = NULL;
        st = kind == SNUG_API_RESPONSES_CREATE
                 ? api_responses_to_chat(out->root, &chat, err)
                 : api_anthropic_to_chat(out->root, kind == SNUG_API_MESSAGES_COUNT, lim->think_budget, &chat, err);
        out->source = out->root;
        out->root = chat;
        out->dialect = kind == SNUG_API_RESPONSES_CREATE ? SNUG_API_RESPONSES : SNUG_API_ANTHROPIC;
        out->count_only = kind == SNUG_API_MESSAGES_COUNT;
        kind = SNUG_API_CHAT;
    }
    if (st == SNUG_OK && kind == SNUG_API_EMBEDDINGS) {
        st = parse_embeddings(lim, out, err);
    } else if (st == SNUG_OK && kind == SNUG_API_RERANK) {
        st = parse_rerank(lim, out, err);
    } else if (st == SNUG_OK) {
        st = parse_fields(kind, lim, out, err);
        if (st != SNUG_OK && out->dialect == SNUG_API_RESPONSES) responses_names(err); /* (the chat's names) */
    }
    if (st != SNUG_OK) snug_api_request_free(out);
    return st;
}

void snug_api_request_free(snug_api_request *r)
{
    if (r->root) json_decref(r->root);
    if (r->source) json_decref(r->source);
    snug_mem_free(r->prompts);
    snug_mem_free(r->logit_bias);
    snug_grammar_free(r->grammar);
    memset(r, 0, sizeof *r);
}
