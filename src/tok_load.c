/*
 * tok_load.c: finding a tokenizer in a model directory or a file, and
 * choosing the reader for its format.
 */
#include "tok_internal.h"

#include "fileio.h"

#include <string.h>

snug_status snug_tokenizer_load(const char *path, snug_tokenizer **out, snug_error *err)
{
    char p[4096];
    if (snug_file_exists(path)) return tok_read_json(path, out, err);
    snug_status st = snug_path_join(p, sizeof p, path, "tokenizer.json", err);
    if (st != SNUG_OK) return st;
    if (snug_file_exists(p)) return tok_read_json(p, out, err);
    return snug_errorf(err, SNUG_IO, "%s: no tokenizer found (looked for tokenizer.json)", path);
}
