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
    /* Run as the interpreter runs it (every value in memory of its own), the dot's kernel also
     * holds its operands and result as f32 copies while it runs (k_dot.c: 3 x 16 KiB) beside
     * a (16 KiB) and its own result (16 KiB): 80 KiB, and the parameter. */
    assert_int_equal(c.run_peak_bytes, 16384 + 16384 + 3 * 16384 + 16384);
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

/* ------------------------------------------------------------------ kernels as XLA fuses them */

static void test_step_kernels_elementwise_chain(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    gs_step_cost c, c0;
    /* exp -> negate -> add(+ a broadcast scalar) feeding a dot: one loop fusion (its result c
     * is the dot's operand, so in memory) and the dot: 2 kernels, not 4. Traffic: the fusion
     * writes c (16 KiB) and reads x (16 KiB; the constant is an immediate); the dot writes 16 KiB
     * and reads c and w (32 KiB): 80 KiB. */
    const char *text =
        "HloModule k\nENTRY e {\n  x = f32[64,64] parameter(0)\n  w = f32[64,64] parameter(1)\n"
        "  a = f32[64,64] exponential(x)\n  b = f32[64,64] negate(a)\n"
        "  one = f32[] constant(1)\n  ob = f32[64,64] broadcast(one), dimensions={}\n"
        "  c = f32[64,64] add(b, ob)\n"
        "  ROOT d = f32[64,64] dot(c, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
    step_of(text, &mc, &c0);
    assert_true(c0.kernels == 2);
    assert_true(c0.bytes == 81920);
    mc.op_overhead = 1e-6; /* once per kernel */
    step_of(text, &mc, &c);
    assert_true(c.kernels == 2);
    assert_true(fabs(c.compute_s - c0.compute_s - 2e-6) < 1e-15);
    assert_true(fabs(c.step_s - c0.step_s - 2e-6) < 1e-15);
}

static void test_step_kernels_reduce_input_fusion(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    gs_step_cost c;
    /* exp(x * y) summed: one kernel (XLA's input fusion), which reads x and y (8 KiB) and writes
     * 4 bytes; neither product nor exponential is in memory, so the peak is the parameters and
     * the scalar. */
    const char *text = "HloModule r\n"
                       "add { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                       "  ROOT s = f32[] add(a, b)\n}\n"
                       "ENTRY e {\n  x = f32[1024] parameter(0)\n  y = f32[1024] parameter(1)\n"
                       "  m = f32[1024] multiply(x, y)\n  ex = f32[1024] exponential(m)\n"
                       "  z = f32[] constant(0)\n"
                       "  ROOT r = f32[] reduce(ex, z), dimensions={0}, to_apply=add\n}\n";
    step_of(text, &mc, &c);
    assert_true(c.kernels == 1);
    assert_true(c.bytes == 8192 + 4);
    assert_true(c.vector_flops == 1024 + 1024 && c.transcendentals == 1024);
    gs_cost m;
    cost_of(text, &m);
    assert_int_equal(m.peak_bytes, 8192 + 4);
}

/* The same program with its instructions written out of order (an operand named before it is
 * defined, which HLO text allows): the same kernels, bytes and peak. It read past its tables
 * (fuzz_pipeline). */
static void test_step_kernels_out_of_order(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    gs_step_cost c;
    const char *text = "HloModule r\n"
                       "add { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                       "  ROOT s = f32[] add(a, b)\n}\n"
                       "ENTRY e {\n  x = f32[1024] parameter(0)\n  y = f32[1024] parameter(1)\n"
                       "  z = f32[] constant(0)\n"
                       "  ROOT r = f32[] reduce(ex, z), dimensions={0}, to_apply=add\n"
                       "  ex = f32[1024] exponential(m)\n  m = f32[1024] multiply(x, y)\n}\n";
    step_of(text, &mc, &c);
    assert_true(c.kernels == 1);
    assert_true(c.bytes == 8192 + 4);
    gs_cost m;
    cost_of(text, &m);
    assert_int_equal(m.peak_bytes, 8192 + 4);
}

static void test_step_kernels_duplication(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    gs_step_cost c;
    /* p = x + y is read by two reductions (one through a negate). Fused into both, each kernel
     * reads its inputs x and y: (k - 1) x 8 KiB of reads more, against p's 4 KiB written and
     * read twice, (k + 1) x 4 KiB, with k = 2 kernels: recomputed in both, 2 kernels, each
     * reading x and y and writing a scalar. */
    const char *two = "HloModule d\n"
                      "add { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                      "  ROOT s = f32[] add(a, b)\n}\n"
                      "ENTRY e {\n  x = f32[1024] parameter(0)\n  y = f32[1024] parameter(1)\n"
                      "  p = f32[1024] add(x, y)\n  z = f32[] constant(0)\n"
                      "  r1 = f32[] reduce(p, z), dimensions={0}, to_apply=add\n"
                      "  n = f32[1024] negate(p)\n"
                      "  r2 = f32[] reduce(n, z), dimensions={0}, to_apply=add\n"
                      "  ROOT t = (f32[], f32[]) tuple(r1, r2)\n}\n";
    step_of(two, &mc, &c);
    assert_true(c.kernels == 2);
    assert_true(c.bytes == 2 * (8192 + 4));
    /* p = (x + y) + (z + w) reads 16 KiB: 1 x 16 KiB > 3 x 4 KiB, so p is a kernel of its own
     * (writes 4 KiB, reads 16 KiB) that both reductions read (4 KiB each, 4 bytes written):
     * 3 kernels. */
    const char *four = "HloModule d\n"
                       "add { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                       "  ROOT s = f32[] add(a, b)\n}\n"
                       "ENTRY e {\n  x = f32[1024] parameter(0)\n  y = f32[1024] parameter(1)\n"
                       "  u = f32[1024] parameter(2)\n  v = f32[1024] parameter(3)\n"
                       "  a = f32[1024] add(x, y)\n  b = f32[1024] add(u, v)\n"
                       "  p = f32[1024] add(a, b)\n  z = f32[] constant(0)\n"
                       "  r1 = f32[] reduce(p, z), dimensions={0}, to_apply=add\n"
                       "  n = f32[1024] negate(p)\n"
                       "  r2 = f32[] reduce(n, z), dimensions={0}, to_apply=add\n"
                       "  ROOT t = (f32[], f32[]) tuple(r1, r2)\n}\n";
    step_of(four, &mc, &c);
    assert_true(c.kernels == 3);
    assert_true(c.bytes == (4096 + 16384) + 2 * (4096 + 4));
}

static void test_step_kernels_data_movement(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    gs_step_cost c;
    /* exp(x) transposed, plus a broadcast row: one loop fusion (writes 8 KiB, reads x 8 KiB and
     * v 256 bytes). The transpose of w read only by the dot is folded into it (no kernel): the
     * dot reads x and w (16 KiB) and writes 64 x 64 x 4. A slice of a fused value reads only
     * what it keeps: the last kernel reads a quarter of y (2 KiB) and writes 2 KiB. */
    step_of("HloModule m\nENTRY e {\n  x = f32[64,32] parameter(0)\n  w = f32[64,32] parameter(1)\n"
            "  v = f32[64] parameter(2)\n  y = f32[32,64] parameter(3)\n"
            "  ex = f32[64,32] exponential(x)\n"
            "  t = f32[32,64] transpose(ex), dimensions={1,0}\n"
            "  b = f32[32,64] broadcast(v), dimensions={1}\n  s = f32[32,64] add(t, b)\n"
            "  wt = f32[32,64] transpose(w), dimensions={1,0}\n"
            "  d = f32[64,64] dot(x, wt), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            "  ny = f32[32,64] negate(y)\n  q = f32[8,64] slice(ny), slice={[0:8], [0:64]}\n"
            "  ROOT o = (f32[32,64], f32[64,64], f32[8,64]) tuple(s, d, q)\n}\n",
            &mc, &c);
    assert_true(c.kernels == 3);
    assert_true(c.bytes == (8192 + 8192 + 256) + (16384 + 16384) + (2048 + 2048));
}

static void test_step_kernels_calls_and_loops(void **state) {
    (void)state;
    gs_machine mc = test_machine();
    gs_step_cost c;
    /* A called relu is inlined, as XLA's CallInliner does before fusion: add, relu and negate are
     * one kernel (reads x and b, writes n: 12 KiB). */
    step_of("HloModule c\n"
            "relu { p = f32[1024] parameter(0)\n  z = f32[] constant(0)\n"
            "  zb = f32[1024] broadcast(z), dimensions={}\n  ROOT m = f32[1024] maximum(p, zb)\n}\n"
            "ENTRY e {\n  x = f32[1024] parameter(0)\n  b = f32[1024] parameter(1)\n"
            "  a = f32[1024] add(x, b)\n  r = f32[1024] call(a), to_apply=relu\n"
            "  ROOT n = f32[1024] negate(r)\n}\n",
            &mc, &c);
    assert_true(c.kernels == 1);
    assert_true(c.bytes == 12288);
    /* Per loop iteration: the counter's add and the dot (2 kernels, 10 times); the condition's
     * compare once more (11): 31. */
    char *t = loop_text("LT", "i, n", 0, 1, "");
    step_of(t, &mc, &c);
    free(t);
    assert_true(c.kernels == 31);
    /* A collective is a kernel too, with the fixed cost on top of its algorithm's time. */
    mc.op_overhead = 1e-6;
    step_of("HloModule c, num_partitions=4\n"
            "add { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  ROOT s = f32[] add(a, b)\n}\n"
            "ENTRY e {\n  x = f32[1024] parameter(0)\n"
            "  ROOT r = f32[1024] all-reduce(x), replica_groups=[1,4]<=[4], to_apply=add, "
            "channel_id=1\n}\n",
            &mc, &c);
    assert_true(c.kernels == 1);
    assert_true(fabs(c.coll[GS_COST_ALL_REDUCE].seconds - 13.144e-6) < 1e-12);
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

static void test_machine_amd_profiles(void **state) {
    (void)state;
    gs_machine mc;
    bool seen300 = false, seen350 = false;
    for (const char *const *n = gs_machine_names(); *n; n++) {
        seen300 |= strcmp(*n, "mi300x") == 0;
        seen350 |= strcmp(*n, "mi350x") == 0;
    }
    assert_true(seen300 && seen350);
    /* AMD's published peaks, dense (see src/cost/machine.c for each figure's source). */
    assert_true(gs_machine_builtin("mi300x", &mc));
    assert_true(near(mc.flops_bf16, 1307.4e12) && near(mc.flops_f32, 163.4e12) &&
                near(mc.flops_f64, 163.4e12) && near(mc.vector_flops, 163.4e12));
    assert_true(near(mc.mem_bandwidth, 5.3e12) && near(mc.mem_capacity, 192e9));
    assert_int_equal(mc.node_devices, 8);
    assert_true(near(mc.intra.bandwidth, 448e9) && near(mc.inter.bandwidth, 50e9));
    assert_true(gs_machine_builtin("mi350x", &mc));
    assert_true(near(mc.flops_bf16, 2.3e15) && near(mc.flops_f32, 144.2e12) &&
                near(mc.flops_f64, 72.1e12) && near(mc.vector_flops, 144.2e12));
    assert_true(near(mc.mem_bandwidth, 8e12) && near(mc.mem_capacity, 288e9));
    assert_int_equal(mc.node_devices, 8);
    assert_true(near(mc.intra.bandwidth, 537.6e9) && near(mc.inter.bandwidth, 50e9));
    /* A profile file starts from them by name. */
    gs_diags d = {0};
    gs_source *src = gs_source_from_string("m.txt", "base = mi350x\nname = mi355x\n"
                                                    "flops.bf16 = 2516.6T\n");
    assert_int_equal(gs_machine_parse(src, &mc, &d), GS_OK);
    assert_string_equal(mc.name, "mi355x");
    assert_true(near(mc.flops_bf16, 2516.6e12) && near(mc.mem_capacity, 288e9));
    gs_source_free(src);
    gs_diags_free(&d);
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
        cmocka_unit_test(test_step_kernels_elementwise_chain),
        cmocka_unit_test(test_step_kernels_reduce_input_fusion),
        cmocka_unit_test(test_step_kernels_out_of_order),
        cmocka_unit_test(test_step_kernels_duplication),
        cmocka_unit_test(test_step_kernels_data_movement),
        cmocka_unit_test(test_step_kernels_calls_and_loops),
        cmocka_unit_test(test_machine_amd_profiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
