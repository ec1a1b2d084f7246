/*
 * gguf.h: a strict reader of GGUF files (versions 2 and 3).
 *
 * Everything that comes from the file is bounds-checked before it is used:
 * counts against the bytes that remain, string and array lengths, tensor
 * dimensions and their products (overflow-checked), element types, the
 * alignment, and each tensor's data range (aligned, inside the file, not
 * overlapping another). Keys and tensor names must be unique.
 */
#ifndef SNUG_GGUF_H
#define SNUG_GGUF_H

#include "base/common.h"

typedef enum snug_gguf_type {
    SNUG_GGUF_UINT8 = 0, SNUG_GGUF_INT8 = 1, SNUG_GGUF_UINT16 = 2, SNUG_GGUF_INT16 = 3,
    SNUG_GGUF_UINT32 = 4, SNUG_GGUF_INT32 = 5, SNUG_GGUF_FLOAT32 = 6, SNUG_GGUF_BOOL = 7,
    SNUG_GGUF_STRING = 8, SNUG_GGUF_ARRAY = 9, SNUG_GGUF_UINT64 = 10, SNUG_GGUF_INT64 = 11,
    SNUG_GGUF_FLOAT64 = 12, SNUG_GGUF_N_TYPES = 13
} snug_gguf_type;

/* ggml tensor element types snug knows the size of. */
enum {
    SNUG_GGML_F32 = 0, SNUG_GGML_F16 = 1, SNUG_GGML_BF16 = 30
};

enum {
    SNUG_GGUF_MAX_DIMS = 4,
    SNUG_GGUF_MAX_KEY_BYTES = 65535,
    SNUG_GGUF_MAX_NAME_BYTES = 1024,
    SNUG_GGUF_MAX_COUNT = 1000000   /* tensors, keys */
};

typedef struct snug_gguf_kv {
    const char *key;          /* owned by the file */
    snug_gguf_type type;
    union {
        uint64_t u;           /* unsigned integers and bool */
        int64_t i;            /* signed integers */
        double f;             /* floats */
        struct {
            const char *s;    /* owned by the file, NUL-terminated */
            uint64_t len;
        } str;
        struct {
            snug_gguf_type type;
            uint64_t n;
            uint64_t offset;  /* file offset of the first element */
        } arr;
    } v;
} snug_gguf_kv;

typedef struct snug_gguf_tensor {
    const char *name;         /* owned by the file */
    uint32_t n_dims;
    uint64_t ne[SNUG_GGUF_MAX_DIMS]; /* ne[0] is the fastest-varying dimension */
    uint32_t type;            /* ggml type */
    uint64_t offset;          /* relative to the data section */
    uint64_t bytes;
} snug_gguf_tensor;

typedef struct snug_gguf_file {
    char *path;
    int fd;
    bool owns_fd;
    uint64_t file_size;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_start;
    int64_t n_kv;
    snug_gguf_kv *kv;         /* in file order */
    int64_t n_tensors;
    snug_gguf_tensor *tensors; /* in file order */
    const snug_gguf_tensor **by_name; /* the same, sorted by name */
    char *strings;
} snug_gguf_file;

/* Opens and validates a GGUF file. Close with snug_gguf_close. Messages
 * name the file, the key or tensor, and the rule broken. */
snug_status snug_gguf_open(const char *path, snug_gguf_file **out, snug_error *err);

/* As snug_gguf_open over a descriptor the caller keeps; name is for
 * messages. */
snug_status snug_gguf_open_fd(int fd, const char *name, snug_gguf_file **out, snug_error *err);

/* Closes the file and frees it; NULL is ignored. */
void snug_gguf_close(snug_gguf_file *f);

/* Finds a key; NULL when absent. */
const snug_gguf_kv *snug_gguf_find(const snug_gguf_file *f, const char *key);

/* Finds a tensor (binary search); NULL when absent. */
const snug_gguf_tensor *snug_gguf_find_tensor(const snug_gguf_file *f, const char *name);

/* Reads an integer key of any integer type into [lo, hi]. Absent: *present
 * false (present may be NULL) and *out untouched, or an error when
 * required. */
snug_status snug_gguf_get_int(const snug_gguf_file *f, const char *key, bool required,
                              int64_t lo, int64_t hi, int64_t *out, bool *present,
                              snug_error *err);

/* Reads a float key (FLOAT32 or FLOAT64) that must be finite and in [lo, hi]. */
snug_status snug_gguf_get_float(const snug_gguf_file *f, const char *key, bool required,
                                double lo, double hi, double *out, bool *present,
                                snug_error *err);

/* Reads a string key; *out stays owned by the file. */
snug_status snug_gguf_get_string(const snug_gguf_file *f, const char *key, bool required,
                                 const char **out, bool *present, snug_error *err);

/* The tensor types a GGUF model may hold, as messages list them. */
#define SNUG_GGUF_MODEL_TYPES "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K"

/* The name of a ggml element type ("F32", "Q4_K", "IQ2_XS", ...; "unknown"). */
const char *snug_ggml_type_name(uint32_t type);

#endif /* SNUG_GGUF_H */
