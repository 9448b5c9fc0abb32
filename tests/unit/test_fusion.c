/*
 * test_fusion.c — the interpreter's loop fusion of elementwise chains (src/interp/fusion.c)
 * computes bit for bit what the kernels compute one instruction at a time.
 *
 * gs_interp_eval fuses; gs_interp_eval_bounded (the reference of --verify) never does. Every
 * module here is run both ways on the same seeded arguments and the results must be identical
 * (NaNs included): hand-written modules that stress the fusion plan (broadcasts along each dim, rows longer than a block,
 * transposing broadcasts, scalars, a chain longer than one fused tree may be, a
 * value that several members read, a fused value that is the computation's root, a chain inside
 * a while body, operands that die in the chain and take its result, large arrays whose buffers
 * are reused as spares), and every tests/interp file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gspmd/interp.h"
#include "gspmd/ir.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

static bool identical(const gs_value *a, const gs_value *b) {
    if (!a || !b || a->type != b->type || a->n_tuple != b->n_tuple || a->n != b->n) return false;
    for (int i = 0; i < a->n_tuple; i++)
        if (!identical(a->tuple[i], b->tuple[i])) return false;
    if (a->type == GS_TUPLE || a->type == GS_TOKEN) return true;
    return memcmp(a->data, b->data, (size_t)a->n * (size_t)gs_type_size(a->type)) == 0;
}

/* Runs `text` fused and unfused; fails unless both succeed with identical results. Returns
 * false (without failing) when the module does not run alone (manual regions, bad input). */
static bool check_same(const char *name, const char *text) {
    gs_diags d = {0};
    gs_source *src = gs_source_from_string(name, text);
    gs_module *m = gs_parse_module(src, &d);
    gs_value **args = NULL, *fused = NULL, *plain = NULL, *bound = NULL;
    int n_args = 0;
    bool ran = false;
    if (m && gs_module_verify(m, &d) == GS_OK &&
        gs_interp_make_args(m, NULL, 3, &args, &n_args, &d) == GS_OK) {
        gs_collectives manual = {NULL, (void *)m, gs_collective_execute_bundle, NULL};
        gs_interp_env env = {0, 0, 1, &manual, 3, NULL, NULL, 0, NULL};
        gs_status a = gs_interp_eval(m, &env, args, n_args, &fused, &d);
        gs_status b = gs_interp_eval_bounded(m, &env, args, n_args, &plain, &bound, &d);
        ran = a == GS_OK && b == GS_OK;
        if (a != b) fail_msg("%s: fused %s, unfused %s", name, a == GS_OK ? "ran" : "failed",
                             b == GS_OK ? "ran" : "failed");
        if (ran && !identical(fused, plain)) fail_msg("%s: fused and unfused results differ", name);
    }
    if (!ran && getenv("GSPMD_TEST_VERBOSE")) gs_diags_render(&d, stderr);
    gs_value_free(fused);
    gs_value_free(plain);
    gs_value_free(bound);
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_module_free(m);
    gs_source_free(src);
    gs_diags_free(&d);
    return ran;
}

static void test_broadcasts(void **state) {
    (void)state;
    assert_true(check_same("broadcasts.hlo",
        "HloModule b\n"
        "ENTRY e {\n"
        "  x = f32[5,7,3] parameter(0)\n"
        "  row = f32[5] parameter(1)\n"
        "  col = f32[3] parameter(2)\n"
        "  mid = f32[7,5] parameter(3)\n"
        "  one = f32[7,3] parameter(4)\n"
        "  k = f32[] constant(0.75)\n"
        "  br = f32[5,7,3] broadcast(row), dimensions={0}\n"
        "  bc = f32[5,7,3] broadcast(col), dimensions={2}\n"
        "  bm = f32[5,7,3] broadcast(mid), dimensions={1,0}\n"
        "  bo = f32[5,7,3] broadcast(one), dimensions={1,2}\n"
        "  bk = f32[5,7,3] broadcast(k), dimensions={}\n"
        "  a = f32[5,7,3] multiply(x, br)\n"
        "  b = f32[5,7,3] add(a, bc)\n"
        "  c = f32[5,7,3] subtract(b, bm)\n"
        "  t = f32[5,7,3] tanh(c)\n"
        "  u = f32[5,7,3] maximum(t, bo)\n"
        "  ROOT v = f32[5,7,3] divide(u, bk)\n"
        "}\n"));
}

static void test_long_rows(void **state) {
    (void)state;
    /* Rows longer than a block, and blocks that start inside rows: the layer norm's shapes. */
    assert_true(check_same("rows.hlo",
        "HloModule r\n"
        "add { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
        "ENTRY e {\n"
        "  x = f32[37,1500] parameter(0)\n"
        "  gamma = f32[1500] parameter(1)\n"
        "  res = f32[37,1500] parameter(2)\n"
        "  zero = f32[] constant(0)\n"
        "  sum = f32[37] reduce(x, zero), dimensions={1}, to_apply=add\n"
        "  sb = f32[37,1500] broadcast(sum), dimensions={0}\n"
        "  gb = f32[37,1500] broadcast(gamma), dimensions={1}\n"
        "  xc = f32[37,1500] subtract(x, sb)\n"
        "  g = f32[37,1500] multiply(xc, gb)\n"
        "  t = f32[37,1500] tanh(g)\n"
        "  ROOT out = f32[37,1500] add(t, res)\n"
        "}\n"));
}

static void test_shared_leaf_and_root(void **state) {
    (void)state;
    /* g is read by four members; h is the root and also a leaf of another tree (whose result
     * must not be written over it); x dies in the chain that reads it twice. */
    assert_true(check_same("shared.hlo",
        "HloModule s\n"
        "ENTRY e {\n"
        "  p = f32[64,33] parameter(0)\n"
        "  q = f32[64,33] parameter(1)\n"
        "  x = f32[64,33] add(p, q)\n"
        "  g = f32[64,33] exponential(x)\n"
        "  g2 = f32[64,33] multiply(g, g)\n"
        "  g3 = f32[64,33] multiply(g2, g)\n"
        "  s = f32[64,33] add(g3, g)\n"
        "  r = f32[64,33] multiply(s, g)\n"
        "  h = f32[64,33] negate(r)\n"
        "  n = f32[64,33] abs(h)\n"
        "  w = f32[64,33] sqrt(n)\n"
        "  ROOT out = (f32[64,33], f32[64,33]) tuple(h, w)\n"
        "}\n"));
}

static void test_long_chain(void **state) {
    (void)state;
    /* 300 ops in one chain: more than one fused tree holds, so it is cut into several. */
    char *t = malloc(1 << 16);
    assert_non_null(t);
    int n = snprintf(t, 1 << 16, "HloModule c\nENTRY e {\n  v0 = f32[2000] parameter(0)\n"
                                 "  y = f32[2000] parameter(1)\n");
    const char *ops[] = {"add", "multiply", "subtract", "maximum", "minimum"};
    for (int i = 1; i <= 300; i++) {
        if (i % 7 == 0)
            n += snprintf(t + n, (size_t)(1 << 16) - (size_t)n, "  v%d = f32[2000] tanh(v%d)\n", i,
                          i - 1);
        else
            n += snprintf(t + n, (size_t)(1 << 16) - (size_t)n, "  v%d = f32[2000] %s(v%d, y)\n",
                          i, ops[i % 5], i - 1);
    }
    snprintf(t + n, (size_t)(1 << 16) - (size_t)n, "  ROOT r = f32[2000] copy(v300)\n}\n");
    assert_true(check_same("chain.hlo", t));
    free(t);
}

static void test_scalars_and_loops(void **state) {
    (void)state;
    assert_true(check_same("loop.hlo",
        "HloModule l\n"
        "cond {\n"
        "  s = (s32[], f32[300], f32[]) parameter(0)\n"
        "  i = s32[] get-tuple-element(s), index=0\n"
        "  n = s32[] constant(4)\n"
        "  ROOT c = pred[] compare(i, n), direction=LT\n"
        "}\n"
        "body {\n"
        "  s = (s32[], f32[300], f32[]) parameter(0)\n"
        "  i = s32[] get-tuple-element(s), index=0\n"
        "  x = f32[300] get-tuple-element(s), index=1\n"
        "  a = f32[] get-tuple-element(s), index=2\n"
        "  one = s32[] constant(1)\n"
        "  j = s32[] add(i, one)\n"
        "  half = f32[] constant(0.5)\n"
        "  a2 = f32[] multiply(a, half)\n"
        "  a3 = f32[] add(a2, half)\n"
        "  ab = f32[300] broadcast(a3), dimensions={}\n"
        "  y = f32[300] multiply(x, ab)\n"
        "  z = f32[300] logistic(y)\n"
        "  w = f32[300] add(z, x)\n"
        "  ROOT t = (s32[], f32[300], f32[]) tuple(j, w, a3)\n"
        "}\n"
        "ENTRY e {\n"
        "  x = f32[300] parameter(0)\n"
        "  a = f32[] parameter(1)\n"
        "  z = s32[] constant(0)\n"
        "  t = (s32[], f32[300], f32[]) tuple(z, x, a)\n"
        "  ROOT w = (s32[], f32[300], f32[]) while(t), condition=cond, body=body\n"
        "}\n"));
}

static void test_large_loop(void **state) {
    (void)state;
    /* Arrays of 2 MiB die and are born each iteration: results are written into the spare
     * arrays of the dead ones (unzeroed), which must not change a bit. */
    assert_true(check_same("spares.hlo",
        "HloModule l\n"
        "max { a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
        "  ROOT m = f32[] maximum(a, b)\n}\n"
        "cond {\n"
        "  s = (s32[], f32[512,1024], f32[512,1024]) parameter(0)\n"
        "  i = s32[] get-tuple-element(s), index=0\n"
        "  n = s32[] constant(3)\n"
        "  ROOT c = pred[] compare(i, n), direction=LT\n"
        "}\n"
        "body {\n"
        "  s = (s32[], f32[512,1024], f32[512,1024]) parameter(0)\n"
        "  i = s32[] get-tuple-element(s), index=0\n"
        "  x = f32[512,1024] get-tuple-element(s), index=1\n"
        "  w = f32[512,1024] get-tuple-element(s), index=2\n"
        "  one = s32[] constant(1)\n"
        "  j = s32[] add(i, one)\n"
        "  a = f32[512,1024] multiply(x, w)\n"
        "  b = f32[512,1024] add(a, x)\n"
        "  c = f32[512,1024] tanh(b)\n"
        "  lo = f32[] constant(-1)\n"
        "  m = f32[512] reduce(c, lo), dimensions={1}, to_apply=max\n"
        "  mb = f32[512,1024] broadcast(m), dimensions={0}\n"
        "  d = f32[512,1024] subtract(c, mb)\n"
        "  e = f32[512,1024] exponential(d)\n"
        "  ROOT t = (s32[], f32[512,1024], f32[512,1024]) tuple(j, e, w)\n"
        "}\n"
        "ENTRY e {\n"
        "  x = f32[512,1024] parameter(0)\n"
        "  w = f32[512,1024] parameter(1)\n"
        "  z = s32[] constant(0)\n"
        "  t = (s32[], f32[512,1024], f32[512,1024]) tuple(z, x, w)\n"
        "  r = (s32[], f32[512,1024], f32[512,1024]) while(t), condition=cond, body=body\n"
        "  y = f32[512,1024] get-tuple-element(r), index=1\n"
        "  y2 = f32[512,1024] multiply(y, y)\n"
        "  ROOT out = f32[512,1024] negate(y2)\n"
        "}\n"));
}

static void test_select_masks(void **state) {
    (void)state;
    /* A halo exchange's edge mask: select(broadcast(pred row mask), x, broadcast(0)) fused into
     * the chain that follows, beside a select by a predicate array computed outside the tree
     * (a leaf), one by a broadcast scalar predicate, and NaNs, whose bits a select keeps. */
    assert_true(check_same("select.hlo",
        "HloModule s\n"
        "ENTRY e {\n"
        "  x = f32[1,6,1100,3] parameter(0)\n"
        "  y = f32[1,6,1100,3] parameter(1)\n"
        "  i = s32[6] iota(), iota_dimension=0\n"
        "  two = s32[] constant(2)\n"
        "  tb = s32[6] broadcast(two), dimensions={}\n"
        "  m = pred[6] compare(i, tb), direction=GE\n"
        "  mb = pred[1,6,1100,3] broadcast(m), dimensions={1}\n"
        "  zero = f32[] constant(0)\n"
        "  zb = f32[1,6,1100,3] broadcast(zero), dimensions={}\n"
        "  s1 = f32[1,6,1100,3] select(mb, x, zb)\n"
        "  nan = f32[] constant(nan)\n"
        "  nb = f32[1,6,1100,3] broadcast(nan), dimensions={}\n"
        "  q = pred[1,6,1100,3] compare(x, y), direction=LT\n"
        "  s2 = f32[1,6,1100,3] select(q, nb, s1)\n"
        "  t = pred[] constant(true)\n"
        "  tt = pred[1,6,1100,3] broadcast(t), dimensions={}\n"
        "  e = f32[1,6,1100,3] exponential(y)\n"
        "  s3 = f32[1,6,1100,3] select(tt, e, s2)\n"
        "  a = f32[1,6,1100,3] add(s2, s3)\n"
        "  ROOT r = f32[1,6,1100,3] multiply(a, s1)\n"
        "}\n"));
    /* The halo exchange's form: the masked value is made by a concatenate and dies in the
     * select, which writes over it and leaves whole the blocks it keeps; the second mask keeps
     * everything, the third only part of each row. */
    assert_true(check_same("halo.hlo",
        "HloModule h\n"
        "ENTRY e {\n"
        "  x = f32[1,4,1100,3] parameter(0)\n"
        "  top = f32[1,1,1100,3] parameter(1)\n"
        "  bottom = f32[1,1,1100,3] parameter(2)\n"
        "  c = f32[1,6,1100,3] concatenate(top, x, bottom), dimensions={1}\n"
        "  i = s32[6] iota(), iota_dimension=0\n"
        "  one = s32[] constant(1)\n"
        "  ob = s32[6] broadcast(one), dimensions={}\n"
        "  m = pred[6] compare(i, ob), direction=GE\n"
        "  mb = pred[1,6,1100,3] broadcast(m), dimensions={1}\n"
        "  zero = f32[] constant(0)\n"
        "  zb = f32[1,6,1100,3] broadcast(zero), dimensions={}\n"
        "  s = f32[1,6,1100,3] select(mb, c, zb)\n"
        "  t = pred[] constant(true)\n"
        "  tb = pred[1,6,1100,3] broadcast(t), dimensions={}\n"
        "  d = f32[1,6,1100,3] concatenate(bottom, x, top), dimensions={1}\n"
        "  s2 = f32[1,6,1100,3] select(tb, d, zb)\n"
        "  j = s32[1100] iota(), iota_dimension=0\n"
        "  k = s32[] constant(1000)\n"
        "  kb = s32[1100] broadcast(k), dimensions={}\n"
        "  w = pred[1100] compare(j, kb), direction=LT\n"
        "  wb = pred[1,6,1100,3] broadcast(w), dimensions={2}\n"
        "  y = f32[1,6,1100,3] concatenate(x, top, bottom), dimensions={1}\n"
        "  nz = f32[] constant(-0)\n"
        "  nb = f32[1,6,1100,3] broadcast(nz), dimensions={}\n"
        "  s3 = f32[1,6,1100,3] select(wb, y, nb)\n"
        "  a = f32[1,6,1100,3] add(s, s2)\n"
        "  ROOT r = (f32[1,6,1100,3], f32[1,6,1100,3]) tuple(a, s3)\n"
        "}\n"));
}

static void test_interp_files(void **state) {
    (void)state;
    glob_t g;
    assert_int_equal(glob(GSPMD_SOURCE_DIR "/tests/interp/*.hlo", 0, NULL, &g), 0);
    size_t ran = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "rb");
        assert_non_null(f);
        char *text = calloc(1, 1 << 20);
        assert_non_null(text);
        size_t len = fread(text, 1, (1 << 20) - 1, f);
        fclose(f);
        text[len] = 0;
        if (check_same(g.gl_pathv[i], text)) ran++;
        free(text);
    }
    globfree(&g);
    assert_true(ran >= 40);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcasts),
        cmocka_unit_test(test_long_rows),
        cmocka_unit_test(test_shared_leaf_and_root),
        cmocka_unit_test(test_long_chain),
        cmocka_unit_test(test_scalars_and_loops),
        cmocka_unit_test(test_large_loop),
        cmocka_unit_test(test_select_masks),
        cmocka_unit_test(test_interp_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
