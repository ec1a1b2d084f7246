/*
 * loader.c: checking a checkpoint against a rank's parameter table, planning
 * the reads, and reading every slice into place on a pool of threads made
 * for the load.
 */
#include "loader.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/pool.h"
#include "base/populate.h"
#include "base/quant.h"
#include "base/sysinfo.h"
#include "kernels/linear.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { LIST_NAMES = 8 }; /* names listed in a message before "and N more" */

/* Where one source of one parameter lives in the checkpoint. */
typedef struct source_ref {
    const snug_st_file *file;
    const snug_st_tensor *tensor;
} source_ref;

/* A piece of work: rows [row0, row0 + n_rows) of one source's slice. */
typedef struct load_item {
    int32_t param, source;
    int64_t row0, n_rows;
    int64_t convert;           /* -1: read straight into place; else this item's place
                                * among the items that go through staging */
} load_item;

typedef struct load_plan {
    source_ref *refs;          /* [n_params * SNUG_PARAM_MAX_SOURCES] */
    uint64_t *expected;        /* [n_params] bytes each parameter must receive */
    _Atomic uint64_t *written; /* [n_params] bytes each has received */
    load_item *items;
    int64_t n_items;
    int64_t n_converting;      /* items of a source of another dtype than the weights */
    int32_t n_slots;           /* staging slots: min(threads, n_converting) */
    size_t slot_bytes;         /* one slot: the most source bytes a converting item
                                * reads, rounded up to SNUG_MEM_ALIGN; 0 without any */
    /* Packed parameters (the matmul's panel layout): rows arrive row-major
     * in their panel's bytes; the item that completes a panel packs it. */
    int64_t *panel0;           /* [n_params] first panel counter of a packed parameter */
    _Atomic int32_t *arrived;  /* [n_panels] rows of each panel written so far */
    int32_t *due;              /* [n_panels] rows each panel receives (padding excluded) */
    int64_t n_panels;
    size_t pack_bytes;         /* one packing slot: a panel of the widest matrix; 0 without */
    int32_t n_pack_slots;      /* packing slots: as many as PACK_SHARE of the weights holds
                                * (at least 1, at most the threads) */
    _Atomic int32_t *pack_busy;/* [n_pack_slots] a thread is packing through it */
    int64_t *deferred;         /* [n_panels] counters of panels completed while every
                                * slot was busy: packed after the reads */
    _Atomic int64_t n_deferred;
} load_plan;

/* The packing scratch may take this share of the weights' bytes (the
 * loader's peak stays within weights x 1.01 with the staging). */
#define PACK_SHARE 0.004

/* The format source s of p is held in. */
static snug_dtype held_dtype(const snug_param *p, int32_t s) { return snug_param_source_part(p, s, p->dtype).dtype; }

/* Bytes of n elements of one row of dt (of a block format: whole blocks). */
static size_t row_bytes_of(snug_dtype dt, int64_t n)
{
    return snug_dtype_is_quant(dt) ? snug_qtype_bytes(snug_dtype_qtype(dt), n) : (size_t)n * snug_dtype_size(dt);
}

static source_ref *ref_of(const load_plan *pl, int32_t param, int32_t source)
{
    return &pl->refs[(size_t)param * SNUG_PARAM_MAX_SOURCES + (size_t)source];
}

/* Appends a name (a checkpoint's, so escaped: snug_str_shown) to a list
 * message ("a, b, c" then "and N more"). */
static void list_add(char *buf, size_t size, int *count, const char *name)
{
    size_t o = strlen(buf);
    char shown[124];
    if (*count < LIST_NAMES && o < size)
        snprintf(buf + o, size - o, "%s'%s'", *count ? ", " : "", snug_str_shown(name, shown, sizeof shown));
    (*count)++;
}

static void list_end(char *buf, size_t size, int count)
{
    size_t o = strlen(buf);
    if (count > LIST_NAMES && o < size) snprintf(buf + o, size - o, " and %d more", count - LIST_NAMES);
}

/* Tensors a checkpoint may hold that the model does not need. */
static bool ignorable(const char *name, const snug_model_config *cfg)
{
    static const char suffix[] = "rotary_emb.inv_freq";
    size_t n = strlen(name), k = sizeof suffix - 1;
    if (n >= k && strcmp(name + n - k, suffix) == 0) return true;
    return cfg->tie_word_embeddings && strcmp(name, "lm_head.weight") == 0;
}

static int cmp_name_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Finds every source in the checkpoint and checks its shape and dtype, then
 * that the checkpoint holds nothing else the model ignores. */
static snug_status check_checkpoint(const snug_checkpoint *ck, const snug_param_table *t,
                                    load_plan *pl, snug_error *err)
{
    char missing[600] = "";
    int n_missing = 0;
    snug_status st = SNUG_OK;
    for (int32_t i = 0; i < t->n_params; i++) {
        const snug_param *p = &t->params[i];
        for (int32_t s = 0; s < p->n_sources; s++) {
            const snug_param_source *src = &p->sources[s];
            source_ref *r = ref_of(pl, i, s);
            r->tensor = snug_checkpoint_find(ck, src->tensor, &r->file);
            if (!r->tensor) {
                list_add(missing, sizeof missing, &n_missing, src->tensor);
                continue;
            }
            const snug_st_tensor *x = r->tensor;
            bool shape_ok = x->n_dims == src->n_dims && x->shape[0] == src->rows &&
                            (src->n_dims == 1 || x->shape[1] == src->cols);
            if (!shape_ok) {
                char want[64], got[200];
                int64_t ws[2] = {src->rows, src->cols};
                return snug_errorf(err, SNUG_FORMAT, "%s: tensor '%s' has shape %s; the config "
                                   "implies %s", r->file->path, x->name,
                                   snug_st_shape_str(x->shape, x->n_dims, got, sizeof got),
                                   snug_st_shape_str(ws, src->n_dims, want, sizeof want));
            }
            if (!snug_dtype_is_quant(x->dtype)) st = snug_st_check_weight(r->file, x, err);
            if (st != SNUG_OK) return st;
        }
    }
    if (n_missing) {
        list_end(missing, sizeof missing, n_missing);
        return snug_errorf(err, SNUG_FORMAT, "%s: the checkpoint lacks %d tensor%s the model "
                           "needs: %s", ck->dir, n_missing, n_missing == 1 ? "" : "s", missing);
    }
    /* Unused tensors: every checkpoint tensor must be a source (or ignorable). */
    size_t n_refs = (size_t)t->n_params * SNUG_PARAM_MAX_SOURCES, n_used = 0;
    const char **used = snug_mem_alloc(SNUG_MEM_OTHER, n_refs * sizeof *used, err);
    if (!used) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", ck->dir);
    for (int32_t i = 0; i < t->n_params; i++)
        for (int32_t s = 0; s < t->params[i].n_sources; s++) used[n_used++] = t->params[i].sources[s].tensor;
    qsort(used, n_used, sizeof *used, cmp_name_ptr);
    char unused[600] = "";
    int n_unused = 0;
    char text_buf[1100];
    for (int64_t k = 0; k < ck->n_tensors; k++) {
        const char *stored = ck->entries[k].tensor->name;
        const char *name = snug_checkpoint_text_name(ck, stored, text_buf, sizeof text_buf);
        if (!name) continue; /* a multimodal checkpoint's vision tower: not part of the text model */
        if (!bsearch(&name, used, n_used, sizeof *used, cmp_name_ptr) && !ignorable(name, &ck->config))
            list_add(unused, sizeof unused, &n_unused, stored);
    }
    snug_mem_free((void *)used);
    if (n_unused) {
        list_end(unused, sizeof unused, n_unused);
        return snug_errorf(err, SNUG_FORMAT, "%s: the checkpoint holds %d tensor%s the model does "
                           "not use: %s", ck->dir, n_unused, n_unused == 1 ? "" : "s", unused);
    }
    return SNUG_OK;
}

/* Checks that the sources of every parameter write each of its bytes at
 * most once, all of them except a vocabulary parameter's padding rows, and
 * records how many bytes each parameter must receive. */
static snug_status check_coverage(const snug_param_table *t, load_plan *pl, snug_error *err)
{
    for (int32_t i = 0; i < t->n_params; i++) {
        const snug_param *p = &t->params[i];
        int64_t covered[SNUG_PARAM_MAX_SOURCES][2];
        int32_t n = 0;
        for (int32_t s = 0; s < p->n_sources; s++) {
            const snug_param_source *src = &p->sources[s];
            if (src->n_cols != p->cols || src->dst_row < 0 || src->n_rows < 0 ||
                src->dst_row + src->n_rows > p->rows)
                return snug_errorf(err, SNUG_INTERNAL, "parameter %s: source %s does not fit it",
                                   p->name, src->tensor);
            covered[n][0] = src->dst_row;
            covered[n][1] = src->dst_row + src->n_rows;
            n++;
        }
        int64_t rows = 0;
        pl->expected[i] = 0;
        for (int32_t a = 0; a < n; a++) {
            rows += covered[a][1] - covered[a][0];
            for (int32_t b = 0; b < a; b++)
                if (covered[a][0] < covered[b][1] && covered[b][0] < covered[a][1])
                    return snug_errorf(err, SNUG_INTERNAL, "parameter %s: two sources write the "
                                       "same rows", p->name);
        }
        if (rows != p->rows && p->kind != SNUG_SHARD_VOCAB)
            return snug_errorf(err, SNUG_INTERNAL, "parameter %s: sources fill %lld of %lld rows",
                               p->name, (long long)rows, (long long)p->rows);
        for (int32_t a = 0; a < p->n_sources; a++)
            pl->expected[i] += (uint64_t)p->sources[a].n_rows * row_bytes_of(held_dtype(p, a), p->cols);
    }
    return SNUG_OK;
}

/* Splits every source slice into work items of at most item_bytes (and,
 * for conversions, at most staging_each, one thread's share of the
 * configured staging), and sizes the staging from the items: as many slots
 * as threads can use at once (min(n_threads, converting items)), each as
 * large as the largest converting item's read, rounded up to SNUG_MEM_ALIGN
 * so that every slot starts on a block boundary. */
static snug_status plan_items(const snug_param_table *t, size_t item_bytes, size_t staging_each,
                              int32_t n_threads, load_plan *pl, snug_error *err)
{
    size_t staged_max = 0;
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        int64_t n = 0, n_conv = 0;
        for (int32_t i = 0; i < t->n_params; i++) {
            const snug_param *p = &t->params[i];
            for (int32_t s = 0; s < p->n_sources; s++) {
                const snug_param_source *src = &p->sources[s];
                snug_param_part part = snug_param_source_part(p, s, p->dtype);
                snug_dtype dtype = part.dtype;
                snug_dtype sdt = ref_of(pl, i, s)->tensor->dtype;
                size_t src_row = row_bytes_of(sdt, src->n_cols);
                size_t row = SNUG_MAX(src_row, row_bytes_of(dtype, src->n_cols));
                size_t limit = item_bytes;
                bool converts = sdt != dtype;
                if (converts) {
                    limit = SNUG_MIN(limit, staging_each);
                    if (src_row > staging_each)
                        return snug_errorf(err, SNUG_INVALID, "staging of %zu bytes per thread "
                                           "is less than one row of %s (%zu bytes)", staging_each,
                                           src->tensor, src_row);
                }
                int64_t step = (int64_t)SNUG_MAX((size_t)1, limit / row);
                /* packed rows are contiguous only inside a panel when bf16
                 * pairs pad an odd k: items then end at panel boundaries */
                bool by_panel = p->packed && snug_linear_raw_offset(dtype, part.rows, p->cols, SNUG_PANEL) !=
                                                 (size_t)SNUG_PANEL * row_bytes_of(dtype, p->cols);
                for (int64_t r0 = 0, r1; r0 < src->n_rows; r0 = r1, n++) {
                    r1 = SNUG_MIN(src->n_rows, r0 + step);
                    if (by_panel) {
                        int64_t next = ((part.row + r0) / SNUG_PANEL + 1) * SNUG_PANEL - part.row;
                        r1 = SNUG_MIN(r1, next);
                    }
                    int64_t rows = r1 - r0;
                    if (converts) /* what load_item_run reads into staging */
                        staged_max = SNUG_MAX(staged_max, (size_t)rows * src_row);
                    if (pass == 1)
                        pl->items[n] = (load_item){i, s, r0, rows, converts ? n_conv : -1};
                    n_conv += converts;
                }
            }
        }
        if (pass == 0) {
            pl->items = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n * sizeof *pl->items, err);
            if (!pl->items) return snug_error_prefix(err, SNUG_NOMEM, "load plan: ");
            pl->n_items = n;
            pl->n_converting = n_conv;
        }
    }
    pl->n_slots = (int32_t)SNUG_MIN((int64_t)n_threads, pl->n_converting);
    pl->slot_bytes = pl->n_slots ? snug_round_up(staged_max, SNUG_MEM_ALIGN) : 0;
    return SNUG_OK;
}

/* Sizes the panel counters of the packed parameters: each panel's due
 * rows (those its sources fill: vocabulary padding rows stay zero, which
 * is their packed form too), and the packing slots: one panel of the
 * widest matrix each, as many as PACK_SHARE of the weights holds. */
static snug_status plan_panels(const snug_param_table *t, snug_dtype dtype, int32_t n_threads,
                               load_plan *pl, snug_error *err)
{
    int64_t n = 0;
    size_t scratch = 0;
    pl->panel0 = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)t->n_params * sizeof *pl->panel0, err);
    if (!pl->panel0) return snug_error_prefix(err, SNUG_NOMEM, "load plan: ");
    for (int32_t i = 0; i < t->n_params; i++) {
        pl->panel0[i] = n;
        const snug_param *p = &t->params[i];
        if (!p->packed) continue;
        for (int32_t s = 0; s < snug_param_parts(p); s++) {
            snug_param_part part = snug_param_source_part(p, s, p->dtype);
            n += (part.rows + SNUG_PANEL - 1) / SNUG_PANEL;
            scratch = SNUG_MAX(scratch, snug_linear_pack_scratch_bytes(part.dtype, p->cols));
        }
    }
    pl->n_panels = n;
    if (n == 0) return SNUG_OK;
    pl->pack_bytes = snug_round_up(scratch, SNUG_MEM_ALIGN);
    double share = PACK_SHARE * (double)snug_params_bytes(t, dtype) / (double)pl->pack_bytes;
    pl->n_pack_slots = (int32_t)SNUG_MAX(1.0, SNUG_MIN((double)n_threads, share));
    pl->arrived = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n * sizeof *pl->arrived, err);
    pl->due = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n * sizeof *pl->due, err);
    pl->deferred = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)n * sizeof *pl->deferred, err);
    pl->pack_busy = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)pl->n_pack_slots * sizeof *pl->pack_busy, err);
    if (!pl->arrived || !pl->due || !pl->deferred || !pl->pack_busy)
        return snug_error_prefix(err, SNUG_NOMEM, "load plan: ");
    for (int32_t i = 0; i < pl->n_pack_slots; i++) atomic_init(&pl->pack_busy[i], 0);
    atomic_init(&pl->n_deferred, 0);
    for (int64_t c = 0; c < n; c++) {
        atomic_init(&pl->arrived[c], 0);
        pl->due[c] = 0;
    }
    for (int32_t i = 0; i < t->n_params; i++) {
        const snug_param *p = &t->params[i];
        for (int32_t s = 0; p->packed && s < p->n_sources; s++) {
            snug_param_part part = snug_param_source_part(p, s, p->dtype);
            for (int64_t r = part.row; r < part.row + p->sources[s].n_rows; r++)
                pl->due[pl->panel0[i] + part.panel + r / SNUG_PANEL]++;
        }
    }
    return SNUG_OK;
}

/* The staging slot item it uses on thread `thread` (of n_threads): with no
 * more converting items than threads each has a slot of its own, else each
 * thread has one; either way the slot is below pl->n_slots and no two items
 * running at once share one. -1 for an item that does not convert. */
static int64_t slot_of(const load_plan *pl, const load_item *it, int32_t thread, int32_t n_threads)
{
    if (it->convert < 0) return -1;
    return pl->n_converting <= n_threads ? it->convert : thread;
}

/* Packs panel q of the part (of packed parameter i) through tmp. */
static void pack_panel(const snug_weights *w, int32_t i, const snug_param_part *part, int64_t q, void *tmp)
{
    const snug_param *p = &w->table.params[i];
    snug_linear_pack_panel(w->arena + w->offsets[i] + part->offset, part->dtype, part->rows, p->cols, q, tmp);
}

/* Counts rows [r0, r1) of the part of packed parameter i as arrived, and
 * packs each panel they complete in place through a free packing slot of
 * pack_area, or leaves it for snug_weights_load to pack when every slot is
 * busy. */
static void pack_arrived(const snug_weights *w, load_plan *pl, int32_t i, const snug_param_part *part,
                         int64_t r0, int64_t r1, unsigned char *pack_area)
{
    for (int64_t q = r0 / SNUG_PANEL; q * SNUG_PANEL < r1; q++) {
        int32_t rows = (int32_t)(SNUG_MIN(r1, (q + 1) * SNUG_PANEL) - SNUG_MAX(r0, q * SNUG_PANEL));
        int64_t c = pl->panel0[i] + part->panel + q;
        if (atomic_fetch_add(&pl->arrived[c], rows) + rows != pl->due[c]) continue;
        int32_t slot = 0;
        while (slot < pl->n_pack_slots && atomic_exchange(&pl->pack_busy[slot], 1)) slot++;
        if (slot == pl->n_pack_slots) {
            pl->deferred[atomic_fetch_add(&pl->n_deferred, 1)] = c;
            continue;
        }
        pack_panel(w, i, part, q, pack_area + (size_t)slot * pl->pack_bytes);
        atomic_store(&pl->pack_busy[slot], 0);
    }
}

/* Packs the panels left for later (every slot was busy) through slot 0. */
static void pack_deferred(const snug_weights *w, load_plan *pl, unsigned char *pack_area)
{
    for (int64_t d = 0; d < atomic_load(&pl->n_deferred); d++) {
        int64_t c = pl->deferred[d];
        int32_t i = 0;
        while (i + 1 < w->table.n_params && pl->panel0[i + 1] <= c) i++;
        while (!w->table.params[i].packed) i--; /* parameters without panels share the index */
        const snug_param *p = &w->table.params[i];
        int32_t s = snug_param_parts(p) - 1;
        snug_param_part part = snug_param_source_part(p, s, p->dtype);
        while (pl->panel0[i] + part.panel > c) part = snug_param_source_part(p, --s, p->dtype);
        pack_panel(w, i, &part, c - pl->panel0[i] - part.panel, pack_area);
    }
}

/* The staging share of the weights when every float matrix converts (a
 * quantizing load): with PACK_SHARE, the loader's peak within 1.01 of them. */
#define QUANT_STAGING_SHARE 0.005

/* The default staging of a quantizing load, where the sources are up to 4x
 * the bytes they end as: QUANT_STAGING_SHARE of the weights, at most
 * SNUG_LOAD_STAGING_BYTES, at least one source row per thread. */
static size_t quant_staging(const snug_param_table *t, const load_plan *pl, snug_dtype dtype, int32_t n_threads)
{
    size_t row = 0;
    for (int32_t i = 0; i < t->n_params; i++)
        for (int32_t s = 0; s < t->params[i].n_sources; s++)
            row = SNUG_MAX(row, row_bytes_of(ref_of(pl, i, s)->tensor->dtype, t->params[i].sources[s].n_cols));
    size_t share = (size_t)(QUANT_STAGING_SHARE * (double)snug_params_layout(t, dtype, NULL));
    return SNUG_MAX(row * (size_t)n_threads, SNUG_MIN(share, (size_t)SNUG_LOAD_STAGING_BYTES));
}

/* n_rows rows of n_cols elements of src (sdt, a float type) into dst at
 * dt: converted, or quantized to a block format a block at a time. */
static void convert_rows(unsigned char *dst, snug_dtype dt, const unsigned char *src, snug_dtype sdt,
                         int64_t n_rows, int64_t n_cols)
{
    if (!snug_dtype_is_quant(dt)) {
        snug_convert(dst, dt, src, sdt, (size_t)n_rows * (size_t)n_cols);
        return;
    }
    snug_qtype t = (snug_qtype)snug_dtype_qtype(dt);
    int64_t bs = snug_qtype_block(t);
    size_t bb = snug_qtype_block_bytes(t), es = snug_dtype_size(sdt);
    float block[256];
    for (int64_t i = 0; i < n_rows * (n_cols / bs); i++) {
        snug_convert(block, SNUG_DTYPE_F32, src + (size_t)(i * bs) * es, sdt, (size_t)bs);
        snug_quant_quantize(t, block, dst + (size_t)i * bb, bs);
    }
}

/* Reads one work item into place (through staging when it converts), then
 * packs the panels of a packed parameter that it completes. Returns the
 * bytes read in *read. */
static snug_status load_item_run(const snug_weights *w, load_plan *pl, const load_item *it,
                                 unsigned char *staging, unsigned char *pack_area, uint64_t *read,
                                 snug_error *err)
{
    const snug_param *p = &w->table.params[it->param];
    const snug_param_source *src = &p->sources[it->source];
    const source_ref *r = ref_of(pl, it->param, it->source);
    snug_dtype sdt = r->tensor->dtype;
    size_t seg = row_bytes_of(sdt, src->n_cols);     /* one row's slice in the file */
    uint64_t stride = row_bytes_of(sdt, src->cols);  /* one whole row in the file */
    uint64_t off = (uint64_t)(src->row_begin + it->row0) * stride + row_bytes_of(sdt, src->col_begin);
    snug_param_part part = snug_param_source_part(p, it->source, p->dtype);
    int64_t row = part.row + it->row0; /* the item's first row in its matrix */
    unsigned char *dst = w->arena + w->offsets[it->param] + part.offset +
                         (p->packed ? snug_linear_raw_offset(part.dtype, part.rows, p->cols, row)
                                    : (size_t)row * row_bytes_of(part.dtype, p->cols));
    bool same = sdt == part.dtype;
    unsigned char *into = same ? dst : staging;
    size_t n = (size_t)it->n_rows * seg;
    snug_status st;
    if (seg == stride) { /* whole rows: one read */
        st = snug_st_read(r->file, r->tensor, off, into, n, err);
    } else {
        st = snug_st_read_strided(r->file, r->tensor, off, seg, (size_t)it->n_rows, stride, into,
                                  seg, err);
    }
    if (st != SNUG_OK) return st;
    if (!same)
        convert_rows(dst, part.dtype, staging, sdt, it->n_rows, src->n_cols);
    atomic_fetch_add(&pl->written[it->param], (uint64_t)it->n_rows * row_bytes_of(part.dtype, p->cols));
    if (p->packed) pack_arrived(w, pl, it->param, &part, row, row + it->n_rows, pack_area);
    *read = n;
    return SNUG_OK;
}

/* Asks the kernel to start reading every byte range the items will read
 * (for a row-parallel slice, the span from its first to its last row). */
static void hint_reads(const snug_weights *w, const load_plan *pl)
{
    for (int64_t k = 0; k < pl->n_items; k++) {
        const load_item *it = &pl->items[k];
        const snug_param_source *src = &w->table.params[it->param].sources[it->source];
        const source_ref *r = ref_of(pl, it->param, it->source);
        snug_dtype sdt = r->tensor->dtype;
        uint64_t stride = row_bytes_of(sdt, src->cols);
        uint64_t first = (uint64_t)(src->row_begin + it->row0) * stride + row_bytes_of(sdt, src->col_begin);
        uint64_t span = (uint64_t)(it->n_rows - 1) * stride + row_bytes_of(sdt, src->n_cols);
        posix_fadvise(r->file->fd, (off_t)(r->file->data_start + r->tensor->begin + first),
                      (off_t)span, POSIX_FADV_WILLNEED);
    }
}

/* What the threads of a load share while they read. */
typedef struct items_job {
    const snug_weights *w;
    load_plan *pl;
    const snug_load_opts *o;
    snug_pool *pool;
    unsigned char *staging, *pack_area;
    uint64_t all;              /* in the units of placed: the rows' bytes as read, padding left out */
    atomic_int failed;
    _Atomic uint64_t total, placed;
    atomic_flag telling;
    snug_error first;          /* the first failure's */
} items_job;

/* One thread's part of run_items: items taken one at a time from the
 * pool's counter, each converting through the thread's staging slot. */
static void items_part(void *ctx, int32_t thread, int32_t n_threads)
{
    items_job *j = ctx;
    const load_plan *pl = j->pl;
    const snug_load_opts *o = j->o;
    for (int64_t k; (k = snug_pool_next(j->pool, pl->n_items)) >= 0;) {
        if (atomic_load(&j->failed)) break;
        snug_error e;
        uint64_t got = 0;
        const load_item *it = &pl->items[k];
        int64_t slot = slot_of(pl, it, thread, n_threads);
        unsigned char *stage = slot < 0 ? NULL : j->staging + (size_t)slot * pl->slot_bytes;
        if (load_item_run(j->w, j->pl, it, stage, j->pack_area, &got, &e) != SNUG_OK) {
            if (atomic_exchange(&j->failed, 1) == 0) j->first = e;
            break;
        }
        atomic_fetch_add(&j->total, got);
        const snug_param *p = &j->w->table.params[it->param];
        uint64_t dst = (uint64_t)it->n_rows * row_bytes_of(held_dtype(p, it->source), p->cols);
        uint64_t now = atomic_fetch_add(&j->placed, dst) + dst;
        if (o->on_progress && now < j->all && !atomic_flag_test_and_set(&j->telling)) {
            o->on_progress(o->progress_ctx, now, j->all);
            atomic_flag_clear(&j->telling);
        }
    }
}

/* Runs every item on the pool's threads (as many as o->n_threads), each
 * converting one through its slot of staging (pl->n_slots x pl->slot_bytes)
 * and packing panels through a free slot of pack_area (pl->n_pack_slots x
 * pl->pack_bytes); the first failure stops the rest. */
static snug_status run_items(const snug_weights *w, load_plan *pl, const snug_load_opts *o, snug_pool *pool,
                             unsigned char *staging, unsigned char *pack_area, uint64_t *bytes_read,
                             snug_error *err)
{
    items_job j = {.w = w, .pl = pl, .o = o, .pool = pool, .staging = staging, .pack_area = pack_area,
                   .telling = ATOMIC_FLAG_INIT};
    atomic_init(&j.failed, 0);
    atomic_init(&j.total, 0);
    atomic_init(&j.placed, 0);
    for (int32_t i = 0; i < w->table.n_params; i++) j.all += pl->expected[i];
    snug_pool_run(pool, items_part, &j);
    *bytes_read = atomic_load(&j.total);
    if (atomic_load(&j.failed)) {
        if (err) *err = j.first;
        return j.first.status;
    }
    uint64_t all = j.all;
    if (o->on_progress) o->on_progress(o->progress_ctx, all, all);
    for (int32_t i = 0; i < w->table.n_params; i++)
        if (atomic_load(&pl->written[i]) != pl->expected[i])
            return snug_errorf(err, SNUG_INTERNAL, "parameter %s received %llu bytes, not %llu",
                               w->table.params[i].name,
                               (unsigned long long)atomic_load(&pl->written[i]),
                               (unsigned long long)pl->expected[i]);
    return SNUG_OK;
}

static void plan_free(load_plan *pl)
{
    snug_mem_free(pl->refs);
    snug_mem_free(pl->expected);
    snug_mem_free((void *)pl->written);
    snug_mem_free(pl->items);
    snug_mem_free(pl->panel0);
    snug_mem_free((void *)pl->arrived);
    snug_mem_free(pl->due);
    snug_mem_free(pl->deferred);
    snug_mem_free((void *)pl->pack_busy);
}

void snug_weights_free(snug_weights *w)
{
    if (!w) return;
    snug_mem_free(w->arena);
    snug_mem_free(w->offsets);
    snug_params_free(&w->table);
    snug_mem_free(w);
}

void *snug_weights_data(const snug_weights *w, int32_t i)
{
    SNUG_ASSERT(i >= 0 && i < w->table.n_params);
    return w->arena + w->offsets[i];
}

int32_t snug_weights_find(const snug_weights *w, const char *name)
{
    for (int32_t i = 0; i < w->table.n_params; i++)
        if (strcmp(w->table.params[i].name, name) == 0) return i;
    return -1;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Adds 1 to each value of the norms held as offsets from 1 (plus_one,
 * held F32): what the forward pass multiplies by, 1 + w in float as
 * transformers computes it. */
static void add_ones(snug_weights *w)
{
    for (int32_t i = 0; i < w->table.n_params; i++) {
        const snug_param *p = &w->table.params[i];
        if (!p->plus_one) continue;
        SNUG_ASSERT(p->dtype == SNUG_DTYPE_F32 && p->n_dims == 1);
        float *v = (float *)(void *)(w->arena + w->offsets[i]);
        for (int64_t e = 0; e < p->rows; e++) v[e] += 1.0f;
    }
}

snug_status snug_weights_load(const snug_checkpoint *ck, const snug_load_opts *opts,
                              snug_weights **out, snug_load_stats *stats, snug_error *err)
{
    double t0 = seconds_now();
    size_t total0 = 0, rss0 = 0;
    snug_mem_status(SNUG_MEM_TOTAL, &total0, NULL, true);
    bool have_rss = snug_proc_rss_exact(&rss0, NULL) == SNUG_OK;

    snug_load_opts o = *opts;
    if (o.tp == 0) o.tp = 1;
    if (o.dtype == SNUG_DTYPE_NONE) o.dtype = snug_checkpoint_weight_dtype(ck);
    if (o.staging_bytes == 0) o.staging_bytes = SNUG_LOAD_STAGING_BYTES;
    if (o.n_threads <= 0) o.n_threads = snug_cpu_count();
    if (o.item_bytes == 0) o.item_bytes = SNUG_LOAD_ITEM_BYTES;
    if (!snug_dtype_is_weight(o.dtype))
        return snug_errorf(err, SNUG_INVALID, "weights load as bf16, f16 or f32");

    load_plan pl = {0};
    snug_pool *pool = NULL;          /* o.n_threads threads, for this load */
    unsigned char *staging = NULL;   /* pl.n_slots x pl.slot_bytes */
    unsigned char *pack_area = NULL; /* pl.n_pack_slots x pl.pack_bytes */
    snug_weights *w = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *w, err);
    if (!w) return snug_error_prefix(err, SNUG_NOMEM, "%s: ", ck->dir);
    w->dtype = o.dtype;
    snug_status st = snug_params_build(&ck->config, o.tp, o.rank, &w->table, err);
    if (st != SNUG_OK) goto done;
    size_t np = (size_t)w->table.n_params;
    pl.refs = snug_mem_alloc(SNUG_MEM_OTHER, np * SNUG_PARAM_MAX_SOURCES * sizeof *pl.refs, err);
    pl.expected = snug_mem_alloc(SNUG_MEM_OTHER, np * sizeof *pl.expected, err);
    pl.written = snug_mem_alloc(SNUG_MEM_OTHER, np * sizeof *pl.written, err);
    w->offsets = snug_mem_alloc(SNUG_MEM_OTHER, np * sizeof *w->offsets, err);
    if (!pl.refs || !pl.expected || !pl.written || !w->offsets) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: ", ck->dir);
        goto done;
    }
    st = check_checkpoint(ck, &w->table, &pl, err);
    /* each parameter's type: the weights', or the block format its sources
     * hold (kept as it is, slices of whole blocks) */
    if (st == SNUG_OK && o.quant != SNUG_DTYPE_NONE && !snug_qtype_quantizable(snug_dtype_qtype(o.quant)))
        st = snug_errorf(err, SNUG_INVALID, "%s: weights cannot be quantized to %s (Q8_0, Q4_0, Q5_0, Q4_K, Q5_K and Q6_K can)",
                         ck->dir, snug_dtype_name(o.quant));
    if (st == SNUG_OK)
        st = snug_params_set_dtypes(&w->table, o.dtype, o.quant, snug_checkpoint_tensor_dtype, (void *)ck, err);
    if (st == SNUG_OK && opts->staging_bytes == 0 && o.quant != SNUG_DTYPE_NONE)
        o.staging_bytes = quant_staging(&w->table, &pl, o.dtype, o.n_threads);
    size_t staging_each = o.staging_bytes / (size_t)o.n_threads;
    if (st == SNUG_OK) st = check_coverage(&w->table, &pl, err);
    if (st == SNUG_OK) st = plan_items(&w->table, o.item_bytes, staging_each, o.n_threads, &pl, err);
    if (st == SNUG_OK) st = plan_panels(&w->table, o.dtype, o.n_threads, &pl, err);
    if (st != SNUG_OK) goto done;

    st = snug_pool_create(o.n_threads, 0, &pool, err);
    if (st != SNUG_OK) {
        snug_error_prefix(err, st, "%s: the load's threads: ", ck->dir);
        goto done;
    }
    /* every parameter at its final shape, resident (on the load's threads),
     * before any read */
    w->arena_bytes = snug_params_layout(&w->table, o.dtype, w->offsets);
    w->arena = snug_populate_alloc(SNUG_MEM_WEIGHTS, (size_t)w->arena_bytes, pool, err);
    if (!w->arena) {
        st = snug_error_prefix(err, SNUG_NOMEM, "%s: weights of rank %d: ", ck->dir, o.rank);
        goto done;
    }
    if (pl.n_slots > 0) {
        staging = snug_mem_alloc(SNUG_MEM_STAGING, (size_t)pl.n_slots * pl.slot_bytes, err);
        if (!staging) {
            st = snug_error_prefix(err, SNUG_NOMEM, "%s: staging: ", ck->dir);
            goto done;
        }
    }
    if (pl.pack_bytes > 0) {
        pack_area = snug_mem_alloc(SNUG_MEM_STAGING, (size_t)pl.n_pack_slots * pl.pack_bytes, err);
        if (!pack_area) {
            st = snug_error_prefix(err, SNUG_NOMEM, "%s: packing scratch: ", ck->dir);
            goto done;
        }
    }
    uint64_t bytes_read = 0;
    hint_reads(w, &pl);
    st = run_items(w, &pl, &o, pool, staging, pack_area, &bytes_read, err);
    if (st != SNUG_OK) goto done;
    pack_deferred(w, &pl, pack_area);
    add_ones(w);
    if (stats) {
        size_t peak = 0, rss1 = 0;
        snug_mem_status(SNUG_MEM_TOTAL, NULL, &peak, false);
        memset(stats, 0, sizeof *stats);
        stats->weight_bytes = snug_params_bytes(&w->table, o.dtype);
        stats->arena_bytes = w->arena_bytes;
        stats->weights_held = snug_mem_block_bytes(w->arena);
        stats->load_peak_bytes = peak - total0;
        stats->staging_bytes = (size_t)pl.n_slots * pl.slot_bytes;
        stats->staging_held = staging ? snug_mem_block_bytes(staging) : 0;
        stats->pack_bytes = (size_t)pl.n_pack_slots * pl.pack_bytes;
        stats->pack_held = pack_area ? snug_mem_block_bytes(pack_area) : 0;
        stats->hwm_growth_bytes = -1;
        if (have_rss && snug_proc_rss_exact(&rss1, NULL) == SNUG_OK)
            stats->hwm_growth_bytes = (int64_t)rss1 - (int64_t)rss0;
        stats->bytes_read = bytes_read;
        stats->seconds = seconds_now() - t0;
    }
    *out = w;
    w = NULL;
done:
    snug_mem_free(pack_area);
    snug_mem_free(staging);
    snug_pool_free(pool);
    plan_free(&pl);
    snug_weights_free(w);
    return st;
}
