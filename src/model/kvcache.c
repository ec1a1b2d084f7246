/*
 * kvcache.c: the paged KV cache's one allocation and its addressing.
 */
#include "kvcache.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/pool.h"
#include "base/populate.h"
#include "base/quant.h"

#include <stdatomic.h>
#include <strings.h>

/* a range of this many bytes in all is populated by all threads */
enum { POPULATE_PARALLEL_BYTES = 16 << 20 };

snug_status snug_kv_dtype_check(snug_dtype dt, int32_t head_dim, snug_error *err)
{
    bool blocks = dt == SNUG_DTYPE_Q8_0 || snug_dtype_is_mxfp8(dt);
    if (dt != SNUG_DTYPE_F32 && dt != SNUG_DTYPE_F16 && dt != SNUG_DTYPE_BF16 && !blocks)
        return snug_errorf(err, SNUG_INVALID,
                           "kv cache dtype: expected f32, f16, bf16, q8_0, fp8_e4m3 or fp8_e5m2, got %s",
                           snug_dtype_name(dt));
    if (blocks && (head_dim < 1 || head_dim % 32 != 0))
        return snug_errorf(err, SNUG_INVALID,
                           "kv cache dtype %s: expected a head_dim that is a multiple of its blocks of 32, "
                           "the model's is %d (f32, f16 or bf16 take any)", snug_kv_dtype_name(dt), head_dim);
    return SNUG_OK;
}

double snug_kv_tokens_vs_bf16(snug_dtype dt)
{
    size_t b = snug_dtype_bytes(dt, 32);
    return b ? (double)snug_dtype_bytes(SNUG_DTYPE_BF16, 32) / (double)b : 0.0;
}

const char *snug_kv_dtype_name(snug_dtype dt)
{
    return dt == SNUG_DTYPE_Q8_0         ? "q8_0"
           : dt == SNUG_DTYPE_MXFP8_E4M3 ? "fp8_e4m3"
           : dt == SNUG_DTYPE_MXFP8_E5M2 ? "fp8_e5m2"
                                         : snug_dtype_torch_name(dt);
}

snug_dtype snug_kv_dtype_from_name(const char *name)
{
    if (strcasecmp(name, "auto") == 0) return SNUG_DTYPE_BF16;
    if (strcasecmp(name, "q8_0") == 0) return SNUG_DTYPE_Q8_0;
    if (strcasecmp(name, "fp8") == 0 || strcasecmp(name, "fp8_e4m3") == 0) return SNUG_DTYPE_MXFP8_E4M3;
    if (strcasecmp(name, "fp8_e5m2") == 0) return SNUG_DTYPE_MXFP8_E5M2;
    return snug_dtype_from_torch(name);
}

size_t snug_kv_block_bytes(const snug_kv_shape *s)
{
    if (s->n_layers < 1 || s->n_kv_heads < 1 || s->head_dim < 1 || s->block_size < 1 ||
        snug_kv_dtype_check(s->dtype, s->head_dim, NULL) != SNUG_OK)
        return 0;
    size_t n = 2 * snug_dtype_bytes(s->dtype, s->head_dim);
    if (!snug_mul_size(n, (size_t)s->n_layers, &n) || !snug_mul_size(n, (size_t)s->block_size, &n) ||
        !snug_mul_size(n, (size_t)s->n_kv_heads, &n))
        return 0;
    return n;
}

/* snug_kvcache_create and snug_kvcache_reserve. */
static snug_status make_cache(const snug_kv_shape *shape, int32_t n_blocks, bool resident,
                              snug_pool *pool, snug_kvcache *out, snug_error *err)
{
    *out = (snug_kvcache){0};
    snug_status st = snug_kv_dtype_check(shape->dtype, shape->head_dim, err);
    if (st != SNUG_OK) return st;
    snug_kv_shape one = *shape;
    one.n_layers = 1; /* (a cache of no layer is valid: positions only) */
    size_t block = snug_kv_block_bytes(&one), total;
    if (block == 0 || shape->n_layers < 0) return snug_errorf(err, SNUG_INVALID, "kv cache: invalid block shape");
    if (n_blocks < 1) return snug_errorf(err, SNUG_INVALID, "kv cache: %d blocks", n_blocks);
    out->shape = *shape;
    out->n_blocks = n_blocks;
    if (shape->n_layers == 0) return SNUG_OK;
    block = snug_kv_block_bytes(shape);
    if (block == 0) return snug_errorf(err, SNUG_INVALID, "kv cache: invalid block shape");
    if (!snug_mul_size(block, (size_t)n_blocks, &total))
        return snug_errorf(err, SNUG_INVALID, "kv cache: %d blocks of %zu bytes overflow", n_blocks,
                           block);
    out->data = resident ? snug_populate_alloc(SNUG_MEM_KV, total, pool, err)
                         : snug_mem_alloc_unpopulated(SNUG_MEM_KV, total, err);
    if (!out->data) {
        *out = (snug_kvcache){0};
        return snug_error_prefix(err, SNUG_NOMEM, "kv cache: ");
    }
    return SNUG_OK;
}

snug_status snug_kvcache_create(const snug_kv_shape *shape, int32_t n_blocks, snug_pool *pool,
                                snug_kvcache *out, snug_error *err)
{
    return make_cache(shape, n_blocks, true, pool, out, err);
}

snug_status snug_kvcache_reserve(const snug_kv_shape *shape, int32_t n_blocks,
                                 snug_kvcache *out, snug_error *err)
{
    return make_cache(shape, n_blocks, false, NULL, out, err);
}

void snug_kvcache_free(snug_kvcache *kv)
{
    snug_mem_free(kv->data);
    *kv = (snug_kvcache){0};
}

/* Value offset of (layer, block, c, head, slot): the start of a row. */
static size_t kv_offset(const snug_kvcache *kv, int32_t layer, int32_t block, int c, int32_t head,
                        int32_t slot)
{
    const snug_kv_shape *s = &kv->shape;
    size_t i = ((size_t)layer * (size_t)kv->n_blocks + (size_t)block) * 2 + (size_t)c;
    i = (i * (size_t)s->n_kv_heads + (size_t)head) * (size_t)s->block_size + (size_t)slot;
    return i * (size_t)s->head_dim;
}

/* One populate's work: each layer's range of blocks, taken a layer at a
 * time by whichever thread is free. */
typedef struct populate_job {
    snug_kvcache *kv;
    snug_pool *pool;
    size_t from, to, stride;
    atomic_int failed;
    snug_error why;
} populate_job;

static void populate_part(void *ctx, int32_t thread, int32_t n_threads)
{
    (void)thread;
    populate_job *j = ctx;
    int32_t n_layers = j->kv->shape.n_layers;
    for (int64_t i = 0; i < n_layers; i++) {
        int64_t l = n_threads > 1 ? snug_pool_next(j->pool, n_layers) : i;
        if (l < 0) break;
        snug_error e;
        if (atomic_load(&j->failed)) break;
        if (snug_mem_populate(j->kv->data, (size_t)l * j->stride + j->from, j->to - j->from, &e) != SNUG_OK &&
            atomic_exchange(&j->failed, 1) == 0)
            j->why = e;
    }
}

snug_status snug_kvcache_populate(snug_kvcache *kv, int32_t first, int32_t end, snug_pool *pool,
                                  snug_error *err)
{
    if (first < 0 || end > kv->n_blocks || first > end)
        return snug_errorf(err, SNUG_INVALID, "kv cache: blocks %d to %d of %d", first, end,
                           kv->n_blocks);
    snug_dtype dt = kv->shape.dtype;
    size_t from = snug_dtype_bytes(dt, (int64_t)kv_offset(kv, 0, first, 0, 0, 0));
    size_t to = snug_dtype_bytes(dt, (int64_t)kv_offset(kv, 0, end, 0, 0, 0));
    size_t stride = snug_dtype_bytes(dt, (int64_t)kv_offset(kv, 1, 0, 0, 0, 0)); /* one layer's blocks */
    if (to == from || kv->shape.n_layers == 0) return SNUG_OK;
    populate_job j = {.kv = kv, .pool = pool, .from = from, .to = to, .stride = stride};
    atomic_init(&j.failed, 0);
    /* each layer's range on whichever thread is free */
    if (pool && (to - from) * (size_t)kv->shape.n_layers >= POPULATE_PARALLEL_BYTES)
        snug_pool_run(pool, populate_part, &j);
    else
        populate_part(&j, 0, 1);
    if (!atomic_load(&j.failed)) return SNUG_OK;
    if (err) *err = j.why;
    return snug_error_prefix(err, j.why.status, "kv cache: ");
}

void *snug_kvcache_at(const snug_kvcache *kv, int32_t layer, int32_t block, bool v, int32_t head,
                      int32_t slot)
{
    return (char *)kv->data + snug_dtype_bytes(kv->shape.dtype, (int64_t)kv_offset(kv, layer, block, v, head, slot));
}

snug_kv_view snug_kvcache_view(const snug_kvcache *kv, int32_t layer, int32_t head,
                               const int32_t *block_table)
{
    const snug_kv_shape *s = &kv->shape;
    return (snug_kv_view){
        .k = snug_kvcache_at(kv, layer, 0, false, head, 0),
        .v = snug_kvcache_at(kv, layer, 0, true, head, 0),
        .dtype = s->dtype,
        .block_stride = 2 * (size_t)s->n_kv_heads * (size_t)s->block_size * (size_t)s->head_dim,
        .block_table = block_table,
        .block_size = s->block_size,
    };
}
