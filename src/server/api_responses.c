/*
 * api_responses.c: an OpenAI Responses body (POST /v1/responses) checked
 * in that API's own terms and turned into the chat request the parser
 * reads (api_impl.h): instructions into a system message; input (a string,
 * or items: messages, function calls and their outputs, reasoning) into
 * chat messages; function tools into chat's; text.format into
 * response_format; max_output_tokens into max_tokens; reasoning.effort into
 * the template's reasoning_effort. The server keeps no responses, so
 * previous_response_id is refused. Every error names the Responses field.
 */
#include "api_impl.h"

#include "base/json.h"
#include "base/mem.h"

#include <string.h>



/* The parts a message or a call's output may have. */
static const char *const TEXT_PARTS[] = {"input_text", "output_text", "refusal", NULL};

/* The assistant turn an item joins: the last message of out when it is an
 * assistant's (for reasoning, only one that has nothing yet: reasoning
 * begins a turn), else a new one appended. NULL for no memory. */
static json_t *assistant_turn(json_t *out, bool reasoning)
{
    json_t *last = json_array_get(out, json_array_size(out) - 1);
    bool empty = last && !json_object_get(last, "content") && !json_object_get(last, "tool_calls") &&
                 !json_object_get(last, "reasoning_content");
    if (last && api_is_str(json_object_get(last, "role"), "assistant") && (!reasoning || empty)) return last;
    json_t *m = json_pack("{s:s}", "role", "assistant");
    return api_add(out, m) ? m : NULL;
}

/* Item i of input, a message: appended to out as chat's. */
static snug_status message_item(const json_t *it, size_t i, json_t *out, snug_api_error *err)
{
    char p[64];
    static const char *const keys[] = {"type", "role", "content", "id", "status", NULL};
    snug_status st = api_only_keys(it, api_path(p, "input[%zu]", i), keys, err);
    const json_t *role = api_opt(it, "role");
    if (st != SNUG_OK) return st;
    if (!api_is_str(role, "user") && !api_is_str(role, "assistant") && !api_is_str(role, "system") &&
        !api_is_str(role, "developer"))
        return api_wrong(err, api_path(p, "input[%zu].role", i), "\"user\", \"assistant\", \"system\" or \"developer\"", role);
    json_t *parts = NULL;
    st = api_text_parts(api_opt(it, "content"), api_path(p, "input[%zu].content", i), TEXT_PARTS, &parts, err);
    if (st != SNUG_OK) return st;
    json_t *last = json_array_get(out, json_array_size(out) - 1);
    bool joins = api_is_str(role, "assistant") && last && api_is_str(json_object_get(last, "role"), "assistant") &&
                 !json_object_get(last, "content") && !json_object_get(last, "tool_calls");
    /* (an assistant's text after its reasoning item: the same turn) */
    bool ok = joins ? api_put(last, "content", json_incref(parts))
                    : api_add(out, json_pack("{s:O, s:O}", "role", role, "content", parts));
    json_decref(parts);
    return ok ? SNUG_OK : api_no_memory(err, "a Responses request");
}

/* Item i of input, a function call: a tool call of the assistant's turn. */
static snug_status call_item(const json_t *it, size_t i, json_t *out, snug_api_error *err)
{
    char p[64];
    static const char *const keys[] = {"type", "call_id", "name", "arguments", "id", "status",
                                       "parsed_arguments", NULL}; /* (the last: the openai SDK's stream helper adds it) */
    snug_status st = api_only_keys(it, api_path(p, "input[%zu]", i), keys, err);
    const json_t *id = api_opt(it, "call_id"), *name = api_opt(it, "name"), *args = api_opt(it, "arguments");
    if (st != SNUG_OK) return st;
    if (!json_is_string(id)) return api_wrong(err, api_path(p, "input[%zu].call_id", i), "a string", id);
    if (!json_is_string(name)) return api_wrong(err, api_path(p, "input[%zu].name", i), "a string", name);
    if (!json_is_string(args)) return api_wrong(err, api_path(p, "input[%zu].arguments", i), "a JSON string", args);
    json_t *turn = assistant_turn(out, false), *calls = turn ? json_object_get(turn, "tool_calls") : NULL;
    if (turn && !calls && api_put(turn, "tool_calls", json_array())) calls = json_object_get(turn, "tool_calls");
    if (!calls || !api_add(calls, json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", id, "type", "function", "function", "name",
                                        name, "arguments", args)))
        return api_no_memory(err, "a Responses request");
    return SNUG_OK;
}

/* Item i of input, a function call's output: a tool message. */
static snug_status output_item(const json_t *it, size_t i, json_t *out, snug_api_error *err)
{
    char p[64];
    static const char *const keys[] = {"type", "call_id", "output", "id", "status", NULL};
    snug_status st = api_only_keys(it, api_path(p, "input[%zu]", i), keys, err);
    const json_t *id = api_opt(it, "call_id"), *output = api_opt(it, "output");
    if (st != SNUG_OK) return st;
    if (!json_is_string(id)) return api_wrong(err, api_path(p, "input[%zu].call_id", i), "a string", id);
    json_t *parts = NULL;
    st = api_text_parts(output, api_path(p, "input[%zu].output", i), TEXT_PARTS, &parts, err);
    if (st != SNUG_OK) return st;
    bool ok = api_add(out, json_pack("{s:s, s:O, s:O}", "role", "tool", "tool_call_id", id, "content", parts));
    json_decref(parts);
    return ok ? SNUG_OK : api_no_memory(err, "a Responses request");
}

/* Item i of input, reasoning sent back: its text (content's reasoning_text
 * parts, else the summary's) as the reasoning of the assistant's turn. */
static snug_status reasoning_item(const json_t *it, size_t i, json_t *out, snug_api_error *err)
{
    char p[64];
    static const char *const keys[] = {"type", "id", "summary", "content", "encrypted_content", "status", NULL};
    snug_status st = api_only_keys(it, api_path(p, "input[%zu]", i), keys, err);
    if (st != SNUG_OK) return st;
    const json_t *content = api_opt(it, "content"), *summary = api_opt(it, "summary");
    const json_t *from = json_array_size(content) ? content : summary;
    const char *name = from == content ? "content" : "summary";
    if (from && !json_is_array(from)) return api_wrong(err, api_path(p, "input[%zu].%s", i, name), "a list", from);
    snug_strbuf text = {0};
    for (size_t k = 0; k < json_array_size(from); k++) {
        const json_t *t = api_opt(json_array_get(from, k), "text");
        if (!json_is_string(t)) {
            snug_strbuf_free(&text);
            return api_wrong(err, api_path(p, "input[%zu].%s[%zu].text", i, name, k), "a string", t);
        }
        if (k) snug_strbuf_put(&text, "\n", 1);
        snug_strbuf_put(&text, json_string_value(t), json_string_length(t));
    }
    json_t *turn = text.len ? assistant_turn(out, true) : NULL;
    bool ok = !text.failed && (!text.len || (turn && api_put(turn, "reasoning_content", json_stringn(text.p, text.len))));
    snug_strbuf_free(&text);
    return ok ? SNUG_OK : api_no_memory(err, "a Responses request");
}

/* instructions and input into the chat's messages (out). */
static snug_status messages(const json_t *body, json_t *out, snug_api_error *err)
{
    char p[64];
    const json_t *instr = api_opt(body, "instructions"), *input = api_opt(body, "input");
    if (instr && !json_is_string(instr)) return api_wrong(err, "instructions", "a string", instr);
    if (instr && !api_add(out, json_pack("{s:s, s:O}", "role", "system", "content", instr))) return api_no_memory(err, "a Responses request");
    if (!input) return api_bad(err, "input", "is required: a string, or a list of input items");
    if (json_is_string(input))
        return api_add(out, json_pack("{s:s, s:O}", "role", "user", "content", input)) ? SNUG_OK : api_no_memory(err, "a Responses request");
    if (!json_is_array(input) || json_array_size(input) == 0)
        return api_wrong(err, "input", "a string, or a non-empty list of input items", input);
    snug_status st = SNUG_OK;
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(input); i++) {
        const json_t *it = json_array_get(input, i), *type = api_opt(it, "type");
        if (!json_is_object(it)) return api_wrong(err, api_path(p, "input[%zu]", i), "an input item (an object)", it);
        if (!type || api_is_str(type, "message")) st = message_item(it, i, out, err);
        else if (api_is_str(type, "function_call")) st = call_item(it, i, out, err);
        else if (api_is_str(type, "function_call_output")) st = output_item(it, i, out, err);
        else if (api_is_str(type, "reasoning")) st = reasoning_item(it, i, out, err);
        else if (api_is_str(type, "item_reference"))
            st = api_bad(err, api_path(p, "input[%zu].type", i), "this server keeps no items to refer to: send "
                         "the item itself");
        else
            st = api_wrong(err, api_path(p, "input[%zu].type", i), "\"message\", \"function_call\", "
                           "\"function_call_output\" or \"reasoning\"", type);
    }
    /* an assistant turn of calls alone, left without content: "" as chat's */
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(out); i++) {
        json_t *m = json_array_get(out, i);
        if (!json_object_get(m, "content") && !api_put(m, "content", json_string(""))) st = api_no_memory(err, "a Responses request");
    }
    return st;
}

/* tools, tool_choice and parallel_tool_calls as chat's. */
static snug_status tools(const json_t *body, json_t *chat, snug_api_error *err)
{
    char p[64];
    const json_t *list = api_opt(body, "tools"), *choice = api_opt(body, "tool_choice");
    const json_t *parallel = api_opt(body, "parallel_tool_calls");
    static const char *const keys[] = {"type", "name", "description", "parameters", "strict", NULL};
    if (list && !json_is_array(list)) return api_wrong(err, "tools", "a list of tools", list);
    json_t *fns = list ? json_array() : NULL;
    if (list && (!fns || !api_put(chat, "tools", fns))) return api_no_memory(err, "a Responses request");
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *t = json_array_get(list, i), *type = api_opt(t, "type");
        if (!json_is_object(t)) return api_wrong(err, api_path(p, "tools[%zu]", i), "a tool object", t);
        if (!api_is_str(type, "function"))
            return api_bad(err, api_path(p, "tools[%zu].type", i), "only function tools are served (OpenAI's "
                           "built-in tools, such as web search, run on OpenAI's side)");
        snug_status st = api_only_keys(t, api_path(p, "tools[%zu]", i), keys, err);
        if (st != SNUG_OK) return st;
        json_t *fn = json_deep_copy(t);
        if (!fn || json_object_del(fn, "type") != 0 ||
            !api_add(fns, json_pack("{s:s, s:o}", "type", "function", "function", fn)))
            return api_no_memory(err, "a Responses request");
    }
    json_t *c = NULL;
    if (choice && json_is_string(choice)) {
        c = json_incref((json_t *)choice); /* auto, none, required: chat's names */
    } else if (choice) {
        const json_t *type = api_opt(choice, "type"), *name = api_opt(choice, "name");
        static const char *const choice_keys[] = {"type", "name", NULL};
        if (!json_is_object(choice) || !api_is_str(type, "function"))
            return api_wrong(err, "tool_choice", "\"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                             "\"name\": ...}", choice);
        snug_status st = api_only_keys(choice, "tool_choice", choice_keys, err);
        if (st != SNUG_OK) return st;
        if (!json_is_string(name)) return api_wrong(err, "tool_choice.name", "the name of one of tools", name);
        c = json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name);
        if (!c) return api_no_memory(err, "a Responses request");
    }
    if ((c && !api_put(chat, "tool_choice", c)) || (parallel && !api_put(chat, "parallel_tool_calls", json_incref((json_t *)parallel))))
        return api_no_memory(err, "a Responses request");
    return SNUG_OK;
}

/* text.format as response_format; text.verbosity taken as it is. */
static snug_status text_format(const json_t *body, json_t *chat, snug_api_error *err)
{
    const json_t *text = api_opt(body, "text"), *format = api_opt(text, "format");
    static const char *const text_keys[] = {"format", "verbosity", NULL};
    static const char *const schema_keys[] = {"type", "name", "schema", "strict", "description", NULL};
    if (!text) return SNUG_OK;
    if (!json_is_object(text)) return api_wrong(err, "text", "an object {\"format\": ...}", text);
    snug_status st = api_only_keys(text, "text", text_keys, err);
    if (st != SNUG_OK || !format) return st;
    const json_t *type = api_opt(format, "type");
    if (!json_is_object(format)) return api_wrong(err, "text.format", "an object {\"type\": ...}", format);
    if (api_is_str(type, "text") || api_is_str(type, "json_object"))
        return json_object_size(format) == 1 ? (api_put(chat, "response_format", json_pack("{s:O}", "type", type))
                                                     ? SNUG_OK : api_no_memory(err, "a Responses request"))
                                             : api_only_keys(format, "text.format", (const char *const[]){"type", NULL}, err);
    if (!api_is_str(type, "json_schema"))
        return api_wrong(err, "text.format.type", "\"text\", \"json_object\" or \"json_schema\"", type);
    st = api_only_keys(format, "text.format", schema_keys, err);
    if (st != SNUG_OK) return st;
    json_t *js = json_deep_copy(format);
    if (!js || json_object_del(js, "type") != 0 ||
        !api_put(chat, "response_format", json_pack("{s:s, s:o}", "type", "json_schema", "json_schema", js)))
        return api_no_memory(err, "a Responses request");
    return SNUG_OK;
}

/* reasoning {"effort", "summary"}: the effort as the template's
 * reasoning_effort (gpt-oss's templates read it), "none" also turning
 * enable_thinking off. */
static snug_status reasoning(const json_t *body, json_t *chat, snug_api_error *err)
{
    const json_t *r = api_opt(body, "reasoning"), *effort = api_opt(r, "effort"), *summary = api_opt(r, "summary");
    static const char *const keys[] = {"effort", "summary", "generate_summary", NULL};
    static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", NULL};
    if (!r) return SNUG_OK;
    if (!json_is_object(r)) return api_wrong(err, "reasoning", "an object {\"effort\": ...}", r);
    snug_status st = api_only_keys(r, "reasoning", keys, err);
    if (st != SNUG_OK) return st;
    if (summary && !json_is_string(summary)) return api_wrong(err, "reasoning.summary", "a string", summary);
    if (!effort) return SNUG_OK;
    if (!json_is_string(effort) || !api_listed(efforts, json_string_value(effort)))
        return api_wrong(err, "reasoning.effort", "\"none\", \"minimal\", \"low\", \"medium\" or \"high\"", effort);
    json_t *kw = json_pack("{s:O}", "reasoning_effort", effort);
    if (!kw || (api_is_str(effort, "none") && !api_put(kw, "enable_thinking", json_false())) ||
        !api_put(chat, "chat_template_kwargs", kw))
        return api_no_memory(err, "a Responses request");
    return SNUG_OK;
}

/* The other fields: those with chat's meaning under another name or the
 * same, those taken as they are (metadata, user, store: nothing is
 * stored, the reply says so), and those refused. */
static snug_status other_fields(const json_t *body, json_t *chat, snug_api_error *err)
{
    static const char *const taken[] = {"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
                                        "text", "reasoning", "max_output_tokens", "temperature", "top_p", "stream",
                                        "metadata", "user", "store", "truncation", "service_tier", "include",
                                        "previous_response_id", "background", "prompt_cache_key", "safety_identifier",
                                        "top_logprobs", "stream_options", NULL};
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)body, key, v) if (!api_listed(taken, key))
        return api_bad(err, key, "unknown field: /v1/responses takes no field of that name (the README's API "
                       "section lists the fields it takes)");
    const json_t *prev = api_opt(body, "previous_response_id"), *meta = api_opt(body, "metadata");
    if (prev)
        return api_bad(err, "previous_response_id", "this server keeps no responses (it is stateless: every byte "
                       "of its memory plan is the model's and the KV cache's), so there is none to continue: send "
                       "the whole conversation in input");
    if (json_is_true(api_opt(body, "background")))
        return api_bad(err, "background", "background responses are not served: they would be stored");
    if (meta && !json_is_object(meta)) return api_wrong(err, "metadata", "an object of strings", meta);
    const char *mk;
    const json_t *mv;
    json_object_foreach((json_t *)meta, mk, mv) if (!json_is_string(mv))
        return api_wrong(err, "metadata", "an object of strings", mv);
    const json_t *store = api_opt(body, "store"), *trunc = api_opt(body, "truncation"), *inc = api_opt(body, "include");
    if (store && !json_is_boolean(store)) return api_wrong(err, "store", "true or false", store);
    if (trunc && !api_is_str(trunc, "disabled"))
        return api_bad(err, "truncation", "only \"disabled\" is served: a conversation over the model's length is a "
                       "400, not cut");
    if (inc && !(json_is_array(inc) && json_array_size(inc) == 0))
        return api_bad(err, "include", "no extra output data is served (an empty list is taken)");
    static const struct { const char *from, *to; } renamed[] = {
        {"model", "model"}, {"max_output_tokens", "max_tokens"}, {"temperature", "temperature"},
        {"top_p", "top_p"}, {"stream", "stream"}, {"user", "user"}, {"service_tier", "service_tier"}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(renamed); i++) {
        const json_t *x = api_opt(body, renamed[i].from);
        if (x && !api_put(chat, renamed[i].to, json_incref((json_t *)x))) return api_no_memory(err, "a Responses request");
    }
    const json_t *top = api_opt(body, "top_logprobs");
    if (top && (!json_is_integer(top) || json_integer_value(top) != 0))
        return api_bad(err, "top_logprobs", "log-probabilities are not served on /v1/responses (0 is taken)");
    const json_t *so = api_opt(body, "stream_options"), *cache_key = api_opt(body, "prompt_cache_key");
    if (so && !json_is_object(so)) return api_wrong(err, "stream_options", "an object", so);
    if (cache_key && !json_is_string(cache_key)) return api_wrong(err, "prompt_cache_key", "a string", cache_key);
    return SNUG_OK; /* (prompt_cache_key: every prompt's prefix is looked for anyway) */
}

snug_status api_responses_to_chat(const json_t *body, json_t **chat, snug_api_error *err)
{
    *chat = NULL;
    json_t *out = json_object(), *msgs = json_array();
    snug_status st = out && msgs && api_put(out, "messages", json_incref(msgs)) ? SNUG_OK : api_no_memory(err, "a Responses request");
    if (st == SNUG_OK) st = other_fields(body, out, err);
    if (st == SNUG_OK) st = messages(body, msgs, err);
    if (st == SNUG_OK) st = tools(body, out, err);
    if (st == SNUG_OK) st = text_format(body, out, err);
    if (st == SNUG_OK) st = reasoning(body, out, err);
    json_decref(msgs);
    if (st == SNUG_OK) *chat = out;
    else json_decref(out);
    return st;
}
