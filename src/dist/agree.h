/*
 * agree.h: what the ranks of a tensor-parallel run must agree on before
 * they run together: that every rank started (each brings its status to a
 * point all reach; the first failure becomes everyone's, with its message),
 * and that every rank runs the same snug on the same model (hashes of the
 * version, config.json's bytes and the checkpoint's headers compared with
 * rank 0's).
 */
#ifndef SNUG_AGREE_H
#define SNUG_AGREE_H

#include "base/common.h"
#include "base/hash.h"
#include "comm.h"
#include "formats/checkpoint.h"

/* Every rank calls this with its own st (and, when st fails, its message
 * in err). All return the status of the lowest rank that failed, with that
 * rank's message prefixed "rank K of N: " (the same text on every rank), or
 * SNUG_OK when none did. With c NULL or one rank: returns st. Waits without
 * a limit (start-up). A failure of the communicator itself is returned as
 * it is. Call it with a status no agreement has seen yet (a status already
 * agreed is every rank's: pass it on, do not agree it again). */
snug_status snug_dist_agree(snug_comm *c, snug_status st, snug_error *err);

/* The hash of what every rank must share about ck: config.json's bytes
 * (*config) and every safetensors file's header bytes and size (*headers).
 * Fails with SNUG_IO when a file cannot be read. */
snug_status snug_checkpoint_hashes(const snug_checkpoint *ck, uint64_t *config,
                                   uint64_t *headers, snug_error *err);

/* Checks that every rank has the same version (SNUG_VERSION), config.json
 * and checkpoint headers as rank 0. Every rank must have opened ck (agree
 * on the opens first). All ranks return the same status: SNUG_INVALID
 * naming the first rank that differs and in what, a rank's SNUG_IO when it
 * could not read its files, or SNUG_OK. */
snug_status snug_dist_check_model(snug_comm *c, const snug_checkpoint *ck, snug_error *err);

#endif /* SNUG_AGREE_H */
