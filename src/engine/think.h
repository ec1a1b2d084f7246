/*
 * think.h: a reasoning budget. A sequence's think block (the tokens after
 * its opening tag, or from its start when the prompt ended inside the block)
 * may take budget tokens; when they are spent and the model has not closed
 * the block itself, the engine writes the closing tokens (for Qwen3
 * "\n</think>\n\n", as its template writes a turn's block) in place of
 * sampled ones, one a step, and the model goes on with its answer. vLLM's
 * thinking_token_budget; llama.cpp's reasoning budget works the same way.
 *
 * The tags are token ids (the tokenizer's encoding of the tag texts: for
 * Qwen3 and the R1 distills each tag is one added token), matched as the
 * sequence's tokens come; a tag the model writes in other tokens is not
 * seen. One block a sequence: after it closes, nothing more is counted.
 * Fixed-size parameters (copied into each sequence) and state; nothing
 * allocates.
 */
#ifndef SNUG_THINK_H
#define SNUG_THINK_H

#include "base/common.h"

enum { SNUG_THINK_TAG_MAX = 8 };    /* ids in a tag or in the forced close */

/* No forced close (n_force 0, as a zeroed struct has it): no budget. */
typedef struct snug_think_params {
    int32_t budget;                 /* tokens the block may take (0: closed at once) */
    bool inside;                    /* the prompt ended inside the block: counting starts at once */
    int32_t n_open, n_close, n_force;
    int32_t open[SNUG_THINK_TAG_MAX];   /* the opening tag's ids */
    int32_t close[SNUG_THINK_TAG_MAX];  /* the closing tag's ids: the model ended the block */
    int32_t force[SNUG_THINK_TAG_MAX];  /* written when the budget is spent */
} snug_think_params;

typedef struct snug_think_state {
    uint8_t phase;                  /* off, before the block, counting, forcing, done */
    int32_t used;                   /* tokens the block has taken */
    int32_t open_at, close_at;      /* ids of the tags matched so far */
    int32_t force_at;               /* the next forced id */
} snug_think_state;

/* Checks p: no forced close (no budget: nothing else is read), or a budget
 * of 0 or more with 1 to SNUG_THINK_TAG_MAX ids in close and force, in open
 * too unless inside, every id in [0, n_vocab). Fails with SNUG_INVALID
 * naming what is wrong ("think: ..."). */
snug_status snug_think_params_check(const snug_think_params *p, int32_t n_vocab, snug_error *err);

/* Starts a sequence's state under p. */
void snug_think_start(snug_think_state *s, const snug_think_params *p);

/* The id the engine must write next instead of sampling one, or -1: sample. */
int32_t snug_think_forced(const snug_think_state *s, const snug_think_params *p);

/* Feeds the sequence's next token id (sampled, or the forced one). */
void snug_think_feed(snug_think_state *s, const snug_think_params *p, int32_t id);

#endif /* SNUG_THINK_H */
