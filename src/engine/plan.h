/*
 * plan.h: the memory plan's arithmetic: how many KV cache blocks the
 * budget leaves once everything else is measured.
 *
 *   KV = C - W - A - S - U - R,  blocks = floor(KV / block_bytes)
 *
 * (less the allocator's charge for the cache's one block: its header and
 * the rounding to pages, snug_mem_held_bytes; and less the block pool,
 * whose free list and prefix-cache index are sized for the blocks it gets:
 * a block costs block_bytes plus its share of the pool),
 * C the budget (budget.h), W the weights, A the activation peak of the
 * profile step, S the serving state made up front for max_num_seqs
 * sequences, U what the process holds outside the allocator, R the reserve
 * the user keeps back. The cache never gets more blocks than max_num_seqs
 * sequences of max_model_len tokens can use (memory no request can reach
 * is not taken), and with --kv-cache-memory its size is fixed instead (the
 * plan still checks that it fits). One max_model_len sequence must fit;
 * when it does not, the message says which max_model_len would and which
 * budget would. Pure: nothing here allocates or measures.
 */
#ifndef SNUG_PLAN_H
#define SNUG_PLAN_H

#include "base/common.h"

/* What decided the number of blocks. */
typedef enum snug_kv_limit {
    SNUG_KV_LIMIT_BUDGET = 0,          /* every byte the budget leaves */
    SNUG_KV_LIMIT_MAX_NUM_SEQS,        /* all that max_num_seqs x max_model_len can use */
    SNUG_KV_LIMIT_KV_CACHE_MEMORY,     /* --kv-cache-memory */
    SNUG_KV_LIMIT_OTHER_RANK,          /* a tensor-parallel rank with room for fewer */
    SNUG_KV_LIMIT_DEFAULT_CAP          /* the default for a host whose memory nobody limited */
} snug_kv_limit;

/* The measured and chosen sizes the plan divides the budget by. */
typedef struct snug_plan_sizes {
    size_t budget;            /* C */
    size_t weights;           /* W */
    size_t activations;       /* A */
    size_t serving_state;     /* S */
    size_t untracked;         /* U */
    size_t reserve;           /* R */
    size_t window_cache;      /* the window group's cache and block pool, as charged (a model
                               * whose windowed layers keep only their windows, kvcache.h):
                               * fixed by max_num_seqs, the step and the window; 0: none */
    size_t kv_cache_memory;   /* --kv-cache-memory; 0: the budget decides */
    size_t kv_cache_cap;      /* the most the budget may give the cache (its bytes, the pool
                               * aside), as long as one max_model_len sequence fits; 0: none */
    size_t block_bytes;       /* snug_kv_block_bytes of the cache's shape, > 0 (with a window
                               * group, of the other layers; 0 when every layer is windowed:
                               * the cache is then one of positions only, its pool's) */
    size_t draft_block_bytes; /* a draft model's cache beside it (speculative decoding): the
                               * same blocks of its layers, in an allocation of its own; 0:
                               * none. A block costs block_bytes + draft_block_bytes */
    size_t full_block_bytes;  /* with a window group: a block of every layer's, to say what
                               * a cache of one group would hold; 0 otherwise */
    int32_t block_size;       /* token positions per block, > 0 */
    int64_t max_model_len;    /* positions one sequence may use, > 0 */
    int32_t max_num_seqs;     /* sequences at once, > 0 */
    int32_t window_seqs;      /* every layer windowed (block_bytes 0): the sequences whose
                               * windows window_cache holds; the positions-only cache gets
                               * blocks for that many max_model_len ones */
} snug_plan_sizes;

typedef struct snug_kv_plan {
    int64_t blocks;           /* blocks the cache gets */
    size_t kv_bytes;          /* blocks x (block_bytes + draft_block_bytes) */
    size_t kv_held;           /* what the allocator charges a cache of that size (its
                               * header, rounded to pages; the draft's cache's too): what
                               * the budget pays */
    size_t pool_held;         /* what it charges the block pool of that many blocks
                               * (blocks.h: free list, reference counts, the prefix
                               * cache's hashes, LRU links and token ids); serving state */
    size_t left_bytes;        /* C - W - A - S - U - R: what the budget leaves the cache */
    int64_t tokens;           /* blocks x block_size */
    int64_t blocks_per_seq;   /* ceil(max_model_len / block_size) */
    double max_concurrency;   /* tokens / max_model_len: max_model_len sequences at once */
    snug_kv_limit limited_by;
    int64_t one_group_tokens; /* with a window group: the tokens the bytes that group and
                               * this cache take would hold as one group of every layer
                               * (the same caps applied); else tokens */
} snug_kv_plan;

/* What the profile step measured (profile.h): U and the step it ran. */
typedef struct snug_profile_result {
    int32_t n_tokens, n_seqs;     /* what the step ran */
    int32_t n_layers;             /* the largest step, through how many of the model's ... */
    int32_t model_layers;         /* ... layers */
    int64_t scratch_blocks;       /* KV blocks made for it (freed after) */
    size_t allocator_peak;        /* the allocator's total peak over the step */
    size_t rss;                   /* the resident set at its end, to the page: its peak */
    size_t hwm;                   /* the kernel's high-water mark then (approximate) */
    size_t untracked;             /* U = rss - what the allocator held then, 0 when below */
    bool hwm_was_reset;           /* false: the kernel refused, hwm counts from start */
    double seconds;
    double flops;                 /* its matrix products' (snug_model_step_flops), all passes */
} snug_profile_result;

/* Plans the KV cache. Where every layer is windowed (block_bytes 0, a
 * window_cache and window_seqs), the cache is of positions only: blocks for
 * window_seqs sequences of max_model_len, costing their pool, and
 * --kv-cache-memory and the cap are the caller's to apply to the window
 * group. Fails with SNUG_INVALID for sizes out of range, and
 * with SNUG_NOMEM when the budget is too small: the weights alone over it
 * (by how much), nothing left after W + A + S + U + R, fewer blocks than
 * one max_model_len sequence needs (the message gives the largest
 * max_model_len that fits and the budget that would fit the one asked
 * for), or a --kv-cache-memory that does not fit (what would). */
snug_status snug_plan_kv(const snug_plan_sizes *in, snug_kv_plan *out, snug_error *err);

/* Lowers a plan to blocks (at most kv->blocks: the fewest any
 * tensor-parallel rank has room for), limited by another rank when that
 * is fewer; the sizes of kv follow. Pure. */
void snug_plan_kv_cap(const snug_plan_sizes *in, int64_t blocks, snug_kv_plan *kv);

/* What a cache of blocks costs the budget: its allocation's charge plus
 * the block pool's (snug_block_pool_bytes); SIZE_MAX on overflow. Pure. */
size_t snug_plan_cache_bytes(const snug_plan_sizes *in, int64_t blocks);

/* The most blocks the budget alone leaves room for (the cache's header and
 * page rounding counted), whatever max_model_len and max_num_seqs say; 0
 * when W + A + S + U + R already take the budget or a size is 0. Pure. */
int64_t snug_plan_budget_blocks(const snug_plan_sizes *in);

/* "budget", "max_num_seqs", "kv_cache_memory", "other_rank", "default_cap";
 * never NULL. */
const char *snug_kv_limit_name(snug_kv_limit limit);

#endif /* SNUG_PLAN_H */
