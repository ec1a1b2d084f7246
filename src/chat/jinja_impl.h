/*
 * jinja_impl.h: what the parts of the chat-template interpreter share (not
 * a public header): values, the syntax tree, arenas, the render state, and
 * the functions each part offers the others.
 *
 *   jinja_text.c      UTF-8, Python's Unicode rules (whitespace, case, repr)
 *   jinja_value.c     arenas, writers, values: str(), repr(), json.dumps,
 *                     ==, <, truth, copying
 *   jinja_lex.c       template text to tokens, whitespace control
 *   jinja_parse.c     tokens to a syntax tree; unsupported constructs
 *   jinja_eval.c      statements and expressions, scopes, macros, limits
 *   jinja_builtins.c  filters, tests, methods and global functions
 *   jinja_str.c       Python's str operations (case, strip, split, ...)
 *   jinja.c           the public API (jinja.h)
 *
 * Memory during a render (the rules that keep it bounded and leak-free):
 *   - the input variables are converted once into the bottom of the render
 *     arena and live for the whole render ("stable");
 *   - every other value made while evaluating lives in the arena, which is
 *     released to a mark at the end of each statement ("transient");
 *   - a value stored by {% set %} (or into a namespace) is copied into a
 *     block of its own, owned by the variable's slot and freed when the
 *     slot is overwritten or its scope ends; stable parts are shared, not
 *     copied; reading a namespace attribute copies its owned parts into the
 *     arena, so no value in flight ever points into a block that a later
 *     set frees (see jj_slot_read);
 *   - namespaces and generators live until the render ends.
 * The flag `transient` on a value says that it (or a part of it) is not
 * stable, and must be copied to be kept.
 */
#ifndef SNUG_JINJA_IMPL_H
#define SNUG_JINJA_IMPL_H

#include "jinja.h"

#include <stdarg.h>

/* ---- arenas ------------------------------------------------------------ */

typedef struct jj_chunk jj_chunk;

/* A stack of chunks from the accounting allocator. Allocation only grows
 * the stack; jj_arena_release pops back to a mark. When `budget` is set,
 * every chunk is charged to *budget and an allocation that would take it
 * past budget_max fails with SNUG_INVALID. */
typedef struct jj_arena {
    jj_chunk *top;     /* the chunk being filled */
    jj_chunk *spare;   /* one released chunk kept for reuse */
    size_t *budget;    /* bytes charged (shared with the render), or NULL */
    size_t budget_max;
} jj_arena;

typedef struct jj_mark {
    jj_chunk *chunk;
    size_t used;
} jj_mark;

/* Returns n bytes (8-aligned, zeroed) or NULL with err filled (SNUG_NOMEM,
 * or SNUG_INVALID past the budget). */
void *jj_arena_alloc(jj_arena *a, size_t n, snug_error *err);
/* Where the arena stands now, for jj_arena_release. */
jj_mark jj_arena_mark(const jj_arena *a);
/* Frees everything allocated since m; pointers into it become invalid. One
 * released chunk is kept for reuse until jj_arena_free. */
void jj_arena_release(jj_arena *a, jj_mark m);
/* Frees every chunk. */
void jj_arena_free(jj_arena *a);
/* Copies n bytes into the arena (NUL-terminated); NULL on failure. */
char *jj_arena_strndup(jj_arena *a, const char *s, size_t n, snug_error *err);

/* ---- values -------------------------------------------------------------- */

typedef enum jj_kind {
    JJ_UNDEF,     /* Jinja's Undefined */
    JJ_NONE,
    JJ_BOOL,
    JJ_INT,
    JJ_FLOAT,
    JJ_STR,
    JJ_LIST,      /* list, tuple, range, dict views (flavor) */
    JJ_DICT,
    JJ_NS,        /* namespace(): mutable, shared by reference */
    JJ_MACRO,
    JJ_LOOP,      /* the `loop` of a for */
    JJ_FUNC,      /* a builtin function or a bound method (flavor: jj_fn) */
    JJ_GEN        /* a one-shot iterator (select, map, reverse, items filter) */
} jj_kind;

typedef enum jj_list_flavor {
    JJ_LIST_PLAIN,
    JJ_LIST_TUPLE,
    JJ_LIST_RANGE,
    JJ_LIST_KEYS,   /* dict.keys() */
    JJ_LIST_VALUES, /* dict.values() */
    JJ_LIST_ITEMS   /* dict.items() */
} jj_list_flavor;

typedef struct jj_list jj_list;
typedef struct jj_dict jj_dict;
typedef struct jj_ns jj_ns;
typedef struct jj_loop jj_loop;
typedef struct jj_gen jj_gen;
typedef struct jj_node jj_node;
typedef struct jj_value jj_value;

struct jj_value {
    uint8_t kind;      /* jj_kind */
    uint8_t transient; /* some part is not stable (see the top of this file) */
    uint16_t flavor;   /* JJ_LIST: jj_list_flavor; JJ_FUNC: jj_fn */
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p; /* UTF-8, not NUL-terminated */
            size_t n;      /* bytes */
        } s;
        jj_list *list;
        jj_dict *dict;
        jj_ns *ns;
        const jj_node *macro; /* the S_MACRO node */
        jj_loop *loop;
        jj_gen *gen;
        const char *undef_name; /* what was undefined, for messages; may be NULL */
        const jj_value *self;   /* JJ_FUNC: the bound receiver, or NULL */
    } u;
};

struct jj_list {
    size_t n;
    uint64_t origin;    /* which Python object this is (a number unique in the
                           render, kept by copies): repr's recursion guard */
    int64_t r_start, r_stop, r_step; /* JJ_LIST_RANGE: what repr() shows */
    jj_value v[];
};

/* Insertion-ordered; kv[2i] is a key, kv[2i+1] its value. Keys are
 * hashable values (str, numbers, None, tuples of those) and unique. */
struct jj_dict {
    size_t n;
    uint64_t origin;    /* as for jj_list */
    jj_value kv[];
};

/* A variable: its name, its value, and the block that holds the value's
 * non-stable parts (NULL when none). */
typedef struct jj_slot {
    const char *name; /* NUL-terminated; stable, or name_block */
    jj_value v;
    void *block;      /* the value's copied parts, or NULL */
    char *name_block; /* a copy of a name that was not stable, or NULL */
} jj_slot;

typedef struct jj_slots {
    jj_slot *v;
    size_t n, cap;
} jj_slots;

struct jj_ns {
    jj_slots attrs;
    jj_ns *next; /* every namespace of the render, for freeing */
};

struct jj_gen {
    jj_list *items; /* in block */
    size_t pos;     /* the next item to yield */
    snug_status fail_status; /* not SNUG_OK: consuming it raises this */
    char *fail_msg;          /* (snug_mem) the message of that error */
    size_t fail_text_at;     /* fail_msg + this: the message without its place */
    void *block;
    jj_gen *next;
};

struct jj_loop {
    const jj_list *items;
    size_t index0;
};

static inline jj_value jj_undef(const char *name)
{
    jj_value v = {.kind = JJ_UNDEF};
    v.u.undef_name = name;
    return v;
}
static inline jj_value jj_none(void) { return (jj_value){.kind = JJ_NONE}; }
static inline jj_value jj_bool(bool b)
{
    jj_value v = {.kind = JJ_BOOL};
    v.u.b = b;
    return v;
}
static inline jj_value jj_int(int64_t i)
{
    jj_value v = {.kind = JJ_INT};
    v.u.i = i;
    return v;
}
static inline jj_value jj_float(double f)
{
    jj_value v = {.kind = JJ_FLOAT};
    v.u.f = f;
    return v;
}
/* A string value; transient says whether the bytes may go away. */
static inline jj_value jj_str(const char *p, size_t n, bool transient)
{
    jj_value v = {.kind = JJ_STR, .transient = transient};
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}

/* ---- builtin callables ---------------------------------------------------- */

/* Global functions and methods, as JJ_FUNC values carry them. */
typedef enum jj_fn {
    JJ_FN_NONE = 0,
    JJ_FN_RANGE,
    JJ_FN_DICT,
    JJ_FN_NAMESPACE,
    JJ_FN_RAISE,
    /* str methods */
    JJ_FN_STRIP, JJ_FN_LSTRIP, JJ_FN_RSTRIP, JJ_FN_STARTSWITH, JJ_FN_ENDSWITH,
    JJ_FN_SPLIT, JJ_FN_RSPLIT, JJ_FN_SPLITLINES, JJ_FN_UPPER, JJ_FN_LOWER, JJ_FN_TITLE,
    JJ_FN_CAPITALIZE, JJ_FN_REPLACE, JJ_FN_FIND, JJ_FN_COUNT, JJ_FN_JOIN,
    JJ_FN_REMOVEPREFIX, JJ_FN_REMOVESUFFIX,
    /* dict methods */
    JJ_FN_ITEMS, JJ_FN_KEYS, JJ_FN_VALUES, JJ_FN_GET,
    /* loop methods */
    JJ_FN_CYCLE,
    /* an attribute Python has that is not implemented here: defined, but
     * calling or printing it fails */
    JJ_FN_OTHER,
    JJ_FN_COUNT_
} jj_fn;

/* Filters and tests the parser accepts. */
typedef enum jj_filter {
    JJ_F_ABS, JJ_F_CAPITALIZE, JJ_F_COUNT, JJ_F_DEFAULT, JJ_F_DICTSORT, JJ_F_FIRST,
    JJ_F_FLOAT, JJ_F_INDENT, JJ_F_INT, JJ_F_ITEMS, JJ_F_JOIN, JJ_F_LAST, JJ_F_LENGTH,
    JJ_F_LIST, JJ_F_LOWER, JJ_F_MAP, JJ_F_MAX, JJ_F_MIN, JJ_F_REJECT, JJ_F_REJECTATTR,
    JJ_F_REPLACE, JJ_F_REVERSE, JJ_F_ROUND, JJ_F_SELECT, JJ_F_SELECTATTR, JJ_F_SORT,
    JJ_F_STRING, JJ_F_SUM, JJ_F_TITLE, JJ_F_TOJSON, JJ_F_TRIM, JJ_F_UNIQUE, JJ_F_UPPER,
    JJ_F_COUNT_
} jj_filter;

typedef enum jj_test {
    JJ_T_BOOLEAN, JJ_T_CALLABLE, JJ_T_DEFINED, JJ_T_DIVISIBLEBY, JJ_T_EQ, JJ_T_ESCAPED,
    JJ_T_EVEN, JJ_T_FALSE, JJ_T_FLOAT, JJ_T_GE, JJ_T_GT, JJ_T_IN, JJ_T_INTEGER,
    JJ_T_ITERABLE, JJ_T_LE, JJ_T_LOWER, JJ_T_LT, JJ_T_MAPPING, JJ_T_NE, JJ_T_NONE,
    JJ_T_NUMBER, JJ_T_ODD, JJ_T_SAMEAS, JJ_T_SEQUENCE, JJ_T_STRING, JJ_T_TRUE,
    JJ_T_UNDEFINED, JJ_T_UPPER,
    JJ_T_COUNT_
} jj_test;

/* Looks a filter, test or method up by name: its id, or -1 when the
 * interpreter does not have it. Pure. */
int jj_filter_lookup(const char *name);
int jj_test_lookup(const char *name);
int jj_method_lookup(const char *name);
/* The name of a builtin callable, for messages. */
const char *jj_fn_name(jj_fn fn);

/* ---- the syntax tree ----------------------------------------------------- */

typedef enum jj_node_type {
    /* expressions */
    N_CONST,   /* value */
    N_NAME,    /* name */
    N_ATTR,    /* a.name */
    N_ITEM,    /* a[b] */
    N_SLICE,   /* a[b:c:d], each of b, c, d may be NULL */
    N_CALL,    /* a(items..., names[i]=items2[i]...) */
    N_FILTER,  /* a|op(items..., names=items2...); a is NULL in a set block */
    N_TEST,    /* a is op(items...) */
    N_NOT,     /* not a */
    N_NEG,     /* -a */
    N_POS,     /* +a */
    N_BIN,     /* a op b: JJ_OP_ADD ... JJ_OP_POW */
    N_AND,     /* a and b */
    N_OR,      /* a or b */
    N_CONCAT,  /* items[0] ~ items[1] ~ ... */
    N_COMPARE, /* a ops[0] items[0] ops[1] items[1] ... */
    N_COND,    /* b if a else c; c may be NULL */
    N_LIST,    /* [items...] */
    N_TUPLE,   /* (items...) */
    N_DICT,    /* {items[i]: items2[i]...} */
    /* statements */
    S_TEXT,     /* text, text_len */
    S_PRINT,    /* {{ a }} */
    S_IF,       /* if a: items else items2 */
    S_FOR,      /* for names in a [if b]: items else items2 */
    S_SET,      /* set names = a; or set name.name2 = a (flags & JJ_SET_NS) */
    S_SET_BLOCK,/* set names: items, then the filters of b (input NULL) */
    S_MACRO,    /* macro name(names = items2 defaults): items */
    S_SCOPE,    /* items in a child scope ({% generation %}) */
    S_BREAK,
    S_CONTINUE
} jj_node_type;

typedef enum jj_op {
    JJ_OP_ADD, JJ_OP_SUB, JJ_OP_MUL, JJ_OP_DIV, JJ_OP_FLOORDIV, JJ_OP_MOD, JJ_OP_POW,
    JJ_OP_EQ, JJ_OP_NE, JJ_OP_LT, JJ_OP_LE, JJ_OP_GT, JJ_OP_GE, JJ_OP_IN, JJ_OP_NOTIN
} jj_op;

enum {
    JJ_SET_NS = 1,    /* S_SET/S_SET_BLOCK: the target is name.name2 */
    JJ_TARGET_TUPLE = 2 /* S_FOR/S_SET: names is a tuple (unpack) */
};

struct jj_node {
    uint8_t type;   /* jj_node_type */
    uint8_t op;     /* jj_op, filter id, test id */
    uint16_t flags;
    uint32_t line, col;
    uint32_t height;    /* expressions: 1 + the tallest operand (bounded at compile) */
    const char *name, *name2;
    jj_node *a, *b, *c, *d;
    jj_node **items;    /* operands, arguments, body */
    jj_node **items2;   /* keyword values, dict values, else body, defaults */
    const char **names; /* keyword names, target names, parameters */
    uint8_t *ops;       /* N_COMPARE operators */
    uint32_t n_items, n_items2, n_names;
    jj_value value;     /* N_CONST */
    const char *text;   /* S_TEXT */
    size_t text_len;
};

struct snug_template {
    char *name;          /* NUL-terminated, snug_mem */
    char *src;           /* the normalized source (S_TEXT points into it) */
    size_t src_len;
    jj_arena arena;      /* the tree */
    jj_node **body;
    uint32_t n_body;
};

/* ---- the lexer ------------------------------------------------------------ */

typedef enum jj_tok_type {
    TK_EOF,
    TK_DATA,
    TK_VAR_BEGIN,
    TK_VAR_END,
    TK_BLOCK_BEGIN,
    TK_BLOCK_END,
    TK_NAME,
    TK_STRING,
    TK_INT,
    TK_FLOAT,
    TK_OP
} jj_tok_type;

/* Operator tokens (TK_OP's op). */
typedef enum jj_tok_op {
    TO_ADD, TO_SUB, TO_DIV, TO_FLOORDIV, TO_MUL, TO_MOD, TO_POW, TO_TILDE,
    TO_LBRACKET, TO_RBRACKET, TO_LPAREN, TO_RPAREN, TO_LBRACE, TO_RBRACE,
    TO_EQ, TO_NE, TO_GT, TO_GE, TO_LT, TO_LE, TO_ASSIGN, TO_DOT, TO_COLON,
    TO_PIPE, TO_COMMA, TO_SEMICOLON
} jj_tok_op;

typedef struct jj_token {
    uint8_t type; /* jj_tok_type */
    uint8_t op;   /* jj_tok_op */
    uint32_t line, col; /* where it starts: 1-based, columns in characters */
    const char *s; /* TK_DATA, TK_NAME, TK_STRING: the bytes (arena or source) */
    size_t n;
    int64_t i;    /* TK_INT */
    double f;     /* TK_FLOAT */
} jj_token;

typedef struct jj_tokens {
    jj_token *v;
    size_t n;
} jj_tokens;

/* Normalizes newlines ("\r\n" and "\r" become "\n", one final newline is
 * dropped) into a new snug_mem block (*out, *out_len). */
snug_status jj_normalize(const char *text, size_t len, char **out, size_t *out_len,
                         snug_error *err);

/* Splits the normalized source into tokens (in arena), applying trim_blocks,
 * lstrip_blocks and the "-" / "+" whitespace controls. Messages start with
 * "NAME:LINE:COL: ". */
snug_status jj_lex(const char *src, size_t n, const char *name, jj_arena *arena,
                   jj_tokens *out, snug_error *err);


/* ---- the parser ------------------------------------------------------------ */

/* Parses the tokens into t->body (nodes in t->arena). */
snug_status jj_parse(snug_template *t, const jj_tokens *toks, snug_error *err);

/* ---- text (jinja_text.c) --------------------------------------------------- */

/* Decodes one code point of valid UTF-8 at p (n > 0 bytes left); *adv gets
 * its length. */
uint32_t jj_utf8_next(const char *p, size_t n, size_t *adv);
/* Decodes the code point that ends at p + n (n > 0). *adv gets its length. */
uint32_t jj_utf8_prev(const char *p, size_t n, size_t *adv);
/* Encodes cp into out (4 bytes); returns the length. */
size_t jj_utf8_put(uint32_t cp, char *out);
/* Code points in n bytes of valid UTF-8. */
size_t jj_utf8_len(const char *p, size_t n);
/* The byte offset of code point index i (clamped to n). */
size_t jj_utf8_offset(const char *p, size_t n, size_t i);
/* Python's str.isspace() for one code point. */
bool jj_is_space(uint32_t cp);
/* Python's line boundaries (str.splitlines). */
bool jj_is_linebreak(uint32_t cp);
/* Python's str.isprintable() for one code point (repr escapes the rest). */
bool jj_is_printable(uint32_t cp);

typedef enum jj_case { JJ_CASE_UPPER, JJ_CASE_LOWER, JJ_CASE_TITLE } jj_case;
/* Python's full case mapping of cp: writes 1 to 3 code points into out and
 * returns how many, or 0 when cp is outside the letters this interpreter
 * knows (ASCII, Latin-1, Latin Extended-A, Cyrillic, and caseless scripts
 * such as CJK, and symbols). */
int jj_case_map(uint32_t cp, jj_case mode, uint32_t out[3]);
/* Whether cp is cased (Lu, Ll, Lt, Other_Lowercase/Uppercase): 1 or 0, or
 * -1 outside the known letters. Lowercase/uppercase: 1 when it is. */
int jj_is_cased(uint32_t cp);
int jj_is_lower(uint32_t cp);
int jj_is_upper(uint32_t cp);

/* Python's repr() of a float ("1.0", "1e+16", "inf", "nan") into buf (at
 * least 32 bytes); returns the length. */
size_t jj_format_float(double x, char *buf);

/* ---- writers (jinja_value.c) ------------------------------------------------ */

/* Where text goes: counted only (p NULL, counting), into a fixed block
 * sized by a counting pass, or into a growable buffer (grow) limited to
 * max bytes. */
typedef struct jj_rs jj_rs;
typedef struct jj_writer {
    char *p;
    size_t n, cap, max;
    bool grow;   /* p is a snug_mem block that may be replaced */
    jj_rs *rs;   /* for the memory budget of growable buffers */
    snug_status st;
} jj_writer;

/* Append bytes, a NUL-terminated string, or a code point as UTF-8. A
 * failure (past max, or no memory to grow) is kept in w->st, with the
 * render's error recorded, and later writes do nothing. */
void jj_w_put(jj_writer *w, const char *s, size_t n);
void jj_w_str(jj_writer *w, const char *s);
void jj_w_cp(jj_writer *w, uint32_t cp);

/* ---- the render state -------------------------------------------------------- */

typedef struct jj_scope {
    jj_slots vars;
    struct jj_scope *parent;
} jj_scope;

struct jj_rs {
    const snug_template *t;
    snug_template_limits lim;
    snug_error err;        /* the first error */
    jj_arena arena;
    size_t mem_used;       /* charged to lim.memory_bytes_max */
    jj_writer out;         /* the rendered text (growable) */
    int64_t steps, iterations;
    int32_t depth;
    jj_scope *root;        /* template-level variables */
    jj_scope *scope;       /* the innermost scope */
    jj_value vars;         /* the input variables (a dict), stable */
    jj_ns *namespaces;
    jj_gen *gens;
    bool fatal;            /* the error is a limit or no memory: never deferred */
    uint64_t n_objects;    /* lists and dicts made: their origin numbers */
    uint64_t n_input_objects; /* the input's lists and dicts have origins 1..this, in
                               * pre-order (jj_from_json runs first) */
    uint8_t fail_kind;     /* snug_template_fail of err */
    size_t fail_text_at;   /* err.msg + this: the message without "NAME:LINE:COL: " */
    int n_fail_items;      /* the loops around err that were at input lists or dicts: */
    uint64_t fail_items[SNUG_TEMPLATE_FAILURE_ITEMS]; /* their origins, innermost first */
};

/* Records an error at node n (NULL: no place): "NAME:LINE:COL: message",
 * of kind SNUG_TEMPLATE_FAIL_LIMIT when rs->fatal is set, else ERROR.
 * Returns status. Only the first error of a render is kept. */
snug_status jj_fail(jj_rs *rs, const jj_node *n, snug_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* jj_fail for a limit passed or memory refused: such an error ends the
 * render even where Python would raise later (see jj_gen_failing). */
snug_status jj_fail_limit(jj_rs *rs, const jj_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Counts n steps; fails past the limit. */
snug_status jj_steps(jj_rs *rs, const jj_node *at, int64_t n);

/* Memory charged to the render: a zeroed block from the accounting
 * allocator, or NULL with the error recorded (past memory_bytes_max, or no
 * memory). jj_rs_free gives it back (NULL is ignored). */
void *jj_rs_alloc(jj_rs *rs, size_t n);
void jj_rs_free(jj_rs *rs, void *p);
/* Arena memory of the render (released at statement ends); NULL on failure
 * with the error recorded at node at. */
void *jj_alloc(jj_rs *rs, const jj_node *at, size_t n);
/* A list of n items (to be filled) / an empty dict with room for n
 * entries, in the arena; *out becomes the (transient) value. NULL on
 * failure, with the error recorded. */
jj_list *jj_list_new(jj_rs *rs, const jj_node *at, size_t n, jj_list_flavor flavor,
                     jj_value *out);
jj_dict *jj_dict_new(jj_rs *rs, const jj_node *at, size_t n, jj_value *out);

/* ---- value operations (jinja_value.c) ----------------------------------------- */

/* Python's type name ("str", "int", "list", "dict", "NoneType", ...). */
const char *jj_type_name(const jj_value *v);
/* Python's bool(v). */
bool jj_truthy(const jj_value *v);
/* Writes str(v) (printing) or repr(v). Fails on values whose text Python
 * makes from memory addresses (functions, generators). */
snug_status jj_write_str(jj_rs *rs, const jj_node *at, jj_writer *w, const jj_value *v);
snug_status jj_write_repr(jj_rs *rs, const jj_node *at, jj_writer *w, const jj_value *v);
/* str(v) as a value (in the arena, or v itself when it is a str). */
snug_status jj_to_str(jj_rs *rs, const jj_node *at, const jj_value *v, jj_value *out);

typedef struct jj_json_opts {
    bool ensure_ascii, sort_keys;
    const char *indent;   /* NULL: no newlines */
    size_t indent_len;
    const char *item_sep, *key_sep;
    size_t item_sep_len, key_sep_len;
} jj_json_opts;
/* json.dumps(v) with the options into a str value in the arena. */
snug_status jj_to_json(jj_rs *rs, const jj_node *at, const jj_value *v,
                       const jj_json_opts *o, jj_value *out);

/* Python's ==; *eq gets the result. Fails only on a limit. */
snug_status jj_equal(jj_rs *rs, const jj_node *at, const jj_value *a, const jj_value *b,
                     bool *eq);
/* Python's a < b as -1/0/1 ordering (*cmp); fails with a TypeError-like
 * message where Python raises. */
snug_status jj_compare(jj_rs *rs, const jj_node *at, const jj_value *a, const jj_value *b,
                       int *cmp);
/* Whether v can be a dict key (hash()); a message where not. */
snug_status jj_check_hashable(jj_rs *rs, const jj_node *at, const jj_value *v);
/* Looks key up in d: the index of its entry or -1. */
snug_status jj_dict_find(jj_rs *rs, const jj_node *at, const jj_dict *d, const jj_value *key,
                         long *index);

/* Copies v so that it survives: into a new block of its own (*block, NULL
 * when v has nothing transient) for storing in a slot (to_slot), where a
 * `loop` may be kept only when in_scope; or into the arena (block NULL)
 * when reading a slot. */
snug_status jj_keep(jj_rs *rs, const jj_node *at, const jj_value *v, bool in_scope,
                    jj_value *out, void **block);
snug_status jj_unshare(jj_rs *rs, const jj_node *at, const jj_value *v, jj_value *out);

/* Converts a jansson value into a stable value (in the arena). */
snug_status jj_from_json(jj_rs *rs, const json_t *j, jj_value *out);

/* Whether v is a number in Python's sense: int, float or bool. */
bool jj_is_number(const jj_value *v);
/* A str value's bytes equal s (NUL-terminated). */
bool jj_str_is(const jj_value *v, const char *s);

/* ---- evaluation (jinja_eval.c) and builtins (jinja_builtins.c) ------------------ */

/* Arguments of a call: positional values, then keyword values. */
typedef struct jj_args {
    jj_value *pos;
    size_t n_pos;
    const char **kw_names;
    jj_value *kw;
    size_t n_kw;
} jj_args;

/* Renders t with vars into *out (see snug_template_render_traced; failure
 * may be NULL). */
snug_status jj_render(const snug_template *t, const json_t *vars,
                      const snug_template_limits *lim, snug_template_failure *failure,
                      char **out, size_t *len, snug_error *err);

/* Jinja's getattr(obj, name) and getitem(obj, key) (the sandbox's rules). */
snug_status jj_getattr(jj_rs *rs, const jj_node *at, const jj_value *obj, const char *name,
                       jj_value *out);
snug_status jj_getitem(jj_rs *rs, const jj_node *at, const jj_value *obj,
                       const jj_value *key, jj_value *out);
/* Iterates v as Python's iter() does into a list (dicts give keys, strings
 * characters, undefined nothing; a generator is consumed). */
snug_status jj_iterate(jj_rs *rs, const jj_node *at, const jj_value *v, const jj_list **out);
/* Calls a callable value (macro, builtin, bound method). */
snug_status jj_call(jj_rs *rs, const jj_node *at, const jj_value *fn, const jj_args *args,
                    jj_value *out);
/* Applies filter / test `id` to input. */
snug_status jj_apply_filter(jj_rs *rs, const jj_node *at, int id, const jj_value *input,
                            const jj_args *args, jj_value *out);
snug_status jj_apply_test(jj_rs *rs, const jj_node *at, int id, const jj_value *input,
                          const jj_args *args, bool *out);
/* Calls a builtin function or method (fn) with an optional receiver. */
snug_status jj_call_builtin(jj_rs *rs, const jj_node *at, jj_fn fn, const jj_value *self,
                            const jj_args *args, jj_value *out);
/* Calls a macro with arguments; the result is its output as a str. */
snug_status jj_call_macro(jj_rs *rs, const jj_node *at, const jj_node *macro,
                          const jj_args *args, jj_value *out);
/* Makes a generator holding a copy of items. */
snug_status jj_gen_new(jj_rs *rs, const jj_node *at, const jj_list *items, jj_value *out);
/* Makes a generator that fails with the render's current error when it is
 * consumed, and clears that error: Python runs a generator's body only as
 * it is consumed, so an error found while filtering must wait until then.
 * Errors from limits and memory (rs->fatal) are never deferred: status is
 * returned as it is. */
snug_status jj_gen_failing(jj_rs *rs, const jj_node *at, snug_status status, jj_value *out);
/* Fails when g is a generator made by jj_gen_failing. */
snug_status jj_gen_check(jj_rs *rs, const jj_node *at, const jj_gen *g);
/* Makes a namespace: namespace(mapping_or_pairs?, **kwargs). */
snug_status jj_ns_new(jj_rs *rs, const jj_node *at, const jj_args *args, jj_value *out);
/* Sets name (n bytes; copied unless stable) in slots to a kept copy of v
 * (a `loop` allowed when in_scope). */
snug_status jj_slots_set(jj_rs *rs, const jj_node *at, jj_slots *s, const char *name, size_t n,
                         bool name_stable, const jj_value *v, bool in_scope);
/* Binds name to v as it is (v must outlive the slots: loop variables,
 * macro arguments). */
snug_status jj_slots_bind(jj_rs *rs, jj_slots *s, const char *name, const jj_value *v);
/* Frees every slot's blocks and empties s (the array is kept). */
void jj_slots_clear(jj_rs *rs, jj_slots *s);
/* jj_slots_clear and frees the array. */
void jj_slots_free(jj_rs *rs, jj_slots *s);
/* Reads a namespace attribute's slot, copying its owned parts into the
 * arena: a macro called later in the same expression, or the body of a
 * loop iterating over the value, may set the attribute again, which frees
 * the old block. A scope's variables are read without a copy: only a
 * statement directly in that scope can set them again, and by then no
 * value from the old block is in use (sets copy what they keep first). */
snug_status jj_slot_read(jj_rs *rs, const jj_node *at, const jj_slot *s, jj_value *out);
/* The slot named name (n bytes), or NULL. Valid until s changes. */
jj_slot *jj_slots_find(const jj_slots *s, const char *name, size_t n);
/* Python's `item in container`. */
snug_status jj_contains(jj_rs *rs, const jj_node *at, const jj_value *container,
                        const jj_value *item, bool *out);
/* Python's a + b and the other binary operators (jj_op). */
snug_status jj_binary(jj_rs *rs, const jj_node *at, jj_op op, const jj_value *a,
                      const jj_value *b, jj_value *out);
/* Python's len(v). */
snug_status jj_len(jj_rs *rs, const jj_node *at, const jj_value *v, size_t *out);
/* Fails with "'name' is undefined" for an undefined value. */
snug_status jj_undefined_error(jj_rs *rs, const jj_node *at, const jj_value *v);

/* ---- helpers shared by the builtins (jinja_value.c, jinja_str.c) ------------------ */

/* Binds args to the parameters names[0..n) by Python's rules: vals[i] is
 * the argument for names[i], or NULL when not given. Keywords are refused
 * when pos_only; what names the callee in messages. */
snug_status jj_bind(jj_rs *rs, const jj_node *at, const char *what, const jj_args *a,
                    const char *const *names, size_t n, bool pos_only, const jj_value **vals);
/* Fail unless v is a str / an int (bool counts, as in Python). */
snug_status jj_need_str(jj_rs *rs, const jj_node *at, const jj_value *v, const char *what);
snug_status jj_need_int(jj_rs *rs, const jj_node *at, const jj_value *v, const char *what,
                        int64_t *out);

/* A list of values growing in the arena. */
typedef struct jj_vlist {
    jj_value *v;
    size_t n, cap;
} jj_vlist;
snug_status jj_vlist_push(jj_rs *rs, const jj_node *at, jj_vlist *l, const jj_value *v);
/* A list value holding a copy of l's items. */
snug_status jj_vlist_to_value(jj_rs *rs, const jj_node *at, const jj_vlist *l,
                              jj_list_flavor flavor, jj_value *out);

/* The first / last occurrence of needle (m bytes) in hay (n bytes), or NULL. */
const char *jj_find_bytes(const char *hay, size_t n, const char *needle, size_t m);
const char *jj_rfind_bytes(const char *hay, size_t n, const char *needle, size_t m);

typedef enum jj_recase {
    JJ_RC_UPPER, JJ_RC_LOWER, JJ_RC_CAPITALIZE,
    JJ_RC_TITLE_METHOD, /* str.title() */
    JJ_RC_TITLE_FILTER  /* Jinja's title filter: words start after - ( { [ < or whitespace */
} jj_recase;
/* Changes the case of str s; fails (SNUG_UNSUPPORTED) on letters whose
 * case jinja_text.c does not know. */
snug_status jj_str_recase(jj_rs *rs, const jj_node *at, const jj_value *s, jj_recase mode,
                          jj_value *out);
/* str.strip/lstrip/rstrip(chars): chars NULL or none strips whitespace. */
snug_status jj_str_strip(jj_rs *rs, const jj_node *at, const jj_value *s,
                         const jj_value *chars, bool left, bool right, jj_value *out);
/* str.splitlines(keepends), appended to l. */
snug_status jj_str_splitlines(jj_rs *rs, const jj_node *at, const jj_value *s, bool keepends,
                              jj_vlist *l);
/* str.replace(old, new, count); count < 0 replaces all. */
snug_status jj_str_replace(jj_rs *rs, const jj_node *at, const jj_value *s, const jj_value *old,
                           const jj_value *new_, int64_t count, jj_value *out);
/* sep.join(items): every item must be a str. */
snug_status jj_str_join(jj_rs *rs, const jj_node *at, const jj_value *sep,
                        const jj_value *items, size_t n, jj_value *out);
/* int(s, base): 1 parsed, 0 not a number, -1 beyond 64 bits. */
int jj_str_parse_int(const jj_value *s, int base, int64_t *out);
/* float(s): true when s is a float literal. */
bool jj_str_parse_float(const jj_value *s, double *out);
/* Calls the str method fn on self. */
snug_status jj_str_method(jj_rs *rs, const jj_node *at, jj_fn fn, const jj_value *self,
                          const jj_args *args, jj_value *out);

#endif /* SNUG_JINJA_IMPL_H */
