/*
 * chat_config.c: tokenizer_config.json files of tests/data/chat.
 */
#include "chat_config.h"

#include <stdio.h>

json_t *chat_config_load(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/data/chat/%s.tokenizer_config.json", name);
    json_error_t e;
    json_t *c = json_load_file(path, JSON_DECODE_INT_AS_REAL, &e);
    if (c && json_is_string(json_object_get(c, "chat_template"))) return c;
    fprintf(stderr, "%s: %s\n", path, c ? "no chat_template string" : e.text);
    json_decref(c);
    return NULL;
}
