/*
 * plan_report.c: the memory plan's report in words and in JSON
 * (plan_report.h).
 */
#include "plan_report.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/json.h"
#include "model/kvcache.h"

#include <string.h>

char *snug_plan_report_line(const snug_plan_report *r, char *buf, size_t size)
{
    char b[7][32];
    snprintf(buf, size, "budget %s = weights %s + activations %s + serving state %s + untracked %s "
             "+ reserve %s + kv cache %s", snug_fmt_bytes(r->sizes.budget, b[0]),
             snug_fmt_bytes(r->weights, b[1]), snug_fmt_bytes(r->activations, b[2]),
             snug_fmt_bytes(r->serving_state, b[3]), snug_fmt_bytes(r->sizes.untracked, b[4]),
             snug_fmt_bytes(r->sizes.reserve, b[5]), snug_fmt_bytes(r->kv.kv_held, b[6]));
    size_t n = strlen(buf);
    if (r->window_layers > 0 && n < size)
        snprintf(buf + n, size - n, " + window cache %s", snug_fmt_bytes(r->window_held, b[0]));
    return buf;
}

/* What one block more than the plan's would have cost the budget: its
 * bytes and its share of the block pool, page rounding included. */
static size_t next_block_cost(const snug_plan_report *r)
{
    return snug_plan_cache_bytes(&r->sizes, r->kv.blocks + 1) -
           snug_plan_cache_bytes(&r->sizes, r->kv.blocks);
}

const char *snug_plan_report_isa(const snug_plan_report *r) { return snug_isa_name(r->kernels.isa); }

void snug_plan_report_print(FILE *f, const snug_plan_report *r)
{
    const snug_load_stats *l = &r->load;
    char a[256], b[2][32];
    fprintf(f, "loaded weights: %s in %.2f s (%.2f GB/s); peak during load %s (%.4fx)\n",
           snug_fmt_bytes(l->weights_held, b[0]), l->seconds,
           l->seconds > 0 ? (double)l->bytes_read / l->seconds / 1e9 : 0,
           snug_fmt_bytes(l->load_peak_bytes, b[1]),
           (double)l->load_peak_bytes / (double)l->weights_held);
    fprintf(f, "kernels: %s; %d thread%s\n", snug_kernels_describe(&r->kernels, r->weight_dtype, a, sizeof a), r->threads,
            r->threads == 1 ? "" : "s");
    fprintf(f, "budget: %s\n", snug_budget_describe(&r->budget, a, sizeof a));
    fprintf(f, "memory plan: %s\n", snug_plan_report_line(r, a, sizeof a));
    char vs[64] = "";
    if (r->kv_dtype != SNUG_DTYPE_BF16)
        snprintf(vs, sizeof vs, ": %.2fx the tokens of bf16 a byte", snug_kv_tokens_vs_bf16(r->kv_dtype));
    fprintf(f, "kv cache: %lld blocks of %d tokens (%lld tokens, dtype %s%s), limited by %s; max "
           "concurrency at %lld tokens: %.2fx; prefix caching %s (block pool %s)\n",
           (long long)r->kv.blocks, r->sizes.block_size, (long long)r->kv.tokens,
           snug_kv_dtype_name(r->kv_dtype), vs, snug_kv_limit_name(r->kv.limited_by),
           (long long)r->sizes.max_model_len, r->kv.max_concurrency,
           r->prefix_caching ? "on" : "off", snug_fmt_bytes(r->kv.pool_held, b[0]));
    if (r->draft_weights > 0)
        fprintf(f, "draft model: %d layers, weights %s (in the weights above); its keys and values beside each block "
                "of the cache, %s a block beside the model's %s (in the kv cache above)\n", r->draft_layers,
                snug_fmt_bytes(r->draft_weights, b[0]), snug_fmt_bytes(r->sizes.draft_block_bytes, b[1]),
                snug_fmt_bytes(r->sizes.block_bytes, a));
    if (r->vision_tensors > 0)
        fprintf(f, "text model only: the checkpoint's vision tower, %lld tensors (%s), is not loaded; requests "
                "with images are refused\n", (long long)r->vision_tensors, snug_fmt_bytes(r->vision_bytes, b[0]));
    bool all_windowed = r->window_layers > 0 && r->sizes.block_bytes == 0;
    if (r->window_layers > 0)
        fprintf(f, "windowed layers: %s%d keep%s only their window of %d tokens, in %lld blocks of their own (%s "
                "with their pool): the windows of %d sequences at once (%s) and a step's tokens; a cache of every "
                "layer would hold %lld tokens (%.2fx fewer)\n", all_windowed ? "all " : "", r->window_layers,
                r->window_layers == 1 ? "s" : "", r->window, (long long)r->window_blocks,
                snug_fmt_bytes(r->window_held, b[0]), r->window_seqs,
                all_windowed ? "each to max_model_len: the kv cache above holds their positions, no keys or values"
                             : "as many max_model_len sequences as the cache holds",
                (long long)r->kv.one_group_tokens,
                r->kv.one_group_tokens > 0 ? (double)r->kv.tokens / (double)r->kv.one_group_tokens : 0.0);
    if (r->max_model_len_reduced_from)
        fprintf(f, "max_model_len: %lld, the longest that fits (the model's %lld does not fit the "
               "budget; --max-model-len chooses)\n", (long long)r->sizes.max_model_len,
               (long long)r->max_model_len_reduced_from);
    char populated[96];
    if (r->populated_after_ready)
        snprintf(populated, sizeof populated, "made resident as serving begins");
    else
        snprintf(populated, sizeof populated, "populated in %.3f s (%.2f GB/s)", r->populate_seconds,
                 r->populate_seconds > 0 ? (double)r->kv_held / r->populate_seconds / 1e9 : 0);
    fprintf(f, "profile step: %d tokens over %d sequences through %d of %d layers in %.3f s (%.1f "
           "GFLOP of matrix products, %.1f GFLOP/s); kv cache %s%s\n", r->profile.n_tokens,
           r->profile.n_seqs, r->profile.n_layers, r->profile.model_layers, r->profile.seconds,
           r->profile.flops / 1e9, r->profile.seconds > 0 ? r->profile.flops / r->profile.seconds / 1e9 : 0.0,
           populated,
           r->profile.hwm_was_reset ? "" : "; the high-water mark could not be reset");
    if (r->kv.limited_by == SNUG_KV_LIMIT_BUDGET)
        fprintf(f, "left over: %s, less than one more block would take (%s, with its share of "
               "the block pool and the page rounding)\n",
               snug_fmt_bytes(r->kv.left_bytes - r->kv.kv_held - r->kv.pool_held, b[0]),
               snug_fmt_bytes(next_block_cost(r), b[1]));
    else if (r->kv.limited_by == SNUG_KV_LIMIT_DEFAULT_CAP)
        fprintf(f, "left over: %s: nothing limits this process's memory (no --memory, "
               "--memory-fraction or cgroup limit), so the KV cache takes at most %s of it, "
               "leaving the rest of the host to others (--kv-cache-memory or --memory choose)\n",
               snug_fmt_bytes(r->kv.left_bytes - r->kv.kv_held - r->kv.pool_held, b[0]),
               snug_fmt_bytes(r->sizes.kv_cache_cap, b[1]));
    else
        fprintf(f, "left over: %s (the KV cache is limited by %s)\n",
               snug_fmt_bytes(r->kv.left_bytes - r->kv.kv_held - r->kv.pool_held, b[0]),
               snug_kv_limit_name(r->kv.limited_by));
    for (int32_t k = 0; r->tp > 1 && k < r->tp; k++) {
        const snug_rank_plan *q = &r->ranks[k];
        char c[7][32];
        fprintf(f, "rank %d of %d: weights %s bytes (predicted %s%s), load peak %.4fx, read %s; "
               "activations %s, serving state %s, untracked %s, kv cache %s (room for %lld "
               "blocks)\n", k, r->tp, snug_fmt_int((int64_t)q->weights, c[0]),
               snug_fmt_int((int64_t)q->weights_predicted, c[1]),
               q->weights == q->weights_predicted ? "" : ": DIFFERENT",
               q->weights ? (double)q->load_peak / (double)q->weights : 0.0, /* as the bench's */
               snug_fmt_bytes(q->bytes_read, c[2]), snug_fmt_bytes(q->activations, c[3]),
               snug_fmt_bytes(q->serving_state, c[4]), snug_fmt_bytes(q->untracked, c[5]),
               snug_fmt_bytes(q->kv_held, c[6]), (long long)q->kv_blocks_own);
    }
}

json_t *snug_plan_kernels_json(const snug_plan_report *r)
{
    json_t *calib = json_object();
    for (int i = 0; i < SNUG_INSN_COUNT; i++)
        if (r->kernels.calib_gflops[i] > 0)
            json_object_set_new(calib, snug_insn_name((snug_insn)i), json_real(r->kernels.calib_gflops[i]));
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:o}", "isa", snug_isa_name(r->kernels.isa),
                     "threads", r->threads, "weight_dtype", snug_dtype_name(r->weight_dtype), "matmul",
                     snug_insn_name(snug_matmul_insn(&r->kernels, r->weight_dtype, 512)), "matvec",
                     snug_insn_name(snug_matmul_insn(&r->kernels, r->weight_dtype, 1)), "bf16_matmul",
                     snug_insn_name(r->kernels.bf16_insn), "calibration_gflops", calib);
}

char *snug_plan_report_json(const snug_plan_report *r)
{
    snug_json_init();
    json_t *j = json_object();
#define PUT(k, v) json_object_set_new(j, k, v)
    PUT("budget_bytes", json_integer((json_int_t)r->sizes.budget));
    PUT("budget_source", json_string(snug_budget_source_name(r->budget.source)));
    PUT("budget_file", json_string(r->budget.file));
    PUT("budget_fraction", json_real(r->budget.fraction));
    PUT("weight_bytes", json_integer((json_int_t)r->weights));
    PUT("load_peak_bytes", json_integer((json_int_t)r->load.load_peak_bytes));
    PUT("load_seconds", json_real(r->load.seconds));
    PUT("activation_bytes", json_integer((json_int_t)r->activations));
    PUT("serving_state_bytes", json_integer((json_int_t)r->serving_state));
    PUT("serving_block_bytes", json_integer((json_int_t)r->serving_block));
    PUT("untracked_bytes", json_integer((json_int_t)r->sizes.untracked));
    PUT("reserve_bytes", json_integer((json_int_t)r->sizes.reserve));
    PUT("kv_cache_bytes", json_integer((json_int_t)r->kv.kv_held));
    PUT("kv_cache_payload_bytes", json_integer((json_int_t)r->kv.kv_bytes));
    PUT("kv_left_bytes", json_integer((json_int_t)r->kv.left_bytes));
    PUT("block_pool_bytes", json_integer((json_int_t)r->kv.pool_held));
    PUT("kv_left_over_bytes",
        json_integer((json_int_t)(r->kv.left_bytes - r->kv.kv_held - r->kv.pool_held)));
    PUT("next_block_cost_bytes", json_integer((json_int_t)next_block_cost(r)));
    PUT("prefix_caching", json_boolean(r->prefix_caching));
    PUT("kv_blocks", json_integer((json_int_t)r->kv.blocks));
    PUT("block_bytes", json_integer((json_int_t)r->sizes.block_bytes));
    PUT("block_size", json_integer(r->sizes.block_size));
    PUT("draft_weight_bytes", json_integer((json_int_t)r->draft_weights));
    PUT("draft_block_bytes", json_integer((json_int_t)r->sizes.draft_block_bytes));
    PUT("kv_cache_dtype", json_string(snug_kv_dtype_name(r->kv_dtype)));
    PUT("kv_tokens_vs_bf16", json_real(snug_kv_tokens_vs_bf16(r->kv_dtype)));
    PUT("kv_tokens", json_integer((json_int_t)r->kv.tokens));
    PUT("vision_tensors_not_loaded", json_integer((json_int_t)r->vision_tensors));
    PUT("window", json_integer(r->window));
    PUT("window_layers", json_integer(r->window_layers));
    PUT("window_blocks", json_integer((json_int_t)r->window_blocks));
    PUT("window_seqs", json_integer(r->window_seqs));
    PUT("window_cache_bytes", json_integer((json_int_t)r->window_held));
    PUT("one_group_kv_tokens", json_integer((json_int_t)r->kv.one_group_tokens));
    PUT("max_model_len", json_integer((json_int_t)r->sizes.max_model_len));
    PUT("max_num_seqs", json_integer(r->sizes.max_num_seqs));
    PUT("max_model_len_reduced_from", json_integer((json_int_t)r->max_model_len_reduced_from));
    PUT("max_num_batched_tokens", json_integer(r->profile.n_tokens));
    PUT("max_concurrency", json_real(r->kv.max_concurrency));
    PUT("kv_limited_by", json_string(snug_kv_limit_name(r->kv.limited_by)));
    PUT("profile_seqs", json_integer(r->profile.n_seqs));
    PUT("profile_layers", json_integer(r->profile.n_layers));
    PUT("profile_seconds", json_real(r->profile.seconds));
    PUT("profile_flops", json_real(r->profile.flops));
    PUT("profile_allocator_peak_bytes", json_integer((json_int_t)r->profile.allocator_peak));
    PUT("profile_hwm_bytes", json_integer((json_int_t)r->profile.hwm));
    PUT("hwm_was_reset", json_boolean(r->profile.hwm_was_reset));
    PUT("populate_seconds", json_real(r->populate_seconds));
    PUT("populated_after_ready", json_boolean(r->populated_after_ready));
    PUT("code_bytes", json_integer((json_int_t)r->code_bytes));
    PUT("baseline_rss_bytes", json_integer((json_int_t)r->baseline_rss));
    PUT("capacity_bytes", json_integer((json_int_t)r->capacity));
    PUT("tp", json_integer(r->tp));
    PUT("rank", json_integer(r->rank));
    PUT("weights_predicted_bytes", json_integer((json_int_t)r->load.weight_bytes));
    PUT("kv_blocks_own", json_integer((json_int_t)r->kv_blocks_own));
    PUT("kernels", snug_plan_kernels_json(r));
    json_t *ranks = json_array();
    for (int32_t k = 0; k < r->tp && k < SNUG_TP_MAX; k++) {
        const snug_rank_plan *q = &r->ranks[k];
        json_array_append_new(ranks, json_pack(
            "{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "rank", k,
            "weight_bytes", (json_int_t)q->weights, "weights_predicted_bytes",
            (json_int_t)q->weights_predicted, "load_peak_bytes", (json_int_t)q->load_peak,
            "bytes_read", (json_int_t)q->bytes_read, "activation_bytes", (json_int_t)q->activations,
            "serving_state_bytes", (json_int_t)q->serving_state, "untracked_bytes",
            (json_int_t)q->untracked, "kv_cache_bytes", (json_int_t)q->kv_held, "kv_blocks_own",
            (json_int_t)q->kv_blocks_own, "profile_hwm_bytes", (json_int_t)q->profile_hwm));
    }
    PUT("ranks", ranks);
#undef PUT
    char *text = snug_json_dumps(j, false);
    json_decref(j);
    return text;
}
