/*
 * fuzz_schema.c: fuzzes the JSON schema to GBNF conversion
 * (snug_schema_to_gbnf) with the GBNF compiler and matcher behind it.
 *
 * The input is a JSON schema. One that converts must give GBNF that
 * compiles (or is refused only for the compiler's size limits), and the
 * grammar is walked a few hundred bytes from its start (bytes chosen by
 * the input among those the matcher offers): every text it calls a whole
 * match must parse as JSON. The driver in fuzz_common.h checks failures,
 * converts again without a message buffer and with one allocation
 * failing, and checks for leaks.
 */
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/schema.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "fuzz_common.h"

static const char *const NAME = "fuzz/schema.json";

enum { STACKS = 32, DEPTH = 48, STEPS = 400 };

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    json_t *schema = NULL;
    snug_status st = snug_json_parse((const char *)in->data, in->size, in->name, &schema, err);
    if (st != SNUG_OK) return st;
    snug_strbuf *out = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *out, err);
    if (!out) {
        json_decref(schema);
        return snug_error_prefix(err, SNUG_NOMEM, "%s: ", in->name);
    }
    *out = (snug_strbuf){.err = err};
    st = snug_schema_to_gbnf(schema, in->name, out, err);
    json_decref(schema);
    if (st != SNUG_OK) {
        snug_strbuf_free(out);
        snug_mem_free(out);
        if (st == SNUG_NOMEM && err && !strstr(err->msg, in->name)) snug_error_prefix(err, st, "%s: ", in->name);
        return st;
    }
    *parsed = out;
    return SNUG_OK;
}

static void walk(const fuzz_input *in, const snug_grammar *g)
{
    size_t bytes = snug_gmatch_bytes(STACKS, DEPTH);
    void *mem = snug_mem_alloc(SNUG_MEM_OTHER, bytes, NULL);
    char text[STEPS + 1];
    REQUIRE(mem != NULL);
    snug_gmatch m;
    snug_error err = {0};
    if (snug_gmatch_start(&m, mem, STACKS, DEPTH, g, &err) != SNUG_OK) {
        snug_mem_free(mem);
        return;
    }
    for (int step = 0; step < STEPS; step++) {
        if (snug_gmatch_accepting(&m)) { /* a whole match so far: JSON */
            json_error_t je;
            json_t *v = json_loadb(text, (size_t)step, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            if (!v) {
                fprintf(stderr, "a whole match is not JSON (%s): %.*s\n", je.text, step, text);
                abort();
            }
            json_decref(v);
        }
        snug_byteset next;
        snug_gmatch_next_bytes(&m, &next);
        uint8_t pick = in->size ? in->data[(size_t)(step * 7) % in->size] : 0;
        int b = -1;
        for (int k = 0; k < 256 && b < 0; k++)
            if (snug_byteset_has(&next, (uint8_t)((pick + k) & 255))) b = (pick + k) & 255;
        if (b < 0 || snug_gmatch_advance(&m, (uint8_t)b) != SNUG_GMATCH_OK) break;
        text[step] = (char)b;
    }
    snug_mem_free(mem);
}

static void check(const fuzz_input *in, void *parsed)
{
    snug_strbuf *out = parsed;
    REQUIRE(out->p != NULL && !out->failed);
    snug_grammar *g = NULL;
    snug_error err = {0};
    snug_status st = snug_grammar_parse_gbnf(out->p, out->len, NULL, "schema grammar", &g, &err);
    if (st != SNUG_OK) { /* only the compiler's size limits may refuse what the conversion wrote */
        if (st != SNUG_INVALID || !strstr(err.msg, "more than")) {
            fprintf(stderr, "the schema's GBNF does not compile: %s\n%s\n", err.msg, out->p);
            abort();
        }
    } else {
        walk(in, g);
        snug_grammar_free(g);
    }
    snug_strbuf_free(out);
    snug_mem_free(out);
}

static const fuzz_target g_target = {NAME, false, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_target, data, size);
    return 0;
}
