/*
 * unicode.c: NFC normalization of UTF-8 (UAX #15): canonical decomposition
 * (tables from tools/gen_unicode.py; Hangul by arithmetic), canonical
 * ordering of combining marks, canonical composition.
 *
 * Text is cut into chunks that normalize apart: a chunk starts at an NFC
 * boundary (a character of combining class 0 that NFC keeps and that ends
 * no composition pair), at an invalid byte, or at the start. A chunk of one
 * boundary character is copied as it is; any other is decomposed into code
 * points, reordered, composed and encoded again. Invalid bytes are copied
 * one by one and end the chunk before them.
 */
#include "unicode.h"

#include "base/device.h"
#include "unicode_impl.h"

#include <string.h>

/* Hangul syllables, by arithmetic (Unicode chapter 3.12). */
enum {
    HANGUL_S = 0xAC00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11A7,
    HANGUL_L_COUNT = 19, HANGUL_V_COUNT = 21, HANGUL_T_COUNT = 28,
    HANGUL_N_COUNT = HANGUL_V_COUNT * HANGUL_T_COUNT,   /* 588 */
    HANGUL_S_COUNT = HANGUL_L_COUNT * HANGUL_N_COUNT    /* 11172 */
};

/* Runs of combining marks longer than this are sorted by counting. */
enum { INSERTION_SORT_MAX = 32 };

const char *snug_unicode_version(void) { return SNUG_UNICODE_VERSION; }

static bool is_syllable(uint32_t cp) { return cp - HANGUL_S < (uint32_t)HANGUL_S_COUNT; }

static const snug_uni_record *record(uint32_t cp)
{
    if (cp >= 0x110000) return &snug_uni_records[0];
    uint32_t block = snug_uni_stage1[cp >> SNUG_UNI_SHIFT];
    return &snug_uni_records[snug_uni_stage2[(block << SNUG_UNI_SHIFT) +
                                             (cp & ((1u << SNUG_UNI_SHIFT) - 1))]];
}

int snug_unicode_ccc(uint32_t cp) { return record(cp)->ccc; }

static bool is_boundary(uint32_t cp)
{
    return is_syllable(cp) || (record(cp)->flags & SNUG_UNI_BOUNDARY);
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

static size_t encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool snug_utf8_nfc_quick(const char *s, size_t n)
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
        if (!is_boundary(cp)) return false;
        i += k;
    }
    return true;
}

/* Appends the full canonical decomposition of cp at out; returns its length. */
static size_t decompose(uint32_t cp, uint32_t *out)
{
    if (is_syllable(cp)) {
        uint32_t s = cp - HANGUL_S, t = s % HANGUL_T_COUNT;
        out[0] = HANGUL_L + s / HANGUL_N_COUNT;
        out[1] = HANGUL_V + (s % HANGUL_N_COUNT) / HANGUL_T_COUNT;
        if (t == 0) return 2;
        out[2] = HANGUL_T + t;
        return 3;
    }
    const snug_uni_record *r = record(cp);
    if (r->decomp_len == 0) {
        out[0] = cp;
        return 1;
    }
    memcpy(out, snug_uni_decomp + r->decomp_off, r->decomp_len * sizeof *out);
    return r->decomp_len;
}

/* Stable sort of a run of combining marks by combining class. */
static void sort_marks(uint32_t *cps, size_t m, uint32_t *tmp)
{
    if (m <= INSERTION_SORT_MAX) {
        for (size_t i = 1; i < m; i++) {
            uint32_t c = cps[i];
            int cc = record(c)->ccc;
            size_t k = i;
            for (; k > 0 && record(cps[k - 1])->ccc > cc; k--) cps[k] = cps[k - 1];
            cps[k] = c;
        }
        return;
    }
    size_t start[257] = {0}; /* counting sort: where each class starts in tmp */
    for (size_t i = 0; i < m; i++) start[record(cps[i])->ccc + 1]++;
    for (int c = 1; c <= 256; c++) start[c] += start[c - 1];
    for (size_t i = 0; i < m; i++) tmp[start[record(cps[i])->ccc]++] = cps[i];
    memcpy(cps, tmp, m * sizeof *cps);
}

/* Puts every run of combining marks in canonical order. */
static void reorder(uint32_t *cps, size_t m, uint32_t *tmp)
{
    for (size_t i = 0; i < m;) {
        if (record(cps[i])->ccc == 0) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < m && record(cps[j])->ccc != 0) j++;
        if (j - i > 1) sort_marks(cps + i, j - i, tmp);
        i = j;
    }
}

/* The primary composite of a and b; false when there is none. */
static bool compose_pair(uint32_t a, uint32_t b, uint32_t *out)
{
    if (a - HANGUL_L < (uint32_t)HANGUL_L_COUNT && b - HANGUL_V < (uint32_t)HANGUL_V_COUNT) {
        *out = HANGUL_S + ((a - HANGUL_L) * HANGUL_V_COUNT + (b - HANGUL_V)) * HANGUL_T_COUNT;
        return true;
    }
    if (is_syllable(a) && (a - HANGUL_S) % HANGUL_T_COUNT == 0 && b > HANGUL_T &&
        b < (uint32_t)HANGUL_T + HANGUL_T_COUNT) {
        *out = a + (b - HANGUL_T);
        return true;
    }
    if (!(record(a)->flags & SNUG_UNI_FIRST) || !(record(b)->flags & SNUG_UNI_SECOND)) return false;
    size_t lo = 0, hi = snug_uni_n_pairs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const snug_uni_pair *p = &snug_uni_pairs[mid];
        if (p->first < a || (p->first == a && p->second < b)) {
            lo = mid + 1;
        } else if (p->first == a && p->second == b) {
            *out = p->composite;
            return true;
        } else {
            hi = mid;
        }
    }
    return false;
}

/* Canonical composition in place; returns the new length. */
static size_t compose(uint32_t *cps, size_t m)
{
    size_t w = 0, starter = SIZE_MAX;
    int last_cc = 0;
    for (size_t r = 0; r < m; r++) {
        uint32_t c = cps[r], comp;
        int cc = record(c)->ccc;
        /* c composes with the last starter unless something between blocks
         * it: a mark of its class or higher (the marks are in order, so the
         * last one has the highest), or another starter */
        if (starter != SIZE_MAX && (w == starter + 1 || last_cc < cc) &&
            compose_pair(cps[starter], c, &comp)) {
            cps[starter] = comp;
            continue;
        }
        if (cc == 0) starter = w;
        last_cc = cc;
        cps[w++] = c;
    }
    return w;
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

/* Normalizes one chunk (len bytes at s, all well-formed) to out; returns
 * the bytes written. */
static size_t normalize_chunk(const unsigned char *s, size_t len, uint32_t *cps, uint32_t *tmp,
                              char *out)
{
    size_t m = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += decode(s + i, len - i, &cp);
        m += decompose(cp, cps + m);
    }
    reorder(cps, m, tmp);
    m = compose(cps, m);
    size_t o = 0;
    for (size_t i = 0; i < m; i++) o += encode(cps[i], out + o);
    return o;
}

snug_status snug_utf8_nfc(const char *s, size_t n, snug_nfc_buf *buf, const char **out,
                          size_t *out_len, snug_error *err)
{
    if (snug_utf8_nfc_quick(s, n)) {
        *out = s;
        *out_len = n;
        return SNUG_OK;
    }
    size_t need;
    if (!snug_mul_size(n, 3, &need) || !snug_add_size(need, 1, &need))
        return snug_errorf(err, SNUG_NOMEM, "NFC of a text of %zu bytes does not fit in memory", n);
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
            if (kk == 0 || is_boundary(cp)) break;
            j += kk;
        }
        if (j == i + k && is_boundary(first)) {
            memcpy(buf->bytes + o, p + i, k);
            o += k;
        } else {
            /* at most 2 code points per byte decomposed, and as many to reorder in */
            size_t half = 2 * (j - i) + 4;
            st = reserve((void **)&buf->cps, &buf->cap_cps, 2 * half, sizeof *buf->cps, err);
            if (st != SNUG_OK) return st;
            o += normalize_chunk(p + i, j - i, buf->cps, buf->cps + half, buf->bytes + o);
        }
        i = j;
    }
    SNUG_ASSERT(o < need); /* tools/gen_unicode.py checks that NFC at most triples the bytes */
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
