/*
 * gate.h: the server's front door. One thread owns the listening socket and
 * every client connection; it reads each request's head and body itself,
 * strictly (http_head.h), under deadlines that no dribbling client can
 * stretch, and hands a connection to libmicrohttpd only once it has a whole,
 * valid head, through a socket pair it then pumps both ways. So idle and
 * slow clients hold no libmicrohttpd connection and no thread, every broken
 * request gets an answer in OpenAI's JSON shape (never libmicrohttpd's
 * HTML, never a silent close), and a client that half-closes its socket
 * after its request gets its whole answer.
 *
 * Deadlines (snug_gate_opts): a connection that has sent no byte, or is idle
 * between keep-alive requests, is closed after keep_alive_s; a head must be
 * whole within header_s of its first byte (408); a body within body_s of
 * its head, and at min_upload_rate bytes/s on average once upload_grace_s
 * have passed (408); a client that takes no bytes of its answer for
 * write_s is let go (its requests cancelled). Admission counts requests
 * whose bodies are whole: at most max_requests are answered at once (503
 * too_many_connections over it), and GET /health, /metrics and /version
 * have `reserved` more of their own, so that probes answer whatever the
 * other clients do. A body too large for the gate's buffer (or one whose
 * client waits for 100 Continue) goes to libmicrohttpd as it comes, one of
 * at most max_uploads at once (503 too_many_uploads over it), apart from
 * the requests being answered; it joins them, or gets the 503 then, when
 * it is whole. At most `pool` connections are held open; a new one takes
 * the place of the oldest idle one (no byte yet, or between requests), else
 * of the one whose head has waited longest.
 *
 * Memory: everything is allocated at start (snug_gate_bytes), nothing after.
 */
#ifndef SNUG_GATE_H
#define SNUG_GATE_H

#include "base/common.h"
#include "http_head.h"

#include <microhttpd.h>

typedef struct snug_gate_opts {
    int listen_fd;                 /* bound and listening; the gate takes it */
    struct MHD_Daemon *daemon;     /* started with MHD_USE_NO_LISTEN_SOCKET: admitted
                                    * connections are added to it */
    void *user;                    /* given back by snug_gate_link_user */
    int max_requests;              /* requests answered at once (besides the reserved) */
    int reserved;                  /* more, for GET /health, /metrics, /version */
    int max_uploads;               /* bodies streamed to libmicrohttpd as they come, at once */
    int pool;                      /* connections held open at most */
    double keep_alive_s, header_s, body_s, write_s;
    double min_upload_rate;        /* bytes/s a body must average after upload_grace_s */
    double upload_grace_s;
    snug_http_limits limits;
} snug_gate_opts;

typedef struct snug_gate snug_gate;

/* The connections libmicrohttpd may hold for these options (its connection
 * limit: every admitted connection, and those being closed). */
int snug_gate_links(const snug_gate_opts *o);

/* The allocator bytes the gate takes at start for these options. Pure. */
size_t snug_gate_bytes(const snug_gate_opts *o);

/* Starts the gate's thread on o (copied). Fails with SNUG_NOMEM or SNUG_IO;
 * then the listening socket is closed. */
snug_status snug_gate_start(const snug_gate_opts *o, snug_gate **out, snug_error *err);

/* Stops accepting, gives the answers in flight up to flush_s to go out,
 * then closes every connection (libmicrohttpd sees its ends close) and the
 * thread; NULL is ignored. Call before stopping the daemon. */
void snug_gate_close(snug_gate *g, double flush_s);

/* Frees the gate (closing it first if need be); NULL is ignored. Call
 * after the daemon has stopped: until then its threads may still tell the
 * gate's links of answers and closes. */
void snug_gate_free(snug_gate *g);

/* Connections the gate holds open now. */
int snug_gate_open_connections(snug_gate *g);

/* Passes on libmicrohttpd's connection notifications (MHD_OPTION_NOTIFY_
 * CONNECTION): a started connection gets its link as socket context, a
 * closed one lets its link go. */
void snug_gate_on_connection(snug_gate *g, struct MHD_Connection *c, void **socket_ctx,
                             enum MHD_ConnectionNotificationCode code);

/* Tells the gate that a request on the connection whose socket context is
 * link has been answered (call from MHD_OPTION_NOTIFY_COMPLETED). */
void snug_gate_answered(void *link);

/* The opts' user pointer from a connection's socket context (NULL: none). */
void *snug_gate_link_user(const void *link);

#endif /* SNUG_GATE_H */
