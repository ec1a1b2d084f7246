/*
 * safetensors.h: a strict reader of safetensors files.
 *
 * The header is validated completely at open, before any tensor byte is
 * read: its length, its encoding, its JSON, every tensor entry and the
 * layout of the data (contiguous from 0, no gaps or overlaps, ending exactly
 * at the end of the file). Tensor bytes are then read with pread into caller
 * buffers; every read is bounds-checked against the tensor and the file, and
 * a file that shrinks while open is an error, never a crash.
 */
#ifndef SNUG_SAFETENSORS_H
#define SNUG_SAFETENSORS_H

#include "base/common.h"

enum {
    SNUG_ST_MAX_DIMS = 8,
    SNUG_ST_MAX_TENSORS = 1000000,
    SNUG_ST_MAX_NAME_BYTES = 1024,
    SNUG_ST_MIN_HEADER_BYTES = 2,
    SNUG_ST_MAX_HEADER_BYTES = 100000000
};

#define SNUG_ST_MAX_DIM_VALUE ((int64_t)1 << 48) /* shape entries are below this */

typedef struct snug_st_tensor {
    const char *name;                /* owned by the file */
    snug_dtype dtype;
    int32_t n_dims;
    int64_t shape[SNUG_ST_MAX_DIMS];
    uint64_t begin, end;             /* byte range relative to the data section */
} snug_st_tensor;

typedef struct snug_st_meta {
    const char *key, *value;         /* owned by the file */
} snug_st_meta;

typedef struct snug_st_file {
    char *path;                      /* for messages */
    int fd;
    bool owns_fd;
    uint64_t file_size;
    uint64_t data_start;             /* 8 + header length */
    int64_t n_tensors;
    snug_st_tensor *tensors;         /* sorted by name */
    int64_t n_meta;
    snug_st_meta *meta;              /* __metadata__, sorted by key */
    char *strings;                   /* names, keys and values */
} snug_st_file;

/* Opens and validates the safetensors file at path. On success *out owns an
 * open descriptor and the tensor table; close it with snug_st_close. On
 * failure the message names the file, the tensor when there is one, and the
 * rule broken. All memory is category other. */
snug_status snug_st_open(const char *path, snug_st_file **out, snug_error *err);

/* As snug_st_open, over an already open descriptor that stays the caller's
 * (snug_st_close does not close it). name is used in messages. */
snug_status snug_st_open_fd(int fd, const char *name, snug_st_file **out, snug_error *err);

/* Closes the file and frees its table; every tensor pointer from it becomes
 * invalid. NULL is ignored. */
void snug_st_close(snug_st_file *f);

/* Finds a tensor by name (binary search); NULL when absent. */
const snug_st_tensor *snug_st_find(const snug_st_file *f, const char *name);

/* Finds a __metadata__ value by key (binary search); NULL when absent. */
const char *snug_st_meta_get(const snug_st_file *f, const char *key);

/* Checks that tensor t is of a type weights load from (F32, F16, BF16);
 * any other dtype fails with SNUG_UNSUPPORTED and a message saying so. */
snug_status snug_st_check_weight(const snug_st_file *f, const snug_st_tensor *t, snug_error *err);

/* Number of elements of a tensor (validated at open not to overflow). */
uint64_t snug_st_numel(const snug_st_tensor *t);

/* Reads n bytes of tensor t, starting at byte offset `offset` within it,
 * into dst. Fails with SNUG_INVALID when the range is not inside the tensor,
 * SNUG_IO when the file cannot supply it. */
snug_status snug_st_read(const snug_st_file *f, const snug_st_tensor *t, uint64_t offset,
                         void *dst, size_t n, snug_error *err);

/* Reads n_rows segments of seg_bytes from tensor t: segment i starts at
 * byte offset + i * src_stride within the tensor and lands at dst + i *
 * dst_stride. Every segment is checked to lie inside the tensor first. */
snug_status snug_st_read_strided(const snug_st_file *f, const snug_st_tensor *t,
                                 uint64_t offset, size_t seg_bytes, size_t n_rows,
                                 uint64_t src_stride, void *dst, size_t dst_stride,
                                 snug_error *err);

/* Formats a shape as "[4096, 14336]" into buf (size bytes). Returns buf. */
char *snug_st_shape_str(const int64_t *shape, int n_dims, char *buf, size_t size);

#endif /* SNUG_SAFETENSORS_H */
