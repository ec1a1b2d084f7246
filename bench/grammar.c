/*
 * bench/grammar.c: what a token mask costs (grammar/tokmask.h) on a real
 * vocabulary, against checking every token's bytes one by one (the other
 * way to get the same mask) in the same run.
 *
 *   build/bench/grammar [TOKENIZER_DIR] [--states N]
 *
 * The tokenizer (default tests/data/tokenizers/llama3-tiktoken, 128,256
 * tokens) gives each token's bytes as they read mid-text; a JSON schema
 * (an object of a string, an integer and a list of strings) becomes a
 * grammar; a JSON text valid for it is tokenized and walked token by
 * token: at each state the trie walk's mask is timed (and must allow the
 * text's next token), and at every fourth state the token-by-token check
 * too (it must give the same mask), and the mask through a cache of 8
 * states (snug_tokmask_cache: a lookup, the walk on a miss). Prints the
 * trie's size and build time, each way's time per mask and their ratios.
 * Not a timed test.
 */
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/schema.h"
#include "grammar/tokmask.h"
#include "tokenizer/tokenizer.h"
#include "base/mem.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { STACKS = 32, DEPTH = 48 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what, const snug_error *err)
{
    fprintf(stderr, "bench/grammar: %s: %s\n", what, err->msg);
    exit(1);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 && argv[1][0] != '-' ? argv[1] : "tests/data/tokenizers/llama3-tiktoken";
    snug_error err = {0};
    snug_tokenizer *tok = NULL;
    if (snug_tokenizer_load(dir, &tok, &err) != SNUG_OK) die(dir, &err);
    int32_t n_vocab = snug_tokenizer_n_vocab(tok);
    size_t cap = 64 + snug_tokenizer_max_token_bytes(tok);

    /* each token's bytes as they read mid-text */
    char *buf = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_vocab * cap, &err);
    const uint8_t **texts = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_vocab * sizeof *texts, &err);
    int32_t *lens = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_vocab * sizeof *lens, &err);
    if (!buf || !texts || !lens) die("memory", &err);
    for (int32_t i = 0; i < n_vocab; i++) {
        char *at = buf + (size_t)i * cap;
        texts[i] = (const uint8_t *)at, lens[i] = (int32_t)snug_tokenizer_token_bytes(tok, i, at, cap);
    }
    double t0 = now();
    snug_vocab_trie *trie = NULL;
    if (snug_vocab_trie_build(texts, lens, n_vocab, &trie, &err) != SNUG_OK) die("trie", &err);
    double t_trie = now() - t0;

    const char *schema_text = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": "
                              "{\"type\": \"integer\"}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}},"
                              " \"required\": [\"name\", \"age\", \"tags\"]}";
    json_t *schema = NULL;
    snug_strbuf gbnf = {.err = &err};
    snug_grammar *g = NULL;
    if (snug_json_parse(schema_text, strlen(schema_text), "schema", &schema, &err) != SNUG_OK ||
        snug_schema_to_gbnf(schema, "schema", &gbnf, &err) != SNUG_OK ||
        snug_grammar_parse_gbnf(gbnf.p, gbnf.len, NULL, "schema", &g, &err) != SNUG_OK)
        die("schema", &err);
    const char *text = "{\"name\": \"Lily and Ben went to the park to play with a big red ball\", \"age\": 31, "
                       "\"tags\": [\"park\", \"ball\", \"friends\"]}";
    snug_tok_encoder *enc = NULL;
    const int32_t *ids = NULL;
    size_t n_ids = 0;
    snug_tok_encode_opts eo = {.add_special = false, .parse_special = false};
    if (snug_tok_encoder_create(tok, &enc, &err) != SNUG_OK ||
        snug_tok_encode(enc, text, strlen(text), &eo, &ids, &n_ids, &err) != SNUG_OK)
        die("encode", &err);

    size_t gb = snug_gmatch_bytes(STACKS, DEPTH);
    void *mem = snug_mem_alloc(SNUG_MEM_OTHER, 2 * gb, &err);
    void *scratch = snug_mem_alloc(SNUG_MEM_OTHER, snug_tokmask_scratch_bytes(trie->depth_max, STACKS, DEPTH), &err);
    uint32_t *mask = snug_mem_alloc(SNUG_MEM_OTHER, ((size_t)n_vocab + 31) / 32 * 4, &err);
    double *t_walk = snug_mem_alloc(SNUG_MEM_OTHER, (n_ids + 1) * sizeof(double), &err);
    double *t_each = snug_mem_alloc(SNUG_MEM_OTHER, (n_ids + 1) * sizeof(double), &err);
    double *t_walk_same = snug_mem_alloc(SNUG_MEM_OTHER, (n_ids + 1) * sizeof(double), &err);
    if (!mem || !scratch || !mask || !t_walk || !t_each || !t_walk_same) die("memory", &err);
    enum { CACHED = 8 };
    snug_tokmask_cache cache;
    void *cache_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_tokmask_cache_bytes(CACHED, n_vocab, STACKS * (DEPTH + 1)), &err);
    double *t_cached = snug_mem_alloc(SNUG_MEM_OTHER, (n_ids + 1) * sizeof(double), &err);
    if (!cache_mem || !t_cached) die("memory", &err);
    snug_tokmask_cache_init(&cache, cache_mem, CACHED, n_vocab, STACKS * (DEPTH + 1));
    snug_gmatch m, one;
    if (snug_gmatch_start(&m, mem, STACKS, DEPTH, g, &err) != SNUG_OK) die("start", &err);
    int n_each = 0;
    int64_t allowed_sum = 0;
    for (size_t step = 0; step < n_ids; step++) {
        double a = now();
        int32_t allowed = snug_tokmask_compute(trie, &m, scratch, mask, NULL);
        t_walk[step] = now() - a;
        allowed_sum += allowed;
        /* the same mask through the cache: a lookup, then the walk and a put on a miss */
        a = now();
        int32_t n_cached = 0;
        const uint32_t *hit = snug_tokmask_cache_get(&cache, 1, &m, &n_cached);
        if (!hit) {
            n_cached = snug_tokmask_compute(trie, &m, scratch, mask, NULL);
            snug_tokmask_cache_put(&cache, 1, &m, mask, n_cached);
        }
        t_cached[step] = now() - a;
        if (n_cached != allowed) {
            fprintf(stderr, "bench/grammar: state %zu: the cache's mask allows %d tokens, the walk %d\n", step,
                    n_cached, allowed);
            return 1;
        }
        int32_t id = ids[step];
        if (!(mask[id >> 5] >> (id & 31) & 1)) {
            fprintf(stderr, "bench/grammar: the text's token %zu (%d, \"%.*s\") is not allowed\n", step, id,
                    lens[id], (const char *)texts[id]);
            return 1;
        }
        if (step % 4 == 0) {
            a = now();
            int32_t brute = 0;
            for (int32_t i = 0; i < n_vocab; i++) {
                snug_gmatch_clone(&one, (char *)mem + gb, &m);
                brute += lens[i] > 0 && snug_gmatch_advance_bytes(&one, texts[i], (size_t)lens[i], NULL) == SNUG_GMATCH_OK;
            }
            t_each[n_each] = now() - a;
            t_walk_same[n_each++] = t_walk[step];
            if (brute != allowed) {
                fprintf(stderr, "bench/grammar: state %zu: the walk allows %d tokens, one by one %d\n", step, allowed,
                        brute);
                return 1;
            }
        }
        if (snug_gmatch_advance_bytes(&m, texts[id], (size_t)lens[id], NULL) != SNUG_GMATCH_OK) {
            fprintf(stderr, "bench/grammar: the text leaves the grammar at token %zu\n", step);
            return 1;
        }
    }
    double ms = bench_median(t_walk_same, n_each), me = bench_median(t_each, n_each);
    double worst = 0;
    for (size_t i = 0; i < n_ids; i++) worst = worst > t_walk[i] ? worst : t_walk[i];
    double mw = bench_median(t_walk, (int)n_ids), mean_walk = 0, mean_cached = 0;
    for (size_t i = 0; i < n_ids; i++) mean_walk += t_walk[i] / (double)n_ids, mean_cached += t_cached[i] / (double)n_ids;
    printf("bench/grammar: %s, %d tokens; trie %d nodes (%.1f MB), built in %.1f ms\n", dir, n_vocab, trie->n_nodes,
           (double)trie->bytes / 1e6, t_trie * 1e3);
    printf("JSON schema text of %zu tokens, %.0f tokens allowed per state on average\n", n_ids,
           (double)allowed_sum / (double)n_ids);
    printf("mask by the trie walk: median %.3f ms, worst %.3f ms (all %zu states)\n", mw * 1e3, worst * 1e3, n_ids);
    printf("with a cache of %d states: %lld hits, %lld misses; mean %.3f ms a mask against %.3f ms without: %.2f\n",
           CACHED, (long long)cache.hits, (long long)cache.misses, mean_cached * 1e3, mean_walk * 1e3,
           mean_walk > 0 ? mean_cached / mean_walk : 0);
    printf("on every fourth state (%d): trie walk %.3f ms, token by token %.3f ms: walk / one by one %.2f\n", n_each,
           ms * 1e3, me * 1e3, me > 0 ? ms / me : 0);
    snug_mem_free(t_cached);
    snug_mem_free(cache_mem);
    snug_mem_free(t_walk_same);
    snug_mem_free(t_each);
    snug_mem_free(t_walk);
    snug_mem_free(mask);
    snug_mem_free(scratch);
    snug_mem_free(mem);
    snug_tok_encoder_free(enc);
    snug_grammar_free(g);
    snug_strbuf_free(&gbnf);
    json_decref(schema);
    snug_vocab_trie_free(trie);
    snug_mem_free(lens);
    snug_mem_free(texts);
    snug_mem_free(buf);
    snug_tokenizer_free(tok);
    return 0;
}
