/*
 * think.h: a reasoning budget. A sequence's think block (the tokens after
 * its opening tag, or from its start when the prompt ended inside the block)
 * may take budget tokens; when they are spent and the model has not closed
 * the block itself, the engine writes the closing tokens (for Qwen3
 * "\n</think>\n\n", as its template writes a turn's block) in place of
 * sampled ones, one a step, and the model goes on with its answer. vLLM's
 * thinking_token_budget; llama.cpp's reasoning budget works the same way.
 *
 * A tag is seen as token ids (the tokenizer's encoding of the tag texts:
 * for Qwen3 and the R1 distills each tag is one added token) and, where
 * its text is given, in the decoded text, so that a tag the model spells
 * in other tokens ("</", "think", ">") is seen too. A budget spent in the
 * middle of a character (a byte token, or byte-level BPE's pieces of one)
 * lets the model finish it first, for at most SNUG_THINK_FINISH_MAX more
 * tokens, so that the reasoning text stays whole UTF-8. One block a
 * sequence: after it closes, nothing more is counted. Fixed-size
 * parameters (copied into each sequence) and state; nothing allocates.
 */
#ifndef SNUG_THINK_H
#define SNUG_THINK_H

#include "base/common.h"

enum { SNUG_THINK_TAG_MAX = 8 };    /* ids in a tag or in the forced close */
enum { SNUG_THINK_TEXT_MAX = 32 };  /* a tag's text, with its terminating zero */
enum { SNUG_THINK_FINISH_MAX = 4 }; /* tokens a spent budget waits for a character's end */

/* No forced close (n_force 0, as a zeroed struct has it): no budget. */
typedef struct snug_think_params {
    int32_t budget;                 /* tokens the block may take (0: closed at once) */
    bool inside;                    /* the prompt ended inside the block: counting starts at once */
    int32_t n_open, n_close, n_force;
    int32_t open[SNUG_THINK_TAG_MAX];   /* the opening tag's ids */
    int32_t close[SNUG_THINK_TAG_MAX];  /* the closing tag's ids: the model ended the block */
    int32_t force[SNUG_THINK_TAG_MAX];  /* written when the budget is spent */
    char open_text[SNUG_THINK_TEXT_MAX];  /* the tags' texts ("<think>"), matched in the */
    char close_text[SNUG_THINK_TEXT_MAX]; /* decoded text too; "": by ids alone */
} snug_think_params;

typedef struct snug_think_state {
    uint8_t phase;                  /* off, before the block, counting, finishing a
                                     * character, forcing, done */
    uint8_t n_tail;
    char tail[SNUG_THINK_TEXT_MAX];  /* the text's last bytes, for the tags' texts */
    int32_t used;                   /* tokens the block has taken (and the finishing ones) */
    int32_t open_at, close_at;      /* ids of the tags matched so far */
    int32_t force_at;               /* the next forced id */
} snug_think_state;

/* Checks p: no forced close (no budget: nothing else is read), or a budget
 * of 0 or more with 1 to SNUG_THINK_TAG_MAX ids in close and force, in open
 * too unless inside, every id in [0, n_vocab), and tag texts terminated
 * within SNUG_THINK_TEXT_MAX bytes. Fails with SNUG_INVALID naming what is
 * wrong ("think: ..."). */
snug_status snug_think_params_check(const snug_think_params *p, int32_t n_vocab, snug_error *err);

/* Starts a sequence's state under p. */
void snug_think_start(snug_think_state *s, const snug_think_params *p);

/* The id the engine must write next instead of sampling one, or -1: sample. */
int32_t snug_think_forced(const snug_think_state *s, const snug_think_params *p);

/* Feeds the sequence's next token id (sampled, or the forced one), with
 * the n bytes of text it completed (text may be NULL when n is 0) and
 * whether the text now ends inside a character (mid_char: the decoder holds
 * back the first bytes of one). */
void snug_think_feed(snug_think_state *s, const snug_think_params *p, int32_t id, const char *text, size_t n,
                     bool mid_char);

#endif /* SNUG_THINK_H */
