/*
 * test_plan.c: the memory plan's arithmetic (engine/plan.h): blocks ==
 * floor((C - W - A - S - U - R) / block_bytes) when the budget decides
 * (less than one block left over), the max_num_seqs cap, --kv-cache-memory,
 * and every too-small budget failing with the numbers that would work.
 */
#include "test.h"

#include "base/mem.h"
#include "engine/blocks.h"
#include "engine/plan.h"

#include <string.h>

/* stories260K's cache at bf16: 2 x 5 layers x 16 positions x 4 heads x 8 x 2 bytes */
enum { BLOCK_BYTES = 2 * 5 * 16 * 4 * 8 * 2 };

/* What a cache of n blocks costs the budget: the allocator's charge for it
 * (its header, page rounding) and for the block pool of n blocks. */
static size_t held(int64_t n)
{
    return snug_mem_held_bytes((size_t)n * BLOCK_BYTES) + snug_block_pool_bytes(n, 16);
}

static snug_plan_sizes base_sizes(void)
{
    return (snug_plan_sizes){
        .budget = 64u << 20, .weights = 1040128, .activations = 3000000, .serving_state = 200000,
        .untracked = 30000000, .reserve = 0, .block_bytes = BLOCK_BYTES, .block_size = 16,
        .max_model_len = 512, .max_num_seqs = 256,
    };
}

static void test_budget_decides(void)
{
    snug_plan_sizes in = base_sizes();
    snug_kv_plan p;
    snug_error err = {0};
    CHECK_OK(snug_plan_kv(&in, &p, &err), &err);
    size_t left = (64u << 20) - 1040128 - 3000000 - 200000 - 30000000;
    CHECK(p.left_bytes == left, "left %zu, want %zu", p.left_bytes, left);
    /* the most blocks whose one allocation fits what is left */
    CHECK(held(p.blocks) <= left && held(p.blocks + 1) > left && p.limited_by == SNUG_KV_LIMIT_BUDGET,
          "blocks %lld (%s)", (long long)p.blocks, snug_kv_limit_name(p.limited_by));
    size_t pool = snug_block_pool_bytes(p.blocks, 16);
    CHECK(p.blocks >= (int64_t)((left - pool) / BLOCK_BYTES) - 1,
          "the header costs at most one block besides the pool (%zu bytes)", pool);
    CHECK(p.kv_bytes == (size_t)p.blocks * BLOCK_BYTES && p.pool_held == pool &&
          p.kv_held + p.pool_held == held(p.blocks),
          "the cache %zu and its pool %zu", p.kv_held, p.pool_held);
    CHECK(p.tokens == p.blocks * 16 && p.blocks_per_seq == 32, "tokens %lld, per seq %lld",
          (long long)p.tokens, (long long)p.blocks_per_seq);
    CHECK(p.max_concurrency == (double)p.tokens / 512.0, "concurrency %g", p.max_concurrency);

    /* the reserve comes off the cache, to the block */
    in.reserve = 10 * BLOCK_BYTES + 1;
    snug_kv_plan q;
    CHECK_OK(snug_plan_kv(&in, &q, &err), &err);
    CHECK(held(q.blocks) <= q.left_bytes && held(q.blocks + 1) > q.left_bytes &&
          q.blocks < p.blocks - 9 && q.left_bytes == left - 10 * BLOCK_BYTES - 1,
          "reserve: %lld blocks, %zu left", (long long)q.blocks, q.left_bytes);

    /* a max_model_len that is not a multiple of the block size rounds up */
    in = base_sizes();
    in.max_model_len = 17;
    CHECK_OK(snug_plan_kv(&in, &q, &err), &err);
    CHECK(q.blocks_per_seq == 2, "17 positions take 2 blocks, got %lld", (long long)q.blocks_per_seq);
}

static void test_max_num_seqs_caps(void)
{
    snug_plan_sizes in = base_sizes();
    in.max_num_seqs = 4;
    snug_kv_plan p;
    snug_error err = {0};
    CHECK_OK(snug_plan_kv(&in, &p, &err), &err);
    CHECK(p.blocks == 4 * 32 && p.limited_by == SNUG_KV_LIMIT_MAX_NUM_SEQS &&
          p.max_concurrency == 4.0,
          "4 sequences of 512 use 128 blocks: got %lld (%s)", (long long)p.blocks,
          snug_kv_limit_name(p.limited_by));
    /* exactly enough budget for the cap: the budget still decides */
    in.budget = in.weights + in.activations + in.serving_state + in.untracked + held(128);
    CHECK_OK(snug_plan_kv(&in, &p, &err), &err);
    CHECK(p.blocks == 128 && p.limited_by == SNUG_KV_LIMIT_BUDGET, "%lld (%s)",
          (long long)p.blocks, snug_kv_limit_name(p.limited_by));
}

static void test_kv_cache_memory(void)
{
    snug_plan_sizes in = base_sizes();
    in.kv_cache_memory = 100 * BLOCK_BYTES + BLOCK_BYTES / 2;
    snug_kv_plan p;
    snug_error err = {0};
    CHECK_OK(snug_plan_kv(&in, &p, &err), &err);
    CHECK(p.blocks == 100 && p.limited_by == SNUG_KV_LIMIT_KV_CACHE_MEMORY, "%lld (%s)",
          (long long)p.blocks, snug_kv_limit_name(p.limited_by));
    /* more than max_num_seqs can use: capped */
    in.max_num_seqs = 2;
    CHECK_OK(snug_plan_kv(&in, &p, &err), &err);
    CHECK(p.blocks == 64 && p.limited_by == SNUG_KV_LIMIT_MAX_NUM_SEQS, "%lld (%s)",
          (long long)p.blocks, snug_kv_limit_name(p.limited_by));
    /* more than the budget leaves */
    in = base_sizes();
    in.kv_cache_memory = 64u << 20;
    CHECK_FAILS(snug_plan_kv(&in, &p, &err), &err, SNUG_NOMEM,
                "--kv-cache-memory 64.00 MiB (67,108,864 bytes) does not fit: the budget leaves");
    /* fewer blocks than one sequence */
    in.kv_cache_memory = 31 * BLOCK_BYTES;
    CHECK_FAILS(snug_plan_kv(&in, &p, &err), &err, SNUG_NOMEM,
                "--kv-cache-memory leaves 31 KV cache blocks (496 tokens), but one sequence of "
                "max_model_len 512 needs 32: the largest --max-model-len that fits is 496");
}

/* The default cap where nothing limits the memory: at most cap bytes of
 * blocks, at least one max_model_len sequence, never more than the budget. */
static void test_default_cap(void)
{
    snug_plan_sizes in = base_sizes();
    snug_kv_plan p;
    snug_error err = {0};
    in.kv_cache_cap = 100 * BLOCK_BYTES + 5;
    CHECK_OK(snug_plan_kv(&in, &p, &err), &err);
    CHECK(p.blocks == 100 && p.limited_by == SNUG_KV_LIMIT_DEFAULT_CAP &&
          strcmp(snug_kv_limit_name(p.limited_by), "default_cap") == 0, "%lld blocks (%s)",
          (long long)p.blocks, snug_kv_limit_name(p.limited_by));
    in.kv_cache_cap = 3 * BLOCK_BYTES; /* less than one sequence of 32 blocks */
    CHECK_OK(snug_plan_kv(&in, &p, &err), &err);
    CHECK(p.blocks == 32 && p.limited_by == SNUG_KV_LIMIT_DEFAULT_CAP, "one sequence: %lld (%s)",
          (long long)p.blocks, snug_kv_limit_name(p.limited_by));
    in.kv_cache_cap = (size_t)1 << 40; /* above the budget: the budget decides */
    CHECK_OK(snug_plan_kv(&in, &p, &err), &err);
    CHECK(p.limited_by == SNUG_KV_LIMIT_BUDGET, "%s", snug_kv_limit_name(p.limited_by));
}

static void test_too_small(void)
{
    snug_plan_sizes in = base_sizes();
    snug_kv_plan p;
    snug_error err = {0};
    /* the weights alone */
    in.budget = 1000000;
    CHECK_FAILS(snug_plan_kv(&in, &p, &err), &err, SNUG_NOMEM,
                "the weights, 1015.75 KiB (1,040,128 bytes), are over the budget of 976.56 KiB "
                "(1,000,000 bytes) by 39.19 KiB (40,128 bytes)");
    /* nothing left after the rest */
    in.budget = 30000000;
    CHECK_FAILS(snug_plan_kv(&in, &p, &err), &err, SNUG_NOMEM, "leaving nothing for the KV cache");
    size_t fixed = 1040128 + 3000000 + 200000 + 30000000;
    char want[128], n[32];
    snprintf(want, sizeof want, "(%s bytes) would fit it",
             snug_fmt_int((int64_t)(fixed + held(32)), n));
    CHECK(strstr(err.msg, want), "message \"%s\" lacks \"%s\"", err.msg, want);
    /* room for 10 blocks where a sequence needs 32: which length fits, which budget fits */
    in.budget = fixed + held(10) + 5;
    CHECK_FAILS(snug_plan_kv(&in, &p, &err), &err, SNUG_NOMEM,
                "the budget leaves 10 KV cache blocks (160 tokens), but one sequence of "
                "max_model_len 512 needs 32: the largest --max-model-len that fits is 160");
    snprintf(want, sizeof want, "(%s bytes) would fit 512",
             snug_fmt_int((int64_t)(fixed + held(32)), n));
    CHECK(strstr(err.msg, want), "message \"%s\" lacks \"%s\"", err.msg, want);
    /* less than one block */
    in.budget = fixed + held(1) - 1;
    CHECK_FAILS(snug_plan_kv(&in, &p, &err), &err, SNUG_NOMEM,
                "the budget leaves no KV cache block of 10.00 KiB (10,240 bytes)");
    /* exactly one sequence fits */
    in.budget = fixed + held(32);
    CHECK_OK(snug_plan_kv(&in, &p, &err), &err);
    CHECK(p.blocks == 32 && p.left_bytes == p.kv_held + p.pool_held, "%lld blocks", (long long)p.blocks);
    /* bad shapes */
    in.block_bytes = 0;
    CHECK_FAILS(snug_plan_kv(&in, &p, &err), &err, SNUG_INVALID, "must be positive");
    in = base_sizes();
    in.max_model_len = (int64_t)1 << 40;
    CHECK_FAILS(snug_plan_kv(&in, &p, &err), &err, SNUG_INVALID, "is too large");
    /* sums that overflow are too large, not wrapped */
    in = base_sizes();
    in.budget = SIZE_MAX - 1;
    in.weights = 1;
    in.untracked = SIZE_MAX;
    CHECK_FAILS(snug_plan_kv(&in, &p, &err), &err, SNUG_NOMEM, "leaving nothing for the KV cache");
}

int main(void)
{
    RUN(test_budget_decides);
    RUN(test_max_num_seqs_caps);
    RUN(test_kv_cache_memory);
    RUN(test_default_cap);
    RUN(test_too_small);
    return test_summary();
}
