/*
 * test_llm.c: the public engine API of snug.h (snug_llm_*, snug_job_*,
 * engine/llm.c) on the bundled model: greedy text through the API is
 * llama2.c's (tests/data/stories260K/greedy.txt), token for token; seeded
 * choices repeat; the on_ready callback is called; cancelling gives the KV
 * blocks back; bad options, parameters and prompts are refused naming the
 * field; the job memory runs out with SNUG_NOMEM and comes back when jobs
 * are freed; the out-of-memory loop over a text submit leaks nothing; and
 * from submit to the last event nothing is allocated.
 */
#include "test.h"

#include "base/dtype.h"
#include "base/mem.h"
#include "support/greedy_txt.h"
#include "tokenizer/tokenizer.h"

#include <stdatomic.h>
#include <string.h>

static const char *const MODEL = "models/stories260K";
static const char *const PROMPT = "Once upon a time";

enum { N_OUT = 40, PROMPT_MAX = 64, TEXT_MAX = 4096 };

/* PROMPT as the model's tokenizer encodes it, with BOS (made by reference()) */
static int32_t g_prompt[PROMPT_MAX];
static int32_t g_n_prompt;

static snug_llm_opts opts(void)
{
    snug_llm_opts o;
    snug_llm_opts_default(&o);
    o.model_dir = MODEL;
    o.memory_bytes = (size_t)256 << 20;
    o.max_model_len = 256;
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 64;
    return o;
}

static snug_gen_params greedy(int32_t max_tokens)
{
    snug_gen_params p;
    snug_gen_params_default(&p);
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

/* What one job gave, per choice. */
typedef struct got {
    int32_t ids[4][256];
    int32_t n_ids[4];
    char text[4][TEXT_MAX];
    size_t n_text[4];
    const char *finish[4];
    int n_bad_choice;
} got;

/* Takes every event of job, waiting as needed. */
static void drain(snug_llm *llm, snug_job *job, got *g)
{
    memset(g, 0, sizeof *g);
    while (!snug_job_done(llm, job)) {
        snug_token_event ev;
        if (!snug_job_next(llm, job, &ev)) {
            snug_job_wait(llm, job, 1.0);
            continue;
        }
        if (ev.choice < 0 || ev.choice >= 4) {
            g->n_bad_choice++;
            continue;
        }
        int k = ev.choice;
        if (ev.token >= 0 && g->n_ids[k] < 256) g->ids[k][g->n_ids[k]++] = ev.token;
        if (g->n_text[k] + ev.n_text < TEXT_MAX) {
            memcpy(g->text[k] + g->n_text[k], ev.text, ev.n_text);
            g->n_text[k] += ev.n_text;
        }
        if (ev.finish_reason) g->finish[k] = ev.finish_reason;
    }
}

/* The reference: PROMPT's ids from the tokenizer, the greedy ids llama2.c's
 * run.c gave for them (the first case of tests/data/stories260K/greedy.txt,
 * whose prompt is PROMPT), and their text (the decode of prompt and output,
 * less the prompt's). Made before any engine is open. */
static int32_t g_want[N_OUT], g_n_want;
static char g_want_text[TEXT_MAX];
static size_t g_n_want_text;

static void reference(void)
{
    snug_error err = {0};
    snug_tokenizer *tok = NULL;
    greedy_case gc;
    bool have = greedy_case_load(1, &gc);
    CHECK(have && strcmp(gc.prompt, PROMPT) == 0, "greedy.txt's first case is for \"%s\"",
          have ? gc.prompt : "(none)");
    CHECK_OK(snug_tokenizer_load(MODEL, &tok, &err), &err);
    snug_tok_encoder *enc = NULL;
    if (tok) CHECK_OK(snug_tok_encoder_create(tok, &enc, &err), &err);
    if (enc) {
        const int32_t *ids = NULL;
        size_t n = 0;
        snug_tok_encode_opts eo = {.add_special = true, .parse_special = true};
        CHECK_OK(snug_tok_encode(enc, PROMPT, strlen(PROMPT), &eo, &ids, &n, &err), &err);
        CHECK(n >= 2 && n <= PROMPT_MAX && ids[0] == snug_tokenizer_bos(tok),
              "the prompt encodes as %zu ids, the first %d", n, n ? ids[0] : -1);
        g_n_prompt = (int32_t)SNUG_MIN(n, (size_t)PROMPT_MAX);
        memcpy(g_prompt, ids, (size_t)g_n_prompt * sizeof(int32_t));
    }
    snug_tok_encoder_free(enc);
    if (have && tok && g_n_prompt > 0) {
        CHECK(gc.n_prompt == g_n_prompt &&
              memcmp(gc.ids, g_prompt, (size_t)g_n_prompt * sizeof(int32_t)) == 0,
              "the tokenizer's %d prompt ids are llama2.c's %d", g_n_prompt, gc.n_prompt);
        g_n_want = SNUG_MIN(N_OUT, gc.n_ids - gc.n_prompt);
        memcpy(g_want, gc.ids + gc.n_prompt, (size_t)g_n_want * sizeof(int32_t));
        char *all = NULL, *head = NULL;
        size_t n_all = 0, n_head = 0;
        CHECK_OK(snug_tok_decode(tok, gc.ids, (size_t)(gc.n_prompt + g_n_want), true, &all, &n_all,
                                 &err), &err);
        CHECK_OK(snug_tok_decode(tok, gc.ids, (size_t)gc.n_prompt, true, &head, &n_head, &err), &err);
        if (all && head) {
            CHECK(n_head <= n_all && memcmp(all, head, n_head) == 0 && strcmp(head, PROMPT) == 0,
                  "the prompt decodes as \"%s\", the whole as \"%s\"", head, all);
            g_n_want_text = n_all - n_head;
            memcpy(g_want_text, all + n_head, g_n_want_text);
        }
        snug_mem_free(all);
        snug_mem_free(head);
    }
    snug_tokenizer_free(tok);
}

static void check_same_ids(const char *what, const int32_t *a, int32_t na, const int32_t *b,
                           int32_t nb)
{
    int32_t at = 0;
    while (at < na && at < nb && a[at] == b[at]) at++;
    CHECK(na == nb && at == na, "%s: %d ids against %d, first difference at %d", what, na, nb, at);
}

static atomic_int g_ready_calls;

static void on_ready(void *ctx)
{
    CHECK(ctx == &g_ready_calls, "on_ready's ctx %p", ctx);
    atomic_fetch_add(&g_ready_calls, 1);
}

/* Greedy text through the API equals the reference, token for token and
 * byte for byte; the prompt was tokenized with BOS; from the end of the
 * submit to the job's free nothing is allocated. */
static void test_greedy_text_is_reference(void)
{
    reference();
    CHECK(g_n_want == N_OUT && g_n_want_text > 0, "reference: %d ids, %zu bytes", g_n_want,
          g_n_want_text);
    snug_error err = {0};
    snug_llm_opts o = opts();
    snug_llm *llm = NULL;
    CHECK_OK(snug_llm_open(&o, &llm, &err), &err);
    if (!llm) return;
    snug_gen_params p = greedy(N_OUT);
    p.on_ready = on_ready;
    p.on_ready_ctx = &g_ready_calls;
    snug_job *job = NULL;
    int64_t allocs0 = snug_mem_alloc_count();
    CHECK_OK(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err);
    if (!job) {
        snug_llm_close(llm);
        return;
    }
    int64_t allocs1 = snug_mem_alloc_count();
    static got g;
    drain(llm, job, &g);
    CHECK(snug_mem_alloc_count() == allocs1, "the token loop made %lld allocations",
          (long long)(snug_mem_alloc_count() - allocs1));
    printf("  submit_text made %lld allocations (the encoder's and the job's)\n",
           (long long)(allocs1 - allocs0));
    check_same_ids("greedy through snug.h", g.ids[0], g.n_ids[0], g_want, g_n_want);
    CHECK(g.n_text[0] == g_n_want_text && memcmp(g.text[0], g_want_text, g_n_want_text) == 0,
          "text \"%.*s\", expected \"%.*s\"", (int)g.n_text[0], g.text[0], (int)g_n_want_text,
          g_want_text);
    CHECK(g.finish[0] && strcmp(g.finish[0], "length") == 0 && g.n_bad_choice == 0,
          "finish %s, %d events of other choices", g.finish[0] ? g.finish[0] : "NULL",
          g.n_bad_choice);
    CHECK(atomic_load(&g_ready_calls) > 0, "on_ready was never called");
    snug_llm_counters_info c;
    snug_llm_counters(llm, &c);
    CHECK(c.prompt_tokens == g_n_prompt && c.generation_tokens == N_OUT && c.requests_finished == 1 &&
          c.kv_blocks_used == 0 && c.running == 0 && c.job_memory_used > 0,
          "counters: %lld prompt tokens, %lld generated, %lld finished, %d blocks used, %d running, "
          "%zu bytes of jobs", (long long)c.prompt_tokens, (long long)c.generation_tokens,
          (long long)c.requests_finished, c.kv_blocks_used, c.running, c.job_memory_used);
    snug_job_free(llm, job);
    CHECK(snug_mem_alloc_count() == allocs1, "freeing the job made %lld allocations",
          (long long)(snug_mem_alloc_count() - allocs1));
    snug_llm_counters(llm, &c);
    CHECK(c.job_memory_used == 0, "after the free jobs hold %zu bytes", c.job_memory_used);
    /* the same ids submitted as ids give the same text */
    CHECK_OK(snug_llm_submit_ids(llm, g_prompt, g_n_prompt, &p, &job, &err), &err);
    if (job) {
        drain(llm, job, &g);
        check_same_ids("greedy from ids", g.ids[0], g.n_ids[0], g_want, g_n_want);
        snug_job_free(llm, job);
    }
    snug_llm_close(llm);
}

/* n = 2 with a seed: the same seed gives the same two texts; the two differ. */
static void test_seeded_choices_repeat(void)
{
    snug_error err = {0};
    snug_llm_opts o = opts();
    snug_llm *llm = NULL;
    CHECK_OK(snug_llm_open(&o, &llm, &err), &err);
    if (!llm) return;
    snug_gen_params p;
    snug_gen_params_default(&p);
    p.n = 2;
    p.has_seed = true;
    p.seed = 1234;
    p.max_tokens = 30;
    p.ignore_eos = true;
    static got g[2];
    for (int run = 0; run < 2; run++) {
        snug_job *job = NULL;
        CHECK_OK(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err);
        if (!job) break;
        drain(llm, job, &g[run]);
        snug_job_free(llm, job);
        for (int k = 0; k < 2; k++)
            CHECK(g[run].n_ids[k] == 30 && g[run].finish[k] && strcmp(g[run].finish[k], "length") == 0,
                  "run %d choice %d: %d tokens, finish %s", run, k, g[run].n_ids[k],
                  g[run].finish[k] ? g[run].finish[k] : "NULL");
    }
    for (int k = 0; k < 2; k++) {
        CHECK(g[0].n_text[k] == g[1].n_text[k] && memcmp(g[0].text[k], g[1].text[k], g[0].n_text[k]) == 0,
              "choice %d: \"%.*s\" then \"%.*s\"", k, (int)g[0].n_text[k], g[0].text[k],
              (int)g[1].n_text[k], g[1].text[k]);
        check_same_ids("seeded, run twice", g[0].ids[k], g[0].n_ids[k], g[1].ids[k], g[1].n_ids[k]);
    }
    CHECK(memcmp(g[0].ids[0], g[0].ids[1], 30 * sizeof(int32_t)) != 0,
          "the two choices drew the same 30 tokens");
    snug_llm_close(llm);
}

/* A long job holds blocks; cancelled, it gives them back and is done. */
static void test_cancel_frees_blocks(void)
{
    snug_error err = {0};
    snug_llm_opts o = opts();
    snug_llm *llm = NULL;
    CHECK_OK(snug_llm_open(&o, &llm, &err), &err);
    if (!llm) return;
    snug_gen_params p = greedy(0); /* up to max_model_len */
    p.n = 2;
    snug_job *job = NULL;
    CHECK_OK(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err);
    if (!job) {
        snug_llm_close(llm);
        return;
    }
    snug_token_event ev;
    int n_events = 0;
    while (n_events < 3) { /* a few tokens in: blocks are held */
        if (snug_job_next(llm, job, &ev)) n_events++;
        else snug_job_wait(llm, job, 1.0);
    }
    snug_llm_counters_info c;
    snug_llm_counters(llm, &c);
    CHECK(c.kv_blocks_used >= 2 && !snug_job_done(llm, job),
          "running: %d blocks used, done %d", c.kv_blocks_used, snug_job_done(llm, job));
    snug_job_cancel(llm, job);
    for (int i = 0; i < 1000 && !snug_job_done(llm, job); i++) {
        while (snug_job_next(llm, job, &ev)) {}
        snug_job_wait(llm, job, 0.01);
    }
    snug_llm_counters(llm, &c);
    CHECK(snug_job_done(llm, job) && c.kv_blocks_used == 0 && c.running == 0 && c.waiting == 0,
          "cancelled: done %d, %d blocks used, %d running, %d waiting", snug_job_done(llm, job),
          c.kv_blocks_used, c.running, c.waiting);
    CHECK(c.generation_tokens < 2 * 250, "%lld tokens generated: the job ran to its end",
          (long long)c.generation_tokens);
    snug_job_cancel(llm, job); /* a done job: nothing */
    snug_job_free(llm, job);
    /* freeing a running job cancels it */
    CHECK_OK(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err);
    snug_job_free(llm, job);
    snug_llm_counters(llm, &c);
    CHECK(c.kv_blocks_used == 0 && c.running == 0 && c.job_memory_used == 0,
          "freed while running: %d blocks used, %d running, %zu bytes of jobs", c.kv_blocks_used,
          c.running, c.job_memory_used);
    /* a job left live is freed by close */
    CHECK_OK(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err);
    snug_llm_close(llm);
}

/* Options, parameters and prompts out of range: refused naming the field,
 * with nothing held and *out NULL. */
static void test_refusals(void)
{
    snug_error err = {0};
    snug_llm *llm = (snug_llm *)&err;
    snug_llm_opts o = opts();
    o.model_dir = NULL;
    CHECK_FAILS(snug_llm_open(&o, &llm, &err), &err, SNUG_INVALID, "model_dir");
    CHECK(llm == NULL, "a failed open leaves *out %p", (void *)llm);
    o = opts();
    o.memory_fraction = 0.5;
    CHECK_FAILS(snug_llm_open(&o, &llm, &err), &err, SNUG_INVALID, "memory_bytes and memory_fraction");
    o = opts();
    o.memory_bytes = 0;
    o.memory_fraction = 1.5;
    CHECK_FAILS(snug_llm_open(&o, &llm, &err), &err, SNUG_INVALID, "memory_fraction: expected");
    o = opts();
    o.max_num_seqs = -1;
    CHECK_FAILS(snug_llm_open(&o, &llm, &err), &err, SNUG_INVALID, "max_num_seqs: expected");
    o = opts();
    o.kv_cache_dtype = SNUG_DTYPE_I8;
    CHECK_FAILS(snug_llm_open(&o, &llm, &err), &err, SNUG_INVALID, "kv_cache_dtype: expected");
    o = opts();
    o.kv_cache_dtype = SNUG_DTYPE_Q8_0; /* the bundled model's head_dim is 8 */
    CHECK_FAILS(snug_llm_open(&o, &llm, &err), &err, SNUG_INVALID, "the model's is 8");
    o = opts();
    o.model_dir = "tests/data/no-such-model";
    snug_status st = snug_llm_open(&o, &llm, &err);
    CHECK(st != SNUG_OK && strstr(err.msg, "no-such-model"), "a missing model: %s: %s",
          snug_status_str(st), err.msg);
    o = opts();
    o.memory_bytes = 4 << 20;
    CHECK_FAILS(snug_llm_open(&o, &llm, &err), &err, SNUG_NOMEM, "budget");

    o = opts();
    CHECK_OK(snug_llm_open(&o, &llm, &err), &err);
    if (!llm) return;
    snug_job *job = (snug_job *)&err;
    int32_t long_prompt[300];
    for (int i = 0; i < 300; i++) long_prompt[i] = i == 0 ? 1 : 403;
    snug_gen_params p = greedy(10);
    CHECK_FAILS(snug_llm_submit_ids(llm, long_prompt, 300, &p, &job, &err), &err, SNUG_INVALID,
                "context_length_exceeded");
    CHECK(job == NULL, "a refused submit leaves *out %p", (void *)job);
    CHECK_FAILS(snug_llm_submit_ids(llm, long_prompt, 256, &p, &job, &err), &err, SNUG_INVALID,
                "context_length_exceeded");
    p = greedy(252); /* 5 prompt ids and 252: one over 256 */
    CHECK_FAILS(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err,
                SNUG_INVALID, "context_length_exceeded");
    p = greedy(10);
    p.temperature = -1;
    CHECK_FAILS(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err,
                SNUG_INVALID, "temperature");
    p = greedy(10);
    p.top_p = 0;
    CHECK_FAILS(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err,
                SNUG_INVALID, "top_p");
    p = greedy(10);
    const char *stops[5] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < SNUG_GEN_STOP_MAX; i++) p.stop[i] = stops[i];
    p.n_stop = 5;
    CHECK_FAILS(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err,
                SNUG_INVALID, "stop: expected 0 to 4 strings, got 5");
    p.n_stop = 1;
    p.stop[0] = "\xff";
    CHECK_FAILS(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err,
                SNUG_INVALID, "stop");
    p = greedy(-1);
    CHECK_FAILS(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err,
                SNUG_INVALID, "max_tokens");
    p = greedy(10);
    p.n = 9;
    CHECK_FAILS(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err,
                SNUG_INVALID, "n: expected 1 to 8");
    p = greedy(10);
    int32_t bad[2] = {1, 512};
    CHECK_FAILS(snug_llm_submit_ids(llm, bad, 2, &p, &job, &err), &err, SNUG_INVALID,
                "prompt: token 1 is 512");
    CHECK_FAILS(snug_llm_submit_ids(llm, bad, 0, &p, &job, &err), &err, SNUG_INVALID, "prompt");
    snug_llm_counters_info c;
    snug_llm_counters(llm, &c);
    CHECK(c.job_memory_used == 0 && c.queued == 0 && c.requests_finished == 0,
          "after refusals: %zu bytes of jobs, %d queued, %lld finished", c.job_memory_used,
          c.queued, (long long)c.requests_finished);
    /* a stop string through the API ends the text before it */
    p = greedy(N_OUT);
    p.stop[0] = ", there"; /* across the first two tokens */
    p.n_stop = 1;
    CHECK_OK(snug_llm_submit_text(llm, PROMPT, strlen(PROMPT), &p, &job, &err), &err);
    if (job) {
        static got g;
        drain(llm, job, &g);
        CHECK(g.n_text[0] == 0 && g.finish[0] && strcmp(g.finish[0], "stop") == 0,
              "stopped at \", there\": text \"%.*s\", finish %s", (int)g.n_text[0], g.text[0],
              g.finish[0] ? g.finish[0] : "NULL");
        snug_job_free(llm, job);
    }
    snug_llm_close(llm);
}

/* A small job memory: submits succeed until it is used up, then fail with
 * SNUG_NOMEM naming it, and succeed again once a job is freed. */
static void test_job_memory_runs_out(void)
{
    snug_error err = {0};
    snug_llm_opts o = opts();
    o.job_memory = 64 << 10;
    snug_llm *llm = NULL;
    CHECK_OK(snug_llm_open(&o, &llm, &err), &err);
    if (!llm) return;
    snug_llm_plan_info plan;
    snug_llm_plan(llm, &plan);
    CHECK(plan.job_memory == (64u << 10) && plan.reserve >= plan.job_memory,
          "plan: job memory %zu of a reserve of %zu", plan.job_memory, plan.reserve);
    snug_gen_params p = greedy(1);
    const int32_t ids[3] = {1, 403, 407};
    static snug_job *jobs[64];
    int n = 0;
    snug_status st = SNUG_OK;
    while (n < 64) {
        st = snug_llm_submit_ids(llm, ids, 3, &p, &jobs[n], &err);
        if (st != SNUG_OK) break;
        n++;
    }
    CHECK(st == SNUG_NOMEM && strstr(err.msg, "job_memory") && n >= 2,
          "after %d jobs: %s: %s", n, snug_status_str(st), err.msg);
    snug_llm_counters_info c;
    snug_llm_counters(llm, &c);
    CHECK(c.job_memory_used <= o.job_memory && c.job_memory_used > o.job_memory / 2,
          "%d jobs hold %zu bytes of %zu", n, c.job_memory_used, o.job_memory);
    if (n > 0) {
        snug_job_free(llm, jobs[--n]);
        CHECK_OK(snug_llm_submit_ids(llm, ids, 3, &p, &jobs[n], &err), &err);
        if (jobs[n]) n++;
    }
    while (n > 0) snug_job_free(llm, jobs[--n]);
    snug_llm_counters(llm, &c);
    CHECK(c.job_memory_used == 0 && c.kv_blocks_used == 0, "after: %zu bytes of jobs, %d blocks",
          c.job_memory_used, c.kv_blocks_used);
    snug_llm_close(llm);
}

typedef struct oom_ctx {
    snug_llm *llm;
    snug_job *job;
} oom_ctx;

static snug_status oom_submit(void *ctx, snug_error *err)
{
    oom_ctx *x = ctx;
    snug_gen_params p = greedy(4);
    return snug_llm_submit_text(x->llm, PROMPT, strlen(PROMPT), &p, &x->job, err);
}

static void oom_undo(void *ctx)
{
    oom_ctx *x = ctx;
    snug_job_free(x->llm, x->job);
    x->job = NULL;
}

/* Allocation k of a text submit fails, k = 1, 2, ...: a clean SNUG_NOMEM
 * each time, nothing held, the job memory back at zero. */
static void test_oom_submit(void)
{
    snug_error err = {0};
    snug_llm_opts o = opts();
    oom_ctx x = {0};
    CHECK_OK(snug_llm_open(&o, &x.llm, &err), &err);
    if (!x.llm) return;
    int failures = test_oom_loop("snug_llm_submit_text", oom_submit, oom_undo, &x, 100);
    CHECK(failures >= 2, "%d allocations failed before the submit succeeded", failures);
    snug_llm_counters_info c;
    snug_llm_counters(x.llm, &c);
    CHECK(c.job_memory_used == 0 && c.queued == 0 && c.kv_blocks_used == 0,
          "after the loop: %zu bytes of jobs, %d queued, %d blocks", c.job_memory_used, c.queued,
          c.kv_blocks_used);
    snug_llm_close(x.llm);
}

static snug_status oom_open(void *ctx, snug_error *err)
{
    snug_llm_opts o = opts();
    return snug_llm_open(&o, (snug_llm **)ctx, err);
}

static void oom_close(void *ctx)
{
    snug_llm_close(*(snug_llm **)ctx);
}

/* Allocation k of an open fails, k = 1, 2, ...: a clean SNUG_NOMEM each
 * time, and nothing held. */
static void test_oom_open(void)
{
    snug_llm *llm = NULL;
    int failures = test_oom_loop("snug_llm_open", oom_open, oom_close, &llm, 5000);
    CHECK(failures >= 10, "%d allocations failed before the open succeeded", failures);
    printf("  snug_llm_open: %d allocations failed cleanly\n", failures);
}

/* The plan adds up: what it lists is within the budget. */
static void test_plan_adds_up(void)
{
    snug_error err = {0};
    snug_llm_opts o = opts();
    snug_llm *llm = NULL;
    CHECK_OK(snug_llm_open(&o, &llm, &err), &err);
    if (!llm) return;
    snug_llm_plan_info p;
    snug_llm_plan(llm, &p);
    size_t sum = p.weights + p.activations + p.serving_state + p.untracked + p.reserve + p.kv_cache;
    CHECK(p.budget == o.memory_bytes && sum <= p.budget && p.weights > 1000000 && p.kv_cache > 0,
          "budget %zu, parts %zu (weights %zu, kv %zu)", p.budget, sum, p.weights, p.kv_cache);
    CHECK(p.max_model_len == 256 && p.max_num_seqs == 8 && p.block_size > 0 &&
          p.kv_blocks * p.block_size >= 8 * 256 && p.job_memory == SNUG_LLM_JOB_MEMORY_DEFAULT,
          "max_model_len %lld, max_num_seqs %d, %lld blocks of %d, job memory %zu",
          (long long)p.max_model_len, p.max_num_seqs, (long long)p.kv_blocks, p.block_size,
          p.job_memory);
    snug_llm_counters_info c;
    snug_llm_counters(llm, &c);
    CHECK(c.kv_blocks_total == p.kv_blocks && c.kv_blocks_used == 0 && !c.failed,
          "%d blocks of %lld, %d used, failed %d", c.kv_blocks_total, (long long)p.kv_blocks,
          c.kv_blocks_used, c.failed);
    snug_llm_close(llm);
}

/* The same prompt twice: the second job's cached tokens are the first's
 * whole blocks but the last token; another salt finds nothing; with
 * prefix caching off nothing is found and the text is the same. */
static void test_cached_tokens(void)
{
    snug_error err = {0};
    static got g[3], first;
    static const char text[] = "Once upon a time, there was a little girl named Lily. She loved "
                               "to play outside in the park with her friends and her big dog.";
    int64_t cached[2][3], n_prompt = 0;
    for (int off = 0; off < 2; off++) {
        snug_llm_opts o = opts();
        o.no_prefix_caching = off;
        snug_llm *llm = NULL;
        CHECK_OK(snug_llm_open(&o, &llm, &err), &err);
        if (!llm) return;
        snug_gen_params p;
        snug_gen_params_default(&p);
        p.temperature = 0;
        p.max_tokens = 20;
        p.ignore_eos = true;
        for (int run = 0; run < 3; run++) {
            snug_job *job = NULL;
            p.cache_salt = run == 2 ? "another tenant" : NULL;
            CHECK_OK(snug_llm_submit_text(llm, text, strlen(text), &p, &job, &err), &err);
            if (!job) break;
            drain(llm, job, &g[run]);
            cached[off][run] = snug_job_cached_tokens(llm, job);
            snug_job_free(llm, job);
            snug_llm_counters_info c0;
            snug_llm_counters(llm, &c0);
            if (run == 0) n_prompt = c0.prompt_tokens;
            check_same_ids("a repeat", g[run].ids[0], g[run].n_ids[0], g[0].ids[0], g[0].n_ids[0]);
        }
        if (!off) first = g[0];
        else check_same_ids("caching off against on", g[0].ids[0], g[0].n_ids[0], first.ids[0],
                            first.n_ids[0]);
        snug_llm_counters_info c;
        snug_llm_counters(llm, &c);
        CHECK(c.prefix_hit_tokens == cached[off][1] &&
              (off ? c.prefix_queried_tokens == 0 : c.prefix_queried_tokens > c.prefix_hit_tokens) &&
              (c.kv_blocks_cached > 0) == !off, "caching %s: %lld of %lld tokens found, %d blocks cached",
              off ? "off" : "on", (long long)c.prefix_hit_tokens, (long long)c.prefix_queried_tokens,
              c.kv_blocks_cached);
        snug_llm_close(llm);
    }
    int64_t want = (n_prompt - 1) / 16 * 16;
    CHECK(cached[0][0] == 0 && cached[0][1] == want && want > 0 && cached[0][2] == 0 &&
          cached[1][0] == 0 && cached[1][1] == 0 && cached[1][2] == 0,
          "cached tokens on: %lld %lld %lld (want 0 %lld 0); off: %lld %lld %lld",
          (long long)cached[0][0], (long long)cached[0][1], (long long)cached[0][2],
          (long long)want, (long long)cached[1][0], (long long)cached[1][1], (long long)cached[1][2]);
}


/* kv_cache_dtype: llama.cpp's Q4_K_M file (head_dim 64) greedy through a
 * Q8_0 and an MXFP8_E4M3 cache gives what a bf16 cache does (the ids up to
 * llama.cpp's first small margin, tests/data/quant/greedy.txt, hold for
 * each: tests/cli). */
static void test_kv_cache_dtype(void)
{
    static const snug_dtype dts[] = {SNUG_DTYPE_NONE, SNUG_DTYPE_Q8_0, SNUG_DTYPE_MXFP8_E4M3};
    static got g[3];
    for (int d = 0; d < 3; d++) {
        snug_error err = {0};
        snug_llm_opts o = opts();
        o.model_dir = "tests/data/quant/q7-Q4_K_M.gguf";
        o.kv_cache_dtype = dts[d];
        snug_llm *llm = NULL;
        CHECK_OK(snug_llm_open(&o, &llm, &err), &err);
        if (!llm) return;
        snug_gen_params p = greedy(16);
        snug_job *job = NULL;
        CHECK_OK(snug_llm_submit_text(llm, "Lily and Ben went to the park", 29, &p, &job, &err), &err);
        if (job) {
            drain(llm, job, &g[d]);
            snug_job_free(llm, job);
        }
        snug_llm_close(llm);
        if (d > 0) check_same_ids(snug_dtype_name(dts[d]), g[d].ids[0], g[d].n_ids[0], g[0].ids[0], g[0].n_ids[0]);
    }
    CHECK(g[0].n_ids[0] == 16, "%d ids through a bf16 cache", g[0].n_ids[0]);
}

/* Speculative decoding through snug.h: the model as its own draft model
 * and prompt lookup give the ids of plain decoding on a story given twice,
 * the counters saying drafts were kept; out-of-range options are refused
 * naming the field. */
static void test_speculative(void)
{
    static const char story[] = "Lily and Ben went to the park. They played with a ball. Lily and Ben went to "
                                "the park. They played with a ball. Lily and";
    static got g[3];
    for (int how = 0; how < 3; how++) {
        snug_error err = {0};
        snug_llm_opts o = opts();
        o.prompt_lookup = how == 1;
        o.draft_model = how == 2 ? MODEL : NULL;
        o.num_speculative_tokens = how ? 6 : 0;
        o.draft_min = how == 2 ? 6 : 0; /* (the model drafting for itself never pays: drafts forced) */
        snug_llm *llm = NULL;
        CHECK_OK(snug_llm_open(&o, &llm, &err), &err);
        if (!llm) return;
        snug_gen_params p = greedy(40);
        snug_job *job = NULL;
        CHECK_OK(snug_llm_submit_text(llm, story, sizeof story - 1, &p, &job, &err), &err);
        if (job) {
            drain(llm, job, &g[how]);
            snug_job_free(llm, job);
        }
        snug_llm_counters_info c;
        snug_llm_counters(llm, &c);
        snug_llm_close(llm);
        if (how == 0) continue;
        check_same_ids(how == 1 ? "prompt lookup" : "draft model", g[how].ids[0], g[how].n_ids[0], g[0].ids[0],
                       g[0].n_ids[0]);
        CHECK(c.spec_draft_tokens > 0 && c.spec_accepted_tokens > 0 &&
                  (how == 1 || c.spec_accepted_tokens == c.spec_draft_tokens),
              "%s: %lld drafted, %lld kept", how == 1 ? "prompt lookup" : "draft model",
              (long long)c.spec_draft_tokens, (long long)c.spec_accepted_tokens);
    }
    CHECK(g[0].n_ids[0] == 40, "%d ids", g[0].n_ids[0]);
    snug_error err = {0};
    snug_llm_opts o = opts();
    o.prompt_lookup = true;
    o.num_speculative_tokens = 17;
    snug_llm *llm = NULL;
    CHECK_FAILS(snug_llm_open(&o, &llm, &err), &err, SNUG_INVALID, "num_speculative_tokens");
}

int main(void)
{
    RUN(test_greedy_text_is_reference);
    RUN(test_seeded_choices_repeat);
    RUN(test_cancel_frees_blocks);
    RUN(test_refusals);
    RUN(test_job_memory_runs_out);
    RUN(test_oom_submit);
    RUN(test_oom_open);
    RUN(test_plan_adds_up);
    RUN(test_cached_tokens);
    RUN(test_kv_cache_dtype);
    RUN(test_speculative);
    return test_summary();
}
