/*
 * cmd_run.c — `gspmd run`: runs a program on N devices.
 *
 *   gspmd run --spmd FILE --num-partitions N [--backend threads|mpi] [--input NAME=FILE.npy]...
 *             [--seed S] [--timeout SEC] --output-dir DIR
 *
 * --spmd runs an already partitioned program as it is on every device: each device gets the
 * same inputs and writes DIR/dev<d>/out<i>.npy. Under mpirun the MPI backend makes each rank
 * one device (chosen automatically when mpirun launched us); outputs are gathered to rank 0,
 * which writes them.
 */
#include "cli.h"
#include "gspmd/npy.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *RUN_USAGE =
    "gspmd run --spmd FILE --num-partitions N [--backend threads|mpi] [--devices-per-rank K]\n"
    "          [--input NAME=FILE.npy]... [--seed S] [--timeout SEC] --output-dir DIR";

static const char *RUN_HELP =
    "Runs an SPMD program (one program, every device with its own partition id, talking through\n"
    "collectives) on N devices and writes each device's outputs as DIR/dev<d>/out<i>.npy.\n"
    "\n"
    "  --spmd               FILE is already partitioned: run it as it is on every device\n"
    "  --num-partitions N   the number of devices (under mpirun: ranks x devices per rank)\n"
    "  --backend B          threads (default: one thread per device in this process) or mpi\n"
    "                       (one device per MPI rank; chosen automatically under mpirun)\n"
    "  --devices-per-rank K with mpi: run K devices (threads) in each rank\n"
    "  --input NAME=F.npy   the value of entry parameter NAME on every device (others random)\n"
    "  --seed S             seed of the random inputs (default 0)\n"
    "  --timeout SEC        how long a collective waits for the other devices (default 60)\n"
    "  --output-dir DIR     where the outputs go\n"
    "\n"
    "A device that fails stops the run with a message naming the device and the instruction;\n"
    "a collective that some device never reaches times out naming the missing devices.\n"
    "Example:\n"
    "  gspmd run --spmd tests/runtime/all_reduce_sum.hlo --num-partitions 4 --output-dir /tmp/o\n"
    "  mpirun -np 4 gspmd run --spmd prog.hlo --num-partitions 4 --output-dir /tmp/o\n";

static int run_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "gspmd run: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: %s\n", RUN_USAGE);
    return 2;
}



static int write_outputs(const char *dir, gs_value *const *all, int n, gs_diags *d) {
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

int gs_cli_run(int argc, char **argv) {
    const char *file = NULL, *out_dir = NULL, *backend_name = NULL;
    bool spmd = false;
    long n_devices = 0, per_rank = 1;
    uint64_t seed = 0;
    double timeout = 60;
    gs_interp_inputs inputs = {0};
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s\n\n%s", RUN_USAGE, RUN_HELP);
            rc = 0;
            goto done;
        } else if (strcmp(argv[i], "--spmd") == 0) {
            spmd = true;
        } else if (gs_cli_opt_value(argc, argv, &i, "--num-partitions", &v)) {
            char *end;
            n_devices = strtol(v, &end, 10);
            if (*end || n_devices < 1 || n_devices > 65536) {
                rc = run_usage("--num-partitions wants a number of devices in 1..65536, not '%s'", v);
                goto done;
            }
        } else if (gs_cli_opt_value(argc, argv, &i, "--devices-per-rank", &v)) {
            char *end;
            per_rank = strtol(v, &end, 10);
            if (*end || per_rank < 1 || per_rank > 1024) {
                rc = run_usage("--devices-per-rank wants a number in 1..1024, not '%s'", v);
                goto done;
            }
        } else if (gs_cli_opt_value(argc, argv, &i, "--backend", &v)) {
            if (strcmp(v, "threads") != 0 && strcmp(v, "mpi") != 0) {
                rc = run_usage("--backend is threads or mpi, not '%s'", v);
                goto done;
            }
            backend_name = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--output-dir", &v)) {
            out_dir = v;
        } else if (gs_cli_opt_value(argc, argv, &i, "--seed", &v)) {
            char *end;
            seed = strtoull(v, &end, 10);
            if (*end || !*v) {
                rc = run_usage("--seed wants a non-negative integer, not '%s'", v);
                goto done;
            }
        } else if (gs_cli_opt_value(argc, argv, &i, "--timeout", &v)) {
            char *end;
            timeout = strtod(v, &end);
            if (*end || timeout <= 0) {
                rc = run_usage("--timeout wants a positive number of seconds, not '%s'", v);
                goto done;
            }
        } else if (gs_cli_opt_value(argc, argv, &i, "--input", &v)) {
            if ((rc = gs_cli_input_option("run", v, &inputs)) != 0) goto done;
            rc = 2;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            rc = run_usage("unknown option '%s'", argv[i]);
            goto done;
        } else if (file) {
            rc = run_usage("more than one FILE ('%s')", argv[i]);
            goto done;
        } else {
            file = argv[i];
        }
    }
    if (!file) {
        rc = run_usage("missing FILE%s", "");
        goto done;
    }
    if (!spmd) {
        rc = run_usage("%s", "without --spmd the program must be partitioned first, and the "
                             "partitioner is not part of this build yet: pass --spmd to run FILE as "
                             "it is on every device");
        goto done;
    }
    if (n_devices < 1) {
        rc = run_usage("missing --num-partitions N%s", "");
        goto done;
    }
    if (!out_dir) {
        rc = run_usage("missing --output-dir DIR%s", "");
        goto done;
    }
    gs_backend backend = GS_BACKEND_THREADS;
    if (backend_name ? strcmp(backend_name, "mpi") == 0 : (gs_mpi_available() && gs_mpi_launched()))
        backend = GS_BACKEND_MPI;

    rc = 1;
    gs_source *src;
    gs_module *m = gs_cli_load_module(file, &src);
    if (!m) goto done;
    gs_diags d = {0};
    gs_comm *comm = NULL;
    gs_value **args = NULL, ***dev_args = NULL, **results = NULL, **all = NULL;
    int n_args = 0;
    if (gs_module_verify(m, &d) != GS_OK) goto fail;
    if (backend == GS_BACKEND_MPI) {
        comm = gs_comm_mpi_new((int)per_rank, timeout, &d);
        if (!comm) goto fail;
        if (comm->n_devices != n_devices) {
            gs_error(&d, gs_span_none(),
                     "--num-partitions %ld, but mpirun started %d ranks of %ld device%s each (run mpirun -np %ld)",
                     n_devices, comm->n_devices / (int)per_rank, per_rank, per_rank == 1 ? "" : "s",
                     n_devices % per_rank == 0 ? n_devices / per_rank : n_devices);
            goto fail;
        }
    } else {
        comm = gs_comm_threads_new((int)n_devices, timeout);
        if (!comm) {
            gs_error(&d, gs_span_none(), "out of memory");
            goto fail;
        }
    }
    if (gs_check_collectives(m, (int)n_devices, &d) != GS_OK) goto fail;
    if (gs_interp_make_args(m, &inputs, seed, &args, &n_args, &d) != GS_OK) goto fail;
    /* Each device gets its own copies: values are reference counted per thread. */
    dev_args = calloc((size_t)comm->local_devices, sizeof *dev_args);
    if (!dev_args) goto oom;
    for (int k = 0; k < comm->local_devices; k++) {
        dev_args[k] = calloc((size_t)(n_args ? n_args : 1), sizeof **dev_args);
        if (!dev_args[k]) goto oom;
        for (int i = 0; i < n_args; i++)
            if (!(dev_args[k][i] = gs_value_copy(args[i]))) goto oom;
    }
    if (gs_run_spmd(m, comm, (gs_value **const *)dev_args, &results, seed, &d) != GS_OK) goto fail;
    if (gs_gather_results(comm, m, results, &all, &d) != GS_OK) goto fail;
    rc = 0;
    goto finish;
oom:
    gs_error(&d, gs_span_none(), "out of memory");
fail:
    rc = 1;
finish:
    gs_diags_render(&d, stderr);
    gs_diags_clear(&d);
    bool mpi = backend == GS_BACKEND_MPI;
    if (mpi && comm) {
        /* Every rank ends the same way: all succeed, or all fail. */
        bool all_ok;
        if (!gs_mpi_agree(comm, rc == 0, &all_ok)) {
            fprintf(stderr, "error: device %d: another device never finished the run\n", comm->first_device);
            gs_mpi_exit_now();
        }
        if (rc == 0 && !all_ok) {
            fprintf(stderr, "error: device %d: the run failed on another device\n", comm->first_device);
            rc = 1;
        }
    }
    if (rc == 0 && all) {
        rc = write_outputs(out_dir, all, (int)n_devices, &d);
        gs_diags_render(&d, stderr);
        if (rc == 0)
            printf("ran %s on %ld devices (%s backend); outputs in %s/dev*/\n", file, n_devices,
                   mpi ? "mpi" : "threads", out_dir);
    }
    gs_diags_free(&d);
    for (int k = 0; comm && dev_args && k < comm->local_devices; k++) {
        for (int i = 0; dev_args[k] && i < n_args; i++) gs_value_free(dev_args[k][i]);
        free(dev_args[k]);
    }
    free(dev_args);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    for (int k = 0; comm && results && k < comm->local_devices; k++) gs_value_free(results[k]);
    free(results);
    for (int k = 0; all && k < n_devices; k++) gs_value_free(all[k]);
    free(all);
    if (comm) comm->ops->free(comm);
    gs_module_free(m);
    gs_source_free(src);
    if (mpi) gs_mpi_finalize();
done:
    gs_interp_inputs_free(&inputs);
    return rc;
}
