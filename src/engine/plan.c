/*
 * plan.c: the KV cache's share of the budget, in whole blocks (plan.h).
 */
#include "plan.h"

#include "base/mem.h"
#include "blocks.h"

#include <stdio.h>

/* "1.50 GiB (1,610,612,736 bytes)" into buf (at least 80 bytes). */
static const char *both(size_t bytes, char *buf)
{
    char h[32], n[32];
    snprintf(buf, 80, "%s (%s bytes)", snug_fmt_bytes(bytes, h), snug_fmt_int((int64_t)bytes, n));
    return buf;
}

const char *snug_kv_limit_name(snug_kv_limit limit)
{
    switch (limit) {
    case SNUG_KV_LIMIT_BUDGET: return "budget";
    case SNUG_KV_LIMIT_MAX_NUM_SEQS: return "max_num_seqs";
    case SNUG_KV_LIMIT_KV_CACHE_MEMORY: return "kv_cache_memory";
    case SNUG_KV_LIMIT_OTHER_RANK: return "other_rank";
    case SNUG_KV_LIMIT_DEFAULT_CAP: return "default_cap";
    }
    return "unknown";
}

/* The message for a cache of `have` blocks where one sequence needs
 * `need`: the max_model_len that fits, and the budget that fits the one
 * asked for (fixed, what the rest takes, plus such a cache). `what` names
 * who decided the size. */
static snug_status too_few_blocks(const snug_plan_sizes *in, size_t fixed, int64_t have,
                                  int64_t need, const char *what, snug_error *err)
{
    char a[80], b[80];
    size_t fit = 0, cost = snug_plan_cache_bytes(in, need);
    bool fits = cost != SIZE_MAX && snug_add_size(fixed, cost, &fit);
    int64_t len = have * in->block_size;
    if (have == 0)
        return snug_errorf(err, SNUG_NOMEM,
                           "%s leaves no KV cache block of %s; one sequence of max_model_len "
                           "%lld needs %lld blocks: a budget of %s would fit it", what,
                           both(in->block_bytes, a), (long long)in->max_model_len,
                           (long long)need, fits ? both(fit, b) : "(too large)");
    return snug_errorf(err, SNUG_NOMEM,
                       "%s leaves %lld KV cache blocks (%lld tokens), but one sequence of "
                       "max_model_len %lld needs %lld: the largest --max-model-len that fits is "
                       "%lld, and a budget of %s would fit %lld", what, (long long)have,
                       (long long)len, (long long)in->max_model_len, (long long)need,
                       (long long)len, fits ? both(fit, b) : "(too large)",
                       (long long)in->max_model_len);
}

/* W + A + S + U + R, SIZE_MAX when the sum overflows. */
static size_t fixed_bytes(const snug_plan_sizes *in)
{
    size_t fixed = in->weights;
    const size_t parts[] = {in->activations, in->serving_state, in->untracked, in->reserve, in->window_cache};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(parts); i++)
        if (!snug_add_size(fixed, parts[i], &fixed)) return SIZE_MAX;
    return fixed;
}

/* A block's bytes in every cache: the model's and a draft model's. */
static size_t per_block(const snug_plan_sizes *in) { return in->block_bytes + in->draft_block_bytes; }

/* What the allocator charges caches of `blocks` blocks (the model's and a
 * draft's, an allocation each); SIZE_MAX on overflow. */
static size_t caches_held(const snug_plan_sizes *in, int64_t blocks)
{
    size_t held = 0;
    const size_t block[] = {in->block_bytes, in->draft_block_bytes};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(block); i++) {
        size_t bytes, h;
        if (blocks < 0 || !snug_mul_size((size_t)blocks, block[i], &bytes)) return SIZE_MAX;
        h = bytes > 0 ? snug_mem_held_bytes(bytes) : 0; /* (a cache of positions only: none) */
        if ((h == 0 && bytes > 0) || !snug_add_size(held, h, &held)) return SIZE_MAX;
    }
    return held;
}

size_t snug_plan_cache_bytes(const snug_plan_sizes *in, int64_t blocks)
{
    size_t held = caches_held(in, blocks), pool = snug_block_pool_bytes(blocks, in->block_size), sum;
    if (held == SIZE_MAX || pool == 0 || !snug_add_size(held, pool, &sum)) return SIZE_MAX;
    return sum;
}

/* The most blocks whose cache (its one allocation and the pool's) fits in
 * left bytes. */
static int64_t blocks_in(const snug_plan_sizes *in, size_t left)
{
    int64_t n = (int64_t)SNUG_MIN(left / per_block(in), (size_t)INT32_MAX);
    /* the headers, page rounding and the pool come out of the same bytes */
    while (n > 0 && snug_plan_cache_bytes(in, n) > left) n--;
    return n;
}

int64_t snug_plan_budget_blocks(const snug_plan_sizes *in)
{
    size_t fixed = fixed_bytes(in);
    if (in->block_bytes == 0 || fixed >= in->budget) return 0;
    return blocks_in(in, in->budget - fixed);
}

snug_status snug_plan_kv(const snug_plan_sizes *in, snug_kv_plan *out, snug_error *err)
{
    char a[80], b[80], c[80], d[80];
    bool positions_only = in->block_bytes == 0 && in->window_cache > 0 && in->window_seqs > 0;
    if ((in->block_bytes == 0 && !positions_only) || in->block_size <= 0 || in->max_model_len <= 0 ||
        in->max_num_seqs <= 0)
        return snug_errorf(err, SNUG_INVALID, "memory plan: block_bytes, block_size, "
                           "max_model_len and max_num_seqs must be positive");
    snug_kv_plan p = {0};
    p.blocks_per_seq = (in->max_model_len + in->block_size - 1) / in->block_size;
    if (p.blocks_per_seq > INT32_MAX)
        return snug_errorf(err, SNUG_INVALID, "memory plan: max_model_len %lld is too large",
                           (long long)in->max_model_len);
    if (in->weights > in->budget)
        return snug_errorf(err, SNUG_NOMEM, "the weights, %s, are over the budget of %s by %s",
                           both(in->weights, a), both(in->budget, b),
                           both(in->weights - in->budget, c));
    size_t fixed = fixed_bytes(in);
    if (fixed > in->budget) {
        size_t fit = 0, cost = snug_plan_cache_bytes(in, p.blocks_per_seq);
        bool ok = cost != SIZE_MAX && snug_add_size(fixed, cost, &fit);
        return snug_errorf(err, SNUG_NOMEM,
                           "the budget of %s is smaller than weights %zu + activations %zu + "
                           "serving state %zu + untracked %zu + reserve %zu + windowed layers' "
                           "cache %zu bytes = %s, leaving nothing for the KV cache; one sequence "
                           "of max_model_len %lld needs %lld blocks: a budget of %s would fit it",
                           both(in->budget, a), in->weights, in->activations, in->serving_state,
                           in->untracked, in->reserve, in->window_cache, both(fixed, b), (long long)in->max_model_len,
                           (long long)p.blocks_per_seq, ok ? both(fit, c) : "(too large)");
    }
    p.left_bytes = in->budget - fixed;

    /* what any request could reach: max_num_seqs sequences at max_model_len */
    int64_t useful = p.blocks_per_seq * (int64_t)in->max_num_seqs;
    if (positions_only) { /* the window group's sequences, each to max_model_len */
        p.blocks = p.blocks_per_seq * (int64_t)in->window_seqs;
        size_t cost = snug_plan_cache_bytes(in, p.blocks), fit = 0;
        bool fits = cost != SIZE_MAX && snug_add_size(fixed, cost, &fit);
        if (p.blocks > INT32_MAX || cost > p.left_bytes)
            return snug_errorf(err, SNUG_NOMEM,
                               "the budget of %s leaves %s after the windowed layers' cache; the "
                               "positions of %d sequences of max_model_len %lld (%lld blocks) need "
                               "%s: a budget of %s would fit them", both(in->budget, a),
                               both(p.left_bytes, b), in->window_seqs, (long long)in->max_model_len,
                               (long long)p.blocks, both(cost, c), fits ? both(fit, d) : "(too large)");
        p.limited_by = in->window_seqs < in->max_num_seqs ? SNUG_KV_LIMIT_BUDGET : SNUG_KV_LIMIT_MAX_NUM_SEQS;
        useful = INT64_MAX;
    } else if (in->kv_cache_memory) {
        int64_t fixed_blocks =
            (int64_t)SNUG_MIN(in->kv_cache_memory / per_block(in), (size_t)INT32_MAX);
        if (fixed_blocks < p.blocks_per_seq)
            return too_few_blocks(in, fixed, fixed_blocks, p.blocks_per_seq, "--kv-cache-memory",
                                  err);
        size_t cost = snug_plan_cache_bytes(in, fixed_blocks), fit = 0;
        bool fits = cost != SIZE_MAX && snug_add_size(fixed, cost, &fit);
        if (cost > p.left_bytes)
            return snug_errorf(err, SNUG_NOMEM,
                               "--kv-cache-memory %s does not fit: the budget leaves %s for "
                               "the KV cache (at most %lld blocks); a budget of %s would fit it",
                               both(in->kv_cache_memory, a), both(p.left_bytes, b),
                               (long long)blocks_in(in, p.left_bytes),
                               fits ? both(fit, c) : "(too large)");
        p.blocks = fixed_blocks;
        p.limited_by = SNUG_KV_LIMIT_KV_CACHE_MEMORY;
    } else {
        p.blocks = blocks_in(in, p.left_bytes);
        if (p.blocks < p.blocks_per_seq)
            return too_few_blocks(in, fixed, p.blocks, p.blocks_per_seq, "the budget", err);
        p.limited_by = SNUG_KV_LIMIT_BUDGET;
        int64_t cap = in->kv_cache_cap ? SNUG_MAX((int64_t)(in->kv_cache_cap / per_block(in)),
                                                  p.blocks_per_seq) : INT64_MAX;
        if (p.blocks > cap) {
            p.blocks = cap;
            p.limited_by = SNUG_KV_LIMIT_DEFAULT_CAP;
        }
    }
    if (p.blocks > useful) {
        p.blocks = useful;
        p.limited_by = SNUG_KV_LIMIT_MAX_NUM_SEQS;
    }
    *out = p;
    snug_plan_kv_cap(in, p.blocks, out);
    return SNUG_OK;
}

void snug_plan_kv_cap(const snug_plan_sizes *in, int64_t blocks, snug_kv_plan *kv)
{
    if (blocks < kv->blocks) {
        kv->blocks = blocks;
        kv->limited_by = SNUG_KV_LIMIT_OTHER_RANK;
    }
    kv->kv_bytes = (size_t)kv->blocks * per_block(in);
    kv->kv_held = caches_held(in, kv->blocks);
    kv->pool_held = snug_block_pool_bytes(kv->blocks, in->block_size);
    kv->tokens = kv->blocks * in->block_size;
    kv->max_concurrency = (double)kv->tokens / (double)in->max_model_len;
    kv->one_group_tokens = kv->tokens;
    if (in->window_cache > 0 && in->full_block_bytes > 0) { /* the same bytes as one group */
        snug_plan_sizes one = *in;
        one.block_bytes = in->full_block_bytes;
        one.window_cache = 0;
        size_t left = kv->left_bytes + in->window_cache;
        int64_t n = blocks_in(&one, left);
        if (in->kv_cache_memory) n = SNUG_MIN(n, (int64_t)(in->kv_cache_memory / in->full_block_bytes));
        if (in->kv_cache_cap) n = SNUG_MIN(n, SNUG_MAX((int64_t)(in->kv_cache_cap / in->full_block_bytes), kv->blocks_per_seq));
        n = SNUG_MIN(n, kv->blocks_per_seq * (int64_t)in->max_num_seqs);
        kv->one_group_tokens = n * in->block_size;
    }
}
