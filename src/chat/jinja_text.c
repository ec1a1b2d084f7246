/*
 * jinja_text.c: the text rules of Python that rendering must follow: UTF-8
 * walking, str.isspace(), line boundaries, str.isprintable() for repr(),
 * upper/lower/title case mapping, and repr() of floats.
 *
 * Case mapping covers ASCII, Latin-1, Latin Extended-A, Cyrillic and the
 * fullwidth Latin letters exactly (Python's full mappings: "ß".upper() is
 * "SS"), and passes through the scripts and symbols that have no case (CJK,
 * kana, Hangul, Arabic, Hebrew, Indic, Thai, emoji, punctuation). Any other
 * letter (Greek, whose lower() depends on context, Latin Extended-B,
 * Armenian, ...) is reported as unknown, so that the caller fails cleanly
 * instead of rendering a wrong prompt. isprintable() knows the control,
 * format, separator and private-use characters, not unassigned ones.
 */
#include "jinja_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t jj_utf8_next(const char *p, size_t n, size_t *adv)
{
    const unsigned char *s = (const unsigned char *)p;
    uint32_t c = s[0];
    size_t len = 1;
    if (c >= 0xF0 && n >= 4) {
        c = ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
        len = 4;
    } else if (c >= 0xE0 && n >= 3) {
        c = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
        len = 3;
    } else if (c >= 0xC0 && n >= 2) {
        c = ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
        len = 2;
    }
    *adv = len;
    return c;
}

uint32_t jj_utf8_prev(const char *p, size_t n, size_t *adv)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t start = n - 1;
    while (start > 0 && n - start < 4 && (s[start] & 0xC0) == 0x80) start--;
    size_t len = 0;
    uint32_t c = jj_utf8_next(p + start, n - start, &len);
    *adv = n - start;
    return c;
}

size_t jj_utf8_put(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t jj_utf8_len(const char *p, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] & 0xC0) != 0x80) count++;
    return count;
}

size_t jj_utf8_offset(const char *p, size_t n, size_t i)
{
    size_t off = 0;
    for (size_t k = 0; k < i && off < n; k++) {
        off++;
        while (off < n && ((unsigned char)p[off] & 0xC0) == 0x80) off++;
    }
    return off;
}

bool jj_is_space(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool jj_is_linebreak(uint32_t cp)
{
    return (cp >= 0x0A && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
           cp == 0x2028 || cp == 0x2029;
}

bool jj_is_printable(uint32_t cp)
{
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
    if (cp < 0x600) return true;
    static const uint32_t ranges[][2] = {
        {0x600, 0x605}, {0x61C, 0x61C}, {0x6DD, 0x6DD}, {0x70F, 0x70F}, {0x890, 0x891},
        {0x8E2, 0x8E2}, {0x180E, 0x180E}, {0x1680, 0x1680}, {0x2000, 0x200F},
        {0x2028, 0x202F}, {0x205F, 0x2064}, {0x2066, 0x206F}, {0x3000, 0x3000},
        {0xD800, 0xF8FF}, {0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB}, {0xFFFE, 0xFFFF},
        {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3},
        {0x1D173, 0x1D17A}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(ranges); i++)
        if (cp >= ranges[i][0] && cp <= ranges[i][1]) return false;
    return true;
}

const char *jj_find_bytes(const char *hay, size_t n, const char *needle, size_t m)
{
    if (m == 0) return hay;
    for (size_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0) return hay + i;
    return NULL;
}

const char *jj_rfind_bytes(const char *hay, size_t n, const char *needle, size_t m)
{
    if (m > n) return NULL;
    for (size_t i = n - m + 1; i-- > 0;)
        if (memcmp(hay + i, needle, m) == 0) return hay + i;
    return NULL;
}

/* ---- case ----------------------------------------------------------------- */

/* Code points with no case at all (not cased, no mapping). */
static bool caseless(uint32_t cp)
{
    static const uint32_t ranges[][2] = {
        {0x0080, 0x00A9}, {0x00AB, 0x00B4}, {0x00B6, 0x00B9}, {0x00BB, 0x00BF},
        {0x00D7, 0x00D7}, {0x00F7, 0x00F7}, {0x0300, 0x0344}, {0x0346, 0x036F},
        {0x0482, 0x0489}, {0x0590, 0x08FF}, {0x0900, 0x109F}, {0x1100, 0x139F},
        {0x1400, 0x167F}, {0x2000, 0x206F}, {0x20A0, 0x20CF}, {0x2190, 0x245F},
        {0x2500, 0x2BFF}, {0x2E00, 0x2E7F}, {0x2E80, 0x2FDF}, {0x3000, 0x9FFF},
        {0xA000, 0xA4CF}, {0xAC00, 0xD7FF}, {0xE000, 0xF8FF}, {0xF900, 0xFAFF},
        {0xFB50, 0xFDFF}, {0xFE00, 0xFF20}, {0xFF3B, 0xFF40}, {0xFF5B, 0xFFFF},
        {0x1F000, 0x1F12F}, {0x1F14A, 0x1F14F}, {0x1F16A, 0x1F16F}, {0x1F18A, 0x1FBFF},
        {0x20000, 0x3FFFF}, {0xE0000, 0xE01EF}, {0xF0000, 0x10FFFF},
    };
    size_t lo = 0, hi = SNUG_ARRAY_LEN(ranges);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < ranges[mid][0])
            hi = mid;
        else if (cp > ranges[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/* Simple case of a known cased letter: 'u' upper, 'l' lower; *other gets
 * the simple mapping to the other case (itself when none). 0 if unknown. */
static int letter_case(uint32_t cp, uint32_t *other)
{
    *other = cp;
    if (cp < 0x80) {
        if (cp >= 'A' && cp <= 'Z') return *other = cp + 32, 'u';
        if (cp >= 'a' && cp <= 'z') return *other = cp - 32, 'l';
        return 0;
    }
    if (cp == 0xAA || cp == 0xBA || cp == 0xDF || cp == 0x138 || cp == 0x149) return 'l';
    if (cp == 0xB5) return *other = 0x39C, 'l';
    if ((cp >= 0xC0 && cp <= 0xDE) && cp != 0xD7) return *other = cp + 32, 'u';
    if ((cp >= 0xE0 && cp <= 0xFE) && cp != 0xF7) return *other = cp - 32, 'l';
    if (cp == 0xFF) return *other = 0x178, 'l';
    if (cp == 0x130) return *other = 'i', 'u';
    if (cp == 0x131) return *other = 'I', 'l';
    if (cp == 0x178) return *other = 0xFF, 'u';
    if (cp == 0x17F) return *other = 'S', 'l';
    if ((cp >= 0x100 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177) ||
        (cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF) ||
        (cp >= 0x4D0 && cp <= 0x52F)) {
        if (cp % 2 == 0) return *other = cp + 1, 'u';
        return *other = cp - 1, 'l';
    }
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E) ||
        (cp >= 0x4C1 && cp <= 0x4CE)) {
        if (cp % 2 == 1) return *other = cp + 1, 'u';
        return *other = cp - 1, 'l';
    }
    if (cp >= 0x400 && cp <= 0x40F) return *other = cp + 0x50, 'u';
    if (cp >= 0x410 && cp <= 0x42F) return *other = cp + 0x20, 'u';
    if (cp >= 0x430 && cp <= 0x44F) return *other = cp - 0x20, 'l';
    if (cp >= 0x450 && cp <= 0x45F) return *other = cp - 0x50, 'l';
    if (cp == 0x4C0) return *other = 0x4CF, 'u';
    if (cp == 0x4CF) return *other = 0x4C0, 'l';
    if (cp >= 0xFF21 && cp <= 0xFF3A) return *other = cp + 32, 'u';
    if (cp >= 0xFF41 && cp <= 0xFF5A) return *other = cp - 32, 'l';
    if ((cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
        (cp >= 0x1F170 && cp <= 0x1F189))
        return 'u';
    return 0;
}

int jj_case_map(uint32_t cp, jj_case mode, uint32_t out[3])
{
    uint32_t other = 0;
    int kind = letter_case(cp, &other);
    if (kind == 0) {
        if (cp < 0x80 || caseless(cp)) {
            out[0] = cp;
            return 1;
        }
        return 0;
    }
    /* Full mappings (SpecialCasing.txt) of the letters known here. */
    if (cp == 0xDF && mode != JJ_CASE_LOWER) {
        out[0] = 'S';
        out[1] = mode == JJ_CASE_UPPER ? 'S' : 's';
        return 2;
    }
    if (cp == 0x149 && mode != JJ_CASE_LOWER) {
        out[0] = 0x2BC;
        out[1] = 'N';
        return 2;
    }
    if (cp == 0x130 && mode == JJ_CASE_LOWER) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    bool want_lower = mode == JJ_CASE_LOWER;
    out[0] = (kind == 'l') == want_lower ? cp : other;
    return 1;
}

int jj_is_cased(uint32_t cp)
{
    uint32_t other;
    if (letter_case(cp, &other)) return 1;
    return cp < 0x80 || caseless(cp) ? 0 : -1;
}

int jj_is_lower(uint32_t cp)
{
    uint32_t other;
    int kind = letter_case(cp, &other);
    if (kind) return kind == 'l';
    return cp < 0x80 || caseless(cp) ? 0 : -1;
}

int jj_is_upper(uint32_t cp)
{
    uint32_t other;
    int kind = letter_case(cp, &other);
    if (kind) return kind == 'u';
    return cp < 0x80 || caseless(cp) ? 0 : -1;
}

/* ---- float repr ------------------------------------------------------------- */

/* Formats x with p significant digits as "%.{p-1}e" and reads back the
 * digits (no trailing zeros kept) and the decimal exponent. */
static void sci_digits(double x, int p, char *digits, int *n_digits, int *exp10)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.*e", p - 1, x);
    int n = 0;
    const char *s = buf;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9') digits[n++] = *s;
    *exp10 = atoi(s + 1);
    while (n > 1 && digits[n - 1] == '0') n--;
    digits[n] = '\0';
    *n_digits = n;
}

/* Parses 0.DIGITS x 10^(exp10 + 1). */
static double digits_value(const char *digits, int n, int exp10)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%c.%se%d", digits[0], n > 1 ? digits + 1 : "0", exp10);
    return strtod(buf, NULL);
}

/* Adds delta (+1 or -1) in the last digit of a p-digit string (digits
 * padded to p); returns false when the string would change length. */
static bool digits_step(char *digits, int p, int delta, int *exp10)
{
    int i = p - 1;
    if (delta > 0) {
        while (i >= 0 && digits[i] == '9') digits[i--] = '0';
        if (i < 0) {
            digits[0] = '1';
            *exp10 += 1;
            return true;
        }
        digits[i]++;
    } else {
        while (i >= 0 && digits[i] == '0') digits[i--] = '9';
        if (i < 0 || (i == 0 && digits[0] == '1' && p > 1)) return false;
        digits[i]--;
    }
    return true;
}

size_t jj_format_float(double x, char *buf)
{
    if (isnan(x)) return (size_t)sprintf(buf, "nan");
    if (isinf(x)) return (size_t)sprintf(buf, x < 0 ? "-inf" : "inf");
    if (x == 0) return (size_t)sprintf(buf, signbit(x) ? "-0.0" : "0.0");
    char digits[40];
    int n = 0, exp10 = 0;
    double ax = fabs(x);
    for (int p = 1; p <= 17; p++) {
        sci_digits(ax, p, digits, &n, &exp10);
        double back = digits_value(digits, n, exp10);
        if (back == ax) break;
        /* The nearest p-digit decimal does not read back; the one on the
         * other side of x may (Python picks the shortest that does). */
        char alt[40];
        int alt_exp = exp10;
        snprintf(alt, sizeof alt, "%s", digits);
        for (int k = n; k < p; k++) alt[k] = '0';
        alt[p] = '\0';
        if (digits_step(alt, p, back > ax ? -1 : 1, &alt_exp)) {
            int m = p;
            while (m > 1 && alt[m - 1] == '0') m--;
            alt[m] = '\0';
            if (digits_value(alt, m, alt_exp) == ax) {
                memcpy(digits, alt, (size_t)m + 1);
                n = m;
                exp10 = alt_exp;
                break;
            }
        }
    }
    char *o = buf;
    if (x < 0) *o++ = '-';
    int decpt = exp10 + 1;
    if (decpt <= -4 || decpt > 16) {
        *o++ = digits[0];
        if (n > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)n - 1);
            o += n - 1;
        }
        o += sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (decpt <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int k = 0; k < -decpt; k++) *o++ = '0';
        memcpy(o, digits, (size_t)n);
        o += n;
    } else if (decpt >= n) {
        memcpy(o, digits, (size_t)n);
        o += n;
        for (int k = n; k < decpt; k++) *o++ = '0';
        *o++ = '.';
        *o++ = '0';
    } else {
        memcpy(o, digits, (size_t)decpt);
        o += decpt;
        *o++ = '.';
        memcpy(o, digits + decpt, (size_t)(n - decpt));
        o += n - decpt;
    }
    *o = '\0';
    return (size_t)(o - buf);
}
