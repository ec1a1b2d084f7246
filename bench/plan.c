/*
 * plan.c: the memory plan measured (bench/plan runs it on a synthetic
 * Llama-3.2-1B): the serving engine opened (its plan) with the allocator's
 * event log on, then a stress run of its step loop and scheduler, then a
 * first touch of as many fresh bytes as the KV cache holds, all in one
 * process:
 *
 *   kv fill      KV bytes / (C - W - A - S - U - R)           goal >= 0.999
 *   stress rss   the process's resident set after the stress run, to the
 *                page (the run frees nothing: its peak) / C    goal <= 1.0
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
#include "base/mem.h"
#include "engine/engine.h"
#include "engine/plan_report.h"
#include "engine/timeline.h"
#include "kernels/kernels.h"
#include "model/model.h"

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
    snug_engine_opts eo = {.plan = {.isa = -1}};
    snug_planner_opts *o = &eo.plan;
    const char *dir = NULL, *svg = NULL;
    int32_t n_jobs = 400, job_len = 512, prompt_len = 16, max_steps = 8;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool known = true;
        if (strcmp(a, "--memory") == 0 && v) {
            if (!snug_parse_bytes(v, &o->budget.memory_bytes)) return usage("--memory: a byte count");
        } else if (strcmp(a, "--max-model-len") == 0 && v) {
            o->max_model_len = atoll(v);
        } else if (strcmp(a, "--max-num-seqs") == 0 && v) {
            o->max_num_seqs = atoi(v);
        } else if (strcmp(a, "--max-num-batched-tokens") == 0 && v) {
            o->max_num_batched_tokens = atoi(v);
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
    /* the jobs (made before the plan, which counts them): greedy requests
     * over one synthetic prompt, each to its length, past EOS */
    eo.max_queue = n_jobs;
    snug_request *jobs = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_jobs * sizeof *jobs, &err);
    int32_t *prompt = jobs ? snug_mem_alloc(SNUG_MEM_OTHER, (size_t)prompt_len * sizeof *prompt, &err)
                           : NULL;
    if (!prompt || snug_mem_trace_start(1 << 16, &err) != SNUG_OK) {
        fprintf(stderr, "plan: %s\n", err.msg);
        return 1;
    }
    for (int32_t k = 0; k < prompt_len; k++) prompt[k] = 1 + (k * 7) % 255;
    uint64_t rng = 7;
    for (int32_t i = 0; i < n_jobs; i++) {
        snug_request *q = &jobs[i];
        *q = (snug_request){.prompt = prompt, .n = 1};
        q->n_prompt = 1 + (int32_t)(next_rand(&rng) % (uint64_t)prompt_len);
        snug_sampling_params_default(&q->sampling);
        q->sampling.temperature = 0;
        snug_stop_params_default(&q->stop);
        q->stop.max_tokens = 1 + (int32_t)(next_rand(&rng) % (uint64_t)(job_len - q->n_prompt));
        q->stop.ignore_eos = true;
    }
    snug_engine *e = NULL;
    if (snug_engine_open(dir, &eo, &e, &err) != SNUG_OK) {
        fprintf(stderr, "plan: %s\n", err.msg);
        return 1;
    }
    const snug_plan_report *r = snug_engine_plan(e);
    snug_isa isa = SNUG_ISA_SCALAR;
    snug_model_isa_resolve(o->isa, &isa, NULL); /* the model was made with it */

    /* the stress run: the high-water mark from its start; every job
     * submitted, run for --steps steps (0: until all are done), the rest
     * then cancelled */
    size_t hwm = 0;
    bool hwm_reset = snug_proc_hwm_reset(NULL) == SNUG_OK;
    int64_t allocs = snug_mem_alloc_count();
    size_t peak = 0;
    snug_mem_status(SNUG_MEM_TOTAL, NULL, NULL, true);
    snug_mem_trace_mark("stress");
    snug_engine_counters c0, c;
    snug_engine_counters_get(e, &c0);
    int32_t most_running = 0, most_waiting = 0;
    snug_status st = SNUG_OK;
    double t0 = now();
    for (int32_t i = 0; i < n_jobs && st == SNUG_OK; i++) st = snug_engine_submit(e, &jobs[i], &err);
    for (int32_t done = 0; st == SNUG_OK;) {
        snug_engine_counters_get(e, &c);
        most_running = SNUG_MAX(most_running, c.running);
        most_waiting = SNUG_MAX(most_waiting, c.waiting);
        if (c.failed || done == n_jobs || (max_steps > 0 && c.steps - c0.steps >= max_steps)) break;
        char text[4096];
        snug_output out;
        done = 0;
        for (int32_t i = 0; i < n_jobs; i++) {
            while (snug_engine_next(e, &jobs[i], &out, text, sizeof text)) {}
            done += snug_engine_done(e, &jobs[i]);
        }
        if (done < n_jobs) snug_engine_wait(e, &jobs[n_jobs - 1], 0.05);
    }
    snug_engine_counters_get(e, &c);
    for (int32_t i = 0; i < n_jobs; i++) snug_engine_release(e, &jobs[i]);
    double stress_s = now() - t0;
    snug_mem_trace_mark("done");
    int64_t stress_allocs = snug_mem_alloc_count() - allocs;
    snug_mem_status(SNUG_MEM_TOTAL, NULL, &peak, false);
    snug_proc_mem(NULL, &hwm, NULL);
    size_t rss = 0; /* the run freed nothing: its end is its peak, to the page */
    snug_proc_rss_exact(&rss, NULL);
    if (st != SNUG_OK || c.failed) {
        fprintf(stderr, "plan: the stress run: %s\n", st != SNUG_OK ? err.msg : snug_engine_error(e));
        return 1;
    }
    snug_mem_trace t;
    snug_mem_trace_get(&t);
    snug_plan_report rep = *r;
    snug_engine_close(e);

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
           rep.threads);
    printf("kv fill: kv cache %zu B / (C - W - A - S - U - R) %.0f B = %.6f (goal >= 0.999; "
           "limited by %s)\n", rep.kv_held, left, (double)rep.kv_held / left,
           snug_kv_limit_name(rep.kv.limited_by));
    printf("stress: %lld of %d jobs (prompts up to %d tokens, lengths up to %d) in %lld steps, %lld "
           "prompt and %lld generated tokens, %.1f s; %lld preemptions, at most %d waiting and %d "
           "running; %lld allocations\n", (long long)(c.requests_finished - c0.requests_finished),
           n_jobs, prompt_len, job_len, (long long)(c.steps - c0.steps),
           (long long)(c.prompt_tokens - c0.prompt_tokens),
           (long long)(c.generation_tokens - c0.generation_tokens), stress_s,
           (long long)(c.preemptions - c0.preemptions), most_waiting, most_running,
           (long long)stress_allocs);
    printf("stress resident: %zu B / C %zu B = %.6f (goal <= 1.0; the kernel's high-water mark "
           "%.6f%s); allocator peak %zu B = %.6f of C\n", rss, rep.sizes.budget,
           (double)rss / (double)rep.sizes.budget, (double)hwm / (double)rep.sizes.budget,
           hwm_reset ? "" : ", not reset: since start", peak, (double)peak / (double)rep.sizes.budget);
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
    snug_mem_free(prompt);
    snug_mem_free(jobs);
    return rc;
}
