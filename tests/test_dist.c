/*
 * test_dist.c: the tensor-parallel ranks (dist/).
 *
 * Run alone it checks what one process can: the communicator of one, the
 * start-up agreement and model hashes, the stepper's sizes and that its
 * single-process step is the model's forward pass, and the messages for a
 * --tp that does not match the processes.
 *
 * Run by mpirun (tests/dist/tp.sh: `mpirun -np N test_dist MODEL_DIR`) each
 * rank loads its shard (weights checked against the parameter table's
 * prediction) and rank 0 leads a script of steps (two sequences, prefill
 * chunks with every row's logits, then decodes side by side) through the
 * stepper while the others follow; rank 0 then runs the same script on the
 * whole model in one process and compares every logit (f32 weights and
 * cache: within 1e-4 of the largest, relative). Only rank 0 prints.
 */
#include "test.h"

#include "base/mem.h"
#include "dist/agree.h"
#include "dist/comm.h"
#include "dist/stepper.h"
#include "engine/blocks.h"
#include "formats/checkpoint.h"
#include "model/loader.h"
#include "model/model.h"

#include <unistd.h>

enum { BLOCK = 16, N_BLOCKS = 64, MAX_TOKENS = 512, CHUNK = 16, N_DECODE = 8 };
enum { LEN_A = 40, LEN_B = 23 };
/* rows of logits the script asks for: every prompt row, then two per decode step */
enum { N_ROWS = LEN_A + LEN_B + 2 * N_DECODE };

static const char *g_dir = "models/stories260K";

/* ---- one process ------------------------------------------------------------ */

static void test_one_process_comm(void)
{
    snug_error err = {0};
    int32_t size = 0, rank = -1;
    snug_comm_world(&size, &rank);
    CHECK(size == 1 && rank == 0, "world %d, rank %d", size, rank);
    snug_comm *c = NULL;
#if SNUG_HAVE_MPI
    CHECK_FAILS(snug_comm_open(2, 10, &c, &err), &err, SNUG_INVALID, "start 2 with mpirun -np 2");
#else
    CHECK_FAILS(snug_comm_open(2, 10, &c, &err), &err, SNUG_UNSUPPORTED, "built without MPI");
#endif
    CHECK_FAILS(snug_comm_open(1, 0, &c, &err), &err, SNUG_INVALID, "step-timeout");
    CHECK_OK(snug_comm_open(1, 5, &c, &err), &err);
    if (!c) return;
    CHECK(snug_comm_size(c) == 1 && snug_comm_rank(c) == 0 && !snug_comm_broken(c), "one rank");
    float v[3] = {1, 2, 3};
    CHECK_OK(snug_comm_allreduce_f32(c, v, 3, SNUG_WAIT_STEP, "test", &err), &err);
    CHECK(v[0] == 1 && v[2] == 3, "a sum over one rank is the value");
    int64_t k = 7;
    CHECK_OK(snug_comm_allreduce_i64(c, &k, 1, SNUG_REDUCE_MIN, SNUG_WAIT_START, "test", &err), &err);
    int32_t g[2] = {0};
    int32_t mine = 42;
    CHECK_OK(snug_comm_gather(c, &mine, sizeof mine, g, 0, SNUG_WAIT_STEP, "test", &err), &err);
    CHECK(g[0] == 42 && k == 7, "gather onto the one rank: %d", g[0]);
    CHECK(snug_comm_default_threads() >= 1, "threads");
    snug_comm_close(c);
}

static void test_agree_and_hashes(void)
{
    snug_error err = {0};
    CHECK(snug_dist_agree(NULL, SNUG_OK, &err) == SNUG_OK, "nothing failed");
    snug_errorf(&err, SNUG_IO, "disk on fire");
    CHECK(snug_dist_agree(NULL, SNUG_IO, &err) == SNUG_IO && strstr(err.msg, "disk on fire"),
          "one process: its own failure, as it was (%s)", err.msg);
    /* FNV-1a 64 of "a" (the published test vector) */
    CHECK(snug_hash_bytes(SNUG_HASH_SEED, "a", 1) == 0xaf63dc4c8601ec8cull, "fnv1a64(a)");
    CHECK(snug_hash_bytes(snug_hash_bytes(SNUG_HASH_SEED, "ab", 2), "c", 1) ==
              snug_hash_bytes(SNUG_HASH_SEED, "abc", 3), "the hash continues");
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(g_dir, &ck, &err), &err);
    if (!ck) return;
    uint64_t c1 = 0, h1 = 0, c2 = 0, h2 = 0;
    CHECK_OK(snug_checkpoint_hashes(ck, &c1, &h1, &err), &err);
    CHECK_OK(snug_checkpoint_hashes(ck, &c2, &h2, &err), &err);
    CHECK(c1 == c2 && h1 == h2 && c1 != h1 && c1 != 0, "the hashes are the file's: %llx %llx",
          (unsigned long long)c1, (unsigned long long)h1);
    CHECK_OK(snug_dist_check_model(NULL, ck, &err), &err);
    snug_checkpoint_close(ck);
}

/* A model of rank `rank` of tp over g_dir, with its stepper and cache. */
typedef struct rig {
    snug_checkpoint *ck;
    snug_weights *w;
    snug_model *m;
    snug_stepper *s;
    snug_kvcache kv;
    snug_block_pool pool;
    snug_block_table tables[2];
    uint64_t predicted;      /* the table's bytes for this rank */
} rig;

static snug_status rig_open(rig *r, snug_comm *c, snug_error *err)
{
    memset(r, 0, sizeof *r);
    int32_t tp = c ? snug_comm_size(c) : 1, rank = c ? snug_comm_rank(c) : 0;
    snug_load_opts lo = {.tp = tp, .rank = rank, .n_threads = 1};
    snug_model_opts mo = {.shape = {CHUNK * 2, 2, CHUNK * 2, 1}, .isa = -1,
                          .allreduce = snug_comm_allreduce_hook, .allreduce_ctx = c};
    uint64_t bytes[SNUG_TP_MAX];
    snug_status st = snug_checkpoint_open(g_dir, &r->ck, err);
    if (st == SNUG_OK) st = snug_weights_load(r->ck, &lo, &r->w, NULL, err);
    if (st == SNUG_OK) st = snug_params_rank_bytes(&r->ck->config, tp, r->w->dtype, bytes, err);
    if (st == SNUG_OK) r->predicted = bytes[rank];
    if (st == SNUG_OK) st = snug_model_create(&r->ck->config, r->w, &mo, &r->m, err);
    if (st == SNUG_OK) st = snug_stepper_create(c, r->m, &r->ck->config, MAX_TOKENS / BLOCK, &r->s, err);
    const snug_model_dims *d = st == SNUG_OK ? snug_model_get_dims(r->m) : NULL;
    if (d) {
        snug_kv_shape ks = {d->n_layers, d->n_kv_heads, d->head_dim, BLOCK, SNUG_DTYPE_F32};
        st = snug_kvcache_create(&ks, N_BLOCKS, snug_model_pool(r->m), &r->kv, err);
    }
    if (st == SNUG_OK) st = snug_block_pool_init(&r->pool, N_BLOCKS, BLOCK, false, err);
    for (int i = 0; i < 2 && st == SNUG_OK; i++)
        st = snug_block_table_init(&r->tables[i], MAX_TOKENS, BLOCK, err);
    return st;
}

static void rig_close(rig *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->tables[i].ids) snug_block_table_release(&r->tables[i], &r->pool);
        snug_block_table_free(&r->tables[i]);
    }
    snug_block_pool_free(&r->pool);
    snug_kvcache_free(&r->kv);
    snug_stepper_free(r->s);
    snug_model_free(r->m);
    snug_weights_free(r->w);
    snug_checkpoint_close(r->ck);
}

/* The script: sequence A's prompt in chunks of CHUNK and B's alongside
 * (every row's logits), then N_DECODE steps of both decoding (fixed
 * tokens). The leader's rows go to out ([N_ROWS][vocab]), or with ids not
 * NULL (through snug_stepper_run_greedy) each row's argmax to ids. */
static snug_status run_script(rig *r, float *out, int32_t *ids, snug_error *err)
{
    int32_t vocab = r->ck->config.vocab_size;
    int32_t toks[LEN_A + LEN_B + 2 * N_DECODE];
    for (int i = 0; i < (int)SNUG_ARRAY_LEN(toks); i++) toks[i] = (int32_t)((i * 7919 + 11) % vocab);
    const int32_t *a = toks, *b = toks + LEN_A, *dec = toks + LEN_A + LEN_B;
    int32_t done[2] = {0, 0}, lens[2] = {LEN_A, LEN_B}, row = 0;
    int32_t buf[2 * CHUNK];
    snug_status st = SNUG_OK;
    for (int step = 0; st == SNUG_OK; step++) {
        snug_step_seq seqs[2];
        int32_t n_seqs = 0, n_tok = 0;
        for (int q = 0; q < 2; q++) {
            bool prefill = done[q] < lens[q];
            int32_t decode_i = step - 3; /* decodes start after both prompts (3 chunks of A) */
            if (!prefill && (decode_i < 0 || decode_i >= N_DECODE)) continue;
            int32_t n = prefill ? SNUG_MIN(CHUNK, lens[q] - done[q]) : 1;
            const int32_t *src = prefill ? (q ? b : a) + done[q] : &dec[2 * decode_i + q];
            memcpy(buf + n_tok, src, (size_t)n * sizeof(int32_t));
            snug_block_table_grow(&r->tables[q], &r->pool, done[q] + n, BLOCK);
            seqs[n_seqs++] = (snug_step_seq){n, done[q], r->tables[q].ids, r->tables[q].n,
                                             prefill ? SNUG_LOGITS_ALL : SNUG_LOGITS_LAST, NULL, 0};
            n_tok += n;
            done[q] += n;
        }
        if (n_seqs == 0) break;
        snug_step s = {buf, n_tok, seqs, n_seqs, 0};
        snug_logits lg;
        st = ids ? snug_stepper_run_greedy(r->s, &r->kv, &s, &lg, err)
                 : snug_stepper_run(r->s, &r->kv, &s, &lg, err);
        for (int32_t i = 0; st == SNUG_OK && i < lg.n_rows && row < N_ROWS; i++, row++) {
            if (ids) ids[row] = lg.best ? lg.best[i].id : -1;
            else
                memcpy(out + (size_t)row * (size_t)vocab, lg.rows + (size_t)i * (size_t)lg.stride,
                       (size_t)vocab * sizeof(float));
        }
    }
    if (st == SNUG_OK && row != N_ROWS)
        st = snug_errorf(err, SNUG_INTERNAL, "the script gave %d rows of logits, expected %d", row, N_ROWS);
    return st;
}

/* With one rank the stepper is the model's forward pass: the same rows,
 * and its bytes are only itself. */
static void test_one_process_stepper(void)
{
    snug_error err = {0};
    rig r;
    float *got = NULL;
    CHECK_OK(rig_open(&r, NULL, &err), &err);
    if (r.s) {
        const snug_model_dims *d = snug_model_get_dims(r.m);
        size_t n = (size_t)N_ROWS * (size_t)r.ck->config.vocab_size;
        got = calloc(n, sizeof(float));
        CHECK_OK(run_script(&r, got, NULL, &err), &err);
        float mx = 0;
        for (size_t i = 0; got && i < n; i++) mx = fmaxf(mx, fabsf(got[i]));
        CHECK(mx > 0, "the script's logits are not all 0");
        size_t b = snug_stepper_bytes(d, snug_model_step_shape(r.m), 32);
        CHECK(b >= snug_mem_block_bytes(r.s) && b <= 512, "one rank: the stepper holds only "
              "itself, a small block (bound %zu, charged %zu)", b, snug_mem_block_bytes(r.s));
        CHECK(r.w->arena_bytes == r.predicted, "weights %llu, predicted %llu",
              (unsigned long long)r.w->arena_bytes, (unsigned long long)r.predicted);
        CHECK(snug_stepper_leads(r.s) && snug_stepper_comm(r.s) == NULL, "one rank leads");
        int32_t ids[N_ROWS];
        CHECK_OK(run_script(&r, NULL, ids, &err), &err);
        CHECK(ids[0] == -1 && ids[N_ROWS - 1] == -1, "one rank, greedy: the rows as they are, no argmax");
        CHECK_FAILS(snug_stepper_follow(r.s, &r.kv, &err), &err, SNUG_INVALID, "follower");
        CHECK_OK(snug_stepper_ping(r.s, &err), &err); /* one rank: nothing to check */
        CHECK_OK(snug_stepper_stop(r.s, &err), &err);
    }
    free(got);
    rig_close(&r);
}

/* The buffers of a rank of tp: the message, the follower's view and, on
 * rank 0, the whole rows of logits (the slices are gathered straight into
 * them). */
static void test_stepper_bytes(void)
{
    snug_model_dims d = {.tp = 4, .rank = 0, .vocab_rows = 128};
    snug_step_shape shape = {64, 8, 8, 1};
    size_t msg = ((8 + 64 + 4 * 8 + 8 * 32) * 4 + 63) / 64 * 64;
    size_t seqs = (8 * sizeof(snug_step_seq) + 63) / 64 * 64;
    size_t rows = (size_t)4 * 8 * 128 * 4;   /* tp x rows x vocab_rows floats */
    size_t got0 = snug_stepper_bytes(&d, &shape, 32);
    d.rank = 1;
    size_t got1 = snug_stepper_bytes(&d, &shape, 32);
    CHECK(got0 - got1 == snug_mem_held_bytes(msg + seqs + rows) - snug_mem_held_bytes(msg + seqs),
          "rank 0 has the whole rows of logits besides: %zu vs %zu", got0, got1);
    d.tp = 1;
    CHECK(snug_stepper_bytes(&d, &shape, 32) < got1, "one rank: no buffers");
    d.tp = 4;
    shape.n_seqs_max = 1 << 20;
    CHECK(snug_stepper_bytes(&d, &shape, 1 << 20) == 0, "too large: 0");
}

/* ---- many processes ------------------------------------------------------- */

static void test_tp_logits(void)
{
    snug_error err = {0};
    int32_t size = 1, rank = 0;
    snug_comm_world(&size, &rank);
    snug_comm *c = NULL;
    rig r = {0}, one = {0};
    float *got = NULL, *want = NULL;
    CHECK_OK(snug_comm_open(size, 30, &c, &err), &err);
    if (!c) return;
    snug_status st = rig_open(&r, c, &err);
    st = snug_dist_agree(c, st, &err);
    CHECK_OK(st, &err);
    if (st != SNUG_OK) goto done;
    CHECK(r.w->arena_bytes == r.predicted, "rank %d: weights %llu bytes, the table predicts %llu",
          rank, (unsigned long long)r.w->arena_bytes, (unsigned long long)r.predicted);
    size_t n = (size_t)N_ROWS * (size_t)r.ck->config.vocab_size;
    if (rank > 0) {
        CHECK_OK(snug_stepper_follow(r.s, &r.kv, &err), &err);
        goto done;
    }
    got = calloc(n, sizeof(float));
    want = calloc(n, sizeof(float));
    int32_t greedy[N_ROWS];
    CHECK_OK(run_script(&r, got, NULL, &err), &err);
    /* as when the launcher signals: the followers answer a check between steps, and the
     * steps after it, in a hurry, run as before while every rank answers */
    snug_comm_hurry(c, 5);
    CHECK_OK(snug_stepper_ping(r.s, &err), &err);
    CHECK_OK(run_script(&r, NULL, greedy, &err), &err); /* the same steps again, greedy */
    CHECK(!snug_comm_broken(c), "tp %d: a check and a hurry among ranks that answer break nothing", size);
    CHECK_OK(snug_stepper_stop(r.s, &err), &err);
    CHECK_OK(rig_open(&one, NULL, &err), &err);
    if (one.s) CHECK_OK(run_script(&one, want, NULL, &err), &err);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)got[i] - (double)want[i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    double e = scale > 0 ? diff / scale : diff;
    const snug_model_dims *d = snug_model_get_dims(r.m);
    printf("  tp %d over %s (%d KV heads per rank): %d rows, max relative error %.3g (tolerance 1e-04)\n",
           size, g_dir, d->n_kv_heads, N_ROWS, e);
    CHECK(scale > 0 && e <= 1e-4, "tp %d: relative error %.3g", size, e);
    /* the ranks' reduced maxima: each row's argmax, as the whole row of logits gives it */
    int32_t vocab = r.ck->config.vocab_size, same = 0;
    for (int32_t row = 0; row < N_ROWS; row++) {
        const float *g = got + (size_t)row * (size_t)vocab;
        int32_t best = 0;
        for (int32_t j = 1; j < vocab; j++)
            if (g[j] > g[best]) best = j;
        same += greedy[row] == best;
    }
    printf("  tp %d greedy: %d of %d rows' argmax from the reduced maxima = the gathered rows'\n",
           size, same, N_ROWS);
    CHECK(same == N_ROWS, "tp %d: %d of %d argmax equal", size, same, N_ROWS);
done:
    free(got);
    free(want);
    rig_close(&one);
    rig_close(&r);
    snug_comm_close(c);
}

int main(int argc, char **argv)
{
    snug_error err = {0};
    if (snug_comm_start(&argc, &argv, &err) != SNUG_OK) {
        printf("FAIL - start: %s\n0 passed, 1 failed\n", err.msg);
        return 1;
    }
    int32_t size = 1, rank = 0;
    snug_comm_world(&size, &rank);
    if (argc > 1) g_dir = argv[1];
    if (rank > 0 && !freopen("/dev/null", "w", stdout)) return 1; /* rank 0 reports */
    if (size == 1) {
        RUN(test_one_process_comm);
        RUN(test_agree_and_hashes);
        RUN(test_one_process_stepper);
        RUN(test_stepper_bytes);
    } else {
        RUN(test_tp_logits);
    }
    int rc = test_summary();
    snug_comm_finish();
    return rc;
}
