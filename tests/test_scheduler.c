/*
 * test_scheduler.c: continuous batching without a model (engine/scheduler.h):
 * exact steps for small cases (chunking, decodes first, admission order),
 * preemption of the most recent and its recompute, abort freeing blocks at
 * once, pauses, a cache of one sequence's blocks, and a random run over a
 * tiny cache checked after every step (budgets, blocks, no deadlock, every
 * block back).
 */
#include "test.h"

#include "engine/scheduler.h"

#include <string.h>

enum { MAX_SEQS = 8, BLOCK = 4, MAX_BLOCKS_PER_SEQ = 64 };

typedef struct fixture {
    snug_block_pool pool;
    int32_t free_ids[4096];
    snug_block_table tables[MAX_SEQS];
    int32_t table_ids[MAX_SEQS][MAX_BLOCKS_PER_SEQ];
    snug_sched_seq seqs[MAX_SEQS];
    int32_t running[MAX_SEQS], waiting[MAX_SEQS];
    snug_sched s;
    snug_sched_item items[MAX_SEQS];
} fixture;

static void setup(fixture *f, int32_t n_blocks, int32_t max_seqs, int32_t max_tokens)
{
    memset(f, 0, sizeof *f);
    snug_block_pool_attach(&f->pool, f->free_ids, n_blocks);
    for (int i = 0; i < MAX_SEQS; i++) {
        snug_block_table_attach(&f->tables[i], f->table_ids[i], MAX_BLOCKS_PER_SEQ);
        f->seqs[i].table = &f->tables[i];
    }
    snug_sched_init(&f->s, max_seqs, max_tokens, BLOCK, f->seqs, f->running, f->waiting, &f->pool);
}

/* Runs one step as the engine would: plan, "compute", append a token to
 * every sequence that sampled. Returns the items. */
static int32_t step(fixture *f, int32_t *n_tokens)
{
    int32_t n = snug_sched_step(&f->s, f->items, n_tokens);
    snug_sched_done(&f->s, f->items, n);
    for (int32_t k = 0; k < n; k++)
        if (f->items[k].sample) snug_sched_append(&f->s, f->items[k].seq);
    return n;
}

#define ITEM(k, seq_, n_, pos_, sample_)                                                           \
    CHECK(f->items[k].seq == (seq_) && f->items[k].n_tokens == (n_) && f->items[k].pos0 == (pos_) && \
          f->items[k].sample == (sample_),                                                          \
          "item %d: seq %d, %d tokens at %lld, sample %d; expected %d, %d at %d, %d", k,            \
          f->items[k].seq, f->items[k].n_tokens, (long long)f->items[k].pos0, f->items[k].sample,   \
          seq_, n_, pos_, sample_)

/* Chunked prefill within the token budget, decodes before prefills,
 * admission in arrival order. */
static void test_chunks_and_order(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup(f, 256, MAX_SEQS, 16);
    snug_sched_add(&f->s, 0, 10);
    snug_sched_add(&f->s, 1, 20);
    snug_sched_add(&f->s, 2, 5);
    int32_t nt = 0;
    CHECK(step(f, &nt) == 2 && nt == 16, "step 1: %d tokens", nt);
    ITEM(0, 0, 10, 0, true);
    ITEM(1, 1, 6, 0, false);
    /* seq 0 decodes first, then seq 1's last chunk, then seq 2 gets what is left */
    CHECK(step(f, &nt) == 3 && nt == 16, "step 2: %d tokens", nt);
    ITEM(0, 0, 1, 10, true);
    ITEM(1, 1, 14, 6, true);
    ITEM(2, 2, 1, 0, false);
    CHECK(step(f, &nt) == 3 && nt == 6, "step 3: %d tokens", nt);
    ITEM(0, 0, 1, 11, true);
    ITEM(1, 1, 1, 20, true);
    ITEM(2, 2, 4, 1, true);
    CHECK(f->s.n_running == 3 && f->s.n_waiting == 0, "3 running");
    /* blocks for what is computed: seq 0 12 tokens -> 3 blocks, seq 1 21 -> 6, seq 2 5 -> 2 */
    CHECK(f->tables[0].n == 3 && f->tables[1].n == 6 && f->tables[2].n == 2,
          "blocks %d %d %d", f->tables[0].n, f->tables[1].n, f->tables[2].n);
    snug_sched_finish(&f->s, 1);
    CHECK(f->tables[1].n == 0 && f->pool.n_free == 256 - 5 && f->s.n_running == 2,
          "finish frees at once: %d free", f->pool.n_free);
    CHECK(f->s.running[0] == 0 && f->s.running[1] == 2, "order kept");
}

/* A decode that needs a block when none is free preempts the most recently
 * admitted; the victim is recomputed later from all its tokens. */
static void test_preemption(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup(f, 6, MAX_SEQS, 64);
    f->s.watermark = 0;
    snug_sched_add(&f->s, 0, 8); /* 2 blocks each, full */
    snug_sched_add(&f->s, 1, 8);
    snug_sched_add(&f->s, 2, 8);
    int32_t nt = 0;
    CHECK(step(f, &nt) == 3 && nt == 24 && f->pool.n_free == 0, "all in: %d free", f->pool.n_free);
    /* each now has 9 tokens, 8 computed: seq 0 needs a block, preempts seq 2;
     * seq 1 then takes the block freed */
    CHECK(step(f, &nt) == 2, "two decodes");
    ITEM(0, 0, 1, 8, true);
    ITEM(1, 1, 1, 8, true);
    CHECK(f->s.n_preemptions == 1 && f->seqs[2].phase == SNUG_SEQ_WAITING &&
          f->seqs[2].n_computed == 0 && f->seqs[2].n_tokens == 9 && f->tables[2].n == 0 &&
          f->seqs[2].n_preempted == 1, "seq 2 preempted with its 9 tokens");
    CHECK(f->s.n_waiting == 1 && f->waiting[f->s.wait_head] == 2, "at the front of the queue");
    /* seq 0 finishes (3 blocks back): seq 2 comes back and recomputes its 9
     * tokens, sampling at the end; a newcomer waits behind it, no blocks left */
    snug_sched_finish(&f->s, 0);
    snug_sched_add(&f->s, 0, 3);
    CHECK(step(f, &nt) == 2, "decode and recompute");
    ITEM(0, 1, 1, 9, true);
    ITEM(1, 2, 9, 0, true);
    CHECK(f->pool.n_free == 0 && f->s.n_waiting == 1 && f->seqs[0].phase == SNUG_SEQ_WAITING,
          "the newcomer waits: %d free", f->pool.n_free);
}

/* A paused sequence keeps its blocks and is skipped. */
static void test_pause(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup(f, 64, MAX_SEQS, 64);
    snug_sched_add(&f->s, 0, 4);
    snug_sched_add(&f->s, 1, 4);
    int32_t nt = 0;
    step(f, &nt);
    snug_sched_pause(&f->s, 0, true);
    CHECK(step(f, &nt) == 1 && f->items[0].seq == 1, "only seq 1 runs");
    CHECK(f->tables[0].n == 1, "seq 0 keeps its block");
    snug_sched_pause(&f->s, 0, false);
    CHECK(step(f, &nt) == 2, "both again");
}

/* A prompt whose log-probabilities are asked for takes a row of logits
 * per token: its chunks are cut to the rows a step has left, after the
 * decodes' one row each. */
static void test_rows_for_prompt_logprobs(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup(f, 256, MAX_SEQS, 64);
    f->s.max_rows = 8;
    snug_sched_add(&f->s, 0, 3);
    int32_t nt = 0;
    step(f, &nt); /* seq 0 decodes from now on */
    snug_sched_add(&f->s, 1, 20);
    f->seqs[1].all_logits_until = 20;
    CHECK(step(f, &nt) == 2 && nt == 8, "step 2: %d tokens", nt);
    ITEM(0, 0, 1, 3, true);
    ITEM(1, 1, 7, 0, false);
    CHECK(f->items[1].all_logits, "a row per token");
    CHECK(step(f, &nt) == 2 && nt == 8, "step 3: %d tokens", nt);
    ITEM(1, 1, 7, 7, false);
    CHECK(step(f, &nt) == 2 && nt == 7, "step 4: %d tokens", nt);
    ITEM(1, 1, 6, 14, true); /* the last 6, the last of them sampling */
    CHECK(step(f, &nt) == 2 && !f->items[1].all_logits && f->items[1].n_tokens == 1,
          "then it decodes with one row");
}

static uint64_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Random prompts and outputs over a cache that holds two or three of them:
 * every step within its budgets, every item within its blocks, the blocks
 * held equal to the pool's used ones, and everything finishes. */
/* A cache of just one sequence's blocks (snug generate's): with nothing
 * running, the watermark does not keep the sequence out. */
static void test_one_sequence_cache(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup(f, 1, 1, 16);
    snug_sched_add(&f->s, 0, 3);
    int32_t nt = 0;
    CHECK(step(f, &nt) == 1 && nt == 3, "the prompt in a 1-block cache: %d tokens", nt);
    ITEM(0, 0, 3, 0, true);
    CHECK(step(f, &nt) == 1 && nt == 1 && f->pool.n_free == 0, "a decode: %d tokens, %d free",
          nt, f->pool.n_free);
    ITEM(0, 0, 1, 3, true);
    snug_sched_finish(&f->s, 0);
    CHECK(f->pool.n_free == 1, "the block back: %d free", f->pool.n_free);
}

static void test_random(void)
{
    static fixture fx;
    fixture *f = &fx;
    int64_t preemptions = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        uint64_t r = seed;
        int32_t n_blocks = 40 + (int32_t)(rnd(&r) % 40), max_tokens = 8 + (int32_t)(rnd(&r) % 40);
        setup(f, n_blocks, MAX_SEQS, max_tokens);
        int64_t want[MAX_SEQS] = {0};
        int todo = 60, started = 0, finished = 0, steps = 0;
        bool ok = true;
        while (finished < todo && steps < 100000 && ok) {
            for (int32_t i = 0; i < MAX_SEQS && started < todo; i++)
                if (f->seqs[i].phase == SNUG_SEQ_FREE) {
                    int64_t prompt = 1 + (int64_t)(rnd(&r) % 100);
                    want[i] = prompt + 1 + (int64_t)(rnd(&r) % (uint64_t)(150 - prompt));
                    snug_sched_add(&f->s, i, prompt);
                    started++;
                }
            int32_t nt = 0, n = step(f, &nt);
            steps++;
            int32_t sum = 0, held = 0;
            bool seen[MAX_SEQS] = {0};
            for (int32_t k = 0; k < n; k++) {
                const snug_sched_item *it = &f->items[k];
                ok = ok && !seen[it->seq] && it->n_tokens > 0 &&
                     it->pos0 + it->n_tokens <= (int64_t)f->tables[it->seq].n * BLOCK;
                seen[it->seq] = true;
                sum += it->n_tokens;
            }
            for (int32_t i = 0; i < MAX_SEQS; i++) held += f->tables[i].n;
            ok = ok && n > 0 && sum == nt && nt <= max_tokens && held == n_blocks - f->pool.n_free;
            CHECK(ok, "seed %llu step %d: %d items, %d tokens of %d, %d blocks held, %d used",
                  (unsigned long long)seed, steps, n, nt, max_tokens, held,
                  n_blocks - f->pool.n_free);
            for (int32_t i = 0; i < MAX_SEQS; i++)
                if (f->seqs[i].phase == SNUG_SEQ_RUNNING && f->seqs[i].n_tokens == want[i] &&
                    f->seqs[i].n_computed == want[i] - 1) {
                    snug_sched_finish(&f->s, i);
                    finished++;
                }
        }
        CHECK(finished == todo && f->pool.n_free == n_blocks,
              "seed %llu: %d of %d finished in %d steps, %lld preemptions, %d of %d blocks free",
              (unsigned long long)seed, finished, todo, steps, (long long)f->s.n_preemptions,
              f->pool.n_free, n_blocks);
        preemptions += f->s.n_preemptions;
    }
    CHECK(preemptions > 20, "the cache was tight enough to preempt: %lld", (long long)preemptions);
}

int main(void)
{
    RUN(test_chunks_and_order);
    RUN(test_preemption);
    RUN(test_pause);
    RUN(test_rows_for_prompt_logprobs);
    RUN(test_one_sequence_cache);
    RUN(test_random);
    return test_summary();
}
