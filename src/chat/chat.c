/*
 * chat.c: applying a tokenizer's chat template to a conversation, and
 * saying which message a failed render was at.
 */
#include "chat.h"

#include "base/json.h"
#include "base/mem.h"

#include <string.h>

snug_status snug_chat_apply(const snug_tokenizer *tok, const json_t *messages,
                            bool add_generation_prompt, char **out, size_t *len, snug_error *err)
{
    snug_chat_input in = {.messages = messages, .add_generation_prompt = add_generation_prompt};
    return snug_chat_apply_template(snug_tokenizer_chat_template(tok), tok, &in, NULL, out, len, err);
}

/* Whether item is v or lies inside it. */
static bool holds(const json_t *v, const json_t *item)
{
    if (v == item) return true;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (holds(json_array_get(v, i), item)) return true;
    const char *key;
    json_t *member;
    json_object_foreach((json_t *)v, key, member) {
        if (holds(member, item)) return true;
    }
    (void)key;
    return false;
}

/* The index of the message that is or holds the innermost of f's loop
 * items that is in messages, or -1. */
static int64_t failed_message(const json_t *messages, const snug_template_failure *f)
{
    for (int k = 0; k < f->n_items; k++)
        for (size_t i = 0; i < json_array_size(messages); i++)
            if (holds(json_array_get(messages, i), f->items[k])) return (int64_t)i;
    return -1;
}

json_t *snug_chat_vars(const snug_chat_input *in, const char *bos_text, const char *eos_text)
{
    json_t *vars = json_object();
    bool ok = vars != NULL && (!in->kwargs || json_object_update(vars, (json_t *)in->kwargs) == 0);
    ok = ok && json_object_set(vars, "messages", (json_t *)in->messages) == 0;
    ok = ok && json_object_set_new(vars, "add_generation_prompt", json_boolean(in->add_generation_prompt)) == 0;
    if (ok && in->tools) ok = json_object_set(vars, "tools", (json_t *)in->tools) == 0;
    else if (ok) json_object_del(vars, "tools");
    if (ok && !json_object_get(vars, "bos_token"))
        ok = json_object_set_new(vars, "bos_token", json_string(bos_text ? bos_text : "")) == 0;
    if (ok && !json_object_get(vars, "eos_token"))
        ok = json_object_set_new(vars, "eos_token", json_string(eos_text ? eos_text : "")) == 0;
    if (!ok) {
        json_decref(vars);
        return NULL;
    }
    return vars;
}

/* A rendered chat (text, *len bytes) cut right after the last message's
 * content (stripped of surrounding whitespace, as transformers looks for
 * it), so that the model continues that message; an error when the
 * template did not write it. */
static snug_status cut_after_final(const json_t *messages, char *text, size_t *len, snug_error *err)
{
    const json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    const char *content = json_string_value(json_object_get(last, "content"));
    size_t n = content ? strlen(content) : 0;
    while (n > 0 && strchr(" \t\n\r", content[n - 1])) n--;
    while (n > 0 && strchr(" \t\n\r", content[0])) content++, n--;
    if (n == 0) return SNUG_OK; /* nothing to find: the text as rendered */
    for (size_t at = *len; at >= n; at--)
        if (memcmp(text + at - n, content, n) == 0) {
            *len = at;
            text[at] = '\0';
            return SNUG_OK;
        }
    return snug_errorf(err, SNUG_INVALID, "the chat template did not write the final message's content, so it "
                       "cannot be continued");
}

snug_status snug_chat_apply_template(const char *text, const snug_tokenizer *tok,
                                     const snug_chat_input *in, snug_chat_failure *failure,
                                     char **out, size_t *len, snug_error *err)
{
    snug_chat_failure none = {.message = -1};
    if (!failure) failure = &none;
    *failure = none;
    if (!text) return snug_errorf(err, SNUG_INVALID, "the model has no chat template (tokenizer_config.json: chat_template)");
    snug_json_init();
    snug_template *tpl = NULL;
    json_t *vars = NULL;
    snug_template_failure f = {0};
    snug_status st = snug_template_compile(text, strlen(text), "chat_template", &tpl, err);
    if (st != SNUG_OK) goto done;
    vars = snug_chat_vars(in, snug_tokenizer_bos_text(tok), snug_tokenizer_eos_text(tok));
    if (!vars) {
        st = snug_errorf(err, SNUG_NOMEM, "out of memory building the chat template's variables");
        goto done;
    }
    st = snug_template_render_traced(tpl, vars, NULL, &f, out, len, err);
    if (st != SNUG_OK) {
        failure->kind = f.kind;
        failure->text_at = f.text_at;
        failure->message = failed_message(in->messages, &f);
    }
    if (st == SNUG_OK && in->continue_final && (st = cut_after_final(in->messages, *out, len, err)) != SNUG_OK) {
        snug_mem_free(*out);
        *out = NULL;
        *len = 0;
    }
done:
    json_decref(vars);
    snug_template_free(tpl);
    return st;
}
