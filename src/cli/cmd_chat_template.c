/*
 * cmd_chat_template.c: `snug chat-template PATH --messages FILE.json
 * [--generation-prompt]`: renders a model's chat template (its
 * tokenizer_config.json's chat_template) for a list of messages. PATH is a
 * tokenizer_config.json, a model directory that has one, or any tokenizer
 * snug reads that carries a template (a GGUF file); the template needs no
 * vocabulary, so a directory with only tokenizer_config.json will do.
 */
#include "cli.h"
#include "base/mem.h"
#include "base/fileio.h"
#include "chat/chat.h"
#include "base/json.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <string.h>

static const char g_usage[] =
    "snug chat-template PATH --messages FILE.json [--generation-prompt] [--kwargs JSON]";

enum { MESSAGES_MAX_BYTES = 64 << 20 };

/* The template and bos/eos texts for PATH: read from tokenizer_config.json
 * when PATH is one or a directory holding one, else from the tokenizer. */
static snug_status chat_config_for(const char *path, snug_chat_config *cfg, snug_error *err)
{
    char cfg_path[4096];
    size_t n = strlen(path);
    if (n >= 5 && strcmp(path + n - 5, ".json") == 0) return snug_chat_config_load(path, cfg, err);
    if (snug_path_join(cfg_path, sizeof cfg_path, path, "tokenizer_config.json", err) == SNUG_OK &&
        snug_file_exists(cfg_path))
        return snug_chat_config_load(cfg_path, cfg, err);
    snug_tokenizer *tok = NULL;
    memset(cfg, 0, sizeof *cfg);
    snug_status st = snug_tokenizer_load(path, &tok, err);
    if (st != SNUG_OK) return st;
    const char *tpl = snug_tokenizer_chat_template(tok);
    if (tpl) cfg->chat_template = snug_mem_strdup(SNUG_MEM_OTHER, tpl, err);
    cfg->bos_text = snug_mem_strdup(SNUG_MEM_OTHER, snug_tokenizer_bos_text(tok), err);
    cfg->eos_text = snug_mem_strdup(SNUG_MEM_OTHER, snug_tokenizer_eos_text(tok), err);
    if ((tpl && !cfg->chat_template) || !cfg->bos_text || !cfg->eos_text) {
        snug_chat_config_free(cfg);
        st = SNUG_NOMEM;
    }
    snug_tokenizer_free(tok);
    return st;
}

int snug_cmd_chat_template(int argc, char **argv)
{
    if (cli_help(argc, argv, g_usage)) return 0;
    const char *path = NULL, *messages_path = NULL, *kwargs_text = NULL;
    bool generation_prompt = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = cli_option(argc, argv, &i, "--messages")))
            messages_path = v;
        else if ((v = cli_option(argc, argv, &i, "--kwargs")))
            kwargs_text = v;
        else if (strcmp(argv[i], "--generation-prompt") == 0)
            generation_prompt = true;
        else if (argv[i][0] == '-')
            return cli_unknown_option(g_usage, NULL, argv[i]);
        else if (!path)
            path = argv[i];
        else
            return cli_usage(g_usage, "more than one path given");
    }
    if (!path || !messages_path) return cli_usage(g_usage, "give a model path and --messages");
    snug_error err = {0};
    snug_chat_config cfg = {0};
    snug_template *tpl = NULL;
    json_t *messages = NULL, *vars = NULL, *kwargs = NULL;
    char *out = NULL;
    size_t len = 0;
    int rc = 1;
    if (chat_config_for(path, &cfg, &err) != SNUG_OK) goto done;
    if (!cfg.chat_template) {
        snug_errorf(&err, SNUG_INVALID, "%s: the model has no chat template", path);
        goto done;
    }
    if (snug_template_compile(cfg.chat_template, strlen(cfg.chat_template), "chat_template", &tpl,
                              &err) != SNUG_OK)
        goto done;
    if (kwargs_text) {
        /* a JSON object, or snug_json_parse says what it found */
        if (snug_json_parse(kwargs_text, strlen(kwargs_text), "--kwargs", &kwargs, &err) != SNUG_OK)
            goto done;
    }
    if (snug_json_load_file_opts(messages_path, MESSAGES_MAX_BYTES, SNUG_JSON_ANY_VALUE, &messages,
                                 &err) != SNUG_OK)
        goto done;
    json_t *list = json_is_object(messages) ? json_object_get(messages, "messages") : messages;
    if (!json_is_array(list)) {
        snug_errorf(&err, SNUG_FORMAT, "%s: expected a list of messages (or an object with one "
                    "under \"messages\")", messages_path);
        goto done;
    }
    const json_t *tools = json_is_object(messages) ? json_object_get(messages, "tools") : NULL;
    if (tools && !json_is_array(tools)) {
        snug_errorf(&err, SNUG_FORMAT, "%s: \"tools\" must be a list of tools", messages_path);
        goto done;
    }
    snug_chat_input in = {.messages = list, .tools = tools, .kwargs = kwargs,
                          .add_generation_prompt = generation_prompt};
    vars = snug_chat_vars(&in, cfg.bos_text, cfg.eos_text);
    if (!vars) {
        snug_errorf(&err, SNUG_NOMEM, "out of memory building the template's variables");
        goto done;
    }
    if (snug_template_render(tpl, vars, &out, &len, &err) != SNUG_OK) goto done;
    fwrite(out, 1, len, stdout);
    rc = 0;
done:
    if (rc) cli_fail(&err);
    snug_mem_free(out);
    json_decref(vars);
    json_decref(messages);
    json_decref(kwargs);
    snug_template_free(tpl);
    snug_chat_config_free(&cfg);
    return rc;
}
