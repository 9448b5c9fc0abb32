/*
 * factor.c — Shardy's basic factor propagation: for each factor, the longest list of major
 * axes that every tensor mapped to it agrees on (a tensor may have a prefix of it and no more),
 * cut at the first axis that conflicts with another factor's axes, a tensor's replicated or
 * unreduced axes, a closed or overflowing factor, or the factor's size; then every tensor whose
 * axes for the factor are a strict prefix of that list is expanded to it.
 */
#include "internal.h"

/* getCompatibleMajorAxesInternal: merges newer into result; returns can_expand. */
static bool compatible_major(sdy_axes *res, const sdy_axes *newer, bool can_expand) {
    sdy_axes old = *res, out = {0};
    int i = 0, j = 0;
    while (i < old.n && j < newer->n) {
        const gs_axis_ref *o = &old.v[i++], *n = &newer->v[j++];
        if (o->axis != n->axis) {
            *res = out;
            return false;
        }
        if (o->pre_size == n->pre_size && (o->pre_size == 0 || o->size == n->size)) {
            sdy_push(&out, n);
            continue;
        }
        if (sdy_prefix_of(n, o)) {
            if (j < newer->n) {
                sdy_push(&out, n);
                *res = out;
                return false;
            }
            sdy_push(&out, o);
        } else if (sdy_prefix_of(o, n)) {
            if (!can_expand || i < old.n) {
                sdy_push(&out, o);
                *res = out;
                return false;
            }
            sdy_push(&out, n);
        } else {
            *res = out;
            return false;
        }
    }
    for (; i < old.n; i++) sdy_push(&out, &old.v[i]);
    if (can_expand)
        for (; j < newer->n; j++) sdy_push(&out, &newer->v[j]);
    *res = out;
    return can_expand;
}

/* getCompatibleMajorAxes. */
static void compatible_axes(const sdy_projection *p, int f, sdy_direction dir, sdy_axes *out) {
    out->n = 0;
    if (dir == SDY_DIR_NONE) return;
    int n_t = p->n_operands + p->n_results;
    bool can_expand = true;
    /* first the tensors that may expand, then the others (conflicts only) */
    for (int pass = 0; pass < 2; pass++) {
        bool operands_first = dir != SDY_DIR_BACKWARD;
        bool want_operands = pass == 0 ? operands_first : !operands_first;
        if (pass == 1 && dir != SDY_DIR_BOTH) can_expand = false;
        for (int t = 0; t < n_t; t++) {
            if ((t < p->n_operands) != want_operands) continue;
            const sdy_factor_sh *fs = &p->t[t].f[f];
            if (fs->mapped) can_expand = compatible_major(out, &fs->axes, can_expand);
        }
    }
}

/* compatiblePrefixNoConflictsWithinFactor. */
static bool no_conflict_within(const gs_axis_ref *axis, const sdy_tensor_fs *t,
                               const sdy_factor_sh *fs, int64_t prev, int64_t fsize,
                               gs_axis_ref *out) {
    gs_axis_ref r;
    if (!sdy_prefix_without_overlap_list(axis, &t->replicated, &r) ||
        !sdy_prefix_without_overlap_list(&r, &t->unreduced, &r) ||
        !sdy_prefix_without_overlap_list(&r, &t->manual, &r))
        return false;
    for (int i = 0; i < fs->axes.n; i++)
        if (sdy_contains(&fs->axes.v[i], &r)) {
            *out = r;
            return true;
        }
    if (!fs->closed && fs->overflow.n == 0) {
        if (fs->minor_most) {
            *out = r;
            return true;
        }
        if (prev && fsize % prev == 0) {
            int64_t g = sdy_gcd(fsize / prev, r.size);
            if (g == r.size) {
                *out = r;
                return true;
            }
            if (g != 1) {
                out->axis = r.axis;
                out->pre_size = sdy_pre(&r);
                out->size = g;
                return true;
            }
        }
    }
    if (fs->axes.n && sdy_prefix_of(&fs->axes.v[fs->axes.n - 1], &r)) {
        *out = fs->axes.v[fs->axes.n - 1];
        return true;
    }
    return false;
}

/* compatiblePrefix over one tensor. */
static bool prefix_in_tensor(const gs_axis_ref *axis, const sdy_projection *p, int t, int f,
                             int64_t prev, int64_t fsize, gs_axis_ref *out) {
    const sdy_tensor_fs *tf = &p->t[t];
    gs_axis_ref r = *axis;
    for (int g = 0; g < p->n_factors; g++) {
        if (g == f || !tf->f[g].mapped) continue;
        if (!sdy_prefix_without_overlap_list(&r, &tf->f[g].overflow, &r) ||
            !sdy_prefix_without_overlap_list(&r, &tf->f[g].axes, &r))
            return false;
    }
    if (!tf->f[f].mapped) {
        *out = r;
        return true;
    }
    return no_conflict_within(&r, tf, &tf->f[f], prev, fsize, out);
}

/* truncateAxesByRemovingConflicts: keeps the axes up to the first whose conflict-free prefix
 * (fn) differs from it (that prefix included) or does not exist. */
typedef bool (*prefix_fn)(void *ctx, const gs_axis_ref *axis, int64_t prev, gs_axis_ref *out);

static void truncate_axes(sdy_axes *axes, prefix_fn fn, void *ctx, bool conservative) {
    int64_t prev = 1;
    for (int i = 0; i < axes->n; i++) {
        gs_axis_ref cur = axes->v[i], got;
        if (!fn(ctx, &cur, prev, &got) || (conservative && got.pre_size)) {
            axes->n = i;
            return;
        }
        if (!sdy_axis_eq(&got, &cur)) {
            axes->v[i] = got;
            axes->n = i + 1;
            return;
        }
        prev *= got.size;
    }
}

typedef struct conflict_ctx {
    const sdy_projection *p;
    int t;           /* the tensor (aggressive), or -1: every tensor (basic) */
    int f;           /* the factor */
    int64_t fsize;   /* its size */
} conflict_ctx;

/* compatiblePrefix over every tensor of the projection (basic). */
static bool prefix_all_tensors(void *ctx, const gs_axis_ref *axis, int64_t prev,
                               gs_axis_ref *out) {
    conflict_ctx *c = ctx;
    gs_axis_ref r = *axis;
    for (int t = 0; t < c->p->n_operands + c->p->n_results; t++)
        if (!prefix_in_tensor(&r, c->p, t, c->f, prev, c->fsize, &r)) return false;
    *out = r;
    return true;
}

/* compatiblePrefixNoConflictsWithinFactor for tensor c->t (aggressive). */
static bool prefix_within(void *ctx, const gs_axis_ref *axis, int64_t prev, gs_axis_ref *out) {
    conflict_ctx *c = ctx;
    const sdy_tensor_fs *tf = &c->p->t[c->t];
    return no_conflict_within(axis, tf, &tf->f[c->f], prev, c->fsize, out);
}

/* compatiblePrefixNoConflictsAcrossFactors for tensor c->t (aggressive). */
static bool prefix_across(void *ctx, const gs_axis_ref *axis, int64_t prev, gs_axis_ref *out) {
    (void)prev;
    conflict_ctx *c = ctx;
    const sdy_tensor_fs *tf = &c->p->t[c->t];
    gs_axis_ref r = *axis;
    for (int g = 0; g < c->p->n_factors; g++) {
        if (g == c->f || !tf->f[g].mapped) continue;
        if (!sdy_prefix_without_overlap_list(&r, &tf->f[g].overflow, &r) ||
            !sdy_prefix_without_overlap_list(&r, &tf->f[g].axes, &r))
            return false;
    }
    *out = r;
    return true;
}

void sdy_propagate_factors(sdy_projection *p, const gs_op_rule *r, const sdy_direction *dirs,
                           const gs_mesh *mesh, bool conservative, bool *updated) {
    (void)mesh;
    int n_t = p->n_operands + p->n_results;
    for (int f = 0; f < p->n_factors; f++) {
        sdy_axes axes;
        compatible_axes(p, f, dirs[f], &axes);
        conflict_ctx c = {p, -1, f, r->factors[f].size};
        truncate_axes(&axes, prefix_all_tensors, &c, conservative);
        for (int t = 0; t < n_t; t++) {
            sdy_factor_sh *fs = &p->t[t].f[f];
            if (!fs->mapped || !sdy_axes_strict_prefix(&fs->axes, &axes)) continue;
            fs->axes = axes;
            updated[t] = true;
        }
    }
}

/* Whether list x is a prefix of (or equal to) y (isAxisListPrefixOf != NOT_A_PREFIX). */
static bool prefix_or_equal(const sdy_axes *x, const sdy_axes *y) {
    return sdy_axes_eq(x, y) || sdy_axes_strict_prefix(x, y);
}

/* getPropagatedFactorSharding: the axes factor f of tensor t may grow to, or none (n = 0). */
static void propagated_axes(const sdy_projection *p, const gs_op_rule *r, int t, int f,
                            const sdy_axes *compatible, bool conservative, sdy_axes *out) {
    out->n = 0;
    const sdy_factor_sh *fs = &p->t[t].f[f];
    if (!fs->mapped) return;
    sdy_axes axes = *compatible;
    conflict_ctx c = {p, t, f, r->factors[f].size};
    truncate_axes(&axes, prefix_within, &c, conservative);
    if (!sdy_axes_strict_prefix(&fs->axes, &axes)) return;
    truncate_axes(&axes, prefix_across, &c, conservative);
    *out = axes;
}

bool sdy_propagate_factors_aggressive(gs_arena *a, sdy_projection *p, const gs_op_rule *r,
                                      const sdy_direction *dirs, bool conservative,
                                      bool elementwise, bool *updated) {
    int nf = p->n_factors, n_t = p->n_operands + p->n_results;
    if (nf == 0) return true;
    sdy_axes *axes = GS_NEW_ARRAY(a, sdy_axes, nf);
    int64_t *src_size = GS_NEW_ARRAY(a, int64_t, nf);
    int *src_index = GS_NEW_ARRAY(a, int, nf), *order = GS_NEW_ARRAY(a, int, nf);
    if (!axes || !src_size || !src_index || !order) return false;
    bool any = false;
    for (int f = 0; f < nf; f++) {
        compatible_axes(p, f, dirs[f], &axes[f]);
        any |= axes[f].n > 0;
    }
    if (!any) return true;
    /* the source of each factor's axes: the largest tensor already sharded that way */
    for (int f = 0; f < nf; f++) src_size[f] = -1, src_index[f] = -1, order[f] = f;
    for (int t = 0; t < n_t; t++) {
        int64_t size = 1;
        for (int f = 0; f < nf; f++)
            if (p->t[t].f[f].mapped) size *= r->factors[f].size;
        for (int f = 0; f < nf; f++) {
            const sdy_factor_sh *fs = &p->t[t].f[f];
            if (fs->mapped && axes[f].n && prefix_or_equal(&axes[f], &fs->axes) &&
                size > src_size[f]) {
                src_size[f] = size;
                src_index[f] = t;
            }
        }
    }
    /* larger source first, then (elementwise) more sharded, then smaller source, factor */
    for (int i = 1; i < nf; i++)
        for (int j = i; j > 0; j--) {
            int fa = order[j - 1], fb = order[j];
            int64_t ka[4] = {-src_size[fa], elementwise ? -sdy_axes_size(&axes[fa]) : 0,
                             src_index[fa], fa};
            int64_t kb[4] = {-src_size[fb], elementwise ? -sdy_axes_size(&axes[fb]) : 0,
                             src_index[fb], fb};
            int k = 0;
            while (k < 3 && ka[k] == kb[k]) k++;
            if (ka[k] <= kb[k]) break;
            order[j - 1] = fb;
            order[j] = fa;
        }
    /* results first, then operands */
    for (int pass = 0; pass < 2; pass++) {
        for (int t = 0; t < n_t; t++) {
            bool is_result = t >= p->n_operands;
            if (is_result != (pass == 0)) continue;
            bool changed = false;
            for (int k = 0; k < nf; k++) {
                int f = order[k];
                sdy_axes na;
                propagated_axes(p, r, t, f, &axes[f], conservative, &na);
                if (na.n == 0) continue;
                if (!is_result && elementwise)
                    for (int u = p->n_operands; u < n_t; u++) {
                        const sdy_factor_sh *rs = &p->t[u].f[f];
                        if (rs->mapped && sdy_axes_strict_prefix(&rs->axes, &na)) na = rs->axes;
                    }
                sdy_factor_sh *fs = &p->t[t].f[f];
                if (fs->mapped && sdy_axes_strict_prefix(&fs->axes, &na)) {
                    fs->axes = na;
                    changed = true;
                }
            }
            updated[t] = changed;
        }
    }
    return true;
}
