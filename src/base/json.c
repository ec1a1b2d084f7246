/*
 * json.c: jansson behind the accounting allocator, and typed field readers
 * with messages that name the file, the field and what was expected.
 */
#include "json.h"

#include "mem.h"
#include "fileio.h"

#include <math.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* jansson corrupts its lexer when an allocation fails mid-parse, so its
 * allocations are exempt from failing; parses are admitted beforehand. */
static void *json_alloc_hook(size_t n) { return snug_mem_alloc_exempt(SNUG_MEM_OTHER, n); }
static void json_free_hook(void *p) { snug_mem_free(p); }

static pthread_once_t g_json_once = PTHREAD_ONCE_INIT;

static void json_install_hooks(void) { json_set_alloc_funcs(json_alloc_hook, json_free_hook); }

void snug_json_init(void) { pthread_once(&g_json_once, json_install_hooks); }

/* What jansson 2.14 allocates while parsing (jansson_private.h, hashtable.c,
 * strbuffer.c, load.c), rounded up a little: each value's struct; a new
 * object's 8 hash buckets of 16 bytes, doubled when its members reach their
 * number (old and new held for a moment); a new array's 8 entries of 8
 * bytes, doubled when full (the same); a member's pair (its key copied in);
 * a string's text; the lexer's token buffer (16 bytes, doubled as a token
 * grows) and a key's text for a moment. true, false and null are shared. */
enum {
    J_OBJECT = 80, J_ARRAY = 48, J_STRING = 40, J_NUMBER = 32, J_PAIR = 64,
    J_BUCKET = 16, J_ENTRY = 8, J_FIRST = 8, J_TOKEN_MIN = 16,
    J_MAX_DEPTH = 2048 + 1 /* jansson refuses deeper text: nothing past it is made */
};

static size_t held(size_t n) { return snug_mem_held_bytes(n); }

/* The bytes a container of n entries of `entry` bytes holds at its largest:
 * its table (8 entries, doubled while fewer than n fit), with the one
 * before it while it is copied. */
static size_t table_bytes(size_t n, size_t entry)
{
    size_t cap = J_FIRST;
    while (cap < n && cap <= SIZE_MAX / 4 / entry) cap *= 2;
    return held(cap * entry) + (cap > J_FIRST ? held(cap / 2 * entry) : 0);
}

static bool json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static bool json_delim(unsigned char c)
{
    return json_space(c) || c == ',' || c == ':' || c == '[' || c == ']' || c == '{' || c == '}' ||
           c == '"';
}

size_t snug_json_parse_bound(const char *buf, size_t len)
{
    size_t cap = SIZE_MAX;
    if (len < (SIZE_MAX - SNUG_JSON_BYTES_FIXED) / SNUG_JSON_BYTES_PER_TEXT_BYTE)
        cap = len * SNUG_JSON_BYTES_PER_TEXT_BYTE + SNUG_JSON_BYTES_FIXED;
    size_t count[J_MAX_DEPTH];     /* entries of each open container */
    bool object[J_MAX_DEPTH];
    size_t depth = 0, total = SNUG_JSON_BYTES_FIXED, longest = 0, longest_key = 0, pending = 0;
    bool string_pending = false;   /* a string has ended: a key if a colon follows */
    /* sums cannot overflow: each term is at most a few times len */
#define ENTRY()                                                                                    \
    do {                                                                                           \
        if (depth > 0 && depth <= J_MAX_DEPTH && !object[depth - 1]) count[depth - 1]++;          \
    } while (0)
    for (size_t i = 0; i < len && total < cap;) {
        unsigned char c = (unsigned char)buf[i];
        if (json_space(c)) {
            i++;
            continue;
        }
        if (string_pending) {
            string_pending = false;
            if (c == ':') {
                total += held(J_PAIR + pending + 1);
                longest_key = SNUG_MAX(longest_key, pending);
                if (depth > 0 && depth <= J_MAX_DEPTH && object[depth - 1]) count[depth - 1]++;
            } else {
                total += held(J_STRING) + held(pending + 1);
                ENTRY();
            }
        }
        size_t j = i + 1;
        if (c == '"') {
            while (j < len && buf[j] != '"') j += buf[j] == '\\' ? 2 : 1;
            j = SNUG_MIN(j + 1, len);
            pending = j - i; /* the lexer keeps the quotes with the text */
            string_pending = true;
        } else if (c == '{' || c == '[') {
            ENTRY();
            if (depth < J_MAX_DEPTH) {
                count[depth] = 0;
                object[depth] = c == '{';
            }
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth > 0) {
                depth--;
                if (depth < J_MAX_DEPTH)
                    total += object[depth] ? held(J_OBJECT) + table_bytes(count[depth], J_BUCKET)
                                           : held(J_ARRAY) + table_bytes(count[depth], J_ENTRY);
            }
        } else if (c != ',' && c != ':') { /* a number, a literal, or broken text */
            while (j < len && !json_delim((unsigned char)buf[j])) j++;
            if (c != 't' && c != 'f' && c != 'n') total += held(J_NUMBER);
            pending = j - i;
            ENTRY();
        }
        if (c != '"') longest = SNUG_MAX(longest, j - i);
        else longest = SNUG_MAX(longest, pending);
        i = j;
    }
#undef ENTRY
    if (string_pending) total += held(J_STRING) + held(pending + 1);
    for (; depth > 0; depth--) /* left open: held until the parse fails */
        if (depth <= J_MAX_DEPTH)
            total += object[depth - 1] ? held(J_OBJECT) + table_bytes(count[depth - 1], J_BUCKET)
                                       : held(J_ARRAY) + table_bytes(count[depth - 1], J_ENTRY);
    size_t token = J_TOKEN_MIN; /* the lexer's buffer: doubled past the longest token */
    while (token <= longest + 1 && token <= SIZE_MAX / 4) token *= 2;
    total += held(token) + held(token / 2) + held(longest_key + 1);
    return SNUG_MIN(total, cap);
}

static snug_status parse_flags(const char *buf, size_t len, const char *name, size_t flags,
                               json_t **out, snug_error *err)
{
    snug_json_init();
    size_t worst = snug_json_parse_bound(buf, len);
    snug_status st = snug_mem_admit(SNUG_MEM_OTHER, worst, err);
    if (st != SNUG_OK)
        return snug_error_prefix(err, st, "%s: parsing %zu bytes of JSON: ", name, len);
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | flags, &jerr);
    if (!root)
        return snug_errorf(err, SNUG_FORMAT, "%s: not valid JSON: line %d, column %d: %s", name,
                           jerr.line, jerr.column, jerr.text);
    if (!(flags & JSON_DECODE_ANY) && !json_is_object(root)) {
        char d[64];
        snug_json_describe(root, d, sizeof d);
        json_decref(root);
        return snug_errorf(err, SNUG_FORMAT, "%s: expected a JSON object at the top, found %s",
                           name, d);
    }
    *out = root;
    return SNUG_OK;
}

snug_status snug_json_parse(const char *buf, size_t len, const char *name, json_t **out,
                            snug_error *err)
{
    return parse_flags(buf, len, name, 0, out, err);
}

static snug_status load_flags(const char *path, size_t max_bytes, size_t flags, json_t **out,
                              snug_error *err)
{
    char *buf = NULL;
    size_t len = 0;
    snug_status st = snug_file_read_all(path, max_bytes, &buf, &len, err);
    if (st != SNUG_OK) return st;
    st = parse_flags(buf, len, path, flags, out, err);
    snug_mem_free(buf);
    return st;
}

snug_status snug_json_load_file(const char *path, size_t max_bytes, json_t **out,
                                snug_error *err)
{
    return load_flags(path, max_bytes, 0, out, err);
}

snug_status snug_json_load_file_opts(const char *path, size_t max_bytes, int opts, json_t **out,
                                     snug_error *err)
{
    size_t flags = (opts & SNUG_JSON_ANY_VALUE ? JSON_DECODE_ANY : 0) |
                   (opts & SNUG_JSON_INTS_AS_REALS ? JSON_DECODE_INT_AS_REAL : 0);
    return load_flags(path, max_bytes, flags, out, err);
}

/* The fewest significant digits (15 to 17) with which every real in v
 * prints as a string that reads back as the same double. */
static int real_precision(const json_t *v)
{
    int need = 15;
    if (json_is_real(v)) {
        double x = json_real_value(v);
        char buf[64];
        for (; need < 17; need++) {
            snprintf(buf, sizeof buf, "%.*g", need, x);
            if (strtod(buf, NULL) == x) break;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            need = SNUG_MAX(need, real_precision(json_array_get(v, i)));
    } else if (json_is_object(v)) {
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)v, key, item) need = SNUG_MAX(need, real_precision(item));
    }
    return need;
}

char *snug_json_dumps(const json_t *value, bool pretty)
{
    snug_json_init();
    size_t flags = (pretty ? JSON_INDENT(2) : JSON_COMPACT) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY |
                   JSON_REAL_PRECISION(real_precision(value));
    return json_dumps(value, flags);
}

snug_status snug_json_write_file(const json_t *value, const char *path, snug_error *err)
{
    char *text = snug_json_dumps(value, true);
    if (!text) return snug_errorf(err, SNUG_INTERNAL, "%s: jansson could not format JSON", path);
    int fd = -1;
    size_t n = strlen(text);
    snug_status st = snug_file_create(path, &fd, err);
    if (st == SNUG_OK) st = snug_pwrite_full(fd, text, n, 0, path, err);
    if (st == SNUG_OK) st = snug_pwrite_full(fd, "\n", 1, n, path, err);
    if (st == SNUG_OK) {
        st = snug_file_close(fd, path, err);
    } else if (fd >= 0) {
        close(fd);
    }
    if (st != SNUG_OK && fd >= 0) unlink(path); /* no partial file is left */
    snug_mem_free(text);
    return st;
}

char *snug_json_describe(const json_t *v, char *buf, size_t size)
{
    if (!v) {
        snprintf(buf, size, "nothing");
    } else if (json_is_string(v)) { /* a file's or a client's bytes: escaped, cut at 44 */
        char shown[48];
        snprintf(buf, size, "the string \"%s\"",
                 snug_bytes_shown(json_string_value(v), json_string_length(v), shown, sizeof shown));
    } else if (json_is_integer(v)) {
        snprintf(buf, size, "the integer %lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        snprintf(buf, size, "the number %.17g", json_real_value(v));
    } else if (json_is_true(v) || json_is_false(v)) {
        snprintf(buf, size, "%s", json_is_true(v) ? "true" : "false");
    } else if (json_is_null(v)) {
        snprintf(buf, size, "null");
    } else if (json_is_array(v)) {
        snprintf(buf, size, "an array of %zu", json_array_size(v));
    } else {
        snprintf(buf, size, "an object");
    }
    return buf;
}

/* Looks up key; returns NULL (and present = false) when it is absent, or
 * null and null counts as absent. */
static const json_t *field(const json_t *obj, const char *key, bool *present)
{
    const json_t *v = json_object_get(obj, key);
    if (v && json_is_null(v)) v = NULL;
    if (present) *present = v != NULL;
    return v;
}

static snug_status missing(const char *name, const char *key, const char *what, snug_error *err)
{
    return snug_errorf(err, SNUG_FORMAT, "%s: field '%s' is missing; expected %s", name, key,
                       what);
}

static snug_status wrong(const char *name, const char *key, const char *what, const json_t *v,
                         snug_error *err)
{
    char d[96];
    snug_json_describe(v, d, sizeof d);
    return snug_errorf(err, SNUG_FORMAT, "%s: field '%s': expected %s, found %s", name, key,
                       what, d);
}

snug_status snug_json_get_int(const json_t *obj, const char *key, const char *name,
                              bool required, int64_t lo, int64_t hi, int64_t *out,
                              bool *present, snug_error *err)
{
    char what[96];
    snprintf(what, sizeof what, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    const json_t *v = field(obj, key, present);
    if (!v) return required ? missing(name, key, what, err) : SNUG_OK;
    if (!json_is_integer(v)) return wrong(name, key, what, v, err);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return wrong(name, key, what, v, err);
    *out = x;
    return SNUG_OK;
}

snug_status snug_json_get_real(const json_t *obj, const char *key, const char *name,
                               bool required, double lo, double hi, double *out,
                               bool *present, snug_error *err)
{
    char what[96];
    snprintf(what, sizeof what, "a number in [%g, %g]", lo, hi);
    const json_t *v = field(obj, key, present);
    if (!v) return required ? missing(name, key, what, err) : SNUG_OK;
    if (!json_is_number(v)) return wrong(name, key, what, v, err);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) return wrong(name, key, what, v, err);
    *out = x;
    return SNUG_OK;
}

snug_status snug_json_get_bool(const json_t *obj, const char *key, const char *name,
                               bool required, bool *out, bool *present, snug_error *err)
{
    const json_t *v = field(obj, key, present);
    if (!v) return required ? missing(name, key, "true or false", err) : SNUG_OK;
    if (!json_is_boolean(v)) return wrong(name, key, "true or false", v, err);
    *out = json_is_true(v);
    return SNUG_OK;
}

snug_status snug_json_get_string(const json_t *obj, const char *key, const char *name,
                                 bool required, const char **out, bool *present,
                                 snug_error *err)
{
    const json_t *v = field(obj, key, present);
    if (!v) return required ? missing(name, key, "a string", err) : SNUG_OK;
    if (!json_is_string(v)) return wrong(name, key, "a string", v, err);
    *out = json_string_value(v);
    return SNUG_OK;
}
