/*
 * test_prefix_cache.c: prefix caching through the serving engine on the
 * bundled model (engine/engine.h, engine/blocks.h): greedy ids identical
 * with caching on and off for a multi-turn chat, n = 1..8 choices, a
 * system prompt shared by 32 concurrent requests and preemption under a
 * small pool; cached_tokens equal to the whole blocks of the previous
 * turn's prompt and answer; the prompt of n choices computed once; cache
 * salts kept apart; the reset; and an eviction stress run after which
 * every block is back, with nothing allocated.
 */
#include "test.h"

#include "base/mem.h"
#include "engine/engine.h"

#include <string.h>

static const char *const MODEL = "models/stories260K";

enum { BLOCK = 16, MAX_IDS = 256, N_TURNS = 5, TURN_OUT = 24 };

static snug_engine_opts opts(bool caching, int32_t max_seqs, size_t kv_bytes)
{
    snug_engine_opts o = {.plan = {.isa = -1}};
    o.plan.budget.memory_bytes = (size_t)256 << 20;
    o.plan.max_model_len = 256;
    o.plan.max_num_seqs = max_seqs;
    o.plan.max_num_batched_tokens = 64;
    o.plan.kv_cache_memory = kv_bytes;
    o.plan.no_prefix_caching = !caching;
    return o;
}

static void greedy(snug_request *r, const int32_t *prompt, int64_t n_prompt, int32_t max_tokens,
                   int32_t n)
{
    memset(r, 0, sizeof *r);
    r->prompt = prompt;
    r->n_prompt = n_prompt;
    snug_sampling_params_default(&r->sampling);
    r->sampling.temperature = 0;
    snug_stop_params_default(&r->stop);
    r->stop.max_tokens = max_tokens;
    r->stop.ignore_eos = true;
    r->n = n;
}

/* Takes every output of r, choice k's ids into ids[k * max ..], counts
 * into n[k]; waits as needed. */
static void drain(snug_engine *e, snug_request *r, int32_t *ids, int32_t max, int32_t *n)
{
    char text[4096];
    snug_output o;
    for (int k = 0; k < r->n; k++) n[k] = 0;
    while (!snug_engine_done(e, r)) {
        if (!snug_engine_next(e, r, &o, text, sizeof text)) {
            snug_engine_wait(e, r, 1.0);
            continue;
        }
        if (o.token >= 0 && n[o.choice] < max) ids[o.choice * max + n[o.choice]++] = o.token;
    }
}

/* Some token ids of the bundled model's vocabulary (512), seeded. */
static void words(int32_t *out, int n, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        out[i] = 3 + (int32_t)((seed >> 8) % 500);
    }
}

/* A 5-turn chat as token ids: each turn's prompt is the last one, its
 * answer and a new message of 9-21 ids. Records every turn's answer and
 * cached_tokens. */
static void chat(snug_engine *e, int32_t answers[N_TURNS][TURN_OUT], int64_t cached[N_TURNS],
                 int64_t prompt_len[N_TURNS], int64_t prev_known[N_TURNS])
{
    static int32_t hist[MAX_IDS];
    int64_t n_hist = 0, known = 0;
    snug_error err = {0};
    for (int t = 0; t < N_TURNS; t++) {
        int n_new = 9 + 3 * t;
        hist[n_hist++] = 1;
        words(hist + n_hist, n_new - 1, 77u + (uint32_t)t);
        n_hist += n_new - 1;
        snug_request r;
        greedy(&r, hist, n_hist, TURN_OUT, 1);
        CHECK_OK(snug_engine_submit(e, &r, &err), &err);
        int32_t n = 0;
        drain(e, &r, answers[t], TURN_OUT, &n);
        CHECK(n == TURN_OUT, "turn %d: %d tokens", t, n);
        cached[t] = snug_engine_cached_tokens(e, &r);
        prompt_len[t] = n_hist;
        prev_known[t] = known;
        snug_engine_release(e, &r);
        memcpy(hist + n_hist, answers[t], sizeof(int32_t) * TURN_OUT);
        n_hist += TURN_OUT;
        known = n_hist - 1; /* the last answer token was never fed back */
    }
}

static void check_same(const char *what, const int32_t *a, int32_t na, const int32_t *b, int32_t nb)
{
    int32_t at = 0;
    while (at < na && at < nb && a[at] == b[at]) at++;
    CHECK(na == nb && at == na, "%s: %d ids against %d, first difference at %d", what, na, nb, at);
}

static void test_chat_turns(void)
{
    static int32_t ans[2][N_TURNS][TURN_OUT];
    int64_t cached[2][N_TURNS], len[N_TURNS], known[N_TURNS];
    snug_error err = {0};
    for (int on = 0; on < 2; on++) {
        snug_engine *e = NULL;
        snug_engine_opts o = opts(on, 8, 0);
        CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
        if (!e) return;
        chat(e, ans[on], cached[on], len, known);
        snug_engine_counters c;
        snug_engine_counters_get(e, &c);
        CHECK(c.kv.caching == on && c.kv.used == 0, "caching %d: %d blocks used", on,
              c.kv.used);
        snug_engine_close(e);
    }
    for (int t = 0; t < N_TURNS; t++) {
        char what[48];
        snprintf(what, sizeof what, "turn %d with caching against without", t);
        check_same(what, ans[1][t], TURN_OUT, ans[0][t], TURN_OUT);
        /* the whole blocks of the previous prompt and answer that were computed */
        int64_t want = SNUG_MIN(known[t], len[t] - 1) / BLOCK * BLOCK;
        CHECK(cached[1][t] == want && cached[0][t] == 0,
              "turn %d (%lld tokens): cached %lld, want %lld; without caching %lld", t,
              (long long)len[t], (long long)cached[1][t], (long long)want, (long long)cached[0][t]);
    }
    CHECK(cached[1][N_TURNS - 1] >= 96, "turn 5 reuses most of its history: %lld",
          (long long)cached[1][N_TURNS - 1]);
}

/* n = 1..8 greedy choices: each is the n = 1 answer; the prompt is
 * computed once, the other choices find its whole blocks. */
static void test_choices(void)
{
    static int32_t prompt[40], want[TURN_OUT], got[8 * TURN_OUT];
    int32_t counts[8];
    prompt[0] = 1;
    words(prompt + 1, 39, 5);
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(false, 8, 0);
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    snug_request r;
    greedy(&r, prompt, 40, TURN_OUT, 1);
    CHECK_OK(snug_engine_submit(e, &r, &err), &err);
    drain(e, &r, want, TURN_OUT, counts);
    snug_engine_release(e, &r);
    snug_engine_close(e);
    o = opts(true, 8, 0);
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    for (int n = 1; n <= 8; n++) {
        CHECK_OK(snug_engine_reset_prefix_cache(e, &(int32_t){0}, &err), &err);
        snug_engine_counters before, after;
        snug_engine_counters_get(e, &before);
        greedy(&r, prompt, 40, TURN_OUT, n);
        CHECK_OK(snug_engine_submit(e, &r, &err), &err);
        drain(e, &r, got, TURN_OUT, counts);
        snug_engine_counters_get(e, &after);
        for (int k = 0; k < n; k++) {
            char what[48];
            snprintf(what, sizeof what, "n = %d, choice %d", n, k);
            check_same(what, got + k * TURN_OUT, counts[k], want, TURN_OUT);
        }
        /* 40 tokens: the first choice computes them, the others find 32 */
        int64_t hit = after.prefix_hit_tokens - before.prefix_hit_tokens;
        CHECK(hit == 32 * (n - 1) && snug_engine_cached_tokens(e, &r) == 0,
              "n = %d: %lld tokens found, want %d", n, (long long)hit, 32 * (n - 1));
        snug_engine_release(e, &r);
    }
    snug_engine_close(e);
}

/* 32 requests at once with one 48-token system prompt and their own
 * questions, then again: the same ids with caching on and off; the second
 * round finds every whole block of each prompt (the first round computed
 * the system prompt 32 times in one step: the twins were merged, so that
 * each request's own blocks follow the one cached system prompt). */
static void test_shared_system_prompt(void)
{
    static int32_t prompts[32][80], ids[2][2][32][TURN_OUT];
    for (int i = 0; i < 32; i++) {
        prompts[i][0] = 1;
        words(prompts[i] + 1, 47, 999);
        words(prompts[i] + 48, 20 + i % 10, 1000u + (uint32_t)i);
    }
    snug_error err = {0};
    int64_t hits[2] = {0};
    for (int on = 0; on < 2; on++) {
        snug_engine *e = NULL;
        snug_engine_opts o = opts(on, 32, 0);
        o.plan.max_num_batched_tokens = 2048; /* all 32 in one step: the system prompt's
                                               * blocks are computed 32 times at once */
        CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
        if (!e) return;
        int64_t allocs = snug_mem_alloc_count();
        for (int round = 0; round < 2; round++) {
            static snug_request r[32];
            for (int i = 0; i < 32; i++) {
                greedy(&r[i], prompts[i], 48 + 20 + i % 10, TURN_OUT, 1);
                CHECK_OK(snug_engine_submit(e, &r[i], &err), &err);
            }
            for (int i = 0; i < 32; i++) {
                int32_t n = 0;
                drain(e, &r[i], ids[on][round][i], TURN_OUT, &n);
                CHECK(n == TURN_OUT, "request %d: %d tokens", i, n);
                /* the first round: the system prompt at most (the first requests may be
                 * admitted before the others arrive); the second: twins computed together
                 * were merged, so each request finds all its whole blocks */
                int64_t got = snug_engine_cached_tokens(e, &r[i]);
                int64_t want = on && round == 1 ? (r[i].n_prompt - 1) / BLOCK * BLOCK : 0;
                CHECK(round == 0 ? got == 0 || (on && got == 48) : got == want,
                      "caching %d, round %d, request %d: %lld cached, want %lld", on, round, i,
                      (long long)got, (long long)want);
                snug_engine_release(e, &r[i]);
            }
        }
        snug_engine_counters c;
        snug_engine_counters_get(e, &c);
        hits[on] = c.prefix_hit_tokens;
        CHECK(snug_mem_alloc_count() == allocs && c.kv.used == 0,
              "caching %d: %lld allocations, %d blocks used", on,
              (long long)(snug_mem_alloc_count() - allocs), c.kv.used);
        snug_engine_close(e);
    }
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 32; i++) {
            char what[48];
            snprintf(what, sizeof what, "round %d, request %d", round, i);
            check_same(what, ids[1][round][i], TURN_OUT, ids[0][round][i], TURN_OUT);
        }
    CHECK(hits[0] == 0 && hits[1] >= 32 * 48, "tokens found: %lld without, %lld with",
          (long long)hits[0], (long long)hits[1]);
}

/* 8 sequences of one prompt over a cache of 16 blocks: preempted and
 * recomputed (mostly from the cache), every one gives the ids of caching
 * off. */
static void test_preemption(void)
{
    static int32_t prompt[20], got[2][8][40];
    prompt[0] = 1;
    words(prompt + 1, 19, 31);
    snug_error err = {0};
    int64_t preempted[2] = {0}, hit[2] = {0};
    for (int on = 0; on < 2; on++) {
        snug_engine *e = NULL;
        snug_engine_opts o = opts(on, 8, 16 * 10240);
        CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
        if (!e) return;
        static snug_request r[8];
        for (int i = 0; i < 8; i++) {
            greedy(&r[i], prompt, 20 - i, 40, 1);
            CHECK_OK(snug_engine_submit(e, &r[i], &err), &err);
        }
        int32_t n[8] = {0};
        char text[4096];
        for (bool busy = true; busy;) { /* every consumer keeps up: all grow at once */
            busy = false;
            for (int i = 0; i < 8; i++) {
                snug_output out;
                while (snug_engine_next(e, &r[i], &out, text, sizeof text))
                    if (out.token >= 0 && n[i] < 40) got[on][i][n[i]++] = out.token;
                busy |= !snug_engine_done(e, &r[i]);
            }
            if (busy) snug_engine_wait(e, &r[0], 0.01);
        }
        snug_engine_counters c;
        snug_engine_counters_get(e, &c);
        preempted[on] = c.preemptions;
        hit[on] = c.prefix_hit_tokens;
        for (int i = 0; i < 8; i++) snug_engine_release(e, &r[i]);
        snug_engine_close(e);
    }
    for (int i = 0; i < 8; i++) {
        char what[48];
        snprintf(what, sizeof what, "sequence %d", i);
        check_same(what, got[1][i], 40, got[0][i], 40);
    }
    /* (whether a recompute finds its blocks depends on what was evicted meanwhile: the
     * scheduler's tests check that it does, step by step) */
    CHECK(preempted[0] > 0 && preempted[1] > 0,
          "preemptions: %lld without caching, %lld with (%lld tokens found)",
          (long long)preempted[0], (long long)preempted[1], (long long)hit[1]);
}

/* Different salts never share; the same salt does; the reset empties the
 * cache (only when nothing runs); with caching off it is refused. */
static void test_salt_and_reset(void)
{
    static int32_t prompt[50];
    prompt[0] = 1;
    words(prompt + 1, 49, 8);
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(true, 4, 0);
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    const uint64_t alice = snug_engine_salt("alice", 5), bob = snug_engine_salt("bob", 3);
    const struct { uint64_t salt; int64_t want; } runs[] = {
        {alice, 0}, {bob, 0}, {0, 0}, {alice, 48}, {bob, 48}, {0, 48}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(runs); i++) {
        snug_request r;
        int32_t ids[8], n = 0;
        greedy(&r, prompt, 50, 4, 1);
        r.cache_salt = runs[i].salt;
        CHECK_OK(snug_engine_submit(e, &r, &err), &err);
        drain(e, &r, ids, 8, &n);
        CHECK(snug_engine_cached_tokens(e, &r) == runs[i].want, "run %zu: %lld cached, want %lld",
              i, (long long)snug_engine_cached_tokens(e, &r), (long long)runs[i].want);
        snug_engine_release(e, &r);
    }
    /* busy: a request that runs */
    snug_request r;
    greedy(&r, prompt, 50, 200, 1);
    CHECK_OK(snug_engine_submit(e, &r, &err), &err);
    int32_t dropped = -1;
    CHECK_FAILS(snug_engine_reset_prefix_cache(e, &dropped, &err), &err, SNUG_BUSY,
                "only when nothing runs");
    snug_engine_release(e, &r);
    CHECK_OK(snug_engine_reset_prefix_cache(e, &dropped, &err), &err);
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    CHECK(dropped >= 9 && c.kv.cached == 0 && c.kv.evictable == 0,
          "reset dropped %d blocks; %d cached left", dropped, c.kv.cached);
    greedy(&r, prompt, 50, 4, 1);
    CHECK_OK(snug_engine_submit(e, &r, &err), &err);
    int32_t ids[8], n = 0;
    drain(e, &r, ids, 8, &n);
    CHECK(snug_engine_cached_tokens(e, &r) == 0, "after the reset: %lld cached",
          (long long)snug_engine_cached_tokens(e, &r));
    snug_engine_release(e, &r);
    snug_engine_close(e);
    o = opts(false, 4, 0);
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    CHECK_FAILS(snug_engine_reset_prefix_cache(e, &dropped, &err), &err, SNUG_INVALID,
                "prefix caching is off");
    snug_engine_close(e);
}

/* 400 distinct prompts (a few prefixes, their own tails) through a cache
 * that holds a few of them: evictions happen, and after everything ends
 * every block is free (empty or evictable), none used, nothing allocated. */
static void test_eviction_stress(void)
{
    static int32_t prompts[16][120];
    snug_error err = {0};
    snug_engine *e = NULL;
    snug_engine_opts o = opts(true, 16, 40 * 10240);
    CHECK_OK(snug_engine_open(MODEL, &o, &e, &err), &err);
    if (!e) return;
    int64_t allocs = snug_mem_alloc_count();
    static snug_request r[16];
    for (int wave = 0; wave < 25; wave++) {
        for (int i = 0; i < 16; i++) {
            int32_t *p = prompts[i];
            p[0] = 1;
            words(p + 1, 31, 50u + (uint32_t)(wave + i) % 3); /* one of 3 prefixes */
            int64_t len = 40 + (wave * 7 + i * 13) % 60;
            words(p + 32, (int)len - 32, 7000u + (uint32_t)(wave * 16 + i));
            greedy(&r[i], p, len, 4 + i % 5, 1);
            CHECK_OK(snug_engine_submit(e, &r[i], &err), &err);
        }
        for (int i = 0; i < 16; i++) {
            int32_t ids[16], n = 0;
            drain(e, &r[i], ids, 16, &n);
            snug_engine_release(e, &r[i]);
        }
    }
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    CHECK(c.kv.used == 0 && c.kv.total == 40 &&
              c.kv.evictable == c.kv.cached && c.kv.evictions > 100 &&
              c.prefix_hit_tokens > 400 * 4 && snug_mem_alloc_count() == allocs,
          "after 400 requests over 40 blocks: %d used, %d cached, %d evictable, %lld evictions, "
          "%lld of %lld tokens found, %lld allocations", c.kv.used, c.kv.cached,
          c.kv.evictable, (long long)c.kv.evictions, (long long)c.prefix_hit_tokens,
          (long long)c.prefix_queried_tokens, (long long)(snug_mem_alloc_count() - allocs));
    snug_engine_close(e);
}

int main(void)
{
    RUN(test_chat_turns);
    RUN(test_choices);
    RUN(test_shared_system_prompt);
    RUN(test_preemption);
    RUN(test_salt_and_reset);
    RUN(test_eviction_stress);
    return test_summary();
}
