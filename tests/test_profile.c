/*
 * test_profile.c: the serving state and the profile step of the memory plan
 * on the bundled stories260K: the activation arena and the serving state
 * hold exactly what their pure size functions predict, the profile step
 * allocates nothing but its scratch cache, its activation peak is the
 * arena, and every failure leaves nothing held.
 */
#include "test.h"

#include <unistd.h>

#include "base/mem.h"
#include "engine/profile.h"
#include "engine/serving.h"
#include "formats/checkpoint.h"
#include "model/loader.h"

#include <string.h>

enum { N_SEQS = 16, N_TOKENS = 200, MAX_LEN = 512, BLOCK = 16 };

typedef struct fixture {
    snug_checkpoint *ck;
    snug_weights *w;
    snug_model *m;
    snug_stepper *step;   /* the model's steps, one process */
    snug_serving_state s;
    snug_serving_shape shape;
    snug_kv_shape kv;
} fixture;

static bool open_fixture(fixture *f, snug_error *err)
{
    memset(f, 0, sizeof *f);
    snug_load_opts lo = {.tp = 1, .n_threads = 1};
    snug_model_opts mo = {.shape = {N_TOKENS, N_SEQS, N_SEQS, 2}, .isa = -1};
    if (snug_checkpoint_open("models/stories260K", &f->ck, err) != SNUG_OK ||
        snug_weights_load(f->ck, &lo, &f->w, NULL, err) != SNUG_OK ||
        snug_model_create(&f->ck->config, f->w, &mo, &f->m, err) != SNUG_OK ||
        snug_stepper_create(NULL, f->m, &f->ck->config, MAX_LEN / BLOCK, &f->step, err) != SNUG_OK)
        return false;
    f->shape = (snug_serving_shape){N_SEQS, N_TOKENS, MAX_LEN, BLOCK, f->ck->config.vocab_size, 64, 1, true, false, 0, 0};
    const snug_model_dims *d = snug_model_get_dims(f->m);
    f->kv = (snug_kv_shape){d->n_layers, d->n_kv_heads, d->head_dim, BLOCK, SNUG_DTYPE_BF16};
    return snug_serving_create(&f->shape, &f->s, err) == SNUG_OK;
}

static void close_fixture(fixture *f)
{
    snug_serving_free(&f->s);
    snug_stepper_free(f->step);
    snug_model_free(f->m);
    snug_weights_free(f->w);
    snug_checkpoint_close(f->ck);
}

static void test_sizes_exact(void)
{
    snug_error err = {0};
    fixture f;
    size_t act0 = 0;
    snug_mem_status(SNUG_MEM_ACTIVATIONS, &act0, NULL, false);
    CHECK(open_fixture(&f, &err), "fixture: %s", err.msg);
    size_t act = 0, act_peak = 0;
    snug_mem_status(SNUG_MEM_ACTIVATIONS, &act, &act_peak, false);
    size_t predicted = snug_model_activation_bytes(snug_model_get_dims(f.m), snug_model_step_shape(f.m));
    CHECK(act - act0 == predicted && predicted > 0, "arena: %zu held, %zu predicted", act - act0,
          predicted);
    size_t s_pred = snug_serving_bytes(&f.shape);
    CHECK(f.s.block && snug_mem_block_bytes(f.s.block) == s_pred, "serving state: %zu held, %zu predicted",
          f.s.block ? snug_mem_block_bytes(f.s.block) : 0, s_pred);
    /* the carving: every slot's buffers inside the block, none overlapping the next */
    const unsigned char *lo = f.s.block, *hi = lo + s_pred - SNUG_MEM_HEADER_BYTES;
    bool inside = true;
    for (int i = 0; i < N_SEQS; i++) {
        const snug_seq_slot *q = &f.s.seqs[i];
        inside &= (const unsigned char *)q->ids >= lo && (const unsigned char *)(q->ids + MAX_LEN) <= hi;
        inside &= q->table.cap == MAX_LEN / BLOCK && q->table.n == 0;
        inside &= (const unsigned char *)q->emit + snug_stop_emit_bytes(q->text_cap) <= hi;
        if (i > 0) inside &= q->ids >= f.s.seqs[i - 1].ids + MAX_LEN;
        /* the grammar matcher of each, one after another */
        const unsigned char *m = q->match_mem;
        inside &= m >= lo && m + snug_constrain_seq_bytes() <= hi;
        if (i > 0) inside &= m >= (const unsigned char *)f.s.seqs[i - 1].match_mem + snug_constrain_seq_bytes();
    }
    CHECK(inside && f.s.blocks_per_seq == MAX_LEN / BLOCK, "slots carved inside the block");
    /* the constrainer's mask, scratch, cache and token buffer: in the block, after the slots' */
    const snug_constrainer *c = &f.s.constrain;
    const unsigned char *last_match = f.s.seqs[N_SEQS - 1].match_mem;
    CHECK((const unsigned char *)c->mask >= last_match + snug_constrain_seq_bytes() &&
              (const unsigned char *)c->scratch > (const unsigned char *)c->mask &&
              (const unsigned char *)c->cache.entries > (const unsigned char *)c->scratch &&
              c->token_text > (const unsigned char *)c->cache.entries && c->token_text + c->token_cap <= hi &&
              c->cache.n_entries == SNUG_CONSTRAIN_CACHE && c->n_vocab == f.ck->config.vocab_size,
          "the constrainer carved inside the block");
    /* without constrained decoding (no tokenizer): no matcher, less memory
     * (each block's charge is rounded up to whole pages: the parts may add
     * up to less than a page above the whole) */
    snug_serving_shape plain = f.shape;
    plain.constrained = false;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    CHECK(snug_serving_bytes(&plain) + (size_t)N_SEQS * snug_constrain_seq_bytes() +
                  snug_constrain_bytes(plain.n_vocab, plain.max_token_bytes) < s_pred + page &&
              snug_serving_bytes(&plain) + (size_t)N_SEQS * snug_constrain_seq_bytes() < s_pred,
          "the constrained state adds its matchers and constrainer: %zu without, %zu with (%zu + %zu)",
          snug_serving_bytes(&plain), s_pred, (size_t)N_SEQS * snug_constrain_seq_bytes(),
          snug_constrain_bytes(plain.n_vocab, plain.max_token_bytes));
    /* speculative decoding: each slot's ring grows by a record and its text a draft, and
     * serving without drafts keeps SNUG_OUT_RING of them */
    CHECK(f.s.ring_cap == SNUG_OUT_RING && f.shape.spec_tokens == 0, "ring of %d records", f.s.ring_cap);
    snug_serving_shape drafts = f.shape;
    drafts.spec_tokens = 4;
    size_t rec = snug_round_up(sizeof(snug_out_record), 8);
    size_t emit = snug_round_up(snug_stop_emit_bytes(snug_stop_text_bytes(f.shape.max_token_bytes)),
                                SNUG_MEM_ALIGN);
    size_t grow = snug_serving_bytes(&drafts) - s_pred, want = (size_t)N_SEQS * 4 * (rec + emit);
    CHECK(grow + page > want && grow < want + page + (size_t)N_SEQS * SNUG_MEM_ALIGN,
          "4 drafts: %zu bytes more, want about %zu", grow, want);
    snug_serving_state s4;
    CHECK_OK(snug_serving_create(&drafts, &s4, &err), &err);
    CHECK(s4.ring_cap == SNUG_OUT_RING + 4 && s4.seqs[N_SEQS - 1].ring[SNUG_OUT_RING + 3].text != NULL,
          "ring of %d records", s4.ring_cap);
    snug_serving_free(&s4);
    drafts.spec_tokens = SNUG_SPEC_TOKENS_MAX + 1;
    CHECK(snug_serving_bytes(&drafts) == 0, "%d drafts: no size", drafts.spec_tokens);
    close_fixture(&f);
}

static void test_profile_step(void)
{
    snug_error err = {0};
    fixture f;
    CHECK(open_fixture(&f, &err), "fixture: %s", err.msg);
    size_t total0 = 0, act = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &total0, NULL, false);
    snug_mem_status(SNUG_MEM_ACTIVATIONS, &act, NULL, true);
    snug_mem_status(SNUG_MEM_KV, NULL, NULL, true);
    int64_t allocs = snug_mem_alloc_count();
    snug_profile_result r;
    CHECK_OK(snug_profile_step(f.step, &f.kv, &f.s, &r, &err), &err);
    /* 200 tokens over 16 sequences: 8 of 13 and 8 of 12, one block each; the scratch cache
     * holds the layers the step runs, no others, in at least a large block (64 KiB, given back
     * when freed): 32 blocks of 2 KiB */
    snug_kv_shape run = f.kv;
    run.n_layers = SNUG_PROFILE_LAYERS;
    CHECK(f.kv.n_layers > SNUG_PROFILE_LAYERS, "the fixture's model has more layers than the step runs");
    int64_t blocks = SNUG_MAX((int64_t)N_SEQS, (int64_t)(SNUG_MEM_LARGE_BYTES / snug_kv_block_bytes(&run)));
    CHECK(snug_kv_block_bytes(&run) == 2048 && blocks == 32, "the fixture's blocks: %zu bytes",
          snug_kv_block_bytes(&run));
    CHECK(r.n_tokens == N_TOKENS && r.n_seqs == N_SEQS && r.scratch_blocks == blocks,
          "%d tokens, %d seqs, %lld blocks", r.n_tokens, r.n_seqs, (long long)r.scratch_blocks);
    CHECK(r.n_layers == SNUG_PROFILE_LAYERS && r.model_layers == f.kv.n_layers,
          "through %d of %d layers", r.n_layers, r.model_layers);
    /* its matrix products: 200 tokens, then 16 and 1, through the layer; the lm_head for 16
     * rows (a row a sequence: n_logits_max is 16), none, then 1 */
    const snug_model_dims *d = snug_model_get_dims(f.m);
    double layer = (double)d->hidden * (d->q_dim + 2 * d->kv_dim + d->q_dim) + 3.0 * d->hidden * d->intermediate;
    double want_flops = 2.0 * ((N_TOKENS + N_SEQS + 1) * layer + (N_SEQS + 1) * (double)d->hidden * d->vocab_rows);
    CHECK(r.flops == want_flops && want_flops > 0, "%.0f flops, want %.0f", r.flops, want_flops);
    CHECK(snug_mem_alloc_count() - allocs == 1, "the step allocated %lld blocks, not only its cache",
          (long long)(snug_mem_alloc_count() - allocs));
    size_t act_now = 0, act_peak = 0, kv_now = 0, kv_peak = 0;
    snug_mem_status(SNUG_MEM_ACTIVATIONS, &act_now, &act_peak, false);
    snug_mem_status(SNUG_MEM_KV, &kv_now, &kv_peak, false);
    CHECK(act_peak == act && act_now == act, "activation peak %zu over the arena %zu", act_peak, act);
    size_t scratch = snug_mem_held_bytes((size_t)blocks * snug_kv_block_bytes(&run));
    CHECK(kv_now == 0 && kv_peak == scratch, "scratch cache %zu (want %zu), %zu left", kv_peak,
          scratch, kv_now);
    CHECK(r.allocator_peak == total0 + scratch, "allocator peak %zu, want %zu", r.allocator_peak,
          total0 + scratch);
    CHECK(r.untracked > 0 && r.rss == r.untracked + r.allocator_peak,
          "untracked %zu (resident %zu, allocator %zu, high-water mark %zu)", r.untracked, r.rss,
          r.allocator_peak, r.hwm);
    printf("  profile step: %d tokens over %d sequences in %.3f s; untracked %zu bytes%s\n",
           r.n_tokens, r.n_seqs, r.seconds, r.untracked, r.hwm_was_reset ? "" : " (hwm not reset)");
    close_fixture(&f);
}

static snug_status profile_op(void *ctx, snug_error *err)
{
    fixture *f = ctx;
    snug_profile_result r;
    return snug_profile_step(f->step, &f->kv, &f->s, &r, err);
}

static void test_profile_oom(void)
{
    snug_error err = {0};
    fixture f;
    CHECK(open_fixture(&f, &err), "fixture: %s", err.msg);
    CHECK(test_oom_loop("profile step", profile_op, NULL, &f, 10) == 1,
          "the scratch cache is the step's one allocation");
    snug_serving_shape bad = f.shape;
    bad.n_vocab = 10;
    snug_serving_state s2;
    CHECK_OK(snug_serving_create(&bad, &s2, &err), &err);
    snug_profile_result r;
    CHECK_FAILS(snug_profile_step(f.step, &f.kv, &s2, &r, &err), &err, SNUG_INVALID,
                "the serving state samples 10 tokens, the model has 512");
    snug_serving_free(&s2);
    bad = f.shape;
    bad.max_num_seqs = 0;
    CHECK(snug_serving_bytes(&bad) == 0, "no sequences: no size");
    CHECK_FAILS(snug_serving_create(&bad, &s2, &err), &err, SNUG_INVALID, "max_num_seqs 0");
    close_fixture(&f);
}

int main(void)
{
    RUN(test_sizes_exact);
    RUN(test_profile_step);
    RUN(test_profile_oom);
    return test_summary();
}
