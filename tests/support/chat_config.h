/*
 * chat_config.h: the tokenizer_config.json files of real models in
 * tests/data/chat, for tests of what is read from their chat templates.
 * Reads with jansson directly; nothing from src/.
 */
#ifndef SNUG_TESTS_CHAT_CONFIG_H
#define SNUG_TESTS_CHAT_CONFIG_H

#include <jansson.h>

/* tests/data/chat/NAME.tokenizer_config.json (run from the repository's
 * root), whose "chat_template" is a string; NULL, with a message on
 * stderr, otherwise. The caller json_decref's it. */
json_t *chat_config_load(const char *name);

#endif /* SNUG_TESTS_CHAT_CONFIG_H */
