/*
 * stop.c: stop conditions and the held-back text of a streaming sequence
 * (see stop.h). Each feed joins the held bytes and the new text in the
 * caller's emit buffer, looks for a stop string ending at each new byte (so
 * the first to complete wins, whatever the tokenization), and otherwise keeps
 * back the longest tail that is a proper prefix of some stop string.
 */
#include "stop.h"

#include <string.h>

void snug_stop_params_default(snug_stop_params *p)
{
    memset(p, 0, sizeof *p);
}

snug_status snug_stop_params_add_string(snug_stop_params *p, const char *s, size_t n,
                                        snug_error *err)
{
    if (p->n_stop >= SNUG_STOP_MAX)
        return snug_errorf(err, SNUG_INVALID, "stop: expected at most %d strings, got more",
                           SNUG_STOP_MAX);
    if (n == 0 || n > SNUG_STOP_STRING_MAX)
        return snug_errorf(err, SNUG_INVALID,
                           "stop: expected strings of 1 to %d bytes, got one of %zu bytes",
                           SNUG_STOP_STRING_MAX, n);
    if (!snug_utf8_valid(s, n))
        return snug_errorf(err, SNUG_INVALID,
                           "stop: expected UTF-8 text, string %d is not valid UTF-8", p->n_stop);
    memcpy(p->stop[p->n_stop], s, n);
    p->stop_len[p->n_stop] = (uint16_t)n;
    p->n_stop++;
    return SNUG_OK;
}

snug_status snug_stop_params_add_eos(snug_stop_params *p, int32_t id, snug_error *err)
{
    if (id < 0)
        return snug_errorf(err, SNUG_INVALID, "eos_token_id: expected ids >= 0, got %d", id);
    if (p->n_eos >= SNUG_STOP_EOS_MAX)
        return snug_errorf(err, SNUG_INVALID, "eos_token_id: expected at most %d ids, got more",
                           SNUG_STOP_EOS_MAX);
    p->eos_ids[p->n_eos++] = id;
    return SNUG_OK;
}

snug_status snug_stop_params_validate(const snug_stop_params *p, snug_error *err)
{
    if (p->max_tokens < 0)
        return snug_errorf(err, SNUG_INVALID,
                           "max_tokens: expected an integer >= 1 (or 0 for no limit), got %d",
                           p->max_tokens);
    if (p->n_stop < 0 || p->n_stop > SNUG_STOP_MAX)
        return snug_errorf(err, SNUG_INVALID, "stop: expected at most %d strings, got %d",
                           SNUG_STOP_MAX, p->n_stop);
    for (int32_t i = 0; i < p->n_stop; i++) {
        if (p->stop_len[i] == 0 || p->stop_len[i] > SNUG_STOP_STRING_MAX)
            return snug_errorf(err, SNUG_INVALID,
                               "stop: expected strings of 1 to %d bytes, string %d has %u",
                               SNUG_STOP_STRING_MAX, i, (unsigned)p->stop_len[i]);
        if (!snug_utf8_valid(p->stop[i], p->stop_len[i]))
            return snug_errorf(err, SNUG_INVALID,
                               "stop: expected UTF-8 text, string %d is not valid UTF-8", i);
    }
    if (p->n_eos < 0 || p->n_eos > SNUG_STOP_EOS_MAX)
        return snug_errorf(err, SNUG_INVALID, "eos_token_id: expected at most %d ids, got %d",
                           SNUG_STOP_EOS_MAX, p->n_eos);
    for (int32_t i = 0; i < p->n_eos; i++)
        if (p->eos_ids[i] < 0)
            return snug_errorf(err, SNUG_INVALID, "eos_token_id: expected ids >= 0, got %d",
                               p->eos_ids[i]);
    return SNUG_OK;
}

void snug_stop_state_init(snug_stop_state *s)
{
    memset(s, 0, sizeof *s);
    s->stop_index = -1;
    s->stop_token = -1;
}

/* Ends the sequence, releasing the held bytes after the n bytes already in
 * emit. */
static snug_finish finish(snug_stop_state *s, snug_finish why, char *emit, size_t n,
                          size_t *n_emit)
{
    memcpy(emit + n, s->held, (size_t)s->n_held);
    *n_emit = n + (size_t)s->n_held;
    s->n_held = 0;
    s->finish = why;
    return why;
}

/* The stop string ending at byte end of buf[0, end) (the longest when
 * several do), or -1. */
static int32_t stop_ending_at(const snug_stop_params *p, const char *buf, size_t end)
{
    int32_t best = -1;
    for (int32_t j = 0; j < p->n_stop; j++) {
        size_t len = p->stop_len[j];
        if (len > end || buf[end - 1] != p->stop[j][len - 1]) continue;
        if (best >= 0 && len <= p->stop_len[best]) continue;
        if (memcmp(buf + end - len, p->stop[j], len) == 0) best = j;
    }
    return best;
}

/* The length of the longest tail of buf[0, n) that is a proper prefix of a
 * stop string. */
static size_t held_tail(const snug_stop_params *p, const char *buf, size_t n)
{
    size_t h = SNUG_MIN(n, (size_t)SNUG_STOP_STRING_MAX - 1);
    for (; h > 0; h--) {
        const char *tail = buf + n - h;
        for (int32_t j = 0; j < p->n_stop; j++)
            if (p->stop_len[j] > h && p->stop[j][0] == tail[0] && memcmp(tail, p->stop[j], h) == 0)
                return h;
    }
    return 0;
}

bool snug_stop_is_eos(const snug_stop_params *p, int32_t token)
{
    for (int32_t i = 0; i < p->n_eos && !p->ignore_eos; i++)
        if (token == p->eos_ids[i]) return true;
    return false;
}

snug_finish snug_stop_feed(const snug_stop_params *p, snug_stop_state *s, int32_t token,
                           const char *text, size_t n_text, char *emit, size_t *n_emit)
{
    *n_emit = 0;
    if (s->finish != SNUG_FINISH_NONE) return s->finish;
    s->n_tokens++;
    if (snug_stop_is_eos(p, token)) {
        s->stop_token = token;
        return finish(s, SNUG_FINISH_EOS, emit, 0, n_emit);
    }

    /* The window: held bytes, then the new text. */
    size_t n_old = (size_t)s->n_held, n = n_old + n_text;
    memcpy(emit, s->held, n_old);
    if (n_text) memcpy(emit + n_old, text, n_text);
    s->n_held = 0;
    for (size_t end = n_old + 1; end <= n && p->n_stop > 0; end++) {
        int32_t j = stop_ending_at(p, emit, end);
        if (j >= 0) {
            s->stop_index = j;
            return finish(s, SNUG_FINISH_STOP_STRING, emit, end - p->stop_len[j], n_emit);
        }
    }
    if (p->max_tokens > 0 && s->n_tokens >= p->max_tokens)
        return finish(s, SNUG_FINISH_MAX_TOKENS, emit, n, n_emit);
    size_t h = held_tail(p, emit, n);
    memcpy(s->held, emit + n - h, h);
    s->n_held = (int32_t)h;
    *n_emit = n - h;
    return SNUG_FINISH_NONE;
}

snug_finish snug_stop_end(snug_stop_state *s, snug_finish why, char *emit, size_t *n_emit)
{
    SNUG_ASSERT(why != SNUG_FINISH_NONE);
    *n_emit = 0;
    if (s->finish != SNUG_FINISH_NONE) return s->finish;
    return finish(s, why, emit, 0, n_emit);
}

const char *snug_finish_reason_str(snug_finish f)
{
    switch (f) {
    case SNUG_FINISH_EOS:
    case SNUG_FINISH_STOP_STRING:
    case SNUG_FINISH_GRAMMAR:
    case SNUG_FINISH_POOLED: return "stop";
    case SNUG_FINISH_GRAMMAR_FAILED: return "error";
    case SNUG_FINISH_MAX_TOKENS:
    case SNUG_FINISH_MODEL_LENGTH: return "length";
    case SNUG_FINISH_ABORT: return "abort";
    case SNUG_FINISH_NONE: break;
    }
    return NULL;
}

const char *snug_finish_name(snug_finish f)
{
    switch (f) {
    case SNUG_FINISH_NONE: return "none";
    case SNUG_FINISH_EOS: return "eos";
    case SNUG_FINISH_STOP_STRING: return "stop_string";
    case SNUG_FINISH_MAX_TOKENS: return "max_tokens";
    case SNUG_FINISH_MODEL_LENGTH: return "model_length";
    case SNUG_FINISH_ABORT: return "abort";
    case SNUG_FINISH_GRAMMAR: return "grammar";
    case SNUG_FINISH_GRAMMAR_FAILED: return "grammar_failed";
    case SNUG_FINISH_POOLED: return "pooled";
    }
    return "unknown";
}
