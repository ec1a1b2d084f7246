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
#include "plan_report.h"

/* Made by the planner; their headers are the engine's to include. */
typedef struct snug_comm snug_comm;
typedef struct snug_stepper snug_stepper;
typedef struct snug_tokenizer snug_tokenizer;
typedef struct snug_model snug_model;
typedef struct snug_model_config snug_model_config;
typedef struct snug_kvcache snug_kvcache;
typedef struct snug_block_pool snug_block_pool;
typedef struct snug_serving_state snug_serving_state;

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
    const char *draft_dir;         /* a draft model for speculative decoding (--draft-model), or
                                    * NULL: loaded after the weights (in W), its arena made
                                    * with the model's (in A, on the model's threads), its KV
                                    * cache the same blocks as the cache's, beside them (a block
                                    * costs both). Its vocabulary must be the model's (tokens'
                                    * bytes compared), its positions reach max_model_len; one
                                    * rank only */
    int32_t spec_tokens;           /* drafted tokens a decode may verify (speculative decoding):
                                    * the largest step's rows of logits hold them for up to
                                    * SNUG_SPEC_SEQS_ROWS sequences (spec.h); 0: none */
    int32_t n_threads;             /* 0: the CPUs the process may use (snug_cpu_count: the
                                    * affinity mask capped by the cgroup's CPU quota); with
                                    * several ranks, snug_comm_default_threads() */
    int isa;                       /* -1: the best (or $SNUG_ISA) */
    snug_bf16_choice bf16;         /* the bf16 GEMM instruction (--bf16-matmul; 0: measured) */
    size_t staging_bytes;          /* the loader's; 0: its default */
    snug_dtype weight_dtype;       /* SNUG_DTYPE_NONE: the checkpoint's */
    snug_dtype quant_dtype;        /* float matrices quantized to it while loading
                                    * (snug_load_opts.quant); SNUG_DTYPE_NONE: not */
    snug_comm *comm;               /* the tensor-parallel ranks (borrowed); NULL: one process */
    bool no_prefix_caching;        /* the block pool neither registers nor finds blocks */
    bool swa_full;                 /* windowed layers keep every position as the others do
                                    * (llama.cpp's --swa-full); else, where a model has both
                                    * kinds of layer, theirs is a cache group holding only
                                    * their windows (kvcache.h) */
    size_t kv_cache_default_cap;   /* the KV cache's cap when nothing limits the memory
                                    * (plan.h kv_cache_cap); 0: SNUG_KV_CACHE_DEFAULT_CAP */
    bool populate_after_ready;     /* the KV cache reserved and charged, but made resident
                                    * after the plan by snug_planner_populate_next, a group
                                    * of blocks at a time, as serving begins: ready sooner.
                                    * One rank only: with several, made resident first */
    int32_t populate_group_blocks; /* blocks per group; 0: 16 MiB's worth */
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

typedef struct snug_planned snug_planned; /* planner.c's (planner_impl.h) */

/* What the plan made, handed to the engine that serves on it; each valid
 * until snug_planner_close. */
typedef struct snug_plan_parts {
    const snug_plan_report *report;
    const snug_model_config *config; /* the checkpoint's */
    const snug_tokenizer *tok;     /* NULL when the directory has none */
    snug_model *model;
    snug_serving_state *serving;   /* S: every sequence's slot, the step's buffers */
    snug_kvcache *kv;
    snug_block_pool *pool;         /* the cache's blocks (prefix caching unless turned off) */
    snug_stepper *stepper;         /* every step goes through it (one rank or many) */
    snug_block_pool *wpool;        /* the window group's blocks (kv->window's); NULL: none */
    int32_t window;                /* that group's window */
    snug_model *draft;             /* the draft model (opts.draft_dir), or NULL, and ... */
    snug_kvcache *draft_kv;        /* ... its cache: the blocks of kv, the same ids; NULL: none */
} snug_plan_parts;

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

/* What the plan found (valid until snug_planner_close). */
const snug_plan_report *snug_planner_report(const snug_planned *p);

/* What p made, into *out. */
void snug_planner_parts(snug_planned *p, snug_plan_parts *out);

/* Blocks 0 .. this - 1 of the KV cache are resident (all of them unless
 * opts.populate_after_ready, then as snug_planner_populate_next goes). */
int32_t snug_planner_kv_resident(const snug_planned *p);

/* Frees everything and lifts the capacity; NULL is ignored. */
void snug_planner_close(snug_planned *p);

#endif /* SNUG_PLANNER_H */
