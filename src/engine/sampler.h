/*
 * sampler.h: picking a sequence's next token from its row of logits, with
 * the parameters an OpenAI-style request carries (temperature, top-k, top-p,
 * min-p, repetition / frequency / presence penalties, logit bias, seed).
 *
 * Nothing here allocates. A request keeps a snug_sampling_params (by value;
 * the logit-bias array it points to is the caller's) and a snug_sampler_state
 * (the random stream); each call also gets scratch memory from the caller,
 * sized by snug_sampler_scratch_bytes(n_vocab). One scratch block serves any
 * number of sequences one after another (one per worker thread), never two
 * calls at once.
 *
 * The order of operations is that of vLLM and Hugging Face: logit bias,
 * repetition penalty, frequency and presence penalties, then either argmax
 * (temperature 0) or: divide by temperature, softmax, top-k, top-p (over the
 * top-k set renormalized), min-p, renormalize, draw.
 */
#ifndef SNUG_SAMPLER_H
#define SNUG_SAMPLER_H

#include "base/common.h"

enum {
    SNUG_LOGPROBS_MAX = 20     /* alternatives per token a request may ask for (OpenAI's limit) */
};

/* One entry of a request's logit_bias: bias is added to the raw logit of
 * token id before anything else (+100 all but forces it, -100 bans it). */
typedef struct snug_logit_bias {
    int32_t id;
    float bias;
} snug_logit_bias;

typedef struct snug_sampling_params {
    float temperature;        /* >= 0; 0 = greedy (argmax) */
    float top_p;              /* in (0, 1]; 1 = off */
    int32_t top_k;            /* >= 0; 0 = off (also off when >= n_vocab) */
    float min_p;              /* in [0, 1]; 0 = off */
    float repetition_penalty; /* > 0; 1 = off (prompt and output tokens) */
    float frequency_penalty;  /* in [-2, 2]; 0 = off (output tokens) */
    float presence_penalty;   /* in [-2, 2]; 0 = off (output tokens) */
    const snug_logit_bias *logit_bias; /* n_logit_bias entries, caller's */
    int32_t n_logit_bias;
    bool has_seed;            /* seed was given by the request */
    uint64_t seed;
} snug_sampling_params;

/* The random stream of one request: SplitMix64 over a counter, so draw n is
 * a pure function of (key, n), whatever else the engine runs. 16 bytes. */
typedef struct snug_sampler_state {
    uint64_t key;
    uint64_t counter; /* draws made so far */
} snug_sampler_state;

/* Fills p with the defaults: temperature 1, top_p 1, top_k 0, min_p 0,
 * repetition_penalty 1, no frequency/presence penalty, no logit bias, no
 * seed (sampling from the full softmax). */
void snug_sampling_params_default(snug_sampling_params *p);

/* Checks every field of p for a vocabulary of n_vocab tokens: NaN or
 * infinity anywhere, temperature < 0, top_p outside (0, 1], top_k < 0, min_p
 * outside [0, 1], repetition_penalty <= 0, frequency/presence penalty
 * outside [-2, 2], n_logit_bias < 0 (or > 0 with a NULL array), a logit_bias
 * id outside [0, n_vocab) or a bias outside [-100, 100]. Fails with
 * SNUG_INVALID and a message that starts with the OpenAI parameter name
 * ("temperature: expected ..., got -1"). */
snug_status snug_sampling_params_validate(const snug_sampling_params *p, int32_t n_vocab,
                                          snug_error *err);

/* Starts a request's random stream from p->seed when p->has_seed, else from
 * fallback_seed (e.g. the clock and a request counter mixed). The same seed
 * gives the same draws, so the same tokens for the same logits. */
void snug_sampler_state_init(snug_sampler_state *s, const snug_sampling_params *p,
                             uint64_t fallback_seed);

/* A uniform double in [0, 1) (53 random bits) from s's stream; advances it. */
double snug_sampler_uniform(snug_sampler_state *s);

/* The bytes of scratch snug_sample needs for a vocabulary of n_vocab tokens
 * (about 20 bytes a token: 3.1 MiB for 152,064). Pure. */
size_t snug_sampler_scratch_bytes(int32_t n_vocab);

/* The id of the largest of logits[0, n) (n >= 1): the lowest id among
 * equals; NaN never wins; when nothing is above -infinity, the first entry
 * that is not NaN (0 when all are). It is snug_sample's greedy choice,
 * without bias or penalties. One vectorized pass. Pure. */
int32_t snug_sampler_argmax(const float *logits, int32_t n);

/* Picks the next token of one sequence and returns its id, in [0, n_vocab).
 *
 * p: validated parameters (snug_sampling_params_validate); s: the request's
 * stream (advanced by one draw unless the call is greedy). logits: the
 * sequence's row, n_vocab entries, modified in place (bias and penalties are
 * applied to it; the rest of the work is in scratch); entries past n_vocab
 * (tensor-parallel padding) are never read. prompt / output: the request's
 * prompt and generated tokens so far (either may be NULL when its count is
 * 0); ids outside [0, n_vocab) in them are skipped. scratch:
 * snug_sampler_scratch_bytes(n_vocab) bytes, 16-byte aligned, whose first
 * 4 * n_vocab bytes must be zero before its first use (snug_mem_alloc gives
 * zeroed memory); every call leaves them zero again.
 *
 * Greedy (temperature 0): the highest logit, the lowest id on ties, in one
 * pass. Sampling: softmax of logits / temperature, then top-k keeps every
 * token whose value reaches the k-th largest (ties at the edge are kept, as
 * in vLLM and HF); top-p keeps the smallest set of most likely tokens (ties
 * ordered by id) whose probability reaches top_p, computed over the top-k
 * set renormalized; min-p keeps tokens with probability >= min_p times the
 * largest; one uniform draw picks among what is left. NaN logits are never
 * picked; when the largest logit is +infinity (or nothing is above
 * -infinity), or 1 / temperature overflows, the call is greedy.
 *
 * Cost, V = n_vocab, H = n_prompt + n_output, B = n_logit_bias:
 * O(B + H) for bias and penalties (a count array in scratch, cleared by
 * walking the history again, never the vocabulary), then
 *   greedy: one pass over V;
 *   no top-k / top-p: two vectorized passes over V (max; exp with partial
 *     sums per 256) and a walk of at most V / 256 + 256 entries;
 *   top-k and/or top-p: 2 to 4 vectorized passes over V (max; count, or for
 *     top-p alone exp and mass, above 8 thresholds at once, repeated on a
 *     narrower range while the chosen threshold keeps over 2048 tokens), one
 *     pass collecting the C tokens above a threshold that provably holds
 *     every survivor (at least k tokens, or at least top_p of the mass),
 *     then expected O(C) quickselects for top-k and for the top-p boundary
 *     (no sort) and O(C) for min-p and the draw. C is about k for top-k and
 *     the nucleus size (plus at most about half) for top-p.
 * Measured on this 2-core EPYC, V = 152,064: greedy ~40 us, temperature
 * only ~170 us, top-k 50 / top-p 0.9 ~140-200 us, top-p 0.9 alone ~370 us
 * on a peaked row and ~1.2 ms on a flat one (17k tokens in the nucleus).
 * Thread-safe for distinct (s, logits, scratch). Cannot fail. */
int32_t snug_sample(const snug_sampling_params *p, snug_sampler_state *s, float *logits,
                    int32_t n_vocab, const int32_t *prompt, int32_t n_prompt,
                    const int32_t *output, int32_t n_output, void *scratch);

/* A token a draft model proposed for speculative sampling, and the
 * distribution it was drawn from: q = softmax(logits / temperature) over
 * the draft's row (snug_sample with only that temperature set draws from
 * exactly this q). */
typedef struct snug_draft {
    int32_t token;         /* drawn from q */
    const float *logits;   /* the draft's row (not modified), ... */
    int32_t n_logits;      /* ... of this many entries (1 to n_vocab): q is 0 past them */
    float temperature;     /* > 0 */
} snug_draft;

/* snug_sample for a row that verifies a drafted token (speculative
 * sampling, Leviathan et al. 2023; Chen et al. 2023): with p the
 * distribution snug_sample would draw from (bias, penalties, temperature,
 * top-k, top-p, min-p all applied), it returns d->token with probability
 * min(1, p(token) / q(token)), else a draw from max(0, p - q)
 * renormalized, so that what it returns is distributed as p exactly,
 * whatever q is (p(y) for every y: q(y) min(1, p(y)/q(y)) plus the chance
 * of a rejection times the residual's share). A token it returns other
 * than d->token means the draft was rejected; it never returns a token p
 * gives no weight. Greedy calls (temperature 0, and the cases snug_sample
 * treats as greedy) return the argmax as snug_sample does. Draws one
 * uniform from s, two on a rejection. Extra cost: one pass over the
 * draft's row (its normalizer) and, on a rejection, two passes over p's
 * tokens (the whole row without top-k / top-p). d NULL: snug_sample.
 * Arguments otherwise as snug_sample's. Cannot fail. */
int32_t snug_sample_draft(const snug_sampling_params *p, snug_sampler_state *s, float *logits,
                          int32_t n_vocab, const int32_t *prompt, int32_t n_prompt,
                          const int32_t *output, int32_t n_output, void *scratch,
                          const snug_draft *d);

#endif /* SNUG_SAMPLER_H */
