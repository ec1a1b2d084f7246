/*
 * openai.c: POST /v1/completions and /v1/chat/completions (server.h), and
 * Anthropic's /v1/messages and /v1/messages/count_tokens read as the chat
 * they mean: the body parsed and checked (api_request.h), the prompts
 * tokenized (chat messages through the model's template), one engine
 * request per prompt with n choices, and the answer as one JSON object or
 * as server-sent events in OpenAI's chunk shapes, ending with data:
 * [DONE], or in Anthropic's (anthropic.c).
 */
#include "server_impl.h"

#include "base/mem.h"
#include "chat/chat.h"

#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <string.h>
#include <time.h>

enum {
    COMPLETIONS_MAX_TOKENS_DEFAULT = 16,   /* as OpenAI's completions */
    KEEPALIVE_SECONDS = 10                 /* an SSE comment on a quiet stream */
};

/* What one choice has produced (non-streaming answers keep its text). */
typedef struct choice_acc {
    snug_strbuf text;
    snug_finish finish;
    int64_t n_tokens;
    bool started;                  /* chat streaming: the role chunk was sent */
    /* log-probabilities of a non-streaming answer, as JSON array items:
     * completions: tokens, token_logprobs, top_logprobs, text_offset; chat:
     * content in lp[0] */
    snug_strbuf lp[4];
    int64_t text_offset;           /* bytes of text before the next token */
    bool echoed;                   /* streaming with echo: the prompt's chunk was sent */
    tool_stream tools;             /* streaming a chat with tools or reasoning: text keeps the
                                    * reply; tools.sent is the content sent */
    snug_reasoning_stream think;   /* streaming a thinking model's chat: its reply's phase */
    int32_t stop_index;            /* the stop string that ended it (snug_output's), or -1 */
    anthropic_stream blocks;       /* streaming in Anthropic's shapes: its blocks so far */
    responses_stream items;        /* streaming in the Responses shapes: its items so far */
} choice_acc;

struct openai_job {
    snug_server *srv;
    snug_api_request req;
    snug_request *reqs;            /* [n_prompts] */
    bool *submitted;               /* [n_prompts] */
    int32_t **ids;                 /* [n_prompts] each prompt's ids (owned) */
    choice_acc *acc;               /* [n_prompts * n] */
    int n_prompts;
    snug_prompt_logprob **plp;     /* [n_prompts] with echo and logprobs: the engine fills */
    char **echo_text;              /* [n_prompts] with echo: each prompt's text (owned) */
    size_t *echo_len;
    int64_t prompt_tokens;
    double t_first;                /* when its first token was taken; 0: none yet */
    bool think_inside;             /* the chat's prompt ends inside the think block */
    char id[48];
    int64_t created;
    char *tmp;                     /* an output's text */
    size_t tmp_cap;
    snug_strbuf pending;           /* streaming: bytes not yet given to the connection */
    snug_strbuf chunk_lp[4];       /* streaming: one chunk's log-probabilities */
    size_t sent;
    bool ended;                    /* [DONE] is in pending */
    bool failed_sent;              /* the engine's failure is in pending */
    double t_sent;                 /* when bytes last went out (snug_now_seconds); 0: none yet */
};

void openai_job_free(openai_job *j)
{
    if (!j) return;
    for (int i = 0; i < j->n_prompts; i++) {
        if (j->submitted && j->submitted[i]) snug_engine_release(j->srv->e, &j->reqs[i]);
        if (j->ids) snug_mem_free(j->ids[i]);
        if (j->plp) snug_mem_free(j->plp[i]);
        if (j->echo_text) snug_mem_free(j->echo_text[i]);
    }
    snug_mem_free(j->plp);
    snug_mem_free(j->echo_text);
    snug_mem_free(j->echo_len);
    if (j->acc)
        for (int k = 0; k < j->n_prompts * j->req.n; k++) {
            snug_strbuf_free(&j->acc[k].text);
            responses_stream_free(&j->acc[k].items);
            for (int a = 0; a < 4; a++) snug_strbuf_free(&j->acc[k].lp[a]);
        }
    snug_strbuf_free(&j->pending);
    for (int a = 0; a < 4; a++) snug_strbuf_free(&j->chunk_lp[a]);
    snug_mem_free(j->tmp);
    snug_mem_free(j->acc);
    snug_mem_free(j->ids);
    snug_mem_free(j->submitted);
    snug_mem_free(j->reqs);
    snug_api_request_free(&j->req);
    atomic_fetch_sub(&j->srv->active, 1);
    snug_mem_free(j);
}

/* ---- building the job --------------------------------------------------------- */

static void *take(size_t n, bool *ok)
{
    void *p = *ok ? snug_mem_alloc(SNUG_MEM_OTHER, n, NULL) : NULL;
    *ok = *ok && p;
    return p;
}

/* Tokenizes text into a new id array for prompt i of j. */
static snug_status encode(openai_job *j, int i, const char *text, size_t len, bool chat,
                          snug_error *err)
{
    const snug_tokenizer *tok = snug_engine_tokenizer(j->srv->e);
    if (!tok) return snug_errorf(err, SNUG_INVALID, "the model has no tokenizer: send token ids");
    snug_tok_encoder *enc = NULL;
    const int32_t *ids = NULL;
    size_t n = 0;
    /* a chat template writes the special tokens itself */
    snug_tok_encode_opts eo = {.add_special = !chat, .parse_special = true};
    snug_status st = snug_tok_encoder_create(tok, &enc, err);
    if (st == SNUG_OK) st = snug_tok_encode(enc, text, len, &eo, &ids, &n, err);
    if (st == SNUG_OK && n == 0) st = snug_errorf(err, SNUG_INVALID, "the prompt has no tokens");
    if (st == SNUG_OK) {
        j->ids[i] = snug_mem_alloc(SNUG_MEM_OTHER, n * sizeof(int32_t), err);
        if (j->ids[i]) {
            memcpy(j->ids[i], ids, n * sizeof(int32_t));
            j->reqs[i].prompt = j->ids[i];
            j->reqs[i].n_prompt = (int64_t)n;
        } else {
            st = SNUG_NOMEM;
        }
    }
    snug_tok_encoder_free(enc);
    return st;
}

/* Rewords a failed render of the chat template (f, the detail in err) for
 * the client: which message, when known (also named in param), and the
 * template's own text for its raise_exception or the limit passed, but
 * never the interpreter's error: a Python-style type error tells a client
 * nothing it can act on and shows the server's internals. */
static void chat_failed(const openai_job *j, const snug_chat_failure *f, char param[64],
                        snug_error *err)
{
    char text[SNUG_ERROR_MSG_BYTES], where[96] = "the conversation";
    snprintf(text, sizeof text, "%s", err->msg + SNUG_MIN(f->text_at, strlen(err->msg)));
    if (f->message >= 0) {
        const json_t *m = json_array_get(j->req.messages, (size_t)f->message);
        snprintf(param, 64, "messages[%lld]", (long long)f->message);
        snprintf(where, sizeof where, "%s (role \"%s\")", param,
                 json_string_value(json_object_get(m, "role")));
    }
    if (f->kind == SNUG_TEMPLATE_FAIL_RAISED)
        snug_errorf(err, err->status, "the chat template refused %s: %s", where, text);
    else if (f->kind == SNUG_TEMPLATE_FAIL_LIMIT)
        snug_errorf(err, err->status, "the chat template could not render %s within the "
                    "server's limits: %s", where, text);
    else
        snug_errorf(err, err->status, "the chat template failed to render %s", where);
}

/* The ids of the chat's prompt (prompt 0 of j): the template over the
 * messages, tokenized. A failed render is reworded by chat_failed. */
static snug_status chat_ids(openai_job *j, char param[64], snug_error *err)
{
    char *text = NULL;
    size_t len = 0;
    const snug_tokenizer *tok = snug_engine_tokenizer(j->srv->e);
    if (!tok)
        return snug_errorf(err, SNUG_INVALID, "the model has no tokenizer, so no chat template");
    const char *tpl = j->srv->o.chat_template ? j->srv->o.chat_template
                                              : snug_tokenizer_chat_template(tok);
    snug_chat_failure f;
    snug_chat_input in = {.messages = j->req.messages, .tools = j->req.tools,
                          .kwargs = j->req.chat_template_kwargs,
                          .add_generation_prompt = j->req.add_generation_prompt,
                          .continue_final = j->req.continue_final_message};
    snug_status st = snug_chat_apply_template(tpl, tok, &in, &f, &text, &len, err);
    if (st != SNUG_OK && f.kind != SNUG_TEMPLATE_FAIL_NONE && st != SNUG_NOMEM)
        chat_failed(j, &f, param, err);
    if (st == SNUG_OK) j->think_inside = snug_reasoning_prompt_inside(j->srv->think_format, text, len);
    if (st == SNUG_OK) st = encode(j, 0, text, len, true, err);
    snug_mem_free(text);
    return st;
}

/* The ids of prompt i: tokenized text, a copy of given ids, or the chat;
 * param names the field at fault ("prompt", "messages", "messages[2]"). */
static snug_status prompt_ids(openai_job *j, int i, char param[64], snug_error *err)
{
    if (j->req.kind == SNUG_API_CHAT) return chat_ids(j, param, err);
    const snug_api_prompt *p = &j->req.prompts[i];
    if (p->text) return encode(j, i, p->text, p->text_len, false, err);
    j->ids[i] = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)p->n_ids * sizeof(int32_t), err);
    if (!j->ids[i]) return SNUG_NOMEM;
    memcpy(j->ids[i], p->ids, (size_t)p->n_ids * sizeof(int32_t));
    j->reqs[i].prompt = j->ids[i];
    j->reqs[i].n_prompt = p->n_ids;
    return SNUG_OK;
}

/* With echo: prompt i's text for the answer (the request's, or its ids
 * decoded), the choices' texts started with it, and with logprobs the
 * array the engine fills with the prompt's log-probabilities. */
static snug_status echo_prompt(openai_job *j, int i, snug_error *err)
{
    const snug_api_prompt *p = &j->req.prompts[i];
    snug_request *r = &j->reqs[i];
    if (p->text) {
        j->echo_text[i] = snug_mem_alloc(SNUG_MEM_OTHER, p->text_len + 1, err);
        if (!j->echo_text[i]) return SNUG_NOMEM;
        memcpy(j->echo_text[i], p->text, p->text_len);
        j->echo_len[i] = p->text_len;
    } else {
        const snug_tokenizer *tok = snug_engine_tokenizer(j->srv->e);
        if (!tok) return snug_errorf(err, SNUG_INVALID, "echo: the model has no tokenizer");
        snug_status st = snug_tok_decode(tok, r->prompt, (size_t)r->n_prompt, true,
                                         &j->echo_text[i], &j->echo_len[i], err);
        if (st != SNUG_OK) return st;
    }
    for (int k = 0; k < j->req.n; k++) {
        choice_acc *a = &j->acc[i * j->req.n + k];
        if (!j->req.stream) snug_strbuf_put(&a->text, j->echo_text[i], j->echo_len[i]);
        a->text_offset = (int64_t)j->echo_len[i];
    }
    if (j->plp) {
        j->plp[i] = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)r->n_prompt * sizeof(snug_prompt_logprob), err);
        if (!j->plp[i]) return SNUG_NOMEM;
        r->prompt_logprobs = j->plp[i];
    }
    return SNUG_OK;
}

/* Answers a failed step of making the job, in the shape of d's API. */
static enum MHD_Result fail(struct MHD_Connection *c, snug_api_dialect d, snug_status st, const snug_error *err,
                            const char *param)
{
    if (st == SNUG_NOMEM) return http_overloaded_in(c, d, err->msg[0] ? err->msg : "no memory for a job");
    if (st == SNUG_BUSY)
        return http_error_in(c, d, 429, "server_error", NULL, "queue_full", "%s", err->msg);
    if (strncmp(err->msg, "context_length_exceeded: ", 25) == 0)
        return http_error_in(c, d, 400, "invalid_request_error", param, "context_length_exceeded", "%s",
                             err->msg + 25);
    return http_error_in(c, d, 400, "invalid_request_error", param, NULL, "%s", err->msg);
}

/* ---- formatting ---------------------------------------------------------------- */

/* Whether j's replies may be tool calls (a chat with tools, tool_choice not none). */
static bool tools_on(const openai_job *j) { return j->req.tools && j->req.tool_choice != SNUG_TOOL_CHOICE_NONE; }

/* Whether j's replies are split into reasoning and content (a chat with a
 * model that thinks, unless --reasoning-format none). */
static bool reasoning_on(const openai_job *j) { return j->req.kind == SNUG_API_CHAT && j->srv->reasoning; }

/* The calls in a choice's whole reply of len bytes (NULL: none, or the
 * reply did not end of itself), *content_len its content before them.
 * Out of memory, out (the answer being written) fails as a whole. */
static json_t *reply_calls(const openai_job *j, snug_finish f, const char *text, size_t len, size_t *content_len,
                           snug_strbuf *out)
{
    json_t *calls = NULL;
    *content_len = len;
    const char *why = snug_finish_reason_str(f);
    if (tools_on(j) && why && strcmp(why, "stop") == 0 &&
        snug_tool_calls_parse(j->req.tool_format, text, len, j->req.tools, &calls, content_len, NULL) != SNUG_OK)
        out->failed = true;
    return calls;
}

/* The key of choice index's call ids: unique to the job and the choice. */
static uint64_t call_key(const openai_job *j, int index)
{
    return ((j->reqs[0].id + j->srv->id_key) * 0x9E3779B97F4A7C15ull ^ j->srv->id_key >> 13) * 1021 + (uint64_t)index;
}

/* "reasoning_content":...,"reasoning":... (vLLM's older and newer names:
 * clients read one or the other), the text's n bytes or null. */
static void put_reasoning(snug_strbuf *b, const char *text, size_t n, bool none)
{
    static const char *const names[2] = {"reasoning_content", "reasoning"};
    for (int k = 0; k < 2; k++) {
        snug_strbuf_printf(b, "%s\"%s\":", k ? "," : "", names[k]);
        if (none) snug_strbuf_printf(b, "null");
        else snug_strbuf_json_string(b, text, n);
    }
}

static void put_head(openai_job *j, snug_strbuf *b, bool chunk)
{
    bool chat = j->req.kind == SNUG_API_CHAT;
    const char *object = chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    snug_strbuf_printf(b, "{\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", j->id,
                       object, (long long)j->created);
    snug_strbuf_json_string(b, j->srv->o.model_name, strlen(j->srv->o.model_name));
}

static void put_finish(snug_strbuf *b, snug_finish f)
{
    const char *why = snug_finish_reason_str(f);
    if (why)
        snug_strbuf_printf(b, ",\"finish_reason\":\"%s\"", why);
    else
        snug_strbuf_printf(b, ",\"finish_reason\":null");
}

void openai_job_usage(openai_job *j, int64_t *prompt, int64_t *cached, int64_t *completion,
                      double *t_first)
{
    *prompt = j->prompt_tokens;
    *cached = *completion = 0;
    for (int i = 0; j->submitted && i < j->n_prompts; i++)
        if (j->submitted[i]) *cached += snug_engine_cached_tokens(j->srv->e, &j->reqs[i]);
    for (int k = 0; j->acc && k < j->n_prompts * j->req.n; k++) *completion += j->acc[k].n_tokens;
    *t_first = j->t_first;
}

static void put_usage(openai_job *j, snug_strbuf *b)
{
    int64_t prompt, cached, out;
    double t_first;
    openai_job_usage(j, &prompt, &cached, &out, &t_first);
    snug_strbuf_printf(b, "\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,"
                       "\"total_tokens\":%lld,\"prompt_tokens_details\":{\"cached_tokens\":%lld}}",
                       (long long)prompt, (long long)out, (long long)(prompt + out),
                       (long long)cached);
}

/* ---- log-probabilities ---------------------------------------------------------- */

/* The text of token id alone (special tokens as their text), into buf. */
static size_t piece(const snug_tokenizer *tok, int32_t id, char *buf, size_t cap)
{
    if (!tok) return (size_t)snprintf(buf, cap, "<%d>", id);
    snug_tok_stream st;
    snug_tok_stream_init(&st, tok, false);
    st.started = true;
    size_t n = 0;
    if (snug_tok_stream_push(&st, id, buf, cap, &n, NULL) != SNUG_OK) n = 0;
    return n + snug_tok_stream_finish(&st, buf + n, cap - n);
}

/* How a token is named in log-probabilities: its text, or "token_id:N"
 * when the request asks for ids (vLLM's return_tokens_as_token_ids: texts
 * of different tokens may read alike). */
static size_t token_name(const openai_job *j, const snug_tokenizer *tok, int32_t id, char *buf,
                         size_t cap)
{
    if (j->req.tokens_as_ids) return (size_t)snprintf(buf, cap, "token_id:%d", id);
    return piece(tok, id, buf, cap);
}

/* A log-probability as JSON: a probability of 0 has none, so the lowest
 * float stands in (as vLLM does). */
static void put_lp(snug_strbuf *b, float lp)
{
    snug_strbuf_printf(b, "%.7g", lp > -9999.0f ? (double)lp : -9999.0);
}

/* {"token": ..., "logprob": ..., "bytes": [...]} of chat's logprobs. */
static void put_chat_token(snug_strbuf *b, const char *text, size_t n, float lp)
{
    snug_strbuf_printf(b, "{\"token\":");
    snug_strbuf_put(b, "\"", 1);
    snug_strbuf_json(b, text, n);
    snug_strbuf_printf(b, "\",\"logprob\":");
    put_lp(b, lp);
    snug_strbuf_printf(b, ",\"bytes\":[");
    for (size_t i = 0; i < n; i++) snug_strbuf_printf(b, i ? ",%u" : "%u", (unsigned char)text[i]);
    snug_strbuf_printf(b, "]");
}

/* Appends output o's log-probabilities as array items: into lp[0..3]
 * (completions: the token, its log-probability, the alternatives, the
 * text offset) or lp[0] (chat: one content entry). */
static void add_logprobs(openai_job *j, snug_strbuf *lp, int64_t offset, const snug_output *o)
{
    const snug_tokenizer *tok = snug_engine_tokenizer(j->srv->e);
    char t[512];
    size_t n = token_name(j, tok, o->token, t, sizeof t);
    if (j->req.kind == SNUG_API_CHAT) {
        if (lp[0].len) snug_strbuf_put(&lp[0], ",", 1);
        put_chat_token(&lp[0], t, n, o->logprob);
        snug_strbuf_printf(&lp[0], ",\"top_logprobs\":[");
        for (int32_t k = 0; k < o->n_top; k++) {
            char a[512];
            size_t na = token_name(j, tok, o->top_ids[k], a, sizeof a);
            if (k) snug_strbuf_put(&lp[0], ",", 1);
            put_chat_token(&lp[0], a, na, o->top_logprobs[k]);
            snug_strbuf_put(&lp[0], "}", 1);
        }
        snug_strbuf_printf(&lp[0], "]}");
        return;
    }
    for (int a = 0; a < 4; a++)
        if (lp[a].len) snug_strbuf_put(&lp[a], ",", 1);
    snug_strbuf_put(&lp[0], "\"", 1);
    snug_strbuf_json(&lp[0], t, n);
    snug_strbuf_put(&lp[0], "\"", 1);
    put_lp(&lp[1], o->logprob);
    snug_strbuf_put(&lp[2], "{", 1);
    char alt[SNUG_LOGPROBS_MAX][512]; /* each alternative decoded once */
    size_t n_alt[SNUG_LOGPROBS_MAX];
    int32_t shown = 0;
    for (int32_t k = 0; k < o->n_top; k++) {
        n_alt[k] = token_name(j, tok, o->top_ids[k], alt[k], sizeof alt[k]);
        bool seen = false; /* one key per text: two tokens may read alike */
        for (int32_t m = 0; m < k && !seen; m++)
            seen = n_alt[m] == n_alt[k] && memcmp(alt[m], alt[k], n_alt[k]) == 0;
        if (seen) continue;
        if (shown++) snug_strbuf_put(&lp[2], ",", 1);
        snug_strbuf_put(&lp[2], "\"", 1);
        snug_strbuf_json(&lp[2], alt[k], n_alt[k]);
        snug_strbuf_put(&lp[2], "\":", 2);
        put_lp(&lp[2], o->top_logprobs[k]);
    }
    snug_strbuf_put(&lp[2], "}", 1);
    snug_strbuf_printf(&lp[3], "%lld", (long long)offset);
}

/* "logprobs": the object of arrays lp holds, or null when none were asked. */
/* The prompt's log-probability entries (echo) of prompt i as array items
 * into pre[0..3]: the first token has none (null), as OpenAI's answers.
 * Each text_offset is where the token's text begins in the echoed prompt,
 * as the prompt's ids decode (special tokens such as <s> add no text, the
 * first piece's leading space goes, a character split across tokens counts
 * at its last one): the first is 0, none is past the echoed text, and the
 * completion's first token begins where the prompt's text ends. */
static void add_prompt_logprobs(openai_job *j, int i, snug_strbuf *pre)
{
    const snug_tokenizer *tok = snug_engine_tokenizer(j->srv->e);
    const snug_request *r = &j->reqs[i];
    int64_t offset = 0, echo_len = (int64_t)j->echo_len[i];
    snug_tok_stream dec;
    if (tok) snug_tok_stream_init(&dec, tok, true);
    for (int64_t p = 0; p < r->n_prompt; p++) {
        char t[512];
        size_t n = 0;
        if (!tok) n = piece(tok, r->prompt[p], t, sizeof t);
        else if (snug_tok_stream_push(&dec, r->prompt[p], t, sizeof t, &n, NULL) != SNUG_OK) n = 0;
        size_t shown = token_name(j, tok, r->prompt[p], t, sizeof t);
        for (int a = 0; a < 4; a++)
            if (p) snug_strbuf_put(&pre[a], ",", 1);
        snug_strbuf_put(&pre[0], "\"", 1);
        snug_strbuf_json(&pre[0], t, shown);
        snug_strbuf_put(&pre[0], "\"", 1);
        snug_strbuf_printf(&pre[3], "%lld", (long long)SNUG_MIN(offset, echo_len));
        offset += (int64_t)n; /* the decoded text, as the echo shows it */
        if (p == 0 || !j->plp || !j->plp[i]) {
            snug_strbuf_printf(&pre[1], "null");
            snug_strbuf_printf(&pre[2], "null");
            continue;
        }
        const snug_prompt_logprob *lp = &j->plp[i][p];
        put_lp(&pre[1], lp->logprob);
        snug_strbuf_put(&pre[2], "{", 1);
        for (int32_t k = 0; k < lp->n_top; k++) {
            char a[512];
            size_t na = token_name(j, tok, lp->top_ids[k], a, sizeof a);
            if (k) snug_strbuf_put(&pre[2], ",", 1);
            snug_strbuf_put(&pre[2], "\"", 1);
            snug_strbuf_json(&pre[2], a, na);
            snug_strbuf_put(&pre[2], "\":", 2);
            put_lp(&pre[2], lp->top_logprobs[k]);
        }
        snug_strbuf_put(&pre[2], "}", 1);
    }
}

/* "logprobs": the object of arrays pre (the prompt's, with echo; may be
 * NULL) and lp hold, or null when none were asked. */
static void put_logprobs(openai_job *j, snug_strbuf *b, const snug_strbuf *pre,
                         const snug_strbuf *lp)
{
    if (j->req.logprobs < 0) {
        snug_strbuf_printf(b, ",\"logprobs\":null");
        return;
    }
    if (j->req.kind == SNUG_API_CHAT) {
        snug_strbuf_printf(b, ",\"logprobs\":{\"content\":[");
        if (lp[0].len) snug_strbuf_put(b, lp[0].p, lp[0].len);
        snug_strbuf_printf(b, "]}");
        return;
    }
    static const char *const names[4] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    snug_strbuf_printf(b, ",\"logprobs\":{");
    for (int a = 0; a < 4; a++) {
        snug_strbuf_printf(b, "%s\"%s\":[", a ? "," : "", names[a]);
        if (pre && pre[a].len) snug_strbuf_put(b, pre[a].p, pre[a].len);
        if (pre && pre[a].len && lp[a].len) snug_strbuf_put(b, ",", 1);
        if (lp[a].len) snug_strbuf_put(b, lp[a].p, lp[a].len);
        snug_strbuf_printf(b, "]");
    }
    snug_strbuf_printf(b, "}");
}

/* The whole answer of a finished job. */
static void put_answer(openai_job *j, snug_strbuf *b)
{
    bool chat = j->req.kind == SNUG_API_CHAT;
    put_head(j, b, false);
    snug_strbuf_printf(b, ",\"choices\":[");
    for (int k = 0; k < j->n_prompts * j->req.n; k++) {
        const choice_acc *a = &j->acc[k];
        snug_strbuf_printf(b, "%s{\"index\":%d,", k ? "," : "", k);
        json_t *calls = NULL;
        if (chat) { /* the think block split off first: tool calls are read in the content */
            const char *all = a->text.p ? a->text.p : "";
            snug_reasoning_parts rp = {.content_len = a->text.len};
            if (reasoning_on(j)) snug_reasoning_split(j->srv->reasoning, j->think_inside, all, a->text.len, &rp);
            const char *body = all + rp.content_at;
            size_t content_len = rp.content_len;
            calls = reply_calls(j, a->finish, body, rp.content_len, &content_len, b);
            snug_strbuf_printf(b, "\"message\":{\"role\":\"assistant\",\"content\":");
            if ((calls || rp.has_reasoning) && content_len == 0) snug_strbuf_printf(b, "null");
            else snug_strbuf_json_string(b, body, content_len);
            if (reasoning_on(j)) {
                snug_strbuf_put(b, ",", 1);
                put_reasoning(b, all + rp.reasoning_at, rp.reasoning_len, !rp.has_reasoning);
            }
            if (calls) {
                snug_strbuf_printf(b, ",");
                tool_calls_put(b, &j->req, calls, call_key(j, k), false);
            }
            snug_strbuf_printf(b, "}");
        } else {
            snug_strbuf_printf(b, "\"text\":");
            snug_strbuf_json_string(b, a->text.p ? a->text.p : "", a->text.len);
        }
        snug_strbuf pre[4] = {{0}, {0}, {0}, {0}};
        if (j->req.echo && j->req.logprobs >= 0) add_prompt_logprobs(j, k / j->req.n, pre);
        put_logprobs(j, b, pre, a->lp);
        for (int m = 0; m < 4; m++) snug_strbuf_free(&pre[m]);
        if (calls) snug_strbuf_printf(b, ",\"finish_reason\":\"tool_calls\"");
        else put_finish(b, a->finish);
        json_decref(calls);
        snug_strbuf_printf(b, "}");
    }
    snug_strbuf_printf(b, "],");
    put_usage(j, b);
    snug_strbuf_printf(b, "}");
}

/* j's tokens so far, as Anthropic's usage counts them. */
static anthropic_usage usage_of(openai_job *j)
{
    anthropic_usage u;
    double t_first;
    openai_job_usage(j, &u.prompt, &u.cached, &u.output, &t_first);
    return u;
}

/* How choice index ended, for Anthropic's stop_reason and stop_sequence. */
static anthropic_end end_of(const openai_job *j, int index, bool calls)
{
    const choice_acc *a = &j->acc[index];
    anthropic_end e = {.finish = a->finish, .calls = calls};
    if (a->finish == SNUG_FINISH_STOP_STRING && a->stop_index >= 0 && a->stop_index < j->req.stop.n_stop) {
        e.stop = j->req.stop.stop[a->stop_index];
        e.n_stop = j->req.stop.stop_len[a->stop_index];
    }
    return e;
}

/* The whole answer of a finished job in Anthropic's shape (its one
 * choice: the request has no n): the think block split off first, then
 * the calls read in the content, as put_answer does. */
static void put_message(openai_job *j, snug_strbuf *b)
{
    const choice_acc *a = &j->acc[0];
    const char *all = a->text.p ? a->text.p : "";
    snug_reasoning_parts rp = {.content_len = a->text.len};
    if (reasoning_on(j)) snug_reasoning_split(j->srv->reasoning, j->think_inside, all, a->text.len, &rp);
    const char *body = all + rp.content_at;
    size_t content_len = rp.content_len;
    json_t *calls = reply_calls(j, a->finish, body, rp.content_len, &content_len, b);
    anthropic_message m = {.id = j->id, .model = j->srv->o.model_name, .thinking = all + rp.reasoning_at,
                           .n_thinking = rp.reasoning_len, .has_thinking = rp.has_reasoning, .text = body,
                           .n_text = content_len, .calls = calls, .key = call_key(j, 0),
                           .end = end_of(j, 0, calls != NULL), .usage = usage_of(j)};
    anthropic_put_message(b, &m);
    json_decref(calls);
}

/* The number of tokens text (n bytes) encodes into: a reply's reasoning,
 * for the Responses usage; 0 without a tokenizer or memory. */
static int64_t tokens_in(const openai_job *j, const char *text, size_t n)
{
    const snug_tokenizer *tok = snug_engine_tokenizer(j->srv->e);
    snug_tok_encoder *enc = NULL;
    const int32_t *ids = NULL;
    size_t count = 0;
    snug_tok_encode_opts eo = {0};
    if (n && tok && snug_tok_encoder_create(tok, &enc, NULL) == SNUG_OK &&
        snug_tok_encode(enc, text, n, &eo, &ids, &count, NULL) != SNUG_OK)
        count = 0;
    snug_tok_encoder_free(enc);
    return (int64_t)count;
}

/* Choice 0 of a job in the Responses shapes: as it begins (in_progress),
 * or whole: the think block split off, the calls read in the content
 * (*calls, the caller's to free). */
static responses_reply responses_of(openai_job *j, bool in_progress, json_t **calls, snug_strbuf *b)
{
    const choice_acc *a = &j->acc[0];
    responses_reply r = {.req = &j->req, .id = j->id, .model = j->srv->o.model_name, .created = j->created,
                         .in_progress = in_progress, .key = call_key(j, 0), .finish = a->finish};
    *calls = NULL;
    if (in_progress) return r;
    const char *all = a->text.p ? a->text.p : "";
    snug_reasoning_parts rp = {.content_len = a->text.len};
    if (reasoning_on(j)) snug_reasoning_split(j->srv->reasoning, j->think_inside, all, a->text.len, &rp);
    r.reasoning = all + rp.reasoning_at;
    r.n_reasoning = rp.has_reasoning ? rp.reasoning_len : 0;
    r.text = all + rp.content_at;
    r.n_text = rp.content_len;
    *calls = reply_calls(j, a->finish, r.text, rp.content_len, &r.n_text, b);
    r.calls = *calls;
    double t_first;
    openai_job_usage(j, &r.prompt, &r.cached, &r.output, &t_first);
    r.reasoning_tokens = tokens_in(j, r.reasoning, r.n_reasoning);
    return r;
}

/* The whole answer of a finished job in the Responses shape. */
static void put_response(openai_job *j, snug_strbuf *b)
{
    json_t *calls = NULL;
    responses_reply r = responses_of(j, false, &calls, b);
    responses_put(b, &r);
    json_decref(calls);
}

/* With echo, the prompt's text (and its log-probabilities) as the first
 * SSE event of choice index. */
static void put_echo_chunk(openai_job *j, int index)
{
    snug_strbuf *b = &j->pending;
    int i = index / j->req.n;
    snug_strbuf_printf(b, "data: ");
    put_head(j, b, true);
    snug_strbuf_printf(b, ",\"choices\":[{\"index\":%d,\"text\":", index);
    snug_strbuf_json_string(b, j->echo_text[i], j->echo_len[i]);
    snug_strbuf pre[4] = {{0}, {0}, {0}, {0}}, none[4] = {{0}, {0}, {0}, {0}};
    if (j->req.logprobs >= 0) add_prompt_logprobs(j, i, pre);
    put_logprobs(j, b, pre, none);
    for (int m = 0; m < 4; m++) snug_strbuf_free(&pre[m]);
    snug_strbuf_printf(b, ",\"finish_reason\":null}]}\n\n");
    j->acc[index].echoed = true;
}

/* A chat chunk of choice index: a reasoning delta (reasoning not NULL) or a
 * content delta (content, null when content is NULL, and calls), with o's
 * log-probabilities when lp (else none) and finish. */
static void put_chat_chunk(openai_job *j, int index, const char *reasoning, size_t n_reasoning, const char *content,
                           size_t n_content, const json_t *calls, const snug_output *o, bool lp, snug_finish finish)
{
    snug_strbuf *b = &j->pending;
    choice_acc *a = &j->acc[index];
    snug_strbuf_printf(b, "data: ");
    put_head(j, b, true);
    snug_strbuf_printf(b, ",\"choices\":[{\"index\":%d,\"delta\":{", index);
    if (!a->started) snug_strbuf_printf(b, "\"role\":\"assistant\",");
    a->started = true;
    if (reasoning) {
        put_reasoning(b, reasoning, n_reasoning, false);
    } else {
        snug_strbuf_printf(b, "\"content\":");
        if (!content) snug_strbuf_printf(b, "null");
        else snug_strbuf_json_string(b, content, n_content);
        if (calls) {
            snug_strbuf_printf(b, ",");
            tool_calls_put(b, &j->req, calls, call_key(j, index), true);
        }
    }
    snug_strbuf_printf(b, "}");
    snug_strbuf *one = j->chunk_lp; /* kept across chunks: emptied, not freed */
    for (int k = 0; k < 4; k++) snug_strbuf_clear(&one[k]);
    if (lp && j->req.logprobs >= 0 && o->token >= 0) add_logprobs(j, one, a->text_offset, o);
    put_logprobs(j, b, NULL, one);
    if (calls) snug_strbuf_printf(b, ",\"finish_reason\":\"tool_calls\"");
    else put_finish(b, finish);
    snug_strbuf_printf(b, "}]}\n\n");
}

/* One output as SSE events. A chat with tools or reasoning keeps its
 * reply's text: what may go out of it so far is the reasoning's next bytes
 * (reasoning.h: a tag's beginning held back) and then the content's, of
 * which tool calls hold back what may begin a call (openai_tools.c); at the
 * end, the calls. A reasoning delta and a content delta from one output go
 * as two chunks, the reasoning first. */
static void put_chunk(openai_job *j, int index, const snug_output *o, const char *text)
{
    snug_strbuf *b = &j->pending;
    choice_acc *a = &j->acc[index];
    bool chat = j->req.kind == SNUG_API_CHAT, end = o->finish != SNUG_FINISH_NONE;
    const char *out = text, *think = NULL;
    size_t n_out = o->n_text, n_think = 0;
    json_t *calls = NULL;
    bool responses = j->req.dialect == SNUG_API_RESPONSES; /* (its items need the whole text) */
    if (chat && (tools_on(j) || reasoning_on(j) || responses)) {
        snug_strbuf_put(&a->text, text, o->n_text);
        const char *all = a->text.p ? a->text.p : "", *body = all;
        size_t n_body = a->text.len;
        if (reasoning_on(j)) {
            snug_reasoning_delta d;
            snug_reasoning_stream_next(j->srv->reasoning, &a->think, all, a->text.len, end, &d);
            think = all + d.reasoning_from;
            n_think = d.reasoning_to - d.reasoning_from;
            body = all + d.content_at;
            n_body = d.content_end - d.content_at;
        }
        size_t upto = n_body, content_len = 0;
        if (tools_on(j)) { /* what may go out of the content so far; at its end, its calls */
            upto = tool_reply_streamable(&j->req, &a->tools, body, n_body);
            if (end) {
                calls = reply_calls(j, o->finish, body, n_body, &content_len, b);
                upto = calls ? SNUG_MAX(content_len, a->tools.sent) : n_body;
            }
        }
        out = body + a->tools.sent;
        n_out = upto - a->tools.sent;
        a->tools.sent = upto;
        if (n_out == 0 && n_think == 0 && !calls && !end && a->started && j->req.logprobs < 0) {
            a->text_offset += (int64_t)o->n_text;
            return; /* held back: nothing to say yet */
        }
    }
    if (responses) { /* the reasoning's item, the message's; the calls' at the end (read_stream) */
        uint64_t key = call_key(j, index);
        responses_stream_text(b, &a->items, true, think, n_think, key);
        responses_stream_text(b, &a->items, false, out, n_out, key);
        a->text_offset += (int64_t)o->n_text;
        json_decref(calls);
        return;
    }
    if (j->req.dialect == SNUG_API_ANTHROPIC) { /* the reasoning's block, the content's, the calls' */
        anthropic_stream_text(b, &a->blocks, true, think, n_think);
        anthropic_stream_text(b, &a->blocks, false, out, n_out);
        if (calls) anthropic_stream_calls(b, &a->blocks, calls, call_key(j, index));
        a->text_offset += (int64_t)o->n_text;
        json_decref(calls);
        return;
    }
    if (j->req.echo && !a->echoed) put_echo_chunk(j, index);
    if (chat) {
        bool content = n_out > 0 || calls; /* (an end with no content: the finish goes with the reasoning) */
        if (n_think > 0) /* the reasoning first; the token's log-probabilities with the last chunk */
            put_chat_chunk(j, index, think, n_think, NULL, 0, NULL, o, !content, content ? SNUG_FINISH_NONE : o->finish);
        if (n_think == 0 || content)
            put_chat_chunk(j, index, NULL, 0, calls && n_out == 0 ? NULL : out, n_out, calls, o, true, o->finish);
    } else {
        snug_strbuf_printf(b, "data: ");
        put_head(j, b, true);
        snug_strbuf_printf(b, ",\"choices\":[{\"index\":%d,\"text\":", index);
        snug_strbuf_json_string(b, text, o->n_text);
        snug_strbuf *one = j->chunk_lp; /* kept across chunks: emptied, not freed */
        for (int k = 0; k < 4; k++) snug_strbuf_clear(&one[k]);
        if (j->req.logprobs >= 0 && o->token >= 0) add_logprobs(j, one, a->text_offset, o);
        put_logprobs(j, b, NULL, one);
        put_finish(b, o->finish);
        snug_strbuf_printf(b, "}]}\n\n");
    }
    a->text_offset += (int64_t)o->n_text;
    json_decref(calls);
}

/* Takes every output waiting for j: into its choices' text, or as chunks.
 * Returns how many. */
static int take_outputs(openai_job *j, bool stream)
{
    int n = 0;
    for (int i = 0; i < j->n_prompts; i++) {
        snug_output o;
        while (snug_engine_next(j->srv->e, &j->reqs[i], &o, j->tmp, j->tmp_cap)) {
            int index = i * j->req.n + o.choice;
            choice_acc *a = &j->acc[index];
            a->n_tokens += o.token >= 0;
            if (o.token >= 0 && j->t_first == 0) j->t_first = snug_now_seconds();
            a->finish = o.finish;
            a->stop_index = o.stop_index;
            if (stream) {
                put_chunk(j, index, &o, j->tmp);
            } else {
                if (j->req.logprobs >= 0 && o.token >= 0) add_logprobs(j, a->lp, a->text_offset, &o);
                snug_strbuf_put(&a->text, j->tmp, o.n_text);
                a->text_offset += (int64_t)o.n_text;
            }
            n++;
        }
    }
    return n;
}

/* True when one of j's choices ended without a reason of its own (cut by
 * an abort, or never started). */
static bool ended_short(const openai_job *j)
{
    for (int k = 0; k < j->n_prompts * j->req.n; k++)
        if (j->acc[k].finish == SNUG_FINISH_ABORT || j->acc[k].finish == SNUG_FINISH_NONE) return true;
    return false;
}

/* True when the engine failed and took one of j's choices with it; choices
 * that finished before are answered as they are. */
static bool job_failed(openai_job *j) { return snug_engine_failed(j->srv->e) && ended_short(j); }

/* True when the server's stop cut one of j's choices. */
static bool job_cut(openai_job *j) { return atomic_load(&j->srv->stopping) && ended_short(j); }

static bool all_done(openai_job *j)
{
    for (int i = 0; i < j->n_prompts; i++)
        if (!snug_engine_done(j->srv->e, &j->reqs[i])) return false;
    return true;
}

/* Waits a little for j's next output; cancels j when the server stops. */
static void wait_some(openai_job *j, double s)
{
    for (int i = 0; i < j->n_prompts; i++)
        if (!snug_engine_done(j->srv->e, &j->reqs[i])) {
            snug_engine_wait(j->srv->e, &j->reqs[i], s);
            break;
        }
    if (atomic_load(&j->srv->stopping))
        for (int i = 0; i < j->n_prompts; i++) snug_engine_cancel(j->srv->e, &j->reqs[i]);
}

/* libmicrohttpd asks for the next bytes of a stream. */
static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    openai_job *j = cls;
    for (;;) {
        if (j->pending.failed) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (j->sent < j->pending.len) {
            size_t n = SNUG_MIN(max, j->pending.len - j->sent);
            memcpy(buf, j->pending.p + j->sent, n);
            j->sent += n;
            j->t_sent = snug_now_seconds();
            return (ssize_t)n;
        }
        snug_strbuf_clear(&j->pending);
        j->sent = 0;
        if (j->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        if (take_outputs(j, true) > 0) continue;
        bool anthropic = j->req.dialect == SNUG_API_ANTHROPIC, responses = j->req.dialect == SNUG_API_RESPONSES;
        if (all_done(j) && job_failed(j)) { /* what was sent is all there is */
            if (j->failed_sent) return MHD_CONTENT_READER_END_WITH_ERROR;
            const char *why = snug_engine_error(j->srv->e);
            if (anthropic) {
                anthropic_stream_error(&j->pending, "api_error", why);
            } else if (responses) {
                responses_stream_error(&j->pending, &j->acc[0].items, "engine_failed", why);
            } else {
                snug_strbuf_printf(&j->pending, "data: {\"error\":{\"message\":");
                snug_strbuf_json_string(&j->pending, why, strlen(why));
                snug_strbuf_printf(&j->pending, ",\"type\":\"server_error\",\"param\":null,"
                                   "\"code\":\"engine_failed\"}}\n\n");
            }
            j->failed_sent = true;
            continue;
        }
        if (all_done(j) && job_cut(j)) { /* the server stopped before it ended */
            static const char cut[] = "the server is shutting down: the request was cut before it ended";
            if (anthropic)
                anthropic_stream_error(&j->pending, "overloaded_error", cut);
            else if (responses)
                responses_stream_error(&j->pending, &j->acc[0].items, "server_shutdown", cut);
            else
                snug_strbuf_printf(&j->pending, "data: {\"error\":{\"message\":\"%s\",\"type\":\"server_error\","
                                   "\"param\":null,\"code\":\"server_shutdown\"}}\n\n", cut);
            j->ended = true;
            continue;
        }
        if (all_done(j) && responses) { /* the calls, then the whole response */
            json_t *calls = NULL;
            responses_reply r = responses_of(j, false, &calls, &j->pending);
            if (calls) responses_stream_calls(&j->pending, &j->acc[0].items, &r);
            responses_stream_end(&j->pending, &j->acc[0].items, &r);
            json_decref(calls);
            j->ended = true;
            continue;
        }
        if (all_done(j) && anthropic) {
            anthropic_end e = end_of(j, 0, j->acc[0].blocks.calls);
            anthropic_usage u = usage_of(j);
            anthropic_stream_end(&j->pending, &j->acc[0].blocks, &e, &u);
            j->ended = true;
            continue;
        }
        if (all_done(j)) {
            if (j->req.include_usage) {
                snug_strbuf_printf(&j->pending, "data: ");
                put_head(j, &j->pending, true);
                snug_strbuf_printf(&j->pending, ",\"choices\":[],");
                put_usage(j, &j->pending);
                snug_strbuf_printf(&j->pending, "}\n\n");
            }
            snug_strbuf_printf(&j->pending, "data: [DONE]\n\n");
            j->ended = true;
            continue;
        }
        wait_some(j, 0.5);
        double now = snug_now_seconds();
        if (j->t_sent == 0) j->t_sent = now;
        if (now - j->t_sent >= KEEPALIVE_SECONDS) {
            if (anthropic) anthropic_stream_ping(&j->pending);
            else snug_strbuf_printf(&j->pending, ": keep-alive\n\n");
        }
    }
}

enum MHD_Result openai_handle(snug_server *s, struct MHD_Connection *c, http_req *h,
                              snug_api_kind kind)
{
    const snug_api_limits *lim = &s->limits; /* made at start (server.c) */
    snug_api_dialect d = kind == SNUG_API_MESSAGES || kind == SNUG_API_MESSAGES_COUNT ? SNUG_API_ANTHROPIC
                         : kind == SNUG_API_RESPONSES_CREATE                         ? SNUG_API_RESPONSES
                                                                                     : SNUG_API_OPENAI;
    openai_job *j = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *j, NULL);
    if (!j) return http_overloaded_in(c, d, "no memory for a job's record");
    j->srv = s;
    atomic_fetch_add(&s->active, 1);
    h->job = j; /* freed when the request completes, whatever happens here */
    snug_api_error ae = {0};
    if (snug_api_parse(kind, h->body ? h->body : "", h->len, lim, &j->req, &ae) != SNUG_OK) {
        if (ae.status == 503) http_log_overloaded(ae.detail);
        return http_error_in(c, d, (unsigned)ae.status, ae.type, ae.param, ae.code, "%s", ae.message);
    }
    kind = j->req.kind; /* (Anthropic's: a chat) */
    if (snug_engine_n_labels(s->e) > 0 && !j->req.count_only)
        return http_error_in(c, d, 400, "invalid_request_error", NULL, "model_does_not_generate",
                             "the model is a sequence classifier (a reranker's head): it scores documents at "
                             "POST /v1/rerank and does not generate text");
    if (j->req.model && strcmp(j->req.model, s->o.model_name) != 0)
        return http_error_in(c, d, 404, "invalid_request_error", "model", "model_not_found",
                             "The model `%s` does not exist; this server serves `%s`", j->req.model,
                             s->o.model_name);
    j->n_prompts = kind == SNUG_API_CHAT ? 1 : j->req.n_prompts;
    int n_choices = j->n_prompts * j->req.n;
    bool ok = true;
    j->reqs = take((size_t)j->n_prompts * sizeof *j->reqs, &ok);
    j->submitted = take((size_t)j->n_prompts * sizeof *j->submitted, &ok);
    j->ids = take((size_t)j->n_prompts * sizeof *j->ids, &ok);
    j->acc = take((size_t)n_choices * sizeof *j->acc, &ok);
    j->tmp_cap = snug_engine_text_bytes(s->e);
    j->tmp = take(j->tmp_cap, &ok);
    bool echo = kind == SNUG_API_COMPLETIONS && j->req.echo;
    if (echo) {
        j->echo_text = take((size_t)j->n_prompts * sizeof *j->echo_text, &ok);
        j->echo_len = take((size_t)j->n_prompts * sizeof *j->echo_len, &ok);
        if (j->req.logprobs >= 0) j->plp = take((size_t)j->n_prompts * sizeof *j->plp, &ok);
    }
    snug_error err = {0};
    if (!ok) return fail(c, d, SNUG_NOMEM, &err, NULL);
    j->created = (int64_t)time(NULL);
    char param[64];
    snprintf(param, sizeof param, "%s", kind == SNUG_API_CHAT ? "messages" : "prompt");
    for (int i = 0; i < j->n_prompts; i++) {
        snug_request *r = &j->reqs[i];
        snug_status st = prompt_ids(j, i, param, &err);
        if (st == SNUG_OK && echo) st = echo_prompt(j, i, &err);
        if (st != SNUG_OK) return fail(c, d, st, &err, param);
        if (j->req.count_only) { /* count_tokens: the prompt's tokens, nothing generated */
            snug_strbuf b = {0};
            snug_strbuf_printf(&b, "{\"input_tokens\":%lld}", (long long)r->n_prompt);
            return http_send(c, MHD_HTTP_OK, &b, "application/json");
        }
        r->sampling = j->req.sampling;
        r->stop = j->req.stop;
        r->stop.max_tokens = j->req.max_tokens ? j->req.max_tokens
                           : kind == SNUG_API_COMPLETIONS ? COMPLETIONS_MAX_TOKENS_DEFAULT : 0;
        if (kind == SNUG_API_COMPLETIONS && !j->req.max_tokens)
            r->stop.max_tokens = (int32_t)SNUG_MIN((int64_t)r->stop.max_tokens,
                                                   SNUG_MAX(1, lim->max_model_len - r->n_prompt));
        r->n = j->req.n;
        r->cache_salt = j->req.cache_salt ? snug_engine_salt(j->req.cache_salt, j->req.cache_salt_len) : 0;
        r->no_speculation = j->req.no_speculation;
        r->spec_max = j->req.spec_max;
        r->logprobs = j->req.logprobs >= 0;
        r->top_logprobs = SNUG_MAX(0, j->req.logprobs);
        r->grammar = j->req.grammar;
        r->keep_special = tools_on(j) || reasoning_on(j); /* markers and tags may be special tokens */
        if (kind == SNUG_API_CHAT && j->req.thinking_token_budget >= 0) {
            if (s->think_tags.n_force == 0)
                return http_error_in(c, d, 400, "invalid_request_error", "thinking_token_budget", NULL,
                                     "thinking_token_budget: the model's chat template shows no think block "
                                     "(%s), so there is no reasoning to budget", s->think_format
                                         ? "its tags do not encode into a few tokens" : "no </think>");
            r->think = s->think_tags;
            r->think.budget = j->req.thinking_token_budget;
            r->think.inside = j->think_inside;
        }
        for (int k = 0; k < j->req.n; k++) snug_reasoning_stream_init(&j->acc[i * j->req.n + k].think, j->think_inside);
        st = snug_engine_submit(s->e, r, &err);
        if (st == SNUG_BUSY && snug_engine_failed(s->e)) /* it failed since the check above */
            return http_error_in(c, d, 500, "server_error", NULL, "engine_failed", "%s", snug_engine_error(s->e));
        if (st != SNUG_OK) return fail(c, d, st, &err, param);
        j->submitted[i] = true;
        j->prompt_tokens += r->n_prompt;
    }
    snprintf(j->id, sizeof j->id, "%s%016llx",
             d == SNUG_API_ANTHROPIC ? "msg_" : d == SNUG_API_RESPONSES ? "resp_" : kind == SNUG_API_CHAT ? "chatcmpl-" : "cmpl-",
             (unsigned long long)((j->reqs[0].id + s->id_key) * 0x9E3779B97F4A7C15ull ^ s->id_key >> 17));
    if (j->req.stream) {
        if (d == SNUG_API_ANTHROPIC) {
            anthropic_usage u = usage_of(j);
            anthropic_stream_start(&j->pending, j->id, s->o.model_name, &u);
        } else if (d == SNUG_API_RESPONSES) {
            json_t *none = NULL;
            responses_reply r = responses_of(j, true, &none, &j->pending);
            responses_stream_start(&j->pending, &j->acc[0].items, &r);
        }
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
                                                                      read_stream, j, NULL);
        if (!resp) return fail(c, d, SNUG_NOMEM, &err, NULL);
        http_add_headers(resp, c);
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    while (!all_done(j)) {
        if (take_outputs(j, false) > 0) continue;
        wait_some(j, 0.25);
        if (http_client_gone(c)) /* nobody to answer: stop generating now */
            for (int i = 0; i < j->n_prompts; i++) snug_engine_cancel(s->e, &j->reqs[i]);
    }
    take_outputs(j, false);
    if (job_failed(j))
        return http_error_in(c, d, 500, "server_error", NULL, "engine_failed", "%s", snug_engine_error(s->e));
    if (job_cut(j))
        return http_error_in(c, d, 503, "server_error", NULL, "server_shutdown",
                             "the server is shutting down: the request was cut before it ended");
    for (int k = 0; k < n_choices; k++)
        if (j->acc[k].text.failed || j->acc[k].lp[0].failed || j->acc[k].lp[1].failed ||
            j->acc[k].lp[2].failed || j->acc[k].lp[3].failed)
            return fail(c, d, SNUG_NOMEM, &err, NULL);
    snug_strbuf b = {0};
    if (d == SNUG_API_ANTHROPIC) put_message(j, &b);
    else if (d == SNUG_API_RESPONSES) put_response(j, &b);
    else put_answer(j, &b);
    return http_send(c, MHD_HTTP_OK, &b, "application/json");
}
