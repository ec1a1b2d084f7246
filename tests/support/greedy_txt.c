/*
 * greedy_txt.c: the llama2.c greedy runs of stories260K (greedy_txt.h).
 */
#include "support/greedy_txt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const PATH = "tests/data/stories260K/greedy.txt";

/* Parses the space-separated ids after "name = " on line into ids (at
 * most max); the count, or -1 when one is not a number. */
static int32_t parse_ids(const char *line, int32_t *ids, int32_t max)
{
    const char *p = strchr(line, '=');
    int32_t n = 0;
    if (!p) return -1;
    for (p++; *p && n < max;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int32_t)v;
        p = end;
    }
    while (*p == ' ' || *p == '\n' || *p == '\r') p++;
    return *p ? -1 : n;
}

bool greedy_case_load(int k, greedy_case *out)
{
    FILE *f = fopen(PATH, "r");
    if (!f) {
        fprintf(stderr, "greedy_txt: cannot open %s\n", PATH);
        return false;
    }
    memset(out, 0, sizeof *out);
    static char line[1 << 16];
    int c = 0;
    bool got_prompt = false;
    int32_t prompt_ids[GREEDY_TXT_IDS_MAX];
    int32_t n_prompt = -1;
    out->n_ids = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "[case]", 6) == 0) c++;
        if (c != k) continue;
        if (strncmp(line, "prompt = '", 10) == 0) {
            char *end = strrchr(line + 10, '\'');
            size_t n = end ? (size_t)(end - (line + 10)) : 0;
            if (end && n < sizeof out->prompt) {
                memcpy(out->prompt, line + 10, n);
                got_prompt = true;
            }
        } else if (strncmp(line, "prompt_ids = ", 13) == 0) {
            n_prompt = parse_ids(line, prompt_ids, GREEDY_TXT_IDS_MAX);
        } else if (strncmp(line, "ids = ", 6) == 0) {
            out->n_ids = parse_ids(line, out->ids, GREEDY_TXT_IDS_MAX);
        }
    }
    fclose(f);
    bool ok = got_prompt && n_prompt > 0 && out->n_ids > n_prompt &&
              memcmp(prompt_ids, out->ids, (size_t)n_prompt * sizeof(int32_t)) == 0;
    if (!ok) fprintf(stderr, "greedy_txt: case %d of %s is missing or malformed\n", k, PATH);
    out->n_prompt = ok ? n_prompt : 0;
    return ok;
}
