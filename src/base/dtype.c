/*
 * dtype.c: element type names and sizes; f32/f16/bf16 conversions.
 */
#include "dtype.h"

#include "quant.h"

#include <math.h>
#include <string.h>
#include <strings.h>

typedef struct dtype_info {
    const char *name;
    size_t size;
} dtype_info;

static const dtype_info g_dtypes[SNUG_DTYPE_COUNT] = {
    [SNUG_DTYPE_NONE] = {"NONE", 0},
    [SNUG_DTYPE_F64] = {"F64", 8},      [SNUG_DTYPE_F32] = {"F32", 4},
    [SNUG_DTYPE_F16] = {"F16", 2},      [SNUG_DTYPE_BF16] = {"BF16", 2},
    [SNUG_DTYPE_I64] = {"I64", 8},      [SNUG_DTYPE_I32] = {"I32", 4},
    [SNUG_DTYPE_I16] = {"I16", 2},      [SNUG_DTYPE_I8] = {"I8", 1},
    [SNUG_DTYPE_U64] = {"U64", 8},      [SNUG_DTYPE_U32] = {"U32", 4},
    [SNUG_DTYPE_U16] = {"U16", 2},      [SNUG_DTYPE_U8] = {"U8", 1},
    [SNUG_DTYPE_BOOL] = {"BOOL", 1},    [SNUG_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
    [SNUG_DTYPE_F8_E5M2] = {"F8_E5M2", 1}, [SNUG_DTYPE_F8_E8M0] = {"F8_E8M0", 1},
    [SNUG_DTYPE_C64] = {"C64", 8},
    /* the block formats: no size per element (quant.h has their blocks) */
    [SNUG_DTYPE_Q8_0] = {"Q8_0", 0},    [SNUG_DTYPE_Q4_0] = {"Q4_0", 0},
    [SNUG_DTYPE_Q4_1] = {"Q4_1", 0},    [SNUG_DTYPE_Q5_0] = {"Q5_0", 0},
    [SNUG_DTYPE_Q5_1] = {"Q5_1", 0},    [SNUG_DTYPE_Q2_K] = {"Q2_K", 0},
    [SNUG_DTYPE_Q3_K] = {"Q3_K", 0},    [SNUG_DTYPE_Q4_K] = {"Q4_K", 0},
    [SNUG_DTYPE_Q5_K] = {"Q5_K", 0},    [SNUG_DTYPE_Q6_K] = {"Q6_K", 0},
    [SNUG_DTYPE_MXFP8_E4M3] = {"MXFP8_E4M3", 0}, [SNUG_DTYPE_MXFP8_E5M2] = {"MXFP8_E5M2", 0},
};

/* The ggml type of each block format, in the order of snug_dtype. */
static const snug_qtype g_dtype_qtype[] = {
    [SNUG_DTYPE_Q8_0] = SNUG_QTYPE_Q8_0, [SNUG_DTYPE_Q4_0] = SNUG_QTYPE_Q4_0,
    [SNUG_DTYPE_Q4_1] = SNUG_QTYPE_Q4_1, [SNUG_DTYPE_Q5_0] = SNUG_QTYPE_Q5_0,
    [SNUG_DTYPE_Q5_1] = SNUG_QTYPE_Q5_1, [SNUG_DTYPE_Q2_K] = SNUG_QTYPE_Q2_K,
    [SNUG_DTYPE_Q3_K] = SNUG_QTYPE_Q3_K, [SNUG_DTYPE_Q4_K] = SNUG_QTYPE_Q4_K,
    [SNUG_DTYPE_Q5_K] = SNUG_QTYPE_Q5_K, [SNUG_DTYPE_Q6_K] = SNUG_QTYPE_Q6_K,
};

size_t snug_dtype_size(snug_dtype dt)
{
    return dt > 0 && dt < SNUG_DTYPE_COUNT ? g_dtypes[dt].size : 0;
}

const char *snug_dtype_name(snug_dtype dt)
{
    return dt >= 0 && dt < SNUG_DTYPE_COUNT ? g_dtypes[dt].name : "NONE";
}

snug_dtype snug_dtype_from_name(const char *name)
{
    for (int d = 1; d < SNUG_DTYPE_COUNT; d++)
        if (g_dtypes[d].size > 0 && strcmp(name, g_dtypes[d].name) == 0) return (snug_dtype)d;
    return SNUG_DTYPE_NONE;
}

bool snug_dtype_is_quant(snug_dtype dt) { return dt >= SNUG_DTYPE_Q8_0 && dt <= SNUG_DTYPE_Q6_K; }

uint32_t snug_dtype_qtype(snug_dtype dt) { return snug_dtype_is_quant(dt) ? (uint32_t)g_dtype_qtype[dt] : 0; }

snug_dtype snug_dtype_from_qtype(uint32_t t)
{
    for (int d = SNUG_DTYPE_Q8_0; d <= SNUG_DTYPE_Q6_K; d++)
        if ((uint32_t)g_dtype_qtype[d] == t) return (snug_dtype)d;
    return SNUG_DTYPE_NONE;
}

snug_dtype snug_dtype_from_torch(const char *name)
{
    static const struct {
        const char *name;
        snug_dtype dt;
    } names[] = {
        {"bf16", SNUG_DTYPE_BF16}, {"bfloat16", SNUG_DTYPE_BF16},
        {"f16", SNUG_DTYPE_F16},   {"float16", SNUG_DTYPE_F16}, {"half", SNUG_DTYPE_F16},
        {"fp16", SNUG_DTYPE_F16},  {"f32", SNUG_DTYPE_F32},     {"float32", SNUG_DTYPE_F32},
        {"float", SNUG_DTYPE_F32}, {"fp32", SNUG_DTYPE_F32},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(names); i++)
        if (strcasecmp(name, names[i].name) == 0) return names[i].dt;
    return SNUG_DTYPE_NONE;
}

const char *snug_dtype_torch_name(snug_dtype dt)
{
    switch (dt) {
    case SNUG_DTYPE_BF16: return "bfloat16";
    case SNUG_DTYPE_F16: return "float16";
    case SNUG_DTYPE_F32: return "float32";
    default: return "none";
    }
}

bool snug_dtype_is_weight(snug_dtype dt)
{
    return dt == SNUG_DTYPE_F32 || dt == SNUG_DTYPE_F16 || dt == SNUG_DTYPE_BF16;
}

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float snug_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t snug_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    /* branch-free so that loops over it vectorize */
    return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}

float snug_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    uint32_t u;
    if (exp == 0x1F) {
        u = sign | 0x7F800000u | (man << 13) | (man ? 0x00400000u : 0);
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: normalize */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while (!(man & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3FFu) << 13);
    }
    return bits_f32(u);
}

uint16_t snug_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu)); /* NaN */
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds past 65504: inf */
    if (a < 0x38800000u) {                                   /* below 2^-14: subnormal */
        if (a < 0x33000000u) return sign;                    /* below half the least: zero */
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xFFFu + ((a >> 13) & 1u); /* round mantissa to 10 bits, nearest even */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

void snug_convert(void *dst, snug_dtype dst_dtype, const void *src, snug_dtype src_dtype,
                  size_t n)
{
    SNUG_ASSERT(snug_dtype_is_weight(dst_dtype) && snug_dtype_is_weight(src_dtype));
    if (dst_dtype == src_dtype) {
        memmove(dst, src, n * snug_dtype_size(src_dtype));
        return;
    }
    const uint16_t *s16 = src;
    const float *s32 = src;
    uint16_t *d16 = dst;
    float *d32 = dst;
    /* one loop per pair, so that each can be vectorized */
    if (src_dtype == SNUG_DTYPE_F32 && dst_dtype == SNUG_DTYPE_BF16) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d16[i] = snug_f32_to_bf16(s32[i]);
    } else if (src_dtype == SNUG_DTYPE_F32) {
        for (size_t i = 0; i < n; i++) d16[i] = snug_f32_to_f16(s32[i]);
    } else if (src_dtype == SNUG_DTYPE_BF16 && dst_dtype == SNUG_DTYPE_F32) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) d32[i] = snug_bf16_to_f32(s16[i]);
    } else if (src_dtype == SNUG_DTYPE_F16 && dst_dtype == SNUG_DTYPE_F32) {
        for (size_t i = 0; i < n; i++) d32[i] = snug_f16_to_f32(s16[i]);
    } else if (src_dtype == SNUG_DTYPE_BF16) { /* to f16 */
        for (size_t i = 0; i < n; i++) d16[i] = snug_f32_to_f16(snug_bf16_to_f32(s16[i]));
    } else { /* f16 to bf16 */
        for (size_t i = 0; i < n; i++) d16[i] = snug_f32_to_bf16(snug_f16_to_f32(s16[i]));
    }
}

/* An FP8 format's parameters: the shift that puts a code's 7 magnitude
 * bits at the top of a float's exponent and mantissa, the power of two
 * that then makes it the value (2^(127 - bias)), one over the subnormals'
 * step and the steps below the smallest normal (2^mantissa bits), and the
 * largest finite code. */
typedef struct fp8_fmt {
    int shift;
    float unbias, sub;
    uint32_t sub_steps, max_code;
} fp8_fmt;

static fp8_fmt fp8_params(snug_dtype fmt)
{
    if (fmt == SNUG_DTYPE_F8_E5M2) return (fp8_fmt){21, 0x1p112f, 0x1p16f, 4, 0x7B}; /* 57344 */
    return (fp8_fmt){20, 0x1p120f, 0x1p9f, 8, 0x7E};                                /* 448 */
}

float snug_fp8_to_f32(uint8_t c, snug_dtype fmt)
{
    fp8_fmt p = fp8_params(fmt);
    uint32_t bits = (uint32_t)(c & 0x7F) << p.shift;
    float f;
    memcpy(&f, &bits, 4);
    f *= p.unbias;
    return c & 0x80 ? -f : f;
}

uint8_t snug_f32_to_fp8(float y, snug_dtype fmt)
{
    fp8_fmt p = fp8_params(fmt);
    float a = fabsf(y);
    uint32_t code;
    if (!(a <= snug_fp8_to_f32((uint8_t)p.max_code, fmt))) {
        code = p.max_code; /* saturated (NaN too) */
    } else if (a * p.sub < (float)p.sub_steps) {
        code = (uint32_t)lrintf(a * p.sub); /* a subnormal: whole steps (a float's subnormals would round twice) */
    } else {
        float t = a * (1.0f / p.unbias);
        uint32_t bits;
        memcpy(&bits, &t, 4);
        code = (bits + ((1u << (p.shift - 1)) - 1) + ((bits >> p.shift) & 1)) >> p.shift; /* to nearest, ties even */
    }
    return (uint8_t)(code | (signbit(y) ? 0x80u : 0u));
}
