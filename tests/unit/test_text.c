/*
 * test_text.c — the HLO text parser and printer: canonical printing of every attribute kind,
 * the print fixed point, literals, shapes, replica groups, located errors, and fault injection
 * (every allocation of a parse may fail: a clean error, never a crash or a leak).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gspmd/numeric.h"
#include "gspmd/text.h"

/* Parses text; asserts success. The source is leaked into *srcp for the caller to free. */
static gs_module *parse_ok(const char *text, gs_source **srcp) {
    gs_source *src = gs_source_from_string("test.hlo", text);
    assert_non_null(src);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    if (!m) gs_diags_render(&d, stderr);
    assert_non_null(m);
    gs_diags_free(&d);
    *srcp = src;
    return m;
}

/* Parses text, expecting failure; returns the first message (malloc'd) and its line/col. */
static char *parse_err(const char *text, uint32_t *line, uint32_t *col) {
    gs_source *src = gs_source_from_string("test.hlo", text);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    assert_null(m);
    assert_true(d.n >= 1);
    char *msg = strdup(d.items[0].message);
    *line = d.items[0].span.line;
    *col = d.items[0].span.col;
    gs_diags_free(&d);
    gs_source_free(src);
    return msg;
}

static char *print_of(const char *text) {
    gs_source *src;
    gs_module *m = parse_ok(text, &src);
    char *s = gs_module_to_string(m);
    gs_module_free(m);
    gs_source_free(src);
    return s;
}

/* print(parse(text)) == want, and print is a fixed point. */
static void check_canonical(const char *text, const char *want) {
    char *once = print_of(text);
    if (strcmp(once, want) != 0) fprintf(stderr, "--- got:\n%s--- want:\n%s", once, want);
    assert_string_equal(once, want);
    char *twice = print_of(once);
    assert_string_equal(once, twice);
    free(once);
    free(twice);
}

static void test_canonical_form(void **state) {
    (void)state;
    check_canonical(
        "HloModule m, num_partitions=4\n"
        "add {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y)\n}\n"
        "ENTRY main {\n"
        "  p = f32[4,8]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}\n"
        "  c = f32[] constant(0)\n"
        "  r = f32[4] reduce(p, c), dimensions={1}, to_apply=add, metadata={op_name=\"r\"   source_line=3}\n"
        "  s = f32[2,4]{1,0} slice(p), slice={[0:4:2], [0:8:2]}\n"
        "  w = f32[2,4] reduce-window(p, c), window={size=2x2 stride=2x2 pad=0_0x0_0}, to_apply=add\n"
        "  ar = f32[4] all-reduce(r), replica_groups=[2,2]<=[2,2]T(1,0), channel_id=1, "
        "use_global_device_ids=true, to_apply=add\n"
        "  cp = f32[4] collective-permute(ar), source_target_pairs={{0,1},{1,0}}, channel_id=2\n"
        "  pd = f32[5,9] pad(p, c), padding=0_1x-1_0_1\n"
        "  ROOT t = (f32[4], f32[2,4], f32[2,4], f32[4], f32[5,9]) tuple(r, s, w, cp, pd)\n"
        "}\n",
        "HloModule m, num_partitions=4\n"
        "\n"
        "%add (x: f32[], y: f32[]) -> f32[] {\n"
        "  %x = f32[] parameter(0)\n"
        "  %y = f32[] parameter(1)\n"
        "  ROOT %s = f32[] add(%x, %y)\n"
        "}\n"
        "\n"
        "ENTRY %main (p: f32[4,8]{1,0}) -> (f32[4], f32[2,4], f32[2,4], f32[4], f32[5,9]) {\n"
        "  %p = f32[4,8]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}\n"
        "  %c = f32[] constant(0)\n"
        "  %r = f32[4] reduce(%p, %c), dimensions={1}, to_apply=%add, "
        "metadata={op_name=\"r\" source_line=3}\n"
        "  %s = f32[2,4]{1,0} slice(%p), slice={[0:4:2], [0:8:2]}\n"
        "  %w = f32[2,4] reduce-window(%p, %c), window={size=2x2 stride=2x2}, to_apply=%add\n"
        "  %ar = f32[4] all-reduce(%r), channel_id=1, replica_groups=[2,2]<=[2,2]T(1,0), "
        "use_global_device_ids=true, to_apply=%add\n"
        "  %cp = f32[4] collective-permute(%ar), channel_id=2, source_target_pairs={{0,1},{1,0}}\n"
        "  %pd = f32[5,9] pad(%p, %c), padding=0_1x-1_0_1\n"
        "  ROOT %t = (f32[4], f32[2,4], f32[2,4], f32[4], f32[5,9]) tuple(%r, %s, %w, %cp, %pd)\n"
        "}\n");
}

static void test_conv_dot_gather_attrs(void **state) {
    (void)state;
    check_canonical(
        "HloModule m\n"
        "ENTRY e {\n"
        "  a = f32[1,5,5,2] parameter(0)\n"
        "  k = f32[3,3,2,4] parameter(1)\n"
        "  c = f32[1,3,3,4] convolution(a, k), window={size=3x3 stride=2x2 pad=1_1x1_1 "
        "lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f\n"
        "  x = f32[2,3,4] parameter(2)\n"
        "  y = f32[2,4,5] parameter(3)\n"
        "  d = f32[2,3,5] dot(x, y), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
        "rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={highest,default}\n"
        "  i = s32[2,1] parameter(4)\n"
        "  g = f32[2,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0,2}, "
        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3,1}, indices_are_sorted=true\n"
        "  ROOT t = (f32[1,3,3,4], f32[2,3,5], f32[2,3]) tuple(c, d, g)\n"
        "}\n",
        "HloModule m\n"
        "\n"
        "ENTRY %e (a: f32[1,5,5,2], k: f32[3,3,2,4], x: f32[2,3,4], y: f32[2,4,5], i: s32[2,1]) -> "
        "(f32[1,3,3,4], f32[2,3,5], f32[2,3]) {\n"
        "  %a = f32[1,5,5,2] parameter(0)\n"
        "  %k = f32[3,3,2,4] parameter(1)\n"
        "  %c = f32[1,3,3,4] convolution(%a, %k), window={size=3x3 stride=2x2 pad=1_1x1_1 "
        "rhs_reversal=0x1}, dim_labels=b01f_01io->b01f\n"
        "  %x = f32[2,3,4] parameter(2)\n"
        "  %y = f32[2,4,5] parameter(3)\n"
        "  %d = f32[2,3,5] dot(%x, %y), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
        "rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={highest,default}\n"
        "  %i = s32[2,1] parameter(4)\n"
        "  %g = f32[2,3] gather(%x, %i), offset_dims={1}, collapsed_slice_dims={0,2}, "
        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3,1}, indices_are_sorted=true\n"
        "  ROOT %t = (f32[1,3,3,4], f32[2,3,5], f32[2,3]) tuple(%c, %d, %g)\n"
        "}\n");
}

static void test_literals(void **state) {
    (void)state;
    check_canonical(
        "HloModule m\nENTRY e {\n"
        "  a = f32[5] constant({0.1, -0, inf, -inf, nan})\n"
        "  b = bf16[2] constant({0.35, 1e+10})\n"
        "  c = pred[2,2] constant({{true, false}, {0, 1}})\n"
        "  d = s64[2] constant({-9223372036854775808, 9223372036854775807})\n"
        "  e = u64[] constant(18446744073709551615)\n"
        "  f = c64[2] constant({(1, -2), (0.5, 3)})\n"
        "  g = f64[] constant(0.1)\n"
        "  h = (s32[], f32[2]) constant((7, {1.5, 2}))\n"
        "  i = f32[3] constant({...})\n"
        "  ROOT t = (f32[5], bf16[2], pred[2,2], s64[2], u64[], c64[2], f64[], (s32[], f32[2]), f32[3]) "
        "tuple(a, b, c, d, e, f, g, h, i)\n}\n",
        "HloModule m\n\n"
        "ENTRY %e () -> (f32[5], bf16[2], pred[2,2], s64[2], u64[], c64[2], f64[], (s32[], f32[2]), "
        "f32[3]) {\n"
        "  %a = f32[5] constant({0.1, -0, inf, -inf, nan})\n"
        "  %b = bf16[2] constant({0.35, 1e+10})\n"
        "  %c = pred[2,2] constant({ {true, false}, {false, true} })\n"
        "  %d = s64[2] constant({-9223372036854775808, 9223372036854775807})\n"
        "  %e = u64[] constant(18446744073709551615)\n"
        "  %f = c64[2] constant({(1, -2), (0.5, 3)})\n"
        "  %g = f64[] constant(0.1)\n"
        "  %h = (s32[], f32[2]) constant((7, {1.5, 2}))\n"
        "  %i = f32[3] constant({...})\n"
        "  ROOT %t = (f32[5], bf16[2], pred[2,2], s64[2], u64[], c64[2], f64[], (s32[], f32[2]), "
        "f32[3]) tuple(%a, %b, %c, %d, %e, %f, %g, %h, %i)\n"
        "}\n");
}

static void test_shapes_and_header(void **state) {
    (void)state;
    /* Typed operands, comments, `/ *index=N* /`, optional %, tuple and dynamic shapes, layout
     * extras, stack frames, execution_thread, shape-less header form. */
    check_canonical(
        "HloModule jit_f, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, "
        "frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=2]>}}\n"
        "FileNames\n1 \"a.py\"\nFunctionNames\n1 \"f\"\nFileLocations\n"
        "1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=2}\n"
        "StackFrames\n1 {file_location_id=1 parent_frame_id=0}\n\n"
        "%comp (x.1: f32[2]) -> f32[2] {\n"
        "  %x.1 = f32[2]{0:T(128)} parameter(0) // a comment\n"
        "  /* block */ ROOT %n = f32[2]{0} negate(f32[2]{0} %x.1)\n"
        "}, execution_thread=\"main\"\n"
        "ENTRY %main {\n"
        "  %p = f32[2] parameter(0)\n"
        "  %d = s32[<=4,2] parameter(1)\n"
        "  %t = ((), (f32[2], /*index=1*/s32[<=4,2])) tuple(), metadata={}\n"
        "  ROOT %c = f32[2] call(%p), to_apply=%comp\n"
        "}\n",
        "HloModule jit_f, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, "
        "frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=2]>}}\n"
        "\n"
        "FileNames\n1 \"a.py\"\nFunctionNames\n1 \"f\"\nFileLocations\n"
        "1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=2}\n"
        "StackFrames\n1 {file_location_id=1 parent_frame_id=0}\n"
        "\n"
        "%comp (x.1: f32[2]{0:T(128)}) -> f32[2]{0} {\n"
        "  %x.1 = f32[2]{0:T(128)} parameter(0)\n"
        "  ROOT %n = f32[2]{0} negate(%x.1)\n"
        "}, execution_thread=\"main\"\n"
        "\n"
        "ENTRY %main (p: f32[2], d: s32[<=4,2]) -> f32[2] {\n"
        "  %p = f32[2] parameter(0)\n"
        "  %d = s32[<=4,2] parameter(1)\n"
        "  %t = ((), (f32[2], s32[<=4,2])) tuple(), metadata={}\n"
        "  ROOT %c = f32[2] call(%p), to_apply=%comp\n"
        "}\n");
}

/* An unbounded dynamic dim prints back as `?` (it was once `<=-1`, which did not re-parse), and
 * a name is [A-Za-z_]... with or without '%' (XLA's lexer), so the printed header's parameter
 * names always read back. */
static void test_unbounded_dims_and_names(void **state) {
    (void)state;
    check_canonical("HloModule m\nENTRY e {\n  p = f32[?,<=3,2] parameter(0)\n"
                    "  ROOT n = f32[?,<=3,2] negate(p)\n}\n",
                    "HloModule m\n\n"
                    "ENTRY %e (p: f32[?,<=3,2]) -> f32[?,<=3,2] {\n"
                    "  %p = f32[?,<=3,2] parameter(0)\n"
                    "  ROOT %n = f32[?,<=3,2] negate(%p)\n"
                    "}\n");
    uint32_t line, col;
    char *msg = parse_err("HloModule m\nENTRY e {\n  ROOT %1a = f32[] parameter(0)\n}\n", &line,
                          &col);
    assert_string_equal(msg, "expected an instruction name, found '%1a'");
    assert_int_equal(line, 3);
    assert_int_equal(col, 8);
    free(msg);
}

static void test_forward_references_and_async(void **state) {
    (void)state;
    check_canonical(
        "HloModule m\n"
        "ENTRY e {\n"
        "  ROOT r = f32[] negate-done(s)\n"
        "  s = ((f32[]), f32[], u32[]) negate-start(c)\n"
        "  c = f32[] constant(1)\n"
        "}\n",
        "HloModule m\n\n"
        "ENTRY %e () -> f32[] {\n"
        "  ROOT %r = f32[] negate-done(%s)\n"
        "  %s = ((f32[]), f32[], u32[]) negate-start(%c)\n"
        "  %c = f32[] constant(1)\n"
        "}\n");
    gs_source *src;
    gs_module *m = parse_ok("HloModule m\nENTRY e {\n ROOT r = f32[] negate-done(s)\n"
                            " s = ((f32[]), f32[], u32[]) negate-start(c)\n c = f32[] constant(1)\n}\n",
                            &src);
    gs_instr *r = gs_module_find_instr(m, "r");
    assert_int_equal(r->op, GS_OP_ASYNC_DONE);
    assert_string_equal(r->op_text, "negate-done");
    assert_ptr_equal(r->operands[0], gs_module_find_instr(m, "s"));
    assert_ptr_equal(m->entry->root, r);
    gs_module_free(m);
    gs_source_free(src);
}

static void test_replica_groups_iota(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse_ok(
        "HloModule m\nadd {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
        " ROOT s = f32[] add(x, y)\n}\nENTRY e {\n p = f32[2] parameter(0)\n"
        " a = f32[2] all-reduce(p), replica_groups=[2,4]<=[2,4]T(1,0), to_apply=add\n"
        " ROOT b = f32[2] all-reduce(a), replica_groups={{0,2},{1,3,5}}, to_apply=add\n}\n",
        &src);
    const gs_replica_groups *g = gs_instr_attr(gs_module_find_instr(m, "a"), GS_ATTR_REPLICA_GROUPS)->u.groups;
    /* iota(8) reshaped to [2,4], transposed to [4,2]: rows {0,4},{1,5},{2,6},{3,7}; then
     * reshaped to [2,4]: groups {0,4,1,5} and {2,6,3,7}. */
    const int64_t want[2][4] = {{0, 4, 1, 5}, {2, 6, 3, 7}};
    assert_int_equal(g->n_groups, 2);
    assert_int_equal(gs_replica_groups_size(g, 1), 4);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) assert_int_equal(gs_replica_groups_device(g, i, j), want[i][j]);
    const gs_replica_groups *h = gs_instr_attr(gs_module_find_instr(m, "b"), GS_ATTR_REPLICA_GROUPS)->u.groups;
    assert_int_equal(h->group_size, -1);
    assert_int_equal(gs_replica_groups_size(h, 1), 3);
    assert_int_equal(gs_replica_groups_device(h, 1, 2), 5);
    gs_module_free(m);
    gs_source_free(src);
}

static void test_errors_are_located(void **state) {
    (void)state;
    uint32_t line, col;
    char *msg = parse_err("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] add(a, zz)\n}\n",
                          &line, &col);
    assert_string_equal(msg, "unknown operand 'zz' in computation 'e'");
    assert_int_equal(line, 4);
    assert_int_equal(col, 26);
    free(msg);
    msg = parse_err("HloModule m\nENTRY e {\n  ROOT a = f32[2] parameter(0), window={size=2 bogus=1}\n}\n",
                    &line, &col);
    assert_string_equal(msg, "unknown window field 'bogus'");
    assert_int_equal(line, 3);
    free(msg);
    msg = parse_err("HloModule m\nENTRY e {\n  ROOT a = f32[2] convolution(), dim_labels=bf_xo->bf\n}\n",
                    &line, &col);
    assert_string_equal(msg, "bad character 'x' in dim_labels");
    free(msg);
}

/* Every allocation of the parse fails in turn: the parse must fail cleanly (an "out of memory"
 * error, nothing leaked — ASan checks the leaks in the sanitizer build) until k exceeds the
 * number of allocations, after which it succeeds and prints the same text. */
static void test_fault_injection(void **state) {
    (void)state;
    const char *text =
        "HloModule m, num_partitions=2\nadd {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
        " ROOT s = f32[] add(x, y)\n}\nENTRY e {\n p = f32[4,2]{1,0} parameter(0), sharding={devices=[2,1]<=[2]}\n"
        " c = f32[] constant(0)\n r = f32[4] reduce(p, c), dimensions={1}, to_apply=add\n"
        " k = s32[2] constant({1, 2})\n ROOT t = (f32[4], s32[2]) tuple(r, k), metadata={op_name=\"t\"}\n}\n";
    char *want = print_of(text);
    gs_source *src = gs_source_from_string("fi.hlo", text);
    bool succeeded = false;
    long k;
    for (k = 1; k < 10000 && !succeeded; k++) {
        gs_parse_options opts = {.fail_alloc_at = k};
        gs_diags d = {0};
        gs_module *m = gs_parse_module_ex(src, &opts, &d);
        if (m) {
            succeeded = true;
            char *got = gs_module_to_string(m);
            assert_string_equal(got, want);
            free(got);
            gs_module_free(m);
        } else {
            assert_true(d.n_errors >= 1);
            assert_non_null(strstr(d.items[0].message, "out of memory"));
        }
        gs_diags_free(&d);
    }
    assert_true(succeeded);
    assert_true(k > 20); /* the walk really visited many allocation sites */
    gs_source_free(src);
    free(want);
}

static void test_narrow_floats(void **state) {
    (void)state;
    /* bf16 round-to-nearest-even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> 1. */
    assert_int_equal(gs_bf16_from_double(1.0 + 1.0 / 256), 0x3f80);
    assert_int_equal(gs_bf16_from_double(1.0 + 3.0 / 256), 0x3f82);
    assert_int_equal(gs_bf16_from_float(1.0f + 1.0f / 256), 0x3f80);
    assert_true(gs_bf16_to_float(gs_bf16_from_double(0.35)) == 0.349609375f);
    /* f16: 65504 is the largest finite; 65520 rounds to inf. */
    assert_int_equal(gs_f16_from_double(65504), 0x7bff);
    assert_int_equal(gs_f16_from_double(65520), 0x7c00);
    assert_int_equal(gs_f16_from_double(-0.0), 0x8000);
    /* smallest f16 subnormal 2^-24, and half of it rounds to zero (tie to even). */
    assert_int_equal(gs_f16_from_double(0x1p-24), 0x0001);
    assert_int_equal(gs_f16_from_double(0x1p-25), 0x0000);
    assert_true(gs_f16_to_float(0x3c00) == 1.0f);
    /* f8e4m3fn: max 448, no inf: overflow is NaN (0x7f). */
    assert_int_equal(gs_narrow_from_double(GS_F8E4M3FN, 448), 0x7e);
    assert_int_equal(gs_narrow_from_double(GS_F8E4M3FN, 1e6), 0x7f);
    assert_true(gs_narrow_to_double(GS_F8E4M3FN, 0x7e) == 448);
    assert_true(gs_narrow_to_double(GS_F8E5M2, 0x3c) == 1.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_form),
        cmocka_unit_test(test_conv_dot_gather_attrs),
        cmocka_unit_test(test_literals),
        cmocka_unit_test(test_shapes_and_header),
        cmocka_unit_test(test_unbounded_dims_and_names),
        cmocka_unit_test(test_forward_references_and_async),
        cmocka_unit_test(test_replica_groups_iota),
        cmocka_unit_test(test_errors_are_located),
        cmocka_unit_test(test_fault_injection),
        cmocka_unit_test(test_narrow_floats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
