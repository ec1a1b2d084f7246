/*
 * test_checkpoint.c: model directories: single-file and sharded
 * checkpoints, tensor lookup across shards, the index rules that need a
 * directory (missing shard, a shard holding more or less than the index
 * says), and out-of-memory at every allocation of an open.
 */
#include "test.h"

#include "formats/checkpoint.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "convert/mkmodel.h"
#include "model/params.h"

#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static void make_tiny(const char *sub, int shards, char *out)
{
    snprintf(out, 512, "%s/%s", g_dir, sub);
    mkdir(out, 0755);
    snug_model_config c;
    snug_error err = {0};
    snug_mkmodel_opts o = {.dtype = SNUG_DTYPE_F32, .n_shards = shards, .seed = 1};
    if (snug_preset_config("tiny", &c, &err) != SNUG_OK || snug_mkmodel(&c, &o, out, NULL, &err) != SNUG_OK) {
        printf("setup failed: %s\n", err.msg);
        abort();
    }
}

static void test_single_and_sharded(void)
{
    char one[512], three[512];
    make_tiny("one", 1, one);
    make_tiny("three", 3, three);
    snug_error err = {0};
    snug_checkpoint *a = NULL, *b = NULL;
    CHECK_OK(snug_checkpoint_open(one, &a, &err), &err);
    CHECK_OK(snug_checkpoint_open(three, &b, &err), &err);
    if (!a || !b) goto done;
    CHECK(!a->sharded && a->n_files == 1 && a->n_tensors == 47, "single file, 47 tensors");
    CHECK(b->sharded && b->n_files == 3 && b->n_tensors == 47, "3 shards, 47 tensors");
    CHECK(a->config.hidden_size == 64 && b->config.n_layers == 5, "config read");
    snug_param_table t;
    CHECK_OK(snug_params_build(&a->config, 1, 0, &t, &err), &err);
    int found = 0, same = 0;
    for (int i = 0; i < t.n_params; i++)
        for (int s = 0; s < t.params[i].n_sources; s++) {
            const snug_st_file *fa, *fb;
            const snug_st_tensor *ta = snug_checkpoint_find(a, t.params[i].sources[s].tensor, &fa);
            const snug_st_tensor *tb = snug_checkpoint_find(b, t.params[i].sources[s].tensor, &fb);
            if (!ta || !tb) continue;
            found++;
            size_t n = (size_t)(ta->end - ta->begin);
            unsigned char *x = malloc(n), *y = malloc(n);
            if (snug_st_read(fa, ta, 0, x, n, &err) == SNUG_OK &&
                snug_st_read(fb, tb, 0, y, n, &err) == SNUG_OK && memcmp(x, y, n) == 0)
                same++;
            free(x);
            free(y);
        }
    snug_params_free(&t);
    CHECK(found == 47, "every tensor of the parameter table is found in both (%d)", found);
    CHECK(same == 47, "the same seed gives the same tensors, sharded or not (%d)", same);
    CHECK(snug_checkpoint_find(b, "lm_head.weight", NULL) == NULL, "tied: no lm_head");
    CHECK(snug_checkpoint_weight_dtype(a) == SNUG_DTYPE_F32, "weights load as the config's dtype");
done:
    snug_checkpoint_close(a);
    snug_checkpoint_close(b);
}

/* Rewrites dir's index with text. */
static void write_index(const char *dir, const char *text)
{
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    test_write_file(p, text, strlen(text));
}

static void test_index_directory_rules(void)
{
    char d[512];
    make_tiny("rules", 2, d);
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    /* read the real index to learn which tensor is in which shard */
    CHECK_OK(snug_checkpoint_open(d, &ck, &err), &err);
    if (!ck) return;
    snug_checkpoint_close(ck);

    write_index(d, "{\"weight_map\": {\"model.embed_tokens.weight\": \"model-00009-of-00009.safetensors\"}}");
    CHECK_FAILS(snug_checkpoint_open(d, &ck, &err), &err, SNUG_FORMAT,
                "names shard 'model-00009-of-00009.safetensors', which is not a file in");
    write_index(d, "{\"weight_map\": {\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\"}}");
    CHECK_FAILS(snug_checkpoint_open(d, &ck, &err), &err, SNUG_FORMAT, "which the index does not list");
    write_index(d, "{\"weight_map\": {\"model.embed_tokens.weight\": \"../rules/model-00001-of-00002.safetensors\"}}");
    CHECK_FAILS(snug_checkpoint_open(d, &ck, &err), &err, SNUG_FORMAT, "contains a path separator");
    write_index(d, "{\"weight_map\": {\"model.embed_tokens.weight\": \"/etc/passwd\"}}");
    CHECK_FAILS(snug_checkpoint_open(d, &ck, &err), &err, SNUG_FORMAT, "is an absolute path");
    write_index(d, "{\"weight_map\": {\"x\": \"a.safetensors\", \"x\": \"b.safetensors\"}}");
    CHECK_FAILS(snug_checkpoint_open(d, &ck, &err), &err, SNUG_FORMAT, "duplicate object key");
    CHECK(strstr(err.msg, "model.safetensors.index.json") != NULL, "names the index: %s", err.msg);

    char e[512];
    snprintf(e, sizeof e, "%s/empty", g_dir);
    mkdir(e, 0755);
    char cfg[600], src[600];
    snprintf(cfg, sizeof cfg, "%s/config.json", e);
    snprintf(src, sizeof src, "%s/config.json", d);
    FILE *in = fopen(src, "rb");
    char buf[4096];
    size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (in) fclose(in);
    test_write_file(cfg, buf, n);
    CHECK_FAILS(snug_checkpoint_open(e, &ck, &err), &err, SNUG_FORMAT,
                "holds neither model.safetensors nor model.safetensors.index.json");
    CHECK_FAILS(snug_checkpoint_open("/nonexistent-dir", &ck, &err), &err, SNUG_IO,
                "/nonexistent-dir/config.json: cannot open");
}

static void test_wrong_shard_assignment(void)
{
    char d[512];
    make_tiny("swap", 2, d);
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    CHECK_OK(snug_checkpoint_open(d, &ck, &err), &err);
    if (!ck) return;
    /* build an index listing every tensor but with one put in the wrong shard */
    char *text = malloc(1 << 16);
    size_t o = (size_t)snprintf(text, 1 << 16, "{\"weight_map\": {");
    for (int64_t i = 0; i < ck->n_tensors; i++) {
        int f = ck->entries[i].file;
        if (strcmp(ck->entries[i].tensor->name, "model.norm.weight") == 0) f = 1 - f;
        o += (size_t)snprintf(text + o, (1 << 16) - o, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                              i ? ", " : "", ck->entries[i].tensor->name, f + 1);
    }
    snprintf(text + o, (1 << 16) - o, "}}");
    snug_checkpoint_close(ck);
    write_index(d, text);
    free(text);
    CHECK_FAILS(snug_checkpoint_open(d, &ck, &err), &err, SNUG_FORMAT, "'model.norm.weight'");
    CHECK(strstr(err.msg, "assigns to another shard") || strstr(err.msg, "does not hold it"),
          "says the shard is wrong: %s", err.msg);
}

static void test_linked_shards(void)
{
    char d[512], a[600], b[600];
    make_tiny("links", 2, d);
    snprintf(a, sizeof a, "%s/model-00001-of-00002.safetensors", d);
    snprintf(b, sizeof b, "%s/model-00002-of-00002.safetensors", d);
    CHECK(unlink(b) == 0 && symlink(a, b) == 0, "setup: shard 2 is a link to shard 1");
    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    CHECK_FAILS(snug_checkpoint_open(d, &ck, &err), &err, SNUG_FORMAT,
                "shards 'model-00001-of-00002.safetensors' and 'model-00002-of-00002.safetensors' "
                "are the same file");
}

static snug_status open_oom(void *ctx, snug_error *err)
{
    snug_checkpoint *ck = NULL;
    snug_status st = snug_checkpoint_open(ctx, &ck, err);
    snug_checkpoint_close(ck);
    return st;
}

static void test_out_of_memory_loop(void)
{
    char d[512];
    make_tiny("oom", 3, d);
    int n = test_oom_loop("checkpoint open", open_oom, NULL, d, 2000);
    CHECK(n > 10, "the open of 3 shards needs many allocations (%d)", n);
}

int main(void)
{
    test_tmpdir(g_dir, sizeof g_dir);
    RUN(test_single_and_sharded);
    RUN(test_index_directory_rules);
    RUN(test_wrong_shard_assignment);
    RUN(test_linked_shards);
    RUN(test_out_of_memory_loop);
    test_rmtree(g_dir);
    return test_summary();
}
