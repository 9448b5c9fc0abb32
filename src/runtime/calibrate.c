/*
 * calibrate.c — measures this machine as a device of gspmd's threads backend, for the `this-cpu`
 * profile of the step-time model (gs_machine_calibrate in gspmd/runtime.h). It lives with the
 * runtime it measures, above the cost model whose profile it fills.
 *
 * Each figure is the best of a few runs (this is a shared machine): matmul peaks from OpenBLAS
 * sgemm/dgemm on one thread (the executor gives each device one BLAS thread when devices fill
 * the cores), the elementwise rate from a multiply-add loop in cache, memory bandwidth from
 * memcpy (read + write), the interpreter's cost per instruction from a chain of scalar adds,
 * and the link from all-reduces between 2 device threads: a 1-element one gives the latency
 * (a 2-device ring takes 2 steps), a 16 MiB one the bandwidth.
 */
#include "gspmd/interp.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double gemm_rate(bool dbl) {
    enum { N = 768 };
    void *a = calloc((size_t)N * N, dbl ? 8 : 4), *b = calloc((size_t)N * N, dbl ? 8 : 4),
         *c = calloc((size_t)N * N, dbl ? 8 : 4);
    double best = 1e30;
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)N * N; i++) {
            if (dbl) ((double *)a)[i] = ((double *)b)[i] = (double)(i % 7) * 0.25;
            else ((float *)a)[i] = ((float *)b)[i] = (float)(i % 7) * 0.25f;
        }
        for (int r = 0; r < 4; r++) {
            double t0 = now();
            if (dbl)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0, a, N, b, N,
                            0.0, c, N);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N,
                            0.0f, c, N);
            double t = now() - t0;
            if (t < best) best = t;
        }
    }
    free(a);
    free(b);
    free(c);
    return best < 1e30 ? 2.0 * N * N * N / best : 0;
}

static double vector_rate(void) {
    enum { N = 4096, REPS = 2000 };
    float *x = calloc(N, sizeof *x), *y = calloc(N, sizeof *y), *z = calloc(N, sizeof *z);
    double best = 1e30;
    if (x && y && z) {
        for (int i = 0; i < N; i++) x[i] = y[i] = z[i] = 1.0f + (float)i * 1e-6f;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            for (int k = 0; k < REPS; k++)
                for (int i = 0; i < N; i++) z[i] = x[i] * y[i] + z[i] * 0.5f;
            double t = now() - t0;
            if (t < best) best = t;
        }
    }
    volatile float sink = z ? z[N / 2] : 0;
    (void)sink;
    free(x);
    free(y);
    free(z);
    return best < 1e30 ? 3.0 * N * REPS / best : 0;
}

/* expf per second over an array in cache (the interpreter's exp, log and friends call libm). */
static double transcendental_rate(void) {
    enum { N = 4096, REPS = 200 };
    float *x = calloc(N, sizeof *x), *y = calloc(N, sizeof *y);
    double best = 1e30;
    if (x && y) {
        for (int i = 0; i < N; i++) x[i] = -4.0f + 8.0f * (float)i / N;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            for (int k = 0; k < REPS; k++)
                for (int i = 0; i < N; i++) y[i] = expf(x[i]);
            double t = now() - t0;
            if (t < best) best = t;
        }
    }
    volatile float sink = y ? y[N / 3] : 0;
    (void)sink;
    free(x);
    free(y);
    return best < 1e30 ? (double)N * REPS / best : 0;
}

static double memcpy_rate(void) {
    size_t n = (size_t)64 << 20;
    char *a = malloc(n), *b = malloc(n);
    double best = 1e30;
    if (a && b) {
        memset(a, 1, n);
        memset(b, 2, n);
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            memcpy(b, a, n);
            double t = now() - t0;
            if (t < best) best = t;
        }
    }
    free(a);
    free(b);
    return best < 1e30 ? 2.0 * (double)n / best : 0;
}

/* Seconds per instruction of the interpreter: a chain of 2000 scalar adds. */
static double op_overhead(gs_diags *d) {
    enum { OPS = 2000 };
    size_t cap = (size_t)OPS * 48 + 256;
    char *t = malloc(cap);
    if (!t) return 0;
    int n = snprintf(t, cap, "HloModule chain\nENTRY e {\n  v0 = f32[] parameter(0)\n");
    for (int i = 1; i <= OPS; i++)
        n += snprintf(t + n, cap - (size_t)n, "  v%d = f32[] add(v%d, v0)\n", i, i - 1);
    snprintf(t + n, cap - (size_t)n, "  ROOT r = f32[] negate(v%d)\n}\n", OPS);
    gs_source *src = gs_source_from_string("chain.hlo", t);
    gs_module *m = src ? gs_parse_module(src, d) : NULL;
    double best = 1e30;
    gs_value **args = NULL;
    int n_args = 0;
    if (m && gs_interp_make_args(m, NULL, 1, &args, &n_args, d) == GS_OK) {
        for (int r = 0; r < 3; r++) {
            gs_value *out = NULL;
            double t0 = now();
            gs_status st = gs_interp_eval(m, NULL, args, n_args, &out, d);
            double dt = now() - t0;
            gs_value_free(out);
            if (st != GS_OK) break;
            if (dt < best) best = dt;
        }
    }
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_module_free(m);
    gs_source_free(src);
    free(t);
    return best < 1e30 ? best / (OPS + 1) : 0;
}

/* Seconds of one all-reduce of `elems` f32 between 2 device threads (best of 3). */
static double all_reduce_time(int64_t elems, gs_diags *d) {
    char text[512];
    snprintf(text, sizeof text,
             "HloModule ar, num_partitions=2\n"
             "add { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
             "  ROOT s = f32[] add(a, b)\n}\n"
             "ENTRY e {\n  x = f32[%lld] parameter(0)\n"
             "  ROOT r = f32[%lld] all-reduce(x), replica_groups={{0,1}}, to_apply=add, "
             "channel_id=1, use_global_device_ids=true\n}\n",
             (long long)elems, (long long)elems);
    gs_source *src = gs_source_from_string("ar.hlo", text);
    gs_module *m = src ? gs_parse_module(src, d) : NULL;
    gs_comm *comm = m ? gs_comm_threads_new(2, 60) : NULL;
    double best = 1e30;
    gs_value *x0 = comm ? gs_value_new_array(GS_F32, 1, &elems) : NULL;
    gs_value *x1 = x0 ? gs_value_new_array(GS_F32, 1, &elems) : NULL;
    if (x1) {
        gs_value *a0[1] = {x0}, *a1[1] = {x1};
        gs_value **const args[2] = {a0, a1};
        for (int r = 0; r < 3; r++) {
            gs_value **res = NULL;
            double t0 = now();
            gs_status st = gs_run_spmd(m, comm, args, &res, 1, d);
            double t = now() - t0;
            for (int k = 0; res && k < 2; k++) gs_value_free(res[k]);
            free(res);
            if (st != GS_OK) break;
            if (t < best) best = t;
        }
    }
    gs_value_free(x0);
    gs_value_free(x1);
    if (comm) comm->ops->free(comm);
    gs_module_free(m);
    gs_source_free(src);
    return best;
}

gs_status gs_machine_calibrate(gs_machine *out, gs_diags *d) {
    gs_machine_builtin("this-cpu", out);
    snprintf(out->description, sizeof out->description,
             "this machine, measured by gspmd calibrate (one device per core)");
    int saved = openblas_get_num_threads();
    openblas_set_num_threads(1);
    double f32 = gemm_rate(false), f64 = gemm_rate(true);
    openblas_set_num_threads(saved);
    double vec = vector_rate(), trans = transcendental_rate(), bw = memcpy_rate();
    double op = op_overhead(d);
    double t_small = all_reduce_time(1, d), t_big = all_reduce_time((int64_t)4 << 20, d);
    if (!(f32 > 0) || !(f64 > 0) || !(vec > 0) || !(bw > 0) || d->n_errors)
        return gs_error(d, gs_span_none(), "calibration failed (out of memory?)");
    out->flops_f32 = f32;
    out->flops_bf16 = f32; /* the interpreter's bf16 matmuls run on the f32 path */
    out->flops_f64 = f64;
    out->vector_flops = vec;
    if (trans > 0) out->transcendentals = trans;
    out->mem_bandwidth = bw;
    out->op_overhead = op;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && psize > 0) out->mem_capacity = (double)pages * (double)psize;
    if (t_small < 1e30 && t_big < 1e30) {
        /* a 2-device ring all-reduce: B/W + 2L (each device sends half twice) */
        double latency = t_small / 2, bytes = 4.0 * (double)((int64_t)4 << 20);
        out->intra.latency = out->inter.latency = latency;
        double w = t_big - t_small > 0 ? bytes / (t_big - t_small) : 0;
        if (w > 0) out->intra.bandwidth = out->inter.bandwidth = w;
    }
    return GS_OK;
}
