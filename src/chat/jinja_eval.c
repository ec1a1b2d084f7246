/*
 * jinja_eval.c: runs a compiled template: statements, expressions,
 * variables and their scopes, macros, and the operations Jinja leaves to
 * Python (attribute and item access under the sandbox's rules, operators,
 * iteration, `in`), with the limits of snug_template_limits.
 *
 * Scopes follow Jinja: the template level is one scope; each for-loop
 * iteration and each macro call gets a child scope (a macro's parent is the
 * template level, not its caller), so a {% set %} inside them is gone
 * afterwards; {% if %} makes no scope. Memory follows the rules at the top
 * of jinja_impl.h: each statement releases the arena to where it started.
 */
#include "jinja_impl.h"

#include "base/mem.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { CTL_NONE = 0, CTL_BREAK, CTL_CONTINUE };

static snug_status eval(jj_rs *rs, const jj_node *n, jj_value *out);
static snug_status exec_body(jj_rs *rs, jj_node *const *items, uint32_t n, int *ctl);

snug_status jj_undefined_error(jj_rs *rs, const jj_node *at, const jj_value *v)
{
    char shown[64]; /* a name, or a subscript's string key: template or client bytes */
    if (v->u.undef_name)
        return jj_fail(rs, at, SNUG_INVALID, "'%s' is undefined", snug_str_shown(v->u.undef_name, shown, sizeof shown));
    return jj_fail(rs, at, SNUG_INVALID, "an undefined value was used");
}

/* ---- slots and scopes --------------------------------------------------------- */

jj_slot *jj_slots_find(const jj_slots *s, const char *name, size_t n)
{
    for (size_t i = s->n; i-- > 0;)
        if (strncmp(s->v[i].name, name, n) == 0 && s->v[i].name[n] == '\0') return &s->v[i];
    return NULL;
}

static snug_status slots_grow(jj_rs *rs, jj_slots *s)
{
    if (s->n < s->cap) return SNUG_OK;
    size_t cap = s->cap ? s->cap * 2 : 8;
    jj_slot *v = jj_rs_alloc(rs, cap * sizeof *v);
    if (!v) return rs->err.status;
    if (s->n) memcpy(v, s->v, s->n * sizeof *v);
    jj_rs_free(rs, s->v);
    s->v = v;
    s->cap = cap;
    return SNUG_OK;
}

snug_status jj_slots_set(jj_rs *rs, const jj_node *at, jj_slots *s, const char *name, size_t n,
                         bool name_stable, const jj_value *v, bool in_scope)
{
    jj_value kept;
    void *block = NULL;
    char *name_block = NULL;
    snug_status st = jj_keep(rs, at, v, in_scope, &kept, &block);
    if (st != SNUG_OK) return st;
    jj_slot *slot = jj_slots_find(s, name, n);
    if (!slot) {
        if (!name_stable) {
            name_block = jj_rs_alloc(rs, n + 1);
            if (!name_block) {
                st = rs->err.status;
                goto fail;
            }
            memcpy(name_block, name, n);
            name = name_block;
        }
        if ((st = slots_grow(rs, s)) != SNUG_OK) goto fail;
        slot = &s->v[s->n++];
        memset(slot, 0, sizeof *slot);
        slot->name = name;
        slot->name_block = name_block;
    }
    jj_rs_free(rs, slot->block);
    slot->v = kept;
    slot->block = block;
    return SNUG_OK;
fail:
    jj_rs_free(rs, block);
    jj_rs_free(rs, name_block);
    return st;
}

snug_status jj_slots_bind(jj_rs *rs, jj_slots *s, const char *name, const jj_value *v)
{
    jj_slot *slot = jj_slots_find(s, name, strlen(name));
    if (!slot) {
        snug_status st = slots_grow(rs, s);
        if (st != SNUG_OK) return st;
        slot = &s->v[s->n++];
        memset(slot, 0, sizeof *slot);
        slot->name = name;
    }
    jj_rs_free(rs, slot->block);
    slot->block = NULL;
    slot->v = *v;
    return SNUG_OK;
}

void jj_slots_clear(jj_rs *rs, jj_slots *s)
{
    for (size_t i = 0; i < s->n; i++) {
        jj_rs_free(rs, s->v[i].block);
        jj_rs_free(rs, s->v[i].name_block);
    }
    s->n = 0;
}

void jj_slots_free(jj_rs *rs, jj_slots *s)
{
    jj_slots_clear(rs, s);
    jj_rs_free(rs, s->v);
    s->v = NULL;
    s->cap = 0;
}

snug_status jj_slot_read(jj_rs *rs, const jj_node *at, const jj_slot *s, jj_value *out)
{
    if (!s->block) {
        *out = s->v;
        return SNUG_OK;
    }
    return jj_unshare(rs, at, &s->v, out);
}

/* ---- namespaces and generators ----------------------------------------------- */

/* Sets a namespace attribute from a key of a mapping (a str). */
static snug_status ns_set_key(jj_rs *rs, const jj_node *at, jj_ns *ns, const jj_value *k,
                              const jj_value *v)
{
    if (k->kind != JJ_STR)
        return jj_fail(rs, at, SNUG_UNSUPPORTED,
                       "namespace() keys other than strings are not supported");
    if (memchr(k->u.s.p, '\0', k->u.s.n))
        return jj_fail(rs, at, SNUG_UNSUPPORTED, "namespace() keys holding NUL are not supported");
    return jj_slots_set(rs, at, &ns->attrs, k->u.s.p, k->u.s.n, false, v, false);
}

snug_status jj_ns_new(jj_rs *rs, const jj_node *at, const jj_args *args, jj_value *out)
{
    if (args->n_pos > 1)
        return jj_fail(rs, at, SNUG_INVALID, "namespace() takes at most 1 positional argument");
    jj_ns *ns = jj_rs_alloc(rs, sizeof *ns);
    if (!ns) return rs->err.status;
    ns->next = rs->namespaces;
    rs->namespaces = ns;
    snug_status st = SNUG_OK;
    if (args->n_pos == 1) {
        /* dict(init): a mapping, or pairs */
        const jj_value *init = &args->pos[0];
        const jj_list *pairs = NULL;
        if (init->kind == JJ_DICT) {
            const jj_dict *d = init->u.dict;
            for (size_t i = 0; i < d->n && st == SNUG_OK; i++)
                st = ns_set_key(rs, at, ns, &d->kv[2 * i], &d->kv[2 * i + 1]);
        } else if ((st = jj_iterate(rs, at, init, &pairs)) == SNUG_OK) {
            for (size_t i = 0; i < pairs->n && st == SNUG_OK; i++) {
                const jj_value *kv = NULL;
                if (pairs->v[i].kind != JJ_LIST || pairs->v[i].u.list->n != 2)
                    return jj_fail(rs, at, SNUG_INVALID,
                                   "namespace(): each item must be a pair (key, value)");
                kv = pairs->v[i].u.list->v;
                st = ns_set_key(rs, at, ns, &kv[0], &kv[1]);
            }
        }
    }
    for (size_t i = 0; i < args->n_kw && st == SNUG_OK; i++)
        st = jj_slots_set(rs, at, &ns->attrs, args->kw_names[i], strlen(args->kw_names[i]), true,
                          &args->kw[i], false);
    if (st != SNUG_OK) return st;
    *out = (jj_value){.kind = JJ_NS};
    out->u.ns = ns;
    return SNUG_OK;
}

snug_status jj_gen_new(jj_rs *rs, const jj_node *at, const jj_list *items, jj_value *out)
{
    jj_value list = {.kind = JJ_LIST, .transient = 1};
    list.u.list = (jj_list *)items;
    jj_value kept;
    void *block = NULL;
    snug_status st = jj_keep(rs, at, &list, false, &kept, &block);
    if (st != SNUG_OK) return st;
    jj_gen *g = jj_rs_alloc(rs, sizeof *g);
    if (!g) {
        jj_rs_free(rs, block);
        return rs->err.status;
    }
    g->items = kept.u.list;
    g->block = block;
    g->next = rs->gens;
    rs->gens = g;
    *out = (jj_value){.kind = JJ_GEN};
    out->u.gen = g;
    return SNUG_OK;
}

static const jj_list g_empty_list;

snug_status jj_gen_failing(jj_rs *rs, const jj_node *at, snug_status status, jj_value *out)
{
    if (status == SNUG_OK || rs->fatal) return status;
    snug_error saved = rs->err;
    size_t saved_text_at = rs->fail_text_at;
    rs->err = (snug_error){0};
    rs->fail_kind = SNUG_TEMPLATE_FAIL_NONE;
    rs->n_fail_items = 0; /* the loops of the error deferred, not of the one to come */
    snug_status st = jj_gen_new(rs, at, &g_empty_list, out);
    char *msg = st == SNUG_OK ? jj_rs_alloc(rs, strlen(saved.msg) + 1) : NULL;
    if (!msg) return st != SNUG_OK ? st : rs->err.status;
    memcpy(msg, saved.msg, strlen(saved.msg) + 1);
    out->u.gen->fail_msg = msg;
    out->u.gen->fail_status = saved.status;
    out->u.gen->fail_text_at = saved_text_at;
    return SNUG_OK;
}

snug_status jj_gen_check(jj_rs *rs, const jj_node *at, const jj_gen *g)
{
    (void)at;
    if (g->fail_status == SNUG_OK) return SNUG_OK;
    if (rs->err.status == SNUG_OK) { /* the message already names its place */
        rs->err.status = g->fail_status;
        snprintf(rs->err.msg, sizeof rs->err.msg, "%s", g->fail_msg);
        rs->fail_kind = SNUG_TEMPLATE_FAIL_ERROR; /* never a limit (those are not deferred) */
        rs->fail_text_at = g->fail_text_at;
    }
    return g->fail_status;
}

/* ---- iteration, len, in ------------------------------------------------------------ */

snug_status jj_iterate(jj_rs *rs, const jj_node *at, const jj_value *v, const jj_list **out)
{
    switch ((jj_kind)v->kind) {
    case JJ_LIST: *out = v->u.list; return SNUG_OK;
    case JJ_UNDEF: *out = &g_empty_list; return SNUG_OK;
    case JJ_DICT: {
        const jj_dict *d = v->u.dict;
        jj_value lv;
        jj_list *l = jj_list_new(rs, at, d->n, JJ_LIST_PLAIN, &lv);
        if (!l) return rs->err.status;
        for (size_t i = 0; i < d->n; i++) l->v[i] = d->kv[2 * i];
        *out = l;
        return jj_steps(rs, at, (int64_t)d->n);
    }
    case JJ_STR: {
        size_t n = jj_utf8_len(v->u.s.p, v->u.s.n);
        jj_value lv;
        jj_list *l = jj_list_new(rs, at, n, JJ_LIST_PLAIN, &lv);
        if (!l) return rs->err.status;
        size_t off = 0;
        for (size_t i = 0; i < n; i++) {
            size_t adv = 1;
            jj_utf8_next(v->u.s.p + off, v->u.s.n - off, &adv);
            l->v[i] = jj_str(v->u.s.p + off, adv, v->transient);
            off += adv;
        }
        *out = l;
        return jj_steps(rs, at, (int64_t)n);
    }
    case JJ_GEN: {
        jj_gen *g = v->u.gen;
        snug_status st = jj_gen_check(rs, at, g);
        if (st != SNUG_OK) return st;
        size_t n = g->items->n - g->pos;
        jj_value lv;
        jj_list *l = jj_list_new(rs, at, n, JJ_LIST_PLAIN, &lv);
        if (!l) return rs->err.status;
        for (size_t i = 0; i < n; i++) l->v[i] = g->items->v[g->pos + i];
        g->pos = g->items->n;
        *out = l;
        return jj_steps(rs, at, (int64_t)n);
    }
    case JJ_LOOP:
        return jj_fail(rs, at, SNUG_UNSUPPORTED, "iterating over a loop object is not supported");
    default:
        return jj_fail(rs, at, SNUG_INVALID, "'%s' object is not iterable", jj_type_name(v));
    }
}

snug_status jj_len(jj_rs *rs, const jj_node *at, const jj_value *v, size_t *out)
{
    switch ((jj_kind)v->kind) {
    case JJ_UNDEF: *out = 0; return SNUG_OK;
    case JJ_STR: *out = jj_utf8_len(v->u.s.p, v->u.s.n); return SNUG_OK;
    case JJ_LIST: *out = v->u.list->n; return SNUG_OK;
    case JJ_DICT: *out = v->u.dict->n; return SNUG_OK;
    case JJ_LOOP: *out = v->u.loop->items->n; return SNUG_OK;
    default:
        return jj_fail(rs, at, SNUG_INVALID, "object of type '%s' has no len()", jj_type_name(v));
    }
}

snug_status jj_contains(jj_rs *rs, const jj_node *at, const jj_value *container,
                        const jj_value *item, bool *out)
{
    *out = false;
    snug_status st = SNUG_OK;
    switch ((jj_kind)container->kind) {
    case JJ_STR:
        if (item->kind != JJ_STR) {
            if (item->kind == JJ_UNDEF) return jj_undefined_error(rs, at, item);
            return jj_fail(rs, at, SNUG_INVALID,
                           "'in <string>' requires string as left operand, not %s",
                           jj_type_name(item));
        }
        *out = jj_find_bytes(container->u.s.p, container->u.s.n, item->u.s.p, item->u.s.n) != NULL;
        return jj_steps(rs, at, (int64_t)(container->u.s.n / 16));
    case JJ_DICT: {
        long k = -1;
        st = jj_dict_find(rs, at, container->u.dict, item, &k);
        *out = k >= 0;
        return st;
    }
    case JJ_LIST: {
        const jj_list *l = container->u.list;
        for (size_t i = 0; i < l->n && !*out && st == SNUG_OK; i++)
            st = jj_equal(rs, at, item, &l->v[i], out);
        return st;
    }
    case JJ_UNDEF: return SNUG_OK;
    case JJ_GEN: {
        jj_gen *g = container->u.gen;
        if ((st = jj_gen_check(rs, at, g)) != SNUG_OK) return st;
        while (g->pos < g->items->n && !*out && st == SNUG_OK)
            st = jj_equal(rs, at, item, &g->items->v[g->pos++], out);
        return st;
    }
    case JJ_LOOP:
        return jj_fail(rs, at, SNUG_UNSUPPORTED, "'in' on a loop object is not supported");
    default:
        return jj_fail(rs, at, SNUG_INVALID, "argument of type '%s' is not iterable",
                       jj_type_name(container));
    }
}

/* ---- attributes and items (the sandbox's getattr / getitem) ---------------------------- */

static const char *const g_str_attrs[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find",
    "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
    "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper",
    "join", "ljust", "lower", "lstrip", "maketrans", "partition", "removeprefix",
    "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip",
    "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper",
    "zfill", NULL};

static bool in_list(const char *const *names, const char *name)
{
    for (size_t i = 0; names[i]; i++)
        if (strcmp(names[i], name) == 0) return true;
    return false;
}

/* A bound method value: fn with the receiver copied into the arena. */
static snug_status bound(jj_rs *rs, const jj_node *at, const jj_value *self, jj_fn fn,
                         jj_value *out)
{
    jj_value *copy = jj_alloc(rs, at, sizeof *copy);
    if (!copy) return rs->err.status;
    *copy = *self;
    *out = (jj_value){.kind = JJ_FUNC, .transient = 1, .flavor = (uint16_t)fn};
    out->u.self = copy;
    return SNUG_OK;
}

static snug_status method_of(jj_rs *rs, const jj_node *at, const jj_value *self,
                             const char *name, jj_value *out)
{
    int id = jj_method_lookup(name);
    return bound(rs, at, self, id >= 0 ? (jj_fn)id : JJ_FN_OTHER, out);
}

static snug_status loop_attr(jj_rs *rs, const jj_node *at, const jj_value *obj,
                             const char *name, jj_value *out)
{
    const jj_loop *lp = obj->u.loop;
    size_t i = lp->index0, n = lp->items->n;
    if (strcmp(name, "index") == 0) *out = jj_int((int64_t)i + 1);
    else if (strcmp(name, "index0") == 0) *out = jj_int((int64_t)i);
    else if (strcmp(name, "revindex") == 0) *out = jj_int((int64_t)(n - i));
    else if (strcmp(name, "revindex0") == 0) *out = jj_int((int64_t)(n - i - 1));
    else if (strcmp(name, "first") == 0) *out = jj_bool(i == 0);
    else if (strcmp(name, "last") == 0) *out = jj_bool(i + 1 == n);
    else if (strcmp(name, "length") == 0) *out = jj_int((int64_t)n);
    else if (strcmp(name, "depth") == 0) *out = jj_int(1);
    else if (strcmp(name, "depth0") == 0) *out = jj_int(0);
    else if (strcmp(name, "previtem") == 0)
        *out = i > 0 ? lp->items->v[i - 1] : jj_undef("there is no previous item");
    else if (strcmp(name, "nextitem") == 0)
        *out = i + 1 < n ? lp->items->v[i + 1] : jj_undef("there is no next item");
    else if (strcmp(name, "cycle") == 0) return bound(rs, at, obj, JJ_FN_CYCLE, out);
    else if (strcmp(name, "changed") == 0) return bound(rs, at, obj, JJ_FN_OTHER, out);
    else *out = jj_undef(name);
    return SNUG_OK;
}

snug_status jj_getattr(jj_rs *rs, const jj_node *at, const jj_value *obj, const char *name,
                       jj_value *out)
{
    static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy",
                                               "fromkeys", NULL};
    static const char *const dict_unsafe[] = {"clear", "pop", "popitem", "setdefault",
                                              "update", NULL};
    switch ((jj_kind)obj->kind) {
    case JJ_UNDEF: return jj_undefined_error(rs, at, obj);
    case JJ_DICT: {
        if (in_list(dict_methods, name)) return method_of(rs, at, obj, name, out);
        if (in_list(dict_unsafe, name)) {
            *out = jj_undef(name);
            return SNUG_OK;
        }
        jj_value key = jj_str(name, strlen(name), false);
        long k = -1;
        snug_status st = jj_dict_find(rs, at, obj->u.dict, &key, &k);
        if (st != SNUG_OK) return st;
        *out = k >= 0 ? obj->u.dict->kv[2 * k + 1] : jj_undef(name);
        return SNUG_OK;
    }
    case JJ_STR:
        if (in_list(g_str_attrs, name)) return method_of(rs, at, obj, name, out);
        break;
    case JJ_LIST: {
        static const char *const list_methods[] = {"copy", "count", "index", NULL};
        static const char *const tuple_methods[] = {"count", "index", NULL};
        const jj_list *l = obj->u.list;
        if (obj->flavor == JJ_LIST_PLAIN && in_list(list_methods, name))
            return bound(rs, at, obj, JJ_FN_OTHER, out);
        if ((obj->flavor == JJ_LIST_TUPLE || obj->flavor == JJ_LIST_RANGE) &&
            in_list(tuple_methods, name))
            return bound(rs, at, obj, JJ_FN_OTHER, out);
        if (obj->flavor == JJ_LIST_RANGE) {
            if (strcmp(name, "start") == 0) return *out = jj_int(l->r_start), SNUG_OK;
            if (strcmp(name, "stop") == 0) return *out = jj_int(l->r_stop), SNUG_OK;
            if (strcmp(name, "step") == 0) return *out = jj_int(l->r_step), SNUG_OK;
        }
        break;
    }
    case JJ_NS: {
        const jj_slot *s = jj_slots_find(&obj->u.ns->attrs, name, strlen(name));
        if (s) return jj_slot_read(rs, at, s, out);
        break;
    }
    case JJ_LOOP: return loop_attr(rs, at, obj, name, out);
    case JJ_MACRO:
        if (strcmp(name, "name") == 0) {
            *out = jj_str(obj->u.macro->name, strlen(obj->u.macro->name), false);
            return SNUG_OK;
        }
        break;
    case JJ_INT:
    case JJ_BOOL:
    case JJ_FLOAT:
        if (strcmp(name, "real") == 0) {
            *out = obj->kind == JJ_BOOL ? jj_int(obj->u.b) : *obj;
            return SNUG_OK;
        }
        if (strcmp(name, "imag") == 0) {
            *out = obj->kind == JJ_FLOAT ? jj_float(0) : jj_int(0);
            return SNUG_OK;
        }
        break;
    default: break;
    }
    *out = jj_undef(name);
    return SNUG_OK;
}

/* Python's slice.indices(len): clamps start/stop for step. */
static void slice_indices(int64_t len, bool has_start, int64_t start, bool has_stop,
                          int64_t stop, int64_t step, int64_t *out_start, int64_t *out_stop)
{
    int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? len : len - 1;
    if (!has_start) {
        start = step < 0 ? upper : lower;
    } else {
        if (start < 0) start += len;
        if (start < lower) start = lower;
        if (start > upper) start = upper;
    }
    if (!has_stop) {
        stop = step < 0 ? lower : upper;
    } else {
        if (stop < 0) stop += len;
        if (stop < lower) stop = lower;
        if (stop > upper) stop = upper;
    }
    *out_start = start;
    *out_stop = stop;
}

/* A slice bound: none (absent) or an int; false when the bound is of
 * another type (Python raises TypeError, which getitem turns into
 * undefined). */
static bool slice_bound(const jj_value *v, bool *has, int64_t *out)
{
    *has = false;
    if (!v || v->kind == JJ_NONE) return true;
    if (v->kind == JJ_INT) *out = v->u.i;
    else if (v->kind == JJ_BOOL) *out = v->u.b;
    else return false;
    *has = true;
    return true;
}

static snug_status do_slice(jj_rs *rs, const jj_node *at, const jj_value *obj,
                            const jj_value *lo, const jj_value *hi, const jj_value *stepv,
                            jj_value *out)
{
    /* Jinja subscripts slices in Python directly: errors are not turned
     * into undefined as for other subscripts */
    if (obj->kind == JJ_UNDEF) return jj_undefined_error(rs, at, obj);
    bool is_str = obj->kind == JJ_STR;
    if (!is_str && !(obj->kind == JJ_LIST && (obj->flavor == JJ_LIST_PLAIN ||
                                             obj->flavor == JJ_LIST_TUPLE ||
                                             obj->flavor == JJ_LIST_RANGE))) {
        if (obj->kind == JJ_DICT) return jj_fail(rs, at, SNUG_INVALID, "unhashable type: 'slice'");
        return jj_fail(rs, at, SNUG_INVALID, "'%s' object is not subscriptable", jj_type_name(obj));
    }
    bool has_lo, has_hi, has_step;
    int64_t a = 0, b = 0, step = 1;
    if (!slice_bound(lo, &has_lo, &a) || !slice_bound(hi, &has_hi, &b) ||
        !slice_bound(stepv, &has_step, &step))
        return jj_fail(rs, at, SNUG_INVALID,
                       "slice indices must be integers or None or have an __index__ method");
    if (!has_step) step = 1;
    if (step == 0) return jj_fail(rs, at, SNUG_INVALID, "slice step cannot be zero");
    if (step == INT64_MIN) step = -INT64_MAX;
    int64_t len = is_str ? (int64_t)jj_utf8_len(obj->u.s.p, obj->u.s.n) : (int64_t)obj->u.list->n;
    int64_t start, stop;
    slice_indices(len, has_lo, a, has_hi, b, step, &start, &stop);
    int64_t count = 0;
    if (step > 0 && start < stop) count = (stop - start - 1) / step + 1;
    if (step < 0 && start > stop) count = (start - stop - 1) / (-step) + 1;
    snug_status st = jj_steps(rs, at, count);
    if (st != SNUG_OK) return st;
    if (is_str) {
        /* byte offsets of each code point, then gather */
        const char *p = obj->u.s.p;
        size_t n = obj->u.s.n;
        if (step == 1) {
            size_t off_a = jj_utf8_offset(p, n, (size_t)start);
            size_t off_b = off_a + jj_utf8_offset(p + off_a, n - off_a, (size_t)(stop - start));
            *out = jj_str(p + off_a, count ? off_b - off_a : 0, obj->transient);
            return SNUG_OK;
        }
        size_t *offs = jj_alloc(rs, at, ((size_t)len + 1) * sizeof *offs);
        if (!offs) return rs->err.status;
        size_t off = 0;
        for (int64_t i = 0; i <= len; i++) {
            offs[i] = off;
            if (i < len) {
                size_t adv = 1;
                jj_utf8_next(p + off, n - off, &adv);
                off += adv;
            }
        }
        char *buf = jj_alloc(rs, at, n + 1);
        if (!buf) return rs->err.status;
        size_t o = 0;
        for (int64_t k = 0, i = start; k < count; k++, i += step) {
            size_t w = offs[i + 1] - offs[i];
            memcpy(buf + o, p + offs[i], w);
            o += w;
        }
        *out = jj_str(buf, o, true);
        return SNUG_OK;
    }
    const jj_list *l = obj->u.list;
    jj_list *nl = jj_list_new(rs, at, (size_t)count, (jj_list_flavor)obj->flavor, out);
    if (!nl) return rs->err.status;
    for (int64_t k = 0, i = start; k < count; k++, i += step) nl->v[k] = l->v[i];
    if (obj->flavor == JJ_LIST_RANGE) {
        nl->r_start = l->r_start + start * l->r_step;
        nl->r_stop = l->r_start + stop * l->r_step;
        nl->r_step = l->r_step * step;
    }
    return SNUG_OK;
}

snug_status jj_getitem(jj_rs *rs, const jj_node *at, const jj_value *obj,
                       const jj_value *key, jj_value *out)
{
    bool is_index = key->kind == JJ_INT || key->kind == JJ_BOOL;
    int64_t index = key->kind == JJ_INT ? key->u.i : key->kind == JJ_BOOL ? key->u.b : 0;
    switch ((jj_kind)obj->kind) {
    case JJ_UNDEF: return jj_undefined_error(rs, at, obj);
    case JJ_DICT: {
        long k = -1;
        if (key->kind == JJ_DICT || (key->kind == JJ_LIST && key->flavor != JJ_LIST_TUPLE &&
                                     key->flavor != JJ_LIST_RANGE))
            break; /* unhashable: TypeError, then undefined */
        snug_status st = jj_dict_find(rs, at, obj->u.dict, key, &k);
        if (st != SNUG_OK) return st;
        if (k >= 0) {
            *out = obj->u.dict->kv[2 * k + 1];
            return SNUG_OK;
        }
        break;
    }
    case JJ_LIST:
        if (is_index && obj->flavor != JJ_LIST_KEYS && obj->flavor != JJ_LIST_VALUES &&
            obj->flavor != JJ_LIST_ITEMS) {
            int64_t n = (int64_t)obj->u.list->n;
            if (index < 0) index += n;
            if (index >= 0 && index < n) {
                *out = obj->u.list->v[index];
                return SNUG_OK;
            }
            *out = jj_undef("index out of range");
            return SNUG_OK;
        }
        break;
    case JJ_STR:
        if (is_index) {
            int64_t n = (int64_t)jj_utf8_len(obj->u.s.p, obj->u.s.n);
            if (index < 0) index += n;
            if (index >= 0 && index < n) {
                size_t off = jj_utf8_offset(obj->u.s.p, obj->u.s.n, (size_t)index), adv = 1;
                jj_utf8_next(obj->u.s.p + off, obj->u.s.n - off, &adv);
                *out = jj_str(obj->u.s.p + off, adv, obj->transient);
                return SNUG_OK;
            }
            *out = jj_undef("index out of range");
            return SNUG_OK;
        }
        break;
    default: break;
    }
    /* Python raised; Jinja tries the attribute for a string key */
    if (key->kind == JJ_STR && !memchr(key->u.s.p, '\0', key->u.s.n)) {
        char *name = jj_alloc(rs, at, key->u.s.n + 1);
        if (!name) return rs->err.status;
        memcpy(name, key->u.s.p, key->u.s.n);
        if (key->u.s.n >= 2 && name[0] == '_' && name[1] == '_') {
            *out = jj_undef(NULL);
            return SNUG_OK;
        }
        return jj_getattr(rs, at, obj, name, out);
    }
    *out = jj_undef(NULL);
    return SNUG_OK;
}

/* ---- operators ----------------------------------------------------------------- */

static int64_t as_int(const jj_value *v) { return v->kind == JJ_BOOL ? v->u.b : v->u.i; }
static double as_float(const jj_value *v)
{
    return v->kind == JJ_FLOAT ? v->u.f : (double)as_int(v);
}
static bool is_intlike(const jj_value *v) { return v->kind == JJ_INT || v->kind == JJ_BOOL; }

static snug_status type_error(jj_rs *rs, const jj_node *at, const char *op, const jj_value *a,
                              const jj_value *b)
{
    if (a->kind == JJ_UNDEF) return jj_undefined_error(rs, at, a);
    if (b->kind == JJ_UNDEF) return jj_undefined_error(rs, at, b);
    return jj_fail(rs, at, SNUG_INVALID, "unsupported operand type(s) for %s: '%s' and '%s'", op,
                   jj_type_name(a), jj_type_name(b));
}

static snug_status overflow(jj_rs *rs, const jj_node *at)
{
    return jj_fail(rs, at, SNUG_UNSUPPORTED,
                   "integer overflow (integers beyond 64 bits are not supported)");
}

/* Python's float // and %. */
static void float_divmod(double vx, double wx, double *floordiv, double *mod)
{
    double m = fmod(vx, wx);
    double div = (vx - m) / wx;
    if (m != 0) {
        if ((wx < 0) != (m < 0)) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = copysign(0.0, wx);
    }
    double fd;
    if (div != 0) {
        fd = floor(div);
        if (div - fd > 0.5) fd += 1.0;
    } else {
        fd = copysign(0.0, vx / wx);
    }
    *floordiv = fd;
    *mod = m;
}

/* seq * n for str and lists. */
static snug_status repeat(jj_rs *rs, const jj_node *at, const jj_value *seq, int64_t times,
                          jj_value *out)
{
    if (times < 0) times = 0;
    size_t unit = seq->kind == JJ_STR ? seq->u.s.n : seq->u.list->n, total = 0;
    if (!snug_mul_size(unit, (size_t)times, &total) ||
        total > rs->lim.output_bytes_max + (size_t)0)
        return jj_fail_limit(rs, at, "a repetition of %" PRId64 " is too large", times);
    snug_status st = jj_steps(rs, at, (int64_t)total / 16 + 1);
    if (st != SNUG_OK) return st;
    if (seq->kind == JJ_STR) {
        char *p = jj_alloc(rs, at, total + 1);
        if (!p) return rs->err.status;
        for (int64_t k = 0; k < times; k++) memcpy(p + (size_t)k * unit, seq->u.s.p, unit);
        *out = jj_str(p, total, true);
        return SNUG_OK;
    }
    jj_list *l = jj_list_new(rs, at, total, (jj_list_flavor)seq->flavor, out);
    if (!l) return rs->err.status;
    for (size_t k = 0; k < total; k++) l->v[k] = seq->u.list->v[k % unit];
    return SNUG_OK;
}

static bool is_seq(const jj_value *v)
{
    return v->kind == JJ_LIST && (v->flavor == JJ_LIST_PLAIN || v->flavor == JJ_LIST_TUPLE);
}

snug_status jj_binary(jj_rs *rs, const jj_node *at, jj_op op, const jj_value *a,
                      const jj_value *b, jj_value *out)
{
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    const char *name = op <= JJ_OP_POW ? names[op] : "?";
    bool nums = jj_is_number(a) && jj_is_number(b);
    bool ints = is_intlike(a) && is_intlike(b);
    switch (op) {
    case JJ_OP_ADD:
        if (ints) {
            int64_t r;
            if (__builtin_add_overflow(as_int(a), as_int(b), &r)) return overflow(rs, at);
            *out = jj_int(r);
            return SNUG_OK;
        }
        if (nums) {
            *out = jj_float(as_float(a) + as_float(b));
            return SNUG_OK;
        }
        if (a->kind == JJ_STR && b->kind == JJ_STR) {
            size_t n = a->u.s.n + b->u.s.n;
            if (n > rs->lim.output_bytes_max)
                return jj_fail_limit(rs, at, "a string of %zu bytes is too large", n);
            char *p = jj_alloc(rs, at, n + 1);
            if (!p) return rs->err.status;
            memcpy(p, a->u.s.p, a->u.s.n);
            memcpy(p + a->u.s.n, b->u.s.p, b->u.s.n);
            *out = jj_str(p, n, true);
            return jj_steps(rs, at, (int64_t)(n / 64));
        }
        if (is_seq(a) && is_seq(b) && a->flavor == b->flavor) {
            size_t na = a->u.list->n, nb = b->u.list->n;
            jj_list *l = jj_list_new(rs, at, na + nb, (jj_list_flavor)a->flavor, out);
            if (!l) return rs->err.status;
            memcpy(l->v, a->u.list->v, na * sizeof(jj_value));
            memcpy(l->v + na, b->u.list->v, nb * sizeof(jj_value));
            return jj_steps(rs, at, (int64_t)(na + nb));
        }
        return type_error(rs, at, name, a, b);
    case JJ_OP_SUB:
        if (ints) {
            int64_t r;
            if (__builtin_sub_overflow(as_int(a), as_int(b), &r)) return overflow(rs, at);
            *out = jj_int(r);
            return SNUG_OK;
        }
        if (nums) {
            *out = jj_float(as_float(a) - as_float(b));
            return SNUG_OK;
        }
        return type_error(rs, at, name, a, b);
    case JJ_OP_MUL:
        if (ints) {
            int64_t r;
            if (__builtin_mul_overflow(as_int(a), as_int(b), &r)) return overflow(rs, at);
            *out = jj_int(r);
            return SNUG_OK;
        }
        if (nums) {
            *out = jj_float(as_float(a) * as_float(b));
            return SNUG_OK;
        }
        if ((a->kind == JJ_STR || is_seq(a)) && is_intlike(b)) return repeat(rs, at, a, as_int(b), out);
        if ((b->kind == JJ_STR || is_seq(b)) && is_intlike(a)) return repeat(rs, at, b, as_int(a), out);
        return type_error(rs, at, name, a, b);
    case JJ_OP_DIV:
        if (!nums) return type_error(rs, at, name, a, b);
        if (as_float(b) == 0) return jj_fail(rs, at, SNUG_INVALID, "division by zero");
        *out = jj_float(as_float(a) / as_float(b));
        return SNUG_OK;
    case JJ_OP_FLOORDIV:
    case JJ_OP_MOD:
        if (a->kind == JJ_STR && op == JJ_OP_MOD)
            return jj_fail(rs, at, SNUG_UNSUPPORTED, "printf-style string formatting is not supported");
        if (!nums) return type_error(rs, at, name, a, b);
        if (ints) {
            int64_t x = as_int(a), y = as_int(b);
            if (y == 0) return jj_fail(rs, at, SNUG_INVALID, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) {
                if (op == JJ_OP_MOD) return *out = jj_int(0), SNUG_OK;
                return overflow(rs, at);
            }
            int64_t q = x / y, r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) {
                q -= 1;
                r += y;
            }
            *out = jj_int(op == JJ_OP_MOD ? r : q);
            return SNUG_OK;
        }
        if (as_float(b) == 0) return jj_fail(rs, at, SNUG_INVALID, "float division or modulo by zero");
        double fd, m;
        float_divmod(as_float(a), as_float(b), &fd, &m);
        *out = jj_float(op == JJ_OP_MOD ? m : fd);
        return SNUG_OK;
    case JJ_OP_POW:
        if (!nums) return type_error(rs, at, name, a, b);
        if (ints && as_int(b) >= 0) {
            int64_t base = as_int(a), e = as_int(b), r = 1;
            while (e > 0) {
                if (e & 1 && __builtin_mul_overflow(r, base, &r)) return overflow(rs, at);
                e >>= 1;
                if (e > 0 && __builtin_mul_overflow(base, base, &base)) {
                    /* base grows past 64 bits; only fine when it no longer matters */
                    return overflow(rs, at);
                }
            }
            *out = jj_int(r);
            return SNUG_OK;
        } else {
            double x = as_float(a), y = as_float(b);
            if (x == 0 && y < 0)
                return jj_fail(rs, at, SNUG_INVALID, "0.0 cannot be raised to a negative power");
            if (x < 0 && y != floor(y) && isfinite(y))
                return jj_fail(rs, at, SNUG_UNSUPPORTED, "complex numbers are not supported");
            double r = pow(x, y);
            if (isinf(r) && isfinite(x) && isfinite(y))
                return jj_fail(rs, at, SNUG_INVALID, "numerical result out of range");
            *out = jj_float(r);
            return SNUG_OK;
        }
    default: break;
    }
    return jj_fail(rs, at, SNUG_INTERNAL, "unknown operator");
}

/* One comparison of a chain. */
static snug_status compare(jj_rs *rs, const jj_node *at, jj_op op, const jj_value *a,
                           const jj_value *b, bool *out)
{
    snug_status st = SNUG_OK;
    switch (op) {
    case JJ_OP_EQ: return jj_equal(rs, at, a, b, out);
    case JJ_OP_NE:
        st = jj_equal(rs, at, a, b, out);
        *out = !*out;
        return st;
    case JJ_OP_IN: return jj_contains(rs, at, b, a, out);
    case JJ_OP_NOTIN:
        st = jj_contains(rs, at, b, a, out);
        *out = !*out;
        return st;
    default: {
        int c = 0;
        st = jj_compare(rs, at, a, b, &c);
        if (st != SNUG_OK) return st;
        *out = op == JJ_OP_LT   ? c == -1
               : op == JJ_OP_LE ? (c == -1 || c == 0)
               : op == JJ_OP_GT ? c == 1
                                : (c == 1 || c == 0);
        return SNUG_OK;
    }
    }
}

/* ---- expressions ------------------------------------------------------------------ */

static snug_status lookup_name(jj_rs *rs, const jj_node *n, jj_value *out)
{
    size_t len = strlen(n->name);
    for (const jj_scope *s = rs->scope; s; s = s->parent) {
        const jj_slot *slot = jj_slots_find(&s->vars, n->name, len);
        if (slot) { /* see jj_slot_read: a scope's slot outlives every reader */
            *out = slot->v;
            return SNUG_OK;
        }
    }
    if (rs->vars.kind == JJ_DICT) {
        const jj_dict *d = rs->vars.u.dict;
        for (size_t i = 0; i < d->n; i++) {
            const jj_value *k = &d->kv[2 * i];
            if (k->u.s.n == len && memcmp(k->u.s.p, n->name, len) == 0) {
                *out = d->kv[2 * i + 1];
                return SNUG_OK;
            }
        }
    }
    static const struct {
        const char *name;
        jj_fn fn;
    } globals[] = {{"range", JJ_FN_RANGE}, {"dict", JJ_FN_DICT}, {"namespace", JJ_FN_NAMESPACE},
                   {"raise_exception", JJ_FN_RAISE}, {"lipsum", JJ_FN_OTHER},
                   {"cycler", JJ_FN_OTHER}, {"joiner", JJ_FN_OTHER}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(globals); i++) {
        if (strcmp(globals[i].name, n->name) == 0) {
            *out = (jj_value){.kind = JJ_FUNC, .flavor = (uint16_t)globals[i].fn};
            return SNUG_OK;
        }
    }
    *out = jj_undef(n->name);
    return SNUG_OK;
}

/* Evaluates the arguments of a call, filter or test node. */
static snug_status eval_args(jj_rs *rs, const jj_node *n, jj_args *args)
{
    memset(args, 0, sizeof *args);
    size_t count = (size_t)n->n_items + n->n_items2;
    if (count == 0) return SNUG_OK;
    jj_value *vals = jj_alloc(rs, n, count * sizeof *vals);
    if (!vals) return rs->err.status;
    for (uint32_t i = 0; i < n->n_items; i++) {
        snug_status st = eval(rs, n->items[i], &vals[i]);
        if (st != SNUG_OK) return st;
    }
    for (uint32_t i = 0; i < n->n_items2; i++) {
        snug_status st = eval(rs, n->items2[i], &vals[n->n_items + i]);
        if (st != SNUG_OK) return st;
    }
    args->pos = vals;
    args->n_pos = n->n_items;
    args->kw = vals + n->n_items;
    args->kw_names = n->names;
    args->n_kw = n->n_items2;
    return SNUG_OK;
}

snug_status jj_call(jj_rs *rs, const jj_node *at, const jj_value *fn, const jj_args *args,
                    jj_value *out)
{
    switch ((jj_kind)fn->kind) {
    case JJ_MACRO: return jj_call_macro(rs, at, fn->u.macro, args, out);
    case JJ_FUNC: return jj_call_builtin(rs, at, (jj_fn)fn->flavor, fn->u.self, args, out);
    case JJ_UNDEF: return jj_undefined_error(rs, at, fn);
    default:
        return jj_fail(rs, at, SNUG_INVALID, "'%s' object is not callable", jj_type_name(fn));
    }
}

static snug_status eval_filter(jj_rs *rs, const jj_node *n, const jj_value *block_input,
                               jj_value *out)
{
    jj_value input;
    snug_status st = SNUG_OK;
    if (!n->a)
        input = *block_input;
    else if (block_input && n->a->type == N_FILTER)
        st = eval_filter(rs, n->a, block_input, &input);
    else
        st = eval(rs, n->a, &input);
    if (st != SNUG_OK) return st;
    jj_args args;
    if ((st = eval_args(rs, n, &args)) != SNUG_OK) return st;
    return jj_apply_filter(rs, n, n->op, &input, &args, out);
}

static snug_status eval_unary(jj_rs *rs, const jj_node *n, jj_value *out)
{
    jj_value v;
    snug_status st = eval(rs, n->a, &v);
    if (st != SNUG_OK) return st;
    if (n->type == N_NOT) {
        *out = jj_bool(!jj_truthy(&v));
        return SNUG_OK;
    }
    if (v.kind == JJ_UNDEF) return jj_undefined_error(rs, n, &v);
    if (!jj_is_number(&v))
        return jj_fail(rs, n, SNUG_INVALID, "bad operand type for unary %c: '%s'",
                       n->type == N_NEG ? '-' : '+', jj_type_name(&v));
    if (v.kind == JJ_FLOAT) {
        *out = jj_float(n->type == N_NEG ? -v.u.f : v.u.f);
        return SNUG_OK;
    }
    int64_t i = as_int(&v);
    if (n->type == N_NEG && i == INT64_MIN) return overflow(rs, n);
    *out = jj_int(n->type == N_NEG ? -i : i);
    return SNUG_OK;
}

static snug_status eval_concat(jj_rs *rs, const jj_node *n, jj_value *out)
{
    jj_value *parts = jj_alloc(rs, n, n->n_items * sizeof *parts);
    if (!parts) return rs->err.status;
    size_t total = 0;
    for (uint32_t i = 0; i < n->n_items; i++) {
        jj_value v;
        snug_status st = eval(rs, n->items[i], &v);
        if (st == SNUG_OK) st = jj_to_str(rs, n, &v, &parts[i]);
        if (st != SNUG_OK) return st;
        total += parts[i].u.s.n;
        if (total > rs->lim.output_bytes_max)
            return jj_fail_limit(rs, n, "a string of %zu bytes is too large", total);
    }
    char *p = jj_alloc(rs, n, total + 1);
    if (!p) return rs->err.status;
    size_t off = 0;
    for (uint32_t i = 0; i < n->n_items; i++) {
        memcpy(p + off, parts[i].u.s.p, parts[i].u.s.n);
        off += parts[i].u.s.n;
    }
    *out = jj_str(p, total, true);
    return jj_steps(rs, n, (int64_t)(total / 64));
}

static snug_status eval_compare(jj_rs *rs, const jj_node *n, jj_value *out)
{
    jj_value left, right;
    snug_status st = eval(rs, n->a, &left);
    if (st != SNUG_OK) return st;
    bool ok = true;
    for (uint32_t i = 0; i < n->n_items && ok; i++) {
        if ((st = eval(rs, n->items[i], &right)) != SNUG_OK) return st;
        if ((st = compare(rs, n, (jj_op)n->ops[i], &left, &right, &ok)) != SNUG_OK) return st;
        left = right;
    }
    *out = jj_bool(ok);
    return SNUG_OK;
}

static snug_status eval_collection(jj_rs *rs, const jj_node *n, jj_value *out)
{
    snug_status st;
    if (n->type == N_DICT) {
        jj_dict *d = jj_dict_new(rs, n, n->n_items, out);
        if (!d) return rs->err.status;
        for (uint32_t i = 0; i < n->n_items; i++) {
            jj_value k, v;
            if ((st = eval(rs, n->items[i], &k)) != SNUG_OK) return st;
            if ((st = eval(rs, n->items2[i], &v)) != SNUG_OK) return st;
            long at = -1;
            if ((st = jj_dict_find(rs, n, d, &k, &at)) != SNUG_OK) return st;
            if (at >= 0) {
                d->kv[2 * at + 1] = v;
            } else {
                d->kv[2 * d->n] = k;
                d->kv[2 * d->n + 1] = v;
                d->n++;
            }
        }
        return SNUG_OK;
    }
    jj_list *l = jj_list_new(rs, n, n->n_items, n->type == N_TUPLE ? JJ_LIST_TUPLE : JJ_LIST_PLAIN,
                             out);
    if (!l) return rs->err.status;
    for (uint32_t i = 0; i < n->n_items; i++)
        if ((st = eval(rs, n->items[i], &l->v[i])) != SNUG_OK) return st;
    return SNUG_OK;
}

static snug_status eval_node(jj_rs *rs, const jj_node *n, jj_value *out)
{
    snug_status st;
    jj_value a, b;
    switch ((jj_node_type)n->type) {
    case N_CONST: *out = n->value; return SNUG_OK;
    case N_NAME: return lookup_name(rs, n, out);
    case N_ATTR:
        if ((st = eval(rs, n->a, &a)) != SNUG_OK) return st;
        return jj_getattr(rs, n, &a, n->name, out);
    case N_ITEM:
        if ((st = eval(rs, n->a, &a)) != SNUG_OK) return st;
        if ((st = eval(rs, n->b, &b)) != SNUG_OK) return st;
        return jj_getitem(rs, n, &a, &b, out);
    case N_SLICE: {
        jj_value parts[3];
        const jj_node *nodes[3] = {n->b, n->c, n->d};
        if ((st = eval(rs, n->a, &a)) != SNUG_OK) return st;
        for (int k = 0; k < 3; k++)
            if (nodes[k] && (st = eval(rs, nodes[k], &parts[k])) != SNUG_OK) return st;
        return do_slice(rs, n, &a, n->b ? &parts[0] : NULL, n->c ? &parts[1] : NULL,
                        n->d ? &parts[2] : NULL, out);
    }
    case N_CALL: {
        jj_args args;
        if ((st = eval(rs, n->a, &a)) != SNUG_OK) return st;
        if ((st = eval_args(rs, n, &args)) != SNUG_OK) return st;
        return jj_call(rs, n, &a, &args, out);
    }
    case N_FILTER: return eval_filter(rs, n, NULL, out);
    case N_TEST: {
        jj_args args;
        bool r = false;
        if ((st = eval(rs, n->a, &a)) != SNUG_OK) return st;
        if ((st = eval_args(rs, n, &args)) != SNUG_OK) return st;
        if ((st = jj_apply_test(rs, n, n->op, &a, &args, &r)) != SNUG_OK) return st;
        *out = jj_bool(r);
        return SNUG_OK;
    }
    case N_NOT:
    case N_NEG:
    case N_POS: return eval_unary(rs, n, out);
    case N_BIN:
        if ((st = eval(rs, n->a, &a)) != SNUG_OK) return st;
        if ((st = eval(rs, n->b, &b)) != SNUG_OK) return st;
        return jj_binary(rs, n, (jj_op)n->op, &a, &b, out);
    case N_AND:
    case N_OR:
        if ((st = eval(rs, n->a, &a)) != SNUG_OK) return st;
        if (jj_truthy(&a) == (n->type == N_OR)) {
            *out = a;
            return SNUG_OK;
        }
        return eval(rs, n->b, out);
    case N_CONCAT: return eval_concat(rs, n, out);
    case N_COMPARE: return eval_compare(rs, n, out);
    case N_COND:
        if ((st = eval(rs, n->a, &a)) != SNUG_OK) return st;
        if (jj_truthy(&a)) return eval(rs, n->b, out);
        if (n->c) return eval(rs, n->c, out);
        *out = jj_undef("the conditional expression had no else");
        return SNUG_OK;
    case N_LIST:
    case N_TUPLE:
    case N_DICT: return eval_collection(rs, n, out);
    default: return jj_fail(rs, n, SNUG_INTERNAL, "not an expression");
    }
}

/* Every evaluation counts a step and a level of depth. */
static snug_status eval(jj_rs *rs, const jj_node *n, jj_value *out)
{
    if (++rs->depth > rs->lim.depth_max) {
        rs->depth--;
        return jj_fail_limit(rs, n, "evaluation nests deeper than the limit of %d",
                             (int)rs->lim.depth_max);
    }
    snug_status st = jj_steps(rs, n, 1);
    if (st == SNUG_OK) st = eval_node(rs, n, out);
    rs->depth--;
    return st;
}

/* ---- statements ---------------------------------------------------------------- */

/* Unpacks v into k values (for tuple targets). */
static snug_status unpack(jj_rs *rs, const jj_node *at, const jj_value *v, uint32_t k,
                          const jj_value **items)
{
    if (v->kind == JJ_UNDEF) return jj_undefined_error(rs, at, v);
    const jj_list *l = NULL;
    snug_status st = jj_iterate(rs, at, v, &l);
    if (st != SNUG_OK) return st;
    if (l->n != k)
        return jj_fail(rs, at, SNUG_INVALID, "%s values to unpack (expected %u, got %zu)",
                       l->n > k ? "too many" : "not enough", k, l->n);
    *items = l->v;
    return SNUG_OK;
}

/* Assigns v to the targets of a set or for node in slots: a name, or a
 * tuple of names (unpacked). Kept copies (set) or bindings (for). */
static snug_status assign(jj_rs *rs, const jj_node *n, jj_slots *slots, const jj_value *v,
                          bool bind)
{
    if (!(n->flags & JJ_TARGET_TUPLE)) {
        if (bind) return jj_slots_bind(rs, slots, n->names[0], v);
        return jj_slots_set(rs, n, slots, n->names[0], strlen(n->names[0]), true, v, true);
    }
    const jj_value *items = NULL;
    snug_status st = unpack(rs, n, v, n->n_names, &items);
    for (uint32_t i = 0; i < n->n_names && st == SNUG_OK; i++) {
        if (bind)
            st = jj_slots_bind(rs, slots, n->names[i], &items[i]);
        else
            st = jj_slots_set(rs, n, slots, n->names[i], strlen(n->names[i]), true, &items[i], true);
    }
    return st;
}

static snug_status assign_ns(jj_rs *rs, const jj_node *n, const jj_value *v)
{
    jj_node name_node = *n;
    name_node.type = N_NAME;
    jj_value ns;
    snug_status st = lookup_name(rs, &name_node, &ns);
    if (st != SNUG_OK) return st;
    if (ns.kind != JJ_NS)
        return jj_fail(rs, n, SNUG_INVALID, "cannot assign attribute on non-namespace object");
    return jj_slots_set(rs, n, &ns.u.ns->attrs, n->name2, strlen(n->name2), true, v, false);
}

static snug_status write_out(jj_rs *rs, const jj_node *at, const jj_value *v)
{
    snug_status st = jj_write_str(rs, at, &rs->out, v);
    if (st == SNUG_OK) st = rs->out.st;
    return st;
}

/* Runs items with their output captured into a str value (arena). */
static snug_status capture(jj_rs *rs, jj_node *const *items, uint32_t n, int *ctl,
                           jj_value *out)
{
    size_t start = rs->out.n;
    snug_status st = exec_body(rs, items, n, ctl);
    if (st == SNUG_OK && *ctl == CTL_NONE) {
        size_t len = rs->out.n - start;
        char *p = jj_alloc(rs, NULL, len + 1);
        if (!p)
            st = rs->err.status;
        else if (len)
            memcpy(p, rs->out.p + start, len);
        *out = jj_str(p, len, true);
    }
    rs->out.n = start;
    return st;
}

/* Notes, for snug_template_failure, that an error ended the iteration
 * whose item was v, when v is one of the input's lists or dicts (a copy
 * keeps its origin). */
static void note_fail_item(jj_rs *rs, const jj_value *v)
{
    uint64_t origin = v->kind == JJ_LIST ? v->u.list->origin
                    : v->kind == JJ_DICT ? v->u.dict->origin : 0;
    if (origin == 0 || origin > rs->n_input_objects) return;
    if (rs->n_fail_items < SNUG_TEMPLATE_FAILURE_ITEMS) rs->fail_items[rs->n_fail_items++] = origin;
}

static snug_status exec_for(jj_rs *rs, const jj_node *n, int *outer_ctl)
{
    jj_mark m0 = jj_arena_mark(&rs->arena);
    jj_scope *outer = rs->scope;
    jj_scope scope = {.parent = outer};
    jj_value seq;
    const jj_list *items = NULL;
    snug_status st = eval(rs, n->a, &seq);
    if (st == SNUG_OK) st = jj_iterate(rs, n->a, &seq, &items);
    if (st != SNUG_OK) goto done;
    if (n->b) { /* the loop's own filter, evaluated before the loop */
        jj_value lv;
        jj_list *kept = jj_list_new(rs, n, items->n, JJ_LIST_PLAIN, &lv);
        if (!kept) {
            st = rs->err.status;
            goto done;
        }
        kept->n = 0;
        rs->scope = &scope;
        for (size_t i = 0; i < items->n && st == SNUG_OK; i++) {
            jj_value cond;
            st = assign(rs, n, &scope.vars, &items->v[i], true);
            if (st == SNUG_OK) st = eval(rs, n->b, &cond);
            if (st == SNUG_OK && jj_truthy(&cond)) kept->v[kept->n++] = items->v[i];
            jj_slots_clear(rs, &scope.vars);
        }
        rs->scope = outer;
        if (st != SNUG_OK) goto done;
        items = kept;
    }
    /* Jinja runs the else block unless some iteration reached the end of
     * the body (an iteration ended by break or continue does not count) */
    bool completed = false;
    jj_loop loop = {.items = items};
    jj_value loop_value = {.kind = JJ_LOOP, .transient = 1};
    loop_value.u.loop = &loop;
    for (size_t i = 0; i < items->n; i++) {
        if (++rs->iterations > rs->lim.iterations_max) {
            st = jj_fail_limit(rs, n, "loops run more than the limit of %" PRId64 " iterations",
                               rs->lim.iterations_max);
            break;
        }
        jj_mark mi = jj_arena_mark(&rs->arena);
        int ctl = CTL_NONE;
        loop.index0 = i;
        st = jj_slots_bind(rs, &scope.vars, "loop", &loop_value);
        if (st == SNUG_OK) st = assign(rs, n, &scope.vars, &items->v[i], true);
        rs->scope = &scope;
        if (st == SNUG_OK) st = exec_body(rs, n->items, n->n_items, &ctl);
        if (ctl == CTL_NONE) completed = true;
        if (st != SNUG_OK) note_fail_item(rs, &items->v[i]);
        rs->scope = outer;
        jj_slots_clear(rs, &scope.vars);
        jj_arena_release(&rs->arena, mi);
        if (st != SNUG_OK || ctl == CTL_BREAK) break;
    }
    if (st == SNUG_OK && !completed && n->n_items2) {
        int ctl = CTL_NONE;
        scope.vars.n = 0;
        rs->scope = &scope;
        st = exec_body(rs, n->items2, n->n_items2, &ctl);
        rs->scope = outer;
        if (ctl != CTL_NONE) *outer_ctl = ctl; /* cannot happen: the parser refuses it */
    }
done:
    rs->scope = outer;
    jj_slots_free(rs, &scope.vars);
    jj_arena_release(&rs->arena, m0);
    return st;
}

static snug_status exec_stmt(jj_rs *rs, const jj_node *n, int *ctl)
{
    jj_mark m = jj_arena_mark(&rs->arena);
    snug_status st = SNUG_OK;
    jj_value v;
    switch ((jj_node_type)n->type) {
    case S_TEXT:
        jj_w_put(&rs->out, n->text, n->text_len);
        st = rs->out.st;
        break;
    case S_PRINT:
        st = eval(rs, n->a, &v);
        if (st == SNUG_OK) st = write_out(rs, n, &v);
        break;
    case S_IF: {
        st = eval(rs, n->a, &v);
        if (st != SNUG_OK) break;
        bool yes = jj_truthy(&v);
        jj_arena_release(&rs->arena, m);
        st = yes ? exec_body(rs, n->items, n->n_items, ctl)
                 : exec_body(rs, n->items2, n->n_items2, ctl);
        break;
    }
    case S_FOR: st = exec_for(rs, n, ctl); break;
    case S_SET:
        st = eval(rs, n->a, &v);
        if (st != SNUG_OK) break;
        st = (n->flags & JJ_SET_NS) ? assign_ns(rs, n, &v) : assign(rs, n, &rs->scope->vars, &v, false);
        break;
    case S_SET_BLOCK: {
        st = capture(rs, n->items, n->n_items, ctl, &v);
        if (st != SNUG_OK || *ctl != CTL_NONE) break;
        if (n->b) {
            jj_value filtered;
            if ((st = eval_filter(rs, n->b, &v, &filtered)) != SNUG_OK) break;
            v = filtered;
        }
        st = (n->flags & JJ_SET_NS) ? assign_ns(rs, n, &v) : assign(rs, n, &rs->scope->vars, &v, false);
        break;
    }
    case S_MACRO:
        v = (jj_value){.kind = JJ_MACRO};
        v.u.macro = n;
        st = jj_slots_set(rs, n, &rs->scope->vars, n->name, strlen(n->name), true, &v, true);
        break;
    case S_SCOPE: {
        jj_scope scope = {.parent = rs->scope};
        jj_scope *outer = rs->scope;
        rs->scope = &scope;
        st = exec_body(rs, n->items, n->n_items, ctl);
        rs->scope = outer;
        jj_slots_free(rs, &scope.vars);
        break;
    }
    case S_BREAK: *ctl = CTL_BREAK; break;
    case S_CONTINUE: *ctl = CTL_CONTINUE; break;
    default: st = jj_fail(rs, n, SNUG_INTERNAL, "not a statement"); break;
    }
    jj_arena_release(&rs->arena, m);
    return st;
}

static snug_status exec_body(jj_rs *rs, jj_node *const *items, uint32_t n, int *ctl)
{
    if (++rs->depth > rs->lim.depth_max) {
        rs->depth--;
        return jj_fail_limit(rs, n ? items[0] : NULL, "evaluation nests deeper than the limit of %d",
                             (int)rs->lim.depth_max);
    }
    snug_status st = SNUG_OK;
    for (uint32_t i = 0; i < n && st == SNUG_OK && *ctl == CTL_NONE; i++) {
        st = jj_steps(rs, items[i], 1);
        if (st == SNUG_OK) st = exec_stmt(rs, items[i], ctl);
    }
    rs->depth--;
    return st;
}

snug_status jj_call_macro(jj_rs *rs, const jj_node *at, const jj_node *macro,
                          const jj_args *args, jj_value *out)
{
    if (args->n_pos > macro->n_names)
        return jj_fail(rs, at, SNUG_INVALID, "macro '%s' takes not more than %u argument(s)",
                       macro->name, macro->n_names);
    jj_scope scope = {.parent = rs->root};
    jj_scope *outer = rs->scope;
    snug_status st = SNUG_OK;
    uint32_t n_params = macro->n_names;
    bool *given = jj_alloc(rs, at, n_params + 1);
    if (!given) return rs->err.status;
    for (size_t i = 0; i < args->n_pos && st == SNUG_OK; i++) {
        st = jj_slots_bind(rs, &scope.vars, macro->names[i], &args->pos[i]);
        given[i] = true;
    }
    for (size_t k = 0; k < args->n_kw && st == SNUG_OK; k++) {
        uint32_t i = 0;
        while (i < n_params && strcmp(macro->names[i], args->kw_names[k]) != 0) i++;
        if (i == n_params)
            st = jj_fail(rs, at, SNUG_INVALID, "macro '%s' takes no keyword argument '%s'",
                         macro->name, args->kw_names[k]);
        else if (given[i])
            st = jj_fail(rs, at, SNUG_INVALID, "macro '%s' got multiple values for argument '%s'",
                         macro->name, args->kw_names[k]);
        else {
            st = jj_slots_bind(rs, &scope.vars, macro->names[i], &args->kw[k]);
            given[i] = true;
        }
    }
    rs->scope = &scope;
    for (uint32_t i = 0; i < n_params && st == SNUG_OK; i++) {
        if (given[i]) continue;
        jj_value v = jj_undef(macro->names[i]);
        if (macro->items2[i]) st = eval(rs, macro->items2[i], &v);
        if (st == SNUG_OK) st = jj_slots_bind(rs, &scope.vars, macro->names[i], &v);
    }
    int ctl = CTL_NONE;
    if (st == SNUG_OK) st = capture(rs, macro->items, macro->n_items, &ctl, out);
    rs->scope = outer;
    jj_slots_free(rs, &scope.vars);
    return st;
}

/* The array or object under the input j whose origin number is origin
 * (jj_from_json numbers the input's lists and dicts 1, 2, ... in pre-order;
 * *seen counts those passed), or NULL. */
static const json_t *input_container(const json_t *j, uint64_t origin, uint64_t *seen)
{
    if (!json_is_array(j) && !json_is_object(j)) return NULL;
    if (++*seen == origin) return j;
    const json_t *found = NULL;
    for (size_t i = 0; !found && *seen < origin && i < json_array_size(j); i++)
        found = input_container(json_array_get(j, i), origin, seen);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        if (found || *seen >= origin) break;
        found = input_container(v, origin, seen);
    }
    (void)key;
    return found;
}

/* Describes the failed render rs of vars into *f. */
static void describe_failure(const jj_rs *rs, const json_t *vars, snug_template_failure *f)
{
    *f = (snug_template_failure){.kind = rs->fail_kind, .text_at = rs->fail_text_at};
    if (f->kind == SNUG_TEMPLATE_FAIL_NONE) f->kind = SNUG_TEMPLATE_FAIL_ERROR;
    for (int i = 0; i < rs->n_fail_items; i++) {
        uint64_t seen = 0;
        const json_t *item = input_container(vars, rs->fail_items[i], &seen);
        if (item) f->items[f->n_items++] = item;
    }
}

snug_status jj_render(const snug_template *t, const json_t *vars,
                      const snug_template_limits *lim, snug_template_failure *failure,
                      char **out, size_t *len, snug_error *err)
{
    jj_rs rs = {.t = t, .lim = *lim};
    jj_scope root = {0};
    rs.root = rs.scope = &root;
    rs.arena.budget = &rs.mem_used;
    rs.arena.budget_max = lim->memory_bytes_max;
    rs.out = (jj_writer){.grow = true, .max = lim->output_bytes_max, .rs = &rs};
    snug_status st = SNUG_OK;
    if (vars) {
        if (!json_is_object(vars))
            st = jj_fail(&rs, NULL, SNUG_INVALID, "the variables must be a JSON object");
        else
            st = jj_from_json(&rs, vars, &rs.vars);
        rs.n_input_objects = rs.n_objects;
    }
    int ctl = CTL_NONE;
    if (st == SNUG_OK) st = exec_body(&rs, t->body, t->n_body, &ctl);
    if (st == SNUG_OK) {
        char *text = snug_mem_alloc(SNUG_MEM_OTHER, rs.out.n + 1, NULL);
        if (!text) {
            st = jj_fail(&rs, NULL, SNUG_NOMEM, "no memory for the %zu bytes rendered", rs.out.n);
        } else {
            if (rs.out.n) memcpy(text, rs.out.p, rs.out.n);
            *out = text;
            *len = rs.out.n;
        }
    }
    jj_slots_free(&rs, &root.vars);
    while (rs.namespaces) {
        jj_ns *ns = rs.namespaces;
        rs.namespaces = ns->next;
        jj_slots_free(&rs, &ns->attrs);
        jj_rs_free(&rs, ns);
    }
    while (rs.gens) {
        jj_gen *g = rs.gens;
        rs.gens = g->next;
        jj_rs_free(&rs, g->block);
        jj_rs_free(&rs, g->fail_msg);
        jj_rs_free(&rs, g);
    }
    jj_rs_free(&rs, rs.out.p);
    jj_arena_free(&rs.arena);
    if (st != SNUG_OK && rs.err.status == SNUG_OK) { /* a status without a message */
        snug_errorf(&rs.err, st, "%s: rendering failed", t->name);
        rs.fail_text_at = SNUG_MIN(strlen(t->name) + 2, strlen(rs.err.msg));
    }
    if (st != SNUG_OK && err) *err = rs.err;
    if (failure) {
        *failure = (snug_template_failure){0};
        if (st != SNUG_OK) describe_failure(&rs, vars, failure);
    }
    return st;
}
