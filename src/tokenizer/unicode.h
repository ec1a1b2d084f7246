/*
 * unicode.h: Unicode normalization form C (NFC) of UTF-8 text, as the
 * Qwen2 tokenizers apply it before pre-tokenization.
 *
 * Text is decomposed canonically (Hangul algorithmically), combining marks
 * are put in canonical order, and the result is composed again (UAX #15).
 * Bytes that are not well-formed UTF-8 are copied unchanged and nothing
 * composes or reorders across them. The tables come from
 * tools/gen_unicode.py (src/unicode_data.c); snug_unicode_version() names
 * the Unicode version they were made from.
 */
#ifndef SNUG_UNICODE_H
#define SNUG_UNICODE_H

#include "base/common.h"

/* The Unicode version of the tables ("14.0.0"). */
const char *snug_unicode_version(void);

/* The canonical combining class of code point cp (0 for anything that is
 * not a code point). */
int snug_unicode_ccc(uint32_t cp);

/* True when the n bytes at s are certainly NFC already (every character is
 * an NFC boundary: combining class 0, unchanged by NFC, composing with
 * nothing before it; invalid bytes are kept as they are anyway). False
 * means that NFC may change them. Never allocates. */
bool snug_utf8_nfc_quick(const char *s, size_t n);

/* Buffers snug_utf8_nfc reuses from call to call (zero-initialize; free
 * with snug_nfc_buf_free). */
typedef struct snug_nfc_buf {
    char *bytes;           /* the normalized text */
    size_t cap_bytes;
    uint32_t *cps;         /* code points of the part being normalized, and room to reorder */
    size_t cap_cps;
} snug_nfc_buf;

/* Normalizes the n bytes at s to NFC into buf: *out (inside buf, valid
 * until buf's next use) receives the text and *out_len its length (at most
 * 3n). Fails only with SNUG_NOMEM, when buf cannot grow. */
snug_status snug_utf8_nfc(const char *s, size_t n, snug_nfc_buf *buf, const char **out,
                          size_t *out_len, snug_error *err);

/* Frees buf's memory and zeroes it; NULL is ignored. */
void snug_nfc_buf_free(snug_nfc_buf *buf);

#endif /* SNUG_UNICODE_H */
