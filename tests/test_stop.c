/*
 * test_stop.c: stop conditions and held-back text. Every case checks that
 * the emitted chunks, concatenated, are exactly the expected text, and a
 * randomized case compares many tokenizations of the same text with a
 * reference that searches the whole text at once.
 */
#include "base/rng.h"
#include "engine/stop.h"
#include "test.h"

enum { EOS = 2, OTHER_EOS = 7, WORD = 100 };

typedef struct run_result {
    char text[4096];
    size_t n;
    snug_finish finish;
    int n_fed; /* tokens fed until the sequence ended */
} run_result;

/* Feeds the pieces (NULL-terminated; a piece "<eos>" is token EOS with text
 * "</s>", "<eos2>" is OTHER_EOS) and collects what is emitted. */
static run_result run(const snug_stop_params *p, const char *const *pieces)
{
    run_result r = {.finish = SNUG_FINISH_NONE};
    snug_stop_state st;
    snug_stop_state_init(&st);
    for (int i = 0; pieces[i]; i++) {
        int32_t token = strcmp(pieces[i], "<eos>") == 0    ? EOS
                        : strcmp(pieces[i], "<eos2>") == 0 ? OTHER_EOS
                                                           : WORD + i;
        const char *text = token == WORD + i ? pieces[i] : "</s>";
        char emit[SNUG_STOP_STRING_MAX + 64];
        size_t n_emit = 99;
        CHECK(strlen(text) + SNUG_STOP_STRING_MAX <= sizeof emit, "piece too long");
        snug_finish f = snug_stop_feed(p, &st, token, text, strlen(text), emit, &n_emit);
        CHECK(r.n + n_emit < sizeof r.text, "too much text");
        memcpy(r.text + r.n, emit, n_emit);
        r.n += n_emit;
        if (r.finish == SNUG_FINISH_NONE) r.n_fed = i + 1;
        if (r.finish != SNUG_FINISH_NONE)
            CHECK(n_emit == 0 && f == r.finish, "a call after the end emitted %zu bytes", n_emit);
        r.finish = f;
    }
    r.text[r.n] = '\0';
    return r;
}

static snug_stop_params params(const char *const *stops)
{
    snug_stop_params p;
    snug_error err = {0};
    snug_stop_params_default(&p);
    CHECK_OK(snug_stop_params_add_eos(&p, EOS, &err), &err);
    CHECK_OK(snug_stop_params_add_eos(&p, OTHER_EOS, &err), &err);
    for (int i = 0; stops && stops[i]; i++)
        CHECK_OK(snug_stop_params_add_string(&p, stops[i], strlen(stops[i]), &err), &err);
    CHECK_OK(snug_stop_params_validate(&p, &err), &err);
    return p;
}

#define PIECES(...) ((const char *const[]){__VA_ARGS__, NULL})

#define EXPECT(p, pieces, want_text, want_finish)                                         \
    do {                                                                                  \
        run_result r_ = run(&(p), pieces);                                                \
        CHECK(r_.n == strlen(want_text) && memcmp(r_.text, want_text, r_.n) == 0,         \
              "emitted \"%s\", expected \"%s\"", r_.text, want_text);                     \
        CHECK(r_.finish == (want_finish), "finish %s, expected %s",                       \
              snug_finish_name(r_.finish), snug_finish_name(want_finish));                \
    } while (0)

static void test_split_stop_strings(void)
{
    snug_stop_params p = params(PIECES("STOP"));
    EXPECT(p, PIECES("hello ", "ST", "OP", " more"), "hello ", SNUG_FINISH_STOP_STRING);
    EXPECT(p, PIECES("hel", "lo S", "T", "OP and more"), "hello ", SNUG_FINISH_STOP_STRING);
    EXPECT(p, PIECES("helloSTOP"), "hello", SNUG_FINISH_STOP_STRING);
    EXPECT(p, PIECES("STOP"), "", SNUG_FINISH_STOP_STRING);
    EXPECT(p, PIECES("a", "", "S", "", "TO", "Pz"), "a", SNUG_FINISH_STOP_STRING);
    /* What was held and when: after "lo S" only "hello " may go out. */
    snug_stop_state st;
    snug_stop_state_init(&st);
    char emit[SNUG_STOP_STRING_MAX + 16];
    size_t n = 0;
    CHECK(snug_stop_feed(&p, &st, WORD, "lo S", 4, emit, &n) == SNUG_FINISH_NONE, "ended");
    CHECK(n == 3 && memcmp(emit, "lo ", 3) == 0 && st.n_held == 1, "emitted %zu, held %d", n,
          st.n_held);
    CHECK(snug_stop_feed(&p, &st, WORD, "TO", 2, emit, &n) == SNUG_FINISH_NONE && n == 0 &&
              st.n_held == 3,
          "after TO: emitted %zu, held %d", n, st.n_held);
    CHECK(snug_stop_feed(&p, &st, WORD, "P!", 2, emit, &n) == SNUG_FINISH_STOP_STRING && n == 0 &&
              st.stop_index == 0,
          "after P!: emitted %zu, stop_index %d", n, st.stop_index);
    CHECK(strcmp(snug_finish_reason_str(st.finish), "stop") == 0, "finish_reason %s",
          snug_finish_reason_str(st.finish));
}

static void test_partial_match_fails(void)
{
    snug_stop_params p = params(PIECES("abcd"));
    EXPECT(p, PIECES("xab", "c", "e", "f"), "xabcef", SNUG_FINISH_NONE);
    EXPECT(p, PIECES("ab", "ab", "c", "abcd"), "ababc", SNUG_FINISH_STOP_STRING);
    EXPECT(p, PIECES("a", "b", "c", "<eos>"), "abc", SNUG_FINISH_EOS); /* held, released */
    /* Overlapping candidates: "ababc" contains "abc" from the third byte. */
    snug_stop_params q = params(PIECES("abc"));
    EXPECT(q, PIECES("a", "b", "a", "b", "c"), "ab", SNUG_FINISH_STOP_STRING);
    EXPECT(q, PIECES("ababc"), "ab", SNUG_FINISH_STOP_STRING);
    EXPECT(q, PIECES("aab", "ab", "aac"), "aababaac", SNUG_FINISH_NONE);
    snug_stop_params r = params(PIECES("aab"));
    EXPECT(r, PIECES("a", "a", "a", "a", "b", "x"), "aa", SNUG_FINISH_STOP_STRING);
}

static void test_several_stop_strings(void)
{
    snug_stop_params p = params(PIECES("\n\n", "END", "Observation:"));
    EXPECT(p, PIECES("one\n", "two E", "N", "D"), "one\ntwo ", SNUG_FINISH_STOP_STRING);
    EXPECT(p, PIECES("x Obs", "erv", "ation:", "\n\n"), "x ", SNUG_FINISH_STOP_STRING);
    EXPECT(p, PIECES("x\n", "\nEND"), "x", SNUG_FINISH_STOP_STRING);
    /* The one that completes first wins; at the same byte, the longest. */
    snug_stop_params q = params(PIECES("b", "ab"));
    EXPECT(q, PIECES("xab"), "x", SNUG_FINISH_STOP_STRING);
    snug_stop_params r = params(PIECES("abcd", "bc"));
    EXPECT(r, PIECES("a", "b", "c", "d"), "a", SNUG_FINISH_STOP_STRING);
    EXPECT(r, PIECES("abcd"), "a", SNUG_FINISH_STOP_STRING);
    run_result res = run(&r, PIECES("zzbc"));
    CHECK(res.finish == SNUG_FINISH_STOP_STRING && strcmp(res.text, "zz") == 0, "got \"%s\"",
          res.text);
}

static void test_utf8(void)
{
    /* "世界" = e4 b8 96 e7 95 8c; the decoder may release a token's bytes
     * in pieces (0 bytes for a token that ends inside a character). */
    snug_stop_params p = params(PIECES("世界"));
    EXPECT(p, PIECES("你好", "\xe4\xb8", "\x96", "", "\xe7\x95\x8c", "!"), "你好",
           SNUG_FINISH_STOP_STRING);
    EXPECT(p, PIECES("你好世", "間"), "你好世間", SNUG_FINISH_NONE);
    EXPECT(p, PIECES("世", "<eos>"), "世", SNUG_FINISH_EOS);
    snug_stop_params q = params(PIECES("é"));
    EXPECT(q, PIECES("caf\xc3", "\xa9 au lait"), "caf", SNUG_FINISH_STOP_STRING);
}

static void test_eos_and_limits(void)
{
    snug_stop_params p = params(PIECES("xyz"));
    EXPECT(p, PIECES("hi", "<eos>", "after"), "hi", SNUG_FINISH_EOS);
    EXPECT(p, PIECES("hi", "<eos2>"), "hi", SNUG_FINISH_EOS);
    run_result r = run(&p, PIECES("a", "x", "<eos>", "b"));
    CHECK(strcmp(r.text, "ax") == 0 && r.n_fed == 3, "EOS with held bytes: \"%s\", %d fed", r.text,
          r.n_fed);
    p.ignore_eos = true;
    EXPECT(p, PIECES("hi", "<eos>", "after"), "hi</s>after", SNUG_FINISH_NONE);
    p.ignore_eos = false;
    p.max_tokens = 3;
    EXPECT(p, PIECES("a", "b", "c", "d"), "abc", SNUG_FINISH_MAX_TOKENS);
    EXPECT(p, PIECES("a", "b", "x", "yz"), "abx", SNUG_FINISH_MAX_TOKENS); /* held, released */
    EXPECT(p, PIECES("a", "b", "<eos>"), "ab", SNUG_FINISH_EOS);     /* EOS before length */
    EXPECT(p, PIECES("a", "b", "cxyz"), "abc", SNUG_FINISH_STOP_STRING);
    r = run(&p, PIECES("a", "b", "c", "d"));
    CHECK(r.n_fed == 3 && strcmp(snug_finish_reason_str(r.finish), "length") == 0,
          "max_tokens: %d fed, finish_reason %s", r.n_fed, snug_finish_reason_str(r.finish));
    p.max_tokens = 1;
    EXPECT(p, PIECES("", "b"), "", SNUG_FINISH_MAX_TOKENS);

    /* Ending from outside releases the held bytes once. */
    snug_stop_state st;
    snug_stop_state_init(&st);
    char emit[SNUG_STOP_STRING_MAX + 8];
    size_t n = 0;
    p.max_tokens = 0;
    snug_stop_feed(&p, &st, WORD, "okxy", 4, emit, &n);
    CHECK(n == 2 && st.n_held == 2, "emitted %zu, held %d", n, st.n_held);
    CHECK(snug_stop_end(&st, SNUG_FINISH_MODEL_LENGTH, emit, &n) == SNUG_FINISH_MODEL_LENGTH &&
              n == 2 && memcmp(emit, "xy", 2) == 0,
          "end released %zu bytes", n);
    CHECK(snug_stop_end(&st, SNUG_FINISH_ABORT, emit, &n) == SNUG_FINISH_MODEL_LENGTH && n == 0,
          "second end: %zu bytes", n);
    CHECK(snug_stop_feed(&p, &st, WORD, "z", 1, emit, &n) == SNUG_FINISH_MODEL_LENGTH && n == 0,
          "feed after the end emitted %zu", n);
    CHECK(snug_finish_reason_str(SNUG_FINISH_NONE) == NULL, "finish_reason of NONE");
    CHECK(strcmp(snug_finish_name(SNUG_FINISH_EOS), "eos") == 0, "name of EOS");
}

/* Random texts over {a, b, c}, stop strings that overlap each other, and
 * random tokenizations: the emitted text must equal the reference (cut
 * before the stop string that completes first, the longest at that byte). */
static void test_random_tokenizations(void)
{
    const char *stops[] = {"abc", "bca", "cc", "abab", "cab"};
    snug_stop_params p;
    snug_stop_params_default(&p);
    snug_error err = {0};
    for (size_t j = 0; j < SNUG_ARRAY_LEN(stops); j++)
        CHECK_OK(snug_stop_params_add_string(&p, stops[j], strlen(stops[j]), &err), &err);
    uint64_t key = snug_rng_key(11, "stop"), ctr = 0;
    int mismatches = 0, stopped = 0;
    for (int trial = 0; trial < 3000; trial++) {
        char text[64];
        int len = 1 + (int)(snug_mix64(key + ctr++) % 40);
        for (int i = 0; i < len; i++) text[i] = "abc"[snug_mix64(key + ctr++) % 3];
        /* Reference. */
        int cut = len;
        for (int end = 1; end <= len && cut == len; end++) {
            int best = -1;
            for (size_t j = 0; j < SNUG_ARRAY_LEN(stops); j++) {
                int l = (int)strlen(stops[j]);
                if (l <= end && memcmp(text + end - l, stops[j], (size_t)l) == 0 && l > best)
                    best = l;
            }
            if (best > 0) cut = end - best;
        }
        /* Random split into pieces of 0-4 bytes. */
        snug_stop_state st;
        snug_stop_state_init(&st);
        char out[128];
        size_t n_out = 0;
        snug_finish f = SNUG_FINISH_NONE;
        for (int pos = 0; pos < len && f == SNUG_FINISH_NONE;) {
            int piece = (int)(snug_mix64(key + ctr++) % 5);
            piece = SNUG_MIN(piece, len - pos);
            char emit[SNUG_STOP_STRING_MAX + 8];
            size_t n = 0;
            f = snug_stop_feed(&p, &st, WORD, text + pos, (size_t)piece, emit, &n);
            memcpy(out + n_out, emit, n);
            n_out += n;
            pos += piece;
        }
        if (f == SNUG_FINISH_NONE) {
            char emit[SNUG_STOP_STRING_MAX];
            size_t n = 0;
            snug_stop_end(&st, SNUG_FINISH_ABORT, emit, &n);
            memcpy(out + n_out, emit, n);
            n_out += n;
        }
        stopped += f == SNUG_FINISH_STOP_STRING;
        bool ok = n_out == (size_t)cut && memcmp(out, text, (size_t)cut) == 0 &&
                  (f == SNUG_FINISH_STOP_STRING) == (cut < len);
        if (!ok && mismatches++ < 5)
            CHECK(ok, "text \"%.*s\": emitted \"%.*s\", expected \"%.*s\"", len, text,
                  (int)n_out, out, cut, text);
    }
    printf("  3000 random texts, %d ended by a stop string, %d mismatches\n", stopped,
           mismatches);
    CHECK(mismatches == 0, "%d mismatches", mismatches);
    CHECK(stopped > 1000 && stopped < 3000, "only %d stopped", stopped);
}

static void test_validation(void)
{
    snug_error err = {0};
    snug_stop_params p;
    snug_stop_params_default(&p);
    CHECK_FAILS(snug_stop_params_add_string(&p, "", 0, &err), &err, SNUG_INVALID,
                "stop: expected strings of 1 to 256 bytes, got one of 0 bytes");
    char big[300];
    memset(big, 'x', sizeof big);
    CHECK_FAILS(snug_stop_params_add_string(&p, big, 257, &err), &err, SNUG_INVALID,
                "stop: expected strings of 1 to 256 bytes, got one of 257 bytes");
    CHECK_OK(snug_stop_params_add_string(&p, big, 256, &err), &err);
    CHECK_FAILS(snug_stop_params_add_string(&p, "\xff\xfe", 2, &err), &err, SNUG_INVALID,
                "stop: expected UTF-8 text, string 1 is not valid UTF-8");
    for (int i = 1; i < SNUG_STOP_MAX; i++)
        CHECK_OK(snug_stop_params_add_string(&p, "s", 1, &err), &err);
    CHECK_FAILS(snug_stop_params_add_string(&p, "t", 1, &err), &err, SNUG_INVALID,
                "stop: expected at most 16 strings");
    CHECK(p.n_stop == SNUG_STOP_MAX, "n_stop %d", p.n_stop);
    CHECK_OK(snug_stop_params_validate(&p, &err), &err);
    p.stop_len[3] = 0;
    CHECK_FAILS(snug_stop_params_validate(&p, &err), &err, SNUG_INVALID,
                "stop: expected strings of 1 to 256 bytes, string 3 has 0");
    p.stop_len[3] = 1;
    p.max_tokens = -1;
    CHECK_FAILS(snug_stop_params_validate(&p, &err), &err, SNUG_INVALID,
                "max_tokens: expected an integer >= 1 (or 0 for no limit), got -1");
    p.max_tokens = 0;
    CHECK_FAILS(snug_stop_params_add_eos(&p, -3, &err), &err, SNUG_INVALID,
                "eos_token_id: expected ids >= 0, got -3");
    for (int i = 0; i < SNUG_STOP_EOS_MAX; i++)
        CHECK_OK(snug_stop_params_add_eos(&p, i, &err), &err);
    CHECK_FAILS(snug_stop_params_add_eos(&p, 99, &err), &err, SNUG_INVALID,
                "eos_token_id: expected at most 16 ids");
    CHECK_OK(snug_stop_params_validate(&p, &err), &err);
    p.n_stop = 17;
    CHECK_FAILS(snug_stop_params_validate(&p, &err), &err, SNUG_INVALID,
                "stop: expected at most 16 strings, got 17");
    /* The longest stop string held almost whole, then completed. */
    snug_stop_params q;
    snug_stop_params_default(&q);
    CHECK_OK(snug_stop_params_add_string(&q, big, 256, &err), &err);
    snug_stop_state st;
    snug_stop_state_init(&st);
    char emit[SNUG_STOP_STRING_MAX + 300];
    size_t n = 0;
    CHECK(snug_stop_feed(&q, &st, WORD, big, 300, emit, &n) == SNUG_FINISH_STOP_STRING && n == 0,
          "300 x with a 256-x stop: emitted %zu", n);
    snug_stop_state_init(&st);
    snug_stop_feed(&q, &st, WORD, "y", 1, emit, &n);
    snug_stop_feed(&q, &st, WORD, big, 255, emit, &n);
    CHECK(n == 0 && st.n_held == 255, "255 x: emitted %zu, held %d", n, st.n_held);
    CHECK(snug_stop_feed(&q, &st, WORD, "x", 1, emit, &n) == SNUG_FINISH_STOP_STRING && n == 0,
          "the 256th x: emitted %zu", n);
}

int main(void)
{
    RUN(test_split_stop_strings);
    RUN(test_partial_match_fails);
    RUN(test_several_stop_strings);
    RUN(test_utf8);
    RUN(test_eos_and_limits);
    RUN(test_random_tokenizations);
    RUN(test_validation);
    return test_summary();
}
