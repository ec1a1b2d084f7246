/*
 * regex.c: PCRE2 behind the accounting allocator, with bounded matching.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "regex.h"

#include "base/mem.h"

#include <pcre2.h>

enum {
    MATCH_LIMIT = 10 * 1000 * 1000, /* backtracking steps per match attempt */
    DEPTH_LIMIT = 100 * 1000
};

struct snug_regex {
    pcre2_general_context *gctx;
    pcre2_compile_context *cctx;
    pcre2_code *code;
};

struct snug_regex_matcher {
    pcre2_general_context *gctx;
    pcre2_match_context *mctx;
    pcre2_match_data *md;
};

static void *pcre2_alloc_hook(PCRE2_SIZE n, void *data)
{
    (void)data;
    return snug_mem_alloc(SNUG_MEM_OTHER, n, NULL);
}

static void pcre2_free_hook(void *p, void *data)
{
    (void)data;
    snug_mem_free(p);
}

snug_status snug_regex_compile(const char *pattern, snug_regex **out, snug_error *err)
{
    snug_status st = SNUG_OK;
    snug_regex *re = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *re, err);
    if (!re) return SNUG_NOMEM;
    re->gctx = pcre2_general_context_create(pcre2_alloc_hook, pcre2_free_hook, NULL);
    re->cctx = re->gctx ? pcre2_compile_context_create(re->gctx) : NULL;
    if (!re->cctx) {
        st = snug_errorf(err, SNUG_NOMEM, "out of memory creating a PCRE2 context");
        goto fail;
    }
    int code;
    PCRE2_SIZE offset;
    re->code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &offset,
                             re->cctx);
    if (!re->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        st = snug_errorf(err, code == PCRE2_ERROR_HEAP_FAILED || code == PCRE2_ERROR_NOMEMORY
                                  ? SNUG_NOMEM : SNUG_FORMAT,
                         "regex rejected at offset %zu: %s", (size_t)offset, (const char *)msg);
        goto fail;
    }
    uint32_t jit = 0;
    pcre2_config(PCRE2_CONFIG_JIT, &jit);
    if (jit) pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
    *out = re;
    return SNUG_OK;
fail:
    snug_regex_free(re);
    return st;
}

snug_status snug_regex_matcher_create(const snug_regex *re, snug_regex_matcher **out,
                                      snug_error *err)
{
    snug_regex_matcher *m = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *m, err);
    if (!m) return SNUG_NOMEM;
    m->gctx = pcre2_general_context_create(pcre2_alloc_hook, pcre2_free_hook, NULL);
    m->mctx = m->gctx ? pcre2_match_context_create(m->gctx) : NULL;
    m->md = m->gctx ? pcre2_match_data_create_from_pattern(re->code, m->gctx) : NULL;
    if (!m->mctx || !m->md) {
        snug_regex_matcher_free(m);
        return snug_errorf(err, SNUG_NOMEM, "out of memory creating PCRE2 match data");
    }
    pcre2_set_match_limit(m->mctx, MATCH_LIMIT);
    pcre2_set_depth_limit(m->mctx, DEPTH_LIMIT);
    *out = m;
    return SNUG_OK;
}

int snug_regex_find(const snug_regex *re, snug_regex_matcher *m, const char *subject, size_t len,
                    size_t start, size_t *begin, size_t *end)
{
    int rc = pcre2_match(re->code, (PCRE2_SPTR)subject, len, start, 0, m->md, m->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) return rc;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
    *begin = ov[0];
    *end = ov[1];
    return 1;
}

void snug_regex_matcher_free(snug_regex_matcher *m)
{
    if (!m) return;
    pcre2_match_data_free(m->md);
    pcre2_match_context_free(m->mctx);
    pcre2_general_context_free(m->gctx);
    snug_mem_free(m);
}

void snug_regex_free(snug_regex *re)
{
    if (!re) return;
    pcre2_code_free(re->code);
    pcre2_compile_context_free(re->cctx);
    pcre2_general_context_free(re->gctx);
    snug_mem_free(re);
}
