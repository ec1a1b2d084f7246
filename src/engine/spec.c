/*
 * spec.c: speculative decoding's drafts (spec.h).
 */
#include "spec.h"

#include <math.h>
#include <string.h>

#define SPEC_DECAY 0.8f /* the weight of the record before each step */

snug_spec_opts snug_spec_opts_resolved(const snug_spec_opts *o)
{
    snug_spec_opts r = *o;
    if (r.n_tokens == 0) r.n_tokens = SNUG_SPEC_TOKENS_DEFAULT;
    if (r.lookup_max == 0) r.lookup_max = SNUG_MAX(SNUG_SPEC_LOOKUP_MAX_DEFAULT, r.lookup_min);
    if (r.lookup_min == 0) r.lookup_min = SNUG_MIN(SNUG_SPEC_LOOKUP_MIN_DEFAULT, r.lookup_max);
    return r;
}

snug_status snug_spec_opts_check(const snug_spec_opts *o, snug_error *err)
{
    snug_spec_opts r = snug_spec_opts_resolved(o);
    if (r.prompt_lookup && r.draft_model)
        return snug_errorf(err, SNUG_INVALID, "--prompt-lookup and --draft-model: give one drafter");
    if (r.n_tokens < 0 || r.n_tokens > SNUG_SPEC_TOKENS_MAX)
        return snug_errorf(err, SNUG_INVALID, "num_speculative_tokens: expected 1 to %d, got %d",
                           SNUG_SPEC_TOKENS_MAX, r.n_tokens);
    if (r.n_min < 0 || r.n_min > r.n_tokens)
        return snug_errorf(err, SNUG_INVALID, "draft_min: expected 0 to num_speculative_tokens (%d), got %d",
                           r.n_tokens, r.n_min);
    if (r.lookup_min < 1 || r.lookup_max > SNUG_SPEC_LOOKUP_MAX || r.lookup_min > r.lookup_max)
        return snug_errorf(err, SNUG_INVALID, "prompt_lookup_min and prompt_lookup_max: expected "
                           "1 <= min <= max <= %d, got %d and %d", SNUG_SPEC_LOOKUP_MAX, r.lookup_min,
                           r.lookup_max);
    return SNUG_OK;
}

int32_t snug_spec_tokens(const snug_spec_opts *o)
{
    return o->prompt_lookup || o->draft_model ? snug_spec_opts_resolved(o).n_tokens : 0;
}

int32_t snug_spec_lookup(const int32_t *ids, int64_t n, int32_t lookup_min, int32_t lookup_max,
                         int32_t max_draft, int32_t *out)
{
    if (max_draft <= 0) return 0;
    for (int64_t g = SNUG_MIN((int64_t)lookup_max, n - 1); g >= lookup_min && g >= 1; g--) {
        const int32_t *tail = ids + n - g;
        for (int64_t i = n - g - 1; i >= 0; i--) { /* the most recent first */
            if (ids[i + g - 1] != tail[g - 1] || memcmp(ids + i, tail, (size_t)g * sizeof *ids) != 0)
                continue;
            int64_t from = i + g, k = SNUG_MIN((int64_t)max_draft, n - from);
            memcpy(out, ids + from, (size_t)k * sizeof *ids);
            return (int32_t)k;
        }
    }
    return 0;
}

int32_t snug_spec_want(const snug_spec_state *s, int32_t max_draft, double min_keep)
{
    double rate = ((double)s->kept + 0.5) / ((double)s->tried + 1.0);
    if (rate < min_keep) return 0;
    if (rate >= 1.0) return max_draft;
    double k = floor(log(min_keep) / log(rate));
    return (int32_t)SNUG_MAX(1.0, SNUG_MIN(k, (double)max_draft));
}

#define COST_DECAY 0.97      /* the weight of the steps before each step: some 30 steps remembered */
#define COST_MIN_VARIANCE 1.0 /* tokens^2: the steps' sizes must differ this much to fit b */

void snug_spec_cost_step(snug_spec_cost *c, int32_t n_tokens, double seconds)
{
    double n = (double)n_tokens;
    c->w = c->w * COST_DECAY + 1;
    c->n = c->n * COST_DECAY + n;
    c->t = c->t * COST_DECAY + seconds;
    c->nn = c->nn * COST_DECAY + n * n;
    c->nt = c->nt * COST_DECAY + n * seconds;
    double mn = c->n / c->w, mt = c->t / c->w, var = c->nn / c->w - mn * mn;
    if (var < COST_MIN_VARIANCE) return;
    double b = (c->nt / c->w - mn * mt) / var;
    if (!(b > 0)) return; /* noise: the last fit stands */
    c->b = b;
    c->a = SNUG_MAX(0.0, mt - b * mn);
    c->fitted = true;
}

void snug_spec_cost_drafts(snug_spec_cost *c, int32_t n_drafted, double seconds)
{
    c->draft_w = c->draft_w * COST_DECAY + 1;
    c->draft_n = c->draft_n * COST_DECAY + (double)n_drafted;
    c->draft_t = c->draft_t * COST_DECAY + seconds;
}

double snug_spec_min_keep(const snug_spec_cost *c, int32_t n_tokens, int32_t n_outputs)
{
    if (!c->fitted || n_outputs < 1) return SNUG_SPEC_MIN_KEEP;
    double cost = c->b + (c->draft_n > 0 ? c->draft_t / c->draft_n : 0.0);
    double worth = (c->a + c->b * (double)n_tokens) / (double)n_outputs;
    return worth > 0 ? SNUG_MAX(0.05, SNUG_MIN(0.95, cost / worth)) : 0.95;
}

void snug_spec_record(snug_spec_state *s, int32_t n_drafted, int32_t n_kept)
{
    s->kept = s->kept * SPEC_DECAY + (float)n_kept;
    s->tried = s->tried * SPEC_DECAY + (float)(n_kept + (n_kept < n_drafted));
}
