/*
 * jinja_parse.c: tokens to a syntax tree, following jinja2/parser.py (the
 * same precedence, the same quirks), and the place where a construct the
 * interpreter does not support is refused, naming it and its line:column.
 *
 * Supported:
 *   {{ expr }}, {% stmt %}, {# comment #}, {% raw %}, whitespace control;
 *   literals: strings (Python escapes), ints (0x/0o/0b, _), floats, true,
 *     false, none (and True, False, None), lists, tuples, dicts;
 *   names, a.b, a[b], a[i:j:k], calls with positional and keyword
 *     arguments, filters a|f(...), tests a is [not] t(...);
 *   + - * / // % ** ~, unary - + not, and or, == != < <= > >= (chained),
 *     in, not in, x if c else y;
 *   {% if/elif/else %}, {% for x[, y] in seq [if cond] %} with else and
 *     loop.index/index0/revindex/revindex0/first/last/length/previtem/
 *     nextitem/cycle(), break, continue, {% set %} (names, tuples,
 *     namespace attributes, block form with filters), {% macro %} (top
 *     level; positional, keyword and default arguments), {% print %},
 *     {% generation %} (transformers' tag);
 *   globals range(), namespace(), dict(), raise_exception();
 *   the filters and tests of jinja_builtins.c, and the str/dict methods
 *     strip lstrip rstrip startswith endswith split rsplit splitlines upper
 *     lower title capitalize replace find count join removeprefix
 *     removesuffix items keys values get, and loop.cycle.
 * Refused at compile (SNUG_UNSUPPORTED): extends, include, import, from,
 *   block, call, filter blocks, with, autoescape, recursive loops, macros
 *   inside loops or macros, macros reading varargs/kwargs/caller, *args and
 *   **kwargs in calls, nested tuple targets, the globals cycler, joiner and
 *   lipsum, any other filter, test or method, non-ASCII names, integers
 *   beyond 64 bits, and nesting deeper than the limits below.
 * Refused while rendering (SNUG_UNSUPPORTED), where Python would go on:
 *   printing a function or generator (Python prints a memory address),
 *   integer results beyond 64 bits, changing the case of letters outside
 *   ASCII, Latin-1, Latin Extended-A and Cyrillic (Greek, for one),
 *   printf-style `str % x`, keeping a `loop` in a namespace, calling a
 *   macro stored in a namespace as a method, `sameas` on other than none,
 *   booleans and small integers, round() of a float to negative digits.
 * Known differences that render (all in code no chat template has):
 *   Jinja folds constant expressions at compile time, and the fold turns
 *   the slice of a literal that cannot be sliced ({{ none[1:] }}) into
 *   nothing, where here (as Jinja does for a variable) it fails; repr()
 *   escapes control, format, separator and private-use characters but
 *   not unassigned code points; a for loop's `if` filter is evaluated for
 *   every item before the body first runs.
 */
#include "jinja_impl.h"

#include <stdio.h>
#include <string.h>

enum {
    NESTING_MAX = 100, /* blocks inside blocks, brackets inside brackets */
    HEIGHT_MAX = 200   /* operators applied to operators */
};

typedef struct parser {
    snug_template *t;
    const jj_token *tok;
    size_t n, i;
    snug_error *err;
    int nesting;
    int loop_depth;   /* for bodies around the current point (0 in a macro) */
    int scope_depth;  /* for, macro and generation bodies around */
    bool in_macro;
} parser;

typedef struct nvec {
    jj_node **v;
    uint32_t n, cap;
} nvec;

static const jj_token *cur(const parser *p) { return &p->tok[p->i]; }
static const jj_token *peek(const parser *p, size_t k)
{
    return &p->tok[p->i + k < p->n ? p->i + k : p->n - 1];
}
static void next(parser *p)
{
    if (p->i + 1 < p->n) p->i++;
}

static bool tok_name(const jj_token *t, const char *s)
{
    size_t n = strlen(s);
    return t->type == TK_NAME && t->n == n && memcmp(t->s, s, n) == 0;
}
static bool tok_op(const jj_token *t, jj_tok_op op) { return t->type == TK_OP && t->op == op; }

static snug_status fail(parser *p, const jj_token *at, snug_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static snug_status fail(parser *p, const jj_token *at, snug_status status, const char *fmt, ...)
{
    char place[256];
    snprintf(place, sizeof place, "%s:%u:%u", p->t->name, at->line, at->col);
    va_list ap;
    va_start(ap, fmt);
    snug_status st = snug_verrorf_at(p->err, status, place, fmt, ap);
    va_end(ap);
    return st;
}

static snug_status nomem(parser *p) { return p->err ? p->err->status : SNUG_NOMEM; }

/* Describes a token for messages. */
static const char *describe(const jj_token *t, char *buf, size_t size)
{
    switch ((jj_tok_type)t->type) {
    case TK_EOF: return "end of template";
    case TK_DATA: return "template data";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "end of print statement";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "end of statement block";
    case TK_NAME: snprintf(buf, size, "'%.*s'", (int)SNUG_MIN(t->n, 40), t->s); return buf;
    case TK_STRING: return "a string";
    case TK_INT: return "an integer";
    case TK_FLOAT: return "a float";
    case TK_OP: return "an operator";
    }
    return "a token";
}

static snug_status unexpected(parser *p, const char *wanted)
{
    char buf[64];
    return fail(p, cur(p), SNUG_FORMAT, "expected %s, got %s", wanted,
                describe(cur(p), buf, sizeof buf));
}

static snug_status expect_op(parser *p, jj_tok_op op, const char *text)
{
    if (!tok_op(cur(p), op)) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", text);
        return unexpected(p, want);
    }
    next(p);
    return SNUG_OK;
}

static snug_status expect_type(parser *p, jj_tok_type type, const char *what)
{
    if (cur(p)->type != type) return unexpected(p, what);
    next(p);
    return SNUG_OK;
}

static char *name_of(parser *p, const jj_token *t)
{
    return jj_arena_strndup(&p->t->arena, t->s, t->n, p->err);
}

static jj_node *node_new(parser *p, jj_node_type type, const jj_token *at)
{
    jj_node *n = jj_arena_alloc(&p->t->arena, sizeof *n, p->err);
    if (!n) return NULL;
    n->type = (uint8_t)type;
    n->line = at->line;
    n->col = at->col;
    n->height = 1;
    return n;
}

/* Accounts for a child's height; fails past HEIGHT_MAX. */
static snug_status grow(parser *p, jj_node *n, const jj_node *child)
{
    if (child && child->height + 1 > n->height) n->height = child->height + 1;
    if (n->height > HEIGHT_MAX) {
        jj_token at = {.line = n->line, .col = n->col};
        return fail(p, &at, SNUG_UNSUPPORTED,
                    "expressions nested deeper than %d operators are not supported", HEIGHT_MAX);
    }
    return SNUG_OK;
}

static snug_status nvec_push(parser *p, nvec *v, jj_node *n)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 4;
        jj_node **a = jj_arena_alloc(&p->t->arena, cap * sizeof *a, p->err);
        if (!a) return nomem(p);
        if (v->n) memcpy(a, v->v, v->n * sizeof *a);
        v->v = a;
        v->cap = cap;
    }
    v->v[v->n++] = n;
    return SNUG_OK;
}

static snug_status names_push(parser *p, const char ***names, uint32_t *n, uint32_t *cap,
                              const char *name)
{
    if (*n == *cap) {
        uint32_t c = *cap ? *cap * 2 : 4;
        const char **a = jj_arena_alloc(&p->t->arena, c * sizeof *a, p->err);
        if (!a) return nomem(p);
        if (*n) memcpy(a, *names, *n * sizeof *a);
        *names = a;
        *cap = c;
    }
    (*names)[(*n)++] = name;
    return SNUG_OK;
}

static snug_status enter(parser *p)
{
    if (++p->nesting > NESTING_MAX)
        return fail(p, cur(p), SNUG_UNSUPPORTED,
                    "nesting deeper than %d levels is not supported", NESTING_MAX);
    return SNUG_OK;
}

/* ---- expressions --------------------------------------------------------------- */

static snug_status parse_expression(parser *p, bool with_condexpr, jj_node **out);
static snug_status parse_unary(parser *p, bool with_filter, jj_node **out);
static snug_status parse_or(parser *p, jj_node **out);

/* Returns whether the current token ends a tuple. */
static bool tuple_end(const parser *p, const char *extra)
{
    const jj_token *t = cur(p);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || tok_op(t, TO_RPAREN)) return true;
    return extra && tok_name(t, extra);
}

/* parse_tuple: expressions separated by commas (a tuple when there is a
 * comma). */
static snug_status parse_tuple(parser *p, bool with_condexpr, const char *extra_end,
                               bool explicit_parens, jj_node **out)
{
    const jj_token *start = cur(p);
    nvec items = {0};
    bool is_tuple = false;
    snug_status st;
    for (;;) {
        if (items.n && (st = expect_op(p, TO_COMMA, ",")) != SNUG_OK) return st;
        if (tuple_end(p, extra_end)) break;
        jj_node *e = NULL;
        if ((st = parse_expression(p, with_condexpr, &e)) != SNUG_OK) return st;
        if ((st = nvec_push(p, &items, e)) != SNUG_OK) return st;
        if (tok_op(cur(p), TO_COMMA))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (items.n) {
            *out = items.v[0];
            return SNUG_OK;
        }
        if (!explicit_parens) return unexpected(p, "an expression");
    }
    jj_node *n = node_new(p, N_TUPLE, start);
    if (!n) return nomem(p);
    n->items = items.v;
    n->n_items = items.n;
    for (uint32_t k = 0; k < items.n; k++)
        if ((st = grow(p, n, items.v[k])) != SNUG_OK) return st;
    *out = n;
    return SNUG_OK;
}

/* ( args, name=value, ... ) after the current '('. */
static snug_status parse_call_args(parser *p, jj_node *n)
{
    const jj_token *open = cur(p);
    snug_status st = expect_op(p, TO_LPAREN, "(");
    if (st != SNUG_OK) return st;
    nvec args = {0}, kwargs = {0};
    const char **names = NULL;
    uint32_t n_names = 0, cap_names = 0;
    bool need_comma = false;
    while (!tok_op(cur(p), TO_RPAREN)) {
        if (need_comma) {
            if ((st = expect_op(p, TO_COMMA, ",")) != SNUG_OK) return st;
            if (tok_op(cur(p), TO_RPAREN)) break;
        }
        if (tok_op(cur(p), TO_MUL) || tok_op(cur(p), TO_POW))
            return fail(p, cur(p), SNUG_UNSUPPORTED,
                        "*args and **kwargs in calls are not supported");
        jj_node *e = NULL;
        if (cur(p)->type == TK_NAME && tok_op(peek(p, 1), TO_ASSIGN)) {
            char *name = name_of(p, cur(p));
            if (!name) return nomem(p);
            next(p);
            next(p);
            if ((st = parse_expression(p, true, &e)) != SNUG_OK) return st;
            if ((st = nvec_push(p, &kwargs, e)) != SNUG_OK) return st;
            if ((st = names_push(p, &names, &n_names, &cap_names, name)) != SNUG_OK) return st;
        } else {
            if (kwargs.n)
                return fail(p, open, SNUG_FORMAT, "invalid syntax for function call expression");
            if ((st = parse_expression(p, true, &e)) != SNUG_OK) return st;
            if ((st = nvec_push(p, &args, e)) != SNUG_OK) return st;
        }
        if ((st = grow(p, n, e)) != SNUG_OK) return st;
        need_comma = true;
    }
    next(p); /* ')' */
    n->items = args.v;
    n->n_items = args.n;
    n->items2 = kwargs.v;
    n->n_items2 = kwargs.n;
    n->names = names;
    n->n_names = n_names;
    return SNUG_OK;
}

/* A filter or test name (dotted names are kept whole, and never known). */
static snug_status parse_dotted_name(parser *p, char **out)
{
    const jj_token *t = cur(p);
    if (t->type != TK_NAME) return unexpected(p, "a name");
    size_t len = t->n;
    const char *s = t->s;
    next(p);
    char buf[256];
    size_t n = SNUG_MIN(len, sizeof buf - 1);
    memcpy(buf, s, n);
    while (tok_op(cur(p), TO_DOT)) {
        next(p);
        if (cur(p)->type != TK_NAME) return unexpected(p, "a name");
        size_t k = SNUG_MIN(cur(p)->n, sizeof buf - 2 - n);
        buf[n++] = '.';
        memcpy(buf + n, cur(p)->s, k);
        n += k;
        next(p);
    }
    *out = jj_arena_strndup(&p->t->arena, buf, n, p->err);
    return *out ? SNUG_OK : nomem(p);
}

static snug_status parse_filter(parser *p, jj_node *input, jj_node **out)
{
    snug_status st;
    while (tok_op(cur(p), TO_PIPE)) {
        next(p);
        const jj_token *at = cur(p);
        char *name = NULL;
        if ((st = parse_dotted_name(p, &name)) != SNUG_OK) return st;
        int id = jj_filter_lookup(name);
        if (id < 0) return fail(p, at, SNUG_UNSUPPORTED, "the filter '%s' is not supported", name);
        jj_node *n = node_new(p, N_FILTER, at);
        if (!n) return nomem(p);
        n->op = (uint8_t)id;
        n->name = name;
        n->a = input;
        if ((st = grow(p, n, input)) != SNUG_OK) return st;
        if (tok_op(cur(p), TO_LPAREN) && (st = parse_call_args(p, n)) != SNUG_OK) return st;
        input = n;
    }
    *out = input;
    return SNUG_OK;
}

static snug_status parse_primary(parser *p, jj_node **out);
static snug_status parse_postfix(parser *p, jj_node **node);

static snug_status parse_test(parser *p, jj_node *input, jj_node **out)
{
    const jj_token *is = cur(p);
    next(p);
    bool negated = false;
    if (tok_name(cur(p), "not")) {
        next(p);
        negated = true;
    }
    const jj_token *at = cur(p);
    char *name = NULL;
    snug_status st = parse_dotted_name(p, &name);
    if (st != SNUG_OK) return st;
    int id = jj_test_lookup(name);
    if (id < 0) return fail(p, at, SNUG_UNSUPPORTED, "the test '%s' is not supported", name);
    jj_node *n = node_new(p, N_TEST, is);
    if (!n) return nomem(p);
    n->op = (uint8_t)id;
    n->name = name;
    n->a = input;
    if ((st = grow(p, n, input)) != SNUG_OK) return st;
    const jj_token *t = cur(p);
    if (tok_op(t, TO_LPAREN)) {
        if ((st = parse_call_args(p, n)) != SNUG_OK) return st;
    } else if ((t->type == TK_NAME || t->type == TK_STRING || t->type == TK_INT ||
                t->type == TK_FLOAT || tok_op(t, TO_LPAREN) || tok_op(t, TO_LBRACKET) ||
                tok_op(t, TO_LBRACE)) &&
               !tok_name(t, "else") && !tok_name(t, "or") && !tok_name(t, "and")) {
        if (tok_name(t, "is")) return fail(p, t, SNUG_FORMAT, "you cannot chain multiple tests with is");
        jj_node *arg = NULL;
        if ((st = parse_primary(p, &arg)) != SNUG_OK) return st;
        if ((st = parse_postfix(p, &arg)) != SNUG_OK) return st;
        jj_node **args = jj_arena_alloc(&p->t->arena, sizeof *args, p->err);
        if (!args) return nomem(p);
        args[0] = arg;
        n->items = args;
        n->n_items = 1;
        if ((st = grow(p, n, arg)) != SNUG_OK) return st;
    }
    if (negated) {
        jj_node *neg = node_new(p, N_NOT, is);
        if (!neg) return nomem(p);
        neg->a = n;
        if ((st = grow(p, neg, n)) != SNUG_OK) return st;
        n = neg;
    }
    *out = n;
    return SNUG_OK;
}

/* One subscript: an expression or a slice [a]:[b][:[c]]. */
static snug_status parse_subscribed(parser *p, jj_node **out, bool *is_slice)
{
    jj_node *parts[3] = {NULL, NULL, NULL};
    snug_status st;
    *is_slice = false;
    if (tok_op(cur(p), TO_COLON)) {
        next(p);
    } else {
        if ((st = parse_expression(p, true, &parts[0])) != SNUG_OK) return st;
        if (!tok_op(cur(p), TO_COLON)) {
            *out = parts[0];
            return SNUG_OK;
        }
        next(p);
    }
    *is_slice = true;
    if (!tok_op(cur(p), TO_COLON) && !tok_op(cur(p), TO_RBRACKET) && !tok_op(cur(p), TO_COMMA))
        if ((st = parse_expression(p, true, &parts[1])) != SNUG_OK) return st;
    if (tok_op(cur(p), TO_COLON)) {
        next(p);
        if (!tok_op(cur(p), TO_RBRACKET) && !tok_op(cur(p), TO_COMMA))
            if ((st = parse_expression(p, true, &parts[2])) != SNUG_OK) return st;
    }
    /* the slice node is filled by the caller: b, c, d */
    jj_node *n = node_new(p, N_SLICE, cur(p));
    if (!n) return nomem(p);
    n->b = parts[0];
    n->c = parts[1];
    n->d = parts[2];
    *out = n;
    return SNUG_OK;
}

static snug_status parse_subscript(parser *p, jj_node **node)
{
    const jj_token *at = cur(p);
    snug_status st;
    if (tok_op(at, TO_DOT)) {
        next(p);
        const jj_token *t = cur(p);
        jj_node *n = NULL;
        if (t->type == TK_NAME) {
            if (t->n >= 2 && t->s[0] == '_' && t->s[1] == '_')
                return fail(p, t, SNUG_UNSUPPORTED, "attributes starting with '__' are not supported");
            n = node_new(p, N_ATTR, at);
            if (!n) return nomem(p);
            if (!(n->name = name_of(p, t))) return nomem(p);
        } else if (t->type == TK_INT) {
            n = node_new(p, N_ITEM, at);
            jj_node *k = node_new(p, N_CONST, t);
            if (!n || !k) return nomem(p);
            k->value = jj_int(t->i);
            n->b = k;
        } else {
            return unexpected(p, "a name or number");
        }
        next(p);
        n->a = *node;
        if ((st = grow(p, n, *node)) != SNUG_OK) return st;
        *node = n;
        return SNUG_OK;
    }
    next(p); /* '[' */
    nvec args = {0};
    bool any_slice = false;
    while (!tok_op(cur(p), TO_RBRACKET)) {
        if (args.n && (st = expect_op(p, TO_COMMA, ",")) != SNUG_OK) return st;
        jj_node *e = NULL;
        bool is_slice = false;
        if ((st = parse_subscribed(p, &e, &is_slice)) != SNUG_OK) return st;
        any_slice |= is_slice;
        if ((st = nvec_push(p, &args, e)) != SNUG_OK) return st;
    }
    if ((st = expect_op(p, TO_RBRACKET, "]")) != SNUG_OK) return st;
    if (args.n == 0) return fail(p, at, SNUG_FORMAT, "expected subscript expression");
    jj_node *n = NULL;
    if (args.n == 1 && args.v[0]->type == N_SLICE) {
        n = args.v[0];
        n->line = at->line;
        n->col = at->col;
        for (int k = 0; k < 3; k++)
            if ((st = grow(p, n, k == 0 ? n->b : k == 1 ? n->c : n->d)) != SNUG_OK) return st;
    } else if (any_slice) {
        return fail(p, at, SNUG_UNSUPPORTED, "a slice inside a tuple subscript is not supported");
    } else {
        n = node_new(p, N_ITEM, at);
        if (!n) return nomem(p);
        if (args.n == 1) {
            n->b = args.v[0];
        } else {
            jj_node *tup = node_new(p, N_TUPLE, at);
            if (!tup) return nomem(p);
            tup->items = args.v;
            tup->n_items = args.n;
            for (uint32_t k = 0; k < args.n; k++)
                if ((st = grow(p, tup, args.v[k])) != SNUG_OK) return st;
            n->b = tup;
        }
        if ((st = grow(p, n, n->b)) != SNUG_OK) return st;
    }
    n->a = *node;
    if ((st = grow(p, n, *node)) != SNUG_OK) return st;
    *node = n;
    return SNUG_OK;
}

static snug_status parse_call(parser *p, jj_node **node)
{
    const jj_token *at = cur(p);
    jj_node *callee = *node;
    if (callee->type == N_ATTR && jj_method_lookup(callee->name) < 0)
        return fail(p, at, SNUG_UNSUPPORTED, "the method '%s' is not supported", callee->name);
    if (callee->type == N_NAME &&
        (strcmp(callee->name, "cycler") == 0 || strcmp(callee->name, "joiner") == 0 ||
         strcmp(callee->name, "lipsum") == 0))
        return fail(p, at, SNUG_UNSUPPORTED, "the global '%s' is not supported", callee->name);
    jj_node *n = node_new(p, N_CALL, at);
    if (!n) return nomem(p);
    n->a = callee;
    snug_status st = grow(p, n, callee);
    if (st == SNUG_OK) st = parse_call_args(p, n);
    if (st != SNUG_OK) return st;
    *node = n;
    return SNUG_OK;
}

static snug_status parse_postfix(parser *p, jj_node **node)
{
    snug_status st = SNUG_OK;
    for (;;) {
        const jj_token *t = cur(p);
        if (tok_op(t, TO_DOT) || tok_op(t, TO_LBRACKET))
            st = parse_subscript(p, node);
        else if (tok_op(t, TO_LPAREN))
            st = parse_call(p, node);
        else
            return SNUG_OK;
        if (st != SNUG_OK) return st;
    }
}

static snug_status parse_filter_expr(parser *p, jj_node **node)
{
    snug_status st = SNUG_OK;
    for (;;) {
        const jj_token *t = cur(p);
        if (tok_op(t, TO_PIPE))
            st = parse_filter(p, *node, node);
        else if (tok_name(t, "is"))
            st = parse_test(p, *node, node);
        else if (tok_op(t, TO_LPAREN))
            st = parse_call(p, node);
        else
            return SNUG_OK;
        if (st != SNUG_OK) return st;
    }
}

static snug_status parse_list_or_dict(parser *p, bool dict, jj_node **out)
{
    const jj_token *at = cur(p);
    next(p);
    jj_tok_op close = dict ? TO_RBRACE : TO_RBRACKET;
    jj_node *n = node_new(p, dict ? N_DICT : N_LIST, at);
    if (!n) return nomem(p);
    nvec keys = {0}, values = {0};
    snug_status st;
    while (!tok_op(cur(p), close)) {
        if (keys.n && (st = expect_op(p, TO_COMMA, ",")) != SNUG_OK) return st;
        if (tok_op(cur(p), close)) break;
        jj_node *k = NULL, *v = NULL;
        if ((st = parse_expression(p, true, &k)) != SNUG_OK) return st;
        if ((st = nvec_push(p, &keys, k)) != SNUG_OK) return st;
        if ((st = grow(p, n, k)) != SNUG_OK) return st;
        if (dict) {
            if ((st = expect_op(p, TO_COLON, ":")) != SNUG_OK) return st;
            if ((st = parse_expression(p, true, &v)) != SNUG_OK) return st;
            if ((st = nvec_push(p, &values, v)) != SNUG_OK) return st;
            if ((st = grow(p, n, v)) != SNUG_OK) return st;
        }
    }
    if ((st = expect_op(p, close, dict ? "}" : "]")) != SNUG_OK) return st;
    n->items = keys.v;
    n->n_items = keys.n;
    n->items2 = values.v;
    n->n_items2 = values.n;
    *out = n;
    return SNUG_OK;
}

static snug_status parse_primary(parser *p, jj_node **out)
{
    const jj_token *t = cur(p);
    snug_status st = enter(p);
    if (st != SNUG_OK) return st;
    jj_node *n = NULL;
    if (t->type == TK_NAME) {
        n = node_new(p, N_CONST, t);
        if (!n) return nomem(p);
        if (tok_name(t, "true") || tok_name(t, "True") || tok_name(t, "false") ||
            tok_name(t, "False")) {
            n->value = jj_bool(t->s[0] == 't' || t->s[0] == 'T');
        } else if (tok_name(t, "none") || tok_name(t, "None")) {
            n->value = jj_none();
        } else {
            n->type = N_NAME;
            if (!(n->name = name_of(p, t))) return nomem(p);
            if (p->in_macro && (strcmp(n->name, "varargs") == 0 ||
                                strcmp(n->name, "kwargs") == 0 || strcmp(n->name, "caller") == 0))
                return fail(p, t, SNUG_UNSUPPORTED, "'%s' in a macro is not supported", n->name);
        }
        next(p);
    } else if (t->type == TK_STRING) {
        /* adjacent strings are one literal */
        size_t total = 0, k = 0;
        for (; peek(p, k)->type == TK_STRING; k++) total += peek(p, k)->n;
        char *s = jj_arena_alloc(&p->t->arena, total + 1, p->err);
        n = node_new(p, N_CONST, t);
        if (!s || !n) return nomem(p);
        size_t off = 0;
        for (size_t j = 0; j < k; j++) {
            memcpy(s + off, cur(p)->s, cur(p)->n);
            off += cur(p)->n;
            next(p);
        }
        n->value = jj_str(s, total, false);
    } else if (t->type == TK_INT || t->type == TK_FLOAT) {
        n = node_new(p, N_CONST, t);
        if (!n) return nomem(p);
        n->value = t->type == TK_INT ? jj_int(t->i) : jj_float(t->f);
        next(p);
    } else if (tok_op(t, TO_LPAREN)) {
        next(p);
        if ((st = parse_tuple(p, true, NULL, true, &n)) != SNUG_OK) return st;
        if ((st = expect_op(p, TO_RPAREN, ")")) != SNUG_OK) return st;
    } else if (tok_op(t, TO_LBRACKET) || tok_op(t, TO_LBRACE)) {
        if ((st = parse_list_or_dict(p, tok_op(t, TO_LBRACE), &n)) != SNUG_OK) return st;
    } else {
        char buf[64];
        return fail(p, t, SNUG_FORMAT, "unexpected %s", describe(t, buf, sizeof buf));
    }
    p->nesting--;
    *out = n;
    return SNUG_OK;
}

static snug_status parse_unary(parser *p, bool with_filter, jj_node **out)
{
    const jj_token *t = cur(p);
    snug_status st = enter(p);
    if (st != SNUG_OK) return st;
    jj_node *n = NULL;
    if (tok_op(t, TO_SUB) || tok_op(t, TO_ADD)) {
        next(p);
        jj_node *operand = NULL;
        if ((st = parse_unary(p, false, &operand)) != SNUG_OK) return st;
        n = node_new(p, tok_op(t, TO_SUB) ? N_NEG : N_POS, t);
        if (!n) return nomem(p);
        n->a = operand;
        if ((st = grow(p, n, operand)) != SNUG_OK) return st;
    } else if ((st = parse_primary(p, &n)) != SNUG_OK) {
        return st;
    }
    if ((st = parse_postfix(p, &n)) != SNUG_OK) return st;
    if (with_filter && (st = parse_filter_expr(p, &n)) != SNUG_OK) return st;
    p->nesting--;
    *out = n;
    return SNUG_OK;
}

static snug_status binary(parser *p, jj_node_type type, jj_op op, const jj_token *at,
                          jj_node *a, jj_node *b, jj_node **out)
{
    jj_node *n = node_new(p, type, at);
    if (!n) return nomem(p);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    snug_status st = grow(p, n, a);
    if (st == SNUG_OK) st = grow(p, n, b);
    *out = n;
    return st;
}

static snug_status parse_pow(parser *p, jj_node **out)
{
    jj_node *left = NULL;
    snug_status st = parse_unary(p, true, &left);
    while (st == SNUG_OK && tok_op(cur(p), TO_POW)) {
        const jj_token *at = cur(p);
        next(p);
        jj_node *right = NULL;
        if ((st = parse_unary(p, true, &right)) != SNUG_OK) return st;
        st = binary(p, N_BIN, JJ_OP_POW, at, left, right, &left);
    }
    *out = left;
    return st;
}

static snug_status parse_math2(parser *p, jj_node **out)
{
    jj_node *left = NULL;
    snug_status st = parse_pow(p, &left);
    while (st == SNUG_OK) {
        const jj_token *at = cur(p);
        jj_op op;
        if (tok_op(at, TO_MUL))
            op = JJ_OP_MUL;
        else if (tok_op(at, TO_DIV))
            op = JJ_OP_DIV;
        else if (tok_op(at, TO_FLOORDIV))
            op = JJ_OP_FLOORDIV;
        else if (tok_op(at, TO_MOD))
            op = JJ_OP_MOD;
        else
            break;
        next(p);
        jj_node *right = NULL;
        if ((st = parse_pow(p, &right)) != SNUG_OK) return st;
        st = binary(p, N_BIN, op, at, left, right, &left);
    }
    *out = left;
    return st;
}

static snug_status parse_concat(parser *p, jj_node **out)
{
    const jj_token *at = cur(p);
    jj_node *first = NULL;
    snug_status st = parse_math2(p, &first);
    if (st != SNUG_OK || !tok_op(cur(p), TO_TILDE)) {
        *out = first;
        return st;
    }
    jj_node *n = node_new(p, N_CONCAT, at);
    if (!n) return nomem(p);
    nvec items = {0};
    if ((st = nvec_push(p, &items, first)) != SNUG_OK) return st;
    if ((st = grow(p, n, first)) != SNUG_OK) return st;
    while (tok_op(cur(p), TO_TILDE)) {
        next(p);
        jj_node *e = NULL;
        if ((st = parse_math2(p, &e)) != SNUG_OK) return st;
        if ((st = nvec_push(p, &items, e)) != SNUG_OK) return st;
        if ((st = grow(p, n, e)) != SNUG_OK) return st;
    }
    n->items = items.v;
    n->n_items = items.n;
    *out = n;
    return SNUG_OK;
}

static snug_status parse_math1(parser *p, jj_node **out)
{
    jj_node *left = NULL;
    snug_status st = parse_concat(p, &left);
    while (st == SNUG_OK && (tok_op(cur(p), TO_ADD) || tok_op(cur(p), TO_SUB))) {
        const jj_token *at = cur(p);
        jj_op op = tok_op(at, TO_ADD) ? JJ_OP_ADD : JJ_OP_SUB;
        next(p);
        jj_node *right = NULL;
        if ((st = parse_concat(p, &right)) != SNUG_OK) return st;
        st = binary(p, N_BIN, op, at, left, right, &left);
    }
    *out = left;
    return st;
}

static snug_status parse_compare(parser *p, jj_node **out)
{
    const jj_token *at = cur(p);
    jj_node *first = NULL;
    snug_status st = parse_math1(p, &first);
    if (st != SNUG_OK) return st;
    nvec operands = {0};
    uint8_t *ops = NULL;
    jj_node *n = NULL;
    for (;;) {
        const jj_token *t = cur(p);
        int op = -1;
        if (t->type == TK_OP) {
            switch ((jj_tok_op)t->op) {
            case TO_EQ: op = JJ_OP_EQ; break;
            case TO_NE: op = JJ_OP_NE; break;
            case TO_LT: op = JJ_OP_LT; break;
            case TO_LE: op = JJ_OP_LE; break;
            case TO_GT: op = JJ_OP_GT; break;
            case TO_GE: op = JJ_OP_GE; break;
            default: break;
            }
            if (op >= 0) next(p);
        } else if (tok_name(t, "in")) {
            op = JJ_OP_IN;
            next(p);
        } else if (tok_name(t, "not") && tok_name(peek(p, 1), "in")) {
            op = JJ_OP_NOTIN;
            next(p);
            next(p);
        }
        if (op < 0) break;
        if (!n) {
            n = node_new(p, N_COMPARE, at);
            if (!n) return nomem(p);
            n->a = first;
            if ((st = grow(p, n, first)) != SNUG_OK) return st;
        }
        jj_node *e = NULL;
        if ((st = parse_math1(p, &e)) != SNUG_OK) return st;
        if ((st = nvec_push(p, &operands, e)) != SNUG_OK) return st;
        if ((st = grow(p, n, e)) != SNUG_OK) return st;
        uint8_t *grown = jj_arena_alloc(&p->t->arena, operands.n, p->err);
        if (!grown) return nomem(p);
        if (operands.n > 1) memcpy(grown, ops, operands.n - 1);
        grown[operands.n - 1] = (uint8_t)op;
        ops = grown;
    }
    if (!n) {
        *out = first;
        return SNUG_OK;
    }
    n->items = operands.v;
    n->n_items = operands.n;
    n->ops = ops;
    *out = n;
    return SNUG_OK;
}

static snug_status parse_not(parser *p, jj_node **out)
{
    const jj_token *t = cur(p);
    if (!tok_name(t, "not")) return parse_compare(p, out);
    snug_status st = enter(p);
    if (st != SNUG_OK) return st;
    next(p);
    jj_node *operand = NULL;
    if ((st = parse_not(p, &operand)) != SNUG_OK) return st;
    jj_node *n = node_new(p, N_NOT, t);
    if (!n) return nomem(p);
    n->a = operand;
    if ((st = grow(p, n, operand)) != SNUG_OK) return st;
    p->nesting--;
    *out = n;
    return SNUG_OK;
}

static snug_status parse_and(parser *p, jj_node **out)
{
    jj_node *left = NULL;
    snug_status st = parse_not(p, &left);
    while (st == SNUG_OK && tok_name(cur(p), "and")) {
        const jj_token *at = cur(p);
        next(p);
        jj_node *right = NULL;
        if ((st = parse_not(p, &right)) != SNUG_OK) return st;
        st = binary(p, N_AND, 0, at, left, right, &left);
    }
    *out = left;
    return st;
}

static snug_status parse_or(parser *p, jj_node **out)
{
    jj_node *left = NULL;
    snug_status st = parse_and(p, &left);
    while (st == SNUG_OK && tok_name(cur(p), "or")) {
        const jj_token *at = cur(p);
        next(p);
        jj_node *right = NULL;
        if ((st = parse_and(p, &right)) != SNUG_OK) return st;
        st = binary(p, N_OR, 0, at, left, right, &left);
    }
    *out = left;
    return st;
}

static snug_status parse_condexpr(parser *p, jj_node **out)
{
    jj_node *expr1 = NULL;
    snug_status st = enter(p);
    if (st == SNUG_OK) st = parse_or(p, &expr1);
    while (st == SNUG_OK && tok_name(cur(p), "if")) {
        const jj_token *at = cur(p);
        next(p);
        jj_node *test = NULL, *otherwise = NULL;
        if ((st = parse_or(p, &test)) != SNUG_OK) return st;
        if (tok_name(cur(p), "else")) {
            next(p);
            if ((st = parse_condexpr(p, &otherwise)) != SNUG_OK) return st;
        }
        jj_node *n = node_new(p, N_COND, at);
        if (!n) return nomem(p);
        n->a = test;
        n->b = expr1;
        n->c = otherwise;
        if ((st = grow(p, n, test)) == SNUG_OK && (st = grow(p, n, expr1)) == SNUG_OK)
            st = grow(p, n, otherwise);
        expr1 = n;
    }
    if (st != SNUG_OK) return st;
    p->nesting--;
    *out = expr1;
    return SNUG_OK;
}

static snug_status parse_expression(parser *p, bool with_condexpr, jj_node **out)
{
    return with_condexpr ? parse_condexpr(p, out) : parse_or(p, out);
}

/* ---- statements ---------------------------------------------------------------- */

static snug_status subparse(parser *p, const char *const *end_names, nvec *body);

static bool is_end(const jj_token *t, const char *const *end_names)
{
    for (size_t k = 0; end_names && end_names[k]; k++)
        if (tok_name(t, end_names[k])) return true;
    return false;
}

/* parse_statements: "[:] %}" then a body up to one of end_names (left as
 * the current token, or skipped when drop_needle). */
static snug_status parse_body(parser *p, const char *const *end_names, bool drop_needle,
                              nvec *body)
{
    if (tok_op(cur(p), TO_COLON)) next(p);
    snug_status st = expect_type(p, TK_BLOCK_END, "end of statement block");
    if (st == SNUG_OK) st = subparse(p, end_names, body);
    if (st != SNUG_OK) return st;
    if (cur(p)->type == TK_EOF) {
        char want[128] = "";
        for (size_t k = 0; end_names[k]; k++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s'%s'", k ? " or " : "",
                     end_names[k]);
        return fail(p, cur(p), SNUG_FORMAT, "unexpected end of template, expected %s", want);
    }
    if (drop_needle) next(p);
    return SNUG_OK;
}

/* Assignment targets: a name, name.attr (with_namespace), or a flat tuple
 * of names, possibly in parentheses. */
static snug_status parse_targets(parser *p, jj_node *n, bool with_namespace,
                                 const char *extra_end)
{
    uint32_t cap = 0;
    bool parens = false, is_tuple = false;
    snug_status st;
    if (tok_op(cur(p), TO_LPAREN)) {
        parens = true;
        next(p);
    }
    for (;;) {
        const jj_token *t = cur(p);
        if (n->n_names && !parens && (tuple_end(p, extra_end) || tok_op(t, TO_ASSIGN) ||
                                      tok_op(t, TO_PIPE)))
            break;
        if (parens && tok_op(t, TO_RPAREN)) break;
        if (t->type != TK_NAME) return unexpected(p, "a name to assign to");
        if (tok_name(t, "true") || tok_name(t, "false") || tok_name(t, "none") ||
            tok_name(t, "True") || tok_name(t, "False") || tok_name(t, "None"))
            return fail(p, t, SNUG_FORMAT, "can't assign to a constant");
        char *name = name_of(p, t);
        if (!name) return nomem(p);
        next(p);
        if (with_namespace && tok_op(cur(p), TO_DOT)) {
            next(p);
            if (cur(p)->type != TK_NAME) return unexpected(p, "a name");
            if (n->n_names || parens || tok_op(cur(p) + 1, TO_COMMA))
                return fail(p, t, SNUG_UNSUPPORTED,
                            "a namespace attribute inside a tuple target is not supported");
            n->flags |= JJ_SET_NS;
            n->name = name;
            if (!(n->name2 = name_of(p, cur(p)))) return nomem(p);
            next(p);
            return SNUG_OK;
        }
        if (tok_op(cur(p), TO_LPAREN) || tok_op(cur(p), TO_DOT) || tok_op(cur(p), TO_LBRACKET))
            return fail(p, t, SNUG_UNSUPPORTED, "this assignment target is not supported");
        if ((st = names_push(p, &n->names, &n->n_names, &cap, name)) != SNUG_OK) return st;
        if (!tok_op(cur(p), TO_COMMA)) break;
        is_tuple = true;
        next(p);
    }
    if (parens) {
        if ((st = expect_op(p, TO_RPAREN, ")")) != SNUG_OK) return st;
        is_tuple = true;
    }
    if (n->n_names == 0) return unexpected(p, "a name to assign to");
    if (is_tuple) n->flags |= JJ_TARGET_TUPLE;
    return SNUG_OK;
}

static snug_status finish_body(nvec *v, jj_node ***items, uint32_t *n)
{
    *items = v->v;
    *n = v->n;
    return SNUG_OK;
}

static snug_status parse_for(parser *p, jj_node **out)
{
    const jj_token *at = cur(p);
    next(p);
    jj_node *n = node_new(p, S_FOR, at);
    if (!n) return nomem(p);
    snug_status st = parse_targets(p, n, false, "in");
    if (st != SNUG_OK) return st;
    if (!tok_name(cur(p), "in")) return unexpected(p, "'in'");
    next(p);
    if ((st = parse_tuple(p, false, "recursive", false, &n->a)) != SNUG_OK) return st;
    if (tok_name(cur(p), "if")) {
        next(p);
        if ((st = parse_expression(p, true, &n->b)) != SNUG_OK) return st;
    }
    if (tok_name(cur(p), "recursive"))
        return fail(p, cur(p), SNUG_UNSUPPORTED, "recursive loops are not supported");
    static const char *const body_end[] = {"endfor", "else", NULL};
    static const char *const else_end[] = {"endfor", NULL};
    nvec body = {0}, otherwise = {0};
    p->loop_depth++;
    p->scope_depth++;
    st = parse_body(p, body_end, false, &body);
    p->loop_depth--;
    p->scope_depth--;
    if (st != SNUG_OK) return st;
    bool has_else = tok_name(cur(p), "else");
    next(p);
    if (has_else && (st = parse_body(p, else_end, true, &otherwise)) != SNUG_OK) return st;
    finish_body(&body, &n->items, &n->n_items);
    finish_body(&otherwise, &n->items2, &n->n_items2);
    *out = n;
    return SNUG_OK;
}

static snug_status parse_if(parser *p, jj_node **out)
{
    const jj_token *at = cur(p);
    next(p);
    jj_node *n = node_new(p, S_IF, at);
    if (!n) return nomem(p);
    snug_status st = parse_tuple(p, false, NULL, false, &n->a);
    if (st != SNUG_OK) return st;
    static const char *const body_end[] = {"elif", "else", "endif", NULL};
    static const char *const else_end[] = {"endif", NULL};
    nvec body = {0};
    if ((st = parse_body(p, body_end, false, &body)) != SNUG_OK) return st;
    finish_body(&body, &n->items, &n->n_items);
    const jj_token *t = cur(p);
    next(p);
    if (tok_name(t, "elif")) {
        /* the elif chain becomes an if in the else body */
        jj_node *inner = NULL;
        p->i--; /* parse_if skips the keyword itself */
        if ((st = parse_if(p, &inner)) != SNUG_OK) return st;
        jj_node **items = jj_arena_alloc(&p->t->arena, sizeof *items, p->err);
        if (!items) return nomem(p);
        items[0] = inner;
        n->items2 = items;
        n->n_items2 = 1;
        *out = n;
        return SNUG_OK; /* the inner if consumed endif */
    }
    if (tok_name(t, "else")) {
        nvec otherwise = {0};
        if ((st = parse_body(p, else_end, true, &otherwise)) != SNUG_OK) return st;
        finish_body(&otherwise, &n->items2, &n->n_items2);
    }
    *out = n;
    return SNUG_OK;
}

static snug_status parse_set(parser *p, jj_node **out)
{
    const jj_token *at = cur(p);
    next(p);
    jj_node *n = node_new(p, S_SET, at);
    if (!n) return nomem(p);
    snug_status st = parse_targets(p, n, true, NULL);
    if (st != SNUG_OK) return st;
    if (tok_op(cur(p), TO_ASSIGN)) {
        next(p);
        if ((st = parse_tuple(p, true, NULL, false, &n->a)) != SNUG_OK) return st;
        *out = n;
        return SNUG_OK;
    }
    if (n->flags & JJ_TARGET_TUPLE)
        return fail(p, at, SNUG_UNSUPPORTED, "a block set of a tuple is not supported");
    n->type = S_SET_BLOCK;
    if ((st = parse_filter(p, NULL, &n->b)) != SNUG_OK) return st;
    static const char *const end[] = {"endset", NULL};
    nvec body = {0};
    if ((st = parse_body(p, end, true, &body)) != SNUG_OK) return st;
    finish_body(&body, &n->items, &n->n_items);
    *out = n;
    return SNUG_OK;
}

static snug_status parse_macro(parser *p, jj_node **out)
{
    const jj_token *at = cur(p);
    if (p->scope_depth > 0)
        return fail(p, at, SNUG_UNSUPPORTED,
                    "a macro defined inside a loop, macro or generation block is not supported");
    next(p);
    jj_node *n = node_new(p, S_MACRO, at);
    if (!n) return nomem(p);
    if (cur(p)->type != TK_NAME) return unexpected(p, "a macro name");
    if (!(n->name = name_of(p, cur(p)))) return nomem(p);
    next(p);
    snug_status st = expect_op(p, TO_LPAREN, "(");
    if (st != SNUG_OK) return st;
    uint32_t cap = 0;
    nvec defaults = {0};
    bool any_default = false;
    while (!tok_op(cur(p), TO_RPAREN)) {
        if (n->n_names && (st = expect_op(p, TO_COMMA, ",")) != SNUG_OK) return st;
        if (cur(p)->type != TK_NAME) return unexpected(p, "a parameter name");
        char *name = name_of(p, cur(p));
        if (!name) return nomem(p);
        next(p);
        jj_node *def = NULL;
        if (tok_op(cur(p), TO_ASSIGN)) {
            next(p);
            if ((st = parse_expression(p, true, &def)) != SNUG_OK) return st;
            any_default = true;
        } else if (any_default) {
            return fail(p, cur(p), SNUG_FORMAT, "non-default argument follows default argument");
        }
        if ((st = names_push(p, &n->names, &n->n_names, &cap, name)) != SNUG_OK) return st;
        if ((st = nvec_push(p, &defaults, def)) != SNUG_OK) return st;
    }
    next(p);
    static const char *const end[] = {"endmacro", NULL};
    nvec body = {0};
    int saved_loops = p->loop_depth;
    p->loop_depth = 0;
    p->scope_depth++;
    p->in_macro = true;
    st = parse_body(p, end, true, &body);
    p->in_macro = false;
    p->scope_depth--;
    p->loop_depth = saved_loops;
    if (st != SNUG_OK) return st;
    finish_body(&body, &n->items, &n->n_items);
    n->items2 = defaults.v;
    n->n_items2 = defaults.n;
    *out = n;
    return SNUG_OK;
}

static snug_status parse_statement(parser *p, nvec *body)
{
    const jj_token *t = cur(p);
    if (t->type != TK_NAME) return fail(p, t, SNUG_FORMAT, "tag name expected");
    snug_status st = enter(p);
    if (st != SNUG_OK) return st;
    jj_node *n = NULL;
    if (tok_name(t, "for")) {
        st = parse_for(p, &n);
    } else if (tok_name(t, "if")) {
        st = parse_if(p, &n);
    } else if (tok_name(t, "set")) {
        st = parse_set(p, &n);
    } else if (tok_name(t, "macro")) {
        st = parse_macro(p, &n);
    } else if (tok_name(t, "print")) {
        next(p);
        while (st == SNUG_OK && cur(p)->type != TK_BLOCK_END) {
            if (n && (st = expect_op(p, TO_COMMA, ",")) != SNUG_OK) break;
            n = node_new(p, S_PRINT, cur(p));
            if (!n) return nomem(p);
            if ((st = parse_expression(p, true, &n->a)) == SNUG_OK) st = nvec_push(p, body, n);
        }
        n = NULL;
    } else if (tok_name(t, "break") || tok_name(t, "continue")) {
        if (p->loop_depth == 0)
            return fail(p, t, SNUG_FORMAT, "'%.*s' outside loop", (int)t->n, t->s);
        n = node_new(p, tok_name(t, "break") ? S_BREAK : S_CONTINUE, t);
        if (!n) return nomem(p);
        next(p);
    } else if (tok_name(t, "generation")) {
        next(p);
        n = node_new(p, S_SCOPE, t);
        if (!n) return nomem(p);
        static const char *const end[] = {"endgeneration", NULL};
        nvec inner = {0};
        int saved_loops = p->loop_depth;
        p->loop_depth = 0;
        p->scope_depth++;
        st = parse_body(p, end, true, &inner);
        p->scope_depth--;
        p->loop_depth = saved_loops;
        finish_body(&inner, &n->items, &n->n_items);
    } else {
        static const char *const unsupported[] = {"extends", "include", "import", "from",
                                                  "block", "call", "filter", "with",
                                                  "autoescape"};
        for (size_t k = 0; k < SNUG_ARRAY_LEN(unsupported); k++)
            if (tok_name(t, unsupported[k]))
                return fail(p, t, SNUG_UNSUPPORTED, "the '%s' tag is not supported",
                            unsupported[k]);
        return fail(p, t, SNUG_FORMAT, "unknown tag '%.*s'", (int)SNUG_MIN(t->n, 40), t->s);
    }
    if (st != SNUG_OK) return st;
    if (n && (st = nvec_push(p, body, n)) != SNUG_OK) return st;
    p->nesting--;
    return SNUG_OK;
}

static snug_status subparse(parser *p, const char *const *end_names, nvec *body)
{
    snug_status st = SNUG_OK;
    for (;;) {
        const jj_token *t = cur(p);
        jj_node *n = NULL;
        switch ((jj_tok_type)t->type) {
        case TK_EOF: return SNUG_OK;
        case TK_DATA:
            n = node_new(p, S_TEXT, t);
            if (!n) return nomem(p);
            n->text = t->s;
            n->text_len = t->n;
            next(p);
            if ((st = nvec_push(p, body, n)) != SNUG_OK) return st;
            break;
        case TK_VAR_BEGIN:
            next(p);
            n = node_new(p, S_PRINT, t);
            if (!n) return nomem(p);
            if ((st = parse_tuple(p, true, NULL, false, &n->a)) != SNUG_OK) return st;
            if ((st = expect_type(p, TK_VAR_END, "end of print statement")) != SNUG_OK)
                return st;
            if ((st = nvec_push(p, body, n)) != SNUG_OK) return st;
            break;
        case TK_BLOCK_BEGIN:
            next(p);
            if (is_end(cur(p), end_names)) return SNUG_OK;
            if ((st = parse_statement(p, body)) != SNUG_OK) return st;
            if ((st = expect_type(p, TK_BLOCK_END, "end of statement block")) != SNUG_OK)
                return st;
            break;
        default: {
            char buf[64];
            return fail(p, t, SNUG_FORMAT, "unexpected %s", describe(t, buf, sizeof buf));
        }
        }
    }
}

snug_status jj_parse(snug_template *t, const jj_tokens *toks, snug_error *err)
{
    parser p = {.t = t, .tok = toks->v, .n = toks->n, .err = err};
    nvec body = {0};
    snug_status st = subparse(&p, NULL, &body);
    if (st != SNUG_OK) return st;
    if (cur(&p)->type != TK_EOF) {
        char buf[64];
        return fail(&p, cur(&p), SNUG_FORMAT, "unexpected %s", describe(cur(&p), buf, sizeof buf));
    }
    t->body = body.v;
    t->n_body = body.n;
    return SNUG_OK;
}
