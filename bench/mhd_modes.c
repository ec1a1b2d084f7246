/*
 * mhd_modes.c: libmicrohttpd's two ways of serving many streams, side by
 * side, as snug's gate hands connections over (socket pairs given to
 * MHD_add_connection): (1) a thread per connection whose content reader
 * blocks until the next token is due (what `snug serve` does), and (2) the
 * internal epoll thread pool (2 threads) with a connection suspended while
 * it waits and resumed by a ticker thread when its next token is due.
 * Each mode serves N concurrent streams (default 256) of T tokens (default
 * 100), one token every I ms (default 20: a batch decoding at 50 tokens/s
 * per sequence); the clients are one epoll loop in this process. Reported
 * per mode: the threads and the resident memory it added at its peak, the
 * CPU seconds it spent (against the time the streams took: the cores it
 * kept busy), the wall time against the ideal T x I, and the worst gap
 * between two tokens of one stream against I. The two modes run in the
 * same process one after the other, so their figures compare; absolute
 * ones move with the machine.
 *
 *   build/bench/mhd_modes [N] [T] [I_ms]
 */
#include <microhttpd.h>

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

enum { MODE_THREADS, MODE_EPOLL, MODE_EPOLL_POLLING };

typedef struct bench bench;

typedef struct stream {
    bench *b;
    struct MHD_Connection *c;
    double t0;                   /* when its first token was due */
    int sent;
    atomic_bool waiting;         /* suspended until its next token is due */
} stream;

struct bench {
    int mode, n, tokens;
    double interval;
    stream *streams;
    atomic_int n_streams;
    pthread_mutex_t mu;
    atomic_bool stop;
    struct MHD_Daemon *d;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    double d = t - now_s();
    if (d <= 0) return;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The stream's next bytes: a token event when it is due (the thread mode
 * sleeps until then; the epoll mode suspends the connection instead). */
static ssize_t read_tokens(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream *s = cls;
    if (s->sent == s->b->tokens) return MHD_CONTENT_READER_END_OF_STREAM;
    double due = s->t0 + s->sent * s->b->interval;
    if (s->b->mode == MODE_THREADS) {
        sleep_until(due);
    } else if (now_s() < due && s->b->mode == MODE_EPOLL_POLLING) {
        return 0; /* nothing yet: libmicrohttpd asks again (at once) */
    } else if (now_s() < due) {
        MHD_suspend_connection(s->c); /* then marked: the ticker resumes only what is suspended */
        atomic_store(&s->waiting, true);
        return 0;
    }
    int n = snprintf(buf, max, "data: {\"token\": %d}\n\n", s->sent);
    s->sent++;
    return n;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)url, (void)method, (void)version, (void)upload, (void)upload_size;
    bench *b = cls;
    if (!*con_cls) {
        *con_cls = c;
        return MHD_YES;
    }
    int i = atomic_fetch_add(&b->n_streams, 1);
    stream *s = &b->streams[i];
    s->b = b;
    s->c = c;
    s->t0 = now_s();
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256, read_tokens, s, NULL);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    enum MHD_Result ok = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ok;
}

/* The epoll mode's ticker: resumes each waiting stream when its token is due. */
static void *ticker(void *arg)
{
    bench *b = arg;
    while (!atomic_load(&b->stop)) {
        double t = now_s();
        int n = atomic_load(&b->n_streams);
        for (int i = 0; i < n; i++) {
            stream *s = &b->streams[i];
            if (atomic_load(&s->waiting) && t >= s->t0 + s->sent * b->interval) {
                atomic_store(&s->waiting, false);
                MHD_resume_connection(s->c);
            }
        }
        sleep_until(t + 0.001);
    }
    return NULL;
}

static long status_field(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = 0;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0) v = strtol(line + n, NULL, 10);
    if (f) fclose(f);
    return v;
}

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec * 1e-6;
}

/* Runs one mode; prints its line. */
static int run(int mode, int n, int tokens, double interval)
{
    static bench runs[3]; /* outlives run(): a stuck daemon's workers may still look */
    bench *b = &runs[mode];
    *b = (bench){.mode = mode, .n = n, .tokens = tokens, .interval = interval};
    b->streams = calloc((size_t)n, sizeof *b->streams);
    long threads0 = status_field("Threads:"), rss0 = status_field("VmRSS:");
    double cpu0 = cpu_s();
    unsigned flags = mode == MODE_THREADS
                         ? MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD
                         : MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    b->d = mode == MODE_THREADS
              ? MHD_start_daemon(flags | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC, 0, NULL, NULL, on_request, b,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)n + 8,
                                 MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1 << 20), MHD_OPTION_END)
              : MHD_start_daemon(flags | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC, 0, NULL, NULL, on_request, b,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)n + 8,
                                 MHD_OPTION_THREAD_POOL_SIZE, 2u, MHD_OPTION_END);
    if (!b->d) {
        fprintf(stderr, "mhd_modes: libmicrohttpd would not start in mode %d\n", mode);
        return 1;
    }
    pthread_t tick;
    bool ticking = mode == MODE_EPOLL && pthread_create(&tick, NULL, ticker, b) == 0;
    const char *name = mode == MODE_THREADS ? "thread per connection"
                       : mode == MODE_EPOLL ? "epoll pool of 2, suspended while waiting"
                                            : "epoll pool of 2, the reader asked again";
    int ep = epoll_create1(0);
    int *fds = calloc((size_t)n, sizeof *fds), *events = calloc((size_t)n, sizeof *events);
    double *last = calloc((size_t)n, sizeof *last), worst_gap = 0, t0 = now_s();
    char *prev = calloc((size_t)n, 1);
    static const char req[] = "GET /stream HTTP/1.1\r\nHost: bench\r\n\r\n";
    struct sockaddr_in addr = {.sin_family = AF_INET};
    for (int i = 0; i < n; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return 1;
        fds[i] = sv[0];
        if (MHD_add_connection(b->d, sv[1], (struct sockaddr *)&addr, sizeof addr) != MHD_YES) return 1;
        if (write(sv[0], req, sizeof req - 1) < 0) return 1;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev);
        last[i] = now_s();
    }
    int done = 0;
    long threads_peak = 0, rss_peak = 0;
    char buf[65536];
    while (done < n && now_s() - t0 < tokens * interval * 3 + 5) {
        struct epoll_event ev[64];
        int k = epoll_wait(ep, ev, 64, 100);
        double t = now_s();
        for (int e = 0; e < k; e++) {
            int i = (int)ev[e].data.u32;
            ssize_t r = read(fds[i], buf, sizeof buf - 1);
            if (r <= 0) continue;
            for (ssize_t q = 0; q < r; q++) { /* an event ends in a blank line, however it is cut */
                bool end = buf[q] == '\n' && prev[i] == '\n';
                prev[i] = buf[q];
                if (!end) continue;
                if (events[i] > 0 && t - last[i] > worst_gap) worst_gap = t - last[i];
                last[i] = t;
                if (++events[i] == tokens) done++;
            }
        }
        long th = status_field("Threads:"), rs = status_field("VmRSS:");
        if (th > threads_peak) threads_peak = th;
        if (rs > rss_peak) rss_peak = rs;
    }
    double wall = now_s() - t0, cpu = cpu_s() - cpu0;
    atomic_store(&b->stop, true);
    if (ticking) pthread_join(tick, NULL);
    for (int i = 0; i < n; i++) close(fds[i]);
    if (done == n) MHD_stop_daemon(b->d); /* else a worker may be stuck: the daemon is left */
    close(ep);
    printf("| %s | %d of %d | %ld | %.1f | %.2f (%.2f cores) | %.2f (ideal %.2f) | %.0f (every %.0f) |\n",
           name, done, n,
           threads_peak - threads0, (double)(rss_peak - rss0) / 1024.0, cpu, cpu / wall, wall,
           tokens * interval, worst_gap * 1e3, interval * 1e3);
    if (done == n) free(b->streams); /* else a stuck worker may still read it: left to the exit */
    free(fds), free(events), free(last), free(prev);
    return done == n ? 0 : 1;
}

/* The suspending mode's watchdog: libmicrohttpd 0.9.75 can deadlock there. */
static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "| epoll pool of 2, suspended while waiting | stuck: a worker waits "
                              "on a mutex for good (libmicrohttpd's suspend from a content "
                              "reader) | | | | | |\n";
    if (write(STDOUT_FILENO, msg, sizeof msg - 1) < 0) { /* nothing more to do */ }
    _exit(1);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 256, tokens = argc > 2 ? atoi(argv[2]) : 100;
    double interval = (argc > 3 ? atof(argv[3]) : 20) / 1e3;
    if (n < 1 || tokens < 1 || interval <= 0) {
        fprintf(stderr, "usage: mhd_modes [N] [T] [I_ms]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("%d streams of %d tokens, one every %.0f ms\n\n", n, tokens, interval * 1e3);
    printf("| mode | streams done | threads added | resident MiB added | CPU s | wall s | worst gap ms |\n");
    printf("|---|---|---|---|---|---|---|\n");
    int rc = run(MODE_THREADS, n, tokens, interval);
    rc |= run(MODE_EPOLL_POLLING, n, tokens, interval);
    signal(SIGALRM, on_alarm);
    alarm((unsigned)(tokens * interval * 3 + 10));
    rc |= run(MODE_EPOLL, n, tokens, interval); /* last: it may deadlock */
    alarm(0);
    return rc;
}
