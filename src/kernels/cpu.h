/*
 * cpu.h: what the CPU and the OS let the kernels run, read from CPUID and
 * XGETBV in one place (cpu.c). A leaf of kernels/: kernels.c chooses the
 * table by it and k_quant.c its integer paths, and it calls nothing of
 * theirs. Nothing is cached: each call reads the CPU again (a few hundred
 * cycles), so a caller that asks often keeps the answer.
 */
#ifndef SNUG_CPU_H
#define SNUG_CPU_H

#include "kernels.h"

/* What one probe of the CPU found. */
typedef struct snug_cpu {
    snug_isa isa;     /* the highest instruction set it runs (snug_isa_detect) */
    bool avx_vnni;    /* AVX-VNNI: vpdpbusd on ymm (CPUID leaf 7 subleaf 1, EAX bit 4) */
    bool avx512_vnni; /* AVX-512 VNNI: vpdpbusd on zmm too (leaf 7, ECX bit 11) */
} snug_cpu;

/* Reads CPUID and XGETBV. Pure apart from reading the CPU; never fails
 * (a CPU that cannot say is scalar, without VNNI; so is every non-x86 one). */
snug_cpu snug_cpu_probe(void);

#endif /* SNUG_CPU_H */
