/*
 * test_spec.c: speculative decoding's drafts (engine/spec.h): prompt
 * lookup's matches (the longest n-gram first, the most recent occurrence,
 * what follows it up to the end), the adaptive count of drafts (from one
 * for a new sequence up to the most after drafts are kept, none after they
 * fail, one again after aging), and the options' checks.
 */
#include "test.h"

#include "engine/spec.h"

#include <math.h>
#include <string.h>

static void test_lookup(void)
{
    int32_t out[8];
    /* 5 6 7 ... 5 6 7: the trigram 5 6 7 at 0, then 8 9 follow it */
    const int32_t a[] = {5, 6, 7, 8, 9, 1, 2, 5, 6, 7};
    int32_t n = snug_spec_lookup(a, 10, 2, 4, 8, out);
    CHECK(n == 7 && out[0] == 8 && out[1] == 9 && out[2] == 1 && out[6] == 7, "after 5 6 7: %d drafts, %d %d", n,
          out[0], out[1]);
    CHECK(snug_spec_lookup(a, 10, 2, 4, 2, out) == 2 && out[0] == 8 && out[1] == 9, "capped at 2");
    /* the most recent occurrence wins: 1 2 is at 0 (then 3) and at 3 (then 4) */
    const int32_t b[] = {1, 2, 3, 1, 2, 4, 0, 1, 2};
    n = snug_spec_lookup(b, 9, 2, 4, 3, out);
    CHECK(n == 3 && out[0] == 4 && out[1] == 0 && out[2] == 1, "most recent: %d drafts, first %d", n, out[0]);
    /* the longest n-gram first: 9 1 2 at 0 (then 7) beats the later 1 2 (then 4) */
    const int32_t c[] = {9, 1, 2, 7, 1, 2, 4, 9, 1, 2};
    n = snug_spec_lookup(c, 10, 2, 4, 1, out);
    CHECK(n == 1 && out[0] == 7, "longest first: %d drafts, first %d", n, out[0]);
    n = snug_spec_lookup(c, 10, 2, 2, 1, out);
    CHECK(n == 1 && out[0] == 4, "bigrams only: %d drafts, first %d", n, out[0]);
    /* no match, too short, and a match whose continuation runs to the end */
    const int32_t d[] = {1, 2, 3, 4, 5};
    CHECK(snug_spec_lookup(d, 5, 2, 4, 4, out) == 0, "no match");
    CHECK(snug_spec_lookup(d, 1, 1, 4, 4, out) == 0 && snug_spec_lookup(d, 5, 1, 4, 0, out) == 0, "nothing");
    const int32_t e[] = {3, 3, 3};
    n = snug_spec_lookup(e, 3, 1, 4, 4, out);
    CHECK(n == 1 && out[0] == 3, "3 3 3: the bigram at 0, then the last 3: %d", n);
}

#define WANT(s, max) snug_spec_want(s, max, SNUG_SPEC_MIN_KEEP)

static void test_adaptive(void)
{
    snug_spec_state s = {0};
    CHECK(WANT(&s, 8) == 1, "a new sequence drafts one: %d", WANT(&s, 8));
    for (int i = 0; i < 10; i++) snug_spec_record(&s, WANT(&s, 8), WANT(&s, 8));
    CHECK(WANT(&s, 8) == 8 && WANT(&s, 3) == 3, "kept: %d", WANT(&s, 8));
    for (int i = 0; i < 25; i++) snug_spec_record(&s, SNUG_MAX(1, WANT(&s, 8)), 0);
    CHECK(WANT(&s, 8) == 0, "failed: %d", WANT(&s, 8));
    int steps = 0;
    while (WANT(&s, 8) == 0 && steps < 100) snug_spec_record(&s, 0, 0), steps++;
    CHECK(steps >= 3 && steps <= 20 && WANT(&s, 8) == 1, "aged back to one draft in %d steps", steps);
    /* 5 kept of 6 tried: between, and more where drafts cost less */
    snug_spec_state h = {0};
    for (int i = 0; i < 30; i++) snug_spec_record(&h, 4, i % 2 ? 4 : 1);
    int32_t k = WANT(&h, 8), cheap = snug_spec_want(&h, 16, 0.05), dear = snug_spec_want(&h, 16, 0.9);
    CHECK(k >= 2 && k <= 7 && cheap > k && dear == 0, "mostly kept: %d drafts, %d when cheap, %d when dear", k,
          cheap, dear);
}

/* The steps' cost fitted to their tokens: 30 ms and 2 ms a token, steps
 * of 1 to 5 tokens; at batch 1 a draft kept one time in 16 pays, at batch
 * 32 one kept 2 times in 3 does not quite; a draft model's seconds add to
 * a draft's cost; steps all of one size cannot tell a from b, nor steps
 * that take less time with more tokens. */
static void test_cost(void)
{
    snug_spec_cost c = {0};
    CHECK(snug_spec_min_keep(&c, 1, 1) == SNUG_SPEC_MIN_KEEP, "nothing known");
    for (int i = 0; i < 40; i++) snug_spec_cost_step(&c, 32, 0.094); /* one size: no fit */
    CHECK(!c.fitted && snug_spec_min_keep(&c, 32, 32) == SNUG_SPEC_MIN_KEEP, "one size");
    for (int i = 0; i < 200; i++) snug_spec_cost_step(&c, 1 + i % 5, 0.030 + 0.002 * (1 + i % 5));
    CHECK(c.fitted && fabs(c.a - 0.030) < 1e-9 && fabs(c.b - 0.002) < 1e-9, "a %g, b %g", c.a, c.b);
    double one = snug_spec_min_keep(&c, 1, 1), batch = snug_spec_min_keep(&c, 32, 32);
    CHECK(fabs(one - 0.002 / 0.032) < 1e-9 && fabs(batch - 0.064 / 0.094) < 1e-9, "batch 1: %g, batch 32: %g", one,
          batch);
    snug_spec_cost_drafts(&c, 4, 0.008); /* 2 ms a draft more */
    CHECK(fabs(snug_spec_min_keep(&c, 1, 1) - 0.004 / 0.032) < 1e-9, "with a draft model: %g",
          snug_spec_min_keep(&c, 1, 1));
    snug_spec_cost noise = {0}; /* more tokens, less time: no fit */
    for (int i = 0; i < 50; i++) snug_spec_cost_step(&noise, 1 + i % 5, 0.05 - 0.001 * (i % 5));
    CHECK(!noise.fitted && snug_spec_min_keep(&noise, 1, 1) == SNUG_SPEC_MIN_KEEP, "noise is no fit");
}

static void test_opts(void)
{
    snug_error err = {0};
    snug_spec_opts o = {.prompt_lookup = true};
    CHECK_OK(snug_spec_opts_check(&o, &err), &err);
    snug_spec_opts r = snug_spec_opts_resolved(&o);
    CHECK(r.n_tokens == SNUG_SPEC_TOKENS_DEFAULT && r.lookup_min == 2 && r.lookup_max == 4, "defaults");
    CHECK(snug_spec_tokens(&o) == SNUG_SPEC_TOKENS_DEFAULT && snug_spec_tokens(&(snug_spec_opts){0}) == 0,
          "tokens");
    o.lookup_min = 6; /* max follows it */
    CHECK_OK(snug_spec_opts_check(&o, &err), &err);
    o.lookup_max = 3;
    CHECK_FAILS(snug_spec_opts_check(&o, &err), &err, SNUG_INVALID, "prompt_lookup_min");
    o = (snug_spec_opts){.prompt_lookup = true, .n_tokens = SNUG_SPEC_TOKENS_MAX + 1};
    CHECK_FAILS(snug_spec_opts_check(&o, &err), &err, SNUG_INVALID, "num_speculative_tokens");
    o = (snug_spec_opts){.lookup_max = SNUG_SPEC_LOOKUP_MAX + 1};
    CHECK_FAILS(snug_spec_opts_check(&o, &err), &err, SNUG_INVALID, "prompt_lookup_max");
}

int main(void)
{
    RUN(test_lookup);
    RUN(test_adaptive);
    RUN(test_cost);
    RUN(test_opts);
    return test_summary();
}
