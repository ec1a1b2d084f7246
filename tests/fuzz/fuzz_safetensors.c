/*
 * fuzz_safetensors.c: fuzzes the safetensors reader (snug_st_open_fd).
 *
 * Each input is written to a memfd and opened. A file that opens must hold
 * up: every tensor is found by name, its size agrees with its dtype and
 * shape, its bytes read back (whole and strided) equal the input's bytes,
 * reads outside it fail cleanly, and every metadata key is found. A file
 * that fails must fail with a status and a non-empty message that names it.
 * The driver in fuzz_common.h also parses it without a message buffer and
 * with one allocation failing, and checks that nothing leaks.
 */
#include "fuzz_common.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/json.h"
#include "formats/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const NAME = "fuzz.safetensors";

/* Exercises an opened file against the input it came from. */
static void exercise(const snug_st_file *f, const uint8_t *data, size_t size)
{
    REQUIRE(f->file_size == size);
    REQUIRE(f->data_start >= 10 && f->data_start <= size);
    unsigned char *buf = malloc(size + 1);
    REQUIRE(buf);
    uint64_t total = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const snug_st_tensor *t = &f->tensors[i];
        if (i > 0) REQUIRE(strcmp(f->tensors[i - 1].name, t->name) < 0);
        REQUIRE(snug_st_find(f, t->name) == t);
        REQUIRE(t->n_dims >= 0 && t->n_dims <= SNUG_ST_MAX_DIMS);
        uint64_t n = t->end - t->begin;
        REQUIRE(t->begin <= t->end && t->end <= size - f->data_start);
        REQUIRE(snug_st_numel(t) * snug_dtype_size(t->dtype) == n);
        char shape[256];
        snug_st_shape_str(t->shape, t->n_dims, shape, sizeof shape);
        REQUIRE(shape[0] == '[');
        total += n;

        snug_error err = {0};
        snug_status st = snug_st_read(f, t, 0, buf, (size_t)n, &err);
        REQUIRE(st == SNUG_OK);
        REQUIRE(memcmp(buf, data + f->data_start + t->begin, (size_t)n) == 0);
        if (n >= 2) {
            /* Every other byte (at most 64), into a packed buffer. */
            size_t rows = (size_t)SNUG_MIN(n / 2, 64);
            st = snug_st_read_strided(f, t, 1, 1, rows, 2, buf, 1, &err);
            REQUIRE(st == SNUG_OK);
            for (size_t r = 0; r < rows; r++)
                REQUIRE(buf[r] == data[f->data_start + t->begin + 1 + 2 * r]);
        }
        st = snug_st_read(f, t, 1, buf, (size_t)n, &err);
        REQUIRE(st == SNUG_INVALID && err.status == st && err.msg[0] != '\0');
        st = snug_st_read_strided(f, t, 0, 1, 2, UINT64_MAX, buf, 1, &err);
        REQUIRE(st == SNUG_INVALID && err.msg[0] != '\0');
    }
    REQUIRE(total == size - f->data_start);
    for (int64_t i = 0; i < f->n_meta; i++) {
        if (i > 0) REQUIRE(strcmp(f->meta[i - 1].key, f->meta[i].key) < 0);
        REQUIRE(snug_st_meta_get(f, f->meta[i].key) == f->meta[i].value);
    }
    REQUIRE(snug_st_find(f, "") == NULL);
    free(buf);
}

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    return snug_st_open_fd(in->fd, in->name, (snug_st_file **)parsed, err);
}

static void check(const fuzz_input *in, void *parsed)
{
    exercise(parsed, in->data, in->size);
    snug_st_close(parsed);
}

static const fuzz_target g_target = {NAME, true, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_target, data, size);
    return 0;
}
