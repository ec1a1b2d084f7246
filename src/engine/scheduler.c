/*
 * scheduler.c: continuous batching (scheduler.h).
 */
#include "scheduler.h"

void snug_sched_init(snug_sched *s, int32_t max_seqs, int32_t max_tokens, int32_t max_rows, int32_t block_size,
                     snug_sched_seq *seqs, int32_t *running, int32_t *waiting,
                     snug_block_pool *pool)
{
    SNUG_ASSERT(max_seqs > 0 && max_tokens > 0 && block_size > 0 && max_rows >= 0);
    *s = (snug_sched){.max_seqs = max_seqs, .max_tokens = max_tokens, .block_size = block_size,
                      .watermark = SNUG_MAX(1, pool->n_blocks / 100), .max_rows = max_rows ? max_rows : max_seqs,
                      .seqs = seqs, .pool = pool,
                      .running = running, .waiting = waiting};
    for (int32_t i = 0; i < max_seqs; i++) {
        snug_block_table *t = seqs[i].table, *wt = seqs[i].wtable;
        seqs[i] = (snug_sched_seq){.phase = SNUG_SEQ_FREE, .table = t, .wtable = wt, .leader = -1};
    }
}

void snug_sched_set_window(snug_sched *s, snug_block_pool *wpool, int32_t window)
{
    int64_t one = snug_sched_window_blocks(1, s->max_tokens, s->block_size, window);
    int64_t per_seq = snug_sched_window_blocks(2, s->max_tokens, s->block_size, window) - one;
    SNUG_ASSERT(window > 0 && wpool->block_size == s->block_size && wpool->n_blocks >= one);
    for (int32_t i = 0; i < s->max_seqs; i++) SNUG_ASSERT(s->seqs[i].wtable != NULL);
    s->wpool = wpool;
    s->window = window;
    s->max_window_seqs = (int32_t)SNUG_MIN((int64_t)s->max_seqs, 1 + (wpool->n_blocks - one) / per_seq);
}

int64_t snug_sched_window_blocks(int32_t max_seqs, int32_t max_tokens, int32_t block_size, int32_t window)
{
    int64_t per_seq = ((int64_t)window - 1 + block_size - 1) / block_size + 2;
    return (int64_t)max_seqs * per_seq + ((int64_t)max_tokens + block_size - 1) / block_size;
}

/* Grows q's tables to cover n_tokens positions: the full group's, and the
 * window group's, which never runs short (snug_sched_window_blocks). False,
 * changing nothing, when the full group's pool cannot. */
static bool grow(snug_sched *s, snug_sched_seq *q, int64_t n_tokens)
{
    if (!snug_block_table_grow(q->table, s->pool, n_tokens, s->block_size)) return false;
    if (s->wpool) {
        bool grown = snug_block_table_grow(q->wtable, s->wpool, n_tokens, s->block_size);
        SNUG_ASSERT(grown);
    }
    return true;
}

/* Gives back q's blocks, in both groups. */
static void release(snug_sched *s, snug_sched_seq *q)
{
    snug_block_table_release(q->table, s->pool);
    if (s->wpool) snug_block_table_release(q->wtable, s->wpool);
}

static int32_t wait_at(const snug_sched *s, int32_t k)
{
    return s->waiting[(s->wait_head + k) % s->max_seqs];
}

void snug_sched_add(snug_sched *s, int32_t seq, const int32_t *tokens, int64_t n_tokens,
                    uint64_t salt, int32_t leader)
{
    snug_sched_seq *q = &s->seqs[seq];
    SNUG_ASSERT(q->phase == SNUG_SEQ_FREE && n_tokens >= 1 && s->n_waiting < s->max_seqs);
    *q = (snug_sched_seq){.phase = SNUG_SEQ_WAITING, .n_tokens = n_tokens, .table = q->table,
                          .wtable = q->wtable, .tokens = tokens, .salt = salt, .leader = leader};
    s->waiting[(s->wait_head + s->n_waiting++) % s->max_seqs] = seq;
}

/* Takes the waiting sequence at queue index k out of the queue. */
static void unwait(snug_sched *s, int32_t k)
{
    if (k == 0) { /* the head: the ring moves on */
        s->wait_head = (s->wait_head + 1) % s->max_seqs;
        s->n_waiting--;
        return;
    }
    for (; k + 1 < s->n_waiting; k++)
        s->waiting[(s->wait_head + k) % s->max_seqs] = wait_at(s, k + 1);
    s->n_waiting--;
}

/* Takes the running sequence at index i out of the running order. */
static void unrun(snug_sched *s, int32_t i)
{
    for (int32_t k = i + 1; k < s->n_running; k++) s->running[k - 1] = s->running[k];
    s->n_running--;
}

/* Preempts the most recently admitted running sequence: its blocks back,
 * to the front of the waiting queue, to be recomputed. */
static void preempt_last(snug_sched *s)
{
    int32_t seq = s->running[--s->n_running];
    snug_sched_seq *q = &s->seqs[seq];
    release(s, q);
    q->phase = SNUG_SEQ_WAITING;
    q->n_computed = 0;
    q->n_registered = 0;
    q->n_linked = 0;
    q->n_preempted++;
    s->wait_head = (s->wait_head + s->max_seqs - 1) % s->max_seqs;
    s->waiting[s->wait_head] = seq;
    s->n_waiting++;
    s->n_preemptions++;
}

/* The most tokens of q beyond n_computed its blocks and the free ones can
 * hold (keeping `keep` free blocks), at most want. */
static int32_t fit_tokens(const snug_sched *s, const snug_sched_seq *q, int32_t want, int32_t keep)
{
    int64_t blocks = (int64_t)q->table->n + SNUG_MAX(0, s->pool->n_free - keep);
    blocks = SNUG_MIN(blocks, (int64_t)q->table->cap);
    int64_t room = blocks * s->block_size - q->n_computed;
    return (int32_t)SNUG_MAX(0, SNUG_MIN((int64_t)want, room));
}

/* True when a chunk of q starting now needs a row per token. */
static bool wants_all(const snug_sched_seq *q) { return q->n_computed < q->all_logits_until; }

/* The tokens a chunk of q may take with `rows` rows of logits left (a
 * chunk that samples takes one; one that wants them all, one per token). */
static int32_t fit_rows(const snug_sched_seq *q, int32_t n, int32_t rows)
{
    if (wants_all(q)) return SNUG_MIN(n, rows);
    return q->n_computed + n == q->n_tokens && rows < 1 ? 0 : n;
}

static void add_item(snug_sched_item *items, int32_t *n_items, int32_t *budget, int32_t *rows,
                     int32_t seq, const snug_sched_seq *q, int32_t n, int32_t n_draft)
{
    bool sample = q->n_computed + n - n_draft == q->n_tokens, all = wants_all(q);
    items[(*n_items)++] = (snug_sched_item){seq, n, q->n_computed, sample, all, n_draft, 0};
    *budget -= n;
    *rows -= all ? n : sample + n_draft;
}

/* True when q decodes in the next step: running, one token to compute. */
static bool decodes(const snug_sched_seq *q) { return !q->paused && q->n_tokens - q->n_computed == 1; }

/* The drafts of q a decode takes: what the step's tokens and rows have
 * beyond the other decodes' (*spare of them, taken here), its table's
 * capacity and the free blocks beyond the watermark. */
static int32_t fit_drafts(const snug_sched *s, const snug_sched_seq *q, int32_t *spare)
{
    int32_t d = SNUG_MIN(q->n_draft, *spare);
    if (d <= 0 || wants_all(q)) return 0; /* (a prompt's last token with its rows: no drafts) */
    d = SNUG_MAX(0, fit_tokens(s, q, 1 + d, s->watermark) - 1);
    *spare -= d;
    return d;
}

/* The tokens of q's prefix whose keys and values may come from the cache:
 * all but the last (its logits are needed), none when every prompt token
 * needs a row of logits. */
static int64_t cacheable(const snug_sched_seq *q)
{
    return q->all_logits_until > 0 ? 0 : q->n_tokens - 1;
}

/* True when q waits for its leader to compute their shared prompt's whole
 * blocks (caching on), so that it finds them in the cache. */
static bool follows(const snug_sched *s, const snug_sched_seq *q)
{
    if (!s->pool->caching || q->leader < 0) return false;
    const snug_sched_seq *l = &s->seqs[q->leader];
    int64_t whole = cacheable(q) / s->block_size * s->block_size;
    return l->phase == SNUG_SEQ_RUNNING && l->n_computed < whole;
}

/* Of the hits cached blocks of q's prefix at ids (the full group's), the
 * most whose window the window group holds too: for k of them, the window
 * blocks of positions k bs - window + 1 .. k bs - 1, found through the
 * full group's blocks, into wids (-1 before them); all of them without a
 * window group. */
static int32_t window_hits(const snug_sched *s, const int32_t *ids, int32_t hits, int32_t *wids)
{
    if (!s->wpool) return hits;
    int32_t bs = s->block_size;
    for (int32_t k = hits; k > 0; k--) {
        int32_t lo = (int32_t)(SNUG_MAX(0, (int64_t)k * bs - s->window + 1) / bs);
        bool all = true;
        for (int32_t j = lo; j < k && all; j++) {
            wids[j] = snug_block_pool_find_linked(s->wpool, ids[j], s->pool->gen[ids[j]]);
            all = wids[j] >= 0;
        }
        if (!all) continue;
        for (int32_t j = 0; j < lo; j++) wids[j] = -1;
        return k;
    }
    return 0;
}

/* Admits the waiting q if a first chunk of it fits (its cached prefix
 * taken, then at most want more tokens in the free blocks less the
 * watermark, and the rows left): takes its blocks and returns the chunk's
 * tokens, or 0, changing nothing. */
static int32_t admit(snug_sched *s, snug_sched_seq *q, int64_t want, int32_t rows)
{
    int32_t evictable = 0, bs = s->block_size;
    int32_t hits = snug_block_pool_match(s->pool, q->tokens, cacheable(q), q->salt, q->table->ids,
                                         &evictable);
    if (s->wpool) { /* as far as the window group holds the window too */
        hits = window_hits(s, q->table->ids, hits, q->wtable->ids);
        evictable = 0;
        for (int32_t j = 0; j < hits; j++) evictable += s->pool->ref[q->table->ids[j]] == 0;
    }
    /* the watermark is for running sequences to grow into: with none, a
     * sequence may take every block (a cache of one sequence's, as snug
     * generate plans it; or a cached prefix that fills the cache, whose
     * hits take free blocks) */
    int32_t keep = s->n_running > 0 ? s->watermark : 0;
    int64_t cached = (int64_t)hits * bs;
    q->n_computed = cached; /* as fit_rows and add_item read it */
    int64_t room_blocks = SNUG_MIN((int64_t)q->table->cap - hits,
                                   (int64_t)SNUG_MAX(0, s->pool->n_free - evictable - keep));
    int64_t n = SNUG_MIN(SNUG_MIN(want, q->n_tokens - cached), room_blocks * bs);
    n = fit_rows(q, (int32_t)SNUG_MAX(0, n), rows);
    if (n == 0) {
        q->n_computed = 0;
        return 0;
    }
    snug_block_table_share(q->table, s->pool, hits);
    if (s->wpool) snug_block_table_take(q->wtable, s->wpool, q->wtable->ids, hits);
    bool grown = grow(s, q, cached + n);
    SNUG_ASSERT(grown);
    q->n_registered = hits;
    q->n_linked = hits;
    if (s->pool->caching) {
        s->n_queried += q->n_tokens;
        s->n_hit += cached;
    }
    if (!q->admitted) q->n_cached = cached;
    q->admitted = true;
    return (int32_t)n;
}

/* One try at a step (snug_sched_step); 0 items when nothing could run. */
static int32_t plan_step(snug_sched *s, snug_sched_item *items, int32_t *n_tokens)
{
    int32_t n_items = 0, budget = s->max_tokens, rows = s->max_rows;
    int32_t n_decodes = 0;
    for (int32_t i = 0; i < s->n_running; i++) n_decodes += decodes(&s->seqs[s->running[i]]);
    int32_t spare = SNUG_MIN(budget, rows) - n_decodes; /* for drafts */
    /* 1. decodes, preempting from the most recent when the cache is full */
    for (int32_t i = 0; i < s->n_running && budget > 0 && rows > 0; i++) {
        int32_t seq = s->running[i];
        snug_sched_seq *q = &s->seqs[seq];
        if (!decodes(q)) continue;
        int32_t d = fit_drafts(s, q, &spare);
        bool grown = false;
        while (!(grown = grow(s, q, q->n_computed + 1 + d)) && s->n_running - 1 > i)
            preempt_last(s);
        if (!grown) { /* the most recent itself */
            preempt_last(s);
            break;
        }
        add_item(items, &n_items, &budget, &rows, seq, q, 1 + d, d);
    }
    /* 2. chunks of running prefills */
    for (int32_t i = 0; i < s->n_running && budget > 0; i++) {
        int32_t seq = s->running[i];
        snug_sched_seq *q = &s->seqs[seq];
        int64_t left = q->n_tokens - q->n_computed;
        if (q->paused || left <= 1) continue;
        int32_t n = fit_rows(q, fit_tokens(s, q, (int32_t)SNUG_MIN(left, (int64_t)budget), 0), rows);
        if (n == 0 || !grow(s, q, q->n_computed + n)) continue;
        add_item(items, &n_items, &budget, &rows, seq, q, n, 0);
    }
    /* 3. admission, first come first served (a follower waiting for its
     * leader's prompt is passed by) */
    int32_t slots = s->wpool ? s->max_window_seqs : s->max_seqs; /* (the windows the window group holds) */
    for (int32_t k = 0; k < s->n_waiting && budget > 0 && s->n_running < slots;) {
        int32_t seq = wait_at(s, k);
        snug_sched_seq *q = &s->seqs[seq];
        if (q->paused || follows(s, q)) { /* passed by: its output waits, or its leader */
            k++;
            continue;
        }
        int32_t n = admit(s, q, SNUG_MIN(q->n_tokens, (int64_t)budget), rows);
        if (n == 0) break;
        unwait(s, k);
        q->phase = SNUG_SEQ_RUNNING;
        s->running[s->n_running++] = seq;
        add_item(items, &n_items, &budget, &rows, seq, q, n, 0);
    }
    *n_tokens = s->max_tokens - budget;
    return n_items;
}

/* True when a running sequence is not paused. */
static bool any_runnable(const snug_sched *s)
{
    for (int32_t i = 0; i < s->n_running; i++)
        if (!s->seqs[s->running[i]].paused) return true;
    return false;
}

int32_t snug_sched_step(snug_sched *s, snug_sched_item *items, int32_t *n_tokens)
{
    /* prefills that each hold part of a full cache wait for each other:
     * the most recent gives way until one can go on (one alone always can:
     * the cache holds a whole sequence) */
    int32_t n = plan_step(s, items, n_tokens);
    while (n == 0 && s->n_running > 1 && any_runnable(s)) {
        preempt_last(s);
        n = plan_step(s, items, n_tokens);
    }
    return n;
}

int32_t snug_sched_blocks_wanted(const snug_sched *s)
{
    int64_t tokens = 0;
    int32_t seqs = 0;
    for (int32_t i = 0; i < s->n_running; i++) {
        const snug_sched_seq *q = &s->seqs[s->running[i]];
        seqs++;
        tokens += SNUG_MAX((int64_t)1, q->n_tokens - q->n_computed) + q->n_draft;
    }
    for (int32_t k = 0; k < s->n_waiting; k++) {
        seqs++;
        tokens += s->seqs[wait_at(s, k)].n_tokens;
    }
    tokens = SNUG_MIN(tokens, (int64_t)s->max_tokens);
    seqs = SNUG_MIN(seqs, s->max_seqs);
    return (int32_t)((tokens + s->block_size - 1) / s->block_size) + seqs + (s->n_waiting > 0 ? s->watermark : 0);
}

void snug_sched_done(snug_sched *s, const snug_sched_item *items, int32_t n_items)
{
    for (int32_t k = 0; k < n_items; k++) {
        snug_sched_seq *q = &s->seqs[items[k].seq];
        q->n_computed += items[k].n_tokens - items[k].n_draft + items[k].n_kept;
        snug_block_table_register(q->table, s->pool, q->tokens, q->n_computed, q->salt,
                                  &q->n_registered);
        if (!s->wpool) continue;
        /* the window blocks of the registered ones linked to them, then those no
         * later query sees given back */
        for (; q->n_linked < SNUG_MIN(q->n_registered, q->wtable->n); q->n_linked++) {
            int32_t fb = q->table->ids[q->n_linked], wb = q->wtable->ids[q->n_linked];
            if (wb >= 0 && s->pool->hashed[fb]) snug_block_pool_link(s->wpool, wb, fb, s->pool->gen[fb]);
        }
        int64_t first_seen = q->n_computed - s->window + 1;
        if (first_seen > 0) snug_block_table_drop_front(q->wtable, s->wpool, (int32_t)(first_seen / s->block_size));
    }
}

void snug_sched_append(snug_sched *s, int32_t seq, int32_t n)
{
    snug_sched_seq *q = &s->seqs[seq];
    SNUG_ASSERT(q->phase == SNUG_SEQ_RUNNING && n >= 1 && q->n_computed == q->n_tokens + n - 1);
    q->n_tokens += n;
    q->n_draft = 0;
}

void snug_sched_finish(snug_sched *s, int32_t seq)
{
    snug_sched_seq *q = &s->seqs[seq];
    if (q->phase == SNUG_SEQ_RUNNING) {
        for (int32_t i = 0; i < s->n_running; i++)
            if (s->running[i] == seq) {
                unrun(s, i);
                break;
            }
    } else if (q->phase == SNUG_SEQ_WAITING) {
        int32_t k = 0;
        while (k < s->n_waiting && wait_at(s, k) != seq) k++;
        unwait(s, k);
    }
    release(s, q);
    snug_block_table *t = q->table, *wt = q->wtable;
    *q = (snug_sched_seq){.phase = SNUG_SEQ_FREE, .table = t, .wtable = wt, .leader = -1};
    for (int32_t i = 0; i < s->max_seqs; i++) /* its followers go on their own */
        if (s->seqs[i].leader == seq) s->seqs[i].leader = -1;
}

void snug_sched_pause(snug_sched *s, int32_t seq, bool paused) { s->seqs[seq].paused = paused; }
