/*
 * infer_shape.c — shape rules of the data-movement ops: transpose, reverse, slice,
 * dynamic-slice, dynamic-update-slice (start indices as scalars or one vector), concatenate,
 * pad, and the dynamic-shape ops get-dimension-size and set-dimension-size. (broadcast and
 * reshape have written shapes: infer_written.c.)
 */
#include "ir/infer.h"

gs_status gs_infer_transpose(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    gs_ints p;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (need_ints(c, GS_ATTR_DIMENSIONS, &p) != GS_OK) return GS_ERR;
    bool ok = p.n == s->rank;
    bool seen[GS_MAX_RANK] = {false};
    for (int i = 0; ok && i < p.n; i++) {
        ok = p.v[i] >= 0 && p.v[i] < s->rank && !seen[p.v[i]];
        if (ok) seen[p.v[i]] = true;
    }
    if (!ok)
        return fail(c, "dimensions %s are not a permutation of the dimensions of %s",
                    ints_text(c, p), sh(c, s));
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    for (int i = 0; i < p.n; i++) {
        dims[i] = s->dims[p.v[i]];
        dyn[i] = dyn_at(s, (int)p.v[i]);
    }
    return emit(c, out, new_array(c, s->type, s->rank, dims, dyn));
}

gs_status gs_infer_reverse(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    gs_ints v;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (need_ints(c, GS_ATTR_DIMENSIONS, &v) != GS_OK) return GS_ERR;
    if (gs_infer_check_dims(c, v, s->rank, s, "reverse dimension", false) != GS_OK) return GS_ERR;
    return emit(c, out, copy_as(c, s, s->type));
}

gs_status gs_infer_slice(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    const gs_attr *at;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (need_attr(c, GS_ATTR_SLICE, &at) != GS_OK) return GS_ERR;
    if (at->u.slice.n != s->rank)
        return fail(c, "slice has %d dimensions, but the operand %s has rank %d", at->u.slice.n,
                    sh(c, s), s->rank);
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    for (int i = 0; i < s->rank; i++) {
        gs_slice_dim sd = at->u.slice.v[i];
        if (sd.start < 0)
            return fail(c, "slice start %lld of dimension %d is negative", (long long)sd.start, i);
        if (s->dims[i] >= 0 && sd.limit > s->dims[i])
            return fail(c, "slice limit %lld of dimension %d exceeds its size in %s",
                        (long long)sd.limit, i, sh(c, s));
        if (sd.start > sd.limit)
            return fail(c, "slice start %lld of dimension %d exceeds its limit %lld",
                        (long long)sd.start, i, (long long)sd.limit);
        if (sd.stride <= 0)
            return fail(c, "slice stride %lld of dimension %d is not positive",
                        (long long)sd.stride, i);
        dims[i] = (sd.limit - sd.start + sd.stride - 1) / sd.stride;
        dyn[i] = dims[i] != 1 && dyn_at(s, i);
    }
    return emit(c, out, new_array(c, s->type, s->rank, dims, dyn));
}

/* The start indices (operands first..) of a dynamic-(update-)slice of a rank-`rank` operand:
 * one integer vector of rank entries, or rank integer scalars of one type. */
static gs_status check_start_indices(ictx *c, int first, int rank) {
    int n = c->in->n_operands - first;
    const gs_shape *i0 = n > 0 ? opnd(c, first) : NULL;
    if (n >= 1 && arr(i0) && i0->rank == 1) {
        if (n != 1) return fail(c, "takes one start-index vector, but %d index operands", n);
        if (!gs_type_is_int(i0->type))
            return fail(c, "start indices must be integers, not %s", sh(c, i0));
        if (!dim_eq(i0->dims[0], rank))
            return fail(c, "start-index vector %s does not hold %d indices", sh(c, i0), rank);
        return GS_OK;
    }
    if (n != rank)
        return fail(c, "takes %d start indices for a rank-%d operand, but %d were given", rank,
                    rank, n);
    for (int k = 0; k < n; k++) {
        const gs_shape *s = opnd(c, first + k);
        if (!is_scalar(s) || !gs_type_is_int(s->type))
            return fail(c, "start index %d must be an integer scalar, not %s", k, sh(c, s));
        if (s->type != i0->type)
            return fail(c, "start indices have different types: %s and %s", sh(c, i0), sh(c, s));
    }
    return GS_OK;
}

gs_status gs_infer_dynamic_slice(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    gs_ints z;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (check_start_indices(c, 1, s->rank) != GS_OK) return GS_ERR;
    if (need_ints(c, GS_ATTR_DYNAMIC_SLICE_SIZES, &z) != GS_OK) return GS_ERR;
    if (z.n != s->rank)
        return fail(c, "dynamic_slice_sizes has %d entries, but the operand %s has rank %d", z.n,
                    sh(c, s), s->rank);
    for (int i = 0; i < z.n; i++)
        if (z.v[i] < 0 || (s->dims[i] >= 0 && z.v[i] > s->dims[i]))
            return fail(c, "slice size %lld of dimension %d is out of range for %s",
                        (long long)z.v[i], i, sh(c, s));
    return emit(c, out, new_array(c, s->type, z.n, z.v, NULL));
}

gs_status gs_infer_dynamic_update_slice(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0), *u = opnd(c, 1);
    if (!arr(s) || !arr(u))
        return fail(c, "operand and update must be arrays, not %s and %s", sh(c, s), sh(c, u));
    if (check_start_indices(c, 2, s->rank) != GS_OK) return GS_ERR;
    if (u->rank != s->rank)
        return fail(c, "update %s and operand %s have different ranks", sh(c, u), sh(c, s));
    if (!fp_eq(u->type, s->type))
        return fail(c, "update %s and operand %s have different element types", sh(c, u), sh(c, s));
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] >= 0 && u->dims[i] > s->dims[i])
            return fail(c, "update %s is larger than the operand %s in dimension %d", sh(c, u),
                        sh(c, s), i);
    return emit(c, out, copy_as(c, s, s->type));
}

gs_status gs_infer_concatenate(ictx *c, gs_shape **out) {
    const gs_shape *s0 = opnd(c, 0);
    int64_t d;
    if (!arr(s0)) return fail(c, "operand 0 must be an array, not %s", sh(c, s0));
    if (gs_infer_need_one_dim(c, s0, "concatenate dimension", &d) != GS_OK) return GS_ERR;
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    gs_type t = s0->type;
    for (int i = 0; i < s0->rank; i++) {
        dims[i] = s0->dims[i];
        dyn[i] = dyn_at(s0, i);
    }
    for (int k = 1; k < c->in->n_operands; k++) {
        const gs_shape *s = opnd(c, k);
        if (!arr(s)) return fail(c, "operand %d must be an array, not %s", k, sh(c, s));
        if (s->rank != s0->rank)
            return fail(c, "operands %s and %s have different ranks", sh(c, s0), sh(c, s));
        if (!fp_eq(s->type, s0->type))
            return fail(c, "operands %s and %s have different element types", sh(c, s0), sh(c, s));
        for (int i = 0; i < s->rank; i++) {
            if (i != d && !dim_eq(s->dims[i], s0->dims[i]))
                return fail(c,
                            "operands %s and %s differ in dimension %d, which is not the "
                            "concatenate dimension %lld",
                            sh(c, s0), sh(c, s), i, (long long)d);
            dyn[i] = dyn[i] || dyn_at(s, i);
        }
        dims[d] = dims[d] < 0 || s->dims[d] < 0 ? -1 : dims[d] + s->dims[d];
        t = higher(t, s->type);
    }
    return emit(c, out, new_array(c, t, s0->rank, dims, dyn));
}

gs_status gs_infer_pad(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0), *v = opnd(c, 1);
    const gs_attr *at;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (!is_scalar(v)) return fail(c, "padding value must be a scalar, not %s", sh(c, v));
    if (!fp_eq(v->type, s->type))
        return fail(c, "padding value %s and operand %s have different element types", sh(c, v),
                    sh(c, s));
    if (need_attr(c, GS_ATTR_PADDING, &at) != GS_OK) return GS_ERR;
    const gs_padding *p = at->u.padding;
    if (p->n != s->rank)
        return fail(c, "padding has %d dimensions, but the operand %s has rank %d", p->n, sh(c, s),
                    s->rank);
    int64_t dims[GS_MAX_RANK];
    for (int i = 0; i < s->rank; i++) {
        gs_pad_dim pd = p->dims[i];
        if (pd.interior < 0)
            return fail(c, "interior padding %lld of dimension %d is negative",
                        (long long)pd.interior, i);
        int64_t n = s->dims[i];
        dims[i] = n < 0 ? -1 : n + pd.lo + pd.hi + (n > 0 ? n - 1 : 0) * pd.interior;
        if (n >= 0 && dims[i] < 0)
            return fail(c, "padding makes dimension %d of %s negative (%lld)", i, sh(c, s),
                        (long long)dims[i]);
    }
    return emit(c, out, new_array(c, higher(s->type, v->type), s->rank, dims, s->dynamic));
}

gs_status gs_infer_get_dimension_size(ictx *c, gs_shape **out) {
    int64_t d;
    if (!arr(opnd(c, 0))) return fail(c, "operand must be an array, not %s", sh(c, opnd(c, 0)));
    if (gs_infer_need_one_dim(c, opnd(c, 0), "dimension", &d) != GS_OK) return GS_ERR;
    return emit(c, out, gs_shape_scalar(c->a, GS_S32));
}

gs_status gs_infer_set_dimension_size(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0), *v = opnd(c, 1);
    int64_t d;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (gs_infer_need_one_dim(c, s, "dimension", &d) != GS_OK) return GS_ERR;
    if (!is_scalar(v) || v->type != GS_S32) return fail(c, "size must be s32[], not %s", sh(c, v));
    bool dyn[GS_MAX_RANK];
    for (int i = 0; i < s->rank; i++) dyn[i] = dyn_at(s, i) || i == d;
    return emit(c, out, new_array(c, s->type, s->rank, s->dims, dyn));
}
