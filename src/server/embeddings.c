/*
 * embeddings.c: POST /v1/embeddings (server_impl.h): each input tokenized
 * (or taken as ids), submitted as a prompt-only request that pools the
 * model's final norm's output (engine.h: the last token's, the mean or
 * the first token's, as the model's configuration or --pooling says),
 * every input of a request in the same engine beside generating requests;
 * the vectors answered as OpenAI's list of embeddings, floats or base64.
 */
#include "server_impl.h"

#include "base/mem.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <string.h>

/* One embeddings request in flight. */
typedef struct embed_job {
    snug_api_request req;
    snug_request *reqs;            /* [n] */
    bool *submitted;
    int32_t **ids;                 /* [n] each input's ids (owned) */
    float *vectors;                /* [n * hidden] */
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
    snug_api_request_free(&j->req);
}

/* Input i's ids into j->ids[i]: its text tokenized as a completion's prompt
 * is (the tokenizer's special tokens around it), or its ids copied. */
static snug_status input_ids(snug_server *s, embed_job *j, int i, snug_error *err)
{
    const snug_api_prompt *p = &j->req.prompts[i];
    const int32_t *ids = p->ids;
    size_t n = (size_t)p->n_ids;
    snug_tok_encoder *enc = NULL;
    snug_status st = SNUG_OK;
    if (p->text) {
        const snug_tokenizer *tok = snug_engine_tokenizer(s->e);
        snug_tok_encode_opts eo = {.add_special = true, .parse_special = true};
        if (!tok) return snug_errorf(err, SNUG_INVALID, "input[%d]: the model has no tokenizer: send token ids", i);
        st = snug_tok_encoder_create(tok, &enc, err);
        if (st == SNUG_OK) st = snug_tok_encode(enc, p->text, p->text_len, &eo, &ids, &n, err);
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

/* Answers a failed step (as openai.c's completions are answered). */
static enum MHD_Result failed(struct MHD_Connection *c, snug_status st, const snug_error *err)
{
    if (st == SNUG_NOMEM) return http_overloaded(c, err->msg[0] ? err->msg : "no memory for an embeddings job");
    if (st == SNUG_BUSY) return http_error(c, 429, "server_error", NULL, "queue_full", "%s", err->msg);
    bool long_one = strncmp(err->msg, "context_length_exceeded: ", 25) == 0;
    return http_error(c, 400, "invalid_request_error", "input", long_one ? "context_length_exceeded" : NULL, "%s",
                      err->msg + (long_one ? 25 : 0));
}

enum MHD_Result embeddings_handle(snug_server *s, struct MHD_Connection *c, http_req *h)
{
    if (!s->o.embeddings)
        return http_error(c, 400, "invalid_request_error", NULL, "embeddings_disabled",
                          "this server does not embed: its model is not an embedding model (no "
                          "sentence-transformers pooling in its directory); start it with --embeddings to embed "
                          "with a chat model");
    embed_job j = {0};
    snug_api_error ae = {0};
    snug_error err = {0};
    enum MHD_Result ret;
    int32_t hidden = snug_engine_hidden_size(s->e);
    uint64_t salt = 0;
    if (snug_api_parse(SNUG_API_EMBEDDINGS, h->body ? h->body : "", h->len, &s->limits, &j.req, &ae) != SNUG_OK) {
        if (ae.status == 503) http_log_overloaded(ae.detail);
        return http_error(c, (unsigned)ae.status, ae.type, ae.param, ae.code, "%s", ae.message);
    }
    if (j.req.model && strcmp(j.req.model, s->o.model_name) != 0) {
        ret = http_error(c, 404, "invalid_request_error", "model", "model_not_found",
                         "The model `%s` does not exist; this server serves `%s`", j.req.model, s->o.model_name);
        goto done;
    }
    if (j.req.dimensions && j.req.dimensions != hidden) {
        ret = http_error(c, 400, "invalid_request_error", "dimensions", NULL, "dimensions: the model's embeddings "
                         "have %d dimensions and it does not declare shortened ones (matryoshka): send %d or leave "
                         "it out", hidden, hidden);
        goto done;
    }
    j.n = j.req.n_prompts;
    j.reqs = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j.n * sizeof *j.reqs, &err);
    j.submitted = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j.n * sizeof *j.submitted, &err);
    j.ids = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j.n * sizeof *j.ids, &err);
    j.vectors = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)j.n * (size_t)hidden * sizeof(float), &err);
    snug_status st = j.reqs && j.submitted && j.ids && j.vectors ? SNUG_OK : SNUG_NOMEM;
    snug_pooling pool = s->o.pooling != SNUG_POOL_NONE ? s->o.pooling : SNUG_POOL_LAST;
    for (int i = 0; st == SNUG_OK && i < j.n; i++) {
        snug_request *r = &j.reqs[i];
        st = input_ids(s, &j, i, &err);
        if (st != SNUG_OK) break;
        r->n = 1;
        snug_sampling_params_default(&r->sampling);
        snug_stop_params_default(&r->stop);
        r->pooling = pool;
        r->normalize = s->o.normalize;
        r->embedding = j.vectors + (size_t)i * (size_t)hidden;
        /* the mean and the first token need every token computed: a salt no cached block has */
        if (pool != SNUG_POOL_LAST) {
            salt = atomic_fetch_add(&s->n_request_ids, 1) * 0x9E3779B97F4A7C15ull ^ s->id_key;
            r->cache_salt = salt | 1;
        }
        st = snug_engine_submit(s->e, r, &err);
        if (st == SNUG_OK) j.submitted[i] = true;
    }
    if (st == SNUG_BUSY && snug_engine_failed(s->e)) {
        ret = http_error(c, 500, "server_error", NULL, "engine_failed", "%s", snug_engine_error(s->e));
        goto done;
    }
    if (st != SNUG_OK) {
        ret = failed(c, st, &err);
        goto done;
    }
    wait_all(s, c, &j);
    if (j.n_pooled < j.n) st = SNUG_INTERNAL;
    if (st != SNUG_OK && snug_engine_failed(s->e)) {
        ret = http_error(c, 500, "server_error", NULL, "engine_failed", "%s", snug_engine_error(s->e));
    } else if (st != SNUG_OK) {
        ret = http_error(c, 503, "server_error", NULL, "server_shutdown",
                         "the server is shutting down: the request was cut before it ended");
    } else {
        snug_strbuf b = {0};
        put_list(s, &j, hidden, &b);
        ret = http_send(c, MHD_HTTP_OK, &b, "application/json");
    }
done:
    job_free(s, &j);
    return ret;
}
