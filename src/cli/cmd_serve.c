/*
 * cmd_serve.c: `snug serve [MODEL] [options]`: the memory plan, printed,
 * then the OpenAI-compatible server until SIGINT or SIGTERM.
 */
#include "cli.h"

#include "engine/engine.h"
#include "base/mem.h"
#include "base/fileio.h"
#include "dist/agree.h"
#include "engine/plan_report.h"
#include "engine/timeline.h"
#include "formats/pooling.h"
#include "server/server.h"

#include <limits.h>
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
    "              [--max-queue N] [--chat-template FILE] [--reasoning-format auto|none]\n"
    "              [--no-prefix-caching] [--no-access-log] [--allowed-origins '*'|ORIGIN,...]\n"
    "              [--populate-before-ready] [--timeline]\n"
    "              [--embeddings] [--pooling last|mean|first] [--no-normalize]\n"
    "              [--rerank [--rerank-tokens YES,NO]]\n"
    "              [memory and scheduler options as for snug profile]\n"
    CLI_SPEC_USAGE
    "              [--tp N [--step-timeout S]]\n"
    "  MODEL defaults to the bundled " CLI_BUNDLED_MODEL "; the model's name in the API is the\n"
    "  directory's base name unless --served-model-name says otherwise; --tp N splits the model\n"
    "  over N processes started by mpirun -np N: rank 0 serves, every rank computes each step,\n"
    "  and a rank that does not take part in a step within S seconds (default 60), or one that\n"
    "  dies (mpirun's signals to the others then say so), fails the server (/health 503,\n"
    "  requests end with an error, every process exits); the KV cache is made resident as\n"
    "  serving begins (with one process: 16 MiB at a time while idle, between steps when the free\n"
    "  resident blocks run short), unless --populate-before-ready;\n"
    "  --timeline records memory over the start-up, drawn at /timeline.svg (the page at / links it);\n"
    "  --reasoning-format auto (the default) splits a thinking model's replies (its template shows\n"
    "  <think>...</think>) into reasoning_content and content, none leaves them whole in content;\n"
    "  POST /v1/embeddings serves an embedding model (sentence-transformers' modules.json in its\n"
    "  directory: its pooling and normalization), or any model with --embeddings; --pooling\n"
    "  (default: the model's, else last) and --no-normalize (default: the model's, else scaled to\n"
    "  length 1) choose for it; POST /v1/rerank serves with --rerank, for a reranker that answers yes\n"
    "  or no to Qwen3-Reranker's prompt (--rerank-tokens: its answers, default yes,no, one token each)";

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
                c.kv.total ? 100.0 * c.kv.used / c.kv.total : 0.0,
                c.kv.used, c.kv.total, c.kv.cached,
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

/* Draws the start-up's memory over time (the allocator's log, up to
 * ready) into so->timeline_svg for GET /timeline.svg, and stops the log.
 * Fails as snug_timeline_svg does. */
static snug_status draw_timeline(const char *dir, const snug_plan_report *r, snug_server_opts *so, snug_error *err)
{
    char title[512], sub[256];
    snprintf(title, sizeof title, "snug serve %s: memory over the start-up", dir);
    snug_timeline_opts to = {.title = title, .subtitle = snug_plan_report_line(r, sub, sizeof sub),
                             .budget = r->sizes.budget, .capacity = r->capacity,
                             .kv_window_block = r->window_kv_block};
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

/* Serves until a signal or a failed engine. The first SIGINT or SIGTERM
 * drains: /health and new completions answer 503 while what runs goes on,
 * for up to drain_s seconds; a second one, or the deadline, stops at once,
 * cutting what still runs (each request is told). With several ranks
 * (several), a SIGCONT, SIGTERM or SIGINT that the launcher (our parent)
 * sends has the engine check that every rank still answers within
 * LAUNCHER_GRACE_SECONDS (snug_engine_check_ranks): one that died fails the
 * engine as the step watchdog does. Stops the server, says how in a last
 * line, and returns the exit status. */
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

/* What the command line asked of serve. */
typedef struct serve_args {
    const char *dir;              /* the model directory */
    snug_engine_opts eo;
    snug_server_opts so;
    size_t server_memory;         /* --server-memory; 0: the server's default */
    double drain_s;               /* --drain-seconds */
    bool timeline;                /* --timeline */
    const char *template_path;    /* --chat-template, or NULL */
    cli_tp tp;
    cli_progress progress;        /* eo.plan's on_phase_ctx */
    char bundled[PATH_MAX + 64];  /* dir when it is the bundled model beside the program */
    char name[256];               /* so.model_name when it is dir's base name */
    bool pooling_given;           /* --pooling */
    bool no_normalize;            /* --no-normalize */
    char rerank_yes[64];          /* --rerank-tokens' first */
} serve_args;

/* The server's own option at argv[*at] into a; returns as cli_int_option
 * does. */
static int server_option(int argc, char **argv, int *at, serve_args *a)
{
    const char *v;
    int64_t x = 0;
    int rc = 1;
    int i = *at;
    snug_server_opts *so = &a->so;
    if ((v = cli_option(argc, argv, &i, "--host"))) {
        so->host = v;
    } else if ((v = cli_option(argc, argv, &i, "--api-key"))) {
        so->api_key = v;
    } else if ((v = cli_option(argc, argv, &i, "--served-model-name"))) {
        so->model_name = v;
    } else if ((v = cli_option(argc, argv, &i, "--max-body-bytes"))) {
        if (!snug_parse_bytes(v, &so->max_body_bytes) || so->max_body_bytes < 1024)
            return cli_usage(g_usage, "--max-body-bytes expects a byte count of 1KiB or more, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--min-upload-rate"))) {
        if (!cli_parse_int(v, 1, 1 << 30, &x))
            return cli_usage(g_usage, "--min-upload-rate expects 1 to 1073741824 bytes/s, got '%s'", v);
        so->min_upload_rate = (double)x;
    } else if (strcmp(argv[i], "--metrics-no-auth") == 0) {
        so->metrics_no_auth = true;
    } else if ((v = cli_option(argc, argv, &i, "--chat-template"))) {
        a->template_path = v;
    } else if ((v = cli_option(argc, argv, &i, "--reasoning-format"))) {
        if (strcmp(v, "none") != 0 && strcmp(v, "auto") != 0)
            return cli_usage(g_usage, "--reasoning-format expects auto or none, got '%s'", v);
        so->reasoning_none = strcmp(v, "none") == 0;
    } else if ((v = cli_option(argc, argv, &i, "--allowed-origins"))) {
        so->allowed_origins = v;
    } else if (strcmp(argv[i], "--no-access-log") == 0) {
        so->access_log = NULL;
    } else if (strcmp(argv[i], "--timeline") == 0) {
        a->timeline = true;
    } else if (strcmp(argv[i], "--populate-before-ready") == 0) {
        a->eo.plan.populate_after_ready = false;
    } else if (strcmp(argv[i], "--embeddings") == 0) {
        so->embeddings = true;
    } else if (strcmp(argv[i], "--no-normalize") == 0) {
        a->no_normalize = true;
    } else if (strcmp(argv[i], "--rerank") == 0) {
        so->rerank = true;
    } else if ((v = cli_option(argc, argv, &i, "--rerank-tokens"))) {
        const char *comma = strchr(v, ',');
        if (!comma || comma == v || !comma[1] || strchr(comma + 1, ',') ||
            comma - v >= (ptrdiff_t)sizeof a->rerank_yes)
            return cli_usage(g_usage, "--rerank-tokens expects YES,NO (two answers), got '%s'", v);
        snprintf(a->rerank_yes, sizeof a->rerank_yes, "%.*s", (int)(comma - v), v);
        so->rerank_yes = a->rerank_yes;
        so->rerank_no = comma + 1;
    } else if ((v = cli_option(argc, argv, &i, "--pooling"))) {
        so->pooling = strcmp(v, "last") == 0 ? SNUG_POOL_LAST : strcmp(v, "mean") == 0 ? SNUG_POOL_MEAN
                    : strcmp(v, "first") == 0 ? SNUG_POOL_FIRST : SNUG_POOL_NONE;
        if (so->pooling == SNUG_POOL_NONE)
            return cli_usage(g_usage, "--pooling expects last, mean or first, got '%s'", v);
        a->pooling_given = true;
    } else {
        rc = 0;
    }
    *at = i;
    if (rc) return rc;
    /* the integer ones (on a usage error x stays 0, and the command ends) */
    if ((rc = cli_int_option(argc, argv, at, "--port", 0, 65535, &x, g_usage)))
        so->port = (int)x;
    else if ((rc = cli_int_option(argc, argv, at, "--max-connections", 1, 4096, &x, g_usage)))
        so->max_connections = (int)x;
    else if ((rc = cli_int_option(argc, argv, at, "--max-uploads", 1, 4096, &x, g_usage)))
        so->max_uploads = (int)x;
    else if ((rc = cli_int_option(argc, argv, at, "--max-queue", 1, 1 << 20, &x, g_usage)))
        a->eo.max_queue = (int32_t)x;
    else if ((rc = cli_int_option(argc, argv, at, "--timeout-seconds", 1, 86400, &x, g_usage)))
        so->timeout_s = (double)x;
    else if ((rc = cli_int_option(argc, argv, at, "--drain-seconds", 0, 86400, &x, g_usage)))
        a->drain_s = (double)x;
    else if ((rc = cli_int_option(argc, argv, at, "--keep-alive-seconds", 1, 3600, &x, g_usage)))
        so->keep_alive_s = (double)x;
    else if ((rc = cli_int_option(argc, argv, at, "--header-timeout-seconds", 1, 3600, &x, g_usage)))
        so->header_timeout_s = (double)x;
    else if ((rc = cli_int_option(argc, argv, at, "--upload-grace-seconds", 1, 3600, &x, g_usage)))
        so->upload_grace_s = (double)x;
    else
        rc = cli_bytes_option(argc, argv, at, "--server-memory", &a->server_memory, g_usage);
    return rc;
}

/* Parses the command line into *a (the bundled model when none is given);
 * returns -1 when it is fine, else the exit status of a usage error
 * (already printed). */
static int parse_args(int argc, char **argv, serve_args *a)
{
    a->eo.plan = (snug_planner_opts){.isa = -1, .populate_after_ready = true};
    cli_progress_install(&a->eo.plan, &a->progress);
    a->so = (snug_server_opts){.port = 8000, .access_log = stdout, .build_commit = cli_build_commit,
                               .build_options = cli_build_options};
    a->drain_s = 30;
    for (int i = 1; i < argc; i++) {
        int rc = cli_planning_option(argc, argv, &i, &a->eo.plan, &a->tp, g_usage);
        if (!rc) rc = cli_spec_option(argc, argv, &i, &a->eo.spec, g_usage);
        if (!rc) rc = server_option(argc, argv, &i, a);
        if (rc > 1) return rc;
        if (rc == 1) continue;
        if (argv[i][0] == '-')
            return cli_unknown_option(g_usage, CLI_PLAN_OPTIONS " " CLI_TP_OPTIONS " " CLI_SPEC_OPTIONS, argv[i]);
        if (a->dir) return cli_usage(g_usage, "one model directory, got '%s' too", argv[i]);
        a->dir = argv[i];
    }
    if (cli_plan_check(&a->eo.plan, g_usage)) return 2;
    const snug_server_opts *so = &a->so;
    if (so->api_key && !*so->api_key) return cli_usage(g_usage, "--api-key expects a key, got ''");
    if (a->server_memory && a->server_memory < snug_server_tracked_bytes_min(so))
        return cli_usage(g_usage, "--server-memory %zu bytes cannot parse one body of "
                         "--max-body-bytes %zu: that needs %zu (the body and %d bytes of parse "
                         "a byte); raise --server-memory or lower --max-body-bytes", a->server_memory,
                         so->max_body_bytes ? so->max_body_bytes : (size_t)1 << 20,
                         snug_server_tracked_bytes_min(so), SNUG_SERVER_PARSE_BYTES_PER_BYTE);
    if (!a->dir) a->dir = cli_default_model(a->bundled, sizeof a->bundled);
    if (!a->so.model_name) a->so.model_name = base_name(a->dir, a->name, sizeof a->name);
    return -1;
}

/* An embedding model's pooling and normalization, as its checkpoint says
 * (formats/pooling.h: sentence-transformers' modules.json, or a GGUF file's
 * pooling_type): such a model serves embeddings; --pooling and
 * --no-normalize choose over it. Fails as snug_pooling_read does. */
static snug_status read_pooling(serve_args *a, snug_error *err)
{
    snug_pooling_info p;
    snug_server_opts *so = &a->so;
    so->normalize = !a->no_normalize;
    snug_status st = snug_pooling_read(a->dir, &p, err);
    if (st != SNUG_OK || p.type == SNUG_POOL_NONE) return st;
    so->embeddings = true;
    if (!a->pooling_given) so->pooling = p.type;
    so->normalize = p.normalize && !a->no_normalize;
    return SNUG_OK;
}

/* The chat template --chat-template names, read on rank 0 (it alone
 * serves) into *text (the caller frees it) before the plan, which counts
 * it; every rank learns how rank 0 did, and fails alike. */
static snug_status read_template(const serve_args *a, snug_comm *comm, char **text, snug_error *err)
{
    size_t len = 0;
    snug_status st = SNUG_OK;
    if (a->template_path && cli_rank(comm) == 0)
        st = snug_file_read_all(a->template_path, 1 << 20, text, &len, err);
    return snug_dist_agree(comm, st, err);
}

/* A follower rank: its shard of every step until rank 0 stops. Returns
 * the exit status; *stranded when a step failed after the plan (the ranks
 * cannot finish together). A failed plan is every rank's: rank 0 says why. */
static int follow(serve_args *a, snug_comm *comm, bool *stranded)
{
    a->eo.plan.on_phase = NULL; /* rank 0 tells */
    a->eo.plan.on_load_progress = NULL;
    sigset_t stop; /* a signal mpirun passes on is rank 0's to act on: it drains, then stops us */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    bool planned = false;
    snug_error err = {0};
    if (snug_engine_follow(a->dir, &a->eo, &planned, &err) == SNUG_OK) return 0;
    if (planned) fprintf(stderr, "snug: rank %d: %s\n", cli_rank(comm), err.msg);
    *stranded = planned;
    return 1;
}

/* Rank 0 (or the one process): listens, plans and prints the plan, then
 * serves until stopped (serve_until_stopped). Returns the exit status,
 * failures printed; *stranded when the other ranks cannot be stopped, only
 * ended (the engine is then left open: MPI may still use its buffers);
 * *launcher_ending when the launcher signalled that it ends the run. */
static int lead(serve_args *a, snug_comm *comm, bool *stranded, bool *launcher_ending)
{
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_server *s = NULL;
    snug_server_opts *so = &a->so;
    snug_planner_opts *plan = &a->eo.plan;
    bool several = comm && snug_comm_size(comm) > 1;
    int rc = 1;
    /* the server's share of the plan: what its connections hold outside the
     * allocator, and what its requests may allocate */
    plan->server_untracked = snug_server_untracked_bytes(so);
    so->request_memory = a->server_memory ? a->server_memory : snug_server_tracked_bytes_default(so);
    plan->server_tracked = so->request_memory + snug_server_gate_bytes(so);

    /* the address first: one in use fails before the model is loaded (with
     * several ranks, rank 0's failure ends them all, waiting in the plan) */
    *stranded = several;
    if (snug_server_listen(so, &so->listen_fd, &err) != SNUG_OK) goto fail;

    /* SIGINT and SIGTERM (and with several ranks SIGCONT, which still
     * continues the process) are taken by sigtimedwait, in no thread */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    if (several) sigaddset(&stop, SIGCONT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (a->timeline && snug_mem_trace_start(CLI_TIMELINE_EVENTS_DEFAULT, &err) != SNUG_OK) goto fail;
    *stranded = false; /* a failed plan is every rank's */
    if (snug_engine_open(a->dir, &a->eo, &e, &err) != SNUG_OK) goto fail;
    snug_plan_report_print(stdout, snug_engine_plan(e));
    if (a->timeline && draw_timeline(a->dir, snug_engine_plan(e), so, &err) != SNUG_OK)
        fprintf(stderr, "snug: --timeline: %s (serving without it)\n", err.msg);
    if (snug_server_start(e, so, &s, &err) != SNUG_OK) goto fail;
    printf("serving %s as \"%s\" on http://%s:%d (server: %zu bytes of requests, %zu for "
           "%d connections%s)\n", a->dir, so->model_name, so->host ? so->host : "127.0.0.1",
           snug_server_port(s), plan->server_tracked, plan->server_untracked,
           so->max_connections ? so->max_connections : 32, comm ? ", tensor parallel" : "");
    fflush(stdout);
    rc = serve_until_stopped(s, e, &stop, a->drain_s, several, launcher_ending);
    /* a failed step may have left other ranks inside it: they cannot be
     * stopped, only ended (and MPI may still use the engine's buffers) */
    *stranded = snug_engine_failed(e) && several;
    goto done;
fail:
    cli_fail(&err);
done:
    snug_mem_trace_stop(); /* when the plan failed with --timeline (draw_timeline stops it) */
    if (!*stranded) snug_engine_close(e);
    snug_mem_free((void *)so->timeline_svg);
    so->timeline_svg = NULL;
    return rc;
}

int snug_cmd_serve(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    serve_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    snug_error err = {0};
    snug_comm *comm = NULL;
    if (cli_tp_open(&a.tp, &comm, &err) != SNUG_OK) return cli_fail_once(NULL, &err);
    a.eo.plan.comm = comm;
    char *template_text = NULL;
    bool stranded = false, launcher_ending = false;
    rc = 1;
    if (read_template(&a, comm, &template_text, &err) != SNUG_OK) {
        cli_fail_once(comm, &err);
        goto done;
    }
    a.so.chat_template = template_text;
    if (read_pooling(&a, &err) != SNUG_OK) { /* (every rank reads it alike) */
        cli_fail_once(comm, &err);
        goto done;
    }
    if (cli_rank(comm) > 0)
        rc = follow(&a, comm, &stranded);
    else
        rc = lead(&a, comm, &stranded, &launcher_ending);
done:
    snug_mem_free(template_text); /* the server, which read it, has stopped */
    if (stranded && launcher_ending) snug_comm_exit(rc); /* it ends the others, and would keep an abort waiting */
    return cli_tp_end(comm, rc, stranded);
}
