/*
 * hash.h: the hashes snug keeps: FNV-1a where nobody gains by aiming at a
 * collision (files every rank must agree on, a matcher state's bucket),
 * and SipHash-2-4, keyed by a secret of the process's, where a client's
 * bytes choose what is hashed (the mask cache's grammars): without the key
 * nobody can make two inputs collide on purpose.
 */
#ifndef SNUG_HASH_H
#define SNUG_HASH_H

#include "common.h"

/* 64-bit FNV-1a of n bytes, continuing from h (start from
 * SNUG_HASH_SEED). Pure. */
enum { SNUG_HASH_SEED = 0 };
uint64_t snug_hash_bytes(uint64_t h, const void *p, size_t n);

/* SipHash-2-4 of n bytes under the 128-bit key k (k[0] its first eight
 * bytes, little-endian). Pure. */
uint64_t snug_siphash(const uint64_t k[2], const void *p, size_t n);

#endif /* SNUG_HASH_H */
