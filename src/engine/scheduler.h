/*
 * scheduler.h: continuous batching over a paged KV cache. Which sequences
 * run in the next step, with how many tokens each, and which give their
 * blocks up when the cache is full. Pure bookkeeping: no model, no
 * threads, nothing allocated (every array is the caller's, made up front).
 *
 * A sequence has n_tokens known tokens (its prompt, then what it has
 * generated) of which the first n_computed have their keys and values in
 * the cache; it needs the rest computed, and when they are, its last
 * token's logits give the next token. A step takes at most max_tokens
 * tokens over at most max_seqs sequences:
 *   1. running sequences with one token to compute (decodes), in the order
 *      they were admitted, so a long prompt never starves them; one that
 *      needs a block when none is free preempts the most recently admitted
 *      running sequence (itself, when it is that one): the victim's blocks
 *      are freed and it goes to the front of the waiting queue, to be
 *      recomputed later from its tokens (prompt and generated);
 *   2. running sequences with more (chunked prefills), in order, each a
 *      chunk of what the step has left and the free blocks can hold;
 *   3. waiting sequences, first come first served (preempted ones first),
 *      while a slot, tokens and blocks remain, keeping a watermark of free
 *      blocks (1% of the cache, at least 1) for the running ones to grow
 *      into; the first that cannot be admitted stops admission (no
 *      overtaking).
 * When nothing can run although running sequences could (prefills that
 * each hold part of a full cache), the most recently admitted are
 * preempted until one can.
 * A decode may verify drafted tokens (speculative decoding: the sequence's
 * n_draft, beyond its known tokens) in the same item, each with a row of
 * logits, as far as the step's tokens and rows left over by the other
 * decodes and the free blocks (less the watermark) allow; drafts never
 * preempt. After the step the caller says how many proved right (the
 * item's n_kept): the rest of the positions they filled are not computed.
 * Each item that samples takes one row of logits; a chunk of a prompt
 * whose log-probabilities are asked for takes a row per token, and is cut
 * to the rows the step has left (max_rows).
 * A running sequence can be paused (its consumer has not taken its last
 * output): it keeps its blocks and is skipped until resumed; preempted
 * while paused, it is not admitted again until resumed.
 *
 * Prefix caching (the pool's, blocks.h): a sequence admitted takes
 * references to the longest cached prefix of its tokens in whole blocks, at
 * most all but its last token (whose logits it needs), and computes only
 * the rest; none when a row of logits is wanted for its prompt's tokens.
 * Admission counts the evictable blocks it does not take as free. Every
 * block a sequence fills is registered after its step (generated tokens
 * too), so the next turn of a chat finds the previous answer as well. A
 * sequence may follow a leader (another choice of the same prompt): it
 * waits, without holding up the queue, until the leader has computed the
 * prompt's whole blocks, then finds them in the cache. A preempted
 * sequence's blocks stay cached, so its recompute is mostly a hit.
 *
 * A model whose windowed layers keep their keys and values in a group of
 * their own (snug_sched_set_window; kvcache.h) gives each sequence a second
 * table, of the window group's pool, grown with the first; after each step
 * the blocks no later query of the sequence sees (wholly before n_computed -
 * window + 1) are given back. That pool holds the windows of a number of
 * sequences and a step's tokens (snug_sched_window_blocks): no more
 * sequences run at once than it holds windows for (max_window_seqs), and
 * then it never runs short, so the full group's pool decides the rest. A cached prefix counts
 * only as far as the window group still holds the blocks its window needs
 * (found through the full group's blocks: blocks.h's link), vLLM's rule.
 */
#ifndef SNUG_SCHEDULER_H
#define SNUG_SCHEDULER_H

#include "base/common.h"
#include "blocks.h"

typedef enum snug_seq_phase {
    SNUG_SEQ_FREE = 0,
    SNUG_SEQ_WAITING,       /* no blocks: new, or preempted */
    SNUG_SEQ_RUNNING        /* admitted: holds the blocks of n_computed tokens or more */
} snug_seq_phase;

typedef struct snug_sched_seq {
    snug_seq_phase phase;
    int64_t n_tokens;       /* known tokens: prompt, then generated */
    int64_t n_computed;     /* of those, in the cache */
    bool paused;            /* skipped by steps while set */
    int32_t n_preempted;    /* times it was preempted */
    int64_t all_logits_until; /* positions below it need a row of logits each (a prompt
                             * whose log-probabilities are asked for); 0: none */
    snug_block_table *table;/* its blocks (the caller's; capacity: the longest sequence) */
    snug_block_table *wtable;/* with a window group: its blocks there (the caller's, as table) */
    int32_t n_linked;       /* window blocks linked to their full group's blocks, or passed over */
    const int32_t *tokens;  /* [n_tokens] its ids (the caller's): the cache's keys */
    uint64_t salt;          /* the cache salt: sequences share blocks only under the same */
    int32_t leader;         /* the sequence whose prompt it waits for; -1: none */
    int32_t n_registered;   /* blocks of its table registered, found or passed over */
    int64_t n_cached;       /* tokens found in the cache at its first admission */
    bool admitted;          /* admitted at least once (n_cached is known) */
    int32_t n_draft;        /* drafted tokens at tokens[n_tokens ..) a decode of it may verify
                             * (speculative decoding: the caller's, set before each step) */
} snug_sched_seq;

/* One sequence's part of a step: tokens [pos0, pos0 + n_tokens) of it;
 * sample: they end at its last known token (its logits give the next), or
 * at n_draft drafted tokens after it, each wanting a row of logits too. */
typedef struct snug_sched_item {
    int32_t seq;
    int32_t n_tokens;
    int64_t pos0;
    bool sample;
    bool all_logits;        /* a row of logits for every token (not only the last) */
    int32_t n_draft;        /* of n_tokens, the drafts at the end (a decode's; rows: 1 + n_draft) */
    int32_t n_kept;         /* set by the caller after the step: of the drafts, the first
                             * n_kept proved right (their keys and values stay) */
} snug_sched_item;

typedef struct snug_sched {
    int32_t max_seqs;       /* slots: seqs[0 .. max_seqs) */
    int32_t max_tokens;     /* per step */
    int32_t block_size;
    int32_t watermark;      /* free blocks admission leaves */
    int32_t max_rows;       /* rows of logits per step (the arena's) */
    snug_sched_seq *seqs;
    snug_block_pool *pool;
    snug_block_pool *wpool; /* the window group's blocks; NULL: one group */
    int32_t window;         /* the window group's window (positions a query sees) */
    int32_t max_window_seqs;/* sequences whose windows it holds at once: the most that run */
    int32_t *running;       /* [max_seqs] seq indices in admission order */
    int32_t n_running;
    int32_t *waiting;       /* [max_seqs] a ring of seq indices */
    int32_t wait_head, n_waiting;
    int64_t n_preemptions;  /* since init */
    int64_t n_queried;      /* tokens looked up in the prefix cache at admissions (caching on;
                             * re-admissions after preemption too), and ... */
    int64_t n_hit;          /* ... of those, found */
} snug_sched;

/* Sets s up over the caller's arrays: seqs[max_seqs] (all set FREE here,
 * table pointers kept), running[max_seqs], waiting[max_seqs], and the pool
 * the tables draw from. max_seqs, max_tokens, block_size > 0; max_rows, the
 * rows of logits a step may ask for (0: max_seqs). */
void snug_sched_init(snug_sched *s, int32_t max_seqs, int32_t max_tokens, int32_t max_rows, int32_t block_size,
                     snug_sched_seq *seqs, int32_t *running, int32_t *waiting,
                     snug_block_pool *pool);

/* Gives s a window group (before any sequence is added): its pool wpool
 * (at least snug_sched_window_blocks(1, ...) blocks of block_size: the
 * windows of how many sequences it holds bounds how many run) and the
 * window of its layers; each slot's table of it is seqs[i].wtable (the
 * caller's, set before snug_sched_init or after it). */
void snug_sched_set_window(snug_sched *s, snug_block_pool *wpool, int32_t window);

/* The blocks a window group's pool needs to hold the windows of max_seqs
 * running sequences without running short: per sequence the blocks of a
 * window (ceil((window - 1) / block_size) + 2, as a window may straddle
 * them), and those of a step's max_tokens. Pure. */
int64_t snug_sched_window_blocks(int32_t max_seqs, int32_t max_tokens, int32_t block_size, int32_t window);

/* Queues the free slot seq with n_tokens >= 1 known tokens (its prompt),
 * tokens (the caller's, growing as it generates, until it finishes), under
 * the cache salt, following leader (a sequence with the same prompt added
 * before it, or -1), at the back of the waiting queue. */
void snug_sched_add(snug_sched *s, int32_t seq, const int32_t *tokens, int64_t n_tokens,
                    uint64_t salt, int32_t leader);

/* Plans the next step into items (room for max_seqs) and returns how many;
 * *n_tokens gets their total. Blocks are taken (and victims' freed) here,
 * so the cache holds room for every item's tokens. 0 when nothing can run. */
int32_t snug_sched_step(snug_sched *s, snug_sched_item *items, int32_t *n_tokens);
/* The most blocks of the pool the next step could take for new keys, for
 * what its sequences want now (paused ones too: they may be resumed before
 * it): a block for each running or waiting sequence (a chunk may straddle
 * a block boundary) and the blocks of the tokens they have left to
 * compute, at most a step's max_tokens; with any waiting, the watermark
 * admission keeps. (Prefix hits take cached blocks beyond it, which are
 * resident already; admission counts them within its room.) Never more
 * than the worst case of any step (max_tokens' blocks and a block a slot,
 * and the watermark). What a pool made resident as serving goes needs
 * ready ahead of the step. Reads only. */
int32_t snug_sched_blocks_wanted(const snug_sched *s);

/* Records that the step ran: each item's tokens are in the cache now (of
 * its drafts, the n_kept first), and
 * the blocks they filled are registered in the prefix cache (so each
 * sequence's tokens[0 .. n_computed) must hold the ids that were fed). A
 * block whose twin (the same prefix) is already cached is swapped for the
 * twin in its table. */
void snug_sched_done(snug_sched *s, const snug_sched_item *items, int32_t n_items);

/* Records n >= 1 tokens generated for seq (after its item with sample ran:
 * 1 + the drafts kept, or as many where the caller stopped at the last draft
 * kept: that one is then its last token, to be computed again). */
void snug_sched_append(snug_sched *s, int32_t seq, int32_t n);

/* Ends seq (finished or aborted, running or waiting): its blocks go back
 * to the pool at once (cached ones stay findable until evicted), its slot
 * is free, and sequences that followed it as their leader go on alone. */
void snug_sched_finish(snug_sched *s, int32_t seq);

/* Sets or clears seq's pause. */
void snug_sched_pause(snug_sched *s, int32_t seq, bool paused);

#endif /* SNUG_SCHEDULER_H */
