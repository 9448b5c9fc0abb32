/*
 * bench_real.c — what partitioning does to the real dumps in ../shared/real, with the shardings a
 * user would give them (their own where they carry some; the same table as
 * ../shared/tools/real-ratios): per-device dot/convolution FLOPs and peak memory against the
 * unpartitioned module's / N (src/cost/; 1.00 is a perfect division of the work), the warnings
 * (instructions computed on more than their sharding gives a device, full rematerializations),
 * and the time to propagate and partition. Not part of `make test`.
 *
 *   build/bench/bench_real [REAL_DIR]     (default ../shared/real)
 */
#include "gspmd/gspmd.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One row: a dump, its device count, its mesh and the shardings asked for (`--shard` requests,
 * ended by one with a NULL pattern). */
typedef struct row {
    const char *label;
    const char *file;
    int n;
    const char *mesh;
    gs_shard_request shard[6];
} row;

static const row ROWS[] = {
    {"MaxText train step, own shardings",
     "nv_maxtext_1n1g_jit_train_step_before_optimization.hlo",
     8,
     NULL,
     {{NULL, NULL}}},
    {"ResNet-50, data.1 height over 2",
     "resnet50_keras_jax_f32.hlo",
     2,
     "h=2",
     {{"data.1", "None,h,None,None"}, {NULL, NULL}}},
    {"ResNet-50, data.1 height x width over 4",
     "resnet50_keras_jax_f32.hlo",
     4,
     "h=2,w=2",
     {{"data.1", "None,h,w,None"}, {NULL, NULL}}},
    {"DLRM train step, batch over 2",
     "dlrm_keras_jax_f32_train_step.hlo",
     2,
     "b=2",
     {{"data_*", "b"}, {"data_0___h*", "b,None"}, {"data_0___raw*", "b,None"}, {NULL, NULL}}},
    {"DLRM, batch and embedding tables over 2",
     "dlrm_keras_jax_f32_train_step.hlo",
     2,
     "b=2",
     {{"data_*", "b"},
      {"data_0___h*", "b,None"},
      {"data_0___raw*", "b,None"},
      {"state_0__[0-5]_*", "b,None"},
      {NULL, NULL}}},
    {"attention block, heads over 4",
     "mha_block_1x12x128x64_bf16.hlo",
     4,
     "h=4",
     {{"q.1", "None,h,None,None"},
      {"k.1", "None,h,None,None"},
      {"v.1", "None,h,None,None"},
      {NULL, NULL}}},
};

static void run_row(const char *dir, const row *r) {
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, r->file);
    printf("  %-42s ", r->label);
    fflush(stdout);
    gs_diags d = {0};
    gs_source *src = gs_source_read_file(path, err, sizeof err);
    gs_module *m = src ? gs_parse_module(src, &d) : NULL;
    gs_compiled out = {0};
    gs_mesh mesh;
    gs_compile_options o;
    gs_compile_options_init(&o, r->n);
    o.partition.no_warnings = true;
    while (r->shard[o.n_requests].pattern) o.n_requests++;
    o.requests = r->shard;
    o.mesh = r->mesh ? &mesh : NULL;
    double t0 = now();
    gs_status st = m ? GS_OK : GS_ERR;
    if (st == GS_OK && r->mesh)
        st = gs_mesh_parse(&m->arena, r->mesh, strlen(r->mesh), &mesh, &d, gs_span_none());
    if (st == GS_OK) st = gs_compile(m, &o, &out, &d);
    if (!src) {
        printf("failed: %s\n", err);
    } else if (st != GS_OK) {
        printf("failed\n");
        gs_diags_render(&d, stdout);
    } else {
        double secs = now() - t0;
        gs_cost cm, cp;
        gs_cost_module(m, &cm);
        gs_cost_module(out.program, &cp);
        double fi = cm.flops / r->n, mi = (double)cm.peak_bytes / r->n;
        printf("%6.3f  %6.3f  %5d  %5d  %7.3f\n", fi > 0 ? cp.flops / fi : 1.0,
               mi > 0 ? (double)cp.peak_bytes / mi : 1.0, out.stats.n_replicated,
               out.stats.n_full_remat, secs);
    }
    gs_compiled_free(&out);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "../shared/real";
    printf("real dumps partitioned (per-device / ideal = unpartitioned / N)\n");
    printf("  %-42s %6s  %6s  %5s  %5s  %7s\n", "module, sharding, devices", "FLOPs", "memory",
           "whole", "remat", "seconds");
    for (size_t i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++) run_row(dir, &ROWS[i]);
    return 0;
}
