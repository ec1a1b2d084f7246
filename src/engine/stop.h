/*
 * stop.h: when a generated sequence ends, and which text may be streamed to
 * the client so far.
 *
 * A sequence ends on an end-of-sequence token (unless ignore_eos), on a stop
 * string completed in the decoded text (also across token boundaries), or
 * when max_tokens tokens have been generated. Stop strings are matched on
 * bytes: while the tail of the text could still be the start of a stop
 * string, those bytes are held back in the state; the stop string itself is
 * never emitted, nor is the EOS token's text. The concatenation of every
 * chunk emitted is the generated text, cut before the first stop string
 * (the one that completes first; of those completing at the same byte, the
 * longest), whatever the tokenization.
 *
 * Everything is fixed-size: a request keeps a snug_stop_params (its own copy
 * of the stop strings, about 4 KiB) and a snug_stop_state (about 300 bytes).
 * Nothing allocates.
 */
#ifndef SNUG_STOP_H
#define SNUG_STOP_H

#include "base/common.h"

enum {
    SNUG_STOP_MAX = 16,         /* stop strings per request */
    SNUG_STOP_STRING_MAX = 256, /* bytes per stop string */
    SNUG_STOP_EOS_MAX = 16,     /* end-of-sequence token ids */
    SNUG_STOP_MODEL_EOS_MAX = 8 /* of those, kept for the model's own, which the engine adds
                                 * to every sequence's (a request may set the rest) */
};

/* Why a sequence ended. OpenAI's finish_reason is "stop" for the first two
 * and GRAMMAR, "length" for the next two, "abort" and "error" for the rest
 * (snug_finish_reason_str). */
typedef enum snug_finish {
    SNUG_FINISH_NONE = 0,    /* still running */
    SNUG_FINISH_EOS,         /* an end-of-sequence token */
    SNUG_FINISH_STOP_STRING, /* a stop string completed */
    SNUG_FINISH_MAX_TOKENS,  /* max_tokens reached */
    SNUG_FINISH_MODEL_LENGTH, /* the model's context is full (snug_stop_end) */
    SNUG_FINISH_ABORT,       /* cancelled by the client or server (snug_stop_end) */
    SNUG_FINISH_GRAMMAR,     /* the output is a whole match of its grammar that nothing
                              * can extend (snug_stop_end) */
    SNUG_FINISH_GRAMMAR_FAILED, /* no token could follow under its grammar (its matcher's
                              * limits passed): the output so far is not a whole match */
    SNUG_FINISH_POOLED       /* an embedding: the prompt's pooled hidden state was taken,
                              * nothing generated */
} snug_finish;

typedef struct snug_stop_params {
    int32_t eos_ids[SNUG_STOP_EOS_MAX]; /* the model's (config.json / generation_config.json) */
    int32_t n_eos;
    bool ignore_eos;                    /* EOS tokens are ordinary text */
    int32_t max_tokens;                 /* > 0, or 0 = no limit */
    int32_t n_stop;
    uint16_t stop_len[SNUG_STOP_MAX];   /* 1..SNUG_STOP_STRING_MAX */
    char stop[SNUG_STOP_MAX][SNUG_STOP_STRING_MAX]; /* bytes, not NUL-terminated */
} snug_stop_params;

typedef struct snug_stop_state {
    int64_t n_tokens;       /* tokens fed so far */
    snug_finish finish;     /* SNUG_FINISH_NONE while running */
    int32_t stop_index;     /* which stop string ended it, else -1 */
    int32_t stop_token;     /* which EOS token ended it, else -1 */
    int32_t n_held;         /* bytes held back: a proper prefix of a stop string */
    char held[SNUG_STOP_STRING_MAX];
} snug_stop_state;

/* Fills p with: no EOS ids, no stop strings, ignore_eos false, no limit. */
void snug_stop_params_default(snug_stop_params *p);

/* Adds stop string s (n bytes, any bytes; NUL need not follow). Fails with
 * SNUG_INVALID and a message naming `stop` when there are already
 * SNUG_STOP_MAX, when n is 0 or above SNUG_STOP_STRING_MAX, or when s is
 * not valid UTF-8; p is unchanged then. */
snug_status snug_stop_params_add_string(snug_stop_params *p, const char *s, size_t n,
                                        snug_error *err);

/* Adds an end-of-sequence token id. Fails with SNUG_INVALID when id < 0 or
 * SNUG_STOP_EOS_MAX ids are already there; p is unchanged then. */
snug_status snug_stop_params_add_eos(snug_stop_params *p, int32_t id, snug_error *err);

/* Whether token ends a sequence of p as an end-of-sequence token: one of
 * its EOS ids, and EOS not ignored. Pure. */
bool snug_stop_is_eos(const snug_stop_params *p, int32_t token);

/* Checks a filled-in p (for callers that set fields directly): counts and
 * lengths in range, stop strings valid UTF-8, EOS ids >= 0, max_tokens >= 0.
 * Fails with SNUG_INVALID and a message naming `stop` or `max_tokens`. */
snug_status snug_stop_params_validate(const snug_stop_params *p, snug_error *err);

/* Starts a sequence: nothing held, nothing fed. */
void snug_stop_state_init(snug_stop_state *s);

/* The bytes a sequence's decoded-text buffer takes: one step's text, at
 * most a token's (max_token_bytes), and 64 bytes to spare; the serving
 * state and snug generate's prompt echo size it alike. */
static inline size_t snug_stop_text_bytes(size_t max_token_bytes) { return 64 + max_token_bytes; }

/* The bytes an emit buffer needs for a token whose text is n_text bytes. */
static inline size_t snug_stop_emit_bytes(size_t n_text)
{
    return n_text + SNUG_STOP_STRING_MAX;
}

/* Feeds one generated token: its id and the n_text bytes (possibly 0) its
 * incremental decode released. Writes the bytes that may be sent to the
 * client now to emit (snug_stop_emit_bytes(n_text) bytes; text may not
 * overlap it) and their count to *n_emit, and returns SNUG_FINISH_NONE while
 * the sequence goes on, else why it ended (also kept in s->finish):
 *   an EOS id (unless ignore_eos): EOS; the held bytes are emitted, the
 *     token's text is not;
 *   a stop string completed: STOP_STRING; the text before it is emitted,
 *     the string and anything after it are dropped;
 *   the token count reaching max_tokens: MAX_TOKENS, after emitting all the
 *     text (held bytes too).
 * Checked in that order. After the sequence has ended, a call emits nothing
 * and returns the same reason. p must be the params the sequence started
 * with, validated. Cannot fail. */
snug_finish snug_stop_feed(const snug_stop_params *p, snug_stop_state *s, int32_t token,
                           const char *text, size_t n_text, char *emit, size_t *n_emit);

/* Ends a running sequence for a reason found outside (MODEL_LENGTH, ABORT):
 * the held bytes (at most SNUG_STOP_STRING_MAX) go to emit. Does nothing and
 * returns the earlier reason when the sequence had already ended. */
snug_finish snug_stop_end(snug_stop_state *s, snug_finish why, char *emit, size_t *n_emit);

/* OpenAI's finish_reason: "stop" (EOS, stop string), "length" (max tokens,
 * model length), "abort", or NULL while running. */
const char *snug_finish_reason_str(snug_finish f);

/* A name for logs: "none", "eos", "stop_string", "max_tokens",
 * "model_length", "abort". Never NULL. */
const char *snug_finish_name(snug_finish f);

#endif /* SNUG_STOP_H */
