/*
 * cli.h — pieces of the command line shared by the subcommands in tools/ (one .c file each):
 * the show-sharding subcommand, and the `--mesh` / `--shard NAME=SPEC` options any subcommand
 * can accept to attach shardings to a module's parameters and instructions before it runs.
 *
 * Subcommands return exit codes: 0 success, 1 bad input (after an `error: ...` line on stderr),
 * 2 bad usage.
 */
#ifndef GSPMD_TOOLS_CLI_H
#define GSPMD_TOOLS_CLI_H

#include "gspmd/compile.h"
#include "gspmd/interp.h"
#include "gspmd/partition.h"
#include "gspmd/sharding.h"

#include <stdarg.h>

/* `gspmd run ...` (cmd_run.c); argv[0] is "run". */
int gs_cli_run(int argc, char **argv);
/* `gspmd propagate ...` (cmd_propagate.c); argv[0] is "propagate". */
int gs_cli_propagate(int argc, char **argv);
/* `gspmd partition ...` (cmd_partition.c); argv[0] is "partition". */
int gs_cli_partition(int argc, char **argv);
/* `gspmd cost ...` (cmd_cost.c); argv[0] is "cost". */
int gs_cli_cost(int argc, char **argv);
/* `gspmd calibrate ...` (cmd_cost.c); argv[0] is "calibrate". */
int gs_cli_calibrate(int argc, char **argv);
/* `gspmd sdy-opt ...` (cmd_sdy.c); argv[0] is "sdy-opt". */
int gs_cli_sdy_opt(int argc, char **argv);

/* `gspmd show-sharding SHARDING --shape SHAPE [--mesh MESH] [--devices N] [--json] [--svg FILE]
 * [--color|--no-color]`; argv[0] is "show-sharding". Draws which device holds which block. */
int gs_cli_show_sharding(int argc, char **argv);

/* The --mesh and --shard options of one command line. Zero-initialise; free with
 * gs_cli_shardings_free. */
typedef struct gs_cli_shardings {
    const char *mesh;   /* --mesh value (argv storage), or NULL */
    int n;              /* number of --shard values */
    const char **shard; /* n --shard NAME=SPEC values (argv storage; the array is malloc'd) */
} gs_cli_shardings;

/* If argv[*i] is `--mesh V`, `--mesh=V`, `--shard V` or `--shard=V`, records it, advances *i
 * past the value and returns 1; returns 0 for any other argument; returns -1 after printing a
 * usage message when the value is missing or malformed (the caller exits 2). */
int gs_cli_sharding_option(int argc, char **argv, int *i, gs_cli_shardings *o);

/* Parses the --mesh value into *mesh (arena a) and points co's mesh and requests at it and at
 * the --shard values (kept in a), for gs_compile. Prints `error: ...` and returns 1 on bad
 * input, 0 otherwise (also when there is nothing to do). */
int gs_cli_sharding_requests(const gs_cli_shardings *o, gs_arena *a, gs_mesh *mesh,
                             gs_compile_options *co);

/* Parses a --mesh value into *out (arena a). Prints `error: ...` and returns 1 on bad input. */
int gs_cli_parse_mesh(gs_arena *a, const char *text, gs_mesh *out);

/* Loads --machine: a built-in profile's name or a profile file. Prints an error and returns 1
 * on failure. */
struct gs_machine;
int gs_cli_load_machine(const char *spec, struct gs_machine *mc);

/* A byte count: a number with an optional K M G T or Ki Mi Gi Ti suffix (both powers of
 * 1024); -1 when bad or not > 0. --max-memory and --memory-limit read it. */
double gs_cli_parse_bytes(const char *v);

/* --auto of run and cost, and the autoshard options it takes. Zero-initialise. */
typedef struct gs_cli_auto {
    bool on;               /* --auto */
    bool ignore_shardings; /* --ignore-shardings: choose every value, FILE's shardings aside */
    double memory_limit;   /* --memory-limit B: bytes a device may hold (0: the machine's) */
} gs_cli_auto;

/* Parses one of --auto, --ignore-shardings, --memory-limit at argv[*i]: 1 when it is one, 0
 * when not, -1 after a usage message for a bad value (exit 2). */
int gs_cli_auto_option(int argc, char **argv, int *i, const char *cmd, const char *usage,
                       gs_cli_auto *au);

/* After parsing: --ignore-shardings or --memory-limit without --auto is a usage error (2
 * after its message; GS_CLI_CONTINUE when fine). */
int gs_cli_auto_check(const gs_cli_auto *au, const char *cmd, const char *usage);

/* --auto of run and cost: autoshard m on the --mesh in sh for machine mc (no --shard) with
 * au's options, then compile it as annotated: co's devices become the mesh's (which must match
 * any asked for) and propagation is off. Errors in d. */
gs_status gs_cli_auto_shardings(gs_module *m, const gs_cli_shardings *sh, const gs_cli_auto *au,
                                const struct gs_machine *mc, gs_compile_options *co,
                                gs_diags *d);

/* `gspmd autoshard ...` (cmd_autoshard.c); argv[0] is "autoshard". */
int gs_cli_autoshard(int argc, char **argv);

/* The usage lines for --mesh / --shard, for a subcommand's --help. */
extern const char *const GS_CLI_SHARDING_HELP;

/* Frees o's list (not the argv strings) and zeroes it. */
void gs_cli_shardings_free(gs_cli_shardings *o);

/* ---- common helpers (cli_common.c) */

/* What a subcommand's argument parser returns when the command should go on; any other value
 * is the exit code to return now (0 after --help, 2 after a usage message). */
#define GS_CLI_CONTINUE (-1)

/* Bad usage of subcommand cmd: prints `gspmd CMD: MESSAGE` and, when usage is not NULL,
 * `usage: USAGE` on stderr; returns 2. */
int gs_cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int gs_cli_vusage_error(const char *cmd, const char *usage, const char *fmt, va_list ap);
/* True for --help and -h. */
bool gs_cli_is_help(const char *arg);
/* --help: prints `usage: USAGE`, a blank line and help, a printf format whose one %s (if it has
 * one) is GS_CLI_SHARDING_HELP; returns 0. */
int gs_cli_print_help(const char *usage, const char *help);
/* An argument of subcommand cmd that none of its options took: `unknown option` when it starts
 * with '-' (a lone "-" is standard input), `more than one WHAT ('ARG')` when *operand is set
 * already; both print usage and return 2. Otherwise sets *operand and returns GS_CLI_CONTINUE. */
int gs_cli_operand(const char *cmd, const char *usage, const char *arg, const char *what,
                   const char **operand);
/* After the arguments of a command taking FILE [--num-partitions N]: `missing FILE` (2 after
 * usage), else GS_CLI_CONTINUE. N may be left 0: gs_cli_module_devices fills it in. */
int gs_cli_need_file_devices(const char *cmd, const char *usage, const char *file);
/* The device count for module m: *n when --num-partitions gave one, else the count the module
 * declares (gs_module_declared_partitions), else the devices of --mesh (mesh: its text, or
 * NULL), stored in *n. GS_ERR with a message in d when none says. */
gs_status gs_cli_module_devices(const gs_module *m, const char *mesh, long *n, gs_diags *d);
/* The --propagate default: propagate an MLIR program (a JAX program has shardings on its
 * arguments and results only), partition an HLO module as written (XLA's partitioner alone).
 * `given` is -1 when neither --propagate nor --no-propagate was given, else 0 or 1. */
bool gs_cli_propagate_default(const gs_module *m, int given);
/* The options of the commands that partition (run, partition, cost): --num-partitions N (N in
 * 1..max_devices, gs_cli_devices_option), the windowed einsum and reduce-scatter ones into *win
 * (gs_cli_windowed_option) and --mesh / --shard into *sh (gs_cli_sharding_option). 1 when
 * argv[*i] is one of them, 0 when not, -1 after a message (the caller exits 2). */
int gs_cli_partition_option(int argc, char **argv, int *i, const char *cmd, long max_devices,
                            long *n, gs_partition_options *win, gs_cli_shardings *sh);
/* If argv[*i] is --seed S: sets *seed and returns 1; -1 after usage (usage: cmd's usage line)
 * for an S that is no non-negative integer; 0 for another option. */
int gs_cli_seed_option(int argc, char **argv, int *i, const char *cmd, const char *usage,
                       uint64_t *seed);

/* If argv[*i] is `NAME V` or `NAME=V`, sets *value, advances *i past V and returns true. */
bool gs_cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value);
/* If argv[*i] is --windowed-einsum-threshold-mib M, --no-windowed-einsum,
 * --bidirectional-windowed-einsum or --[no-]reduce-scatter: sets that option of o (1 on success, -1 with a message for a bad M); 0 when argv[*i] is
 * another option. */
int gs_cli_windowed_option(int argc, char **argv, int *i, const char *cmd,
                           gs_partition_options *o);
/* If arg is --propagate or --no-propagate: sets *propagate and returns true. */
bool gs_cli_propagate_option(const char *arg, bool *propagate);
/* The same into a tri-state: 1 --propagate, 0 --no-propagate (left -1 when neither). */
bool gs_cli_propagate_flag(const char *arg, int *given);
/* If argv[*i] is --num-partitions N (N in 1..max): sets *n, advances *i and returns 1; -1 with a
 * message for a bad N; 0 when argv[*i] is another option. */
int gs_cli_devices_option(int argc, char **argv, int *i, const char *cmd, long max, long *n);
/* The same for option `name` counting `what` (--num-replicas: "replicas"). */
int gs_cli_count_option(int argc, char **argv, int *i, const char *cmd, const char *name,
                        const char *what, long max, long *n);
/* If argv[*i] is --max-memory BYTES (a number, optionally K/M/G/T for KiB..TiB): sets *max and
 * returns 1; -1 with a message for a bad value; 0 for another option. */
int gs_cli_memory_option(int argc, char **argv, int *i, const char *cmd, int64_t *max);
/* This machine's physical memory in bytes (INT64_MAX when unknown): --max-memory's default. */
int64_t gs_cli_machine_memory(void);
/* 0 when `need` bytes fit in max; else prints `FILE: error: WHAT needs about ...` naming both
 * sizes and returns 1. */
int gs_cli_check_memory(const char *file, const char *what, double need, int64_t max);
/* The output format of parse, propagate and partition (--emit). */
typedef enum gs_cli_emit {
    GS_CLI_EMIT_INPUT, /* the input's own format (HLO for HLO text, StableHLO for MLIR) */
    GS_CLI_EMIT_HLO,   /* --emit hlo */
    GS_CLI_EMIT_MLIR   /* --emit mlir */
} gs_cli_emit;
/* If argv[*i] is `--emit mlir|hlo` (or --emit=...): sets *emit, advances *i and returns 1; -1
 * after a usage message for another value; 0 when argv[*i] is something else. */
/* If argv[*i] is --algorithm shardy|gspmd (propagation): sets *alg and returns 1; -1 after a
 * usage message for another value; 0 for another option. */
int gs_cli_algorithm_option(int argc, char **argv, int *i, const char *cmd, const char *usage,
                            gs_propagation_algorithm *alg);
int gs_cli_emit_option(int argc, char **argv, int *i, const char *cmd, const char *usage,
                       gs_cli_emit *emit);
/* The text of m (malloc'd) in the format emit asks for; GS_CLI_EMIT_INPUT follows the text
 * `from` was read from. NULL with an error in d when m has no StableHLO form or memory ran out. */
char *gs_cli_module_text(const gs_module *m, const gs_module *from, gs_cli_emit emit,
                         gs_diags *d);
/* mkdir -p; 0 on success, -1 with errno set. */
int gs_cli_mkdirs(const char *path);
/* Reads and parses FILE ("-" = stdin); on failure prints the diagnostics and returns NULL. *src
 * receives the source text (free it after the module). */
gs_module *gs_cli_load_module(const char *path, gs_source **src);
/* Loads FILE (gs_cli_load_module), calls act(ctx, m, &d), renders d on stderr and frees it all:
 * returns 0 when act returned GS_OK, else 1 (also when FILE did not load). */
int gs_cli_with_module(const char *path, gs_status (*act)(void *ctx, gs_module *m, gs_diags *d),
                       void *ctx);
/* Prints what partitioned program p costs one device against module m (unpartitioned): the
 * collectives of st by kind, the instructions taking the default action and those computed
 * whole, full rematerializations, dot/convolution FLOPs and peak memory with their ratios to
 * m's / N (src/cost/). */
void gs_cli_print_stats(FILE *f, const gs_module *m, const gs_module *p,
                        const gs_partition_stats *st);

/* Records an --input NAME=FILE.npy value of subcommand cmd. Returns 0, or the exit code after
 * printing why (2 malformed, 1 out of memory). */
int gs_cli_input_option(const char *cmd, const char *value, gs_interp_inputs *inputs);

/* Says on f what the random entry arguments of m were drawn from (seed, the uniform range, and
 * the weights scaled by their fan-in: gs_init_fan_in), when any parameter without an --input is
 * random; `filled` elided constants were drawn the same way. */
void gs_cli_note_random(FILE *f, const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                        int filled);

#endif /* GSPMD_TOOLS_CLI_H */
