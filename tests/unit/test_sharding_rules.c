/*
 * test_sharding_rules.c — per-op factor rules (Shardy's OpShardingRule) built from the op table
 * and each instruction's attributes: elementwise, broadcast, transpose, reshape, dot (batch,
 * free and contracting factors), reduce, convolution, slice/pad/concatenate, sort, gather and the
 * always-correct default; and a walk of the op table naming which families have a rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gspmd/sharding.h"
#include "gspmd/text.h"

static const char *MODULE =
    "HloModule rules\n\n"
    "add_f32 {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(x, y)\n"
    "}\n\n"
    "lt {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT c = pred[] compare(a, b), direction=LT\n"
    "}\n\n"
    "ENTRY e {\n"
    "  p0 = f32[4,8] parameter(0)\n"
    "  p1 = f32[4,8] parameter(1)\n"
    "  w = f32[8,16] parameter(2)\n"
    "  v = f32[8] parameter(3)\n"
    "  img = f32[2,10,10,3] parameter(4)\n"
    "  ker = f32[3,3,3,5] parameter(5)\n"
    "  bl = f32[6,4,8] parameter(6)\n"
    "  br = f32[6,8,5] parameter(7)\n"
    "  idx = s32[5,1] parameter(8)\n"
    "  pr = pred[] parameter(9)\n"
    "  q = f32[2,3] parameter(10)\n"
    "  zero = f32[] constant(0)\n"
    "  add = f32[4,8] add(p0, p1)\n"
    "  sel = f32[4,8] select(pr, p0, p1)\n"
    "  bc = f32[3,8,4] broadcast(v), dimensions={1}\n"
    "  tr = f32[8,4] transpose(p0), dimensions={1,0}\n"
    "  rs = f32[32] reshape(p0)\n"
    "  rs2 = f32[2,2,8] reshape(p0)\n"
    "  rs3 = f32[8,4] reshape(p0)\n"
    "  rs4 = f32[3,2] reshape(q)\n"
    "  dot = f32[4,16] dot(p0, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  bdot = f32[6,4,5] dot(bl, br), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
    "rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
    "  red = f32[4] reduce(p0, zero), dimensions={1}, to_apply=add_f32\n"
    "  conv = f32[2,10,10,5] convolution(img, ker), window={size=3x3 pad=1_1x1_1}, "
    "dim_labels=b01f_01io->b01f\n"
    "  sl = f32[4,4] slice(p0), slice={[0:4], [2:6]}\n"
    "  pd = f32[6,8] pad(p0, zero), padding=1_1x0_0\n"
    "  cc = f32[8,8] concatenate(p0, p1), dimensions={0}\n"
    "  so = f32[4,8] sort(p0), dimensions={1}, to_apply=lt\n"
    "  ga = f32[5,8] gather(p0, idx), offset_dims={1}, collapsed_slice_dims={0}, "
    "start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}\n"
    "  io = s32[4,8] iota(), iota_dimension=1\n"
    "  tu = (f32[4,8], f32[8]) tuple(add, v)\n"
    "  ROOT gte = f32[4,8] get-tuple-element(tu), index=0\n"
    "}\n";

/* The printed rule of instruction name. */
static char *rule_of(gs_module *m, const char *name, bool *is_default) {
    gs_instr *in = gs_module_find_instr(m, name);
    assert_non_null(in);
    gs_op_rule *r;
    assert_int_equal(gs_op_rule_build(&m->arena, in, &r), GS_OK);
    if (is_default) *is_default = r->is_default;
    gs_sb sb = {0};
    gs_op_rule_print(&sb, r);
    return gs_sb_take(&sb);
}

static void expect_rule(gs_module *m, const char *name, const char *want) {
    bool def;
    char *got = rule_of(m, name, &def);
    if (strcmp(got, want) != 0) fprintf(stderr, "%s:\n  got  %s\n  want %s\n", name, got, want);
    assert_string_equal(got, want);
    assert_false(def);
    free(got);
}

static void test_rules(void **state) {
    (void)state;
    gs_source *src = gs_source_from_string("rules.hlo", MODULE);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    if (!m) gs_diags_render(&d, stderr);
    assert_non_null(m);
    expect_rule(m, "add", "([i, j], [i, j])->([i, j]) {i=4, j=8}");
    expect_rule(m, "sel", "([], [i, j], [i, j])->([i, j]) {i=4, j=8}");
    expect_rule(m, "bc", "([j])->([i, j, k]) {i=3, j=8, k=4}");
    expect_rule(m, "tr", "([j, i])->([i, j]) {i=8, j=4}");
    expect_rule(m, "rs", "([i, j])->([ij]) {i=4, j=8}");
    expect_rule(m, "rs2", "([ij, k])->([i, j, k]) {i=2, j=2, k=8}");
    expect_rule(m, "rs3", "([i, jk])->([ij, k]) {i=4, j=2, k=4}");
    expect_rule(m, "rs4",
                "([i, j])->([k, l]) {i=2, j=3, k=3, l=2} "
                "need_replication={i, j, k, l}");
    expect_rule(m, "dot", "([i, k], [k, j])->([i, j]) {i=4, j=16, k=8} reduction={k}");
    expect_rule(m, "bdot",
                "([i, j, l], [i, l, k])->([i, j, k]) {i=6, j=4, k=5, l=8} "
                "reduction={l}");
    expect_rule(m, "red", "([i, j], [])->([i]) {i=4, j=8} reduction={j}");
    expect_rule(m, "conv",
                "([i, l, o, j], [n, q, j, k])->([i, m, p, k]) {i=2, j=3, k=5, l=10, "
                "m=10, n=3, o=10, p=10, q=3} reduction={j} permutation={l, m, o, p} "
                "need_replication={n, q}");
    expect_rule(m, "sl", "([i, k])->([i, j]) {i=4, j=4, k=8} permutation={j, k}");
    expect_rule(m, "pd", "([j, k], [])->([i, k]) {i=6, j=4, k=8} permutation={i, j}");
    expect_rule(m, "cc",
                "([j, l], [k, l])->([i, l]) {i=8, j=4, k=4, l=8} "
                "permutation={i, j, k}");
    expect_rule(m, "so", "([i, j])->([i, j]) {i=4, j=8} need_replication={j}");
    expect_rule(m, "ga", "([j, k], [i, 1])->([i, k]) {i=5, j=4, k=8} need_replication={j}");
    expect_rule(m, "io", "()->([i, j]) {i=4, j=8}");
    bool def;
    char *g = rule_of(m, "gte", &def);
    assert_true(def);
    assert_string_equal(g, "([])->([i, j]) {i=4, j=8} need_replication={i, j}");
    free(g);
    gs_module_free(m);
    gs_source_free(src);
    gs_diags_free(&d);
}

/* Walks the op table: each family either has a rule or takes the default; the families every
 * pass leans on must have one. */
static void test_op_table_walk(void **state) {
    (void)state;
    static const gs_op_family must[] = {
        GS_FAM_UNARY,       GS_FAM_BINARY,        GS_FAM_TERNARY,       GS_FAM_COMPARE,
        GS_FAM_CONVERT,     GS_FAM_BROADCAST,     GS_FAM_RESHAPE,       GS_FAM_TRANSPOSE,
        GS_FAM_REVERSE,     GS_FAM_SLICE,         GS_FAM_DYNAMIC_SLICE, GS_FAM_DYNAMIC_UPDATE_SLICE,
        GS_FAM_CONCATENATE, GS_FAM_PAD,           GS_FAM_DOT,           GS_FAM_CONVOLUTION,
        GS_FAM_REDUCE,      GS_FAM_REDUCE_WINDOW, GS_FAM_SORT,          GS_FAM_GATHER,
        GS_FAM_PARAMETER,   GS_FAM_CONSTANT,      GS_FAM_IOTA,
    };
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        if (!gs_op_family_has_rule(must[i]))
            fprintf(stderr, "family %s has no rule\n", gs_op_family_name(must[i]));
        assert_true(gs_op_family_has_rule(must[i]));
    }
    int with = 0, without = 0;
    for (int op = 0; op < GS_N_OPCODES; op++) {
        if (gs_op_family_has_rule(gs_op_info_of((gs_opcode)op)->family))
            with++;
        else
            without++;
    }
    fprintf(stderr, "op table: %d opcodes with a family rule, %d on the default rule\n", with,
            without);
    assert_true(with > without);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_op_table_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
