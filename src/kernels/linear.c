/*
 * linear.c: the panel layout of weight matrices (linear.h): sizes, offsets,
 * packing row-major rows into it and reading elements back out. Portable C:
 * packing runs once per weight at load, reading back only for embedding
 * rows and tests.
 */
#include "linear.h"

#include "base/dtype.h"
#include "base/quant.h"

#include <string.h>

bool snug_linear_supports(snug_dtype dt)
{
    return dt == SNUG_DTYPE_F32 || dt == SNUG_DTYPE_F16 || dt == SNUG_DTYPE_BF16 || snug_dtype_is_quant(dt);
}

/* Bytes of one row in the layout: k elements, ceil(k / 2) bf16 pairs, or
 * k / block blocks. */
static size_t row_bytes(snug_dtype dt, int64_t k)
{
    if (dt == SNUG_DTYPE_BF16) return (size_t)((k + 1) / 2) * 4;
    if (snug_dtype_is_quant(dt)) return snug_qtype_bytes(snug_dtype_qtype(dt), k);
    return (size_t)k * snug_dtype_size(dt);
}

size_t snug_linear_bytes(snug_dtype dt, int64_t m, int64_t k)
{
    size_t n = 0;
    if (!snug_linear_supports(dt) || m < 0 || k < 0 || !snug_mul_size((size_t)m, row_bytes(dt, k), &n))
        return 0;
    if (snug_dtype_is_quant(dt) && k % snug_qtype_block(snug_dtype_qtype(dt)) != 0) return 0;
    return n;
}

/* Bytes of a row before packing (row-major in its panel's bytes). */
static size_t raw_row_bytes(snug_dtype dt, int64_t k)
{
    return snug_dtype_is_quant(dt) ? row_bytes(dt, k) : (size_t)k * snug_dtype_size(dt);
}

size_t snug_linear_panel_offset(snug_dtype dt, int64_t m, int64_t k, int64_t p)
{
    (void)m;
    return (size_t)p * SNUG_PANEL * row_bytes(dt, k);
}

size_t snug_linear_raw_offset(snug_dtype dt, int64_t m, int64_t k, int64_t r)
{
    return snug_linear_panel_offset(dt, m, k, r / SNUG_PANEL) + (size_t)(r % SNUG_PANEL) * raw_row_bytes(dt, k);
}

size_t snug_linear_pack_scratch_bytes(snug_dtype dt, int64_t k_max)
{
    if (snug_dtype_is_quant(dt)) {
        int64_t b = snug_qtype_block(snug_dtype_qtype(dt));
        return (size_t)SNUG_PANEL * row_bytes(dt, (k_max + b - 1) / b * b);
    }
    return (size_t)SNUG_PANEL * (size_t)k_max * snug_dtype_size(dt);
}

/* An interleaved format's block as spans of units laid out across the
 * group's rows (linear.h): bytes [start, end) of a block go unit by unit,
 * unit u of row j at start w + u unit w + unit j. */
typedef struct span {
    int start, end, unit;
} span;

/* The spans of dt's blocks (their count; 0: not interleaved). */
static int spans_of(snug_dtype dt, const span **out)
{
    static const span q4k[] = {{0, 4, 2}, {4, 16, 1}, {16, 144, 4}};   /* d and dmin, scale bytes, values */
    static const span q6k[] = {{0, 192, 4}, {192, 208, 1}, {208, 210, 2}}; /* ql and qh, scales, d */
    static const span q80[] = {{0, 2, 2}, {2, 34, 4}};                      /* d, values */
    static const span q50[] = {{0, 2, 2}, {2, 6, 4}, {6, 22, 4}};           /* d, qh, nibbles */
    static const span q40[] = {{0, 2, 2}, {2, 18, 4}};                      /* d, nibbles */
    if (dt == SNUG_DTYPE_Q4_K) return *out = q4k, (int)SNUG_ARRAY_LEN(q4k);
    if (dt == SNUG_DTYPE_Q6_K) return *out = q6k, (int)SNUG_ARRAY_LEN(q6k);
    if (dt == SNUG_DTYPE_Q8_0) return *out = q80, (int)SNUG_ARRAY_LEN(q80);
    if (dt == SNUG_DTYPE_Q5_0) return *out = q50, (int)SNUG_ARRAY_LEN(q50);
    if (dt == SNUG_DTYPE_Q4_0) return *out = q40, (int)SNUG_ARRAY_LEN(q40);
    return 0;
}

bool snug_linear_interleaved(snug_dtype dt)
{
    const span *sp;
    return spans_of(dt, &sp) > 0;
}

/* Where the unit at byte i of span sp of block j sits in a group of
 * width rows. */
static size_t unit_at(const span *sp, int64_t width, int64_t j, int i)
{
    return (size_t)(sp->start * width + (i - sp->start) * width + sp->unit * j);
}

/* Copies one unit of n (1, 2 or 4) bytes: a constant size for each, so
 * that no copy is a call (a call a unit made packing a 0.8 GB Q4_K_M file
 * take 0.2 s). */
static void move_unit(unsigned char *dst, const unsigned char *src, int n)
{
    if (n == 4) memcpy(dst, src, 4);
    else if (n == 2) memcpy(dst, src, 2);
    else *dst = *src;
}

void snug_linear_group_place(snug_dtype dt, void *group, int64_t width, int64_t j, const void *block)
{
    unsigned char *g = group;
    const unsigned char *bl = block;
    const span *sp;
    int n = spans_of(dt, &sp);
    size_t bb = snug_qtype_block_bytes(snug_dtype_qtype(dt));
    if (n == 0) memcpy(g + (size_t)j * bb, bl, bb);
    for (int s = 0; s < n; s++)
        for (int i = sp[s].start; i < sp[s].end; i += sp[s].unit)
            move_unit(g + unit_at(&sp[s], width, j, i), bl + i, sp[s].unit);
}

void snug_linear_group_block(snug_dtype dt, const void *group, int64_t width, int64_t j, void *out)
{
    const unsigned char *g = group;
    unsigned char *bl = out;
    const span *sp;
    int n = spans_of(dt, &sp);
    size_t bb = snug_qtype_block_bytes(snug_dtype_qtype(dt));
    if (n == 0) memcpy(bl, g + (size_t)j * bb, bb);
    for (int s = 0; s < n; s++)
        for (int i = sp[s].start; i < sp[s].end; i += sp[s].unit)
            move_unit(bl + i, g + unit_at(&sp[s], width, j, i), sp[s].unit);
}

void snug_linear_group_widen(snug_dtype dt, const void *g, int64_t width, void *out)
{
    size_t bb = snug_qtype_block_bytes(snug_dtype_qtype(dt));
    unsigned char *o = out, bl[256]; /* one block (at most 210 bytes) */
    memset(o, 0, SNUG_PANEL * bb);
    for (int64_t j = 0; j < width; j++) {
        snug_linear_group_block(dt, g, width, j, bl);
        snug_linear_group_place(dt, o, SNUG_PANEL, j, bl);
    }
}

/* Packs rows [r0, r0 + w) (one panel, w <= 16) from row-major src (rows of
 * k elements) into the panel's bytes at dst. */
static void pack_rows(unsigned char *dst, const unsigned char *src, snug_dtype dt, int64_t k,
                      int64_t w)
{
    if (snug_dtype_is_quant(dt)) {
        uint32_t t = snug_dtype_qtype(dt);
        size_t bb = snug_qtype_block_bytes(t), rb = row_bytes(dt, k);
        int64_t nb = k / snug_qtype_block(t);
        const span *sp = NULL;
        int n = spans_of(dt, &sp);
        for (int64_t b = 0; b < nb; b++) {
            unsigned char *g = dst + (size_t)(b * w) * bb;
            const unsigned char *bl = src + (size_t)b * bb;
            if (n == 0)
                for (int64_t j = 0; j < w; j++) memcpy(g + (size_t)j * bb, bl + (size_t)j * rb, bb);
            for (int s = 0; s < n; s++) /* unit by unit, every row's in turn: each line written whole */
                for (int i = sp[s].start; i < sp[s].end; i += sp[s].unit)
                    for (int64_t j = 0; j < w; j++)
                        move_unit(g + unit_at(&sp[s], w, j, i), bl + (size_t)j * rb + (size_t)i, sp[s].unit);
        }
    } else if (dt == SNUG_DTYPE_BF16) {
        const uint16_t *s = (const void *)src;
        uint32_t *d = (void *)dst;
        for (int64_t j = 0; j < w; j++)
            for (int64_t q = 0; q < (k + 1) / 2; q++) {
                uint32_t lo = s[j * k + 2 * q], hi = 2 * q + 1 < k ? s[j * k + 2 * q + 1] : 0;
                d[q * w + j] = lo | hi << 16;
            }
    } else if (dt == SNUG_DTYPE_F16) {
        const uint16_t *s = (const void *)src;
        uint16_t *d = (void *)dst;
        for (int64_t j = 0; j < w; j++)
            for (int64_t e = 0; e < k; e++) d[e * w + j] = s[j * k + e];
    } else {
        const float *s = (const void *)src;
        float *d = (void *)dst;
        for (int64_t j = 0; j < w; j++)
            for (int64_t e = 0; e < k; e++) d[e * w + j] = s[j * k + e];
    }
}

void snug_linear_pack_panel(void *base, snug_dtype dt, int64_t m, int64_t k, int64_t p, void *tmp)
{
    int64_t w = SNUG_MIN((int64_t)SNUG_PANEL, m - p * SNUG_PANEL);
    if (w <= 0 || k <= 0) return;
    unsigned char *panel = (unsigned char *)base + snug_linear_panel_offset(dt, m, k, p);
    memcpy(tmp, panel, (size_t)w * raw_row_bytes(dt, k));
    pack_rows(panel, tmp, dt, k, w);
}

void snug_linear_pack(void *dst, const void *src, snug_dtype dt, int64_t m, int64_t k)
{
    size_t rb = raw_row_bytes(dt, k);
    for (int64_t p = 0; p * SNUG_PANEL < m; p++) {
        int64_t w = SNUG_MIN((int64_t)SNUG_PANEL, m - p * SNUG_PANEL);
        pack_rows((unsigned char *)dst + snug_linear_panel_offset(dt, m, k, p),
                  (const unsigned char *)src + (size_t)(p * SNUG_PANEL) * rb, dt, k, w);
    }
}

void snug_linear_block_bytes(const snug_linear *w, int64_t r, int64_t b, void *out)
{
    int64_t p = r / SNUG_PANEL, j = r % SNUG_PANEL;
    int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    size_t bb = snug_qtype_block_bytes(snug_dtype_qtype(w->dtype));
    const unsigned char *g = (const unsigned char *)w->data +
                             snug_linear_panel_offset(w->dtype, w->m, w->k, p) + (size_t)(b * width) * bb;
    snug_linear_group_block(w->dtype, g, width, j, out);
}

void snug_linear_row_block(const snug_linear *w, int64_t r, int64_t b, float *out)
{
    uint32_t t = snug_dtype_qtype(w->dtype);
    unsigned char bl[256]; /* one block (at most 210 bytes) */
    snug_linear_block_bytes(w, r, b, bl);
    snug_quant_dequantize((snug_qtype)t, bl, out, snug_qtype_block(t));
}

void snug_linear_quant_slice_f32(const snug_linear *w, int64_t p, int64_t e0, int64_t len, float *dst)
{
    int64_t bs = snug_qtype_block(snug_dtype_qtype(w->dtype));
    int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    float v[256];
    if (width < SNUG_PANEL) memset(dst, 0, (size_t)len * SNUG_PANEL * sizeof(float));
    for (int64_t b = e0 / bs; b * bs < e0 + len; b++) {
        int64_t lo = SNUG_MAX(e0, b * bs), hi = SNUG_MIN(e0 + len, (b + 1) * bs);
        for (int64_t j = 0; j < width; j++) {
            snug_linear_row_block(w, p * SNUG_PANEL + j, b, v);
            for (int64_t e = lo; e < hi; e++) dst[(e - e0) * SNUG_PANEL + j] = v[e - b * bs];
        }
    }
}

float snug_linear_elem(const snug_linear *w, int64_t r, int64_t e)
{
    if (snug_dtype_is_quant(w->dtype)) {
        int64_t bs = snug_qtype_block(snug_dtype_qtype(w->dtype));
        float v[256];
        snug_linear_row_block(w, r, e / bs, v);
        return v[e % bs];
    }
    int64_t p = r / SNUG_PANEL, j = r % SNUG_PANEL;
    int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const unsigned char *panel =
        (const unsigned char *)w->data + snug_linear_panel_offset(w->dtype, w->m, w->k, p);
    if (w->dtype == SNUG_DTYPE_BF16) {
        uint32_t pair = ((const uint32_t *)(const void *)panel)[(e / 2) * width + j];
        return snug_bf16_to_f32((uint16_t)(e % 2 ? pair >> 16 : pair & 0xFFFF));
    }
    if (w->dtype == SNUG_DTYPE_F16)
        return snug_f16_to_f32(((const uint16_t *)(const void *)panel)[e * width + j]);
    return ((const float *)(const void *)panel)[e * width + j];
}

void snug_linear_row(const snug_linear *w, int64_t r, float *out)
{
    if (snug_dtype_is_quant(w->dtype)) {
        int64_t bs = snug_qtype_block(snug_dtype_qtype(w->dtype));
        for (int64_t b = 0; b < w->k / bs; b++) snug_linear_row_block(w, r, b, out + b * bs);
        return;
    }
    int64_t p = r / SNUG_PANEL, j = r % SNUG_PANEL, k = w->k;
    int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const unsigned char *panel =
        (const unsigned char *)w->data + snug_linear_panel_offset(w->dtype, w->m, k, p);
    if (w->dtype == SNUG_DTYPE_BF16) {
        const uint32_t *pairs = (const uint32_t *)(const void *)panel + j;
        for (int64_t q = 0; q < k / 2; q++) {
            uint32_t pair = pairs[q * width];
            out[2 * q] = snug_bf16_to_f32((uint16_t)(pair & 0xFFFF));
            out[2 * q + 1] = snug_bf16_to_f32((uint16_t)(pair >> 16));
        }
        if (k % 2) out[k - 1] = snug_bf16_to_f32((uint16_t)(pairs[(k / 2) * width] & 0xFFFF));
    } else if (w->dtype == SNUG_DTYPE_F16) {
        const uint16_t *h = (const uint16_t *)(const void *)panel + j;
        for (int64_t e = 0; e < k; e++) out[e] = snug_f16_to_f32(h[e * width]);
    } else {
        const float *f = (const float *)(const void *)panel + j;
        for (int64_t e = 0; e < k; e++) out[e] = f[e * width];
    }
}
