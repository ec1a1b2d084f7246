/*
 * pooling.h: how an embedding model pools its hidden states, as its
 * checkpoint says: sentence-transformers' modules.json (a Pooling module's
 * config.json, a Normalize module) in a Hugging Face directory, or
 * llama.cpp's {arch}.pooling_type in a GGUF file.
 */
#ifndef SNUG_POOLING_H
#define SNUG_POOLING_H

#include "base/common.h"

/* How an embedding pools the final norm's output of its prompt's tokens,
 * numbered as llama.cpp's pooling_type key: NONE, a language model (a
 * request that generates). */
typedef enum snug_pooling {
    SNUG_POOL_NONE = 0,
    SNUG_POOL_MEAN = 1,        /* every token's mean */
    SNUG_POOL_FIRST = 2,       /* the first token's (llama.cpp's cls) */
    SNUG_POOL_LAST = 3         /* the last token's (decoder embedding models) */
} snug_pooling;

typedef struct snug_pooling_info {
    snug_pooling type;
    bool normalize;            /* vectors scaled to length 1 (a Normalize module; GGUF files:
                                * always, as llama.cpp's server does) */
} snug_pooling_info;

/* The pooling of the checkpoint at path (a directory, or a .gguf file):
 * type NONE when it declares none. Fails (naming the file) for one that is
 * there but broken, a Pooling module of no mode snug serves, or a GGUF
 * reranker (pooling_type 4, rank: its head is not served). */
snug_status snug_pooling_read(const char *path, snug_pooling_info *out, snug_error *err);

#endif /* SNUG_POOLING_H */
