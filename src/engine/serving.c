/*
 * serving.c: the serving state in one block (serving.h). The layout is
 * computed once, by carve(), for sizing and for filling alike, so the two
 * cannot disagree.
 */
#include "serving.h"

#include "base/mem.h"

#include <string.h>

/* Where each part lives in the block; every part 64-byte aligned. */
typedef struct layout {
    size_t seqs, scratch_ptrs, step_tokens, step_seqs; /* offsets */
    size_t sched, sched_running, sched_waiting, items, rings, ring_text, lp_row, draft_q, constrain, slot_match;
    size_t slot_tables, slot_ids, slot_text, slot_emit, scratch; /* first of each kind */
    size_t table_bytes, ids_bytes, text_bytes, emit_bytes, scratch_bytes, match_bytes; /* one of each */
    size_t total;
} layout;

static bool valid(const snug_serving_shape *s)
{
    return s->max_num_seqs > 0 && s->max_num_batched_tokens > 0 && s->max_model_len > 0 && s->max_model_len <= INT32_MAX &&
           s->block_size > 0 && s->n_vocab > 0 && s->n_samplers > 0 && s->spec_tokens >= 0 &&
           s->spec_tokens <= SNUG_SPEC_TOKENS_MAX && s->draft_rows >= 0 &&
           s->draft_rows <= SNUG_SPEC_SAMPLED_SEQS * SNUG_SPEC_TOKENS_MAX &&
           s->max_token_bytes <= ((size_t)1 << 20);
}

static bool carve(const snug_serving_shape *s, layout *l)
{
    memset(l, 0, sizeof *l);
    if (!valid(s)) return false;
    size_t n = (size_t)s->max_num_seqs, ring = (size_t)(SNUG_OUT_RING + s->spec_tokens);
    size_t per_seq = (size_t)snug_blocks_for_tokens(s->max_model_len, s->block_size);
    size_t max_blocks;
    if (!snug_mul_size(per_seq, n, &max_blocks) || max_blocks > INT32_MAX) return false;
    l->table_bytes = per_seq * sizeof(int32_t);
    l->ids_bytes = (size_t)s->max_model_len * sizeof(int32_t);
    l->text_bytes = snug_stop_text_bytes(s->max_token_bytes);
    l->emit_bytes = snug_stop_emit_bytes(l->text_bytes);
    l->scratch_bytes = snug_sampler_scratch_bytes(s->n_vocab);
    l->match_bytes = s->constrained ? snug_constrain_seq_bytes() : 0;
    size_t constrain_bytes = s->constrained ? snug_constrain_bytes(s->n_vocab, s->max_token_bytes) : 0;
    size_t at = 0;
    bool ok = snug_mem_carve(&at, n * sizeof(snug_seq_slot), 1, &l->seqs) &&
              snug_mem_carve(&at, (size_t)s->n_samplers * sizeof(unsigned char *), 1, &l->scratch_ptrs) &&
              snug_mem_carve(&at, l->table_bytes, s->windowed ? 2 * n : n, &l->slot_tables) &&
              snug_mem_carve(&at, l->ids_bytes, n, &l->slot_ids) &&
              snug_mem_carve(&at, l->text_bytes, n, &l->slot_text) &&
              snug_mem_carve(&at, l->emit_bytes, n, &l->slot_emit) &&
              snug_mem_carve(&at, (size_t)s->max_num_batched_tokens * sizeof(int32_t), 1, &l->step_tokens) &&
              snug_mem_carve(&at, n * sizeof(snug_step_seq), 1, &l->step_seqs) &&
              snug_mem_carve(&at, l->scratch_bytes, (size_t)s->n_samplers, &l->scratch) &&
              snug_mem_carve(&at, n * sizeof(snug_sched_seq), 1, &l->sched) &&
              snug_mem_carve(&at, n * sizeof(int32_t), 1, &l->sched_running) &&
              snug_mem_carve(&at, n * sizeof(int32_t), 1, &l->sched_waiting) &&
              snug_mem_carve(&at, n * sizeof(snug_sched_item), 1, &l->items) &&
              snug_mem_carve(&at, ring * sizeof(snug_out_record), n, &l->rings) &&
              snug_mem_carve(&at, l->emit_bytes, n * ring, &l->ring_text) &&
              snug_mem_carve(&at, (size_t)s->n_vocab * sizeof(float), 1, &l->lp_row) &&
              snug_mem_carve(&at, (size_t)s->n_vocab * sizeof(float) * (size_t)s->draft_rows, 1, &l->draft_q) &&
              snug_mem_carve(&at, l->match_bytes, n, &l->slot_match) &&
              snug_mem_carve(&at, constrain_bytes, 1, &l->constrain);
    l->total = SNUG_MAX(at, (size_t)SNUG_MEM_LARGE_BYTES);
    return ok;
}

size_t snug_serving_bytes(const snug_serving_shape *shape)
{
    layout l;
    return carve(shape, &l) ? snug_mem_held_bytes(l.total) : 0;
}

snug_status snug_serving_create(const snug_serving_shape *shape, snug_serving_state *out,
                                snug_error *err)
{
    memset(out, 0, sizeof *out);
    layout l;
    if (!carve(shape, &l))
        return snug_errorf(err, SNUG_INVALID, "serving state: max_num_seqs %d, "
                           "max_num_batched_tokens %d, max_model_len %lld, block_size %d, "
                           "vocabulary %d, samplers %d, drafts %d: out of range", shape->max_num_seqs,
                           shape->max_num_batched_tokens, (long long)shape->max_model_len,
                           shape->block_size, shape->n_vocab, shape->n_samplers, shape->spec_tokens);
    unsigned char *b = snug_mem_alloc(SNUG_MEM_OTHER, l.total, err);
    if (!b) return snug_error_prefix(err, SNUG_NOMEM, "serving state: ");
    snug_serving_state s = {.shape = *shape, .block = b};
    s.blocks_per_seq = snug_blocks_for_tokens(shape->max_model_len, shape->block_size);
    s.ring_cap = SNUG_OUT_RING + shape->spec_tokens;
    size_t ring = (size_t)s.ring_cap;
    s.seqs = (snug_seq_slot *)(b + l.seqs);
    s.scratch = (unsigned char **)(b + l.scratch_ptrs);
    s.step_tokens = (int32_t *)(b + l.step_tokens);
    s.step_seqs = (snug_step_seq *)(b + l.step_seqs);
    s.sched = (snug_sched_seq *)(b + l.sched);
    s.sched_running = (int32_t *)(b + l.sched_running);
    s.sched_waiting = (int32_t *)(b + l.sched_waiting);
    s.items = (snug_sched_item *)(b + l.items);
    s.lp_row = (float *)(b + l.lp_row);
    s.draft_q = shape->draft_rows > 0 ? (float *)(b + l.draft_q) : NULL;
    size_t ring_bytes = snug_round_up(ring * sizeof(snug_out_record), SNUG_MEM_ALIGN);
    size_t emit_stride = snug_round_up(l.emit_bytes, SNUG_MEM_ALIGN);
    for (int32_t i = 0; i < shape->max_num_seqs; i++) {
        snug_seq_slot *q = &s.seqs[i];
        size_t k = (size_t)i;
        snug_block_table_attach(&q->table,
                                (int32_t *)(b + l.slot_tables + k * snug_round_up(l.table_bytes, SNUG_MEM_ALIGN)),
                                s.blocks_per_seq);
        if (shape->windowed) {
            size_t w = (size_t)shape->max_num_seqs + k; /* after every slot's first */
            snug_block_table_attach(&q->wtable,
                                    (int32_t *)(b + l.slot_tables + w * snug_round_up(l.table_bytes, SNUG_MEM_ALIGN)),
                                    s.blocks_per_seq);
            s.sched[i].wtable = &q->wtable;
        }
        q->ids = (int32_t *)(b + l.slot_ids + k * snug_round_up(l.ids_bytes, SNUG_MEM_ALIGN));
        q->text = (char *)(b + l.slot_text + k * snug_round_up(l.text_bytes, SNUG_MEM_ALIGN));
        q->emit = (char *)(b + l.slot_emit + k * snug_round_up(l.emit_bytes, SNUG_MEM_ALIGN));
        q->text_cap = l.text_bytes;
        snug_sampling_params_default(&q->sampling);
        snug_stop_params_default(&q->stop_params);
        snug_stop_state_init(&q->stop);
        q->ring = (snug_out_record *)(b + l.rings + k * ring_bytes);
        for (size_t r = 0; r < ring; r++)
            q->ring[r].text = (char *)(b + l.ring_text + (k * ring + r) * emit_stride);
        s.sched[i].table = &q->table;
        if (shape->constrained)
            q->match_mem = b + l.slot_match + k * snug_round_up(l.match_bytes, SNUG_MEM_ALIGN);
    }
    if (shape->constrained)
        snug_constrainer_attach(&s.constrain, b + l.constrain, shape->n_vocab, shape->max_token_bytes);
    for (int32_t i = 0; i < shape->n_samplers; i++)
        s.scratch[i] = b + l.scratch + (size_t)i * snug_round_up(l.scratch_bytes, SNUG_MEM_ALIGN);
    *out = s;
    return SNUG_OK;
}

void snug_serving_free(snug_serving_state *s)
{
    snug_mem_free(s->block);
    memset(s, 0, sizeof *s);
}
