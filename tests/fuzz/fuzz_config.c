/*
 * fuzz_config.c: fuzzes the config.json parser (snug_config_parse).
 *
 * A config that parses must validate again, and must survive a round trip:
 * written back with snug_config_to_json and parsed again, it gives the same
 * configuration (every field its rope type uses). The driver in
 * fuzz_common.h checks failures, parses again without a message buffer and
 * with one allocation failing, and checks that nothing leaks.
 */
#include "formats/config.h"
#include "fuzz_common.h"
#include "base/mem.h"
#include "base/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAME = "fuzz/config.json";

/* Checks that two configurations agree in every field that has a meaning. */
static void require_same(const snug_model_config *a, const snug_model_config *b)
{
    REQUIRE(a->arch == b->arch);
    REQUIRE(strcmp(a->architecture, b->architecture) == 0);
    REQUIRE(a->hidden_size == b->hidden_size);
    REQUIRE(a->intermediate_size == b->intermediate_size);
    REQUIRE(a->n_layers == b->n_layers);
    REQUIRE(a->n_heads == b->n_heads);
    REQUIRE(a->n_kv_heads == b->n_kv_heads);
    REQUIRE(a->head_dim == b->head_dim);
    REQUIRE(a->vocab_size == b->vocab_size);
    REQUIRE(a->max_position_embeddings == b->max_position_embeddings);
    REQUIRE(a->rms_norm_eps == b->rms_norm_eps);
    REQUIRE(a->rope_theta == b->rope_theta);
    /* Rope fields count only where their type uses them (config.h). */
    const snug_rope_scaling *x = &a->rope_scaling, *y = &b->rope_scaling;
    REQUIRE(x->type == y->type);
    REQUIRE(x->factor == y->factor);
    if (x->type != SNUG_ROPE_DEFAULT)
        REQUIRE(x->original_max_position_embeddings == y->original_max_position_embeddings);
    if (x->type == SNUG_ROPE_LLAMA3) {
        REQUIRE(x->low_freq_factor == y->low_freq_factor);
        REQUIRE(x->high_freq_factor == y->high_freq_factor);
    }
    if (x->type == SNUG_ROPE_YARN) {
        REQUIRE(x->beta_fast == y->beta_fast && x->beta_slow == y->beta_slow);
        REQUIRE(x->mscale == y->mscale && x->mscale_all_dim == y->mscale_all_dim);
        REQUIRE(x->attention_factor == y->attention_factor);
    }
    REQUIRE(a->tie_word_embeddings == b->tie_word_embeddings);
    REQUIRE(a->qkv_bias == b->qkv_bias && a->o_bias == b->o_bias);
    REQUIRE(a->dtype == b->dtype);
    REQUIRE(a->bos_token_id == b->bos_token_id);
    REQUIRE(a->n_eos == b->n_eos);
    for (int i = 0; i < a->n_eos; i++) REQUIRE(a->eos_token_ids[i] == b->eos_token_ids[i]);
    REQUIRE(a->sliding_window == b->sliding_window);
}

/* Checks a parsed config: it validates, and it survives a round trip. */
static void exercise(const snug_model_config *cfg)
{
    snug_error err = {0};
    REQUIRE(snug_config_validate(cfg, NAME, &err) == SNUG_OK);
    REQUIRE(cfg->n_eos >= 0 && cfg->n_eos <= SNUG_MAX_EOS_IDS);
    REQUIRE(cfg->head_dim >= 2 && cfg->head_dim % 2 == 0);
    REQUIRE(cfg->n_heads % cfg->n_kv_heads == 0);
    json_t *o = snug_config_to_json(cfg);
    REQUIRE(o != NULL);
    char *text = snug_json_dumps(o, false);
    json_decref(o);
    REQUIRE(text != NULL);
    snug_model_config again;
    snug_status st = snug_config_parse(text, strlen(text), NAME, &again, &err);
    if (st != SNUG_OK) {
        fprintf(stderr, "round trip failed: %s\n%s\n", err.msg, text);
        abort();
    }
    snug_mem_free(text);
    require_same(cfg, &again);
}

/* The parsed config lives here (configs are plain values, not allocations). */
static snug_model_config g_cfg;

static snug_status parse(const fuzz_input *in, void **parsed, snug_error *err)
{
    memset(&g_cfg, 0, sizeof g_cfg);
    *parsed = &g_cfg;
    return snug_config_parse((const char *)in->data, in->size, in->name, &g_cfg, err);
}

static void check(const fuzz_input *in, void *parsed)
{
    (void)in;
    exercise(parsed);
}

static const fuzz_target g_target = {NAME, false, parse, check};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_drive(&g_target, data, size);
    return 0;
}
