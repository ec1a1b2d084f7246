/*
 * gguf_llama.c: a GGUF file of the llama architecture read as a model:
 * its configuration from the llama.* and tokenizer.ggml.* keys, and the
 * llama.cpp names of its tensors against the Hugging Face ones.
 */
#include "gguf_llama.h"

#include "base/fileio.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The llama.cpp names of the tensors of a llama model: the whole-model
 * ones, and each layer's (after "model.layers.N." and "blk.N."). */
typedef struct name_pair {
    const char *hf, *gguf;
} name_pair;

static const name_pair g_fixed[] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                    {"model.norm.weight", "output_norm.weight"},
                                    {"lm_head.weight", "output.weight"}};

static const name_pair g_per_layer[] = {{"input_layernorm.weight", "attn_norm.weight"},
                                        {"self_attn.q_proj.weight", "attn_q.weight"},
                                        {"self_attn.k_proj.weight", "attn_k.weight"},
                                        {"self_attn.v_proj.weight", "attn_v.weight"},
                                        {"self_attn.q_proj.bias", "attn_q.bias"},
                                        {"self_attn.k_proj.bias", "attn_k.bias"},
                                        {"self_attn.v_proj.bias", "attn_v.bias"},
                                        {"self_attn.o_proj.weight", "attn_output.weight"},
                                        {"self_attn.o_proj.bias", "attn_output.bias"},
                                        {"post_attention_layernorm.weight", "ffn_norm.weight"},
                                        {"mlp.gate_proj.weight", "ffn_gate.weight"},
                                        {"mlp.up_proj.weight", "ffn_up.weight"},
                                        {"mlp.down_proj.weight", "ffn_down.weight"}};

bool snug_gguf_tensor_name(const char *hf, char *out, size_t size)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_fixed); i++)
        if (strcmp(hf, g_fixed[i].hf) == 0) {
            snprintf(out, size, "%s", g_fixed[i].gguf);
            return true;
        }
    int layer, used = 0;
    if (sscanf(hf, "model.layers.%d.%n", &layer, &used) != 1 || used == 0) return false;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_per_layer); i++)
        if (strcmp(hf + used, g_per_layer[i].hf) == 0) {
            snprintf(out, size, "blk.%d.%s", layer, g_per_layer[i].gguf);
            return true;
        }
    return false;
}

bool snug_gguf_hf_name(const char *gguf, char *out, size_t size)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_fixed); i++)
        if (strcmp(gguf, g_fixed[i].gguf) == 0) {
            snprintf(out, size, "%s", g_fixed[i].hf);
            return true;
        }
    int layer = -1, used = 0;
    if (sscanf(gguf, "blk.%d.%n", &layer, &used) != 1 || used == 0 || layer < 0) return false;
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_per_layer); i++)
        if (strcmp(gguf + used, g_per_layer[i].gguf) == 0) {
            snprintf(out, size, "model.layers.%d.%s", layer, g_per_layer[i].hf);
            return true;
        }
    return false;
}


bool snug_gguf_config_tensor(const char *name) { return strcmp(name, "rope_freqs.weight") == 0; }

/* c's per-frequency rotary factors from the tensor rope_freqs.weight, when
 * g has it: F32, head_dim / 2 of them, each finite and positive; no other
 * rope scaling beside it. */
static snug_status rope_freq_factors(const snug_gguf_file *g, snug_model_config *c, snug_error *err)
{
    const snug_gguf_tensor *t = snug_gguf_find_tensor(g, "rope_freqs.weight");
    c->n_rope_freq_factors = 0;
    if (!t) return SNUG_OK;
    int64_t half = c->head_dim / 2;
    if (t->type != SNUG_GGML_F32 || t->n_dims != 1 || t->ne[0] != (uint64_t)half)
        return snug_errorf(err, SNUG_FORMAT, "%s: tensor 'rope_freqs.weight' is %s of %llu values; expected F32, "
                           "one value per rotary frequency (head size %d / 2 = %lld)", g->path,
                           snug_ggml_type_name(t->type), (unsigned long long)t->ne[0], c->head_dim, (long long)half);
    if (half > SNUG_MAX_ROPE_FACTORS)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor 'rope_freqs.weight': %lld rotary factors, more than "
                           "the %d snug takes", g->path, (long long)half, SNUG_MAX_ROPE_FACTORS);
    if (c->rope_scaling.type != SNUG_ROPE_DEFAULT)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: tensor 'rope_freqs.weight' beside "
                           "llama.rope.scaling.type '%s': one rope scaling at a time", g->path,
                           snug_rope_type_name(c->rope_scaling.type));
    snug_status st = snug_pread_full(g->fd, c->rope_freq_factors, (size_t)half * sizeof(float),
                                     g->data_start + t->offset, g->path, err);
    if (st != SNUG_OK) return st;
    for (int64_t i = 0; i < half; i++)
        if (!(isfinite(c->rope_freq_factors[i]) && c->rope_freq_factors[i] > 0.0f))
            return snug_errorf(err, SNUG_FORMAT, "%s: tensor 'rope_freqs.weight': value %lld is %g; expected a "
                               "finite factor above 0", g->path, (long long)i, (double)c->rope_freq_factors[i]);
    c->n_rope_freq_factors = (int32_t)half;
    return SNUG_OK;
}

snug_status snug_gguf_llama_config(const snug_gguf_file *g, snug_model_config *c, snug_error *err)
{
    const char *arch = NULL;
    snug_status st = snug_gguf_get_string(g, "general.architecture", true, &arch, NULL, err);
    if (st != SNUG_OK) return st;
    char shown[SNUG_SHOWN_MAX];
    if (strcmp(arch, "llama") != 0)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: general.architecture is '%s'; snug "
                           "converts llama", g->path, snug_str_shown(arch, shown, sizeof shown));
    memset(c, 0, sizeof *c);
    c->arch = SNUG_ARCH_LLAMA;
    snprintf(c->architecture, sizeof c->architecture, "LlamaForCausalLM");
    int64_t v[6] = {0};
    static const char *const keys[] = {"llama.embedding_length", "llama.feed_forward_length",
                                       "llama.block_count", "llama.attention.head_count",
                                       "llama.context_length"};
    for (int i = 0; i < 5 && st == SNUG_OK; i++)
        st = snug_gguf_get_int(g, keys[i], true, 1, INT32_MAX, &v[i], NULL, err);
    if (st != SNUG_OK) return st;
    c->hidden_size = (int32_t)v[0], c->intermediate_size = (int32_t)v[1];
    c->n_layers = (int32_t)v[2], c->n_heads = (int32_t)v[3];
    c->max_position_embeddings = v[4];
    v[5] = c->n_heads;
    st = snug_gguf_get_int(g, "llama.attention.head_count_kv", false, 1, INT32_MAX, &v[5], NULL, err);
    if (st != SNUG_OK) return st;
    c->n_kv_heads = (int32_t)v[5];
    if (c->hidden_size % c->n_heads != 0)
        return snug_errorf(err, SNUG_FORMAT, "%s: head_count %d does not divide "
                           "embedding_length %d", g->path, c->n_heads, c->hidden_size);
    c->head_dim = c->hidden_size / c->n_heads;
    int64_t x = c->head_dim;
    st = snug_gguf_get_int(g, "llama.attention.key_length", false, 2, 4096, &x, NULL, err);
    if (st != SNUG_OK) return st;
    c->head_dim = (int32_t)x;
    x = c->head_dim;
    st = snug_gguf_get_int(g, "llama.rope.dimension_count", false, 0, 4096, &x, NULL, err);
    if (st != SNUG_OK) return st;
    if (x != c->head_dim)
        return snug_errorf(err, SNUG_UNSUPPORTED, "%s: llama.rope.dimension_count %lld is not "
                           "the head size %d (partial rotary embeddings are not supported)",
                           g->path, (long long)x, c->head_dim);
    c->rms_norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    st = snug_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", false, 1e-30, 0.5,
                             &c->rms_norm_eps, NULL, err);
    if (st == SNUG_OK)
        st = snug_gguf_get_float(g, "llama.rope.freq_base", false, 1e-6, 1e15, &c->rope_theta,
                                 NULL, err);
    if (st != SNUG_OK) return st;
    c->rope_scaling.factor = 1.0;
    const char *scaling = NULL;
    bool has = false;
    st = snug_gguf_get_string(g, "llama.rope.scaling.type", false, &scaling, &has, err);
    if (st != SNUG_OK) return st;
    if (has && strcmp(scaling, "none") != 0) {
        if (strcmp(scaling, "linear") != 0)
            return snug_errorf(err, SNUG_UNSUPPORTED, "%s: llama.rope.scaling.type '%s' is "
                               "not supported by the GGUF import (linear is)", g->path,
                               snug_str_shown(scaling, shown, sizeof shown));
        c->rope_scaling.type = SNUG_ROPE_LINEAR;
        st = snug_gguf_get_float(g, "llama.rope.scaling.factor", true, 1.0, 1e6,
                                 &c->rope_scaling.factor, NULL, err);
        if (st != SNUG_OK) return st;
    }
    st = rope_freq_factors(g, c, err);
    if (st != SNUG_OK) return st;
    const snug_gguf_tensor *emb = snug_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2)
        return snug_errorf(err, SNUG_FORMAT, "%s: no 2-D tensor 'token_embd.weight'", g->path);
    x = (int64_t)SNUG_MIN(emb->ne[1], (uint64_t)INT32_MAX);
    st = snug_gguf_get_int(g, "llama.vocab_size", false, 1, INT32_MAX, &x, NULL, err);
    if (st != SNUG_OK) return st;
    c->vocab_size = (int32_t)x;
    int64_t bos = -1, eos = -1;
    bool has_eos = false;
    st = snug_gguf_get_int(g, "tokenizer.ggml.bos_token_id", false, 0, INT32_MAX, &bos, NULL, err);
    if (st == SNUG_OK)
        st = snug_gguf_get_int(g, "tokenizer.ggml.eos_token_id", false, 0, INT32_MAX, &eos,
                               &has_eos, err);
    if (st != SNUG_OK) return st;
    c->bos_token_id = (int32_t)bos;
    if (has_eos) c->eos_token_ids[c->n_eos++] = (int32_t)eos;
    c->rope_interleaved = true;
    c->dtype = emb->type == SNUG_GGML_BF16  ? SNUG_DTYPE_BF16
               : emb->type == SNUG_GGML_F16 ? SNUG_DTYPE_F16
                                            : SNUG_DTYPE_F32;
    return snug_config_validate(c, g->path, err);
}

