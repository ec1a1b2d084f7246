/*
 * llm.c: the public engine API of snug.h (snug_llm_*, snug_job_*) over the
 * serving engine (engine.h).
 *
 * The public types are plain C; here they become the engine's: a
 * snug_gen_params turns into a snug_sampling_params and a snug_stop_params,
 * checked by their own validators (so every message names the field as the
 * HTTP API does), and a job is one block of category other carved into the
 * engine request, the prompt's ids and the text buffer events point into.
 *
 * Memory: the snug_llm is made before the plan, so the plan counts it. The
 * plan keeps job_memory bytes out of the KV cache and allocatable (the
 * planner's server_tracked); this file counts what live jobs hold against
 * that figure (the allocator's charge for each block) and refuses a job
 * that would pass it, so one engine's jobs cannot take more than the plan
 * kept for them. A text submit also makes a tokenizer encoder for the
 * length of the call. Nothing else allocates after snug_llm_open.
 */
#include "engine.h"

#include "model/kvcache.h"
#include "tokenizer/tokenizer.h"

#include "base/dtype.h"
#include "base/mem.h"

#include <string.h>

struct snug_job {
    snug_request r;                 /* the engine's view; r.prompt points at ids */
    snug_job *prev, *next;          /* the llm's live jobs */
    size_t held;                    /* what the allocator charges this block */
    char *text;                     /* [llm->text_cap] the last event's text */
    int32_t *ids;                   /* [r.n_prompt] */
};

struct snug_llm {
    snug_engine *e;
    snug_engine_opts eo;            /* what the engine was opened with */
    pthread_mutex_t mu;             /* guards jobs and job_used */
    snug_job *jobs;                 /* live jobs, most recent first */
    size_t job_memory;              /* what jobs may hold */
    size_t job_used;                /* what they hold */
    size_t text_cap;                /* snug_engine_text_bytes */
};

/* ---- options ------------------------------------------------------------ */

void snug_llm_opts_default(snug_llm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->job_memory = SNUG_LLM_JOB_MEMORY_DEFAULT;
}

void snug_gen_params_default(snug_gen_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 1;
    p->top_p = 1;
    p->repetition_penalty = 1;
    p->n = 1;
}

/* Checks what the planner does not check by the public field's name. */
static snug_status check_opts(const snug_llm_opts *o, snug_error *err)
{
    if (!o || !o->model_dir || !o->model_dir[0])
        return snug_errorf(err, SNUG_INVALID, "model_dir: expected a model directory");
    if (o->memory_bytes && o->memory_fraction)
        return snug_errorf(err, SNUG_INVALID, "memory_bytes and memory_fraction: give one");
    if (o->memory_fraction && !(o->memory_fraction > 0 && o->memory_fraction <= 1))
        return snug_errorf(err, SNUG_INVALID, "memory_fraction: expected a value in (0, 1], got %g",
                           o->memory_fraction);
    const struct {
        const char *name;
        int64_t v;
    } counts[] = {{"max_model_len", o->max_model_len}, {"max_num_seqs", o->max_num_seqs},
                  {"max_num_batched_tokens", o->max_num_batched_tokens},
                  {"n_threads", o->n_threads}, {"max_queue", o->max_queue}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(counts); i++)
        if (counts[i].v < 0)
            return snug_errorf(err, SNUG_INVALID, "%s: expected 0 (the default) or more, got %lld",
                               counts[i].name, (long long)counts[i].v);
    if (o->kv_cache_dtype != SNUG_DTYPE_NONE &&
        snug_kv_dtype_check(o->kv_cache_dtype, 32, NULL) != SNUG_OK) /* (its head_dim: the plan's to check) */
        return snug_errorf(err, SNUG_INVALID, "kv_cache_dtype: expected 0 (bf16), F32, F16, BF16, Q8_0, "
                           "MXFP8_E4M3 or MXFP8_E5M2, got %s", snug_dtype_name(o->kv_cache_dtype));
    return SNUG_OK;
}

/* ---- open, close ----------------------------------------------------------- */

snug_status snug_llm_open(const snug_llm_opts *o, snug_llm **out, snug_error *err)
{
    *out = NULL;
    snug_status st = check_opts(o, err);
    if (st != SNUG_OK) return st;
    /* made before the plan, so that the plan counts it in S */
    snug_llm *llm = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *llm, err);
    if (!llm) return snug_error_prefix(err, SNUG_NOMEM, "engine: ");
    llm->job_memory = o->job_memory ? o->job_memory : SNUG_LLM_JOB_MEMORY_DEFAULT;
    snug_planner_opts *po = &llm->eo.plan;
    po->budget.memory_bytes = o->memory_bytes;
    po->budget.fraction = o->memory_fraction;
    po->max_model_len = o->max_model_len;
    po->max_num_seqs = o->max_num_seqs;
    po->max_num_batched_tokens = o->max_num_batched_tokens;
    po->kv_cache_memory = o->kv_cache_memory;
    po->reserve = o->reserve;
    po->server_tracked = llm->job_memory;
    po->n_threads = o->n_threads;
    po->isa = -1;
    po->no_prefix_caching = o->no_prefix_caching;
    po->kv_dtype = o->kv_cache_dtype;
    llm->eo.max_queue = o->max_queue;
    llm->eo.spec = (snug_spec_opts){.prompt_lookup = o->prompt_lookup, .draft_model = o->draft_model,
                                    .n_tokens = o->num_speculative_tokens,
                                    .n_min = o->draft_min};
    st = snug_engine_open(o->model_dir, &llm->eo, &llm->e, err);
    if (st != SNUG_OK) {
        snug_mem_free(llm);
        return st;
    }
    pthread_mutex_init(&llm->mu, NULL);
    llm->text_cap = snug_engine_text_bytes(llm->e);
    *out = llm;
    return SNUG_OK;
}

void snug_llm_close(snug_llm *llm)
{
    if (!llm) return;
    while (llm->jobs) snug_job_free(llm, llm->jobs);
    snug_engine_close(llm->e);
    pthread_mutex_destroy(&llm->mu);
    snug_mem_free(llm);
}

/* ---- jobs ------------------------------------------------------------------ */

/* The engine request for p (NULL: the defaults) into *r, checked field by
 * field; nothing allocated. */
static snug_status make_request(snug_llm *llm, const snug_gen_params *p, snug_request *r,
                                snug_error *err)
{
    snug_gen_params def;
    if (!p) {
        snug_gen_params_default(&def);
        p = &def;
    }
    memset(r, 0, sizeof *r);
    snug_sampling_params *sp = &r->sampling;
    snug_sampling_params_default(sp);
    sp->temperature = p->temperature;
    sp->top_p = p->top_p;
    sp->top_k = p->top_k;
    sp->min_p = p->min_p;
    sp->repetition_penalty = p->repetition_penalty;
    sp->frequency_penalty = p->frequency_penalty;
    sp->presence_penalty = p->presence_penalty;
    sp->has_seed = p->has_seed;
    sp->seed = p->seed;
    snug_status st = snug_sampling_params_validate(sp, snug_engine_n_vocab(llm->e), err);
    if (st != SNUG_OK) return st;
    snug_stop_params_default(&r->stop);
    r->stop.max_tokens = p->max_tokens;
    r->stop.ignore_eos = p->ignore_eos;
    if (p->n_stop < 0 || p->n_stop > SNUG_GEN_STOP_MAX)
        return snug_errorf(err, SNUG_INVALID, "stop: expected 0 to %d strings, got %d",
                           SNUG_GEN_STOP_MAX, p->n_stop);
    for (int32_t i = 0; i < p->n_stop; i++) {
        if (!p->stop[i]) return snug_errorf(err, SNUG_INVALID, "stop: string %d is NULL", i);
        st = snug_stop_params_add_string(&r->stop, p->stop[i], strlen(p->stop[i]), err);
        if (st != SNUG_OK) return st;
    }
    st = snug_stop_params_validate(&r->stop, err);
    if (st != SNUG_OK) return st;
    r->n = p->n;
    r->cache_salt = p->cache_salt ? snug_engine_salt(p->cache_salt, strlen(p->cache_salt)) : 0;
    r->notify = p->on_ready;
    r->notify_ctx = p->on_ready_ctx;
    return SNUG_OK;
}

/* Makes a job for n_ids prompt ids against the job memory and links it
 * into llm's list. Fails with SNUG_NOMEM; then nothing is held. */
static snug_status job_make(snug_llm *llm, size_t n_ids, snug_job **out, snug_error *err)
{
    size_t head = snug_round_up(sizeof(snug_job), SNUG_MEM_ALIGN);
    size_t text = snug_round_up(llm->text_cap, SNUG_MEM_ALIGN);
    size_t total = head + text + n_ids * sizeof(int32_t); /* n_ids < max_model_len: no overflow */
    snug_status st = SNUG_OK;
    pthread_mutex_lock(&llm->mu);
    size_t need = snug_mem_held_bytes(total);
    if (llm->job_used + need > llm->job_memory) {
        st = snug_errorf(err, SNUG_NOMEM, "job_memory: this job needs %zu bytes and jobs hold %zu "
                         "of the %zu the plan kept for them; free finished jobs, or open with a "
                         "larger job_memory", need, llm->job_used, llm->job_memory);
        goto done;
    }
    char *b = snug_mem_alloc(SNUG_MEM_OTHER, total, err);
    if (!b) {
        st = snug_error_prefix(err, SNUG_NOMEM, "job: ");
        goto done;
    }
    snug_job *j = (snug_job *)b;
    j->text = b + head;
    j->ids = (int32_t *)(b + head + text);
    j->held = snug_mem_block_bytes(b);
    llm->job_used += j->held;
    j->next = llm->jobs;
    if (llm->jobs) llm->jobs->prev = j;
    llm->jobs = j;
    *out = j;
done:
    pthread_mutex_unlock(&llm->mu);
    return st;
}

/* Unlinks job and gives its memory back (the engine has let go of it). */
static void job_unmake(snug_llm *llm, snug_job *j)
{
    pthread_mutex_lock(&llm->mu);
    if (j->prev) j->prev->next = j->next;
    else llm->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    llm->job_used -= j->held;
    pthread_mutex_unlock(&llm->mu);
    snug_mem_free(j);
}

/* Makes the job for the checked request r and the prompt ids, and submits
 * it. On failure nothing is held. */
static snug_status submit(snug_llm *llm, const snug_request *r, const int32_t *ids, size_t n,
                          snug_job **out, snug_error *err)
{
    /* checked before the job is made: its size follows n */
    snug_request checked = *r;
    checked.prompt = ids;
    checked.n_prompt = (int64_t)n;
    snug_status st = snug_engine_check(llm->e, &checked, err);
    if (st != SNUG_OK) return st;
    snug_job *j = NULL;
    st = job_make(llm, n, &j, err);
    if (st != SNUG_OK) return st;
    memcpy(j->ids, ids, n * sizeof(int32_t));
    j->r = checked;
    j->r.prompt = j->ids;
    j->r.n_prompt = (int64_t)n;
    st = snug_engine_submit(llm->e, &j->r, err);
    if (st != SNUG_OK) {
        job_unmake(llm, j); /* refused: never queued */
        return st;
    }
    *out = j;
    return SNUG_OK;
}

snug_status snug_llm_submit_ids(snug_llm *llm, const int32_t *ids, size_t n,
                                const snug_gen_params *p, snug_job **out, snug_error *err)
{
    *out = NULL;
    snug_request r;
    snug_status st = make_request(llm, p, &r, err);
    return st == SNUG_OK ? submit(llm, &r, ids, n, out, err) : st;
}

snug_status snug_llm_submit_text(snug_llm *llm, const char *prompt, size_t len,
                                 const snug_gen_params *p, snug_job **out, snug_error *err)
{
    *out = NULL;
    snug_request r;
    snug_status st = make_request(llm, p, &r, err);
    if (st != SNUG_OK) return st;
    const snug_tokenizer *tok = snug_engine_tokenizer(llm->e);
    if (!tok)
        return snug_errorf(err, SNUG_UNSUPPORTED, "the model has no tokenizer: submit token ids");
    if (!prompt && len) return snug_errorf(err, SNUG_INVALID, "prompt: NULL with %zu bytes", len);
    snug_tok_encoder *enc = NULL;
    const int32_t *ids = NULL;
    size_t n = 0;
    snug_tok_encode_opts eo = {.add_special = true, .parse_special = true};
    st = snug_tok_encoder_create(tok, &enc, err);
    if (st == SNUG_OK) st = snug_tok_encode(enc, prompt ? prompt : "", len, &eo, &ids, &n, err);
    if (st == SNUG_OK) st = submit(llm, &r, ids, n, out, err);
    snug_tok_encoder_free(enc);
    return st;
}

bool snug_job_next(snug_llm *llm, snug_job *job, snug_token_event *ev)
{
    snug_output o;
    if (!snug_engine_next(llm->e, &job->r, &o, job->text, llm->text_cap)) return false;
    *ev = (snug_token_event){o.choice, o.token, job->text, o.n_text, snug_finish_reason_str(o.finish)};
    return true;
}

void snug_job_wait(snug_llm *llm, snug_job *job, double timeout_s)
{
    snug_engine_wait(llm->e, &job->r, timeout_s);
}

bool snug_job_done(snug_llm *llm, snug_job *job) { return snug_engine_done(llm->e, &job->r); }

int64_t snug_job_cached_tokens(snug_llm *llm, snug_job *job)
{
    return snug_engine_cached_tokens(llm->e, &job->r);
}

void snug_job_cancel(snug_llm *llm, snug_job *job) { snug_engine_cancel(llm->e, &job->r); }

void snug_job_free(snug_llm *llm, snug_job *job)
{
    if (!job) return;
    snug_engine_release(llm->e, &job->r);
    job_unmake(llm, job);
}

/* ---- the plan and the counters ------------------------------------------------ */

void snug_llm_plan(snug_llm *llm, snug_llm_plan_info *out)
{
    const snug_plan_report *r = snug_engine_plan(llm->e);
    *out = (snug_llm_plan_info){
        .budget = r->sizes.budget, .weights = r->weights, .activations = r->activations,
        .serving_state = r->serving_state, .untracked = r->sizes.untracked,
        .reserve = r->sizes.reserve, .job_memory = llm->job_memory, .kv_cache = r->kv.kv_held,
        .kv_blocks = r->kv.blocks, .block_size = r->sizes.block_size,
        .max_model_len = r->sizes.max_model_len, .max_num_seqs = r->sizes.max_num_seqs};
}

void snug_llm_counters(snug_llm *llm, snug_llm_counters_info *out)
{
    snug_engine_counters c;
    snug_engine_counters_get(llm->e, &c);
    pthread_mutex_lock(&llm->mu);
    size_t used = llm->job_used;
    pthread_mutex_unlock(&llm->mu);
    *out = (snug_llm_counters_info){
        .running = c.running, .waiting = c.waiting, .queued = c.queued,
        .preemptions = c.preemptions, .prompt_tokens = c.prompt_tokens,
        .generation_tokens = c.generation_tokens, .kv_blocks_used = c.kv.used,
        .kv_blocks_total = c.kv.total, .requests_finished = c.requests_finished,
        .job_memory_used = used, .failed = c.failed,
        .prefix_queried_tokens = c.prefix_queried_tokens, .prefix_hit_tokens = c.prefix_hit_tokens,
        .kv_blocks_cached = c.kv.cached, .spec_draft_tokens = c.spec_drafted_tokens,
        .spec_accepted_tokens = c.spec_accepted_tokens};
}
