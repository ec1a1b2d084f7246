/*
 * chat.c: applying a tokenizer's chat template to a conversation.
 */
#include "chat.h"

#include "jinja.h"
#include "base/json.h"

#include <string.h>

snug_status snug_chat_apply(const snug_tokenizer *tok, const json_t *messages,
                            bool add_generation_prompt, char **out, size_t *len, snug_error *err)
{
    return snug_chat_apply_template(snug_tokenizer_chat_template(tok), tok, messages,
                                    add_generation_prompt, out, len, err);
}

snug_status snug_chat_apply_template(const char *text, const snug_tokenizer *tok,
                                     const json_t *messages, bool add_generation_prompt,
                                     char **out, size_t *len, snug_error *err)
{
    if (!text) return snug_errorf(err, SNUG_INVALID, "the model has no chat template (tokenizer_config.json: chat_template)");
    snug_json_init();
    snug_template *tpl = NULL;
    json_t *vars = NULL;
    snug_status st = snug_template_compile(text, strlen(text), "chat_template", &tpl, err);
    if (st != SNUG_OK) goto done;
    vars = json_pack("{s:O, s:b, s:s, s:s}", "messages", (json_t *)messages, "add_generation_prompt",
                     add_generation_prompt, "bos_token", snug_tokenizer_bos_text(tok), "eos_token",
                     snug_tokenizer_eos_text(tok));
    if (!vars) {
        st = snug_errorf(err, SNUG_NOMEM, "out of memory building the chat template's variables");
        goto done;
    }
    st = snug_template_render(tpl, vars, out, len, err);
done:
    json_decref(vars);
    snug_template_free(tpl);
    return st;
}
