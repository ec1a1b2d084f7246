/*
 * chat.h: a model's chat template applied to a conversation, the way
 * transformers' apply_chat_template does it (messages, add_generation_prompt,
 * bos_token, eos_token).
 */
#ifndef SNUG_CHAT_H
#define SNUG_CHAT_H

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

/* As snug_chat_apply with the template text given (a server's
 * --chat-template) instead of tok's; text NULL fails as a model without a
 * template does. */
snug_status snug_chat_apply_template(const char *text, const snug_tokenizer *tok,
                                     const json_t *messages, bool add_generation_prompt,
                                     char **out, size_t *len, snug_error *err);

#endif /* SNUG_CHAT_H */
