/*
 * cmd_inspect.c: `snug inspect DIR [--tp N] [--dtype D] [--tensors] [--json]`:
 * what a model directory holds and what each tensor-parallel rank will load.
 */
#include "formats/checkpoint.h"
#include "cli.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/json.h"
#include "model/params.h"
#include "model/kvcache.h"

#include <stdio.h>
#include <string.h>

static const char g_usage[] = "snug inspect DIR [--tp N] [--dtype " CLI_DTYPES "] [--tensors] [--json]";

typedef struct inspect_report {
    const snug_checkpoint *ck;
    uint64_t n_params;
    uint64_t file_bytes;                      /* tensor bytes as stored */
    uint64_t bytes_by_dtype[SNUG_DTYPE_COUNT];
    snug_dtype weight_dtype;                  /* what the loader will hold */
    snug_dtype quant;                         /* what float matrices are quantized to, or NONE */
    snug_dtype kv_dtype;
    int32_t tp;
    uint64_t *rank_bytes;                     /* [tp] weight bytes per rank */
    size_t *rank_kv_bytes;                    /* [tp] KV bytes per token per rank */
} inspect_report;

static snug_status report_build(const snug_checkpoint *ck, int32_t tp, snug_dtype dtype, snug_dtype quant,
                                inspect_report *r, snug_error *err)
{
    memset(r, 0, sizeof *r);
    r->ck = ck;
    r->tp = tp;
    r->weight_dtype = dtype != SNUG_DTYPE_NONE ? dtype : snug_checkpoint_weight_dtype(ck);
    r->kv_dtype = SNUG_DTYPE_BF16;
    for (int64_t i = 0; i < ck->n_tensors; i++) {
        const snug_st_tensor *t = ck->entries[i].tensor;
        r->file_bytes += t->end - t->begin;
        r->bytes_by_dtype[t->dtype] += t->end - t->begin;
    }
    snug_status st = snug_params_count(&ck->config, &r->n_params, err);
    if (st != SNUG_OK) return st;
    r->rank_bytes = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)tp * sizeof *r->rank_bytes, err);
    r->rank_kv_bytes = snug_mem_alloc(SNUG_MEM_OTHER, (size_t)tp * sizeof *r->rank_kv_bytes, err);
    if (!r->rank_bytes || !r->rank_kv_bytes) return SNUG_NOMEM;
    r->quant = quant;
    st = snug_params_rank_held_bytes(&ck->config, tp, r->weight_dtype, quant, snug_checkpoint_tensor_dtype, (void *)ck,
                                     r->rank_bytes, err);
    for (int32_t rank = 0; st == SNUG_OK && rank < tp; rank++) {
        snug_param_table t;
        st = snug_params_build(&ck->config, tp, rank, &t, err);
        if (st != SNUG_OK) return st;
        r->rank_kv_bytes[rank] = snug_config_kv_bytes_per_token(&ck->config, t.n_kv_heads, r->kv_dtype);
        snug_params_free(&t);
    }
    if (st != SNUG_OK) return st;
    return SNUG_OK;
}

static void report_free(inspect_report *r)
{
    snug_mem_free(r->rank_bytes);
    snug_mem_free(r->rank_kv_bytes);
}

static void print_text(const inspect_report *r, bool tensors)
{
    const snug_checkpoint *ck = r->ck;
    const snug_model_config *c = &ck->config;
    char a[32], b[32], c32[32];
    printf("%s: %s (%s)\n", ck->dir, c->architecture, snug_arch_model_type(c->arch));
    printf("  layers %d, hidden %d, intermediate %d, heads %d, kv heads %d, head_dim %d\n",
           c->n_layers, c->hidden_size, c->intermediate_size, c->n_heads, c->n_kv_heads,
           c->head_dim);
    printf("  vocab %d, max positions %lld, rope theta %g (%s", c->vocab_size,
           (long long)c->max_position_embeddings, c->rope_theta,
           snug_rope_type_name(c->rope_scaling.type));
    if (c->rope_scaling.type == SNUG_ROPE_LONGROPE)
        printf(", original %lld", (long long)c->rope_scaling.original_max_position_embeddings);
    else if (c->rope_scaling.type != SNUG_ROPE_DEFAULT)
        printf(", factor %g", c->rope_scaling.factor);
    printf("), rms_norm_eps %g\n", c->rms_norm_eps);
    const snug_arch_info *fam = snug_arch_get(c->arch);
    printf("  tied embeddings %s, q/k/v bias %s", c->tie_word_embeddings ? "yes" : "no", c->qkv_bias ? "yes" : "no");
    if (fam->qk_norm) printf(", q/k norm per head");
    if (fam->fused_qkv || fam->fused_gate_up) printf(", fused%s%s", fam->fused_qkv ? " qkv" : "",
                                                    fam->fused_gate_up ? " gate_up" : "");
    if (snug_config_rot_dims(c) != c->head_dim) printf(", rope on %d of %d dimensions", c->n_rot, c->head_dim);
    if (fam->sandwich_norms) printf(", norms after attention and MLP");
    if (fam->act == SNUG_ACT_GELU_TANH) printf(", GELU (tanh)");
    printf("\n");
    if (c->n_labels > 0)
        printf("  a sequence classifier: %d label%s scored by score.weight from the last token (a reranker's "
               "head; it does not generate)\n", c->n_labels, c->n_labels == 1 ? "" : "s");
    int32_t sliding = 0;
    for (int32_t l = 0; l < c->n_layers; l++) sliding += snug_config_layer_window(c, l) > 0;
    if (sliding > 0) {
        printf("  sliding window %lld on %d of %d layers", (long long)c->sliding_window, sliding, c->n_layers);
        if (fam->local_rope) printf(" (rope theta %g there, unscaled)", c->rope_local_theta);
        printf("\n");
    }
    if (c->query_pre_attn_scalar > 0 && c->query_pre_attn_scalar != c->head_dim)
        printf("  attention scale 1/sqrt(%g) (query_pre_attn_scalar)\n", c->query_pre_attn_scalar);
    if (c->multimodal)
        printf("  the text model of a %s: its vision tower, %lld tensors (%s), is not loaded\n",
               fam->multimodal, (long long)ck->n_vision, snug_fmt_bytes(ck->vision_bytes, c32));
    printf("parameters: %s\n", snug_fmt_int((int64_t)r->n_params, a));
    printf("weights: %s bytes (%s) in %lld tensors, %d file%s:", snug_fmt_int((int64_t)r->file_bytes, a),
           snug_fmt_bytes(r->file_bytes, b), (long long)ck->n_tensors, ck->n_files,
           ck->n_files == 1 ? "" : "s");
    for (int d = 1; d < SNUG_DTYPE_COUNT; d++)
        if (r->bytes_by_dtype[d])
            printf(" %s %s", snug_dtype_name((snug_dtype)d),
                   snug_fmt_int((int64_t)r->bytes_by_dtype[d], a));
    printf("\n");
    bool blocks = false;
    for (int d = 1; d < SNUG_DTYPE_COUNT; d++) blocks |= r->bytes_by_dtype[d] && snug_dtype_is_quant((snug_dtype)d);
    if (blocks)
        printf("  %.2f bits per weight; the block formats are held as they are\n",
               8.0 * (double)r->file_bytes / (double)r->n_params);
    printf("kv cache: %s bytes per token (%s)\n",
           snug_fmt_int((int64_t)snug_config_kv_bytes_per_token(c, c->n_kv_heads, r->kv_dtype), a),
           snug_kv_dtype_name(r->kv_dtype));
    if (r->quant != SNUG_DTYPE_NONE)
        printf("loaded with float matrices quantized to %s (rows not whole blocks of it: Q5_0 for Q4_K, Q8_0 "
               "for Q6_K, or kept), the rest as %s, tensor parallel %d:\n", snug_dtype_name(r->quant),
               snug_dtype_torch_name(r->weight_dtype), r->tp);
    else
        printf("loaded as %s%s, tensor parallel %d:\n", snug_dtype_torch_name(r->weight_dtype),
               blocks ? " (the rest)" : "", r->tp);
    printf("  %-6s %20s %12s %18s\n", "rank", "weight bytes", "", "kv bytes/token");
    for (int32_t i = 0; i < r->tp; i++)
        printf("  %-6d %20s %12s %18s\n", i, snug_fmt_int((int64_t)r->rank_bytes[i], a),
               snug_fmt_bytes(r->rank_bytes[i], b),
               snug_fmt_int((int64_t)r->rank_kv_bytes[i], c32));
    if (!tensors) return;
    printf("tensors:\n");
    for (int64_t i = 0; i < ck->n_tensors; i++) {
        const snug_st_tensor *t = ck->entries[i].tensor;
        char shape[200];
        const char *file = strrchr(ck->files[ck->entries[i].file]->path, '/');
        printf("  %-56s %-5s %-16s %14s  %s\n", t->name, snug_dtype_name(t->dtype),
               snug_st_shape_str(t->shape, t->n_dims, shape, sizeof shape),
               snug_fmt_int((int64_t)(t->end - t->begin), a),
               file ? file + 1 : ck->files[ck->entries[i].file]->path);
    }
}

/* Builds the --json object. */
static json_t *report_json(const inspect_report *r, bool tensors)
{
    const snug_checkpoint *ck = r->ck;
    snug_json_init(); /* before the first object: a GGUF file has parsed no JSON yet */
    json_t *o = json_object();
    json_t *cfg = snug_config_to_json(&ck->config);
    json_t *by_dtype = json_object(), *ranks = json_array(), *kv_ranks = json_array();
    if (!o || !cfg || !by_dtype || !ranks || !kv_ranks) goto fail;
    for (int d = 1; d < SNUG_DTYPE_COUNT; d++)
        if (r->bytes_by_dtype[d] &&
            json_object_set_new(by_dtype, snug_dtype_name((snug_dtype)d),
                                json_integer((json_int_t)r->bytes_by_dtype[d])) != 0)
            goto fail;
    for (int32_t i = 0; i < r->tp; i++)
        if (json_array_append_new(ranks, json_integer((json_int_t)r->rank_bytes[i])) != 0 ||
            json_array_append_new(kv_ranks, json_integer((json_int_t)r->rank_kv_bytes[i])) != 0)
            goto fail;
    json_t *ok = json_pack("{s:s, s:s, s:I, s:I, s:o, s:I, s:I, s:i, s:s, s:s, s:s, s:i, s:o, s:o, s:o}",
        "path", ck->dir,
        "architecture", ck->config.architecture,
        "n_params", (json_int_t)r->n_params,
        "weight_bytes", (json_int_t)r->file_bytes,
        "bytes_by_dtype", by_dtype,
        "n_tensors", (json_int_t)ck->n_tensors,
        "kv_bytes_per_token", (json_int_t)snug_config_kv_bytes_per_token(&ck->config, ck->config.n_kv_heads, r->kv_dtype),
        "n_files", ck->n_files,
        "kv_cache_dtype", snug_kv_dtype_name(r->kv_dtype),
        "weight_dtype", snug_dtype_torch_name(r->weight_dtype),
        "quantized_to", r->quant != SNUG_DTYPE_NONE ? snug_dtype_name(r->quant) : "none",
        "tp", r->tp,
        "rank_weight_bytes", ranks,
        "rank_kv_bytes_per_token", kv_ranks,
        "config", cfg);
    by_dtype = ranks = kv_ranks = cfg = NULL; /* json_pack "o" stole them, even on failure */
    if (!ok || json_object_update(o, ok) != 0) {
        json_decref(ok);
        goto fail;
    }
    json_decref(ok);
    if (tensors) {
        json_t *list = json_array();
        if (!list || json_object_set_new(o, "tensors", list) != 0) goto fail;
        for (int64_t i = 0; i < ck->n_tensors; i++) {
            const snug_st_tensor *t = ck->entries[i].tensor;
            json_t *shape = json_array();
            for (int k = 0; shape && k < t->n_dims; k++)
                if (json_array_append_new(shape, json_integer(t->shape[k])) != 0) {
                    json_decref(shape);
                    shape = NULL;
                }
            const char *path = ck->files[ck->entries[i].file]->path;
            const char *file = strrchr(path, '/');
            json_t *e = shape ? json_pack("{s:s, s:s, s:o, s:I, s:s}", "name", t->name, "dtype",
                                          snug_dtype_name(t->dtype), "shape", shape, "bytes",
                                          (json_int_t)(t->end - t->begin), "file",
                                          file ? file + 1 : path)
                              : NULL;
            if (!e || json_array_append_new(list, e) != 0) goto fail;
        }
    }
    return o;
fail:
    json_decref(by_dtype);
    json_decref(ranks);
    json_decref(kv_ranks);
    json_decref(cfg);
    json_decref(o);
    return NULL;
}

int snug_cmd_inspect(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    const char *dir = NULL;
    int64_t tp = 1;
    snug_dtype dtype = SNUG_DTYPE_NONE, quant = SNUG_DTYPE_NONE;
    bool tensors = false, as_json = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int rc = cli_dtype_option(argc, argv, &i, &dtype, &quant, g_usage);
        if (rc > 1) return rc;
        if (rc == 1) {
            continue;
        } else if ((v = cli_option(argc, argv, &i, "--tp"))) {
            if (!cli_parse_int(v, 1, 4096, &tp))
                return cli_usage(g_usage, "--tp expects an integer from 1 to 4096, got '%s'", v);
        } else if (strcmp(argv[i], "--tensors") == 0) {
            tensors = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (argv[i][0] == '-') {
            return cli_unknown_option(g_usage, NULL, argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            return cli_usage(g_usage, "more than one model directory given");
        }
    }
    if (!dir) return cli_usage(g_usage, "no model directory given");

    snug_error err = {0};
    snug_checkpoint *ck = NULL;
    inspect_report r;
    memset(&r, 0, sizeof r);
    int rc = 1;
    snug_status st = snug_checkpoint_open(dir, &ck, &err);
    if (st == SNUG_OK) st = report_build(ck, (int32_t)tp, dtype, quant, &r, &err);
    if (st != SNUG_OK) {
        rc = cli_fail(&err);
        goto done;
    }
    if (as_json) {
        if (!snug_utf8_valid(dir, strlen(dir))) {
            snug_errorf(&err, SNUG_INVALID, "the model directory's path is not valid UTF-8, "
                        "which JSON output needs");
            rc = cli_fail(&err);
            goto done;
        }
        json_t *o = report_json(&r, tensors);
        char *text = o ? snug_json_dumps(o, true) : NULL;
        json_decref(o);
        if (!text) {
            snug_errorf(&err, SNUG_INTERNAL, "the report could not be written as JSON");
            rc = cli_fail(&err);
            goto done;
        }
        puts(text);
        snug_mem_free(text);
    } else {
        print_text(&r, tensors);
    }
    rc = 0;
done:
    report_free(&r);
    snug_checkpoint_close(ck);
    return rc;
}
