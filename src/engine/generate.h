/*
 * generate.h: one sequence from prompt to finish: chunked prefill, then a
 * decode step per token, sampling, stop conditions and streamed text. What
 * `snug generate` runs; the serving engine runs many sequences at once with
 * the same parts (model, cache, blocks, sampler, stop).
 *
 * Everything is allocated when the generator is made (the model's
 * activation arena, a KV cache for max_len positions, the id buffer, the
 * sampler's scratch, the text buffers); a generation allocates nothing.
 */
#ifndef SNUG_GENERATE_H
#define SNUG_GENERATE_H

#include "base/common.h"
#include "dist/comm.h"
#include "kernels/kernels.h"
#include "model/loader.h"
#include "sampler.h"
#include "stop.h"
#include "tokenizer/tokenizer.h"

enum { SNUG_PREFILL_CHUNK_DEFAULT = 256 };

typedef struct snug_generator_opts {
    int64_t max_len;        /* positions a sequence may use (prompt and output); 0 or more
                             * than the model's max_position_embeddings: the model's */
    snug_dtype kv_dtype;    /* SNUG_DTYPE_NONE: bf16 */
    int32_t block_size;     /* 0: SNUG_BLOCK_SIZE_DEFAULT */
    int32_t prefill_chunk;  /* tokens per prefill step; 0: SNUG_PREFILL_CHUNK_DEFAULT */
    int32_t n_threads;      /* 0: OpenMP's count */
    int isa;                /* a snug_isa, or -1: the best the CPU has */
    bool echo;              /* the prompt's text goes to on_text first (special tokens skipped) */
    snug_comm *comm;        /* the tensor-parallel ranks (borrowed); NULL: one process */
} snug_generator_opts;

typedef struct snug_generator snug_generator;

/* Makes a generator over loaded weights w (borrowed; they must outlive it)
 * and, when tok is not NULL, the tokenizer whose text it streams
 * (borrowed). Fails as snug_model_create and snug_kvcache_create do; then
 * nothing is held. */
snug_status snug_generator_create(const snug_model_config *cfg, const snug_weights *w,
                                  const snug_tokenizer *tok, const snug_generator_opts *opts,
                                  snug_generator **out, snug_error *err);

/* With several ranks: rank 0 generates (snug_generate, then
 * snug_generator_stop), every other rank runs its steps in
 * snug_generator_follow until then. Both fail as snug_stepper_follow and
 * snug_stepper_stop do. */
snug_status snug_generator_follow(snug_generator *g, snug_error *err);
snug_status snug_generator_stop(snug_generator *g, snug_error *err);

/* Frees the generator; NULL is ignored. */
void snug_generator_free(snug_generator *g);

/* The instruction set the model's kernels use. */
snug_isa snug_generator_isa(const snug_generator *g);

/* The positions one sequence may use. */
int64_t snug_generator_max_len(const snug_generator *g);

/* Receives text as it is generated (complete UTF-8 characters, stop strings
 * held back); returns false to stop the generation (finish ABORT). */
typedef bool (*snug_text_fn)(const char *text, size_t n, void *ctx);

typedef struct snug_gen_result {
    const int32_t *ids;     /* prompt, then generated ids (valid until the next run) */
    int64_t n_prompt, n_generated;
    snug_finish finish;
    double prefill_seconds; /* prompt in, first token's logits out */
    double decode_seconds;  /* the decode steps after that */
} snug_gen_result;

/* Generates from prompt (n_prompt >= 1 ids, below the vocabulary size)
 * with sampling parameters sp and stop conditions stop (both validated
 * here). The model length also ends it (finish MODEL_LENGTH). Text goes to
 * on_text when it and the tokenizer are not NULL. On success *res says
 * what came out. Fails with SNUG_INVALID for bad parameters or a prompt
 * that does not fit max_len (the message says which), or as a model step
 * fails. Allocates nothing. */
snug_status snug_generate(snug_generator *g, const int32_t *prompt, int64_t n_prompt,
                          const snug_sampling_params *sp, const snug_stop_params *stop,
                          snug_text_fn on_text, void *ctx, snug_gen_result *res, snug_error *err);

#endif /* SNUG_GENERATE_H */
