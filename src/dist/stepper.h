/*
 * stepper.h: one forward step on every tensor-parallel rank.
 *
 * Rank 0 (the leader) decides every step: snug_stepper_run sends the
 * step's plan (token ids, each sequence's positions, block table and
 * logits mode) to the other ranks, runs its own part of the forward pass
 * (the model all-reduces the embedding's rows and the outputs of o_proj
 * and down_proj through the communicator), then gathers every rank's
 * slice of the vocabulary-parallel logits straight into whole rows (each
 * row every rank's slice in rank order: the vocabulary, then the last
 * ranks' padding). When the leader only needs each row's most likely token
 * (greedy decoding, nothing else asked of the logits), the ranks reduce
 * their slices' maxima instead (snug_stepper_run_greedy): a pair of
 * numbers per row crosses, not a row of the vocabulary, and the result is
 * the same argmax (the lowest id among equal maxima). The other ranks
 * (followers) either run the same sequence of calls (the profile step,
 * where every rank builds the same steps: theirs are ignored and the
 * leader's run) or loop in snug_stepper_follow until the leader says stop,
 * answering the leader's checks that they still run (snug_stepper_ping).
 *
 * Every buffer (the step's message, the leader's whole rows of logits,
 * the rows' maxima) is one block of category activations made with the
 * stepper and sized by the pure snug_stepper_bytes for the model's largest
 * step: a step allocates nothing. With one rank the stepper is the model's
 * forward pass and holds no buffers.
 */
#ifndef SNUG_STEPPER_H
#define SNUG_STEPPER_H

#include "base/common.h"
#include "comm.h"
#include "formats/config.h"
#include "model/kvcache.h"
#include "model/model.h"

/* The logits of a step, on the leader: n_rows rows, stride floats apart,
 * each holding the whole vocabulary in its first n_vocab floats; or, from
 * snug_stepper_run_greedy over several ranks, rows NULL and best[n_rows]
 * each row's most likely token (.id) and its logit. Valid until the next step. Followers get
 * n_rows 0. */
typedef struct snug_logits {
    const float *rows;
    const snug_row_max *best;
    int32_t n_rows;
    int32_t stride;
    int32_t n_vocab;
} snug_logits;

typedef struct snug_stepper snug_stepper;

/* The bytes snug_stepper_create allocates for a model of these dims (its
 * rank of tp), steps up to shape and block tables of up to
 * max_blocks_per_seq blocks: what snug_mem reports (a bound for the small
 * block of one rank). 0 when a size overflows or a count is more than MPI
 * can carry. Pure. */
size_t snug_stepper_bytes(const snug_model_dims *dims, const snug_step_shape *shape,
                          int32_t max_blocks_per_seq);

/* Makes the stepper of model m (borrowed, made with cfg and, for tp > 1,
 * with snug_comm_allreduce_hook over c) over communicator c (borrowed;
 * NULL for one process), whose rank and size must be the model's. Fails
 * with SNUG_INVALID (a mismatch) or SNUG_NOMEM; then nothing is held. */
snug_status snug_stepper_create(snug_comm *c, snug_model *m, const snug_model_config *cfg,
                                int32_t max_blocks_per_seq, snug_stepper **out, snug_error *err);

/* Frees the stepper; NULL is ignored. */
void snug_stepper_free(snug_stepper *s);

/* True on rank 0 (and with one rank). */
bool snug_stepper_leads(const snug_stepper *s);

/* The model (borrowed at create). */
snug_model *snug_stepper_model(const snug_stepper *s);

/* The communicator (NULL for one process). */
snug_comm *snug_stepper_comm(const snug_stepper *s);

/* Runs one step on every rank (see above; a follower's step is ignored and
 * may be NULL) into *out. Fails as snug_model_forward does, with SNUG_IO
 * when a rank did not take part within the step timeout, or with
 * SNUG_INTERNAL when a follower got a message it cannot run; after a
 * communication failure the ranks cannot go on (snug_comm_broken). */
snug_status snug_stepper_run(snug_stepper *s, snug_kvcache *kv, const snug_step *step,
                             snug_logits *out, snug_error *err);

/* As snug_stepper_run, for a leader that only needs each row's argmax:
 * with several ranks out->best holds it and out->rows is NULL; with one
 * rank the rows are there as from snug_stepper_run (best NULL). */
snug_status snug_stepper_run_greedy(snug_stepper *s, snug_kvcache *kv, const snug_step *step,
                                    snug_logits *out, snug_error *err);

/* On a follower: runs the leader's steps until it stops them (SNUG_OK) or
 * a step fails (its status). Waits between steps without a limit. */
snug_status snug_stepper_follow(snug_stepper *s, snug_kvcache *kv, snug_error *err);

/* On the leader, between steps: checks that every rank still answers
 * (the followers in snug_stepper_follow take part in one small reduction,
 * nothing else). Fails as a step's communication does (SNUG_IO when a rank
 * does not answer within the step wait's limit, see snug_comm_hurry; the
 * communicator is broken after it). SNUG_OK at once with one rank or on a
 * follower. */
snug_status snug_stepper_ping(snug_stepper *s, snug_error *err);

/* On the leader: tells the followers in snug_stepper_follow to return.
 * Nothing with one rank or a broken communicator. */
snug_status snug_stepper_stop(snug_stepper *s, snug_error *err);

#endif /* SNUG_STEPPER_H */
