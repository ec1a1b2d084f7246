/*
 * matcher.h: where a text stands in a grammar (grammar.h), a byte at a
 * time, in memory fixed when it is made: what the sampler keeps for each
 * constrained sequence.
 *
 * The state is a set of stacks, as llama.cpp's grammar keeps it: each
 * stack is the elements still to match, innermost rule on top, and its top
 * is always a byte set (an empty stack: the text so far is a whole match).
 * A byte advances every stack whose top set has it; each continuation is
 * expanded again until its top is a byte set (rules entered, finished
 * alternatives left; a reference at the end of an alternative is not kept,
 * so right recursion and repetitions run in constant depth). Stacks that
 * come out equal are kept once. At most max_stacks stacks of max_depth
 * frames: past either, the advance fails (an ambiguous or deeply nested
 * grammar for these limits) and the state is left as it was.
 *
 * Nothing here allocates: the memory comes from the caller, sized by
 * snug_gmatch_bytes.
 */
#ifndef SNUG_GRAMMAR_MATCHER_H
#define SNUG_GRAMMAR_MATCHER_H

#include "grammar.h"

typedef struct snug_gmatch {
    const snug_grammar *g;
    int32_t max_stacks, max_depth;
    int32_t n;         /* stacks */
    int32_t *len;      /* (max_stacks) */
    int32_t *frames;   /* (max_stacks, max_depth): element positions, bottom first */
    int32_t *len2;     /* the next set, while one is built */
    int32_t *frames2;
} snug_gmatch;

typedef enum snug_gmatch_result {
    SNUG_GMATCH_OK = 0,   /* advanced */
    SNUG_GMATCH_REJECT,   /* no stack takes the byte: the text would leave the grammar */
    SNUG_GMATCH_OVERFLOW  /* more stacks or frames than the limits */
} snug_gmatch_result;

/* Bytes of caller memory a matcher of these limits needs (both >= 1).
 * Pure. */
size_t snug_gmatch_bytes(int32_t max_stacks, int32_t max_depth);

/* Makes m a matcher over mem (snug_gmatch_bytes(max_stacks, max_depth)
 * bytes, 4-byte aligned, owned by the caller and used until m is no
 * longer) at the start of g (which must outlive m's use). Fails with
 * SNUG_INVALID when the limits do not hold the start (the message names
 * them). */
snug_status snug_gmatch_start(snug_gmatch *m, void *mem, int32_t max_stacks, int32_t max_depth,
                              const snug_grammar *g, snug_error *err);

/* Advances m by byte b; on anything but SNUG_GMATCH_OK m is as it was. */
snug_gmatch_result snug_gmatch_advance(snug_gmatch *m, uint8_t b);

/* Makes dst a matcher over mem (snug_gmatch_bytes of src's limits) in the
 * state src reaches with byte b, src unchanged: an advance with no copy of
 * the stacks that do not take b. On anything but SNUG_GMATCH_OK dst holds
 * no state to use. */
snug_gmatch_result snug_gmatch_advance_from(snug_gmatch *dst, void *mem, const snug_gmatch *src, uint8_t b);

/* Advances m by n bytes, stopping at the first that is not taken (m is
 * then as it was after the bytes before it); *taken (may be NULL) gets
 * how many were. */
snug_gmatch_result snug_gmatch_advance_bytes(snug_gmatch *m, const void *bytes, size_t n, size_t *taken);

/* Whether the text so far is a whole match (the grammar may end here). */
bool snug_gmatch_accepting(const snug_gmatch *m);

/* The bytes some stack takes next, into *out. */
void snug_gmatch_next_bytes(const snug_gmatch *m, snug_byteset *out);

/* Copies src's state into dst, a matcher of the same grammar and limits
 * over memory of its own. */
void snug_gmatch_copy(snug_gmatch *dst, const snug_gmatch *src);

/* Makes dst a matcher over mem (snug_gmatch_bytes of src's limits) in
 * src's state. */
void snug_gmatch_clone(snug_gmatch *dst, void *mem, const snug_gmatch *src);

/* Makes dst a matcher over mem (snug_gmatch_bytes of src's limits) whose
 * one stack is frames [from, src->len[i]) of src's stack i: that stack
 * alone (from 0), or its top frames as if nothing were below them (a
 * stack that would leave them is then empty: the text so far a whole
 * match). 0 <= from < src->len[i]. */
void snug_gmatch_from_stack(snug_gmatch *dst, void *mem, const snug_gmatch *src, int32_t i, int32_t from);

#endif /* SNUG_GRAMMAR_MATCHER_H */
