/*
 * schema.c: JSON schema to GBNF (schema.h). Each schema that needs one
 * gets a rule "NAME-sN" (NAME the rule of the whole schema); JSON's own pieces (string, number, any value, ws) are
 * shared rules written once at the end. A rule's body is built in a buffer
 * of its own while the rules of the schemas inside it are written, then
 * appended.
 */
#include "schema.h"

#include "base/mem.h"
#include "base/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct ref_rule {
    const char *ref; /* the $ref string (in the schema, which outlives the conversion) */
    int32_t rule;
} ref_rule;

typedef struct conv {
    const json_t *root;
    const char *what;
    const char *prefix; /* of the rules' names: PREFIX-sN */
    snug_strbuf *out;
    snug_error *err;
    snug_status st;
    int32_t n_rules;
    int32_t depth;
    int32_t n_refs;
    ref_rule refs[SNUG_SCHEMA_REFS_MAX];
    char path[256]; /* where in the schema, for messages */
} conv;

/* JSON's pieces, shared by every schema's rules. */
static const char SHARED[] =
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" ws value )* )? \"}\" ws\n"
    "array ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n"
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "string ::= \"\\\"\" char* \"\\\"\" ws\n"
    "integer ::= \"-\"? ( [0-9] | [1-9] [0-9]{1,15} ) ws\n"
    "number ::= \"-\"? ( [0-9] | [1-9] [0-9]{1,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )? ws\n"
    "boolean ::= ( \"true\" | \"false\" ) ws\n"
    "null ::= \"null\" ws\n";

static const char *const ANNOTATIONS[] = {"title",    "description", "default",  "examples",  "$schema",
                                          "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
                                          "$defs",    "definitions", NULL};
static const char *const TAKEN[] = {"type",     "properties", "required", "additionalProperties", "items",
                                    "minItems", "maxItems",   "minLength", "maxLength",           "enum",
                                    "const",    "anyOf",      "oneOf",     "allOf",               "$ref",
                                    NULL};

static bool listed(const char *const *list, const char *key)
{
    for (; *list; list++)
        if (strcmp(*list, key) == 0) return true;
    return false;
}

static bool bad(conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool bad(conv *c, const char *fmt, ...)
{
    if (c->st != SNUG_OK) return false;
    char place[512];
    snprintf(place, sizeof place, "%s%s", c->what, c->path);
    va_list ap;
    va_start(ap, fmt);
    c->st = snug_verrorf_at(c->err, SNUG_INVALID, place, fmt, ap);
    va_end(ap);
    return false;
}

/* Appends ".key" (or "[i]" when key is NULL) to the path; returns its old
 * length for path_pop. */
static size_t path_push(conv *c, const char *key, size_t i)
{
    size_t n = strlen(c->path);
    if (key) snprintf(c->path + n, sizeof c->path - n, ".%s", key);
    else snprintf(c->path + n, sizeof c->path - n, "[%zu]", i);
    return n;
}

static void path_pop(conv *c, size_t n) { c->path[n] = '\0'; }

/* s as the inside of a GBNF string: quotes, backslashes and control
 * characters escaped. */
static void put_gbnf_escaped(snug_strbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') snug_strbuf_printf(b, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7F) snug_strbuf_printf(b, "\\x%02X", ch);
        else snug_strbuf_put(b, (const char *)&ch, 1);
    }
}

/* The JSON text of v as a GBNF string literal followed by ws, into b. */
static bool put_literal(conv *c, snug_strbuf *b, const json_t *v)
{
    char *text = snug_json_dumps(v, false);
    if (!text) return bad(c, "a value that cannot be written as JSON");
    snug_strbuf_put(b, "\"", 1);
    put_gbnf_escaped(b, text, strlen(text));
    snug_strbuf_put(b, "\" ws", 4);
    snug_mem_free(text);
    return true;
}

static bool visit(conv *c, const json_t *s, snug_strbuf *b);

/* Whether buffer b holds what was appended: false (c failed for want of
 * memory, the buffer's message in err) once an append failed. */
static bool held(conv *c, const snug_strbuf *b)
{
    if (!b->failed) return true;
    if (c->st == SNUG_OK) c->st = SNUG_NOMEM;
    return false;
}

/* A new rule for schema s, written to the output; its number, or -1. */
static int32_t rule_of(conv *c, const json_t *s)
{
    int32_t r = c->n_rules++;
    snug_strbuf body = {.err = c->err};
    bool ok = visit(c, s, &body) && held(c, &body);
    if (ok) snug_strbuf_printf(c->out, "%s-s%d ::= %s\n", c->prefix, r, body.p ? body.p : "\"\"");
    snug_strbuf_free(&body);
    return ok ? r : -1;
}

/* The reference to the rule of schema s (a shared one when s is any value). */
static bool put_ref(conv *c, snug_strbuf *b, const json_t *s)
{
    if (json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0)) {
        snug_strbuf_printf(b, "value");
        return true;
    }
    int32_t r = rule_of(c, s);
    if (r < 0) return false;
    snug_strbuf_printf(b, "%s-s%d", c->prefix, r);
    return true;
}

/* A count keyword (minItems, maxLength, ...) of s into *out; absent: dflt. */
static bool count(conv *c, const json_t *s, const char *key, int64_t dflt, int64_t *out)
{
    const json_t *v = json_object_get(s, key);
    *out = dflt;
    if (!v) return true;
    size_t n = path_push(c, key, 0);
    bool ok = json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= SNUG_SCHEMA_ITEMS_MAX;
    if (ok) *out = json_integer_value(v);
    else bad(c, "expected an integer from 0 to %d", SNUG_SCHEMA_ITEMS_MAX);
    path_pop(c, n);
    return ok;
}

/* "x{m,n}": m to n (n < 0: no bound) times. */
static void put_times(snug_strbuf *b, int64_t m, int64_t n)
{
    if (n < 0) snug_strbuf_printf(b, "{%lld,}", (long long)m);
    else snug_strbuf_printf(b, "{%lld,%lld}", (long long)m, (long long)n);
}

/* "key": ws value, for property key with schema v. */
static bool put_pair(conv *c, snug_strbuf *b, const char *key, const json_t *v)
{
    json_t *k = json_string(key);
    if (!k) {
        c->st = snug_errorf(c->err, SNUG_NOMEM, "%s: no memory for a property name", c->what);
        return false;
    }
    bool ok = put_literal(c, b, k);
    json_decref(k);
    if (!ok) return false;
    snug_strbuf_printf(b, " \":\" ws ");
    size_t n = path_push(c, "properties", 0);
    size_t m = path_push(c, key, 0);
    ok = put_ref(c, b, v);
    path_pop(c, m);
    path_pop(c, n);
    return ok;
}

static bool is_required(const json_t *required, const char *key)
{
    for (size_t i = 0; i < json_array_size(required); i++)
        if (json_is_string(json_array_get(required, i)) && strcmp(json_string_value(json_array_get(required, i)), key) == 0)
            return true;
    return false;
}

/* An object: its declared properties in their order, each optional one
 * may be left out, then other keys when additionalProperties allows
 * them. Linear in the properties: for each k, a rule C_k (the next
 * property written is k or, when k is optional, one after it) and R_k
 * (what follows once one is written: nothing, or a comma and C_k; only the
 * comma when a required one is still to come). A run of optional
 * properties is as wide as it is long (each may be the next): the
 * grammar's width limit bounds it. */
static bool put_object(conv *c, const json_t *s, snug_strbuf *b)
{
    const json_t *props = json_object_get(s, "properties"), *required = json_object_get(s, "required");
    const json_t *extra = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return bad(c, "properties: expected an object");
    if (required && !json_is_array(required)) return bad(c, "required: expected a list of names");
    if (json_object_size(props) > SNUG_SCHEMA_PROPERTIES_MAX)
        return bad(c, "properties: %zu of them, more than the %d taken", json_object_size(props),
                   SNUG_SCHEMA_PROPERTIES_MAX);
    for (size_t i = 0; i < json_array_size(required); i++) {
        const json_t *k = json_array_get(required, i);
        if (!json_is_string(k)) return bad(c, "required[%zu]: expected a property name", i);
        if (!json_object_get(props, json_string_value(k)))
            return bad(c, "required[%zu]: \"%.64s\" is not among the properties", i, json_string_value(k));
    }
    if (extra && !json_is_boolean(extra) && !json_is_object(extra))
        return bad(c, "additionalProperties: expected true, false or a schema");
    bool extras = extra && !json_is_false(extra);
    size_t n = json_object_size(props);
    /* a property's "key": ws value, and whether a required one is at it or after it */
    snug_strbuf *pairs = n ? snug_mem_alloc(SNUG_MEM_OTHER, n * (sizeof *pairs + 2), c->err) : NULL;
    bool *req = pairs ? (bool *)(pairs + n) : NULL, *req_after = req ? req + n : NULL;
    bool ok = !n || pairs;
    if (!ok) c->st = SNUG_NOMEM;
    size_t i = 0;
    const char *key;
    const json_t *v;
    if (ok) json_object_foreach((json_t *)props, key, v) {
            pairs[i] = (snug_strbuf){.err = c->err};
            req[i] = is_required(required, key);
            ok = ok && put_pair(c, &pairs[i], key, v) && held(c, &pairs[i]);
            i++;
        }
    for (i = n; ok && i-- > 0;) req_after[i] = req[i] || (i + 1 < n && req_after[i + 1]);
    for (size_t k = 0, run = 0; ok && k < n; k++) { /* the properties that may come next at once */
        run = req[k] ? 0 : run + 1;
        if (run > SNUG_SCHEMA_OPTIONAL_RUN_MAX)
            ok = bad(c, "properties: more than %d optional properties in a row (each may be the next one written, "
                        "and they are followed at once); make some of them required",
                     SNUG_SCHEMA_OPTIONAL_RUN_MAX);
    }
    snug_strbuf kv = {.err = c->err};
    int32_t more = -1; /* the rule of ( "," ws extra-pair )* */
    if (ok && extras) {
        snug_strbuf_printf(&kv, "string \":\" ws ");
        size_t m = path_push(c, "additionalProperties", 0);
        ok = put_ref(c, &kv, extra) && held(c, &kv);
        path_pop(c, m);
        if (ok) {
            more = c->n_rules++;
            snug_strbuf_printf(c->out, "%s-s%d ::= ( \",\" ws %s %s-s%d )?\n", c->prefix, more, kv.p, c->prefix, more);
        }
    }
    int32_t base = c->n_rules; /* C_k is base + 2k, R_k base + 2k + 1 */
    if (ok) c->n_rules += 2 * (int32_t)n;
    for (size_t k = 0; ok && k < n; k++) {
        snug_strbuf_printf(c->out, "%s-s%d ::= %s ", c->prefix, base + 2 * (int32_t)k, pairs[k].p);
        if (k + 1 < n) snug_strbuf_printf(c->out, "%s-s%d", c->prefix, base + 2 * (int32_t)k + 3);
        else if (more >= 0) snug_strbuf_printf(c->out, "%s-s%d", c->prefix, more);
        if (!req[k] && k + 1 < n) snug_strbuf_printf(c->out, " | %s-s%d", c->prefix, base + 2 * (int32_t)k + 2);
        snug_strbuf_printf(c->out, "\n");
        if (k > 0) {
            snug_strbuf_printf(c->out, "%s-s%d ::= \",\" ws %s-s%d", c->prefix, base + 2 * (int32_t)k + 1, c->prefix,
                               base + 2 * (int32_t)k);
            if (!req_after[k]) {
                if (more >= 0) snug_strbuf_printf(c->out, " | %s-s%d", c->prefix, more);
                else snug_strbuf_printf(c->out, " | \"\"");
            }
            snug_strbuf_printf(c->out, "\n");
        }
    }
    if (ok) {
        snug_strbuf_printf(b, "\"{\" ws ");
        if (n > 0 && req_after[0]) snug_strbuf_printf(b, "%s-s%d", c->prefix, base);
        else if (n > 0 && extras) snug_strbuf_printf(b, "( %s-s%d | %s %s-s%d )?", c->prefix, base, kv.p, c->prefix, more);
        else if (n > 0) snug_strbuf_printf(b, "%s-s%d?", c->prefix, base);
        else if (extras) snug_strbuf_printf(b, "( %s %s-s%d )?", kv.p, c->prefix, more);
        snug_strbuf_printf(b, " \"}\" ws");
    }
    snug_strbuf_free(&kv);
    for (i = 0; pairs && i < n; i++) snug_strbuf_free(&pairs[i]);
    snug_mem_free(pairs);
    return ok;
}

/* An array of items (any value when absent) between minItems and maxItems. */
static bool put_array(conv *c, const json_t *s, snug_strbuf *b)
{
    int64_t lo, hi;
    if (!count(c, s, "minItems", 0, &lo) || !count(c, s, "maxItems", -1, &hi)) return false;
    if (hi >= 0 && hi < lo) return bad(c, "maxItems (%lld) is below minItems (%lld)", (long long)hi, (long long)lo);
    const json_t *items = json_object_get(s, "items");
    if (items && !json_is_object(items) && !json_is_boolean(items)) return bad(c, "items: expected a schema");
    if (json_is_false(items) && lo > 0) return bad(c, "items false (no items) with minItems above 0");
    if (json_is_false(items) || hi == 0) {
        snug_strbuf_printf(b, "\"[\" ws \"]\" ws");
        return true;
    }
    snug_strbuf item = {.err = c->err};
    size_t m = path_push(c, "items", 0);
    bool ok = put_ref(c, &item, items ? items : json_true()) && held(c, &item);
    path_pop(c, m);
    if (ok) {
        snug_strbuf_printf(b, "\"[\" ws %s%s ( \",\" ws %s )", lo == 0 ? "( " : "", item.p, item.p);
        put_times(b, lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
        snug_strbuf_printf(b, "%s \"]\" ws", lo == 0 ? " )?" : "");
    }
    snug_strbuf_free(&item);
    return ok;
}

/* A string of minLength to maxLength characters. */
static bool put_string(conv *c, const json_t *s, snug_strbuf *b)
{
    int64_t lo, hi;
    if (!count(c, s, "minLength", 0, &lo) || !count(c, s, "maxLength", -1, &hi)) return false;
    if (hi >= 0 && hi < lo) return bad(c, "maxLength (%lld) is below minLength (%lld)", (long long)hi, (long long)lo);
    if (lo == 0 && hi < 0) {
        snug_strbuf_printf(b, "string");
        return true;
    }
    snug_strbuf_printf(b, "\"\\\"\" char");
    put_times(b, lo, hi);
    snug_strbuf_printf(b, " \"\\\"\" ws");
    return true;
}

/* One type's value, into b. */
static bool put_type(conv *c, const json_t *s, const char *type, snug_strbuf *b)
{
    if (strcmp(type, "object") == 0) return put_object(c, s, b);
    if (strcmp(type, "array") == 0) return put_array(c, s, b);
    if (strcmp(type, "string") == 0) return put_string(c, s, b);
    if (strcmp(type, "number") == 0 || strcmp(type, "integer") == 0 || strcmp(type, "boolean") == 0 ||
        strcmp(type, "null") == 0) {
        snug_strbuf_printf(b, "%s", type);
        return true;
    }
    return bad(c, "type: \"%.32s\" is not a JSON schema type (object, array, string, number, integer, boolean, null)",
               type);
}

/* "#", "#/$defs/NAME" or "#/definitions/NAME": the schema it names. */
static const json_t *resolve(conv *c, const char *ref)
{
    if (strcmp(ref, "#") == 0) return c->root;
    const char *name = NULL;
    const json_t *defs = NULL;
    if (strncmp(ref, "#/$defs/", 8) == 0) name = ref + 8, defs = json_object_get(c->root, "$defs");
    else if (strncmp(ref, "#/definitions/", 14) == 0) name = ref + 14, defs = json_object_get(c->root, "definitions");
    const json_t *s = name ? json_object_get(defs, name) : NULL;
    if (!s) bad(c, "$ref: \"%.64s\" names no schema (taken: \"#\", \"#/$defs/NAME\", \"#/definitions/NAME\")", ref);
    return s;
}

/* A $ref: its target's rule, made once (so that recursive schemas end). */
static bool put_ref_keyword(conv *c, const json_t *s, snug_strbuf *b)
{
    const json_t *ref = json_object_get(s, "$ref");
    if (!json_is_string(ref)) return bad(c, "$ref: expected a string");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        if (strcmp(key, "$ref") != 0 && listed(TAKEN, key))
            return bad(c, "%s beside $ref is not supported (put it in the schema $ref names)", key);
    }
    for (int32_t i = 0; i < c->n_refs; i++)
        if (strcmp(c->refs[i].ref, json_string_value(ref)) == 0) {
            snug_strbuf_printf(b, "%s-s%d", c->prefix, c->refs[i].rule);
            return true;
        }
    const json_t *target = resolve(c, json_string_value(ref));
    if (!target) return false;
    if (c->n_refs == SNUG_SCHEMA_REFS_MAX) return bad(c, "more than %d distinct $ref targets", SNUG_SCHEMA_REFS_MAX);
    int32_t r = c->n_rules++;
    c->refs[c->n_refs++] = (ref_rule){json_string_value(ref), r};
    snug_strbuf body = {.err = c->err};
    bool ok = put_ref(c, &body, target) && held(c, &body);
    if (ok) snug_strbuf_printf(c->out, "%s-s%d ::= %s\n", c->prefix, r, body.p);
    snug_strbuf_free(&body);
    if (ok) snug_strbuf_printf(b, "%s-s%d", c->prefix, r);
    return ok;
}

/* Alternatives: one of the schemas in the list under key. */
static bool put_any_of(conv *c, const json_t *s, const char *key, snug_strbuf *b)
{
    const json_t *list = json_object_get(s, key);
    if (!json_is_array(list) || json_array_size(list) == 0) return bad(c, "%s: expected a non-empty list of schemas", key);
    if (json_array_size(list) > SNUG_SCHEMA_ENUM_MAX)
        return bad(c, "%s: %zu schemas, more than the %d taken", key, json_array_size(list), SNUG_SCHEMA_ENUM_MAX);
    snug_strbuf_printf(b, "( ");
    for (size_t i = 0; i < json_array_size(list); i++) {
        size_t m = path_push(c, key, 0), k = path_push(c, NULL, i);
        if (i) snug_strbuf_printf(b, " | ");
        bool ok = put_ref(c, b, json_array_get(list, i));
        path_pop(c, k);
        path_pop(c, m);
        if (!ok) return false;
    }
    snug_strbuf_printf(b, " )");
    return true;
}

/* The body of schema s's rule, into b. */
static bool visit(conv *c, const json_t *s, snug_strbuf *b)
{
    if (json_is_false(s)) return bad(c, "the schema false admits no value");
    if (json_is_true(s)) return snug_strbuf_printf(b, "value"), true;
    if (!json_is_object(s)) return bad(c, "expected a schema (an object, or true or false)");
    if (++c->depth > SNUG_SCHEMA_DEPTH_MAX) return bad(c, "schemas nested more than %d deep", SNUG_SCHEMA_DEPTH_MAX);
    const char *key;
    const json_t *v;
    bool ok = true;
    json_object_foreach((json_t *)s, key, v) {
        if (!listed(TAKEN, key) && !listed(ANNOTATIONS, key)) {
            ok = bad(c, "the keyword \"%.64s\" is not supported (it would be ignored, so the output could break it)",
                     key);
            break;
        }
    }
    const json_t *type = json_object_get(s, "type");
    if (!ok) {
    } else if (json_object_get(s, "$ref")) {
        ok = put_ref_keyword(c, s, b);
    } else if (json_object_get(s, "const")) {
        ok = put_literal(c, b, json_object_get(s, "const"));
    } else if (json_object_get(s, "enum")) {
        const json_t *e = json_object_get(s, "enum");
        if (!json_is_array(e) || json_array_size(e) == 0) {
            ok = bad(c, "enum: expected a non-empty list of values");
        } else if (json_array_size(e) > SNUG_SCHEMA_ENUM_MAX) {
            ok = bad(c, "enum: %zu values, more than the %d taken", json_array_size(e), SNUG_SCHEMA_ENUM_MAX);
        } else {
            snug_strbuf_printf(b, "( ");
            for (size_t i = 0; ok && i < json_array_size(e); i++) {
                if (i) snug_strbuf_printf(b, " | ");
                ok = put_literal(c, b, json_array_get(e, i));
            }
            snug_strbuf_printf(b, " )");
        }
    } else if (json_object_get(s, "anyOf") || json_object_get(s, "oneOf")) {
        ok = put_any_of(c, s, json_object_get(s, "anyOf") ? "anyOf" : "oneOf", b);
    } else if (json_object_get(s, "allOf")) {
        const json_t *all = json_object_get(s, "allOf");
        size_t m = path_push(c, "allOf", 0);
        ok = json_is_array(all) && json_array_size(all) == 1 ? put_ref(c, b, json_array_get(all, 0))
                                                               : bad(c, "only a list of one schema is supported");
        path_pop(c, m);
    } else if (json_is_string(type)) {
        ok = put_type(c, s, json_string_value(type), b);
    } else if (json_is_array(type) && json_array_size(type) > 0) {
        snug_strbuf_printf(b, "( ");
        for (size_t i = 0; ok && i < json_array_size(type); i++) {
            const json_t *t = json_array_get(type, i);
            if (i) snug_strbuf_printf(b, " | ");
            ok = json_is_string(t) ? put_type(c, s, json_string_value(t), b) : bad(c, "type[%zu]: expected a name", i);
        }
        snug_strbuf_printf(b, " )");
    } else if (type) {
        ok = bad(c, "type: expected a type name or a non-empty list of them");
    } else if (json_object_get(s, "properties") || json_object_get(s, "required") ||
               json_object_get(s, "additionalProperties")) {
        ok = put_object(c, s, b);
    } else if (json_object_get(s, "items") || json_object_get(s, "minItems") || json_object_get(s, "maxItems")) {
        ok = put_array(c, s, b);
    } else if (json_object_get(s, "minLength") || json_object_get(s, "maxLength")) {
        ok = put_string(c, s, b);
    } else {
        snug_strbuf_printf(b, "value");
    }
    c->depth--;
    return ok;
}

snug_status snug_schema_to_gbnf_rule(const json_t *schema, const char *what, const char *name, snug_strbuf *out,
                                     snug_error *err)
{
    conv *c = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *c, err);
    if (!c) return SNUG_NOMEM;
    *c = (conv){.root = schema, .what = what ? what : "schema", .prefix = name, .out = out, .err = err};
    snug_strbuf root = {.err = err};
    bool ok = put_ref(c, &root, schema) && held(c, &root);
    if (ok) snug_strbuf_printf(out, "%s ::= %s\n", name, root.p);
    snug_strbuf_free(&root);
    snug_status st = c->st != SNUG_OK ? c->st : out->failed ? SNUG_NOMEM : SNUG_OK;
    if (st == SNUG_NOMEM && out->failed) snug_errorf(err, SNUG_NOMEM, "%s: no memory for its grammar", c->what);
    snug_mem_free(c);
    return st;
}

void snug_schema_gbnf_shared(snug_strbuf *out) { snug_strbuf_printf(out, "%s", SHARED); }

snug_status snug_schema_compile(const json_t *schema, const char *what, snug_grammar **out, snug_error *err)
{
    *out = NULL;
    snug_strbuf gbnf = {.err = err};
    snug_status st = snug_schema_to_gbnf(schema, what, &gbnf, err);
    if (st == SNUG_OK) st = snug_grammar_parse_gbnf(gbnf.p, gbnf.len, "root", what ? what : "schema", out, err);
    snug_strbuf_free(&gbnf);
    return st;
}

snug_status snug_schema_to_gbnf(const json_t *schema, const char *what, snug_strbuf *out, snug_error *err)
{
    snug_status st = snug_schema_to_gbnf_rule(schema, what, "root", out, err);
    if (st == SNUG_OK) snug_schema_gbnf_shared(out);
    if (st == SNUG_OK && out->failed) st = snug_errorf(err, SNUG_NOMEM, "%s: no memory for its grammar", what ? what : "schema");
    return st;
}
