/*
 * tok_native.c: what the readers of native tokenizer files share: piece
 * types, messages, and the finishing step (configs, bos/eos text, unique
 * end-of-sequence ids), and the one way every one-file format is parsed or
 * read around its own build function.
 */
#include "tok_internal.h"

#include "base/mem.h"
#include "base/fileio.h"

#include <stdio.h>
#include <string.h>

snug_status tok_bad(snug_error *err, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    snug_status st = snug_verrorf_at(err, SNUG_FORMAT, path, fmt, ap);
    va_end(ap);
    return st;
}

snug_status tok_named(snug_error *err, snug_status st, const char *name)
{
    if (st != SNUG_OK && err && !strstr(err->msg, name)) snug_error_prefix(err, st, "%s: ", name);
    return st;
}

tok_attr tok_piece_attr(int type)
{
    switch (type) {
    case TOK_PIECE_NORMAL:
    case TOK_PIECE_USER_DEFINED: return TOK_NORMAL;
    case TOK_PIECE_UNKNOWN: return TOK_UNKNOWN;
    case TOK_PIECE_CONTROL:
    case TOK_PIECE_UNUSED: return TOK_SPECIAL;
    case TOK_PIECE_BYTE: return TOK_BYTE;
    default: return TOK_UNUSED;
    }
}

snug_status tok_add_piece_tokens(snug_tokenizer *t, const uint8_t *types, snug_error *err)
{
    for (int32_t id = 0; id < t->n_vocab; id++) {
        bool special = types[id] == TOK_PIECE_CONTROL || types[id] == TOK_PIECE_UNKNOWN;
        if (!special && types[id] != TOK_PIECE_USER_DEFINED) continue;
        if (t->entries[id].len == 0) continue; /* nothing to match */
        snug_status st = tok_add_added(t, id, special, false, false, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

void tok_dir_of(const char *path, char *dir, size_t size)
{
    snprintf(dir, size, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, size, ".");
}

/* Copies token id's text into *dst (a NUL-terminated string). */
static snug_status token_string(const snug_tokenizer *t, int32_t id, char **dst, snug_error *err)
{
    char buf[1024];
    size_t n;
    const char *s = tok_text(t, id, &n);
    snprintf(buf, sizeof buf, "%.*s", (int)SNUG_MIN(n, sizeof buf - 1), s);
    return tok_set_string(dst, buf, err);
}

snug_status tok_native_finish(snug_tokenizer *t, const char *dir, snug_error *err)
{
    snug_status st = dir ? tok_read_configs(t, dir, err) : SNUG_OK;
    if (st == SNUG_OK) st = tok_finish(t, err); /* checks the ids first */
    if (st == SNUG_OK && !t->bos_text && t->bos >= 0) st = token_string(t, t->bos, &t->bos_text, err);
    if (st == SNUG_OK && !t->eos_text && t->eos >= 0) st = token_string(t, t->eos, &t->eos_text, err);
    int32_t n = 0; /* generation_config.json may repeat ids the reader knew */
    for (int32_t i = 0; st == SNUG_OK && i < t->n_eos_ids; i++) {
        bool seen = false;
        for (int32_t k = 0; k < n; k++) seen |= t->eos_ids[k] == t->eos_ids[i];
        if (!seen) t->eos_ids[n++] = t->eos_ids[i];
    }
    if (st == SNUG_OK) t->n_eos_ids = n;
    return st;
}

/* Builds from bytes and finishes with the configs of dir (NULL: none); on
 * failure frees what was built and names `name` in the message. */
static snug_status build_and_finish(tok_build_fn build, const char *name, const uint8_t *data,
                                    size_t len, const char *dir, snug_tokenizer **out,
                                    snug_error *err)
{
    snug_tokenizer *t = NULL;
    snug_status st = build(name, data, len, &t, err);
    if (st == SNUG_OK) st = tok_native_finish(t, dir, err);
    if (st != SNUG_OK) {
        snug_tokenizer_free(t);
        return tok_named(err, st, name);
    }
    *out = t;
    return SNUG_OK;
}

snug_status tok_native_parse(tok_build_fn build, const char *name, const uint8_t *data, size_t len,
                             snug_tokenizer **out, snug_error *err)
{
    return build_and_finish(build, name, data, len, NULL, out, err);
}

snug_status tok_native_read(tok_build_fn build, const char *path, snug_tokenizer **out,
                            snug_error *err)
{
    char *data = NULL, dir[4096];
    size_t len = 0;
    snug_status st = snug_file_read_all(path, TOK_NATIVE_MAX_BYTES, &data, &len, err);
    if (st != SNUG_OK) return tok_named(err, st, path);
    tok_dir_of(path, dir, sizeof dir);
    st = build_and_finish(build, path, (const uint8_t *)data, len, dir, out, err);
    snug_mem_free(data);
    return st;
}
