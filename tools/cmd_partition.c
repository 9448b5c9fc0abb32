/*
 * cmd_partition.c — `gspmd partition`: rewrites a sharded module into one SPMD program and prints
 * it as HLO text (which `gspmd parse` reads and `gspmd run --spmd` executes).
 *
 *   gspmd partition FILE [--num-partitions N] [--propagate|--no-propagate] [--stats] [--strict]
 *                   [--emit hlo|mlir]
 *                   [--mesh M --shard NAME=SPEC]...
 *
 * A partial sum wanted split is an all-reduce and a dynamic-slice, as XLA's partitioner writes
 * it; --reduce-scatter fuses them (XLA's ReduceScatterCreator), as run and cost do.
 * Instructions without a sharding are replicated (XLA's partitioner alone, the default for HLO
 * input); --propagate (the default for StableHLO input) runs SPMD sharding propagation first
 * (gs_compile does the whole pipeline). N defaults to the count the module declares. Warnings (full rematerialization; instructions computed whole although sharded) go to
 * stderr, as errors with --strict; --stats prints what the program costs a device against the
 * unpartitioned module (gs_cli_print_stats).
 */
#include "cli.h"
#include "gspmd/text.h"

#include <stdlib.h>
#include <string.h>

static const char *PART_USAGE =
    "gspmd partition FILE [--num-partitions N] [--propagate|--no-propagate] [--stats] [--strict] "
    "[--windowed-einsum-threshold-mib M | --no-windowed-einsum] [--bidirectional-windowed-einsum] "
    "[--reduce-scatter] [--mesh M --shard NAME=SPEC]... [--emit hlo|mlir] "
    "[--algorithm gspmd|shardy]";

static const char *PART_HELP =
    "Rewrites a sharded module into ONE SPMD program that every device runs with its own\n"
    "partition id: per-device shapes (uneven dims padded at the end) and the collectives that\n"
    "make it compute what the single-device module computes. Prints the program (--emit).\n"
    "\n"
    "  --num-partitions N   the number of devices (every sharding must span N devices); by\n"
    "                       default the count the module declares (mhlo.num_partitions, or\n"
    "                       num_partitions= in an HLO header)\n"
    "  --propagate          run SPMD sharding propagation first (the default for StableHLO\n"
    "                       input: a JAX program has shardings on its arguments and results)\n"
    "  --no-propagate       (the default for HLO input) partition the shardings as written,\n"
    "                       instructions without one replicated: XLA's partitioner alone\n"
    "  --stats              print to stderr the collectives emitted (count and bytes by kind),\n"
    "                       the instructions computed whole, and per-device FLOPs and peak\n"
    "                       memory against the unpartitioned module's / N\n"
    "  --strict             an instruction computed on more than its sharding gives a device\n"
    "                       (no partitioning rule, or a tiled dim kept whole) is an error, not a\n"
    "                       warning\n"
    "  --windowed-einsum-threshold-mib M\n"
    "                       a dot whose plan all-gathers an operand of at least M MiB per\n"
    "                       device along a free dim runs as a loop over its shards instead: a\n"
    "                       partial dot and a collective-permute per step (XLA's windowed\n"
    "                       einsum; M is 256 unless given, XLA's default)\n"
    "  --no-windowed-einsum no windowed einsum loops, whatever the operands' sizes\n"
    "  --reduce-scatter     a partial sum wanted split is one reduce-scatter, as run and cost\n"
    "                       execute it (XLA's ReduceScatterCreator pass after partitioning);\n"
    "                       without it (--no-reduce-scatter, the default here) an all-reduce\n"
    "                       and each device's dynamic-slice, as XLA's partitioner writes it\n"
    "  --algorithm gspmd|shardy\n"
    "                       which propagation --propagate runs: XLA's GSPMD one or Shardy's\n"
    "                       (the default for a module that declares sdy.mesh)\n"
    "  --emit hlo|mlir      print the program as HLO text (the default, as XLA dumps it) or as\n"
    "                       StableHLO (MLIR)\n"
    "  --bidirectional-windowed-einsum\n"
    "                       those loops pass shards both ways round the ring: about half the\n"
    "                       steps, two partial dots each\n"
    "%s"
    "\n"
    "Example:\n"
    "  gspmd partition examples/mlp.hlo --num-partitions 4 --mesh data=2,model=2 \\\n"
    "      --shard x=data,None --shard w1=None,model\n";

/* What one command line asks for. */
typedef struct part_args {
    const char *file;
    long n;                /* --num-partitions (0: what the module declares) */
    int propagate;         /* --propagate 1, --no-propagate 0, neither -1 */
    bool stats;            /* --stats */
    gs_compile_options co; /* --strict, the windowed einsum options */
    gs_cli_shardings sh;   /* --mesh / --shard */
    gs_cli_emit emit;      /* --emit mlir|hlo */
} part_args;

/* The argument loop: GS_CLI_CONTINUE, or the exit code (0 after --help, 2 bad usage). */
static int part_parse_args(int argc, char **argv, part_args *a) {
    for (int i = 1; i < argc; i++) {
        int k;
        if (gs_cli_is_help(argv[i])) return gs_cli_print_help(PART_USAGE, PART_HELP);
        if (gs_cli_propagate_flag(argv[i], &a->propagate)) continue;
        if ((k = gs_cli_algorithm_option(argc, argv, &i, "partition", PART_USAGE,
                                         &a->co.algorithm)) != 0) {
            if (k < 0) return 2;
        } else if ((k = gs_cli_emit_option(argc, argv, &i, "partition", PART_USAGE, &a->emit)) !=
                   0) {
            if (k < 0) return 2;
        } else if (strcmp(argv[i], "--stats") == 0) {
            a->stats = true;
        } else if (strcmp(argv[i], "--strict") == 0) {
            a->co.partition.strict = true;
        } else if ((k = gs_cli_partition_option(argc, argv, &i, "partition", 1L << 20, &a->n,
                                                &a->co.partition, &a->sh)) != 0) {
            if (k < 0) return 2;
        } else if ((k = gs_cli_operand("partition", PART_USAGE, argv[i], "FILE", &a->file)) !=
                   GS_CLI_CONTINUE) {
            return k;
        }
    }
    return gs_cli_need_file_devices("partition", PART_USAGE, a->file);
}

/* Compiles m and prints the program (and with --stats its costs). */
static gs_status partition_module(void *ctx, gs_module *m, gs_diags *d) {
    part_args *a = ctx;
    gs_compiled out = {0};
    gs_mesh mesh;
    gs_status st = gs_cli_module_devices(m, a->sh.mesh, &a->n, d);
    a->co.num_partitions = a->n;
    a->co.no_propagate = !gs_cli_propagate_default(m, a->propagate);
    if (st == GS_OK && gs_cli_sharding_requests(&a->sh, &m->arena, &mesh, &a->co) == 0)
        st = gs_compile(m, &a->co, &out, d);
    else
        st = GS_ERR;
    char *text = st == GS_OK
                     ? gs_cli_module_text(out.program, m, a->emit ? a->emit : GS_CLI_EMIT_HLO, d)
                     : NULL;
    if (st == GS_OK && !text) st = GS_ERR;
    if (text) {
        fputs(text, stdout);
        free(text);
        if (a->stats) gs_cli_print_stats(stderr, m, out.program, &out.stats);
    }
    gs_compiled_free(&out);
    return st;
}

int gs_cli_partition(int argc, char **argv) {
    part_args a = {.propagate = -1};
    gs_compile_options_init(&a.co, 0);
    /* The program as XLA's partitioner writes it, unless --reduce-scatter. */
    a.co.partition.all_reduce_then_slice = true;
    int rc = part_parse_args(argc, argv, &a);
    if (rc == GS_CLI_CONTINUE) {
        rc = gs_cli_with_module(a.file, partition_module, &a);
    }
    gs_cli_shardings_free(&a.sh);
    return rc;
}
