/*
 * gbnf.c: GBNF text to a snug_grammar (grammar.h). A recursive-descent
 * parser (its nesting bounded) writes each rule's elements as it reads
 * them; groups and repetitions become rules of their own, classes over
 * code points their UTF-8 byte ranges. A reference by name is kept as an
 * occurrence; once the text is read, definitions and references are
 * sorted by name (no hash to aim at) and resolved. Then the root must
 * exist, no rule may reach itself before reading a byte, alternatives
 * that begin alike are merged (a trie: a list of literals costs the
 * matcher one stack, not one per literal), and no rule may begin more
 * alternatives at once than SNUG_GRAMMAR_WIDTH_MAX. Every step is linear
 * or n log n in the text. All memory is the accounting allocator's
 * (category other), at most SNUG_GRAMMAR_BYTES_MAX of it.
 */
#include "grammar.h"

#include "base/mem.h"
#include "base/hash.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing array of elements of esize bytes. */
typedef struct vec {
    void *p;
    int32_t n, cap;
} vec;

/* One rule while parsing. A made rule (group, repetition, class) has no
 * name: at says where it came from. */
typedef struct prule {
    vec elems;           /* snug_gelem */
    const char *name;    /* into the text; NULL for a made rule */
    int32_t name_len;
    size_t at;           /* where it was defined (or made) */
    const char *made_as; /* "group", "repetition", "class" */
} prule;

/* A rule name where the text defines it (rule >= 0) or refers to it
 * (rule -1; its REF elements hold -(index + 1) until resolved). */
typedef struct name_use {
    const char *name; /* into the text */
    int32_t len;
    int32_t rule;
    int32_t index;    /* among the uses, in the order read */
    size_t at;
} name_use;

typedef struct parser {
    const char *s;
    size_t n, pos;
    const char *what;
    snug_error *err;
    snug_status st;
    vec rules; /* prule */
    vec sets;  /* snug_byteset */
    vec uses;  /* name_use */
    int32_t any_rule; /* the rule "." refers to, made once; -1 before */
    int32_t depth;    /* groups open */
    int32_t byte_set[256]; /* the set of each single byte, made once; -1 before */
    size_t held;      /* bytes allocated now (SNUG_GRAMMAR_BYTES_MAX at most) */
} parser;

enum { CLASS_RANGES_MAX = 1024 };

/* ---- memory and messages -------------------------------------------------- */

/* Marks p failed for want of memory (the allocator's message in err),
 * naming the text. Returns false. */
static bool no_memory(parser *p)
{
    if (p->st == SNUG_OK) p->st = snug_error_prefix(p->err, SNUG_NOMEM, "%s: ", p->what);
    return false;
}

/* n bytes for the parser, counted against SNUG_GRAMMAR_BYTES_MAX; NULL
 * (p failed) past it or when the allocator refuses. */
static void *palloc(parser *p, size_t n)
{
    if (n > SNUG_GRAMMAR_BYTES_MAX - p->held) {
        if (p->st == SNUG_OK)
            p->st = snug_errorf(p->err, SNUG_INVALID, "%s: compiling it would take more than %d MiB", p->what,
                                SNUG_GRAMMAR_BYTES_MAX >> 20);
        return NULL;
    }
    void *q = snug_mem_alloc(SNUG_MEM_OTHER, n, p->err);
    if (!q) return no_memory(p), NULL;
    p->held += n;
    return q;
}

/* Frees q, n bytes from palloc. */
static void pfree(parser *p, void *q, size_t n)
{
    if (!q) return;
    snug_mem_free(q);
    p->held -= n;
}

static bool grow(parser *p, vec *v, size_t esize, int32_t limit, const char *what_limit)
{
    if (v->n < v->cap) return true;
    if (v->n >= limit) {
        p->st = snug_errorf(p->err, SNUG_INVALID, "%s: more than %d %s", p->what, limit, what_limit);
        return false;
    }
    int32_t cap = v->cap ? v->cap * 2 : 8;
    if (cap > limit) cap = limit;
    void *q = palloc(p, (size_t)cap * esize);
    if (!q) return false;
    if (v->n) memcpy(q, v->p, (size_t)v->n * esize);
    pfree(p, v->p, (size_t)v->cap * esize);
    v->p = q, v->cap = cap;
    return true;
}

static void vec_free(parser *p, vec *v, size_t esize)
{
    pfree(p, v->p, (size_t)v->cap * esize);
    *v = (vec){0};
}

/* line and column (1-based, columns in bytes) of offset at. */
static void line_col(const parser *p, size_t at, int32_t *line, int32_t *col)
{
    int32_t l = 1, c = 1;
    for (size_t i = 0; i < at && i < p->n; i++) {
        if (p->s[i] == '\n') l++, c = 1;
        else c++;
    }
    *line = l, *col = c;
}

static bool fail(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(parser *p, size_t at, const char *fmt, ...)
{
    if (p->st != SNUG_OK) return false;
    int32_t line, col;
    line_col(p, at, &line, &col);
    char place[256];
    snprintf(place, sizeof place, "%s: line %d, column %d", p->what, line, col);
    va_list ap;
    va_start(ap, fmt);
    p->st = snug_verrorf_at(p->err, SNUG_INVALID, place, fmt, ap);
    va_end(ap);
    return false;
}

/* What is at pos, for "expected X, got Y". */
static const char *got(const parser *p, size_t pos, char buf[32])
{
    if (pos >= p->n) return "the end of the text";
    unsigned char c = (unsigned char)p->s[pos];
    if (c >= 0x20 && c < 0x7f) snprintf(buf, 32, "'%c'", c);
    else snprintf(buf, 32, "the byte 0x%02x", c);
    return buf;
}

static prule *rule(const parser *p, int32_t r) { return (prule *)p->rules.p + r; }

static bool emit(parser *p, int32_t r, int32_t kind, int32_t value)
{
    prule *R = rule(p, r);
    if (!grow(p, &R->elems, sizeof(snug_gelem), SNUG_GRAMMAR_ELEMS_MAX, "elements in a rule")) return false;
    ((snug_gelem *)R->elems.p)[R->elems.n++] = (snug_gelem){kind, value};
    return true;
}

/* A new rule, made (name NULL) or named; its index or -1. */
static int32_t new_rule(parser *p, const char *name, int32_t name_len, size_t at, const char *made_as)
{
    if (!grow(p, &p->rules, sizeof(prule), SNUG_GRAMMAR_RULES_MAX, "rules")) return -1;
    prule *R = (prule *)p->rules.p + p->rules.n;
    memset(R, 0, sizeof *R);
    R->name = name, R->name_len = name_len, R->at = at, R->made_as = made_as;
    return p->rules.n++;
}

static int32_t new_set(parser *p, const snug_byteset *s)
{
    if (!grow(p, &p->sets, sizeof(snug_byteset), SNUG_GRAMMAR_ELEMS_MAX, "byte sets")) return -1;
    ((snug_byteset *)p->sets.p)[p->sets.n] = *s;
    return p->sets.n++;
}

/* Byte b into rule r: its set, made once and shared. */
static bool emit_byte(parser *p, int32_t r, uint8_t b)
{
    if (p->byte_set[b] < 0) {
        snug_byteset s = {{0}};
        s.bits[b >> 5] |= 1u << (b & 31);
        p->byte_set[b] = new_set(p, &s);
        if (p->byte_set[b] < 0) return false;
    }
    return emit(p, r, SNUG_GE_SET, p->byte_set[b]);
}

/* ---- lexing ----------------------------------------------------------------- */

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips spaces, tabs, newlines and # comments. */
static void skip_space(parser *p)
{
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->n && p->s[p->pos] != '\n') p->pos++;
        } else {
            break;
        }
    }
}

static size_t name_end(const parser *p, size_t pos)
{
    while (pos < p->n && is_name_char(p->s[pos])) pos++;
    return pos;
}

/* Whether a rule's definition (name ::=) begins at pos. */
static bool rule_starts(parser *p, size_t pos)
{
    size_t e = name_end(p, pos);
    if (e == pos) return false;
    size_t save = p->pos;
    p->pos = e;
    skip_space(p);
    bool yes = p->n - p->pos >= 3 && memcmp(p->s + p->pos, "::=", 3) == 0;
    p->pos = save;
    return yes;
}

/* Notes a use of the name s[0..len) at at: its definition as rule r, or
 * (r -1) a reference; returns the use's index, or -1. */
static int32_t name_used(parser *p, const char *s, int32_t len, size_t at, int32_t r)
{
    if (!grow(p, &p->uses, sizeof(name_use), SNUG_GRAMMAR_ELEMS_MAX, "rule names")) return -1;
    int32_t i = p->uses.n++;
    ((name_use *)p->uses.p)[i] = (name_use){.name = s, .len = len, .rule = r, .index = i, .at = at};
    return i;
}

/* One UTF-8 code point at pos into *cp (the text is valid UTF-8: checked
 * first); returns its byte length. */
static int utf8_decode(const parser *p, size_t pos, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)p->s + pos;
    if (u[0] < 0x80) return *cp = u[0], 1;
    if (u[0] < 0xE0) return *cp = (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F), 2;
    if (u[0] < 0xF0) return *cp = (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F), 3;
    *cp = (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 | (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
    return 4;
}

static int utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) return out[0] = (uint8_t)cp, 1;
    if (cp < 0x800) return out[0] = (uint8_t)(0xC0 | cp >> 6), out[1] = (uint8_t)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12), out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18), out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a string or class at p->pos (an escape or a code
 * point) into *cp, moving past it. */
static bool read_char(parser *p, uint32_t *cp)
{
    size_t at = p->pos;
    if (p->pos >= p->n) return fail(p, at, "the text ends inside a string or class");
    if (p->s[p->pos] != '\\') {
        p->pos += (size_t)utf8_decode(p, p->pos, cp);
        return true;
    }
    if (++p->pos >= p->n) return fail(p, at, "the text ends inside an escape");
    char e = p->s[p->pos++];
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = p->pos < p->n ? hex_value(p->s[p->pos]) : -1;
            if (h < 0) return fail(p, at, "\\%c needs %d hex digits", e, digits);
            v = v << 4 | (uint32_t)h;
            p->pos++;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            return fail(p, at, "\\%c%0*X is not a Unicode scalar value", e, digits, v);
        return *cp = v, true;
    }
    switch (e) {
    case 'n': *cp = '\n'; return true;
    case 'r': *cp = '\r'; return true;
    case 't': *cp = '\t'; return true;
    case '\\': case '"': case '[': case ']': case '-': case '/': case '^': *cp = (uint32_t)e; return true;
    default: {
        char buf[32];
        return fail(p, at, "unknown escape \\ followed by %s (known: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\^ "
                           "\\xHH \\uHHHH \\UHHHHHHHH)", got(p, at + 1, buf));
    }
    }
}

/* ---- classes: code point ranges to UTF-8 byte ranges ------------------------ */

typedef struct cprange {
    uint32_t lo, hi;
} cprange;

/* Emits, as an alternative of rule r, the byte-set sequence of code points
 * [lo, hi], whose UTF-8 encodings have one length and differ only in
 * their last bytes within whole blocks (utf8_split makes them so). */
static bool emit_utf8_seq(parser *p, int32_t r, uint32_t lo, uint32_t hi, bool *first)
{
    uint8_t a[4], b[4];
    int n = utf8_encode(lo, a);
    utf8_encode(hi, b);
    if (!*first && !emit(p, r, SNUG_GE_ALT, 0)) return false;
    *first = false;
    for (int i = 0; i < n; i++) {
        snug_byteset s = {{0}};
        for (unsigned x = a[i]; x <= b[i]; x++) s.bits[x >> 5] |= 1u << (x & 31);
        int32_t k = new_set(p, &s);
        if (k < 0 || !emit(p, r, SNUG_GE_SET, k)) return false;
    }
    return true;
}

/* Splits [lo, hi] (code points of one encoded length n >= 2) until each
 * piece is a product of byte ranges, emitting each (RE2's way). */
static bool utf8_split(parser *p, int32_t r, uint32_t lo, uint32_t hi, int n, bool *first)
{
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0)
                return utf8_split(p, r, lo, lo | m, n, first) && utf8_split(p, r, (lo | m) + 1, hi, n, first);
            if ((hi & m) != m)
                return utf8_split(p, r, lo, (hi & ~m) - 1, n, first) && utf8_split(p, r, hi & ~m, hi, n, first);
        }
    }
    return emit_utf8_seq(p, r, lo, hi, first);
}

/* Emits into rule r an element matching one code point in the ranges: one
 * byte set when all are ASCII, else a reference to a made rule of their
 * UTF-8 byte sequences. */
static bool emit_class(parser *p, int32_t r, const cprange *rg, int32_t n, size_t at)
{
    snug_byteset ascii = {{0}};
    bool multi = false, any_ascii = false;
    for (int32_t i = 0; i < n; i++) {
        for (uint32_t c = rg[i].lo; c <= rg[i].hi && c < 0x80; c++) ascii.bits[c >> 5] |= 1u << (c & 31), any_ascii = true;
        if (rg[i].hi >= 0x80) multi = true;
    }
    if (!multi) {
        int32_t k = new_set(p, &ascii);
        return k >= 0 && emit(p, r, SNUG_GE_SET, k);
    }
    int32_t c = new_rule(p, NULL, 0, at, "class");
    if (c < 0) return false;
    bool first = true;
    if (any_ascii) {
        int32_t k = new_set(p, &ascii);
        if (k < 0 || !emit(p, c, SNUG_GE_SET, k)) return false;
        first = false;
    }
    static const uint32_t edge[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (int32_t i = 0; i < n; i++) {
        uint32_t lo = rg[i].lo < 0x80 ? 0x80 : rg[i].lo, hi = rg[i].hi;
        for (int len = 2; len <= 4 && lo <= hi; len++) {
            if (lo > edge[len - 1]) continue;
            uint32_t top = hi < edge[len - 1] ? hi : edge[len - 1];
            if (!utf8_split(p, c, lo, top, len, &first)) return false;
            lo = top + 1;
        }
    }
    return emit(p, c, SNUG_GE_END, 0) && emit(p, r, SNUG_GE_REF, c);
}

/* The complement of ranges rg (sorted in place) over the Unicode scalar
 * values, into out (at most n + 2 ranges). */
static int32_t complement(cprange *rg, int32_t n, cprange *out)
{
    for (int32_t i = 1; i < n; i++) /* insertion sort: classes are short */
        for (int32_t j = i; j > 0 && rg[j].lo < rg[j - 1].lo; j--) {
            cprange t = rg[j];
            rg[j] = rg[j - 1], rg[j - 1] = t;
        }
    int32_t m = 0;
    uint32_t next = 0;
    for (int32_t i = 0; i < n; i++) {
        if (rg[i].lo > next) out[m++] = (cprange){next, rg[i].lo - 1};
        if (rg[i].hi + 1 > next) next = rg[i].hi + 1;
    }
    if (next <= 0x10FFFF) out[m++] = (cprange){next, 0x10FFFF};
    return m;
}

/* Removes the surrogates (U+D800..U+DFFF) from ranges (at most n + 1 after). */
static int32_t drop_surrogates(const cprange *in, int32_t n, cprange *out)
{
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (in[i].hi < 0xD800 || in[i].lo > 0xDFFF) {
            out[m++] = in[i];
            continue;
        }
        if (in[i].lo < 0xD800) out[m++] = (cprange){in[i].lo, 0xD7FF};
        if (in[i].hi > 0xDFFF) out[m++] = (cprange){0xE000, in[i].hi};
    }
    return m;
}

/* [class] or [^class] at p->pos into rule r. */
static bool parse_class(parser *p, int32_t r)
{
    size_t at = p->pos++;
    bool negate = p->pos < p->n && p->s[p->pos] == '^';
    if (negate) p->pos++;
    /* ranges as read (and the surrogate-free complement), then their other form */
    const size_t ranges_bytes = (3 * (size_t)CLASS_RANGES_MAX + 6) * sizeof(cprange);
    cprange *ranges = palloc(p, ranges_bytes);
    if (!ranges) return false;
    cprange *other = ranges + CLASS_RANGES_MAX + 2;
    int32_t n = 0;
    bool ok = true;
    while (ok && (p->pos >= p->n || p->s[p->pos] != ']')) {
        uint32_t lo, hi;
        if (n == CLASS_RANGES_MAX) {
            ok = fail(p, at, "a class of more than %d ranges", CLASS_RANGES_MAX);
            break;
        }
        if (!(ok = read_char(p, &lo))) break;
        hi = lo;
        if (p->pos + 1 < p->n && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            size_t dash = p->pos++;
            if (!(ok = read_char(p, &hi))) break;
            if (hi < lo) {
                ok = fail(p, dash, "the range ends (U+%04X) before it starts (U+%04X)", hi, lo);
                break;
            }
        }
        ranges[n++] = (cprange){lo, hi};
    }
    if (ok) {
        p->pos++; /* ']' */
        if (n == 0 && !negate) ok = fail(p, at, "an empty class matches nothing");
    }
    if (ok) {
        int32_t m = n;
        const cprange *use = ranges;
        if (negate) m = complement(ranges, n, other), use = other;
        int32_t k = drop_surrogates(use, m, use == other ? ranges : other);
        use = use == other ? ranges : other;
        ok = k > 0 ? emit_class(p, r, use, k, at) : fail(p, at, "the class matches no character");
    }
    pfree(p, ranges, ranges_bytes);
    return ok;
}

/* "." into rule r: any Unicode scalar value, one made rule shared. */
static bool parse_any(parser *p, int32_t r)
{
    size_t at = p->pos++;
    if (p->any_rule < 0) {
        int32_t holder = new_rule(p, NULL, 0, at, "class");
        if (holder < 0) return false;
        static const cprange all[] = {{0, 0xD7FF}, {0xE000, 0x10FFFF}};
        if (!emit_class(p, holder, all, 2, at) || !emit(p, holder, SNUG_GE_END, 0)) return false;
        p->any_rule = holder;
    }
    return emit(p, r, SNUG_GE_REF, p->any_rule);
}

/* "string" at p->pos into rule r: its UTF-8 bytes, one set each. */
static bool parse_string(parser *p, int32_t r)
{
    size_t at = p->pos++;
    while (p->pos < p->n && p->s[p->pos] != '"') {
        uint32_t cp;
        uint8_t b[4];
        if (!read_char(p, &cp)) return false;
        int k = utf8_encode(cp, b);
        for (int i = 0; i < k; i++)
            if (!emit_byte(p, r, b[i])) return false;
    }
    if (p->pos >= p->n) return fail(p, at, "the string is not closed");
    p->pos++;
    return true;
}

/* ---- rules, alternatives, sequences, repetitions ----------------------------- */

static bool parse_alternates(parser *p, int32_t r, bool nested);

/* An unsigned integer of at most SNUG_GRAMMAR_REPEAT_MAX at p->pos. */
static bool parse_count(parser *p, int32_t *out)
{
    size_t at = p->pos;
    int64_t v = 0;
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        v = v * 10 + (p->s[p->pos++] - '0');
        if (v > SNUG_GRAMMAR_REPEAT_MAX) return fail(p, at, "a repetition count above %d", SNUG_GRAMMAR_REPEAT_MAX);
    }
    if (p->pos == at) {
        char buf[32];
        return fail(p, at, "expected a number in {m,n}, got %s", got(p, at, buf));
    }
    return *out = (int32_t)v, true;
}

/* Moves elements [from, end) of rule r into a made rule (unless they are
 * one reference already), whose reference goes to *x (a rule, or a name's
 * use still to be resolved); false on failure. */
static bool item_rule(parser *p, int32_t r, int32_t from, size_t at, int32_t *x)
{
    prule *R = rule(p, r);
    snug_gelem *e = (snug_gelem *)R->elems.p + from;
    if (R->elems.n - from == 1 && e->kind == SNUG_GE_REF) {
        R->elems.n = from;
        return *x = e->value, true;
    }
    int32_t m = new_rule(p, NULL, 0, at, "repetition");
    if (m < 0) return false;
    R = rule(p, r); /* the rules may have moved */
    for (int32_t i = from; i < R->elems.n; i++) {
        snug_gelem g = ((snug_gelem *)R->elems.p)[i];
        if (!emit(p, m, g.kind, g.value)) return false;
        R = rule(p, r);
    }
    R->elems.n = from;
    return *x = m, emit(p, m, SNUG_GE_END, 0);
}

/* A made rule for x repeated: star (x S | empty) or, with star false,
 * optional (x | empty); -1 on failure. */
static int32_t repeat_rule(parser *p, int32_t x, bool star, size_t at)
{
    int32_t s = new_rule(p, NULL, 0, at, "repetition");
    if (s < 0 || !emit(p, s, SNUG_GE_REF, x)) return -1;
    if (star && !emit(p, s, SNUG_GE_REF, s)) return -1;
    return emit(p, s, SNUG_GE_ALT, 0) && emit(p, s, SNUG_GE_END, 0) ? s : -1;
}

/* The repetition operator at p->pos applied to rule r's elements from
 * `from` (the item just read). */
static bool parse_repetition(parser *p, int32_t r, int32_t from)
{
    size_t at = p->pos;
    char op = p->s[p->pos++];
    int32_t lo = 0, hi = -1; /* hi -1: no bound */
    if (op == '+') lo = 1;
    else if (op == '?') hi = 1;
    else if (op == '{') {
        if (!parse_count(p, &lo)) return false;
        hi = lo;
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            hi = -1;
            if (p->pos < p->n && p->s[p->pos] != '}' && !parse_count(p, &hi)) return false;
        }
        if (p->pos >= p->n || p->s[p->pos] != '}') {
            char buf[32];
            return fail(p, p->pos, "expected '}' to close {m,n}, got %s", got(p, p->pos, buf));
        }
        p->pos++;
        if (hi >= 0 && hi < lo) return fail(p, at, "{%d,%d}: the most is below the least", lo, hi);
    }
    if (rule(p, r)->elems.n == from) return fail(p, at, "'%c' repeats nothing", op);
    int32_t x;
    if (!item_rule(p, r, from, at, &x)) return false;
    for (int32_t i = 0; i < lo; i++)
        if (!emit(p, r, SNUG_GE_REF, x)) return false;
    if (hi < 0) {
        int32_t s = repeat_rule(p, x, true, at);
        return s >= 0 && emit(p, r, SNUG_GE_REF, s);
    }
    /* hi - lo optional copies, nested: (x (x (x)?)?)? */
    int32_t inner = -1;
    for (int32_t i = 0; i < hi - lo; i++) {
        int32_t o = new_rule(p, NULL, 0, at, "repetition");
        if (o < 0 || !emit(p, o, SNUG_GE_REF, x)) return false;
        if (inner >= 0 && !emit(p, o, SNUG_GE_REF, inner)) return false;
        if (!emit(p, o, SNUG_GE_ALT, 0) || !emit(p, o, SNUG_GE_END, 0)) return false;
        inner = o;
    }
    return inner < 0 || emit(p, r, SNUG_GE_REF, inner);
}

/* A sequence of items into rule r, up to '|', ')', the next rule or the end. */
static bool parse_sequence(parser *p, int32_t r, bool nested)
{
    for (;;) {
        skip_space(p);
        if (p->pos >= p->n) return true;
        char c = p->s[p->pos];
        if (c == '|' || c == ')' || (!nested && rule_starts(p, p->pos))) return true;
        int32_t from = rule(p, r)->elems.n;
        size_t at = p->pos;
        bool ok;
        if (c == '"') {
            ok = parse_string(p, r);
        } else if (c == '[') {
            ok = parse_class(p, r);
        } else if (c == '.') {
            ok = parse_any(p, r);
        } else if (c == '(') {
            if (p->depth >= SNUG_GRAMMAR_NEST_MAX)
                return fail(p, at, "groups nested more than %d deep", SNUG_GRAMMAR_NEST_MAX);
            int32_t g = new_rule(p, NULL, 0, at, "group");
            p->pos++;
            p->depth++;
            ok = g >= 0 && parse_alternates(p, g, true);
            p->depth--;
            if (ok && (p->pos >= p->n || p->s[p->pos] != ')')) {
                char buf[32];
                int32_t line, col;
                line_col(p, at, &line, &col);
                ok = fail(p, p->pos, "expected ')' to close the group opened at line %d, column %d, got %s", line, col,
                          got(p, p->pos, buf));
            }
            if (ok) p->pos++, ok = emit(p, r, SNUG_GE_REF, g);
        } else if (is_name_char(c)) {
            size_t e = name_end(p, p->pos);
            if (e - p->pos > SNUG_GRAMMAR_NAME_MAX) return fail(p, at, "a rule name longer than %d bytes", SNUG_GRAMMAR_NAME_MAX);
            int32_t x = name_used(p, p->s + p->pos, (int32_t)(e - p->pos), at, -1);
            p->pos = e;
            ok = x >= 0 && emit(p, r, SNUG_GE_REF, -(x + 1));
        } else {
            char buf[32];
            return fail(p, at, "expected a string, a [class], '.', '(', a rule name, '|' or a new rule, got %s",
                        got(p, at, buf));
        }
        if (!ok) return false;
        while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t')) p->pos++;
        /* a second operator applies to the first's result, which also begins at from */
        while (ok && p->pos < p->n && p->s[p->pos] && strchr("*+?{", p->s[p->pos])) ok = parse_repetition(p, r, from);
        if (!ok) return false;
    }
}

static bool parse_alternates(parser *p, int32_t r, bool nested)
{
    if (!parse_sequence(p, r, nested)) return false;
    while (p->pos < p->n && p->s[p->pos] == '|') {
        p->pos++;
        if (!emit(p, r, SNUG_GE_ALT, 0) || !parse_sequence(p, r, nested)) return false;
    }
    return emit(p, r, SNUG_GE_END, 0);
}

/* name ::= alternatives, until the end of the text. */
static bool parse_rules(parser *p)
{
    skip_space(p);
    if (p->pos >= p->n) return fail(p, p->pos, "the grammar has no rules");
    while (p->pos < p->n) {
        size_t at = p->pos, e = name_end(p, p->pos);
        char buf[32];
        if (e == at) return fail(p, at, "expected a rule name, got %s", got(p, at, buf));
        if (e - at > SNUG_GRAMMAR_NAME_MAX) return fail(p, at, "a rule name longer than %d bytes", SNUG_GRAMMAR_NAME_MAX);
        int32_t r = new_rule(p, p->s + at, (int32_t)(e - at), at, NULL);
        if (r < 0 || name_used(p, p->s + at, (int32_t)(e - at), at, r) < 0) return false;
        p->pos = e;
        skip_space(p);
        if (p->n - p->pos < 3 || memcmp(p->s + p->pos, "::=", 3) != 0)
            return fail(p, p->pos, "expected '::=' after the rule name, got %s", got(p, p->pos, buf));
        p->pos += 3;
        if (!parse_alternates(p, r, false)) return false;
        if (p->pos < p->n && p->s[p->pos] == ')') return fail(p, p->pos, "a ')' that closes no group");
        skip_space(p);
    }
    return true;
}

/* ---- checks on the whole ------------------------------------------------------ */

/* "the rule 'x'" or "the repetition at line L, column C" for messages. */
static const char *rule_name(const parser *p, int32_t r, char buf[200])
{
    const prule *R = rule(p, r);
    if (R->name) {
        snprintf(buf, 200, "the rule '%.*s'", R->name_len, R->name);
    } else {
        int32_t line, col;
        line_col(p, R->at, &line, &col);
        snprintf(buf, 200, "the %s at line %d, column %d", R->made_as, line, col);
    }
    return buf;
}

static int by_name(const void *x, const void *y)
{
    const name_use *a = x, *b = y;
    int c = memcmp(a->name, b->name, (size_t)SNUG_MIN(a->len, b->len));
    if (c == 0) c = (a->len > b->len) - (a->len < b->len);
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* Every name referred to is defined once: each reference's REF elements
 * then hold the rule. Fails at the earliest place in the text that breaks
 * this. */
static bool resolve_names(parser *p)
{
    int32_t n = p->uses.n;
    name_use *u = p->uses.p;
    size_t map_bytes = (size_t)SNUG_MAX(n, 1) * sizeof(int32_t);
    int32_t *rule_of_use = palloc(p, map_bytes);
    if (!rule_of_use) return false;
    if (n) qsort(u, (size_t)n, sizeof *u, by_name);
    const name_use *bad = NULL; /* the earliest error: an undefined name's first use, or a second definition */
    bool twice = false;
    for (int32_t i = 0, j; i < n; i = j) {
        int32_t def = -1;
        const name_use *second = NULL, *first_use = &u[i];
        for (j = i; j < n && u[j].len == u[i].len && memcmp(u[j].name, u[i].name, (size_t)u[i].len) == 0; j++) {
            if (u[j].rule < 0) continue;
            if (def < 0) def = u[j].rule;
            else if (!second) second = &u[j];
        }
        for (int32_t k = i; k < j; k++) rule_of_use[u[k].index] = def;
        const name_use *e = def < 0 ? first_use : second;
        if (e && (!bad || e->at < bad->at)) bad = e, twice = def >= 0;
    }
    bool ok = true;
    if (bad && twice) ok = fail(p, bad->at, "the rule '%.*s' is defined twice", bad->len, bad->name);
    else if (bad) ok = fail(p, bad->at, "the rule '%.*s' is used but not defined", bad->len, bad->name);
    for (int32_t r = 0; ok && r < p->rules.n; r++) {
        snug_gelem *e = rule(p, r)->elems.p;
        for (int32_t i = 0; i < rule(p, r)->elems.n; i++)
            if (e[i].kind == SNUG_GE_REF && e[i].value < 0) e[i].value = rule_of_use[-e[i].value - 1];
    }
    pfree(p, rule_of_use, map_bytes);
    return ok;
}

/* nullable[r]: rule r can match the empty text. A worklist over the
 * alternatives, each waiting for its references to be found nullable:
 * linear in the grammar. */
static bool find_nullable(parser *p, bool *nullable)
{
    int32_t n = p->rules.n, n_alts = 0, n_refs = 0;
    for (int32_t r = 0; r < n; r++) {
        const snug_gelem *e = rule(p, r)->elems.p;
        for (int32_t i = 0; i < rule(p, r)->elems.n; i++) {
            n_alts += e[i].kind == SNUG_GE_ALT || e[i].kind == SNUG_GE_END;
            n_refs += e[i].kind == SNUG_GE_REF;
        }
    }
    /* per alternative: its rule and the references it still waits for (-1:
     * it reads a byte); per rule: the alternatives that refer to it */
    size_t bytes = ((size_t)n_alts * 2 + (size_t)n + 1 + (size_t)n_refs + (size_t)n) * sizeof(int32_t);
    int32_t *alt_rule = palloc(p, bytes);
    if (!alt_rule) return false;
    int32_t *waits = alt_rule + n_alts, *first = waits + n_alts, *by = first + n + 1, *queue = by + n_refs;
    int32_t a = 0;
    for (int32_t r = 0; r < n; r++) {
        const snug_gelem *e = rule(p, r)->elems.p;
        for (int32_t i = 0; i < rule(p, r)->elems.n; i++) {
            if (e[i].kind == SNUG_GE_REF) first[e[i].value + 1]++, waits[a] += waits[a] >= 0;
            else if (e[i].kind == SNUG_GE_SET) waits[a] = -1;
            else alt_rule[a++] = r;
        }
    }
    for (int32_t r = 0; r < n; r++) first[r + 1] += first[r];
    int32_t *fill = queue; /* (n) the next free place of each rule's list, then the queue */
    memcpy(fill, first, (size_t)n * sizeof *fill);
    a = 0;
    for (int32_t r = 0; r < n; r++) {
        const snug_gelem *e = rule(p, r)->elems.p;
        for (int32_t i = 0; i < rule(p, r)->elems.n; i++) {
            if (e[i].kind == SNUG_GE_REF) by[fill[e[i].value]++] = a;
            else if (e[i].kind != SNUG_GE_SET) a++;
        }
    }
    int32_t head = 0, tail = 0;
    for (a = 0; a < n_alts; a++)
        if (waits[a] == 0 && !nullable[alt_rule[a]]) nullable[alt_rule[a]] = true, queue[tail++] = alt_rule[a];
    while (head < tail) {
        int32_t x = queue[head++];
        for (int32_t k = first[x]; k < first[x + 1]; k++) {
            a = by[k];
            if (waits[a] > 0 && --waits[a] == 0 && !nullable[alt_rule[a]])
                nullable[alt_rule[a]] = true, queue[tail++] = alt_rule[a];
        }
    }
    pfree(p, alt_rule, bytes);
    return true;
}

/* No rule reaches itself before a byte: a depth-first search over the
 * rules each rule can begin with (past nullable ones), each frame keeping
 * its place in its rule. order gets the rules children first. */
static bool check_left_recursion(parser *p, const bool *nullable, int32_t *order)
{
    typedef struct frame {
        int32_t rule, pos;
        bool lead;
    } frame;
    int32_t n = p->rules.n, n_order = 0;
    size_t bytes = (size_t)n * (sizeof(frame) + 1);
    frame *stack = palloc(p, bytes);
    if (!stack) return false;
    uint8_t *color = (uint8_t *)(stack + n); /* 0 new, 1 on the path, 2 done */
    bool ok = true;
    for (int32_t root = 0; root < n && ok; root++) {
        if (color[root]) continue;
        int32_t depth = 0;
        stack[depth++] = (frame){root, 0, true};
        color[root] = 1;
        while (depth > 0 && ok) {
            frame *f = &stack[depth - 1];
            const snug_gelem *e = rule(p, f->rule)->elems.p;
            int32_t child = -1;
            while (f->pos < rule(p, f->rule)->elems.n && child < 0) {
                int32_t i = f->pos++;
                if (e[i].kind == SNUG_GE_ALT || e[i].kind == SNUG_GE_END) {
                    f->lead = true;
                } else if (f->lead && e[i].kind == SNUG_GE_SET) {
                    f->lead = false;
                } else if (f->lead) {
                    int32_t x = e[i].value;
                    if (color[x] == 1) {
                        char buf[200];
                        ok = fail(p, rule(p, x)->at,
                                  "%s is left-recursive: it can come back to itself before reading a byte "
                                  "(a repetition of something that can be empty does too)",
                                  rule_name(p, x, buf));
                        break;
                    }
                    f->lead = nullable[x];
                    if (color[x] == 0) child = x;
                }
            }
            if (!ok) break;
            if (child >= 0) {
                color[child] = 1;
                stack[depth++] = (frame){child, 0, true};
            } else {
                color[f->rule] = 2;
                order[n_order++] = f->rule;
                depth--;
            }
        }
    }
    pfree(p, stack, bytes);
    return ok;
}

/* ---- alternatives that begin alike, merged ----------------------------------- */

typedef struct alt_key {
    snug_byteset set; /* a first byte set's bytes (zero for a reference) */
    int32_t kind;     /* of the first element: SNUG_GE_SET, SNUG_GE_REF, or SNUG_GE_END when empty */
    int32_t value;    /* the rule referred to (0 for a set) */
    int32_t start;    /* the alternative: elements [start, end) of its rule */
    int32_t end;
} alt_key;

static int by_first(const void *x, const void *y)
{
    const alt_key *a = x, *b = y;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    if (a->value != b->value) return a->value < b->value ? -1 : 1;
    int c = memcmp(&a->set, &b->set, sizeof a->set);
    return c ? c : (a->start > b->start) - (a->start < b->start);
}

static bool same_first(const alt_key *a, const alt_key *b)
{
    return a->kind != SNUG_GE_END && a->kind == b->kind && a->value == b->value &&
           memcmp(&a->set, &b->set, sizeof a->set) == 0;
}

/* Rule r's alternatives that begin with the same element become one, that
 * element then a made rule of their rests (which is merged in its turn, as
 * made rules come after). */
static bool factor_rule(parser *p, int32_t r)
{
    int32_t n_alts = 0;
    for (int32_t i = 0; i < rule(p, r)->elems.n; i++)
        n_alts += ((const snug_gelem *)rule(p, r)->elems.p)[i].kind <= SNUG_GE_ALT;
    if (n_alts < 2) return true;
    size_t bytes = (size_t)n_alts * sizeof(alt_key);
    alt_key *k = palloc(p, bytes);
    if (!k) return false;
    const snug_gelem *e = rule(p, r)->elems.p;
    for (int32_t i = 0, a = 0, start = 0; i < rule(p, r)->elems.n; i++) {
        if (e[i].kind > SNUG_GE_ALT) continue;
        k[a] = (alt_key){.kind = start < i ? e[start].kind : SNUG_GE_END, .start = start, .end = i};
        if (k[a].kind == SNUG_GE_SET) k[a].set = ((const snug_byteset *)p->sets.p)[e[start].value];
        else if (k[a].kind == SNUG_GE_REF) k[a].value = e[start].value;
        a++, start = i + 1;
    }
    qsort(k, (size_t)n_alts, sizeof *k, by_first);
    bool merge = false;
    for (int32_t a = 1; a < n_alts && !merge; a++) merge = same_first(&k[a - 1], &k[a]);
    bool ok = true;
    vec old = rule(p, r)->elems;
    rule(p, r)->elems = (vec){0};
    for (int32_t a = 0, b; merge && ok && a < n_alts; a = b) {
        for (b = a + 1; b < n_alts && same_first(&k[a], &k[b]);) b++;
        const snug_gelem *oe = old.p;
        if (a > 0) ok = emit(p, r, SNUG_GE_ALT, 0);
        if (ok && b - a == 1) {
            for (int32_t i = k[a].start; ok && i < k[a].end; i++) ok = emit(p, r, oe[i].kind, oe[i].value);
            continue;
        }
        int32_t t = ok ? new_rule(p, NULL, 0, rule(p, r)->at, "group") : -1;
        ok = t >= 0 && emit(p, r, oe[k[a].start].kind, oe[k[a].start].value) && emit(p, r, SNUG_GE_REF, t);
        for (int32_t c = a; ok && c < b; c++) {
            if (c > a) ok = emit(p, t, SNUG_GE_ALT, 0);
            for (int32_t i = k[c].start + 1; ok && i < k[c].end; i++) ok = emit(p, t, oe[i].kind, oe[i].value);
        }
        if (ok) ok = emit(p, t, SNUG_GE_END, 0);
    }
    if (merge && ok) ok = emit(p, r, SNUG_GE_END, 0);
    if (merge) vec_free(p, &old, sizeof(snug_gelem));
    else rule(p, r)->elems = old;
    pfree(p, k, bytes);
    return ok;
}

/* ---- how many stacks a place can begin ---------------------------------------- */

enum { WIDTH_SATURATED = 1 << 24 };

/* Each rule's fan (the byte sets its expansion can begin with at once,
 * counted with repeats: the stacks a matcher makes entering it), children
 * before parents (order); then, for every place a byte can leave a stack
 * at in a rule the root reaches, the stacks it can begin (its rest's fan,
 * and one more when the rest can be empty) must be at most
 * SNUG_GRAMMAR_WIDTH_MAX. */
static bool check_width(parser *p, const bool *nullable, const int32_t *order, int32_t root)
{
    int32_t n = p->rules.n, max_elems = 0;
    for (int32_t r = 0; r < n; r++) max_elems = SNUG_MAX(max_elems, rule(p, r)->elems.n);
    size_t bytes = (size_t)n * 2 * sizeof(int32_t) + ((size_t)max_elems + 1) * (sizeof(int32_t) + 1) + (size_t)n;
    int32_t *fan = palloc(p, bytes);
    if (!fan) return false;
    int32_t *queue = fan + n, *rest = queue + n;
    bool *rest_empty = (bool *)(rest + max_elems + 1), *reached = rest_empty + max_elems + 1;
    bool ok = true;
    /* pass 0: fans, children first; pass 1: every place in the rules reached */
    for (int pass = 0; pass < 2 && ok; pass++) {
        int32_t head = 0, tail = 0;
        if (pass == 1) {
            reached[root] = true, queue[tail++] = root;
            if (fan[root] + nullable[root] > SNUG_GRAMMAR_WIDTH_MAX) {
                char buf[200];
                ok = fail(p, rule(p, root)->at, "%s can begin %d alternatives at once; at most %d are followed "
                                                 "(merge alternatives that begin alike)",
                          rule_name(p, root, buf), fan[root] + nullable[root], SNUG_GRAMMAR_WIDTH_MAX);
            }
        }
        for (int32_t idx = 0; ok && (pass == 0 ? idx < n : head < tail); idx++) {
            int32_t r = pass == 0 ? order[idx] : queue[head++];
            const snug_gelem *e = rule(p, r)->elems.p;
            int32_t m = rule(p, r)->elems.n, total = 0;
            rest[m] = 0, rest_empty[m] = true;
            for (int32_t i = m - 1; i >= 0; i--) { /* backwards: each place's rest */
                if (e[i].kind == SNUG_GE_SET) rest[i] = 1, rest_empty[i] = false;
                else if (e[i].kind == SNUG_GE_REF) {
                    int32_t x = e[i].value;
                    rest[i] = SNUG_MIN(fan[x] + (nullable[x] ? rest[i + 1] : 0), WIDTH_SATURATED);
                    rest_empty[i] = nullable[x] && rest_empty[i + 1];
                    if (pass == 1 && !reached[x]) reached[x] = true, queue[tail++] = x;
                } else rest[i] = 0, rest_empty[i] = true;
            }
            for (int32_t i = 0, start = 0; ok && i < m; i++) {
                if (e[i].kind <= SNUG_GE_ALT) {
                    total = SNUG_MIN(total + rest[start], WIDTH_SATURATED);
                    start = i + 1;
                }
                bool lands = pass == 1 && i > 0 && e[i - 1].kind == SNUG_GE_SET; /* a stack lands after a byte */
                int32_t w = rest[i] + rest_empty[i];
                if (lands && w > SNUG_GRAMMAR_WIDTH_MAX) {
                    char buf[200];
                    ok = fail(p, rule(p, r)->at,
                              "%s can begin %d alternatives at once; at most %d are followed (merge alternatives "
                              "that begin alike, or make fewer of them optional)",
                              rule_name(p, r, buf), w, SNUG_GRAMMAR_WIDTH_MAX);
                    break;
                }
            }
            if (pass == 0) fan[r] = total;
        }
    }
    pfree(p, fan, bytes);
    return ok;
}

/* Names resolved, then: no left recursion, alternatives merged, widths
 * within the limit. */
static bool check_rules(parser *p, int32_t root)
{
    if (!resolve_names(p)) return false;
    int32_t n = p->rules.n;
    size_t bytes = (size_t)n * (sizeof(int32_t) + 1);
    int32_t *order = palloc(p, bytes);
    if (!order) return false;
    bool *nullable = (bool *)(order + n);
    bool ok = find_nullable(p, nullable) && check_left_recursion(p, nullable, order);
    pfree(p, order, bytes);
    for (int32_t r = 0; ok && r < p->rules.n; r++) ok = factor_rule(p, r); /* made rules are appended: merged too */
    if (!ok) return false;
    n = p->rules.n;
    bytes = (size_t)n * (sizeof(int32_t) + 1);
    order = palloc(p, bytes);
    if (!order) return false;
    nullable = (bool *)(order + n);
    ok = find_nullable(p, nullable) && check_left_recursion(p, nullable, order) &&
         check_width(p, nullable, order, root);
    pfree(p, order, bytes);
    return ok;
}

/* The compiled grammar in one block. */
static snug_grammar *assemble(parser *p, int32_t root)
{
    int32_t n = p->rules.n, total = 0, n_alts = 0;
    for (int32_t r = 0; r < n; r++) {
        total += rule(p, r)->elems.n;
        for (int32_t i = 0; i < rule(p, r)->elems.n; i++)
            n_alts += ((const snug_gelem *)rule(p, r)->elems.p)[i].kind <= SNUG_GE_ALT; /* END or ALT */
    }
    size_t bytes = sizeof(snug_grammar) + (size_t)p->sets.n * sizeof(snug_byteset) +
                   (size_t)total * sizeof(snug_gelem) + ((size_t)n + (size_t)n + 1 + (size_t)n_alts) * sizeof(int32_t);
    if (total > SNUG_GRAMMAR_ELEMS_MAX) {
        fail(p, 0, "the grammar compiles to more than %d elements", SNUG_GRAMMAR_ELEMS_MAX);
        return NULL;
    }
    char *mem = snug_mem_alloc(SNUG_MEM_OTHER, bytes, p->err);
    if (!mem) {
        no_memory(p);
        return NULL;
    }
    snug_grammar *g = (snug_grammar *)(void *)mem;
    snug_byteset *sets = (snug_byteset *)(void *)(mem + sizeof *g);
    snug_gelem *elems = (snug_gelem *)(void *)(sets + p->sets.n);
    int32_t *start = (int32_t *)(void *)(elems + total), *alt_first = start + n, *alts = alt_first + n + 1;
    if (p->sets.n) memcpy(sets, p->sets.p, (size_t)p->sets.n * sizeof *sets);
    int32_t k = 0, a = 0;
    for (int32_t r = 0; r < n; r++) {
        const snug_gelem *e = rule(p, r)->elems.p;
        start[r] = k, alt_first[r] = a;
        alts[a++] = k;
        for (int32_t i = 0; i + 1 < rule(p, r)->elems.n; i++)
            if (e[i].kind == SNUG_GE_ALT) alts[a++] = k + i + 1;
        memcpy(elems + k, e, (size_t)rule(p, r)->elems.n * sizeof *elems);
        k += rule(p, r)->elems.n;
    }
    alt_first[n] = a;
    *g = (snug_grammar){.n_rules = n, .root = root, .start = start, .n_elems = total, .elems = elems,
                        .alt_first = alt_first, .alts = alts, .n_sets = p->sets.n, .sets = sets, .bytes = bytes};
    return g;
}

snug_status snug_grammar_parse_gbnf(const char *text, size_t len, const char *root, const char *what,
                                    snug_grammar **out, snug_error *err)
{
    *out = NULL;
    parser p = {.s = text, .n = len, .what = what ? what : "grammar", .err = err, .any_rule = -1};
    memset(p.byte_set, 0xff, sizeof p.byte_set);
    const char *root_name = root ? root : "root";
    bool ok = true;
    if (!text && len) ok = fail(&p, 0, "no text");
    if (ok && len > SNUG_GRAMMAR_TEXT_MAX)
        ok = fail(&p, 0, "%zu bytes of text, more than the %d taken", len, SNUG_GRAMMAR_TEXT_MAX);
    if (ok && len && !snug_utf8_valid(text, len)) ok = fail(&p, 0, "the text is not valid UTF-8");
    if (ok && len && memchr(text, 0, len)) ok = fail(&p, (size_t)((const char *)memchr(text, 0, len) - text), "a NUL byte");
    if (ok) ok = parse_rules(&p);
    int32_t r = -1;
    if (ok) {
        for (int32_t i = 0; i < p.rules.n && r < 0; i++)
            if (rule(&p, i)->name && (size_t)rule(&p, i)->name_len == strlen(root_name) &&
                memcmp(rule(&p, i)->name, root_name, strlen(root_name)) == 0)
                r = i;
        if (r < 0) ok = fail(&p, 0, "no rule named '%s' to start from", root_name);
    }
    if (ok) ok = check_rules(&p, r);
    if (ok) *out = assemble(&p, r);
    for (int32_t i = 0; i < p.rules.n; i++) vec_free(&p, &rule(&p, i)->elems, sizeof(snug_gelem));
    vec_free(&p, &p.rules, sizeof(prule));
    vec_free(&p, &p.sets, sizeof(snug_byteset));
    vec_free(&p, &p.uses, sizeof(name_use));
    if (*out) return SNUG_OK;
    return p.st != SNUG_OK ? p.st : snug_errorf(err, SNUG_INTERNAL, "%s: not compiled", p.what);
}

void snug_grammar_free(snug_grammar *g) { snug_mem_free(g); }

/* What a grammar holds past its struct (one block: assemble's layout),
 * and its counts: together, all that it is. */
static const void *content(const snug_grammar *g, size_t *n, int32_t counts[4])
{
    counts[0] = g->root, counts[1] = g->n_rules, counts[2] = g->n_elems, counts[3] = g->n_sets;
    *n = g->bytes - sizeof *g;
    return g + 1;
}

bool snug_grammar_equal(const snug_grammar *a, const snug_grammar *b)
{
    size_t na, nb;
    int32_t ca[4], cb[4];
    const void *pa = content(a, &na, ca), *pb = content(b, &nb, cb);
    return a == b || (na == nb && memcmp(ca, cb, sizeof ca) == 0 && memcmp(pa, pb, na) == 0);
}

uint64_t snug_grammar_hash(const snug_grammar *g, const uint64_t key[2])
{
    size_t n;
    int32_t counts[4];
    const void *p = content(g, &n, counts);
    const uint64_t k[2] = {key[0] ^ snug_siphash(key, counts, sizeof counts), key[1]};
    return snug_siphash(k, p, n);
}
