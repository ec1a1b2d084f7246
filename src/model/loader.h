/*
 * loader.h: loads one tensor-parallel rank's weights from a checkpoint, at
 * exactly their size.
 *
 * Every parameter of the rank's table (params.h) is carved from one
 * allocation of category weights, made (and made resident) before anything
 * is read. Each checkpoint tensor is then read only in the slice this rank
 * holds, straight from the file into its final place: a column-parallel
 * slice is a block of whole rows (one read), a row-parallel slice a read per
 * row. The matrices are then packed into the matmul's panel layout
 * (kernels/linear.h) in their own bytes: their rows land row-major inside
 * their panel's bytes, and the read that completes a panel packs it in
 * place through a slot of one panel (category staging; slots within 0.4% of
 * the weights, snug_load_stats.pack_bytes; a panel completed while all are
 * busy is packed after the reads). Only a dtype conversion goes through staging
 * memory (category staging, freed at the end), sized to what the conversions need: one slot
 * per thread that can convert at once (min(threads, converting reads)), each
 * the largest converting read rounded up to 64 bytes; a read is at most one
 * thread's share of opts->staging_bytes, so the staging is never more than
 * that (plus the rounding). Reads run on a pool of opts->n_threads threads
 * made for the load, which also make the weights' block resident. The
 * checkpoint is checked against the table first: missing tensors, tensors
 * the model does not use, wrong shapes and dtypes that are not weight types
 * are errors that list or name them; every byte of every parameter is
 * written exactly once (checked when planning, and counted while loading).
 * A failure anywhere frees everything: the counters return to where they
 * were.
 */
#ifndef SNUG_LOADER_H
#define SNUG_LOADER_H

#include "formats/checkpoint.h"
#include "base/common.h"
#include "params.h"

enum { SNUG_LOAD_STAGING_BYTES = 64 << 20, SNUG_LOAD_ITEM_BYTES = 8 << 20 };

typedef struct snug_load_opts {
    int32_t tp, rank;          /* tp 0 counts as 1 */
    snug_dtype dtype;          /* SNUG_DTYPE_NONE: snug_checkpoint_weight_dtype */
    snug_dtype quant;          /* a block format (Q8_0, Q4_0, Q4_K, Q6_K) the float
                                * matrices are quantized to while loading, each
                                * rank's slices through the staging, straight to
                                * their final size (snug_params_set_dtypes says
                                * which and the fallbacks); SNUG_DTYPE_NONE: none */
    size_t staging_bytes;      /* most staging for conversions, all threads together
                                * (each thread's share bounds one read); 0:
                                * SNUG_LOAD_STAGING_BYTES */
    int32_t n_threads;         /* 0: the CPUs the process may use (snug_cpu_count) */
    size_t item_bytes;         /* most bytes one read moves; 0: SNUG_LOAD_ITEM_BYTES */
    /* Called as reads finish, from the loading threads one at a time (a
     * thread that finds another in it goes on), with the weights' bytes in
     * place so far and in all; once more with done == total at the end of a
     * load that succeeded. NULL: none. For a progress bar. */
    void (*on_progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
} snug_load_opts;

typedef struct snug_load_stats {
    uint64_t weight_bytes;     /* the parameters' bytes: what inspect predicts */
    uint64_t arena_bytes;      /* the block they are laid out in (weight_bytes and any
                                * alignment between parameters) */
    size_t weights_held;       /* what the allocator charges for them */
    size_t load_peak_bytes;    /* peak of the device total during the load, above its start */
    size_t staging_bytes;      /* staging the load allocated: slots x bytes each, as planned
                                * (see snug_weights_load); 0 when nothing converts */
    size_t staging_held;       /* what the allocator charged for it (category staging) */
    size_t pack_bytes;         /* the packing scratch: slots of one panel of the widest
                                * matrix, as many as 0.4% of the weights holds (at least
                                * one, at most the threads); 0 without matrices */
    size_t pack_held;          /* what the allocator charged for it (category staging) */
    int64_t hwm_growth_bytes;  /* the resident set at the end of the reads, read to the
                                * page (nothing is freed before: the load's peak), minus
                                * that at the start; -1 where it cannot be read */
    uint64_t bytes_read;       /* bytes read from checkpoint files */
    double seconds;
} snug_load_stats;

typedef struct snug_weights {
    snug_param_table table;
    snug_dtype dtype;          /* the weights' type; parameters from block formats keep theirs */
    unsigned char *arena;      /* every parameter, category weights */
    uint64_t *offsets;         /* [n_params] each parameter's place in the arena */
    uint64_t arena_bytes;
} snug_weights;

/* Loads rank opts->rank of opts->tp from ck. On success *out owns the
 * weights (free with snug_weights_free) and *stats (may be NULL) says what
 * the load took. To measure it, the load resets the peak of the device
 * total (snug_mem_status) and the process high-water mark at its start.
 * Vocabulary padding rows are zero. Fails with SNUG_FORMAT (the checkpoint does not match the
 * model: the message lists what is missing or unused, or names the tensor,
 * expected and actual shape), SNUG_UNSUPPORTED (a dtype that is not a
 * weight type), SNUG_IO, SNUG_NOMEM or SNUG_INVALID (bad options); then
 * nothing stays allocated. */
snug_status snug_weights_load(const snug_checkpoint *ck, const snug_load_opts *opts,
                              snug_weights **out, snug_load_stats *stats, snug_error *err);

/* Frees the weights; NULL is ignored. Every parameter pointer becomes
 * invalid. */
void snug_weights_free(snug_weights *w);

/* The data of parameter i: rows x cols elements of its dtype
 * (table.params[i].dtype: w->dtype, or the block format its checkpoint
 * tensors hold), row-major, or in the panel layout when packed. */
void *snug_weights_data(const snug_weights *w, int32_t i);

/* The index of the parameter called name ("layers.0.qkv"); -1 if none. */
int32_t snug_weights_find(const snug_weights *w, const char *name);

#endif /* SNUG_LOADER_H */
