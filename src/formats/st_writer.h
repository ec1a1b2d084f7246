/*
 * st_writer.h: writes safetensors files: the header first, then the tensor
 * data in any order and from any thread (each write lands at its tensor's
 * place with pwrite), so that writers can stream data they generate or
 * convert without ever holding a whole tensor.
 */
#ifndef SNUG_ST_WRITER_H
#define SNUG_ST_WRITER_H

#include "base/common.h"
#include "safetensors.h"

/* A tensor to be written: the caller's name and shape. */
typedef struct snug_st_out {
    const char *name;
    snug_dtype dtype;
    int32_t n_dims;
    int64_t shape[SNUG_ST_MAX_DIMS];
} snug_st_out;

typedef struct snug_st_writer {
    char *path;
    int fd;
    int32_t n;
    uint64_t data_start;     /* 8 + padded header length */
    uint64_t *begin, *size;  /* [n] each tensor's place in the data section */
} snug_st_writer;

/* Bytes of one tensor (element count times element size) into *bytes;
 * false when that overflows 64 bits. */
bool snug_st_out_bytes(const snug_st_out *t, uint64_t *bytes);

/* Creates path and writes the header for tensors[0..n-1], laid out in that
 * order, with __metadata__ {"format": "pt"}; the header is padded with
 * spaces to a multiple of 8 bytes. Names must be distinct. Finish with
 * snug_st_writer_finish or snug_st_writer_abort. */
snug_status snug_st_writer_create(const char *path, const snug_st_out *tensors, int32_t n,
                                  snug_st_writer **out, snug_error *err);

/* Writes n bytes of tensor i at byte offset `offset` within it. Safe to call
 * from several threads at once for different ranges. */
snug_status snug_st_writer_write(const snug_st_writer *w, int32_t i, uint64_t offset,
                                 const void *data, size_t n, snug_error *err);

/* Syncs and closes the file and frees the writer (also on failure, when
 * the file is removed). */
snug_status snug_st_writer_finish(snug_st_writer *w, snug_error *err);

/* Closes and removes the partly written file and frees the writer. NULL is
 * ignored. */
void snug_st_writer_abort(snug_st_writer *w);

#endif /* SNUG_ST_WRITER_H */
