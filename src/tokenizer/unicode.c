/*
 * unicode.c: NFC normalization of UTF-8 (UAX #15) with utf8proc's Unicode
 * data and algorithms: utf8proc decomposes each character canonically
 * (Hangul by arithmetic), snug puts the combining marks in canonical order,
 * and utf8proc composes the result and encodes it again, in snug's buffers.
 * utf8proc_NFC and utf8proc_map are not used: they allocate with malloc,
 * outside snug's accounting allocator.
 *
 * Text is cut into chunks that normalize apart: a chunk starts at an NFC
 * boundary (a character of combining class 0 that NFC keeps and that ends
 * no composition pair), at an invalid byte, or at the start. A chunk of one
 * boundary character is copied as it is; any other is decomposed into code
 * points, reordered, composed and encoded again. Invalid bytes are copied
 * one by one and end the chunk before them (utf8proc never sees them).
 *
 * Cutting at boundaries also keeps a bug of utf8proc 2.8 away: it composes
 * an LV syllable with a following U+11A7 (which is not a trailing consonant:
 * its T index is 0) and so drops the U+11A7. U+11A7 is a boundary, so it
 * always starts a chunk and never follows a syllable inside one.
 */
#include "unicode.h"

#include "base/mem.h"

#include <string.h>
#include <utf8proc.h>

/* What utf8proc_NFC uses: canonical decomposition and composition, without
 * the composition exclusions. */
#define NFC_OPTIONS ((utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE))

enum {
    MAX_CP = 0x110000,
    /* Hangul vowel (V) and trailing consonant (T) jamo: they end the
     * algorithmic pairs L+V and LV+T, which utf8proc's tables do not list */
    HANGUL_V_FIRST = 0x1161, HANGUL_V_LAST = 0x1175,
    HANGUL_T_FIRST = 0x11A8, HANGUL_T_LAST = 0x11C2,
    /* utf8proc_property_t.comb_index: UINT16_MAX for a code point that
     * takes part in no composition pair, below this for one that starts
     * pairs, from this on for one that ends pairs */
    COMB_SECOND = 0x8000,
    /* room for one character's canonical decomposition in a boundary test
     * (the longest has 4 code points; a longer one counts as no boundary) */
    DECOMP_MAX = 8
};

/* Runs of combining marks longer than this are sorted by counting. */
enum { INSERTION_SORT_MAX = 32 };


const char *snug_unicode_version(void) { return utf8proc_unicode_version(); }

int snug_unicode_ccc(uint32_t cp)
{
    if (cp >= MAX_CP) return 0;
    return utf8proc_get_property((utf8proc_int32_t)cp)->combining_class;
}

/* cp (a code point) is an NFC boundary: combining class 0, NFC keeps it,
 * and it ends no composition pair, so text before it normalizes apart from
 * text after it. tests/test_tok_native.c checks this against utf8proc's
 * NFC for every code point. */
static bool is_boundary(uint32_t cp, uint32_t *recent)
{
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)cp);
    if (p->combining_class != 0) return false;
    if ((cp >= HANGUL_V_FIRST && cp <= HANGUL_V_LAST) ||
        (cp >= HANGUL_T_FIRST && cp <= HANGUL_T_LAST))
        return false;
    if (p->comb_index != UINT16_MAX && p->comb_index >= COMB_SECOND) return false;
    /* no canonical decomposition (none, or a compatibility one): NFC keeps it */
    if (p->decomp_seqindex == UINT16_MAX || p->decomp_type != 0) return true;
    uint32_t *slot = recent ? &recent[cp % SNUG_NFC_RECENT] : NULL;
    if (slot && (*slot >> 2) == cp && (*slot & 2)) return *slot & 1;
    /* NFC keeps it when its decomposition composes back to it (not a
     * singleton, a composition exclusion or a non-starter decomposition) */
    utf8proc_int32_t d[DECOMP_MAX];
    int boundclass = 0;
    utf8proc_ssize_t m =
        utf8proc_decompose_char((utf8proc_int32_t)cp, d, DECOMP_MAX, NFC_OPTIONS, &boundclass);
    bool keeps = false;
    if (m > 0 && m <= DECOMP_MAX) {
        m = utf8proc_normalize_utf32(d, m, NFC_OPTIONS);
        keeps = m == 1 && (uint32_t)d[0] == cp;
    }
    if (slot) *slot = cp << 2 | 2 | (uint32_t)keeps;
    return keeps;
}

/* Decodes the well-formed UTF-8 character at s (n bytes left) into *cp and
 * returns its length; 0 when s[0] does not start one. */
static size_t decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        c &= 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;   /* no overlong forms */
        if (c == 0xED) hi = 0x9F;   /* no surrogates */
        c &= 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;   /* no overlong forms */
        if (c == 0xF4) hi = 0x8F;   /* nothing above U+10FFFF */
        c &= 0x07;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    uint32_t v = c;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[k] & 0x3Fu);
    }
    *cp = v;
    return len;
}

/* snug_utf8_nfc_quick, remembering answers in recent (NULL: nowhere). */
static bool nfc_quick(const char *s, size_t n, uint32_t *recent)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = decode(p + i, n - i, &cp);
        if (k == 0) { /* an invalid byte stays as it is */
            i++;
            continue;
        }
        if (!is_boundary(cp, recent)) return false;
        i += k;
    }
    return true;
}

bool snug_utf8_nfc_quick(const char *s, size_t n) { return nfc_quick(s, n, NULL); }

/* Stable sort of a run of combining marks by combining class. */
static void sort_marks(uint32_t *cps, size_t m, uint32_t *tmp)
{
    if (m <= INSERTION_SORT_MAX) {
        for (size_t i = 1; i < m; i++) {
            uint32_t c = cps[i];
            int cc = snug_unicode_ccc(c);
            size_t k = i;
            for (; k > 0 && snug_unicode_ccc(cps[k - 1]) > cc; k--) cps[k] = cps[k - 1];
            cps[k] = c;
        }
        return;
    }
    size_t start[257] = {0}; /* counting sort: where each class starts in tmp */
    for (size_t i = 0; i < m; i++) start[snug_unicode_ccc(cps[i]) + 1]++;
    for (int c = 1; c <= 256; c++) start[c] += start[c - 1];
    for (size_t i = 0; i < m; i++) tmp[start[snug_unicode_ccc(cps[i])]++] = cps[i];
    memcpy(cps, tmp, m * sizeof *cps);
}

/* Puts every run of combining marks in canonical order (utf8proc_decompose
 * would too, but by exchanging neighbours: quadratic in a run's length). */
static void reorder(uint32_t *cps, size_t m, uint32_t *tmp)
{
    for (size_t i = 0; i < m;) {
        if (snug_unicode_ccc(cps[i]) == 0) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < m && snug_unicode_ccc(cps[j]) != 0) j++;
        if (j - i > 1) sort_marks(cps + i, j - i, tmp);
        i = j;
    }
}

/* Makes room for need elements of elem bytes at *p (the old ones are not kept). */
static snug_status reserve(void **p, size_t *cap, size_t need, size_t elem, snug_error *err)
{
    if (need <= *cap) return SNUG_OK;
    size_t c = SNUG_MAX(need, *cap * 2), bytes;
    if (!snug_mul_size(c, elem, &bytes))
        return snug_errorf(err, SNUG_NOMEM, "NFC of a text of %zu elements does not fit in memory",
                           need);
    void *n = snug_mem_alloc(SNUG_MEM_OTHER, bytes, err);
    if (!n) return SNUG_NOMEM;
    snug_mem_free(*p);
    *p = n;
    *cap = c;
    return SNUG_OK;
}

/* Normalizes one chunk (len bytes at s, all well-formed) to out, which has
 * room for 3 len bytes; *out_len receives the bytes written. */
static snug_status normalize_chunk(const unsigned char *s, size_t len, snug_nfc_buf *buf,
                                   char *out, size_t *out_len, snug_error *err)
{
    /* room for 2 code points per byte decomposed (there are at most 1.5:
     * tests/test_tok_native.c checks every character) and one more (for
     * the 4m + 1 bytes utf8proc_reencode writes over m code points), then
     * as many to reorder in */
    size_t half, need;
    if (!snug_mul_size(len, 2, &half) || !snug_add_size(half, 2, &half) ||
        !snug_mul_size(half, 2, &need))
        return snug_errorf(err, SNUG_NOMEM, "NFC of a text of %zu bytes does not fit in memory",
                           len);
    snug_status st = reserve((void **)&buf->cps, &buf->cap_cps, need, sizeof *buf->cps, err);
    if (st != SNUG_OK) return st;
    uint32_t *cps = buf->cps, *tmp = buf->cps + half;
    size_t m = 0;
    int boundclass = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += decode(s + i, len - i, &cp);
        size_t room = half - 1 - m;
        utf8proc_ssize_t r =
            utf8proc_decompose_char((utf8proc_int32_t)cp, (utf8proc_int32_t *)cps + m,
                                    (utf8proc_ssize_t)room, NFC_OPTIONS, &boundclass);
        if (r < 0 || (size_t)r > room)
            return snug_errorf(err, SNUG_INTERNAL, "NFC: utf8proc_decompose_char(U+%04X): %s", cp,
                               r < 0 ? utf8proc_errmsg(r) : "more than 2 code points per byte");
        m += (size_t)r;
    }
    reorder(cps, m, tmp);
    utf8proc_ssize_t k =
        utf8proc_reencode((utf8proc_int32_t *)cps, (utf8proc_ssize_t)m, NFC_OPTIONS);
    if (k < 0 || (size_t)k > 3 * len) /* NFC at most triples text: the tests check it too */
        return snug_errorf(err, SNUG_INTERNAL, "NFC: utf8proc_reencode of %zu bytes: %s", len,
                           k < 0 ? utf8proc_errmsg(k) : "more than 3 bytes per byte");
    memcpy(out, cps, (size_t)k);
    *out_len = (size_t)k;
    return SNUG_OK;
}

snug_status snug_utf8_nfc(const char *s, size_t n, snug_nfc_buf *buf, const char **out,
                          size_t *out_len, snug_error *err)
{
    if (nfc_quick(s, n, buf->recent)) {
        *out = s;
        *out_len = n;
        return SNUG_OK;
    }
    size_t need;
    if (!snug_mul_size(n, 3, &need) || !snug_add_size(need, 1, &need))
        return snug_errorf(err, SNUG_NOMEM, "NFC of a text of %zu bytes does not fit in memory", n);
    /* buf->bytes holds o bytes and room for 3 more for each byte left of
     * s: copying a byte or a character or normalizing a chunk keeps it so */
    snug_status st = reserve((void **)&buf->bytes, &buf->cap_bytes, need, 1, err);
    if (st != SNUG_OK) return st;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (p[i] < 0x80 && (i + 1 == n || p[i + 1] < 0x80)) { /* ASCII: boundaries */
            buf->bytes[o++] = (char)p[i++];
            continue;
        }
        uint32_t first, cp;
        size_t k = decode(p + i, n - i, &first);
        if (k == 0) { /* an invalid byte: copied, and a chunk of its own */
            buf->bytes[o++] = (char)p[i++];
            continue;
        }
        size_t j = i + k; /* the chunk: up to the next boundary or invalid byte */
        while (j < n) {
            size_t kk = decode(p + j, n - j, &cp);
            if (kk == 0 || is_boundary(cp, buf->recent)) break;
            j += kk;
        }
        if (j == i + k && is_boundary(first, buf->recent)) {
            memcpy(buf->bytes + o, p + i, k);
            o += k;
        } else {
            size_t k_out = 0;
            st = normalize_chunk(p + i, j - i, buf, buf->bytes + o, &k_out, err);
            if (st != SNUG_OK) return st;
            o += k_out;
        }
        i = j;
    }
    *out = buf->bytes;
    *out_len = o;
    return SNUG_OK;
}

void snug_nfc_buf_free(snug_nfc_buf *buf)
{
    if (!buf) return;
    snug_mem_free(buf->bytes);
    snug_mem_free(buf->cps);
    memset(buf, 0, sizeof *buf);
}
