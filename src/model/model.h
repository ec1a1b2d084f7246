/*
 * model.h: the forward pass of the families formats/arch.h lists (Llama
 * 2/3, Mistral, Qwen2, Qwen3, Phi-3) over a batch of sequences whose keys and values live in the paged KV cache, and
 * the pure size functions the memory plan is built on.
 *
 * One step runs the tokens of several sequences flattened together: some in
 * prefill (many tokens, possibly a chunk of a longer prompt), some decoding
 * one token. Each sequence brings its first position and its block table;
 * it sees only its own blocks. Per layer: RMSNorm, the fused qkv projection
 * (+ biases, Qwen2; an RMSNorm per q and k head, Qwen3), rotary embeddings
 * (half-split layout, on all of a head or its first n_rot dimensions;
 * default, linear and llama3 scaling), the new keys and values written into the cache,
 * grouped-query attention, o_proj, residual, RMSNorm, the fused gate_up,
 * SwiGLU, down_proj, residual; then the final norm and the lm_head only for
 * the rows whose logits are asked for.
 *
 * Activations are f32, weights as loaded (f32, f16 or bf16), the cache f32,
 * f16 or bf16. All scratch memory is one arena (category activations) made
 * when the model is made and sized by snug_model_activation_bytes: a
 * forward step allocates nothing.
 */
#ifndef SNUG_MODEL_H
#define SNUG_MODEL_H

#include "base/common.h"
#include "formats/config.h"
#include "base/pool.h"
#include "kernels/kernels.h"
#include "kvcache.h"
#include "loader.h"

/* The largest step the model is made for. */
typedef struct snug_step_shape {
    int32_t n_tokens_max;  /* tokens per step, all sequences together */
    int32_t n_seqs_max;    /* sequences per step */
    int32_t n_logits_max;  /* rows of logits per step; 0: n_seqs_max */
    int32_t n_threads;     /* threads the kernels run on (a pool the model makes, the
                            * caller's thread one of them); 0: the CPUs the process
                            * may use (snug_cpu_count) */
} snug_step_shape;

/* One rank's shapes. */
typedef struct snug_model_dims {
    int32_t tp, rank;
    int32_t n_layers, hidden, head_dim;
    int32_t n_q_heads, n_kv_heads;   /* on this rank */
    int32_t q_dim, kv_dim, qkv_dim;  /* n_q_heads * head_dim, n_kv_heads * head_dim, q + 2 kv */
    int32_t intermediate;            /* MLP width on this rank */
    int32_t vocab_rows;              /* logits per row on this rank (padded) */
    int32_t vocab_begin, vocab_len;  /* the real vocabulary rows this rank holds */
    int32_t n_rope_tables;           /* 1, or 2 where sliding layers rotate with a base of their
                                      * own (the arena holds a table of angles for each) */
    int32_t n_window_layers;         /* layers that attend through a window (their keys and
                                      * values may be a cache group of their own) */
} snug_model_dims;

/* Fills *dims for rank `rank` of tp. Fails as snug_params_build does (a tp
 * that does not divide the model, naming the ones that do). */
snug_status snug_model_dims_make(const snug_model_config *cfg, int32_t tp, int32_t rank,
                                 snug_model_dims *dims, snug_error *err);

/* The exact bytes the activation arena of a model with these dims takes for
 * steps up to shape (every buffer, rounded to 64 bytes, plus the allocator's
 * charge for the block: what snug_mem reports). Threads: shape->n_threads,
 * which must be > 0 here. 0 when a shape field is out of range or the size
 * overflows. Pure. */
size_t snug_model_activation_bytes(const snug_model_dims *dims, const snug_step_shape *shape);

/* Flops (2 a multiply-add) of the matrix products of a step of n_tokens
 * tokens through n_layers layers with logits_rows rows of logits, on the
 * rank of dims: the projections and the MLP, and the lm_head per row of
 * logits (attention's products, which grow with the context, not
 * counted). Pure. */
double snug_model_step_flops(const snug_model_dims *dims, int64_t n_tokens, int32_t n_layers,
                             int64_t logits_rows);

/* Sums a buffer over the tensor-parallel ranks, in place (an all-reduce);
 * what the dist module provides. Returns false when it failed. */
typedef bool (*snug_allreduce_fn)(float *buf, int64_t n, void *ctx);

typedef struct snug_model_opts {
    snug_step_shape shape;
    int isa;                     /* a snug_isa, or -1: $SNUG_ISA when set, else the best
                                  * the CPU has */
    snug_bf16_choice bf16;       /* the GEMM instruction of bf16 weights: AUTO (0) measures
                                  * the candidates at creation, FMA / DP pin one
                                  * (SNUG_UNSUPPORTED where the ISA lacks it) */
    snug_allreduce_fn allreduce; /* required when tp > 1 */
    void *allreduce_ctx;
    snug_pool *pool;             /* the threads to run on, borrowed (shape.n_threads of them):
                                  * another model's that never steps at the same time (a
                                  * draft model's); NULL: the model makes its own */
    int64_t max_model_len;       /* the longest sequence the model will run (0: the config's
                                  * max_position_embeddings): LongRoPE's long factors are
                                  * used when it exceeds original_max_position_embeddings,
                                  * its short ones otherwise (llama.cpp's rule, by context) */
} snug_model_opts;

typedef struct snug_model snug_model;

/* The instruction set a model made with snug_model_opts.isa = isa runs
 * its kernels on: isa itself, or for -1 $SNUG_ISA when set, else the best
 * the CPU has. Fails with SNUG_INVALID for a $SNUG_ISA that names none.
 * (Whether the CPU has it is snug_kernels_init's to say.) */
snug_status snug_model_isa_resolve(int isa, snug_isa *out, snug_error *err);

/* Makes a model over loaded weights w (borrowed: they must outlive the
 * model) with the configuration they were loaded for, and allocates its
 * activation arena. Fails with SNUG_UNSUPPORTED for a rope scaling the
 * forward does not implement (dynamic, yarn: named) or an ISA the CPU
 * lacks, SNUG_INVALID for a bad shape, SNUG_NOMEM; then nothing is held. */
snug_status snug_model_create(const snug_model_config *cfg, const snug_weights *w,
                              const snug_model_opts *opts, snug_model **out, snug_error *err);

/* Frees the model and its arena; NULL is ignored. */
void snug_model_free(snug_model *m);

/* The model's dims, kernels' ISA and step shape (threads resolved). */
const snug_model_dims *snug_model_get_dims(const snug_model *m);
snug_isa snug_model_isa(const snug_model *m);

/* The model's kernel table: its ISA, the bf16 instruction chosen and what
 * the calibration measured. Valid while m lives. */
const snug_kernels *snug_model_kernels(const snug_model *m);

/* The pool of shape.n_threads threads every step of m runs on (the caller
 * of snug_model_forward is its thread 0): for other work between steps
 * (making the KV cache resident, prefaulting the threads' stacks). Valid
 * while m lives; never from inside a step. */
snug_pool *snug_model_pool(const snug_model *m);
const snug_step_shape *snug_model_step_shape(const snug_model *m);

/* Which logits a sequence of a step wants: rows of the vocabulary, or one
 * row that holds (in its first hidden floats) the final norm's output
 * pooled for an embedding. A step's rows come in sequence order, every
 * vocabulary row first, then every pooled row. */
typedef enum snug_logits_mode {
    SNUG_LOGITS_NONE = 0,   /* a prefill chunk that is not the prompt's last */
    SNUG_LOGITS_LAST = 1,   /* the last token's row: the next token's distribution */
    SNUG_LOGITS_ALL = 2,    /* one row per token of the step (prompt log-probabilities, tests) */
    SNUG_LOGITS_POOL_LAST = 3,  /* the last token's normed hidden state */
    SNUG_LOGITS_POOL_FIRST = 4, /* the step's first token's */
    SNUG_LOGITS_POOL_SUM = 5    /* the sum of every token's of the step */
} snug_logits_mode;

/* Whether mode asks for a pooled hidden state rather than logits. */
static inline bool snug_logits_pooled(snug_logits_mode mode) { return mode >= SNUG_LOGITS_POOL_LAST; }

/* One sequence's part of a step: n_tokens consecutive tokens at positions
 * pos0 .. pos0 + n_tokens - 1, whose keys and values go into (and whose
 * attention reads) the blocks of block_table, which must cover position
 * pos0 + n_tokens - 1 (checked, with the ids of the blocks that cover it).
 * Positions before pos0 must already be in the cache. The sequences of one
 * step must not share a block they write into (prefix sharing is read-only). */
typedef struct snug_step_seq {
    int32_t n_tokens;
    int32_t pos0;
    const int32_t *block_table; /* [n_blocks] ids of kv's blocks */
    int32_t n_blocks;
    snug_logits_mode logits;
    const int32_t *window_table; /* with kv->window: [n_window_blocks] ids of its blocks, in
                                  * position order as block_table; the blocks wholly before
                                  * the window of the step's first token may be -1 (given
                                  * back); NULL otherwise */
    int32_t n_window_blocks;
} snug_step_seq;

/* Rows of the vocabulary that q's part of a step asks for, each one a row
 * the lm_head runs on every rank (pooled rows run none): its n_tokens for
 * SNUG_LOGITS_ALL, 1 for LAST, else 0. */
static inline int32_t snug_step_seq_vocab_rows(const snug_step_seq *q)
{
    return q->logits == SNUG_LOGITS_ALL ? q->n_tokens : q->logits == SNUG_LOGITS_LAST;
}

typedef struct snug_step {
    const int32_t *tokens;     /* [n_tokens]: each sequence's tokens, in sequence order */
    int32_t n_tokens;
    const snug_step_seq *seqs; /* [n_seqs] */
    int32_t n_seqs;
    int32_t n_layers;          /* the first n_layers layers only (the memory plan's profile
                                * step: the same sizes and code paths, a fraction of the
                                * time), whose cache may then be one group of those layers
                                * alone; 0: all, as every real step */
} snug_step;

/* Runs one step: writes the step's keys and values into kv and computes
 * the logits asked for, *n_rows rows of dims.vocab_rows floats at *logits
 * (in sequence order; rows beyond this rank's real vocabulary are 0). The
 * rows live in the arena and are valid until the next step. Allocates
 * nothing. Fails with SNUG_INVALID (a step larger than the model's shape,
 * token ids outside the vocabulary, counts that do not add up, a cache of
 * another shape: the message says which) before anything is written, or
 * SNUG_INTERNAL when an all-reduce failed. */
snug_status snug_model_forward(snug_model *m, snug_kvcache *kv, const snug_step *step,
                               const float **logits, int32_t *n_rows, snug_error *err);

/* A classifier's scores (config n_labels > 0): its score head times
 * hidden (the final norm's output of a sequence's last token, hidden
 * floats) into scores (n_labels). On the thread that runs m's steps,
 * between steps. Fails with SNUG_INVALID for a model that is no
 * classifier. */
snug_status snug_model_classify(snug_model *m, const float *hidden, float *scores, snug_error *err);

#endif /* SNUG_MODEL_H */
