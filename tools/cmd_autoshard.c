/*
 * cmd_autoshard.c — `gspmd autoshard`: chooses every value's sharding on a mesh by predicted
 * cost, within memory (src/autoshard/), and writes the annotated module.
 *
 *   gspmd autoshard FILE --mesh data=8,model=16 [--machine NAME|FILE] [--memory-limit BYTES]
 *                   [--time-limit S] [--greedy] [-o OUT] [--report] [--emit hlo|mlir]
 */
#include "cli.h"
#include "gspmd/autoshard.h"
#include "gspmd/cost.h"
#include "gspmd/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *AUTO_USAGE =
    "gspmd autoshard FILE --mesh M [--machine NAME|FILE] [--memory-limit BYTES] "
    "[--time-limit S] [--greedy] [--ignore-shardings] [-o OUT] [--report] [--emit hlo|mlir]";

static const char *AUTO_HELP =
    "Chooses a sharding for every value of FILE on the mesh M by the step time the cost model\n"
    "predicts, within the memory of a device, and writes FILE annotated (in its own format\n"
    "unless --emit says) for `partition`, `run` and `cost`. Shardings FILE already has are kept\n"
    "(they pin their values). The choice is one integer program over every op's strategies and\n"
    "every reshard between them, solved by CBC; greedy without it (docs/autoshard.md).\n"
    "\n"
    "  --mesh M             the devices as named axes: data=8,model=16 (N = their product)\n"
    "  --machine NAME|FILE  the machine the costs are of (default tpu-v3; see gspmd cost)\n"
    "  --memory-limit B     bytes a device may hold at once (K M G T or Ki Mi Gi Ti: powers of 1024;\n"
    "                       default: the machine's memory)\n"
    "  --time-limit S       seconds the solver may take (default 60)\n"
    "  --greedy             the greedy choice, without the solver\n"
    "  --ignore-shardings   choose every value anew, as if FILE had no shardings\n"
    "  -o OUT               write the module to OUT (default: stdout)\n"
    "  --report             print to stderr each parameter's sharding, the search's figures\n"
    "                       and the predicted step (gspmd cost) against FILE's own shardings\n"
    "                       (propagated)\n"
    "  --emit hlo|mlir      the output's format\n"
    "\n"
    "Example:\n"
    "  gspmd autoshard examples/mlp.hlo --mesh data=2,model=2 --machine h100 -o mlp.auto.hlo\n"
    "  gspmd run mlp.auto.hlo --num-partitions 4 --no-propagate --verify\n";

typedef struct auto_args {
    const char *file, *mesh, *machine, *out;
    double memory_limit, time_limit;
    bool greedy, report, ignore;
    gs_cli_emit emit;
} auto_args;

static int parse_args(int argc, char **argv, auto_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *v;
        int k;
        if (gs_cli_is_help(argv[i])) return gs_cli_print_help(AUTO_USAGE, AUTO_HELP);
        if (strcmp(argv[i], "--greedy") == 0) {
            a->greedy = true;
        } else if (strcmp(argv[i], "--ignore-shardings") == 0) {
            a->ignore = true;
        } else if (strcmp(argv[i], "--report") == 0) {
            a->report = true;
        } else if (gs_cli_opt_value(argc, argv, &i, "--mesh", &v)) {
            a->mesh = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--machine", &v)) {
            a->machine = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "-o", &v)) {
            a->out = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--memory-limit", &v)) {
            if ((a->memory_limit = gs_cli_parse_bytes(v)) < 0)
                return gs_cli_usage_error("autoshard", AUTO_USAGE,
                                          "--memory-limit wants bytes > 0 (e.g. 16G), not '%s'",
                                          v);
        } else if (gs_cli_opt_value(argc, argv, &i, "--time-limit", &v)) {
            char *end;
            a->time_limit = strtod(v, &end);
            if (*end || !(a->time_limit > 0) || a->time_limit > 1e6)
                return gs_cli_usage_error("autoshard", AUTO_USAGE,
                                          "--time-limit wants seconds > 0, not '%s'", v);
        } else if ((k = gs_cli_emit_option(argc, argv, &i, "autoshard", AUTO_USAGE, &a->emit)) !=
                   0) {
            if (k < 0) return 2;
        } else if ((k = gs_cli_operand("autoshard", AUTO_USAGE, argv[i], "FILE", &a->file)) !=
                   GS_CLI_CONTINUE) {
            return k;
        }
    }
    if (!a->file) return gs_cli_usage_error("autoshard", AUTO_USAGE, "no FILE given");
    if (!a->mesh) return gs_cli_usage_error("autoshard", AUTO_USAGE, "--mesh is required");
    return GS_CLI_CONTINUE;
}

/* The predicted step of m on N devices (propagating first when asked). */
static gs_status predict(gs_module *m, long n, bool propagate, const gs_machine *mc,
                         gs_step_cost *c, gs_diags *d) {
    gs_compile_options co;
    gs_compile_options_init(&co, n);
    co.no_propagate = !propagate;
    co.partition.no_warnings = true;
    gs_compiled out = {0};
    gs_status st = gs_compile(m, &co, &out, d);
    if (st == GS_OK) st = gs_cost_step(out.program, mc, c, d);
    gs_compiled_free(&out);
    return st;
}

static void print_step(const char *what, const gs_step_cost *c) {
    double coll = 0;
    for (int k = 0; k < GS_N_COST_COLL; k++) coll += c->coll[k].count;
    fprintf(stderr, "  %-22s step %.4g s (compute %.4g s, exposed communication %.4g s), peak "
                    "%.4g GiB per device, %.0f collectives\n",
            what, c->step_s, c->compute_s, c->exposed_comm_s,
            (double)c->peak_bytes / (1 << 30), coll);
}

static void report(const auto_args *a, const gs_module *m, const gs_autoshard_result *r,
                   const gs_machine *mc, const gs_step_cost *mine, const gs_step_cost *theirs) {
    fprintf(stderr, "autoshard %s on %s (%s):\n", a->file, a->mesh, mc->name);
    const gs_computation *e = m->entry;
    for (int i = 0; i < e->n_params; i++) {
        gs_sb sb = {0};
        const gs_sharding *s = gs_instr_get_sharding(e->params[i]);
        if (s) gs_sharding_print(&sb, s);
        fprintf(stderr, "  %%%-20s %s\n", e->params[i]->name, s ? gs_sb_str(&sb) : "(none)");
        gs_sb_free(&sb);
    }
    fprintf(stderr, "  search: %d values (%d pinned), %d ops", r->n_values, r->n_pinned, r->n_ops);
    if (r->n_columns) fprintf(stderr, ", %d variables, %d constraints", r->n_columns, r->n_rows);
    fprintf(stderr, "; %s", r->solver);
    if (r->why_greedy) fprintf(stderr, " (%s)", r->why_greedy);
    if (!strcmp(r->solver, "cbc"))
        fprintf(stderr, " in %.3g s, %s, gap %.3g%%", r->solve_s,
                r->optimal ? "optimal" : "not proven optimal",
                r->objective > 0 ? 100 * (r->objective - r->bound) / r->objective : 0);
    fprintf(stderr, "\n  search's estimate: %.4g s per step (all replicated: %.4g s), peak %.4g GiB\n",
            r->objective, r->replicated, r->peak_bytes / (1 << 30));
    if (r->kept_input)
        fprintf(stderr, "  kept the input's own shardings (pinned, the rest chosen): they predict "
                        "faster than the choice made without them\n");
    if (mine) print_step("predicted (autoshard):", mine);
    if (theirs) print_step("predicted (input's):", theirs);
}

int gs_cli_autoshard(int argc, char **argv) {
    auto_args a = {.machine = "tpu-v3"};
    int rc = parse_args(argc, argv, &a);
    if (rc != GS_CLI_CONTINUE) return rc;
    gs_machine mc;
    if (gs_cli_load_machine(a.machine, &mc) != 0) return 1;
    gs_arena arena;
    gs_arena_init(&arena);
    gs_mesh mesh;
    if (gs_cli_parse_mesh(&arena, a.mesh, &mesh) != 0) {
        gs_arena_free(&arena);
        return 1;
    }
    gs_source *src = NULL, *src2 = NULL;
    gs_module *m = gs_cli_load_module(a.file, &src), *theirs = NULL;
    if (!m) {
        gs_arena_free(&arena);
        return 1;
    }
    gs_diags d = {0};
    gs_autoshard_options o = {.mesh = &mesh, .machine = &mc, .memory_limit = a.memory_limit,
                              .time_limit = a.time_limit, .greedy = a.greedy,
                              .ignore_shardings = a.ignore};
    gs_autoshard_result r;
    rc = 1;
    if (gs_autoshard(m, &o, &r, &d) != GS_OK) goto done;
    char *text = gs_cli_module_text(m, m, a.emit, &d);
    if (!text) goto done;
    FILE *f = a.out ? fopen(a.out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "error: cannot write %s\n", a.out);
        free(text);
        goto done;
    }
    fputs(text, f);
    free(text);
    if (a.out) fclose(f);
    rc = 0;
    if (a.report) {
        gs_step_cost mine, base;
        bool have_mine = predict(m, (long)mesh.n_devices, false, &mc, &mine, &d) == GS_OK;
        theirs = gs_cli_load_module(a.file, &src2);
        bool have_base = theirs && predict(theirs, (long)mesh.n_devices, true, &mc, &base,
                                           &d) == GS_OK;
        report(&a, m, &r, &mc, have_mine ? &mine : NULL, have_base ? &base : NULL);
    }
done:
    gs_diags_render(&d, stderr);
    gs_diags_free(&d);
    if (theirs) gs_module_free(theirs);
    gs_module_free(m);
    if (src2) gs_source_free(src2);
    gs_source_free(src);
    gs_arena_free(&arena);
    return rc;
}
