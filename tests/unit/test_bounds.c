/*
 * test_bounds.c — the rounding-error bounds of the reference interpreter
 * (gs_interp_eval_bounded) and the comparison `gspmd run --verify` makes with them
 * (gs_check_leaf, gs_verify_outputs). Expected bounds are computed by hand from the rules in
 * src/interp/bounds.c (u = 2^-24 for f32).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gspmd/numeric.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

static const double U = 0x1p-24;

static const char *SUM = "%sum (a: f32[], b: f32[]) -> f32[] {\n"
                         "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
                         "  ROOT %r = f32[] add(%a, %b)\n}\n\n";

/* A module parsed from text (the reductions' %sum prepended when asked). */
static gs_module *parse(const char *body, bool with_sum, gs_source **src) {
    static char text[8192];
    snprintf(text, sizeof text, "HloModule t\n\n%s%s", with_sum ? SUM : "", body);
    gs_diags d = {0};
    *src = gs_source_from_string("t.hlo", text);
    gs_module *m = gs_parse_module(*src, &d);
    if (!m || gs_module_verify(m, &d) != GS_OK) gs_diags_render(&d, stderr);
    assert_non_null(m);
    gs_diags_free(&d);
    return m;
}

static gs_value *f32_array(int n, const float *x) {
    int64_t dims[1] = {n};
    gs_value *v = gs_value_new_array(GS_F32, 1, dims);
    memcpy(v->data, x, sizeof(float) * (size_t)n);
    return v;
}

/* Evaluates m on args with bounds; returns the bound (result in *res). */
static gs_value *bounded(gs_module *m, gs_value **args, int n, gs_value **res) {
    gs_diags d = {0};
    gs_value *b = NULL;
    gs_status st = gs_interp_eval_bounded(m, NULL, args, n, res, &b, &d);
    if (st != GS_OK) gs_diags_render(&d, stderr);
    assert_int_equal(st, GS_OK);
    gs_diags_free(&d);
    return b;
}

static double el(const gs_value *v, int64_t i) { return gs_elem_get_f(v->data, v->type, i); }

/* Within a part in 10^6 of the expected bound (bounds are stored in f32). */
static void assert_bound(double got, double want) {
    if (fabs(got - want) > 1e-6 * fabs(want) + 1e-30)
        fail_msg("bound %.9g, expected %.9g", got, want);
}

static void test_add_and_moves(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse("ENTRY %e (x: f32[2], y: f32[2]) -> (f32[2], f32[2], f32[2]) {\n"
                         "  %x = f32[2] parameter(0)\n  %y = f32[2] parameter(1)\n"
                         "  %s = f32[2] add(%x, %y)\n"
                         "  %r = f32[2] reverse(%x), dimensions={0}\n"
                         "  %m = f32[2] maximum(%s, %r)\n"
                         "  ROOT %t = (f32[2], f32[2], f32[2]) tuple(%s, %r, %m)\n}\n",
                         false, &src);
    float x[2] = {1, 2}, y[2] = {3, -2};
    gs_value *args[2] = {f32_array(2, x), f32_array(2, y)}, *r;
    gs_value *b = bounded(m, args, 2, &r);
    assert_int_equal(b->type, GS_TUPLE);
    /* x + y = [4, 0]: one rounding of the result each. */
    assert_bound(el(b->tuple[0], 0), 4 * U);
    assert_bound(el(b->tuple[0], 1), 0);
    /* Moved data is exact. */
    assert_bound(el(b->tuple[1], 0), 0);
    assert_bound(el(b->tuple[1], 1), 0);
    /* max(s, reverse(x)) = [max(4,2), max(0,1)]: the larger operand bound, no rounding. */
    assert_bound(el(b->tuple[2], 0), 4 * U);
    assert_bound(el(b->tuple[2], 1), 0);
    gs_value_free(r);
    gs_value_free(b);
    gs_value_free(args[0]);
    gs_value_free(args[1]);
    gs_module_free(m);
    gs_source_free(src);
}

static void test_sum_and_dot(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse("ENTRY %e (x: f32[4], y: f32[4]) -> (f32[], f32[], f32[]) {\n"
                         "  %x = f32[4] parameter(0)\n  %y = f32[4] parameter(1)\n"
                         "  %z = f32[] constant(0)\n"
                         "  %s = f32[] reduce(%x, %z), dimensions={0}, to_apply=%sum\n"
                         "  %d = f32[] dot(%x, %y), lhs_contracting_dims={0}, "
                         "rhs_contracting_dims={0}\n"
                         "  %th = f32[] tanh(%s)\n"
                         "  ROOT %t = (f32[], f32[], f32[]) tuple(%s, %d, %th)\n}\n",
                         true, &src);
    float x[4] = {1, -1, 2, -2}, y[4] = {3, 1, 0.5f, 4};
    gs_value *args[2] = {f32_array(4, x), f32_array(4, y)}, *r;
    gs_value *b = bounded(m, args, 2, &r);
    /* The sum cancels to 0, but its bound is u sqrt(4) (|1|+|-1|+|2|+|-2|) = 12u. */
    assert_true(el(r->tuple[0], 0) == 0);
    assert_bound(el(b->tuple[0], 0), 12 * U);
    /* dot: u sqrt(K) sum |x_k y_k| = u sqrt(4) (3 + 1 + 1 + 8) = 26u. */
    assert_bound(el(b->tuple[1], 0), 26 * U);
    /* tanh(0): |1 - tanh(0)^2| times the operand's bound, plus u |tanh(0)| = 12u. */
    assert_bound(el(b->tuple[2], 0), 12 * U);
    gs_value_free(r);
    gs_value_free(b);
    gs_value_free(args[0]);
    gs_value_free(args[1]);
    gs_module_free(m);
    gs_source_free(src);
}

/* argmax picks an element: its value's bound is the largest bound among the candidates (the
 * maximum of values each off by at most b is off by at most b), not one relative to the
 * picked value, which may be far smaller than the others. */
static void test_argmax_picks(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse("%am (a: f32[], ai: s32[], b: f32[], bi: s32[]) -> (f32[], s32[]) {\n"
                         "  %a = f32[] parameter(0)\n  %ai = s32[] parameter(1)\n"
                         "  %b = f32[] parameter(2)\n  %bi = s32[] parameter(3)\n"
                         "  %gt = pred[] compare(%a, %b), direction=GT\n"
                         "  %v = f32[] select(%gt, %a, %b)\n  %i = s32[] select(%gt, %ai, %bi)\n"
                         "  ROOT %r = (f32[], s32[]) tuple(%v, %i)\n}\n\n"
                         "ENTRY %e (x: f32[4], y: f32[4]) -> (f32[], s32[]) {\n"
                         "  %x = f32[4] parameter(0)\n  %y = f32[4] parameter(1)\n"
                         "  %p = f32[4] multiply(%x, %y)\n"
                         "  %i = s32[4] iota(), iota_dimension=0\n"
                         "  %ninf = f32[] constant(-inf)\n  %zero = s32[] constant(0)\n"
                         "  ROOT %r = (f32[], s32[]) reduce(%p, %i, %ninf, %zero), dimensions={0}, "
                         "to_apply=%am\n}\n",
                         false, &src);
    float x[4] = {1, -1, 2, -2}, y[4] = {3, 1, 0.5f, 4};
    gs_value *args[2] = {f32_array(4, x), f32_array(4, y)}, *r;
    gs_value *b = bounded(m, args, 2, &r);
    /* p = [3, -1, 1, -8], each rounded once: bounds [3u, u, u, 8u]; the maximum 3 is picked,
     * and its bound is 8u (the normwise rule gave 3u, too tight when the picked value is the
     * small one). The index is exact. */
    assert_true(el(r->tuple[0], 0) == 3);
    assert_bound(el(b->tuple[0], 0), 8 * U);
    assert_bound(el(b->tuple[1], 0), 0);
    gs_value_free(r);
    gs_value_free(b);
    gs_value_free(args[0]);
    gs_value_free(args[1]);
    gs_module_free(m);
    gs_source_free(src);
}

/* A while loop carries the bound of its state: three times s = s * 0.5 + x. */
static void test_while_carries_bounds(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse(
        "%cond (p: (s32[], f32[2])) -> pred[] {\n  %p = (s32[], f32[2]) parameter(0)\n"
        "  %i = s32[] get-tuple-element(%p), index=0\n  %n = s32[] constant(3)\n"
        "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n}\n\n"
        "%body (p: (s32[], f32[2])) -> (s32[], f32[2]) {\n  %p = (s32[], f32[2]) parameter(0)\n"
        "  %i = s32[] get-tuple-element(%p), index=0\n  %one = s32[] constant(1)\n"
        "  %j = s32[] add(%i, %one)\n  %s = f32[2] get-tuple-element(%p), index=1\n"
        "  %h = f32[] constant(0.5)\n  %hb = f32[2] broadcast(%h), dimensions={}\n"
        "  %m = f32[2] multiply(%s, %hb)\n  %x = f32[2] constant({1, -1})\n"
        "  %a = f32[2] add(%m, %x)\n  ROOT %t = (s32[], f32[2]) tuple(%j, %a)\n}\n\n"
        "ENTRY %e (x: f32[2]) -> f32[2] {\n  %x = f32[2] parameter(0)\n"
        "  %z = s32[] constant(0)\n  %t = (s32[], f32[2]) tuple(%z, %x)\n"
        "  %w = (s32[], f32[2]) while(%t), condition=%cond, body=%body\n"
        "  ROOT %r = f32[2] get-tuple-element(%w), index=1\n}\n",
        false, &src);
    float x[2] = {4, 4};
    gs_value *args[1] = {f32_array(2, x)}, *r;
    gs_value *b = bounded(m, args, 1, &r);
    /* s: 4 -> 3 -> 2.5 -> 2.25 (element 0). Each step: bound = 0.5 b + u|0.5 s| + u|s'|:
     * b1 = u(2 + 3) = 5u, b2 = 2.5u + u(1.5 + 2.5) = 6.5u, b3 = 3.25u + u(1.25 + 2.25) = 6.75u. */
    assert_true(el(r, 0) == 2.25);
    assert_bound(el(b, 0), 6.75 * U);
    gs_value_free(r);
    gs_value_free(b);
    gs_value_free(args[0]);
    gs_module_free(m);
    gs_source_free(src);
}

static void test_check_leaf(void **state) {
    (void)state;
    float w[4] = {1, 0, NAN, 5}, bnd[4] = {0, 1e-7f, 0, 1e-6f};
    gs_value *want = f32_array(4, w), *bound = f32_array(4, bnd);
    gs_leaf_check c;
    /* Equal values (NaN meets NaN): error 0. */
    assert_true(gs_check_leaf(want, want, bound, &c));
    assert_true(c.error == 0 && c.worst == -1);
    /* Within 16 bounds: ok; the worst element is named. */
    float g1[4] = {1, 1.5e-6f, NAN, 5};
    gs_value *got = f32_array(4, g1);
    assert_true(gs_check_leaf(got, want, bound, &c));
    assert_int_equal(c.worst, 1);
    assert_true(fabs(c.error - 15) < 1e-3);
    gs_value_free(got);
    /* Beyond 16 bounds: a mismatch. */
    float g2[4] = {1, 0, NAN, 5.00002f};
    got = f32_array(4, g2);
    assert_false(gs_check_leaf(got, want, bound, &c));
    assert_int_equal(c.worst, 3);
    gs_value_free(got);
    /* Exactly known data (bound 0) must arrive exactly. */
    float g3[4] = {1.0000001f, 0, NAN, 5};
    got = f32_array(4, g3);
    assert_false(gs_check_leaf(got, want, bound, &c));
    assert_true(isinf(c.error));
    assert_int_equal(c.worst, 0);
    gs_value_free(got);
    /* NaN against a number. */
    float g4[4] = {1, 0, 3, 5};
    got = f32_array(4, g4);
    assert_false(gs_check_leaf(got, want, bound, &c));
    assert_int_equal(c.worst, 2);
    gs_value_free(got);
    /* Another shape. */
    got = f32_array(3, g4);
    assert_false(gs_check_leaf(got, want, bound, &c));
    assert_false(c.shape_ok);
    gs_value_free(got);
    gs_value_free(want);
    gs_value_free(bound);
}

/* Issue 15's module A with the inputs of seed 5161: the square of a sum that cancels to 1.57e-3.
 * The exact value passes, as does the partitioned program's; zero, or 10% off, does not (the
 * bound of the square is 2.4e-9: 16 of them allow 3.8e-8, 1.5% of it). */
static void test_cancelling_square(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse("ENTRY %e (v0: f32[4,2]) -> f32[] {\n  %v0 = f32[4,2] parameter(0)\n"
                         "  %z = f32[] constant(0)\n"
                         "  %s = f32[] reduce(%v0, %z), dimensions={0,1}, to_apply=%sum\n"
                         "  ROOT %sq = f32[] multiply(%s, %s)\n}\n",
                         true, &src);
    gs_diags d = {0};
    gs_value **args = NULL;
    int n_args = 0;
    assert_int_equal(gs_interp_make_args(m, NULL, 5161, &args, &n_args, &d), GS_OK);
    const float tries[4] = {2.454154e-06f, 2.454014e-06f, 0.0f, 2.454154e-06f * 1.1f};
    const bool ok[4] = {true, true, false, false};
    for (int t = 0; t < 4; t++) {
        gs_value *got = gs_value_new_array(GS_F32, 0, NULL);
        ((float *)got->data)[0] = tries[t];
        gs_leaf_check *c = NULL;
        int n = 0;
        bool all_ok;
        assert_int_equal(gs_verify_outputs(m, args, n_args, 0, 1, got, &c, &n, &all_ok, &d), GS_OK);
        assert_int_equal(n, 1);
        if (all_ok != ok[t])
            fail_msg("%.9g: error %g bounds (bound %g), expected %s", tries[t], c[0].error,
                     c[0].bound, ok[t] ? "ok" : "a mismatch");
        free(c);
        gs_value_free(got);
    }
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

/* Manual values: per-group inputs, reassembly into a bundle, device-by-device comparison. */
static void test_manual_values(void **state) {
    (void)state;
    gs_source *src;
    gs_module *m = parse("ENTRY %e (p: f32[4]) -> f32[4] {\n"
                         "  ROOT %p = f32[4] parameter(0), "
                         "sharding={devices=[2,2]<=[4] last_tile_dims={manual}}\n}\n",
                         false, &src);
    gs_diags d = {0};
    gs_value **args;
    int n_args;
    assert_int_equal(gs_interp_make_sharded_args(m, NULL, 3, 4, &args, &n_args, &d), GS_OK);
    gs_value *p = args[0];
    assert_int_equal(p->devices, 4); /* groups {0,2} and {1,3}: device = 2 * row tile + group */
    assert_ptr_equal(p->tuple[0], p->tuple[2]);
    assert_ptr_equal(p->tuple[1], p->tuple[3]);
    assert_ptr_not_equal(p->tuple[0], p->tuple[1]);
    gs_arena a;
    gs_arena_init(&a);
    gs_sharding *s;
    const char *txt = "{devices=[2,2]<=[4] last_tile_dims={manual}}";
    assert_int_equal(gs_sharding_parse(&a, txt, strlen(txt), &s, &d, gs_span_none()), GS_OK);
    gs_value *parts[4];
    for (int k = 0; k < 4; k++) { /* device k: rows 2*(k/2).. of its group's value */
        assert_int_equal(gs_value_shard(p, s, k, &parts[k], &d), GS_OK);
        assert_int_equal(parts[k]->dims[0], 2);
        assert_float_equal(el(parts[k], 1), el(p->tuple[k], 2 * (k / 2) + 1), 0);
    }
    gs_value *g;
    assert_int_equal(gs_value_unshard(parts, 4, s, m->entry->root->shape, &g, &d), GS_OK);
    assert_int_equal(g->devices, 4);
    gs_leaf_check c;
    assert_true(gs_check_leaf(g, p, NULL, &c));
    /* Device 3's tile of group 1 changed: device 1 and 3 (its group) see the change. */
    gs_elem_set_f(parts[3]->data, GS_F32, 0, 42);
    gs_value *g2;
    assert_int_equal(gs_value_unshard(parts, 4, s, m->entry->root->shape, &g2, &d), GS_OK);
    assert_false(gs_check_leaf(g2, p, NULL, &c));
    assert_int_equal(c.device, 1);
    assert_int_equal(c.worst, 2);
    for (int k = 0; k < 4; k++) gs_value_free(parts[k]);
    gs_value_free(g);
    gs_value_free(g2);
    gs_value_free(p);
    free(args);
    gs_arena_free(&a);
    gs_diags_free(&d);
    gs_module_free(m);
    gs_source_free(src);
}

/* ------------------------------------------------------------------ transcendental bounds */

/* A small deterministic generator (the seed is printed with a failure). */
static uint64_t rng_state;
static double uniform(double lo, double hi) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(rng_state >> 11) * 0x1p-53;
}

/* op at xs (k of them) as the interpreter computes it in type t (f32 or f64), on a module of one
 * instruction. */
static gs_value *apply(const char *op, const char *t, int k, const double *xs) {
    char body[512];
    snprintf(body, sizeof body,
             "ENTRY %%e (x: %s[%d]) -> %s[%d] {\n  %%x = %s[%d] parameter(0)\n"
             "  ROOT %%y = %s[%d] %s(%%x)\n}\n",
             t, k, t, k, t, k, t, k, op);
    gs_source *src;
    gs_module *m = parse(body, false, &src);
    int64_t dims[1] = {k};
    gs_type ty = strcmp(t, "f64") == 0 ? GS_F64 : GS_F32;
    gs_value *arg = gs_value_new_array(ty, 1, dims), *y = NULL;
    for (int i = 0; i < k; i++) gs_elem_set_f(arg->data, ty, i, xs[i]);
    gs_diags d = {0};
    assert_int_equal(gs_interp_eval(m, NULL, &arg, 1, &y, &d), GS_OK);
    gs_diags_free(&d);
    gs_value_free(arg);
    gs_module_free(m);
    gs_source_free(src);
    return y;
}

/* The largest |v[j] - y| over j < k (infinite for a NaN), its index in *at. */
static double farthest(const gs_value *v, int k, double y, int *at) {
    double worst = 0;
    for (int j = 0; j < k; j++) {
        double e = fabs(el(v, j) - y);
        if (isnan(e)) e = INFINITY;
        if (e > worst) worst = e, *at = j;
    }
    return worst;
}

/* The bound of op(s), s a sum of (a + L) and -L whose rounding bound grows with L, checked
 * against a brute-force evaluation of the interval: op computed at every f32 value in
 * [s - b_s, s + b_s] (the sums a partitioned program may get) (all of them when few, else 4,097 spread over it with both ends) must stay
 * within op(s)'s bound of the reference's op(s); and a finite bound is not vacuous: at most
 * twice the largest difference found there or at 4,097 real points of the interval (op in f64)
 * plus 8 roundings of the result (the rounding and the 2 ulps the computed f may stray by). Inputs: ordinary, large
 * bounds (L up to 1e7), saturated (tanh, logistic, erf far from 0) and subnormal (exp, logistic
 * near -88..-103) ranges. */
static void check_op_bounds(const char *op, double a_lo, double a_hi) {
    enum { N = 48, K = 4097 };
    float x[2 * N];
    const double scales[4] = {0, 1, 1e3, 1e7};
    for (int i = 0; i < N; i++) {
        double a = uniform(a_lo, a_hi), L = scales[i % 4] * uniform(0.5, 1);
        x[2 * i] = (float)(a + L);
        x[2 * i + 1] = (float)-L;
    }
    char body[1024];
    snprintf(body, sizeof body,
             "ENTRY %%e (x: f32[%d,2]) -> (f32[%d], f32[%d]) {\n"
             "  %%x = f32[%d,2] parameter(0)\n  %%z = f32[] constant(0)\n"
             "  %%s = f32[%d] reduce(%%x, %%z), dimensions={1}, to_apply=%%sum\n"
             "  %%y = f32[%d] %s(%%s)\n"
             "  ROOT %%t = (f32[%d], f32[%d]) tuple(%%s, %%y)\n}\n",
             N, N, N, N, N, N, op, N, N);
    gs_source *src;
    gs_module *m = parse(body, true, &src);
    int64_t dims[2] = {N, 2};
    gs_value *arg = gs_value_new_array(GS_F32, 2, dims), *res = NULL;
    memcpy(arg->data, x, sizeof x);
    gs_value *b = bounded(m, &arg, 1, &res);
    const gs_value *s = res->tuple[0], *y = res->tuple[1], *bs = b->tuple[0], *by = b->tuple[1];
    double *pts = malloc(sizeof(double) * K), *real = malloc(sizeof(double) * K);
    for (int i = 0; i < N; i++) {
        double si = el(s, i), bsi = el(bs, i), yi = el(y, i), byi = el(by, i);
        float lo = (float)(si - bsi), hi = (float)(si + bsi);
        if (lo < si - bsi) lo = nextafterf(lo, INFINITY); /* the f32 values inside */
        if (hi > si + bsi) hi = nextafterf(hi, -INFINITY);
        int k = 0;
        for (float f = lo; f <= hi && k < K; f = nextafterf(f, INFINITY)) pts[k++] = f;
        if (k == K) /* too many floats: spread K over the interval */
            for (k = 0; k < K; k++) pts[k] = (float)(lo + (hi - lo) * k / (K - 1.0));
        for (int j = 0; j < K; j++) real[j] = si - bsi + 2 * bsi * j / (K - 1.0);
        gs_value *v = apply(op, "f32", k, pts), *w = apply(op, "f64", K, real);
        int at = -1, at_real = -1;
        double worst = farthest(v, k, yi, &at), worst_real = farthest(w, K, yi, &at_real);
        gs_value_free(v);
        gs_value_free(w);
        if (!(worst <= byi))
            fail_msg("%s (seed %llu, element %d): s = %.9g, bound %.3g; %s(%.9g) = %.9g is "
                     "%.9g from the reference's %.9g, beyond its bound %.9g",
                     op, (unsigned long long)rng_state, i, si, bsi, op, at >= 0 ? pts[at] : 0.0,
                     at >= 0 ? yi + worst : 0.0, worst, yi, byi);
        if (isfinite(byi) && byi > 2 * fmax(worst, worst_real) + 8 * U * fabs(yi) + 1e-44)
            fail_msg("%s (element %d): s = %.9g, bound %.3g; the bound of %s(s), %.3g, is vacuous "
                     "(the interval moves it by %.3g at most in f32, %.3g in reals)",
                     op, i, si, bsi, op, byi, worst, worst_real);
    }
    free(real);
    free(pts);
    gs_value_free(arg);
    gs_value_free(res);
    gs_value_free(b);
    gs_module_free(m);
    gs_source_free(src);
}

static void test_transcendental_bounds(void **state) {
    (void)state;
    static const struct {
        const char *op;
        double lo, hi;
    } cases[] = {
        {"exponential", -5, 5},
        {"exponential", -103, -87},
        {"exponential", 80, 88},
        {"exponential-minus-one", -3, 3},
        {"log", 0.01, 100},
        {"log", 1e6, 1e8},
        {"log-plus-one", -0.5, 10},
        {"tanh", -3, 3},
        {"tanh", 5, 20},
        {"tanh", -20, -5},
        {"logistic", -5, 5},
        {"logistic", 15, 100},
        {"logistic", -103, -85},
        {"sqrt", 0.01, 1e4},
        {"rsqrt", 0.01, 1e4},
        {"cbrt", -1e3, 1e3},
        {"sine", -10, 10},
        {"cosine", -10, 10},
        {"tan", -1.5, 1.5},
        {"erf", -2, 2},
        {"erf", 3, 10},
    };
    for (uint64_t seed = 20261203; seed < 20261203 + 8; seed++) {
        rng_state = seed;
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            check_op_bounds(cases[c].op, cases[c].lo, cases[c].hi);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_and_moves), cmocka_unit_test(test_sum_and_dot),
        cmocka_unit_test(test_argmax_picks),  cmocka_unit_test(test_while_carries_bounds),
        cmocka_unit_test(test_check_leaf),    cmocka_unit_test(test_cancelling_square),
        cmocka_unit_test(test_manual_values), cmocka_unit_test(test_transcendental_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
