/*
 * bench_comm.c — collective bandwidth of the communicators against memcpy of the same bytes,
 * measured in the same run: all-reduce (f32 sum), all-gather, all-to-all, collective-permute
 * (a cyclic shift) and reduce-scatter at 1 MiB and 64 MiB per device.
 *
 *   build/bench/bench_comm [DEVICES...]                    threads backend (default 2 and 4)
 *   mpirun -np 4 build/bench/bench_comm --mpi              MPI backend, one device per rank
 *
 * GB/s is bytes per device divided by the time of one collective; "x memcpy" is that divided by
 * memcpy's GB/s for a buffer of the same size copied by one thread alone, and "x par" by the GB/s
 * each device gets when all devices' threads copy their buffers at the same time (the machine's
 * shared memory bandwidth, which the devices of a collective also share). Not part of
 * `make test`.
 */
#include "gspmd/runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { OP_ALL_REDUCE, OP_ALL_GATHER, OP_ALL_TO_ALL, OP_PERMUTE, OP_REDUCE_SCATTER, N_OPS };
static const char *const OP_NAMES[N_OPS] = {"all-reduce", "all-gather", "all-to-all",
                                            "collective-permute", "reduce-scatter"};

typedef struct job {
    gs_comm *comm;
    int dev;       /* global device */
    int op;
    size_t bytes;  /* per device */
    int reps;
    double secs;   /* measured time per collective */
    gs_status st;
} job;

static void *device_main(void *arg) {
    job *j = arg;
    int n = j->comm->n_devices;
    int *members = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) members[i] = i;
    gs_group g = {n, members, j->dev, 0, 1, 12345};
    size_t out_bytes = j->op == OP_ALL_GATHER ? j->bytes * (size_t)n : j->bytes;
    char *in = malloc(j->bytes), *out = malloc(out_bytes);
    memset(in, 1, j->bytes);
    memset(out, 0, out_bytes);
    gs_diags d = {0};
    int64_t nf = (int64_t)(j->bytes / 4);
    j->st = GS_OK;
    double t0 = 0;
    for (int r = -1; r < j->reps && j->st == GS_OK; r++) {
        if (r == 0) {
            j->comm->ops->barrier(j->comm, j->dev, &d);
            t0 = now();
        }
        switch (j->op) {
        case OP_ALL_REDUCE:
            j->st = j->comm->ops->all_reduce(j->comm, j->dev, &g, GS_F32, GS_RED_SUM, in, nf, &d);
            break;
        case OP_ALL_GATHER:
            j->st = j->comm->ops->all_gather(j->comm, j->dev, &g, in, (int64_t)j->bytes, out, &d);
            break;
        case OP_ALL_TO_ALL:
            j->st = j->comm->ops->all_to_all(j->comm, j->dev, &g, in, (int64_t)j->bytes / n, out, &d);
            break;
        case OP_PERMUTE:
            j->st = j->comm->ops->permute(j->comm, j->dev, (j->dev + 1) % n, (j->dev + n - 1) % n, in,
                                          out, (int64_t)j->bytes, &d);
            break;
        case OP_REDUCE_SCATTER:
            j->st = j->comm->ops->reduce_scatter(j->comm, j->dev, &g, GS_F32, GS_RED_SUM, in, nf / n, out, &d);
            break;
        }
    }
    j->secs = (now() - t0) / j->reps;
    if (j->st != GS_OK) gs_diags_render(&d, stderr);
    gs_diags_free(&d);
    free(in);
    free(out);
    free(members);
    return NULL;
}

static double memcpy_gbps(size_t bytes) {
    char *a = malloc(bytes), *b = malloc(bytes);
    memset(a, 1, bytes);
    memset(b, 0, bytes);
    int reps = bytes > (16u << 20) ? 5 : 50;
    memcpy(b, a, bytes);
    volatile char sink = 0;
    double t0 = now();
    for (int r = 0; r < reps; r++) {
        memcpy(b, a, bytes);
        sink += b[(size_t)r * 4093 % bytes]; /* the copy is used, so it is not elided */
    }
    double t = (now() - t0) / reps;
    (void)sink;
    free(a);
    free(b);
    return (double)bytes / t / 1e9;
}

typedef struct copy_job {
    size_t bytes;
    double gbps;
} copy_job;

static void *copy_main(void *arg) {
    copy_job *j = arg;
    j->gbps = memcpy_gbps(j->bytes);
    return NULL;
}

/* GB/s each of n threads gets copying `bytes` at the same time (the slowest one's). */
static double parallel_memcpy_gbps(int n, size_t bytes) {
    copy_job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    for (int i = 0; i < n; i++) {
        jobs[i].bytes = bytes;
        pthread_create(&th[i], NULL, copy_main, &jobs[i]);
    }
    double worst = 1e30;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        if (jobs[i].gbps < worst) worst = jobs[i].gbps;
    }
    free(jobs);
    free(th);
    return worst;
}

static void report(const char *backend, int n, int op, size_t bytes, double secs, double mgbps,
                   double pgbps) {
    double gbps = (double)bytes / secs / 1e9;
    printf("%-8s %3d  %-19s %6zu MiB  %8.3f ms  %7.2f GB/s  %5.2fx memcpy  %5.2fx par\n", backend,
           n, OP_NAMES[op], bytes >> 20, secs * 1e3, gbps, gbps / mgbps, gbps / pgbps);
}

int main(int argc, char **argv) {
    bool mpi = argc > 1 && strcmp(argv[1], "--mpi") == 0;
    const size_t sizes[2] = {1u << 20, 64u << 20};
    printf("backend  dev  collective            size       time        GB/s    ratio         ratio\n");
    if (mpi) {
        gs_diags d = {0};
        gs_comm *comm = gs_comm_mpi_new(1, 600, &d);
        if (!comm) {
            gs_diags_render(&d, stderr);
            return 1;
        }
        for (int s = 0; s < 2; s++) {
            double mg = memcpy_gbps(sizes[s]);
            for (int op = 0; op < N_OPS; op++) {
                job j = {comm, comm->first_device, op, sizes[s], sizes[s] > (16u << 20) ? 3 : 20, 0, GS_OK};
                device_main(&j);
                if (comm->first_device == 0) report("mpi", comm->n_devices, op, sizes[s], j.secs, mg, mg);
            }
        }
        comm->ops->free(comm);
        gs_mpi_finalize();
        return 0;
    }
    int counts[8] = {2, 4}, n_counts = 2;
    if (argc > 1) {
        n_counts = 0;
        for (int i = 1; i < argc && n_counts < 8; i++) counts[n_counts++] = atoi(argv[i]);
    }
    for (int c = 0; c < n_counts; c++) {
        int n = counts[c];
        for (int s = 0; s < 2; s++) {
            double mg = memcpy_gbps(sizes[s]), pg = parallel_memcpy_gbps(n, sizes[s]);
            for (int op = 0; op < N_OPS; op++) {
                gs_comm *comm = gs_comm_threads_new(n, 600);
                job *jobs = calloc((size_t)n, sizeof *jobs);
                pthread_t *th = calloc((size_t)n, sizeof *th);
                for (int i = 0; i < n; i++) {
                    jobs[i] = (job){comm, i, op, sizes[s], sizes[s] > (16u << 20) ? 3 : 20, 0, GS_OK};
                    pthread_create(&th[i], NULL, device_main, &jobs[i]);
                }
                double worst = 0;
                for (int i = 0; i < n; i++) {
                    pthread_join(th[i], NULL);
                    if (jobs[i].secs > worst) worst = jobs[i].secs;
                }
                report("threads", n, op, sizes[s], worst, mg, pg);
                free(jobs);
                free(th);
                comm->ops->free(comm);
            }
        }
    }
    return 0;
}
