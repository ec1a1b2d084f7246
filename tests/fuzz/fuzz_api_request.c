/*
 * fuzz_api_request.c: fuzzes the request parser (snug_api_parse), each
 * input as a completions body, a chat completions body, Anthropic's
 * Messages and count_tokens bodies and a Responses body (the last three
 * read as the chat they mean), an embeddings body and a rerank body.
 *
 * A failure must be a well-formed OpenAI error: SNUG_INVALID with status
 * 400 or 413 and type "invalid_request_error", or SNUG_NOMEM with 503,
 * "server_error" and "overloaded" (only when an allocation was made to
 * fail); a message in valid UTF-8 that starts with the param when there is
 * one. A request that parses must hold every invariant the header promises
 * (prompts in the vocabulary, messages normalized to strings, sampling and
 * stop parameters that validate). The driver in fuzz_common.h parses again
 * without a message buffer and with one allocation failing, and checks
 * that nothing leaks.
 */
#include "server/api_request.h"
#include "engine/constrain.h"
#include "fuzz_common.h"
#include "base/mem.h"
#include "base/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_VOCAB = 1000 };

static snug_api_limits limits(void)
{
    snug_api_limits l;
    snug_api_limits_default(&l);
    l.n_vocab = N_VOCAB;
    l.max_depth = 16; /* small, so that the fuzzer reaches the limit */
    l.max_model_len = 4096;
    return l;
}

/* Checks the OpenAI error shape of a failure. */
static void require_error(snug_status st, const snug_api_error *e)
{
    if (st == SNUG_NOMEM) {
        REQUIRE(e->status == 503 && strcmp(e->type, "server_error") == 0);
        REQUIRE(e->code && strcmp(e->code, "overloaded") == 0);
    } else {
        REQUIRE(st == SNUG_INVALID);
        REQUIRE(e->status == 400 || e->status == 413);
        REQUIRE(e->type && strcmp(e->type, "invalid_request_error") == 0);
        REQUIRE((e->status == 413) == (e->code && strcmp(e->code, "body_too_large") == 0));
    }
    REQUIRE(e->message[0] != '\0');
    REQUIRE(snug_utf8_valid(e->message, strlen(e->message)));
    REQUIRE(memchr(e->param, '\0', sizeof e->param) != NULL);
    if (e->param[0]) {
        REQUIRE(strncmp(e->message, e->param, strlen(e->param)) == 0);
    }
}

/* Checks a parsed chat request's messages: strings, or null/absent for an
 * assistant. */
static void require_messages(const json_t *msgs)
{
    REQUIRE(json_is_array(msgs) && json_array_size(msgs) > 0);
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        const json_t *m = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        const json_t *content = json_object_get(m, "content");
        REQUIRE(role != NULL);
        if (!json_is_string(content)) {
            REQUIRE(strcmp(role, "assistant") == 0 && (!content || json_is_null(content)));
        }
    }
    char *text = snug_json_dumps(msgs, false); /* the template's input formats */
    REQUIRE(text != NULL);
    snug_mem_free(text);
}

/* Checks a parsed embeddings or rerank request: its inputs (texts or ids
 * in the vocabulary; a rerank's texts, possibly empty, and its query). */
static void exercise_inputs(const snug_api_request *r, snug_api_kind kind)
{
    REQUIRE(r->kind == kind && r->root && !r->source && r->n == 1 && r->n_prompts >= 1 && r->prompts);
    REQUIRE(r->n_prompts <= limits().max_inputs && r->dimensions >= 0);
    for (int i = 0; i < r->n_prompts; i++) {
        const snug_api_prompt *p = &r->prompts[i];
        REQUIRE((p->text != NULL) != (p->ids != NULL));
        if (p->text) REQUIRE(strlen(p->text) == p->text_len && snug_utf8_valid(p->text, p->text_len));
        else
            for (int64_t j = 0; j < p->n_ids; j++) REQUIRE(p->ids[j] >= 0 && p->ids[j] < N_VOCAB);
        REQUIRE(kind == SNUG_API_RERANK ? p->text != NULL : (p->text ? p->text_len >= 1 : p->n_ids >= 1));
    }
    if (kind == SNUG_API_RERANK)
        REQUIRE(r->query && r->query_len >= 1 && strlen(r->query) == r->query_len && r->top_n >= 1 &&
                r->top_n <= r->n_prompts);
}

/* Checks every invariant of a parsed request (of the kind parsed: an
 * Anthropic one is a chat). */
static void exercise(const snug_api_request *r, snug_api_kind parsed_as)
{
    if (parsed_as == SNUG_API_EMBEDDINGS || parsed_as == SNUG_API_RERANK) {
        exercise_inputs(r, parsed_as);
        return;
    }
    snug_api_limits l = limits();
    snug_error err = {0};
    bool anthropic = parsed_as == SNUG_API_MESSAGES || parsed_as == SNUG_API_MESSAGES_COUNT;
    bool responses = parsed_as == SNUG_API_RESPONSES_CREATE;
    snug_api_kind kind = anthropic || responses ? SNUG_API_CHAT : parsed_as;
    REQUIRE(r->dialect == (anthropic ? SNUG_API_ANTHROPIC : responses ? SNUG_API_RESPONSES : SNUG_API_OPENAI));
    REQUIRE((r->source != NULL) == (anthropic || responses));
    REQUIRE(!responses || (r->n == 1 && r->logprobs == -1 && json_is_object(r->source)));
    REQUIRE(r->count_only == (parsed_as == SNUG_API_MESSAGES_COUNT));
    REQUIRE(!anthropic || (r->model && r->n == 1 && r->logprobs == -1));
    REQUIRE(parsed_as != SNUG_API_MESSAGES || r->max_tokens >= 1);
    REQUIRE(r->kind == kind && r->root != NULL);
    REQUIRE(r->n >= 1 && r->n <= l.max_n);
    REQUIRE(r->max_tokens >= 0 && r->max_tokens <= l.max_model_len);
    REQUIRE(r->stop.max_tokens == r->max_tokens);
    REQUIRE(r->logprobs >= -1 && r->logprobs <= SNUG_API_LOGPROBS_MAX);
    REQUIRE(!r->include_usage || r->stream);
    REQUIRE(r->stop.n_stop <= SNUG_API_STOP_STRINGS_MAX);
    REQUIRE(r->stop.n_eos <= SNUG_API_STOP_TOKEN_IDS_MAX);
    REQUIRE(snug_stop_params_validate(&r->stop, &err) == SNUG_OK);
    REQUIRE(snug_sampling_params_validate(&r->sampling, N_VOCAB, &err) == SNUG_OK);
    REQUIRE(r->sampling.n_logit_bias <= SNUG_API_LOGIT_BIAS_MAX);
    REQUIRE((r->sampling.n_logit_bias > 0) == (r->logit_bias != NULL));
    REQUIRE(r->sampling.logit_bias == r->logit_bias);
    if (r->model) REQUIRE(snug_utf8_valid(r->model, strlen(r->model)));
    if (r->grammar) { /* compiled, and its start fits a sequence's matcher */
        char field[64]; /* the field it came from is one the body has */
        snprintf(field, sizeof field, "%.*s", (int)strcspn(r->grammar_param, "."), r->grammar_param);
        REQUIRE(field[0] && json_object_get(r->root, field) != NULL);
        void *mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_constrain_seq_bytes(), NULL);
        snug_gmatch m;
        REQUIRE(mem && snug_gmatch_start(&m, mem, SNUG_CONSTRAIN_STACKS, SNUG_CONSTRAIN_DEPTH, r->grammar, &err) ==
                           SNUG_OK);
        snug_mem_free(mem);
    }
    bool must_call = r->tool_choice == SNUG_TOOL_CHOICE_REQUIRED || r->tool_choice == SNUG_TOOL_CHOICE_FUNCTION;
    REQUIRE(!must_call || (r->tools && r->grammar && strcmp(r->grammar_param, "tool_choice") == 0));
    REQUIRE(!r->tools || (kind == SNUG_API_CHAT && json_array_size(r->tools) > 0));
    if (kind == SNUG_API_CHAT) {
        REQUIRE(r->prompts == NULL && r->n_prompts == 0 && !r->echo);
        require_messages(r->messages);
        return;
    }
    REQUIRE(r->messages == NULL && r->add_generation_prompt);
    REQUIRE(r->n_prompts >= 1 && r->n_prompts <= l.max_prompts && r->prompts != NULL);
    for (int i = 0; i < r->n_prompts; i++) {
        const snug_api_prompt *p = &r->prompts[i];
        REQUIRE((p->text != NULL) != (p->ids != NULL));
        if (p->text) {
            REQUIRE(p->text_len >= 1 && strlen(p->text) == p->text_len);
            REQUIRE(snug_utf8_valid(p->text, p->text_len));
        } else {
            REQUIRE(p->n_ids >= 1);
            for (int64_t j = 0; j < p->n_ids; j++) REQUIRE(p->ids[j] >= 0 && p->ids[j] < N_VOCAB);
        }
    }
}

/* The request being checked lives here. */
static snug_api_request g_req;

static snug_status parse_kind(snug_api_kind kind, const fuzz_input *in, void **parsed,
                              snug_error *err)
{
    snug_api_limits l = limits();
    snug_api_error e;
    *parsed = &g_req;
    snug_status st =
        snug_api_parse(kind, (const char *)in->data, in->size, &l, &g_req, err ? &e : NULL);
    if (st == SNUG_OK) return st;
    REQUIRE(g_req.root == NULL && g_req.prompts == NULL && g_req.logit_bias == NULL && g_req.grammar == NULL);
    if (!err) return st;
    require_error(st, &e);
    return snug_errorf(err, st, "%s: %d %s: %s", in->name, e.status, e.param, e.message);
}

static snug_status parse_completions(const fuzz_input *in, void **parsed, snug_error *err)
{
    return parse_kind(SNUG_API_COMPLETIONS, in, parsed, err);
}

static snug_status parse_chat(const fuzz_input *in, void **parsed, snug_error *err)
{
    return parse_kind(SNUG_API_CHAT, in, parsed, err);
}

static void check_completions(const fuzz_input *in, void *parsed)
{
    (void)in;
    exercise(parsed, SNUG_API_COMPLETIONS);
    snug_api_request_free(parsed);
}

static void check_chat(const fuzz_input *in, void *parsed)
{
    (void)in;
    exercise(parsed, SNUG_API_CHAT);
    snug_api_request_free(parsed);
}

static snug_status parse_messages(const fuzz_input *in, void **parsed, snug_error *err)
{
    return parse_kind(SNUG_API_MESSAGES, in, parsed, err);
}

static snug_status parse_count(const fuzz_input *in, void **parsed, snug_error *err)
{
    return parse_kind(SNUG_API_MESSAGES_COUNT, in, parsed, err);
}

static void check_messages(const fuzz_input *in, void *parsed)
{
    (void)in;
    exercise(parsed, SNUG_API_MESSAGES);
    snug_api_request_free(parsed);
}

static void check_count(const fuzz_input *in, void *parsed)
{
    (void)in;
    exercise(parsed, SNUG_API_MESSAGES_COUNT);
    snug_api_request_free(parsed);
}

static const fuzz_target g_completions = {"fuzz/completions", false, parse_completions,
                                          check_completions};
static const fuzz_target g_chat = {"fuzz/chat", false, parse_chat, check_chat};
static snug_status parse_responses(const fuzz_input *in, void **parsed, snug_error *err)
{
    return parse_kind(SNUG_API_RESPONSES_CREATE, in, parsed, err);
}

static void check_responses(const fuzz_input *in, void *parsed)
{
    (void)in;
    exercise(parsed, SNUG_API_RESPONSES_CREATE);
    snug_api_request_free(parsed);
}

static snug_status parse_embeddings(const fuzz_input *in, void **parsed, snug_error *err)
{
    return parse_kind(SNUG_API_EMBEDDINGS, in, parsed, err);
}

static snug_status parse_rerank(const fuzz_input *in, void **parsed, snug_error *err)
{
    return parse_kind(SNUG_API_RERANK, in, parsed, err);
}

static void check_embeddings(const fuzz_input *in, void *parsed)
{
    (void)in;
    exercise(parsed, SNUG_API_EMBEDDINGS);
    snug_api_request_free(parsed);
}

static void check_rerank(const fuzz_input *in, void *parsed)
{
    (void)in;
    exercise(parsed, SNUG_API_RERANK);
    snug_api_request_free(parsed);
}

static const fuzz_target g_messages = {"fuzz/messages", false, parse_messages, check_messages};
static const fuzz_target g_embeddings = {"fuzz/embeddings", false, parse_embeddings, check_embeddings};
static const fuzz_target g_rerank = {"fuzz/rerank", false, parse_rerank, check_rerank};
static const fuzz_target g_responses = {"fuzz/responses", false, parse_responses, check_responses};
static const fuzz_target g_count = {"fuzz/count_tokens", false, parse_count, check_count};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_completions, data, size);
    fuzz_drive(&g_chat, data, size);
    fuzz_drive(&g_messages, data, size);
    fuzz_drive(&g_count, data, size);
    fuzz_drive(&g_responses, data, size);
    fuzz_drive(&g_embeddings, data, size);
    fuzz_drive(&g_rerank, data, size);
    return 0;
}
