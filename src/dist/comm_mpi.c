/*
 * comm_mpi.c: the communicator over MPI (comm.h). Collectives are MPI's
 * non-blocking ones, completed by a polling wait that is also the
 * watchdog of the step.
 */
#include "comm.h"

#include "base/sysinfo.h"

#if SNUG_HAVE_MPI /* the communicator of a build with MPI (Makefile: MPI) */

#include "base/mem.h"

#include <mpi.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct snug_comm {
    MPI_Comm comm;
    int32_t size, rank;
    double step_timeout;
    bool broken;
    _Atomic double hurry_at;   /* when snug_comm_hurry was last called (0: never) */
    _Atomic double hurry_grace; /* and the grace it gave a step wait */
    snug_error last;           /* the hook's last failure */
    MPI_Datatype *row_types;   /* [max_rows] n rows of row_floats, rank to rank row_floats
                                * apart in the whole rows (snug_comm_rows_prepare) */
    int32_t max_rows, row_floats;
    int64_t allreduce_calls;
    double allreduce_seconds;
};

/* Fails with the call site when an MPI call does not succeed. */
#define CHECK_MPI(c, call, what, err)                                                       \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        if (rc_ != MPI_SUCCESS) return mpi_failed((c), rc_, #call, (what), __LINE__, (err)); \
    } while (0)

static snug_status mpi_failed(snug_comm *c, int rc, const char *call, const char *what, int line,
                              snug_error *err)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    MPI_Error_string(rc, msg, &n);
    if (c) c->broken = true;
    return snug_errorf(err, SNUG_IO, "tensor parallel: %s: %s failed (comm_mpi.c:%d): %s", what,
                       call, line, msg);
}

static bool launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE",
                                       "PMI_RANK"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(vars); i++)
        if (getenv(vars[i])) return true;
    return false;
}

snug_status snug_comm_start(int *argc, char ***argv, snug_error *err)
{
    if (!launched_by_mpi()) return SNUG_OK;
    /* Unbound, each rank discovers the machine itself, and hwloc then loads
     * every plugin it has: OpenGL, OpenCL, PCI and libxml2 (with ICU's 30 MB
     * of data), about 40 MB that a CPU server never uses but whose pages the
     * plan counts. The user's own setting wins. */
    setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl,hwloc_pci,hwloc_xml_libxml", 0);
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return snug_errorf(err, SNUG_IO, "tensor parallel: MPI_Init_thread failed");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return snug_errorf(err, SNUG_UNSUPPORTED, "tensor parallel: this MPI offers thread level "
                           "%d, snug needs MPI_THREAD_SERIALIZED", provided);
    }
    return SNUG_OK;
}

void snug_comm_finish(void)
{
    int on = 0, off = 0;
    MPI_Initialized(&on);
    MPI_Finalized(&off);
    if (on && !off) MPI_Finalize();
}

_Noreturn void snug_comm_abort(int code)
{
    int on = 0, off = 0;
    MPI_Initialized(&on);
    MPI_Finalized(&off);
    fflush(stdout);
    fflush(stderr);
    if (on && !off) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

_Noreturn void snug_comm_exit(int code)
{
    fflush(stdout);
    fflush(stderr);
    _exit(code); /* no atexit handlers: MPI's would wait for the launcher too */
}

void snug_comm_world(int32_t *size, int32_t *rank)
{
    int on = 0, off = 0, s = 1, r = 0;
    MPI_Initialized(&on);
    MPI_Finalized(&off);
    if (on && !off) {
        MPI_Comm_size(MPI_COMM_WORLD, &s);
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    }
    if (size) *size = s;
    if (rank) *rank = r;
}

int32_t snug_comm_default_threads(void)
{
    int procs = snug_cpu_count();       /* the cores this process may run on */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int local = ls ? atoi(ls) : 1;
    if (local > 1 && procs >= online) procs /= local; /* not bound: the host's cores shared */
    return procs > 0 ? procs : 1;
}

snug_status snug_comm_open(int32_t tp, double step_timeout_s, snug_comm **out, snug_error *err)
{
    *out = NULL;
    int32_t size = 1, rank = 0;
    snug_comm_world(&size, &rank);
    if (tp < 1 || step_timeout_s <= 0)
        return snug_errorf(err, SNUG_INVALID, "tensor parallel: --tp %d, --step-timeout %g: "
                           "expected at least 1 and more than 0", tp, step_timeout_s);
    if (tp != size) {
        if (size == 1)
            return snug_errorf(err, SNUG_INVALID, "--tp %d: this is one process; start %d with "
                               "mpirun -np %d snug ... --tp %d", tp, tp, tp, tp);
        return snug_errorf(err, SNUG_INVALID, "--tp %d: mpirun started %d processes; tp must "
                           "equal the number of processes (mpirun -np %d)", tp, size, tp);
    }
    snug_comm *c = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *c, err);
    if (!c) return snug_error_prefix(err, SNUG_NOMEM, "tensor parallel: ");
    memset(c, 0, sizeof *c);
    c->comm = MPI_COMM_NULL;
    c->size = size, c->rank = rank, c->step_timeout = step_timeout_s;
    atomic_init(&c->hurry_at, 0.0);
    atomic_init(&c->hurry_grace, 0.0);
    if (size > 1) {
        /* a communicator of snug's own, so that no other user of MPI_COMM_WORLD crosses it */
        if (MPI_Comm_dup(MPI_COMM_WORLD, &c->comm) != MPI_SUCCESS) {
            snug_mem_free(c);
            return snug_errorf(err, SNUG_IO, "tensor parallel: MPI_Comm_dup failed");
        }
        MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    }
    *out = c;
    return SNUG_OK;
}

static void free_row_types(snug_comm *c)
{
    for (int32_t i = 0; c->row_types && i < c->max_rows; i++)
        if (c->row_types[i] != MPI_DATATYPE_NULL) MPI_Type_free(&c->row_types[i]);
    snug_mem_free(c->row_types);
    c->row_types = NULL;
    c->max_rows = 0;
}

void snug_comm_close(snug_comm *c)
{
    if (!c) return;
    free_row_types(c);
    if (c->comm != MPI_COMM_NULL && !c->broken) MPI_Comm_free(&c->comm);
    snug_mem_free(c);
}

int32_t snug_comm_rank(const snug_comm *c) { return c->rank; }
int32_t snug_comm_size(const snug_comm *c) { return c->size; }
bool snug_comm_broken(const snug_comm *c) { return c->broken; }

void snug_comm_hurry(snug_comm *c, double grace_s)
{
    if (!c || c->size == 1) return;
    atomic_store(&c->hurry_grace, SNUG_MIN(grace_s, c->step_timeout));
    atomic_store(&c->hurry_at, snug_now_seconds());
}

void snug_comm_allreduce_stats(const snug_comm *c, int64_t *calls, double *seconds)
{
    if (calls) *calls = c->allreduce_calls;
    if (seconds) *seconds = c->allreduce_seconds;
}

static void pause_for(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* Completes rq: a step wait yields between tests and gives up after the
 * step timeout, or sooner in a hurry (snug_comm_hurry); idle and start-up
 * waits sleep (50 us, then 1 ms) and do not give up. */
static snug_status wait_for(snug_comm *c, MPI_Request *rq, snug_wait w, const char *what,
                            snug_error *err)
{
    double t0 = snug_now_seconds();
    for (long polls = 0;; polls++) {
        int done = 0;
        CHECK_MPI(c, MPI_Test(rq, &done, MPI_STATUS_IGNORE), what, err);
        if (done) return SNUG_OK;
        if (w == SNUG_WAIT_STEP) {
            if (polls < 4096) sched_yield();
            else pause_for(20000);
            double now = snug_now_seconds(), at = atomic_load(&c->hurry_at);
            if (now - t0 > c->step_timeout) {
                c->broken = true;
                return snug_errorf(err, SNUG_IO, "tensor parallel: rank %d waited %g s for %s: a "
                                   "rank died or hangs (--step-timeout %g)", c->rank,
                                   c->step_timeout, what, c->step_timeout);
            }
            if (at > 0 && t0 < at + SNUG_COMM_HURRY_WINDOW &&
                now - SNUG_MAX(t0, at) > atomic_load(&c->hurry_grace)) {
                c->broken = true;
                return snug_errorf(err, SNUG_IO, "tensor parallel: rank %d waited %.1f s for %s "
                                   "after the launcher began ending the run (as it does when a "
                                   "process dies): a rank died or hangs", c->rank,
                                   now - SNUG_MAX(t0, at), what);
            }
        } else {
            pause_for(polls < 200 ? 50000 : 1000000);
        }
    }
}

static snug_status usable(snug_comm *c, const char *what, snug_error *err)
{
    if (!c->broken) return SNUG_OK;
    return snug_errorf(err, SNUG_IO, "tensor parallel: %s: the communicator is broken by an "
                       "earlier failure", what);
}

snug_status snug_comm_bcast(snug_comm *c, void *buf, size_t bytes, int32_t root, snug_wait w,
                            const char *what, snug_error *err)
{
    if (!c || c->size == 1 || bytes == 0) return SNUG_OK;
    snug_status st = usable(c, what, err);
    if (st != SNUG_OK) return st;
    if (bytes > INT32_MAX) return snug_errorf(err, SNUG_INVALID, "tensor parallel: %s: %zu bytes", what, bytes);
    MPI_Request rq;
    CHECK_MPI(c, MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, c->comm, &rq), what, err);
    return wait_for(c, &rq, w, what, err);
}

snug_status snug_comm_allreduce_f32(snug_comm *c, float *buf, int64_t n, snug_wait w,
                                    const char *what, snug_error *err)
{
    if (!c || c->size == 1 || n == 0) return SNUG_OK;
    snug_status st = usable(c, what, err);
    if (st != SNUG_OK) return st;
    if (n > INT32_MAX) return snug_errorf(err, SNUG_INVALID, "tensor parallel: %s: %lld floats", what, (long long)n);
    double t0 = snug_now_seconds();
    MPI_Request rq;
    CHECK_MPI(c, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->comm, &rq), what, err);
    st = wait_for(c, &rq, w, what, err);
    c->allreduce_calls++;
    c->allreduce_seconds += snug_now_seconds() - t0;
    return st;
}

snug_status snug_comm_allreduce_i64(snug_comm *c, int64_t *v, int32_t n, snug_reduce_op op,
                                    snug_wait w, const char *what, snug_error *err)
{
    if (!c || c->size == 1 || n == 0) return SNUG_OK;
    snug_status st = usable(c, what, err);
    if (st != SNUG_OK) return st;
    MPI_Op mop = op == SNUG_REDUCE_MIN ? MPI_MIN : op == SNUG_REDUCE_MAX ? MPI_MAX : MPI_SUM;
    MPI_Request rq;
    CHECK_MPI(c, MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, mop, c->comm, &rq), what, err);
    return wait_for(c, &rq, w, what, err);
}

/* A gather of bytes from every rank onto root, or onto all (root < 0). */
static snug_status gather(snug_comm *c, const void *send, size_t bytes, void *recv, int32_t root,
                          snug_wait w, const char *what, snug_error *err)
{
    if (!c || c->size == 1) {
        if (bytes) memmove(recv, send, bytes);
        return SNUG_OK;
    }
    snug_status st = usable(c, what, err);
    if (st != SNUG_OK) return st;
    if (bytes > INT32_MAX) return snug_errorf(err, SNUG_INVALID, "tensor parallel: %s: %zu bytes", what, bytes);
    MPI_Request rq;
    int n = (int)bytes;
    if (root >= 0)
        CHECK_MPI(c, MPI_Igather(send, n, MPI_BYTE, recv, n, MPI_BYTE, root, c->comm, &rq), what, err);
    else
        CHECK_MPI(c, MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, c->comm, &rq), what, err);
    return wait_for(c, &rq, w, what, err);
}

snug_status snug_comm_gather(snug_comm *c, const void *send, size_t bytes, void *recv,
                             int32_t root, snug_wait w, const char *what, snug_error *err)
{
    return gather(c, send, bytes, recv, root, w, what, err);
}

snug_status snug_comm_allgather(snug_comm *c, const void *send, size_t bytes, void *recv,
                                snug_wait w, const char *what, snug_error *err)
{
    return gather(c, send, bytes, recv, -1, w, what, err);
}

bool snug_comm_allreduce_hook(float *buf, int64_t n, void *comm)
{
    snug_comm *c = comm;
    return snug_comm_allreduce_f32(c, buf, n, SNUG_WAIT_STEP, "the all-reduce of a layer",
                                   &c->last) == SNUG_OK;
}

const char *snug_comm_last_error(const snug_comm *c) { return c->last.msg; }

snug_status snug_comm_rows_prepare(snug_comm *c, int32_t max_rows, int32_t row_floats,
                                   snug_error *err)
{
    if (!c || c->size == 1) return SNUG_OK;
    free_row_types(c);
    if (max_rows < 1 || row_floats < 1 || (int64_t)row_floats * c->size > INT32_MAX)
        return snug_errorf(err, SNUG_INVALID, "tensor parallel: rows of %d floats, %d of them",
                           row_floats, max_rows);
    c->row_types = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)max_rows * sizeof(MPI_Datatype), err);
    if (!c->row_types) return snug_error_prefix(err, SNUG_NOMEM, "tensor parallel: ");
    c->max_rows = max_rows, c->row_floats = row_floats;
    for (int32_t i = 0; i < max_rows; i++) c->row_types[i] = MPI_DATATYPE_NULL;
    for (int32_t i = 0; i < max_rows; i++) {
        /* i + 1 rows, whole rows apart, its extent one slice: rank k's lands k slices in */
        MPI_Datatype rows;
        CHECK_MPI(c, MPI_Type_vector(i + 1, row_floats, row_floats * c->size, MPI_FLOAT, &rows),
                  "the logits' row type", err);
        int rc = MPI_Type_create_resized(rows, 0, (MPI_Aint)row_floats * (MPI_Aint)sizeof(float),
                                         &c->row_types[i]);
        MPI_Type_free(&rows);
        if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&c->row_types[i]);
        if (rc != MPI_SUCCESS)
            return mpi_failed(c, rc, "MPI_Type_create_resized", "the logits' row type", __LINE__, err);
    }
    return SNUG_OK;
}

snug_status snug_comm_gather_rows(snug_comm *c, const float *send, int32_t n_rows, float *recv,
                                  int32_t root, snug_wait w, const char *what, snug_error *err)
{
    if (!c || c->size == 1) {
        if (n_rows > 0 && c && c->row_floats > 0)
            memmove(recv, send, (size_t)n_rows * (size_t)c->row_floats * sizeof(float));
        return SNUG_OK;
    }
    snug_status st = usable(c, what, err);
    if (st != SNUG_OK) return st;
    if (n_rows < 0 || n_rows > c->max_rows)
        return snug_errorf(err, SNUG_INVALID, "tensor parallel: %s: %d rows (prepared for %d)",
                           what, n_rows, c->max_rows);
    if (n_rows == 0) return SNUG_OK;
    MPI_Request rq;
    CHECK_MPI(c, MPI_Igather(send, n_rows * c->row_floats, MPI_FLOAT, recv, 1,
                             c->row_types[n_rows - 1], root, c->comm, &rq), what, err);
    return wait_for(c, &rq, w, what, err);
}


snug_status snug_comm_argmax(snug_comm *c, snug_row_max *rows, int32_t n, int32_t root,
                             snug_wait w, const char *what, snug_error *err)
{
    if (!c || c->size == 1 || n == 0) return SNUG_OK;
    snug_status st = usable(c, what, err);
    if (st != SNUG_OK) return st;
    MPI_Request rq;
    CHECK_MPI(c, MPI_Ireduce(c->rank == root ? MPI_IN_PLACE : rows, rows, n, MPI_FLOAT_INT,
                             MPI_MAXLOC, root, c->comm, &rq), what, err);
    return wait_for(c, &rq, w, what, err);
}
#else
typedef int snug_comm_mpi_not_built; /* a translation unit is never empty */
#endif
