/*
 * jinja_lex.c: template text to tokens, following jinja2/lexer.py with the
 * settings transformers uses (trim_blocks, lstrip_blocks, no line
 * statements, keep_trailing_newline off):
 *   - newlines are normalized to "\n" and one final newline is dropped;
 *   - "{%-", "{{-", "{#-" strip all whitespace before the tag, and "-%}",
 *     "-}}", "-#}" all whitespace after it;
 *   - lstrip_blocks strips spaces and tabs (any whitespace but newlines)
 *     between the start of a line and a "{%" or "{#" tag, unless the tag is
 *     "{%+" / "{#+";
 *   - trim_blocks drops the first newline after "%}" and "#}" (not after
 *     "+%}" or "}}");
 *   - inside a tag, "%}" or "}}" only ends it when brackets are balanced;
 *   - {% raw %}...{% endraw %} is data;
 *   - string literals are unescaped as Python's unicode-escape does.
 * Whitespace is Python's (Unicode) whitespace throughout.
 */
#include "jinja_impl.h"

#include "base/mem.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BRACKETS_MAX = 256 };

typedef struct lexer {
    const char *src;
    size_t n, pos;
    const char *name;
    jj_arena *arena;
    snug_error *err;
    jj_token *toks;
    size_t n_toks, cap;
    bool line_starting;   /* the last match ended with a newline */
    char brackets[BRACKETS_MAX];
    size_t n_brackets;
    size_t at_pos;        /* line/column cursor */
    uint32_t at_line, at_col;
} lexer;

snug_status jj_normalize(const char *text, size_t len, char **out, size_t *out_len,
                         snug_error *err)
{
    size_t cap = 0;
    if (!snug_add_size(len, 1, &cap))
        return snug_errorf(err, SNUG_INVALID, "template of %zu bytes is too large", len);
    char *p = snug_mem_alloc(SNUG_MEM_OTHER, cap, err);
    if (!p) return err ? err->status : SNUG_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            p[n++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n') i++;
        } else {
            p[n++] = text[i];
        }
    }
    if (n > 0 && p[n - 1] == '\n') n--;
    p[n] = '\0';
    *out = p;
    *out_len = n;
    return SNUG_OK;
}

/* Moves the line/column cursor to pos (positions only grow). */
static void locate(lexer *lx, size_t pos, uint32_t *line, uint32_t *col)
{
    if (pos < lx->at_pos) { /* not expected; restart from the top */
        lx->at_pos = 0;
        lx->at_line = 1;
        lx->at_col = 1;
    }
    for (size_t i = lx->at_pos; i < pos && i < lx->n; i++) {
        unsigned char c = (unsigned char)lx->src[i];
        if (c == '\n') {
            lx->at_line++;
            lx->at_col = 1;
        } else if ((c & 0xC0) != 0x80) {
            lx->at_col++;
        }
    }
    lx->at_pos = pos;
    *line = lx->at_line;
    *col = lx->at_col;
}

static snug_status lex_fail(lexer *lx, size_t pos, snug_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static snug_status lex_fail(lexer *lx, size_t pos, snug_status status, const char *fmt, ...)
{
    uint32_t line, col;
    locate(lx, pos, &line, &col);
    char place[256];
    snprintf(place, sizeof place, "%s:%u:%u", lx->name, line, col);
    va_list ap;
    va_start(ap, fmt);
    snug_status st = snug_verrorf_at(lx->err, status, place, fmt, ap);
    va_end(ap);
    return st;
}

static jj_token *push(lexer *lx, jj_tok_type type, size_t pos)
{
    if (lx->n_toks == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        jj_token *v = jj_arena_alloc(lx->arena, cap * sizeof *v, lx->err);
        if (!v) return NULL;
        if (lx->n_toks) memcpy(v, lx->toks, lx->n_toks * sizeof *v);
        lx->toks = v;
        lx->cap = cap;
    }
    jj_token *t = &lx->toks[lx->n_toks++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    locate(lx, pos, &t->line, &t->col);
    return t;
}

/* Python's \s at p: the length of the whitespace character there, or 0. */
static size_t space_at(const lexer *lx, size_t p)
{
    if (p >= lx->n) return 0;
    unsigned char c = (unsigned char)lx->src[p];
    if (c < 0x80) return jj_is_space(c) ? 1 : 0;
    size_t adv = 1;
    uint32_t cp = jj_utf8_next(lx->src + p, lx->n - p, &adv);
    return jj_is_space(cp) ? adv : 0;
}

static size_t skip_spaces(const lexer *lx, size_t p)
{
    size_t k;
    while ((k = space_at(lx, p)) > 0) p += k;
    return p;
}

static bool starts(const lexer *lx, size_t p, const char *s)
{
    size_t n = strlen(s);
    return p <= lx->n && lx->n - p >= n && memcmp(lx->src + p, s, n) == 0;
}

/* The end of the whitespace-stripped text [start, end) per the tag's sign. */
static size_t strip_before(const lexer *lx, size_t start, size_t end, char sign, bool lstrip)
{
    if (sign == '-') {
        while (end > start) {
            size_t adv = 1;
            uint32_t cp = jj_utf8_prev(lx->src + start, end - start, &adv);
            if (!jj_is_space(cp)) break;
            end -= adv;
        }
        return end;
    }
    if (sign == '+' || !lstrip) return end;
    size_t line_start = end;
    while (line_start > start && lx->src[line_start - 1] != '\n') line_start--;
    bool found_newline = line_start > start;
    if (!found_newline && !lx->line_starting) return end; /* not at a line start */
    if (line_start == end) return end; /* nothing between the line start and the tag */
    for (size_t p = line_start; p < end;) {
        size_t k = space_at(lx, p);
        if (!k) return end;
        p += k;
    }
    return line_start;
}

static snug_status push_data(lexer *lx, size_t start, size_t end)
{
    if (end <= start) return SNUG_OK;
    jj_token *t = push(lx, TK_DATA, start);
    if (!t) return lx->err ? lx->err->status : SNUG_NOMEM;
    t->s = lx->src + start;
    t->n = end - start;
    return SNUG_OK;
}

/* Matches "{%[-+]?\s*raw\s*(-%}\s*|%})" at p: its end, or 0. */
static size_t match_raw_begin(const lexer *lx, size_t p, char *sign)
{
    size_t q = p + 2;
    *sign = 0;
    if (q < lx->n && (lx->src[q] == '-' || lx->src[q] == '+')) *sign = lx->src[q++];
    q = skip_spaces(lx, q);
    if (!starts(lx, q, "raw")) return 0;
    q = skip_spaces(lx, q + 3);
    if (starts(lx, q, "-%}")) return skip_spaces(lx, q + 3);
    if (starts(lx, q, "%}")) return q + 2;
    return 0;
}

/* Matches "{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)" at p: its end, or 0. */
static size_t match_raw_end(const lexer *lx, size_t p, char *sign)
{
    if (!starts(lx, p, "{%")) return 0;
    size_t q = p + 2;
    *sign = 0;
    if (q < lx->n && (lx->src[q] == '-' || lx->src[q] == '+')) *sign = lx->src[q++];
    q = skip_spaces(lx, q);
    if (!starts(lx, q, "endraw")) return 0;
    q = skip_spaces(lx, q + 6);
    if (starts(lx, q, "+%}")) return q + 3;
    if (starts(lx, q, "-%}")) return skip_spaces(lx, q + 3);
    if (starts(lx, q, "%}")) return q + 2 + (q + 2 < lx->n && lx->src[q + 2] == '\n');
    return 0;
}

static void after_match(lexer *lx, size_t end)
{
    lx->line_starting = end > 0 && lx->src[end - 1] == '\n';
    lx->pos = end;
}

static snug_status lex_comment(lexer *lx, size_t begin)
{
    if (lx->pos >= lx->n) return SNUG_OK; /* Jinja's lexer stops quietly at the end */
    for (size_t p = lx->pos; p < lx->n; p++) {
        if (lx->src[p] == '+' && starts(lx, p + 1, "#}")) {
            after_match(lx, p + 3);
            return SNUG_OK;
        }
        if (lx->src[p] == '-' && starts(lx, p + 1, "#}")) {
            after_match(lx, skip_spaces(lx, p + 3));
            return SNUG_OK;
        }
        if (starts(lx, p, "#}")) {
            size_t end = p + 2;
            if (end < lx->n && lx->src[end] == '\n') end++;
            after_match(lx, end);
            return SNUG_OK;
        }
    }
    return lex_fail(lx, begin, SNUG_FORMAT, "missing end of comment tag");
}

static snug_status lex_raw(lexer *lx, size_t begin)
{
    if (lx->pos >= lx->n) return SNUG_OK; /* as for comments */
    for (size_t p = lx->pos; p < lx->n; p++) {
        char sign = 0;
        size_t end = match_raw_end(lx, p, &sign);
        if (!end) continue;
        size_t text_end = strip_before(lx, lx->pos, p, sign, true);
        snug_status st = push_data(lx, lx->pos, text_end);
        if (st != SNUG_OK) return st;
        after_match(lx, end);
        return SNUG_OK;
    }
    return lex_fail(lx, begin, SNUG_FORMAT, "missing end of raw directive");
}

/* ---- tokens inside tags ----------------------------------------------------------- */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

/* Matches (\d+_)*\d+ at p: its end, or p. */
static size_t match_digits(const lexer *lx, size_t p, bool (*ok)(char))
{
    size_t q = p;
    if (q >= lx->n || !ok(lx->src[q])) return p;
    while (q < lx->n && ok(lx->src[q])) q++;
    while (q + 1 < lx->n && lx->src[q] == '_' && ok(lx->src[q + 1])) {
        q++;
        while (q < lx->n && ok(lx->src[q])) q++;
    }
    return q;
}

static bool dec_ok(char c) { return is_digit(c); }
static bool bin_ok(char c) { return c == '0' || c == '1'; }
static bool oct_ok(char c) { return c >= '0' && c <= '7'; }
static bool hex_ok(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* float_re: its end, or 0. */
static size_t match_float(const lexer *lx, size_t p)
{
    if (p > 0 && lx->src[p - 1] == '.') return 0;
    size_t q = match_digits(lx, p, dec_ok);
    if (q == p) return 0;
    size_t frac = 0;
    if (q < lx->n && lx->src[q] == '.') {
        size_t r = match_digits(lx, q + 1, dec_ok);
        if (r > q + 1) frac = r;
    }
    size_t e = frac ? frac : q;
    if (e < lx->n && (lx->src[e] == 'e' || lx->src[e] == 'E')) {
        size_t r = e + 1;
        if (r < lx->n && (lx->src[r] == '+' || lx->src[r] == '-')) r++;
        size_t s = match_digits(lx, r, dec_ok);
        if (s > r) return s;
    }
    return frac;
}

/* integer_re: its end, or 0; *base gets 2, 8, 10 or 16. */
static size_t match_int(const lexer *lx, size_t p, int *base)
{
    const char *s = lx->src;
    if (p + 1 < lx->n && s[p] == '0') {
        char c = s[p + 1];
        int b = (c == 'b' || c == 'B') ? 2 : (c == 'o' || c == 'O') ? 8 : (c == 'x' || c == 'X') ? 16 : 0;
        if (b) {
            bool (*ok)(char) = b == 2 ? bin_ok : b == 8 ? oct_ok : hex_ok;
            /* (_?[digit])+ */
            size_t q = p + 2;
            for (;;) {
                size_t r = q;
                if (r < lx->n && s[r] == '_') r++;
                if (r < lx->n && ok(s[r]))
                    q = r + 1;
                else
                    break;
            }
            if (q > p + 2) {
                *base = b;
                return q;
            }
        }
    }
    *base = 10;
    if (p < lx->n && s[p] >= '1' && s[p] <= '9') {
        size_t q = p + 1;
        for (;;) {
            size_t r = q;
            if (r < lx->n && s[r] == '_') r++;
            if (r < lx->n && is_digit(s[r]))
                q = r + 1;
            else
                break;
        }
        return q;
    }
    if (p < lx->n && s[p] == '0') { /* 0(_?0)* */
        size_t q = p + 1;
        for (;;) {
            size_t r = q;
            if (r < lx->n && s[r] == '_') r++;
            if (r < lx->n && s[r] == '0')
                q = r + 1;
            else
                break;
        }
        return q;
    }
    return 0;
}

static snug_status push_number(lexer *lx, size_t p, size_t end, bool is_float, int base)
{
    char buf[128];
    size_t n = 0;
    bool too_long = false;
    for (size_t i = p; i < end; i++) {
        if (lx->src[i] == '_') continue;
        if (n + 1 >= sizeof buf) {
            too_long = true;
            break;
        }
        buf[n++] = lx->src[i];
    }
    buf[n] = '\0';
    jj_token *t = push(lx, is_float ? TK_FLOAT : TK_INT, p);
    if (!t) return lx->err ? lx->err->status : SNUG_NOMEM;
    if (is_float) {
        if (too_long) return lex_fail(lx, p, SNUG_UNSUPPORTED, "a float literal this long is not supported");
        t->f = strtod(buf, NULL);
        return SNUG_OK;
    }
    const char *digits = base == 10 ? buf : buf + 2;
    errno = 0;
    char *endp = NULL;
    unsigned long long v = strtoull(digits, &endp, base);
    if (too_long || errno == ERANGE || v > (unsigned long long)INT64_MAX)
        return lex_fail(lx, p, SNUG_UNSUPPORTED, "integers beyond 64 bits are not supported");
    t->i = (int64_t)v;
    return SNUG_OK;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Unescapes the string literal between p and end (quotes excluded) as
 * `.encode("ascii", "backslashreplace").decode("unicode-escape")` does. */
static snug_status unescape(lexer *lx, size_t p, size_t end, jj_token *t)
{
    /* Every escape shrinks or keeps the length, except a backslash before a
     * non-ASCII character ("\é" gives "\xe9": at most 10 bytes for 5). */
    size_t cap = 0;
    if (!snug_mul_size(end - p, 3, &cap) || !snug_add_size(cap, 1, &cap))
        return lex_fail(lx, p, SNUG_INVALID, "string literal too large");
    char *out = jj_arena_alloc(lx->arena, cap, lx->err);
    if (!out) return lx->err ? lx->err->status : SNUG_NOMEM;
    size_t o = 0;
    const char *s = lx->src;
    for (size_t i = p; i < end;) {
        if (s[i] != '\\') {
            out[o++] = s[i++];
            continue;
        }
        size_t esc = i;
        i++; /* the string regex guarantees a character follows */
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t adv = 1;
            uint32_t cp = jj_utf8_next(s + i, end - i, &adv);
            o += (size_t)(cp < 0x100   ? sprintf(out + o, "\\x%02x", cp)
                          : cp < 0x10000 ? sprintf(out + o, "\\u%04x", cp)
                                         : sprintf(out + o, "\\U%08x", cp));
            i += adv;
            continue;
        }
        i++;
        uint32_t cp = 0;
        int want = 0;
        switch (c) {
        case '\n': continue;
        case '\\': out[o++] = '\\'; continue;
        case '\'': out[o++] = '\''; continue;
        case '"': out[o++] = '"'; continue;
        case 'a': out[o++] = '\a'; continue;
        case 'b': out[o++] = '\b'; continue;
        case 'f': out[o++] = '\f'; continue;
        case 'n': out[o++] = '\n'; continue;
        case 'r': out[o++] = '\r'; continue;
        case 't': out[o++] = '\t'; continue;
        case 'v': out[o++] = '\v'; continue;
        case 'x': want = 2; break;
        case 'u': want = 4; break;
        case 'U': want = 8; break;
        case 'N':
            return lex_fail(lx, esc, SNUG_UNSUPPORTED, "the \\N{...} string escape is not supported");
        default:
            if (c >= '0' && c <= '7') {
                cp = c - '0';
                for (int k = 0; k < 2 && i < end && s[i] >= '0' && s[i] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(s[i++] - '0');
                o += jj_utf8_put(cp, out + o);
            } else {
                out[o++] = '\\';
                out[o++] = (char)c;
            }
            continue;
        }
        for (int k = 0; k < want; k++) {
            int h = i < end ? hex_value(s[i]) : -1;
            if (h < 0)
                return lex_fail(lx, esc, SNUG_FORMAT, "truncated \\%c escape in a string", c);
            cp = cp * 16 + (uint32_t)h;
            i++;
        }
        if (cp > 0x10FFFF)
            return lex_fail(lx, esc, SNUG_FORMAT, "illegal Unicode character in a string escape");
        if (cp >= 0xD800 && cp <= 0xDFFF)
            return lex_fail(lx, esc, SNUG_UNSUPPORTED,
                            "a string escape for a lone surrogate is not supported");
        o += jj_utf8_put(cp, out + o);
    }
    out[o] = '\0';
    t->s = out;
    t->n = o;
    return SNUG_OK;
}

static const struct {
    const char *text;
    jj_tok_op op;
} g_operators[] = {
    {"//", TO_FLOORDIV}, {"**", TO_POW}, {"==", TO_EQ}, {"!=", TO_NE}, {">=", TO_GE},
    {"<=", TO_LE}, {"+", TO_ADD}, {"-", TO_SUB}, {"/", TO_DIV}, {"*", TO_MUL},
    {"%", TO_MOD}, {"~", TO_TILDE}, {"[", TO_LBRACKET}, {"]", TO_RBRACKET},
    {"(", TO_LPAREN}, {")", TO_RPAREN}, {"{", TO_LBRACE}, {"}", TO_RBRACE},
    {">", TO_GT}, {"<", TO_LT}, {"=", TO_ASSIGN}, {".", TO_DOT}, {":", TO_COLON},
    {"|", TO_PIPE}, {",", TO_COMMA}, {";", TO_SEMICOLON},
};

static snug_status lex_operator(lexer *lx, size_t p, size_t *end)
{
    for (size_t k = 0; k < SNUG_ARRAY_LEN(g_operators); k++) {
        if (!starts(lx, p, g_operators[k].text)) continue;
        char c = g_operators[k].text[0];
        if (g_operators[k].text[1] == '\0' && (c == '{' || c == '(' || c == '[')) {
            if (lx->n_brackets == BRACKETS_MAX)
                return lex_fail(lx, p, SNUG_UNSUPPORTED,
                                "brackets nested deeper than %d are not supported", BRACKETS_MAX);
            lx->brackets[lx->n_brackets++] = c == '{' ? '}' : c == '(' ? ')' : ']';
        } else if (g_operators[k].text[1] == '\0' && (c == '}' || c == ')' || c == ']')) {
            if (lx->n_brackets == 0) return lex_fail(lx, p, SNUG_FORMAT, "unexpected '%c'", c);
            char want = lx->brackets[--lx->n_brackets];
            if (want != c)
                return lex_fail(lx, p, SNUG_FORMAT, "unexpected '%c', expected '%c'", c, want);
        }
        jj_token *t = push(lx, TK_OP, p);
        if (!t) return lx->err ? lx->err->status : SNUG_NOMEM;
        t->op = (uint8_t)g_operators[k].op;
        *end = p + strlen(g_operators[k].text);
        return SNUG_OK;
    }
    *end = p;
    return SNUG_OK;
}

/* Lexes the inside of a {{ }} or {% %} tag up to and including its end. */
static snug_status lex_tag(lexer *lx, bool block, size_t begin)
{
    lx->n_brackets = 0;
    snug_status st = SNUG_OK;
    for (;;) {
        size_t p = lx->pos;
        if (p >= lx->n) return lex_fail(lx, begin, SNUG_FORMAT, "unexpected end of template inside a tag");
        if (lx->n_brackets == 0) {
            size_t end = 0;
            if (block) {
                if (starts(lx, p, "+%}"))
                    end = p + 3;
                else if (starts(lx, p, "-%}"))
                    end = skip_spaces(lx, p + 3);
                else if (starts(lx, p, "%}"))
                    end = p + 2 + (p + 2 < lx->n && lx->src[p + 2] == '\n');
            } else {
                if (starts(lx, p, "-}}"))
                    end = skip_spaces(lx, p + 3);
                else if (starts(lx, p, "}}"))
                    end = p + 2;
            }
            if (end) {
                if (!push(lx, block ? TK_BLOCK_END : TK_VAR_END, p))
                    return lx->err ? lx->err->status : SNUG_NOMEM;
                after_match(lx, end);
                return SNUG_OK;
            }
        }
        size_t ws = skip_spaces(lx, p);
        if (ws > p) {
            after_match(lx, ws);
            continue;
        }
        const char *s = lx->src;
        char c = s[p];
        size_t end = match_float(lx, p);
        if (end) {
            st = push_number(lx, p, end, true, 10);
        } else if (is_digit(c)) {
            int base = 10;
            end = match_int(lx, p, &base);
            st = push_number(lx, p, end, false, base);
        } else if (is_name_start(c)) {
            end = p + 1;
            while (end < lx->n && is_name_char(s[end])) end++;
            jj_token *t = push(lx, TK_NAME, p);
            if (!t) return lx->err ? lx->err->status : SNUG_NOMEM;
            t->s = s + p;
            t->n = end - p;
        } else if (c == '\'' || c == '"') {
            size_t q = p + 1;
            while (q < lx->n && s[q] != c) q += s[q] == '\\' && q + 1 < lx->n ? 2 : 1;
            if (q >= lx->n) return lex_fail(lx, p, SNUG_FORMAT, "unterminated string literal");
            jj_token *t = push(lx, TK_STRING, p);
            if (!t) return lx->err ? lx->err->status : SNUG_NOMEM;
            st = unescape(lx, p + 1, q, t);
            end = q + 1;
        } else {
            st = lex_operator(lx, p, &end);
            if (st == SNUG_OK && end == p) {
                if ((unsigned char)c >= 0x80)
                    return lex_fail(lx, p, SNUG_UNSUPPORTED,
                                    "non-ASCII characters in a tag (outside strings) are not supported");
                char shown[8];
                return lex_fail(lx, p, SNUG_FORMAT, "unexpected character '%s'",
                                snug_bytes_shown(&c, 1, shown, sizeof shown));
            }
        }
        if (st != SNUG_OK) return st;
        after_match(lx, end);
    }
}

snug_status jj_lex(const char *src, size_t n, const char *name, jj_arena *arena,
                   jj_tokens *out, snug_error *err)
{
    lexer lx = {.src = src, .n = n, .name = name, .arena = arena, .err = err,
                .line_starting = true, .at_line = 1, .at_col = 1};
    snug_status st = SNUG_OK;
    while (lx.pos < n && st == SNUG_OK) {
        /* the next tag start */
        size_t p = lx.pos;
        char kind = 0, sign = 0;
        size_t raw_end = 0;
        for (; p + 1 < n; p++) {
            if (src[p] != '{') continue;
            char c = src[p + 1];
            if (c == '%' && (raw_end = match_raw_begin(&lx, p, &sign)) > 0) {
                kind = 'r';
                break;
            }
            if (c == '{' || c == '%' || c == '#') {
                kind = c;
                sign = (p + 2 < n && (src[p + 2] == '-' || src[p + 2] == '+')) ? src[p + 2] : 0;
                break;
            }
        }
        if (!kind) {
            st = push_data(&lx, lx.pos, n);
            lx.pos = n;
            break;
        }
        size_t text_end = strip_before(&lx, lx.pos, p, sign, kind != '{');
        st = push_data(&lx, lx.pos, text_end);
        if (st != SNUG_OK) break;
        if (kind == 'r') {
            after_match(&lx, raw_end);
            st = lex_raw(&lx, p);
            continue;
        }
        after_match(&lx, p + 2 + (sign != 0));
        if (kind == '#') {
            st = lex_comment(&lx, p);
        } else {
            if (!push(&lx, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, p)) {
                st = err ? err->status : SNUG_NOMEM;
                break;
            }
            st = lex_tag(&lx, kind == '%', p);
        }
    }
    if (st == SNUG_OK && !push(&lx, TK_EOF, n)) st = err ? err->status : SNUG_NOMEM;
    if (st != SNUG_OK) return st;
    out->v = lx.toks;
    out->n = lx.n_toks;
    return SNUG_OK;
}
