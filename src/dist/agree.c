/*
 * agree.c: start-up agreement between the ranks (agree.h).
 */
#include "agree.h"

#include "base/mem.h"
#include "base/fileio.h"
#include "snug.h"

#include <stdio.h>
#include <string.h>

snug_status snug_dist_agree(snug_comm *c, snug_status st, snug_error *err)
{
    if (!c || snug_comm_size(c) == 1) return st;
    int32_t size = snug_comm_size(c), rank = snug_comm_rank(c);
    snug_error own = {0};
    if (err && st != SNUG_OK) own = *err;
    int64_t first = st != SNUG_OK ? rank : size;
    snug_status cst = snug_comm_allreduce_i64(c, &first, 1, SNUG_REDUCE_MIN, SNUG_WAIT_START,
                                              "the start-up agreement", err);
    if (cst != SNUG_OK) return cst;
    if (first == size) return SNUG_OK;
    struct { int32_t status; char msg[SNUG_ERROR_MSG_BYTES]; } wire = {st, ""};
    snprintf(wire.msg, sizeof wire.msg, "%s", own.msg[0] ? own.msg : snug_status_str(st));
    cst = snug_comm_bcast(c, &wire, sizeof wire, (int32_t)first, SNUG_WAIT_START,
                          "the start-up agreement's message", err);
    if (cst != SNUG_OK) return cst;
    wire.msg[sizeof wire.msg - 1] = 0;
    return snug_errorf(err, (snug_status)wire.status, "rank %lld of %d: %s", (long long)first,
                       size, wire.msg);
}

/* Hashes the first n bytes of the open file fd into *h. */
static snug_status hash_prefix(int fd, uint64_t n, const char *path, uint64_t *h, snug_error *err)
{
    unsigned char buf[16384];
    for (uint64_t off = 0; off < n;) {
        size_t k = (size_t)SNUG_MIN((uint64_t)sizeof buf, n - off);
        snug_status st = snug_pread_full(fd, buf, k, off, path, err);
        if (st != SNUG_OK) return st;
        *h = snug_hash_bytes(*h, buf, k);
        off += k;
    }
    return SNUG_OK;
}

snug_status snug_checkpoint_hashes(const snug_checkpoint *ck, uint64_t *config,
                                   uint64_t *headers, snug_error *err)
{
    char path[4096];
    char *text = NULL;
    size_t len = 0;
    snug_status st = SNUG_OK;
    if (ck->gguf) { /* its configuration is in its header (hashed below); the parse of it, zeroed padding */
        *config = snug_hash_bytes(SNUG_HASH_SEED, &ck->config, sizeof ck->config);
    } else {
        st = snug_path_join(path, sizeof path, ck->dir, "config.json", err);
        if (st == SNUG_OK) st = snug_file_read_all(path, 16u << 20, &text, &len, err);
        if (st != SNUG_OK) return st;
        *config = snug_hash_bytes(SNUG_HASH_SEED, text, len);
        snug_mem_free(text);
    }
    uint64_t h = snug_hash_bytes(SNUG_HASH_SEED, &ck->n_files, sizeof ck->n_files);
    for (int32_t i = 0; i < ck->n_files && st == SNUG_OK; i++) {
        const snug_st_file *f = ck->files[i];
        h = snug_hash_bytes(h, &f->file_size, sizeof f->file_size);
        st = hash_prefix(f->fd, f->data_start, f->path, &h, err);
    }
    *headers = h;
    return st;
}

snug_status snug_dist_check_model(snug_comm *c, const snug_checkpoint *ck, snug_error *err)
{
    if (!c || snug_comm_size(c) == 1) return SNUG_OK;
    int32_t size = snug_comm_size(c);
    uint64_t mine[3] = {snug_hash_bytes(SNUG_HASH_SEED, SNUG_VERSION, strlen(SNUG_VERSION)), 0, 0};
    snug_status st = snug_checkpoint_hashes(ck, &mine[1], &mine[2], err);
    st = snug_dist_agree(c, st, err);
    if (st != SNUG_OK) return st;
    uint64_t all[3 * 64];
    if (size > 64) return snug_errorf(err, SNUG_INVALID, "--tp %d: at most 64 ranks", size);
    st = snug_comm_allgather(c, mine, sizeof mine, all, SNUG_WAIT_START, "the model check", err);
    if (st != SNUG_OK) return st;
    static const char *const what[3] = {"snug version (" SNUG_VERSION " on rank 0)",
                                        "config.json", "checkpoint (safetensors headers)"};
    for (int32_t k = 1; k < size; k++)
        for (int j = 0; j < 3; j++)
            if (all[3 * k + j] != all[j])
                return snug_errorf(err, SNUG_INVALID, "tensor parallel: rank %d of %d has another "
                                   "%s than rank 0 (hash %016llx, rank 0 %016llx): every rank "
                                   "must run the same snug on the same model directory", k, size,
                                   what[j], (unsigned long long)all[3 * k + j],
                                   (unsigned long long)all[j]);
    return SNUG_OK;
}
