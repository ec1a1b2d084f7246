/*
 * params.h: the parameter table of a Llama-family model at a tensor-parallel
 * size and rank, and all of snug's shard arithmetic.
 *
 * A parameter is what a rank holds in memory at its final shape; each is
 * filled from one or more checkpoint tensors (sources), each read only in
 * the slice this rank needs:
 *   embed_tokens, lm_head   vocab-parallel: rows split, the vocabulary padded
 *                           up to a multiple of tp with zero rows;
 *   qkv (+ qkv_bias)        column-parallel, fused from q_proj, k_proj,
 *                           v_proj: this rank's query heads, then its KV
 *                           heads (split when tp divides them, one head
 *                           replicated across tp / n_kv ranks when they
 *                           divide tp);
 *   o_proj, down_proj       row-parallel: the input columns are split;
 *   gate_up                 column-parallel, fused from gate_proj, up_proj;
 *   norms, o_proj bias      replicated.
 * The matrices (and a tied embedding, which is also the lm_head) are held
 * in the matmul's panel layout (kernels/linear.h).
 * `snug inspect --tp` and the loader both size memory from this table.
 */
#ifndef SNUG_PARAMS_H
#define SNUG_PARAMS_H

#include "base/common.h"
#include "formats/config.h"

enum { SNUG_PARAM_MAX_SOURCES = 3, SNUG_PARAM_NAME_BYTES = 80 };

typedef enum snug_shard_kind {
    SNUG_SHARD_REPLICATED = 0,
    SNUG_SHARD_COLUMN,
    SNUG_SHARD_ROW,
    SNUG_SHARD_VOCAB
} snug_shard_kind;

/* One checkpoint tensor, the part of it this rank reads, and where that
 * lands in the parameter. For a 1-D tensor cols = 1. */
typedef struct snug_param_source {
    char tensor[SNUG_PARAM_NAME_BYTES]; /* checkpoint name */
    int32_t n_dims;                     /* 1 or 2, as in the checkpoint */
    int64_t rows, cols;                 /* the whole checkpoint tensor */
    int64_t row_begin, n_rows;          /* rows this rank reads */
    int64_t col_begin, n_cols;          /* columns this rank reads */
    int64_t dst_row;                    /* parameter row where the first lands */
    snug_dtype dtype;                   /* the format its rows are held in (set with the
                                         * parameter's; SNUG_DTYPE_NONE until then) */
} snug_param_source;

typedef struct snug_param {
    char name[SNUG_PARAM_NAME_BYTES];   /* "layers.3.qkv", "embed_tokens", ... */
    snug_shard_kind kind;
    int32_t layer;                      /* -1 outside the layers */
    int32_t n_dims;                     /* 1 or 2 */
    int64_t rows, cols;                 /* per-rank shape; cols = 1 when 1-D */
    bool packed;                        /* a matrix the matmul reads: held in the panel
                                         * layout of kernels/linear.h (rows = m, cols = k) */
    snug_dtype dtype;                   /* held at: SNUG_DTYPE_NONE until set (the sizes
                                         * then use the weights' type they are given); the
                                         * first source's format when split */
    bool plus_one;                      /* an RMSNorm weight held as w where the norm multiplies
                                         * by 1 + w (config norm_plus_one): held in F32, and the
                                         * loader adds the 1 (snug_param_add_one) */
    bool split;                         /* its sources are held in different formats: each
                                         * source's rows are a matrix of their own (a part),
                                         * the parts one after another (snug_param_part) */
    int32_t n_sources;
    snug_param_source sources[SNUG_PARAM_MAX_SOURCES];
} snug_param;

typedef struct snug_param_table {
    int32_t tp, rank;
    int32_t n_q_heads;       /* query heads on this rank */
    int32_t n_kv_heads;      /* KV heads on this rank */
    int32_t kv_head_begin;   /* first KV head of the model this rank holds */
    int32_t intermediate;    /* MLP width on this rank */
    int32_t vocab_rows;      /* embedding and lm_head rows on this rank (padded) */
    int32_t n_params;
    snug_param *params;      /* category other */
} snug_param_table;

/* The one place shards are computed: the part of a dimension of size dim
 * that rank `rank` of `world` holds. Without padding, world must divide dim
 * (otherwise SNUG_INVALID naming `what` and the sizes); with padding, every
 * rank holds ceil(dim / world) (*held) of which *len are real, starting at
 * *begin (the last ranks may hold fewer real rows, or none). */
snug_status snug_shard_range(int64_t dim, int32_t rank, int32_t world, bool pad,
                             const char *what, int64_t *begin, int64_t *len, int64_t *held,
                             snug_error *err);

/* Checks that a model can be split tp ways: tp divides the query heads and
 * the MLP width, and the KV heads are split or replicated evenly. The
 * message of a failure names the tp values (up to 64) that would work. */
snug_status snug_params_check_tp(const snug_model_config *cfg, int32_t tp, snug_error *err);

/* Builds the parameter table of rank `rank` of `tp`. Free with
 * snug_params_free. */
snug_status snug_params_build(const snug_model_config *cfg, int32_t tp, int32_t rank,
                              snug_param_table *out, snug_error *err);

/* One tensor of a Hugging Face checkpoint, as the model expects it. */
typedef struct snug_tensor_spec {
    char name[SNUG_PARAM_NAME_BYTES];
    int32_t n_dims;         /* 1 or 2 */
    int64_t rows, cols;     /* cols = 1 when 1-D */
} snug_tensor_spec;

/* The tensors a checkpoint of cfg holds (the sources of the unsharded
 * table, in parameter order) into *specs, a new block of category other the
 * caller frees with snug_mem_free, and their number into *n. */
snug_status snug_params_checkpoint_tensors(const snug_model_config *cfg, snug_tensor_spec **specs,
                                           int32_t *n, snug_error *err);

/* Frees the table's storage; the table may be zero-filled. */
void snug_params_free(snug_param_table *table);

/* Whether checkpoint tensor `name` (a Hugging Face name) is an RMSNorm
 * weight: its name ends in "norm.weight" (input_layernorm, q_norm, the
 * final norm, ...). Pure. */
bool snug_params_is_norm(const char *name);

/* Elements of one parameter on its rank. */
uint64_t snug_param_numel(const snug_param *p);

/* Bytes one parameter takes at its dtype, or at dt when it has none set:
 * rows x cols elements (rows of cols / block blocks for a block format), in
 * the panel layout when packed (snug_linear_bytes). */
uint64_t snug_param_bytes(const snug_param *p, snug_dtype dt);

/* Where the rows of source s of a packed parameter p are held: a matrix
 * (kernels/linear.h) of format dtype with `rows` rows of p->cols, at
 * `offset` bytes from p's start, whose panels are p's panels [panel, panel
 * + its panels), the source's first row being its row `row`. For one
 * format that matrix is the whole parameter (offset 0, panel 0, row the
 * source's dst_row); split, each source is a part of its own (its rows,
 * row 0), each part 64-byte aligned after the one before. dt is the
 * format when p has none set. Pure. */
typedef struct snug_param_part {
    snug_dtype dtype;
    int64_t rows, row, panel;
    uint64_t offset;
} snug_param_part;
snug_param_part snug_param_source_part(const snug_param *p, int32_t s, snug_dtype dt);

/* The matrices a packed parameter is held as: 1, or its sources' count
 * when split (part i is source i's). Pure. */
int32_t snug_param_parts(const snug_param *p);

/* Bytes of every parameter of the table, at element type dt. */
uint64_t snug_params_bytes(const snug_param_table *table, snug_dtype dt);

/* The element type of each source tensor of a parameter: the checkpoint's
 * (snug_checkpoint_find), SNUG_DTYPE_NONE when absent. */
typedef snug_dtype (*snug_source_dtype_fn)(void *ctx, const char *tensor);

/* Sets every parameter's dtype from its sources: each source is held in
 * its block format when it has one (base/quant.h: as the file holds it,
 * never converted); a float matrix (2-D) is quantized while loading to
 * `quant` when it is a block format (SNUG_DTYPE_NONE: not), or where its
 * slice's rows are not whole blocks of it to the 32-element format closest
 * in bits (Q4_K: Q5_0, Q6_K: Q8_0), or where they are not whole blocks of
 * 32 either kept at wdt; everything else is held at wdt. A matrix whose
 * sources end up in different formats (Q4_K_M's Q6_K v_proj beside Q4_K
 * q_proj and k_proj) is split, a part per source. A norm or bias of a
 * block format is refused naming the tensor, and so is a slice that cuts a
 * block (as snug_param_held_bytes refuses it). */
snug_status snug_params_set_dtypes(snug_param_table *table, snug_dtype wdt, snug_dtype quant,
                                   snug_source_dtype_fn source_dtype, void *ctx, snug_error *err);

/* Bytes parameter p takes when held from its sources as
 * snug_params_set_dtypes(dt, quant) would set it: at dt, or, when a source
 * is a block format (base/quant.h), each source's slice at its own format,
 * as the file holds it (block formats are kept as they are, never
 * converted), float matrices at what `quant` gives them. A slice that
 * would cut a block is an error naming the tensor, its format and the
 * tensor-parallel size. */
snug_status snug_param_held_bytes(const snug_param *p, snug_dtype dt, snug_dtype quant,
                                  snug_source_dtype_fn source_dtype, void *ctx, int32_t tp, uint64_t *bytes,
                                  snug_error *err);

/* Where each parameter of the table starts in one allocation holding all
 * of them at element type dt: offsets[i] (each 64-byte aligned, offsets may
 * be NULL) and the allocation's size, returned. */
uint64_t snug_params_layout(const snug_param_table *table, snug_dtype dt, uint64_t *offsets);

/* The model's parameter count: the elements of the unsharded table (tied
 * embeddings counted once). */
snug_status snug_params_count(const snug_model_config *cfg, uint64_t *n, snug_error *err);

/* Bytes of weights each rank of tp holds at element type dt, for every rank,
 * into bytes[0..tp-1]. */
snug_status snug_params_rank_bytes(const snug_model_config *cfg, int32_t tp, snug_dtype dt,
                                   uint64_t *bytes, snug_error *err);

/* As snug_params_rank_bytes, each parameter held from the sources
 * source_dtype (with ctx) says the checkpoint holds (snug_param_held_bytes:
 * block formats as they are, float matrices quantized to `quant`);
 * source_dtype NULL: every one at dt (quant must be SNUG_DTYPE_NONE). */
snug_status snug_params_rank_held_bytes(const snug_model_config *cfg, int32_t tp, snug_dtype dt, snug_dtype quant,
                                        snug_source_dtype_fn source_dtype, void *ctx, uint64_t *bytes,
                                        snug_error *err);

#endif /* SNUG_PARAMS_H */
