/*
 * cmd_mkmodel.c: `snug mkmodel --preset NAME --dtype D [--shards K] [--seed S]
 * [--threads T] OUTDIR`: write a synthetic checkpoint.
 */
#include "cli.h"
#include "base/dtype.h"
#include "convert/mkmodel.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char g_usage[] =
    "snug mkmodel --preset NAME --dtype bf16|f16|f32 [--shards K] [--seed S] [--threads T]\n"
    "              [--layers N] [--hidden N] [--intermediate N] [--heads N] [--kv-heads N] OUTDIR\n"
    "  the shape options change the preset's (head_dim follows: hidden / heads)";

int snug_cmd_mkmodel(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    const char *preset = NULL, *outdir = NULL;
    snug_mkmodel_opts o = {.dtype = SNUG_DTYPE_NONE, .n_shards = 1, .seed = 0};
    static const char *const shape_names[] = {"--layers", "--hidden", "--intermediate", "--heads",
                                              "--kv-heads"};
    int64_t shape[5] = {0}; /* 0: the preset's */
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int64_t x;
        size_t k = 0;
        while (k < SNUG_ARRAY_LEN(shape_names) && !(v = cli_option(argc, argv, &i, shape_names[k]))) k++;
        if (v) {
            if (!cli_parse_int(v, 1, 1 << 20, &shape[k]))
                return cli_usage(g_usage, "%s expects 1 to 1048576, got '%s'", shape_names[k], v);
        } else if ((v = cli_option(argc, argv, &i, "--preset"))) {
            preset = v;
        } else if ((v = cli_option(argc, argv, &i, "--dtype"))) {
            o.dtype = snug_dtype_from_torch(v);
            if (o.dtype == SNUG_DTYPE_NONE)
                return cli_usage(g_usage, "--dtype expects bf16, f16 or f32, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--shards"))) {
            if (!cli_parse_int(v, 1, 1024, &x))
                return cli_usage(g_usage, "--shards expects 1 to 1024, got '%s'", v);
            o.n_shards = (int32_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--seed"))) {
            if (!cli_parse_int(v, 0, INT64_MAX, &x))
                return cli_usage(g_usage, "--seed expects a non-negative integer, got '%s'", v);
            o.seed = (uint64_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--threads"))) {
            if (!cli_parse_int(v, 1, 1024, &x))
                return cli_usage(g_usage, "--threads expects 1 to 1024, got '%s'", v);
            o.n_threads = (int32_t)x;
        } else if (argv[i][0] == '-') {
            return cli_unknown_option(g_usage, NULL, argv[i]);
        } else if (!outdir) {
            outdir = argv[i];
        } else {
            return cli_usage(g_usage, "more than one output directory given");
        }
    }
    if (!preset) return cli_usage(g_usage, "no --preset given");
    if (o.dtype == SNUG_DTYPE_NONE) return cli_usage(g_usage, "no --dtype given");
    if (!outdir) return cli_usage(g_usage, "no output directory given");

    snug_error err = {0};
    snug_model_config cfg;
    if (snug_preset_config(preset, &cfg, &err) != SNUG_OK) return cli_fail(&err);
    if (shape[0]) cfg.n_layers = (int32_t)shape[0];
    if (shape[1]) cfg.hidden_size = (int32_t)shape[1];
    if (shape[2]) cfg.intermediate_size = (int32_t)shape[2];
    if (shape[3]) cfg.n_heads = (int32_t)shape[3];
    if (shape[4]) cfg.n_kv_heads = (int32_t)shape[4];
    if (shape[1] || shape[3]) cfg.head_dim = cfg.n_heads > 0 ? cfg.hidden_size / cfg.n_heads : 0;
    if ((shape[1] || shape[3]) && cfg.head_dim * cfg.n_heads != cfg.hidden_size) {
        snug_errorf(&err, SNUG_INVALID, "--hidden %d is not a multiple of --heads %d",
                    cfg.hidden_size, cfg.n_heads);
        return cli_fail(&err);
    }
    if (snug_config_validate(&cfg, "mkmodel", &err) != SNUG_OK) return cli_fail(&err);
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST) {
        snug_errorf(&err, SNUG_IO, "%s: cannot create: %s", outdir, strerror(errno));
        return cli_fail(&err);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t bytes = 0;
    if (snug_mkmodel(&cfg, &o, outdir, &bytes, &err) != SNUG_OK) return cli_fail(&err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    char a[32], b[32];
    fprintf(stderr, "wrote %s bytes (%s) of %s weights to %s in %d file%s, %.2f s (%.2f GB/s)\n",
            snug_fmt_int((int64_t)bytes, a), snug_fmt_bytes(bytes, b), preset, outdir,
            o.n_shards, o.n_shards == 1 ? "" : "s", secs, secs > 0 ? (double)bytes / secs / 1e9 : 0);
    return 0;
}
