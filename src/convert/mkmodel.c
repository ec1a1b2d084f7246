/*
 * mkmodel.c: presets of real model shapes and the streaming writer of
 * seeded random checkpoints.
 */
#include "mkmodel.h"

#include "formats/checkpoint.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/pool.h"
#include "base/sysinfo.h"
#include "model/params.h"
#include "base/rng.h"
#include "formats/st_writer.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { CHUNK_ELEMS = 1 << 20 }; /* elements generated per work item (even) */

snug_status snug_preset_config(const char *name, snug_model_config *cfg, snug_error *err)
{
    snug_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = SNUG_ARCH_LLAMA;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 10000.0;
    c.rope_scaling.type = SNUG_ROPE_DEFAULT;
    c.rope_scaling.factor = 1.0;
    c.bos_token_id = 1;
    c.n_eos = 1;
    c.eos_token_ids[0] = 2;
    c.dtype = SNUG_DTYPE_BF16;
    if (strcmp(name, "tiny") == 0) { /* stories260K */
        c.hidden_size = 64, c.intermediate_size = 172, c.n_layers = 5, c.n_heads = 8;
        c.n_kv_heads = 4, c.vocab_size = 512, c.max_position_embeddings = 512;
        c.tie_word_embeddings = true;
        c.dtype = SNUG_DTYPE_F32;
    } else if (strcmp(name, "llama-3.2-1b") == 0) {
        c.hidden_size = 2048, c.intermediate_size = 8192, c.n_layers = 16, c.n_heads = 32;
        c.n_kv_heads = 8, c.vocab_size = 128256, c.max_position_embeddings = 131072;
        c.rope_theta = 500000.0, c.tie_word_embeddings = true;
        c.rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_LLAMA3, .factor = 32.0,
                                             .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                                             .original_max_position_embeddings = 8192};
        c.bos_token_id = 128000, c.eos_token_ids[0] = 128001;
    } else if (strcmp(name, "llama-3-8b") == 0) {
        c.hidden_size = 4096, c.intermediate_size = 14336, c.n_layers = 32, c.n_heads = 32;
        c.n_kv_heads = 8, c.vocab_size = 128256, c.max_position_embeddings = 8192;
        c.rope_theta = 500000.0;
        c.bos_token_id = 128000, c.eos_token_ids[0] = 128001;
    } else if (strcmp(name, "tinyllama-1.1b") == 0) {
        c.hidden_size = 2048, c.intermediate_size = 5632, c.n_layers = 22, c.n_heads = 32;
        c.n_kv_heads = 4, c.vocab_size = 32000, c.max_position_embeddings = 2048;
    } else if (strcmp(name, "qwen2-0.5b") == 0) {
        c.arch = SNUG_ARCH_QWEN2;
        c.hidden_size = 896, c.intermediate_size = 4864, c.n_layers = 24, c.n_heads = 14;
        c.n_kv_heads = 2, c.vocab_size = 151936, c.max_position_embeddings = 32768;
        c.rms_norm_eps = 1e-6, c.rope_theta = 1000000.0, c.tie_word_embeddings = true;
        c.qkv_bias = true;
        c.bos_token_id = 151643, c.eos_token_ids[0] = 151643;
    } else if (strcmp(name, "qwen3-1.7b") == 0) {
        c.arch = SNUG_ARCH_QWEN3;
        c.hidden_size = 2048, c.intermediate_size = 6144, c.n_layers = 28, c.n_heads = 16;
        c.n_kv_heads = 8, c.vocab_size = 151936, c.max_position_embeddings = 40960;
        c.rms_norm_eps = 1e-6, c.rope_theta = 1000000.0, c.tie_word_embeddings = true;
        c.bos_token_id = 151643, c.eos_token_ids[0] = 151645;
    } else if (strcmp(name, "phi-3-mini") == 0) { /* Phi-3-mini-4k-instruct */
        c.arch = SNUG_ARCH_PHI3;
        c.hidden_size = 3072, c.intermediate_size = 8192, c.n_layers = 32, c.n_heads = 32;
        c.n_kv_heads = 32, c.vocab_size = 32064, c.max_position_embeddings = 4096;
        c.eos_token_ids[0] = 32000;
    } else if (strcmp(name, "gemma3-1b") == 0 || strcmp(name, "gemma3-4b") == 0) { /* gemma-3-1b-it, -4b-it's text */
        bool small = strcmp(name, "gemma3-1b") == 0;
        c.arch = SNUG_ARCH_GEMMA3;
        c.hidden_size = small ? 1152 : 2560, c.intermediate_size = small ? 6912 : 10240;
        c.n_layers = small ? 26 : 34, c.n_heads = small ? 4 : 8, c.n_kv_heads = small ? 1 : 4, c.head_dim = 256;
        c.vocab_size = small ? 262144 : 262208, c.max_position_embeddings = small ? 32768 : 131072;
        c.rms_norm_eps = 1e-6, c.rope_theta = 1000000.0, c.rope_local_theta = 10000.0, c.tie_word_embeddings = true;
        if (!small) c.rope_scaling = (snug_rope_scaling){.type = SNUG_ROPE_LINEAR, .factor = 8.0};
        c.sliding_window = small ? 512 : 1024, c.query_pre_attn_scalar = 256.0, c.norm_plus_one = true;
        snug_config_set_sliding(&c, 6);
        c.bos_token_id = 2, c.n_eos = 2, c.eos_token_ids[0] = 1, c.eos_token_ids[1] = 106;
    } else if (strcmp(name, "gemma2-2b") == 0) { /* gemma-2-2b-it */
        c.arch = SNUG_ARCH_GEMMA2;
        c.hidden_size = 2304, c.intermediate_size = 9216, c.n_layers = 26, c.n_heads = 8, c.n_kv_heads = 4;
        c.head_dim = 256, c.vocab_size = 256000, c.max_position_embeddings = 8192;
        c.rms_norm_eps = 1e-6, c.rope_theta = 10000.0, c.tie_word_embeddings = true;
        c.sliding_window = 4096, c.query_pre_attn_scalar = 256.0, c.norm_plus_one = true;
        c.attn_softcap = 50.0, c.final_softcap = 30.0;
        snug_config_set_sliding(&c, 2);
        c.bos_token_id = 2, c.n_eos = 2, c.eos_token_ids[0] = 1, c.eos_token_ids[1] = 107;
    } else if (strcmp(name, "mistral-7b") == 0) { /* v0.3 */
        c.arch = SNUG_ARCH_MISTRAL;
        c.hidden_size = 4096, c.intermediate_size = 14336, c.n_layers = 32, c.n_heads = 32;
        c.n_kv_heads = 8, c.vocab_size = 32768, c.max_position_embeddings = 32768;
        c.rope_theta = 1000000.0;
    } else {
        return snug_errorf(err, SNUG_INVALID, "unknown preset '%s'; presets: tiny, "
                           "llama-3.2-1b, llama-3-8b, tinyllama-1.1b, qwen2-0.5b, qwen3-1.7b, phi-3-mini, "
                           "gemma3-1b, gemma3-4b, gemma2-2b, mistral-7b", name);
    }
    snprintf(c.architecture, sizeof c.architecture, "%s", snug_arch_get(c.arch)->architecture);
    if (c.head_dim == 0) c.head_dim = c.hidden_size / c.n_heads;
    *cfg = c;
    return snug_config_validate(cfg, name, err);
}

/* One tensor to generate. */
typedef struct gen_tensor {
    snug_st_out out;
    uint64_t numel;
    uint64_t bytes;
    uint64_t key;       /* random stream */
    float mean;         /* 1 for norm weights, 0 otherwise */
    float scale;        /* standard deviation */
    int32_t shard;
    int32_t index;      /* within its shard */
} gen_tensor;

/* Fills out[0..n) (element type dt) with elements e0.. of tensor t; tmp
 * holds n floats. Element e's value depends only on the tensor's key and
 * e: a hash of (e, key) gives four uniform bytes whose sum is normal-like.
 * Chunks never cross a multiple of 2^32 elements, so the high half of e is
 * folded into the key once per call. */
static void generate(const gen_tensor *t, uint64_t e0, size_t n, snug_dtype dt, float *tmp,
                     void *out)
{
    uint32_t key = (uint32_t)snug_mix64(t->key ^ (e0 >> 32));
    uint32_t base = (uint32_t)e0;
    float mean = t->mean, scale = t->scale;
    float *f = dt == SNUG_DTYPE_F32 ? out : tmp;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint32_t x = snug_hash32((base + (uint32_t)i) * 0x9E3779B9u ^ key);
        f[i] = mean + scale * snug_rng_normalish(x);
    }
    if (dt != SNUG_DTYPE_F32) snug_convert(out, dt, tmp, SNUG_DTYPE_F32, n);
}

/* The checkpoint tensors of a model, with their generation settings. */
typedef struct gen_list {
    int32_t n;
    gen_tensor *t;
    snug_tensor_spec *specs;   /* names and shapes */
} gen_list;

static void gen_list_free(gen_list *l)
{
    snug_mem_free(l->t);
    snug_mem_free(l->specs);
}

static snug_status list_tensors(const snug_model_config *cfg, const snug_mkmodel_opts *o,
                                gen_list *out, snug_error *err)
{
    gen_list l = {0};
    snug_status st = snug_params_checkpoint_tensors(cfg, &l.specs, &l.n, err);
    if (st != SNUG_OK) return st;
    l.t = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)l.n * sizeof *l.t, err);
    if (!l.t) {
        gen_list_free(&l);
        return SNUG_NOMEM;
    }
    for (int32_t k = 0; k < l.n; k++) {
        const snug_tensor_spec *sp = &l.specs[k];
        gen_tensor *e = &l.t[k];
        e->out = (snug_st_out){.name = sp->name, .dtype = o->dtype, .n_dims = sp->n_dims,
                               .shape = {sp->rows, sp->cols}};
        e->numel = (uint64_t)sp->rows * (uint64_t)sp->cols;
        e->bytes = e->numel * snug_dtype_size(o->dtype);
        e->key = snug_rng_key(o->seed, sp->name);
        bool norm = snug_params_is_norm(sp->name);
        e->mean = norm && !cfg->norm_plus_one ? 1.0f : 0.0f; /* (Gemma's norms: 1 + w) */
        e->scale = norm || !(o->std > 0) ? 0.02f : (float)o->std;
    }
    *out = l;
    return SNUG_OK;
}

/* Assigns tensors, in order, to shards of about equal size: a tensor goes
 * to the shard where its first byte falls, except that no shard is skipped
 * and enough tensors are kept for the shards still to come, so that each of
 * the n_shards (at most one per tensor, at most 1024) holds at least one. */
static snug_status assign_shards(gen_tensor *g, int32_t n, int32_t n_shards, snug_error *err)
{
    if (n_shards > n || n_shards > SNUG_INDEX_MAX_FILES)
        return snug_errorf(err, SNUG_INVALID, "%d shards for %d tensors: at most %d", n_shards, n,
                           SNUG_MIN(n, (int32_t)SNUG_INDEX_MAX_FILES));
    uint64_t total = 0, before = 0;
    for (int32_t i = 0; i < n; i++) total += g[i].bytes;
    int32_t shard = 0, index = 0;
    for (int32_t i = 0; i < n; i++) {
        unsigned __int128 pos = (unsigned __int128)before * (unsigned)n_shards;
        int32_t by_size = total ? (int32_t)(pos / total) : 0;
        int32_t want = SNUG_MAX(SNUG_MAX(by_size, n_shards - (n - i)), shard);
        if (i > 0 && want > shard) {
            shard++;
            index = 0;
        }
        g[i].shard = shard;
        g[i].index = index++;
        before += g[i].bytes;
    }
    return SNUG_OK;
}

static void shard_name(char *buf, size_t size, int32_t shard, int32_t n_shards)
{
    if (n_shards == 1)
        snprintf(buf, size, "model.safetensors");
    else
        snprintf(buf, size, "model-%05d-of-%05d.safetensors", shard + 1, n_shards);
}

/* What the threads writing one shard share. */
typedef struct shard_job {
    snug_st_writer *w;
    const gen_tensor **members;  /* [count] the shard's tensors */
    const uint64_t *first_chunk; /* [count + 1] each member's first chunk */
    int32_t count;
    int64_t n_chunks;
    snug_dtype dtype;
    void **buffers;              /* [threads] each thread's own */
    snug_pool *pool;
    atomic_int failed;
    snug_error first_err;        /* the first failure's */
} shard_job;

/* One thread's part of write_shard: chunks taken one at a time from the
 * pool's counter, generated in the thread's buffer and written. */
static void shard_part(void *ctx, int32_t thread, int32_t n_threads)
{
    (void)n_threads;
    shard_job *j = ctx;
    size_t esize = snug_dtype_size(j->dtype);
    for (int64_t c; (c = snug_pool_next(j->pool, j->n_chunks)) >= 0;) {
        if (atomic_load(&j->failed)) break;
        int32_t lo = 0, hi = j->count; /* the member holding chunk c */
        while (hi - lo > 1) {
            int32_t mid = (lo + hi) / 2;
            if (j->first_chunk[mid] <= (uint64_t)c)
                lo = mid;
            else
                hi = mid;
        }
        const gen_tensor *t = j->members[lo];
        uint64_t e0 = ((uint64_t)c - j->first_chunk[lo]) * CHUNK_ELEMS;
        size_t ne = (size_t)SNUG_MIN((uint64_t)CHUNK_ELEMS, t->numel - e0);
        unsigned char *buf = j->buffers[thread];
        generate(t, e0, ne, j->dtype, (float *)(buf + (size_t)CHUNK_ELEMS * 4), buf);
        snug_error e;
        if (snug_st_writer_write(j->w, t->index, e0 * esize, buf, ne * esize, &e) != SNUG_OK &&
            atomic_exchange(&j->failed, 1) == 0)
            j->first_err = e;
    }
}

/* Writes one shard file: header, then data generated on the pool's threads. */
static snug_status write_shard(const gen_tensor *g, int32_t n, int32_t shard, const char *path,
                               snug_dtype dtype, snug_pool *pool, void **buffers, snug_error *err)
{
    int32_t count = 0;
    for (int32_t i = 0; i < n; i++) count += g[i].shard == shard;
    snug_st_out *list = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)count * sizeof *list, err);
    const gen_tensor **members = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)count * sizeof *members, err);
    uint64_t *first_chunk = snug_mem_alloc(SNUG_MEM_OTHER, ((size_t)count + 1) * sizeof *first_chunk, err);
    snug_st_writer *w = NULL;
    snug_status st = SNUG_OK;
    if (!list || !members || !first_chunk) {
        st = SNUG_NOMEM;
        goto done;
    }
    first_chunk[0] = 0;
    for (int32_t i = 0, k = 0; i < n; i++) {
        if (g[i].shard != shard) continue;
        members[k] = &g[i];
        list[k] = g[i].out;
        first_chunk[k + 1] = first_chunk[k] + (g[i].numel + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
        k++;
    }
    st = snug_st_writer_create(path, list, count, &w, err);
    if (st != SNUG_OK) goto done;

    shard_job j = {.w = w, .members = members, .first_chunk = first_chunk, .count = count,
                   .n_chunks = (int64_t)first_chunk[count], .dtype = dtype, .buffers = buffers,
                   .pool = pool};
    atomic_init(&j.failed, 0);
    snug_pool_run(pool, shard_part, &j);
    if (atomic_load(&j.failed)) {
        if (err) *err = j.first_err;
        st = j.first_err.status;
        snug_st_writer_abort(w);
    } else {
        st = snug_st_writer_finish(w, err);
    }
done:
    snug_mem_free(list);
    snug_mem_free((void *)members);
    snug_mem_free(first_chunk);
    return st;
}

/* Writes o (consumed; NULL means building it ran out of memory) to
 * outdir/name. */
static snug_status write_json(const char *outdir, const char *name, json_t *o, snug_error *err)
{
    char path[4096];
    snug_status st = o ? snug_path_join(path, sizeof path, outdir, name, err)
                       : snug_errorf(err, SNUG_NOMEM, "out of memory building %s", name);
    if (st == SNUG_OK) st = snug_json_write_file(o, path, err);
    json_decref(o);
    return st;
}

static snug_status write_index(const gen_tensor *g, int32_t n, int32_t n_shards,
                               const char *outdir, snug_error *err)
{
    char fname[64];
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) total += g[i].bytes;
    json_t *map = json_object();
    for (int32_t i = 0; map && i < n; i++) {
        shard_name(fname, sizeof fname, g[i].shard, n_shards);
        if (json_object_set_new(map, g[i].out.name, json_string(fname)) != 0) {
            json_decref(map);
            map = NULL;
        }
    }
    json_t *root = json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)total,
                             "weight_map", map);
    return write_json(outdir, "model.safetensors.index.json", root, err);
}

/* generation_config.json: the model's bos and eos ids. */
static json_t *generation_config(const snug_model_config *cfg)
{
    json_t *eos = json_array();
    for (int i = 0; eos && i < cfg->n_eos; i++)
        if (json_array_append_new(eos, json_integer(cfg->eos_token_ids[i])) != 0) {
            json_decref(eos);
            eos = NULL;
        }
    return json_pack("{s:o, s:i}", "eos_token_id", eos, "bos_token_id", cfg->bos_token_id);
}

/* Removes every file mkmodel writes into outdir (those that exist). */
static void remove_outputs(const char *outdir, int32_t n_shards)
{
    char path[4096], fname[64];
    for (int32_t s = 0; s < n_shards; s++) {
        shard_name(fname, sizeof fname, s, n_shards);
        if (snug_path_join(path, sizeof path, outdir, fname, NULL) == SNUG_OK) unlink(path);
    }
    const char *const others[] = {"model.safetensors.index.json", "config.json",
                                  "generation_config.json"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(others); i++)
        if (snug_path_join(path, sizeof path, outdir, others[i], NULL) == SNUG_OK) unlink(path);
}

snug_status snug_mkmodel(const snug_model_config *cfg, const snug_mkmodel_opts *opts,
                         const char *outdir, uint64_t *bytes_written, snug_error *err)
{
    snug_mkmodel_opts o = *opts;
    if (!snug_dtype_is_weight(o.dtype))
        return snug_errorf(err, SNUG_INVALID, "mkmodel writes bf16, f16 or f32 weights");
    if (o.n_shards < 1) return snug_errorf(err, SNUG_INVALID, "the shard count must be >= 1");
    if (o.n_threads <= 0) o.n_threads = snug_cpu_count();
    gen_list l = {0};
    snug_pool *pool = NULL;
    void **buffers = NULL;
    char path[4096], fname[64];
    snug_status st = list_tensors(cfg, &o, &l, err);
    if (st == SNUG_OK) st = assign_shards(l.t, l.n, o.n_shards, err);
    if (st == SNUG_OK) st = snug_pool_create(o.n_threads, 0, &pool, err);
    if (st != SNUG_OK) goto done;
    buffers = snug_mem_alloc(SNUG_MEM_STAGING, (size_t)o.n_threads * sizeof *buffers, err);
    if (!buffers) {
        st = SNUG_NOMEM;
        goto done;
    }
    for (int32_t i = 0; i < o.n_threads; i++) {
        buffers[i] = snug_mem_alloc(SNUG_MEM_STAGING, (size_t)CHUNK_ELEMS * 8, err);
        if (!buffers[i]) {
            st = SNUG_NOMEM;
            goto done;
        }
    }
    for (int32_t s = 0; s < o.n_shards; s++) {
        shard_name(fname, sizeof fname, s, o.n_shards);
        st = snug_path_join(path, sizeof path, outdir, fname, err);
        if (st == SNUG_OK) st = write_shard(l.t, l.n, s, path, o.dtype, pool, buffers, err);
        if (st != SNUG_OK) goto done;
    }
    if (o.n_shards > 1) st = write_index(l.t, l.n, o.n_shards, outdir, err);
    snug_model_config as_written = *cfg;
    as_written.dtype = o.dtype;
    if (st == SNUG_OK) st = write_json(outdir, "config.json", snug_config_to_json(&as_written), err);
    if (st == SNUG_OK) st = write_json(outdir, "generation_config.json", generation_config(cfg), err);
    if (st == SNUG_OK && bytes_written) {
        *bytes_written = 0;
        for (int32_t i = 0; i < l.n; i++) *bytes_written += l.t[i].bytes;
    }
done:
    if (st != SNUG_OK) remove_outputs(outdir, o.n_shards); /* no partial checkpoint */
    if (buffers)
        for (int32_t i = 0; i < o.n_threads; i++) snug_mem_free(buffers[i]);
    snug_mem_free(buffers);
    snug_pool_free(pool);
    gen_list_free(&l);
    return st;
}
