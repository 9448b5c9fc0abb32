/*
 * infer_control.c — shape rules of control flow and structure: get-tuple-element, tuple, while
 * (condition and body against the loop state), conditional (branch index and branches), call
 * and fusion (the callee's signature), and the -start/-done halves of asynchronous ops.
 */
#include "ir/infer.h"

gs_status gs_infer_gte(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    int64_t i;
    if (s->type != GS_TUPLE) return fail(c, "operand must be a tuple, not %s", sh(c, s));
    if (need_int(c, GS_ATTR_INDEX, &i) != GS_OK) return GS_ERR;
    if (i < 0 || i >= s->n_tuple)
        return fail(c, "index %lld is out of range for %s", (long long)i, sh(c, s));
    return emit(c, out, s->tuple[i]);
}

gs_status gs_infer_tuple(ictx *c, gs_shape **out) {
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, c->in->n_operands + 1);
    if (!elems) return oom(c);
    for (int k = 0; k < c->in->n_operands; k++) elems[k] = opnd(c, k);
    return emit(c, out, new_tuple(c, c->in->n_operands, elems));
}

gs_status gs_infer_while(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    const gs_computation *cond, *body;
    if (gs_infer_need_comp(c, GS_ATTR_CONDITION, &cond) != GS_OK) return GS_ERR;
    if (gs_infer_need_comp(c, GS_ATTR_BODY, &body) != GS_OK) return GS_ERR;
    if (cond) {
        if (cond->n_params != 1)
            return fail(c, "condition %s must take 1 parameter, but takes %d", cond->name,
                        cond->n_params);
        if (!gs_shape_compatible(param_shape(cond, 0), s, false))
            return fail(c, "condition %s takes %s, but the loop state is %s", cond->name,
                        sh(c, param_shape(cond, 0)), sh(c, s));
        const gs_shape *rs = root_shape(cond);
        if (!is_scalar(rs) || rs->type != GS_PRED)
            return fail(c, "condition %s must return pred[], not %s", cond->name, sh(c, rs));
    }
    if (!body) return GS_OK;
    if (body->n_params != 1)
        return fail(c, "body %s must take 1 parameter, but takes %d", body->name, body->n_params);
    if (!gs_shape_compatible(param_shape(body, 0), s, false))
        return fail(c, "body %s takes %s, but the loop state is %s", body->name,
                    sh(c, param_shape(body, 0)), sh(c, s));
    if (!gs_shape_compatible(root_shape(body), s, false))
        return fail(c, "body %s returns %s, but the loop state is %s", body->name,
                    sh(c, root_shape(body)), sh(c, s));
    return cond ? emit(c, out, root_shape(body)) : GS_OK;
}

gs_status gs_infer_conditional(ictx *c, gs_shape **out) {
    const gs_shape *ix = opnd(c, 0);
    const gs_attr *br = attr(c, GS_ATTR_BRANCH_COMPUTATIONS);
    const gs_attr *ta = attr(c, GS_ATTR_TRUE_COMPUTATION), *fa = attr(c, GS_ATTR_FALSE_COMPUTATION);
    gs_computation *two[2];
    gs_computation *const *v;
    int n;
    if (br) {
        v = br->u.comps.v;
        n = br->u.comps.n;
    } else if (ta && fa) {
        two[0] = ta->u.comp;
        two[1] = fa->u.comp;
        v = two;
        n = 2;
    } else {
        return fail(c, "missing attribute branch_computations (or true_computation and "
                       "false_computation)");
    }
    if (!is_scalar(ix) || (ix->type != GS_PRED && ix->type != GS_S32))
        return fail(c, "branch index must be pred[] or s32[], not %s", sh(c, ix));
    if (ix->type == GS_PRED && n != 2)
        return fail(c, "a pred branch index needs 2 branches, not %d", n);
    if (n < 1) return fail(c, "has no branch computations");
    if (c->in->n_operands != n + 1)
        return fail(c,
                    "takes the branch index and one operand per branch (%d), but has %d "
                    "operands",
                    n + 1, c->in->n_operands);
    const gs_shape *res = NULL;
    bool all = true;
    for (int j = 0; j < n; j++) {
        const gs_computation *f = v[j];
        if (!gs_infer_comp_ready(f)) {
            all = false;
            continue;
        }
        if (f->n_params != 1)
            return fail(c, "branch computation %s must take 1 parameter, but takes %d", f->name,
                        f->n_params);
        if (!gs_shape_compatible(param_shape(f, 0), opnd(c, j + 1), false))
            return fail(c, "branch computation %s takes %s, but operand %d is %s", f->name,
                        sh(c, param_shape(f, 0)), j + 1, sh(c, opnd(c, j + 1)));
        if (!res)
            res = root_shape(f);
        else if (!gs_shape_compatible(res, root_shape(f), false))
            return fail(c, "branch computations return different shapes: %s and %s (%s)",
                        sh(c, res), sh(c, root_shape(f)), f->name);
    }
    return all ? emit(c, out, res) : GS_OK;
}

/* call (to_apply) and fusion (calls): parameters match the operands; the result is the
 * callee's root. A fusion may leave trailing operands without a parameter. */
gs_status gs_infer_call(ictx *c, gs_shape **out) {
    bool fusion = c->in->op == GS_OP_FUSION;
    const gs_computation *f;
    if (gs_infer_need_comp(c, fusion ? GS_ATTR_CALLS : GS_ATTR_TO_APPLY, &f) != GS_OK)
        return GS_ERR;
    if (!f) return GS_OK;
    int n = c->in->n_operands;
    if (fusion ? f->n_params > n : f->n_params != n)
        return fail(c, "computation %s takes %d parameters, but %d operands are given", f->name,
                    f->n_params, n);
    for (int i = 0; i < f->n_params; i++)
        if (!gs_shape_compatible(param_shape(f, i), opnd(c, i), false))
            return fail(c, "parameter %d of %s is %s, but operand %d is %s", i, f->name,
                        sh(c, param_shape(f, i)), i, sh(c, opnd(c, i)));
    return emit(c, out, root_shape(f));
}

/* ------------------------------------------------------------------ asynchronous halves */

/* copy-start: (operand, its copy, u32[] context). */
gs_status gs_infer_copy_start(ictx *c, gs_shape **out) {
    const gs_shape *e[3] = {opnd(c, 0), opnd(c, 0), gs_shape_scalar(c->a, GS_U32)};
    return e[2] ? emit(c, out, new_tuple(c, 3, e)) : oom(c);
}

/* The element `index` of the operand's tuple (the -done half of an asynchronous pair). */
gs_status gs_infer_done(ictx *c, gs_shape **out, int index) {
    const gs_shape *s = opnd(c, 0);
    if (s->type != GS_TUPLE || s->n_tuple <= index)
        return fail(c, "operand must be the tuple of a start op, not %s", sh(c, s));
    return emit(c, out, s->tuple[index]);
}
