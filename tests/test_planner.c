/*
 * test_planner.c: the memory lifecycle on the bundled stories260K: the
 * activation arena and the serving state equal their predictions, the
 * budget is divided to the block (less than one block left over, the
 * allocator's total then exactly W + A + S + KV), loading transients never
 * reach the plan (a 512 MiB staging buffer changes neither A nor S nor U
 * by more than noise), budgets that are too small fail with what would fit,
 * and every failure, allocation failures included, leaves nothing held.
 */
#include "test.h"

#include "base/mem.h"
#include "engine/engine.h"
#include "engine/planner_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const MODEL = "models/stories260K";

/* Under AddressSanitizer the process's resident memory holds the shadow and
 * the quarantine of freed blocks, which grow from run to run: what is
 * measured from it (U) is then no stable figure, and checks of it are off. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_IS_MEANINGFUL 0
#else
#define RSS_IS_MEANINGFUL 1
#endif

/* The budget of the plans here: 64 MiB, or 96 under AddressSanitizer, whose
 * shadow and quarantine alone are ~45 MiB of the untracked part (U): 64
 * left nothing for the KV cache on some machines. */
#define BUDGET_BYTES (RSS_IS_MEANINGFUL ? 64u << 20 : 96u << 20)

static snug_planner_opts base_opts(void)
{
    return (snug_planner_opts){.budget = {.memory_bytes = BUDGET_BYTES}, .max_model_len = 512,
                               .max_num_seqs = 256, .n_threads = 2, .isa = -1};
}

static size_t cur_of(snug_mem_cat c)
{
    size_t cur = 0;
    snug_mem_status(c, &cur, NULL, false);
    return cur;
}

static void test_plan_exact(void)
{
    snug_error err = {0};
    snug_planner_opts o = base_opts();
    snug_planned *p = NULL;
    CHECK_OK(snug_planner_open(MODEL, &o, &p, &err), &err);
    if (!p) return;
    const snug_plan_report *r = &p->report;
    size_t a = snug_model_activation_bytes(snug_model_get_dims(p->model), snug_model_step_shape(p->model));
    CHECK(r->activations == a, "activations: %zu measured, %zu predicted", r->activations, a);
    size_t s = snug_serving_bytes(&p->serving.shape);
    CHECK(r->serving_block == s && s > 0, "serving state: %zu measured, %zu predicted", r->serving_block, s);
    CHECK(r->weights == r->load.weights_held && r->weights >= 1040128, "weights %zu", r->weights);
    /* the code was made resident before the baseline: the C library alone is over 1 MiB */
    CHECK(r->code_bytes > (1u << 20), "code made resident: %zu bytes", r->code_bytes);
    if (RSS_IS_MEANINGFUL)
        CHECK(r->baseline_rss > r->code_bytes / 2, "baseline RSS %zu with %zu of code",
              r->baseline_rss, r->code_bytes);
    CHECK(r->kv.limited_by == SNUG_KV_LIMIT_BUDGET, "64 MiB decides: %s", snug_kv_limit_name(r->kv.limited_by));
    /* S at the plan, then the block pool made for the blocks it gave, as predicted */
    CHECK(snug_mem_block_bytes(p->pool.block) == r->kv.pool_held &&
          r->kv.pool_held == snug_block_pool_bytes(r->kv.blocks, r->sizes.block_size) &&
          r->serving_state == r->sizes.serving_state + r->kv.pool_held,
          "block pool: %zu held, %zu predicted", snug_mem_block_bytes(p->pool.block), r->kv.pool_held);
    size_t left = r->sizes.budget - r->weights - r->activations - r->sizes.serving_state -
                  r->sizes.untracked - r->sizes.reserve;
    size_t one_more = snug_plan_cache_bytes(&r->sizes, r->kv.blocks + 1) -
                      snug_plan_cache_bytes(&r->sizes, r->kv.blocks);
    CHECK(r->kv.left_bytes == left && left - r->kv.kv_held - r->kv.pool_held < one_more,
          "left %zu, kv %zu, pool %zu: %zu over, a block costs %zu", left, r->kv.kv_held,
          r->kv.pool_held, left - r->kv.kv_held - r->kv.pool_held, one_more);
    CHECK(r->kv_held == r->kv.kv_held && p->kv.n_blocks == r->kv.blocks &&
          p->pool.n_free == r->kv.blocks, "the cache made is the one planned: %zu, %d blocks",
          r->kv_held, p->kv.n_blocks);
    /* what the allocator holds now is the plan, to the byte */
    CHECK(cur_of(SNUG_MEM_TOTAL) == r->weights + r->activations + r->serving_state + r->kv_held,
          "total %zu, plan %zu", cur_of(SNUG_MEM_TOTAL),
          r->weights + r->activations + r->serving_state + r->kv_held);
    CHECK(cur_of(SNUG_MEM_TOTAL) + r->sizes.untracked <= r->sizes.budget &&
          snug_mem_capacity() == r->capacity && r->capacity == r->sizes.budget - r->sizes.untracked,
          "capacity %zu", snug_mem_capacity());
    /* nothing beyond the plan can be had now */
    CHECK(snug_mem_alloc(SNUG_MEM_OTHER, r->sizes.block_bytes * 2, NULL) == NULL,
          "an allocation past the plan is refused");
    CHECK(r->profile.n_tokens == 2048 && r->profile.n_seqs == 256,
          "the profile step: %d tokens over %d", r->profile.n_tokens, r->profile.n_seqs);
    size_t rss = 0;
    CHECK_OK(snug_proc_rss_exact(&rss, &err), &err);
    if (RSS_IS_MEANINGFUL)
        CHECK(rss <= r->sizes.budget, "resident set %zu over the budget %zu", rss, r->sizes.budget);
    printf("  plan: %lld blocks; untracked %zu; resident %zu of the budget %zu\n",
           (long long)r->kv.blocks, r->sizes.untracked, rss, r->sizes.budget);
    snug_planner_close(p);
    CHECK(snug_mem_capacity() == SIZE_MAX, "closing lifts the capacity");
}

/* A draft model (speculative decoding: the bundled model drafting for
 * itself): its weights join W, its arena A, and its cache has the cache's
 * blocks beside them, each block costing both; the budget is still divided
 * to the block and the allocator holds exactly W + A + S + KV; the same
 * budget gives fewer blocks than without one, at most half of what is left
 * over in blocks. A draft whose
 * head the cache's dtype cannot hold is refused, naming it. */
static void test_plan_draft(void)
{
    snug_error err = {0};
    snug_planner_opts o = base_opts();
    size_t rss = 0;
    if (!RSS_IS_MEANINGFUL && snug_proc_rss_exact(&rss, NULL) == SNUG_OK) /* the shadow and quarantine grown */
        o.budget.memory_bytes = rss + BUDGET_BYTES;                    /* by the tests before: above them */
    snug_planned *alone = NULL, *p = NULL;
    CHECK_OK(snug_planner_open(MODEL, &o, &alone, &err), &err);
    int64_t blocks_alone = alone ? alone->report.kv.blocks : 0;
    snug_planner_close(alone);
    o.draft_dir = MODEL;
    o.spec_tokens = 4;
    CHECK_OK(snug_planner_open(MODEL, &o, &p, &err), &err);
    if (!p) return;
    const snug_plan_report *r = &p->report;
    CHECK(p->dmodel && r->draft_weights == r->load.weights_held && r->weights == 2 * r->load.weights_held,
          "weights %zu: the model's %zu and the draft's %zu", r->weights, r->load.weights_held, r->draft_weights);
    size_t a = snug_model_activation_bytes(snug_model_get_dims(p->model), snug_model_step_shape(p->model)) +
               snug_model_activation_bytes(snug_model_get_dims(p->dmodel), snug_model_step_shape(p->dmodel));
    CHECK(r->activations == a, "activations: %zu measured, %zu predicted (both arenas)", r->activations, a);
    CHECK(snug_model_step_shape(p->model)->n_logits_max == 256 + 16 * 4,
          "rows of logits: %d (a row a sequence, 4 drafts' for 16)", snug_model_step_shape(p->model)->n_logits_max);
    CHECK(r->sizes.draft_block_bytes == r->sizes.block_bytes && p->dkv.n_blocks == r->kv.blocks &&
              r->kv_held == r->kv.kv_held && cur_of(SNUG_MEM_KV) == r->kv_held,
          "caches: %d and %d blocks, %zu charged, %zu planned", p->kv.n_blocks, p->dkv.n_blocks, cur_of(SNUG_MEM_KV),
          r->kv.kv_held);
    size_t one_more = snug_plan_cache_bytes(&r->sizes, r->kv.blocks + 1) - snug_plan_cache_bytes(&r->sizes, r->kv.blocks);
    CHECK(r->kv.left_bytes - r->kv.kv_held - r->kv.pool_held < one_more,
          "%zu left over, a block costs %zu", r->kv.left_bytes - r->kv.kv_held - r->kv.pool_held, one_more);
    CHECK(cur_of(SNUG_MEM_TOTAL) == r->weights + r->activations + r->serving_state + r->kv_held,
          "total %zu, plan %zu", cur_of(SNUG_MEM_TOTAL), r->weights + r->activations + r->serving_state + r->kv_held);
    CHECK(r->kv.blocks < blocks_alone && (size_t)r->kv.blocks <= r->kv.left_bytes / (2 * r->sizes.block_bytes),
          "%lld blocks with the draft, %lld without, %zu bytes left", (long long)r->kv.blocks, (long long)blocks_alone,
          r->kv.left_bytes);
    printf("  with a draft model: %lld blocks (%lld without), a block %zu + %zu bytes\n", (long long)r->kv.blocks,
           (long long)blocks_alone, r->sizes.block_bytes, r->sizes.draft_block_bytes);
    snug_planner_close(p);
    o.kv_dtype = SNUG_DTYPE_Q8_0; /* the bundled model's head of 8 is no block of 32: refused (the model's first) */
    p = NULL;
    CHECK_FAILS(snug_planner_open(MODEL, &o, &p, &err), &err, SNUG_INVALID, "multiple of its blocks of 32");
    o.kv_dtype = SNUG_DTYPE_NONE;
    o.max_model_len = 4096; /* past the draft's positions: its own model has 512 too, so the model refuses */
    CHECK_FAILS(snug_planner_open(MODEL, &o, &p, &err), &err, SNUG_INVALID, "positions");
    CHECK(snug_mem_capacity() == SIZE_MAX && cur_of(SNUG_MEM_TOTAL) == 0, "refusals hold nothing: %zu",
          cur_of(SNUG_MEM_TOTAL));
}

/* A model of windowed and full layers (tests/data/arch's Gemma 3: a window
 * of 8 on five layers of six): the plan gives the windowed layers a cache
 * of their own of exactly the blocks the scheduler's bound asks for (the
 * windows of as many sequences as the rest holds max_model_len ones), its
 * bytes and its pool's a fixed part of the plan, and the full layer every
 * byte left, to the block; the allocator then holds exactly W + A + S + KV
 * + the window group's; the cache of every layer (--swa-full) holds fewer
 * tokens, as many as the plan said it would. */
static void test_plan_window_group(void)
{
    snug_error err = {0};
    snug_planner_opts o = base_opts();
    o.max_num_seqs = 8, o.max_model_len = 2048;
    snug_planned *p = NULL;
    const char *gemma = "tests/data/arch/f7-gemma3-Q8_0.gguf";
    CHECK_OK(snug_planner_open(gemma, &o, &p, &err), &err);
    if (!p) return;
    const snug_plan_report *r = &p->report;
    /* the windows of the most sequences (at most 8) for which the full layer's cache, planned
     * beside them, holds as many max_model_len ones (rounded up): the plan for one more window
     * would hold fewer (its cache computed as the plan computes it, from the same sizes) */
    int64_t seqs = r->window_seqs;
    CHECK(seqs >= 1 && seqs <= 8 && (r->kv.tokens + 2047) / 2048 >= seqs, "the windows of %lld sequences beside %lld "
          "tokens", (long long)seqs, (long long)r->kv.tokens);
    if (seqs < 8) {
        snug_plan_sizes more = r->sizes;
        int64_t more_blocks = snug_sched_window_blocks((int32_t)seqs + 1, 2048, 16, 8);
        more.window_cache = snug_mem_held_bytes((size_t)more_blocks * snug_kv_block_bytes(&p->wkv.shape)) +
                            snug_block_pool_bytes(more_blocks, 16);
        more.window_seqs = (int32_t)seqs + 1;
        snug_kv_plan kv;
        CHECK(snug_plan_kv(&more, &kv, NULL) != SNUG_OK || (kv.tokens + 2047) / 2048 < seqs + 1,
              "the windows of %lld sequences would fit beside %lld tokens", (long long)seqs + 1, (long long)kv.tokens);
    }
    int64_t want = snug_sched_window_blocks((int32_t)seqs, 2048, 16, 8); /* seqs x (1 + 2) + 128 */
    size_t wbytes = (size_t)want * snug_kv_block_bytes(&p->wkv.shape);
    CHECK(r->window == 8 && r->window_layers == 5 && r->window_blocks == want &&
              p->kv.window == &p->wkv && p->wkv.n_blocks == want && p->wkv.shape.n_layers == 5 &&
              p->kv.shape.n_layers == 1,
          "window group: window %d, %d layers, %lld blocks (bound %lld)", r->window, r->window_layers,
          (long long)r->window_blocks, (long long)want);
    CHECK(r->window_held == snug_mem_block_bytes(p->wkv.data) + snug_mem_block_bytes(p->wpool.block) &&
              r->window_held == snug_mem_held_bytes(wbytes) + snug_block_pool_bytes(want, 16) &&
              r->sizes.window_cache == r->window_held,
          "window group's bytes: %zu held, %zu predicted", r->window_held,
          snug_mem_held_bytes(wbytes) + snug_block_pool_bytes(want, 16));
    size_t left = r->sizes.budget - r->weights - r->activations - r->sizes.serving_state - r->sizes.untracked -
                  r->sizes.reserve - r->window_held;
    size_t one_more = snug_plan_cache_bytes(&r->sizes, r->kv.blocks + 1) - snug_plan_cache_bytes(&r->sizes, r->kv.blocks);
    bool by_budget = r->kv.limited_by == SNUG_KV_LIMIT_BUDGET;
    CHECK(r->kv.left_bytes == left && (!by_budget || left - r->kv.kv_held - r->kv.pool_held < one_more),
          "the full layer's cache: left %zu, kv %zu, pool %zu, a block %zu (limited by %s)", left, r->kv.kv_held,
          r->kv.pool_held, one_more, snug_kv_limit_name(r->kv.limited_by));
    CHECK(cur_of(SNUG_MEM_TOTAL) == r->weights + r->activations + r->serving_state + r->kv_held + r->window_held,
          "total %zu, plan %zu", cur_of(SNUG_MEM_TOTAL),
          r->weights + r->activations + r->serving_state + r->kv_held + r->window_held);
    int64_t tokens = r->kv.tokens, one_group = r->kv.one_group_tokens;
    size_t u1 = r->sizes.untracked, s1 = r->sizes.serving_state;
    printf("  window group: %lld blocks (%zu bytes); %lld tokens, %lld with one group of every layer (limited by %s)\n",
           (long long)r->window_blocks, r->window_held, (long long)tokens, (long long)one_group,
           snug_kv_limit_name(r->kv.limited_by));
    snug_planner_close(p);
    /* the same budget as one group of every layer */
    o.swa_full = true;
    CHECK_OK(snug_planner_open(gemma, &o, &p, &err), &err);
    if (!p) return;
    /* as the plan said, but for what the second plan measured otherwise: its U (the process's
     * resident memory: under AddressSanitizer it moves by megabytes), its serving state (no
     * window tables), each worth what a block of every layer costs */
    const snug_plan_sizes *z = &p->report.sizes;
    size_t moved = (z->untracked > u1 ? z->untracked - u1 : u1 - z->untracked) +
                   (z->serving_state > s1 ? z->serving_state - s1 : s1 - z->serving_state);
    int64_t slack = 16 * (int64_t)(moved / z->block_bytes + 2);
    CHECK(p->report.window_layers == 0 && !p->kv.window && p->kv.shape.n_layers == 6 &&
              llabs(p->report.kv.tokens - one_group) <= slack &&
              (tokens > p->report.kv.tokens || p->report.kv.limited_by != SNUG_KV_LIMIT_BUDGET),
          "--swa-full: %lld tokens, the plan said %lld (within %lld: U and S moved %zu bytes)",
          (long long)p->report.kv.tokens, (long long)one_group, (long long)slack, moved);
    snug_planner_close(p);
}

/* A model whose every layer is windowed (tests/data/mistral-window8: a
 * window of 8 on each of 5): the window group is the cache, and the other
 * one holds positions only (no layer, no bytes, blocks for the window
 * group's sequences at max_model_len: their tables and the prefix cache);
 * the allocator holds exactly W + A + S + the window group's. With
 * --kv-cache-memory, the window group gets the most sequences whose
 * windows fit in it, to the sequence; below one sequence's, the plan
 * fails saying what would do. */
static void test_plan_all_windowed(void)
{
    snug_error err = {0};
    snug_planner_opts o = base_opts();
    o.max_num_seqs = 8, o.max_model_len = 256, o.max_num_batched_tokens = 64;
    snug_planned *p = NULL;
    const char *dir = "tests/data/mistral-window8";
    CHECK_OK(snug_planner_open(dir, &o, &p, &err), &err);
    if (!p) return;
    const snug_plan_report *r = &p->report;
    int64_t want = snug_sched_window_blocks(8, 64, 16, 8);
    CHECK(r->window == 8 && r->window_layers == 5 && r->window_seqs == 8 && r->window_blocks == want &&
              p->wkv.n_blocks == want && p->wkv.shape.n_layers == 5 && p->kv.shape.n_layers == 0 && !p->kv.data &&
              r->kv.kv_held == 0 && r->kv_held == 0 && r->kv.blocks == 8 * 16 && p->pool.n_blocks == 8 * 16 &&
              r->kv.limited_by == SNUG_KV_LIMIT_MAX_NUM_SEQS,
          "every layer windowed: %d layers, %d sequences, %lld window blocks (bound %lld), %lld position blocks "
          "(%d layers), kv held %zu, limited by %s", r->window_layers, r->window_seqs, (long long)r->window_blocks,
          (long long)want, (long long)r->kv.blocks, p->kv.shape.n_layers, r->kv_held,
          snug_kv_limit_name(r->kv.limited_by));
    CHECK(cur_of(SNUG_MEM_TOTAL) == r->weights + r->activations + r->serving_state + r->window_held &&
              r->window_held == snug_mem_block_bytes(p->wkv.data) + snug_mem_block_bytes(p->wpool.block),
          "total %zu, plan %zu", cur_of(SNUG_MEM_TOTAL), r->weights + r->activations + r->serving_state + r->window_held);
    size_t block = snug_kv_block_bytes(&p->wkv.shape);
    snug_planner_close(p);
    /* the windows of 3 sequences, and not 4, in --kv-cache-memory */
    o.kv_cache_memory = (size_t)snug_sched_window_blocks(4, 64, 16, 8) * block - 1;
    CHECK_OK(snug_planner_open(dir, &o, &p, &err), &err);
    if (!p) return;
    CHECK(p->report.window_seqs == 3 && p->report.kv.blocks == 3 * 16 &&
              p->report.kv.limited_by == SNUG_KV_LIMIT_KV_CACHE_MEMORY,
          "--kv-cache-memory: the windows of %d sequences (limited by %s)", p->report.window_seqs,
          snug_kv_limit_name(p->report.kv.limited_by));
    snug_planner_close(p);
    o.kv_cache_memory = (size_t)snug_sched_window_blocks(1, 64, 16, 8) * block - 1;
    CHECK_FAILS(snug_planner_open(dir, &o, &p, &err), &err, SNUG_NOMEM, "is below the window of one sequence");
}

static void test_staging_never_reaches_plan(void)
{
    snug_error err = {0};
    snug_planner_opts o = base_opts();
    /* stories260K is f32: loaded as bf16, every tensor goes through staging */
    o.weight_dtype = SNUG_DTYPE_BF16;
    snug_planned *p = NULL, *q = NULL;
    CHECK_OK(snug_planner_open(MODEL, &o, &p, &err), &err);
    if (!p) return;
    snug_plan_report a = p->report;
    snug_planner_close(p);
    o.staging_bytes = 512u << 20;
    CHECK_OK(snug_planner_open(MODEL, &o, &q, &err), &err);
    if (!q) return;
    snug_plan_report b = q->report;
    CHECK(a.load.staging_bytes > 0 && b.load.staging_bytes >= a.load.staging_bytes,
          "staging %zu / %zu", a.load.staging_bytes, b.load.staging_bytes);
    snug_planner_close(q);
    /* A exactly; S as the allocator counts it, usable sizes: a small block
     * that malloc cuts from a free chunk may get up to 16 bytes more than
     * its size class, depending on what the first plan freed (staging,
     * megabytes here, would show far beyond that) */
    /* (S at the plan: the block pool made after it is sized for the blocks, which
     * follow U) */
    size_t sa = a.sizes.serving_state, sb = b.sizes.serving_state;
    size_t ds = sa > sb ? sa - sb : sb - sa;
    CHECK(a.activations == b.activations && ds <= 64, "A %zu / %zu, S %zu / %zu",
          a.activations, b.activations, sa, sb);
    CHECK(a.serving_state == sa + a.kv.pool_held && b.serving_state == sb + b.kv.pool_held &&
          a.kv.pool_held == snug_block_pool_bytes(a.kv.blocks, a.sizes.block_size) &&
          b.kv.pool_held == snug_block_pool_bytes(b.kv.blocks, b.sizes.block_size),
          "the block pools: %zu for %lld blocks, %zu for %lld", a.kv.pool_held,
          (long long)a.kv.blocks, b.kv.pool_held, (long long)b.kv.blocks);
    if (!RSS_IS_MEANINGFUL) return;
    size_t du = a.sizes.untracked > b.sizes.untracked ? a.sizes.untracked - b.sizes.untracked
                                                      : b.sizes.untracked - a.sizes.untracked;
    CHECK(du < (1u << 20), "untracked %zu / %zu: staging does not reach it", a.sizes.untracked,
          b.sizes.untracked);
    int64_t db = a.kv.blocks > b.kv.blocks ? a.kv.blocks - b.kv.blocks : b.kv.blocks - a.kv.blocks;
    CHECK((size_t)db * a.sizes.block_bytes <= du + a.sizes.block_bytes,
          "blocks %lld / %lld differ only by what U does", (long long)a.kv.blocks, (long long)b.kv.blocks);
}

/* Nothing limits the memory (no --memory or fraction, no cgroup limit: a
 * fake /proc with 8 GB available): the KV cache gets the default cap, not
 * most of the machine; a fraction given, or --kv-cache-memory, lifts it. */
static void test_default_cap(void)
{
    char root[4096], path[4200];
    test_tmpdir(root, sizeof root);
    snprintf(path, sizeof path, "%s/proc", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/proc/meminfo", root);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("MemTotal: 16000000 kB\nMemAvailable: 8000000 kB\n", f);
        fclose(f);
    }
    snug_error err = {0};
    snug_planner_opts o = base_opts();
    o.budget = (snug_budget_opts){.root = root, .rss_bytes = 1u << 20};
    o.kv_cache_default_cap = 1u << 20; /* 102 blocks of 10 KiB, 3 sequences of 512 */
    snug_planned *p = NULL;
    CHECK_OK(snug_planner_open(MODEL, &o, &p, &err), &err);
    if (p) {
        const snug_plan_report *r = &p->report;
        CHECK(r->budget.source == SNUG_BUDGET_MEMINFO && r->kv.limited_by == SNUG_KV_LIMIT_DEFAULT_CAP &&
              r->kv.blocks == (int64_t)((1u << 20) / r->sizes.block_bytes),
              "%s budget of %zu: %lld blocks, limited by %s", snug_budget_source_name(r->budget.source),
              r->budget.bytes, (long long)r->kv.blocks, snug_kv_limit_name(r->kv.limited_by));
        snug_planner_close(p);
    }
    o.budget.fraction = 0.5; /* the user chose: no cap */
    CHECK_OK(snug_planner_open(MODEL, &o, &p, &err), &err);
    if (p) {
        CHECK(p->report.kv.limited_by == SNUG_KV_LIMIT_MAX_NUM_SEQS, "with a fraction: %s",
              snug_kv_limit_name(p->report.kv.limited_by));
        snug_planner_close(p);
    }
    test_rmtree(root);
}

static void test_max_num_seqs_limits(void)
{
    snug_error err = {0};
    snug_planner_opts o = base_opts();
    o.max_num_seqs = 4;
    o.max_num_batched_tokens = 64;
    snug_planned *p = NULL;
    CHECK_OK(snug_planner_open(MODEL, &o, &p, &err), &err);
    if (!p) return;
    CHECK(p->report.kv.blocks == 4 * 32 && p->report.kv.limited_by == SNUG_KV_LIMIT_MAX_NUM_SEQS,
          "4 sequences of 512: %lld blocks (%s)", (long long)p->report.kv.blocks,
          snug_kv_limit_name(p->report.kv.limited_by));
    snug_planner_close(p);
}

static void test_too_small(void)
{
    snug_error err = {0};
    size_t base = cur_of(SNUG_MEM_TOTAL);
    snug_planner_opts o = base_opts();
    snug_planned *p = NULL;
    o.budget.memory_bytes = 512u << 10;
    CHECK_FAILS(snug_planner_open(MODEL, &o, &p, &err), &err, SNUG_NOMEM, "over the budget");
    CHECK(cur_of(SNUG_MEM_TOTAL) == base && snug_mem_capacity() == SIZE_MAX, "nothing held");
    o.budget.memory_bytes = 16u << 20;
    CHECK_FAILS(snug_planner_open(MODEL, &o, &p, &err), &err, SNUG_NOMEM, "leaving nothing for the KV cache");
    /* what the rest takes, from a plan that fits; then room for about half a
     * sequence: with 256 sequences, not even for the profile step's scratch
     * cache (one block each), which the loading capacity refuses before the
     * process goes past the budget; with 4, the plan says what fits */
    if (!RSS_IS_MEANINGFUL) return;
    for (int seqs = 256; seqs >= 4; seqs /= 64) {
        o = base_opts();
        o.max_num_seqs = seqs;
        o.max_num_batched_tokens = seqs == 4 ? 64 : 0;
        CHECK_OK(snug_planner_open(MODEL, &o, &p, &err), &err);
        if (!p) return;
        size_t fixed = p->report.sizes.budget - p->report.kv.left_bytes;
        size_t block = p->report.sizes.block_bytes;
        snug_planner_close(p);
        o.budget.memory_bytes = fixed + 16 * block;
        if (seqs == 256) {
            CHECK_FAILS(snug_planner_open(MODEL, &o, &p, &err), &err, SNUG_NOMEM,
                        "cannot hold the profile step: its scratch KV cache of 256 blocks");
            CHECK(strstr(err.msg, "would, or a smaller --max-num-seqs"), "%s", err.msg);
        } else {
            CHECK_FAILS(snug_planner_open(MODEL, &o, &p, &err), &err, SNUG_NOMEM,
                        "but one sequence of max_model_len 512 needs 32: the largest "
                        "--max-model-len that fits is ");
            CHECK(strstr(err.msg, "would fit 512"), "%s", err.msg);
        }
        CHECK(cur_of(SNUG_MEM_TOTAL) == base && snug_mem_capacity() == SIZE_MAX,
              "nothing held after %s", err.msg);
    }
    o = base_opts();
    o.max_model_len = 1 << 20;
    CHECK_FAILS(snug_planner_open(MODEL, &o, &p, &err), &err, SNUG_INVALID, "the model has 512 positions");
    o = base_opts();
    o.max_num_batched_tokens = 8;
    CHECK_FAILS(snug_planner_open(MODEL, &o, &p, &err), &err, SNUG_INVALID, "must be at least --max-num-seqs");
    CHECK_FAILS(snug_planner_open("tests/data/no-such-model", &o, &p, &err), &err, SNUG_IO, "no-such-model");
}


enum { STRESS_SEQS = 300, STRESS_LEN = 256 };

static uint64_t stress_rng(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* What a stress run through the engine did. */
typedef struct stress_stats {
    int64_t finished, preemptions, steps, generated;
    int32_t most_running, most_waiting;
    int32_t blocks_used;            /* after the run */
} stress_stats;

/* Runs the requests q[0 .. n) through an engine planned with o (greedy,
 * each to its max_tokens), keeping every consumer up; *x says what
 * happened. The engine is closed before it returns. */
static snug_status stress_run(const snug_engine_opts *o, snug_request *q, int n,
                              snug_plan_report *plan, stress_stats *x, int64_t *allocs,
                              size_t *peak, size_t *rss, snug_error *err)
{
    snug_engine *e = NULL;
    snug_status st = snug_engine_open(MODEL, o, &e, err);
    if (st != SNUG_OK) return st;
    *plan = *snug_engine_plan(e);
    *x = (stress_stats){0};
    int64_t allocs0 = snug_mem_alloc_count();
    snug_mem_status(SNUG_MEM_TOTAL, NULL, NULL, true);
    int submitted = 0, done = 0;
    char text[4096];
    while (done < n && st == SNUG_OK) {
        for (; submitted < n; submitted++) { /* the queue is the bound: retry when full */
            snug_status sst = snug_engine_submit(e, &q[submitted], err);
            if (sst == SNUG_BUSY) break;
            st = sst;
            if (st != SNUG_OK) break;
        }
        for (int i = 0; i < submitted; i++) {
            snug_output out;
            while (snug_engine_next(e, &q[i], &out, text, sizeof text)) {}
        }
        snug_engine_counters c;
        snug_engine_counters_get(e, &c);
        x->most_running = SNUG_MAX(x->most_running, c.running);
        x->most_waiting = SNUG_MAX(x->most_waiting, c.waiting);
        done = 0;
        for (int i = 0; i < submitted; i++) done += snug_engine_done(e, &q[i]);
        if (done < n && submitted > 0) snug_engine_wait(e, &q[submitted - 1], 0.01);
    }
    snug_mem_status(SNUG_MEM_TOTAL, NULL, peak, false);
    if (st == SNUG_OK) st = snug_proc_rss_exact(rss, err);
    *allocs = snug_mem_alloc_count() - allocs0;
    snug_engine_counters c;
    snug_engine_counters_get(e, &c);
    x->finished = c.requests_finished;
    x->preemptions = c.preemptions;
    x->steps = c.steps;
    x->generated = c.generation_tokens;
    x->blocks_used = c.kv.used;
    for (int i = 0; i < submitted; i++) snug_engine_release(e, &q[i]);
    snug_engine_close(e);
    return st;
}

/* After the plan, hundreds of sequences of random lengths up to
 * max_model_len, more than the blocks hold at once (sequences wait and are
 * preempted), through the engine and its scheduler: the step loop
 * allocates nothing, the allocator's total stays within C - U, every block
 * comes back, and the process holds no page more than the plan said. */
static void test_stress_never_allocates(void)
{
    snug_error err = {0};
    static snug_request q[STRESS_SEQS];
    static int32_t prompts[STRESS_SEQS][STRESS_LEN];
    uint64_t rng = 42;
    for (int i = 0; i < STRESS_SEQS; i++) {
        int32_t n_prompt = 1 + (int32_t)(stress_rng(&rng) % (STRESS_LEN - 1));
        memset(&q[i], 0, sizeof q[i]);
        for (int32_t k = 0; k < n_prompt; k++) prompts[i][k] = (int32_t)((k * 17 + i) % 512);
        q[i].prompt = prompts[i];
        q[i].n_prompt = n_prompt;
        snug_sampling_params_default(&q[i].sampling);
        q[i].sampling.temperature = 0;
        snug_stop_params_default(&q[i].stop);
        q[i].stop.max_tokens = 1 + (int32_t)(stress_rng(&rng) % (uint64_t)(STRESS_LEN - n_prompt));
        q[i].stop.ignore_eos = true;
        q[i].n = 1;
    }
    snug_engine_opts o = {.plan = base_opts(), .max_queue = STRESS_SEQS};
    o.plan.max_model_len = STRESS_LEN;
    o.plan.max_num_seqs = 16;
    o.plan.max_num_batched_tokens = 256;
    snug_plan_report r;
    stress_stats x;
    int64_t allocs = 0;
    size_t peak = 0, rss = 0;
    /* a first plan tells what the rest takes; its run brings this test's own
     * code in (what is measured next is snug's, not the test's) */
    CHECK_OK(stress_run(&o, q, STRESS_SEQS, &r, &x, &allocs, &peak, &rss, &err), &err);
    /* a cache of 60 blocks: far fewer than 16 sequences of 256 can use (a
     * budget's leftover would hang on U, which moves by hundreds of KiB from
     * plan to plan in one process: the threads of the last one still exiting) */
    o.plan.kv_cache_memory = 60 * r.sizes.block_bytes;
    CHECK_OK(stress_run(&o, q, STRESS_SEQS, &r, &x, &allocs, &peak, &rss, &err), &err);
    CHECK(r.kv.limited_by == SNUG_KV_LIMIT_KV_CACHE_MEMORY && r.kv.blocks == 60,
          "%lld blocks (%s)", (long long)r.kv.blocks, snug_kv_limit_name(r.kv.limited_by));
    CHECK(x.finished == STRESS_SEQS && x.preemptions + x.most_waiting > 0 && x.most_running > 1,
          "%lld of %d finished in %lld steps; %lld preemptions, at most %d waiting, %d running",
          (long long)x.finished, STRESS_SEQS, (long long)x.steps, (long long)x.preemptions,
          x.most_waiting, x.most_running);
    CHECK(allocs == 0, "the step loop made %lld allocations", (long long)allocs);
    CHECK(peak <= r.sizes.budget - r.sizes.untracked, "allocator peak %zu, budget %zu less U %zu",
          peak, r.sizes.budget, r.sizes.untracked);
    CHECK(x.blocks_used == 0, "every block back: %d of %lld still used", x.blocks_used,
          (long long)r.kv.blocks);
    /* the run freed nothing: the resident set only grew, so its end, read to
     * the page, is its peak (the kernel's high-water mark can be pages off);
     * the plan: W + A + S + U + R and the cache it made */
    size_t planned = r.sizes.budget - r.kv.left_bytes + r.kv.kv_held + r.kv.pool_held;
    CHECK(planned <= r.sizes.budget, "%zu planned, over the budget %zu", planned, r.sizes.budget);
    if (RSS_IS_MEANINGFUL)
        CHECK(rss <= planned, "resident set %zu over the plan's %zu by %zu", rss, planned,
              rss - planned);
    printf("  stress: %d sequences in %lld steps over %lld blocks (%lld preemptions, at most %d "
           "running); resident %zu of the plan's %zu\n", STRESS_SEQS, (long long)x.steps,
           (long long)r.kv.blocks, (long long)x.preemptions, x.most_running, rss, planned);
}

static snug_status open_op(void *ctx, snug_error *err)
{
    snug_planned **p = ctx;
    snug_planner_opts o = base_opts();
    o.budget.memory_bytes = 1u << 30; /* far above what the plan takes, whatever U does */
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 64;
    o.n_threads = 1;
    return snug_planner_open(MODEL, &o, p, err);
}

static void close_op(void *ctx) { snug_planner_close(*(snug_planned **)ctx); }

/* Counts the "resident" and "resident-failed" phases. */
static void count_resident(void *ctx, const char *phase, double seconds)
{
    (void)seconds;
    int *n = ctx;
    n[0] += strcmp(phase, "resident") == 0;
    n[1] += strcmp(phase, "resident-failed") == 0;
}

/* With populate_after_ready, the plan charges the whole cache but makes none
 * of it resident; the pool hands out nothing; each populate_next makes one
 * more group of blocks resident, and the pool takes them, until the cache
 * is resident, said once. The resident set grows by the cache's bytes over
 * the calls: within a 2 MiB huge page (the block's header is written when
 * it is mapped, and a huge page there holds the first blocks too). */
static void test_populate_after_ready(void)
{
    enum { GROUP = 400 };
    snug_error err = {0};
    snug_planner_opts o = base_opts();
    o.budget.memory_bytes = (size_t)160 << 20; /* room under AddressSanitizer's shadow too */
    o.max_num_seqs = 64;
    o.kv_cache_memory = (size_t)32 << 20;
    o.populate_after_ready = true;
    o.populate_group_blocks = GROUP;
    int said[2] = {0, 0};
    o.on_phase = count_resident;
    o.on_phase_ctx = said;
    snug_planned *p = NULL;
    CHECK_OK(snug_planner_open(MODEL, &o, &p, &err), &err);
    if (!p) return;
    const snug_plan_report *r = &p->report;
    int32_t n = p->kv.n_blocks;
    CHECK(r->populated_after_ready && p->kv_resident == 0 && p->pool.n_ready == 0 &&
          p->pool.n_free == 0 && snug_planner_populating(p),
          "after the plan: after ready %d, resident %d, ready %d, free %d", r->populated_after_ready,
          p->kv_resident, p->pool.n_ready, p->pool.n_free);
    CHECK(r->kv_held == cur_of(SNUG_MEM_KV) && n > 4 * GROUP && r->kv_held > (size_t)16 << 20,
          "the whole cache is charged: %zu of %zu (%d blocks)", r->kv_held, cur_of(SNUG_MEM_KV), n);
    size_t before = 0, after = 0;
    if (RSS_IS_MEANINGFUL) CHECK_OK(snug_proc_rss_exact(&before, &err), &err);
    int32_t calls = 0;
    while (snug_planner_populating(p) && calls <= n) {
        int32_t from = p->kv_resident;
        CHECK_OK(snug_planner_populate_next(p, &err), &err);
        CHECK(p->kv_resident - from == SNUG_MIN(GROUP, n - from),
              "call %d: %d blocks made resident from %d", calls, p->kv_resident - from, from);
        snug_block_pool_set_ready(&p->pool, p->kv_resident);
        CHECK(p->pool.n_free == p->kv_resident && snug_block_pool_check(&p->pool, &err),
              "call %d: %d free of %d ready: %s", calls, p->pool.n_free, p->kv_resident, err.msg);
        calls++;
    }
    if (RSS_IS_MEANINGFUL) CHECK_OK(snug_proc_rss_exact(&after, &err), &err);
    CHECK(p->kv_resident == n && calls == (n + GROUP - 1) / GROUP && said[0] == 1 && said[1] == 0,
          "%d of %d blocks in %d calls; resident said %d, failed %d", p->kv_resident, n, calls,
          said[0], said[1]);
    if (RSS_IS_MEANINGFUL)
        CHECK(after - before + ((size_t)2 << 20) >= r->kv_held && after - before <= r->kv_held,
              "populating grew the resident set %zu for a cache of %zu", after - before, r->kv_held);
    CHECK_OK(snug_planner_populate_next(p, &err), &err); /* nothing left: a no-op */
    CHECK(said[0] == 1 && p->kv_resident == n, "a call after the end said resident again");
    snug_planner_close(p);
}

static void test_oom(void)
{
    snug_planned *p = NULL;
    int n = test_oom_loop("memory plan", open_op, close_op, &p, 400);
    CHECK(n > 20, "the plan makes %d allocations, each failing cleanly", n);
    CHECK(snug_mem_capacity() == SIZE_MAX, "the capacity is back after failures");
}

int main(void)
{
    RUN(test_plan_exact);
    RUN(test_plan_window_group);
    RUN(test_plan_all_windowed);
    RUN(test_staging_never_reaches_plan);
    RUN(test_default_cap);
    RUN(test_max_num_seqs_limits);
    RUN(test_too_small);
    RUN(test_stress_never_allocates);
    RUN(test_populate_after_ready);
    RUN(test_oom);
    RUN(test_plan_draft); /* last: under AddressSanitizer its two models' quarantine grows U for what follows */
    return test_summary();
}
