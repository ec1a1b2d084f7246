/*
 * cmd_convert.c: `snug convert llama2c MODEL.bin OUTDIR` and
 * `snug convert gguf MODEL.gguf OUTDIR`.
 */
#include "cli.h"
#include "convert.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char g_usage[] = "snug convert llama2c|gguf INPUT OUTDIR";

int snug_cmd_convert(int argc, char **argv)
{
    if (argc != 4) return cli_usage(g_usage, "expected a format, an input file and an output directory");
    const char *format = argv[1], *in = argv[2], *outdir = argv[3];
    snug_status (*fn)(const char *, const char *, snug_error *);
    if (strcmp(format, "llama2c") == 0)
        fn = snug_convert_llama2c;
    else if (strcmp(format, "gguf") == 0)
        fn = snug_convert_gguf;
    else
        return cli_usage(g_usage, "unknown format '%s' (llama2c or gguf)", format);
    snug_error err = {0};
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST) {
        snug_errorf(&err, SNUG_IO, "%s: cannot create: %s", outdir, strerror(errno));
        return cli_fail(&err);
    }
    if (fn(in, outdir, &err) != SNUG_OK) return cli_fail(&err);
    fprintf(stderr, "converted %s to %s\n", in, outdir);
    return 0;
}
