/*
 * cmd_mkmodel.c: `snug mkmodel --preset NAME --dtype D [--shards K] [--seed S]
 * [--threads T] [--tokenizer DIR | --no-tokenizer] OUTDIR`: write a synthetic
 * checkpoint, with the tokenizer files and chat template of the preset's
 * family beside it so that `snug generate` and `snug serve` run it as it is.
 */
#include "cli.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "convert/mkmodel.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char g_usage[] =
    "snug mkmodel --preset NAME --dtype bf16|f16|f32 [--shards K] [--seed S] [--threads T]\n"
    "              [--layers N] [--hidden N] [--intermediate N] [--heads N] [--kv-heads N] [--vocab N]\n"
    "              [--tokenizer DIR | --no-tokenizer] OUTDIR\n"
    "  the shape options change the preset's (head_dim follows: hidden / heads); the tokenizer\n"
    "  files of DIR (default: the preset family's, from the repository) are copied into OUTDIR";

/* Each preset's tokenizer directory, relative to the repository's root (the
 * sources of each are in that directory's README). */
static const struct {
    const char *preset, *dir;
} g_tokenizers[] = {
    {"tiny", "models/stories260K"},
    {"llama-3.2-1b", "tests/data/tokenizers/llama3-tiktoken"},
    {"llama-3-8b", "tests/data/tokenizers/llama3-tiktoken"},
    {"tinyllama-1.1b", "tests/data/tokenizers/tinyllama-1.1b-chat"},
    {"qwen2-0.5b", "tests/data/tokenizers/qwen2-native"},
    {"qwen3-1.7b", "tests/data/tokenizers/qwen3-native"},
    {"phi-3-mini", "tests/data/tokenizers/phi-3-mini"},
    {"mistral-7b", "tests/data/tokenizers/mistral-v0.3"},
};

/* The files of a tokenizer directory that are copied (those present); not
 * generation_config.json, which mkmodel writes from the preset. */
static const char *const g_tokenizer_files[] = {
    "tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt",
    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
};

enum { TOKENIZER_FILE_MAX = 64 << 20 };

/* Copies file name from dir src into dir dst, if src has it. */
static snug_status copy_if_present(const char *src, const char *dst, const char *name, snug_error *err)
{
    char from[4096], to[4096];
    snug_status st = snug_path_join(from, sizeof from, src, name, err);
    if (st == SNUG_OK) st = snug_path_join(to, sizeof to, dst, name, err);
    if (st != SNUG_OK || !snug_file_exists(from)) return st;
    char *buf = NULL;
    size_t len = 0;
    int fd = -1;
    st = snug_file_read_all(from, TOKENIZER_FILE_MAX, &buf, &len, err);
    if (st == SNUG_OK) st = snug_file_create(to, &fd, err);
    if (st == SNUG_OK) st = snug_pwrite_full(fd, buf, len, 0, to, err);
    if (fd >= 0) {
        snug_status cst = snug_file_close(fd, to, err);
        if (st == SNUG_OK) st = cst;
    }
    snug_mem_free(buf);
    return st;
}

/* Checks that the tokenizer of dir fits a model of n_vocab embeddings
 * (every id below it). */
static snug_status check_tokenizer(const char *dir, int32_t n_vocab, snug_error *err)
{
    snug_tokenizer *tok = NULL;
    snug_status st = snug_tokenizer_load(dir, &tok, err);
    if (st != SNUG_OK) return st;
    int32_t n = snug_tokenizer_n_vocab(tok);
    snug_tokenizer_free(tok);
    if (n > n_vocab)
        return snug_errorf(err, SNUG_INVALID, "%s: the tokenizer has %d tokens, more than the "
                           "model's vocab_size %d", dir, n, n_vocab);
    return SNUG_OK;
}

int snug_cmd_mkmodel(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    const char *preset = NULL, *outdir = NULL, *tok_dir = NULL;
    bool no_tokenizer = false;
    snug_mkmodel_opts o = {.dtype = SNUG_DTYPE_NONE, .n_shards = 1, .seed = 0};
    static const char *const shape_names[] = {"--layers", "--hidden", "--intermediate", "--heads",
                                              "--kv-heads", "--vocab"};
    int64_t shape[6] = {0}; /* 0: the preset's */
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int64_t x;
        int rc;
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
        } else if ((rc = cli_int_option(argc, argv, &i, "--shards", 1, 1024, &x, g_usage))) {
            if (rc > 1) return rc;
            o.n_shards = (int32_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--seed"))) {
            if (!cli_parse_int(v, 0, INT64_MAX, &x))
                return cli_usage(g_usage, "--seed expects a non-negative integer, got '%s'", v);
            o.seed = (uint64_t)x;
        } else if ((rc = cli_threads_option(argc, argv, &i, &o.n_threads, g_usage))) {
            if (rc > 1) return rc;
        } else if ((v = cli_option(argc, argv, &i, "--tokenizer"))) {
            tok_dir = v;
        } else if (strcmp(argv[i], "--no-tokenizer") == 0) {
            no_tokenizer = true;
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
    if (tok_dir && no_tokenizer) return cli_usage(g_usage, "--tokenizer and --no-tokenizer both given");

    snug_error err = {0};
    snug_model_config cfg;
    if (snug_preset_config(preset, &cfg, &err) != SNUG_OK) return cli_fail(&err);
    if (shape[0]) cfg.n_layers = (int32_t)shape[0];
    if (shape[1]) cfg.hidden_size = (int32_t)shape[1];
    if (shape[2]) cfg.intermediate_size = (int32_t)shape[2];
    if (shape[3]) cfg.n_heads = (int32_t)shape[3];
    if (shape[4]) cfg.n_kv_heads = (int32_t)shape[4];
    if (shape[5]) { /* the special ids that no longer fit go */
        cfg.vocab_size = (int32_t)shape[5];
        if (cfg.bos_token_id >= cfg.vocab_size) cfg.bos_token_id = -1;
        int32_t n = 0;
        for (int32_t k = 0; k < cfg.n_eos; k++)
            if (cfg.eos_token_ids[k] < cfg.vocab_size) cfg.eos_token_ids[n++] = cfg.eos_token_ids[k];
        cfg.n_eos = n;
    }
    if (shape[1] || shape[3]) cfg.head_dim = cfg.n_heads > 0 ? cfg.hidden_size / cfg.n_heads : 0;
    if ((shape[1] || shape[3]) && cfg.head_dim * cfg.n_heads != cfg.hidden_size) {
        snug_errorf(&err, SNUG_INVALID, "--hidden %d is not a multiple of --heads %d",
                    cfg.hidden_size, cfg.n_heads);
        return cli_fail(&err);
    }
    if (snug_config_validate(&cfg, "mkmodel", &err) != SNUG_OK) return cli_fail(&err);
    char found[PATH_MAX + 64];
    if (!tok_dir && !no_tokenizer) { /* the preset family's, where the repository has it */
        const char *rel = NULL;
        for (size_t k = 0; k < SNUG_ARRAY_LEN(g_tokenizers); k++)
            if (strcmp(g_tokenizers[k].preset, preset) == 0) rel = g_tokenizers[k].dir;
        tok_dir = rel ? cli_repo_dir(rel, found, sizeof found) : NULL;
        if (!tok_dir && rel)
            fprintf(stderr, "snug: warning: %s not found here or beside the program; %s gets no "
                    "tokenizer (give one with --tokenizer DIR)\n", rel, outdir);
        else if (!tok_dir) /* (Gemma's tokenizer is not in the repository) */
            fprintf(stderr, "snug: warning: the repository holds no tokenizer of preset %s; %s gets none "
                    "(give one with --tokenizer DIR)\n", preset, outdir);
    }
    /* the tokenizer is checked before the weights are written: a mismatch costs nothing */
    if (tok_dir && check_tokenizer(tok_dir, cfg.vocab_size, &err) != SNUG_OK) return cli_fail(&err);
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST) {
        snug_errorf(&err, SNUG_IO, "%s: cannot create: %s", outdir, strerror(errno));
        return cli_fail(&err);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t bytes = 0;
    if (snug_mkmodel(&cfg, &o, outdir, &bytes, &err) != SNUG_OK) return cli_fail(&err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (size_t k = 0; tok_dir && k < SNUG_ARRAY_LEN(g_tokenizer_files); k++)
        if (copy_if_present(tok_dir, outdir, g_tokenizer_files[k], &err) != SNUG_OK) return cli_fail(&err);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    char a[32], b[32];
    fprintf(stderr, "wrote %s bytes (%s) of %s weights to %s in %d file%s, %.2f s (%.2f GB/s)\n",
            snug_fmt_int((int64_t)bytes, a), snug_fmt_bytes(bytes, b), preset, outdir,
            o.n_shards, o.n_shards == 1 ? "" : "s", secs, secs > 0 ? (double)bytes / secs / 1e9 : 0);
    if (tok_dir) fprintf(stderr, "copied the tokenizer of %s\n", tok_dir);
    return 0;
}
