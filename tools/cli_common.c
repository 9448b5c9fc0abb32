/*
 * cli_common.c — helpers every subcommand uses: usage errors and --help, `--name V` / `--name=V`
 * options and the FILE operand, creating output folders, and loading a module with its
 * diagnostics rendered (see cli.h).
 */
#include "cli.h"
#include "gspmd/autoshard.h"
#include "gspmd/cost.h"
#include "gspmd/text.h"

#include <stdlib.h>

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gs_cli_vusage_error(const char *cmd, const char *usage, const char *fmt, va_list ap) {
    fprintf(stderr, "gspmd %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    if (usage) fprintf(stderr, "usage: %s\n", usage);
    return 2;
}

int gs_cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = gs_cli_vusage_error(cmd, usage, fmt, ap);
    va_end(ap);
    return rc;
}

bool gs_cli_is_help(const char *arg) {
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int gs_cli_print_help(const char *usage, const char *help) {
    printf("usage: %s\n\n", usage);
    printf(help, GS_CLI_SHARDING_HELP);
    return 0;
}

int gs_cli_operand(const char *cmd, const char *usage, const char *arg, const char *what,
                   const char **operand) {
    if (arg[0] == '-' && arg[1]) return gs_cli_usage_error(cmd, usage, "unknown option '%s'", arg);
    if (*operand) return gs_cli_usage_error(cmd, usage, "more than one %s ('%s')", what, arg);
    *operand = arg;
    return GS_CLI_CONTINUE;
}

int gs_cli_need_file_devices(const char *cmd, const char *usage, const char *file) {
    if (!file) return gs_cli_usage_error(cmd, usage, "missing FILE");
    return GS_CLI_CONTINUE;
}

gs_status gs_cli_module_devices(const gs_module *m, const char *mesh, long *n, gs_diags *d) {
    if (*n >= 1) return GS_OK;
    int64_t k = gs_module_declared_partitions(m);
    if (k >= 1 && k <= (1L << 20)) { /* a mesh of another size is then an error of its own */
        *n = (long)k;
        return GS_OK;
    }
    if (mesh) {
        gs_arena ar;
        gs_arena_init(&ar);
        gs_mesh parsed;
        int bad = gs_cli_parse_mesh(&ar, mesh, &parsed); /* prints its message */
        if (!bad) *n = (long)parsed.n_devices;
        gs_arena_free(&ar);
        if (bad) return gs_error(d, gs_span_none(), "--mesh '%s' is not a mesh", mesh);
        return GS_OK;
    }
    gs_error(d, gs_span_none(),
             "give --num-partitions N (or --mesh): the module does not declare its device "
             "count (mhlo.num_partitions in StableHLO, num_partitions= in an HLO header)");
    return GS_ERR;
}

bool gs_cli_propagate_default(const gs_module *m, int given) {
    if (given >= 0) return given == 1;
    return m->source && gs_source_is_mlir(m->source);
}

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

int gs_cli_algorithm_option(int argc, char **argv, int *i, const char *cmd, const char *usage,
                            gs_propagation_algorithm *alg) {
    const char *v;
    if (!gs_cli_opt_value(argc, argv, i, "--algorithm", &v)) return 0;
    if (strcmp(v, "shardy") == 0) {
        *alg = GS_PROPAGATE_SHARDY;
    } else if (strcmp(v, "gspmd") == 0) {
        *alg = GS_PROPAGATE_GSPMD;
    } else {
        gs_cli_usage_error(cmd, usage, "--algorithm wants shardy or gspmd, not '%s'", v);
        return -1;
    }
    return 1;
}

int gs_cli_emit_option(int argc, char **argv, int *i, const char *cmd, const char *usage,
                       gs_cli_emit *emit) {
    const char *v;
    if (!gs_cli_opt_value(argc, argv, i, "--emit", &v)) return 0;
    if (strcmp(v, "mlir") == 0) {
        *emit = GS_CLI_EMIT_MLIR;
    } else if (strcmp(v, "hlo") == 0) {
        *emit = GS_CLI_EMIT_HLO;
    } else {
        gs_cli_usage_error(cmd, usage, "--emit wants mlir or hlo, not '%s'", v);
        return -1;
    }
    return 1;
}

char *gs_cli_module_text(const gs_module *m, const gs_module *from, gs_cli_emit emit,
                         gs_diags *d) {
    if (emit == GS_CLI_EMIT_INPUT)
        emit = from->source && gs_source_is_mlir(from->source) ? GS_CLI_EMIT_MLIR : GS_CLI_EMIT_HLO;
    char *text = emit == GS_CLI_EMIT_MLIR ? gs_module_to_mlir(m, d) : gs_module_to_string(m);
    if (!text && emit == GS_CLI_EMIT_HLO) gs_error(d, gs_span_none(), "out of memory");
    return text;
}

int gs_cli_windowed_option(int argc, char **argv, int *i, const char *cmd,
                           gs_partition_options *o) {
    const char *v;
    if (strcmp(argv[*i], "--bidirectional-windowed-einsum") == 0) {
        o->bidirectional_windowed_einsum = true;
        return 1;
    }
    if (strcmp(argv[*i], "--no-windowed-einsum") == 0) {
        o->no_windowed_einsum = true;
        return 1;
    }
    if (strcmp(argv[*i], "--reduce-scatter") == 0 || strcmp(argv[*i], "--no-reduce-scatter") == 0) {
        o->all_reduce_then_slice = argv[*i][2] == 'n';
        return 1;
    }
    if (!gs_cli_opt_value(argc, argv, i, "--windowed-einsum-threshold-mib", &v)) return 0;
    char *end;
    double mib = strtod(v, &end);
    if (*end || !(mib >= 0) || mib > 1e12) {
        fprintf(stderr, "gspmd %s: --windowed-einsum-threshold-mib wants a size in MiB >= 0, "
                        "not '%s'\n", cmd, v);
        return -1;
    }
    o->windowed_einsum = true;
    o->windowed_einsum_threshold_mib = mib;
    return 1;
}

bool gs_cli_propagate_option(const char *arg, bool *propagate) {
    if (strcmp(arg, "--propagate") == 0) *propagate = true;
    else if (strcmp(arg, "--no-propagate") == 0) *propagate = false;
    else return false;
    return true;
}

bool gs_cli_propagate_flag(const char *arg, int *given) {
    bool on;
    if (!gs_cli_propagate_option(arg, &on)) return false;
    *given = on;
    return true;
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

int gs_cli_with_module(const char *path, gs_status (*act)(void *ctx, gs_module *m, gs_diags *d),
                       void *ctx) {
    gs_source *src;
    gs_module *m = gs_cli_load_module(path, &src);
    if (!m) return 1;
    gs_diags d = {0};
    gs_status st = act(ctx, m, &d);
    gs_diags_render(&d, stderr);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
    return st == GS_OK ? 0 : 1;
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

/* ------------------------------------------------------------------ partition statistics */

static const char *COLL_NAMES[GS_N_COLL_KINDS] = {"all-reduce", "all-gather", "reduce-scatter",
                                                  "all-to-all", "collective-permute"};

/* One random leaf of the note: its name, and its scale when it is a weight (fan: an array
 * parameter's fan-in, else -1 to work it out). */
static void note_leaf(gs_sb *list, int *n_scaled, const gs_module *m, const gs_instr *p, int leaf,
                      int64_t fan) {
    if (fan < 0) fan = gs_init_fan_in(m, p, leaf);
    if (fan <= 3) return;
    if ((*n_scaled)++ < 6) {
        if (leaf < 0)
            gs_sb_printf(list, "%s%s +-%.3g (fan-in %lld)", *n_scaled > 1 ? ", " : "", p->name,
                         gs_init_limit(fan), (long long)fan);
        else
            gs_sb_printf(list, "%s%s.%d +-%.3g (fan-in %lld)", *n_scaled > 1 ? ", " : "", p->name,
                         leaf, gs_init_limit(fan), (long long)fan);
    }
}

void gs_cli_note_random(FILE *f, const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                        int filled) {
    const gs_computation *e = m->entry;
    int n_random = 0, n_scaled = 0;
    gs_sb list = {0};
    int64_t *fan = e ? calloc((size_t)(e->n_params ? e->n_params : 1), sizeof *fan) : NULL;
    if (fan) gs_init_fan_ins(m, fan);
    for (int i = 0; e && i < e->n_params; i++) {
        const gs_instr *p = e->params[i];
        bool given = false;
        for (int k = 0; inputs && k < inputs->n; k++) given |= strcmp(inputs->names[k], p->name) == 0;
        if (given) continue;
        n_random++;
        if (gs_shape_is_tuple(p->shape))
            for (int l = 0; l < p->shape->n_tuple; l++) note_leaf(&list, &n_scaled, m, p, l, -1);
        else
            note_leaf(&list, &n_scaled, m, p, -1, fan ? fan[i] : -1);
    }
    free(fan);
    if (filled)
        fprintf(f, "note: %d elided constant%s ({...}) filled with seeded random values (seed "
                   "%llu; weights scaled by their fan-in as below)\n",
                filled, filled == 1 ? "" : "s", (unsigned long long)seed);
    if (n_random)
        fprintf(f, "note: %d parameter%s random (seed %llu): floats uniform in [-1, 1), signed "
                   "ints in [-8, 8), unsigned in [0, 16)%s%s",
                n_random, n_random == 1 ? "" : "s", (unsigned long long)seed,
                n_scaled ? "; weights (a dot's right operand, a convolution's kernel) uniform in "
                           "+-sqrt(3 / fan-in), as LeCun's initialiser: "
                         : "",
                n_scaled ? gs_sb_str(&list) : "");
    if (n_random && n_scaled > 6) fprintf(f, " and %d more", n_scaled - 6);
    if (n_random) fputc('\n', f);
    gs_sb_free(&list);
}

static void print_bytes(FILE *f, int64_t b) {
    if (b >= 1 << 30) fprintf(f, "%.2f GiB", (double)b / (1 << 30));
    else if (b >= 1 << 20) fprintf(f, "%.1f MiB", (double)b / (1 << 20));
    else if (b >= 1 << 10) fprintf(f, "%.1f KiB", (double)b / (1 << 10));
    else fprintf(f, "%lld B", (long long)b);
}

void gs_cli_print_stats(FILE *f, const gs_module *m, const gs_module *p,
                        const gs_partition_stats *st) {
    int64_t n = p->num_partitions > 0 ? p->num_partitions : 1;
    for (int k = 0; k < GS_N_COLL_KINDS; k++)
        fprintf(f, "%-20s %4d  %12lld bytes\n", COLL_NAMES[k], st->n[k], (long long)st->bytes[k]);
    fprintf(f, "%-20s %4d\n", "default action", st->n_default);
    fprintf(f, "%-20s %4d\n", "computed whole", st->n_replicated);
    fprintf(f, "%-20s %4d\n", "full remat", st->n_full_remat);
    gs_cost cm, cp;
    gs_cost_module(m, &cm);
    gs_cost_module(p, &cp);
    double ideal = cm.flops / (double)n;
    fprintf(f, "per-device FLOPs: %.4g (dot %lld, convolution %lld); unpartitioned / %lld: %.4g;"
               " ratio %.3f\n",
            cp.flops, (long long)cp.n_dots, (long long)cp.n_convs, (long long)n, ideal,
            ideal > 0 ? cp.flops / ideal : 1.0);
    fprintf(f, "per-device memory: parameters ");
    print_bytes(f, cp.param_bytes);
    fprintf(f, ", peak ");
    print_bytes(f, cp.peak_bytes);
    fprintf(f, "; unpartitioned peak / %lld: ", (long long)n);
    print_bytes(f, cm.peak_bytes / n);
    fprintf(f, "; ratio %.3f\n",
            cm.peak_bytes > 0 ? (double)cp.peak_bytes / ((double)cm.peak_bytes / (double)n) : 1.0);
}

int64_t gs_cli_machine_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || size <= 0) return INT64_MAX;
    return (int64_t)pages * (int64_t)size;
}

int gs_cli_count_option(int argc, char **argv, int *i, const char *cmd, const char *name,
                        const char *what, long max, long *n) {
    const char *v;
    if (!gs_cli_opt_value(argc, argv, i, name, &v)) return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < 1 || x > max) {
        fprintf(stderr, "gspmd %s: %s wants a number of %s in 1..%ld, not '%s'\n", cmd, name,
                what, max, v);
        return -1;
    }
    *n = x;
    return 1;
}

int gs_cli_devices_option(int argc, char **argv, int *i, const char *cmd, long max, long *n) {
    return gs_cli_count_option(argc, argv, i, cmd, "--num-partitions", "devices", max, n);
}

int gs_cli_partition_option(int argc, char **argv, int *i, const char *cmd, long max_devices,
                            long *n, gs_partition_options *win, gs_cli_shardings *sh) {
    int k = gs_cli_devices_option(argc, argv, i, cmd, max_devices, n);
    if (k == 0) k = gs_cli_windowed_option(argc, argv, i, cmd, win);
    if (k == 0) k = gs_cli_sharding_option(argc, argv, i, sh);
    return k;
}

int gs_cli_seed_option(int argc, char **argv, int *i, const char *cmd, const char *usage,
                       uint64_t *seed) {
    const char *v;
    if (!gs_cli_opt_value(argc, argv, i, "--seed", &v)) return 0;
    char *end;
    *seed = strtoull(v, &end, 10);
    if (*end || !*v) {
        gs_cli_usage_error(cmd, usage, "--seed wants a non-negative integer, not '%s'", v);
        return -1;
    }
    return 1;
}

int gs_cli_memory_option(int argc, char **argv, int *i, const char *cmd, int64_t *max) {
    const char *v;
    if (!gs_cli_opt_value(argc, argv, i, "--max-memory", &v)) return 0;
    double x = gs_cli_parse_bytes(v);
    if (!(x >= 1)) {
        fprintf(stderr, "gspmd %s: --max-memory wants a size in bytes (K, M, G or T for KiB, "
                        "MiB, GiB, TiB), not '%s'\n", cmd, v);
        return -1;
    }
    *max = (int64_t)x;
    return 1;
}

int gs_cli_check_memory(const char *file, const char *what, double need, int64_t max) {
    if (need <= (double)max) return 0;
    fprintf(stderr, "%s: error: %s needs about ", file, what);
    if (need < 9.0e18) print_bytes(stderr, (int64_t)need);
    else fprintf(stderr, "%.3g bytes", need);
    fprintf(stderr, " at its peak, more than the ");
    print_bytes(stderr, max);
    fprintf(stderr, " allowed (--max-memory, by default this machine's memory); nothing was "
                    "allocated\n");
    return 1;
}

int gs_cli_load_machine(const char *spec, gs_machine *mc) {
    if (gs_machine_builtin(spec, mc)) return 0;
    char err[256];
    gs_source *src = gs_source_read_file(spec, err, sizeof err);
    if (!src) {
        fprintf(stderr, "error: --machine %s: not a built-in machine (", spec);
        for (const char *const *n = gs_machine_names(); *n; n++)
            fprintf(stderr, "%s%s", *n, n[1] ? ", " : "");
        fprintf(stderr, ") and not a readable file: %s\n", err);
        return 1;
    }
    gs_diags d = {0};
    gs_status st = gs_machine_parse(src, mc, &d);
    gs_diags_render(&d, stderr);
    gs_diags_free(&d);
    gs_source_free(src);
    return st == GS_OK ? 0 : 1;
}

double gs_cli_parse_bytes(const char *v) {
    char *end;
    errno = 0;
    double x = strtod(v, &end), k = 1;
    if (end[0]) {
        const char *u = strchr("KMGT", toupper((unsigned char)end[0]));
        if (!u || (end[1] && (end[1] != 'i' || end[2]))) return -1;
        for (long i = 0; i <= u - "KMGT"; i++) k *= 1024;
    }
    return end != v && !errno && x > 0 && x * k <= 9.0e18 ? x * k : -1;
}

int gs_cli_auto_option(int argc, char **argv, int *i, const char *cmd, const char *usage,
                       gs_cli_auto *au) {
    const char *v;
    if (strcmp(argv[*i], "--auto") == 0) {
        au->on = true;
        return 1;
    }
    if (strcmp(argv[*i], "--ignore-shardings") == 0) {
        au->ignore_shardings = true;
        return 1;
    }
    if (!gs_cli_opt_value(argc, argv, i, "--memory-limit", &v)) return 0;
    if ((au->memory_limit = gs_cli_parse_bytes(v)) < 0) {
        gs_cli_usage_error(cmd, usage, "--memory-limit wants bytes > 0 (e.g. 16G), not '%s'", v);
        return -1;
    }
    return 1;
}

int gs_cli_auto_check(const gs_cli_auto *au, const char *cmd, const char *usage) {
    if (!au->on && (au->ignore_shardings || au->memory_limit > 0))
        return gs_cli_usage_error(cmd, usage, "%s is an option of --auto (autoshard)",
                                  au->ignore_shardings ? "--ignore-shardings" : "--memory-limit");
    return GS_CLI_CONTINUE;
}

gs_status gs_cli_auto_shardings(gs_module *m, const gs_cli_shardings *sh, const gs_cli_auto *au,
                                const struct gs_machine *mc, gs_compile_options *co,
                                gs_diags *d) {
    if (!sh->mesh) return gs_error(d, gs_span_none(), "--auto needs --mesh M (the devices)");
    if (sh->n > 0)
        return gs_error(d, gs_span_none(),
                        "--auto chooses every sharding: pin some in FILE, not with --shard");
    gs_mesh *mesh = GS_NEW(&m->arena, gs_mesh);
    if (!mesh || gs_mesh_parse(&m->arena, sh->mesh, strlen(sh->mesh), mesh, d, gs_span_none()) !=
                     GS_OK)
        return mesh ? GS_ERR : gs_error(d, gs_span_none(), "out of memory");
    if (co->num_partitions && co->num_partitions != mesh->n_devices)
        return gs_error(d, gs_span_none(),
                        "--mesh %s has %lld devices, but %lld are asked for", sh->mesh,
                        (long long)mesh->n_devices, (long long)co->num_partitions);
    gs_autoshard_options o = {.mesh = mesh,
                              .machine = mc,
                              .memory_limit = au->memory_limit,
                              .ignore_shardings = au->ignore_shardings};
    gs_autoshard_result r;
    if (gs_autoshard(m, &o, &r, d) != GS_OK) return GS_ERR;
    co->num_partitions = mesh->n_devices;
    co->no_propagate = true; /* every instruction has its sharding */
    return GS_OK;
}
