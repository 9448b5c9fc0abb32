/*
 * bench_propagate.c — sharding propagation throughput: a generated module of about 100,000
 * instructions (a chain of layers: dot, bias broadcast and add, reshape and transpose there and
 * back, elementwise ops, a reduction) with only its input and first weight annotated, propagated
 * in SPMD mode over an iota mesh of 8 devices ([4,2]) and of 65,536 devices ([256,256]). Prints
 * instructions per second at both sizes and their ratio (they should be within 10%: every
 * sharding operation stays O(rank) on iota tile assignments); then the same module with the
 * same shardings written as named ones (mesh['a'=d0,'b'=d1]) through Shardy's propagation as
 * gs_compile runs it (the pipeline, aggressive, op and user priorities), its ratio between the
 * two sizes, and its time against GSPMD's (issue 26 asks at most 2x); then, for each HLO file
 * given, the time to parse and propagate it. Not part of `make test`.
 *
 *   build/bench/bench_propagate [instructions] [FILE.hlo ...]    (default 100000)
 */
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

/* The generated module's text: `layers` layers of 12 instructions, input sharded over a
 * [d0,d1] iota mesh. */
static char *generate(int layers, int64_t d0, int64_t d1, bool named) {
    gs_sb sb = {0};
    const int b = 1024, h = 1024;
    gs_sb_printf(&sb, "HloModule bench_propagate, num_partitions=%lld\n\n",
                 (long long)(d0 * d1));
    gs_sb_puts(&sb, "%sum {\n  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n"
                    "  ROOT %s = f32[] add(%x, %y)\n}\n\n");
    gs_sb_puts(&sb, "ENTRY %main {\n");
    if (named)
        gs_sb_printf(&sb, "  %%x0 = f32[%d,%d] parameter(0), sharding={mesh['a'=%lld,'b'=%lld] "
                          "[{'a'}, {'b'}]}\n",
                     b, h, (long long)d0, (long long)d1);
    else
        gs_sb_printf(&sb,
                     "  %%x0 = f32[%d,%d] parameter(0), sharding={devices=[%lld,%lld]<=[%lld]}\n",
                     b, h, (long long)d0, (long long)d1, (long long)(d0 * d1));
    gs_sb_puts(&sb, "  %zero = f32[] constant(0)\n");
    int param = 1;
    for (int i = 0; i < layers; i++) {
        if (i == 0 && named)
            gs_sb_printf(&sb, "  %%w%d = f32[%d,%d] parameter(%d), sharding={mesh['a'=%lld,'b'=%lld] "
                              "[{'b'}, {}]}\n",
                         i, h, h, param++, (long long)d0, (long long)d1);
        else if (i == 0)
            gs_sb_printf(&sb,
                         "  %%w%d = f32[%d,%d] parameter(%d), sharding={devices=[%lld,1,%lld]"
                         "<=[%lld,%lld]T(1,0) last_tile_dim_replicate}\n",
                         i, h, h, param++, (long long)d1, (long long)d0, (long long)d0,
                         (long long)d1);
        else
            gs_sb_printf(&sb, "  %%w%d = f32[%d,%d] parameter(%d)\n", i, h, h, param++);
        gs_sb_printf(&sb, "  %%bias%d = f32[%d] parameter(%d)\n", i, h, param++);
        gs_sb_printf(&sb,
                     "  %%d%d = f32[%d,%d] dot(%%x%d, %%w%d), lhs_contracting_dims={1}, "
                     "rhs_contracting_dims={0}\n",
                     i, b, h, i, i);
        gs_sb_printf(&sb, "  %%bb%d = f32[%d,%d] broadcast(%%bias%d), dimensions={1}\n", i, b, h,
                     i);
        gs_sb_printf(&sb, "  %%a%d = f32[%d,%d] add(%%d%d, %%bb%d)\n", i, b, h, i, i);
        gs_sb_printf(&sb, "  %%r%d = f32[%d,%d,16] reshape(%%a%d)\n", i, b, h / 16, i);
        gs_sb_printf(&sb, "  %%t%d = f32[%d,16,%d] transpose(%%r%d), dimensions={0,2,1}\n", i, b,
                     h / 16, i);
        gs_sb_printf(&sb, "  %%u%d = f32[%d,%d,16] transpose(%%t%d), dimensions={0,2,1}\n", i, b,
                     h / 16, i);
        gs_sb_printf(&sb, "  %%v%d = f32[%d,%d] reshape(%%u%d)\n", i, b, h, i);
        gs_sb_printf(&sb, "  %%m%d = f32[%d,%d] maximum(%%v%d, %%a%d)\n", i, b, h, i, i);
        gs_sb_printf(&sb,
                     "  %%s%d = f32[%d] reduce(%%m%d, %%zero), dimensions={1}, "
                     "to_apply=%%sum\n",
                     i, b, i);
        gs_sb_printf(&sb, "  %%x%d = f32[%d,%d] tanh(%%m%d)\n", i + 1, b, h, i);
    }
    gs_sb_printf(&sb, "  ROOT %%out = f32[%d,%d] copy(%%x%d)\n}\n", b, h, layers);
    return gs_sb_take(&sb);
}

/* Parses text and propagates; returns the number of instructions and the pass's seconds. */
static int run(const char *name, const char *text, bool shardy, double *seconds,
               double *parse_seconds) {
    gs_source *src = gs_source_from_string(name, text);
    gs_diags d = {0};
    double t0 = now();
    gs_module *m = gs_parse_module(src, &d);
    double t1 = now();
    if (!m) {
        gs_diags_render(&d, stderr);
        exit(1);
    }
    int n = 0;
    for (int i = 0; i < m->n_comps; i++) n += m->comps[i]->n_instrs;
    gs_propagate_options o;
    memset(&o, 0, sizeof o);
    o.is_spmd = true;
    gs_sdy_options so = {GS_SDY_AGGRESSIVE, false, true, true, true, false};
    double t2 = now();
    if ((shardy ? gs_sdy_propagate(m, &so, &d) : gs_propagate(m, &o, &d)) != GS_OK) {
        gs_diags_render(&d, stderr);
        exit(1);
    }
    double t3 = now();
    *seconds = t3 - t2;
    if (parse_seconds) *parse_seconds = t1 - t0;
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
    return n;
}

int main(int argc, char **argv) {
    int target = argc > 1 && argv[1][0] != '-' && strstr(argv[1], ".hlo") == NULL
                     ? atoi(argv[1])
                     : 100000;
    int layers = target / 12 > 0 ? target / 12 : 1;
    static const int64_t meshes[2][2] = {{4, 2}, {256, 256}};
    double rate[2][2];
    for (int alg = 0; alg < 2; alg++) {
        for (int k = 0; k < 2; k++) {
            char *text = generate(layers, meshes[k][0], meshes[k][1], alg == 1);
            double best = 1e30;
            int n = 0;
            for (int rep = 0; rep < 3; rep++) {
                double s;
                n = run("generated", text, alg == 1, &s, NULL);
                if (s < best) best = s;
            }
            rate[alg][k] = n / best;
            printf("%s %6lld devices: %d instructions propagated in %.3f s: %.0f instructions/s\n",
                   alg ? "shardy" : "gspmd ", (long long)(meshes[k][0] * meshes[k][1]), n, best,
                   rate[alg][k]);
            free(text);
        }
        printf("%s ratio (65536 / 8 devices): %.3f\n", alg ? "shardy" : "gspmd ",
               rate[alg][1] / rate[alg][0]);
    }
    printf("shardy time / gspmd time: %.2f (8 devices), %.2f (65536 devices)\n",
           rate[0][0] / rate[1][0], rate[0][1] / rate[1][1]);
    for (int i = 1; i < argc; i++) {
        if (!strstr(argv[i], ".hlo")) continue;
        char err[256];
        gs_source *src = gs_source_read_file(argv[i], err, sizeof err);
        if (!src) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        double best = 1e30, parse = 0;
        int n = 0;
        for (int rep = 0; rep < 5; rep++) {
            double s, p;
            n = run(argv[i], src->text, false, &s, &p);
            if (s < best) {
                best = s;
                parse = p;
            }
        }
        printf("%s: %d instructions, parse %.1f ms, propagate %.1f ms (%.0f instructions/s)\n",
               argv[i], n, parse * 1e3, best * 1e3, n / best);
        gs_source_free(src);
    }
    return 0;
}
