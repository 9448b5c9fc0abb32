/*
 * cmd_cost.c — `gspmd cost`: what one step of a sharded module costs each device on a machine,
 * and the step time and model FLOPs utilization (MFU) that implies (src/cost/step.c).
 *
 *   gspmd cost FILE [--num-partitions N] [--machine NAME|FILE] [--propagate|--no-propagate]
 *              [--spmd] [--json] [--mesh M --shard NAME=SPEC]...
 *
 * FILE is compiled for N devices as `partition` compiles it (gs_compile; SPMD propagation
 * first unless --no-propagate; --spmd: FILE is already the partitioned program). MFU is the unpartitioned module's matmul FLOPs / N over
 * the predicted step time and the device's peak for the matmuls' precision.
 */
#include "cli.h"
#include "gspmd/cost.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *COST_USAGE =
    "gspmd cost FILE [--num-partitions N] [--machine NAME|FILE] [--propagate|--no-propagate] "
    "[--spmd] [--json] [--trace FILE.json] [--model-flops F] [--strict] "
    "[--windowed-einsum-threshold-mib M | "
    "--no-windowed-einsum] [--bidirectional-windowed-einsum] [--no-reduce-scatter] "
    "[--mesh M --shard NAME=SPEC]... "
    "[--algorithm gspmd|shardy] [--auto --mesh M [--ignore-shardings] [--memory-limit BYTES]]";

static const char *COST_HELP =
    "Predicts what one step of FILE, partitioned for N devices, costs each device on a machine:\n"
    "matmul and vector FLOPs, memory traffic, collectives (count, bytes, time by the algorithm\n"
    "that suits their size and group), peak memory (and whether it fits), the step time\n"
    "(compute as a roofline per instruction; collectives exposed unless asynchronous with\n"
    "compute between their halves) and the model FLOPs utilization it implies. While loops run\n"
    "their known trip count.\n"
    "\n"
    "  --num-partitions N   the number of devices (by default the count the module declares)\n"
    "  --machine NAME|FILE  a built-in profile (tpu-v3, tpu-v4, a100, h100, h200, mi300x,\n"
    "                       mi350x, this-cpu;\n"
    "                       default tpu-v3) or a profile file (`key = value` lines, see\n"
    "                       `gspmd calibrate`, which writes this machine's)\n"
    "  --propagate          run SPMD sharding propagation before partitioning (the default)\n"
    "  --no-propagate       partition FILE as annotated, unannotated instructions replicated\n"
    "  --algorithm gspmd|shardy  which propagation: XLA's GSPMD one or Shardy's (the default\n"
    "                       for a module that declares sdy.mesh)\n"
    "  --strict, --windowed-einsum-threshold-mib M, --no-windowed-einsum,\n"
    "  --bidirectional-windowed-einsum, --reduce-scatter (the default here), --no-reduce-scatter\n"
    "                       partition as `gspmd partition` does with them\n"
    "  --auto --mesh M      choose every sharding on the mesh M for this machine (gspmd\n"
    "                       autoshard) instead of propagating; the devices are the mesh's;\n"
    "                       FILE's shardings pin their values unless --ignore-shardings;\n"
    "                       --memory-limit BYTES: what a device may hold (default: the\n"
    "                       machine's memory)\n"
    "  --spmd               FILE is already a partitioned program (no MFU: its model FLOPs are\n"
    "                       unknown)\n"
    "  --json               print the figures as one JSON object\n"
    "  --trace FILE.json    also write the predicted timeline of the step (each kernel and\n"
    "                       collective at the time the model gives it) as Chrome trace-event\n"
    "                       JSON, the format of `gspmd run --trace`: open both in\n"
    "                       ui.perfetto.dev to lay prediction beside measurement\n"
    "  --model-flops F      the model's useful FLOPs per step for MFU (e.g. 6 x parameters x\n"
    "                       tokens; default: the unpartitioned module's matmul FLOPs, which for a\n"
    "                       pipeline in the vectorised-stage form include its bubbles)\n"
    "%s"
    "\n"
    "Example:\n"
    "  gspmd cost examples/transformer_scan.hlo --num-partitions 8 --machine a100\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_for(const gs_machine *mc, const gs_step_cost *c) {
    return c->matmul_flops_lowp * 2 >= c->matmul_flops ? mc->flops_bf16 : mc->flops_f32;
}

static void print_text(const char *file, long n, const gs_machine *mc, const gs_step_cost *c,
                       double model_flops, double compile_s, double site_flops) {
    printf("%s on %ld devices of %s (%s)\n", file, n, mc->name, mc->description);
    printf("  per device per step:\n");
    printf("    matmul FLOPs     %.4g (%.0f%% in bf16/f16/f8; %.4g with each loop body once)\n",
           c->matmul_flops, c->matmul_flops > 0 ? 100 * c->matmul_flops_lowp / c->matmul_flops : 0,
           site_flops);
    printf("    vector FLOPs     %.4g, transcendentals %.4g\n", c->vector_flops,
           c->transcendentals);
    printf("    memory traffic   %.4g bytes\n", c->bytes);
    printf("    kernels          %.0f (as XLA's fusion forms them; collectives included)\n",
           c->kernels);
    printf("    peak memory      %.4g GiB of %.4g GiB: %s\n", (double)c->peak_bytes / (1 << 30),
           mc->mem_capacity / (1 << 30), c->fits ? "fits" : "DOES NOT FIT");
    printf("  collectives (count, bytes per device, bytes sent, time):\n");
    for (int k = 0; k < GS_N_COST_COLL; k++)
        if (c->coll[k].count > 0)
            printf("    %-20s %8.0f  %10.4g  %10.4g  %9.4g s\n", gs_cost_coll_name(k),
                   c->coll[k].count, c->coll[k].bytes, c->coll[k].wire_bytes, c->coll[k].seconds);
    printf("  time: compute %.4g s, communication %.4g s (exposed %.4g s), step %.4g s\n",
           c->compute_s, c->comm_s, c->exposed_comm_s, c->step_s);
    if (model_flops > 0 && c->step_s > 0)
        printf("  model FLOPs utilization %.1f%% (model matmul FLOPs %.4g over %ld devices)\n",
               100 * model_flops / (double)n / (c->step_s * peak_for(mc, c)), model_flops, n);
    if (c->unknown_trip_counts)
        printf("  note: %d while loop(s) with an unknown trip count counted once\n",
               c->unknown_trip_counts);
    if (compile_s >= 0) printf("  propagate + partition took %.3f s\n", compile_s);
}

static void print_json(const char *file, long n, const gs_machine *mc, const gs_step_cost *c,
                       double model_flops, double compile_s, double site_flops) {
    printf("{\"file\": \"");
    for (const char *p = file; *p; p++) {
        if (*p == '"' || *p == '\\') putchar('\\');
        if ((unsigned char)*p >= 0x20) putchar(*p);
    }
    printf("\", \"devices\": %ld, \"machine\": \"%s\", ", n, mc->name);
    printf("\"matmul_flops\": %.17g, \"matmul_flops_lowp\": %.17g, \"site_matmul_flops\": "
           "%.17g, \"vector_flops\": %.17g, \"transcendentals\": %.17g, \"bytes\": %.17g, "
           "\"kernels\": %.17g, \"peak_bytes\": %lld, "
           "\"fits\": %s, ", c->matmul_flops, c->matmul_flops_lowp, site_flops, c->vector_flops,
           c->transcendentals, c->bytes, c->kernels,
           (long long)c->peak_bytes, c->fits ? "true" : "false");
    printf("\"collectives\": {");
    for (int k = 0; k < GS_N_COST_COLL; k++)
        printf("%s\"%s\": {\"count\": %.17g, \"bytes\": %.17g, \"wire_bytes\": %.17g, "
               "\"seconds\": %.17g}", k ? ", " : "", gs_cost_coll_name(k), c->coll[k].count,
               c->coll[k].bytes, c->coll[k].wire_bytes, c->coll[k].seconds);
    printf("}, \"compute_s\": %.17g, \"comm_s\": %.17g, \"exposed_comm_s\": %.17g, "
           "\"step_s\": %.17g, ", c->compute_s, c->comm_s, c->exposed_comm_s, c->step_s);
    if (model_flops > 0 && c->step_s > 0)
        printf("\"model_flops\": %.17g, \"mfu\": %.17g, ", model_flops,
               model_flops / (double)n / (c->step_s * peak_for(mc, c)));
    if (compile_s >= 0) printf("\"compile_s\": %.6f, ", compile_s);
    printf("\"unknown_trip_counts\": %d}\n", c->unknown_trip_counts);
}

/* What one command line asks for. */
typedef struct cost_args {
    const char *file;
    const char *machine;    /* --machine */
    double model_flops;     /* --model-flops, or 0 */
    long n;                 /* --num-partitions (0: what the module declares) */
    bool propagate, json;   /* --propagate, --json */
    const char *trace;      /* --trace FILE, or NULL */
    gs_cli_auto au;         /* --auto and its options */
    gs_compile_options co;  /* --spmd, --strict, the windowed einsum options */
    gs_cli_shardings sh;    /* --mesh / --shard */
    gs_machine mc;          /* the loaded --machine */
} cost_args;

/* The argument loop: GS_CLI_CONTINUE, or the exit code (0 after --help, 2 bad usage). */
static int cost_parse_args(int argc, char **argv, cost_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *v;
        int k;
        if (gs_cli_is_help(argv[i])) return gs_cli_print_help(COST_USAGE, COST_HELP);
        if (gs_cli_propagate_option(argv[i], &a->propagate)) continue;
        if ((k = gs_cli_algorithm_option(argc, argv, &i, "cost", COST_USAGE, &a->co.algorithm)) !=
            0) {
            if (k < 0) return 2;
        } else if (strcmp(argv[i], "--spmd") == 0) {
            a->co.spmd_input = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            a->json = true;
        } else if ((k = gs_cli_auto_option(argc, argv, &i, "cost", COST_USAGE, &a->au)) != 0) {
            if (k < 0) return 2;
        } else if (strcmp(argv[i], "--strict") == 0) {
            a->co.partition.strict = true;
            a->co.partition.no_warnings = false;
        } else if (gs_cli_opt_value(argc, argv, &i, "--machine", &v)) {
            a->machine = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--trace", &v)) {
            a->trace = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--model-flops", &v)) {
            char *end;
            a->model_flops = strtod(v, &end);
            if (*end || !(a->model_flops > 0) || a->model_flops > 1e30)
                return gs_cli_usage_error("cost", COST_USAGE,
                                          "--model-flops wants a number of FLOPs > 0, not '%s'", v);
        } else if ((k = gs_cli_partition_option(argc, argv, &i, "cost", 1L << 20, &a->n,
                                                &a->co.partition, &a->sh)) != 0) {
            if (k < 0) return 2;
        } else if ((k = gs_cli_operand("cost", COST_USAGE, argv[i], "FILE", &a->file)) !=
                   GS_CLI_CONTINUE) {
            return k;
        }
    }
    int rc = gs_cli_auto_check(&a->au, "cost", COST_USAGE);
    return rc != GS_CLI_CONTINUE ? rc : gs_cli_need_file_devices("cost", COST_USAGE, a->file);
}

/* Compiles m, predicts a step of the program on the machine and prints it. */
static gs_status cost_module(void *ctx, gs_module *m, gs_diags *d) {
    cost_args *a = ctx;
    gs_compiled out = {0};
    gs_mesh mesh;
    double compile_s = -1, model_flops = 0;
    gs_step_cost c, whole;
    gs_status st;
    if (a->au.on) { /* the devices are the mesh's */
        a->co.num_partitions = a->n;
        if ((st = gs_cli_auto_shardings(m, &a->sh, &a->au, &a->mc, &a->co, d)) != GS_OK)
            goto done;
        a->n = (long)a->co.num_partitions;
    } else {
        if ((st = gs_cli_module_devices(m, a->sh.mesh, &a->n, d)) != GS_OK) goto done;
        a->co.num_partitions = a->n;
        st = GS_ERR;
        if (gs_cli_sharding_requests(&a->sh, &m->arena, &mesh, &a->co) != 0) goto done;
    }
    st = GS_ERR;
    double t0 = now_s();
    if ((st = gs_compile(m, &a->co, &out, d)) != GS_OK) goto done;
    const gs_module *p = out.program ? out.program : m;
    if (out.program) {
        compile_s = now_s() - t0;
        if ((st = gs_cost_step(m, &a->mc, &whole, d)) != GS_OK) goto done;
        model_flops = whole.matmul_flops;
    }
    if (a->model_flops > 0) model_flops = a->model_flops;
    if ((st = gs_cost_step(p, &a->mc, &c, d)) != GS_OK) goto done;
    gs_cost site; /* each loop body once, as the FLOPs ratios (and flops.py) count */
    gs_cost_module(p, &site);
    if (a->trace && (st = gs_cost_trace_write(p, &a->mc, a->trace, d)) != GS_OK) goto done;
    if (a->json) print_json(a->file, a->n, &a->mc, &c, model_flops, compile_s, site.flops);
    else print_text(a->file, a->n, &a->mc, &c, model_flops, compile_s, site.flops);
done:
    gs_compiled_free(&out);
    return st;
}

int gs_cli_cost(int argc, char **argv) {
    cost_args a = {.machine = "tpu-v3", .propagate = true};
    gs_compile_options_init(&a.co, 0);
    a.co.partition.no_warnings = true;
    int rc = cost_parse_args(argc, argv, &a);
    if (rc == GS_CLI_CONTINUE) {
        a.co.no_propagate = !a.propagate;
        rc = gs_cli_load_machine(a.machine, &a.mc) != 0 ? 1 : gs_cli_with_module(a.file, cost_module, &a);
    }
    gs_cli_shardings_free(&a.sh);
    return rc;
}

/* `gspmd calibrate [--output FILE]`: measures this machine and prints its profile. */
int gs_cli_calibrate(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: gspmd calibrate [--output FILE]\n\n"
                   "Measures this machine as one device of the threads backend (sgemm and dgemm\n"
                   "on one thread, an elementwise loop, memcpy, the interpreter's cost per\n"
                   "instruction, all-reduces between 2 device threads) and prints its machine\n"
                   "profile for `gspmd cost --machine FILE` (or writes it to FILE).\n");
            return 0;
        } else if (gs_cli_opt_value(argc, argv, &i, "--output", &v)) {
            path = v;
        } else {
            fprintf(stderr, "gspmd calibrate: unknown argument '%s'\nusage: gspmd calibrate "
                            "[--output FILE]\n", argv[i]);
            return 2;
        }
    }
    gs_machine mc;
    gs_diags d = {0};
    gs_status st = gs_machine_calibrate(&mc, &d);
    gs_diags_render(&d, stderr);
    gs_diags_free(&d);
    if (st != GS_OK) return 1;
    snprintf(mc.name, sizeof mc.name, "this-cpu");
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "error: cannot write %s\n", path);
        return 1;
    }
    fprintf(f, "# measured by gspmd calibrate\n");
    gs_machine_print(&mc, f);
    if (path && fclose(f) != 0) {
        fprintf(stderr, "error: cannot write %s\n", path);
        return 1;
    }
    return 0;
}
