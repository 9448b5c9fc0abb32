/*
 * src/mlir/chlo.c — `chlo.*` ops (the "client HLO" ops JAX emits) read and decomposed on the spot
 * into plain HLO instructions the rest of gspmd knows, the way StableHLO's chlo legalization
 * defines them: elementwise special functions become polynomial, rational or identity-based
 * expressions over add/multiply/log/atan2/...; f16 and bf16 operands of the special functions are
 * computed in f32 and converted back (as the legalization upcasts them); chlo.top_k becomes a
 * topk instruction; chlo.broadcast_* binary ops become broadcasts plus the plain binary op.
 *
 * Both spellings are read: pretty (`chlo.lgamma %0 : T -> T`, `chlo.top_k(%0, k = 2) : T ->
 * (T, T)`) and generic (`"chlo.top_k"(%0) <{k = 2 : i64}> : (T) -> (T, T)`). Operand and result
 * types are checked against the op before anything is built, so bad input gives a located error.
 */
#include "mlir/internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

enum { MAX_CHLO_OPS = 8 };

/* One decomposition in progress: elementwise values over one array shape. */
typedef struct ex {
    gs_builder *b;       /* the reader's builder (span set to the chlo op) */
    gs_type t;           /* element type computed in (the real part's type for complex ops) */
    int rank;            /* rank of every value */
    const int64_t *dims; /* dims of every value */
} ex;

typedef gs_instr *(*unary_fn)(ex *e, gs_instr *x);
typedef gs_instr *(*binary_fn)(ex *e, gs_instr *x, gs_instr *y);

/* ------------------------------------------------------------------ expression helpers */

/* Constant v of type t, broadcast to e's shape. */
static gs_instr *kt(ex *e, gs_type t, double v) {
    gs_instr *s = gs_build_scalar(e->b, t, v);
    if (e->rank == 0) return s;
    return gs_build_broadcast(e->b, s, e->rank, e->dims, 0, NULL);
}

static gs_instr *k(ex *e, double v) { return kt(e, e->t, v); }

/* Integer constant v of type t (wrapped to it), broadcast to e's shape. */
static gs_instr *ki(ex *e, gs_type t, int64_t v) {
    gs_instr *s = gs_build_scalar_i(e->b, t, v);
    if (e->rank == 0) return s;
    return gs_build_broadcast(e->b, s, e->rank, e->dims, 0, NULL);
}

static gs_instr *un(ex *e, gs_opcode op, gs_instr *x) { return gs_build_unary(e->b, op, x); }

/* Unary op(x) whose result has x's dims and element type t. */
static gs_instr *un_to(ex *e, gs_opcode op, gs_instr *x, gs_type t) {
    if (!x) return NULL;
    gs_shape s = *x->shape;
    s.type = t;
    s.has_layout = false;
    return gs_build(e->b, op, &s, 1, &x);
}

static gs_instr *is_fin(ex *e, gs_instr *x) { return un_to(e, GS_OP_IS_FINITE, x, GS_PRED); }

static gs_instr *add(ex *e, gs_instr *x, gs_instr *y) {
    return gs_build_binary(e->b, GS_OP_ADD, x, y);
}
static gs_instr *sub(ex *e, gs_instr *x, gs_instr *y) {
    return gs_build_binary(e->b, GS_OP_SUBTRACT, x, y);
}
static gs_instr *mul(ex *e, gs_instr *x, gs_instr *y) {
    return gs_build_binary(e->b, GS_OP_MULTIPLY, x, y);
}
static gs_instr *dvd(ex *e, gs_instr *x, gs_instr *y) {
    return gs_build_binary(e->b, GS_OP_DIVIDE, x, y);
}
static gs_instr *bin(ex *e, gs_opcode op, gs_instr *x, gs_instr *y) {
    return gs_build_binary(e->b, op, x, y);
}
static gs_instr *cmp(ex *e, gs_instr *x, gs_instr *y, const char *dir) {
    return gs_build_compare(e->b, x, y, dir);
}
static gs_instr *sel(ex *e, gs_instr *p, gs_instr *t, gs_instr *f) {
    return gs_build_select(e->b, p, t, f);
}

/* The largest finite value of float type t. */
static double max_finite(gs_type t) {
    switch (t) {
    case GS_F16: return 65504.0;
    case GS_BF16: return 3.3895313892515355e38;
    case GS_F32: return FLT_MAX;
    default: return DBL_MAX;
    }
}

/* The smallest positive normal value of float type t. */
static double min_normal(gs_type t) {
    switch (t) {
    case GS_F16: return 0x1p-14;
    case GS_BF16:
    case GS_F32: return FLT_MIN;
    default: return DBL_MIN;
    }
}

/* real(z) or imag(z) (op) of a complex value, of e's real type. */
static gs_instr *part(ex *e, gs_opcode op, gs_instr *z) { return un_to(e, op, z, e->t); }

/* complex(re, im). */
static gs_instr *cplx(ex *e, gs_instr *re, gs_instr *im) {
    if (!re || !im) return NULL;
    gs_shape s = *re->shape;
    s.type = e->t == GS_F32 ? GS_C64 : GS_C128;
    s.has_layout = false;
    gs_instr *ops[2] = {re, im};
    return gs_build(e->b, GS_OP_COMPLEX, &s, 2, ops);
}

/* c[0] x^(n-1) + ... + c[n-1] by Horner's rule. */
static gs_instr *poly(ex *e, gs_instr *x, const double *c, int n) {
    gs_instr *p = k(e, c[0]);
    for (int i = 1; i < n; i++) p = add(e, mul(e, p, x), k(e, c[i]));
    return p;
}

/* The Chebyshev series of c (Clenshaw's recurrence, Cephes chbevl) at x. */
static gs_instr *chebyshev(ex *e, gs_instr *x, const double *c, int n) {
    gs_instr *b0 = k(e, 0), *b1 = b0, *b2 = b0;
    for (int i = 0; i < n; i++) {
        b2 = b1;
        b1 = b0;
        b0 = add(e, sub(e, mul(e, x, b1), b2), k(e, c[i]));
    }
    return mul(e, sub(e, b0, b2), k(e, 0.5));
}

/* f(x), or g(x, y) when y is given, computed in f32 when the operands are f16 or bf16 (then
 * converted back). */
static gs_instr *upcast(ex *e, gs_instr *x, gs_instr *y, unary_fn f, binary_fn g) {
    gs_type t = e->t;
    bool up = t == GS_F16 || t == GS_BF16;
    if (up) {
        e->t = GS_F32;
        x = gs_build_convert(e->b, x, GS_F32);
        y = y ? gs_build_convert(e->b, y, GS_F32) : NULL;
    }
    gs_instr *v = g ? g(e, x, y) : f(e, x);
    e->t = t;
    return up ? gs_build_convert(e->b, v, t) : v;
}

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------------ inverse trigonometric */

/* asin(x) = 2 atan2(x, 1 + sqrt((1 - x)(1 + x))). */
static gs_instr *asin_real(ex *e, gs_instr *x) {
    gs_instr *one = k(e, 1);
    gs_instr *t = bin(e, GS_OP_ATAN2, x,
                      add(e, one, un(e, GS_OP_SQRT, mul(e, sub(e, one, x), add(e, one, x)))));
    return add(e, t, t);
}

/* acos(x) = atan2(sqrt((1 - x)(1 + x)), x). */
static gs_instr *acos_real(ex *e, gs_instr *x) {
    gs_instr *one = k(e, 1);
    return bin(e, GS_OP_ATAN2, un(e, GS_OP_SQRT, mul(e, sub(e, one, x), add(e, one, x))), x);
}

/* acosh(x) = log1p(sqrt(x - 1) (sqrt(x + 1) + sqrt(x - 1))), log(2) + log(x) for x >= max/2. */
static gs_instr *acosh_real(ex *e, gs_instr *x) {
    gs_instr *one = k(e, 1), *two = k(e, 2);
    gs_instr *big = cmp(e, x, dvd(e, k(e, max_finite(e->t)), two), "GE");
    gs_instr *sm1 = un(e, GS_OP_SQRT, sub(e, x, one));
    gs_instr *small =
        un(e, GS_OP_LOG1P, mul(e, sm1, add(e, un(e, GS_OP_SQRT, add(e, x, one)), sm1)));
    return sel(e, big, add(e, un(e, GS_OP_LOG, two), un(e, GS_OP_LOG, x)), small);
}

/* asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), sign(x) (log 2 + log|x|) for
 * |x| >= sqrt(max). */
static gs_instr *asinh_real(ex *e, gs_instr *x) {
    gs_instr *ax = un(e, GS_OP_ABS, x), *one = k(e, 1);
    gs_instr *big = cmp(e, ax, un(e, GS_OP_SQRT, k(e, max_finite(e->t))), "GE");
    gs_instr *ax2 = mul(e, ax, ax);
    gs_instr *small = un(e, GS_OP_LOG1P,
                         add(e, ax, dvd(e, ax2, add(e, one, un(e, GS_OP_SQRT, add(e, one, ax2))))));
    gs_instr *large = add(e, un(e, GS_OP_LOG, k(e, 2)), un(e, GS_OP_LOG, ax));
    return mul(e, un(e, GS_OP_SIGN, x), sel(e, big, large, small));
}

/* atan(x) = atan2(x, 1). */
static gs_instr *atan_real(ex *e, gs_instr *x) { return bin(e, GS_OP_ATAN2, x, k(e, 1)); }

/* atanh(x) = (log1p(x) - log1p(-x)) / 2, NaN for |x| > 1. */
static gs_instr *atanh_real(ex *e, gs_instr *x) {
    gs_instr *v = mul(e, sub(e, un(e, GS_OP_LOG1P, x), un(e, GS_OP_LOG1P, un(e, GS_OP_NEGATE, x))),
                      k(e, 0.5));
    return sel(e, cmp(e, un(e, GS_OP_ABS, x), k(e, 1), "GT"), k(e, NAN), v);
}

/* hypot-like helper of the asin/acos kernel: sqrt(a^2 + b^2) for a = |u|, b = y >= 0, written
 * to avoid overflow (mx * sqrt(1 + (mn/mx)^2), with its exact and tiny-ratio cases). */
static gs_instr *kernel_hypot(ex *e, gs_instr *au, gs_instr *y) {
    gs_instr *one = k(e, 1), *zero = k(e, 0);
    gs_instr *mx = bin(e, GS_OP_MAXIMUM, au, y), *mn = bin(e, GS_OP_MINIMUM, au, y);
    gs_instr *ratio = dvd(e, mn, mx), *r2 = mul(e, ratio, ratio);
    gs_instr *sqa = un(e, GS_OP_SQRT, add(e, one, r2));
    gs_instr *tiny = bin(e, GS_OP_AND, cmp(e, sqa, one, "EQ"), cmp(e, r2, zero, "GT"));
    gs_instr *v = sel(e, tiny, add(e, mx, dvd(e, mul(e, mx, r2), k(e, 2))), mul(e, mx, sqa));
    return sel(e, cmp(e, mx, mn, "EQ"), mul(e, k(e, 1.4142135623730951), mx), v);
}

/* The asin/acos kernel on complex z = x + iy (modified Hull et al.): w with
 * w.real = sqrt(a^2 - x^2) and w.imag = log(a + sqrt(a^2 - 1)), a = (|z + 1| + |z - 1|) / 2,
 * for |x|, |y|; asin, acos and acosh are built from it. */
static gs_instr *asin_acos_kernel(ex *e, gs_instr *z) {
    gs_instr *x = un(e, GS_OP_ABS, part(e, GS_OP_REAL, z));
    gs_instr *y = un(e, GS_OP_ABS, part(e, GS_OP_IMAG, z));
    gs_instr *one = k(e, 1), *half = k(e, 0.5), *zero = k(e, 0), *two = k(e, 2);
    gs_instr *safe_max = dvd(e, un(e, GS_OP_SQRT, k(e, max_finite(e->t))), k(e, 8));
    gs_instr *xp1 = add(e, x, one), *xm1 = sub(e, x, one);
    gs_instr *r = kernel_hypot(e, un(e, GS_OP_ABS, xp1), y);
    gs_instr *s = kernel_hypot(e, un(e, GS_OP_ABS, xm1), y);
    gs_instr *a = mul(e, half, add(e, r, s));
    gs_instr *half_apx = mul(e, half, add(e, a, x));
    gs_instr *yy = mul(e, y, y);
    gs_instr *rpxp1 = add(e, r, xp1), *smxm1 = sub(e, s, xm1), *spxm1 = add(e, s, xm1);
    gs_instr *re_le1 = un(e, GS_OP_SQRT, mul(e, half_apx, add(e, dvd(e, yy, rpxp1), smxm1)));
    gs_instr *re_gt1 =
        mul(e, y, un(e, GS_OP_SQRT, add(e, dvd(e, half_apx, rpxp1), dvd(e, half_apx, spxm1))));
    gs_instr *re = sel(e, cmp(e, bin(e, GS_OP_MAXIMUM, x, y), safe_max, "GE"), y,
                       sel(e, cmp(e, x, one, "LE"), re_le1, re_gt1));

    gs_instr *safe_max_opt = sel(e, cmp(e, x, mul(e, safe_max, k(e, 1e12)), "LT"),
                                 mul(e, safe_max, k(e, 1e-6)), mul(e, safe_max, k(e, 100.0)));
    gs_instr *y_big = cmp(e, y, safe_max_opt, "GE");
    gs_instr *mx1 = sel(e, y_big, y, x);
    gs_instr *lim = sel(e, y_big, safe_max_opt, safe_max);
    gs_instr *xoy =
        sel(e, bin(e, GS_OP_AND, y_big, un(e, GS_OP_NOT, cmp(e, y, k(e, INFINITY), "EQ"))),
            dvd(e, x, y), zero);
    gs_instr *im_big = add(e, add(e, un(e, GS_OP_LOG, two), un(e, GS_OP_LOG, mx1)),
                           mul(e, half, un(e, GS_OP_LOG1P, mul(e, xoy, xoy))));
    gs_instr *tiny = bin(
        e, GS_OP_AND, cmp(e, y, mul(e, un(e, GS_OP_SQRT, k(e, min_normal(e->t))), k(e, 4)), "LT"),
        cmp(e, x, one, "LT"));
    gs_instr *ap1 = add(e, a, one);
    gs_instr *half_yy = mul(e, half, yy);
    gs_instr *d = dvd(e, half_yy, rpxp1);
    gs_instr *am1 = sel(
        e, tiny, un(e, GS_OP_NEGATE, dvd(e, mul(e, xp1, xm1), ap1)),
        sel(e, cmp(e, x, one, "GE"), add(e, d, mul(e, half, spxm1)),
            sel(e, cmp(e, a, k(e, 1.5), "LE"), add(e, d, dvd(e, half_yy, smxm1)), sub(e, a, one))));
    gs_instr *sq = un(e, GS_OP_SQRT, mul(e, am1, ap1));
    gs_instr *im = sel(e, cmp(e, mx1, lim, "GE"), im_big,
                       sel(e, tiny, dvd(e, y, sq), un(e, GS_OP_LOG1P, add(e, am1, sq))));
    return cplx(e, re, im);
}

/* asin(z) = complex(atan2(z.real, w.real), ±w.imag) with the sign of z.imag. */
static gs_instr *asin_complex(ex *e, gs_instr *z) {
    gs_instr *w = asin_acos_kernel(e, z), *wi = part(e, GS_OP_IMAG, w);
    gs_instr *zi = part(e, GS_OP_IMAG, z);
    return cplx(e, bin(e, GS_OP_ATAN2, part(e, GS_OP_REAL, z), part(e, GS_OP_REAL, w)),
                sel(e, cmp(e, zi, k(e, 0), "LT"), un(e, GS_OP_NEGATE, wi), wi));
}

/* acos(z) = complex(atan2(w.real, z.real), ∓w.imag) with the sign of z.imag. */
static gs_instr *acos_complex(ex *e, gs_instr *z) {
    gs_instr *w = asin_acos_kernel(e, z), *wi = part(e, GS_OP_IMAG, w);
    gs_instr *zi = part(e, GS_OP_IMAG, z);
    return cplx(e, bin(e, GS_OP_ATAN2, part(e, GS_OP_REAL, w), part(e, GS_OP_REAL, z)),
                sel(e, cmp(e, zi, k(e, 0), "LT"), wi, un(e, GS_OP_NEGATE, wi)));
}

/* acosh(z) = complex(w.imag, ±atan2(w.real, z.real)) with the sign of z.imag. */
static gs_instr *acosh_complex(ex *e, gs_instr *z) {
    gs_instr *w = asin_acos_kernel(e, z);
    gs_instr *t = bin(e, GS_OP_ATAN2, part(e, GS_OP_REAL, w), part(e, GS_OP_REAL, z));
    gs_instr *zi = part(e, GS_OP_IMAG, z);
    return cplx(e, part(e, GS_OP_IMAG, w),
                sel(e, cmp(e, zi, k(e, 0), "LT"), un(e, GS_OP_NEGATE, t), t));
}

/* asinh(z) = -i asin(iz): complex(±w.imag, atan2(z.imag, w.real)), w the kernel of
 * complex(-z.imag, z.real), the sign that of z.real. */
static gs_instr *asinh_complex(ex *e, gs_instr *z) {
    gs_instr *zr = part(e, GS_OP_REAL, z), *zi = part(e, GS_OP_IMAG, z);
    gs_instr *w = asin_acos_kernel(e, cplx(e, un(e, GS_OP_NEGATE, zi), zr));
    gs_instr *wi = part(e, GS_OP_IMAG, w);
    return cplx(e, sel(e, cmp(e, zr, k(e, 0), "LT"), un(e, GS_OP_NEGATE, wi), wi),
                bin(e, GS_OP_ATAN2, zi, part(e, GS_OP_REAL, w)));
}

/* atanh(z) = (log1p(z) - log1p(-z)) / 2, computed per part so that neither cancels nor
 * overflows: real = sign(x) log1p(4|x| / ((1 - |x|)^2 + y^2)) / 4 (or its large-|z| forms),
 * imag = atan2(2y, (1 - |x|)(1 + |x|) - y^2) / 2 (or ±pi/2 for large |z|). */
static gs_instr *atanh_complex(ex *e, gs_instr *z) {
    gs_instr *x = part(e, GS_OP_REAL, z), *y = part(e, GS_OP_IMAG, z);
    gs_instr *zero = k(e, 0), *one = k(e, 1), *mone = k(e, -1);
    double inv_negeps = e->t == GS_F64 ? 9007199254740994.0 : 16777218.0;
    gs_instr *ax = un(e, GS_OP_ABS, x), *ay = un(e, GS_OP_ABS, y);
    gs_instr *safe_max = k(e, inv_negeps * inv_negeps), *ine = k(e, inv_negeps);
    gs_instr *safe = bin(e, GS_OP_AND, cmp(e, ax, safe_max, "LT"), cmp(e, ay, safe_max, "LT"));
    gs_instr *naxm1 = sub(e, one, ax), *y2 = mul(e, y, y);
    gs_instr *inf = k(e, INFINITY), *ninf = k(e, -INFINITY);
    gs_instr *any_inf =
        bin(e, GS_OP_OR, bin(e, GS_OP_OR, cmp(e, x, inf, "EQ"), cmp(e, x, ninf, "EQ")),
            bin(e, GS_OP_OR, cmp(e, y, inf, "EQ"), cmp(e, y, ninf, "EQ")));
    gs_instr *big =
        sel(e, cmp(e, mul(e, ay, ine), ax, "LT"), dvd(e, one, ax),
            sel(e, any_inf, zero, dvd(e, dvd(e, one, add(e, dvd(e, ax, y), dvd(e, y, ax))), y)));
    gs_instr *q = sel(e, safe, dvd(e, ax, add(e, mul(e, naxm1, naxm1), y2)), big);
    gs_instr *re = mul(
        e, mul(e, sel(e, cmp(e, x, zero, "GE"), one, mone), un(e, GS_OP_LOG1P, mul(e, k(e, 4), q))),
        k(e, 0.25));
    gs_instr *im_safe =
        bin(e, GS_OP_ATAN2, add(e, y, y), sub(e, mul(e, naxm1, add(e, one, ax)), y2));
    gs_instr *im_big = mul(e, sel(e, cmp(e, y, zero, "GE"), one, mone), k(e, M_PI));
    gs_instr *im = mul(e, sel(e, safe, im_safe, im_big), k(e, 0.5));
    return cplx(e, re, im);
}

/* atan(z) = -i atanh(iz). */
static gs_instr *atan_complex(ex *e, gs_instr *z) {
    gs_instr *w = atanh_complex(
        e, cplx(e, un(e, GS_OP_NEGATE, part(e, GS_OP_IMAG, z)), part(e, GS_OP_REAL, z)));
    return cplx(e, part(e, GS_OP_IMAG, w), un(e, GS_OP_NEGATE, part(e, GS_OP_REAL, w)));
}

/* ------------------------------------------------------------------ hyperbolic */

/* e^(x + log(1/2)) op e^(log(1/2) - x): (e^x ± e^-x) / 2 without overflowing early. */
static gs_instr *exp_pair(ex *e, gs_instr *x, gs_opcode op, gs_instr *log_half) {
    return bin(e, op, un(e, GS_OP_EXP, add(e, x, log_half)), un(e, GS_OP_EXP, sub(e, log_half, x)));
}

static gs_instr *cosh_real(ex *e, gs_instr *x) {
    return exp_pair(e, x, GS_OP_ADD, un(e, GS_OP_LOG, k(e, 0.5)));
}

/* sinh(x): (expm1(x) + expm1(x) / (expm1(x) + 1)) / 2 for |x| < 1, exp_pair otherwise. */
static gs_instr *sinh_real(ex *e, gs_instr *x) {
    gs_instr *large = exp_pair(e, x, GS_OP_SUBTRACT, un(e, GS_OP_LOG, k(e, 0.5)));
    gs_instr *m = un(e, GS_OP_EXPM1, x), *one = k(e, 1);
    gs_instr *small = mul(e, k(e, 0.5), add(e, m, dvd(e, m, add(e, m, one))));
    return sel(e, cmp(e, un(e, GS_OP_ABS, x), one, "LT"), small, large);
}

static gs_instr *sinh_complex(ex *e, gs_instr *z) {
    gs_instr *log_half = un(e, GS_OP_LOG, cplx(e, k(e, 0.5), k(e, 0)));
    return exp_pair(e, z, GS_OP_SUBTRACT, log_half);
}

static gs_instr *cosh_complex(ex *e, gs_instr *z) {
    gs_instr *log_half = un(e, GS_OP_LOG, cplx(e, k(e, 0.5), k(e, 0)));
    return exp_pair(e, z, GS_OP_ADD, log_half);
}

static gs_instr *tan_any(ex *e, gs_instr *x) { return un(e, GS_OP_TAN, x); }

/* ------------------------------------------------------------------ error function (Cephes) */

/* erfc(x) for |x| >= 1 in f64: exp(-x^2) P(|x|)/Q(|x|) below 8, R/S above; 2 - erfc(-x) for
 * negative x. */
static gs_instr *erfc_ge1_f64(ex *e, gs_instr *x) {
    static const double P[] = {
        2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
        4.86371970985681366614E1,   1.96520832956077098242E2,  5.26445194995477358631E2,
        9.34528527171957607540E2,   1.02755188689515710272E3,  5.57535335369399327526E2};
    static const double Q[] = {
        1.00000000000000000000E0, 1.32281951154744992508E1, 8.67072140885989742329E1,
        3.54937778887819891062E2, 9.75708501743205489753E2, 1.82390916687909736289E3,
        2.24633760818710981792E3, 1.65666309194161350182E3, 5.57535340817727675546E2};
    static const double R[] = {5.64189583547755073984E-1, 1.27536670759978104416E0,
                               5.01905042251180477414E0,  6.16021097993053585195E0,
                               7.40974269950448939160E0,  2.97886665372100240670E0};
    static const double S[] = {1.00000000000000000000E0, 2.26052863220117276590E0,
                               9.39603524938001434673E0, 1.20489539808096656605E1,
                               1.70814450747565897222E1, 9.60896809063285878198E0,
                               3.36907645100081516050E0};
    gs_instr *z = un(e, GS_OP_NEGATE, mul(e, x, x));
    gs_instr *ez = un(e, GS_OP_EXP, z), *ax = un(e, GS_OP_ABS, x);
    gs_instr *lo = dvd(e, mul(e, ez, poly(e, ax, P, N_OF(P))), poly(e, ax, Q, N_OF(Q)));
    gs_instr *hi = dvd(e, mul(e, ez, poly(e, ax, R, N_OF(R))), poly(e, ax, S, N_OF(S)));
    gs_instr *zero = k(e, 0);
    gs_instr *v = sel(e, cmp(e, ax, k(e, 8), "LT"), lo, hi);
    v = sel(e, cmp(e, z, k(e, -7.09782712893383996843E2), "LT"), zero, v);
    return sel(e, cmp(e, x, zero, "LT"), sub(e, k(e, 2), v), v);
}

/* erf(x) for |x| <= 1 in f64: x T(x^2) / U(x^2). */
static gs_instr *erf_le1_f64(ex *e, gs_instr *x) {
    static const double T[] = {9.60497373987051638749E0, 9.00260197203842689217E1,
                               2.23200534594684319226E3, 7.00332514112805075473E3,
                               5.55923013010394962768E4};
    static const double U[] = {1.00000000000000000000E0, 3.35617141647503099647E1,
                               5.21357949780152679795E2, 4.59432382970980127987E3,
                               2.26290000613890934246E4, 4.92673942608635921086E4};
    gs_instr *x2 = mul(e, x, x);
    return dvd(e, mul(e, x, poly(e, x2, T, N_OF(T))), poly(e, x2, U, N_OF(U)));
}

/* erfc(x) for |x| >= 1 in f32: exp(-x^2)/|x| P(1/x^2) below 2, R(1/x^2) above. */
static gs_instr *erfc_ge1_f32(ex *e, gs_instr *x) {
    static const double P[] = {+2.326819970068386E-2, -1.387039388740657E-1, +3.687424674597105E-1,
                               -5.824733027278666E-1, +6.210004621745983E-1, -4.944515323274145E-1,
                               +3.404879937665872E-1, -2.741127028184656E-1, +5.638259427386472E-1};
    static const double R[] = {-1.047766399936249E+1, +1.297719955372516E+1, -7.495518717768503E+0,
                               +2.921019019210786E+0, -1.015265279202700E+0, +4.218463358204948E-1,
                               -2.820767439740514E-1, +5.641895067754075E-1};
    gs_instr *x2 = mul(e, x, x), *z = un(e, GS_OP_NEGATE, x2);
    gs_instr *ax = un(e, GS_OP_ABS, x), *one = k(e, 1), *two = k(e, 2), *zero = k(e, 0);
    gs_instr *q = dvd(e, one, x2);
    gs_instr *f = mul(e, un(e, GS_OP_EXP, z), dvd(e, one, ax));
    gs_instr *p = sel(e, cmp(e, ax, two, "LT"), poly(e, q, P, N_OF(P)), poly(e, q, R, N_OF(R)));
    gs_instr *v = sel(e, cmp(e, z, k(e, -88.72283905206835), "LT"), zero, mul(e, f, p));
    return sel(e, cmp(e, x, zero, "LT"), sub(e, two, v), v);
}

/* erf(x) for |x| <= 1 in f32: x T(x^2). */
static gs_instr *erf_le1_f32(ex *e, gs_instr *x) {
    static const double T[] = {+7.853861353153693E-5, -8.010193625184903E-4, +5.188327685732524E-3,
                               -2.685381193529856E-2, +1.128358514861418E-1, -3.761262582423300E-1,
                               +1.128379165726710E+0};
    return mul(e, x, poly(e, mul(e, x, x), T, N_OF(T)));
}

/* erf(x): Cephes in f64; in f32 Eigen's rational approximation on x clamped to [-4, 4]. */
static gs_instr *erf_real(ex *e, gs_instr *x) {
    gs_instr *one = k(e, 1);
    if (e->t == GS_F64)
        return sel(e, cmp(e, un(e, GS_OP_ABS, x), one, "LT"), erf_le1_f64(e, x),
                   sub(e, one, erfc_ge1_f64(e, x)));
    static const double A[] = {-2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06,
                               -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                               -1.60960333262415e-02};
    static const double B[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                               -7.37332916720468e-03, -1.42647390514189e-02};
    gs_instr *ops[3] = {k(e, -4), x, k(e, 4)};
    gs_instr *c = gs_build(e->b, GS_OP_CLAMP, x->shape, 3, ops);
    gs_instr *c2 = mul(e, c, c);
    gs_instr *v = dvd(e, mul(e, c, poly(e, c2, A, N_OF(A))), poly(e, c2, B, N_OF(B)));
    gs_instr *ops2[3] = {k(e, -1), v, one};
    return v ? gs_build(e->b, GS_OP_CLAMP, x->shape, 3, ops2) : NULL;
}

/* erfc(x): 1 - erf(x) for |x| < 1, the erfc approximation otherwise. */
static gs_instr *erfc_real(ex *e, gs_instr *x) {
    gs_instr *one = k(e, 1);
    bool f64 = e->t == GS_F64;
    gs_instr *lo = sub(e, one, f64 ? erf_le1_f64(e, x) : erf_le1_f32(e, x));
    gs_instr *hi = f64 ? erfc_ge1_f64(e, x) : erfc_ge1_f32(e, x);
    return sel(e, cmp(e, un(e, GS_OP_ABS, x), one, "LT"), lo, hi);
}

/* erf_inv(x) (Giles' approximations): w = -log1p(-x^2) and x times a polynomial in w shifted
 * (small w) or in sqrt(w) shifted, one per range of w (two in f32, three in f64); ±inf at ±1. */
static gs_instr *erf_inv_real(ex *e, gs_instr *x) {
    static const double LT5[] = {2.81022636e-08,  3.43273939e-07, -3.5233877e-06,
                                 -4.39150654e-06, 0.00021858087,  -0.00125372503,
                                 -0.00417768164,  0.246640727,    1.50140941};
    static const double GE5[] = {-0.000200214257, 0.000100950558, 0.00134934322,
                                 -0.00367342844,  0.00573950773,  -0.0076224613,
                                 0.00943887047,   1.00167406,     2.83297682};
    static const double LT625[] = {
        -3.6444120640178196996e-21, -1.685059138182016589e-19,  1.2858480715256400167e-18,
        1.115787767802518096e-17,   -1.333171662854620906e-16,  2.0972767875968561637e-17,
        6.6376381343583238325e-15,  -4.0545662729752068639e-14, -8.1519341976054721522e-14,
        2.6335093153082322977e-12,  -1.2975133253453532498e-11, -5.4154120542946279317e-11,
        1.051212273321532285e-09,   -4.1126339803469836976e-09, -2.9070369957882005086e-08,
        4.2347877827932403518e-07,  -1.3654692000834678645e-06, -1.3882523362786468719e-05,
        0.0001867342080340571352,   -0.00074070253416626697512, -0.0060336708714301490533,
        0.24015818242558961693,     1.6536545626831027356};
    static const double LT16[] = {
        2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
        1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
        2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
        6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
        0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
        -0.0037512085075692412107, 0.005370914553590063617,   1.0052589676941592334,
        3.0838856104922207635};
    static const double GE16[] = {
        -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
        -3.7894654401267369937e-09, 7.6157012080783393804e-09,  -1.4960026627149240478e-08,
        2.9147953450901080826e-08,  -6.7711997758452339498e-08, 2.2900482228026654717e-07,
        -9.9298272942317002539e-07, 4.5260625972231537039e-06,  -1.9681778105531670567e-05,
        7.5995277030017761139e-05,  -0.00021503011930044477347, -0.00013871931833623122026,
        1.0103004648645343977,      4.8499064014085844221};
    gs_instr *w = un(e, GS_OP_NEGATE, un(e, GS_OP_LOG1P, mul(e, x, un(e, GS_OP_NEGATE, x))));
    gs_instr *sw = un(e, GS_OP_SQRT, w), *p;
    if (e->t == GS_F64) {
        gs_instr *far =
            sel(e, cmp(e, w, k(e, 16), "LT"), poly(e, sub(e, sw, k(e, 3.25)), LT16, N_OF(LT16)),
                poly(e, sub(e, sw, k(e, 5)), GE16, N_OF(GE16)));
        p = sel(e, cmp(e, w, k(e, 6.25), "LT"), poly(e, sub(e, w, k(e, 3.125)), LT625, N_OF(LT625)),
                far);
    } else {
        p = sel(e, cmp(e, w, k(e, 5), "LT"), poly(e, sub(e, w, k(e, 2.5)), LT5, N_OF(LT5)),
                poly(e, sub(e, sw, k(e, 3)), GE5, N_OF(GE5)));
    }
    return sel(e, cmp(e, un(e, GS_OP_ABS, x), k(e, 1), "EQ"), mul(e, x, k(e, INFINITY)),
               mul(e, p, x));
}

/* ------------------------------------------------------------------ gamma family (Lanczos) */

/* Lanczos approximation, g = 7, n = 9. */
static const double LANCZOS_G = 7;
static const double LANCZOS_BASE = 0.99999999999980993227684700473478;
static const double LANCZOS[] = {
    676.520368121885098567009190444019, -1259.13921672240287047156078755283,
    771.3234287776530788486528258894,   -176.61502916214059906584551354,
    12.507343278686904814458936853,     -0.13857109526572011689554707,
    9.984369578019570859563e-6,         1.50563273514931155834e-7};

/* z = -x (x < 1/2: reflected) or x - 1, and log(t), t = z + g + 1/2 (via log1p). */
static void lanczos_z(ex *e, gs_instr *x, gs_instr **reflect, gs_instr **z, gs_instr **t,
                      gs_instr **log_t) {
    *reflect = cmp(e, x, k(e, 0.5), "LT");
    *z = sel(e, *reflect, un(e, GS_OP_NEGATE, x), sub(e, x, k(e, 1)));
    gs_instr *gh = k(e, LANCZOS_G + 0.5);
    *t = add(e, gh, *z);
    *log_t = add(e, k(e, log(LANCZOS_G + 0.5)), un(e, GS_OP_LOG1P, dvd(e, *z, gh)));
}

/* lgamma(x) = (log 2 + log pi)/2 + (z + 1/2 - t/log t) log t + log a(z) for x >= 1/2; the
 * reflection log(pi) - log|sin(pi frac|x|)| - lgamma(1 - x) below; +inf at ±inf. */
static gs_instr *lgamma_real(ex *e, gs_instr *x) {
    gs_instr *reflect, *z, *t, *log_t;
    lanczos_z(e, x, &reflect, &z, &t, &log_t);
    gs_instr *half = k(e, 0.5), *one = k(e, 1);
    gs_instr *a = k(e, LANCZOS_BASE);
    for (int i = 0; i < N_OF(LANCZOS); i++)
        a = add(e, a, dvd(e, k(e, LANCZOS[i]), add(e, z, k(e, i + 1))));
    gs_instr *r = mul(e, sub(e, add(e, z, half), dvd(e, t, log_t)), log_t);
    gs_instr *lg = add(e, add(e, k(e, (log(2.0) + log(M_PI)) / 2), r), un(e, GS_OP_LOG, a));
    gs_instr *ax = un(e, GS_OP_ABS, x);
    gs_instr *frac = sub(e, ax, un(e, GS_OP_FLOOR, ax));
    frac = sel(e, cmp(e, half, frac, "LT"), sub(e, one, frac), frac);
    gs_instr *denom = un(e, GS_OP_LOG, un(e, GS_OP_SIN, mul(e, k(e, M_PI), frac)));
    gs_instr *refl = sub(e, sub(e, k(e, log(M_PI)), denom), lg);
    refl = sel(e, is_fin(e, denom), refl, un(e, GS_OP_NEGATE, denom));
    lg = sel(e, reflect, refl, lg);
    return sel(e, cmp(e, ax, k(e, INFINITY), "EQ"), k(e, INFINITY), lg);
}

/* digamma(x) = log t + a'(z)/a(z) - g/t for x >= 1/2; reflected with pi cot(pi x) below; NaN at
 * the poles (non-positive integers). */
static gs_instr *digamma_real(ex *e, gs_instr *x) {
    gs_instr *reflect, *z, *t, *log_t;
    lanczos_z(e, x, &reflect, &z, &t, &log_t);
    gs_instr *zero = k(e, 0), *a = k(e, LANCZOS_BASE), *ap = zero;
    for (int i = 0; i < N_OF(LANCZOS); i++) {
        gs_instr *c = k(e, LANCZOS[i]), *zi = add(e, z, k(e, i + 1));
        ap = sub(e, ap, dvd(e, c, mul(e, zi, zi)));
        a = add(e, a, dvd(e, c, zi));
    }
    gs_instr *dg = sub(e, add(e, log_t, dvd(e, ap, a)), dvd(e, k(e, LANCZOS_G), t));
    gs_instr *rx = add(e, x, un(e, GS_OP_ABS, un(e, GS_OP_FLOOR, add(e, x, k(e, 0.5)))));
    gs_instr *pi = k(e, M_PI), *pirx = mul(e, pi, rx);
    gs_instr *refl = sub(e, dg, dvd(e, mul(e, pi, un(e, GS_OP_COS, pirx)), un(e, GS_OP_SIN, pirx)));
    dg = sel(e, reflect, refl, dg);
    gs_instr *pole =
        bin(e, GS_OP_AND, cmp(e, x, zero, "LE"), cmp(e, x, un(e, GS_OP_FLOOR, x), "EQ"));
    return sel(e, pole, k(e, NAN), dg);
}

/* bessel_i1e(x) (Cephes): sign(x) (|x| cheb(|x|/2 - 2, A) for |x| <= 8, cheb(32/|x| - 2, B) /
 * sqrt|x| above). f32 sums only the last 17 terms of A and 7 of B. */
static gs_instr *bessel_i1e_real(ex *e, gs_instr *x) {
    static const double A64[] = {
        2.77791411276104639959E-18,  -2.11142121435816608115E-17, 1.55363195773620046921E-16,
        -1.10559694773538630805E-15, 7.60068429473540693410E-15,  -5.04218550472791168711E-14,
        3.22379336594557470981E-13,  -1.98397439776494371520E-12, 1.17361862988909016308E-11,
        -6.66348972350202774223E-11, 3.62559028155211703701E-10,  -1.88724975172282928790E-9,
        9.38153738649577178388E-9,   -4.44505912879632808065E-8,  2.00329475355213526229E-7,
        -8.56872026469545474066E-7,  3.47025130813767847674E-6,   -1.32731636560394358279E-5,
        4.78156510755005422638E-5,   -1.61760815825896745588E-4,  5.12285956168575772895E-4,
        -1.51357245063125314899E-3,  4.15642294431288815669E-3,   -1.05640848946261981558E-2,
        2.47264490306265168283E-2,   -5.29459812080949914269E-2,  1.02643658689847095384E-1,
        -1.76416518357834055153E-1,  2.52587186443633654823E-1};
    static const double B64[] = {
        7.51729631084210481353E-18,  4.41434832307170791151E-18,  -4.65030536848935832153E-17,
        -3.20952592199342395980E-17, 2.96262899764595013876E-16,  3.30820231092092828324E-16,
        -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
        4.27244001671195135429E-14,  -2.10154184277266431302E-14, -4.08355111109219731823E-13,
        -7.19855177624590851209E-13, 2.03562854414708950722E-12,  1.41258074366137813316E-11,
        3.25260358301548823856E-11,  -1.89749581235054123450E-11, -5.58974346219658380687E-10,
        -3.83538038596423702205E-9,  -2.63146884688951950684E-8,  -2.51223623787020892529E-7,
        -3.88256480887769039346E-6,  -1.10588938762623716291E-4,  -9.76109749136146840777E-3,
        7.78576235018280120474E-1};
    bool f64 = e->t == GS_F64;
    int na = f64 ? N_OF(A64) : 17, nb = f64 ? N_OF(B64) : 7;
    gs_instr *z = un(e, GS_OP_ABS, x), *two = k(e, 2);
    gs_instr *le8 =
        mul(e, z, chebyshev(e, sub(e, mul(e, k(e, 0.5), z), two), A64 + N_OF(A64) - na, na));
    gs_instr *u = sub(e, dvd(e, k(e, 32), z), two);
    gs_instr *gt8 = dvd(e, chebyshev(e, u, B64 + N_OF(B64) - nb, nb), un(e, GS_OP_SQRT, z));
    return mul(e, un(e, GS_OP_SIGN, x), sel(e, cmp(e, z, k(e, 8), "LE"), le8, gt8));
}

/* ------------------------------------------------------------------ small ones */

static gs_instr *square_real(ex *e, gs_instr *x) { return mul(e, x, x); }

/* square(z) = ((x - y)(x + y), 2xy), with an exact 0 real part when |x| == |y|. */
static gs_instr *square_complex(ex *e, gs_instr *z) {
    gs_instr *x = part(e, GS_OP_REAL, z), *y = part(e, GS_OP_IMAG, z);
    gs_instr *eq =
        bin(e, GS_OP_AND, is_fin(e, x), cmp(e, un(e, GS_OP_ABS, x), un(e, GS_OP_ABS, y), "EQ"));
    return cplx(e, sel(e, eq, k(e, 0), mul(e, sub(e, x, y), add(e, x, y))),
                mul(e, k(e, 2), mul(e, x, y)));
}

static gs_instr *conj_real(ex *e, gs_instr *x) {
    (void)e;
    return x;
}

static gs_instr *conj_complex(ex *e, gs_instr *z) {
    return cplx(e, part(e, GS_OP_REAL, z), un(e, GS_OP_NEGATE, part(e, GS_OP_IMAG, z)));
}

static gs_instr *is_inf(ex *e, gs_instr *x) {
    return cmp(e, un(e, GS_OP_ABS, x), k(e, INFINITY), "EQ");
}
static gs_instr *is_pos_inf(ex *e, gs_instr *x) { return cmp(e, x, k(e, INFINITY), "EQ"); }
static gs_instr *is_neg_inf(ex *e, gs_instr *x) { return cmp(e, x, k(e, -INFINITY), "EQ"); }

/* The unary chlo ops: real and complex decompositions (NULL: unsupported), whether f16/bf16 go
 * through f32, whether the result is a predicate. */
static const struct unary_op {
    const char *name;
    unary_fn real, complex;
    bool up, pred;
} UNARY[] = {
    {"acos", acos_real, acos_complex, false, false},
    {"acosh", acosh_real, acosh_complex, false, false},
    {"asin", asin_real, asin_complex, false, false},
    {"asinh", asinh_real, asinh_complex, false, false},
    {"atan", atan_real, atan_complex, false, false},
    {"atanh", atanh_real, atanh_complex, false, false},
    {"bessel_i1e", bessel_i1e_real, NULL, true, false},
    {"conj", conj_real, conj_complex, false, false},
    {"cosh", cosh_real, cosh_complex, true, false},
    {"digamma", digamma_real, NULL, true, false},
    {"erf", erf_real, NULL, true, false},
    {"erf_inv", erf_inv_real, NULL, true, false},
    {"erfc", erfc_real, NULL, true, false},
    {"is_inf", is_inf, NULL, false, true},
    {"is_neg_inf", is_neg_inf, NULL, false, true},
    {"is_pos_inf", is_pos_inf, NULL, false, true},
    {"lgamma", lgamma_real, NULL, true, false},
    {"sinh", sinh_real, sinh_complex, true, false},
    {"square", square_real, square_complex, false, false},
    {"tan", tan_any, tan_any, false, false},
};

/* ------------------------------------------------------------------ binary */

/* x of float type reinterpreted as the integer type it of its width (or back). */
static gs_instr *bitcast(ex *e, gs_instr *x, gs_type it) {
    return un_to(e, GS_OP_BITCAST_CONVERT, x, it);
}

/* next_after(x, y): the float after x towards y, by stepping x's bit pattern (as an integer of
 * its width) by ±1; y when x == y, the smallest subnormal signed like y when x is ±0, NaN when
 * either is NaN. */
static gs_instr *next_after(ex *e, gs_instr *x, gs_instr *y) {
    int bits = gs_type_bits(e->t);
    gs_type it = bits == 16 ? GS_S16 : bits == 32 ? GS_S32 : GS_S64;
    gs_instr *xi = bitcast(e, x, it), *yi = bitcast(e, y, it);
    gs_instr *any_nan = bin(e, GS_OP_OR, cmp(e, x, x, "NE"), cmp(e, y, y, "NE"));
    int64_t sign = (int64_t)((uint64_t)1 << (bits - 1));
    gs_instr *sign_mask = ki(e, it, sign), *mag_mask = ki(e, it, ~sign);
    gs_instr *zero = ki(e, it, 0), *one = ki(e, it, 1);
    gs_instr *xa = bin(e, GS_OP_AND, xi, mag_mask), *ya = bin(e, GS_OP_AND, yi, mag_mask);
    gs_instr *xs = bin(e, GS_OP_AND, xi, sign_mask), *ys = bin(e, GS_OP_AND, yi, sign_mask);
    gs_instr *smaller = bin(e, GS_OP_OR, cmp(e, xa, ya, "GT"), cmp(e, xs, ys, "NE"));
    gs_instr *v = add(e, xi, sel(e, smaller, ki(e, it, -1), one));
    v = sel(e, cmp(e, xa, zero, "EQ"),
            sel(e, cmp(e, ya, zero, "EQ"), yi, bin(e, GS_OP_OR, ys, one)), v);
    v = sel(e, cmp(e, x, y, "EQ"), yi, v);
    v = sel(e, any_nan, bitcast(e, k(e, NAN), it), v);
    return bitcast(e, v, e->t);
}

/* The Hurwitz zeta function zeta(x, q) = sum_k (q + k)^-x (Johansson's Euler-Maclaurin form: 10
 * terms of the sum, a 12-term tail by Horner's rule); NaN for x < 1 or q <= 0 with x not an
 * integer, the poles at integer q <= 0 (+inf for even x), +inf at x = 1. */
static gs_instr *zeta(ex *e, gs_instr *x, gs_instr *q) {
    static const double C[] = {-7.1661652561756670113e18,
                               1.8152105401943546773e17,
                               -4.5979787224074726105e15,
                               1.1646782814350067249e14,
                               -2.950130727918164224e12,
                               7.47242496e10,
                               -1.8924375803183791606e9,
                               47900160.0,
                               -1209600.0,
                               30240.0,
                               -720.0,
                               12.0};
    gs_instr *zero = k(e, 0), *one = k(e, 1), *nx = un(e, GS_OP_NEGATE, x);
    gs_instr *acc = q, *sum = bin(e, GS_OP_POWER, q, nx);
    for (int i = 0; i < 9; i++) {
        acc = add(e, acc, one);
        sum = add(e, sum, bin(e, GS_OP_POWER, acc, nx));
    }
    acc = add(e, acc, one);
    gs_instr *qp = bin(e, GS_OP_POWER, acc, nx);
    gs_instr *corr = dvd(e, mul(e, qp, acc), sub(e, x, one));
    gs_instr *inv_acc2 = dvd(e, one, mul(e, acc, acc));
    gs_instr *horner = zero;
    for (int i = 0; i < N_OF(C) - 1; i++) {
        gs_instr *f = mul(e, add(e, x, k(e, 22 - 2 * i)), add(e, x, k(e, 21 - 2 * i)));
        horner = mul(e, f, mul(e, inv_acc2, add(e, horner, k(e, 1 / C[i]))));
    }
    gs_instr *tail = mul(
        e, qp, add(e, k(e, 0.5), mul(e, dvd(e, x, acc), add(e, k(e, 1 / C[N_OF(C) - 1]), horner))));
    double tiny = e->t == GS_F64 ? 0x1p-1074 : 0x1p-149;
    gs_instr *v =
        sel(e, cmp(e, un(e, GS_OP_ABS, qp), mul(e, un(e, GS_OP_ABS, sum), k(e, tiny)), "LT"), sum,
            add(e, add(e, sum, corr), tail));
    gs_instr *nan = k(e, NAN), *inf = k(e, INFINITY);
    v = sel(e, cmp(e, x, one, "LT"), nan, v);
    gs_instr *q_le0 = cmp(e, q, zero, "LE");
    gs_instr *x_int = cmp(e, x, un(e, GS_OP_FLOOR, x), "EQ");
    v = sel(e, bin(e, GS_OP_AND, q_le0, un(e, GS_OP_NOT, x_int)), nan, v);
    gs_instr *pole = bin(e, GS_OP_AND, q_le0, cmp(e, q, un(e, GS_OP_FLOOR, q), "EQ"));
    gs_instr *x_even =
        bin(e, GS_OP_AND, x_int, cmp(e, bin(e, GS_OP_REMAINDER, x, k(e, 2)), zero, "EQ"));
    v = sel(e, pole, sel(e, x_even, inf, nan), v);
    return sel(e, cmp(e, x, one, "EQ"), inf, v);
}

/* polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for natural n > 0, digamma(x) for n = 0, NaN
 * for n not a natural number. */
static gs_instr *polygamma(ex *e, gs_instr *n, gs_instr *x) {
    gs_instr *zero = k(e, 0), *one = k(e, 1), *two = k(e, 2);
    gs_instr *sign = sub(e, mul(e, two, bin(e, GS_OP_REMAINDER, n, two)), one);
    gs_instr *np1 = add(e, n, one);
    gs_instr *v = mul(e, mul(e, sign, un(e, GS_OP_EXP, lgamma_real(e, np1))), zeta(e, np1, x));
    v = sel(e, cmp(e, n, zero, "EQ"), digamma_real(e, x), v);
    gs_instr *bad = bin(e, GS_OP_OR, cmp(e, n, un(e, GS_OP_FLOOR, n), "NE"), cmp(e, n, zero, "LT"));
    return sel(e, bad, k(e, NAN), v);
}

/* ------------------------------------------------------------------ reading */

/* Operands, attributes and types of one chlo op, as written. */
typedef struct chlo_op {
    const char *name; /* after `chlo.` */
    size_t pos;       /* where the op name starts */
    gs_instr *ops[MAX_CHLO_OPS];
    int n_ops;
    gs_shape *ins[MAX_CHLO_OPS], *outs[MAX_CHLO_OPS];
    int n_in, n_out;
    gs_vec kvs; /* kv */
} chlo_op;

/* `%a, %b` up to anything else. */
static bool read_operands(reader *r, chlo_op *o) {
    while (mlir_peek(r) == '%') {
        if (o->n_ops >= MAX_CHLO_OPS) return FAIL(r, "too many operands");
        if (!mlir_lookup_value(r, &o->ops[o->n_ops++])) return false;
        if (!mlir_accept(r, ',')) break;
    }
    return true;
}

/* `key = value` pairs of the pretty form (separated by commas), up to anything else. */
static bool read_pretty_attrs(reader *r, chlo_op *o) {
    while (mlir_ident_len(r)) {
        kv k = {0};
        if (!mlir_parse_ident(r, &k.key, "an attribute name") ||
            !mlir_expect(r, '=', "after an attribute name") || !mlir_parse_attr_value(r, &k))
            return false;
        if (gs_vec_push(&o->kvs, &k) != GS_OK) return mlir_oom(r);
        if (!mlir_accept(r, ',')) break;
    }
    return true;
}

/* `: (T, T) -> R`, `: T, T -> R` or `: T -> (R, R)`. */
static bool read_types(reader *r, chlo_op *o) {
    if (!mlir_expect(r, ':', "before the op's type") ||
        !mlir_parse_type_spec(r, o->ins, &o->n_in, o->outs, &o->n_out, MAX_CHLO_OPS))
        return false;
    if (o->n_out >= 0) return true;
    mlir_skip_ws(r);
    if (!(mlir_cur(r) == '-' && mlir_ahead(r, 1) == '>'))
        return FAIL(r, "expected '->' and the result types, found %s", mlir_found(r));
    r->pos += 2;
    o->n_out = 0;
    bool paren = mlir_accept(r, '(');
    do {
        if (o->n_out >= MAX_CHLO_OPS) return FAIL(r, "too many result types");
        if (!mlir_parse_type(r, &o->outs[o->n_out++])) return false;
    } while (paren && mlir_accept(r, ','));
    return !paren || mlir_expect(r, ')', "closing the result types");
}

/* The op's text after its name, in either form. */
static bool read_chlo(reader *r, chlo_op *o, bool generic) {
    if (generic) {
        if (!mlir_expect(r, '(', "opening the operands") || !read_operands(r, o) ||
            !mlir_expect(r, ')', "closing the operands"))
            return false;
        if (mlir_peek(r) == '<') {
            r->pos++;
            if (!mlir_expect(r, '{', "opening the properties") ||
                !mlir_parse_kv_list(r, &o->kvs, '}') ||
                !mlir_expect(r, '>', "closing the properties"))
                return false;
        }
    } else if (mlir_accept(r, '(')) {
        /* chlo.top_k(%x, k = 2) */
        if (!read_operands(r, o) || !read_pretty_attrs(r, o) ||
            !mlir_expect(r, ')', "closing the operands"))
            return false;
    } else if (!read_operands(r, o)) {
        return false;
    }
    if (mlir_peek(r) == '{' && (r->pos++, !mlir_parse_kv_list(r, &o->kvs, '}'))) return false;
    return read_types(r, o);
}

/* Do the operands have the written types, are there n_ops of them and n_out results? */
static bool check_arity(reader *r, const chlo_op *o, int n_ops, int n_out) {
    if (o->n_ops != n_ops)
        return mlir_fail_at(r, o->pos, "'chlo.%s' takes %d operand%s, found %d", o->name, n_ops,
                            n_ops == 1 ? "" : "s", o->n_ops);
    if (o->n_out != n_out)
        return mlir_fail_at(r, o->pos, "'chlo.%s' has %d result%s, the type names %d", o->name,
                            n_out, n_out == 1 ? "" : "s", o->n_out);
    if (o->n_in != o->n_ops)
        return mlir_fail_at(r, o->pos, "'chlo.%s' has %d operands and %d operand types", o->name,
                            o->n_ops, o->n_in);
    for (int i = 0; i < o->n_ops; i++)
        if (!gs_shape_is_array(o->ops[i]->shape) || !gs_shape_equal(o->ops[i]->shape, o->ins[i]))
            return mlir_fail_at(r, o->pos,
                                "operand %d of 'chlo.%s' is not a tensor of its written type", i,
                                o->name);
    for (int i = 0; i < n_out; i++)
        if (!gs_shape_is_array(o->outs[i]))
            return mlir_fail_at(r, o->pos, "result %d of 'chlo.%s' is not a tensor", i, o->name);
    return true;
}

/* An expression context over the dims of shape s, computing in type t. */
static ex ex_over(reader *r, const gs_shape *s, gs_type t) {
    return (ex){.b = &r->b, .t = t, .rank = s->rank, .dims = s->dims};
}

/* A unary elementwise chlo op. */
static bool build_unary(reader *r, const chlo_op *o, const struct unary_op *u, gs_instr **out) {
    if (!check_arity(r, o, 1, 1)) return false;
    gs_instr *x = o->ops[0];
    gs_type t = x->shape->type;
    bool cx = gs_type_is_complex(t);
    bool ok_type =
        cx ? u->complex != NULL : t == GS_F16 || t == GS_BF16 || t == GS_F32 || t == GS_F64;
    if (!ok_type) {
        const char *ts = gs_shape_to_string(r->a, x->shape);
        return mlir_fail_at(r, o->pos, "'chlo.%s' of %s is not supported", o->name,
                            ts ? ts : "this type");
    }
    gs_shape want = *x->shape;
    if (u->pred) want.type = GS_PRED;
    if (!gs_shape_same_dims(o->outs[0], &want) || o->outs[0]->type != want.type)
        return mlir_fail_at(r, o->pos, "the result type of 'chlo.%s' does not fit its operand",
                            o->name);
    ex e = ex_over(r, x->shape, cx ? (t == GS_C64 ? GS_F32 : GS_F64) : t);
    if (cx) {
        *out = u->complex(&e, x);
    } else {
        *out = u->up ? upcast(&e, x, NULL, u->real, NULL) : u->real(&e, x);
    }
    return *out ? true : mlir_oom(r);
}

/* x broadcast to shape s: a lower-rank x with dims bd (x's dim i to s's dim bd[i]; NULL:
 * numpy-style, trailing dims aligned); size-1 dims stretch. */
static gs_instr *broadcast_to(reader *r, const chlo_op *o, gs_instr *x, const gs_shape *s,
                              const kv *bd) {
    const gs_shape *xs = x->shape;
    if (gs_shape_same_dims(xs, s)) return x;
    if (xs->rank == s->rank) bd = NULL; /* the dims map only the lower-rank operand */
    int64_t map[GS_MAX_RANK];
    if (bd && bd->n_a != xs->rank) {
        mlir_fail_at(r, o->pos,
                     "broadcast_dimensions of 'chlo.%s' has %d entries, the operand "
                     "rank %d",
                     o->name, bd->n_a, xs->rank);
        return NULL;
    }
    if (!bd && xs->rank > s->rank) {
        mlir_fail_at(r, o->pos, "an operand of 'chlo.%s' has a higher rank than its result",
                     o->name);
        return NULL;
    }
    int64_t keep_dims[GS_MAX_RANK], keep_map[GS_MAX_RANK];
    int n_keep = 0;
    for (int i = 0; i < xs->rank; i++) {
        map[i] = bd ? bd->a[i] : s->rank - xs->rank + i;
        if (map[i] < 0 || map[i] >= s->rank || (i > 0 && map[i] <= map[i - 1]) ||
            (xs->dims[i] != 1 && xs->dims[i] != s->dims[map[i]])) {
            mlir_fail_at(r, o->pos, "operand dims of 'chlo.%s' do not broadcast to its result",
                         o->name);
            return NULL;
        }
        if (xs->dims[i] == s->dims[map[i]]) {
            keep_dims[n_keep] = xs->dims[i];
            keep_map[n_keep++] = map[i];
        }
    }
    gs_instr *y = gs_build_reshape(&r->b, x, n_keep, keep_dims);
    y = gs_build_broadcast(&r->b, y, s->rank, s->dims, n_keep, keep_map);
    if (!y) mlir_oom(r);
    return y;
}

/* A binary chlo op (next_after, broadcast_*): operands broadcast to the result's dims. */
static bool build_binary(reader *r, const chlo_op *o, gs_instr **out) {
    if (!check_arity(r, o, 2, 1)) return false;
    const char *base = o->name;
    if (strncmp(base, "broadcast_", 10) == 0) base += 10;
    gs_shape *rs = o->outs[0];
    gs_type t = o->ops[0]->shape->type;
    if (o->ops[1]->shape->type != t)
        return mlir_fail_at(r, o->pos, "operands of 'chlo.%s' have different element types",
                            o->name);
    const kv *bd = mlir_find_kv(&o->kvs, "broadcast_dimensions");
    gs_instr *x = broadcast_to(r, o, o->ops[0], rs, bd);
    gs_instr *y = x ? broadcast_to(r, o, o->ops[1], rs, bd) : NULL;
    if (!y) return false;
    ex e = ex_over(r, rs, t);
    binary_fn f = strcmp(base, "next_after") == 0  ? next_after
                  : strcmp(base, "zeta") == 0      ? zeta
                  : strcmp(base, "polygamma") == 0 ? polygamma
                                                   : NULL;
    if (f) {
        if (!(t == GS_F16 || t == GS_BF16 || t == GS_F32 || t == GS_F64) || rs->type != t)
            return mlir_fail_at(
                r, o->pos, "'chlo.%s' needs f16, bf16, f32 or f64 operands and result", o->name);
        *out = f == next_after ? next_after(&e, x, y) : upcast(&e, x, y, NULL, f);
        return *out ? true : mlir_oom(r);
    }
    char hlo[64];
    size_t n = strlen(base);
    if (n >= sizeof hlo)
        return mlir_fail_at(r, o->pos, "unknown or unsupported op 'chlo.%s'", o->name);
    for (size_t i = 0; i <= n; i++) hlo[i] = base[i] == '_' ? '-' : base[i];
    int op = gs_op_from_name(hlo, n);
    if (op < 0 || (gs_op_info_of((gs_opcode)op)->family != GS_FAM_BINARY && op != GS_OP_COMPARE) ||
        base == o->name)
        return mlir_fail_at(r, o->pos, "unknown or unsupported op 'chlo.%s'", o->name);
    gs_type want = op == GS_OP_COMPARE   ? GS_PRED
                   : op == GS_OP_COMPLEX ? (t == GS_F32 ? GS_C64 : GS_C128)
                                         : t;
    if (rs->type != want || (op == GS_OP_COMPLEX && t != GS_F32 && t != GS_F64))
        return mlir_fail_at(r, o->pos, "the result type of 'chlo.%s' does not fit its operands",
                            o->name);
    gs_instr *ops[2] = {x, y};
    *out = gs_build(&r->b, (gs_opcode)op, rs, 2, ops);
    if (op == GS_OP_COMPARE) {
        const kv *d = mlir_find_kv(&o->kvs, "comparison_direction");
        if (!d || !d->ident)
            return mlir_fail_at(r, o->pos, "'chlo.%s' needs a comparison_direction", o->name);
        gs_build_set_ident(&r->b, *out, GS_ATTR_DIRECTION, d->ident);
    }
    return *out && !r->b.failed ? true : mlir_oom(r);
}

/* chlo.top_k(x, k): the k largest of each row of the last dim, and their indices. */
static bool build_top_k(reader *r, const chlo_op *o, gs_instr **out) {
    if (!check_arity(r, o, 1, 2)) return false;
    const kv *kk = mlir_find_kv(&o->kvs, "k");
    const gs_shape *xs = o->ops[0]->shape;
    if (!kk || !kk->is_int) return mlir_fail_at(r, o->pos, "'chlo.top_k' needs an integer k");
    if (xs->rank < 1 || kk->a[0] < 0 || kk->a[0] > xs->dims[xs->rank - 1])
        return mlir_fail_at(r, o->pos, "k = %lld does not fit the last dim of 'chlo.top_k'",
                            (long long)kk->a[0]);
    gs_shape want = *xs;
    int64_t dims[GS_MAX_RANK];
    memcpy(dims, xs->dims, sizeof dims[0] * (size_t)xs->rank);
    dims[xs->rank - 1] = kk->a[0];
    want.dims = dims;
    if (!gs_shape_same_dims(o->outs[0], &want) || !gs_shape_same_dims(o->outs[1], &want) ||
        o->outs[0]->type != xs->type || !gs_type_is_int(o->outs[1]->type))
        return mlir_fail_at(r, o->pos, "the result types of 'chlo.top_k' do not fit its operand");
    gs_shape *tup = gs_shape_tuple(r->a, 2, o->outs);
    *out = tup ? gs_build(&r->b, GS_OP_TOPK, tup, 1, o->ops) : NULL;
    gs_build_set_int(&r->b, *out, GS_ATTR_K, kk->a[0]);
    gs_build_set_bool(&r->b, *out, GS_ATTR_LARGEST, true);
    return *out && !r->b.failed ? true : mlir_oom(r);
}

/* chlo.ragged_dot: XLA's ragged-dot (its dims and its group sizes checked by shape inference,
 * once the module is read). */
const mlir_ragged_dim MLIR_RAGGED_DIMS[MLIR_N_RAGGED_DIMS] = {
    {"lhs_batching_dimensions", GS_ATTR_LHS_BATCH_DIMS},
    {"rhs_batching_dimensions", GS_ATTR_RHS_BATCH_DIMS},
    {"lhs_contracting_dimensions", GS_ATTR_LHS_CONTRACTING_DIMS},
    {"rhs_contracting_dimensions", GS_ATTR_RHS_CONTRACTING_DIMS},
    {"lhs_ragged_dimensions", GS_ATTR_LHS_RAGGED_DIMS},
    {"rhs_group_dimensions", GS_ATTR_RHS_GROUP_DIMS}};

static bool build_ragged_dot(reader *r, const chlo_op *o, gs_instr **out) {
    if (!check_arity(r, o, 3, 1)) return false;
    *out = gs_build(&r->b, GS_OP_RAGGED_DOT, o->outs[0], 3, o->ops);
    for (int i = 0; *out && i < MLIR_N_RAGGED_DIMS; i++) {
        const mlir_ragged_dim *f = &MLIR_RAGGED_DIMS[i];
        const kv *d = mlir_find_kv(&o->kvs, f->mlir);
        if (!d && f->key == GS_ATTR_LHS_RAGGED_DIMS) /* the others may be empty, left out */
            return mlir_fail_at(r, o->pos, "'chlo.ragged_dot' needs %s", f->mlir);
        if (d && d->n_a) gs_build_set_ints(&r->b, *out, f->key, d->n_a, d->a);
    }
    return *out && !r->b.failed ? true : mlir_oom(r);
}

bool mlir_parse_chlo(reader *r, const char *opname, size_t op_pos, bool generic,
                     gs_instr **result) {
    chlo_op o = {.name = opname + 5, .pos = op_pos};
    gs_vec_init(&o.kvs, sizeof(kv));
    bool ok = read_chlo(r, &o, generic);
    if (ok) {
        r->b.span = mlir_span_at(r, op_pos);
        const struct unary_op *u = NULL;
        for (size_t i = 0; i < sizeof UNARY / sizeof UNARY[0]; i++)
            if (strcmp(UNARY[i].name, o.name) == 0) u = &UNARY[i];
        if (u) {
            ok = build_unary(r, &o, u, result);
        } else if (strcmp(o.name, "top_k") == 0) {
            ok = build_top_k(r, &o, result);
        } else if (strcmp(o.name, "ragged_dot") == 0) {
            ok = build_ragged_dot(r, &o, result);
        } else if (strcmp(o.name, "next_after") == 0 || strcmp(o.name, "zeta") == 0 ||
                   strcmp(o.name, "polygamma") == 0 || strncmp(o.name, "broadcast_", 10) == 0) {
            ok = build_binary(r, &o, result);
        } else {
            ok = mlir_fail_at(r, op_pos, "unknown or unsupported op '%s'", opname);
        }
    }
    gs_vec_free(&o.kvs);
    return ok && !r->failed;
}
