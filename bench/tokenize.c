/*
 * tokenize.c: encode throughput of each tokenizer family, one thread, on
 * 1 MB of mixed text (the fixture strings: 83 multilingual inputs in many
 * scripts, llama.cpp's edge cases, two long English texts, repeated in a
 * fixed order until 1 MB).
 *
 * For each tokenizer given (a model directory or a tokenizer file) it
 * reports MB of input per second (the best of 5 runs) and the ratio of that
 * to a limit measured in the same run on the same input: the GPT-2
 * pre-split regex alone (PCRE2, JIT), which every byte-level encode runs
 * before any merge. A ratio of 0.5 means encoding costs twice the regex.
 *   build/bench/tokenize NAME=PATH...
 * Not part of make test; bench/tokenize runs it on every family.
 */
#include "base/mem.h"
#include "base/fileio.h"
#include "base/json.h"
#include "tokenizer/regex.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TARGET = 1 << 20, RUNS = 5 };

static const char *const LONG_TEXTS[] = {"tests/data/tokenizer/hf/llama_encoded.json",
                                         "tests/data/tokenizer/hf/gpt2_encoded_tokens.json"};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Appends s and a newline to buf while it is under TARGET. */
static void add(char *buf, size_t *n, const char *s, size_t len)
{
    if (*n + len + 1 > TARGET) len = TARGET - 1 - *n;
    memcpy(buf + *n, s, len);
    *n += len;
    buf[(*n)++] = '\n';
}

/* Fills buf with TARGET bytes of fixture text; *n gets the length. */
static snug_status build_input(char *buf, size_t *n, snug_error *err)
{
    char *inp = NULL;
    size_t inp_len = 0;
    json_t *list = NULL, *longs[2] = {NULL, NULL};
    snug_status st = snug_json_load_file_opts("tests/data/tokenizer/hf/multilingual_inputs.json", 1 << 24,
                                              SNUG_JSON_ANY_VALUE, &list, err);
    if (st == SNUG_OK)
        st = snug_file_read_all("tests/data/tokenizer/ggml-vocab-llama-spm.gguf.inp", 1 << 24, &inp, &inp_len, err);
    for (int k = 0; k < 2 && st == SNUG_OK; k++) st = snug_json_load_file(LONG_TEXTS[k], 1 << 24, &longs[k], err);
    if (st == SNUG_OK && (!json_is_array(list) || json_array_size(list) == 0))
        st = snug_errorf(err, SNUG_FORMAT, "multilingual_inputs.json: expected a list of {\"text\"}");
    *n = 0;
    while (st == SNUG_OK && *n + 1 < TARGET) {
        for (size_t i = 0; i < json_array_size(list) && *n + 1 < TARGET; i++) {
            const char *s = json_string_value(json_object_get(json_array_get(list, i), "text"));
            if (s) add(buf, n, s, strlen(s));
        }
        if (*n + 1 < TARGET) add(buf, n, inp, inp_len);
        for (int k = 0; k < 2 && *n + 1 < TARGET; k++) {
            const char *s = json_string_value(json_object_get(longs[k], "text"));
            if (s) add(buf, n, s, strlen(s));
        }
    }
    json_decref(list);
    json_decref(longs[0]);
    json_decref(longs[1]);
    snug_mem_free(inp);
    return st;
}

/* Best time of RUNS passes of a pre-split regex over the input (every
 * match found, as an encode does); negative on failure. */
static double time_regex(const char *pattern, const char *input, size_t n, snug_error *err)
{
    snug_regex *re = NULL;
    snug_regex_matcher *m = NULL;
    double best = -1;
    if (snug_regex_compile(pattern, &re, err) != SNUG_OK || snug_regex_matcher_create(re, &m, err) != SNUG_OK)
        goto done;
    for (int r = 0; r < RUNS; r++) {
        size_t at = 0, b, e, pieces = 0;
        double t0 = now();
        int rc;
        while ((rc = snug_regex_find(re, m, input, n, at, &b, &e)) == 1) {
            pieces++;
            at = e > b ? e : b + 1;
        }
        double t = now() - t0;
        if (rc < 0 || pieces == 0) {
            snug_errorf(err, SNUG_INVALID, "regex pass failed (%d)", rc);
            best = -1;
            goto done;
        }
        if (best < 0 || t < best) best = t;
    }
done:
    snug_regex_matcher_free(m);
    snug_regex_free(re);
    return best;
}

/* Best time of RUNS encodes of the input with the tokenizer at path;
 * negative on failure. */
static double time_encode(const char *path, const char *input, size_t n, size_t *n_ids, snug_error *err)
{
    snug_tokenizer *tok = NULL;
    snug_tok_encoder *enc = NULL;
    double best = -1;
    if (snug_tokenizer_load(path, &tok, err) != SNUG_OK || snug_tok_encoder_create(tok, &enc, err) != SNUG_OK)
        goto done;
    for (int r = 0; r < RUNS; r++) {
        snug_tok_encode_opts o = {.add_special = false};
        const int32_t *ids;
        double t0 = now();
        if (snug_tok_encode(enc, input, n, &o, &ids, n_ids, err) != SNUG_OK) {
            best = -1;
            goto done;
        }
        double t = now() - t0;
        if (best < 0 || t < best) best = t;
    }
done:
    snug_tok_encoder_free(enc);
    snug_tokenizer_free(tok);
    return best;
}

int main(int argc, char **argv)
{
    static char input[TARGET];
    size_t n = 0;
    snug_error err = {0};
    snug_json_init();
    if (build_input(input, &n, &err) != SNUG_OK) {
        fprintf(stderr, "bench/tokenize: %s (run from the repository root)\n", err.msg);
        return 1;
    }
    double t_regex = time_regex(TOK_REGEX_GPT2, input, n, &err);
    if (t_regex < 0) {
        fprintf(stderr, "bench/tokenize: GPT-2 regex: %s\n", err.msg);
        return 1;
    }
    double limit = (double)n / t_regex / 1e6;
    printf("input: %zu bytes of mixed text; one thread; best of %d runs\n", n, RUNS);
    printf("limit: GPT-2 pre-split regex alone %.2f MB/s\n\n", limit);
    printf("%-14s %10s %12s %10s %12s\n", "tokenizer", "MB/s", "/ regex", "tokens", "bytes/token");
    int failed = 0;
    for (int a = 1; a < argc; a++) {
        const char *eq = strchr(argv[a], '=');
        const char *path = eq ? eq + 1 : argv[a];
        int name_len = eq ? (int)(eq - argv[a]) : (int)strlen(argv[a]);
        size_t n_ids = 0;
        double t = time_encode(path, input, n, &n_ids, &err);
        if (t < 0) {
            printf("%-14.*s %s\n", name_len, argv[a], err.msg);
            failed = 1;
            continue;
        }
        double mbs = (double)n / t / 1e6;
        printf("%-14.*s %10.2f %12.3f %10zu %12.2f\n", name_len, argv[a], mbs, mbs / limit, n_ids,
               (double)n / (double)n_ids);
    }
    return failed;
}
