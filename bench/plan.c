/*
 * plan.c: the memory plan measured (bench/plan runs it on a synthetic
 * Llama-3.2-1B): one run of the planner with the allocator's event log on,
 * then a stress run of the step loop over the planned state, then a first
 * touch of as many fresh bytes as the KV cache holds, all in one process:
 *
 *   kv fill      KV bytes / (C - W - A - S - U - R)           goal >= 0.999
 *   stress hwm   the process high-water mark during the stress run / C
 *                                                               goal <= 1.0
 *   populate     the plan's populating of the KV cache, and then, with it
 *                freed, populating as many bytes again against first touch
 *                of as many fresh bytes (one write per page, one thread)
 *
 * then the plan's report, and the timeline of the whole run as SVG.
 *
 * usage: plan MODEL [--memory BYTES] [--max-model-len N] [--max-num-seqs N]
 *             [--max-num-batched-tokens N] [--jobs N] [--prompt-len N] [--job-len N]
 *             [--steps N] [--timeline FILE.svg]
 */
#include "base/device.h"
#include "engine/fcfs.h"
#include "engine/plan_report.h"
#include "engine/planner.h"
#include "engine/timeline.h"
#include "kernels/kernels.h"
#include <omp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds to first-touch n fresh bytes: one write per page of a new
 * anonymous mapping, one thread (what page faults cost here). */
static double first_touch_seconds(size_t n)
{
    unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    long page = sysconf(_SC_PAGESIZE);
    double t0 = now();
    for (size_t i = 0; i < n; i += (size_t)page) ((volatile unsigned char *)p)[i] = 1;
    double s = now() - t0;
    munmap(p, n);
    return s;
}

/* Seconds for the allocator to give n bytes populated, as it gave the KV
 * cache; -1 when it cannot. */
static double populate_seconds(size_t n)
{
    double t0 = now();
    void *p = snug_mem_alloc(SNUG_MEM_KV, n, NULL);
    double s = now() - t0;
    snug_mem_free(p);
    return p ? s : -1;
}

static uint64_t next_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static int usage(const char *why)
{
    fprintf(stderr, "plan: %s\nusage: plan MODEL [--memory BYTES] [--max-model-len N] "
            "[--max-num-seqs N] [--max-num-batched-tokens N] [--jobs N] [--prompt-len N] [--job-len N] "
            "[--steps N] [--timeline FILE.svg]\n", why);
    return 2;
}

int main(int argc, char **argv)
{
    snug_planner_opts o = {.isa = -1};
    const char *dir = NULL, *svg = NULL;
    int32_t n_jobs = 400, job_len = 512, prompt_len = 16, max_steps = 8;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool known = true;
        if (strcmp(a, "--memory") == 0 && v) {
            if (!snug_parse_bytes(v, &o.budget.memory_bytes)) return usage("--memory: a byte count");
        } else if (strcmp(a, "--max-model-len") == 0 && v) {
            o.max_model_len = atoll(v);
        } else if (strcmp(a, "--max-num-seqs") == 0 && v) {
            o.max_num_seqs = atoi(v);
        } else if (strcmp(a, "--max-num-batched-tokens") == 0 && v) {
            o.max_num_batched_tokens = atoi(v);
        } else if (strcmp(a, "--jobs") == 0 && v) {
            n_jobs = atoi(v);
        } else if (strcmp(a, "--job-len") == 0 && v) {
            job_len = atoi(v);
        } else if (strcmp(a, "--prompt-len") == 0 && v) {
            prompt_len = atoi(v);
        } else if (strcmp(a, "--steps") == 0 && v) {
            max_steps = atoi(v);
        } else if (strcmp(a, "--timeline") == 0 && v) {
            svg = v;
        } else {
            known = false;
        }
        if (known) {
            i++;
        } else if (a[0] != '-' && !dir) {
            dir = a;
        } else {
            return usage(a);
        }
    }
    if (!dir) return usage("a model directory");
    if (n_jobs < 1 || prompt_len < 1 || job_len <= prompt_len || max_steps < 0)
        return usage("--jobs, --prompt-len, --job-len (more than --prompt-len), --steps");

    snug_error err = {0};
    snug_fcfs_job *jobs = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_jobs * sizeof *jobs, &err);
    if (!jobs || snug_mem_trace_start(1 << 16, &err) != SNUG_OK) {
        fprintf(stderr, "plan: %s\n", err.msg);
        return 1;
    }
    uint64_t rng = 7;
    for (int32_t i = 0; i < n_jobs; i++) {
        jobs[i].prompt = 1 + (int32_t)(next_rand(&rng) % (uint64_t)prompt_len);
        jobs[i].output = 1 + (int32_t)(next_rand(&rng) % (uint64_t)(job_len - jobs[i].prompt));
    }
    snug_planned *p = NULL;
    if (snug_planner_open(dir, &o, &p, &err) != SNUG_OK) {
        fprintf(stderr, "plan: %s\n", err.msg);
        return 1;
    }
    const snug_plan_report *r = &p->report;
    snug_isa isa = snug_model_isa(p->model);

    /* the stress run: the high-water mark from its start */
    size_t hwm = 0;
    bool hwm_reset = snug_proc_hwm_reset(NULL) == SNUG_OK;
    int64_t allocs = snug_mem_alloc_count();
    size_t peak = 0;
    snug_mem_status(SNUG_MEM_TOTAL, NULL, NULL, true);
    snug_mem_trace_mark("stress");
    snug_fcfs_stats x;
    double t0 = now();
    snug_status st = snug_fcfs_run(p, jobs, n_jobs, max_steps, &x, &err);
    double stress_s = now() - t0;
    snug_mem_trace_mark("done");
    int64_t stress_allocs = snug_mem_alloc_count() - allocs;
    snug_mem_status(SNUG_MEM_TOTAL, NULL, &peak, false);
    snug_proc_mem(NULL, &hwm, NULL);
    if (st != SNUG_OK) {
        fprintf(stderr, "plan: the stress run: %s\n", err.msg);
        return 1;
    }
    snug_mem_trace t;
    snug_mem_trace_get(&t);
    snug_plan_report rep = *r;
    snug_planner_close(p);

    /* populating against first touch of the same bytes, now that they are
     * free, alternating, best of three each (the machine is noisy) */
    size_t kv_payload = rep.kv_held - SNUG_MEM_HEADER_BYTES;
    double touch_s = 1e30, pop_s = 1e30;
    for (int k = 0; k < 3; k++) {
        double a = first_touch_seconds(kv_payload), b = populate_seconds(kv_payload);
        if (a > 0) touch_s = SNUG_MIN(touch_s, a);
        if (b > 0) pop_s = SNUG_MIN(pop_s, b);
    }

    snug_plan_report_print(stdout, &rep);
    double left = (double)(rep.sizes.budget - rep.weights - rep.activations - rep.serving_state -
                           rep.sizes.untracked - rep.sizes.reserve);
    printf("\n== bench/plan (kernels: %s, %d threads)\n", snug_isa_name(isa),
           o.n_threads ? o.n_threads : omp_get_max_threads());
    printf("kv fill: kv cache %zu B / (C - W - A - S - U - R) %.0f B = %.6f (goal >= 0.999; "
           "limited by %s)\n", rep.kv_held, left, (double)rep.kv_held / left,
           snug_kv_limit_name(rep.kv.limited_by));
    printf("stress: %d of %d jobs (prompts up to %d tokens, lengths up to %d) in %d steps, %lld "
           "tokens, %.1f s; %d waits, at most %d running; %lld allocations\n", x.finished, n_jobs,
           prompt_len, job_len, x.steps,
           (long long)x.tokens, stress_s, x.waits, x.most_running,
           (long long)stress_allocs);
    printf("stress hwm: %zu B / C %zu B = %.6f (goal <= 1.0%s); allocator peak %zu B = %.6f of C\n",
           hwm, rep.sizes.budget, (double)hwm / (double)rep.sizes.budget,
           hwm_reset ? "" : "; the mark could not be reset: since start", peak,
           (double)peak / (double)rep.sizes.budget);
    printf("populate: the plan populated %zu B in %.3f s (%.2f GB/s); then, best of 3 each: "
           "populating %.3f s (%.2f GB/s), first touch of as many fresh bytes %.3f s (%.2f GB/s): "
           "populating %.2fx as fast\n", rep.kv_held, rep.populate_seconds,
           (double)rep.kv_held / rep.populate_seconds / 1e9, pop_s, (double)kv_payload / pop_s / 1e9,
           touch_s, (double)kv_payload / touch_s / 1e9, touch_s / pop_s);
    int rc = 0;
    if (svg) {
        char title[512], sub[256];
        snprintf(title, sizeof title, "bench/plan %s: memory over time", dir);
        snug_timeline_opts to = {.title = title,
                                 .subtitle = snug_plan_report_line(&rep, sub, sizeof sub),
                                 .budget = rep.sizes.budget, .capacity = rep.capacity};
        if (snug_timeline_write(svg, &t, &to, &err) != SNUG_OK) {
            fprintf(stderr, "plan: %s\n", err.msg);
            rc = 1;
        } else {
            printf("timeline: %s (%zu events)\n", svg, t.n_events);
        }
    }
    snug_mem_trace_stop();
    snug_mem_free(jobs);
    return rc;
}
