/*
 * cpu.c: the one place the kernels read CPUID and XGETBV (cpu.h);
 * snug_isa_detect (kernels.h) is its instruction set.
 */
#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0 through xgetbv, without needing the xsave target for _xgetbv. */
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* The instruction set: AVX2 needs FMA, F16C and the OS saving YMM state;
 * AVX-512 needs F, DQ, BW, VL and the OS saving opmask and ZMM state. */
static snug_isa probe_isa(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return SNUG_ISA_SCALAR;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28),
         f16c = c & (1u << 29);
    if (!(osxsave && avx && fma && f16c)) return SNUG_ISA_SCALAR;
    uint64_t xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) return SNUG_ISA_SCALAR; /* the OS saves XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return SNUG_ISA_SCALAR;
    if (!(b & (1u << 5))) return SNUG_ISA_SCALAR; /* AVX2 */
    bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) &&
                  (b & (1u << 31)); /* F, DQ, BW, VL */
    if (!avx512 || (xcr0 & 0xE0) != 0xE0) return SNUG_ISA_AVX2; /* opmask, ZMM state */
    unsigned max7 = a;
    if (max7 >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)))
        return SNUG_ISA_AVX512_BF16;
    return SNUG_ISA_AVX512;
}

snug_cpu snug_cpu_probe(void)
{
    snug_cpu cpu = {probe_isa(), false, false};
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        cpu.avx512_vnni = c & (1u << 11);
        cpu.avx_vnni = a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
    }
    return cpu;
}
#else
snug_cpu snug_cpu_probe(void) { return (snug_cpu){SNUG_ISA_SCALAR, false, false}; }
#endif

snug_isa snug_isa_detect(void) { return snug_cpu_probe().isa; }
