/*
 * cmd_profile.c: `snug profile [MODEL] [options] [--json]`: runs the memory
 * plan (engine/planner.h) and prints it: the load, the budget and what each
 * part of it holds, and the KV cache it leaves.
 */
#include "cli.h"

#include "base/device.h"
#include "base/dtype.h"
#include "engine/plan_report.h"
#include "engine/planner.h"
#include "engine/timeline.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

static const char g_usage[] =
    "snug profile [MODEL] [--memory BYTES | --memory-fraction F] [--kv-cache-memory BYTES]\n"
    "              [--reserve BYTES] [--max-model-len N] [--max-num-seqs N]\n"
    "              [--max-num-batched-tokens N] [--block-size N] [--kv-cache-dtype auto|bf16|f16|f32]\n"
    "              [--dtype bf16|f16|f32] [--staging-bytes BYTES] [--threads T]\n"
    "              [--isa scalar|avx2|avx512|avx512bf16] [--json]\n"
    "              [--timeline FILE.svg [--timeline-events N]]\n"
    "  MODEL defaults to the bundled models/stories260K; BYTES may carry a unit (6GiB, 1500MB,\n"
    "  512MiB); the budget defaults to 0.9 of the memory cgroup's limit or of MemAvailable;\n"
    "  --timeline draws memory over time from the allocator's event log of N events\n"
    "  (default 65536, 40 bytes each, held during the plan and counted in its serving state)";

enum { TIMELINE_EVENTS_DEFAULT = 65536 };

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

int snug_cmd_profile(int argc, char **argv)
{
    const char *dir = NULL;
    snug_planner_opts o = {.isa = -1};
    bool as_json = false;
    const char *timeline = NULL;
    int64_t timeline_events = TIMELINE_EVENTS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int rc = cli_plan_option(argc, argv, &i, &o, g_usage);
        if (rc > 1) return rc;
        if (rc == 1) {
            continue;
        } else if ((v = cli_option(argc, argv, &i, "--timeline"))) {
            timeline = v;
        } else if ((v = cli_option(argc, argv, &i, "--timeline-events"))) {
            if (!cli_parse_int(v, 16, 1 << 28, &timeline_events))
                return cli_usage(g_usage, "--timeline-events expects 16 to 268435456, got '%s'", v);
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n", g_usage);
            return 0;
        } else if (argv[i][0] == '-') {
            return cli_usage(g_usage, "unknown option '%s'", argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            return cli_usage(g_usage, "one model directory, got '%s' too", argv[i]);
        }
    }
    if (o.budget.memory_bytes && o.budget.fraction)
        return cli_usage(g_usage, "--memory and --memory-fraction: give one");
    snug_error err = {0};
    snug_planned *p = NULL;
    if (!dir) dir = "models/stories260K";
    if (timeline && snug_mem_trace_start((size_t)timeline_events, &err) != SNUG_OK)
        return cli_fail(&err);
    int rc = 0;
    snug_mem_trace t;
    if (snug_planner_open(dir, &o, &p, &err) != SNUG_OK) {
        rc = cli_fail(&err);
        snug_mem_trace_get(&t);
        if (timeline) write_timeline(timeline, dir, &t, NULL);
    } else {
        snug_mem_trace_get(&t); /* up to "ready": what follows is the report and the close */
        if (as_json)
            rc = print_json(&p->report);
        else
            snug_plan_report_print(stdout, &p->report);
        /* drawn once the plan is given back: the KV cache took what was left */
        snug_plan_report r = p->report;
        snug_planner_close(p);
        p = NULL;
        if (timeline && write_timeline(timeline, dir, &t, &r) != 0) rc = 1;
    }
    snug_planner_close(p);
    snug_mem_trace_stop();
    return rc;
}
