/*
 * json.h: jansson with snug's accounting allocator behind it, and field
 * readers that explain what was expected when a file breaks a rule.
 *
 * All jansson memory (parsing, building, dumping) is charged to the "other"
 * category once snug_json_init has run; every function here runs it.
 * jansson cannot survive a failed allocation, so its allocations are exempt
 * from the capacity and fault injection (see snug_mem_alloc_exempt); a parse
 * is admitted first against the capacity for its worst case, and fails
 * cleanly with SNUG_NOMEM when that does not fit.
 */
#ifndef SNUG_JSON_H
#define SNUG_JSON_H

#include "common.h"

#include <jansson.h>

/* What a parse is admitted for: snug_json_parse_bound's figure for the
 * text, a count of what jansson will allocate for it (each value, member
 * and container at its allocator cost, the lexer's buffer), plus a
 * constant. Measured against the allocator's peak in tests/test_json.c;
 * the costliest shape, "[{},{},...]" (an object and its hash table per 3
 * bytes), takes about 142 bytes per byte of text (158 where something
 * else's mallocs, libgomp's, shift glibc's chunks), never more than
 * SNUG_JSON_BYTES_PER_TEXT_BYTE (the bound's ceiling); text (long strings)
 * takes about 2, token ids about 30, chat messages about 20. */
enum { SNUG_JSON_BYTES_PER_TEXT_BYTE = 192, SNUG_JSON_BYTES_FIXED = 64 * 1024 };

/* The most allocator bytes (held at once, in the "other" category)
 * jansson can take to parse these len bytes, whatever they are (broken
 * text included): a scan of the text, no allocation. Never more than
 * len * SNUG_JSON_BYTES_PER_TEXT_BYTE + SNUG_JSON_BYTES_FIXED; SIZE_MAX
 * when that overflows. */
size_t snug_json_parse_bound(const char *buf, size_t len);

/* Routes jansson's allocations through the accounting allocator. Idempotent
 * and thread-safe; called by every function below, and by callers that
 * build JSON with jansson directly before their first use. */
void snug_json_init(void);

/* Parses len bytes as one JSON object (whitespace around it allowed) with
 * duplicate keys rejected. The parse is admitted against the capacity for
 * the most jansson can take for these bytes (snug_json_parse_bound);
 * SNUG_NOMEM when that does not fit. `name` is used in messages (a file name). On
 * success *out owns a new reference the caller must json_decref. */
snug_status snug_json_parse(const char *buf, size_t len, const char *name, json_t **out,
                            snug_error *err);

/* Reads the file at path (at most max_bytes) and parses it as
 * snug_json_parse does. */
snug_status snug_json_load_file(const char *path, size_t max_bytes, json_t **out,
                                snug_error *err);

/* Options of snug_json_load_file_opts. */
enum {
    SNUG_JSON_ANY_VALUE = 1,     /* any JSON value at the top, not only an object */
    SNUG_JSON_INTS_AS_REALS = 2  /* every integer read as a real: for files whose integers
                                  * snug does not need but that may exceed 64 bits
                                  * (tokenizer_config.json's model_max_length is often 1e30) */
};

/* As snug_json_load_file, with options (SNUG_JSON_* flags or'ed). */
snug_status snug_json_load_file_opts(const char *path, size_t max_bytes, int opts, json_t **out,
                                     snug_error *err);

/* Formats a JSON value, a scalar too (2-space indentation when pretty, else compact;
 * object keys in insertion order; reals with the fewest significant digits,
 * 15 to 17, with which every real of the value reads back exactly) into a
 * new NUL-terminated string the caller frees with snug_mem_free. NULL only
 * when jansson cannot format the value. */
char *snug_json_dumps(const json_t *value, bool pretty);

/* Writes the JSON value to path with 2-space indentation and a final
 * newline, replacing the file; on failure no file is left at path. */
snug_status snug_json_write_file(const json_t *value, const char *path, snug_error *err);

/* Field readers. Each reads obj[key] from the file called `name`:
 * absent (or null, when null_ok) leaves *out untouched and sets *present to
 * false (present may be NULL); a value of the wrong type or out of range
 * fails with SNUG_FORMAT and a message naming the file, the key, what was
 * expected and what was found. `required` makes absence an error too. */
snug_status snug_json_get_int(const json_t *obj, const char *key, const char *name,
                              bool required, int64_t lo, int64_t hi, int64_t *out,
                              bool *present, snug_error *err);
snug_status snug_json_get_real(const json_t *obj, const char *key, const char *name,
                               bool required, double lo, double hi, double *out,
                               bool *present, snug_error *err);
snug_status snug_json_get_bool(const json_t *obj, const char *key, const char *name,
                               bool required, bool *out, bool *present, snug_error *err);
/* *out points into obj's storage: valid while obj lives. */
snug_status snug_json_get_string(const json_t *obj, const char *key, const char *name,
                                 bool required, const char **out, bool *present,
                                 snug_error *err);

/* Describes a JSON value for messages ("the string \"abc\"", "an array",
 * "the number 1.5") into buf (at least 64 bytes). A string is shown as
 * snug_bytes_shown shows it (control bytes escaped, long ones cut with
 * "..."). Returns buf. */
char *snug_json_describe(const json_t *v, char *buf, size_t size);

#endif /* SNUG_JSON_H */
