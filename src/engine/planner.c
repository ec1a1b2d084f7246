/*
 * planner.c: the memory lifecycle, step by step (planner.h).
 */
#include "planner_impl.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "blocks.h"
#include "dist/agree.h"
#include "model/params.h"
#include "profile.h"
#include "spec.h"

#include <string.h>
#include <sys/stat.h>

/* with populate_after_ready, the KV cache is made resident this much at a
 * time (between steps when the ready blocks run short, else while the
 * engine is idle): 10-40 ms of first touch on a VM at 0.4-1.6 GB/s, the
 * most a request arriving meanwhile waits */
enum { POPULATE_GROUP_BYTES = 16 << 20 };

/* Resets every category's peak to its current value. */
static void reset_peaks(void)
{
    for (int c = 0; c <= SNUG_MEM_N_CATS; c++) snug_mem_status((snug_mem_cat)c, NULL, NULL, true);
}

static size_t cur_of(snug_mem_cat c)
{
    size_t cur = 0;
    snug_mem_status(c, &cur, NULL, false);
    return cur;
}

/* True when dir holds a tokenizer in one of the files snug reads, or is a
 * model file (GGUF), which carries its vocabulary. */
static bool has_tokenizer(const char *dir)
{
    static const char *const names[] = {"tokenizer.json", "tokenizer.model", "vocab.json",
                                        "tokenizer.bin"};
    char path[4096];
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode)) return true;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(names); i++)
        if (snug_path_join(path, sizeof path, dir, names[i], NULL) == SNUG_OK &&
            snug_file_exists(path))
            return true;
    return false;
}

/* The options with their defaults filled in and checked against the model. */
static snug_status resolve(const snug_planner_opts *in, const snug_model_config *cfg,
                           snug_planner_opts *o, snug_error *err)
{
    *o = *in;
    if (o->max_model_len == 0) o->max_model_len = cfg->max_position_embeddings;
    if (o->max_model_len < 1 || o->max_model_len > cfg->max_position_embeddings)
        return snug_errorf(err, SNUG_INVALID, "--max-model-len %lld: the model has %lld positions",
                           (long long)o->max_model_len, (long long)cfg->max_position_embeddings);
    if (o->max_num_seqs == 0) o->max_num_seqs = SNUG_MAX_NUM_SEQS_DEFAULT;
    if (o->max_num_batched_tokens == 0)
        o->max_num_batched_tokens = SNUG_MAX(SNUG_MAX_NUM_BATCHED_TOKENS_DEFAULT, o->max_num_seqs);
    if (o->block_size == 0) o->block_size = SNUG_BLOCK_SIZE_DEFAULT;
    if (o->kv_dtype == SNUG_DTYPE_NONE) o->kv_dtype = SNUG_DTYPE_BF16;
    snug_status st = snug_kv_dtype_check(o->kv_dtype, cfg->head_dim, err);
    if (st != SNUG_OK) return st;
    if (o->max_num_seqs < 1 || o->max_num_batched_tokens < o->max_num_seqs)
        return snug_errorf(err, SNUG_INVALID, "--max-num-batched-tokens (%d) must be at least "
                           "--max-num-seqs (%d), which must be at least 1",
                           o->max_num_batched_tokens, o->max_num_seqs);
    if (o->block_size < 1 || o->block_size > 1024)
        return snug_errorf(err, SNUG_INVALID, "--block-size %d: expected 1 to 1024", o->block_size);
    if (o->spec_tokens < 0 || o->spec_tokens > SNUG_SPEC_TOKENS_MAX)
        return snug_errorf(err, SNUG_INVALID, "--num-speculative-tokens %d: expected 0 to %d", o->spec_tokens,
                           SNUG_SPEC_TOKENS_MAX);
    return SNUG_OK;
}

/* The KV cache's cap where nobody limited this process's memory (no
 * --memory or --memory-fraction, no --kv-cache-memory, no cgroup limit):
 * a fraction of the whole machine would take most of a shared host, so the
 * cache gets at most o->kv_cache_default_cap (as vLLM's CPU backend gives
 * its cache 4 GiB). 0 elsewhere. */
static size_t default_cap(const snug_planner_opts *o, const snug_budget *b)
{
    if (b->source != SNUG_BUDGET_MEMINFO || o->budget.memory_bytes || o->budget.fraction ||
        o->kv_cache_memory)
        return 0;
    return o->kv_cache_default_cap ? o->kv_cache_default_cap : SNUG_KV_CACHE_DEFAULT_CAP;
}

/* What the process holds now beyond the allocator's total, read to the
 * page; 0 where it cannot be read. */
static size_t untracked_now(void)
{
    size_t held = cur_of(SNUG_MEM_TOTAL), rss = 0;
    if (snug_proc_rss_exact(&rss, NULL) != SNUG_OK) return 0;
    return rss > held ? rss - held : 0;
}

/* The allocator's capacity while loading and profiling: the budget less
 * what the process holds beyond the allocator (outside), less the reserve. */
static size_t load_capacity(const snug_plan_report *r, const snug_planner_opts *o, size_t outside)
{
    size_t keep = 0;
    if (!snug_add_size(outside, o->reserve + o->server_untracked, &keep)) return 0;
    return r->budget.bytes > keep ? r->budget.bytes - keep : 0;
}

/* The message for a profile step whose scratch cache the loading capacity
 * refused (r->profile holds its sizes): the process would have gone past
 * the budget; what would fit. */
static snug_status profile_too_big(const snug_plan_report *r, const snug_planner_opts *o,
                                   const snug_kv_shape *ks, snug_error *err)
{
    char a[32], b[32], c[32];
    snug_kv_shape layers = *ks; /* the scratch cache holds the layers the step runs */
    layers.n_layers = r->profile.n_layers;
    size_t scratch = snug_mem_held_bytes((size_t)r->profile.scratch_blocks * snug_kv_block_bytes(&layers));
    size_t held = cur_of(SNUG_MEM_TOTAL), outside = untracked_now();
    size_t fit = held + scratch + outside + o->reserve + o->server_untracked;
    return snug_errorf(err, SNUG_NOMEM,
                       "the budget of %s cannot hold the profile step: its scratch KV cache of "
                       "%lld blocks (%s, for %d tokens over %d sequences) on top of the weights, "
                       "activations and serving state (%zu bytes), what the process holds outside "
                       "the allocator (%zu) and the reserve (%zu): a budget of %s (%zu bytes) "
                       "would, or a smaller --max-num-seqs or --max-num-batched-tokens",
                       snug_fmt_bytes(r->budget.bytes, a), (long long)r->profile.scratch_blocks,
                       snug_fmt_bytes(scratch, b), r->profile.n_tokens, r->profile.n_seqs, held,
                       outside, o->reserve + o->server_untracked, snug_fmt_bytes(fit, c), fit);
}

/* The KV cache's shapes for the model of cfg and dims: every layer in one
 * group (*all: the profile step's, which makes its scratch cache of the
 * layers it runs), and, where a model's
 * windowed layers keep only their windows (not swa_full, a window shorter
 * than max_model_len), the full layers' (*full; n_layers 0 when every
 * layer is windowed: a cache of positions only, whose blocks carry the
 * sequences' tables and the prefix cache) and the windowed layers' (*win,
 * n_layers 0 when one group) with the fewest blocks that group takes, the
 * window of one sequence and a step's tokens (*win_blocks when not NULL;
 * the plan sizes it, plan_now). */
static void kv_shapes(const snug_model_config *cfg, const snug_model_dims *d, const snug_planner_opts *o,
                      snug_kv_shape *all, snug_kv_shape *full, snug_kv_shape *win, int64_t *win_blocks)
{
    *all = (snug_kv_shape){d->n_layers, d->n_kv_heads, d->head_dim, o->block_size, o->kv_dtype};
    *full = *all;
    *win = *all;
    win->n_layers = 0;
    if (win_blocks) *win_blocks = 0;
    int64_t window = cfg->sliding_window;
    if (o->swa_full || d->n_window_layers == 0 || window < 1 || window >= o->max_model_len)
        return;
    full->n_layers = d->n_layers - d->n_window_layers;
    win->n_layers = d->n_window_layers;
    if (win_blocks) *win_blocks = snug_sched_window_blocks(1, o->max_num_batched_tokens, o->block_size, (int32_t)window);
}

/* The rows of logits the largest step holds: a row a sequence, and the
 * drafts' of up to SNUG_SPEC_SEQS_ROWS of them; no more than its tokens. */
static int32_t logits_rows(const snug_planner_opts *o)
{
    int64_t rows = (int64_t)o->max_num_seqs + (int64_t)SNUG_MIN(o->max_num_seqs, SNUG_SPEC_SEQS_ROWS) * o->spec_tokens;
    return (int32_t)SNUG_MIN(rows, (int64_t)o->max_num_batched_tokens);
}

/* The draft model's rows of logits the serving state keeps for sampled
 * drafts (snug_serving_shape.draft_rows): k a sequence, for up to
 * SNUG_SPEC_SAMPLED_SEQS sequences a step; none without a draft model. */
static int32_t draft_rows(const snug_planner_opts *o)
{
    return o->draft_dir ? SNUG_MIN(o->max_num_seqs, SNUG_SPEC_SAMPLED_SEQS) * o->spec_tokens : 0;
}

/* What the window group's cache of shape win and `blocks` blocks and its
 * block pool cost the budget; 0 for none. */
static size_t window_cache_bytes(const snug_kv_shape *win, int64_t blocks)
{
    size_t bytes;
    if (win->n_layers == 0) return 0;
    if (!snug_mul_size((size_t)blocks, snug_kv_block_bytes(win), &bytes)) return SIZE_MAX;
    return snug_mem_held_bytes(bytes) + snug_block_pool_bytes(blocks, win->block_size);
}

/* Marks the allocator's event log and tells the caller that phase begins. */
static void begin(const snug_planner_opts *o, const char *phase, double t0)
{
    snug_mem_trace_mark(phase);
    if (o->on_phase) o->on_phase(o->on_phase_ctx, phase, snug_now_seconds() - t0);
}

/* Before anything is loaded: the plan's predictable parts (the weights by
 * the parameter table, the activation arena and the serving state by their
 * pure functions, the reserve, and of U what the process holds outside the
 * allocator already: its code and libraries) against the budget, so that
 * one that cannot fit fails at once, the process far under it, with the
 * figures (plan.h's messages; U is not all known yet, so what would fit is
 * at least that). Fails
 * also as the parameter table does (SNUG_NOMEM, a tp that does not divide
 * the model), as the load would. */
static snug_status check_before_load(const snug_planned *p, const snug_planner_opts *o,
                                     size_t outside, snug_error *err)
{
    const snug_plan_report *r = &p->report;
    const snug_model_config *cfg = &p->ck->config;
    snug_error scratch = {0};
    snug_dtype dt = o->weight_dtype != SNUG_DTYPE_NONE ? o->weight_dtype
                                                       : snug_checkpoint_weight_dtype(p->ck);
    uint64_t w[SNUG_TP_MAX] = {0};
    snug_model_dims dims;
    if (r->tp > SNUG_TP_MAX || !snug_dtype_is_weight(dt)) return SNUG_OK; /* the loader says */
    snug_status st = snug_params_rank_held_bytes(cfg, r->tp, dt, o->quant_dtype, snug_checkpoint_tensor_dtype,
                                                 (void *)p->ck, w, err);
    if (st == SNUG_OK) st = snug_model_dims_make(cfg, r->tp, r->rank, &dims, err);
    if (st != SNUG_OK) return st; /* as the load itself would fail */
    snug_step_shape shape = {o->max_num_batched_tokens, o->max_num_seqs, logits_rows(o),
                             o->n_threads > 0 ? o->n_threads : 1};
    snug_kv_shape all, ks, wks;
    int64_t wblocks;
    kv_shapes(cfg, &dims, o, &all, &ks, &wks, &wblocks);
    snug_serving_shape ss = {o->max_num_seqs, o->max_num_batched_tokens, o->max_model_len,
                             o->block_size, cfg->vocab_size,
                             p->tok ? snug_tokenizer_max_token_bytes(p->tok) : 64, 1, p->tok != NULL,
                             wks.n_layers > 0, o->spec_tokens, draft_rows(o)};
    snug_plan_sizes sizes = {
        .budget = r->budget.bytes, .weights = (size_t)w[r->rank],
        .activations = snug_model_activation_bytes(&dims, &shape),
        .serving_state = snug_serving_bytes(&ss), .untracked = outside,
        .reserve = o->reserve + o->server_tracked + o->server_untracked,
        .window_cache = window_cache_bytes(&wks, wblocks),
        .kv_cache_memory = o->kv_cache_memory, .block_bytes = snug_kv_block_bytes(&ks),
        .block_size = o->block_size, .max_model_len = o->max_model_len,
        .max_num_seqs = o->max_num_seqs, .window_seqs = 1};
    /* no block at all even before U: plan.h says why with the figures (a
     * cache too small for max_model_len is the plan's to judge, with U known
     * and the length it may reduce) */
    snug_kv_plan kv;
    if (snug_plan_budget_blocks(&sizes) > 0 || snug_plan_kv(&sizes, &kv, err) != SNUG_NOMEM)
        return SNUG_OK;
    size_t hwm = 0;
    char h[32];
    if (snug_proc_mem(NULL, &hwm, &scratch) == SNUG_OK && err)
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                 " (nothing was loaded: the process's high-water mark is %s, %zu bytes)",
                 snug_fmt_bytes(hwm, h), hwm);
    return snug_error_prefix(err, SNUG_NOMEM, "before loading: ");
}

/* The plan from what the allocator holds now: W, A (the activations'
 * peak since the reset), S (the rest), and the profile step's U. */
/* The plan with a window group that holds the windows of n sequences. */
static snug_status plan_windows(snug_plan_report *r, const snug_planner_opts *o, const snug_kv_shape *wks, int32_t n,
                                snug_error *err)
{
    r->window_blocks = snug_sched_window_blocks(n, o->max_num_batched_tokens, o->block_size, r->window);
    r->window_held = r->sizes.window_cache = window_cache_bytes(wks, r->window_blocks);
    r->sizes.window_seqs = n;
    return snug_plan_kv(&r->sizes, &r->kv, err);
}

/* Whether the windows of n sequences (the plan for them in r) are what
 * the options let the cache have: with every layer windowed, the window
 * group is the cache that --kv-cache-memory fixes and the default caps
 * (one sequence's window always may); otherwise the full layers' cache
 * must hold n max_model_len sequences, rounded up. */
static bool windows_allowed(const snug_plan_report *r, const snug_planner_opts *o, const snug_kv_shape *wks,
                            int32_t n)
{
    if (r->sizes.block_bytes > 0) return (r->kv.tokens + o->max_model_len - 1) / o->max_model_len >= n;
    size_t bytes = (size_t)r->window_blocks * snug_kv_block_bytes(wks);
    if (o->kv_cache_memory) return bytes <= o->kv_cache_memory;
    return n == 1 || r->sizes.kv_cache_cap == 0 || bytes <= r->sizes.kv_cache_cap;
}

/* The draft model's KV cache shape (p->dmodel's layers, the cache's
 * blocks and dtype). */
static snug_kv_shape draft_shape(const snug_planned *p, const snug_planner_opts *o)
{
    const snug_model_dims *d = snug_model_get_dims(p->dmodel);
    return (snug_kv_shape){d->n_layers, d->n_kv_heads, d->head_dim, o->block_size, o->kv_dtype};
}

/* The plan from what the allocator holds now (see below); with a window
 * group, whose windows are for at most max_seqs sequences. */
static snug_status plan_now(snug_planned *p, const snug_planner_opts *o, const snug_kv_shape *ks,
                            const snug_kv_shape *all, int32_t max_seqs, snug_error *err)
{
    snug_plan_report *r = &p->report;
    r->weights = cur_of(SNUG_MEM_WEIGHTS);
    snug_mem_status(SNUG_MEM_ACTIVATIONS, NULL, &r->activations, false);
    r->serving_state = cur_of(SNUG_MEM_TOTAL) - r->weights - cur_of(SNUG_MEM_ACTIVATIONS);
    r->kv_dtype = o->kv_dtype;
    snug_kv_shape ds = p->dmodel ? draft_shape(p, o) : (snug_kv_shape){0};
    if (p->dmodel && ks->n_layers == 0)
        return snug_errorf(err, SNUG_INVALID, "--draft-model: every layer of the model keeps only its window, so "
                           "its cache holds no keys beside which the draft's could be; --swa-full keeps them all");
    r->sizes = (snug_plan_sizes){
        .budget = r->budget.bytes, .weights = r->weights, .activations = r->activations,
        .serving_state = r->serving_state, .untracked = r->profile.untracked,
        .reserve = o->reserve + o->server_tracked + o->server_untracked,
        .window_cache = r->window_held,
        .kv_cache_memory = o->kv_cache_memory, .kv_cache_cap = default_cap(o, &r->budget),
        .block_bytes = snug_kv_block_bytes(ks), .full_block_bytes = r->window_layers ? snug_kv_block_bytes(all) : 0,
        .draft_block_bytes = p->dmodel ? snug_kv_block_bytes(&ds) : 0,
        .block_size = o->block_size,
        .max_model_len = o->max_model_len, .max_num_seqs = o->max_num_seqs};
    if (r->window_layers == 0) return snug_plan_kv(&r->sizes, &r->kv, err);
    /* the window group holds the windows of n sequences: the most (up to
     * max_seqs) for which the plan fits and the options allow them
     * (windows_allowed: the fewer windows, the more the full layers get;
     * whether n holds falls as n grows, so a search of n finds the last
     * that holds; one always does when anything fits) */
    snug_kv_shape wks = *all;
    wks.n_layers = r->window_layers;
    snug_error scratch = {0};
    int32_t lo = 1, hi = SNUG_MAX(1, max_seqs);
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (plan_windows(r, o, &wks, mid, &scratch) == SNUG_OK && windows_allowed(r, o, &wks, mid))
            lo = mid;
        else
            hi = mid - 1;
    }
    snug_status st = plan_windows(r, o, &wks, lo, err);
    if (st != SNUG_OK) return st;
    r->window_seqs = lo;
    if (r->sizes.block_bytes > 0) return SNUG_OK;
    /* every layer windowed: the window group is the cache; what limited it */
    char a[32], b[32];
    size_t block = snug_kv_block_bytes(&wks), bytes = (size_t)r->window_blocks * block;
    size_t more = (size_t)snug_sched_window_blocks(lo + 1, o->max_num_batched_tokens, o->block_size, r->window) * block;
    if (o->kv_cache_memory && bytes > o->kv_cache_memory)
        return snug_errorf(err, SNUG_NOMEM, "--kv-cache-memory %s (%zu bytes) is below the window of one "
                           "sequence and a step's tokens in every layer: %s (%zu bytes) would hold it",
                           snug_fmt_bytes(o->kv_cache_memory, a), o->kv_cache_memory, snug_fmt_bytes(bytes, b), bytes);
    if (lo < max_seqs && o->kv_cache_memory && more > o->kv_cache_memory)
        r->kv.limited_by = SNUG_KV_LIMIT_KV_CACHE_MEMORY;
    else if (lo < max_seqs && r->sizes.kv_cache_cap > 0 && more > r->sizes.kv_cache_cap)
        r->kv.limited_by = SNUG_KV_LIMIT_DEFAULT_CAP;
    else if (lo == max_seqs && max_seqs < o->max_num_seqs)
        r->kv.limited_by = SNUG_KV_LIMIT_OTHER_RANK;
    return SNUG_OK;
}

/* p's serving state for shape ss, its block counted in the report and the
 * trie attached. */
static snug_status make_serving(snug_planned *p, const snug_serving_shape *ss, snug_error *err)
{
    snug_status st = snug_serving_create(ss, &p->serving, err);
    if (st == SNUG_OK) p->report.serving_block = snug_mem_block_bytes(p->serving.block);
    p->serving.constrain.trie = p->trie;
    return st;
}

/* Whether the tokenizers a and b (either NULL: none) give every id the
 * same bytes; *at the first that differs (-1: their sizes, or one without
 * a tokenizer). */
static bool same_tokens(const snug_tokenizer *a, const snug_tokenizer *b, int32_t *at)
{
    *at = -1;
    if (!a || !b) return !a && !b;
    if (snug_tokenizer_n_vocab(a) != snug_tokenizer_n_vocab(b)) return false;
    char x[256], y[256];
    for (int32_t id = 0; id < snug_tokenizer_n_vocab(a); id++) {
        size_t nx = snug_tokenizer_token_bytes(a, id, x, sizeof x), ny = snug_tokenizer_token_bytes(b, id, y, sizeof y);
        if (nx != ny || memcmp(x, y, SNUG_MIN(nx, sizeof x)) != 0) {
            *at = id;
            return false;
        }
    }
    return true;
}

/* The draft model of o->draft_dir (speculative decoding), checked against
 * the model, loaded as its weights were (lo). Fails naming --draft-model:
 * several ranks, a vocabulary or tokens that differ, too few positions, a
 * head the KV cache's dtype cannot hold, or as loading fails. */
static snug_status load_draft(snug_planned *p, const snug_planner_opts *o, const snug_load_opts *lo, snug_error *err)
{
    snug_plan_report *r = &p->report;
    const char *dir = o->draft_dir;
    if (r->tp > 1)
        return snug_errorf(err, SNUG_INVALID, "--draft-model: not with tensor parallelism (--tp %d): a draft "
                           "model runs with one process", r->tp);
    snug_status st = snug_checkpoint_open(dir, &p->dck, err);
    if (st == SNUG_OK && has_tokenizer(dir)) st = snug_tokenizer_load(dir, &p->dtok, err);
    if (st != SNUG_OK) return snug_error_prefix(err, st, "--draft-model: ");
    const snug_model_config *t = &p->ck->config, *d = &p->dck->config;
    int32_t at = -1;
    if (!same_tokens(p->tok, p->dtok, &at)) {
        char a[64] = "", b[64] = "";
        if (at >= 0) {
            snug_tokenizer_token_bytes(p->tok, at, a, sizeof a - 1);
            snug_tokenizer_token_bytes(p->dtok, at, b, sizeof b - 1);
        }
        st = at >= 0 ? snug_errorf(err, SNUG_INVALID, "--draft-model %s: its tokenizer differs from the model's at "
                                   "token %d (\"%s\" against \"%s\"); drafts must be the model's tokens", dir, at, b, a)
                     : snug_errorf(err, SNUG_INVALID, "--draft-model %s: its tokenizer (%d tokens) is not the model's "
                                   "(%d tokens)", dir, p->dtok ? snug_tokenizer_n_vocab(p->dtok) : 0,
                                   p->tok ? snug_tokenizer_n_vocab(p->tok) : 0);
    } else if (!p->tok && d->vocab_size != t->vocab_size) {
        st = snug_errorf(err, SNUG_INVALID, "--draft-model %s: a vocabulary of %d, the model's is %d", dir,
                         d->vocab_size, t->vocab_size);
    } else if (d->max_position_embeddings < o->max_model_len) {
        st = snug_errorf(err, SNUG_INVALID, "--draft-model %s: %lld positions, fewer than max_model_len %lld", dir,
                         (long long)d->max_position_embeddings, (long long)o->max_model_len);
    } else if ((st = snug_kv_dtype_check(o->kv_dtype, d->head_dim, err)) != SNUG_OK) {
        st = snug_error_prefix(err, st, "--draft-model: ");
    }
    snug_tokenizer_free(p->dtok); /* (compared: the model's serves both) */
    p->dtok = NULL;
    if (st != SNUG_OK) return st;
    snug_load_opts dlo = *lo;
    dlo.on_progress = NULL;
    snug_load_stats stats;
    st = snug_weights_load(p->dck, &dlo, &p->dweights, &stats, err);
    if (st != SNUG_OK) return snug_error_prefix(err, st, "--draft-model: ");
    r->draft_weights = stats.weights_held;
    r->draft_layers = d->n_layers;
    return SNUG_OK;
}

/* The baseline and the budget; the same model on every rank (checkpoint,
 * tokenizer, the trie); the options resolved into *o; each rank's shard of
 * the weights loaded within the budget. */
static snug_status load_phase(snug_planned *p, const char *dir, const snug_planner_opts *opts, snug_planner_opts *o,
                              double t_start, snug_error *err)
{
    snug_comm *comm = opts->comm;
    snug_plan_report *r = &p->report;
    /* the code made resident first, so that it is in the baseline and in
     * U, and no path serving takes later faults in more */
    snug_status st = snug_proc_prefault_code(&r->code_bytes, err);
    if (st == SNUG_OK) st = snug_proc_mem(&r->baseline_rss, NULL, err);
    snug_budget_opts bo = opts->budget;
    if (bo.rss_bytes == 0) bo.rss_bytes = r->baseline_rss;
    if (st == SNUG_OK) st = snug_budget_resolve(&bo, &r->budget, err);
    begin(opts, "load", t_start);
    if (st == SNUG_OK) st = snug_checkpoint_open(dir, &p->ck, err);
    if (st == SNUG_OK) r->vision_tensors = p->ck->n_vision, r->vision_bytes = p->ck->vision_bytes;
    /* the tokenizer first: a bad one fails before the weights load, and its
     * parse (admitted at its worst case) meets a process that holds little */
    if (st == SNUG_OK && has_tokenizer(dir)) /* without one (a synthetic checkpoint): 64-byte tokens */
        st = snug_tokenizer_load(dir, &p->tok, err);
    /* the trie constrained decoding masks by: part of S, made before the
     * weights so that its building's scratch is gone when they load */
    if (st == SNUG_OK && p->tok) st = snug_constrain_trie_build(p->tok, p->ck->config.vocab_size, &p->trie, err);
    st = snug_dist_agree(comm, st, err);
    if (st == SNUG_OK) st = snug_dist_check_model(comm, p->ck, err);
    if (st != SNUG_OK) return st;
    st = resolve(opts, &p->ck->config, o, err);
    if (st != SNUG_OK) return st; /* the same on every rank */
    if (o->n_threads == 0 && r->tp > 1) o->n_threads = snug_comm_default_threads();
    size_t outside = untracked_now(); /* code and libraries, the tokenizer's leftovers */
    st = snug_dist_agree(comm, check_before_load(p, o, outside, err), err);
    if (st != SNUG_OK) return st;
    /* from here to the plan, the allocator refuses what would take the
     * process past the budget (the loader's staging, the profile's scratch
     * cache): the budget less what the process holds that it did not give
     * out (the baseline's code and libraries) and the reserve */
    snug_mem_set_capacity(load_capacity(r, o, outside));
    snug_load_opts lo = {.tp = r->tp, .rank = r->rank, .dtype = o->weight_dtype, .quant = o->quant_dtype,
                         .staging_bytes = o->staging_bytes, .n_threads = o->n_threads,
                         .on_progress = o->on_load_progress, .progress_ctx = o->on_phase_ctx};
    st = snug_weights_load(p->ck, &lo, &p->weights, &r->load, err);
    if (st == SNUG_OK && o->draft_dir) st = load_draft(p, o, &lo, err);
    return snug_dist_agree(comm, st, err);
}

/* The peaks reset, then everything serving holds besides the KV cache, at
 * its largest: the model, the serving state (of shape *ss), the stepper. */
static snug_status make_phase(snug_planned *p, const snug_planner_opts *opts, const snug_planner_opts *o,
                              snug_serving_shape *ss, double t_start, snug_error *err)
{
    snug_comm *comm = opts->comm;
    snug_plan_report *r = &p->report;
    begin(opts, "reset", t_start);
    reset_peaks();
    snug_model_opts mo = {.shape = {o->max_num_batched_tokens, o->max_num_seqs, logits_rows(o), o->n_threads},
                          .isa = o->isa, .bf16 = o->bf16, .allreduce = snug_comm_allreduce_hook,
                          .allreduce_ctx = comm, .max_model_len = o->max_model_len};
    snug_status st = snug_model_create(&p->ck->config, p->weights, &mo, &p->model, err);
    if (st == SNUG_OK) {
        r->kernels = *snug_model_kernels(p->model);
        r->weight_dtype = p->weights->dtype;
        r->threads = snug_model_step_shape(p->model)->n_threads;
    }
    if (st == SNUG_OK && p->dweights) { /* its steps: the model's tokens and a token more a sequence */
        snug_model_opts dmo = {.shape = {o->max_num_batched_tokens + o->max_num_seqs, o->max_num_seqs, o->max_num_seqs,
                                         r->threads},
                               .isa = o->isa, .bf16 = o->bf16, .pool = snug_model_pool(p->model),
                               .max_model_len = o->max_model_len};
        st = snug_model_create(&p->dck->config, p->dweights, &dmo, &p->dmodel, err);
        if (st != SNUG_OK) st = snug_error_prefix(err, st, "--draft-model: ");
    }
    snug_kv_shape all, ks, wks;
    if (st == SNUG_OK) kv_shapes(&p->ck->config, snug_model_get_dims(p->model), o, &all, &ks, &wks, NULL);
    if (st == SNUG_OK && wks.n_layers > 0) { /* (its size: the plan's) */
        r->window = (int32_t)p->ck->config.sliding_window;
        r->window_layers = wks.n_layers;
    }
    *ss = (snug_serving_shape){o->max_num_seqs, o->max_num_batched_tokens, o->max_model_len, o->block_size,
                               p->ck->config.vocab_size, p->tok ? snug_tokenizer_max_token_bytes(p->tok) : 64, 1,
                               p->tok != NULL, r->window_layers > 0, o->spec_tokens, draft_rows(o)};
    if (st == SNUG_OK) st = make_serving(p, ss, err);
    if (st == SNUG_OK)
        st = snug_stepper_create(comm, p->model, &p->ck->config,
                                 snug_blocks_for_tokens(o->max_model_len, o->block_size), &p->stepper, err);
    return snug_dist_agree(comm, st, err);
}

/* The profile step on every rank at once, then the plan; without
 * --max-model-len, a model length that does not fit becomes the longest
 * that does on every rank (the serving state made again for it); the
 * ranks' fewest blocks; the allocator's capacity the plan's from then on. */
static snug_status plan_phase(snug_planned *p, const snug_planner_opts *opts, snug_planner_opts *o,
                              snug_serving_shape *ss, const snug_kv_shape *ks, const snug_kv_shape *all,
                              double t_start, snug_error *err)
{
    snug_comm *comm = opts->comm;
    snug_plan_report *r = &p->report;
    begin(opts, "profile", t_start);
    snug_status st = snug_profile_step(p->stepper, all, &p->serving, &r->profile, err);
    if (st == SNUG_NOMEM) st = profile_too_big(r, o, all, err);
    if (st != SNUG_OK) return st; /* every rank's (profile.h) */
    begin(opts, "plan", t_start);
    st = plan_now(p, o, ks, all, o->max_num_seqs, err);
    int64_t fit = st == SNUG_NOMEM ? snug_plan_budget_blocks(&r->sizes) * o->block_size : INT64_MAX;
    snug_status cst = snug_comm_allreduce_i64(comm, &fit, 1, SNUG_REDUCE_MIN, SNUG_WAIT_START,
                                              "the plan's model length", err);
    if (cst != SNUG_OK) return cst;
    if (fit != INT64_MAX && opts->max_model_len == 0 && o->kv_cache_memory == 0 && fit >= o->block_size &&
        fit < o->max_model_len) { /* on every rank alike */
        r->max_model_len_reduced_from = o->max_model_len;
        o->max_model_len = fit;
        snug_serving_free(&p->serving);
        ss->max_model_len = fit;
        st = make_serving(p, ss, err);
        if (st == SNUG_OK) st = plan_now(p, o, ks, all, o->max_num_seqs, err);
    }
    st = snug_dist_agree(comm, st, err);
    if (st != SNUG_OK) return st;
    if (r->window_layers > 0) { /* the windows of as many sequences on every rank: the fewest */
        int64_t n = r->window_seqs;
        st = snug_comm_allreduce_i64(comm, &n, 1, SNUG_REDUCE_MIN, SNUG_WAIT_START, "the window group's sequences", err);
        if (st == SNUG_OK && n < r->window_seqs) st = plan_now(p, o, ks, all, (int32_t)n, err);
        st = snug_dist_agree(comm, st, err);
        if (st != SNUG_OK) return st;
    }
    r->kv_blocks_own = r->kv.blocks;
    int64_t blocks = r->kv.blocks;
    st = snug_comm_allreduce_i64(comm, &blocks, 1, SNUG_REDUCE_MIN, SNUG_WAIT_START, "the KV cache's blocks", err);
    if (st != SNUG_OK) return st;
    snug_plan_kv_cap(&r->sizes, blocks, &r->kv);
    /* from here on the plan's capacity: U measured, the cache and its pool within it */
    r->capacity = r->budget.bytes - r->profile.untracked - o->reserve - o->server_untracked;
    snug_mem_set_capacity(r->capacity);
    return SNUG_OK;
}

/* The KV cache allocated once, populated now, or reserved and populated as
 * serving begins (one rank: the ranks would have to agree on each group);
 * its block pool; the ranks' plans gathered on rank 0. */
static snug_status allocate_phase(snug_planned *p, const snug_planner_opts *opts, const snug_planner_opts *o,
                                  const snug_kv_shape *ks, const snug_kv_shape *wks, double t_start, snug_error *err)
{
    snug_comm *comm = opts->comm;
    snug_plan_report *r = &p->report;
    r->populated_after_ready = o->populate_after_ready && r->tp == 1 && ks->n_layers > 0;
    begin(opts, r->populated_after_ready ? "reserve" : "populate", t_start);
    double t0 = snug_now_seconds();
    snug_pool *threads = snug_model_pool(p->model); /* make it resident on every thread */
    snug_status st = r->populated_after_ready ? snug_kvcache_reserve(ks, (int32_t)r->kv.blocks, &p->kv, err)
                                              : snug_kvcache_create(ks, (int32_t)r->kv.blocks, threads, &p->kv, err);
    if (st == SNUG_OK && p->dmodel) { /* the draft's: resident now, on the same blocks */
        snug_kv_shape ds = draft_shape(p, o);
        st = snug_kvcache_create(&ds, (int32_t)r->kv.blocks, threads, &p->dkv, err);
    }
    st = snug_dist_agree(comm, st, err);
    if (st != SNUG_OK) return st;
    r->populate_seconds = snug_now_seconds() - t0;
    r->kv_held = cur_of(SNUG_MEM_KV);
    /* the block pool, sized for those blocks: part of S, as the plan counted it */
    r->prefix_caching = !o->no_prefix_caching;
    st = snug_block_pool_init(&p->pool, (int32_t)r->kv.blocks, o->block_size, r->prefix_caching, err);
    st = snug_dist_agree(comm, st, err);
    if (st != SNUG_OK) return st;
    p->kv_resident = p->kv.n_blocks;
    if (r->populated_after_ready) {
        p->kv_resident = 0;
        snug_block_pool_set_ready(&p->pool, 0);
        size_t group = o->populate_group_blocks > 0 ? (size_t)o->populate_group_blocks
                       : SNUG_MAX((size_t)1, POPULATE_GROUP_BYTES / snug_kv_block_bytes(ks));
        p->populate_group = (int32_t)SNUG_MIN(group, (size_t)p->kv.n_blocks);
        p->t_start = t_start;
        p->on_phase = opts->on_phase;
        p->on_phase_ctx = opts->on_phase_ctx;
    }
    r->serving_state += snug_mem_block_bytes(p->pool.block);
    if (st == SNUG_OK && wks->n_layers > 0) { /* the window group's: made resident now, it is small */
        st = snug_kvcache_create(wks, (int32_t)r->window_blocks, threads, &p->wkv, err);
        if (st == SNUG_OK) st = snug_block_pool_init(&p->wpool, (int32_t)r->window_blocks, o->block_size,
                                                     r->prefix_caching, err);
        if (st == SNUG_OK) p->kv.window = &p->wkv, r->window_kv_block = snug_mem_block_bytes(p->wkv.data);
        st = snug_dist_agree(comm, st, err);
        if (st != SNUG_OK) return st;
    }
    snug_rank_plan mine = {r->load.weight_bytes, r->load.arena_bytes, r->load.load_peak_bytes,
                           r->load.bytes_read, r->activations, r->serving_state,
                           r->sizes.untracked, r->kv_held, r->kv_blocks_own, r->profile.hwm};
    return snug_comm_gather(comm, &mine, sizeof mine, r->ranks, 0, SNUG_WAIT_START, "the ranks' plans", err);
}

snug_status snug_planner_open(const char *dir, const snug_planner_opts *opts, snug_planned **out,
                              snug_error *err)
{
    snug_status st = SNUG_OK;
    size_t old_capacity = snug_mem_capacity();
    double t_start = snug_now_seconds();
    snug_comm *comm = opts->comm;
    *out = NULL;
    snug_planned *p = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *p, err);
    if (!p) st = snug_error_prefix(err, SNUG_NOMEM, "memory plan: ");
    st = snug_dist_agree(comm, st, err);
    if (st != SNUG_OK) goto fail;
    p->report.tp = comm ? snug_comm_size(comm) : 1;
    p->report.rank = comm ? snug_comm_rank(comm) : 0;
    snug_planner_opts o;
    snug_serving_shape ss;
    st = load_phase(p, dir, opts, &o, t_start, err);
    if (st == SNUG_OK) st = make_phase(p, opts, &o, &ss, t_start, err);
    if (st != SNUG_OK) goto fail;
    snug_kv_shape all, ks, wks;
    kv_shapes(&p->ck->config, snug_model_get_dims(p->model), &o, &all, &ks, &wks, NULL);
    st = plan_phase(p, opts, &o, &ss, &ks, &all, t_start, err);
    if (st == SNUG_OK) st = allocate_phase(p, opts, &o, &ks, &wks, t_start, err);
    if (st != SNUG_OK) goto fail;
    begin(opts, "ready", t_start);
    *out = p;
    return SNUG_OK;
fail:
    snug_planner_close(p);
    snug_mem_set_capacity(old_capacity);
    return st;
}

bool snug_planner_populating(const snug_planned *p)
{
    return p->kv_resident < p->kv.n_blocks && !p->populate_failed;
}

snug_status snug_planner_populate_next(snug_planned *p, snug_error *err)
{
    if (!snug_planner_populating(p)) return SNUG_OK;
    double t0 = snug_now_seconds();
    int32_t end = SNUG_MIN(p->kv.n_blocks, p->kv_resident + p->populate_group);
    snug_status st = snug_kvcache_populate(&p->kv, p->kv_resident, end, snug_model_pool(p->model),
                                           &p->populate_err);
    p->populate_seconds += snug_now_seconds() - t0;
    if (st == SNUG_OK) p->kv_resident = end;
    else p->populate_failed = true;
    const char *said = st != SNUG_OK ? "resident-failed" : end == p->kv.n_blocks ? "resident" : NULL;
    if (said && p->on_phase) p->on_phase(p->on_phase_ctx, said, snug_now_seconds() - p->t_start);
    if (st != SNUG_OK && err) *err = p->populate_err;
    return st;
}

const snug_plan_report *snug_planner_report(const snug_planned *p) { return &p->report; }

void snug_planner_parts(snug_planned *p, snug_plan_parts *out)
{
    *out = (snug_plan_parts){.report = &p->report, .config = &p->ck->config, .tok = p->tok,
                             .model = p->model, .serving = &p->serving, .kv = &p->kv, .pool = &p->pool,
                             .stepper = p->stepper, .wpool = p->kv.window ? &p->wpool : NULL,
                             .window = p->report.window, .draft = p->dmodel, .draft_kv = p->dmodel ? &p->dkv : NULL};
}

int32_t snug_planner_kv_resident(const snug_planned *p) { return p->kv_resident; }

void snug_planner_close(snug_planned *p)
{
    if (!p) return;
    snug_mem_set_capacity(SIZE_MAX);
    snug_block_pool_free(&p->pool);
    snug_block_pool_free(&p->wpool);
    p->kv.window = NULL;
    snug_kvcache_free(&p->wkv);
    snug_kvcache_free(&p->kv);
    snug_kvcache_free(&p->dkv);
    snug_stepper_free(p->stepper);
    snug_model_free(p->dmodel); /* (before the model: it borrows the model's threads) */
    snug_weights_free(p->dweights);
    snug_tokenizer_free(p->dtok);
    snug_checkpoint_close(p->dck);
    snug_serving_free(&p->serving);
    snug_model_free(p->model);
    snug_vocab_trie_free(p->trie);
    snug_tokenizer_free(p->tok);
    snug_weights_free(p->weights);
    snug_checkpoint_close(p->ck);
    snug_mem_free(p);
}
