/*
 * cmd_generate.c: `snug generate [MODEL] [-p PROMPT] [-n N] [sampling] [--chat] [--ids]`:
 * generates from a prompt through the serving engine (engine/engine.h),
 * planned for one sequence, and streams the text to stdout as it comes;
 * speeds go to stderr. With --tp N, rank 0 runs the engine and every other
 * rank follows its steps (snug_engine_follow).
 */
#include "chat/chat.h"
#include "formats/checkpoint.h"
#include "cli.h"

#include "dist/agree.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "engine/engine.h"
#include "engine/plan_report.h"
#include "grammar/schema.h"
#include "base/json.h"
#include "kernels/kernels.h"
#include "model/model.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char g_usage[] =
    "snug generate [MODEL] [-p|--prompt PROMPT] [-n|--max-tokens N] [--temperature T]\n"
    "              [--top-p P] [--top-k K] [--min-p P] [--repetition-penalty R]\n"
    "              [--frequency-penalty F] [--presence-penalty F] [--seed S] [--stop TEXT]...\n"
    "              [--ignore-eos] [--chat] [--ids]\n"
    "              [--grammar-file FILE.gbnf | --json-schema SCHEMA]\n"
    CLI_PLAN_USAGE
    CLI_SPEC_USAGE
    "              [--tp N [--step-timeout S]]\n"
    "  MODEL defaults to the bundled " CLI_BUNDLED_MODEL "; -n is the most new tokens (default:\n"
    "  until EOS or the model length); --max-model-len is the positions a sequence may use\n"
    "  (default: the prompt and N, or the prompt and 8192, at most the model's); --chat applies\n"
    "  the model's chat template to PROMPT as a user message; --grammar-file (GBNF, as llama.cpp's)\n"
    "  and --json-schema (JSON schema text) constrain the output to what they allow; --ids\n"
    "  prints every id (BOS, prompt, generated) instead of the text; the memory and scheduler\n"
    "  options are snug profile's (--dtype holds the weights at a float type, or quantizes the\n"
    "  float matrices to a block format while loading), planning for one sequence unless\n"
    "  --max-num-seqs says otherwise; the plan's line goes to stderr at the end, before the\n"
    "  speeds; --tp N splits the model over N processes started by mpirun -np N (rank 0 prints)";

enum {
    DEFAULT_MAX_LEN = 8192,
    PREFILL_CHUNK = 256     /* prompt tokens per step: the engine's max_num_batched_tokens */
};

typedef struct gen_args {
    const char *model, *prompt;
    int64_t n_new;
    snug_sampling_params sp;
    snug_stop_params stop;
    bool chat, ids;
    const char *grammar_file, *json_schema; /* NULL: none */
    snug_spec_opts spec;    /* speculative decoding's (cli_spec_option) */
    snug_planner_opts plan; /* the plan's options (cli_plan_option); its max_model_len is
                             * the positions the sequence may use (0: the default rule) */
    cli_tp tp;
    char bundled[PATH_MAX + 64]; /* model when it is the bundled one beside the program */
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

/* The grammar --grammar-file or --json-schema asks for, compiled into *out
 * (NULL when neither was given). Fails naming the file or the schema's
 * place. */
static snug_status compile_grammar(const gen_args *a, snug_grammar **out, snug_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    json_t *schema = NULL;
    snug_status st = SNUG_OK;
    if (a->grammar_file) {
        st = snug_file_read_all(a->grammar_file, 16u << 20, &text, &len, err);
        if (st == SNUG_OK) st = snug_grammar_parse_gbnf(text, len, "root", a->grammar_file, out, err);
    } else if (a->json_schema) {
        st = snug_json_parse(a->json_schema, strlen(a->json_schema), "--json-schema", &schema, err);
        if (st == SNUG_OK) st = snug_schema_compile(schema, "--json-schema", out, err);
    }
    json_decref(schema);
    snug_mem_free(text);
    return st;
}

/* Parses the command line into *a (the bundled model when none is
 * given); returns -1 when it is fine, else the exit status of a usage
 * error (already printed). */
static int parse_args(int argc, char **argv, gen_args *a)
{
    snug_sampling_params_default(&a->sp);
    snug_stop_params_default(&a->stop);
    a->plan.isa = -1;
    snug_error err = {0};
    for (int i = 1; i < argc; i++) {
        const char *v;
        int64_t x;
        int rc = cli_planning_option(argc, argv, &i, &a->plan, &a->tp, g_usage);
        if (!rc) rc = cli_spec_option(argc, argv, &i, &a->spec, g_usage);
        if (rc > 1) return rc;
        if (rc == 1) continue;
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
        } else if ((v = cli_option(argc, argv, &i, "--grammar-file"))) {
            a->grammar_file = v;
        } else if ((v = cli_option(argc, argv, &i, "--json-schema"))) {
            a->json_schema = v;
        } else if (strcmp(argv[i], "--ignore-eos") == 0) {
            a->stop.ignore_eos = true;
        } else if (strcmp(argv[i], "--chat") == 0) {
            a->chat = true;
        } else if (strcmp(argv[i], "--ids") == 0) {
            a->ids = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_unknown_option(g_usage, CLI_PLAN_OPTIONS " " CLI_TP_OPTIONS " " CLI_SPEC_OPTIONS, argv[i]);
        } else if (!a->model) {
            a->model = argv[i];
        } else {
            return cli_usage(g_usage, "more than one model given ('%s' and '%s')", a->model, argv[i]);
        }
    }
    if (cli_plan_check(&a->plan, g_usage)) return 2;
    if (a->plan.max_model_len == 1) /* a position for the prompt and one for a token */
        return cli_usage(g_usage, "--max-model-len expects an integer >= 2, got '1'");
    if (!a->prompt) a->prompt = "";
    if (!a->model) a->model = cli_default_model(a->bundled, sizeof a->bundled);
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

/* Writes n bytes of text to stdout now; false when stdout fails. */
static bool write_text(const char *s, size_t n)
{
    if (n == 0) return true;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    return !ferror(stdout);
}

/* Echoes the prompt's text (special tokens skipped) into text (cap bytes),
 * the prompt's stream left in *s; false when stdout fails. */
static bool echo_prompt(snug_tok_stream *s, const int32_t *ids, int64_t n_ids, char *text, size_t cap)
{
    bool ok = true;
    for (int64_t i = 0; i < n_ids && ok; i++) {
        size_t n = 0;
        if (ids[i] < snug_tokenizer_n_vocab(s->tok) &&
            snug_tok_stream_push(s, ids[i], text, cap, &n, NULL) == SNUG_OK)
            ok = write_text(text, n);
    }
    /* a character the prompt leaves unfinished: its bytes as they are */
    return ok && write_text(text, snug_tok_stream_finish(s, text, cap));
}

/* What one generation gave. */
typedef struct gen_result {
    int64_t n_generated;
    snug_finish finish;
    double prefill_seconds;     /* submit to the first output: the prompt in, a token out */
    double decode_seconds;      /* the outputs after that */
    double allreduce_seconds;   /* rank 0's waits in all-reduces in between */
    snug_engine_counters k;     /* the engine's counters at the end (speculative decoding's) */
} gen_result;

/* Runs request r on e, writing its text to stdout (unless ids_only) and
 * its generated ids to out (at most cap). Cancels r when stdout fails
 * (finish ABORT). Fails as snug_engine_submit does. */
static snug_status run_request(snug_engine *e, snug_comm *comm, snug_request *r, bool ids_only,
                               int32_t *out, int64_t cap, char *text, size_t text_cap, gen_result *res,
                               snug_error *err)
{
    /* rank 0's all-reduce figures, read while the step loop is idle: now,
     * and once r is done (its last step published under the engine's mutex) */
    int64_t calls = 0;
    double ar0 = 0, ar1 = 0;
    if (comm) snug_comm_allreduce_stats(comm, &calls, &ar0);
    *res = (gen_result){0};
    double t0 = snug_now_seconds(), t1 = 0;
    snug_status st = snug_engine_submit(e, r, err);
    bool out_ok = true;
    while (st == SNUG_OK && !snug_engine_done(e, r)) {
        snug_output o;
        if (!snug_engine_next(e, r, &o, text, text_cap)) {
            snug_engine_wait(e, r, 1.0);
            continue;
        }
        if (t1 == 0) t1 = snug_now_seconds();
        if (o.token >= 0 && res->n_generated < cap) out[res->n_generated++] = o.token;
        if (out_ok && !ids_only && !write_text(text, o.n_text)) {
            out_ok = false;
            res->finish = SNUG_FINISH_ABORT;
            snug_engine_cancel(e, r);
        }
        if (out_ok && o.finish != SNUG_FINISH_NONE) res->finish = o.finish;
    }
    if (st != SNUG_OK) return st;
    double t2 = snug_now_seconds();
    if (comm) snug_comm_allreduce_stats(comm, &calls, &ar1);
    res->prefill_seconds = (t1 > 0 ? t1 : t2) - t0;
    res->decode_seconds = t1 > 0 ? t2 - t1 : 0;
    res->allreduce_seconds = ar1 - ar0;
    return SNUG_OK;
}

/* What a generation holds, made before the engine (whose plan counts it). */
typedef struct gen_state {
    int32_t *seq;           /* [plan.max_model_len] the prompt's ids, then the generated ones */
    int64_t n_ids;          /* the prompt's */
    char *text;             /* [text_cap] one output's text, or one prompt token's */
    size_t text_cap;
    snug_grammar *grammar;  /* --grammar-file, --json-schema; NULL: none */
    snug_dtype weight_dtype;/* what the weights are held at */
} gen_state;

static void gen_state_free(gen_state *g)
{
    snug_grammar_free(g->grammar);
    snug_mem_free(g->text);
    snug_mem_free(g->seq);
    *g = (gen_state){0};
}

/* The positions the sequence may use into a->plan.max_model_len: the
 * prompt and -n tokens, or (without -n) up to DEFAULT_MAX_LEN positions
 * unless --max-model-len asks for more, so that a 128k-context model does
 * not reserve gigabytes. Fails when --max-model-len is past the model's or
 * the prompt does not fit. */
static snug_status settle_max_len(gen_args *a, const snug_model_config *cfg, int64_t n_ids,
                                  snug_error *err)
{
    int64_t *max_len = &a->plan.max_model_len;
    if (*max_len > cfg->max_position_embeddings)
        return snug_errorf(err, SNUG_INVALID, "--max-model-len %lld is more than the model's %lld "
                           "positions (config.json: max_position_embeddings)", (long long)*max_len,
                           (long long)cfg->max_position_embeddings);
    if (*max_len == 0)
        *max_len = SNUG_MIN(cfg->max_position_embeddings,
                            n_ids + (a->n_new > 0 ? a->n_new : DEFAULT_MAX_LEN));
    if (n_ids >= *max_len)
        return snug_errorf(err, SNUG_INVALID, "generate: a prompt of %lld tokens (1 to %lld fit; "
                           "--max-model-len sets the positions a sequence may use)",
                           (long long)n_ids, (long long)*max_len - 1);
    return SNUG_OK;
}

/* Every rank does this alike (the prompt too, so that each finds the same
 * errors and plans the same engine), agreeing after each part: opens the
 * checkpoint and its tokenizer (a model without one fails before its
 * weights load), encodes the prompt, settles the sequence's length, makes
 * g's buffers (before the plan, which counts them) and compiles the grammar
 * (a bad one fails fast). The checkpoint and tokenizer are closed again:
 * the engine loads its own. Fails as the agreement does; g holds what was
 * made (gen_state_free). */
static snug_status prepare(gen_args *a, snug_comm *comm, gen_state *g, snug_error *err)
{
    snug_checkpoint *ck = NULL;
    snug_tokenizer *tok = NULL;
    snug_tok_encoder *enc = NULL;
    snug_status st = snug_checkpoint_open(a->model, &ck, err);
    st = snug_dist_agree(comm, st, err);
    if (st == SNUG_OK) st = snug_dist_check_model(comm, ck, err);
    if (st != SNUG_OK) goto done;
    g->weight_dtype = a->plan.weight_dtype != SNUG_DTYPE_NONE ? a->plan.weight_dtype
                                                             : snug_checkpoint_weight_dtype(ck);
    st = snug_tokenizer_load(a->model, &tok, err);
    if (st == SNUG_OK) st = snug_tok_encoder_create(tok, &enc, err);
    st = snug_dist_agree(comm, st, err);
    if (st != SNUG_OK) goto done;
    const int32_t *ids = NULL;
    size_t n_enc = 0;
    st = prompt_ids(a, tok, enc, &ids, &n_enc, err);
    g->n_ids = (int64_t)n_enc;
    if (st == SNUG_OK) st = settle_max_len(a, &ck->config, g->n_ids, err);
    int64_t max_len = a->plan.max_model_len;
    if (st == SNUG_OK) g->seq = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_len * sizeof(int32_t), err);
    g->text_cap = snug_stop_emit_bytes(snug_stop_text_bytes(snug_tokenizer_max_token_bytes(tok)));
    if (g->seq) g->text = snug_mem_alloc(SNUG_MEM_OTHER, g->text_cap, err);
    if (st == SNUG_OK && !g->text) st = snug_error_prefix(err, SNUG_NOMEM, "generate: ");
    if (st == SNUG_OK) memcpy(g->seq, ids, (size_t)g->n_ids * sizeof(int32_t));
    if (st == SNUG_OK) st = compile_grammar(a, &g->grammar, err);
    st = snug_dist_agree(comm, st, err);
done:
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    snug_checkpoint_close(ck);
    return st;
}

/* The engine's options for g: the plan's, for one sequence of
 * plan.max_model_len positions unless they say otherwise (a KV cache of
 * just its blocks: max_num_seqs 1 caps it there), prompt steps of up to
 * PREFILL_CHUNK tokens and a profile step no larger. */
static snug_engine_opts engine_opts(const gen_args *a, const gen_state *g, snug_comm *comm)
{
    snug_engine_opts eo = {.plan = a->plan, .spec = a->spec};
    if (eo.plan.max_num_seqs == 0) eo.plan.max_num_seqs = 1;
    if (eo.plan.max_num_batched_tokens == 0)
        eo.plan.max_num_batched_tokens = (int32_t)SNUG_MIN(g->n_ids, PREFILL_CHUNK);
    eo.plan.comm = comm;
    return eo;
}

/* Prints what the run gave: the ids (--ids) or the text's end on stdout;
 * on stderr the plan's line (as serve's and profile's report says it), then
 * the speeds and how it finished. */
static void report(const gen_args *a, const gen_state *g, const snug_plan_report *plan,
                   const gen_result *res, int32_t tp)
{
    if (a->ids) {
        for (int64_t i = 0; i < g->n_ids + res->n_generated; i++) printf(i ? " %d" : "%d", g->seq[i]);
    }
    printf("\n");
    fflush(stdout);
    char line[512], note[96] = "";
    fprintf(stderr, "memory plan: %s\n", snug_plan_report_line(plan, line, sizeof line));
    double ps = res->prefill_seconds, ds = res->decode_seconds;
    if (tp > 1) /* the all-reduces' share of the run, as rank 0 waited in them */
        snprintf(note, sizeof note, ", tp %d: all-reduce %.1f%% of the time", tp,
                 ps + ds > 0 ? 100.0 * res->allreduce_seconds / (ps + ds) : 0.0);
    snug_isa isa = SNUG_ISA_SCALAR;
    snug_model_isa_resolve(a->plan.isa, &isa, NULL); /* the model was made with it */
    snug_dtype quant = a->plan.quant_dtype;
    fprintf(stderr, "prompt: %lld tokens, %.1f tokens/s; generated: %lld tokens, %.1f tokens/s (%s, %s%s); finish: %s\n",
            (long long)g->n_ids, ps > 0 ? (double)g->n_ids / ps : 0.0, (long long)res->n_generated,
            ds > 0 && res->n_generated > 1 ? (double)(res->n_generated - 1) / ds : 0.0,
            snug_isa_name(isa), quant != SNUG_DTYPE_NONE ? snug_dtype_name(quant) : snug_dtype_torch_name(g->weight_dtype), note,
            snug_finish_name(res->finish));
    const snug_engine_counters *k = &res->k;
    char draft[96] = "";
    if (a->spec.draft_model)
        snprintf(draft, sizeof draft, "; the draft model's steps %.3f s of the decode's %.3f s", k->spec_draft_seconds, ds);
    if (a->spec.prompt_lookup || a->spec.draft_model) /* what drafting gave: drafts kept, outputs a step */
        fprintf(stderr, "speculative: %s, %lld of %lld steps verified drafts; %lld drafted, %lld accepted (%.3f); "
                "%.2f tokens a step%s\n", a->spec.draft_model ? "draft model" : "prompt lookup",
                (long long)k->spec_drafts, (long long)k->steps, (long long)k->spec_drafted_tokens,
                (long long)k->spec_accepted_tokens,
                k->spec_drafted_tokens > 0 ? (double)k->spec_accepted_tokens / (double)k->spec_drafted_tokens : 0.0,
                k->steps > 0 ? (double)k->generation_tokens / (double)k->steps : 0.0, draft);
}

/* Generates once on e: the request of a and g, checked, the prompt echoed
 * (unless --ids or --chat), the output streamed (run_request), and the
 * request released. Fails as snug_engine_check and run_request do, or
 * with the engine's failure. */
static snug_status generate_once(const gen_args *a, snug_engine *e, snug_comm *comm, gen_state *g,
                                 gen_result *res, snug_error *err)
{
    snug_request r = {.prompt = g->seq, .n_prompt = g->n_ids, .sampling = a->sp, .stop = a->stop,
                      .n = 1, .grammar = g->grammar};
    int64_t n_ids = g->n_ids, max_len = a->plan.max_model_len;
    /* -n past the model length: the length ends it (finish model_length) */
    r.stop.max_tokens = a->n_new > 0 && n_ids + a->n_new <= max_len ? (int32_t)a->n_new : 0;
    snug_status st = snug_engine_check(e, &r, err);
    if (st == SNUG_OK && snug_engine_text_bytes(e) > g->text_cap)
        st = snug_errorf(err, SNUG_INTERNAL, "generate: an output's text takes up to %zu bytes, "
                         "not %zu", snug_engine_text_bytes(e), g->text_cap);
    if (st != SNUG_OK) return st;
    *res = (gen_result){.finish = SNUG_FINISH_ABORT};
    const snug_tokenizer *etok = snug_engine_tokenizer(e);
    snug_tok_stream prompt_stream;
    snug_tok_stream_init(&prompt_stream, etok, true);
    bool echoed = a->ids || a->chat || echo_prompt(&prompt_stream, g->seq, n_ids, g->text, g->text_cap);
    r.output_starts_text = !prompt_stream.started; /* the prompt had no text (or was not shown) */
    if (echoed)
        st = run_request(e, comm, &r, a->ids, g->seq + n_ids, max_len - n_ids, g->text, g->text_cap, res, err);
    snug_engine_release(e, &r);
    snug_engine_counters_get(e, &res->k);
    if (st == SNUG_OK && snug_engine_failed(e))
        st = snug_errorf(err, SNUG_INTERNAL, "%s", snug_engine_error(e));
    return st;
}

/* Rank 0 (or the one process): opens the engine, generates and reports. Returns the exit status, failures
 * printed; *stranded when the other ranks may be inside a step (the engine
 * is then left open: MPI may still use its buffers). */
static int lead(const gen_args *a, const snug_engine_opts *eo, snug_comm *comm, gen_state *g,
                bool *stranded)
{
    snug_error err = {0};
    snug_engine *e = NULL;
    int32_t tp = comm ? snug_comm_size(comm) : 1;
    int rc = 1;
    if (snug_engine_open(a->model, eo, &e, &err) != SNUG_OK) goto fail;
    gen_result res;
    if (generate_once(a, e, comm, g, &res, &err) != SNUG_OK) {
        *stranded = snug_engine_failed(e) && tp > 1; /* the other ranks may be inside a step */
        goto fail;
    }
    report(a, g, snug_engine_plan(e), &res, tp);
    rc = 0;
    goto done;
fail:
    cli_fail(&err);
done:
    *stranded = *stranded || (comm && snug_comm_broken(comm));
    if (!*stranded) snug_engine_close(e); /* the followers return */
    return rc;
}

/* A follower rank: plans with rank 0, then runs its steps until rank 0's
 * engine closes. Returns the exit status; *stranded when a step failed
 * after the plan. A failed plan is every rank's: rank 0 says why. */
static int follow(const gen_args *a, const snug_engine_opts *eo, snug_comm *comm, bool *stranded)
{
    snug_error err = {0};
    bool planned = false;
    if (snug_engine_follow(a->model, eo, &planned, &err) == SNUG_OK) return 0;
    if (planned) fprintf(stderr, "snug: rank %d: %s\n", cli_rank(comm), err.msg);
    *stranded = planned; /* rank 0 may be inside a step without this rank */
    return 1;
}

int snug_cmd_generate(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    gen_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    snug_error err = {0};
    snug_comm *comm = NULL;
    if (cli_tp_open(&a.tp, &comm, &err) != SNUG_OK)
        return cli_fail_once(NULL, &err); /* every rank finds the same */
    gen_state g = {0};
    bool stranded = false;
    rc = 1;
    if (prepare(&a, comm, &g, &err) != SNUG_OK) {
        cli_fail_once(comm, &err); /* a failure all ranks agreed on */
        goto done;
    }
    snug_engine_opts eo = engine_opts(&a, &g, comm);
    if (cli_rank(comm) > 0)
        rc = follow(&a, &eo, comm, &stranded);
    else
        rc = lead(&a, &eo, comm, &g, &stranded);
done:
    if (stranded || (comm && snug_comm_broken(comm)))
        return cli_tp_end(comm, rc, true); /* the run ends here; MPI may still use the buffers */
    gen_state_free(&g);
    return cli_tp_end(comm, rc, false);
}
