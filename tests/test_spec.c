/*
 * test_spec.c: speculative decoding's drafts (engine/spec.h): prompt
 * lookup's matches (the longest n-gram first, the most recent occurrence,
 * what follows it up to the end), the adaptive count of drafts (from one
 * for a new sequence up to the most after drafts are kept, none after they
 * fail, one again after aging), and the options' checks.
 */
#include "test.h"

#include "engine/spec.h"

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

static void test_adaptive(void)
{
    snug_spec_state s = {0};
    CHECK(snug_spec_want(&s, 8) == 1, "a new sequence drafts one: %d", snug_spec_want(&s, 8));
    for (int i = 0; i < 10; i++) snug_spec_record(&s, snug_spec_want(&s, 8), snug_spec_want(&s, 8));
    CHECK(snug_spec_want(&s, 8) == 8 && snug_spec_want(&s, 3) == 3, "kept: %d", snug_spec_want(&s, 8));
    for (int i = 0; i < 25; i++) snug_spec_record(&s, SNUG_MAX(1, snug_spec_want(&s, 8)), 0);
    CHECK(snug_spec_want(&s, 8) == 0, "failed: %d", snug_spec_want(&s, 8));
    int steps = 0;
    while (snug_spec_want(&s, 8) == 0 && steps < 100) snug_spec_record(&s, 0, 0), steps++;
    CHECK(steps >= 3 && steps <= 20 && snug_spec_want(&s, 8) == 1, "aged back to one draft in %d steps", steps);
    /* half kept: between */
    snug_spec_state h = {0};
    for (int i = 0; i < 30; i++) snug_spec_record(&h, 4, i % 2 ? 4 : 1); /* 5 kept of 6 tried */
    int32_t k = snug_spec_want(&h, 8);
    CHECK(k >= 2 && k <= 7, "mostly kept: %d", k);
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
    RUN(test_opts);
    return test_summary();
}
