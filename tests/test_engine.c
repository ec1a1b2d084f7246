/*
 * test_engine.c: the serving engine on the bundled model (engine/engine.h):
 * greedy output equals llama2.c's run.c (tests/data/stories260K/greedy.txt);
 * a request batched with 31 others gives the same ids as alone; sequences
 * preempted and recomputed give the same ids as never-preempted ones;
 * cancelling frees the blocks; requests that cannot fit are refused; a full
 * queue says so; the reasoning budget's forced close; and serving, from the
 * first submit to the last output, allocates nothing. Then, as `snug generate` plans it (one sequence, short
 * prompt steps), on a small synthetic model carrying a real tokenizer
 * (TinyLlama's, with its chat template): the chat prompt's ids, streamed
 * text against decoding the ids, seeds, stop strings, the model length,
 * ids past the tokenizer's vocabulary, and that a generation allocates
 * nothing.
 */
#include "test.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "base/json.h"
#include "chat/chat.h"
#include "convert/mkmodel.h"
#include "engine/engine.h"
#include "grammar/schema.h"
#include "support/greedy_txt.h"
#include "support/ref_model.h"

#include <ftw.h>
#include <pthread.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

static const char *const MODEL = "models/stories260K";

enum { N_OUT = 40, PROMPT_LEN = 5 };

static const int32_t g_prompt[PROMPT_LEN] = {1, 403, 407, 261, 378}; /* "Once upon a time" */

static snug_engine_opts opts(int32_t max_seqs, size_t kv_bytes)
{
    snug_engine_opts o = {.plan = {.isa = -1}};
    o.plan.budget.memory_bytes = (size_t)256 << 20;
    o.plan.max_model_len = 256;
    o.plan.max_num_seqs = max_seqs;
    o.plan.max_num_batched_tokens = 64;
    o.plan.kv_cache_memory = kv_bytes;
    return o;
}

static void greedy_request(snug_request *r, int32_t max_tokens)
{
    memset(r, 0, sizeof *r);
    r->prompt = g_prompt;
    r->n_prompt = PROMPT_LEN;
    snug_sampling_params_default(&r->sampling);
    r->sampling.temperature = 0;
    snug_stop_params_default(&r->stop);
    r->stop.max_tokens = max_tokens;
    r->stop.ignore_eos = true;
    r->n = 1;
}

/* The next output of r into *o (its text into text, cap bytes), waiting
 * for it; false once r is done. */
static bool next_output(snug_engine *e, snug_request *r, snug_output *o, char *text, size_t cap)
{
    while (!snug_engine_done(e, r)) {
        if (snug_engine_next(e, r, o, text, cap)) return true;
        snug_engine_wait(e, r, 1.0);
    }
    return false;
}

/* Takes every output of r into ids (choice 0), waiting as needed. */
static int32_t drain(snug_engine *e, snug_request *r, int32_t *ids, int32_t max, snug_finish *why)
{
    int32_t n = 0;
    char text[4096];
    snug_output o;
    while (next_output(e, r, &o, text, sizeof text)) {
        if (o.token >= 0 && n < max) ids[n++] = o.token;
        if (o.finish != SNUG_FINISH_NONE) *why = o.finish;
    }
    return n;
}

/* The ids llama2.c's run.c gave for the prompt, greedy (the first case of
 * tests/data/stories260K/greedy.txt, whose prompt is g_prompt): an
 * implementation that shares no code with snug. */
static int32_t reference(int32_t *ids)
{
    greedy_case c;
    if (!greedy_case_load(1, &c)) {
        CHECK(false, "tests/data/stories260K/greedy.txt: case 1");
        return 0;
    }
    CHECK(c.n_prompt == PROMPT_LEN && memcmp(c.ids, g_prompt, sizeof g_prompt) == 0,
          "greedy.txt's first prompt is %d ids, not g_prompt", c.n_prompt);
    int32_t n = SNUG_MIN(N_OUT, c.n_ids - c.n_prompt);
    memcpy(ids, c.ids + c.n_prompt, (size_t)n * sizeof(int32_t));
    return n;
}

static void check_same(const char *what, const int32_t *a, int32_t na, const int32_t *b, int32_t nb)
{
    int32_t at = 0;
    while (at < na && at < nb && a[at] == b[at]) at++;
    CHECK(na == nb && at == na, "%s: %d ids against %d, first difference at %d", what, na, nb, at);
}

static void test_greedy_alone_and_batched(void)
{
    int32_t want[N_OUT];
    int32_t n_want = reference(want);
    CHECK(n_want == N_OUT, "reference: %d ids", n_want);
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(32, 0);
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    int64_t allocs = snug_mem_alloc_count();
    /* alone */
    static snug_request r[32];
    static int32_t got[32][N_OUT];
    snug_finish why = SNUG_FINISH_NONE;
    greedy_request(&r[0], N_OUT);
    CHECK_OK(snug_engine_submit(e, &r[0], &err), &err);
    int32_t n = drain(e, &r[0], got[0], N_OUT, &why);
    check_same("alone", got[0], n, want, n_want);
    CHECK(why == SNUG_FINISH_MAX_TOKENS, "finish %s", snug_finish_name(why));
    snug_engine_release(e, &r[0]);
    /* with 31 others of other lengths, all at once */
    for (int i = 0; i < 32; i++) {
        greedy_request(&r[i], i == 0 ? N_OUT : 5 + i);
        r[i].n_prompt = i == 0 ? PROMPT_LEN : 1 + i % PROMPT_LEN;
        CHECK_OK(snug_engine_submit(e, &r[i], &err), &err);
    }
    int32_t ns[32];
    for (int i = 0; i < 32; i++) ns[i] = drain(e, &r[i], got[i], N_OUT, &why);
    check_same("batched with 31 others", got[0], ns[0], want, n_want);
    for (int i = 1; i < 32; i++) CHECK(ns[i] == 5 + i, "request %d: %d tokens", i, ns[i]);
    for (int i = 0; i < 32; i++) snug_engine_release(e, &r[i]);
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    CHECK(c.kv.used == 0 && c.running == 0 && c.requests_finished == 33,
          "after: %d blocks used, %d running, %lld finished", c.kv.used, c.running,
          (long long)c.requests_finished);
    CHECK(snug_mem_alloc_count() == allocs, "serving made %lld allocations",
          (long long)(snug_mem_alloc_count() - allocs));
    snug_engine_close(e);
}

/* A cache of 16 blocks (256 tokens) for 8 sequences of 5 + 40: they cannot
 * all run at once, so some are preempted and recomputed; every one still
 * gives the reference ids. */
static void test_preempted_same_ids(void)
{
    int32_t want[N_OUT];
    int32_t n_want = reference(want);
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(8, 16 * 10240);
    /* identical sequences would share every block through the prefix cache (and never be
     * preempted): this is the recompute without it (test_prefix_cache has it with) */
    o.plan.no_prefix_caching = true;
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    static snug_request r[8];
    static int32_t got[8][N_OUT];
    for (int i = 0; i < 8; i++) {
        greedy_request(&r[i], N_OUT);
        CHECK_OK(snug_engine_submit(e, &r[i], &err), &err);
    }
    /* every consumer keeps up (round robin), so that all eight run and grow at once */
    int32_t n[8] = {0};
    char text[4096];
    for (bool busy = true; busy;) {
        busy = false;
        for (int i = 0; i < 8; i++) {
            snug_output out;
            while (snug_engine_next(e, &r[i], &out, text, sizeof text))
                if (out.token >= 0 && n[i] < N_OUT) got[i][n[i]++] = out.token;
            busy |= !snug_engine_done(e, &r[i]);
        }
        if (busy) snug_engine_wait(e, &r[0], 0.01);
    }
    for (int i = 0; i < 8; i++) {
        char what[32];
        snprintf(what, sizeof what, "sequence %d", i);
        check_same(what, got[i], n[i], want, n_want);
    }
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    CHECK(c.preemptions > 0 && c.kv.total == 16, "%lld preemptions over %d blocks",
          (long long)c.preemptions, c.kv.total);
    for (int i = 0; i < 8; i++) snug_engine_release(e, &r[i]);
    snug_engine_close(e);
}

/* Refusals, cancel, and the queue's bound. */
/* The cache made resident after ready, a block at a time between steps:
 * requests submitted at once wait for blocks as they come, and give the
 * reference ids; in the end every block is resident and free. */
static void test_populated_after_ready(void)
{
    int32_t want[N_OUT];
    int32_t n_want = reference(want);
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(8, (size_t)4 << 20);
    o.plan.populate_after_ready = true;
    o.plan.populate_group_blocks = 1;
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    static snug_request r[8];
    static int32_t got[8][N_OUT];
    int32_t ns[8];
    snug_finish why = SNUG_FINISH_NONE;
    for (int i = 0; i < 8; i++) {
        greedy_request(&r[i], N_OUT);
        CHECK_OK(snug_engine_submit(e, &r[i], &err), &err);
    }
    for (int i = 0; i < 8; i++) {
        ns[i] = drain(e, &r[i], got[i], N_OUT, &why);
        check_same("populated after ready", got[i], ns[i], want, n_want);
        snug_engine_release(e, &r[i]);
    }
    snug_engine_counters c;
    for (int i = 0; i < 500; i++) { /* the loop goes on populating while idle */
        snug_engine_counters_get(e, &c);
        if (c.kv.ready == c.kv.total) break;
        usleep(10000);
    }
    CHECK(snug_engine_plan(e)->populated_after_ready && c.kv.total > 100 &&
          c.kv.ready == c.kv.total && c.kv.used == 0,
          "resident %d of %d blocks, %d used", c.kv.ready, c.kv.total,
          c.kv.used);
    snug_engine_close(e);
}

static void test_refusals_and_cancel(void)
{
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(2, 0);
    o.max_queue = 2;
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    snug_request r;
    greedy_request(&r, 252);
    CHECK_FAILS(snug_engine_submit(e, &r, &err), &err, SNUG_INVALID, "context_length_exceeded");
    greedy_request(&r, 10);
    int32_t bad[2] = {5, 512};
    r.prompt = bad;
    r.n_prompt = 2;
    CHECK_FAILS(snug_engine_submit(e, &r, &err), &err, SNUG_INVALID, "prompt: token 1 is 512");
    greedy_request(&r, 10);
    r.n = 3;
    CHECK_FAILS(snug_engine_submit(e, &r, &err), &err, SNUG_INVALID, "n: expected 1 to 2");
    /* long requests fill both slots and the queue; the next is turned away */
    static snug_request q[5];
    int busy = 0;
    for (int i = 0; i < 5; i++) {
        greedy_request(&q[i], 240);
        snug_status st = snug_engine_submit(e, &q[i], &err);
        busy += st == SNUG_BUSY;
    }
    CHECK(busy >= 1, "a full queue answers SNUG_BUSY (%d of 5)", busy);
    for (int i = 0; i < 5; i++) snug_engine_cancel(e, &q[i]);
    for (int i = 0; i < 5; i++) snug_engine_release(e, &q[i]);
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    CHECK(c.kv.used == 0 && c.running == 0 && c.queued == 0,
          "cancelled: %d blocks used, %d running, %d queued", c.kv.used, c.running, c.queued);
    snug_engine_close(e);
}

/* Log-probabilities: each token's and its alternatives', and the prompt's
 * (for echo), agree with the
 * float64 reference model's log-softmax over the same ids (within 2e-3,
 * with an f32 cache),
 * the alternatives come most likely first, and greedy takes the first. */
static void test_logprobs(void)
{
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(4, 0);
    o.plan.kv_dtype = SNUG_DTYPE_F32; /* a bf16 cache moves log-probabilities by ~1e-2 */
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    ref_model *ref = ref_model_load(MODEL);
    CHECK(ref != NULL, "reference model");
    if (!e || !ref) goto out;
    snug_request r;
    greedy_request(&r, 8);
    r.logprobs = true;
    r.top_logprobs = 5;
    static snug_prompt_logprob plp[PROMPT_LEN];
    r.prompt_logprobs = plp;
    CHECK_OK(snug_engine_submit(e, &r, &err), &err);
    int32_t ids[PROMPT_LEN + 8];
    memcpy(ids, g_prompt, sizeof g_prompt);
    int n = PROMPT_LEN, checked = 0;
    int n_vocab = ref_model_vocab(ref);
    static double all[(PROMPT_LEN + 8) * 512];
    char text[4096];
    snug_output out;
    while (!snug_engine_done(e, &r)) {
        if (!snug_engine_next(e, &r, &out, text, sizeof text)) {
            snug_engine_wait(e, &r, 1.0);
            continue;
        }
        if (out.token < 0) continue;
        CHECK(out.n_top == 5 && out.top_ids[0] == out.token && out.top_logprobs[0] == out.logprob,
              "greedy takes the first of %d alternatives", out.n_top);
        for (int k = 1; k < out.n_top; k++)
            CHECK(out.top_logprobs[k] <= out.top_logprobs[k - 1], "alternatives in order at %d", k);
        /* the reference's log-softmax at the last position */
        if (n_vocab <= 512 && ref_model_forward(ref, ids, n, all) == 0) {
            const double *logits = all + (size_t)(n - 1) * (size_t)n_vocab;
            double max = logits[0], sum = 0;
            for (int v = 1; v < n_vocab; v++) max = logits[v] > max ? logits[v] : max;
            for (int v = 0; v < n_vocab; v++) sum += exp(logits[v] - max);
            double lse = max + log(sum);
            for (int k = 0; k < out.n_top; k++) {
                double want = logits[out.top_ids[k]] - lse;
                CHECK(fabs(want - out.top_logprobs[k]) < 2e-3, "token %d, alternative %d: %.6f, "
                      "the reference %.6f", n - PROMPT_LEN, k, out.top_logprobs[k], want);
            }
            checked++;
        }
        ids[n++] = out.token;
    }
    CHECK(checked == 8, "%d tokens checked against the reference", checked);
    /* the prompt's: the row of position p - 1 predicts token p */
    if (n_vocab <= 512 && ref_model_forward(ref, ids, PROMPT_LEN, all) == 0) {
        for (int p = 1; p < PROMPT_LEN; p++) {
            const double *logits = all + (size_t)(p - 1) * (size_t)n_vocab;
            double max = logits[0], sum = 0;
            for (int v = 1; v < n_vocab; v++) max = logits[v] > max ? logits[v] : max;
            for (int v = 0; v < n_vocab; v++) sum += exp(logits[v] - max);
            double want = logits[ids[p]] - (max + log(sum));
            CHECK(fabs(want - plp[p].logprob) < 2e-3 && plp[p].n_top == 5,
                  "prompt token %d: %.6f, the reference %.6f (%d alternatives)", p, plp[p].logprob,
                  want, plp[p].n_top);
        }
    }
    snug_engine_release(e, &r);
out:
    ref_model_free(ref);
    snug_engine_close(e);
}

#if defined(__SANITIZE_ADDRESS__)
#define RSS_IS_MEANINGFUL 0 /* the sanitizer's shadow memory is in the RSS */
#else
#define RSS_IS_MEANINGFUL 1
#endif

static uint64_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

enum { STRESS = 300, STRESS_SEQS = 16 };

/* The memory plan's guarantee through the scheduler: hundreds of requests
 * of random prompt and output lengths up to max_model_len, over a cache of
 * 60 blocks (sequences wait and are preempted): serving allocates nothing,
 * the allocator's total stays within its capacity, every block comes back,
 * and the process holds no page more than the plan said it would. */
static void test_stress_within_plan(void)
{
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(STRESS_SEQS, 0);
    o.max_queue = STRESS;
    /* the test's own requests, made first: their pages are the test's, not the plan's */
    static snug_request q[STRESS];
    static int32_t prompts[STRESS][256];
    uint64_t seed = 11;
    for (int i = 0; i < STRESS; i++) {
        int32_t n_prompt = 1 + (int32_t)(rnd(&seed) % 200);
        greedy_request(&q[i], 1 + (int32_t)(rnd(&seed) % (uint64_t)(255 - n_prompt)));
        for (int32_t k = 0; k < n_prompt; k++) prompts[i][k] = (int32_t)((k * 31 + i) % 512);
        q[i].prompt = prompts[i];
        q[i].n_prompt = n_prompt;
        q[i].sampling.temperature = 1; /* the sampler's full path */
        q[i].sampling.has_seed = true;
        q[i].sampling.seed = (uint64_t)i;
    }
    /* a first plan says what a block takes */
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    o.plan.kv_cache_memory = 60 * snug_engine_plan(e)->sizes.block_bytes;
    snug_engine_close(e);
    e = NULL;
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    const snug_plan_report *r = snug_engine_plan(e);
    int64_t allocs = snug_mem_alloc_count();
    snug_mem_status(SNUG_MEM_TOTAL, NULL, NULL, true);
    int submitted = 0, done = 0, refused = 0;
    char text[4096];
    while (done < STRESS) {
        for (; submitted < STRESS; submitted++) { /* the queue is the bound: retry when full */
            snug_status st = snug_engine_submit(e, &q[submitted], &err);
            if (st == SNUG_BUSY) break;
            CHECK_OK(st, &err);
        }
        refused += submitted < STRESS;
        for (int i = 0; i < submitted; i++) {
            snug_output out;
            while (snug_engine_next(e, &q[i], &out, text, sizeof text)) {}
        }
        done = 0;
        for (int i = 0; i < submitted; i++) done += snug_engine_done(e, &q[i]);
        if (done < STRESS) snug_engine_wait(e, &q[submitted - 1 < 0 ? 0 : submitted - 1], 0.01);
    }
    size_t peak = 0, rss = 0, hwm = 0;
    snug_mem_status(SNUG_MEM_TOTAL, NULL, &peak, false);
    CHECK_OK(snug_proc_rss_exact(&rss, &err), &err);
    CHECK_OK(snug_proc_mem(NULL, &hwm, &err), &err);
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    CHECK(snug_mem_alloc_count() == allocs, "serving made %lld allocations",
          (long long)(snug_mem_alloc_count() - allocs));
    CHECK(peak <= r->capacity, "allocator peak %zu over the capacity %zu", peak, r->capacity);
    CHECK(c.kv.used == 0 && c.requests_finished == STRESS && c.preemptions > 0 &&
          c.kv.total < 16 * 16,
          "%d blocks still used, %lld of %d finished, %lld preemptions over %d blocks",
          c.kv.used, (long long)c.requests_finished, STRESS, (long long)c.preemptions,
          c.kv.total);
    /* serving freed nothing: the resident set only grew, so its end, read to
     * the page, is its peak (the kernel's high-water mark can be pages off);
     * the plan: W + A + S + U + R and the cache it made */
    size_t planned = r->sizes.budget - r->kv.left_bytes + r->kv.kv_held + r->kv.pool_held;
    CHECK(c.kv.total == 60 && planned <= r->sizes.budget, "%d blocks, %zu of %zu planned",
          c.kv.total, planned, r->sizes.budget);
    if (RSS_IS_MEANINGFUL)
        CHECK(rss <= planned, "resident set %zu over the plan's %zu by %zu", rss, planned,
              rss - planned);
    printf("  stress: %d requests over %d blocks, %lld steps, %lld preemptions; resident %zu "
           "(high-water mark %zu) of the plan's %zu\n", STRESS, c.kv.total,
           (long long)c.steps, (long long)c.preemptions, rss, hwm, planned);
    for (int i = 0; i < STRESS; i++) snug_engine_release(e, &q[i]);
    snug_engine_close(e);
}

/* ---- embeddings ------------------------------------------------------------ */

enum { EMB_LONG = 100, EMB_MAX = 128 };

/* A prompt-only request of the first len of ids (an embedding, a score, a
 * classification: the caller sets which), with the defaults. */
static void prompt_only_request(snug_request *r, const int32_t *ids, int len)
{
    memset(r, 0, sizeof *r);
    r->prompt = ids;
    r->n_prompt = len;
    r->n = 1;
    snug_sampling_params_default(&r->sampling);
    snug_stop_params_default(&r->stop);
}

/* The float64 reference's embedding of ids (n of them): the final norm's
 * output pooled (the last token's, the mean, the first's) and scaled to
 * length 1 when normalize; into out (hidden values). */
static bool ref_embedding(const ref_model *ref, const int32_t *ids, int n, snug_pooling p, bool normalize,
                          double *out)
{
    static double hidden[EMB_MAX * 64];
    int h = ref_model_config(ref)->hidden_size;
    if (h > 64 || n > EMB_MAX || ref_model_hidden(ref, ids, n, hidden) != 0) return false;
    double norm = 0;
    for (int k = 0; k < h; k++) {
        double v = 0;
        if (p == SNUG_POOL_MEAN)
            for (int t = 0; t < n; t++) v += hidden[(size_t)t * h + k] / n;
        else
            v = hidden[(size_t)(p == SNUG_POOL_FIRST ? 0 : n - 1) * h + k];
        out[k] = v;
        norm += v * v;
    }
    for (int k = 0; normalize && k < h; k++) out[k] /= sqrt(norm);
    return true;
}

/* Embeddings of the bundled model (f32 weights and cache) against the
 * float64 reference, for each pooling, normalized and not, a prompt of 7
 * tokens and one of 100 (in chunks of at most 64: the mean summed across
 * steps), submitted beside a request that generates: within 1e-4 of the
 * largest value; the same input twice gives the same vector (cosine 1 to
 * 1e-6); the embedding's one output has no token and finish POOLED, and
 * its blocks come back. */
static void test_embeddings(void)
{
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(8, 0);
    o.plan.kv_dtype = SNUG_DTYPE_F32;
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    ref_model *ref = ref_model_load(MODEL);
    CHECK(ref != NULL, "reference model");
    if (!e || !ref) goto out;
    int32_t h = snug_engine_hidden_size(e);
    static int32_t ids[EMB_LONG];
    for (int k = 0; k < EMB_LONG; k++) ids[k] = k == 0 ? 1 : 3 + k * 13 % 500;
    static const snug_pooling pools[] = {SNUG_POOL_LAST, SNUG_POOL_MEAN, SNUG_POOL_FIRST};
    int checked = 0;
    double worst = 0;
    for (size_t pi = 0; pi < SNUG_ARRAY_LEN(pools); pi++)
        for (int normalize = 0; normalize < 2; normalize++)
            for (int len = 7; len <= EMB_LONG; len += EMB_LONG - 7) {
                snug_request gen, emb[2];
                static float vec[2][64];
                greedy_request(&gen, 20);
                CHECK_OK(snug_engine_submit(e, &gen, &err), &err);
                for (int c = 0; c < 2; c++) {
                    prompt_only_request(&emb[c], ids, len);
                    emb[c].pooling = pools[pi];
                    emb[c].normalize = normalize;
                    emb[c].embedding = vec[c];
                    /* (the mean and the first token need every token computed: no prefix hits) */
                    emb[c].cache_salt = pools[pi] == SNUG_POOL_LAST ? 0 : 1000 + (uint64_t)(checked * 2 + c);
                    CHECK_OK(snug_engine_submit(e, &emb[c], &err), &err);
                }
                int32_t got[32];
                snug_finish why = SNUG_FINISH_NONE;
                CHECK(drain(e, &gen, got, 32, &why) == 20, "the request beside the embeddings generates");
                for (int c = 0; c < 2; c++) {
                    why = SNUG_FINISH_NONE;
                    CHECK(drain(e, &emb[c], got, 32, &why) == 0 && why == SNUG_FINISH_POOLED,
                          "an embedding ends with no token, finish %s", snug_finish_name(why));
                }
                double want[64], max = 0, diff = 0, dot = 0, n0 = 0, n1 = 0;
                if (!ref_embedding(ref, ids, len, pools[pi], normalize, want)) continue;
                for (int k = 0; k < h; k++) {
                    max = fmax(max, fabs(want[k]));
                    diff = fmax(diff, fabs(want[k] - vec[0][k]));
                    dot += (double)vec[0][k] * vec[1][k];
                    n0 += (double)vec[0][k] * vec[0][k];
                    n1 += (double)vec[1][k] * vec[1][k];
                }
                worst = fmax(worst, diff / max);
                CHECK(diff <= 1e-4 * max, "pooling %d, normalize %d, %d tokens: %.3g off the reference (largest %.3g)",
                      (int)pools[pi], normalize, len, diff, max);
                CHECK(fabs(dot / sqrt(n0 * n1) - 1) < 1e-6 && (!normalize || fabs(n0 - 1) < 1e-5),
                      "the same input twice: cosine %.9f, length^2 %.6f", dot / sqrt(n0 * n1), n0);
                snug_engine_release(e, &gen);
                for (int c = 0; c < 2; c++) snug_engine_release(e, &emb[c]);
                checked++;
            }
    CHECK(checked == 12, "%d embeddings checked", checked);
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    CHECK(c.kv.used == 0, "every block back: %d used", c.kv.used);
    printf("  embeddings: %d checked against the float64 reference, worst %.2g of the largest value\n", checked, worst);
out:
    ref_model_free(ref);
    snug_engine_close(e);
}

/* A score (a reranker's yes and no): the raw logits of the ids asked for
 * after the prompt's last token, against the float64 reference's, for a
 * prompt of 7 tokens and one of 100 (in chunks); nothing generated. */
static void test_scores(void)
{
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(4, 0);
    o.plan.kv_dtype = SNUG_DTYPE_F32;
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    ref_model *ref = ref_model_load(MODEL);
    CHECK(ref != NULL, "reference model");
    if (!e || !ref) goto out;
    static int32_t ids[EMB_LONG];
    static double logits[EMB_LONG * 512];
    for (int k = 0; k < EMB_LONG; k++) ids[k] = k == 0 ? 1 : 5 + k * 17 % 500;
    static const int32_t want_ids[3] = {42, 7, 311};
    for (int len = 7; len <= EMB_LONG; len += EMB_LONG - 7) {
        snug_request r;
        float scores[3];
        prompt_only_request(&r, ids, len);
        r.score_ids = want_ids;
        r.n_score_ids = 3;
        r.scores = scores;
        CHECK_OK(snug_engine_submit(e, &r, &err), &err);
        int32_t got[4];
        snug_finish why = SNUG_FINISH_NONE;
        CHECK(drain(e, &r, got, 4, &why) == 0 && why == SNUG_FINISH_POOLED, "a score generates nothing");
        snug_engine_release(e, &r);
        if (ref_model_vocab(ref) > 512 || ref_model_forward(ref, ids, len, logits) != 0) continue;
        for (int k = 0; k < 3; k++) {
            double want = logits[(size_t)(len - 1) * 512 + (size_t)want_ids[k]];
            CHECK(fabs(want - scores[k]) < 1e-3 * fmax(1, fabs(want)), "%d tokens, id %d: %.6f, the reference %.6f",
                  len, want_ids[k], scores[k], want);
        }
    }
out:
    ref_model_free(ref);
    snug_engine_close(e);
}

/* A classifier (tests/data/rerank-classifier: the bundled model with a
 * head of one label, w[k] = 0.25 sin(k + 1)): its score of a prompt of 7
 * tokens and one of 100 is the head times the float64 reference's final
 * norm output of the last token; a model that is no classifier refuses
 * the request. */
static void test_classify(void)
{
    snug_error err = {0};
    snug_engine *e = NULL, *plain = NULL;
    snug_engine_opts o = opts(4, 0);
    o.plan.kv_dtype = SNUG_DTYPE_F32;
    CHECK_OK(snug_engine_open("tests/data/rerank-classifier", &o, &e, &err), &err);
    ref_model *ref = ref_model_load(MODEL);
    CHECK(ref != NULL, "reference model");
    if (!e || !ref) goto out;
    static int32_t ids[EMB_LONG];
    static double hidden[EMB_LONG * 64];
    for (int k = 0; k < EMB_LONG; k++) ids[k] = k == 0 ? 1 : 9 + k * 23 % 500;
    for (int len = 7; len <= EMB_LONG; len += EMB_LONG - 7) {
        snug_request r;
        float vec[64], score = 0;
        prompt_only_request(&r, ids, len);
        r.pooling = SNUG_POOL_LAST;
        r.embedding = vec;
        r.classify = true;
        r.scores = &score;
        CHECK_OK(snug_engine_submit(e, &r, &err), &err);
        int32_t got[4];
        snug_finish why = SNUG_FINISH_NONE;
        CHECK(drain(e, &r, got, 4, &why) == 0 && why == SNUG_FINISH_POOLED, "a classification generates nothing");
        snug_engine_release(e, &r);
        if (ref_model_hidden(ref, ids, len, hidden) != 0) continue;
        double want = 0;
        for (int k = 0; k < 64; k++) want += 0.25 * sin(k + 1) * hidden[(size_t)(len - 1) * 64 + (size_t)k];
        CHECK(fabs(want - score) < 1e-4 * fmax(1, fabs(want)), "%d tokens: score %.6f, the reference %.6f", len,
              score, want);
    }
    /* a model that is no classifier */
    CHECK_OK(snug_engine_open(MODEL, &o, &plain, &err), &err);
    if (plain) {
        snug_request r;
        float vec[64], score;
        prompt_only_request(&r, ids, 3);
        r.pooling = SNUG_POOL_LAST;
        r.embedding = vec;
        r.classify = true;
        r.scores = &score;
        CHECK_FAILS(snug_engine_submit(plain, &r, &err), &err, SNUG_INVALID, "no classifier");
    }
out:
    snug_engine_close(plain);
    ref_model_free(ref);
    snug_engine_close(e);
}

/* ---- a model whose windowed layers keep only their windows ------------------ */

enum { WG_REQS = 24, WG_PREFIX = 40, WG_OUT = 30 };

/* Runs WG_REQS greedy requests (a shared prefix of WG_PREFIX ids then a
 * few of their own, WG_OUT tokens each) through model's engine of opts o, all submitted at once (together) or each after the
 * one before has finished (the steps then do not depend on timing); their
 * ids into out (model: the Gemma 3 fixture, or any of a vocabulary of
 * 512 or more). */
static bool run_window_requests(const char *model, const snug_engine_opts *o, bool together,
                                int32_t out[WG_REQS][WG_OUT], snug_engine_counters *c, int64_t cached[WG_REQS],
                                snug_error *err)
{
    snug_engine *e = NULL;
    static snug_request q[WG_REQS];
    static int32_t prompts[WG_REQS][WG_PREFIX + 8];
    if (snug_engine_open(model, o, &e, err) != SNUG_OK) return false;
    bool ok = true;
    for (int i = 0; i < WG_REQS && ok; i++) {
        greedy_request(&q[i], WG_OUT);
        for (int k = 0; k < WG_PREFIX + 8; k++) prompts[i][k] = 3 + (k < WG_PREFIX ? k * 7 % 500 : (i * 13 + k) % 500);
        q[i].prompt = prompts[i];
        q[i].n_prompt = WG_PREFIX + 1 + i % 8;
        q[i].n = together && i % 5 == 0 ? 3 : 1; /* all at once: some of 3 choices, sharing their prompt */
        ok = snug_engine_submit(e, &q[i], err) == SNUG_OK;
        snug_finish why = SNUG_FINISH_NONE;
        if (ok && !together) ok = drain(e, &q[i], out[i], WG_OUT, &why) == WG_OUT;
    }
    for (int i = 0; i < WG_REQS && ok; i++) {
        snug_finish why = SNUG_FINISH_NONE;
        if (together) ok = drain(e, &q[i], out[i], WG_OUT, &why) == WG_OUT;
        cached[i] = snug_engine_cached_tokens(e, &q[i]);
    }
    snug_engine_counters_get(e, c);
    for (int i = 0; i < WG_REQS; i++) snug_engine_release(e, &q[i]);
    snug_engine_close(e);
    return ok;
}

/* The Gemma 3 fixture (a window of 8 on five layers of six) served with
 * its windowed layers in a cache group of their own: 24 requests one after
 * another, prefix caching off (steps that depend neither on timing nor on
 * what a cache holds: this Q8_0 file's products differ in their last bits
 * with the rows a step has, and its near ties follow them) give the ids of
 * a cache of every layer (--swa-full); with prefix caching, one after
 * another and all at once over 8 slots (some of 3 choices), the later
 * requests find the shared prefix through both groups, every request
 * completes, and every block of both groups comes back. */
static void window_group_serving(const char *model, const char *what)
{
    snug_error err = {0};
    snug_engine_opts o = opts(8, 0);
    o.plan.max_model_len = 128;
    o.plan.no_prefix_caching = true;
    static int32_t full[WG_REQS][WG_OUT], grouped[WG_REQS][WG_OUT];
    int64_t cached[WG_REQS];
    snug_engine_counters c;
    o.plan.swa_full = true;
    bool ok = run_window_requests(model, &o, false, full, &c, cached, &err);
    CHECK(ok && c.kv_window.total == 0, "%s, --swa-full: %s", what, err.msg);
    o.plan.swa_full = false;
    ok = ok && run_window_requests(model, &o, false, grouped, &c, cached, &err);
    CHECK(ok && c.kv_window.total > 0 && c.kv_window.used == 0 && c.kv.used == 0,
          "%s, window group: %s (%d window blocks, %d used; %d used of the others)", what, err.msg,
          c.kv_window.total, c.kv_window.used, c.kv.used);
    int same = 0;
    for (int i = 0; ok && i < WG_REQS; i++) same += memcmp(full[i], grouped[i], sizeof full[i]) == 0;
    CHECK(ok && same == WG_REQS, "%s: window group gives --swa-full's ids: %d of %d requests", what, same, WG_REQS);
    /* prefix caching on: one after another, the same ids; all at once, hits found through both groups */
    o.plan.no_prefix_caching = false;
    ok = ok && run_window_requests(model, &o, false, grouped, &c, cached, &err);
    /* (a window block its sequence left behind is the first evicted: the
     * shared prefix ends 8 positions into blocks later requests reuse) */
    CHECK(ok && c.prefix_hit_tokens >= 32 * 4 && c.kv_window.used == 0 && c.kv.used == 0,
          "%s, with prefix caching, one after another: %lld tokens hit", what, (long long)c.prefix_hit_tokens);
    ok = ok && run_window_requests(model, &o, true, grouped, &c, cached, &err);
    int64_t hits = 0;
    for (int i = 0; i < WG_REQS; i++) hits += cached[i] > 0;
    CHECK(ok && c.prefix_hit_tokens >= 16 * (WG_REQS - 8) && hits >= WG_REQS - 8 && c.kv_window.used == 0 &&
              c.kv.used == 0,
          "%s: prefix hits through both groups: %lld tokens, %lld of %d requests hit: %s", what,
          (long long)c.prefix_hit_tokens, (long long)hits, WG_REQS, err.msg);
    printf("  %s: %d requests as --swa-full's ids; with prefix caching %lld tokens hit (%lld requests), "
           "%d window blocks\n", what, same, (long long)c.prefix_hit_tokens, (long long)hits, c.kv_window.total);
}

/* The Gemma 3 fixture (a window of 8 on five layers of six) served with
 * its windowed layers in a cache group of their own: 24 requests one after
 * another, prefix caching off (steps that depend neither on timing nor on
 * what a cache holds: this Q8_0 file's products differ in their last bits
 * with the rows a step has, and its near ties follow them) give the ids of
 * a cache of every layer (--swa-full); with prefix caching, one after
 * another and all at once over 8 slots (some of 3 choices), the later
 * requests find the shared prefix through both groups, every request
 * completes, and every block of both groups comes back. */
static void test_window_group_serving(void)
{
    window_group_serving("tests/data/arch/f7-gemma3-Q8_0.gguf", "gemma3 (5 of 6 layers windowed)");
}

/* The bundled model as Mistral v0.1 would run it, a window of 8 on every
 * layer (tests/data/mistral-window8): the window group holds every key and
 * value, the other cache only the sequences' positions (no layer's data);
 * the same as above. */
static void test_all_windowed_serving(void)
{
    window_group_serving("tests/data/mistral-window8", "mistral (every layer windowed)");
}

/* ---- one sequence with a real tokenizer, as snug generate runs it ---------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Copies file name from tests/data/tokenizers/tinyllama-1.1b-chat into dir. */
static bool copy_file(const char *name, const char *dir)
{
    char src[256], dst[256], *text = NULL;
    size_t len = 0;
    snprintf(src, sizeof src, "tests/data/tokenizers/tinyllama-1.1b-chat/%s", name);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    if (snug_file_read_all(src, 1 << 26, &text, &len, NULL) != SNUG_OK) return false;
    FILE *f = fopen(dst, "wb");
    bool ok = f && fwrite(text, 1, len, f) == len;
    if (f) ok = fclose(f) == 0 && ok;
    snug_mem_free(text);
    return ok;
}

typedef struct tl_fixture {
    char dir[64];
    snug_engine *e;
} tl_fixture;

/* A TinyLlama-shaped vocabulary (vocab ids) on a tiny body, with TinyLlama's
 * tokenizer files, in an engine planned as snug generate plans one: a
 * single sequence of max_len positions, prompt steps of 8 tokens. */
static bool tl_open(tl_fixture *f, int64_t max_len, int32_t vocab, snug_error *err)
{
    memset(f, 0, sizeof *f);
    snug_model_config c;
    if (snug_preset_config("tinyllama-1.1b", &c, err) != SNUG_OK) return false;
    c.hidden_size = 32, c.intermediate_size = 48, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2;
    c.head_dim = 8, c.dtype = SNUG_DTYPE_BF16, c.vocab_size = vocab;
    snprintf(f->dir, sizeof f->dir, "%s/snug-test-gen-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snug_mkmodel_opts o = {.dtype = SNUG_DTYPE_BF16, .n_shards = 1, .seed = 3, .n_threads = 1};
    snug_engine_opts eo = {.plan = {.isa = -1, .max_model_len = max_len, .max_num_seqs = 1,
                                    .max_num_batched_tokens = 8}};
    eo.plan.budget.memory_bytes = (size_t)256 << 20;
    return mkdtemp(f->dir) && snug_mkmodel(&c, &o, f->dir, NULL, err) == SNUG_OK &&
           copy_file("tokenizer.model", f->dir) && copy_file("tokenizer_config.json", f->dir) &&
           snug_engine_open(f->dir, &eo, &f->e, err) == SNUG_OK;
}

static void tl_close(tl_fixture *f)
{
    snug_engine_close(f->e);
    if (f->dir[0]) nftw(f->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* What one request gave (choice 0). */
typedef struct gen_out {
    int32_t ids[256];
    int32_t n_ids;
    char text[8192];
    size_t n_text;
    int pieces;
    snug_finish finish;
} gen_out;

/* Submits r and takes every output into *g; false when the submit failed
 * (err says why). */
static bool gen_run(snug_engine *e, snug_request *r, gen_out *g, snug_error *err)
{
    memset(g, 0, sizeof *g);
    if (snug_engine_submit(e, r, err) != SNUG_OK) return false;
    char text[4096];
    snug_output o;
    while (!snug_engine_done(e, r)) {
        if (!snug_engine_next(e, r, &o, text, sizeof text)) {
            snug_engine_wait(e, r, 1.0);
            continue;
        }
        if (o.token >= 0 && g->n_ids < 256) g->ids[g->n_ids++] = o.token;
        if (o.n_text && g->n_text + o.n_text < sizeof g->text) {
            memcpy(g->text + g->n_text, text, o.n_text);
            g->n_text += o.n_text;
            g->pieces++;
        }
        if (o.finish != SNUG_FINISH_NONE) g->finish = o.finish;
    }
    snug_engine_release(e, r);
    return true;
}

static void gen_request(snug_request *r, const int32_t *prompt, int64_t n_prompt)
{
    memset(r, 0, sizeof *r);
    r->prompt = prompt;
    r->n_prompt = n_prompt;
    snug_sampling_params_default(&r->sampling);
    snug_stop_params_default(&r->stop);
    r->n = 1;
}

/* A grammar compiled from GBNF text (NULL on failure, counted). */
static snug_grammar *gbnf(const char *text)
{
    snug_error err = {0};
    snug_grammar *g = NULL;
    CHECK(snug_grammar_parse_gbnf(text, strlen(text), "root", "grammar", &g, &err) == SNUG_OK, "%s: %s", text,
          err.msg);
    return g;
}

static size_t code_points(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* Whether text is an uppercase letter, 5 to 40 lowercase letters and
 * spaces, and a full stop. */
static bool is_sentence(const char *t, size_t n)
{
    if (n < 7 || n > 42 || t[0] < 'A' || t[0] > 'Z' || t[n - 1] != '.') return false;
    for (size_t i = 1; i + 1 < n; i++)
        if (!(t[i] == ' ' || (t[i] >= 'a' && t[i] <= 'z'))) return false;
    return true;
}

/* Constrained decoding on the bundled model (engine.h, constrain.h): at
 * temperature 1 every output is a whole match of its grammar, ended by the
 * grammar (finish GRAMMAR, no EOS needed), its tokens' bytes its text; a
 * JSON schema's output parses with the right members; a token the grammar
 * refuses is never picked, even greedy with +100 of bias; EOS only where
 * the text is a whole match; and none of it allocates. */
static void test_constrained(void)
{
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(4, 0);
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    snug_grammar *sentence = gbnf("root ::= [A-Z] [a-z ]{5,40} \".\"");
    snug_grammar *xs = gbnf("root ::= \"x\"+");
    snug_strbuf schema_text = {0};
    snug_grammar *object = NULL;
    json_t *schema = json_loads("{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}, "
                                "\"s\": {\"type\": \"string\", \"maxLength\": 8}, \"b\": {\"enum\": [true, \"no\"]}}, "
                                "\"required\": [\"n\", \"s\", \"b\"]}", 0, NULL);
    CHECK(schema && snug_schema_to_gbnf(schema, "schema", &schema_text, &err) == SNUG_OK, "schema: %s", err.msg);
    if (schema_text.p) object = gbnf(schema_text.p);
    if (!e || !sentence || !xs || !object) goto out;
    const snug_tokenizer *tok = snug_engine_tokenizer(e);
    static gen_out g;
    snug_request r;
    int64_t allocs = snug_mem_alloc_count();
    for (uint64_t seed = 1; seed <= 6; seed++) {
        gen_request(&r, g_prompt, PROMPT_LEN);
        r.sampling.seed = seed, r.sampling.has_seed = true;
        r.stop.max_tokens = 60;
        r.grammar = sentence;
        CHECK(gen_run(e, &r, &g, &err), "submit: %s", err.msg);
        /* at most 42 characters, each token at least one: the grammar always ends it */
        CHECK(is_sentence(g.text, g.n_text) && g.finish == SNUG_FINISH_GRAMMAR,
              "seed %llu: \"%.*s\" (%s) is not a whole match ended by the grammar", (unsigned long long)seed,
              (int)g.n_text, g.text, snug_finish_name(g.finish));
        char joined[512], one[64];
        size_t n = 0;
        for (int32_t k = 0; k < g.n_ids; k++) {
            size_t m = snug_tokenizer_token_bytes(tok, g.ids[k], one, sizeof one);
            if (n + m < sizeof joined) memcpy(joined + n, one, m), n += m;
        }
        CHECK(n == g.n_text && memcmp(joined, g.text, n) == 0, "seed %llu: the tokens' bytes are not the text",
              (unsigned long long)seed);
    }
    for (uint64_t seed = 1; seed <= 4; seed++) {
        gen_request(&r, g_prompt, PROMPT_LEN);
        r.sampling.seed = seed, r.sampling.has_seed = true;
        r.stop.max_tokens = 120;
        r.grammar = object;
        CHECK(gen_run(e, &r, &g, &err), "submit: %s", err.msg);
        json_t *v = json_loadb(g.text, g.n_text, 0, NULL);
        const json_t *b = json_object_get(v, "b");
        const char *s = json_string_value(json_object_get(v, "s"));
        CHECK(g.finish == SNUG_FINISH_GRAMMAR && json_is_object(v) && json_object_size(v) == 3 &&
                  json_is_integer(json_object_get(v, "n")) && s && code_points(s) <= 8 &&
                  (json_is_true(b) || (json_is_string(b) && strcmp(json_string_value(b), "no") == 0)),
              "seed %llu: %s: \"%.*s\"", (unsigned long long)seed, snug_finish_name(g.finish), (int)g.n_text, g.text);
        json_decref(v);
    }
    CHECK(snug_mem_alloc_count() == allocs, "constrained serving made %lld allocations",
          (long long)(snug_mem_alloc_count() - allocs));
    /* greedy, with +100 on a token the grammar refuses at the start ('a' cannot begin the sentence) */
    int32_t a = -1;
    for (int32_t id = 0; id < snug_engine_n_vocab(e) && a < 0; id++) {
        char one[64];
        if (snug_tokenizer_token_bytes(tok, id, one, sizeof one) == 1 && one[0] == 'a') a = id;
    }
    snug_logit_bias bias[2] = {{a, 100.0f}, {2, 100.0f}}; /* and EOS (id 2) */
    gen_request(&r, g_prompt, PROMPT_LEN);
    r.sampling.temperature = 0, r.sampling.logit_bias = bias, r.sampling.n_logit_bias = 2;
    r.stop.max_tokens = 60;
    r.grammar = sentence;
    CHECK(a >= 0 && gen_run(e, &r, &g, &err), "submit: %s", err.msg);
    CHECK(g.n_ids > 1 && g.ids[0] != a && is_sentence(g.text, g.n_text),
          "greedy with bias under the grammar: \"%.*s\"", (int)g.n_text, g.text);
    /* EOS (+100) refused until the text is a whole match: one "x" token (or more), then EOS */
    gen_request(&r, g_prompt, PROMPT_LEN);
    r.sampling.temperature = 0, r.sampling.logit_bias = bias + 1, r.sampling.n_logit_bias = 1;
    r.stop.max_tokens = 10;
    r.grammar = xs;
    CHECK(gen_run(e, &r, &g, &err), "submit: %s", err.msg);
    CHECK(g.n_ids == 2 && g.ids[1] == 2 && g.finish == SNUG_FINISH_EOS && g.n_text >= 1 &&
              strspn(g.text, "x") == g.n_text,
          "EOS once accepting: %d tokens, finish %s, \"%.*s\"", g.n_ids, snug_finish_name(g.finish), (int)g.n_text,
          g.text);
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    CHECK(c.grammar_masks >= g.n_ids && c.grammar_walks > 0 && c.grammar_walks < c.grammar_masks,
          "%lld masks, %lld walked (the rest from the cache)", (long long)c.grammar_masks, (long long)c.grammar_walks);
    CHECK(c.grammar_composed > 0, "the object's strings (wide states): %lld masks made from contexts",
          (long long)c.grammar_composed);
    printf("  %lld masks applied, %lld walks (%.1f ms), %lld masks made from contexts, the rest from the cache\n",
           (long long)c.grammar_masks, (long long)c.grammar_walks, c.grammar_walk_seconds * 1e3,
           (long long)c.grammar_composed);
out:
    json_decref(schema);
    snug_strbuf_free(&schema_text);
    snug_grammar_free(sentence);
    snug_grammar_free(xs);
    snug_grammar_free(object);
    snug_engine_close(e);
}

/* What a request gave, every choice's ids and log-probabilities. */
typedef struct spec_out {
    int32_t ids[3][128];
    float lps[3][128];
    int32_t n[3];
} spec_out;

/* Takes every output of every choice of r (submitted) into *g. */
static void spec_drain(snug_engine *e, snug_request *r, spec_out *g)
{
    memset(g, 0, sizeof *g);
    char text[4096];
    snug_output o;
    while (next_output(e, r, &o, text, sizeof text)) {
        int32_t *n = &g->n[o.choice];
        if (o.token >= 0 && *n < 128) g->lps[o.choice][*n] = o.logprob, g->ids[o.choice][(*n)++] = o.token;
    }
}

/* Submits r and takes every output of every choice into *g. */
static void spec_run(snug_engine *e, snug_request *r, spec_out *g)
{
    snug_error err = {0};
    CHECK_OK(snug_engine_submit(e, r, &err), &err);
    spec_drain(e, r, g);
}

/* The request variants test_speculative runs: greedy with log-probabilities;
 * seeded sampling with every filter and penalty; three seeded choices; a
 * grammar at temperature 0.7; each on prompt p. */
static void spec_request(snug_request *r, int variant, const int32_t *p, int64_t n_p, const snug_grammar *g)
{
    gen_request(r, p, n_p);
    r->stop.max_tokens = 60;
    r->stop.ignore_eos = true;
    r->sampling.has_seed = true, r->sampling.seed = 11 + (uint64_t)variant;
    if (variant == 0) r->sampling.temperature = 0, r->logprobs = true, r->top_logprobs = 3;
    if (variant == 1) {
        r->sampling.temperature = 0.9f, r->sampling.top_k = 40, r->sampling.top_p = 0.9f, r->sampling.min_p = 0.05f;
        r->sampling.repetition_penalty = 1.1f, r->sampling.frequency_penalty = 0.2f, r->sampling.presence_penalty = 0.1f;
    }
    if (variant == 2) r->n = 3;
    if (variant == 3) r->sampling.temperature = 0.7f, r->grammar = g, r->stop.ignore_eos = false;
}

/* Speculative decoding (spec.h) on the bundled model, given a story twice
 * (the reference's greedy continuation of g_prompt) and its start a third
 * time: with prompt lookup (an f32 and a bf16 cache) and with the model
 * as its own draft model (f32), each request variant gives the same ids
 * drafted as with drafting turned off for it (no_speculation: no drafts
 * counted), alone and batched with the others; log-probabilities within
 * 1e-4 on f32; drafts are verified and kept, in fewer steps (the draft
 * model's greedy drafts all kept for the greedy request); serving
 * allocates nothing. */
static void test_speculative(void)
{
    int32_t want[N_OUT];
    int32_t n_want = reference(want);
    static int32_t prompt[2 * (PROMPT_LEN + N_OUT) + PROMPT_LEN];
    int64_t n_p = 0;
    for (int rep = 0; rep < 2; rep++) {
        memcpy(prompt + n_p, g_prompt, sizeof g_prompt), n_p += PROMPT_LEN;
        memcpy(prompt + n_p, want, (size_t)n_want * sizeof *want), n_p += n_want;
    }
    memcpy(prompt + n_p, g_prompt, sizeof g_prompt), n_p += PROMPT_LEN;
    snug_grammar *sentence = gbnf("root ::= [A-Z] [a-z ,]{5,200} \".\"");
    for (int conf = 0; conf < 3 && sentence; conf++) {
        int cache = conf == 1; /* bf16 */
        const char *how = conf == 2 ? "draft model" : "prompt lookup";
        snug_error err = {0};
        snug_engine *e = NULL;
        snug_engine_opts o = opts(8, 0);
        o.plan.kv_dtype = cache == 0 ? SNUG_DTYPE_F32 : SNUG_DTYPE_BF16;
        o.spec.prompt_lookup = conf < 2;
        o.spec.draft_model = conf == 2 ? MODEL : NULL;
        o.spec.n_min = conf == 2 ? 4 : 0; /* (the model drafting for itself never pays: drafts forced) */
        CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
        if (!e) break;
        int64_t allocs = snug_mem_alloc_count();
        static spec_out plain[4], alone[4], batched[4];
        static snug_request r[4];
        snug_engine_counters c0, c1, c2, c3;
        snug_engine_counters_get(e, &c0);
        for (int v = 0; v < 4; v++) {
            spec_request(&r[v], v, prompt, n_p, sentence);
            r[v].no_speculation = true;
            spec_run(e, &r[v], &plain[v]);
            snug_engine_release(e, &r[v]);
        }
        snug_engine_counters_get(e, &c1);
        for (int v = 0; v < 4; v++) {
            spec_request(&r[v], v, prompt, n_p, sentence);
            spec_run(e, &r[v], &alone[v]);
            snug_engine_release(e, &r[v]);
        }
        snug_engine_counters_get(e, &c2);
        static spec_out again; /* the greedy one alone again, for its drafts' counts */
        spec_request(&r[0], 0, prompt, n_p, sentence);
        spec_run(e, &r[0], &again);
        snug_engine_release(e, &r[0]);
        snug_engine_counters_get(e, &c3);
        for (int v = 0; v < 4; v++) { /* all at once: drained in turn, the others paused meanwhile */
            spec_request(&r[v], v, prompt, n_p, sentence);
            CHECK_OK(snug_engine_submit(e, &r[v], &err), &err);
        }
        for (int v = 0; v < 4; v++) {
            spec_drain(e, &r[v], &batched[v]);
            snug_engine_release(e, &r[v]);
        }
        CHECK(snug_mem_alloc_count() == allocs, "speculative serving made %lld allocations",
              (long long)(snug_mem_alloc_count() - allocs));
        for (int v = 0; v < 4; v++)
            for (int k = 0; k < (v == 2 ? 3 : 1); k++) {
                char what[96];
                snprintf(what, sizeof what, "%s, %s cache, variant %d, choice %d, drafted alone", how,
                         cache ? "bf16" : "f32", v, k);
                check_same(what, alone[v].ids[k], alone[v].n[k], plain[v].ids[k], plain[v].n[k]);
                snprintf(what, sizeof what, "%s, %s cache, variant %d, choice %d, drafted in a batch", how,
                         cache ? "bf16" : "f32", v, k);
                check_same(what, batched[v].ids[k], batched[v].n[k], plain[v].ids[k], plain[v].n[k]);
                CHECK(plain[v].n[k] >= (v == 3 ? 2 : 60), "variant %d: %d tokens", v, plain[v].n[k]);
            }
        float worst = 0;
        for (int32_t j = 0; j < alone[0].n[0] && j < plain[0].n[0]; j++)
            worst = fmaxf(worst, fabsf(alone[0].lps[0][j] - plain[0].lps[0][j]));
        if (cache == 0) CHECK(worst < 1e-4f, "log-probabilities drafted differ by up to %g", worst);
        CHECK(c1.spec_drafts == c0.spec_drafts, "no_speculation: %lld drafts verified",
              (long long)(c1.spec_drafts - c0.spec_drafts));
        int64_t drafted = c2.spec_drafted_tokens - c1.spec_drafted_tokens;
        int64_t kept = c2.spec_accepted_tokens - c1.spec_accepted_tokens;
        CHECK(drafted > 0 && kept > 0 && kept <= drafted, "drafted %lld, kept %lld", (long long)drafted,
              (long long)kept);
        int64_t steps_plain = c1.steps - c0.steps, steps_drafted = c2.steps - c1.steps;
        CHECK(steps_drafted < steps_plain, "%lld steps drafted against %lld plain", (long long)steps_drafted,
              (long long)steps_plain);
        int64_t greedy_drafted = c3.spec_drafted_tokens - c2.spec_drafted_tokens;
        int64_t greedy_kept = c3.spec_accepted_tokens - c2.spec_accepted_tokens;
        check_same("the greedy request again", again.ids[0], again.n[0], plain[0].ids[0], plain[0].n[0]);
        if (conf == 2)
            CHECK(greedy_drafted >= 40 && greedy_kept == greedy_drafted, "the model as its own draft, greedy: %lld "
                  "drafted, %lld kept", (long long)greedy_drafted, (long long)greedy_kept);
        printf("  %s, %s cache: %lld drafted, %lld kept (%.2f; greedy alone %lld of %lld), %lld steps against %lld, "
               "log-probabilities within %.1g\n", how, cache ? "bf16" : "f32", (long long)drafted, (long long)kept,
               (double)kept / (double)SNUG_MAX(drafted, 1), (long long)greedy_kept, (long long)greedy_drafted,
               (long long)steps_drafted, (long long)steps_plain, (double)worst);
        snug_engine_close(e);
    }
    snug_grammar_free(sentence);
    /* refused: both drafters; a draft model whose tokenizer is not the model's */
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(2, 0);
    o.spec = (snug_spec_opts){.prompt_lookup = true, .draft_model = MODEL};
    CHECK_FAILS(snug_engine_open(MODEL, &o, &e, &err), &err, SNUG_INVALID, "give one drafter");
    tl_fixture tl;
    CHECK(tl_open(&tl, 64, 32000, &err), "the TinyLlama-vocabulary model: %s", err.msg);
    o.spec = (snug_spec_opts){.draft_model = tl.dir};
    CHECK_FAILS(snug_engine_open(MODEL, &o, &e, &err), &err, SNUG_INVALID, "is not the model's");
    tl_close(&tl);
}

/* Sampled drafts (speculative sampling, snug_sample_draft) with the model
 * as its own draft model: requests that sample without a seed draw their
 * drafts from the draft's rows and verify them against the model's, and
 * what they give is distributed as without drafts. 768 choices of three
 * tokens each way (the second drafted) with top-k 5 and a repetition penalty
 * (so that p and q differ and drafts are rejected too): the second token's
 * frequencies agree within 5 sd of their difference. At temperature 0.8
 * with no filter (p = q up to rounding), nearly every sampled draft is
 * kept, where greedy drafts (a seeded request) keep about half. Nothing is
 * allocated. */
static void test_speculative_sampled(void)
{
    enum { REQS = 48, CHOICES = 16, V = 512 };
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(16, 0);
    o.plan.kv_dtype = SNUG_DTYPE_F32;
    o.spec.draft_model = MODEL;
    o.spec.n_min = 4;
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    int64_t allocs = snug_mem_alloc_count();
    static int32_t second[2][V];
    int64_t kept[2] = {0}, drafted[2] = {0};
    static snug_request r;
    for (int mode = 0; mode < 2; mode++) {
        snug_engine_counters c0, c1;
        snug_engine_counters_get(e, &c0);
        for (int q = 0; q < REQS; q++) {
            gen_request(&r, g_prompt, PROMPT_LEN);
            r.n = CHOICES;
            r.sampling.temperature = 2.0f, r.sampling.top_k = 5, r.sampling.repetition_penalty = 2.0f;
            r.stop.max_tokens = 3; /* (the decode after the first token drafts one: room for it and a third) */
            r.stop.ignore_eos = true;
            r.no_speculation = mode == 0;
            CHECK_OK(snug_engine_submit(e, &r, &err), &err);
            int32_t n_out[CHOICES] = {0};
            char text[256];
            snug_output out;
            while (next_output(e, &r, &out, text, sizeof text))
                if (out.token >= 0 && out.choice < CHOICES && n_out[out.choice]++ == 1 && out.token < V)
                    second[mode][out.token]++;
            snug_engine_release(e, &r);
        }
        snug_engine_counters_get(e, &c1);
        drafted[mode] = c1.spec_drafted_tokens - c0.spec_drafted_tokens;
        kept[mode] = c1.spec_accepted_tokens - c0.spec_accepted_tokens;
    }
    int n_each = 0, worst_id = -1;
    double worst = 0;
    for (int v = 0; v < V; v++) n_each += second[0][v];
    for (int v = 0; v < V; v++) {
        double fa = (double)second[0][v] / n_each, fb = (double)second[1][v] / n_each, f = (fa + fb) / 2;
        double sd = sqrt(f * (1 - f) * 2.0 / n_each) + 1e-12, dev = fabs(fa - fb) / sd;
        if (f > 0 && dev > worst) worst = dev, worst_id = v;
        CHECK(fabs(fa - fb) <= 5 * sd + 2.0 / n_each, "token %d second: %.4f without drafts, %.4f with", v, fa, fb);
    }
    CHECK(n_each == REQS * CHOICES && drafted[0] == 0 && drafted[1] >= REQS * CHOICES && kept[1] > 0 &&
              kept[1] < drafted[1],
          "%d second tokens each way; drafts %lld without, %lld with (%lld kept)", n_each, (long long)drafted[0],
          (long long)drafted[1], (long long)kept[1]);
    /* p = q: sampled drafts kept; a seed's greedy drafts half as often */
    double rate[2] = {0};
    for (int seeded = 0; seeded < 2; seeded++) {
        snug_engine_counters c0, c1;
        snug_engine_counters_get(e, &c0);
        gen_request(&r, g_prompt, PROMPT_LEN);
        r.sampling.temperature = 0.8f;
        r.sampling.has_seed = seeded, r.sampling.seed = 5;
        r.stop.max_tokens = 100;
        r.stop.ignore_eos = true;
        static spec_out g;
        spec_run(e, &r, &g);
        snug_engine_release(e, &r);
        snug_engine_counters_get(e, &c1);
        rate[seeded] = (double)(c1.spec_accepted_tokens - c0.spec_accepted_tokens) /
                       (double)SNUG_MAX(c1.spec_drafted_tokens - c0.spec_drafted_tokens, 1);
        CHECK(g.n[0] == 100, "%d tokens", g.n[0]);
    }
    CHECK(rate[0] >= 0.95 && rate[1] < 0.9, "temperature 0.8: sampled drafts kept %.3f, greedy ones %.3f", rate[0],
          rate[1]);
    CHECK(snug_mem_alloc_count() == allocs, "sampled drafts made %lld allocations",
          (long long)(snug_mem_alloc_count() - allocs));
    printf("  sampled drafts: the second token over %d choices each way within %.2f sd (token %d); %lld of %lld "
           "drafts kept (temperature 2, top-k 5, repetition penalty 2); at temperature 0.8 sampled drafts kept %.3f, greedy "
           "ones %.3f\n", n_each, worst, worst_id, (long long)kept[1], (long long)drafted[1], rate[0], rate[1]);
    snug_engine_close(e);
}

/* The reasoning budget (think.h) in the step loop: the forced close comes
 * after budget tokens of the block, in place of what greedy sampling picks
 * (the reference ids before it), at once with a budget of 0, never when the
 * model closes the block itself; a block opened by the model (logit bias on
 * the opening id) counts from there; bad tags are refused; nothing is
 * allocated. Ids stand in for the tags (stories260K has no <think>). */
static void test_reasoning_budget(void)
{
    int32_t want[N_OUT];
    int32_t n_want = reference(want);
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(2, 0);
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e || n_want < 8) goto out;
    enum { OPEN = 100, CLOSE = 101, NL = 50, NN = 60 };
    for (int k = 0; k < 8; k++) CHECK(want[k] != CLOSE, "the reference's first ids do not close the block");
    snug_think_params think = {.budget = 3, .inside = true, .n_open = 1, .n_close = 1, .n_force = 3};
    think.open[0] = OPEN, think.close[0] = CLOSE;
    think.force[0] = NL, think.force[1] = CLOSE, think.force[2] = NN;
    snug_request r;
    static int32_t got[N_OUT];
    snug_finish why = SNUG_FINISH_NONE;
    int64_t allocs = snug_mem_alloc_count();
    /* inside, budget 3: three of the model's ids, the close, then the model again */
    greedy_request(&r, 10);
    r.think = think;
    CHECK_OK(snug_engine_submit(e, &r, &err), &err);
    int32_t n = drain(e, &r, got, N_OUT, &why);
    snug_engine_release(e, &r);
    CHECK(n == 10 && memcmp(got, want, 3 * sizeof(int32_t)) == 0 && got[3] == NL && got[4] == CLOSE &&
              got[5] == NN,
          "budget 3: %d ids, %d %d %d | %d %d %d", n, got[0], got[1], got[2], got[3], got[4], got[5]);
    /* budget 0: the close first */
    greedy_request(&r, 5);
    r.think = think;
    r.think.budget = 0;
    CHECK_OK(snug_engine_submit(e, &r, &err), &err);
    n = drain(e, &r, got, N_OUT, &why);
    snug_engine_release(e, &r);
    CHECK(n == 5 && got[0] == NL && got[1] == CLOSE && got[2] == NN, "budget 0: %d ids, %d %d %d", n, got[0],
          got[1], got[2]);
    /* the model closes it at once (bias on the closing id): nothing forced */
    snug_logit_bias close_bias = {CLOSE, 100.0f}, open_bias = {OPEN, 100.0f};
    greedy_request(&r, 6);
    r.think = think;
    r.sampling.logit_bias = &close_bias, r.sampling.n_logit_bias = 1;
    CHECK_OK(snug_engine_submit(e, &r, &err), &err);
    n = drain(e, &r, got, N_OUT, &why);
    snug_engine_release(e, &r);
    bool only_close = n == 6;
    for (int32_t k = 0; k < n; k++) only_close &= got[k] == CLOSE;
    CHECK(only_close, "closed by the model: %d ids, the first %d", n, got[0]);
    /* outside: the model opens the block (the bias makes every pick the opening id), two ids count */
    greedy_request(&r, 8);
    r.think = think;
    r.think.inside = false, r.think.budget = 2;
    r.sampling.logit_bias = &open_bias, r.sampling.n_logit_bias = 1;
    CHECK_OK(snug_engine_submit(e, &r, &err), &err);
    n = drain(e, &r, got, N_OUT, &why);
    snug_engine_release(e, &r);
    CHECK(n == 8 && got[0] == OPEN && got[1] == OPEN && got[2] == OPEN && got[3] == NL && got[4] == CLOSE &&
              got[5] == NN && got[6] == OPEN,
          "opened by the model, budget 2: %d ids, %d %d %d | %d %d %d | %d", n, got[0], got[1], got[2], got[3],
          got[4], got[5], got[6]);
    CHECK(snug_mem_alloc_count() == allocs, "budgeted serving made %lld allocations",
          (long long)(snug_mem_alloc_count() - allocs));
    /* tags out of the vocabulary, or no closing tag: refused */
    greedy_request(&r, 5);
    r.think = think;
    r.think.force[2] = snug_engine_n_vocab(e);
    CHECK_FAILS(snug_engine_submit(e, &r, &err), &err, SNUG_INVALID, "think: the forced close's id 512");
    r.think = think;
    r.think.n_close = 0;
    CHECK_FAILS(snug_engine_submit(e, &r, &err), &err, SNUG_INVALID, "think: the closing tag has 0");
out:
    snug_engine_close(e);
}

/* The chat prompt, its ids, streamed text == the decode of prompt and
 * output less the prompt's (the output continues the prompt), seeds, a
 * stop string, bad parameters, no allocation. */
static void test_generate_chat_stream(void)
{
    snug_error err = {0};
    tl_fixture f;
    bool ok = tl_open(&f, 256, 32000, &err);
    CHECK(ok, "setup: %s", err.msg);
    const snug_tokenizer *tok = ok ? snug_engine_tokenizer(f.e) : NULL;
    snug_tok_encoder *enc = NULL;
    char *text = NULL;
    size_t len = 0;
    json_t *msgs = NULL;
    if (tok) {
        snug_json_init();
        msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", "Write a haiku about memory.");
        CHECK_OK(snug_chat_apply(tok, msgs, true, &text, &len, &err), &err);
        CHECK_OK(snug_tok_encoder_create(tok, &enc, &err), &err);
    }
    if (text && enc) {
        const char *want = "<|user|>\nWrite a haiku about memory.</s>\n<|assistant|>\n";
        CHECK(strcmp(text, want) == 0, "rendered %s", text);
        snug_tok_encode_opts eo = {.add_special = false, .parse_special = true};
        const int32_t *ids;
        size_t n_ids;
        CHECK_OK(snug_tok_encode(enc, text, len, &eo, &ids, &n_ids, &err), &err);
        int32_t prompt[64];
        size_t n_prompt = SNUG_MIN(n_ids, (size_t)64);
        memcpy(prompt, ids, n_prompt * sizeof(int32_t));
        CHECK(n_prompt > 10 && prompt[0] == 529 && prompt[n_prompt - 1] == 13, "prompt ids %d ... %d (%zu)",
              prompt[0], prompt[n_prompt - 1], n_prompt);
        /* "</s>" in the template text became the EOS token itself. */
        bool has_eos = false;
        for (size_t i = 0; i < n_prompt; i++) has_eos |= prompt[i] == 2;
        CHECK(has_eos, "the template's </s> is token 2");

        snug_request r;
        gen_request(&r, prompt, (int64_t)n_prompt);
        r.sampling.seed = 42, r.sampling.has_seed = true;
        r.sampling.temperature = 0.8f, r.sampling.top_p = 0.95f;
        r.stop.max_tokens = 40;
        r.stop.ignore_eos = true;
        static gen_out first, again;
        int64_t allocs = snug_mem_alloc_count();
        CHECK(gen_run(f.e, &r, &first, &err), "submit: %s", err.msg);
        CHECK(snug_mem_alloc_count() == allocs, "generation allocated %lld times",
              (long long)(snug_mem_alloc_count() - allocs));
        CHECK(first.n_ids == 40 && first.finish == SNUG_FINISH_MAX_TOKENS, "%d tokens, finish %s",
              first.n_ids, snug_finish_name(first.finish));
        int32_t all_ids[64 + 40];
        memcpy(all_ids, prompt, n_prompt * sizeof(int32_t));
        memcpy(all_ids + n_prompt, first.ids, (size_t)first.n_ids * sizeof(int32_t));
        char *all = NULL, *head = NULL;
        size_t n_all = 0, n_head = 0;
        CHECK_OK(snug_tok_decode(tok, all_ids, n_prompt + (size_t)first.n_ids, true, &all, &n_all, &err), &err);
        CHECK_OK(snug_tok_decode(tok, prompt, n_prompt, true, &head, &n_head, &err), &err);
        CHECK(all && head && n_head <= n_all && memcmp(all, head, n_head) == 0 &&
              n_all - n_head == first.n_text && memcmp(all + n_head, first.text, first.n_text) == 0,
              "streamed %zu bytes in %d pieces, the decode continues the prompt's with %zu",
              first.n_text, first.pieces, n_all - n_head);
        snug_mem_free(all);
        snug_mem_free(head);

        /* The same seed gives the same ids; another seed other ids. */
        CHECK(gen_run(f.e, &r, &again, &err), "submit: %s", err.msg);
        CHECK(again.n_ids == 40 && memcmp(first.ids, again.ids, sizeof(int32_t) * 40) == 0,
              "same seed, different ids");
        r.sampling.seed = 43;
        CHECK(gen_run(f.e, &r, &again, &err), "submit: %s", err.msg);
        CHECK(memcmp(first.ids, again.ids, sizeof(int32_t) * 40) != 0, "another seed, same ids");

        /* A stop string cut from the middle of the first text ends there. */
        if (first.n_text > 12) {
            r.sampling.seed = 42;
            CHECK_OK(snug_stop_params_add_string(&r.stop, first.text + 6, 4, &err), &err);
            CHECK(gen_run(f.e, &r, &again, &err), "submit: %s", err.msg);
            char *hit = memmem(first.text, first.n_text, first.text + 6, 4);
            size_t want_n = (size_t)(hit - first.text);
            CHECK(again.finish == SNUG_FINISH_STOP_STRING && again.n_text == want_n &&
                  memcmp(again.text, first.text, want_n) == 0,
                  "stop string: finish %s, %zu bytes (want %zu)", snug_finish_name(again.finish),
                  again.n_text, want_n);
        }
        /* Bad parameters are refused. */
        r.sampling.top_p = 0;
        CHECK_FAILS(snug_engine_submit(f.e, &r, &err), &err, SNUG_INVALID, "top_p");
    }
    json_decref(msgs);
    snug_mem_free(text);
    snug_tok_encoder_free(enc);
    tl_close(&f);
}

/* A sequence ends at the model length; a prompt that fills it is refused. */
static void test_generate_model_length(void)
{
    snug_error err = {0};
    tl_fixture f;
    bool ok = tl_open(&f, 20, 32000, &err);
    CHECK(ok, "setup: %s", err.msg);
    if (ok) {
        int32_t prompt[20] = {1, 450, 4996, 17354, 1701, 29916};
        snug_request r;
        gen_request(&r, prompt, 6);
        r.sampling.temperature = 0;
        r.stop.ignore_eos = true;
        static gen_out g;
        CHECK(gen_run(f.e, &r, &g, &err), "submit: %s", err.msg);
        CHECK(g.finish == SNUG_FINISH_MODEL_LENGTH && 6 + g.n_ids == 20, "finish %s at %d",
              snug_finish_name(g.finish), 6 + g.n_ids);
        gen_request(&r, prompt, 20);
        CHECK_FAILS(snug_engine_submit(f.e, &r, &err), &err, SNUG_INVALID,
                    "context_length_exceeded: this model's maximum context length is 20 tokens");
    }
    tl_close(&f);
}

/* A model whose vocabulary is larger than its tokenizer's (padded
 * embeddings, as Qwen2 has): ids past the tokenizer have no text, and are
 * not an error. */
static void test_generate_ids_past_tokenizer(void)
{
    snug_error err = {0};
    tl_fixture f;
    bool ok = tl_open(&f, 64, 32064, &err);
    CHECK(ok, "setup: %s", err.msg);
    if (ok) {
        int32_t prompt[3] = {1, 450, 4996};
        snug_logit_bias bias = {32050, 100.0f};
        snug_request r;
        gen_request(&r, prompt, 3);
        r.sampling.temperature = 0, r.sampling.logit_bias = &bias, r.sampling.n_logit_bias = 1;
        r.stop.max_tokens = 3;
        static gen_out g;
        CHECK(gen_run(f.e, &r, &g, &err), "submit: %s", err.msg);
        CHECK(g.n_ids == 3 && g.ids[0] == 32050 && g.ids[2] == 32050 && g.n_text == 0,
              "%d tokens, first %d, %zu bytes of text", g.n_ids, g.ids[0], g.n_text);
    }
    tl_close(&f);
}

/* ---- stopping while consumers let go ------------------------------------------- */

enum { RACERS = 4, RACE_ROUNDS = 24 };

typedef struct racer {
    snug_engine *e;
    snug_request r;
    int32_t n_taken;
    int32_t take; /* outputs to take before letting go */
    bool cancel;  /* cancel first, then release */
} racer;

static void *race_release(void *arg)
{
    racer *x = arg;
    snug_output out;
    char text[256];
    while (x->n_taken < x->take && !snug_engine_done(x->e, &x->r)) {
        if (snug_engine_next(x->e, &x->r, &out, text, sizeof text)) x->n_taken++;
        else snug_engine_wait(x->e, &x->r, 0.05);
    }
    if (x->cancel) snug_engine_cancel(x->e, &x->r);
    snug_engine_release(x->e, &x->r);
    return NULL;
}

/* Consumers cancel and release while the engine stops under them, round
 * after round, each at another moment: cancel and release took "stopping"
 * for "the loop has ended" and freed slots while a step still ran (the
 * scheduler's assertion, or memory freed under the step). Every round must
 * end with every request released, nothing leaked. */
static void test_stop_races_release(void)
{
    snug_error err = {0};
    int64_t base = snug_mem_alloc_count();
    uint64_t mem_before;
    snug_mem_status(SNUG_MEM_TOTAL, &mem_before, NULL, false);
    int rounds = 0;
    for (int round = 0; round < RACE_ROUNDS && !g_test_failed_checks; round++) {
        snug_engine *e = NULL;
        snug_engine_opts o = opts(8, 0);
        CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
        if (!e) return;
        static racer x[RACERS];
        pthread_t t[RACERS];
        for (int i = 0; i < RACERS; i++) {
            x[i] = (racer){.e = e, .take = (round * 3 + i * 5) % 17, .cancel = (round + i) % 2 == 0};
            greedy_request(&x[i].r, 200);
            CHECK_OK(snug_engine_submit(e, &x[i].r, &err), &err);
            pthread_create(&t[i], NULL, race_release, &x[i]);
        }
        usleep((useconds_t)(round % 6) * 700); /* stop at another moment each round */
        snug_engine_stop(e);
        for (int i = 0; i < RACERS; i++) pthread_join(t[i], NULL);
        snug_engine_close(e);
        rounds++;
    }
    uint64_t mem_after;
    snug_mem_status(SNUG_MEM_TOTAL, &mem_after, NULL, false);
    CHECK(mem_after == mem_before, "after %d rounds: %llu bytes held, %llu before", rounds,
          (unsigned long long)mem_after, (unsigned long long)mem_before);
    printf("  %d rounds of %d consumers letting go while the engine stopped (%lld allocations)\n", rounds, RACERS,
           (long long)(snug_mem_alloc_count() - base));
}

int main(void)
{
    RUN(test_greedy_alone_and_batched);
    RUN(test_preempted_same_ids);
    RUN(test_populated_after_ready);
    RUN(test_refusals_and_cancel);
    RUN(test_logprobs);
    RUN(test_constrained);
    RUN(test_reasoning_budget);
    RUN(test_speculative);
    RUN(test_speculative_sampled);
    RUN(test_stress_within_plan);
    RUN(test_embeddings);
    RUN(test_scores);
    RUN(test_classify);
    RUN(test_window_group_serving);
    RUN(test_all_windowed_serving);
    RUN(test_generate_chat_stream);
    RUN(test_generate_model_length);
    RUN(test_generate_ids_past_tokenizer);
    RUN(test_stop_races_release);
    return test_summary();
}
