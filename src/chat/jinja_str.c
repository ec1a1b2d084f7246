/*
 * jinja_str.c: Python's str methods and conversions, as templates reach
 * them through methods (.strip(), .split(), ...) and filters (trim,
 * upper, replace, int, float, ...): case mapping with full mappings,
 * whitespace by str.isspace(), split and rsplit with and without a
 * separator, splitlines' line boundaries, replace with a count, find and
 * count over code points, and int()/float() parsing with underscores.
 */
#include "jinja_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool title_sep(uint32_t cp)
{
    return cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || jj_is_space(cp);
}

/* Changes the case of s as Python's upper/lower/capitalize/title do, or
 * Jinja's title filter. */
snug_status jj_str_recase(jj_rs *rs, const jj_node *at, const jj_value *s, jj_recase mode,
                          jj_value *out)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n;
    char *buf = jj_alloc(rs, at, n * 2 + 8);
    if (!buf) return rs->err.status;
    size_t o = 0;
    bool prev_cased = false, at_word_start = true, first = true;
    for (size_t i = 0; i < n;) {
        size_t adv = 1;
        uint32_t cp = jj_utf8_next(p + i, n - i, &adv);
        jj_case want = JJ_CASE_LOWER;
        switch (mode) {
        case JJ_RC_UPPER: want = JJ_CASE_UPPER; break;
        case JJ_RC_LOWER: want = JJ_CASE_LOWER; break;
        case JJ_RC_CAPITALIZE: want = first ? JJ_CASE_TITLE : JJ_CASE_LOWER; break;
        case JJ_RC_TITLE_METHOD: want = prev_cased ? JJ_CASE_LOWER : JJ_CASE_TITLE; break;
        case JJ_RC_TITLE_FILTER: want = at_word_start ? JJ_CASE_UPPER : JJ_CASE_LOWER; break;
        }
        uint32_t mapped[3];
        int k = jj_case_map(cp, want, mapped);
        int cased = jj_is_cased(cp);
        if (k == 0 || (mode == JJ_RC_TITLE_METHOD && cased < 0))
            return jj_fail(rs, at, SNUG_UNSUPPORTED,
                           "changing the case of U+%04X is not supported", (unsigned)cp);
        for (int j = 0; j < k; j++) o += jj_utf8_put(mapped[j], buf + o);
        prev_cased = cased == 1;
        at_word_start = title_sep(cp);
        first = false;
        i += adv;
    }
    *out = jj_str(buf, o, true);
    return jj_steps(rs, at, (int64_t)(n / 16));
}

/* Code points of chars (for strip), in the arena. */
static snug_status code_points(jj_rs *rs, const jj_node *at, const jj_value *chars,
                               uint32_t **out, size_t *n)
{
    size_t count = jj_utf8_len(chars->u.s.p, chars->u.s.n);
    uint32_t *cps = jj_alloc(rs, at, (count + 1) * sizeof *cps);
    if (!cps) return rs->err.status;
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        size_t adv = 1;
        cps[i] = jj_utf8_next(chars->u.s.p + off, chars->u.s.n - off, &adv);
        off += adv;
    }
    *out = cps;
    *n = count;
    return SNUG_OK;
}

static bool strip_match(uint32_t cp, const uint32_t *set, size_t n)
{
    if (!set) return jj_is_space(cp);
    for (size_t i = 0; i < n; i++)
        if (set[i] == cp) return true;
    return false;
}

/* str.strip / lstrip / rstrip (chars NULL or none: whitespace). */
snug_status jj_str_strip(jj_rs *rs, const jj_node *at, const jj_value *s, const jj_value *chars,
                         bool left, bool right, jj_value *out)
{
    uint32_t *set = NULL;
    size_t n_set = 0;
    if (chars && chars->kind != JJ_NONE) {
        snug_status st = jj_need_str(rs, at, chars, "strip arg");
        if (st == SNUG_OK) st = code_points(rs, at, chars, &set, &n_set);
        if (st != SNUG_OK) return st;
    }
    const char *p = s->u.s.p;
    size_t a = 0, b = s->u.s.n;
    while (left && a < b) {
        size_t adv = 1;
        uint32_t cp = jj_utf8_next(p + a, b - a, &adv);
        if (!strip_match(cp, set, n_set)) break;
        a += adv;
    }
    while (right && b > a) {
        size_t adv = 1;
        uint32_t cp = jj_utf8_prev(p + a, b - a, &adv);
        if (!strip_match(cp, set, n_set)) break;
        b -= adv;
    }
    *out = jj_str(p + a, b - a, s->transient);
    return jj_steps(rs, at, (int64_t)(s->u.s.n / 16));
}

static snug_status push_sub(jj_rs *rs, const jj_node *at, jj_vlist *l, const jj_value *s, size_t a,
                            size_t b)
{
    jj_value piece = jj_str(s->u.s.p + a, b - a, s->transient);
    return jj_vlist_push(rs, at, l, &piece);
}

static bool space_at(const char *p, size_t n, size_t i, size_t *adv)
{
    uint32_t cp = jj_utf8_next(p + i, n - i, adv);
    return jj_is_space(cp);
}

/* str.split / str.rsplit. */
static snug_status split(jj_rs *rs, const jj_node *at, const jj_value *s, const jj_value *sepv,
                         const jj_value *maxv, bool from_right, jj_value *out)
{
    int64_t maxsplit = -1;
    snug_status st = SNUG_OK;
    if (maxv && (st = jj_need_int(rs, at, maxv, "maxsplit", &maxsplit)) != SNUG_OK) return st;
    if (maxsplit < 0) maxsplit = INT64_MAX;
    const char *p = s->u.s.p;
    size_t n = s->u.s.n;
    jj_vlist l = {0};
    if (!sepv || sepv->kind == JJ_NONE) {
        if (!from_right) {
            size_t i = 0, adv = 1;
            while (maxsplit-- > 0) {
                while (i < n && space_at(p, n, i, &adv)) i += adv;
                if (i == n) break;
                size_t j = i;
                while (i < n && !space_at(p, n, i, &adv)) i += adv;
                if ((st = push_sub(rs, at, &l, s, j, i)) != SNUG_OK) return st;
            }
            while (i < n && space_at(p, n, i, &adv)) i += adv;
            if (i < n && (st = push_sub(rs, at, &l, s, i, n)) != SNUG_OK) return st;
        } else {
            size_t i = n, adv = 1;
            while (maxsplit-- > 0) {
                while (i > 0 && jj_is_space(jj_utf8_prev(p, i, &adv))) i -= adv;
                if (i == 0) break;
                size_t j = i;
                while (i > 0 && !jj_is_space(jj_utf8_prev(p, i, &adv))) i -= adv;
                if ((st = push_sub(rs, at, &l, s, i, j)) != SNUG_OK) return st;
            }
            while (i > 0 && jj_is_space(jj_utf8_prev(p, i, &adv))) i -= adv;
            if (i > 0 && (st = push_sub(rs, at, &l, s, 0, i)) != SNUG_OK) return st;
        }
    } else {
        if ((st = jj_need_str(rs, at, sepv, "separator")) != SNUG_OK) return st;
        const char *sep = sepv->u.s.p;
        size_t m = sepv->u.s.n;
        if (m == 0) return jj_fail(rs, at, SNUG_INVALID, "empty separator");
        if (!from_right) {
            size_t i = 0;
            const char *hit;
            while (maxsplit-- > 0 && (hit = jj_find_bytes(p + i, n - i, sep, m)) != NULL) {
                size_t j = (size_t)(hit - p);
                if ((st = push_sub(rs, at, &l, s, i, j)) != SNUG_OK) return st;
                i = j + m;
            }
            if ((st = push_sub(rs, at, &l, s, i, n)) != SNUG_OK) return st;
        } else {
            size_t j = n;
            const char *hit;
            while (maxsplit-- > 0 && (hit = jj_rfind_bytes(p, j, sep, m)) != NULL) {
                size_t pos = (size_t)(hit - p);
                if ((st = push_sub(rs, at, &l, s, pos + m, j)) != SNUG_OK) return st;
                j = pos;
            }
            if ((st = push_sub(rs, at, &l, s, 0, j)) != SNUG_OK) return st;
        }
    }
    if (from_right) /* pieces were found right to left */
        for (size_t a = 0, b = l.n ? l.n - 1 : 0; a < b; a++, b--) {
            jj_value t = l.v[a];
            l.v[a] = l.v[b];
            l.v[b] = t;
        }
    return jj_vlist_to_value(rs, at, &l, JJ_LIST_PLAIN, out);
}

/* str.jj_str_splitlines(keepends). */
snug_status jj_str_splitlines(jj_rs *rs, const jj_node *at, const jj_value *s, bool keepends,
                              jj_vlist *l)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, i = 0;
    while (i < n) {
        size_t j = i, adv = 1;
        while (i < n && !jj_is_linebreak(jj_utf8_next(p + i, n - i, &adv))) i += adv;
        size_t eol = i;
        if (i < n) {
            if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n')
                i += 2;
            else
                i += adv;
            if (keepends) eol = i;
        }
        snug_status st = push_sub(rs, at, l, s, j, eol);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

/* str.jj_str_replace(old, new, count). */
snug_status jj_str_replace(jj_rs *rs, const jj_node *at, const jj_value *s, const jj_value *old,
                           const jj_value *new_, int64_t count, jj_value *out)
{
    const char *p = s->u.s.p, *o = old->u.s.p, *w = new_->u.s.p;
    size_t n = s->u.s.n, m = old->u.s.n, k = new_->u.s.n;
    if (count < 0) count = INT64_MAX;
    /* count the replacements first */
    size_t hits = 0;
    if (m == 0) {
        size_t chars = jj_utf8_len(p, n) + 1;
        hits = (size_t)SNUG_MIN((int64_t)chars, count);
    } else {
        for (const char *h = p; (int64_t)hits < count && (h = jj_find_bytes(h, n - (size_t)(h - p), o, m));
             h += m)
            hits++;
    }
    size_t total = n;
    if (k > m) {
        size_t extra = 0;
        if (!snug_mul_size(hits, k - m, &extra) || extra > rs->lim.output_bytes_max)
            return jj_fail_limit(rs, at, "jj_str_replace() makes a string too large");
        total += extra;
    } else {
        total -= hits * (m - k);
    }
    char *buf = jj_alloc(rs, at, total + 1);
    if (!buf) return rs->err.status;
    size_t out_n = 0, i = 0;
    for (size_t done = 0; done < hits; done++) {
        size_t j;
        if (m == 0) {
            j = i;
        } else {
            j = (size_t)(jj_find_bytes(p + i, n - i, o, m) - p);
        }
        memcpy(buf + out_n, p + i, j - i);
        out_n += j - i;
        memcpy(buf + out_n, w, k);
        out_n += k;
        if (m == 0) {
            if (j < n) {
                size_t adv = 1;
                jj_utf8_next(p + j, n - j, &adv);
                memcpy(buf + out_n, p + j, adv);
                out_n += adv;
                i = j + adv;
            } else {
                i = n;
            }
        } else {
            i = j + m;
        }
    }
    memcpy(buf + out_n, p + i, n - i);
    out_n += n - i;
    *out = jj_str(buf, out_n, true);
    return jj_steps(rs, at, (int64_t)(total / 16 + hits));
}

/* Python's ADJUST_INDICES for find/count/startswith, in code points. */
static snug_status adjust(jj_rs *rs, const jj_node *at, const jj_value *startv,
                          const jj_value *endv, int64_t len, int64_t *start, int64_t *end)
{
    *start = 0;
    *end = len;
    snug_status st = SNUG_OK;
    if (startv && startv->kind != JJ_NONE && (st = jj_need_int(rs, at, startv, "start", start)) != SNUG_OK)
        return st;
    if (endv && endv->kind != JJ_NONE && (st = jj_need_int(rs, at, endv, "end", end)) != SNUG_OK)
        return st;
    if (*end > len)
        *end = len;
    else if (*end < 0) {
        *end += len;
        if (*end < 0) *end = 0;
    }
    if (*start < 0) {
        *start += len;
        if (*start < 0) *start = 0;
    }
    return SNUG_OK;
}

/* find/count over s[start:end] (code points). */
static snug_status find_count(jj_rs *rs, const jj_node *at, const jj_value *s,
                              const jj_value *const *v, bool count, jj_value *out)
{
    snug_status st = jj_need_str(rs, at, v[0], count ? "count() argument" : "find() argument");
    if (st != SNUG_OK) return st;
    int64_t len = (int64_t)jj_utf8_len(s->u.s.p, s->u.s.n), a, b;
    if ((st = adjust(rs, at, v[1], v[2], len, &a, &b)) != SNUG_OK) return st;
    const jj_value *sub = v[0];
    if (a > len || (b - a) < (int64_t)jj_utf8_len(sub->u.s.p, sub->u.s.n)) {
        *out = jj_int(count ? 0 : -1);
        return SNUG_OK;
    }
    size_t off_a = jj_utf8_offset(s->u.s.p, s->u.s.n, (size_t)a);
    size_t off_b = jj_utf8_offset(s->u.s.p, s->u.s.n, (size_t)b);
    const char *p = s->u.s.p + off_a;
    size_t n = off_b - off_a;
    if (!count) {
        const char *hit = jj_find_bytes(p, n, sub->u.s.p, sub->u.s.n);
        *out = jj_int(hit ? a + (int64_t)jj_utf8_len(p, (size_t)(hit - p)) : -1);
        return SNUG_OK;
    }
    if (sub->u.s.n == 0) {
        *out = jj_int(b - a + 1);
        return SNUG_OK;
    }
    int64_t hits = 0;
    for (const char *h = p; (h = jj_find_bytes(h, n - (size_t)(h - p), sub->u.s.p, sub->u.s.n));
         h += sub->u.s.n)
        hits++;
    *out = jj_int(hits);
    return jj_steps(rs, at, (int64_t)(n / 16));
}

/* startswith/endswith(prefix or tuple, start, end). */
static snug_status starts_ends(jj_rs *rs, const jj_node *at, const jj_value *s,
                               const jj_value *const *v, bool ends, jj_value *out)
{
    int64_t len = (int64_t)jj_utf8_len(s->u.s.p, s->u.s.n), a, b;
    snug_status st = adjust(rs, at, v[1], v[2], len, &a, &b);
    if (st != SNUG_OK) return st;
    const jj_value *cands = v[0];
    size_t n_cands = 1;
    if (v[0]->kind == JJ_LIST && v[0]->flavor == JJ_LIST_TUPLE) {
        cands = v[0]->u.list->v;
        n_cands = v[0]->u.list->n;
    }
    *out = jj_bool(false);
    for (size_t i = 0; i < n_cands; i++) {
        const jj_value *c = &cands[i];
        if (c->kind != JJ_STR)
            return jj_fail(rs, at, SNUG_INVALID, "%s first arg must be str or a tuple of str, not %s",
                           ends ? "endswith" : "startswith", jj_type_name(c));
        int64_t clen = (int64_t)jj_utf8_len(c->u.s.p, c->u.s.n);
        if (a > len || b - a < clen) continue;
        size_t off = jj_utf8_offset(s->u.s.p, s->u.s.n, (size_t)(ends ? b - clen : a));
        if (memcmp(s->u.s.p + off, c->u.s.p, c->u.s.n) == 0) {
            *out = jj_bool(true);
            return SNUG_OK;
        }
    }
    return SNUG_OK;
}

/* sep.join(items): every item must be a str. */
snug_status jj_str_join(jj_rs *rs, const jj_node *at, const jj_value *sep,
                             const jj_value *items, size_t n, jj_value *out)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != JJ_STR)
            return jj_fail(rs, at, SNUG_INVALID, "sequence item %zu: expected str instance, %s found",
                           i, jj_type_name(&items[i]));
        total += items[i].u.s.n + (i ? sep->u.s.n : 0);
        if (total > rs->lim.output_bytes_max)
            return jj_fail_limit(rs, at, "join() makes a string too large");
    }
    char *buf = jj_alloc(rs, at, total + 1);
    if (!buf) return rs->err.status;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) {
            memcpy(buf + o, sep->u.s.p, sep->u.s.n);
            o += sep->u.s.n;
        }
        memcpy(buf + o, items[i].u.s.p, items[i].u.s.n);
        o += items[i].u.s.n;
    }
    *out = jj_str(buf, o, true);
    return jj_steps(rs, at, (int64_t)(n + total / 64));
}

/* ---- numbers from strings ------------------------------------------------------- */

/* Copies the digits of [p, p+n) without underscores into buf (size
 * bytes), checking that underscores only sit between digits of base. */
static bool strip_underscores(const char *p, size_t n, int base, char *buf, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '_') {
            if (i == 0 || i + 1 >= n || p[i - 1] == '_') return false;
            continue;
        }
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10
                : (c >= 'A' && c <= 'Z') ? c - 'A' + 10 : 99;
        if (d >= base) return false;
        if (o + 1 >= size) return false;
        buf[o++] = c;
    }
    buf[o] = '\0';
    return o > 0;
}

/* The whitespace-trimmed bytes of a str. */
static void trimmed(const jj_value *s, const char **p, size_t *n)
{
    const char *a = s->u.s.p, *b = s->u.s.p + s->u.s.n;
    size_t adv = 1;
    while (a < b && jj_is_space(jj_utf8_next(a, (size_t)(b - a), &adv))) a += adv;
    while (b > a && jj_is_space(jj_utf8_prev(a, (size_t)(b - a), &adv))) b -= adv;
    *p = a;
    *n = (size_t)(b - a);
}

/* Python's int(s, base): 1 parsed, 0 not a number, -1 too large. */
int jj_str_parse_int(const jj_value *s, int base, int64_t *out)
{
    const char *p;
    size_t n;
    trimmed(s, &p, &n);
    bool neg = false;
    if (n && (p[0] == '+' || p[0] == '-')) {
        neg = p[0] == '-';
        p++;
        n--;
    }
    if (n >= 2 && p[0] == '0') {
        char c = (char)(p[1] | 0x20);
        int prefixed = c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 0;
        if (prefixed && (base == 0 || base == prefixed)) {
            base = prefixed;
            p += 2;
            n -= 2;
            if (n && p[0] == '_') { /* 0x_1f is allowed */
                p++;
                n--;
            }
        }
    }
    if (base == 0) {
        base = 10;
        /* base 0 refuses leading zeros in decimal ("010") */
        if (n > 1 && p[0] == '0') {
            for (size_t i = 0; i < n; i++)
                if (p[i] != '0' && p[i] != '_') return 0;
        }
    }
    char buf[96];
    if (!strip_underscores(p, n, base, buf, sizeof buf)) return n >= sizeof buf - 1 ? -1 : 0;
    errno = 0;
    unsigned long long v = strtoull(buf, NULL, base);
    if (errno == ERANGE || v > (unsigned long long)INT64_MAX + (neg ? 1u : 0u)) return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

/* Python's float(s): true when s is a float literal. */
bool jj_str_parse_float(const jj_value *s, double *out)
{
    const char *p;
    size_t n;
    trimmed(s, &p, &n);
    char buf[512];
    if (n == 0 || n >= sizeof buf) return false;
    size_t i = 0, o = 0;
    if (p[i] == '+' || p[i] == '-') buf[o++] = p[i++];
    const char *rest = p + i;
    size_t rn = n - i;
    static const char *const specials[] = {"inf", "infinity", "nan"};
    for (size_t k = 0; k < SNUG_ARRAY_LEN(specials); k++) {
        if (rn == strlen(specials[k]) && strncasecmp(rest, specials[k], rn) == 0) {
            double v = k == 2 ? NAN : INFINITY;
            *out = buf[0] == '-' ? -v : v;
            return true;
        }
    }
    /* digits [. digits] [e [sign] digits], underscores between digits */
    bool digits = false, prev_digit = false;
    int part = 0; /* 0 integer, 1 fraction, 2 exponent */
    for (; i < n; i++) {
        char c = p[i];
        if (c >= '0' && c <= '9') {
            buf[o++] = c;
            digits = true;
            prev_digit = true;
        } else if (c == '_') {
            if (!prev_digit || i + 1 >= n || !(p[i + 1] >= '0' && p[i + 1] <= '9')) return false;
            prev_digit = false;
        } else if (c == '.' && part == 0) {
            buf[o++] = c;
            part = 1;
            prev_digit = false;
        } else if ((c == 'e' || c == 'E') && part < 2 && digits) {
            buf[o++] = c;
            part = 2;
            prev_digit = false;
            if (i + 1 < n && (p[i + 1] == '+' || p[i + 1] == '-')) buf[o++] = p[++i];
            if (i + 1 >= n || !(p[i + 1] >= '0' && p[i + 1] <= '9')) return false;
        } else {
            return false;
        }
    }
    if (!digits) return false;
    buf[o] = '\0';
    *out = strtod(buf, NULL);
    return true;
}

snug_status jj_str_method(jj_rs *rs, const jj_node *at, jj_fn fn, const jj_value *self,
                              const jj_args *a, jj_value *out)
{
    const jj_value *v[3] = {NULL, NULL, NULL};
    const char *what = jj_fn_name(fn);
    snug_status st = SNUG_OK;
    static const char *const none[] = {NULL};
    static const char *const chars[] = {"chars"};
    static const char *const sub3[] = {"sub", "start", "end"};
    static const char *const split_names[] = {"sep", "maxsplit"};
    static const char *const replace_names[] = {"old", "new", "count"};
    static const char *const keepends[] = {"keepends"};
    static const char *const one[] = {"value"};
    switch (fn) {
    case JJ_FN_STRIP:
    case JJ_FN_LSTRIP:
    case JJ_FN_RSTRIP:
        if ((st = jj_bind(rs, at, what, a, chars, 1, true, v)) != SNUG_OK) return st;
        return jj_str_strip(rs, at, self, v[0], fn != JJ_FN_RSTRIP, fn != JJ_FN_LSTRIP, out);
    case JJ_FN_STARTSWITH:
    case JJ_FN_ENDSWITH:
        if ((st = jj_bind(rs, at, what, a, sub3, 3, true, v)) != SNUG_OK) return st;
        if (!v[0]) return jj_fail(rs, at, SNUG_INVALID, "%s takes at least 1 argument", what);
        return starts_ends(rs, at, self, v, fn == JJ_FN_ENDSWITH, out);
    case JJ_FN_SPLIT:
    case JJ_FN_RSPLIT:
        if ((st = jj_bind(rs, at, what, a, split_names, 2, false, v)) != SNUG_OK) return st;
        return split(rs, at, self, v[0], v[1], fn == JJ_FN_RSPLIT, out);
    case JJ_FN_SPLITLINES: {
        if ((st = jj_bind(rs, at, what, a, keepends, 1, false, v)) != SNUG_OK) return st;
        jj_vlist l = {0};
        if ((st = jj_str_splitlines(rs, at, self, v[0] && jj_truthy(v[0]), &l)) != SNUG_OK) return st;
        return jj_vlist_to_value(rs, at, &l, JJ_LIST_PLAIN, out);
    }
    case JJ_FN_UPPER:
    case JJ_FN_LOWER:
    case JJ_FN_TITLE:
    case JJ_FN_CAPITALIZE:
        if ((st = jj_bind(rs, at, what, a, none, 0, true, v)) != SNUG_OK) return st;
        return jj_str_recase(rs, at, self,
                      fn == JJ_FN_UPPER ? JJ_RC_UPPER : fn == JJ_FN_LOWER ? JJ_RC_LOWER
                      : fn == JJ_FN_TITLE ? JJ_RC_TITLE_METHOD : JJ_RC_CAPITALIZE,
                      out);
    case JJ_FN_REPLACE: {
        if ((st = jj_bind(rs, at, what, a, replace_names, 3, true, v)) != SNUG_OK) return st;
        if (!v[0] || !v[1]) return jj_fail(rs, at, SNUG_INVALID, "replace expected at least 2 arguments");
        if ((st = jj_need_str(rs, at, v[0], "jj_str_replace() argument 1")) != SNUG_OK) return st;
        if ((st = jj_need_str(rs, at, v[1], "jj_str_replace() argument 2")) != SNUG_OK) return st;
        int64_t count = -1;
        if (v[2] && (st = jj_need_int(rs, at, v[2], "count", &count)) != SNUG_OK) return st;
        return jj_str_replace(rs, at, self, v[0], v[1], count, out);
    }
    case JJ_FN_FIND:
    case JJ_FN_COUNT:
        if ((st = jj_bind(rs, at, what, a, sub3, 3, true, v)) != SNUG_OK) return st;
        if (!v[0]) return jj_fail(rs, at, SNUG_INVALID, "%s takes at least 1 argument", what);
        return find_count(rs, at, self, v, fn == JJ_FN_COUNT, out);
    case JJ_FN_JOIN: {
        if ((st = jj_bind(rs, at, what, a, one, 1, true, v)) != SNUG_OK) return st;
        if (!v[0]) return jj_fail(rs, at, SNUG_INVALID, "join() takes exactly one argument");
        const jj_list *items = NULL;
        if ((st = jj_iterate(rs, at, v[0], &items)) != SNUG_OK) return st;
        return jj_str_join(rs, at, self, items->v, items->n, out);
    }
    case JJ_FN_REMOVEPREFIX:
    case JJ_FN_REMOVESUFFIX: {
        if ((st = jj_bind(rs, at, what, a, one, 1, true, v)) != SNUG_OK) return st;
        if (!v[0]) return jj_fail(rs, at, SNUG_INVALID, "%s takes exactly one argument", what);
        if ((st = jj_need_str(rs, at, v[0], what)) != SNUG_OK) return st;
        size_t n = self->u.s.n, m = v[0]->u.s.n;
        *out = *self;
        if (m <= n && fn == JJ_FN_REMOVEPREFIX && memcmp(self->u.s.p, v[0]->u.s.p, m) == 0)
            *out = jj_str(self->u.s.p + m, n - m, self->transient);
        if (m <= n && fn == JJ_FN_REMOVESUFFIX && memcmp(self->u.s.p + n - m, v[0]->u.s.p, m) == 0)
            *out = jj_str(self->u.s.p, n - m, self->transient);
        return SNUG_OK;
    }
    default: break;
    }
    return jj_fail(rs, at, SNUG_UNSUPPORTED, "calling the method '%s' is not supported", what);
}

