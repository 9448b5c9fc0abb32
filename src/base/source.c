/*
 * source.c — sources (gspmd/base.h): a named text that diagnostics point into, from a string or
 * read whole from a file or stdin.
 */
#include "gspmd/base.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

gs_source *gs_source_from_string(const char *name, const char *text) {
    size_t nl = strlen(name), tl = strlen(text);
    gs_source *s = malloc(sizeof *s + nl + 1 + tl + 1);
    if (!s) return NULL;
    char *nm = (char *)(s + 1);
    memcpy(nm, name, nl + 1);
    char *tx = nm + nl + 1;
    memcpy(tx, text, tl + 1);
    s->name = nm;
    s->text = tx;
    s->len = tl;
    return s;
}

gs_source *gs_source_read_file(const char *path, char *err, size_t err_size) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    gs_sb sb = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) gs_sb_putn(&sb, buf, n);
    bool bad = ferror(f);
    if (f != stdin) fclose(f);
    if (bad || sb.failed) {
        snprintf(err, err_size, "%s: cannot read", path);
        gs_sb_free(&sb);
        return NULL;
    }
    if (memchr(gs_sb_str(&sb), 0, sb.len)) {
        snprintf(err, err_size, "%s: not a text file (contains NUL bytes)", path);
        gs_sb_free(&sb);
        return NULL;
    }
    gs_source *s = gs_source_from_string(path, gs_sb_str(&sb));
    gs_sb_free(&sb);
    if (!s) snprintf(err, err_size, "%s: out of memory", path);
    return s;
}

void gs_source_free(gs_source *s) { free(s); }
