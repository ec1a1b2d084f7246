/*
 * gguf_writer.h: a GGUF (version 3) header built in memory: the magic and
 * counts, keys, tensor infos and the padding up to the data section. Built
 * twice with the same calls: first with no buffer (it only counts bytes and
 * keys), then into a buffer of the counted size.
 */
#ifndef SNUG_GGUF_WRITER_H
#define SNUG_GGUF_WRITER_H

#include "base/common.h"

typedef struct snug_gguf_header {
    unsigned char *p;    /* NULL: measuring */
    size_t len, cap;     /* bytes put (or counted); p's size */
    uint64_t n_kv;       /* keys put so far */
} snug_gguf_header;

/* The magic, version 3 and the counts of tensors and keys (n_kv: what the
 * measuring pass counted). */
void snug_gguf_put_start(snug_gguf_header *h, uint64_t n_tensors, uint64_t n_kv);

/* One key with a value of its type (little-endian, whatever the host). */
void snug_gguf_put_u32(snug_gguf_header *h, const char *key, uint32_t v);
void snug_gguf_put_f32(snug_gguf_header *h, const char *key, float v);
void snug_gguf_put_string(snug_gguf_header *h, const char *key, const char *v);
void snug_gguf_put_bool(snug_gguf_header *h, const char *key, bool v);

/* An array key: its name, element type (SNUG_GGUF_STRING, _FLOAT32,
 * _INT32) and count; the n elements follow, each put by the element call
 * of that type. */
void snug_gguf_put_array(snug_gguf_header *h, const char *key, uint32_t elem_type, uint64_t n);
void snug_gguf_put_elem_string(snug_gguf_header *h, const char *s, size_t len);
void snug_gguf_put_elem_f32(snug_gguf_header *h, float v);
void snug_gguf_put_elem_i32(snug_gguf_header *h, int32_t v);

/* One tensor info: name, dimensions (innermost first: a matrix of rows
 * outputs and cols inputs is {cols, rows}), ggml type and data offset. */
void snug_gguf_put_tensor(snug_gguf_header *h, const char *name, uint32_t n_dims, const uint64_t *ne,
                          uint32_t type, uint64_t offset);

/* Zeros up to the next multiple of align: where the data section starts. */
void snug_gguf_put_pad(snug_gguf_header *h, size_t align);

#endif /* SNUG_GGUF_WRITER_H */
