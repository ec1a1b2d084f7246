/*
 * tok_internal.h: the in-memory tokenizer that every format reader builds
 * (tok_json.c, tok_native.c, ...) and the encoder and decoder use.
 *
 * Two kinds cover the Llama-family tokenizers:
 *   byte-level  token texts are raw bytes; text is pre-split by regexes and
 *               every piece starts as one symbol per byte (GPT-2, Llama 3,
 *               Qwen2, SmolLM);
 *   sentencepiece  token texts use U+2581 for spaces; text is normalized
 *               (spaces replaced, a prefix space added) and every piece
 *               starts as one symbol per character; characters no token
 *               covers fall back to byte tokens "<0xAB>" (Llama 2, Mistral).
 * Symbols are merged by BPE in priority order: either a merge list gives
 * each pair a rank (tokenizer.json, merges.txt), or the merged token's own
 * score does (SentencePiece models, llama2.c, tiktoken, GGUF "llama").
 */
#ifndef SNUG_TOK_INTERNAL_H
#define SNUG_TOK_INTERNAL_H

#include "regex.h"
#include "tokenizer.h"

typedef enum tok_kind { TOK_BYTE_LEVEL = 0, TOK_SENTENCEPIECE = 1 } tok_kind;

typedef enum tok_merge_mode {
    TOK_MERGE_RANKS = 0,   /* pair -> rank from a merge list (lower first) */
    TOK_MERGE_SCORES = 1   /* pair -> score of the merged token (higher first) */
} tok_merge_mode;

typedef enum tok_attr {
    TOK_UNUSED = 0,        /* no token has this id */
    TOK_NORMAL = 1,        /* produced by BPE from text */
    TOK_SPECIAL = 2,       /* control or added token: never produced by BPE */
    TOK_BYTE = 3,          /* sentencepiece byte fallback "<0xAB>" */
    TOK_UNKNOWN = 4        /* the unknown token */
} tok_attr;

typedef struct tok_entry {
    uint32_t off, len;     /* text in the tokenizer's pool */
    float score;
    uint8_t attr;          /* tok_attr */
    uint8_t byte;          /* the byte of a TOK_BYTE token */
} tok_entry;

typedef enum tok_split_behavior {
    TOK_SPLIT_ISOLATED = 0,  /* matches and the text between them are pieces */
    TOK_SPLIT_REMOVED = 1    /* the text between matches is, the matches go */
} tok_split_behavior;

typedef struct tok_pretok {
    char *pattern;           /* as given, for writing tokenizer.json */
    snug_regex *re;
    tok_split_behavior behavior;
} tok_pretok;

typedef struct tok_added {
    int32_t id;
    bool special;            /* matched only when special text is parsed */
    bool lstrip, rstrip;     /* takes the whitespace on that side with it */
} tok_added;

enum { TOK_MAX_PRETOK = 8, TOK_MAX_EOS = 8 };

typedef enum tok_prepend {
    TOK_PREPEND_NEVER = 0,
    TOK_PREPEND_EVERY = 1,   /* every text segment (a Prepend normalizer) */
    TOK_PREPEND_FIRST = 2    /* only the segment at the start of the input */
} tok_prepend;

struct snug_tokenizer {
    char *source;            /* for messages */
    tok_kind kind;
    tok_merge_mode merge_mode;
    bool ignore_merges;      /* a piece that is a token is that token */
    bool nfc;                /* text is normalized to Unicode NFC before pre-tokenization */
    int32_t n_vocab;
    tok_entry *entries;      /* [n_vocab] */
    char *text;              /* token texts */
    size_t text_len, text_cap;
    int32_t *hash;           /* texts of TOK_NORMAL tokens -> id; -1 empty */
    uint32_t hash_cap;
    struct tok_merge {
        uint64_t key;        /* left << 32 | right; 0 empty (ids are offset by 1) */
        int32_t rank, result;
    } *merges;
    uint32_t merge_cap;
    int32_t n_merges;
    int32_t byte_ids[256];   /* the token of each single byte (-1: none) */
    int32_t n_pretok;
    tok_pretok pretok[TOK_MAX_PRETOK];
    bool byte_level_prefix_space; /* byte-level: a space before the first piece */
    bool spm_escape_spaces;  /* sentencepiece: ' ' -> U+2581 */
    tok_prepend spm_prepend; /* sentencepiece: where a U+2581 is put in front */
    bool spm_split;          /* sentencepiece: a piece starts at every U+2581 */
    bool spm_word_starts;    /* no token joins a character to a following U+2581, so BPE
                              * words may start at every run of them (found by tok_index) */
    bool strip_leading_space; /* decoding drops the output's first space */
    int32_t n_added;
    tok_added *added;        /* sorted by text length, longest first */
    bool added_first[256];   /* bytes an added token can start with */
    int32_t bos, eos, unk;
    bool add_bos, add_eos;
    int32_t n_eos_ids;
    int32_t eos_ids[TOK_MAX_EOS];
    char *chat_template, *bos_text, *eos_text;
    size_t max_token_bytes;
};

/* ---- building (format readers) -------------------------------------------- */

/* Makes an empty tokenizer of n_vocab ids (all TOK_UNUSED). source names
 * the file for messages. */
snug_status tok_create(const char *source, tok_kind kind, int32_t n_vocab, snug_tokenizer **out,
                       snug_error *err);

/* Sets token id: its text (raw bytes for byte-level; U+2581 for spaces for
 * sentencepiece), score and attribute. An id outside the vocabulary or set
 * twice fails naming it. For a sentencepiece TOK_BYTE token the text must
 * be "<0xAB>" (two hex digits). */
snug_status tok_set(snug_tokenizer *t, int32_t id, const char *text, size_t len, float score,
                    tok_attr attr, snug_error *err);

/* Builds the text index once every token is set: two normal tokens with the
 * same text fail naming both ids. */
snug_status tok_index(snug_tokenizer *t, snug_error *err);

/* Appends a merge of two token texts (rank = merges added so far). Both
 * halves and their concatenation must be tokens; a merge that fails names
 * the entry by its number. Call after tok_index. */
snug_status tok_add_merge(snug_tokenizer *t, const char *left, size_t left_len,
                          const char *right, size_t right_len, snug_error *err);

/* Declares token id (already set) an added token matched in text before
 * BPE. Call after tok_index. */
snug_status tok_add_added(snug_tokenizer *t, int32_t id, bool special, bool lstrip, bool rstrip,
                          snug_error *err);

/* Adds a pre-tokenizer stage: split by pattern (a PCRE2 regex). */
snug_status tok_add_split(snug_tokenizer *t, const char *pattern, tok_split_behavior behavior,
                          snug_error *err);

/* Adds a pre-tokenizer stage: every numeric character (Unicode N) its own
 * piece, as Hugging Face's Digits(individual_digits) does. */
snug_status tok_add_digits(snug_tokenizer *t, snug_error *err);

/* Looks up the id of a normal token's text; -1 when none. */
int32_t tok_lookup(const snug_tokenizer *t, const char *text, size_t len);

/* Looks up a token of any attribute by its text (linear); -1 when none. */
int32_t tok_find_any(const snug_tokenizer *t, const char *text, size_t len);

/* The merge of two ids: its rank and resulting id; false when none. */
bool tok_merge_find(const snug_tokenizer *t, int32_t left, int32_t right, int32_t *rank,
                    int32_t *result);

/* Copies a string into the tokenizer's memory (for chat_template, bos/eos
 * text); *dst is replaced (the old one freed). */
snug_status tok_set_string(char **dst, const char *src, snug_error *err);

/* The token's text (not NUL-terminated) and its length. */
static inline const char *tok_text(const snug_tokenizer *t, int32_t id, size_t *len)
{
    *len = t->entries[id].len;
    return t->text + t->entries[id].off;
}

/* Parses "<0xAB>" into its byte; false for anything else. */
bool tok_parse_byte_token(const char *s, size_t n, uint8_t *byte);

/* GPT-2's byte-level alphabet: the character each byte is written as in
 * vocab files (UTF-8, 1 or 2 bytes) into out; returns its length. */
size_t tok_byte_to_char(uint8_t b, char out[2]);

/* Decodes byte-level alphabet text into raw bytes (out holds at least n
 * bytes); false when a character is not in the alphabet. */
bool tok_chars_to_bytes(const char *s, size_t n, char *out, size_t *out_len);

/* The regexes of the byte-level families (their reference pre-split):
 * GPT-2's, Llama 3's, Qwen2's, o200k's (GPT-4o; Phi-4-mini), and the three
 * DeepSeek-V3 splits in turn (digits by three, CJK runs, the rest; the
 * DeepSeek-R1 distills of Qwen). */
extern const char TOK_REGEX_GPT2[], TOK_REGEX_LLAMA3[], TOK_REGEX_QWEN2[], TOK_REGEX_O200K[];
extern const char *const TOK_REGEX_DEEPSEEK3[3];

/* Reads the optional tokenizer_config.json and generation_config.json of
 * dir into t: bos/eos tokens and their text, add_bos_token/add_eos_token,
 * chat_template, end-of-sequence ids. */
snug_status tok_read_configs(snug_tokenizer *t, const char *dir, snug_error *err);

/* Reads a Hugging Face tokenizer.json (and the configs beside it). */
snug_status tok_read_json(const char *path, snug_tokenizer **out, snug_error *err);

/* Writes t as dir/tokenizer.json (a Hugging Face BPE model: byte-level or
 * sentencepiece-style, with its pre-tokenizers, added tokens, post-processor
 * and decoder) and dir/tokenizer_config.json (bos/eos tokens, whether to add
 * them, the chat template). A tokenizer merged by scores gets the merge list
 * tok_derive_merges gives. Reading the files back gives the same ids. */
snug_status tok_write_json(const snug_tokenizer *t, const char *dir, snug_error *err);

/* Finishes a tokenizer whose reader is done: checks bos/eos/unk ids and
 * computes what encoding and decoding need. */
snug_status tok_finish(snug_tokenizer *t, snug_error *err);

/* ---- the merge list of score-ordered tokenizers (for writing tokenizer.json) */

/* Derives a merge list from token priorities, as the usual SentencePiece
 * and tiktoken to Hugging Face conversions do: for each normal token in
 * order of priority, every split into two normal tokens, ordered by the
 * halves' ids. *pairs (snug_mem_free) holds 2 ids per merge. */
snug_status tok_derive_merges(const snug_tokenizer *t, int32_t **pairs, int32_t *n_merges,
                              snug_error *err);

/* t's merge list as 2 ids a merge in rank order into *pairs (snug_mem_free;
 * NULL on failure): the list it was read with, or for a score-ordered
 * tokenizer the one tok_derive_merges gives. For the writers of
 * tokenizer.json and GGUF. */
snug_status tok_merge_pairs(const snug_tokenizer *t, int32_t **pairs, int32_t *n_merges, snug_error *err);

/* ---- native formats (tok_native.c, tok_spm.c, tok_tiktoken.c, tok_gpt2.c,
 * tok_llama2c.c, tok_gguf_vocab.c) ------------------------------------------
 * tok_parse_* build a finished tokenizer from bytes in memory (name is for
 * messages); tok_read_* read a file, then the tokenizer_config.json and
 * generation_config.json beside it (tok_read_configs), and finish. On
 * success *out is the caller's (snug_tokenizer_free); every failure names
 * the file and the entry, and leaves nothing allocated. */

enum { TOK_NATIVE_MAX_BYTES = 256 << 20 }; /* the largest native file read */

/* SentencePiece's piece types, which GGUF's tokenizer.ggml.token_type uses too. */
typedef enum tok_piece_type {
    TOK_PIECE_NORMAL = 1, TOK_PIECE_UNKNOWN = 2, TOK_PIECE_CONTROL = 3,
    TOK_PIECE_USER_DEFINED = 4, TOK_PIECE_UNUSED = 5, TOK_PIECE_BYTE = 6
} tok_piece_type;

/* Formats "path: message" into err as SNUG_FORMAT and returns it. */
snug_status tok_bad(snug_error *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Returns st; when it is a failure whose message does not name the file
 * (the allocator's do not), puts "name: " in front of the message. */
snug_status tok_named(snug_error *err, snug_status st, const char *name);

/* The attribute of a piece type (1 to 6; anything else is TOK_UNUSED):
 * NORMAL and USER_DEFINED normal, UNKNOWN unknown, CONTROL and UNUSED
 * special, BYTE byte. */
tok_attr tok_piece_attr(int type);

/* After tok_index: makes every CONTROL and UNKNOWN piece a special added
 * token and every USER_DEFINED piece an added token matched in any text.
 * types holds n_vocab piece types. */
snug_status tok_add_piece_tokens(snug_tokenizer *t, const uint8_t *types, snug_error *err);

/* Finishes a natively read tokenizer: the configs of dir (NULL: none), the
 * bos/eos text from their tokens where no config gave it, end-of-sequence
 * ids without repeats, tok_finish. t stays the caller's either way. */
snug_status tok_native_finish(snug_tokenizer *t, const char *dir, snug_error *err);

/* Writes the directory of path ("." when it has none) into dir. */
void tok_dir_of(const char *path, char *dir, size_t size);

/* A native format's reader of bytes in memory: an unfinished tokenizer into
 * *out (the caller's on success; nothing left allocated on failure). */
typedef snug_status (*tok_build_fn)(const char *name, const uint8_t *data, size_t len,
                                    snug_tokenizer **out, snug_error *err);

/* What every tok_parse_* does: build from the len bytes at data, then
 * tok_native_finish without configs. On failure the message names `name`. */
snug_status tok_native_parse(tok_build_fn build, const char *name, const uint8_t *data, size_t len,
                             snug_tokenizer **out, snug_error *err);

/* What every one-file tok_read_* does: read path whole (at most
 * TOK_NATIVE_MAX_BYTES), build, free the bytes, then tok_native_finish with
 * the configs beside path. On failure the message names path. */
snug_status tok_native_read(tok_build_fn build, const char *path, snug_tokenizer **out,
                            snug_error *err);

/* SentencePiece tokenizer.model (a protobuf ModelProto of model type BPE). */
snug_status tok_parse_spm(const char *name, const uint8_t *data, size_t len, snug_tokenizer **out,
                          snug_error *err);
snug_status tok_read_spm(const char *path, snug_tokenizer **out, snug_error *err);

/* True when data starts like a tiktoken file ("base64 rank" lines) rather
 * than a protobuf. */
bool tok_looks_like_tiktoken(const uint8_t *data, size_t len);

/* Llama 3's tiktoken tokenizer.model ("base64 rank" per line), with the
 * family's 256 special tokens and pre-split regex. */
snug_status tok_parse_tiktoken(const char *name, const uint8_t *data, size_t len,
                               snug_tokenizer **out, snug_error *err);
snug_status tok_read_tiktoken(const char *path, snug_tokenizer **out, snug_error *err);

/* GPT-2-style vocab.json + merges.txt (or encoder.json + vocab.bpe), with
 * added_tokens.json and tokenizer_config.json from vocab_path's directory
 * (GPT-2 or Qwen2 pre-splitting, by tokenizer_class). */
snug_status tok_read_gpt2(const char *vocab_path, const char *merges_path, snug_tokenizer **out,
                          snug_error *err);

/* llama2.c tokenizer.bin (max_token_length, then score, length, bytes per
 * token). */
snug_status tok_parse_llama2c(const char *name, const uint8_t *data, size_t len,
                              snug_tokenizer **out, snug_error *err);
snug_status tok_read_llama2c(const char *path, snug_tokenizer **out, snug_error *err);

/* The vocabulary of a GGUF file (tokenizer.ggml.*: "llama" or "gpt2"
 * models), with its chat template; no config files are read. */
struct snug_gguf_file;
snug_status tok_from_gguf(const struct snug_gguf_file *f, snug_tokenizer **out, snug_error *err);
snug_status tok_read_gguf(const char *path, snug_tokenizer **out, snug_error *err);

#endif /* SNUG_TOK_INTERNAL_H */
