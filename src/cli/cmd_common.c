/*
 * cmd_common.c: helpers shared by the command-line commands.
 */
#include "cli.h"

#include "base/dtype.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_fail(const snug_error *err)
{
    fprintf(stderr, "snug: %s\n", err->msg[0] ? err->msg : snug_status_str(err->status));
    return 1;
}

int cli_usage(const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "snug: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nusage: %s\n", usage);
    va_end(ap);
    return 2;
}

bool cli_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
    *out = v;
    return true;
}

const char *cli_option(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0' || *i + 1 >= argc) return NULL;
    (*i)++;
    return argv[*i];
}

int cli_plan_option(int argc, char **argv, int *at, snug_planner_opts *o, const char *usage)
{
    const char *v;
    int64_t x;
    double f;
    char *end;
    int i = *at;
    int rc = 1;
    if ((v = cli_option(argc, argv, &i, "--memory"))) {
        if (!snug_parse_bytes(v, &o->budget.memory_bytes))
            return cli_usage(usage, "--memory expects a byte count (6GiB, 1500MB), got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--memory-fraction"))) {
        f = strtod(v, &end);
        if (end == v || *end || !(f > 0 && f <= 1))
            return cli_usage(usage, "--memory-fraction expects a number in (0, 1], got '%s'", v);
        o->budget.fraction = f;
    } else if ((v = cli_option(argc, argv, &i, "--kv-cache-memory"))) {
        if (!snug_parse_bytes(v, &o->kv_cache_memory))
            return cli_usage(usage, "--kv-cache-memory expects a byte count, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--reserve"))) {
        if (strcmp(v, "0") != 0 && !snug_parse_bytes(v, &o->reserve))
            return cli_usage(usage, "--reserve expects a byte count, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--staging-bytes"))) {
        if (!snug_parse_bytes(v, &o->staging_bytes))
            return cli_usage(usage, "--staging-bytes expects a byte count, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--dtype"))) {
        o->weight_dtype = snug_dtype_from_torch(v);
        if (o->weight_dtype != SNUG_DTYPE_BF16 && o->weight_dtype != SNUG_DTYPE_F16 &&
            o->weight_dtype != SNUG_DTYPE_F32)
            return cli_usage(usage, "--dtype expects bf16, f16 or f32, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--max-model-len"))) {
        if (!cli_parse_int(v, 1, INT32_MAX, &o->max_model_len))
            return cli_usage(usage, "--max-model-len expects a positive integer, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--max-num-seqs"))) {
        if (!cli_parse_int(v, 1, 1 << 20, &x))
            return cli_usage(usage, "--max-num-seqs expects 1 to 1048576, got '%s'", v);
        o->max_num_seqs = (int32_t)x;
    } else if ((v = cli_option(argc, argv, &i, "--max-num-batched-tokens"))) {
        if (!cli_parse_int(v, 1, 1 << 24, &x))
            return cli_usage(usage, "--max-num-batched-tokens expects 1 to 16777216, got '%s'", v);
        o->max_num_batched_tokens = (int32_t)x;
    } else if ((v = cli_option(argc, argv, &i, "--block-size"))) {
        if (!cli_parse_int(v, 1, 1024, &x))
            return cli_usage(usage, "--block-size expects 1 to 1024, got '%s'", v);
        o->block_size = (int32_t)x;
    } else if ((v = cli_option(argc, argv, &i, "--kv-cache-dtype"))) {
        o->kv_dtype = strcmp(v, "auto") == 0 ? SNUG_DTYPE_BF16 : snug_dtype_from_torch(v);
        if (o->kv_dtype != SNUG_DTYPE_BF16 && o->kv_dtype != SNUG_DTYPE_F16 &&
            o->kv_dtype != SNUG_DTYPE_F32)
            return cli_usage(usage, "--kv-cache-dtype expects auto (bf16), bf16, f16 or f32, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--threads"))) {
        if (!cli_parse_int(v, 1, 1024, &x))
            return cli_usage(usage, "--threads expects 1 to 1024, got '%s'", v);
        o->n_threads = (int32_t)x;
    } else if ((v = cli_option(argc, argv, &i, "--isa"))) {
        snug_isa isa;
        if (!snug_isa_from_name(v, &isa))
            return cli_usage(usage, "--isa expects scalar, avx2, avx512 or avx512bf16, got '%s'", v);
        o->isa = (int)isa;
    } else {
        rc = 0;
    }
    *at = i;
    return rc;
}
