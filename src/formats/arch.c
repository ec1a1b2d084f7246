/*
 * arch.c: the table of model families.
 */
#include "arch.h"

#include <string.h>

static const snug_arch_info g_families[] = {
    {.arch = SNUG_ARCH_LLAMA, .architecture = "LlamaForCausalLM", .model_type = "llama", .gguf = "llama",
     .attention_bias = true, .gguf_interleaved = true, .window = SNUG_WINDOW_NONE},
    {.arch = SNUG_ARCH_MISTRAL, .architecture = "MistralForCausalLM", .model_type = "mistral", .gguf = NULL,
     .attention_bias = true, .gguf_interleaved = true, .window = SNUG_WINDOW_ALL},
    {.arch = SNUG_ARCH_QWEN2, .architecture = "Qwen2ForCausalLM", .model_type = "qwen2", .gguf = "qwen2",
     .qkv_bias = true, .window = SNUG_WINDOW_FROM_LAYER},
    {.arch = SNUG_ARCH_QWEN3, .architecture = "Qwen3ForCausalLM", .model_type = "qwen3", .gguf = "qwen3",
     .attention_bias = true, .qk_norm = true, .window = SNUG_WINDOW_FROM_LAYER},
    {.arch = SNUG_ARCH_PHI3, .architecture = "Phi3ForCausalLM", .model_type = "phi3", .gguf = "phi3",
     .fused_qkv = true, .fused_gate_up = true, .partial_rotary = true, .window = SNUG_WINDOW_NONE},
    {.arch = SNUG_ARCH_GEMMA3, .architecture = "Gemma3ForCausalLM", .model_type = "gemma3_text", .gguf = "gemma3",
     .qk_norm = true, .window = SNUG_WINDOW_PATTERN, .act = SNUG_ACT_GELU_TANH,
     .sandwich_norms = true, .norm_plus_one = true, .embed_scale = true, .local_rope = true,
     .config_defaults = true, .multimodal = "Gemma3ForConditionalGeneration", .multimodal_type = "gemma3",
     .window_pattern = 6, .softcap = true},
    {.arch = SNUG_ARCH_GEMMA2, .architecture = "Gemma2ForCausalLM", .model_type = "gemma2", .gguf = "gemma2",
     .window = SNUG_WINDOW_PATTERN, .act = SNUG_ACT_GELU_TANH, .sandwich_norms = true, .norm_plus_one = true,
     .embed_scale = true, .config_defaults = true, .window_pattern = 2, .softcap = true},
};

const snug_arch_info *snug_arch_get(snug_arch arch)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_families); i++)
        if (g_families[i].arch == arch) return &g_families[i];
    SNUG_ASSERT(!"a snug_arch without a table entry");
    return &g_families[0];
}

const snug_arch_info *snug_arch_by_architecture(const char *architecture)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_families); i++)
        if (strcmp(architecture, g_families[i].architecture) == 0) return &g_families[i];
    return NULL;
}

const snug_arch_info *snug_arch_by_model_type(const char *model_type)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_families); i++)
        if (strcmp(model_type, g_families[i].model_type) == 0) return &g_families[i];
    return NULL;
}

const snug_arch_info *snug_arch_by_multimodal(const char *architecture, const char *model_type)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_families); i++) {
        const snug_arch_info *f = &g_families[i];
        if (f->multimodal && ((architecture && strcmp(architecture, f->multimodal) == 0) ||
                              (!architecture && model_type && strcmp(model_type, f->multimodal_type) == 0)))
            return f;
    }
    return NULL;
}

const snug_arch_info *snug_arch_by_gguf(const char *gguf)
{
    for (size_t i = 0; i < SNUG_ARRAY_LEN(g_families); i++)
        if (g_families[i].gguf && strcmp(gguf, g_families[i].gguf) == 0) return &g_families[i];
    return NULL;
}

const char *snug_arch_list(bool gguf)
{
    return gguf ? "llama, qwen2, qwen3, phi3, gemma3"
                : "LlamaForCausalLM (llama), MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2), "
                  "Qwen3ForCausalLM (qwen3), Phi3ForCausalLM (phi3), Gemma3ForCausalLM (gemma3_text)";
}
