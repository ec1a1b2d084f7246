/*
 * api_fields.c: what the request parser's modules (api_request.c,
 * api_structured.c, api_tools.c) share, in a leaf they all call and that
 * calls none of them: OpenAI-shaped errors (a 400 naming the field, a 503
 * for memory) and the small field readers (api_impl.h). Every message is
 * kept valid UTF-8 whatever the client sent.
 */
#include "api_impl.h"

#include "base/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------ */

/* Replaces each byte of s that does not start a valid UTF-8 character by
 * '?': jansson's "near '...'" may cut a character in two, and so may a
 * message cut to fit. */
static void utf8_scrub(char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (i + len <= n && snug_utf8_valid(s + i, len))
            i += len;
        else
            s[i++] = '?';
    }
}

const char *api_path(char buf[64], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, 64, fmt, ap);
    va_end(ap);
    return buf;
}

/* Fills err with a 400 for param ("" for the body as a whole) whose
 * message is "param: " and the formatted text. Returns SNUG_INVALID. */
snug_status api_bad(snug_api_error *err, const char *param, const char *fmt, ...)
{
    err->status = 400;
    err->type = "invalid_request_error";
    err->code = NULL;
    snprintf(err->param, sizeof err->param, "%s", param);
    size_t n = param[0] ? (size_t)snprintf(err->message, sizeof err->message, "%s: ", param) : 0;
    n = SNUG_MIN(n, sizeof err->message - 1); /* a param longer than the message: cut */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message + n, sizeof err->message - n, fmt, ap);
    va_end(ap);
    utf8_scrub(err->message);
    return SNUG_INVALID;
}

/* Describes v for a message: snug_json_describe, whose strings are cut
 * between characters and escaped (the message must stay valid UTF-8 and
 * carry no control bytes of the client's). */
static const char *describe(const json_t *v, char buf[96])
{
    return snug_json_describe(v, buf, 96);
}

/* A 400: "param: expected <expected>, got <v described>". */
snug_status api_wrong(snug_api_error *err, const char *param, const char *expected,
                         const json_t *v)
{
    char got[96];
    return api_bad(err, param, "expected %s, got %s", expected, describe(v, got));
}

/* A 503 for memory that did not fit: the client is told in its words, e's
 * message (the allocator's) goes into err->detail for the server's log.
 * Returns SNUG_NOMEM. */
snug_status api_overloaded(snug_api_error *err, const snug_error *e)
{
    err->status = 503;
    err->type = "server_error";
    err->code = "overloaded";
    err->param[0] = '\0';
    snprintf(err->message, sizeof err->message, "%s", SNUG_API_BUSY_MESSAGE);
    snprintf(err->detail, sizeof err->detail, "%.255s", e->msg);
    utf8_scrub(err->detail);
    return SNUG_NOMEM;
}

/* A 400 naming param with e's message, or a 503 when st is SNUG_NOMEM. */
snug_status api_compile_failed(snug_api_error *err, const char *param, snug_status st, const snug_error *e)
{
    if (st == SNUG_NOMEM) return api_overloaded(err, e);
    api_bad(err, "", "%s", e->msg);
    snprintf(err->param, sizeof err->param, "%s", param);
    return SNUG_INVALID;
}

/* A 400 for a field the server does not do as asked: "key: why; ...". */
snug_status api_unsupported(snug_api_error *err, const char *key, const char *why)
{
    return api_bad(err, key, "%s; this server refuses it rather than ignore it (the README's API section lists "
                         "the fields it takes)", why);
}

/* ---- field readers ----------------------------------------------------- */

/* Whether key is one of list (NULL-terminated). */
bool api_listed(const char *const *list, const char *key)
{
    for (; *list; list++)
        if (strcmp(*list, key) == 0) return true;
    return false;
}

/* Checks that every key of obj is one of keys; a 400 naming the first
 * that is not, under param. */
snug_status api_only_keys(const json_t *obj, const char *param, const char *const *keys, snug_api_error *err)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (api_listed(keys, key)) continue;
        char at[64];
        snprintf(at, sizeof at, "%s.%.40s", param, key);
        return api_bad(err, at, "unknown field: %s takes no field of that name", param);
    }
    return SNUG_OK;
}

/* obj[key], or NULL when it is absent or null. */
const json_t *api_opt(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* Whether v is null, false, an empty string or an empty list. */
bool api_empty_value(const json_t *v)
{
    return json_is_null(v) || json_is_false(v) || (json_is_string(v) && json_string_length(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0);
}

/* Whether v is the string s. */
bool api_is_str(const json_t *v, const char *s)
{
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

bool api_put(json_t *obj, const char *key, json_t *v) { return v && json_object_set_new(obj, key, v) == 0; }

bool api_add(json_t *list, json_t *v) { return v && json_array_append_new(list, v) == 0; }

snug_status api_no_memory(snug_api_error *err, const char *what)
{
    snug_error e = {0};
    snug_errorf(&e, SNUG_NOMEM, "no memory to translate %s", what);
    return api_overloaded(err, &e);
}

snug_status api_text_parts(const json_t *v, const char *param, const char *const *types, json_t **parts,
                           snug_api_error *err)
{
    char p[64];
    *parts = NULL;
    if (json_is_string(v)) {
        *parts = json_incref((json_t *)v);
        return SNUG_OK;
    }
    if (!json_is_array(v)) return api_wrong(err, param, "a string or a list of text parts", v);
    json_t *list = json_array();
    if (!list) return api_no_memory(err, "a request");
    snug_status st = SNUG_OK;
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(v); i++) {
        const json_t *c = json_array_get(v, i), *type = api_opt(c, "type");
        const json_t *text = api_opt(c, api_is_str(type, "refusal") ? "refusal" : "text");
        if (!json_is_object(c) || !json_is_string(type))
            st = api_wrong(err, api_path(p, "%s[%zu]", param, i), "a text part (an object with a type)", c);
        else if (!api_listed(types, json_string_value(type)))
            st = api_bad(err, api_path(p, "%s[%zu].type", param, i), "only text is taken here (\"%s\"%s): this "
                         "server runs a text model", types[0], types[1] ? " and the like" : "");
        else if (!json_is_string(text))
            st = api_wrong(err, api_path(p, "%s[%zu].text", param, i), "a string", text);
        else if (!api_add(list, json_pack("{s:s, s:O}", "type", "text", "text", text)))
            st = api_no_memory(err, "a request");
    }
    if (st == SNUG_OK) *parts = list;
    else json_decref(list);
    return st;
}
