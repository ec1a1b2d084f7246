/*
 * tok_gpt2.c: GPT-2-style vocab.json + merges.txt (OpenAI's names:
 * encoder.json + vocab.bpe): byte-level BPE whose token texts are written
 * in GPT-2's byte alphabet, merged by rank (the line order of merges.txt,
 * after an optional "#version" line).
 *
 * Beside them, tokenizer_config.json (added_tokens_decoder: the added
 * tokens with their flags; tokenizer_class; add_prefix_space) and
 * added_tokens.json ({"text": id}) complete the vocabulary. The family
 * decides the pre-split: GPT2Tokenizer the GPT-2 regex; Qwen2Tokenizer (or,
 * without a tokenizer_class, added tokens that include <|im_start|>) the
 * Qwen2 regex and NFC normalization, as its reference tokenizer does. Other
 * tokenizer classes are refused: their pre-splitting is not known here.
 */
#include "tok_internal.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "base/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CONFIG_MAX_BYTES = 16 << 20, MAX_ADDED = 1 << 20, TOKEN_MAX_BYTES = 4096 };

typedef struct added {
    int32_t id;
    const char *content;     /* owned by the JSON it came from */
    bool special, lstrip, rstrip;
} added;

typedef struct gpt2_files {
    const char *vocab_path, *merges_path;
    char cfg_path[4096], added_path[4096];
    json_t *vocab, *cfg, *added_json;
    added *added;
    int32_t n_added;
    bool qwen2;
} gpt2_files;

/* Loads an optional JSON file (absent: *out NULL). */
static snug_status load_optional(const char *dir, const char *name, char *path, size_t size,
                                 int opts, json_t **out, snug_error *err)
{
    snug_status st = snug_path_join(path, size, dir, name, err);
    if (st != SNUG_OK || !snug_file_exists(path)) return st;
    return snug_json_load_file_opts(path, CONFIG_MAX_BYTES, opts, out, err);
}

/* A token named by one of the config's special-token fields. */
static bool named_special(const json_t *cfg, const char *content)
{
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(keys); i++) {
        const json_t *v = json_object_get(cfg, keys[i]);
        if (json_is_object(v)) v = json_object_get(v, "content");
        if (json_is_string(v) && strcmp(json_string_value(v), content) == 0) return true;
    }
    const json_t *more = json_object_get(cfg, "additional_special_tokens");
    for (size_t i = 0; i < json_array_size(more); i++) {
        const json_t *v = json_array_get(more, i);
        if (json_is_object(v)) v = json_object_get(v, "content");
        if (json_is_string(v) && strcmp(json_string_value(v), content) == 0) return true;
    }
    return false;
}

/* Parses a decimal id in [0, 2^24); false otherwise. */
static bool parse_id(const char *s, int32_t *id)
{
    int64_t v = 0;
    if (!*s || strlen(s) > 8) return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        v = v * 10 + (*s - '0');
    }
    if (v >= (1 << 24)) return false;
    *id = (int32_t)v;
    return true;
}

static int cmp_added_id(const void *a, const void *b)
{
    const added *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The added token of id among the first n (sorted by id); NULL when none. */
static added *find_added(gpt2_files *f, int32_t n, int32_t id)
{
    added key = {.id = id};
    return bsearch(&key, f->added, (size_t)n, sizeof key, cmp_added_id);
}

/* Sorts the added tokens by id; one id given twice must name one text. */
static snug_status sort_added(gpt2_files *f, snug_error *err)
{
    qsort(f->added, (size_t)f->n_added, sizeof *f->added, cmp_added_id);
    int32_t n = 0;
    for (int32_t i = 0; i < f->n_added; i++) {
        if (n > 0 && f->added[n - 1].id == f->added[i].id) {
            char shown[2][48];
            if (strcmp(f->added[n - 1].content, f->added[i].content) != 0)
                return tok_bad(err, f->cfg_path, "added token %d is both '%s' and '%s'", f->added[i].id,
                               snug_str_shown(f->added[n - 1].content, shown[0], sizeof shown[0]),
                               snug_str_shown(f->added[i].content, shown[1], sizeof shown[1]));
            continue;
        }
        f->added[n++] = f->added[i];
    }
    f->n_added = n;
    return SNUG_OK;
}

/* Collects the added tokens of added_tokens_decoder and added_tokens.json. */
static snug_status collect_added(gpt2_files *f, snug_error *err)
{
    const json_t *dec = json_object_get(f->cfg, "added_tokens_decoder");
    size_t cap = json_object_size(dec) + json_object_size(f->added_json) + 1;
    if (dec && !json_is_object(dec))
        return tok_bad(err, f->cfg_path, "added_tokens_decoder is not an object");
    if (cap > MAX_ADDED) return tok_bad(err, f->cfg_path, "more than %d added tokens", MAX_ADDED);
    f->added = snug_mem_alloc(SNUG_MEM_OTHER, SNUG_MAX(cap, (size_t)1) * sizeof *f->added, err);
    if (!f->added) return SNUG_NOMEM;
    const char *key;
    json_t *v;
    char shown[2][48];
    json_object_foreach((json_t *)dec, key, v) {
        added a = {0};
        a.content = json_string_value(json_object_get(v, "content"));
        if (!parse_id(key, &a.id))
            return tok_bad(err, f->cfg_path, "added_tokens_decoder: '%s' is not an id (0 to %d)",
                           snug_str_shown(key, shown[0], sizeof shown[0]), (1 << 24) - 1);
        if (!a.content || !*a.content)
            return tok_bad(err, f->cfg_path, "added_tokens_decoder entry %d has no content", a.id);
        a.special = json_is_true(json_object_get(v, "special"));
        a.lstrip = json_is_true(json_object_get(v, "lstrip"));
        a.rstrip = json_is_true(json_object_get(v, "rstrip"));
        f->added[f->n_added++] = a;
    }
    snug_status st = sort_added(f, err);
    if (st != SNUG_OK) return st;
    int32_t n_dec = f->n_added; /* added_tokens.json's entries come after, unsorted */
    json_object_foreach(f->added_json, key, v) {
        int64_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= (1 << 24))
            return tok_bad(err, f->added_path, "'%s': the id is not an integer from 0 to %d",
                           snug_str_shown(key, shown[0], sizeof shown[0]), (1 << 24) - 1);
        if (!*key) return tok_bad(err, f->added_path, "an added token has empty text");
        added *a = find_added(f, n_dec, (int32_t)id);
        if (a && strcmp(a->content, key) != 0)
            return tok_bad(err, f->added_path, "'%s' has id %lld, which tokenizer_config.json "
                           "gives to '%s'", snug_str_shown(key, shown[0], sizeof shown[0]), (long long)id,
                           snug_str_shown(a->content, shown[1], sizeof shown[1]));
        if (!a)
            f->added[f->n_added++] = (added){(int32_t)id, key, named_special(f->cfg, key), false, false};
    }
    /* both families' reference tokenizers make <|endoftext|> a special token
     * by default (GPT-2's vocab.json holds it, with nothing else saying so) */
    const json_t *eot = json_object_get(f->vocab, "<|endoftext|>");
    bool listed = false;
    for (int32_t i = 0; i < f->n_added; i++) listed |= strcmp(f->added[i].content, "<|endoftext|>") == 0;
    if (!listed && json_is_integer(eot) && json_integer_value(eot) >= 0 && json_integer_value(eot) < (1 << 24))
        f->added[f->n_added++] = (added){(int32_t)json_integer_value(eot), "<|endoftext|>", true, false, false};
    return sort_added(f, err);
}

/* Decides the family from tokenizer_class (or the added tokens). */
static snug_status pick_family(gpt2_files *f, snug_error *err)
{
    const json_t *cls = json_object_get(f->cfg, "tokenizer_class");
    const char *c = json_string_value(cls);
    if (!c) {
        for (int32_t i = 0; i < f->n_added; i++)
            if (strcmp(f->added[i].content, "<|im_start|>") == 0) f->qwen2 = true;
        return SNUG_OK;
    }
    if (strcmp(c, "Qwen2Tokenizer") == 0 || strcmp(c, "Qwen2TokenizerFast") == 0) {
        f->qwen2 = true;
        return SNUG_OK;
    }
    if (strcmp(c, "GPT2Tokenizer") == 0 || strcmp(c, "GPT2TokenizerFast") == 0) return SNUG_OK;
    char shown[64];
    return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tokenizer_class '%s' with vocab.json and "
                       "merges.txt is not supported (GPT2Tokenizer and Qwen2Tokenizer are; a "
                       "tokenizer.json would say how it pre-splits)", f->cfg_path,
                       snug_str_shown(c, shown, sizeof shown));
}

/* Sizes the vocabulary: the largest id of vocab.json and the added tokens. */
static snug_status vocab_size(gpt2_files *f, int32_t *n, snug_error *err)
{
    int64_t max = -1;
    const char *key;
    json_t *v;
    char shown[64];
    if (!json_is_object(f->vocab)) return tok_bad(err, f->vocab_path, "not a JSON object of token ids");
    json_object_foreach(f->vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (1 << 24))
            return tok_bad(err, f->vocab_path, "token '%s' has id %s; expected 0 to %d",
                           snug_str_shown(key, shown, sizeof shown),
                           json_is_integer(v) ? "out of range" : "that is not an integer",
                           (1 << 24) - 1);
        max = SNUG_MAX(max, (int64_t)json_integer_value(v));
    }
    for (int32_t i = 0; i < f->n_added; i++) max = SNUG_MAX(max, (int64_t)f->added[i].id);
    if (max < 0) return tok_bad(err, f->vocab_path, "the vocabulary is empty");
    *n = (int32_t)max + 1;
    return SNUG_OK;
}

static snug_status set_vocab(snug_tokenizer *t, gpt2_files *f, snug_error *err)
{
    char buf[TOKEN_MAX_BYTES], shown[2][64];
    const char *key;
    json_t *v;
    json_object_foreach(f->vocab, key, v) {
        int32_t id = (int32_t)json_integer_value(v);
        size_t n = strlen(key);
        const added *a = find_added(f, f->n_added, id);
        if (a && strcmp(a->content, key) != 0)
            return tok_bad(err, f->vocab_path, "token %d is '%s', but the added tokens say '%s'", id,
                           snug_str_shown(key, shown[0], 48), snug_str_shown(a->content, shown[1], 48));
        tok_attr attr = a && a->special ? TOK_SPECIAL : TOK_NORMAL;
        if (n >= sizeof buf) return tok_bad(err, f->vocab_path, "token %d is longer than %zu bytes", id, sizeof buf);
        if (attr == TOK_SPECIAL)
            memcpy(buf, key, n);
        else if (!tok_chars_to_bytes(key, n, buf, &n))
            return tok_bad(err, f->vocab_path, "token %d '%s' is not written in the byte-level "
                           "alphabet", id, snug_str_shown(key, shown[0], sizeof shown[0]));
        snug_status st = tok_set(t, id, buf, n, 0, attr, err);
        if (st != SNUG_OK) return st;
    }
    for (int32_t i = 0; i < f->n_added; i++) { /* added tokens vocab.json lacks (Qwen2's) */
        const added *a = &f->added[i];
        if (t->entries[a->id].attr != TOK_UNUSED) continue;
        snug_status st = tok_set(t, a->id, a->content, strlen(a->content), 0,
                                 a->special ? TOK_SPECIAL : TOK_NORMAL, err);
        if (st != SNUG_OK)
            return snug_error_context(err, st, t->source, "added token '%s': ",
                                      snug_str_shown(a->content, shown[0], 48));
    }
    return SNUG_OK;
}

/* Reads merges.txt: one "left right" per line in the byte-level alphabet. */
static snug_status read_merges(snug_tokenizer *t, const char *path, snug_error *err)
{
    char *data = NULL, l[TOKEN_MAX_BYTES], r[TOKEN_MAX_BYTES], shown[72];
    size_t len = 0, line = 0;
    snug_status st = snug_file_read_all(path, TOK_NATIVE_MAX_BYTES, &data, &len, err);
    for (size_t pos = 0; st == SNUG_OK && pos < len;) {
        char *s = data + pos, *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + 1;
        line++;
        if (n > 0 && s[n - 1] == '\r') n--;
        if (n == 0 || (line == 1 && n >= 8 && memcmp(s, "#version", 8) == 0)) continue;
        char *sp = memchr(s, ' ', n);
        size_t nl_len, nr_len;
        if (!sp || sp == s || sp + 1 == s + n || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)) ||
            n >= sizeof l) {
            st = tok_bad(err, path, "line %zu: '%s' is not two tokens separated by a space", line,
                         snug_bytes_shown(s, n, shown, sizeof shown));
            break;
        }
        if (!tok_chars_to_bytes(s, (size_t)(sp - s), l, &nl_len) ||
            !tok_chars_to_bytes(sp + 1, (size_t)(s + n - sp - 1), r, &nr_len)) {
            st = tok_bad(err, path, "line %zu: '%s' is not written in the byte-level alphabet",
                         line, snug_bytes_shown(s, n, shown, sizeof shown));
            break;
        }
        int32_t a = tok_lookup(t, l, nl_len), b = tok_lookup(t, r, nr_len);
        char both[2 * TOKEN_MAX_BYTES];
        memcpy(both, l, nl_len);
        memcpy(both + nl_len, r, nr_len);
        if (a < 0 || b < 0 || tok_lookup(t, both, nl_len + nr_len) < 0) {
            st = tok_bad(err, path, "line %zu: merge '%s' names %s that is not a token", line,
                         snug_bytes_shown(s, n, shown, sizeof shown),
                         a < 0 ? "a left part" : b < 0 ? "a right part" : "a result");
            break;
        }
        st = tok_add_merge(t, l, nl_len, r, nr_len, err);
    }
    snug_mem_free(data);
    return st;
}

static snug_status build(gpt2_files *f, snug_tokenizer **out, snug_error *err)
{
    char dir[4096];
    int32_t n = 0;
    snug_tokenizer *t = NULL;
    tok_dir_of(f->vocab_path, dir, sizeof dir);
    snug_status st = snug_json_load_file(f->vocab_path, TOK_NATIVE_MAX_BYTES, &f->vocab, err);
    if (st == SNUG_OK)  /* its model_max_length may exceed 64 bits */
        st = load_optional(dir, "tokenizer_config.json", f->cfg_path, sizeof f->cfg_path,
                           SNUG_JSON_INTS_AS_REALS, &f->cfg, err);
    if (st == SNUG_OK)
        st = load_optional(dir, "added_tokens.json", f->added_path, sizeof f->added_path, 0,
                           &f->added_json, err);
    if (st == SNUG_OK) st = collect_added(f, err);
    if (st == SNUG_OK) st = pick_family(f, err);
    if (st == SNUG_OK) st = vocab_size(f, &n, err);
    if (st == SNUG_OK) st = tok_create(f->vocab_path, TOK_BYTE_LEVEL, n, &t, err);
    if (st == SNUG_OK) st = set_vocab(t, f, err);
    if (st == SNUG_OK) st = tok_index(t, err);
    if (st == SNUG_OK) st = read_merges(t, f->merges_path, err);
    for (int32_t i = 0; st == SNUG_OK && i < f->n_added; i++) {
        const added *a = &f->added[i];
        st = tok_add_added(t, a->id, a->special, a->lstrip, a->rstrip, err);
    }
    if (st == SNUG_OK)
        st = tok_add_split(t, f->qwen2 ? TOK_REGEX_QWEN2 : TOK_REGEX_GPT2, TOK_SPLIT_ISOLATED, err);
    if (st != SNUG_OK) {
        snug_tokenizer_free(t);
        return st;
    }
    t->merge_mode = TOK_MERGE_RANKS;
    t->nfc = f->qwen2;
    t->byte_level_prefix_space = json_is_true(json_object_get(f->cfg, "add_prefix_space"));
    /* the defaults of the reference tokenizers, before tokenizer_config.json:
     * GPT-2's bos and eos are <|endoftext|>, Qwen2's eos is */
    int32_t eot = tok_find_any(t, "<|endoftext|>", 13);
    t->eos = eot;
    t->bos = f->qwen2 ? -1 : eot;
    *out = t;
    return SNUG_OK;
}

snug_status tok_read_gpt2(const char *vocab_path, const char *merges_path, snug_tokenizer **out,
                          snug_error *err)
{
    gpt2_files f = {.vocab_path = vocab_path, .merges_path = merges_path};
    snug_tokenizer *t = NULL;
    char dir[4096];
    snug_status st = build(&f, &t, err);
    tok_dir_of(vocab_path, dir, sizeof dir);
    if (st == SNUG_OK) st = tok_native_finish(t, dir, err);
    json_decref(f.vocab);
    json_decref(f.cfg);
    json_decref(f.added_json);
    snug_mem_free(f.added);
    if (st != SNUG_OK) {
        snug_tokenizer_free(t);
        /* a message naming none of the directory's files gets vocab.json's name */
        if (err && !strstr(err->msg, dir)) snug_error_prefix(err, st, "%s: ", vocab_path);
        return st;
    }
    *out = t;
    return SNUG_OK;
}
