/*
 * test_verify.c — shape inference (gs_infer_shape, through the parser, which infers the shape of
 * instructions written without one) and the module verifier (gs_module_verify): inferred shapes
 * of every op family against hand-computed expectations, valid modules accepted, and invalid
 * modules rejected with a specific message at the faulty instruction.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gspmd/text.h"

/* A shared reducer and comparator, prepended to modules that need them. */
#define ADD_F32 "add {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = add(x, y)\n}\n"
#define ADD_S32 "adds {\n x = s32[] parameter(0)\n y = s32[] parameter(1)\n ROOT s = add(x, y)\n}\n"
#define LT_F32 "lt {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n" \
               " ROOT c = compare(x, y), direction=LT\n}\n"

static gs_module *parse_or_die(const char *text, gs_source **srcp) {
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

/* The entry root's shape, inferred by the parser (the root is written without a shape), as
 * text without layout; the module must also verify. */
static void check_root(const char *text, const char *want) {
    gs_source *src;
    gs_module *m = parse_or_die(text, &src);
    gs_sb sb = {0};
    gs_shape_print(&sb, m->entry->root->shape, false);
    if (strcmp(gs_sb_str(&sb), want) != 0)
        fprintf(stderr, "inferred %s, expected %s\n", gs_sb_str(&sb), want);
    assert_string_equal(gs_sb_str(&sb), want);
    gs_diags d = {0};
    gs_status st = gs_module_verify(m, &d);
    if (st != GS_OK) gs_diags_render(&d, stderr);
    assert_int_equal(st, GS_OK);
    assert_int_equal(d.n, 0);
    gs_diags_free(&d);
    gs_sb_free(&sb);
    gs_module_free(m);
    gs_source_free(src);
}

/* An entry computation `ENTRY e { <body> }` after the shared computations. */
static void check_entry(const char *body, const char *want) {
    gs_sb sb = {0};
    gs_sb_printf(&sb, "HloModule m\n" ADD_F32 ADD_S32 LT_F32 "ENTRY e {\n%s\n}\n", body);
    check_root(gs_sb_str(&sb), want);
    gs_sb_free(&sb);
}

/* The module parses, fails verification, and the first error contains `want`; returns the
 * number of errors. */
static int check_verify_error(const char *text, const char *want) {
    gs_source *src;
    gs_module *m = parse_or_die(text, &src);
    gs_diags d = {0};
    assert_int_equal(gs_module_verify(m, &d), GS_ERR);
    assert_true(d.n >= 1);
    if (!strstr(d.items[0].message, want))
        fprintf(stderr, "error: %s\nexpected it to contain: %s\n", d.items[0].message, want);
    assert_non_null(strstr(d.items[0].message, want));
    assert_non_null(d.items[0].span.src);
    int n = d.n;
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
    return n;
}

static void check_entry_error(const char *body, const char *want) {
    gs_sb sb = {0};
    gs_sb_printf(&sb, "HloModule m\n" ADD_F32 ADD_S32 LT_F32 "ENTRY e {\n%s\n}\n", body);
    check_verify_error(gs_sb_str(&sb), want);
    gs_sb_free(&sb);
}

/* Parsing fails (inference of a shape left out) with a message containing want. */
static void check_parse_error(const char *text, const char *want) {
    gs_source *src = gs_source_from_string("test.hlo", text);
    gs_diags d = {0};
    gs_module *m = gs_parse_module(src, &d);
    assert_null(m);
    assert_true(d.n >= 1);
    if (!strstr(d.items[0].message, want))
        fprintf(stderr, "error: %s\nexpected it to contain: %s\n", d.items[0].message, want);
    assert_non_null(strstr(d.items[0].message, want));
    gs_diags_free(&d);
    gs_source_free(src);
}

/* ------------------------------------------------------------------ inference */

static void test_elementwise(void **state) {
    (void)state;
    check_entry("p = c64[2,3] parameter(0)\n ROOT a = abs(p)", "f32[2,3]");
    check_entry("p = c128[4] parameter(0)\n ROOT r = real(p)", "f64[4]");
    check_entry("p = c64[4] parameter(0)\n ROOT r = imag(p)", "f32[4]");
    check_entry("p = f32[4] parameter(0)\n ROOT r = imag(p)", "f32[4]");
    check_entry("p = f32[3,1] parameter(0)\n ROOT r = is-finite(p)", "pred[3,1]");
    check_entry("p = s32[5] parameter(0)\n ROOT r = popcnt(p)", "s32[5]");
    check_entry("p = f32[2] parameter(0)\n q = f32[2] parameter(1)\n ROOT c = complex(p, q)",
                "c64[2]");
    check_entry("p = f64[2] parameter(0)\n q = f64[2] parameter(1)\n ROOT c = complex(p, q)",
                "c128[2]");
    check_entry("p = s32[2,2] parameter(0)\n q = s32[2,2] parameter(1)\n"
                " ROOT c = compare(p, q), direction=GE, type=SIGNED", "pred[2,2]");
    check_entry("p = u8[7] parameter(0)\n q = u8[7] parameter(1)\n ROOT c = shift-left(p, q)",
                "u8[7]");
    check_entry("p = f32[<=8,3] parameter(0)\n q = f32[8,3] parameter(1)\n ROOT c = add(p, q)",
                "f32[<=8,3]");
    /* select's predicate may be a scalar; clamp's bounds may be scalars. */
    check_entry("p = pred[] parameter(0)\n a = f32[2,3] parameter(1)\n b = f32[2,3] parameter(2)\n"
                " ROOT s = select(p, a, b)", "f32[2,3]");
    check_entry("p = pred[2,3] parameter(0)\n a = s32[2,3] parameter(1)\n"
                " b = s32[2,3] parameter(2)\n ROOT s = select(p, a, b)", "s32[2,3]");
    check_entry("lo = f32[] parameter(0)\n x = f32[4,4] parameter(1)\n hi = f32[] parameter(2)\n"
                " ROOT c = clamp(lo, x, hi)", "f32[4,4]");
    check_entry("x = f32[4] parameter(0)\n y = f32[4] parameter(1)\n"
                " ROOT m = map(x, y), dimensions={0}, to_apply=add", "f32[4]");
}

static void test_data_movement(void **state) {
    (void)state;
    check_entry("p = f32[2,3,4] parameter(0)\n ROOT t = transpose(p), dimensions={2,0,1}",
                "f32[4,2,3]");
    check_entry("p = f32[2,3] parameter(0)\n ROOT r = reverse(p), dimensions={0,1}", "f32[2,3]");
    /* ceil((9-1)/3) = 3 rows, ceil(8/2) = 4 columns */
    check_entry("p = f32[10,8] parameter(0)\n ROOT s = slice(p), slice={[1:9:3], [0:8:2]}",
                "f32[3,4]");
    /* rows 4 + 1 + 2 + 3*1 interior = 10; columns 5 - 1 - 1 = 3 (negative padding) */
    check_entry("p = f32[4,5] parameter(0)\n z = f32[] constant(0)\n"
                " ROOT q = pad(p, z), padding=1_2_1x-1_-1", "f32[10,3]");
    check_entry("p = f32[0,2] parameter(0)\n z = f32[] constant(0)\n"
                " ROOT q = pad(p, z), padding=1_1_5x0_0", "f32[2,2]");
    check_entry("p = f32[8,8] parameter(0)\n i = s32[] parameter(1)\n"
                " ROOT d = dynamic-slice(p, i, i), dynamic_slice_sizes={2,3}", "f32[2,3]");
    check_entry("p = f32[8,8] parameter(0)\n i = s32[2] parameter(1)\n"
                " ROOT d = dynamic-slice(p, i), dynamic_slice_sizes={8,1}", "f32[8,1]");
    check_entry("p = f32[8,8] parameter(0)\n u = f32[2,8] parameter(1)\n i = u32[] parameter(2)\n"
                " ROOT d = dynamic-update-slice(p, u, i, i)", "f32[8,8]");
    check_entry("a = f32[2,3] parameter(0)\n b = f32[4,3] parameter(1)\n"
                " ROOT c = concatenate(a, b, a), dimensions={0}", "f32[8,3]");
    check_entry("p = f32[2,3] parameter(0)\n ROOT c = copy(p)", "f32[2,3]");
}

static void test_dot(void **state) {
    (void)state;
    check_entry("a = f32[2,3] parameter(0)\n b = f32[3,5] parameter(1)\n"
                " ROOT d = dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                "f32[2,5]");
    /* batch dims first, then lhs free dims, then rhs free dims */
    check_entry("a = f32[3,4,5,6] parameter(0)\n b = f32[6,4,7] parameter(1)\n"
                " ROOT d = dot(a, b), lhs_batch_dims={1}, rhs_batch_dims={1},"
                " lhs_contracting_dims={3}, rhs_contracting_dims={0}", "f32[4,3,5,7]");
    check_entry("a = bf16[5] parameter(0)\n b = bf16[7] parameter(1)\n ROOT d = dot(a, b)",
                "bf16[5,7]");
}

static void test_convolution(void **state) {
    (void)state;
    /* spatial 0: base 10, padded 1+10+1 = 12, window (3-1)*2+1 = 5, (12-5)/2+1 = 4
     * spatial 1: base (12-1)*2+1 = 23, padded 2+23 = 25, window 4, (25-4)/3+1 = 8 */
    check_entry("x = f32[2,10,12,3] parameter(0)\n k = f32[3,4,3,8] parameter(1)\n"
                " ROOT c = convolution(x, k), window={size=3x4 stride=2x3 pad=1_1x2_0"
                " lhs_dilate=1x2 rhs_dilate=2x1}, dim_labels=b01f_01io->b01f", "f32[2,4,8,8]");
    check_entry("x = f32[2,10,12,3] parameter(0)\n k = f32[3,4,3,8] parameter(1)\n"
                " ROOT c = convolution(x, k), window={size=3x4 stride=2x3 pad=1_1x2_0"
                " lhs_dilate=1x2 rhs_dilate=2x1}, dim_labels=b01f_01io->bf01", "f32[2,8,4,8]");
    /* feature groups: 4 input features = 2 per group x 2 groups */
    check_entry("x = f32[1,5,5,4] parameter(0)\n k = f32[3,3,2,6] parameter(1)\n"
                " ROOT c = convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f,"
                " feature_group_count=2", "f32[1,3,3,6]");
    /* batch groups: the batch of 4 splits into 2 groups */
    check_entry("x = f32[4,5,5,2] parameter(0)\n k = f32[3,3,2,6] parameter(1)\n"
                " ROOT c = convolution(x, k), window={size=3x3 pad=1_1x1_1},"
                " dim_labels=b01f_01io->b01f, batch_group_count=2", "f32[2,5,5,6]");
    check_entry("x = f32[3,2] parameter(0)\n k = f32[2,5] parameter(1)\n"
                " ROOT c = convolution(x, k), dim_labels=bf_io->bf", "f32[3,5]");
}

static void test_reductions(void **state) {
    (void)state;
    check_entry("p = f32[4,5] parameter(0)\n z = f32[] constant(0)\n"
                " ROOT r = reduce(p, z), dimensions={1}, to_apply=add", "f32[4]");
    check_root("HloModule m\n"
               "argmax {\n a = f32[] parameter(0)\n b = s32[] parameter(1)\n"
               " c = f32[] parameter(2)\n d = s32[] parameter(3)\n"
               " ROOT t = (f32[], s32[]) tuple(a, d)\n}\n"
               "ENTRY e {\n p = f32[4,5] parameter(0)\n i = s32[4,5] parameter(1)\n"
               " z = f32[] constant(0)\n y = s32[] constant(0)\n"
               " ROOT r = reduce(p, i, z, y), dimensions={0}, to_apply=argmax\n}\n",
               "(f32[5], s32[5])");
    /* rows: 4 + 1 = 5, (5-2)/2+1 = 2; columns: 6 + 2 = 8, (8-3)/2+1 = 3 */
    check_entry("p = f32[4,6] parameter(0)\n z = f32[] constant(0)\n"
                " ROOT r = reduce-window(p, z), window={size=2x3 stride=2x2 pad=1_0x1_1},"
                " to_apply=add", "f32[2,3]");
    /* base dilation: 3 -> 5, window 2 stride 1 -> 4 */
    check_entry("p = f32[3] parameter(0)\n z = f32[] constant(0)\n"
                " ROOT r = reduce-window(p, z), window={size=2 lhs_dilate=2}, to_apply=add",
                "f32[4]");
    check_root("HloModule m\n"
               "pair {\n a = f32[] parameter(0)\n b = s32[] parameter(1)\n"
               " c = f32[] parameter(2)\n d = s32[] parameter(3)\n"
               " ROOT t = (f32[], s32[]) tuple(c, b)\n}\n"
               "ENTRY e {\n p = f32[4] parameter(0)\n i = s32[4] parameter(1)\n"
               " z = f32[] constant(0)\n y = s32[] constant(0)\n"
               " ROOT r = reduce-window(p, i, z, y), window={size=2 stride=2}, to_apply=pair\n}\n",
               "(f32[2], s32[2])");
    check_root("HloModule m\n" ADD_F32
               "ge {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
               " ROOT c = compare(x, y), direction=GE\n}\n"
               "ENTRY e {\n p = f32[4,6] parameter(0)\n s = f32[2,3] parameter(1)\n"
               " z = f32[] constant(0)\n ROOT r = select-and-scatter(p, s, z),"
               " window={size=2x2 stride=2x2}, select=ge, scatter=add\n}\n", "f32[4,6]");
}

static void test_gather_scatter(void **state) {
    (void)state;
    check_entry("p = f32[10,8] parameter(0)\n i = s32[6] parameter(1)\n"
                " ROOT g = gather(p, i), offset_dims={1}, collapsed_slice_dims={0},"
                " start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}", "f32[6,8]");
    /* offset dims inside the batch dims: [2,3 | window 4 | ...] */
    check_entry("p = f32[10,9,8] parameter(0)\n i = s32[2,3,2] parameter(1)\n"
                " ROOT g = gather(p, i), offset_dims={1,3}, collapsed_slice_dims={0},"
                " start_index_map={0,2}, index_vector_dim=2, slice_sizes={1,4,5}",
                "f32[2,4,3,5]");
    /* batching dims: operand dim 0 pairs with indices dim 0 */
    check_entry("p = f32[3,10,8] parameter(0)\n i = s32[3,5,1] parameter(1)\n"
                " ROOT g = gather(p, i), offset_dims={2}, collapsed_slice_dims={1},"
                " start_index_map={1}, operand_batching_dims={0},"
                " start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,8}",
                "f32[3,5,8]");
    check_entry("p = f32[10,8] parameter(0)\n i = s32[6,1] parameter(1)\n"
                " u = f32[6,8] parameter(2)\n ROOT s = scatter(p, i, u), update_window_dims={1},"
                " inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,"
                " to_apply=add", "f32[10,8]");
    check_root("HloModule m\n"
               "two {\n a = f32[] parameter(0)\n b = s32[] parameter(1)\n"
               " c = f32[] parameter(2)\n d = s32[] parameter(3)\n"
               " ROOT t = (f32[], s32[]) tuple(c, d)\n}\n"
               "ENTRY e {\n p = f32[10] parameter(0)\n q = s32[10] parameter(1)\n"
               " i = s32[3] parameter(2)\n u = f32[3] parameter(3)\n v = s32[3] parameter(4)\n"
               " ROOT s = scatter(p, q, i, u, v), update_window_dims={},"
               " inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,"
               " to_apply=two\n}\n", "(f32[10], s32[10])");
}

static void test_sort_topk_fft(void **state) {
    (void)state;
    check_entry("p = f32[4,5] parameter(0)\n ROOT s = sort(p), dimensions={1}, to_apply=lt",
                "f32[4,5]");
    check_root("HloModule m\n"
               "cmp {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n c = s32[] parameter(2)\n"
               " d = s32[] parameter(3)\n ROOT r = compare(a, b), direction=LT\n}\n"
               "ENTRY e {\n p = f32[8] parameter(0)\n i = s32[8] parameter(1)\n"
               " ROOT s = sort(p, i), dimensions={0}, is_stable=true, to_apply=cmp\n}\n",
               "(f32[8], s32[8])");
    check_entry("p = f32[5,9] parameter(0)\n ROOT t = topk(p), k=3, largest=true",
                "(f32[5,3], s32[5,3])");
    check_entry("p = f32[4,8] parameter(0)\n ROOT f = fft(p), fft_type=RFFT, fft_length={8}",
                "c64[4,5]");
    check_entry("p = c64[4,5] parameter(0)\n ROOT f = fft(p), fft_type=IRFFT, fft_length={8}",
                "f32[4,8]");
    check_entry("p = c64[2,3,4] parameter(0)\n ROOT f = fft(p), fft_type=IFFT, fft_length={3,4}",
                "c64[2,3,4]");
}

static void test_structure(void **state) {
    (void)state;
    check_entry("a = f32[2] parameter(0)\n b = s32[] parameter(1)\n ROOT t = tuple(a, b)",
                "(f32[2], s32[])");
    check_entry("a = (f32[2], (s32[], u8[3])) parameter(0)\n"
                " ROOT g = get-tuple-element(a), index=1", "(s32[], u8[3])");
    check_root("HloModule m\n"
               "cond {\n s = (s32[], f32[4]) parameter(0)\n i = get-tuple-element(s), index=0\n"
               " n = s32[] constant(3)\n ROOT c = compare(i, n), direction=LT\n}\n"
               "body {\n s = (s32[], f32[4]) parameter(0)\n i = get-tuple-element(s), index=0\n"
               " x = get-tuple-element(s), index=1\n one = s32[] constant(1)\n"
               " j = add(i, one)\n ROOT t = tuple(j, x)\n}\n"
               "ENTRY e {\n z = s32[] constant(0)\n x = f32[4] parameter(0)\n"
               " t = tuple(z, x)\n ROOT w = while(t), condition=cond, body=body\n}\n",
               "(s32[], f32[4])");
    check_root("HloModule m\n"
               "b0 {\n x = f32[2] parameter(0)\n ROOT n = negate(x)\n}\n"
               "b1 {\n y = s32[] parameter(0)\n one = f32[] constant(1)\n"
               " ROOT c = f32[2] broadcast(one), dimensions={}\n}\n"
               "ENTRY e {\n i = s32[] parameter(0)\n x = f32[2] parameter(1)\n"
               " y = s32[] parameter(2)\n"
               " ROOT c = conditional(i, x, y), branch_computations={b0, b1}\n}\n", "f32[2]");
    check_root("HloModule m\n"
               "t {\n x = f32[2] parameter(0)\n ROOT n = negate(x)\n}\n"
               "f {\n y = f32[3] parameter(0)\n ROOT r = f32[2] slice(y), slice={[0:2]}\n}\n"
               "ENTRY e {\n p = pred[] parameter(0)\n x = f32[2] parameter(1)\n"
               " y = f32[3] parameter(2)\n"
               " ROOT c = conditional(p, x, y), true_computation=t, false_computation=f\n}\n",
               "f32[2]");
    check_root("HloModule m\n"
               "g {\n x = f32[2] parameter(0)\n y = f32[2] parameter(1)\n ROOT t = tuple(x, y)\n}\n"
               "ENTRY e {\n a = f32[2] parameter(0)\n ROOT c = call(a, a), to_apply=g\n}\n",
               "(f32[2], f32[2])");
    check_root("HloModule m\n"
               "fused {\n x = f32[2] parameter(0)\n ROOT n = negate(x)\n}\n"
               "ENTRY e {\n a = f32[2] parameter(0)\n"
               " ROOT c = fusion(a), kind=kLoop, calls=fused\n}\n",
               "f32[2]");
    check_entry("ROOT p = partition-id()", "u32[]");
    check_entry("a = token[] after-all()\n ROOT b = after-all(a, a)", "token[]");
    check_entry("p = f32[8,3] parameter(0)\n ROOT s = get-dimension-size(p), dimensions={0}",
                "s32[]");
    check_entry("p = f32[8,3] parameter(0)\n n = s32[] parameter(1)\n"
                " ROOT s = set-dimension-size(p, n), dimensions={0}", "f32[<=8,3]");
    check_entry("p = f32[2,3,4] parameter(0)\n s = f32[3] parameter(1)\n o = f32[3] parameter(2)\n"
                " ROOT b = batch-norm-training(p, s, o), epsilon=0.001, feature_index=1",
                "(f32[2,3,4], f32[3], f32[3])");
    check_entry("a = f32[6,6] parameter(0)\n b = f32[6,2] parameter(1)\n"
                " ROOT t = triangular-solve(a, b), left_side=true, lower=true,"
                " transpose_a=NO_TRANSPOSE", "f32[6,2]");
}

static void test_collectives(void **state) {
    (void)state;
    check_entry("p = f32[2,3] parameter(0)\n"
                " ROOT g = all-gather(p), replica_groups={{0,1,2,3}}, dimensions={1}",
                "f32[2,12]");
    check_entry("p = f32[2,3] parameter(0)\n ROOT g = all-gather(p), channel_id=1,"
                " replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true",
                "f32[8,3]");
    /* empty groups, channel, no global ids: every replica of every partition (1 x 4) */
    check_root("HloModule m, num_partitions=4\n"
               "ENTRY e {\n p = f32[2,3] parameter(0)\n"
               " ROOT g = all-gather(p), channel_id=1, dimensions={0}\n}\n", "f32[8,3]");
    check_root("HloModule m, num_partitions=2\n" ADD_F32
               "ENTRY e {\n p = f32[2] parameter(0)\n q = s32[3] parameter(1)\n"
               " ROOT r = all-reduce(p, p), channel_id=1, to_apply=add\n}\n",
               "(f32[2], f32[2])");
    check_entry("p = f32[8,4] parameter(0)\n"
                " ROOT r = reduce-scatter(p), replica_groups={{0,1}}, dimensions={0},"
                " to_apply=add", "f32[4,4]");
    check_entry("p = f32[8,4] parameter(0)\n"
                " ROOT a = all-to-all(p), replica_groups={{0,1}}, dimensions={0}", "f32[8,4]");
    check_entry("p = f32[8] parameter(0)\n"
                " ROOT a = all-to-all(p, p), replica_groups={{0,1}}", "(f32[8], f32[8])");
    check_root("HloModule m, num_partitions=2\n"
               "ENTRY e {\n p = f32[3] parameter(0)\n ROOT c = collective-permute(p),"
               " channel_id=1, source_target_pairs={{0,1},{1,0}}\n}\n", "f32[3]");
    check_entry("p = f32[3] parameter(0)\n s = (f32[3], f32[3], u32[], u32[])"
                " collective-permute-start(p), source_target_pairs={{0,1}}\n"
                " ROOT d = collective-permute-done(s)", "f32[3]");
    check_entry("p = f32[3] parameter(0)\n s = copy-start(p)\n ROOT d = copy-done(s)", "f32[3]");
}

static void test_parser_inference_errors(void **state) {
    (void)state;
    check_parse_error("HloModule m\nENTRY e {\n a = f32[2] parameter(0)\n"
                      " b = f32[3] parameter(1)\n ROOT c = add(a, b)\n}\n",
                      "add c: operand shapes differ: f32[2] and f32[3]");
    check_parse_error("HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n"
                      " b = f32[3] parameter(1)\n"
                      " ROOT d = dot(a, b), lhs_contracting_dims={3},"
                      " rhs_contracting_dims={0}\n}\n",
                      "dot d: lhs contracting dimension 3 is out of range for f32[2,3]");
    check_parse_error("HloModule m\nENTRY e {\n a = f32[2] parameter(0)\n"
                      " ROOT r = broadcast(a), dimensions={0}\n}\n",
                      "cannot be inferred");
}

/* ------------------------------------------------------------------ verification errors */

static void test_verify_accepts(void **state) {
    (void)state;
    /* Written shapes that agree with inference, layouts and dynamic flags aside; a dot may
     * pick its result type; a bf16 -> f32 copy is allowed (XLA's mixed precision). */
    check_root("HloModule m\nENTRY e {\n a = bf16[2,3]{0,1} parameter(0)\n"
               " b = bf16[3,4] parameter(1)\n"
               " d = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
               " c = f32[2,3] copy(a)\n n = f32[<=2,4] negate(d)\n"
               " v = f32[2] parameter(2)\n x = f32[2,8] broadcast(v), dimensions={0}\n"
               " r = f32[16] reshape(x)\n i = s32[3,4] iota(), iota_dimension=1\n"
               " ROOT t = tuple(n, c, r, i)\n}\n", "(f32[<=2,4], f32[2,3], f32[16], s32[3,4])");
}

static void test_verify_errors(void **state) {
    (void)state;
    check_entry_error("a = f32[2,3] parameter(0)\n b = f32[3] parameter(1)\n"
                      " ROOT d = f32[2] dot(a, b), lhs_contracting_dims={3},"
                      " rhs_contracting_dims={0}",
                      "dot d: lhs contracting dimension 3 is out of range for f32[2,3]");
    check_entry_error("a = f32[2] parameter(0)\n ROOT n = f32[3] negate(a)",
                      "negate n: shape f32[3] does not match the inferred shape f32[2]");
    check_entry_error("a = f32[2] parameter(0)\n ROOT n = s32[2] negate(a)",
                      "shape s32[2] does not match the inferred shape f32[2]");
    check_entry_error("a = f32[2,3] parameter(0)\n b = f32[3,5] parameter(1)\n"
                      " ROOT d = f32[2,6] dot(a, b), lhs_contracting_dims={1},"
                      " rhs_contracting_dims={0}",
                      "shape f32[2,6] does not match the inferred shape f32[2,5]");
    check_entry_error("a = f32[2] parameter(0)\n ROOT n = f32[2] add(a)",
                      "add n: takes 2 operands, but 1 were given");
    check_entry_error("a = f32[2] parameter(0)\n ROOT b = f32[2,3] broadcast(a), dimensions={1}",
                      "operand dimension 0 of f32[2] has size 2, but result dimension 1");
    check_entry_error("a = f32[2,3] parameter(0)\n ROOT r = f32[5] reshape(a)",
                      "reshape r: f32[5] has 5 elements, but the operand f32[2,3] has 6");
    check_entry_error("ROOT i = s32[3,4] iota(), iota_dimension=2",
                      "iota_dimension 2 is out of range for s32[3,4]");
    check_entry_error("a = f32[2] parameter(0)\n ROOT c = s32[3] convert(a)",
                      "different dimensions");
    check_entry_error("a = f32[4] parameter(0)\n z = f32[] constant(0)\n"
                      " ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=lt",
                      "parameter 0 of to_apply computation lt is f32[], but its result is pred[]");
    check_entry_error("a = f32[4] parameter(0)\n z = s32[] constant(0)\n"
                      " ROOT r = s32[] reduce(a, z), dimensions={0}, to_apply=adds",
                      "parameter 1 of to_apply computation adds is s32[], but the input "
                      "elements are f32");
    check_entry_error("a = f32[4,5] parameter(0)\n z = f32[] constant(0)\n"
                      " ROOT r = f32[4] reduce(a, z), dimensions={1,1}, to_apply=add",
                      "reduce dimension 1 appears twice");
    check_entry_error("a = f32[4] parameter(0)\n ROOT s = f32[4] sort(a), dimensions={0},"
                      " to_apply=add", "comparator add must return pred[], not f32[]");
    check_entry_error("x = f32[1,5,5,3] parameter(0)\n k = f32[3,3,2,4] parameter(1)\n"
                      " ROOT c = f32[1,3,3,4] convolution(x, k), window={size=3x3},"
                      " dim_labels=b01f_01io->b01f",
                      "lhs features (3) must equal kernel input features (2) times "
                      "feature_group_count (1)");
    check_entry_error("x = f32[1,5,5,3] parameter(0)\n k = f32[3,3,3,4] parameter(1)\n"
                      " ROOT c = f32[1,3,3,4] convolution(x, k), window={size=3x3x3},"
                      " dim_labels=b012f_012io->b012f", "lhs f32[1,5,5,3] has rank 4, but "
                      "dim_labels describes rank 5");
    check_entry_error("p = f32[10,8] parameter(0)\n i = s32[6] parameter(1)\n"
                      " ROOT g = f32[6,8] gather(p, i), offset_dims={1}, collapsed_slice_dims={0},"
                      " start_index_map={0}, index_vector_dim=1, slice_sizes={2,8}",
                      "slice size of collapsed or batching dimension 0 must be 0 or 1, not 2");
    check_entry_error("p = f32[4,4] parameter(0)\n z = f32[] constant(0)\n"
                      " ROOT r = f32[2,2] reduce-window(p, z), window={size=2x0}, to_apply=add",
                      "window dimension 1 has non-positive size 0");
    check_entry_error("p = f32[4] parameter(0)\n ROOT s = f32[5] slice(p), slice={[0:5]}",
                      "slice limit 5 of dimension 0 exceeds its size in f32[4]");
    check_entry_error("p = f32[4] parameter(0)\n t = (f32[4]) tuple(p)\n"
                      " ROOT g = f32[4] get-tuple-element(t), index=1",
                      "index 1 is out of range for (f32[4])");
    check_entry_error("p = f32[4] parameter(0)\n q = f32[4] parameter(1)\n"
                      " ROOT c = pred[4] compare(p, q), direction=LT, type=SIGNED",
                      "comparison type SIGNED does not suit f32 operands");
    check_entry_error("p = f32[4] parameter(0)\n"
                      " ROOT c = f32[4] add-dependency(p, p)", "operand 1 must be a token");
}

static void test_verify_calls(void **state) {
    (void)state;
    check_verify_error("HloModule m\n"
                       "cond {\n s = f32[4] parameter(0)\n ROOT c = s32[] constant(0)\n}\n"
                       "body {\n s = f32[4] parameter(0)\n ROOT n = f32[4] negate(s)\n}\n"
                       "ENTRY e {\n x = f32[4] parameter(0)\n"
                       " ROOT w = f32[4] while(x), condition=cond, body=body\n}\n",
                       "while w: condition cond must return pred[], not s32[]");
    check_verify_error("HloModule m\n"
                       "cond {\n s = f32[4] parameter(0)\n ROOT c = pred[] constant(true)\n}\n"
                       "body {\n s = f32[4] parameter(0)\n"
                       " ROOT n = f32[2] slice(s), slice={[0:2]}\n}\n"
                       "ENTRY e {\n x = f32[4] parameter(0)\n"
                       " ROOT w = f32[4] while(x), condition=cond, body=body\n}\n",
                       "body body returns f32[2], but the loop state is f32[4]");
    check_verify_error("HloModule m\n"
                       "b0 {\n x = f32[2] parameter(0)\n ROOT n = f32[2] negate(x)\n}\n"
                       "b1 {\n x = f32[2] parameter(0)\n"
                       " ROOT n = f32[1] slice(x), slice={[0:1]}\n}\n"
                       "ENTRY e {\n i = s32[] parameter(0)\n x = f32[2] parameter(1)\n"
                       " ROOT c = f32[2] conditional(i, x, x), branch_computations={b0, b1}\n}\n",
                       "branch computations return different shapes: f32[2] and f32[1] (b1)");
    check_verify_error("HloModule m\n"
                       "g {\n x = f32[2] parameter(0)\n ROOT n = f32[2] negate(x)\n}\n"
                       "ENTRY e {\n a = f32[3] parameter(0)\n"
                       " ROOT c = f32[2] call(a), to_apply=g\n}\n",
                       "call c: parameter 0 of g is f32[2], but operand 0 is f32[3]");
    check_verify_error("HloModule m\n"
                       "g {\n x = f32[2] parameter(0)\n ROOT n = f32[2] negate(x)\n}\n"
                       "ENTRY e {\n a = f32[2] parameter(0)\n"
                       " ROOT c = f32[2] call(a, a), to_apply=g\n}\n",
                       "computation g takes 1 parameters, but 2 operands are given");
}

static void test_verify_collectives(void **state) {
    (void)state;
    check_verify_error("HloModule m\n" ADD_F32 "ENTRY e {\n p = f32[4] parameter(0)\n"
                       " ROOT r = f32[4] all-reduce(p), replica_groups={{0,1},{1,2}},"
                       " to_apply=add\n}\n",
                       "id 1 appears twice in replica_groups");
    check_verify_error("HloModule m\n" ADD_F32 "ENTRY e {\n p = f32[4] parameter(0)\n"
                       " ROOT r = f32[4] all-reduce(p), replica_groups={{0,3}}, to_apply=add\n}\n",
                       "replica_groups must name each id 0..1 once, but name 3");
    check_verify_error("HloModule m, num_partitions=8\n" ADD_F32 "ENTRY e {\n"
                       " p = f32[4] parameter(0)\n ROOT r = f32[4] all-reduce(p), channel_id=1,"
                       " replica_groups={{0,1},{2,3}}, use_global_device_ids=true,"
                       " to_apply=add\n}\n",
                       "replica_groups name 4 ids, but the module has "
                       "replica_count*num_partitions=8");
    check_verify_error("HloModule m, num_partitions=2\nENTRY e {\n p = f32[4] parameter(0)\n"
                       " ROOT c = f32[4] collective-permute(p), channel_id=1,"
                       " source_target_pairs={{0,1},{1,2}}\n}\n",
                       "target 2 in source_target_pairs is out of range for num_partitions=2");
    check_verify_error("HloModule m\nENTRY e {\n p = f32[4] parameter(0)\n"
                       " ROOT c = f32[4] collective-permute(p),"
                       " source_target_pairs={{0,1},{0,2}}\n}\n",
                       "source 0 appears twice in source_target_pairs");
    check_verify_error("HloModule m\nENTRY e {\n p = f32[2,3] parameter(0)\n"
                       " ROOT g = f32[2,9] all-gather(p), replica_groups={{0,1,2,3}},"
                       " dimensions={1}\n}\n",
                       "shape f32[2,9] does not match the inferred shape f32[2,12]");
    check_verify_error("HloModule m\n" ADD_F32 "ENTRY e {\n p = f32[6] parameter(0)\n"
                       " ROOT r = f32[1] reduce-scatter(p), replica_groups={{0,1,2,3}},"
                       " dimensions={0}, to_apply=add\n}\n",
                       "dimension 0 of f32[6] does not divide into 4 shards");
}

/* Every faulty instruction gets its own error, each at its own line. */
static void test_reports_every_problem(void **state) {
    (void)state;
    const char *text = "HloModule m\nENTRY e {\n a = f32[2] parameter(0)\n"
                       " b = f32[3] negate(a)\n c = f32[2] exponential(a)\n"
                       " ROOT d = s32[2] copy(a)\n}\n";
    gs_source *src;
    gs_module *m = parse_or_die(text, &src);
    gs_diags d = {0};
    assert_int_equal(gs_module_verify(m, &d), GS_ERR);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.items[0].span.line, 4);
    assert_int_equal(d.items[1].span.line, 6);
    assert_non_null(strstr(d.items[1].message, "copy d: shape s32[2]"));
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

/* gs_infer_shape on an instruction whose written shape it must ignore, and on one it cannot
 * infer. */
static void test_infer_shape_api(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse_or_die("HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n"
                                " t = f32[9] transpose(a), dimensions={1,0}\n"
                                " ROOT b = f32[3,2,4] broadcast(t), dimensions={0,1}\n}\n",
                                &src);
    gs_arena a;
    gs_arena_init(&a);
    gs_diags d = {0};
    gs_shape *s = NULL;
    assert_int_equal(gs_infer_shape(&a, m->entry->instrs[1], &s, &d), GS_OK);
    assert_non_null(s);
    char *text = gs_shape_to_string(&a, s);
    assert_string_equal(text, "f32[3,2]");
    assert_int_equal(gs_infer_shape(&a, m->entry->instrs[2], &s, &d), GS_OK);
    assert_null(s);
    assert_int_equal(d.n, 0);
    gs_arena_free(&a);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

/* `?` dims verify (shape inference treats them as matching any size), but partitioning and
 * running need sizes: gs_module_check_bounded names the first instruction that has one. */
static void test_check_bounded(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse_or_die("HloModule m\nENTRY e {\n p = f32[<=4,2] parameter(0)\n"
                                " q = f32[?,2] parameter(1)\n ROOT t = (f32[<=4,2], f32[?,2]) "
                                "tuple(p, q)\n}\n",
                                &src);
    gs_diags d = {0};
    assert_int_equal(gs_module_verify(m, &d), GS_OK);
    assert_int_equal(gs_module_check_bounded(m, "partitioning", &d), GS_ERR);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.items[0].message,
                        "partitioning needs every dimension's size, but q has shape f32[?,2] with "
                        "an unbounded dynamic dimension ('?')");
    assert_int_equal(d.items[0].span.line, 4);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
    m = parse_or_die("HloModule m\nENTRY e {\n ROOT p = f32[<=4,2] parameter(0)\n}\n", &src);
    assert_int_equal(gs_module_check_bounded(m, "running", &d), GS_OK);
    assert_int_equal(d.n, 0);
    gs_module_free(m);
    gs_source_free(src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_data_movement),
        cmocka_unit_test(test_dot),
        cmocka_unit_test(test_convolution),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_gather_scatter),
        cmocka_unit_test(test_sort_topk_fft),
        cmocka_unit_test(test_structure),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_parser_inference_errors),
        cmocka_unit_test(test_verify_accepts),
        cmocka_unit_test(test_verify_errors),
        cmocka_unit_test(test_verify_calls),
        cmocka_unit_test(test_verify_collectives),
        cmocka_unit_test(test_reports_every_problem),
        cmocka_unit_test(test_infer_shape_api),
        cmocka_unit_test(test_check_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
