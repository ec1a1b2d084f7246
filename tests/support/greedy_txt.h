/*
 * greedy_txt.h: the greedy runs of the bundled stories260K that llama2.c's
 * run.c made (tests/data/stories260K/greedy.txt), for tests that check
 * snug's greedy ids against an implementation that shares no code with it.
 * Reads the file with stdio; nothing from src/.
 */
#ifndef SNUG_TESTS_GREEDY_TXT_H
#define SNUG_TESTS_GREEDY_TXT_H

#include <stdbool.h>
#include <stdint.h>

enum { GREEDY_TXT_IDS_MAX = 1024, GREEDY_TXT_PROMPT_MAX = 256 };

/* One [case] of the file. */
typedef struct greedy_case {
    char prompt[GREEDY_TXT_PROMPT_MAX];   /* the prompt's text */
    int32_t ids[GREEDY_TXT_IDS_MAX];      /* BOS, the prompt's ids, then the greedy ids */
    int32_t n_ids;
    int32_t n_prompt;                     /* of ids: BOS and the prompt's */
} greedy_case;

/* Reads case k (1, 2, ...) of tests/data/stories260K/greedy.txt (run from
 * the repository's root) into *out. False, with a message on stderr, when
 * the file or the case is missing or malformed. */
bool greedy_case_load(int k, greedy_case *out);

#endif /* SNUG_TESTS_GREEDY_TXT_H */
