/*
 * test_config.c: config.json of the families formats/arch.h lists: real
 * files, every rope scaling type, defaults, validation messages, and the
 * writer's round trip.
 */
#include "test.h"

#include "formats/config.h"
#include "base/mem.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "base/json.h"

static snug_status parse(const char *text, snug_model_config *cfg, snug_error *err)
{
    return snug_config_parse(text, strlen(text), "config.json", cfg, err);
}

static snug_status load(const char *file, snug_model_config *cfg, snug_error *err)
{
    char *text = NULL;
    size_t len = 0;
    snug_status st = snug_file_read_all(file, 1 << 20, &text, &len, err);
    if (st != SNUG_OK) return st;
    st = snug_config_parse(text, len, file, cfg, err);
    snug_mem_free(text);
    return st;
}

static void test_real_configs(void)
{
    snug_model_config c;
    snug_error err = {0};
    CHECK_OK(load("tests/data/configs/mistral-v0.3.json", &c, &err), &err);
    CHECK(c.arch == SNUG_ARCH_MISTRAL && strcmp(c.architecture, "MistralForCausalLM") == 0, "mistral");
    CHECK(c.hidden_size == 4096 && c.intermediate_size == 14336 && c.n_layers == 32 &&
          c.n_heads == 32 && c.n_kv_heads == 8 && c.head_dim == 128 && c.vocab_size == 32768,
          "mistral shapes");
    CHECK(c.rope_theta == 1000000.0 && c.rms_norm_eps == 1e-5 && c.sliding_window == 0,
          "mistral rope %g eps %g window %lld", c.rope_theta, c.rms_norm_eps, (long long)c.sliding_window);
    CHECK(c.dtype == SNUG_DTYPE_BF16 && !c.tie_word_embeddings && !c.qkv_bias, "mistral dtype/tie/bias");
    CHECK(c.bos_token_id == 1 && c.n_eos == 1 && c.eos_token_ids[0] == 2, "mistral bos/eos");

    CHECK_OK(load("tests/data/configs/tinyllama-1.1b-chat.json", &c, &err), &err);
    CHECK(c.arch == SNUG_ARCH_LLAMA && c.n_kv_heads == 4 && c.intermediate_size == 5632 &&
          c.n_layers == 22 && c.max_position_embeddings == 2048 && c.rope_scaling.type == SNUG_ROPE_DEFAULT,
          "tinyllama");

    CHECK_OK(load("tests/data/configs/smollm2-135m.json", &c, &err), &err);
    CHECK(c.head_dim == 64 && c.n_heads == 9 && c.n_kv_heads == 3 && c.hidden_size == 576 &&
          c.tie_word_embeddings && c.rope_theta == 100000.0 && c.dtype == SNUG_DTYPE_F32,
          "smollm2: head_dim %d theta %g", c.head_dim, c.rope_theta);

    CHECK_FAILS(load("tests/data/configs/gpt2.json", &c, &err), &err, SNUG_UNSUPPORTED,
                "'GPT2LMHeadModel' is not supported; supported: LlamaForCausalLM (llama), "
                "MistralForCausalLM (mistral), Qwen2ForCausalLM (qwen2)");
    CHECK(strstr(err.msg, "gpt2.json: field 'architectures'") != NULL, "names file and field: %s", err.msg);
    CHECK_FAILS(load("tests/data/configs/gemma-2b-it.json", &c, &err), &err, SNUG_UNSUPPORTED,
                "'GemmaForCausalLM' is not supported");
}

static const char g_llama32[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 2048,"
    " \"intermediate_size\": 8192, \"num_hidden_layers\": 16, \"num_attention_heads\": 32,"
    " \"num_key_value_heads\": 8, \"head_dim\": 64, \"vocab_size\": 128256,"
    " \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0,"
    " \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0,"
    " \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"},"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"bos_token_id\": 128000,"
    " \"eos_token_id\": [128001, 128008, 128009]}";

static void test_llama3_rope_and_eos_list(void)
{
    snug_model_config c;
    snug_error err = {0};
    CHECK_OK(parse(g_llama32, &c, &err), &err);
    CHECK(c.rope_scaling.type == SNUG_ROPE_LLAMA3 && c.rope_scaling.factor == 32.0 &&
          c.rope_scaling.low_freq_factor == 1.0 && c.rope_scaling.high_freq_factor == 4.0 &&
          c.rope_scaling.original_max_position_embeddings == 8192, "llama3 scaling");
    CHECK(c.n_eos == 3 && c.eos_token_ids[2] == 128009, "eos list");
    CHECK(c.tie_word_embeddings && c.rope_theta == 500000.0, "tied, theta");
}

static void test_other_rope_types(void)
{
    snug_model_config c;
    snug_error err = {0};
    const char *base = "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"
                       "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,%s}";
    char buf[1024];
    snprintf(buf, sizeof buf, base, "\"rope_scaling\":{\"type\":\"linear\",\"factor\":4}");
    CHECK_OK(parse(buf, &c, &err), &err);
    CHECK(c.rope_scaling.type == SNUG_ROPE_LINEAR && c.rope_scaling.factor == 4.0, "linear via 'type'");
    CHECK(c.n_kv_heads == 4 && c.head_dim == 16, "defaults: kv heads = heads, head_dim = hidden/heads");
    CHECK(c.max_position_embeddings == 2048 && c.rms_norm_eps == 1e-6 && c.rope_theta == 10000.0,
          "defaults of LlamaConfig");
    snprintf(buf, sizeof buf, base, "\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":2.0}");
    CHECK_OK(parse(buf, &c, &err), &err);
    CHECK(c.rope_scaling.type == SNUG_ROPE_DYNAMIC, "dynamic");
    snprintf(buf, sizeof buf, base, "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,"
             "\"original_max_position_embeddings\":32768}");
    CHECK_OK(parse(buf, &c, &err), &err);
    CHECK(c.rope_scaling.type == SNUG_ROPE_YARN && c.rope_scaling.beta_fast == 32 &&
          c.rope_scaling.beta_slow == 1 && c.rope_scaling.original_max_position_embeddings == 32768,
          "yarn with defaults");
    snprintf(buf, sizeof buf, base, "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":123.0}");
    CHECK_OK(parse(buf, &c, &err), &err);
    CHECK(c.rope_scaling.type == SNUG_ROPE_DEFAULT && c.rope_theta == 123.0, "rope_parameters (v5)");
    snprintf(buf, sizeof buf, base, "\"rope_scaling\":{\"rope_type\":\"longrope\",\"factor\":2}");
    CHECK_FAILS(parse(buf, &c, &err), &err, SNUG_FORMAT, "field 'rope_scaling.short_factor': expected a list");
    snprintf(buf, sizeof buf, base, "\"rope_scaling\":{\"rope_type\":\"mrope\",\"factor\":2}");
    CHECK_FAILS(parse(buf, &c, &err), &err, SNUG_UNSUPPORTED, "rope type 'mrope' is not supported; supported: "
                "default, linear, dynamic, llama3, yarn, longrope");
    snprintf(buf, sizeof buf, base, "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8}");
    CHECK_FAILS(parse(buf, &c, &err), &err, SNUG_FORMAT,
                "field 'original_max_position_embeddings' is missing");
    snprintf(buf, sizeof buf, base, "\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":0.5}");
    CHECK_FAILS(parse(buf, &c, &err), &err, SNUG_FORMAT, "field 'factor': expected a number in [1, 1e+06]");
}

static void test_qwen2(void)
{
    snug_model_config c;
    snug_error err = {0};
    const char *q = "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":896,"
                    "\"intermediate_size\":4864,\"num_hidden_layers\":24,\"num_attention_heads\":14,"
                    "\"num_key_value_heads\":2,\"vocab_size\":151936,\"rms_norm_eps\":1e-06,"
                    "\"rope_theta\":1000000.0,\"sliding_window\":131072,\"use_sliding_window\":false,"
                    "\"tie_word_embeddings\":true,\"torch_dtype\":\"bfloat16\",\"bos_token_id\":151643,"
                    "\"eos_token_id\":151645,\"max_window_layers\":24}";
    CHECK_OK(parse(q, &c, &err), &err);
    CHECK(c.arch == SNUG_ARCH_QWEN2 && c.qkv_bias && !c.o_bias, "Qwen2 has q/k/v biases only");
    CHECK(c.sliding_window == 0, "use_sliding_window false disables the window");
    CHECK(c.head_dim == 64, "head_dim 896 / 14 = %d", c.head_dim);
    /* With the window on: every layer from max_window_layers on has it. */
    const char *w = "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":896,"
                    "\"intermediate_size\":4864,\"num_hidden_layers\":24,\"num_attention_heads\":14,"
                    "\"num_key_value_heads\":2,\"vocab_size\":151936,\"sliding_window\":4096,"
                    "\"use_sliding_window\":true,\"max_window_layers\":%d}";
    char buf[1024];
    snprintf(buf, sizeof buf, w, 0);
    CHECK_OK(parse(buf, &c, &err), &err);
    CHECK(c.sliding_window == 4096, "max_window_layers 0: every layer windowed (%lld)", (long long)c.sliding_window);
    snprintf(buf, sizeof buf, w, 24);
    CHECK_OK(parse(buf, &c, &err), &err);
    CHECK(c.sliding_window == 0, "max_window_layers 24 of 24 layers: none windowed (%lld)", (long long)c.sliding_window);
    snprintf(buf, sizeof buf, w, 12);
    CHECK_OK(parse(buf, &c, &err), &err);
    int sliding = 0;
    for (int l = 0; l < 24; l++) sliding += snug_config_layer_window(&c, l) == 4096;
    CHECK(c.sliding_window == 4096 && sliding == 12 && snug_config_layer_window(&c, 11) == 0 &&
              snug_config_layer_window(&c, 12) == 4096,
          "max_window_layers 12: layers 12 to 23 windowed (%d of them)", sliding);
    /* layer_types, where given, says it layer by layer (transformers' newer configs) */
    const char *lt = "{\"architectures\":[\"Qwen3ForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":128,"
                     "\"num_hidden_layers\":3,\"num_attention_heads\":4,\"vocab_size\":100,\"sliding_window\":64,"
                     "\"use_sliding_window\":true,\"max_window_layers\":0,"
                     "\"layer_types\":[\"full_attention\",\"sliding_attention\",\"full_attention\"]}";
    CHECK_OK(parse(lt, &c, &err), &err);
    CHECK(snug_config_layer_window(&c, 0) == 0 && snug_config_layer_window(&c, 1) == 64 &&
              snug_config_layer_window(&c, 2) == 0,
          "layer_types: only layer 1 windowed");
    /* and written back, read the same */
    json_t *j = snug_config_to_json(&c);
    char *text = j ? snug_json_dumps(j, false) : NULL;
    snug_model_config back;
    CHECK(text && parse(text, &back, &err) == SNUG_OK && memcmp(back.sliding, c.sliding, sizeof c.sliding) == 0 &&
              back.sliding_window == 64,
          "layer_types round trip: %s", text ? text : "(none)");
    snug_mem_free(text);
    json_decref(j);
}

/* Qwen3 and Phi-3 as their published config.json files give them
 * (Qwen3-1.7B; Phi-3-mini-4k-instruct, whose sliding_window 2047 llama.cpp
 * and vLLM ignore, and so does snug), partial rotary (Phi-4-mini's 0.75),
 * and what the table refuses. */
static void test_qwen3_phi3(void)
{
    snug_model_config c;
    snug_error err = {0};
    const char *qwen3 = "{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,"
                        "\"bos_token_id\":151643,\"eos_token_id\":151645,\"head_dim\":128,\"hidden_act\":\"silu\","
                        "\"hidden_size\":2048,\"initializer_range\":0.02,\"intermediate_size\":6144,"
                        "\"max_position_embeddings\":40960,\"max_window_layers\":28,\"model_type\":\"qwen3\","
                        "\"num_attention_heads\":16,\"num_hidden_layers\":28,\"num_key_value_heads\":8,"
                        "\"rms_norm_eps\":1e-06,\"rope_scaling\":null,\"rope_theta\":1000000,\"sliding_window\":null,"
                        "\"tie_word_embeddings\":true,\"torch_dtype\":\"bfloat16\",\"use_cache\":true,"
                        "\"use_sliding_window\":false,\"vocab_size\":151936}";
    CHECK_OK(parse(qwen3, &c, &err), &err);
    CHECK(c.arch == SNUG_ARCH_QWEN3 && !c.qkv_bias && !c.o_bias && c.head_dim == 128 && c.n_rot == 0 &&
          c.tie_word_embeddings && c.sliding_window == 0 && snug_arch_get(c.arch)->qk_norm,
          "Qwen3-1.7B: no biases, head_dim 128, q/k norms, tied");
    const char *phi3 = "{\"architectures\":[\"Phi3ForCausalLM\"],\"attention_dropout\":0.0,\"bos_token_id\":1,"
                       "\"embd_pdrop\":0.0,\"eos_token_id\":32000,\"hidden_act\":\"silu\",\"hidden_size\":3072,"
                       "\"initializer_range\":0.02,\"intermediate_size\":8192,\"max_position_embeddings\":4096,"
                       "\"model_type\":\"phi3\",\"num_attention_heads\":32,\"num_hidden_layers\":32,"
                       "\"num_key_value_heads\":32,\"original_max_position_embeddings\":4096,\"pad_token_id\":32000,"
                       "\"resid_pdrop\":0.0,\"rms_norm_eps\":1e-05,\"rope_scaling\":null,\"rope_theta\":10000.0,"
                       "\"sliding_window\":2047,\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\","
                       "\"use_cache\":true,\"vocab_size\":32064}";
    CHECK_OK(parse(phi3, &c, &err), &err);
    const snug_arch_info *fam = snug_arch_get(c.arch);
    CHECK(c.arch == SNUG_ARCH_PHI3 && fam->fused_qkv && fam->fused_gate_up && c.head_dim == 96 && c.n_rot == 0 &&
          c.sliding_window == 0 && !c.qkv_bias, "Phi-3-mini-4k: fused, head_dim 96, all of it rotated, no window");
    const char *partial = "{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":3072,\"intermediate_size\":8192,"
                          "\"num_hidden_layers\":2,\"num_attention_heads\":24,\"num_key_value_heads\":8,"
                          "\"vocab_size\":200064,\"partial_rotary_factor\":%s}";
    char buf[512];
    snprintf(buf, sizeof buf, partial, "0.75");
    CHECK_OK(parse(buf, &c, &err), &err);
    CHECK(c.n_rot == 96 && snug_config_rot_dims(&c) == 96, "0.75 of head_dim 128 turns 96 (%d)", c.n_rot);
    json_t *o = snug_config_to_json(&c);
    char *text = o ? json_dumps(o, 0) : NULL;
    snug_model_config back;
    CHECK(text && parse(text, &back, &err) == SNUG_OK && back.n_rot == 96, "partial rotary survives the writer");
    snug_mem_free(text);
    json_decref(o);
    snprintf(buf, sizeof buf, partial, "0.005");
    CHECK_FAILS(parse(buf, &c, &err), &err, SNUG_FORMAT, "turns 0 dimensions");
    snprintf(buf, sizeof buf, partial, "0.29");
    CHECK_FAILS(parse(buf, &c, &err), &err, SNUG_FORMAT, "turns 37 dimensions; expected an even number");
    CHECK_FAILS(parse("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"vocab_size\":9,\"partial_rotary_factor\":0.5}",
                      &c, &err),
                &err, SNUG_UNSUPPORTED, "LlamaForCausalLM turns every dimension of a head");
    CHECK_FAILS(parse("{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"vocab_size\":9,\"attention_bias\":true}",
                      &c, &err),
                &err, SNUG_UNSUPPORTED, "Phi3ForCausalLM has no attention biases");
    CHECK_FAILS(parse("{\"architectures\":[\"GemmaForCausalLM\"],\"hidden_size\":64}", &c, &err), &err,
                SNUG_UNSUPPORTED, "supported: LlamaForCausalLM (llama), MistralForCausalLM (mistral), "
                "Qwen2ForCausalLM (qwen2), Qwen3ForCausalLM (qwen3), Phi3ForCausalLM (phi3)");
    /* LongRoPE as Phi-3-mini-128k writes it: a factor per rotary frequency (head_dim 96: 48), the
     * original length at the top level; "su" is its first name */
    char lr[4096], fs[1024], fl[1024];
    size_t o1 = 0, o2 = 0;
    for (int i = 0; i < 48; i++) {
        o1 += (size_t)snprintf(fs + o1, sizeof fs - o1, "%s%g", i ? "," : "", 1.0 + i / 100.0);
        o2 += (size_t)snprintf(fl + o2, sizeof fl - o2, "%s%g", i ? "," : "", 1.0 + i);
    }
    const char *lrf = "{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":3072,\"intermediate_size\":8192,"
                      "\"num_hidden_layers\":2,\"num_attention_heads\":32,\"vocab_size\":32064,"
                      "\"max_position_embeddings\":131072,\"original_max_position_embeddings\":4096,"
                      "\"rope_scaling\":{\"type\":\"%s\",\"short_factor\":[%s],\"long_factor\":[%s]}}";
    snprintf(lr, sizeof lr, lrf, "su", fs, fl);
    CHECK_OK(parse(lr, &c, &err), &err);
    CHECK(c.rope_scaling.type == SNUG_ROPE_LONGROPE && c.rope_scaling.n_factors == 48 &&
          c.rope_scaling.original_max_position_embeddings == 4096 && c.rope_scaling.long_factor[47] == 48.0f &&
          fabsf(c.rope_scaling.short_factor[1] - 1.01f) < 1e-6f, "longrope: 48 factors each, original 4096");
    o = snug_config_to_json(&c);
    text = o ? json_dumps(o, 0) : NULL;
    CHECK(text && parse(text, &back, &err) == SNUG_OK && back.rope_scaling.type == SNUG_ROPE_LONGROPE &&
          memcmp(back.rope_scaling.long_factor, c.rope_scaling.long_factor, 48 * sizeof(float)) == 0 &&
          back.rope_scaling.original_max_position_embeddings == 4096, "longrope survives the writer");
    snug_mem_free(text);
    json_decref(o);
    snprintf(lr, sizeof lr, lrf, "longrope", fs, "1,2,3");
    CHECK_FAILS(parse(lr, &c, &err), &err, SNUG_FORMAT, "short_factor has 48 factors, long_factor 3");
    snprintf(lr, sizeof lr, lrf, "longrope", "1,2,3", "1,2,3");
    CHECK_FAILS(parse(lr, &c, &err), &err, SNUG_FORMAT, "longrope: 3 short and long factors for 48 rotary");
    /* the lists in messages name every family of the table */
    for (int a = SNUG_ARCH_LLAMA; a <= SNUG_ARCH_GEMMA3; a++) {
        const snug_arch_info *f = snug_arch_get((snug_arch)a);
        CHECK(f->arch == (snug_arch)a && strstr(snug_arch_list(false), f->architecture) &&
              snug_arch_by_model_type(f->model_type) == f && (!f->gguf || (strstr(snug_arch_list(true), f->gguf) &&
                                                                         snug_arch_by_gguf(f->gguf) == f)),
              "family %d (%s) is in the lists and found by its names", a, f->architecture);
    }
}

static void test_validation_messages(void)
{
    snug_model_config c;
    snug_error err = {0};
    CHECK_FAILS(parse("{\"model_type\":\"llama\",\"hidden_size\":100,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":3,\"vocab_size\":10}", &c, &err),
                &err, SNUG_FORMAT, "num_attention_heads 3 does not divide hidden_size 100");
    CHECK_FAILS(parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"num_key_value_heads\":3,"
                      "\"vocab_size\":10}", &c, &err),
                &err, SNUG_FORMAT, "num_key_value_heads 3 does not divide num_attention_heads 4");
    CHECK_FAILS(parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":10,"
                      "\"head_dim\":7}", &c, &err), &err, SNUG_FORMAT, "head_dim 7 must be even");
    CHECK_FAILS(parse("{\"model_type\":\"llama\",\"intermediate_size\":8,\"num_hidden_layers\":1,"
                      "\"num_attention_heads\":4,\"vocab_size\":10}", &c, &err),
                &err, SNUG_FORMAT, "config.json: field 'hidden_size' is missing");
    CHECK_FAILS(parse("{\"model_type\":\"llama\",\"hidden_size\":\"64\",\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":10}", &c, &err),
                &err, SNUG_FORMAT, "field 'hidden_size': expected an integer in [1, 1048576], found the string \"64\"");
    CHECK_FAILS(parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":0,\"num_attention_heads\":4,\"vocab_size\":10}", &c, &err),
                &err, SNUG_FORMAT, "field 'num_hidden_layers': expected an integer in [1, 4096], found the integer 0");
    CHECK_FAILS(parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":10,"
                      "\"eos_token_id\":10}", &c, &err), &err, SNUG_FORMAT, "eos_token_id 10 is not below vocab_size 10");
    CHECK_FAILS(parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":10,"
                      "\"torch_dtype\":\"int8\"}", &c, &err), &err, SNUG_UNSUPPORTED, "'int8' is not a weight type");
    CHECK_FAILS(parse("{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"qwen2\"}", &c, &err),
                &err, SNUG_FORMAT, "'architectures' says LlamaForCausalLM but 'model_type' says qwen2");
    CHECK_FAILS(parse("{\"hidden_size\":64}", &c, &err), &err, SNUG_FORMAT,
                "neither 'architectures' nor 'model_type' is given");
    CHECK_FAILS(parse("{\"model_type\":\"llama\",", &c, &err), &err, SNUG_FORMAT, "not valid JSON");
    CHECK_FAILS(parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":8,"
                      "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":10,"
                      "\"bos_token_id\":\"<s>\"}", &c, &err),
                &err, SNUG_FORMAT, "field 'bos_token_id': expected a token id or a list of them");
}

static void test_limits_in_validate(void)
{
    /* every reader of shapes (GGUF, llama2.c, presets) relies on validate for the limits */
    snug_model_config c;
    snug_error err = {0};
    CHECK_OK(parse(g_llama32, &c, &err), &err);
    snug_model_config x = c;
    x.hidden_size = 4300000;
    CHECK_FAILS(snug_config_validate(&x, "m.gguf", &err), &err, SNUG_FORMAT,
                "m.gguf: hidden_size is 4300000; expected 1 to 1048576");
    x = c;
    x.n_layers = 715827883;
    CHECK_FAILS(snug_config_validate(&x, "m.gguf", &err), &err, SNUG_FORMAT,
                "num_hidden_layers is 715827883; expected 1 to 4096");
    x = c;
    x.vocab_size = 0;
    CHECK_FAILS(snug_config_validate(&x, "m.gguf", &err), &err, SNUG_FORMAT, "vocab_size is 0");
    x = c;
    x.n_heads = 4096, x.head_dim = 512, x.n_kv_heads = 8;
    CHECK_FAILS(snug_config_validate(&x, "m.gguf", &err), &err, SNUG_FORMAT,
                "num_attention_heads 4096 x head_dim 512 is above the limit");
    const char *listed = "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":8,"
                         "\"num_hidden_layers\":1,\"num_attention_heads\":4,\"vocab_size\":10,"
                         "\"bos_token_id\":[3, 4]}";
    CHECK_OK(parse(listed, &c, &err), &err);
    CHECK(c.bos_token_id == 3, "a bos list gives its first id");
}

static bool same_config(const snug_model_config *a, const snug_model_config *b)
{
    return a->arch == b->arch && strcmp(a->architecture, b->architecture) == 0 &&
           a->hidden_size == b->hidden_size && a->intermediate_size == b->intermediate_size &&
           a->n_layers == b->n_layers && a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads &&
           a->head_dim == b->head_dim && a->vocab_size == b->vocab_size &&
           a->max_position_embeddings == b->max_position_embeddings &&
           a->rms_norm_eps == b->rms_norm_eps && a->rope_theta == b->rope_theta &&
           a->rope_scaling.type == b->rope_scaling.type && a->rope_scaling.factor == b->rope_scaling.factor &&
           a->rope_scaling.low_freq_factor == b->rope_scaling.low_freq_factor &&
           a->rope_scaling.high_freq_factor == b->rope_scaling.high_freq_factor &&
           a->rope_scaling.original_max_position_embeddings == b->rope_scaling.original_max_position_embeddings &&
           a->tie_word_embeddings == b->tie_word_embeddings && a->qkv_bias == b->qkv_bias &&
           a->o_bias == b->o_bias && a->dtype == b->dtype && a->bos_token_id == b->bos_token_id &&
           a->n_eos == b->n_eos && memcmp(a->eos_token_ids, b->eos_token_ids, sizeof a->eos_token_ids) == 0 &&
           a->sliding_window == b->sliding_window;
}

static void test_round_trip(void)
{
    const char *texts[] = {g_llama32};
    snug_model_config a, b;
    snug_error err = {0};
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    CHECK_OK(parse(texts[0], &a, &err), &err);
    CHECK_OK(load("tests/data/configs/mistral-v0.3.json", &b, &err), &err);
    const snug_model_config *cs[] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        json_t *o = snug_config_to_json(cs[i]);
        CHECK(o != NULL, "to_json");
        char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        snug_model_config back;
        memset(&back, 0, sizeof back);
        CHECK_OK(parse(text, &back, &err), &err);
        CHECK(same_config(cs[i], &back), "config %d survives writing and reading: %s", i, text);
        snug_mem_free(text);
    }
}

/* google/gemma-3-1b-it's config.json as published (transformers 4.50): no
 * tie_word_embeddings, which Gemma3TextConfig defaults to true (the
 * checkpoint has no lm_head.weight), no layer_types, the pattern instead. */
static const char g_gemma3_1b[] =
    "{\"architectures\": [\"Gemma3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"attn_logit_softcapping\": null, \"bos_token_id\": 2, \"cache_implementation\": \"hybrid\", "
    "\"eos_token_id\": [1, 106], \"final_logit_softcapping\": null, \"head_dim\": 256, "
    "\"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": 1152, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 6912, \"max_position_embeddings\": 32768, \"model_type\": \"gemma3_text\", "
    "\"num_attention_heads\": 4, \"num_hidden_layers\": 26, \"num_key_value_heads\": 1, \"pad_token_id\": 0, "
    "\"query_pre_attn_scalar\": 256, \"rms_norm_eps\": 1e-06, \"rope_local_base_freq\": 10000, "
    "\"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": 512, \"sliding_window_pattern\": 6, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.50.0.dev0\", \"use_cache\": true, "
    "\"vocab_size\": 262144}";

static void test_gemma3(void)
{
    snug_model_config c, back;
    snug_error err = {0};
    CHECK_OK(parse(g_gemma3_1b, &c, &err), &err);
    CHECK(c.arch == SNUG_ARCH_GEMMA3 && c.tie_word_embeddings, "gemma-3-1b-it: tied %d (the default)",
          (int)c.tie_word_embeddings);
    CHECK(c.head_dim == 256 && c.n_kv_heads == 1 && c.sliding_window == 512 && c.rope_theta == 1e6 &&
              c.rope_local_theta == 10000.0 && c.query_pre_attn_scalar == 256.0 && c.norm_plus_one &&
              snug_config_sliding_pattern(&c) == 6 && c.dtype == SNUG_DTYPE_BF16,
          "gemma-3-1b-it: head_dim %d window %lld local base %g pattern %d", c.head_dim, (long long)c.sliding_window,
          c.rope_local_theta, snug_config_sliding_pattern(&c));
    /* an untied Gemma says so */
    char text[sizeof g_gemma3_1b + 64];
    snprintf(text, sizeof text, "%.*s, \"tie_word_embeddings\": false}", (int)strlen(g_gemma3_1b) - 1, g_gemma3_1b);
    CHECK_OK(parse(text, &c, &err), &err);
    CHECK(!c.tie_word_embeddings, "tie_word_embeddings false read");
    /* the writer keeps the sliding layers (as layer_types), the local base,
     * query_pre_attn_scalar and the activation */
    CHECK_OK(parse(g_gemma3_1b, &c, &err), &err);
    json_t *o = snug_config_to_json(&c);
    char *out = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    CHECK(out && parse(out, &back, &err) == SNUG_OK && same_config(&c, &back) &&
              memcmp(c.sliding, back.sliding, sizeof c.sliding) == 0 && back.rope_local_theta == 10000.0 &&
              back.query_pre_attn_scalar == 256.0 && strstr(out, "\"hidden_activation\":\"gelu_pytorch_tanh\""),
          "gemma-3-1b-it survives writing and reading: %s", out ? out : err.msg);
    snug_mem_free(out);
    /* no window for layers that slide: refused (transformers does too) */
    snprintf(text, sizeof text, "%.*s, \"sliding_window\": null}", (int)strlen(g_gemma3_1b) - 1, g_gemma3_1b);
    char *dup = strstr(text, "\"sliding_window\": 512"); /* (a key given twice is refused: rename the first) */
    if (dup) dup[1] = 'x';
    CHECK_FAILS(parse(text, &c, &err), &err, SNUG_FORMAT, "'sliding_window': null, but layers are sliding_attention");
}

static void test_kv_bytes(void)
{
    snug_model_config c;
    snug_error err = {0};
    CHECK_OK(parse(g_llama32, &c, &err), &err);
    /* 2 (K and V) * 16 layers * 8 kv heads * 64 dims * 2 bytes */
    CHECK(snug_config_kv_bytes_per_token(&c, c.n_kv_heads, SNUG_DTYPE_BF16) == 32768, "llama-3.2-1b: %zu",
          snug_config_kv_bytes_per_token(&c, c.n_kv_heads, SNUG_DTYPE_BF16));
    CHECK(snug_config_kv_bytes_per_token(&c, c.n_kv_heads, SNUG_DTYPE_F32) == 65536, "f32 doubles it");
}

/* A sequence classifier of a family (*ForSequenceClassification): its
 * labels from num_labels, id2label's count or transformers' default of 2,
 * its embedding standing in for the language-model head it has not; a
 * count out of range and a family snug does not run are refused. */
static void test_classifier(void)
{
    snug_error err = {0};
    snug_model_config c;
    static const char head[] = "{\"model_type\": \"qwen3\", \"architectures\": [\"Qwen3ForSequenceClassification\"], "
                               "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 2, "
                               "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 300, "
                               "\"max_position_embeddings\": 512, \"tie_word_embeddings\": false";
    char text[1024];
    snprintf(text, sizeof text, "%s, \"num_labels\": 1}", head);
    CHECK_OK(parse(text, &c, &err), &err);
    CHECK(c.arch == SNUG_ARCH_QWEN3 && c.n_labels == 1 && c.tie_word_embeddings, "num_labels 1: %d labels, tied %d",
          c.n_labels, c.tie_word_embeddings);
    snprintf(text, sizeof text, "%s, \"id2label\": {\"0\": \"no\", \"1\": \"yes\", \"2\": \"maybe\"}}", head);
    CHECK_OK(parse(text, &c, &err), &err);
    CHECK(c.n_labels == 3, "id2label: %d labels", c.n_labels);
    snprintf(text, sizeof text, "%s}", head);
    CHECK_OK(parse(text, &c, &err), &err);
    CHECK(c.n_labels == 2, "transformers' default: %d labels", c.n_labels);
    snprintf(text, sizeof text, "%s, \"num_labels\": 0}", head);
    CHECK_FAILS(parse(text, &c, &err), &err, SNUG_FORMAT, "field 'num_labels': expected 1 to 16 labels");
    CHECK_OK(parse("{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, "
                   "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                   "\"vocab_size\": 300, \"max_position_embeddings\": 512}", &c, &err), &err);
    CHECK(c.n_labels == 0, "a language model has no labels");
    CHECK_FAILS(parse("{\"architectures\": [\"BertForSequenceClassification\"]}", &c, &err), &err, SNUG_UNSUPPORTED,
                "'BertForSequenceClassification' is not supported");
}

int main(void)
{
    RUN(test_real_configs);
    RUN(test_llama3_rope_and_eos_list);
    RUN(test_other_rope_types);
    RUN(test_qwen2);
    RUN(test_qwen3_phi3);
    RUN(test_validation_messages);
    RUN(test_limits_in_validate);
    RUN(test_round_trip);
    RUN(test_gemma3);
    RUN(test_classifier);
    RUN(test_kv_bytes);
    return test_summary();
}
