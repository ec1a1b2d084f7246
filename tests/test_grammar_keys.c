/*
 * test_grammar_keys.c: the mask cache's keys (engine/grammar_keys.h). Two
 * different grammars forced onto one hash get keys of their own, and so
 * masks of their own: the cache keyed by the hash alone handed one
 * grammar's mask to the other. Equal grammars (compiled apart) share a
 * key; a key given up has its masks dropped before it stands for another
 * grammar.
 */
#include "engine/grammar_keys.h"
#include "grammar/matcher.h"
#include "grammar/tokmask.h"
#include "base/mem.h"
#include "base/hash.h"
#include "test.h"

#include <string.h>

enum { STACKS = 8, DEPTH = 8, VOCAB = 64, STATE_INTS = 64 };

static snug_grammar *compile(const char *text)
{
    snug_grammar *g = NULL;
    snug_error err = {0};
    CHECK_OK(snug_grammar_parse_gbnf(text, strlen(text), NULL, "grammar", &g, &err), &err);
    return g;
}

static void test_forced_collision(void)
{
    /* "a" and "b": different grammars whose start states are the same stacks */
    snug_grammar *a = compile("root ::= \"a\""), *a2 = compile("root ::= \"a\""), *b = compile("root ::= \"b\"");
    snug_grammar *c = compile("root ::= \"c\" \"d\"");
    if (!a || !a2 || !b || !c) goto done;
    CHECK(snug_grammar_equal(a, a2) && !snug_grammar_equal(a, b) && !snug_grammar_equal(a, c),
          "equal: a and its copy; not: a and b, a and c");
    void *keys_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_grammar_keys_bytes(3), NULL);
    snug_grammar_keys t;
    snug_grammar_keys_init(&t, keys_mem, 3); /* a, b and c fill it */
    const uint64_t h = 7; /* every grammar forced onto one hash; the digests tell them apart */
    const uint64_t da = 100, db = 200, dc = 300;
    uint64_t ka = 0, ka2 = 0, kb = 0, kc = 0, old = 0;
    bool dropped = false;
    CHECK(snug_grammar_keys_take(&t, h, da, a, &ka, &dropped, &old) && ka == h && !dropped,
          "a takes its hash: %llu", (unsigned long long)ka);
    CHECK(snug_grammar_keys_take(&t, h, da, a2, &ka2, &dropped, &old) && ka2 == ka, "a's copy shares a's key");
    CHECK(snug_grammar_keys_take(&t, h, da, b, &kb, &dropped, &old) && kb != ka,
          "b, on a's hash (and digest), gets a key of its own: %llu (a is live: compared whole)",
          (unsigned long long)kb);
    CHECK(snug_grammar_keys_take(&t, kb, dc, c, &kc, &dropped, &old) && kc != ka && kc != kb,
          "c, on b's key, goes past it: %llu", (unsigned long long)kc);
    CHECK(t.collisions == 2, "2 collisions counted (%lld)", (long long)t.collisions);

    /* the masks: a's allows token 'a', b's token 'b'; the states are equal */
    snug_tokmask_cache cache;
    void *cache_mem = snug_mem_alloc(SNUG_MEM_OTHER, snug_tokmask_cache_bytes(4, VOCAB, STATE_INTS), NULL);
    snug_tokmask_cache_init(&cache, cache_mem, 4, VOCAB, STATE_INTS);
    size_t mb = snug_gmatch_bytes(STACKS, DEPTH);
    char *mem = snug_mem_alloc(SNUG_MEM_OTHER, 2 * mb, NULL);
    snug_gmatch ma, mb_;
    snug_error err = {0};
    CHECK_OK(snug_gmatch_start(&ma, mem, STACKS, DEPTH, a, &err), &err);
    CHECK_OK(snug_gmatch_start(&mb_, mem + mb, STACKS, DEPTH, b, &err), &err);
    CHECK(ma.n == mb_.n && ma.len[0] == mb_.len[0] && memcmp(ma.frames, mb_.frames, 4 * (size_t)ma.len[0]) == 0,
          "the two start states are the same stacks");
    uint32_t mask_a[VOCAB / 32] = {0}, mask_b[VOCAB / 32] = {0};
    mask_a[0] = 1u << 1, mask_b[0] = 1u << 2;
    snug_tokmask_cache_put(&cache, h, &ma, mask_a, 1);
    const uint32_t *got = snug_tokmask_cache_get(&cache, h, &mb_, NULL);
    CHECK(got && got[0] == mask_a[0], "keyed by the hash alone, b is handed a's mask (the hazard)");
    snug_tokmask_cache_drop(&cache, h);
    CHECK(snug_tokmask_cache_get(&cache, h, &ma, NULL) == NULL, "dropped: the key has no masks");
    snug_tokmask_cache_put(&cache, ka, &ma, mask_a, 1);
    CHECK(snug_tokmask_cache_get(&cache, kb, &mb_, NULL) == NULL, "under the table's keys b misses a's mask");
    snug_tokmask_cache_put(&cache, kb, &mb_, mask_b, 1);
    got = snug_tokmask_cache_get(&cache, ka, &ma, NULL);
    CHECK(got && got[0] == mask_a[0], "a gets its own mask");
    got = snug_tokmask_cache_get(&cache, kb, &mb_, NULL);
    CHECK(got && got[0] == mask_b[0], "b gets its own mask");
    got = snug_tokmask_cache_get(&cache, ka2, &ma, NULL);
    CHECK(got && got[0] == mask_a[0], "a's copy shares a's mask");

    /* a lets go (its copy stands for the key), then the copy: the key is retired, its masks kept */
    snug_grammar_keys_release(&t, ka, a, a2);
    snug_grammar_keys_release(&t, ka, a2, NULL);
    snug_grammar *a3 = compile("root ::= \"a\"");
    uint64_t ka3 = 0;
    CHECK(a3 && snug_grammar_keys_take(&t, h, da, a3, &ka3, &dropped, &old) && ka3 == ka && !dropped,
          "a later copy of a (the same digest) takes the retired key back");
    got = snug_tokmask_cache_get(&cache, ka3, &ma, NULL);
    CHECK(got && got[0] == mask_a[0], "and finds a's masks still there");
    snug_grammar_keys_release(&t, ka3, a3, NULL);
    snug_grammar_free(a3);
    /* another grammar on the retired key's hash, with another digest: a key of its own */
    uint64_t kd = 0;
    snug_grammar *d = compile("root ::= \"d\"");
    CHECK(d && snug_grammar_keys_take(&t, h, db, d, &kd, &dropped, &old) && kd != ka && kd != kb && kd != kc,
          "d, on a's retired hash with another digest: a key of its own (%llu)", (unsigned long long)kd);
    CHECK(dropped && old == ka, "the table full, the retired key made room: its masks to drop (%d, %llu)", dropped,
          (unsigned long long)old);
    snug_tokmask_cache_drop(&cache, old);
    CHECK(snug_tokmask_cache_get(&cache, ka, &ma, NULL) == NULL, "dropped: a's old key has no masks");
    CHECK(snug_tokmask_cache_get(&cache, kd, &ma, NULL) == NULL, "d meets none of a's masks");
    snug_grammar_keys_release(&t, kd, d, NULL);
    snug_grammar_free(d);
    snug_mem_free(mem);
    snug_mem_free(cache_mem);
    snug_mem_free(keys_mem);
done:
    snug_grammar_free(a);
    snug_grammar_free(a2);
    snug_grammar_free(b);
    snug_grammar_free(c);
}

/* SipHash-2-4's test vector from its paper: key 00 01 .. 0f, message 00
 * 01 .. 0e (15 bytes): a129ca6149be45e5. */
static void test_siphash(void)
{
    const uint64_t k[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
    unsigned char m[15];
    for (int i = 0; i < 15; i++) m[i] = (unsigned char)i;
    uint64_t h = snug_siphash(k, m, sizeof m);
    CHECK(h == 0xa129ca6149be45e5ull, "SipHash-2-4 of the paper's vector: %016llx", (unsigned long long)h);
    snug_grammar *a = compile("root ::= \"a\""), *a2 = compile("root ::= \"a\""), *b = compile("root ::= \"b\"");
    const uint64_t k2[2] = {1, 2};
    if (a && a2 && b)
        CHECK(snug_grammar_hash(a, k) == snug_grammar_hash(a2, k) && snug_grammar_hash(a, k) != snug_grammar_hash(b, k) &&
                  snug_grammar_hash(a, k) != snug_grammar_hash(a, k2),
              "a grammar's hash: equal for copies, other for another grammar or another key");
    snug_grammar_free(a);
    snug_grammar_free(a2);
    snug_grammar_free(b);
}

int main(void)
{
    RUN(test_siphash);
    RUN(test_forced_collision);
    return test_summary();
}
