/*
 * matcher.c: the stack-set matcher of matcher.h. The next set is built in
 * the second half of the caller's memory: the stacks that take the byte
 * are copied there with their tops moved on, then each is expanded in
 * place (a reference's first alternative continues the stack, the others
 * are copies appended to the set, expanded in their turn), and a stack
 * equal to one before it is dropped. Then the halves swap.
 */
#include "matcher.h"

#include <string.h>

size_t snug_gmatch_bytes(int32_t max_stacks, int32_t max_depth)
{
    return 2 * (size_t)max_stacks * ((size_t)max_depth + 1) * sizeof(int32_t);
}

static int32_t *frames_of(int32_t *frames, const snug_gmatch *m, int32_t i)
{
    return frames + (size_t)i * (size_t)m->max_depth;
}

/* Appends to the next set a copy of frames f[0..d) with, when top >= 0, top
 * pushed; false past the limits. */
static bool append(snug_gmatch *m, int32_t *n, const int32_t *f, int32_t d, int32_t top)
{
    if (*n >= m->max_stacks || d + (top >= 0) > m->max_depth) return false;
    int32_t *to = frames_of(m->frames2, m, *n);
    if (d) memcpy(to, f, (size_t)d * sizeof *f);
    if (top >= 0) to[d++] = top;
    m->len2[(*n)++] = d;
    return true;
}

/* Expands stack i of the next set until its top is a byte set or it is
 * empty; references' other alternatives go to the end of the set. false
 * past the limits. */
static bool expand(snug_gmatch *m, int32_t *n, int32_t i)
{
    const snug_grammar *g = m->g;
    int32_t *f = frames_of(m->frames2, m, i);
    int32_t d = m->len2[i];
    while (d > 0) {
        const snug_gelem *e = &g->elems[f[d - 1]];
        if (e->kind == SNUG_GE_SET) break;
        if (e->kind != SNUG_GE_REF) { /* END or ALT: the rule is done */
            d--;
            continue;
        }
        int32_t cont = f[d - 1] + 1, r = e->value;
        if (g->elems[cont].kind == SNUG_GE_REF || g->elems[cont].kind == SNUG_GE_SET) f[d - 1] = cont;
        else d--; /* nothing after the reference: not kept */
        for (int32_t a = g->alt_first[r] + 1; a < g->alt_first[r + 1]; a++)
            if (!append(m, n, f, d, g->alts[a])) return false;
        if (d >= m->max_depth) return false;
        f[d++] = g->alts[g->alt_first[r]];
        f = frames_of(m->frames2, m, i); /* (append writes elsewhere: f stays valid) */
    }
    m->len2[i] = d;
    return true;
}

/* Whether stack i of the next set equals one before it. Stacks that
 * differ mostly differ at the top (their bottoms are the rules around
 * both): the tops are compared first. */
static bool seen(const snug_gmatch *m, int32_t i)
{
    const int32_t *f = frames_of(m->frames2, m, i);
    int32_t d = m->len2[i];
    for (int32_t j = 0; j < i; j++) {
        const int32_t *g = frames_of(m->frames2, m, j);
        if (m->len2[j] != d || (d > 0 && g[d - 1] != f[d - 1])) continue;
        if (memcmp(g, f, (size_t)d * sizeof *f) == 0) return true;
    }
    return false;
}

/* Expands the next set's n stacks (and those they add), dedups them and
 * makes it the current set; false past the limits (the current set is
 * left as it was). */
static bool settle(snug_gmatch *m, int32_t n)
{
    for (int32_t i = 0; i < n;) {
        if (!expand(m, &n, i)) return false;
        if (seen(m, i)) { /* the last stack takes its place (expanded or not: it is looked at next) */
            n--;
            if (i < n) {
                memcpy(frames_of(m->frames2, m, i), frames_of(m->frames2, m, n), (size_t)m->len2[n] * sizeof(int32_t));
                m->len2[i] = m->len2[n];
            }
            continue;
        }
        i++;
    }
    int32_t *t = m->frames;
    m->frames = m->frames2, m->frames2 = t;
    t = m->len, m->len = m->len2, m->len2 = t;
    m->n = n;
    return true;
}

/* m over mem, empty. */
static void bind(snug_gmatch *m, void *mem, int32_t max_stacks, int32_t max_depth, const snug_grammar *g)
{
    SNUG_ASSERT(max_stacks >= 1 && max_depth >= 1);
    int32_t *w = mem;
    size_t per = (size_t)max_stacks * (size_t)max_depth;
    *m = (snug_gmatch){.g = g, .max_stacks = max_stacks, .max_depth = max_depth, .len = w,
                       .frames = w + max_stacks, .len2 = w + max_stacks + per, .frames2 = w + 2 * (size_t)max_stacks + per};
}

snug_status snug_gmatch_start(snug_gmatch *m, void *mem, int32_t max_stacks, int32_t max_depth,
                              const snug_grammar *g, snug_error *err)
{
    bind(m, mem, max_stacks, max_depth, g);
    int32_t n = 0;
    for (int32_t a = g->alt_first[g->root]; a < g->alt_first[g->root + 1]; a++)
        if (!append(m, &n, NULL, 0, g->alts[a])) goto over;
    if (!settle(m, n)) goto over;
    return SNUG_OK;
over:
    m->n = 0;
    return snug_errorf(err, SNUG_INVALID,
                       "grammar: its start needs more than %d alternatives at once or %d nested rules",
                       max_stacks, max_depth);
}

/* The stacks of src whose top takes b, moved past it, into dst's next set
 * (dst and src may be one matcher); then settled into dst. */
static snug_gmatch_result step(snug_gmatch *dst, const snug_gmatch *src, uint8_t b)
{
    int32_t n = 0;
    for (int32_t i = 0; i < src->n; i++) {
        int32_t d = src->len[i];
        const int32_t *f = frames_of(src->frames, src, i);
        if (d == 0 || !snug_byteset_has(&src->g->sets[src->g->elems[f[d - 1]].value], b)) continue;
        if (!append(dst, &n, f, d, -1)) return SNUG_GMATCH_OVERFLOW;
        frames_of(dst->frames2, dst, n - 1)[d - 1]++; /* past the byte */
    }
    if (n == 0) return SNUG_GMATCH_REJECT;
    return settle(dst, n) ? SNUG_GMATCH_OK : SNUG_GMATCH_OVERFLOW;
}

snug_gmatch_result snug_gmatch_advance(snug_gmatch *m, uint8_t b) { return step(m, m, b); }

snug_gmatch_result snug_gmatch_advance_from(snug_gmatch *dst, void *mem, const snug_gmatch *src, uint8_t b)
{
    bind(dst, mem, src->max_stacks, src->max_depth, src->g);
    return step(dst, src, b);
}

snug_gmatch_result snug_gmatch_advance_bytes(snug_gmatch *m, const void *bytes, size_t n, size_t *taken)
{
    const uint8_t *b = bytes;
    size_t i = 0;
    snug_gmatch_result r = SNUG_GMATCH_OK;
    for (; i < n && (r = snug_gmatch_advance(m, b[i])) == SNUG_GMATCH_OK; i++) {}
    if (taken) *taken = i;
    return r;
}

bool snug_gmatch_accepting(const snug_gmatch *m)
{
    for (int32_t i = 0; i < m->n; i++)
        if (m->len[i] == 0) return true;
    return false;
}

void snug_gmatch_next_bytes(const snug_gmatch *m, snug_byteset *out)
{
    memset(out, 0, sizeof *out);
    for (int32_t i = 0; i < m->n; i++) {
        int32_t d = m->len[i];
        if (d == 0) continue;
        const snug_byteset *s = &m->g->sets[m->g->elems[frames_of(m->frames, m, i)[d - 1]].value];
        for (int k = 0; k < 8; k++) out->bits[k] |= s->bits[k];
    }
}

void snug_gmatch_copy(snug_gmatch *dst, const snug_gmatch *src)
{
    SNUG_ASSERT(dst->max_stacks == src->max_stacks && dst->max_depth == src->max_depth);
    dst->g = src->g, dst->n = src->n;
    memcpy(dst->len, src->len, (size_t)src->n * sizeof *src->len);
    for (int32_t i = 0; i < src->n; i++)
        memcpy(frames_of(dst->frames, dst, i), frames_of(src->frames, src, i), (size_t)src->len[i] * sizeof(int32_t));
}

void snug_gmatch_clone(snug_gmatch *dst, void *mem, const snug_gmatch *src)
{
    bind(dst, mem, src->max_stacks, src->max_depth, src->g);
    snug_gmatch_copy(dst, src);
}

void snug_gmatch_from_stack(snug_gmatch *dst, void *mem, const snug_gmatch *src, int32_t i, int32_t from)
{
    SNUG_ASSERT(i >= 0 && i < src->n && from >= 0 && from < src->len[i]);
    bind(dst, mem, src->max_stacks, src->max_depth, src->g);
    dst->n = 1;
    dst->len[0] = src->len[i] - from;
    memcpy(dst->frames, frames_of(src->frames, src, i) + from, (size_t)dst->len[0] * sizeof(int32_t));
}
