/*
 * test_cost.c — FLOPs and peak memory of modules (src/cost/), against hand-computed values:
 * dot and convolution counts, called computations once per call site, while bodies once, the
 * liveness of values, elementwise chains fused into their users, donated outputs in place.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "gspmd/cost.h"
#include "gspmd/text.h"

static void cost_of(const char *text, gs_cost *c) {
    gs_diags d = {0};
    gs_source *src = gs_source_from_string("cost.hlo", text);
    gs_module *m = gs_parse_module(src, &d);
    if (!m || gs_module_verify(m, &d) != GS_OK) gs_diags_render(&d, stderr);
    assert_non_null(m);
    gs_cost_module(m, c);
    gs_module_free(m);
    gs_source_free(src);
    gs_diags_free(&d);
}

static void test_dot_and_convolution_flops(void **state) {
    (void)state;
    gs_cost c;
    /* dot [4,8] x [8,16]: 2 x 4 x 16 x 8 = 1024; convolution [1,10,3] * [3,3,5] -> [1,8,5]:
     * 2 x 40 x (3 x 3) = 720. */
    cost_of("HloModule t\n"
            "ENTRY %e (a: f32[4,8], b: f32[8,16], x: f32[1,10,3], k: f32[3,3,5]) -> "
            "(f32[4,16], f32[1,8,5]) {\n"
            "  %a = f32[4,8] parameter(0)\n  %b = f32[8,16] parameter(1)\n"
            "  %x = f32[1,10,3] parameter(2)\n  %k = f32[3,3,5] parameter(3)\n"
            "  %d = f32[4,16] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            "  %v = f32[1,8,5] convolution(%x, %k), window={size=3}, dim_labels=b0f_0io->b0f\n"
            "  ROOT %t = (f32[4,16], f32[1,8,5]) tuple(%d, %v)\n}\n",
            &c);
    assert_true(c.flops == 1024 + 720);
    assert_int_equal(c.n_dots, 1);
    assert_int_equal(c.n_convs, 1);
}

static void test_calls_counted_per_site(void **state) {
    (void)state;
    gs_cost c;
    /* f (one [2,2] x [2,2] dot: 16 FLOPs) called twice, and once more in a while body: 48. The
     * reduction's to_apply is scalar and not counted. */
    cost_of("HloModule t\n"
            "%f (a: f32[2,2]) -> f32[2,2] {\n  %a = f32[2,2] parameter(0)\n"
            "  ROOT %d = f32[2,2] dot(%a, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            "}\n"
            "%cond (s: (s32[], f32[2,2])) -> pred[] {\n  %s = (s32[], f32[2,2]) parameter(0)\n"
            "  %i = s32[] get-tuple-element(%s), index=0\n  %n = s32[] constant(5)\n"
            "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n}\n"
            "%body (s: (s32[], f32[2,2])) -> (s32[], f32[2,2]) {\n"
            "  %s = (s32[], f32[2,2]) parameter(0)\n  %i = s32[] get-tuple-element(%s), index=0\n"
            "  %v = f32[2,2] get-tuple-element(%s), index=1\n"
            "  %w = f32[2,2] call(%v), to_apply=%f\n"
            "  ROOT %t = (s32[], f32[2,2]) tuple(%i, %w)\n}\n"
            "%add (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
            "  %y = f32[] parameter(1)\n  ROOT %r = f32[] add(%x, %y)\n}\n"
            "ENTRY %e (p: f32[2,2]) -> (f32[], f32[2,2]) {\n  %p = f32[2,2] parameter(0)\n"
            "  %c1 = f32[2,2] call(%p), to_apply=%f\n  %c2 = f32[2,2] call(%c1), to_apply=%f\n"
            "  %z = s32[] constant(0)\n  %t = (s32[], f32[2,2]) tuple(%z, %c2)\n"
            "  %w = (s32[], f32[2,2]) while(%t), condition=%cond, body=%body\n"
            "  %r = f32[2,2] get-tuple-element(%w), index=1\n  %zero = f32[] constant(0)\n"
            "  %s = f32[] reduce(%r, %zero), dimensions={0,1}, to_apply=%add\n"
            "  ROOT %o = (f32[], f32[2,2]) tuple(%s, %r)\n}\n",
            &c);
    assert_true(c.flops == 48);
    assert_int_equal(c.n_dots, 3);
}

static void test_peak_memory(void **state) {
    (void)state;
    gs_cost c;
    /* p 16 KiB; a = exp(p) feeds a dot, so it exists (16 KiB); d = dot(a, a) 16 KiB while a is
     * still live: 32 KiB; then a dies; r = negate(d) is the root: d and r, 32 KiB. The scalar
     * broadcast feeding the add is fused into it. Peak 32 KiB + the parameter's 16 KiB. */
    cost_of("HloModule t\n"
            "ENTRY %e (p: f32[64,64]) -> f32[64,64] {\n  %p = f32[64,64] parameter(0)\n"
            "  %a = f32[64,64] exponential(%p)\n"
            "  %d = f32[64,64] dot(%a, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            "  %one = f32[] constant(1)\n  %ob = f32[64,64] broadcast(%one), dimensions={}\n"
            "  %s = f32[64,64] add(%d, %ob)\n"
            "  ROOT %r = f32[64,64] negate(%s)\n}\n",
            &c);
    assert_int_equal(c.param_bytes, 16384);
    assert_int_equal(c.peak_bytes, 16384 + 32768);
    /* The same update donated to its parameter (input_output_alias): written in place through
     * the bitcast, no memory beyond the parameter. */
    cost_of("HloModule t, input_output_alias={ {0}: (0, {}, may-alias) }\n"
            "ENTRY %e (p: f32[64,64]) -> (f32[4096]) {\n  %p = f32[64,64] parameter(0)\n"
            "  %n = f32[64,64] negate(%p)\n  %f = f32[4096] reshape(%n)\n"
            "  ROOT %t = (f32[4096]) tuple(%f)\n}\n",
            &c);
    assert_int_equal(c.peak_bytes, 16384);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_and_convolution_flops),
        cmocka_unit_test(test_calls_counted_per_site),
        cmocka_unit_test(test_peak_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
