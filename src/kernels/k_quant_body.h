/*
 * k_quant_body.h: the block-format matrix-vector path of one instruction,
 * included by k_quant.c once per instruction with these defined:
 *   QB_NAME(x)  the name x with the instruction's suffix
 *   QB_T        the target attribute of its functions
 *   QB_INL      the same, always inline and static
 *   QB_UDOT     a function (u, x) -> 8 lanes of 4 products summed, u
 *               unsigned bytes (at most 128 where x is up to 127 in
 *               magnitude: vpmaddubsw adds pairs in 16 bits), x signed
 *   QB_SDOT     a function (acc, u, x, s) -> acc + 8 lanes of two pairs
 *               of products, each pair's 16-bit sum times its 16-bit
 *               scale in s (u at most 63)
 * and undefines them at its end. Not a header of its own: no guard.
 *
 * One panel (16 rows) at a time, its blocks in the order they lie (block b
 * of every row, then block b + 1), against NT rows of x8 (kb = k / 32 x8
 * blocks each). Each row of w and of x keeps 8 float lanes of the sum
 * (acc) and, for the formats whose values are stored unsigned with an
 * offset or a minimum, 8 lanes of what to take away (cacc: d sc offset, or
 * dmin mn, times dx times the sum of x's integers of each part), added up
 * once at the panel's end.
 */

/* y of the rows of panel p from acc - cacc. */
QB_INL void QB_NAME(store)(float *y, int64_t ldy, int64_t p, int64_t width, __m256 acc[][SNUG_PANEL],
                           __m256 cacc[][SNUG_PANEL], const int NT)
{
    for (int t = 0; t < NT; t++)
        for (int64_t r = 0; r < width; r++)
            y[t * ldy + p * SNUG_PANEL + r] = hsum8(_mm256_sub_ps(acc[t][r], cacc[t][r]));
}

/* Prefetches the cache lines that begin within the bytes of one block,
 * QGEMV_AHEAD ahead: one prefetch a line of the stream. */
QB_INL void QB_NAME(fetch)(const uint8_t *at, size_t bb)
{
    uintptr_t a = ((uintptr_t)at + QGEMV_AHEAD + 63) & ~(uintptr_t)63, end = (uintptr_t)at + QGEMV_AHEAD + bb;
    for (; a < end; a += 64) _mm_prefetch((const char *)a, QGEMV_HINT);
}

/* The integer sums of one Q5_K block at bl against NT rows of x8
 * (block group b), each sub-block's part times its scale (sc16: the eight
 * scales as 16-bit lanes in both halves), into out[t]. */
QB_INL void QB_NAME(q5k_row)(const uint8_t *bl, __m256i sc16, const snug_x8_block *x8, int64_t kb,
                             int64_t b, const int NT, __m256i out[])
{
    const uint8_t *qs = bl + 48;
    __m256i hbits = load256(bl + 16);
    __m256i iacc[SNUG_GEMV_MAX_N], iacc2[SNUG_GEMV_MAX_N]; /* two chains: half the latency */
    for (int t = 0; t < NT; t++) iacc[t] = iacc2[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int pp = 0; pp < 4; pp++) { /* 64 elements: the low nibbles, then the high */
        __m256i lo, hi;
        k45_pair(qs, hbits, pp, true, &lo, &hi);
        __m256i s_lo = scale_lanes(sc16, 2 * pp, 2 * pp), s_hi = scale_lanes(sc16, 2 * pp + 1, 2 * pp + 1);
        for (int t = 0; t < NT; t++) {
            const snug_x8_block *xb = &x8[t * kb + 8 * b + 2 * pp];
            iacc[t] = QB_SDOT(iacc[t], lo, load256(xb[0].q), s_lo);
            iacc2[t] = QB_SDOT(iacc2[t], hi, load256(xb[1].q), s_hi);
        }
    }
    for (int t = 0; t < NT; t++) out[t] = _mm256_add_epi32(iacc[t], iacc2[t]);
}

/* Q5_K (Q4_K: k_qlanes.c): values 0..31 unsigned; per sub-block of 32 a
 * six-bit scale and minimum; x8 in groups of 256 (one dx). Two rows at a
 * time, so that the blocks' scales, minimums and halves are unpacked and
 * converted two to a vector: the minimums' part in integers (16-bit
 * minimum times x's 16-bit sub-block sum, vpmaddwd), into the pair's cacc
 * (lanes 0..4 the even row's, 4..8 the odd row's). */
QB_INL void QB_NAME(panel_q5k)(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p,
                               const int NT)
{
    const int64_t k = w->k, kb = k / 32, nb = k / 256;
    const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t bb = 176;
    const uint8_t *panel = (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, k, p);
    __m256 acc[SNUG_GEMV_MAX_N][SNUG_PANEL], cacc[SNUG_GEMV_MAX_N][SNUG_PANEL / 2];
    for (int t = 0; t < NT; t++) {
        for (int64_t r = 0; r < width; r++) acc[t][r] = _mm256_setzero_ps();
        for (int64_t r = 0; r < SNUG_PANEL / 2; r++) cacc[t][r] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blocks = panel + (size_t)(b * width) * bb;
        __m256i xsum[SNUG_GEMV_MAX_N]; /* x's eight sub-block sums, 16 bits, in both halves */
        float dx[SNUG_GEMV_MAX_N];
        for (int t = 0; t < NT; t++) {
            const snug_x8_block *xb = &x8[t * kb + 8 * b];
            xsum[t] = x8_chunk_sums(xb);
            dx[t] = xb->d;
        }
        for (int64_t r = 0; r < width; r += 2) {
            const bool two = r + 1 < width; /* a narrow panel's last row goes alone (its pair: itself) */
            const uint8_t *bl0 = blocks + (size_t)r * bb, *bl1 = two ? bl0 + bb : bl0;
            QB_NAME(fetch)(bl0, 2 * bb);
            __m256i sm = k_scales_vec2(bl0 + 4, bl1 + 4), zero = _mm256_setzero_si256();
            __m256i sc_pair = _mm256_unpacklo_epi8(sm, zero), mn_pair = _mm256_unpackhi_epi8(sm, zero);
            uint32_t h0, h1; /* d, dmin of each block */
            memcpy(&h0, bl0, 4), memcpy(&h1, bl1, 4);
            __m128 dd = _mm_cvtph_ps(_mm_setr_epi32((int)h0, (int)h1, 0, 0)); /* d0 dmin0 d1 dmin1 */
            __m256i s[2][SNUG_GEMV_MAX_N];
            QB_NAME(q5k_row)(bl0, _mm256_permute2x128_si256(sc_pair, sc_pair, 0x00), x8, kb, b, NT, s[0]);
            if (two)
                QB_NAME(q5k_row)(bl1, _mm256_permute2x128_si256(sc_pair, sc_pair, 0x11), x8, kb, b, NT, s[1]);
            for (int t = 0; t < NT; t++) {
                float f[4];
                _mm_storeu_ps(f, _mm_mul_ps(dd, _mm_set1_ps(dx[t])));
                __m256 mscale = _mm256_setr_ps(f[1], f[1], f[1], f[1], f[3], f[3], f[3], f[3]);
                __m256 mins = _mm256_cvtepi32_ps(_mm256_madd_epi16(mn_pair, xsum[t]));
                cacc[t][r / 2] = _mm256_fmadd_ps(mins, mscale, cacc[t][r / 2]);
                acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[0][t]), _mm256_set1_ps(f[0]), acc[t][r]);
                if (two) acc[t][r + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[1][t]), _mm256_set1_ps(f[2]), acc[t][r + 1]);
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int64_t r = 0; r < width; r++) {
            __m256 c = cacc[t][r / 2];
            __m128 half = r % 2 ? _mm256_extractf128_ps(c, 1) : _mm256_castps256_ps128(c);
            y[t * ldy + p * SNUG_PANEL + r] = hsum8(acc[t][r]) - hsum4(half);
        }
}

/* Any other format (Q4_1, Q5_1, Q2_K, Q3_K), through its chunks (unpack_chunks):
 * signed values meet x with their sign moved over, the minimums' terms
 * go to cacc. */
QB_INL void QB_NAME(panel_generic)(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p,
                                   const int NT)
{
    const snug_qtype qt = (snug_qtype)snug_dtype_qtype(w->dtype);
    const int64_t k = w->k, kb = k / 32, bs = snug_qtype_block(qt), nb = k / bs;
    const int32_t nc = (int32_t)(bs / 32);
    const int64_t width = SNUG_MIN((int64_t)SNUG_PANEL, w->m - p * SNUG_PANEL);
    const size_t bb = snug_qtype_block_bytes(qt);
    const uint8_t *panel = (const uint8_t *)w->data + snug_linear_panel_offset(w->dtype, w->m, k, p);
    __m256 acc[SNUG_GEMV_MAX_N][SNUG_PANEL], cacc[SNUG_GEMV_MAX_N][SNUG_PANEL];
    for (int t = 0; t < NT; t++)
        for (int64_t r = 0; r < width; r++) acc[t][r] = cacc[t][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blocks = panel + (size_t)(b * width) * bb;
        for (int64_t r = 0; r < width; r++) {
            qchunk ch[8];
            unpack_chunks(qt, blocks + (size_t)r * bb, ch);
            for (int32_t c = 0; c < nc; c++) {
                __m256i q = load256(ch[c].q), aq = _mm256_sign_epi8(q, q);
                __m256 sv = _mm256_set_m128(_mm_set1_ps(ch[c].scale[1]), _mm_set1_ps(ch[c].scale[0]));
                __m256 cv = _mm256_setr_ps(ch[c].corr[0], ch[c].corr[1], 0, 0, 0, 0, 0, 0);
                for (int t = 0; t < NT; t++) {
                    const snug_x8_block *xb = &x8[t * kb + b * nc + c];
                    __m256i v = QB_UDOT(aq, _mm256_sign_epi8(load256(xb->q), q));
                    __m256 dxv = _mm256_set1_ps(xb->d);
                    acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(sv, dxv), acc[t][r]);
                    __m256 xs = _mm256_setr_ps((float)xb->sum16[0], (float)xb->sum16[1], 0, 0, 0, 0, 0, 0);
                    cacc[t][r] = _mm256_fmadd_ps(_mm256_mul_ps(cv, dxv), xs, cacc[t][r]);
                }
            }
        }
    }
    QB_NAME(store)(y, ldy, p, width, acc, cacc, NT);
}

/* Panels [p0, p1) for NT rows of x. */
QB_INL void QB_NAME(qgemv_n)(float *y, int64_t ldy, const snug_x8_block *x8, const snug_linear *w, int64_t p0,
                             int64_t p1, const int NT)
{
    const snug_qtype qt = (snug_qtype)snug_dtype_qtype(w->dtype);
    for (int64_t p = p0; p < p1; p++) {
        switch (qt) {
        case SNUG_QTYPE_Q5_K: QB_NAME(panel_q5k)(y, ldy, x8, w, p, NT); break;
        default: QB_NAME(panel_generic)(y, ldy, x8, w, p, NT); break;
        }
    }
}

/* The snug_qgemv_fn of this instruction. */
QB_T static void QB_NAME(qgemv)(float *y, int64_t ldy, const snug_x8_block *x8, int64_t n, const snug_linear *w,
                               int64_t p0, int64_t p1)
{
    if (snug_linear_interleaved(w->dtype)) {
        QB_NAME(snug_qlanes_gemv)(y, ldy, x8, n, w, p0, p1);
        return;
    }
    switch (n) {
    case 1: QB_NAME(qgemv_n)(y, ldy, x8, w, p0, p1, 1); break;
    case 2: QB_NAME(qgemv_n)(y, ldy, x8, w, p0, p1, 2); break;
    case 3: QB_NAME(qgemv_n)(y, ldy, x8, w, p0, p1, 3); break;
    default: QB_NAME(qgemv_n)(y, ldy, x8, w, p0, p1, 4); break;
    }
}

#undef QB_NAME
#undef QB_T
#undef QB_INL
#undef QB_UDOT
#undef QB_SDOT
