/*
 * cmd_sdy.c — `gspmd sdy-opt`: Shardy's passes by their sdy_opt names (gspmd/sdy.h), printing
 * the module as Shardy's sdy_opt does, so that Shardy's FileCheck tests grade it.
 *
 *   gspmd sdy-opt FILE [-sdy-PASS[=OPTIONS]]...
 *
 * Prints nothing on stderr on success. An unknown pass is bad usage (2); a pass not implemented
 * yet, or bad input, exits 1 with an error.
 */
#include "cli.h"
#include "gspmd/sdy.h"

#include <stdlib.h>
#include <string.h>

static const char *USAGE = "gspmd sdy-opt FILE [-sdy-PASS[=OPTIONS]]...";

static const char *HELP =
    "Runs Shardy's passes, named as Shardy's sdy_opt names them, on the StableHLO module FILE\n"
    "(- for standard input) in the order given, and prints the module as sdy_opt (MLIR's\n"
    "printer) does: the input's function names, `func.func @f` / `func.func private @g`,\n"
    "`module {` around bare functions, sdy.mesh declarations and sdy.sharding attributes.\n"
    "\n"
    "  -sdy-populate-op-sharding-rules[=conservative-propagation=true]\n"
    "                                 give every op with a specific factor rule its\n"
    "                                 `sdy.sharding_rule = #sdy.op_sharding_rule<...>`\n"
    "  -sdy-basic-propagate, -sdy-aggressive-propagate, -sdy-op-priority-propagate,\n"
    "  -sdy-user-priority-propagate, -sdy-propagation-pipeline, -sdy-add-data-flow-edges,\n"
    "  -sdy-sink-data-flow-edges      recognised; not implemented yet (exit 1)\n";

/* What one command line asks for. */
typedef struct sdy_args {
    const char *path;    /* FILE */
    int n;               /* passes */
    gs_sdy_pass *passes; /* n passes (malloc'd) */
} sdy_args;

/* The argument loop: GS_CLI_CONTINUE, or the exit code (0 after --help, 1 out of memory, 2 bad
 * usage). */
static int sdy_parse_args(int argc, char **argv, sdy_args *a) {
    a->passes = malloc(sizeof *a->passes * (size_t)(argc > 1 ? argc : 1));
    if (!a->passes) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *why;
        if (gs_cli_is_help(argv[i])) return gs_cli_print_help(USAGE, HELP);
        if (argv[i][0] == '-' && argv[i][1]) {
            if (gs_sdy_pass_parse(argv[i], &a->passes[a->n], &why) != GS_OK)
                return gs_cli_usage_error("sdy-opt", USAGE, "%s: '%s'", why, argv[i]);
            a->n++;
            continue;
        }
        int rc = gs_cli_operand("sdy-opt", USAGE, argv[i], "FILE", &a->path);
        if (rc != GS_CLI_CONTINUE) return rc;
    }
    if (!a->path) return gs_cli_usage_error("sdy-opt", USAGE, "missing FILE");
    return GS_CLI_CONTINUE;
}

/* Runs the passes on m and prints it. */
static gs_status sdy_module(void *ctx, gs_module *m, gs_diags *d) {
    const sdy_args *a = ctx;
    char *text = gs_sdy_opt(m, a->n, a->passes, d);
    if (!text) return GS_ERR;
    fputs(text, stdout);
    free(text);
    return GS_OK;
}

int gs_cli_sdy_opt(int argc, char **argv) {
    sdy_args a = {0};
    int rc = sdy_parse_args(argc, argv, &a);
    if (rc == GS_CLI_CONTINUE) rc = gs_cli_with_module(a.path, sdy_module, &a);
    free(a.passes);
    return rc;
}
