/*
 * replay.c: runs a libFuzzer harness over saved inputs without libFuzzer,
 * so that the seed corpora (and any crash once found) are replayed by
 * `make test` with gcc and under the sanitizers.
 *
 *   replay_NAME DIR...
 *
 * For each directory, every regular file in it is passed to
 * LLVMFuzzerTestOneInput, in name order. Each prints "ok - DIR/FILE"; a
 * file that cannot be read prints "FAIL - DIR/FILE: why". The last line is
 * "N passed, M failed" (the format tests/run adds up). A harness that finds
 * a bug aborts, which ends the program without that line (after printing
 * "crashed on DIR/FILE"): tests/run counts that as a failure.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int g_passed, g_failed;

/* The input being replayed, named when the harness crashes on it. */
static char g_current[4096];

static void on_crash(int sig)
{
    static const char head[] = "crashed on ";
    if (write(STDOUT_FILENO, head, sizeof head - 1) < 0 ||
        write(STDOUT_FILENO, g_current, strlen(g_current)) < 0 ||
        write(STDOUT_FILENO, "\n", 1) < 0) {
        /* Nothing more can be done from a signal handler. */
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the whole file at path into a new malloc'd block (*data, *size).
 * Returns 0, or an errno value. */
static int read_file(const char *path, uint8_t **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return errno;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    int e = 0;
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    if (!buf)
        e = ENOMEM;
    else if (ferror(f))
        e = EIO;
    fclose(f);
    if (e) {
        free(buf);
        return e;
    }
    *data = buf;
    *size = n;
    return 0;
}

/* Replays every regular file of dir, in name order. */
static void replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        printf("FAIL - %s: cannot open the directory: %s\n", dir, strerror(errno));
        g_failed++;
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof *names);
            if (!names) abort();
        }
        names[n] = strdup(de->d_name);
        if (!names[n]) abort();
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            free(names[i]);
            continue;
        }
        uint8_t *data = NULL;
        size_t size = 0;
        int e = read_file(path, &data, &size);
        if (e) {
            printf("FAIL - %s: cannot read: %s\n", path, strerror(e));
            g_failed++;
        } else {
            snprintf(g_current, sizeof g_current, "%s", path);
            fflush(stdout); /* so that the crash line follows what passed */
            LLVMFuzzerTestOneInput(data, size);
            free(data);
            printf("ok - %s\n", path);
            g_passed++;
        }
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR...\n", argv[0]);
        return 2;
    }
    int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], on_crash);
    for (int i = 1; i < argc; i++) replay_dir(argv[i]);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
