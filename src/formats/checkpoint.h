/*
 * checkpoint.h: a Hugging Face model directory: config.json, the shard
 * index (model.safetensors.index.json) or the single model.safetensors, and
 * which file holds which tensor.
 */
#ifndef SNUG_CHECKPOINT_H
#define SNUG_CHECKPOINT_H

#include "base/common.h"
#include "config.h"
#include "safetensors.h"

enum { SNUG_INDEX_MAX_FILES = 1024, SNUG_INDEX_MAX_FILE_NAME = 255 };

/* A parsed model.safetensors.index.json. */
typedef struct snug_index_entry {
    const char *tensor;  /* owned by the index */
    int32_t file;        /* into files[] */
} snug_index_entry;

typedef struct snug_index {
    int64_t n_entries;
    snug_index_entry *entries; /* sorted by tensor name */
    int32_t n_files;
    const char **files;        /* distinct shard file names, sorted */
    char *strings;
} snug_index;

/* Parses index JSON text (len bytes; name is for messages): a weight_map
 * object mapping each tensor name (1 to 1,024 bytes, each once) to a plain
 * file name in the same directory (no '/', not '.' or '..', not absolute, at
 * most 255 bytes), with at most 1,024 distinct files. The caller frees *out
 * with snug_index_free. */
snug_status snug_index_parse(const char *text, size_t len, const char *name, snug_index **out,
                             snug_error *err);

/* Frees an index; NULL is ignored. */
void snug_index_free(snug_index *index);

typedef struct snug_ckpt_entry {
    const snug_st_tensor *tensor; /* owned by files[file] */
    int32_t file;
} snug_ckpt_entry;

typedef struct snug_checkpoint {
    char *dir;                    /* the directory, or the GGUF file */
    bool gguf;                    /* a GGUF file: config from its keys, no config.json */
    snug_model_config config;
    bool sharded;                 /* has an index */
    int32_t n_files;
    snug_st_file **files;
    int64_t n_tensors;
    snug_ckpt_entry *entries;     /* every tensor of every file, sorted by name */
    int32_t text_names;           /* a multimodal checkpoint's (config.multimodal) naming of its
                                   * text model: 0 none (names as they are), 1 "language_model."
                                   * before them (the Hub's Gemma 3 files), 2 "model.language_model."
                                   * for "model." (transformers' newer saving) */
    int64_t n_vision;             /* tensors of the vision tower (not loaded: snug runs the
                                   * text model) ... */
    uint64_t vision_bytes;        /* ... and their bytes */
} snug_checkpoint;

/* Opens the model directory dir: reads config.json, then the index and
 * every shard it names (checking that each shard exists and holds exactly
 * the tensors the index assigns to it), or model.safetensors when there is
 * no index. dir may also be a GGUF file of the llama architecture: its
 * configuration from its keys, its tensors under their Hugging Face names
 * (F32, F16, BF16 and the block formats of base/quant.h, whose dtypes are
 * SNUG_DTYPE_Q8_0 ...; q and k rows stay in llama.cpp's interleaved rotary
 * order, config.rope_interleaved). Close with snug_checkpoint_close. */
snug_status snug_checkpoint_open(const char *dir, snug_checkpoint **out, snug_error *err);

/* Closes every file and frees the checkpoint; NULL is ignored. */
void snug_checkpoint_close(snug_checkpoint *ck);

/* Finds a tensor by its Hugging Face text-model name ("model.layers.0..."),
 * as a multimodal checkpoint stores it; NULL when absent. When found and
 * file is not NULL, *file is set to the file that holds it. */
const snug_st_tensor *snug_checkpoint_find(const snug_checkpoint *ck, const char *name,
                                           const snug_st_file **file);

/* The text-model name of the tensor ck stores as `stored` into buf (size
 * bytes; what snug_checkpoint_find takes), or NULL for a tensor outside
 * the text model (a multimodal checkpoint's vision tower and projector). */
const char *snug_checkpoint_text_name(const snug_checkpoint *ck, const char *stored, char *buf, size_t size);

/* The element type of tensor `name` of checkpoint ck (a const
 * snug_checkpoint *, as a void * so that it serves as model/params.h's
 * snug_source_dtype_fn); SNUG_DTYPE_NONE when ck has no such tensor. */
snug_dtype snug_checkpoint_tensor_dtype(void *ck, const char *name);

/* The element type weights load in when none is asked for: config.json's
 * torch_dtype when it names one, otherwise the type of the embedding tensor
 * when it is a weight type, otherwise F32. */
snug_dtype snug_checkpoint_weight_dtype(const snug_checkpoint *ck);

#endif /* SNUG_CHECKPOINT_H */
