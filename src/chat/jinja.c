/*
 * jinja.c: the public face of the chat-template interpreter (jinja.h):
 * compile = normalize newlines, check UTF-8, lex, parse; render = run the
 * tree under limits. The parts live in jinja_*.c (see jinja_impl.h).
 */
#include "jinja_impl.h"

#include "base/mem.h"

#include <string.h>

enum { COMPILE_MEMORY_MAX = 64 << 20 }; /* tokens and tree of one template */

void snug_template_limits_default(snug_template_limits *out)
{
    out->output_bytes_max = 16u << 20;
    out->memory_bytes_max = 256u << 20;
    out->steps_max = 20 * 1000 * 1000;
    out->iterations_max = 1000 * 1000;
    out->depth_max = 400;
}

const char *snug_template_name(const snug_template *t) { return t->name; }

void snug_template_free(snug_template *t)
{
    if (!t) return;
    jj_arena_free(&t->arena);
    snug_mem_free(t->src);
    snug_mem_free(t->name);
    snug_mem_free(t);
}

snug_status snug_template_compile(const char *text, size_t len, const char *name,
                                  snug_template **out, snug_error *err)
{
    snug_error local = {0};
    snug_error *e = err ? err : &local;
    size_t compile_bytes = 0;
    snug_status st = SNUG_OK;
    if (!name) name = "template";
    snug_template *t = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *t, e);
    if (!t) return snug_error_prefix(err, e->status, "%s: ", name);
    t->arena.budget = &compile_bytes;
    t->arena.budget_max = COMPILE_MEMORY_MAX;
    if (!(t->name = snug_mem_strdup(SNUG_MEM_OTHER, name, e))) {
        st = snug_error_prefix(err, e->status, "%s: ", name);
        goto fail;
    }
    if (!snug_utf8_valid(text, len)) {
        st = snug_errorf(err, SNUG_FORMAT, "%s: the template is not valid UTF-8", name);
        goto fail;
    }
    if ((st = jj_normalize(text, len, &t->src, &t->src_len, e)) != SNUG_OK) {
        snug_error_prefix(err, st, "%s: ", name);
        goto fail;
    }
    jj_tokens toks = {0};
    if ((st = jj_lex(t->src, t->src_len, t->name, &t->arena, &toks, e)) != SNUG_OK) goto fail;
    if ((st = jj_parse(t, &toks, e)) != SNUG_OK) goto fail;
    t->arena.budget = NULL; /* compile_bytes is about to go out of scope */
    *out = t;
    return SNUG_OK;
fail:
    if (st == SNUG_INVALID && strstr(e->msg, "limit of") != NULL)
        st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: the template needs more than %d MiB to compile",
                         name, COMPILE_MEMORY_MAX >> 20);
    if (st == SNUG_NOMEM && strstr(e->msg, name) == NULL) snug_error_prefix(err, st, "%s: ", name);
    if (t) {
        t->arena.budget = NULL;
        snug_template_free(t);
    }
    return st;
}

snug_status snug_template_render(const snug_template *t, const json_t *vars, char **out,
                                 size_t *len, snug_error *err)
{
    return snug_template_render_limited(t, vars, NULL, out, len, err);
}

snug_status snug_template_render_limited(const snug_template *t, const json_t *vars,
                                         const snug_template_limits *limits, char **out,
                                         size_t *len, snug_error *err)
{
    return snug_template_render_traced(t, vars, limits, NULL, out, len, err);
}

snug_status snug_template_render_traced(const snug_template *t, const json_t *vars,
                                        const snug_template_limits *limits,
                                        snug_template_failure *failure, char **out,
                                        size_t *len, snug_error *err)
{
    snug_template_limits lim;
    if (limits)
        lim = *limits;
    else
        snug_template_limits_default(&lim);
    return jj_render(t, vars, &lim, failure, out, len, err);
}
