/*
 * plan_report.h: the memory plan's report (planner.h), as `snug profile`
 * prints it and bench/plan repeats it:
 *
 *   loaded weights: X GiB in S s (G GB/s); peak during load P GiB (P/W x)
 *   budget: C (where it came from)
 *   memory plan: budget C = weights W + activations A + serving state S
 *                + untracked U + reserve R + kv cache K        (one line)
 *   kv cache: N blocks of B tokens (T tokens, dtype D), limited by L; max
 *             concurrency at M tokens: X.XXx                   (one line)
 *   [max_model_len: ... when the model's did not fit]
 *   profile step: ...; kv cache populated in ... s
 *   left over: ..., less than one block of ...
 */
#ifndef SNUG_PLAN_REPORT_H
#define SNUG_PLAN_REPORT_H

#include "base/common.h"
#include "budget.h"
#include "dist/comm.h"
#include "kernels/kernels.h"
#include "model/loader.h"
#include "plan.h"

#include <jansson.h>

#include <stdio.h>

/* One rank's part of the plan, as rank 0 reports it. */
typedef struct snug_rank_plan {
    uint64_t weights_predicted;    /* the rank's parameter bytes by the table */
    uint64_t weights;              /* the bytes its parameters are laid out in */
    uint64_t load_peak;            /* the peak during its load */
    uint64_t bytes_read;           /* from the checkpoint's files */
    uint64_t activations, serving_state, untracked, kv_held;
    int64_t kv_blocks_own;         /* what its budget alone gave */
    uint64_t profile_hwm;          /* its high-water mark in the profile step */
} snug_rank_plan;

/* What the plan found, for the report. */
typedef struct snug_plan_report {
    snug_budget budget;
    snug_load_stats load;
    size_t code_bytes;             /* the program's and libraries' segments made resident */
    size_t baseline_rss;           /* at start, before loading (with that code) */
    size_t weights;                /* W: what the allocator charges the weights */
    size_t activations;            /* A: the activations' peak since the reset */
    size_t serving_state;          /* S (with the block pool, made after the plan) */
    size_t serving_block;          /* of which the serving state's own block */
    snug_profile_result profile;   /* U and the step */
    snug_plan_sizes sizes;
    snug_kv_plan kv;
    int64_t max_model_len_reduced_from; /* the model's length, when it did not fit and
                                         * max_model_len was not given; else 0 */
    snug_dtype kv_dtype;
    size_t kv_held;                /* what the allocator charges the cache */
    double populate_seconds;       /* making the cache resident (reserving it, when after
                                    * ready: snug_planned's populate_seconds has the rest) */
    bool populated_after_ready;    /* made resident by snug_planner_populate_next */
    size_t capacity;               /* set after the plan: C - U - R, plus server_tracked */
    int32_t tp, rank;              /* this rank of tp */
    int64_t kv_blocks_own;         /* what this rank's budget alone gave (before the minimum
                                    * over the ranks) */
    bool prefix_caching;           /* the block pool caches prefixes */
    int64_t vision_tensors;        /* a multimodal checkpoint's tensors outside its text model
                                    * (its vision tower), not loaded ... */
    uint64_t vision_bytes;         /* ... and their bytes */
    int32_t window;                /* the windowed layers' window, when they keep only it ... */
    int32_t window_layers;         /* ... of this many layers (0: one group) ... */
    int64_t window_blocks;         /* ... in blocks of their own, for the windows of ... */
    int32_t window_seqs;           /* ... this many sequences at once (the most that run) ... */
    size_t window_held;            /* ... and what the allocator charges them and their pool */
    size_t window_kv_block;        /* ... of which the charge of their cache's one block */
    size_t draft_weights;          /* a draft model's weights (part of W); 0: none */
    int32_t draft_layers;          /* its layers */
    snug_kernels kernels;          /* what the steps run: ISA, bf16 instruction, calibration */
    snug_dtype weight_dtype;       /* the weights' element type */
    int32_t threads;               /* the threads every step runs on */
    snug_rank_plan ranks[SNUG_TP_MAX]; /* every rank's, on rank 0 (tp > 1) */
} snug_plan_report;

/* "budget C = weights W + ... + kv cache K" into buf (size bytes,
 * truncated to fit); returns buf. */
char *snug_plan_report_line(const snug_plan_report *r, char *buf, size_t size);

/* The instruction set the steps run ("avx512bf16", ...: $SNUG_ISA or
 * --isa where given, else the best the machine has). */
const char *snug_plan_report_isa(const snug_plan_report *r);

/* Prints the report in words to f. */
void snug_plan_report_print(FILE *f, const snug_plan_report *r);

/* The report as one line of JSON (keys as the README lists them) in a new
 * block of category other (free it with snug_mem_free); NULL when out of
 * memory. */
char *snug_plan_report_json(const snug_plan_report *r);

/* The kernels the steps run, as a new JSON object: {"isa", "threads",
 * "weight_dtype", "matmul" and "matvec" (the instruction the matmuls of
 * these weights run above 4 rows of x, and up to 4), "bf16_matmul" (the
 * instruction bf16 weights' GEMM runs), and
 * "calibration_gflops" (what snug_kernels_calibrate measured, per
 * instruction; empty where it had nothing to choose)}. The plan's JSON and
 * /version carry it. */
json_t *snug_plan_kernels_json(const snug_plan_report *r);

#endif /* SNUG_PLAN_REPORT_H */
