/*
 * cmd_propagate.c — `gspmd propagate`: sharding propagation (src/propagate/), printing the
 * module with a sharding on every instruction it could infer one for.
 *
 *   gspmd propagate FILE [--spmd] [--propagate-to-output=B[,B...]]
 *                   [--propagate-to-parameters=B[,B...]] [--cse-prevention-only]
 *                   [--mesh M --shard NAME=SPEC]... [--explain NAME] [--emit hlo|mlir]
 *                   [--algorithm gspmd|shardy]
 *
 * Instruction names are kept. --explain prints, instead of the module, where NAME's sharding
 * came from. Bad input exits 1 with located errors, bad usage 2.
 */
#include "cli.h"
#include "gspmd/text.h"

#include <stdlib.h>
#include <string.h>

static const char *USAGE =
    "gspmd propagate FILE [--spmd] [--propagate-to-output=B[,B...]]\n"
    "                [--propagate-to-parameters=B[,B...]] [--cse-prevention-only]\n"
    "                [--mesh M --shard NAME=SPEC]... [--explain NAME] [--emit hlo|mlir]\n"
    "                [--algorithm gspmd|shardy]";

static const char *HELP =
    "Gives every instruction of FILE a sharding, from the few it has (sharding attributes,\n"
    "custom-call Sharding constraints, --shard), the way XLA's ShardingPropagation does, and\n"
    "prints the module. Instruction names are kept.\n"
    "\n"
    "  --spmd                         XLA's is_spmd mode (off by default, as in XLA)\n"
    "  --propagate-to-output=B[,B..]  allow inferring the entry's outputs: one bool for all,\n"
    "                                 or one per output tuple element (default: the module\n"
    "                                 header's allow_spmd_sharding_propagation_to_output)\n"
    "  --propagate-to-parameters=B[,B..]  likewise for the entry's parameters\n"
    "  --cse-prevention-only          keep only the shardings of scalar broadcasts\n"
    "  --explain NAME                 print where NAME's sharding came from instead of the\n"
    "                                 module: each hop back to an annotation, with its rule,\n"
    "                                 direction and aggressiveness level\n"
    "  --emit hlo|mlir                print HLO text (the default) or StableHLO (MLIR)\n"
    "  --algorithm gspmd|shardy       XLA's GSPMD propagation or Shardy's: axes move along\n"
    "                                 each op's factors between Shardy shardings (`#sdy.sharding`;\n"
    "                                 dims marked `?` open to more axes). Default: Shardy's for a\n"
    "                                 module that declares sdy.mesh, GSPMD's otherwise\n"
    "%s";

/* Parses `true,false,...` into a malloc'd vector; -1 on bad text. */
static int parse_bools(const char *text, bool **out) {
    int n = 1;
    for (const char *p = text; *p; p++) n += *p == ',';
    bool *v = malloc(sizeof *v * (size_t)n);
    if (!v) return -1;
    int k = 0;
    const char *p = text;
    while (k < n) {
        size_t len = strcspn(p, ",");
        if ((len == 4 && strncmp(p, "true", 4) == 0) || (len == 1 && *p == '1'))
            v[k++] = true;
        else if ((len == 5 && strncmp(p, "false", 5) == 0) || (len == 1 && *p == '0'))
            v[k++] = false;
        else {
            free(v);
            return -1;
        }
        p += len;
        if (*p == ',') p++;
    }
    *out = v;
    return n;
}

/* What one command line asks for. */
typedef struct prop_args {
    const char *path;
    const char *explain;       /* --explain NAME, or NULL */
    gs_cli_emit emit;          /* --emit mlir|hlo */
    gs_propagate_options opts; /* --spmd, --cse-prevention-only, --propagate-to-... */
    gs_propagation_algorithm alg; /* --algorithm */
    bool *to_out, *to_par;     /* the --propagate-to-output / -parameters vectors (malloc'd) */
    gs_cli_shardings sh;       /* --mesh / --shard */
} prop_args;

/* --propagate-to-output / --propagate-to-parameters B[,B...] (option `name`) into *vec (freed
 * first) and *n: GS_CLI_CONTINUE, or 2 after usage for bad values. */
static int bools_option(const char *name, const char *v, bool **vec, int *n) {
    free(*vec);
    *vec = NULL;
    int k = parse_bools(v, vec);
    *n = k < 0 ? 0 : k;
    if (k < 0)
        return gs_cli_usage_error("propagate", USAGE, "%s wants true/false values, not '%s'", name,
                                  v);
    return GS_CLI_CONTINUE;
}

/* The argument loop: GS_CLI_CONTINUE, or the exit code (0 after --help, 2 bad usage). */
static int prop_parse_args(int argc, char **argv, prop_args *a) {
    int rc = GS_CLI_CONTINUE;
    for (int i = 1; i < argc && rc == GS_CLI_CONTINUE; i++) {
        const char *v;
        int r;
        if (gs_cli_is_help(argv[i])) {
            rc = gs_cli_print_help(USAGE, HELP);
        } else if (strcmp(argv[i], "--spmd") == 0) {
            a->opts.is_spmd = true;
        } else if (strcmp(argv[i], "--cse-prevention-only") == 0) {
            a->opts.cse_prevention_only = true;
        } else if (gs_cli_opt_value(argc, argv, &i, "--propagate-to-output", &v)) {
            rc = bools_option("--propagate-to-output", v, &a->to_out, &a->opts.n_to_output);
            a->opts.to_output = a->to_out;
        } else if (gs_cli_opt_value(argc, argv, &i, "--propagate-to-parameters", &v)) {
            rc = bools_option("--propagate-to-parameters", v, &a->to_par, &a->opts.n_to_parameters);
            a->opts.to_parameters = a->to_par;
        } else if ((r = gs_cli_algorithm_option(argc, argv, &i, "propagate", USAGE, &a->alg)) !=
                   0) {
            if (r < 0) rc = 2;
        } else if ((r = gs_cli_emit_option(argc, argv, &i, "propagate", USAGE, &a->emit)) != 0) {
            if (r < 0) rc = 2;
        } else if (gs_cli_opt_value(argc, argv, &i, "--explain", &v)) {
            a->explain = v;
        } else if ((r = gs_cli_sharding_option(argc, argv, &i, &a->sh)) != 0) {
            if (r < 0) rc = 2;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            rc = gs_cli_usage_error("propagate", USAGE, "unknown option '%s'", argv[i]);
        } else if (!a->path) {
            a->path = argv[i];
        } else {
            rc = gs_cli_usage_error("propagate", USAGE, "unexpected argument '%s'", argv[i]);
        }
    }
    if (rc == GS_CLI_CONTINUE && !a->path)
        rc = gs_cli_usage_error("propagate", USAGE, "missing FILE");
    return rc;
}

/* Propagates m's shardings and prints the module, or with --explain where NAME's came from. */
static gs_status propagate_module(void *ctx, gs_module *m, gs_diags *d) {
    prop_args *a = ctx;
    gs_compile_options co;
    gs_compile_options_init(&co, 1);
    co.propagate = a->opts;
    co.algorithm = a->alg;
    co.no_partition = true;
    co.keep_provenance = a->explain != NULL;
    gs_compiled out = {0};
    gs_mesh mesh;
    gs_status st = GS_ERR;
    if (gs_cli_sharding_requests(&a->sh, &m->arena, &mesh, &co) == 0)
        st = gs_compile(m, &co, &out, d);
    if (st == GS_OK && a->explain) {
        gs_sb sb = {0};
        st = gs_propagate_explain(out.info, a->explain, &sb, d);
        if (st == GS_OK) fputs(gs_sb_str(&sb), stdout);
        gs_sb_free(&sb);
    } else if (st == GS_OK) {
        char *text = gs_cli_module_text(m, m, a->emit ? a->emit : GS_CLI_EMIT_HLO, d);
        if (text) fputs(text, stdout);
        if (!text) st = GS_ERR;
        free(text);
    }
    gs_compiled_free(&out);
    return st;
}

int gs_cli_propagate(int argc, char **argv) {
    prop_args a = {0};
    int rc = prop_parse_args(argc, argv, &a);
    if (rc == GS_CLI_CONTINUE) rc = gs_cli_with_module(a.path, propagate_module, &a);
    gs_cli_shardings_free(&a.sh);
    free(a.to_out);
    free(a.to_par);
    return rc;
}
