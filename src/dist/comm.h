/*
 * comm.h: the tensor-parallel ranks' communicator, over MPI (comm_mpi.c)
 * or, in a build without MPI, a world of one process (comm_single.c).
 *
 * The process starts MPI once (snug_comm_start, from main) when a launcher
 * such as mpirun started it; every rank of the world is then one rank of
 * tp. Collectives are non-blocking MPI calls completed by a wait of one of
 * three kinds:
 *   SNUG_WAIT_STEP    inside a step: polled with yields, at most the step
 *                     timeout (the watchdog: a rank that died or hangs is
 *                     an error, and the communicator is broken after it),
 *                     or a short grace once the launcher has signalled
 *                     that it is ending the run (snug_comm_hurry)
 *   SNUG_WAIT_IDLE    for the next step: polled with sleeps, no limit
 *   SNUG_WAIT_START   start-up agreement: as IDLE (loading takes minutes)
 * so that a waiting rank does not take the cores the others compute on.
 * MPI's own memory (its buffers, its shared-memory segments, and what its
 * non-blocking collectives allocate per call: a schedule, and for an
 * in-place all-reduce a buffer of the message's size) is outside the
 * allocator: made at start it is in the plan's baseline; the profile step
 * runs the largest step's collectives, so their peak is in U.
 */
#ifndef SNUG_COMM_H
#define SNUG_COMM_H

#include "base/common.h"

typedef enum snug_wait {
    SNUG_WAIT_STEP = 0,
    SNUG_WAIT_IDLE = 1,
    SNUG_WAIT_START = 2
} snug_wait;

typedef enum snug_reduce_op { SNUG_REDUCE_MIN = 0, SNUG_REDUCE_MAX = 1, SNUG_REDUCE_SUM = 2 } snug_reduce_op;

enum {
    SNUG_STEP_TIMEOUT_DEFAULT = 60, /* seconds */
    SNUG_TP_MAX = 64                /* ranks */
};

/* Starts MPI (thread level serialized: one thread at a time calls it) when
 * the process was started by an MPI launcher (Open MPI's, or one that sets
 * PMI_SIZE / PMIX_RANK); otherwise does nothing and the world is one
 * process. Call once, first thing in main. Fails with SNUG_UNSUPPORTED when
 * a launcher started a build without MPI, or SNUG_IO when MPI cannot start. */
snug_status snug_comm_start(int *argc, char ***argv, snug_error *err);

/* Ends MPI after a run that every rank finished (MPI_Finalize); nothing
 * when it was not started. */
void snug_comm_finish(void);

/* Ends every process of the world at once with exit code code (MPI_Abort),
 * for a failure the other ranks cannot learn of (a broken communicator);
 * without MPI, exit(code). Does not return. */
_Noreturn void snug_comm_abort(int code);

/* Ends this process alone, at once, with exit code code (no MPI_Finalize,
 * no MPI_Abort), for a failure while the launcher is already ending every
 * process (snug_comm_hurry): Open MPI's daemon answers an MPI_Abort only
 * after its own sequence of signals, which ends with SIGKILL, and a rank
 * that exits non-zero ends the run anyway. Does not return. */
_Noreturn void snug_comm_exit(int code);

/* The world's size and this process's rank in it (1 and 0 without MPI). */
void snug_comm_world(int32_t *size, int32_t *rank);

/* Threads a rank should compute on by default: the cores it may run on,
 * shared among the ranks of its host when the launcher did not bind it to
 * its own (at least 1). */
int32_t snug_comm_default_threads(void);

typedef struct snug_comm snug_comm;

/* Opens the communicator of tp ranks over the world, whose size must be tp
 * (the message says how to launch tp processes, or that tp 1 needs none).
 * step_timeout_s (> 0) bounds every SNUG_WAIT_STEP wait. *out is the
 * caller's (snug_comm_close). Fails with SNUG_INVALID (tp or the timeout),
 * SNUG_UNSUPPORTED (tp > 1 in a build without MPI), SNUG_NOMEM, or SNUG_IO
 * (MPI could not make the communicator). */
snug_status snug_comm_open(int32_t tp, double step_timeout_s, snug_comm **out, snug_error *err);

/* Frees the communicator; NULL is ignored. */
void snug_comm_close(snug_comm *c);

int32_t snug_comm_rank(const snug_comm *c);
int32_t snug_comm_size(const snug_comm *c);

/* Says, from any thread, that the launcher is ending the run: its signal
 * (Open MPI's mpirun and orted send SIGCONT, then SIGTERM a second later,
 * then SIGKILL after another, to every process when one of them died or
 * mpirun was told to stop). A rank that died is not an MPI error (shared
 * memory and TCP alike leave the survivors waiting), so the step waits
 * become the check: for SNUG_COMM_HURRY_WINDOW seconds from this call,
 * a step wait gives up grace_s seconds (capped by the step timeout) after
 * the later of its start and this call, and breaks the communicator as a
 * timeout does, its message saying that a rank is gone. Ranks that all
 * answer are not slowed. Nothing with one process. */
void snug_comm_hurry(snug_comm *c, double grace_s);
enum { SNUG_COMM_HURRY_WINDOW = 10 /* seconds */ };

/* True once a wait timed out or MPI failed: every later call fails at once
 * and the ranks can only be ended (snug_comm_abort). */
bool snug_comm_broken(const snug_comm *c);

/* Collectives: every rank calls them in the same order with the same
 * sizes. Each fails with SNUG_IO (MPI failed, or the wait of kind w timed
 * out: the message names what was waited for and the limit), after which
 * the communicator is broken. `what` names the operation in messages. */

/* Sends bytes of buf from rank root to every rank's buf. */
snug_status snug_comm_bcast(snug_comm *c, void *buf, size_t bytes, int32_t root, snug_wait w,
                            const char *what, snug_error *err);

/* Sums n floats over the ranks, in place (the same bits on every rank). */
snug_status snug_comm_allreduce_f32(snug_comm *c, float *buf, int64_t n, snug_wait w,
                                    const char *what, snug_error *err);

/* Reduces n integers over the ranks with op, in place. */
snug_status snug_comm_allreduce_i64(snug_comm *c, int64_t *v, int32_t n, snug_reduce_op op,
                                    snug_wait w, const char *what, snug_error *err);

/* Gathers bytes from every rank's send into rank root's recv, rank k's at
 * recv + k * bytes (recv is only written on root, which must hold size *
 * bytes; elsewhere it may be NULL). */
snug_status snug_comm_gather(snug_comm *c, const void *send, size_t bytes, void *recv,
                             int32_t root, snug_wait w, const char *what, snug_error *err);

/* Makes what snug_comm_gather_rows needs for up to max_rows rows of
 * row_floats floats (MPI datatypes, made once: MPI's memory, before the
 * plan's profile step). Again replaces what an earlier call made. Fails
 * with SNUG_IO or SNUG_NOMEM. */
snug_status snug_comm_rows_prepare(snug_comm *c, int32_t max_rows, int32_t row_floats,
                                   snug_error *err);

/* Gathers every rank's n_rows rows of row_floats floats (as prepared) into
 * whole rows on rank root, with no copy in between: rank k's row r lands at
 * recv + (r * size + k) * row_floats, so that row r of recv holds every
 * rank's slice in rank order (recv: n_rows * size * row_floats floats, only
 * written on root). Fails as the other collectives do, or with SNUG_INVALID
 * for more rows than prepared. */
snug_status snug_comm_gather_rows(snug_comm *c, const float *send, int32_t n_rows, float *recv,
                                  int32_t root, snug_wait w, const char *what, snug_error *err);

/* One row's most likely token, as MPI_FLOAT_INT lays it out. */
typedef struct snug_row_max {
    float value;
    int32_t id;
} snug_row_max;

/* Reduces n row maxima onto root in place: the largest value of each row
 * over the ranks, and of equal values the lowest id (MPI_MAXLOC). */
snug_status snug_comm_argmax(snug_comm *c, snug_row_max *rows, int32_t n, int32_t root,
                             snug_wait w, const char *what, snug_error *err);

/* As snug_comm_gather, onto every rank. */
snug_status snug_comm_allgather(snug_comm *c, const void *send, size_t bytes, void *recv,
                                snug_wait w, const char *what, snug_error *err);

/* The model's all-reduce (a snug_allreduce_fn of model.h, ctx the
 * communicator): snug_comm_allreduce_f32 with a step wait. On failure it
 * returns false and keeps the message for snug_comm_last_error. */
bool snug_comm_allreduce_hook(float *buf, int64_t n, void *comm);

/* The message of the last failure of the hook ("" when none). */
const char *snug_comm_last_error(const snug_comm *c);

/* Counters of the step waits since the communicator opened: all-reduce
 * calls and the seconds spent in them (the share of the step time that is
 * communication), for benchmarks. */
void snug_comm_allreduce_stats(const snug_comm *c, int64_t *calls, double *seconds);

#endif /* SNUG_COMM_H */
