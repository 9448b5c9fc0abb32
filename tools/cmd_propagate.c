/*
 * cmd_propagate.c — `gspmd propagate`: sharding propagation (src/propagate/), printing the
 * module with a sharding on every instruction it could infer one for.
 *
 *   gspmd propagate FILE [--spmd] [--propagate-to-output=B[,B...]]
 *                   [--propagate-to-parameters=B[,B...]] [--cse-prevention-only]
 *                   [--mesh M --shard NAME=SPEC]... [--explain NAME]
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
    "                [--mesh M --shard NAME=SPEC]... [--explain NAME]";

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
    "                                 direction and aggressiveness level\n";

static int usage(const char *fmt, const char *arg) {
    fprintf(stderr, "gspmd propagate: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: %s\n", USAGE);
    return 2;
}

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

int gs_cli_propagate(int argc, char **argv) {
    const char *path = NULL, *explain = NULL, *v;
    gs_propagate_options opts;
    memset(&opts, 0, sizeof opts);
    bool *to_out = NULL, *to_par = NULL;
    gs_cli_shardings sh = {0};
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        int r;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n\n%s%s", USAGE, HELP, GS_CLI_SHARDING_HELP);
            free(to_out);
            free(to_par);
            gs_cli_shardings_free(&sh);
            return 0;
        } else if (strcmp(argv[i], "--spmd") == 0) {
            opts.is_spmd = true;
        } else if (strcmp(argv[i], "--cse-prevention-only") == 0) {
            opts.cse_prevention_only = true;
        } else if (gs_cli_opt_value(argc, argv, &i, "--propagate-to-output", &v)) {
            free(to_out);
            to_out = NULL;
            int n = parse_bools(v, &to_out);
            if (n < 0) rc = usage("--propagate-to-output wants true/false values, not '%s'", v);
            opts.n_to_output = n < 0 ? 0 : n;
            opts.to_output = to_out;
        } else if (gs_cli_opt_value(argc, argv, &i, "--propagate-to-parameters", &v)) {
            free(to_par);
            to_par = NULL;
            int n = parse_bools(v, &to_par);
            if (n < 0)
                rc = usage("--propagate-to-parameters wants true/false values, not '%s'", v);
            opts.n_to_parameters = n < 0 ? 0 : n;
            opts.to_parameters = to_par;
        } else if (gs_cli_opt_value(argc, argv, &i, "--explain", &v)) {
            explain = v;
        } else if ((r = gs_cli_sharding_option(argc, argv, &i, &sh)) != 0) {
            if (r < 0) rc = 2;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            rc = usage("unknown option '%s'", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            rc = usage("unexpected argument '%s'", argv[i]);
        }
    }
    if (rc == 0 && !path) rc = usage("%s", "missing FILE");
    gs_source *src = NULL;
    gs_module *m = NULL;
    if (rc == 0 && !(m = gs_cli_load_module(path, &src))) rc = 1;
    if (rc == 0) {
        gs_compile_options co;
        gs_compile_options_init(&co, 1);
        co.propagate = opts;
        co.no_partition = true;
        co.keep_provenance = explain != NULL;
        gs_diags d = {0};
        gs_compiled out = {0};
        gs_mesh mesh;
        gs_status st = GS_ERR;
        if (gs_cli_sharding_requests(&sh, &m->arena, &mesh, &co) == 0)
            st = gs_compile(m, &co, &out, &d);
        if (st == GS_OK && explain) {
            gs_sb sb = {0};
            st = gs_propagate_explain(out.info, explain, &sb, &d);
            if (st == GS_OK) fputs(gs_sb_str(&sb), stdout);
            gs_sb_free(&sb);
        } else if (st == GS_OK) {
            char *text = gs_module_to_string(m);
            if (text) {
                fputs(text, stdout);
                free(text);
            } else {
                gs_error(&d, gs_span_none(), "out of memory");
                st = GS_ERR;
            }
        }
        gs_diags_render(&d, stderr);
        gs_diags_free(&d);
        gs_compiled_free(&out);
        if (st != GS_OK) rc = 1;
    }
    gs_module_free(m);
    gs_source_free(src);
    gs_cli_shardings_free(&sh);
    free(to_out);
    free(to_par);
    return rc;
}
