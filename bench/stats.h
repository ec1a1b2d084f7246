/*
 * stats.h: order statistics of a bench's timings, shared by the bench
 * programs (header only, as limits.h).
 */
#ifndef SNUG_BENCH_STATS_H
#define SNUG_BENCH_STATS_H

#include <stdlib.h>

/* qsort's order of two doubles. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0 .. n) (sorts v): the middle value, the mean of the
 * two middle ones for an even n; 0 for none. */
static inline double bench_median(double *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The value a fraction q (0 .. 1) of the way up v[0 .. n) (sorts v; n > 0):
 * 0 the least, 1 the greatest. */
static inline double bench_percentile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[(int)(q * (n - 1))];
}

#endif
