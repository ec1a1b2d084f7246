/*
 * cmd_convert.c: imports as Hugging Face model directories, and the export
 * of one as GGUF:
 *   snug convert llama2c MODEL.bin OUTDIR [--tokenizer TOKENIZER.bin]
 *   snug convert gguf MODEL.gguf OUTDIR       (its vocabulary too, when it has one)
 *   snug convert tokenizer PATH OUTDIR        (any tokenizer snug reads -> tokenizer.json)
 *   snug convert to-gguf DIR OUT.gguf         (the model as llama.cpp names it, with its vocabulary)
 */
#include "cli.h"
#include "convert/convert.h"
#include "convert/to_gguf.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char g_usage[] =
    "snug convert llama2c MODEL.bin OUTDIR [--tokenizer TOKENIZER.bin] | "
    "snug convert gguf MODEL.gguf OUTDIR | snug convert tokenizer PATH OUTDIR | snug convert to-gguf DIR OUT.gguf";

/* Loads the tokenizer at path and writes it into outdir as tokenizer.json. */
static snug_status write_tokenizer(const char *path, const char *outdir, snug_error *err)
{
    snug_tokenizer *tok = NULL;
    snug_status st = snug_tokenizer_load(path, &tok, err);
    if (st == SNUG_OK) st = snug_tokenizer_write_json(tok, outdir, err);
    snug_tokenizer_free(tok);
    return st;
}

/* True when a GGUF file carries a vocabulary. */
static bool gguf_has_vocab(const char *path)
{
    snug_gguf_file *g = NULL;
    bool has = snug_gguf_open(path, &g, NULL) == SNUG_OK && snug_gguf_find(g, "tokenizer.ggml.tokens");
    snug_gguf_close(g);
    return has;
}

int snug_cmd_convert(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    const char *format = NULL, *in = NULL, *outdir = NULL, *tokenizer = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = cli_option(argc, argv, &i, "--tokenizer")))
            tokenizer = v;
        else if (argv[i][0] == '-')
            return cli_unknown_option(g_usage, NULL, argv[i]);
        else if (!format)
            format = argv[i];
        else if (!in)
            in = argv[i];
        else if (!outdir)
            outdir = argv[i];
        else
            return cli_usage(g_usage, "too many arguments");
    }
    if (!outdir) return cli_usage(g_usage, "expected a format, an input and an output directory");
    bool llama2c = strcmp(format, "llama2c") == 0, gguf = strcmp(format, "gguf") == 0;
    bool tok_only = strcmp(format, "tokenizer") == 0, to_gguf = strcmp(format, "to-gguf") == 0;
    if (!llama2c && !gguf && !tok_only && !to_gguf)
        return cli_usage(g_usage, "unknown format '%s' (llama2c, gguf, tokenizer or to-gguf)", format);
    if (tokenizer && !llama2c) return cli_usage(g_usage, "--tokenizer goes with llama2c");
    snug_error err = {0};
    if (to_gguf) {
        snug_to_gguf_info info;
        if (snug_convert_to_gguf(in, outdir, &info, &err) != SNUG_OK) return cli_fail(&err);
        if (info.vocab) fprintf(stderr, "converted %s to %s, with its vocabulary\n", in, outdir);
        else fprintf(stderr, "converted %s to %s, without a vocabulary (%s)\n", in, outdir, info.why_not);
        return 0;
    }
    if (mkdir(outdir, 0755) != 0 && errno != EEXIST) {
        snug_errorf(&err, SNUG_IO, "%s: cannot create: %s", outdir, strerror(errno));
        return cli_fail(&err);
    }
    snug_status st = SNUG_OK;
    if (llama2c) st = snug_convert_llama2c(in, outdir, &err);
    if (gguf) st = snug_convert_gguf(in, outdir, &err);
    if (st == SNUG_OK && (tokenizer || tok_only || (gguf && gguf_has_vocab(in))))
        st = write_tokenizer(tokenizer ? tokenizer : in, outdir, &err);
    if (st != SNUG_OK) return cli_fail(&err);
    fprintf(stderr, "converted %s to %s\n", in, outdir);
    return 0;
}
