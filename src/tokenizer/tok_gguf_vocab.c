/*
 * tok_gguf_vocab.c: the vocabulary stored in a GGUF file (keys
 * tokenizer.ggml.*), read through the strict reader of gguf.h; the arrays
 * (tokens, scores, token types, merges) are read here from the file, every
 * length checked against the array and the file.
 *
 * tokenizer.ggml.model "llama": sentencepiece-style, pieces with U+2581,
 * merged by score, SentencePiece piece types (token_type), byte fallback
 * tokens <0xAB>; add_space_prefix (default true). "gpt2": byte-level, token
 * texts in GPT-2's alphabet (control and user-defined tokens as they are),
 * merged by tokenizer.ggml.merges ("left right"), pre-split as
 * tokenizer.ggml.pre names: gpt-2, llama-bpe (Llama 3), qwen2 (Qwen2, Qwen3),
 * gpt-4o (Phi-4-mini), deepseek-r1-qwen / deepseek-v3, smollm. Other
 * models and pre-tokenizers are refused, naming them. Special ids
 * (bos/eos/unknown/eot/eom; 0xFFFFFFFF is none), add_bos_token,
 * add_eos_token and tokenizer.chat_template are read too.
 */
#include "tok_internal.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "formats/gguf.h"

#include <math.h>
#include <string.h>

enum { READ_BUF = 64 * 1024, TOKEN_MAX_BYTES = 65536 };

static const char K_MODEL[] = "tokenizer.ggml.model", K_PRE[] = "tokenizer.ggml.pre",
                  K_TOKENS[] = "tokenizer.ggml.tokens", K_SCORES[] = "tokenizer.ggml.scores",
                  K_TYPES[] = "tokenizer.ggml.token_type", K_MERGES[] = "tokenizer.ggml.merges";

/* Reads an array's elements in order through a buffer. */
typedef struct arr_reader {
    const snug_gguf_file *f;
    const char *key;
    uint64_t pos, buf_off;
    size_t buf_len;
    uint8_t buf[READ_BUF];
} arr_reader;

static snug_status ar_read(arr_reader *r, void *dst, size_t n, snug_error *err)
{
    uint8_t *d = dst;
    if (n > r->f->file_size || r->pos > r->f->file_size - n)
        return tok_bad(err, r->f->path, "key '%s': the array runs past the end of the file", r->key);
    while (n > 0) {
        if (r->pos < r->buf_off || r->pos >= r->buf_off + r->buf_len) {
            size_t want = (size_t)SNUG_MIN((uint64_t)READ_BUF, r->f->file_size - r->pos);
            snug_status st = snug_pread_full(r->f->fd, r->buf, want, r->pos, r->f->path, err);
            if (st != SNUG_OK) return st;
            r->buf_off = r->pos;
            r->buf_len = want;
        }
        size_t at = (size_t)(r->pos - r->buf_off), k = SNUG_MIN(n, r->buf_len - at);
        memcpy(d, r->buf + at, k);
        d += k;
        r->pos += k;
        n -= k;
    }
    return SNUG_OK;
}

/* Reads the next string of a string array into buf (cap bytes). */
static snug_status ar_string(arr_reader *r, uint64_t i, char *buf, size_t cap, size_t *len,
                             snug_error *err)
{
    uint8_t b[8];
    snug_status st = ar_read(r, b, 8, err);
    if (st != SNUG_OK) return st;
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--) n = n << 8 | b[k];
    if (n > cap)
        return tok_bad(err, r->f->path, "key '%s': element %llu is %llu bytes long; at most %zu",
                       r->key, (unsigned long long)i, (unsigned long long)n, cap);
    *len = (size_t)n;
    return ar_read(r, buf, (size_t)n, err);
}

/* Finds array key with elements of type, n of them when n_want >= 0. */
static snug_status find_array(const snug_gguf_file *f, const char *key, snug_gguf_type type,
                              int64_t n_want, bool required, const snug_gguf_kv **out,
                              snug_error *err)
{
    static const char *const names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32",
                                        "float32", "bool", "string", "array", "uint64", "int64",
                                        "float64"};
    const snug_gguf_kv *kv = snug_gguf_find(f, key);
    *out = NULL;
    if (!kv) return required ? tok_bad(err, f->path, "key '%s' is missing", key) : SNUG_OK;
    if (kv->type != SNUG_GGUF_ARRAY || kv->v.arr.type != type)
        return tok_bad(err, f->path, "key '%s': expected an array of %s, found %s%s", key,
                       names[type], kv->type == SNUG_GGUF_ARRAY ? "an array of " : "a ",
                       names[kv->type == SNUG_GGUF_ARRAY ? kv->v.arr.type : kv->type]);
    if (n_want >= 0 && kv->v.arr.n != (uint64_t)n_want)
        return tok_bad(err, f->path, "key '%s' has %llu elements; tokenizer.ggml.tokens has %lld",
                       key, (unsigned long long)kv->v.arr.n, (long long)n_want);
    *out = kv;
    return SNUG_OK;
}

/* Reads n elements of 4 bytes (float32 or int32) into out. */
static snug_status read_words(const snug_gguf_file *f, const snug_gguf_kv *kv, arr_reader *r,
                              uint32_t *out, int32_t n, snug_error *err)
{
    *r = (arr_reader){.f = f, .key = kv->key, .pos = kv->v.arr.offset};
    snug_status st = ar_read(r, out, (size_t)n * 4, err);
    for (int32_t i = 0; st == SNUG_OK && i < n; i++) { /* little-endian in the file */
        const uint8_t *b = (const uint8_t *)&out[i];
        out[i] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    }
    return st;
}

/* A special id: absent or 0xFFFFFFFF (or -1) is none. */
static snug_status special_id(const snug_gguf_file *f, const char *key, int32_t n, int32_t *id,
                              snug_error *err)
{
    int64_t v = -1;
    bool present = false;
    snug_status st = snug_gguf_get_int(f, key, false, -1, UINT32_MAX, &v, &present, err);
    if (st != SNUG_OK || !present) return st;
    if (v == UINT32_MAX) v = -1;
    if (v >= n) return tok_bad(err, f->path, "key '%s': %lld is not a token (0 to %d)", key, (long long)v, n - 1);
    *id = (int32_t)v;
    return SNUG_OK;
}

static snug_status get_bool(const snug_gguf_file *f, const char *key, bool *out, snug_error *err)
{
    const snug_gguf_kv *kv = snug_gguf_find(f, key);
    if (!kv) return SNUG_OK;
    if (kv->type != SNUG_GGUF_BOOL) return tok_bad(err, f->path, "key '%s' is not a bool", key);
    *out = kv->v.u != 0;
    return SNUG_OK;
}

/* The pre-split of a "gpt2" vocabulary, by tokenizer.ggml.pre. */
static snug_status set_pre(snug_tokenizer *t, const snug_gguf_file *f, snug_error *err)
{
    const char *pre = NULL;
    snug_status st = snug_gguf_get_string(f, K_PRE, false, &pre, NULL, err);
    if (st != SNUG_OK) return st;
    if (pre && (strcmp(pre, "gpt-2") == 0 || strcmp(pre, "gpt2") == 0))
        return tok_add_split(t, TOK_REGEX_GPT2, TOK_SPLIT_ISOLATED, err);
    if (pre && (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0)) {
        t->ignore_merges = true;
        return tok_add_split(t, TOK_REGEX_LLAMA3, TOK_SPLIT_ISOLATED, err);
    }
    if (pre && strcmp(pre, "qwen2") == 0) {
        t->nfc = true;
        return tok_add_split(t, TOK_REGEX_QWEN2, TOK_SPLIT_ISOLATED, err);
    }
    if (pre && strcmp(pre, "gpt-4o") == 0) /* Phi-4-mini */
        return tok_add_split(t, TOK_REGEX_O200K, TOK_SPLIT_ISOLATED, err);
    if (pre && (strcmp(pre, "deepseek-r1-qwen") == 0 || strcmp(pre, "deepseek-v3") == 0)) {
        for (int i = 0; i < 3 && st == SNUG_OK; i++)
            st = tok_add_split(t, TOK_REGEX_DEEPSEEK3[i], TOK_SPLIT_ISOLATED, err);
        return st;
    }
    if (pre && strcmp(pre, "smollm") == 0) {
        st = tok_add_digits(t, err);
        return st == SNUG_OK ? tok_add_split(t, TOK_REGEX_GPT2, TOK_SPLIT_ISOLATED, err) : st;
    }
    char shown[64];
    return snug_errorf(err, SNUG_UNSUPPORTED, "%s: %s '%s' is not supported (gpt-2, llama-bpe, "
                       "qwen2, gpt-4o, deepseek-r1-qwen, deepseek-v3 and smollm are)", f->path, K_PRE, pre ? snug_str_shown(pre, shown, sizeof shown)
                       : "(absent)");
}

/* Sets every token: its text, score and attribute. */
static snug_status read_tokens(snug_tokenizer *t, const snug_gguf_file *f, const snug_gguf_kv *tokens,
                               const float *scores, const uint8_t *types, arr_reader *r,
                               snug_error *err)
{
    char *buf = snug_mem_alloc(SNUG_MEM_OTHER, 2 * TOKEN_MAX_BYTES, err);
    if (!buf) return SNUG_NOMEM;
    char *text = buf + TOKEN_MAX_BYTES, shown[64];
    *r = (arr_reader){.f = f, .key = K_TOKENS, .pos = tokens->v.arr.offset};
    snug_status st = SNUG_OK;
    for (int32_t id = 0; id < t->n_vocab && st == SNUG_OK; id++) {
        size_t n;
        st = ar_string(r, (uint64_t)id, buf, TOKEN_MAX_BYTES, &n, err);
        if (st != SNUG_OK) break;
        tok_attr attr = tok_piece_attr(types[id]);
        float score = scores ? scores[id] : 0;
        if (t->kind == TOK_BYTE_LEVEL && attr == TOK_BYTE) {
            st = tok_bad(err, f->path, "token %d '%s' is a byte token in a byte-level (gpt2) "
                         "vocabulary", id, snug_bytes_shown(buf, n, shown, sizeof shown));
        } else if (t->kind == TOK_BYTE_LEVEL && types[id] == TOK_PIECE_NORMAL) {
            size_t k;
            if (!tok_chars_to_bytes(buf, n, text, &k))
                st = tok_bad(err, f->path, "token %d '%s' is not written in the byte-level "
                             "alphabet", id, snug_bytes_shown(buf, n, shown, sizeof shown));
            else
                st = tok_set(t, id, text, k, score, attr, err);
        } else {
            st = tok_set(t, id, buf, n, score, attr, err);
        }
    }
    snug_mem_free(buf);
    return st;
}

/* Reads tokenizer.ggml.merges ("left right" in GPT-2's alphabet). */
static snug_status read_merges(snug_tokenizer *t, const snug_gguf_file *f, const snug_gguf_kv *m,
                               arr_reader *r, snug_error *err)
{
    char *buf = snug_mem_alloc(SNUG_MEM_OTHER, 2 * TOKEN_MAX_BYTES, err);
    if (!buf) return SNUG_NOMEM;
    char *raw = buf + TOKEN_MAX_BYTES, shown[72];
    *r = (arr_reader){.f = f, .key = K_MERGES, .pos = m->v.arr.offset};
    snug_status st = SNUG_OK;
    for (uint64_t i = 0; i < m->v.arr.n && st == SNUG_OK; i++) {
        size_t n, nl, nr;
        st = ar_string(r, i, buf, TOKEN_MAX_BYTES / 2, &n, err);
        if (st != SNUG_OK) break;
        const char *sp = memchr(buf, ' ', n);
        if (!sp || sp == buf || sp + 1 == buf + n || memchr(sp + 1, ' ', (size_t)(buf + n - sp - 1))) {
            st = tok_bad(err, f->path, "%s entry %llu '%s' is not two tokens separated by a space",
                         K_MERGES, (unsigned long long)i, snug_bytes_shown(buf, n, shown, sizeof shown));
        } else if (!tok_chars_to_bytes(buf, (size_t)(sp - buf), raw, &nl) ||
                   !tok_chars_to_bytes(sp + 1, (size_t)(buf + n - sp - 1), raw + nl, &nr)) {
            st = tok_bad(err, f->path, "%s entry %llu '%s' is not written in the byte-level alphabet",
                         K_MERGES, (unsigned long long)i, snug_bytes_shown(buf, n, shown, sizeof shown));
        } else {
            st = tok_add_merge(t, raw, nl, raw + nl, nr, err);
            if (st != SNUG_OK)
                st = snug_error_context(err, st, f->path, "%s entry %llu: ", K_MERGES, (unsigned long long)i);
        }
    }
    snug_mem_free(buf);
    return st;
}

snug_status tok_from_gguf(const snug_gguf_file *f, snug_tokenizer **out, snug_error *err)
{
    const char *model = NULL, *tpl = NULL;
    const snug_gguf_kv *tokens = NULL, *scores_kv = NULL, *types_kv = NULL, *merges = NULL;
    snug_tokenizer *t = NULL;
    float *scores = NULL;
    uint8_t *types = NULL;
    uint32_t *words = NULL;
    arr_reader *r = NULL;
    snug_status st = snug_gguf_get_string(f, K_MODEL, true, &model, NULL, err);
    if (st != SNUG_OK) return st;
    bool llama = strcmp(model, "llama") == 0;
    char shown[64];
    if (!llama && strcmp(model, "gpt2") != 0)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: %s '%s' is not supported (llama and gpt2 "
                           "are)", f->path, K_MODEL, snug_str_shown(model, shown, sizeof shown));
    st = find_array(f, K_TOKENS, SNUG_GGUF_STRING, -1, true, &tokens, err);
    if (st != SNUG_OK) return st;
    if (tokens->v.arr.n == 0 || tokens->v.arr.n > (1 << 24))
        return tok_bad(err, f->path, "key '%s' has %llu tokens; expected 1 to %d", K_TOKENS,
                       (unsigned long long)tokens->v.arr.n, 1 << 24);
    int32_t n = (int32_t)tokens->v.arr.n;
    st = find_array(f, K_SCORES, SNUG_GGUF_FLOAT32, n, llama, &scores_kv, err);
    if (st == SNUG_OK) st = find_array(f, K_TYPES, SNUG_GGUF_INT32, n, llama, &types_kv, err);
    if (st == SNUG_OK) st = find_array(f, K_MERGES, SNUG_GGUF_STRING, -1, !llama, &merges, err);
    if (st != SNUG_OK) return st;
    r = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *r, err);
    words = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n * 4, err);
    scores = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n * sizeof *scores, err);
    types = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n, err);
    if (!r || !words || !scores || !types) {
        st = SNUG_NOMEM;
        goto done;
    }
    memset(types, TOK_PIECE_NORMAL, (size_t)n);
    if (scores_kv) {
        st = read_words(f, scores_kv, r, words, n, err);
        for (int32_t i = 0; st == SNUG_OK && i < n; i++) {
            memcpy(&scores[i], &words[i], sizeof *scores);
            if (!isfinite(scores[i])) st = tok_bad(err, f->path, "%s: token %d's score is not finite", K_SCORES, i);
        }
    }
    if (st == SNUG_OK && types_kv) {
        st = read_words(f, types_kv, r, words, n, err);
        for (int32_t i = 0; st == SNUG_OK && i < n; i++) {
            if (words[i] < 1 || words[i] > 6)
                st = tok_bad(err, f->path, "%s: token %d has type %d; expected 1 (normal) to 6 (byte)",
                             K_TYPES, i, (int32_t)words[i]);
            types[i] = (uint8_t)words[i];
        }
    }
    if (st == SNUG_OK) st = tok_create(f->path, llama ? TOK_SENTENCEPIECE : TOK_BYTE_LEVEL, n, &t, err);
    if (st == SNUG_OK) st = read_tokens(t, f, tokens, scores_kv ? scores : NULL, types, r, err);
    if (st == SNUG_OK) st = tok_index(t, err);
    if (st == SNUG_OK && merges) st = read_merges(t, f, merges, r, err);
    if (st == SNUG_OK) st = tok_add_piece_tokens(t, types, err);
    if (st == SNUG_OK && !llama) st = set_pre(t, f, err);
    if (st != SNUG_OK) goto done;
    t->merge_mode = llama ? TOK_MERGE_SCORES : TOK_MERGE_RANKS;
    if (llama) {
        bool space_prefix = true;
        st = get_bool(f, "tokenizer.ggml.add_space_prefix", &space_prefix, err);
        t->spm_escape_spaces = true;
        t->spm_prepend = space_prefix ? TOK_PREPEND_EVERY : TOK_PREPEND_NEVER;
        t->strip_leading_space = space_prefix;
        for (int32_t i = 0; i < n; i++)
            if (types[i] == TOK_PIECE_UNKNOWN) t->unk = i;
    }
    t->add_bos = llama;
    if (st == SNUG_OK) st = get_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err);
    if (st == SNUG_OK) st = get_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err);
    if (st == SNUG_OK) st = special_id(f, "tokenizer.ggml.bos_token_id", n, &t->bos, err);
    if (st == SNUG_OK) st = special_id(f, "tokenizer.ggml.eos_token_id", n, &t->eos, err);
    if (st == SNUG_OK) st = special_id(f, "tokenizer.ggml.unknown_token_id", n, &t->unk, err);
    const char *eos_keys[] = {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(eos_keys) && st == SNUG_OK; i++) {
        int32_t id = -1;
        st = special_id(f, eos_keys[i], n, &id, err);
        if (st == SNUG_OK && id >= 0 && t->n_eos_ids < TOK_MAX_EOS) t->eos_ids[t->n_eos_ids++] = id;
    }
    if (st == SNUG_OK) st = snug_gguf_get_string(f, "tokenizer.chat_template", false, &tpl, NULL, err);
    if (st == SNUG_OK && tpl) st = tok_set_string(&t->chat_template, tpl, err);
    if (st == SNUG_OK) st = tok_native_finish(t, NULL, err);
done:
    snug_mem_free(r);
    snug_mem_free(words);
    snug_mem_free(scores);
    snug_mem_free(types);
    if (st != SNUG_OK) {
        snug_tokenizer_free(t);
        return tok_named(err, st, f->path);
    }
    *out = t;
    return SNUG_OK;
}

snug_status tok_read_gguf(const char *path, snug_tokenizer **out, snug_error *err)
{
    snug_gguf_file *f = NULL;
    snug_status st = snug_gguf_open(path, &f, err);
    if (st == SNUG_OK) st = tok_from_gguf(f, out, err);
    snug_gguf_close(f);
    return st == SNUG_OK ? st : tok_named(err, st, path);
}
