/*
 * fcfs.h: a first-come batcher over a planned state (planner.h), for stress
 * runs of the step loop: what the memory plan's guarantees are tested and
 * measured with (tests/test_planner.c, bench/plan). The serving scheduler
 * supersedes it and must keep those tests passing.
 *
 * Each step: admit waiting jobs in order while a slot is free and the block
 * pool holds blocks for a job's whole length (prompt + output); then decode
 * every running job that is past its prompt, then fill the step with prompt
 * chunks up to max_num_batched_tokens; run the forward pass, sample every
 * row it returns, and give back the blocks of a job whose output is done.
 * Prompts are synthetic token ids. Nothing is allocated.
 */
#ifndef SNUG_FCFS_H
#define SNUG_FCFS_H

#include "planner.h"

/* One job; the caller sets prompt and output (>= 1 each, together at most
 * max_model_len), the rest is the batcher's. */
typedef struct snug_fcfs_job {
    int32_t prompt, output;
    int32_t slot;           /* its slot while running; -1 otherwise */
    int32_t done;           /* tokens through the model */
    int32_t generated;      /* tokens sampled */
    int32_t in_step;        /* its index in the step being run; -1: none */
} snug_fcfs_job;

typedef struct snug_fcfs_stats {
    int32_t finished;       /* jobs whose output is done */
    int32_t waits;          /* admissions that found too few free blocks */
    int32_t steps;
    int64_t tokens;         /* through the model */
    int32_t most_running;   /* the most jobs running at once */
} snug_fcfs_stats;

/* Runs jobs[0..n_jobs) through p until all are done or max_steps steps
 * have run (0: no limit). Fails with SNUG_INVALID for a job that cannot
 * fit (too long for max_model_len or for the whole cache: it would wait
 * forever), or with the forward pass's error; *out holds what was done. */
snug_status snug_fcfs_run(snug_planned *p, snug_fcfs_job *jobs, int32_t n_jobs, int32_t max_steps,
                          snug_fcfs_stats *out, snug_error *err);

#endif /* SNUG_FCFS_H */
