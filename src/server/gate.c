/*
 * gate.c: the server's front door (gate.h).
 *
 * One thread, one epoll set: the listening socket, each client's socket,
 * the gate's end of each link (the socket pair whose other end
 * libmicrohttpd serves), and an eventfd that the completion callback and
 * stop use to wake it. Level-triggered; after the events of a wake every
 * open connection is advanced (its bytes moved, its deadlines looked at).
 *
 * A connection (slot) reads its client's bytes into `in`; the head is read
 * there (http_head.h), then moved with its body to its link's `to_up`,
 * which is written to libmicrohttpd. What libmicrohttpd answers comes back
 * into the link's `to_client` and is written to the client as it is. The
 * gate counts requests forwarded and answered (libmicrohttpd's completion
 * callback), which tells it when a connection is idle and when an answer of
 * its own (an error for a request that went wrong) may follow the ones
 * before it. A link outlives its slot until libmicrohttpd has closed its
 * end (an orphan): the slot is free at once for the next client.
 */
#include "gate.h"

#include "base/mem.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    IN_BYTES = 16 * 1024,        /* a slot's input: the largest head, or body bytes in passing */
    PIPE_BYTES = 16 * 1024,      /* each direction of a link */
    RESPONSE_BYTES = 768,        /* an answer of the gate's own */
    LINK_SPARE = 8,              /* links beyond max + reserved: ones being closed */
    EVENTS = 64,
    TICK_MS = 100,               /* deadlines are looked at this often, at least */
    STACK_BYTES = 256 * 1024,
    DRAIN_BYTES = 256 << 20      /* read and dropped after an error answer, at most (so that a
                                  * client still sending sees the answer, not a reset) */
};

static const double LINGER_S = 2.0; /* after an error answer, unread bytes are drained this long */

enum { KIND_LISTEN, KIND_CLIENT, KIND_LINK, KIND_WAKE };

/* What epoll watches on one descriptor. */
typedef struct gate_watch {
    uint32_t events;
    bool in_set;                 /* added to the set (an empty mask stays there) */
} gate_watch;

enum { PHASE_IDLE, PHASE_HEAD, PHASE_BODY_LEN, PHASE_BODY_CHUNKS, PHASE_LINGER };

enum { LINK_FREE, LINK_USED };

typedef struct gate_link {
    void *user;
    int wake_fd;                 /* the gate's: a completion wakes it */
    atomic_int answered;         /* requests libmicrohttpd has answered on it */
    atomic_bool mhd_open;        /* libmicrohttpd holds its end */
    atomic_bool mhd_started;     /* ... and has said so (its socket context is set) */
    int state;                   /* LINK_FREE, LINK_USED (the gate's) */
    int fd;                      /* the gate's end; -1 once let go */
    int mhd_fd;                  /* libmicrohttpd's end, to know it when it starts */
    int slot;                    /* whose; -1: an orphan */
    gate_watch watch;            /* what epoll watches on fd */
    char *to_up, *to_client;
    size_t up_off, up_len, cl_off, cl_len;
    bool up_eof;                 /* libmicrohttpd closed its end */
    bool empty;                  /* the last read found nothing more to take */
    bool up_shut;                /* libmicrohttpd stopped reading: what goes up is dropped */
} gate_link;

typedef struct gate_conn {
    int fd;                      /* -1: a free slot */
    uint32_t gen;                /* moves on with each client the slot takes */
    gate_watch watch;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    int phase;
    double t_idle, t_head, t_body, t_wrote, t_linger;
    char *in;
    size_t in_len;
    snug_http_head head;
    snug_http_chunks chunks;
    snug_http_chunks prescan;    /* a chunked body read ahead in `in`, before admission */
    size_t prescanned;           /* its bytes read so far, after the head */
    bool head_done;              /* the head is whole: its body is awaited in `in` */
    uint64_t body_left;
    uint64_t got;                /* bytes read from the client in all */
    uint64_t body_mark;          /* got when the body being read began (its bytes: got - it) */
    bool reserved;               /* the last request forwarded is a probe */
    bool client_eof;
    bool abort_request;          /* the request being forwarded went wrong: cut its link */
    bool close_after;            /* close once every answer is out */
    bool was_quiet;              /* quiet() at the last look: the idle time runs from then */
    int forwarded;               /* requests handed to its link */
    int answered;                /* of those, answered, as read before the link's last read:
                                  * libmicrohttpd counts an answer once all of it is written,
                                  * so a read that then finds nothing has had all of it */
    gate_link *link;
    char resp[RESPONSE_BYTES];   /* an answer of the gate's own, after the link's */
    size_t resp_off, resp_len;
    size_t dropped;              /* bytes read and dropped while lingering */
    size_t got_since_forward;    /* answer bytes from the link since the last request went up */
} gate_conn;

struct snug_gate {
    snug_gate_opts o;
    int epfd, wake_fd;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    double flush_s;
    int n_links;
    gate_conn *conns;            /* [o.pool] */
    gate_link *links;            /* [n_links] */
    pthread_mutex_t mu;          /* links' mhd_fd and state, against the notify callback */
    bool closed;                 /* snug_gate_close has run */
    bool accept_paused;          /* out of descriptors: the listening socket is out of the set */
    double accept_again;         /* ... until then */
    atomic_int open;
    uint64_t id_key;
    uint64_t n_ids;
    void *block;                 /* the one allocation */
};

static double now_s(void) { return snug_now_seconds(); }

int snug_gate_links(const snug_gate_opts *o)
{
    return o->max_requests + o->reserved + o->max_uploads + LINK_SPARE;
}

/* The one block's layout: slots, links, then their buffers. */
static bool layout(const snug_gate_opts *o, size_t *conns_at, size_t *links_at, size_t *in_at,
                   size_t *pipe_at, size_t *total)
{
    size_t at = 0, pool = (size_t)o->pool, links = (size_t)snug_gate_links(o);
    return snug_mem_carve(&at, sizeof(gate_conn), pool, conns_at) &&
           snug_mem_carve(&at, sizeof(gate_link), links, links_at) &&
           snug_mem_carve(&at, IN_BYTES, pool, in_at) &&
           snug_mem_carve(&at, PIPE_BYTES, 2 * links, pipe_at) && (*total = at, true);
}

size_t snug_gate_bytes(const snug_gate_opts *o)
{
    size_t a, b, c, d, total;
    return layout(o, &a, &b, &c, &d, &total) ? snug_mem_held_bytes(total) : 0;
}

/* ---- epoll ------------------------------------------------------------------- */

/* An epoll tag: what kind of descriptor, the slot's generation (an event
 * for a slot's earlier client, in the same batch as its reuse, is passed
 * over), its index. */
static uint64_t tag(int kind, int i, uint32_t gen)
{
    return (uint64_t)kind << 56 | (uint64_t)(gen & 0xffffff) << 32 | (uint32_t)i;
}

/* Makes epoll watch fd for want (w: what it watches now). With nothing
 * wanted, leave says whether fd leaves the set (epoll reports hang-ups and
 * errors whatever the mask: a link that libmicrohttpd closed while its
 * answer waits for the client would wake the gate for nothing); a client's
 * socket stays, so that its reset is seen. */
static void watch(snug_gate *g, int fd, gate_watch *w, uint32_t want, bool leave, uint64_t t)
{
    if (fd < 0) return;
    if (want == 0 && leave) {
        if (w->in_set) epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL);
        *w = (gate_watch){0};
        return;
    }
    if (w->in_set && w->events == want) return;
    struct epoll_event ev = {.events = want, .data.u64 = t};
    epoll_ctl(g->epfd, w->in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
    *w = (gate_watch){want, true};
}

static void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

/* ---- links ------------------------------------------------------------------- */

static int in_flight(const gate_conn *c)
{
    return c->link ? c->forwarded - c->answered : 0;
}

/* Lets go of the gate's end of c's link (libmicrohttpd sees the end of its
 * stream and closes its own: the link is free again then). */
static void release_link(snug_gate *g, gate_conn *c)
{
    gate_link *l = c->link;
    if (!l) return;
    if (l->fd >= 0) {
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, l->fd, NULL);
        close(l->fd);
    }
    l->fd = -1;
    l->watch = (gate_watch){0};
    l->slot = -1;
    c->link = NULL;
    c->forwarded = c->answered = 0;
}

/* Links whose both ends are let go become free. */
static void reap_links(snug_gate *g)
{
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n_links; i++) {
        gate_link *l = &g->links[i];
        if (l->state == LINK_USED && l->fd < 0 && !atomic_load(&l->mhd_open)) l->state = LINK_FREE;
    }
    pthread_mutex_unlock(&g->mu);
}

/* A free link for c, its socket pair made and its other end given to
 * libmicrohttpd; NULL when none is free (or the system refuses). */
static gate_link *take_link(snug_gate *g, gate_conn *c, int slot)
{
    reap_links(g);
    gate_link *l = NULL;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n_links && !l; i++)
        if (g->links[i].state == LINK_FREE) l = &g->links[i];
    int sv[2] = {-1, -1};
    if (l && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) l = NULL;
    if (l) {
        l->state = LINK_USED;
        l->fd = sv[0];
        l->mhd_fd = sv[1];
        l->slot = slot;
        l->watch = (gate_watch){0};
        l->up_off = l->up_len = l->cl_off = l->cl_len = 0;
        l->up_eof = l->up_shut = false;
        atomic_store(&l->answered, 0);
        atomic_store(&l->mhd_started, false);
        atomic_store(&l->mhd_open, true);
    }
    pthread_mutex_unlock(&g->mu);
    if (!l) return NULL;
    if (MHD_add_connection(g->o.daemon, sv[1], (const struct sockaddr *)&c->addr, c->addr_len) != MHD_YES) {
        atomic_store(&l->mhd_open, false); /* libmicrohttpd closed its end */
        close(sv[0]);
        l->fd = -1;
        l->slot = -1;
        reap_links(g);
        return NULL;
    }
    c->link = l;
    c->forwarded = c->answered = 0;
    return l;
}

void snug_gate_on_connection(snug_gate *g, struct MHD_Connection *mc, void **socket_ctx,
                             enum MHD_ConnectionNotificationCode code)
{
    if (!g) return;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        gate_link *l = *socket_ctx;
        if (l) atomic_store(&l->mhd_open, false);
        *socket_ctx = NULL;
        uint64_t one = 1;
        if (write(g->wake_fd, &one, sizeof one) < 0) { /* the gate looks again within a second */ }
        return;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_ctx = NULL;
    if (!ci) return;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n_links; i++) {
        gate_link *l = &g->links[i];
        if (l->state == LINK_USED && l->mhd_fd == ci->connect_fd && atomic_load(&l->mhd_open) &&
            !atomic_load(&l->mhd_started)) {
            atomic_store(&l->mhd_started, true);
            *socket_ctx = l;
            break;
        }
    }
    pthread_mutex_unlock(&g->mu);
}

void snug_gate_answered(void *link)
{
    gate_link *l = link;
    if (!l) return;
    atomic_fetch_add(&l->answered, 1);
    uint64_t one = 1;
    if (write(l->wake_fd, &one, sizeof one) < 0) { /* the gate looks again within its tick */ }
}

void *snug_gate_link_user(const void *link) { return link ? ((const gate_link *)link)->user : NULL; }

/* ---- connections --------------------------------------------------------------- */

static void close_conn(snug_gate *g, gate_conn *c)
{
    if (c->fd < 0) return;
    release_link(g, c);
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->watch = (gate_watch){0};
    atomic_fetch_sub(&g->open, 1);
}

/* Prepares an answer of the gate's own: status, OpenAI's error shape, the
 * connection closed after it (with extra headers, e.g. Retry-After). */
static void answer(snug_gate *g, gate_conn *c, int status, const char *code, const char *message,
                   const char *extra)
{
    static const struct { int status; const char *reason; } reasons[] = {
        {400, "Bad Request"}, {408, "Request Timeout"}, {413, "Content Too Large"},
        {414, "URI Too Long"}, {431, "Request Header Fields Too Large"},
        {501, "Not Implemented"}, {503, "Service Unavailable"}, {505, "HTTP Version Not Supported"}};
    const char *reason = "Error";
    for (size_t i = 0; i < SNUG_ARRAY_LEN(reasons); i++)
        if (reasons[i].status == status) reason = reasons[i].reason;
    char body[400], msg[256];
    size_t m = 0;
    for (const char *p = message; *p && m + 2 < sizeof msg; p++) { /* JSON-safe: the gate's own text */
        if (*p == '"' || *p == '\\') msg[m++] = '\\';
        msg[m++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
    }
    msg[m] = 0;
    int bn = snprintf(body, sizeof body, "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":"
                      "null,\"code\":\"%s\"}}", msg, status >= 500 ? "server_error" :
                      "invalid_request_error", code);
    bn = SNUG_MIN(bn, (int)sizeof body - 1);
    uint64_t id = ++g->n_ids;
    int n = snprintf(c->resp, sizeof c->resp, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n"
                     "X-Request-Id: req-%016llx\r\n%s\r\n%s",
                     status, reason, bn, (unsigned long long)((id + g->id_key) * 0xD6E8FEB86659FD93ull ^
                                                              g->id_key >> 23),
                     extra ? extra : "", body);
    c->resp_len = (size_t)SNUG_MIN(n, (int)sizeof c->resp - 1);
    c->resp_off = 0;
    c->close_after = true;
    c->t_wrote = now_s();
}

static void refuse(snug_gate *g, gate_conn *c, const snug_http_refusal *r)
{
    answer(g, c, r->status, r->code, r->message, NULL);
}

/* True when c's last request went to its link before its body was whole
 * (an upload): its body is still coming. */
static bool uploading(const gate_conn *c)
{
    return c->link && (c->phase == PHASE_BODY_LEN || c->phase == PHASE_BODY_CHUNKS);
}

/* Connections with requests being answered now whose bodies are whole,
 * the probes aside. */
static int busy(const snug_gate *g)
{
    int n = 0;
    for (int i = 0; i < g->o.pool; i++) {
        const gate_conn *c = &g->conns[i];
        n += c->fd >= 0 && !c->reserved && in_flight(c) - (uploading(c) ? 1 : 0) > 0;
    }
    return n;
}

/* Bodies going to libmicrohttpd as they come, now. */
static int uploads(const snug_gate *g)
{
    int n = 0;
    for (int i = 0; i < g->o.pool; i++) n += g->conns[i].fd >= 0 && uploading(&g->conns[i]);
    return n;
}

/* Answers 503 too_many_connections: max_requests are being answered. */
static void answer_busy(snug_gate *g, gate_conn *c)
{
    char msg[96];
    snprintf(msg, sizeof msg, "the server is answering its %d requests at once; try again",
             g->o.max_requests);
    answer(g, c, 503, "too_many_connections", msg, "Retry-After: 1\r\n");
}

static bool is_probe(const snug_http_head *h)
{
    return strcmp(h->method, "GET") == 0 &&
           (strcmp(h->path, "/health") == 0 || strcmp(h->path, "/metrics") == 0 ||
            strcmp(h->path, "/version") == 0);
}

/* True when c's link has nothing more for the client: its buffer is out
 * and its last read found nothing (or its end). */
static bool drained(const gate_conn *c)
{
    const gate_link *l = c->link;
    return !l || (l->cl_len == 0 && (l->empty || l->up_eof));
}

/* True when the gate's own answer to c is pending and may go now: the
 * answers before it are out. */
static bool resp_may_go(const gate_conn *c)
{
    const gate_link *l = c->link;
    return c->resp_len > c->resp_off && (!l || l->up_eof || (in_flight(c) == 0 && drained(c)));
}

/* True when c holds nothing in flight, in its buffers or half read. */
static bool quiet(const gate_conn *c)
{
    return c->phase == PHASE_IDLE && c->in_len == 0 && in_flight(c) == 0 && c->resp_len == 0 &&
           drained(c) && (!c->link || c->link->up_len == 0);
}

/* The oldest idle connection (other than keep), else -1. */
static int oldest_idle(const snug_gate *g, const gate_conn *keep, bool with_link)
{
    int best = -1;
    for (int i = 0; i < g->o.pool; i++) {
        const gate_conn *c = &g->conns[i];
        if (c->fd < 0 || c == keep || !quiet(c) || (with_link && !c->link)) continue;
        if (best < 0 || c->t_idle < g->conns[best].t_idle) best = i;
    }
    return best;
}

/* True when c's request, its head whole in c->in, may go to a link now:
 * its body is all in c->in too (so a slow sender never holds a connection
 * of libmicrohttpd's; *whole set), or c->in is full (a large body goes on
 * in passing, an upload), or the client waits for 100 Continue (the
 * same). A broken chunked body is refused. */
static bool body_ready(snug_gate *g, gate_conn *c, bool *whole)
{
    const snug_http_head *h = &c->head;
    *whole = false;
    if (c->in_len == IN_BYTES || h->expect_continue) return true;
    *whole = true;
    size_t have = c->in_len - h->head_len;
    if (!h->chunked) return !h->has_length || have >= h->content_length;
    size_t used = 0;
    snug_http_refusal r;
    snug_http_result res = snug_http_chunks_read(&c->prescan, c->in + h->head_len + c->prescanned,
                                                 have - c->prescanned, &g->o.limits, &used, &r);
    c->prescanned += used;
    if (res == SNUG_HTTP_BAD) refuse(g, c, &r);
    return res == SNUG_HTTP_OK;
}

/* A whole head in c->in: admits the request to a link (or answers it). */
static void admit(snug_gate *g, gate_conn *c, int slot)
{
    snug_http_head *h = &c->head;
    if (!c->head_done) {
        c->head_done = true;
        c->t_body = now_s();
        c->body_mark = c->got - (c->in_len - h->head_len);
        c->prescan = (snug_http_chunks){0};
        c->prescanned = 0;
    }
    bool whole;
    if (!body_ready(g, c, &whole)) return;
    bool probe = is_probe(h);
    if (!whole && uploads(g) >= g->o.max_uploads) {
        char msg[96];
        snprintf(msg, sizeof msg, "the server is receiving its %d large bodies at once; try again",
                 g->o.max_uploads);
        answer(g, c, 503, "too_many_uploads", msg, "Retry-After: 1\r\n");
        return;
    }
    if (whole && !probe && in_flight(c) == 0 && busy(g) >= g->o.max_requests) {
        answer_busy(g, c);
        return;
    }
    if (!c->link && !take_link(g, c, slot)) {
        int victim = oldest_idle(g, c, true); /* an idle kept-alive connection gives way */
        if (victim >= 0) {
            close_conn(g, &g->conns[victim]);
            reap_links(g);
        }
        if (!take_link(g, c, slot)) return; /* libmicrohttpd is still closing some: wait */
    }
    gate_link *l = c->link;
    if (PIPE_BYTES - l->up_len < h->head_len) return; /* the last body is still going up */
    memcpy(l->to_up + l->up_len, c->in, h->head_len);
    l->up_len += h->head_len;
    memmove(c->in, c->in + h->head_len, c->in_len - h->head_len);
    c->in_len -= h->head_len;
    c->forwarded++;
    c->got_since_forward = 0;
    c->reserved = probe && (in_flight(c) == 1 || c->reserved); /* counted unless only probes wait */
    c->head_done = false;
    c->chunks = (snug_http_chunks){0};
    c->body_left = h->has_length ? h->content_length : 0;
    c->phase = h->chunked ? PHASE_BODY_CHUNKS : c->body_left ? PHASE_BODY_LEN : PHASE_IDLE;
    if (!snug_http_head_keeps_alive(h)) c->close_after = true;
}

/* Moves body bytes from c->in to the link; a broken chunked body is cut. */
static void forward_body(snug_gate *g, gate_conn *c)
{
    gate_link *l = c->link;
    size_t room = l->up_shut ? PIPE_BYTES : PIPE_BYTES - l->up_len, n = SNUG_MIN(room, c->in_len);
    size_t used = n;
    if (n == 0) return;
    bool ends = false;
    if (c->phase == PHASE_BODY_LEN) {
        used = (size_t)SNUG_MIN((uint64_t)n, c->body_left);
        ends = used == c->body_left;
    } else {
        snug_http_refusal r;
        snug_http_result res = snug_http_chunks_read(&c->chunks, c->in, n, &g->o.limits, &used, &r);
        if (res == SNUG_HTTP_BAD) {
            c->abort_request = true;
            refuse(g, c, &r);
            return;
        }
        ends = res == SNUG_HTTP_OK;
    }
    /* an upload whole: it joins the requests being answered, or is cut with a 503 */
    if (ends && !c->reserved && in_flight(c) == 1 && busy(g) >= g->o.max_requests) {
        c->abort_request = true;
        answer_busy(g, c);
        return;
    }
    if (c->phase == PHASE_BODY_LEN) c->body_left -= used;
    if (ends) c->phase = PHASE_IDLE;
    if (!l->up_shut) { /* else dropped: libmicrohttpd has answered and reads no more */
        memcpy(l->to_up + l->up_len, c->in, used);
        l->up_len += used;
    }
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
}

/* The client has shut down its sending side while its request is being
 * answered and nothing of the answer has come yet: a half-close, or a
 * client that has gone. An interim 100 Continue (which HTTP/1.1 clients
 * must read past) tells them apart: a client that has closed its socket
 * answers it with a reset, and its request is then cancelled; one that
 * only half-closed reads on to its answer. */
static void probe_half_close(gate_conn *c)
{
    static const char interim[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (!c->link || in_flight(c) != 1 || c->got_since_forward || c->link->cl_len || c->head.minor < 1)
        return;
    if (send(c->fd, interim, sizeof interim - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* gone */ }
}

/* Reads what the client sent into c->in; false when the client is gone. */
static bool read_client(snug_gate *g, gate_conn *c)
{
    (void)g;
    if (c->client_eof || c->in_len == IN_BYTES) return true;
    ssize_t n = recv(c->fd, c->in + c->in_len, IN_BYTES - c->in_len, 0);
    if (n > 0) {
        if (c->phase == PHASE_LINGER) { /* after an error answer: dropped */
            c->dropped += (size_t)n;
            return c->dropped < DRAIN_BYTES;
        }
        c->in_len += (size_t)n;
        c->got += (uint64_t)n;
        return true;
    }
    if (n == 0) {
        c->client_eof = true;
        if (c->phase == PHASE_IDLE) probe_half_close(c);
        return c->phase != PHASE_LINGER;
    }
    return errno == EAGAIN || errno == EINTR;
}

/* Writes what is owed to the client: the link's answers, then the gate's
 * own; false when the client is gone. */
static bool write_client(gate_conn *c)
{
    gate_link *l = c->link;
    const char *p = NULL;
    size_t n = 0;
    if (l && l->cl_len > l->cl_off) {
        p = l->to_client + l->cl_off;
        n = l->cl_len - l->cl_off;
    } else if (resp_may_go(c)) {
        p = c->resp + c->resp_off;
        n = c->resp_len - c->resp_off;
    }
    if (n == 0) return true;
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0) return errno == EAGAIN || errno == EINTR;
    c->t_wrote = now_s();
    if (l && p == l->to_client + l->cl_off) {
        l->cl_off += (size_t)w;
        if (l->cl_off == l->cl_len) l->cl_off = l->cl_len = 0;
    } else {
        c->resp_off += (size_t)w;
    }
    return true;
}

/* Moves bytes between the link and its buffers. */
static void pump_link(gate_conn *c)
{
    gate_link *l = c->link;
    if (!l) return;
    if (l->up_len > l->up_off) {
        ssize_t w = send(l->fd, l->to_up + l->up_off, l->up_len - l->up_off, MSG_NOSIGNAL);
        if (w > 0) l->up_off += (size_t)w;
        if (w < 0 && errno != EAGAIN && errno != EINTR) { /* it answered early and stopped
                                                            * reading: its answer is still to read */
            l->up_shut = true;
            l->up_off = l->up_len;
        }
        if (l->up_off == l->up_len) l->up_off = l->up_len = 0;
    }
    if (!l->up_eof && l->cl_len < PIPE_BYTES) {
        ssize_t r = recv(l->fd, l->to_client + l->cl_len, PIPE_BYTES - l->cl_len, 0);
        if (r > 0) l->cl_len += (size_t)r, c->got_since_forward += (size_t)r;
        l->empty = r < 0 && errno == EAGAIN;
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) l->up_eof = true;
        if (l->up_eof && !atomic_load(&l->mhd_started)) /* dropped before it began: free */
            atomic_store(&l->mhd_open, false);
    }
}

/* Answers c with a 408 whose message is fmt's text. */
static void time_out(snug_gate *g, gate_conn *c, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void time_out(snug_gate *g, gate_conn *c, const char *fmt, ...)
{
    snug_http_refusal r = {408, "request_timeout", ""};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r.message, sizeof r.message, fmt, ap);
    va_end(ap);
    refuse(g, c, &r);
}

/* Moves what can move now (at time t): the link's bytes, answers to the
 * client, heads read and admitted, bodies forwarded; until nothing
 * changes. false when c was closed. */
static bool move_bytes(snug_gate *g, gate_conn *c, int slot, double t)
{
    for (int guard = 0; guard < 8; guard++) {
        size_t before = c->in_len + (c->link ? c->link->up_len + c->link->cl_len : 0) + c->resp_off;
        int phase = c->phase;
        if (c->link) c->answered = atomic_load(&c->link->answered); /* before the read below */
        pump_link(c);
        if (!write_client(c)) {
            close_conn(g, c);
            return false;
        }
        if (c->abort_request && (!c->link || (in_flight(c) <= 1 && drained(c)))) {
            release_link(g, c); /* libmicrohttpd drops the half-sent request */
            c->abort_request = false;
        }
        if (c->resp_len == 0 && c->phase != PHASE_LINGER && !c->abort_request) {
            if ((c->phase == PHASE_IDLE || c->phase == PHASE_HEAD) && c->in_len > 0 &&
                !(c->close_after && c->forwarded > 0)) {
                if (c->phase == PHASE_IDLE) {
                    c->phase = PHASE_HEAD;
                    snug_http_head_reset(&c->head);
                    c->head_done = false;
                    c->t_head = t;
                }
                snug_http_result r = snug_http_head_read(&c->head, c->in, c->in_len, &g->o.limits);
                if (r == SNUG_HTTP_BAD) refuse(g, c, &c->head.refusal);
                else if (r == SNUG_HTTP_OK) admit(g, c, slot);
            }
            if ((c->phase == PHASE_BODY_LEN || c->phase == PHASE_BODY_CHUNKS) && c->link)
                forward_body(g, c);
        }
        size_t after = c->in_len + (c->link ? c->link->up_len + c->link->cl_len : 0) + c->resp_off;
        if (after == before && phase == c->phase) break;
    }
    return true;
}

/* The ends of c at time t: lingering after the gate's own answer or
 * libmicrohttpd's close, the client's half-close, a close asked for.
 * false when c was closed (or lingers: nothing more to do now). */
static bool may_go_on(snug_gate *g, gate_conn *c, double t)
{
    /* an answer of the gate's own is out, or libmicrohttpd closed after its
     * last one while the client still sends: drain what it sends, then
     * close (a close with bytes unread would reset, and the client could
     * lose the answer) */
    bool mhd_closed = c->link && c->link->up_eof && c->link->cl_len == 0 && c->resp_len == 0 &&
                      (c->phase != PHASE_IDLE || c->in_len > 0);
    if ((c->resp_len && c->resp_off == c->resp_len) || mhd_closed || c->phase == PHASE_LINGER) {
        if (c->phase != PHASE_LINGER) {
            shutdown(c->fd, SHUT_WR);
            release_link(g, c);
            c->phase = PHASE_LINGER;
            c->t_linger = t;
            c->in_len = 0;
        }
        if (c->client_eof || t - c->t_linger > LINGER_S) close_conn(g, c);
        return false;
    }
    /* the client half-closed: a head it began cannot end; otherwise, its answers first */
    if (c->client_eof && c->resp_len == 0) {
        if (c->phase == PHASE_HEAD || c->phase == PHASE_BODY_LEN || c->phase == PHASE_BODY_CHUNKS) {
            snug_http_refusal r = {400, "malformed_request", ""};
            snprintf(r.message, sizeof r.message, "the client closed its side in the middle of a "
                     "request's %s", c->phase == PHASE_HEAD && !c->head_done ? "head" : "body");
            c->abort_request = c->phase != PHASE_HEAD;
            refuse(g, c, &r);
        } else if (quiet(c)) {
            close_conn(g, c);
            return false;
        }
    }
    if (c->close_after && c->resp_len == 0 && c->forwarded > 0 && in_flight(c) == 0 && c->link &&
        drained(c) && c->phase == PHASE_IDLE) {
        close_conn(g, c);
        return false;
    }
    if (c->link && c->link->up_eof && c->link->cl_len == 0 && c->resp_len == 0) {
        close_conn(g, c); /* libmicrohttpd closed it (Connection: close, or an error) */
        return false;
    }
    return true;
}

/* c's deadlines at time t: writing, keep-alive, the head, the body, and
 * the least upload rate after its grace. */
static void deadlines(snug_gate *g, gate_conn *c, double t)
{
    bool owes = resp_may_go(c) || (c->link && c->link->cl_len > 0);
    if (owes && t - c->t_wrote > g->o.write_s) {
        close_conn(g, c);
        return;
    }
    if (!owes) c->t_wrote = t;
    if (quiet(c) && t - c->t_idle > g->o.keep_alive_s) {
        close_conn(g, c);
        return;
    }
    if (c->resp_len != 0) return;
    bool in_body = c->phase == PHASE_BODY_LEN || c->phase == PHASE_BODY_CHUNKS;
    if (((c->phase == PHASE_HEAD && c->head_done) || in_body) && t - c->t_body > g->o.body_s) {
        if (in_body) c->abort_request = true; /* libmicrohttpd has its head: it drops the request */
        time_out(g, c, "the request body did not arrive within %.0f s", g->o.body_s);
    } else if (c->phase == PHASE_HEAD && !c->head_done && in_flight(c) == 0 && t - c->t_head > g->o.header_s) {
        time_out(g, c, "the request head did not arrive within %.0f s", g->o.header_s);
    }
    if (c->resp_len != 0) return;
    /* a body slower than the least rate, after its grace: its bytes so far
     * against what the rate asks of the time since the grace ended */
    bool body_coming = (c->phase == PHASE_HEAD && c->head_done) || uploading(c);
    double late = t - c->t_body - g->o.upload_grace_s;
    if (body_coming && late > 0 && (double)(c->got - c->body_mark) < g->o.min_upload_rate * late) {
        c->abort_request = uploading(c);
        time_out(g, c, "the request body came at %.0f bytes/s, slower than the %.0f bytes/s the server asks for",
                 (double)(c->got - c->body_mark) / (t - c->t_body), g->o.min_upload_rate);
    }
}

/* Everything c can do now: read heads, forward, answer, close. */
static void advance(snug_gate *g, gate_conn *c, int slot)
{
    double t = now_s();
    if (!move_bytes(g, c, slot, t)) return;
    /* a head's deadline runs once the answers before it are out; idle time from the last */
    if (c->phase == PHASE_HEAD && in_flight(c) > 0) c->t_head = t;
    bool q = quiet(c);
    if (q && !c->was_quiet) c->t_idle = t;
    c->was_quiet = q;
    if (may_go_on(g, c, t)) deadlines(g, c, t);
}

/* What epoll should watch on c and its link now. */
static void rewatch(snug_gate *g, gate_conn *c, int slot)
{
    if (c->fd < 0) return;
    uint32_t want = 0;
    if (!c->client_eof && c->in_len < IN_BYTES) want |= EPOLLIN | EPOLLRDHUP;
    if ((c->link && c->link->cl_len > c->link->cl_off) || resp_may_go(c)) want |= EPOLLOUT;
    watch(g, c->fd, &c->watch, want, false, tag(KIND_CLIENT, slot, c->gen));
    gate_link *l = c->link;
    if (!l || l->fd < 0) return;
    uint32_t lw = 0;
    if (!l->up_eof && l->cl_len < PIPE_BYTES) lw |= EPOLLIN;
    if (l->up_len > l->up_off) lw |= EPOLLOUT;
    watch(g, l->fd, &l->watch, lw, true, tag(KIND_LINK, (int)(l - g->links), 0));
}

/* A new client: a free slot, or the place of the oldest idle connection,
 * or of the head that has waited longest; with none, a 503 at once. */
static void accept_one(snug_gate *g)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;
    int fd = accept4(g->o.listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) &&
        !g->accept_paused) { /* out of descriptors: the listening socket waits a tick, not spins */
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->o.listen_fd, NULL);
        g->accept_paused = true;
        g->accept_again = now_s() + TICK_MS / 1e3;
    }
    if (fd < 0) return;
    int slot = -1;
    for (int i = 0; i < g->o.pool && slot < 0; i++)
        if (g->conns[i].fd < 0) slot = i;
    if (slot < 0) slot = oldest_idle(g, NULL, false);
    if (slot < 0) { /* no idle one: the head that has waited longest */
        for (int i = 0; i < g->o.pool; i++) {
            const gate_conn *c = &g->conns[i];
            if (c->phase == PHASE_HEAD && in_flight(c) == 0 && c->resp_len == 0 &&
                (slot < 0 || c->t_head < g->conns[slot].t_head))
                slot = i;
        }
    }
    if (slot < 0) {
        static const char busy_msg[] =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 129\r\n"
            "Connection: close\r\nRetry-After: 1\r\n\r\n{\"error\":{\"message\":\"the server holds all "
            "the connections it can; try again\",\"type\":\"server_error\",\"param\":null,\"code\":"
            "\"too_many_connections\"}}";
        if (send(fd, busy_msg, sizeof busy_msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* gone */ }
        close(fd);
        return;
    }
    gate_conn *c = &g->conns[slot];
    close_conn(g, c);
    char *in = c->in;
    uint32_t gen = c->gen + 1;
    *c = (gate_conn){.fd = fd, .gen = gen, .addr = addr, .addr_len = len, .phase = PHASE_IDLE,
                     .in = in, .was_quiet = true};
    c->t_idle = c->t_wrote = now_s();
    atomic_fetch_add(&g->open, 1);
    rewatch(g, c, slot);
}

static void *gate_main(void *arg)
{
    snug_gate *g = arg;
    struct epoll_event ev[EVENTS];
    double stop_at = 0;
    for (;;) {
        if (atomic_load(&g->stop)) {
            if (stop_at == 0) {
                stop_at = now_s() + g->flush_s;
                epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->o.listen_fd, NULL);
            }
            bool owed = false; /* answers being written, buffered or still to come */
            for (int i = 0; i < g->o.pool; i++) {
                const gate_conn *c = &g->conns[i];
                owed |= c->fd >= 0 && (in_flight(c) > 0 || !drained(c) || c->resp_len > c->resp_off);
            }
            if (!owed || now_s() > stop_at) break;
        }
        if (g->accept_paused && !atomic_load(&g->stop) && now_s() >= g->accept_again) {
            struct epoll_event lev = {.events = EPOLLIN, .data.u64 = tag(KIND_LISTEN, 0, 0)};
            g->accept_paused = epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->o.listen_fd, &lev) != 0;
        }
        int n = epoll_wait(g->epfd, ev, EVENTS, TICK_MS);
        for (int k = 0; k < n; k++) {
            int kind = (int)(ev[k].data.u64 >> 56), i = (int)(uint32_t)ev[k].data.u64;
            uint32_t gen = (uint32_t)(ev[k].data.u64 >> 32) & 0xffffff;
            if (kind == KIND_LISTEN) {
                for (int a = 0; a < 16; a++) accept_one(g);
            } else if (kind == KIND_WAKE) {
                uint64_t v;
                if (read(g->wake_fd, &v, sizeof v) < 0) { /* nothing to take */ }
            } else if (kind == KIND_CLIENT && g->conns[i].fd >= 0 &&
                       (g->conns[i].gen & 0xffffff) == gen) {
                gate_conn *c = &g->conns[i];
                if ((ev[k].events & (EPOLLERR | EPOLLHUP)) || !read_client(g, c)) close_conn(g, c);
            }
        }
        for (int i = 0; i < g->o.pool; i++) {
            gate_conn *c = &g->conns[i];
            if (c->fd < 0) continue;
            advance(g, c, i);
            rewatch(g, c, i);
        }
        reap_links(g);
    }
    for (int i = 0; i < g->o.pool; i++) close_conn(g, &g->conns[i]);
    return NULL;
}

snug_status snug_gate_start(const snug_gate_opts *o, snug_gate **out, snug_error *err)
{
    *out = NULL;
    snug_status st = SNUG_OK;
    size_t conns_at, links_at, in_at, pipe_at, total;
    snug_gate *g = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *g, err);
    if (!g) {
        close(o->listen_fd);
        return snug_error_prefix(err, SNUG_NOMEM, "server: ");
    }
    g->o = *o;
    g->epfd = g->wake_fd = -1;
    g->n_links = snug_gate_links(o);
    pthread_mutex_init(&g->mu, NULL);
    if (!layout(o, &conns_at, &links_at, &in_at, &pipe_at, &total)) {
        st = snug_errorf(err, SNUG_INVALID, "server: %d connections is too many", o->pool);
        goto fail;
    }
    unsigned char *b = g->block = snug_mem_alloc(SNUG_MEM_OTHER, total, err);
    if (!b) {
        st = snug_error_prefix(err, SNUG_NOMEM, "server: the connections' buffers: ");
        goto fail;
    }
    g->conns = (gate_conn *)(b + conns_at);
    g->links = (gate_link *)(b + links_at);
    for (int i = 0; i < o->pool; i++)
        g->conns[i] = (gate_conn){.fd = -1, .in = (char *)b + in_at + (size_t)i * IN_BYTES};
    for (int i = 0; i < g->n_links; i++) {
        gate_link *l = &g->links[i];
        *l = (gate_link){.user = o->user, .wake_fd = -1, .state = LINK_FREE, .fd = -1, .mhd_fd = -1, .slot = -1,
                         .to_up = (char *)b + pipe_at + (size_t)(2 * i) * PIPE_BYTES,
                         .to_client = (char *)b + pipe_at + (size_t)(2 * i + 1) * PIPE_BYTES};
        atomic_init(&l->answered, 0);
        atomic_init(&l->mhd_open, false);
        atomic_init(&l->mhd_started, false);
    }
    if (getrandom(&g->id_key, sizeof g->id_key, GRND_NONBLOCK) != (ssize_t)sizeof g->id_key)
        g->id_key = (uint64_t)snug_now_seconds() * 1000003u ^ (uint64_t)getpid() << 32;
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g->epfd < 0 || g->wake_fd < 0) {
        st = snug_errorf(err, SNUG_IO, "server: cannot make its event set: %s", strerror(errno));
        goto fail;
    }
    for (int i = 0; i < g->n_links; i++) g->links[i].wake_fd = g->wake_fd;
    set_nonblocking(o->listen_fd);
    struct epoll_event lev = {.events = EPOLLIN, .data.u64 = tag(KIND_LISTEN, 0, 0)};
    struct epoll_event wev = {.events = EPOLLIN, .data.u64 = tag(KIND_WAKE, 0, 0)};
    epoll_ctl(g->epfd, EPOLL_CTL_ADD, o->listen_fd, &lev);
    epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->wake_fd, &wev);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK_BYTES);
    g->started = pthread_create(&g->thread, &attr, gate_main, g) == 0;
    pthread_attr_destroy(&attr);
    if (!g->started) {
        st = snug_errorf(err, SNUG_IO, "server: cannot start its connection thread");
        goto fail;
    }
    *out = g;
    return SNUG_OK;
fail:
    snug_gate_free(g);
    return st;
}

void snug_gate_close(snug_gate *g, double flush_s)
{
    if (!g || g->closed) return;
    g->closed = true;
    if (g->started) {
        g->flush_s = flush_s;
        atomic_store(&g->stop, true);
        uint64_t one = 1;
        if (write(g->wake_fd, &one, sizeof one) < 0) { /* it wakes within its tick anyway */ }
        pthread_join(g->thread, NULL);
    }
    for (int i = 0; g->conns && i < g->o.pool; i++) close_conn(g, &g->conns[i]);
    close(g->o.listen_fd);
    if (g->epfd >= 0) close(g->epfd);
    g->epfd = -1;
}

void snug_gate_free(snug_gate *g)
{
    if (!g) return;
    snug_gate_close(g, 0);
    if (g->wake_fd >= 0) close(g->wake_fd);
    pthread_mutex_destroy(&g->mu);
    snug_mem_free(g->block);
    snug_mem_free(g);
}

int snug_gate_open_connections(snug_gate *g) { return g ? atomic_load(&g->open) : 0; }
