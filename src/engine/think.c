/*
 * think.c: the reasoning budget's state machine (think.h): off, waiting for
 * the opening tag, counting the block's tokens (and watching for the model's
 * own closing tag), finishing a character the budget ended inside, forcing
 * the close, done.
 */
#include "think.h"

#include <string.h>

enum { OFF = 0, BEFORE, COUNTING, FINISHING, FORCING, DONE };

/* Checks n ids of list (named what) against n_vocab; empty allowed when may_be_empty. */
static snug_status check_ids(const int32_t *ids, int32_t n, bool may_be_empty, int32_t n_vocab,
                             const char *what, snug_error *err)
{
    if (n < (may_be_empty ? 0 : 1) || n > SNUG_THINK_TAG_MAX)
        return snug_errorf(err, SNUG_INVALID, "think: the %s has %d token ids, expected %d to %d", what, n,
                           may_be_empty ? 0 : 1, SNUG_THINK_TAG_MAX);
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab)
            return snug_errorf(err, SNUG_INVALID, "think: the %s's id %d is not in [0, %d)", what, ids[i],
                               n_vocab);
    return SNUG_OK;
}

snug_status snug_think_params_check(const snug_think_params *p, int32_t n_vocab, snug_error *err)
{
    if (p->n_force == 0) return SNUG_OK; /* no budget */
    if (p->budget < 0)
        return snug_errorf(err, SNUG_INVALID, "think: the budget is %d, expected 0 or more", p->budget);
    snug_status st = check_ids(p->open, p->n_open, p->inside, n_vocab, "opening tag", err);
    if (st == SNUG_OK) st = check_ids(p->close, p->n_close, false, n_vocab, "closing tag", err);
    if (st == SNUG_OK) st = check_ids(p->force, p->n_force, false, n_vocab, "forced close", err);
    if (st == SNUG_OK && (!memchr(p->open_text, 0, sizeof p->open_text) || !memchr(p->close_text, 0, sizeof p->close_text)))
        st = snug_errorf(err, SNUG_INVALID, "think: a tag's text is longer than %d bytes", SNUG_THINK_TEXT_MAX - 1);
    return st;
}

/* In the block with nothing counted: a budget of 0 forces at once. */
static void enter_block(snug_think_state *s, const snug_think_params *p)
{
    s->phase = p->budget == 0 ? FORCING : COUNTING;
    s->used = s->close_at = s->force_at = 0;
    s->n_tail = 0;
}

void snug_think_start(snug_think_state *s, const snug_think_params *p)
{
    memset(s, 0, sizeof *s);
    if (p->n_force == 0) return; /* OFF */
    s->phase = BEFORE;
    if (p->inside) enter_block(s, p);
}

int32_t snug_think_forced(const snug_think_state *s, const snug_think_params *p)
{
    return s->phase == FORCING ? p->force[s->force_at] : -1;
}

/* Moves a matcher of tag (n ids) on by id: true when the tag is complete.
 * A mismatch starts over, counting id as the tag's first when it is. */
static bool match(int32_t *at, const int32_t *tag, int32_t n, int32_t id)
{
    if (tag[*at] == id) {
        if (++*at < n) return false;
        *at = 0;
        return true;
    }
    *at = tag[0] == id && n > 1 ? 1 : 0;
    return tag[0] == id && n == 1;
}

/* Moves the text's tail on by n bytes of text: true when tag (its text,
 * "" for none) ends at one of them. */
static bool match_text(snug_think_state *s, const char *tag, const char *text, size_t n)
{
    size_t len = strlen(tag);
    bool seen = false;
    for (size_t i = 0; i < n; i++) {
        if (s->n_tail == sizeof s->tail) memmove(s->tail, s->tail + 1, --s->n_tail);
        s->tail[s->n_tail++] = text[i];
        seen |= len > 0 && s->n_tail >= len && memcmp(s->tail + s->n_tail - len, tag, len) == 0;
    }
    return seen;
}

void snug_think_feed(snug_think_state *s, const snug_think_params *p, int32_t id, const char *text, size_t n,
                     bool mid_char)
{
    switch (s->phase) {
    case BEFORE: {
        bool by_id = match(&s->open_at, p->open, p->n_open, id);
        if (match_text(s, p->open_text, text, n) || by_id) enter_block(s, p);
        break;
    }
    case COUNTING:
    case FINISHING: {
        bool by_id = match(&s->close_at, p->close, p->n_close, id);
        if (match_text(s, p->close_text, text, n) || by_id) {
            s->phase = DONE; /* the model closed it */
        } else if (++s->used >= p->budget) {
            /* spent: forced once the text is between characters, or after
             * SNUG_THINK_FINISH_MAX tokens that do not end one */
            s->phase = mid_char && s->used < p->budget + SNUG_THINK_FINISH_MAX ? FINISHING : FORCING;
            s->force_at = 0;
        }
        break;
    }
    case FORCING:
        if (++s->force_at == p->n_force) s->phase = DONE;
        break;
    default: /* off, done */
        break;
    }
}
