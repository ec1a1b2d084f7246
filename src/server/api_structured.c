/*
 * api_structured.c: the fields that constrain what a request's output may
 * be, compiled into one grammar (api_impl.h): `response_format` (OpenAI's
 * json_object and json_schema; text is no constraint) and `grammar`
 * (GBNF, llama.cpp's extension). A schema or grammar that cannot be
 * compiled is a 400 naming the field and the place in it; one whose start
 * does not fit a sequence's matcher (engine/constrain.h) too.
 */
#include "api_impl.h"

#include "base/device.h"
#include "base/strbuf.h"
#include "engine/constrain.h"
#include "grammar/matcher.h"
#include "grammar/schema.h"

#include <string.h>

enum { SCHEMA_NAME_MAX = 64 }; /* OpenAI's limit on json_schema.name */

snug_status api_compile_failed(snug_api_error *err, const char *param, snug_status st, const snug_error *e)
{
    if (st == SNUG_NOMEM) return api_overloaded(err, e);
    api_bad(err, "", "%s", e->msg);
    snprintf(err->param, sizeof err->param, "%s", param);
    return SNUG_INVALID;
}

snug_status api_only_keys(const json_t *obj, const char *param, const char *const *keys, snug_api_error *err)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        bool known = false;
        for (const char *const *k = keys; *k && !known; k++) known = strcmp(*k, key) == 0;
        if (known) continue;
        char at[64];
        snprintf(at, sizeof at, "%s.%s", param, key);
        return api_bad(err, at, "unknown field: %s takes no field of that name", param);
    }
    return SNUG_OK;
}

snug_status api_compile(snug_api_request *r, const char *text, size_t len, const char *param,
                           snug_api_error *err)
{
    snug_error e = {0};
    snug_status st = snug_grammar_parse_gbnf(text, len, "root", param, &r->grammar, &e);
    if (st != SNUG_OK) return api_compile_failed(err, param, st, &e);
    void *mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_constrain_seq_bytes(), &e);
    if (!mem) return api_overloaded(err, &e);
    snug_gmatch m;
    st = snug_gmatch_start(&m, mem, SNUG_CONSTRAIN_STACKS, SNUG_CONSTRAIN_DEPTH, r->grammar, &e);
    snug_mem_free(mem);
    if (st != SNUG_OK) {
        snug_error_prefix(&e, st, "%s: its start is too ambiguous or too deep for a sequence's matcher: ", param);
        return api_compile_failed(err, param, st, &e);
    }
    r->grammar_param = param;
    return SNUG_OK;
}

/* Compiles schema (a JSON schema; what names it) into r->grammar. */
static snug_status compile_schema(snug_api_request *r, const json_t *schema, const char *what, snug_api_error *err)
{
    snug_error e = {0};
    snug_strbuf gbnf = {.err = &e};
    snug_status st = snug_schema_to_gbnf(schema, what, &gbnf, &e);
    if (st == SNUG_OK) st = api_compile(r, gbnf.p, gbnf.len, "response_format", err);
    else st = api_compile_failed(err, what, st, &e);
    snug_strbuf_free(&gbnf);
    return st;
}

/* json_schema: {"name", "description", "schema", "strict"}; the schema is
 * kept to whatever strict says (absent: any JSON value). */
static snug_status parse_json_schema(snug_api_request *r, const json_t *js, snug_api_error *err)
{
    static const char *const keys[] = {"name", "description", "schema", "strict", NULL};
    const char *param = "response_format.json_schema";
    if (!json_is_object(js)) return api_wrong(err, param, "an object with a name and a schema", js);
    snug_status st = api_only_keys(js, param, keys, err);
    if (st != SNUG_OK) return st;
    const json_t *name = api_opt(js, "name"), *desc = api_opt(js, "description");
    const json_t *strict = api_opt(js, "strict"), *schema = api_opt(js, "schema");
    if (name) {
        const char *s = json_string_value(name);
        size_t n = s ? strlen(s) : 0, ok = s ? strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") : 0;
        if (!s || n == 0 || n > SCHEMA_NAME_MAX || ok != n || n != json_string_length(name))
            return api_wrong(err, "response_format.json_schema.name",
                             "a name of 1 to 64 letters, digits, underscores and dashes", name);
    }
    if (desc && !json_is_string(desc))
        return api_wrong(err, "response_format.json_schema.description", "a string", desc);
    if (strict && !json_is_boolean(strict))
        return api_wrong(err, "response_format.json_schema.strict", "true or false", strict);
    if (schema && !json_is_object(schema) && !json_is_boolean(schema))
        return api_wrong(err, "response_format.json_schema.schema", "a JSON schema (an object)", schema);
    if (schema && json_is_false(schema))
        return api_bad(err, "response_format.json_schema.schema", "is false: no value validates against it");
    json_t *any = schema ? NULL : json_true(); /* no schema: any JSON value */
    st = compile_schema(r, schema ? schema : any, "response_format.json_schema.schema", err);
    json_decref(any);
    return st;
}

/* response_format: {"type": "text"}, {"type": "json_object"} or
 * {"type": "json_schema", "json_schema": {...}}. */
static snug_status parse_response_format(snug_api_request *r, const json_t *rf, snug_api_error *err)
{
    static const char *const type_only[] = {"type", NULL}, *const with_schema[] = {"type", "json_schema", NULL};
    static const char WHAT[] = "an object with a type (\"text\", \"json_object\" or \"json_schema\")";
    const json_t *type = json_is_object(rf) ? api_opt(rf, "type") : NULL;
    if (!json_is_string(type)) return api_wrong(err, "response_format", WHAT, rf);
    bool schema = api_is_str(type, "json_schema");
    if (!schema && !api_is_str(type, "json_object") && !api_is_str(type, "text"))
        return api_wrong(err, "response_format.type", "\"text\", \"json_object\" or \"json_schema\"", type);
    snug_status st = api_only_keys(rf, "response_format", schema ? with_schema : type_only, err);
    if (st != SNUG_OK || api_is_str(type, "text")) return st;
    if (schema) {
        const json_t *js = api_opt(rf, "json_schema");
        if (!js) return api_bad(err, "response_format.json_schema", "is required for the type \"json_schema\"");
        return parse_json_schema(r, js, err);
    }
    /* json_object: an object, with any members */
    json_t *object = json_pack("{s:s, s:b}", "type", "object", "additionalProperties", 1);
    if (!object) {
        snug_error e = {0};
        snug_errorf(&e, SNUG_NOMEM, "no memory for the json_object schema");
        return api_overloaded(err, &e);
    }
    st = compile_schema(r, object, "response_format", err);
    json_decref(object);
    return st;
}

snug_status api_parse_structured(const json_t *body, snug_api_request *r, snug_api_error *err)
{
    const json_t *rf = api_opt(body, "response_format"), *grammar = api_opt(body, "grammar");
    if (grammar && !(json_is_string(grammar) && json_string_length(grammar) > 0))
        return api_wrong(err, "grammar", "a grammar in GBNF (a non-empty string)", grammar);
    snug_status st = rf ? parse_response_format(r, rf, err) : SNUG_OK;
    if (st != SNUG_OK || !grammar) return st;
    if (r->grammar)
        return api_bad(err, "grammar", "a request takes either a grammar or a response_format of "
                                       "\"json_object\" or \"json_schema\", not both");
    return api_compile(r, json_string_value(grammar), json_string_length(grammar), "grammar", err);
}
