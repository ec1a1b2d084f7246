/*
 * test_sampler.c: token selection. Distributions are checked against a
 * reference written here the slow way (double precision, a full sort):
 * 20,000 draws with a fixed seed must hit only the allowed ids, each with a
 * frequency within 5 binomial standard deviations of its probability (plus
 * 3 draws, for tokens too rare for the normal approximation).
 */
#include "base/mem.h"
#include "base/rng.h"
#include "engine/sampler.h"
#include "test.h"

#include <time.h>

#ifdef __SANITIZE_ADDRESS__
enum { N_DRAWS = 5000, MAX_V = 12000 }; /* sanitizers: 10x slower */
#else
enum { N_DRAWS = 20000, MAX_V = 12000 };
#endif

typedef struct ranked {
    double p;
    int32_t id;
} ranked;

/* Descending probability, ties by id. */
static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static void *scratch_alloc(int32_t n_vocab)
{
    snug_error err = {0};
    void *s = snug_mem_alloc(SNUG_MEM_OTHER, snug_sampler_scratch_bytes(n_vocab), &err);
    CHECK(s != NULL, "scratch: %s", err.msg);
    return s;
}

static bool all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return false;
    return true;
}

/* The reference: the probability of each token after temperature, top-k,
 * top-p and min-p, by sorting (ties by id) in double precision. */
static void reference_probs(const snug_sampling_params *p, const float *logits, int32_t n,
                            double *prob)
{
    static ranked rank[MAX_V];
    static int32_t order[MAX_V];
    double mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) mx = fmax(mx, logits[i]);
    double z = 0;
    for (int32_t i = 0; i < n; i++) {
        prob[i] = exp(((double)logits[i] - mx) / p->temperature);
        z += prob[i];
    }
    for (int32_t i = 0; i < n; i++) {
        prob[i] /= z;
        rank[i] = (ranked){prob[i], i};
    }
    qsort(rank, (size_t)n, sizeof rank[0], cmp_ranked);
    for (int32_t i = 0; i < n; i++) order[i] = rank[i].id;
    if (p->top_k > 0 && p->top_k < n) {
        double kth = prob[order[p->top_k - 1]];
        z = 0;
        for (int32_t i = 0; i < n; i++) {
            if (prob[i] < kth) prob[i] = 0;
            z += prob[i];
        }
        for (int32_t i = 0; i < n; i++) prob[i] /= z;
    }
    if (p->top_p < 1) {
        double before = 0;
        z = 0;
        for (int32_t r = 0; r < n; r++) {
            int32_t i = order[r];
            if (before >= p->top_p) {
                prob[i] = 0;
                continue;
            }
            before += prob[i];
            z += prob[i];
        }
        for (int32_t i = 0; i < n; i++) prob[i] /= z;
    }
    if (p->min_p > 0) {
        double top = prob[order[0]];
        z = 0;
        for (int32_t i = 0; i < n; i++) {
            if (prob[i] < p->min_p * top) prob[i] = 0;
            z += prob[i];
        }
        for (int32_t i = 0; i < n; i++) prob[i] /= z;
    }
}

/* Draws N_DRAWS tokens and compares them with the reference. Returns the
 * largest deviation in standard deviations. */
static double check_distribution_n(const char *what, const snug_sampling_params *p,
                                   const float *logits, int32_t n, int draws)
{
    static double prob[MAX_V];
    static int32_t hits[MAX_V];
    static float row[MAX_V];
    snug_error err = {0};
    CHECK_OK(snug_sampling_params_validate(p, n, &err), &err);
    reference_probs(p, logits, n, prob);
    void *scratch = scratch_alloc(n);
    if (!scratch) return INFINITY;
    snug_sampler_state st;
    snug_sampler_state_init(&st, p, 1234);
    memset(hits, 0, sizeof hits);
    for (int d = 0; d < draws; d++) {
        memcpy(row, logits, (size_t)n * sizeof(float));
        int32_t id = snug_sample(p, &st, row, n, NULL, 0, NULL, 0, scratch);
        CHECK(id >= 0 && id < n, "%s: drew id %d of %d", what, id, n);
        if (id >= 0 && id < n) hits[id]++;
    }
    double worst = 0;
    int32_t n_allowed = 0, n_hit = 0;
    for (int32_t i = 0; i < n; i++) {
        n_allowed += prob[i] > 0;
        n_hit += hits[i] > 0;
        if (prob[i] == 0) {
            CHECK(hits[i] == 0, "%s: token %d is not allowed but was drawn %d times", what, i,
                  hits[i]);
            continue;
        }
        double sd = sqrt(prob[i] * (1 - prob[i]) / draws), f = (double)hits[i] / draws;
        double dev = fabs(f - prob[i]) / sd;
        worst = fmax(worst, dev);
        CHECK(fabs(f - prob[i]) <= 5 * sd + 3.0 / draws,
              "%s: token %d drawn with frequency %.5f, probability %.5f (%.1f sd)", what, i, f,
              prob[i], dev);
    }
    CHECK(st.counter == (uint64_t)draws, "%s: %llu draws from the stream for %d calls", what,
          (unsigned long long)st.counter, draws);
    printf("  %-38s %4d allowed, %4d drawn in %5d, max deviation %.2f sd\n", what, n_allowed,
           n_hit, draws, worst);
    snug_mem_free(scratch);
    return worst;
}

static double check_distribution(const char *what, const snug_sampling_params *p,
                                 const float *logits, int32_t n)
{
    return check_distribution_n(what, p, logits, n, N_DRAWS);
}

static void test_greedy(void)
{
    enum { V = 200 };
    float logits[V];
    for (int i = 0; i < V; i++) logits[i] = (float)(i % 7) - 3.0f;
    logits[150] = 9.0f;
    logits[70] = 9.0f; /* tie: the lower id wins */
    logits[3] = NAN;   /* NaN never wins */
    void *scratch = scratch_alloc(V);
    if (!scratch) return;
    snug_sampling_params p;
    snug_sampling_params_default(&p);
    p.temperature = 0;
    snug_sampler_state st;
    snug_sampler_state_init(&st, &p, 1);
    int32_t id = snug_sample(&p, &st, logits, V, NULL, 0, NULL, 0, scratch);
    CHECK(id == 70, "greedy picked %d, expected 70 (ties -> lowest id)", id);
    CHECK(st.counter == 0, "greedy used %llu draws", (unsigned long long)st.counter);
    logits[0] = 9.0f;
    id = snug_sample(&p, &st, logits, V, NULL, 0, NULL, 0, scratch);
    CHECK(id == 0, "greedy picked %d, expected 0", id);
    /* The first entry NaN, the rest -infinity: the first that is not NaN. */
    float odd[3] = {NAN, -INFINITY, -INFINITY};
    id = snug_sample(&p, &st, odd, 3, NULL, 0, NULL, 0, scratch);
    CHECK(id == 1, "all -inf: picked %d, expected 1", id);
    /* Sampling with a +infinity logit is greedy among the infinities. */
    float inf[4] = {1, INFINITY, 2, INFINITY};
    p.temperature = 1;
    id = snug_sample(&p, &st, inf, 4, NULL, 0, NULL, 0, scratch);
    CHECK(id == 1, "+inf: picked %d, expected 1", id);
    /* Tiny temperatures: the largest logit every time (1e-39 makes 1 / t
     * overflow and is greedy). */
    const float tiny[] = {1e-6f, 1e-30f, 1e-39f};
    for (size_t t = 0; t < SNUG_ARRAY_LEN(tiny); t++) {
        p.temperature = tiny[t];
        p.top_k = t == 1 ? 5 : 0;
        int hits = 0;
        for (int d = 0; d < 100; d++) {
            logits[0] = 8.0f;
            hits += snug_sample(&p, &st, logits, V, NULL, 0, NULL, 0, scratch) == 70;
        }
        CHECK(hits == 100 || (t < 2 && hits > 30),
              "temperature %g: the tied maxima 70/150 drawn %d of 100 times", (double)tiny[t], hits);
    }
    snug_mem_free(scratch);
}

static void test_distributions(void)
{
    static const float small[8] = {1.0f, 2.0f, 3.0f, 0.5f, -1.0f, 2.5f, 0.0f, -3.0f};
    snug_sampling_params p;
    snug_sampling_params_default(&p);
    check_distribution("temperature 1", &p, small, 8);
    p.temperature = 0.5f;
    check_distribution("temperature 0.5", &p, small, 8);
    p.temperature = 1;
    p.top_k = 3;
    check_distribution("top_k 3", &p, small, 8);
    p.top_k = 0;
    p.top_p = 0.8f;
    check_distribution("top_p 0.8", &p, small, 8);
    p.top_p = 1;
    p.min_p = 0.2f;
    check_distribution("min_p 0.2", &p, small, 8);
    p.temperature = 1.3f;
    p.top_k = 5;
    p.top_p = 0.7f;
    p.min_p = 0.1f;
    check_distribution("t 1.3, top_k 5, top_p 0.7, min_p .1", &p, small, 8);

    /* top-k keeps every token tied with the k-th value. */
    static const float tie[5] = {3, 2, 2, 1, 0};
    snug_sampling_params_default(&p);
    p.top_k = 2;
    check_distribution("top_k 2 with a tie", &p, tie, 5);

    /* A flat row: the nucleus is the lowest ids (ties by id), 150 of 300. */
    static float flat[300];
    for (int i = 0; i < 300; i++) flat[i] = 0.25f;
    snug_sampling_params_default(&p);
    p.top_p = 0.5f;
    check_distribution("flat row, top_p 0.5", &p, flat, 300);

    /* A wider row: a head of 40 tokens over a long tail far below, and the
     * tail's mass matters for top-p (the prefilter must widen). */
    static float wide[MAX_V];
    uint64_t key = snug_rng_key(7, "wide");
    for (int i = 0; i < 4096; i++) {
        float r = (float)(snug_mix64(key + (uint64_t)i) >> 40) * 0x1.0p-24f; /* [0, 1) */
        wide[i] = i % 100 == 3 ? 4.0f + 2.0f * r : -2.0f + 3.0f * r;
    }
    snug_sampling_params_default(&p);
    p.top_p = 0.95f;
    check_distribution("4096 tokens, top_p 0.95", &p, wide, 4096);
    p.top_p = 0.3f;
    check_distribution("4096 tokens, top_p 0.3", &p, wide, 4096);
    p.top_p = 1;
    p.top_k = 30;
    check_distribution("4096 tokens, top_k 30", &p, wide, 4096);
    p.top_k = 100; /* past the head: the prefilter must widen */
    p.top_p = 0.9f;
    check_distribution("4096 tokens, top_k 100, top_p 0.9", &p, wide, 4096);
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0.3f;
    p.temperature = 0.7f;
    check_distribution("4096 tokens, t 0.7, min_p 0.3", &p, wide, 4096);

    /* 12,000 tokens, sd 1 (and many ties: the values are a sum of 4
     * bytes): the nucleus and the top-k set pass 2048 tokens, so the
     * prefilter narrows its threshold in more passes. */
    for (int i = 0; i < 12000; i++) wide[i] = snug_rng_normalish(snug_hash32((uint32_t)i + 77));
    snug_sampling_params_default(&p);
    p.top_p = 0.7f;
    check_distribution_n("12000 tokens, top_p 0.7", &p, wide, 12000, N_DRAWS / 4);
    p.top_p = 1;
    p.top_k = 3000;
    check_distribution_n("12000 tokens, top_k 3000", &p, wide, 12000, N_DRAWS / 4);
    p.top_p = 0.8f;
    p.min_p = 0.2f;
    check_distribution_n("12000 tokens, top_k 3000, p .8, min_p", &p, wide, 12000, N_DRAWS / 4);
}

static void test_penalties(void)
{
    enum { V = 12 };
    const float base[V] = {1.5f, -2.0f, 3.0f, 0.75f, -0.5f, 2.25f, 0.0f, 4.0f, -1.0f, 1.0f, 0.3f, -3.5f};
    const int32_t prompt[] = {1, 2, 2, 9, -5, 99};  /* -5 and 99: out of range, skipped */
    const int32_t output[] = {2, 3, 3, 3, 5, 8, 8}; /* counts: 2:1, 3:3, 5:1, 8:2 */
    int32_t count[V] = {0};
    bool seen[V] = {false};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(prompt); i++)
        if (prompt[i] >= 0 && prompt[i] < V) seen[prompt[i]] = true;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(output); i++) {
        seen[output[i]] = true;
        count[output[i]]++;
    }
    void *scratch = scratch_alloc(V);
    if (!scratch) return;
    const struct {
        float rep, freq, pres;
    } cases[] = {{1.3f, 0, 0}, {1, 0.5f, 0}, {1, 0, 0.25f}, {1.3f, 0.5f, 0.25f}, {0.8f, -1.5f, 2}};
    for (size_t c = 0; c < SNUG_ARRAY_LEN(cases); c++) {
        snug_sampling_params p;
        snug_sampling_params_default(&p);
        p.temperature = 0;
        p.repetition_penalty = cases[c].rep;
        p.frequency_penalty = cases[c].freq;
        p.presence_penalty = cases[c].pres;
        snug_sampler_state st;
        snug_sampler_state_init(&st, &p, 1);
        float row[V];
        memcpy(row, base, sizeof row);
        snug_sample(&p, &st, row, V, prompt, (int32_t)SNUG_ARRAY_LEN(prompt), output,
                    (int32_t)SNUG_ARRAY_LEN(output), scratch);
        for (int i = 0; i < V; i++) {
            float want = base[i];
            bool rep_applies = p.repetition_penalty != 1 && seen[i];
            if (rep_applies) want = want > 0 ? want / p.repetition_penalty
                                              : want * p.repetition_penalty;
            if (count[i] > 0)
                want -= p.frequency_penalty * (float)count[i] + p.presence_penalty * 1.0f;
            CHECK(row[i] == want, "case %zu (rep %g freq %g pres %g): token %d: %.9g, expected %.9g",
                  c, (double)cases[c].rep, (double)cases[c].freq, (double)cases[c].pres, i,
                  (double)row[i], (double)want);
        }
        CHECK(all_zero(scratch, V * sizeof(uint32_t)), "case %zu: count array not cleared", c);
    }
    /* Hand-checked values: 3.0 in the prompt and once in the output, with
     * rep 1.5, freq 0.5, pres 0.25 -> 3/1.5 - 0.5 - 0.25 = 1.25; -2 in the
     * prompt only -> -3; 0.75 three times in the output -> 0.5 - 1.75. */
    snug_sampling_params p;
    snug_sampling_params_default(&p);
    p.temperature = 0;
    p.repetition_penalty = 1.5f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    snug_sampler_state st;
    snug_sampler_state_init(&st, &p, 1);
    float row[V];
    memcpy(row, base, sizeof row);
    int32_t id = snug_sample(&p, &st, row, V, prompt, (int32_t)SNUG_ARRAY_LEN(prompt), output,
                             (int32_t)SNUG_ARRAY_LEN(output), scratch);
    CHECK(row[2] == 1.25f && row[1] == -3.0f && row[3] == -1.25f,
          "penalized logits %g %g %g, expected 1.25 -3 -1.25", (double)row[2], (double)row[1],
          (double)row[3]);
    CHECK(id == 7, "greedy after penalties picked %d, expected 7", id);
    snug_mem_free(scratch);
}

static void test_logit_bias(void)
{
    enum { V = 16 };
    float base[V];
    for (int i = 0; i < V; i++) base[i] = (float)i * 0.5f; /* 15 is the favourite */
    void *scratch = scratch_alloc(V);
    if (!scratch) return;
    snug_logit_bias bias[2] = {{3, 100.0f}, {15, -100.0f}};
    snug_sampling_params p;
    snug_sampling_params_default(&p);
    p.logit_bias = bias;
    p.n_logit_bias = 1;
    snug_sampler_state st;
    snug_sampler_state_init(&st, &p, 5);
    int forced = 0, banned = 0;
    for (int d = 0; d < 2000; d++) {
        float row[V];
        memcpy(row, base, sizeof row);
        forced += snug_sample(&p, &st, row, V, NULL, 0, NULL, 0, scratch) == 3;
        CHECK(d > 0 || row[3] == 101.5f, "biased logit %g, expected 101.5", (double)row[3]);
    }
    CHECK(forced == 2000, "+100 bias: token 3 drawn %d of 2000 times", forced);
    p.logit_bias = bias + 1;
    p.top_k = 4;
    for (int d = 0; d < 2000; d++) {
        float row[V];
        memcpy(row, base, sizeof row);
        int32_t id = snug_sample(&p, &st, row, V, NULL, 0, NULL, 0, scratch);
        banned += id == 15;
        CHECK(id >= 11 && id <= 14, "-100 bias with top_k 4: drew %d, expected 11..14", id);
    }
    CHECK(banned == 0, "-100 bias: token 15 drawn %d times", banned);
    snug_mem_free(scratch);
}

/* Draws n tokens for a request from a fresh state. */
static void draw_sequence(const snug_sampling_params *p, uint64_t fallback, const float *logits,
                          int32_t V, void *scratch, int32_t *out, int n)
{
    static float row[MAX_V];
    snug_sampler_state st;
    snug_sampler_state_init(&st, p, fallback);
    for (int i = 0; i < n; i++) {
        memcpy(row, logits, (size_t)V * sizeof(float));
        out[i] = snug_sample(p, &st, row, V, NULL, 0, out, i, scratch);
    }
}

static void test_seeds(void)
{
    enum { V = 64, N = 200 };
    float logits[V];
    for (int i = 0; i < V; i++) logits[i] = (float)((i * 37) % 11) * 0.3f;
    void *scratch = scratch_alloc(V);
    if (!scratch) return;
    snug_sampling_params p;
    snug_sampling_params_default(&p);
    p.top_p = 0.95f;
    p.frequency_penalty = 0.1f;
    p.has_seed = true;
    p.seed = 42;
    int32_t a[N], b[N], c[N], d[N];
    draw_sequence(&p, 1, logits, V, scratch, a, N);
    draw_sequence(&p, 2, logits, V, scratch, b, N); /* the fallback is ignored with a seed */
    CHECK(memcmp(a, b, sizeof a) == 0, "seed 42 gave two different sequences");
    p.seed = 43;
    draw_sequence(&p, 1, logits, V, scratch, c, N);
    int same = 0;
    for (int i = 0; i < N; i++) same += a[i] == c[i];
    CHECK(same < N / 2, "seeds 42 and 43 agree on %d of %d tokens", same, N);
    p.has_seed = false;
    draw_sequence(&p, 42, logits, V, scratch, d, N);
    CHECK(memcmp(a, d, sizeof a) == 0, "fallback seed 42 differs from seed 42");

    /* Interleaved with another request (the same scratch, another stream):
     * the sequence does not change. */
    p.has_seed = true;
    p.seed = 42;
    snug_sampling_params q = p;
    q.seed = 9;
    q.temperature = 2;
    snug_sampler_state sa, sq;
    snug_sampler_state_init(&sa, &p, 0);
    snug_sampler_state_init(&sq, &q, 0);
    int32_t mixed[N], other[N];
    for (int i = 0; i < N; i++) {
        float row[V];
        memcpy(row, logits, sizeof row);
        other[i] = snug_sample(&q, &sq, row, V, NULL, 0, other, i, scratch);
        memcpy(row, logits, sizeof row);
        mixed[i] = snug_sample(&p, &sa, row, V, NULL, 0, mixed, i, scratch);
    }
    CHECK(memcmp(a, mixed, sizeof a) == 0, "interleaving with another request changed the tokens");
    snug_mem_free(scratch);
}

static void test_padding(void)
{
    enum { V = 100, PAD = 28 };
    float base[V + PAD];
    for (int i = 0; i < V; i++) base[i] = (float)(i % 10) * 0.2f;
    for (int i = V; i < V + PAD; i++) base[i] = i % 2 ? 1e30f : NAN;
    void *scratch = scratch_alloc(V);
    if (!scratch) return;
    const struct {
        float t, top_p, min_p;
        int32_t top_k;
    } cases[] = {{0, 1, 0, 0}, {1, 1, 0, 0}, {1, 0.5f, 0, 0}, {1, 1, 0, 5}, {1, 1, 0.5f, 0}};
    for (size_t c = 0; c < SNUG_ARRAY_LEN(cases); c++) {
        snug_sampling_params p;
        snug_sampling_params_default(&p);
        p.temperature = cases[c].t;
        p.top_p = cases[c].top_p;
        p.top_k = cases[c].top_k;
        p.min_p = cases[c].min_p;
        snug_sampler_state st;
        snug_sampler_state_init(&st, &p, c);
        int32_t worst = -1;
        for (int d = 0; d < 500; d++) {
            float row[V + PAD];
            memcpy(row, base, sizeof row);
            int32_t id = snug_sample(&p, &st, row, V, NULL, 0, NULL, 0, scratch);
            worst = SNUG_MAX(worst, id);
            CHECK(memcmp(row + V, base + V, PAD * sizeof(float)) == 0, "padding was written");
        }
        /* Greedy: 9 (the first of the largest); sampling reaches the 90s. */
        CHECK(c == 0 ? worst == 9 : worst < V && worst >= 90,
              "case %zu: largest id drawn %d, vocabulary %d", c, worst, V);
    }
    snug_mem_free(scratch);
}

static void test_validation(void)
{
    snug_error err = {0};
    snug_sampling_params p;
    snug_logit_bias bias[2] = {{1, 5}, {0, 0}};
#define BAD(field, value, text)                                                        \
    do {                                                                               \
        snug_sampling_params_default(&p);                                              \
        p.field = value;                                                               \
        CHECK_FAILS(snug_sampling_params_validate(&p, 1000, &err), &err, SNUG_INVALID, \
                    text);                                                             \
    } while (0)
    BAD(temperature, NAN, "temperature: expected a finite number, got nan");
    BAD(temperature, INFINITY, "temperature: expected a finite number, got inf");
    BAD(temperature, -1, "temperature: expected a number >= 0, got -1");
    BAD(top_p, 0, "top_p: expected a number in (0, 1], got 0");
    BAD(top_p, 1.5f, "top_p: expected a number in (0, 1], got 1.5");
    BAD(top_p, NAN, "top_p: expected a finite number, got nan");
    BAD(top_k, -1, "top_k: expected an integer >= 0 (0 disables it), got -1");
    BAD(min_p, -0.25f, "min_p: expected a number in [0, 1], got -0.25");
    BAD(min_p, 2, "min_p: expected a number in [0, 1], got 2");
    BAD(repetition_penalty, 0, "repetition_penalty: expected a number > 0 (1 disables it), got 0");
    BAD(frequency_penalty, 2.5f, "frequency_penalty: expected a number in [-2, 2], got 2.5");
    BAD(presence_penalty, -3, "presence_penalty: expected a number in [-2, 2], got -3");
    BAD(presence_penalty, -INFINITY, "presence_penalty: expected a finite number, got -inf");
    BAD(n_logit_bias, 1, "logit_bias: 1 entries but no array");
    snug_sampling_params_default(&p);
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    CHECK_OK(snug_sampling_params_validate(&p, 1000, &err), &err);
    bias[1].id = 1000;
    CHECK_FAILS(snug_sampling_params_validate(&p, 1000, &err), &err, SNUG_INVALID,
                "logit_bias: expected token ids in [0, 1000), got 1000");
    bias[1].id = -1;
    CHECK_FAILS(snug_sampling_params_validate(&p, 1000, &err), &err, SNUG_INVALID,
                "got -1");
    bias[1].id = 7;
    bias[1].bias = -100.5f;
    CHECK_FAILS(snug_sampling_params_validate(&p, 1000, &err), &err, SNUG_INVALID,
                "logit_bias: expected a bias in [-100, 100] for token 7, got -100.5");
    bias[1].bias = NAN;
    CHECK_FAILS(snug_sampling_params_validate(&p, 1000, &err), &err, SNUG_INVALID, "got nan");
    bias[1].bias = -100;
    CHECK_OK(snug_sampling_params_validate(&p, 1000, &err), &err);
    snug_sampling_params_default(&p);
    p.temperature = 0;
    p.top_p = 1;
    p.min_p = 1;
    p.top_k = 5;
    p.repetition_penalty = 0.01f;
    p.frequency_penalty = -2;
    p.presence_penalty = 2;
    CHECK_OK(snug_sampling_params_validate(&p, 1000, &err), &err);
#undef BAD
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* The time limit per call: generous (a regression to a full sort or to
 * scalar exp would still pass on a slow machine); sanitizers slow it 10x. */
#ifdef __SANITIZE_ADDRESS__
enum { US_LIMIT = 50000, CALLS = 20 };
#else
enum { US_LIMIT = 5000, CALLS = 200 };
#endif

/* Qwen-sized rows: normal-like logits (sd 2.5), once with three peaks that
 * hold about 95% of the mass (a confident model), once without. */
static void test_speed(void)
{
    enum { V = 152064 };
    snug_error err = {0};
    float *base = snug_mem_alloc(SNUG_MEM_OTHER, 2 * V * sizeof(float), &err);
    void *scratch = scratch_alloc(V);
    if (!base || !scratch) goto done;
    float *row = base + V;
    int32_t history[512];
    for (int i = 0; i < 512; i++) history[i] = (int32_t)(snug_hash32((uint32_t)i) % V);
    const struct {
        const char *name;
        float t, top_p, min_p, rep;
        int32_t top_k;
    } cases[] = {
        {"greedy", 0, 1, 0, 1, 0},
        {"temperature 1", 1, 1, 0, 1, 0},
        {"top_k 50", 1, 1, 0, 1, 50},
        {"top_p 0.9", 1, 0.9f, 0, 1, 0},
        {"top_p 0.9, top_k 50", 1, 0.9f, 0, 1, 50},
        {"t .8, top_p .9, top_k 50, min_p, rep", 0.8f, 0.9f, 0.05f, 1.1f, 50},
        {"min_p 0.1", 1, 1, 0.1f, 1, 0},
    };
    for (int peaked = 1; peaked >= 0; peaked--) {
        for (uint32_t i = 0; i < V; i++)
            base[i] = 2.5f * snug_rng_normalish(snug_hash32(i * 7919u + 1));
        if (peaked) {
            base[1234] = 18;
            base[99999] = 17;
            base[5] = 16;
        }
        for (size_t c = 0; c < SNUG_ARRAY_LEN(cases); c++) {
            snug_sampling_params p;
            snug_sampling_params_default(&p);
            p.temperature = cases[c].t;
            p.top_p = cases[c].top_p;
            p.top_k = cases[c].top_k;
            p.min_p = cases[c].min_p;
            p.repetition_penalty = cases[c].rep;
            snug_sampler_state st;
            snug_sampler_state_init(&st, &p, 3);
            double us = 0;
            int32_t top = 0;
            for (int i = 0; i < CALLS; i++) {
                memcpy(row, base, V * sizeof(float));
                double t0 = now_us();
                int32_t id =
                    snug_sample(&p, &st, row, V, history, 256, history + 256, 256, scratch);
                us += now_us() - t0;
                top += id == 1234 || id == 99999 || id == 5;
            }
            us /= CALLS;
            printf("  %-7s %-37s %7.1f us per call (V = %d)\n", peaked ? "peaked" : "flat",
                   cases[c].name, us, V);
            CHECK(us < US_LIMIT, "%s: %.0f us per call, limit %d", cases[c].name, us, US_LIMIT);
            if (peaked)
                CHECK(top > CALLS * 8 / 10, "%s: the three peaks drawn only %d of %d times",
                      cases[c].name, top, CALLS);
        }
    }
done:
    snug_mem_free(scratch);
    snug_mem_free(base);
}

/* snug_sampler_argmax on its own: the lowest id among equal maxima in
 * different 256-entry blocks and in one block, NaN never, an all -infinity
 * row its first entry that is not NaN, against a plain scan. */
static void test_argmax(void)
{
    enum { V = 1000 };
    float row[V];
    for (int i = 0; i < V; i++) row[i] = (float)((i * 37) % 101) * 0.01f;
    row[900] = 5.0f;
    row[300] = 5.0f; /* an earlier block */
    row[310] = 5.0f; /* the same block, later */
    row[2] = NAN;
    CHECK(snug_sampler_argmax(row, V) == 300, "argmax %d, expected 300", snug_sampler_argmax(row, V));
    row[2] = 6.0f;
    CHECK(snug_sampler_argmax(row, V) == 2, "argmax %d, expected 2", snug_sampler_argmax(row, V));
    CHECK(snug_sampler_argmax(row + 3, V - 3) == 297, "argmax of the tail %d, expected 297",
          snug_sampler_argmax(row + 3, V - 3));
    for (int i = 0; i < V; i++) row[i] = i < 600 ? NAN : -INFINITY;
    CHECK(snug_sampler_argmax(row, V) == 600, "all -inf after NaN: %d, expected 600",
          snug_sampler_argmax(row, V));
    for (int i = 0; i < V; i++) row[i] = NAN;
    CHECK(snug_sampler_argmax(row, V) == 0, "all NaN: %d, expected 0", snug_sampler_argmax(row, V));
    uint64_t x = 12345;
    for (int t = 0; t < 200; t++) { /* random rows with few distinct values: many ties */
        int n = 1 + (int)(x % V);
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            row[i] = (float)(x >> 61) - 3.0f;
        }
        int best = 0;
        for (int i = 1; i < n; i++) best = row[i] > row[best] ? i : best;
        CHECK(snug_sampler_argmax(row, n) == best, "row %d of %d: %d, expected %d", t, n,
              snug_sampler_argmax(row, n), best);
    }
}

/* Speculative sampling: tokens drafted from q = softmax(draft / t_q), each
 * verified by snug_sample_draft against p (the sampler's distribution for
 * params p), come out distributed as p, whatever q is; the share of drafts
 * kept is sum_y min(p(y), q(y)). Returns the largest deviation in sd. */
static double check_draft_n(const char *what, const snug_sampling_params *p, const float *logits,
                            const float *draft, float t_q, int32_t n, int32_t nq, int draws)
{
    static double prob[MAX_V], qprob[MAX_V];
    static int32_t hits[MAX_V];
    static float row[MAX_V], qrow[MAX_V];
    reference_probs(p, logits, n, prob);
    snug_sampling_params qp;
    snug_sampling_params_default(&qp);
    qp.temperature = t_q;
    reference_probs(&qp, draft, nq, qprob); /* (a draft of nq tokens: q 0 past them) */
    for (int32_t i = nq; i < n; i++) qprob[i] = 0;
    double overlap = 0;
    for (int32_t i = 0; i < n; i++) overlap += fmin(prob[i], qprob[i]);
    void *scratch = scratch_alloc(n);
    if (!scratch) return INFINITY;
    snug_sampler_state st, dst;
    snug_sampler_state_init(&st, p, 99);
    snug_sampler_state_init(&dst, &qp, 77);
    memset(hits, 0, sizeof hits);
    int kept = 0;
    for (int d = 0; d < draws; d++) {
        memcpy(qrow, draft, (size_t)nq * sizeof(float));
        snug_draft dr = {snug_sample(&qp, &dst, qrow, nq, NULL, 0, NULL, 0, scratch), qrow, nq, t_q};
        memcpy(row, logits, (size_t)n * sizeof(float));
        int32_t id = snug_sample_draft(p, &st, row, n, NULL, 0, NULL, 0, scratch, &dr);
        CHECK(id >= 0 && id < n, "%s: drew id %d of %d", what, id, n);
        if (id < 0 || id >= n) continue;
        hits[id]++;
        kept += id == dr.token;
    }
    double worst = 0;
    for (int32_t i = 0; i < n; i++) {
        if (prob[i] == 0) {
            CHECK(hits[i] == 0, "%s: token %d is not allowed but was drawn %d times", what, i, hits[i]);
            continue;
        }
        double sd = sqrt(prob[i] * (1 - prob[i]) / draws), f = (double)hits[i] / draws;
        worst = fmax(worst, fabs(f - prob[i]) / sd);
        CHECK(fabs(f - prob[i]) <= 5 * sd + 3.0 / draws,
              "%s: token %d drawn with frequency %.5f, probability %.5f (%.1f sd)", what, i, f, prob[i],
              fabs(f - prob[i]) / sd);
    }
    double rate = (double)kept / draws, rate_sd = sqrt(overlap * (1 - overlap) / draws) + 1e-9;
    CHECK(fabs(rate - overlap) <= 5 * rate_sd + 3.0 / draws,
          "%s: kept %.4f of the drafts, sum min(p, q) is %.4f", what, rate, overlap);
    CHECK(st.counter >= (uint64_t)draws && st.counter <= 2 * (uint64_t)draws,
          "%s: %llu draws from the stream for %d calls", what, (unsigned long long)st.counter, draws);
    printf("  %-38s kept %.3f (sum min(p, q) %.3f), max deviation %.2f sd\n", what, rate, overlap, worst);
    snug_mem_free(scratch);
    return worst;
}

static void test_draft_sampling(void)
{
    static const float small[8] = {1.0f, 2.0f, 3.0f, 0.5f, -1.0f, 2.5f, 0.0f, -3.0f};
    static const float other[8] = {2.5f, 0.0f, 1.0f, 3.0f, -2.0f, 2.0f, 1.5f, 0.5f}; /* a poor draft */
    snug_sampling_params p;
    snug_sampling_params_default(&p);
    p.temperature = 0.8f;
    check_draft_n("draft: t 0.8, a poor draft", &p, small, other, 0.8f, 8, 8, N_DRAWS);
    check_draft_n("draft: t 0.8, the model's own row", &p, small, small, 0.8f, 8, 8, N_DRAWS);
    check_draft_n("draft: t 0.8, its row at t 1.5", &p, small, small, 1.5f, 8, 8, N_DRAWS);
    check_draft_n("draft: t 0.8, a draft of 5 tokens", &p, small, small, 0.8f, 8, 5, N_DRAWS);
    p.top_k = 3;
    check_draft_n("draft: top_k 3 (q outside p's support)", &p, small, small, 0.8f, 8, 8, N_DRAWS);
    p.top_k = 0;
    p.top_p = 0.7f;
    p.min_p = 0.05f;
    check_draft_n("draft: top_p 0.7, min_p .05", &p, small, other, 1.0f, 8, 8, N_DRAWS);
    /* a row too wide for the prefilter's first thresholds, a draft of it shifted */
    static float wide[3000], wdraft[3000];
    for (int i = 0; i < 3000; i++) {
        wide[i] = 2.0f * snug_rng_normalish(snug_hash32((uint32_t)i + 11));
        wdraft[i] = wide[i] + snug_rng_normalish(snug_hash32((uint32_t)i + 5011));
    }
    snug_sampling_params_default(&p);
    check_draft_n("draft: 3000 tokens, full softmax", &p, wide, wdraft, 1.0f, 3000, 3000, N_DRAWS);
    p.top_p = 0.5f;
    check_draft_n("draft: 3000 tokens, top_p 0.5", &p, wide, wdraft, 1.0f, 3000, 3000, N_DRAWS);
    /* greedy: the argmax, whatever the draft */
    snug_sampling_params_default(&p);
    p.temperature = 0;
    void *scratch = scratch_alloc(8);
    if (!scratch) return;
    float row[8];
    memcpy(row, small, sizeof row);
    snug_sampler_state st;
    snug_sampler_state_init(&st, &p, 3);
    snug_draft dr = {5, other, 8, 1.0f};
    CHECK(snug_sample_draft(&p, &st, row, 8, NULL, 0, NULL, 0, scratch, &dr) == 2 && st.counter == 0,
          "greedy verification: the argmax, no draws");
    snug_mem_free(scratch);
}

int main(void)
{
    RUN(test_greedy);
    RUN(test_argmax);
    RUN(test_draft_sampling);
    RUN(test_distributions);
    RUN(test_penalties);
    RUN(test_logit_bias);
    RUN(test_seeds);
    RUN(test_padding);
    RUN(test_validation);
    RUN(test_speed);
    return test_summary();
}
