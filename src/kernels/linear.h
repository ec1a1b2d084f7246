/*
 * linear.h: a weight matrix as the matmul kernels read it: its format, its
 * shape and its bytes in the kernels' layout. Every matrix of the model
 * (qkv, o_proj, gate_up, down, lm_head) is one; the loader writes each
 * straight into this layout, in the one allocation of its final size.
 *
 * The layout (dense formats, SNUG_PANEL = 16): the m rows are cut into
 * panels of 16 consecutive rows (the last may be narrower: w = min(16,
 * m - 16 p) rows), stored one after the other; inside a panel the k
 * elements go step by step, each step holding that element of every row of
 * the panel, so that one 64-byte line is one step of a whole panel:
 *   F32, F16:  step e holds w elements (row order), element (r, e) at
 *              element index 16 p k + e w + (r - 16 p);
 *   BF16:      steps of two elements: step q holds w 32-bit pairs (element
 *              2q in the low half, 2q + 1 in the high half; an odd k ends
 *              with a pair whose high half is zero), pair (r, q) at 32-bit
 *              index 16 p ceil(k / 2) + q w + (r - 16 p).
 * The matrix-vector and the blocked paths both stream this layout: no
 * weight is ever re-packed per call, whatever the number of rows of x.
 *
 * Before packing, a panel's rows can sit row-major in the panel's own bytes
 * (snug_linear_raw_offset): the loader reads them there and packs each
 * panel in place once all its rows have arrived.
 *
 *   block formats (Q8_0 ... Q6_K, base/quant.h; k a multiple of the
 *              block; Q4_K, Q6_K, Q8_0, Q5_0 and Q4_0 then interleaved,
 *              below): the
 *              panel's blocks go block index by block index,
 *              each holding block b of every row of the panel, block (r, b)
 *              at 16 p R + (b w + r - 16 p) B bytes (R a row's bytes, k /
 *              block blocks of B bytes): the same bytes as the file's
 *              row-major blocks, reordered, so that one k slice of a panel
 *              is contiguous.
 *   Q4_K (interleaved): each block index's w blocks of 144 bytes keep
 *              their place (at 16 p R + 144 b w) but are laid out across
 *              the rows: row r's (r < w, counted from the panel's first) d
 *              at 2 r, dmin at 2 w + 2 r, scale byte i (of 12) at
 *              4 w + i w + r, and its 128 bytes of values as 32 words of 4
 *              (word s: bytes 4 s .. 4 s + 3 of the block's qs) at
 *              16 w + 4 (s w + r). One 64-byte line of a full panel is then
 *              one word of all 16 rows, a vector whose lanes are rows: the
 *              kernels multiply it by x's 4 values broadcast, with no
 *              unpacking per call (k_qlanes.c).
 *   Q6_K (interleaved): likewise for blocks of 210 bytes (at
 *              16 p R + 210 b w): row r's 192 bytes of values (ql, then
 *              qh) as 48 words of 4 at 4 (s w + r), scale byte i (of 16) at
 *              192 w + i w + r, d at 208 w + 2 r.
 *   Q8_0 (interleaved): likewise for blocks of 34 bytes (at 16 p R + 34 b w):
 *              row r's d at 2 r, its 32 values as 8 words of 4 at
 *              2 w + 4 (s w + r). (A full panel's group is 544 bytes, so
 *              every other group's lines straddle two cache lines: the
 *              file's bytes allow no padding.)
 *   Q5_0 (interleaved): likewise for blocks of 22 bytes (at 16 p R + 22 b w):
 *              row r's d at 2 r, its qh (4 bytes) at 2 w + 4 r, its 16
 *              bytes of nibbles as 4 words at 6 w + 4 (s w + r).
 *   Q4_0 (interleaved): likewise for blocks of 18 bytes (at 16 p R + 18 b w):
 *              row r's d at 2 r, its nibbles as 4 words at 2 w + 4 (s w + r).
 */
#ifndef SNUG_LINEAR_H
#define SNUG_LINEAR_H

#include "base/common.h"

enum { SNUG_PANEL = 16 }; /* rows of a panel */

typedef struct snug_linear {
    snug_dtype dtype; /* F32, F16, BF16 or a block format */
    int64_t m, k;     /* output rows, input elements */
    const void *data; /* snug_linear_bytes(dtype, m, k) bytes in the layout above */
} snug_linear;

/* Whether dt has a panel layout (F32, F16, BF16, the block formats). Pure. */
bool snug_linear_supports(snug_dtype dt);

/* Bytes of an m x k matrix of dt in the layout: m k size(dt), for BF16
 * with an odd k m (k + 1) 2, for a block format m (k / block) B. 0 for an
 * unsupported dtype, a k that splits a block, or on overflow. Pure. */
size_t snug_linear_bytes(snug_dtype dt, int64_t m, int64_t k);

/* Bytes from the matrix's start to panel p (p <= the panel count). Pure. */
size_t snug_linear_panel_offset(snug_dtype dt, int64_t m, int64_t k, int64_t p);

/* Where row r sits before packing: panel r / 16's offset plus (r % 16)
 * rows of k elements of dt (for even k simply r k size(dt); for a block
 * format rows of k / block blocks). Pure. */
size_t snug_linear_raw_offset(snug_dtype dt, int64_t m, int64_t k, int64_t r);

/* Whether dt's panels lay each block index's blocks out across their rows
 * (Q4_K, above) rather than one after the other. Pure. */
bool snug_linear_interleaved(snug_dtype dt);

/* Block j (j < width) of the group at g (one block index's blocks of a
 * panel of width rows, in the layout above) as a file holds it, copied to
 * out (the block's bytes). */
void snug_linear_group_block(snug_dtype dt, const void *g, int64_t width, int64_t j, void *out);

/* block (a file's bytes of one block of dt) into its place as block j of
 * the group at group (width rows, as above): the inverse of
 * snug_linear_group_block. */
void snug_linear_group_place(snug_dtype dt, void *group, int64_t width, int64_t j, const void *block);

/* The group at g (width rows, as above) as a full panel's (16 rows, the
 * rows past width zero bytes) into out (16 blocks' bytes): the kernels
 * read a narrow last panel so. */
void snug_linear_group_widen(snug_dtype dt, const void *g, int64_t width, void *out);

/* Bytes of scratch snug_linear_pack_panel needs for a k of up to k_max:
 * one whole panel's rows. Pure. */
size_t snug_linear_pack_scratch_bytes(snug_dtype dt, int64_t k_max);

/* Packs panel p of an m x k matrix of dt whose rows sit row-major at
 * snug_linear_raw_offset (in the same bytes), in place, through tmp
 * (snug_linear_pack_scratch_bytes(dt, k) bytes, not overlapping base). */
void snug_linear_pack_panel(void *base, snug_dtype dt, int64_t m, int64_t k, int64_t p, void *tmp);

/* Packs a whole row-major m x k matrix src of dt into dst
 * (snug_linear_bytes(dt, m, k) bytes, not overlapping src): tests,
 * benchmarks and tools. */
void snug_linear_pack(void *dst, const void *src, snug_dtype dt, int64_t m, int64_t k);

/* Element (r, e) of w as a float (r < m, e < k). */
float snug_linear_elem(const snug_linear *w, int64_t r, int64_t e);

/* Row r of w as k floats into out: an embedding row of a tied lm_head. */
void snug_linear_row(const snug_linear *w, int64_t r, float *out);

/* The bytes of block b of row r of a block-format w, copied to out. */
void snug_linear_block_bytes(const snug_linear *w, int64_t r, int64_t b, void *out);

/* Block b of row r of a block-format w, dequantized (base/quant.h) into
 * out (the block's 32 or 256 floats). */
void snug_linear_row_block(const snug_linear *w, int64_t r, int64_t b, float *out);

/* Elements [e0, e0 + len) of the rows of panel p of a block-format w as an
 * f32 panel slice: len steps of 16 floats, step i holding element e0 + i of
 * each row of the panel (lanes past a narrow panel's width zero). */
void snug_linear_quant_slice_f32(const snug_linear *w, int64_t p, int64_t e0, int64_t len, float *dst);

#endif /* SNUG_LINEAR_H */
