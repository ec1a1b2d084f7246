/*
 * tok_gguf_write.c: a tokenizer written as the GGUF keys tokenizer.ggml.*
 * that llama.cpp and tok_gguf_vocab.c read (the inverse of that reader):
 * byte-level vocabularies as model "gpt2" (token texts in GPT-2's
 * alphabet, the merge list in rank order, the pre-split by the name the
 * reader gives its regexes), sentencepiece ones as "llama" (texts with
 * U+2581, scores, byte tokens "<0xAB>"; a merge list turned into scores);
 * token types,
 * special ids, add_bos/add_eos and the chat template with them.
 */
#include "tok_internal.h"

#include "base/mem.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"

#include <string.h>

/* The pre-tokenizer name tok_gguf_vocab.c's set_pre maps to t's pre-split
 * (and to its side flags), or NULL. */
static const char *pre_name(const snug_tokenizer *t)
{
    const tok_pretok *p = t->pretok;
    bool plain = !t->nfc && !t->ignore_merges && !t->byte_level_prefix_space;
    for (int32_t i = 0; i < t->n_pretok; i++)
        if (p[i].behavior != TOK_SPLIT_ISOLATED) return NULL;
    if (t->n_pretok == 1 && strcmp(p[0].pattern, TOK_REGEX_GPT2) == 0 && plain) return "gpt-2";
    if (t->n_pretok == 1 && strcmp(p[0].pattern, TOK_REGEX_LLAMA3) == 0 && t->ignore_merges && !t->nfc &&
        !t->byte_level_prefix_space)
        return "llama-bpe";
    if (t->n_pretok == 1 && strcmp(p[0].pattern, TOK_REGEX_QWEN2) == 0 && t->nfc && !t->ignore_merges &&
        !t->byte_level_prefix_space)
        return "qwen2";
    if (t->n_pretok == 1 && strcmp(p[0].pattern, TOK_REGEX_O200K) == 0 && plain) return "gpt-4o";
    if (t->n_pretok == 3 && plain) {
        bool same = true;
        for (int i = 0; i < 3; i++) same &= strcmp(p[i].pattern, TOK_REGEX_DEEPSEEK3[i]) == 0;
        if (same) return "deepseek-v3";
    }
    if (t->n_pretok == 2 && strcmp(p[0].pattern, "\\p{N}") == 0 && strcmp(p[1].pattern, TOK_REGEX_GPT2) == 0 && plain)
        return "smollm";
    return NULL;
}

/* Whether token id is an added token matched only as special text. */
static bool added_special(const snug_tokenizer *t, int32_t id)
{
    for (int32_t i = 0; i < t->n_added; i++)
        if (t->added[i].id == id) return t->added[i].special;
    return true; /* a special token no text matches: a control token */
}

/* GGUF's token type of id (llama.cpp's llama_token_type). */
static int32_t piece_type(const snug_tokenizer *t, int32_t id)
{
    switch (t->entries[id].attr) {
    case TOK_NORMAL: return TOK_PIECE_NORMAL;
    case TOK_UNKNOWN: return TOK_PIECE_UNKNOWN;
    case TOK_BYTE: return TOK_PIECE_BYTE;
    case TOK_SPECIAL: return added_special(t, id) ? TOK_PIECE_CONTROL : TOK_PIECE_USER_DEFINED;
    default: return TOK_PIECE_UNUSED;
    }
}

/* Token id's text as the file holds it into buf (at least 2 tok_text
 * bytes): byte-level normal tokens in GPT-2's alphabet, the rest as they
 * are; returns its length. */
static size_t file_text(const snug_tokenizer *t, int32_t id, char *buf)
{
    size_t n;
    const char *s = tok_text(t, id, &n);
    if (t->kind != TOK_BYTE_LEVEL || t->entries[id].attr != TOK_NORMAL) {
        memcpy(buf, s, n);
        return n;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += tok_byte_to_char((uint8_t)s[i], buf + o);
    return o;
}

/* The merge list, "left right" in rank order (for a vocabulary merged by
 * scores, the list tok_derive_merges gives, which merges the same). */
static snug_status put_merges(const snug_tokenizer *t, snug_gguf_header *h, char *buf, snug_error *err)
{
    int32_t *pairs = NULL, n = 0;
    snug_status st = tok_merge_pairs(t, &pairs, &n, err);
    if (st == SNUG_OK) {
        snug_gguf_put_array(h, "tokenizer.ggml.merges", SNUG_GGUF_STRING, (uint64_t)n);
        for (int32_t i = 0; i < n; i++) {
            size_t a = file_text(t, pairs[2 * i], buf);
            buf[a] = ' ';
            size_t b = file_text(t, pairs[2 * i + 1], buf + a + 1);
            snug_gguf_put_elem_string(h, buf, a + 1 + b);
        }
    }
    snug_mem_free(pairs);
    return st;
}

/* The scores of a sentencepiece vocabulary: its own, or for one merged by
 * a list (a tokenizer.json of Llama 2's kind, whose list Hugging Face
 * derived from the scores: every split of a token in a row) minus the rank
 * of the first merge that makes the token, so that merging by score takes
 * the list's order; tokens no merge makes score 0 (never a merge's
 * result, their score is never asked). */
static void spm_scores(const snug_tokenizer *t, float *score)
{
    for (int32_t id = 0; id < t->n_vocab; id++) score[id] = t->merge_mode == TOK_MERGE_SCORES ? t->entries[id].score : 0.0f;
    if (t->merge_mode == TOK_MERGE_SCORES) return;
    for (uint32_t i = 0; i < t->merge_cap; i++) {
        const struct tok_merge *m = &t->merges[i];
        if (m->key && m->result >= 0 && m->result < t->n_vocab &&
            (score[m->result] == 0.0f || -(float)(m->rank + 1) > score[m->result]))
            score[m->result] = -(float)(m->rank + 1);
    }
}

/* SNUG_UNSUPPORTED, saying why, where GGUF cannot hold t (pre: its
 * pre-split's GGUF name, for a byte-level t); SNUG_OK otherwise. */
static snug_status check_holds(const snug_tokenizer *t, const char *pre, snug_error *err)
{
    if (t->kind == TOK_BYTE_LEVEL && !pre)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: its pre-tokenizer has none of the GGUF names (gpt-2, "
                           "llama-bpe, qwen2, gpt-4o, deepseek-v3, smollm)", t->source);
    if (t->kind != TOK_BYTE_LEVEL && (!t->spm_escape_spaces || t->spm_split || t->spm_prepend == TOK_PREPEND_FIRST ||
                                      (t->spm_prepend == TOK_PREPEND_EVERY) != t->strip_leading_space))
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: its sentencepiece options have no GGUF keys", t->source);
    for (int32_t i = 0; i < t->n_added; i++)
        if (t->added[i].lstrip || t->added[i].rstrip) {
            size_t n;
            const char *s = tok_text(t, t->added[i].id, &n);
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: added token %d '%.*s' takes the whitespace beside it "
                               "(lstrip/rstrip), which GGUF has no key for", t->source, t->added[i].id,
                               (int)SNUG_MIN(n, (size_t)40), s);
        }
    return SNUG_OK;
}

/* The special ids (bos and eos where asked), add_bos/add_eos and the chat
 * template. */
static void put_specials(const snug_tokenizer *t, snug_gguf_header *h, bool put_bos, bool put_eos)
{
    if (put_bos && t->bos >= 0) snug_gguf_put_u32(h, "tokenizer.ggml.bos_token_id", (uint32_t)t->bos);
    if (put_eos && t->eos >= 0) snug_gguf_put_u32(h, "tokenizer.ggml.eos_token_id", (uint32_t)t->eos);
    if (t->unk >= 0) snug_gguf_put_u32(h, "tokenizer.ggml.unknown_token_id", (uint32_t)t->unk);
    /* the other end-of-sequence ids as llama.cpp's end-of-turn and end-of-message */
    static const char *const more[] = {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"};
    size_t k = 0;
    for (int32_t i = 0; i < t->n_eos_ids && k < SNUG_ARRAY_LEN(more); i++)
        if (t->eos_ids[i] != t->eos) snug_gguf_put_u32(h, more[k++], (uint32_t)t->eos_ids[i]);
    snug_gguf_put_bool(h, "tokenizer.ggml.add_bos_token", t->add_bos);
    snug_gguf_put_bool(h, "tokenizer.ggml.add_eos_token", t->add_eos);
    if (t->chat_template) snug_gguf_put_string(h, "tokenizer.chat_template", t->chat_template);
}

snug_status snug_tokenizer_put_gguf(const snug_tokenizer *t, snug_gguf_header *h, bool put_bos, bool put_eos,
                                    snug_error *err)
{
    bool byte_level = t->kind == TOK_BYTE_LEVEL;
    const char *pre = byte_level ? pre_name(t) : NULL;
    snug_status st = check_holds(t, pre, err);
    if (st != SNUG_OK) return st; /* before anything is put or held */
    char *buf = snug_mem_alloc(SNUG_MEM_OTHER, 4 * t->max_token_bytes + 8, err);
    float *score = byte_level ? NULL : snug_mem_alloc(SNUG_MEM_OTHER, (size_t)t->n_vocab * sizeof *score, err);
    if (!buf || (!byte_level && !score)) st = SNUG_NOMEM;
    if (st == SNUG_OK) {
        snug_gguf_put_string(h, "tokenizer.ggml.model", byte_level ? "gpt2" : "llama");
        if (pre) snug_gguf_put_string(h, "tokenizer.ggml.pre", pre);
        snug_gguf_put_array(h, "tokenizer.ggml.tokens", SNUG_GGUF_STRING, (uint64_t)t->n_vocab);
        for (int32_t id = 0; id < t->n_vocab; id++) snug_gguf_put_elem_string(h, buf, file_text(t, id, buf));
        if (!byte_level) {
            spm_scores(t, score);
            snug_gguf_put_array(h, "tokenizer.ggml.scores", SNUG_GGUF_FLOAT32, (uint64_t)t->n_vocab);
            for (int32_t id = 0; id < t->n_vocab; id++) snug_gguf_put_elem_f32(h, score[id]);
            snug_gguf_put_bool(h, "tokenizer.ggml.add_space_prefix", t->spm_prepend == TOK_PREPEND_EVERY);
        }
        snug_gguf_put_array(h, "tokenizer.ggml.token_type", SNUG_GGUF_INT32, (uint64_t)t->n_vocab);
        for (int32_t id = 0; id < t->n_vocab; id++) snug_gguf_put_elem_i32(h, piece_type(t, id));
        if (byte_level) st = put_merges(t, h, buf, err);
    }
    if (st == SNUG_OK) put_specials(t, h, put_bos, put_eos);
    snug_mem_free(score);
    snug_mem_free(buf);
    return st;
}
