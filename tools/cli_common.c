/*
 * cli_common.c — helpers every subcommand uses: `--name V` / `--name=V` options, creating output
 * folders, and loading a module with its diagnostics rendered (see cli.h).
 */
#include "cli.h"
#include "gspmd/text.h"

#include <stdlib.h>

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

bool gs_cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return false;
    if (a[n] == '=') {
        *value = a + n + 1;
        return true;
    }
    if (a[n] == 0 && *i + 1 < argc) {
        *value = argv[++*i];
        return true;
    }
    return false;
}

int gs_cli_mkdirs(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

gs_module *gs_cli_load_module(const char *path, gs_source **src) {
    char err[512];
    *src = gs_source_read_file(path, err, sizeof err);
    if (!*src) {
        fprintf(stderr, "error: %s\n", err);
        return NULL;
    }
    gs_diags d = {0};
    gs_module *m = gs_parse_module(*src, &d);
    if (!m) gs_diags_render(&d, stderr);
    gs_diags_free(&d);
    if (!m) {
        gs_source_free(*src);
        *src = NULL;
    }
    return m;
}

int gs_cli_input_option(const char *cmd, const char *value, gs_interp_inputs *inputs) {
    const char *eq = strchr(value, '=');
    if (!eq || eq == value || !eq[1]) {
        fprintf(stderr, "gspmd %s: --input wants NAME=FILE.npy, not '%s'\n", cmd, value);
        return 2;
    }
    if (gs_interp_inputs_add(inputs, value, (size_t)(eq - value), eq + 1) != GS_OK) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    return 0;
}
