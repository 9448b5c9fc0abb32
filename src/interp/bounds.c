/*
 * bounds.c — rounding-error bounds of a reference evaluation (gs_interp_eval_bounded).
 *
 * `gspmd run --verify` compares a partitioned program's outputs with the reference
 * interpreter's. The two legitimately differ where the partitioned program adds in another
 * order (partial dots and reductions combined by an all-reduce, windowed sums split at shard
 * edges), and that difference can be large next to a result computed with cancellation
 * (x + (-x), the square of a small sum of large terms): measured against the result alone it
 * looks like a wrong answer. So every value is evaluated together with a per-element bound on
 * its rounding error (first-order running error analysis), and outputs are compared element by
 * element against their bounds:
 *
 *   parameters, constants, iota, rng   0 (exact)
 *   data movement, select, tuples      the same op applied to the bounds (indices and predicates
 *                                      as they are): moving data is exact
 *   x + y, x - y                       b_x + b_y + u|r|
 *   x * y                              |y| b_x + |x| b_y + b_x b_y + u|r|
 *   x / y, pow, atan2, remainder       first-order partial derivatives, + u|r|
 *   f(x) (exp, tanh, log, ...)         f's range over [x - b_x, x + b_x] (exactly and as computed
 *                                      in the type: saturation, overflow) less r, + u|r|
 *   floor, ceil, round, sign           0 + u|r|, or the jump when x is within the margin of a
 *                                      discontinuity
 *   max, min, clamp                    the largest operand bound
 *   convert                            b_x + u|r| (of the new type)
 *   bitcast-convert                    float to integer: the float's bound in the integer's bits
 *                                      (integers are otherwise their own bound); back to a
 *                                      float: those bits read as the bound (bitcast_bound)
 *   dot, convolution                   |A|.b_B + b_A.|B| + u sqrt(K) |A|.|B|   (K terms each)
 *   reduce, reduce-window (add)        sum of b_x + u sqrt(n) sum of |x|      (n terms each)
 *   reduce, reduce-window (max, min)   the largest b_x of the window
 *   scatter, select-and-scatter (add)  as a reduction of the updates; overwrite, max: moved
 *   sort, topk                         the largest operand bound (an order statistic moves no
 *                                      more than its inputs); other operands of a sort whose
 *                                      keys are inexact: their magnitude (a tie may flip)
 *   call, while, conditional           through the called computation
 *   anything else                      normwise: max|r| (u + the operands' largest relative
 *                                      bound)
 *
 * u is the unit roundoff of the result's element type. sqrt(n) rather than n: rounding errors
 * of long sums grow like a random walk (Higham and Mary, "A new approach to probabilistic
 * rounding error analysis", 2019); the comparison (runtime/verify.c) allows a margin on top.
 * A bound is a value of the same type and dims as the value it bounds; a leaf that is not a
 * real float (integers, predicates, complex, tokens) is its own "bound", so that data-movement
 * kernels run on bounds with their index and predicate operands in place.
 */
#include "kernels.h"
#include "base/sysalloc.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Half-width of the margin the comparison allows (runtime/verify.c's limit): a discontinuity
 * this many bounds away may be crossed. */
enum { JUMP_MARGIN = 16 };

static bool is_real(const gs_value *v) { return v->type != GS_TUPLE && gs_type_is_float(v->type); }

/* Unit roundoff of a float type: half the distance from 1 to the next number. */
static double unit_roundoff(gs_type t) {
    switch (t) {
    case GS_F64: return 0x1p-53;
    case GS_F32: return 0x1p-24;
    case GS_F16: return 0x1p-11;
    case GS_BF16: return 0x1p-8;
    case GS_F8E5M2:
    case GS_F8E5M2FNUZ: return 0x1p-3;
    case GS_F8E4M3FN:
    case GS_F8E4M3B11FNUZ:
    case GS_F8E4M3FNUZ:
    case GS_F8E4M3: return 0x1p-4;
    case GS_F8E3M4: return 0x1p-5;
    case GS_F4E2M1FN: return 0x1p-2;
    default: return 1; /* f8e8m0fnu: powers of two only */
    }
}

static double get(const gs_value *v, int64_t i) { return gs_elem_get_f(v->data, v->type, i); }
static void set(gs_value *v, int64_t i, double x) { gs_elem_set_f(v->data, v->type, i, x); }

/* Stores a bound, saturating: NaN and overflow become infinity (read as "no bound" by the
 * comparison, as is the NaN a type without infinities stores). */
static void set_bound(gs_value *b, int64_t i, double x) {
    set(b, i, isnan(x) || x > FLT_MAX * 0.5 ? INFINITY : x);
}

/* |v| as a new array of v's (float) type. */
static gs_value *abs_of(const gs_value *v) {
    gs_value *r = gs_value_new_array(v->type, v->rank, v->dims);
    if (!r) return NULL;
    for (int64_t i = 0; i < v->n; i++) set(r, i, fabs(get(v, i)));
    return r;
}

/* b + c|x| as a new array (b, x of one type and dims). */
static gs_value *add_scaled_abs(const gs_value *b, double c, const gs_value *x) {
    gs_value *r = gs_value_new_array(b->type, b->rank, b->dims);
    if (!r) return NULL;
    for (int64_t i = 0; i < r->n; i++) set_bound(r, i, get(b, i) + c * fabs(get(x, i)));
    return r;
}

/* -v as a new array (to take a maximum of bounds with a min reducer). */
static gs_value *negated(const gs_value *v) {
    gs_value *r = gs_value_new_array(v->type, v->rank, v->dims);
    if (!r) return NULL;
    for (int64_t i = 0; i < r->n; i++) set(r, i, -get(v, i));
    return r;
}

static double max_abs(const gs_value *v) {
    double m = 0;
    for (int64_t i = 0; i < v->n; i++) {
        double x = fabs(get(v, i));
        if (!(x <= m)) m = x; /* NaN propagates */
    }
    return m;
}

/* Largest finite magnitude of v (0 when none). */
static double max_finite(const gs_value *v) {
    double m = 0;
    for (int64_t i = 0; i < v->n; i++) {
        double x = fabs(get(v, i));
        if (isfinite(x) && x > m) m = x;
    }
    return m;
}

/* A new array of r's type and dims filled with x (as a bound). */
static gs_value *filled(const gs_value *r, double x) {
    gs_value *b = gs_value_new_array(r->type, r->rank, r->dims);
    if (!b) return NULL;
    for (int64_t i = 0; i < b->n; i++) set_bound(b, i, x);
    return b;
}

/* A bound for r mirroring its structure, each real leaf filled by fill(leaf, ctx). */
static gs_value *map_leaves(gs_value *r, double (*fill)(const gs_value *, int, void *), void *ctx,
                            int *leaf) {
    if (r->type == GS_TUPLE) {
        gs_value **el = gs_sys_calloc((size_t)(r->n_tuple ? r->n_tuple : 1), sizeof *el);
        if (!el) return NULL;
        for (int i = 0; i < r->n_tuple; i++)
            if (!(el[i] = map_leaves(r->tuple[i], fill, ctx, leaf))) {
                for (int k = 0; k < i; k++) gs_value_free(el[k]);
                free(el);
                return NULL;
            }
        gs_value *t = gs_value_new_tuple(r->n_tuple, el);
        free(el);
        if (t) t->devices = r->devices;
        return t;
    }
    int k = (*leaf)++;
    if (!is_real(r)) return gs_value_ref(r);
    return filled(r, fill(r, k, ctx));
}

static double fill_zero(const gs_value *r, int leaf, void *ctx) {
    (void)r;
    (void)leaf;
    (void)ctx;
    return 0;
}

gs_value *gs_bound_exact(gs_value *v) {
    int leaf = 0;
    return map_leaves(v, fill_zero, NULL, &leaf);
}

/* ------------------------------------------------------------------ the normwise fallback */

/* Largest relative bound over the real leaves of an operand (value v, bound b). Complex leaves
 * count as accurate to 2^-10 (their bounds are not tracked). */
static double relative_bound(const gs_value *v, const gs_value *b) {
    if (v->type == GS_TUPLE) {
        double m = 0;
        for (int i = 0; i < v->n_tuple && b->type == GS_TUPLE && i < b->n_tuple; i++) {
            double x = relative_bound(v->tuple[i], b->tuple[i]);
            if (!(x <= m)) m = x;
        }
        return m;
    }
    if (gs_type_is_complex(v->type)) return 0x1p-10;
    if (!is_real(v)) return 0;
    double mb = max_abs(b), mv = max_finite(v);
    if (mb == 0) return 0;
    return mv > 0 ? mb / mv : INFINITY;
}

static double fill_normwise(const gs_value *r, int leaf, void *ctx) {
    (void)leaf;
    double rel = *(const double *)ctx;
    return max_finite(r) * (unit_roundoff(r->type) + rel);
}

/* Any op: the largest relative bound of the operands carries to the result, plus a rounding. */
static gs_status fallback(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                          gs_value *const *bops, gs_value *r, gs_value **br) {
    double rel = 0;
    for (int k = 0; k < in->n_operands; k++) {
        double x = relative_bound(ops[k], bops[k]);
        if (!(x <= rel)) rel = x;
    }
    int leaf = 0;
    *br = map_leaves(r, fill_normwise, &rel, &leaf);
    return *br ? GS_OK : gs_eval_oom(ev, in);
}

/* ------------------------------------------------------------------ elementwise */

/* Element i of v, where a scalar operand (clamp's bounds) stands for every element. */
static double at(const gs_value *v, int64_t i) { return get(v, v->n == 1 ? 0 : i); }

/* The bound term of a discontinuity: the jump when x is within the margin (JUMP_MARGIN bounds)
 * of it, else 0. */
static double jump(double dist, double bx, double size) {
    return bx > 0 && fabs(dist) <= JUMP_MARGIN * bx ? size / JUMP_MARGIN : 0;
}

/* f at x as the interpreter computes it in type t (x rounded to t first): its saturation,
 * overflow and flush included, which a partitioned program whose input moved within its bound
 * meets too (logistic(-88.7228) is 2.9e-39, logistic(-88.72284) is 0 in f32). */
static double computed_unary(gs_opcode op, gs_type t, double x) {
    uint64_t in = 0, out = 0; /* room for any real float type */
    gs_elem_set_f(&in, t, 0, x);
    gs_scalar_unary(op, t, &in, 0, t, &out, 0);
    return gs_elem_get_f(&out, t, 0);
}

/* How far f can move from r while its input stays in [a - ba, a + ba]: f at both ends, exactly
 * and as computed in type t, and at the turning points inside (abs at 0, sin and cos at their
 * extremes); infinite when a pole of tan or the edge of f's domain (log, sqrt) is inside. The
 * functions are monotone between those points, so this is f's whole range on the interval. */
static double interval_bound(gs_opcode op, gs_type t, double a, double r, double ba) {
    double lo = a - ba, hi = a + ba, m = 0;
    double pts[4] = {lo, hi, 0, 0};
    int n = 2;
    const double pi = 3.14159265358979323846;
    if (op == GS_OP_ABS && lo < 0 && hi > 0) pts[n++] = 0;
    if (op == GS_OP_SIN || op == GS_OP_COS || op == GS_OP_TAN) {
        if (hi - lo >= 2 * pi) return op == GS_OP_TAN ? INFINITY : 1 + fabs(r);
        /* sin's extremes and tan's poles at pi/2 + k pi, cos's extremes at k pi */
        double shift = op == GS_OP_COS ? 0 : pi / 2;
        for (double k = ceil((lo - shift) / pi); k * pi + shift <= hi && n < 4; k++) {
            if (op == GS_OP_TAN) return INFINITY;
            pts[n++] = k * pi + shift;
        }
    }
    double big = fabs(r);
    for (int i = 0; i < n; i++) {
        double f = computed_unary(op, t, pts[i]);
        /* exactly: f64 math (the f64 kernel's) */
        double e = fabs(computed_unary(op, GS_F64, pts[i]) - r), c = fabs(f - r);
        if (isnan(e) || isnan(c)) return INFINITY; /* outside f's domain */
        if (e > m) m = e;
        if (c > m) m = c;
        if (fabs(f) > big) big = fabs(f);
    }
    /* The computed f is monotone only to within its own error (XLA's rational tanh, libm's
     * expf: an ulp or two), so a point inside may pass an end by that: 2 ulps more. */
    return m + 4 * unit_roundoff(t) * big;
}

/* The bound of unary f at a (result r of type t, operand bound ba), before the result's
 * rounding; false when the op has no rule here. A smooth f moves by at most its range over the
 * interval the operand's bound allows (interval_bound): a first-order |f'(a)| ba is not enough
 * where f saturates (tanh, logistic: f'(a) is ~0 at the reference's point, but the interval
 * reaches the slope) or where the computed f overflows to 0 just past a. */
static bool unary_bound(gs_opcode op, gs_type t, double a, double r, double ba, double *out) {
    double d; /* |f'(a)| */
    switch (op) {
    case GS_OP_NEGATE:
    case GS_OP_ABS:
    case GS_OP_REAL: d = 1; break;
    case GS_OP_IMAG: d = 0; break;
    case GS_OP_EXP: d = fabs(r); break;
    case GS_OP_EXPM1: d = fabs(r + 1); break;
    case GS_OP_LOG: d = 1 / fabs(a); break;
    case GS_OP_LOG1P: d = 1 / fabs(1 + a); break;
    case GS_OP_TANH: d = 1 - r * r; break;
    case GS_OP_LOGISTIC: d = fabs(r * (1 - r)); break;
    case GS_OP_SQRT: d = 0.5 / fabs(r); break;
    case GS_OP_RSQRT: d = 0.5 * fabs(r * r * r); break;
    case GS_OP_CBRT: d = fabs(r) / (3 * fabs(a)); break;
    case GS_OP_SIN: d = fabs(cos(a)); break;
    case GS_OP_COS: d = fabs(sin(a)); break;
    case GS_OP_TAN: d = 1 + r * r; break;
    case GS_OP_ERF: d = 1.1283791670955126 * exp(-a * a); break;
    case GS_OP_FLOOR:
    case GS_OP_CEIL: *out = jump(a - nearbyint(a), ba, 1); return true;
    case GS_OP_ROUND_AFZ:
    case GS_OP_ROUND_EVEN: *out = jump(a - floor(a) - 0.5, ba, 1); return true;
    case GS_OP_SIGN: *out = jump(a, ba, 1); return true;
    default: return false;
    }
    if (!(ba > 0)) {
        *out = ba == 0 ? 0 : INFINITY;
        return true;
    }
    double first = d * ba;
    *out =
        op == GS_OP_REAL || op == GS_OP_IMAG ? first : fmax(first, interval_bound(op, t, a, r, ba));
    return true;
}

/* The bound of binary op on (a, b) with bounds (ba, bb), result r, before its rounding. */
static bool binary_bound(gs_opcode op, double a, double b, double ba, double bb, double r,
                         double *out) {
    switch (op) {
    case GS_OP_ADD:
    case GS_OP_SUBTRACT: *out = ba + bb; return true;
    case GS_OP_MULTIPLY: *out = fabs(b) * ba + fabs(a) * bb + ba * bb; return true;
    case GS_OP_MAXIMUM:
    case GS_OP_MINIMUM: *out = ba > bb ? ba : bb; return true;
    case GS_OP_DIVIDE: *out = ba + bb > 0 ? (ba + fabs(r) * bb) / fabs(b) : 0; return true;
    case GS_OP_POWER:
        *out = (ba > 0 ? fabs(b * r / a) * ba : 0) + (bb > 0 ? fabs(r * log(fabs(a))) * bb : 0);
        return true;
    case GS_OP_ATAN2:
        *out = ba + bb > 0 ? (fabs(b) * ba + fabs(a) * bb) / (a * a + b * b) : 0;
        return true;
    case GS_OP_REMAINDER: {
        double q = b != 0 ? trunc(a / b) : 0;
        *out = ba + fabs(q) * bb + jump(r, ba + bb, fabs(b)) +
               jump(fabs(b) - fabs(r), ba + bb, fabs(b));
        return true;
    }
    default: return false;
    }
}

static gs_status elementwise(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                             gs_value *const *bops, gs_value *r, gs_value **br) {
    gs_value *b = gs_value_new_array(r->type, r->rank, r->dims);
    if (!b) return gs_eval_oom(ev, in);
    gs_opcode op = in->op;
    int n = in->n_operands;
    bool ok = true;
    for (int k = 0; k < n; k++) ok = ok && is_real(ops[k]) && ops[k]->type == r->type;
    for (int64_t i = 0; ok && i < r->n; i++) {
        double ri = get(r, i), x = 0;
        if (op == GS_OP_CLAMP) {
            double m = 0;
            for (int k = 0; k < 3; k++) m = fmax(m, at(bops[k], i));
            x = m;
        } else if (n == 1) {
            ok = unary_bound(op, r->type, get(ops[0], i), ri, get(bops[0], i), &x);
        } else {
            ok = binary_bound(op, get(ops[0], i), get(ops[1], i), get(bops[0], i), get(bops[1], i),
                              ri, &x);
        }
        if (op != GS_OP_CLAMP && op != GS_OP_MAXIMUM && op != GS_OP_MINIMUM)
            x += unit_roundoff(r->type) * fabs(ri);
        set_bound(b, i, x);
    }
    if (!ok) {
        gs_value_free(b);
        return fallback(ev, in, ops, bops, r, br);
    }
    *br = b;
    return GS_OK;
}

/* convert and reduce-precision: the operand's bound (zero for integers) plus the rounding. */
static gs_status converted(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                           gs_value *const *bops, gs_value *r, gs_value **br) {
    gs_value *b = gs_value_new_array(r->type, r->rank, r->dims);
    if (!b) return gs_eval_oom(ev, in);
    double u = unit_roundoff(r->type);
    if (in->op == GS_OP_REDUCE_PRECISION) {
        int64_t mb = gs_instr_int(in, GS_ATTR_MANTISSA_BITS, -1);
        if (mb >= 0 && mb < 60) u = fmax(u, ldexp(1, -(int)mb - 1));
    }
    bool from_real = is_real(ops[0]) && bops[0]->n == r->n;
    for (int64_t i = 0; i < r->n; i++)
        set_bound(b, i, (from_real ? get(bops[0], i) : 0) + u * fabs(get(r, i)));
    *br = b;
    return GS_OK;
}

/* ------------------------------------------------------------------ data movement */

/* The same op applied to the bounds. */
static gs_status moved(gs_eval *ev, const gs_instr *in, gs_value *const *bops, gs_value **br) {
    return gs_eval_instr(ev, in, bops, br);
}

/* set-dimension-size and friends: the op applied to the data's bound with the real sizes (the
 * sizes' bounds are zeros, which would resize the bound to nothing). */
static gs_status resized(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                         gs_value *const *bops, gs_value **br) {
    gs_value *o[16];
    if (in->n_operands > 16) return gs_eval_error(ev, in, "too many operands");
    for (int k = 0; k < in->n_operands; k++) o[k] = k == 0 ? bops[k] : ops[k];
    return gs_eval_instr(ev, in, o, br);
}

/* ------------------------------------------------------------------ sums */

/* Elements per output the instruction sums: dot's contracted size, a convolution's window
 * times input features per group, a reduction's reduced size. */
static double terms(const gs_instr *in, gs_value *const *ops, const gs_value *r) {
    double k = 1;
    if (in->op == GS_OP_DOT || in->op == GS_OP_RAGGED_DOT) {
        gs_ints lc = gs_instr_ints(in, GS_ATTR_LHS_CONTRACTING_DIMS);
        for (int i = 0; i < lc.n; i++)
            if (lc.v[i] >= 0 && lc.v[i] < ops[0]->rank) k *= (double)ops[0]->dims[lc.v[i]];
    } else if (in->op == GS_OP_CONVOLUTION) {
        const gs_attr *la = gs_instr_attr(in, GS_ATTR_DIM_LABELS);
        const gs_value *kern = ops[1];
        int64_t of = la && la->u.conv ? la->u.conv->k_out_feature : -1;
        k = (double)kern->n /
            (of >= 0 && of < kern->rank && kern->dims[of] ? (double)kern->dims[of] : 1);
    } else if (in->op == GS_OP_REDUCE) {
        k = r->n ? (double)ops[0]->n / (double)r->n : 1;
    } else if (in->op == GS_OP_REDUCE_WINDOW || in->op == GS_OP_SELECT_AND_SCATTER) {
        const gs_attr *a = gs_instr_attr(in, GS_ATTR_WINDOW);
        for (int i = 0; a && a->u.window && i < a->u.window->n; i++)
            k *= (double)(a->u.window->dims[i].size > 0 ? a->u.window->dims[i].size : 1);
    } else if (in->op == GS_OP_SCATTER) {
        k = (double)ops[in->n_operands - 1]->n;
    }
    return k < 1 ? 1 : k;
}

/* Is every element of v zero? */
static bool all_zero(const gs_value *v) {
    for (int64_t i = 0; i < v->n; i++)
        if (get(v, i) != 0) return false;
    return true;
}

/* In place: a += b (same dims). */
static void accumulate(gs_value *a, const gs_value *b) {
    for (int64_t i = 0; i < a->n; i++) set_bound(a, i, get(a, i) + get(b, i));
}

/* dot and convolution: |A|.(b_B + c|B|) + b_A.|B| with c = u sqrt(K). */
static gs_status contraction(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                             gs_value *const *bops, gs_value *r, gs_value **br) {
    /* A ragged-dot's group sizes (exact integers) pass through as they are. */
    bool ragged = in->op == GS_OP_RAGGED_DOT && in->n_operands == 3;
    if ((in->n_operands != 2 && !ragged) || !is_real(ops[0]) || !is_real(ops[1]))
        return fallback(ev, in, ops, bops, r, br);
    double c = unit_roundoff(r->type) * sqrt(terms(in, ops, r));
    gs_value *absa = abs_of(ops[0]), *absb = abs_of(ops[1]);
    gs_value *ba = gs_value_ref(bops[0]), *bb = gs_value_ref(bops[1]);
    gs_value *x = NULL, *t[2] = {NULL, NULL};
    gs_status st = absa && absb && ba && bb ? GS_OK : gs_eval_oom(ev, in);
    if (st == GS_OK) {
        x = add_scaled_abs(bb, c, ops[1]);
        if (!x) st = gs_eval_oom(ev, in);
    }
    if (st == GS_OK) {
        gs_value *o1[3] = {absa, x, ragged ? ops[2] : NULL};
        st = gs_eval_instr(ev, in, o1, &t[0]);
    }
    if (st == GS_OK && !all_zero(ba)) {
        gs_value *o2[3] = {ba, absb, ragged ? ops[2] : NULL};
        st = gs_eval_instr(ev, in, o2, &t[1]);
        if (st == GS_OK) accumulate(t[0], t[1]);
    }
    gs_value_free(absa);
    gs_value_free(absb);
    gs_value_free(ba);
    gs_value_free(bb);
    gs_value_free(x);
    gs_value_free(t[1]);
    if (st != GS_OK) {
        gs_value_free(t[0]);
        return st;
    }
    *br = t[0];
    return GS_OK;
}

/* The block-scaled dot: as a contraction of its dequantized operands, |A|.(b_B + c|B|) +
 * b_A.|B| (c = u sqrt(K)); the scales (powers of two) are exact. */
static gs_status scaled_contraction(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                    gs_value *const *bops, gs_value *r, gs_value **br) {
    int64_t B, M, N, K;
    if (in->n_operands != 4 || !is_real(r) ||
        !gs_scaled_dot_dims((const gs_value *const *)ops, &B, &M, &N, &K))
        return fallback(ev, in, ops, bops, r, br);
    double c = unit_roundoff(r->type) * sqrt((double)(K > 0 ? K : 1));
    double *a = gs_scaled_dot_dequant(ops[0], ops[2], true);
    double *b = gs_scaled_dot_dequant(ops[1], ops[3], true);
    double *ba = is_real(bops[0]) ? gs_scaled_dot_dequant(bops[0], ops[2], true) : NULL;
    double *bb = is_real(bops[1]) ? gs_scaled_dot_dequant(bops[1], ops[3], true) : NULL;
    size_t n = B * M * N > 0 ? (size_t)(B * M * N) : 1;
    double *t = gs_sys_malloc(sizeof *t * n), *u = gs_sys_malloc(sizeof *u * n);
    gs_value *res = gs_value_new_array(r->type, r->rank, r->dims);
    gs_status st = a && b && t && u && res ? GS_OK : gs_eval_oom(ev, in);
    if (st == GS_OK) {
        for (int64_t i = 0; bb && i < N * K * B; i++) bb[i] += c * b[i];
        gs_scaled_dot_core(a, bb ? bb : b, B, M, N, K, t);
        if (!bb)
            for (int64_t i = 0; i < B * M * N; i++) t[i] *= c;
        if (ba) {
            gs_scaled_dot_core(ba, b, B, M, N, K, u);
            for (int64_t i = 0; i < B * M * N; i++) t[i] += u[i];
        }
        for (int64_t i = 0; i < res->n; i++) set_bound(res, i, t[i]);
    }
    free(a);
    free(b);
    free(ba);
    free(bb);
    free(t);
    free(u);
    if (st != GS_OK) {
        gs_value_free(res);
        return st;
    }
    *br = res;
    return GS_OK;
}

/* The reduction op of instruction in's computation attribute `key`, or -1 when it is not one
 * binary op on its parameters. An overwrite (root = parameter 1) reads as GS_OP_COPY. */
static int reducer_op(const gs_instr *in, gs_attr_key key) {
    const gs_computation *c = gs_instr_comp(in, key);
    if (!c) return -1;
    gs_opcode op;
    if (gs_computation_binary_reducer(c, &op)) return op;
    if (c->root->op == GS_OP_PARAMETER && c->root->parameter_number == 1) return GS_OP_COPY;
    return -1;
}

/* reduce, reduce-window, scatter and select-and-scatter with one input: runs the op on the
 * bounds (a sum: with c|x| added to each term, c = u sqrt(n); a maximum: the largest bound, a
 * minimum reducer through negated bounds; an overwrite: moved). `data` and `init` are the
 * operand positions of the summed values and the init value (-1: none). */
static gs_status folded(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                        gs_value *const *bops, gs_value *r, gs_value **br, int data, int init,
                        int rop) {
    int n = in->n_operands;
    gs_value *o[8];
    if (n > 8) return fallback(ev, in, ops, bops, r, br);
    double c = unit_roundoff(r->type) * sqrt(terms(in, ops, r));
    bool neg = rop == GS_OP_MINIMUM;
    gs_status st = GS_OK;
    for (int k = 0; k < n; k++) o[k] = NULL;
    for (int k = 0; k < n && st == GS_OK; k++) {
        bool summed = k == data || k == init;
        if (!summed)
            o[k] =
                in->op == GS_OP_SELECT_AND_SCATTER ? gs_value_ref(ops[k]) : gs_value_ref(bops[k]);
        else if (rop == GS_OP_ADD)
            o[k] = add_scaled_abs(bops[k], c, ops[k]);
        else if (neg)
            o[k] = negated(bops[k]);
        else
            o[k] = gs_value_ref(bops[k]);
        if (!o[k]) st = gs_eval_oom(ev, in);
    }
    if (in->op == GS_OP_SCATTER && st == GS_OK && neg) {
        gs_value_free(o[0]);
        if (!(o[0] = negated(bops[0]))) st = gs_eval_oom(ev, in);
    }
    gs_value *b = NULL;
    if (st == GS_OK) st = gs_eval_instr(ev, in, o, &b);
    for (int k = 0; k < n; k++) gs_value_free(o[k]);
    if (st != GS_OK) return st;
    if (neg)
        for (int64_t i = 0; i < b->n; i++) set(b, i, -get(b, i));
    *br = b;
    return GS_OK;
}

typedef struct order_ctx {
    gs_value *const *ops, *const *bops;
    int n;
    bool keys_inexact; /* some operand has a nonzero bound */
} order_ctx;

static double fill_ordered(const gs_value *r, int leaf, void *vctx) {
    const order_ctx *o = vctx;
    int k = leaf < o->n ? leaf : 0; /* topk: values, then indices */
    double b = is_real(o->bops[k]) ? max_abs(o->bops[k]) : 0;
    if (o->keys_inexact && o->n > 1) b += 2 * max_finite(r);
    return b;
}

/* Does the variadic reduce's computation pick one of its arguments per result (a tuple of
 * selects, as argmax and argmin are written)? */
static bool selects(const gs_instr *in) {
    const gs_computation *c = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!c || !c->root || c->root->op != GS_OP_TUPLE) return false;
    for (int i = 0; i < c->root->n_operands; i++) {
        const gs_instr *x = c->root->operands[i];
        if (x->op != GS_OP_SELECT && x->op != GS_OP_PARAMETER) return false;
    }
    return true;
}

static gs_status reduction(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                           gs_value *const *bops, gs_value *r, gs_value **br) {
    int rop = -1, data = 0, init = 1;
    bool one = r->type != GS_TUPLE && is_real(r);
    switch (in->op) {
    case GS_OP_REDUCE:
    case GS_OP_REDUCE_WINDOW:
        one = one && in->n_operands == 2;
        rop = reducer_op(in, GS_ATTR_TO_APPLY);
        break;
    case GS_OP_SELECT_AND_SCATTER:
        rop = reducer_op(in, GS_ATTR_SCATTER);
        data = 1;
        init = 2;
        /* An inexact operand may move the selected positions. */
        one = one && all_zero(bops[0]);
        break;
    case GS_OP_SCATTER:
        one = one && in->n_operands == 3;
        rop = reducer_op(in, GS_ATTR_TO_APPLY);
        data = 2;
        init = -1;
        break;
    default: one = false;
    }
    if (in->op == GS_OP_REDUCE && in->n_operands > 2 && selects(in)) {
        /* argmax/argmin: each result is one of the inputs' elements, and the maximum of
         * values each off by at most b is off by at most b (which element wins may change:
         * the index leaves are compared exactly). */
        order_ctx o = {ops, bops, in->n_operands, false};
        int leaf = 0;
        *br = map_leaves(r, fill_ordered, &o, &leaf);
        return *br ? GS_OK : gs_eval_oom(ev, in);
    }
    if (!one || (rop != GS_OP_ADD && rop != GS_OP_MAXIMUM && rop != GS_OP_MINIMUM &&
                 !(rop == GS_OP_COPY && in->op == GS_OP_SCATTER)))
        return fallback(ev, in, ops, bops, r, br);
    return folded(ev, in, ops, bops, r, br, data, init, rop);
}

/* ------------------------------------------------------------------ sort, topk */

static gs_status ordered(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                         gs_value *const *bops, gs_value *r, gs_value **br) {
    order_ctx o = {ops, bops, in->n_operands, false};
    for (int k = 0; k < o.n; k++)
        if (is_real(ops[k]) && !all_zero(bops[k])) o.keys_inexact = true;
    int leaf = 0;
    *br = map_leaves(r, fill_ordered, &o, &leaf);
    return *br ? GS_OK : gs_eval_oom(ev, in);
}

/* ------------------------------------------------------------------ control flow */

static gs_status bounded_while(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                               gs_value *const *bops, gs_value **out, gs_value **bout) {
    const gs_computation *cond = gs_instr_comp(in, GS_ATTR_CONDITION);
    const gs_computation *body = gs_instr_comp(in, GS_ATTR_BODY);
    if (!cond || !body) return gs_eval_error(ev, in, "while needs condition= and body=");
    gs_value *state = gs_value_ref(ops[0]), *bstate = gs_value_ref(bops[0]);
    for (;;) {
        gs_value *p;
        if (gs_eval_call(ev, cond, &state, 1, &p) != GS_OK) {
            gs_value_free(state);
            gs_value_free(bstate);
            return GS_ERR;
        }
        bool go = false;
        gs_status pst = gs_eval_predicate(ev, in, p, &go);
        gs_value_free(p);
        if (pst != GS_OK) {
            gs_value_free(state);
            gs_value_free(bstate);
            return pst;
        }
        if (!go) break;
        gs_value *next, *bnext;
        gs_status st = gs_eval_call_bounded(ev, body, &state, &bstate, 1, &next, &bnext);
        gs_value_free(state);
        gs_value_free(bstate);
        if (st != GS_OK) return st;
        state = next;
        bstate = bnext;
    }
    *out = state;
    *bout = bstate;
    return GS_OK;
}

/* bitcast-convert of value r from operand x (bound bx). An inexact float bitcast to an integer
 * type has no integer bound (integers are their own), so its bound travels in the integer's bits
 * instead: the same bitcast of the float's bound. Bitcast back to a float, those bits are the
 * bound again (a round trip f32 -> s16[2] -> f32 keeps it); a bound that does not read back as
 * one (finite, not negative) is none (infinity). Otherwise the normwise fallback. */
static gs_status bitcast_bound(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                               gs_value *const *bops, gs_value *r, gs_value **br) {
    const gs_value *x = ops[0], *bx = bops[0];
    if (is_real(x) && !is_real(r) && r->type != GS_TUPLE) {
        if (max_abs(bx) == 0) {
            *br = gs_value_ref(r);
            return GS_OK;
        }
        return gs_eval_instr(ev, in, bops, br);
    }
    bool carried = !is_real(x) && x->type != GS_TUPLE && is_real(r) && bx != x &&
                   gs_value_bytes(bx) == gs_value_bytes(x) &&
                   memcmp(bx->data, x->data, gs_value_bytes(x)) != 0;
    if (!carried) return fallback(ev, in, ops, bops, r, br);
    if (gs_eval_instr(ev, in, bops, br) != GS_OK) return GS_ERR;
    for (int64_t i = 0; i < (*br)->n; i++) {
        double b = get(*br, i);
        set_bound(*br, i, b >= 0 ? b : INFINITY);
    }
    return GS_OK;
}

gs_status gs_bound_instr(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                         gs_value *const *bops, gs_value **out, gs_value **bout) {
    *out = *bout = NULL;
    /* A call in a manual region runs its body on the per-device values (as gs_eval_instr). */
    if (!gs_manual_is_enter(in) && !gs_manual_is_exit(in) && in->op != GS_OP_CALL &&
        gs_op_info_of(in->op)->family != GS_FAM_COLLECTIVE) {
        int n_dev = gs_bundle_devices(ops, in->n_operands);
        if (n_dev == 0) n_dev = gs_manual_id_devices(ev, in);
        if (n_dev > 0) return gs_per_device(ev, in, n_dev, ops, bops, out, bout, gs_bound_instr);
    }
    const gs_op_info *info = gs_op_info_of(in->op);
    switch (info->family) {
    case GS_FAM_WHILE: return bounded_while(ev, in, ops, bops, out, bout);
    case GS_FAM_CALL: {
        const gs_computation *c = gs_instr_comp(in, GS_ATTR_TO_APPLY);
        if (!c) c = gs_instr_comp(in, GS_ATTR_CALLS);
        if (!c) return gs_eval_error(ev, in, "no computation to call");
        return gs_eval_call_bounded(ev, c, ops, bops, in->n_operands, out, bout);
    }
    case GS_FAM_CONDITIONAL: {
        const gs_computation *branch;
        int k;
        if (gs_eval_branch(ev, in, ops, &branch, &k) != GS_OK) return GS_ERR;
        return gs_eval_call_bounded(ev, branch, &ops[k], &bops[k], branch->n_params, out, bout);
    }
    default: break;
    }
    gs_value *r = NULL;
    gs_status st = gs_eval_instr(ev, in, ops, &r);
    if (st != GS_OK) return st;
    gs_value *b = NULL;
    if (in->op == GS_OP_BITCAST_CONVERT && in->n_operands == 1) {
        st = bitcast_bound(ev, in, ops, bops, r, &b);
    } else if (r->type != GS_TUPLE && !is_real(r)) {
        b = gs_value_ref(r); /* integers, predicates, complex, tokens are their own bound */
    } else {
        switch (in->op == GS_OP_INFEED ? GS_FAM_RNG : info->family) { /* infeed: exact data */
        case GS_FAM_IOTA:
        case GS_FAM_RNG:
        case GS_FAM_CONSTANT:
            b = gs_bound_exact(r);
            st = b ? GS_OK : gs_eval_oom(ev, in);
            break;
        case GS_FAM_UNARY:
        case GS_FAM_BINARY: st = elementwise(ev, in, ops, bops, r, &b); break;
        case GS_FAM_TERNARY:
            st = in->op == GS_OP_CLAMP ? elementwise(ev, in, ops, bops, r, &b)
                                       : moved(ev, in, bops, &b);
            break;
        case GS_FAM_CONVERT: st = converted(ev, in, ops, bops, r, &b); break;
        case GS_FAM_CUSTOM_CALL: {
            const char *target = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
            if (target && strcmp(target, "TopK") == 0)
                st = ordered(ev, in, ops, bops, r, &b);
            else if (target && strcmp(target, "__op$block_scaled_dot") == 0)
                st = scaled_contraction(ev, in, ops, bops, r, &b);
            else
                st = moved(ev, in, bops, &b);
            break;
        }
        case GS_FAM_DYNAMIC_SHAPE: st = resized(ev, in, ops, bops, &b); break;
        case GS_FAM_GATHER:
        case GS_FAM_TUPLE:
        case GS_FAM_GET_TUPLE_ELEMENT:
        case GS_FAM_COPY:
        case GS_FAM_COLLECTIVE:
        case GS_FAM_TOKEN: st = moved(ev, in, bops, &b); break;
        case GS_FAM_ASYNC:
            st = info->flags & GS_OPF_ASYNC_START ? fallback(ev, in, ops, bops, r, &b)
                                                  : moved(ev, in, bops, &b);
            break;
        case GS_FAM_DOT:
        case GS_FAM_CONVOLUTION: st = contraction(ev, in, ops, bops, r, &b); break;
        case GS_FAM_REDUCE:
        case GS_FAM_REDUCE_WINDOW:
        case GS_FAM_SELECT_AND_SCATTER:
        case GS_FAM_SCATTER: st = reduction(ev, in, ops, bops, r, &b); break;
        case GS_FAM_SORT:
        case GS_FAM_TOPK: st = ordered(ev, in, ops, bops, r, &b); break;
        default: /* data movement (broadcast, slice, pad...) moves the bounds with the values */
            st = gs_op_family_moves_data(info->family) ? moved(ev, in, bops, &b)
                                                       : fallback(ev, in, ops, bops, r, &b);
            break;
        }
    }
    if (st != GS_OK) {
        gs_value_free(r);
        return st;
    }
    *out = r;
    *bout = b;
    return GS_OK;
}

/* ------------------------------------------------------------------ entry */

gs_status gs_interp_eval_bounded(const gs_module *m, const gs_interp_env *env,
                                 gs_value *const *args, int n_args, gs_value **result,
                                 gs_value **bound, gs_diags *d) {
    gs_interp_env default_env = {0, 0, 1, NULL, 0, NULL, NULL, 0, NULL};
    gs_eval ev = {m, env ? env : &default_env, d, 0, 0, NULL, NULL, {NULL}, 0};
    ev.rng_state = ev.env->rng_seed ^ 0x9e3779b97f4a7c15ull;
    *result = *bound = NULL;
    if (gs_module_check_bounded(m, "evaluation", d) != GS_OK) return GS_ERR;
    gs_value **bargs = gs_sys_calloc((size_t)(n_args ? n_args : 1), sizeof *bargs);
    if (!bargs) return gs_error(d, gs_span_none(), "out of memory");
    gs_status st = GS_OK;
    for (int i = 0; i < n_args && st == GS_OK; i++)
        if (!(bargs[i] = gs_bound_exact(args[i])))
            st = gs_error(d, gs_span_none(), "out of memory");
    if (st == GS_OK) st = gs_eval_call_bounded(&ev, m->entry, args, bargs, n_args, result, bound);
    for (int i = 0; i < n_args; i++) gs_value_free(bargs[i]);
    free(bargs);
    gs_scalar_progs_free(ev.scalars);
    gs_eval_free_spares(&ev);
    return st;
}
