/*
 * jinja_value.c: the values of the chat-template interpreter and what
 * Python does with them: str() and repr(), json.dumps (transformers'
 * tojson), ==, ordering, truth, hashing, and the copies that let a value
 * outlive the statement that made it (see jinja_impl.h). Also the memory
 * under a render: arenas, charged blocks, writers.
 */
#include "jinja_impl.h"

#include "base/mem.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- arenas ------------------------------------------------------------------ */

struct jj_chunk {
    jj_chunk *prev;
    size_t size; /* bytes of data */
    size_t used;
    _Alignas(8) unsigned char data[];
};

/* Chunks stay below the allocator's large-block threshold (mmap). */
enum { CHUNK_DATA_BYTES = 32 * 1024 - 128 };

static void chunk_free(jj_arena *a, jj_chunk *c)
{
    if (a->budget) *a->budget -= snug_mem_block_bytes(c);
    snug_mem_free(c);
}

void *jj_arena_alloc(jj_arena *a, size_t n, snug_error *err)
{
    size_t need = snug_round_up(n ? n : 1, 8);
    if (need < n) {
        snug_errorf(err, SNUG_INVALID, "an allocation of %zu bytes is too large", n);
        return NULL;
    }
    jj_chunk *c = a->top;
    if (!c || c->size - c->used < need) {
        size_t size = SNUG_MAX(need, (size_t)CHUNK_DATA_BYTES);
        if (a->spare && a->spare->size >= need) {
            c = a->spare;
            a->spare = NULL;
        } else {
            size_t bytes = 0;
            if (!snug_add_size(size, sizeof(jj_chunk), &bytes)) {
                snug_errorf(err, SNUG_INVALID, "an allocation of %zu bytes is too large", n);
                return NULL;
            }
            size_t held = snug_mem_held_bytes(bytes);
            if (a->budget && (held == 0 || held > a->budget_max - SNUG_MIN(*a->budget, a->budget_max))) {
                snug_errorf(err, SNUG_INVALID, "needs more than the limit of %zu bytes of memory",
                            a->budget_max);
                return NULL;
            }
            c = snug_mem_alloc(SNUG_MEM_OTHER, bytes, err);
            if (!c) return NULL;
            if (a->budget) *a->budget += snug_mem_block_bytes(c);
            c->size = size;
        }
        c->used = 0;
        c->prev = a->top;
        a->top = c;
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, need);
    return p;
}

jj_mark jj_arena_mark(const jj_arena *a)
{
    jj_mark m = {a->top, a->top ? a->top->used : 0};
    return m;
}

void jj_arena_release(jj_arena *a, jj_mark m)
{
    while (a->top && a->top != m.chunk) {
        jj_chunk *c = a->top;
        a->top = c->prev;
        if (!a->spare && c->size == CHUNK_DATA_BYTES) {
            a->spare = c;
        } else {
            chunk_free(a, c);
        }
    }
    if (a->top) a->top->used = m.used;
}

void jj_arena_free(jj_arena *a)
{
    jj_arena_release(a, (jj_mark){NULL, 0});
    if (a->spare) chunk_free(a, a->spare);
    a->spare = NULL;
}

char *jj_arena_strndup(jj_arena *a, const char *s, size_t n, snug_error *err)
{
    char *p = jj_arena_alloc(a, n + 1, err);
    if (p && n) memcpy(p, s, n);
    return p;
}

/* ---- the render's memory and errors -------------------------------------------- */

/* The render's first failure, "TEMPLATE:LINE:COL: message" (the node's
 * place, when there is a node); fail_text_at marks where the message
 * starts. */
static snug_status vfail(jj_rs *rs, const jj_node *n, snug_status status, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static snug_status vfail(jj_rs *rs, const jj_node *n, snug_status status, const char *fmt, va_list ap)
{
    if (rs->err.status != SNUG_OK) return rs->err.status; /* keep the first */
    char place[SNUG_ERROR_MSG_BYTES];
    if (n) snprintf(place, sizeof place, "%s:%" PRIu32 ":%" PRIu32, rs->t->name, n->line, n->col);
    else snprintf(place, sizeof place, "%s", rs->t->name);
    snug_verrorf_at(&rs->err, status, place, fmt, ap);
    rs->fail_kind = rs->fatal ? SNUG_TEMPLATE_FAIL_LIMIT : SNUG_TEMPLATE_FAIL_ERROR;
    rs->fail_text_at = SNUG_MIN(strlen(place) + 2, strlen(rs->err.msg));
    return status;
}

snug_status jj_fail(jj_rs *rs, const jj_node *n, snug_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    snug_status st = vfail(rs, n, status, fmt, ap);
    va_end(ap);
    return st;
}

snug_status jj_fail_limit(jj_rs *rs, const jj_node *n, const char *fmt, ...)
{
    rs->fatal = true;
    va_list ap;
    va_start(ap, fmt);
    snug_status st = vfail(rs, n, SNUG_INVALID, fmt, ap);
    va_end(ap);
    return st;
}

snug_status jj_steps(jj_rs *rs, const jj_node *at, int64_t n)
{
    rs->steps += n;
    if (rs->steps > rs->lim.steps_max)
        return jj_fail_limit(rs, at, "rendering takes more than the limit of %" PRId64 " steps",
                             rs->lim.steps_max);
    return SNUG_OK;
}

void *jj_rs_alloc(jj_rs *rs, size_t n)
{
    size_t held = snug_mem_held_bytes(n);
    if (held == 0 || held > rs->lim.memory_bytes_max - SNUG_MIN(rs->mem_used, rs->lim.memory_bytes_max)) {
        jj_fail_limit(rs, NULL, "rendering needs more than the limit of %zu bytes of memory",
                      rs->lim.memory_bytes_max);
        return NULL;
    }
    snug_error e = {0};
    void *p = snug_mem_alloc(SNUG_MEM_OTHER, n, &e);
    if (!p) {
        rs->fatal = true;
        jj_fail(rs, NULL, e.status, "%s", e.msg);
        return NULL;
    }
    rs->mem_used += snug_mem_block_bytes(p);
    return p;
}

void jj_rs_free(jj_rs *rs, void *p)
{
    if (!p) return;
    rs->mem_used -= snug_mem_block_bytes(p);
    snug_mem_free(p);
}

void *jj_alloc(jj_rs *rs, const jj_node *at, size_t n)
{
    snug_error e = {0};
    void *p = jj_arena_alloc(&rs->arena, n, &e);
    if (!p) {
        rs->fatal = true;
        jj_fail(rs, at, e.status, "%s", e.msg);
    }
    return p;
}

jj_list *jj_list_new(jj_rs *rs, const jj_node *at, size_t n, jj_list_flavor flavor,
                     jj_value *out)
{
    size_t bytes = 0;
    if (!snug_mul_size(n, sizeof(jj_value), &bytes) ||
        !snug_add_size(bytes, sizeof(jj_list), &bytes)) {
        jj_fail_limit(rs, at, "a list of %zu items is too large", n);
        return NULL;
    }
    jj_list *l = jj_alloc(rs, at, bytes);
    if (!l) return NULL;
    l->n = n;
    l->origin = ++rs->n_objects;
    *out = (jj_value){.kind = JJ_LIST, .transient = 1, .flavor = (uint16_t)flavor};
    out->u.list = l;
    return l;
}

jj_dict *jj_dict_new(jj_rs *rs, const jj_node *at, size_t n, jj_value *out)
{
    size_t bytes = 0;
    if (!snug_mul_size(n, 2 * sizeof(jj_value), &bytes) ||
        !snug_add_size(bytes, sizeof(jj_dict), &bytes)) {
        jj_fail_limit(rs, at, "a dict of %zu items is too large", n);
        return NULL;
    }
    jj_dict *d = jj_alloc(rs, at, bytes);
    if (!d) return NULL;
    d->n = 0;
    d->origin = ++rs->n_objects;
    *out = (jj_value){.kind = JJ_DICT, .transient = 1};
    out->u.dict = d;
    return d;
}

/* Enters one level of recursion over a value's parts. */
static snug_status enter(jj_rs *rs, const jj_node *at)
{
    if (++rs->depth > rs->lim.depth_max) {
        rs->depth--;
        return jj_fail_limit(rs, at, "a value is nested deeper than the limit of %d",
                             (int)rs->lim.depth_max);
    }
    return SNUG_OK;
}

/* ---- writers ------------------------------------------------------------------ */

void jj_w_put(jj_writer *w, const char *s, size_t n)
{
    if (w->st != SNUG_OK || n == 0) return;
    if (w->max && n > w->max - SNUG_MIN(w->n, w->max)) {
        w->st = jj_fail_limit(w->rs, NULL, "the output passes the limit of %zu bytes", w->max);
        return;
    }
    if (w->grow && n > w->cap - w->n) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->n < n) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
        char *p = jj_rs_alloc(w->rs, cap);
        if (!p) {
            w->st = w->rs->err.status;
            return;
        }
        if (w->n) memcpy(p, w->p, w->n);
        jj_rs_free(w->rs, w->p);
        w->p = p;
        w->cap = cap;
    }
    if (w->p) memcpy(w->p + w->n, s, n);
    w->n += n;
}

void jj_w_str(jj_writer *w, const char *s) { jj_w_put(w, s, strlen(s)); }

void jj_w_cp(jj_writer *w, uint32_t cp)
{
    char b[4];
    jj_w_put(w, b, jj_utf8_put(cp, b));
}

typedef snug_status (*emit_fn)(jj_rs *rs, const jj_node *at, jj_writer *w, const void *ctx);

/* Runs emit twice: once to count, once into a block of the arena. */
static snug_status emit_to_str(jj_rs *rs, const jj_node *at, emit_fn emit, const void *ctx,
                               jj_value *out)
{
    jj_writer w = {.rs = rs, .max = rs->lim.output_bytes_max};
    snug_status st = emit(rs, at, &w, ctx);
    if (st == SNUG_OK) st = w.st;
    if (st != SNUG_OK) return st;
    char *p = jj_alloc(rs, at, w.n + 1);
    if (!p) return rs->err.status;
    jj_writer fill = {.p = p, .cap = w.n, .rs = rs};
    st = emit(rs, at, &fill, ctx);
    if (st == SNUG_OK) st = fill.st;
    if (st != SNUG_OK) return st;
    *out = jj_str(p, fill.n, true);
    return SNUG_OK;
}

/* ---- str() and repr() ------------------------------------------------------------ */

const char *jj_type_name(const jj_value *v)
{
    switch ((jj_kind)v->kind) {
    case JJ_UNDEF: return "Undefined";
    case JJ_NONE: return "NoneType";
    case JJ_BOOL: return "bool";
    case JJ_INT: return "int";
    case JJ_FLOAT: return "float";
    case JJ_STR: return "str";
    case JJ_LIST:
        switch ((jj_list_flavor)v->flavor) {
        case JJ_LIST_PLAIN: return "list";
        case JJ_LIST_TUPLE: return "tuple";
        case JJ_LIST_RANGE: return "range";
        case JJ_LIST_KEYS: return "dict_keys";
        case JJ_LIST_VALUES: return "dict_values";
        case JJ_LIST_ITEMS: return "dict_items";
        }
        return "list";
    case JJ_DICT: return "dict";
    case JJ_NS: return "Namespace";
    case JJ_MACRO: return "Macro";
    case JJ_LOOP: return "LoopContext";
    case JJ_FUNC: return v->u.self ? "builtin_function_or_method" : "function";
    case JJ_GEN: return "generator";
    }
    return "object";
}

bool jj_truthy(const jj_value *v)
{
    switch ((jj_kind)v->kind) {
    case JJ_UNDEF:
    case JJ_NONE: return false;
    case JJ_BOOL: return v->u.b;
    case JJ_INT: return v->u.i != 0;
    case JJ_FLOAT: return v->u.f != 0;
    case JJ_STR: return v->u.s.n > 0;
    case JJ_LIST: return v->u.list->n > 0;
    case JJ_DICT: return v->u.dict->n > 0;
    default: return true;
    }
}

bool jj_is_number(const jj_value *v)
{
    return v->kind == JJ_INT || v->kind == JJ_FLOAT || v->kind == JJ_BOOL;
}

bool jj_str_is(const jj_value *v, const char *s)
{
    size_t n = strlen(s);
    return v->kind == JJ_STR && v->u.s.n == n && memcmp(v->u.s.p, s, n) == 0;
}

static void write_int(jj_writer *w, int64_t i)
{
    char buf[32];
    jj_w_put(w, buf, (size_t)snprintf(buf, sizeof buf, "%" PRId64, i));
}

static void write_float(jj_writer *w, double f)
{
    char buf[48];
    jj_w_put(w, buf, jj_format_float(f, buf));
}

/* Python's repr() of a str. */
static void write_str_repr(jj_writer *w, const char *p, size_t n)
{
    bool has_single = memchr(p, '\'', n) != NULL, has_double = memchr(p, '"', n) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    jj_w_put(w, &quote, 1);
    size_t start = 0, i = 0;
    while (i < n) {
        size_t adv = 1;
        uint32_t cp = jj_utf8_next(p + i, n - i, &adv);
        char esc[16];
        size_t esc_n = 0;
        if (cp == '\\' || cp == (uint32_t)quote) {
            esc[0] = '\\';
            esc[1] = (char)cp;
            esc_n = 2;
        } else if (cp == '\n' || cp == '\r' || cp == '\t') {
            esc[0] = '\\';
            esc[1] = cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't';
            esc_n = 2;
        } else if (!jj_is_printable(cp)) {
            if (cp < 0x100)
                esc_n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", cp);
            else if (cp < 0x10000)
                esc_n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", cp);
            else
                esc_n = (size_t)snprintf(esc, sizeof esc, "\\U%08x", cp);
        }
        if (esc_n) {
            jj_w_put(w, p + start, i - start);
            jj_w_put(w, esc, esc_n);
            start = i + adv;
        }
        i += adv;
    }
    jj_w_put(w, p + start, n - start);
    jj_w_put(w, &quote, 1);
}

/* The containers being printed, innermost first: Python's repr prints a
 * list, dict or namespace met again inside itself as [...] / {...}. */
typedef struct repr_guard {
    uint64_t obj; /* a list's or dict's origin, or a namespace's address */
    const struct repr_guard *up;
} repr_guard;

static bool guarded(const repr_guard *g, uint64_t obj)
{
    for (; g; g = g->up)
        if (g->obj == obj) return true;
    return false;
}

static snug_status write_value(jj_rs *rs, const jj_node *at, jj_writer *w, const jj_value *v,
                               bool repr, const repr_guard *g);

static snug_status write_items(jj_rs *rs, const jj_node *at, jj_writer *w, const jj_list *l,
                               const char *open, const char *close, const repr_guard *g)
{
    jj_w_str(w, open);
    for (size_t i = 0; i < l->n; i++) {
        if (i) jj_w_put(w, ", ", 2);
        snug_status st = write_value(rs, at, w, &l->v[i], true, g);
        if (st != SNUG_OK) return st;
    }
    jj_w_str(w, close);
    return SNUG_OK;
}

static snug_status write_dict(jj_rs *rs, const jj_node *at, jj_writer *w, const jj_dict *d,
                              const repr_guard *g)
{
    jj_w_put(w, "{", 1);
    for (size_t i = 0; i < d->n; i++) {
        if (i) jj_w_put(w, ", ", 2);
        snug_status st = write_value(rs, at, w, &d->kv[2 * i], true, g);
        if (st == SNUG_OK) {
            jj_w_put(w, ": ", 2);
            st = write_value(rs, at, w, &d->kv[2 * i + 1], true, g);
        }
        if (st != SNUG_OK) return st;
    }
    jj_w_put(w, "}", 1);
    return SNUG_OK;
}

static snug_status write_value(jj_rs *rs, const jj_node *at, jj_writer *w, const jj_value *v,
                               bool repr, const repr_guard *g)
{
    snug_status st = jj_steps(rs, at, 1);
    if (st != SNUG_OK) return st;
    switch ((jj_kind)v->kind) {
    case JJ_UNDEF:
        if (repr) jj_w_str(w, "Undefined");
        break;
    case JJ_NONE: jj_w_str(w, "None"); break;
    case JJ_BOOL: jj_w_str(w, v->u.b ? "True" : "False"); break;
    case JJ_INT: write_int(w, v->u.i); break;
    case JJ_FLOAT: write_float(w, v->u.f); break;
    case JJ_STR:
        if (repr)
            write_str_repr(w, v->u.s.p, v->u.s.n);
        else
            jj_w_put(w, v->u.s.p, v->u.s.n);
        break;
    case JJ_LIST: {
        const jj_list *l = v->u.list;
        repr_guard here = {l->origin, g};
        if (v->flavor == JJ_LIST_PLAIN && guarded(g, l->origin)) {
            jj_w_str(w, "[...]");
            break;
        }
        st = enter(rs, at);
        if (st != SNUG_OK) return st;
        switch ((jj_list_flavor)v->flavor) {
        case JJ_LIST_PLAIN: st = write_items(rs, at, w, l, "[", "]", &here); break;
        case JJ_LIST_TUPLE: st = write_items(rs, at, w, l, "(", l->n == 1 ? ",)" : ")", g); break;
        case JJ_LIST_KEYS: st = write_items(rs, at, w, l, "dict_keys([", "])", g); break;
        case JJ_LIST_VALUES: st = write_items(rs, at, w, l, "dict_values([", "])", g); break;
        case JJ_LIST_ITEMS: st = write_items(rs, at, w, l, "dict_items([", "])", g); break;
        case JJ_LIST_RANGE:
            jj_w_str(w, "range(");
            write_int(w, l->r_start);
            jj_w_put(w, ", ", 2);
            write_int(w, l->r_stop);
            if (l->r_step != 1) {
                jj_w_put(w, ", ", 2);
                write_int(w, l->r_step);
            }
            jj_w_put(w, ")", 1);
            break;
        }
        rs->depth--;
        if (st != SNUG_OK) return st;
        break;
    }
    case JJ_DICT: {
        repr_guard here = {v->u.dict->origin, g};
        if (guarded(g, v->u.dict->origin)) {
            jj_w_str(w, "{...}");
            break;
        }
        st = enter(rs, at);
        if (st != SNUG_OK) return st;
        st = write_dict(rs, at, w, v->u.dict, &here);
        rs->depth--;
        if (st != SNUG_OK) return st;
        break;
    }
    case JJ_NS: {
        const jj_slots *a = &v->u.ns->attrs;
        /* namespaces live until the render ends: their addresses stay
         * unique; they cannot equal an origin number, which is small */
        repr_guard here = {(uint64_t)(uintptr_t)v->u.ns, g};
        if (guarded(g, (uint64_t)(uintptr_t)v->u.ns)) {
            jj_w_str(w, "<Namespace {...}>");
            break;
        }
        st = enter(rs, at);
        if (st != SNUG_OK) return st;
        jj_w_str(w, "<Namespace {");
        for (size_t i = 0; i < a->n && st == SNUG_OK; i++) {
            if (i) jj_w_put(w, ", ", 2);
            write_str_repr(w, a->v[i].name, strlen(a->v[i].name));
            jj_w_put(w, ": ", 2);
            st = write_value(rs, at, w, &a->v[i].v, true, &here);
        }
        jj_w_str(w, "}>");
        rs->depth--;
        if (st != SNUG_OK) return st;
        break;
    }
    case JJ_MACRO:
        jj_w_str(w, "<Macro ");
        write_str_repr(w, v->u.macro->name, strlen(v->u.macro->name));
        jj_w_str(w, ">");
        break;
    case JJ_LOOP: {
        char buf[64];
        jj_w_put(w, buf, (size_t)snprintf(buf, sizeof buf, "<LoopContext %zu/%zu>",
                                          v->u.loop->index0 + 1, v->u.loop->items->n));
        break;
    }
    case JJ_FUNC:
    case JJ_GEN:
        return jj_fail(rs, at, SNUG_UNSUPPORTED,
                       "printing a %s is not supported (Python prints its memory address)",
                       jj_type_name(v));
    }
    return w->st;
}

snug_status jj_write_str(jj_rs *rs, const jj_node *at, jj_writer *w, const jj_value *v)
{
    return write_value(rs, at, w, v, false, NULL);
}

snug_status jj_write_repr(jj_rs *rs, const jj_node *at, jj_writer *w, const jj_value *v)
{
    return write_value(rs, at, w, v, true, NULL);
}

static snug_status emit_str(jj_rs *rs, const jj_node *at, jj_writer *w, const void *ctx)
{
    return write_value(rs, at, w, ctx, false, NULL);
}

snug_status jj_to_str(jj_rs *rs, const jj_node *at, const jj_value *v, jj_value *out)
{
    if (v->kind == JJ_STR) {
        *out = *v;
        return SNUG_OK;
    }
    if (v->kind == JJ_UNDEF) {
        *out = jj_str("", 0, false);
        return SNUG_OK;
    }
    return emit_to_str(rs, at, emit_str, v, out);
}

/* ---- json.dumps ---------------------------------------------------------------------- */

typedef struct json_ctx {
    const jj_value *v;
    const jj_json_opts *o;
} json_ctx;

static void json_write_string(jj_writer *w, const char *p, size_t n, bool ascii)
{
    jj_w_put(w, "\"", 1);
    size_t start = 0, i = 0;
    while (i < n) {
        size_t adv = 1;
        uint32_t cp = jj_utf8_next(p + i, n - i, &adv);
        char esc[16];
        size_t esc_n = 0;
        switch (cp) {
        case '"': esc_n = 2, memcpy(esc, "\\\"", 2); break;
        case '\\': esc_n = 2, memcpy(esc, "\\\\", 2); break;
        case '\n': esc_n = 2, memcpy(esc, "\\n", 2); break;
        case '\r': esc_n = 2, memcpy(esc, "\\r", 2); break;
        case '\t': esc_n = 2, memcpy(esc, "\\t", 2); break;
        case '\b': esc_n = 2, memcpy(esc, "\\b", 2); break;
        case '\f': esc_n = 2, memcpy(esc, "\\f", 2); break;
        default:
            if (cp < 0x20 || (ascii && cp > 0x7E)) {
                if (cp >= 0x10000) {
                    uint32_t c = cp - 0x10000;
                    esc_n = (size_t)snprintf(esc, sizeof esc, "\\u%04x\\u%04x",
                                             0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
                } else {
                    esc_n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", cp);
                }
            }
        }
        if (esc_n) {
            jj_w_put(w, p + start, i - start);
            jj_w_put(w, esc, esc_n);
            start = i + adv;
        }
        i += adv;
    }
    jj_w_put(w, p + start, n - start);
    jj_w_put(w, "\"", 1);
}

static void json_newline(jj_writer *w, const jj_json_opts *o, int level)
{
    jj_w_put(w, "\n", 1);
    for (int k = 0; k < level; k++) jj_w_put(w, o->indent, o->indent_len);
}

static void json_float(jj_writer *w, double f)
{
    if (isnan(f))
        jj_w_str(w, "NaN");
    else if (isinf(f))
        jj_w_str(w, f < 0 ? "-Infinity" : "Infinity");
    else
        write_float(w, f);
}

/* Sorts dict entry indexes by key (insertion sort: stable, and dicts in
 * templates are small; every comparison is a counted step). */
static snug_status json_sorted(jj_rs *rs, const jj_node *at, const jj_dict *d, size_t *order)
{
    for (size_t i = 0; i < d->n; i++) order[i] = i;
    for (size_t i = 1; i < d->n; i++) {
        size_t cur = order[i], j = i;
        while (j > 0) {
            int cmp = 0;
            snug_status st = jj_compare(rs, at, &d->kv[2 * cur], &d->kv[2 * order[j - 1]], &cmp);
            if (st != SNUG_OK) return st;
            if (cmp != -1) break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = cur;
    }
    return SNUG_OK;
}

static snug_status json_value(jj_rs *rs, const jj_node *at, jj_writer *w, const jj_value *v,
                              const jj_json_opts *o, int level)
{
    snug_status st = jj_steps(rs, at, 1);
    if (st != SNUG_OK) return st;
    switch ((jj_kind)v->kind) {
    case JJ_NONE: jj_w_str(w, "null"); return w->st;
    case JJ_BOOL: jj_w_str(w, v->u.b ? "true" : "false"); return w->st;
    case JJ_INT: write_int(w, v->u.i); return w->st;
    case JJ_FLOAT: json_float(w, v->u.f); return w->st;
    case JJ_STR: json_write_string(w, v->u.s.p, v->u.s.n, o->ensure_ascii); return w->st;
    case JJ_LIST:
        if (v->flavor == JJ_LIST_PLAIN || v->flavor == JJ_LIST_TUPLE) {
            const jj_list *l = v->u.list;
            if (l->n == 0) {
                jj_w_str(w, "[]");
                return w->st;
            }
            st = enter(rs, at);
            if (st != SNUG_OK) return st;
            jj_w_put(w, "[", 1);
            for (size_t i = 0; i < l->n && st == SNUG_OK; i++) {
                if (i) jj_w_put(w, o->item_sep, o->item_sep_len);
                if (o->indent) json_newline(w, o, level + 1);
                st = json_value(rs, at, w, &l->v[i], o, level + 1);
            }
            if (st == SNUG_OK && o->indent) json_newline(w, o, level);
            jj_w_put(w, "]", 1);
            rs->depth--;
            return st != SNUG_OK ? st : w->st;
        }
        break;
    case JJ_DICT: {
        const jj_dict *d = v->u.dict;
        if (d->n == 0) {
            jj_w_str(w, "{}");
            return w->st;
        }
        size_t *order = NULL;
        if (o->sort_keys) {
            order = jj_alloc(rs, at, d->n * sizeof *order);
            if (!order) return rs->err.status;
            st = json_sorted(rs, at, d, order);
            if (st != SNUG_OK) return st;
        }
        st = enter(rs, at);
        if (st != SNUG_OK) return st;
        jj_w_put(w, "{", 1);
        for (size_t i = 0; i < d->n && st == SNUG_OK; i++) {
            size_t k = order ? order[i] : i;
            const jj_value *key = &d->kv[2 * k];
            if (i) jj_w_put(w, o->item_sep, o->item_sep_len);
            if (o->indent) json_newline(w, o, level + 1);
            switch ((jj_kind)key->kind) {
            case JJ_STR: json_write_string(w, key->u.s.p, key->u.s.n, o->ensure_ascii); break;
            case JJ_INT: jj_w_put(w, "\"", 1), write_int(w, key->u.i), jj_w_put(w, "\"", 1); break;
            case JJ_FLOAT: jj_w_put(w, "\"", 1), json_float(w, key->u.f), jj_w_put(w, "\"", 1); break;
            case JJ_BOOL: jj_w_str(w, key->u.b ? "\"true\"" : "\"false\""); break;
            case JJ_NONE: jj_w_str(w, "\"null\""); break;
            default:
                st = jj_fail(rs, at, SNUG_INVALID,
                             "tojson: keys must be str, int, float, bool or None, not %s",
                             jj_type_name(key));
            }
            if (st != SNUG_OK) break;
            jj_w_put(w, o->key_sep, o->key_sep_len);
            st = json_value(rs, at, w, &d->kv[2 * k + 1], o, level + 1);
        }
        if (st == SNUG_OK && o->indent) json_newline(w, o, level);
        jj_w_put(w, "}", 1);
        rs->depth--;
        return st != SNUG_OK ? st : w->st;
    }
    default: break;
    }
    return jj_fail(rs, at, SNUG_INVALID, "tojson: Object of type %s is not JSON serializable",
                   jj_type_name(v));
}

static snug_status emit_json(jj_rs *rs, const jj_node *at, jj_writer *w, const void *ctx)
{
    const json_ctx *c = ctx;
    return json_value(rs, at, w, c->v, c->o, 0);
}

snug_status jj_to_json(jj_rs *rs, const jj_node *at, const jj_value *v,
                       const jj_json_opts *o, jj_value *out)
{
    json_ctx c = {v, o};
    return emit_to_str(rs, at, emit_json, &c, out);
}

/* ---- ==, ordering, hashing ---------------------------------------------------------- */

/* Compares two numbers exactly as Python does: -1, 0, 1, or 2 when
 * unordered (NaN). */
static int num_cmp(const jj_value *a, const jj_value *b)
{
    if (a->kind != JJ_FLOAT && b->kind != JJ_FLOAT) {
        int64_t x = a->kind == JJ_BOOL ? a->u.b : a->u.i;
        int64_t y = b->kind == JJ_BOOL ? b->u.b : b->u.i;
        return x < y ? -1 : x > y;
    }
    if (a->kind == JJ_FLOAT && b->kind == JJ_FLOAT) {
        double x = a->u.f, y = b->u.f;
        if (isnan(x) || isnan(y)) return 2;
        return x < y ? -1 : x > y;
    }
    /* one int, one float: exact comparison */
    bool swap = a->kind == JJ_FLOAT;
    const jj_value *iv = swap ? b : a, *fv = swap ? a : b;
    int64_t i = iv->kind == JJ_BOOL ? iv->u.b : iv->u.i;
    double f = fv->u.f;
    int r;
    if (isnan(f)) return 2;
    if (f >= 9223372036854775808.0)
        r = -1;
    else if (f < -9223372036854775808.0)
        r = 1;
    else {
        double fl = floor(f);
        int64_t fi = (int64_t)fl;
        if (i < fi)
            r = -1;
        else if (i > fi)
            r = 1;
        else
            r = fl < f ? -1 : 0; /* i == floor(f) */
    }
    return swap ? -r : r;
}

static bool is_seq_flavor(uint16_t f) { return f == JJ_LIST_PLAIN || f == JJ_LIST_TUPLE; }

static snug_status equal_rec(jj_rs *rs, const jj_node *at, const jj_value *a,
                             const jj_value *b, bool *eq);

/* Whether every item of list a is == to some item of b (set-like views). */
static snug_status contains_all(jj_rs *rs, const jj_node *at, const jj_list *a,
                                const jj_list *b, bool *out)
{
    *out = true;
    for (size_t i = 0; i < a->n && *out; i++) {
        bool found = false;
        for (size_t j = 0; j < b->n && !found; j++) {
            snug_status st = equal_rec(rs, at, &a->v[i], &b->v[j], &found);
            if (st != SNUG_OK) return st;
        }
        *out = found;
    }
    return SNUG_OK;
}

static snug_status equal_rec(jj_rs *rs, const jj_node *at, const jj_value *a,
                             const jj_value *b, bool *eq)
{
    snug_status st = jj_steps(rs, at, 1);
    if (st != SNUG_OK) return st;
    *eq = false;
    if (jj_is_number(a) && jj_is_number(b)) {
        *eq = num_cmp(a, b) == 0;
        return SNUG_OK;
    }
    if (a->kind != b->kind) return SNUG_OK;
    switch ((jj_kind)a->kind) {
    case JJ_UNDEF:
    case JJ_NONE: *eq = true; return SNUG_OK;
    case JJ_STR:
        *eq = a->u.s.n == b->u.s.n && memcmp(a->u.s.p, b->u.s.p, a->u.s.n) == 0;
        return SNUG_OK;
    case JJ_LIST: {
        const jj_list *x = a->u.list, *y = b->u.list;
        if (a->flavor != b->flavor) return SNUG_OK;
        if (a->flavor == JJ_LIST_VALUES) {
            *eq = x == y;
            return SNUG_OK;
        }
        if (x->n != y->n) return SNUG_OK;
        st = enter(rs, at);
        if (st != SNUG_OK) return st;
        if (a->flavor == JJ_LIST_KEYS || a->flavor == JJ_LIST_ITEMS) {
            st = contains_all(rs, at, x, y, eq);
        } else {
            *eq = true;
            for (size_t i = 0; i < x->n && *eq && st == SNUG_OK; i++)
                st = equal_rec(rs, at, &x->v[i], &y->v[i], eq);
        }
        rs->depth--;
        return st;
    }
    case JJ_DICT: {
        const jj_dict *x = a->u.dict, *y = b->u.dict;
        if (x->n != y->n) return SNUG_OK;
        st = enter(rs, at);
        if (st != SNUG_OK) return st;
        *eq = true;
        for (size_t i = 0; i < x->n && *eq && st == SNUG_OK; i++) {
            long k = -1;
            st = jj_dict_find(rs, at, y, &x->kv[2 * i], &k);
            if (st == SNUG_OK && k < 0) *eq = false;
            if (st == SNUG_OK && k >= 0)
                st = equal_rec(rs, at, &x->kv[2 * i + 1], &y->kv[2 * (size_t)k + 1], eq);
        }
        rs->depth--;
        return st;
    }
    case JJ_NS: *eq = a->u.ns == b->u.ns; return SNUG_OK;
    case JJ_MACRO: *eq = a->u.macro == b->u.macro; return SNUG_OK;
    case JJ_LOOP: *eq = a->u.loop == b->u.loop; return SNUG_OK;
    case JJ_GEN: *eq = a->u.gen == b->u.gen; return SNUG_OK;
    case JJ_FUNC: *eq = a->flavor == b->flavor && a->u.self == b->u.self; return SNUG_OK;
    default: return SNUG_OK;
    }
}

snug_status jj_equal(jj_rs *rs, const jj_node *at, const jj_value *a, const jj_value *b,
                     bool *eq)
{
    return equal_rec(rs, at, a, b, eq);
}

snug_status jj_compare(jj_rs *rs, const jj_node *at, const jj_value *a, const jj_value *b,
                       int *cmp)
{
    snug_status st = jj_steps(rs, at, 1);
    if (st != SNUG_OK) return st;
    if (a->kind == JJ_UNDEF || b->kind == JJ_UNDEF) {
        const jj_value *u = a->kind == JJ_UNDEF ? a : b;
        char shown[64];
        if (u->u.undef_name)
            return jj_fail(rs, at, SNUG_INVALID, "'%s' is undefined",
                           snug_str_shown(u->u.undef_name, shown, sizeof shown));
        return jj_fail(rs, at, SNUG_INVALID, "an undefined value cannot be compared");
    }
    if (jj_is_number(a) && jj_is_number(b)) {
        *cmp = num_cmp(a, b);
        return SNUG_OK;
    }
    if (a->kind == JJ_STR && b->kind == JJ_STR) {
        size_t n = SNUG_MIN(a->u.s.n, b->u.s.n);
        int c = n ? memcmp(a->u.s.p, b->u.s.p, n) : 0;
        if (c == 0) c = a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n;
        *cmp = c < 0 ? -1 : c > 0;
        return SNUG_OK;
    }
    if (a->kind == JJ_LIST && b->kind == JJ_LIST && a->flavor == b->flavor &&
        is_seq_flavor(a->flavor)) {
        const jj_list *x = a->u.list, *y = b->u.list;
        st = enter(rs, at);
        if (st != SNUG_OK) return st;
        size_t i = 0;
        for (; i < x->n && i < y->n; i++) {
            bool eq = false;
            st = equal_rec(rs, at, &x->v[i], &y->v[i], &eq);
            if (st != SNUG_OK || !eq) break;
        }
        if (st == SNUG_OK) {
            if (i < x->n && i < y->n)
                st = jj_compare(rs, at, &x->v[i], &y->v[i], cmp);
            else
                *cmp = x->n < y->n ? -1 : x->n > y->n;
        }
        rs->depth--;
        return st;
    }
    return jj_fail(rs, at, SNUG_INVALID, "'<' not supported between instances of '%s' and '%s'",
                   jj_type_name(a), jj_type_name(b));
}

snug_status jj_check_hashable(jj_rs *rs, const jj_node *at, const jj_value *v)
{
    if (v->kind == JJ_DICT || (v->kind == JJ_LIST && v->flavor != JJ_LIST_TUPLE &&
                               v->flavor != JJ_LIST_RANGE))
        return jj_fail(rs, at, SNUG_INVALID, "unhashable type: '%s'", jj_type_name(v));
    if (v->kind == JJ_LIST && v->flavor == JJ_LIST_TUPLE) {
        for (size_t i = 0; i < v->u.list->n; i++) {
            snug_status st = jj_check_hashable(rs, at, &v->u.list->v[i]);
            if (st != SNUG_OK) return st;
        }
    }
    return SNUG_OK;
}

snug_status jj_dict_find(jj_rs *rs, const jj_node *at, const jj_dict *d, const jj_value *key,
                         long *index)
{
    *index = -1;
    snug_status st = jj_check_hashable(rs, at, key);
    if (st != SNUG_OK) return st;
    for (size_t i = 0; i < d->n; i++) {
        const jj_value *k = &d->kv[2 * i];
        /* cheap rejections before the general == */
        if (key->kind == JJ_STR) {
            st = jj_steps(rs, at, 1);
            if (st != SNUG_OK) return st;
            if (k->kind == JJ_STR && k->u.s.n == key->u.s.n &&
                memcmp(k->u.s.p, key->u.s.p, key->u.s.n) == 0) {
                *index = (long)i;
                return SNUG_OK;
            }
            continue;
        }
        bool eq = false;
        st = equal_rec(rs, at, k, key, &eq);
        if (st != SNUG_OK) return st;
        if (eq) {
            *index = (long)i;
            return SNUG_OK;
        }
    }
    return SNUG_OK;
}

/* ---- copies ------------------------------------------------------------------------ */

/* Copying a value's transient parts: a measuring pass (dst NULL) adds the
 * bytes needed to *size; a filling pass carves them from *cursor. */
typedef struct copier {
    jj_rs *rs;
    const jj_node *at;
    bool in_scope;  /* a `loop` may be kept */
    bool mark;      /* copies stay transient (they live in a slot's block or the arena) */
    size_t size;
    unsigned char *cursor;
} copier;

static void *carve(copier *c, size_t n)
{
    n = snug_round_up(n, 8);
    if (!c->cursor) {
        c->size += n;
        return NULL;
    }
    void *p = c->cursor;
    c->cursor += n;
    return p;
}

static snug_status copy_rec(copier *c, const jj_value *v, jj_value *dst)
{
    if (dst) *dst = *v;
    if (v->kind == JJ_LOOP && !c->in_scope)
        return jj_fail(c->rs, c->at, SNUG_UNSUPPORTED,
                       "a loop object can only be kept in a variable inside its loop");
    if (!v->transient) return SNUG_OK;
    snug_status st = jj_steps(c->rs, c->at, 1);
    if (st != SNUG_OK) return st;
    switch ((jj_kind)v->kind) {
    case JJ_STR: {
        char *p = carve(c, v->u.s.n);
        if (dst) {
            if (v->u.s.n) memcpy(p, v->u.s.p, v->u.s.n);
            dst->u.s.p = v->u.s.n ? p : "";
        }
        break;
    }
    case JJ_LIST: {
        const jj_list *l = v->u.list;
        jj_list *nl = carve(c, sizeof(jj_list) + l->n * sizeof(jj_value));
        if (dst) {
            memcpy(nl, l, sizeof(jj_list));
            dst->u.list = nl;
        }
        st = enter(c->rs, c->at);
        if (st != SNUG_OK) return st;
        for (size_t i = 0; i < l->n && st == SNUG_OK; i++)
            st = copy_rec(c, &l->v[i], dst ? &nl->v[i] : NULL);
        c->rs->depth--;
        if (st != SNUG_OK) return st;
        break;
    }
    case JJ_DICT: {
        const jj_dict *d = v->u.dict;
        jj_dict *nd = carve(c, sizeof(jj_dict) + 2 * d->n * sizeof(jj_value));
        if (dst) {
            nd->n = d->n;
            nd->origin = d->origin;
            dst->u.dict = nd;
        }
        st = enter(c->rs, c->at);
        if (st != SNUG_OK) return st;
        for (size_t i = 0; i < 2 * d->n && st == SNUG_OK; i++)
            st = copy_rec(c, &d->kv[i], dst ? &nd->kv[i] : NULL);
        c->rs->depth--;
        if (st != SNUG_OK) return st;
        break;
    }
    case JJ_FUNC: {
        if (!v->u.self) break;
        jj_value *self = carve(c, sizeof(jj_value));
        st = copy_rec(c, v->u.self, self);
        if (st != SNUG_OK) return st;
        if (dst) dst->u.self = self;
        break;
    }
    default: break;
    }
    if (dst) dst->transient = c->mark;
    return SNUG_OK;
}

/* Whether v can be kept as it is (nothing transient, no loop object to
 * check). */
static bool keep_as_is(const jj_value *v) { return !v->transient && v->kind != JJ_LOOP; }

snug_status jj_keep(jj_rs *rs, const jj_node *at, const jj_value *v, bool in_scope,
                    jj_value *out, void **block)
{
    *block = NULL;
    if (keep_as_is(v)) {
        *out = *v;
        return SNUG_OK;
    }
    copier c = {.rs = rs, .at = at, .in_scope = in_scope, .mark = true};
    snug_status st = copy_rec(&c, v, NULL);
    if (st != SNUG_OK) return st;
    /* nothing to copy (an empty string, a loop): the fill pass still runs,
     * on a dummy cursor, so that no pointer into the arena is kept */
    unsigned char nothing[8];
    void *p = c.size ? jj_rs_alloc(rs, c.size) : NULL;
    if (c.size && !p) return rs->err.status;
    c.cursor = p ? p : nothing;
    st = copy_rec(&c, v, out);
    if (st != SNUG_OK) {
        jj_rs_free(rs, p);
        return st;
    }
    *block = p;
    return SNUG_OK;
}

snug_status jj_unshare(jj_rs *rs, const jj_node *at, const jj_value *v, jj_value *out)
{
    if (!v->transient) {
        *out = *v;
        return SNUG_OK;
    }
    copier c = {.rs = rs, .at = at, .in_scope = true, .mark = true};
    snug_status st = copy_rec(&c, v, NULL);
    if (st != SNUG_OK) return st;
    unsigned char nothing[8];
    void *p = c.size ? jj_alloc(rs, at, c.size) : NULL;
    if (c.size && !p) return rs->err.status;
    c.cursor = p ? p : nothing;
    return copy_rec(&c, v, out);
}

/* ---- call arguments and lists ------------------------------------------------------ */

/* Binds args to the parameters names[0..n) (Python's rules): vals[i] is
 * the argument for names[i] or NULL. Keywords are refused when pos_only. */
snug_status jj_bind(jj_rs *rs, const jj_node *at, const char *what, const jj_args *a,
                        const char *const *names, size_t n, bool pos_only,
                        const jj_value **vals)
{
    for (size_t i = 0; i < n; i++) vals[i] = NULL;
    if (a->n_pos > n)
        return jj_fail(rs, at, SNUG_INVALID, "%s takes at most %zu argument(s) (%zu given)", what,
                       n, a->n_pos);
    for (size_t i = 0; i < a->n_pos; i++) vals[i] = &a->pos[i];
    for (size_t k = 0; k < a->n_kw; k++) {
        size_t i = 0;
        while (i < n && strcmp(names[i], a->kw_names[k]) != 0) i++;
        if (pos_only || i == n)
            return jj_fail(rs, at, SNUG_INVALID, "%s got an unexpected keyword argument '%s'",
                           what, a->kw_names[k]);
        if (vals[i])
            return jj_fail(rs, at, SNUG_INVALID, "%s got multiple values for argument '%s'", what,
                           a->kw_names[k]);
        vals[i] = &a->kw[k];
    }
    return SNUG_OK;
}

snug_status jj_need_str(jj_rs *rs, const jj_node *at, const jj_value *v, const char *what)
{
    if (v->kind == JJ_STR) return SNUG_OK;
    if (v->kind == JJ_UNDEF) return jj_undefined_error(rs, at, v);
    return jj_fail(rs, at, SNUG_INVALID, "%s must be str, not %s", what, jj_type_name(v));
}

snug_status jj_need_int(jj_rs *rs, const jj_node *at, const jj_value *v, const char *what,
                            int64_t *out)
{
    if (v->kind == JJ_INT) return *out = v->u.i, SNUG_OK;
    if (v->kind == JJ_BOOL) return *out = v->u.b, SNUG_OK;
    if (v->kind == JJ_UNDEF) return jj_undefined_error(rs, at, v);
    return jj_fail(rs, at, SNUG_INVALID, "%s must be an integer, not %s", what, jj_type_name(v));
}

/* A growable list of values in the arena. */
snug_status jj_vlist_push(jj_rs *rs, const jj_node *at, jj_vlist *l, const jj_value *v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jj_value *nv = jj_alloc(rs, at, cap * sizeof *nv);
        if (!nv) return rs->err.status;
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = *v;
    return jj_steps(rs, at, 1);
}

snug_status jj_vlist_to_value(jj_rs *rs, const jj_node *at, const jj_vlist *l,
                                  jj_list_flavor flavor, jj_value *out)
{
    jj_list *nl = jj_list_new(rs, at, l->n, flavor, out);
    if (!nl) return rs->err.status;
    if (l->n) memcpy(nl->v, l->v, l->n * sizeof(jj_value));
    return SNUG_OK;
}

/* ---- input ----------------------------------------------------------------------- */

static snug_status from_json_rec(jj_rs *rs, const json_t *j, jj_value *out)
{
    snug_status st = jj_steps(rs, NULL, 1);
    if (st != SNUG_OK) return st;
    switch (json_typeof(j)) {
    case JSON_NULL: *out = jj_none(); return SNUG_OK;
    case JSON_TRUE: *out = jj_bool(true); return SNUG_OK;
    case JSON_FALSE: *out = jj_bool(false); return SNUG_OK;
    case JSON_INTEGER: *out = jj_int((int64_t)json_integer_value(j)); return SNUG_OK;
    case JSON_REAL: *out = jj_float(json_real_value(j)); return SNUG_OK;
    case JSON_STRING: {
        const char *s = json_string_value(j);
        size_t n = json_string_length(j);
        if (!snug_utf8_valid(s, n))
            return jj_fail(rs, NULL, SNUG_INVALID, "a variable's string is not valid UTF-8");
        *out = jj_str(s, n, false);
        return SNUG_OK;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jj_list *l = jj_list_new(rs, NULL, n, JJ_LIST_PLAIN, out);
        if (!l) return rs->err.status;
        st = enter(rs, NULL);
        if (st != SNUG_OK) return st;
        for (size_t i = 0; i < n && st == SNUG_OK; i++)
            st = from_json_rec(rs, json_array_get(j, i), &l->v[i]);
        rs->depth--;
        out->transient = 0;
        return st;
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(j);
        jj_dict *d = jj_dict_new(rs, NULL, n, out);
        if (!d) return rs->err.status;
        st = enter(rs, NULL);
        if (st != SNUG_OK) return st;
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)j, key, item) {
            size_t key_len = json_object_iter_key_len(json_object_key_to_iter(key));
            if (!snug_utf8_valid(key, key_len)) {
                st = jj_fail(rs, NULL, SNUG_INVALID, "a variable's key is not valid UTF-8");
                break;
            }
            d->kv[2 * d->n] = jj_str(key, key_len, false);
            st = from_json_rec(rs, item, &d->kv[2 * d->n + 1]);
            if (st != SNUG_OK) break;
            d->n++;
        }
        rs->depth--;
        out->transient = 0;
        return st;
    }
    }
    return jj_fail(rs, NULL, SNUG_INTERNAL, "unknown JSON type");
}

snug_status jj_from_json(jj_rs *rs, const json_t *j, jj_value *out)
{
    return from_json_rec(rs, j, out);
}
