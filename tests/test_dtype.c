/*
 * test_dtype.c: element type names and sizes; f16/bf16 <-> f32 conversions
 * against references computed in double precision: every f16 and bf16
 * value, random floats of every magnitude, ties, infinities, NaNs and
 * subnormals; the KV cache's FP8 codes (E4M3, E5M2) likewise.
 */
#include "test.h"

#include "base/dtype.h"

#include <float.h>
#include <math.h>

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The value of an f16 bit pattern, computed independently. */
static double ref_f16_value(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, -24);
    else v = ldexp(1024 + m, e - 25);
    return sign ? -v : v;
}

/* Round-to-nearest-even f32 -> f16 computed in double. */
static uint16_t ref_f32_to_f16(float x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (isnan(x)) return 0x7E00;
    if (a >= 65520.0) return sign | 0x7C00;
    if (a < ldexp(1, -14)) return sign | (uint16_t)nearbyint(a / ldexp(1, -24));
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
    e -= 1;       /* a in [2^e, 2^(e+1)) */
    double r = nearbyint(a / ldexp(1, e - 10));
    if (r == 2048) {
        r = 1024;
        e++;
    }
    if (e + 15 >= 31) return sign | 0x7C00;
    return sign | (uint16_t)((e + 15) << 10 | ((int)r - 1024));
}

/* Round-to-nearest-even f32 -> bf16 by comparing both neighbours. */
static uint16_t ref_f32_to_bf16(float x)
{
    if (isnan(x)) return 0x7FC0;
    uint32_t u = fbits(x);
    uint16_t lo = (uint16_t)(u >> 16), hi = lo + 1;
    double vx = fabs((double)x);
    double vlo = fabs((double)bitsf((uint32_t)lo << 16));
    double vhi = (hi & 0x7FFF) == 0x7F80 ? ldexp(1, 128) : fabs((double)bitsf((uint32_t)hi << 16));
    if ((u & 0xFFFF) == 0) return lo;
    double dl = vx - vlo, dh = vhi - vx;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static void test_f16_every_value(void)
{
    int bad_value = 0, bad_round_trip = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = snug_f16_to_f32((uint16_t)h);
        double ref = ref_f16_value((uint16_t)h);
        bool nan = isnan(ref);
        if (nan ? !isnan(f) : ((double)f != ref || !signbit(f) != !signbit(ref))) bad_value++;
        uint16_t back = snug_f32_to_f16(f);
        if (nan ? ((back & 0x7C00) != 0x7C00 || (back & 0x3FF) == 0) : back != h) bad_round_trip++;
    }
    CHECK(bad_value == 0, "%d f16 values decode wrongly", bad_value);
    CHECK(bad_round_trip == 0, "%d f16 values do not survive f16 -> f32 -> f16", bad_round_trip);
}

static void test_bf16_every_value(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = snug_bf16_to_f32((uint16_t)h);
        if (fbits(f) != h << 16) bad++;
        uint16_t back = snug_f32_to_bf16(f);
        bool nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F);
        if (nan ? (back & 0x7F80) != 0x7F80 || !(back & 0x7F) : back != h) bad++;
    }
    CHECK(bad == 0, "%d bf16 values wrong", bad);
}

static void test_rounding_random(void)
{
    uint64_t x = 12345;
    int bad16 = 0, badb = 0;
    for (int i = 0; i < 2000000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float f = bitsf((uint32_t)x);
        if (i % 2) { /* bias half the samples toward the f16 range */
            int e = (int)(x >> 40) % 40 - 26;
            f = (float)ldexp((double)((uint32_t)(x >> 8) & 0xFFFFFF) / 16777216.0 + 1.0, e);
            if (x & (1ull << 63)) f = -f;
        }
        if (!isnan(f) && snug_f32_to_f16(f) != ref_f32_to_f16(f)) {
            if (bad16++ < 5) printf("  f16(%a): %04x, want %04x\n", f, snug_f32_to_f16(f), ref_f32_to_f16(f));
        }
        if (!isnan(f) && snug_f32_to_bf16(f) != ref_f32_to_bf16(f)) {
            if (badb++ < 5) printf("  bf16(%a): %04x, want %04x\n", f, snug_f32_to_bf16(f), ref_f32_to_bf16(f));
        }
    }
    CHECK(bad16 == 0, "%d random floats round to the wrong f16", bad16);
    CHECK(badb == 0, "%d random floats round to the wrong bf16", badb);
}

static void test_ties_and_specials(void)
{
    /* exactly halfway between two f16 values: ties go to the even one */
    float one_plus_half_ulp = 1.0f + 0x1p-11f;           /* between 0x3C00 and 0x3C01 */
    float next_plus_half_ulp = 1.0f + 3 * 0x1p-11f;      /* between 0x3C01 and 0x3C02 */
    CHECK(snug_f32_to_f16(one_plus_half_ulp) == 0x3C00, "tie down to even: %04x",
          snug_f32_to_f16(one_plus_half_ulp));
    CHECK(snug_f32_to_f16(next_plus_half_ulp) == 0x3C02, "tie up to even: %04x",
          snug_f32_to_f16(next_plus_half_ulp));
    CHECK(snug_f32_to_f16(65504.0f) == 0x7BFF, "largest f16");
    CHECK(snug_f32_to_f16(65519.99f) == 0x7BFF, "just below the rounding edge stays finite");
    CHECK(snug_f32_to_f16(65520.0f) == 0x7C00, "the tie above 65504 rounds to infinity");
    CHECK(snug_f32_to_f16(INFINITY) == 0x7C00 && snug_f32_to_f16(-INFINITY) == 0xFC00, "inf");
    CHECK(snug_f32_to_f16(0x1p-24f) == 0x0001, "least subnormal");
    CHECK(snug_f32_to_f16(0x1p-25f) == 0x0000, "half the least subnormal ties to zero");
    CHECK(snug_f32_to_f16(0x1.8p-25f) == 0x0001, "above half rounds up");
    CHECK(snug_f32_to_f16(-0.0f) == 0x8000, "negative zero keeps its sign");
    CHECK(snug_f32_to_f16(0x1.ffcp-15f) == 0x0400, "a tie above the largest subnormal rounds up to the least normal");
    uint16_t n = snug_f32_to_f16(NAN);
    CHECK((n & 0x7C00) == 0x7C00 && (n & 0x3FF), "NaN stays NaN: %04x", n);
    CHECK(snug_f32_to_bf16(1.0f + 0x1p-8f) == 0x3F80, "bf16 tie down to even");
    CHECK(snug_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82, "bf16 tie up to even");
    CHECK(snug_f32_to_bf16(FLT_MAX) == 0x7F80, "FLT_MAX rounds to bf16 infinity");
    CHECK(snug_f32_to_bf16(INFINITY) == 0x7F80, "bf16 inf");
    uint16_t bn = snug_f32_to_bf16(bitsf(0x7F800001)); /* a signalling NaN with low bits only */
    CHECK((bn & 0x7F80) == 0x7F80 && (bn & 0x7F), "a NaN whose payload is below bf16 stays NaN: %04x", bn);
    CHECK(snug_f32_to_bf16(bitsf(0x00000001)) == 0x0000, "f32 subnormal rounds to bf16 zero");
    CHECK(snug_f32_to_bf16(bitsf(0x00018000)) == 0x0002, "f32 subnormal tie to even in bf16");
}

static void test_bulk_convert(void)
{
    enum { N = 37 };
    float src[N], back[N];
    uint16_t h[N], b[N];
    for (int i = 0; i < N; i++) src[i] = (float)(i - 18) * 0.37f;
    snug_convert(h, SNUG_DTYPE_F16, src, SNUG_DTYPE_F32, N);
    snug_convert(b, SNUG_DTYPE_BF16, h, SNUG_DTYPE_F16, N);
    snug_convert(back, SNUG_DTYPE_F32, b, SNUG_DTYPE_BF16, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        if (h[i] != snug_f32_to_f16(src[i])) bad++;
        if (b[i] != snug_f32_to_bf16(snug_f16_to_f32(h[i]))) bad++;
        if (fbits(back[i]) != (uint32_t)b[i] << 16) bad++;
    }
    CHECK(bad == 0, "%d elements differ from the scalar conversions", bad);
}


/* The value of an FP8 code, computed independently (E4M3: 4 exponent bits
 * of bias 7, subnormals m 2^-9; E5M2: 5 of bias 15, m 2^-16); the codes of
 * NaN and infinity are not values here. */
static bool ref_fp8_value(uint8_t c, bool e5, double *v)
{
    int eb = e5 ? 5 : 4, mb = 7 - eb, bias = e5 ? 15 : 7;
    int e = (c >> mb) & ((1 << eb) - 1), m = c & ((1 << mb) - 1);
    if (e5 ? e == 31 : (e == 15 && m == 7)) return false;
    double mag = e == 0 ? ldexp(m, 1 - bias - mb) : ldexp(1.0 + ldexp(m, -mb), e - bias);
    *v = c & 0x80 ? -mag : mag;
    return true;
}

static void test_fp8(void)
{
    for (int f = 0; f < 2; f++) {
        bool e5 = f == 1;
        snug_dtype fmt = e5 ? SNUG_DTYPE_F8_E5M2 : SNUG_DTYPE_F8_E4M3;
        const char *name = e5 ? "E5M2" : "E4M3";
        double vals[256];
        bool finite[256];
        int bad = 0, n = 0;
        /* every code: its value, and that value back to the code (-0 too) */
        for (int c = 0; c < 256; c++) {
            finite[c] = ref_fp8_value((uint8_t)c, e5, &vals[c]);
            if (!finite[c]) continue;
            n++;
            float got = snug_fp8_to_f32((uint8_t)c, fmt);
            if ((double)got != vals[c] || (signbit(got) != 0) != ((c & 0x80) != 0) ||
                snug_f32_to_fp8(got, fmt) != (uint8_t)c) {
                if (bad++ < 3) CHECK(false, "%s code %02x: %g (want %g), back to %02x", name, c, (double)got, vals[c],
                                     snug_f32_to_fp8(got, fmt));
            }
        }
        CHECK(n == (e5 ? 248 : 254), "%s: %d finite codes", name, n);
        /* halfway between neighbours: to the even code; a hair either side: to the nearer */
        for (int c = 0; c < 0x7F; c++) {
            int d = c + 1;
            if (!finite[c] || !finite[d]) continue;
            float mid = (float)((vals[c] + vals[d]) / 2);
            uint8_t even = (c & 1) ? (uint8_t)d : (uint8_t)c;
            uint8_t got = snug_f32_to_fp8(mid, fmt), lo = snug_f32_to_fp8(nextafterf(mid, 0.0f), fmt),
                    hi = snug_f32_to_fp8(nextafterf(mid, INFINITY), fmt), neg = snug_f32_to_fp8(-mid, fmt);
            if ((got != even || lo != c || hi != d || neg != (even | 0x80)) && bad++ < 3)
                CHECK(false, "%s between %02x and %02x: %02x %02x %02x %02x", name, c, d, got, lo, hi, neg);
        }
        /* past the largest finite: saturated, as are infinity and NaN */
        uint8_t top = e5 ? 0x7B : 0x7E;
        CHECK(snug_f32_to_fp8(e5 ? 61440.0f : 464.0f, fmt) == top && snug_f32_to_fp8(1e30f, fmt) == top &&
                  snug_f32_to_fp8(-INFINITY, fmt) == (top | 0x80) && (snug_f32_to_fp8(NAN, fmt) & 0x7F) == top,
              "%s saturates at %02x", name, top);
        /* far below the smallest subnormal: zero, signed */
        CHECK(snug_f32_to_fp8(1e-30f, fmt) == 0 && snug_f32_to_fp8(-1e-30f, fmt) == 0x80, "%s underflows to 0", name);
        CHECK(bad == 0, "%s: %d codes wrong", name, bad);
    }
}

static void test_names(void)
{
    CHECK(snug_dtype_from_name("BF16") == SNUG_DTYPE_BF16, "BF16");
    CHECK(snug_dtype_from_name("F8_E4M3") == SNUG_DTYPE_F8_E4M3, "F8_E4M3");
    CHECK(snug_dtype_from_name("bf16") == SNUG_DTYPE_NONE, "safetensors names are upper case");
    CHECK(snug_dtype_from_torch("bfloat16") == SNUG_DTYPE_BF16, "torch bfloat16");
    CHECK(snug_dtype_from_torch("half") == SNUG_DTYPE_F16, "half");
    CHECK(snug_dtype_from_torch("F32") == SNUG_DTYPE_F32, "f32");
    CHECK(snug_dtype_from_torch("int8") == SNUG_DTYPE_NONE, "int8 is not a weight type");
    CHECK(snug_dtype_size(SNUG_DTYPE_F64) == 8 && snug_dtype_size(SNUG_DTYPE_BOOL) == 1 &&
          snug_dtype_size(SNUG_DTYPE_BF16) == 2 && snug_dtype_size(SNUG_DTYPE_C64) == 8, "sizes");
    const char *all[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL",
                         "F8_E4M3", "F8_E5M2"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        CHECK(strcmp(snug_dtype_name(snug_dtype_from_name(all[i])), all[i]) == 0, "%s round trip", all[i]);
    CHECK(snug_dtype_is_weight(SNUG_DTYPE_F16) && !snug_dtype_is_weight(SNUG_DTYPE_I8), "weight types");
    /* the block formats: named, mapped to their ggml type both ways, no
     * size per element, and never a safetensors dtype */
    static const struct {
        snug_dtype dt;
        const char *name;
        uint32_t ggml;
    } quant[] = {{SNUG_DTYPE_Q8_0, "Q8_0", 8},  {SNUG_DTYPE_Q4_0, "Q4_0", 2},  {SNUG_DTYPE_Q4_1, "Q4_1", 3},
                 {SNUG_DTYPE_Q5_0, "Q5_0", 6},  {SNUG_DTYPE_Q5_1, "Q5_1", 7},  {SNUG_DTYPE_Q2_K, "Q2_K", 10},
                 {SNUG_DTYPE_Q3_K, "Q3_K", 11}, {SNUG_DTYPE_Q4_K, "Q4_K", 12}, {SNUG_DTYPE_Q5_K, "Q5_K", 13},
                 {SNUG_DTYPE_Q6_K, "Q6_K", 14}};
    for (size_t i = 0; i < sizeof quant / sizeof quant[0]; i++) {
        snug_dtype dt = quant[i].dt;
        CHECK(strcmp(snug_dtype_name(dt), quant[i].name) == 0 && snug_dtype_is_quant(dt) &&
                  snug_dtype_size(dt) == 0 && !snug_dtype_is_weight(dt),
              "%s is a block format", quant[i].name);
        CHECK(snug_dtype_qtype(dt) == quant[i].ggml && snug_dtype_from_qtype(quant[i].ggml) == dt,
              "%s is ggml type %u", quant[i].name, quant[i].ggml);
        CHECK(snug_dtype_from_name(quant[i].name) == SNUG_DTYPE_NONE, "%s is no safetensors dtype", quant[i].name);
    }
    CHECK(!snug_dtype_is_quant(SNUG_DTYPE_BF16) && snug_dtype_qtype(SNUG_DTYPE_F32) == 0 &&
              snug_dtype_from_qtype(0) == SNUG_DTYPE_NONE && snug_dtype_from_qtype(9) == SNUG_DTYPE_NONE &&
              snug_dtype_from_qtype(30) == SNUG_DTYPE_NONE,
          "the other types are none of them");
}

int main(void)
{
    RUN(test_f16_every_value);
    RUN(test_bf16_every_value);
    RUN(test_rounding_random);
    RUN(test_ties_and_specials);
    RUN(test_bulk_convert);
    RUN(test_names);
    RUN(test_fp8);
    return test_summary();
}
