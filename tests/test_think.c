/*
 * test_think.c: the reasoning budget's state machine (engine/think.h) fed
 * token ids and their texts by hand: the forced close after budget tokens
 * of the block (counted from the opening tag, or from the start when the
 * prompt ended inside), a budget of 0, the model's own closing tag (one and
 * several ids, a partial match that fails), tags in several ids, tags the
 * model spells in other tokens (seen in the text), a budget spent inside a
 * character (finished first, within a limit), one block only, no budget,
 * and the parameters refused.
 */
#include "test.h"

#include "engine/think.h"

#include <string.h>

enum { OPEN = 7, CLOSE = 8, NL = 3, NN = 4 };

/* The text of each id of these tests: the tags, their pieces ("<", "</",
 * "think", ">"), the three bytes of U+4E2D one a token; "x" otherwise. */
static const char *text_of(int32_t id)
{
    switch (id) {
    case OPEN: return "<think>";
    case CLOSE: return "</think>";
    case NL: return "\n";
    case NN: return "\n\n";
    case 50: case 63: return "<";
    case 51: case 61: return "think";
    case 52: case 62: return ">";
    case 60: return "</";
    case 70: return "\xe4";
    case 71: return "\xb8";
    case 72: return "\xad";
    default: return "x";
    }
}

static snug_think_params qwen_like(int32_t budget, bool inside)
{
    snug_think_params p = {.budget = budget, .inside = inside, .n_open = 1, .n_close = 1, .n_force = 3};
    p.open[0] = OPEN;
    p.close[0] = CLOSE;
    p.force[0] = NL, p.force[1] = CLOSE, p.force[2] = NN; /* "\n</think>\n\n" */
    snprintf(p.open_text, sizeof p.open_text, "<think>");
    snprintf(p.close_text, sizeof p.close_text, "</think>");
    return p;
}

/* Runs ids through a sequence under p: each step takes the forced id if any,
 * else the next of model (the ids the model would sample), and records what
 * was written into out. Returns how many. */
static int run(const snug_think_params *p, const int32_t *model, int n_model, int32_t *out, int max)
{
    snug_think_state s;
    snug_think_start(&s, p);
    int n = 0, m = 0, need = 0; /* continuation bytes the text's last character still needs */
    while (n < max) {
        int32_t id = snug_think_forced(&s, p);
        if (id < 0) {
            if (m == n_model) break;
            id = model[m++];
        }
        out[n++] = id;
        const char *t = text_of(id);
        for (const unsigned char *b = (const unsigned char *)t; *b; b++)
            need = *b < 0x80 ? 0 : *b >= 0xF0 ? 3 : *b >= 0xE0 ? 2 : *b >= 0xC0 ? 1 : need > 0 ? need - 1 : 0;
        snug_think_feed(&s, p, id, t, strlen(t), need > 0);
    }
    return n;
}

#define CHECK_IDS(got, n, ...)                                                                        \
    do {                                                                                              \
        const int32_t want_[] = {__VA_ARGS__};                                                        \
        int nw_ = (int)(sizeof want_ / sizeof want_[0]);                                              \
        bool same_ = (n) == nw_ && memcmp((got), want_, sizeof want_) == 0;                           \
        char shown_[256];                                                                             \
        size_t at_ = 0;                                                                               \
        for (int k_ = 0; k_ < (n) && at_ < sizeof shown_ - 16; k_++)                                  \
            at_ += (size_t)snprintf(shown_ + at_, sizeof shown_ - at_, "%d ", (got)[k_]);             \
        shown_[at_] = '\0';                                                                           \
        CHECK(same_, "got %s(%d ids), want %s", shown_, (n), #__VA_ARGS__);                           \
    } while (0)

static void test_budget_spent(void)
{
    int32_t out[64];
    const int32_t model[] = {OPEN, 20, 21, 22, 23, 24, 25, 26};
    snug_think_params p = qwen_like(3, false);
    int n = run(&p, model, 8, out, 64);
    CHECK_IDS(out, n, OPEN, 20, 21, 22, NL, CLOSE, NN, 23, 24, 25, 26);
    /* before the opening tag nothing counts */
    const int32_t late[] = {30, 31, 32, 33, OPEN, 20, 21, 22};
    p = qwen_like(2, false);
    n = run(&p, late, 8, out, 64);
    CHECK_IDS(out, n, 30, 31, 32, 33, OPEN, 20, 21, NL, CLOSE, NN, 22);
    /* inside: counted from the first token */
    p = qwen_like(2, true);
    n = run(&p, model + 1, 7, out, 64);
    CHECK_IDS(out, n, 20, 21, NL, CLOSE, NN, 22, 23, 24, 25, 26);
}

static void test_budget_zero(void)
{
    int32_t out[64];
    const int32_t model[] = {20, 21};
    snug_think_params p = qwen_like(0, true);
    int n = run(&p, model, 2, out, 64);
    CHECK_IDS(out, n, NL, CLOSE, NN, 20, 21);
    const int32_t opened[] = {OPEN, 20, 21};
    p = qwen_like(0, false);
    n = run(&p, opened, 3, out, 64);
    CHECK_IDS(out, n, OPEN, NL, CLOSE, NN, 20, 21);
}

static void test_model_closes(void)
{
    int32_t out[64];
    const int32_t model[] = {OPEN, 20, CLOSE, 21, 22, 23, 24, OPEN, 25, 26, 27, 28};
    snug_think_params p = qwen_like(2, false);
    int n = run(&p, model, 12, out, 64);
    /* closed at the budget's last token: nothing forced; a second block is not counted */
    CHECK_IDS(out, n, OPEN, 20, CLOSE, 21, 22, 23, 24, OPEN, 25, 26, 27, 28);
    /* a closing tag of two ids, a partial match that fails, then the whole */
    snug_think_params q = qwen_like(10, true);
    q.n_close = 2, q.close[0] = 40, q.close[1] = 41;
    const int32_t two[] = {40, 20, 40, 40, 41, 21, 22, 23};
    n = run(&q, two, 8, out, 64);
    CHECK_IDS(out, n, 40, 20, 40, 40, 41, 21, 22, 23);
    q.budget = 3; /* the partial tags count as the block's tokens: spent before the close */
    n = run(&q, two, 8, out, 64);
    CHECK_IDS(out, n, 40, 20, 40, NL, CLOSE, NN, 40, 41, 21, 22, 23);
}

static void test_tags_of_several_ids(void)
{
    int32_t out[64];
    snug_think_params p = qwen_like(1, false);
    p.n_open = 3, p.open[0] = 50, p.open[1] = 51, p.open[2] = 52; /* "<", "think", ">" */
    const int32_t model[] = {50, 51, 9, 50, 50, 51, 52, 20, 21, 22};
    int n = run(&p, model, 10, out, 64);
    CHECK_IDS(out, n, 50, 51, 9, 50, 50, 51, 52, 20, NL, CLOSE, NN, 21, 22);
}

/* Tags the model spells in other tokens than the tokenizer's ("<",
 * "think", ">"): seen in the text, as the reasoning split sees them; by
 * ids alone (no texts) they are not. */
static void test_tags_spelled_otherwise(void)
{
    int32_t out[64];
    snug_think_params p = qwen_like(4, false);
    const int32_t model[] = {20, 63, 61, 62, 21, 60, 61, 62, 22, 23, 24, 25, 26};
    int n = run(&p, model, 13, out, 64);
    CHECK_IDS(out, n, 20, 63, 61, 62, 21, 60, 61, 62, 22, 23, 24, 25, 26); /* opened, closed by the model */
    p = qwen_like(2, false);
    n = run(&p, model, 13, out, 64);
    CHECK_IDS(out, n, 20, 63, 61, 62, 21, 60, NL, CLOSE, NN, 61, 62, 22, 23, 24, 25, 26); /* opened, spent */
    p = qwen_like(2, false);
    p.open_text[0] = p.close_text[0] = '\0';
    n = run(&p, model, 13, out, 64);
    CHECK_IDS(out, n, 20, 63, 61, 62, 21, 60, 61, 62, 22, 23, 24, 25, 26); /* ids alone: never opened */
    /* a tag across a token that ends the block's text and the next */
    p = qwen_like(4, true);
    const int32_t split[] = {20, 60, 61, 62, 21, 22};
    n = run(&p, split, 6, out, 64);
    CHECK_IDS(out, n, 20, 60, 61, 62, 21, 22);
}

/* A budget spent inside a character: the model finishes it before the
 * close (the reasoning text stays UTF-8), and a character that never ends
 * holds the close back SNUG_THINK_FINISH_MAX tokens at most. */
static void test_budget_ends_between_characters(void)
{
    int32_t out[64];
    snug_think_params p = qwen_like(2, true);
    const int32_t model[] = {20, 70, 71, 72, 21, 22};
    int n = run(&p, model, 6, out, 64);
    CHECK_IDS(out, n, 20, 70, 71, 72, NL, CLOSE, NN, 21, 22);
    p = qwen_like(1, true); /* spent between characters: nothing waits */
    n = run(&p, model, 6, out, 64);
    CHECK_IDS(out, n, 20, NL, CLOSE, NN, 70, 71, 72, 21, 22);
    p = qwen_like(2, true);
    const int32_t endless[] = {20, 70, 70, 70, 70, 70, 70, 70, 21};
    n = run(&p, endless, 9, out, 64);
    CHECK_IDS(out, n, 20, 70, 70, 70, 70, 70, NL, CLOSE, NN, 70, 70, 21);
    CHECK(SNUG_THINK_FINISH_MAX == 4, "the limit the case above counts on");
}

static void test_no_budget(void)
{
    int32_t out[64];
    const int32_t model[] = {OPEN, 20, 21, 22, 23};
    snug_think_params none;
    memset(&none, 0, sizeof none); /* a zeroed request: no budget */
    int n = run(&none, model, 5, out, 64);
    CHECK_IDS(out, n, OPEN, 20, 21, 22, 23);
    snug_error err = {0};
    CHECK_OK(snug_think_params_check(&none, 100, &err), &err);
}

static void test_params_refused(void)
{
    snug_error err = {0};
    snug_think_params p = qwen_like(4, false);
    CHECK_OK(snug_think_params_check(&p, 100, &err), &err);
    p.budget = -2;
    CHECK_FAILS(snug_think_params_check(&p, 100, &err), &err, SNUG_INVALID, "think: the budget is -2");
    p = qwen_like(4, false);
    p.n_open = 0;
    CHECK_FAILS(snug_think_params_check(&p, 100, &err), &err, SNUG_INVALID, "opening tag has 0 token ids");
    p.inside = true; /* no opening tag needed */
    CHECK_OK(snug_think_params_check(&p, 100, &err), &err);
    p = qwen_like(4, false);
    p.n_close = 0;
    CHECK_FAILS(snug_think_params_check(&p, 100, &err), &err, SNUG_INVALID, "closing tag has 0 token ids");
    p = qwen_like(4, false);
    p.n_force = SNUG_THINK_TAG_MAX + 1;
    CHECK_FAILS(snug_think_params_check(&p, 100, &err), &err, SNUG_INVALID, "forced close has 9 token ids");
    p = qwen_like(4, false);
    p.force[1] = 100;
    CHECK_FAILS(snug_think_params_check(&p, 100, &err), &err, SNUG_INVALID, "forced close's id 100 is not in [0, 100)");
    p = qwen_like(4, false);
    memset(p.close_text, 'a', sizeof p.close_text); /* no terminating zero */
    CHECK_FAILS(snug_think_params_check(&p, 100, &err), &err, SNUG_INVALID, "tag's text is longer than 31 bytes");
    p = qwen_like(4, false);
    p.open[0] = -1;
    CHECK_FAILS(snug_think_params_check(&p, 100, &err), &err, SNUG_INVALID, "opening tag's id -1");
}

int main(void)
{
    RUN(test_budget_spent);
    RUN(test_budget_zero);
    RUN(test_model_closes);
    RUN(test_tags_of_several_ids);
    RUN(test_tags_spelled_otherwise);
    RUN(test_budget_ends_between_characters);
    RUN(test_no_budget);
    RUN(test_params_refused);
    return test_summary();
}
