/*
 * unicode.h: Unicode normalization form C (NFC) of UTF-8 text, as the
 * Qwen2 tokenizers apply it before pre-tokenization.
 *
 * Text is decomposed canonically (Hangul algorithmically), combining marks
 * are put in canonical order, and the result is composed again (UAX #15).
 * Bytes that are not well-formed UTF-8 are copied unchanged and nothing
 * composes or reorders across them. The Unicode data and the decomposition
 * and composition come from utf8proc (the system's libutf8proc), working in
 * snug's buffers; snug_unicode_version() names utf8proc's Unicode version.
 */
#ifndef SNUG_UNICODE_H
#define SNUG_UNICODE_H

#include "base/common.h"

/* The Unicode version of utf8proc's data ("15.0.0" with Debian 12's
 * utf8proc 2.8.0); a static string. */
const char *snug_unicode_version(void);

/* The canonical combining class of code point cp (0 for anything that is
 * not a code point). */
int snug_unicode_ccc(uint32_t cp);

/* True when the n bytes at s are certainly NFC already (every character is
 * an NFC boundary: combining class 0, unchanged by NFC, composing with
 * nothing before it; invalid bytes are kept as they are anyway). False
 * means that NFC may change them. Never allocates. */
bool snug_utf8_nfc_quick(const char *s, size_t n);

enum { SNUG_NFC_RECENT = 256 };

/* Buffers snug_utf8_nfc reuses from call to call (zero-initialize; free
 * with snug_nfc_buf_free). One buffer is one thread's. */
typedef struct snug_nfc_buf {
    char *bytes;           /* the normalized text */
    size_t cap_bytes;
    uint32_t *cps;         /* code points of the part being normalized, and room to reorder */
    size_t cap_cps;
    /* whether recently seen characters with a canonical decomposition are
     * NFC boundaries (working it out costs a decomposition and a
     * composition, some 60 ns; text that uses such characters uses a few
     * of them again and again): by code point modulo SNUG_NFC_RECENT,
     * cp << 2 | 2 | answer, 0 when empty */
    uint32_t recent[SNUG_NFC_RECENT];
} snug_nfc_buf;

/* Normalizes the n bytes at s to NFC into buf: *out (inside buf, or s
 * itself when the text is NFC already; valid until buf's next use) receives
 * the text and *out_len its length (at most 3n). Fails with SNUG_NOMEM when
 * buf cannot grow (buf stays the caller's to free), and with SNUG_INTERNAL
 * only if utf8proc broke the bounds NFC keeps (2 code points and 3 bytes
 * per byte of text; the tests check every character). */
snug_status snug_utf8_nfc(const char *s, size_t n, snug_nfc_buf *buf, const char **out,
                          size_t *out_len, snug_error *err);

/* Frees buf's memory and zeroes it; NULL is ignored. */
void snug_nfc_buf_free(snug_nfc_buf *buf);

#endif /* SNUG_UNICODE_H */
