/*
 * mkmodel.h: synthetic checkpoints: Hugging Face model directories with
 * seeded random weights at the shapes of real models (presets), written as
 * a stream so that memory use stays small whatever the model size.
 */
#ifndef SNUG_MKMODEL_H
#define SNUG_MKMODEL_H

#include "base/common.h"
#include "formats/config.h"

/* Fills cfg with the shapes of a named preset: tiny (stories260K),
 * llama-3.2-1b, llama-3-8b, tinyllama-1.1b, qwen2-0.5b, qwen3-1.7b,
 * phi-3-mini, mistral-7b. An unknown name fails with SNUG_INVALID listing
 * the presets. */
snug_status snug_preset_config(const char *name, snug_model_config *cfg, snug_error *err);

typedef struct snug_mkmodel_opts {
    snug_dtype dtype;    /* F32, F16 or BF16 */
    int32_t n_shards;    /* 1: model.safetensors; more: model-0000k-of-0000K + index */
    uint64_t seed;
    int32_t n_threads;   /* 0: the CPUs the process may use (snug_cpu_count) */
    double std;          /* standard deviation of matrices and biases; 0: 0.02 */
} snug_mkmodel_opts;

/* Writes config.json, generation_config.json and the weights of cfg into
 * outdir (which must exist). Matrices and biases get values with standard
 * deviation opts->std (0.02 when 0), norm weights 1 +- 0.02; the value of every element depends
 * only on the seed, the tensor's name and the element's position, so the
 * same seed gives the same bytes whatever the sharding or thread count.
 * *bytes_written (may be NULL) receives the tensor bytes written. */
snug_status snug_mkmodel(const snug_model_config *cfg, const snug_mkmodel_opts *opts,
                         const char *outdir, uint64_t *bytes_written, snug_error *err);

#endif /* SNUG_MKMODEL_H */
