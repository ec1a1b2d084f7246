/*
 * schema.h: a JSON schema as GBNF text (grammar.h compiles it), so that
 * constrained decoding produces JSON that validates: what
 * `response_format: {"type": "json_schema"}`, `{"type": "json_object"}`
 * and tool calls' parameters ask for.
 *
 * Taken: type (one or a list), object properties (in their order),
 * required, additionalProperties (false or absent: no other keys; true or a
 * schema: other keys after the declared ones), array items, minItems,
 * maxItems, string minLength and maxLength, enum, const, anyOf, oneOf (as
 * anyOf: alternatives the value must match one of), allOf of one schema,
 * $ref to "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed),
 * true and {} (any JSON value); annotations (title, description, default,
 * examples, $schema, $id, $comment, deprecated, readOnly, writeOnly, $defs,
 * definitions) change nothing. Any other keyword that constrains a value
 * (pattern, format, minimum, ...) is refused with its path, never ignored.
 * Whitespace between tokens is at most a newline and 20 spaces or tabs, so
 * that a model cannot pad without end.
 */
#ifndef SNUG_GRAMMAR_SCHEMA_H
#define SNUG_GRAMMAR_SCHEMA_H

#include "base/common.h"
#include "base/strbuf.h"
#include "grammar.h"

#include <jansson.h>

enum {
    SNUG_SCHEMA_DEPTH_MAX = 64,   /* nested schemas */
    SNUG_SCHEMA_ITEMS_MAX = 1024, /* the largest minItems, maxItems, minLength, maxLength taken */
    SNUG_SCHEMA_REFS_MAX = 256,   /* distinct $ref targets */
    SNUG_SCHEMA_PROPERTIES_MAX = 4096, /* properties of an object */
    SNUG_SCHEMA_OPTIONAL_RUN_MAX = 48, /* optional properties in a row (required ones between reset it) */
    SNUG_SCHEMA_ENUM_MAX = 1024,  /* values of an enum, schemas of an anyOf or oneOf */
};

/* Appends to out the GBNF text of schema (start rule "root"): JSON that
 * validates against it, with no whitespace before or after the value
 * but what ws allows. what names the schema in messages
 * ("response_format.json_schema.schema"). Fails with SNUG_INVALID and a
 * message "what.path: ..." for a schema it does not take (above), or
 * SNUG_NOMEM (out failed). out is left as it is on failure but for what
 * was appended. */
snug_status snug_schema_to_gbnf(const json_t *schema, const char *what, snug_strbuf *out, snug_error *err);

/* As snug_schema_to_gbnf, but the schema's rule is named name (letters,
 * digits and dashes) and the rules it needs name-sN, and the shared rules
 * of JSON's pieces (ws, value, string, number, ...) are not written: a
 * grammar of several schemas (tool calls) converts each under its own name
 * and appends the shared rules once (snug_schema_gbnf_shared). */
snug_status snug_schema_to_gbnf_rule(const json_t *schema, const char *what, const char *name, snug_strbuf *out,
                                     snug_error *err);

/* Appends the shared rules (a failure shows in out->failed). */
void snug_schema_gbnf_shared(snug_strbuf *out);

/* schema compiled into *out (snug_schema_to_gbnf, then
 * snug_grammar_parse_gbnf): the grammar of the JSON that validates against
 * it. Fails as they do (messages start with what); *out is NULL then. */
snug_status snug_schema_compile(const json_t *schema, const char *what, snug_grammar **out, snug_error *err);

#endif /* SNUG_GRAMMAR_SCHEMA_H */
