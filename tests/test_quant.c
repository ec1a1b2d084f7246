/*
 * test_quant.c: ggml's quantized block formats (base/quant.h): the
 * dequantization of every type bit for bit against llama.cpp's reference
 * on blocks from its own files (tests/data/quant/dequant.json), block
 * shapes and sizes as the GGUF format fixes them, and names.
 */
#include "test.h"

#include "base/quant.h"

#include <jansson.h>
#include <math.h>

#define DEQUANT_JSON "tests/data/quant/dequant.json"

/* Decodes hex (two digits a byte) into out (n bytes); false on a bad digit
 * or a length that is not 2 n. */
static bool unhex(const char *hex, uint8_t *out, size_t n)
{
    if (strlen(hex) != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return false;
        out[i] = (uint8_t)v;
    }
    return true;
}

/* Every case of the fixture: its blocks dequantized to exactly the float32
 * bit patterns llama.cpp's reference gives; and every type covered. */
static void test_dequant_matches_llama_cpp(void)
{
    json_error_t jerr;
    json_t *root = json_load_file(DEQUANT_JSON, 0, &jerr);
    CHECK(root != NULL, "%s: %s", DEQUANT_JSON, jerr.text);
    if (!root) return;
    json_t *cases = json_object_get(root, "cases");
    bool covered[32] = {false};
    size_t index;
    json_t *c;
    json_array_foreach(cases, index, c) {
        const char *type = json_string_value(json_object_get(c, "type"));
        uint32_t t = (uint32_t)json_integer_value(json_object_get(c, "ggml_type"));
        int64_t row_len = json_integer_value(json_object_get(c, "row_len"));
        const char *blocks_hex = json_string_value(json_object_get(c, "blocks_hex"));
        const char *f32_hex = json_string_value(json_object_get(c, "f32_hex"));
        CHECK(type && blocks_hex && f32_hex && snug_qtype_known(t), "case %zu is well formed", index);
        if (!type || !blocks_hex || !f32_hex || !snug_qtype_known(t)) continue;
        CHECK(strcmp(snug_qtype_name(t), type) == 0, "ggml type %u is %s, the fixture says %s", t,
              snug_qtype_name(t), type);
        int64_t n = 2 * row_len;
        size_t bytes = snug_qtype_bytes(t, n);
        uint8_t *blocks = malloc(bytes);
        uint8_t *want = malloc((size_t)n * 4);
        float *got = malloc((size_t)n * sizeof(float));
        CHECK(unhex(blocks_hex, blocks, bytes), "%s: %zu bytes of blocks", type, bytes);
        CHECK(unhex(f32_hex, want, (size_t)n * 4), "%s: %ld values", type, (long)n);
        snug_quant_dequantize((snug_qtype)t, blocks, got, n);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *w = want + 4 * i;
            uint32_t wb = (uint32_t)w[0] << 24 | (uint32_t)w[1] << 16 | (uint32_t)w[2] << 8 | w[3], gb;
            memcpy(&gb, &got[i], 4);
            if (gb != wb && bad++ < 3)
                CHECK(false, "%s value %ld: %08x (%.9g), llama.cpp %08x", type, (long)i, gb, got[i], wb);
        }
        CHECK(bad == 0, "%s: %d of %ld values differ from llama.cpp's", type, bad, (long)n);
        if (bad == 0) covered[t] = true;
        printf("  %-5s %ld values bit for bit (%s of %s)\n", type, (long)n,
               json_string_value(json_object_get(c, "tensor")), json_string_value(json_object_get(c, "file")));
        free(blocks);
        free(want);
        free(got);
    }
    for (size_t i = 0; i < SNUG_ARRAY_LEN(snug_qtypes); i++)
        CHECK(covered[snug_qtypes[i]], "%s is checked against llama.cpp", snug_qtype_name(snug_qtypes[i]));
    json_decref(root);
}

/* Block shapes as ggml fixes them (a block's bytes are what its fields
 * take), sizes of whole rows, and what is not a format. */
static void test_shapes_and_names(void)
{
    static const struct {
        uint32_t t;
        const char *name;
        int64_t block;
        size_t bytes;
    } want[] = {
        {2, "Q4_0", 32, 2 + 16},       {3, "Q4_1", 32, 2 + 2 + 16},
        {6, "Q5_0", 32, 2 + 4 + 16},   {7, "Q5_1", 32, 2 + 2 + 4 + 16},
        {8, "Q8_0", 32, 2 + 32},       {10, "Q2_K", 256, 16 + 64 + 2 + 2},
        {11, "Q3_K", 256, 32 + 64 + 12 + 2}, {12, "Q4_K", 256, 2 + 2 + 12 + 128},
        {13, "Q5_K", 256, 2 + 2 + 12 + 32 + 128}, {14, "Q6_K", 256, 128 + 64 + 16 + 2},
    };
    CHECK(SNUG_ARRAY_LEN(want) == SNUG_ARRAY_LEN(snug_qtypes), "ten formats");
    for (size_t i = 0; i < SNUG_ARRAY_LEN(want); i++) {
        uint32_t t = want[i].t;
        CHECK(snug_qtype_known(t), "%s known", want[i].name);
        CHECK(strcmp(snug_qtype_name(t), want[i].name) == 0, "type %u named %s", t, snug_qtype_name(t));
        CHECK(snug_qtype_block(t) == want[i].block && snug_qtype_block_bytes(t) == want[i].bytes,
              "%s: block %ld of %zu bytes", want[i].name, (long)snug_qtype_block(t), snug_qtype_block_bytes(t));
        CHECK(snug_qtype_bytes(t, 4096) == (size_t)(4096 / want[i].block) * want[i].bytes,
              "%s: bytes of a 4096-element row", want[i].name);
        CHECK(snug_qtype_bytes(t, want[i].block + 1) == 0, "%s: a row that splits a block", want[i].name);
    }
    static const uint32_t others[] = {0, 1, 4, 5, 9, 15, 16, 20, 30, 39, 1000, 0xFFFFFFFFu};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(others); i++) {
        uint32_t t = others[i];
        CHECK(!snug_qtype_known(t) && strcmp(snug_qtype_name(t), "unknown") == 0 &&
                  snug_qtype_block(t) == 0 && snug_qtype_bytes(t, 256) == 0,
              "ggml type %u is not a format snug reads", t);
    }
}

/* A normal-like value (the sum of four uniforms, centred), times s. */
static float draw(uint64_t *state, float s)
{
    float v = 0.0f;
    for (int i = 0; i < 4; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        v += (float)(*state >> 40) / (float)(1ull << 24);
    }
    return (v - 2.0f) * s;
}

/* Quantizing to each format snug writes: dequantized back, every value
 * of a legacy format within half a level of its block (Q8_0: |x - y| <=
 * d / 2; Q4_0 and Q5_0 a level, as their levels stop one short on the
 * side opposite the largest magnitude), and the error's RMS against the values' under
 * each format's bound (stated per format, from its bits: a uniform error
 * of half a level over a normal-like block); blocks of zeros come back as
 * zeros; only the six formats are quantizable. */
static void test_quantize_round_trip(void)
{
    static const struct { snug_qtype t; double rms_max; } cases[] = {
        {SNUG_QTYPE_Q8_0, 0.006}, {SNUG_QTYPE_Q6_K, 0.03}, {SNUG_QTYPE_Q5_0, 0.05},
        {SNUG_QTYPE_Q4_0, 0.10},  {SNUG_QTYPE_Q4_K, 0.10}, {SNUG_QTYPE_Q5_K, 0.05},
    };
    enum { N = 4096 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    uint64_t state = 42;
    for (size_t c = 0; c < SNUG_ARRAY_LEN(cases); c++) {
        snug_qtype t = cases[c].t;
        CHECK(snug_qtype_quantizable(t), "%s quantizable", snug_qtype_name(t));
        double err2 = 0, x2 = 0;
        int far = 0;
        for (int i = 0; i < N; i++) x[i] = draw(&state, 0.05f) + (i % 512 < 256 ? 0.0f : 0.01f);
        snug_quant_quantize(t, x, q, N);
        snug_quant_dequantize(t, q, y, N);
        for (int i = 0; i < N; i++) {
            err2 += ((double)x[i] - y[i]) * ((double)x[i] - y[i]), x2 += (double)x[i] * x[i];
            if (t == SNUG_QTYPE_Q8_0 || t == SNUG_QTYPE_Q4_0 || t == SNUG_QTYPE_Q5_0) {
                snug_qblock b;
                snug_quant_unpack(t, q + (size_t)(i / 32) * snug_qtype_block_bytes(t), &b);
                double d = fabs((double)b.d);
                double levels = t == SNUG_QTYPE_Q8_0 ? 0.5 : 1.0; /* (the side opposite the largest
                                                                   * magnitude has one level less) */
                if (fabs((double)x[i] - y[i]) > d * levels * (1 + 1e-3) + 1e-9) far++;
            }
        }
        double rel = sqrt(err2 / x2);
        printf("  %s: RMS error %.4f of the values' RMS (bound %.3f)\n", snug_qtype_name(t), rel, cases[c].rms_max);
        CHECK(rel <= cases[c].rms_max, "%s: RMS error %.4f over %.3f", snug_qtype_name(t), rel, cases[c].rms_max);
        CHECK(far == 0, "%s: %d values further than half a step", snug_qtype_name(t), far);
        /* zeros come back as zeros */
        for (int i = 0; i < 256; i++) x[i] = 0.0f;
        snug_quant_quantize(t, x, q, 256);
        snug_quant_dequantize(t, q, y, 256);
        int wrong = 0;
        for (int i = 0; i < 256; i++) wrong += y[i] != 0.0f;
        CHECK(wrong == 0, "%s: %d zeros came back otherwise", snug_qtype_name(t), wrong);
    }
    int quantizable = 0;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(snug_qtypes); i++) quantizable += snug_qtype_quantizable(snug_qtypes[i]);
    CHECK(quantizable == 6, "%d quantizable formats, want 6", quantizable);
}


/* The KV cache's MXFP8 blocks: the scale is 2^(floor(log2 max |x|) less
 * the element format's largest exponent) (frexp here), each code the
 * nearest to x over it (dtype.h's, tested in test_dtype), so a value comes
 * back within half a step of its code's neighbours: 2^-4 of it for E4M3's
 * normals, 2^-3 for E5M2's, or half a subnormal step of the block's
 * scale; a value past the largest finite (448 or 57344 times the scale)
 * comes back as that, at most 1/8 less; an all-zero block is scale byte 0
 * and zeros; 33 bytes a 32 values. */
static void test_mxfp8(void)
{
    enum { N = 4096 };
    static float x[N], y[N];
    static uint8_t q[N / 32 * 33];
    uint64_t state = 7;
    for (int f = 0; f < 2; f++) {
        snug_dtype dt = f ? SNUG_DTYPE_MXFP8_E5M2 : SNUG_DTYPE_MXFP8_E4M3;
        int emax = f ? 15 : 8, mbits = f ? 2 : 3, sub_exp = f ? -16 : -9;
        const char *name = f ? "MXFP8_E5M2" : "MXFP8_E4M3";
        CHECK(snug_dtype_bytes(dt, 64) == 66 && snug_dtype_bytes(dt, 48) == 0, "%s: bytes", name);
        /* magnitudes across the range, a few blocks of one outlier */
        for (int i = 0; i < N; i++) x[i] = draw(&state, 0.05f) * (i % 96 == 5 ? 300.0f : i % 1024 < 32 ? 1e-6f : 1.0f);
        snug_mxfp8_quantize(dt, x, q, N);
        snug_mxfp8_dequantize(dt, q, y, N);
        int bad_scale = 0, far = 0;
        double err2 = 0, x2 = 0;
        for (int b = 0; b < N / 32; b++) {
            float amax = 0.0f;
            for (int e = 0; e < 32; e++) amax = fmaxf(amax, fabsf(x[32 * b + e]));
            int ex;
            frexpf(amax, &ex); /* amax = m 2^ex, m in [0.5, 1) */
            int X = amax > 0 ? ex - 1 - emax : -127;
            bad_scale += q[33 * b] != (uint8_t)(X + 127);
            for (int e = 0; e < 32; e++) {
                double v = x[32 * b + e], w = y[32 * b + e];
                double step = fmax(ldexp(fabs(v), -mbits), ldexp(1.0, sub_exp + X)); /* a step near v */
                double top = ldexp(f ? 57344.0 : 448.0, X);
                if (fabs(v) > top ? !(fabs(w) == top && fabs(v) - top <= fabs(v) / 8) /* saturated */
                                  : fabs(v - w) > step / 2 * (1 + 1e-6))
                    far++;
                err2 += (v - w) * (v - w), x2 += v * v;
            }
        }
        printf("  %s: RMS error %.4f of the values' RMS\n", name, sqrt(err2 / x2));
        CHECK(bad_scale == 0, "%s: %d blocks' scales differ from frexp's", name, bad_scale);
        CHECK(far == 0, "%s: %d values further than half a step", name, far);
        for (int i = 0; i < 32; i++) x[i] = 0.0f;
        snug_mxfp8_quantize(dt, x, q, 32);
        int nz = q[0] != 0;
        for (int i = 1; i < 33; i++) nz += q[i] != 0;
        CHECK(nz == 0, "%s: a zero block is %d nonzero bytes", name, nz);
    }
}

int main(void)
{
    RUN(test_dequant_matches_llama_cpp);
    RUN(test_shapes_and_names);
    RUN(test_quantize_round_trip);
    RUN(test_mxfp8);
    return test_summary();
}
