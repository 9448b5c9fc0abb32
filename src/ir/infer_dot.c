/*
 * infer_dot.c — shape rules of the contractions: dot (batch, contracting and free dims; a
 * sparse dot's compressed operand), ragged-dot (group sizes, ragged and group dims) and
 * convolution (dim_labels, window, feature and batch group counts).
 */
#include "ir/infer.h"

/* XLA's dot dimension-number rules for one pair of operands. sparse: a sparse dot (metadata
 * operands follow), whose compressed operand has shorter contracting dims. */
static gs_status check_dot_dims(ictx *c, const gs_shape *l, const gs_shape *r, gs_ints lb,
                                gs_ints lc, gs_ints rb, gs_ints rc, bool sparse) {
    if (gs_infer_check_dims(c, lb, l->rank, l, "lhs batch dimension", false) != GS_OK ||
        gs_infer_check_dims(c, lc, l->rank, l, "lhs contracting dimension", false) != GS_OK ||
        gs_infer_check_dims(c, rb, r->rank, r, "rhs batch dimension", false) != GS_OK ||
        gs_infer_check_dims(c, rc, r->rank, r, "rhs contracting dimension", false) != GS_OK)
        return GS_ERR;
    for (int i = 0; i < lc.n; i++)
        if (gs_ints_contains(lb, lc.v[i]))
            return fail(c, "lhs dimension %lld is both a batch and a contracting dimension",
                        (long long)lc.v[i]);
    for (int i = 0; i < rc.n; i++)
        if (gs_ints_contains(rb, rc.v[i]))
            return fail(c, "rhs dimension %lld is both a batch and a contracting dimension",
                        (long long)rc.v[i]);
    if (lc.n != rc.n)
        return fail(c, "lhs has %d contracting dimensions, but rhs has %d", lc.n, rc.n);
    if (lb.n != rb.n) return fail(c, "lhs has %d batch dimensions, but rhs has %d", lb.n, rb.n);
    for (int i = 0; i < lc.n && !sparse; i++)
        if (!dim_eq(l->dims[lc.v[i]], r->dims[rc.v[i]]))
            return fail(c,
                        "contracting dimension sizes differ: lhs dimension %lld of %s and rhs "
                        "dimension %lld of %s",
                        (long long)lc.v[i], sh(c, l), (long long)rc.v[i], sh(c, r));
    for (int i = 0; i < lb.n; i++)
        if (!dim_eq(l->dims[lb.v[i]], r->dims[rb.v[i]]))
            return fail(c,
                        "batch dimension sizes differ: lhs dimension %lld of %s and rhs "
                        "dimension %lld of %s",
                        (long long)lb.v[i], sh(c, l), (long long)rb.v[i], sh(c, r));
    return GS_OK;
}

/* dot and ragged-dot: batch dims, then lhs free dims, then rhs free dims (element type of
 * lhs; verification compares dims only). */
gs_status gs_infer_dot(ictx *c, gs_shape **out) {
    const gs_shape *l = opnd(c, 0), *r = opnd(c, 1);
    if (!arr(l) || !arr(r))
        return fail(c, "lhs and rhs must be arrays, not %s and %s", sh(c, l), sh(c, r));
    gs_ints lb = gs_instr_ints(c->in, GS_ATTR_LHS_BATCH_DIMS);
    gs_ints lc = gs_instr_ints(c->in, GS_ATTR_LHS_CONTRACTING_DIMS);
    gs_ints rb = gs_instr_ints(c->in, GS_ATTR_RHS_BATCH_DIMS);
    gs_ints rc = gs_instr_ints(c->in, GS_ATTR_RHS_CONTRACTING_DIMS);
    gs_ints rg = {0, NULL};
    int64_t n_groups = -1; /* ragged-dot with a ragged contracting dim: leading group dim */
    if (c->in->op == GS_OP_RAGGED_DOT) {
        const gs_shape *g = opnd(c, 2);
        gs_ints lr;
        if (!arr(g) || !gs_type_is_int(g->type) || g->rank < 1)
            return fail(c, "group sizes must be an integer array, not %s", sh(c, g));
        if (need_ints(c, GS_ATTR_LHS_RAGGED_DIMS, &lr) != GS_OK) return GS_ERR;
        if (lr.n != 1)
            return fail(c, "lhs_ragged_dims must name one dimension, not %s", ints_text(c, lr));
        if (gs_infer_check_dims(c, lr, l->rank, l, "lhs ragged dimension", false) != GS_OK)
            return GS_ERR;
        rg = gs_instr_ints(c->in, GS_ATTR_RHS_GROUP_DIMS);
        if (gs_infer_check_dims(c, rg, r->rank, r, "rhs group dimension", false) != GS_OK)
            return GS_ERR;
        int64_t ragged = lr.v[0];
        bool batch = gs_ints_contains(lb, ragged), contracting = gs_ints_contains(lc, ragged);
        if (contracting) n_groups = g->dims[g->rank - 1];
        if ((batch || contracting) && rg.n != 0)
            return fail(c, "a ragged %s dimension takes no rhs group dimension, not %s",
                        batch ? "batch" : "contracting", ints_text(c, rg));
        if (!batch && !contracting && rg.n != 1)
            return fail(c, "a ragged non-contracting lhs dimension needs one rhs group dimension");
        if (rg.n == 1 && (gs_ints_contains(rb, rg.v[0]) || gs_ints_contains(rc, rg.v[0])))
            return fail(c, "rhs group dimension %lld is a batch or contracting dimension",
                        (long long)rg.v[0]);
        if (rg.n == 1 && !dim_eq(r->dims[rg.v[0]], g->dims[g->rank - 1]))
            return fail(c, "rhs group dimension %lld of %s does not match the %lld groups of %s",
                        (long long)rg.v[0], sh(c, r), (long long)g->dims[g->rank - 1], sh(c, g));
        /* group_sizes [prefix..., g]: the batch dims (before the ragged one, for a ragged
         * batch dim), then the free or contracting dims before the ragged one; or just [g]. */
        if (g->rank > 1) {
            int64_t want[GS_MAX_RANK];
            int np = 0;
            for (int i = 0; i < lb.n && !(batch && lb.v[i] == ragged); i++)
                want[np++] = lb.v[i];
            if (contracting)
                for (int i = 0; i < lc.n && lc.v[i] != ragged; i++) want[np++] = lc.v[i];
            else if (!batch)
                for (int d = 0; d < ragged; d++)
                    if (!gs_ints_contains(lb, d) && !gs_ints_contains(lc, d)) want[np++] = d;
            bool ok = g->rank == np + 1;
            for (int i = 0; ok && i < np; i++) ok = dim_eq(g->dims[i], l->dims[want[i]]);
            if (!ok)
                return fail(c,
                            "group sizes %s do not fit lhs %s: they are [g] or the lhs's "
                            "batch dims, then its %s dims before the ragged one, then [g]",
                            sh(c, g), sh(c, l), contracting ? "contracting" : "free");
        }
        if (n_groups >= 0 || batch) rg.n = 0;
    }
    bool sparse = c->in->op == GS_OP_DOT && c->in->n_operands > 2;
    if (check_dot_dims(c, l, r, lb, lc, rb, rc, sparse) != GS_OK) return GS_ERR;
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    int n = 0;
    int total = (n_groups >= 0) + l->rank - lc.n + r->rank - rc.n - rb.n - rg.n;
    if (total > GS_MAX_RANK)
        return fail(c, "result would have more than %d dimensions", GS_MAX_RANK);
    if (n_groups >= 0) {
        dyn[n] = false;
        dims[n++] = n_groups;
    }
    for (int i = 0; i < lb.n; i++) {
        dyn[n] = dyn_at(l, (int)lb.v[i]);
        dims[n++] = l->dims[lb.v[i]];
    }
    for (int i = 0; i < l->rank; i++)
        if (!gs_ints_contains(lb, i) && !gs_ints_contains(lc, i)) {
            dyn[n] = dyn_at(l, i);
            dims[n++] = l->dims[i];
        }
    for (int i = 0; i < r->rank; i++)
        if (!gs_ints_contains(rb, i) && !gs_ints_contains(rc, i) && !gs_ints_contains(rg, i)) {
            dyn[n] = dyn_at(r, i);
            dims[n++] = r->dims[i];
        }
    return emit(c, out, new_array(c, l->type, n, dims, dyn));
}

gs_status gs_infer_convolution(ictx *c, gs_shape **out) {
    const gs_shape *l = opnd(c, 0), *r = opnd(c, 1);
    const gs_attr *at;
    if (!arr(l) || !arr(r))
        return fail(c, "lhs and rhs must be arrays, not %s and %s", sh(c, l), sh(c, r));
    int64_t fgc = gs_instr_int(c->in, GS_ATTR_FEATURE_GROUP_COUNT, 1);
    int64_t bgc = gs_instr_int(c->in, GS_ATTR_BATCH_GROUP_COUNT, 1);
    if (fgc <= 0) return fail(c, "feature_group_count must be positive, not %lld", (long long)fgc);
    if (bgc <= 0) return fail(c, "batch_group_count must be positive, not %lld", (long long)bgc);
    if (fgc > 1 && bgc > 1)
        return fail(c, "feature_group_count %lld and batch_group_count %lld cannot both exceed 1",
                    (long long)fgc, (long long)bgc);
    if (need_attr(c, GS_ATTR_DIM_LABELS, &at) != GS_OK) return GS_ERR;
    const gs_conv_dims *cd = at->u.conv;
    int ns = cd->n_spatial;
    const gs_attr *wa = attr(c, GS_ATTR_WINDOW);
    gs_window none = {0, NULL};
    const gs_window *w = wa ? wa->u.window : &none;
    if (w->n != ns)
        return fail(c, "window has %d dimensions, but dim_labels has %d spatial dimensions", w->n,
                    ns);
    if (l->rank != cd->in_rank)
        return fail(c, "lhs %s has rank %d, but dim_labels describes rank %d", sh(c, l), l->rank,
                    cd->in_rank);
    if (r->rank != cd->k_rank)
        return fail(c, "rhs %s has rank %d, but dim_labels describes rank %d", sh(c, r), r->rank,
                    cd->k_rank);
    if (cd->out_rank != ns + 2)
        return fail(c, "dim_labels output has rank %d, expected %d", cd->out_rank, ns + 2);
    int64_t in_f = l->dims[cd->in_feature], in_b = l->dims[cd->in_batch];
    int64_t k_in = r->dims[cd->k_in_feature], k_out = r->dims[cd->k_out_feature];
    if (k_out >= 0 && k_out % bgc != 0)
        return fail(c,
                    "kernel output features (%lld) must be a multiple of batch_group_count "
                    "%lld",
                    (long long)k_out, (long long)bgc);
    bool sparse = c->in->n_operands > 2; /* sparsity metadata: the kernel is compressed */
    if (in_f >= 0 && k_in >= 0 && !sparse && (in_f % fgc != 0 || in_f / fgc != k_in))
        return fail(c,
                    "lhs features (%lld) must equal kernel input features (%lld) times "
                    "feature_group_count (%lld)",
                    (long long)in_f, (long long)k_in, (long long)fgc);
    if (k_out >= 0 && k_out % fgc != 0)
        return fail(c,
                    "kernel output features (%lld) must be a multiple of feature_group_count "
                    "%lld",
                    (long long)k_out, (long long)fgc);
    if (in_b >= 0 && in_b % bgc != 0)
        return fail(c, "lhs batch (%lld) must be a multiple of batch_group_count %lld",
                    (long long)in_b, (long long)bgc);
    int64_t base[GS_MAX_RANK], sp[GS_MAX_RANK], dims[GS_MAX_RANK];
    for (int i = 0; i < ns; i++) {
        int64_t k = r->dims[cd->k_spatial[i]];
        if (!dim_eq(w->dims[i].size, k))
            return fail(c,
                        "window size %lld of spatial dimension %d does not match the kernel "
                        "%s",
                        (long long)w->dims[i].size, i, sh(c, r));
        base[i] = l->dims[cd->in_spatial[i]];
    }
    if (gs_infer_window_out(c, w, base, sp) != GS_OK) return GS_ERR;
    dims[cd->out_batch] = in_b < 0 ? -1 : in_b / bgc;
    dims[cd->out_feature] = k_out;
    for (int i = 0; i < ns; i++) dims[cd->out_spatial[i]] = sp[i];
    return emit(c, out, new_array(c, l->type, ns + 2, dims, NULL));
}
