/*
 * cmd_profile.c: `snug profile [MODEL] [options] [--json]`: runs the memory
 * plan (engine/planner.h) and prints it: the load, the budget and what each
 * part of it holds, and the KV cache it leaves.
 */
#include "cli.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "engine/plan_report.h"
#include "engine/planner.h"
#include "dist/agree.h"
#include "engine/timeline.h"
#include "kernels/kernels.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char g_usage[] =
    "snug profile [MODEL]\n"
    CLI_PLAN_USAGE
    CLI_SPEC_USAGE
    "              [--json] [--timeline FILE.svg [--timeline-events N]] [--tp N [--step-timeout S]]\n"
    "              [--load-only]\n"
    "  MODEL defaults to the bundled " CLI_BUNDLED_MODEL "; BYTES may carry a unit (6GiB, 1500MB,\n"
    "  512MiB); the budget defaults to 0.9 of the memory cgroup's limit or of MemAvailable;\n"
    "  --timeline draws memory over time from the allocator's event log of N events\n"
    "  (default 65536, 40 bytes each, held during the plan and counted in its serving state);\n"
    "  --tp N plans each of N ranks started by mpirun -np N (rank 0 prints every rank's line);\n"
    "  --load-only loads each rank's shard and reports its weights, load peak and bytes read;\n"
    "  --quiet leaves out the progress lines on stderr (each phase as it begins, the load's\n"
    "  bytes and rate, and on a terminal its bar); --json leaves them out too";


/* Writes the timeline of t, the log as it was when the plan ended (r NULL
 * when the plan failed: then no budget line, the chart shows how far it
 * got). */
static int write_timeline(const char *path, const char *dir, const snug_mem_trace *t,
                          const snug_plan_report *r)
{
    char title[512], sub[256];
    snprintf(title, sizeof title, "snug profile %s: memory over time", dir);
    snug_timeline_opts to = {.title = title};
    if (r) {
        to.subtitle = snug_plan_report_line(r, sub, sizeof sub);
        to.budget = r->sizes.budget;
        to.capacity = r->capacity;
        to.kv_window_block = r->window_kv_block;
    }
    snug_error err = {0};
    if (snug_timeline_write(path, t, &to, &err) != SNUG_OK) return cli_fail(&err);
    fprintf(stderr, "snug: memory timeline written to %s (%zu events)\n", path, t->n_events);
    return 0;
}

static int print_json(const snug_plan_report *r)
{
    char *text = snug_plan_report_json(r);
    if (!text) {
        fprintf(stderr, "snug: out of memory writing the report\n");
        return 1;
    }
    puts(text);
    snug_mem_free(text);
    return 0;
}

/* --load-only: each rank loads its shard (every rank reading only its own
 * bytes); rank 0 prints each rank's weights against the parameter table's
 * prediction, its load peak over its weights, and the bytes all ranks read
 * together over the checkpoint's bytes. */
static int load_shards(const char *dir, const snug_planner_opts *o, snug_comm *comm, bool as_json)
{
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    snug_weights *w = NULL;
    snug_load_stats ls = {0};
    int32_t tp = comm ? snug_comm_size(comm) : 1, rank = cli_rank(comm);
    snug_status st = snug_checkpoint_open(dir, &ck, &err);
    st = snug_dist_agree(comm, st, &err);
    if (st == SNUG_OK) st = snug_dist_check_model(comm, ck, &err);
    snug_load_opts lo = {.tp = tp, .rank = rank, .dtype = o->weight_dtype, .quant = o->quant_dtype,
                         .staging_bytes = o->staging_bytes,
                         .n_threads = o->n_threads ? o->n_threads : tp > 1 ? snug_comm_default_threads() : 0};
    if (st == SNUG_OK) {
        st = snug_weights_load(ck, &lo, &w, &ls, &err);
        st = snug_dist_agree(comm, st, &err);
    }
    uint64_t ck_bytes = 0;
    for (int32_t i = 0; st == SNUG_OK && i < ck->n_files; i++) ck_bytes += ck->files[i]->file_size;
    /* each rank's load: its weights laid out and as its parameter table sums them */
    struct rank_load { int64_t weights, predicted, peak, hwm_growth, read; double seconds; };
    struct rank_load mine = {(int64_t)ls.arena_bytes, (int64_t)ls.weight_bytes,
                             (int64_t)ls.load_peak_bytes, ls.hwm_growth_bytes,
                             (int64_t)ls.bytes_read, ls.seconds},
                     all[SNUG_TP_MAX];
    if (st == SNUG_OK)
        st = snug_comm_gather(comm, &mine, sizeof mine, all, 0, SNUG_WAIT_START, "the load reports", &err);
    if (st != SNUG_OK) {
        cli_fail_once(comm, &err);
    } else if (rank == 0) {
        uint64_t read = 0;
        double worst = 0;
        for (int32_t k = 0; k < tp; k++) {
            const struct rank_load *q = &all[k];
            double ratio = (double)q->peak / (double)q->weights;
            read += (uint64_t)q->read;
            if (ratio > worst) worst = ratio;
            char b[3][32];
            if (as_json)
                printf("{\"rank\":%d,\"tp\":%d,\"weight_bytes\":%lld,\"weights_predicted_bytes\":%lld,"
                       "\"load_peak_bytes\":%lld,\"hwm_growth_bytes\":%lld,\"bytes_read\":%lld,"
                       "\"seconds\":%.6f}\n", k, tp, (long long)q->weights, (long long)q->predicted,
                       (long long)q->peak, (long long)q->hwm_growth, (long long)q->read, q->seconds);
            else
                printf("rank %d of %d: weights %s bytes (predicted %s%s), load peak / weights %.4f, "
                       "read %s bytes in %.2f s\n", k, tp, snug_fmt_int(q->weights, b[0]),
                       snug_fmt_int(q->predicted, b[1]), q->weights == q->predicted ? "" : ": DIFFERENT",
                       ratio, snug_fmt_int(q->read, b[2]), q->seconds);
        }
        char b[2][32];
        if (as_json)
            printf("{\"tp\":%d,\"checkpoint_bytes\":%llu,\"bytes_read\":%llu,\"read_ratio\":%.6f,"
                   "\"load_peak_ratio_max\":%.6f}\n", tp, (unsigned long long)ck_bytes,
                   (unsigned long long)read, (double)read / (double)ck_bytes, worst);
        else
            printf("all %d ranks read %s bytes of the checkpoint's %s (%.4fx); the highest load "
                   "peak / weights %.4f\n", tp, snug_fmt_int((int64_t)read, b[0]),
                   snug_fmt_int((int64_t)ck_bytes, b[1]), (double)read / (double)ck_bytes, worst);
    }
    snug_weights_free(w);
    snug_checkpoint_close(ck);
    return st == SNUG_OK ? 0 : 1;
}

int snug_cmd_profile(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    const char *dir = NULL;
    snug_planner_opts o = {.isa = -1};
    cli_progress progress;
    cli_progress_install(&o, &progress);
    bool as_json = false;
    const char *timeline = NULL;
    int64_t timeline_events = CLI_TIMELINE_EVENTS_DEFAULT;
    cli_tp tp = {0};
    bool load_only = false;
    snug_spec_opts spec = {0}; /* what serving would draft with: its rows of logits, a draft model */
    for (int i = 1; i < argc; i++) {
        const char *v;
        int rc = cli_planning_option(argc, argv, &i, &o, &tp, g_usage);
        if (!rc) rc = cli_spec_option(argc, argv, &i, &spec, g_usage);
        if (rc > 1) return rc;
        if (rc == 1) {
            continue;
        } else if ((v = cli_option(argc, argv, &i, "--timeline"))) {
            timeline = v;
        } else if ((rc = cli_int_option(argc, argv, &i, "--timeline-events", 16, 1 << 28,
                                        &timeline_events, g_usage))) {
            if (rc > 1) return rc;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (strcmp(argv[i], "--load-only") == 0) {
            load_only = true;
        } else if (argv[i][0] == '-') {
            return cli_unknown_option(g_usage, CLI_PLAN_OPTIONS " " CLI_TP_OPTIONS " " CLI_SPEC_OPTIONS, argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            return cli_usage(g_usage, "one model directory, got '%s' too", argv[i]);
        }
    }
    if (cli_plan_check(&o, g_usage)) return 2;
    snug_error serr = {0};
    if (snug_spec_opts_check(&spec, &serr) != SNUG_OK) return cli_usage(g_usage, "%s", serr.msg);
    o.spec_tokens = snug_spec_tokens(&spec);
    o.draft_dir = spec.draft_model;
    if (as_json) { /* one JSON object, whatever stderr is joined to */
        o.on_phase = NULL;
        o.on_load_progress = NULL;
    }
    snug_error err = {0};
    snug_planned *p = NULL;
    char bundled[PATH_MAX + 64];
    if (!dir) dir = cli_default_model(bundled, sizeof bundled);
    snug_comm *comm = NULL;
    if (cli_tp_open(&tp, &comm, &err) != SNUG_OK) return cli_fail_once(NULL, &err);
    if (load_only) return cli_tp_end(comm, load_shards(dir, &o, comm, as_json), false);
    o.comm = comm;
    bool lead = cli_rank(comm) == 0;
    if (!lead) { /* rank 0 tells */
        o.on_phase = NULL;
        o.on_load_progress = NULL;
    }
    if (timeline && lead && snug_mem_trace_start((size_t)timeline_events, &err) != SNUG_OK) {
        if (!comm) return cli_fail(&err);
        timeline = NULL; /* the other ranks plan on: this one too, without the chart */
        cli_fail(&err);
    }
    int rc = 0;
    snug_mem_trace t;
    if (snug_planner_open(dir, &o, &p, &err) != SNUG_OK) {
        rc = cli_fail_once(comm, &err);
        snug_mem_trace_get(&t);
        if (timeline && lead) write_timeline(timeline, dir, &t, NULL);
    } else if (lead) {
        snug_mem_trace_get(&t); /* up to "ready": what follows is the report and the close */
        if (as_json)
            rc = print_json(snug_planner_report(p));
        else
            snug_plan_report_print(stdout, snug_planner_report(p));
        /* drawn once the plan is given back: the KV cache took what was left */
        snug_plan_report r = *snug_planner_report(p);
        snug_planner_close(p);
        p = NULL;
        if (timeline && write_timeline(timeline, dir, &t, &r) != 0) rc = 1;
    }
    snug_planner_close(p);
    snug_mem_trace_stop();
    return cli_tp_end(comm, rc, false);
}
