/*
 * cmd_tokenize.c: `snug tokenize PATH [--file F | TEXT] [--no-bos] [--special]`
 * and `snug detokenize PATH IDS...`.
 */
#include "cli.h"
#include "base/mem.h"
#include "base/fileio.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <string.h>

static const char g_tok_usage[] = "snug tokenize PATH [--file F | TEXT] [--no-bos] [--special]";
static const char g_detok_usage[] = "snug detokenize PATH [--skip-special] IDS...";

enum { TEXT_MAX_BYTES = 256 << 20 };

int snug_cmd_tokenize(int argc, char **argv)
{
    if (cli_help(argc, argv, g_tok_usage)) return 0;
    const char *path = NULL, *text = NULL, *file = NULL;
    snug_tok_encode_opts opts = {.add_special = true};
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = cli_option(argc, argv, &i, "--file"))) {
            file = v;
        } else if (strcmp(argv[i], "--no-bos") == 0) {
            opts.add_special = false;
        } else if (strcmp(argv[i], "--special") == 0) {
            opts.parse_special = true;
        } else if (argv[i][0] == '-' && argv[i][1] == '-' && !(path && text == NULL && argv[i][2] == '\0')) {
            return cli_unknown_option(g_tok_usage, NULL, argv[i]);
        } else if (!path) {
            path = argv[i];
        } else if (!text) {
            text = argv[i];
        } else {
            return cli_usage(g_tok_usage, "more than one text given (quote it)");
        }
    }
    if (!path) return cli_usage(g_tok_usage, "no tokenizer path given");
    if (!!text == !!file) return cli_usage(g_tok_usage, "give either a text or --file");
    snug_error err = {0};
    snug_tokenizer *tok = NULL;
    snug_tok_encoder *enc = NULL;
    char *data = NULL;
    size_t len = text ? strlen(text) : 0;
    int rc = 1;
    if (file && snug_file_read_all(file, TEXT_MAX_BYTES, &data, &len, &err) != SNUG_OK) goto done;
    if (snug_tokenizer_load(path, &tok, &err) != SNUG_OK) goto done;
    if (snug_tok_encoder_create(tok, &enc, &err) != SNUG_OK) goto done;
    const int32_t *ids;
    size_t n;
    if (snug_tok_encode(enc, file ? data : text, len, &opts, &ids, &n, &err) != SNUG_OK) goto done;
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    rc = 0;
done:
    if (rc) cli_fail(&err);
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    snug_mem_free(data);
    return rc;
}

int snug_cmd_detokenize(int argc, char **argv)
{
    if (cli_help(argc, argv, g_detok_usage)) return 0;
    const char *path = NULL;
    bool skip = false;
    int first = 0;
    for (int i = 1; i < argc && !first; i++) {
        if (strcmp(argv[i], "--skip-special") == 0)
            skip = true;
        else if (strncmp(argv[i], "--", 2) == 0) /* ids are never negative */
            return cli_unknown_option(g_detok_usage, NULL, argv[i]);
        else if (!path)
            path = argv[i];
        else
            first = i;
    }
    if (!path || !first) return cli_usage(g_detok_usage, "give a tokenizer path and ids");
    snug_error err = {0};
    snug_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    char *out = NULL;
    size_t n = (size_t)(argc - first), len = 0;
    int rc = 1;
    if (snug_tokenizer_load(path, &tok, &err) != SNUG_OK) goto done;
    ids = snug_mem_alloc(SNUG_MEM_OTHER, n * sizeof *ids, &err);
    if (!ids) goto done;
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        if (!cli_parse_int(argv[first + (int)i], 0, INT32_MAX, &v)) {
            rc = cli_usage(g_detok_usage, "'%s' is not a token id", argv[first + (int)i]);
            goto done;
        }
        ids[i] = (int32_t)v;
    }
    if (snug_tok_decode(tok, ids, n, skip, &out, &len, &err) != SNUG_OK) goto done;
    fwrite(out, 1, len, stdout);
    printf("\n");
    rc = 0;
done:
    if (rc == 1) cli_fail(&err);
    snug_mem_free(out);
    snug_mem_free(ids);
    snug_tokenizer_free(tok);
    return rc;
}
