/*
 * cmd_serve.c: `snug serve [MODEL] [options]`: the memory plan, printed,
 * then the OpenAI-compatible server until SIGINT or SIGTERM.
 */
#include "cli.h"

#include "engine/engine.h"
#include "base/device.h"
#include "base/fileio.h"
#include "dist/agree.h"
#include "engine/plan_report.h"
#include "engine/timeline.h"
#include "server/server.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char g_usage[] =
    "snug serve [MODEL] [--host 127.0.0.1] [--port 8000] [--api-key KEY]\n"
    "              [--served-model-name NAME] [--max-connections N] [--max-body-bytes BYTES]\n"
    "              [--server-memory BYTES] [--timeout-seconds S] [--drain-seconds S]\n"
    "              [--keep-alive-seconds S] [--header-timeout-seconds S] [--max-uploads N]\n"
    "              [--min-upload-rate BYTES_PER_S] [--upload-grace-seconds S] [--metrics-no-auth]\n"
    "              [--max-queue N] [--chat-template FILE] [--no-prefix-caching]\n"
    "              [--no-access-log] [--allowed-origins '*'|ORIGIN,...] [--populate-before-ready]\n"
    "              [--timeline]\n"
    "              [memory and scheduler options as for snug profile]\n"
    "              [--tp N [--step-timeout S]]\n"
    "  MODEL defaults to the bundled models/stories260K; the model's name in the API is the\n"
    "  directory's base name unless --served-model-name says otherwise; --tp N splits the model\n"
    "  over N processes started by mpirun -np N: rank 0 serves, every rank computes each step,\n"
    "  and a rank that does not take part in a step within S seconds (default 60), or one that\n"
    "  dies (mpirun's signals to the others then say so), fails the server (/health 503,\n"
    "  requests end with an error, every process exits); the KV cache is made resident as\n"
    "  serving begins, 64 MiB between steps (with one process), unless --populate-before-ready;\n"
    "  --timeline records memory over the start-up, drawn at /timeline.svg (the page at / links it)";

/* The last part of a path, without trailing slashes, into buf. */
static const char *base_name(const char *path, char *buf, size_t size)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    snprintf(buf, size, "%.*s", (int)(n - b), path + b);
    return buf;
}

enum { BUSY_LOG_SECONDS = 10 };

/* The engine's counters at the last busy line. */
typedef struct busy_log {
    double t;
    int64_t prompt_tokens, generation_tokens, steps;
} busy_log;

/* Every BUSY_LOG_SECONDS in which the engine ran steps, a line to stderr
 * (as vLLM logs): sequences running and waiting, requests queued, the KV
 * cache's use, prompt and generation tokens/s over the interval, and the
 * prefix cache's hit rate so far. */
static void log_busy(snug_engine *e, busy_log *last)
{
    double now = snug_now_seconds();
    if (now - last->t < BUSY_LOG_SECONDS) return;
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    double dt = now - last->t;
    if (c.steps != last->steps)
        fprintf(stderr, "snug: running %d, waiting %d, queued %d; kv cache %.1f%% used (%d of %d "
                "blocks, %d cached); prompt %.1f tokens/s, generation %.1f tokens/s; prefix "
                "cache hits %.1f%%\n", c.running, c.waiting, c.queued,
                c.kv_blocks_total ? 100.0 * c.kv_blocks_used / c.kv_blocks_total : 0.0,
                c.kv_blocks_used, c.kv_blocks_total, c.kv_blocks_cached,
                (double)(c.prompt_tokens - last->prompt_tokens) / dt,
                (double)(c.generation_tokens - last->generation_tokens) / dt,
                c.prefix_queried_tokens ? 100.0 * c.prefix_hit_tokens / c.prefix_queried_tokens : 0.0);
    *last = (busy_log){now, c.prompt_tokens, c.generation_tokens, c.steps};
}

/* With tensor parallelism, how long a step's communication may wait once
 * the launcher has signalled that it ends the run. Open MPI's mpirun and
 * orted do so when a rank dies (or mpirun is told to stop): SIGCONT to
 * every other process at once, SIGTERM a second later, SIGKILL a second
 * after that (odls_base_sigkill_timeout). A dead rank is no MPI error (the
 * survivors only wait), so that signal is rank 0's cue: the engine must
 * fail, every request be told and the process exit well within the 2 s. */
static const double LAUNCHER_GRACE_SECONDS = 0.5;

/* How long /health answers 503 after the engine failed, before the server
 * stops: shorter when the launcher is ending the run and will kill us. */
static const double FAILED_LINGER_SECONDS = 1, FAILED_LINGER_LAUNCHER_SECONDS = 0.5;

/* Serves until a signal or a failed engine. The first SIGINT or SIGTERM
 * drains: /health and new completions answer 503 while what runs goes on,
 * for up to drain_s seconds; a second one, or the deadline, stops at once,
 * cutting what still runs (each request is told). With several ranks
 * (several), a SIGCONT, SIGTERM or SIGINT that the launcher (our parent)
 * sends has the engine check that every rank still answers within
 * LAUNCHER_GRACE_SECONDS (snug_engine_check_ranks): one that died fails the
 * engine as the step watchdog does. Stops the server, says how in a last
 * line, and returns the exit status. */
/* Draws the start-up's memory over time (the allocator's log, up to
 * ready) into so->timeline_svg for GET /timeline.svg, and stops the log.
 * Fails as snug_timeline_svg does. */
static snug_status draw_timeline(const char *dir, const snug_plan_report *r, snug_server_opts *so, snug_error *err)
{
    char title[512], sub[256];
    snprintf(title, sizeof title, "snug serve %s: memory over the start-up", dir);
    snug_timeline_opts to = {.title = title, .subtitle = snug_plan_report_line(r, sub, sizeof sub),
                             .budget = r->sizes.budget, .capacity = r->capacity};
    snug_mem_trace t;
    snug_mem_trace_get(&t);
    char *svg = NULL;
    size_t len = 0;
    snug_status st = snug_timeline_svg(&t, &to, &svg, &len, err);
    snug_mem_trace_stop();
    so->timeline_svg = svg;
    so->timeline_svg_len = len;
    return st;
}

static int serve_until_stopped(snug_server *s, snug_engine *e, const sigset_t *stop, double drain_s,
                               bool several, bool *launcher_ending)
{
    const struct timespec tick = {0, 100 * 1000 * 1000};
    double deadline = 0; /* while draining: when the drain ends */
    const char *how = NULL;
    int rc = 0;
    *launcher_ending = false;
    busy_log busy = {.t = snug_now_seconds()};
    for (;;) {
        siginfo_t si;
        int sig = sigtimedwait(stop, &si, &tick);
        log_busy(e, &busy);
        const char *name = sig == SIGINT ? "SIGINT" : sig == SIGCONT ? "SIGCONT" : "SIGTERM";
        if (sig > 0 && several && si.si_code == SI_USER && si.si_pid == getppid()) {
            fprintf(stderr, "snug: %s from the launcher (pid %d), which ends the run: checking "
                    "that every rank still answers within %.1f s\n", name, (int)si.si_pid,
                    LAUNCHER_GRACE_SECONDS);
            snug_engine_check_ranks(e, LAUNCHER_GRACE_SECONDS);
            *launcher_ending = true;
        }
        if ((sig == SIGINT || sig == SIGTERM) && deadline == 0) {
            fprintf(stderr, "snug: %s: draining %d requests for up to %.0f s (%s again stops at "
                    "once)\n", name, snug_server_active(s), drain_s, name);
            snug_server_drain(s);
            deadline = snug_now_seconds() + drain_s;
        } else if (sig == SIGINT || sig == SIGTERM) {
            how = "at a second signal";
        } else if (snug_engine_failed(e)) { /* its requests have ended with an error */
            fprintf(stderr, "snug: the engine failed: %s\n", snug_engine_error(e));
            double linger = *launcher_ending ? FAILED_LINGER_LAUNCHER_SECONDS : FAILED_LINGER_SECONDS;
            struct timespec ts = {(time_t)linger, (long)((linger - (time_t)linger) * 1e9)};
            nanosleep(&ts, NULL); /* /health says 503 meanwhile */
            how = "after the engine failed";
            rc = 1;
        } else if (deadline > 0 && snug_server_active(s) == 0) {
            how = "drained";
        } else if (deadline > 0 && snug_now_seconds() >= deadline) {
            how = "at the drain's deadline";
        }
        if (how) break;
    }
    int cut = snug_server_stop(s);
    fprintf(stderr, "snug: stopped %s%s", how, cut ? "" : "\n");
    if (cut) fprintf(stderr, ", %d requests cut (told server_shutdown)\n", cut);
    return rc;
}

int snug_cmd_serve(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    const char *dir = NULL;
    snug_engine_opts eo = {.plan = {.isa = -1, .populate_after_ready = true}};
    cli_progress progress;
    cli_progress_install(&eo.plan, &progress);
    snug_server_opts so = {.port = 8000, .access_log = stdout, .build_commit = cli_build_commit,
                           .build_options = cli_build_options};
    size_t server_memory = 0;
    double drain_s = 30;
    bool timeline = false;
    const char *template_path = NULL;
    char *template_text = NULL;
    cli_tp tp = {0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        int64_t x;
        int rc = cli_plan_option(argc, argv, &i, &eo.plan, g_usage);
        if (rc == 0) rc = cli_tp_option(argc, argv, &i, &tp, g_usage);
        if (rc > 1) return rc;
        if (rc == 1) {
            continue;
        } else if ((v = cli_option(argc, argv, &i, "--host"))) {
            so.host = v;
        } else if ((v = cli_option(argc, argv, &i, "--port"))) {
            if (!cli_parse_int(v, 0, 65535, &x))
                return cli_usage(g_usage, "--port expects 0 to 65535, got '%s'", v);
            so.port = (int)x;
        } else if ((v = cli_option(argc, argv, &i, "--api-key"))) {
            so.api_key = v;
        } else if ((v = cli_option(argc, argv, &i, "--served-model-name"))) {
            so.model_name = v;
        } else if ((v = cli_option(argc, argv, &i, "--max-connections"))) {
            if (!cli_parse_int(v, 1, 4096, &x))
                return cli_usage(g_usage, "--max-connections expects 1 to 4096, got '%s'", v);
            so.max_connections = (int)x;
        } else if ((v = cli_option(argc, argv, &i, "--max-body-bytes"))) {
            if (!snug_parse_bytes(v, &so.max_body_bytes) || so.max_body_bytes < 1024)
                return cli_usage(g_usage, "--max-body-bytes expects a byte count of 1KiB or more, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--server-memory"))) {
            if (!snug_parse_bytes(v, &server_memory))
                return cli_usage(g_usage, "--server-memory expects a byte count, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--timeout-seconds"))) {
            if (!cli_parse_int(v, 1, 86400, &x))
                return cli_usage(g_usage, "--timeout-seconds expects 1 to 86400, got '%s'", v);
            so.timeout_s = (double)x;
        } else if ((v = cli_option(argc, argv, &i, "--keep-alive-seconds"))) {
            if (!cli_parse_int(v, 1, 3600, &x))
                return cli_usage(g_usage, "--keep-alive-seconds expects 1 to 3600, got '%s'", v);
            so.keep_alive_s = (double)x;
        } else if ((v = cli_option(argc, argv, &i, "--header-timeout-seconds"))) {
            if (!cli_parse_int(v, 1, 3600, &x))
                return cli_usage(g_usage, "--header-timeout-seconds expects 1 to 3600, got '%s'", v);
            so.header_timeout_s = (double)x;
        } else if ((v = cli_option(argc, argv, &i, "--max-uploads"))) {
            if (!cli_parse_int(v, 1, 4096, &x))
                return cli_usage(g_usage, "--max-uploads expects 1 to 4096, got '%s'", v);
            so.max_uploads = (int)x;
        } else if ((v = cli_option(argc, argv, &i, "--min-upload-rate"))) {
            if (!cli_parse_int(v, 1, 1 << 30, &x))
                return cli_usage(g_usage, "--min-upload-rate expects 1 to 1073741824 bytes/s, got '%s'", v);
            so.min_upload_rate = (double)x;
        } else if ((v = cli_option(argc, argv, &i, "--upload-grace-seconds"))) {
            if (!cli_parse_int(v, 1, 3600, &x))
                return cli_usage(g_usage, "--upload-grace-seconds expects 1 to 3600, got '%s'", v);
            so.upload_grace_s = (double)x;
        } else if (strcmp(argv[i], "--metrics-no-auth") == 0) {
            so.metrics_no_auth = true;
        } else if ((v = cli_option(argc, argv, &i, "--drain-seconds"))) {
            if (!cli_parse_int(v, 0, 86400, &x))
                return cli_usage(g_usage, "--drain-seconds expects 0 to 86400, got '%s'", v);
            drain_s = (double)x;
        } else if ((v = cli_option(argc, argv, &i, "--chat-template"))) {
            template_path = v;
        } else if ((v = cli_option(argc, argv, &i, "--allowed-origins"))) {
            so.allowed_origins = v;
        } else if (strcmp(argv[i], "--no-access-log") == 0) {
            so.access_log = NULL;
        } else if (strcmp(argv[i], "--timeline") == 0) {
            timeline = true;
        } else if (strcmp(argv[i], "--populate-before-ready") == 0) {
            eo.plan.populate_after_ready = false;
        } else if ((v = cli_option(argc, argv, &i, "--max-queue"))) {
            if (!cli_parse_int(v, 1, 1 << 20, &x))
                return cli_usage(g_usage, "--max-queue expects 1 to 1048576, got '%s'", v);
            eo.max_queue = (int32_t)x;
        } else if (argv[i][0] == '-') {
            return cli_unknown_option(g_usage, CLI_PLAN_OPTIONS " " CLI_TP_OPTIONS, argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            return cli_usage(g_usage, "one model directory, got '%s' too", argv[i]);
        }
    }
    if (eo.plan.budget.memory_bytes && eo.plan.budget.fraction)
        return cli_usage(g_usage, "--memory and --memory-fraction: give one");
    if (so.api_key && !*so.api_key) return cli_usage(g_usage, "--api-key expects a key, got ''");
    if (server_memory && server_memory < snug_server_tracked_bytes_min(&so))
        return cli_usage(g_usage, "--server-memory %zu bytes cannot parse one body of "
                         "--max-body-bytes %zu: that needs %zu (the body and %d bytes of parse "
                         "a byte); raise --server-memory or lower --max-body-bytes", server_memory,
                         so.max_body_bytes ? so.max_body_bytes : (size_t)1 << 20,
                         snug_server_tracked_bytes_min(&so), SNUG_SERVER_PARSE_BYTES_PER_BYTE);
    if (!dir) dir = "models/stories260K";
    char name[256];
    if (!so.model_name) so.model_name = base_name(dir, name, sizeof name);
    snug_error err = {0};
    snug_comm *comm = NULL;
    if (cli_tp_open(&tp, &comm, &err) != SNUG_OK) return cli_fail_once(NULL, &err);
    eo.plan.comm = comm;
    size_t template_len = 0;
    snug_status tst = SNUG_OK;
    if (template_path && cli_rank(comm) == 0) { /* read before the plan, which counts it */
        tst = snug_file_read_all(template_path, 1 << 20, &template_text, &template_len, &err);
        so.chat_template = template_text;
    }
    tst = snug_dist_agree(comm, tst, &err); /* the other ranks learn how rank 0 did (it alone serves) */
    if (tst != SNUG_OK) {
        cli_fail_once(comm, &err);
        return cli_tp_end(comm, 1, false);
    }
    if (cli_rank(comm) > 0) { /* a follower: its shard of every step until rank 0 stops */
        eo.plan.on_phase = NULL; /* rank 0 tells */
        eo.plan.on_load_progress = NULL;
        sigset_t stop; /* a signal mpirun passes on is rank 0's to act on: it drains, then stops us */
        sigemptyset(&stop);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &stop, NULL);
        bool planned = false;
        if (snug_engine_follow(dir, &eo, &planned, &err) == SNUG_OK) return cli_tp_end(comm, 0, false);
        if (!planned) return cli_tp_end(comm, 1, false); /* rank 0 says why */
        fprintf(stderr, "snug: rank %d: %s\n", cli_rank(comm), err.msg);
        return cli_tp_end(comm, 1, true);
    }
    /* the server's share of the plan: what its connections hold outside the
     * allocator, and what its requests may allocate */
    eo.plan.server_untracked = snug_server_untracked_bytes(&so);
    so.request_memory = server_memory ? server_memory : snug_server_tracked_bytes_default(&so);
    eo.plan.server_tracked = so.request_memory + snug_server_gate_bytes(&so);

    /* the address first: one in use fails before the model is loaded (with
     * several ranks, rank 0's failure ends them all) */
    if (snug_server_listen(&so, &so.listen_fd, &err) != SNUG_OK) {
        cli_fail(&err);
        return cli_tp_end(comm, 1, comm && snug_comm_size(comm) > 1);
    }

    /* SIGINT and SIGTERM (and with several ranks SIGCONT, which still
     * continues the process) are taken by sigtimedwait below, in no thread */
    bool several = comm && snug_comm_size(comm) > 1;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    if (several) sigaddset(&stop, SIGCONT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    snug_engine *e = NULL;
    snug_server *s = NULL;
    if (timeline && snug_mem_trace_start(CLI_TIMELINE_EVENTS_DEFAULT, &err) != SNUG_OK) {
        snug_mem_free(template_text);
        cli_fail(&err);
        return cli_tp_end(comm, 1, several);
    }
    if (snug_engine_open(dir, &eo, &e, &err) != SNUG_OK) {
        snug_mem_trace_stop();
        snug_mem_free(template_text);
        cli_fail(&err);
        return cli_tp_end(comm, 1, false);
    }
    snug_plan_report_print(stdout, snug_engine_plan(e));
    if (timeline && draw_timeline(dir, snug_engine_plan(e), &so, &err) != SNUG_OK)
        fprintf(stderr, "snug: --timeline: %s (serving without it)\n", err.msg);
    int rc = 0;
    bool launcher_ending = false; /* the launcher signalled that it ends the run */
    if (snug_server_start(e, &so, &s, &err) != SNUG_OK) {
        rc = cli_fail(&err);
    } else {
        printf("serving %s as \"%s\" on http://%s:%d (server: %zu bytes of requests, %zu for "
               "%d connections%s)\n", dir, so.model_name, so.host ? so.host : "127.0.0.1",
               snug_server_port(s), eo.plan.server_tracked, eo.plan.server_untracked,
               so.max_connections ? so.max_connections : 32, comm ? ", tensor parallel" : "");
        fflush(stdout);
        rc = serve_until_stopped(s, e, &stop, drain_s, several, &launcher_ending);
    }
    /* a failed step may have left other ranks inside it: they cannot be
     * stopped, only ended (and MPI may still use the engine's buffers) */
    if (snug_engine_failed(e) && several) {
        if (launcher_ending) snug_comm_exit(rc); /* it ends the others, and would keep an abort waiting */
        return cli_tp_end(comm, rc, true);
    }
    snug_engine_close(e);
    snug_mem_free(template_text);
    snug_mem_free((void *)so.timeline_svg);
    return cli_tp_end(comm, rc, false);
}
