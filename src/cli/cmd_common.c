/*
 * cmd_common.c: helpers shared by the command-line commands.
 */
#include "cli.h"

#include "base/dtype.h"
#include "kernels/kernels.h"
#include "model/kvcache.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long a follower that must end the run waits first: rank 0 answers its
 * clients (a failed stream, /health 503) before everything goes. */
enum { FOLLOWER_GRACE_SECONDS = 3 };

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

const char *cli_repo_dir(const char *rel, char *buf, size_t size)
{
    if (is_dir(rel)) return rel;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    int w = snprintf(buf, size, "%s/../%s", exe, rel);
    return w > 0 && (size_t)w < size && is_dir(buf) ? buf : NULL;
}

const char *cli_default_model(char *buf, size_t size)
{
    const char *dir = cli_repo_dir(CLI_BUNDLED_MODEL, buf, size);
    return dir ? dir : CLI_BUNDLED_MODEL;
}

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

bool cli_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n", usage);
            return true;
        }
    return false;
}

/* The edit distance of a[0..na) and b[0..nb): insertions, deletions,
 * substitutions and swaps of neighbours count 1 each (the optimal string
 * alignment distance). Words longer than WORD_MAX are never close. */
enum { WORD_MAX = 64, FAR = 1 << 20 };
static int edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    if (na > WORD_MAX || nb > WORD_MAX) return FAR;
    int d[WORD_MAX + 1][WORD_MAX + 1];
    for (size_t i = 0; i <= na; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            int best = sub < del ? sub : del;
            if (ins < best) best = ins;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[na][nb];
}

/* How far word[0..n) is from known[0..nk): its edit distance when that is at
 * most 2 and less than the word's length without leading dashes (so '-x' is
 * not close to '-p'); else 3 when one is a prefix of the other and the word
 * has at least 4 characters; else FAR. */
static int closeness(const char *word, size_t n, const char *known, size_t nk)
{
    size_t core = strspn(word, "-");
    core = n > core ? n - core : 0;
    int d = edit_distance(word, n, known, nk);
    if (d <= 2 && (size_t)d < core) return d;
    if (n >= 4 && strncmp(word, known, n < nk ? n : nk) == 0) return 3;
    return FAR;
}

const char *cli_closest(const char *word, const char *const *known, size_t n_known)
{
    const char *best = NULL;
    int best_d = FAR;
    for (size_t k = 0; k < n_known; k++) {
        int d = closeness(word, strlen(word), known[k], strlen(known[k]));
        if (d < best_d) best = known[k], best_d = d;
    }
    return best;
}

/* The option in text closest to word[0..n) (see closeness), copied into
 * out[0..cap); *best_d is the distance to beat and becomes the new one.
 * Options in text are "--" and a word of lower-case letters, digits and
 * dashes, or "-" and one letter, each after a start, space, '[' or '|'. */
static void closest_in_text(const char *word, size_t n, const char *text, int *best_d, char *out,
                            size_t cap)
{
    for (const char *t = text; t && *t; t++) {
        if (*t != '-' || (t > text && !strchr(" [|\n(", t[-1]))) continue;
        size_t len = 1 + strspn(t + 1, "-abcdefghijklmnopqrstuvwxyz0123456789");
        bool option = (len > 2 && t[1] == '-') || (len == 2 && t[1] != '-');
        if (option && len < cap) {
            int d = closeness(word, n, t, len);
            if (d < *best_d) {
                *best_d = d;
                memcpy(out, t, len);
                out[len] = '\0';
            }
        }
        t += len - 1;
    }
}

int cli_unknown_option(const char *usage, const char *more, const char *arg)
{
    size_t n = strcspn(arg, "="); /* --name=value: the name */
    char best[WORD_MAX + 1] = "";
    int best_d = FAR;
    closest_in_text(arg, n, usage, &best_d, best, sizeof best);
    closest_in_text(arg, n, more, &best_d, best, sizeof best);
    if (best[0]) return cli_usage(usage, "unknown option '%.*s'; did you mean '%s'?", (int)n, arg, best);
    return cli_usage(usage, "unknown option '%.*s'", (int)n, arg);
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

void cli_progress_install(snug_planner_opts *o, cli_progress *p)
{
    *p = (cli_progress){.tty = isatty(STDERR_FILENO) == 1};
    o->on_phase = cli_phase;
    o->on_load_progress = cli_load_progress;
    o->on_phase_ctx = p;
}

void cli_load_progress(void *ctx, uint64_t done, uint64_t total)
{
    cli_progress *p = ctx;
    double now = snug_now_seconds();
    if (p->load_t0 == 0) p->load_t0 = now;
    double secs = now - p->load_t0;
    double rate = secs > 0 ? (double)done / secs / 1e9 : 0;
    char d[32], t[32];
    snug_fmt_bytes(done, d);
    snug_fmt_bytes(total, t);
    if (done >= total) {
        fprintf(stderr, "%ssnug: loaded %s in %.2f s (%.2f GB/s)\n", p->tty ? "\r\033[K" : "", t,
                secs, rate);
        return;
    }
    if (!p->tty || now - p->drawn < 0.1) return;
    p->drawn = now;
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    int filled = total ? (int)((double)done / (double)total * WIDTH) : 0;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = 0;
    fprintf(stderr, "\r\033[Ksnug: loading [%s] %s of %s, %.2f GB/s", bar, d, t, rate);
}

void cli_phase(void *ctx, const char *phase, double seconds)
{
    cli_progress *p = ctx;
    if (p && strcmp(phase, "load") == 0) p->load_t0 = snug_now_seconds();
    static const struct { const char *phase, *what; } lines[] = {
        {"load", "load: the weights, each tensor read straight into place"},
        {"reset", "reset: the activation arena and the serving state, at their largest"},
        {"profile", "profile: the largest step, run and measured"},
        {"plan", "plan: the KV cache from what the budget leaves"},
        {"populate", "populate: the KV cache made resident"},
        {"reserve", "reserve: the KV cache charged, to be made resident as serving begins"},
        {"ready", "ready"},
        {"resident", "resident: the KV cache, made resident as serving began"},
        {"resident-failed", "resident: the system would not back the whole KV cache; serving "
                            "goes on with the blocks made resident (snug_kv_blocks_resident)"}};
    const char *what = phase;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(lines); i++)
        if (strcmp(lines[i].phase, phase) == 0) what = lines[i].what;
    fprintf(stderr, "snug: [%6.1f s] %s\n", seconds, what);
}

bool cli_dtype(const char *v, snug_dtype *weights, snug_dtype *quant)
{
    static const struct {
        const char *name;
        snug_dtype quant;
    } quants[] = {{"q8_0", SNUG_DTYPE_Q8_0}, {"q4_0", SNUG_DTYPE_Q4_0}, {"q4_k", SNUG_DTYPE_Q4_K},
                  {"q5_k", SNUG_DTYPE_Q5_K}, {"q6_k", SNUG_DTYPE_Q6_K}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(quants); i++)
        if (strcmp(v, quants[i].name) == 0) {
            *quant = quants[i].quant;
            return true;
        }
    snug_dtype d = snug_dtype_from_torch(v);
    if (d != SNUG_DTYPE_BF16 && d != SNUG_DTYPE_F16 && d != SNUG_DTYPE_F32) return false;
    *weights = d;
    *quant = SNUG_DTYPE_NONE;
    return true;
}

int cli_int_option(int argc, char **argv, int *at, const char *name, int64_t lo, int64_t hi,
                   int64_t *out, const char *usage)
{
    int i = *at;
    const char *v = cli_option(argc, argv, &i, name);
    if (!v) return 0;
    if (!cli_parse_int(v, lo, hi, out))
        return cli_usage(usage, "%s expects %lld to %lld, got '%s'", name, (long long)lo,
                         (long long)hi, v);
    *at = i;
    return 1;
}

int cli_bytes_option(int argc, char **argv, int *at, const char *name, size_t *out,
                     const char *usage)
{
    int i = *at;
    const char *v = cli_option(argc, argv, &i, name);
    if (!v) return 0;
    if (!snug_parse_bytes(v, out)) return cli_usage(usage, "%s expects a byte count, got '%s'", name, v);
    *at = i;
    return 1;
}

int cli_threads_option(int argc, char **argv, int *at, int32_t *n, const char *usage)
{
    int64_t x;
    int rc = cli_int_option(argc, argv, at, "--threads", 1, 1024, &x, usage);
    if (rc == 1) *n = (int32_t)x;
    return rc;
}

int cli_dtype_option(int argc, char **argv, int *at, snug_dtype *weights, snug_dtype *quant,
                     const char *usage)
{
    int i = *at;
    const char *v = cli_option(argc, argv, &i, "--dtype");
    if (!v) return 0;
    if (!cli_dtype(v, weights, quant))
        return cli_usage(usage, "--dtype expects " CLI_DTYPES ", got '%s'", v);
    *at = i;
    return 1;
}

/* A plan option of an int32_t field: name in [lo, hi] into *field. */
static int int32_option(int argc, char **argv, int *at, const char *name, int64_t hi,
                        int32_t *field, const char *usage)
{
    int64_t x;
    int rc = cli_int_option(argc, argv, at, name, 1, hi, &x, usage);
    if (rc == 1) *field = (int32_t)x;
    return rc;
}

/* The plan options that take a word or a number of another kind (not an
 * integer range, a byte count, --threads or --dtype); returns as
 * cli_plan_option does. */
static int plan_word_option(int argc, char **argv, int *at, snug_planner_opts *o, const char *usage)
{
    const char *v;
    double f;
    char *end;
    int i = *at;
    if ((v = cli_option(argc, argv, &i, "--memory"))) {
        if (!snug_parse_bytes(v, &o->budget.memory_bytes))
            return cli_usage(usage, "--memory expects a byte count (6GiB, 1500MB), got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--memory-fraction"))) {
        f = strtod(v, &end);
        if (end == v || *end || !(f > 0 && f <= 1))
            return cli_usage(usage, "--memory-fraction expects a number in (0, 1], got '%s'", v);
        o->budget.fraction = f;
    } else if (strcmp(argv[i], "--quiet") == 0) {
        o->on_phase = NULL;
        o->on_load_progress = NULL;
    } else if (strcmp(argv[i], "--no-prefix-caching") == 0) {
        o->no_prefix_caching = true;
    } else if (strcmp(argv[i], "--enable-prefix-caching") == 0) { /* vLLM's; the default */
        o->no_prefix_caching = false;
    } else if (strcmp(argv[i], "--swa-full") == 0) { /* llama.cpp's */
        o->swa_full = true;
    } else if ((v = cli_option(argc, argv, &i, "--reserve"))) {
        if (strcmp(v, "0") != 0 && !snug_parse_bytes(v, &o->reserve))
            return cli_usage(usage, "--reserve expects a byte count, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--max-model-len"))) {
        if (!cli_parse_int(v, 1, INT32_MAX, &o->max_model_len))
            return cli_usage(usage, "--max-model-len expects a positive integer, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--kv-cache-dtype"))) {
        o->kv_dtype = snug_kv_dtype_from_name(v);
        if (o->kv_dtype == SNUG_DTYPE_NONE)
            return cli_usage(usage, "--kv-cache-dtype expects auto (bf16), bf16, f16, f32, q8_0, fp8 (fp8_e4m3) "
                                    "or fp8_e5m2, got '%s'", v);
    } else if ((v = cli_option(argc, argv, &i, "--isa"))) {
        snug_isa isa;
        if (!snug_isa_from_name(v, &isa))
            return cli_usage(usage, "--isa expects scalar, avx2, avx512 or avx512bf16, got '%s'", v);
        o->isa = (int)isa;
    } else if ((v = cli_option(argc, argv, &i, "--bf16-matmul"))) {
        if (!snug_bf16_choice_from_name(v, &o->bf16))
            return cli_usage(usage, "--bf16-matmul expects auto, fma or vdpbf16ps, got '%s'", v);
    } else {
        return 0;
    }
    *at = i;
    return 1;
}

int cli_plan_option(int argc, char **argv, int *at, snug_planner_opts *o, const char *usage)
{
    int rc = plan_word_option(argc, argv, at, o, usage);
    if (!rc) rc = cli_bytes_option(argc, argv, at, "--kv-cache-memory", &o->kv_cache_memory, usage);
    if (!rc) rc = cli_bytes_option(argc, argv, at, "--staging-bytes", &o->staging_bytes, usage);
    if (!rc) rc = cli_dtype_option(argc, argv, at, &o->weight_dtype, &o->quant_dtype, usage);
    if (!rc) rc = cli_threads_option(argc, argv, at, &o->n_threads, usage);
    if (!rc) rc = int32_option(argc, argv, at, "--max-num-seqs", 1 << 20, &o->max_num_seqs, usage);
    if (!rc)
        rc = int32_option(argc, argv, at, "--max-num-batched-tokens", 1 << 24,
                          &o->max_num_batched_tokens, usage);
    if (!rc) rc = int32_option(argc, argv, at, "--block-size", 1024, &o->block_size, usage);
    return rc;
}

int cli_spec_option(int argc, char **argv, int *at, snug_spec_opts *o, const char *usage)
{
    int64_t x = 0;
    int rc = 0;
    const char *v;
    if (strcmp(argv[*at], "--prompt-lookup") == 0) {
        o->prompt_lookup = true;
        return 1;
    }
    int i = *at;
    if ((v = cli_option(argc, argv, &i, "--draft-model")) || (v = cli_option(argc, argv, &i, "--model-draft")) ||
        (v = cli_option(argc, argv, &i, "-md"))) {
        o->draft_model = v;
        *at = i;
        return 1;
    }
    if ((rc = cli_int_option(argc, argv, at, "--num-speculative-tokens", 1, SNUG_SPEC_TOKENS_MAX, &x, usage)) ||
        (rc = cli_int_option(argc, argv, at, "--draft-max", 1, SNUG_SPEC_TOKENS_MAX, &x, usage))) {
        if (rc == 1) o->n_tokens = (int32_t)x;
    } else if ((rc = cli_int_option(argc, argv, at, "--draft-min", 0, SNUG_SPEC_TOKENS_MAX, &x, usage))) {
        if (rc == 1) o->n_min = (int32_t)x;
    } else if ((rc = cli_int_option(argc, argv, at, "--prompt-lookup-min", 1, SNUG_SPEC_LOOKUP_MAX, &x, usage))) {
        if (rc == 1) o->lookup_min = (int32_t)x;
    } else if ((rc = cli_int_option(argc, argv, at, "--prompt-lookup-max", 1, SNUG_SPEC_LOOKUP_MAX, &x, usage))) {
        if (rc == 1) o->lookup_max = (int32_t)x;
    }
    return rc;
}

int cli_plan_check(const snug_planner_opts *o, const char *usage)
{
    if (o->budget.memory_bytes && o->budget.fraction)
        return cli_usage(usage, "--memory and --memory-fraction: give one");
    return 0;
}

int cli_tp_option(int argc, char **argv, int *at, cli_tp *t, const char *usage)
{
    const char *v;
    int64_t x;
    char *end;
    int i = *at;
    if ((v = cli_option(argc, argv, &i, "--tp")) ||
        (v = cli_option(argc, argv, &i, "--tensor-parallel-size"))) {
        if (!cli_parse_int(v, 1, 64, &x))
            return cli_usage(usage, "--tp expects 1 to 64, got '%s'", v);
        t->tp = (int32_t)x;
    } else if ((v = cli_option(argc, argv, &i, "--step-timeout"))) {
        double f = strtod(v, &end);
        if (end == v || *end || !(f > 0 && f <= 86400))
            return cli_usage(usage, "--step-timeout expects seconds in (0, 86400], got '%s'", v);
        t->step_timeout = f;
    } else {
        return 0;
    }
    *at = i;
    return 1;
}

int cli_planning_option(int argc, char **argv, int *at, snug_planner_opts *o, cli_tp *t,
                        const char *usage)
{
    int rc = cli_plan_option(argc, argv, at, o, usage);
    return rc ? rc : cli_tp_option(argc, argv, at, t, usage);
}

snug_status cli_tp_open(const cli_tp *t, snug_comm **out, snug_error *err)
{
    *out = NULL;
    int32_t world = 1;
    snug_comm_world(&world, NULL);
    int32_t tp = t->tp > 0 ? t->tp : 1;
    if (tp == 1 && world == 1) return SNUG_OK;
    return snug_comm_open(tp, t->step_timeout > 0 ? t->step_timeout : SNUG_STEP_TIMEOUT_DEFAULT,
                          out, err);
}

int32_t cli_rank(const snug_comm *c) { return c ? snug_comm_rank(c) : 0; }

int cli_tp_end(snug_comm *c, int rc, bool stranded)
{
    if (c && snug_comm_size(c) > 1 && (stranded || snug_comm_broken(c))) {
        if (snug_comm_rank(c) != 0) {
            struct timespec ts = {FOLLOWER_GRACE_SECONDS, 0};
            nanosleep(&ts, NULL);
        }
        snug_comm_abort(rc ? rc : 1);
    }
    snug_comm_close(c);
    return rc;
}

int cli_fail_once(const snug_comm *c, const snug_error *err)
{
    int32_t rank = 0;
    snug_comm_world(NULL, &rank);
    if ((c ? snug_comm_rank(c) : rank) == 0 || (c && snug_comm_broken(c))) cli_fail(err);
    return 1;
}
