/*
 * bench_run.c — how fast partitioned programs run (issue 12), against raw OpenBLAS in the same
 * process: an MLP of L layers, each x <- x + tanh(x . w1) . w2 with x f32[1024,1024],
 * w1 f32[1024,4096], w2 f32[4096,1024] (2 x 8.6 GFLOP per layer).
 *
 *   build/bench/bench_run [LAYERS_A LAYERS_B]        default 2 and 6
 *   mpirun -np 2 build/bench/bench_run --mpi [A B]   the same on the MPI backend (one device per
 *                                                    rank) against eval on rank 0 alone
 *   build/bench/bench_run --hlo LAYERS MODE          the module as HLO text (MODE 0 unsharded,
 *                                                    1 tensor parallel, 2 data parallel)
 *   build/bench/bench_run --hlo norm R               the layer norm + GELU model on f32[R,R]
 *   build/bench/bench_run --norm                     its row alone (eval against memcpy)
 *   build/bench/bench_run --model FILE N             FILE run on N devices against the cost
 *                                                    model's prediction (this machine)
 *
 * Each figure is per layer, from the difference between an L_B-layer and an L_A-layer run (so
 * setup, argument making and result gathering cancel), best of 3:
 *   raw       the same layers written directly on cblas_sgemm + tanhf + add, one BLAS thread
 *   eval      the reference interpreter (gs_interp_eval) on one device, one BLAS thread
 *   run 2 tp  gs_run_partitioned on 2 devices (threads backend): Megatron tensor parallelism,
 *             w1 split by columns, w2 by rows, one all-reduce per layer
 *   run 2 dp  the same on 2 devices with x split by rows (data parallelism, weights whole)
 * and the ratios the issue asks for: eval / raw (goal <= 1.15) and eval / run (goal >= 1.8 on
 * two cores). User and system CPU time of the whole process are printed at the end (goal:
 * system time < 10% of wall time). Not part of `make test`.
 */
#include "gspmd/compile.h"
#include "gspmd/cost.h"
#include "gspmd/interp.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum { B = 1024, D = 1024, H = 4096 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The MLP as HLO text: parameters x, then w1_l and w2_l per layer; `mode` 0 unsharded, 1 tensor
 * parallel, 2 data parallel (over 2 devices). */
static char *mlp_text(int layers, int mode) {
    size_t cap = 4096 + (size_t)layers * 1024;
    char *t = malloc(cap), *p = t;
    const char *xs = mode == 2 ? ", sharding={devices=[2,1]<=[2]}"
                     : mode == 1 ? ", sharding={replicated}" : "";
    const char *w1s = mode == 1 ? ", sharding={devices=[1,2]<=[2]}"
                      : mode == 2 ? ", sharding={replicated}" : "";
    const char *w2s = mode == 1 ? ", sharding={devices=[2,1]<=[2]}"
                      : mode == 2 ? ", sharding={replicated}" : "";
    p += sprintf(p, "HloModule mlp\n\nENTRY main {\n  x0 = f32[%d,%d] parameter(0)%s\n", B, D, xs);
    for (int l = 0; l < layers; l++) {
        p += sprintf(p, "  w1_%d = f32[%d,%d] parameter(%d)%s\n", l, D, H, 1 + 2 * l, w1s);
        p += sprintf(p, "  w2_%d = f32[%d,%d] parameter(%d)%s\n", l, H, D, 2 + 2 * l, w2s);
        p += sprintf(p, "  h_%d = f32[%d,%d] dot(x%d, w1_%d), lhs_contracting_dims={1}, "
                        "rhs_contracting_dims={0}\n", l, B, H, l, l);
        p += sprintf(p, "  t_%d = f32[%d,%d] tanh(h_%d)\n", l, B, H, l);
        p += sprintf(p, "  y_%d = f32[%d,%d] dot(t_%d, w2_%d), lhs_contracting_dims={1}, "
                        "rhs_contracting_dims={0}\n", l, B, D, l, l);
        p += sprintf(p, "  %sx%d = f32[%d,%d] add(x%d, y_%d)%s\n", l + 1 == layers ? "ROOT " : "",
                     l + 1, B, D, l, l, l + 1 == layers ? xs : "");
    }
    sprintf(p, "}\n");
    return t;
}

static gs_module *parse(const char *text, gs_source **src) {
    gs_diags d = {0};
    *src = gs_source_from_string("mlp.hlo", text);
    gs_module *m = gs_parse_module(*src, &d);
    if (!m || gs_module_verify(m, &d) != GS_OK) {
        gs_diags_render(&d, stderr);
        exit(1);
    }
    gs_diags_free(&d);
    return m;
}

/* Seconds for the raw loop over `layers` layers (one BLAS thread). */
static double raw(int layers, float *x, float *const *w1, float *const *w2, float *h, float *y) {
    double t0 = now();
    for (int l = 0; l < layers; l++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, D, 1.0f, x, D, w1[l], H,
                    0.0f, h, H);
        for (size_t i = 0; i < (size_t)B * H; i++) h[i] = tanhf(h[i]);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, D, H, 1.0f, h, H, w2[l], D,
                    0.0f, y, D);
        for (size_t i = 0; i < (size_t)B * D; i++) x[i] += y[i];
    }
    return now() - t0;
}

/* The MPI communicator of `bench_run --mpi` (NULL: threads). */
typedef struct bench_ctx {
    gs_comm *mpi;
} bench_ctx;

/* The module compiled for `devices` as `gspmd run` compiles it (gs_compile: propagation, then
 * partitioning), warnings off. */
static gs_status compile_for(gs_module *m, int64_t devices, gs_compiled *out, gs_diags *d) {
    gs_compile_options o;
    gs_compile_options_init(&o, devices);
    o.partition.no_warnings = true;
    return gs_compile(m, &o, out, d);
}

/* Seconds for one gspmd run of the `layers`-layer MLP: devices 0 = the interpreter, else
 * gs_run_partitioned on that many threads (or, with an MPI communicator, gs_run_sharded on the
 * ranks, timed from a common start). */
static double gspmd_run_on(int layers, int mode, int devices, gs_comm *mpi) {
    gs_source *src;
    char *text = mlp_text(layers, mode);
    gs_module *m = parse(text, &src);
    gs_diags d = {0};
    gs_value **args = NULL, *out = NULL;
    int n_args = 0;
    if (gs_interp_make_args(m, NULL, 1, &args, &n_args, &d) != GS_OK) goto fail;
    gs_compiled c = {0};
    /* As `gspmd run` does: shardings propagated to every instruction, then partitioned. */
    if (devices > 0 && compile_for(m, devices, &c, &d) != GS_OK) goto fail;
    const gs_module *p = c.program;
    bool all_ok;
    if (mpi) gs_mpi_agree(mpi, true, &all_ok); /* start together */
    double t0 = now();
    gs_status st = mpi           ? gs_run_sharded(m, p, mpi, args, n_args, 1, &out, &d)
                   : devices > 0 ? gs_run_partitioned(m, p, devices, args, n_args, 1, 600, &out, &d)
                                 : gs_interp_eval(m, NULL, args, n_args, &out, &d);
    double secs = now() - t0;
    if (st != GS_OK) goto fail;
    gs_value_free(out);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_compiled_free(&c);
    gs_module_free(m);
    gs_source_free(src);
    free(text);
    gs_diags_free(&d);
    return secs;
fail:
    gs_diags_render(&d, stderr);
    exit(1);
}

/* The cost model's step time (gs_cost_step) for the MLP of `layers` layers in `mode` on
 * `devices` (0: the unpartitioned module, as eval runs it) on machine mc. */
static double predicted(int layers, int mode, int devices, const gs_machine *mc) {
    gs_source *src;
    char *text = mlp_text(layers, mode);
    gs_module *m = parse(text, &src);
    gs_diags d = {0};
    gs_compiled compiled = {0};
    if (devices > 0 && compile_for(m, devices, &compiled, &d) != GS_OK) {
        gs_diags_render(&d, stderr);
        exit(1);
    }
    const gs_module *p = compiled.program;
    gs_step_cost c;
    if (gs_cost_step(p ? p : m, mc, &c, &d) != GS_OK) {
        gs_diags_render(&d, stderr);
        exit(1);
    }
    gs_compiled_free(&compiled);
    gs_module_free(m);
    gs_source_free(src);
    free(text);
    gs_diags_free(&d);
    return c.step_s;
}

static double gspmd_run(int layers, int mode, int devices) {
    return gspmd_run_on(layers, mode, devices, NULL);
}

static double best_of_3(double (*f)(void *), void *ctx) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double s = f(ctx);
        if (s < best) best = s;
    }
    return best;
}

typedef struct job {
    int layers, mode, devices;
    float *x, **w1, **w2, *h, *y;
} job;

static double do_raw(void *c) {
    job *j = c;
    return raw(j->layers, j->x, j->w1, j->w2, j->h, j->y);
}

static double do_gspmd(void *c) {
    job *j = c;
    return gspmd_run(j->layers, j->mode, j->devices);
}

static double cpu_seconds(bool system) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    struct timeval tv = system ? ru.ru_stime : ru.ru_utime;
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

/* A chain of `n` ResNet-style 3x3 convolutions, f32[1,S,S,C] -> f32[1,S,S,C], as HLO. */
static char *conv_text(int n, int S, int C) {
    char *t = malloc(4096 + (size_t)n * 256), *p = t;
    p += sprintf(p, "HloModule convs\n\nENTRY main {\n  x0 = f32[1,%d,%d,%d] parameter(0)\n"
                    "  k = f32[3,3,%d,%d] parameter(1)\n", S, S, C, C, C);
    for (int i = 0; i < n; i++)
        p += sprintf(p, "  %sx%d = f32[1,%d,%d,%d] convolution(x%d, k), window={size=3x3 "
                        "pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n", i + 1 == n ? "ROOT " : "",
                     i + 1, S, S, C, i);
    sprintf(p, "}\n");
    return t;
}

static double eval_text(const char *text) {
    gs_source *src;
    gs_module *m = parse(text, &src);
    gs_diags d = {0};
    gs_value **args = NULL, *out = NULL;
    int n_args = 0;
    if (gs_interp_make_args(m, NULL, 1, &args, &n_args, &d) != GS_OK) exit(1);
    double t0 = now();
    if (gs_interp_eval(m, NULL, args, n_args, &out, &d) != GS_OK) {
        gs_diags_render(&d, stderr);
        exit(1);
    }
    double secs = now() - t0;
    gs_value_free(out);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_module_free(m);
    gs_source_free(src);
    gs_diags_free(&d);
    return secs;
}

/* Convolutions of ResNet-50's stages by the interpreter (one BLAS thread) against cblas_sgemm
 * on the same GEMM shapes (im2col: M = S*S, K = 9*C, N = C), per convolution, best of 3. */
static void conv_rows(void) {
    static const int shapes[][2] = {{56, 64}, {28, 128}, {14, 256}, {7, 512}};
    printf("3x3 convolutions (ResNet-50 stages), per convolution from 2- and 12-conv chains:\n");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int S = shapes[i][0], C = shapes[i][1];
        char *a = conv_text(2, S, C), *b = conv_text(12, S, C);
        double ta = 1e30, tb = 1e30;
        for (int r = 0; r < 3; r++) {
            double x = eval_text(a), y = eval_text(b);
            ta = x < ta ? x : ta;
            tb = y < tb ? y : tb;
        }
        double conv = (tb - ta) / 10;
        int M = S * S, K = 9 * C, N = C;
        float *Am = calloc((size_t)M * K, 4), *Bm = calloc((size_t)K * N, 4),
              *Cm = calloc((size_t)M * N, 4);
        double g = 1e30;
        for (int r = 0; r < 5; r++) {
            double t0 = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, Am, K, Bm, N,
                        0.0f, Cm, N);
            double t = now() - t0;
            g = t < g ? t : g;
        }
        double flop = 2.0 * M * K * N;
        printf("  f32[1,%d,%d,%d]: convolution %7.2f ms (%5.1f GFLOP/s), sgemm %7.2f ms "
               "(%5.1f GFLOP/s): %.2f x sgemm (goal >= 0.7)\n", S, S, C, conv * 1e3,
               flop / conv * 1e-9, g * 1e3, flop / g * 1e-9, g / conv);
        free(Am);
        free(Bm);
        free(Cm);
        free(a);
        free(b);
    }
}

/* Layer norm + GELU (tanh form) + residual over f32[R,R], as HLO. */
static char *norm_text(int R) {
    char *t = malloc(8192);
    snprintf(t, 8192,
             "HloModule norm_gelu\n\n"
             "add { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
             "  ROOT s = f32[] add(a, b)\n}\n\n"
             "ENTRY main {\n"
             "  x = f32[%1$d,%1$d] parameter(0)\n  res = f32[%1$d,%1$d] parameter(1)\n"
             "  gamma = f32[%1$d] parameter(2)\n  beta = f32[%1$d] parameter(3)\n"
             "  zero = f32[] constant(0)\n  inv_n = f32[] constant(%2$.9g)\n"
             "  sum = f32[%1$d] reduce(x, zero), dimensions={1}, to_apply=add\n"
             "  inv_nv = f32[%1$d] broadcast(inv_n), dimensions={}\n"
             "  mean = f32[%1$d] multiply(sum, inv_nv)\n"
             "  mean_b = f32[%1$d,%1$d] broadcast(mean), dimensions={0}\n"
             "  xc = f32[%1$d,%1$d] subtract(x, mean_b)\n  sq = f32[%1$d,%1$d] multiply(xc, xc)\n"
             "  ssq = f32[%1$d] reduce(sq, zero), dimensions={1}, to_apply=add\n"
             "  var = f32[%1$d] multiply(ssq, inv_nv)\n"
             "  k_eps = f32[] constant(1e-5)\n  k_c1 = f32[] constant(0.044715)\n"
             "  k_c2 = f32[] constant(0.797884583)\n  k_half = f32[] constant(0.5)\n"
             "  k_one = f32[] constant(1)\n"
             "  eps = f32[%1$d] broadcast(k_eps), dimensions={}\n"
             "  ve = f32[%1$d] add(var, eps)\n  rs = f32[%1$d] rsqrt(ve)\n"
             "  rs_b = f32[%1$d,%1$d] broadcast(rs), dimensions={0}\n"
             "  n = f32[%1$d,%1$d] multiply(xc, rs_b)\n"
             "  gamma_b = f32[%1$d,%1$d] broadcast(gamma), dimensions={1}\n"
             "  beta_b = f32[%1$d,%1$d] broadcast(beta), dimensions={1}\n"
             "  gn = f32[%1$d,%1$d] multiply(n, gamma_b)\n  g = f32[%1$d,%1$d] add(gn, beta_b)\n"
             "  c1 = f32[%1$d,%1$d] broadcast(k_c1), dimensions={}\n"
             "  c2 = f32[%1$d,%1$d] broadcast(k_c2), dimensions={}\n"
             "  half = f32[%1$d,%1$d] broadcast(k_half), dimensions={}\n"
             "  one = f32[%1$d,%1$d] broadcast(k_one), dimensions={}\n"
             "  g2 = f32[%1$d,%1$d] multiply(g, g)\n  g3 = f32[%1$d,%1$d] multiply(g2, g)\n"
             "  a3 = f32[%1$d,%1$d] multiply(g3, c1)\n  in = f32[%1$d,%1$d] add(g, a3)\n"
             "  sc = f32[%1$d,%1$d] multiply(in, c2)\n  th = f32[%1$d,%1$d] tanh(sc)\n"
             "  op = f32[%1$d,%1$d] add(th, one)\n  hg = f32[%1$d,%1$d] multiply(g, half)\n"
             "  gelu = f32[%1$d,%1$d] multiply(hg, op)\n"
             "  ROOT out = f32[%1$d,%1$d] add(gelu, res)\n}\n",
             R, 1.0 / R);
    return t;
}

/* Bytes one evaluation of m's entry reads and writes: every non-parameter, non-constant
 * instruction's operands and result. */
static double bytes_moved(const gs_module *m) {
    double b = 0;
    for (int i = 0; i < m->entry->n_instrs; i++) {
        const gs_instr *in = m->entry->instrs[i];
        if (in->op == GS_OP_PARAMETER || in->op == GS_OP_CONSTANT) continue;
        b += (double)gs_shape_bytes(in->shape);
        for (int k = 0; k < in->n_operands; k++) b += (double)gs_shape_bytes(in->operands[k]->shape);
    }
    return b;
}

/* The elementwise-heavy model by the interpreter: its bytes moved per second against memcpy's
 * (read + write) on one array, best of 3. */
static void norm_row(void) {
    int R = 4096;
    char *text = norm_text(R);
    gs_source *src;
    gs_module *m = parse(text, &src);
    double bytes = bytes_moved(m), t = 1e30;
    gs_module_free(m);
    gs_source_free(src);
    for (int r = 0; r < 3; r++) {
        double x = eval_text(text);
        t = x < t ? x : t;
    }
    size_t n = (size_t)R * R * 4;
    char *a = malloc(n), *b = malloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double c = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        memcpy(b, a, n);
        double x = now() - t0;
        c = x < c ? x : c;
    }
    double bw = bytes / t, mbw = 2.0 * (double)n / c;
    printf("layer norm + GELU + residual on f32[%d,%d]: %.3f s, %.1f GB/s moved; memcpy %.1f "
           "GB/s (read + write): %.2f x memcpy (goal >= 0.5)\n", R, R, t, bw * 1e-9, mbw * 1e-9,
           bw / mbw);
    free(a);
    free(b);
    free(text);
}

/* mpirun -np 2 bench_run --mpi [LAYERS_A LAYERS_B]: the tensor- and data-parallel MLP on the
 * MPI backend (one device per rank), and on rank 0, alone, the interpreter, per layer. */
static int mpi_main(int argc, char **argv) {
    int la = argc > 3 ? atoi(argv[2]) : 2, lb = argc > 3 ? atoi(argv[3]) : 6;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    gs_diags d = {0};
    gs_comm *comm = gs_comm_mpi_new(1, 600, &d);
    if (!comm || comm->n_devices != 2) {
        gs_diags_render(&d, stderr);
        fprintf(stderr, "bench_run --mpi: run it under mpirun -np 2\n");
        return 2;
    }
    openblas_set_num_threads(1);
    bool rank0 = gs_mpi_rank() == 0, ok;
    double per[3];
    for (int mode = 1; mode <= 2; mode++) {
        double ta = 1e30, tb = 1e30;
        for (int r = 0; r < 3; r++) {
            double a = gspmd_run_on(la, mode, 2, comm), b = gspmd_run_on(lb, mode, 2, comm);
            ta = a < ta ? a : ta;
            tb = b < tb ? b : tb;
        }
        per[mode] = (tb - ta) / (lb - la);
    }
    if (rank0) {
        double ta = 1e30, tb = 1e30;
        for (int r = 0; r < 3; r++) {
            double a = gspmd_run(la, 0, 0), b = gspmd_run(lb, 0, 0);
            ta = a < ta ? a : ta;
            tb = b < tb ? b : tb;
        }
        per[0] = (tb - ta) / (lb - la);
        printf("MLP per layer from %d- and %d-layer runs, best of 3, MPI backend on 2 ranks\n",
               la, lb);
        printf("  %-40s %8.3f s per layer\n", "gspmd eval, 1 BLAS thread (rank 0 alone)",
               per[0]);
        printf("  %-40s %8.3f s per layer  (eval / this %.2f; goal >= 1.8)\n",
               "mpirun -np 2, tensor parallel", per[1], per[0] / per[1]);
        printf("  %-40s %8.3f s per layer  (eval / this %.2f; goal >= 1.8)\n",
               "mpirun -np 2, data parallel", per[2], per[0] / per[2]);
    }
    gs_mpi_agree(comm, true, &ok);
    comm->ops->free(comm);
    gs_mpi_finalize();
    return 0;
}

/* bench_run --model FILE N: any module (e.g. from tools/gen.py) propagated, partitioned and run
 * on N device threads from seeded inputs (best of 3; eval on one BLAS thread when N is 1: one
 * device is one core, as the profile measures it), against the cost model's step time on this
 * machine's calibrated profile. */
static int model_main(const char *path, int n) {
    if (n == 1) openblas_set_num_threads(1);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    char err[256];
    gs_source *src = gs_source_read_file(path, err, sizeof err);
    if (!src) {
        fprintf(stderr, "bench_run: %s: %s\n", path, err);
        return 1;
    }
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    gs_compiled compiled = {0};
    gs_value **args = NULL;
    int n_args = 0;
    if (!m || compile_for(m, n, &compiled, &d) != GS_OK ||
        gs_interp_make_args(m, NULL, 1, &args, &n_args, &d) != GS_OK) {
        gs_diags_render(&d, stderr);
        return 1;
    }
    const gs_module *p = n > 1 ? compiled.program : NULL;
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        gs_value *out = NULL;
        double t0 = now();
        gs_status st = n > 1 ? gs_run_partitioned(m, p, n, args, n_args, 1, 600, &out, &d)
                             : gs_interp_eval(m, NULL, args, n_args, &out, &d);
        double t = now() - t0;
        gs_value_free(out);
        if (st != GS_OK) {
            gs_diags_render(&d, stderr);
            return 1;
        }
        if (t < best) best = t;
    }
    gs_machine mc;
    gs_step_cost c;
    if (gs_machine_calibrate(&mc, &d) != GS_OK) return 1;
    if (gs_cost_step(p ? p : m, &mc, &c, &d) != GS_OK) {
        gs_diags_render(&d, stderr);
        return 1;
    }
    printf("%s on %d device%s: measured %.4f s (best of 3), predicted %.4f s (compute %.4f, "
           "exposed communication %.4f): %.2f (goal within 0.7..1.3)\n", path, n,
           n == 1 ? "" : "s", best, c.step_s, c.compute_s, c.exposed_comm_s, c.step_s / best);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_compiled_free(&compiled);
    gs_module_free(m);
    gs_source_free(src);
    gs_diags_free(&d);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--model") == 0) return model_main(argv[2], atoi(argv[3]));
    if (argc == 4 && strcmp(argv[1], "--hlo") == 0) {
        /* bench_run --hlo LAYERS MODE: the module (MODE 0 unsharded, 1 tensor parallel, 2 data
         * parallel), for timing the CLI: gspmd eval, mpirun -np 2 gspmd run --backend mpi. */
        char *t = strcmp(argv[2], "norm") == 0 ? norm_text(atoi(argv[3]))
                                               : mlp_text(atoi(argv[2]), atoi(argv[3]));
        fputs(t, stdout);
        free(t);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--mpi") == 0) return mpi_main(argc, argv);
    if (argc == 2 && strcmp(argv[1], "--norm") == 0) { /* the elementwise row alone */
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
        norm_row();
        return 0;
    }
    int la = argc > 2 ? atoi(argv[1]) : 2, lb = argc > 2 ? atoi(argv[2]) : 6;
    if (la < 1 || lb <= la) {
        fprintf(stderr, "usage: bench_run [LAYERS_A LAYERS_B] (1 <= A < B)\n");
        return 2;
    }
    double wall0 = now();
    /* The heap settings the gspmd CLI runs with (tools/gspmd.c): large buffers reused, not
     * mapped and unmapped per instruction. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    openblas_set_num_threads(1);
    float *x = malloc(sizeof(float) * B * D), *h = malloc(sizeof(float) * B * H);
    float *y = malloc(sizeof(float) * B * D);
    float **w1 = calloc((size_t)lb, sizeof *w1), **w2 = calloc((size_t)lb, sizeof *w2);
    if (!x || !h || !y || !w1 || !w2) return 1;
    /* Values drawn as gspmd's random arguments are (uniform in [-1, 1)), so that tanhf sees the
     * same range in every row. */
    srand(1);
    for (size_t i = 0; i < (size_t)B * D; i++) x[i] = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
    for (int l = 0; l < lb; l++) {
        w1[l] = malloc(sizeof(float) * D * H);
        w2[l] = malloc(sizeof(float) * H * D);
        if (!w1[l] || !w2[l]) return 1;
        for (size_t i = 0; i < (size_t)D * H; i++) {
            w1[l][i] = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
            w2[l][i] = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
        }
    }
    printf("MLP layer: x f32[%d,%d] . w1 f32[%d,%d], tanh, . w2 f32[%d,%d], + x; per layer from "
           "%d- and %d-layer runs, best of 3\n", B, D, D, H, H, D, la, lb);
    struct {
        const char *name;
        int mode, devices; /* devices -1: raw */
        double per_layer;
    } rows[] = {{"raw OpenBLAS, 1 thread", 0, -1, 0},
                {"gspmd eval, 1 BLAS thread", 0, 0, 0},
                {"gspmd run, 2 devices, tensor parallel", 1, 2, 0},
                {"gspmd run, 2 devices, data parallel", 2, 2, 0}};
    int n_rows = (int)(sizeof rows / sizeof rows[0]);
    for (int r = 0; r < n_rows; r++) {
        job a = {la, rows[r].mode, rows[r].devices, x, w1, w2, h, y}, b = a;
        b.layers = lb;
        double (*f)(void *) = rows[r].devices < 0 ? do_raw : do_gspmd;
        double ta = best_of_3(f, &a), tb = best_of_3(f, &b);
        rows[r].per_layer = (tb - ta) / (lb - la);
        printf("  %-40s %8.3f s per layer  %6.1f GFLOP/s\n", rows[r].name, rows[r].per_layer,
               4.0 * B * D * H / rows[r].per_layer * 1e-9);
    }
    /* The cost model against these measurements: this machine calibrated (gspmd calibrate),
     * the step time predicted per layer for each gspmd row. */
    gs_machine mc;
    gs_diags cd = {0};
    if (gs_machine_calibrate(&mc, &cd) == GS_OK) {
        printf("cost model (gspmd cost on this machine's calibrated profile) against the "
               "measured time per layer:\n");
        for (int r = 1; r < n_rows; r++) {
            double pl = (predicted(lb, rows[r].mode, rows[r].devices, &mc) -
                         predicted(la, rows[r].mode, rows[r].devices, &mc)) / (lb - la);
            printf("  %-40s predicted %6.3f s, measured %6.3f s: %.2f (goal within 0.7..1.3)\n",
                   rows[r].name, pl, rows[r].per_layer, pl / rows[r].per_layer);
        }
    }
    gs_diags_free(&cd);
    conv_rows();
    norm_row();
    printf("eval / raw                    %.2f  (goal <= 1.15)\n",
           rows[1].per_layer / rows[0].per_layer);
    printf("eval / run 2 tensor parallel  %.2f  (goal >= 1.8 on 2 cores)\n",
           rows[1].per_layer / rows[2].per_layer);
    printf("eval / run 2 data parallel    %.2f  (goal >= 1.8 on 2 cores)\n",
           rows[1].per_layer / rows[3].per_layer);
    double wall = now() - wall0;
    printf("process: %.1f s wall, %.1f s user, %.1f s system (%.0f%% of wall; goal < 10%%)\n",
           wall, cpu_seconds(false), cpu_seconds(true), 100 * cpu_seconds(true) / wall);
    for (int l = 0; l < lb; l++) {
        free(w1[l]);
        free(w2[l]);
    }
    free(w1);
    free(w2);
    free(x);
    free(h);
    free(y);
    return 0;
}
