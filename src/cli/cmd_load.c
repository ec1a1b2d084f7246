/*
 * cmd_load.c: `snug load DIR [--tp N] [--rank R | --all-ranks] [--dtype D]
 * [--staging-bytes B] [--threads T] [--json]`: loads one rank's weights (or
 * every rank's in turn, freeing between) in this process and reports what
 * the load took.
 */
#include "formats/checkpoint.h"
#include "cli.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/json.h"
#include "base/sysinfo.h"
#include "model/loader.h"

#include <stdio.h>
#include <string.h>

static const char g_usage[] =
    "snug load DIR [--tp N] [--rank R | --all-ranks] [--dtype " CLI_DTYPES "] "
    "[--staging-bytes BYTES] [--threads T] [--json]";

static void print_row(const snug_load_opts *o, const snug_load_stats *s, bool as_json)
{
    double w = (double)s->weight_bytes;
    double gbps = s->seconds > 0 ? w / s->seconds / 1e9 : 0;
    if (as_json) {
        snug_json_init();
        json_t *j = json_pack("{s:i, s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f}",
                              "rank", o->rank, "tp", o->tp, "dtype", snug_dtype_torch_name(o->dtype),
                              "weight_bytes", (json_int_t)s->weight_bytes,
                              "weights_held", (json_int_t)s->weights_held,
                              "load_peak_bytes", (json_int_t)s->load_peak_bytes,
                              "staging_bytes", (json_int_t)s->staging_bytes,
                              "staging_held", (json_int_t)s->staging_held,
                              "pack_bytes", (json_int_t)s->pack_bytes,
                              "pack_held", (json_int_t)s->pack_held,
                              "hwm_growth_bytes", (json_int_t)s->hwm_growth_bytes,
                              "bytes_read", (json_int_t)s->bytes_read, "seconds", s->seconds,
                              "gb_per_s", gbps);
        char *text = j ? snug_json_dumps(j, false) : NULL;
        json_decref(j);
        if (text) puts(text);
        snug_mem_free(text);
        return;
    }
    char a[32], peak[48], hwm[48], read[48], b[32], stage[32];
    snprintf(peak, sizeof peak, "%s (%.4f)", snug_fmt_bytes(s->load_peak_bytes, b),
             (double)s->load_peak_bytes / w);
    if (s->hwm_growth_bytes >= 0)
        snprintf(hwm, sizeof hwm, "%s (%.4f)", snug_fmt_bytes((size_t)s->hwm_growth_bytes, b),
                 (double)s->hwm_growth_bytes / w);
    else
        snprintf(hwm, sizeof hwm, "unknown");
    snprintf(read, sizeof read, "%s (%.4f)", snug_fmt_bytes(s->bytes_read, b),
             (double)s->bytes_read / w);
    printf("  %-5d %15s %21s %13s %21s %21s %8.3f %7.2f\n", o->rank,
           snug_fmt_int((int64_t)s->weight_bytes, a), peak,
           snug_fmt_int((int64_t)s->staging_bytes, stage), hwm, read, s->seconds, gbps);
    fflush(stdout);
}

int snug_cmd_load(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    const char *dir = NULL;
    snug_load_opts o = {.tp = 1, .rank = 0};
    bool all = false, as_json = false, rank_given = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int64_t x;
        /* the plan's options that a load takes */
        int rc = cli_dtype_option(argc, argv, &i, &o.dtype, &o.quant, g_usage);
        if (!rc) rc = cli_bytes_option(argc, argv, &i, "--staging-bytes", &o.staging_bytes, g_usage);
        if (!rc) rc = cli_threads_option(argc, argv, &i, &o.n_threads, g_usage);
        if (rc > 1) return rc;
        if (rc == 1) {
            continue;
        } else if ((v = cli_option(argc, argv, &i, "--tp"))) {
            if (!cli_parse_int(v, 1, 4096, &x))
                return cli_usage(g_usage, "--tp expects an integer from 1 to 4096, got '%s'", v);
            o.tp = (int32_t)x;
        } else if ((v = cli_option(argc, argv, &i, "--rank"))) {
            if (!cli_parse_int(v, 0, 4095, &x))
                return cli_usage(g_usage, "--rank expects an integer from 0, got '%s'", v);
            o.rank = (int32_t)x;
            rank_given = true;
        } else if (strcmp(argv[i], "--all-ranks") == 0) {
            all = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (argv[i][0] == '-') {
            return cli_unknown_option(g_usage, NULL, argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            return cli_usage(g_usage, "more than one model directory given");
        }
    }
    if (!dir) return cli_usage(g_usage, "no model directory given");
    if (all && rank_given) return cli_usage(g_usage, "--rank and --all-ranks exclude each other");
    if (o.rank >= o.tp)
        return cli_usage(g_usage, "--rank %d is not below --tp %d", o.rank, o.tp);

    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    if (snug_checkpoint_open(dir, &ck, &err) != SNUG_OK) return cli_fail(&err);
    if (o.dtype == SNUG_DTYPE_NONE) o.dtype = snug_checkpoint_weight_dtype(ck);
    if (o.n_threads <= 0) o.n_threads = snug_cpu_count();
    if (!as_json) {
        char b[32];
        printf("snug load %s: tp %d, as %s, %d threads, staging at most %s\n", dir, o.tp,
               snug_dtype_torch_name(o.dtype), o.n_threads,
               snug_fmt_bytes(o.staging_bytes ? o.staging_bytes : SNUG_LOAD_STAGING_BYTES, b));
        printf("  %-5s %15s %21s %13s %21s %21s %8s %7s\n", "rank", "weight bytes",
               "load peak (/weights)", "staging bytes", "hwm growth (/weights)",
               "bytes read (/weights)", "seconds", "GB/s");
    }
    int rc = 0;
    int32_t first = all ? 0 : o.rank, last = all ? o.tp - 1 : o.rank;
    for (int32_t r = first; r <= last && rc == 0; r++) {
        snug_load_opts ro = o;
        ro.rank = r;
        snug_weights *w = NULL;
        snug_load_stats s;
        if (snug_weights_load(ck, &ro, &w, &s, &err) != SNUG_OK) {
            rc = cli_fail(&err);
            break;
        }
        print_row(&ro, &s, as_json);
        snug_weights_free(w);
    }
    snug_checkpoint_close(ck);
    return rc;
}
