/*
 * infer_elementwise.c — shape rules of the elementwise ops: unary and binary arithmetic,
 * compare (with its direction and comparison type), select, clamp, map and reduce-precision.
 * The result has the operands' dims; its element type follows the op (pred for compare and
 * is-finite, the component type for abs/real/imag of complex, complex for `complex`).
 */
#include "ir/infer.h"

#include <string.h>

gs_status gs_infer_unary(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    gs_type t = s->type, r = t;
    bool fl = gs_type_is_float(t), cx = gs_type_is_complex(t), in = gs_type_is_int(t);
    const char *want = NULL;
    switch (c->in->op) {
    case GS_OP_FLOOR:
    case GS_OP_CEIL:
    case GS_OP_ROUND_AFZ:
    case GS_OP_ROUND_EVEN:
        if (!fl) want = "a floating-point";
        break;
    case GS_OP_IS_FINITE:
        if (!fl) want = "a floating-point";
        r = GS_PRED;
        break;
    case GS_OP_CLZ:
    case GS_OP_POPCNT:
        if (!in) want = "an integer";
        break;
    case GS_OP_NOT:
        if (!in && t != GS_PRED) want = "a pred or integer";
        break;
    case GS_OP_NEGATE:
        if (!in && !fl && !cx) want = "a numeric";
        break;
    case GS_OP_ABS:
    case GS_OP_SIGN:
        if (!gs_type_is_signed_int(t) && !fl && !cx) want = "a signed, floating-point or complex";
        if (c->in->op == GS_OP_ABS) r = component_type(t);
        break;
    case GS_OP_REAL:
    case GS_OP_IMAG:
        if (!fl && !cx) want = "a floating-point or complex";
        r = component_type(t);
        break;
    default: /* transcendental functions */
        if (!fl && !cx) want = "a floating-point or complex";
        break;
    }
    if (want) return fail(c, "expects %s operand, not %s", want, sh(c, s));
    return emit(c, out, copy_as(c, s, r));
}

/* Dims of a and b with the dynamic flags of either. */
static gs_shape *merge_dyn(ictx *c, const gs_shape *a, const gs_shape *b, gs_type t) {
    bool dyn[GS_MAX_RANK];
    for (int i = 0; i < a->rank; i++) dyn[i] = dyn_at(a, i) || dyn_at(b, i);
    return new_array(c, t, a->rank, a->dims, dyn);
}

static gs_status check_compare_attrs(ictx *c) {
    static const char *const dirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
    const char *dir = gs_instr_str(c->in, GS_ATTR_DIRECTION);
    if (!dir) return fail(c, "missing attribute direction");
    bool ok = false;
    for (int i = 0; i < 6; i++) ok = ok || strcmp(dir, dirs[i]) == 0;
    if (!ok) return fail(c, "direction %s is not one of EQ, NE, LT, LE, GT, GE", dir);
    const char *ty = gs_instr_str(c->in, GS_ATTR_TYPE);
    if (!ty) return GS_OK;
    gs_type t = opnd(c, 0)->type;
    bool fl_kind = strcmp(ty, "FLOAT") == 0 || strcmp(ty, "TOTALORDER") == 0;
    if (!fl_kind && strcmp(ty, "SIGNED") != 0 && strcmp(ty, "UNSIGNED") != 0)
        return fail(c, "comparison type %s is not one of FLOAT, TOTALORDER, SIGNED, UNSIGNED", ty);
    bool fits = gs_type_is_float(t) || gs_type_is_complex(t) ? fl_kind
                : gs_type_is_signed_int(t)                   ? strcmp(ty, "SIGNED") == 0
                                                             : strcmp(ty, "UNSIGNED") == 0;
    if (!fits) return fail(c, "comparison type %s does not suit %s operands", ty, tn(t));
    return GS_OK;
}

gs_status gs_infer_binary(ictx *c, gs_shape **out) {
    const gs_shape *l = opnd(c, 0), *r = opnd(c, 1);
    gs_opcode op = c->in->op;
    if (!arr(l) || !arr(r))
        return fail(c, "operands must be arrays, not %s and %s", sh(c, l), sh(c, r));
    if (!fp_eq(l->type, r->type))
        return fail(c, "operand element types differ: %s and %s", sh(c, l), sh(c, r));
    gs_type t = l->type;
    switch (op) {
    case GS_OP_SUBTRACT:
    case GS_OP_ATAN2:
    case GS_OP_POWER:
    case GS_OP_DIVIDE:
    case GS_OP_REMAINDER:
    case GS_OP_SHIFT_LEFT:
    case GS_OP_SHIFT_RIGHT_ARITHMETIC:
    case GS_OP_SHIFT_RIGHT_LOGICAL:
        if (t == GS_PRED) return fail(c, "expects arithmetic operands, not %s", sh(c, l));
        break;
    case GS_OP_AND:
    case GS_OP_OR:
    case GS_OP_XOR:
        if (t != GS_PRED && !gs_type_is_int(t))
            return fail(c, "expects pred or integer operands, not %s", sh(c, l));
        break;
    case GS_OP_COMPARE:
        if (check_compare_attrs(c) != GS_OK) return GS_ERR;
        break;
    default: break;
    }
    if (!gs_shape_dims_compatible(l, r))
        return fail(c, "operand shapes differ: %s and %s (HLO has no implicit broadcast)", sh(c, l),
                    sh(c, r));
    gs_type rt = higher(l->type, r->type);
    if (op == GS_OP_COMPARE) rt = GS_PRED;
    if (op == GS_OP_COMPLEX) {
        if (l->type == GS_F32 && r->type == GS_F32)
            rt = GS_C64;
        else if (l->type == GS_F64 && r->type == GS_F64)
            rt = GS_C128;
        else
            return fail(c, "expects two f32 or two f64 operands, not %s and %s", sh(c, l),
                        sh(c, r));
    }
    return emit(c, out, merge_dyn(c, l, r, rt));
}

gs_status gs_infer_select(ictx *c, gs_shape **out) {
    const gs_shape *p = opnd(c, 0), *t = opnd(c, 1), *f = opnd(c, 2);
    if (!arr(p) || !arr(t) || !arr(f))
        return fail(c, "operands must be arrays, not %s, %s and %s", sh(c, p), sh(c, t), sh(c, f));
    if (p->type != GS_PRED) return fail(c, "predicate must be pred, not %s", sh(c, p));
    if (!fp_eq(t->type, f->type) || !gs_shape_dims_compatible(t, f))
        return fail(c, "on_true and on_false shapes differ: %s and %s", sh(c, t), sh(c, f));
    if (p->rank != 0 && !gs_shape_dims_compatible(p, t))
        return fail(c, "predicate shape %s does not match the operand shape %s", sh(c, p),
                    sh(c, t));
    return emit(c, out, merge_dyn(c, t, f, higher(t->type, f->type)));
}

gs_status gs_infer_clamp(ictx *c, gs_shape **out) {
    const gs_shape *lo = opnd(c, 0), *x = opnd(c, 1), *hi = opnd(c, 2);
    if (!arr(lo) || !arr(x) || !arr(hi))
        return fail(c, "operands must be arrays, not %s, %s and %s", sh(c, lo), sh(c, x),
                    sh(c, hi));
    if (!fp_eq(lo->type, x->type) || !fp_eq(hi->type, x->type))
        return fail(c, "element types differ: %s, %s and %s", sh(c, lo), sh(c, x), sh(c, hi));
    if ((lo->rank != 0 && !gs_shape_dims_compatible(lo, x)) ||
        (hi->rank != 0 && !gs_shape_dims_compatible(hi, x)))
        return fail(c, "min %s and max %s must be scalars or have the operand's shape %s",
                    sh(c, lo), sh(c, hi), sh(c, x));
    return emit(c, out, copy_as(c, x, x->type));
}

gs_status gs_infer_map(ictx *c, gs_shape **out) {
    const gs_shape *s0 = opnd(c, 0);
    for (int i = 0; i < c->in->n_operands; i++) {
        const gs_shape *s = opnd(c, i);
        if (!arr(s)) return fail(c, "operand %d must be an array, not %s", i, sh(c, s));
        if (!gs_shape_dims_compatible(s, s0))
            return fail(c, "operands must have the same dimensions, not %s and %s", sh(c, s0),
                        sh(c, s));
    }
    const gs_attr *dims = attr(c, GS_ATTR_DIMENSIONS);
    if (dims) {
        bool ok = dims->u.ints.n == s0->rank;
        for (int i = 0; ok && i < dims->u.ints.n; i++) ok = dims->u.ints.v[i] == i;
        if (!ok)
            return fail(c, "dimensions %s must list every dimension of %s in order",
                        ints_text(c, dims->u.ints), sh(c, s0));
    }
    const gs_computation *f;
    if (gs_infer_need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (f->n_params != c->in->n_operands)
        return fail(c, "to_apply computation %s must take %d parameters, but takes %d", f->name,
                    c->in->n_operands, f->n_params);
    for (int i = 0; i < f->n_params; i++) {
        const gs_shape *p = param_shape(f, i);
        if (!is_scalar(p) || !fp_eq(p->type, opnd(c, i)->type))
            return fail(c, "parameter %d of to_apply computation %s is %s, expected a %s scalar", i,
                        f->name, sh(c, p), tn(opnd(c, i)->type));
    }
    if (!is_scalar(root_shape(f)))
        return fail(c, "to_apply computation %s must return a scalar, not %s", f->name,
                    sh(c, root_shape(f)));
    return emit(c, out, copy_as(c, s0, root_shape(f)->type));
}

gs_status gs_infer_reduce_precision(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    int64_t e, m;
    if (!arr(s) || !gs_type_is_float(s->type))
        return fail(c, "operand must be a floating-point array, not %s", sh(c, s));
    if (need_int(c, GS_ATTR_EXPONENT_BITS, &e) != GS_OK ||
        need_int(c, GS_ATTR_MANTISSA_BITS, &m) != GS_OK)
        return GS_ERR;
    if (e < 1) return fail(c, "exponent_bits must be >= 1, not %lld", (long long)e);
    if (m < 0) return fail(c, "mantissa_bits must be >= 0, not %lld", (long long)m);
    return emit(c, out, copy_as(c, s, s->type));
}
