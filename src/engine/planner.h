/*
 * planner.h: the memory lifecycle from start to a KV cache sized to the
 * byte (../shared/DESIGN.md, "The memory lifecycle"), for one rank:
 *
 *   baseline   the program's code made resident (snug_proc_prefault_code),
 *              then the process RSS and high-water mark
 *   budget     C (budget.h)
 *   load       the checkpoint's weights W (and the tokenizer) at their size
 *   reset      the allocator's peaks and the process high-water mark
 *   make       the activation arena for the largest step, the serving state
 *   profile    the largest step, run for real: A, U (profile.h)
 *   plan       blocks = floor((C - W - A - S - U - R) / block_bytes) (plan.h)
 *   allocate   the KV cache of exactly that many blocks, populated, once;
 *              the block pool for them (its prefix-cache index included)
 *
 * Without a max_model_len the model's own is taken, and when one sequence
 * of it does not fit, the longest that fits (a whole number of blocks), as
 * the report says. S is everything the allocator holds at the plan besides the weights and
 * the arena: the serving state's block, and what serving keeps of the rest
 * (the tokenizer, the model's tables). After the plan the allocator's
 * capacity is set to C - U - R, so nothing can take the process past C;
 * of R, the server's tracked part stays allocatable (the capacity is that
 * much higher) while the KV cache never gets it.
 *
 * With opts->comm over several ranks every rank runs the lifecycle together:
 * each loads its shard, the profile step runs on all at once through the
 * stepper (made before it, with its buffers for the largest step, so that
 * MPI's buffers for that step are in U), and the KV cache gets the fewest
 * blocks any rank has room for. After each phase the ranks agree
 * (agree.h): a failure on one rank is every rank's, with its message.
 *
 * Each phase marks the allocator's event log as it begins ("load", "reset",
 * "profile", "plan", "populate", and "ready" at the end): a caller that
 * wants the timeline starts the log before snug_planner_open.
 */
#ifndef SNUG_PLANNER_H
#define SNUG_PLANNER_H

#include "base/common.h"
#include "budget.h"
#include "dist/comm.h"
#include "dist/stepper.h"
#include "formats/checkpoint.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "model/model.h"
#include "plan.h"
#include "profile.h"
#include "serving.h"
#include "tokenizer/tokenizer.h"

enum {
    SNUG_MAX_NUM_SEQS_DEFAULT = 256,           /* as vLLM */
    SNUG_MAX_NUM_BATCHED_TOKENS_DEFAULT = 2048 /* vLLM's CPU default */
};

/* The KV cache's bytes when no limit was given and the machine sets none
 * (no cgroup limit): 4 GiB, vLLM's CPU default (VLLM_CPU_KVCACHE_SPACE). */
#define SNUG_KV_CACHE_DEFAULT_CAP ((size_t)4 << 30)

typedef struct snug_planner_opts {
    snug_budget_opts budget;
    size_t kv_cache_memory;        /* 0: the budget decides */
    size_t reserve;                /* R: the user's headroom, never allocated */
    size_t server_tracked;         /* kept from the KV cache for the server to allocate
                                    * per request (bodies, parsing, responses); part of R */
    size_t server_untracked;       /* kept for what the server holds outside the allocator
                                    * (the HTTP library's connection pools, thread stacks);
                                    * part of R, and not allocatable */
    int64_t max_model_len;         /* 0: the model's */
    int32_t max_num_seqs;          /* 0: SNUG_MAX_NUM_SEQS_DEFAULT */
    int32_t max_num_batched_tokens;/* 0: max(default, max_num_seqs) */
    int32_t block_size;            /* 0: SNUG_BLOCK_SIZE_DEFAULT */
    snug_dtype kv_dtype;           /* SNUG_DTYPE_NONE: bf16 */
    int32_t n_threads;             /* 0: snug_cpu_count() (the affinity mask capped by the
                                    * cgroup's CPU quota); with several ranks,
                                    * snug_comm_default_threads() */
    int isa;                       /* -1: the best (or $SNUG_ISA) */
    snug_bf16_choice bf16;         /* the bf16 GEMM instruction (--bf16-matmul; 0: measured) */
    size_t staging_bytes;          /* the loader's; 0: its default */
    snug_dtype weight_dtype;       /* SNUG_DTYPE_NONE: the checkpoint's */
    snug_dtype quant_dtype;        /* float matrices quantized to it while loading
                                    * (snug_load_opts.quant); SNUG_DTYPE_NONE: not */
    snug_comm *comm;               /* the tensor-parallel ranks (borrowed); NULL: one process */
    bool no_prefix_caching;        /* the block pool neither registers nor finds blocks */
    size_t kv_cache_default_cap;   /* the KV cache's cap when nothing limits the memory
                                    * (plan.h kv_cache_cap); 0: SNUG_KV_CACHE_DEFAULT_CAP */
    bool populate_after_ready;     /* the KV cache reserved and charged, but made resident
                                    * after the plan by snug_planner_populate_next, a group
                                    * of blocks at a time, as serving begins: ready sooner.
                                    * One rank only: with several, made resident first */
    int32_t populate_group_blocks; /* blocks per group; 0: 64 MiB's worth */
    /* Called as each phase begins ("load", "reset", "profile", "plan",
     * "populate" or, with populate_after_ready, "reserve", and "ready" at the end) with the seconds since the plan
     * began, on the planning thread; NULL: none. For progress lines. With
     * populate_after_ready, "resident" when the KV cache has become resident
     * (or "resident-failed" when the system would not back it all), on the
     * thread that called snug_planner_populate_next. */
    void (*on_phase)(void *ctx, const char *phase, double seconds);
    /* Called as the weights load (loader.h on_progress) with on_phase_ctx;
     * NULL: none. For a progress bar. */
    void (*on_load_progress)(void *ctx, uint64_t done, uint64_t total);
    void *on_phase_ctx;
} snug_planner_opts;

/* One rank's part of the plan, as rank 0 reports it. */
typedef struct snug_rank_plan {
    uint64_t weights_predicted;    /* the rank's parameter bytes by the table */
    uint64_t weights;              /* the bytes its parameters are laid out in */
    uint64_t load_peak;            /* the peak during its load */
    uint64_t bytes_read;           /* from the checkpoint's files */
    uint64_t activations, serving_state, untracked, kv_held;
    int64_t kv_blocks_own;         /* what its budget alone gave */
    uint64_t profile_hwm;          /* its high-water mark in the profile step */
} snug_rank_plan;

/* What the plan found, for the report. */
typedef struct snug_plan_report {
    snug_budget budget;
    snug_load_stats load;
    size_t code_bytes;             /* the program's and libraries' segments made resident */
    size_t baseline_rss;           /* at start, before loading (with that code) */
    size_t weights;                /* W: what the allocator charges the weights */
    size_t activations;            /* A: the activations' peak since the reset */
    size_t serving_state;          /* S (with the block pool, made after the plan) */
    size_t serving_block;          /* of which the serving state's own block */
    snug_profile_result profile;   /* U and the step */
    snug_plan_sizes sizes;
    snug_kv_plan kv;
    int64_t max_model_len_reduced_from; /* the model's length, when it did not fit and
                                         * max_model_len was not given; else 0 */
    snug_dtype kv_dtype;
    size_t kv_held;                /* what the allocator charges the cache */
    double populate_seconds;       /* making the cache resident (reserving it, when after
                                    * ready: snug_planned's populate_seconds has the rest) */
    bool populated_after_ready;    /* made resident by snug_planner_populate_next */
    size_t capacity;               /* set after the plan: C - U - R, plus server_tracked */
    int32_t tp, rank;              /* this rank of tp */
    int64_t kv_blocks_own;         /* what this rank's budget alone gave (before the minimum
                                    * over the ranks) */
    bool prefix_caching;           /* the block pool caches prefixes */
    snug_kernels kernels;          /* what the steps run: ISA, bf16 instruction, calibration */
    snug_dtype weight_dtype;       /* the weights' element type */
    int32_t threads;               /* the threads every step runs on */
    snug_rank_plan ranks[SNUG_TP_MAX]; /* every rank's, on rank 0 (tp > 1) */
} snug_plan_report;

/* Everything serving runs on, planned and made. */
typedef struct snug_planned {
    snug_checkpoint *ck;
    snug_weights *weights;
    snug_tokenizer *tok;           /* NULL when the directory has none */
    snug_vocab_trie *trie;         /* the tokenizer's token bytes, for constrained decoding */
    snug_model *model;
    snug_serving_state serving;
    snug_kvcache kv;
    snug_block_pool pool;          /* the cache's blocks (prefix caching unless turned off) */
    snug_stepper *stepper;         /* every step goes through it (one rank or many) */
    snug_plan_report report;
    /* the KV cache made resident after ready (opts.populate_after_ready) */
    int32_t kv_resident;           /* blocks 0 .. kv_resident - 1 are resident */
    int32_t populate_group;        /* blocks made resident per call */
    double populate_seconds;       /* spent in those calls so far */
    bool populate_failed;          /* the system would not back the next group: given up */
    snug_error populate_err;       /* then why */
    double t_start;                /* when the plan began, for on_phase */
    void (*on_phase)(void *ctx, const char *phase, double seconds); /* opts' */
    void *on_phase_ctx;
} snug_planned;

/* Runs the lifecycle for the model directory dir into *out (the caller's;
 * snug_planner_close frees it). Fails with the step's error (a bad
 * checkpoint, SNUG_NOMEM with plan.h's messages for a budget that is too
 * small, ...); then *out is NULL, nothing is held and the capacity is as
 * it was. */
snug_status snug_planner_open(const char *dir, const snug_planner_opts *opts, snug_planned **out,
                              snug_error *err);

/* True while some of the KV cache is still to be made resident (opts.
 * populate_after_ready) and the last group did not fail. */
bool snug_planner_populating(const snug_planned *p);

/* Makes the next group of the KV cache's blocks resident (a few tens of
 * MiB, on all threads), moves kv_resident past them and returns SNUG_OK;
 * the caller then lets the pool hand them out (snug_block_pool_set_ready;
 * this touches neither the pool nor anything a step reads). After the last
 * group, says "resident" through on_phase. When the system will not back a
 * group, gives up (snug_planner_populating is false from then on), says
 * "resident-failed", and returns SNUG_NOMEM with the reason, also kept in
 * populate_err: the blocks resident so far serve. Call it between steps, on
 * the thread that runs them. No-op when nothing is left. */
snug_status snug_planner_populate_next(snug_planned *p, snug_error *err);

/* Frees everything and lifts the capacity; NULL is ignored. */
void snug_planner_close(snug_planned *p);

#endif /* SNUG_PLANNER_H */
