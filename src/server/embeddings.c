/*
 * embeddings.c: the endpoints of prompt-only requests (server_impl.h).
 * POST /v1/embeddings: each input tokenized (or taken as ids), submitted
 * as a request that pools the model's final norm's output (engine.h: the
 * last token's, the mean or the first token's, as the model's
 * configuration or --pooling says), every input of a request in the same
 * engine beside generating requests; the vectors answered as OpenAI's list
 * of embeddings, floats or base64. POST /v1/rerank (and /rerank): each
 * document put with the query into a reranker's prompt (Qwen3-Reranker's:
 * is the document what the query asks for, yes or no?), the raw logits of
 * "yes" and "no" after it taken (a score request), the relevance the
 * probability of yes between the two; answered as Jina's and Cohere's
 * rerank results, most relevant first.
 */
#include "server_impl.h"

#include "base/mem.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* One embeddings or rerank request in flight. */
typedef struct embed_job {
    snug_api_request req;
    snug_request *reqs;            /* [n] */
    bool *submitted;
    int32_t **ids;                 /* [n] each input's ids (owned) */
    float *vectors;                /* [n * width] embeddings, a rerank's yes and no, or a
                                    * classifier's scores */
    float *hidden;                 /* a classifier's rerank: [n * hidden] the vectors scored */
    int32_t width;
    int n;
    int n_pooled;                  /* inputs whose vector is in */
    int64_t tokens;
} embed_job;

static void job_free(snug_server *s, embed_job *j)
{
    for (int i = 0; i < j->n; i++) {
        if (j->submitted && j->submitted[i]) snug_engine_release(s->e, &j->reqs[i]);
        if (j->ids) snug_mem_free(j->ids[i]);
    }
    snug_mem_free(j->reqs);
    snug_mem_free(j->submitted);
    snug_mem_free(j->ids);
    snug_mem_free(j->vectors);
    snug_mem_free(j->hidden);
    snug_api_request_free(&j->req);
}

/* n ids (text of len bytes tokenized as a completion's prompt is, the
 * tokenizer's special tokens around it, when ids is NULL) as input i's,
 * into j->ids[i]. */
static snug_status take_ids(snug_server *s, embed_job *j, int i, const char *text, size_t len, const int32_t *ids,
                            size_t n, snug_error *err)
{
    snug_tok_encoder *enc = NULL;
    snug_status st = SNUG_OK;
    if (!ids) {
        const snug_tokenizer *tok = snug_engine_tokenizer(s->e);
        snug_tok_encode_opts eo = {.add_special = true, .parse_special = true};
        if (!tok) return snug_errorf(err, SNUG_INVALID, "input[%d]: the model has no tokenizer: send token ids", i);
        st = snug_tok_encoder_create(tok, &enc, err);
        if (st == SNUG_OK) st = snug_tok_encode(enc, text, len, &eo, &ids, &n, err);
        if (st == SNUG_OK && n == 0) st = snug_errorf(err, SNUG_INVALID, "input[%d]: no tokens", i);
    }
    if (st == SNUG_OK) j->ids[i] = snug_mem_alloc(SNUG_MEM_OTHER, n * sizeof(int32_t), err);
    if (st == SNUG_OK && !j->ids[i]) st = SNUG_NOMEM;
    if (st == SNUG_OK) {
        memcpy(j->ids[i], ids, n * sizeof(int32_t));
        j->reqs[i].prompt = j->ids[i];
        j->reqs[i].n_prompt = (int64_t)n;
        j->tokens += (int64_t)n;
    }
    snug_tok_encoder_free(enc);
    return st;
}

/* Input i's ids: its text tokenized, or its ids. */
static snug_status input_ids(snug_server *s, embed_job *j, int i, snug_error *err)
{
    const snug_api_prompt *p = &j->req.prompts[i];
    return take_ids(s, j, i, p->text, p->text_len, p->ids, (size_t)p->n_ids, err);
}

/* Waits until every input's vector is in (or the engine failed, the
 * server stops, the client left: then each one is cancelled). */
static void wait_all(snug_server *s, struct MHD_Connection *c, embed_job *j)
{
    char text[8];
    for (int i = 0; i < j->n; i++) {
        snug_output o;
        while (!snug_engine_done(s->e, &j->reqs[i])) {
            if (snug_engine_next(s->e, &j->reqs[i], &o, text, sizeof text)) {
                j->n_pooled += o.finish == SNUG_FINISH_POOLED;
                continue;
            }
            snug_engine_wait(s->e, &j->reqs[i], 0.25);
            if (atomic_load(&s->stopping) || http_client_gone(c))
                for (int k = 0; k < j->n; k++) snug_engine_cancel(s->e, &j->reqs[k]);
        }
        while (snug_engine_next(s->e, &j->reqs[i], &o, text, sizeof text)) j->n_pooled += o.finish == SNUG_FINISH_POOLED;
    }
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The n floats at v as base64 of their little-endian float32 bytes. */
static void put_base64(snug_strbuf *b, const float *v, int32_t n)
{
    const unsigned char *p = (const unsigned char *)v; /* (x86: little-endian already) */
    size_t len = (size_t)n * sizeof(float);
    for (size_t i = 0; i < len; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < len ? p[i + 2] : 0);
        char q[4] = {B64[w >> 18 & 63], B64[w >> 12 & 63], i + 1 < len ? B64[w >> 6 & 63] : '=',
                     i + 2 < len ? B64[w & 63] : '='};
        snug_strbuf_put(b, q, 4);
    }
}

/* The answer: OpenAI's list of embeddings, and usage. */
static void put_list(snug_server *s, const embed_job *j, int32_t h, snug_strbuf *b)
{
    snug_strbuf_printf(b, "{\"object\":\"list\",\"data\":[");
    for (int i = 0; i < j->n; i++) {
        const float *v = j->vectors + (size_t)i * (size_t)h;
        snug_strbuf_printf(b, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
        if (j->req.base64) {
            snug_strbuf_put(b, "\"", 1);
            put_base64(b, v, h);
            snug_strbuf_put(b, "\"", 1);
        } else {
            snug_strbuf_put(b, "[", 1);
            for (int32_t k = 0; k < h; k++) snug_strbuf_printf(b, "%s%.9g", k ? "," : "", (double)v[k]);
            snug_strbuf_put(b, "]", 1);
        }
        snug_strbuf_put(b, "}", 1);
    }
    snug_strbuf_printf(b, "],\"model\":\"");
    snug_strbuf_json(b, s->o.model_name, strlen(s->o.model_name));
    snug_strbuf_printf(b, "\",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}", (long long)j->tokens,
                       (long long)j->tokens);
}

/* Answers a failed step (as openai.c's completions are answered); param
 * names the list the inputs came in. */
static enum MHD_Result failed(struct MHD_Connection *c, snug_status st, const snug_error *err, const char *param)
{
    if (st == SNUG_NOMEM) return http_overloaded(c, err->msg[0] ? err->msg : "no memory for an embeddings job");
    if (st == SNUG_BUSY) return http_error(c, 429, "server_error", NULL, "queue_full", "%s", err->msg);
    bool long_one = strncmp(err->msg, "context_length_exceeded: ", 25) == 0;
    return http_error(c, 400, "invalid_request_error", param, long_one ? "context_length_exceeded" : NULL, "%s",
                      err->msg + (long_one ? 25 : 0));
}


/* ---- rerank ------------------------------------------------------------------ */

/* Qwen3-Reranker's prompt around an instruction, a query and a document. */
static const char RERANK_PREFIX[] =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
static const char RERANK_SUFFIX[] = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
static const char RERANK_INSTRUCTION[] = "Given a web search query, retrieve relevant passages that answer the query";

/* The one id text encodes into, or -1. */
static int32_t one_token(const snug_tokenizer *tok, const char *text)
{
    snug_tok_encoder *enc = NULL;
    const int32_t *ids = NULL;
    size_t n = 0;
    snug_tok_encode_opts eo = {0};
    int32_t id = -1;
    if (tok && snug_tok_encoder_create(tok, &enc, NULL) == SNUG_OK &&
        snug_tok_encode(enc, text, strlen(text), &eo, &ids, &n, NULL) == SNUG_OK && n == 1)
        id = ids[0];
    snug_tok_encoder_free(enc);
    return id;
}

snug_status rerank_setup(snug_server *s, snug_error *err)
{
    const snug_tokenizer *tok = snug_engine_tokenizer(s->e);
    const char *answers[2] = {s->o.rerank_yes ? s->o.rerank_yes : "yes", s->o.rerank_no ? s->o.rerank_no : "no"};
    for (int k = 0; k < 2; k++) {
        s->rerank_ids[k] = one_token(tok, answers[k]);
        if (s->rerank_ids[k] < 0)
            return snug_errorf(err, SNUG_INVALID, "--rerank: the answer '%s' is not one token of the model's "
                               "tokenizer (a reranker scores with the logits of a yes and a no token; "
                               "--rerank-tokens YES,NO names others)", answers[k]);
    }
    return SNUG_OK;
}

/* Document i's prompt, tokenized, into j->ids[i]. */
static snug_status rerank_ids(snug_server *s, embed_job *j, int i, snug_error *err)
{
    const snug_api_request *q = &j->req;
    const char *instr = q->instruction ? q->instruction : RERANK_INSTRUCTION;
    snug_strbuf text = {0};
    snug_strbuf_printf(&text, "%s<Instruct>: %s\n<Query>: ", RERANK_PREFIX, instr);
    snug_strbuf_put(&text, q->query, q->query_len);
    snug_strbuf_printf(&text, "\n<Document>: ");
    snug_strbuf_put(&text, q->prompts[i].text, q->prompts[i].text_len);
    snug_strbuf_printf(&text, "%s", RERANK_SUFFIX);
    snug_status st = text.failed ? snug_errorf(err, SNUG_NOMEM, "no memory for a rerank prompt")
                                 : take_ids(s, j, i, text.p, text.len, NULL, 0, err);
    snug_strbuf_free(&text);
    return st;
}

/* A document's relevance from its scores (width of them): the probability
 * of yes between yes and no (their raw logits), a classifier's one label's
 * sigmoid, or of its several labels' the probability of the second (label
 * 1: relevant). */
static double relevance(const float *s, int32_t width, bool classifier)
{
    if (!classifier) return 1.0 / (1.0 + exp((double)s[1] - (double)s[0]));
    if (width == 1) return 1.0 / (1.0 + exp(-(double)s[0]));
    double max = s[0], sum = 0;
    for (int32_t k = 1; k < width; k++) max = fmax(max, s[k]);
    for (int32_t k = 0; k < width; k++) sum += exp(s[k] - max);
    return exp(s[1] - max) / sum;
}

/* A rerank's answer (Jina's and Cohere's shape, as vLLM and llama-server
 * answer): the top_n documents, most relevant first (ties in their order),
 * each with its index, relevance_score and (return_documents) its text. */
static void put_results(snug_server *s, const embed_job *j, snug_strbuf *b)
{
    bool classifier = snug_engine_n_labels(s->e) > 0;
    int *order = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j->n * sizeof *order, NULL);
    if (!order) {
        b->failed = true;
        return;
    }
    for (int i = 0; i < j->n; i++) order[i] = i;
    for (int i = 1; i < j->n; i++) { /* insertion: stable, and n is at most max_inputs */
        int x = order[i], k = i;
        double rx = relevance(j->vectors + (size_t)x * (size_t)j->width, j->width, classifier);
        while (k > 0 && relevance(j->vectors + (size_t)order[k - 1] * (size_t)j->width, j->width, classifier) < rx) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = x;
    }
    snug_strbuf_printf(b, "{\"id\":\"rerank-%016llx\",\"model\":\"", (unsigned long long)(j->reqs[0].id ^ s->id_key));
    snug_strbuf_json(b, s->o.model_name, strlen(s->o.model_name));
    snug_strbuf_printf(b, "\",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld},\"results\":[",
                       (long long)j->tokens, (long long)j->tokens);
    for (int r = 0; r < j->req.top_n; r++) {
        int i = order[r];
        snug_strbuf_printf(b, "%s{\"index\":%d,\"relevance_score\":%.9g", r ? "," : "", i,
                           relevance(j->vectors + (size_t)i * (size_t)j->width, j->width, classifier));
        if (j->req.return_documents) {
            snug_strbuf_printf(b, ",\"document\":{\"text\":\"");
            snug_strbuf_json(b, j->req.prompts[i].text, j->req.prompts[i].text_len);
            snug_strbuf_printf(b, "\"}");
        }
        snug_strbuf_put(b, "}", 1);
    }
    snug_strbuf_printf(b, "]}");
    snug_mem_free(order);
}

/* One input's request: an embedding (its vector, pooled as the model or
 * --pooling says: the mean and the first token need every token computed,
 * so they get a salt no cached block has), or a rerank's score of yes and
 * no. */
static void setup_request(snug_server *s, embed_job *j, int i, bool rerank, int32_t width)
{
    snug_request *r = &j->reqs[i];
    r->n = 1;
    snug_sampling_params_default(&r->sampling);
    snug_stop_params_default(&r->stop);
    if (rerank && j->hidden) { /* a classifier: its head's scores of the last token */
        r->pooling = SNUG_POOL_LAST;
        r->embedding = j->hidden + (size_t)i * (size_t)snug_engine_hidden_size(s->e);
        r->classify = true;
        r->scores = j->vectors + (size_t)i * (size_t)width;
        return;
    }
    if (rerank) {
        r->score_ids = s->rerank_ids;
        r->n_score_ids = 2;
        r->scores = j->vectors + (size_t)i * 2;
        return;
    }
    r->pooling = s->o.pooling != SNUG_POOL_NONE ? s->o.pooling : SNUG_POOL_LAST;
    r->normalize = s->o.normalize;
    r->embedding = j->vectors + (size_t)i * (size_t)width;
    if (r->pooling != SNUG_POOL_LAST)
        r->cache_salt = (atomic_fetch_add(&s->n_request_ids, 1) * 0x9E3779B97F4A7C15ull ^ s->id_key) | 1;
}

/* POST /v1/embeddings (rerank false) or /v1/rerank: the body parsed, one
 * request per input submitted, all waited for, the answer. */
static enum MHD_Result prompt_only(snug_server *s, struct MHD_Connection *c, http_req *h, bool rerank)
{
    if (!rerank && !s->o.embeddings)
        return http_error(c, 400, "invalid_request_error", NULL, "embeddings_disabled",
                          "this server does not embed: its model is not an embedding model (no "
                          "sentence-transformers pooling in its directory); start it with --embeddings to embed "
                          "with a chat model");
    int32_t labels = snug_engine_n_labels(s->e);
    if (rerank && !s->o.rerank && labels == 0)
        return http_error(c, 400, "invalid_request_error", NULL, "rerank_disabled",
                          "this server does not rerank: its model is no reranker; start a reranker that answers yes "
                          "or no (Qwen3-Reranker) with --rerank; a sequence classifier (*ForSequenceClassification) "
                          "reranks as it is");
    embed_job j = {0};
    snug_api_error ae = {0};
    snug_error err = {0};
    enum MHD_Result ret;
    int32_t width = rerank ? (labels > 0 ? labels : 2) : snug_engine_hidden_size(s->e);
    snug_api_kind kind = rerank ? SNUG_API_RERANK : SNUG_API_EMBEDDINGS;
    if (snug_api_parse(kind, h->body ? h->body : "", h->len, &s->limits, &j.req, &ae) != SNUG_OK) {
        if (ae.status == 503) http_log_overloaded(ae.detail);
        return http_error(c, (unsigned)ae.status, ae.type, ae.param, ae.code, "%s", ae.message);
    }
    if (j.req.model && strcmp(j.req.model, s->o.model_name) != 0) {
        ret = http_error(c, 404, "invalid_request_error", "model", "model_not_found",
                         "The model `%s` does not exist; this server serves `%s`", j.req.model, s->o.model_name);
        goto done;
    }
    if (j.req.dimensions && j.req.dimensions != width) {
        ret = http_error(c, 400, "invalid_request_error", "dimensions", NULL, "dimensions: the model's embeddings "
                         "have %d dimensions and it does not declare shortened ones (matryoshka): send %d or leave "
                         "it out", width, width);
        goto done;
    }
    j.n = j.req.n_prompts;
    j.reqs = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j.n * sizeof *j.reqs, &err);
    j.submitted = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j.n * sizeof *j.submitted, &err);
    j.ids = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j.n * sizeof *j.ids, &err);
    j.vectors = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j.n * (size_t)width * sizeof(float), &err);
    j.width = width;
    bool classify = rerank && labels > 0;
    if (classify)
        j.hidden = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j.n * (size_t)snug_engine_hidden_size(s->e) * sizeof(float), &err);
    snug_status st = j.reqs && j.submitted && j.ids && j.vectors && (!classify || j.hidden) ? SNUG_OK : SNUG_NOMEM;
    for (int i = 0; st == SNUG_OK && i < j.n; i++) {
        st = rerank ? rerank_ids(s, &j, i, &err) : input_ids(s, &j, i, &err);
        if (st != SNUG_OK) break;
        setup_request(s, &j, i, rerank, width);
        st = snug_engine_submit(s->e, &j.reqs[i], &err);
        if (st == SNUG_OK) j.submitted[i] = true;
    }
    if (st == SNUG_BUSY && snug_engine_failed(s->e)) {
        ret = http_error(c, 500, "server_error", NULL, "engine_failed", "%s", snug_engine_error(s->e));
        goto done;
    }
    if (st != SNUG_OK) {
        ret = failed(c, st, &err, rerank ? "documents" : "input");
        goto done;
    }
    wait_all(s, c, &j);
    h->prompt_tokens = j.tokens; /* (for the access log) */
    if (j.n_pooled < j.n) st = SNUG_INTERNAL;
    if (st != SNUG_OK && snug_engine_failed(s->e)) {
        ret = http_error(c, 500, "server_error", NULL, "engine_failed", "%s", snug_engine_error(s->e));
    } else if (st != SNUG_OK) {
        ret = http_error(c, 503, "server_error", NULL, "server_shutdown",
                         "the server is shutting down: the request was cut before it ended");
    } else {
        snug_strbuf b = {0};
        if (rerank) put_results(s, &j, &b);
        else put_list(s, &j, width, &b);
        ret = http_send(c, MHD_HTTP_OK, &b, "application/json");
    }
done:
    job_free(s, &j);
    return ret;
}

enum MHD_Result embeddings_handle(snug_server *s, struct MHD_Connection *c, http_req *h)
{
    return prompt_only(s, c, h, false);
}

enum MHD_Result rerank_handle(snug_server *s, struct MHD_Connection *c, http_req *h)
{
    return prompt_only(s, c, h, true);
}
