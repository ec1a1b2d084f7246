/*
 * engine.c: the step loop and the hand-over between request threads and it
 * (engine.h). One mutex guards the queue, the slots' owners and rings, and
 * the counters; the loop holds it except while the forward pass runs and
 * while it samples (the slots' sampling state is the loop's alone, and the
 * ring entry a sample writes is one no consumer reads until it is
 * published under the mutex).
 */
#include "engine.h"

#include "blocks.h"
#include "constrain.h"
#include "dist/agree.h"
#include "dist/stepper.h"
#include "formats/config.h"
#include "grammar_keys.h"
#include "model/model.h"
#include "scheduler.h"
#include "serving.h"
#include "tokenizer/tokenizer.h"

#include "base/mem.h"

#include <math.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

enum { REQ_QUEUED = 1, REQ_ADMITTED = 2, REQ_DONE = 3 };

const double snug_latency_bounds[SNUG_LATENCY_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

static void observe(snug_latency_histogram *h, double s)
{
    int b = 0;
    while (b < SNUG_LATENCY_BUCKETS && s > snug_latency_bounds[b]) b++;
    h->count[b]++;
    h->sum += s;
    h->n++;
}

struct snug_engine {
    snug_planned *plan;
    snug_plan_parts at;             /* what the plan made (snug_planner_parts), the engine's from
                                     * then on: its serving state, cache, block pool, stepper */
    snug_sched sched;
    pthread_mutex_t mu;
    pthread_cond_t work;            /* the loop waits here for something to do */
    pthread_cond_t out;             /* consumers wait here for outputs */
    pthread_t thread;
    bool started, stopping, failed;
    bool joined;                    /* snug_engine_stop joined the loop */
    bool loop_done;                 /* the loop has ended (its last act, under the mutex): only then
                                     * may another thread end a sequence in its place */
    bool check_ranks;               /* asked to check, between steps, that every rank answers */
    snug_error fail_err;
    snug_request **queue;           /* [q_cap] a ring of requests waiting for slots */
    int32_t q_head, q_n, q_cap;
    int32_t eos[SNUG_STOP_MODEL_EOS_MAX]; /* the model's end-of-sequence ids (collect_eos) */
    int32_t n_eos;
    uint64_t next_id;
    int32_t *ring_pos;              /* [max_num_seqs] where a step's item's first output goes in
                                     * its ring, and ... */
    int32_t *n_out;                 /* [max_num_seqs] ... how many it wrote (1 + drafts kept, or
                                     * fewer: run_step) */
    int32_t *n_accepted;            /* [max_num_seqs] the item's drafts that sampling kept */
    snug_spec_opts spec;            /* speculative decoding's (resolved); plan_opts.spec_tokens
                                     * 0: none */
    snug_step_seq *dseqs;           /* with a draft model: [max_num_seqs] a draft step's sequences, */
    int32_t *dtokens;               /* [max_num_batched_tokens + max_num_seqs] its tokens, */
    int32_t *ditem;                 /* [max_num_seqs] the item each sequence is, and ... */
    int32_t *item_at;               /* [max_num_seqs] ... where each item's tokens start in the step */
    int32_t *qrow;                  /* [max_num_seqs] the first of the serving state's draft_q rows
                                     * item k's sampled drafts were drawn from; -1: drafted greedily */
    double draft_seconds;           /* the draft's steps (the loop's; copied under the mutex) */
    snug_spec_cost cost;            /* the steps' seconds against their tokens (the loop's) */
    int32_t *walk_list;             /* [max_num_seqs] slots waiting for a mask walk, in turn */
    int32_t n_walk_list, walk_at;   /* their count, and the next to walk */
    int32_t walk_turn;              /* the slot after the last walked: the list starts there */
    snug_grammar_keys grammar_keys; /* the mask cache's key of each grammar (the mutex's) */
    void *grammar_keys_mem;
    uint64_t grammar_secret[4];     /* keys grammars' two hashes (grammar_keys.h): nobody can
                                     * choose grammars that collide, and a collision costs a key,
                                     * never a mask */
    uint64_t seed_key;              /* the random streams of requests without a seed start from
                                     * it and their ids: each process its own */
    snug_engine_counters c;
    /* the plan, made on the loop's thread (see snug_engine_open) */
    const char *dir;
    snug_planner_opts plan_opts;    /* plan_opts_of: spec_tokens is the drafts a decode may verify */
    snug_error *open_err;
    snug_status open_status;
    bool open_done;
};

/* ---- slots ------------------------------------------------------------------ */

static snug_seq_slot *slot_of(snug_engine *e, int32_t i) { return &e->at.serving->seqs[i]; }

/* The last output item k of the step wrote to its sequence's ring. */
static const snug_out_record *last_out(snug_engine *e, int32_t k)
{
    const snug_seq_slot *q = slot_of(e, e->at.serving->items[k].seq);
    return &q->ring[(e->ring_pos[k] + e->n_out[k] - 1) % e->at.serving->ring_cap];
}

/* Starts choice k of r in the free slot i. */
static void start_slot(snug_engine *e, snug_request *r, int32_t k, int32_t i)
{
    snug_seq_slot *q = slot_of(e, i);
    memcpy(q->ids, r->prompt, (size_t)r->n_prompt * sizeof(int32_t));
    q->n_ids = q->n_prompt = r->n_prompt;
    q->sampling = r->sampling;
    uint64_t fallback = e->seed_key ^ (r->id * 0x9E3779B97F4A7C15ull + (uint64_t)k);
    snug_sampling_params sp = r->sampling;
    if (sp.has_seed) sp.seed += (uint64_t)k; /* the choices of a seeded request differ, repeatably */
    snug_sampler_state_init(&q->sampler, &sp, fallback);
    q->stop_params = r->stop;
    for (int32_t i = 0; i < e->n_eos; i++) { /* the model's EOS ids too (the caller's stop is left as it is) */
        bool seen = false;
        for (int32_t j = 0; j < q->stop_params.n_eos; j++) seen |= q->stop_params.eos_ids[j] == e->eos[i];
        if (!seen && q->stop_params.n_eos < SNUG_STOP_EOS_MAX) q->stop_params.eos_ids[q->stop_params.n_eos++] = e->eos[i];
    }
    snug_stop_state_init(&q->stop);
    q->think_params = r->think;
    snug_think_start(&q->think, &q->think_params);
    snug_tok_stream_init(&q->stream, e->at.tok, !r->keep_special);
    q->stream.started = !r->output_starts_text; /* continuing the prompt: its leading space kept */
    q->ring_head = q->ring_n = 0;
    q->owner = r;
    q->choice = k;
    q->n_logprobs = r->logprobs ? r->top_logprobs : -1;
    q->prompt_lp = k == 0 ? r->prompt_logprobs : NULL; /* the choices share one prompt */
    q->t_last = 0;
    q->grammar = r->grammar;
    q->spec_max = r->no_speculation || r->pooling != SNUG_POOL_NONE || r->score_ids ? 0
                  : r->spec_max > 0 ? SNUG_MIN(r->spec_max, e->plan_opts.spec_tokens) : e->plan_opts.spec_tokens;
    q->spec = (snug_spec_state){0};
    q->d_computed = 0;
    if (r->grammar) { /* a key per slot held, the grammar's own (the table outnumbers the slots) */
        bool dropped = false;
        uint64_t old = 0;
        bool taken = snug_grammar_keys_take(&e->grammar_keys, r->grammar_hash, r->grammar_digest, r->grammar,
                                            &q->grammar_key, &dropped, &old);
        SNUG_ASSERT(taken);
        if (dropped) snug_tokmask_cache_drop(&e->at.serving->constrain.cache, old); /* the loop's thread */
    }
    q->grammar_failed = r->grammar && snug_gmatch_start(&q->match, q->match_mem, SNUG_CONSTRAIN_STACKS,
                                                        SNUG_CONSTRAIN_DEPTH, r->grammar, NULL) != SNUG_OK;
    q->gen++;
    q->mask_ready = !q->grammar || q->grammar_failed ||
                    snug_constrain_cached(&e->at.serving->constrain, q->grammar_key, &q->match);
    r->slots[k] = i;
    snug_sched_add(&e->sched, i, q->ids, r->n_prompt, r->cache_salt, k == 0 ? -1 : r->slots[0]);
    if (q->prompt_lp) e->sched.seqs[i].all_logits_until = r->n_prompt;
}

/* Lets go of slot i: the engine no longer owes its owner anything there. */
static void free_slot(snug_engine *e, int32_t i)
{
    snug_seq_slot *q = slot_of(e, i);
    snug_request *r = q->owner;
    if (e->sched.seqs[i].phase != SNUG_SEQ_FREE) snug_sched_finish(&e->sched, i);
    if (q->grammar) {
        const snug_grammar *other = NULL; /* another holder of the key, if any, stands for it */
        for (int32_t k = 0; k < e->at.serving->shape.max_num_seqs && !other; k++)
            if (k != i && slot_of(e, k)->grammar && slot_of(e, k)->grammar_key == q->grammar_key)
                other = slot_of(e, k)->grammar;
        snug_grammar_keys_release(&e->grammar_keys, q->grammar_key, q->grammar, other);
    }
    q->owner = NULL;
    q->grammar = NULL; /* the owner's, freed after it is released */
    q->ring_n = 0;
    if (r && --r->n_live == 0) {
        r->state = REQ_DONE;
        e->c.requests_finished++;
    }
}

static bool slot_is_free(snug_engine *e, int32_t i)
{
    return slot_of(e, i)->owner == NULL && e->sched.seqs[i].phase == SNUG_SEQ_FREE;
}

/* ---- masks walked in pieces (constrain.h) ------------------------------------ */

/* Whether slot i's sequence waits for its mask. */
static bool waits_for_mask(snug_engine *e, int32_t i)
{
    const snug_seq_slot *q = slot_of(e, i);
    return q->owner && q->grammar && !q->mask_ready && e->sched.seqs[i].phase != SNUG_SEQ_FREE;
}

/* Sequences waiting for their masks now: the list's not yet walked, and
 * the walk under way (the counters' gauge). */
static int32_t masks_waiting(const snug_engine *e)
{
    return e->n_walk_list - e->walk_at + e->at.serving->constrain.walking;
}

/* Lists the slots waiting for a mask, in turn from walk_turn, and gives up
 * a walk whose sequence went (under the mutex, on the loop's thread: the
 * list is then walked without it). */
static void list_walks(snug_engine *e)
{
    snug_constrainer *c = &e->at.serving->constrain;
    int32_t n_slots = e->at.serving->shape.max_num_seqs;
    if (c->walking && (!waits_for_mask(e, c->walk_owner) || slot_of(e, c->walk_owner)->gen != c->walk_gen))
        snug_constrain_walk_abandon(c);
    e->n_walk_list = e->walk_at = 0;
    for (int32_t k = 0; k < n_slots; k++) {
        int32_t i = (e->walk_turn + k) % n_slots;
        if (waits_for_mask(e, i) && !(c->walking && c->walk_owner == i)) e->walk_list[e->n_walk_list++] = i;
    }
    e->c.grammar_waiting = masks_waiting(e);
}

/* Walks masks until the clock passes deadline: the walk begun, then the
 * listed slots' in turn (one found cached by then is ready at once). A
 * sequence whose mask is done is ready for the next step. On the loop's
 * thread, without the mutex: the listed sequences are paused, so only
 * this thread ends them. */
static void walk_masks(snug_engine *e, double deadline)
{
    snug_constrainer *c = &e->at.serving->constrain;
    while (c->walking || e->walk_at < e->n_walk_list) {
        if (!c->walking) {
            int32_t i = e->walk_list[e->walk_at++];
            snug_seq_slot *q = slot_of(e, i);
            if ((q->mask_ready = snug_constrain_cached(c, q->grammar_key, &q->match))) continue;
            snug_constrain_walk_start(c, q->grammar_key, &q->match, i, q->gen);
        }
        int32_t owner = c->walk_owner;
        if (!snug_constrain_walk_continue(c, deadline)) return;
        slot_of(e, owner)->mask_ready = true;
        e->walk_turn = (owner + 1) % e->at.serving->shape.max_num_seqs;
        if (snug_now_seconds() >= deadline) return;
    }
}

/* After a step: each constrained sequence that sampled and goes on is
 * ready when its new state's mask is cached, and waits for a walk
 * otherwise (listed). */
static void check_masks(snug_engine *e, int32_t n_items)
{
    const snug_sched_item *items = e->at.serving->items;
    snug_constrainer *c = &e->at.serving->constrain;
    for (int32_t k = 0; k < n_items; k++) {
        snug_seq_slot *q = slot_of(e, items[k].seq);
        if (!items[k].sample || !q->grammar || q->grammar_failed || last_out(e, k)->finish != SNUG_FINISH_NONE)
            continue;
        q->mask_ready = snug_constrain_cached(c, q->grammar_key, &q->match);
        if (!q->mask_ready && e->n_walk_list < e->at.serving->shape.max_num_seqs)
            e->walk_list[e->n_walk_list++] = items[k].seq;
    }
}

/* Moves queued requests into free slots, first come first served. */
static void admit_queued(snug_engine *e)
{
    int32_t n_slots = e->at.serving->shape.max_num_seqs;
    while (e->q_n > 0) {
        snug_request *r = e->queue[e->q_head];
        int32_t free_found = 0;
        for (int32_t i = 0; i < n_slots && free_found < r->n; i++) free_found += slot_is_free(e, i);
        if (free_found < r->n) return;
        e->q_head = (e->q_head + 1) % e->q_cap;
        e->q_n--;
        r->state = REQ_ADMITTED;
        r->n_live = r->n;
        int32_t k = 0;
        for (int32_t i = 0; i < n_slots && k < r->n; i++)
            if (slot_is_free(e, i)) start_slot(e, r, k++, i);
        e->c.prompt_tokens += r->n_prompt * r->n;
    }
}

/* Ends the sequences of cancelled requests, and pauses those whose
 * consumers are a full ring behind. */
static void tend_slots(snug_engine *e)
{
    int32_t n_slots = e->at.serving->shape.max_num_seqs;
    for (int32_t i = 0; i < n_slots; i++) {
        snug_seq_slot *q = slot_of(e, i);
        snug_request *r = q->owner;
        if (!r) continue;
        if (r->cancelled) {
            free_slot(e, i);
            if (r->state == REQ_DONE && r->notify) r->notify(r->notify_ctx); /* it ended */
            continue;
        }
        if (e->sched.seqs[i].phase != SNUG_SEQ_FREE)
            snug_sched_pause(&e->sched, i, q->ring_n >= SNUG_OUT_RING || !q->mask_ready);
    }
    list_walks(e);
}

/* ---- drafts (spec.h) ---------------------------------------------------------- */

/* Offers the scheduler drafts for each sequence that decodes next and
 * drafts: as many as pay (its record of drafts kept against the least
 * chance the steps' fitted cost asks, spec.h), at least spec.n_min, and
 * no more than its ring, max_tokens and the model length leave room for
 * (a step's outputs all fit). Prompt lookup's are written after its known
 * ids here, a draft model's once the step is planned (draft_tokens).
 * Under the mutex, before a step. */
static void offer_drafts(snug_engine *e)
{
    const snug_serving_state *sv = e->at.serving;
    int32_t decodes = 0; /* the next step's outputs without drafts, about */
    for (int32_t i = 0; i < sv->shape.max_num_seqs && e->plan_opts.spec_tokens > 0; i++) {
        const snug_sched_seq *s = &e->sched.seqs[i];
        decodes += s->phase == SNUG_SEQ_RUNNING && !s->paused && s->n_tokens - s->n_computed == 1;
    }
    double min_keep = snug_spec_min_keep(&e->cost, decodes, decodes);
    for (int32_t i = 0; i < sv->shape.max_num_seqs; i++) {
        snug_sched_seq *s = &e->sched.seqs[i];
        snug_seq_slot *q = slot_of(e, i);
        s->n_draft = 0;
        if (q->spec_max == 0 || !q->owner || s->phase != SNUG_SEQ_RUNNING || s->paused ||
            s->n_tokens - s->n_computed != 1)
            continue;
        int64_t room = SNUG_MIN(sv->shape.max_model_len - q->n_ids, (int64_t)(sv->ring_cap - q->ring_n)) - 1;
        if (q->stop_params.max_tokens > 0)
            room = SNUG_MIN(room, q->n_prompt + q->stop_params.max_tokens - q->n_ids - 1);
        int32_t want = snug_spec_want(&q->spec, q->spec_max, min_keep);
        if (want == 0) snug_spec_record(&q->spec, 0, 0); /* drafts failed of late: aged, to try again */
        want = SNUG_MAX(want, SNUG_MIN(e->spec.n_min, q->spec_max));
        want = (int32_t)SNUG_MIN((int64_t)want, room);
        if (want > 0 && e->at.draft) /* (drafted once the step is planned: draft_tokens) */
            s->n_draft = want;
        else if (want > 0)
            s->n_draft = snug_spec_lookup(q->ids, q->n_ids, e->spec.lookup_min, e->spec.lookup_max, want,
                                          q->ids + q->n_ids);
    }
}

/* Where a draft step of item it's sequence q starts: at pos, or one
 * before when the draft's cache lacks just that one (the last draft of a
 * step that kept them all). */
static int64_t draft_from(const snug_seq_slot *q, int64_t pos)
{
    return q->d_computed == pos - 1 ? pos - 1 : pos;
}

/* Runs the draft model over the step's sequences listed in dseqs (n of
 * them, n_tok tokens) and returns its rows of logits (*rows, stride
 * floats apart); the time goes to draft_seconds. */
static snug_status draft_forward(snug_engine *e, int32_t n, int32_t n_tok, bool last, const float **rows,
                                 snug_error *err)
{
    double t0 = snug_now_seconds();
    for (int32_t i = 0; i < n; i++) e->dseqs[i].logits = last ? SNUG_LOGITS_LAST : SNUG_LOGITS_NONE;
    snug_step step = {e->dtokens, n_tok, e->dseqs, n, 0};
    int32_t n_rows = 0;
    snug_status st = snug_model_forward(e->at.draft, e->at.draft_kv, &step, rows, &n_rows, err);
    e->draft_seconds += snug_now_seconds() - t0;
    return st;
}

/* Lists item k's tokens [from, to) of sequence q for a draft step (at
 * *n_seqs, *n_tok). */
static void draft_list(snug_engine *e, int32_t k, const snug_seq_slot *q, int64_t from, int64_t to,
                       int32_t *n_seqs, int32_t *n_tok)
{
    int32_t n = (int32_t)(to - from);
    memcpy(e->dtokens + *n_tok, q->ids + from, (size_t)n * sizeof(int32_t));
    e->dseqs[*n_seqs] = (snug_step_seq){n, (int32_t)from, q->table.ids, q->table.n, SNUG_LOGITS_NONE, NULL, 0};
    e->ditem[(*n_seqs)++] = k;
    *n_tok += n;
}

/* The draft model's tokens: those of its rows that are the model's too (a
 * draft of the same tokenizer may have fewer rows, or padding). */
static int32_t draft_vocab(const snug_engine *e)
{
    return SNUG_MIN(snug_model_get_dims(e->at.draft)->vocab_len, e->at.config->vocab_size);
}

/* With a draft model, before the step: each item that takes drafts gets
 * them, one draft step each (the first step from its last known token, and
 * the one before it where the draft's cache lacks it), written after its
 * known ids and into the step's tokens: for a request that samples without
 * a seed, while the serving state's draft_q has rows for them, tokens drawn
 * from the draft's rows at its temperature, each row kept there for its
 * verification (qrow); else the draft's most likely tokens. Without the
 * mutex. */
static snug_status draft_tokens(snug_engine *e, int32_t n_items, snug_error *err)
{
    snug_serving_state *sv = e->at.serving;
    const snug_sched_item *items = sv->items;
    const snug_model_dims *d = snug_model_get_dims(e->at.draft);
    int32_t n_vocab = draft_vocab(e), drafted = 0;
    int32_t at = 0, most = 0, rows = 0;
    for (int32_t k = 0; k < n_items; k++) {
        e->item_at[k] = at;
        at += items[k].n_tokens;
        most = SNUG_MAX(most, items[k].n_draft);
        /* a request that samples without a seed drafts by sampling the draft's rows (each kept
         * for its verification) while there is room for them; one with a seed drafts the most
         * likely tokens, so that its output is plain decoding's, drafts or not */
        const snug_sampling_params *sp = &slot_of(e, items[k].seq)->sampling;
        bool sampled = items[k].n_draft > 0 && sp->temperature > 0.0f && !sp->has_seed &&
                       rows + items[k].n_draft <= sv->shape.draft_rows;
        e->qrow[k] = sampled ? rows : -1;
        rows += sampled ? items[k].n_draft : 0;
    }
    double t0 = snug_now_seconds();
    for (int32_t j = 0; j < most; j++) {
        int32_t n_seqs = 0, n_tok = 0;
        for (int32_t k = 0; k < n_items; k++) {
            if (items[k].n_draft <= j) continue;
            const snug_seq_slot *q = slot_of(e, items[k].seq);
            int64_t pos = items[k].pos0 + j; /* its last known token, then draft j - 1 */
            draft_list(e, k, q, j == 0 ? draft_from(q, pos) : pos, pos + 1, &n_seqs, &n_tok);
        }
        const float *logits = NULL;
        snug_status st = draft_forward(e, n_seqs, n_tok, true, &logits, err);
        if (st != SNUG_OK) return snug_error_prefix(err, st, "draft model: ");
        for (int32_t i = 0; i < n_seqs; i++) {
            const float *row = logits + (size_t)i * (size_t)d->vocab_rows;
            int32_t k = e->ditem[i], best;
            snug_seq_slot *q = slot_of(e, items[k].seq);
            if (e->qrow[k] >= 0) { /* drawn from the row at the request's temperature, kept (as
                                     * long as the model's rows: -infinity past the draft's) */
                int32_t nv = sv->shape.n_vocab;
                float *kept = sv->draft_q + (size_t)(e->qrow[k] + j) * (size_t)nv;
                memcpy(kept, row, (size_t)n_vocab * sizeof(float));
                for (int32_t v = n_vocab; v < nv; v++) kept[v] = -INFINITY;
                snug_sampling_params qp;
                snug_sampling_params_default(&qp);
                qp.temperature = q->sampling.temperature;
                best = snug_sample(&qp, &q->sampler, kept, nv, NULL, 0, NULL, 0, sv->scratch[0]);
            } else {
                best = snug_sampler_argmax(row, n_vocab);
            }
            q->ids[items[k].pos0 + 1 + j] = best;
            sv->step_tokens[e->item_at[k] + 1 + j] = best;
            drafted++;
        }
    }
    if (drafted > 0) snug_spec_cost_drafts(&e->cost, drafted, snug_now_seconds() - t0);
    return SNUG_OK;
}

/* With a draft model, after the step: the draft computes the keys and
 * values of every item that took no drafts (prompts, decodes without), so
 * that its cache keeps level with the model's: for the sequence's own
 * drafts, and for those of any sequence that finds its blocks in the
 * prefix cache (those of a request that does not draft too). */
static snug_status draft_follow(snug_engine *e, int32_t n_items, snug_error *err)
{
    const snug_sched_item *items = e->at.serving->items;
    int32_t n_seqs = 0, n_tok = 0;
    for (int32_t k = 0; k < n_items; k++) {
        const snug_seq_slot *q = slot_of(e, items[k].seq);
        if (items[k].n_draft > 0) continue;
        draft_list(e, k, q, draft_from(q, items[k].pos0), items[k].pos0 + items[k].n_tokens, &n_seqs, &n_tok);
    }
    const float *rows = NULL;
    snug_status st = n_seqs > 0 ? draft_forward(e, n_seqs, n_tok, false, &rows, err) : SNUG_OK;
    return st == SNUG_OK ? st : snug_error_prefix(err, st, "draft model: ");
}

/* ---- one step --------------------------------------------------------------- */

/* The pooled row an embedding's item asks of the step: the last token's
 * in its last chunk, the first token's in its first, every token's sum in
 * each (a mean's); none otherwise. */
static snug_logits_mode pool_mode(snug_pooling p, const snug_sched_item *it)
{
    if (p == SNUG_POOL_MEAN) return SNUG_LOGITS_POOL_SUM;
    if (p == SNUG_POOL_FIRST) return it->pos0 == 0 ? SNUG_LOGITS_POOL_FIRST : SNUG_LOGITS_NONE;
    return it->sample ? SNUG_LOGITS_POOL_LAST : SNUG_LOGITS_NONE;
}

/* The step's description from the scheduler's items (under the mutex). */
static snug_step build_step(snug_engine *e, int32_t n_items, int32_t n_tokens)
{
    snug_serving_state *sv = e->at.serving;
    int32_t at = 0;
    for (int32_t k = 0; k < n_items; k++) {
        const snug_sched_item *it = &sv->items[k];
        snug_seq_slot *q = slot_of(e, it->seq);
        snug_request *r = q->owner;
        if (q->choice == 0 && r->cached_tokens < 0) r->cached_tokens = e->sched.seqs[it->seq].n_cached;
        memcpy(sv->step_tokens + at, q->ids + it->pos0, (size_t)it->n_tokens * sizeof(int32_t));
        at += it->n_tokens;
        snug_logits_mode mode = it->all_logits || it->n_draft > 0 ? SNUG_LOGITS_ALL
                              : r->pooling != SNUG_POOL_NONE ? pool_mode(r->pooling, it)
                              : it->sample ? SNUG_LOGITS_LAST : SNUG_LOGITS_NONE;
        bool windowed = e->at.wpool != NULL;
        sv->step_seqs[k] = (snug_step_seq){it->n_tokens, (int32_t)it->pos0, q->table.ids, q->table.n,
                                           mode, windowed ? q->wtable.ids : NULL, windowed ? q->wtable.n : 0};
        e->ring_pos[k] = (q->ring_head + q->ring_n) % e->at.serving->ring_cap;
        e->n_out[k] = it->sample;
        e->n_accepted[k] = 0;
    }
    return (snug_step){sv->step_tokens, n_tokens, sv->step_seqs, n_items, 0};
}

/* The log of the sum of exp over row[0 .. n), and the k most likely
 * tokens with their log-probabilities into ids and lps, most likely first
 * (*n_top of them). */
static double top_logprobs(const float *row, int32_t n, int32_t k, int32_t *ids, float *lps,
                           int32_t *n_top)
{
    float max = row[0];
    for (int32_t i = 1; i < n; i++) max = row[i] > max ? row[i] : max;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)(row[i] - max));
    double lse = (double)max + log(sum);
    int32_t m = 0; /* insertion into the k best so far, kept sorted */
    for (int32_t i = 0; i < n && k > 0; i++) {
        if (m == k && row[i] <= row[ids[m - 1]]) continue;
        int32_t at = m < k ? m++ : k - 1;
        while (at > 0 && row[ids[at - 1]] < row[i]) {
            ids[at] = ids[at - 1];
            at--;
        }
        ids[at] = i;
    }
    for (int32_t j = 0; j < m; j++) lps[j] = (float)((double)row[ids[j]] - lse);
    *n_top = m;
    return lse;
}

/* Masks the logits of the constrained sequence q (constrain.h). Returns
 * false when no token may follow. */
static bool constrain_logits(snug_engine *e, snug_seq_slot *q, float *logits)
{
    snug_constrainer *c = &e->at.serving->constrain;
    c->masks++;
    return !q->grammar_failed && snug_constrain_mask(c, q->grammar_key, &q->match, &q->stop_params, logits) > 0;
}

/* Advances q's matcher by token id; false when its bytes do not keep to
 * the grammar (a token the mask left out: every logit was -infinity or NaN).
 * An end-of-sequence token ends the text where the matcher accepts. */
static bool constrain_advance(snug_engine *e, snug_seq_slot *q, int32_t id)
{
    snug_constrainer *c = &e->at.serving->constrain;
    if (snug_stop_is_eos(&q->stop_params, id) && snug_gmatch_accepting(&q->match)) return true;
    size_t n = snug_tokenizer_token_bytes(e->at.tok, id, (char *)c->token_text, c->token_cap);
    return n > 0 && snug_gmatch_advance_bytes(&q->match, c->token_text, n, NULL) == SNUG_GMATCH_OK;
}

/* Samples the next token of the sequence in slot i from its logits, feeds
 * the stop conditions, and writes the output to its ring at pos (not yet
 * published). A constrained sequence samples under its grammar's mask, and
 * ends when its grammar is complete, or with GRAMMAR_FAILED (no token)
 * when nothing may follow. While its reasoning budget closes its think
 * block (think.h), the closing ids are taken in place of a sample (under a
 * grammar too, which must allow them). */
static void sample_one(snug_engine *e, int32_t i, float *logits, int32_t n_vocab, int32_t chosen,
                       const snug_draft *draft, int32_t pos)
{
    snug_serving_state *sv = e->at.serving;
    snug_seq_slot *q = slot_of(e, i);
    snug_out_record *rec = &q->ring[pos];
    rec->n_top = 0;
    double lse = 0;
    if (q->n_logprobs >= 0) { /* the raw row, before the sampler changes it */
        memcpy(sv->lp_row, logits, (size_t)n_vocab * sizeof(float));
        lse = top_logprobs(sv->lp_row, n_vocab, q->n_logprobs, rec->top_ids,
                           rec->top_logprobs, &rec->n_top);
    }
    int32_t forced = snug_think_forced(&q->think, &q->think_params);
    bool kept = forced >= 0 || !q->grammar || constrain_logits(e, q, logits);
    int32_t id = forced >= 0 ? forced
                 : chosen >= 0 ? chosen /* the ranks' argmax: what greedy sampling picks */
                 : snug_sample_draft(&q->sampling, &q->sampler, logits, n_vocab, q->ids,
                                     (int32_t)q->n_prompt, q->ids + q->n_prompt,
                                     (int32_t)(q->n_ids - q->n_prompt), sv->scratch[0], draft);
    if (q->grammar && (!kept || !constrain_advance(e, q, id))) {
        size_t n = 0;
        snug_stop_end(&q->stop, SNUG_FINISH_GRAMMAR_FAILED, rec->text, &n);
        n += snug_tok_stream_finish(&q->stream, rec->text + n, 4);
        *rec = (snug_out_record){.token = -1, .finish = SNUG_FINISH_GRAMMAR_FAILED, .n_text = (uint32_t)n,
                                 .text = rec->text};
        return;
    }
    q->ids[q->n_ids++] = id;
    size_t n_text = 0, n_emit = 0, n_more = 0;
    if (e->at.tok && snug_tok_stream_push(&q->stream, id, q->text, q->text_cap, &n_text, NULL) != SNUG_OK)
        n_text = 0;
    snug_think_feed(&q->think, &q->think_params, id, q->text, n_text, e->at.tok && q->stream.n_pending > 0);
    if (q->n_logprobs >= 0) rec->logprob = (float)((double)sv->lp_row[id] - lse);
    snug_finish f = snug_stop_feed(&q->stop_params, &q->stop, id, q->text, n_text, rec->text, &n_emit);
    if (f == SNUG_FINISH_NONE && q->grammar && snug_constrain_complete(&q->match))
        f = snug_stop_end(&q->stop, SNUG_FINISH_GRAMMAR, rec->text + n_emit, &n_more);
    if (f == SNUG_FINISH_NONE && q->n_ids >= sv->shape.max_model_len)
        f = snug_stop_end(&q->stop, SNUG_FINISH_MODEL_LENGTH, rec->text + n_emit, &n_more);
    if ((f == SNUG_FINISH_MAX_TOKENS || f == SNUG_FINISH_MODEL_LENGTH || f == SNUG_FINISH_GRAMMAR) && e->at.tok)
        n_more += snug_tok_stream_finish(&q->stream, rec->text + n_emit + n_more, 4);
    rec->token = id;
    rec->finish = f;
    rec->n_text = (uint32_t)(n_emit + n_more);
}

/* Samples item k's rows from row0 on (spec.h): its last known token's,
 * then each draft's while the draft equals the token sampled before it.
 * The outputs go to its ring from ring_pos[k] (n_out[k] of them); the
 * item's n_kept is the drafts whose keys and values stay. A constrained
 * sequence stops before a row whose mask is not cached, as it would wait
 * out of a step for it: its last output, a draft kept, is then computed
 * again by its next step. */
static void sample_item(snug_engine *e, int32_t k, const snug_logits *lg, int32_t row0)
{
    snug_sched_item *it = &e->at.serving->items[k];
    snug_seq_slot *q = slot_of(e, it->seq);
    int32_t n = 0, accepted = 0, looked = 0;
    for (int32_t j = 0; j <= it->n_draft; j++) {
        if (j > 0 && q->grammar && !snug_constrain_cached(&e->at.serving->constrain, q->grammar_key, &q->match))
            break;
        int32_t draft = j < it->n_draft ? q->ids[q->n_ids] : -1; /* (read before the sample takes its place) */
        int32_t row = row0 + j, pos = (e->ring_pos[k] + n++) % e->at.serving->ring_cap;
        float *logits = lg->rows ? (float *)lg->rows + (size_t)row * (size_t)lg->stride : NULL;
        /* a sampled draft is verified against the row it was drawn from (snug_sample_draft);
         * a greedy or looked-up one put all its weight on its token: kept when the sample is it */
        bool sampled = draft >= 0 && e->at.draft && e->qrow[k] >= 0;
        const snug_serving_state *sv = e->at.serving;
        snug_draft dq = {draft, sampled ? sv->draft_q + (size_t)(e->qrow[k] + j) * (size_t)sv->shape.n_vocab : NULL,
                         sv->shape.n_vocab, q->sampling.temperature};
        sample_one(e, it->seq, logits, lg->n_vocab, lg->best ? lg->best[row].id : -1, sampled ? &dq : NULL, pos);
        if (draft < 0) break;
        looked++;
        if (q->ring[pos].token != draft) break;
        accepted++;
        if (q->ring[pos].finish != SNUG_FINISH_NONE) break;
    }
    it->n_kept = n - 1;
    e->n_out[k] = n;
    e->n_accepted[k] = accepted;
    if (it->n_draft > 0) snug_spec_record(&q->spec, looked, accepted);
}

/* Fills the prompt log-probabilities that item it's rows give: the row of
 * position p predicts the token at p + 1. */
static void prompt_logprobs(snug_engine *e, const snug_sched_item *it, const snug_logits *lg,
                            int32_t row0)
{
    snug_seq_slot *q = slot_of(e, it->seq);
    snug_prompt_logprob *out = q->prompt_lp;
    if (!out) return;
    for (int32_t j = 0; j < it->n_tokens; j++) {
        int64_t target = it->pos0 + j + 1;
        if (target >= q->n_prompt) break;
        const float *row = lg->rows + (size_t)(row0 + j) * (size_t)lg->stride;
        snug_prompt_logprob *lp = &out[target];
        double lse = top_logprobs(row, lg->n_vocab, SNUG_MAX(0, q->n_logprobs), lp->top_ids,
                                  lp->top_logprobs, &lp->n_top);
        lp->logprob = (float)((double)row[q->ids[target]] - lse);
    }
}

/* Takes an embedding's pooled row (the item's: the last token's or the
 * first's, or the sum of its tokens') into its vector. */
static void take_pooled(snug_engine *e, snug_request *r, const snug_sched_item *it, const float *row)
{
    int32_t h = snug_engine_hidden_size(e);
    if (r->pooling != SNUG_POOL_MEAN) {
        memcpy(r->embedding, row, (size_t)h * sizeof(float));
        return;
    }
    if (it->pos0 == 0) memset(r->embedding, 0, (size_t)h * sizeof(float));
    for (int32_t k = 0; k < h; k++) r->embedding[k] += row[k];
}

/* Writes the one output of a prompt-only request in slot q (an embedding,
 * a score) to its ring at pos: no token, finish POOLED. */
static void end_taken(snug_seq_slot *q, int32_t pos)
{
    snug_out_record *rec = &q->ring[pos];
    *rec = (snug_out_record){.token = -1, .finish = SNUG_FINISH_POOLED, .n_text = 0, .text = rec->text};
    q->stop.finish = SNUG_FINISH_POOLED;
}

/* Ends the embedding in slot i: its vector made the mean (of every prompt
 * token) and scaled to length 1 when asked, and its one output (no token,
 * finish POOLED) written to its ring at pos (not yet published). */
static void end_pooled(snug_engine *e, int32_t i, int32_t pos)
{
    snug_seq_slot *q = slot_of(e, i);
    snug_request *r = q->owner;
    int32_t h = snug_engine_hidden_size(e);
    double norm = 0, scale = r->pooling == SNUG_POOL_MEAN ? 1.0 / (double)r->n_prompt : 1.0;
    for (int32_t k = 0; k < h; k++) norm += (double)r->embedding[k] * r->embedding[k] * scale * scale;
    if (r->normalize && norm > 0) scale /= sqrt(norm);
    for (int32_t k = 0; k < h; k++) r->embedding[k] = (float)(r->embedding[k] * scale);
    if (r->classify) snug_model_classify(e->at.model, r->embedding, r->scores, NULL); /* (checked at submit) */
    end_taken(q, pos);
}

/* True when every token the step samples is plain greedy (temperature 0,
 * no penalties, bias, log-probabilities or grammar) and no item wants its prompt's
 * rows: then each row's argmax is all the step needs of the logits. */
static bool greedy_only(snug_engine *e, int32_t n_items)
{
    const snug_sched_item *items = e->at.serving->items;
    for (int32_t k = 0; k < n_items; k++) {
        if (items[k].all_logits) return false;
        const snug_seq_slot *q = slot_of(e, items[k].seq);
        const snug_request *owner = q->owner;
        if (owner && (owner->pooling != SNUG_POOL_NONE || owner->score_ids)) return false; /* (rows, not argmaxes) */
        if (!items[k].sample) continue;
        const snug_sampling_params *p = &q->sampling;
        if (p->temperature != 0.0f || p->n_logit_bias > 0 || p->repetition_penalty != 1.0f ||
            p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f || q->n_logprobs >= 0 || q->grammar)
            return false;
    }
    return true;
}

/* Runs one planned step without the mutex: the forward pass, then a sample
 * for every item that asks for one. */
static snug_status run_step(snug_engine *e, const snug_step *step, int32_t n_items)
{
    snug_logits lg;
    double t0 = snug_now_seconds();
    snug_status st = e->at.draft ? draft_tokens(e, n_items, &e->fail_err) : SNUG_OK;
    double t_pass = snug_now_seconds();
    if (st == SNUG_OK)
        st = greedy_only(e, n_items) ? snug_stepper_run_greedy(e->at.stepper, e->at.kv, step, &lg, &e->fail_err)
                                     : snug_stepper_run(e->at.stepper, e->at.kv, step, &lg, &e->fail_err);
    if (st == SNUG_OK && e->plan_opts.spec_tokens > 0) /* what a token costs a step: whether drafts pay */
        snug_spec_cost_step(&e->cost, step->n_tokens, snug_now_seconds() - t_pass);
    if (st == SNUG_OK && e->at.draft) st = draft_follow(e, n_items, &e->fail_err); /* (its own arena) */
    if (st != SNUG_OK) return st;
    const snug_sched_item *items = e->at.serving->items;
    int32_t row = 0, pooled = 0; /* (the pooled rows come after every vocabulary row) */
    for (int32_t k = 0; k < n_items; k++) {
        const snug_request *r = slot_of(e, items[k].seq)->owner;
        pooled += items[k].all_logits ? items[k].n_tokens
                  : items[k].sample && r && r->pooling == SNUG_POOL_NONE ? 1 + items[k].n_draft : 0;
    }
    for (int32_t k = 0; k < n_items; k++) {
        const snug_sched_item *it = &items[k];
        snug_request *r = slot_of(e, it->seq)->owner;
        if (r && r->pooling != SNUG_POOL_NONE) { /* an embedding: its rows, and at its end the vector */
            if (pool_mode(r->pooling, it) != SNUG_LOGITS_NONE) take_pooled(e, r, it, lg.rows + (size_t)pooled++ * (size_t)lg.stride);
            if (it->sample) end_pooled(e, it->seq, e->ring_pos[k]);
            continue;
        }
        if (it->all_logits) { /* a row per token: the prompt's log-probabilities */
            prompt_logprobs(e, it, &lg, row);
            row += it->n_tokens - it->sample; /* the last row, if it samples, is taken below */
        }
        if (it->sample && r && r->score_ids) { /* a score: its ids' raw logits */
            const float *logits = lg.rows + (size_t)row++ * (size_t)lg.stride;
            for (int32_t s = 0; s < r->n_score_ids; s++) r->scores[s] = logits[r->score_ids[s]];
            end_taken(slot_of(e, it->seq), e->ring_pos[k]);
        } else if (it->sample) {
            sample_item(e, k, &lg, row);
            row += 1 + it->n_draft;
        }
    }
    for (int32_t k = 0; k < n_items && e->at.draft; k++) { /* where the draft's cache stands */
        const snug_sched_item *it = &items[k];
        snug_seq_slot *q = slot_of(e, it->seq);
        q->d_computed = it->n_draft > 0 ? it->pos0 + 1 + SNUG_MIN(it->n_kept, it->n_draft - 1)
                                        : it->pos0 + it->n_tokens;
    }
    /* masks that are not cached: walked in a share of the step's time */
    double t1 = snug_now_seconds();
    check_masks(e, n_items);
    walk_masks(e, t1 + SNUG_MAX(SNUG_CONSTRAIN_WALK_MIN_S, SNUG_CONSTRAIN_WALK_SHARE * (t1 - t0)));
    return SNUG_OK;
}

/* Publishes the step's outputs and ends what finished (under the mutex). */
static void publish(snug_engine *e, int32_t n_items)
{
    const snug_sched_item *items = e->at.serving->items;
    snug_sched_done(&e->sched, items, n_items);
    double now = snug_now_seconds();
    for (int32_t k = 0; k < n_items; k++) {
        if (!items[k].sample) continue;
        int32_t i = items[k].seq, n = e->n_out[k];
        snug_seq_slot *q = slot_of(e, i);
        snug_sched_append(&e->sched, i, n);
        const snug_request *r = q->owner;
        double gap = q->t_last > 0 ? (now - q->t_last) / n : 0; /* (outputs of a step share its time) */
        for (int32_t j = 0; j < n; j++) {
            e->c.generation_tokens += q->ring[(e->ring_pos[k] + j) % e->at.serving->ring_cap].token >= 0; /* an end
                                                                  * without a token counts none */
            if (j == 0 && q->t_last == 0 && r)
                observe(&e->c.ttft, now - r->t_submit);
            else
                observe(&e->c.itl, gap);
        }
        q->ring_n += n;
        q->t_last = now;
        if (items[k].n_draft > 0) {
            e->c.spec_drafts++;
            e->c.spec_drafted_tokens += items[k].n_draft;
            e->c.spec_accepted_tokens += e->n_accepted[k];
        }
        if (last_out(e, k)->finish != SNUG_FINISH_NONE)
            snug_sched_finish(&e->sched, i); /* its blocks back now; the slot waits to be drained */
    }
    e->c.steps++;
    e->c.spec_draft_seconds = e->draft_seconds;
    e->c.grammar_masks = e->at.serving->constrain.masks; /* the loop's, copied under the mutex */
    e->c.grammar_walks = e->at.serving->constrain.walks;
    e->c.grammar_composed = e->at.serving->constrain.composed;
    e->c.grammar_walk_seconds = e->at.serving->constrain.walk_seconds;
    e->c.grammar_waiting = masks_waiting(e);
    snug_comm *comm = snug_stepper_comm(e->at.stepper); /* the step loop's, copied under the mutex */
    if (comm) snug_comm_allreduce_stats(comm, &e->c.allreduce_calls, &e->c.allreduce_seconds);
}

/* Tells the owners of the step's sequences that outputs are ready. */
static void notify_owners(snug_engine *e, int32_t n_items)
{
    const snug_sched_item *items = e->at.serving->items;
    for (int32_t k = 0; k < n_items; k++) {
        snug_request *r = slot_of(e, items[k].seq)->owner;
        if (items[k].sample && r && r->notify) r->notify(r->notify_ctx);
    }
}

/* Ends everything at shutdown or failure: queued requests and running
 * sequences alike, with an ABORT output where a consumer waits. */
static void end_all(snug_engine *e)
{
    while (e->q_n > 0) {
        snug_request *r = e->queue[e->q_head];
        e->q_head = (e->q_head + 1) % e->q_cap;
        e->q_n--;
        r->state = REQ_DONE;
    }
    int32_t n_slots = e->at.serving->shape.max_num_seqs;
    for (int32_t i = 0; i < n_slots; i++) {
        snug_seq_slot *q = slot_of(e, i);
        if (!q->owner || e->sched.seqs[i].phase == SNUG_SEQ_FREE) continue;
        snug_sched_finish(&e->sched, i);
        if (q->ring_n < e->at.serving->ring_cap) {
            snug_out_record *rec = &q->ring[(q->ring_head + q->ring_n) % e->at.serving->ring_cap];
            size_t n = 0;
            snug_stop_end(&q->stop, SNUG_FINISH_ABORT, rec->text, &n);
            rec->token = -1;
            rec->finish = SNUG_FINISH_ABORT;
            rec->n_text = (uint32_t)n;
            rec->n_top = 0;
            q->ring_n++;
        } else {
            free_slot(e, i); /* a consumer a full ring behind gets what is there, then done */
        }
    }
}

/* The model's end-of-sequence ids: config.json's, then the tokenizer's. */
static void collect_eos(snug_engine *e);

/* Plans on this thread, the one that will run every step: the profile
 * step's threads (the model's pool) and stack are then the ones serving uses, and what
 * they hold is in U. Tells snug_engine_open how it went. */
static bool plan_here(snug_engine *e)
{
    snug_status st = snug_planner_open(e->dir, &e->plan_opts, &e->plan, e->open_err);
    if (st == SNUG_OK) {
        snug_planner_parts(e->plan, &e->at);
        snug_serving_state *sv = e->at.serving;
        const snug_step_shape *shape = snug_model_step_shape(e->at.model);
        snug_sched_init(&e->sched, sv->shape.max_num_seqs, sv->shape.max_num_batched_tokens,
                        shape->n_logits_max > 0 ? shape->n_logits_max : shape->n_seqs_max, sv->shape.block_size,
                        sv->sched, sv->sched_running, sv->sched_waiting, e->at.pool);
        if (e->at.wpool) snug_sched_set_window(&e->sched, e->at.wpool, e->at.window);
        collect_eos(e);
    }
    pthread_mutex_lock(&e->mu);
    e->open_status = st;
    e->open_done = true;
    pthread_cond_broadcast(&e->out);
    pthread_mutex_unlock(&e->mu);
    return st == SNUG_OK;
}

/* Makes the next group of the KV cache resident (the plan's populate after
 * ready), with the lock let go meanwhile, and gives its blocks to the pool.
 * A group the system will not back ends the population (the planner says
 * so through on_phase): the resident blocks serve. */
static void populate_more(snug_engine *e)
{
    pthread_mutex_unlock(&e->mu);
    snug_planner_populate_next(e->plan, NULL);
    pthread_mutex_lock(&e->mu);
    snug_block_pool_set_ready(e->at.pool, snug_planner_kv_resident(e->plan));
}

/* Between steps, while the KV cache is being made resident: groups until
 * the ready free blocks hold what the next step could take for what is
 * asked now (snug_sched_blocks_wanted), then one more while they hold
 * less than twice that. A decode of a few sequences so waits on no group
 * (a group at every step of the first turns once held serving back), and
 * a burst of prompts waits for what it needs; idle time makes the rest
 * resident (step_loop). */
static void populate_between_steps(snug_engine *e)
{
    int32_t wanted = snug_sched_blocks_wanted(&e->sched);
    while (!e->stopping && snug_planner_populating(e->plan) && e->at.pool->n_free < wanted) populate_more(e);
    if (!e->stopping && snug_planner_populating(e->plan) && e->at.pool->n_free < 2 * wanted) populate_more(e);
}

static void *step_loop(void *arg)
{
    snug_engine *e = arg;
    if (!plan_here(e)) return NULL;
    pthread_mutex_lock(&e->mu);
    while (!e->stopping) {
        if (e->check_ranks) {
            e->check_ranks = false;
            pthread_mutex_unlock(&e->mu);
            snug_status st = snug_stepper_ping(e->at.stepper, &e->fail_err);
            pthread_mutex_lock(&e->mu);
            if (st != SNUG_OK) {
                e->failed = true;
                break;
            }
        }
        admit_queued(e);
        tend_slots(e);
        offer_drafts(e);
        int32_t n_tokens = 0;
        int32_t n_items = snug_sched_step(&e->sched, e->at.serving->items, &n_tokens);
        if (n_items == 0) {
            pthread_cond_broadcast(&e->out); /* cancelled requests may be done */
            if (e->at.serving->constrain.walking || e->n_walk_list > 0) { /* only masks to walk */
                pthread_mutex_unlock(&e->mu);
                walk_masks(e, snug_now_seconds() + SNUG_CONSTRAIN_WALK_IDLE_S);
                pthread_mutex_lock(&e->mu);
            } else if (snug_planner_populating(e->plan)) /* idle, or waiting for blocks */
                populate_more(e);
            else
                pthread_cond_wait(&e->work, &e->mu);
            continue;
        }
        snug_step step = build_step(e, n_items, n_tokens);
        pthread_mutex_unlock(&e->mu);
        snug_status st = run_step(e, &step, n_items);
        pthread_mutex_lock(&e->mu);
        if (st != SNUG_OK) {
            e->failed = true;
            break;
        }
        publish(e, n_items);
        pthread_cond_broadcast(&e->out);
        notify_owners(e, n_items);
        populate_between_steps(e);
    }
    if (!e->failed) snug_stepper_stop(e->at.stepper, NULL); /* the followers return */
    end_all(e);
    e->loop_done = true;
    pthread_cond_broadcast(&e->out);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- the API ---------------------------------------------------------------- */

static void collect_eos(snug_engine *e)
{
    const snug_model_config *cfg = e->at.config;
    int32_t ids[SNUG_STOP_EOS_MAX * 2], n = 0;
    for (int32_t i = 0; i < cfg->n_eos && n < SNUG_STOP_EOS_MAX; i++) ids[n++] = cfg->eos_token_ids[i];
    if (e->at.tok) n += snug_tokenizer_eos_ids(e->at.tok, ids + n, SNUG_STOP_EOS_MAX);
    for (int32_t i = 0; i < n && e->n_eos < SNUG_STOP_MODEL_EOS_MAX; i++) {
        bool seen = ids[i] < 0;
        for (int32_t j = 0; j < e->n_eos; j++) seen |= e->eos[j] == ids[i];
        if (!seen) e->eos[e->n_eos++] = ids[i];
    }
}

/* The plan's options for an engine of opts: the drafts' rows of logits
 * (every rank the same). */
static snug_planner_opts plan_opts_of(const snug_engine_opts *opts)
{
    snug_planner_opts o = opts->plan;
    o.spec_tokens = snug_spec_tokens(&opts->spec);
    o.draft_dir = opts->spec.draft_model;
    return o;
}

snug_status snug_engine_open(const char *dir, const snug_engine_opts *opts, snug_engine **out,
                             snug_error *err)
{
    *out = NULL;
    snug_status st = snug_spec_opts_check(&opts->spec, err);
    if (st != SNUG_OK) return snug_dist_agree(opts->plan.comm, st, err); /* (the others learn of it there) */
    int32_t q_cap = opts->max_queue > 0 ? opts->max_queue : SNUG_MAX_QUEUE_DEFAULT;
    int32_t max_seqs = opts->plan.max_num_seqs > 0 ? opts->plan.max_num_seqs : SNUG_MAX_NUM_SEQS_DEFAULT;
    /* made before the plan, so that the plan counts it in S */
    bool planning = false; /* the plan's thread runs: with several ranks, the ranks agree there */
    snug_engine *e = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *e, err);
    if (!e) { /* the other ranks wait at the plan's first agreement: they learn of it there */
        st = snug_error_prefix(err, SNUG_NOMEM, "engine: ");
        return snug_dist_agree(opts->plan.comm, st, err);
    }
    e->queue = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)q_cap * sizeof *e->queue, err);
    e->ring_pos = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_seqs * sizeof *e->ring_pos, err);
    e->n_out = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_seqs * sizeof *e->n_out, err);
    e->n_accepted = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_seqs * sizeof *e->n_accepted, err);
    e->walk_list = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_seqs * sizeof *e->walk_list, err);
    int32_t n_keys = max_seqs + SNUG_CONSTRAIN_CACHE; /* the live grammars, and as many retired as masks */
    e->grammar_keys_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_grammar_keys_bytes(n_keys), err);
    if (opts->spec.draft_model) { /* the draft's steps: the model's tokens and one more a sequence */
        int32_t max_tokens = opts->plan.max_num_batched_tokens > 0 ? opts->plan.max_num_batched_tokens
                             : SNUG_MAX(SNUG_MAX_NUM_BATCHED_TOKENS_DEFAULT, max_seqs);
        e->dseqs = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_seqs * sizeof *e->dseqs, err);
        e->dtokens = snug_mem_alloc(SNUG_MEM_OTHER, ((size_t)max_tokens + (size_t)max_seqs) * sizeof *e->dtokens, err);
        e->ditem = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_seqs * sizeof *e->ditem, err);
        e->item_at = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_seqs * sizeof *e->item_at, err);
        e->qrow = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_seqs * sizeof *e->qrow, err);
        if (!e->dseqs || !e->dtokens || !e->ditem || !e->item_at || !e->qrow) {
            st = snug_error_prefix(err, SNUG_NOMEM, "engine: ");
            goto fail;
        }
    }
    if (!e->queue || !e->ring_pos || !e->n_out || !e->n_accepted || !e->walk_list || !e->grammar_keys_mem) {
        st = snug_error_prefix(err, SNUG_NOMEM, "engine: ");
        goto fail;
    }
    e->q_cap = q_cap;
    snug_grammar_keys_init(&e->grammar_keys, e->grammar_keys_mem, n_keys);
    if (getrandom(e->grammar_secret, sizeof e->grammar_secret, GRND_NONBLOCK) != (ssize_t)sizeof e->grammar_secret)
        for (int i = 0; i < 4; i++) /* no entropy yet: the clock, spread (a weaker secret, still a compare) */
            e->grammar_secret[i] = snug_hash_bytes((uint64_t)(snug_now_seconds() * 1e9) + (uint64_t)i, &e, sizeof e);
    if (getrandom(&e->seed_key, sizeof e->seed_key, GRND_NONBLOCK) != (ssize_t)sizeof e->seed_key)
        e->seed_key = snug_hash_bytes((uint64_t)(snug_now_seconds() * 1e9), &e, sizeof e);
    e->dir = dir;
    e->spec = snug_spec_opts_resolved(&opts->spec);
    e->plan_opts = plan_opts_of(opts);
    e->open_err = err;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->out, NULL);
    e->started = true;
    if (pthread_create(&e->thread, NULL, step_loop, e) != 0) {
        e->started = false;
        st = snug_errorf(err, SNUG_INTERNAL, "engine: cannot start the step loop's thread");
        goto fail;
    }
    planning = true;
    pthread_mutex_lock(&e->mu);
    while (!e->open_done) pthread_cond_wait(&e->out, &e->mu);
    st = e->open_status;
    pthread_mutex_unlock(&e->mu);
    e->open_err = NULL;
    if (st != SNUG_OK) goto fail;
    *out = e;
    return SNUG_OK;
fail:
    if (!planning) st = snug_dist_agree(opts->plan.comm, st, err);
    snug_engine_close(e);
    return st;
}

snug_status snug_engine_follow(const char *dir, const snug_engine_opts *opts, bool *planned,
                               snug_error *err)
{
    snug_planned *p = NULL;
    *planned = false;
    snug_planner_opts po = plan_opts_of(opts);
    snug_status st = snug_planner_open(dir, &po, &p, err);
    if (st != SNUG_OK) return st;
    *planned = true;
    snug_plan_parts at;
    snug_planner_parts(p, &at);
    st = snug_stepper_follow(at.stepper, at.kv, err);
    if (st == SNUG_OK) snug_planner_close(p);
    return st;
}

bool snug_engine_failed(snug_engine *e)
{
    pthread_mutex_lock(&e->mu);
    bool f = e->failed;
    pthread_mutex_unlock(&e->mu);
    return f;
}

void snug_engine_check_ranks(snug_engine *e, double grace_s)
{
    snug_comm *comm = snug_stepper_comm(e->at.stepper);
    if (!comm) return;
    snug_comm_hurry(comm, grace_s); /* a step in flight is checked by its own waits */
    pthread_mutex_lock(&e->mu);
    e->check_ranks = true;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->mu);
}

const char *snug_engine_error(snug_engine *e) { return snug_engine_failed(e) ? e->fail_err.msg : ""; }

const snug_plan_report *snug_engine_plan(const snug_engine *e) { return e->at.report; }

const snug_tokenizer *snug_engine_tokenizer(const snug_engine *e) { return e->at.tok; }

int64_t snug_engine_max_model_len(const snug_engine *e) { return e->at.serving->shape.max_model_len; }

int32_t snug_engine_n_vocab(const snug_engine *e) { return e->at.config->vocab_size; }

int32_t snug_engine_hidden_size(const snug_engine *e) { return e->at.config->hidden_size; }

int32_t snug_engine_n_labels(const snug_engine *e) { return e->at.config->n_labels; }

size_t snug_engine_text_bytes(const snug_engine *e)
{
    return snug_stop_emit_bytes(e->at.serving->seqs[0].text_cap);
}

snug_status snug_engine_check(const snug_engine *e, const snug_request *r, snug_error *err)
{
    int32_t n_vocab = snug_engine_n_vocab(e);
    int64_t max_len = snug_engine_max_model_len(e);
    if (r->n_prompt < 1 || !r->prompt)
        return snug_errorf(err, SNUG_INVALID, "prompt: expected at least one token");
    for (int64_t i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= n_vocab)
            return snug_errorf(err, SNUG_INVALID, "prompt: token %lld is %d, expected 0 to %d",
                               (long long)i, r->prompt[i], n_vocab - 1);
    if (r->top_logprobs < 0 || r->top_logprobs > SNUG_LOGPROBS_MAX)
        return snug_errorf(err, SNUG_INVALID, "top_logprobs: expected 0 to %d, got %d",
                           SNUG_LOGPROBS_MAX, r->top_logprobs);
    if (r->n < 1 || r->n > SNUG_CHOICES_MAX || r->n > e->at.serving->shape.max_num_seqs)
        return snug_errorf(err, SNUG_INVALID, "n: expected 1 to %d, got %d",
                           SNUG_MIN(SNUG_CHOICES_MAX, e->at.serving->shape.max_num_seqs), r->n);
    if (r->stop.max_tokens < 0)
        return snug_errorf(err, SNUG_INVALID, "max_tokens: expected at least 1, got %d",
                           r->stop.max_tokens);
    if (r->pooling != SNUG_POOL_NONE && (r->n != 1 || r->grammar || r->prompt_logprobs || !r->embedding ||
                                         r->pooling > SNUG_POOL_LAST))
        return snug_errorf(err, SNUG_INVALID, "an embedding (pooling %d) takes n 1, no grammar and no prompt "
                           "log-probabilities, and a buffer for the vector", (int)r->pooling);
    if (r->classify && (r->pooling != SNUG_POOL_LAST || r->normalize || !r->scores || r->score_ids ||
                        e->at.config->n_labels < 1))
        return snug_errorf(err, SNUG_INVALID, "classify: the model is %s; a score takes the last token's pooled "
                           "vector, not normalized, and a buffer", e->at.config->n_labels < 1 ? "no classifier"
                                                                                               : "a classifier");
    if (r->score_ids && (r->n != 1 || r->grammar || r->pooling != SNUG_POOL_NONE || !r->scores ||
                         r->n_score_ids < 1 || r->n_score_ids > SNUG_SCORE_IDS_MAX))
        return snug_errorf(err, SNUG_INVALID, "a score takes n 1, no grammar, no pooling, 1 to %d ids and a "
                           "buffer for their logits", SNUG_SCORE_IDS_MAX);
    for (int32_t i = 0; r->score_ids && i < r->n_score_ids; i++)
        if (r->score_ids[i] < 0 || r->score_ids[i] >= n_vocab)
            return snug_errorf(err, SNUG_INVALID, "score ids: %d is outside the vocabulary (0 to %d)", r->score_ids[i],
                               n_vocab - 1);
    if (r->grammar && !e->at.serving->constrain.trie)
        return snug_errorf(err, SNUG_INVALID, "grammar: the model has no tokenizer, so its tokens' "
                           "text is unknown: constrained decoding needs one");
    if (r->n_prompt >= max_len)
        return snug_errorf(err, SNUG_INVALID, "context_length_exceeded: this model's maximum "
                           "context length is %lld tokens; the prompt has %lld, leaving no room "
                           "for output", (long long)max_len, (long long)r->n_prompt);
    if (r->stop.max_tokens && r->n_prompt + r->stop.max_tokens > max_len)
        return snug_errorf(err, SNUG_INVALID, "context_length_exceeded: this model's maximum "
                           "context length is %lld tokens; the request has %lld in its prompt "
                           "and asks for %d more", (long long)max_len, (long long)r->n_prompt,
                           r->stop.max_tokens);
    snug_status st = snug_sampling_params_validate(&r->sampling, n_vocab, err);
    if (st == SNUG_OK) st = snug_stop_params_validate(&r->stop, err);
    if (st == SNUG_OK) st = snug_think_params_check(&r->think, n_vocab, err);
    if (st == SNUG_OK && r->grammar && (st = snug_engine_check_grammar(r->grammar, err)) != SNUG_OK)
        st = snug_error_prefix(err, st, "grammar: ");
    return st;
}

snug_status snug_engine_check_grammar(const snug_grammar *g, snug_error *err)
{
    return snug_constrain_check_start(g, err);
}

snug_status snug_engine_submit(snug_engine *e, snug_request *r, snug_error *err)
{
    snug_status st = snug_engine_check(e, r, err);
    if (st != SNUG_OK) return st;
    /* the grammar's key and digest (grammar_keys.h), outside the mutex: linear in its size */
    uint64_t hash = r->grammar ? snug_grammar_hash(r->grammar, e->grammar_secret) : 0;
    uint64_t digest = r->grammar ? snug_grammar_hash(r->grammar, e->grammar_secret + 2) : 0;
    pthread_mutex_lock(&e->mu);
    if (e->stopping || e->failed) {
        st = snug_errorf(err, SNUG_BUSY, "the engine is %s", e->failed ? "failed" : "stopping");
    } else if (e->q_n == e->q_cap) {
        st = snug_errorf(err, SNUG_BUSY, "the queue is full (%d requests waiting)", e->q_cap);
    } else {
        r->id = ++e->next_id;
        r->cancelled = false;
        r->n_live = r->n;
        r->cached_tokens = -1;
        r->grammar_hash = hash;
        r->grammar_digest = digest;
        r->state = REQ_QUEUED;
        r->t_submit = snug_now_seconds();
        e->queue[(e->q_head + e->q_n++) % e->q_cap] = r;
        pthread_cond_signal(&e->work);
    }
    pthread_mutex_unlock(&e->mu);
    return st;
}

bool snug_engine_next(snug_engine *e, snug_request *r, snug_output *out, char *text, size_t cap)
{
    bool got = false;
    pthread_mutex_lock(&e->mu);
    if (r->state == REQ_ADMITTED) {
        /* the choice whose oldest output is oldest: take them in slot order */
        for (int32_t k = 0; k < r->n && !got; k++) {
            int32_t i = r->slots[k];
            snug_seq_slot *q = slot_of(e, i);
            if (q->owner != r || q->ring_n == 0) continue;
            const snug_out_record *rec = &q->ring[q->ring_head];
            size_t n = SNUG_MIN((size_t)rec->n_text, cap);
            memcpy(text, rec->text, n);
            *out = (snug_output){k, rec->token, rec->finish, n, rec->logprob, rec->n_top, {0}, {0},
                                 rec->finish == SNUG_FINISH_STOP_STRING ? q->stop.stop_index : -1};
            memcpy(out->top_ids, rec->top_ids, (size_t)rec->n_top * sizeof(int32_t));
            memcpy(out->top_logprobs, rec->top_logprobs, (size_t)rec->n_top * sizeof(float));
            q->ring_head = (q->ring_head + 1) % e->at.serving->ring_cap;
            q->ring_n--;
            if (rec->finish != SNUG_FINISH_NONE) free_slot(e, i);
            else if (q->ring_n == SNUG_OUT_RING - 1) pthread_cond_signal(&e->work); /* unpaused */
            got = true;
        }
        if (got && r->state == REQ_DONE) pthread_cond_signal(&e->work); /* slots to admit into */
    }
    pthread_mutex_unlock(&e->mu);
    return got;
}

bool snug_engine_done(snug_engine *e, const snug_request *r)
{
    pthread_mutex_lock(&e->mu);
    bool done = r->state == REQ_DONE;
    pthread_mutex_unlock(&e->mu);
    return done;
}

/* Takes r out of the queue if it is there (under the mutex). */
static void unqueue(snug_engine *e, snug_request *r)
{
    for (int32_t k = 0; k < e->q_n; k++) {
        if (e->queue[(e->q_head + k) % e->q_cap] != r) continue;
        for (; k + 1 < e->q_n; k++)
            e->queue[(e->q_head + k) % e->q_cap] = e->queue[(e->q_head + k + 1) % e->q_cap];
        e->q_n--;
        r->state = REQ_DONE;
        return;
    }
}

void snug_engine_cancel(snug_engine *e, snug_request *r)
{
    pthread_mutex_lock(&e->mu);
    if (r->state == REQ_QUEUED) unqueue(e, r);
    if (r->state == REQ_ADMITTED) {
        r->cancelled = true;
        if (!e->started || e->loop_done) { /* no loop to do it (stopping is not enough: a step may run) */
            for (int32_t k = 0; k < r->n; k++)
                if (slot_of(e, r->slots[k])->owner == r) free_slot(e, r->slots[k]);
        }
        pthread_cond_signal(&e->work);
    }
    pthread_mutex_unlock(&e->mu);
}

void snug_engine_release(snug_engine *e, snug_request *r)
{
    snug_engine_cancel(e, r);
    pthread_mutex_lock(&e->mu);
    while (r->state != REQ_DONE && r->state != 0) { /* 0: never queued (refused) */
        /* after the loop has ended nobody else ends it: do it here */
        if (!e->started || e->loop_done) {
            for (int32_t k = 0; k < r->n; k++)
                if (slot_of(e, r->slots[k])->owner == r) free_slot(e, r->slots[k]);
            break;
        }
        pthread_cond_wait(&e->out, &e->mu);
    }
    pthread_mutex_unlock(&e->mu);
}

int64_t snug_engine_cached_tokens(snug_engine *e, const snug_request *r)
{
    pthread_mutex_lock(&e->mu);
    int64_t n = SNUG_MAX(r->cached_tokens, (int64_t)0);
    pthread_mutex_unlock(&e->mu);
    return n;
}

uint64_t snug_engine_salt(const char *salt, size_t n)
{
    uint64_t h = snug_hash_bytes(SNUG_HASH_SEED, salt, n);
    return h ? h : 1;
}

snug_status snug_engine_reset_prefix_cache(snug_engine *e, int32_t *n_dropped, snug_error *err)
{
    snug_status st = SNUG_OK;
    *n_dropped = 0;
    pthread_mutex_lock(&e->mu);
    if (!e->at.report->prefix_caching)
        st = snug_errorf(err, SNUG_INVALID, "prefix caching is off (--no-prefix-caching)");
    else if (e->sched.n_running > 0 || e->sched.n_waiting > 0 || e->q_n > 0)
        st = snug_errorf(err, SNUG_BUSY, "the prefix cache is reset only when nothing runs: "
                         "%d sequences run, %d wait, %d requests are queued",
                         e->sched.n_running, e->sched.n_waiting, e->q_n);
    else {
        *n_dropped = snug_block_pool_reset_cache(e->at.pool);
        if (e->at.wpool) snug_block_pool_reset_cache(e->at.wpool); /* (its links: to blocks gone) */
    }
    pthread_mutex_unlock(&e->mu);
    return st;
}

void snug_engine_wait(snug_engine *e, snug_request *r, double timeout_s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double s = (double)until.tv_sec + 1e-9 * (double)until.tv_nsec + timeout_s;
    until.tv_sec = (time_t)s;
    until.tv_nsec = (long)((s - (double)until.tv_sec) * 1e9);
    pthread_mutex_lock(&e->mu);
    bool ready = r->state == REQ_DONE || e->stopping || e->failed;
    for (int32_t k = 0; k < r->n && !ready && r->state == REQ_ADMITTED; k++)
        ready = slot_of(e, r->slots[k])->owner == r && slot_of(e, r->slots[k])->ring_n > 0;
    if (!ready) pthread_cond_timedwait(&e->out, &e->mu, &until);
    pthread_mutex_unlock(&e->mu);
}

void snug_engine_counters_get(snug_engine *e, snug_engine_counters *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->c;
    out->running = e->sched.n_running;
    out->waiting = e->sched.n_waiting;
    out->queued = e->q_n;
    out->preemptions = e->sched.n_preemptions;
    snug_block_pool_counts(e->at.pool, &out->kv);
    memset(&out->kv_window, 0, sizeof out->kv_window);
    if (e->at.wpool) snug_block_pool_counts(e->at.wpool, &out->kv_window);
    out->prefix_queried_tokens = e->sched.n_queried;
    out->prefix_hit_tokens = e->sched.n_hit;
    out->failed = e->failed;
    out->tp = e->at.report->tp;
    pthread_mutex_unlock(&e->mu);
}

void snug_engine_stop(snug_engine *e)
{
    if (!e || !e->started || e->joined) return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    e->joined = true; /* the stopping thread's alone */
}

void snug_engine_close(snug_engine *e)
{
    if (!e) return;
    snug_engine_stop(e);
    if (e->queue && e->ring_pos) { /* the mutex and conditions were made */
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->work);
        pthread_cond_destroy(&e->out);
    }
    snug_planner_close(e->plan);
    snug_mem_free(e->ring_pos);
    snug_mem_free(e->n_out);
    snug_mem_free(e->n_accepted);
    snug_mem_free(e->dseqs);
    snug_mem_free(e->dtokens);
    snug_mem_free(e->ditem);
    snug_mem_free(e->item_at);
    snug_mem_free(e->qrow);
    snug_mem_free(e->walk_list);
    snug_mem_free(e->grammar_keys_mem);
    snug_mem_free(e->queue);
    snug_mem_free(e);
}
