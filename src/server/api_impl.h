/*
 * api_impl.h: what the request parser's modules share (private to
 * api_request.c, api_structured.c, api_tools.c and api_fields.c). The calls
 * go one way: api_request.c calls the other three, api_tools.c calls
 * api_structured.c, and both call api_fields.c, which calls none of them.
 * Every error fills *err and returns the status it stands for.
 */
#ifndef SNUG_API_IMPL_H
#define SNUG_API_IMPL_H

#include "api_request.h"
#include "base/strbuf.h"

/* ---- api_fields.c: OpenAI-shaped errors and field readers --------------- */

/* Formats a param path ("messages[2].role") into buf (64 bytes, truncated
 * to fit). Returns buf. */
const char *api_path(char buf[64], const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A 400 for param ("" for the body as a whole) whose message is "param: "
 * and the formatted text. Returns SNUG_INVALID. */
snug_status api_bad(snug_api_error *err, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A 400: "param: expected <expected>, got <v described>". */
snug_status api_wrong(snug_api_error *err, const char *param, const char *expected, const json_t *v);

/* A 400 for a field the server does not do as asked: "key: why; ...". */
snug_status api_unsupported(snug_api_error *err, const char *key, const char *why);

/* A 503 for memory that did not fit: SNUG_API_BUSY_MESSAGE for the
 * client, e's message (the allocator's) in err->detail for the server's
 * log. Returns SNUG_NOMEM. */
snug_status api_overloaded(snug_api_error *err, const snug_error *e);

/* A 400 for a failed compile of param: e's message as it is (it names the
 * field and the place), or a 503 when st is SNUG_NOMEM. Returns st. */
snug_status api_compile_failed(snug_api_error *err, const char *param, snug_status st, const snug_error *e);

/* obj[key], or NULL when it is absent or null. */
const json_t *api_opt(const json_t *obj, const char *key);

/* Whether v is the string s. */
bool api_is_str(const json_t *v, const char *s);

/* Whether v is null, false, an empty string or an empty list. */
bool api_empty_value(const json_t *v);

/* Whether key is one of list (NULL-terminated). */
bool api_listed(const char *const *list, const char *key);

/* Checks that every key of obj is one of keys (NULL-terminated); a 400
 * naming the first that is not, under param. */
snug_status api_only_keys(const json_t *obj, const char *param, const char *const *keys, snug_api_error *err);

/* Sets obj[key] to v (taken; false when v is NULL, for no memory, or the
 * set fails): building a translated request. */
bool api_put(json_t *obj, const char *key, json_t *v);

/* Appends v (taken) to list; false as api_put. */
bool api_add(json_t *list, json_t *v);

/* A 503 for memory that a translation of what (another API's request)
 * did not find. Returns SNUG_NOMEM. */
snug_status api_no_memory(snug_api_error *err, const char *what);

/* Another API's content at param: a string (taken as it is), or a list of
 * parts whose type is one of types (NULL-terminated; text in "text", or
 * "refusal" for that type), as chat's text parts into *parts (new). A 400
 * naming the part otherwise (a type not listed: this server runs a text
 * model). */
snug_status api_text_parts(const json_t *v, const char *param, const char *const *types, json_t **parts,
                           snug_api_error *err);

/* ---- api_structured.c: the compile step, and the constraining fields ---- */

/* Compiles the GBNF text of len bytes into r->grammar, from the field
 * param (also the name in messages, r->grammar_param), and checks that its
 * start fits a sequence's matcher (engine/constrain.h). */
snug_status api_compile(snug_api_request *r, const char *text, size_t len, const char *param, snug_api_error *err);

/* Appends the n bytes at s to b as a GBNF string literal and a space. */
void api_gbnf_literal(snug_strbuf *b, const char *s, size_t n);

/* Reads the fields that constrain the output (`response_format`,
 * `grammar`, `json_schema`, `guided_json`, `guided_choice`,
 * `guided_grammar`, `guided_regex`, `structured_outputs`; one per request)
 * of body into r->grammar, compiled (api_request.h). Fails with a 400
 * naming the field and the place in the schema or grammar, or SNUG_NOMEM
 * (503) when the compiled grammar does not fit. */
snug_status api_parse_structured(const json_t *body, snug_api_request *r, snug_api_error *err);

/* ---- api_tools.c ------------------------------------------------------- */

/* Reads a chat's `tools`, `tool_choice` and `parallel_tool_calls` into r
 * (api_request.h); with "required" or a named function, the grammar of the
 * calls in lim->tool_format into r->grammar (after response_format and
 * grammar, which it may not join). Fails with a 400 naming the field (a
 * tool's parameters down to the place in its schema), or a 503. */
snug_status api_parse_tools(const json_t *body, const snug_api_limits *lim, snug_api_request *r, snug_api_error *err);

/* ---- api_anthropic.c ---------------------------------------------------- */

/* Checks body, an Anthropic Messages request (count_only: of
 * /v1/messages/count_tokens, which takes no max_tokens, stop or sampling
 * fields), in that API's terms and makes *chat (new) the chat request that
 * means the same for the parser: system and messages as chat messages
 * (text blocks as text parts, tool_use blocks as tool_calls, tool_result
 * blocks as tool messages, thinking blocks as reasoning_content), tools as
 * functions, tool_choice auto/any/tool/none as auto/required/the
 * function/none (disable_parallel_tool_use as parallel_tool_calls false),
 * stop_sequences as stop, thinking as the template's enable_thinking and,
 * where think_budget (the model has a think block to budget), its
 * budget_tokens as thinking_token_budget. Fails with a 400 naming the
 * Anthropic field (an unknown one included), or a 503 for memory. */
snug_status api_anthropic_to_chat(const json_t *body, bool count_only, bool think_budget, json_t **chat,
                                  snug_api_error *err);

/* ---- api_responses.c --------------------------------------------------- */

/* Checks body, an OpenAI Responses request, in that API's terms and makes
 * *chat (new) the chat request that means the same: instructions as a
 * system message, input (a string, or message, function_call,
 * function_call_output and reasoning items) as chat messages (function
 * calls as the assistant turn's tool_calls, outputs as tool messages,
 * reasoning as its reasoning_content), function tools as chat's,
 * text.format as response_format, max_output_tokens as max_tokens,
 * reasoning.effort as the template's reasoning_effort. previous_response_id
 * is a 400 (the server keeps no responses), as is an unknown field. Fails
 * with a 400 naming the Responses field, or a 503 for memory. */
snug_status api_responses_to_chat(const json_t *body, json_t **chat, snug_api_error *err);

#endif /* SNUG_API_IMPL_H */
