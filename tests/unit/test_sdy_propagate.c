/*
 * test_sdy_propagate.c — Shardy's propagation (src/propagate/sdy/) on small StableHLO modules,
 * each expectation the sharding Shardy's own lit tests give (basic_propagation.mlir,
 * aggressive_propagation.mlir, op_priority_propagation.mlir, user_priority_propagation.mlir,
 * openxla/shardy a0277a83), worked out by hand from its rules: factors of each op, axes kept
 * only where every tensor agrees (basic), the largest tensor's axes winning (aggressive),
 * sub-axes where an axis overflows a factor, closed dims never extended.
 *
 * A sharding is checked as Shardy prints its body: `[{"a", ?}, {"b"}]`, `replicated={...}`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gspmd/propagate.h"
#include "gspmd/sharding.h"
#include "gspmd/text.h"

/* Shardy's text of a list of axis refs (without braces). */
static void print_axes(gs_sb *sb, const gs_mesh *m, const gs_axis_list *l) {
    for (int i = 0; i < l->n; i++) {
        const gs_axis_ref *a = &l->v[i];
        gs_sb_printf(sb, "%s\"%s\"", i ? ", " : "", m->names[a->axis]);
        if (a->pre_size) gs_sb_printf(sb, ":(%lld)%lld", (long long)a->pre_size, (long long)a->size);
    }
}

/* `[{"a", ?}, {}]` (and `, replicated={...}`) of leaf `leaf` of an instruction's sharding. */
static char *sdy_text(const gs_sharding *s) {
    gs_sb sb = {0};
    if (!s || !s->named) {
        gs_sb_puts(&sb, s ? "(not named)" : "(none)");
        return gs_sb_take(&sb);
    }
    const gs_named *n = s->named;
    gs_sb_putc(&sb, '[');
    for (int d = 0; d < n->n_dims; d++) {
        gs_sb_puts(&sb, d ? ", {" : "{");
        print_axes(&sb, &n->mesh, &n->dims[d]);
        if (n->dims[d].open) gs_sb_puts(&sb, n->dims[d].n ? ", ?" : "?");
        gs_sb_putc(&sb, '}');
        if (n->priorities && n->priorities[d] >= 0)
            gs_sb_printf(&sb, "p%lld", (long long)n->priorities[d]);
    }
    gs_sb_putc(&sb, ']');
    if (n->replicated.n) {
        gs_sb_puts(&sb, ", replicated={");
        print_axes(&sb, &n->mesh, &n->replicated);
        gs_sb_putc(&sb, '}');
    }
    return gs_sb_take(&sb);
}

static gs_module *parse(const char *text) {
    gs_source *src = gs_source_from_string("t.mlir", text);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    if (!m) gs_diags_render(&d, stderr);
    assert_non_null(m);
    gs_diags_free(&d);
    return m;
}

/* Frees m and the source it was read from. */
static void release(gs_module *m) {
    gs_source *src = (gs_source *)m->source;
    gs_module_free(m);
    gs_source_free(src);
}

static void propagate(gs_module *m, gs_sdy_options o) {
    gs_diags d = {0};
    assert_int_equal(gs_sdy_propagate(m, &o, &d), GS_OK);
    gs_diags_free(&d);
}

/* The sharding of the instruction named name (leaf 0 of a tuple: `name` + "#k" not needed). */
static void expect(gs_module *m, const char *name, const char *want) {
    gs_instr *in = gs_module_find_instr(m, name);
    if (!in) fprintf(stderr, "no instruction %s\n", name);
    assert_non_null(in);
    char *got = sdy_text(gs_instr_get_sharding(in));
    if (strcmp(got, want) != 0) fprintf(stderr, "%s:\n  got  %s\n  want %s\n", name, got, want);
    assert_string_equal(got, want);
    free(got);
}

static const gs_sdy_options BASIC = {GS_SDY_BASIC, false, false, false, false, false};
static const gs_sdy_options AGGRESSIVE = {GS_SDY_AGGRESSIVE, false, false, false, false, false};
static const gs_sdy_options USER_PRIORITY = {GS_SDY_AGGRESSIVE, false, true, true, false, false};

/* An add then a dot: the add's operands agree on both dims; the dot passes "a" on its free
 * dim, "b" (the contracting dim) back to the other operand, and the result takes only "a". */
static void test_simple(void **state) {
    (void)state;
    gs_module *m = parse(
        "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2]>\n"
        "func.func @simple(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}, "
        "{\"b\"}]>}, %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {\n"
        "  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>\n"
        "  %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : "
        "(tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>\n"
        "  return %1 : tensor<8x16xf32>\n"
        "}\n");
    propagate(m, BASIC);
    expect(m, "arg0", "[{\"a\"}, {\"b\"}]");
    expect(m, "arg1", "[{\"a\", ?}, {\"b\", ?}]");
    expect(m, "arg2", "[{\"b\", ?}, {?}]");
    expect(m, "add", "[{\"a\", ?}, {\"b\", ?}]");
    expect(m, "dot", "[{\"a\", ?}, {?}]");
    release(m);
}

/* A dim sharded over more axes than the engine holds (9 axes of size 2 over one dim of 512):
 * the value is left as written and no op propagates through it; the rest still propagates. */
static void test_too_many_axes(void **state) {
    (void)state;
    gs_module *m = parse(
        "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2, \"c\"=2, \"d\"=2, \"e\"=2, \"f\"=2, "
        "\"g\"=2, \"h\"=2, \"i\"=2, \"j\"=2]>\n"
        "func.func @f(%arg0: tensor<512x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\", "
        "\"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\"}, {}]>}, "
        "%arg1: tensor<512x4xf32>, %arg2: tensor<512x4xf32> {sdy.sharding = "
        "#sdy.sharding<@mesh, [{}, {\"j\"}]>}) -> tensor<512x4xf32> {\n"
        "  %0 = stablehlo.add %arg0, %arg1 : tensor<512x4xf32>\n"
        "  %1 = stablehlo.multiply %0, %arg2 : tensor<512x4xf32>\n"
        "  return %1 : tensor<512x4xf32>\n"
        "}\n");
    propagate(m, BASIC);
    expect(m, "arg0", "[{\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", "
                      "\"i\"}, {}]");
    expect(m, "multiply", "[{?}, {\"j\", ?}]");
    expect(m, "add", "[{?}, {\"j\", ?}]");
    release(m);
}

/* ["a", "b"] against [?, "b"]: "a" reaches the add's dim 0, "b" conflicts with the other dim's
 * "b" so the first dim keeps only "a". */
static void test_some_axes_incompatible(void **state) {
    (void)state;
    gs_module *m = parse(
        "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2]>\n"
        "func.func @f(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\", \"b\"}, "
        "{}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
        "  %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{?}, {\"b\", ?}]>]>} : tensor<8x8xf32>\n"
        "  return %0 : tensor<8x8xf32>\n"
        "}\n");
    propagate(m, BASIC);
    expect(m, "arg1", "[{\"a\", ?}, {?}]");
    expect(m, "add", "[{\"a\", ?}, {\"b\", ?}]");
    release(m);
}

/* A reshape splitting a dim: "a" (size 4) splits into sub-axes over the factors 2 and 4; with
 * "a" then "b" (4 x 4) on 8 elements the minor factor takes "a":(2)2 and overflows into "b". */
static void test_reshape_sub_axes(void **state) {
    (void)state;
    gs_module *m = parse(
        "sdy.mesh @m44 = <[\"a\"=4, \"b\"=4]>\n"
        "sdy.mesh @m42 = <[\"a\"=4, \"b\"=2]>\n"
        "func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@m42, [{\"a\"}]>}, "
        "%arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@m44, [{\"a\", \"b\"}]>}) -> "
        "(tensor<2x4xf32>, tensor<2x4xf32>) {\n"
        "  %0 = stablehlo.reshape %arg0 : (tensor<8xf32>) -> tensor<2x4xf32>\n"
        "  %1 = stablehlo.reshape %arg1 : (tensor<8xf32>) -> tensor<2x4xf32>\n"
        "  return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>\n"
        "}\n");
    propagate(m, BASIC);
    expect(m, "reshape", "[{\"a\":(1)2, ?}, {\"a\":(2)2, ?}]");
    expect(m, "reshape.1", "[{\"a\":(1)2, ?}, {\"a\":(2)2, \"b\", ?}]");
    release(m);
}

/* Aggressive propagation resolves the conflict on dim 1 ("a" on one operand, nothing on the
 * other but "a" already used on its dim 0): the result takes "a" on dim 1 only. */
static void test_aggressive_conflicts(void **state) {
    (void)state;
    gs_module *m = parse(
        "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2, \"c\"=2]>\n"
        "func.func @f(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\", ?}, "
        "{?}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"b\", ?}, "
        "{\"a\", ?}]>}) -> tensor<8x8xf32> {\n"
        "  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>\n"
        "  return %0 : tensor<8x8xf32>\n"
        "}\n");
    propagate(m, AGGRESSIVE);
    expect(m, "arg0", "[{\"a\", ?}, {?}]");
    expect(m, "arg1", "[{\"b\", ?}, {\"a\", ?}]");
    expect(m, "add", "[{?}, {\"a\", ?}]");
    release(m);
}

/* Operands split along different dims (docs/shardy.md): basic propagation leaves the conflict
 * alone; aggressive takes the first of two equally large sources, and carries it to the tanh. */
static void test_conflict_basic_and_aggressive(void **state) {
    (void)state;
    static const char *text =
        "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2]>\n"
        "func.func @main(%x: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}, {}]>}, "
        "%y: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"a\"}]>}) -> "
        "tensor<8x8xf32> {\n"
        "  %0 = stablehlo.add %x, %y : tensor<8x8xf32>\n"
        "  %1 = stablehlo.tanh %0 : tensor<8x8xf32>\n"
        "  return %1 : tensor<8x8xf32>\n"
        "}\n";
    gs_module *m = parse(text);
    propagate(m, BASIC);
    expect(m, "add", "(none)");
    expect(m, "tanh", "(none)");
    release(m);
    m = parse(text);
    propagate(m, AGGRESSIVE);
    expect(m, "add", "[{\"a\", ?}, {?}]");
    expect(m, "tanh", "[{\"a\", ?}, {?}]");
    release(m);
}

/* A sharding group (sdy.sharding_group, HLO's shard_as): add0 takes "a" from the constraint on
 * its user, and add2, in add0's group, takes the same sharding though nothing connects them
 * (Shardy's sharding_group_propagation.mlir). */
static void test_sharding_group(void **state) {
    (void)state;
    gs_module *m = parse("HloModule m\n"
                         "ENTRY e {\n"
                         "  a0 = f32[16,16] parameter(0)\n"
                         "  a1 = f32[16,16] parameter(1)\n"
                         "  add0 = f32[16,16] add(a0, a0), sharding={unknown shard_as 32}\n"
                         "  c = f32[16,16] custom-call(add0), custom_call_target=\"Sharding\", "
                         "sharding={mesh['a'=2] [{}, {'a'}]}\n"
                         "  add2 = f32[16,16] add(a1, a1), sharding={unknown shard_as 32}\n"
                         "  ROOT t = (f32[16,16], f32[16,16]) tuple(c, add2)\n"
                         "}\n");
    propagate(m, BASIC);
    expect(m, "add0", "[{?}, {\"a\", ?}]");
    expect(m, "add2", "[{?}, {\"a\", ?}]");
    expect(m, "a1", "[{?}, {\"a\", ?}]");
    release(m);
}

/* User priorities: the divide's p0 sharding ("c" on dim 0, "b" replicated) goes first and wins
 * over the argument's p1 shardings; "b" reaches dim 1 of the adds only in the second round. */
static void test_user_priority(void **state) {
    (void)state;
    gs_module *m = parse(
        "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2, \"c\"=2]>\n"
        "func.func @f(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}p1, "
        "{\"b\"}p1]>}, %arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32>, %arg3: tensor<8x8xf32>) "
        "-> tensor<8x8xf32> {\n"
        "  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>\n"
        "  %1 = stablehlo.add %0, %arg2 : tensor<8x8xf32>\n"
        "  %2 = stablehlo.divide %1, %arg3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, "
        "[{\"c\"}p0, {?}], replicated={\"b\"}>]>} : tensor<8x8xf32>\n"
        "  return %2 : tensor<8x8xf32>\n"
        "}\n");
    propagate(m, USER_PRIORITY);
    expect(m, "arg0", "[{\"a\"}, {\"b\"}]");
    expect(m, "arg1", "[{\"c\", ?}, {\"b\", ?}]");
    expect(m, "arg2", "[{\"c\", ?}, {\"b\", ?}]");
    expect(m, "arg3", "[{\"c\", ?}, {?}]");
    expect(m, "add", "[{\"c\", ?}, {\"b\", ?}]");
    expect(m, "divide", "[{\"c\"}, {?}], replicated={\"b\"}");
    release(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple),
        cmocka_unit_test(test_too_many_axes),
        cmocka_unit_test(test_some_axes_incompatible),
        cmocka_unit_test(test_reshape_sub_axes),
        cmocka_unit_test(test_aggressive_conflicts),
        cmocka_unit_test(test_conflict_basic_and_aggressive),
        cmocka_unit_test(test_user_priority),
        cmocka_unit_test(test_sharding_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
