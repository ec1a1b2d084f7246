/*
 * hash.c: FNV-1a, and SipHash-2-4 as Aumasson and Bernstein define it
 * (2 rounds a word, 4 at the end; checked against the paper's test vector
 * in test_hash).
 */
#include "hash.h"

#include <string.h>

uint64_t snug_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    if (h == SNUG_HASH_SEED) h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

#define SIPROUND(v0, v1, v2, v3)                                                                          \
    do {                                                                                                  \
        v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);                                         \
        v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;                                                            \
        v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;                                                            \
        v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);                                         \
    } while (0)

uint64_t snug_siphash(const uint64_t k[2], const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t v0 = 0x736f6d6570736575ull ^ k[0], v1 = 0x646f72616e646f6dull ^ k[1];
    uint64_t v2 = 0x6c7967656e657261ull ^ k[0], v3 = 0x7465646279746573ull ^ k[1];
    size_t whole = n - n % 8;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = load_le64(b + i);
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    unsigned char last[8] = {0};
    memcpy(last, b + whole, n % 8);
    uint64_t m = load_le64(last) | (uint64_t)(n & 0xff) << 56;
    v3 ^= m;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    v0 ^= m;
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++) SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}
