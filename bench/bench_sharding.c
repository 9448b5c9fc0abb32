/*
 * bench_sharding.c — sharding queries cost the same at 65,536 devices as at 4: the same
 * transposed-iota shardings at both sizes (`devices=[s,1,s]<=[s,s]T(1,0)
 * last_tile_dim_replicate` and `devices=[s,s]<=[s,s]T(1,0)` with s*s devices, s = 2 and 256),
 * timing each query and printing nanoseconds per call at both sizes and their ratio. Not part of
 * `make test`.
 *
 *   build/bench/bench_sharding [iterations]      (default 200000 per query)
 */
#include "gspmd/sharding.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The sharding under test for side*side devices, parsed from text: partially replicated
 * ([side,1,side] with the last dim replicating) or fully tiled ([side,side]). */
static gs_sharding *make(gs_arena *a, int64_t side, bool partial) {
    char text[128];
    long long n = (long long)side;
    if (partial)
        snprintf(text, sizeof text,
                 "{devices=[%lld,1,%lld]<=[%lld,%lld]T(1,0) "
                 "last_tile_dim_replicate}",
                 n, n, n, n);
    else
        snprintf(text, sizeof text, "{devices=[%lld,%lld]<=[%lld,%lld]T(1,0)}", n, n, n, n);
    gs_sharding *s;
    gs_diags d = {0};
    if (gs_sharding_parse(a, text, strlen(text), &s, &d, gs_span_none()) != GS_OK) {
        gs_diags_render(&d, stderr);
        exit(1);
    }
    gs_diags_free(&d);
    return s;
}

enum { N_QUERIES = 9 };
static const char *const NAMES[N_QUERIES] = {"parse + canonicalise",
                                             "tile index of a device",
                                             "device shard (offset/size/valid)",
                                             "device at a tile index",
                                             "equality",
                                             "hash",
                                             "transpose",
                                             "replicate a dim (canonical sort)",
                                             "replica groups (iota)"};

/* Nanoseconds per call of each query on a sharding of side*side devices. */
static void run(int64_t side, long iters, double *ns) {
    gs_arena keep;
    gs_arena_init(&keep);
    gs_sharding *s = make(&keep, side, true), *t = make(&keep, side, true);
    gs_sharding *full = make(&keep, side, false);
    int64_t n = side * side, dims[2] = {side * 3 + 1, 17};
    volatile int64_t sink = 0;
    for (int q = 0; q < N_QUERIES; q++) {
        gs_arena a;
        gs_arena_init(&a);
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            int64_t dev = (i * 7919) % n;
            switch (q) {
            case 0: sink += make(&a, side, true)->tiles.n; break;
            case 1: {
                int64_t idx[2];
                sink += gs_sharding_tile_index(s, dev, idx) ? idx[0] : 0;
                break;
            }
            case 2: {
                gs_shard_dim sd[2];
                sink += gs_sharding_device_shard(s, 2, dims, dev, sd) ? sd[0].offset : 0;
                break;
            }
            case 3: {
                int64_t idx[3] = {dev % side, 0, (dev / side) % side};
                sink += gs_sharding_device_for_tile(s, 3, idx);
                break;
            }
            case 4: sink += gs_sharding_equal(s, t); break;
            case 5: sink += (int64_t)(gs_sharding_hash(s) & 1); break;
            case 6: {
                int perm[2] = {1, 0};
                gs_sharding *r;
                if (gs_sharding_transpose(&a, s, 2, perm, &r) == GS_OK) sink += r->tiles.n;
                break;
            }
            case 7: {
                int64_t dim = 0;
                gs_sharding *r;
                if (gs_sharding_replicate_dims(&a, full, 1, &dim, &r) == GS_OK) sink += r->kind;
                break;
            }
            case 8: {
                gs_replica_groups *g;
                if (gs_sharding_replica_groups(&a, s, &g) == GS_OK) sink += g->group_size;
                break;
            }
            }
            if ((i & 1023) == 1023) {
                gs_arena_free(&a);
                gs_arena_init(&a);
            }
        }
        ns[q] = (now() - t0) * 1e9 / (double)iters;
        gs_arena_free(&a);
    }
    (void)sink;
    gs_arena_free(&keep);
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    if (iters < 1) {
        fprintf(stderr, "usage: bench_sharding [iterations]\n");
        return 2;
    }
    double small[N_QUERIES], big[N_QUERIES];
    run(2, iters / 10 + 1, small); /* warm up */
    run(2, iters, small);
    run(256, iters, big);
    printf("sharding queries, ns per call (%ld calls each)\n", iters);
    printf("%-36s %12s %14s %8s\n", "query", "4 devices", "65536 devices", "ratio");
    double worst = 0;
    for (int q = 0; q < N_QUERIES; q++) {
        double r = big[q] / small[q];
        if (r > worst) worst = r;
        printf("%-36s %12.1f %14.1f %8.2f\n", NAMES[q], small[q], big[q], r);
    }
    printf("largest ratio 65536/4 devices: %.2f\n", worst);
    return 0;
}
