/*
 * k_qgemm_ymm.h: the 8-bit GEMM's register tile on ymm, included by
 * k_qgemm.c once per instruction with these defined:
 *   QY_NAME(x)  the name x with the instruction's suffix
 *   QY_T        the target attribute of its functions
 *   QY_INL      the same, always inline and static
 *   QY_VNNI     1 for vpdpbusd ymm (AVX-VNNI), 0 for vpmaddubsw: two
 *               quads' 16-bit pair sums added before vpmaddwd widens them
 *               (x's bytes up to 255 times |w| up to 32: 4 x 255 x 32 <
 *               2^15, so every format but Q8_0, whose |w| reaches 128)
 * and undefines them at its end. Not a header of its own: no guard.
 *
 * The tile of the zmm path with 8 lanes: QY_NR rows of w against one half
 * (8 rows) of a group of x, the same parts, scales and corrections.
 */

/* QY_NR rows of a repacked panel slice (rows r0.. of qp, nc chunks)
 * against half xh (lanes 8 xh ..) of one group of x (xg: its chunk c0),
 * into acc. */
QY_INL void QY_NAME(tile)(const qpanel *qp, int64_t r0, const uint8_t *xg, int64_t xh, int64_t nc, const int PART,
                          const int GROUP, const bool CORR, __m256 acc[QY_NR])
{
    const int64_t parts_per_chunk = PART == 16 ? 2 : 1, pb = GROUP * (32 / PART);
    const size_t xo = (size_t)(32 * xh);
    for (int64_t c0 = 0; c0 < nc; c0 += GROUP) {
        __m256 blk[QY_NR];
        for (int r = 0; r < QY_NR; r++) blk[r] = _mm256_set1_ps(-qp->kk[(c0 / GROUP) * SNUG_PANEL + r0 + r]);
        for (int64_t c = c0; c < c0 + GROUP; c++) {
            const uint8_t *xc = xg + (size_t)c * XT_CHUNK, *qc = qp->q + (size_t)(c * SNUG_PANEL + r0) * 32;
            for (int h = 0; h < (int)parts_per_chunk; h++) {
                const int nq = PART / 4, j0 = 4 * h;
                __m256i is[QY_NR];
                for (int r = 0; r < QY_NR; r++) is[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (int j = j0; j < j0 + nq; j += 2) {
                    __m256i x0 = load256(xc + 64 * j + xo), x1 = load256(xc + 64 * (j + 1) + xo);
#pragma GCC unroll 4
                    for (int r = 0; r < QY_NR; r++) {
                        int32_t w0, w1;
                        memcpy(&w0, qc + 32 * r + 4 * j, 4), memcpy(&w1, qc + 32 * r + 4 * j + 4, 4);
#if QY_VNNI
                        is[r] = _mm256_dpbusd_avx_epi32(is[r], x0, _mm256_set1_epi32(w0));
                        is[r] = _mm256_dpbusd_avx_epi32(is[r], x1, _mm256_set1_epi32(w1));
#else
                        __m256i pr = _mm256_add_epi16(_mm256_maddubs_epi16(x0, _mm256_set1_epi32(w0)),
                                                      _mm256_maddubs_epi16(x1, _mm256_set1_epi32(w1)));
                        is[r] = _mm256_add_epi32(is[r], _mm256_madd_epi16(pr, _mm256_set1_epi16(1)));
#endif
                    }
                }
                int64_t part = (c0 / GROUP * SNUG_PANEL + r0) * pb + (c - c0) * parts_per_chunk + h;
                __m256 sx = _mm256_setzero_ps();
                if (CORR)
                    sx = PART == 16 ? _mm256_loadu_ps((const float *)(const void *)(xc + (h ? XT_S1 : XT_S0) + xo))
                                    : _mm256_add_ps(_mm256_loadu_ps((const float *)(const void *)(xc + XT_S0 + xo)),
                                                    _mm256_loadu_ps((const float *)(const void *)(xc + XT_S1 + xo)));
                for (int r = 0; r < QY_NR; r++) {
                    blk[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[r]), _mm256_set1_ps(qp->sc[part + r * pb]), blk[r]);
                    if (CORR) blk[r] = _mm256_fnmadd_ps(_mm256_set1_ps(qp->co[part + r * pb]), sx, blk[r]);
                }
            }
        }
        __m256 dx = _mm256_loadu_ps((const float *)(const void *)(xg + (size_t)c0 * XT_CHUNK + XT_D + xo));
        for (int r = 0; r < QY_NR; r++) acc[r] = _mm256_fmadd_ps(blk[r], dx, acc[r]);
    }
}

/* One slice (chunks [c0, c1)) of panel p against every group of x. */
QY_INL void QY_NAME(panel_slice)(float *y, int64_t ldy, const uint8_t *xt, int64_t n, const snug_linear *w, int64_t p,
                                 int64_t c0, int64_t c1, uint8_t *tb, const int PART, const int GROUP, const bool CORR)
{
    const int64_t kb = w->k / 32, width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    qpanel qp = qgemm_repack(w, p, c0, c1, tb);
    for (int64_t t0 = 0; t0 < n; t0 += 8) {
        const uint8_t *xg = xt + (size_t)(t0 / SNUG_QGEMM_XROWS * kb + c0) * XT_CHUNK;
        int64_t tv = SNUG_MIN((int64_t)8, n - t0);
        for (int64_t r0 = 0; r0 < width; r0 += QY_NR) {
            __m256 acc[QY_NR];
            for (int r = 0; r < QY_NR; r++) acc[r] = _mm256_setzero_ps();
            QY_NAME(tile)(&qp, r0, xg, t0 / 8 % 2, c1 - c0, PART, GROUP, CORR, acc);
            _Alignas(32) float buf[QY_NR][8];
            for (int r = 0; r < QY_NR; r++) _mm256_store_ps(buf[r], acc[r]);
            for (int64_t i = 0; i < tv; i++) {
                float *yr = y + (t0 + i) * ldy + p * SNUG_PANEL + r0;
                for (int64_t r = 0; r < SNUG_MIN((int64_t)QY_NR, width - r0); r++)
                    yr[r] = c0 > 0 ? yr[r] + buf[r][i] : buf[r][i];
            }
        }
    }
}

/* This instruction's qslice_fn and snug_qgemm_fn. */
QY_T static void QY_NAME(slice)(float *y, int64_t ldy, const uint8_t *xt, int64_t n, const snug_linear *w, int64_t p,
                                int64_t c0, int64_t c1, uint8_t *tb, qshape s)
{
    QSHAPE_CALL(s, QY_NAME(panel_slice), y, ldy, xt, n, w, p, c0, c1, tb)
}

static void QY_NAME(qgemm)(float *y, int64_t ldy, const void *xt, int64_t n, const snug_linear *w, int64_t p0,
                           int64_t p1, void *tb)
{
    if (snug_linear_interleaved(w->dtype)) {
        QY_NAME(snug_qlanes_gemm)(y, ldy, xt, n, w, p0, p1, tb);
        return;
    }
    qgemm_run(y, ldy, xt, n, w, p0, p1, tb, QY_NAME(slice));
}

#undef QY_NAME
#undef QY_T
#undef QY_INL
#undef QY_VNNI
