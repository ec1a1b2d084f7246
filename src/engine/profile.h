/*
 * profile.h: the profile step of the memory plan: the largest step serving
 * will ever run, run for real, measured.
 *
 * max_num_batched_tokens tokens spread over max_num_seqs sequences (each a
 * prefill from position 0, every one asking for its last token's logits:
 * the most logits rows and the most sampling a step can have) go through
 * the forward pass and the sampler, with scratch KV blocks for those
 * tokens in the layers it runs (at least a large block's bytes, so that
 * freeing them gives their pages back), using the serving state's step
 * buffers and sampler scratch
 * as serving will; then a step of every sequence decoding one token and
 * one of a single sequence, so that every path serving takes (the
 * matrix-vector kernels, the penalties) has touched its code and stacks.
 * After the steps, which free nothing, the resident set (read to the page)
 * is the window's peak: what it holds beyond what the allocator gave out
 * (code, libraries, thread stacks, OpenMP's pools) is U of the plan.
 */
#ifndef SNUG_PROFILE_H
#define SNUG_PROFILE_H

/* The layers each step of the profile runs through: every size it measures
 * (the arena, the step's buffers, the scratch cache, resident once made) is
 * the same in each layer, and every layer takes the same code paths on the
 * same threads, so one layer measures what all of them would, in a
 * fraction of the time (a Llama-3.2-1B's 2048-token step: 1 of 16 layers,
 * and the logits). The threads' stacks are made resident deeper than any
 * step goes (SNUG_STACK_PREFAULT_BYTES), so a path serving takes first
 * finds them there. */
enum { SNUG_PROFILE_LAYERS = 1 };

#include "base/common.h"
#include "dist/stepper.h"
#include "model/kvcache.h"
#include "model/model.h"
#include "plan.h"
#include "serving.h"

/* Runs the profile step on the stepper's model (made for steps of n_tokens_max tokens over
 * n_seqs_max sequences: those are the step's sizes, the tokens capped at
 * max_model_len per sequence) with a scratch cache of kv_shape's blocks
 * for the layers the steps run (SNUG_PROFILE_LAYERS), sampling each
 * sequence's row with default parameters. Allocates only the scratch
 * cache (category kv_cache), freed before it returns. Fails as the forward
 * pass does, or with SNUG_NOMEM for the scratch cache (*out then holds the
 * step's n_tokens, n_seqs, n_layers and scratch_blocks); nothing is left held either
 * way. With several ranks every rank calls it at once: the
 * leader's steps run on all of them, only the leader samples, and every
 * rank returns the same status (the first rank's failure, agreed), unless
 * the communicator broke. */
snug_status snug_profile_step(snug_stepper *stepper, const snug_kv_shape *kv_shape,
                              snug_serving_state *serving, snug_profile_result *out,
                              snug_error *err);

#endif /* SNUG_PROFILE_H */
