/*
 * chat.h: a model's chat template applied to a conversation, the way
 * transformers' apply_chat_template does it (messages, tools,
 * add_generation_prompt, bos_token, eos_token).
 */
#ifndef SNUG_CHAT_H
#define SNUG_CHAT_H

#include "jinja.h"

#include "base/common.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>

/* Renders tok's chat template for messages (a JSON list of {"role",
 * "content", ...}) into a new NUL-terminated block *out (snug_mem_free) of
 * *len bytes. Fails with SNUG_INVALID when the model has no chat template or
 * the template raises an error (its message), SNUG_UNSUPPORTED or
 * SNUG_FORMAT when the template cannot be compiled (naming the construct),
 * SNUG_NOMEM. */
snug_status snug_chat_apply(const snug_tokenizer *tok, const json_t *messages,
                            bool add_generation_prompt, char **out, size_t *len, snug_error *err);

/* Why a render of the template failed, for a caller that words its own
 * message (a server shows its clients which message, not the interpreter's
 * error). */
typedef struct snug_chat_failure {
    snug_template_fail kind; /* NONE when the failure was not the render's: no template, a
                              * template that does not compile */
    size_t text_at;          /* err->msg + text_at: the message without the template's name
                              * and place (for RAISED, exactly the template's text) */
    int64_t message;         /* the index of the message the template was at (the innermost
                              * for loop around the error at a message or at a part of one,
                              * such as one of its tool_calls), or -1 when not known */
} snug_chat_failure;

/* What a template is rendered over, as apply_chat_template takes it. */
typedef struct snug_chat_input {
    const json_t *messages;     /* a JSON list of {"role", "content", ...} */
    const json_t *tools;        /* a list of OpenAI tool objects as the template's `tools`, or
                                 * NULL: `tools` undefined (as apply_chat_template's tools=None) */
    const json_t *kwargs;       /* an object of extra variables (chat_template_kwargs:
                                 * {"enable_thinking": false}), or NULL */
    bool add_generation_prompt;
    bool continue_final;        /* the last message (an assistant's) is continued, not closed:
                                 * the text ends right after its content, as transformers'
                                 * continue_final_message (add_generation_prompt must be false) */
} snug_chat_input;

/* The template's variables for in: kwargs' members, then messages,
 * add_generation_prompt and (when given) tools, and bos_token / eos_token
 * unless kwargs set them (transformers' keyword arguments override the
 * special tokens; a kwarg named messages, tools or add_generation_prompt is
 * replaced by the field's own: callers that take kwargs from a client
 * refuse those names). A new object (json_decref), or NULL out of memory. */
json_t *snug_chat_vars(const snug_chat_input *in, const char *bos_text, const char *eos_text);

/* As snug_chat_apply with the template text given (a server's
 * --chat-template) instead of tok's, over in (snug_chat_vars); text NULL
 * fails as a model without a template does. When failure is not NULL it is
 * filled on every return (kind NONE on success); err->msg keeps the whole
 * detail either way. */
snug_status snug_chat_apply_template(const char *text, const snug_tokenizer *tok,
                                     const snug_chat_input *in, snug_chat_failure *failure,
                                     char **out, size_t *len, snug_error *err);

#endif /* SNUG_CHAT_H */
