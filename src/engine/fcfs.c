/*
 * fcfs.c: the first-come batcher (fcfs.h).
 */
#include "fcfs.h"

#include <string.h>

/* Gives a job's blocks and slot back. */
static void finish(snug_planned *p, snug_fcfs_job *j)
{
    snug_seq_slot *slot = &p->serving.seqs[j->slot];
    snug_block_table_release(&slot->table, &p->pool);
    slot->n_ids = 0;
    j->slot = -1;
}

/* Admits waiting jobs from *next on, in order, while slots and blocks last. */
static void admit(snug_planned *p, snug_fcfs_job *jobs, int32_t n_jobs, int32_t *next,
                  int32_t *running, snug_fcfs_stats *x)
{
    snug_serving_state *sv = &p->serving;
    const snug_model_dims *d = snug_model_get_dims(p->model);
    for (int32_t s = 0; s < sv->shape.max_num_seqs && *next < n_jobs; s++) {
        snug_seq_slot *slot = &sv->seqs[s];
        if (slot->table.n > 0 || slot->n_ids > 0) continue; /* taken */
        snug_fcfs_job *j = &jobs[*next];
        if (!snug_block_table_grow(&slot->table, &p->pool, j->prompt + j->output,
                                   sv->shape.block_size)) {
            x->waits++;
            return;
        }
        j->slot = s;
        snug_sampling_params sp;
        snug_sampling_params_default(&sp);
        slot->sampling = sp;
        snug_sampler_state_init(&slot->sampler, &slot->sampling, (uint64_t)*next + 1);
        for (int32_t k = 0; k < j->prompt; k++)
            slot->ids[k] = (int32_t)(((int64_t)k * 31 + *next) % d->vocab_len);
        slot->n_ids = j->prompt;
        (*next)++;
        (*running)++;
    }
}

/* Describes the step into the serving state's step buffers: decodes first,
 * then prompt chunks while tokens remain. Returns the sequences in it. */
static int32_t build_step(snug_planned *p, snug_fcfs_job *jobs, int32_t n_jobs, int32_t *n_tok)
{
    snug_serving_state *sv = &p->serving;
    int32_t budget = sv->shape.max_num_batched_tokens, n_seq = 0;
    *n_tok = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < n_jobs; i++) {
            snug_fcfs_job *j = &jobs[i];
            if (pass == 0) j->in_step = -1;
            if (j->slot < 0) continue;
            bool decoding = j->done >= j->prompt;
            if (decoding != (pass == 0)) continue;
            int32_t n = decoding ? 1 : SNUG_MIN(j->prompt - j->done, budget - *n_tok);
            if (n <= 0 || n_seq == sv->shape.max_num_seqs) continue;
            snug_seq_slot *slot = &sv->seqs[j->slot];
            memcpy(sv->step_tokens + *n_tok, slot->ids + j->done, (size_t)n * sizeof(int32_t));
            bool last = j->done + n >= j->prompt;
            sv->step_seqs[n_seq] = (snug_step_seq){n, j->done, slot->table.ids, slot->table.n,
                                                   last ? SNUG_LOGITS_LAST : SNUG_LOGITS_NONE};
            j->in_step = n_seq++;
            *n_tok += n;
        }
    return n_seq;
}

snug_status snug_fcfs_run(snug_planned *p, snug_fcfs_job *jobs, int32_t n_jobs, int32_t max_steps,
                          snug_fcfs_stats *out, snug_error *err)
{
    snug_serving_state *sv = &p->serving;
    const snug_model_dims *d = snug_model_get_dims(p->model);
    memset(out, 0, sizeof *out);
    int64_t cache_tokens = (int64_t)p->pool.n_blocks * sv->shape.block_size;
    for (int32_t i = 0; i < n_jobs; i++) {
        snug_fcfs_job *j = &jobs[i];
        int64_t len = (int64_t)j->prompt + j->output;
        if (j->prompt < 1 || j->output < 1 || len > sv->shape.max_model_len || len > cache_tokens)
            return snug_errorf(err, SNUG_INVALID, "job %d: prompt %d + output %d tokens: expected "
                               "at least 1 each, at most %lld together (max_model_len %lld, cache "
                               "%lld tokens)", i, j->prompt, j->output,
                               (long long)SNUG_MIN(sv->shape.max_model_len, cache_tokens),
                               (long long)sv->shape.max_model_len, (long long)cache_tokens);
        j->slot = j->in_step = -1;
        j->done = j->generated = 0;
    }
    int32_t next = 0, running = 0;
    snug_status st = SNUG_OK;
    while (out->finished < n_jobs && (max_steps == 0 || out->steps < max_steps)) {
        admit(p, jobs, n_jobs, &next, &running, out);
        out->most_running = SNUG_MAX(out->most_running, running);
        int32_t n_tok = 0, n_seq = build_step(p, jobs, n_jobs, &n_tok);
        if (n_seq == 0) break; /* cannot happen: a running job always has a token to run */
        snug_step step = {sv->step_tokens, n_tok, sv->step_seqs, n_seq};
        const float *rows = NULL;
        int32_t n_rows = 0;
        st = snug_model_forward(p->model, &p->kv, &step, &rows, &n_rows, err);
        if (st != SNUG_OK) break;
        out->steps++;
        out->tokens += n_tok;
        int32_t row = 0;
        for (int32_t i = 0; i < n_jobs; i++) {
            snug_fcfs_job *j = &jobs[i];
            if (j->in_step < 0) continue;
            j->done += sv->step_seqs[j->in_step].n_tokens;
            if (sv->step_seqs[j->in_step].logits != SNUG_LOGITS_LAST) continue;
            snug_seq_slot *slot = &sv->seqs[j->slot];
            float *lg = (float *)rows + (size_t)row++ * (size_t)d->vocab_rows;
            int32_t id = snug_sample(&slot->sampling, &slot->sampler, lg, d->vocab_len, slot->ids,
                                     j->prompt, slot->ids + j->prompt, j->generated,
                                     sv->scratch[0]);
            slot->ids[slot->n_ids++] = id;
            if (++j->generated == j->output) {
                finish(p, j);
                running--;
                out->finished++;
            }
        }
    }
    /* a run cut short by max_steps (or failed) gives its jobs' blocks back */
    for (int32_t i = 0; i < n_jobs; i++)
        if (jobs[i].slot >= 0) finish(p, &jobs[i]);
    return st;
}
