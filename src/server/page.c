/*
 * page.c: the server's own page and what it reads (server_impl.h): GET /
 * (src/server/page/index.html, built into the binary: a chat over
 * /v1/chat/completions and a live view of memory), GET /v1/memory (the
 * plan's figures and the engine's counters as JSON, polled by the page)
 * and GET /timeline.svg (the start-up's memory over time, when it was
 * recorded).
 */
#include "server_impl.h"

#include "base/mem.h"

#include <string.h>

/* The page's bytes, taken into the object file as they are in the source
 * tree (the Makefile makes this object depend on the file). */
__asm__(".pushsection .rodata\n"
        ".global snug_page_html\n"
        ".balign 16\n"
        "snug_page_html:\n"
        ".incbin \"src/server/page/index.html\"\n"
        ".global snug_page_html_end\n"
        "snug_page_html_end:\n"
        ".byte 0\n"
        ".popsection\n");
extern const char snug_page_html[], snug_page_html_end[];

/* Headers every page response carries: nothing loads from elsewhere (the
 * page's own script and style are inline), no referrer (no sniffing:
 * http_add_headers, as every reply). */
static void page_headers(struct MHD_Response *r, struct MHD_Connection *c, const char *type)
{
    http_add_headers(r, c);
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                            "connect-src 'self'; img-src 'self' data:; form-action 'none'; frame-ancestors 'none'");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
}

/* Queues n bytes at data (which outlive the response) as a page response
 * of type. */
static enum MHD_Result send_static(struct MHD_Connection *c, const void *data, size_t n, const char *type)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    page_headers(r, c, type);
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result page_index(struct MHD_Connection *c)
{
    return send_static(c, snug_page_html, (size_t)(snug_page_html_end - snug_page_html), "text/html; charset=utf-8");
}

enum MHD_Result page_timeline(snug_server *s, struct MHD_Connection *c)
{
    if (!s->o.timeline_svg)
        return http_error(c, 404, "invalid_request_error", NULL, "not_found",
                          "no start-up timeline was recorded: start the server with --timeline");
    return send_static(c, s->o.timeline_svg, s->o.timeline_svg_len, "image/svg+xml");
}

enum MHD_Result page_memory(snug_server *s, struct MHD_Connection *c)
{
    const snug_plan_report *p = snug_engine_plan(s->e);
    snug_engine_counters k;
    snug_engine_counters_get(s->e, &k);
    size_t rss = 0, hwm = 0;
    snug_proc_mem(&rss, &hwm, NULL); /* zeros when it cannot be read */
    snug_strbuf b = {0};
    snug_strbuf_printf(&b, "{\"object\":\"memory\",\"model\":\"");
    snug_strbuf_json(&b, s->o.model_name, strlen(s->o.model_name));
    snug_strbuf_printf(&b, "\",\"max_model_len\":%lld,\"budget_bytes\":%zu,\"plan\":[",
                       (long long)snug_engine_max_model_len(s->e), p->sizes.budget);
    const struct { const char *part; size_t v; } plan[] = {
        {"weights", p->weights}, {"activations", p->activations}, {"serving_state", p->serving_state},
        {"untracked", p->sizes.untracked}, {"reserve", p->sizes.reserve}, {"kv_cache", p->kv.kv_held},
        {"window_cache", p->window_held}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(plan); i++)
        if (plan[i].v > 0 || strcmp(plan[i].part, "window_cache") != 0) /* (the window group's only where there is one) */
            snug_strbuf_printf(&b, "%s{\"part\":\"%s\",\"bytes\":%zu}", i ? "," : "", plan[i].part, plan[i].v);
    snug_strbuf_printf(&b, "],\"kv\":{\"block_bytes\":%zu,\"block_tokens\":%d,\"blocks_total\":%d,"
                       "\"blocks_resident\":%d,\"blocks_used\":%d,\"blocks_cached\":%d,\"blocks_evictable\":%d,"
                       "\"prefix_caching\":%s,\"window\":%d,\"window_blocks_total\":%d,\"window_blocks_used\":%d},",
                       p->sizes.block_bytes, p->sizes.block_size, k.kv.total, k.kv.ready,
                       k.kv.used, k.kv.cached, k.kv.evictable,
                       k.kv.caching ? "true" : "false", p->window, k.kv_window.total, k.kv_window.used);
    snug_strbuf_printf(&b, "\"process\":{\"resident_bytes\":%zu,\"resident_peak_bytes\":%zu},"
                       "\"sequences\":{\"running\":%d,\"waiting\":%d,\"queued\":%d},"
                       "\"tokens\":{\"prompt_total\":%lld,\"generation_total\":%lld},\"requests_finished\":%lld,"
                       "\"timeline\":%s}",
                       rss, hwm, k.running, k.waiting, k.queued, (long long)k.prompt_tokens,
                       (long long)k.generation_tokens, (long long)k.requests_finished,
                       s->o.timeline_svg ? "true" : "false");
    return http_send(c, MHD_HTTP_OK, &b, "application/json");
}
