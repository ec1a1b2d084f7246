/*
 * tokenizer.h: text to token ids and back, for the tokenizers Llama-family
 * checkpoints ship: Hugging Face tokenizer.json (byte-level BPE as in GPT-2,
 * Llama 3, Qwen2, SmolLM; SentencePiece-style BPE with byte fallback as in
 * Llama 2, TinyLlama, Mistral) and the native files some ship instead
 * (SentencePiece tokenizer.model, tiktoken tokenizer.model, vocab.json +
 * merges.txt, llama2.c tokenizer.bin, a GGUF file's vocabulary).
 *
 * A tokenizer is read-only once loaded and may be shared by threads; each
 * thread encodes with its own snug_tok_encoder (scratch memory that grows to
 * the largest input and is reused). All memory is category other.
 */
#ifndef SNUG_TOKENIZER_H
#define SNUG_TOKENIZER_H

#include "base/common.h"

typedef struct snug_tokenizer snug_tokenizer;
typedef struct snug_tok_encoder snug_tok_encoder;

/* Loads a tokenizer from path: a model directory (tokenizer.json, or the
 * native files, with tokenizer_config.json and generation_config.json when
 * present) or a tokenizer file. Messages name the file and the entry. */
snug_status snug_tokenizer_load(const char *path, snug_tokenizer **out, snug_error *err);

struct snug_gguf_header;

/* Puts tok's vocabulary into the GGUF header h (formats/gguf_writer.h;
 * measuring or writing: the same keys each time) as the tokenizer.ggml.*
 * keys llama.cpp reads, with the chat template; the bos and eos ids only
 * where put_bos and put_eos say (a model's keys may hold them already).
 * SNUG_UNSUPPORTED, naming why, for a tokenizer GGUF cannot hold (a
 * pre-split no GGUF name stands for, a sentencepiece vocabulary merged by
 * a list rather than by score), before anything is put. */
snug_status snug_tokenizer_put_gguf(const snug_tokenizer *tok, struct snug_gguf_header *h, bool put_bos, bool put_eos,
                                    snug_error *err);

/* Writes tok as dir/tokenizer.json and dir/tokenizer_config.json (a
 * Hugging Face BPE tokenizer that encodes as tok does). */
snug_status snug_tokenizer_write_json(const snug_tokenizer *tok, const char *dir, snug_error *err);

/* Frees a tokenizer (after every encoder made from it); NULL is ignored. */
void snug_tokenizer_free(snug_tokenizer *tok);

/* Vocabulary size (the largest id + 1). */
int32_t snug_tokenizer_n_vocab(const snug_tokenizer *tok);

/* The beginning-of-sequence id: -1 when the tokenizer has none. */
int32_t snug_tokenizer_bos(const snug_tokenizer *tok);

/* The end-of-sequence ids (eos and generation_config.json's), at most
 * max into ids; returns how many there are. */
int32_t snug_tokenizer_eos_ids(const snug_tokenizer *tok, int32_t *ids, int32_t max);

/* The chat template (tokenizer_config.json's chat_template), or NULL. */
const char *snug_tokenizer_chat_template(const snug_tokenizer *tok);

/* The bos and eos tokens' text ("" when none), for chat templates. */
const char *snug_tokenizer_bos_text(const snug_tokenizer *tok);
const char *snug_tokenizer_eos_text(const snug_tokenizer *tok);

/* What a chat template needs from tokenizer_config.json, read without a
 * vocabulary: the template (NULL when there is none) and the bos and eos
 * tokens' text ("" when absent). Owned; free with snug_chat_config_free. */
typedef struct snug_chat_config {
    char *chat_template;
    char *bos_text;
    char *eos_text;
} snug_chat_config;

/* Reads the chat fields of a tokenizer_config.json file into *out (zeroed
 * first). Errors name the file and the field. */
snug_status snug_chat_config_load(const char *path, snug_chat_config *out, snug_error *err);

/* Frees what snug_chat_config_load filled in and zeroes *cfg. */
void snug_chat_config_free(snug_chat_config *cfg);

/* Makes one thread's encoder. */
snug_status snug_tok_encoder_create(const snug_tokenizer *tok, snug_tok_encoder **out,
                                    snug_error *err);
void snug_tok_encoder_free(snug_tok_encoder *enc);

typedef struct snug_tok_encode_opts {
    bool add_special;     /* add BOS/EOS as the tokenizer's config asks */
    bool parse_special;   /* special-token text in the input becomes those tokens */
} snug_tok_encode_opts;

/* Encodes len bytes of text (any bytes: invalid UTF-8 is encoded byte by
 * byte). The ids are valid until the encoder's next call: *ids points into
 * the encoder, *n_ids receives their count. */
snug_status snug_tok_encode(snug_tok_encoder *enc, const char *text, size_t len,
                            const snug_tok_encode_opts *opts, const int32_t **ids, size_t *n_ids,
                            snug_error *err);

/* A streaming decoder: feed ids one at a time; it returns the bytes that
 * are complete (a UTF-8 character split across tokens is held back until
 * its last byte arrives; bytes that cannot start or continue a character
 * are passed on as they are). */
typedef struct snug_tok_stream {
    const snug_tokenizer *tok;
    bool skip_special;
    bool started;          /* something has been emitted (SentencePiece strips one leading space) */
    unsigned char pending[4];
    int n_pending;
} snug_tok_stream;

/* Starts a stream. */
void snug_tok_stream_init(snug_tok_stream *s, const snug_tokenizer *tok, bool skip_special);

/* Decodes one id into out (cap bytes, at least 64 + the longest token);
 * *n receives the bytes written. An id outside the vocabulary fails with
 * SNUG_INVALID. */
snug_status snug_tok_stream_push(snug_tok_stream *s, int32_t id, char *out, size_t cap, size_t *n,
                                 snug_error *err);

/* Flushes bytes still held back (an incomplete character at the end). */
size_t snug_tok_stream_finish(snug_tok_stream *s, char *out, size_t cap);

/* Decodes ids into a new NUL-terminated block (snug_mem_free) of *len
 * bytes: the same bytes a stream of the same ids gives. */
snug_status snug_tok_decode(const snug_tokenizer *tok, const int32_t *ids, size_t n_ids,
                            bool skip_special, char **out, size_t *len, snug_error *err);

/* The longest token's decoded length in bytes. */
size_t snug_tokenizer_max_token_bytes(const snug_tokenizer *tok);

/* The bytes token id stands for in the middle of a text, into out (cap at
 * least snug_tokenizer_max_token_bytes): SentencePiece's U+2581 as a space
 * (no leading space stripped), a byte token as its byte (part of a
 * character, maybe); what a grammar matches a token by. 0 for special,
 * unknown and unused tokens and ids outside the vocabulary. */
size_t snug_tokenizer_token_bytes(const snug_tokenizer *tok, int32_t id, char *out, size_t cap);

#endif /* SNUG_TOKENIZER_H */
