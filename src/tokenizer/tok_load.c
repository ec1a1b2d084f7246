/*
 * tok_load.c: finding a tokenizer in a model directory or a file, and
 * choosing the reader for its format.
 *
 * A directory is searched in this order: tokenizer.json; tokenizer.model
 * (SentencePiece or tiktoken, told apart by content); vocab.json +
 * merges.txt; encoder.json + vocab.bpe; tokenizer.bin (llama2.c). A file is
 * read by its name and first bytes: a GGUF file by its magic; vocab.json,
 * encoder.json, merges.txt and vocab.bpe with their partner beside them; a
 * .bin file as llama2.c's; a JSON object as tokenizer.json; "base64 rank"
 * lines as tiktoken; anything else starting like a protobuf as SentencePiece.
 */
#include "tok_internal.h"

#include "base/fileio.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HEAD_BYTES = 8192 };

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Reads up to HEAD_BYTES of the file's start into head. */
static snug_status read_head(const char *path, uint8_t *head, size_t *n, snug_error *err)
{
    int fd;
    uint64_t size;
    snug_status st = snug_file_open_read(path, &fd, &size, err);
    if (st != SNUG_OK) return st;
    *n = (size_t)SNUG_MIN(size, (uint64_t)HEAD_BYTES);
    st = snug_pread_full(fd, head, *n, 0, path, err);
    close(fd);
    return st;
}

/* vocab.json + merges.txt (or encoder.json + vocab.bpe) given either one:
 * the partner is the file of the other name in the same directory. */
static snug_status read_pair(const char *path, const char *vocab, const char *merges,
                             snug_tokenizer **out, snug_error *err)
{
    char dir[4096], v[4096], m[4096];
    tok_dir_of(path, dir, sizeof dir);
    snug_status st = snug_path_join(v, sizeof v, dir, vocab, err);
    if (st == SNUG_OK) st = snug_path_join(m, sizeof m, dir, merges, err);
    if (st != SNUG_OK) return st;
    const char *missing = !snug_file_exists(v) ? v : !snug_file_exists(m) ? m : NULL;
    if (missing)
        return snug_errorf(err, SNUG_IO, "%s: %s and %s go together, and %s is not there", path,
                           vocab, merges, missing);
    return tok_read_gpt2(v, m, out, err);
}

/* tokenizer.model: tiktoken text or a SentencePiece protobuf. */
static snug_status read_model_file(const char *path, const uint8_t *head, size_t n,
                                   snug_tokenizer **out, snug_error *err)
{
    if (tok_looks_like_tiktoken(head, n)) return tok_read_tiktoken(path, out, err);
    return tok_read_spm(path, out, err);
}

static snug_status read_file(const char *path, snug_tokenizer **out, snug_error *err)
{
    uint8_t head[HEAD_BYTES];
    size_t n = 0;
    snug_status st = read_head(path, head, &n, err);
    if (st != SNUG_OK) return st;
    const char *name = base_name(path);
    if (n >= 4 && memcmp(head, "GGUF", 4) == 0) return tok_read_gguf(path, out, err);
    if (strcmp(name, "vocab.json") == 0 || strcmp(name, "merges.txt") == 0)
        return read_pair(path, "vocab.json", "merges.txt", out, err);
    if (strcmp(name, "encoder.json") == 0 || strcmp(name, "vocab.bpe") == 0)
        return read_pair(path, "encoder.json", "vocab.bpe", out, err);
    if (ends_with(name, ".bin")) return tok_read_llama2c(path, out, err);
    size_t i = 0;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) i++;
    if (i < n && head[i] == '{') return tok_read_json(path, out, err);
    if (tok_looks_like_tiktoken(head, n) || (n > 0 && head[0] == 0x0A) || ends_with(name, ".model"))
        return read_model_file(path, head, n, out, err);
    return snug_errorf(err, SNUG_UNSUPPORTED, "%s: not a tokenizer file snug knows (tokenizer.json, "
                       "tokenizer.model, vocab.json with merges.txt, llama2.c .bin, GGUF)", path);
}

static snug_status read_dir(const char *dir, snug_tokenizer **out, snug_error *err)
{
    static const char *const singles[] = {"tokenizer.json", "tokenizer.model"};
    static const char *const pairs[][2] = {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}};
    char p[4096], q[4096];
    snug_status st;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(singles); i++) {
        st = snug_path_join(p, sizeof p, dir, singles[i], err);
        if (st != SNUG_OK) return st;
        if (snug_file_exists(p)) return read_file(p, out, err);
    }
    for (size_t i = 0; i < SNUG_ARRAY_LEN(pairs); i++) {
        st = snug_path_join(p, sizeof p, dir, pairs[i][0], err);
        if (st == SNUG_OK) st = snug_path_join(q, sizeof q, dir, pairs[i][1], err);
        if (st != SNUG_OK) return st;
        if (snug_file_exists(p) && snug_file_exists(q)) return tok_read_gpt2(p, q, out, err);
    }
    st = snug_path_join(p, sizeof p, dir, "tokenizer.bin", err);
    if (st != SNUG_OK) return st;
    if (snug_file_exists(p)) return tok_read_llama2c(p, out, err);
    return snug_errorf(err, SNUG_IO, "%s: no tokenizer found (looked for tokenizer.json, "
                       "tokenizer.model, vocab.json + merges.txt, encoder.json + vocab.bpe, "
                       "tokenizer.bin)", dir);
}

snug_status snug_tokenizer_load(const char *path, snug_tokenizer **out, snug_error *err)
{
    struct stat sb;
    snug_status st;
    if (snug_file_exists(path))
        st = read_file(path, out, err);
    else if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        st = read_dir(path, out, err);
    else
        st = snug_errorf(err, SNUG_IO, "%s: no such tokenizer file or model directory", path);
    return tok_named(err, st, path); /* the allocator's messages name no file */
}
