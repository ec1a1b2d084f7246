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

int32_t snug_spec_want(const snug_spec_state *s, int32_t max_draft)
{
    double rate = ((double)s->kept + 0.5) / ((double)s->tried + 1.0);
    if (rate < SNUG_SPEC_MIN_KEEP) return 0;
    if (rate >= 1.0) return max_draft;
    int32_t k = (int32_t)floor(log(SNUG_SPEC_MIN_KEEP) / log(rate));
    return SNUG_MAX(1, SNUG_MIN(k, max_draft));
}

void snug_spec_record(snug_spec_state *s, int32_t n_drafted, int32_t n_kept)
{
    s->kept = s->kept * SPEC_DECAY + (float)n_kept;
    s->tried = s->tried * SPEC_DECAY + (float)(n_kept + (n_kept < n_drafted));
}
