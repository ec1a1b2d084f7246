/*
 * test_quant.c: ggml's quantized block formats (base/quant.h): the
 * dequantization of every type bit for bit against llama.cpp's reference
 * on blocks from its own files (tests/data/quant/dequant.json), block
 * shapes and sizes as the GGUF format fixes them, and names.
 */
#include "test.h"

#include "base/quant.h"

#include <jansson.h>

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

int main(void)
{
    RUN(test_dequant_matches_llama_cpp);
    RUN(test_shapes_and_names);
    return test_summary();
}
