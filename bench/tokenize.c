/*
 * tokenize.c: encode throughput of each tokenizer family, one thread, on
 * 1 MB of mixed text (the fixture strings: 83 multilingual inputs in many
 * scripts, llama.cpp's edge cases, two long texts, repeated in a fixed
 * order until 1 MB). Reports MB of input per second, the best of 5 runs,
 * for each tokenizer given (a model directory or a tokenizer file).
 *   build/bench/tokenize NAME=PATH...
 * Not part of make test; bench/tokenize runs it on every family.
 */
#include "device.h"
#include "fileio.h"
#include "json.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TARGET = 1 << 20 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Appends s to buf while it is under TARGET. */
static void add(char *buf, size_t *n, const char *s, size_t len)
{
    if (*n + len + 1 > TARGET) len = TARGET - 1 - *n;
    memcpy(buf + *n, s, len);
    *n += len;
    buf[(*n)++] = '\n';
}

static size_t build_input(char *buf)
{
    size_t n = 0;
    char *text = NULL, *inp = NULL;
    size_t len = 0, inp_len = 0;
    snug_error err = {0};
    json_error_t jerr;
    if (snug_file_read_all("tests/data/tokenizer/hf/multilingual_inputs.json", 1 << 24, &text, &len, &err) != SNUG_OK ||
        snug_file_read_all("tests/data/tokenizer/ggml-vocab-llama-spm.gguf.inp", 1 << 24, &inp, &inp_len, &err) != SNUG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    snug_json_init();
    json_t *list = json_loadb(text, len, 0, &jerr);
    json_t *longs[2];
    snug_json_load_file("tests/data/tokenizer/hf/llama_encoded.json", 1 << 24, &longs[0], &err);
    snug_json_load_file("tests/data/tokenizer/hf/gpt2_encoded_tokens.json", 1 << 24, &longs[1], &err);
    while (n + 1 < TARGET) {
        for (size_t i = 0; i < json_array_size(list) && n + 1 < TARGET; i++) {
            const char *s = json_string_value(json_object_get(json_array_get(list, i), "text"));
            add(buf, &n, s, strlen(s));
        }
        if (n + 1 < TARGET) add(buf, &n, inp, inp_len);
        for (int k = 0; k < 2 && n + 1 < TARGET; k++) {
            const char *s = json_string_value(json_object_get(longs[k], "text"));
            add(buf, &n, s, strlen(s));
        }
    }
    json_decref(list);
    json_decref(longs[0]);
    json_decref(longs[1]);
    snug_mem_free(text);
    snug_mem_free(inp);
    return n;
}

int main(int argc, char **argv)
{
    static char input[TARGET];
    size_t n = build_input(input);
    printf("input: %zu bytes of mixed text\n", n);
    for (int a = 1; a < argc; a++) {
        char name[64];
        const char *eq = strchr(argv[a], '=');
        const char *path = eq ? eq + 1 : argv[a];
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - argv[a]) : 20, argv[a]);
        snug_error err = {0};
        snug_tokenizer *tok = NULL;
        snug_tok_encoder *enc = NULL;
        if (snug_tokenizer_load(path, &tok, &err) != SNUG_OK || snug_tok_encoder_create(tok, &enc, &err) != SNUG_OK) {
            printf("%-14s %s\n", name, err.msg);
            snug_tokenizer_free(tok);
            continue;
        }
        double best = 1e30;
        size_t n_ids = 0;
        for (int r = 0; r < 5; r++) {
            snug_tok_encode_opts o = {.add_special = false};
            const int32_t *ids;
            double t0 = now();
            if (snug_tok_encode(enc, input, n, &o, &ids, &n_ids, &err) != SNUG_OK) {
                printf("%-14s %s\n", name, err.msg);
                break;
            }
            best = SNUG_MIN(best, now() - t0);
        }
        printf("%-14s %8.2f MB/s  (%zu tokens, %.1f bytes per token)\n", name, (double)n / best / 1e6,
               n_ids, (double)n / (double)n_ids);
        snug_tok_encoder_free(enc);
        snug_tokenizer_free(tok);
    }
    return 0;
}
