/*
 * main.c: the `snug` command line. The only place that calls exit().
 */
#include "cli.h"
#include "base/mem.h"
#include "base/sysinfo.h"
#include "dist/comm.h"
#include "kernels/kernels.h"
#include "model/model.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static const char g_usage[] =
    "usage: snug COMMAND [ARGS]    (every command takes --help; snug help COMMAND)\n"
    "       snug --version\n"
    "\n"
    "commands:\n"
    "  inspect DIR [--tp N] [--dtype D] [--tensors] [--json]\n"
    "        summarize a model directory: architecture, parameters, bytes by dtype,\n"
    "        KV cache bytes per token, and the weight bytes each tensor-parallel rank holds\n"
    "  load DIR [--tp N] [--rank R | --all-ranks] [--dtype D] [--staging-bytes B] [--json]\n"
    "        load one tensor-parallel rank's weights (or each in turn) and report the bytes\n"
    "        held, the peak during the load, bytes read, seconds and GB/s\n"
    "  profile [MODEL] [--memory BYTES | --memory-fraction F] [--max-model-len N] [--json] ...\n"
    "        run the memory plan: load, reset, profile the largest step, size the KV cache\n"
    "        to the byte ('snug profile --help' lists every option)\n"
    "  serve [MODEL] [--host H] [--port P] [--api-key KEY] [memory options] ...\n"
    "        plan, then serve the OpenAI-compatible API ('snug serve --help')\n"
    "  generate [MODEL] [-p PROMPT] [-n N] [--temperature T] [--top-p P] [--top-k K] [--seed S]\n"
    "           [--chat] [--ids] ...\n"
    "        generate text (MODEL: a model directory; default the bundled models/stories260K;\n"
    "        'snug generate --help' lists every option)\n"
    "  tokenize PATH [--file F | TEXT] [--no-bos] [--special]\n"
    "        print the token ids of a text (PATH: a model directory or a tokenizer file)\n"
    "  detokenize PATH [--skip-special] IDS...\n"
    "        print the text of token ids\n"
    "  chat-template PATH --messages FILE.json [--generation-prompt]\n"
    "        print the model's chat template rendered for the messages\n"
    "  mkmodel --preset NAME --dtype bf16|f16|f32 [--shards K] [--seed S]\n"
    "        [--tokenizer DIR | --no-tokenizer] OUTDIR\n"
    "        write a model directory with seeded random weights at a real model's shapes\n"
    "        (presets: tiny, llama-3.2-1b, llama-3-8b, tinyllama-1.1b, qwen2-0.5b, qwen3-1.7b, phi-3-mini,\n"
    "         gemma3-1b, gemma3-4b, gemma2-2b, mistral-7b)\n"
    "  convert llama2c MODEL.bin OUTDIR [--tokenizer TOKENIZER.bin]\n"
    "  convert gguf MODEL.gguf OUTDIR\n"
    "  convert tokenizer PATH OUTDIR\n"
    "        import a llama2.c checkpoint or a GGUF file (f32/f16/bf16) as a Hugging Face\n"
    "        model directory (with tokenizer.json when the input carries a vocabulary), or\n"
    "        write any tokenizer snug reads as tokenizer.json + tokenizer_config.json\n"
    "\n"
    "environment: SNUG_FAIL_ALLOC=N makes the N-th allocation fail (fault injection)\n";

/* The process may hold at most the machine's memory (what a hostile input
 * can make a parser ask for is then refused, not killed), and may open as
 * many files as the hard limit allows (a checkpoint can have many shards). */
static void set_process_limits(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) snug_mem_set_capacity((size_t)pages * (size_t)page);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* `snug --version`: the version, the commit, the build options, the
 * instruction set the kernels run on here (the one a model would resolve:
 * $SNUG_ISA when set, else the best the CPU has), the instruction bf16
 * matmuls run by this machine's calibration, and the threads a model runs
 * on by default (snug_cpu_count), one a line. A $SNUG_ISA that names no
 * instruction set, or one this CPU lacks, is an error (exit 1), as it is
 * for every command that runs a model. */
static int print_version(void)
{
    snug_error err = {0};
    snug_isa isa;
    snug_kernels k;
    char line[256];
    printf("snug %s\n", SNUG_VERSION);
    printf("commit: %s\n", cli_build_commit);
    printf("build: %s\n", cli_build_options);
    if (snug_model_isa_resolve(-1, &isa, &err) != SNUG_OK || snug_kernels_init(&k, isa, &err) != SNUG_OK) {
        fflush(stdout);
        fprintf(stderr, "snug: %s\n", err.msg);
        return 1;
    }
    printf("isa: %s\n", snug_isa_name(isa));
    snug_kernels_calibrate(&k);
    printf("kernels: %s\n", snug_kernels_describe(&k, SNUG_DTYPE_BF16, line, sizeof line));
    printf("threads: %d (the CPUs this process may use)\n", snug_cpu_count());
    return 0;
}

int main(int argc, char **argv)
{
    snug_error err = {0};
    /* MPI's own threads start with SIGINT and SIGTERM blocked, so that those
     * reach this thread (snug serve drains on them), and SIGCONT (which
     * continues the process all the same), which the launcher sends first
     * when it ends the run (snug serve with several ranks checks them then) */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGCONT);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    snug_status st = snug_comm_start(&argc, &argv, &err); /* MPI's start-up is in every baseline */
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (st != SNUG_OK) {
        fprintf(stderr, "snug: %s\n", err.msg);
        return 1;
    }
    set_process_limits();
    const char *fail = getenv("SNUG_FAIL_ALLOC");
    if (fail && *fail) snug_mem_fail_at(atoll(fail));
    /* `snug help COMMAND` is `snug COMMAND --help` */
    char *help_argv[] = {argv[0], argc > 2 ? argv[2] : NULL, "--help", NULL};
    if (argc > 2 && strcmp(argv[1], "help") == 0) {
        argc = 3;
        argv = help_argv;
    }
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(g_usage, argc < 2 ? stderr : stdout);
        snug_comm_finish();
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        int rc = print_version();
        snug_comm_finish();
        return rc;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {
        {"inspect", snug_cmd_inspect},
        {"load", snug_cmd_load},
        {"profile", snug_cmd_profile},
        {"serve", snug_cmd_serve},
        {"generate", snug_cmd_generate},
        {"tokenize", snug_cmd_tokenize},
        {"detokenize", snug_cmd_detokenize},
        {"chat-template", snug_cmd_chat_template},
        {"mkmodel", snug_cmd_mkmodel},
        {"convert", snug_cmd_convert},
    };
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cmds); i++)
        if (strcmp(argv[1], cmds[i].name) == 0) {
            int rc = cmds[i].fn(argc - 1, argv + 1);
            fflush(stdout);
            snug_comm_finish();
            exit(rc);
        }
    const char *names[SNUG_ARRAY_LEN(cmds) + 2] = {"help", "version"};
    for (size_t i = 0; i < SNUG_ARRAY_LEN(cmds); i++) names[i + 2] = cmds[i].name;
    const char *near = cli_closest(argv[1], names, SNUG_ARRAY_LEN(names));
    if (near)
        fprintf(stderr, "snug: unknown command '%s'; did you mean '%s'?\n\n%s", argv[1], near, g_usage);
    else
        fprintf(stderr, "snug: unknown command '%s'\n\n%s", argv[1], g_usage);
    snug_comm_finish();
    return 2;
}
