/*
 * infer_reduce.c — shape rules of the ops that fold, window, order or scan with a called
 * computation: reduce, reduce-window, select-and-scatter, sort (its comparator), topk and
 * scan (inputs and carries). Reducers are checked by gs_infer_check_reducer (infer.c).
 */
#include "ir/infer.h"

/* The first half of the operands (inputs) are arrays of the same dims, the second half
 * (init values) scalars. Fills the element types. */
static gs_status check_inputs_inits(ictx *c, int n, gs_type *in_t, gs_type *init_t) {
    if (c->in->n_operands % 2 != 0)
        return fail(c, "takes inputs then as many init values, but has %d operands",
                    c->in->n_operands);
    const gs_shape *s0 = opnd(c, 0);
    for (int i = 0; i < n; i++) {
        const gs_shape *s = opnd(c, i), *v = opnd(c, n + i);
        if (!arr(s)) return fail(c, "input %d must be an array, not %s", i, sh(c, s));
        if (!gs_shape_dims_compatible(s, s0))
            return fail(c, "inputs %s and %s have different dimensions", sh(c, s0), sh(c, s));
        if (!is_scalar(v)) return fail(c, "init value %d must be a scalar, not %s", i, sh(c, v));
        in_t[i] = s->type;
        init_t[i] = v->type;
    }
    return GS_OK;
}

gs_status gs_infer_reduce(ictx *c, gs_shape **out) {
    int n = c->in->n_operands / 2;
    gs_type *in_t = GS_NEW_ARRAY(c->scratch, gs_type, 3 * n);
    if (!in_t) return oom(c);
    gs_type *init_t = in_t + n, *res_t = in_t + 2 * n;
    gs_ints v;
    if (check_inputs_inits(c, n, in_t, init_t) != GS_OK) return GS_ERR;
    const gs_shape *s0 = opnd(c, 0);
    if (need_ints(c, GS_ATTR_DIMENSIONS, &v) != GS_OK) return GS_ERR;
    if (gs_infer_check_dims(c, v, s0->rank, s0, "reduce dimension", false) != GS_OK) return GS_ERR;
    const gs_computation *f;
    if (gs_infer_need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (gs_infer_check_reducer(c, f, "to_apply", n, init_t, in_t, res_t) != GS_OK) return GS_ERR;
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    int k = 0;
    for (int i = 0; i < s0->rank; i++)
        if (!gs_ints_contains(v, i)) {
            dyn[k] = dyn_at(s0, i);
            dims[k++] = s0->dims[i];
        }
    if (root_shape(f)->type != GS_TUPLE) return emit(c, out, new_array(c, res_t[0], k, dims, dyn));
    gs_shape **elems = GS_NEW_ARRAY(c->scratch, gs_shape *, n);
    if (!elems) return oom(c);
    for (int i = 0; i < n; i++)
        if (!(elems[i] = new_array(c, res_t[i], k, dims, dyn))) return oom(c);
    return emit(c, out, new_tuple(c, n, (const gs_shape *const *)elems));
}

static gs_status need_window(ictx *c, int rank, const gs_window **w) {
    const gs_attr *at;
    if (need_attr(c, GS_ATTR_WINDOW, &at) != GS_OK) return GS_ERR;
    *w = at->u.window;
    if ((*w)->n != rank)
        return fail(c, "window has %d dimensions, but the operand %s has rank %d", (*w)->n,
                    sh(c, opnd(c, 0)), rank);
    return GS_OK;
}

gs_status gs_infer_reduce_window(ictx *c, gs_shape **out) {
    int n = c->in->n_operands / 2;
    gs_type *in_t = GS_NEW_ARRAY(c->scratch, gs_type, 3 * n);
    if (!in_t) return oom(c);
    gs_type *init_t = in_t + n, *res_t = in_t + 2 * n;
    if (check_inputs_inits(c, n, in_t, init_t) != GS_OK) return GS_ERR;
    const gs_shape *s0 = opnd(c, 0);
    const gs_window *w;
    int64_t dims[GS_MAX_RANK];
    if (need_window(c, s0->rank, &w) != GS_OK) return GS_ERR;
    if (gs_infer_window_out(c, w, s0->dims, dims) != GS_OK) return GS_ERR;
    const gs_computation *f;
    if (gs_infer_need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (gs_infer_check_reducer(c, f, "to_apply", n, init_t, in_t, res_t) != GS_OK) return GS_ERR;
    if (root_shape(f)->type != GS_TUPLE)
        return emit(c, out, new_array(c, init_t[0], s0->rank, dims, s0->dynamic));
    gs_shape **elems = GS_NEW_ARRAY(c->scratch, gs_shape *, n);
    if (!elems) return oom(c);
    for (int i = 0; i < n; i++)
        if (!(elems[i] = new_array(c, init_t[i], s0->rank, dims, s0->dynamic))) return oom(c);
    return emit(c, out, new_tuple(c, n, (const gs_shape *const *)elems));
}

gs_status gs_infer_select_and_scatter(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0), *src = opnd(c, 1), *init = opnd(c, 2);
    if (!arr(s) || !arr(src))
        return fail(c, "operand and source must be arrays, not %s and %s", sh(c, s), sh(c, src));
    if (!is_scalar(init)) return fail(c, "init value must be a scalar, not %s", sh(c, init));
    const gs_window *w;
    int64_t dims[GS_MAX_RANK];
    if (need_window(c, s->rank, &w) != GS_OK) return GS_ERR;
    if (gs_infer_window_out(c, w, s->dims, dims) != GS_OK) return GS_ERR;
    bool fits = src->rank == s->rank;
    for (int i = 0; fits && i < s->rank; i++) fits = dim_eq(src->dims[i], dims[i]);
    if (!fits) {
        const gs_shape *win = gs_shape_array(c->scratch, src->type, s->rank, dims);
        return fail(c, "source %s does not match the windowed operand %s", sh(c, src),
                    win ? sh(c, win) : "?");
    }
    const gs_computation *sel, *sc;
    if (gs_infer_need_comp(c, GS_ATTR_SELECT, &sel) != GS_OK) return GS_ERR;
    if (gs_infer_need_comp(c, GS_ATTR_SCATTER, &sc) != GS_OK) return GS_ERR;
    if (sel) {
        if (sel->n_params != 2)
            return fail(c, "select computation %s must take 2 parameters, but takes %d", sel->name,
                        sel->n_params);
        for (int i = 0; i < 2; i++) {
            const gs_shape *p = param_shape(sel, i);
            if (!is_scalar(p) || !fp_eq(p->type, s->type))
                return fail(c,
                            "parameter %d of select computation %s is %s, expected a %s "
                            "scalar",
                            i, sel->name, sh(c, p), tn(s->type));
        }
        const gs_shape *rs = root_shape(sel);
        if (!is_scalar(rs) || rs->type != GS_PRED)
            return fail(c, "select computation %s must return pred[], not %s", sel->name,
                        sh(c, rs));
    }
    if (sc) {
        gs_type res;
        if (gs_infer_check_reducer(c, sc, "scatter", 1, &init->type, &src->type, &res) != GS_OK)
            return GS_ERR;
    }
    if (!sel || !sc) return GS_OK;
    return emit(c, out, copy_as(c, s, s->type));
}

gs_status gs_infer_sort(ictx *c, gs_shape **out) {
    int n = c->in->n_operands;
    const gs_shape *s0 = opnd(c, 0);
    int64_t d;
    for (int k = 0; k < n; k++) {
        const gs_shape *s = opnd(c, k);
        if (!arr(s)) return fail(c, "operand %d must be an array, not %s", k, sh(c, s));
        if (!gs_shape_dims_compatible(s, s0))
            return fail(c, "operands %s and %s have different dimensions", sh(c, s0), sh(c, s));
    }
    if (gs_infer_need_one_dim(c, s0, "sort dimension", &d) != GS_OK) return GS_ERR;
    const gs_computation *f;
    if (gs_infer_need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (f->n_params != 2 * n)
        return fail(c, "comparator %s must take %d parameters, but takes %d", f->name, 2 * n,
                    f->n_params);
    for (int i = 0; i < 2 * n; i++) {
        const gs_shape *p = param_shape(f, i);
        if (!is_scalar(p) || !fp_eq(p->type, opnd(c, i / 2)->type))
            return fail(c, "parameter %d of comparator %s is %s, expected a %s scalar", i, f->name,
                        sh(c, p), tn(opnd(c, i / 2)->type));
    }
    const gs_shape *rs = root_shape(f);
    if (!is_scalar(rs) || rs->type != GS_PRED)
        return fail(c, "comparator %s must return pred[], not %s", f->name, sh(c, rs));
    return gs_infer_operands_as_result(c, out);
}

gs_status gs_infer_topk(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    int64_t k;
    if (!arr(s) || s->rank < 1)
        return fail(c, "operand must be an array of rank >= 1, not %s", sh(c, s));
    if (need_int(c, GS_ATTR_K, &k) != GS_OK) return GS_ERR;
    int64_t last = s->dims[s->rank - 1];
    if (k < 0 || (last >= 0 && k > last))
        return fail(c, "k=%lld is out of range for the last dimension of %s", (long long)k,
                    sh(c, s));
    int64_t dims[GS_MAX_RANK];
    copy_dims(dims, s);
    dims[s->rank - 1] = k;
    const gs_shape *e[2] = {new_array(c, s->type, s->rank, dims, NULL),
                            new_array(c, GS_S32, s->rank, dims, NULL)};
    if (!e[0] || !e[1]) return oom(c);
    return emit(c, out, new_tuple(c, 2, e));
}

/* scan: inputs then num_carries carries; to_apply maps (input slices..., carries...) to
 * (outputs..., carries...); outputs are stacked along the scan dimension. */
gs_status gs_infer_scan(ictx *c, gs_shape **out) {
    int n = c->in->n_operands;
    int64_t nc = gs_instr_int(c->in, GS_ATTR_NUM_CARRIES, 0), d;
    if (nc < 0 || nc > n)
        return fail(c, "num_carries %lld is out of range for %d operands", (long long)nc, n);
    int n_in = n - (int)nc;
    if (n_in == 0) return GS_OK;
    const gs_shape *s0 = opnd(c, 0);
    if (!arr(s0)) return fail(c, "input 0 must be an array, not %s", sh(c, s0));
    if (gs_infer_need_one_dim(c, s0, "scan dimension", &d) != GS_OK) return GS_ERR;
    int64_t len = s0->dims[d];
    for (int i = 0; i < n_in; i++) {
        const gs_shape *s = opnd(c, i);
        if (!arr(s) || s->rank <= d || !dim_eq(s->dims[d], len))
            return fail(c,
                        "input %d %s does not have the length %lld of input 0 along scan "
                        "dimension %lld",
                        i, sh(c, s), (long long)len, (long long)d);
    }
    const gs_computation *f;
    if (gs_infer_need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (f->n_params != n)
        return fail(c, "to_apply computation %s must take %d parameters, but takes %d", f->name, n,
                    f->n_params);
    for (int i = 0; i < n; i++) {
        const gs_shape *s = opnd(c, i), *p = param_shape(f, i);
        bool ok;
        if (i < n_in) {
            int64_t dims[GS_MAX_RANK];
            int k = 0;
            for (int j = 0; j < s->rank; j++)
                if (j != d) dims[k++] = s->dims[j];
            ok = arr(p) && fp_eq(p->type, s->type) && p->rank == k;
            for (int j = 0; ok && j < k; j++) ok = dim_eq(p->dims[j], dims[j]);
        } else {
            ok = gs_shape_compatible(p, s, true);
        }
        if (!ok)
            return fail(c,
                        "parameter %d of to_apply computation %s is %s, which does not fit "
                        "operand %d %s",
                        i, f->name, sh(c, p), i, sh(c, s));
    }
    const gs_shape *rs = root_shape(f);
    int n_res = rs->type == GS_TUPLE ? rs->n_tuple : 1;
    const gs_shape *const *res = rs->type == GS_TUPLE ? (const gs_shape *const *)rs->tuple : &rs;
    int n_out = n_res - (int)nc;
    if (n_out < 0)
        return fail(c, "to_apply computation %s returns %d values, fewer than the %lld carries",
                    f->name, n_res, (long long)nc);
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n_res);
    if (!elems) return oom(c);
    for (int i = 0; i < n_res; i++) {
        const gs_shape *e = res[i];
        if (i >= n_out) {
            const gs_shape *carry = opnd(c, n_in + i - n_out);
            if (!gs_shape_compatible(e, carry, true))
                return fail(c, "to_apply computation %s returns carry %s for carry operand %s",
                            f->name, sh(c, e), sh(c, carry));
            elems[i] = carry;
            continue;
        }
        if (!arr(e) || e->rank + 1 > GS_MAX_RANK)
            return fail(c, "to_apply computation %s returns output %s, not an array", f->name,
                        sh(c, e));
        int64_t dims[GS_MAX_RANK];
        int at = d <= e->rank ? (int)d : e->rank, k = 0;
        for (int j = 0; j <= e->rank; j++) dims[j] = j == at ? len : e->dims[k++];
        if (!(elems[i] = new_array(c, e->type, e->rank + 1, dims, NULL))) return oom(c);
    }
    if (n_res == 1) return emit(c, out, elems[0]);
    return emit(c, out, new_tuple(c, n_res, elems));
}
