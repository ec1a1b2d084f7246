/*
 * stepper.c: one step on every rank (stepper.h).
 *
 * The step's message is int32s: a header of STEP_HDR (kind, n_tokens,
 * n_seqs, block ids, a check word, whether the leader wants only each
 * row's argmax, the layers to run) sent first, then the payload: the
 * tokens, five numbers per sequence (n_tokens, pos0, n_blocks, logits
 * mode, n_window_blocks), then every sequence's block ids one after the
 * other, then its window group's (a model with windowed layers; -1 where
 * given back). A follower reads the sequences' tables straight from its
 * copy of the message.
 */
#include "stepper.h"

#include "base/mem.h"
#include "base/populate.h"

#include <math.h>
#include <string.h>

enum { STEP_HDR = 8, SEQ_INTS = 5, KIND_STEP = 1, KIND_STOP = 2, KIND_ERROR = 3, KIND_PING = 4,
       CHECK_WORD = 0x736e7567 /* "snug" */ };

struct snug_stepper {
    snug_comm *comm;          /* NULL: one process */
    snug_model *model;
    int32_t tp, rank;
    int32_t vocab;            /* the whole vocabulary */
    int32_t vocab_rows;       /* each rank's slice, padded */
    int32_t n_tokens_max, n_seqs_max, n_logits_max, max_blocks;
    bool windowed;            /* the model has windowed layers: its steps may carry window tables */
    void *block;              /* the buffers below, one block of category activations */
    int32_t *msg;             /* [STEP_HDR + n_tokens_max + SEQ_INTS n_seqs_max + n_seqs_max max_blocks
                               * (twice with windowed layers)] */
    snug_step_seq *seqs;      /* [n_seqs_max] a follower's view of the message */
    float *rows;              /* [n_logits_max][tp * vocab_rows], the leader's: every rank's
                               * slice gathered straight into place */
    snug_row_max *maxima;     /* [n_logits_max] each row's largest logit and its id (on the
                               * leader, after the reduction, over every rank) */
    int32_t vocab_begin, vocab_len; /* this rank's real rows of the vocabulary */
};

/* The buffers' bytes, rounded to 64 bytes each. */
typedef struct stepper_sizes {
    size_t msg, seqs, maxima, rows, total;
} stepper_sizes;

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

static bool sizes_of(const snug_model_dims *d, const snug_step_shape *shape,
                     int32_t max_blocks_per_seq, stepper_sizes *z)
{
    memset(z, 0, sizeof *z);
    if (d->tp <= 1) return true;
    int64_t n_logits = shape->n_logits_max > 0 ? shape->n_logits_max : shape->n_seqs_max;
    if (shape->n_tokens_max < 1 || shape->n_seqs_max < 1 || max_blocks_per_seq < 1) return false;
    double ids = (double)STEP_HDR + shape->n_tokens_max + (double)SEQ_INTS * shape->n_seqs_max +
                 (double)shape->n_seqs_max * max_blocks_per_seq * (d->n_window_layers > 0 ? 2 : 1);
    double floats = (double)d->tp * (double)n_logits * (double)d->vocab_rows;
    /* MPI counts are ints: the message's bytes, a rank's slice of the logits in floats */
    if (ids * 4 > (double)INT32_MAX || (double)n_logits * d->vocab_rows > (double)INT32_MAX ||
        floats * 4 > 1e15)
        return false;
    z->msg = round64((size_t)ids * sizeof(int32_t));
    z->seqs = round64((size_t)shape->n_seqs_max * sizeof(snug_step_seq));
    z->maxima = round64((size_t)n_logits * sizeof(snug_row_max));
    if (d->rank == 0) z->rows = round64((size_t)floats * sizeof(float));
    z->total = z->msg + z->seqs + z->maxima + z->rows;
    return true;
}

size_t snug_stepper_bytes(const snug_model_dims *dims, const snug_step_shape *shape,
                          int32_t max_blocks_per_seq)
{
    stepper_sizes z;
    if (!sizes_of(dims, shape, max_blocks_per_seq, &z)) return 0;
    size_t n = snug_mem_held_bytes(sizeof(snug_stepper));
    if (z.total) n += snug_mem_held_bytes(z.total);
    return n;
}

snug_status snug_stepper_create(snug_comm *c, snug_model *m, const snug_model_config *cfg,
                                int32_t max_blocks_per_seq, snug_stepper **out, snug_error *err)
{
    *out = NULL;
    const snug_model_dims *d = snug_model_get_dims(m);
    const snug_step_shape *shape = snug_model_step_shape(m);
    int32_t tp = c ? snug_comm_size(c) : 1, rank = c ? snug_comm_rank(c) : 0;
    if (tp != d->tp || rank != d->rank)
        return snug_errorf(err, SNUG_INVALID, "stepper: the model is rank %d of %d, the "
                           "communicator rank %d of %d", d->rank, d->tp, rank, tp);
    stepper_sizes z;
    if (!sizes_of(d, shape, max_blocks_per_seq, &z))
        return snug_errorf(err, SNUG_INVALID, "tensor parallel: a step of %d tokens over %d "
                           "sequences (%d rows of %d logits per rank), with block tables of %d "
                           "blocks, is more than one message can carry: lower --max-num-seqs, "
                           "--max-num-batched-tokens or --max-model-len", shape->n_tokens_max,
                           shape->n_seqs_max, shape->n_logits_max > 0 ? shape->n_logits_max
                                                                      : shape->n_seqs_max,
                           d->vocab_rows, max_blocks_per_seq);
    snug_stepper *s = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *s, err);
    if (!s) return snug_error_prefix(err, SNUG_NOMEM, "stepper: ");
    *s = (snug_stepper){.comm = tp > 1 ? c : NULL, .model = m, .tp = tp, .rank = rank,
                        .vocab = cfg->vocab_size, .vocab_rows = d->vocab_rows,
                        .n_tokens_max = shape->n_tokens_max, .n_seqs_max = shape->n_seqs_max,
                        .n_logits_max = shape->n_logits_max > 0 ? shape->n_logits_max : shape->n_seqs_max,
                        .max_blocks = max_blocks_per_seq, .vocab_begin = d->vocab_begin,
                        .vocab_len = d->vocab_len, .windowed = d->n_window_layers > 0};
    if (z.total) {
        unsigned char *b = snug_populate_alloc(SNUG_MEM_ACTIVATIONS, z.total, snug_model_pool(m), err);
        if (!b) {
            snug_mem_free(s);
            return snug_error_prefix(err, SNUG_NOMEM, "stepper: ");
        }
        s->block = b;
        s->msg = (int32_t *)b;
        s->seqs = (snug_step_seq *)(b + z.msg);
        s->maxima = (snug_row_max *)(b + z.msg + z.seqs);
        s->rows = z.rows ? (float *)(b + z.msg + z.seqs + z.maxima) : NULL;
        snug_status st = snug_comm_rows_prepare(c, s->n_logits_max, s->vocab_rows, err);
        if (st != SNUG_OK) {
            snug_stepper_free(s);
            return st;
        }
    }
    *out = s;
    return SNUG_OK;
}

void snug_stepper_free(snug_stepper *s)
{
    if (!s) return;
    snug_mem_free(s->block);
    snug_mem_free(s);
}

bool snug_stepper_leads(const snug_stepper *s) { return s->rank == 0; }

snug_model *snug_stepper_model(const snug_stepper *s) { return s->model; }

snug_comm *snug_stepper_comm(const snug_stepper *s) { return s->comm; }

/* The model's forward pass; an all-reduce's failure told in its words. */
static snug_status forward(snug_stepper *s, snug_kvcache *kv, const snug_step *step,
                           const float **rows, int32_t *n_rows, snug_error *err)
{
    snug_status st = snug_model_forward(s->model, kv, step, rows, n_rows, err);
    if (st == SNUG_INTERNAL && s->comm && snug_comm_last_error(s->comm)[0])
        st = snug_errorf(err, SNUG_IO, "%s", snug_comm_last_error(s->comm));
    return st;
}

/* The leader's header without a step: stop, or an error. */
static snug_status send_kind(snug_stepper *s, int32_t kind, snug_error *err)
{
    int32_t *h = s->msg;
    memset(h, 0, STEP_HDR * sizeof(int32_t));
    h[0] = kind, h[4] = CHECK_WORD;
    return snug_comm_bcast(s->comm, h, STEP_HDR * sizeof(int32_t), 0, SNUG_WAIT_STEP,
                           kind == KIND_STOP ? "the stop message"
                           : kind == KIND_PING ? "the check's message" : "the failed step's message",
                           err);
}

/* Packs step into the message (the leader). */
static snug_status pack(snug_stepper *s, const snug_step *step, snug_error *err)
{
    int64_t n_ids = 0;
    if (step->n_tokens < 0 || step->n_tokens > s->n_tokens_max || step->n_seqs < 1 ||
        step->n_seqs > s->n_seqs_max)
        return snug_errorf(err, SNUG_INVALID, "stepper: a step of %d tokens over %d sequences "
                           "(the most: %d, %d)", step->n_tokens, step->n_seqs, s->n_tokens_max,
                           s->n_seqs_max);
    for (int32_t i = 0; i < step->n_seqs; i++) {
        const snug_step_seq *q = &step->seqs[i];
        if (q->n_blocks < 0 || q->n_blocks > s->max_blocks || q->n_window_blocks < 0 ||
            q->n_window_blocks > (s->windowed ? s->max_blocks : 0))
            return snug_errorf(err, SNUG_INVALID, "stepper: sequence %d of the step has %d blocks and %d of the "
                               "window group (the most: %d, %d)", i, q->n_blocks, q->n_window_blocks, s->max_blocks,
                               s->windowed ? s->max_blocks : 0);
        n_ids += q->n_blocks + q->n_window_blocks;
    }
    int32_t *h = s->msg, *p = s->msg + STEP_HDR;
    h[0] = KIND_STEP, h[1] = step->n_tokens, h[2] = step->n_seqs, h[3] = (int32_t)n_ids, h[4] = CHECK_WORD;
    h[6] = step->n_layers;
    memcpy(p, step->tokens, (size_t)step->n_tokens * sizeof(int32_t));
    p += step->n_tokens;
    for (int32_t i = 0; i < step->n_seqs; i++, p += SEQ_INTS) {
        const snug_step_seq *q = &step->seqs[i];
        p[0] = q->n_tokens, p[1] = q->pos0, p[2] = q->n_blocks, p[3] = (int32_t)q->logits;
        p[4] = q->n_window_blocks;
    }
    for (int32_t i = 0; i < step->n_seqs; i++) {
        memcpy(p, step->seqs[i].block_table, (size_t)step->seqs[i].n_blocks * sizeof(int32_t));
        p += step->seqs[i].n_blocks;
        if (step->seqs[i].n_window_blocks > 0)
            memcpy(p, step->seqs[i].window_table, (size_t)step->seqs[i].n_window_blocks * sizeof(int32_t));
        p += step->seqs[i].n_window_blocks;
    }
    return SNUG_OK;
}

static int64_t payload_ints(const int32_t *h) { return (int64_t)h[1] + SEQ_INTS * (int64_t)h[2] + h[3]; }

/* Reads the message into a step (a follower), checking it against the
 * buffers first. */
static snug_status unpack(snug_stepper *s, snug_step *step, snug_error *err)
{
    const int32_t *h = s->msg, *p = s->msg + STEP_HDR;
    const int32_t *ids = p + h[1] + SEQ_INTS * h[2];
    int64_t n_ids = 0;
    for (int32_t i = 0; i < h[2]; i++) {
        const int32_t *q = p + h[1] + SEQ_INTS * i;
        if (q[2] < 0 || q[2] > s->max_blocks || q[3] < SNUG_LOGITS_NONE || q[3] > SNUG_LOGITS_POOL_SUM || q[4] < 0 ||
            q[4] > (s->windowed ? s->max_blocks : 0) || n_ids + q[2] + q[4] > h[3])
            return snug_errorf(err, SNUG_INTERNAL, "stepper: rank %d got sequence %d with %d "
                               "blocks and %d of the window group, logits mode %d", s->rank, i, q[2], q[4], q[3]);
        s->seqs[i] = (snug_step_seq){q[0], q[1], ids + n_ids, q[2], (snug_logits_mode)q[3],
                                     q[4] > 0 ? ids + n_ids + q[2] : NULL, q[4]};
        n_ids += q[2] + q[4];
    }
    if (n_ids != h[3])
        return snug_errorf(err, SNUG_INTERNAL, "stepper: rank %d got %lld block ids for %d",
                           s->rank, (long long)n_ids, h[3]);
    if (h[6] < 0)
        return snug_errorf(err, SNUG_INTERNAL, "stepper: rank %d got a step of %d layers", s->rank, h[6]);
    *step = (snug_step){p, h[1], s->seqs, h[2], h[6]};
    return SNUG_OK;
}

/* A follower's wait for the next message's header: its kind. */
/* This rank's slice of each row's maximum (the lowest id among equals;
 * NaN never wins), as the sampler's greedy choice reads the whole row. */
static void local_maxima(snug_stepper *s, const float *rows, int32_t n_rows)
{
    for (int32_t r = 0; r < n_rows; r++) {
        const float *row = rows + (size_t)r * (size_t)s->vocab_rows;
        snug_row_max m = {-INFINITY, s->vocab_begin};
        for (int32_t j = 0; j < s->vocab_len; j++)
            if (row[j] > m.value) m = (snug_row_max){row[j], s->vocab_begin + j};
        s->maxima[r] = m;
    }
}

/* Every rank's part of the logits to the leader: the whole slices
 * (gathered into rows) or, greedy, their maxima (reduced). */
static snug_status send_logits(snug_stepper *s, const float *rows, int32_t n_rows, bool greedy,
                               snug_error *err)
{
    if (!greedy)
        return snug_comm_gather_rows(s->comm, rows, n_rows, s->rank == 0 ? s->rows : NULL, 0,
                                     SNUG_WAIT_STEP, "the gather of the logits", err);
    local_maxima(s, rows, n_rows);
    return snug_comm_argmax(s->comm, s->maxima, n_rows, 0, SNUG_WAIT_STEP,
                            "the reduction of the rows' maxima", err);
}

static snug_status receive_header(snug_stepper *s, snug_error *err)
{
    snug_status st = snug_comm_bcast(s->comm, s->msg, STEP_HDR * sizeof(int32_t), 0,
                                     SNUG_WAIT_IDLE, "the next step's header", err);
    if (st != SNUG_OK) return st;
    const int32_t *h = s->msg;
    if (h[0] == KIND_ERROR && h[4] == CHECK_WORD)
        return snug_errorf(err, SNUG_INTERNAL, "stepper: rank 0 could not send its step (its "
                           "message says why)");
    if (h[4] != CHECK_WORD || (h[0] != KIND_STEP && h[0] != KIND_STOP && h[0] != KIND_PING) || h[1] < 0 ||
        h[1] > s->n_tokens_max || h[2] < 0 || h[2] > s->n_seqs_max || h[3] < 0 ||
        (h[5] != 0 && h[5] != 1) ||
        (int64_t)h[3] > (int64_t)s->n_seqs_max * s->max_blocks * (s->windowed ? 2 : 1))
        return snug_errorf(err, SNUG_INTERNAL, "stepper: rank %d got a header it cannot read "
                           "(kind %d, %d tokens, %d sequences, %d block ids)", s->rank, h[0],
                           h[1], h[2], h[3]);
    return SNUG_OK;
}

/* Every rank's answer to a check (after its header): the number of ranks
 * that answered, which the leader checks. */
static snug_status answer_ping(snug_stepper *s, snug_error *err)
{
    int64_t n = 1;
    snug_status st = snug_comm_allreduce_i64(s->comm, &n, 1, SNUG_REDUCE_SUM, SNUG_WAIT_STEP,
                                             "every rank's answer to a check", err);
    if (st == SNUG_OK && n != s->tp)
        st = snug_errorf(err, SNUG_INTERNAL, "stepper: %lld of %d ranks answered a check",
                         (long long)n, s->tp);
    return st;
}

/* A follower's step once its header is in: the payload, the forward pass,
 * its slice of the logits to the leader. */
static snug_status follow_step(snug_stepper *s, snug_kvcache *kv, snug_error *err)
{
    snug_status st = snug_comm_bcast(s->comm, s->msg + STEP_HDR,
                                     (size_t)payload_ints(s->msg) * sizeof(int32_t), 0,
                                     SNUG_WAIT_STEP, "the step's plan", err);
    snug_step step;
    if (st == SNUG_OK) st = unpack(s, &step, err);
    const float *rows = NULL;
    int32_t n_rows = 0;
    if (st == SNUG_OK) st = forward(s, kv, &step, &rows, &n_rows, err);
    if (st == SNUG_OK) st = send_logits(s, rows, n_rows, s->msg[5] != 0, err);
    return st;
}

/* snug_stepper_run and _greedy. */
static snug_status run(snug_stepper *s, snug_kvcache *kv, const snug_step *step, bool greedy,
                       snug_logits *out, snug_error *err)
{
    *out = (snug_logits){NULL, NULL, 0, s->vocab_rows, s->vocab};
    const float *rows = NULL;
    int32_t n_rows = 0;
    snug_status st = SNUG_OK;
    if (!s->comm) {
        st = forward(s, kv, step, &rows, &n_rows, err);
        if (st == SNUG_OK) *out = (snug_logits){rows, NULL, n_rows, s->vocab_rows, s->vocab};
        return st;
    }
    if (s->rank != 0) {
        st = receive_header(s, err);
        if (st == SNUG_OK && s->msg[0] != KIND_STEP)
            st = snug_errorf(err, SNUG_INTERNAL, "stepper: rank %d was told to %s in the "
                             "middle of a run", s->rank, s->msg[0] == KIND_PING ? "answer a check" : "stop");
        if (st == SNUG_OK) st = follow_step(s, kv, err);
        out->n_rows = 0;
        return st;
    }
    st = pack(s, step, err);
    if (st != SNUG_OK) { /* the followers wait for a header: they get one that says so */
        send_kind(s, KIND_ERROR, NULL);
        return st;
    }
    s->msg[5] = greedy;
    st = snug_comm_bcast(s->comm, s->msg, STEP_HDR * sizeof(int32_t), 0, SNUG_WAIT_STEP,
                         "the step's header", err);
    if (st == SNUG_OK)
        st = snug_comm_bcast(s->comm, s->msg + STEP_HDR,
                             (size_t)payload_ints(s->msg) * sizeof(int32_t), 0, SNUG_WAIT_STEP,
                             "the step's plan", err);
    if (st == SNUG_OK) st = forward(s, kv, step, &rows, &n_rows, err);
    if (st == SNUG_OK) st = send_logits(s, rows, n_rows, greedy, err);
    if (st != SNUG_OK) return st;
    if (greedy)
        *out = (snug_logits){NULL, s->maxima, n_rows, s->tp * s->vocab_rows, s->vocab};
    else
        *out = (snug_logits){s->rows, NULL, n_rows, s->tp * s->vocab_rows, s->vocab};
    return SNUG_OK;
}

snug_status snug_stepper_run(snug_stepper *s, snug_kvcache *kv, const snug_step *step,
                             snug_logits *out, snug_error *err)
{
    return run(s, kv, step, false, out, err);
}

snug_status snug_stepper_run_greedy(snug_stepper *s, snug_kvcache *kv, const snug_step *step,
                                    snug_logits *out, snug_error *err)
{
    return run(s, kv, step, true, out, err);
}

snug_status snug_stepper_follow(snug_stepper *s, snug_kvcache *kv, snug_error *err)
{
    if (!s->comm || s->rank == 0)
        return snug_errorf(err, SNUG_INVALID, "stepper: only a follower rank follows");
    for (;;) {
        snug_status st = receive_header(s, err);
        if (st != SNUG_OK) return st;
        if (s->msg[0] == KIND_STOP) return SNUG_OK;
        st = s->msg[0] == KIND_PING ? answer_ping(s, err) : follow_step(s, kv, err);
        if (st != SNUG_OK) return st;
    }
}

snug_status snug_stepper_stop(snug_stepper *s, snug_error *err)
{
    if (!s->comm || s->rank != 0 || snug_comm_broken(s->comm)) return SNUG_OK;
    return send_kind(s, KIND_STOP, err);
}

snug_status snug_stepper_ping(snug_stepper *s, snug_error *err)
{
    if (!s->comm || s->rank != 0) return SNUG_OK;
    if (snug_comm_broken(s->comm))
        return snug_errorf(err, SNUG_IO, "stepper: the check of the ranks: the communicator is "
                           "broken by an earlier failure");
    snug_status st = send_kind(s, KIND_PING, err);
    return st == SNUG_OK ? answer_ping(s, err) : st;
}
