/*
 * api_structured.c: the fields that constrain what a request's output may
 * be, compiled into one grammar (api_impl.h): `response_format` (OpenAI's
 * json_object and json_schema; text is no constraint), llama.cpp's
 * `grammar` (GBNF) and `json_schema`, and vLLM's `guided_json`,
 * `guided_choice`, `guided_grammar` and `structured_outputs` (regular
 * expressions are refused: `guided_regex`). One per request. A schema or grammar that cannot be
 * compiled is a 400 naming the field and the place in it; one whose start
 * does not fit a sequence's matcher (engine/constrain.h) too.
 */
#include "api_impl.h"

#include "base/mem.h"
#include "base/strbuf.h"
#include "engine/engine.h"
#include "grammar/schema.h"

#include <string.h>

enum {
    SCHEMA_NAME_MAX = 64, /* OpenAI's limit on json_schema.name */
    CHOICES_MAX = 1024    /* strings in a guided_choice */
};

/* Takes g (compiled from the field param) as r's grammar once its start
 * fits a sequence's matcher; frees it otherwise. */
static snug_status take_grammar(snug_api_request *r, snug_grammar *g, const char *param, snug_api_error *err)
{
    snug_error e = {0};
    snug_status st = snug_engine_check_grammar(g, &e); /* the engine's own check, here to name the field */
    if (st != SNUG_OK) {
        snug_grammar_free(g);
        if (st == SNUG_NOMEM) return api_overloaded(err, &e);
        snug_error_prefix(&e, st, "%s: ", param);
        return api_compile_failed(err, param, st, &e);
    }
    r->grammar = g;
    r->grammar_param = param;
    return SNUG_OK;
}

snug_status api_compile(snug_api_request *r, const char *text, size_t len, const char *param, snug_api_error *err)
{
    snug_error e = {0};
    snug_grammar *g = NULL;
    snug_status st = snug_grammar_parse_gbnf(text, len, "root", param, &g, &e);
    return st == SNUG_OK ? take_grammar(r, g, param, err) : api_compile_failed(err, param, st, &e);
}

/* Appends the n bytes at s to b as a GBNF string literal and a space (the
 * choices here, the tools' names in api_tools.c). */
void api_gbnf_literal(snug_strbuf *b, const char *s, size_t n)
{
    snug_strbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') snug_strbuf_printf(b, "\\%c", c);
        else if (c == '\n') snug_strbuf_printf(b, "\\n");
        else if (c < 0x20 || c == 0x7F) snug_strbuf_printf(b, "\\x%02X", c);
        else snug_strbuf_put(b, s + i, 1);
    }
    snug_strbuf_put(b, "\" ", 2);
}

/* Compiles schema (a JSON schema; what names it in messages) into
 * r->grammar, from the field from. */
static snug_status compile_schema(snug_api_request *r, const json_t *schema, const char *what, const char *from,
                                  snug_api_error *err)
{
    snug_error e = {0};
    snug_grammar *g = NULL;
    snug_status st = snug_schema_compile(schema, what, &g, &e);
    return st == SNUG_OK ? take_grammar(r, g, from, err) : api_compile_failed(err, what, st, &e);
}

/* A JSON object with any members (json_object), from the field from. */
static snug_status compile_json_object(snug_api_request *r, const char *from, snug_api_error *err)
{
    json_t *object = json_pack("{s:s, s:b}", "type", "object", "additionalProperties", 1);
    snug_status st = object ? compile_schema(r, object, from, from, err)
                            : api_overloaded(err, &(snug_error){.status = SNUG_NOMEM, .msg = "no memory for a schema"});
    json_decref(object);
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
    st = compile_schema(r, schema ? schema : any, "response_format.json_schema.schema", "response_format", err);
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
    return compile_json_object(r, "response_format", err);
}

/* A schema given as its JSON text (guided_json may be a string). */
static snug_status compile_schema_text(snug_api_request *r, const json_t *text, const char *param, snug_api_error *err)
{
    json_error_t je;
    json_t *schema = json_loadb(json_string_value(text), json_string_length(text), JSON_DECODE_ANY, &je);
    if (!schema) return api_bad(err, param, "is not a JSON schema's text: %s (column %d)", je.text, je.column);
    snug_status st = json_is_object(schema) || json_is_true(schema)
                         ? compile_schema(r, schema, param, param, err)
                         : api_wrong(err, param, "a JSON schema (an object)", schema);
    json_decref(schema);
    return st;
}

/* choice: one of a list of strings, exactly (vLLM's guided_choice). */
static snug_status compile_choice(snug_api_request *r, const json_t *list, const char *param, snug_api_error *err)
{
    if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > CHOICES_MAX)
        return api_wrong(err, param, "a list of 1 to 1024 strings", list);
    snug_error e = {0};
    snug_strbuf g = {.err = &e};
    snug_strbuf_printf(&g, "root ::= ");
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *c = json_array_get(list, i);
        if (!json_is_string(c) || json_string_length(c) == 0) {
            snug_strbuf_free(&g);
            char at[64];
            snprintf(at, sizeof at, "%s[%zu]", param, i);
            return api_wrong(err, at, "a non-empty string", c);
        }
        snug_strbuf_printf(&g, "%s", i ? "| " : "");
        api_gbnf_literal(&g, json_string_value(c), json_string_length(c));
    }
    snug_status st = g.failed ? api_overloaded(err, &e) : api_compile(r, g.p, g.len, param, err);
    snug_strbuf_free(&g);
    return st;
}

static snug_status compile_gbnf(snug_api_request *r, const json_t *text, const char *param, snug_api_error *err)
{
    if (!json_is_string(text) || json_string_length(text) == 0)
        return api_wrong(err, param, "a grammar in GBNF (a non-empty string)", text);
    return api_compile(r, json_string_value(text), json_string_length(text), param, err);
}

static snug_status refuse_regex(const char *param, snug_api_error *err)
{
    return api_unsupported(err, param, "a regular expression as a constraint is not supported (give a grammar "
                                       "in GBNF or a JSON schema)");
}

/* vLLM's structured_outputs: {"json" | "choice" | "grammar" | "json_object" | "regex"}, one. */
static snug_status parse_structured_outputs(snug_api_request *r, const json_t *so, snug_api_error *err)
{
    static const char *const keys[] = {"json", "choice", "grammar", "json_object", "regex", NULL};
    if (!json_is_object(so) || json_object_size(so) != 1)
        return api_wrong(err, "structured_outputs", "an object with one of json, choice, grammar, json_object", so);
    snug_status st = api_only_keys(so, "structured_outputs", keys, err);
    if (st != SNUG_OK) return st;
    const json_t *v;
    if ((v = json_object_get(so, "json")))
        return json_is_string(v) ? compile_schema_text(r, v, "structured_outputs.json", err)
                                 : compile_schema(r, v, "structured_outputs.json", "structured_outputs.json", err);
    if ((v = json_object_get(so, "choice"))) return compile_choice(r, v, "structured_outputs.choice", err);
    if ((v = json_object_get(so, "grammar"))) return compile_gbnf(r, v, "structured_outputs.grammar", err);
    if ((v = json_object_get(so, "regex"))) return refuse_regex("structured_outputs.regex", err);
    v = json_object_get(so, "json_object");
    if (!json_is_true(v)) return api_wrong(err, "structured_outputs.json_object", "true", v);
    return compile_json_object(r, "structured_outputs.json_object", err);
}

/* One constraint field: its name, and how it is read. */
typedef struct constraint_field {
    const char *key;
    snug_status (*read)(snug_api_request *r, const json_t *v, const char *key, snug_api_error *err);
} constraint_field;

static snug_status read_response_format(snug_api_request *r, const json_t *v, const char *key, snug_api_error *err)
{
    (void)key;
    return parse_response_format(r, v, err);
}

static snug_status read_schema(snug_api_request *r, const json_t *v, const char *key, snug_api_error *err)
{
    if (json_is_string(v)) return compile_schema_text(r, v, key, err);
    if (!json_is_object(v) && !json_is_true(v)) return api_wrong(err, key, "a JSON schema (an object)", v);
    return compile_schema(r, v, key, key, err);
}

static snug_status read_regex(snug_api_request *r, const json_t *v, const char *key, snug_api_error *err)
{
    (void)r, (void)v;
    return refuse_regex(key, err);
}

static snug_status read_structured_outputs(snug_api_request *r, const json_t *v, const char *key, snug_api_error *err)
{
    (void)key;
    return parse_structured_outputs(r, v, err);
}

/* Every field that may constrain the output: OpenAI's, llama.cpp's
 * (grammar, json_schema) and vLLM's (guided_*, structured_outputs). */
static const constraint_field FIELDS[] = {
    {"response_format", read_response_format}, {"grammar", compile_gbnf},
    {"json_schema", read_schema},              {"guided_json", read_schema},
    {"guided_choice", compile_choice},         {"guided_grammar", compile_gbnf},
    {"guided_regex", read_regex},              {"structured_outputs", read_structured_outputs},
};

snug_status api_parse_structured(const json_t *body, snug_api_request *r, snug_api_error *err)
{
    const char *first = NULL;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(FIELDS); i++) {
        const json_t *v = api_opt(body, FIELDS[i].key);
        if (!v) continue;
        if (r->grammar)
            return api_bad(err, FIELDS[i].key, "a request takes one constraint on its output, and %s gives one "
                                               "already", first);
        snug_status st = FIELDS[i].read(r, v, FIELDS[i].key, err);
        if (st != SNUG_OK) return st;
        if (r->grammar) first = FIELDS[i].key;
    }
    return SNUG_OK;
}
