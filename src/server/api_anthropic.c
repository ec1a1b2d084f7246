/*
 * api_anthropic.c: an Anthropic Messages body (POST /v1/messages and
 * /v1/messages/count_tokens) checked in that API's own terms and turned
 * into the chat request the parser reads (api_impl.h): system into a
 * system message; content blocks into text, tool calls (tool_use), tool
 * messages (tool_result) and reasoning (thinking); tools and tool_choice
 * into functions; stop_sequences into stop; thinking into the template's
 * enable_thinking and a think budget. Every error names the Anthropic field.
 */
#include "api_impl.h"

#include "base/json.h"
#include "base/mem.h"

#include <string.h>



/* The parts a system prompt or a tool result may have. */
static const char *const TEXT_BLOCKS[] = {"text", NULL};

/* Checks block j of messages[i] (role user or assistant) against the keys
 * its type may have; a 400 for a type this server does not take. */
static snug_status check_block(const json_t *b, size_t i, size_t j, bool user, const char **type,
                               snug_api_error *err)
{
    char p[64];
    static const char *const text_keys[] = {"type", "text", "cache_control", "citations", NULL};
    static const char *const use_keys[] = {"type", "id", "name", "input", "cache_control", NULL};
    static const char *const result_keys[] = {"type", "tool_use_id", "content", "is_error", "cache_control", NULL};
    static const char *const think_keys[] = {"type", "thinking", "signature", NULL};
    static const char *const redacted_keys[] = {"type", "data", NULL};
    if (!json_is_object(b)) return api_wrong(err, api_path(p, "messages[%zu].content[%zu]", i, j), "a content block", b);
    const json_t *t = api_opt(b, "type");
    *type = json_string_value(t);
    const char *s = *type ? *type : "";
    const char *const *keys = strcmp(s, "text") == 0                  ? text_keys
                              : strcmp(s, "tool_use") == 0 && !user   ? use_keys
                              : strcmp(s, "tool_result") == 0 && user ? result_keys
                              : strcmp(s, "thinking") == 0 && !user   ? think_keys
                              : strcmp(s, "redacted_thinking") == 0 && !user ? redacted_keys
                                                                             : NULL;
    if (!keys) {
        char shown[48];
        if (!json_is_string(t)) return api_wrong(err, api_path(p, "messages[%zu].content[%zu].type", i, j), "a block type", t);
        return api_bad(err, api_path(p, "messages[%zu].content[%zu].type", i, j),
                       "a %s message takes blocks of type %s; got \"%s\" (this server runs a text model)",
                       user ? "user" : "assistant",
                       user ? "\"text\" and \"tool_result\"" : "\"text\", \"tool_use\", \"thinking\" and "
                                                               "\"redacted_thinking\"",
                       snug_bytes_shown(s, strlen(s), shown, sizeof shown));
    }
    return api_only_keys(b, api_path(p, "messages[%zu].content[%zu]", i, j), keys, err);
}

/* A chat message {"role": role, "content": the parts} appended to out
 * when parts has any, and parts emptied (the message keeps a copy). */
static bool flush_text(json_t *out, const char *role, json_t *parts)
{
    if (json_array_size(parts) == 0) return true;
    bool ok = api_add(out, json_pack("{s:s, s:o}", "role", role, "content", json_copy(parts)));
    json_array_clear(parts);
    return ok;
}

/* messages[i], an assistant's blocks: one chat message of its text, its
 * thinking as reasoning_content and its tool_use blocks as tool_calls. */
static snug_status assistant_blocks(const json_t *blocks, size_t i, json_t *out, snug_api_error *err)
{
    char p[64];
    json_t *parts = json_array(), *calls = json_array(), *m = json_object();
    snug_strbuf think = {0};
    snug_status st = parts && calls && m ? SNUG_OK : api_no_memory(err, "a Messages request");
    for (size_t j = 0; st == SNUG_OK && j < json_array_size(blocks); j++) {
        const json_t *b = json_array_get(blocks, j);
        const char *type = NULL;
        st = check_block(b, i, j, false, &type, err);
        if (st != SNUG_OK) break;
        if (strcmp(type, "text") == 0) {
            const json_t *text = api_opt(b, "text");
            if (!json_is_string(text)) st = api_wrong(err, api_path(p, "messages[%zu].content[%zu].text", i, j), "a string", text);
            else if (!api_add(parts, json_pack("{s:s, s:O}", "type", "text", "text", text))) st = api_no_memory(err, "a Messages request");
        } else if (strcmp(type, "thinking") == 0) {
            const json_t *t = api_opt(b, "thinking");
            if (!json_is_string(t)) st = api_wrong(err, api_path(p, "messages[%zu].content[%zu].thinking", i, j), "a string", t);
            else snug_strbuf_put(&think, json_string_value(t), json_string_length(t));
        } else if (strcmp(type, "tool_use") == 0) {
            const json_t *id = api_opt(b, "id"), *name = api_opt(b, "name"), *input = api_opt(b, "input");
            if (!json_is_string(id)) st = api_wrong(err, api_path(p, "messages[%zu].content[%zu].id", i, j), "a string", id);
            else if (!json_is_string(name))
                st = api_wrong(err, api_path(p, "messages[%zu].content[%zu].name", i, j), "a string", name);
            else if (!json_is_object(input))
                st = api_wrong(err, api_path(p, "messages[%zu].content[%zu].input", i, j), "an object", input);
            char *args = st == SNUG_OK ? snug_json_dumps(input, false) : NULL;
            if (st == SNUG_OK && (!args || !api_add(calls, json_pack("{s:O, s:s, s:{s:O, s:s}}", "id", id, "type",
                                                                  "function", "function", "name", name,
                                                                  "arguments", args))))
                st = api_no_memory(err, "a Messages request");
            snug_mem_free(args);
        } /* redacted_thinking: nothing this model can read */
    }
    if (st == SNUG_OK && think.failed) st = api_no_memory(err, "a Messages request");
    if (st == SNUG_OK &&
        (!api_put(m, "role", json_string("assistant")) || !api_put(m, "content", json_incref(parts)) ||
         (think.len && !api_put(m, "reasoning_content", json_stringn(think.p, think.len))) ||
         (json_array_size(calls) && !api_put(m, "tool_calls", json_incref(calls))) || !api_add(out, json_incref(m))))
        st = api_no_memory(err, "a Messages request");
    snug_strbuf_free(&think);
    json_decref(parts);
    json_decref(calls);
    json_decref(m);
    return st;
}

/* messages[i], a user's blocks: its text as user messages and each
 * tool_result as a tool message, in their order. */
static snug_status user_blocks(const json_t *blocks, size_t i, json_t *out, snug_api_error *err)
{
    char p[64];
    json_t *parts = json_array();
    snug_status st = parts ? SNUG_OK : api_no_memory(err, "a Messages request");
    for (size_t j = 0; st == SNUG_OK && j < json_array_size(blocks); j++) {
        const json_t *b = json_array_get(blocks, j);
        const char *type = NULL;
        st = check_block(b, i, j, true, &type, err);
        if (st != SNUG_OK) break;
        if (strcmp(type, "text") == 0) {
            const json_t *text = api_opt(b, "text");
            if (!json_is_string(text)) st = api_wrong(err, api_path(p, "messages[%zu].content[%zu].text", i, j), "a string", text);
            else if (!api_add(parts, json_pack("{s:s, s:O}", "type", "text", "text", text))) st = api_no_memory(err, "a Messages request");
            continue;
        }
        const json_t *id = api_opt(b, "tool_use_id"), *content = api_opt(b, "content"), *is_error = api_opt(b, "is_error");
        json_t *result = NULL;
        if (!json_is_string(id))
            st = api_wrong(err, api_path(p, "messages[%zu].content[%zu].tool_use_id", i, j), "a string", id);
        else if (is_error && !json_is_boolean(is_error))
            st = api_wrong(err, api_path(p, "messages[%zu].content[%zu].is_error", i, j), "true or false", is_error);
        else if (content)
            st = api_text_parts(content, api_path(p, "messages[%zu].content[%zu].content", i, j), TEXT_BLOCKS, &result, err);
        if (st == SNUG_OK && !content && !(result = json_string(""))) st = api_no_memory(err, "a Messages request");
        if (st == SNUG_OK && (!flush_text(out, "user", parts) ||
                              !api_add(out, json_pack("{s:s, s:O, s:O}", "role", "tool", "tool_call_id", id, "content",
                                                  result))))
            st = api_no_memory(err, "a Messages request");
        json_decref(result);
    }
    if (st == SNUG_OK && !flush_text(out, "user", parts)) st = api_no_memory(err, "a Messages request");
    json_decref(parts);
    return st;
}

/* system and messages into the chat's messages (out). */
static snug_status messages(const json_t *body, json_t *out, snug_api_error *err)
{
    char p[64];
    const json_t *sys = api_opt(body, "system"), *msgs = api_opt(body, "messages");
    json_t *parts = NULL;
    snug_status st = SNUG_OK;
    if (sys) {
        st = api_text_parts(sys, "system", TEXT_BLOCKS, &parts, err);
        if (st == SNUG_OK && !api_add(out, json_pack("{s:s, s:O}", "role", "system", "content", parts))) st = api_no_memory(err, "a Messages request");
        json_decref(parts);
    }
    if (st != SNUG_OK) return st;
    if (!msgs) return api_bad(err, "messages", "is required: a list of {\"role\": \"user\" or \"assistant\", \"content\": ...}");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return api_wrong(err, "messages", "a non-empty list of messages", msgs);
    static const char *const keys[] = {"role", "content", NULL};
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(msgs); i++) {
        const json_t *m = json_array_get(msgs, i), *role = api_opt(m, "role"), *content = api_opt(m, "content");
        if (!json_is_object(m)) return api_wrong(err, api_path(p, "messages[%zu]", i), "an object with a role and content", m);
        st = api_only_keys(m, api_path(p, "messages[%zu]", i), keys, err);
        if (st != SNUG_OK) return st;
        bool user = api_is_str(role, "user");
        if (!user && !api_is_str(role, "assistant"))
            return api_wrong(err, api_path(p, "messages[%zu].role", i),
                             "\"user\" or \"assistant\" (a system prompt goes in the top-level system field)", role);
        if (json_is_string(content))
            st = api_add(out, json_pack("{s:O, s:O}", "role", role, "content", content)) ? SNUG_OK : api_no_memory(err, "a Messages request");
        else if (!json_is_array(content))
            return api_wrong(err, api_path(p, "messages[%zu].content", i), "a string or a list of content blocks", content);
        else st = user ? user_blocks(content, i, out, err) : assistant_blocks(content, i, out, err);
    }
    return st;
}

/* tools and tool_choice into OpenAI's tools, tool_choice and
 * parallel_tool_calls in chat. */
static snug_status tools(const json_t *body, json_t *chat, snug_api_error *err)
{
    char p[64];
    const json_t *list = api_opt(body, "tools"), *choice = api_opt(body, "tool_choice");
    static const char *const tool_keys[] = {"name", "description", "input_schema", "type", "cache_control", NULL};
    static const char *const choice_keys[] = {"type", "name", "disable_parallel_tool_use", NULL};
    if (list) {
        if (!json_is_array(list)) return api_wrong(err, "tools", "a list of tools", list);
        json_t *fns = json_array();
        if (!fns || !api_put(chat, "tools", fns)) return api_no_memory(err, "a Messages request");
        for (size_t i = 0; i < json_array_size(list); i++) {
            const json_t *t = json_array_get(list, i), *type = api_opt(t, "type"), *name = api_opt(t, "name");
            const json_t *schema = api_opt(t, "input_schema"), *desc = api_opt(t, "description");
            if (!json_is_object(t)) return api_wrong(err, api_path(p, "tools[%zu]", i), "a tool object", t);
            if (type && !api_is_str(type, "custom"))
                return api_bad(err, api_path(p, "tools[%zu].type", i), "only client tools (type \"custom\" or none) are "
                               "served; Anthropic's server tools run on Anthropic's side");
            snug_status st = api_only_keys(t, api_path(p, "tools[%zu]", i), tool_keys, err);
            if (st != SNUG_OK) return st;
            if (!json_is_string(name)) return api_wrong(err, api_path(p, "tools[%zu].name", i), "a string", name);
            if (!json_is_object(schema))
                return api_wrong(err, api_path(p, "tools[%zu].input_schema", i), "a JSON schema object", schema);
            if (desc && !json_is_string(desc)) return api_wrong(err, api_path(p, "tools[%zu].description", i), "a string", desc);
            json_t *fn = json_pack("{s:O, s:O}", "name", name, "parameters", schema);
            if (fn && desc && !api_put(fn, "description", json_incref((json_t *)desc))) {
                json_decref(fn);
                fn = NULL;
            }
            if (!fn || !api_add(fns, json_pack("{s:s, s:o}", "type", "function", "function", fn))) return api_no_memory(err, "a Messages request");
        }
    }
    if (!choice) return SNUG_OK;
    if (!json_is_object(choice))
        return api_wrong(err, "tool_choice", "an object {\"type\": \"auto\", \"any\", \"tool\" or \"none\"}", choice);
    snug_status st = api_only_keys(choice, "tool_choice", choice_keys, err);
    if (st != SNUG_OK) return st;
    const json_t *type = api_opt(choice, "type"), *name = api_opt(choice, "name");
    const json_t *serial = api_opt(choice, "disable_parallel_tool_use");
    if (serial && !json_is_boolean(serial)) return api_wrong(err, "tool_choice.disable_parallel_tool_use", "true or false", serial);
    json_t *c = NULL;
    if (api_is_str(type, "auto")) c = json_string("auto");
    else if (api_is_str(type, "any")) c = json_string("required");
    else if (api_is_str(type, "none")) c = json_string("none");
    else if (api_is_str(type, "tool")) {
        if (!json_is_string(name)) return api_wrong(err, "tool_choice.name", "the name of one of tools", name);
        c = json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name);
    } else {
        return api_wrong(err, "tool_choice.type", "\"auto\", \"any\", \"tool\" or \"none\"", type);
    }
    if (name && !api_is_str(type, "tool")) return api_bad(err, "tool_choice.name", "is only taken with the type \"tool\"");
    if (!api_put(chat, "tool_choice", c) || (serial && !api_put(chat, "parallel_tool_calls", json_boolean(!json_is_true(serial)))))
        return api_no_memory(err, "a Messages request");
    return SNUG_OK;
}

/* thinking {"type": "enabled", "budget_tokens": N} or {"type":
 * "disabled"} into the template's enable_thinking and, where the model
 * has a think block to budget (budget), thinking_token_budget. */
static snug_status thinking(const json_t *body, bool budget, json_t *chat, snug_api_error *err)
{
    const json_t *t = api_opt(body, "thinking");
    static const char *const keys[] = {"type", "budget_tokens", NULL};
    if (!t) return SNUG_OK;
    if (!json_is_object(t)) return api_wrong(err, "thinking", "an object {\"type\": \"enabled\" or \"disabled\"}", t);
    snug_status st = api_only_keys(t, "thinking", keys, err);
    if (st != SNUG_OK) return st;
    const json_t *type = api_opt(t, "type"), *n = api_opt(t, "budget_tokens");
    bool on = api_is_str(type, "enabled");
    if (!on && !api_is_str(type, "disabled")) return api_wrong(err, "thinking.type", "\"enabled\" or \"disabled\"", type);
    if (on && (!json_is_integer(n) || json_integer_value(n) < 1))
        return api_wrong(err, "thinking.budget_tokens", "an integer of at least 1", n);
    if (!on && n) return api_bad(err, "thinking.budget_tokens", "is only taken when thinking is enabled");
    if (!api_put(chat, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", on)) ||
        (on && budget && !api_put(chat, "thinking_token_budget", json_incref((json_t *)n))))
        return api_no_memory(err, "a Messages request");
    return SNUG_OK;
}

/* The sampling and stop fields, in Anthropic's ranges, under their chat names. */
static snug_status sampling(const json_t *body, bool count_only, json_t *chat, snug_api_error *err)
{
    const json_t *max = api_opt(body, "max_tokens"), *temp = api_opt(body, "temperature");
    const json_t *top_p = api_opt(body, "top_p"), *top_k = api_opt(body, "top_k");
    const json_t *stops = api_opt(body, "stop_sequences"), *stream = api_opt(body, "stream");
    if (!count_only && !max) return api_bad(err, "max_tokens", "is required: the most tokens to generate");
    if (max && (!json_is_integer(max) || json_integer_value(max) < 1))
        return api_wrong(err, "max_tokens", "an integer of at least 1", max);
    if (temp && (!json_is_number(temp) || json_number_value(temp) < 0 || json_number_value(temp) > 1))
        return api_wrong(err, "temperature", "a number from 0 to 1", temp);
    if (top_p && (!json_is_number(top_p) || json_number_value(top_p) <= 0 || json_number_value(top_p) > 1))
        return api_wrong(err, "top_p", "a number above 0, at most 1", top_p);
    if (top_k && (!json_is_integer(top_k) || json_integer_value(top_k) < 0))
        return api_wrong(err, "top_k", "an integer of at least 0", top_k);
    if (stream && !json_is_boolean(stream)) return api_wrong(err, "stream", "true or false", stream);
    if (stops && !json_is_array(stops)) return api_wrong(err, "stop_sequences", "a list of strings", stops);
    if (json_array_size(stops) > SNUG_API_STOP_STRINGS_MAX)
        return api_bad(err, "stop_sequences", "at most %d are served; got %zu", SNUG_API_STOP_STRINGS_MAX,
                       json_array_size(stops));
    for (size_t i = 0; i < json_array_size(stops); i++) {
        char p[64];
        const json_t *s = json_array_get(stops, i);
        if (!json_is_string(s) || json_string_length(s) == 0)
            return api_wrong(err, api_path(p, "stop_sequences[%zu]", i), "a non-empty string", s);
    }
    const struct { const char *from, *to; const json_t *v; } same[] = {
        {"max_tokens", "max_tokens", max}, {"temperature", "temperature", temp}, {"top_p", "top_p", top_p},
        {"top_k", "top_k", json_integer_value(top_k) > 0 ? top_k : NULL}, {"stop_sequences", "stop", stops},
        {"stream", "stream", stream}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(same); i++)
        if (same[i].v && !count_only && !api_put(chat, same[i].to, json_incref((json_t *)same[i].v))) return api_no_memory(err, "a Messages request");
    return SNUG_OK;
}

/* The fields an Anthropic body may have besides those above, checked:
 * metadata ({"user_id": ...}, for the caller's records) and service_tier. */
static snug_status other_fields(const json_t *body, bool count_only, snug_api_error *err)
{
    static const char *const create[] = {"model", "messages", "system", "max_tokens", "stop_sequences", "temperature",
                                         "top_p", "top_k", "stream", "tools", "tool_choice", "thinking", "metadata",
                                         "service_tier", NULL};
    static const char *const count[] = {"model", "messages", "system", "tools", "tool_choice", "thinking", NULL};
    static const char *const meta_keys[] = {"user_id", NULL};
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)body, key, v) {
        if (!api_listed(count_only ? count : create, key))
            return api_bad(err, key, "unknown field: %s takes no field of that name (the README's API section "
                           "lists the fields it takes)", count_only ? "/v1/messages/count_tokens" : "/v1/messages");
    }
    const json_t *meta = api_opt(body, "metadata"), *user = api_opt(meta, "user_id"), *tier = api_opt(body, "service_tier");
    if (meta && !json_is_object(meta)) return api_wrong(err, "metadata", "an object {\"user_id\": ...}", meta);
    snug_status st = meta ? api_only_keys(meta, "metadata", meta_keys, err) : SNUG_OK;
    if (st == SNUG_OK && user && !json_is_string(user)) st = api_wrong(err, "metadata.user_id", "a string", user);
    if (st == SNUG_OK && tier && !api_is_str(tier, "auto") && !api_is_str(tier, "standard_only"))
        st = api_wrong(err, "service_tier", "\"auto\" or \"standard_only\"", tier);
    const json_t *model = api_opt(body, "model");
    if (st == SNUG_OK && !json_is_string(model)) st = api_wrong(err, "model", "the name of the model served, a string", model);
    return st;
}

/* A last message of the assistant's is a prefill: the reply continues it
 * (chat's continue_final_message); as Anthropic's API, its text may not end
 * in whitespace. */
static snug_status prefill(const json_t *body, const json_t *msgs, json_t *chat, snug_api_error *err)
{
    const json_t *in = api_opt(body, "messages");
    const json_t *last = json_array_get(in, json_array_size(in) - 1);
    if (!api_is_str(api_opt(last, "role"), "assistant")) return SNUG_OK;
    const json_t *m = json_array_get(msgs, json_array_size(msgs) - 1), *content = json_object_get(m, "content");
    const char *text = json_string_value(content);
    size_t n = text ? json_string_length(content) : 0;
    for (size_t i = 0; i < json_array_size(content); i++) { /* text parts: the last one's end */
        const json_t *t = json_object_get(json_array_get(content, i), "text");
        if (json_is_string(t) && json_string_length(t)) text = json_string_value(t), n = json_string_length(t);
    }
    char p[64];
    if (n > 0 && strchr(" \t\n\r", text[n - 1]))
        return api_bad(err, api_path(p, "messages[%zu].content", json_array_size(in) - 1),
                       "the final assistant content (a prefill) cannot end with whitespace");
    if (json_object_get(m, "tool_calls"))
        return api_bad(err, api_path(p, "messages[%zu].content", json_array_size(in) - 1),
                       "a final assistant message with tool_use is answered by a user's tool_result, not continued");
    if (!api_put(chat, "continue_final_message", json_true()) || !api_put(chat, "add_generation_prompt", json_false()))
        return api_no_memory(err, "a Messages request");
    return SNUG_OK;
}

snug_status api_anthropic_to_chat(const json_t *body, bool count_only, bool think_budget, json_t **chat,
                                  snug_api_error *err)
{
    *chat = NULL;
    json_t *out = json_object(), *msgs = json_array();
    snug_status st = out && msgs && api_put(out, "messages", json_incref(msgs)) ? SNUG_OK : api_no_memory(err, "a Messages request");
    if (st == SNUG_OK) st = other_fields(body, count_only, err);
    if (st == SNUG_OK && !api_put(out, "model", json_incref(json_object_get(body, "model")))) st = api_no_memory(err, "a Messages request");
    if (st == SNUG_OK) st = messages(body, msgs, err);
    if (st == SNUG_OK) st = prefill(body, msgs, out, err);
    if (st == SNUG_OK) st = sampling(body, count_only, out, err);
    if (st == SNUG_OK) st = tools(body, out, err);
    if (st == SNUG_OK) st = thinking(body, think_budget, out, err);
    json_decref(msgs);
    if (st == SNUG_OK) *chat = out;
    else json_decref(out);
    return st;
}
