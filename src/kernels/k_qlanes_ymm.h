/*
 * k_qlanes_ymm.h: the interleaved formats' matrix-vector product and GEMM
 * on ymm (k_qlanes.c's zmm paths with 8 lanes: a panel's rows in two
 * halves), included by k_qlanes.c once per instruction with these defined:
 *   QLY_NAME(x)  the name x with the instruction's suffix
 *   QLY_T        the target attribute of its functions
 *   QLY_INL      the same, always inline and static
 *   QLY_VNNI     1 for vpdpbusd ymm (QLY_DPBUSD, the intrinsic), 0 for
 *                vpmaddubsw: Q4_K through q4k_block_int (its scales in
 *                integers, vpmaddwd's multiplier), Q6_K with each line's
 *                16-bit pair sums widened at once, Q8_0 as |w| times x
 *                with w's sign (vpsignb: pair sums of at most 2 x 128 x
 *                127, no saturation)
 *   QLY_GEMM     1 to define the GEMM too
 * and undefines them at its end. Not a header of its own: no guard.
 */

/* Half h (rows 8 h .. 8 h + 7) of one block (its full-width group g,
 * scales scl) against NX rows of x (at x) into acc[t], or (accm non-NULL)
 * NX rows of 8 floats at accm; meanwhile the group at pf asked for
 * (ql_fetch). */
QLY_INL void QLY_NAME(q4k_block)(const uint8_t *g, int h, const float *scl, const ql_xs *x, const int NX,
                                 __m256 acc[], float *accm, ql_pf pf)
{
#if !QLY_VNNI
    __m256 *const accs[1] = {acc};
    q4k_block_int(g, h, 1, (const uint8_t *)(const void *)scl, x, NX, accs, accm, pf);
#else
    for (int i = 0; i < 4; i++) ql_fetch(&pf, i);
    const __m256i lo = _mm256_set1_epi8(15), hi = _mm256_set1_epi8((char)0xF0);
    __m256 blk[QL_XT];
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) blk[t] = _mm256_setzero_ps();
#pragma GCC unroll 1
    for (int c = 0; c < 4; c++) { /* blocks of 32 2c (low nibbles) and 2c + 1 (high) */
        __m256i il[QL_XT], ih[QL_XT];
#pragma GCC unroll 8
        for (int t = 0; t < ql_chains(NX) * NX; t++) il[t] = ih[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(g + Q4K_VALUES + 64 * (8 * c + j) + 32 * h));
            __m256i vl = _mm256_and_si256(v, lo), vh = _mm256_and_si256(v, hi);
            ql_fetch(&pf, 4 + 8 * c + j);
#pragma GCC unroll 8
            for (int t = 0; t < NX; t++) {
                int32_t a, b;
                memcpy(&a, ql_xq(x, t, 2 * c, j), 4), memcpy(&b, ql_xq(x, t, 2 * c + 1, j), 4);
                il[ql_at(j, NX, t)] = QLY_DPBUSD(il[ql_at(j, NX, t)], vl, _mm256_set1_epi32(a));
                ih[ql_at(j, NX, t)] = QLY_DPBUSD(ih[ql_at(j, NX, t)], vh, _mm256_set1_epi32(b));
            }
        }
        ql_fold_ymm(il, ih, NX);
        const float *sc = scl + 32 * c + 8 * h, *mn = scl + 128 + 32 * c + 8 * h;
        const __m256 s0 = _mm256_loadu_ps(sc), s1 = _mm256_loadu_ps(sc + 16);
        const __m256 m0 = _mm256_loadu_ps(mn), m1 = _mm256_loadu_ps(mn + 16);
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) {
            blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(il[t]), s0, blk[t]);
            blk[t] = _mm256_fnmadd_ps(m0, _mm256_set1_ps(ql_xsum(x, t, 2 * c)), blk[t]);
            blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ih[t]), s1, blk[t]);
            blk[t] = _mm256_fnmadd_ps(m1, _mm256_set1_ps(ql_xsum(x, t, 2 * c + 1)), blk[t]);
        }
    }
    ql_finish_ymm(blk, x, NX, acc, accm);
#endif
}

QLY_INL void QLY_NAME(q6k_block)(const uint8_t *g, int hr, const float *scl, const ql_xs *x, const int NX,
                                 __m256 acc[], float *accm, ql_pf pf)
{
#if !QLY_VNNI
    __m256 *const accs[1] = {acc};
    q6k_block_int(g, hr, 1, false, (const uint8_t *)(const void *)scl, x, NX, accs, accm, pf);
#else
    for (int i = 0; i < 5; i++) ql_fetch(&pf, 48 + i);
    __m256 blk[QL_XT];
    const __m256 m32d = _mm256_loadu_ps(scl + 384 + 8 * hr);
    q6k_plus32_ymm((const uint8_t *)(const void *)(scl + 256) + 32 * hr, x, NX, m32d, blk);
#pragma GCC unroll 1
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 1
        for (int sb = 0; sb < 2; sb++)
#pragma GCC unroll 2
            for (int m = 0; m < 2; m++) {
                __m256i il[QL_XT], ih[QL_XT];
#pragma GCC unroll 8
                for (int t = 0; t < ql_chains(NX) * NX; t++) il[t] = ih[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (int j = 4 * sb; j < 4 * sb + 4; j++) {
                    __m256i vl, vh;
                    q6k_values_ymm(g, hr, h, m, j, &vl, &vh);
                    ql_fetch(&pf, 4 * (4 * h + 2 * sb + m) + j - 4 * sb);
                    if (m == 0) ql_fetch(&pf, Q6K_HIGH / 64 + 8 * h + j);
#pragma GCC unroll 8
                    for (int t = 0; t < NX; t++) {
                        int32_t a, b;
                        memcpy(&a, ql_xq(x, t, 4 * h + m, j), 4), memcpy(&b, ql_xq(x, t, 4 * h + 2 + m, j), 4);
                        il[ql_at(j, NX, t)] = QLY_DPBUSD(il[ql_at(j, NX, t)], vl, _mm256_set1_epi32(a));
                        ih[ql_at(j, NX, t)] = QLY_DPBUSD(ih[ql_at(j, NX, t)], vh, _mm256_set1_epi32(b));
                    }
                }
                ql_fold_ymm(il, ih, NX);
                const __m256 s0 = _mm256_loadu_ps(scl + 16 * (2 * (4 * h + m) + sb) + 8 * hr);
                const __m256 s1 = _mm256_loadu_ps(scl + 16 * (2 * (4 * h + 2 + m) + sb) + 8 * hr);
#pragma GCC unroll 8
                for (int t = 0; t < NX; t++) {
                    blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(il[t]), s0, blk[t]);
                    blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ih[t]), s1, blk[t]);
                }
            }
    ql_finish_ymm(blk, x, NX, acc, accm);
#endif
}

/* Half h (rows 8 h .. 8 h + 7) of one Q8_0 block (its full-width group
 * g) against NX rows of x (at x) into acc[t]: q80_block_zmm on 8 lanes. */
QLY_INL void QLY_NAME(q80_block)(const uint8_t *g, int h, const ql_xs *x, const int NX, __m256 acc[], ql_pf pf)
{
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + 16 * h)));
    __m256i il[QL_XT];
#pragma GCC unroll 8
    for (int t = 0; t < ql_chains(NX) * NX; t++) il[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(g + Q80_VALUES + 64 * j + 32 * h));
        ql_fetch(&pf, j);
#if QLY_VNNI
        v = _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
#else
        const __m256i a = _mm256_abs_epi8(v);
#endif
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) {
            int32_t xw;
            memcpy(&xw, ql_xq(x, t, 0, j), 4);
#if QLY_VNNI
            il[ql_at(j, NX, t)] = QLY_DPBUSD(il[ql_at(j, NX, t)], v, _mm256_set1_epi32(xw));
#else
            __m256i pairs = _mm256_maddubs_epi16(a, _mm256_sign_epi8(_mm256_set1_epi32(xw), v));
            il[t] = _mm256_add_epi32(il[t], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
        }
    }
    ql_fetch(&pf, 8);
#if QLY_VNNI
#pragma GCC unroll 8
    for (int i = NX; i < ql_chains(NX) * NX; i++) il[i % NX] = _mm256_add_epi32(il[i % NX], il[i]);
#endif
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        const __m256 xd = _mm256_set1_ps(ql_xd(x, t));
        __m256 s = QLY_VNNI ? _mm256_fmsub_ps(_mm256_cvtepi32_ps(il[t]), xd, _mm256_set1_ps(ql_xc(x, t, 128.0f)))
                            : _mm256_mul_ps(_mm256_cvtepi32_ps(il[t]), xd);
        acc[t] = _mm256_fmadd_ps(s, dw, acc[t]);
    }
}

/* Half h of one Q5_0 block (FIVE) or Q4_0 block (its full-width group g)
 * against NX rows of x (at x) into acc[t]: qnib_block_zmm on 8 lanes
 * (Q50_SPREAD's 16 words through vpermd's 8 and the index's fourth bit; on
 * vpmaddubsw the values, at most 31, meet x as they are: pair sums of at
 * most 2 x 31 x 127). */
QLY_INL void QLY_NAME(qnib_block)(const uint8_t *g, int h, const ql_xs *x, const int NX, __m256 acc[], ql_pf pf,
                                  const bool FIVE)
{
    const __m256i lo4 = _mm256_set1_epi8(15), spread = _mm256_loadu_si256((const __m256i *)(const void *)Q50_SPREAD);
    const __m256i qh = FIVE ? _mm256_loadu_si256((const __m256i *)(const void *)(g + Q50_HIGH + 32 * h))
                            : _mm256_setzero_si256();
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(g + 16 * h)));
    __m256i il[QL_XT], ih[QL_XT];
#pragma GCC unroll 8
    for (int t = 0; t < ql_chains(NX) * NX; t++) il[t] = ih[t] = _mm256_setzero_si256();
    ql_fetch(&pf, 0), ql_fetch(&pf, 1);
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        __m256i v = _mm256_loadu_si256(
            (const __m256i *)(const void *)(g + (FIVE ? Q50_VALUES : Q40_VALUES) + 64 * s + 32 * h));
        __m256i vl = _mm256_and_si256(v, lo4), vh = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
        if (FIVE) {
            __m256i il_idx = _mm256_srli_epi32(qh, 4 * s), ih_idx = _mm256_srli_epi32(qh, 16 + 4 * s);
            const __m256i bit3 = _mm256_set1_epi32(0x10000000);
            vl = _mm256_or_si256(vl, _mm256_or_si256(_mm256_permutevar8x32_epi32(spread, il_idx),
                                                     _mm256_and_si256(_mm256_slli_epi32(il_idx, 25), bit3)));
            vh = _mm256_or_si256(vh, _mm256_or_si256(_mm256_permutevar8x32_epi32(spread, ih_idx),
                                                     _mm256_and_si256(_mm256_slli_epi32(ih_idx, 25), bit3)));
        }
        ql_fetch(&pf, 2 + s);
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) {
            int32_t a, b;
            memcpy(&a, ql_xq(x, t, 0, s), 4), memcpy(&b, ql_xq(x, t, 0, 4 + s), 4);
#if QLY_VNNI
            il[ql_at(s, NX, t)] = QLY_DPBUSD(il[ql_at(s, NX, t)], vl, _mm256_set1_epi32(a));
            ih[ql_at(s, NX, t)] = QLY_DPBUSD(ih[ql_at(s, NX, t)], vh, _mm256_set1_epi32(b));
#else
            __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(vl, _mm256_set1_epi32(a)),
                                             _mm256_maddubs_epi16(vh, _mm256_set1_epi32(b)));
            il[t] = _mm256_add_epi32(il[t], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
        }
    }
#if QLY_VNNI
    ql_fold_ymm(il, ih, NX);
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) il[t] = _mm256_add_epi32(il[t], ih[t]);
#endif
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        __m256 s = _mm256_fmsub_ps(_mm256_cvtepi32_ps(il[t]), _mm256_set1_ps(ql_xd(x, t)),
                                   _mm256_set1_ps(ql_xc(x, t, FIVE ? 16.0f : 8.0f)));
        acc[t] = _mm256_fmadd_ps(s, dw, acc[t]);
    }
}

/* The matrix-vector product of NT rows of x8 with panels [p0, p1). */
QLY_INL void QLY_NAME(ql_gemv_n)(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p0,
                                  int64_t p1, const int NT)
{
    const int64_t kb = w->k / 32, nb = w->k / 256;
    const size_t gb = ql_group_bytes(w->dtype);
    _Alignas(64) float scl[QL_SCL];
    _Alignas(64) uint8_t pad[Q6K_GROUP];
    float xs[SNUG_GEMV_MAX_N][8];
    for (int64_t p = p0; p < p1; p++) {
        const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
        const ql_panel pn = ql_panel_at(w, p);
        __m256 acc[2][SNUG_GEMV_MAX_N];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) acc[0][t] = acc[1][t] = _mm256_setzero_ps();
        for (int64_t c = 0; ql_b32(w->dtype) && c < kb; c++) {
            const uint8_t *g = ql_block(&pn, w, p, c, gb, pad);
            const ql_xs x = {(const uint8_t *)(x8 + c), (size_t)kb * sizeof *x8, 0, NULL, 0, 0};
            const ql_pf pf = {ql_block_next(&pn, c, gb), g == pad ? NULL : g + gb};
            for (int h = 0; h < 2 && 8 * h < width; h++) {
                if (w->dtype == SNUG_DTYPE_Q8_0) QLY_NAME(q80_block)(g, h, &x, NT, acc[h], h ? (ql_pf){NULL, NULL} : pf);
                else QLY_NAME(qnib_block)(g, h, &x, NT, acc[h], h ? (ql_pf){NULL, NULL} : pf, w->dtype == SNUG_DTYPE_Q5_0);
            }
        }
        for (int64_t b = 0; !ql_b32(w->dtype) && b < nb; b++) {
            const uint8_t *g = ql_block(&pn, w, p, b, gb, pad);
            const ql_xs x = {(const uint8_t *)(x8 + 8 * b), (size_t)kb * sizeof *x8, sizeof *x8, xs[0], 8, 1};
            const ql_pf pf = {ql_block_next(&pn, b, gb), g == pad ? NULL : g + gb}, none = {NULL, NULL};
            ql_scales(w->dtype, g, !QLY_VNNI, scl);
#if !QLY_VNNI
            if (NT == 1 && width > 8) { /* both halves in one pass (q4k_block_int, q6k_block_int) */
                __m256 *const accs[2] = {acc[0], acc[1]};
                const uint8_t *sci = (const uint8_t *)(const void *)scl;
                if (w->dtype == SNUG_DTYPE_Q6_K) q6k_block_int(g, 0, 2, false, sci, &x, NT, accs, NULL, pf);
                else q4k_block_int(g, 0, 2, sci, &x, NT, accs, NULL, pf);
                continue;
            }
#endif
            if (w->dtype == SNUG_DTYPE_Q6_K) {
                QLY_NAME(q6k_block)(g, 0, scl, &x, NT, acc[0], NULL, pf);
                if (width > 8) QLY_NAME(q6k_block)(g, 1, scl, &x, NT, acc[1], NULL, none);
                continue;
            }
            if (QLY_VNNI) q4k_x_sums(x8, kb, b, NT, xs);
            QLY_NAME(q4k_block)(g, 0, scl, &x, NT, acc[0], NULL, pf);
            if (width > 8) QLY_NAME(q4k_block)(g, 1, scl, &x, NT, acc[1], NULL, none);
        }
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) ql_store_ymm(y + t * ldy + p * SNUG_PANEL, acc[0][t], acc[1][t], width);
    }
}

QLY_T void QLY_NAME(snug_qlanes_gemv)(float *y, int64_t ldy, const snug_x8_block *x8, int64_t n, const snug_linear *w,
                                   int64_t p0, int64_t p1)
{
    switch (n) {
    case 1: QLY_NAME(ql_gemv_n)(y, ldy, x8, w, p0, p1, 1); break;
    case 2: QLY_NAME(ql_gemv_n)(y, ldy, x8, w, p0, p1, 2); break;
    case 3: QLY_NAME(ql_gemv_n)(y, ldy, x8, w, p0, p1, 3); break;
    default: QLY_NAME(ql_gemv_n)(y, ldy, x8, w, p0, p1, 4); break;
    }
}

#if QLY_GEMM
/* A register tile of the GEMM: NX rows of x from t0 against every block
 * of panel p of w (its groups at gs, their scales at scl; on vpmaddubsw
 * Q6_K's values from un, q6k_unpack_ymm's, unless it is NULL), a half at
 * a time, into y (the panel's columns), summing in accm (NX x 8 floats);
 * asking for the groups from ahead on (the panel's first tile: ql_next's;
 * NULL for the others). */
QLY_INL void QLY_NAME(ql_tile)(float *y, int64_t ldy, const void *xt, int64_t n, int64_t t0, const uint8_t *gs,
                                const uint8_t *un, const float *scl, const snug_linear *w, int64_t p,
                                const uint8_t *ahead, float *accm, const bool SIX, const int NX)
{
    const int64_t nb = w->k / 256, width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t gb = ql_group_bytes(w->dtype);
    for (int h = 0; h < 2 && 8 * h < width; h++) {
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) _mm256_storeu_ps(accm + 8 * t, _mm256_setzero_ps());
        for (int64_t b = 0; b < nb; b++) {
            const ql_xs x = ql_x_at(xt, n, 8 * nb, t0, 8 * b);
            const ql_pf next = {h == 0 ? ql_ahead_at(ahead, b, gb) : NULL, gs + (size_t)(b + 1) * gb};
#if !QLY_VNNI
            if (SIX && un) { /* (the next block's values are in L2 already: no near hints) */
                __m256 *const into_accm[1] = {NULL};
                q6k_block_int(un + (size_t)(h * nb + b) * (Q6K_UNPACKED / 2), h, 1, true,
                              (const uint8_t *)(const void *)(scl + b * QL_SCL), &x, NX, into_accm, accm,
                              (ql_pf){next.far, NULL});
                continue;
            }
#else
            (void)un;
#endif
            if (SIX) QLY_NAME(q6k_block)(gs + (size_t)b * gb, h, scl + b * QL_SCL, &x, NX, NULL, accm, next);
            else QLY_NAME(q4k_block)(gs + (size_t)b * gb, h, scl + b * QL_SCL, &x, NX, NULL, accm, next);
        }
        for (int t = 0; t < NX && t0 + t < n; t++)
            ql_store_half(y + (t0 + t) * ldy + p * SNUG_PANEL + 8 * h, _mm256_loadu_ps(accm + 8 * t), width - 8 * h);
    }
}

/* QLY_NAME(ql_tile) for the formats of blocks of 32 (ql_b32; NIB for Q5_0,
 * FIVE, and Q4_0): its sums stay in registers over every block, a half at
 * a time. */
QLY_INL void QLY_NAME(ql32_tile)(float *y, int64_t ldy, const void *xt, int64_t n, int64_t t0, const uint8_t *gs,
                                 const snug_linear *w, int64_t p, const uint8_t *ahead, const bool NIB, const bool FIVE,
                                 const int NX)
{
    const int64_t kb = w->k / 32, width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t gb = !NIB ? Q80_GROUP : FIVE ? Q50_GROUP : Q40_GROUP;
    for (int h = 0; h < 2 && 8 * h < width; h++) {
        __m256 acc[QL_XT];
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t c = 0; c < kb; c++) {
            const ql_xs x = ql_x_at(xt, n, kb, t0, c);
            const ql_pf next = {h == 0 ? ql_ahead_at(ahead, c, gb) : NULL, gs + (size_t)(c + 1) * gb};
            if (NIB) QLY_NAME(qnib_block)(gs + (size_t)c * gb, h, &x, NX, acc, next, FIVE);
            else QLY_NAME(q80_block)(gs + (size_t)c * gb, h, &x, NX, acc, next);
        }
        for (int t = 0; t < NX && t0 + t < n; t++)
            ql_store_half(y + (t0 + t) * ldy + p * SNUG_PANEL + 8 * h, acc[t], width - 8 * h);
    }
}

QLY_T void QLY_NAME(snug_qlanes_gemm)(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w,
                                   int64_t p0, int64_t p1, void *tb)
{
    float *accm = tb;
    const bool six = w->dtype == SNUG_DTYPE_Q6_K, q5 = w->dtype == SNUG_DTYPE_Q5_0;
    const bool nib = q5 || w->dtype == SNUG_DTYPE_Q4_0;
    const int64_t xblock = ql_x_block(w->k, QY_NX);
    for (int64_t x0 = 0; x0 < n; x0 += xblock)
        for (int64_t p = p0; p < p1; p++) {
            float *scl;
            const uint8_t *gs = ql_panel_prep(w, p, !QLY_VNNI, tb, &scl), *ahead = ql_next(w, p);
            /* Q6_K's values unpacked once for the block's tiles where it has more than 2 (on Zen 3,
             * each call beside the other's in one process, against unpacking in each tile:
             * 1.15-1.40x GFLOP/s at 512 rows of x, 1.07-1.40x at 32, 1.03-1.25x at 12, 0.91-1.13x at
             * 5 and 8) */
            uint8_t *un = NULL;
            if (six && !QLY_VNNI && SNUG_MIN(n, x0 + xblock) - x0 > 2 * QY_NX) {
                un = ql_unpacked_at(tb, w->k);
                q6k_unpack_ymm(gs, w->k / 256, un);
            }
            for (int64_t t0 = x0; t0 < SNUG_MIN(n, x0 + xblock) && ql_b32(w->dtype); t0 += QY_NX) {
                switch (SNUG_MIN((int64_t)QY_NX, n - t0)) {
                case 1: QLY_NAME(ql32_tile)(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, nib, q5, 1); break;
                case 2: QLY_NAME(ql32_tile)(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, nib, q5, 2); break;
                case 3: QLY_NAME(ql32_tile)(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, nib, q5, 3); break;
                default: QLY_NAME(ql32_tile)(y, ldy, xt, n, t0, gs, w, p, t0 == x0 ? ahead : NULL, nib, q5, 4); break;
                }
            }
            for (int64_t t0 = x0; t0 < SNUG_MIN(n, x0 + xblock) && !ql_b32(w->dtype); t0 += QY_NX) {
                switch (SNUG_MIN((int64_t)QY_NX, n - t0)) {
                case 1: QLY_NAME(ql_tile)(y, ldy, xt, n, t0, gs, un, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 1); break;
                case 2: QLY_NAME(ql_tile)(y, ldy, xt, n, t0, gs, un, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 2); break;
                case 3: QLY_NAME(ql_tile)(y, ldy, xt, n, t0, gs, un, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 3); break;
                default: QLY_NAME(ql_tile)(y, ldy, xt, n, t0, gs, un, scl, w, p, t0 == x0 ? ahead : NULL, accm, six, 4); break;
                }
            }
        }
}
#endif

#undef QLY_NAME
#undef QLY_T
#undef QLY_INL
#undef QLY_VNNI
#undef QLY_GEMM
#ifdef QLY_DPBUSD
#undef QLY_DPBUSD
#endif
