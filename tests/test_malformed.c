/*
 * test_malformed.c: the malformed-file corpus (tests/data/malformed). Every
 * entry of its manifest EXPECT (path, status name, message substring) is
 * run through its reader: safetensors/ through snug_st_open, gguf/ through
 * snug_gguf_open, config/ through snug_config_parse, index/ through
 * snug_index_parse and checkpoint/ directories through
 * snug_checkpoint_open. Each must fail with the expected status and a
 * message that contains the expected text and names the file; no two may
 * share a message (each rule has its own); nothing may leak; and every file
 * of the corpus must be listed in the manifest.
 */
#include "test.h"

#include "formats/checkpoint.h"
#include "formats/config.h"
#include "base/mem.h"
#include "base/fileio.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"

#include <dirent.h>
#include <sys/stat.h>

#define CORPUS "tests/data/malformed"

enum { MAX_ENTRIES = 1024, MAX_FILE_BYTES = 1 << 20 };

typedef struct entry {
    char path[512];                    /* relative to CORPUS */
    char status[32];                   /* "SNUG_FORMAT" */
    char text[768];                    /* substring of the message */
    char msg[SNUG_ERROR_MSG_BYTES];    /* what the reader said */
} entry;

static entry g_entries[MAX_ENTRIES];
static int g_n_entries;
static bool g_ran;

/* Writes the path of an entry as the readers see it (CORPUS/path) into out. */
static void entry_path(const entry *e, char *out, size_t size)
{
    snprintf(out, size, "%s/%.*s", CORPUS, (int)sizeof e->path - 1, e->path);
}

/* Reads EXPECT into g_entries. Lines are PATH<TAB>STATUS<TAB>TEXT. */
static void test_manifest(void)
{
    FILE *f = fopen(CORPUS "/EXPECT", "r");
    CHECK(f != NULL, "cannot open %s/EXPECT", CORPUS);
    if (!f) return;
    char line[2048];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        CHECK(len > 0 && line[len - 1] == '\n', "EXPECT line %d is too long or unterminated",
              lineno);
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        if (len == 0 || line[0] == '#') continue;
        char *tab1 = strchr(line, '\t');
        char *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        CHECK(tab2 != NULL, "EXPECT line %d does not have three tab-separated fields: %s",
              lineno, line);
        if (!tab2 || g_n_entries == MAX_ENTRIES) continue;
        *tab1 = *tab2 = '\0';
        entry *e = &g_entries[g_n_entries++];
        CHECK(strlen(line) < sizeof e->path && strlen(tab1 + 1) < sizeof e->status &&
                  strlen(tab2 + 1) < sizeof e->text,
              "EXPECT line %d has a field longer than the test holds", lineno);
        snprintf(e->path, sizeof e->path, "%.*s", (int)sizeof e->path - 1, line);
        snprintf(e->status, sizeof e->status, "%.*s", (int)sizeof e->status - 1, tab1 + 1);
        snprintf(e->text, sizeof e->text, "%.*s", (int)sizeof e->text - 1, tab2 + 1);
        CHECK(e->text[0] != '\0', "EXPECT line %d has an empty message text", lineno);
        bool known = false;
        for (int s = SNUG_NOMEM; s >= SNUG_INTERNAL; s--)
            known = known || strcmp(e->status, snug_status_str((snug_status)s)) == 0;
        CHECK(known, "EXPECT line %d: '%s' is not the name of a failure status", lineno,
              e->status);
    }
    fclose(f);
    CHECK(g_n_entries >= 100, "EXPECT lists %d entries; the corpus has over 100", g_n_entries);
    CHECK(g_n_entries < MAX_ENTRIES, "EXPECT has more entries than the test holds (%d)",
          MAX_ENTRIES);
}

/* Reads a whole corpus file for the text parsers; aborts the entry's checks
 * with a message when it cannot. */
static snug_status read_text(const char *path, char **text, size_t *len, snug_error *err)
{
    snug_status st = snug_file_read_all(path, MAX_FILE_BYTES, text, len, err);
    CHECK(st == SNUG_OK, "cannot read %s: %s", path, err->msg);
    return st;
}

/* Runs one entry through its reader; returns the status, message in err. */
static snug_status run_reader(const char *path, const char *kind, snug_error *err)
{
    snug_status st = SNUG_INTERNAL;
    char *text = NULL;
    size_t len = 0;
    if (strcmp(kind, "safetensors") == 0) {
        snug_st_file *f = NULL;
        st = snug_st_open(path, &f, err);
        if (st == SNUG_OK) snug_st_close(f);
    } else if (strcmp(kind, "gguf") == 0) {
        snug_gguf_file *f = NULL;
        st = snug_gguf_open(path, &f, err);
        if (st == SNUG_OK) snug_gguf_close(f);
    } else if (strcmp(kind, "config") == 0) {
        snug_model_config cfg;
        if (read_text(path, &text, &len, err) != SNUG_OK) return SNUG_INTERNAL;
        st = snug_config_parse(text, len, path, &cfg, err);
    } else if (strcmp(kind, "index") == 0) {
        snug_index *ix = NULL;
        if (read_text(path, &text, &len, err) != SNUG_OK) return SNUG_INTERNAL;
        st = snug_index_parse(text, len, path, &ix, err);
        if (st == SNUG_OK) snug_index_free(ix);
    } else if (strcmp(kind, "checkpoint") == 0) {
        snug_checkpoint *ck = NULL;
        st = snug_checkpoint_open(path, &ck, err);
        if (st == SNUG_OK) snug_checkpoint_close(ck);
    } else {
        CHECK(false, "%s: no reader for the folder '%s' (expected safetensors, gguf, config, "
              "index or checkpoint)", path, kind);
    }
    snug_mem_free(text);
    return st;
}

/* Every entry fails with its status and message, names its file, leaks nothing. */
static void test_each_rejected(void)
{
    for (int i = 0; i < g_n_entries; i++) {
        entry *e = &g_entries[i];
        char path[1024], kind[64];
        entry_path(e, path, sizeof path);
        size_t klen = strcspn(e->path, "/");
        snprintf(kind, sizeof kind, "%.*s", (int)SNUG_MIN(klen, sizeof kind - 1), e->path);

        size_t before = 0, after = 0;
        snug_mem_status(SNUG_MEM_TOTAL, &before, NULL, false);
        snug_error err = {.status = SNUG_OK, .msg = ""};
        snug_status st = run_reader(path, kind, &err);
        snug_mem_status(SNUG_MEM_TOTAL, &after, NULL, false);
        snprintf(e->msg, sizeof e->msg, "%s", err.msg);

        CHECK(st != SNUG_OK, "%s was accepted; expected %s with \"%s\"", path, e->status,
              e->text);
        if (st == SNUG_OK) continue;
        CHECK(strcmp(snug_status_str(st), e->status) == 0,
              "%s: returned %s, expected %s (message: %s)", path, snug_status_str(st), e->status,
              err.msg);
        CHECK(err.status == st, "%s: err.status is %s but %s was returned", path,
              snug_status_str(err.status), snug_status_str(st));
        CHECK(strstr(err.msg, e->text) != NULL, "%s: message \"%s\" does not contain \"%s\"",
              path, err.msg, e->text);
        CHECK(strstr(err.msg, path) != NULL, "%s: message \"%s\" does not name the file", path,
              err.msg);
        CHECK(after == before, "%s: the allocator held %zu bytes before and %zu after", path,
              before, after);
    }
    g_ran = true;
}

/* Writes msg with every occurrence of path replaced by "<file>" into out. */
static void strip_path(const char *msg, const char *path, char *out, size_t size)
{
    size_t o = 0, plen = strlen(path);
    while (*msg && o + 1 < size) {
        if (plen && strncmp(msg, path, plen) == 0) {
            o += (size_t)snprintf(out + o, size - o, "<file>");
            msg += plen;
        } else {
            out[o++] = *msg++;
        }
    }
    out[SNUG_MIN(o, size - 1)] = '\0';
}

/* No two entries produce the same message once the file name is taken out. */
static void test_messages_distinct(void)
{
    CHECK(g_ran, "test_each_rejected must run first");
    static char stripped[MAX_ENTRIES][SNUG_ERROR_MSG_BYTES + 64];
    for (int i = 0; i < g_n_entries; i++) {
        char path[1024];
        entry_path(&g_entries[i], path, sizeof path);
        strip_path(g_entries[i].msg, path, stripped[i], sizeof stripped[i]);
        CHECK(stripped[i][0] != '\0', "%s: empty message", path);
    }
    for (int i = 0; i < g_n_entries; i++)
        for (int k = i + 1; k < g_n_entries; k++)
            CHECK(strcmp(stripped[i], stripped[k]) != 0,
                  "%s and %s are rejected with the same message: %s", g_entries[i].path,
                  g_entries[k].path, stripped[i]);
}

/* True when rel or a folder above it is listed in EXPECT. */
static bool listed(const char *rel)
{
    for (int i = 0; i < g_n_entries; i++) {
        size_t n = strlen(g_entries[i].path);
        if (strncmp(rel, g_entries[i].path, n) == 0 && (rel[n] == '\0' || rel[n] == '/'))
            return true;
    }
    return false;
}

/* Checks every regular file under CORPUS/rel (recursively); counts them. */
static void check_listed(const char *rel, int *n_files)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s%s%s", CORPUS, rel[0] ? "/" : "", rel);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        char sub[1024], full[2048];
        snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        snprintf(full, sizeof full, "%s/%s", CORPUS, sub);
        struct stat sb;
        if (stat(full, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            check_listed(sub, n_files);
        } else if (strcmp(sub, "EXPECT") != 0 && strcmp(sub, "README.md") != 0 &&
                   strcmp(sub, "make-corpus.sh") != 0) {
            (*n_files)++;
            CHECK(listed(sub), "%s is in the corpus but not in EXPECT", full);
        }
    }
    closedir(d);
}

static void test_every_file_listed(void)
{
    int n_files = 0;
    check_listed("", &n_files);
    CHECK(n_files >= g_n_entries, "found %d files for %d entries", n_files, g_n_entries);
}

/* Each reader has its share of the corpus. */
static void test_every_reader_covered(void)
{
    static const char *const kinds[] = {"safetensors/", "gguf/", "config/", "index/",
                                        "checkpoint/"};
    static const int at_least[] = {25, 25, 15, 9, 4};
    for (size_t k = 0; k < SNUG_ARRAY_LEN(kinds); k++) {
        int n = 0;
        for (int i = 0; i < g_n_entries; i++)
            n += strncmp(g_entries[i].path, kinds[k], strlen(kinds[k])) == 0;
        CHECK(n >= at_least[k], "EXPECT has %d entries under %s; expected at least %d", n,
              kinds[k], at_least[k]);
    }
}

int main(void)
{
    RUN(test_manifest);
    RUN(test_each_rejected);
    RUN(test_messages_distinct);
    RUN(test_every_file_listed);
    RUN(test_every_reader_covered);
    return test_summary();
}
