/*
 * test_grammar.c: GBNF parsing (grammar/grammar.h) and the byte matcher
 * (grammar/matcher.h): what texts each grammar takes and refuses, whole
 * and as prefixes, UTF-8 classes checked against every code point, the
 * limits, the messages of bad grammars, and out-of-memory.
 */
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/schema.h"
#include "grammar/ctxmask.h"
#include "grammar/tokmask.h"
#include "base/json.h"
#include "base/mem.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

enum { STACKS = 64, DEPTH = 64 };

typedef struct gm {
    snug_grammar *g;
    snug_gmatch m;
    void *mem;
} gm;

/* Compiles text and starts a matcher with the given limits; false (with a
 * failed check) when either fails. */
static bool gm_open(gm *x, const char *text, int32_t stacks, int32_t depth)
{
    snug_error err = {0};
    memset(x, 0, sizeof *x);
    if (snug_grammar_parse_gbnf(text, strlen(text), NULL, "grammar", &x->g, &err) != SNUG_OK) {
        CHECK(false, "%s: %s", text, err.msg);
        return false;
    }
    x->mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_gmatch_bytes(stacks, depth), NULL);
    if (snug_gmatch_start(&x->m, x->mem, stacks, depth, x->g, &err) != SNUG_OK) {
        CHECK(false, "%s: start: %s", text, err.msg);
        return false;
    }
    return true;
}

static void gm_close(gm *x)
{
    snug_mem_free(x->mem);
    snug_grammar_free(x->g);
}

/* Whether the grammar takes s whole (from the start), and as a prefix. */
static snug_gmatch_result run(const char *grammar, const char *s, size_t n, bool *whole)
{
    gm x;
    *whole = false;
    if (!gm_open(&x, grammar, STACKS, DEPTH)) return SNUG_GMATCH_OVERFLOW;
    snug_gmatch_result r = snug_gmatch_advance_bytes(&x.m, s, n, NULL);
    *whole = r == SNUG_GMATCH_OK && snug_gmatch_accepting(&x.m);
    gm_close(&x);
    return r;
}

/* s must be a whole match of grammar. */
static void takes(const char *grammar, const char *s)
{
    bool whole;
    snug_gmatch_result r = run(grammar, s, strlen(s), &whole);
    CHECK(r == SNUG_GMATCH_OK && whole, "%s should take \"%s\" (result %d, whole %d)", grammar, s, r, whole);
}

/* s must be a prefix of some match but not one itself. */
static void prefix_only(const char *grammar, const char *s)
{
    bool whole;
    snug_gmatch_result r = run(grammar, s, strlen(s), &whole);
    CHECK(r == SNUG_GMATCH_OK && !whole, "%s: \"%s\" should be a prefix only (result %d, whole %d)", grammar, s, r,
          whole);
}

/* Some byte of s must be refused. */
static void refuses(const char *grammar, const char *s)
{
    bool whole;
    snug_gmatch_result r = run(grammar, s, strlen(s), &whole);
    CHECK(r == SNUG_GMATCH_REJECT, "%s should refuse \"%s\" (result %d)", grammar, s, r);
}

static void test_literals_and_alternatives(void)
{
    const char *g = "root ::= \"ab\" | \"c\" | \"\"";
    takes(g, "ab");
    takes(g, "c");
    takes(g, "");
    prefix_only(g, "a");
    refuses(g, "b");
    refuses(g, "abc");
    refuses(g, "cc");
    /* escapes, comments, rules over several lines, names with - and _ */
    const char *h = "# a greeting\nroot ::= greet-word \" \" name_2   # then a name\n"
                    "greet-word ::= \"hi\" |\n   \"yo\"\nname_2 ::= \"\\\"A\\\\\\n\\x41\\u00e9\"";
    takes(h, "hi \"A\\\nAé");
    takes(h, "yo \"A\\\nAé");
    refuses(h, "hey");
}

static void test_classes_and_any(void)
{
    takes("root ::= [a-z0-9_]+", "abc_09");
    refuses("root ::= [a-z0-9_]+", "abC");
    prefix_only("root ::= [a-z]+", "");
    takes("root ::= [^\"\\\\]*", "any thing é 中 😀");
    refuses("root ::= [^\"\\\\]*", "a\"b");
    takes("root ::= [α-ω]", "β");
    refuses("root ::= [α-ω]", "a");
    takes("root ::= .", "😀");
    takes("root ::= . .", "aé");
    refuses("root ::= .", "\xff");
    refuses("root ::= .", "\xed\xa0\x80"); /* a surrogate's encoding */
    refuses("root ::= .", "\xc0\x80");     /* an overlong NUL */
    takes("root ::= [\\]\\[-]", "]");
    takes("root ::= [\\]\\[-]", "-");
    takes("root ::= [a-]", "-");
}

/* Every Unicode scalar value against a class: taken exactly when it is in
 * the class (its UTF-8 ranges are right at every boundary). */
static void check_class_exhaustive(const char *grammar, bool (*in)(uint32_t))
{
    gm x;
    if (!gm_open(&x, grammar, STACKS, DEPTH)) return;
    snug_gmatch copy;
    void *mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_gmatch_bytes(STACKS, DEPTH), NULL);
    snug_error err = {0};
    CHECK_OK(snug_gmatch_start(&copy, mem, STACKS, DEPTH, x.g, &err), &err);
    int64_t wrong = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        uint8_t b[4];
        int n = cp < 0x80 ? (b[0] = (uint8_t)cp, 1)
                : cp < 0x800 ? (b[0] = (uint8_t)(0xC0 | cp >> 6), b[1] = (uint8_t)(0x80 | (cp & 63)), 2)
                : cp < 0x10000 ? (b[0] = (uint8_t)(0xE0 | cp >> 12), b[1] = (uint8_t)(0x80 | (cp >> 6 & 63)),
                                  b[2] = (uint8_t)(0x80 | (cp & 63)), 3)
                               : (b[0] = (uint8_t)(0xF0 | cp >> 18), b[1] = (uint8_t)(0x80 | (cp >> 12 & 63)),
                                  b[2] = (uint8_t)(0x80 | (cp >> 6 & 63)), b[3] = (uint8_t)(0x80 | (cp & 63)), 4);
        snug_gmatch_copy(&copy, &x.m);
        bool took = snug_gmatch_advance_bytes(&copy, b, (size_t)n, NULL) == SNUG_GMATCH_OK &&
                    snug_gmatch_accepting(&copy);
        if (took != in(cp) && wrong++ < 5) CHECK(false, "%s: U+%04X taken %d, in the class %d", grammar, cp, took, in(cp));
    }
    CHECK(wrong == 0, "%s: %lld code points wrong", grammar, (long long)wrong);
    snug_mem_free(mem);
    gm_close(&x);
}

static bool in_not_az_e_zhong(uint32_t c) { return !((c >= 'a' && c <= 'z') || c == 0xE9 || c == 0x4E2D); }
static bool in_wide(uint32_t c) { return (c >= 0x7F && c <= 0x800) || (c >= 0xFFF0 && c <= 0x10010) || c == 0x10FFFF; }

static void test_classes_every_code_point(void)
{
    check_class_exhaustive("root ::= [^a-zé中]", in_not_az_e_zhong);
    check_class_exhaustive("root ::= [\\x7f-\\u0800\\uFFF0-\\U00010010\\U0010FFFF]", in_wide);
}

static void test_repetitions(void)
{
    const char *g = "root ::= \"a\"{2,3} \"b\"?";
    takes(g, "aa");
    takes(g, "aaa");
    takes(g, "aab");
    prefix_only(g, "a");
    refuses(g, "aaaa");
    refuses(g, "ab");
    takes("root ::= \"x\"{2,}", "xxxxx");
    prefix_only("root ::= \"x\"{2,}", "x");
    takes("root ::= (\"ab\" | \"c\")* \"!\"", "abcab!");
    takes("root ::= (\"ab\" | \"c\")+", "c");
    prefix_only("root ::= (\"ab\" | \"c\")+", "");
    takes("root ::= \"a\"{0} \"b\"", "b");
    takes("root ::= \"a\"{3}", "aaa");
    refuses("root ::= \"a\"{3}", "aaaa");
}

/* A repetition of 100,000 runs in constant depth (right recursion is not
 * kept on the stack); nesting deeper than the limit is an overflow that
 * leaves the state as it was. */
static void test_depth(void)
{
    gm x;
    if (!gm_open(&x, "root ::= (\"ab\" [0-9]?)* \";\"", 8, 8)) return;
    for (int i = 0; i < 100000; i++) {
        CHECK(snug_gmatch_advance_bytes(&x.m, "ab7", 3, NULL) == SNUG_GMATCH_OK, "repetition %d", i);
        if (g_test_failed_checks) break;
    }
    CHECK(snug_gmatch_advance(&x.m, ';') == SNUG_GMATCH_OK && snug_gmatch_accepting(&x.m), "the end");
    gm_close(&x);

    if (!gm_open(&x, "root ::= \"(\" root \")\" | \"x\"", 8, 6)) return;
    size_t taken = 0;
    snug_gmatch_result r = snug_gmatch_advance_bytes(&x.m, "((((((((x", 9, &taken);
    CHECK(r == SNUG_GMATCH_OVERFLOW && taken >= 3 && taken < 8, "nesting: result %d after %zu bytes", r, taken);
    CHECK(snug_gmatch_advance(&x.m, 'x') == SNUG_GMATCH_OK, "the state as it was before the overflow");
    gm_close(&x);
}

/* A JSON grammar (as llama.cpp's json.gbnf has it): values parse, near
 * misses do not, and the bytes allowed next are right. */
static void test_json(void)
{
    const char *g =
        "root   ::= object\n"
        "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
        "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
        "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
        "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
        "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
        "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
    takes(g, "{}");
    takes(g, "{\"a\": [1, -2.5e3, true, null, {\"b\": \"c\\u00e9\\n\"}], \"d\": \"中\"}");
    prefix_only(g, "{\"a\": [1, 2");
    refuses(g, "{\"a\": [1, 2,]}");
    refuses(g, "{'a': 1}");
    refuses(g, "{\"a\": 01}");
    gm x;
    if (!gm_open(&x, g, STACKS, DEPTH)) return;
    snug_byteset next;
    snug_gmatch_advance_bytes(&x.m, "{\"a\": t", 7, NULL);
    snug_gmatch_next_bytes(&x.m, &next);
    int n = 0;
    for (int b = 0; b < 256; b++) n += snug_byteset_has(&next, (uint8_t)b);
    CHECK(n == 1 && snug_byteset_has(&next, 'r'), "after {\"a\": t only 'r' may follow (%d bytes may)", n);
    gm_close(&x);
}

static void bad(const char *text, const char *piece)
{
    snug_grammar *g = (snug_grammar *)1;
    snug_error err = {0};
    CHECK_FAILS(snug_grammar_parse_gbnf(text, strlen(text), NULL, "grammar", &g, &err), &err, SNUG_INVALID, piece);
    CHECK(g == NULL, "%s: no grammar on failure", text);
}

static void test_bad_grammars(void)
{
    bad("", "grammar: line 1, column 1: the grammar has no rules");
    bad("root ::= foo", "line 1, column 10: the rule 'foo' is used but not defined");
    bad("start ::= \"a\"", "no rule named 'root'");
    bad("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: the rule 'root' is defined twice");
    bad("root = \"a\"", "line 1, column 6: expected '::=' after the rule name, got '='");
    bad("root ::= root \"a\"", "the rule 'root' is left-recursive");
    bad("root ::= x\nx ::= [a]? root", "the rule 'root' is left-recursive");
    bad("root ::= (\"a\"?)*", "line 1, column 16: the repetition at line 1, column 16 is left-recursive");
    bad("root ::= \"abc", "line 1, column 10: the string is not closed");
    bad("root ::= \"\\q\"", "unknown escape");
    bad("root ::= \"\\x4\"", "\\x needs 2 hex digits");
    bad("root ::= \"\\uD800\"", "not a Unicode scalar value");
    bad("root ::= []", "an empty class matches nothing");
    bad("root ::= [z-a]", "the range ends (U+0061) before it starts (U+007A)");
    bad("root ::= \"a\"{3,2}", "the most is below the least");
    bad("root ::= \"a\"{2000}", "a repetition count above 1024");
    bad("root ::= * \"a\"", "line 1, column 10: expected a string, a [class]");
    bad("root ::= \"\"*", "'*' repeats nothing");
    bad("root ::= (\"a\"", "expected ')' to close the group opened at line 1, column 10");
    bad("root ::= \"a\")", "a ')' that closes no group");
    bad("root ::= \"\xff\"", "not valid UTF-8");
    bad("root ::= [^\\x00-\\U0010FFFF]", "the class matches no character");
}

static snug_status parse_json_grammar(void *ctx, snug_error *err)
{
    const char *text = "root ::= \"{\" (pair (\",\" pair)*)? \"}\"\npair ::= [a-z]+ \":\" [^,}]{1,3}";
    return snug_grammar_parse_gbnf(text, strlen(text), NULL, "grammar", (snug_grammar **)ctx, err);
}

static void free_grammar(void *ctx) { snug_grammar_free(*(snug_grammar **)ctx); }

static void test_oom(void)
{
    snug_grammar *g = NULL;
    int fails = test_oom_loop("parse", parse_json_grammar, free_grammar, &g, 500);
    CHECK(fails > 5, "%d allocations failed before success", fails);
}


/* ---- limits an attacker meets ------------------------------------------------- */

/* text built by the caller, compiled; returns the status, the message in err
 * and the seconds it took in *secs. */
static snug_status compile_timed(const snug_strbuf *text, snug_grammar **g, snug_error *err, double *secs)
{
    double t0 = snug_now_seconds();
    snug_status st = snug_grammar_parse_gbnf(text->p, text->len, NULL, "grammar", g, err);
    *secs = snug_now_seconds() - t0;
    return st;
}

/* Nesting, size, rule count, memory: each refused with its limit named,
 * before the work it bounds, and big grammars compile in time linear in
 * their text (60,000 rules took 12.8 s when every name was looked up in a
 * list). */
static void test_limits(void)
{
    snug_error err = {0};
    snug_grammar *g = NULL;
    double secs;
    uint64_t base;
    snug_mem_status(SNUG_MEM_TOTAL, &base, NULL, false);
    /* 5,000 nested groups overflowed the parser's stack; 128 are taken */
    for (int levels = 128; levels <= 5000; levels += 5000 - 128) {
        snug_strbuf t = {.err = &err};
        snug_strbuf_printf(&t, "root ::= ");
        for (int i = 0; i < levels; i++) snug_strbuf_printf(&t, "(");
        snug_strbuf_printf(&t, "\"a\"");
        for (int i = 0; i < levels; i++) snug_strbuf_printf(&t, ")");
        snug_status st = compile_timed(&t, &g, &err, &secs);
        if (levels == 128) CHECK(st == SNUG_OK, "128 nested groups: %s", err.msg);
        else CHECK(st == SNUG_INVALID && strstr(err.msg, "groups nested more than 128 deep"), "5000 levels: %s", err.msg);
        snug_grammar_free(g);
        snug_strbuf_free(&t);
    }
    /* 60,000 rules in a chain, and 30,000 nullable rules in one sequence
     * (the nullable fixpoint was quadratic too): under a second each here */
    snug_strbuf t = {.err = &err};
    snug_strbuf_printf(&t, "root ::= r0\n");
    for (int i = 0; i < 60000; i++) snug_strbuf_printf(&t, "r%d ::= \"a\" r%d | \"b\"\n", i, i + 1);
    snug_strbuf_printf(&t, "r60000 ::= \"z\"\n");
    CHECK(compile_timed(&t, &g, &err, &secs) == SNUG_OK, "60,000 rules: %s", err.msg);
    CHECK(secs < 2.0, "60,000 rules (%zu bytes) compiled in %.3f s, limit 2 s", t.len, secs);
    printf("  60,000 rules, %zu bytes: %.3f s\n", t.len, secs);
    snug_grammar_free(g);
    snug_strbuf_free(&t);
    t = (snug_strbuf){.err = &err};
    snug_strbuf_printf(&t, "root ::=");
    for (int i = 0; i < 30000; i++) snug_strbuf_printf(&t, " r%d", 29999 - i);
    snug_strbuf_printf(&t, " \"x\"\n");
    for (int i = 0; i < 30000; i++) snug_strbuf_printf(&t, "r%d ::= \"a\" | r%d\n", i, i + 1);
    snug_strbuf_printf(&t, "r30000 ::= \"\"\n");
    snug_status st = compile_timed(&t, &g, &err, &secs);
    CHECK(st == SNUG_INVALID && strstr(err.msg, "alternatives at once"), "30,000 nullable rules: %s", err.msg);
    CHECK(secs < 2.0, "30,000 nullable rules compiled in %.3f s, limit 2 s", secs);
    snug_strbuf_free(&t);
    /* 40,000 rules of 1,024 elements each: refused at the memory limit, not
     * after gigabytes */
    t = (snug_strbuf){.err = &err};
    snug_strbuf_printf(&t, "root ::=");
    for (int i = 0; i < 40000; i++) snug_strbuf_printf(&t, " a%d", i);
    snug_strbuf_printf(&t, "\n");
    for (int i = 0; i < 40000; i++) snug_strbuf_printf(&t, "a%d ::= \"x\"{1024}\n", i);
    uint64_t peak;
    snug_mem_status(SNUG_MEM_TOTAL, NULL, NULL, true);
    st = compile_timed(&t, &g, &err, &secs);
    snug_mem_status(SNUG_MEM_TOTAL, NULL, &peak, false);
    CHECK(st == SNUG_INVALID && strstr(err.msg, "compiling it would take more than 32 MiB"), "40,000 x 1,024: %s",
          err.msg);
    CHECK(peak - base - t.cap < (uint64_t)40 << 20, "the refused grammar's peak: %llu bytes over the text",
          (unsigned long long)(peak - base - t.cap));
    snug_strbuf_free(&t);
    /* the text itself */
    size_t big = (size_t)SNUG_GRAMMAR_TEXT_MAX + 1;
    char *text = snug_mem_alloc(SNUG_MEM_OTHER, big, NULL);
    memset(text, ' ', big);
    memcpy(text, "root ::= \"a\"", 12);
    CHECK(snug_grammar_parse_gbnf(text, big, NULL, "grammar", &g, &err) == SNUG_INVALID &&
              strstr(err.msg, "more than the 2097152 taken"), "2 MiB + 1 of text: %s", err.msg);
    snug_mem_free(text);
    uint64_t after;
    snug_mem_status(SNUG_MEM_TOTAL, &after, NULL, false);
    CHECK(after == base, "memory after the refusals: %llu bytes, before %llu", (unsigned long long)after,
          (unsigned long long)base);
}

/* Alternatives that begin alike are merged: 1,024 literals (a guided
 * choice, an enum) are followed by a stack for each byte that may come
 * next (not one for each literal), each taken whole;
 * a place that begins more alternatives than a matcher follows is refused
 * naming the rule. */
static void test_merged_alternatives(void)
{
    snug_error err = {0};
    snug_strbuf t = {.err = &err};
    snug_strbuf_printf(&t, "root ::= ");
    for (int i = 0; i < 1024; i++) snug_strbuf_printf(&t, "%s\"item %d%s\"", i ? " | " : "", i, i % 3 ? "" : "!");
    gm x;
    if (gm_open(&x, t.p, STACKS, DEPTH)) {
        int32_t widest = 0;
        for (int i = 0; i < 1024; i += 7) {
            char want[32];
            snprintf(want, sizeof want, "item %d%s", i, i % 3 ? "" : "!");
            snug_gmatch m;
            void *mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_gmatch_bytes(STACKS, DEPTH), NULL);
            snug_gmatch_clone(&m, mem, &x.m);
            for (size_t k = 0; k < strlen(want); k++) {
                CHECK(snug_gmatch_advance(&m, (uint8_t)want[k]) == SNUG_GMATCH_OK, "%s: byte %zu", want, k);
                widest = SNUG_MAX(widest, m.n);
            }
            bool complete = snug_gmatch_accepting(&m);
            CHECK(complete, "%s taken whole", want);
            CHECK(snug_gmatch_advance(&m, '?') == SNUG_GMATCH_REJECT, "%s?: refused", want);
            snug_mem_free(mem);
        }
        /* one stack a distinct next byte ("item 1" may go on with 0-9 or end) */
        CHECK(widest <= 12, "1,024 literals followed by at most %d stacks (%d)", 12, widest);
        gm_close(&x);
    }
    snug_strbuf_free(&t);
    t = (snug_strbuf){.err = &err};
    snug_strbuf_printf(&t, "root ::= \"a\" x\nx ::=");
    for (int i = 0; i < 60; i++) snug_strbuf_printf(&t, "%s y%d", i ? " |" : "", i);
    for (int i = 0; i < 60; i++) snug_strbuf_printf(&t, "\ny%d ::= \"q\" \"%d\"", i, i);
    bad(t.p, "line 1, column 1: the rule 'root' can begin 60 alternatives at once; at most 56 are followed");
    snug_strbuf_free(&t);
    /* the same alternatives written inline are merged, and taken */
    takes("root ::= \"a\" (\"q\" \"1\" | \"q\" \"2\" | \"q\" \"1\" \"0\")", "aq10");
    takes("root ::= x \"!\" | x \"?\"\nx ::= [a-c]+", "abc?");
    refuses("root ::= x \"!\" | x \"?\"\nx ::= [a-c]+", "abc.");
}

/* ---- JSON schemas ------------------------------------------------------------ */

/* The GBNF of a schema given as JSON text; NULL (and a failed check) when
 * it does not convert. The caller frees it with snug_mem_free. */
static char *schema_gbnf(const char *schema_text)
{
    json_t *schema = NULL;
    snug_error err = {0};
    if (snug_json_parse(schema_text, strlen(schema_text), "schema", &schema, &err) != SNUG_OK) {
        CHECK(false, "%s: %s", schema_text, err.msg);
        return NULL;
    }
    snug_strbuf out = {.err = &err};
    snug_status st = snug_schema_to_gbnf(schema, "schema", &out, &err);
    json_decref(schema);
    CHECK(st == SNUG_OK, "%s: %s", schema_text, err.msg);
    if (st != SNUG_OK) {
        snug_strbuf_free(&out);
        return NULL;
    }
    return out.p;
}

/* Each of the JSON texts in good validates (the grammar takes it whole),
 * each in bad does not (refused, or only a prefix). */
static void check_schema(const char *schema_text, const char *const *good, const char *const *bad_texts)
{
    char *g = schema_gbnf(schema_text);
    if (!g) return;
    for (; good && *good; good++) {
        bool whole;
        snug_gmatch_result r = run(g, *good, strlen(*good), &whole);
        CHECK(r == SNUG_GMATCH_OK && whole, "%s should take %s (result %d, whole %d)\n%s", schema_text, *good, r, whole, g);
    }
    for (; bad_texts && *bad_texts; bad_texts++) {
        bool whole;
        snug_gmatch_result r = run(g, *bad_texts, strlen(*bad_texts), &whole);
        CHECK(!(r == SNUG_GMATCH_OK && whole), "%s should not take %s", schema_text, *bad_texts);
    }
    snug_mem_free(g);
}

static void test_schema_objects(void)
{
    const char *schema = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 8},"
                         " \"age\": {\"type\": \"integer\"}, \"tags\": {\"type\": \"array\", \"items\": {\"enum\":"
                         " [\"a\", \"b\", 3]}, \"minItems\": 1, \"maxItems\": 2}, \"ok\": {\"type\": [\"boolean\", \"null\"]}},"
                         " \"required\": [\"name\", \"age\"], \"additionalProperties\": false}";
    static const char *const good[] = {"{\"name\": \"Lily\", \"age\": 3}",
                                       "{\"name\":\"\",\"age\":-12,\"tags\":[\"a\",3],\"ok\":null}",
                                       "{\n  \"name\": \"a\\\"b\",\n  \"age\": 0,\n  \"ok\": true\n}", NULL};
    static const char *const bad_texts[] = {"{\"age\": 3, \"name\": \"Lily\"}", /* order */
                                            "{\"name\": \"Lily\"}",              /* a required one missing */
                                            "{\"name\": \"Lily\", \"age\": 3, \"x\": 1}",
                                            "{\"name\": \"Lily Lily\", \"age\": 3}", /* longer than 8 */
                                            "{\"name\": \"L\", \"age\": 3.5}",
                                            "{\"name\": \"L\", \"age\": 3, \"tags\": []}",
                                            "{\"name\": \"L\", \"age\": 3, \"tags\": [\"a\", \"b\", \"a\"]}",
                                            "{\"name\": \"L\", \"age\": 03}", NULL};
    check_schema(schema, good, bad_texts);
    /* only optional properties: any subset in order, commas right */
    static const char *const good2[] = {"{}", "{\"b\": 1}", "{\"a\": 1, \"c\": 2}", "{\"a\": 1, \"b\": 2, \"c\": 3}", NULL};
    static const char *const bad2[] = {"{,\"b\": 1}", "{\"a\": 1,}", "{\"c\": 1, \"a\": 2}", NULL};
    check_schema("{\"properties\": {\"a\": {\"type\": \"number\"}, \"b\": {}, \"c\": true}}", good2, bad2);
    /* other keys allowed after the declared ones */
    static const char *const good3[] = {"{\"id\": 1}", "{\"id\": 1, \"x\": \"y\", \"z\": \"w\"}", NULL};
    static const char *const bad3[] = {"{\"id\": 1, \"x\": 2}", NULL};
    check_schema("{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\"}}, \"required\": [\"id\"],"
                 " \"additionalProperties\": {\"type\": \"string\"}}", good3, bad3);
    static const char *const good4[] = {"{}", "{\"k\": [1, {\"a\": null}]}", NULL};
    check_schema("{\"type\": \"object\", \"additionalProperties\": true}", good4, NULL);
}

static void test_schema_combinations(void)
{
    /* anyOf, const, nested arrays, $ref with recursion */
    const char *tree = "{\"$ref\": \"#/$defs/node\", \"$defs\": {\"node\": {\"type\": \"object\", \"properties\":"
                       " {\"v\": {\"anyOf\": [{\"type\": \"integer\"}, {\"const\": \"none\"}]}, \"kids\": {\"type\":"
                       " \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}}, \"required\": [\"v\"]}}}";
    static const char *const good[] = {"{\"v\": 1}", "{\"v\": \"none\", \"kids\": [{\"v\": 2, \"kids\": []}, {\"v\": 3}]}",
                                       NULL};
    static const char *const bad_texts[] = {"{\"v\": \"some\"}", "{\"kids\": []}", "{\"v\": 1, \"kids\": [{}]}", NULL};
    check_schema(tree, good, bad_texts);
    static const char *const good2[] = {"\"x\"", "{\"a\": [true]}", "-1.5e+3", "null", NULL};
    static const char *const bad2[] = {"nul", "{a: 1}", "01", NULL};
    check_schema("{}", good2, bad2);
    static const char *const good3[] = {"[[1, 2], []]", NULL};
    static const char *const bad3[] = {"[[1, 2, 3]]", "[1]", NULL};
    check_schema("{\"type\": \"array\", \"items\": {\"type\": \"array\", \"items\": {\"type\": \"number\"}, \"maxItems\": 2},"
                 " \"title\": \"pairs\", \"description\": \"d\"}", good3, bad3);
    static const char *const good4[] = {"\"\\u00e9\\n\"", "\"中文\"", NULL};
    static const char *const bad4[] = {"\"\n\"", "\"\\x\"", NULL};
    check_schema("{\"type\": \"string\"}", good4, bad4);
}

static void schema_bad(const char *schema_text, const char *piece)
{
    json_t *schema = NULL;
    snug_error err = {0};
    if (strcmp(schema_text, "false") == 0) {
        schema = json_false();
    } else if (snug_json_parse(schema_text, strlen(schema_text), "schema", &schema, &err) != SNUG_OK) {
        CHECK(false, "%s: %s", schema_text, err.msg);
        return;
    }
    snug_strbuf out = {.err = &err};
    CHECK_FAILS(snug_schema_to_gbnf(schema, "response_format.json_schema.schema", &out, &err), &err, SNUG_INVALID,
                piece);
    snug_strbuf_free(&out);
    json_decref(schema);
}

/* Schemas wide enough to matter: 1,024 enum strings inside an object (it
 * returned "{ \"c\" " and finish_reason error at 63), 4,000 properties
 * (the grammar grew with the square of the optional ones: 5,000 took
 * 1.4 GB), a run of optional properties past the limit refused with its
 * path, additionalProperties beside optional ones. */
static void test_schema_wide(void)
{
    snug_error err = {0};
    snug_strbuf t = {.err = &err};
    snug_strbuf_printf(&t, "{\"type\": \"object\", \"properties\": {\"c\": {\"enum\": [");
    for (int i = 0; i < 1024; i++) snug_strbuf_printf(&t, "%s\"value %d\"", i ? ", " : "", i);
    snug_strbuf_printf(&t, "]}}, \"required\": [\"c\"]}");
    const char *good[] = {"{\"c\": \"value 0\"}", "{\"c\": \"value 1023\"}", "{ \"c\": \"value 512\" }", NULL};
    const char *bad_texts[] = {"{\"c\": \"value 1024\"}", "{\"c\": \"value\"}", "{}", NULL};
    check_schema(t.p, good, bad_texts);
    snug_strbuf_free(&t);

    t = (snug_strbuf){.err = &err};
    snug_strbuf_printf(&t, "{\"type\": \"object\", \"properties\": {");
    for (int i = 0; i < 4000; i++) snug_strbuf_printf(&t, "%s\"p%d\": {\"type\": \"integer\"}", i ? ", " : "", i);
    snug_strbuf_printf(&t, "}, \"required\": [");
    for (int i = 0; i < 4000; i += 40) snug_strbuf_printf(&t, "%s\"p%d\"", i ? ", " : "", i);
    snug_strbuf_printf(&t, "]}");
    char *g = schema_gbnf(t.p);
    CHECK(g && strlen(g) < 40 * t.len, "4,000 properties: %zu bytes of grammar for %zu of schema", g ? strlen(g) : 0,
          t.len);
    if (g) {
        snug_strbuf inst = {.err = &err};
        snug_strbuf_printf(&inst, "{");
        for (int i = 0; i < 4000; i++)
            if (i % 40 == 0 || i % 7 == 3) snug_strbuf_printf(&inst, "%s\"p%d\": %d", inst.len > 1 ? ", " : "", i, i);
        snug_strbuf_printf(&inst, "}");
        bool whole;
        snug_gmatch_result r = run(g, inst.p, inst.len, &whole);
        CHECK(r == SNUG_GMATCH_OK && whole, "4,000 properties, some optional ones left out: result %d", r);
        inst.len = 0;
        snug_strbuf_printf(&inst, "{\"p0\": 1, \"p2\": 2, \"p1\": 3}"); /* out of order */
        r = run(g, inst.p, inst.len, &whole);
        CHECK(!(r == SNUG_GMATCH_OK && whole), "properties out of their order are refused");
        snug_strbuf_free(&inst);
    }
    snug_mem_free(g);
    /* a run of 49 optional properties is refused with its path */
    t.len = 0;
    snug_strbuf_printf(&t, "{\"properties\": {\"o\": {\"properties\": {");
    for (int i = 0; i < 49; i++) snug_strbuf_printf(&t, "%s\"p%d\": {}", i ? ", " : "", i);
    snug_strbuf_printf(&t, "}}}}");
    schema_bad(t.p, "schema.properties.o: properties: more than 48 optional properties in a row");
    t.len = 0;
    snug_strbuf_printf(&t, "{\"properties\": {");
    for (int i = 0; i < 4097; i++) snug_strbuf_printf(&t, "%s\"p%d\": {}", i ? ", " : "", i);
    snug_strbuf_printf(&t, "}}");
    schema_bad(t.p, "properties: 4097 of them, more than the 4096 taken");
    snug_strbuf_free(&t);
    const char *extra = "{\"properties\": {\"a\": {\"type\": \"integer\"}}, \"additionalProperties\": {\"type\": \"string\"}}";
    const char *extra_good[] = {"{}", "{\"a\": 1}", "{\"x\": \"y\"}", "{\"a\": 1, \"x\": \"y\", \"z\": \"w\"}", NULL};
    const char *extra_bad[] = {"{\"x\": 1}", "{\"a\": 1 \"x\": \"y\"}", "{,\"a\": 1}", NULL};
    check_schema(extra, extra_good, extra_bad);
}

static void test_schema_refused(void)
{
    schema_bad("{\"type\": \"string\", \"pattern\": \"^a$\"}",
               "response_format.json_schema.schema: the keyword \"pattern\" is not supported");
    schema_bad("{\"properties\": {\"a\": {\"type\": \"number\", \"minimum\": 0}}}",
               "schema.properties.a: the keyword \"minimum\" is not supported");
    schema_bad("{\"type\": \"strin\"}", "\"strin\" is not a JSON schema type");
    schema_bad("{\"$ref\": \"#/$defs/missing\"}", "names no schema");
    schema_bad("{\"$ref\": \"http://x/y.json\"}", "names no schema");
    schema_bad("{\"type\": \"object\", \"required\": [\"a\"]}", "required[0]: \"a\" is not among the properties");
    schema_bad("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", "maxItems (2) is below minItems (3)");
    schema_bad("{\"type\": \"array\", \"maxItems\": 5000}", "schema.maxItems: expected an integer from 0 to 1024");
    schema_bad("{\"allOf\": [{}, {}]}", "only a list of one schema");
    schema_bad("{\"enum\": []}", "enum: expected a non-empty list");
    schema_bad("false", "admits no value");
    schema_bad("{\"anyOf\": [{\"type\": \"integer\"}, {\"items\": 5}]}", "schema.anyOf[1]: items: expected a schema");
    schema_bad("{\"$ref\": \"#\", \"type\": \"object\"}", "type beside $ref is not supported");
}


/* ---- token masks --------------------------------------------------------------- */

enum { VOCAB = 4000 };

/* A vocabulary like a real one: every single byte, then strings of JSON's
 * pieces and words (some repeated under two ids), a few UTF-8 letters and
 * tokens with no bytes (specials). texts are views into buf. */
static void make_vocab(char *buf, const uint8_t *texts[VOCAB], int32_t lens[VOCAB])
{
    static const char *const pieces[] = {"{", "}", "[", "]", "\"", ":", ",", " ", "\n", "true", "false", "null",
                                         "0", "1", "12", "-", ".", "e", "a", "name", "age", "Lily", "\\", "u",
                                         "é", "中", "\":", "\",", "{\"", "\"}", " \"", "\t", "ab", "x"};
    const int n_pieces = (int)(sizeof pieces / sizeof pieces[0]);
    uint64_t state = 12345;
    size_t at = 0;
    for (int32_t i = 0; i < VOCAB; i++) {
        texts[i] = (const uint8_t *)buf + at;
        if (i < 256) {
            buf[at] = (char)i, lens[i] = 1;
        } else if (i % 97 == 0) {
            lens[i] = 0; /* a special token */
        } else if (i % 89 == 0) {
            texts[i] = texts[i - 1], lens[i] = lens[i - 1]; /* the same bytes under another id */
            continue;
        } else {
            int k = 0, parts = 1 + (int)(i % 4);
            for (int j = 0; j < parts; j++) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                const char *p = pieces[(state >> 33) % (uint64_t)n_pieces];
                memcpy(buf + at + k, p, strlen(p));
                k += (int)strlen(p);
            }
            lens[i] = k;
        }
        at += (size_t)lens[i];
    }
}

enum { FORM_CAP = 8192, UNSURE_CAP = 1500 };

/* Along a walk through grammar g (tokens chosen among those allowed), the
 * trie's mask equals advancing every token's bytes one by one, and so does
 * the mask made from the contexts' cache (walked into it when missing; it
 * may hold other grammars' contexts). */
static void check_masks(const char *grammar_text, int steps, snug_ctxmask_cache *ctx_cache)
{
    snug_ctxmask_cache contexts = *ctx_cache;
    static char buf[VOCAB * 40];
    static const uint8_t *texts[VOCAB];
    static int32_t lens[VOCAB];
    make_vocab(buf, texts, lens);
    snug_vocab_trie *t = NULL;
    snug_error err = {0};
    CHECK_OK(snug_vocab_trie_build(texts, lens, VOCAB, &t, &err), &err);
    gm x;
    if (!t || !gm_open(&x, grammar_text, STACKS, DEPTH)) {
        snug_vocab_trie_free(t);
        return;
    }
    size_t gb = snug_gmatch_bytes(STACKS, DEPTH);
    void *scratch = snug_mem_alloc(SNUG_MEM_OTHER, snug_tokmask_scratch_bytes(t->depth_max, STACKS, DEPTH), NULL);
    void *one = snug_mem_alloc(SNUG_MEM_OTHER, gb, NULL);
    uint32_t mask[(VOCAB + 31) / 32];
    snug_tokmask_cache cache;
    void *cache_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_tokmask_cache_bytes(4, VOCAB, STACKS * (DEPTH + 1)), NULL);
    snug_tokmask_cache_init(&cache, cache_mem, 4, VOCAB, STACKS * (DEPTH + 1));
    int32_t *form = snug_mem_alloc(SNUG_MEM_OTHER, FORM_CAP * sizeof *form, NULL);
    int32_t *unsure = snug_mem_alloc(SNUG_MEM_OTHER, UNSURE_CAP * sizeof *unsure, NULL);
    void *form_scratch = snug_mem_alloc(SNUG_MEM_OTHER, snug_ctx_form_scratch_bytes(), NULL);
    uint32_t walk_mask[(VOCAB + 31) / 32];
    snug_ctx_scratch cs = {.form = form, .form_cap = FORM_CAP, .form_mem = form_scratch, .check_mem = one,
                           .walk_mem = scratch, .walk_mask = walk_mask, .unsure = unsure, .unsure_cap = UNSURE_CAP,
                           .unsure_bytes_cap = 1 << 20};
    int32_t composed = 0, composed_at_once = 0, ctx_walks = 0, later = 0;
    uint64_t state = 99;
    int32_t brute_all = 0, partial = 0, restarts = 0, most_runs = 0;
    for (int32_t i = 0; i < VOCAB; i++) brute_all += lens[i] > 0;
    for (int step = 0; step < steps && !g_test_failed_checks; step++) {
        bool over = true;
        int32_t allowed = snug_tokmask_compute(t, &x.m, scratch, mask, &over), cached_n = -1;
        { /* the same walk in pieces (stopped every 256 nodes, the state changed meanwhile) gives the same mask */
            uint32_t pieces[(VOCAB + 31) / 32];
            snug_tokmask_walk w;
            snug_tokmask_walk_begin(&w, t, &x.m, scratch, pieces);
            snug_gmatch saved;
            snug_gmatch_clone(&saved, one, &x.m);
            snug_gmatch_start(&x.m, x.mem, STACKS, DEPTH, x.g, &err); /* the walk has its own copy */
            int runs = 1;
            while (!snug_tokmask_walk_run(&w, 1e-9)) runs++;
            snug_gmatch_copy(&x.m, &saved);
            CHECK(w.allowed == allowed && memcmp(pieces, mask, sizeof mask) == 0 && w.overflowed == over,
                  "step %d: the walk in %d pieces differs from the whole walk", step, runs);
            most_runs = SNUG_MAX(most_runs, runs);
        }
        { /* the mask made from the state's contexts, each added from the cache or walked alone when not
           * there (as the engine's walks do), is the mask */
            uint32_t made[(VOCAB + 31) / 32];
            int32_t walked = 0, n_made = snug_ctxmask_make(&contexts, t, &x.m, &cs, made, &walked);
            CHECK(n_made >= 0 || n_made == SNUG_CTX_NOT, "step %d: %d", step, n_made);
            if (n_made >= 0) {
                composed++;
                CHECK(n_made == allowed && memcmp(made, mask, sizeof mask) == 0,
                      "step %d: the mask made from contexts (%d allowed) differs from the walk's (%d)", step, n_made,
                      allowed);
            }
            ctx_walks += walked;
            int32_t missing = -1, again = snug_ctxmask_compose(&contexts, t, &x.m, &cs, 1 << 20, made, &missing);
            if (again >= 0) /* all its contexts still cached: made from them at once */
                CHECK(again == allowed && memcmp(made, mask, sizeof mask) == 0, "step %d: the mask made at once differs",
                      step);
            composed_at_once += again >= 0;
            if (again >= 0) { /* with no bytes of unsure tokens to try, only a state with none is made at once */
                int32_t tight = snug_ctxmask_compose(&contexts, t, &x.m, &cs, 0, made, &missing);
                CHECK(tight == again || tight == SNUG_CTX_LATER, "step %d: %d with no budget", step, tight);
                later += tight == SNUG_CTX_LATER;
            }
        }
        const uint32_t *cached = snug_tokmask_cache_get(&cache, 7, &x.m, &cached_n);
        if (cached) /* a state seen before: the cache's mask is the mask */
            CHECK(cached_n == allowed && memcmp(cached, mask, sizeof mask) == 0, "step %d: the cached mask differs", step);
        else
            snug_tokmask_cache_put(&cache, 7, &x.m, mask, allowed);
        int32_t brute = 0, wrong = 0;
        for (int32_t i = 0; i < VOCAB; i++) {
            snug_gmatch m;
            snug_gmatch_clone(&m, one, &x.m);
            bool ok = lens[i] > 0 && snug_gmatch_advance_bytes(&m, texts[i], (size_t)lens[i], NULL) == SNUG_GMATCH_OK;
            brute += ok;
            if (ok != (bool)(mask[i >> 5] >> (i & 31) & 1) && wrong++ < 3)
                CHECK(false, "step %d: token %d (%.*s): brute force %d, mask %d", step, i, lens[i], texts[i], ok, !ok);
        }
        CHECK(allowed == brute && !over, "step %d: %d allowed by the mask, %d by brute force, overflow %d", step,
              allowed, brute, over);
        partial += allowed > 0 && allowed < brute_all;
        if (allowed == 0) { /* a whole match with nothing to follow: from the start again */
            restarts++;
            snug_gmatch_start(&x.m, x.mem, STACKS, DEPTH, x.g, &err);
            continue;
        }
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        int32_t pick = (int32_t)((state >> 33) % (uint64_t)allowed), id = -1;
        for (int32_t i = 0; i < VOCAB && id < 0; i++)
            if (mask[i >> 5] >> (i & 31) & 1 && pick-- == 0) id = i;
        CHECK(snug_gmatch_advance_bytes(&x.m, texts[id], (size_t)lens[id], NULL) == SNUG_GMATCH_OK, "step %d", step);
    }
    CHECK(partial >= steps / 2, "%d of %d masks allowed some tokens but not all (%d restarts)", partial, steps, restarts);
    CHECK(most_runs > 1, "some walk stopped and went on: at most %d pieces", most_runs);
    CHECK(cache.hits > 0 && cache.misses > 0, "the cache: %lld hits, %lld misses", (long long)cache.hits,
          (long long)cache.misses);
    *ctx_cache = contexts;
    CHECK(composed >= steps / 2 && composed_at_once > 0 && later > 0 && contexts.hits > 0 && ctx_walks > 0,
          "%d masks made from contexts (%d at once, %d later with no budget; %lld hits, %lld misses), %d context walks",
          composed, composed_at_once, later, (long long)contexts.hits, (long long)contexts.misses, ctx_walks);
    printf("  %d masks checked against every token, %d restarts; cache of 4: %lld hits, %lld misses; %d masks made"
           " from contexts (cache of 16: %lld hits, %lld misses; %d context walks; %d with unsure tokens to try)\n", steps,
           restarts, (long long)cache.hits, (long long)cache.misses, composed, (long long)contexts.hits,
           (long long)contexts.misses, ctx_walks, later);
    snug_mem_free(form_scratch);
    snug_mem_free(unsure);
    snug_mem_free(form);
    snug_mem_free(cache_mem);
    snug_mem_free(one);
    snug_mem_free(scratch);
    gm_close(&x);
    snug_vocab_trie_free(t);
}

static snug_status build_trie(void *ctx, snug_error *err)
{
    static const uint8_t a[] = "ab", b[] = "abc", c[] = "b";
    const uint8_t *texts[] = {a, b, c, a};
    const int32_t lens[] = {2, 3, 1, 2};
    return snug_vocab_trie_build(texts, lens, 4, (snug_vocab_trie **)ctx, err);
}

/* The cache finds a state whatever the order of its stacks, only under its
 * grammar's key, keeps no state larger than its entries, and a full cache
 * forgets the least recently used. */
static void test_mask_cache(void)
{
    gm x;
    if (!gm_open(&x, "root ::= (\"a\" | \"ab\" | [a-c] \"x\")+", STACKS, DEPTH)) return;
    snug_gmatch_advance(&x.m, 'a');
    CHECK(x.m.n >= 2, "a state of several stacks (%d)", x.m.n);
    int32_t ints = STACKS * (DEPTH + 1);
    void *mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_tokmask_cache_bytes(2, 64, ints), NULL);
    void *other = snug_mem_alloc(SNUG_MEM_OTHER, snug_gmatch_bytes(STACKS, DEPTH), NULL);
    snug_tokmask_cache c;
    snug_tokmask_cache_init(&c, mem, 2, 64, ints);
    uint32_t m1[2] = {1, 2}, m2[2] = {3, 4}, m3[2] = {5, 6};
    snug_tokmask_cache_put(&c, 1, &x.m, m1, 2);
    snug_gmatch r;
    snug_gmatch_clone(&r, other, &x.m); /* the same stacks, the first two swapped */
    int32_t l0 = r.len[0];
    int32_t f0[DEPTH];
    memcpy(f0, r.frames, (size_t)l0 * 4);
    memcpy(r.frames, r.frames + DEPTH, (size_t)r.len[1] * 4), r.len[0] = r.len[1];
    memcpy(r.frames + DEPTH, f0, (size_t)l0 * 4), r.len[1] = l0;
    int32_t n = 0;
    const uint32_t *got = snug_tokmask_cache_get(&c, 1, &r, &n);
    CHECK(got && got[0] == 1 && got[1] == 2 && n == 2, "found with its stacks in another order");
    CHECK(snug_tokmask_cache_get(&c, 2, &r, &n) == NULL, "another grammar's key: not found");
    gm y;
    if (gm_open(&y, "root ::= \"q\"", STACKS, DEPTH)) {
        snug_tokmask_cache_put(&c, 1, &y.m, m2, 1);
        snug_tokmask_cache_get(&c, 1, &x.m, NULL); /* x used last: y is the oldest now */
        snug_gmatch_advance(&x.m, 'b');
        snug_tokmask_cache_put(&c, 1, &x.m, m3, 1); /* replaces y */
        CHECK(snug_tokmask_cache_get(&c, 1, &y.m, NULL) == NULL, "the least recently used is gone");
        got = snug_tokmask_cache_get(&c, 1, &x.m, NULL);
        CHECK(got && got[0] == 5, "the new entry is there");
        gm_close(&y);
    }
    /* entries of one int: no state of a stack with frames fits */
    snug_tokmask_cache small;
    snug_tokmask_cache_init(&small, mem, 2, 64, 1);
    snug_tokmask_cache_put(&small, 1, &x.m, m1, 2);
    CHECK(small.used == 0 && snug_tokmask_cache_get(&small, 1, &x.m, NULL) == NULL,
          "a state larger than the entries is not kept (%d used)", small.used);
    snug_mem_free(other);
    snug_mem_free(mem);
    gm_close(&x);
}

static void test_token_masks(void)
{
    snug_vocab_trie *t = NULL;
    CHECK(test_oom_loop("trie", build_trie, NULL, &t, 10) >= 1, "the trie's allocations fail cleanly");
    CHECK(t && t->n_nodes == 5 && t->depth_max == 3 && t->size[0] == 5, "the trie of ab, abc, b, ab: %d nodes",
          t ? t->n_nodes : -1);
    if (t) CHECK(t->tok_first[3] - t->tok_first[2] == 2, "ab under two ids");
    snug_vocab_trie_free(t);

    /* one cache of contexts for all the grammars: the schemas' strings are met again in the others */
    snug_ctxmask_cache contexts;
    void *ctx_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_ctxmask_cache_bytes(16, VOCAB, FORM_CAP, UNSURE_CAP), NULL);
    snug_ctxmask_cache_init(&contexts, ctx_mem, 16, VOCAB, FORM_CAP, UNSURE_CAP);
    check_masks("root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= \"\\\"\" [a-z]* \"\\\":\" ws ( [0-9]+ | \"true\" | \"null\" )\n"
                "ws ::= [ \\n]?", 40, &contexts);
    static const char *const schemas[] = {
        "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": {\"type\":"
        " \"integer\"}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}, \"required\": [\"name\"]}",
        /* the same strings amid other rules: the first schema's contexts serve, and must be right */
        "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", \"maxLength\": 3}, \"b\": {\"type\":"
        " \"array\", \"items\": {\"type\": \"string\"}}, \"c\": {\"type\": \"string\"}}, \"required\": [\"b\", \"c\"]}"};
    for (size_t k = 0; k < sizeof schemas / sizeof schemas[0]; k++) {
        char *g = schema_gbnf(schemas[k]);
        if (g) check_masks(g, 60, &contexts);
        snug_mem_free(g);
    }
    snug_mem_free(ctx_mem);
}

int main(void)
{
    RUN(test_literals_and_alternatives);
    RUN(test_classes_and_any);
    RUN(test_classes_every_code_point);
    RUN(test_repetitions);
    RUN(test_depth);
    RUN(test_json);
    RUN(test_bad_grammars);
    RUN(test_oom);
    RUN(test_limits);
    RUN(test_merged_alternatives);
    RUN(test_schema_wide);
    RUN(test_schema_objects);
    RUN(test_schema_combinations);
    RUN(test_schema_refused);
    RUN(test_token_masks);
    RUN(test_mask_cache);
    return test_summary();
}
