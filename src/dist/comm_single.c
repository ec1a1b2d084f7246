/*
 * comm_single.c: the communicator of a build without MPI (comm.h): a world
 * of one process, where every collective is a copy or nothing.
 */
#include "comm.h"

#include "base/sysinfo.h"

#if !SNUG_HAVE_MPI /* the communicator of a build without MPI (Makefile: MPI) */

#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

struct snug_comm {
    double step_timeout;
    int32_t row_floats;
};

snug_status snug_comm_start(int *argc, char ***argv, snug_error *err)
{
    (void)argc, (void)argv;
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE"))
        return snug_errorf(err, SNUG_UNSUPPORTED, "tensor parallel: an MPI launcher started "
                           "this snug, which was built without MPI (make MPI=0); rebuild with "
                           "Open MPI's mpicc installed");
    return SNUG_OK;
}

void snug_comm_finish(void) {}

_Noreturn void snug_comm_abort(int code) { exit(code); }

_Noreturn void snug_comm_exit(int code) { exit(code); }

void snug_comm_world(int32_t *size, int32_t *rank)
{
    if (size) *size = 1;
    if (rank) *rank = 0;
}

int32_t snug_comm_default_threads(void) { return snug_cpu_count(); }

snug_status snug_comm_open(int32_t tp, double step_timeout_s, snug_comm **out, snug_error *err)
{
    *out = NULL;
    if (tp != 1)
        return snug_errorf(err, SNUG_UNSUPPORTED, "--tp %d: this snug was built without MPI "
                           "(make MPI=0): only --tp 1 runs", tp);
    if (step_timeout_s <= 0)
        return snug_errorf(err, SNUG_INVALID, "--step-timeout %g: expected more than 0", step_timeout_s);
    snug_comm *c = snug_mem_alloc(SNUG_MEM_OTHER, sizeof *c, err);
    if (!c) return snug_error_prefix(err, SNUG_NOMEM, "tensor parallel: ");
    c->step_timeout = step_timeout_s;
    c->row_floats = 0;
    *out = c;
    return SNUG_OK;
}

void snug_comm_close(snug_comm *c) { snug_mem_free(c); }

void snug_comm_hurry(snug_comm *c, double grace_s) { (void)c, (void)grace_s; }

int32_t snug_comm_rank(const snug_comm *c) { (void)c; return 0; }
int32_t snug_comm_size(const snug_comm *c) { (void)c; return 1; }
bool snug_comm_broken(const snug_comm *c) { (void)c; return false; }

void snug_comm_allreduce_stats(const snug_comm *c, int64_t *calls, double *seconds)
{
    (void)c;
    if (calls) *calls = 0;
    if (seconds) *seconds = 0;
}

snug_status snug_comm_bcast(snug_comm *c, void *buf, size_t bytes, int32_t root, snug_wait w,
                            const char *what, snug_error *err)
{
    (void)c, (void)buf, (void)bytes, (void)root, (void)w, (void)what, (void)err;
    return SNUG_OK;
}

snug_status snug_comm_allreduce_f32(snug_comm *c, float *buf, int64_t n, snug_wait w,
                                    const char *what, snug_error *err)
{
    (void)c, (void)buf, (void)n, (void)w, (void)what, (void)err;
    return SNUG_OK;
}

snug_status snug_comm_allreduce_i64(snug_comm *c, int64_t *v, int32_t n, snug_reduce_op op,
                                    snug_wait w, const char *what, snug_error *err)
{
    (void)c, (void)v, (void)n, (void)op, (void)w, (void)what, (void)err;
    return SNUG_OK;
}

snug_status snug_comm_gather(snug_comm *c, const void *send, size_t bytes, void *recv,
                             int32_t root, snug_wait w, const char *what, snug_error *err)
{
    (void)c, (void)root, (void)w, (void)what, (void)err;
    if (bytes) memmove(recv, send, bytes);
    return SNUG_OK;
}

snug_status snug_comm_allgather(snug_comm *c, const void *send, size_t bytes, void *recv,
                                snug_wait w, const char *what, snug_error *err)
{
    return snug_comm_gather(c, send, bytes, recv, 0, w, what, err);
}

bool snug_comm_allreduce_hook(float *buf, int64_t n, void *comm)
{
    (void)buf, (void)n, (void)comm;
    return true;
}

const char *snug_comm_last_error(const snug_comm *c) { (void)c; return ""; }


snug_status snug_comm_rows_prepare(snug_comm *c, int32_t max_rows, int32_t row_floats,
                                   snug_error *err)
{
    (void)max_rows, (void)err;
    if (c) c->row_floats = row_floats;
    return SNUG_OK;
}

snug_status snug_comm_gather_rows(snug_comm *c, const float *send, int32_t n_rows, float *recv,
                                  int32_t root, snug_wait w, const char *what, snug_error *err)
{
    (void)root, (void)w, (void)what, (void)err;
    if (c && n_rows > 0) memmove(recv, send, (size_t)n_rows * (size_t)c->row_floats * sizeof(float));
    return SNUG_OK;
}

snug_status snug_comm_argmax(snug_comm *c, snug_row_max *rows, int32_t n, int32_t root,
                             snug_wait w, const char *what, snug_error *err)
{
    (void)c, (void)rows, (void)n, (void)root, (void)w, (void)what, (void)err;
    return SNUG_OK;
}
#else
typedef int snug_comm_single_not_built; /* a translation unit is never empty */
#endif
