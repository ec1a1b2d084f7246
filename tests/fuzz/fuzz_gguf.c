/*
 * fuzz_gguf.c: fuzzes the GGUF reader (snug_gguf_open_fd).
 *
 * Each input is written to a memfd and opened. A file that opens must hold
 * up: every key is found by name and its typed getters either succeed with
 * the stored value or fail cleanly, string values have the stated length,
 * every tensor is found by name, has a known type and lies inside the data
 * section, and its bytes read back equal the input's; the import's reading
 * of llama hyper-parameters gives a valid config or a clean failure, and so
 * does opening the file as a model (snug_checkpoint_open: its tensors under
 * Hugging Face names, each inside the file). The driver in
 * fuzz_common.h checks failures, parses again without a message buffer and
 * with one allocation failing, and checks that nothing leaks.
 */
#include "fuzz_common.h"
#include "base/mem.h"
#include "base/fileio.h"
#include "convert/convert.h"
#include "formats/checkpoint.h"
#include "formats/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const NAME = "fuzz.gguf";

/* Calls every getter on one key and checks each answer against the value. */
static void exercise_key(const snug_gguf_file *f, const snug_gguf_kv *kv)
{
    snug_error err = {0};
    int64_t i = 0;
    double x = 0;
    const char *s = NULL;
    bool present = false;
    snug_status st = snug_gguf_get_int(f, kv->key, true, INT64_MIN, INT64_MAX, &i, &present, &err);
    REQUIRE(present);
    if (st == SNUG_OK) {
        REQUIRE(kv->type != SNUG_GGUF_FLOAT32 && kv->type != SNUG_GGUF_FLOAT64 &&
                kv->type != SNUG_GGUF_STRING && kv->type != SNUG_GGUF_ARRAY &&
                kv->type != SNUG_GGUF_BOOL);
    } else {
        fuzz_check_failure(st, &err, NAME);
    }
    st = snug_gguf_get_int(f, kv->key, true, 0, 0, &i, NULL, &err);
    if (st != SNUG_OK) fuzz_check_failure(st, &err, NAME);
    st = snug_gguf_get_float(f, kv->key, true, -1e308, 1e308, &x, NULL, &err);
    if (st == SNUG_OK)
        REQUIRE(kv->type == SNUG_GGUF_FLOAT32 || kv->type == SNUG_GGUF_FLOAT64);
    else
        fuzz_check_failure(st, &err, NAME);
    st = snug_gguf_get_string(f, kv->key, true, &s, NULL, &err);
    if (st == SNUG_OK) {
        REQUIRE(kv->type == SNUG_GGUF_STRING);
        REQUIRE(strlen(s) == kv->v.str.len);
    } else {
        fuzz_check_failure(st, &err, NAME);
    }
    if (kv->type == SNUG_GGUF_ARRAY) {
        REQUIRE(kv->v.arr.type < SNUG_GGUF_N_TYPES && kv->v.arr.type != SNUG_GGUF_ARRAY);
        REQUIRE(kv->v.arr.offset <= f->file_size);
    }
}

/* Exercises an opened file against the input it came from. */
static void exercise(const snug_gguf_file *f, int fd, const uint8_t *data, size_t size)
{
    REQUIRE(f->file_size == size);
    REQUIRE(f->version == 2 || f->version == 3);
    REQUIRE(f->alignment > 0 && (f->alignment & (f->alignment - 1)) == 0);
    REQUIRE(f->data_start <= size);
    REQUIRE(f->data_start % f->alignment == 0 || (f->n_tensors == 0 && f->data_start == size));
    for (int64_t i = 0; i < f->n_kv; i++) {
        REQUIRE(snug_gguf_find(f, f->kv[i].key) == &f->kv[i]);
        exercise_key(f, &f->kv[i]);
    }
    snug_error err = {0};
    snug_status st;
    const char *absent = "fuzz.no such key";
    if (!snug_gguf_find(f, absent)) {
        int64_t v = 0;
        const char *s = NULL;
        bool present = true;
        st = snug_gguf_get_int(f, absent, false, 0, 1, &v, &present, &err);
        REQUIRE(st == SNUG_OK && !present);
        st = snug_gguf_get_string(f, absent, true, &s, NULL, &err);
        fuzz_check_failure(st, &err, NAME);
    }

    unsigned char *buf = malloc(size + 1);
    REQUIRE(buf);
    uint64_t data_bytes = size - f->data_start;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const snug_gguf_tensor *t = &f->tensors[i];
        REQUIRE(snug_gguf_find_tensor(f, t->name) == t);
        REQUIRE(strcmp(snug_ggml_type_name(t->type), "unknown") != 0);
        REQUIRE(t->n_dims >= 1 && t->n_dims <= SNUG_GGUF_MAX_DIMS);
        REQUIRE(t->offset % f->alignment == 0);
        REQUIRE(t->offset <= data_bytes && t->bytes <= data_bytes - t->offset);
        st = snug_pread_full(fd, buf, (size_t)t->bytes, f->data_start + t->offset, NAME, &err);
        REQUIRE(st == SNUG_OK);
        REQUIRE(memcmp(buf, data + f->data_start + t->offset, (size_t)t->bytes) == 0);
    }
    free(buf);
}

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    return snug_gguf_open_fd(in->fd, in->name, (snug_gguf_file **)parsed, err);
}

/* The import's reading of the llama hyper-parameters holds up too. */
static void exercise_llama_config(const snug_gguf_file *f)
{
    snug_error err = {0};
    snug_model_config cfg;
    snug_status st = snug_gguf_model_config(f, &cfg, &err);
    if (st == SNUG_OK)
        REQUIRE(snug_config_validate(&cfg, NAME, &err) == SNUG_OK);
    else
        fuzz_check_failure(st, &err, NAME);
}

/* The file opened as a model: a valid config, every tensor inside the
 * file, or a clean failure. */
static void exercise_checkpoint(const fuzz_input *in)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", in->fd);
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    snug_status st = snug_checkpoint_open(path, &ck, &err);
    if (st != SNUG_OK) { /* a clean failure that names the file */
        fuzz_check_failure(st, &err, path);
        return;
    }
    REQUIRE(ck->gguf && ck->n_files == 1 && snug_config_validate(&ck->config, NAME, &err) == SNUG_OK);
    const snug_st_file *f = ck->files[0];
    for (int64_t i = 0; i < ck->n_tensors; i++) {
        const snug_st_tensor *t = ck->entries[i].tensor;
        REQUIRE(t->begin <= t->end && f->data_start + t->end <= f->file_size);
        REQUIRE(snug_checkpoint_find(ck, t->name, NULL) == t);
    }
    snug_checkpoint_close(ck);
}

static void check(const fuzz_input *in, void *parsed)
{
    exercise(parsed, in->fd, in->data, in->size);
    exercise_llama_config(parsed);
    exercise_checkpoint(in);
    snug_gguf_close(parsed);
}

static const fuzz_target g_target = {NAME, true, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_target, data, size);
    return 0;
}
