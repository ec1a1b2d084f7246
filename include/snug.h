/*
 * snug.h: the public C API of snug, an LLM inference engine that knows what
 * every byte of its memory is for.
 *
 * Conventions: functions that can fail return snug_status (SNUG_OK = 0,
 * negative codes for failures) and write a human-readable message naming the
 * file, the field and what was expected into a caller-supplied snug_error.
 * A snug_error pointer may be NULL when the caller does not want the message.
 * The library never calls exit().
 */
#ifndef SNUG_H
#define SNUG_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ---------------------------------------------------- */

typedef enum snug_status {
    SNUG_OK = 0,
    SNUG_NOMEM = -1,       /* an allocation failed or would pass the capacity */
    SNUG_IO = -2,          /* a read, write, open or stat failed */
    SNUG_FORMAT = -3,      /* a file's contents break a rule of its format */
    SNUG_INVALID = -4,     /* an argument or setting is out of range */
    SNUG_UNSUPPORTED = -5, /* valid input that snug does not handle */
    SNUG_INTERNAL = -6,    /* a broken invariant that was caught */
    SNUG_BUSY = -7         /* a bounded queue is full: try again later */
} snug_status;

/* Returns a constant name for a status code ("SNUG_NOMEM", ...); never NULL. */
const char *snug_status_str(snug_status status);

enum { SNUG_ERROR_MSG_BYTES = 1024 };

/* Where a failing call explains itself. status mirrors the return value. */
typedef struct snug_error {
    snug_status status;
    char msg[SNUG_ERROR_MSG_BYTES];
} snug_error;

/* ---- memory accounting ----------------------------------------------- */

/* What a block of memory is for. SNUG_MEM_TOTAL names the sum of all. */
typedef enum snug_mem_cat {
    SNUG_MEM_WEIGHTS = 0,
    SNUG_MEM_KV = 1,
    SNUG_MEM_ACTIVATIONS = 2,
    SNUG_MEM_STAGING = 3,
    SNUG_MEM_OTHER = 4,
    SNUG_MEM_N_CATS = 5,
    SNUG_MEM_TOTAL = SNUG_MEM_N_CATS
} snug_mem_cat;

/* Returns the category's name ("weights", "kv_cache", "activations",
 * "staging", "other", "total"); never NULL. */
const char *snug_mem_cat_name(snug_mem_cat cat);

/* Reads the bytes currently held and the peak since the last reset for one
 * category or SNUG_MEM_TOTAL. Either pointer may be NULL. When reset is true
 * the peak is set to the current value after it is read. */
void snug_mem_status(snug_mem_cat cat, size_t *cur, size_t *peak, bool reset);

/* Sets the capacity: an allocation that would take the total past it fails
 * with SNUG_NOMEM. SIZE_MAX (the initial value) means unlimited. */
void snug_mem_set_capacity(size_t bytes);

/* Returns the capacity set by snug_mem_set_capacity. */
size_t snug_mem_capacity(void);

/* Fault injection: the n-th allocation from now fails with SNUG_NOMEM (n = 1
 * is the next one). n = 0 turns injection off. Only that one allocation
 * fails; later ones succeed again. */
void snug_mem_fail_at(int64_t n);

/* The process as the kernel sees it: resident set and its high-water mark,
 * in bytes, from /proc/self/status. */
snug_status snug_proc_mem(size_t *rss, size_t *hwm, snug_error *err);

/* Resets the process high-water mark to the current resident set (writes 5
 * to /proc/self/clear_refs). Fails with SNUG_UNSUPPORTED and a message that
 * says so where the kernel does not allow it. */
snug_status snug_proc_hwm_reset(snug_error *err);

/* ---- element types ---------------------------------------------------- */

typedef enum snug_dtype {
    SNUG_DTYPE_NONE = 0,
    SNUG_DTYPE_F64, SNUG_DTYPE_F32, SNUG_DTYPE_F16, SNUG_DTYPE_BF16,
    SNUG_DTYPE_I64, SNUG_DTYPE_I32, SNUG_DTYPE_I16, SNUG_DTYPE_I8,
    SNUG_DTYPE_U64, SNUG_DTYPE_U32, SNUG_DTYPE_U16, SNUG_DTYPE_U8,
    SNUG_DTYPE_BOOL, SNUG_DTYPE_F8_E4M3, SNUG_DTYPE_F8_E5M2,
    SNUG_DTYPE_F8_E8M0, SNUG_DTYPE_C64,
    SNUG_DTYPE_COUNT
} snug_dtype;

#ifdef __cplusplus
}
#endif

#endif /* SNUG_H */
