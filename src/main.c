/*
 * main.c: the `snug` command line. The only place that calls exit().
 */
#include "cli.h"
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char g_usage[] =
    "usage: snug COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  inspect DIR [--tp N] [--dtype D] [--tensors] [--json]\n"
    "        summarize a model directory: architecture, parameters, bytes by dtype,\n"
    "        KV cache bytes per token, and the weight bytes each tensor-parallel rank holds\n"
    "  mkmodel --preset NAME --dtype bf16|f16|f32 [--shards K] [--seed S] OUTDIR\n"
    "        write a model directory with seeded random weights at a real model's shapes\n"
    "        (presets: tiny, llama-3.2-1b, llama-3-8b, tinyllama-1.1b, qwen2-0.5b, mistral-7b)\n"
    "  convert llama2c MODEL.bin OUTDIR\n"
    "  convert gguf MODEL.gguf OUTDIR\n"
    "        import a llama2.c checkpoint or a GGUF file (f32/f16/bf16) as a Hugging Face\n"
    "        model directory\n"
    "\n"
    "environment: SNUG_FAIL_ALLOC=N makes the N-th allocation fail (fault injection)\n";

int main(int argc, char **argv)
{
    const char *fail = getenv("SNUG_FAIL_ALLOC");
    if (fail && *fail) snug_mem_fail_at(atoll(fail));
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(g_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {
        {"inspect", snug_cmd_inspect},
        {"mkmodel", snug_cmd_mkmodel},
        {"convert", snug_cmd_convert},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cmds); i++)
        if (strcmp(argv[1], cmds[i].name) == 0) {
            int rc = cmds[i].fn(argc - 1, argv + 1);
            fflush(stdout);
            exit(rc);
        }
    fprintf(stderr, "snug: unknown command '%s'\n\n%s", argv[1], g_usage);
    return 2;
}
