/*
 * fuzz_gbnf.c: fuzzes the GBNF compiler (snug_grammar_parse_gbnf) and the
 * byte matcher over what it compiles.
 *
 * A grammar that compiles is walked: from its start, a few hundred steps,
 * each taking a byte the matcher says may come next (chosen by the input's
 * bytes). Every byte snug_gmatch_next_bytes offers must be taken (or be an
 * overflow of the limits), every byte it does not offer refused, and a
 * refused or overflowing advance must leave the state as it was. The
 * driver in fuzz_common.h checks failures, compiles again without a
 * message buffer and with one allocation failing, and checks for leaks.
 */
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "fuzz_common.h"

static const char *const NAME = "fuzz/grammar.gbnf";

enum { STACKS = 32, DEPTH = 32, STEPS = 300 };

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    snug_grammar *g = NULL;
    snug_status st = snug_grammar_parse_gbnf((const char *)in->data, in->size, NULL, in->name, &g, err);
    *parsed = g;
    return st;
}

static bool same(const snug_gmatch *a, const snug_gmatch *b)
{
    if (a->n != b->n) return false;
    for (int32_t i = 0; i < a->n; i++)
        if (a->len[i] != b->len[i] ||
            memcmp(a->frames + (size_t)i * DEPTH, b->frames + (size_t)i * DEPTH, (size_t)a->len[i] * 4) != 0)
            return false;
    return true;
}

static void check(const fuzz_input *in, void *parsed)
{
    snug_grammar *g = parsed;
    REQUIRE(g->root >= 0 && g->root < g->n_rules && g->bytes > 0);
    size_t bytes = snug_gmatch_bytes(STACKS, DEPTH);
    void *mem = snug_mem_alloc(SNUG_MEM_OTHER, 2 * bytes, NULL);
    REQUIRE(mem != NULL);
    snug_gmatch m, keep;
    snug_error err = {0};
    if (snug_gmatch_start(&m, mem, STACKS, DEPTH, g, &err) == SNUG_OK) {
        REQUIRE(snug_gmatch_start(&keep, (char *)mem + bytes, STACKS, DEPTH, g, &err) == SNUG_OK);
        for (int step = 0; step < STEPS; step++) {
            snug_byteset next;
            snug_gmatch_next_bytes(&m, &next);
            uint8_t pick = in->size ? in->data[(size_t)step % in->size] : 0;
            /* a byte not offered is refused, the state kept */
            if (!snug_byteset_has(&next, pick)) {
                snug_gmatch_copy(&keep, &m);
                REQUIRE(snug_gmatch_advance(&m, pick) == SNUG_GMATCH_REJECT);
                REQUIRE(same(&m, &keep));
            }
            int b = -1;
            for (int k = 0; k < 256 && b < 0; k++)
                if (snug_byteset_has(&next, (uint8_t)((pick + k) & 255))) b = (pick + k) & 255;
            if (b < 0) {
                REQUIRE(snug_gmatch_accepting(&m)); /* nothing may follow: a whole match */
                break;
            }
            snug_gmatch_copy(&keep, &m);
            snug_gmatch_result r = snug_gmatch_advance(&m, (uint8_t)b);
            REQUIRE(r != SNUG_GMATCH_REJECT);
            if (r == SNUG_GMATCH_OVERFLOW) {
                REQUIRE(same(&m, &keep));
                break;
            }
        }
    } else {
        REQUIRE(err.status == SNUG_INVALID && strstr(err.msg, "grammar") != NULL);
    }
    snug_mem_free(mem);
    snug_grammar_free(g);
}

static const fuzz_target g_target = {NAME, false, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_target, data, size);
    return 0;
}
