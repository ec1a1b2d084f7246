/*
 * server.h: the OpenAI-compatible HTTP server in front of an engine: a
 * gate (gate.h) that owns every client connection and admits whole, valid
 * requests to libmicrohttpd (a thread per admitted connection).
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (JSON or
 * server-sent events), GET /v1/models, GET /health, GET /metrics
 * (Prometheus text), POST /tokenize, POST /detokenize, POST
 * /reset_prefix_cache (behind the API key), GET /version. Every response
 * carries an X-Request-Id (the client's, or a new one). Errors are in
 * OpenAI's shape {"error": {"message", "type", "param", "code"}}.
 *
 * Memory: what a request needs (its body, the parse, its token ids, its
 * response) comes from the allocator, out of the server's share of the
 * plan (planner.h server_tracked); a request that does not fit gets 503.
 * What libmicrohttpd holds per connection (its pool, the thread's stack) is
 * outside the allocator; snug_server_untracked_bytes says how much, for
 * the plan to keep (server_untracked); the gate's buffers are allocated at
 * start (snug_server_gate_bytes, kept with server_tracked).
 */
#ifndef SNUG_SERVER_H
#define SNUG_SERVER_H

#include "base/common.h"

#include <stdio.h>
#include "engine/engine.h"

typedef struct snug_server_opts {
    const char *host;              /* NULL: 127.0.0.1 */
    int port;                      /* 0: any free port (snug_server_port says which) */
    const char *api_key;           /* NULL: none asked for */
    const char *model_name;        /* the model's name in the API */
    int max_connections;           /* 0: 32 */
    size_t max_body_bytes;         /* 0: 1 MiB */
    double timeout_s;              /* a body must arrive within it, and a client that takes
                                    * no bytes of its answer for it is let go; 0: 60 */
    double keep_alive_s;           /* a connection with no byte yet, or idle between
                                    * requests, is closed after it; 0: 5 */
    double header_timeout_s;       /* a request head must be whole within it of its first
                                    * byte (408); 0: 10 */
    const char *chat_template;     /* a template's text overriding the model's, or NULL */
    bool reasoning_none;           /* --reasoning-format none: a thinking model's replies are
                                    * all content, its think block in the text (default auto:
                                    * split into reasoning_content and content, reasoning.h) */
    FILE *access_log;              /* a line per request goes here; NULL: none */
    const char *build_commit;      /* for GET /version; NULL: "unknown" */
    const char *build_options;     /* for GET /version; NULL: "" */
    const char *allowed_origins;   /* CORS: "*" or origins separated by commas, whose browser
                                    * pages may call the API; NULL: no CORS headers */
    int listen_fd;                 /* a socket snug_server_listen bound (the server takes it);
                                    * -1 or 0 when not set: the server binds host:port itself */
    const char *timeline_svg;      /* the start-up's memory over time, served at /timeline.svg
                                    * (the caller's until the server stops), or NULL */
    size_t timeline_svg_len;
    bool metrics_no_auth;          /* GET /metrics without the API key (scrapers in a trusted
                                    * network); every other endpoint but GET /health and the
                                    * page at / needs it when api_key is set */
    size_t request_memory;         /* the allocator memory kept for requests (the plan's
                                    * server_tracked less the gate's): a body whose parse needs
                                    * more could never be parsed, and gets 413; 0: unknown */
    int max_uploads;               /* bodies too large for the gate, streamed to
                                    * libmicrohttpd as they come, at once; 0: 8 */
    double min_upload_rate;        /* bytes/s a body must average, counted after its first
                                    * upload_grace_s (408 when slower); 0: 1024 */
    double upload_grace_s;         /* 0: 5 */
    bool embeddings;               /* POST /v1/embeddings serves (an embedding model, or a chat
                                    * model under --embeddings); false: it answers 400 */
    snug_pooling pooling;          /* how an embedding pools the prompt (NONE: LAST) */
    bool normalize;                /* embeddings scaled to length 1 */
    bool rerank;                   /* POST /v1/rerank serves: the model is a reranker that
                                    * answers yes or no (Qwen3-Reranker); false: a 400 */
    const char *rerank_yes, *rerank_no; /* its answers' text, each one token; NULL: "yes", "no" */
} snug_server_opts;

typedef struct snug_server snug_server;

/* The bytes, outside the allocator, that libmicrohttpd may hold for o's
 * connections: per connection its memory pool, its thread's stack and its
 * bookkeeping. */
size_t snug_server_untracked_bytes(const snug_server_opts *o);

/* The allocator bytes the server's gate (gate.h) takes at start: the plan
 * keeps them with server_tracked. Pure. */
size_t snug_server_gate_bytes(const snug_server_opts *o);

/* The allocator bytes the server keeps for its requests by default:
 * snug_server_tracked_bytes_min, and 256 KiB per connection. Pure. */
size_t snug_server_tracked_bytes_default(const snug_server_opts *o);

/* The least memory for requests with which one body of o's
 * max_body_bytes parses on an idle server: the body (and its buffer's
 * growth) and its parse at SNUG_SERVER_PARSE_BYTES_PER_BYTE (text, token
 * ids and chat messages take 2 to 40 per byte, tests/test_json.c; a body
 * of costlier shapes that could never fit gets 413). Pure. */
size_t snug_server_tracked_bytes_min(const snug_server_opts *o);

enum { SNUG_SERVER_PARSE_BYTES_PER_BYTE = 48 };

/* Binds and listens on o->host:o->port into *fd (closed on exec), before
 * the model is loaded, so that an address in use fails at once; hand it to
 * snug_server_start as o->listen_fd. Fails with SNUG_INVALID (not an IPv4
 * address) or SNUG_IO naming the address and why. */
snug_status snug_server_listen(const snug_server_opts *o, int *fd, snug_error *err);

/* Starts serving e on o->host:o->port (or o->listen_fd). Fails with SNUG_IO (the address is
 * taken, cannot be bound) or SNUG_NOMEM. */
snug_status snug_server_start(snug_engine *e, const snug_server_opts *o, snug_server **out,
                              snug_error *err);

/* The port it listens on. */
int snug_server_port(const snug_server *s);

/* Begins draining: the server goes on listening, but /health answers 503
 * "draining" and new completions get 503 "draining"; what runs goes on.
 * Returns at once. */
void snug_server_drain(snug_server *s);

/* Completion requests being answered now. */
int snug_server_active(snug_server *s);

/* Stops: requests still running are cut (a stream gets an error event with
 * code "server_shutdown", a JSON request a 503 with it), given up to
 * SNUG_SERVER_CUT_SECONDS to be told so, then every connection is closed
 * and the server freed; NULL is ignored. Returns how many were cut. */
int snug_server_stop(snug_server *s);

enum { SNUG_SERVER_CUT_SECONDS = 2 };

#endif /* SNUG_SERVER_H */
