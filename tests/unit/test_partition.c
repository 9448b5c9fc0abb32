/*
 * test_partition.c — the SPMD partitioner, rung by rung and handler by handler. Each case is a
 * small sharded module: it is partitioned, the partitioned program is verified and printed and
 * parsed back, run on N devices (threads) on seeded random inputs and compared with the
 * reference interpreter, and the collectives it emitted are counted through a wrapped
 * gs_collective_ops (each rung of the reshard ladder shows the collective it stands for; each
 * special handler moves fewer bytes than the default action). Bad input gives clear errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gspmd/cost.h"
#include "gspmd/interp.h"
#include "gspmd/partition.h"
#include "gspmd/propagate.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

/* Collectives counted through the struct of functions. */
typedef struct counter {
    int n[GS_N_COLL_KINDS];
} counter;

static gs_instr *c_ar(void *ctx, gs_builder *b, gs_instr *x, const gs_replica_groups *g,
                      gs_computation *comp, int64_t ch) {
    ((counter *)ctx)->n[GS_COLL_ALL_REDUCE]++;
    return gs_collective_ops_default()->all_reduce(NULL, b, x, g, comp, ch);
}
static gs_instr *c_ag(void *ctx, gs_builder *b, gs_instr *x, int dim, int64_t size,
                      const gs_replica_groups *g, int64_t ch) {
    ((counter *)ctx)->n[GS_COLL_ALL_GATHER]++;
    return gs_collective_ops_default()->all_gather(NULL, b, x, dim, size, g, ch);
}
static gs_instr *c_rs(void *ctx, gs_builder *b, gs_instr *x, int dim, int64_t size,
                      const gs_replica_groups *g, gs_computation *comp, int64_t ch) {
    ((counter *)ctx)->n[GS_COLL_REDUCE_SCATTER]++;
    return gs_collective_ops_default()->reduce_scatter(NULL, b, x, dim, size, g, comp, ch);
}
static gs_instr *c_a2a(void *ctx, gs_builder *b, gs_instr *x, int dim, const gs_replica_groups *g,
                       int64_t ch) {
    ((counter *)ctx)->n[GS_COLL_ALL_TO_ALL]++;
    return gs_collective_ops_default()->all_to_all(NULL, b, x, dim, g, ch);
}
static gs_instr *c_cp(void *ctx, gs_builder *b, gs_instr *x, int n, const int64_t (*p)[2],
                      int64_t ch) {
    ((counter *)ctx)->n[GS_COLL_PERMUTE]++;
    return gs_collective_ops_default()->collective_permute(NULL, b, x, n, p, ch);
}
static const gs_collective_ops COUNTING = {c_ar, c_ag, c_rs, c_a2a, c_cp};

/* What one case produced. */
typedef struct result {
    counter count;             /* collectives through the wrapper */
    gs_partition_stats stats;  /* the partitioner's own counts */
    double max_err;            /* worst output error against the reference */
    int n_warnings;            /* warnings reported */
    char warning[512];         /* the first warning's text */
    char text[8192];           /* the partitioned program (truncated) */
} result;

enum { ANY = -1 };

/* Partitions, verifies, round-trips and runs one module; fails the test on any problem. */
static void run_case(const char *hlo, int n, bool default_only, result *r) {
    memset(r, 0, sizeof *r);
    gs_source *src = gs_source_from_string("case.hlo", hlo);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    if (!m) gs_diags_render(&d, stderr);
    assert_non_null(m);
    gs_partition_options o = {0};
    o.num_partitions = n;
    o.collectives = &COUNTING;
    o.collectives_ctx = &r->count;
    o.default_only = default_only;
    gs_module *p = NULL;
    gs_status st = gs_partition(m, &o, &p, &r->stats, &d);
    if (st != GS_OK) gs_diags_render(&d, stderr);
    assert_int_equal(st, GS_OK);
    for (int i = 0; i < d.n; i++)
        if (d.items[i].severity == GS_SEV_WARNING) {
            if (r->n_warnings++ == 0)
                snprintf(r->warning, sizeof r->warning, "%s", d.items[i].message);
        }
    gs_diags_clear(&d);
    if (gs_module_verify(p, &d) != GS_OK) {
        char *t = gs_module_to_string(p);
        fprintf(stderr, "%s\n", t);
        free(t);
        gs_diags_render(&d, stderr);
        fail_msg("the partitioned program does not verify");
    }
    char *text = gs_module_to_string(p);
    assert_non_null(text);
    snprintf(r->text, sizeof r->text, "%s", text);
    /* Printing is a fixed point. */
    gs_source *src2 = gs_source_from_string("partitioned.hlo", text);
    gs_module *p2 = gs_parse_module(src2, &d);
    if (!p2) {
        fprintf(stderr, "%s\n", text);
        gs_diags_render(&d, stderr);
    }
    assert_non_null(p2);
    char *text2 = gs_module_to_string(p2);
    assert_string_equal(text, text2);
    free(text2);
    gs_module_free(p2);
    gs_source_free(src2);
    /* Run and compare. */
    gs_value **args = NULL, *got = NULL;
    int n_args = 0;
    assert_int_equal(gs_interp_make_args(m, NULL, 7, &args, &n_args, &d), GS_OK);
    st = gs_run_partitioned(m, p, n, args, n_args, 7, 30, &got, &d);
    if (st != GS_OK) {
        fprintf(stderr, "%s\n", text);
        gs_diags_render(&d, stderr);
    }
    assert_int_equal(st, GS_OK);
    gs_leaf_check *checks = NULL;
    int n_checks = 0;
    bool all_ok = false;
    assert_int_equal(gs_verify_outputs(m, args, n_args, 7, n, got, &checks, &n_checks, &all_ok, &d),
                     GS_OK);
    for (int i = 0; i < n_checks; i++)
        if (checks[i].error > r->max_err) r->max_err = checks[i].error;
    if (!all_ok) fprintf(stderr, "%s\nmax error %g rounding bounds\n", text, r->max_err);
    assert_true(all_ok);
    free(checks);
    gs_value_free(got);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    free(text);
    gs_diags_free(&d);
    gs_module_free(p);
    gs_module_free(m);
    gs_source_free(src);
}

/* Expects exactly these collective counts (ANY: not checked). */
static void expect(const result *r, int ar, int ag, int rs, int a2a, int cp) {
    int want[GS_N_COLL_KINDS] = {ar, ag, rs, a2a, cp};
    for (int k = 0; k < GS_N_COLL_KINDS; k++) {
        if (want[k] == ANY) continue;
        if (r->count.n[k] != want[k]) fprintf(stderr, "%s\n", r->text);
        assert_int_equal(r->count.n[k], want[k]);
        assert_int_equal(r->stats.n[k], want[k]);
    }
}

/* A module copying parameter p (shape SHAPE, sharding FROM) to a root with sharding TO. */
static void reshard_case(const char *shape, const char *from, const char *to, int n,
                         result *r) {
    char hlo[1024];
    snprintf(hlo, sizeof hlo,
             "HloModule reshard\n\nENTRY %%main (p: %s) -> %s {\n"
             "  %%p = %s parameter(0), sharding=%s\n"
             "  ROOT %%c = %s copy(%%p), sharding=%s\n}\n",
             shape, shape, shape, from, shape, to);
    run_case(hlo, n, false, r);
}

/* ------------------------------------------------------------------ the ladder */

static void test_rung_equal(void **state) {
    (void)state;
    result r;
    reshard_case("f32[8,6]", "{devices=[2,2]<=[4]}", "{devices=[2,2]<=[4]}", 4, &r);
    expect(&r, 0, 0, 0, 0, 0);
}

static void test_rung_all_gather(void **state) {
    (void)state;
    result r;
    reshard_case("f32[8,6]", "{devices=[4,1]<=[4]}", "{replicated}", 4, &r);
    expect(&r, 0, 1, 0, 0, 0);
    /* Uneven: gathered then sliced back. */
    reshard_case("f32[7,5]", "{devices=[2,2]<=[4]}", "{replicated}", 4, &r);
    expect(&r, 0, 2, 0, 0, 0);
}

static void test_rung_dynamic_slice(void **state) {
    (void)state;
    result r;
    reshard_case("f32[8,6]", "{replicated}", "{devices=[1,4]<=[4]}", 4, &r);
    expect(&r, 0, 0, 0, 0, 0);
    assert_non_null(strstr(r.text, "dynamic-slice("));
    /* Offsets come from partition-id arithmetic, not a table, for iota device orders. */
    assert_null(strstr(r.text, "s32[4] constant"));
    reshard_case("f32[7,5]", "{replicated}", "{devices=[2,2]<=[2,2]T(1,0)}", 4, &r);
    expect(&r, 0, 0, 0, 0, 0);
    /* An explicit device list gets a table indexed by partition id. */
    reshard_case("f32[8]", "{replicated}", "{devices=[4]3,0,2,1}", 4, &r);
    expect(&r, 0, 0, 0, 0, 0);
    assert_non_null(strstr(r.text, "s32[4] constant({"));
}

static void test_rung_collective_permute(void **state) {
    (void)state;
    result r;
    reshard_case("f32[8,6]", "{devices=[4,1]<=[4]}", "{devices=[4,1]3,2,1,0}", 4, &r);
    expect(&r, 0, 0, 0, 0, 1);
    reshard_case("f32[8,6]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                 "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}", 4, &r);
    expect(&r, 0, 0, 0, 0, 1);
}

static void test_rung_all_to_all(void **state) {
    (void)state;
    result r;
    reshard_case("f32[8,12]", "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}", 4, &r);
    expect(&r, 0, 0, 0, 1, 0);
    reshard_case("f32[6,5]", "{devices=[2,1]<=[2]}", "{devices=[1,2]<=[2]}", 2, &r);
    expect(&r, 0, 0, 0, 1, 0);
    /* Two moves by steps. */
    reshard_case("f32[4,4,8]", "{devices=[2,2,1]<=[4]}", "{devices=[1,1,4]<=[4]}", 4, &r);
    expect(&r, 0, 0, 0, 2, ANY);
}

static void test_rung_all_to_all_minor_factor(void **state) {
    (void)state;
    result r;
    /* Dim 0 over all 8 devices (data 2 major, expert 4 minor) to dim 1 over the expert axis,
     * replicated over data (an MoE's expert outputs resharded to the batch): the minor factor
     * moves by an all-to-all, the data factor left on dim 0 is gathered. It was a full
     * rematerialization (the whole value gathered on every device, then sliced). */
    reshard_case("f32[8,4,2,2]", "{devices=[8,1,1,1]<=[8]}",
                 "{devices=[1,4,1,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}", 8, &r);
    expect(&r, 0, 1, 0, 1, 0);
    assert_int_equal(r.stats.n_full_remat, 0);
    assert_int_equal(r.n_warnings, 0);
}

static void test_rung_partial_replication(void **state) {
    (void)state;
    result r;
    /* Less replicated: a local slice. */
    reshard_case("f32[8,6]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                 "{devices=[2,2]<=[4]}", 4, &r);
    expect(&r, 0, 0, 0, 0, 0);
    /* More replicated: an all-gather over the right subgroups. */
    reshard_case("f32[8,6]", "{devices=[2,2]<=[4]}",
                 "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 4, &r);
    expect(&r, 0, 1, 0, 0, 0);
    /* Refinement with another device order: a permute, then a slice. */
    reshard_case("f32[8,6]", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                 "{devices=[2,2]<=[2,2]T(1,0)}", 4, &r);
    expect(&r, 0, 0, 0, 0, ANY);
}

static void test_rung_permute_before_gather(void **state) {
    (void)state;
    result r;
    /* Only coarser, in another device order (dim 1 split by the data axis, not the model
     * axis): the devices are put in the target's order while the shards are small, then
     * gathered (XLA's permute to a reshard-compatible sharding). It was gathered first and the
     * gathered value permuted, 4x the bytes. */
    reshard_case("f32[16,32]", "{devices=[2,4]<=[8]}",
                 "{devices=[1,2,4]<=[8] last_tile_dim_replicate}", 8, &r);
    expect(&r, 0, 2, 0, 0, 1);
    assert_non_null(strstr(r.text, "f32[8,8] collective-permute("));
    reshard_case("f32[64,128]", "{devices=[8,16]<=[128]}",
                 "{devices=[1,8,16]<=[128] last_tile_dim_replicate}", 128, &r);
    expect(&r, 0, 2, 0, 0, 1);
    assert_non_null(strstr(r.text, "f32[8,8] collective-permute("));
    /* Two dims coarsened, one of them whole, another order: still one small permute. */
    reshard_case("f32[32,16]", "{devices=[4,2]<=[8]}",
                 "{devices=[2,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}", 8, &r);
    expect(&r, 0, ANY, 0, 0, ANY);
    assert_null(strstr(r.text, "f32[16,16] collective-permute("));
    /* Already in order: no permute at all. */
    reshard_case("f32[16,32]", "{devices=[2,4]<=[8]}",
                 "{devices=[1,2,4]<=[2,4]T(1,0) last_tile_dim_replicate}", 8, &r);
    expect(&r, 0, 2, 0, 0, 0);
}

static void test_rung_from_maximal(void **state) {
    (void)state;
    result r;
    reshard_case("f32[8,6]", "{maximal device=2}", "{devices=[2,2]<=[4]}", 4, &r);
    expect(&r, 1, 0, 0, 0, 0);
}

static void test_rung_full_remat_warns(void **state) {
    (void)state;
    result r;
    /* [2,2] -> [4,1] with 6 rows: no aligned refinement and no all-to-all: whole value. */
    reshard_case("f32[6,4]", "{devices=[2,2]<=[4]}", "{devices=[4,1]<=[4]}", 4, &r);
    assert_int_equal(r.n_warnings, 1);
    assert_int_equal(r.stats.n_full_remat, 1);
    assert_non_null(strstr(r.warning, "involuntary full rematerialization"));
    assert_non_null(strstr(r.warning, "%c"));
    assert_non_null(strstr(r.warning, "{devices=[2,2]<=[4]}"));
    assert_non_null(strstr(r.warning, "{devices=[4,1]<=[4]}"));
}

static void test_rung_many_pairs(void **state) {
    (void)state;
    /* Every pair of a few shardings of one uneven shape, both ways. */
    const char *sh[] = {"{replicated}",
                        "{devices=[4,1]<=[4]}",
                        "{devices=[1,4]<=[4]}",
                        "{devices=[2,2]<=[4]}",
                        "{devices=[2,2]<=[2,2]T(1,0)}",
                        "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                        "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
                        "{devices=[2,2]1,3,2,0}",
                        "{maximal device=3}"};
    int n = (int)(sizeof sh / sizeof sh[0]);
    result r;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            reshard_case("f32[7,5]", sh[i], sh[j], 4, &r);
            reshard_case("s32[8,4]", sh[i], sh[j], 4, &r);
        }
}

/* ------------------------------------------------------------------ handlers */

static const char *DOT_TMPL =
    "HloModule dot\n\nENTRY %%main (a: f32[%d,%d], b: f32[%d,%d]) -> f32[%d,%d] {\n"
    "  %%a = f32[%d,%d] parameter(0), sharding=%s\n"
    "  %%b = f32[%d,%d] parameter(1), sharding=%s\n"
    "  ROOT %%d = f32[%d,%d] dot(%%a, %%b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
    "sharding=%s\n}\n";

static void dot_case(int m, int k, int n, const char *sa, const char *sb, const char *so,
                     int devices, bool default_only, result *r) {
    char hlo[2048];
    snprintf(hlo, sizeof hlo, DOT_TMPL, m, k, k, n, m, n, m, k, sa, k, n, sb, m, n, so);
    run_case(hlo, devices, default_only, r);
}

static void test_dot_cases(void **state) {
    (void)state;
    result r, def;
    /* Contracting dims partitioned on both sides -> partial sums -> all-reduce. */
    dot_case(8, 16, 6, "{devices=[1,4]<=[4]}", "{devices=[4,1]<=[4]}", "{replicated}", 4, false,
             &r);
    expect(&r, 1, 0, 0, 0, 0);
    dot_case(8, 16, 6, "{devices=[1,4]<=[4]}", "{devices=[4,1]<=[4]}", "{replicated}", 4, true,
             &def);
    assert_true(gs_partition_stats_bytes(&r.stats) < gs_partition_stats_bytes(&def.stats));
    /* ... -> reduce-scatter when the result is tiled over the same devices. */
    dot_case(8, 16, 6, "{devices=[1,4]<=[4]}", "{devices=[4,1]<=[4]}", "{devices=[4,1]<=[4]}", 4,
             false, &r);
    expect(&r, 0, 0, 1, 0, 0);
    /* Non-contracting on the lhs: no communication. */
    dot_case(8, 16, 6, "{devices=[4,1]<=[4]}", "{replicated}", "{devices=[4,1]<=[4]}", 4, false,
             &r);
    expect(&r, 0, 0, 0, 0, 0);
    /* Non-contracting on the rhs. */
    dot_case(8, 16, 6, "{replicated}", "{devices=[1,2]<=[2]}", "{devices=[1,2]<=[2]}", 2, false,
             &r);
    expect(&r, 0, 0, 0, 0, 0);
    /* 2D: data x model (Megatron's first matmul). */
    dot_case(8, 16, 12, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
             "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}", "{devices=[2,2]<=[4]}", 4,
             false, &r);
    expect(&r, 0, 0, 0, 0, 0);
    /* ... and the second: contracting over model, result data-parallel. */
    dot_case(8, 12, 16, "{devices=[2,2]<=[4]}",
             "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
             "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 4, false, &r);
    expect(&r, 1, 0, 0, 0, 0);
    dot_case(8, 12, 16, "{devices=[2,2]<=[4]}",
             "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
             "{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 4, true, &def);
    assert_true(gs_partition_stats_bytes(&r.stats) < gs_partition_stats_bytes(&def.stats));
    /* Uneven contracting dim: padding masked to zero. */
    dot_case(5, 7, 3, "{devices=[1,4]<=[4]}", "{devices=[4,1]<=[4]}", "{replicated}", 4, false,
             &r);
    expect(&r, 1, 0, 0, 0, 0);
}

static void test_reduce_cases(void **state) {
    (void)state;
    result r, def;
    const char *tmpl =
        "HloModule red\n\n%%add (x: f32[], y: f32[]) -> f32[] {\n  %%x = f32[] parameter(0)\n"
        "  %%y = f32[] parameter(1)\n  ROOT %%s = f32[] %s(%%x, %%y)\n}\n\n"
        "ENTRY %%main (p: f32[7,5]) -> f32[5] {\n  %%p = f32[7,5] parameter(0), sharding=%s\n"
        "  %%z = f32[] constant(%s)\n"
        "  ROOT %%r = f32[5] reduce(%%p, %%z), dimensions={0}, to_apply=%%add, sharding=%s\n}\n";
    char hlo[2048];
    /* Uneven reduced dim, masked with the identity, partial sums all-reduced. */
    snprintf(hlo, sizeof hlo, tmpl, "add", "{devices=[4,1]<=[4]}", "0", "{replicated}");
    run_case(hlo, 4, false, &r);
    expect(&r, 1, 0, 0, 0, 0);
    run_case(hlo, 4, true, &def);
    assert_true(gs_partition_stats_bytes(&r.stats) < gs_partition_stats_bytes(&def.stats));
    snprintf(hlo, sizeof hlo, tmpl, "maximum", "{devices=[2,2]<=[4]}", "-inf",
             "{devices=[2,2]<=[4] last_tile_dim_replicate}");
    run_case(hlo, 4, false, &r);
    /* An init that is not the identity is applied once. */
    snprintf(hlo, sizeof hlo, tmpl, "add", "{devices=[4,1]<=[4]}", "2.5", "{replicated}");
    run_case(hlo, 4, false, &r);
    snprintf(hlo, sizeof hlo, tmpl, "multiply", "{devices=[2,1]<=[2]}", "3", "{devices=[2]<=[2]}");
    run_case(hlo, 2, false, &r);
}

static void test_shape_ops(void **state) {
    (void)state;
    result r;
    const char *hlo =
        "HloModule ops\n\n"
        "ENTRY %main (a: f32[6,4], b: f32[4]) -> (f32[4,6], f32[2,3,4], f32[9,4], f32[12,4], "
        "f32[3,4], f32[6,4], s32[6,4], f32[6,4]) {\n"
        "  %a = f32[6,4] parameter(0), sharding={devices=[2,2]<=[4]}\n"
        "  %b = f32[4] parameter(1), sharding={devices=[4]<=[4]}\n"
        "  %t = f32[4,6] transpose(%a), dimensions={1,0}, sharding={devices=[2,2]<=[4]}\n"
        "  %rs = f32[2,3,4] reshape(%a), sharding={devices=[2,1,2]<=[4]}\n"
        "  %z = f32[] constant(0)\n"
        "  %pd = f32[9,4] pad(%a, %z), padding=1_2x0_0, sharding={devices=[4,1]<=[4]}\n"
        "  %cc = f32[12,4] concatenate(%a, %a), dimensions={0}, sharding={devices=[1,4]<=[4]}\n"
        "  %sl = f32[3,4] slice(%a), slice={[1:4], [0:4]}, sharding={devices=[2,2]<=[4]}\n"
        "  %bc = f32[6,4] broadcast(%b), dimensions={1}, sharding={devices=[2,2]<=[4]}\n"
        "  %io = s32[6,4] iota(), iota_dimension=0, sharding={devices=[4,1]<=[4]}\n"
        "  %rv = f32[6,4] reverse(%a), dimensions={0}, sharding={devices=[2,2]<=[4]}\n"
        "  ROOT %out = (f32[4,6], f32[2,3,4], f32[9,4], f32[12,4], f32[3,4], f32[6,4], s32[6,4], "
        "f32[6,4]) tuple(%t, %rs, %pd, %cc, %sl, %bc, %io, %rv), sharding={{devices=[2,2]<=[4]}, "
        "{replicated}, {devices=[1,4]<=[4]}, {devices=[4,1]<=[4]}, {replicated}, "
        "{devices=[2,1,2]<=[4] last_tile_dim_replicate}, {devices=[4,1]<=[4]}, "
        "{devices=[2,2]<=[4]}}\n}\n";
    run_case(hlo, 4, false, &r);
    const char *ds =
        "HloModule ds\n\n"
        "ENTRY %main (a: f32[8,6], u: f32[2,6], i: s32[]) -> (f32[2,6], f32[8,6]) {\n"
        "  %a = f32[8,6] parameter(0), sharding={devices=[2,2]<=[4]}\n"
        "  %u = f32[2,6] parameter(1), sharding={devices=[1,4]<=[4]}\n"
        "  %i = s32[] parameter(2)\n"
        "  %z = s32[] constant(0)\n"
        "  %s = f32[2,6] dynamic-slice(%a, %i, %z), dynamic_slice_sizes={2,6}, "
        "sharding={devices=[1,4]<=[4]}\n"
        "  %d = f32[8,6] dynamic-update-slice(%a, %u, %i, %z), sharding={devices=[1,2,2]<=[4] "
        "last_tile_dim_replicate}\n"
        "  ROOT %o = (f32[2,6], f32[8,6]) tuple(%s, %d)\n}\n";
    run_case(ds, 4, false, &r);
}

static void test_halo_exchange(void **state) {
    (void)state;
    result r, def;
    const char *hlo =
        "HloModule halo\n\nENTRY %main (p: f32[64,8]) -> (f32[60,8], f32[70,8]) {\n"
        "  %p = f32[64,8] parameter(0), sharding={devices=[4,1]<=[4]}\n"
        "  %s = f32[60,8] slice(%p), slice={[3:63], [0:8]}, sharding={devices=[4,1]<=[4]}\n"
        "  %v = f32[] constant(1)\n"
        "  %q = f32[70,8] pad(%p, %v), padding=5_1x0_0, sharding={devices=[4,1]<=[4]}\n"
        "  ROOT %t = (f32[60,8], f32[70,8]) tuple(%s, %q), sharding={{devices=[4,1]<=[4]}, "
        "{devices=[4,1]<=[4]}}\n}\n";
    run_case(hlo, 4, false, &r);
    expect(&r, 0, 0, 0, 0, ANY);
    assert_true(r.count.n[GS_COLL_PERMUTE] >= 2);
    run_case(hlo, 4, true, &def);
    assert_true(gs_partition_stats_bytes(&r.stats) < gs_partition_stats_bytes(&def.stats));
}

static void test_elementwise_and_default(void **state) {
    (void)state;
    result r;
    const char *hlo =
        "HloModule ew\n\n%max (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
        "  %y = f32[] parameter(1)\n  ROOT %m = f32[] maximum(%x, %y)\n}\n\n"
        "ENTRY %main (a: f32[5,6], b: f32[5,6], m: f32[6]) -> (f32[5,6], pred[5,6], f32[5,3], "
        "f32[3,6], f32[5,6]) {\n"
        "  %a = f32[5,6] parameter(0), sharding={devices=[2,2]<=[4]}\n"
        "  %b = f32[5,6] parameter(1), sharding={devices=[1,4]<=[4]}\n"
        "  %s = f32[5,6] add(%a, %b), sharding={devices=[4,1]<=[4]}\n"
        "  %e = f32[5,6] exponential(%s)\n"
        "  %c = pred[5,6] compare(%a, %e), direction=LT, sharding={devices=[2,2]<=[4]}\n"
        "  %z = f32[] constant(-inf)\n"
        "  %w = f32[5,3] reduce-window(%e, %z), window={size=1x2 stride=1x2}, to_apply=%max, "
        "sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
        "  %idx = s32[3,1] constant({{0}, {2}, {4}})\n"
        "  %g = f32[3,6] gather(%e, %idx), offset_dims={1}, collapsed_slice_dims={0}, "
        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}, "
        "sharding={devices=[1,4]<=[4]}\n"
        "  %m = f32[6] parameter(2)\n  %one = f32[] constant(1)\n  %m0 = f32[] constant(0)\n"
        "  %st = u64[2] constant({1, 2})\n"
        "  %rbg = (u64[2], u32[5,6]) rng-bit-generator(%st), algorithm=rng_default, "
        "sharding={{replicated}, {devices=[2,2]<=[4]}}\n"
        "  %bits = u32[5,6] get-tuple-element(%rbg), index=1, sharding={devices=[2,2]<=[4]}\n"
        "  %bn = f32[5,6] convert(%bits), sharding={devices=[2,2]<=[4]}\n"
        "  ROOT %t = (f32[5,6], pred[5,6], f32[5,3], f32[3,6], f32[5,6]) tuple(%e, %c, %w, %g, "
        "%bn)\n}\n";
    run_case(hlo, 4, false, &r);
    assert_int_equal(r.stats.n_default, 1); /* rng-bit-generator: the default action */
    assert_int_equal(r.stats.n_replicated, 1); /* and it is reported */
}

/* batch-norm training and grad on an operand split over batch and height (uneven): statistics
 * as masked local sums, all-reduced (one all-reduce per pass; grad's two sums share one), no
 * gathers of the operand, fewer bytes than the default action. */
static void test_batch_norm(void **state) {
    (void)state;
    result r, def;
    const char *hlo =
        "HloModule bn\n\nENTRY %main (x: f32[5,3,4,3], s: f32[3], o: f32[3], dy: f32[5,3,4,3]) "
        "-> (f32[5,3,4,3], f32[5,3,4,3]) {\n"
        "  %x = f32[5,3,4,3] parameter(0), sharding={devices=[2,2,1,1]<=[4]}\n"
        "  %s = f32[3] parameter(1), sharding={replicated}\n"
        "  %o = f32[3] parameter(2), sharding={replicated}\n"
        "  %dy = f32[5,3,4,3] parameter(3), sharding={devices=[2,2,1,1]<=[4]}\n"
        "  %t = (f32[5,3,4,3], f32[3], f32[3]) batch-norm-training(%x, %s, %o), epsilon=0.001, "
        "feature_index=3, sharding={{devices=[2,2,1,1]<=[4]}, {replicated}, {replicated}}\n"
        "  %y = f32[5,3,4,3] get-tuple-element(%t), index=0, sharding={devices=[2,2,1,1]<=[4]}\n"
        "  %m = f32[3] get-tuple-element(%t), index=1, sharding={replicated}\n"
        "  %v = f32[3] get-tuple-element(%t), index=2, sharding={replicated}\n"
        "  %g = (f32[5,3,4,3], f32[3], f32[3]) batch-norm-grad(%x, %s, %m, %v, %dy), "
        "epsilon=0.001, feature_index=3, "
        "sharding={{devices=[2,2,1,1]<=[4]}, {replicated}, {replicated}}\n"
        "  %gx = f32[5,3,4,3] get-tuple-element(%g), index=0, sharding={devices=[2,2,1,1]<=[4]}\n"
        "  ROOT %r = (f32[5,3,4,3], f32[5,3,4,3]) tuple(%y, %gx), "
        "sharding={{devices=[2,2,1,1]<=[4]}, {devices=[2,2,1,1]<=[4]}}\n}\n";
    run_case(hlo, 4, false, &r);
    expect(&r, 3, 0, 0, 0, 0);
    assert_int_equal(r.stats.n_default, 0);
    run_case(hlo, 4, true, &def);
    assert_true(gs_partition_stats_bytes(&r.stats) < gs_partition_stats_bytes(&def.stats));
}

/* ------------------------------------------------------------------ partially manual */

/* Partitions without running (partially manual programs have no single-device reference);
 * returns the program's text (malloc'd), checked by the verifier. */
static char *partition_only(const char *hlo, int n) {
    gs_source *src = gs_source_from_string("pm.hlo", hlo);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    assert_non_null(m);
    gs_partition_options o = {0};
    o.num_partitions = n;
    gs_module *p = NULL;
    gs_status st = gs_partition(m, &o, &p, NULL, &d);
    if (st != GS_OK) gs_diags_render(&d, stderr);
    assert_int_equal(st, GS_OK);
    assert_int_equal(gs_module_verify(p, &d), GS_OK);
    char *text = gs_module_to_string(p);
    gs_diags_free(&d);
    gs_module_free(p);
    gs_module_free(m);
    gs_source_free(src);
    return text;
}

static void test_partial_manual(void **state) {
    (void)state;
    /* Manual groups {0,1} and {2,3} (the manual subgroup's devices); within each, dim 0 is
     * split in two: the partial sums of the reduce are combined inside each group only. */
    char *t = partition_only(
        "HloModule pm\n\n%sum (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
        "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n\n"
        "ENTRY %e (p: f32[2,2]) -> f32[2] {\n"
        "  %z = f32[] constant(0), sharding={devices=[2,2]<=[4] last_tile_dims={manual, "
        "replicated}}\n"
        "  %p = f32[2,2] parameter(0), sharding={devices=[2,1,2]<=[2,2]T(1,0) "
        "last_tile_dims={manual}}\n"
        "  ROOT %r = f32[2] reduce(%p, %z), dimensions={0}, to_apply=%sum, "
        "sharding={devices=[1,2,2]<=[4] last_tile_dims={manual, replicated}}\n}\n",
        4);
    assert_non_null(strstr(t, "all-reduce("));
    assert_non_null(strstr(t, "replica_groups=[2,2]<=[4]"));
    free(t);
    /* A whole value entering a partially manual region is cut per group by partition-id. */
    t = partition_only(
        "HloModule pm2\n\nENTRY %e () -> f32[4,2] {\n"
        "  %c = f32[] constant(1), sharding={replicated}\n"
        "  %b = f32[4,2] broadcast(%c), dimensions={}, sharding={devices=[2,1,2]<=[4] "
        "last_tile_dims={manual}}\n"
        "  ROOT %a = f32[4,2] add(%b, %b), sharding={devices=[2,1,2]<=[4] "
        "last_tile_dims={manual}}\n}\n",
        4);
    assert_null(strstr(t, "all-gather("));
    assert_non_null(strstr(t, "f32[2,2] add("));
    free(t);
}

/* ------------------------------------------------------------------ bad input */

static void expect_error(const char *hlo, int n, const char *needle) {
    gs_source *src = gs_source_from_string("bad.hlo", hlo);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    assert_non_null(m);
    gs_partition_options o = {0};
    o.num_partitions = n;
    gs_module *p = NULL;
    assert_int_equal(gs_partition(m, &o, &p, NULL, &d), GS_ERR);
    assert_null(p);
    assert_true(d.n_errors > 0);
    if (!strstr(d.items[0].message, needle))
        fail_msg("expected an error containing '%s', got '%s'", needle, d.items[0].message);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

static void test_bad_input(void **state) {
    (void)state;
    expect_error("HloModule b\n\nENTRY %m (p: f32[8]) -> f32[8] {\n"
                 "  ROOT %p = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n}\n",
                 8, "spans 4 devices, but the program is partitioned for 8");
    expect_error("HloModule b, num_partitions=4\n\nENTRY %m (p: f32[8]) -> f32[8] {\n"
                 "  ROOT %p = f32[8] parameter(0)\n}\n",
                 2, "num_partitions=4");
    expect_error("HloModule b\n\nENTRY %m (p: f32[8]) -> f32[8] {\n"
                 "  ROOT %p = f32[8] parameter(0), sharding={maximal device=5}\n}\n",
                 4, "device 5");
}

/* A module with an unbounded dynamic dim ('?'), which XLA's verifier accepts (its shapes are
 * compatible with the inferred ones), through the library calls an embedder makes: each entry
 * point that needs every size returns a located error, none reaches an assertion (issue 23). */
static void test_unbounded_dims_library(void **state) {
    (void)state;
    const char *hlo = "HloModule module\nENTRY %elementwise {\n"
                      "  %param0 = f32[5,7,11,13]{3,2,1,0} parameter(0), "
                      "sharding={devices=[1,2,2,1]0,1,2,3}\n"
                      "  %param1 = f32[5,7,11,13]{3,2,1,0} parameter(1)\n"
                      "  %add = f32[5,?,11,13]{3,2,1,0} add(%param0, %param1)\n"
                      "  ROOT %copy = f32[5,7,11,13]{3,2,1,0} copy(%add)\n}\n";
    gs_source *src = gs_source_from_string("unbounded.hlo", hlo);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    assert_non_null(m);
    assert_int_equal(gs_module_verify(m, &d), GS_OK);
    gs_propagate_options po = {0};
    po.is_spmd = true;
    assert_int_equal(gs_propagate(m, &po, &d), GS_OK);
    const char *want = "needs every dimension's size, but add has shape f32[5,?,11,13]";
    gs_partition_options o = {0};
    o.num_partitions = 4;
    gs_module *p = NULL;
    assert_int_equal(gs_partition(m, &o, &p, NULL, &d), GS_ERR);
    assert_null(p);
    assert_int_equal(d.n_errors, 1);
    assert_non_null(strstr(d.items[0].message, want));
    assert_int_equal(d.items[0].span.line, 5);
    gs_machine mc;
    assert_true(gs_machine_builtin("tpu-v3", &mc));
    gs_step_cost c;
    assert_int_equal(gs_cost_step(m, &mc, &c, &d), GS_ERR);
    assert_int_equal(d.n_errors, 2);
    assert_non_null(strstr(d.items[1].message, want));
    gs_value *args[2] = {NULL, NULL}, *r = NULL;
    assert_int_equal(gs_interp_eval(m, NULL, args, 2, &r, &d), GS_ERR);
    assert_null(r);
    assert_int_equal(d.n_errors, 3);
    assert_non_null(strstr(d.items[2].message, want));
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

/* ------------------------------------------------------------------ fault injection */

static void test_alloc_failures(void **state) {
    (void)state;
    /* Fail the output module's k-th allocation for every k: a clean error, never a crash (the
     * sanitizer build also checks for leaks). */
    const char *hlo =
        "HloModule f\n\n%add (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
        "  %y = f32[] parameter(1)\n  ROOT %s = f32[] add(%x, %y)\n}\n\n"
        "ENTRY %main (a: f32[8,16], b: f32[16,6]) -> (f32[8,6], f32[6]) {\n"
        "  %a = f32[8,16] parameter(0), sharding={devices=[2,2]<=[4]}\n"
        "  %b = f32[16,6] parameter(1), sharding={devices=[4,1]3,1,0,2}\n"
        "  %d = f32[8,6] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
        "sharding={devices=[4,1]<=[4]}\n"
        "  %z = f32[] constant(0)\n"
        "  %r = f32[6] reduce(%d, %z), dimensions={0}, to_apply=%add\n"
        "  %t = f32[8,6] transpose(%d), dimensions={0,1}, sharding={devices=[1,4]<=[4]}\n"
        "  ROOT %o = (f32[8,6], f32[6]) tuple(%t, %r)\n}\n";
    gs_source *src = gs_source_from_string("f.hlo", hlo);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    assert_non_null(m);
    int failures = 0;
    for (long k = 1;; k++) {
        gs_partition_options o = {0};
        o.num_partitions = 4;
        o.fail_alloc_at = k;
        gs_module *p = NULL;
        gs_status st = gs_partition(m, &o, &p, NULL, &d);
        gs_diags_clear(&d);
        if (st == GS_OK) {
            gs_module_free(p);
            break;
        }
        assert_null(p);
        failures++;
        assert_true(k < 100000);
    }
    assert_true(failures > 10);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unbounded_dims_library),
        cmocka_unit_test(test_rung_equal),
        cmocka_unit_test(test_rung_all_gather),
        cmocka_unit_test(test_rung_dynamic_slice),
        cmocka_unit_test(test_rung_collective_permute),
        cmocka_unit_test(test_rung_permute_before_gather),
        cmocka_unit_test(test_rung_all_to_all_minor_factor),
        cmocka_unit_test(test_rung_all_to_all),
        cmocka_unit_test(test_rung_partial_replication),
        cmocka_unit_test(test_rung_from_maximal),
        cmocka_unit_test(test_rung_full_remat_warns),
        cmocka_unit_test(test_rung_many_pairs),
        cmocka_unit_test(test_dot_cases),
        cmocka_unit_test(test_reduce_cases),
        cmocka_unit_test(test_shape_ops),
        cmocka_unit_test(test_halo_exchange),
        cmocka_unit_test(test_elementwise_and_default),
        cmocka_unit_test(test_batch_norm),
        cmocka_unit_test(test_partial_manual),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
