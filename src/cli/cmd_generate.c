/*
 * cmd_generate.c: `snug generate [MODEL] [-p PROMPT] [-n N] [sampling] [--chat] [--ids]`:
 * loads a model, generates from a prompt and streams the text to stdout;
 * speeds go to stderr.
 */
#include "chat/chat.h"
#include "formats/checkpoint.h"
#include "cli.h"

#include "dist/agree.h"
#include "base/device.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "engine/generate.h"
#include "base/json.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char g_usage[] =
    "snug generate [MODEL] [-p PROMPT] [-n N] [--temperature T] [--top-p P] [--top-k K]\n"
    "              [--min-p P] [--repetition-penalty R] [--frequency-penalty F]\n"
    "              [--presence-penalty F] [--seed S] [--stop TEXT]... [--ignore-eos] [--chat]\n"
    "              [--ids] [--max-model-len N] [--kv-cache-dtype auto|bf16|f16|f32] [--threads T]\n"
    "              [--isa scalar|avx2|avx512|avx512bf16] [--tp N [--step-timeout S]]\n"
    "  MODEL defaults to the bundled models/stories260K; -n is the most new tokens (default:\n"
    "  until EOS or the model length); --max-model-len is the positions a sequence may use\n"
    "  (default: the prompt and N, or the prompt and 8192, at most the model's); --chat applies\n"
    "  the model's chat template to PROMPT as a user message; --ids prints every id (BOS,\n"
    "  prompt, generated) instead of the text; --tp N splits the model over N processes\n"
    "  started by mpirun -np N (rank 0 prints)";

static const char BUNDLED[] = "models/stories260K";
enum { DEFAULT_MAX_LEN = 8192 };

typedef struct gen_args {
    const char *model, *prompt;
    int64_t n_new;
    snug_sampling_params sp;
    snug_stop_params stop;
    bool chat, ids;
    snug_generator_opts go;
    cli_tp tp;
} gen_args;

/* Parses a float in [lo, hi]. */
static bool parse_float(const char *s, double lo, double hi, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return false;
    *out = (float)v;
    return true;
}

/* The bundled model: in the working directory, else beside the program
 * (build/snug -> ../models/stories260K). */
static const char *bundled_model(char *buf, size_t size)
{
    if (snug_file_exists(BUNDLED)) return BUNDLED;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return BUNDLED;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    snprintf(buf, size, "%s/../%s", exe, BUNDLED);
    return snug_file_exists(buf) ? buf : BUNDLED;
}

/* Parses the command line into *a; returns -1 when it is fine, else the
 * exit status of a usage error (already printed). */
static int parse_args(int argc, char **argv, gen_args *a)
{
    snug_sampling_params_default(&a->sp);
    snug_stop_params_default(&a->stop);
    a->go.isa = -1;
    snug_error err = {0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        int64_t x;
        int tprc = cli_tp_option(argc, argv, &i, &a->tp, g_usage);
        if (tprc > 1) return tprc;
        if (tprc == 1) continue;
        if ((v = cli_option(argc, argv, &i, "-p")) || (v = cli_option(argc, argv, &i, "--prompt"))) {
            a->prompt = v;
        } else if ((v = cli_option(argc, argv, &i, "-n")) || (v = cli_option(argc, argv, &i, "--max-tokens"))) {
            if (!cli_parse_int(v, 1, INT32_MAX, &a->n_new))
                return cli_usage(g_usage, "-n expects a positive number of tokens, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--temperature"))) {
            if (!parse_float(v, 0, 1e6, &a->sp.temperature))
                return cli_usage(g_usage, "--temperature expects a number >= 0, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--top-p"))) {
            if (!parse_float(v, 1e-9, 1, &a->sp.top_p))
                return cli_usage(g_usage, "--top-p expects a number in (0, 1], got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--top-k"))) {
            if (!cli_parse_int(v, 0, INT32_MAX, &x))
                return cli_usage(g_usage, "--top-k expects an integer >= 0 (0: off), got '%s'", v);
            a->sp.top_k = (int32_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--min-p"))) {
            if (!parse_float(v, 0, 1, &a->sp.min_p))
                return cli_usage(g_usage, "--min-p expects a number in [0, 1], got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--repetition-penalty"))) {
            if (!parse_float(v, 1e-9, 1e6, &a->sp.repetition_penalty))
                return cli_usage(g_usage, "--repetition-penalty expects a number > 0, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--frequency-penalty"))) {
            if (!parse_float(v, -2, 2, &a->sp.frequency_penalty))
                return cli_usage(g_usage, "--frequency-penalty expects a number in [-2, 2], got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--presence-penalty"))) {
            if (!parse_float(v, -2, 2, &a->sp.presence_penalty))
                return cli_usage(g_usage, "--presence-penalty expects a number in [-2, 2], got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--seed"))) {
            if (!cli_parse_int(v, 0, INT64_MAX, &x))
                return cli_usage(g_usage, "--seed expects an integer >= 0, got '%s'", v);
            a->sp.seed = (uint64_t)x;
            a->sp.has_seed = true;
        } else if ((v = cli_option(argc, argv, &i, "--stop"))) {
            if (snug_stop_params_add_string(&a->stop, v, strlen(v), &err) != SNUG_OK)
                return cli_usage(g_usage, "--stop: %s", err.msg);
        } else if ((v = cli_option(argc, argv, &i, "--max-model-len"))) {
            if (!cli_parse_int(v, 2, INT32_MAX / 2, &a->go.max_len))
                return cli_usage(g_usage, "--max-model-len expects an integer >= 2, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--kv-cache-dtype"))) {
            a->go.kv_dtype = strcmp(v, "auto") == 0 ? SNUG_DTYPE_BF16 : snug_dtype_from_torch(v);
            if (a->go.kv_dtype == SNUG_DTYPE_NONE)
                return cli_usage(g_usage, "--kv-cache-dtype expects auto (bf16), bf16, f16 or f32, got '%s'", v);
        } else if ((v = cli_option(argc, argv, &i, "--threads"))) {
            if (!cli_parse_int(v, 1, 1024, &x)) return cli_usage(g_usage, "--threads expects 1 to 1024, got '%s'", v);
            a->go.n_threads = (int32_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--isa"))) {
            snug_isa isa;
            if (!snug_isa_from_name(v, &isa))
                return cli_usage(g_usage, "--isa expects scalar, avx2, avx512 or avx512bf16, got '%s'", v);
            a->go.isa = (int)isa;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n", g_usage);
            return 0;
        } else if (strcmp(argv[i], "--ignore-eos") == 0) {
            a->stop.ignore_eos = true;
        } else if (strcmp(argv[i], "--chat") == 0) {
            a->chat = true;
        } else if (strcmp(argv[i], "--ids") == 0) {
            a->ids = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage(g_usage, "unknown option '%s'", argv[i]);
        } else if (!a->model) {
            a->model = argv[i];
        } else {
            return cli_usage(g_usage, "more than one model given ('%s' and '%s')", a->model, argv[i]);
        }
    }
    if (!a->prompt) a->prompt = "";
    return -1;
}

/* The prompt's ids: the text as is (with the BOS the tokenizer's config
 * asks for), or rendered by the chat template (which writes its own BOS;
 * special-token text in it becomes special tokens). */
static snug_status prompt_ids(const gen_args *a, const snug_tokenizer *tok, snug_tok_encoder *enc,
                              const int32_t **ids, size_t *n_ids, snug_error *err)
{
    char *text = NULL;
    size_t len = strlen(a->prompt);
    json_t *messages = NULL;
    snug_status st = SNUG_OK;
    if (a->chat) {
        snug_json_init();
        messages = json_pack("[{s:s, s:s}]", "role", "user", "content", a->prompt);
        if (!messages) return snug_errorf(err, SNUG_INVALID, "-p: the prompt is not valid UTF-8");
        st = snug_chat_apply(tok, messages, true, &text, &len, err);
    }
    snug_tok_encode_opts o = {.add_special = !a->chat, .parse_special = a->chat};
    if (st == SNUG_OK) st = snug_tok_encode(enc, a->chat ? text : a->prompt, len, &o, ids, n_ids, err);
    if (st == SNUG_OK && *n_ids == 0)
        st = snug_errorf(err, SNUG_INVALID, "the prompt is empty and the tokenizer adds no BOS: give -p");
    json_decref(messages);
    snug_mem_free(text);
    return st;
}

static bool write_text(const char *s, size_t n, void *ctx)
{
    (void)ctx;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    return !ferror(stdout);
}

int snug_cmd_generate(int argc, char **argv)
{
    gen_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    char bundled[PATH_MAX + 64];
    if (!a.model) a.model = bundled_model(bundled, sizeof bundled);

    snug_error err = {0};
    snug_comm *comm = NULL;
    snug_checkpoint *ck = NULL;
    snug_weights *w = NULL;
    snug_tokenizer *tok = NULL;
    snug_tok_encoder *enc = NULL;
    snug_generator *g = NULL;
    const int32_t *ids = NULL;
    size_t n_ids = 0;
    rc = 1;
    bool printed = false, stranded = false;
    char note[96] = "";
    snug_status st = cli_tp_open(&a.tp, &comm, &err);
    if (st != SNUG_OK) { /* every rank finds the same */
        cli_fail_once(NULL, &err);
        return 1;
    }
    int32_t tp = comm ? snug_comm_size(comm) : 1, rank = cli_rank(comm);
    if (tp > 1 && a.go.n_threads == 0) a.go.n_threads = snug_comm_default_threads();
    a.go.comm = comm;
    /* Every rank does all of this alike (the prompt too, so that each
     * finds the same errors), agreeing after each part; only its shard of
     * the weights differs. The tokenizer first: a model without one fails
     * before its weights load. */
    st = snug_checkpoint_open(a.model, &ck, &err);
    st = snug_dist_agree(comm, st, &err);
    if (st == SNUG_OK) st = snug_dist_check_model(comm, ck, &err);
    if (st != SNUG_OK) goto done;
    snug_model_config cfg = ck->config;
    st = snug_tokenizer_load(a.model, &tok, &err);
    if (st == SNUG_OK) st = snug_tok_encoder_create(tok, &enc, &err);
    st = snug_dist_agree(comm, st, &err);
    if (st != SNUG_OK) goto done;
    snug_load_opts lo = {.tp = tp, .rank = rank, .n_threads = a.go.n_threads};
    st = snug_weights_load(ck, &lo, &w, NULL, &err);
    st = snug_dist_agree(comm, st, &err);
    if (st != SNUG_OK) goto done;
    snug_checkpoint_close(ck);
    ck = NULL;
    /* End of sequence: config.json's ids, then generation_config.json's. */
    int32_t eos[SNUG_STOP_EOS_MAX];
    int32_t n_eos = snug_tokenizer_eos_ids(tok, eos, SNUG_STOP_EOS_MAX);
    for (int32_t i = 0; i < cfg.n_eos + n_eos && st == SNUG_OK; i++) {
        int32_t id = i < cfg.n_eos ? cfg.eos_token_ids[i] : eos[i - cfg.n_eos];
        bool seen = false;
        for (int32_t j = 0; j < a.stop.n_eos; j++) seen |= a.stop.eos_ids[j] == id;
        if (!seen) st = snug_stop_params_add_eos(&a.stop, id, &err);
    }
    if (st == SNUG_OK) st = prompt_ids(&a, tok, enc, &ids, &n_ids, &err);
    /* The cache holds one sequence: the prompt and -n tokens, or (without
     * -n) up to DEFAULT_MAX_LEN positions unless --max-model-len asks for
     * more, so that a 128k-context model does not reserve gigabytes. */
    if (st == SNUG_OK && a.go.max_len > cfg.max_position_embeddings)
        st = snug_errorf(&err, SNUG_INVALID, "--max-model-len %lld is more than the model's %lld "
                         "positions (config.json: max_position_embeddings)", (long long)a.go.max_len,
                         (long long)cfg.max_position_embeddings);
    if (a.go.max_len == 0)
        a.go.max_len = SNUG_MIN(cfg.max_position_embeddings,
                                (int64_t)n_ids + (a.n_new > 0 ? a.n_new : DEFAULT_MAX_LEN));
    a.go.echo = !a.chat;
    if (st == SNUG_OK) st = snug_generator_create(&cfg, w, tok, &a.go, &g, &err);
    st = snug_dist_agree(comm, st, &err);
    if (st != SNUG_OK) goto done;
    if (rank > 0) { /* rank 0 runs the generation; this rank its steps */
        st = snug_generator_follow(g, &err);
        if (st == SNUG_OK) rc = 0;
        else fprintf(stderr, "snug: rank %d: %s\n", rank, err.msg);
        printed = true;
        stranded = st != SNUG_OK; /* rank 0 may be inside a step without this rank */
        goto done;
    }
    a.stop.max_tokens = (int32_t)a.n_new;
    snug_gen_result res;
    st = snug_generate(g, ids, (int64_t)n_ids, &a.sp, &a.stop, a.ids ? NULL : write_text, NULL, &res, &err);
    snug_error stop_err = {0};
    if (snug_generator_stop(g, &stop_err) != SNUG_OK && st == SNUG_OK) {
        st = stop_err.status;
        err = stop_err;
    }
    if (st != SNUG_OK) {
        printed = cli_fail(&err);
        goto done;
    }
    if (a.ids) {
        for (int64_t i = 0; i < res.n_prompt + res.n_generated; i++) printf(i ? " %d" : "%d", res.ids[i]);
    }
    printf("\n");
    fflush(stdout);
    double ps = res.prefill_seconds, ds = res.decode_seconds;
    if (tp > 1) { /* the all-reduces' share of the run, as rank 0 waited in them */
        int64_t calls = 0;
        double ar = 0;
        snug_comm_allreduce_stats(comm, &calls, &ar);
        snprintf(note, sizeof note, ", tp %d: all-reduce %.1f%% of the time", tp,
                 ps + ds > 0 ? 100.0 * ar / (ps + ds) : 0.0);
    }
    fprintf(stderr, "prompt: %lld tokens, %.1f tokens/s; generated: %lld tokens, %.1f tokens/s (%s, %s%s); finish: %s\n",
            (long long)res.n_prompt, ps > 0 ? (double)res.n_prompt / ps : 0.0, (long long)res.n_generated,
            ds > 0 && res.n_generated > 1 ? (double)(res.n_generated - 1) / ds : 0.0,
            snug_isa_name(snug_generator_isa(g)),
            snug_dtype_torch_name(w->dtype), note,
            snug_finish_name(res.finish));
    rc = 0;
done:
    if (rc && !printed) cli_fail_once(comm, &err); /* a failure all ranks agreed on */
    if (stranded || (comm && snug_comm_broken(comm)))
        return cli_tp_end(comm, rc, true); /* the run ends here; MPI may still use the buffers */
    snug_generator_free(g);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    snug_weights_free(w);
    snug_checkpoint_close(ck);
    return cli_tp_end(comm, rc, false);
}
