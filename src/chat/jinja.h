/*
 * jinja.h: chat templates. A small interpreter for the subset of Jinja that
 * Hugging Face `chat_template`s use, rendering byte for byte what Jinja2
 * renders in transformers (ImmutableSandboxedEnvironment with trim_blocks,
 * lstrip_blocks and the loopcontrols extension, a raise_exception global, a
 * tojson filter that is json.dumps with ensure_ascii=False, the
 * `{% generation %}` tag, no strftime_now).
 *
 * A template is compiled once (every construct is checked then: one the
 * interpreter does not support is an error naming it and its place, never a
 * wrong prompt later) and rendered any number of times, from any number of
 * threads at once: a compiled template is read-only.
 *
 * Rendering has bounded cost: the output size, the memory, the number of
 * evaluation steps and loop iterations, and the nesting depth are limited
 * (snug_template_limits), so that a hostile template cannot hang the server
 * or exhaust its memory; passing a limit is a clean SNUG_INVALID error.
 *
 * The supported subset and what is deliberately left out are listed at the
 * top of src/jinja_parse.c.
 */
#ifndef SNUG_JINJA_H
#define SNUG_JINJA_H

#include "base/common.h"

#include <jansson.h>

typedef struct snug_template snug_template;

/* What one render may use. */
typedef struct snug_template_limits {
    size_t output_bytes_max; /* bytes of rendered text (macro and block-set captures count) */
    size_t memory_bytes_max; /* bytes the renderer may hold at once, output aside */
    int64_t steps_max;       /* evaluation steps, O(n) builtins counting n */
    int64_t iterations_max;  /* for-loop iterations, all loops together */
    int32_t depth_max;       /* nesting of evaluation: expressions, blocks, macro calls */
} snug_template_limits;

/* The limits snug_template_render uses: 16 MiB of output, 256 MiB of
 * memory, 20 million steps, 1 million loop iterations, depth 400. */
void snug_template_limits_default(snug_template_limits *out);

/* Compiles template text (len bytes of UTF-8; name is used in messages and
 * copied). A construct the interpreter does not support fails here, with
 * SNUG_UNSUPPORTED and a message naming the construct and its line:column
 * ("NAME:3:7: the 'include' tag is not supported"); a syntax error, or text
 * that is not valid UTF-8, fails with SNUG_FORMAT. On success *out owns the
 * compiled template (free it with snug_template_free); on failure *out is
 * untouched and nothing is held. */
snug_status snug_template_compile(const char *text, size_t len, const char *name,
                                  snug_template **out, snug_error *err);

/* Renders with the variables of vars (a JSON object, e.g. {"messages":
 * [...], "add_generation_prompt": true, "bos_token": "<s>", "eos_token":
 * "</s>"}; NULL renders with no variables). *out is a new NUL-terminated
 * block (snug_mem_free) of *len bytes (the text may itself hold NUL bytes).
 * A template's raise_exception("...") fails with SNUG_INVALID and the
 * message "NAME: ..." (the template's name, then exactly its text). Other
 * runtime errors (where Jinja raises: an undefined value used, a type
 * error, a limit passed) fail with SNUG_INVALID, or SNUG_UNSUPPORTED for
 * operations the interpreter does not implement, with "NAME:LINE:COL: ...".
 * On failure *out and *len are untouched and nothing is held. */
snug_status snug_template_render(const snug_template *t, const json_t *vars, char **out,
                                 size_t *len, snug_error *err);

/* snug_template_render with the given limits (NULL: the defaults). */
snug_status snug_template_render_limited(const snug_template *t, const json_t *vars,
                                         const snug_template_limits *limits, char **out,
                                         size_t *len, snug_error *err);

/* What kind of error ended a render. */
typedef enum snug_template_fail {
    SNUG_TEMPLATE_FAIL_NONE = 0, /* the render did not fail */
    SNUG_TEMPLATE_FAIL_ERROR,    /* where Jinja raises: a type error, an undefined value used,
                                  * an operation the interpreter does not implement */
    SNUG_TEMPLATE_FAIL_RAISED,   /* the template's raise_exception(): the text is its own */
    SNUG_TEMPLATE_FAIL_LIMIT     /* a limit of snug_template_limits passed, or memory refused
                                  * (then the status is SNUG_NOMEM) */
} snug_template_fail;

enum { SNUG_TEMPLATE_FAILURE_ITEMS = 4 };

/* A failed render described for a caller that words its own message (a
 * server, which must not show its clients the interpreter's Python-style
 * errors). */
typedef struct snug_template_failure {
    snug_template_fail kind;
    size_t text_at;   /* err->msg + text_at: the message without "NAME:LINE:COL: " or
                       * "NAME: " (for RAISED, exactly the template's text) */
    int n_items;      /* entries of items */
    const json_t *items[SNUG_TEMPLATE_FAILURE_ITEMS]; /* arrays and objects of vars (borrowed)
                       * that the for loops around the error were at, innermost first
                       * (loops over other values are skipped): in {% for m in messages %}
                       * (or over a slice of it), the message being rendered */
} snug_template_failure;

/* snug_template_render_limited that also fills *failure (when not NULL):
 * kind NONE and no items on success, else what failed and where. Nothing
 * is allocated to find the items; they are valid while vars lives. */
snug_status snug_template_render_traced(const snug_template *t, const json_t *vars,
                                        const snug_template_limits *limits,
                                        snug_template_failure *failure, char **out,
                                        size_t *len, snug_error *err);

/* The name given at compile time. Valid while t lives. */
const char *snug_template_name(const snug_template *t);

/* Frees a compiled template; NULL is ignored. t is invalid afterwards. */
void snug_template_free(snug_template *t);

#endif /* SNUG_JINJA_H */
