/*
 * fuzz_index.c: fuzzes the shard index parser (snug_index_parse, the reader
 * of model.safetensors.index.json).
 *
 * An index that parses must keep its promises: at least one entry, entries
 * sorted by tensor name with no name twice, each pointing at one of the
 * files, the files sorted and distinct, each a plain file name (no
 * separator, not absolute, not "." or ".."). The driver in fuzz_common.h checks
 * failures, parses again without a message buffer and with one allocation
 * failing, and checks that nothing leaks.
 */
#include "formats/checkpoint.h"
#include "fuzz_common.h"
#include "base/mem.h"
#include "base/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAME = "fuzz/model.safetensors.index.json";

/* Checks the invariants of a parsed index. */
static void exercise(const snug_index *ix)
{
    REQUIRE(ix->n_entries >= 1 && ix->n_entries <= SNUG_ST_MAX_TENSORS);
    REQUIRE(ix->n_files >= 1 && ix->n_files <= SNUG_INDEX_MAX_FILES);
    REQUIRE(ix->n_files <= ix->n_entries);
    for (int64_t i = 0; i < ix->n_entries; i++) {
        const snug_index_entry *e = &ix->entries[i];
        size_t len = strlen(e->tensor);
        REQUIRE(len >= 1 && len <= SNUG_ST_MAX_NAME_BYTES);
        if (i > 0) REQUIRE(strcmp(ix->entries[i - 1].tensor, e->tensor) < 0);
        REQUIRE(e->file >= 0 && e->file < ix->n_files);
    }
    for (int32_t i = 0; i < ix->n_files; i++) {
        const char *fn = ix->files[i];
        size_t len = strlen(fn);
        REQUIRE(len >= 1 && len <= SNUG_INDEX_MAX_FILE_NAME);
        REQUIRE(!strchr(fn, '/') && !strchr(fn, '\\'));
        REQUIRE(strcmp(fn, ".") != 0 && strcmp(fn, "..") != 0);
        if (i > 0) REQUIRE(strcmp(ix->files[i - 1], fn) < 0);
        /* Every file holds at least one tensor. */
        bool used = false;
        for (int64_t k = 0; k < ix->n_entries && !used; k++) used = ix->entries[k].file == i;
        REQUIRE(used);
    }
}

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    return snug_index_parse((const char *)in->data, in->size, in->name, (snug_index **)parsed, err);
}

static void check(const fuzz_input *in, void *parsed)
{
    (void)in;
    exercise(parsed);
    snug_index_free(parsed);
}

static const fuzz_target g_target = {NAME, false, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_target, data, size);
    return 0;
}
