/*
 * tool_calls.h: how a model family writes its tool calls, and the calls
 * read back out of its output text (OpenAI's `tools`).
 *
 * A chat template that knows tools shows the format its model was trained
 * on; snug_tool_format_of recognises it by its markers:
 *   hermes  (Hermes 2 Pro, Qwen2.5): <tool_call>\n{"name": N, "arguments": A}\n</tool_call>,
 *           one block a call, text before the first allowed;
 *   mistral (Mistral v0.3): [TOOL_CALLS] [{"name": N, "arguments": A}, ...],
 *           text before the marker allowed;
 *   llama3  (Llama 3.1, 3.2 JSON calls): {"name": N, "parameters": A}, calls
 *           separated by "; ", maybe after <|python_tag|>; the whole output;
 *   json    (a template with no tool format): {"name": N, "arguments": A}, or a
 *           list of them; the whole output.
 * A call's arguments are a JSON object; its name must be one of the request's
 * tools. An output that is not calls in its format is content.
 */
#ifndef SNUG_TOOL_CALLS_H
#define SNUG_TOOL_CALLS_H

#include "base/common.h"

#include <jansson.h>

typedef enum snug_tool_style {
    SNUG_TOOLS_JSON = 0,
    SNUG_TOOLS_HERMES,
    SNUG_TOOLS_MISTRAL,
    SNUG_TOOLS_LLAMA3
} snug_tool_style;

/* A format's text around and between calls: calls are written as
 * begin, then each call as open CALL close with sep between, then end;
 * CALL is {"name": "N", "<args_key>": A}. */
typedef struct snug_tool_format {
    snug_tool_style style;
    const char *name;                 /* "json", "hermes", "mistral", "llama3" */
    const char *begin, *open, *close, *sep, *end;
    const char *several_begin, *several_end; /* json: several calls are a list ("[", "]") */
    const char *marker;               /* where calls begin in a text ("" for llama3 and json:
                                       * the whole output is the calls) */
    const char *args_key;             /* "arguments" or "parameters" */
    int id_chars;                     /* a call id's characters: 9 for Mistral (its template
                                       * checks), else 0 (call_ and 24) */
} snug_tool_format;

/* The format a chat template's text shows (NULL text: json). Pure. */
const snug_tool_format *snug_tool_format_of(const char *template_text);

/* Reads the tool calls in len bytes of text in format f. When the text is
 * calls (each named in tools, a list of OpenAI tool objects) *calls gets a
 * new array of {"name": string, "arguments": object} and *content_len the
 * bytes of text before them (their marker), whitespace at its end left out;
 * otherwise *calls is NULL (the text is content). Fails only with
 * SNUG_NOMEM. */
snug_status snug_tool_calls_parse(const snug_tool_format *f, const char *text, size_t len, const json_t *tools,
                                  json_t **calls, size_t *content_len, snug_error *err);

/* While an output streams: of len bytes of text so far, how many may go
 * out as content now. A text whose calls begin at its start (llama3,
 * json) is held while it may still be calls (it starts with "{", "[" or a
 * piece of <|python_tag|>, after whitespace); a marker's text is held from
 * where it begins, and so is an end of the text that may begin one. Once
 * *calls_at is true, the calls begin at the returned offset: the rest is
 * held until the output ends. Pure. */
size_t snug_tool_calls_streamable(const snug_tool_format *f, const char *text, size_t len, bool *calls_at);

#endif /* SNUG_TOOL_CALLS_H */
