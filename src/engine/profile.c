/*
 * profile.c: the profile step (profile.h).
 */
#include "profile.h"

#include "base/mem.h"
#include "blocks.h"
#include "dist/agree.h"

#include <string.h>

/* A pool thread's stack made resident as deep as any step goes. */
static void prefault_part(void *ctx, int32_t thread, int32_t n_threads)
{
    (void)ctx, (void)thread, (void)n_threads;
    snug_proc_prefault_stack();
}

snug_status snug_profile_step(snug_stepper *stepper, const snug_kv_shape *kv_shape,
                              snug_serving_state *serving, snug_profile_result *out,
                              snug_error *err)
{
    snug_model *m = snug_stepper_model(stepper);
    const snug_step_shape *shape = snug_model_step_shape(m);
    const snug_model_dims *d = snug_model_get_dims(m);
    const snug_serving_shape *ss = &serving->shape;
    snug_profile_result r = {0};
    snug_kvcache kv = {0};
    snug_status st = SNUG_OK;
    r.n_seqs = SNUG_MIN(shape->n_seqs_max, ss->max_num_seqs);
    int64_t most = (int64_t)r.n_seqs * ss->max_model_len;
    r.n_tokens = (int32_t)SNUG_MIN((int64_t)SNUG_MIN(shape->n_tokens_max, ss->max_num_batched_tokens), most);
    r.n_layers = SNUG_MIN(SNUG_PROFILE_LAYERS, kv_shape->n_layers);
    r.model_layers = kv_shape->n_layers;
    if (ss->n_vocab < d->vocab_len)
        return snug_errorf(err, SNUG_INVALID, "profile step: the serving state samples %d "
                           "tokens, the model has %d", ss->n_vocab, d->vocab_len);
    if (r.n_tokens < r.n_seqs)
        return snug_errorf(err, SNUG_INVALID, "profile step: %d tokens for %d sequences "
                           "(max_num_batched_tokens must be at least max_num_seqs)",
                           r.n_tokens, r.n_seqs);

    /* the tokens, spread evenly: each sequence a prefill from position 0,
     * its table the next scratch blocks, one more where its decode step
     * needs one; rows of logits beyond a sequence's one (speculative
     * decoding's) asked of whole sequences while they fit */
    int32_t extra_rows = shape->n_logits_max - r.n_seqs;
    for (int32_t i = 0; i < r.n_seqs; i++) {
        int32_t n = r.n_tokens / r.n_seqs + (i < r.n_tokens % r.n_seqs);
        int32_t *ids = serving->seqs[i].table.ids;
        bool all = n > 1 && n - 1 <= extra_rows;
        extra_rows -= all ? n - 1 : 0;
        serving->step_seqs[i] = (snug_step_seq){n, 0, ids,
                                                snug_blocks_for_tokens(n, kv_shape->block_size),
                                                all ? SNUG_LOGITS_ALL : SNUG_LOGITS_LAST, NULL, 0};
        int32_t nb = snug_blocks_for_tokens(SNUG_MIN(n + 1, ss->max_model_len), kv_shape->block_size);
        for (int32_t b = 0; b < nb; b++) ids[b] = (int32_t)r.scratch_blocks++;
    }
    /* the scratch cache: the layers the steps run (they write no others), and at least a
     * large block's bytes, so that freeing it gives its pages back (a heap block's would stay
     * resident after the plan, outside it) */
    snug_kv_shape scratch = *kv_shape;
    scratch.n_layers = r.n_layers;
    size_t block = snug_kv_block_bytes(&scratch);
    if (block > 0)
        r.scratch_blocks = SNUG_MAX(r.scratch_blocks, (int64_t)((SNUG_MEM_LARGE_BYTES + block - 1) / block));
    for (int32_t t = 0; t < r.n_tokens; t++)
        serving->step_tokens[t] = (int32_t)(((int64_t)t * 7919 + 1) % ss->n_vocab);

    /* the window: from here on, peaks are the step's */
    bool reset = snug_proc_hwm_reset(NULL) == SNUG_OK;
    snug_mem_status(SNUG_MEM_TOTAL, NULL, NULL, true);
    double t0 = snug_now_seconds();
    /* the stacks of the threads that will run every step, deeper than any
     * step goes: this thread's and the model's pool's */
    snug_proc_prefault_stack();
    snug_pool_run(snug_model_pool(m), prefault_part, NULL);
    st = snug_kvcache_create(&scratch, (int32_t)r.scratch_blocks, snug_model_pool(m), &kv, err);
    st = snug_dist_agree(snug_stepper_comm(stepper), st, err); /* no rank steps alone */
    if (st == SNUG_NOMEM) { /* the caller may say what would fit */
        out->n_tokens = r.n_tokens;
        out->n_seqs = r.n_seqs;
        out->n_layers = r.n_layers;
        out->scratch_blocks = r.scratch_blocks;
    }
    if (st != SNUG_OK) goto done;
    snug_sampling_params sp;
    snug_sampling_params_default(&sp);
    sp.repetition_penalty = 1.1f; /* the penalty paths too: they walk each history */
    sp.frequency_penalty = 0.1f;
    snug_sampler_state rng;
    snug_sampler_state_init(&rng, &sp, 1);
    /* the largest step, then the shapes serving runs most: every sequence
     * decoding one token (its logits rows are the largest step's again: not
     * asked for), and one sequence alone (the matrix-vector path) */
    for (int pass = 0; pass < 3 && st == SNUG_OK; pass++) {
        int32_t n_seqs = pass == 2 ? 1 : r.n_seqs, n_tokens = pass == 0 ? r.n_tokens : n_seqs;
        if (pass > 0)
            for (int32_t i = 0; i < n_seqs; i++) {
                snug_step_seq *q = &serving->step_seqs[i];
                int32_t pos = q->pos0 + q->n_tokens;
                if (pos >= ss->max_model_len) pos = (int32_t)ss->max_model_len - 1;
                *q = (snug_step_seq){1, pos, q->block_table,
                                     snug_blocks_for_tokens(pos + 1, kv_shape->block_size),
                                     pass == 1 ? SNUG_LOGITS_NONE : SNUG_LOGITS_LAST, NULL, 0};
            }
        snug_step step = {serving->step_tokens, n_tokens, serving->step_seqs, n_seqs,
                          SNUG_PROFILE_LAYERS};
        snug_logits lg;
        st = snug_stepper_run(stepper, &kv, &step, &lg, err);
        int64_t rows = 0; /* every rank's lm_head runs them (lg has them on the leader) */
        for (int32_t i = 0; i < n_seqs; i++) rows += snug_step_seq_vocab_rows(&serving->step_seqs[i]);
        if (st == SNUG_OK) r.flops += snug_model_step_flops(d, n_tokens, r.n_layers, rows);
        for (int32_t i = 0; st == SNUG_OK && i < lg.n_rows; i++) {
            float *row = (float *)lg.rows + (size_t)i * (size_t)lg.stride;
            snug_sample(&sp, &rng, row, lg.n_vocab, serving->step_tokens,
                        SNUG_MIN(n_tokens, 64), serving->step_tokens, 1,
                        serving->scratch[i % ss->n_samplers]);
        }
    }
    if (st != SNUG_OK) goto done;
    r.seconds = snug_now_seconds() - t0;
    /* the step frees nothing: the resident set only grew, and its end is its
     * peak, read to the page (the kernel's high-water mark can be pages off) */
    size_t held = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &held, &r.allocator_peak, false);
    st = snug_proc_rss_exact(&r.rss, err);
    if (st == SNUG_OK) st = snug_proc_mem(NULL, &r.hwm, err);
    st = snug_dist_agree(snug_stepper_comm(stepper), st, err);
    if (st != SNUG_OK) goto done;
    r.untracked = r.rss > held ? r.rss - held : 0;
    r.hwm_was_reset = reset;
    *out = r;
done:
    snug_kvcache_free(&kv);
    return st;
}
