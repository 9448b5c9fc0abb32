/*
 * test_cost.c — FLOPs and peak memory of modules (src/cost/), against hand-computed values:
 * dot and convolution counts, called computations once per call site, while bodies once, the
 * liveness of values, elementwise chains fused into their users, donated outputs in place; and
 * the step-time model (src/cost/step.c, machine.c): trip counts, collective algorithms, the
 * overlap of asynchronous collectives, machine profiles.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* ------------------------------------------------------------------ the step-time model */

static gs_module *parse_text(const char *text, gs_source **src) {
    gs_diags d = {0};
    *src = gs_source_from_string("step.hlo", text);
    gs_module *m = gs_parse_module(*src, &d);
    if (!m || gs_module_verify(m, &d) != GS_OK) gs_diags_render(&d, stderr);
    assert_non_null(m);
    gs_diags_free(&d);
    return m;
}

/* A counted loop: `counter CMP limit`, counter from `start` by `step`, a dot in the body. */
static char *loop_text(const char *cmp, const char *cmp_args, int start, int step,
                       const char *config) {
    char *t = malloc(4096);
    assert_non_null(t);
    snprintf(t, 4096,
             "HloModule l\n"
             "cond {\n  s = (s32[], f32[8,8]) parameter(0)\n"
             "  i = s32[] get-tuple-element(s), index=0\n  n = s32[] constant(10)\n"
             "  ROOT c = pred[] compare(%s), direction=%s\n}\n"
             "body {\n  s = (s32[], f32[8,8]) parameter(0)\n"
             "  i = s32[] get-tuple-element(s), index=0\n"
             "  x = f32[8,8] get-tuple-element(s), index=1\n"
             "  k = s32[] constant(%d)\n  j = s32[] add(i, k)\n"
             "  y = f32[8,8] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
             "  ROOT t = (s32[], f32[8,8]) tuple(j, y)\n}\n"
             "ENTRY e {\n  x = f32[8,8] parameter(0)\n  z = s32[] constant(%d)\n"
             "  t = (s32[], f32[8,8]) tuple(z, x)\n"
             "  ROOT w = (s32[], f32[8,8]) while(t), condition=cond, body=body%s\n}\n",
             cmp_args, cmp, step, start, config);
    return t;
}

static int64_t trips_of(const char *text, bool *known) {
    gs_source *src;
    gs_module *m = parse_text(text, &src);
    int64_t n = -1;
    *known = gs_cost_trip_count(m->entry->root, &n);
    gs_module_free(m);
    gs_source_free(src);
    return n;
}

static void test_trip_counts(void **state) {
    (void)state;
    bool known;
    struct {
        const char *cmp, *args;
        int start, step;
        const char *config;
        bool known;
        int64_t trips;
    } cases[] = {
        {"LT", "i, n", 0, 1, "", true, 10},
        {"LE", "i, n", 0, 1, "", true, 11},
        {"GT", "n, i", 0, 1, "", true, 10},
        {"LT", "i, n", 2, 3, "", true, 3},  /* 2, 5, 8 */
        {"LT", "i, n", 12, 1, "", true, 0},
        {"NE", "i, n", 0, 1, "", false, -1},
        {"LT", "i, n", 0, 1, ", backend_config={\"known_trip_count\":{\"n\":\"7\"}}", true, 7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = loop_text(cases[i].cmp, cases[i].args, cases[i].start, cases[i].step,
                            cases[i].config);
        int64_t n = trips_of(t, &known);
        free(t);
        assert_int_equal(known, cases[i].known);
        if (known) assert_int_equal(n, cases[i].trips);
    }
}

static gs_machine test_machine(void) {
    gs_machine mc;
    memset(&mc, 0, sizeof mc);
    snprintf(mc.name, sizeof mc.name, "test");
    mc.flops_bf16 = 4e12;
    mc.flops_f32 = 1e12;
    mc.flops_f64 = 5e11;
    mc.vector_flops = 1e11;
    mc.mem_bandwidth = 1e11;
    mc.mem_capacity = 1e9;
    mc.intra = (gs_link){1e9, 1e-6, GS_TOPO_SWITCH};
    mc.inter = mc.intra;
    return mc;
}

static void step_of(const char *text, const gs_machine *mc, gs_step_cost *c) {
    gs_source *src;
    gs_module *m = parse_text(text, &src);
    gs_diags d = {0};
    assert_int_equal(gs_cost_step(m, mc, c, &d), GS_OK);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

static void test_step_loop_flops(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    gs_step_cost c;
    char *t = loop_text("LT", "i, n", 0, 1, "");
    step_of(t, &mc, &c);
    free(t);
    /* ten iterations of an 8x8x8 dot: 2 * 64 * 8 FLOPs each */
    assert_true(fabs(c.matmul_flops - 10 * 1024.0) < 1e-9);
    assert_int_equal(c.unknown_trip_counts, 0);
    /* the dot's time: 1024 FLOPs at 1e12, or its 768 bytes at 1e11: the bytes win */
    assert_true(c.compute_s >= 10 * 768 / 1e11 * (1 - 1e-12));
    assert_true(c.step_s >= c.compute_s);
}

static void test_step_transcendentals(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    mc.transcendentals = 1e8;
    gs_step_cost c;
    /* exp of 1000 elements: 1000 transcendentals at 1e8/s = 10 us, more than its 8000 bytes at
     * 1e11 B/s; the add is 1000 vector FLOPs */
    step_of("HloModule t\nENTRY e {\n  x = f32[1000] parameter(0)\n  y = f32[1000] exponential(x)\n"
            "  ROOT z = f32[1000] add(y, x)\n}\n",
            &mc, &c);
    assert_true(c.transcendentals == 1000 && c.vector_flops == 1000);
    assert_true(c.compute_s >= 1e-5 * (1 - 1e-12));
}

static void test_step_collectives(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    gs_step_cost c;
    /* all-reduce of 4096 bytes over groups of 4: ring 2*(3/4)*4096/1e9 + 6*1e-6 = 12.144 us
     * beats tree 2*2*(1e-6 + 4.096 us) = 20.384 us; all-gather to 16384 bytes over 4: 3/4 *
     * 16384/1e9 + 3e-6 = 15.288 us */
    step_of("HloModule c, num_partitions=4\n"
            "add { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  ROOT s = f32[] add(a, b)\n}\n"
            "ENTRY e {\n  x = f32[1024] parameter(0)\n"
            "  r = f32[1024] all-reduce(x), replica_groups=[1,4]<=[4], to_apply=add, channel_id=1\n"
            "  ROOT g = f32[4096] all-gather(r), replica_groups=[1,4]<=[4], dimensions={0}, "
            "channel_id=2, use_global_device_ids=true\n}\n",
            &mc, &c);
    assert_true(fabs(c.coll[GS_COST_ALL_REDUCE].seconds - 12.144e-6) < 1e-12);
    assert_true(fabs(c.coll[GS_COST_ALL_REDUCE].wire_bytes - 6144) < 1e-9);
    assert_true(fabs(c.coll[GS_COST_ALL_GATHER].seconds - 15.288e-6) < 1e-12);
    assert_true(fabs(c.comm_s - 27.432e-6) < 1e-12);
    assert_true(fabs(c.exposed_comm_s - c.comm_s) < 1e-15); /* synchronous: all exposed */
}

static void test_step_async_overlap(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    gs_step_cost c;
    /* the all-gather (15.288 us) runs while a 1024^3 dot (2.147e9 FLOPs: 2.147 ms) computes:
     * nothing of it is exposed */
    step_of("HloModule c, num_partitions=4\n"
            "ENTRY e {\n  x = f32[1024] parameter(0)\n  a = f32[1024,1024] parameter(1)\n"
            "  gs = (f32[1024], f32[4096]) all-gather-start(x), replica_groups=[1,4]<=[4], "
            "dimensions={0}, channel_id=1, use_global_device_ids=true\n"
            "  d = f32[1024,1024] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            "  g = f32[4096] all-gather-done(gs)\n"
            "  ROOT t = (f32[4096], f32[1024,1024]) tuple(g, d)\n}\n",
            &mc, &c);
    assert_true(fabs(c.coll[GS_COST_ALL_GATHER].seconds - 15.288e-6) < 1e-12);
    assert_true(c.exposed_comm_s < 1e-15);
    assert_true(fabs(c.step_s - c.compute_s) < 1e-15);
}

static void test_machine_profiles(void **state) {
    (void)state;
    for (const char *const *n = gs_machine_names(); *n; n++) {
        gs_machine mc;
        assert_true(gs_machine_builtin(*n, &mc));
        assert_true(mc.flops_bf16 > 0 && mc.flops_f32 > 0 && mc.mem_bandwidth > 0);
    }
    gs_machine mc;
    gs_diags d = {0};
    gs_source *src = gs_source_from_string(
        "m.txt", "# a test machine\nbase = a100\nname = mine\nflops.f32 = 40T  # with TF32\n"
                 "memory.capacity = 40Gi\ninter.topology = ring\n");
    assert_int_equal(gs_machine_parse(src, &mc, &d), GS_OK);
    assert_string_equal(mc.name, "mine");
    assert_true(mc.flops_f32 == 40e12 && mc.flops_bf16 == 312e12);
    assert_true(mc.mem_capacity == 40.0 * 1024 * 1024 * 1024);
    assert_int_equal(mc.inter.topology, GS_TOPO_RING);
    gs_source_free(src);
    gs_diags_free(&d);
    const char *bad[][2] = {
        {"flops.f32 = 1T\nspeed = 3\n", "unknown key 'speed'"},
        {"flops.f32 = fast\n", "flops.f32 must be a number"},
        {"intra.topology = mesh\n", "topology must be switch, ring or torus"},
        {"base = tpu-v9\n", "no built-in machine named 'tpu-v9'"},
        {"flops.f32\n", "expected `key = value`"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gs_diags e = {0};
        gs_source *s = gs_source_from_string("bad.txt", bad[i][0]);
        assert_int_equal(gs_machine_parse(s, &mc, &e), GS_ERR);
        assert_true(e.n > 0 && e.items[0].message && strstr(e.items[0].message, bad[i][1]));
        if (i != 3) assert_true(e.items[0].span.line >= 1);
        gs_source_free(s);
        gs_diags_free(&e);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_and_convolution_flops),
        cmocka_unit_test(test_calls_counted_per_site),
        cmocka_unit_test(test_peak_memory),
        cmocka_unit_test(test_trip_counts),
        cmocka_unit_test(test_step_loop_flops),
        cmocka_unit_test(test_step_transcendentals),
        cmocka_unit_test(test_step_collectives),
        cmocka_unit_test(test_step_async_overlap),
        cmocka_unit_test(test_machine_profiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
