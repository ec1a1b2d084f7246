/*
 * pooling.c: an embedding checkpoint's pooling (pooling.h).
 */
#include "pooling.h"

#include "base/json.h"
#include "gguf.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A GGUF file's {arch}.pooling_type (1 mean, 2 cls, 3 last; 4 rank refused). */
static snug_status gguf_pooling(const char *path, snug_pooling_info *out, snug_error *err)
{
    snug_gguf_file *g = NULL;
    const char *arch = NULL;
    char key[96];
    int64_t type = 0;
    snug_status st = snug_gguf_open(path, &g, err);
    if (st == SNUG_OK) st = snug_gguf_get_string(g, "general.architecture", true, &arch, NULL, err);
    if (st == SNUG_OK) {
        snprintf(key, sizeof key, "%.64s.pooling_type", arch);
        st = snug_gguf_get_int(g, key, false, 0, 4, &type, NULL, err);
    }
    if (st == SNUG_OK && type == 4)
        st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: %s 4 (rank): a reranker's classification head in GGUF "
                         "(cls.output) is not served; its Hugging Face checkpoint is", path, key);
    if (st == SNUG_OK) *out = (snug_pooling_info){(snug_pooling)type, type > 0};
    snug_gguf_close(g);
    return st;
}

snug_status snug_pooling_read(const char *path, snug_pooling_info *out, snug_error *err)
{
    char file[PATH_MAX];
    json_t *modules = NULL, *pool = NULL;
    *out = (snug_pooling_info){0};
    size_t n = strlen(path);
    if (n > 5 && strcmp(path + n - 5, ".gguf") == 0) return gguf_pooling(path, out, err);
    snprintf(file, sizeof file, "%s/modules.json", path);
    if (access(file, R_OK) != 0) return SNUG_OK;
    snug_status st = snug_json_load_file_opts(file, 1 << 20, SNUG_JSON_ANY_VALUE, &modules, err);
    const char *pool_dir = NULL;
    if (st == SNUG_OK && !json_is_array(modules))
        st = snug_errorf(err, SNUG_INVALID, "%s: expected a list of modules", file);
    for (size_t i = 0; st == SNUG_OK && i < json_array_size(modules); i++) {
        const json_t *m = json_array_get(modules, i);
        const char *type = json_string_value(json_object_get(m, "type"));
        if (type && strstr(type, "Normalize")) out->normalize = true;
        if (type && strstr(type, "Pooling")) pool_dir = json_string_value(json_object_get(m, "path"));
    }
    if (st == SNUG_OK && pool_dir) {
        if (strstr(pool_dir, "..") || pool_dir[0] == '/')
            st = snug_errorf(err, SNUG_INVALID, "%s: a Pooling module's path '%.64s' leaves the directory", file,
                             pool_dir);
        snprintf(file, sizeof file, "%s/%s/config.json", path, pool_dir);
        if (st == SNUG_OK) st = snug_json_load_file(file, 1 << 20, &pool, err);
    }
    static const struct { const char *key; snug_pooling t; } modes[] = {
        {"pooling_mode_lasttoken", SNUG_POOL_LAST}, {"pooling_mode_mean_tokens", SNUG_POOL_MEAN},
        {"pooling_mode_cls_token", SNUG_POOL_FIRST}};
    for (size_t i = 0; st == SNUG_OK && pool && i < SNUG_ARRAY_LEN(modes); i++)
        if (json_is_true(json_object_get(pool, modes[i].key)) && out->type == SNUG_POOL_NONE)
            out->type = modes[i].t;
    if (st == SNUG_OK && pool && out->type == SNUG_POOL_NONE)
        st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: no pooling snug serves (pooling_mode_lasttoken, "
                         "pooling_mode_mean_tokens or pooling_mode_cls_token true)", file);
    if (st == SNUG_OK && !pool) out->type = SNUG_POOL_LAST; /* modules.json, no Pooling module: a decoder's */
    if (st != SNUG_OK) *out = (snug_pooling_info){0};
    json_decref(pool);
    json_decref(modules);
    return st;
}
