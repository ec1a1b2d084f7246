/*
 * test_params.c: the parameter table and shard arithmetic: the parameter
 * counts of real models, per-rank bytes, every shard kind's coverage of its
 * checkpoint tensors across ranks (each element read by exactly the ranks
 * that should), GQA split and replication, vocabulary padding, tied
 * embeddings and Qwen2 biases, and the messages for sizes that do not split.
 */
#include "test.h"

#include "formats/config.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "convert/mkmodel.h"
#include "model/params.h"

/* The parameter count written out independently of the table. */
static uint64_t formula_n_params(const snug_model_config *c)
{
    uint64_t h = (uint64_t)c->hidden_size, q = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t kv = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim, ff = (uint64_t)c->intermediate_size;
    uint64_t layer = 2 * h + (q + 2 * kv) * h + q * h + 3 * ff * h + (c->qkv_bias ? q + 2 * kv : 0) +
                     (c->o_bias ? h : 0);
    return (uint64_t)c->vocab_size * h * (c->tie_word_embeddings ? 1 : 2) + layer * (uint64_t)c->n_layers + h;
}

static void test_shard_range(void)
{
    snug_error err = {0};
    int64_t b, n, held;
    CHECK_OK(snug_shard_range(100, 3, 4, false, "x", &b, &n, &held, &err), &err);
    CHECK(b == 75 && n == 25 && held == 25, "even split: %lld +%lld", (long long)b, (long long)n);
    CHECK_FAILS(snug_shard_range(10, 1, 4, false, "intermediate_size", &b, &n, NULL, &err), &err,
                SNUG_INVALID, "intermediate_size of 10 does not split 4 ways");
    int64_t want[4][2] = {{0, 3}, {3, 3}, {6, 3}, {9, 1}};
    for (int r = 0; r < 4; r++) {
        CHECK_OK(snug_shard_range(10, r, 4, true, "vocab", &b, &n, &held, &err), &err);
        CHECK(b == want[r][0] && n == want[r][1] && held == 3, "padded rank %d: %lld +%lld of %lld",
              r, (long long)b, (long long)n, (long long)held);
    }
    CHECK_OK(snug_shard_range(3, 5, 8, true, "vocab", &b, &n, &held, &err), &err);
    CHECK(b == 3 && n == 0 && held == 1, "a rank past the end holds only padding");
    CHECK_FAILS(snug_shard_range(10, 4, 4, false, "x", &b, &n, NULL, &err), &err, SNUG_INVALID,
                "rank 4 of 4 is not a valid shard");
}

static void test_preset_counts(void)
{
    static const struct {
        const char *name;
        uint64_t n;
    } known[] = {{"tiny", 260032ull},           {"llama-3.2-1b", 1235814400ull},
                 {"llama-3-8b", 8030261248ull}, {"tinyllama-1.1b", 1100048384ull},
                 {"qwen2-0.5b", 494032768ull},  {"mistral-7b", 7248023552ull}};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(known); i++) {
        snug_model_config c;
        snug_error err = {0};
        CHECK_OK(snug_preset_config(known[i].name, &c, &err), &err);
        uint64_t n = 0;
        CHECK_OK(snug_params_count(&c, &n, &err), &err);
        CHECK(n == known[i].n, "%s: %llu parameters, known %llu", known[i].name,
              (unsigned long long)n, (unsigned long long)known[i].n);
        CHECK(n == formula_n_params(&c), "%s: the table agrees with the formula", known[i].name);
    }
    snug_model_config c;
    snug_error err = {0};
    CHECK_FAILS(snug_preset_config("gpt-5", &c, &err), &err, SNUG_INVALID, "presets: tiny");
}

static void test_llama3_8b_rank_bytes(void)
{
    snug_model_config c;
    snug_error err = {0};
    CHECK_OK(snug_preset_config("llama-3-8b", &c, &err), &err);
    uint64_t bytes[8];
    CHECK_OK(snug_params_rank_bytes(&c, 8, SNUG_DTYPE_BF16, bytes, &err), &err);
    for (int r = 0; r < 8; r++)
        CHECK(bytes[r] == 2008031232ull, "rank %d holds %llu bytes, want 2,008,031,232", r,
              (unsigned long long)bytes[r]);
    CHECK_OK(snug_params_rank_bytes(&c, 1, SNUG_DTYPE_BF16, bytes, &err), &err);
    CHECK(bytes[0] == 16060522496ull, "unsharded: %llu", (unsigned long long)bytes[0]);
    CHECK_OK(snug_params_rank_bytes(&c, 1, SNUG_DTYPE_F32, bytes, &err), &err);
    CHECK(bytes[0] == 2 * 16060522496ull, "as f32 twice that");
}

/* Checks, for every parameter at every rank, that its sources fill it
 * exactly, lie inside their tensors, and (over all ranks) read each element
 * of each checkpoint tensor the expected number of times. */
static void check_coverage(const snug_model_config *c, int tp)
{
    snug_error err = {0};
    snug_param_table t0;
    CHECK_OK(snug_params_build(c, tp, 0, &t0, &err), &err);
    int n_params = t0.n_params;
    /* per source: counts of reads of each row, and each column, summed over ranks */
    typedef struct {
        int64_t rows, cols;
        int *row_reads, *col_reads;
    } cover;
    cover *cv = calloc((size_t)n_params * SNUG_PARAM_MAX_SOURCES, sizeof *cv);
    int bad = 0;
    for (int r = 0; r < tp; r++) {
        snug_param_table t;
        CHECK_OK(snug_params_build(c, tp, r, &t, &err), &err);
        CHECK(t.n_params == n_params, "same parameters on every rank");
        for (int i = 0; i < t.n_params && i < n_params; i++) {
            const snug_param *p = &t.params[i];
            int64_t filled = 0;
            for (int s = 0; s < p->n_sources; s++) {
                const snug_param_source *src = &p->sources[s];
                cover *k = &cv[i * SNUG_PARAM_MAX_SOURCES + s];
                if (!k->row_reads) {
                    k->rows = src->rows, k->cols = src->cols;
                    k->row_reads = calloc((size_t)src->rows, sizeof(int));
                    k->col_reads = calloc((size_t)src->cols, sizeof(int));
                }
                if (src->row_begin < 0 || src->row_begin + src->n_rows > src->rows ||
                    src->col_begin < 0 || src->col_begin + src->n_cols > src->cols) bad++;
                if (src->dst_row + src->n_rows > p->rows || src->n_cols != p->cols) bad++;
                for (int64_t x = 0; x < src->n_rows; x++) k->row_reads[src->row_begin + x]++;
                for (int64_t x = 0; x < src->n_cols; x++) k->col_reads[src->col_begin + x]++;
                filled += src->n_rows;
            }
            /* vocab-parallel parameters may have padding rows; others are filled exactly */
            if (p->kind != SNUG_SHARD_VOCAB && filled != p->rows) bad++;
            if (p->kind == SNUG_SHARD_VOCAB && filled > p->rows) bad++;
        }
        snug_params_free(&t);
    }
    CHECK(bad == 0, "tp %d: %d sources out of bounds or not filling their parameter", tp, bad);
    int kv_rep = c->n_kv_heads % tp == 0 ? 1 : tp / c->n_kv_heads;
    for (int i = 0; i < n_params; i++) {
        const snug_param *p = &t0.params[i];
        for (int s = 0; s < p->n_sources; s++) {
            cover *k = &cv[i * SNUG_PARAM_MAX_SOURCES + s];
            bool is_kv = strstr(p->sources[s].tensor, "k_proj") || strstr(p->sources[s].tensor, "v_proj");
            int want_rows, want_cols;
            switch (p->kind) {
            case SNUG_SHARD_REPLICATED: want_rows = tp, want_cols = tp; break;
            case SNUG_SHARD_ROW: want_rows = tp, want_cols = 1; break;
            default: /* column or vocab: rows split, every column read */
                want_rows = is_kv ? kv_rep : 1, want_cols = tp;
                break;
            }
            int wrong = 0;
            for (int64_t x = 0; x < k->rows; x++) wrong += k->row_reads[x] != want_rows;
            for (int64_t x = 0; x < k->cols; x++) wrong += k->col_reads[x] != want_cols;
            CHECK(wrong == 0, "tp %d: %s read with the wrong multiplicity (%d rows/cols off)", tp,
                  p->sources[s].tensor, wrong);
            free(k->row_reads);
            free(k->col_reads);
        }
    }
    free(cv);
    snug_params_free(&t0);
}

static snug_model_config small_config(int32_t heads, int32_t kv, int32_t vocab, bool tied, bool bias)
{
    snug_model_config c;
    memset(&c, 0, sizeof c);
    c.arch = bias ? SNUG_ARCH_QWEN2 : SNUG_ARCH_LLAMA;
    snprintf(c.architecture, sizeof c.architecture, "%s", bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM");
    c.hidden_size = 64, c.intermediate_size = 96, c.n_layers = 2, c.n_heads = heads;
    c.n_kv_heads = kv, c.head_dim = 64 / heads, c.vocab_size = vocab;
    c.max_position_embeddings = 128, c.rms_norm_eps = 1e-5, c.rope_theta = 10000;
    c.rope_scaling.factor = 1, c.tie_word_embeddings = tied, c.qkv_bias = bias;
    c.bos_token_id = -1;
    return c;
}

static void test_coverage_every_kind(void)
{
    int tps[] = {1, 2, 4, 8};
    snug_model_config gqa = small_config(8, 2, 1001, false, false);   /* split at 2, replicated at 4, 8 */
    snug_model_config qwen = small_config(8, 8, 999, true, true);     /* biases, tied, padded vocab */
    for (int i = 0; i < 4; i++) {
        check_coverage(&gqa, tps[i]);
        check_coverage(&qwen, tps[i]);
    }
    snug_model_config c;
    snug_error err = {0};
    CHECK_OK(snug_preset_config("llama-3-8b", &c, &err), &err);
    check_coverage(&c, 16); /* 8 KV heads over 16 ranks: each head on two ranks */
}

static void test_gqa_replication(void)
{
    snug_model_config c = small_config(8, 2, 1000, false, false);
    snug_error err = {0};
    for (int tp = 4; tp <= 8; tp *= 2) {
        for (int r = 0; r < tp; r++) {
            snug_param_table t;
            CHECK_OK(snug_params_build(&c, tp, r, &t, &err), &err);
            CHECK(t.n_kv_heads == 1 && t.kv_head_begin == r / (tp / 2) && t.n_q_heads == 8 / tp,
                  "tp %d rank %d: kv head %d (%d heads), %d query heads", tp, r, t.kv_head_begin,
                  t.n_kv_heads, t.n_q_heads);
            const snug_param *qkv = &t.params[2]; /* embed, input_layernorm, qkv */
            CHECK(strcmp(qkv->name, "layers.0.qkv") == 0 && qkv->rows == (8 / tp + 2) * 8,
                  "qkv holds this rank's query heads and one K and one V head: %s %lld rows",
                  qkv->name, (long long)qkv->rows);
            snug_params_free(&t);
        }
    }
    snug_param_table t;
    CHECK_OK(snug_params_build(&c, 2, 1, &t, &err), &err);
    CHECK(t.n_kv_heads == 1 && t.kv_head_begin == 1, "tp 2 splits the 2 KV heads");
    snug_params_free(&t);
}

static void test_vocab_padding_and_tying(void)
{
    snug_model_config c = small_config(8, 8, 1001, false, false);
    snug_error err = {0};
    snug_param_table t;
    CHECK_OK(snug_params_build(&c, 4, 3, &t, &err), &err);
    CHECK(t.vocab_rows == 251, "1001 rows padded to 1004 over 4 ranks: %d each", t.vocab_rows);
    const snug_param *emb = &t.params[0], *head = &t.params[t.n_params - 1];
    CHECK(strcmp(emb->name, "embed_tokens") == 0 && emb->rows == 251 && emb->sources[0].row_begin == 753 &&
          emb->sources[0].n_rows == 248, "last rank reads rows 753..1000 and pads 3");
    CHECK(strcmp(head->name, "lm_head") == 0 && head->kind == SNUG_SHARD_VOCAB, "untied lm_head");
    snug_params_free(&t);
    c.tie_word_embeddings = true;
    CHECK_OK(snug_params_build(&c, 4, 3, &t, &err), &err);
    CHECK(strcmp(t.params[t.n_params - 1].name, "norm") == 0, "tied: no lm_head at all");
    snug_params_free(&t);
}

static void test_qwen2_biases(void)
{
    snug_model_config c;
    snug_error err = {0};
    CHECK_OK(snug_preset_config("qwen2-0.5b", &c, &err), &err);
    snug_param_table t;
    CHECK_OK(snug_params_build(&c, 2, 1, &t, &err), &err);
    const snug_param *b = &t.params[3];
    CHECK(strcmp(b->name, "layers.0.qkv_bias") == 0 && b->n_dims == 1 && b->rows == (7 + 2) * 64 &&
          b->n_sources == 3, "fused bias %s rows %lld", b->name, (long long)b->rows);
    CHECK(strcmp(b->sources[1].tensor, "model.layers.0.self_attn.k_proj.bias") == 0 &&
          b->sources[1].row_begin == 64 && b->sources[1].dst_row == 7 * 64, "k bias of KV head 1");
    snug_params_free(&t);
    CHECK_FAILS(snug_params_build(&c, 8, 0, &t, &err), &err, SNUG_INVALID,
                "tensor-parallel size 8 does not fit this model: num_attention_heads 14 is not "
                "divisible by it; sizes that work: 1, 2");
    snug_model_config g = small_config(12, 4, 100, false, false);
    CHECK_FAILS(snug_params_check_tp(&g, 6, &err), &err, SNUG_INVALID,
                "num_key_value_heads 4 neither splits evenly nor divides it; sizes that work: 1, 2, 4, 12");
}

/* The block formats a checkpoint may hold, as a source_dtype function:
 * ctx is the format of every 2-D tensor (norms are F32). */
static snug_dtype matrices_as(void *ctx, const char *tensor)
{
    return strstr(tensor, "norm") ? SNUG_DTYPE_F32 : *(const snug_dtype *)ctx;
}

/* Parameters held from block-format sources: each rank's share at the
 * file's bytes (rows x blocks of its columns, the padded vocabulary rows
 * included), summing over the ranks to the whole file's; a share that cuts
 * a block is refused naming the tensor and the tp. */
static void test_held_bytes_of_block_formats(void)
{
    snug_model_config c = small_config(8, 8, 1001, false, false);
    c.hidden_size = 512, c.intermediate_size = 1024, c.head_dim = 64;
    snug_error err = {0};
    snug_dtype q8 = SNUG_DTYPE_Q8_0, q4k = SNUG_DTYPE_Q4_K;
    /* every matrix of the unsharded model at Q8_0: rows x cols / 32 blocks of 34 bytes */
    uint64_t want = 0;
    snug_tensor_spec *specs = NULL;
    int32_t n = 0;
    CHECK_OK(snug_params_checkpoint_tensors(&c, &specs, &n, &err), &err);
    for (int32_t i = 0; i < n; i++)
        want += specs[i].n_dims == 2 ? (uint64_t)specs[i].rows * (uint64_t)(specs[i].cols / 32) * 34
                                     : (uint64_t)specs[i].rows * 4;
    snug_mem_free(specs);
    for (int32_t tp = 1; tp <= 4; tp *= 2) {
        uint64_t sum = 0, padding = 0;
        for (int32_t r = 0; r < tp; r++) {
            snug_param_table t;
            CHECK_OK(snug_params_build(&c, tp, r, &t, &err), &err);
            for (int32_t i = 0; i < t.n_params; i++) {
                uint64_t b = 0;
                CHECK_OK(snug_param_held_bytes(&t.params[i], SNUG_DTYPE_F32, SNUG_DTYPE_NONE, matrices_as, &q8, tp, &b, &err), &err);
                const snug_param *p = &t.params[i];
                bool replicated = p->kind == SNUG_SHARD_REPLICATED;
                if (!replicated || r == 0) sum += b;
                if (p->kind == SNUG_SHARD_VOCAB) /* rows past the real vocabulary: zero blocks */
                    padding += (uint64_t)(p->rows - p->sources[0].n_rows) * (uint64_t)(p->cols / 32) * 34;
            }
            snug_params_free(&t);
        }
        CHECK(sum - padding == want, "tp %d: ranks hold %llu bytes of Q8_0 blocks (%llu padding), the file %llu",
              tp, (unsigned long long)sum, (unsigned long long)padding, (unsigned long long)want);
    }
    /* Q4_K: o_proj's 512 columns in blocks of 256 split 2 ways, not 4 */
    for (int32_t tp = 2; tp <= 4; tp *= 2) {
        snug_param_table t;
        CHECK_OK(snug_params_build(&c, tp, 0, &t, &err), &err);
        snug_status st = SNUG_OK;
        for (int32_t i = 0; st == SNUG_OK && i < t.n_params; i++) {
            uint64_t b = 0;
            st = snug_param_held_bytes(&t.params[i], SNUG_DTYPE_F32, SNUG_DTYPE_NONE, matrices_as, &q4k, tp, &b, &err);
        }
        if (tp == 2)
            CHECK_OK(st, &err);
        else
            CHECK(st == SNUG_INVALID && strstr(err.msg, "o_proj.weight' (Q4_K, blocks of 256): tensor parallel 4 "
                                                        "gives a rank columns [0, 128) of its 512, which cuts a block"),
                  "tp 4 cuts Q4_K blocks: %s", err.msg);
        snug_params_free(&t);
    }
}

/* Every tensor of a block format (ctx), norms included. */
static snug_dtype all_as(void *ctx, const char *tensor)
{
    (void)tensor;
    return *(const snug_dtype *)ctx;
}

/* v_proj of layer 1 of another block format than the other matrices. */
static snug_dtype v1_differs(void *ctx, const char *tensor)
{
    if (strstr(tensor, "norm")) return SNUG_DTYPE_F32;
    return strstr(tensor, "layers.1.self_attn.v_proj") ? SNUG_DTYPE_Q6_K : *(const snug_dtype *)ctx;
}

/* Each parameter's dtype from its sources: matrices keep their block
 * format, the rest takes the weights' type; a block-format norm is refused
 * naming the tensor; a matrix fusing two formats is split into parts of
 * one format each, placed one after another (64-byte aligned), sized to
 * the byte by snug_param_bytes and snug_param_held_bytes alike. */
static void test_set_dtypes(void)
{
    snug_model_config c = small_config(8, 8, 1001, false, false);
    c.hidden_size = 512, c.intermediate_size = 1024, c.head_dim = 64;
    snug_error err = {0};
    snug_dtype q4k = SNUG_DTYPE_Q4_K;
    snug_param_table t;
    CHECK_OK(snug_params_build(&c, 1, 0, &t, &err), &err);
    CHECK_OK(snug_params_set_dtypes(&t, SNUG_DTYPE_BF16, SNUG_DTYPE_NONE, matrices_as, &q4k, &err), &err);
    int bad = 0;
    for (int32_t i = 0; i < t.n_params; i++)
        bad += t.params[i].dtype != (t.params[i].n_dims == 2 ? SNUG_DTYPE_Q4_K : SNUG_DTYPE_BF16);
    CHECK(bad == 0, "%d parameters held at another type", bad);
    CHECK(snug_params_set_dtypes(&t, SNUG_DTYPE_BF16, SNUG_DTYPE_NONE, all_as, &q4k, &err) == SNUG_UNSUPPORTED &&
              strstr(err.msg, "norm.weight' is Q4_K: only matrices may be of a block format"),
          "a block-format norm: %s", err.msg);
    /* a matrix fusing two formats is split, a part per source, each at its own format */
    CHECK_OK(snug_params_set_dtypes(&t, SNUG_DTYPE_BF16, SNUG_DTYPE_NONE, v1_differs, &q4k, &err), &err);
    int split = 0;
    for (int32_t i = 0; i < t.n_params; i++) {
        const snug_param *p = &t.params[i];
        split += p->split;
        if (!p->split) continue;
        CHECK(strcmp(p->name, "layers.1.qkv") == 0 && snug_param_parts(p) == 3, "%s split in %d", p->name,
              snug_param_parts(p));
        /* 512 rows of 2 Q4_K blocks (144 bytes) for q and k, 2 Q6_K blocks (210 bytes) for v */
        static const struct { snug_dtype dt; int64_t rows, panel; uint64_t offset; } want[3] = {
            {SNUG_DTYPE_Q4_K, 512, 0, 0}, {SNUG_DTYPE_Q4_K, 512, 32, 147456}, {SNUG_DTYPE_Q6_K, 512, 64, 294912}};
        for (int32_t s = 0; s < 3; s++) {
            snug_param_part part = snug_param_source_part(p, s, SNUG_DTYPE_BF16);
            CHECK(part.dtype == want[s].dt && part.rows == want[s].rows && part.row == 0 &&
                      part.panel == want[s].panel && part.offset == want[s].offset,
                  "part %d: %s, %lld rows from %lld, panel %lld, at %llu", s, snug_dtype_name(part.dtype),
                  (long long)part.rows, (long long)part.row, (long long)part.panel,
                  (unsigned long long)part.offset);
        }
        uint64_t held = 0;
        CHECK_OK(snug_param_held_bytes(p, SNUG_DTYPE_BF16, SNUG_DTYPE_NONE, v1_differs, &q4k, 1, &held, &err), &err);
        CHECK(snug_param_bytes(p, SNUG_DTYPE_BF16) == 294912 + 215040 && held == 294912 + 215040,
              "split qkv: %llu bytes, %llu predicted, want 509952",
              (unsigned long long)snug_param_bytes(p, SNUG_DTYPE_BF16), (unsigned long long)held);
    }
    CHECK(split == 1, "%d parameters split, want layers.1.qkv alone", split);
    snug_params_free(&t);
}

int main(void)
{
    RUN(test_shard_range);
    RUN(test_preset_counts);
    RUN(test_llama3_8b_rank_bytes);
    RUN(test_coverage_every_kind);
    RUN(test_gqa_replication);
    RUN(test_vocab_padding_and_tying);
    RUN(test_qwen2_biases);
    RUN(test_held_bytes_of_block_formats);
    RUN(test_set_dtypes);
    return test_summary();
}
