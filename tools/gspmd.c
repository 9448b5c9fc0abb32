/*
 * gspmd.c — the command line: one subcommand per pipeline stage, HLO text in, text out.
 *
 *   gspmd parse FILE [--emit F]      print the canonical module (HLO or StableHLO text)
 *   gspmd verify FILE                check shapes and attributes of every instruction
 *   gspmd eval FILE [...]            run the reference interpreter, write .npy outputs
 *
 * Only this file prints and exits; the library returns errors as values (gs_diags), rendered
 * here as `FILE:LINE:COL: error: ...` with the source line and a caret. Exit status: 0 success,
 * 1 bad input or a failed check (or output that could not be written: a full disk, a closed
 * pipe), 2 bad usage.
 */
#include "cli.h"
#include "gspmd/cost.h"
#include "gspmd/interp.h"
#include "gspmd/npy.h"
#include "gspmd/numeric.h"
#include "gspmd/text.h"
#include "gspmd/version.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
    const char *help;
} command;

static const command *find_command(const char *name);

/* ------------------------------------------------------------------ helpers */

/* The usage line of command cmd (NULL for an unknown one). */
static const char *usage_of(const char *cmd) {
    const command *c = find_command(cmd);
    return c ? c->usage : NULL;
}

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = gs_cli_vusage_error(cmd, usage_of(cmd), fmt, ap);
    va_end(ap);
    return rc;
}

static int print_help(const char *cmd) {
    const command *c = find_command(cmd);
    printf("usage: %s\n\n%s", c->usage, c->help);
    return 0;
}

/* The FILE operand of parse, verify and eval: an option the command does not know, or a second
 * FILE, is bad usage (2); else GS_CLI_CONTINUE. */
static int file_operand(const char *cmd, const char *arg, const char **file) {
    if (arg[0] == '-' && arg[1]) return usage_error(cmd, "unknown option '%s'", arg);
    if (*file) return usage_error(cmd, "more than one FILE");
    *file = arg;
    return GS_CLI_CONTINUE;
}

/* The arguments of a command that takes FILE alone (parse, verify): GS_CLI_CONTINUE, or the
 * exit code. */
static int file_args(const char *cmd, int argc, char **argv, const char **file) {
    for (int i = 1; i < argc; i++) {
        if (gs_cli_is_help(argv[i])) return print_help(cmd);
        int rc = file_operand(cmd, argv[i], file);
        if (rc != GS_CLI_CONTINUE) return rc;
    }
    return *file ? GS_CLI_CONTINUE : usage_error(cmd, "missing FILE");
}

/* ------------------------------------------------------------------ parse */

static int cmd_parse(int argc, char **argv) {
    const char *file = NULL;
    gs_cli_emit emit = GS_CLI_EMIT_INPUT;
    for (int i = 1; i < argc; i++) {
        int k;
        if (gs_cli_is_help(argv[i])) return print_help("parse");
        if ((k = gs_cli_emit_option(argc, argv, &i, "parse", usage_of("parse"), &emit)) != 0) {
            if (k < 0) return 2;
        } else if ((k = file_operand("parse", argv[i], &file)) != GS_CLI_CONTINUE) {
            return k;
        }
    }
    if (!file) return usage_error("parse", "missing FILE");
    gs_source *src;
    gs_module *m = gs_cli_load_module(file, &src);
    if (!m) return 1;
    gs_diags d = {0};
    char *text = gs_cli_module_text(m, m, emit, &d);
    gs_diags_render(&d, stderr);
    gs_diags_free(&d);
    if (text) fputs(text, stdout);
    int rc = text ? 0 : 1;
    free(text);
    gs_module_free(m);
    gs_source_free(src);
    return rc;
}

/* ------------------------------------------------------------------ verify */

static int cmd_verify(int argc, char **argv) {
    const char *file = NULL;
    int rc = file_args("verify", argc, argv, &file);
    if (rc != GS_CLI_CONTINUE) return rc;
    gs_source *src;
    gs_module *m = gs_cli_load_module(file, &src);
    if (!m) return 1;
    gs_diags d = {0};
    gs_status st = gs_module_verify(m, &d);
    gs_diags_render(&d, stderr);
    if (st == GS_OK) printf("%s: ok\n", file);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
    return st == GS_OK ? 0 : 1;
}

/* ------------------------------------------------------------------ eval */

/* One line per output: shape, min/max/mean (floats and integers), and the first values. */
static void print_value_summary(FILE *out, const char *label, const gs_value *v) {
    char shape[256];
    gs_value_shape_str(v, shape, sizeof shape);
    fprintf(out, "%s: %s", label, shape);
    if (v->n > 0 && !gs_type_is_complex(v->type)) {
        double lo = 0, hi = 0, sum = 0;
        for (int64_t i = 0; i < v->n; i++) {
            double x = gs_elem_get_f(v->data, v->type, i);
            if (i == 0 || x < lo) lo = x;
            if (i == 0 || x > hi) hi = x;
            sum += x;
        }
        fprintf(out, "  min %.6g  max %.6g  mean %.6g", lo, hi, sum / (double)v->n);
    }
    fprintf(out, "  [");
    int64_t shown = v->n < 8 ? v->n : 8;
    for (int64_t i = 0; i < shown; i++) {
        if (gs_type_is_complex(v->type)) {
            double re, im;
            gs_elem_get_c(v->data, v->type, i, &re, &im);
            fprintf(out, "%s(%.6g, %.6g)", i ? ", " : "", re, im);
        } else if (v->type == GS_PRED) {
            fprintf(out, "%s%s", i ? ", " : "", gs_elem_get_i(v->data, v->type, i) ? "true" : "false");
        } else if (gs_type_is_float(v->type)) {
            fprintf(out, "%s%.6g", i ? ", " : "", gs_elem_get_f(v->data, v->type, i));
        } else {
            fprintf(out, "%s%lld", i ? ", " : "", (long long)gs_elem_get_i(v->data, v->type, i));
        }
    }
    fprintf(out, "%s]\n", v->n > shown ? ", ..." : "");
}

/* What an eval command line asks for. */
typedef struct eval_args {
    const char *file;
    const char *out_dir;     /* --output-dir, or NULL */
    uint64_t seed;           /* --seed */
    bool print, fill;        /* --print, --fill-elided */
    gs_interp_inputs inputs; /* --input */
    int64_t max_memory;      /* --max-memory */
    long steps;              /* --steps K (0: not given; one step) */
} eval_args;

/* The argument loop: GS_CLI_CONTINUE, or the exit code (0 after --help, 1 out of memory, 2 bad
 * usage). */
static int eval_parse_args(int argc, char **argv, eval_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *v;
        int k;
        if (gs_cli_is_help(argv[i])) return print_help("eval");
        if ((k = gs_cli_memory_option(argc, argv, &i, "eval", &a->max_memory)) != 0 ||
            (k = gs_cli_seed_option(argc, argv, &i, "eval", usage_of("eval"), &a->seed)) != 0) {
            if (k < 0) return 2;
        } else if (strcmp(argv[i], "--print") == 0) {
            a->print = true;
        } else if (strcmp(argv[i], "--fill-elided") == 0) {
            a->fill = true;
        } else if (gs_cli_opt_value(argc, argv, &i, "--output-dir", &v)) {
            a->out_dir = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--steps", &v)) {
            char *end;
            a->steps = strtol(v, &end, 10);
            if (*end || end == v || a->steps < 1 || a->steps > 1000000)
                return usage_error("eval", "--steps wants a number in 1..1000000");
        } else if (gs_cli_opt_value(argc, argv, &i, "--input", &v)) {
            if ((k = gs_cli_input_option("eval", v, &a->inputs)) != 0) return k;
        } else if ((k = file_operand("eval", argv[i], &a->file)) != GS_CLI_CONTINUE) {
            return k;
        }
    }
    if (!a->file) return usage_error("eval", "missing FILE");
    return GS_CLI_CONTINUE;
}

/* Runs the reference interpreter on m: checks, the memory it needs, then the outputs (printed
 * with --print, written to --output-dir). */
static gs_status eval_module(void *ctx, gs_module *m, gs_diags *d) {
    const eval_args *a = ctx;
    int filled = 0;
    if (gs_module_verify(m, d) != GS_OK || gs_module_check_bounded(m, "evaluation", d) != GS_OK ||
        (a->fill && gs_module_fill_elided(m, a->seed, &filled, d) != GS_OK))
        return GS_ERR;
    gs_cli_note_random(stderr, m, &a->inputs, a->seed, filled);
    gs_cost cost;
    gs_cost_module(m, &cost);
    if (gs_cli_check_memory(a->file, "evaluating this module", (double)cost.run_peak_bytes,
                            a->max_memory) != 0)
        return GS_ERR;
    if (a->out_dir && gs_cli_mkdirs(a->out_dir) != 0) {
        fprintf(stderr, "error: cannot create directory '%s': %s\n", a->out_dir, strerror(errno));
        return GS_ERR;
    }
    gs_value **outs = NULL;
    int n_outs = 0;
    int steps = a->steps > 0 ? (int)a->steps : 1;
    double *step_s = calloc((size_t)steps, sizeof *step_s);
    if (!step_s) return gs_error(d, gs_span_none(), "out of memory");
    if (gs_interp_run_entry_steps(m, &a->inputs, a->seed, steps, step_s, &outs, &n_outs, d) !=
        GS_OK) {
        free(step_s);
        return GS_ERR;
    }
    if (a->steps) { /* each step's arguments the previous one's outputs (input_output_alias) */
        double total = 0;
        for (int k = 1; k < steps; k++) total += step_s[k];
        fprintf(stderr, "steps: %d; first %.4g s", steps, step_s[0]);
        if (steps > 1) fprintf(stderr, ", then %.4g s per step", total / (steps - 1));
        fprintf(stderr, "\n");
    }
    free(step_s);
    gs_status st = GS_OK;
    for (int i = 0; i < n_outs && st == GS_OK; i++) {
        char path[4096], label[32];
        snprintf(label, sizeof label, "out%d", i);
        if (a->print) print_value_summary(stdout, label, outs[i]);
        if (!a->out_dir) continue;
        snprintf(path, sizeof path, "%s/out%d.npy", a->out_dir, i);
        st = gs_npy_write(path, outs[i], d);
    }
    for (int i = 0; i < n_outs; i++) gs_value_free(outs[i]);
    free(outs);
    return st;
}

static int cmd_eval(int argc, char **argv) {
    eval_args a = {.max_memory = gs_cli_machine_memory()};
    int rc = eval_parse_args(argc, argv, &a);
    if (rc == GS_CLI_CONTINUE) rc = gs_cli_with_module(a.file, eval_module, &a);
    gs_interp_inputs_free(&a.inputs);
    return rc;
}

/* ------------------------------------------------------------------ table */

static int cmd_help(int argc, char **argv);

static int cmd_version(int argc, char **argv) {
    if (argc > 1 && gs_cli_is_help(argv[1])) return print_help("version");
    if (argc > 1) return usage_error("version", "unexpected argument '%s'", argv[1]);
    printf("gspmd %s\n", GSPMD_VERSION_STRING);
    return 0;
}

static const command COMMANDS[] = {
    {"parse", cmd_parse, "gspmd parse FILE [--emit mlir|hlo]",
     "Parses XLA HLO text or StableHLO/MLIR text (FILE may be - for standard input) and prints\n"
     "the module: in canonical HLO form (--emit hlo) or as StableHLO in MLIR's pretty form\n"
     "(--emit mlir); the default is the input's own format. Printing is a fixed point: parsing\n"
     "the output prints the same text. `parse x.hlo --emit mlir` converts HLO to StableHLO,\n"
     "`parse x.mlir --emit hlo` the other way.\n"},
    {"verify", cmd_verify, "gspmd verify FILE",
     "Parses FILE and checks every instruction's operand count, shapes and attributes against\n"
     "its op's rules (XLA's shape inference). Prints FILE: ok, or one located error per problem.\n"},
    {"eval", cmd_eval,
     "gspmd eval FILE [--input NAME=FILE.npy]... [--seed S] [--fill-elided] "
     "[--max-memory BYTES] [--output-dir DIR] [--print] [--steps K]",
     "Runs the reference interpreter on one device and writes one .npy per output leaf:\n"
     "DIR/out0.npy, DIR/out1.npy, ... in depth-first order (a non-tuple root is out0.npy).\n"
     "--print also prints each output's shape, min/max/mean and first values. With neither,\n"
     "it only runs: StableHLO checks (custom_call @check.expect_close, ...) fail it with exit 1.\n"
     "Parameters without --input get seeded random values (floats uniform in [-1, 1), signed\n"
     "integers in [-8, 8), unsigned in [0, 16), preds fair coins; --seed S, default 0);\n"
     "weights (a dot's right operand, a convolution's kernel) are drawn uniform in\n"
     "+-sqrt(3 / fan-in), as LeCun's initialiser, and a note on stderr says what was drawn.\n"
     "An --input's dtype and shape must match its parameter exactly. numpy has no bfloat16:\n"
     "bf16 outputs are written widened exactly to float32, and a bf16 parameter reads a\n"
     "float32 file (rounded to nearest even). f16 is numpy float16.\n"
     "--fill-elided gives constants whose values were elided ({...}) seeded random values\n"
     "(else they are an error).\n"
     "--steps K evaluates K times, each step's arguments the previous step's outputs where\n"
     "the module declares input_output_alias (a training step's state); the outputs are the\n"
     "last step's, and each step's time goes to stderr.\n"
     "--max-memory BYTES (K, M, G, T suffixes; default: this machine's memory): a module whose\n"
     "peak of live values would need more is refused before anything is allocated, saying\n"
     "how much it needs.\n"},
    {"propagate", gs_cli_propagate,
     "gspmd propagate FILE [--spmd] [--propagate-to-output=B[,B...]] "
     "[--propagate-to-parameters=B[,B...]] [--cse-prevention-only] [--mesh M --shard NAME=SPEC]... "
     "[--explain NAME] [--emit hlo|mlir]",
     "Propagates shardings to every instruction (XLA's ShardingPropagation) and prints the\n"
     "module. See gspmd propagate --help.\n"},
    {"partition", gs_cli_partition,
     "gspmd partition FILE --num-partitions N [--propagate|--no-propagate] "
     "[--mesh M --shard NAME=SPEC]... [--emit hlo|mlir]",
     "Rewrites a sharded module into one SPMD program with per-device shapes and collectives.\n"
     "Propagates shardings first only with --propagate (the default is XLA's partitioner\n"
     "alone). See gspmd partition --help.\n"},
    {"run", gs_cli_run,
     "gspmd run [--spmd] FILE --num-partitions N [--propagate|--no-propagate] [--verify] "
     "[--backend threads|mpi] [--input NAME=FILE.npy]... [--output-dir DIR] [--auto --mesh M] "
     "[--steps K] [--trace FILE.json]",
     "Propagates shardings (unless --no-propagate; --auto: autoshard's), partitions FILE and\n"
     "runs it on N devices (threads, or MPI ranks under mpirun), optionally verifying against\n"
     "the reference interpreter; --steps K runs it as a loop with its state on the devices,\n"
     "--trace writes each device's timeline; --spmd runs an already partitioned program as it\n"
     "is. See gspmd run --help.\n"},
    {"cost", gs_cli_cost,
     "gspmd cost FILE --num-partitions N [--machine NAME|FILE] [--propagate|--no-propagate] "
     "[--spmd] [--json] [--trace FILE.json] [--mesh M --shard NAME=SPEC]... [--auto --mesh M]",
     "Compiles FILE as run does (propagating unless --no-propagate) and predicts one step's\n"
     "per-device FLOPs, memory traffic, collectives, peak memory, step time and model FLOPs\n"
     "utilization on a machine profile. See gspmd cost --help.\n"},
    {"autoshard", gs_cli_autoshard,
     "gspmd autoshard FILE --mesh M [--machine NAME|FILE] [--memory-limit BYTES] "
     "[--time-limit S] [-o OUT] [--report]",
     "Chooses the sharding of every value on a mesh by predicted step time, within memory\n"
     "(an integer program solved by CBC), and writes the annotated module. See gspmd\n"
     "autoshard --help.\n"},
    {"sdy-opt", gs_cli_sdy_opt, "gspmd sdy-opt FILE [-sdy-PASS[=OPTIONS]]...",
     "Runs Shardy's passes by their sdy_opt names (-sdy-populate-op-sharding-rules; the\n"
     "propagation passes are not implemented yet) on a StableHLO module and prints it as\n"
     "Shardy's sdy_opt does, for Shardy's FileCheck tests. See gspmd sdy-opt --help.\n"},
    {"calibrate", gs_cli_calibrate, "gspmd calibrate [--output FILE]",
     "Measures this machine (matmul, memory, the interpreter, the threads backend's\n"
     "collectives) and prints its profile for gspmd cost --machine FILE.\n"},
    {"show-sharding", gs_cli_show_sharding,
     "gspmd show-sharding SHARDING --shape SHAPE [--mesh MESH] [--devices N] [--json] [--svg FILE]",
     "Draws which device holds which block of an array under a sharding (XLA text, or a\n"
     "PartitionSpec with --mesh); --json prints each device's tile, offset and shard shape.\n"},
    {"help", cmd_help, "gspmd help [COMMAND]", "Lists the commands, or explains one.\n"},
    {"version", cmd_version, "gspmd version (or gspmd --version)",
     "Prints gspmd's version.\n"},
};

static const command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (strcmp(COMMANDS[i].name, name) == 0) return &COMMANDS[i];
    return NULL;
}

static int cmd_help(int argc, char **argv) {
    if (argc > 1) {
        const command *c = find_command(argv[1]);
        if (!c) return usage_error("help", "unknown command '%s'", argv[1]);
        return print_help(c->name);
    }
    printf("gspmd — GSPMD sharding propagation and SPMD partitioning for XLA HLO\n\n"
           "usage: gspmd COMMAND [ARGS]   (gspmd COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        printf("  %s\n", COMMANDS[i].usage);
    return 0;
}

/* Flushes and closes standard output and reports a failed write (a full disk, a closed pipe):
 * what a command printed is its result, so losing any of it is an error (exit 1 unless the
 * command already failed). */
static int finish_stdout(int rc) {
    bool failed = ferror(stdout) != 0;
    errno = 0;
    if (fflush(stdout) != 0) failed = true;
    int err = errno;
    if (fclose(stdout) != 0 && !failed) {
        failed = true;
        err = errno;
    }
    if (!failed) return rc;
    fprintf(stderr, "error: cannot write standard output%s%s\n", err ? ": " : "",
            err ? strerror(err) : "");
    return rc ? rc : 1;
}

int main(int argc, char **argv) {
#ifdef __GLIBC__
    /* The interpreter allocates and frees a buffer per instruction; glibc's defaults serve
     * buffers over 128 KiB by mmap and hand freed heap memory back, so every large buffer
     * faults in fresh pages (most of a run's system time). Keeping buffers up to 32 MiB (the
     * largest threshold glibc takes) in a heap that is not trimmed below 1 GiB reuses them:
     * `eval` of a 4-layer 1024x4096 MLP 1.16-1.33 s -> 0.95-0.99 s, `run` on 2 devices
     * 2.56 -> 1.83 s, page faults 125k -> 54k (measured here, one run each). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    /* A reader that closes the pipe early (`gspmd parse big.hlo | head`) makes writes fail
     * with EPIPE, reported by finish_stdout with exit status 1, instead of killing the process
     * silently with SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        cmd_help(1, argv);
        return finish_stdout(2);
    }
    if (gs_cli_is_help(argv[1])) return finish_stdout(cmd_help(1, argv));
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
        return finish_stdout(cmd_version(argc - 1, argv + 1));
    const command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "gspmd: unknown command '%s' (try gspmd help)\n", argv[1]);
        return 2;
    }
    return finish_stdout(c->run(argc - 1, argv + 1));
}
