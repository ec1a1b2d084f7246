/*
 * rng.h: counter-based random numbers: a value is a pure function of a
 * stream key and a position (hash the two), so that threads can generate
 * any part of a stream independently and the same seed always gives the
 * same bytes.
 */
#ifndef SNUG_RNG_H
#define SNUG_RNG_H

#include <stdint.h>
#include <string.h>

/* The SplitMix64 output function: a bijective 64-bit mix. */
static inline uint64_t snug_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A stream key derived from a seed and a name (FNV-1a of the name, mixed). */
static inline uint64_t snug_rng_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0, n = strlen(name); i < n; i++) h = (h ^ (unsigned char)name[i]) * 0x100000001B3ull;
    return snug_mix64(seed ^ snug_mix64(h));
}

/* A 32-bit integer hash with low bias (Chris Wellons' "lowbias32"); cheap
 * enough to vectorize, for streams that need speed more than quality. */
static inline uint32_t snug_hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x;
}

/* A normal-like value (mean 0, standard deviation 1, within +-3.45) from 32
 * random bits: the centred sum of four uniform bytes (Irwin-Hall, n = 4). */
static inline float snug_rng_normalish(uint32_t r)
{
    int s = (int)(r & 0xFF) + (int)((r >> 8) & 0xFF) + (int)((r >> 16) & 0xFF) + (int)(r >> 24);
    return (float)(s - 510) * (1.0f / 147.80054f);
}

#endif /* SNUG_RNG_H */
