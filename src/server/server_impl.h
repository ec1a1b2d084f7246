/*
 * server_impl.h: what the server's modules share (server.c: the HTTP side,
 * routes and plain endpoints; openai.c: completions and chat; page.c: the
 * page; http_reply.c: the answers all of them queue). Private to
 * src/server/. The calls go down: server.c routes to openai.c and page.c,
 * and all three answer through http_reply.c, which calls none of them.
 */
#ifndef SNUG_SERVER_IMPL_H
#define SNUG_SERVER_IMPL_H

#include "server.h"

#include "api_request.h"
#include "base/strbuf.h"
#include "chat/reasoning.h"
#include "gate.h"

#include <microhttpd.h>
#include <stdatomic.h>

enum { SNUG_SERVER_ROUTES_MAX = 24 }; /* server.c's routes, at most */

struct snug_server {
    snug_engine *e;
    snug_server_opts o;
    struct MHD_Daemon *d;
    _Atomic(snug_gate *) gate;     /* the front door: every client connection (gate.h) */
    int port;
    atomic_bool draining;          /* no new completions */
    atomic_bool stopping;          /* the drain is over: what runs is cancelled */
    atomic_int active;             /* generation requests in flight */
    int64_t created;               /* seconds since the epoch, for /v1/models */
    atomic_llong http_requests, http_errors;
    atomic_llong endpoint_requests[SNUG_SERVER_ROUTES_MAX]; /* admitted, per route (server.c's) */
    uint64_t id_key;               /* random at start: response ids differ across restarts */
    atomic_ullong n_request_ids;   /* X-Request-Ids made so far */
    snug_api_limits limits;        /* what every completion body is parsed under, made at
                                    * start: the model's vocabulary and length, and the
                                    * tool-call format of the chat template served */
    const snug_reasoning_format *think_format; /* the think block the chat template served
                                    * shows (reasoning.h), or NULL: the model does not think */
    const snug_reasoning_format *reasoning; /* think_format, unless --reasoning-format none:
                                    * how chat replies are split; NULL: all content */
    snug_think_params think_tags;  /* think_format's tags as token ids and the close a budget
                                    * forces ("\n</think>\n\n"); n_force 0: no budget possible */
    int32_t rerank_ids[2];         /* with o.rerank: the ids of its yes and no */
};

typedef struct openai_job openai_job;

/* One HTTP request, from its first byte to its completion callback. */
typedef struct http_req {
    snug_server *srv;
    bool seen;                     /* on_request has had its headers */
    double t0;                     /* when its URI arrived (snug_now_seconds) */
    char method[8];
    char path[160];                /* for the access log, cut */
    char *body;                    /* the upload, from the allocator */
    size_t len, cap;
    bool too_large, no_memory;
    openai_job *job;               /* a completion in flight */
    int64_t prompt_tokens;         /* a prompt-only request's (embeddings, rerank), for the
                                    * access log; 0: none */
} http_req;

/* ---- http_reply.c: answers ---------------------------------------------------------- */

/* Adds an X-Request-Id header to r: the client's (when it is 1 to 128
 * printable characters), else a new one, unique to this server's run; and
 * with --allowed-origins, when the request's Origin is one of them, the
 * CORS headers that let its page read the answer. */
void http_add_headers(struct MHD_Response *r, struct MHD_Connection *c);

/* Queues a JSON response of body (taken: freed here). */
enum MHD_Result http_send(struct MHD_Connection *c, unsigned status, snug_strbuf *body,
                          const char *content_type);

/* Queues an error in OpenAI's shape. param and code may be NULL. */
enum MHD_Result http_error(struct MHD_Connection *c, unsigned status, const char *type,
                           const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* As http_error, in the shape of dialect's API: Anthropic's {"type":
 * "error", "error": {"type", "message"}} with its type for the status (a
 * 503 as its 529 overloaded_error; type, param and code unused). */
enum MHD_Result http_error_in(struct MHD_Connection *c, snug_api_dialect dialect, unsigned status, const char *type,
                              const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* As http_overloaded, in the shape of dialect's API. */
enum MHD_Result http_overloaded_in(struct MHD_Connection *c, snug_api_dialect dialect, const char *detail);

/* True when the client has closed its side of the connection (it sent
 * its request and went away): a read would find the end of the stream. */
bool http_client_gone(struct MHD_Connection *c);

/* Writes a line to the server's log (stderr) for a request refused for
 * memory: detail is the allocator's account, which the client is not told. */
void http_log_overloaded(const char *detail);

/* Logs detail (http_log_overloaded) and queues a 503 overloaded with
 * SNUG_API_BUSY_MESSAGE for the client. */
enum MHD_Result http_overloaded(struct MHD_Connection *c, const char *detail);

/* ---- openai.c: completions and chat ------------------------------------------------ */

/* Answers POST /v1/completions or /v1/chat/completions for h's body. */
enum MHD_Result openai_handle(snug_server *s, struct MHD_Connection *c, http_req *h,
                              snug_api_kind kind);

/* For the access log: j's prompt tokens, those found in the prefix cache,
 * its generated tokens, and when its first token was taken (0: none). */
void openai_job_usage(openai_job *j, int64_t *prompt, int64_t *cached, int64_t *completion,
                      double *t_first);

/* Ends a job: its requests cancelled and released, its memory freed. */
void openai_job_free(openai_job *j);

/* ---- embeddings.c ------------------------------------------------------------------ */

/* Answers POST /v1/embeddings for h's body (a 400 when the server does not
 * embed: opts.embeddings). */
enum MHD_Result embeddings_handle(snug_server *s, struct MHD_Connection *c, http_req *h);

/* Answers POST /v1/rerank and /rerank for h's body (a 400 when the server
 * does not rerank: opts.rerank). */
enum MHD_Result rerank_handle(snug_server *s, struct MHD_Connection *c, http_req *h);

/* The ids of --rerank's yes and no into s->rerank_ids: each must be one
 * token. Fails with SNUG_INVALID saying which is not. */
snug_status rerank_setup(snug_server *s, snug_error *err);

/* ---- page.c: the page at /, and what it reads -------------------------------------- */

/* GET /: the page (chat and memory view), built into the binary. */
enum MHD_Result page_index(struct MHD_Connection *c);

/* GET /v1/memory: the plan's parts, the KV cache's blocks (in use, cached,
 * free), the process's resident set and its peak, sequences and token
 * counts, as JSON; from counters the engine keeps, nothing on its step
 * path. */
enum MHD_Result page_memory(snug_server *s, struct MHD_Connection *c);

/* GET /timeline.svg: the start-up's memory over time (--timeline), or a
 * 404 when it was not recorded. */
enum MHD_Result page_timeline(snug_server *s, struct MHD_Connection *c);

/* ---- openai_tools.c: a chat reply's tool calls ---------------------------------- */

/* One streamed choice's reply under tools: how much of it went out as
 * content, and whether its calls have begun (the rest held to its end). */
typedef struct tool_stream {
    size_t sent;
    bool calls;
} tool_stream;

/* Appends "tool_calls":[...] for calls: each with an id made from key and
 * its place (9 characters for formats that want them so, else call_ and
 * 24), type function, and function name and arguments (a JSON string);
 * with delta, each with its index, as a stream's chunk has them. */
void tool_calls_put(snug_strbuf *b, const snug_api_request *req, const json_t *calls, uint64_t key, bool delta);

/* Of the len bytes of text a streamed reply to req (a chat that lets the
 * model call tools) has so far, the end of what may go out as content now
 * (t->sent or more); updates t->calls. The caller moves t->sent there. */
size_t tool_reply_streamable(const snug_api_request *req, tool_stream *t, const char *text, size_t len);

/* The id of call k of a reply to req whose calls are keyed key, as
 * tool_calls_put writes it, into id. */
void tool_call_id(const snug_api_request *req, uint64_t key, size_t k, char id[40]);

/* The id of call k of a reply whose calls are keyed key, as Anthropic's
 * tool_use blocks have them: "toolu_" and 24 letters and digits, into id. */
void tool_use_id(uint64_t key, size_t k, char id[40]);

/* ---- anthropic.c: answers in Anthropic's Messages shapes --------------------------- */

/* A reply's tokens: the prompt's, of them found in the prefix cache, and generated. */
typedef struct anthropic_usage {
    int64_t prompt, cached, output;
} anthropic_usage;

/* How a reply ended: its finish, whether it made tool calls, and the stop
 * string that ended it (finish SNUG_FINISH_STOP_STRING; n_stop bytes). */
typedef struct anthropic_end {
    snug_finish finish;
    bool calls;
    const char *stop;
    size_t n_stop;
} anthropic_end;

/* A whole reply's parts. */
typedef struct anthropic_message {
    const char *id, *model;
    const char *thinking;          /* the reasoning (has_thinking), n_thinking bytes */
    size_t n_thinking;
    bool has_thinking;
    const char *text;              /* the content, n_text bytes */
    size_t n_text;
    const json_t *calls;           /* its tool calls ([{name, arguments}]), or NULL */
    uint64_t key;                  /* what the calls' ids are made from */
    anthropic_end end;
    anthropic_usage usage;
} anthropic_message;

/* A streamed reply's blocks: how many were opened, which kind is open, and
 * whether any was a tool call. Zero: none yet. */
typedef struct anthropic_stream {
    int n_blocks;
    int open;
    bool calls;
} anthropic_stream;

/* "end_turn", "max_tokens", "stop_sequence" or "tool_use" (calls). */
const char *anthropic_stop_reason(snug_finish f, bool calls);

/* Appends the message m as Anthropic's JSON: its blocks (thinking, text,
 * tool_use with input objects), stop_reason and stop_sequence, and usage
 * (input_tokens not counting cache_read_input_tokens). */
void anthropic_put_message(snug_strbuf *b, const anthropic_message *m);

/* Appends a stream's message_start (no content yet) and a ping. */
void anthropic_stream_start(snug_strbuf *b, const char *id, const char *model, const anthropic_usage *u);

/* Appends n bytes of reasoning (thinking) or content as a delta of the
 * block of that kind, opening one (and closing the open one) first when
 * it is not the open one; nothing for n 0. */
void anthropic_stream_text(snug_strbuf *b, anthropic_stream *s, bool thinking, const char *text, size_t n);

/* Appends each call as a tool_use block: its start (input {}), its input
 * whole as one input_json_delta; the open block closed first. */
void anthropic_stream_calls(snug_strbuf *b, anthropic_stream *s, const json_t *calls, uint64_t key);

/* Appends the stream's end: the open block's stop (an empty text block
 * first when there was none), message_delta with e and u, message_stop. */
void anthropic_stream_end(snug_strbuf *b, anthropic_stream *s, const anthropic_end *e, const anthropic_usage *u);

/* Appends a ping event. */
void anthropic_stream_ping(snug_strbuf *b);

/* Appends an error event of type ("api_error", "overloaded_error") and message. */
void anthropic_stream_error(snug_strbuf *b, const char *type, const char *message);

/* ---- responses.c: answers in OpenAI's Responses shapes ------------------------------- */

/* A reply's parts, or (in_progress) a response as it begins: no output, no usage. */
typedef struct responses_reply {
    const snug_api_request *req;   /* the request: its source's fields are repeated, its
                                    * tool-call format names the calls */
    const char *id, *model;
    int64_t created;
    bool in_progress;
    const char *reasoning;         /* the reasoning, n_reasoning bytes (0: no reasoning item) */
    size_t n_reasoning;
    const char *text;              /* the content, n_text bytes */
    size_t n_text;
    const json_t *calls;           /* its tool calls ([{name, arguments}]), or NULL */
    uint64_t key;                  /* what its items' and calls' ids are made from */
    snug_finish finish;
    int64_t prompt, cached, output, reasoning_tokens;
} responses_reply;

/* A streamed response: its events' next number, the items opened, the one
 * open (its id and the text it has so far). Zero: none yet;
 * responses_stream_free frees its text. */
typedef struct responses_stream {
    int64_t seq;
    int n_items;
    int open;
    char item[40];
    snug_strbuf text;
} responses_stream;

/* Appends the response object r: its output items (a reasoning item when
 * it reasoned, a message of output_text when it has content or nothing
 * else, a function_call per call), status completed or incomplete
 * (max_output_tokens), the request's fields repeated, usage. */
void responses_put(snug_strbuf *b, const responses_reply *r);

/* Appends response.created and response.in_progress (r in_progress). */
void responses_stream_start(snug_strbuf *b, responses_stream *s, const responses_reply *r);

/* Appends n bytes of reasoning or content as a delta of the item of that
 * kind, opening it (output_item.added, content_part.added; the open item
 * closed first) when it is not the open one; nothing for n 0. */
void responses_stream_text(snug_strbuf *b, responses_stream *s, bool reasoning, const char *text, size_t n,
                           uint64_t key);

/* Appends r's calls as function_call items: added, their arguments' delta
 * (whole) and done, item done; the open item closed first. */
void responses_stream_calls(snug_strbuf *b, responses_stream *s, const responses_reply *r);

/* Appends the stream's end: the open item closed (an empty message first
 * when there was no item), then response.completed or
 * response.incomplete with r whole. */
void responses_stream_end(snug_strbuf *b, responses_stream *s, const responses_reply *r);

/* Appends an error event (code, message). */
void responses_stream_error(snug_strbuf *b, responses_stream *s, const char *code, const char *message);

/* Frees what s holds. */
void responses_stream_free(responses_stream *s);

#endif /* SNUG_SERVER_IMPL_H */
