/*
 * sampler.c: next-token selection (see sampler.h for the contract).
 *
 * Exactness of the candidate prefilter: every filter keeps a prefix of the
 * tokens ordered by scaled logit (ties by id), so a threshold t on the
 * scaled logit s = (logit - max) / temperature gives a candidate set
 * C = {s >= t} that is itself such a prefix. C holds every survivor when it
 * has at least k tokens (top-k keeps the tokens reaching the k-th value, all
 * of which are >= t) or at least top_p of the probability mass (the nucleus
 * is the shortest prefix reaching that mass; float sums are compared with a
 * margin above their error bound). One vectorized pass measures count (or
 * mass) above 8 thresholds at once and the first sufficient one is used;
 * while it keeps over REFINE_LIMIT tokens, up to two more passes try 8
 * thresholds between it and the one before; when none is sufficient, C is
 * the whole row. The same inline functions compute s and exp(s) in every
 * pass (SIMD and scalar code give the same IEEE results), so the passes
 * agree to the bit.
 */
#include "sampler.h"

#include "base/rng.h"

#include <math.h>
#include <string.h>

enum {
    BLOCK = 256,       /* tokens per partial sum in the no-top-k/top-p draw */
    SMALL_SORT = 16,   /* quickselect hands segments this small to insertion sort */
    N_LADDER = 8,      /* thresholds measured by a prefilter pass */
    REFINE_LIMIT = 2048 /* the prefilter narrows down while it keeps more */
};

#define SEEN 0x80000000u /* count-array flag: token is in the prompt or output */

/* A candidate token: scaled logit, exp of it (unnormalized probability). */
typedef struct cand {
    float s;
    float e;
    int32_t id;
} cand;

void snug_sampling_params_default(snug_sampling_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
}

snug_status snug_sampling_params_validate(const snug_sampling_params *p, int32_t n_vocab,
                                          snug_error *err)
{
    const struct {
        const char *name;
        float v;
    } f[] = {{"temperature", p->temperature},
             {"top_p", p->top_p},
             {"min_p", p->min_p},
             {"repetition_penalty", p->repetition_penalty},
             {"frequency_penalty", p->frequency_penalty},
             {"presence_penalty", p->presence_penalty}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(f); i++)
        if (!isfinite(f[i].v))
            return snug_errorf(err, SNUG_INVALID, "%s: expected a finite number, got %g", f[i].name,
                               (double)f[i].v);
    if (p->temperature < 0)
        return snug_errorf(err, SNUG_INVALID, "temperature: expected a number >= 0, got %g",
                           (double)p->temperature);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return snug_errorf(err, SNUG_INVALID, "top_p: expected a number in (0, 1], got %g",
                           (double)p->top_p);
    if (p->top_k < 0)
        return snug_errorf(err, SNUG_INVALID,
                           "top_k: expected an integer >= 0 (0 disables it), got %d", p->top_k);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return snug_errorf(err, SNUG_INVALID, "min_p: expected a number in [0, 1], got %g",
                           (double)p->min_p);
    if (!(p->repetition_penalty > 0))
        return snug_errorf(err, SNUG_INVALID,
                           "repetition_penalty: expected a number > 0 (1 disables it), got %g",
                           (double)p->repetition_penalty);
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
        return snug_errorf(err, SNUG_INVALID,
                           "frequency_penalty: expected a number in [-2, 2], got %g",
                           (double)p->frequency_penalty);
    if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
        return snug_errorf(err, SNUG_INVALID,
                           "presence_penalty: expected a number in [-2, 2], got %g",
                           (double)p->presence_penalty);
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias))
        return snug_errorf(err, SNUG_INVALID, "logit_bias: %d entries%s", p->n_logit_bias,
                           p->n_logit_bias < 0 ? " (a negative count)" : " but no array");
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const snug_logit_bias *b = &p->logit_bias[i];
        if (b->id < 0 || b->id >= n_vocab)
            return snug_errorf(err, SNUG_INVALID,
                               "logit_bias: expected token ids in [0, %d), got %d", n_vocab,
                               b->id);
        if (!isfinite(b->bias) || b->bias < -100 || b->bias > 100)
            return snug_errorf(err, SNUG_INVALID,
                               "logit_bias: expected a bias in [-100, 100] for token %d, got %g",
                               b->id, (double)b->bias);
    }
    return SNUG_OK;
}

void snug_sampler_state_init(snug_sampler_state *s, const snug_sampling_params *p,
                             uint64_t fallback_seed)
{
    s->key = snug_rng_key(p->has_seed ? p->seed : fallback_seed, "sampler");
    s->counter = 0;
}

double snug_sampler_uniform(snug_sampler_state *s)
{
    s->counter++;
    uint64_t x = snug_mix64(s->key + s->counter * 0x9E3779B97F4A7C15ull);
    return (double)(x >> 11) * 0x1.0p-53;
}

/* Byte offsets inside the scratch block. */
static size_t counts_bytes(int32_t n_vocab)
{
    return snug_round_up((size_t)n_vocab * sizeof(uint32_t), 64);
}
static size_t probs_bytes(int32_t n_vocab)
{
    return snug_round_up((size_t)n_vocab * sizeof(float), 64);
}
static size_t blocks_bytes(int32_t n_vocab)
{
    return snug_round_up(((size_t)n_vocab + BLOCK - 1) / BLOCK * sizeof(double), 64);
}

size_t snug_sampler_scratch_bytes(int32_t n_vocab)
{
    if (n_vocab <= 0) return 64;
    return counts_bytes(n_vocab) + probs_bytes(n_vocab) + blocks_bytes(n_vocab) +
           snug_round_up((size_t)n_vocab * sizeof(cand), 64);
}

/* c ? a : b without a branch: with -ftrapping-math (the default) GCC does
 * not if-convert a select on a float comparison, which stops vectorization;
 * a comparison turned into a mask does vectorize. */
static inline float select_f(bool c, float a, float b)
{
    uint32_t ua, ub, m = (uint32_t)0 - (uint32_t)c;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    uint32_t r = (ua & m) | (ub & ~m);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* exp(x) for x <= 0 (relative error about 2e-7), 0 for x < -87, -infinity
 * or NaN. Branch-free so that loops over it vectorize. */
static inline float exp_neg(float x)
{
    bool in_range = x >= -87.0f;
    float xc = select_f(in_range, x, -87.0f);
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x / ln 2) */
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f; /* x - n ln 2, in two steps (Cody-Waite) */
    float q = 1.0f / 720;
    q = q * r + 1.0f / 120;
    q = q * r + 1.0f / 24;
    q = q * r + 1.0f / 6;
    q = q * r + 0.5f;
    q = q * r + 1.0f;
    q = q * r + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = q * scale;
    return select_f(in_range, y, 0.0f);
}

/* The scaled logit every pass uses: (logit - max) / temperature, <= 0. */
static inline float scaled(float logit, float max, float inv_t)
{
    return (logit - max) * inv_t;
}

/* Bias and penalties, in place; counts (n_vocab zeros) is left zeroed. */
static void apply_bias_and_penalties(const snug_sampling_params *p, float *logits,
                                     int32_t n_vocab, const int32_t *prompt, int32_t n_prompt,
                                     const int32_t *output, int32_t n_output, uint32_t *counts)
{
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        int32_t id = p->logit_bias[i].id;
        if (id >= 0 && id < n_vocab) logits[id] += p->logit_bias[i].bias;
    }
    float rep = p->repetition_penalty, freq = p->frequency_penalty, pres = p->presence_penalty;
    bool use_rep = rep != 1.0f;
    if (!use_rep && freq == 0.0f && pres == 0.0f) return;
    if (!use_rep) n_prompt = 0; /* the prompt only matters to the repetition penalty */
    for (int32_t i = 0; i < n_prompt; i++)
        if (prompt[i] >= 0 && prompt[i] < n_vocab) counts[prompt[i]] |= SEEN;
    for (int32_t i = 0; i < n_output; i++)
        if (output[i] >= 0 && output[i] < n_vocab)
            counts[output[i]] = (counts[output[i]] + 1) | SEEN;
    /* Apply once per distinct token and clear, walking the history again. */
    for (int32_t pass = 0; pass < 2; pass++) {
        const int32_t *ids = pass == 0 ? prompt : output;
        int32_t n = pass == 0 ? n_prompt : n_output;
        for (int32_t i = 0; i < n; i++) {
            int32_t id = ids[i];
            if (id < 0 || id >= n_vocab || counts[id] == 0) continue;
            uint32_t count = counts[id] & ~SEEN;
            counts[id] = 0;
            float v = logits[id];
            if (use_rep) v = v > 0 ? v / rep : v * rep;
            if (count > 0) v -= freq * (float)count + pres;
            logits[id] = v;
        }
    }
}

/* A float's place in the order of floats as an int32 (so that the maximum
 * is an integer maximum, which every compiler vectorizes); NaN goes last. */
static inline int32_t order_key(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    uint32_t k = b ^ ((uint32_t)((int32_t)b >> 31) & 0x7FFFFFFFu);
    return (b & 0x7FFFFFFFu) > 0x7F800000u ? INT32_MIN : (int32_t)k;
}

/* The largest logit (NaN ignored; -infinity when there is none). */
static float row_max(const float *logits, int32_t n)
{
    int32_t m = INT32_MIN;
#pragma omp simd reduction(max : m)
    for (int32_t i = 0; i < n; i++) {
        int32_t k = order_key(logits[i]);
        m = k > m ? k : m;
    }
    if (m == INT32_MIN) return -INFINITY;
    uint32_t b = (uint32_t)m ^ ((uint32_t)(m >> 31) & 0x7FFFFFFFu);
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The lowest id with the largest logit, in one pass: a vectorized maximum per
 * BLOCK, and a scan of a block only when it raises the maximum. */
int32_t snug_sampler_argmax(const float *logits, int32_t n)
{
    float best = -INFINITY;
    int32_t best_id = -1;
    for (int32_t b = 0; b < n; b += BLOCK) {
        int32_t e = SNUG_MIN(b + BLOCK, n);
        float m = row_max(logits + b, e - b);
        if (m > best) {
            best = m;
            for (best_id = b; logits[best_id] != m; best_id++) {}
        }
    }
    if (best_id >= 0) return best_id;
    for (int32_t i = 0; i < n; i++) /* all -infinity or NaN: the first that is not NaN */
        if (logits[i] == logits[i]) return i;
    return 0;
}

/* Fills prob[0, n) with exp of the scaled logits (0 below min_p, for NaN and
 * for -infinity) and block_sum with their sums per BLOCK (in float: the
 * relative error of a block sum is below 3e-6); returns the total. */
static double fill_probs(const float *logits, int32_t n, float max, float inv_t, float min_p,
                         float *prob, double *block_sum)
{
    double total = 0;
    for (int32_t lo = 0, b = 0; lo < n; lo += BLOCK, b++) {
        int32_t hi = SNUG_MIN(lo + BLOCK, n);
        float sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int32_t i = lo; i < hi; i++) {
            float e = exp_neg(scaled(logits[i], max, inv_t));
            e = select_f(e >= min_p, e, 0.0f);
            prob[i] = e;
            sum += e;
        }
        block_sum[b] = sum;
        total += sum;
    }
    return total;
}

/* A draft to verify (snug_sample_draft): its token, and its proposal q =
 * softmax(logits / temperature) over the draft row, as q(y) = exp_neg(
 * scaled(logits[y], max, inv_t)) * inv_z: the same float values the draw
 * that picked the token weighed it by (fill_probs, min_p 0). */
typedef struct verify {
    int32_t token;
    const float *logits;
    int32_t n;             /* q is 0 from logits[n] on */
    float max, inv_t;
    double inv_z;
    snug_sampler_state *s; /* the second draw's stream, on a rejection */
} verify;

static inline double q_of(const verify *v, int32_t y)
{
    return y < v->n ? (double)exp_neg(scaled(v->logits[y], v->max, v->inv_t)) * v->inv_z : 0.0;
}

/* The draft's acceptance (speculative sampling): given the target's final
 * weights w over ids (ids NULL: w[y] is token y's, y < n; else w[i] is
 * ids[i]'s) with sum total, and the first draw u: the draft's token with
 * probability min(1, p / q) at it, else a draw from max(0, p - q)
 * renormalized (a second draw from v->s), so that the result is
 * distributed as p, whatever q. Where rounding leaves the residual empty,
 * a draw from p itself. stride: bytes from one weight to the next. */
static int32_t verify_draft(const verify *v, const float *w, size_t stride, const int32_t *ids,
                            size_t id_stride, int32_t n, double total, double u)
{
#define W_AT(i) (*(const float *)((const char *)w + (size_t)(i) * stride))
#define ID_AT(i) (ids ? *(const int32_t *)((const char *)ids + (size_t)(i) * id_stride) : (i))
    double px = 0, inv_total = 1.0 / total;
    for (int32_t i = 0; i < n; i++)
        if (ID_AT(i) == v->token) {
            px = W_AT(i) * inv_total;
            break;
        }
    double qx = v->token >= 0 ? q_of(v, v->token) : 0;
    if (px > 0 && u * qx < px) return v->token;
    double residual = 0;
    for (int32_t i = 0; i < n; i++) residual += SNUG_MAX(0.0, W_AT(i) * inv_total - q_of(v, ID_AT(i)));
    double r = snug_sampler_uniform(v->s), acc = 0;
    bool from_p = !(residual > 0);
    r *= from_p ? 1.0 : residual;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        double wi = from_p ? W_AT(i) * inv_total : SNUG_MAX(0.0, W_AT(i) * inv_total - q_of(v, ID_AT(i)));
        if (wi <= 0) continue;
        last = ID_AT(i);
        acc += wi;
        if (r < acc) return last;
    }
    return last >= 0 ? last : ID_AT(0); /* rounding: the last with weight */
#undef W_AT
#undef ID_AT
}

/* Draw without top-k / top-p: the probabilities with partial sums per
 * block, then a walk over the blocks and inside one block. */
static int32_t draw_full(const float *logits, int32_t n_vocab, float max, float inv_t,
                         float min_p, double u, float *prob, double *block_sum, const verify *v)
{
    double total = fill_probs(logits, n_vocab, max, inv_t, min_p, prob, block_sum);
    if (v) return verify_draft(v, prob, sizeof *prob, NULL, 0, n_vocab, total, u);
    double r = u * total, acc = 0;
    for (int32_t lo = 0, b = 0; lo < n_vocab; lo += BLOCK, b++) {
        if (r >= acc + block_sum[b]) {
            acc += block_sum[b];
            continue;
        }
        for (int32_t i = lo, hi = SNUG_MIN(lo + BLOCK, n_vocab); i < hi; i++) {
            acc += prob[i];
            if (r < acc) return i;
        }
        break; /* rounding: fall through to the last token with weight */
    }
    for (int32_t i = n_vocab - 1; i > 0; i--)
        if (prob[i] > 0) return i;
    return 0;
}

/* Candidate order: larger s first, then lower id (a strict total order). */
static inline bool before(const cand *a, const cand *b)
{
    return a->s > b->s || (a->s == b->s && a->id < b->id);
}

static inline void swap_cand(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Partitions c[lo, hi) around a median-of-three pivot (positions drawn from a
 * hash of the range, so no fixed input is adversarial): returns q with
 * c[lo, q) before the pivot, the pivot at c[q], the rest after it. Adds the
 * weight of c[lo, q) to *mass_before. */
static int32_t partition(cand *c, int32_t lo, int32_t hi, double *mass_before)
{
    uint64_t h = snug_mix64(((uint64_t)(uint32_t)lo << 32) | (uint32_t)hi);
    uint32_t n = (uint32_t)(hi - lo);
    int32_t a = lo + (int32_t)((uint32_t)h % n), b = lo + (int32_t)((uint32_t)(h >> 21) % n),
            m = lo + (int32_t)((uint32_t)(h >> 42) % n);
    if (before(&c[b], &c[a])) { int32_t t = a; a = b; b = t; }
    if (before(&c[m], &c[a])) m = a;
    else if (before(&c[b], &c[m])) m = b;
    swap_cand(&c[m], &c[hi - 1]);
    cand pivot = c[hi - 1];
    int32_t q = lo;
    double mass = 0;
    for (int32_t j = lo; j < hi - 1; j++)
        if (before(&c[j], &pivot)) {
            mass += c[j].e;
            swap_cand(&c[q++], &c[j]);
        }
    swap_cand(&c[q], &c[hi - 1]);
    *mass_before += mass;
    return q;
}

static void insertion_sort(cand *c, int32_t lo, int32_t hi)
{
    for (int32_t i = lo + 1; i < hi; i++) {
        cand x = c[i];
        int32_t j = i;
        for (; j > lo && before(&x, &c[j - 1]); j--) c[j] = c[j - 1];
        c[j] = x;
    }
}

/* Rearranges c[0, n) so that c[0, k) are the first k in candidate order. */
static void select_first(cand *c, int32_t n, int32_t k)
{
    int32_t lo = 0, hi = n;
    while (hi - lo > SMALL_SORT) {
        double unused = 0;
        int32_t q = partition(c, lo, hi, &unused);
        if (q == k || q + 1 == k) return;
        if (k < q) hi = q;
        else lo = q + 1;
    }
    insertion_sort(c, lo, hi);
}

/* Rearranges c[0, n) and returns K: c[0, K) is the shortest prefix in
 * candidate order whose weight reaches target (a token is kept when the
 * weight before it is below target); K = n when none does (rounding). */
static int32_t select_mass(cand *c, int32_t n, double target)
{
    int32_t lo = 0, hi = n;
    double acc = 0; /* weight of c[0, lo), all kept */
    while (hi - lo > SMALL_SORT) {
        double mass = 0;
        int32_t q = partition(c, lo, hi, &mass);
        if (acc + mass >= target) {
            hi = q; /* the pivot and everything after it are cut */
        } else {
            acc += mass + c[q].e;
            lo = q + 1;
            if (acc >= target) return lo;
        }
    }
    insertion_sort(c, lo, hi);
    for (int32_t i = lo; i < hi; i++) {
        if (acc >= target) return i;
        acc += c[i].e;
    }
    return hi;
}

/* The first thresholds tried, as distances below the largest scaled logit
 * (for top-k, in raw logits: multiplied by 1 / temperature). */
static const float LADDER[N_LADDER] = {-0.5f, -1, -2, -4, -8, -16, -32, -64};

#define EACH_THRESHOLD(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

/* For each threshold thr[j], the number of tokens whose scaled logit reaches
 * it (count[j]) and, when prob is not NULL, their total probability
 * (mass[j], summed in float per BLOCK: relative error below 3e-6). With
 * fill, prob is first filled with exp of the scaled logits and *total gets
 * their sum. One vectorized pass. */
static void measure(const float *logits, int32_t n, float max, float inv_t, float *prob,
                    bool fill, const float thr[N_LADDER], int32_t count[N_LADDER],
                    double mass[N_LADDER], double *total)
{
#define DECL(j) const float t##j = thr[j]; int32_t n##j = 0;
    EACH_THRESHOLD(DECL)
#undef DECL
    if (!prob) {
#define COUNT(j) n##j += s >= t##j;
#pragma omp simd reduction(+ : n0, n1, n2, n3, n4, n5, n6, n7)
        for (int32_t i = 0; i < n; i++) {
            float s = scaled(logits[i], max, inv_t);
            EACH_THRESHOLD(COUNT)
        }
    } else {
        for (int j = 0; j < N_LADDER; j++) mass[j] = 0;
        double z = 0;
        for (int32_t lo = 0; lo < n; lo += BLOCK) {
            int32_t hi = SNUG_MIN(lo + BLOCK, n);
            if (fill) {
                float zb = 0;
#pragma omp simd reduction(+ : zb)
                for (int32_t i = lo; i < hi; i++) {
                    prob[i] = exp_neg(scaled(logits[i], max, inv_t));
                    zb += prob[i];
                }
                z += zb;
            }
            float m0 = 0, m1 = 0, m2 = 0, m3 = 0, m4 = 0, m5 = 0, m6 = 0, m7 = 0;
#define SUM(j) m##j += select_f(s >= t##j, e, 0.0f); n##j += s >= t##j;
#pragma omp simd reduction(+ : n0, n1, n2, n3, n4, n5, n6, n7, m0, m1, m2, m3, m4, m5, m6, m7)
            for (int32_t i = lo; i < hi; i++) {
                float s = scaled(logits[i], max, inv_t), e = prob[i];
                EACH_THRESHOLD(SUM)
            }
#define ADD(j) mass[j] += m##j;
            EACH_THRESHOLD(ADD)
        }
        if (fill) *total = z;
    }
#define OUT(j) count[j] = n##j;
    EACH_THRESHOLD(OUT)
#undef COUNT
#undef SUM
#undef ADD
#undef OUT
}

/* Draw with top-k and/or top-p (and min-p). prob (n_vocab) is used for
 * top-p without top-k; c holds up to n_vocab candidates. */
static int32_t draw_candidates(const snug_sampling_params *p, const float *logits,
                               int32_t n_vocab, float max, float inv_t, double u, float *prob,
                               cand *c, const verify *v)
{
    float min_p = p->min_p;
    int32_t k = p->top_k > 0 && p->top_k < n_vocab ? p->top_k : 0;
    double top_p = p->top_p;
    if (k > 0) prob = NULL;

    /* The prefilter: a threshold on s that keeps every survivor, refined
     * (each round tries 8 thresholds between the last insufficient and the
     * first sufficient one) while it keeps more than REFINE_LIMIT tokens. */
    double total = 0; /* the mass of the whole row, for top-p without top-k */
    float thr[N_LADDER];
    for (int j = 0; j < N_LADDER; j++) thr[j] = prob ? LADDER[j] : LADDER[j] * inv_t;
    float lower = -INFINITY, top = 0;
    int32_t n_top = 0; /* tokens reaching top (fewer than the survivors) */
    for (int round = 0; round < 3; round++) {
        int32_t count[N_LADDER];
        double mass[N_LADDER];
        measure(logits, n_vocab, max, inv_t, prob, round == 0, thr, count, mass, &total);
        int j = 0;
        /* Mass is compared with a margin above the float error, so that a
         * sufficient threshold is sufficient in exact arithmetic too. */
        while (j < N_LADDER &&
               !(prob ? mass[j] >= top_p * total * (1 + 1e-5) : count[j] >= k))
            j++;
        if (j == N_LADDER) break;
        lower = thr[j];
        if (j > 0) {
            top = thr[j - 1];
            n_top = count[j - 1];
        }
        /* Done when small, or when narrowing cannot shrink it by a third. */
        if (count[j] <= REFINE_LIMIT || count[j] <= n_top + n_top / 2) break;
        for (int i = 0; i < N_LADDER; i++) thr[i] = top + (lower - top) * (float)(i + 1) / 9;
    }

    /* Collect the candidates: a vector test skips blocks with none, and
     * dense blocks are copied without branches. */
    int32_t n = 0;
    for (int32_t lo = 0; lo < n_vocab; lo += 32) {
        int32_t hi = SNUG_MIN(lo + 32, n_vocab), hits = 0;
#pragma omp simd reduction(+ : hits)
        for (int32_t i = lo; i < hi; i++) hits += scaled(logits[i], max, inv_t) >= lower;
        if (hits == 0) continue;
        for (int32_t i = lo; i < hi; i++) {
            float s = scaled(logits[i], max, inv_t);
            if (hits > 4) {
                c[n] = (cand){s, prob ? prob[i] : 0.0f, i};
                n += s >= lower;
            } else if (s >= lower) {
                c[n++] = (cand){s, prob ? prob[i] : 0.0f, i};
            }
        }
    }

    if (k > 0 && n > k) {
        select_first(c, n, k);
        float kth = c[0].s;
        for (int32_t i = 1; i < k; i++) kth = c[i].s < kth ? c[i].s : kth;
        int32_t kept = k;
        for (int32_t i = k; i < n; i++) /* ties with the k-th value stay */
            if (c[i].s == kth) swap_cand(&c[kept++], &c[i]);
        n = kept;
    }
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!prob) c[i].e = exp_neg(c[i].s);
        sum += c[i].e;
    }
    if (top_p < 1.0) n = select_mass(c, n, top_p * (k > 0 ? sum : total));
    if (min_p > 0) {
        int32_t kept = 0;
        for (int32_t i = 0; i < n; i++)
            if (c[i].e >= min_p) c[kept++] = c[i];
        n = kept;
    }
    SNUG_ASSERT(n > 0); /* the largest logit (s = 0, e = 1) always survives */
    sum = 0;
    for (int32_t i = 0; i < n; i++) sum += c[i].e;
    if (v) return verify_draft(v, &c[0].e, sizeof *c, &c[0].id, sizeof *c, n, sum, u);
    double r = u * sum, acc = 0;
    for (int32_t i = 0; i < n; i++) {
        acc += c[i].e;
        if (r < acc) return c[i].id;
    }
    for (int32_t i = n - 1; i > 0; i--) /* rounding: the last with weight */
        if (c[i].e > 0) return c[i].id;
    return c[0].id;
}

/* snug_sample, with a draft to verify when d is not NULL. */
static int32_t sample(const snug_sampling_params *p, snug_sampler_state *s, float *logits,
                      int32_t n_vocab, const int32_t *prompt, int32_t n_prompt,
                      const int32_t *output, int32_t n_output, void *scratch, const snug_draft *d)
{
    SNUG_ASSERT(n_vocab > 0 && logits && scratch);
    uint32_t *counts = scratch; /* (n_vocab), zero between calls */
    void *work = (char *)scratch + counts_bytes(n_vocab);
    apply_bias_and_penalties(p, logits, n_vocab, prompt, n_prompt, output, n_output, counts);
    if (p->temperature == 0.0f) return snug_sampler_argmax(logits, n_vocab);

    double u = snug_sampler_uniform(s);
    float max = row_max(logits, n_vocab);
    if (!(max > -INFINITY && max < INFINITY)) return snug_sampler_argmax(logits, n_vocab);
    float inv_t = 1.0f / p->temperature;
    if (!(inv_t < INFINITY)) return snug_sampler_argmax(logits, n_vocab); /* temperature ~1e-38 */
    float *prob = work;                                                    /* (n_vocab) */
    double *block_sum = (double *)((char *)work + probs_bytes(n_vocab));   /* (n_blocks) */
    cand *c = (cand *)((char *)block_sum + blocks_bytes(n_vocab));          /* (n_vocab) */
    verify v = {0}, *vp = NULL;
    if (d) { /* the proposal's normalizer: as fill_probs sums it, in float per BLOCK */
        int32_t nq = SNUG_MAX(0, SNUG_MIN(d->n_logits, n_vocab));
        v = (verify){.token = d->token < nq ? d->token : -1, .logits = d->logits, .n = nq,
                     .max = nq > 0 ? row_max(d->logits, nq) : -INFINITY, .inv_t = 1.0f / d->temperature, .s = s};
        double z = 0;
        for (int32_t lo = 0; lo < nq; lo += BLOCK) {
            float zb = 0;
            int32_t hi = SNUG_MIN(lo + BLOCK, nq);
#pragma omp simd reduction(+ : zb)
            for (int32_t i = lo; i < hi; i++) zb += exp_neg(scaled(d->logits[i], v.max, v.inv_t));
            z += zb;
        }
        v.inv_z = z > 0 ? 1.0 / z : 0.0;
        vp = z > 0 && v.max > -INFINITY && v.max < INFINITY ? &v : NULL; /* (no proposal: a plain draw) */
    }
    bool use_k = p->top_k > 0 && p->top_k < n_vocab;
    if (!use_k && !(p->top_p < 1.0f))
        return draw_full(logits, n_vocab, max, inv_t, p->min_p, u, prob, block_sum, vp);
    return draw_candidates(p, logits, n_vocab, max, inv_t, u, prob, c, vp);
}

int32_t snug_sample(const snug_sampling_params *p, snug_sampler_state *s, float *logits,
                    int32_t n_vocab, const int32_t *prompt, int32_t n_prompt,
                    const int32_t *output, int32_t n_output, void *scratch)
{
    return sample(p, s, logits, n_vocab, prompt, n_prompt, output, n_output, scratch, NULL);
}

int32_t snug_sample_draft(const snug_sampling_params *p, snug_sampler_state *s, float *logits,
                          int32_t n_vocab, const int32_t *prompt, int32_t n_prompt,
                          const int32_t *output, int32_t n_output, void *scratch, const snug_draft *d)
{
    return sample(p, s, logits, n_vocab, prompt, n_prompt, output, n_output, scratch, d);
}
