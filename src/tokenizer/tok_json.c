/*
 * tok_json.c: reading Hugging Face tokenizer.json (BPE models: byte-level
 * or sentencepiece-style), tokenizer_config.json and generation_config.json.
 */
#include "tok_internal.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "base/json.h"

#include <stdio.h>
#include <string.h>

enum { TOKENIZER_JSON_MAX_BYTES = 256 << 20, CONFIG_MAX_BYTES = 16 << 20 };

static const char SPACE_MARK[] = "\xE2\x96\x81"; /* U+2581 */

static snug_status bad(snug_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static snug_status bad(snug_error *err, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    snug_status st = snug_verrorf_at(err, SNUG_FORMAT, path, fmt, ap);
    va_end(ap);
    return st;
}

static const char *type_of(const json_t *o)
{
    const char *s = json_string_value(json_object_get(o, "type"));
    return s ? s : "";
}

/* Calls fn on every component of a possibly-Sequence stage (key names the
 * list in a Sequence: "normalizers", "pretokenizers", "decoders",
 * "processors"). */
typedef snug_status (*stage_fn)(snug_tokenizer *t, const json_t *o, const char *path,
                                snug_error *err);

static snug_status each_stage(snug_tokenizer *t, const json_t *o, const char *key, stage_fn fn,
                              const char *path, snug_error *err)
{
    if (!o || json_is_null(o)) return SNUG_OK;
    if (!json_is_object(o)) return bad(err, path, "a %s entry is not an object", key);
    if (strcmp(type_of(o), "Sequence") != 0) return fn(t, o, path, err);
    const json_t *list = json_object_get(o, key);
    if (!json_is_array(list)) return bad(err, path, "a Sequence has no list '%s'", key);
    for (size_t i = 0; i < json_array_size(list); i++) {
        snug_status st = each_stage(t, json_array_get(list, i), key, fn, path, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

/* ---- which kind of tokenizer ------------------------------------------------ */

static bool mentions_type(const json_t *o, const char *type)
{
    if (!o) return false;
    if (json_is_object(o)) {
        if (strcmp(type_of(o), type) == 0) return true;
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)o, key, v) if (mentions_type(v, type)) return true;
    } else if (json_is_array(o)) {
        for (size_t i = 0; i < json_array_size(o); i++)
            if (mentions_type(json_array_get(o, i), type)) return true;
    }
    return false;
}

/* ---- stages ------------------------------------------------------------------ */

static snug_status normalizer(snug_tokenizer *t, const json_t *o, const char *path, snug_error *err)
{
    const char *type = type_of(o);
    char shown[64];
    if (strcmp(type, "NFC") == 0) {
        t->nfc = true;
        return SNUG_OK;
    }
    if (strcmp(type, "Prepend") == 0) {
        const char *p = json_string_value(json_object_get(o, "prepend"));
        if (!p || strcmp(p, SPACE_MARK) != 0)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: normalizer Prepend of '%s'; snug "
                               "supports prepending U+2581", path, p ? snug_str_shown(p, shown, sizeof shown) : "?");
        t->spm_prepend = TOK_PREPEND_EVERY;
        return SNUG_OK;
    }
    if (strcmp(type, "Replace") == 0) {
        const char *from = json_string_value(json_object_get(json_object_get(o, "pattern"), "String"));
        const char *to = json_string_value(json_object_get(o, "content"));
        if (!from || !to || strcmp(from, " ") != 0 || strcmp(to, SPACE_MARK) != 0)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: normalizer Replace other than ' ' by "
                               "U+2581", path);
        t->spm_escape_spaces = true;
        return SNUG_OK;
    }
    return snug_errorf(err, SNUG_UNSUPPORTED, "%s: normalizer '%s' is not supported (NFC, "
                       "Prepend, Replace and Sequence are)", path, snug_str_shown(type, shown, sizeof shown));
}

static snug_status pre_tokenizer(snug_tokenizer *t, const json_t *o, const char *path,
                                 snug_error *err)
{
    const char *type = type_of(o);
    char shown[64];
    if (strcmp(type, "ByteLevel") == 0) {
        t->byte_level_prefix_space = json_is_true(json_object_get(o, "add_prefix_space"));
        const json_t *use = json_object_get(o, "use_regex");
        if (!use || json_is_true(use)) return tok_add_split(t, TOK_REGEX_GPT2, TOK_SPLIT_ISOLATED, err);
        return SNUG_OK;
    }
    if (strcmp(type, "Split") == 0) {
        const json_t *pat = json_object_get(o, "pattern");
        const char *re = json_string_value(json_object_get(pat, "Regex"));
        const char *lit = json_string_value(json_object_get(pat, "String"));
        const char *behavior = json_string_value(json_object_get(o, "behavior"));
        if (json_is_true(json_object_get(o, "invert")))
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: a Split pre-tokenizer with invert", path);
        tok_split_behavior b;
        if (behavior && strcmp(behavior, "Isolated") == 0)
            b = TOK_SPLIT_ISOLATED;
        else if (behavior && strcmp(behavior, "Removed") == 0)
            b = TOK_SPLIT_REMOVED;
        else
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: Split behavior '%s' is not supported "
                               "(Isolated and Removed are)", path,
                               behavior ? snug_str_shown(behavior, shown, sizeof shown) : "?");
        if (re) return tok_add_split(t, re, b, err);
        if (!lit) return bad(err, path, "a Split pre-tokenizer has no Regex or String pattern");
        char quoted[512];
        if (strlen(lit) > 400 || strstr(lit, "\\E"))
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: Split string pattern '%s'", path,
                               snug_str_shown(lit, shown, 48));
        snprintf(quoted, sizeof quoted, "\\Q%s\\E", lit);
        return tok_add_split(t, quoted, b, err);
    }
    if (strcmp(type, "Digits") == 0) {
        if (json_is_true(json_object_get(o, "individual_digits"))) return tok_add_digits(t, err);
        return tok_add_split(t, "\\p{N}+", TOK_SPLIT_ISOLATED, err);
    }
    if (strcmp(type, "Metaspace") == 0) {
        const char *r = json_string_value(json_object_get(o, "replacement"));
        if (!r || strcmp(r, SPACE_MARK) != 0)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: Metaspace replacement other than "
                               "U+2581", path);
        t->spm_escape_spaces = true;
        const char *scheme = json_string_value(json_object_get(o, "prepend_scheme"));
        if (scheme)
            t->spm_prepend = strcmp(scheme, "first") == 0    ? TOK_PREPEND_FIRST
                             : strcmp(scheme, "always") == 0 ? TOK_PREPEND_EVERY
                                                             : TOK_PREPEND_NEVER;
        else
            t->spm_prepend = json_is_false(json_object_get(o, "add_prefix_space"))
                                 ? TOK_PREPEND_NEVER : TOK_PREPEND_EVERY;
        const json_t *split = json_object_get(o, "split");
        t->spm_split = !split || json_is_true(split);
        return SNUG_OK;
    }
    return snug_errorf(err, SNUG_UNSUPPORTED, "%s: pre-tokenizer '%s' is not supported "
                       "(ByteLevel, Split, Digits, Metaspace and Sequence are)", path,
                       snug_str_shown(type, shown, sizeof shown));
}

static snug_status decoder(snug_tokenizer *t, const json_t *o, const char *path, snug_error *err)
{
    (void)path;
    (void)err;
    const char *type = type_of(o);
    if (strcmp(type, "Strip") == 0) {
        const char *c = json_string_value(json_object_get(o, "content"));
        if (c && strcmp(c, " ") == 0 && json_integer_value(json_object_get(o, "start")) >= 1)
            t->strip_leading_space = true;
    } else if (strcmp(type, "Metaspace") == 0) {
        const char *scheme = json_string_value(json_object_get(o, "prepend_scheme"));
        t->strip_leading_space = scheme ? strcmp(scheme, "never") != 0
                                        : !json_is_false(json_object_get(o, "add_prefix_space"));
    }
    return SNUG_OK; /* Replace, ByteFallback, Fuse and ByteLevel are what decoding does anyway */
}

/* The special tokens a TemplateProcessing puts before and after $A. */
static snug_status post_processor(snug_tokenizer *t, const json_t *o, const char *path,
                                  snug_error *err)
{
    const char *type = type_of(o);
    char shown[64];
    if (strcmp(type, "ByteLevel") == 0) return SNUG_OK;
    if (strcmp(type, "TemplateProcessing") != 0)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: post-processor '%s' is not supported "
                           "(TemplateProcessing, ByteLevel and Sequence are)", path,
                           snug_str_shown(type, shown, sizeof shown));
    const json_t *single = json_object_get(o, "single");
    bool seen_a = false;
    for (size_t i = 0; i < json_array_size(single); i++) {
        const json_t *item = json_array_get(single, i);
        const json_t *sp = json_object_get(item, "SpecialToken");
        if (json_object_get(item, "Sequence")) {
            seen_a = true;
            continue;
        }
        const char *name = json_string_value(json_object_get(sp, "id"));
        if (!name) return bad(err, path, "post_processor: an item is neither a Sequence nor a SpecialToken");
        int32_t id = tok_find_any(t, name, strlen(name));
        if (id < 0)
            return bad(err, path, "post_processor: special token '%s' is not in the vocabulary",
                       snug_str_shown(name, shown, sizeof shown));
        if (!seen_a) {
            t->bos = id;
            t->add_bos = true;
        } else {
            t->eos = id;
            t->add_eos = true;
        }
    }
    return SNUG_OK;
}

/* ---- the model ---------------------------------------------------------------- */

/* A token's text as the tokenizer keeps it (byte-level: the raw bytes). */
static snug_status token_text(const snug_tokenizer *t, const char *s, char *out, size_t *n,
                              const char *path, int32_t id, snug_error *err)
{
    size_t len = strlen(s);
    if (t->kind == TOK_SENTENCEPIECE) {
        memcpy(out, s, len);
        *n = len;
        return SNUG_OK;
    }
    char shown[64];
    if (!tok_chars_to_bytes(s, len, out, n))
        return bad(err, path, "token %d '%s' is not written in the byte-level alphabet", id,
                   snug_str_shown(s, shown, sizeof shown));
    return SNUG_OK;
}

typedef struct added_info {
    const char *content;
    bool special, lstrip, rstrip;
} added_info;

static snug_status read_vocab(snug_tokenizer *t, const json_t *model, const json_t *added,
                              const added_info *info, const char *path, snug_error *err)
{
    const json_t *vocab = json_object_get(model, "vocab");
    bool byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    char *buf = snug_mem_alloc(SNUG_MEM_OTHER, 64 * 1024, err);
    if (!buf) return SNUG_NOMEM;
    snug_status st = SNUG_OK;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        int32_t id = (int32_t)json_integer_value(v);
        size_t n;
        if (strlen(key) >= 64 * 1024) {
            st = bad(err, path, "token %d is longer than 64 KiB", id);
            break;
        }
        const added_info *a = id >= 0 && id < t->n_vocab ? &info[id] : NULL;
        tok_attr attr = TOK_NORMAL;
        uint8_t byte;
        if (a && a->content && a->special) attr = TOK_SPECIAL;
        if (unk && strcmp(key, unk) == 0) attr = TOK_UNKNOWN;
        size_t klen = strlen(key);
        if (attr == TOK_NORMAL && byte_fallback && klen >= 4 && memcmp(key, "<0x", 3) == 0 &&
            key[klen - 1] == '>') {
            if (!tok_parse_byte_token(key, klen, &byte)) {
                char shown[48];
                st = bad(err, path, "vocab: byte token %d is '%s'; expected <0x00> to <0xFF>", id,
                         snug_str_shown(key, shown, sizeof shown));
                break;
            }
            attr = TOK_BYTE;
        }
        if (attr == TOK_NORMAL) {
            st = token_text(t, key, buf, &n, path, id, err);
        } else {
            n = strlen(key);
            memcpy(buf, key, n);
        }
        if (st == SNUG_OK) st = tok_set(t, id, buf, n, 0, attr, err);
        if (st != SNUG_OK) break;
    }
    /* added tokens the model's vocabulary lacks (Llama 3's specials) */
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(added); i++) {
        int32_t id = (int32_t)json_integer_value(json_object_get(json_array_get(added, i), "id"));
        if (t->entries[id].attr != TOK_UNUSED) continue;
        const added_info *a = &info[id];
        st = tok_set(t, id, a->content, strlen(a->content), 0, a->special ? TOK_SPECIAL : TOK_NORMAL, err);
    }
    snug_mem_free(buf);
    return st;
}

static snug_status read_merges(snug_tokenizer *t, const json_t *merges, const char *path,
                               snug_error *err)
{
    char a[1024], b[1024];
    for (size_t i = 0; i < json_array_size(merges); i++) {
        const json_t *m = json_array_get(merges, i);
        const char *l = NULL, *r = NULL;
        char both[2048];
        if (json_is_string(m)) {
            const char *s = json_string_value(m), *sp = strchr(s, ' ');
            char shown[72];
            if (!sp || strchr(sp + 1, ' ') || strlen(s) >= sizeof both)
                return bad(err, path, "merge %zu '%s' is not two tokens separated by a space", i,
                           snug_str_shown(s, shown, sizeof shown));
            memcpy(both, s, (size_t)(sp - s));
            both[sp - s] = '\0';
            l = both;
            r = sp + 1;
        } else if (json_is_array(m) && json_array_size(m) == 2) {
            l = json_string_value(json_array_get(m, 0));
            r = json_string_value(json_array_get(m, 1));
        }
        if (!l || !r) return bad(err, path, "merge %zu is not \"a b\" or [\"a\", \"b\"]", i);
        if (strlen(l) >= sizeof a || strlen(r) >= sizeof b)
            return bad(err, path, "merge %zu is too long", i);
        size_t na, nb;
        snug_status st = token_text(t, l, a, &na, path, -1, err);
        if (st == SNUG_OK) st = token_text(t, r, b, &nb, path, -1, err);
        if (st == SNUG_OK) st = tok_add_merge(t, a, na, b, nb, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

/* Checks the added_tokens list and the vocabulary's ids; sizes the vocabulary. */
static snug_status scan_ids(const json_t *vocab, const json_t *added, const char *path,
                            int32_t *n_vocab, snug_error *err)
{
    int64_t max = -1;
    const char *key;
    json_t *v;
    char shown[64];
    json_object_foreach((json_t *)vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (1 << 24))
            return bad(err, path, "vocab: token '%s' has id %lld; expected 0 to %d",
                       snug_str_shown(key, shown, sizeof shown),
                       (long long)json_integer_value(v), (1 << 24) - 1);
        max = SNUG_MAX(max, (int64_t)json_integer_value(v));
    }
    if (added && !json_is_array(added)) return bad(err, path, "added_tokens is not a list");
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        const json_t *id = json_object_get(a, "id");
        const char *content = json_string_value(json_object_get(a, "content"));
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 24))
            return bad(err, path, "added_tokens entry %zu: id must be 0 to %d", i, (1 << 24) - 1);
        if (!content || !*content) return bad(err, path, "added_tokens entry %zu: no content", i);
        max = SNUG_MAX(max, (int64_t)json_integer_value(id));
    }
    if (max < 0) return bad(err, path, "the vocabulary is empty");
    *n_vocab = (int32_t)max + 1;
    return SNUG_OK;
}

static snug_status read_model(snug_tokenizer **out, const json_t *root, const char *path,
                              snug_error *err)
{
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return bad(err, path, "no 'model' object");
    const char *mtype = json_string_value(json_object_get(model, "type"));
    char shown[64];
    if (mtype && strcmp(mtype, "BPE") != 0)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: model type '%s' is not supported (BPE is)",
                           path, snug_str_shown(mtype, shown, sizeof shown));
    const json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    const json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab)) return bad(err, path, "model.vocab is not an object");
    if (merges && !json_is_array(merges)) return bad(err, path, "model.merges is not a list");
    const json_t *pre = json_object_get(root, "pre_tokenizer"), *norm = json_object_get(root, "normalizer");
    const json_t *dec = json_object_get(root, "decoder");
    tok_kind kind;
    if (mentions_type(pre, "ByteLevel") || mentions_type(dec, "ByteLevel"))
        kind = TOK_BYTE_LEVEL;
    else if (mentions_type(pre, "Metaspace") || mentions_type(norm, "Prepend") ||
             mentions_type(norm, "Replace") || json_is_true(json_object_get(model, "byte_fallback")))
        kind = TOK_SENTENCEPIECE;
    else
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: neither a byte-level nor a "
                           "sentencepiece-style BPE tokenizer", path);
    int32_t n_vocab = 0;
    snug_status st = scan_ids(vocab, added, path, &n_vocab, err);
    if (st != SNUG_OK) return st;
    snug_tokenizer *t = NULL;
    added_info *info = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n_vocab * sizeof *info, err);
    if (!info) return SNUG_NOMEM;
    st = tok_create(path, kind, n_vocab, &t, err);
    if (st != SNUG_OK) goto done;
    for (size_t i = 0; i < json_array_size(added); i++) {
        const json_t *a = json_array_get(added, i);
        added_info *x = &info[json_integer_value(json_object_get(a, "id"))];
        x->content = json_string_value(json_object_get(a, "content"));
        x->special = json_is_true(json_object_get(a, "special"));
        x->lstrip = json_is_true(json_object_get(a, "lstrip"));
        x->rstrip = json_is_true(json_object_get(a, "rstrip"));
    }
    t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    t->merge_mode = TOK_MERGE_RANKS;
    st = read_vocab(t, model, added, info, path, err);
    if (st == SNUG_OK) st = tok_index(t, err);
    if (st == SNUG_OK) st = read_merges(t, merges, path, err);
    for (int32_t id = 0; st == SNUG_OK && id < n_vocab; id++)
        if (info[id].content) st = tok_add_added(t, id, info[id].special, info[id].lstrip, info[id].rstrip, err);
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    if (st == SNUG_OK && unk) t->unk = tok_find_any(t, unk, strlen(unk));
    if (st == SNUG_OK) st = each_stage(t, norm, "normalizers", normalizer, path, err);
    if (st == SNUG_OK) st = each_stage(t, pre, "pretokenizers", pre_tokenizer, path, err);
    if (st == SNUG_OK) st = each_stage(t, dec, "decoders", decoder, path, err);
    if (st == SNUG_OK)
        st = each_stage(t, json_object_get(root, "post_processor"), "processors", post_processor, path, err);
done:
    snug_mem_free(info);
    if (st != SNUG_OK) {
        snug_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SNUG_OK;
}

/* ---- tokenizer_config.json, generation_config.json ---------------------------- */

/* A token given as "text" or as {"content": "text", ...}; NULL if absent. */
static const char *token_field(const json_t *cfg, const char *key)
{
    const json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_string_value(v);
}

/* The chat_template of a tokenizer_config.json into *dst (left NULL when
 * absent): a string, or a list of {"name", "template"} of which the one named
 * "default" (else the first) is taken. */
static snug_status read_chat_template(const json_t *cfg, const char *path, char **dst, snug_error *err)
{
    const json_t *tpl = json_object_get(cfg, "chat_template");
    if (json_is_array(tpl)) {
        const json_t *pick = NULL;
        for (size_t i = 0; i < json_array_size(tpl); i++) {
            const char *name = json_string_value(json_object_get(json_array_get(tpl, i), "name"));
            if (!pick || (name && strcmp(name, "default") == 0)) pick = json_array_get(tpl, i);
        }
        tpl = json_object_get(pick, "template");
    }
    if (!tpl || json_is_null(tpl)) return SNUG_OK;
    if (!json_is_string(tpl)) return bad(err, path, "chat_template is not a string or a list of named templates");
    return tok_set_string(dst, json_string_value(tpl), err);
}

static snug_status read_tokenizer_config(snug_tokenizer *t, const char *path, snug_error *err)
{
    json_t *cfg = NULL;
    snug_status st = snug_json_load_file_opts(path, CONFIG_MAX_BYTES, SNUG_JSON_INTS_AS_REALS, &cfg, err);
    if (st != SNUG_OK) return st;
    const char *bos = token_field(cfg, "bos_token"), *eos = token_field(cfg, "eos_token");
    char shown[64];
    if (bos) {
        t->bos = tok_find_any(t, bos, strlen(bos));
        if (t->bos < 0)
            st = bad(err, path, "bos_token '%s' is not in the vocabulary", snug_str_shown(bos, shown, sizeof shown));
        if (st == SNUG_OK) st = tok_set_string(&t->bos_text, bos, err);
    }
    if (st == SNUG_OK && eos) {
        t->eos = tok_find_any(t, eos, strlen(eos));
        if (t->eos < 0)
            st = bad(err, path, "eos_token '%s' is not in the vocabulary", snug_str_shown(eos, shown, sizeof shown));
        if (st == SNUG_OK) st = tok_set_string(&t->eos_text, eos, err);
    }
    if (st == SNUG_OK) st = snug_json_get_bool(cfg, "add_bos_token", path, false, &t->add_bos, NULL, err);
    if (st == SNUG_OK) st = snug_json_get_bool(cfg, "add_eos_token", path, false, &t->add_eos, NULL, err);
    if (st == SNUG_OK) st = read_chat_template(cfg, path, &t->chat_template, err);
    json_decref(cfg);
    return st;
}

snug_status snug_chat_config_load(const char *path, snug_chat_config *out, snug_error *err)
{
    json_t *cfg = NULL;
    memset(out, 0, sizeof *out);
    snug_status st = snug_json_load_file_opts(path, CONFIG_MAX_BYTES, SNUG_JSON_INTS_AS_REALS, &cfg, err);
    if (st != SNUG_OK) return st;
    const char *bos = token_field(cfg, "bos_token"), *eos = token_field(cfg, "eos_token");
    st = read_chat_template(cfg, path, &out->chat_template, err);
    if (st == SNUG_OK) st = tok_set_string(&out->bos_text, bos ? bos : "", err);
    if (st == SNUG_OK) st = tok_set_string(&out->eos_text, eos ? eos : "", err);
    json_decref(cfg);
    if (st != SNUG_OK) snug_chat_config_free(out);
    return st;
}

void snug_chat_config_free(snug_chat_config *cfg)
{
    snug_mem_free(cfg->chat_template);
    snug_mem_free(cfg->bos_text);
    snug_mem_free(cfg->eos_text);
    memset(cfg, 0, sizeof *cfg);
}

static snug_status read_generation_config(snug_tokenizer *t, const char *path, snug_error *err)
{
    json_t *cfg = NULL;
    snug_status st = snug_json_load_file(path, CONFIG_MAX_BYTES, &cfg, err);
    if (st != SNUG_OK) return st;
    const json_t *eos = json_object_get(cfg, "eos_token_id");
    size_t n = json_is_array(eos) ? json_array_size(eos) : json_is_integer(eos) ? 1 : 0;
    if (eos && !json_is_null(eos) && n == 0 && !json_is_array(eos))
        st = bad(err, path, "eos_token_id is not an id or a list of ids");
    for (size_t i = 0; st == SNUG_OK && i < n; i++) {
        const json_t *v = json_is_array(eos) ? json_array_get(eos, i) : eos;
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= t->n_vocab)
            st = bad(err, path, "eos_token_id entry %zu is not an id in the vocabulary", i);
        else if (t->n_eos_ids < TOK_MAX_EOS)
            t->eos_ids[t->n_eos_ids++] = (int32_t)json_integer_value(v);
    }
    json_decref(cfg);
    return st;
}

snug_status tok_read_configs(snug_tokenizer *t, const char *dir, snug_error *err)
{
    char path[4096];
    snug_status st = snug_path_join(path, sizeof path, dir, "tokenizer_config.json", err);
    if (st == SNUG_OK && snug_file_exists(path)) st = read_tokenizer_config(t, path, err);
    if (st == SNUG_OK) st = snug_path_join(path, sizeof path, dir, "generation_config.json", err);
    if (st == SNUG_OK && snug_file_exists(path)) st = read_generation_config(t, path, err);
    return st;
}

snug_status tok_read_json(const char *path, snug_tokenizer **out, snug_error *err)
{
    json_t *root = NULL;
    snug_tokenizer *t = NULL;
    char dir[4096];
    snug_status st = snug_json_load_file(path, TOKENIZER_JSON_MAX_BYTES, &root, err);
    if (st == SNUG_OK) st = read_model(&t, root, path, err);
    json_decref(root);
    if (st != SNUG_OK) return st;
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    st = tok_read_configs(t, dir, err);
    if (st == SNUG_OK) st = tok_finish(t, err);
    if (st != SNUG_OK) {
        snug_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SNUG_OK;
}
