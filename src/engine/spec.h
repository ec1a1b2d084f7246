/*
 * spec.h: speculative decoding's drafts and how many to draft. A step
 * verifies a sequence's drafted tokens together with its last one: row j
 * of its logits is sampled as plain decoding would sample it, and the
 * drafts are kept while each equals the token sampled before it, so the
 * output is the model's distribution exactly (the drafter here is
 * deterministic: for a draft with all its probability on one token,
 * keeping it when the sample equals it is the rejection rule, and the
 * sample drawn when it does not is the residual's draw). Greedy requests
 * give the ids plain decoding gives, seeded ones the same tokens (one
 * draw a token, in the same order).
 *
 * A draft model drafts its most likely token, one step of it a token,
 * from keys and values it keeps beside the model's (the same blocks); its
 * drafts too are deterministic, so the same rule is exact.
 *
 * Prompt lookup drafts with no model: the longest n-gram ending the
 * sequence (lookup_max down to lookup_min tokens) found earlier in its own
 * tokens (prompt and output), most recent match first, proposes the
 * tokens that followed it. How many a step drafts adapts per sequence:
 * the j-th draft is kept with probability about rate^j, and drafting goes
 * on while that pays: while the chance is at least what a draft costs
 * against what an output is worth. The steps' seconds are fitted to their
 * tokens as they run (a + b tokens); a draft costs b (and a draft model's
 * seconds a draft), an output is worth a step's time over its outputs. At
 * batch 1, where reading the weights bounds a step, drafts are nearly free
 * and a low chance pays; at a large batch, where a step is bound by
 * compute, only drafts that are nearly sure do. Until the fit has steps of
 * enough sizes to go by, SNUG_SPEC_MIN_KEEP.
 *
 * Pure functions over the caller's memory; nothing allocates.
 */
#ifndef SNUG_SPEC_H
#define SNUG_SPEC_H

#include "base/common.h"

enum {
    SNUG_SPEC_TOKENS_DEFAULT = 4,   /* drafted tokens a step verifies per sequence at most */
    SNUG_SPEC_TOKENS_MAX = 16,
    SNUG_SPEC_LOOKUP_MIN_DEFAULT = 2,
    SNUG_SPEC_LOOKUP_MAX_DEFAULT = 4,
    SNUG_SPEC_LOOKUP_MAX = 16,
    SNUG_SPEC_SEQS_ROWS = 16,       /* sequences the plan gives drafts' rows of logits (at large
                                     * batches a step is bound by compute, not by reading the
                                     * weights, and drafts gain little) */
    SNUG_SPEC_SAMPLED_SEQS = 8      /* sequences a step may draft for by sampling a draft model's
                                     * rows (their rows kept until verified: serving.h); the
                                     * others draft its most likely tokens */
};

#define SNUG_SPEC_MIN_KEEP 0.3      /* the least chance of keeping the last draft of a step, until
                                     * the steps' cost is known */

/* How a server drafts: prompt lookup or a draft model, not both. */
typedef struct snug_spec_opts {
    bool prompt_lookup;             /* n-gram drafts from each sequence's own tokens */
    const char *draft_model;        /* a small model of the same vocabulary whose tokens are the
                                     * drafts (planner.h draft_dir; sampled from its rows for a
                                     * request that samples without a seed, else its most likely
                                     * ones), or NULL */
    int32_t n_tokens;               /* drafted tokens per step at most; 0: SNUG_SPEC_TOKENS_DEFAULT */
    int32_t n_min;                  /* ... and at least, whatever drafts cost and however they fare
                                     * (llama.cpp's --draft-min; 0: as they pay) */
    int32_t lookup_min, lookup_max; /* the n-grams' sizes; 0: the defaults */
} snug_spec_opts;

/* A sequence's record of its drafts kept: decayed counts of drafts kept
 * and of drafts tried (a rejected one counts as tried, the ones after it
 * were never looked at). Zeroed: no record (a rate of 1/2). */
typedef struct snug_spec_state {
    float kept, tried;
} snug_spec_state;

/* The steps' seconds against their tokens, from decayed sums (older steps
 * weigh less), and a draft model's seconds a draft. Zeroed: nothing known. */
typedef struct snug_spec_cost {
    double w, n, t, nn, nt;         /* the steps' weight and sums of tokens, seconds, ... */
    double a, b;                    /* the fit: seconds = a + b tokens (while fitted) */
    bool fitted;
    double draft_w, draft_n, draft_t; /* a draft model's drafts and their seconds */
} snug_spec_cost;

/* Records a step of n_tokens that took seconds (the model's pass alone),
 * and fits again where the steps' sizes differ enough to tell a from b
 * (the last fit is kept otherwise). */
void snug_spec_cost_step(snug_spec_cost *c, int32_t n_tokens, double seconds);

/* Records a draft model's steps: n_drafted drafts in seconds. */
void snug_spec_cost_drafts(snug_spec_cost *c, int32_t n_drafted, double seconds);

/* The least chance of being kept that pays for a draft in a step of
 * n_tokens tokens giving n_outputs outputs without drafts: a draft's cost
 * (b and a draft model's seconds a draft) over an output's worth (the
 * step's seconds over its outputs), within [0.05, 0.95];
 * SNUG_SPEC_MIN_KEEP until fitted. Pure. */
double snug_spec_min_keep(const snug_spec_cost *c, int32_t n_tokens, int32_t n_outputs);

/* Checks o (after its defaults): one drafter at most, n_tokens 0 to
 * SNUG_SPEC_TOKENS_MAX, n_min 0 to n_tokens, lookup sizes 1 to
 * SNUG_SPEC_LOOKUP_MAX with min <= max. Fails with SNUG_INVALID naming the
 * field. */
snug_status snug_spec_opts_check(const snug_spec_opts *o, snug_error *err);

/* o with its zero fields given their defaults. Pure. */
snug_spec_opts snug_spec_opts_resolved(const snug_spec_opts *o);

/* The drafted tokens a step verifies per sequence under o: 0 when nothing
 * drafts. Pure. */
int32_t snug_spec_tokens(const snug_spec_opts *o);

/* Prompt lookup over ids[0 .. n): for g from lookup_max down to lookup_min
 * (and below n), the most recent earlier occurrence of the last g tokens;
 * the first g found gives up to max_draft of the tokens that followed it
 * into out. Returns how many (0: no match). Pure. */
int32_t snug_spec_lookup(const int32_t *ids, int64_t n, int32_t lookup_min, int32_t lookup_max,
                         int32_t max_draft, int32_t *out);

/* The drafts a step should offer for s, at most max_draft: the largest k
 * whose last draft is kept with a chance of at least min_keep (in (0, 1))
 * at s's rate (kept + 1/2) / (tried + 1); 0 below it. Pure. */
int32_t snug_spec_want(const snug_spec_state *s, int32_t max_draft, double min_keep);

/* Records a step that verified n_drafted drafts of which the first n_kept
 * were kept; older steps weigh less. A step that drafted nothing (0, 0)
 * only ages the record, so a sequence whose drafts failed tries again, one
 * draft, some ten steps later. */
void snug_spec_record(snug_spec_state *s, int32_t n_drafted, int32_t n_kept);

#endif /* SNUG_SPEC_H */
