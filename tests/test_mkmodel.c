/*
 * test_mkmodel.c: synthetic checkpoints: the same seed gives the same bytes
 * whatever the sharding and thread count, the dtypes are conversions of
 * one another, the values have the intended statistics, the config reads
 * back, and a failure at any allocation leaves no files and no memory.
 */
#include "test.h"

#include "formats/checkpoint.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "convert/mkmodel.h"

#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

static char g_dir[256];

static snug_status make(const char *sub, snug_dtype dt, int shards, uint64_t seed, int threads,
                        char *out, snug_error *err)
{
    snprintf(out, 512, "%s/%s", g_dir, sub);
    mkdir(out, 0755);
    snug_model_config c;
    snug_mkmodel_opts o = {.dtype = dt, .n_shards = shards, .seed = seed, .n_threads = threads};
    snug_status st = snug_preset_config("tiny", &c, err);
    return st == SNUG_OK ? snug_mkmodel(&c, &o, out, NULL, err) : st;
}

/* Reads a whole tensor of a checkpoint into a new buffer (libc memory). */
static void *read_tensor(const snug_checkpoint *ck, const char *name, size_t *n)
{
    const snug_st_file *f;
    const snug_st_tensor *t = snug_checkpoint_find(ck, name, &f);
    if (!t) return NULL;
    *n = (size_t)(t->end - t->begin);
    void *buf = malloc(*n ? *n : 1);
    snug_error err;
    if (snug_st_read(f, t, 0, buf, *n, &err) != SNUG_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

static bool same_file(const char *a, const char *b)
{
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    snug_error err;
    bool same = snug_file_read_all(a, 1 << 26, &x, &nx, &err) == SNUG_OK &&
                snug_file_read_all(b, 1 << 26, &y, &ny, &err) == SNUG_OK && nx == ny &&
                memcmp(x, y, nx) == 0;
    snug_mem_free(x);
    snug_mem_free(y);
    return same;
}

static void test_deterministic(void)
{
    char a[512], b[512], c[512], d[512];
    snug_error err = {0};
    CHECK_OK(make("a", SNUG_DTYPE_BF16, 1, 7, 1, a, &err), &err);
    CHECK_OK(make("b", SNUG_DTYPE_BF16, 1, 7, 2, b, &err), &err);
    CHECK_OK(make("c", SNUG_DTYPE_BF16, 1, 8, 2, c, &err), &err);
    CHECK_OK(make("d", SNUG_DTYPE_BF16, 4, 7, 2, d, &err), &err);
    char fa[600], fb[600], fc[600];
    snprintf(fa, sizeof fa, "%s/model.safetensors", a);
    snprintf(fb, sizeof fb, "%s/model.safetensors", b);
    snprintf(fc, sizeof fc, "%s/model.safetensors", c);
    CHECK(same_file(fa, fb), "one thread and two write the same bytes");
    CHECK(!same_file(fa, fc), "another seed writes other bytes");
    snug_checkpoint *ca = NULL, *cd = NULL;
    CHECK_OK(snug_checkpoint_open(a, &ca, &err), &err);
    CHECK_OK(snug_checkpoint_open(d, &cd, &err), &err);
    if (ca && cd) {
        CHECK(cd->n_files == 4 && cd->sharded, "4 shards");
        int same = 0;
        for (int64_t i = 0; i < ca->n_tensors; i++) {
            size_t n1 = 0, n2 = 0;
            void *x = read_tensor(ca, ca->entries[i].tensor->name, &n1);
            void *y = read_tensor(cd, ca->entries[i].tensor->name, &n2);
            same += x && y && n1 == n2 && memcmp(x, y, n1) == 0;
            free(x);
            free(y);
        }
        CHECK(same == 47, "sharding does not change any tensor (%d of 47 equal)", same);
        char p[600];
        snprintf(p, sizeof p, "%s/model-00002-of-00004.safetensors", d);
        CHECK(snug_file_exists(p), "shards are named model-0000k-of-0000K.safetensors");
    }
    snug_checkpoint_close(ca);
    snug_checkpoint_close(cd);
}

static void test_dtypes_and_statistics(void)
{
    char f32[512], f16[512], bf16[512];
    snug_error err = {0};
    CHECK_OK(make("f32", SNUG_DTYPE_F32, 1, 3, 0, f32, &err), &err);
    CHECK_OK(make("f16", SNUG_DTYPE_F16, 1, 3, 0, f16, &err), &err);
    CHECK_OK(make("bf16", SNUG_DTYPE_BF16, 1, 3, 0, bf16, &err), &err);
    snug_checkpoint *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(snug_checkpoint_open(f32, &a, &err), &err);
    CHECK_OK(snug_checkpoint_open(f16, &b, &err), &err);
    CHECK_OK(snug_checkpoint_open(bf16, &c, &err), &err);
    if (!a || !b || !c) goto done;
    CHECK(a->config.dtype == SNUG_DTYPE_F32 && b->config.dtype == SNUG_DTYPE_F16 &&
          c->config.dtype == SNUG_DTYPE_BF16, "torch_dtype follows --dtype");
    int mismatches = 0;
    double sum = 0, sq = 0, norm_sum = 0;
    size_t count = 0, norm_count = 0;
    for (int64_t i = 0; i < a->n_tensors; i++) {
        const char *name = a->entries[i].tensor->name;
        size_t n32, n16, nb;
        float *x = read_tensor(a, name, &n32);
        uint16_t *h = read_tensor(b, name, &n16), *bb = read_tensor(c, name, &nb);
        size_t n = n32 / 4;
        bool is_norm = strstr(name, "norm.weight") != NULL;
        for (size_t k = 0; x && h && bb && k < n; k++) {
            mismatches += h[k] != snug_f32_to_f16(x[k]);
            mismatches += bb[k] != snug_f32_to_bf16(x[k]);
            if (is_norm) {
                norm_sum += x[k];
                norm_count++;
            } else {
                sum += x[k];
                sq += (double)x[k] * x[k];
                count++;
            }
        }
        free(x);
        free(h);
        free(bb);
    }
    CHECK(mismatches == 0, "%d f16/bf16 elements are not the rounding of the f32 ones", mismatches);
    double mean = sum / (double)count, sd = sqrt(sq / (double)count - mean * mean);
    CHECK(fabs(mean) < 0.001 && fabs(sd - 0.02) < 0.001, "matrices: mean %.5f sd %.5f (want 0, 0.02)", mean, sd);
    CHECK(fabs(norm_sum / (double)norm_count - 1.0) < 0.01, "norm weights near 1: mean %.4f",
          norm_sum / (double)norm_count);
done:
    snug_checkpoint_close(a);
    snug_checkpoint_close(b);
    snug_checkpoint_close(c);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

static void test_out_of_memory_loop(void)
{
    size_t base;
    snug_mem_status(SNUG_MEM_TOTAL, &base, NULL, false);
    int k;
    char d[512];
    for (k = 1; k < 1000; k++) {
        char sub[32];
        snprintf(sub, sizeof sub, "oom%d", k);
        snug_error err = {0};
        snug_mem_fail_at(k);
        snug_status st = make(sub, SNUG_DTYPE_BF16, 2, 1, 2, d, &err);
        snug_mem_fail_at(0);
        if (st == SNUG_OK) break;
        CHECK(st == SNUG_NOMEM && err.msg[0], "failing allocation %d: %s %s", k, snug_status_str(st), err.msg);
        size_t now;
        snug_mem_status(SNUG_MEM_TOTAL, &now, NULL, false);
        CHECK(now == base, "failing allocation %d leaves the counters at baseline", k);
        int shards = 0;
        char p[600];
        snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", d);
        shards += snug_file_exists(p);
        snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", d);
        shards += snug_file_exists(p);
        CHECK(shards == 0, "failing allocation %d leaves no shard behind", k);
    }
    CHECK(k > 5 && k < 1000, "succeeded after %d injected failures", k - 1);
    CHECK(count_files(d) == 5, "the final directory has 2 shards, the index and 2 configs (%d files)",
          count_files(d));
}

static void test_bad_options(void)
{
    snug_error err = {0};
    char d[512];
    CHECK_FAILS(make("bad", SNUG_DTYPE_BF16, 48, 1, 0, d, &err), &err, SNUG_INVALID, "48 shards for 47 tensors");
    CHECK_FAILS(make("bad", SNUG_DTYPE_I8, 1, 1, 0, d, &err), &err, SNUG_INVALID, "bf16, f16 or f32");
}

int main(void)
{
    test_tmpdir(g_dir, sizeof g_dir);
    RUN(test_deterministic);
    RUN(test_dtypes_and_statistics);
    RUN(test_out_of_memory_loop);
    RUN(test_bad_options);
    test_rmtree(g_dir);
    return test_summary();
}
