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
#include "cli.h"
#include "gspmd/cost.h"
#include "gspmd/propagate.h"
#include "gspmd/text.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One row: a dump, its device count, and the command-line shardings (NULL-terminated). */
typedef struct row {
    const char *label;
    const char *file;
    int n;
    const char *args[12];
} row;

static const row ROWS[] = {
    {"MaxText train step, own shardings",
     "nv_maxtext_1n1g_jit_train_step_before_optimization.hlo",
     8,
     {NULL}},
    {"ResNet-50, data.1 height over 2",
     "resnet50_keras_jax_f32.hlo",
     2,
     {"--mesh", "h=2", "--shard", "data.1=None,h,None,None", NULL}},
    {"ResNet-50, data.1 height x width over 4",
     "resnet50_keras_jax_f32.hlo",
     4,
     {"--mesh", "h=2,w=2", "--shard", "data.1=None,h,w,None", NULL}},
    {"DLRM train step, batch over 2",
     "dlrm_keras_jax_f32_train_step.hlo",
     2,
     {"--mesh", "b=2", "--shard", "data_*=b", "--shard", "data_0___h*=b,None", "--shard",
      "data_0___raw*=b,None", NULL}},
    {"DLRM, batch and embedding tables over 2",
     "dlrm_keras_jax_f32_train_step.hlo",
     2,
     {"--mesh", "b=2", "--shard", "data_*=b", "--shard", "data_0___h*=b,None", "--shard",
      "data_0___raw*=b,None", "--shard", "state_0__[0-5]_*=b,None", NULL}},
    {"attention block, heads over 4",
     "mha_block_1x12x128x64_bf16.hlo",
     4,
     {"--mesh", "h=4", "--shard", "q.1=None,h,None,None", "--shard", "k.1=None,h,None,None",
      "--shard", "v.1=None,h,None,None", NULL}},
};

static void run_row(const char *dir, const row *r) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, r->file);
    printf("  %-42s ", r->label);
    fflush(stdout);
    gs_source *src;
    gs_module *m = gs_cli_load_module(path, &src);
    if (!m) return;
    gs_cli_shardings sh = {0};
    int argc = 0;
    char *argv[12];
    while (r->args[argc]) {
        argv[argc] = (char *)r->args[argc];
        argc++;
    }
    for (int i = 0; i < argc; i++)
        if (gs_cli_sharding_option(argc, argv, &i, &sh) <= 0) break;
    gs_diags d = {0};
    gs_module *p = NULL;
    gs_partition_stats st;
    double t0 = now();
    gs_propagate_options po = {0};
    po.is_spmd = true;
    gs_partition_options opts = {0};
    opts.num_partitions = r->n;
    opts.no_warnings = true;
    if (gs_module_verify(m, &d) != GS_OK || gs_cli_apply_shardings(&sh, m) != 0 ||
        gs_propagate(m, &po, &d) != GS_OK || gs_partition(m, &opts, &p, &st, &d) != GS_OK) {
        printf("failed\n");
        gs_diags_render(&d, stdout);
    } else {
        double secs = now() - t0;
        gs_cost cm, cp;
        gs_cost_module(m, &cm);
        gs_cost_module(p, &cp);
        double fi = cm.flops / r->n, mi = (double)cm.peak_bytes / r->n;
        printf("%6.3f  %6.3f  %5d  %5d  %7.3f\n", fi > 0 ? cp.flops / fi : 1.0,
               mi > 0 ? (double)cp.peak_bytes / mi : 1.0, st.n_replicated, st.n_full_remat, secs);
    }
    gs_module_free(p);
    gs_diags_free(&d);
    gs_cli_shardings_free(&sh);
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
