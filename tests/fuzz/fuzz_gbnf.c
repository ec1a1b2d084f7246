/*
 * fuzz_gbnf.c: fuzzes the GBNF compiler (snug_grammar_parse_gbnf) and the
 * byte matcher over what it compiles.
 *
 * A grammar that compiles is walked: from its start, a few hundred steps,
 * each taking a byte the matcher says may come next (chosen by the input's
 * bytes). Every byte snug_gmatch_next_bytes offers must be taken (or be an
 * overflow of the limits), every byte it does not offer refused, and a
 * refused or overflowing advance must leave the state as it was. Every
 * MASK_EVERY steps, the token mask over a small vocabulary (every byte,
 * and tokens of two to five bytes from JSON's pieces and a two-byte
 * letter) made from the state's contexts (ctxmask.h, each context walked
 * once and kept across the steps) must be the whole walk's, where that
 * walk did not overflow. The driver in fuzz_common.h checks failures,
 * compiles again without a message buffer and with one allocation
 * failing, and checks for leaks.
 */
#include "grammar/ctxmask.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/tokmask.h"
#include "fuzz_common.h"

static const char *const NAME = "fuzz/grammar.gbnf";

enum { STACKS = 32, DEPTH = 32, STEPS = 300, MASK_EVERY = 25, VOCAB = 700, CONTEXTS = 8, FORM_CAP = 2048 };

/* The masks' vocabulary: bytes 0-255, then tokens of 2 to 5 pieces' bytes
 * (texts point into buf: VOCAB * 10 bytes). */
static void make_vocab(uint8_t *buf, const uint8_t *texts[VOCAB], int32_t lens[VOCAB])
{
    static const char *const pieces[] = {"\"", "\\", "{", "}", "[", "]", ",", ":", " ", "\n", "a", "1", "x",
                                         "\xc3\xa9"};
    size_t at = 0;
    uint32_t state = 7;
    for (int32_t i = 0; i < VOCAB; i++) {
        texts[i] = buf + at;
        if (i < 256) {
            buf[at] = (uint8_t)i, lens[i] = 1;
        } else {
            int32_t k = 0;
            for (int32_t j = 0; j < 2 + i % 4; j++) {
                state = state * 1103515245u + 12345u;
                const char *p = pieces[(state >> 16) % (sizeof pieces / sizeof pieces[0])];
                memcpy(buf + at + k, p, strlen(p));
                k += (int32_t)strlen(p);
            }
            lens[i] = k;
        }
        at += (size_t)lens[i];
    }
}

/* The masks' check's memory: the trie, the walk's scratch, the contexts'
 * cache and their scratch. */
typedef struct masks {
    snug_vocab_trie *t;
    void *walk_mem, *cache_mem, *form_mem, *check_mem;
    int32_t form[FORM_CAP], unsure[VOCAB];
    uint32_t whole[(VOCAB + 31) / 32], made[(VOCAB + 31) / 32], walk_mask[(VOCAB + 31) / 32];
    snug_ctxmask_cache contexts;
    snug_ctx_scratch s;
} masks;

static bool masks_open(masks *k)
{
    static uint8_t buf[VOCAB * 10];
    static const uint8_t *texts[VOCAB];
    static int32_t lens[VOCAB];
    make_vocab(buf, texts, lens);
    *k = (masks){0};
    if (snug_vocab_trie_build(texts, lens, VOCAB, &k->t, NULL) != SNUG_OK) return false;
    k->walk_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_tokmask_scratch_bytes(k->t->depth_max, STACKS, DEPTH), NULL);
    k->cache_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_ctxmask_cache_bytes(CONTEXTS, VOCAB, FORM_CAP, VOCAB), NULL);
    k->form_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_ctx_form_scratch_bytes(), NULL);
    k->check_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_gmatch_bytes(STACKS, DEPTH), NULL);
    snug_ctxmask_cache_init(&k->contexts, k->cache_mem, CONTEXTS, VOCAB, FORM_CAP, VOCAB);
    k->s = (snug_ctx_scratch){.form = k->form, .form_cap = FORM_CAP, .form_mem = k->form_mem,
                              .check_mem = k->check_mem, .walk_mem = k->walk_mem, .walk_mask = k->walk_mask,
                              .unsure = k->unsure, .unsure_cap = VOCAB, .unsure_bytes_cap = 1 << 20};
    return k->walk_mem && k->cache_mem && k->form_mem && k->check_mem;
}

static void masks_close(masks *k)
{
    snug_mem_free(k->check_mem);
    snug_mem_free(k->form_mem);
    snug_mem_free(k->cache_mem);
    snug_mem_free(k->walk_mem);
    snug_vocab_trie_free(k->t);
}

/* The mask of m made from its contexts is the whole walk's. */
static void check_mask(masks *k, const snug_gmatch *m)
{
    bool over = false;
    int32_t allowed = snug_tokmask_compute(k->t, m, k->walk_mem, k->whole, &over);
    int32_t made = snug_ctxmask_make(&k->contexts, k->t, m, &k->s, k->made, NULL);
    REQUIRE(made >= 0 || made == SNUG_CTX_NOT);
    if (made >= 0 && !over) REQUIRE(made == allowed && memcmp(k->made, k->whole, sizeof k->whole) == 0);
}

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
    static masks k; /* (large: not on the stack) */
    REQUIRE(masks_open(&k));
    if (snug_gmatch_start(&m, mem, STACKS, DEPTH, g, &err) == SNUG_OK) {
        REQUIRE(snug_gmatch_start(&keep, (char *)mem + bytes, STACKS, DEPTH, g, &err) == SNUG_OK);
        for (int step = 0; step < STEPS; step++) {
            if (step % MASK_EVERY == 0) check_mask(&k, &m);
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
    masks_close(&k);
    snug_mem_free(mem);
    snug_grammar_free(g);
}

static const fuzz_target g_target = {NAME, false, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_target, data, size);
    return 0;
}
