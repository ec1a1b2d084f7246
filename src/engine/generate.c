/*
 * generate.c: one sequence through the model: prefill in chunks, decode,
 * sample, stop, stream.
 */
#include "generate.h"

#include "model/blocks.h"
#include "base/device.h"
#include "model/kvcache.h"
#include "model/model.h"
#include "dist/stepper.h"


struct snug_generator {
    snug_model_config cfg;
    const snug_tokenizer *tok;
    snug_model *model;
    snug_stepper *stepper;
    snug_kvcache kv;
    snug_block_pool pool;
    snug_block_table table;
    int64_t max_len;
    int32_t chunk;
    bool echo;
    int32_t *ids;          /* [max_len] prompt and output */
    void *sample_scratch;  /* snug_sampler_scratch_bytes(vocab) */
    char *text;            /* decoded bytes of one token */
    size_t text_cap;
    char *emit;            /* what the stop check lets through */
};

snug_status snug_generator_create(const snug_model_config *cfg, const snug_weights *w,
                                  const snug_tokenizer *tok, const snug_generator_opts *opts,
                                  snug_generator **out, snug_error *err)
{
    snug_status st = SNUG_OK;
    snug_generator *g = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *g, err);
    if (!g) return snug_error_prefix(err, SNUG_NOMEM, "generator: ");
    g->cfg = *cfg;
    g->tok = tok;
    g->echo = opts->echo;
    g->max_len = opts->max_len > 0 && opts->max_len < cfg->max_position_embeddings
                     ? opts->max_len : cfg->max_position_embeddings;
    if (g->max_len > INT32_MAX / 2) g->max_len = INT32_MAX / 2;
    int32_t block = opts->block_size > 0 ? opts->block_size : SNUG_BLOCK_SIZE_DEFAULT;
    g->chunk = opts->prefill_chunk > 0 ? opts->prefill_chunk : SNUG_PREFILL_CHUNK_DEFAULT;
    if (g->chunk > g->max_len) g->chunk = (int32_t)g->max_len;

    snug_model_opts mo = {.shape = {g->chunk, 1, 1, opts->n_threads}, .isa = opts->isa,
                          .allreduce = snug_comm_allreduce_hook, .allreduce_ctx = opts->comm};
    st = snug_model_create(cfg, w, &mo, &g->model, err);
    if (st == SNUG_OK)
        st = snug_stepper_create(opts->comm, g->model, cfg,
                                 snug_blocks_for_tokens(g->max_len, opts->block_size > 0
                                                                        ? opts->block_size
                                                                        : SNUG_BLOCK_SIZE_DEFAULT),
                                 &g->stepper, err);
    if (st != SNUG_OK) goto fail;
    const snug_model_dims *d = snug_model_get_dims(g->model);
    snug_kv_shape ks = {d->n_layers, d->n_kv_heads, d->head_dim, block,
                        opts->kv_dtype == SNUG_DTYPE_NONE ? SNUG_DTYPE_BF16 : opts->kv_dtype};
    int32_t n_blocks = snug_blocks_for_tokens(g->max_len, block);
    st = snug_kvcache_create(&ks, n_blocks, &g->kv, err);
    if (st == SNUG_OK) st = snug_block_pool_init(&g->pool, n_blocks, block, false, err);
    if (st == SNUG_OK) st = snug_block_table_init(&g->table, g->max_len, block, err);
    if (st != SNUG_OK) goto fail;
    g->text_cap = snug_stop_text_bytes(tok ? snug_tokenizer_max_token_bytes(tok) : 0);
    g->ids = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)g->max_len * sizeof(int32_t), err);
    g->sample_scratch = g->ids ? snug_mem_alloc(SNUG_MEM_OTHER, snug_sampler_scratch_bytes(cfg->vocab_size), err) : NULL;
    g->text = g->sample_scratch ? snug_mem_alloc(SNUG_MEM_OTHER, g->text_cap, err) : NULL;
    g->emit = g->text ? snug_mem_alloc(SNUG_MEM_OTHER, snug_stop_emit_bytes(g->text_cap), err) : NULL;
    if (!g->emit) {
        st = snug_error_prefix(err, SNUG_NOMEM, "generator: ");
        goto fail;
    }
    *out = g;
    return SNUG_OK;
fail:
    snug_generator_free(g);
    return st;
}

void snug_generator_free(snug_generator *g)
{
    if (!g) return;
    snug_mem_free(g->emit);
    snug_mem_free(g->text);
    snug_mem_free(g->sample_scratch);
    snug_mem_free(g->ids);
    if (g->table.ids) snug_block_table_release(&g->table, &g->pool);
    snug_block_table_free(&g->table);
    snug_block_pool_free(&g->pool);
    snug_kvcache_free(&g->kv);
    snug_stepper_free(g->stepper);
    snug_model_free(g->model);
    snug_mem_free(g);
}

int64_t snug_generator_max_len(const snug_generator *g) { return g->max_len; }

snug_isa snug_generator_isa(const snug_generator *g) { return snug_model_isa(g->model); }

/* Runs tokens ids[pos .. pos + n) of the sequence as one step; when want
 * is true, *logits gets the last token's row, or with greedy over several
 * ranks *chosen its argmax (else -1). */
static snug_status step(snug_generator *g, int64_t pos, int32_t n, bool want, bool greedy,
                        float **logits, int32_t *chosen, snug_error *err)
{
    if (!snug_block_table_grow(&g->table, &g->pool, pos + n, g->kv.shape.block_size))
        return snug_errorf(err, SNUG_INTERNAL, "generate: the cache has no block for position %lld",
                           (long long)(pos + n - 1));
    snug_step_seq seq = {n, (int32_t)pos, g->table.ids, g->table.n, want ? SNUG_LOGITS_LAST : SNUG_LOGITS_NONE};
    snug_step s = {g->ids + pos, n, &seq, 1};
    snug_logits lg;
    snug_status st = greedy ? snug_stepper_run_greedy(g->stepper, &g->kv, &s, &lg, err)
                            : snug_stepper_run(g->stepper, &g->kv, &s, &lg, err);
    /* The arena's logits row is the sampler's to change (bias, penalties). */
    if (st == SNUG_OK) *logits = (float *)lg.rows;
    if (st == SNUG_OK) *chosen = lg.best && lg.n_rows > 0 ? lg.best[0].id : -1;
    return st;
}

snug_status snug_generator_follow(snug_generator *g, snug_error *err)
{
    return snug_stepper_follow(g->stepper, &g->kv, err);
}

snug_status snug_generator_stop(snug_generator *g, snug_error *err)
{
    return snug_stepper_stop(g->stepper, err);
}

/* Passes n bytes of text on when there is a listener; false: stop. */
static bool send(snug_text_fn on_text, void *ctx, const char *s, size_t n)
{
    return !on_text || n == 0 || on_text(s, n, ctx);
}

snug_status snug_generate(snug_generator *g, const int32_t *prompt, int64_t n_prompt,
                          const snug_sampling_params *sp, const snug_stop_params *stop,
                          snug_text_fn on_text, void *ctx, snug_gen_result *res, snug_error *err)
{
    snug_status st = snug_sampling_params_validate(sp, g->cfg.vocab_size, err);
    if (st == SNUG_OK) st = snug_stop_params_validate(stop, err);
    if (st != SNUG_OK) return st;
    if (n_prompt < 1 || n_prompt >= g->max_len)
        return snug_errorf(err, SNUG_INVALID, "generate: a prompt of %lld tokens (1 to %lld fit; "
                           "--max-model-len sets the positions a sequence may use)",
                           (long long)n_prompt, (long long)g->max_len - 1);
    for (int64_t i = 0; i < n_prompt; i++) {
        if (prompt[i] < 0 || prompt[i] >= g->cfg.vocab_size)
            return snug_errorf(err, SNUG_INVALID, "generate: prompt token %lld is %d, outside 0..%d",
                               (long long)i, prompt[i], g->cfg.vocab_size - 1);
        g->ids[i] = prompt[i];
    }
    if (!g->tok) on_text = NULL;
    snug_block_table_release(&g->table, &g->pool);
    snug_sampler_state rng;
    snug_sampler_state_init(&rng, sp, (uint64_t)(snug_now_seconds() * 1e9));
    snug_stop_state ss;
    snug_stop_state_init(&ss);
    snug_tok_stream stream;
    if (g->tok) snug_tok_stream_init(&stream, g->tok, true);
    for (int64_t i = 0; g->echo && on_text && i < n_prompt && st == SNUG_OK; i++) {
        size_t n_text = 0;
        if (prompt[i] < snug_tokenizer_n_vocab(g->tok))
            st = snug_tok_stream_push(&stream, prompt[i], g->text, g->text_cap, &n_text, err);
        if (st == SNUG_OK && !send(on_text, ctx, g->text, n_text)) {
            *res = (snug_gen_result){.ids = g->ids, .n_prompt = n_prompt, .finish = SNUG_FINISH_ABORT};
            return SNUG_OK;
        }
    }
    if (st != SNUG_OK) return st;
    *res = (snug_gen_result){.ids = g->ids, .n_prompt = n_prompt};

    double t0 = snug_now_seconds();
    float *logits = NULL;
    int32_t chosen = -1;
    /* plain greedy: each row's argmax is all that is needed of the logits */
    bool greedy = sp->temperature == 0.0f && sp->n_logit_bias == 0 && sp->repetition_penalty == 1.0f &&
                  sp->frequency_penalty == 0.0f && sp->presence_penalty == 0.0f;
    for (int64_t pos = 0; pos < n_prompt && st == SNUG_OK; pos += g->chunk) {
        int32_t n = (int32_t)SNUG_MIN((int64_t)g->chunk, n_prompt - pos);
        st = step(g, pos, n, pos + n == n_prompt, greedy, &logits, &chosen, err);
    }
    double t1 = snug_now_seconds();
    int64_t len = n_prompt;
    snug_finish finish = SNUG_FINISH_NONE;
    while (st == SNUG_OK) {
        int32_t id = chosen >= 0 ? chosen
                     : snug_sample(sp, &rng, logits, g->cfg.vocab_size, g->ids, (int32_t)n_prompt,
                                   g->ids + n_prompt, (int32_t)(len - n_prompt), g->sample_scratch);
        g->ids[len++] = id;
        size_t n_text = 0, n_emit = 0;
        /* Ids the model has beyond the tokenizer's vocabulary (embedding rows
         * padded for speed, as Qwen2's) have no text. */
        if (g->tok && id < snug_tokenizer_n_vocab(g->tok))
            st = snug_tok_stream_push(&stream, id, g->text, g->text_cap, &n_text, err);
        if (st != SNUG_OK) break;
        finish = snug_stop_feed(stop, &ss, id, g->text, n_text, g->emit, &n_emit);
        bool go_on = send(on_text, ctx, g->emit, n_emit);
        if (finish == SNUG_FINISH_NONE && !go_on) finish = snug_stop_end(&ss, SNUG_FINISH_ABORT, g->emit, &n_emit);
        if (finish == SNUG_FINISH_NONE && len >= g->max_len) {
            finish = snug_stop_end(&ss, SNUG_FINISH_MODEL_LENGTH, g->emit, &n_emit);
            send(on_text, ctx, g->emit, n_emit);
        }
        if (finish != SNUG_FINISH_NONE) break;
        st = step(g, len - 1, 1, true, greedy, &logits, &chosen, err);
    }
    if (st == SNUG_OK && g->tok && finish != SNUG_FINISH_STOP_STRING && finish != SNUG_FINISH_ABORT) {
        size_t n = snug_tok_stream_finish(&stream, g->text, g->text_cap);
        send(on_text, ctx, g->text, n);
    }
    snug_block_table_release(&g->table, &g->pool);
    res->n_generated = len - n_prompt;
    res->finish = finish;
    res->prefill_seconds = t1 - t0;
    res->decode_seconds = snug_now_seconds() - t1;
    return st;
}
