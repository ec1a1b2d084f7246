/*
 * test_safetensors.c: the safetensors reader and writer: valid files,
 * lookups, bounds-checked and strided reads, a file that shrinks while
 * open, the layout rules, out-of-memory at every allocation, and writer
 * round trips.
 */
#include "test.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "formats/safetensors.h"
#include "formats/st_writer.h"

#include <unistd.h>

static char g_dir[256];

/* Writes a safetensors file from header text and data. */
static void write_st(const char *path, const char *header, const void *data, size_t n)
{
    size_t hl = strlen(header);
    unsigned char *buf = malloc(8 + hl + n);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (n) memcpy(buf + 8 + hl, data, n);
    test_write_file(path, buf, 8 + hl + n);
    free(buf);
}

static void path_of(char *out, const char *name) { snprintf(out, 512, "%s/%s", g_dir, name); }

static void test_valid_file(void)
{
    char path[512];
    path_of(path, "ok.safetensors");
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[4] = {0x3F80, 0x4000, 0x4040, 0x4080};
    unsigned char data[40];
    memcpy(data, b, 8);
    memcpy(data + 8, a, 24);
    memset(data + 32, 7, 8);
    write_st(path,
             "  {\"__metadata__\": {\"format\": \"pt\"},"
             " \"b\": {\"dtype\": \"BF16\", \"shape\": [4], \"data_offsets\": [0, 8]},"
             " \"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [8, 32]},"
             " \"empty\": {\"dtype\": \"I8\", \"shape\": [0, 5], \"data_offsets\": [32, 32]},"
             " \"c\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [32, 40]}}  ",
             data, sizeof data);
    snug_error err = {0};
    snug_st_file *f = NULL;
    CHECK_OK(snug_st_open(path, &f, &err), &err);
    if (!f) return;
    CHECK(f->n_tensors == 4, "4 tensors, got %lld", (long long)f->n_tensors);
    CHECK(strcmp(f->tensors[0].name, "a") == 0 && strcmp(f->tensors[3].name, "empty") == 0,
          "sorted by name");
    const snug_st_tensor *t = snug_st_find(f, "a");
    CHECK(t && t->dtype == SNUG_DTYPE_F32 && t->n_dims == 2 && t->shape[0] == 2 && t->shape[1] == 3,
          "a is F32 [2, 3]");
    CHECK(t && snug_st_numel(t) == 6, "6 elements");
    CHECK(snug_st_find(f, "nope") == NULL, "absent name");
    CHECK(snug_st_meta_get(f, "format") && strcmp(snug_st_meta_get(f, "format"), "pt") == 0, "metadata");
    float got[6] = {0};
    CHECK_OK(snug_st_read(f, t, 0, got, 24, &err), &err);
    CHECK(memcmp(got, a, 24) == 0, "a's bytes");
    /* strided: column 1..2 of both rows */
    float cols[4] = {0};
    CHECK_OK(snug_st_read_strided(f, t, 4, 8, 2, 12, cols, 8, &err), &err);
    CHECK(cols[0] == 2 && cols[1] == 3 && cols[2] == 5 && cols[3] == 6, "strided read %g %g %g %g",
          cols[0], cols[1], cols[2], cols[3]);
    CHECK_FAILS(snug_st_read(f, t, 20, got, 8, &err), &err, SNUG_INVALID, "outside its 24 bytes");
    CHECK_FAILS(snug_st_read_strided(f, t, 4, 8, 3, 12, cols, 8, &err), &err, SNUG_INVALID,
                "tensor 'a'");
    CHECK_FAILS(snug_st_read(f, t, UINT64_MAX - 2, got, 8, &err), &err, SNUG_INVALID, "outside");
    CHECK_OK(snug_st_check_weight(f, t, &err), &err);
    CHECK_FAILS(snug_st_check_weight(f, snug_st_find(f, "c"), &err), &err, SNUG_UNSUPPORTED,
                "tensor 'c': dtype U8 is not a weight type snug loads (F32, F16, BF16)");
    const snug_st_tensor *e = snug_st_find(f, "empty");
    CHECK(e && snug_st_numel(e) == 0, "zero-size tensor");
    CHECK_OK(snug_st_read(f, e, 0, got, 0, &err), &err);
    snug_st_close(f);
}

static void test_file_shrinks_while_open(void)
{
    char path[512];
    path_of(path, "shrink.safetensors");
    float a[1024];
    for (int i = 0; i < 1024; i++) a[i] = (float)i;
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1024],\"data_offsets\":[0,4096]}}", a,
             sizeof a);
    snug_error err = {0};
    snug_st_file *f = NULL;
    CHECK_OK(snug_st_open(path, &f, &err), &err);
    if (!f) return;
    CHECK(truncate(path, 100) == 0, "truncate");
    float got[1024];
    CHECK_FAILS(snug_st_read(f, &f->tensors[0], 0, got, sizeof got, &err), &err, SNUG_IO,
                "did it shrink");
    CHECK(strstr(err.msg, path) && strstr(err.msg, "tensor 'a'"), "names file and tensor: %s", err.msg);
    snug_st_close(f);
}

typedef struct rule_case {
    const char *header;
    size_t data_bytes;
    const char *want;
} rule_case;

static void test_layout_rules(void)
{
    static const rule_case cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", 16, "leave a gap of 4 bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9, "1 trailing bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 7, "the file is truncated"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "need 12"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "gap of 4 bytes after offset 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", 8, "unknown key 'extra'"},
        {"{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1, "unknown dtype 'F4'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[281474976710656],\"data_offsets\":[0,8]}}", 8, "[0, 2^48)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, "duplicate object key"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ entry 'k' must be a string"},
        {"[]", 0, "expected a JSON object"},
    };
    char path[512];
    path_of(path, "rule.safetensors");
    unsigned char zeros[64] = {0};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cases); i++) {
        write_st(path, cases[i].header, zeros, cases[i].data_bytes);
        snug_error err = {0};
        snug_st_file *f = NULL;
        snug_status st = snug_st_open(path, &f, &err);
        CHECK(st == SNUG_FORMAT, "case %zu: %s", i, snug_status_str(st));
        CHECK(strstr(err.msg, cases[i].want) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, err.msg,
              cases[i].want);
        CHECK(strncmp(err.msg, path, strlen(path)) == 0, "case %zu names the file: %s", i, err.msg);
        if (st == SNUG_OK) snug_st_close(f);
    }
}

static snug_status open_oom(void *ctx, snug_error *err)
{
    snug_st_file *f = NULL;
    snug_status st = snug_st_open(ctx, &f, err);
    snug_st_close(f);
    return st;
}

static void test_out_of_memory_loop(void)
{
    char path[512];
    path_of(path, "oom.safetensors");
    float data[8] = {0};
    write_st(path, "{\"__metadata__\":{\"format\":\"pt\"},"
                   "\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                   "\"y\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,32]}}", data, 32);
    int n = test_oom_loop("safetensors open", open_oom, NULL, path, 200);
    CHECK(n > 3, "the open needs several allocations (%d)", n);
}

static void test_writer_round_trip(void)
{
    char path[512];
    path_of(path, "w.safetensors");
    snug_st_out outs[3] = {
        {.name = "w.big", .dtype = SNUG_DTYPE_BF16, .n_dims = 2, .shape = {37, 11}},
        {.name = "w.vec", .dtype = SNUG_DTYPE_F32, .n_dims = 1, .shape = {5}},
        {.name = "w.none", .dtype = SNUG_DTYPE_F16, .n_dims = 2, .shape = {0, 3}},
    };
    snug_error err = {0};
    snug_st_writer *w = NULL;
    CHECK_OK(snug_st_writer_create(path, outs, 3, &w, &err), &err);
    if (!w) return;
    CHECK(w->data_start % 8 == 0, "header padded to 8 bytes (data at %llu)",
          (unsigned long long)w->data_start);
    uint16_t big[37 * 11];
    for (int i = 0; i < 37 * 11; i++) big[i] = (uint16_t)(i * 7);
    float vec[5] = {1.5f, -2, 3, 4, 5};
    /* write the big one in three pieces, out of order */
    CHECK_OK(snug_st_writer_write(w, 0, 400, (unsigned char *)big + 400, sizeof big - 400, &err), &err);
    CHECK_OK(snug_st_writer_write(w, 1, 0, vec, sizeof vec, &err), &err);
    CHECK_OK(snug_st_writer_write(w, 0, 0, big, 400, &err), &err);
    CHECK_FAILS(snug_st_writer_write(w, 1, 4, vec, sizeof vec, &err), &err, SNUG_INVALID, "outside");
    CHECK_OK(snug_st_writer_finish(w, &err), &err);
    snug_st_file *f = NULL;
    CHECK_OK(snug_st_open(path, &f, &err), &err);
    if (!f) return;
    const snug_st_tensor *t = snug_st_find(f, "w.big");
    uint16_t got[37 * 11];
    CHECK(t && t->dtype == SNUG_DTYPE_BF16 && t->shape[0] == 37 && t->shape[1] == 11, "shape kept");
    CHECK_OK(snug_st_read(f, t, 0, got, sizeof got, &err), &err);
    CHECK(memcmp(got, big, sizeof big) == 0, "bytes kept");
    t = snug_st_find(f, "w.vec");
    float gv[5];
    CHECK_OK(snug_st_read(f, t, 0, gv, sizeof gv, &err), &err);
    CHECK(memcmp(gv, vec, sizeof vec) == 0, "vector kept");
    CHECK(snug_st_find(f, "w.none") && snug_st_numel(snug_st_find(f, "w.none")) == 0, "empty kept");
    snug_st_close(f);

    /* abort removes the partial file */
    char p2[512];
    path_of(p2, "aborted.safetensors");
    CHECK_OK(snug_st_writer_create(p2, outs, 3, &w, &err), &err);
    snug_st_writer_abort(w);
    CHECK(access(p2, F_OK) != 0, "aborted file removed");
    snug_st_out dup[2] = {outs[0], outs[0]};
    CHECK_FAILS(snug_st_writer_create(p2, dup, 2, &w, &err), &err, SNUG_INVALID, "not distinct");
}

int main(void)
{
    test_tmpdir(g_dir, sizeof g_dir);
    RUN(test_valid_file);
    RUN(test_file_shrinks_while_open);
    RUN(test_layout_rules);
    RUN(test_out_of_memory_loop);
    RUN(test_writer_round_trip);
    test_rmtree(g_dir);
    return test_summary();
}
