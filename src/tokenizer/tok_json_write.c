/*
 * tok_json_write.c: writing a tokenizer as Hugging Face tokenizer.json and
 * tokenizer_config.json (for the bundled model, and to check native readers
 * against the tokenizer.json readers of the same vocabulary).
 */
#include "tok_internal.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "base/json.h"

#include <string.h>

static const char SPACE_MARK[] = "\xE2\x96\x81"; /* U+2581 */

/* A token's text as tokenizer.json writes it: byte-level normal tokens in
 * GPT-2's alphabet, everything else as it is. */
static json_t *token_string(const snug_tokenizer *t, int32_t id)
{
    size_t n;
    const char *s = tok_text(t, id, &n);
    if (t->kind != TOK_BYTE_LEVEL || t->entries[id].attr != TOK_NORMAL) return json_stringn(s, n);
    char *buf = snug_mem_alloc(SNUG_MEM_OTHER, 2 * n + 1, NULL);
    if (!buf) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += tok_byte_to_char((uint8_t)s[i], buf + o);
    json_t *j = json_stringn(buf, o);
    snug_mem_free(buf);
    return j;
}

/* Adds key = value to o (value consumed); false when value is NULL. */
static bool put(json_t *o, const char *key, json_t *value)
{
    return value && json_object_set_new(o, key, value) == 0;
}

static bool append(json_t *a, json_t *value)
{
    return value && json_array_append_new(a, value) == 0;
}

/* The merges as [left, right] pairs, in rank order. */
static snug_status merges_json(const snug_tokenizer *t, json_t **out, snug_error *err)
{
    int32_t *pairs = NULL, n = 0;
    snug_status st = tok_merge_pairs(t, &pairs, &n, err);
    json_t *list = st == SNUG_OK ? json_array() : NULL;
    for (int32_t i = 0; list && i < n; i++) {
        json_t *pair = json_array();
        if (!pair || !append(pair, token_string(t, pairs[2 * i])) ||
            !append(pair, token_string(t, pairs[2 * i + 1])) || !append(list, pair)) {
            json_decref(list);
            list = NULL;
        }
    }
    snug_mem_free(pairs);
    if (st == SNUG_OK && !list) st = snug_errorf(err, SNUG_NOMEM, "out of memory writing merges");
    *out = list;
    return st;
}

/* The text of token id as a JSON string (NULL when id < 0). */
static json_t *token_text_json(const snug_tokenizer *t, int32_t id)
{
    if (id < 0) return NULL;
    size_t n = 0;
    const char *s = tok_text(t, id, &n);
    return json_stringn(s, n);
}

static json_t *model_json(const snug_tokenizer *t, json_t *merges)
{
    json_t *vocab = json_object();
    bool byte_fallback = false;
    for (int32_t id = 0; vocab && id < t->n_vocab; id++) {
        if (t->entries[id].attr == TOK_UNUSED) continue;
        byte_fallback |= t->entries[id].attr == TOK_BYTE;
        json_t *key = token_string(t, id);
        if (!key || json_object_set_new(vocab, json_string_value(key), json_integer(id)) != 0) {
            json_decref(key);
            json_decref(vocab);
            json_decref(merges);
            return NULL;
        }
        json_decref(key);
    }
    json_t *unk = t->unk >= 0 ? token_text_json(t, t->unk) : json_null();
    return json_pack("{s:s, s:n, s:o, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout",
                     "unk_token", unk, "continuing_subword_prefix",
                     "end_of_word_suffix", "fuse_unk", t->kind == TOK_SENTENCEPIECE, "byte_fallback",
                     byte_fallback, "ignore_merges", t->ignore_merges, "vocab", vocab, "merges", merges);
}

static json_t *added_tokens_json(const snug_tokenizer *t)
{
    json_t *list = json_array();
    int32_t *order = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)SNUG_MAX(t->n_added, 1) * sizeof *order, NULL);
    if (!order) {
        json_decref(list);
        return NULL;
    }
    for (int32_t i = 0; i < t->n_added; i++) order[i] = i;
    for (int32_t i = 1; i < t->n_added; i++) /* by id: insertion sort, lists are short */
        for (int32_t k = i; k > 0 && t->added[order[k]].id < t->added[order[k - 1]].id; k--) {
            int32_t x = order[k];
            order[k] = order[k - 1];
            order[k - 1] = x;
        }
    for (int32_t i = 0; list && i < t->n_added; i++) {
        const tok_added *a = &t->added[order[i]];
        size_t n;
        const char *s = tok_text(t, a->id, &n);
        if (!append(list, json_pack("{s:i, s:s%, s:b, s:b, s:b, s:b, s:b}", "id", a->id, "content", s,
                                    n, "single_word", 0, "lstrip", a->lstrip, "rstrip", a->rstrip,
                                    "normalized", 0, "special", a->special))) {
            json_decref(list);
            list = NULL;
        }
    }
    snug_mem_free(order);
    return list;
}

static json_t *pre_tokenizer_json(const snug_tokenizer *t)
{
    if (t->kind == TOK_SENTENCEPIECE) {
        if (t->spm_prepend != TOK_PREPEND_FIRST && !t->spm_split) return json_null();
        const char *scheme = t->spm_prepend == TOK_PREPEND_FIRST ? "first"
                             : t->spm_prepend == TOK_PREPEND_EVERY ? "always" : "never";
        return json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement", SPACE_MARK,
                         "prepend_scheme", scheme, "split", t->spm_split);
    }
    json_t *list = json_array();
    for (int32_t i = 0; list && i < t->n_pretok; i++) {
        const tok_pretok *p = &t->pretok[i];
        if (!append(list, json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex",
                                    p->pattern, "behavior",
                                    p->behavior == TOK_SPLIT_ISOLATED ? "Isolated" : "Removed",
                                    "invert", 0))) {
            json_decref(list);
            return NULL;
        }
    }
    if (!append(list, json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
                                t->byte_level_prefix_space, "trim_offsets", 1, "use_regex", 0))) {
        json_decref(list);
        return NULL;
    }
    return json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", list);
}

static json_t *normalizer_json(const snug_tokenizer *t)
{
    json_t *nfc = t->nfc ? json_pack("{s:s}", "type", "NFC") : json_null();
    if (t->kind != TOK_SENTENCEPIECE || t->spm_prepend == TOK_PREPEND_FIRST || t->spm_split)
        return nfc;
    json_t *list = json_array();
    if (t->nfc && !append(list, nfc)) {
        json_decref(list);
        return NULL;
    }
    if (t->spm_prepend == TOK_PREPEND_EVERY &&
        !append(list, json_pack("{s:s, s:s}", "type", "Prepend", "prepend", SPACE_MARK))) {
        json_decref(list);
        return NULL;
    }
    if (t->spm_escape_spaces &&
        !append(list, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", " ",
                                "content", SPACE_MARK))) {
        json_decref(list);
        return NULL;
    }
    return json_pack("{s:s, s:o}", "type", "Sequence", "normalizers", list);
}

/* Adds special token id to a template's single and pair lists (pair_type
 * is its type_id in the pair template) and to the special_tokens map. */
static bool template_special(const snug_tokenizer *t, int32_t id, int pair_type, json_t *single,
                             json_t *pair, json_t *specials)
{
    size_t n = 0;
    const char *s = tok_text(t, id, &n);
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)SNUG_MIN(n, sizeof key - 1), s);
    json_t *entry = json_pack("{s:s%, s:[i], s:[s%]}", "id", s, n, "ids", id, "tokens", s, n);
    return append(single, json_pack("{s:{s:s%, s:i}}", "SpecialToken", "id", s, n, "type_id", 0)) &&
           append(pair, json_pack("{s:{s:s%, s:i}}", "SpecialToken", "id", s, n, "type_id", pair_type)) &&
           entry && json_object_set_new(specials, key, entry) == 0;
}

/* TemplateProcessing: [bos] $A [eos] (and $B in the pair template). */
static json_t *post_processor_json(const snug_tokenizer *t)
{
    json_t *single = json_array(), *pair = json_array(), *specials = json_object();
    bool ok = single && pair && specials;
    if (ok && t->add_bos && t->bos >= 0) ok = template_special(t, t->bos, 0, single, pair, specials);
    ok = ok && append(single, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0)) &&
         append(pair, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0)) &&
         append(pair, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "B", "type_id", 1));
    if (ok && t->add_eos && t->eos >= 0) ok = template_special(t, t->eos, 1, single, pair, specials);
    if (!ok) {
        json_decref(single);
        json_decref(pair);
        json_decref(specials);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:o, s:o}", "type", "TemplateProcessing", "single", single, "pair",
                     pair, "special_tokens", specials);
}

static json_t *decoder_json(const snug_tokenizer *t)
{
    if (t->kind == TOK_BYTE_LEVEL)
        return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1,
                         "trim_offsets", 1, "use_regex", 1);
    json_t *list = json_pack("[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}]", "type", "Replace", "pattern",
                             "String", SPACE_MARK, "content", " ", "type", "ByteFallback", "type", "Fuse");
    if (list && t->strip_leading_space &&
        !append(list, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content", " ", "start", 1,
                                "stop", 0))) {
        json_decref(list);
        return NULL;
    }
    return json_pack("{s:s, s:o}", "type", "Sequence", "decoders", list);
}

static json_t *config_json(const snug_tokenizer *t)
{
    json_t *o = json_pack("{s:b, s:b}", "add_bos_token", t->add_bos, "add_eos_token", t->add_eos);
    if (o && t->bos >= 0 && !put(o, "bos_token", token_text_json(t, t->bos))) goto fail;
    if (o && t->eos >= 0 && !put(o, "eos_token", token_text_json(t, t->eos))) goto fail;
    if (o && t->unk >= 0 && !put(o, "unk_token", token_text_json(t, t->unk))) goto fail;
    if (o && t->chat_template && !put(o, "chat_template", json_string(t->chat_template))) goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

snug_status tok_write_json(const snug_tokenizer *t, const char *dir, snug_error *err)
{
    snug_json_init();
    json_t *merges = NULL, *root = NULL, *cfg = NULL;
    char path[4096];
    snug_status st = merges_json(t, &merges, err);
    if (st != SNUG_OK) return st;
    root = json_pack("{s:s, s:n, s:n, s:o, s:o, s:o, s:o, s:o, s:o}", "version", "1.0", "truncation",
                     "padding", "added_tokens", added_tokens_json(t), "normalizer", normalizer_json(t),
                     "pre_tokenizer", pre_tokenizer_json(t), "post_processor", post_processor_json(t),
                     "decoder", decoder_json(t), "model", model_json(t, merges));
    cfg = root ? config_json(t) : NULL;
    if (!root || !cfg) {
        st = snug_errorf(err, SNUG_NOMEM, "out of memory building tokenizer.json");
        goto done;
    }
    st = snug_path_join(path, sizeof path, dir, "tokenizer.json", err);
    if (st == SNUG_OK) st = snug_json_write_file(root, path, err);
    if (st == SNUG_OK) st = snug_path_join(path, sizeof path, dir, "tokenizer_config.json", err);
    if (st == SNUG_OK) st = snug_json_write_file(cfg, path, err);
done:
    json_decref(root);
    json_decref(cfg);
    return st;
}

snug_status snug_tokenizer_write_json(const snug_tokenizer *tok, const char *dir, snug_error *err)
{
    return tok_write_json(tok, dir, err);
}
