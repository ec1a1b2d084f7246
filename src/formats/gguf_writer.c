/*
 * gguf_writer.c: a GGUF header built in memory.
 */
#include "gguf_writer.h"

#include "gguf.h"

#include <string.h>

static void put(snug_gguf_header *h, const void *src, size_t n)
{
    if (h->p) {
        SNUG_ASSERT(h->len + n <= h->cap);
        memcpy(h->p + h->len, src, n);
    }
    h->len += n;
}

static void put_le(snug_gguf_header *h, uint64_t v, int bytes)
{
    unsigned char b[8];
    for (int i = 0; i < bytes; i++) b[i] = (unsigned char)(v >> (8 * i));
    put(h, b, (size_t)bytes);
}

static void put_str(snug_gguf_header *h, const char *s)
{
    put_le(h, strlen(s), 8);
    put(h, s, strlen(s));
}

void snug_gguf_put_start(snug_gguf_header *h, uint64_t n_tensors, uint64_t n_kv)
{
    put(h, "GGUF", 4);
    put_le(h, 3, 4);
    put_le(h, n_tensors, 8);
    put_le(h, n_kv, 8);
}

void snug_gguf_put_u32(snug_gguf_header *h, const char *key, uint32_t v)
{
    put_str(h, key);
    put_le(h, SNUG_GGUF_UINT32, 4);
    put_le(h, v, 4);
    h->n_kv++;
}

void snug_gguf_put_f32(snug_gguf_header *h, const char *key, float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    put_str(h, key);
    put_le(h, SNUG_GGUF_FLOAT32, 4);
    put_le(h, u, 4);
    h->n_kv++;
}

void snug_gguf_put_string(snug_gguf_header *h, const char *key, const char *v)
{
    put_str(h, key);
    put_le(h, SNUG_GGUF_STRING, 4);
    put_str(h, v);
    h->n_kv++;
}

void snug_gguf_put_bool(snug_gguf_header *h, const char *key, bool v)
{
    put_str(h, key);
    put_le(h, SNUG_GGUF_BOOL, 4);
    put_le(h, v ? 1 : 0, 1);
    h->n_kv++;
}

void snug_gguf_put_array(snug_gguf_header *h, const char *key, uint32_t elem_type, uint64_t n)
{
    put_str(h, key);
    put_le(h, SNUG_GGUF_ARRAY, 4);
    put_le(h, elem_type, 4);
    put_le(h, n, 8);
    h->n_kv++;
}

void snug_gguf_put_elem_string(snug_gguf_header *h, const char *s, size_t len)
{
    put_le(h, len, 8);
    put(h, s, len);
}

void snug_gguf_put_elem_f32(snug_gguf_header *h, float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    put_le(h, u, 4);
}

void snug_gguf_put_elem_i32(snug_gguf_header *h, int32_t v) { put_le(h, (uint32_t)v, 4); }

void snug_gguf_put_tensor(snug_gguf_header *h, const char *name, uint32_t n_dims, const uint64_t *ne,
                          uint32_t type, uint64_t offset)
{
    put_str(h, name);
    put_le(h, n_dims, 4);
    for (uint32_t d = 0; d < n_dims; d++) put_le(h, ne[d], 8);
    put_le(h, type, 4);
    put_le(h, offset, 8);
}

void snug_gguf_put_pad(snug_gguf_header *h, size_t align)
{
    static const unsigned char zeros[256];
    size_t n = snug_round_up(h->len, align) - h->len;
    SNUG_ASSERT(n <= sizeof zeros);
    put(h, zeros, n);
}
