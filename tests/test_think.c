/*
 * test_think.c: the reasoning budget's state machine (engine/think.h) fed
 * token ids by hand: the forced close after budget tokens of the block
 * (counted from the opening tag, or from the start when the prompt ended
 * inside), a budget of 0, the model's own closing tag (one and several ids,
 * a partial match that fails), tags in several ids, one block only, no
 * budget, and the parameters refused.
 */
#include "test.h"

#include "engine/think.h"

#include <string.h>

enum { OPEN = 7, CLOSE = 8, NL = 3, NN = 4 };

static snug_think_params qwen_like(int32_t budget, bool inside)
{
    snug_think_params p = {.budget = budget, .inside = inside, .n_open = 1, .n_close = 1, .n_force = 3};
    p.open[0] = OPEN;
    p.close[0] = CLOSE;
    p.force[0] = NL, p.force[1] = CLOSE, p.force[2] = NN; /* "\n</think>\n\n" */
    return p;
}

/* Runs ids through a sequence under p: each step takes the forced id if any,
 * else the next of model (the ids the model would sample), and records what
 * was written into out. Returns how many. */
static int run(const snug_think_params *p, const int32_t *model, int n_model, int32_t *out, int max)
{
    snug_think_state s;
    snug_think_start(&s, p);
    int n = 0, m = 0;
    while (n < max) {
        int32_t id = snug_think_forced(&s, p);
        if (id < 0) {
            if (m == n_model) break;
            id = model[m++];
        }
        out[n++] = id;
        snug_think_feed(&s, p, id);
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
    p.open[0] = -1;
    CHECK_FAILS(snug_think_params_check(&p, 100, &err), &err, SNUG_INVALID, "opening tag's id -1");
}

int main(void)
{
    RUN(test_budget_spent);
    RUN(test_budget_zero);
    RUN(test_model_closes);
    RUN(test_tags_of_several_ids);
    RUN(test_no_budget);
    RUN(test_params_refused);
    return test_summary();
}
