/*
 * kvcache.h: the paged KV cache: one allocation (category kv_cache) of
 * n_blocks blocks, each holding the keys and values of block_size token
 * positions for every layer and every KV head of this rank.
 *
 * Layout, in values of the cache's dtype: for layer l, block b, K (c = 0)
 * or V (c = 1), KV head h, slot s, dimension d:
 *   ((((l * n_blocks + b) * 2 + c) * n_kv_heads + h) * block_size + s) * head_dim + d
 * so that one head's keys in one block are contiguous (what attention
 * reads), and a block's keys and values of one layer are side by side.
 * Value i lies at byte snug_dtype_bytes(dtype, i) for the float types; a
 * cache of blocks of 32 (Q8_0: llama.cpp's, an f16 scale d and 32 int8,
 * value q d; MXFP8_E4M3 or _E5M2: a power-of-two scale byte and 32 FP8
 * codes, base/quant.h) keeps every row of head_dim values whole blocks, so
 * that value i is in block i / 32 (kernels.h's snug_kv_view).
 */
#ifndef SNUG_KVCACHE_H
#define SNUG_KVCACHE_H

#include "base/common.h"
#include "base/pool.h"
#include "kernels/kernels.h"

enum { SNUG_BLOCK_SIZE_DEFAULT = 16 };

typedef struct snug_kv_shape {
    int32_t n_layers;     /* 0: a cache of positions only (every layer in the window group,
                           * snug_kvcache.window): its blocks hold no data */
    int32_t n_kv_heads;   /* on this rank */
    int32_t head_dim;
    int32_t block_size;
    snug_dtype dtype;     /* F32, F16, BF16, Q8_0, MXFP8_E4M3 or MXFP8_E5M2 (snug_kv_dtype_check) */
} snug_kv_shape;

/* Whether a cache of dtype dt can hold heads of head_dim values: F32, F16
 * and BF16 any; the blocks of 32 (Q8_0, MXFP8_E4M3, MXFP8_E5M2) a multiple
 * of 32. Fails with SNUG_INVALID naming the dtype and what was expected. */
snug_status snug_kv_dtype_check(snug_dtype dt, int32_t head_dim, snug_error *err);

/* How many tokens a cache of dtype dt holds in the bytes bf16's holds one
 * (bf16 64 bytes a 32 values, Q8_0 34: 1.88, MXFP8 33: 1.94); 0 for a
 * dtype no cache has. */
double snug_kv_tokens_vs_bf16(snug_dtype dt);

/* The name of a cache dtype as --kv-cache-dtype and the plan give it
 * ("bfloat16", "float16", "float32", "q8_0", "fp8_e4m3", "fp8_e5m2";
 * "none" for any other). */
const char *snug_kv_dtype_name(snug_dtype dt);

/* The cache dtype --kv-cache-dtype names: auto (bf16), bf16, f16, f32 (and
 * their other spellings, snug_dtype_from_torch), q8_0, fp8 (fp8_e4m3),
 * fp8_e4m3, fp8_e5m2, any case; SNUG_DTYPE_NONE for anything else. */
snug_dtype snug_kv_dtype_from_name(const char *name);

typedef struct snug_kvcache {
    snug_kv_shape shape;
    int32_t n_blocks;
    void *data;           /* category kv_cache */
    struct snug_kvcache *window; /* a model's layers in two groups: the layers that attend
                          * through a window hold their keys and values in this cache's
                          * blocks (window->shape.n_layers of them, blocks of their own),
                          * the others in this one; NULL: every layer here. The owner of
                          * both sets it and frees each (snug_kvcache_free frees one) */
} snug_kvcache;

/* Bytes of one block: 2 * n_layers * block_size * n_kv_heads rows of
 * head_dim values of the dtype (snug_dtype_bytes); 0 when the shape is
 * invalid or the product overflows. Pure. */
size_t snug_kv_block_bytes(const snug_kv_shape *shape);

/* Allocates a cache of n_blocks blocks (zero-filled), made resident on the
 * threads of pool (populate.h; NULL: on the caller's); one of no layers
 * allocates nothing (data NULL). Fails with
 * SNUG_INVALID for a bad shape (naming the field) or SNUG_NOMEM (nothing
 * held). */
snug_status snug_kvcache_create(const snug_kv_shape *shape, int32_t n_blocks, snug_pool *pool,
                                snug_kvcache *out, snug_error *err);

/* As snug_kvcache_create, the bytes charged alike, but none of them made
 * resident: snug_kvcache_populate does that, a range of blocks at a time,
 * before they are used (a cache made resident while serving begins). */
snug_status snug_kvcache_reserve(const snug_kv_shape *shape, int32_t n_blocks,
                                 snug_kvcache *out, snug_error *err);

/* Makes blocks [first, end) resident in every layer (for large ranges on
 * the threads of pool, a layer at a time; NULL: the caller alone). Fails
 * with SNUG_INVALID for a range outside the cache, SNUG_NOMEM when the
 * system will not back the pages. */
snug_status snug_kvcache_populate(snug_kvcache *kv, int32_t first, int32_t end, snug_pool *pool,
                                  snug_error *err);

/* Frees the cache; a zero-filled one is ignored. */
void snug_kvcache_free(snug_kvcache *kv);

/* The view attention reads for KV head `head` of layer `layer` of a
 * sequence with the given block table (valid while both live). */
snug_kv_view snug_kvcache_view(const snug_kvcache *kv, int32_t layer, int32_t head,
                               const int32_t *block_table);

/* Where the key (v = false) or value (v = true) of KV head `head`, layer
 * `layer`, at slot `slot` of block `block` starts. */
void *snug_kvcache_at(const snug_kvcache *kv, int32_t layer, int32_t block, bool v, int32_t head,
                      int32_t slot);

#endif /* SNUG_KVCACHE_H */
