/*
 * bench_partition.c — compile time of propagation + partitioning, flat in the device count.
 *
 * The same 1,000-layer Megatron-style MLP (x <- x + relu(x @ W1) @ W2 per layer, the batch
 * data-parallel and the hidden dim tensor-parallel on a 2D mesh data x model) is compiled for
 * 4 devices (2 x 2) and for 65,536 (256 x 256). Only the parameters are annotated when sharding
 * propagation is in the library (propagate + partition are timed); otherwise every instruction
 * carries its sharding and partitioning alone is timed (the output says which). Prints both
 * times, their ratio (the goal: <= 1.3) and instructions per second.
 *
 *   bench_partition [LAYERS] [REPEATS]
 */
#include "gspmd/partition.h"
#include "gspmd/propagate.h"
#include "gspmd/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The module text for a data x model mesh: parameters and the root annotated (propagation
 * gives the rest its shardings). */
static char *mlp_text(int layers, int data, int model) {
    int n = data * model;
    const int B = 1024, H = 1024, F = 4096;
    char xs[128], w1s[128], w2s[128];
    snprintf(xs, sizeof xs, "{devices=[%d,1,%d]<=[%d] last_tile_dim_replicate}", data, model, n);
    snprintf(w1s, sizeof w1s, "{devices=[1,%d,%d]<=[%d,%d]T(1,0) last_tile_dim_replicate}", model,
             data, data, model);
    snprintf(w2s, sizeof w2s, "{devices=[%d,1,%d]<=[%d,%d]T(1,0) last_tile_dim_replicate}", model,
             data, data, model);
    gs_sb sb = {0};
    gs_sb_printf(&sb, "HloModule mlp_%dx%d, num_partitions=%d\n\nENTRY %%main {\n", data, model, n);
    gs_sb_printf(&sb, "  %%x0 = f32[%d,%d] parameter(0), sharding=%s\n", B, H, xs);
    gs_sb_printf(&sb, "  %%zero = f32[] constant(0)\n");
    gs_sb_printf(&sb, "  %%zeros = f32[%d,%d] broadcast(%%zero), dimensions={}\n", B, F);
    for (int l = 0; l < layers; l++) {
        gs_sb_printf(&sb, "  %%w1_%d = f32[%d,%d] parameter(%d), sharding=%s\n", l, H, F,
                     1 + 2 * l, w1s);
        gs_sb_printf(&sb, "  %%w2_%d = f32[%d,%d] parameter(%d), sharding=%s\n", l, F, H,
                     2 + 2 * l, w2s);
        gs_sb_printf(&sb,
                     "  %%h%d = f32[%d,%d] dot(%%x%d, %%w1_%d), lhs_contracting_dims={1}, "
                     "rhs_contracting_dims={0}\n",
                     l, B, F, l, l);
        gs_sb_printf(&sb, "  %%r%d = f32[%d,%d] maximum(%%h%d, %%zeros)\n", l, B, F, l);
        gs_sb_printf(&sb,
                     "  %%y%d = f32[%d,%d] dot(%%r%d, %%w2_%d), lhs_contracting_dims={1}, "
                     "rhs_contracting_dims={0}\n",
                     l, B, H, l, l);
        gs_sb_printf(&sb, "  %s%%x%d = f32[%d,%d] add(%%x%d, %%y%d)%s%s\n",
                     l == layers - 1 ? "ROOT " : "", l + 1, B, H, l, l,
                     l == layers - 1 ? ", sharding=" : "", l == layers - 1 ? xs : "");
    }
    gs_sb_puts(&sb, "}\n");
    return gs_sb_take(&sb);
}

typedef struct timing {
    double seconds;   /* best of the repeats */
    int n_instrs;     /* instructions in the module */
    int n_out;        /* instructions in the partitioned entry */
    int n_coll;       /* collectives emitted */
} timing;

static int run(int layers, int data, int model, int repeats, timing *t) {
    char *text = mlp_text(layers, data, model);
    gs_source *src = gs_source_from_string("mlp.hlo", text);
    t->seconds = 1e30;
    for (int r = 0; r < repeats; r++) {
        gs_diags d = {0};
        gs_module *m = gs_parse_module(src, &d);
        if (!m) {
            gs_diags_render(&d, stderr);
            return 1;
        }
        t->n_instrs = m->entry->n_instrs;
        double t0 = now();
        gs_propagate_options po = {0};
        po.is_spmd = true;
        if (gs_propagate(m, &po, &d) != GS_OK) {
            gs_diags_render(&d, stderr);
            return 1;
        }
        gs_partition_options o = {0};
        o.num_partitions = (int64_t)data * model;
        gs_module *p = NULL;
        gs_partition_stats st;
        if (gs_partition(m, &o, &p, &st, &d) != GS_OK) {
            gs_diags_render(&d, stderr);
            return 1;
        }
        double dt = now() - t0;
        if (dt < t->seconds) t->seconds = dt;
        t->n_out = st.n_instrs;
        t->n_coll = 0;
        for (int k = 0; k < GS_N_COLL_KINDS; k++) t->n_coll += st.n[k];
        gs_module_free(p);
        gs_module_free(m);
        gs_diags_free(&d);
    }
    gs_source_free(src);
    free(text);
    return 0;
}

int main(int argc, char **argv) {
    int layers = argc > 1 ? atoi(argv[1]) : 1000;
    int repeats = argc > 2 ? atoi(argv[2]) : 3;
    if (layers < 1 || repeats < 1) {
        fprintf(stderr, "usage: bench_partition [LAYERS] [REPEATS]\n");
        return 2;
    }
    printf("%d-layer Megatron-style MLP, data x model mesh; %s timed (best of %d)\n", layers,
           "propagate + partition", repeats);
    timing small, big;
    if (run(layers, 2, 2, repeats, &small) || run(layers, 256, 256, repeats, &big)) return 1;
    printf("      4 devices (2 x 2):     %8.3f s  %6d instrs -> %6d  (%d collectives)  "
           "%.0f instrs/s\n",
           small.seconds, small.n_instrs, small.n_out, small.n_coll,
           small.n_instrs / small.seconds);
    printf("  65536 devices (256 x 256): %8.3f s  %6d instrs -> %6d  (%d collectives)  "
           "%.0f instrs/s\n",
           big.seconds, big.n_instrs, big.n_out, big.n_coll, big.n_instrs / big.seconds);
    printf("ratio 65536 / 4: %.2f (goal <= 1.3)\n", big.seconds / small.seconds);
    return 0;
}
