/*
 * cmd_partition.c — `gspmd partition`: rewrites a sharded module into one SPMD program and prints
 * it as HLO text (which `gspmd parse` reads and `gspmd run --spmd` executes).
 *
 *   gspmd partition FILE --num-partitions N [--propagate|--no-propagate] [--stats] [--strict]
 *                   [--mesh M --shard NAME=SPEC]...
 *
 * Instructions without a sharding are replicated (XLA's partitioner alone, the default);
 * --propagate runs SPMD sharding propagation first (gs_compile does the whole pipeline). Warnings (full rematerialization; instructions computed whole although sharded) go to
 * stderr, as errors with --strict; --stats prints what the program costs a device against the
 * unpartitioned module (gs_cli_print_stats).
 */
#include "cli.h"
#include "gspmd/text.h"

#include <stdlib.h>
#include <string.h>


static const char *PART_USAGE =
    "gspmd partition FILE --num-partitions N [--propagate|--no-propagate] [--stats] [--strict] "
    "[--windowed-einsum-threshold-mib M | --no-windowed-einsum] [--bidirectional-windowed-einsum] "
    "[--mesh M --shard NAME=SPEC]...";

static const char *PART_HELP =
    "Rewrites a sharded module into ONE SPMD program that every device runs with its own\n"
    "partition id: per-device shapes (uneven dims padded at the end) and the collectives that\n"
    "make it compute what the single-device module computes. Prints the program as HLO text.\n"
    "\n"
    "  --num-partitions N   the number of devices (every sharding must span N devices)\n"
    "  --propagate          run SPMD sharding propagation first\n"
    "  --no-propagate       (the default) partition the shardings as written, instructions\n"
    "                       without one replicated: XLA's partitioner alone\n"
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
    "  --bidirectional-windowed-einsum\n"
    "                       those loops pass shards both ways round the ring: about half the\n"
    "                       steps, two partial dots each\n"
    "%s"
    "\n"
    "Example:\n"
    "  gspmd partition examples/mlp.hlo --num-partitions 4 --mesh data=2,model=2 \\\n"
    "      --shard x=data,None --shard w1=None,model\n";

static int part_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "gspmd partition: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: %s\n", PART_USAGE);
    return 2;
}

int gs_cli_partition(int argc, char **argv) {
    const char *file = NULL;
    long n = 0;
    bool propagate = false, stats = false;
    gs_compile_options co;
    gs_compile_options_init(&co, 0);
    gs_cli_shardings sh = {0};
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        int k;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n\n", PART_USAGE);
            printf(PART_HELP, GS_CLI_SHARDING_HELP);
            rc = 0;
            goto done;
        } else if (gs_cli_propagate_option(argv[i], &propagate)) {
        } else if (strcmp(argv[i], "--stats") == 0) {
            stats = true;
        } else if (strcmp(argv[i], "--strict") == 0) {
            co.partition.strict = true;
        } else if ((k = gs_cli_devices_option(argc, argv, &i, "partition", 1L << 20, &n)) != 0) {
            if (k < 0) goto done;
        } else if ((k = gs_cli_sharding_option(argc, argv, &i, &sh)) != 0) {
            if (k < 0) goto done;
        } else if ((k = gs_cli_windowed_option(argc, argv, &i, "partition", &co.partition)) != 0) {
            if (k < 0) goto done;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            rc = part_usage("unknown option '%s'", argv[i]);
            goto done;
        } else if (file) {
            rc = part_usage("more than one FILE ('%s')", argv[i]);
            goto done;
        } else {
            file = argv[i];
        }
    }
    if (!file) {
        rc = part_usage("missing FILE%s", "");
        goto done;
    }
    if (n < 1) {
        rc = part_usage("missing --num-partitions N%s", "");
        goto done;
    }
    rc = 1;
    co.num_partitions = n;
    co.no_propagate = !propagate;
    gs_source *src;
    gs_module *m = gs_cli_load_module(file, &src);
    if (!m) goto done;
    gs_diags d = {0};
    gs_compiled out = {0};
    gs_mesh mesh;
    if (gs_cli_sharding_requests(&sh, &m->arena, &mesh, &co) != 0) goto fail;
    if (gs_compile(m, &co, &out, &d) != GS_OK) goto fail;
    char *text = gs_module_to_string(out.program);
    if (!text) {
        gs_error(&d, gs_span_none(), "out of memory");
        goto fail;
    }
    fputs(text, stdout);
    free(text);
    if (stats) gs_cli_print_stats(stderr, m, out.program, &out.stats);
    rc = 0;
fail:
    gs_diags_render(&d, stderr);
    gs_diags_free(&d);
    gs_compiled_free(&out);
    gs_module_free(m);
    gs_source_free(src);
done:
    gs_cli_shardings_free(&sh);
    return rc;
}
