/*
 * kernels.c: choosing the kernels: what the CPU supports (CPUID and XGETBV),
 * instruction-set names, filling a snug_kernels table. (The size of the
 * scratch memory matmul needs is k_matmul.c's.)
 */
#include "k_impl.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0 through xgetbv, without needing the xsave target for _xgetbv. */
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

snug_isa snug_isa_detect(void)
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
#else
snug_isa snug_isa_detect(void) { return SNUG_ISA_SCALAR; }
#endif

static const char *const insn_names[SNUG_INSN_COUNT] = {"scalar", "vfmadd231ps ymm",
                                                         "vfmadd231ps zmm", "vdpbf16ps zmm"};

const char *snug_insn_name(snug_insn insn)
{
    if ((int)insn < 0 || insn >= SNUG_INSN_COUNT) return "unknown";
    return insn_names[insn];
}

int32_t snug_insn_flops(snug_insn insn)
{
    switch (insn) {
    case SNUG_INSN_FMA_YMM: return 8 * 2;
    case SNUG_INSN_FMA_ZMM: return 16 * 2;
    case SNUG_INSN_DPBF16_ZMM: return 16 * 2 * 2; /* per lane: two products, two adds */
    default: return 0;
    }
}

snug_isa snug_insn_isa(snug_insn insn)
{
    switch (insn) {
    case SNUG_INSN_FMA_YMM: return SNUG_ISA_AVX2;
    case SNUG_INSN_FMA_ZMM: return SNUG_ISA_AVX512;
    case SNUG_INSN_DPBF16_ZMM: return SNUG_ISA_AVX512_BF16;
    default: return SNUG_ISA_SCALAR;
    }
}

static const char *const isa_names[SNUG_ISA_COUNT] = {"scalar", "avx2", "avx512", "avx512bf16"};

const char *snug_isa_name(snug_isa isa)
{
    if ((int)isa < 0 || isa >= SNUG_ISA_COUNT) return "unknown";
    return isa_names[isa];
}

bool snug_isa_from_name(const char *name, snug_isa *out)
{
    if (!name) return false;
    for (int i = 0; i < SNUG_ISA_COUNT; i++) {
        if (strcmp(name, isa_names[i]) == 0) {
            *out = (snug_isa)i;
            return true;
        }
    }
    return false;
}

snug_status snug_kernels_init(snug_kernels *k, snug_isa isa, snug_error *err)
{
    if ((int)isa < 0 || isa >= SNUG_ISA_COUNT)
        return snug_errorf(err, SNUG_INVALID, "unknown instruction set %d", (int)isa);
    snug_isa best = snug_isa_detect();
    if (isa > best)
        return snug_errorf(err, SNUG_UNSUPPORTED,
                           "this CPU cannot run the %s kernels (it supports up to %s)",
                           snug_isa_name(isa), snug_isa_name(best));
    memset(k, 0, sizeof *k);
    switch (isa) {
    case SNUG_ISA_SCALAR: snug_kernels_fill_scalar(k); break;
    case SNUG_ISA_AVX2: snug_kernels_fill_avx2(k); break;
    case SNUG_ISA_AVX512: snug_kernels_fill_avx512(k); break;
    default: snug_kernels_fill_avx512bf16(k); break;
    }
    k->isa = isa;
    return SNUG_OK;
}
