/*
 * engine.h: the serving engine. One model, planned (planner.h), and a step
 * loop on its own thread that runs every request submitted to it in
 * continuous batches (scheduler.h); request threads hand requests in through
 * a bounded queue and take their outputs from bounded rings.
 *
 * Memory: the engine's own block (the queue) is made before the plan, the
 * rest is in the serving state; after snug_engine_open nothing is allocated
 * by the step loop, a submit, a poll or a cancel.
 *
 * A request is the caller's memory, from snug_engine_submit until
 * snug_engine_release returns. Its n choices run as n sequences; each
 * produces outputs (a token and the text it releases, stop strings held
 * back) and ends with one whose finish is set. When a consumer falls
 * SNUG_OUT_RING outputs behind, its sequence pauses (keeping its blocks)
 * until it catches up. The notify callback is called on the engine thread
 * whenever outputs are ready or the request ended; it must not block or
 * call back into the engine.
 */
#ifndef SNUG_ENGINE_H
#define SNUG_ENGINE_H

#include "base/common.h"
#include "blocks.h"
#include "formats/pooling.h"
#include "planner.h"
#include "sampler.h"
#include "spec.h"
#include "stop.h"
#include "think.h"

#include <pthread.h>

typedef struct snug_grammar snug_grammar; /* grammar/grammar.h */

enum {
    SNUG_MAX_QUEUE_DEFAULT = 1024,  /* requests waiting for a slot */
    SNUG_CHOICES_MAX = 16           /* n per request */
};

typedef struct snug_engine_opts {
    snug_planner_opts plan;
    int32_t max_queue;              /* 0: SNUG_MAX_QUEUE_DEFAULT */
    snug_spec_opts spec;            /* speculative decoding (spec.h); zeroed: none. The plan
                                     * gives the drafts' rows of logits (plan.spec_tokens is
                                     * set from it) */
} snug_engine_opts;

/* A prompt token's log-probability given the tokens before it, and the
 * alternatives there, most likely first. */
typedef struct snug_prompt_logprob {
    float logprob;
    int32_t n_top;
    int32_t top_ids[SNUG_LOGPROBS_MAX];
    float top_logprobs[SNUG_LOGPROBS_MAX];
} snug_prompt_logprob;

enum { SNUG_SCORE_IDS_MAX = 8 };

typedef struct snug_request {
    /* in: set by the caller before submitting */
    const int32_t *prompt;          /* [n_prompt] ids, the caller's until released */
    int64_t n_prompt;
    snug_sampling_params sampling;
    snug_stop_params stop;          /* the model's EOS ids are added by submit */
    int32_t n;                      /* choices, 1 .. SNUG_CHOICES_MAX */
    bool logprobs;                  /* each token's log-probability, and ... */
    int32_t top_logprobs;           /* ... that many alternatives (0 .. SNUG_LOGPROBS_MAX) */
    snug_prompt_logprob *prompt_logprobs; /* NULL, or [n_prompt] the caller's: filled for
                                     * tokens 1 .. n_prompt - 1 (with top_logprobs
                                     * alternatives) before the first output arrives */
    uint64_t cache_salt;            /* requests share cached blocks only under the same
                                     * salt (snug_engine_salt of the client's string); 0: none */
    const snug_grammar *grammar;    /* NULL, or the grammar every choice's output keeps to
                                     * (constrain.h), the caller's until released */
    bool keep_special;              /* special tokens' text is in the outputs' text (tool-call
                                     * markers); by default it is left out */
    snug_think_params think;        /* a reasoning budget: the think block closed by forced
                                     * tokens when spent (think.h); zeroed: none */
    bool output_starts_text;        /* nothing before the output has text (an empty prompt's, a
                                     * chat's): its text begins as decoding the whole sequence
                                     * begins, without SentencePiece's leading space (false: it
                                     * continues the prompt's text, the space kept) */
    snug_pooling pooling;           /* not NONE: an embedding of the prompt, nothing generated:
                                     * with n 1, no grammar and no prompt log-probabilities, its
                                     * one output ends it (finish SNUG_FINISH_POOLED, no token)
                                     * once embedding holds it. MEAN and FIRST need every prompt
                                     * token computed: give them a cache_salt of their own */
    bool normalize;                 /* the embedding scaled to length 1 (L2) */
    bool no_speculation;            /* its choices decode without drafts (the engine's spec) */
    int32_t spec_max;               /* drafted tokens a step may verify for a choice, at most
                                     * the engine's (llama.cpp's speculative.n_max); 0: the
                                     * engine's */
    float *embedding;               /* with pooling: [snug_engine_hidden_size] the caller's */
    const int32_t *score_ids;       /* not NULL: a score of the prompt, nothing generated: the
                                     * raw logits of these n_score_ids ids (at most
                                     * SNUG_SCORE_IDS_MAX) after its last token into scores (the
                                     * caller's), then one output ends it (finish POOLED); with
                                     * n 1, no grammar, no pooling (a reranker's yes and no) */
    int32_t n_score_ids;
    float *scores;
    bool classify;                  /* with pooling LAST, not normalized: a classifier's scores
                                     * (config n_labels of them) of its pooled vector into scores */
    void (*notify)(void *ctx);
    void *notify_ctx;
    /* the engine's (read them only through the functions below) */
    int64_t cached_tokens;          /* prompt tokens found in the prefix cache; -1 until known */
    int32_t slots[SNUG_CHOICES_MAX];
    int32_t n_live;                 /* choices not yet ended and drained */
    int32_t state;
    bool cancelled;
    uint64_t id;
    double t_submit;                /* seconds (snug_now_seconds) */
    uint64_t grammar_hash;          /* the grammar's keyed hashes: the key it asks for in the */
    uint64_t grammar_digest;        /* mask cache, and its digest (grammar_keys.h) */
} snug_request;

/* One output taken by snug_engine_next. */
typedef struct snug_output {
    int32_t choice;
    int32_t token;                  /* -1: an end without a token */
    snug_finish finish;             /* SNUG_FINISH_NONE while the choice goes on */
    size_t n_text;                  /* bytes copied to the caller's buffer */
    float logprob;                  /* the token's log-probability under the model's
                                     * distribution (the raw logits: before penalties,
                                     * bias and temperature), when asked for */
    int32_t n_top;                  /* alternatives, most likely first */
    int32_t top_ids[SNUG_LOGPROBS_MAX];
    float top_logprobs[SNUG_LOGPROBS_MAX];
    int32_t stop_index;             /* finish SNUG_FINISH_STOP_STRING: which of the request's
                                     * stop strings ended it (its place in stop.stop); else -1 */
} snug_output;

/* Latency buckets' upper bounds in seconds (Prometheus histograms); the
 * last bucket is everything above. */
enum { SNUG_LATENCY_BUCKETS = 16 };
extern const double snug_latency_bounds[SNUG_LATENCY_BUCKETS];

typedef struct snug_latency_histogram {
    int64_t count[SNUG_LATENCY_BUCKETS + 1]; /* per bucket, not cumulative */
    double sum;
    int64_t n;
} snug_latency_histogram;

typedef struct snug_engine_counters {
    int32_t running, waiting, queued;  /* sequences, sequences, requests */
    int64_t preemptions;
    int64_t prompt_tokens, generation_tokens;
    int64_t requests_finished;
    snug_block_counts kv;           /* the KV cache's blocks, as the block pool counts them (its
                                     * ready blocks are the resident ones: all of them unless
                                     * the cache is populated after ready) */
    snug_block_counts kv_window;    /* the window group's (total 0: none) */
    int64_t steps;
    int64_t prefix_queried_tokens;  /* tokens looked up at admissions, and ... */
    int64_t prefix_hit_tokens;      /* ... of those, found in the cache */
    int64_t spec_drafts;            /* decodes that verified drafted tokens, ... */
    int64_t spec_drafted_tokens;    /* ... the tokens drafted for them, and ... */
    int64_t spec_accepted_tokens;   /* ... of those, the ones sampling kept */
    double spec_draft_seconds;      /* a draft model's steps (drafting, and keeping its cache
                                     * level with the model's) */
    int64_t grammar_masks;          /* token masks applied to constrained sequences, and ... */
    int64_t grammar_walks;          /* walks of the vocabulary: masks (not found in the cache) and
                                     * contexts (grammar/ctxmask.h) */
    int64_t grammar_composed;       /* masks made from their contexts' */
    double grammar_walk_seconds;    /* the time those took */
    int32_t grammar_waiting;        /* sequences held out of steps until their mask is walked */
    bool failed;                    /* the step loop stopped on an error */
    int32_t tp;                     /* tensor-parallel ranks (1: one process) */
    int64_t allreduce_calls;        /* rank 0's all-reduces in steps so far, and ... */
    double allreduce_seconds;       /* ... the seconds it waited in them */
    snug_latency_histogram ttft;    /* submit to a choice's first token */
    snug_latency_histogram itl;     /* between a choice's tokens (the tokens a step gives a choice,
                                     * its last and drafts kept, share the time since its last) */
} snug_engine_counters;

typedef struct snug_engine snug_engine;

/* Plans the model in dir (planner.h) and starts the step loop; opts is
 * read during the call only. Fails as snug_planner_open does; then nothing
 * is held. */
snug_status snug_engine_open(const char *dir, const snug_engine_opts *opts, snug_engine **out,
                             snug_error *err);

/* Runs a follower rank of a tensor-parallel engine (opts->plan.comm over
 * several ranks, this one not rank 0): plans on this thread together with
 * the other ranks (rank 0 in snug_engine_open), then runs the steps rank 0
 * sends until its engine closes (SNUG_OK). *planned says whether the plan
 * was made. Fails as snug_planner_open does (the same failure as rank 0's;
 * *planned false, nothing held), or with a step's failure (*planned true):
 * then the ranks cannot finish together and nothing is freed (MPI may
 * still use the buffers): the caller ends the run (snug_comm_abort). */
snug_status snug_engine_follow(const char *dir, const snug_engine_opts *opts, bool *planned,
                               snug_error *err);

/* True once the step loop stopped on an error (a failed step: with tensor
 * parallelism, a rank that died or hangs); the error's message. Every
 * request then ends (finish ABORT) and submits fail. */
bool snug_engine_failed(snug_engine *e);
const char *snug_engine_error(snug_engine *e);

/* With tensor parallelism, from any thread, when the launcher signals that
 * it is ending the run (a rank died, or it was told to stop): checks that
 * every rank still answers. The step in flight and those that follow for a
 * while must complete their communication within grace_s seconds, and
 * the step loop checks the ranks between steps (snug_stepper_ping), so
 * that an idle engine learns too; a rank that does not answer fails the
 * engine as a failed step does (snug_comm_hurry). Nothing with one rank or
 * an engine that failed or stops. */
void snug_engine_check_ranks(snug_engine *e, double grace_s);

/* What the plan found; valid until close. */
const snug_plan_report *snug_engine_plan(const snug_engine *e);

/* The tokenizer (NULL when the model has none) and model length. */
const snug_tokenizer *snug_engine_tokenizer(const snug_engine *e);
int64_t snug_engine_max_model_len(const snug_engine *e);
int32_t snug_engine_n_vocab(const snug_engine *e);

/* The model's hidden size: an embedding's floats. */
int32_t snug_engine_hidden_size(const snug_engine *e);

/* A classifier's labels (config n_labels: a request may classify); 0 for a
 * language model. */
int32_t snug_engine_n_labels(const snug_engine *e);

/* Checks r as snug_engine_submit does (the failures below: lengths, ids,
 * sampling and stop parameters, a grammar whose start a sequence's matcher
 * cannot hold), changing nothing; queues nothing. Every front end's
 * requests pass here. For callers that size memory by the request before
 * submitting it. The model's EOS ids end every sequence besides r's own. */
snug_status snug_engine_check(const snug_engine *e, const snug_request *r, snug_error *err);

/* The part of snug_engine_check that concerns a grammar alone: whether
 * g's start fits a sequence's matcher (constrain.h), for a front end that
 * checks a grammar as it compiles it, to name the field that carried it.
 * Fails with SNUG_INVALID saying why. */
snug_status snug_engine_check_grammar(const snug_grammar *g, snug_error *err);

/* Checks r and queues it. Fails with SNUG_INVALID (a message naming the
 * field: an empty prompt, ids outside the vocabulary, n out of range,
 * prompt plus max_tokens over max_model_len, which starts
 * "context_length_exceeded:"), or SNUG_BUSY when the queue is full or the
 * engine is stopping or failed. max_tokens 0 means up to the model length. */
snug_status snug_engine_submit(snug_engine *e, snug_request *r, snug_error *err);

/* Takes r's oldest output, copying its text into text (cap bytes, at least
 * snug_engine_text_bytes). Returns false when none is waiting. */
bool snug_engine_next(snug_engine *e, snug_request *r, snug_output *out, char *text, size_t cap);

/* The most text one output carries. */
size_t snug_engine_text_bytes(const snug_engine *e);

/* True once every choice of r has ended and every output was taken. */
bool snug_engine_done(snug_engine *e, const snug_request *r);

/* Aborts r: its sequences end (finish ABORT) and free their blocks within
 * a step; outputs not taken are dropped. */
void snug_engine_cancel(snug_engine *e, snug_request *r);

/* Cancels r if it is not done and waits until the engine has let go of
 * it; r may be freed afterwards. */
void snug_engine_release(snug_engine *e, snug_request *r);

/* The prompt tokens of r whose keys and values came from the prefix cache
 * (its first choice's, at its first admission); 0 until it is known, or
 * without caching. */
int64_t snug_engine_cached_tokens(snug_engine *e, const snug_request *r);

/* The salt key of a client's cache_salt string of n bytes (never 0). */
uint64_t snug_engine_salt(const char *salt, size_t n);

/* Empties the prefix cache: every cached block loses its hash (the ones
 * sequences hold keep their contents for them). *n_dropped gets how many
 * blocks had one. Fails with SNUG_BUSY while sequences run or wait (the
 * cache is emptied only when nothing runs), SNUG_INVALID when caching is
 * off. */
snug_status snug_engine_reset_prefix_cache(snug_engine *e, int32_t *n_dropped, snug_error *err);

/* Blocks until r has an output or is done, or timeout_s passes. */
void snug_engine_wait(snug_engine *e, snug_request *r, double timeout_s);

void snug_engine_counters_get(snug_engine *e, snug_engine_counters *out);

/* Stops the loop and waits for it to end: running requests end with
 * ABORT, queued ones are done; requests are then released at once. Other
 * threads may cancel, release, submit (refused) or wait meanwhile. A
 * second call does nothing. */
void snug_engine_stop(snug_engine *e);

/* Stops the loop (snug_engine_stop) and frees everything: every request
 * must have been released, and no other thread may use e any more. */
void snug_engine_close(snug_engine *e);

#endif /* SNUG_ENGINE_H */
