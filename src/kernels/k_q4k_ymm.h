/*
 * k_q4k_ymm.h: Q4_K's matrix-vector product and GEMM on ymm (k_q4k.c's
 * zmm paths with 8 lanes: a panel's rows in two halves), included by
 * k_q4k.c once per instruction with these defined:
 *   Q4Y_NAME(x)  the name x with the instruction's suffix
 *   Q4Y_T        the target attribute of its functions
 *   Q4Y_INL      the same, always inline and static
 *   Q4Y_VNNI     1 for vpdpbusd ymm (Q4Y_DPBUSD, the intrinsic), 0 for
 *                vpmaddubsw: a sub-block's 8 lines of 16-bit pair sums
 *                (each at most 2 x 15 x 127) added before vpmaddwd widens
 *                them, the high nibbles shifted down
 *   Q4Y_GEMM     1 to define the GEMM too
 * and undefines them at its end. Not a header of its own: no guard.
 */

/* Half h (rows 8 h .. 8 h + 7) of one block (its full-width group g,
 * scales scl) against NX rows of x (at x) into acc[t], or (accm non-NULL)
 * NX rows of 8 floats at accm; meanwhile the group at pf asked for
 * (q4k_fetch). */
Q4Y_INL void Q4Y_NAME(q4k_block)(const uint8_t *g, int h, const float *scl, const q4k_xs *x, const int NX,
                                 __m256 acc[], float *accm, const uint8_t *pf)
{
    for (int i = 0; i < 4; i++) q4k_fetch(pf, i);
    const __m256i lo = _mm256_set1_epi8(15);
#if Q4Y_VNNI
    const __m256i hi = _mm256_set1_epi8((char)0xF0);
#else
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    __m256 blk[Q4K_XT];
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) blk[t] = _mm256_setzero_ps();
#pragma GCC unroll 1
    for (int c = 0; c < 4; c++) { /* blocks of 32 2c (low nibbles) and 2c + 1 (high) */
        __m256i il[Q4K_XT], ih[Q4K_XT];
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) il[t] = ih[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(g + Q4K_VALUES + 64 * (8 * c + j) + 32 * h));
            __m256i vl = _mm256_and_si256(v, lo);
            q4k_fetch(pf, 4 + 8 * c + j);
#if Q4Y_VNNI
            __m256i vh = _mm256_and_si256(v, hi);
#else
            __m256i vh = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo);
#endif
#pragma GCC unroll 8
            for (int t = 0; t < NX; t++) {
                int32_t a, b;
                memcpy(&a, q4k_xq(x, t, 2 * c, j), 4), memcpy(&b, q4k_xq(x, t, 2 * c + 1, j), 4);
#if Q4Y_VNNI
                il[t] = Q4Y_DPBUSD(il[t], vl, _mm256_set1_epi32(a));
                ih[t] = Q4Y_DPBUSD(ih[t], vh, _mm256_set1_epi32(b));
#else
                il[t] = _mm256_add_epi16(il[t], _mm256_maddubs_epi16(vl, _mm256_set1_epi32(a)));
                ih[t] = _mm256_add_epi16(ih[t], _mm256_maddubs_epi16(vh, _mm256_set1_epi32(b)));
#endif
            }
        }
        const float *sc = scl + 32 * c + 8 * h, *mn = scl + 128 + 32 * c + 8 * h;
        const __m256 s0 = _mm256_loadu_ps(sc), s1 = _mm256_loadu_ps(sc + 16);
        const __m256 m0 = _mm256_loadu_ps(mn), m1 = _mm256_loadu_ps(mn + 16);
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) {
#if !Q4Y_VNNI
            il[t] = _mm256_madd_epi16(il[t], ones);
            ih[t] = _mm256_madd_epi16(ih[t], ones);
#endif
            blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(il[t]), s0, blk[t]);
            blk[t] = _mm256_fnmadd_ps(m0, _mm256_set1_ps(q4k_xsum(x, t, 2 * c)), blk[t]);
            blk[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ih[t]), s1, blk[t]);
            blk[t] = _mm256_fnmadd_ps(m1, _mm256_set1_ps(q4k_xsum(x, t, 2 * c + 1)), blk[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < NX; t++) {
        if (accm)
            _mm256_storeu_ps(accm + 8 * t, _mm256_fmadd_ps(blk[t], _mm256_set1_ps(q4k_xd(x, t)),
                                                           _mm256_loadu_ps(accm + 8 * t)));
        else acc[t] = _mm256_fmadd_ps(blk[t], _mm256_set1_ps(q4k_xd(x, t)), acc[t]);
    }
}

/* The matrix-vector product of NT rows of x8 with panels [p0, p1). */
Q4Y_INL void Q4Y_NAME(q4k_gemv_n)(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p0,
                                  int64_t p1, const int NT)
{
    const int64_t kb = w->k / 32, nb = w->k / 256;
    _Alignas(64) float scl[Q4K_SCL];
    _Alignas(64) uint8_t pad[Q4K_GROUP];
    float xs[SNUG_GEMV_MAX_N][8];
    for (int64_t p = p0; p < p1; p++) {
        const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
        __m256 acc[2][SNUG_GEMV_MAX_N];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) acc[0][t] = acc[1][t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *g = q4k_group(w, p, b, pad);
            q4k_scales(g, Q4Y_VNNI, scl);
            q4k_x_sums(x8, kb, b, NT, xs);
            const q4k_xs x = {(const uint8_t *)(x8 + 8 * b), (size_t)kb * sizeof *x8, sizeof *x8, xs[0], 8, 1};
            Q4Y_NAME(q4k_block)(g, 0, scl, &x, NT, acc[0], NULL, q4k_next(w, p, b));
            if (width > 8) Q4Y_NAME(q4k_block)(g, 1, scl, &x, NT, acc[1], NULL, NULL);
        }
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) q4k_store_ymm(y + t * ldy + p * SNUG_PANEL, acc[0][t], acc[1][t], width);
    }
}

Q4Y_T void Q4Y_NAME(snug_q4k_gemv)(float *y, int64_t ldy, const snug_x8_block *x8, int64_t n, const snug_linear *w,
                                   int64_t p0, int64_t p1)
{
    switch (n) {
    case 1: Q4Y_NAME(q4k_gemv_n)(y, ldy, x8, w, p0, p1, 1); break;
    case 2: Q4Y_NAME(q4k_gemv_n)(y, ldy, x8, w, p0, p1, 2); break;
    case 3: Q4Y_NAME(q4k_gemv_n)(y, ldy, x8, w, p0, p1, 3); break;
    default: Q4Y_NAME(q4k_gemv_n)(y, ldy, x8, w, p0, p1, 4); break;
    }
}

#if Q4Y_GEMM
/* A register tile of the GEMM: NX rows of x from t0 against every block
 * of panel p of w (its groups at gs, their scales at scl), a half at a
 * time, into y (the panel's columns), summing in accm (NX x 8 floats);
 * with pf (the panel's first tile) asking for the next panel's groups. */
Q4Y_INL void Q4Y_NAME(q4k_tile)(float *y, int64_t ldy, const void *xt, int64_t n, int64_t t0, const uint8_t *gs,
                                const float *scl, const snug_linear *w, int64_t p, bool pf, float *accm, const int NX)
{
    const int64_t nb = w->k / 256, width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    for (int h = 0; h < 2 && 8 * h < width; h++) {
#pragma GCC unroll 8
        for (int t = 0; t < NX; t++) _mm256_storeu_ps(accm + 8 * t, _mm256_setzero_ps());
        for (int64_t b = 0; b < nb; b++) {
            const q4k_xs x = q4k_x_at(xt, n, 8 * nb, t0, b);
            Q4Y_NAME(q4k_block)(gs + (size_t)b * Q4K_GROUP, h, scl + b * Q4K_SCL, &x, NX, NULL, accm,
                                pf && h == 0 ? q4k_next(w, p, b) : NULL);
        }
        for (int t = 0; t < NX && t0 + t < n; t++)
            q4k_store_half(y + (t0 + t) * ldy + p * SNUG_PANEL + 8 * h, _mm256_loadu_ps(accm + 8 * t), width - 8 * h);
    }
}

Q4Y_T void Q4Y_NAME(snug_q4k_gemm)(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w,
                                   int64_t p0, int64_t p1, void *tb)
{
    float *accm = tb;
    const int64_t xblock = q4k_x_block(w->k, QY_NX);
    for (int64_t x0 = 0; x0 < n; x0 += xblock)
        for (int64_t p = p0; p < p1; p++) {
            float *scl;
            const uint8_t *gs = q4k_panel_prep(w, p, Q4Y_VNNI, tb, &scl);
            for (int64_t t0 = x0; t0 < SNUG_MIN(n, x0 + xblock); t0 += QY_NX) {
                switch (SNUG_MIN((int64_t)QY_NX, n - t0)) {
                case 1: Q4Y_NAME(q4k_tile)(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0, accm, 1); break;
                case 2: Q4Y_NAME(q4k_tile)(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0, accm, 2); break;
                case 3: Q4Y_NAME(q4k_tile)(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0, accm, 3); break;
                default: Q4Y_NAME(q4k_tile)(y, ldy, xt, n, t0, gs, scl, w, p, t0 == x0, accm, 4); break;
                }
            }
        }
}
#endif

#undef Q4Y_NAME
#undef Q4Y_T
#undef Q4Y_INL
#undef Q4Y_VNNI
#undef Q4Y_GEMM
#ifdef Q4Y_DPBUSD
#undef Q4Y_DPBUSD
#endif
