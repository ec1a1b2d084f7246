/*
 * k_x8.c: rows of x quantized to 8 bits as snug_x8_quantize does
 * (qdot.h), in AVX2 vectors, bit for bit: the 8-bit GEMMs' (k_qgemm.c,
 * k_qlanes.c) quantizer.
 */
#include "k_impl.h"

#include "base/dtype.h"
#include "base/quant.h"
#include "qdot.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include "k_quant_unpack.h"

/* Chunks per scale of x (snug_x8_quantize: 256 values for the K-quants,
 * 32 for the others). */
static int64_t x_group_chunks(snug_qtype t) { return snug_qtype_block(t) == 256 ? 8 : 1; }

/* The horizontal maximum of 8 lanes. */
T_Q_INL float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

T_Q void snug_x8_quantize_avx2(const float *x, int64_t k, snug_dtype wdt, snug_x8_block *out)
{
    const int64_t group = x_group_chunks((snug_qtype)snug_dtype_qtype(wdt)) * 32;
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    for (int64_t g = 0; g < k / group; g++) {
        const float *xg = x + g * group;
        __m256 amax = _mm256_setzero_ps();
        for (int64_t i = 0; i < group; i += 8) /* a NaN's lane keeps amax, as in the scalar loop */
            amax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xg + i), abs_mask), amax);
        float am = hmax8(amax), d = am / 127.0f;
        if (group == 32) d = snug_f16_to_f32(snug_f32_to_f16(d));
        __m256 id = _mm256_set1_ps(am > 0.0f ? 127.0f / am : 0.0f);
        for (int64_t b = 0; b < group / 32; b++) {
            snug_x8_block *o = &out[g * (group / 32) + b];
            o->d = d;
            __m256i v[4];
            for (int q = 0; q < 4; q++) {
                __m256 f = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(xg + 32 * b + 8 * q), id), magic);
                __m256i i = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), _mm256_set1_epi32(0x007FFFFF)),
                                             _mm256_set1_epi32(0x00400000));
                v[q] = _mm256_min_epi32(_mm256_max_epi32(i, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
            }
            /* to bytes in order: the packs work within 128-bit halves, the permute puts them back */
            __m256i w16 = _mm256_packs_epi32(v[0], v[1]), x16 = _mm256_packs_epi32(v[2], v[3]);
            __m256i b8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16, x16), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            store256(o->q, b8);
            for (int h = 0; h < 2; h++) {
                __m256i s = _mm256_add_epi32(v[2 * h], v[2 * h + 1]);
                __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
                t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
                o->sum16[h] = (int16_t)_mm_cvtsi128_si32(t);
            }
        }
    }
}

#else
void snug_x8_quantize_avx2(const float *x, int64_t k, snug_dtype wdt, snug_x8_block *out)
{
    snug_x8_quantize(x, k, wdt, out);
}
#endif
