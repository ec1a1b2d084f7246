/*
 * http_reply.c: queuing an answer on a libmicrohttpd connection, for every
 * module of the server (server.c's plain endpoints, openai.c's completions,
 * page.c's page and memory view): the headers every answer carries
 * (X-Request-Id, CORS for --allowed-origins), a body from the allocator,
 * errors in OpenAI's shape or Anthropic's, the 503 for memory. A leaf: it calls none of
 * those modules, so the router can call them and they can answer.
 */
#include "server_impl.h"

#include "base/mem.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static void free_block(void *p) { snug_mem_free(p); }

/* True when origin (the request's Origin header) is one of allowed ("*",
 * or origins separated by commas, compared whole). */
static bool origin_allowed(const char *allowed, const char *origin)
{
    if (!allowed || !origin) return false;
    if (strcmp(allowed, "*") == 0) return true;
    size_t n = strlen(origin);
    for (const char *p = allowed; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && *p == ' ') p++, len--;
        while (len && p[len - 1] == ' ') len--;
        if (len == n && strncmp(p, origin, n) == 0) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* X-Request-Id (the client's, or one made from the server's key) and, for
 * an allowed Origin, the CORS headers (server_impl.h). */
void http_add_headers(struct MHD_Response *r, struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *sc = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    const snug_server *srv = sc ? snug_gate_link_user(sc->socket_context) : NULL;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (srv && origin_allowed(srv->o.allowed_origins, origin)) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(r, "Access-Control-Expose-Headers", "X-Request-Id");
        MHD_add_response_header(r, "Vary", "Origin");
    }
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    const char *given = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    bool sane = given && *given && strlen(given) <= 128;
    for (const char *p = given; sane && *p; p++) sane = *p > 32 && *p < 127;
    if (sane) {
        MHD_add_response_header(r, "X-Request-Id", given);
        return;
    }
    snug_server *s = (snug_server *)srv;
    if (!s) return;
    uint64_t n = atomic_fetch_add(&s->n_request_ids, 1) + 1;
    char id[40];
    snprintf(id, sizeof id, "req-%016llx",
             (unsigned long long)((n + s->id_key) * 0xD6E8FEB86659FD93ull ^ s->id_key >> 23));
    MHD_add_response_header(r, "X-Request-Id", id);
}

/* Queues body (taken) as the response; a bare 503 when it failed to be
 * made (server_impl.h). */
enum MHD_Result http_send(struct MHD_Connection *c, unsigned status, snug_strbuf *body,
                          const char *content_type)
{
    struct MHD_Response *r = NULL;
    if (!body->failed)
        r = MHD_create_response_from_buffer_with_free_callback(body->len, body->p, free_block);
    if (!r) { /* no memory for the body: a bare 503 from a constant */
        snug_strbuf_free(body);
        static const char msg[] = "{\"error\":{\"message\":\"" SNUG_API_BUSY_MESSAGE "\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":\"overloaded\"}}";
        http_log_overloaded("no memory for a response's body");
        r = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
        content_type = "application/json";
        if (!r) return MHD_NO;
    }
    body->p = NULL; /* the response owns it now */
    http_add_headers(r, c);
    MHD_add_response_header(r, "Content-Type", content_type);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* Anthropic's error type for an HTTP status (its API's table; 529 is its
 * overloaded). */
static const char *anthropic_type(unsigned status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 529: return "overloaded_error";
    default: return status < 500 ? "invalid_request_error" : "api_error";
    }
}

/* Queues an error in Anthropic's shape: {"type": "error", "error": {"type",
 * "message"}}; a 503 for memory or draining goes as its 529 overloaded. */
static enum MHD_Result anthropic_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    if (status == 503) status = 529;
    snug_strbuf b = {0};
    snug_strbuf_printf(&b, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"", anthropic_type(status));
    snug_strbuf_json(&b, msg, strlen(msg));
    snug_strbuf_printf(&b, "\"}}");
    return http_send(c, status, &b, "application/json");
}

/* http_error_in with its arguments in ap. */
static enum MHD_Result error_v(struct MHD_Connection *c, snug_api_dialect dialect, unsigned status, const char *type,
                               const char *param, const char *code, const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (dialect == SNUG_API_ANTHROPIC) return anthropic_error(c, status, msg);
    snug_strbuf b = {0};
    snug_strbuf_printf(&b, "{\"error\":{\"message\":\"");
    snug_strbuf_json(&b, msg, strlen(msg));
    snug_strbuf_printf(&b, "\",\"type\":\"%s\",\"param\":", type);
    if (param && *param) {
        snug_strbuf_put(&b, "\"", 1);
        snug_strbuf_json(&b, param, strlen(param));
        snug_strbuf_put(&b, "\"", 1);
    } else {
        snug_strbuf_printf(&b, "null");
    }
    if (code)
        snug_strbuf_printf(&b, ",\"code\":\"%s\"}}", code);
    else
        snug_strbuf_printf(&b, ",\"code\":null}}");
    return http_send(c, status, &b, "application/json");
}

/* Queues an error in the dialect's shape (server_impl.h). */
enum MHD_Result http_error_in(struct MHD_Connection *c, snug_api_dialect dialect, unsigned status, const char *type,
                              const char *param, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = error_v(c, dialect, status, type, param, code, fmt, ap);
    va_end(ap);
    return r;
}

/* Queues an error in OpenAI's shape (server_impl.h). */
enum MHD_Result http_error(struct MHD_Connection *c, unsigned status, const char *type, const char *param,
                           const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = error_v(c, SNUG_API_OPENAI, status, type, param, code, fmt, ap);
    va_end(ap);
    return r;
}

/* One line on stderr for a request refused for memory. */
void http_log_overloaded(const char *detail)
{
    fprintf(stderr, "snug: a request refused for memory (503 overloaded): %s\n", detail);
}

/* Logs detail and queues a 503 overloaded (Anthropic's 529). */
enum MHD_Result http_overloaded_in(struct MHD_Connection *c, snug_api_dialect dialect, const char *detail)
{
    http_log_overloaded(detail);
    return http_error_in(c, dialect, 503, "server_error", NULL, "overloaded", "%s", SNUG_API_BUSY_MESSAGE);
}

enum MHD_Result http_overloaded(struct MHD_Connection *c, const char *detail)
{
    return http_overloaded_in(c, SNUG_API_OPENAI, detail);
}

bool http_client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    char byte;
    return recv(ci->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}
