/*
 * cmd_run.c — `gspmd run`: runs a program on N devices.
 *
 *   gspmd run FILE [--num-partitions N] [--propagate|--no-propagate] [--backend threads|mpi]
 *             [--input NAME=FILE.npy]... [--output-dir DIR] [--verify] [--seed S]
 *             [--timeout SEC] [--save-program FILE] [--mesh M --shard NAME=SPEC]...
 *   gspmd run --spmd FILE [--num-partitions N] [...] --output-dir DIR
 *
 * Without --spmd, FILE is a single-device module with shardings: it is propagated (unless
 * --no-propagate), partitioned, its global inputs are sliced per device by the parameter
 * shardings, the SPMD program runs on N devices, and the global outputs are reassembled by the
 * root's sharding into DIR/out<i>.npy. --verify also runs the reference interpreter on the same
 * inputs and compares element by element (gs_verify_outputs: exact for integers and predicates,
 * within GS_VERIFY_MARGIN rounding-error bounds for floats);
 * replicated outputs must agree across their replicas. Exit 0 only when everything matches.
 *
 * --spmd runs an already partitioned program as it is on every device: each device gets the
 * same inputs and writes DIR/dev<d>/out<i>.npy. Under mpirun the MPI backend makes each rank one
 * device (chosen automatically when mpirun launched us); outputs are gathered to rank 0, which
 * writes them and verifies.
 */
#include "cli.h"
#include "gspmd/cost.h"
#include "gspmd/npy.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

static const char *RUN_USAGE =
    "gspmd run FILE [--num-partitions N] [--propagate|--no-propagate] [--backend threads|mpi]\n"
    "          [--devices-per-rank K] [--input NAME=FILE.npy]... [--output-dir DIR] [--verify]\n"
    "          [--stats] [--strict] [--fill-elided] [--windowed-einsum-threshold-mib M]\n"
    "          [--no-windowed-einsum] [--no-reduce-scatter] [--max-memory BYTES]\n"
    "          [--seed S] [--timeout SEC] [--save-program FILE] [--mesh M --shard NAME=SPEC]...\n"
    "          [--share-work | --no-share-work] [--algorithm gspmd|shardy]\n"
    "          [--auto --mesh M [--ignore-shardings] [--memory-limit BYTES]]\n"
    "          [--steps K [--tokens-per-step N]] [--trace FILE.json]\n"
    "       gspmd run --spmd FILE [--num-partitions N] [--num-replicas R] [--backend threads|mpi]\n"
    "          [--devices-per-rank K] [--input NAME=FILE.npy]... [--seed S] [--timeout SEC]\n"
    "          [--max-memory BYTES] [--share-work | --no-share-work] [--stats]\n"
    "          --output-dir DIR";

static const char *RUN_HELP =
    "Runs a sharded module on N devices: propagates its shardings (unless --no-propagate),\n"
    "partitions it into one SPMD program, slices the global inputs per device by the parameter\n"
    "shardings, runs the program (one thread per device, or one MPI rank per device), and\n"
    "reassembles the global outputs by the root's sharding into DIR/out<i>.npy.\n"
    "\n"
    "  --num-partitions N   the number of devices (under mpirun: the number of ranks); by\n"
    "                       default the count the module declares (mhlo.num_partitions)\n"
    "  --propagate          propagate shardings before partitioning (the default)\n"
    "  --no-propagate       partition with the shardings as written (missing ones replicate)\n"
    "  --algorithm gspmd|shardy  which propagation: XLA's GSPMD one or Shardy's (the default\n"
    "                       for a module that declares sdy.mesh)\n"
    "  --auto --mesh M      choose every sharding on the mesh M by predicted cost on this\n"
    "                       machine (gspmd autoshard, profile this-cpu) instead of propagating;\n"
    "                       the devices are the mesh's; FILE's shardings pin their values\n"
    "                       unless --ignore-shardings; --memory-limit BYTES: what a device\n"
    "                       may hold (default: the profile's memory)\n"
    "  --steps K            run the program K times, its arguments staying on the devices:\n"
    "                       where the module declares input_output_alias, step k's outputs\n"
    "                       are step k+1's arguments (each sharded as its parameter); prints\n"
    "                       the steps' times, FLOP/s per device and gspmd cost's prediction\n"
    "                       (--tokens-per-step N: and tokens/s); --verify steps the\n"
    "                       reference the same way\n"
    "  --trace FILE.json    a timeline of what each device ran, every step: its instructions\n"
    "                       (collectives with their bytes), as Chrome trace-event JSON, one\n"
    "                       process per device; open it in ui.perfetto.dev or\n"
    "                       chrome://tracing (under MPI: FILE.json.rank<r> per rank)\n"
    "  --verify             also run the reference interpreter on the same inputs and compare\n"
    "                       element by element: integers and predicates exactly, floats within\n"
    "                       16 times the element's rounding-error bound (0 for data that was\n"
    "                       only moved; for sums, the rounding another order of adding may give,\n"
    "                       however much they cancel); prints the largest error per output in\n"
    "                       bounds; exit 0 only if all match\n"
    "  --backend B          threads (default: one thread per device in this process) or mpi\n"
    "                       (one device per MPI rank; chosen automatically under mpirun)\n"
    "  --devices-per-rank K with mpi: run K devices (threads) in each rank\n"
    "  --input NAME=F.npy   the global value of entry parameter NAME (others random)\n"
    "  --seed S             seed of the random inputs (default 0)\n"
    "  --timeout SEC        how long a collective waits for the other devices (default 60)\n"
    "  --max-memory BYTES   refuse, before allocating anything, a run whose devices in this\n"
    "                       process (and, with --verify, the reference) would need more at\n"
    "                       their peak (K, M, G, T suffixes; default: this machine's memory)\n"
    "  --output-dir DIR     where the outputs go\n"
    "  --save-program FILE  also write the partitioned program (HLO text) to FILE\n"
    "  --stats              print what the partitioned program costs a device (as partition\n"
    "                       --stats does) to stderr, and the work its devices shared\n"
    "  --share-work         the device threads of this process compute a dot or convolution\n"
    "                       once for all of them whose operands are equal bit for bit (the\n"
    "                       replicas of a sharding), the others taking a copy of the result;\n"
    "                       the default when there are more device threads than cores\n"
    "  --no-share-work      every device computes everything itself\n"
    "  --strict             an instruction computed on more than its sharding gives a device is\n"
    "                       an error, not a warning\n"
    "  --windowed-einsum-threshold-mib M  dots that all-gather an operand of at least M MiB\n"
    "                       per device run as loops of partial dots and collective-permutes\n"
    "                       (M is 256 unless given, XLA's default)\n"
    "  --no-windowed-einsum  never those loops\n"
    "  --bidirectional-windowed-einsum  those loops pass shards both ways round the ring\n"
    "  --no-reduce-scatter  a partial sum wanted split is all-reduced and then sliced, as\n"
    "                       XLA's partitioner writes it (the default, --reduce-scatter, is\n"
    "                       one reduce-scatter, as XLA's ReduceScatterCreator makes of them)\n"
    "  --fill-elided        give constants whose values were elided ({...}) seeded random values\n"
    "                       before partitioning (the reference and the program share them)\n"
    "  --spmd               FILE is already partitioned: run it as it is on every device, each\n"
    "                       with the same inputs, outputs in DIR/dev<d>/out<i>.npy\n"
    "  --num-replicas R     with --spmd: the N devices are R replicas of N/R partitions (the\n"
    "                       module's replica_count; a per-rank program in replica mode, as\n"
    "                       PyTorch/XLA dumps them, records none)\n"
    "%s"
    "\n"
    "A device that fails stops the run with a message naming the device and the instruction;\n"
    "a collective that some device never reaches times out naming the missing devices.\n"
    "Examples:\n"
    "  gspmd run examples/mlp.hlo --num-partitions 4 --mesh data=2,model=2 \\\n"
    "      --shard x=data,None --shard w1=None,model --verify\n"
    "  gspmd run --spmd tests/runtime/all_reduce_sum.hlo --num-partitions 4 --output-dir /tmp/o\n"
    "  mpirun -np 4 gspmd run model.hlo --num-partitions 4 --verify\n";

/* Everything one command line asks for. */
typedef struct run_args {
    const char *file;         /* the module */
    const char *out_dir;      /* --output-dir, or NULL */
    const char *backend_name; /* --backend, or NULL */
    const char *save;         /* --save-program, or NULL */
    bool spmd;                /* --spmd */
    long num_replicas;        /* --num-replicas R (0: the module's replica_count) */
    bool propagate;           /* not --no-propagate */
    gs_propagation_algorithm alg; /* --algorithm */
    bool verify;              /* --verify */
    bool stats;               /* --stats */
    bool fill_elided;         /* --fill-elided */
    bool strict;              /* --strict */
    gs_cli_auto au;           /* --auto and its options */
    int share_work;           /* --share-work 1, --no-share-work 0, else -1 (the default) */
    long n_devices;           /* --num-partitions (0: what the module declares) */
    long per_rank;            /* --devices-per-rank (MPI) */
    uint64_t seed;            /* --seed */
    double timeout;           /* --timeout */
    int64_t max_memory;       /* --max-memory */
    gs_interp_inputs inputs;  /* --input */
    gs_cli_shardings sh;      /* --mesh / --shard */
    gs_partition_options win; /* --windowed-einsum-threshold-mib */
    long steps;               /* --steps K (0: not given; one step) */
    const char *trace;        /* --trace FILE.json, or NULL */
    double tokens_per_step;   /* --tokens-per-step N (0: not given) */
} run_args;

static int write_dev_outputs(const char *dir, gs_value *const *all, int n, gs_diags *d) {
    for (int dev = 0; dev < n; dev++) {
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/dev%d", dir, dev);
        if (gs_cli_mkdirs(sub) != 0) {
            fprintf(stderr, "error: cannot create directory '%s': %s\n", sub, strerror(errno));
            return 1;
        }
        gs_value **leaves;
        int nl;
        if (gs_value_leaves(all[dev], &leaves, &nl) != GS_OK) return 1;
        for (int i = 0; i < nl; i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/out%d.npy", sub, i);
            if (gs_npy_write(path, leaves[i], d) != GS_OK) {
                free(leaves);
                return 1;
            }
        }
        free(leaves);
    }
    return 0;
}

static int write_outputs(const char *dir, gs_value *v, gs_diags *d) {
    if (gs_cli_mkdirs(dir) != 0) {
        fprintf(stderr, "error: cannot create directory '%s': %s\n", dir, strerror(errno));
        return 1;
    }
    gs_value **leaves;
    int nl;
    if (gs_value_leaves(v, &leaves, &nl) != GS_OK) return 1;
    int rc = 0;
    for (int i = 0; i < nl && rc == 0; i++) {
        char path[4200];
        if (leaves[i]->devices > 0) { /* a manual output: one value per device */
            for (int k = 0; k < leaves[i]->n_tuple && rc == 0; k++) {
                snprintf(path, sizeof path, "%s/out%d.dev%d.npy", dir, i, k);
                if (gs_npy_write(path, leaves[i]->tuple[k], d) != GS_OK) rc = 1;
            }
            continue;
        }
        snprintf(path, sizeof path, "%s/out%d.npy", dir, i);
        if (gs_npy_write(path, leaves[i], d) != GS_OK) rc = 1;
    }
    free(leaves);
    return rc;
}

/* Prints one line per output of a verification (and where the worst element is when it
 * fails); true when all match. */
static bool print_checks(const gs_value *got, const gs_leaf_check *c, int n) {
    gs_value **g = NULL;
    int ng = 0;
    if (gs_value_leaves((gs_value *)got, &g, &ng) != GS_OK || ng != n) {
        free(g);
        printf("verify: %d outputs, the reference has %d\n", ng, n);
        return false;
    }
    bool ok = true;
    for (int i = 0; i < n; i++) {
        if (g[i]->type == GS_TOKEN) continue;
        char shape[160];
        gs_value_shape_str(g[i], shape, sizeof shape);
        const gs_value *gv = g[i]->devices > 0 && g[i]->n_tuple > 0 ? g[i]->tuple[0] : g[i];
        ok = ok && c[i].ok;
        const char *verdict = c[i].ok ? "ok" : "MISMATCH";
        if (!c[i].shape_ok) {
            printf("out%d: the partitioned program gave %s, the reference another shape: "
                   "MISMATCH\n", i, shape);
            continue;
        }
        if (c[i].exact) {
            printf("out%d: %s  %.0f element%s differ%s  %s\n", i, shape, c[i].error,
                   c[i].error == 1 ? "" : "s", c[i].error == 1 ? "s" : "", verdict);
        } else if (gs_type_is_complex(gv->type)) {
            printf("out%d: %s  max error %.3g (limit %g)  %s\n", i, shape, c[i].error,
                   c[i].limit, verdict);
        } else {
            printf("out%d: %s  max error %.3g rounding bounds (limit %g)  %s\n", i, shape,
                   c[i].error, c[i].limit, verdict);
        }
        if (!c[i].ok && c[i].worst >= 0 && !c[i].exact && !gs_type_is_complex(gv->type)) {
            char idx[256];
            int64_t rest = c[i].worst;
            int64_t at[GS_MAX_RANK];
            for (int k = gv->rank - 1; k >= 0; k--) {
                at[k] = gv->dims[k] ? rest % gv->dims[k] : 0;
                rest = gv->dims[k] ? rest / gv->dims[k] : 0;
            }
            int len = snprintf(idx, sizeof idx, "[");
            for (int k = 0; k < gv->rank && len < (int)sizeof idx - 24; k++)
                len += snprintf(idx + len, sizeof idx - (size_t)len, "%s%lld", k ? "," : "",
                                (long long)at[k]);
            snprintf(idx + len, sizeof idx - (size_t)len, "]");
            if (c[i].device >= 0) printf("  device %d:", c[i].device);
            printf("  worst at %s: got %.9g, the reference %.9g, rounding bound %.3g\n", idx,
                   c[i].got, c[i].want, c[i].bound);
        }
    }
    free(g);
    return ok;
}

/* --num-partitions, or the count the module declares; --num-replicas must divide it. */
static gs_status resolve_devices(run_args *a, const gs_module *m, gs_diags *d) {
    if (gs_cli_module_devices(m, a->sh.mesh, &a->n_devices, d) != GS_OK) return GS_ERR;
    if (a->num_replicas && a->n_devices && a->n_devices % a->num_replicas != 0) {
        gs_error(d, gs_span_none(), "--num-replicas %ld does not divide the %ld devices",
                 a->num_replicas, a->n_devices);
        return GS_ERR;
    }
    return GS_OK;
}

static gs_comm *make_comm(const run_args *a, bool mpi, gs_diags *d) {
    if (mpi) {
        gs_comm *comm = gs_comm_mpi_new((int)a->per_rank, a->timeout, d);
        if (!comm && gs_mpi_world_size() > 1) {
            /* The other ranks would wait for this one: end the job. */
            gs_diags_render(d, stderr);
            gs_mpi_abort_job();
        }
        if (comm && a->share_work >= 0) comm->share_work = a->share_work;
        if (comm && comm->n_devices != a->n_devices) {
            long k = a->per_rank;
            gs_error(d, gs_span_none(),
                     "--num-partitions %ld, but mpirun started %d ranks of %ld device%s each (run "
                     "mpirun -np %ld)",
                     a->n_devices, comm->n_devices / (int)k, k, k == 1 ? "" : "s",
                     a->n_devices % k == 0 ? a->n_devices / k : a->n_devices);
        }
        return comm;
    }
    gs_comm *comm = gs_comm_threads_new((int)a->n_devices, a->timeout);
    if (!comm) gs_error(d, gs_span_none(), "out of memory");
    if (comm && a->share_work >= 0) comm->share_work = a->share_work;
    return comm;
}

/* --stats: what this process's device threads shared (src/runtime/share.c). */
static void print_shared(const run_args *a, const gs_comm *comm) {
    if (!a->stats || !comm) return;
    fprintf(stderr,
            "shared work: %lld dot/convolution result%s taken from another device of "
            "this process instead of computed%s\n",
            (long long)comm->work_reused, comm->work_reused == 1 ? "" : "s",
            comm->share_work ? "" : " (--no-share-work)");
}

/* Renders and clears d, then ends an MPI run the same way on every rank; returns the final exit
 * code. */
static int finish_run(gs_comm *comm, bool mpi, int rc, gs_diags *d) {
    gs_diags_render(d, stderr);
    gs_diags_clear(d);
    if (!mpi || !comm) return rc;
    bool all_ok;
    if (!gs_mpi_agree(comm, rc == 0, &all_ok)) {
        fprintf(stderr, "error: device %d: another device never finished the run\n",
                comm->first_device);
        gs_mpi_exit_now();
    }
    if (rc == 0 && !all_ok) {
        fprintf(stderr, "error: device %d: the run failed on another device\n", comm->first_device);
        rc = 1;
    }
    return rc;
}

/* ------------------------------------------------------------------ --spmd */

/* Frees each local device's copies of the n_args arguments (dev_args may be NULL). */
static void free_dev_args(const gs_comm *comm, gs_value ***dev_args, int n_args) {
    for (int k = 0; comm && dev_args && k < comm->local_devices; k++) {
        for (int i = 0; dev_args[k] && i < n_args; i++) gs_value_free(dev_args[k][i]);
        free(dev_args[k]);
    }
    free(dev_args);
}

/* Frees the values of a run: the per-device arguments, the global arguments, this process's
 * results and the gathered results (any may be NULL). */
static void free_run_values(const gs_comm *comm, gs_value ***dev_args, gs_value **args,
                            int n_args, gs_value **results, gs_value **all, int n) {
    free_dev_args(comm, dev_args, n_args);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    for (int k = 0; comm && results && k < comm->local_devices; k++) gs_value_free(results[k]);
    free(results);
    for (int k = 0; all && k < n; k++) gs_value_free(all[k]);
    free(all);
}

/* The memory a run needs in this process, against --max-memory, before anything is allocated:
 * each local device's peak of program p, the global arguments, and with --verify the
 * reference's run of m. */
static int check_memory(const run_args *a, const gs_module *m, const gs_module *p, bool mpi) {
    gs_cost cm, cp;
    gs_cost_module(p, &cp);
    double need = (double)(mpi ? a->per_rank : a->n_devices) * (double)cp.run_peak_bytes;
    if (m) {
        gs_cost_module(m, &cm);
        need += (double)cm.param_bytes + (a->verify ? (double)cm.run_peak_bytes : 0);
    }
    char what[160];
    snprintf(what, sizeof what, "running this program on %ld device%s%s",
             mpi ? a->per_rank : a->n_devices, (mpi ? a->per_rank : a->n_devices) == 1 ? "" : "s",
             mpi ? " per rank" : " in one process");
    return gs_cli_check_memory(a->file, what, need, a->max_memory);
}

/* Each local device's own copies of the n_args arguments (values are reference counted per
 * thread); NULL after an error in d. Free with free_run_values. */
static gs_value ***copy_dev_args(const gs_comm *comm, gs_value **args, int n_args, gs_diags *d) {
    gs_value ***dev_args = calloc((size_t)comm->local_devices, sizeof *dev_args);
    for (int k = 0; dev_args && k < comm->local_devices; k++) {
        dev_args[k] = calloc((size_t)(n_args ? n_args : 1), sizeof **dev_args);
        for (int i = 0; dev_args[k] && i < n_args; i++) dev_args[k][i] = gs_value_copy(args[i]);
    }
    bool complete = dev_args != NULL;
    for (int k = 0; complete && k < comm->local_devices; k++) {
        complete = dev_args[k] != NULL;
        for (int i = 0; complete && i < n_args; i++) complete = dev_args[k][i] != NULL;
    }
    if (!complete) {
        free_dev_args(comm, dev_args, n_args);
        gs_error(d, gs_span_none(), "out of memory");
        return NULL;
    }
    return dev_args;
}

/* Checks that m, an SPMD program, runs on a's devices (and --num-replicas against its
 * replica_count, which it then sets). */
static gs_status check_spmd(const run_args *a, gs_module *m, gs_diags *d) {
    if (a->num_replicas) {
        if (m->replica_count > 1 && m->replica_count != a->num_replicas) {
            gs_error(d, gs_span_none(),
                     "--num-replicas %ld, but the module says replica_count=%lld", a->num_replicas,
                     (long long)m->replica_count);
            return GS_ERR;
        }
        m->replica_count = a->num_replicas;
    }
    gs_compile_options co;
    gs_compile_options_init(&co, a->n_devices);
    co.spmd_input = true;
    co.runnable = true;
    gs_compiled checked;
    return gs_compile(m, &co, &checked, d);
}

static int run_spmd(const run_args *given, bool mpi) {
    run_args resolved = *given;
    const run_args *a = &resolved;
    gs_source *src;
    gs_module *m = gs_cli_load_module(a->file, &src);
    if (!m) return 1;
    gs_diags d = {0};
    gs_comm *comm = NULL;
    gs_value **args = NULL, ***dev_args = NULL, **results = NULL, **all = NULL;
    int n_args = 0, rc = 1;
    if (resolve_devices(&resolved, m, &d) != GS_OK || check_spmd(a, m, &d) != GS_OK || check_memory(a, NULL, m, mpi) != 0) goto finish;
    if (!(comm = make_comm(a, mpi, &d)) || d.n_errors) goto finish;
    if (!mpi || gs_mpi_rank() == 0) gs_cli_note_random(stderr, m, &a->inputs, a->seed, 0);
    if (gs_interp_make_args(m, &a->inputs, a->seed, &args, &n_args, &d) != GS_OK) goto finish;
    if (!(dev_args = copy_dev_args(comm, args, n_args, &d))) goto finish;
    if (gs_run_spmd(m, comm, (gs_value **const *)dev_args, &results, a->seed, &d) != GS_OK)
        goto finish;
    print_shared(a, comm);
    if (gs_gather_results(comm, m, results, &all, &d) != GS_OK) goto finish;
    rc = 0;
finish:
    rc = finish_run(comm, mpi, rc, &d);
    if (rc == 0 && all) {
        rc = write_dev_outputs(a->out_dir, all, (int)a->n_devices, &d);
        gs_diags_render(&d, stderr);
        if (rc == 0)
            printf("ran %s on %ld devices (%s backend); outputs in %s/dev*/\n", a->file,
                   a->n_devices, mpi ? "mpi" : "threads", a->out_dir);
    }
    gs_diags_free(&d);
    free_run_values(comm, dev_args, args, n_args, results, all, (int)a->n_devices);
    if (comm) comm->ops->free(comm);
    gs_module_free(m);
    gs_source_free(src);
    if (mpi) gs_mpi_finalize();
    return rc;
}

/* ------------------------------------------------------------------ sharded modules */

/* Propagates (unless --no-propagate) and partitions m for a's devices into *out, with the
 * --mesh / --shard requests; rank0: this process prints the warnings. */
static gs_status compile_for_run(const run_args *a, gs_module *m, bool rank0, gs_compiled *out,
                                 gs_diags *d) {
    gs_compile_options co;
    gs_compile_options_init(&co, a->n_devices);
    co.no_propagate = !a->propagate;
    co.algorithm = a->alg;
    co.partition = a->win;
    co.partition.no_warnings = !rank0;
    co.partition.strict = a->strict;
    co.runnable = true;
    co.fill_elided = a->fill_elided;
    co.seed = a->seed;
    if (a->au.on) { /* the shardings autoshard chooses for this machine */
        gs_machine mc;
        gs_machine_builtin("this-cpu", &mc);
        if (gs_cli_auto_shardings(m, &a->sh, &a->au, &mc, &co, d) != GS_OK) return GS_ERR;
        return gs_compile(m, &co, out, d);
    }
    gs_mesh mesh;
    if (gs_cli_sharding_requests(&a->sh, &m->arena, &mesh, &co) != 0) return GS_ERR;
    return gs_compile(m, &co, out, d);
}

/* --save-program FILE: program p as HLO text; an error in d when it cannot be written. */
static gs_status save_program(const char *path, const gs_module *p, gs_diags *d) {
    char *text = gs_module_to_string(p);
    FILE *f = text ? fopen(path, "w") : NULL;
    bool ok = f && fputs(text, f) >= 0 && fflush(f) == 0;
    int err = errno;
    if (f && fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    const char *why = text ? strerror(err) : "out of memory";
    free(text);
    if (ok) return GS_OK;
    gs_error(d, gs_span_none(), "cannot write '%s': %s", path, why);
    return GS_ERR;
}

/* --verify: runs the reference on the same arguments and compares with global, printing a
 * line per output and the verdict; 0 when everything matches, else 1. */
static int verify_run(const run_args *a, const gs_module *m, gs_value **args, int n_args,
                      gs_value *global, gs_diags *d) {
    gs_leaf_check *checks = NULL;
    int n_checks = 0, rc = 0;
    bool all_ok = false;
    if (gs_verify_outputs(m, args, n_args, a->seed, (int)a->n_devices, global, &checks, &n_checks,
                          &all_ok, d) != GS_OK) {
        rc = 1;
    } else if (!print_checks(global, checks, n_checks) || !all_ok) {
        printf("verify: %s on %lld devices does NOT match the reference\n", a->file,
               (long long)a->n_devices);
        rc = 1;
    } else {
        printf("verify: %s on %lld devices matches the reference\n", a->file,
               (long long)a->n_devices);
    }
    free(checks);
    return rc;
}

/* The progress line of a long --steps run on a terminal: step k of K, the time so far, and
 * about how long the rest takes at the mean step time; shown once 2 s have passed. */
typedef struct progress_line {
    double elapsed;
    bool shown;
} progress_line;

static void show_progress(void *ctx, int k, int steps, const double *step_s) {
    progress_line *pl = ctx;
    pl->elapsed += step_s[k];
    if (pl->elapsed < 2 && !pl->shown) return;
    double left = pl->elapsed / (k + 1) * (steps - k - 1);
    fprintf(stderr, "\rstep %d of %d, %.1f s, about %.0f s left   ", k + 1, steps, pl->elapsed,
            left);
    fflush(stderr);
    pl->shown = true;
}

/* --trace: this process's file (under MPI with several ranks, rank r's is FILE.rank<r>),
 * checked writable before anything runs, and the recorder on comm. */
static gs_status open_trace(const run_args *a, bool mpi, gs_comm *comm, char *path, size_t cap,
                            gs_diags *d) {
    int ranks = mpi ? gs_mpi_world_size() : 1;
    if (ranks > 1) snprintf(path, cap, "%s.rank%d", a->trace, gs_mpi_rank());
    else snprintf(path, cap, "%s", a->trace);
    FILE *f = fopen(path, "w");
    if (!f)
        return gs_error(d, gs_span_none(), "cannot write the trace '%s': %s", path,
                        strerror(errno));
    fclose(f);
    if (!(comm->trace = gs_trace_new(comm->local_devices, comm->first_device)))
        return gs_error(d, gs_span_none(), "out of memory");
    return GS_OK;
}

/* --steps: each step's time (the first apart: caches, page faults), throughput, and the
 * achieved FLOP/s per device against the this-cpu profile and gspmd cost's prediction. */
static void print_steps(const run_args *a, const gs_module *p, const double *step_s, int steps) {
    double total = 0, best = steps > 1 ? step_s[1] : step_s[0]; /* the first step apart */
    for (int k = 1; k < steps; k++) {
        total += step_s[k];
        if (step_s[k] < best) best = step_s[k];
    }
    double mean = steps > 1 ? total / (steps - 1) : step_s[0];
    fprintf(stderr, "steps: %d; first %.4g s", steps, step_s[0]);
    if (steps > 1) fprintf(stderr, ", then %.4g s per step (best %.4g s)", mean, best);
    fprintf(stderr, "\n");
    if (a->tokens_per_step > 0)
        fprintf(stderr, "  throughput: %.4g tokens/s (%.4g tokens per step)\n",
                a->tokens_per_step / mean, a->tokens_per_step);
    gs_cost c;
    gs_cost_module(p, &c);
    gs_machine mc;
    gs_step_cost pred;
    gs_diags quiet = {0};
    if (!gs_machine_builtin("this-cpu", &mc)) return;
    bool predicted = gs_cost_step(p, &mc, &pred, &quiet) == GS_OK;
    gs_diags_free(&quiet);
    if (c.flops > 0)
        fprintf(stderr, "  per device: %.4g matmul FLOP/s, %.1f%% of the this-cpu profile's "
                        "%.4g\n",
                c.flops / mean, 100 * c.flops / mean / mc.flops_f32, mc.flops_f32);
    if (predicted)
        fprintf(stderr, "  gspmd cost predicts %.4g s per step on this-cpu (%.2fx the measured)\n",
                pred.step_s, pred.step_s / mean);
}

/* --verify --steps K: the reference's arguments for the last step, stepped K - 1 times from
 * *args by the module's input_output_alias (*args replaced). */
static gs_status reference_steps(const gs_module *m, gs_value ***args, int n_args,
                                 uint64_t seed, int steps, int64_t n_devices, gs_diags *d) {
    /* as gs_verify_outputs evaluates the reference (manual collectives per device bundle) */
    gs_collectives manual = {NULL, (void *)m, gs_collective_execute_bundle, NULL};
    gs_interp_env env = {0, 0, 1, &manual, seed, NULL, NULL, n_devices, NULL};
    for (int k = 0; k + 1 < steps; k++) {
        gs_value *result = NULL, **next = malloc(sizeof *next * (size_t)(n_args ? n_args : 1));
        if (!next) return gs_error(d, gs_span_none(), "out of memory");
        gs_status st = gs_interp_eval(m, &env, *args, n_args, &result, d);
        if (st == GS_OK) st = gs_step_arguments(m, *args, n_args, result, next, d);
        gs_value_free(result);
        if (st != GS_OK) {
            free(next);
            return st;
        }
        for (int i = 0; i < n_args; i++) gs_value_free((*args)[i]);
        free(*args);
        *args = next;
    }
    return GS_OK;
}

/* Seconds on a monotonic clock. */
static double wall_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* After a successful run: the outputs into --output-dir (or, without it and --verify, the line
 * saying it ran). */
static int report_sharded(const run_args *a, bool mpi, gs_value *global, gs_diags *d) {
    const char *backend = mpi ? "mpi" : "threads";
    if (!a->out_dir) {
        if (!a->verify)
            printf("ran %s on %lld devices (%s backend)\n", a->file, (long long)a->n_devices,
                   backend);
        return 0;
    }
    int rc = write_outputs(a->out_dir, global, d);
    gs_diags_render(d, stderr);
    if (rc == 0)
        printf("ran %s on %lld devices (%s backend); outputs in %s/\n", a->file,
               (long long)a->n_devices, backend, a->out_dir);
    return rc;
}

static int run_sharded(const run_args *given, bool mpi) {
    run_args resolved = *given;
    const run_args *a = &resolved;
    gs_source *src;
    gs_module *m = gs_cli_load_module(a->file, &src);
    if (!m) return 1;
    gs_diags d = {0};
    gs_comm *comm = NULL;
    gs_compiled compiled = {0};
    gs_value **args = NULL, *global = NULL;
    gs_arg_source *source = NULL;
    int n_args = 0, rc = 1;
    bool rank0 = !mpi || gs_mpi_rank() == 0;
    if (resolve_devices(&resolved, m, &d) != GS_OK ||
        compile_for_run(a, m, rank0, &compiled, &d) != GS_OK)
        goto finish;
    const gs_module *p = compiled.program;
    if (a->stats && rank0) gs_cli_print_stats(stderr, m, p, &compiled.stats);
    if (check_memory(a, m, p, mpi) != 0) goto finish;
    if (a->save && rank0 && save_program(a->save, p, &d) != GS_OK) goto finish;
    if (!(comm = make_comm(a, mpi, &d)) || d.n_errors) goto finish;
    char trace_path[4096];
    if (a->trace && open_trace(a, mpi, comm, trace_path, sizeof trace_path, &d) != GS_OK)
        goto finish;
    if (rank0) gs_cli_note_random(stderr, m, &a->inputs, a->seed, compiled.n_filled);
    /* Each device makes its own arguments; the reference's are made whole (--verify only). */
    double verify_s = 0, t0 = wall_s();
    if (gs_arg_source_new(m, &a->inputs, a->seed, a->n_devices, &source, &d) != GS_OK ||
        (a->verify && gs_interp_make_sharded_args(m, &a->inputs, a->seed, a->n_devices, &args,
                                                  &n_args, &d) != GS_OK))
        goto finish;
    if (a->verify) verify_s = wall_s() - t0; /* the global arguments are the reference's */
    int steps = a->steps > 0 ? (int)a->steps : 1;
    double *step_s = calloc((size_t)steps, sizeof *step_s);
    if (!step_s) {
        gs_error(&d, gs_span_none(), "out of memory");
        goto finish;
    }
    progress_line line = {0};
    gs_step_progress progress = {show_progress, &line};
    if (gs_run_sharded_steps(m, p, comm, source, a->seed, steps, step_s,
                             rank0 && steps > 1 && isatty(2) ? &progress : NULL, &global,
                             &d) != GS_OK) {
        if (line.shown) fputc('\n', stderr);
        free(step_s);
        goto finish;
    }
    if (line.shown) fputc('\n', stderr);
    if (rank0) print_shared(a, comm);
    if (rank0 && a->steps) print_steps(a, p, step_s, steps);
    if (comm->trace && gs_trace_write(comm->trace, trace_path, &d) != GS_OK) {
        free(step_s);
        goto finish;
    }
    if (comm->trace && rank0)
        fprintf(stderr, "trace: %s (open it in ui.perfetto.dev or chrome://tracing)\n",
                trace_path);
    free(step_s);
    t0 = wall_s();
    if (global && a->verify && steps > 1 &&
        reference_steps(m, &args, n_args, a->seed, steps, a->n_devices, &d) != GS_OK)
        goto finish;
    rc = global && a->verify ? verify_run(a, m, args, n_args, global, &d) : 0;
    if (global && a->verify && rank0)
        fprintf(stderr,
                "verify: %.3g s beyond the run (the reference's global arguments %.3g s, its "
                "evaluation and the comparison %.3g s)\n",
                verify_s + wall_s() - t0, verify_s, wall_s() - t0);
finish:
    rc = finish_run(comm, mpi, rc, &d);
    if (rc == 0 && global) rc = report_sharded(a, mpi, global, &d);
    gs_diags_free(&d);
    free_run_values(comm, NULL, args, n_args, NULL, NULL, (int)a->n_devices);
    gs_arg_source_free(source);
    gs_value_free(global);
    if (comm) {
        gs_trace_free(comm->trace);
        comm->ops->free(comm);
    }
    gs_compiled_free(&compiled);
    gs_module_free(m);
    gs_source_free(src);
    if (mpi) gs_mpi_finalize();
    return rc;
}

/* Flags without a value: true when arg is one (recorded in *a). */
static bool run_flag(const char *arg, run_args *a) {
    if (gs_cli_propagate_option(arg, &a->propagate)) return true;
    if (strcmp(arg, "--spmd") == 0) a->spmd = true;
    else if (strcmp(arg, "--verify") == 0) a->verify = true;
    else if (strcmp(arg, "--stats") == 0) a->stats = true;
    else if (strcmp(arg, "--fill-elided") == 0) a->fill_elided = true;
    else if (strcmp(arg, "--strict") == 0) a->strict = true;
    else if (strcmp(arg, "--share-work") == 0) a->share_work = 1;
    else if (strcmp(arg, "--no-share-work") == 0) a->share_work = 0;
    else return false;
    return true;
}

/* The numeric options but --num-partitions: 1 when argv[*i] is one (recorded in *a), 0 when
 * not, -1 after a message for a bad value (the caller exits 2). */
static int run_number_option(int argc, char **argv, int *i, run_args *a) {
    const char *v;
    char *end;
    int k;
    if ((k = gs_cli_count_option(argc, argv, i, "run", "--num-replicas", "replicas", 65536,
                                 &a->num_replicas)) != 0 ||
        (k = gs_cli_memory_option(argc, argv, i, "run", &a->max_memory)) != 0 ||
        (k = gs_cli_auto_option(argc, argv, i, "run", RUN_USAGE, &a->au)) != 0 ||
        (k = gs_cli_seed_option(argc, argv, i, "run", RUN_USAGE, &a->seed)) != 0)
        return k;
    if (gs_cli_opt_value(argc, argv, i, "--steps", &v)) {
        a->steps = strtol(v, &end, 10);
        if (*end || end == v || a->steps < 1 || a->steps > 1000000) {
            gs_cli_usage_error("run", RUN_USAGE, "--steps wants a number in 1..1000000, not '%s'",
                               v);
            return -1;
        }
    } else if (gs_cli_opt_value(argc, argv, i, "--tokens-per-step", &v)) {
        a->tokens_per_step = strtod(v, &end);
        if (*end || end == v || !(a->tokens_per_step > 0) || a->tokens_per_step > 1e18) {
            gs_cli_usage_error("run", RUN_USAGE,
                               "--tokens-per-step wants a number > 0, not '%s'", v);
            return -1;
        }
    } else if (gs_cli_opt_value(argc, argv, i, "--devices-per-rank", &v)) {
        a->per_rank = strtol(v, &end, 10);
        if (*end || a->per_rank < 1 || a->per_rank > 1024) {
            gs_cli_usage_error("run", RUN_USAGE,
                               "--devices-per-rank wants a number in 1..1024, not '%s'", v);
            return -1;
        }
    } else if (gs_cli_opt_value(argc, argv, i, "--timeout", &v)) {
        a->timeout = strtod(v, &end);
        if (*end || a->timeout <= 0) {
            gs_cli_usage_error("run", RUN_USAGE,
                               "--timeout wants a positive number of seconds, not '%s'", v);
            return -1;
        }
    } else {
        return 0;
    }
    return 1;
}

/* The options naming things: --input, --backend, --output-dir, --save-program.
 * GS_CLI_CONTINUE when argv[*i] is one of them, 0 when not; otherwise the exit code after a
 * message (2 bad usage, 1 out of memory). */
static int run_name_option(int argc, char **argv, int *i, run_args *a) {
    const char *v;
    int rc;
    if (gs_cli_opt_value(argc, argv, i, "--input", &v)) {
        if ((rc = gs_cli_input_option("run", v, &a->inputs)) != 0) return rc;
    } else if (gs_cli_opt_value(argc, argv, i, "--backend", &v)) {
        if (strcmp(v, "threads") != 0 && strcmp(v, "mpi") != 0)
            return gs_cli_usage_error("run", RUN_USAGE, "--backend is threads or mpi, not '%s'", v);
        a->backend_name = v;
    } else if (gs_cli_opt_value(argc, argv, i, "--output-dir", &v)) {
        a->out_dir = v;
    } else if (gs_cli_opt_value(argc, argv, i, "--save-program", &v)) {
        a->save = v;
    } else if (gs_cli_opt_value(argc, argv, i, "--trace", &v)) {
        a->trace = v;
    } else {
        return 0;
    }
    return GS_CLI_CONTINUE;
}

/* The combinations of options the command line may not ask for. */
static int run_check_args(const run_args *a) {
    int rc = gs_cli_need_file_devices("run", RUN_USAGE, a->file);
    if (rc != GS_CLI_CONTINUE) return rc;
    if (a->spmd && !a->out_dir)
        return gs_cli_usage_error("run", RUN_USAGE, "missing --output-dir DIR");
    if (a->num_replicas && !a->spmd)
        return gs_cli_usage_error("run", RUN_USAGE,
                                  "--num-replicas is for a per-replica program (--spmd)");
    if (a->num_replicas && a->n_devices && a->n_devices % a->num_replicas != 0)
        return gs_cli_usage_error("run", RUN_USAGE,
                                  "--num-replicas must divide the devices (--num-partitions)");
    if (a->tokens_per_step > 0 && !a->steps)
        return gs_cli_usage_error("run", RUN_USAGE, "--tokens-per-step is an option of --steps");
    if (a->spmd && (a->steps || a->trace))
        return gs_cli_usage_error("run", RUN_USAGE,
                                  "--steps and --trace need a module (drop --spmd)");
    if (a->spmd && (a->verify || a->sh.n > 0 || a->save || a->strict || a->fill_elided))
        return gs_cli_usage_error("run", RUN_USAGE,
                                  "--verify, --shard, --save-program, --strict and "
                                  "--fill-elided need a module to partition (drop --spmd)");
    return GS_CLI_CONTINUE;
}

/* The argument loop: GS_CLI_CONTINUE, or the exit code (0 after --help, 1 out of memory, 2 bad
 * usage). */
static int run_parse_args(int argc, char **argv, run_args *a) {
    for (int i = 1; i < argc; i++) {
        int k;
        if (gs_cli_is_help(argv[i])) return gs_cli_print_help(RUN_USAGE, RUN_HELP);
        if (run_flag(argv[i], a)) continue;
        if ((k = run_number_option(argc, argv, &i, a)) != 0 ||
            (k = gs_cli_algorithm_option(argc, argv, &i, "run", RUN_USAGE, &a->alg)) != 0 ||
            (k = gs_cli_partition_option(argc, argv, &i, "run", 65536, &a->n_devices, &a->win,
                                         &a->sh)) != 0) {
            if (k < 0) return 2;
        } else if ((k = run_name_option(argc, argv, &i, a)) != 0) {
            if (k != GS_CLI_CONTINUE) return k;
        } else if ((k = gs_cli_operand("run", RUN_USAGE, argv[i], "FILE", &a->file)) !=
                   GS_CLI_CONTINUE) {
            return k;
        }
    }
    return run_check_args(a);
}

int gs_cli_run(int argc, char **argv) {
    run_args a = {.propagate = true, .timeout = 60, .per_rank = 1, .share_work = -1};
    a.max_memory = gs_cli_machine_memory();
    int rc = run_parse_args(argc, argv, &a);
    if (rc == GS_CLI_CONTINUE) rc = gs_cli_auto_check(&a.au, "run", RUN_USAGE);
    if (rc == GS_CLI_CONTINUE && a.au.on && a.spmd)
        rc = gs_cli_usage_error("run", RUN_USAGE, "--auto needs a module to shard (drop --spmd)");
    if (rc == GS_CLI_CONTINUE && a.au.on && !a.n_devices && a.sh.mesh) {
        gs_arena ar; /* the devices default to the mesh's */
        gs_arena_init(&ar);
        gs_mesh mesh;
        if (gs_cli_parse_mesh(&ar, a.sh.mesh, &mesh) != 0) rc = 2;
        else a.n_devices = (long)mesh.n_devices;
        gs_arena_free(&ar);
    }
    if (rc == GS_CLI_CONTINUE) {
        bool mpi = a.backend_name ? strcmp(a.backend_name, "mpi") == 0
                                  : (gs_mpi_available() && gs_mpi_launched());
        rc = a.spmd ? run_spmd(&a, mpi) : run_sharded(&a, mpi);
    }
    gs_interp_inputs_free(&a.inputs);
    gs_cli_shardings_free(&a.sh);
    return rc;
}
