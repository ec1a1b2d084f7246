/*
 * server.c: libmicrohttpd's side of the server (server.h): the daemon, the
 * upload of each request into allocator memory, routing, authentication,
 * and the endpoints that are not completions.
 */
#include "server_impl.h"

#include "base/mem.h"
#include "base/json.h"
#include "engine/plan_report.h"
#include "tokenizer/tokenizer.h"

#ifdef SNUG_HAVE_MPI
#define SNUG_HAVE_MPI_BUILD 1
#else
#define SNUG_HAVE_MPI_BUILD 0
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

enum {
    CONNECTIONS_DEFAULT = 32,
    BODY_DEFAULT = 1 << 20,
    POOL_BYTES = 64 * 1024,          /* libmicrohttpd's per-connection pool: headers and all */
    STACK_BYTES = 1 << 20,           /* a connection thread's stack (templates recurse) */
    CONNECTION_OVERHEAD = 16 * 1024, /* its connection struct, socket buffers' bookkeeping */
    PROBE_CONNECTIONS = 8,           /* GET /health, /metrics, /version: never refused */
    UPLOADS_DEFAULT = 8,             /* large bodies streamed to libmicrohttpd at once */
    HEAD_BYTES = 16 * 1024,          /* a request head, at most */
    TARGET_BYTES = 8 * 1024,         /* its target */
    HEADER_FIELDS = 100,             /* its header fields */
    GATE_STACK_BYTES = 256 * 1024    /* the gate thread's stack */
};

static int max_connections(const snug_server_opts *o)
{
    return o->max_connections > 0 ? o->max_connections : CONNECTIONS_DEFAULT;
}

static double or_default(double v, double d) { return v > 0 ? v : d; }

static size_t max_body(const snug_server_opts *o) { return o->max_body_bytes ? o->max_body_bytes : BODY_DEFAULT; }

/* The gate's options for o (the listening socket and the daemon aside). */
static snug_gate_opts gate_opts(const snug_server_opts *o)
{
    int max = max_connections(o);
    return (snug_gate_opts){
        .max_requests = max, .reserved = PROBE_CONNECTIONS, .pool = 4 * max + 64,
        .max_uploads = o->max_uploads > 0 ? o->max_uploads : UPLOADS_DEFAULT,
        .keep_alive_s = or_default(o->keep_alive_s, 5), .header_s = or_default(o->header_timeout_s, 10),
        .body_s = or_default(o->timeout_s, 60), .write_s = or_default(o->timeout_s, 60),
        .min_upload_rate = or_default(o->min_upload_rate, 1024),
        .upload_grace_s = or_default(o->upload_grace_s, 5),
        .limits = {.head_bytes = HEAD_BYTES, .target_bytes = TARGET_BYTES, .fields = HEADER_FIELDS,
                   .body_bytes = o->max_body_bytes ? o->max_body_bytes : BODY_DEFAULT}};
}

size_t snug_server_untracked_bytes(const snug_server_opts *o)
{
    /* libmicrohttpd's connections are the gate's links: admitted ones */
    snug_gate_opts go = gate_opts(o);
    return (size_t)snug_gate_links(&go) * (POOL_BYTES + STACK_BYTES + CONNECTION_OVERHEAD) +
           GATE_STACK_BYTES;
}

size_t snug_server_gate_bytes(const snug_server_opts *o)
{
    snug_gate_opts go = gate_opts(o);
    return snug_gate_bytes(&go);
}

size_t snug_server_tracked_bytes_min(const snug_server_opts *o)
{
    /* the body as it is uploaded (its buffer doubles: the old one and the
     * new held for a moment) and its parse */
    size_t body = max_body(o);
    return body * (2 + SNUG_SERVER_PARSE_BYTES_PER_BYTE) + SNUG_JSON_BYTES_FIXED;
}

size_t snug_server_tracked_bytes_default(const snug_server_opts *o)
{
    /* one largest body and its parse, and every connection's response and
     * token ids besides: the rest wait or get 503 */
    return snug_server_tracked_bytes_min(o) + (size_t)max_connections(o) * (256 * 1024);
}

/* ---- plain endpoints ------------------------------------------------------- */

static void put_endpoint_requests(snug_server *s, snug_strbuf *b);

/* The served model's object, as /v1/models lists it. */
static void put_model(snug_server *s, snug_strbuf *b)
{
    snug_strbuf_printf(b, "{\"id\":\"");
    snug_strbuf_json(b, s->o.model_name, strlen(s->o.model_name));
    snug_strbuf_printf(b, "\",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"snug\","
                       "\"root\":\"", (long long)s->created);
    snug_strbuf_json(b, s->o.model_name, strlen(s->o.model_name));
    snug_strbuf_printf(b, "\",\"max_model_len\":%lld}", (long long)snug_engine_max_model_len(s->e));
}

/* GET /v1/models, and GET /v1/models/ID (id the rest of url, or NULL). */
static enum MHD_Result get_models(snug_server *s, struct MHD_Connection *c, const char *id)
{
    if (id && strcmp(id, s->o.model_name) != 0)
        return http_error(c, 404, "invalid_request_error", "model", "model_not_found",
                          "The model `%s` does not exist; this server serves `%s`", id,
                          s->o.model_name);
    snug_strbuf b = {0};
    if (!id) snug_strbuf_printf(&b, "{\"object\":\"list\",\"data\":[");
    put_model(s, &b);
    if (!id) snug_strbuf_printf(&b, "]}");
    return http_send(c, MHD_HTTP_OK, &b, "application/json");
}

static enum MHD_Result get_health(snug_server *s, struct MHD_Connection *c)
{
    snug_engine_counters k;
    snug_engine_counters_get(s->e, &k);
    snug_strbuf b = {0};
    bool ok = !k.failed && !atomic_load(&s->draining);
    snug_strbuf_printf(&b, "{\"status\":\"%s\"}", k.failed ? "failed" : ok ? "ok" : "draining");
    return http_send(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, &b, "application/json");
}

/* GET /version: what this build is and runs on. */
static enum MHD_Result get_version(snug_server *s, struct MHD_Connection *c)
{
    const snug_plan_report *r = snug_engine_plan(s->e);
    snug_strbuf b = {0};
    const char *commit = s->o.build_commit ? s->o.build_commit : "unknown";
    const char *options = s->o.build_options ? s->o.build_options : "";
    snug_strbuf_printf(&b, "{\"version\":\"%s\",\"commit\":\"", SNUG_VERSION);
    snug_strbuf_json(&b, commit, strlen(commit));
    snug_strbuf_printf(&b, "\",\"build\":\"");
    snug_strbuf_json(&b, options, strlen(options));
    json_t *kern = snug_plan_kernels_json(r);
    char *kern_text = kern ? snug_json_dumps(kern, false) : NULL;
    json_decref(kern);
    snug_strbuf_printf(&b, "\",\"isa\":\"%s\",\"mpi\":%s,\"tensor_parallel_size\":%d,\"kernels\":%s}",
                       snug_plan_report_isa(r), SNUG_HAVE_MPI_BUILD ? "true" : "false",
                       r->tp, kern_text ? kern_text : "null");
    snug_mem_free(kern_text);
    return http_send(c, MHD_HTTP_OK, &b, "application/json");
}

/* POST /reset_prefix_cache: empties the prefix cache when nothing runs
 * (409 while requests run or wait; 400 with caching off). */
static enum MHD_Result reset_prefix_cache(snug_server *s, struct MHD_Connection *c)
{
    snug_error err = {0};
    int32_t dropped = 0;
    snug_status st = snug_engine_reset_prefix_cache(s->e, &dropped, &err);
    if (st == SNUG_BUSY)
        return http_error(c, 409, "invalid_request_error", NULL, "engine_busy", "%s", err.msg);
    if (st != SNUG_OK)
        return http_error(c, 400, "invalid_request_error", NULL, "prefix_caching_disabled", "%s",
                          err.msg);
    snug_strbuf b = {0};
    snug_strbuf_printf(&b, "{\"object\":\"prefix_cache.reset\",\"dropped_blocks\":%d}", dropped);
    return http_send(c, MHD_HTTP_OK, &b, "application/json");
}

/* A Prometheus histogram: cumulative buckets, +Inf, sum and count. */
static void put_histogram(snug_strbuf *b, const char *name, const char *help,
                          const snug_latency_histogram *h)
{
    snug_strbuf_printf(b, "# HELP snug_%s %s\n# TYPE snug_%s histogram\n", name, help, name);
    int64_t cum = 0;
    for (int i = 0; i < SNUG_LATENCY_BUCKETS; i++) {
        cum += h->count[i];
        snug_strbuf_printf(b, "snug_%s_bucket{le=\"%g\"} %lld\n", name, snug_latency_bounds[i],
                           (long long)cum);
    }
    snug_strbuf_printf(b, "snug_%s_bucket{le=\"+Inf\"} %lld\nsnug_%s_sum %.6f\nsnug_%s_count %lld\n",
                       name, (long long)h->n, name, h->sum, name, (long long)h->n);
}

static enum MHD_Result get_metrics(snug_server *s, struct MHD_Connection *c)
{
    snug_engine_counters k;
    snug_engine_counters_get(s->e, &k);
    const snug_plan_report *r = snug_engine_plan(s->e);
    snug_strbuf b = {0};
#define GAUGE(name, help, fmt, v)                                                                  \
    snug_strbuf_printf(&b, "# HELP snug_" name " " help "\n# TYPE snug_" name " gauge\nsnug_" name   \
                       " " fmt "\n", v)
#define COUNTER(name, help, v)                                                                     \
    snug_strbuf_printf(&b, "# HELP snug_" name " " help "\n# TYPE snug_" name                      \
                       " counter\nsnug_" name " %lld\n", (long long)(v))
    GAUGE("http_connections_open", "Client connections the server's gate holds open.", "%d",
          snug_gate_open_connections(atomic_load(&s->gate)));
    GAUGE("num_requests_running", "Sequences in the running batch.", "%d", k.running);
    GAUGE("num_requests_waiting", "Sequences waiting for blocks or preempted.", "%d", k.waiting);
    GAUGE("num_requests_queued", "Requests waiting for a slot.", "%d", k.queued);
    GAUGE("kv_blocks_used", "KV cache blocks held by sequences.", "%d", k.kv.used);
    GAUGE("kv_blocks_free", "KV cache blocks free (resident, held by no sequence).", "%d",
          k.kv.ready - k.kv.used);
    GAUGE("kv_blocks_resident", "KV cache blocks made resident (all, once populated after ready).",
          "%d", k.kv.ready);
    GAUGE("kv_window_blocks_used", "The windowed layers' own KV blocks held by sequences (0 without such a group).",
          "%d", k.kv_window.used);
    GAUGE("kv_window_blocks_total", "The windowed layers' own KV blocks (0: they share the cache of every layer).",
          "%d", k.kv_window.total);
    COUNTER("num_preemptions_total", "Sequences preempted for recompute.", k.preemptions);
    GAUGE("prefix_caching", "1 when the KV cache keeps and reuses computed prefixes.", "%d",
          k.kv.caching ? 1 : 0);
    COUNTER("prefix_cache_queries_total", "Tokens looked up in the prefix cache at admission.",
            k.prefix_queried_tokens);
    COUNTER("prefix_cache_hits_total", "Tokens found in the prefix cache at admission.",
            k.prefix_hit_tokens);
    GAUGE("kv_blocks_cached", "KV cache blocks holding a registered prefix (in use or not).", "%d",
          k.kv.cached);
    GAUGE("kv_blocks_evictable", "Cached KV blocks no sequence holds (counted free).", "%d",
          k.kv.evictable);
    COUNTER("kv_block_evictions_total", "Cached KV blocks taken for new contents.",
            k.kv.evictions);
    COUNTER("grammar_masks_total", "Token masks applied to sequences under a grammar (structured "
            "output, tool calls).", k.grammar_masks);
    COUNTER("grammar_mask_walks_total", "Walks of the vocabulary: masks not found in the mask cache, "
            "and the contexts that wide masks are made from.", k.grammar_walks);
    COUNTER("grammar_masks_composed_total", "Masks made from their contexts' masks (shared by every "
            "grammar: a JSON string's), not walked.", k.grammar_composed);
    snug_strbuf_printf(&b, "# HELP snug_grammar_mask_walk_seconds_total Seconds those walks took (on "
                       "the engine's loop).\n# TYPE snug_grammar_mask_walk_seconds_total counter\n"
                       "snug_grammar_mask_walk_seconds_total %.6f\n", k.grammar_walk_seconds);
    GAUGE("grammar_sequences_waiting", "Sequences held out of steps until their token mask is walked "
          "(walks get a share of each step's time, so hard grammars cannot stall the others).", "%d",
          k.grammar_waiting);
    COUNTER("spec_decode_num_drafts_total", "Decodes that verified drafted tokens (speculative decoding).",
            k.spec_drafts);
    COUNTER("spec_decode_num_draft_tokens_total", "Tokens drafted and verified.", k.spec_drafted_tokens);
    COUNTER("spec_decode_num_accepted_tokens_total", "Drafted tokens that sampling kept (each an output "
            "token the step gave beyond its one).", k.spec_accepted_tokens);
    snug_strbuf_printf(&b, "# HELP snug_spec_decode_draft_seconds_total Seconds the draft model's steps took "
                       "(--draft-model).\n# TYPE snug_spec_decode_draft_seconds_total counter\n"
                       "snug_spec_decode_draft_seconds_total %.6f\n", k.spec_draft_seconds);
    COUNTER("prompt_tokens_total", "Prompt tokens admitted.", k.prompt_tokens);
    COUNTER("generation_tokens_total", "Tokens generated.", k.generation_tokens);
    COUNTER("request_success_total", "Requests finished.", k.requests_finished);
    COUNTER("engine_steps_total", "Steps of the engine loop.", k.steps);
    COUNTER("http_requests_total", "HTTP requests answered.", atomic_load(&s->http_requests));
    put_endpoint_requests(s, &b);
    GAUGE("tensor_parallel_size", "Ranks every step runs on.", "%d", k.tp);
    COUNTER("allreduce_total", "All-reduces rank 0 took part in.", k.allreduce_calls);
    snug_strbuf_printf(&b, "# HELP snug_allreduce_seconds_total Seconds rank 0 spent in "
                       "all-reduces (waiting for the other ranks included).\n# TYPE "
                       "snug_allreduce_seconds_total counter\nsnug_allreduce_seconds_total %.6f\n",
                       k.allreduce_seconds);
    put_histogram(&b, "time_to_first_token_seconds", "From a request's arrival to a choice's "
                  "first token.", &k.ttft);
    put_histogram(&b, "inter_token_latency_seconds", "Between a choice's tokens.", &k.itl);
    snug_strbuf_printf(&b, "# HELP snug_memory_bytes Allocator bytes held by category.\n"
                       "# TYPE snug_memory_bytes gauge\n");
    for (int cat = 0; cat <= SNUG_MEM_N_CATS; cat++) {
        size_t cur = 0, peak = 0;
        snug_mem_status((snug_mem_cat)cat, &cur, &peak, false);
        snug_strbuf_printf(&b, "snug_memory_bytes{category=\"%s\"} %zu\n",
                           snug_mem_cat_name((snug_mem_cat)cat), cur);
        snug_strbuf_printf(&b, "snug_memory_peak_bytes{category=\"%s\"} %zu\n",
                           snug_mem_cat_name((snug_mem_cat)cat), peak);
    }
    snug_strbuf_printf(&b, "# HELP snug_plan_bytes The memory plan's figures.\n"
                       "# TYPE snug_plan_bytes gauge\n");
    const struct { const char *name; size_t v; } plan[] = {
        {"budget", r->sizes.budget}, {"weights", r->weights}, {"activations", r->activations},
        {"serving_state", r->serving_state}, {"untracked", r->sizes.untracked},
        {"reserve", r->sizes.reserve}, {"kv_cache", r->kv.kv_held}, {"capacity", r->capacity}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(plan); i++)
        snug_strbuf_printf(&b, "snug_plan_bytes{part=\"%s\"} %zu\n", plan[i].name, plan[i].v);
    size_t rss = 0, hwm = 0;
    if (snug_proc_mem(&rss, &hwm, NULL) == SNUG_OK) {
        GAUGE("process_resident_bytes", "The process's resident set.", "%zu", rss);
        GAUGE("process_resident_peak_bytes", "The process's high-water mark.", "%zu", hwm);
    }
#undef GAUGE
#undef COUNTER
    return http_send(c, MHD_HTTP_OK, &b, "text/plain; version=0.0.4");
}

/* POST /tokenize {"prompt": "...", "add_special_tokens": true} and
 * POST /detokenize {"tokens": [...]}, each with an optional model (the
 * served one's name); any other field is a 400 naming it. */
static enum MHD_Result tokenize(snug_server *s, struct MHD_Connection *c, http_req *h, bool encode)
{
    const snug_tokenizer *tok = snug_engine_tokenizer(s->e);
    if (!tok)
        return http_error(c, 400, "invalid_request_error", NULL, NULL, "the model has no tokenizer");
    snug_error err = {0};
    json_t *root = NULL;
    snug_tok_encoder *enc = NULL;
    char *text = NULL;
    enum MHD_Result ret;
    size_t need = s->o.request_memory ? snug_json_parse_bound(h->body, h->len) : 0;
    if (need > s->o.request_memory) {
        ret = http_error(c, 413, "invalid_request_error", NULL, "body_too_large", "parsing this "
                         "body's JSON would take %.1f MiB, more than the server's %.1f MiB of memory "
                         "for requests", need / 1048576.0, s->o.request_memory / 1048576.0);
        goto done;
    }
    if (h->len == 0 || snug_json_parse(h->body, h->len, "request body", &root, &err) != SNUG_OK) {
        ret = err.status == SNUG_NOMEM
                  ? http_overloaded(c, err.msg)
                  : http_error(c, 400, "invalid_request_error", NULL, NULL, "%s",
                               h->len ? err.msg : "the request body is empty");
        goto done;
    }
    snug_strbuf b = {0};
    const char *key;
    const json_t *v, *model = json_object_get(root, "model");
    json_object_foreach(root, key, v) { /* nothing is silently ignored */
        bool known = strcmp(key, "model") == 0 ||
                     (encode ? strcmp(key, "prompt") == 0 || strcmp(key, "add_special_tokens") == 0
                             : strcmp(key, "tokens") == 0);
        if (known) continue;
        ret = http_error(c, 400, "invalid_request_error", key, NULL,
                         "%.64s: unknown field: %s takes %s and model", key, encode ? "/tokenize" : "/detokenize",
                         encode ? "prompt, add_special_tokens" : "tokens");
        goto done;
    }
    if (model && !json_is_null(model) &&
        (!json_is_string(model) || strcmp(json_string_value(model), s->o.model_name) != 0)) {
        ret = http_error(c, 404, "invalid_request_error", "model", "model_not_found",
                         "The model `%.64s` does not exist; this server serves `%s`",
                         json_is_string(model) ? json_string_value(model) : "(not a string)", s->o.model_name);
        goto done;
    }
    if (encode) {
        const json_t *p = json_object_get(root, "prompt");
        const json_t *add = json_object_get(root, "add_special_tokens");
        if (!json_is_string(p) || (add && !json_is_boolean(add))) {
            ret = http_error(c, 400, "invalid_request_error", json_is_string(p) ? "add_special_tokens" : "prompt",
                             NULL, "expected {\"prompt\": string, \"add_special_tokens\": boolean}");
            goto done;
        }
        const int32_t *ids = NULL;
        size_t n = 0;
        snug_tok_encode_opts eo = {.add_special = !add || json_is_true(add), .parse_special = true};
        if (snug_tok_encoder_create(tok, &enc, &err) != SNUG_OK ||
            snug_tok_encode(enc, json_string_value(p), json_string_length(p), &eo, &ids, &n, &err) != SNUG_OK) {
            ret = http_overloaded(c, err.msg);
            goto done;
        }
        snug_strbuf_printf(&b, "{\"tokens\":[");
        for (size_t i = 0; i < n; i++) snug_strbuf_printf(&b, i ? ",%d" : "%d", ids[i]);
        snug_strbuf_printf(&b, "],\"count\":%zu,\"max_model_len\":%lld}", n,
                           (long long)snug_engine_max_model_len(s->e));
    } else {
        const json_t *t = json_object_get(root, "tokens");
        size_t n = json_array_size(t);
        int32_t n_vocab = snug_engine_n_vocab(s->e);
        int32_t *ids = json_is_array(t) ? snug_mem_alloc(SNUG_MEM_OTHER, (n + 1) * sizeof *ids, &err) : NULL;
        if (!ids) {
            ret = json_is_array(t) ? http_overloaded(c, err.msg)
                                   : http_error(c, 400, "invalid_request_error", "tokens", NULL,
                                                "tokens: expected a list of token ids");
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            const json_t *v = json_array_get(t, i);
            json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
            if (id < 0 || id >= n_vocab) {
                snug_mem_free(ids);
                ret = http_error(c, 400, "invalid_request_error", "tokens", NULL,
                                 "tokens[%zu]: expected a token id from 0 to %d", i, n_vocab - 1);
                goto done;
            }
            ids[i] = (int32_t)id;
        }
        size_t len = 0;
        snug_status st = snug_tok_decode(tok, ids, n, false, &text, &len, &err);
        snug_mem_free(ids);
        if (st != SNUG_OK) {
            ret = http_overloaded(c, err.msg);
            goto done;
        }
        snug_strbuf_printf(&b, "{\"prompt\":\"");
        snug_strbuf_json(&b, text, len);
        snug_strbuf_printf(&b, "\"}");
    }
    ret = http_send(c, MHD_HTTP_OK, &b, "application/json");
done:
    snug_mem_free(text);
    snug_tok_encoder_free(enc);
    json_decref(root);
    return ret;
}

/* ---- routing ----------------------------------------------------------------- */

typedef enum route {
    R_NONE, R_COMPLETIONS, R_CHAT, R_MESSAGES, R_MESSAGES_COUNT, R_RESPONSES, R_EMBEDDINGS, R_RERANK, R_MODELS, R_HEALTH, R_METRICS, R_TOKENIZE, R_DETOKENIZE,
    R_RESET_PREFIX_CACHE, R_VERSION, R_MODEL, R_PAGE, R_MEMORY, R_TIMELINE, R_N
} route;

static const struct {
    const char *path, *method;
    route r;
} g_routes[] = {
    {"/v1/completions", "POST", R_COMPLETIONS}, {"/v1/chat/completions", "POST", R_CHAT},
    {"/v1/messages", "POST", R_MESSAGES},       {"/v1/messages/count_tokens", "POST", R_MESSAGES_COUNT},
    {"/v1/responses", "POST", R_RESPONSES},     {"/v1/embeddings", "POST", R_EMBEDDINGS},
    {"/v1/rerank", "POST", R_RERANK},           {"/rerank", "POST", R_RERANK},
    {"/v1/models", "GET", R_MODELS},            {"/health", "GET", R_HEALTH},
    {"/metrics", "GET", R_METRICS},             {"/tokenize", "POST", R_TOKENIZE},
    {"/detokenize", "POST", R_DETOKENIZE},      {"/reset_prefix_cache", "POST", R_RESET_PREFIX_CACHE},
    {"/version", "GET", R_VERSION},             {"/", "GET", R_PAGE},
    {"/v1/memory", "GET", R_MEMORY},            {"/timeline.svg", "GET", R_TIMELINE},
};

_Static_assert((int)R_N <= (int)SNUG_SERVER_ROUTES_MAX, "a counter per route");

/* snug_http_endpoint_requests_total{endpoint="..."}: the requests admitted
 * on each route (a model by its id as /v1/models/{id}). */
static void put_endpoint_requests(snug_server *s, snug_strbuf *b)
{
    snug_strbuf_printf(b, "# HELP snug_http_endpoint_requests_total HTTP requests admitted, by endpoint.\n"
                       "# TYPE snug_http_endpoint_requests_total counter\n");
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_routes); i++)
        if (i == 0 || g_routes[i].r != g_routes[i - 1].r) /* (a route of two paths: under the first) */
            snug_strbuf_printf(b, "snug_http_endpoint_requests_total{endpoint=\"%s\"} %lld\n", g_routes[i].path,
                               (long long)atomic_load(&s->endpoint_requests[g_routes[i].r]));
    snug_strbuf_printf(b, "snug_http_endpoint_requests_total{endpoint=\"/v1/models/{id}\"} %lld\n",
                       (long long)atomic_load(&s->endpoint_requests[R_MODEL]));
}

/* The route for url, or R_NONE; *known_path tells a wrong method from an
 * unknown path. */
static route find_route(const char *url, const char *method, bool *known_path)
{
    *known_path = false;
    if (strncmp(url, "/v1/models/", 11) == 0 && url[11]) { /* a model by its id */
        *known_path = true;
        return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ? R_MODEL : R_NONE;
    }
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_routes); i++) {
        if (strcmp(url, g_routes[i].path) != 0) continue;
        *known_path = true;
        if (strcmp(method, g_routes[i].method) == 0 ||
            (strcmp(method, "HEAD") == 0 && strcmp(g_routes[i].method, "GET") == 0))
            return g_routes[i].r; /* HEAD: the GET's headers; libmicrohttpd drops the body */
    }
    return R_NONE;
}

/* True when given (n bytes) is key (k bytes), in time that depends on n
 * alone, the client's own length: each byte of given is compared with the
 * key's at the same place, the key repeated to n bytes by a counter that
 * wraps without a branch, and a length that differs counts as a
 * difference; nothing stops early. */
static bool same_key(const char *given, size_t n, const char *key, size_t k)
{
    volatile unsigned char diff = (unsigned char)(n != k);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        diff |= (unsigned char)(given[i] ^ key[j]);
        j++;
        j &= (size_t)0 - (size_t)(j < k); /* back to 0 at k (k == 0: key[0] is its NUL) */
    }
    return diff == 0;
}

/* True when the request carries the API key (or none is asked for): as
 * Authorization: Bearer KEY, or as Anthropic's clients send it, x-api-key. */
static bool authorized(const snug_server *s, struct MHD_Connection *c)
{
    if (!s->o.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    const char *given = h && strncasecmp(h, "Bearer ", 7) == 0 ? h + 7 : x;
    return given && same_key(given, strlen(given), s->o.api_key, strlen(s->o.api_key));
}

/* Whether route r generates (and so is closed while draining or after the
 * engine failed). */
static bool generates(route r)
{
    return r == R_COMPLETIONS || r == R_CHAT || r == R_MESSAGES || r == R_RESPONSES || r == R_EMBEDDINGS ||
           r == R_RERANK;
}

/* The API whose shapes route r answers in (its errors included). */
static snug_api_dialect dialect_of(route r)
{
    return r == R_MESSAGES || r == R_MESSAGES_COUNT ? SNUG_API_ANTHROPIC : SNUG_API_OPENAI;
}

/* True when route r answers without the API key: GET /health (load
 * balancers), the page at / (it asks for the key itself), and /metrics
 * with --metrics-no-auth. */
static bool open_route(const snug_server *s, route r)
{
    return r == R_HEALTH || r == R_PAGE || (r == R_METRICS && s->o.metrics_no_auth);
}

/* Takes the next piece of the upload; false when it cannot be kept. */
static void take_upload(http_req *h, const char *data, size_t n, size_t max)
{
    if (h->too_large || h->no_memory || n == 0) return;
    if (h->len + n > max) {
        h->too_large = true;
        return;
    }
    if (h->len + n + 1 > h->cap) {
        size_t cap = SNUG_MIN(SNUG_MAX(h->cap * 2, h->len + n + 1), max + 1);
        char *b = snug_mem_alloc(SNUG_MEM_OTHER, cap, NULL);
        if (!b) {
            h->no_memory = true;
            return;
        }
        if (h->body) memcpy(b, h->body, h->len);
        snug_mem_free(h->body);
        h->body = b;
        h->cap = cap;
    }
    memcpy(h->body + h->len, data, n);
    h->len += n;
    h->body[h->len] = 0;
}

static enum MHD_Result answer(snug_server *s, struct MHD_Connection *c, http_req *h, route r)
{
    size_t max = s->o.max_body_bytes ? s->o.max_body_bytes : BODY_DEFAULT;
    if (h->too_large)
        return http_error_in(c, dialect_of(r), 413, "invalid_request_error", NULL, "body_too_large",
                             "the request body is over the limit of %zu bytes", max);
    if (h->no_memory) return http_overloaded_in(c, dialect_of(r), "no memory for the request's body as it came");
    switch (r) {
    case R_COMPLETIONS: return openai_handle(s, c, h, SNUG_API_COMPLETIONS);
    case R_CHAT: return openai_handle(s, c, h, SNUG_API_CHAT);
    case R_MESSAGES: return openai_handle(s, c, h, SNUG_API_MESSAGES);
    case R_MESSAGES_COUNT: return openai_handle(s, c, h, SNUG_API_MESSAGES_COUNT);
    case R_RESPONSES: return openai_handle(s, c, h, SNUG_API_RESPONSES_CREATE);
    case R_EMBEDDINGS: return embeddings_handle(s, c, h);
    case R_RERANK: return rerank_handle(s, c, h);
    case R_MODELS: return get_models(s, c, NULL);
    case R_MODEL: return get_models(s, c, h->path + 11);
    case R_HEALTH: return get_health(s, c);
    case R_METRICS: return get_metrics(s, c);
    case R_TOKENIZE: return tokenize(s, c, h, true);
    case R_DETOKENIZE: return tokenize(s, c, h, false);
    case R_RESET_PREFIX_CACHE: return reset_prefix_cache(s, c);
    case R_VERSION: return get_version(s, c);
    case R_PAGE: return page_index(c);
    case R_MEMORY: return page_memory(s, c);
    case R_TIMELINE: return page_timeline(s, c);
    default: return MHD_NO;
    }
}

/* Tells the gate of libmicrohttpd's connections (each one's socket context
 * is its link, whose user is the server: for http_add_headers). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    snug_server *s = cls;
    snug_gate_on_connection(atomic_load(&s->gate), c, socket_ctx, code);
}

/* A CORS preflight (OPTIONS on a known path with --allowed-origins): 204,
 * with the methods and headers a page may use (the origin's own header is
 * added, when it is allowed, with the others). */
static enum MHD_Result preflight(struct MHD_Connection *c)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    http_add_headers(r, c);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            "Authorization, Content-Type, X-Request-Id, x-api-key, anthropic-version");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)version;
    snug_server *s = cls;
    bool known = false;
    route r = find_route(url, method, &known);
    http_req *h = *con_cls; /* made by on_uri */
    if (!h) return http_overloaded(c, "no memory for a request's record");
    if (!h->seen) { /* the headers are in: decide what can be decided now */
        h->seen = true;
        snprintf(h->method, sizeof h->method, "%s", method);
        if (r == R_MODEL) snprintf(h->path, sizeof h->path, "%s", url); /* unescaped: the id */
        atomic_fetch_add(&s->http_requests, 1); /* admitted by the gate (gate.h) */
        atomic_fetch_add(&s->endpoint_requests[r], 1);
        if (r == R_NONE && known && strcmp(method, "OPTIONS") == 0 && s->o.allowed_origins)
            return preflight(c);
        if (r == R_NONE)
            return known ? http_error(c, 405, "invalid_request_error", NULL, "method_not_allowed",
                                      "%s is not allowed on %s", method, url)
                         : http_error(c, 404, "invalid_request_error", NULL, "not_found",
                                      "no such path: %s", url);
        snug_api_dialect d = dialect_of(r);
        if (!open_route(s, r) && !authorized(s, c))
            return http_error_in(c, d, 401, "invalid_request_error", NULL, "invalid_api_key",
                                 "a missing or wrong API key: send Authorization: Bearer KEY (or x-api-key: KEY)");
        if (generates(r) && snug_engine_failed(s->e))
            return http_error_in(c, d, 500, "server_error", NULL, "engine_failed", "%s", snug_engine_error(s->e));
        if (atomic_load(&s->draining) && generates(r))
            return http_error_in(c, d, 503, "server_error", NULL, "draining", "the server is shutting down");
        /* a body over --max-body-bytes never gets here: the gate answers 413 */
        return MHD_YES;
    }
    if (*upload_size) {
        take_upload(h, upload_data, *upload_size,
                    s->o.max_body_bytes ? s->o.max_body_bytes : BODY_DEFAULT);
        *upload_size = 0;
        return MHD_YES;
    }
    return answer(s, c, h, r);
}

/* A request's URI has arrived (before its headers): its record, for
 * on_request and the access log; NULL when there is no memory for it (then
 * on_request answers 503). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)c;
    http_req *h = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *h, NULL);
    if (!h) return NULL;
    *h = (http_req){.srv = cls, .t0 = snug_now_seconds()};
    size_t n = strcspn(uri, "?"); /* the query string stays out of the log */
    snprintf(h->path, sizeof h->path, "%.*s", (int)SNUG_MIN(n, sizeof h->path - 1), uri);
    return h;
}

/* One line in the access log for the request h on c: when it ended (UTC),
 * the client, method, path, status, the completion's prompt tokens (of them
 * found in the prefix cache) and generated tokens, the time to its first
 * token and its whole duration. */
static void log_access(FILE *f, struct MHD_Connection *c, const http_req *h,
                       enum MHD_RequestTerminationCode why)
{
    char when[32], client[64] = "-";
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        const void *at = sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                                                   : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
        if (!inet_ntop(sa->sa_family, at, client, sizeof client)) snprintf(client, sizeof client, "-");
    }
    const union MHD_ConnectionInfo *si = MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS);
    unsigned status = si ? si->http_status : 0;
    double end = snug_now_seconds();
    char usage[160] = "";
    if (h->job) {
        int64_t prompt = 0, cached = 0, completion = 0;
        double t_first = 0;
        openai_job_usage(h->job, &prompt, &cached, &completion, &t_first);
        char ttft[32] = "-";
        if (t_first > 0) snprintf(ttft, sizeof ttft, "%.3fs", t_first - h->t0);
        snprintf(usage, sizeof usage, " prompt=%lld cached=%lld completion=%lld ttft=%s",
                 (long long)prompt, (long long)cached, (long long)completion, ttft);
    } else if (h->prompt_tokens > 0) { /* embeddings, rerank: prompts only */
        snprintf(usage, sizeof usage, " prompt=%lld", (long long)h->prompt_tokens);
    }
    fprintf(f, "%s %s %s %s %u%s %.3fs%s\n", when, client, h->method[0] ? h->method : "-", h->path,
            status, usage, end - h->t0,
            why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
    fflush(f);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    snug_server *s = cls;
    http_req *h = *con_cls;
    const union MHD_ConnectionInfo *sc = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (sc) snug_gate_answered(sc->socket_context); /* all of its answer is written */
    if (!h) return;
    if (s->o.access_log && h->seen) log_access(s->o.access_log, c, h, why);
    openai_job_free(h->job);
    snug_mem_free(h->body);
    snug_mem_free(h);
    *con_cls = NULL;
}

snug_status snug_server_listen(const snug_server_opts *o, int *fd, snug_error *err)
{
    *fd = -1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    const char *host = o->host ? o->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return snug_errorf(err, SNUG_INVALID, "--host %s: expected an IPv4 address such as "
                           "127.0.0.1 or 0.0.0.0", host);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return snug_errorf(err, SNUG_IO, "cannot make a socket: %s", strerror(errno));
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(s, 128) != 0) {
        int e = errno;
        close(s);
        return snug_errorf(err, SNUG_IO, "cannot listen on %s:%d: %s%s", host, o->port, strerror(e),
                           e == EADDRINUSE ? " (another server has it: --port chooses another)" : "");
    }
    *fd = s;
    return SNUG_OK;
}

/* Raises the process's descriptor limit to its hard limit, and fits the
 * gate's pool of connections within it: each held connection takes one,
 * each admitted one three (the client's, and both ends of its socket pair),
 * and the libraries some more. Fails with SNUG_INVALID naming the limit
 * when not even --max-connections fit. */
static snug_status fit_descriptors(snug_gate_opts *go, snug_error *err)
{
    enum { SPARE = 64 };
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return SNUG_OK;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    long links = snug_gate_links(go), need = go->pool + 2 * links + SPARE;
    if (rl.rlim_cur == RLIM_INFINITY || (long)rl.rlim_cur >= need) return SNUG_OK;
    long pool = (long)rl.rlim_cur - 2 * links - SPARE;
    if (pool < links)
        return snug_errorf(err, SNUG_INVALID, "server: %ld file descriptors (ulimit -n) cannot hold "
                           "--max-connections %d: it needs at least %ld", (long)rl.rlim_cur,
                           go->max_requests, 3 * links + SPARE);
    go->pool = (int)pool;
    return SNUG_OK;
}

/* s->limits, once: the options' body limit, the model's vocabulary and
 * length, and the tool-call format of the chat template prompts are
 * rendered with (--chat-template's, else the model's), so that a reply in
 * the model's own format is read as its calls. */
static void server_limits(snug_server *s)
{
    snug_api_limits_default(&s->limits);
    if (s->o.max_body_bytes) s->limits.max_body_bytes = s->o.max_body_bytes;
    s->limits.n_vocab = snug_engine_n_vocab(s->e);
    s->limits.max_model_len = snug_engine_max_model_len(s->e);
    s->limits.parse_bytes_max = s->o.request_memory;
    const snug_tokenizer *tok = snug_engine_tokenizer(s->e);
    snug_api_limits_set_template(&s->limits, s->o.chat_template ? s->o.chat_template
                                             : tok ? snug_tokenizer_chat_template(tok) : NULL);
}

/* The ids text encodes to (special tokens parsed, none added) into ids,
 * at most SNUG_THINK_TAG_MAX; 0 when it does not encode into so few. */
static int32_t tag_ids(snug_tok_encoder *enc, const char *text, int32_t *ids)
{
    const int32_t *got = NULL;
    size_t n = 0;
    snug_tok_encode_opts eo = {.add_special = false, .parse_special = true};
    if (snug_tok_encode(enc, text, strlen(text), &eo, &got, &n, NULL) != SNUG_OK || n == 0 ||
        n > SNUG_THINK_TAG_MAX)
        return 0;
    memcpy(ids, got, n * sizeof *ids);
    return (int32_t)n;
}

/* The think block of the chat template served (reasoning.h), and, for a
 * reasoning budget, its tags as token ids and the close a spent budget
 * writes: "\n</think>\n\n", as the template writes a turn's block. No
 * tokenizer, or tags that do not encode into a few ids: no budget. */
static void server_reasoning(snug_server *s)
{
    const snug_tokenizer *tok = snug_engine_tokenizer(s->e);
    const char *tpl = s->o.chat_template ? s->o.chat_template : tok ? snug_tokenizer_chat_template(tok) : NULL;
    s->think_format = snug_reasoning_format_of(tpl);
    s->reasoning = s->o.reasoning_none ? NULL : s->think_format;
    memset(&s->think_tags, 0, sizeof s->think_tags);
    snug_tok_encoder *enc = NULL;
    if (!s->think_format || !tok || snug_tok_encoder_create(tok, &enc, NULL) != SNUG_OK) return;
    char force[64];
    snprintf(force, sizeof force, "\n%s\n\n", s->think_format->close);
    snug_think_params *p = &s->think_tags;
    p->n_open = tag_ids(enc, s->think_format->open, p->open);
    p->n_close = tag_ids(enc, s->think_format->close, p->close);
    p->n_force = tag_ids(enc, force, p->force);
    if (!p->n_open || !p->n_close) p->n_force = 0;
    /* the tags' texts too, for a tag spelled in other tokens (reasoning.h's
     * tags are short: those that do not fit are matched by ids alone) */
    if (strlen(s->think_format->open) < sizeof p->open_text && strlen(s->think_format->close) < sizeof p->close_text) {
        snprintf(p->open_text, sizeof p->open_text, "%s", s->think_format->open);
        snprintf(p->close_text, sizeof p->close_text, "%s", s->think_format->close);
    }
    snug_tok_encoder_free(enc);
}

snug_status snug_server_start(snug_engine *e, const snug_server_opts *o, snug_server **out,
                              snug_error *err)
{
    *out = NULL;
    snug_server *s = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *s, err);
    if (!s) return snug_error_prefix(err, SNUG_NOMEM, "server: ");
    s->e = e;
    /* the key of response ids: random, else the clock and the pid (ids need not be secret) */
    if (getrandom(&s->id_key, sizeof s->id_key, GRND_NONBLOCK) != (ssize_t)sizeof s->id_key)
        s->id_key = (uint64_t)snug_now_seconds() * 1000003u ^ (uint64_t)getpid() << 32;
    s->o = *o;
    s->created = (int64_t)time(NULL);
    server_limits(s);
    server_reasoning(s);
    s->limits.think_budget = s->think_tags.n_force > 0; /* Anthropic's thinking.budget_tokens */
    if (o->rerank && snug_engine_n_labels(e) == 0) { /* (a classifier reranks with its head) */
        snug_status rst = rerank_setup(s, err);
        if (rst != SNUG_OK) {
            snug_mem_free(s);
            return rst;
        }
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    const char *host = o->host ? o->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        snug_mem_free(s);
        return snug_errorf(err, SNUG_INVALID, "--host %s: expected an IPv4 address such as "
                           "127.0.0.1 or 0.0.0.0", host);
    }
    /* libmicrohttpd serves only what the gate admits (gate.h): no socket of its own */
    snug_gate_opts go = gate_opts(o);
    snug_status st = fit_descriptors(&go, err);
    if (st != SNUG_OK) {
        snug_mem_free(s);
        return st;
    }
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC |
                                MHD_USE_POLL, /* select() refuses descriptors past 1023 */
                            0, NULL, NULL, on_request, s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)snug_gate_links(&go),
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            /* a backstop only: the gate keeps every deadline first */
                            MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)(2 * SNUG_MAX(go.write_s, go.body_s) + go.keep_alive_s + 10),
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)POOL_BYTES,
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)STACK_BYTES,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_END);
    go.listen_fd = o->listen_fd > 0 ? o->listen_fd : -1;
    if (!s->d) {
        st = snug_errorf(err, SNUG_IO, "server: libmicrohttpd would not start");
    } else if (go.listen_fd < 0) {
        st = snug_server_listen(o, &go.listen_fd, err);
    }
    if (st == SNUG_OK) {
        go.daemon = s->d;
        go.user = s;
        snug_gate *g = NULL;
        st = snug_gate_start(&go, &g, err); /* it takes the listening socket */
        atomic_store(&s->gate, g);
    } else if (go.listen_fd >= 0) {
        close(go.listen_fd);
    }
    if (st != SNUG_OK) {
        if (s->d) MHD_stop_daemon(s->d);
        snug_mem_free(s);
        return st;
    }
    struct sockaddr_in bound;
    socklen_t blen = sizeof bound;
    s->port = getsockname(go.listen_fd, (struct sockaddr *)&bound, &blen) == 0 ? ntohs(bound.sin_port)
                                                                             : o->port;
    *out = s;
    return SNUG_OK;
}

int snug_server_port(const snug_server *s) { return s->port; }

void snug_server_drain(snug_server *s) { atomic_store(&s->draining, true); }

int snug_server_active(snug_server *s) { return (int)atomic_load(&s->active); }

int snug_server_stop(snug_server *s)
{
    if (!s) return 0;
    atomic_store(&s->draining, true);
    int cut = (int)atomic_load(&s->active);
    atomic_store(&s->stopping, true); /* what still runs cancels itself and says so */
    for (double waited = 0; atomic_load(&s->active) > 0 && waited < SNUG_SERVER_CUT_SECONDS;
         waited += 0.02)
        usleep(20 * 1000);
    snug_gate *g = atomic_load(&s->gate);
    snug_gate_close(g, 1.0); /* what the cut requests said goes out */
    MHD_stop_daemon(s->d);    /* its threads tell the gate's links until here */
    atomic_store(&s->gate, NULL);
    snug_gate_free(g);
    snug_mem_free(s);
    return cut;
}
