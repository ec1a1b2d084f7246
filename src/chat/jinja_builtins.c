/*
 * jinja_builtins.c: the filters, tests, methods and global functions the
 * interpreter offers, each doing what jinja2 (filters.py, tests.py) and
 * Python's str and dict do, errors included: where Python raises, the
 * render fails. Filters that Jinja writes as generators (select, reject,
 * selectattr, rejectattr, map, unique, items, reverse of a sequence) give
 * one-shot generator values, as in Jinja: they have no len(), cannot be
 * indexed or printed, and are consumed by iterating.
 */
#include "jinja_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tables ------------------------------------------------------------------- */

static const struct {
    const char *name;
    jj_filter id;
} g_filters[] = {
    {"abs", JJ_F_ABS}, {"capitalize", JJ_F_CAPITALIZE}, {"count", JJ_F_COUNT},
    {"d", JJ_F_DEFAULT}, {"default", JJ_F_DEFAULT}, {"dictsort", JJ_F_DICTSORT},
    {"first", JJ_F_FIRST}, {"float", JJ_F_FLOAT}, {"indent", JJ_F_INDENT}, {"int", JJ_F_INT},
    {"items", JJ_F_ITEMS}, {"join", JJ_F_JOIN}, {"last", JJ_F_LAST}, {"length", JJ_F_LENGTH},
    {"list", JJ_F_LIST}, {"lower", JJ_F_LOWER}, {"map", JJ_F_MAP}, {"max", JJ_F_MAX},
    {"min", JJ_F_MIN}, {"reject", JJ_F_REJECT}, {"rejectattr", JJ_F_REJECTATTR},
    {"replace", JJ_F_REPLACE}, {"reverse", JJ_F_REVERSE}, {"round", JJ_F_ROUND},
    {"select", JJ_F_SELECT}, {"selectattr", JJ_F_SELECTATTR}, {"sort", JJ_F_SORT},
    {"string", JJ_F_STRING}, {"sum", JJ_F_SUM}, {"title", JJ_F_TITLE}, {"tojson", JJ_F_TOJSON},
    {"trim", JJ_F_TRIM}, {"unique", JJ_F_UNIQUE}, {"upper", JJ_F_UPPER},
};

static const struct {
    const char *name;
    jj_test id;
} g_tests[] = {
    {"boolean", JJ_T_BOOLEAN}, {"callable", JJ_T_CALLABLE}, {"defined", JJ_T_DEFINED},
    {"divisibleby", JJ_T_DIVISIBLEBY}, {"==", JJ_T_EQ}, {"eq", JJ_T_EQ}, {"equalto", JJ_T_EQ},
    {"escaped", JJ_T_ESCAPED}, {"even", JJ_T_EVEN}, {"false", JJ_T_FALSE},
    {"float", JJ_T_FLOAT}, {">=", JJ_T_GE}, {"ge", JJ_T_GE}, {">", JJ_T_GT}, {"gt", JJ_T_GT},
    {"greaterthan", JJ_T_GT}, {"in", JJ_T_IN}, {"integer", JJ_T_INTEGER},
    {"iterable", JJ_T_ITERABLE}, {"<=", JJ_T_LE}, {"le", JJ_T_LE}, {"lower", JJ_T_LOWER},
    {"<", JJ_T_LT}, {"lt", JJ_T_LT}, {"lessthan", JJ_T_LT}, {"mapping", JJ_T_MAPPING},
    {"!=", JJ_T_NE}, {"ne", JJ_T_NE}, {"none", JJ_T_NONE}, {"number", JJ_T_NUMBER},
    {"odd", JJ_T_ODD}, {"sameas", JJ_T_SAMEAS}, {"sequence", JJ_T_SEQUENCE},
    {"string", JJ_T_STRING}, {"true", JJ_T_TRUE}, {"undefined", JJ_T_UNDEFINED},
    {"upper", JJ_T_UPPER},
};

static const struct {
    const char *name;
    jj_fn fn;
} g_methods[] = {
    {"strip", JJ_FN_STRIP}, {"lstrip", JJ_FN_LSTRIP}, {"rstrip", JJ_FN_RSTRIP},
    {"startswith", JJ_FN_STARTSWITH}, {"endswith", JJ_FN_ENDSWITH}, {"split", JJ_FN_SPLIT},
    {"rsplit", JJ_FN_RSPLIT}, {"splitlines", JJ_FN_SPLITLINES}, {"upper", JJ_FN_UPPER},
    {"lower", JJ_FN_LOWER}, {"title", JJ_FN_TITLE}, {"capitalize", JJ_FN_CAPITALIZE},
    {"replace", JJ_FN_REPLACE}, {"find", JJ_FN_FIND}, {"count", JJ_FN_COUNT},
    {"join", JJ_FN_JOIN}, {"removeprefix", JJ_FN_REMOVEPREFIX},
    {"removesuffix", JJ_FN_REMOVESUFFIX}, {"items", JJ_FN_ITEMS}, {"keys", JJ_FN_KEYS},
    {"values", JJ_FN_VALUES}, {"get", JJ_FN_GET}, {"cycle", JJ_FN_CYCLE},
};

int jj_filter_lookup(const char *name)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_filters); i++)
        if (strcmp(g_filters[i].name, name) == 0) return (int)g_filters[i].id;
    return -1;
}

int jj_test_lookup(const char *name)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_tests); i++)
        if (strcmp(g_tests[i].name, name) == 0) return (int)g_tests[i].id;
    return -1;
}

int jj_method_lookup(const char *name)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_methods); i++)
        if (strcmp(g_methods[i].name, name) == 0) return (int)g_methods[i].fn;
    return -1;
}

const char *jj_fn_name(jj_fn fn)
{
    switch (fn) {
    case JJ_FN_RANGE: return "range";
    case JJ_FN_DICT: return "dict";
    case JJ_FN_NAMESPACE: return "namespace";
    case JJ_FN_RAISE: return "raise_exception";
    default: break;
    }
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_methods); i++)
        if (g_methods[i].fn == fn) return g_methods[i].name;
    return "this function";
}

static const char *filter_name(int id)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_filters); i++)
        if ((int)g_filters[i].id == id) return g_filters[i].name;
    return "?";
}

/* ---- generators ------------------------------------------------------------------ */

static snug_status vlist_to_gen(jj_rs *rs, const jj_node *at, const jj_vlist *l, jj_value *out)
{
    jj_value lv;
    snug_status st = jj_vlist_to_value(rs, at, l, JJ_LIST_PLAIN, &lv);
    if (st != SNUG_OK) return st;
    return jj_gen_new(rs, at, lv.u.list, out);
}

/* ---- attribute getters (make_attrgetter) -------------------------------------------- */

/* Looks attribute (a dotted str with integer parts, an int, or NULL/none
 * for the item itself) up in item with getitem. */
static snug_status attr_get_or(jj_rs *rs, const jj_node *at, const jj_value *item,
                               const jj_value *attribute, const jj_value *def, jj_value *out);

static snug_status attr_get(jj_rs *rs, const jj_node *at, const jj_value *item,
                            const jj_value *attribute, jj_value *out)
{
    return attr_get_or(rs, at, item, attribute, NULL, out);
}

/* attr_get where each undefined step becomes def (unless def is NULL or
 * none), as make_attrgetter(default=) does. */
static snug_status attr_get_or(jj_rs *rs, const jj_node *at, const jj_value *item,
                               const jj_value *attribute, const jj_value *def, jj_value *out)
{
    if (def && def->kind == JJ_NONE) def = NULL;
    *out = *item;
    if (!attribute || attribute->kind == JJ_NONE) return SNUG_OK;
    if (attribute->kind != JJ_STR) {
        snug_status st = jj_getitem(rs, at, item, attribute, out);
        if (st == SNUG_OK && def && out->kind == JJ_UNDEF) *out = *def;
        return st;
    }
    const char *p = attribute->u.s.p;
    size_t n = attribute->u.s.n, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '.') continue;
        jj_value key = jj_str(p + start, i - start, attribute->transient);
        bool digits = i > start;
        for (size_t k = start; k < i; k++) digits &= p[k] >= '0' && p[k] <= '9';
        if (digits) {
            int64_t idx = 0;
            if (jj_str_parse_int(&key, 10, &idx) != 1)
                return jj_fail(rs, at, SNUG_UNSUPPORTED, "an attribute index this large");
            key = jj_int(idx);
        }
        jj_value next;
        snug_status st = jj_getitem(rs, at, out, &key, &next);
        if (st != SNUG_OK) return st;
        *out = def && next.kind == JJ_UNDEF ? *def : next;
        start = i + 1;
    }
    return SNUG_OK;
}

/* ignore_case: lower() of a str, other values as they are. */
static snug_status fold(jj_rs *rs, const jj_node *at, const jj_value *v, jj_value *out)
{
    if (v->kind != JJ_STR) {
        *out = *v;
        return SNUG_OK;
    }
    return jj_str_recase(rs, at, v, JJ_RC_LOWER, out);
}

/* Sort keys for sort/dictsort/min/max/unique: one value per item, or a
 * list of them when attribute names several ("a,b"). */
static snug_status sort_key(jj_rs *rs, const jj_node *at, const jj_value *item,
                            const jj_value *attribute, bool multi, bool case_sensitive,
                            jj_value *out)
{
    snug_status st;
    if (multi && attribute && attribute->kind == JJ_STR) {
        jj_vlist keys = {0};
        const char *p = attribute->u.s.p;
        size_t n = attribute->u.s.n, start = 0;
        for (size_t i = 0; i <= n; i++) {
            if (i < n && p[i] != ',') continue;
            jj_value part = jj_str(p + start, i - start, attribute->transient), v, f;
            if ((st = attr_get(rs, at, item, &part, &v)) != SNUG_OK) return st;
            if ((st = case_sensitive ? (f = v, SNUG_OK) : fold(rs, at, &v, &f)) != SNUG_OK) return st;
            if ((st = jj_vlist_push(rs, at, &keys, &f)) != SNUG_OK) return st;
            start = i + 1;
        }
        return jj_vlist_to_value(rs, at, &keys, JJ_LIST_PLAIN, out);
    }
    jj_value v;
    if ((st = attr_get(rs, at, item, attribute, &v)) != SNUG_OK) return st;
    if (case_sensitive) {
        *out = v;
        return SNUG_OK;
    }
    return fold(rs, at, &v, out);
}

/* Stable merge sort of order[] by keys[] (Python's sorted with key=; with
 * reverse the comparison is flipped, which keeps equal items in order). */
static snug_status merge_sort(jj_rs *rs, const jj_node *at, const jj_value *keys, size_t *order,
                              size_t *tmp, size_t n, bool reverse)
{
    if (n < 2) return SNUG_OK;
    size_t half = n / 2;
    snug_status st = merge_sort(rs, at, keys, order, tmp, half, reverse);
    if (st == SNUG_OK) st = merge_sort(rs, at, keys, order + half, tmp, n - half, reverse);
    if (st != SNUG_OK) return st;
    size_t i = 0, j = half, o = 0;
    while (i < half && j < n) {
        int c = 0;
        /* take from the right only when it is strictly smaller */
        st = reverse ? jj_compare(rs, at, &keys[order[i]], &keys[order[j]], &c)
                     : jj_compare(rs, at, &keys[order[j]], &keys[order[i]], &c);
        if (st != SNUG_OK) return st;
        tmp[o++] = c == -1 ? order[j++] : order[i++];
    }
    while (i < half) tmp[o++] = order[i++];
    while (j < n) tmp[o++] = order[j++];
    memcpy(order, tmp, n * sizeof *order);
    return SNUG_OK;
}

static snug_status sorted(jj_rs *rs, const jj_node *at, const jj_list *items, const jj_value *keys,
                          bool reverse, jj_value *out)
{
    size_t n = items->n;
    size_t *order = jj_alloc(rs, at, (n + 1) * sizeof *order * 2);
    if (!order) return rs->err.status;
    for (size_t i = 0; i < n; i++) order[i] = i;
    snug_status st = merge_sort(rs, at, keys, order, order + n, n, reverse);
    if (st != SNUG_OK) return st;
    jj_list *l = jj_list_new(rs, at, n, JJ_LIST_PLAIN, out);
    if (!l) return rs->err.status;
    for (size_t i = 0; i < n; i++) l->v[i] = items->v[order[i]];
    return SNUG_OK;
}

/* ---- filters --------------------------------------------------------------------- */

static bool opt_truthy(const jj_value *v) { return v && jj_truthy(v); }

static snug_status f_select(jj_rs *rs, const jj_node *at, const jj_value *in, const jj_args *a,
                            bool attr, bool keep_if, jj_value *out)
{
    jj_vlist kept = {0};
    snug_status st = SNUG_OK;
    if (!jj_truthy(in)) return vlist_to_gen(rs, at, &kept, out);
    size_t off = attr ? 1 : 0;
    if (attr && a->n_pos < 1)
        return jj_fail(rs, at, SNUG_INVALID, "missing parameter for attribute name");
    int test = -1;
    if (a->n_pos > off) {
        const jj_value *name = &a->pos[off];
        char buf[64];
        if (name->kind != JJ_STR || name->u.s.n >= sizeof buf)
            return jj_fail(rs, at, SNUG_INVALID, "a test name must be a string");
        memcpy(buf, name->u.s.p, name->u.s.n);
        buf[name->u.s.n] = '\0';
        char shown[64];
        if ((test = jj_test_lookup(buf)) < 0)
            return jj_fail(rs, at, SNUG_UNSUPPORTED, "the test '%s' is not supported",
                           snug_bytes_shown(name->u.s.p, name->u.s.n, shown, sizeof shown));
    }
    jj_args targs = {.pos = a->n_pos > off + 1 ? a->pos + off + 1 : NULL,
                     .n_pos = a->n_pos > off + 1 ? a->n_pos - off - 1 : 0,
                     .kw_names = a->kw_names, .kw = a->kw, .n_kw = a->n_kw};
    const jj_list *items = NULL;
    if ((st = jj_iterate(rs, at, in, &items)) != SNUG_OK) return st;
    for (size_t i = 0; i < items->n; i++) {
        jj_value subject = items->v[i];
        if (attr && (st = attr_get(rs, at, &items->v[i], &a->pos[0], &subject)) != SNUG_OK) return st;
        bool yes = false;
        if (test >= 0) {
            if ((st = jj_apply_test(rs, at, test, &subject, &targs, &yes)) != SNUG_OK) return st;
        } else {
            yes = jj_truthy(&subject);
        }
        if (yes == keep_if && (st = jj_vlist_push(rs, at, &kept, &items->v[i])) != SNUG_OK) return st;
    }
    return vlist_to_gen(rs, at, &kept, out);
}

static snug_status f_map(jj_rs *rs, const jj_node *at, const jj_value *in, const jj_args *a,
                         jj_value *out)
{
    jj_vlist mapped = {0};
    snug_status st = SNUG_OK;
    if (!jj_truthy(in)) return vlist_to_gen(rs, at, &mapped, out);
    const jj_value *attribute = NULL, *def = NULL;
    int filter = -1;
    jj_args fargs = {0};
    bool by_attr = false;
    if (a->n_pos == 0) {
        for (size_t k = 0; k < a->n_kw; k++) {
            if (strcmp(a->kw_names[k], "attribute") == 0) attribute = &a->kw[k];
            else if (strcmp(a->kw_names[k], "default") == 0) def = &a->kw[k];
        }
        by_attr = attribute != NULL;
        if (by_attr && a->n_kw != 1u + (def != NULL))
            return jj_fail(rs, at, SNUG_INVALID, "map: unexpected keyword argument");
    }
    if (!by_attr) {
        if (a->n_pos == 0) return jj_fail(rs, at, SNUG_INVALID, "map requires a filter argument");
        char buf[64];
        const jj_value *name = &a->pos[0];
        if (name->kind != JJ_STR || name->u.s.n >= sizeof buf)
            return jj_fail(rs, at, SNUG_INVALID, "map: a filter name must be a string");
        memcpy(buf, name->u.s.p, name->u.s.n);
        buf[name->u.s.n] = '\0';
        char shown[64];
        if ((filter = jj_filter_lookup(buf)) < 0)
            return jj_fail(rs, at, SNUG_UNSUPPORTED, "the filter '%s' is not supported",
                           snug_bytes_shown(name->u.s.p, name->u.s.n, shown, sizeof shown));
        fargs = (jj_args){.pos = a->n_pos > 1 ? a->pos + 1 : NULL, .n_pos = a->n_pos - 1,
                          .kw_names = a->kw_names, .kw = a->kw, .n_kw = a->n_kw};
    }
    const jj_list *items = NULL;
    if ((st = jj_iterate(rs, at, in, &items)) != SNUG_OK) return st;
    for (size_t i = 0; i < items->n; i++) {
        jj_value v;
        if (by_attr) {
            st = attr_get_or(rs, at, &items->v[i], attribute, def, &v);
        } else {
            st = jj_apply_filter(rs, at, filter, &items->v[i], &fargs, &v);
        }
        if (st == SNUG_OK) st = jj_vlist_push(rs, at, &mapped, &v);
        if (st != SNUG_OK) return st;
    }
    return vlist_to_gen(rs, at, &mapped, out);
}

static snug_status f_indent(jj_rs *rs, const jj_node *at, const jj_value *in,
                            const jj_value *const *v, jj_value *out)
{
    snug_status st;
    if (in->kind != JJ_STR) {
        if (in->kind == JJ_UNDEF) return jj_undefined_error(rs, at, in);
        return jj_fail(rs, at, SNUG_INVALID, "indent: can only indent a str, not %s",
                       jj_type_name(in));
    }
    jj_value ind = jj_str("    ", 4, false);
    if (v[0]) {
        if (v[0]->kind == JJ_STR) {
            ind = *v[0];
        } else {
            int64_t w = 0;
            if ((st = jj_need_int(rs, at, v[0], "indent width", &w)) != SNUG_OK) return st;
            jj_value space = jj_str(" ", 1, false);
            if ((st = jj_binary(rs, at, JJ_OP_MUL, &space, &(jj_value){.kind = JJ_INT, .u.i = w},
                                &ind)) != SNUG_OK)
                return st;
        }
    }
    bool first = opt_truthy(v[1]), blank = opt_truthy(v[2]);
    /* s + "\n", split into lines */
    char *withnl = jj_alloc(rs, at, in->u.s.n + 2);
    if (!withnl) return rs->err.status;
    memcpy(withnl, in->u.s.p, in->u.s.n);
    withnl[in->u.s.n] = '\n';
    jj_value s = jj_str(withnl, in->u.s.n + 1, true);
    jj_vlist lines = {0};
    if ((st = jj_str_splitlines(rs, at, &s, false, &lines)) != SNUG_OK) return st;
    jj_vlist parts = {0};
    jj_value nl = jj_str("\n", 1, false), empty = jj_str("", 0, false);
    if (first && (st = jj_vlist_push(rs, at, &parts, &ind)) != SNUG_OK) return st;
    for (size_t i = 0; i < lines.n; i++) {
        if (i > 0) {
            if ((st = jj_vlist_push(rs, at, &parts, &nl)) != SNUG_OK) return st;
            if ((blank || lines.v[i].u.s.n > 0) && (st = jj_vlist_push(rs, at, &parts, &ind)) != SNUG_OK)
                return st;
        }
        if ((st = jj_vlist_push(rs, at, &parts, &lines.v[i])) != SNUG_OK) return st;
    }
    return jj_str_join(rs, at, &empty, parts.v, parts.n, out);
}

static snug_status f_int(jj_rs *rs, const jj_node *at, const jj_value *in,
                         const jj_value *const *v, jj_value *out)
{
    jj_value def = v[0] ? *v[0] : jj_int(0);
    int64_t base = 10;
    snug_status st;
    if (v[1] && (st = jj_need_int(rs, at, v[1], "base", &base)) != SNUG_OK) return st;
    switch ((jj_kind)in->kind) {
    case JJ_INT: *out = *in; return SNUG_OK;
    case JJ_BOOL: *out = jj_int(in->u.b); return SNUG_OK;
    case JJ_UNDEF: return jj_undefined_error(rs, at, in);
    case JJ_FLOAT: {
        double f = in->u.f;
        if (isnan(f)) {
            *out = def;
            return SNUG_OK;
        }
        if (isinf(f)) return jj_fail(rs, at, SNUG_INVALID, "cannot convert float infinity to integer");
        if (f >= 9223372036854775808.0 || f < -9223372036854775808.0)
            return jj_fail(rs, at, SNUG_UNSUPPORTED, "integers beyond 64 bits are not supported");
        *out = jj_int((int64_t)f);
        return SNUG_OK;
    }
    case JJ_STR: {
        if (base != 0 && (base < 2 || base > 36))
            return jj_fail(rs, at, SNUG_INVALID, "int() base must be >= 2 and <= 36, or 0");
        int64_t i = 0;
        int r = jj_str_parse_int(in, (int)base, &i);
        if (r < 0) return jj_fail(rs, at, SNUG_UNSUPPORTED, "integers beyond 64 bits are not supported");
        if (r > 0) {
            *out = jj_int(i);
            return SNUG_OK;
        }
        double f = 0;
        if (!jj_str_parse_float(in, &f) || !isfinite(f)) {
            *out = def;
            return SNUG_OK;
        }
        if (f >= 9223372036854775808.0 || f < -9223372036854775808.0)
            return jj_fail(rs, at, SNUG_UNSUPPORTED, "integers beyond 64 bits are not supported");
        *out = jj_int((int64_t)f);
        return SNUG_OK;
    }
    default: *out = def; return SNUG_OK;
    }
}

static snug_status f_float(jj_rs *rs, const jj_node *at, const jj_value *in, const jj_value *def,
                           jj_value *out)
{
    double f = 0;
    switch ((jj_kind)in->kind) {
    case JJ_FLOAT: *out = *in; return SNUG_OK;
    case JJ_INT:
    case JJ_BOOL: *out = jj_float(in->kind == JJ_INT ? (double)in->u.i : in->u.b); return SNUG_OK;
    case JJ_UNDEF: return jj_undefined_error(rs, at, in);
    case JJ_STR:
        if (jj_str_parse_float(in, &f)) {
            *out = jj_float(f);
            return SNUG_OK;
        }
        break;
    default: break;
    }
    *out = def ? *def : jj_float(0);
    return SNUG_OK;
}

static snug_status f_round(jj_rs *rs, const jj_node *at, const jj_value *in,
                           const jj_value *const *v, jj_value *out)
{
    int64_t prec = 0;
    snug_status st;
    if (v[0] && (st = jj_need_int(rs, at, v[0], "precision", &prec)) != SNUG_OK) return st;
    const char *method = "common";
    if (v[1]) {
        if (jj_str_is(v[1], "common") || jj_str_is(v[1], "ceil") || jj_str_is(v[1], "floor"))
            method = v[1]->u.s.p[0] == 'c' && v[1]->u.s.p[1] == 'e' ? "ceil"
                     : v[1]->u.s.p[0] == 'f'                        ? "floor"
                                                                    : "common";
        else
            return jj_fail(rs, at, SNUG_INVALID, "method must be common, ceil or floor");
    }
    if (!jj_is_number(in)) {
        if (in->kind == JJ_UNDEF) return jj_undefined_error(rs, at, in);
        return jj_fail(rs, at, SNUG_INVALID, "round: type %s doesn't define __round__",
                       jj_type_name(in));
    }
    if (prec < -30 || prec > 30)
        return jj_fail(rs, at, SNUG_UNSUPPORTED, "round() to more than 30 digits is not supported");
    if (strcmp(method, "common") == 0) {
        if (in->kind != JJ_FLOAT) { /* round(int, n) is an int */
            int64_t x = in->kind == JJ_BOOL ? in->u.b : in->u.i;
            if (prec >= 0) {
                *out = jj_int(x);
                return SNUG_OK;
            }
            if (prec < -18) {
                *out = jj_int(0);
                return SNUG_OK;
            }
            int64_t unit = 1;
            for (int64_t k = 0; k < -prec; k++) unit *= 10;
            int64_t q = x / unit, r = x % unit;
            if (r < 0) {
                q -= 1;
                r += unit;
            }
            if (r * 2 > unit || (r * 2 == unit && (q & 1))) q += 1;
            int64_t res;
            if (__builtin_mul_overflow(q, unit, &res))
                return jj_fail(rs, at, SNUG_UNSUPPORTED, "integer overflow");
            *out = jj_int(res);
            return SNUG_OK;
        }
        double x = in->u.f;
        if (!isfinite(x) || prec > 22) {
            *out = jj_float(x);
            return SNUG_OK;
        }
        if (prec < 0)
            return jj_fail(rs, at, SNUG_UNSUPPORTED, "round() of a float to negative digits is not supported");
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
        *out = jj_float(strtod(buf, NULL));
        return SNUG_OK;
    }
    /* math.ceil/floor(value * 10**p) / 10**p */
    double scale = pow(10.0, (double)prec), x = in->kind == JJ_FLOAT ? in->u.f
                                                                       : (double)(in->kind == JJ_BOOL ? in->u.b : in->u.i);
    if (prec < 0)
        return jj_fail(rs, at, SNUG_UNSUPPORTED, "round() to negative digits is not supported");
    double y = x * scale;
    if (!isfinite(y)) return jj_fail(rs, at, SNUG_INVALID, "cannot convert float infinity or NaN to integer");
    y = method[0] == 'c' ? ceil(y) : floor(y);
    *out = jj_float(y / scale);
    return SNUG_OK;
}

static snug_status f_tojson(jj_rs *rs, const jj_node *at, const jj_value *in,
                            const jj_value *const *v, jj_value *out)
{
    jj_json_opts o = {.ensure_ascii = opt_truthy(v[0]), .sort_keys = opt_truthy(v[3])};
    snug_status st;
    if (v[1] && v[1]->kind != JJ_NONE) {
        if (v[1]->kind == JJ_STR) {
            o.indent = v[1]->u.s.p;
            o.indent_len = v[1]->u.s.n;
        } else {
            int64_t w = 0;
            if ((st = jj_need_int(rs, at, v[1], "tojson indent", &w)) != SNUG_OK) return st;
            if (w > 1024) return jj_fail(rs, at, SNUG_UNSUPPORTED, "an indent of %lld", (long long)w);
            char *sp = jj_alloc(rs, at, (size_t)(w > 0 ? w : 0) + 1);
            if (!sp) return rs->err.status;
            if (w > 0) memset(sp, ' ', (size_t)w);
            o.indent = sp;
            o.indent_len = (size_t)(w > 0 ? w : 0);
        }
    }
    o.item_sep = o.indent ? "," : ", ";
    o.item_sep_len = o.indent ? 1 : 2;
    o.key_sep = ": ";
    o.key_sep_len = 2;
    if (v[2] && v[2]->kind != JJ_NONE) {
        const jj_value *seps = v[2];
        if (seps->kind != JJ_LIST || (seps->flavor != JJ_LIST_PLAIN && seps->flavor != JJ_LIST_TUPLE) ||
            seps->u.list->n != 2 || seps->u.list->v[0].kind != JJ_STR ||
            seps->u.list->v[1].kind != JJ_STR)
            return jj_fail(rs, at, SNUG_INVALID, "tojson separators must be two strings");
        o.item_sep = seps->u.list->v[0].u.s.p;
        o.item_sep_len = seps->u.list->v[0].u.s.n;
        o.key_sep = seps->u.list->v[1].u.s.p;
        o.key_sep_len = seps->u.list->v[1].u.s.n;
    }
    return jj_to_json(rs, at, in, &o, out);
}

static snug_status f_minmax(jj_rs *rs, const jj_node *at, const jj_value *in,
                            const jj_value *const *v, bool want_max, jj_value *out)
{
    const jj_list *items = NULL;
    snug_status st = jj_iterate(rs, at, in, &items);
    if (st != SNUG_OK) return st;
    if (items->n == 0) {
        *out = jj_undef("no aggregated item, sequence was empty");
        return SNUG_OK;
    }
    bool cs = opt_truthy(v[0]);
    jj_value best_key;
    size_t best = 0;
    if ((st = sort_key(rs, at, &items->v[0], v[1], false, cs, &best_key)) != SNUG_OK) return st;
    for (size_t i = 1; i < items->n; i++) {
        jj_value key;
        int c = 0;
        if ((st = sort_key(rs, at, &items->v[i], v[1], false, cs, &key)) != SNUG_OK) return st;
        st = want_max ? jj_compare(rs, at, &best_key, &key, &c) : jj_compare(rs, at, &key, &best_key, &c);
        if (st != SNUG_OK) return st;
        if (c == -1) {
            best = i;
            best_key = key;
        }
    }
    *out = items->v[best];
    return SNUG_OK;
}

static snug_status f_unique(jj_rs *rs, const jj_node *at, const jj_value *in,
                            const jj_value *const *v, jj_value *out)
{
    const jj_list *items = NULL;
    snug_status st = jj_iterate(rs, at, in, &items);
    if (st != SNUG_OK) return st;
    jj_vlist kept = {0}, seen = {0};
    for (size_t i = 0; i < items->n; i++) {
        jj_value key;
        if ((st = sort_key(rs, at, &items->v[i], v[1], false, opt_truthy(v[0]), &key)) != SNUG_OK)
            return st;
        if ((st = jj_check_hashable(rs, at, &key)) != SNUG_OK) return st;
        bool found = false;
        for (size_t k = 0; k < seen.n && !found && st == SNUG_OK; k++)
            st = jj_equal(rs, at, &seen.v[k], &key, &found);
        if (st != SNUG_OK) return st;
        if (found) continue;
        if ((st = jj_vlist_push(rs, at, &seen, &key)) != SNUG_OK) return st;
        if ((st = jj_vlist_push(rs, at, &kept, &items->v[i])) != SNUG_OK) return st;
    }
    return vlist_to_gen(rs, at, &kept, out);
}

/* A (key, value) tuple. */
static snug_status pair(jj_rs *rs, const jj_node *at, const jj_value *k, const jj_value *v,
                        jj_value *out)
{
    jj_list *l = jj_list_new(rs, at, 2, JJ_LIST_TUPLE, out);
    if (!l) return rs->err.status;
    l->v[0] = *k;
    l->v[1] = *v;
    return SNUG_OK;
}

static snug_status dict_items(jj_rs *rs, const jj_node *at, const jj_dict *d,
                              jj_list_flavor flavor, jj_value *out)
{
    jj_list *l = jj_list_new(rs, at, d->n, flavor, out);
    if (!l) return rs->err.status;
    for (size_t i = 0; i < d->n; i++) {
        snug_status st = SNUG_OK;
        if (flavor == JJ_LIST_KEYS)
            l->v[i] = d->kv[2 * i];
        else if (flavor == JJ_LIST_VALUES)
            l->v[i] = d->kv[2 * i + 1];
        else
            st = pair(rs, at, &d->kv[2 * i], &d->kv[2 * i + 1], &l->v[i]);
        if (st != SNUG_OK) return st;
    }
    return jj_steps(rs, at, (int64_t)d->n);
}

snug_status jj_apply_filter(jj_rs *rs, const jj_node *at, int id, const jj_value *in,
                            const jj_args *a, jj_value *out)
{
    const jj_value *v[4] = {NULL, NULL, NULL, NULL};
    const char *what = filter_name(id);
    snug_status st = SNUG_OK;
    jj_value s;
    const jj_list *items = NULL;
#define BIND(...)                                                                         \
    do {                                                                                  \
        static const char *const names_[] = {__VA_ARGS__};                                \
        st = jj_bind(rs, at, what, a, names_, SNUG_ARRAY_LEN(names_), false, v);             \
        if (st != SNUG_OK) return st;                                                     \
    } while (0)
#define BIND_NONE()                                                                       \
    do {                                                                                  \
        st = jj_bind(rs, at, what, a, NULL, 0, false, v);                                    \
        if (st != SNUG_OK) return st;                                                     \
    } while (0)
    switch ((jj_filter)id) {
    case JJ_F_ABS:
        BIND_NONE();
        if (in->kind == JJ_FLOAT) return *out = jj_float(fabs(in->u.f)), SNUG_OK;
        if (in->kind == JJ_INT || in->kind == JJ_BOOL) {
            int64_t x = in->kind == JJ_BOOL ? in->u.b : in->u.i;
            if (x == INT64_MIN) return jj_fail(rs, at, SNUG_UNSUPPORTED, "integer overflow");
            return *out = jj_int(x < 0 ? -x : x), SNUG_OK;
        }
        if (in->kind == JJ_UNDEF) return jj_undefined_error(rs, at, in);
        return jj_fail(rs, at, SNUG_INVALID, "bad operand type for abs(): '%s'", jj_type_name(in));
    case JJ_F_CAPITALIZE:
    case JJ_F_LOWER:
    case JJ_F_UPPER:
    case JJ_F_TITLE:
        BIND_NONE();
        if ((st = jj_to_str(rs, at, in, &s)) != SNUG_OK) return st;
        return jj_str_recase(rs, at, &s,
                      id == JJ_F_CAPITALIZE ? JJ_RC_CAPITALIZE : id == JJ_F_LOWER ? JJ_RC_LOWER
                      : id == JJ_F_UPPER    ? JJ_RC_UPPER : JJ_RC_TITLE_FILTER,
                      out);
    case JJ_F_COUNT:
    case JJ_F_LENGTH: {
        BIND_NONE();
        size_t n = 0;
        if ((st = jj_len(rs, at, in, &n)) != SNUG_OK) return st;
        *out = jj_int((int64_t)n);
        return SNUG_OK;
    }
    case JJ_F_DEFAULT:
        BIND("default_value", "boolean");
        if (in->kind == JJ_UNDEF || (opt_truthy(v[1]) && !jj_truthy(in)))
            *out = v[0] ? *v[0] : jj_str("", 0, false);
        else
            *out = *in;
        return SNUG_OK;
    case JJ_F_DICTSORT: {
        BIND("case_sensitive", "by", "reverse");
        int pos = 0;
        if (v[1]) {
            if (jj_str_is(v[1], "value")) pos = 1;
            else if (!jj_str_is(v[1], "key"))
                return jj_fail(rs, at, SNUG_INVALID, "you can only sort by either \"key\" or \"value\"");
        }
        if (in->kind == JJ_UNDEF) return jj_undefined_error(rs, at, in);
        if (in->kind != JJ_DICT)
            return jj_fail(rs, at, SNUG_INVALID, "dictsort: '%s' object has no attribute 'items'",
                           jj_type_name(in));
        jj_value pairs;
        if ((st = dict_items(rs, at, in->u.dict, JJ_LIST_PLAIN, &pairs)) != SNUG_OK) return st;
        size_t n = pairs.u.list->n;
        jj_value *keys = jj_alloc(rs, at, (n + 1) * sizeof *keys);
        if (!keys) return rs->err.status;
        for (size_t i = 0; i < n; i++) {
            const jj_value *k = &pairs.u.list->v[i].u.list->v[pos];
            if ((st = sort_key(rs, at, k, NULL, false, opt_truthy(v[0]), &keys[i])) != SNUG_OK)
                return st;
        }
        return sorted(rs, at, pairs.u.list, keys, opt_truthy(v[2]), out);
    }
    case JJ_F_FIRST:
        BIND_NONE();
        if (in->kind == JJ_GEN) {
            jj_gen *g = in->u.gen;
            if ((st = jj_gen_check(rs, at, g)) != SNUG_OK) return st;
            *out = g->pos < g->items->n ? g->items->v[g->pos++] : jj_undef("no first item");
            return SNUG_OK;
        }
        if ((st = jj_iterate(rs, at, in, &items)) != SNUG_OK) return st;
        *out = items->n ? items->v[0] : jj_undef("no first item, sequence was empty");
        return SNUG_OK;
    case JJ_F_LAST:
        BIND_NONE();
        if (in->kind == JJ_GEN || in->kind == JJ_LOOP)
            return jj_fail(rs, at, SNUG_INVALID, "'%s' object is not reversible", jj_type_name(in));
        if ((st = jj_iterate(rs, at, in, &items)) != SNUG_OK) return st;
        *out = items->n ? items->v[items->n - 1] : jj_undef("no last item, sequence was empty");
        return SNUG_OK;
    case JJ_F_FLOAT:
        BIND("default");
        return f_float(rs, at, in, v[0], out);
    case JJ_F_INT:
        BIND("default", "base");
        return f_int(rs, at, in, v, out);
    case JJ_F_INDENT:
        BIND("width", "first", "blank");
        return f_indent(rs, at, in, v, out);
    case JJ_F_ITEMS: {
        BIND_NONE();
        if (in->kind == JJ_UNDEF) return jj_gen_new(rs, at, &(jj_list){0}, out);
        if (in->kind != JJ_DICT)
            return jj_gen_failing(
                rs, at, jj_fail(rs, at, SNUG_INVALID, "can only get item pairs from a mapping"), out);
        jj_value pairs;
        if ((st = dict_items(rs, at, in->u.dict, JJ_LIST_PLAIN, &pairs)) != SNUG_OK) return st;
        return jj_gen_new(rs, at, pairs.u.list, out);
    }
    case JJ_F_JOIN: {
        BIND("d", "attribute");
        jj_value sep = jj_str("", 0, false);
        if (v[0] && (st = jj_to_str(rs, at, v[0], &sep)) != SNUG_OK) return st;
        if ((st = jj_iterate(rs, at, in, &items)) != SNUG_OK) return st;
        jj_value *strs = jj_alloc(rs, at, (items->n + 1) * sizeof *strs);
        if (!strs) return rs->err.status;
        for (size_t i = 0; i < items->n; i++) {
            jj_value item = items->v[i];
            if (v[1] && (st = attr_get(rs, at, &items->v[i], v[1], &item)) != SNUG_OK) return st;
            if ((st = jj_to_str(rs, at, &item, &strs[i])) != SNUG_OK) return st;
        }
        return jj_str_join(rs, at, &sep, strs, items->n, out);
    }
    case JJ_F_LIST: {
        BIND_NONE();
        if ((st = jj_iterate(rs, at, in, &items)) != SNUG_OK) return st;
        jj_list *l = jj_list_new(rs, at, items->n, JJ_LIST_PLAIN, out);
        if (!l) return rs->err.status;
        if (items->n) memcpy(l->v, items->v, items->n * sizeof(jj_value));
        return jj_steps(rs, at, (int64_t)items->n);
    }
    case JJ_F_MAP: return jj_gen_failing(rs, at, f_map(rs, at, in, a, out), out);
    case JJ_F_MAX:
    case JJ_F_MIN:
        BIND("case_sensitive", "attribute");
        return f_minmax(rs, at, in, v, id == JJ_F_MAX, out);
    /* generator filters: their errors wait until they are consumed */
    case JJ_F_REJECT: return jj_gen_failing(rs, at, f_select(rs, at, in, a, false, false, out), out);
    case JJ_F_SELECT: return jj_gen_failing(rs, at, f_select(rs, at, in, a, false, true, out), out);
    case JJ_F_REJECTATTR:
        return jj_gen_failing(rs, at, f_select(rs, at, in, a, true, false, out), out);
    case JJ_F_SELECTATTR:
        return jj_gen_failing(rs, at, f_select(rs, at, in, a, true, true, out), out);
    case JJ_F_REPLACE: {
        BIND("old", "new", "count");
        if (!v[0] || !v[1]) return jj_fail(rs, at, SNUG_INVALID, "replace needs old and new");
        jj_value old_s, new_s;
        int64_t count = -1;
        if ((st = jj_to_str(rs, at, in, &s)) != SNUG_OK) return st;
        if ((st = jj_to_str(rs, at, v[0], &old_s)) != SNUG_OK) return st;
        if ((st = jj_to_str(rs, at, v[1], &new_s)) != SNUG_OK) return st;
        if (v[2] && v[2]->kind != JJ_NONE && (st = jj_need_int(rs, at, v[2], "count", &count)) != SNUG_OK)
            return st;
        return jj_str_replace(rs, at, &s, &old_s, &new_s, count, out);
    }
    case JJ_F_REVERSE: {
        BIND_NONE();
        if (in->kind == JJ_STR) {
            size_t n = in->u.s.n;
            char *buf = jj_alloc(rs, at, n + 1);
            if (!buf) return rs->err.status;
            for (size_t i = 0; i < n;) {
                size_t adv = 1;
                jj_utf8_next(in->u.s.p + i, n - i, &adv);
                memcpy(buf + n - i - adv, in->u.s.p + i, adv);
                i += adv;
            }
            *out = jj_str(buf, n, true);
            return SNUG_OK;
        }
        if (in->kind == JJ_NS || in->kind == JJ_LOOP)
            return jj_fail(rs, at, SNUG_INVALID, "argument must be iterable");
        bool to_list = in->kind == JJ_GEN;
        if ((st = jj_iterate(rs, at, in, &items)) != SNUG_OK) return st;
        jj_value lv;
        jj_list *l = jj_list_new(rs, at, items->n, JJ_LIST_PLAIN, &lv);
        if (!l) return rs->err.status;
        for (size_t i = 0; i < items->n; i++) l->v[i] = items->v[items->n - 1 - i];
        if (to_list) {
            *out = lv;
            return SNUG_OK;
        }
        return jj_gen_new(rs, at, l, out);
    }
    case JJ_F_ROUND:
        BIND("precision", "method");
        return f_round(rs, at, in, v, out);
    case JJ_F_SORT: {
        BIND("reverse", "case_sensitive", "attribute");
        if ((st = jj_iterate(rs, at, in, &items)) != SNUG_OK) return st;
        jj_value *keys = jj_alloc(rs, at, (items->n + 1) * sizeof *keys);
        if (!keys) return rs->err.status;
        for (size_t i = 0; i < items->n; i++)
            if ((st = sort_key(rs, at, &items->v[i], v[2], true, opt_truthy(v[1]), &keys[i])) != SNUG_OK)
                return st;
        return sorted(rs, at, items, keys, opt_truthy(v[0]), out);
    }
    case JJ_F_STRING:
        BIND_NONE();
        return jj_to_str(rs, at, in, out);
    case JJ_F_SUM: {
        BIND("attribute", "start");
        jj_value acc = v[1] ? *v[1] : jj_int(0);
        if (acc.kind == JJ_STR)
            return jj_fail(rs, at, SNUG_INVALID, "sum() can't sum strings [use ''.join(seq) instead]");
        if ((st = jj_iterate(rs, at, in, &items)) != SNUG_OK) return st;
        for (size_t i = 0; i < items->n; i++) {
            jj_value item = items->v[i], next;
            if (v[0] && (st = attr_get(rs, at, &items->v[i], v[0], &item)) != SNUG_OK) return st;
            if ((st = jj_binary(rs, at, JJ_OP_ADD, &acc, &item, &next)) != SNUG_OK) return st;
            acc = next;
        }
        *out = acc;
        return SNUG_OK;
    }
    case JJ_F_TOJSON:
        BIND("ensure_ascii", "indent", "separators", "sort_keys");
        return f_tojson(rs, at, in, v, out);
    case JJ_F_TRIM:
        BIND("chars");
        if ((st = jj_to_str(rs, at, in, &s)) != SNUG_OK) return st;
        return jj_str_strip(rs, at, &s, v[0], true, true, out);
    case JJ_F_UNIQUE:
        BIND("case_sensitive", "attribute");
        return jj_gen_failing(rs, at, f_unique(rs, at, in, v, out), out);
    default: break;
    }
#undef BIND
#undef BIND_NONE
    return jj_fail(rs, at, SNUG_INTERNAL, "unknown filter %d", id);
}

/* ---- tests ------------------------------------------------------------------------- */

/* str(v).islower() / isupper(). */
static snug_status case_test(jj_rs *rs, const jj_node *at, const jj_value *in, bool lower,
                             bool *out)
{
    jj_value s;
    snug_status st = jj_to_str(rs, at, in, &s);
    if (st != SNUG_OK) return st;
    bool cased = false;
    *out = false;
    for (size_t i = 0; i < s.u.s.n;) {
        size_t adv = 1;
        uint32_t cp = jj_utf8_next(s.u.s.p + i, s.u.s.n - i, &adv);
        int lo = jj_is_lower(cp), up = jj_is_upper(cp);
        if (lo < 0 || up < 0)
            return jj_fail(rs, at, SNUG_UNSUPPORTED, "the case of U+%04X is not known", (unsigned)cp);
        if (lower ? up : lo) return SNUG_OK;
        if (lower ? lo : up) cased = true;
        i += adv;
    }
    *out = cased;
    return SNUG_OK;
}

snug_status jj_apply_test(jj_rs *rs, const jj_node *at, int id, const jj_value *in,
                          const jj_args *a, bool *out)
{
    const jj_value *v[1] = {NULL};
    const char *what = "test";
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_tests); i++)
        if ((int)g_tests[i].id == id) what = g_tests[i].name;
    bool wants_arg = id == JJ_T_DIVISIBLEBY || id == JJ_T_EQ || id == JJ_T_NE || id == JJ_T_LT ||
                     id == JJ_T_LE || id == JJ_T_GT || id == JJ_T_GE || id == JJ_T_IN ||
                     id == JJ_T_SAMEAS;
    static const char *const arg_names[] = {"other"};
    snug_status st = jj_bind(rs, at, what, a, arg_names, wants_arg ? 1 : 0, false, v);
    if (st != SNUG_OK) return st;
    if (wants_arg && !v[0])
        return jj_fail(rs, at, SNUG_INVALID, "the test '%s' needs an argument", what);
    jj_kind k = (jj_kind)in->kind;
    switch ((jj_test)id) {
    case JJ_T_BOOLEAN: *out = k == JJ_BOOL; return SNUG_OK;
    case JJ_T_CALLABLE:
        *out = k == JJ_MACRO || k == JJ_FUNC || k == JJ_UNDEF || k == JJ_LOOP;
        return SNUG_OK;
    case JJ_T_DEFINED: *out = k != JJ_UNDEF; return SNUG_OK;
    case JJ_T_UNDEFINED: *out = k == JJ_UNDEF; return SNUG_OK;
    case JJ_T_ESCAPED: *out = false; return SNUG_OK;
    case JJ_T_FALSE: *out = k == JJ_BOOL && !in->u.b; return SNUG_OK;
    case JJ_T_TRUE: *out = k == JJ_BOOL && in->u.b; return SNUG_OK;
    case JJ_T_FLOAT: *out = k == JJ_FLOAT; return SNUG_OK;
    case JJ_T_INTEGER: *out = k == JJ_INT; return SNUG_OK;
    case JJ_T_NUMBER: *out = jj_is_number(in); return SNUG_OK;
    case JJ_T_STRING: *out = k == JJ_STR; return SNUG_OK;
    case JJ_T_MAPPING: *out = k == JJ_DICT; return SNUG_OK;
    case JJ_T_NONE: *out = k == JJ_NONE; return SNUG_OK;
    case JJ_T_ITERABLE:
        *out = k == JJ_STR || k == JJ_LIST || k == JJ_DICT || k == JJ_UNDEF || k == JJ_GEN ||
               k == JJ_LOOP;
        return SNUG_OK;
    case JJ_T_SEQUENCE:
        *out = k == JJ_STR || k == JJ_DICT || k == JJ_UNDEF ||
               (k == JJ_LIST && (in->flavor == JJ_LIST_PLAIN || in->flavor == JJ_LIST_TUPLE ||
                                 in->flavor == JJ_LIST_RANGE));
        return SNUG_OK;
    case JJ_T_LOWER: return case_test(rs, at, in, true, out);
    case JJ_T_UPPER: return case_test(rs, at, in, false, out);
    case JJ_T_EVEN:
    case JJ_T_ODD:
    case JJ_T_DIVISIBLEBY: {
        jj_value two = jj_int(2), rem;
        const jj_value *by = id == JJ_T_DIVISIBLEBY ? v[0] : &two;
        if ((st = jj_binary(rs, at, JJ_OP_MOD, in, by, &rem)) != SNUG_OK) return st;
        jj_value want = jj_int(id == JJ_T_ODD ? 1 : 0);
        return jj_equal(rs, at, &rem, &want, out);
    }
    case JJ_T_EQ: return jj_equal(rs, at, in, v[0], out);
    case JJ_T_NE:
        st = jj_equal(rs, at, in, v[0], out);
        *out = !*out;
        return st;
    case JJ_T_LT:
    case JJ_T_LE:
    case JJ_T_GT:
    case JJ_T_GE: {
        int c = 0;
        if ((st = jj_compare(rs, at, in, v[0], &c)) != SNUG_OK) return st;
        *out = id == JJ_T_LT ? c == -1 : id == JJ_T_LE ? (c == -1 || c == 0)
               : id == JJ_T_GT ? c == 1 : (c == 1 || c == 0);
        return SNUG_OK;
    }
    case JJ_T_IN: return jj_contains(rs, at, v[0], in, out);
    case JJ_T_SAMEAS: {
        const jj_value *b = v[0];
        if (k == JJ_NONE || b->kind == JJ_NONE) {
            *out = k == JJ_NONE && b->kind == JJ_NONE;
            return SNUG_OK;
        }
        if (k == JJ_BOOL || b->kind == JJ_BOOL) {
            *out = k == JJ_BOOL && b->kind == JJ_BOOL && in->u.b == b->u.b;
            return SNUG_OK;
        }
        if (k == JJ_INT && b->kind == JJ_INT && in->u.i >= -5 && in->u.i <= 256) {
            *out = in->u.i == b->u.i;
            return SNUG_OK;
        }
        if (k != b->kind && k != JJ_INT && b->kind != JJ_INT) {
            *out = false;
            return SNUG_OK;
        }
        return jj_fail(rs, at, SNUG_UNSUPPORTED,
                       "'sameas' is only supported for none, booleans and small integers");
    }
    default: break;
    }
    return jj_fail(rs, at, SNUG_INTERNAL, "unknown test %d", id);
}

/* ---- functions and methods --------------------------------------------------------------- */

static snug_status fn_range(jj_rs *rs, const jj_node *at, const jj_args *a, jj_value *out)
{
    if (a->n_kw) return jj_fail(rs, at, SNUG_INVALID, "range() takes no keyword arguments");
    if (a->n_pos < 1 || a->n_pos > 3)
        return jj_fail(rs, at, SNUG_INVALID, "range expected 1 to 3 arguments, got %zu", a->n_pos);
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a->n_pos; i++) {
        snug_status st = jj_need_int(rs, at, &a->pos[i], "range() argument", &v[i]);
        if (st != SNUG_OK) return st;
    }
    int64_t start = a->n_pos == 1 ? 0 : v[0], stop = a->n_pos == 1 ? v[0] : v[1];
    int64_t step = a->n_pos == 3 ? v[2] : 1;
    if (step == 0) return jj_fail(rs, at, SNUG_INVALID, "range() arg 3 must not be zero");
    __int128 span = (__int128)stop - start, len = 0;
    if (step > 0 && span > 0) len = (span - 1) / step + 1;
    if (step < 0 && span < 0) len = (-span - 1) / (-(__int128)step) + 1;
    if (len > 100000)
        return jj_fail(rs, at, SNUG_INVALID,
                       "range too big: the sandbox blocks ranges larger than 100000");
    jj_list *l = jj_list_new(rs, at, (size_t)len, JJ_LIST_RANGE, out);
    if (!l) return rs->err.status;
    l->r_start = start;
    l->r_stop = stop;
    l->r_step = step;
    for (int64_t i = 0; i < (int64_t)len; i++) l->v[i] = jj_int(start + i * step);
    return jj_steps(rs, at, (int64_t)len);
}

static snug_status fn_dict(jj_rs *rs, const jj_node *at, const jj_args *a, jj_value *out)
{
    if (a->n_pos > 1) return jj_fail(rs, at, SNUG_INVALID, "dict expected at most 1 argument");
    size_t n0 = 0;
    if (a->n_pos == 1) {
        if (a->pos[0].kind != JJ_DICT)
            return jj_fail(rs, at, SNUG_UNSUPPORTED, "dict() of a %s is not supported",
                           jj_type_name(&a->pos[0]));
        n0 = a->pos[0].u.dict->n;
    }
    jj_dict *d = jj_dict_new(rs, at, n0 + a->n_kw, out);
    if (!d) return rs->err.status;
    if (n0) {
        memcpy(d->kv, a->pos[0].u.dict->kv, 2 * n0 * sizeof(jj_value));
        d->n = n0;
    }
    for (size_t k = 0; k < a->n_kw; k++) {
        jj_value key = jj_str(a->kw_names[k], strlen(a->kw_names[k]), false);
        long at_index = -1;
        snug_status st = jj_dict_find(rs, at, d, &key, &at_index);
        if (st != SNUG_OK) return st;
        if (at_index >= 0) {
            d->kv[2 * at_index + 1] = a->kw[k];
        } else {
            d->kv[2 * d->n] = key;
            d->kv[2 * d->n + 1] = a->kw[k];
            d->n++;
        }
    }
    return SNUG_OK;
}

snug_status jj_call_builtin(jj_rs *rs, const jj_node *at, jj_fn fn, const jj_value *self,
                            const jj_args *a, jj_value *out)
{
    const jj_value *v[2] = {NULL, NULL};
    snug_status st;
    switch (fn) {
    case JJ_FN_RANGE: return fn_range(rs, at, a, out);
    case JJ_FN_DICT: return fn_dict(rs, at, a, out);
    case JJ_FN_NAMESPACE: return jj_ns_new(rs, at, a, out);
    case JJ_FN_RAISE: {
        static const char *const names[] = {"message"};
        if ((st = jj_bind(rs, at, "raise_exception", a, names, 1, false, v)) != SNUG_OK) return st;
        if (!v[0]) return jj_fail(rs, at, SNUG_INVALID, "raise_exception() needs a message");
        jj_value msg;
        if ((st = jj_to_str(rs, at, v[0], &msg)) != SNUG_OK) return st;
        bool first = rs->err.status == SNUG_OK;
        char shown[SNUG_ERROR_MSG_BYTES]; /* the template's text, often with a client's in it */
        st = jj_fail(rs, NULL, SNUG_INVALID, "%s", snug_bytes_shown(msg.u.s.p, msg.u.s.n, shown, sizeof shown));
        if (first) rs->fail_kind = SNUG_TEMPLATE_FAIL_RAISED;
        return st;
    }
    case JJ_FN_ITEMS:
    case JJ_FN_KEYS:
    case JJ_FN_VALUES:
        if (!self || self->kind != JJ_DICT) break;
        if ((st = jj_bind(rs, at, jj_fn_name(fn), a, NULL, 0, true, v)) != SNUG_OK) return st;
        return dict_items(rs, at, self->u.dict,
                          fn == JJ_FN_ITEMS ? JJ_LIST_ITEMS : fn == JJ_FN_KEYS ? JJ_LIST_KEYS
                                                                               : JJ_LIST_VALUES,
                          out);
    case JJ_FN_GET: {
        static const char *const names[] = {"key", "default"};
        if (!self || self->kind != JJ_DICT) break;
        if ((st = jj_bind(rs, at, "get", a, names, 2, true, v)) != SNUG_OK) return st;
        if (!v[0]) return jj_fail(rs, at, SNUG_INVALID, "get expected at least 1 argument");
        long k = -1;
        if ((st = jj_dict_find(rs, at, self->u.dict, v[0], &k)) != SNUG_OK) return st;
        *out = k >= 0 ? self->u.dict->kv[2 * k + 1] : v[1] ? *v[1] : jj_none();
        return SNUG_OK;
    }
    case JJ_FN_CYCLE:
        if (!self || self->kind != JJ_LOOP) break;
        if (a->n_kw) return jj_fail(rs, at, SNUG_INVALID, "cycle() takes no keyword arguments");
        if (a->n_pos == 0) return jj_fail(rs, at, SNUG_INVALID, "no items for cycling given");
        *out = a->pos[self->u.loop->index0 % a->n_pos];
        return SNUG_OK;
    case JJ_FN_NONE:
    case JJ_FN_OTHER:
    case JJ_FN_COUNT_: break;
    default:
        if (self && self->kind == JJ_STR) return jj_str_method(rs, at, fn, self, a, out);
        break;
    }
    return jj_fail(rs, at, SNUG_UNSUPPORTED, "calling %s is not supported", jj_fn_name(fn));
}
