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

#include "planner.h"

#include <jansson.h>

#include <stdio.h>

/* "budget C = weights W + ... + kv cache K" into buf (size bytes,
 * truncated to fit); returns buf. */
char *snug_plan_report_line(const snug_plan_report *r, char *buf, size_t size);

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
