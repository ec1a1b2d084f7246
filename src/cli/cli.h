/*
 * cli.h: the commands of the `snug` program and the helpers they share.
 * Commands print their results to stdout and their errors to stderr, and
 * return the process exit status (0 success, 1 failure, 2 usage error).
 */
#ifndef SNUG_CLI_H
#define SNUG_CLI_H

#include "base/common.h"
#include "engine/planner.h"
#include "engine/spec.h"

/* `snug serve [MODEL] [options]`: plans, prints the plan, and serves the
 * OpenAI-compatible API until SIGINT or SIGTERM (then drains and exits 0). */
int snug_cmd_serve(int argc, char **argv);

/* `snug inspect DIR [--tp N] [--dtype D] [--tensors] [--json]`: argv[0] is
 * "inspect". Prints the model's summary and the weight bytes of each rank. */
int snug_cmd_inspect(int argc, char **argv);

/* `snug load DIR [--tp N] [--rank R | --all-ranks] [--dtype D] [--staging-bytes B]
 * [--threads T] [--json]`: loads one rank's weights (or each rank's in turn)
 * and prints weight bytes, peak/weights, high-water-mark growth/weights,
 * bytes read/weights, seconds and GB/s per rank (--json: one object a line). */
int snug_cmd_load(int argc, char **argv);

/* `snug profile [MODEL] [options] [--json]`: runs the memory plan and
 * prints its report (budget, weights, activations, serving state,
 * untracked, reserve, KV cache). */
int snug_cmd_profile(int argc, char **argv);

/* `snug tokenize PATH [--file F | TEXT] [--no-bos] [--special]`: prints the
 * ids of the text, space-separated, on one line. */
int snug_cmd_tokenize(int argc, char **argv);

/* `snug detokenize PATH [--skip-special] IDS...`: prints the text of ids. */
int snug_cmd_detokenize(int argc, char **argv);

/* `snug chat-template PATH --messages FILE.json [--generation-prompt]`:
 * prints the model's chat template rendered for the messages. */
int snug_cmd_chat_template(int argc, char **argv);

/* `snug generate [MODEL] [-p PROMPT] [-n N] [sampling options] [--chat] [--ids]`:
 * generates text from a prompt, streaming it to stdout; speeds to stderr. */
int snug_cmd_generate(int argc, char **argv);

/* `snug mkmodel --preset NAME --dtype D [--shards K] [--seed S] [--threads T]
 * [--tokenizer DIR | --no-tokenizer] OUTDIR`: writes a synthetic checkpoint
 * (creating OUTDIR if needed) with the tokenizer files of DIR (default: the
 * preset family's in the repository, found as cli_repo_dir finds it; a
 * warning when it is not there) and reports its size and write speed on
 * stderr. A tokenizer with more tokens than the model's vocab_size fails
 * before any weight is written. */
int snug_cmd_mkmodel(int argc, char **argv);

/* `snug convert llama2c|gguf INPUT OUTDIR`: imports a checkpoint as a
 * Hugging Face model directory (creating OUTDIR if needed). */
int snug_cmd_convert(int argc, char **argv);

/* A directory of the repository snug was built in, by its path relative to
 * the repository's root (such as "models/stories260K"): rel itself when the
 * working directory holds it, else rel beside the program's folder
 * (build/snug -> build/../rel), written into buf. NULL when neither is a
 * directory. */
const char *cli_repo_dir(const char *rel, char *buf, size_t size);

/* The bundled demo model, by its path in the repository. */
#define CLI_BUNDLED_MODEL "models/stories260K"

/* The model a command runs when none is given: CLI_BUNDLED_MODEL found as
 * cli_repo_dir finds it (in the working directory, else beside the
 * program), so that it opens from any directory; the path is written into
 * buf (size bytes) when it is not the relative one. When it is nowhere,
 * CLI_BUNDLED_MODEL itself (opening it then fails naming it). */
const char *cli_default_model(char *buf, size_t size);

/* Prints "snug: <message>" to stderr and returns 1. */
int cli_fail(const snug_error *err);

/* Prints "snug <cmd>: <message>" and the usage line to stderr; returns 2. */
int cli_usage(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* When argv[1..argc) holds --help or -h (before any "--"), prints "usage: "
 * and usage to stdout and returns true (the command then exits 0). Every
 * command calls it first. */
bool cli_help(int argc, char **argv, const char *usage);

/* Prints "snug: unknown option 'ARG'" to stderr, with "; did you mean
 * 'OPTION'?" when an option named in usage or in more (NULL: none; a list
 * of options that usage does not spell out) is close to it (an edit
 * distance of at most 2, or one a prefix of the other), then the usage
 * line. Only the name of "--name=value" counts. Returns 2. */
int cli_unknown_option(const char *usage, const char *more, const char *arg);

/* The word of known[0..n_known) closest to word as cli_unknown_option
 * judges closeness; NULL when none is close. */
const char *cli_closest(const char *word, const char *const *known, size_t n_known);

/* The options cli_plan_option and cli_tp_option take (keep in step with
 * them): for cli_unknown_option's suggestions where a usage only refers to
 * them. */
#define CLI_PLAN_OPTIONS                                                                          \
    "--memory --memory-fraction --no-prefix-caching --enable-prefix-caching --swa-full --kv-cache-memory " \
    "--reserve --staging-bytes --dtype --max-model-len --max-num-seqs --max-num-batched-tokens " \
    "--block-size --kv-cache-dtype --threads --isa --bf16-matmul --quiet"
#define CLI_TP_OPTIONS "--tp --tensor-parallel-size --step-timeout"

/* Allocator events a start-up timeline records by default (profile's and
 * serve's --timeline). */
enum { CLI_TIMELINE_EVENTS_DEFAULT = 65536 };

/* What the Makefile wrote of this build (build/gen/build_info.c): the git
 * commit ("unknown" outside a git checkout) and the build options. */
extern const char cli_build_commit[];
extern const char cli_build_options[];

/* Parses a decimal integer argument in [lo, hi]; false when it is not one. */
bool cli_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);

/* The option parsers below look at argv[*at]. Each returns 1 when it took
 * it (*at moved past its value, the value stored), 0 when argv[*at] is
 * another option (nothing moved or stored), or 2 after printing a usage
 * error ("NAME expects ..., got 'V'" and usage). */

/* Integer option `name` in [lo, hi] into *out ("NAME expects LO to HI"). */
int cli_int_option(int argc, char **argv, int *at, const char *name, int64_t lo, int64_t hi,
                   int64_t *out, const char *usage);

/* Byte-count option `name` (snug_parse_bytes: 6GiB, 1500MB) into *out
 * ("NAME expects a byte count"). */
int cli_bytes_option(int argc, char **argv, int *at, const char *name, size_t *out,
                     const char *usage);

/* --threads T (1 to 1024) into *n. */
int cli_threads_option(int argc, char **argv, int *at, int32_t *n, const char *usage);

/* --dtype D (cli_dtype) into *weights and *quant. */
int cli_dtype_option(int argc, char **argv, int *at, snug_dtype *weights, snug_dtype *quant,
                     const char *usage);

/* Returns the value of option argv[*i] ("--tp 8" or "--tp=8"), advancing *i
 * past it, or NULL when argv[*i] is not `name` or has no value. */
const char *cli_option(int argc, char **argv, int *i, const char *name);

/* --dtype's value v: a float type the weights are held at (bf16, f16,
 * f32) into *weights, or a block format the float matrices are quantized
 * to while loading (q8_0, q4_0, q4_k, q5_k, q6_k) into *quant (the weights' type
 * then stays the checkpoint's). False for anything else. */
bool cli_dtype(const char *v, snug_dtype *weights, snug_dtype *quant);

/* The usage text of --dtype's values. */
#define CLI_DTYPES "bf16|f16|f32|q8_0|q4_0|q4_k|q5_k|q6_k"

/* Parses the memory-plan option at argv[*at] (--memory, --memory-fraction,
 * --kv-cache-memory, --reserve, --staging-bytes, --dtype, --max-model-len,
 * --max-num-seqs, --max-num-batched-tokens, --block-size, --kv-cache-dtype,
 * --threads, --isa) into o, moving *at past its value. Returns 1 when it
 * took one, 0 when argv[*at] is another option, 2 after printing a usage
 * error. */
int cli_plan_option(int argc, char **argv, int *at, snug_planner_opts *o, const char *usage);

/* What cli_plan_option took, checked together once the command line is
 * read: 0 when the options agree, else 2 after printing a usage error
 * (--memory and --memory-fraction both given). */
int cli_plan_check(const snug_planner_opts *o, const char *usage);

/* The plan options' usage text, as profile's and generate's usages list
 * them (cli_unknown_option suggests from it). */
#define CLI_PLAN_USAGE                                                                              \
    "              [--memory BYTES | --memory-fraction F] [--kv-cache-memory BYTES]\n"            \
    "              [--no-prefix-caching] [--swa-full] [--reserve BYTES] [--max-model-len N] [--max-num-seqs N]\n" \
    "              [--max-num-batched-tokens N] [--block-size N] [--kv-cache-dtype auto|bf16|f16|f32|q8_0|fp8_e4m3|fp8_e5m2]\n" \
    "              [--dtype " CLI_DTYPES "] [--staging-bytes BYTES] [--threads T]\n"               \
    "              [--isa scalar|avx2|avx512|avx512bf16] [--bf16-matmul auto|fma|vdpbf16ps] [--quiet]\n"

/* Parses a speculative-decoding option at argv[*at] into o (spec.h):
 * --prompt-lookup (n-gram drafts from each sequence's own tokens),
 * --draft-model PATH (also llama.cpp's --model-draft and -md),
 * --draft-min N (llama.cpp's: drafts a step at least, however they pay),
 * --num-speculative-tokens N (also llama.cpp's --draft-max), and
 * --prompt-lookup-min/--prompt-lookup-max N (vLLM's names). Returns as
 * cli_plan_option does. */
int cli_spec_option(int argc, char **argv, int *at, snug_spec_opts *o, const char *usage);

/* Their usage text and names (for cli_unknown_option). */
#define CLI_SPEC_USAGE                                                                              \
    "              [--prompt-lookup [--prompt-lookup-min N] [--prompt-lookup-max N] | --draft-model PATH]\n" \
    "              [--num-speculative-tokens N] [--draft-min N]\n"
#define CLI_SPEC_OPTIONS                                                                            \
    "--prompt-lookup --draft-model --num-speculative-tokens --draft-max --draft-min --prompt-lookup-min "         \
    "--prompt-lookup-max"

/* What the progress lines keep between calls: the options' on_phase_ctx. */
typedef struct cli_progress {
    bool tty;                 /* stderr is a terminal: a bar redrawn in place */
    double load_t0, drawn;    /* when the load began, when the bar was last drawn */
} cli_progress;

/* The plan's progress callbacks with ctx pointing at p (zeroed here; its
 * tty from isatty(2)), in o. */
void cli_progress_install(snug_planner_opts *o, cli_progress *p);

/* The progress line as a phase of the plan begins (planner.h on_phase),
 * to stderr: "snug: [ 12.3 s] profile: ...". ctx: a cli_progress, or NULL.
 * cli_plan_option's --quiet takes it out of the options. */
void cli_phase(void *ctx, const char *phase, double seconds);

/* The load's progress (planner.h on_load_progress), to stderr: on a
 * terminal a bar with the bytes in place and the rate, redrawn at most ten
 * times a second; everywhere a line with the bytes and the rate at the end.
 * ctx: a cli_progress. */
void cli_load_progress(void *ctx, uint64_t done, uint64_t total);

/* Tensor parallelism on the command line: --tp N (also vLLM's
 * --tensor-parallel-size) and --step-timeout SECONDS. */
typedef struct cli_tp {
    int32_t tp;               /* 0: 1 */
    double step_timeout;      /* 0: SNUG_STEP_TIMEOUT_DEFAULT */
} cli_tp;

/* Parses a tensor-parallel option at argv[*at] into t; returns as
 * cli_plan_option does. */
int cli_tp_option(int argc, char **argv, int *at, cli_tp *t, const char *usage);

/* The options every command that plans takes (serve, profile, generate):
 * cli_plan_option's into o, then cli_tp_option's into t. Returns as they
 * do. */
int cli_planning_option(int argc, char **argv, int *at, snug_planner_opts *o, cli_tp *t,
                        const char *usage);

/* Opens the communicator for t (*out NULL for one process: tp 1 outside
 * mpirun). Fails as snug_comm_open does. */
snug_status cli_tp_open(const cli_tp *t, snug_comm **out, snug_error *err);

/* This process's rank (0 without a communicator). */
int32_t cli_rank(const snug_comm *c);

/* Ends a command that ran with communicator c and exit status rc. When the
 * ranks cannot finish together (the communicator broke, or stranded: this
 * rank failed while the others may be inside a step), every process of
 * the run is ended at once (snug_comm_abort; a follower first waits a few
 * seconds, so that rank 0 can answer its clients); otherwise closes c and
 * returns rc. */
int cli_tp_end(snug_comm *c, int rc, bool stranded);

/* Prints the error as cli_fail does, on rank 0 only (a failure every rank
 * agreed on is told once) unless the communicator broke (then each rank
 * has its own). Returns 1. */
int cli_fail_once(const snug_comm *c, const snug_error *err);

#endif /* SNUG_CLI_H */
