/*
 * infer_gather.c — shape rules of gather and (variadic) scatter: index_vector_dim, offset or
 * update window dims, collapsed or inserted dims, the start-index map and batching dims, slice
 * sizes, and the scatter combiner.
 */
#include "ir/infer.h"

/* Start indices (or scatter indices) dims with the implicit trailing 1 when index_vector_dim
 * equals their rank. */
static gs_status expand_indices(ictx *c, const gs_shape *ix, int64_t ivd, int64_t *exp, int *n) {
    if (!arr(ix) || !gs_type_is_int(ix->type))
        return fail(c, "indices must be an integer array, not %s", sh(c, ix));
    if (ivd < 0 || ivd > ix->rank)
        return fail(c, "index_vector_dim %lld is out of range for indices %s", (long long)ivd,
                    sh(c, ix));
    *n = ix->rank;
    copy_dims(exp, ix);
    if (ivd == ix->rank) exp[(*n)++] = 1;
    return GS_OK;
}

/* Batching dims: operand dims obd[i] pair with index dims ibd[i]; neither side repeats, the
 * index side avoids index_vector_dim, and paired sizes agree. */
static gs_status check_batching(ictx *c, const gs_shape *op, gs_ints obd, const char *oname,
                                const int64_t *exp, int n_exp, int64_t ivd, gs_ints ibd,
                                const char *iname) {
    if (gs_infer_check_dims(c, ibd, n_exp, NULL, iname, false) != GS_OK) return GS_ERR;
    if (obd.n != ibd.n)
        return fail(c, "%ss %s and %ss %s have different lengths", oname, ints_text(c, obd), iname,
                    ints_text(c, ibd));
    for (int i = 0; i < ibd.n; i++) {
        if (ibd.v[i] == ivd)
            return fail(c, "%s %lld is the index_vector_dim", iname, (long long)ibd.v[i]);
        if (!dim_eq(op->dims[obd.v[i]], exp[ibd.v[i]]))
            return fail(c,
                        "batching dimension sizes differ: %s %lld of %s has %lld, %s %lld "
                        "has %lld",
                        oname, (long long)obd.v[i], sh(c, op), (long long)op->dims[obd.v[i]], iname,
                        (long long)ibd.v[i], (long long)exp[ibd.v[i]]);
    }
    return GS_OK;
}

static gs_status disjoint(ictx *c, gs_ints a, gs_ints b, const char *an, const char *bn) {
    for (int i = 0; i < a.n; i++)
        if (gs_ints_contains(b, a.v[i]))
            return fail(c, "dimension %lld is both a %s and a %s", (long long)a.v[i], an, bn);
    return GS_OK;
}

gs_status gs_infer_gather(ictx *c, gs_shape **out) {
    const gs_shape *op = opnd(c, 0), *ix = opnd(c, 1);
    if (!arr(op)) return fail(c, "operand must be an array, not %s", sh(c, op));
    gs_ints offset = gs_instr_ints(c->in, GS_ATTR_OFFSET_DIMS);
    gs_ints collapsed = gs_instr_ints(c->in, GS_ATTR_COLLAPSED_SLICE_DIMS);
    gs_ints sim = gs_instr_ints(c->in, GS_ATTR_START_INDEX_MAP);
    gs_ints obd = gs_instr_ints(c->in, GS_ATTR_OPERAND_BATCHING_DIMS);
    gs_ints ibd = gs_instr_ints(c->in, GS_ATTR_START_INDICES_BATCHING_DIMS);
    gs_ints sizes;
    int64_t ivd, exp[GS_MAX_RANK + 1];
    int n_exp;
    if (need_int(c, GS_ATTR_INDEX_VECTOR_DIM, &ivd) != GS_OK) return GS_ERR;
    if (expand_indices(c, ix, ivd, exp, &n_exp) != GS_OK) return GS_ERR;
    if (need_ints(c, GS_ATTR_SLICE_SIZES, &sizes) != GS_OK) return GS_ERR;
    int out_rank = offset.n + n_exp - 1;
    if (out_rank > GS_MAX_RANK)
        return fail(c, "result would have more than %d dimensions", GS_MAX_RANK);
    if (gs_infer_check_dims(c, offset, out_rank, NULL, "offset dimension", true) != GS_OK)
        return GS_ERR;
    if (!dim_eq(sim.n, exp[ivd]))
        return fail(c,
                    "start_index_map has %d entries, but the index vector (dimension %lld of "
                    "%s) has %lld",
                    sim.n, (long long)ivd, sh(c, ix), (long long)exp[ivd]);
    if (gs_infer_check_dims(c, sim, op->rank, op, "start_index_map entry", false) != GS_OK ||
        gs_infer_check_dims(c, collapsed, op->rank, op, "collapsed slice dimension", true) !=
            GS_OK ||
        gs_infer_check_dims(c, obd, op->rank, op, "operand batching dimension", true) != GS_OK ||
        disjoint(c, collapsed, obd, "collapsed slice dimension", "operand batching dimension") ||
        disjoint(c, sim, obd, "start_index_map entry", "operand batching dimension") ||
        check_batching(c, op, obd, "operand batching dimension", exp, n_exp, ivd, ibd,
                       "start indices batching dimension") != GS_OK)
        return GS_ERR;
    if (sizes.n != op->rank)
        return fail(c, "slice_sizes has %d entries, but the operand %s has rank %d", sizes.n,
                    sh(c, op), op->rank);
    if (offset.n + collapsed.n + obd.n != op->rank)
        return fail(c,
                    "offset_dims (%d), collapsed_slice_dims (%d) and operand_batching_dims "
                    "(%d) must together cover the %d operand dimensions",
                    offset.n, collapsed.n, obd.n, op->rank);
    for (int i = 0; i < sizes.n; i++) {
        if (sizes.v[i] < 0 || (op->dims[i] >= 0 && sizes.v[i] > op->dims[i]))
            return fail(c, "slice size %lld of dimension %d is out of range for %s",
                        (long long)sizes.v[i], i, sh(c, op));
        if ((gs_ints_contains(collapsed, i) || gs_ints_contains(obd, i)) && sizes.v[i] > 1)
            return fail(c,
                        "slice size of collapsed or batching dimension %d must be 0 or 1, "
                        "not %lld",
                        i, (long long)sizes.v[i]);
    }
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    int oi = 0, bi = 0;
    for (int i = 0; i < out_rank; i++) {
        if (gs_ints_contains(offset, i)) {
            while (gs_ints_contains(collapsed, oi) || gs_ints_contains(obd, oi)) oi++;
            dyn[i] = sizes.v[oi] == op->dims[oi] && dyn_at(op, oi);
            dims[i] = sizes.v[oi++];
        } else {
            if (bi == ivd) bi++;
            dyn[i] = bi < ix->rank && dyn_at(ix, bi);
            dims[i] = exp[bi++];
        }
    }
    return emit(c, out, new_array(c, op->type, out_rank, dims, dyn));
}

gs_status gs_infer_scatter(ictx *c, gs_shape **out) {
    int n_ops = c->in->n_operands;
    if (n_ops % 2 == 0)
        return fail(c, "takes operands, indices and as many updates (an odd count), not %d", n_ops);
    int n = n_ops / 2;
    const gs_shape *ix = opnd(c, n);
    gs_ints uwd = gs_instr_ints(c->in, GS_ATTR_UPDATE_WINDOW_DIMS);
    gs_ints iwd = gs_instr_ints(c->in, GS_ATTR_INSERTED_WINDOW_DIMS);
    gs_ints sdod = gs_instr_ints(c->in, GS_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS);
    gs_ints ibd = gs_instr_ints(c->in, GS_ATTR_INPUT_BATCHING_DIMS);
    gs_ints sibd = gs_instr_ints(c->in, GS_ATTR_SCATTER_INDICES_BATCHING_DIMS);
    int64_t ivd, exp[GS_MAX_RANK + 1];
    int n_exp;
    if (need_int(c, GS_ATTR_INDEX_VECTOR_DIM, &ivd) != GS_OK) return GS_ERR;
    if (expand_indices(c, ix, ivd, exp, &n_exp) != GS_OK) return GS_ERR;
    gs_type *types = GS_NEW_ARRAY(c->scratch, gs_type, 3 * n);
    if (!types) return oom(c);
    for (int k = 0; k < n; k++) {
        const gs_shape *op = opnd(c, k), *up = opnd(c, n + 1 + k);
        if (!arr(op) || !arr(up))
            return fail(c, "operand %d and its updates must be arrays, not %s and %s", k, sh(c, op),
                        sh(c, up));
        if (!gs_shape_dims_compatible(op, opnd(c, 0)))
            return fail(c, "operands %s and %s have different dimensions", sh(c, opnd(c, 0)),
                        sh(c, op));
        types[k] = op->type;
        types[n + k] = up->type;
        int64_t want_rank = n_exp - 1 + uwd.n;
        if (up->rank != want_rank)
            return fail(c, "updates %s must have rank %lld", sh(c, up), (long long)want_rank);
        if (gs_infer_check_dims(c, uwd, up->rank, up, "update window dimension", true) != GS_OK ||
            gs_infer_check_dims(c, iwd, op->rank, op, "inserted window dimension", true) != GS_OK ||
            gs_infer_check_dims(c, ibd, op->rank, op, "input batching dimension", true) != GS_OK ||
            disjoint(c, iwd, ibd, "inserted window dimension", "input batching dimension"))
            return GS_ERR;
        if (uwd.n + iwd.n + ibd.n != op->rank)
            return fail(c,
                        "update_window_dims (%d), inserted_window_dims (%d) and "
                        "input_batching_dims (%d) must together cover the %d operand dimensions",
                        uwd.n, iwd.n, ibd.n, op->rank);
        if (!dim_eq(sdod.n, exp[ivd]))
            return fail(c,
                        "scatter_dims_to_operand_dims has %d entries, but the index vector "
                        "(dimension %lld of %s) has %lld",
                        sdod.n, (long long)ivd, sh(c, ix), (long long)exp[ivd]);
        if (gs_infer_check_dims(c, sdod, op->rank, op, "scatter_dims_to_operand_dims entry",
                                false) ||
            disjoint(c, sdod, ibd, "scatter_dims_to_operand_dims entry",
                     "input batching dimension") ||
            check_batching(c, op, ibd, "input batching dimension", exp, n_exp, ivd, sibd,
                           "scatter indices batching dimension") != GS_OK)
            return GS_ERR;
        int w = 0;
        for (int i = 0; i < op->rank; i++) {
            if (gs_ints_contains(iwd, i) || gs_ints_contains(ibd, i)) continue;
            int64_t ud = up->dims[uwd.v[w++]];
            if (op->dims[i] >= 0 && ud > op->dims[i])
                return fail(c,
                            "update window dimension %lld of %s exceeds operand dimension %d "
                            "of %s",
                            (long long)uwd.v[w - 1], sh(c, up), i, sh(c, op));
        }
        int bi = 0;
        for (int i = 0; i < up->rank; i++) {
            if (gs_ints_contains(uwd, i)) continue;
            if (bi == ivd) bi++;
            if (!dim_eq(up->dims[i], exp[bi]))
                return fail(c,
                            "update scatter dimension %d of %s differs from dimension %d of "
                            "the indices %s",
                            i, sh(c, up), bi, sh(c, ix));
            bi++;
        }
    }
    const gs_computation *f;
    if (gs_infer_need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (gs_infer_check_reducer(c, f, "to_apply", n, types, types + n, types + 2 * n) != GS_OK)
        return GS_ERR;
    if (n == 1) return emit(c, out, copy_as(c, opnd(c, 0), opnd(c, 0)->type));
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n);
    if (!elems) return oom(c);
    for (int k = 0; k < n; k++) elems[k] = opnd(c, k);
    return emit(c, out, new_tuple(c, n, elems));
}
