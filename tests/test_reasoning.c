/*
 * test_reasoning.c: a reasoning model's reply split into reasoning and
 * content (chat/reasoning.h): the format each chat template shows, whether a
 * rendered prompt ends inside the think block, fixed replies split whole
 * (tags, no tags, only an opening tag, a closing tag cut short, an R1
 * distill's reply that starts inside, a block the engine's budget closed),
 * the same replies streamed byte by byte and cut at every pair of places
 * (the pieces join into the whole split's parts; what may still be a tag or
 * end the reasoning is held, nothing given twice), and random replies built
 * of tags, pieces of tags, whitespace and text, checked the same way.
 */
#include "support/chat_config.h"
#include "test.h"

#include "base/mem.h"
#include "base/json.h"
#include "chat/reasoning.h"

#include <string.h>

static const snug_reasoning_format *think(void)
{
    return snug_reasoning_format_of("{{ content.split('</think>')[-1] }}");
}

/* tests/data/chat's config of name (support/chat_config.h), counted as a
 * check. */
static json_t *config_of(const char *name)
{
    json_t *c = chat_config_load(name);
    CHECK(c != NULL, "tests/data/chat/%s.tokenizer_config.json has a chat_template", name);
    return c;
}

static void test_format_of_templates(void)
{
    static const struct {
        const char *config;
        bool thinks;
    } cases[] = {{"qwen3", true}, {"qwen2.5", false}, {"phi-3.5-mini", false}, {"mistral-v0.3", false},
                 {"tinyllama-1.1b-chat", false}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cases); i++) {
        json_t *c = config_of(cases[i].config);
        const snug_reasoning_format *f =
            snug_reasoning_format_of(json_string_value(json_object_get(c, "chat_template")));
        CHECK((f != NULL) == cases[i].thinks, "%s: format %s", cases[i].config, f ? f->name : "none");
        if (f) CHECK(strcmp(f->open, "<think>") == 0 && strcmp(f->close, "</think>") == 0, "tags");
        json_decref(c);
    }
    CHECK(snug_reasoning_format_of(NULL) == NULL, "no template: no format");
    /* an R1 distill's generation prompt ends in <think>; its template strips the block */
    CHECK(snug_reasoning_format_of("{% if '</think>' in content %}{% endif %}<｜Assistant｜><think>\\n") ==
              think(),
          "R1 distill style");
}

static void test_prompt_inside(void)
{
    const snug_reasoning_format *f = think();
    static const struct {
        const char *prompt;
        bool inside;
    } cases[] = {
        {"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", false},           /* Qwen3, thinking on */
        {"<|im_start|>assistant\n<think>\n\n</think>\n\n", false},                      /* enable_thinking false */
        {"<｜User｜>hi<｜Assistant｜><think>\n", true},                                  /* R1 distill */
        {"<think>", true},
        {"x<think> \t\r\n", true},
        {"<think>x", false},
        {"think>", false},
        {"", false},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cases); i++)
        CHECK(snug_reasoning_prompt_inside(f, cases[i].prompt, strlen(cases[i].prompt)) == cases[i].inside,
              "prompt [%s]: want inside %d", cases[i].prompt, cases[i].inside);
    CHECK(!snug_reasoning_prompt_inside(NULL, "<think>", 7), "no format: never inside");
}

/* One reply and its parts; reasoning NULL: the reply has no block. */
typedef struct split_case {
    bool inside;
    const char *text;
    const char *reasoning;
    const char *content;
} split_case;

static const split_case CASES[] = {
    {false, "<think>\nThe user greets me.\n</think>\n\nHello!", "The user greets me.", "Hello!"},
    {false, "Hello, no thinking here.", NULL, "Hello, no thinking here."},
    {false, "  \n Hello with a <think> later", NULL, "  \n Hello with a <think> later"},
    {false, " \n<think>a b</think>c d ", "a b", "c d "},
    {false, "<think>\nonly an opening tag, cut short by max_tokens", "only an opening tag, cut short by max_tokens", ""},
    {false, "<think>\n", "", ""},
    {false, "<think>\n\n</think>\n\nAnswer.", "", "Answer."},
    {false, "<think>a</think>", "a", ""},
    {false, "<think>a</think>\n\n \n", "a", ""},
    {false, "<think>abc</thi", "abc</thi", ""},
    {false, "<think>a</think>b</think>c", "a", "b</think>c"},
    {false, "<think>x <think> y</think>z", "x <think> y", "z"},
    {false, "<thi", NULL, "<thi"},
    {false, "<thinking>x</think>y", NULL, "<thinking>x</think>y"},
    {false, "", NULL, ""},
    {false, " \n ", NULL, " \n "},
    {false, "</think>answer", NULL, "</think>answer"},
    {false, "<think>\nnaïve café 思考\n</think>\n\nréponse 答え", "naïve café 思考", "réponse 答え"},
    /* the prompt ended in <think> (an R1 distill) */
    {true, "\nThe user greets me.\n</think>\n\nHello!", "The user greets me.", "Hello!"},
    {true, "thinking until the end", "thinking until the end", ""},
    {true, "", "", ""},
    {true, "</think>\n\nno reasoning at all", "", "no reasoning at all"},
    {true, "a < b </ c </th d\n</think>e", "a < b </ c </th d", "e"},
    /* the engine's reasoning budget closes the block: its forced "\n</think>\n\n" */
    {false, "<think>\nstep one step two\n</think>\n\nThe answer.", "step one step two", "The answer."},
    {true, "\n</think>\n\nAnswered at once (a budget of 0).", "", "Answered at once (a budget of 0)."},
    {false, "<think>\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "",
     "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"},
};

/* Checks parts against want (its texts). */
static void check_parts(const char *label, const split_case *c, const char *text, const snug_reasoning_parts *p)
{
    bool has = c->reasoning != NULL;
    CHECK(p->has_reasoning == has, "%s [%s]: has reasoning %d, want %d", label, c->text, p->has_reasoning, has);
    if (has)
        CHECK(p->reasoning_len == strlen(c->reasoning) &&
                  memcmp(text + p->reasoning_at, c->reasoning, p->reasoning_len) == 0,
              "%s [%s]: reasoning [%.*s], want [%s]", label, c->text, (int)p->reasoning_len,
              text + p->reasoning_at, c->reasoning);
    CHECK(p->content_len == strlen(c->content) && memcmp(text + p->content_at, c->content, p->content_len) == 0,
          "%s [%s]: content [%.*s], want [%s]", label, c->text, (int)p->content_len, text + p->content_at,
          c->content);
}

static void test_split_whole(void)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(CASES); i++) {
        snug_reasoning_parts p;
        snug_reasoning_split(think(), CASES[i].inside, CASES[i].text, strlen(CASES[i].text), &p);
        check_parts("whole", &CASES[i], CASES[i].text, &p);
    }
}

enum { OUT_MAX = 512 };

/* What a stream gave out: the reasoning's pieces joined, and the content as
 * a caller that sends each byte once takes it. */
typedef struct streamed {
    char reasoning[OUT_MAX], content[OUT_MAX];
    size_t n_reasoning, n_content;
    size_t content_at;        /* where its content began, once it began */
    bool content_moved;       /* the content's start moved after some of it went out */
    bool overlap;             /* a reasoning piece began before the last one ended */
    bool content_too_early;   /* content went out while the reasoning could still grow */
    bool has_block;
} streamed;

/* Streams text (n bytes) in pieces that end at each of cuts[0..n_cuts)
 * (increasing, the last n), as an engine's outputs arrive. */
static void stream_cuts(bool inside, const char *text, size_t n, const size_t *cuts, int n_cuts, streamed *out)
{
    snug_reasoning_stream s;
    snug_reasoning_stream_init(&s, inside);
    memset(out, 0, sizeof *out);
    size_t last_to = 0;
    for (int k = 0; k < n_cuts; k++) {
        snug_reasoning_delta d;
        bool end = cuts[k] == n;
        snug_reasoning_stream_next(think(), &s, text, cuts[k], end, &d);
        if (d.reasoning_to > d.reasoning_from) {
            if (d.reasoning_from < last_to) out->overlap = true;
            if (out->n_content > 0) out->content_too_early = true;
            memcpy(out->reasoning + out->n_reasoning, text + d.reasoning_from, d.reasoning_to - d.reasoning_from);
            out->n_reasoning += d.reasoning_to - d.reasoning_from;
            last_to = d.reasoning_to;
        }
        if (d.content_end > d.content_at) {
            if (out->n_content > 0 && d.content_at != out->content_at) out->content_moved = true;
            out->content_at = d.content_at;
            size_t sent = out->content_at + out->n_content;
            if (d.content_end > sent) {
                memcpy(out->content + out->n_content, text + sent, d.content_end - sent);
                out->n_content += d.content_end - sent;
            }
        }
    }
    out->has_block = snug_reasoning_stream_has_block(&s);
}

/* Checks a stream's result against the whole split of the same text. */
static bool check_streamed(const char *label, bool inside, const char *text, size_t n, const streamed *st)
{
    snug_reasoning_parts p;
    snug_reasoning_split(think(), inside, text, n, &p);
    bool same = st->has_block == p.has_reasoning && st->n_reasoning == p.reasoning_len &&
                memcmp(st->reasoning, text + p.reasoning_at, p.reasoning_len) == 0 &&
                st->n_content == p.content_len && memcmp(st->content, text + p.content_at, p.content_len) == 0 &&
                !st->content_moved && !st->overlap && !st->content_too_early;
    CHECK(same, "%s [%.*s]: streamed reasoning [%.*s] content [%.*s], whole [%.*s] [%.*s]%s%s%s", label, (int)n,
          text, (int)st->n_reasoning, st->reasoning, (int)st->n_content, st->content, (int)p.reasoning_len,
          text + p.reasoning_at, (int)p.content_len, text + p.content_at, st->content_moved ? ", content moved" : "",
          st->overlap ? ", reasoning given twice" : "", st->content_too_early ? ", content before reasoning" : "");
    return same;
}

static void test_streamed_byte_by_byte(void)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(CASES); i++) {
        size_t n = strlen(CASES[i].text), cuts[OUT_MAX];
        for (size_t k = 0; k < n; k++) cuts[k] = k + 1;
        if (n == 0) cuts[0] = 0;
        streamed st;
        stream_cuts(CASES[i].inside, CASES[i].text, n, cuts, n ? (int)n : 1, &st);
        check_streamed("byte by byte", CASES[i].inside, CASES[i].text, n, &st);
    }
}

static void test_streamed_two_cuts(void)
{
    int bad = 0;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(CASES) && bad < 3; i++) {
        size_t n = strlen(CASES[i].text);
        for (size_t a = 0; a <= n && bad < 3; a++)
            for (size_t b = a; b <= n && bad < 3; b++) {
                size_t cuts[3] = {a, b, n};
                streamed st;
                stream_cuts(CASES[i].inside, CASES[i].text, n, cuts, 3, &st);
                bad += !check_streamed("two cuts", CASES[i].inside, CASES[i].text, n, &st);
            }
    }
}

/* What is held while a reply is undecided: a start that may be the opening
 * tag, an end that may begin the closing tag, whitespace that may end the
 * reasoning; and what goes out at once. */
static void test_held_back(void)
{
    static const struct {
        bool inside;
        const char *text;          /* the reply so far (not its end) */
        const char *reasoning;     /* what of its reasoning may go out */
        const char *content;       /* what of its content may go out */
    } cases[] = {
        {false, "<", "", ""},
        {false, " \n<thin", "", ""},
        {false, "\n\n", "", ""},
        {false, "<b", "", "<b"},                        /* not the tag: plain, at once */
        {false, "Hi", "", "Hi"},
        {false, "<think>", "", ""},
        {false, "<think>\n\n", "", ""},
        {false, "<think>\nabc", "abc", ""},
        {false, "<think>\nabc \n", "abc", ""},          /* whitespace may end the reasoning */
        {false, "<think>\nabc</", "abc", ""},
        {false, "<think>\nabc </think", "abc", ""},
        {false, "<think>\nabc</think>", "abc", ""},
        {false, "<think>\nabc</think>\n\n", "abc", ""}, /* whitespace before the content: dropped */
        {false, "<think>\nabc</think>\n\nHel", "abc", "Hel"},
        {false, "<think>a<b", "a<b", ""},
        {true, "", "", ""},
        {true, "abc", "abc", ""},
        {true, "abc</think", "abc", ""},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cases); i++) {
        size_t n = strlen(cases[i].text);
        snug_reasoning_stream s;
        snug_reasoning_delta d;
        snug_reasoning_stream_init(&s, cases[i].inside);
        snug_reasoning_stream_next(think(), &s, cases[i].text, n, false, &d);
        size_t nr = d.reasoning_to - d.reasoning_from, nc = d.content_end - d.content_at;
        CHECK(nr == strlen(cases[i].reasoning) && memcmp(cases[i].text + d.reasoning_from, cases[i].reasoning, nr) == 0,
              "[%s]: reasoning out [%.*s], want [%s]", cases[i].text, (int)nr, cases[i].text + d.reasoning_from,
              cases[i].reasoning);
        CHECK(nc == strlen(cases[i].content) && memcmp(cases[i].text + d.content_at, cases[i].content, nc) == 0,
              "[%s]: content out [%.*s], want [%s]", cases[i].text, (int)nc, cases[i].text + d.content_at,
              cases[i].content);
    }
}

/* Random replies of tags, pieces of tags, whitespace and text, each cut into
 * random pieces: the stream joins into the whole split's parts. */
static void test_random_replies(void)
{
    static const char *const PIECES[] = {"<think>", "</think>", "<", "</", "</th", "<thi", "think>", "a",
                                         "b c", " ", "\n", "\n\n", "é", ">", "<tool_call>"};
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int bad = 0, runs = 0;
    for (int r = 0; r < 4000 && bad < 3; r++, runs++) {
        char text[256];
        size_t n = 0;
        int n_pieces = 1 + (int)(x % 12);
        for (int k = 0; k < n_pieces; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const char *p = PIECES[(x >> 33) % SNUG_ARRAY_LEN(PIECES)];
            memcpy(text + n, p, strlen(p));
            n += strlen(p);
        }
        size_t cuts[256];
        int n_cuts = 0;
        for (size_t at = 0; at < n;) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            at += 1 + (x >> 40) % 4;
            cuts[n_cuts++] = at < n ? at : n;
        }
        if (n_cuts == 0) cuts[n_cuts++] = 0;
        bool inside = (x >> 20) & 1;
        streamed st;
        stream_cuts(inside, text, n, cuts, n_cuts, &st);
        bad += !check_streamed("random", inside, text, n, &st);
    }
    CHECK(runs == 4000, "%d random replies checked", runs);
}

int main(void)
{
    snug_json_init();
    RUN(test_format_of_templates);
    RUN(test_prompt_inside);
    RUN(test_split_whole);
    RUN(test_streamed_byte_by_byte);
    RUN(test_streamed_two_cuts);
    RUN(test_held_back);
    RUN(test_random_replies);
    return test_summary();
}
