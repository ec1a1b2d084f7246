/*
 * unicode_impl.h: the tables of the NFC normalizer, made by
 * tools/gen_unicode.py into unicode_data.c and read by unicode.c only.
 */
#ifndef SNUG_UNICODE_IMPL_H
#define SNUG_UNICODE_IMPL_H

#include <stddef.h>
#include <stdint.h>

enum {
    SNUG_UNI_SHIFT = 7,          /* stage-2 blocks of 128 code points */
    SNUG_UNI_FIRST = 1,          /* starts a composition pair */
    SNUG_UNI_SECOND = 2,         /* ends a composition pair */
    SNUG_UNI_BOUNDARY = 4        /* ccc 0, kept by NFC, ends no pair */
};

typedef struct snug_uni_record {
    uint8_t ccc;                 /* canonical combining class */
    uint8_t flags;               /* SNUG_UNI_* */
    uint8_t decomp_len;          /* 0: no canonical decomposition */
    uint16_t decomp_off;         /* into snug_uni_decomp */
} snug_uni_record;

typedef struct snug_uni_pair {
    uint32_t first, second, composite;
} snug_uni_pair;

/* code point -> record: snug_uni_records[snug_uni_stage2[(snug_uni_stage1[cp >>
 * SHIFT] << SHIFT) + (cp & mask)]] */
extern const uint16_t snug_uni_stage1[0x110000 >> SNUG_UNI_SHIFT];
extern const uint16_t snug_uni_stage2[];
extern const snug_uni_record snug_uni_records[];
extern const uint32_t snug_uni_decomp[];
extern const snug_uni_pair snug_uni_pairs[]; /* sorted by (first, second) */
extern const size_t snug_uni_n_pairs;
extern const char SNUG_UNICODE_VERSION[];

#endif /* SNUG_UNICODE_IMPL_H */
