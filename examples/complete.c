/*
 * complete.c: text completion through snug's public C API (snug.h) alone.
 *
 *   build/examples/complete [MODEL] [PROMPT]
 *
 * Opens the engine on MODEL (default models/stories260K) with a 256 MiB
 * budget, submits PROMPT (default "Once upon a time") for two choices with
 * a seed, prints each choice's text as it streams (polling), then the whole
 * of each choice, the memory plan and the counters, and closes.
 */
#include "snug.h"

#include <stdio.h>
#include <string.h>

enum { N_CHOICES = 2, TEXT_MAX = 8192 };

/* Prints a failed call's message and returns the exit status. */
static int fail(const char *what, const snug_error *err)
{
    fprintf(stderr, "complete: %s: %s: %s\n", what, snug_status_str(err->status), err->msg);
    return 1;
}

static void print_plan(snug_llm *llm)
{
    snug_llm_plan_info p;
    snug_llm_plan(llm, &p);
    printf("memory plan: budget %zu = weights %zu + activations %zu + serving state %zu + "
           "untracked %zu + reserve %zu (jobs %zu) + kv cache %zu, and %zu left over\n",
           p.budget, p.weights, p.activations, p.serving_state, p.untracked, p.reserve,
           p.job_memory, p.kv_cache,
           p.budget - p.weights - p.activations - p.serving_state - p.untracked - p.reserve -
               p.kv_cache);
    printf("kv cache: %lld blocks of %d tokens; max_model_len %lld, max_num_seqs %d\n",
           (long long)p.kv_blocks, p.block_size, (long long)p.max_model_len, p.max_num_seqs);
}

static void print_counters(snug_llm *llm)
{
    snug_llm_counters_info c;
    snug_llm_counters(llm, &c);
    printf("counters: %d running, %d waiting, %d queued, %lld preemptions, %lld prompt tokens, "
           "%lld generated, kv blocks %d of %d used, %lld requests finished, job memory %zu bytes "
           "in use\n",
           c.running, c.waiting, c.queued, (long long)c.preemptions, (long long)c.prompt_tokens,
           (long long)c.generation_tokens, c.kv_blocks_used, c.kv_blocks_total,
           (long long)c.requests_finished, c.job_memory_used);
}

int main(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : "models/stories260K";
    const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
    snug_error err = {0};

    snug_llm_opts o;
    snug_llm_opts_default(&o);
    o.model_dir = model;
    o.memory_bytes = (size_t)256 << 20;
    o.max_model_len = 256;
    o.max_num_seqs = 8;
    snug_llm *llm = NULL;
    if (snug_llm_open(&o, &llm, &err) != SNUG_OK) return fail("open", &err);

    snug_gen_params p;
    snug_gen_params_default(&p);
    p.n = N_CHOICES;
    p.temperature = 0.8f;
    p.top_p = 0.95f;
    p.has_seed = true;
    p.seed = 42;
    p.max_tokens = 48;
    snug_job *job = NULL;
    if (snug_llm_submit_text(llm, prompt, strlen(prompt), &p, &job, &err) != SNUG_OK) {
        snug_llm_close(llm);
        return fail("submit", &err);
    }

    /* the choices' events interleave: a label whenever the choice changes */
    static char text[N_CHOICES][TEXT_MAX];
    size_t n_text[N_CHOICES] = {0};
    const char *finish[N_CHOICES] = {0};
    int last = -1;
    while (!snug_job_done(llm, job)) {
        snug_token_event ev;
        if (!snug_job_next(llm, job, &ev)) {
            snug_job_wait(llm, job, 1.0);
            continue;
        }
        if (ev.choice != last) printf("%s[choice %d] ", last < 0 ? "" : "\n", ev.choice);
        last = ev.choice;
        fwrite(ev.text, 1, ev.n_text, stdout);
        fflush(stdout);
        size_t room = TEXT_MAX - 1 - n_text[ev.choice];
        size_t n = ev.n_text < room ? ev.n_text : room;
        memcpy(text[ev.choice] + n_text[ev.choice], ev.text, n);
        n_text[ev.choice] += n;
        if (ev.finish_reason) finish[ev.choice] = ev.finish_reason;
    }
    printf("\n\n");
    for (int k = 0; k < N_CHOICES; k++)
        printf("choice %d (finish %s): %s%.*s\n", k, finish[k] ? finish[k] : "?", prompt,
               (int)n_text[k], text[k]);
    printf("\n");
    print_plan(llm);
    print_counters(llm);
    snug_job_free(llm, job);
    snug_llm_close(llm);
    return 0;
}
