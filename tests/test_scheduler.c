/*
 * test_scheduler.c: continuous batching without a model (engine/scheduler.h):
 * exact steps for small cases (chunking, decodes first, admission order),
 * preemption of the most recent and its recompute, abort freeing blocks at
 * once, pauses, a cache of one sequence's blocks, and a random run over a
 * tiny cache checked after every step (budgets, blocks, no deadlock, every
 * block back). Prefix caching: hits in whole blocks up to the last token,
 * generated tokens cached, salts, forced hash collisions, followers of a
 * leader's prompt, preemption's recompute as a hit, twins merged, a
 * cached prefix that fills the pool, reset, and an eviction stress run in
 * which every position a step reads holds the keys of its own prefix.
 */
#include "test.h"

#include "base/mem.h"
#include "engine/scheduler.h"

#include <string.h>

enum { MAX_SEQS = 8, BLOCK = 4, MAX_BLOCKS_PER_SEQ = 64 };

enum { MAX_TOKENS_PER_SEQ = MAX_BLOCKS_PER_SEQ * BLOCK };

typedef struct fixture {
    snug_block_pool pool;
    int32_t toks[MAX_SEQS][MAX_TOKENS_PER_SEQ]; /* each sequence's ids */
    snug_block_table tables[MAX_SEQS];
    int32_t table_ids[MAX_SEQS][MAX_BLOCKS_PER_SEQ];
    snug_sched_seq seqs[MAX_SEQS];
    int32_t running[MAX_SEQS], waiting[MAX_SEQS];
    snug_sched s;
    snug_sched_item items[MAX_SEQS];
    uint64_t kv[512][BLOCK];    /* a stand-in for each block's keys: its prefix's key */
    uint64_t salt[MAX_SEQS];
    int64_t bad_reads;          /* positions read whose keys belong to another prefix */
    /* a window group (snug_sched_set_window): its pool, tables and keys */
    snug_block_pool wpool;
    snug_block_table wtables[MAX_SEQS];
    int32_t wtable_ids[MAX_SEQS][MAX_BLOCKS_PER_SEQ];
    uint64_t wkv[256][BLOCK];
    int32_t window;
    int64_t window_reads;       /* positions read through the window group */
    int32_t draft_max;          /* drafts offered each decode (1 to this many); 0: none */
    uint64_t draft_rng;
    int64_t drafted, kept;      /* drafts the steps took, and of those the right ones */
} fixture;

/* Sets f up with a pool of n_blocks (caching as asked; the previous pool
 * freed) and max_rows rows of logits a step (0: max_seqs). */
static void setup_rows(fixture *f, int32_t n_blocks, int32_t max_seqs, int32_t max_tokens, int32_t max_rows,
                       bool caching)
{
    snug_block_pool_free(&f->pool);
    memset(f, 0, sizeof *f);
    snug_error err = {0};
    SNUG_ASSERT(snug_block_pool_init(&f->pool, n_blocks, BLOCK, caching, &err) == SNUG_OK);
    for (int i = 0; i < MAX_SEQS; i++) {
        snug_block_table_attach(&f->tables[i], f->table_ids[i], MAX_BLOCKS_PER_SEQ);
        f->seqs[i].table = &f->tables[i];
    }
    snug_sched_init(&f->s, max_seqs, max_tokens, max_rows, BLOCK, f->seqs, f->running, f->waiting, &f->pool);
}

/* As setup_rows with caching, and a window group of `window` positions
 * whose pool holds the windows of window_seqs sequences. */
static void setup_window(fixture *f, int32_t n_blocks, int32_t max_seqs, int32_t max_tokens, int32_t window,
                         int32_t window_seqs)
{
    snug_block_pool_free(&f->wpool);
    setup_rows(f, n_blocks, max_seqs, max_tokens, 0, true);
    snug_error err = {0};
    int32_t wblocks = (int32_t)snug_sched_window_blocks(window_seqs, max_tokens, BLOCK, window);
    SNUG_ASSERT(wblocks <= 256 && snug_block_pool_init(&f->wpool, wblocks, BLOCK, true, &err) == SNUG_OK);
    for (int i = 0; i < MAX_SEQS; i++) {
        snug_block_table_attach(&f->wtables[i], f->wtable_ids[i], MAX_BLOCKS_PER_SEQ);
        f->seqs[i].wtable = &f->wtables[i];
    }
    f->window = window;
    snug_sched_set_window(&f->s, &f->wpool, window);
}

static void setup_caching(fixture *f, int32_t n_blocks, int32_t max_seqs, int32_t max_tokens, bool caching)
{
    setup_rows(f, n_blocks, max_seqs, max_tokens, 0, caching);
}

static void setup(fixture *f, int32_t n_blocks, int32_t max_seqs, int32_t max_tokens)
{
    setup_caching(f, n_blocks, max_seqs, max_tokens, false);
}

/* Queues seq with the n tokens already in f->toks[seq]. */
static void add(fixture *f, int32_t seq, int64_t n)
{
    snug_sched_add(&f->s, seq, f->toks[seq], n, 0, -1);
}

/* The key of position p of seq: its salt and tokens 0 .. p, what the
 * keys and values cached there depend on. */
static uint64_t prefix_key(const fixture *f, int32_t seq, int64_t p)
{
    uint64_t h = f->salt[seq] * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i <= p; i++) h = (h ^ (uint64_t)(uint32_t)f->toks[seq][i]) * 0x100000001b3ull;
    return h;
}

/* The token a sequence generates after its tokens so far: a function of
 * the last few, as greedy decoding is of the prefix. */
static int32_t next_token(const fixture *f, int32_t seq, int64_t n)
{
    uint64_t h = 7;
    for (int64_t i = SNUG_MAX((int64_t)0, n - 3); i < n; i++) h = h * 31 + (uint64_t)f->toks[seq][i];
    return (int32_t)(h % 50);
}

static uint64_t rnd(uint64_t *s);

/* With f->draft_max, offers every sequence that decodes next drafts after
 * its tokens, as speculative decoding would: the first few (at random)
 * the tokens it will generate, the rest wrong. */
static void offer_drafts(fixture *f)
{
    for (int32_t seq = 0; seq < MAX_SEQS && f->draft_max > 0; seq++) {
        snug_sched_seq *q = &f->seqs[seq];
        q->n_draft = 0;
        if (q->phase != SNUG_SEQ_RUNNING || q->n_tokens - q->n_computed != 1) continue;
        int32_t d = 1 + (int32_t)(rnd(&f->draft_rng) % (uint64_t)f->draft_max);
        int32_t right = (int32_t)(rnd(&f->draft_rng) % (uint64_t)(d + 1));
        d = (int32_t)SNUG_MIN((int64_t)d, MAX_TOKENS_PER_SEQ - 1 - q->n_tokens);
        for (int32_t j = 0; j < d; j++) {
            int64_t at = q->n_tokens + j;
            int32_t truth = next_token(f, seq, at);
            f->toks[seq][at] = j < right ? truth : (truth + 1) % 50;
        }
        q->n_draft = SNUG_MAX(0, d);
    }
}

/* Of item it's drafts, the leading ones that are the tokens its sequence
 * generates. */
static int32_t drafts_right(const fixture *f, const snug_sched_item *it)
{
    int32_t k = 0;
    int64_t first = it->pos0 + it->n_tokens - it->n_draft;
    while (k < it->n_draft && f->toks[it->seq][first + k] == next_token(f, it->seq, first + k)) k++;
    return k;
}

/* Runs one step as the engine would: drafts offered (f->draft_max), plan,
 * "compute" (every position before an item's tokens must hold its own
 * prefix's key; the item's positions get theirs, drafts too), then to every
 * sequence that sampled its drafts that were right and the token after
 * them. Returns the items. */
static int32_t step(fixture *f, int32_t *n_tokens)
{
    offer_drafts(f);
    int32_t n = snug_sched_step(&f->s, f->items, n_tokens);
    for (int32_t k = 0; k < n && f->pool.n_blocks <= 512; k++) {
        const snug_sched_item *it = &f->items[k];
        const snug_block_table *t = &f->tables[it->seq];
        for (int64_t p = 0; p < it->pos0 + it->n_tokens; p++) {
            uint64_t *at = &f->kv[t->ids[p / BLOCK]][p % BLOCK];
            if (p >= it->pos0) *at = prefix_key(f, it->seq, p);
            else if (*at != prefix_key(f, it->seq, p)) f->bad_reads++;
        }
        if (!f->s.wpool) continue;
        /* the window group: the positions the item's queries see, from its first one's window on */
        const snug_block_table *w = &f->wtables[it->seq];
        for (int64_t p = SNUG_MAX((int64_t)0, it->pos0 - f->window + 1); p < it->pos0 + it->n_tokens; p++) {
            int32_t b = p / BLOCK < w->n ? w->ids[p / BLOCK] : -1;
            if (b < 0) {
                f->bad_reads++;
                continue;
            }
            uint64_t *at = &f->wkv[b][p % BLOCK];
            if (p >= it->pos0) *at = prefix_key(f, it->seq, p);
            else if (*at != prefix_key(f, it->seq, p)) f->bad_reads++;
            f->window_reads++;
        }
    }
    for (int32_t k = 0; k < n; k++) {
        f->items[k].n_kept = drafts_right(f, &f->items[k]);
        f->drafted += f->items[k].n_draft;
        f->kept += f->items[k].n_kept;
    }
    snug_sched_done(&f->s, f->items, n);
    for (int32_t k = 0; k < n; k++) {
        if (!f->items[k].sample) continue;
        int32_t seq = f->items[k].seq;
        int64_t at = f->seqs[seq].n_tokens + f->items[k].n_kept;
        if (at < MAX_TOKENS_PER_SEQ) f->toks[seq][at] = next_token(f, seq, at);
        snug_sched_append(&f->s, seq, 1 + f->items[k].n_kept);
    }
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
    add(f, 0, 10);
    add(f, 1, 20);
    add(f, 2, 5);
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
    snug_block_pool_free(&f->pool);
}

/* A decode that needs a block when none is free preempts the most recently
 * admitted; the victim is recomputed later from all its tokens. */
static void test_preemption(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup(f, 6, MAX_SEQS, 64);
    f->s.watermark = 0;
    add(f, 0, 8); /* 2 blocks each, full */
    add(f, 1, 8);
    add(f, 2, 8);
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
    add(f, 0, 3);
    CHECK(step(f, &nt) == 2, "decode and recompute");
    ITEM(0, 1, 1, 9, true);
    ITEM(1, 2, 9, 0, true);
    CHECK(f->pool.n_free == 0 && f->s.n_waiting == 1 && f->seqs[0].phase == SNUG_SEQ_WAITING,
          "the newcomer waits: %d free", f->pool.n_free);
    snug_block_pool_free(&f->pool);
}

/* A paused sequence keeps its blocks and is skipped. */
static void test_pause(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup(f, 64, MAX_SEQS, 64);
    add(f, 0, 4);
    add(f, 1, 4);
    int32_t nt = 0;
    step(f, &nt);
    snug_sched_pause(&f->s, 0, true);
    CHECK(step(f, &nt) == 1 && f->items[0].seq == 1, "only seq 1 runs");
    CHECK(f->tables[0].n == 1, "seq 0 keeps its block");
    snug_sched_pause(&f->s, 0, false);
    CHECK(step(f, &nt) == 2, "both again");
    snug_block_pool_free(&f->pool);
}

/* A prompt whose log-probabilities are asked for takes a row of logits
 * per token: its chunks are cut to the rows a step has left, after the
 * decodes' one row each. */
static void test_rows_for_prompt_logprobs(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup_rows(f, 256, MAX_SEQS, 64, 8, false);
    add(f, 0, 3);
    int32_t nt = 0;
    step(f, &nt); /* seq 0 decodes from now on */
    add(f, 1, 20);
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
    snug_block_pool_free(&f->pool);
}

static uint64_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* A cache of just one sequence's blocks (snug generate's): with nothing
 * running, the watermark does not keep the sequence out. */
static void test_one_sequence_cache(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup(f, 1, 1, 16);
    add(f, 0, 3);
    int32_t nt = 0;
    CHECK(step(f, &nt) == 1 && nt == 3, "the prompt in a 1-block cache: %d tokens", nt);
    ITEM(0, 0, 3, 0, true);
    CHECK(step(f, &nt) == 1 && nt == 1 && f->pool.n_free == 0, "a decode: %d tokens, %d free",
          nt, f->pool.n_free);
    ITEM(0, 0, 1, 3, true);
    snug_sched_finish(&f->s, 0);
    CHECK(f->pool.n_free == 1, "the block back: %d free", f->pool.n_free);
    snug_block_pool_free(&f->pool);
}

/* Random prompts and outputs over a cache that holds two or three of them:
 * every step within its budgets, every item within its blocks, the blocks
 * held equal to the pool's used ones, and everything finishes. */
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
                    add(f, i, prompt);
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
    snug_block_pool_free(&f->pool);
}

/* snug_sched_blocks_wanted: exact for small cases, and a bound that
 * serves: a pool made ready lazily (as the engine makes the KV cache
 * resident: groups of 3 blocks until its free blocks hold what the next
 * step wants, and then, as the engine's consumers do, some sequences
 * paused or resumed) gives, step by step, the same items as the whole pool
 * ready from the start, and no step takes more than it said. With prefix caching
 * the two diverge (the lazy pool evicts sooner, so it finds fewer hits):
 * there every step runs, and neither preempts. */
static void test_blocks_wanted(void)
{
    static fixture full, lazy;
    setup(&full, 256, MAX_SEQS, 16); /* watermark: 1% of 256 -> 2 */
    CHECK(snug_sched_blocks_wanted(&full.s) == 0, "nothing asked: %d", snug_sched_blocks_wanted(&full.s));
    add(&full, 0, 10);
    /* 10 tokens -> 3 blocks, a block for the sequence, the watermark 2 */
    CHECK(snug_sched_blocks_wanted(&full.s) == 3 + 1 + 2, "one prompt: %d", snug_sched_blocks_wanted(&full.s));
    int32_t nt = 0;
    step(&full, &nt);
    CHECK(snug_sched_blocks_wanted(&full.s) == 1 + 1, "one decode: %d", snug_sched_blocks_wanted(&full.s));
    add(&full, 1, 40);
    /* 1 + 40 tokens, cut to a step's 16 -> 4 blocks; 2 sequences; the watermark */
    CHECK(snug_sched_blocks_wanted(&full.s) == 4 + 2 + 2, "decode and prompt: %d", snug_sched_blocks_wanted(&full.s));
    snug_sched_pause(&full.s, 0, true); /* (it may be resumed before the step) */
    CHECK(snug_sched_blocks_wanted(&full.s) == 4 + 2 + 2, "paused: %d", snug_sched_blocks_wanted(&full.s));
    snug_block_pool_free(&full.pool);

    for (int caching = 0; caching < 2; caching++)
        for (uint64_t seed = 1; seed <= 10; seed++) {
            uint64_t r = seed;
            int32_t max_tokens = 8 + (int32_t)(rnd(&r) % 40);
            setup_caching(&full, 400, MAX_SEQS, max_tokens, caching);
            setup_caching(&lazy, 400, MAX_SEQS, max_tokens, caching);
            snug_block_pool_set_ready(&lazy.pool, 0);
            int64_t want[MAX_SEQS] = {0};
            int todo = 40, started = 0, finished = 0, steps = 0, bad = 0;
            while (finished < todo && steps < 20000 && !bad) {
                for (int32_t i = 0; i < MAX_SEQS && started < todo; i++)
                    if (full.seqs[i].phase == SNUG_SEQ_FREE) {
                        int64_t prompt = 1 + (int64_t)(rnd(&r) % 60);
                        want[i] = prompt + 1 + (int64_t)(rnd(&r) % 40);
                        add(&full, i, prompt);
                        add(&lazy, i, prompt);
                        started++;
                    }
                int32_t wanted = snug_sched_blocks_wanted(&lazy.s);
                while (lazy.pool.n_free < wanted && lazy.pool.n_ready < lazy.pool.n_blocks)
                    snug_block_pool_set_ready(&lazy.pool, SNUG_MIN(lazy.pool.n_ready + 3, lazy.pool.n_blocks));
                for (int32_t i = 0; i < MAX_SEQS; i++) /* (after the bound, before the step) */
                    if (full.seqs[i].phase != SNUG_SEQ_FREE && rnd(&r) % 8 == 0) {
                        bool pause = !full.seqs[i].paused && rnd(&r) % 2 == 0;
                        snug_sched_pause(&full.s, i, pause), snug_sched_pause(&lazy.s, i, pause);
                    }
                int32_t free_before = lazy.pool.n_free, nf = 0, nl = 0;
                int32_t n = step(&full, &nf), m = step(&lazy, &nl);
                steps++;
                bool runnable = false; /* (every sequence paused: nothing to run) */
                for (int32_t i = 0; i < MAX_SEQS; i++) runnable |= full.seqs[i].phase != SNUG_SEQ_FREE && !full.seqs[i].paused;
                bad = (m == 0 && runnable) || lazy.s.n_preemptions + full.s.n_preemptions > 0;
                if (!caching) bad |= n != m || nf != nl || free_before - lazy.pool.n_free > wanted;
                for (int32_t k = 0; k < n && !bad && !caching; k++)
                    bad = full.items[k].seq != lazy.items[k].seq || full.items[k].n_tokens != lazy.items[k].n_tokens ||
                          full.items[k].pos0 != lazy.items[k].pos0;
                CHECK(!bad, "caching %d seed %llu step %d: %d items (%d tokens) against %d (%d) with the whole "
                      "pool; %d blocks taken of %d wanted; %lld and %lld preemptions", caching,
                      (unsigned long long)seed, steps, m, nl, n, nf, free_before - lazy.pool.n_free, wanted,
                      (long long)lazy.s.n_preemptions, (long long)full.s.n_preemptions);
                for (int32_t i = 0; i < MAX_SEQS; i++)
                    if (full.seqs[i].phase == SNUG_SEQ_RUNNING && full.seqs[i].n_tokens == want[i] &&
                        full.seqs[i].n_computed == want[i] - 1) {
                        snug_sched_finish(&full.s, i);
                        snug_sched_finish(&lazy.s, i);
                        finished++;
                    }
            }
            CHECK(finished == todo, "caching %d seed %llu: %d of %d finished", caching, (unsigned long long)seed,
                  finished, todo);
            CHECK(lazy.pool.n_ready < lazy.pool.n_blocks, "the lazy pool stayed partly ready: %d of %d",
                  lazy.pool.n_ready, lazy.pool.n_blocks);
        }
    snug_block_pool_free(&full.pool);
    snug_block_pool_free(&lazy.pool);
}

/* Fills f->toks[seq][0 .. n) with base + i. */
static void fill(fixture *f, int32_t seq, int64_t n, int32_t base)
{
    for (int64_t i = 0; i < n; i++) f->toks[seq][i] = base + (int32_t)i;
}

/* A second sequence with the same first tokens takes the first one's whole
 * blocks, generated tokens included, and computes only the rest; at most
 * all but its last token come from the cache. */
static void test_prefix_hits(void)
{
    static fixture fx;
    fixture *f = &fx;
    snug_error err = {0};
    setup_caching(f, 64, MAX_SEQS, 64, true);
    fill(f, 0, 10, 100);
    add(f, 0, 10);
    int32_t nt = 0;
    for (int i = 0; i < 5; i++) step(f, &nt); /* the prompt, then 4 decodes: 14 tokens, 13 in */
    CHECK(f->seqs[0].n_tokens == 15 && f->seqs[0].n_computed == 14, "seq 0 at %lld/%lld",
          (long long)f->seqs[0].n_computed, (long long)f->seqs[0].n_tokens);
    CHECK(f->pool.n_cached == 3, "3 full blocks registered (generated ones too): %d",
          f->pool.n_cached);
    snug_sched_finish(&f->s, 0);
    CHECK(f->pool.n_evictable == 3 && f->pool.n_free == 64, "finished: 3 evictable of %d free",
          f->pool.n_free);
    /* the next turn: the 15 tokens and 6 more */
    memcpy(f->toks[1], f->toks[0], 15 * sizeof(int32_t));
    fill(f, 2, 6, 300);
    memcpy(f->toks[1] + 15, f->toks[2], 6 * sizeof(int32_t));
    add(f, 1, 21);
    CHECK(step(f, &nt) == 1 && nt == 9, "only the 9 tokens past the 3 cached blocks: %d", nt);
    ITEM(0, 1, 9, 12, true);
    CHECK(f->seqs[1].n_cached == 12 && f->s.n_hit == 12 && f->bad_reads == 0,
          "cached %lld, hits %lld, bad reads %lld", (long long)f->seqs[1].n_cached,
          (long long)f->s.n_hit, (long long)f->bad_reads);
    snug_sched_finish(&f->s, 1);
    /* a prompt that is exactly the cached 12 tokens: its last is computed */
    add(f, 1, 12);
    CHECK(step(f, &nt) == 1 && nt == 4, "whole blocks up to the last token: %d computed", nt);
    ITEM(0, 1, 4, 8, true);
    snug_sched_finish(&f->s, 1);
    /* a different first token: nothing */
    fill(f, 3, 12, 101);
    add(f, 3, 12);
    CHECK(step(f, &nt) == 1 && nt == 12 && f->seqs[3].n_cached == 0, "a miss computes all: %d", nt);
    snug_sched_finish(&f->s, 3);
    CHECK(snug_block_pool_check(&f->pool, &err), "%s", err.msg);
    CHECK(f->pool.n_free == 64 && f->bad_reads == 0, "every block back: %d", f->pool.n_free);
    snug_block_pool_free(&f->pool);
}

/* Salts keep sequences apart; a hash that always collides is caught by
 * the stored tokens and parents and never served; a reset empties it. */
static void test_salt_collision_reset(void)
{
    static fixture fx;
    fixture *f = &fx;
    snug_error err = {0};
    int32_t nt = 0;
    for (int collide = 0; collide < 2; collide++) {
        setup_caching(f, 64, MAX_SEQS, 64, true);
        if (collide) f->pool.hash_mask = 0; /* the test hook: every hash is 0 */
        fill(f, 0, 17, 10);
        add(f, 0, 17);
        step(f, &nt);
        snug_sched_finish(&f->s, 0);
        /* another salt: no hit */
        fill(f, 1, 17, 10);
        f->salt[1] = 42;
        snug_sched_add(&f->s, 1, f->toks[1], 17, 42, -1);
        CHECK(step(f, &nt) == 1 && nt == 17, "collide %d: another salt computes all: %d", collide, nt);
        snug_sched_finish(&f->s, 1);
        /* other tokens in the second block, same first block */
        fill(f, 2, 17, 10);
        f->toks[2][5] = 999;
        add(f, 2, 17);
        CHECK(step(f, &nt) == 1 && nt == 13 && f->seqs[2].n_cached == 4,
              "collide %d: only the first block is shared: %d computed", collide, nt);
        snug_sched_finish(&f->s, 2);
        /* the same tokens: every whole block */
        fill(f, 3, 17, 10);
        add(f, 3, 17);
        CHECK(step(f, &nt) == 1 && nt == 1 && f->seqs[3].n_cached == 16,
              "collide %d: the same prompt finds 16: %d computed", collide, nt);
        snug_sched_finish(&f->s, 3);
        CHECK(f->bad_reads == 0, "collide %d: no position read another prefix's keys (%lld)",
              collide, (long long)f->bad_reads);
        CHECK(snug_block_pool_check(&f->pool, &err), "%s", err.msg);
    }
    int32_t had = f->pool.n_cached;
    CHECK(snug_block_pool_reset_cache(&f->pool) == had && had > 0 && f->pool.n_cached == 0 &&
          f->pool.n_empty == 64, "reset drops %d blocks", had);
    fill(f, 3, 17, 10);
    add(f, 3, 17);
    CHECK(step(f, &nt) == 1 && nt == 17, "after the reset nothing is found: %d", nt);
    snug_sched_finish(&f->s, 3);
    CHECK(snug_block_pool_check(&f->pool, &err), "%s", err.msg);
    snug_block_pool_free(&f->pool);
}

/* Choices of one prompt: the followers wait for the leader's whole blocks
 * (without holding up the queue) and compute only the tail. */
static void test_followers(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup_caching(f, 64, MAX_SEQS, 8, true);
    for (int i = 0; i < 3; i++) fill(f, i, 18, 20);
    add(f, 0, 18);
    snug_sched_add(&f->s, 1, f->toks[1], 18, 0, 0);
    snug_sched_add(&f->s, 2, f->toks[2], 18, 0, 0);
    fill(f, 3, 5, 500);
    add(f, 3, 5);
    int32_t nt = 0;
    /* 8 tokens a step: the leader's chunks; the other request is not held up */
    CHECK(step(f, &nt) == 1 && nt == 8, "step 1: the leader's first chunk (%d)", nt);
    CHECK(step(f, &nt) == 1 && nt == 8 && f->seqs[1].phase == SNUG_SEQ_WAITING,
          "step 2: its second chunk; followers wait");
    /* the leader has its 16 whole tokens in: the followers find them */
    CHECK(step(f, &nt) == 4 && nt == 8, "step 3: the leader's last 2, each follower's 2, then "
          "the other request's first 2 (%d)", nt);
    ITEM(0, 0, 2, 16, true);
    ITEM(1, 1, 2, 16, true);
    ITEM(2, 2, 2, 16, true);
    ITEM(3, 3, 2, 0, false);
    CHECK(f->seqs[1].n_cached == 16 && f->seqs[2].n_cached == 16, "each found 16: %lld %lld",
          (long long)f->seqs[1].n_cached, (long long)f->seqs[2].n_cached);
    CHECK(f->tables[1].ids[0] == f->tables[0].ids[0] && f->tables[2].ids[3] == f->tables[0].ids[3] &&
          f->tables[1].ids[4] != f->tables[2].ids[4], "whole blocks shared, the tail each its own");
    for (int i = 0; i < 4; i++) snug_sched_finish(&f->s, i);
    CHECK(f->pool.n_free == 64 && f->bad_reads == 0, "all back: %d", f->pool.n_free);
    snug_block_pool_free(&f->pool);
}

/* A preempted sequence's blocks stay cached: its recompute is a hit. */
static void test_preemption_hits(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup_caching(f, 8, MAX_SEQS, 64, true);
    f->s.watermark = 0;
    for (int i = 0; i < 3; i++) fill(f, i, 8, 40 * i);
    add(f, 0, 8);
    add(f, 1, 8);
    add(f, 2, 8);
    int32_t nt = 0;
    CHECK(step(f, &nt) == 3 && nt == 24 && f->pool.n_free == 2, "all in, 2 blocks left");
    CHECK(step(f, &nt) == 2 && f->seqs[2].n_preempted == 1 && f->pool.n_evictable == 2,
          "seq 2 gave way, its 2 blocks cached: %d evictable", f->pool.n_evictable);
    CHECK(step(f, &nt) == 2 && f->seqs[2].phase == SNUG_SEQ_WAITING,
          "its cached blocks are not room for its next token");
    snug_sched_finish(&f->s, 1);
    CHECK(step(f, &nt) == 2 && f->s.n_hit == 8, "the recompute finds its 8 tokens: %lld",
          (long long)f->s.n_hit);
    ITEM(1, 2, 1, 8, true);
    snug_sched_finish(&f->s, 0);
    snug_sched_finish(&f->s, 2);
    CHECK(f->bad_reads == 0 && f->pool.n_free == 8, "clean: %d free", f->pool.n_free);
    snug_block_pool_free(&f->pool);
}

/* Queues free slot i with a prompt of one of 4 shared system prompts (0 to
 * 32 tokens, whole blocks) and a few tokens of its own, under salt 7 one
 * time in 5, else 0; returns the tokens it should reach. */
static int64_t add_shared_prefix(fixture *f, int32_t i, uint64_t *r)
{
    int32_t sys = (int32_t)(rnd(r) % 4), sys_len = 4 * (int32_t)(rnd(r) % 9);
    int64_t prompt = sys_len + 1 + (int64_t)(rnd(r) % 40);
    for (int64_t t = 0; t < prompt; t++) f->toks[i][t] = t < sys_len ? 1000 * sys + (int32_t)t : (int32_t)(rnd(r) % 3);
    int64_t want = prompt + 1 + (int64_t)(rnd(r) % 30);
    f->salt[i] = rnd(r) % 5 == 0 ? 7 : 0;
    snug_sched_add(&f->s, i, f->toks[i], prompt, f->salt[i], -1);
    return want;
}

/* Hundreds of prompts sharing a few prefixes over a pool that holds a few
 * of them: every read position holds its own prefix's keys, the pool's
 * invariants hold after every step, and in the end every block is free
 * (empty or evictable), no reference is left and nothing was allocated. */
static void test_eviction_stress(void)
{
    static fixture fx;
    fixture *f = &fx;
    snug_error err = {0};
    int64_t hits = 0, evictions = 0, preemptions = 0;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        uint64_t r = seed;
        int32_t n_blocks = 48 + (int32_t)(rnd(&r) % 32), max_tokens = 8 + (int32_t)(rnd(&r) % 40);
        setup_caching(f, n_blocks, MAX_SEQS, max_tokens, true);
        if (seed % 3 == 0) f->pool.hash_mask = 0x7; /* collisions everywhere */
        int64_t allocs = snug_mem_alloc_count();
        int64_t want[MAX_SEQS] = {0};
        int todo = 300, started = 0, finished = 0, steps = 0;
        bool ok = true;
        while (finished < todo && steps < 200000 && ok) {
            for (int32_t i = 0; i < MAX_SEQS && started < todo; i++)
                if (f->seqs[i].phase == SNUG_SEQ_FREE) {
                    want[i] = add_shared_prefix(f, i, &r);
                    started++;
                }
            int32_t nt = 0, n = step(f, &nt);
            steps++;
            ok = n > 0 && nt <= max_tokens && snug_block_pool_check(&f->pool, &err);
            CHECK(ok, "seed %llu step %d: %d items, %d tokens: %s", (unsigned long long)seed,
                  steps, n, nt, err.msg);
            for (int32_t i = 0; i < MAX_SEQS; i++)
                if (f->seqs[i].phase == SNUG_SEQ_RUNNING && f->seqs[i].n_tokens == want[i] &&
                    f->seqs[i].n_computed == want[i] - 1) {
                    snug_sched_finish(&f->s, i);
                    finished++;
                }
        }
        int32_t refs = 0;
        for (int32_t b = 0; b < n_blocks; b++) refs += f->pool.ref[b];
        CHECK(finished == todo && f->pool.n_free == n_blocks && refs == 0 &&
              snug_mem_alloc_count() == allocs && f->bad_reads == 0,
              "seed %llu: %d of %d finished in %d steps, %d of %d blocks free, %d references, "
              "%lld allocations, %lld bad reads", (unsigned long long)seed, finished, todo, steps,
              f->pool.n_free, n_blocks, refs, (long long)(snug_mem_alloc_count() - allocs),
              (long long)f->bad_reads);
        hits += f->s.n_hit;
        evictions += f->pool.n_evictions;
        preemptions += f->s.n_preemptions;
    }
    CHECK(hits > 1000 && evictions > 100, "the cache was used (%lld tokens hit) and evicted from "
          "(%lld blocks), %lld preemptions", (long long)hits, (long long)evictions,
          (long long)preemptions);
    snug_block_pool_free(&f->pool);
}

/* A cached prefix that fills the pool but one block, with nothing
 * running: the sequence is admitted over it (the watermark is only for
 * running sequences) rather than waiting forever. */
static void test_hits_fill_the_pool(void)
{
    static fixture fx;
    fixture *f = &fx;
    snug_error err = {0};
    setup_caching(f, 8, MAX_SEQS, 64, true);
    CHECK(f->s.watermark == 1, "watermark %d", f->s.watermark);
    fill(f, 0, 29, 60);
    add(f, 0, 29);
    int32_t nt = 0;
    step(f, &nt);
    snug_sched_finish(&f->s, 0); /* 30 tokens, 29 computed: 7 whole blocks cached */
    CHECK(f->pool.n_evictable == 7, "%d evictable", f->pool.n_evictable);
    fill(f, 1, 29, 60);
    f->toks[1][29] = 7;
    add(f, 1, 30);
    CHECK(step(f, &nt) == 1 && f->s.n_running == 1, "admitted over its own cached prefix");
    CHECK(f->items[0].pos0 == 28 && f->items[0].n_tokens == 2 && f->items[0].sample &&
          f->bad_reads == 0, "7 blocks found, the last 2 tokens computed: %d at %lld",
          f->items[0].n_tokens, (long long)f->items[0].pos0);
    snug_sched_finish(&f->s, 1);
    CHECK(snug_block_pool_check(&f->pool, &err), "%s", err.msg);
    snug_block_pool_free(&f->pool);
}

/* Two prompts with a shared first part admitted in one step compute it
 * twice; the second's blocks are swapped for the first's cached twins, so
 * that its own blocks after them are registered too and its next turn
 * finds them all. */
static void test_twins_merge(void)
{
    static fixture fx;
    fixture *f = &fx;
    snug_error err = {0};
    setup_caching(f, 64, MAX_SEQS, 64, true);
    fill(f, 0, 20, 70);
    fill(f, 1, 20, 70);
    for (int i = 8; i < 20; i++) f->toks[1][i] = 900 + i;
    add(f, 0, 20);
    add(f, 1, 20);
    int32_t nt = 0;
    CHECK(step(f, &nt) == 2 && nt == 40, "both in one step: %d tokens", nt);
    CHECK(f->tables[1].ids[0] == f->tables[0].ids[0] && f->tables[1].ids[1] == f->tables[0].ids[1] &&
          f->tables[1].ids[2] != f->tables[0].ids[2], "the shared blocks are one pair now");
    CHECK(f->pool.n_cached == 8, "2 shared + 3 + 3 own blocks cached: %d", f->pool.n_cached);
    snug_sched_finish(&f->s, 1);
    fill(f, 2, 30, 0);
    memcpy(f->toks[2], f->toks[1], 21 * sizeof(int32_t)); /* its prompt, its answer, more */
    add(f, 2, 30);
    CHECK(step(f, &nt) == 2 && f->seqs[2].n_cached == 20, "the next turn finds 20: %lld",
          (long long)f->seqs[2].n_cached);
    snug_sched_finish(&f->s, 0);
    snug_sched_finish(&f->s, 2);
    CHECK(snug_block_pool_check(&f->pool, &err) && f->bad_reads == 0 && f->pool.n_free == 64,
          "%s; %lld bad reads, %d free", err.msg, (long long)f->bad_reads, f->pool.n_free);
    snug_block_pool_free(&f->pool);
}

/* A sequence preempted while paused (its consumer a ring behind) is not
 * admitted again until it is resumed. */
static void test_paused_waits(void)
{
    static fixture fx;
    fixture *f = &fx;
    setup_caching(f, 4, MAX_SEQS, 64, true);
    f->s.watermark = 0;
    fill(f, 0, 8, 10);
    fill(f, 1, 8, 30);
    add(f, 0, 8);
    add(f, 1, 8);
    int32_t nt = 0;
    step(f, &nt);
    snug_sched_pause(&f->s, 1, true);
    CHECK(step(f, &nt) == 1 && f->seqs[1].phase == SNUG_SEQ_WAITING,
          "seq 0's decode preempts the paused seq 1");
    snug_sched_finish(&f->s, 0);
    CHECK(step(f, &nt) == 0 && f->seqs[1].phase == SNUG_SEQ_WAITING, "paused: not admitted");
    snug_sched_pause(&f->s, 1, false);
    CHECK(step(f, &nt) == 1 && f->seqs[1].phase == SNUG_SEQ_RUNNING, "resumed: admitted");
    snug_sched_finish(&f->s, 1);
    snug_block_pool_free(&f->pool);
}

/* A window group beside the full one (snug_sched_set_window), its pool
 * holding the windows of 1 to 8 sequences (no more run at once), under the
 * eviction stress's load
 * (shared system prompts, salts, preemption): every position a step reads
 * through either group holds its own prefix's key, the window group's
 * tables hold no block wholly before their sequence's window after a step,
 * its pool never runs short and keeps its invariants, prefix hits still
 * happen (found through both groups), and every block of both comes back. */
static void test_window_group_stress(void)
{
    static fixture fx;
    fixture *f = &fx;
    snug_error err = {0};
    int64_t hits = 0, window_reads = 0, max_held = 0, stale = 0, wevictions = 0;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        uint64_t r = seed;
        int32_t n_blocks = 48 + (int32_t)(rnd(&r) % 32), max_tokens = 8 + (int32_t)(rnd(&r) % 40);
        int32_t window = 3 + (int32_t)(rnd(&r) % 14), window_seqs = 1 + (int32_t)(rnd(&r) % MAX_SEQS);
        setup_window(f, n_blocks, MAX_SEQS, max_tokens, window, window_seqs);
        int64_t allocs = snug_mem_alloc_count();
        int64_t want[MAX_SEQS] = {0};
        int todo = 300, started = 0, finished = 0, steps = 0;
        bool ok = true;
        while (finished < todo && steps < 200000 && ok) {
            for (int32_t i = 0; i < MAX_SEQS && started < todo; i++)
                if (f->seqs[i].phase == SNUG_SEQ_FREE) {
                    want[i] = add_shared_prefix(f, i, &r);
                    started++;
                }
            int32_t nt = 0, n = step(f, &nt);
            steps++;
            CHECK(f->s.n_running <= window_seqs, "seed %llu: %d running, windows for %d", (unsigned long long)seed,
                  f->s.n_running, window_seqs);
            int64_t held = 0;
            for (int32_t i = 0; i < MAX_SEQS; i++) {
                const snug_block_table *w = &f->wtables[i];
                int64_t first_seen = f->seqs[i].n_computed - window + 1;
                for (int32_t b = 0; b < w->n; b++) {
                    held += w->ids[b] >= 0;
                    stale += w->ids[b] >= 0 && (int64_t)(b + 1) * BLOCK <= first_seen;
                }
            }
            max_held = SNUG_MAX(max_held, held);
            ok = n > 0 && nt <= max_tokens && snug_block_pool_check(&f->pool, &err) &&
                 snug_block_pool_check(&f->wpool, &err);
            CHECK(ok, "seed %llu step %d: %d items, %d tokens: %s", (unsigned long long)seed, steps, n, nt, err.msg);
            for (int32_t i = 0; i < MAX_SEQS; i++)
                if (f->seqs[i].phase == SNUG_SEQ_RUNNING && f->seqs[i].n_tokens == want[i] &&
                    f->seqs[i].n_computed == want[i] - 1) {
                    snug_sched_finish(&f->s, i);
                    finished++;
                }
        }
        CHECK(finished == todo && f->pool.n_free == n_blocks && f->wpool.n_free == f->wpool.n_blocks &&
                  snug_mem_alloc_count() == allocs && f->bad_reads == 0,
              "seed %llu (window %d): %d of %d finished in %d steps, %d of %d blocks free, window group %d of %d, "
              "%lld bad reads", (unsigned long long)seed, window, finished, todo, steps, f->pool.n_free, n_blocks,
              f->wpool.n_free, f->wpool.n_blocks, (long long)f->bad_reads);
        hits += f->s.n_hit;
        window_reads += f->window_reads;
        wevictions += f->wpool.n_evictions;
    }
    CHECK(stale == 0, "%lld window blocks held past their window", (long long)stale);
    CHECK(hits > 500 && window_reads > 10000,
          "prefix hits through both groups (%lld tokens), %lld positions read through the window group, at most %lld "
          "window blocks held, %lld evicted", (long long)hits, (long long)window_reads, (long long)max_held,
          (long long)wevictions);
    printf("  window group: %lld tokens hit, %lld positions read through it, at most %lld blocks held\n",
           (long long)hits, (long long)window_reads, (long long)max_held);
    snug_block_pool_free(&f->pool);
    snug_block_pool_free(&f->wpool);
}

/* Drafts (speculative decoding) split by the step's tokens and rows left
 * over by the other decodes, and by the free blocks; they never preempt;
 * the drafts proved right stay computed, the rest do not. */
static void test_drafts_exact(void)
{
    static fixture fx;
    fixture *f = &fx;
    for (int rows = 0; rows < 2; rows++) {
        setup_rows(f, 256, MAX_SEQS, 8, rows ? 3 : 0, false);
        add(f, 0, 4);
        add(f, 1, 4);
        int32_t nt = 0;
        CHECK(step(f, &nt) == 2 && nt == 8, "prompts: %d tokens", nt);
        for (int32_t seq = 0; seq < 2; seq++) { /* seq 0's drafts all right, seq 1's all wrong */
            for (int64_t at = 5; at < 10; at++) {
                int32_t truth = next_token(f, seq, at);
                f->toks[seq][at] = seq == 0 ? truth : (truth + 1) % 50;
            }
            f->seqs[seq].n_draft = 5;
        }
        CHECK(step(f, &nt) == 2, "two decodes");
        if (!rows) { /* 8 tokens: 2 decodes and 6 drafts, the first one's 5 first */
            ITEM(0, 0, 6, 4, true);
            ITEM(1, 1, 2, 4, true);
            CHECK(f->items[0].n_draft == 5 && f->items[0].n_kept == 5 && f->items[1].n_draft == 1 &&
                      f->items[1].n_kept == 0, "drafts %d (%d kept) and %d (%d kept)", f->items[0].n_draft,
                  f->items[0].n_kept, f->items[1].n_draft, f->items[1].n_kept);
            CHECK(f->seqs[0].n_tokens == 11 && f->seqs[0].n_computed == 10 && f->seqs[1].n_tokens == 6 &&
                      f->seqs[1].n_computed == 5, "after: %lld/%lld and %lld/%lld",
                  (long long)f->seqs[0].n_computed, (long long)f->seqs[0].n_tokens,
                  (long long)f->seqs[1].n_computed, (long long)f->seqs[1].n_tokens);
        } else { /* 3 rows: a row each, and one draft */
            ITEM(0, 0, 2, 4, true);
            ITEM(1, 1, 1, 4, true);
        }
    }
    /* 4 blocks: two prompts of 3 tokens, a block each; the first's drafts take
     * both free blocks, the second's none, and nothing is preempted */
    setup(f, 4, MAX_SEQS, 16);
    f->s.watermark = 0;
    add(f, 0, 3);
    add(f, 1, 3);
    int32_t nt = 0;
    step(f, &nt);
    f->seqs[0].n_draft = f->seqs[1].n_draft = 5;
    for (int32_t seq = 0; seq < 2; seq++)
        for (int64_t at = 4; at < 9; at++) f->toks[seq][at] = next_token(f, seq, at);
    CHECK(step(f, &nt) == 2 && f->s.n_preemptions == 0, "two decodes, %lld preemptions",
          (long long)f->s.n_preemptions);
    ITEM(0, 0, 6, 3, true);
    ITEM(1, 1, 1, 3, true);
    snug_block_pool_free(&f->pool);
}

/* Hundreds of sequences drafting at random over tight pools, with prefix
 * caching, hash collisions and, every other seed, a window group: every
 * position a step reads holds its own prefix's keys (a wrong draft's never
 * counts as computed), every token generated is the one its prefix gives,
 * and in the end every block is free and nothing was allocated. */
static void test_drafts_stress(void)
{
    static fixture fx;
    fixture *f = &fx;
    snug_error err = {0};
    int64_t drafted = 0, kept = 0, preemptions = 0, hits = 0;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        uint64_t r = seed;
        int32_t n_blocks = 40 + (int32_t)(rnd(&r) % 32), max_tokens = 8 + (int32_t)(rnd(&r) % 40);
        if (seed % 2 == 0)
            setup_window(f, n_blocks, MAX_SEQS, max_tokens, 3 + (int32_t)(rnd(&r) % 14), MAX_SEQS);
        else
            setup_caching(f, n_blocks, MAX_SEQS, max_tokens, true);
        if (seed % 3 == 0) f->pool.hash_mask = 0x7;
        f->draft_max = 1 + (int32_t)(seed % 6);
        f->draft_rng = seed * 77;
        int64_t allocs = snug_mem_alloc_count();
        int64_t want[MAX_SEQS] = {0}, prompt[MAX_SEQS] = {0};
        int todo = 200, started = 0, finished = 0, steps = 0, wrong = 0;
        bool ok = true;
        while (finished < todo && steps < 200000 && ok) {
            for (int32_t i = 0; i < MAX_SEQS && started < todo; i++)
                if (f->seqs[i].phase == SNUG_SEQ_FREE) {
                    want[i] = add_shared_prefix(f, i, &r);
                    prompt[i] = f->seqs[i].n_tokens;
                    started++;
                }
            int32_t nt = 0, n = step(f, &nt);
            steps++;
            ok = n > 0 && nt <= max_tokens && snug_block_pool_check(&f->pool, &err) &&
                 (!f->s.wpool || snug_block_pool_check(&f->wpool, &err));
            CHECK(ok, "seed %llu step %d: %d items, %d tokens: %s", (unsigned long long)seed, steps, n, nt, err.msg);
            for (int32_t i = 0; i < MAX_SEQS; i++) {
                const snug_sched_seq *q = &f->seqs[i];
                if (q->phase != SNUG_SEQ_RUNNING || q->n_tokens < want[i] || q->n_computed != q->n_tokens - 1)
                    continue;
                for (int64_t p = prompt[i]; p < q->n_tokens; p++) wrong += f->toks[i][p] != next_token(f, i, p);
                snug_sched_finish(&f->s, i);
                finished++;
            }
        }
        CHECK(finished == todo && wrong == 0 && f->bad_reads == 0 && f->pool.n_free == n_blocks &&
                  (!f->s.wpool || f->wpool.n_free == f->wpool.n_blocks) && snug_mem_alloc_count() == allocs,
              "seed %llu: %d of %d finished in %d steps, %d wrong tokens, %lld bad reads, %d of %d blocks free",
              (unsigned long long)seed, finished, todo, steps, wrong, (long long)f->bad_reads, f->pool.n_free,
              n_blocks);
        drafted += f->drafted, kept += f->kept, preemptions += f->s.n_preemptions, hits += f->s.n_hit;
        snug_block_pool_free(&f->wpool);
    }
    CHECK(drafted > 1000 && kept > 300 && kept < drafted && preemptions > 10 && hits > 500,
          "%lld drafted, %lld kept, %lld preemptions, %lld tokens hit", (long long)drafted, (long long)kept,
          (long long)preemptions, (long long)hits);
    printf("  drafts: %lld taken, %lld kept, %lld preemptions, %lld tokens hit\n", (long long)drafted,
           (long long)kept, (long long)preemptions, (long long)hits);
    snug_block_pool_free(&f->pool);
}

int main(void)
{
    RUN(test_chunks_and_order);
    RUN(test_preemption);
    RUN(test_pause);
    RUN(test_rows_for_prompt_logprobs);
    RUN(test_one_sequence_cache);
    RUN(test_random);
    RUN(test_blocks_wanted);
    RUN(test_prefix_hits);
    RUN(test_salt_collision_reset);
    RUN(test_followers);
    RUN(test_preemption_hits);
    RUN(test_eviction_stress);
    RUN(test_hits_fill_the_pool);
    RUN(test_twins_merge);
    RUN(test_paused_waits);
    RUN(test_window_group_stress);
    RUN(test_drafts_exact);
    RUN(test_drafts_stress);
    return test_summary();
}
