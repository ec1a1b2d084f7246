/*
 * config.c: config.json of the families formats/arch.h lists: reading,
 * validation and writing.
 */
#include "config.h"

#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { CONFIG_MAX_BYTES = 16 << 20 };

const char *snug_arch_model_type(snug_arch arch) { return snug_arch_get(arch)->model_type; }

int32_t snug_config_rot_dims(const snug_model_config *cfg) { return cfg->n_rot > 0 ? cfg->n_rot : cfg->head_dim; }

int64_t snug_config_layer_window(const snug_model_config *cfg, int32_t l)
{
    return l >= 0 && l < SNUG_MAX_LAYERS && (cfg->sliding[l / 8] >> (l % 8) & 1) ? cfg->sliding_window : 0;
}

int32_t snug_config_sliding_pattern(const snug_model_config *cfg)
{
    int32_t first_full = -1;
    for (int32_t l = 0; l < cfg->n_layers && first_full < 0; l++)
        if (snug_config_layer_window(cfg, l) == 0) first_full = l;
    int32_t pattern = first_full < 0 ? 0 : first_full + 1;
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        bool full = pattern > 0 && (l + 1) % pattern == 0;
        if ((snug_config_layer_window(cfg, l) == 0) != full) return -1;
    }
    return pattern;
}

void snug_config_set_sliding(snug_model_config *cfg, int32_t pattern)
{
    memset(cfg->sliding, 0, sizeof cfg->sliding);
    for (int32_t l = 0; l < cfg->n_layers && l < SNUG_MAX_LAYERS; l++)
        if (pattern <= 0 || (l + 1) % pattern != 0) cfg->sliding[l / 8] |= (uint8_t)(1u << (l % 8));
}

const char *snug_rope_type_name(snug_rope_type t)
{
    switch (t) {
    case SNUG_ROPE_DEFAULT: return "default";
    case SNUG_ROPE_LINEAR: return "linear";
    case SNUG_ROPE_DYNAMIC: return "dynamic";
    case SNUG_ROPE_LLAMA3: return "llama3";
    case SNUG_ROPE_YARN: return "yarn";
    case SNUG_ROPE_LONGROPE: return "longrope";
    }
    return "unknown";
}

/* A sequence classifier's labels: num_labels, or the count of id2label,
 * else 2 (transformers' default); 1 to SNUG_MAX_LABELS. */
static snug_status labels(const json_t *root, const char *name, int32_t *n, snug_error *err)
{
    const json_t *num = json_object_get(root, "num_labels"), *map = json_object_get(root, "id2label");
    int64_t v = num && json_is_integer(num) ? json_integer_value(num) : json_is_object(map) ? (int64_t)json_object_size(map) : 2;
    char d[96];
    if ((num && !json_is_null(num) && !json_is_integer(num)) || v < 1 || v > SNUG_MAX_LABELS)
        return snug_errorf(err, SNUG_FORMAT, "%s: field 'num_labels': expected 1 to %d labels, found %s", name,
                           SNUG_MAX_LABELS, num ? snug_json_describe(num, d, sizeof d) : "that many in id2label");
    *n = (int32_t)v;
    return SNUG_OK;
}

static snug_status parse_arch(const json_t *root, const char *name, snug_model_config *cfg,
                              snug_error *err)
{
    const json_t *archs = json_object_get(root, "architectures");
    const char *model_type = NULL;
    bool has_type = false;
    snug_status st = snug_json_get_string(root, "model_type", name, false, &model_type,
                                          &has_type, err);
    if (st != SNUG_OK) return st;
    const snug_arch_info *by_arch = NULL, *by_type = NULL;
    if (archs && !json_is_null(archs)) {
        char d[96];
        if (!json_is_array(archs) || json_array_size(archs) == 0 ||
            !json_is_string(json_array_get(archs, 0)))
            return snug_errorf(err, SNUG_FORMAT, "%s: field 'architectures': expected a list "
                               "of architecture names, found %s", name,
                               snug_json_describe(archs, d, sizeof d));
        const char *a = json_string_value(json_array_get(archs, 0));
        by_arch = snug_arch_by_architecture(a);
        static const char SEQ_CLS[] = "ForSequenceClassification";
        size_t n = strlen(a), k = sizeof SEQ_CLS - 1;
        if (!by_arch && n > k && n - k < 48 && strcmp(a + n - k, SEQ_CLS) == 0) { /* a classifier of a family */
            char causal[64];
            snprintf(causal, sizeof causal, "%.*sForCausalLM", (int)(n - k), a);
            by_arch = snug_arch_by_architecture(causal);
            if (by_arch) st = labels(root, name, &cfg->n_labels, err);
            if (st != SNUG_OK) return st;
        }
        char shown[SNUG_SHOWN_MAX];
        if (!by_arch)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: field 'architectures': '%s' is "
                               "not supported; supported: %s", name, snug_str_shown(a, shown, 64),
                               snug_arch_list(false));
    }
    if (has_type) {
        by_type = snug_arch_by_model_type(model_type);
        char shown[SNUG_SHOWN_MAX];
        if (!by_type)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: field 'model_type': '%s' is not "
                               "supported; supported: %s", name, snug_str_shown(model_type, shown, 64),
                               snug_arch_list(false));
    }
    if (!by_arch && !by_type)
        return snug_errorf(err, SNUG_FORMAT, "%s: neither 'architectures' nor 'model_type' is "
                           "given; expected one of %s", name, snug_arch_list(false));
    if (by_arch && by_type && by_arch != by_type)
        return snug_errorf(err, SNUG_FORMAT, "%s: 'architectures' says %s but 'model_type' "
                           "says %s", name, by_arch->architecture, by_type->model_type);
    const snug_arch_info *a = by_arch ? by_arch : by_type;
    cfg->arch = a->arch;
    snprintf(cfg->architecture, sizeof cfg->architecture, "%s", a->architecture);
    return SNUG_OK;
}

/* The list key of rope_scaling rs: 1 to SNUG_MAX_ROPE_FACTORS finite
 * numbers above 0, into out; their count into *n. */
static snug_status factor_list(const json_t *rs, const char *key, const char *name, const char *field, float *out,
                               int32_t *n, snug_error *err)
{
    const json_t *a = json_object_get(rs, key);
    char d[96];
    if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > SNUG_MAX_ROPE_FACTORS)
        return snug_errorf(err, SNUG_FORMAT, "%s: field '%s.%s': expected a list of 1 to %d factors, found %s", name,
                           field, key, SNUG_MAX_ROPE_FACTORS, a ? snug_json_describe(a, d, sizeof d) : "nothing");
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *v = json_array_get(a, i);
        double x = json_number_value(v);
        if (!json_is_number(v) || !isfinite(x) || !(x > 0) || x > 1e6)
            return snug_errorf(err, SNUG_FORMAT, "%s: field '%s.%s': entry %zu: expected a factor in (0, 1e6], "
                               "found %s", name, field, key, i, snug_json_describe(v, d, sizeof d));
        out[i] = (float)x;
    }
    *n = (int32_t)json_array_size(a);
    return SNUG_OK;
}

/* LongRoPE (Phi-3): short_factor and long_factor lists of one length, and
 * original_max_position_embeddings and attention_factor when given here
 * (the first is else config.json's top-level field). */
static snug_status parse_longrope(const json_t *rs, const char *name, const char *field, const char *fname,
                                  snug_rope_scaling *out, snug_error *err)
{
    int32_t n_short = 0, n_long = 0;
    snug_status st = factor_list(rs, "short_factor", name, field, out->short_factor, &n_short, err);
    if (st == SNUG_OK) st = factor_list(rs, "long_factor", name, field, out->long_factor, &n_long, err);
    if (st != SNUG_OK) return st;
    if (n_short != n_long)
        return snug_errorf(err, SNUG_FORMAT, "%s: field '%s': short_factor has %d factors, long_factor %d; "
                           "expected one per rotary frequency in each", name, field, n_short, n_long);
    out->n_factors = n_short;
    st = snug_json_get_int(rs, "original_max_position_embeddings", fname, false, 1, (int64_t)1 << 28,
                           &out->original_max_position_embeddings, NULL, err);
    if (st == SNUG_OK)
        st = snug_json_get_real(rs, "attention_factor", fname, false, 1e-6, 1e6, &out->attention_factor, NULL, err);
    return st;
}

static snug_status parse_rope_scaling(const json_t *rs, const char *name, const char *field,
                                      snug_rope_scaling *out, snug_error *err)
{
    char d[96];
    if (!json_is_object(rs))
        return snug_errorf(err, SNUG_FORMAT, "%s: field '%s': expected an object, found %s",
                           name, field, snug_json_describe(rs, d, sizeof d));
    char fname[256];
    snprintf(fname, sizeof fname, "%s: %s", name, field);
    const char *type = NULL;
    bool has = false;
    snug_status st = snug_json_get_string(rs, "rope_type", fname, false, &type, &has, err);
    if (st == SNUG_OK && !has) st = snug_json_get_string(rs, "type", fname, false, &type, &has, err);
    if (st != SNUG_OK) return st;
    if (!has)
        return snug_errorf(err, SNUG_FORMAT, "%s: field '%s': no 'rope_type' (or 'type'); "
                           "expected one of default, linear, dynamic, llama3, yarn, longrope", name, field);
    static const struct {
        const char *name;
        snug_rope_type type;
    } types[] = {{"default", SNUG_ROPE_DEFAULT}, {"linear", SNUG_ROPE_LINEAR},
                 {"dynamic", SNUG_ROPE_DYNAMIC}, {"llama3", SNUG_ROPE_LLAMA3},
                 {"yarn", SNUG_ROPE_YARN}, {"longrope", SNUG_ROPE_LONGROPE},
                 {"su", SNUG_ROPE_LONGROPE} /* Phi-3's first configs */};
    bool known = false;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(types); i++)
        if (strcmp(type, types[i].name) == 0) {
            out->type = types[i].type;
            known = true;
        }
    char shown[SNUG_SHOWN_MAX];
    if (!known)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: field '%s': rope type '%s' is not "
                           "supported; supported: default, linear, dynamic, llama3, yarn, longrope", name,
                           field, snug_str_shown(type, shown, 48));
    out->factor = 1.0;
    out->beta_fast = 32.0;
    out->beta_slow = 1.0;
    if (out->type == SNUG_ROPE_DEFAULT) return SNUG_OK;
    if (out->type == SNUG_ROPE_LONGROPE) return parse_longrope(rs, name, field, fname, out, err);
    st = snug_json_get_real(rs, "factor", fname, true, 1.0, 1e6, &out->factor, NULL, err);
    if (st != SNUG_OK) return st;
    bool orig_required = out->type == SNUG_ROPE_LLAMA3;
    st = snug_json_get_int(rs, "original_max_position_embeddings", fname, orig_required, 1,
                           (int64_t)1 << 28, &out->original_max_position_embeddings, NULL, err);
    if (st != SNUG_OK) return st;
    if (out->type == SNUG_ROPE_LLAMA3) {
        st = snug_json_get_real(rs, "low_freq_factor", fname, true, 1e-6, 1e6,
                                &out->low_freq_factor, NULL, err);
        if (st == SNUG_OK)
            st = snug_json_get_real(rs, "high_freq_factor", fname, true, 1e-6, 1e6,
                                    &out->high_freq_factor, NULL, err);
        if (st != SNUG_OK) return st;
        if (!(out->low_freq_factor < out->high_freq_factor))
            return snug_errorf(err, SNUG_FORMAT, "%s: field '%s': low_freq_factor %g must be "
                               "below high_freq_factor %g", name, field, out->low_freq_factor,
                               out->high_freq_factor);
    }
    if (out->type == SNUG_ROPE_YARN) {
        st = snug_json_get_real(rs, "beta_fast", fname, false, 1e-6, 1e6, &out->beta_fast, NULL,
                                err);
        if (st == SNUG_OK)
            st = snug_json_get_real(rs, "beta_slow", fname, false, 1e-6, 1e6, &out->beta_slow,
                                    NULL, err);
        if (st == SNUG_OK)
            st = snug_json_get_real(rs, "mscale", fname, false, 0, 1e6, &out->mscale, NULL, err);
        if (st == SNUG_OK)
            st = snug_json_get_real(rs, "mscale_all_dim", fname, false, 0, 1e6,
                                    &out->mscale_all_dim, NULL, err);
        if (st == SNUG_OK)
            st = snug_json_get_real(rs, "attention_factor", fname, false, 0, 1e6,
                                    &out->attention_factor, NULL, err);
        if (st != SNUG_OK) return st;
    }
    return SNUG_OK;
}

static snug_status parse_token_ids(const json_t *root, const char *name, bool keep, snug_model_config *cfg,
                                   snug_error *err)
{
    int64_t bos = keep ? cfg->bos_token_id : -1;
    snug_status st;
    const json_t *jb = json_object_get(root, "bos_token_id");
    if (json_is_array(jb) && json_array_size(jb) > 0) /* a list: the first is the one used */
        jb = json_array_get(jb, 0);
    char d[96];
    if (jb && !json_is_null(jb)) {
        if (!json_is_integer(jb) || json_integer_value(jb) < 0 || json_integer_value(jb) > INT32_MAX)
            return snug_errorf(err, SNUG_FORMAT, "%s: field 'bos_token_id': expected a token id "
                               "or a list of them, found %s", name,
                               snug_json_describe(jb, d, sizeof d));
        bos = json_integer_value(jb);
    }
    cfg->bos_token_id = (int32_t)bos;
    const json_t *eos = json_object_get(root, "eos_token_id");
    if (!eos || json_is_null(eos)) {
        if (!keep) cfg->n_eos = 0;
        return SNUG_OK;
    }
    cfg->n_eos = 0;
    if (json_is_integer(eos)) {
        int64_t id = 0;
        st = snug_json_get_int(root, "eos_token_id", name, false, 0, INT32_MAX, &id, NULL, err);
        if (st != SNUG_OK) return st;
        cfg->eos_token_ids[cfg->n_eos++] = (int32_t)id;
        return SNUG_OK;
    }
    if (!json_is_array(eos) || json_array_size(eos) > SNUG_MAX_EOS_IDS)
        return snug_errorf(err, SNUG_FORMAT, "%s: field 'eos_token_id': expected a token id or "
                           "a list of at most %d, found %s", name, SNUG_MAX_EOS_IDS,
                           snug_json_describe(eos, d, sizeof d));
    for (size_t i = 0; i < json_array_size(eos); i++) {
        const json_t *v = json_array_get(eos, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > INT32_MAX)
            return snug_errorf(err, SNUG_FORMAT, "%s: field 'eos_token_id': entry %zu: "
                               "expected a token id, found %s", name, i,
                               snug_json_describe(v, d, sizeof d));
        cfg->eos_token_ids[cfg->n_eos++] = (int32_t)json_integer_value(v);
    }
    return SNUG_OK;
}

/* Reads an int field into an int32 with the given range. */
static snug_status get_i32(const json_t *root, const char *key, const char *name, bool required,
                           int32_t lo, int32_t hi, int32_t *out, bool *present, snug_error *err)
{
    int64_t v = *out;
    snug_status st = snug_json_get_int(root, key, name, required, lo, hi, &v, present, err);
    if (st == SNUG_OK) *out = (int32_t)v;
    return st;
}

/* config.json's layer_types, when given (*has): a list of num_hidden_layers
 * "sliding_attention" or "full_attention", into cfg->sliding. */
static snug_status parse_layer_types(const json_t *root, const char *name, snug_model_config *cfg, bool *has,
                                     snug_error *err)
{
    const json_t *types = json_object_get(root, "layer_types");
    char d[96];
    *has = types && !json_is_null(types);
    if (!*has) return SNUG_OK;
    if (!json_is_array(types) || json_array_size(types) != (size_t)cfg->n_layers)
        return snug_errorf(err, SNUG_FORMAT, "%s: field 'layer_types': expected a list of %d layer types "
                           "(num_hidden_layers), found %s", name, cfg->n_layers, snug_json_describe(types, d, sizeof d));
    memset(cfg->sliding, 0, sizeof cfg->sliding);
    for (int32_t l = 0; l < cfg->n_layers; l++) {
        const char *t = json_string_value(json_array_get(types, (size_t)l));
        bool sliding = t && strcmp(t, "sliding_attention") == 0;
        if (!sliding && !(t && strcmp(t, "full_attention") == 0))
            return snug_errorf(err, SNUG_FORMAT, "%s: field 'layer_types': entry %d: expected "
                               "\"sliding_attention\" or \"full_attention\", found %s", name, l,
                               snug_json_describe(json_array_get(types, (size_t)l), d, sizeof d));
        if (sliding) cfg->sliding[l / 8] |= (uint8_t)(1u << (l % 8));
    }
    return SNUG_OK;
}

/* A soft-cap field of Gemma's: absent, the family's default (Gemma 2: 50
 * and 30; Gemma 3: none); null, none; else a number above 0. */
static snug_status softcap(const json_t *root, const char *key, const char *name, double dflt, double *out,
                           snug_error *err)
{
    const json_t *v = json_object_get(root, key);
    *out = !v ? dflt : 0;
    if (!v || json_is_null(v)) return SNUG_OK;
    return snug_json_get_real(root, key, name, false, 1e-6, 1e9, out, NULL, err);
}

/* Gemma's fields (3, and 2): which layers slide (layer_types, else
 * sliding_window_pattern, default the family's: 6, 2; sliding_window 4096
 * when absent, as transformers' configs), the sliding layers' rope base
 * (Gemma 3's rope_local_base_freq, default 10000; Gemma 2's layers share
 * rope_theta), query_pre_attn_scalar (default 256), the soft-caps;
 * bidirectional attention refused. */
static snug_status parse_gemma_fields(const json_t *root, const char *name, snug_model_config *cfg, snug_error *err)
{
    const snug_arch_info *fam = snug_arch_get(cfg->arch);
    bool gemma2 = cfg->arch == SNUG_ARCH_GEMMA2;
    snug_status st = softcap(root, "attn_logit_softcapping", name, gemma2 ? 50.0 : 0, &cfg->attn_softcap, err);
    if (st == SNUG_OK)
        st = softcap(root, "final_logit_softcapping", name, gemma2 ? 30.0 : 0, &cfg->final_softcap, err);
    if (st != SNUG_OK) return st;
    bool bidirectional = false;
    st = snug_json_get_bool(root, "use_bidirectional_attention", name, false, &bidirectional, NULL, err);
    if (st == SNUG_OK && bidirectional)
        st = snug_errorf(err, SNUG_UNSUPPORTED, "%s: field 'use_bidirectional_attention': only causal attention is "
                         "supported; expected false", name);
    if (st != SNUG_OK) return st;
    const json_t *sw = json_object_get(root, "sliding_window");
    cfg->sliding_window = sw && json_is_null(sw) ? 0 : 4096;
    st = snug_json_get_int(root, "sliding_window", name, false, 0, (int64_t)1 << 28, &cfg->sliding_window, NULL, err);
    if (st != SNUG_OK) return st;
    bool has_types = false;
    st = parse_layer_types(root, name, cfg, &has_types, err);
    if (st != SNUG_OK) return st;
    if (!has_types) {
        int32_t pattern = fam->window_pattern;
        st = get_i32(root, "sliding_window_pattern", name, false, 1, SNUG_MAX_LAYERS, &pattern, NULL, err);
        if (st != SNUG_OK) return st;
        snug_config_set_sliding(cfg, pattern);
    }
    bool any_sliding = false;
    for (int32_t l = 0; l < cfg->n_layers; l++) any_sliding |= (cfg->sliding[l / 8] >> (l % 8) & 1) != 0;
    if (cfg->sliding_window == 0 && any_sliding) /* (transformers refuses it too: its local rope would still turn) */
        return snug_errorf(err, SNUG_FORMAT, "%s: field 'sliding_window': null, but layers are sliding_attention; "
                           "expected the window's length", name);
    cfg->rope_local_theta = fam->local_rope ? 10000.0 : 0;
    if (fam->local_rope)
        st = snug_json_get_real(root, "rope_local_base_freq", name, false, 1e-6, 1e15, &cfg->rope_local_theta, NULL,
                                err);
    if (st != SNUG_OK) return st;
    cfg->query_pre_attn_scalar = 256.0;
    return snug_json_get_real(root, "query_pre_attn_scalar", name, false, 1e-6, 1e9, &cfg->query_pre_attn_scalar,
                              NULL, err);
}

/* The weights' type, "dtype" or the older "torch_dtype" (SNUG_DTYPE_NONE
 * when neither is given), into cfg->dtype. */
static snug_status parse_dtype(const json_t *root, const char *name, snug_model_config *cfg, snug_error *err)
{
    const char *dt = NULL, *dt_key = "dtype";
    bool has_dt = false;
    char shown[SNUG_SHOWN_MAX];
    snug_status st = snug_json_get_string(root, "dtype", name, false, &dt, &has_dt, err);
    if (st == SNUG_OK && !has_dt) {
        dt_key = "torch_dtype";
        st = snug_json_get_string(root, "torch_dtype", name, false, &dt, &has_dt, err);
    }
    if (st != SNUG_OK) return st;
    cfg->dtype = SNUG_DTYPE_NONE;
    if (has_dt) {
        cfg->dtype = snug_dtype_from_torch(dt);
        if (cfg->dtype == SNUG_DTYPE_NONE)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: field '%s': '%s' is not a weight "
                               "type snug loads; expected bfloat16, float16 or float32", name,
                               dt_key, snug_str_shown(dt, shown, 48));
    }
    return SNUG_OK;
}

/* The sizes a family's config.json may leave out, as transformers' config
 * class defaults them (has_defaults true), into cfg; false for the families
 * whose sizes config.json must give. */
static bool family_defaults(snug_arch arch, snug_model_config *cfg)
{
    if (arch == SNUG_ARCH_GEMMA2) { /* Gemma2Config's (gemma-2-2b's sizes) */
        cfg->vocab_size = 256000, cfg->hidden_size = 2304, cfg->intermediate_size = 9216, cfg->n_layers = 26;
        cfg->n_heads = 8, cfg->n_kv_heads = 4, cfg->head_dim = 256, cfg->max_position_embeddings = 8192;
        cfg->rms_norm_eps = 1e-6, cfg->rope_theta = 10000.0, cfg->tie_word_embeddings = true;
        cfg->bos_token_id = 2, cfg->n_eos = 1, cfg->eos_token_ids[0] = 1;
        return true;
    }
    if (arch != SNUG_ARCH_GEMMA3) return false;
    /* Gemma3TextConfig's defaults (Gemma 3 4B's text_config leaves heads and more out) */
    cfg->vocab_size = 262208, cfg->hidden_size = 2304, cfg->intermediate_size = 9216, cfg->n_layers = 26;
    cfg->n_heads = 8, cfg->n_kv_heads = 4, cfg->head_dim = 256, cfg->max_position_embeddings = 131072;
    cfg->rms_norm_eps = 1e-6, cfg->rope_theta = 1000000.0, cfg->tie_word_embeddings = true;
    cfg->bos_token_id = 2, cfg->n_eos = 1, cfg->eos_token_ids[0] = 1;
    return true;
}

/* Reads config.json's fields (root: the object; name for messages) into
 * cfg, the family from them, or `given` (a multimodal checkpoint's text
 * model: text_config, whose model_type may be absent) when not NULL. */
static snug_status parse_fields(const json_t *root, const char *name, const snug_arch_info *given,
                                snug_model_config *cfg, snug_error *err)
{
    snug_status st = SNUG_OK;
    if (given) {
        const char *type = json_string_value(json_object_get(root, "model_type"));
        char shown[SNUG_SHOWN_MAX];
        if (type && strcmp(type, given->model_type) != 0)
            return snug_errorf(err, SNUG_FORMAT, "%s: field 'text_config.model_type': '%s'; expected '%s'", name,
                               snug_str_shown(type, shown, 64), given->model_type);
        cfg->arch = given->arch;
        snprintf(cfg->architecture, sizeof cfg->architecture, "%s", given->architecture);
    } else {
        st = parse_arch(root, name, cfg, err);
    }
    if (st != SNUG_OK) return st;
    bool defaults = snug_arch_get(cfg->arch)->config_defaults && family_defaults(cfg->arch, cfg); /* sizes then optional */
    /* the activation: hidden_act, or Gemma's hidden_activation, as the family has it */
    const snug_arch_info *fam = snug_arch_get(cfg->arch);
    const char *act = NULL, *act_key = fam->act == SNUG_ACT_SILU ? "hidden_act" : "hidden_activation";
    bool has = false;
    st = snug_json_get_string(root, act_key, name, false, &act, &has, err);
    if (st == SNUG_OK && !has && fam->act != SNUG_ACT_SILU) {
        act_key = "hidden_act";
        st = snug_json_get_string(root, act_key, name, false, &act, &has, err);
    }
    if (st != SNUG_OK) return st;
    char shown[SNUG_SHOWN_MAX];
    bool act_ok = fam->act == SNUG_ACT_SILU ? strcmp(act ? act : "", "silu") == 0 || strcmp(act ? act : "", "swish") == 0
                                            : strcmp(act ? act : "", "gelu_pytorch_tanh") == 0;
    if (has && !act_ok)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: field '%s': '%s' is not supported by %s; expected %s", name,
                           act_key, snug_str_shown(act, shown, 48), fam->architecture,
                           fam->act == SNUG_ACT_SILU ? "silu" : "gelu_pytorch_tanh");

    st = get_i32(root, "hidden_size", name, !defaults, 1, SNUG_MAX_HIDDEN, &cfg->hidden_size, NULL, err);
    if (st == SNUG_OK)
        st = get_i32(root, "intermediate_size", name, !defaults, 1, SNUG_MAX_INTERMEDIATE, &cfg->intermediate_size,
                     NULL, err);
    if (st == SNUG_OK)
        st = get_i32(root, "num_hidden_layers", name, !defaults, 1, SNUG_MAX_LAYERS, &cfg->n_layers, NULL, err);
    if (st == SNUG_OK)
        st = get_i32(root, "num_attention_heads", name, !defaults, 1, SNUG_MAX_HEADS, &cfg->n_heads, NULL, err);
    if (st != SNUG_OK) return st;
    if (!defaults) cfg->n_kv_heads = cfg->n_heads;
    st = get_i32(root, "num_key_value_heads", name, false, 1, SNUG_MAX_HEADS, &cfg->n_kv_heads, NULL, err);
    if (st != SNUG_OK) return st;
    bool has_head_dim = defaults;
    if (!defaults) cfg->head_dim = 0;
    st = get_i32(root, "head_dim", name, false, 2, SNUG_MAX_HEAD_DIM, &cfg->head_dim, defaults ? NULL : &has_head_dim,
                 err);
    if (st != SNUG_OK) return st;
    if (!has_head_dim) {
        if (cfg->hidden_size % cfg->n_heads != 0)
            return snug_errorf(err, SNUG_FORMAT, "%s: num_attention_heads %d does not divide "
                               "hidden_size %d (and no head_dim is given)", name, cfg->n_heads,
                               cfg->hidden_size);
        cfg->head_dim = cfg->hidden_size / cfg->n_heads;
    }
    st = get_i32(root, "vocab_size", name, !defaults, 1, SNUG_MAX_VOCAB, &cfg->vocab_size, NULL, err);
    if (st != SNUG_OK) return st;
    if (!defaults) cfg->max_position_embeddings = 2048;
    st = snug_json_get_int(root, "max_position_embeddings", name, false, 1, SNUG_MAX_POSITIONS,
                           &cfg->max_position_embeddings, NULL, err);
    if (st != SNUG_OK) return st;
    if (!defaults) cfg->rms_norm_eps = 1e-6;
    st = snug_json_get_real(root, "rms_norm_eps", name, false, 1e-30, 0.5, &cfg->rms_norm_eps,
                            NULL, err);
    if (st != SNUG_OK) return st;

    if (!defaults) cfg->rope_theta = 10000.0;
    st = snug_json_get_real(root, "rope_theta", name, false, 1e-6, 1e15, &cfg->rope_theta, NULL,
                            err);
    if (st != SNUG_OK) return st;
    cfg->rope_scaling.type = SNUG_ROPE_DEFAULT;
    cfg->rope_scaling.factor = 1.0;
    const json_t *rp = json_object_get(root, "rope_parameters");
    const json_t *rs = json_object_get(root, "rope_scaling");
    if (rp && !json_is_null(rp)) {
        st = parse_rope_scaling(rp, name, "rope_parameters", &cfg->rope_scaling, err);
        if (st == SNUG_OK)
            st = snug_json_get_real(rp, "rope_theta", name, false, 1e-6, 1e15, &cfg->rope_theta,
                                    NULL, err);
        if (st != SNUG_OK) return st;
    } else if (rs && !json_is_null(rs)) {
        st = parse_rope_scaling(rs, name, "rope_scaling", &cfg->rope_scaling, err);
        if (st != SNUG_OK) return st;
    }
    snug_rope_scaling *scaling = &cfg->rope_scaling;
    if (scaling->type == SNUG_ROPE_LONGROPE && scaling->original_max_position_embeddings == 0) {
        /* Phi3Config keeps it at the top level */
        st = snug_json_get_int(root, "original_max_position_embeddings", name, true, 1, SNUG_MAX_POSITIONS,
                               &scaling->original_max_position_embeddings, NULL, err);
        if (st != SNUG_OK) return st;
    }

    if (!defaults) cfg->tie_word_embeddings = false;
    st = snug_json_get_bool(root, "tie_word_embeddings", name, false, &cfg->tie_word_embeddings,
                            NULL, err);
    if (st != SNUG_OK) return st;
    /* a classifier has no language-model head (score.weight is its head): its embedding stands
     * in, as a tied model's does, for logits nothing reads */
    if (cfg->n_labels > 0) cfg->tie_word_embeddings = true;
    bool attention_bias = false, mlp_bias = false;
    st = snug_json_get_bool(root, "attention_bias", name, false, &attention_bias, NULL, err);
    if (st == SNUG_OK) st = snug_json_get_bool(root, "mlp_bias", name, false, &mlp_bias, NULL, err);
    if (st != SNUG_OK) return st;
    if (mlp_bias)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: field 'mlp_bias': MLP biases are not "
                           "supported; expected false", name);
    if (attention_bias && !fam->attention_bias && !fam->qkv_bias)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: field 'attention_bias': %s has no attention "
                           "biases; expected false", name, fam->architecture);
    cfg->qkv_bias = fam->qkv_bias || (fam->attention_bias && attention_bias);
    cfg->o_bias = !fam->qkv_bias && fam->attention_bias && attention_bias;
    double rotary = 1.0;
    bool has_rotary = false;
    st = snug_json_get_real(root, "partial_rotary_factor", name, false, 1e-6, 1.0, &rotary, &has_rotary, err);
    if (st != SNUG_OK) return st;
    if (has_rotary && rotary != 1.0 && !fam->partial_rotary)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: field 'partial_rotary_factor': %s turns every "
                           "dimension of a head; expected 1", name, fam->architecture);
    /* transformers: int(head_dim * factor), a hair of slack for factors
     * that are not exact in binary (0.4 x 80) */
    cfg->n_rot = (int32_t)floor((double)cfg->head_dim * rotary + 1e-9);
    if (cfg->n_rot == cfg->head_dim) cfg->n_rot = 0;
    if (has_rotary && (cfg->n_rot % 2 != 0 || (cfg->n_rot == 0 && rotary != 1.0)))
        return snug_errorf(err, SNUG_FORMAT, "%s: field 'partial_rotary_factor': %g of head_dim %d "
                           "turns %d dimensions; expected an even number from 2", name, rotary,
                           cfg->head_dim, cfg->n_rot);

    st = parse_dtype(root, name, cfg, err);
    if (st == SNUG_OK) st = parse_token_ids(root, name, defaults, cfg, err);
    if (st != SNUG_OK) return st;

    cfg->sliding_window = 0;
    bool use_sw = fam->window != SNUG_WINDOW_FROM_LAYER;
    st = snug_json_get_bool(root, "use_sliding_window", name, false, &use_sw, NULL, err);
    if (st == SNUG_OK)
        st = snug_json_get_int(root, "sliding_window", name, false, 0, (int64_t)1 << 28,
                               &cfg->sliding_window, NULL, err);
    if (st != SNUG_OK) return st;
    if (!use_sw || fam->window == SNUG_WINDOW_NONE) cfg->sliding_window = 0;
    snug_config_set_sliding(cfg, 0); /* a window, where there is one, on every layer */
    cfg->norm_plus_one = fam->norm_plus_one;
    if (fam->window == SNUG_WINDOW_PATTERN || fam->local_rope) return parse_gemma_fields(root, name, cfg, err);
    if (fam->window == SNUG_WINDOW_FROM_LAYER && cfg->sliding_window > 0) {
        /* Qwen2 and Qwen3 window the layers layer_types names, else those
         * from max_window_layers on (28 when absent, as transformers'
         * Qwen2Config and Qwen3Config) */
        bool has_types = false;
        st = parse_layer_types(root, name, cfg, &has_types, err);
        int64_t from = 28;
        if (st == SNUG_OK && !has_types)
            st = snug_json_get_int(root, "max_window_layers", name, false, 0, (int64_t)1 << 28, &from, NULL, err);
        if (st != SNUG_OK) return st;
        if (!has_types) {
            memset(cfg->sliding, 0, sizeof cfg->sliding);
            for (int64_t l = from; l < cfg->n_layers; l++) cfg->sliding[l / 8] |= (uint8_t)(1u << (l % 8));
        }
        bool any = false;
        for (int32_t l = 0; l < cfg->n_layers; l++) any |= snug_config_layer_window(cfg, l) > 0;
        if (!any) cfg->sliding_window = 0;
    }
    return SNUG_OK;
}

snug_status snug_config_validate(const snug_model_config *cfg, const char *name,
                                 snug_error *err)
{
    const struct {
        const char *field;
        int64_t value, max;
    } sizes[] = {
        {"hidden_size", cfg->hidden_size, SNUG_MAX_HIDDEN},
        {"intermediate_size", cfg->intermediate_size, SNUG_MAX_INTERMEDIATE},
        {"num_hidden_layers", cfg->n_layers, SNUG_MAX_LAYERS},
        {"num_attention_heads", cfg->n_heads, SNUG_MAX_HEADS},
        {"num_key_value_heads", cfg->n_kv_heads, SNUG_MAX_HEADS},
        {"head_dim", cfg->head_dim, SNUG_MAX_HEAD_DIM},
        {"vocab_size", cfg->vocab_size, SNUG_MAX_VOCAB},
        {"max_position_embeddings", cfg->max_position_embeddings, SNUG_MAX_POSITIONS},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(sizes); i++)
        if (sizes[i].value < 1 || sizes[i].value > sizes[i].max)
            return snug_errorf(err, SNUG_FORMAT, "%s: %s is %lld; expected 1 to %lld", name,
                               sizes[i].field, (long long)sizes[i].value, (long long)sizes[i].max);
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return snug_errorf(err, SNUG_FORMAT, "%s: num_key_value_heads %d does not divide "
                           "num_attention_heads %d", name, cfg->n_kv_heads, cfg->n_heads);
    if (cfg->head_dim < 2 || cfg->head_dim % 2 != 0)
        return snug_errorf(err, SNUG_FORMAT, "%s: head_dim %d must be even (rotary embeddings "
                           "rotate pairs)", name, cfg->head_dim);
    if (cfg->n_rot < 0 || cfg->n_rot > cfg->head_dim || cfg->n_rot % 2 != 0)
        return snug_errorf(err, SNUG_FORMAT, "%s: the rotary dimensions %d must be even and at most "
                           "head_dim %d", name, cfg->n_rot, cfg->head_dim);
    if (cfg->rope_interleaved && snug_config_rot_dims(cfg) != cfg->head_dim)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: rope turns %d of %d dimensions of a head in "
                           "interleaved pairs; partial rotary is supported for NeoX pairs (i, i + d / 2) only",
                           name, cfg->n_rot, cfg->head_dim);
    if (cfg->n_rope_freq_factors < 0 || cfg->n_rope_freq_factors > snug_config_rot_dims(cfg) / 2 ||
        cfg->n_rope_freq_factors > SNUG_MAX_ROPE_FACTORS)
        return snug_errorf(err, SNUG_FORMAT, "%s: %d per-frequency rotary factors for %d rotary "
                           "frequencies", name, cfg->n_rope_freq_factors, snug_config_rot_dims(cfg) / 2);
    const snug_rope_scaling *rs = &cfg->rope_scaling;
    if (rs->type == SNUG_ROPE_LONGROPE &&
        (rs->n_factors != snug_config_rot_dims(cfg) / 2 || rs->original_max_position_embeddings < 1))
        return snug_errorf(err, SNUG_FORMAT, "%s: rope scaling longrope: %d short and long factors for %d rotary "
                           "frequencies, original_max_position_embeddings %lld; expected one factor per "
                           "frequency and a length from 1", name, rs->n_factors, snug_config_rot_dims(cfg) / 2,
                           (long long)rs->original_max_position_embeddings);
    if ((int64_t)cfg->n_heads * cfg->head_dim > SNUG_MAX_Q_DIM)
        return snug_errorf(err, SNUG_FORMAT, "%s: num_attention_heads %d x head_dim %d is above "
                           "the limit of %d", name, cfg->n_heads, cfg->head_dim, SNUG_MAX_Q_DIM);
    if (!(cfg->rms_norm_eps > 0 && cfg->rms_norm_eps < 0.5))
        return snug_errorf(err, SNUG_FORMAT, "%s: rms_norm_eps %g must be in (0, 0.5)", name,
                           cfg->rms_norm_eps);
    if (!(cfg->rope_theta > 0 && isfinite(cfg->rope_theta)))
        return snug_errorf(err, SNUG_FORMAT, "%s: rope_theta %g must be positive", name,
                           cfg->rope_theta);
    if (cfg->bos_token_id >= cfg->vocab_size)
        return snug_errorf(err, SNUG_FORMAT, "%s: bos_token_id %d is not below vocab_size %d",
                           name, cfg->bos_token_id, cfg->vocab_size);
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_token_ids[i] >= cfg->vocab_size)
            return snug_errorf(err, SNUG_FORMAT, "%s: eos_token_id %d is not below vocab_size "
                               "%d", name, cfg->eos_token_ids[i], cfg->vocab_size);
    return SNUG_OK;
}

snug_status snug_config_parse(const char *text, size_t len, const char *name,
                              snug_model_config *cfg, snug_error *err)
{
    json_t *root = NULL;
    snug_model_config c;
    memset(&c, 0, sizeof c);
    snug_status st = snug_json_parse(text, len, name, &root, err);
    if (st != SNUG_OK) return st;
    /* a multimodal checkpoint: its text model (text_config), the dtype and
     * the token ids from the top level where text_config has none */
    const json_t *archs = json_object_get(root, "architectures");
    const snug_arch_info *mm = snug_arch_by_multimodal(json_string_value(json_array_get(archs, 0)),
                                                       archs ? NULL : json_string_value(json_object_get(root, "model_type")));
    const json_t *text_cfg = mm ? json_object_get(root, "text_config") : NULL;
    char d[96];
    if (mm && !json_is_object(text_cfg))
        st = snug_errorf(err, SNUG_FORMAT, "%s: field 'text_config': expected the text model's configuration (an "
                         "object) of a %s, found %s", name, mm->multimodal,
                         text_cfg ? snug_json_describe(text_cfg, d, sizeof d) : "nothing");
    else
        st = parse_fields(mm ? text_cfg : root, name, mm, &c, err);
    if (st == SNUG_OK && mm) {
        c.multimodal = true;
        static const char *const inherited[] = {"torch_dtype", "dtype", "eos_token_id", "bos_token_id"};
        json_t *merged = json_object();
        for (size_t i = 0; merged && i < SNUG_ARRAY_LEN(inherited); i++) {
            const json_t *v = json_object_get(text_cfg, inherited[i]);
            if (!v || json_is_null(v)) v = json_object_get(root, inherited[i]);
            if (v && !json_is_null(v) && json_object_set(merged, inherited[i], (json_t *)v) != 0) st = SNUG_NOMEM;
        }
        if (!merged) st = SNUG_NOMEM;
        if (st == SNUG_NOMEM) snug_errorf(err, SNUG_NOMEM, "%s: out of memory", name);
        if (st == SNUG_OK) st = parse_dtype(merged, name, &c, err);
        if (st == SNUG_OK) st = parse_token_ids(merged, name, true, &c, err);
        json_decref(merged);
    }
    json_decref(root);
    if (st == SNUG_OK) st = snug_config_validate(&c, name, err);
    if (st == SNUG_OK) *cfg = c;
    return st;
}

snug_status snug_config_load(const char *dir, snug_model_config *cfg, snug_error *err)
{
    char path[4096];
    char *text = NULL;
    size_t len = 0;
    snug_status st = snug_path_join(path, sizeof path, dir, "config.json", err);
    if (st == SNUG_OK) st = snug_file_read_all(path, CONFIG_MAX_BYTES, &text, &len, err);
    if (st != SNUG_OK) return st;
    st = snug_config_parse(text, len, path, cfg, err);
    snug_mem_free(text);
    return st;
}

/* Adds key = value to obj; false when out of memory. */
static bool put(json_t *obj, const char *key, json_t *value)
{
    return value && json_object_set_new(obj, key, value) == 0;
}

static json_t *rope_scaling_json(const snug_rope_scaling *rs)
{
    json_t *o = json_object();
    if (!o) return NULL;
    bool ok = put(o, "rope_type", json_string(snug_rope_type_name(rs->type))) &&
              put(o, "factor", json_real(rs->factor));
    if (ok && rs->original_max_position_embeddings > 0)
        ok = put(o, "original_max_position_embeddings",
                 json_integer(rs->original_max_position_embeddings));
    if (ok && rs->type == SNUG_ROPE_LLAMA3)
        ok = put(o, "low_freq_factor", json_real(rs->low_freq_factor)) &&
             put(o, "high_freq_factor", json_real(rs->high_freq_factor));
    if (ok && rs->type == SNUG_ROPE_LONGROPE) {
        json_t *sf = json_array(), *lf = json_array();
        ok = sf && lf;
        if (!ok) json_decref(sf), json_decref(lf);
        ok = ok && put(o, "short_factor", sf) && put(o, "long_factor", lf);
        for (int32_t i = 0; ok && i < rs->n_factors; i++)
            ok = json_array_append_new(sf, json_real(rs->short_factor[i])) == 0 &&
                 json_array_append_new(lf, json_real(rs->long_factor[i])) == 0;
        if (ok && rs->attention_factor > 0) ok = put(o, "attention_factor", json_real(rs->attention_factor));
    }
    if (ok && rs->type == SNUG_ROPE_YARN) {
        ok = put(o, "beta_fast", json_real(rs->beta_fast)) &&
             put(o, "beta_slow", json_real(rs->beta_slow));
        if (ok && rs->mscale > 0) ok = put(o, "mscale", json_real(rs->mscale));
        if (ok && rs->mscale_all_dim > 0)
            ok = put(o, "mscale_all_dim", json_real(rs->mscale_all_dim));
        if (ok && rs->attention_factor > 0)
            ok = put(o, "attention_factor", json_real(rs->attention_factor));
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *snug_config_to_json(const snug_model_config *cfg)
{
    snug_json_init();
    json_t *o = json_object();
    json_t *archs = json_array();
    if (!o || !archs || json_array_append_new(archs, json_string(cfg->architecture)) != 0) {
        json_decref(archs);
        json_decref(o);
        return NULL;
    }
    bool ok = put(o, "architectures", archs) &&
              put(o, "model_type", json_string(snug_arch_model_type(cfg->arch))) &&
              put(o, snug_arch_get(cfg->arch)->act == SNUG_ACT_SILU ? "hidden_act" : "hidden_activation",
                  json_string(snug_arch_get(cfg->arch)->act == SNUG_ACT_SILU ? "silu" : "gelu_pytorch_tanh")) &&
              put(o, "hidden_size", json_integer(cfg->hidden_size)) &&
              put(o, "intermediate_size", json_integer(cfg->intermediate_size)) &&
              put(o, "num_hidden_layers", json_integer(cfg->n_layers)) &&
              put(o, "num_attention_heads", json_integer(cfg->n_heads)) &&
              put(o, "num_key_value_heads", json_integer(cfg->n_kv_heads)) &&
              put(o, "head_dim", json_integer(cfg->head_dim)) &&
              put(o, "vocab_size", json_integer(cfg->vocab_size)) &&
              put(o, "max_position_embeddings", json_integer(cfg->max_position_embeddings)) &&
              put(o, "rms_norm_eps", json_real(cfg->rms_norm_eps)) &&
              put(o, "rope_theta", json_real(cfg->rope_theta)) &&
              put(o, "rope_scaling", cfg->rope_scaling.type == SNUG_ROPE_DEFAULT
                                         ? json_null()
                                         : rope_scaling_json(&cfg->rope_scaling)) &&
              put(o, "tie_word_embeddings", json_boolean(cfg->tie_word_embeddings));
    if (ok && cfg->n_rope_freq_factors > 0) { /* (a GGUF's rope_freqs.weight: no config.json key) */
        json_t *f = json_array();
        ok = put(o, "rope_freq_factors", f);
        for (int32_t i = 0; ok && i < cfg->n_rope_freq_factors; i++)
            ok = json_array_append_new(f, json_real(cfg->rope_freq_factors[i])) == 0;
    }
    const snug_arch_info *fam = snug_arch_get(cfg->arch);
    if (ok && fam->attention_bias)
        ok = put(o, "attention_bias", json_boolean(cfg->qkv_bias));
    if (ok && cfg->n_rot > 0 && cfg->n_rot != cfg->head_dim) /* read back as int(head_dim x it) */
        ok = put(o, "partial_rotary_factor", json_real((double)cfg->n_rot / (double)cfg->head_dim));
    if (ok && cfg->dtype != SNUG_DTYPE_NONE)
        ok = put(o, "torch_dtype", json_string(snug_dtype_torch_name(cfg->dtype)));
    if (ok && cfg->bos_token_id >= 0) ok = put(o, "bos_token_id", json_integer(cfg->bos_token_id));
    if (ok && cfg->n_eos == 1) ok = put(o, "eos_token_id", json_integer(cfg->eos_token_ids[0]));
    if (ok && cfg->n_eos > 1) {
        json_t *e = json_array();
        ok = put(o, "eos_token_id", e);
        for (int i = 0; ok && i < cfg->n_eos; i++)
            ok = json_array_append_new(e, json_integer(cfg->eos_token_ids[i])) == 0;
    }
    if (ok && fam->window == SNUG_WINDOW_FROM_LAYER)
        ok = put(o, "use_sliding_window", json_boolean(cfg->sliding_window > 0));
    if (ok && fam->window == SNUG_WINDOW_FROM_LAYER && cfg->sliding_window > 0) { /* the first sliding layer */
        int32_t first = 0;
        while (first < cfg->n_layers && snug_config_layer_window(cfg, first) == 0) first++;
        ok = put(o, "max_window_layers", json_integer(first));
    }
    if (ok)
        ok = put(o, "sliding_window",
                 cfg->sliding_window > 0 ? json_integer(cfg->sliding_window) : json_null());
    if (ok && (fam->window == SNUG_WINDOW_PATTERN || (fam->window == SNUG_WINDOW_FROM_LAYER && cfg->sliding_window > 0))) {
        /* which layers slide, one by one */
        json_t *types = json_array();
        ok = put(o, "layer_types", types);
        for (int32_t l = 0; ok && l < cfg->n_layers; l++)
            ok = json_array_append_new(types, json_string(snug_config_layer_window(cfg, l) > 0 ? "sliding_attention"
                                                                                                : "full_attention")) == 0;
    }
    if (ok && fam->local_rope) ok = put(o, "rope_local_base_freq", json_real(cfg->rope_local_theta));
    if (ok && cfg->query_pre_attn_scalar > 0) ok = put(o, "query_pre_attn_scalar", json_real(cfg->query_pre_attn_scalar));
    if (ok && fam->softcap) { /* (null for none: absent would be Gemma 2's default) */
        ok = put(o, "attn_logit_softcapping", cfg->attn_softcap > 0 ? json_real(cfg->attn_softcap) : json_null());
        if (ok) ok = put(o, "final_logit_softcapping", cfg->final_softcap > 0 ? json_real(cfg->final_softcap) : json_null());
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

size_t snug_config_kv_bytes_per_token(const snug_model_config *cfg, int32_t n_kv_heads,
                                      snug_dtype kv_dtype)
{
    return 2 * (size_t)cfg->n_layers * (size_t)n_kv_heads * snug_dtype_bytes(kv_dtype, cfg->head_dim);
}
