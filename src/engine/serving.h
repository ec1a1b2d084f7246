/*
 * serving.h: the serving state, S of the memory plan: everything serving
 * holds for max_num_seqs sequences besides the KV cache and the activation
 * arena, made once, at its largest, before the profile step, so that no
 * request and no step ever allocates.
 *
 * One block (category other) carved into:
 *   - per sequence slot: its block table (ceil(max_model_len / block_size)
 *     ids; with shape.windowed a second, of the window group), its token ids (prompt and output, max_model_len), its sampler
 *     and stop state and its stop parameters (by value), and its text
 *     buffers (the decoder's text and what may be streamed: stop.h);
 *   - one sampler scratch area per sampling thread;
 *   - a step's description: its tokens (max_num_batched_tokens) and its
 *     sequences (max_num_seqs snug_step_seq);
 *   - the scheduler's arrays (scheduler.h) and, per slot, a ring of
 *     ring_cap outputs with their text, for the engine's consumers;
 *   - with a draft model, the rows of logits its sampled drafts were drawn
 *     from, kept for their verification (shape.draft_rows);
 *   - with constrained decoding (shape.constrained), a matcher per slot
 *     and the constrainer's mask, scratch and cache (constrain.h).
 * snug_serving_bytes is the pure function the plan uses; the block is made
 * at least SNUG_MEM_LARGE_BYTES long so that what it holds is exactly that
 * (small blocks' charge depends on the C library).
 */
#ifndef SNUG_SERVING_H
#define SNUG_SERVING_H

#include "base/common.h"
#include "blocks.h"
#include "constrain.h"
#include "model/model.h"
#include "sampler.h"
#include "scheduler.h"
#include "spec.h"
#include "stop.h"
#include "think.h"
#include "tokenizer/tokenizer.h"

enum {
    SNUG_OUT_RING = 8          /* outputs a sequence may have waiting for its consumer before
                                * it pauses; its ring has room for a step's outputs (1 + its
                                * drafts) after SNUG_OUT_RING - 1 of them: SNUG_OUT_RING +
                                * shape.spec_tokens records */
};

/* One step's output for one sequence, waiting in its ring for the consumer:
 * the token sampled and the text it released (stop strings held back), or
 * the sequence's end. */
typedef struct snug_out_record {
    int32_t token;             /* -1 for an end without a token */
    snug_finish finish;        /* SNUG_FINISH_NONE while it goes on */
    uint32_t n_text;
    char *text;                /* [emit_bytes] in the serving state's block */
    float logprob;             /* the token's, under the model's distribution (when asked) */
    int32_t n_top;             /* alternatives below, most likely first; 0 when not asked */
    int32_t top_ids[SNUG_LOGPROBS_MAX];
    float top_logprobs[SNUG_LOGPROBS_MAX];
} snug_out_record;

typedef struct snug_serving_shape {
    int32_t max_num_seqs;      /* > 0 */
    int32_t max_num_batched_tokens; /* tokens per step, > 0 */
    int64_t max_model_len;     /* positions a sequence may use, > 0 */
    int32_t block_size;        /* > 0 */
    int32_t n_vocab;           /* > 0: the sampler's scratch */
    size_t max_token_bytes;    /* the tokenizer's longest token text */
    int32_t n_samplers;        /* sampling threads (> 0) */
    bool constrained;          /* memory for constrained decoding (the model has a tokenizer) */
    bool windowed;             /* a window group's table per slot (kvcache.h's window) */
    int32_t spec_tokens;       /* drafts a step may verify for a sequence, 0 to
                                * SNUG_SPEC_TOKENS_MAX: its ring's records beyond SNUG_OUT_RING */
    int32_t draft_rows;        /* a draft model's rows of logits kept from drafting to
                                * verification (sampled drafts: snug_sample_draft), n_vocab
                                * floats each, one after another; 0 to SNUG_SPEC_SAMPLED_SEQS
                                * x SNUG_SPEC_TOKENS_MAX */
} snug_serving_shape;

/* One sequence's place. */
typedef struct snug_seq_slot {
    snug_block_table table;    /* ids: blocks_per_seq entries in the block */
    snug_block_table wtable;   /* with shape.windowed: its blocks of the window group, as table */
    int32_t *ids;              /* [max_model_len] prompt, then output */
    int64_t n_ids;
    char *text;                /* [text_cap] decoded text not yet streamed */
    char *emit;                /* [snug_stop_emit_bytes(text_cap)] */
    size_t text_cap;
    snug_sampling_params sampling;
    snug_sampler_state sampler;
    snug_stop_params stop_params;
    snug_stop_state stop;
    snug_think_params think_params; /* its reasoning budget (think.h; the owner's copy) */
    snug_think_state think;
    snug_tok_stream stream;    /* the incremental decoder of its output */
    int64_t n_prompt;
    snug_out_record *ring;     /* [ring_cap of the state] outputs, oldest at ring_head */
    int32_t ring_head, ring_n;
    void *owner;               /* the request it serves (the engine's); NULL: free */
    int32_t choice;            /* which of the owner's choices */
    int32_t n_logprobs;        /* alternatives asked for per token; -1: no log-probabilities */
    void *prompt_lp;           /* the owner's snug_prompt_logprob array to fill, or NULL */
    double t_last;             /* when its last token was published; 0: none yet */
    const snug_grammar *grammar; /* the grammar its output keeps to (the owner's); NULL: none */
    uint64_t grammar_key;      /* the grammar's key in the mask cache */
    bool grammar_failed;       /* its matcher could not start */
    bool mask_ready;           /* its next mask is cached (else it waits out of steps for a walk) */
    uint32_t gen;              /* sequences the slot has held: tells a walk's owner from a later one */
    snug_gmatch match;         /* where its output stands in the grammar */
    void *match_mem;           /* [snug_constrain_seq_bytes()] with shape.constrained */
    int32_t spec_max;          /* drafted tokens a step may verify for it (0: none) */
    snug_spec_state spec;      /* how its drafts have fared (spec.h) */
    int64_t d_computed;        /* a draft model's: its positions computed (it may lag the
                                * model's by the last draft of a step that kept them all) */
} snug_seq_slot;

typedef struct snug_serving_state {
    snug_serving_shape shape;
    int32_t blocks_per_seq;
    int32_t ring_cap;          /* each slot's ring's records: SNUG_OUT_RING + shape.spec_tokens */
    void *block;               /* the one allocation */
    snug_seq_slot *seqs;       /* [max_num_seqs] */
    unsigned char **scratch;   /* [n_samplers] sampler scratch areas */
    int32_t *step_tokens;      /* [max_num_batched_tokens] */
    snug_step_seq *step_seqs;  /* [max_num_seqs] */
    snug_sched_seq *sched;     /* [max_num_seqs] the scheduler's view of each slot */
    int32_t *sched_running, *sched_waiting; /* [max_num_seqs] each */
    snug_sched_item *items;    /* [max_num_seqs] a step's plan */
    float *lp_row;             /* [n_vocab] a row of logits kept raw for log-probabilities */
    float *draft_q;            /* [shape.draft_rows * n_vocab] sampled drafts' rows (their q) */
    snug_constrainer constrain; /* with shape.constrained; its trie set by the planner */
} snug_serving_state;

/* The bytes the serving state of shape holds (what the allocator charges
 * its block); 0 when a field is out of range or the size overflows. Pure. */
size_t snug_serving_bytes(const snug_serving_shape *shape);

/* Makes the state: one block, carved, every slot's buffers attached.
 * Fails with SNUG_INVALID naming a bad field, or SNUG_NOMEM. */
snug_status snug_serving_create(const snug_serving_shape *shape, snug_serving_state *out,
                                snug_error *err);

/* Frees the state; a zero-filled one is ignored. Every pointer into it is
 * invalid afterwards. */
void snug_serving_free(snug_serving_state *s);

#endif /* SNUG_SERVING_H */
