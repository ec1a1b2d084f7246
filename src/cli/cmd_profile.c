/*
 * cmd_profile.c: `snug profile [MODEL] [options] [--json]`: runs the memory
 * plan (engine/planner.h) and prints it: the load, the budget and what each
 * part of it holds, and the KV cache it leaves.
 */
#include "cli.h"

#include "base/device.h"
#include "base/dtype.h"
#include "base/json.h"
#include "engine/planner.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

static const char g_usage[] =
    "snug profile [MODEL] [--memory BYTES | --memory-fraction F] [--kv-cache-memory BYTES]\n"
    "              [--reserve BYTES] [--max-model-len N] [--max-num-seqs N]\n"
    "              [--max-num-batched-tokens N] [--block-size N] [--kv-cache-dtype auto|bf16|f16|f32]\n"
    "              [--dtype bf16|f16|f32] [--staging-bytes BYTES] [--threads T]\n"
    "              [--isa scalar|avx2|avx512|avx512bf16] [--json]\n"
    "  MODEL defaults to the bundled models/stories260K; BYTES may carry a unit (6GiB, 1500MB,\n"
    "  512MiB); the budget defaults to 0.9 of the memory cgroup's limit or of MemAvailable";

static void print_text(const snug_plan_report *r)
{
    const snug_load_stats *l = &r->load;
    char a[160], b[8][32];
    printf("loaded weights: %s in %.2f s (%.2f GB/s); peak during load %s (%.4fx weights)\n",
           snug_fmt_bytes(l->weights_held, b[0]), l->seconds,
           l->seconds > 0 ? (double)l->bytes_read / l->seconds / 1e9 : 0,
           snug_fmt_bytes(l->load_peak_bytes, b[1]),
           (double)l->load_peak_bytes / (double)l->weights_held);
    printf("budget: %s\n", snug_budget_describe(&r->budget, a, sizeof a));
    printf("memory plan: budget %s = weights %s + activations %s + serving state %s\n"
           "  + untracked %s + reserve %s + kv cache %s (%s left over)\n",
           snug_fmt_bytes(r->sizes.budget, b[0]), snug_fmt_bytes(r->weights, b[1]),
           snug_fmt_bytes(r->activations, b[2]), snug_fmt_bytes(r->serving_state, b[3]),
           snug_fmt_bytes(r->sizes.untracked, b[4]), snug_fmt_bytes(r->sizes.reserve, b[5]),
           snug_fmt_bytes(r->kv.kv_held, b[6]), snug_fmt_bytes(r->kv.left_bytes - r->kv.kv_held, b[7]));
    printf("kv cache: %lld blocks of %d tokens (%lld tokens, %s), limited by %s; max concurrency at "
           "%lld tokens: %.2fx\n",
           (long long)r->kv.blocks, r->sizes.block_size, (long long)r->kv.tokens,
           snug_dtype_torch_name(r->kv_dtype), snug_kv_limit_name(r->kv.limited_by),
           (long long)r->sizes.max_model_len, r->kv.max_concurrency);
    if (r->max_model_len_reduced_from)
        printf("max_model_len: %lld, the longest that fits (the model's %lld does not fit the "
               "budget; --max-model-len chooses)\n", (long long)r->sizes.max_model_len,
               (long long)r->max_model_len_reduced_from);
    printf("profile step: %d tokens over %d sequences in %.3f s; kv cache populated in %.3f s "
           "(%.2f GB/s)%s\n",
           r->profile.n_tokens, r->profile.n_seqs, r->profile.seconds, r->populate_seconds,
           r->populate_seconds > 0 ? (double)r->kv_held / r->populate_seconds / 1e9 : 0,
           r->profile.hwm_was_reset ? "" : "; the high-water mark could not be reset");
}

static int print_json(const snug_plan_report *r)
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
    PUT("kv_blocks", json_integer((json_int_t)r->kv.blocks));
    PUT("block_bytes", json_integer((json_int_t)r->sizes.block_bytes));
    PUT("block_size", json_integer(r->sizes.block_size));
    PUT("kv_cache_dtype", json_string(snug_dtype_torch_name(r->kv_dtype)));
    PUT("kv_tokens", json_integer((json_int_t)r->kv.tokens));
    PUT("max_model_len", json_integer((json_int_t)r->sizes.max_model_len));
    PUT("max_num_seqs", json_integer(r->sizes.max_num_seqs));
    PUT("max_model_len_reduced_from", json_integer((json_int_t)r->max_model_len_reduced_from));
    PUT("max_num_batched_tokens", json_integer(r->profile.n_tokens));
    PUT("max_concurrency", json_real(r->kv.max_concurrency));
    PUT("kv_limited_by", json_string(snug_kv_limit_name(r->kv.limited_by)));
    PUT("profile_seqs", json_integer(r->profile.n_seqs));
    PUT("profile_seconds", json_real(r->profile.seconds));
    PUT("profile_allocator_peak_bytes", json_integer((json_int_t)r->profile.allocator_peak));
    PUT("profile_hwm_bytes", json_integer((json_int_t)r->profile.hwm));
    PUT("hwm_was_reset", json_boolean(r->profile.hwm_was_reset));
    PUT("populate_seconds", json_real(r->populate_seconds));
    PUT("capacity_bytes", json_integer((json_int_t)r->capacity));
#undef PUT
    char *text = snug_json_dumps(j, false);
    json_decref(j);
    if (!text) {
        fprintf(stderr, "snug: out of memory writing the report\n");
        return 1;
    }
    puts(text);
    snug_mem_free(text);
    return 0;
}

int snug_cmd_profile(int argc, char **argv)
{
    const char *dir = NULL;
    snug_planner_opts o = {.isa = -1};
    bool as_json = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int64_t x;
        double f;
        char *end;
        if ((v = cli_option(argc, argv, &i, "--memory"))) {
            if (!snug_parse_bytes(v, &o.budget.memory_bytes))
                return cli_usage(g_usage, "--memory expects a byte count (6GiB, 1500MB), got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--memory-fraction"))) {
            f = strtod(v, &end);
            if (end == v || *end || !(f > 0 && f <= 1))
                return cli_usage(g_usage, "--memory-fraction expects a number in (0, 1], got '%s'", v);
            o.budget.fraction = f;
        } else if ((v = cli_option(argc, argv, &i, "--kv-cache-memory"))) {
            if (!snug_parse_bytes(v, &o.kv_cache_memory))
                return cli_usage(g_usage, "--kv-cache-memory expects a byte count, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--reserve"))) {
            if (strcmp(v, "0") != 0 && !snug_parse_bytes(v, &o.reserve))
                return cli_usage(g_usage, "--reserve expects a byte count, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--staging-bytes"))) {
            if (!snug_parse_bytes(v, &o.staging_bytes))
                return cli_usage(g_usage, "--staging-bytes expects a byte count, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--dtype"))) {
            o.weight_dtype = snug_dtype_from_torch(v);
            if (o.weight_dtype != SNUG_DTYPE_BF16 && o.weight_dtype != SNUG_DTYPE_F16 &&
                o.weight_dtype != SNUG_DTYPE_F32)
                return cli_usage(g_usage, "--dtype expects bf16, f16 or f32, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--max-model-len"))) {
            if (!cli_parse_int(v, 1, INT32_MAX, &o.max_model_len))
                return cli_usage(g_usage, "--max-model-len expects a positive integer, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--max-num-seqs"))) {
            if (!cli_parse_int(v, 1, 1 << 20, &x))
                return cli_usage(g_usage, "--max-num-seqs expects 1 to 1048576, got '%s'", v);
            o.max_num_seqs = (int32_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--max-num-batched-tokens"))) {
            if (!cli_parse_int(v, 1, 1 << 24, &x))
                return cli_usage(g_usage, "--max-num-batched-tokens expects 1 to 16777216, got '%s'", v);
            o.max_num_batched_tokens = (int32_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--block-size"))) {
            if (!cli_parse_int(v, 1, 1024, &x))
                return cli_usage(g_usage, "--block-size expects 1 to 1024, got '%s'", v);
            o.block_size = (int32_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--kv-cache-dtype"))) {
            o.kv_dtype = strcmp(v, "auto") == 0 ? SNUG_DTYPE_BF16 : snug_dtype_from_torch(v);
            if (o.kv_dtype != SNUG_DTYPE_BF16 && o.kv_dtype != SNUG_DTYPE_F16 &&
                o.kv_dtype != SNUG_DTYPE_F32)
                return cli_usage(g_usage, "--kv-cache-dtype expects auto (bf16), bf16, f16 or f32, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--threads"))) {
            if (!cli_parse_int(v, 1, 1024, &x))
                return cli_usage(g_usage, "--threads expects 1 to 1024, got '%s'", v);
            o.n_threads = (int32_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--isa"))) {
            snug_isa isa;
            if (!snug_isa_from_name(v, &isa))
                return cli_usage(g_usage, "--isa expects scalar, avx2, avx512 or avx512bf16, got '%s'", v);
            o.isa = (int)isa;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n", g_usage);
            return 0;
        } else if (argv[i][0] == '-') {
            return cli_usage(g_usage, "unknown option '%s'", argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            return cli_usage(g_usage, "one model directory, got '%s' too", argv[i]);
        }
    }
    if (o.budget.memory_bytes && o.budget.fraction)
        return cli_usage(g_usage, "--memory and --memory-fraction: give one");
    snug_error err = {0};
    snug_planned *p = NULL;
    if (snug_planner_open(dir ? dir : "models/stories260K", &o, &p, &err) != SNUG_OK)
        return cli_fail(&err);
    int rc = 0;
    if (as_json)
        rc = print_json(&p->report);
    else
        print_text(&p->report);
    snug_planner_close(p);
    return rc;
}
