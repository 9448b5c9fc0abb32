/*
 * h_dot.c — dot, the way the GSPMD paper partitions einsums (§3.3, §4): in the dot's iteration
 * space, whose dims are the batch dims, the lhs's free (non-contracting) dims, the rhs's free
 * dims and the contracting dims, any tiling F gives a correct local computation:
 *
 *   lhs shard   = F without the rhs-free dims (they replicate the lhs)
 *   rhs shard   = F without the lhs-free dims
 *   local dot   = dot of the shards
 *   result      = F without the contracting dims, whose tiles become partial sums (an unreduced
 *                 subgroup) that the driver all-reduces, reduce-scatters, or keeps partial as the
 *                 instruction's sharding asks
 *
 * So the paper's cases are plans: batch-partitioned (F tiles batch dims), non-contracting on
 * either side (F tiles a free dim), contracting-partitioned (F tiles contracting dims: partial
 * sums), and 2D combinations (several at once). Candidate plans come from the result's sharding,
 * the operands' shardings, their compatible merges, and full replication; each is costed by the
 * bytes its reshards would move (a dry run of the reshard ladder), ties broken by local FLOPs,
 * and the cheapest is emitted. Padding of uneven contracting dims is masked to zero on both
 * operands.
 *
 * Convolution is the same planner over its own space: the batch is an lhs-free dim, the output
 * feature an rhs-free dim, the input feature contracts (with feature groups, the group is a
 * batch dim), a spatial dim of a trivial window (size 1, stride 1, no padding or dilation) acts
 * like an lhs-free dim, and the other spatial dims are windowed dims (the paper's spatial
 * partitioning): a plan may tile them like the result, and each device then reads the input
 * window its output shard needs — its own shard plus halos from its neighbours, several hops if
 * wider than a shard, padding filled with zeros — and convolves it locally without padding. The
 * halos' bytes count in the plan's cost. The kernel's spatial dims stay whole. With base (lhs)
 * dilation (the input gradient of a strided convolution) each device reads the input elements
 * its dilated window covers, when the windows start at the same phase of the dilation on every
 * device; else the dim is made whole.
 */
#include "internal.h"
#include "ir/analysis.h"

#include <string.h>

enum { MAX_PLANS = 12 };

/* The space of a dot (or a ragged-dot: its rhs group dim, if any, goes to space dim `group`,
 * which the caller sizes): batch dims, lhs free dims, rhs free dims, contracting dims, in that
 * order; the result's dims are the first nb + nm + nn, after `lead` leading dims of its own.
 * sp->ns must be set, sp->nf too when there is a group dim. */
static bool map_dot_space(const gs_instr *in, const gs_dot_dims *dd, int lead, int group,
                          gs_part_space *sp) {
    const gs_shape *l = in->operands[0]->shape, *r = in->operands[1]->shape;
    int rgd = dd->mode == GS_RAGGED_NON_CONTRACTING ? (int)dd->rg.v[0] : -1;
    sp->nb = dd->lb.n;
    sp->nk = dd->lc.n;
    sp->nm = l->rank - dd->lb.n - dd->lc.n;
    sp->nn = r->rank - dd->rb.n - dd->rc.n - (rgd >= 0);
    if (sp->nm < 0 || sp->nn < 0) return false;
    if (in->shape->rank != lead + sp->nb + sp->nm + sp->nn) return false;
    sp->lhs.rank = l->rank;
    sp->rhs.rank = r->rank;
    sp->out.rank = in->shape->rank;
    for (int i = 0; i < dd->lb.n; i++) {
        sp->lhs.to[dd->lb.v[i]] = i;
        sp->rhs.to[dd->rb.v[i]] = i;
        sp->size[i] = l->dims[dd->lb.v[i]];
    }
    int k0 = sp->nb + sp->nm + sp->nn;
    for (int i = 0; i < dd->lc.n; i++) {
        sp->lhs.to[dd->lc.v[i]] = k0 + i;
        sp->rhs.to[dd->rc.v[i]] = k0 + i;
        sp->size[k0 + i] = l->dims[dd->lc.v[i]];
    }
    int k = sp->nb;
    for (int d = 0; d < l->rank; d++)
        if (!gs_ints_contains(dd->lb, d) && !gs_ints_contains(dd->lc, d)) {
            sp->lhs.to[d] = k;
            sp->size[k++] = l->dims[d];
        }
    for (int d = 0; d < r->rank; d++) {
        if (d == rgd) {
            sp->rhs.to[d] = group;
        } else if (!gs_ints_contains(dd->rb, d) && !gs_ints_contains(dd->rc, d)) {
            sp->rhs.to[d] = k;
            sp->size[k++] = r->dims[d];
        }
    }
    for (int d = 0; d < k0; d++) sp->out.to[lead + d] = d;
    sp->n_lk = dd->lc.n;
    for (int i = 0; i < dd->lc.n; i++) {
        sp->lk[i] = (int)dd->lc.v[i];
        sp->rk[i] = (int)dd->rc.v[i];
    }
    return true;
}

static bool build_space(const gs_instr *in, gs_part_space *sp) {
    const gs_shape *l = in->operands[0]->shape, *r = in->operands[1]->shape;
    gs_dot_dims dd;
    if (!gs_dot_dims_of(in, &dd)) return false;
    memset(sp, 0, sizeof *sp);
    sp->ns = l->rank + r->rank - dd.lb.n - dd.rc.n;
    if (sp->ns > GS_MAX_RANK) return false;
    dd.mode = GS_RAGGED_NONE; /* a ragged batch dim: the plain dot */
    return map_dot_space(in, &dd, 0, -1, sp);
}

/* ragged-dot with a ragged non-contracting or contracting dim (k_dot.c has the semantics): the
 * dot's space, and one forced-whole dim last, the groups (the rhs's group dim, or the result's
 * leading dim); the ragged dim is whole too, since the groups are runs of it. So each device
 * computes a ragged-dot of its shards with the groups whole, as XLA's partitioner does once
 * Shardy's rule has made the operands agree; a split contracting dim sums partially. The group
 * sizes' prefix dims (batch dims, then the lhs free or contracting dims before the ragged one)
 * split as the lhs does: *gmap maps them. A ragged batch dim is a plain dot (build_space). */
static bool build_ragged_space(const gs_instr *in, gs_part_space *sp, gs_part_space_map *gmap) {
    const gs_shape *l = in->operands[0]->shape, *r = in->operands[1]->shape;
    const gs_shape *g = in->operands[2]->shape;
    gs_dot_dims dd;
    if (!gs_dot_dims_of(in, &dd) || dd.mode == GS_RAGGED_NONE || dd.mode == GS_RAGGED_BATCH ||
        !gs_shape_is_array(g) || g->rank < 1)
        return false;
    bool contracting = dd.mode == GS_RAGGED_CONTRACTING;
    memset(sp, 0, sizeof *sp);
    sp->nf = 1;
    sp->ns = l->rank + r->rank - dd.lb.n - dd.rc.n - (contracting ? 0 : 1) + 1;
    if (sp->ns > GS_MAX_RANK || sp->ns > 32) return false;
    int gdim = sp->ns - 1;
    if (!map_dot_space(in, &dd, contracting ? 1 : 0, gdim, sp)) return false;
    sp->size[gdim] = g->dims[g->rank - 1];
    if (contracting) sp->out.to[0] = gdim;
    sp->whole = 1u << sp->lhs.to[dd.ragged];
    /* The group sizes: [g], or [prefix..., g]. */
    gmap->rank = g->rank;
    gmap->to[g->rank - 1] = gdim;
    if (g->rank > 1) {
        int p = 0;
        for (int i = 0; i < dd.lb.n && p < g->rank - 1; i++) gmap->to[p++] = i;
        if (contracting)
            for (int i = 0; i < dd.lc.n && dd.lc.v[i] != dd.ragged && p < g->rank - 1; i++)
                gmap->to[p++] = sp->lhs.to[dd.lc.v[i]];
        else
            for (int d = 0; d < dd.ragged && p < g->rank - 1; d++)
                if (!gs_ints_contains(dd.lb, d) && !gs_ints_contains(dd.lc, d))
                    gmap->to[p++] = sp->lhs.to[d];
        if (p != g->rank - 1) return false;
    }
    return true;
}

/* XLA's block-scaled dot (custom-call `__op$block_scaled_dot`: lhs, rhs, lhs_scale, rhs_scale,
 * each scale one element per block of its operand): contracting the last dims, with dim 0 a
 * batch dim at rank 3. The scales split as their operands. */
static bool is_block_scaled_dot(const gs_instr *in) {
    const char *t = in->op == GS_OP_CUSTOM_CALL ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET) : NULL;
    return t && strcmp(t, "__op$block_scaled_dot") == 0;
}

static bool build_scaled_space(const gs_instr *in, gs_part_space *sp) {
    if (in->n_operands != 4) return false;
    const gs_shape *l = in->operands[0]->shape, *r = in->operands[1]->shape;
    int rank = l->rank;
    if ((rank != 2 && rank != 3) || r->rank != rank || in->shape->rank != rank) return false;
    for (int k = 2; k < 4; k++) {
        const gs_shape *sc = in->operands[k]->shape, *q = in->operands[k - 2]->shape;
        if (sc->rank != rank) return false;
        for (int i = 0; i < rank; i++)
            if (sc->dims[i] <= 0 || q->dims[i] % sc->dims[i]) return false;
    }
    memset(sp, 0, sizeof *sp);
    sp->nb = rank - 2;
    sp->nm = sp->nn = sp->nk = 1;
    sp->ns = sp->nb + 3;
    sp->lhs.rank = sp->rhs.rank = sp->out.rank = rank;
    if (rank == 3) {
        sp->lhs.to[0] = sp->rhs.to[0] = 0;
        sp->size[0] = l->dims[0];
    }
    sp->lhs.to[rank - 2] = sp->nb;
    sp->size[sp->nb] = l->dims[rank - 2];
    sp->rhs.to[rank - 2] = sp->nb + 1;
    sp->size[sp->nb + 1] = r->dims[rank - 2];
    sp->lhs.to[rank - 1] = sp->rhs.to[rank - 1] = sp->nb + 2;
    sp->size[sp->nb + 2] = l->dims[rank - 1];
    for (int d = 0; d < rank; d++) sp->out.to[d] = d;
    sp->n_lk = 1;
    sp->lk[0] = sp->rk[0] = rank - 1;
    return true;
}

/* A window dim that reads one input element per output element. */
static bool trivial_window(const gs_window_dim *w) {
    return w->size == 1 && w->stride == 1 && w->pad_lo == 0 && w->pad_hi == 0 &&
           w->lhs_dilate == 1 && w->rhs_dilate == 1 && !w->reversal;
}

/* A spatial dim that is a batch dim of a dot written as a convolution (XLA's
 * dot_as_convolution_util): the lhs of n elements base-dilated by n, a window of n (the kernel's
 * n) with stride n - 1, n outputs. Window j then meets lhs element j alone, at kernel position
 * j: out[j] = lhs[j] * kernel[j], so the three split alike with nothing to exchange. */
static bool parallel_window(const gs_window_dim *w, int64_t l, int64_t r, int64_t o) {
    return l > 1 && w->size == l && r == l && o == l && w->lhs_dilate == l &&
           w->stride == l - 1 && w->pad_lo == 0 && w->pad_hi == 0 && w->rhs_dilate == 1 &&
           !w->reversal;
}

/* The space of a convolution: [groups, parallel spatial dims, batch-like (lhs free) dims, out
 * feature, in feature, windowed, forced]. kernel_windowed picks which spatial dims the windowed
 * dims pair with the lhs's. */
static bool build_conv_space(const gs_instr *in, bool kernel_windowed, gs_part_space *sp) {
    const gs_attr *da = gs_instr_attr(in, GS_ATTR_DIM_LABELS);
    const gs_attr *wa = gs_instr_attr(in, GS_ATTR_WINDOW);
    int64_t g = gs_instr_int(in, GS_ATTR_FEATURE_GROUP_COUNT, 1);
    int64_t bg = gs_instr_int(in, GS_ATTR_BATCH_GROUP_COUNT, 1);
    if (!da || g < 1 || bg < 1 || (g > 1 && bg > 1)) return false;
    const gs_conv_dims *cd = da->u.conv;
    int ns = cd->n_spatial;
    if (wa && wa->u.window->n != ns) return false;
    const gs_shape *l = in->operands[0]->shape, *r = in->operands[1]->shape, *o = in->shape;
    if (l->rank != ns + 2 || r->rank != ns + 2 || o->rank != ns + 2) return false;
    memset(sp, 0, sizeof *sp);
    bool trivial[GS_MAX_RANK], par[GS_MAX_RANK];
    int nt = 0, np = 0;
    for (int i = 0; i < ns; i++) {
        trivial[i] = wa && trivial_window(&wa->u.window->dims[i]) &&
                     l->dims[cd->in_spatial[i]] == o->dims[cd->out_spatial[i]];
        par[i] = !trivial[i] && wa &&
                 parallel_window(&wa->u.window->dims[i], l->dims[cd->in_spatial[i]],
                                 r->dims[cd->k_spatial[i]], o->dims[cd->out_spatial[i]]);
        nt += trivial[i];
        np += par[i];
    }
    /* Space: m = batch + trivial spatial dims, n = out feature, k = in feature, then one
     * windowed dim per non-trivial spatial dim (the lhs's and the result's: tiled, each device
     * reads its window by halo exchange), then one forced dim per kernel spatial dim. With
     * feature groups, the features split by group are one batch-like dim G (space dim 0: the
     * lhs feature, the kernel's output feature and the result feature, tiled only by divisors of
     * the group count), and the kernel's per-group input feature is forced whole. With batch
     * groups (a grouped convolution's filter gradient), G is the lhs batch (its major factor is
     * the group), the kernel's output feature and the result feature; the input feature
     * contracts as usual, and the result batch (one group's batch) is forced whole. */
    sp->groups = g > 1 ? g : bg;
    sp->batch_groups = bg > 1;
    sp->nb = (sp->groups > 1) + np;
    sp->nm = (bg > 1 ? 0 : 1) + nt;
    sp->nn = sp->groups > 1 ? 0 : 1;
    sp->nk = g > 1 ? 0 : 1;
    sp->nh = ns - nt - np;
    sp->nf = ns - np + (sp->groups > 1);
    sp->ns = sp->nb + sp->nm + sp->nn + sp->nk + sp->nh + sp->nf;
    if (sp->ns > GS_MAX_RANK) return false;
    sp->lhs.rank = sp->rhs.rank = sp->out.rank = ns + 2;
    int m = sp->nb, h0 = sp->nb + sp->nm + sp->nn + sp->nk, h = h0, f0 = h0 + sp->nh;
    int fg = f0 + ns - np; /* the groups' forced dim */
    if (bg > 1) { /* the lhs batch is the group dim; the result batch forced whole */
        sp->lhs.to[cd->in_batch] = 0;
        sp->out.to[cd->out_batch] = fg;
        sp->size[fg] = o->dims[cd->out_batch];
    } else {
        sp->lhs.to[cd->in_batch] = m;
        sp->out.to[cd->out_batch] = m;
        sp->size[m++] = l->dims[cd->in_batch];
    }
    sp->kernel_windowed = kernel_windowed;
    if (kernel_windowed && nt + np == ns) return false; /* nothing windowed */
    sp->n_par = 0;
    for (int i = 0, fi = 0, pb = sp->groups > 1; i < ns; i++) {
        if (par[i]) {
            sp->lhs.to[cd->in_spatial[i]] = pb;
            sp->rhs.to[cd->k_spatial[i]] = pb;
            sp->out.to[cd->out_spatial[i]] = pb;
            sp->size[pb] = o->dims[cd->out_spatial[i]];
            sp->par_spatial[sp->n_par] = i;
            sp->par_dim[sp->n_par++] = pb++;
            continue;
        }
        int f = f0 + fi++;
        sp->rhs.to[cd->k_spatial[i]] = f;
        sp->size[f] = r->dims[cd->k_spatial[i]];
        if (trivial[i]) {
            sp->lhs.to[cd->in_spatial[i]] = m;
            sp->out.to[cd->out_spatial[i]] = m;
            sp->size[m++] = o->dims[cd->out_spatial[i]];
        } else {
            const gs_window_dim *w = wa ? &wa->u.window->dims[i] : NULL;
            sp->spatial[h - h0] = i;
            /* A reversed kernel split along its window pairs device t's kernel part with the
             * input window of part k-1-t: the kernel is reversed ahead (tiles in the reversed
             * order, as XLA's convolution handler reverses the rhs sharding), and the local
             * convolution then does not reverse it. */
            sp->halo_ok[h - h0] = w && w->stride >= 1 && w->lhs_dilate >= 1;
            if (kernel_windowed && w && w->reversal) sp->unreversed |= 1u << i;
            sp->lhs.to[cd->in_spatial[i]] = h;
            if (kernel_windowed) {
                /* The kernel's spatial dim pairs with the lhs's; the result's is whole. */
                sp->rhs.to[cd->k_spatial[i]] = h;
                sp->out.to[cd->out_spatial[i]] = f;
                sp->size[f] = o->dims[cd->out_spatial[i]];
                sp->size[h++] = r->dims[cd->k_spatial[i]];
            } else {
                sp->out.to[cd->out_spatial[i]] = h;
                sp->size[h++] = o->dims[cd->out_spatial[i]];
            }
        }
    }
    if (g > 1) {
        sp->lhs.to[cd->in_feature] = 0;
        sp->rhs.to[cd->k_out_feature] = 0;
        sp->out.to[cd->out_feature] = 0;
        sp->size[0] = o->dims[cd->out_feature];
        sp->rhs.to[cd->k_in_feature] = fg;
        sp->size[fg] = r->dims[cd->k_in_feature];
        sp->n_lk = 0;
        return true;
    }
    int n = sp->nb + sp->nm, k = n + sp->nn;
    if (bg > 1) {
        sp->rhs.to[cd->k_out_feature] = 0;
        sp->out.to[cd->out_feature] = 0;
        sp->size[0] = o->dims[cd->out_feature];
    } else {
        sp->rhs.to[cd->k_out_feature] = n;
        sp->out.to[cd->out_feature] = n;
        sp->size[n] = r->dims[cd->k_out_feature];
    }
    sp->lhs.to[cd->in_feature] = k;
    sp->rhs.to[cd->k_in_feature] = k;
    sp->size[k] = l->dims[cd->in_feature];
    sp->n_lk = 1;
    sp->lk[0] = (int)cd->in_feature;
    sp->rk[0] = (int)cd->k_in_feature;
    /* A kernel split along its window: the padding of its last part contributes nothing. */
    for (int i = 0; kernel_windowed && i < ns; i++)
        if (!trivial[i]) {
            sp->lk[sp->n_lk] = (int)cd->in_spatial[i];
            sp->rk[sp->n_lk++] = (int)cd->k_spatial[i];
        }
    return true;
}

/* A tensor's sharding lifted into the space (absent dims untiled). */
static const gs_sharding *lift(gs_part_ctx *c, const gs_part_space *sp, const gs_part_space_map *m,
                               const gs_sharding *s) {
    if (!gs_part_plain(s)) return NULL;
    gs_sharding *out = NULL;
    if (gs_sharding_broadcast(gs_part_arena(c), s, sp->ns, m->rank, m->to, &out) != GS_OK) {
        gs_part_oom(c);
        return NULL;
    }
    return out;
}

/* The space sharding F projected onto a tensor: absent dims replicated and dropped, the rest
 * transposed into the tensor's order. */
static const gs_sharding *project(gs_part_ctx *c, const gs_part_space *sp,
                                  const gs_part_space_map *m, const gs_sharding *f) {
    bool present[GS_MAX_RANK] = {0};
    for (int d = 0; d < m->rank; d++) present[m->to[d]] = true;
    int tiled[GS_MAX_RANK], nt = 0, na = 0;
    int64_t absent64[GS_MAX_RANK];
    for (int s = 0; s < sp->ns; s++)
        if (!present[s]) {
            absent64[na++] = s;
            if (gs_sharding_tiles_in_dim(f, s) > 1) tiled[nt++] = s;
        }
    const gs_sharding *r = gs_part_replicate_dims(c, f, nt, tiled);
    gs_sharding *dropped = NULL;
    if (gs_sharding_remove_dims(gs_part_arena(c), r, na, absent64, &dropped) != GS_OK || !dropped) {
        gs_part_oom(c);
        return f;
    }
    /* Position of each space dim among the present ones. */
    int rank_of[GS_MAX_RANK], k = 0;
    for (int s = 0; s < sp->ns; s++) rank_of[s] = present[s] ? k++ : -1;
    int perm[GS_MAX_RANK];
    bool id = true;
    for (int d = 0; d < m->rank; d++) {
        perm[d] = rank_of[m->to[d]];
        id = id && perm[d] == d;
    }
    if (id) return dropped;
    gs_sharding *t = NULL;
    if (gs_sharding_transpose(gs_part_arena(c), dropped, m->rank, perm, &t) != GS_OK || !t) {
        gs_part_oom(c);
        return dropped;
    }
    return t;
}

/* The result's sharding under F: contracting tiles become partial sums. */
static const gs_sharding *project_out(gs_part_ctx *c, const gs_part_space *sp,
                                      const gs_sharding *f) {
    int k0 = sp->nb + sp->nm + sp->nn;
    int tiled[GS_MAX_RANK], nt = 0;
    /* Contracting dims, and a kernel-windowed space's windowed dims, sum into the result. */
    int nsum = sp->nk + (sp->kernel_windowed ? sp->nh : 0);
    for (int i = 0; i < nsum; i++)
        if (gs_sharding_tiles_in_dim(f, k0 + i) > 1) tiled[nt++] = k0 + i;
    const gs_sharding *p = nt ? gs_part_make_unreduced(c, f, nt, tiled) : f;
    /* What is left is projected like an operand (the contracting dims, now untiled, drop). */
    return project(c, sp, &sp->out, p);
}

static void add_candidate(gs_part_ctx *c, const gs_part_space *sp, const gs_sharding *f,
                          const gs_sharding **v, int *n) {
    if (!f || !gs_part_plain(f) || *n >= MAX_PLANS) return;
    if (sp->nf > 0 || sp->whole) {
        int forced[GS_MAX_RANK], nfo = 0;
        for (int i = 0; i < sp->ns - sp->nf; i++)
            if (sp->whole >> i & 1) forced[nfo++] = i;
        for (int i = 0; i < sp->nf; i++) forced[nfo++] = sp->ns - sp->nf + i;
        /* Windowed dims that cannot take a halo are made whole too. */
        int h0 = sp->nb + sp->nm + sp->nn + sp->nk;
        for (int i = 0; i < sp->nh; i++)
            if (!sp->halo_ok[i]) forced[nfo++] = h0 + i;
        f = gs_part_replicate_dims(c, f, nfo, forced);
    }
    if (sp->groups > 1 && sp->groups % gs_sharding_tiles_in_dim(f, 0) != 0) {
        int g0 = 0;
        f = gs_part_replicate_dims(c, f, 1, &g0);
    }
    if (f->kind == GS_SHARDING_TILED && f->tiles.n != c->n) return;
    for (int i = 0; i < *n; i++)
        if (gs_sharding_equal(v[i], f)) return;
    v[(*n)++] = f;
}

static const gs_sharding *merge(gs_part_ctx *c, const gs_sharding *a, const gs_sharding *b) {
    if (!a || !b) return NULL;
    if (a->kind != GS_SHARDING_TILED) return b;
    if (b->kind != GS_SHARDING_TILED) return a;
    gs_sharding *out = NULL;
    if (gs_sharding_merge_compatible(gs_part_arena(c), a, 1, b, &out) != GS_OK) {
        gs_part_oom(c);
        return NULL;
    }
    return out;
}

/* XLA's merged strategies (a method groups the devices on its dims, and within each group the
 * next method tiles what the other operand tiles, on the group's own devices): base, with each
 * space dim that `other` tiles and base does not tiled as many ways over base's replicated
 * devices (the major part of each replication group), while they divide. NULL when nothing
 * is added. */
static const gs_sharding *extend(gs_part_ctx *c, const gs_part_space *sp, const gs_sharding *base,
                                 const gs_sharding *other) {
    if (!base || !other || base->kind != GS_SHARDING_TILED || other->kind != GS_SHARDING_TILED ||
        base->n_subgroups != 1 || base->subgroups[0] != GS_SUBGROUP_REPLICATED ||
        base->data_rank != sp->ns || other->data_rank != sp->ns)
        return NULL;
    int64_t left = base->tiles.dims[sp->ns];
    int add_dim[GS_MAX_RANK], k = 0;
    int64_t add_n[GS_MAX_RANK];
    for (int s = 0; s < sp->ns - sp->nf; s++) {
        /* The part of other's tiling the replicated devices left can take (XLA moves the rest
         * of it into replication first). */
        int64_t t = gs_gcd64(gs_sharding_tiles_in_dim(other, s), left);
        if (t <= 1 || gs_sharding_tiles_in_dim(base, s) > 1) continue;
        add_dim[k] = s;
        add_n[k++] = t;
        left /= t;
    }
    if (k == 0 || sp->ns + k + 1 > GS_MAX_TILE_RANK) return NULL;
    /* [d.., R] viewed as [d.., t_1..t_k, R/T], each t_i moved beside its (size 1) dim, merged. */
    int64_t dims[GS_MAX_TILE_RANK];
    int r = 0;
    for (int s = 0; s < sp->ns; s++) dims[r++] = base->tiles.dims[s];
    for (int i = 0; i < k; i++) dims[r++] = add_n[i];
    dims[r++] = left;
    gs_arena *a = gs_part_arena(c);
    gs_tile_assignment split, moved, merged;
    int perm[GS_MAX_TILE_RANK], np = 0;
    for (int s = 0; s < sp->ns; s++) {
        perm[np++] = s;
        for (int i = 0; i < k; i++)
            if (add_dim[i] == s) perm[np++] = sp->ns + i;
    }
    perm[np++] = sp->ns + k;
    int64_t out[GS_MAX_TILE_RANK];
    for (int s = 0; s < sp->ns; s++) out[s] = base->tiles.dims[s];
    for (int i = 0; i < k; i++) out[add_dim[i]] *= add_n[i];
    out[sp->ns] = left;
    if (gs_tile_reshape(a, &base->tiles, r, dims, &split) != GS_OK ||
        gs_tile_transpose(a, &split, perm, &moved) != GS_OK ||
        gs_tile_reshape(a, &moved, sp->ns + 1, out, &merged) != GS_OK) {
        gs_part_oom(c);
        return NULL;
    }
    gs_sharding *f = gs_sharding_partial(a, &merged);
    if (!f) gs_part_oom(c);
    return f;
}

/* The plain sharding a value would have once combined (partial) or spread (maximal). */
static const gs_sharding *as_plain(gs_part_ctx *c, const gs_sharding *s) {
    if (gs_part_plain(s)) return s;
    if (gs_part_unreduced_dim(s) != -1) return gs_part_reduced_form(c, s);
    return gs_sharding_replicated(gs_part_arena(c));
}

/* How windowed dim h of a convolution is read when the plan tiles it k ways: device tile t
 * computes outputs [t*so, (t+1)*so), which read the base-dilated, padded input positions
 * [a + t*step, a + t*step + len) (a = -pad_lo, step = so * stride). With base dilation D, only
 * every D-th position is an input element: the device reads input elements [a0 + t*step0,
 * a0 + t*step0 + cnt) along lhs dim `dim` (of size n) and convolves them with base dilation D
 * and the padding pad_lo/pad_hi that puts them where they were — which is the same on every
 * device only when step is a multiple of D (else `ok` is false). The first `live` tiles have
 * outputs. */
typedef struct window_read {
    int dim;
    int64_t n, a0, step, len, live, pad_lo, pad_hi;
    int64_t dil; /* > 1: the input is dilated locally first (gs_part_dilate_shard) and read in
                    dilated positions, the local window undilated */
    bool ok;
} window_read;

static window_read read_of(const gs_instr *in, const gs_part_space *sp, int h, int64_t k) {
    const gs_conv_dims *cd = gs_instr_attr(in, GS_ATTR_DIM_LABELS)->u.conv;
    const gs_window_dim *w = &gs_instr_attr(in, GS_ATTR_WINDOW)->u.window->dims[sp->spatial[h]];
    int i = sp->spatial[h];
    int64_t o = in->shape->dims[cd->out_spatial[i]], so = (o + k - 1) / k;
    int64_t eff = w->size > 0 ? (w->size - 1) * w->rhs_dilate + 1 : 0;
    int64_t d = w->lhs_dilate > 0 ? w->lhs_dilate : 1, a = -w->pad_lo, step = so * w->stride;
    int64_t len = (so - 1) * w->stride + eff, live = so ? (o + so - 1) / so : 0;
    if (sp->kernel_windowed) {
        /* Device t holds kernel positions [t*kw, (t+1)*kw) and computes every output from
         * them: it reads positions o*stride + (t*kw + j)*rhs_dilate - pad_lo. */
        int64_t kk = w->size, kw = (kk + k - 1) / k;
        step = kw * w->rhs_dilate;
        len = (kw - 1) * w->rhs_dilate + (o - 1) * w->stride + 1;
        live = kw ? (kk + kw - 1) / kw : 0;
    }
    window_read r;
    r.dim = (int)cd->in_spatial[i];
    r.n = in->operands[0]->shape->dims[r.dim];
    r.live = live;
    r.dil = 1;
    if (!sp->kernel_windowed && d > 1 && step % d != 0 && d <= k) {
        /* The windows' starts fall on holes in a pattern that does not repeat per tile: dilate
         * each shard locally and read the dilated positions. The local window then multiplies
         * the holes too, d times the work of a dilated window over 1/k of the output, so only
         * while d <= k (never more work than computing the dim whole). */
        r.dil = d;
        r.n = (r.n + k - 1) / k * d * k;
        r.a0 = a;
        r.step = step;
        r.len = len;
        r.pad_lo = r.pad_hi = 0;
        r.ok = len > 0;
        return r;
    }
    /* A kernel window split unevenly is cut into segments (segment_uneven), which needs
     * undilated inputs. */
    bool uneven_kernel = sp->kernel_windowed && w->size % k != 0 && d > 1;
    r.ok = step % d == 0 && len > 0 && !uneven_kernel;
    /* Input elements at dilated positions a .. a+len-1: the first at ceil(a/d), the last at
     * floor((a+len-1)/d). */
    int64_t first = -gs_part_floor_div(-a, d), last = gs_part_floor_div(a + len - 1, d);
    r.a0 = first;
    r.step = step / d;
    r.len = last - first + 1;
    if (r.len < 1) r.ok = false;
    r.pad_lo = first * d - a;
    r.pad_hi = len - r.pad_lo - (r.len - 1) * d - 1;
    return r;
}

/* Can tiled windowed dim h of plan f be read from an lhs that holds its dim whole (sharded as
 * src), each device slicing its window locally, as XLA slices a replicated input? Not for a
 * split kernel window or a base dilation made local. */
static bool reads_locally(const gs_instr *in, const gs_part_space *sp, const gs_sharding *f,
                          const gs_sharding *src, int h) {
    int h0 = sp->nb + sp->nm + sp->nn + sp->nk;
    int64_t k = gs_sharding_tiles_in_dim(f, h0 + h);
    if (k <= 1 || sp->kernel_windowed || !gs_part_plain(src)) return false;
    window_read r = read_of(in, sp, h, k);
    return r.ok && r.dil == 1 && gs_sharding_tiles_in_dim(src, r.dim) == 1;
}

/* Bytes the halo exchanges of plan f move per device (the lhs sharded as lhs; the windowed dims
 * read locally from src skipped), or -1 when some tiled windowed dim cannot be read by halo
 * exchange. */
static int64_t halo_bytes(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                          const gs_sharding *f, const gs_sharding *lhs, const gs_sharding *src) {
    int64_t bytes = 0;
    int h0 = sp->nb + sp->nm + sp->nn + sp->nk;
    for (int h = 0; h < sp->nh; h++) {
        int64_t k = gs_sharding_tiles_in_dim(f, h0 + h);
        if (k <= 1 || reads_locally(in, sp, f, src, h)) continue;
        window_read r = read_of(in, sp, h, k);
        int64_t L, R;
        if (!r.ok || !gs_part_halo_extent(lhs, r.dim, r.n, r.a0, r.step, r.len, r.live, &L, &R))
            return -1;
        const gs_shape *ls = gs_part_local_shape(c, in->operands[0]->shape, lhs);
        if (!ls || ls->dims[r.dim] == 0) continue;
        bytes += (L + R) * (gs_shape_bytes(ls) / ls->dims[r.dim]);
    }
    return bytes;
}

/* The lhs x (sharded as s) read into each device's windows along the tiled windowed dims: by
 * halo exchange, or sliced locally where s holds the dim whole. */
static gs_instr *read_windows(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                              const gs_sharding *f, gs_instr *x, const gs_sharding *s) {
    int h0 = sp->nb + sp->nm + sp->nn + sp->nk;
    for (int h = 0; h < sp->nh && x; h++) {
        int64_t k = gs_sharding_tiles_in_dim(f, h0 + h);
        if (k <= 1) continue;
        window_read r = read_of(in, sp, h, k);
        gs_instr *zero = gs_build_scalar_i(gs_part_builder(c), x->shape->type, 0);
        if (reads_locally(in, sp, f, s, h)) {
            x = gs_part_whole_window(c, x, f, h0 + h, r.dim, r.n, r.a0, r.step, r.len, r.live,
                                     zero);
            continue;
        }
        if (r.dil > 1)
            x = gs_part_dilate_shard(c, x, s, in->operands[0]->shape->dims, r.dim, r.dil, zero);
        /* Positions past the last window's end that start no window change nothing: without
         * dilation, fewer than a stride. */
        const gs_window_dim *w = &gs_instr_attr(in, GS_ATTR_WINDOW)->u.window->dims[sp->spatial[h]];
        int64_t slack = !sp->kernel_windowed && r.dil == 1 && w->lhs_dilate == 1 ? w->stride - 1 : 0;
        x = gs_part_halo_read_slack(c, x, s, r.dim, r.n, r.a0, r.step, r.len, r.live, zero, slack);
    }
    return x;
}

/* The local convolution reads its windows from the halo-extended input: along the tiled windowed
 * dims the padding is what puts the read elements where they were (none without base
 * dilation: the halo read filled it in). */
static void unpad_windows(gs_part_ctx *c, const gs_instr *in, gs_instr *conv,
                          const gs_part_space *sp, const gs_sharding *f) {
    const gs_attr *wa = conv ? gs_instr_attr(conv, GS_ATTR_WINDOW) : NULL;
    if (!wa) return;
    (void)c;
    gs_window *w = wa->u.window; /* the output module's own copy */
    for (int p = 0; p < sp->n_par; p++) {
        /* A parallel dim of n split k ways: the same form over the local ceil(n / k). */
        int64_t k = gs_sharding_tiles_in_dim(f, sp->par_dim[p]);
        if (k <= 1) continue;
        int64_t n = sp->size[sp->par_dim[p]], ln = (n + k - 1) / k;
        gs_window_dim *wd = &w->dims[sp->par_spatial[p]];
        wd->size = ln;
        wd->lhs_dilate = ln;
        wd->stride = ln > 1 ? ln - 1 : 1;
    }
    for (int i = 0; i < w->n; i++)
        if (sp->unreversed >> i & 1) w->dims[i].reversal = false;
    int h0 = sp->nb + sp->nm + sp->nn + sp->nk;
    for (int h = 0; h < sp->nh; h++) {
        int64_t k = gs_sharding_tiles_in_dim(f, h0 + h);
        if (k <= 1) continue;
        window_read r = read_of(in, sp, h, k);
        gs_window_dim *wd = &w->dims[sp->spatial[h]];
        wd->pad_lo = r.pad_lo;
        wd->pad_hi = r.pad_hi;
        if (r.dil > 1) wd->lhs_dilate = 1;
        if (sp->kernel_windowed) wd->size = (wd->size + k - 1) / k; /* this device's part */
    }
}

/* rhs value v of convolution `in` reversed along the kernel spatial dims of spatial dims
 * `mask` (bit i: spatial dim i), in its own sharding with their tile order reversed. */
static bool kernel_reversed(gs_part_ctx *c, const gs_instr *in, uint32_t mask,
                            const gs_part_value *v, gs_part_value *out) {
    const gs_conv_dims *cd = gs_instr_attr(in, GS_ATTR_DIM_LABELS)->u.conv;
    int dims[GS_MAX_RANK], n = 0;
    for (int i = 0; i < cd->n_spatial; i++)
        if (mask >> i & 1) dims[n++] = (int)cd->k_spatial[i];
    return gs_part_reverse_value(c, v, n, dims, NULL, out);
}

/* The device's local convolution (or dot) on operands ops: `in` with the local shape and its
 * windows unpadded (unpad_windows). Along kernel-windowed spatial dims split unevenly (a filter
 * gradient over a dim the devices hold unevenly), the last parts of the kernel are padding,
 * masked to zero; but the inputs a zero meets may be infinite, and 0 * inf is a NaN the reference never computes. So the local
 * convolution is cut along such dims into segments of local kernel positions that are, on each
 * device, all real or all padding ([0, p) and [p, kw), p the real positions of the one part
 * that has both); a device whose segment is all padding convolves zeros instead of its inputs,
 * and the segments' convolutions are summed. A segment reads lhs window positions
 * [b0 * rhs_dilate, (b1 - 1) * rhs_dilate + (o - 1) * stride + 1). Only for windows without
 * base dilation (read_of refuses the others). */
/* The local convolution's group count: the groups a device holds when space sharding f splits
 * them (the group dim tiles only by divisors of the count). */
static void set_local_groups(gs_part_ctx *c, const gs_part_space *sp, const gs_sharding *f,
                             gs_instr *conv) {
    int64_t k = gs_sharding_tiles_in_dim(f, 0);
    if (!conv || sp->groups <= 1 || k <= 1) return;
    gs_build_set_int(gs_part_builder(c), conv,
                     sp->batch_groups ? GS_ATTR_BATCH_GROUP_COUNT : GS_ATTR_FEATURE_GROUP_COUNT,
                     sp->groups / k);
}

static gs_instr *local_conv(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                            const gs_sharding *f, const gs_sharding *rs, const gs_shape *shape,
                            int n_ops, gs_instr *const *ops) {
    bool segment = sp->kernel_windowed && n_ops == 2 && ops[0] && ops[1] && shape;
    const gs_conv_dims *cd = NULL;
    const gs_window *gw = NULL;
    if (segment) {
        cd = gs_instr_attr(in, GS_ATTR_DIM_LABELS)->u.conv;
        gw = gs_instr_attr(in, GS_ATTR_WINDOW)->u.window;
    }
    int h0 = sp->nb + sp->nm + sp->nn + sp->nk;
    int sdim[GS_MAX_RANK], nu = 0;
    int64_t kwid[GS_MAX_RANK], real[GS_MAX_RANK], full[GS_MAX_RANK];
    for (int h = 0; segment && h < sp->nh; h++) {
        int64_t k = gs_sharding_tiles_in_dim(f, h0 + h);
        int i = sp->spatial[h];
        int64_t kk = gw->dims[i].size;
        if (k <= 1 || kk % k == 0) continue;
        sdim[nu] = i;
        full[nu] = kk;
        kwid[nu] = (kk + k - 1) / k;
        real[nu] = kk % kwid[nu]; /* 0: the parts are whole or empty */
        nu++;
    }
    if (nu == 0) { /* one convolution */
        gs_instr *conv = gs_part_clone(c, in, shape, n_ops, ops);
        unpad_windows(c, in, conv, sp, f);
        set_local_groups(c, sp, f, conv);
        return conv;
    }
    gs_builder *b = gs_part_builder(c);
    gs_instr *lx = ops[0], *rx = ops[1], *sum = NULL;
    gs_instr *zero = gs_build_scalar_i(b, lx->shape->type, 0);
    for (int combo = 0; combo < (1 << nu) && !c->failed; combo++) {
        int64_t lst[GS_MAX_RANK] = {0}, llim[GS_MAX_RANK], rst[GS_MAX_RANK] = {0},
                rlim[GS_MAX_RANK];
        memcpy(llim, lx->shape->dims, sizeof *llim * (size_t)lx->shape->rank);
        memcpy(rlim, rx->shape->dims, sizeof *rlim * (size_t)rx->shape->rank);
        gs_instr *pad = NULL; /* does this device hold only padding in the segment? */
        int64_t size[GS_MAX_RANK];
        bool skip = false;
        for (int u = 0; u < nu; u++) {
            bool second = combo >> u & 1;
            if (real[u] == 0 && second) skip = true; /* one segment only */
            int64_t b0 = second ? real[u] : 0, b1 = real[u] == 0 || second ? kwid[u] : real[u];
            const gs_window_dim *wd = &gw->dims[sdim[u]];
            int64_t o = in->shape->dims[cd->out_spatial[sdim[u]]];
            int li = (int)cd->in_spatial[sdim[u]], ri = (int)cd->k_spatial[sdim[u]];
            lst[li] = b0 * wd->rhs_dilate;
            llim[li] = (b1 - 1) * wd->rhs_dilate + (o - 1) * wd->stride + 1;
            rst[ri] = b0;
            rlim[ri] = b1;
            size[u] = b1 - b0;
            gs_instr *off = gs_part_shard_offset(c, rs, ri, kwid[u]);
            gs_instr *p = gs_build_compare(b, gs_part_add(c, off, gs_part_s32(c, b0)),
                                           gs_part_s32(c, full[u]), "GE");
            pad = pad ? gs_build_binary(b, GS_OP_OR, pad, p) : p;
        }
        if (skip) continue;
        gs_instr *l = gs_build_slice(b, lx, lst, llim, NULL);
        gs_instr *r = gs_build_slice(b, rx, rst, rlim, NULL);
        if (!l || !r || !pad) return NULL;
        l = gs_build_select(
            b,
            gs_part_bcast_scalar(c, pad, gs_shape_with_type(gs_part_arena(c), l->shape, GS_PRED)),
            gs_part_bcast_scalar(c, zero, l->shape), l);
        gs_instr *seg_ops[2] = {l, r};
        gs_instr *seg = gs_part_clone(c, in, shape, 2, seg_ops);
        unpad_windows(c, in, seg, sp, f);
        set_local_groups(c, sp, f, seg);
        const gs_attr *wa = seg ? gs_instr_attr(seg, GS_ATTR_WINDOW) : NULL;
        if (!wa) return NULL;
        for (int u = 0; u < nu; u++) wa->u.window->dims[sdim[u]].size = size[u];
        sum = sum ? gs_build_binary(b, GS_OP_ADD, sum, seg) : seg;
    }
    return sum;
}

/* Does space sharding f split every device's part along the batch dims only, or along the
 * contracting dims only (no replication), as XLA's base cases ask of operands it keeps? */
static bool in_place_full(gs_part_ctx *c, const gs_part_space *sp, const gs_sharding *f) {
    if (!f || f->kind != GS_SHARDING_TILED || f->n_subgroups || f->tiles.n != c->n || c->n < 2)
        return false;
    int64_t batch = 1, contr = 1;
    for (int s = 0; s < sp->ns; s++) {
        int64_t k = gs_sharding_tiles_in_dim(f, s);
        if (s < sp->nb) batch *= k;
        else if (s >= sp->nb + sp->nm + sp->nn && s < sp->nb + sp->nm + sp->nn + sp->nk)
            contr *= k;
    }
    return batch == c->n || contr == c->n;
}

/* Does plan f tile only the batch dims and one side's free dims, over every device, with that
 * side's free dims split at all? XLA's base case then keeps that operand and the result as they
 * are and replicates the other operand (within the batch groups), when the operand already
 * holds the result's split: *side gets 0 (lhs) or 1 (rhs). Dot-like spaces only (no windows). */
static bool one_side_split(gs_part_ctx *c, const gs_part_space *sp, const gs_sharding *f,
                           int *side) {
    if (!f || f->kind != GS_SHARDING_TILED || f->n_subgroups || f->tiles.n != c->n || c->n < 2 ||
        sp->nh > 0)
        return false;
    int64_t m = 1, n = 1, rest = 1;
    for (int s = sp->nb; s < sp->ns; s++) {
        int64_t k = gs_sharding_tiles_in_dim(f, s);
        if (s < sp->nb + sp->nm) m *= k;
        else if (s < sp->nb + sp->nm + sp->nn) n *= k;
        else rest *= k;
    }
    if (rest != 1 || (m > 1) == (n > 1)) return false;
    *side = m > 1 ? 0 : 1;
    return true;
}

/* Is result sharding `out` (maybe partial sums) t once its partial sums are summed, up to the
 * order of the devices? XLA's grouped cases keep operands in place where the result then needs
 * only that (an operand's free dims split as the result's, its contracting dims summed: an
 * all-reduce, and a collective-permute when the devices' order differs). */
static bool reduced_is(gs_part_ctx *c, const gs_sharding *out, const gs_sharding *t) {
    if (!gs_part_plain(t) || gs_part_unreduced_dim(t) != -1 || t->kind != GS_SHARDING_TILED)
        return false;
    const gs_sharding *r = gs_part_unreduced_dim(out) != -1 ? gs_part_reduced_form(c, out) : out;
    if (!r || r->kind != GS_SHARDING_TILED || r->tiles.rank != t->tiles.rank ||
        r->data_rank != t->data_rank || r->n_subgroups != t->n_subgroups)
        return false;
    for (int i = 0; i < t->tiles.rank; i++)
        if (r->tiles.dims[i] != t->tiles.dims[i]) return false;
    for (int i = 0; i < t->n_subgroups; i++)
        if (r->subgroups[i] != t->subgroups[i]) return false;
    return true;
}

/* Plan p for space sharding f: the operands' and the result's shardings, the bytes their
 * reshards and halos move (*lb, *rb, *ob, *hb) and the local FLOPs. False when no halo exchange
 * can read a window. */
static bool eval_plan(gs_part_ctx *c, const gs_instr *in, const gs_part_space *spp,
                      const gs_sharding *f, const gs_part_value *lv, const gs_part_value *rv,
                      const gs_sharding *ls, const gs_sharding *t, gs_part_space_plan *out,
                      int64_t *lb, int64_t *rb, int64_t *ob, int64_t *hb) {
    const gs_part_space sp = *spp;
    gs_part_space_plan p = {f, NULL, NULL, NULL, 0, 1, NULL};
    p.lhs = project(c, &sp, &sp.lhs, p.f);
    p.rhs = project(c, &sp, &sp.rhs, p.f);
    p.out = project_out(c, &sp, p.f);
    if (c->failed) return false;
    /* Windowed dims the lhs holds whole may stay whole: each device slices its window. Or
     * the lhs is resharded to the plan's tiling of them and reads its windows by halo
     * exchange (XLA's way): whichever moves fewer bytes, the local slices on a tie. */
    p.lhs_read = p.lhs;
    int whole[GS_MAX_RANK], nw = 0;
    int h0 = sp.nb + sp.nm + sp.nn + sp.nk;
    for (int h = 0; h < sp.nh; h++)
        if (reads_locally(in, &sp, p.f, ls, h))
            whole[nw++] = read_of(in, &sp, h, gs_sharding_tiles_in_dim(p.f, h0 + h)).dim;
    if (nw) p.lhs_read = gs_part_replicate_dims(c, p.lhs, nw, whole);
    *hb = sp.nh > 0 ? halo_bytes(c, in, &sp, p.f, p.lhs_read, ls) : 0;
    if (*hb < 0) return false; /* a window no halo exchange can read */
    *lb = gs_part_reshard_cost(c, lv->base, lv->sharding, lv->combiner, p.lhs_read);
    if (nw) {
        int64_t hb2 = halo_bytes(c, in, &sp, p.f, p.lhs, ls);
        int64_t lb2 = hb2 < 0 ? -1
                              : gs_part_reshard_cost(c, lv->base, lv->sharding, lv->combiner,
                                                     p.lhs);
        if (hb2 >= 0 && lb2 >= 0 && lb2 + hb2 < *lb + *hb) {
            p.lhs_read = p.lhs;
            *lb = lb2;
            *hb = hb2;
        }
    }
    *rb = gs_part_reshard_cost(c, rv->base, rv->sharding, rv->combiner, p.rhs);
    *ob = gs_part_reshard_cost(c, in->shape, p.out, GS_OP_ADD, t);
    p.bytes = *lb + *rb + *ob + *hb;
    for (int s = 0; s < sp.ns; s++) {
        int64_t k = gs_sharding_tiles_in_dim(p.f, s);
        p.flops *= (double)((sp.size[s] + k - 1) / k);
    }
    *out = p;
    return true;
}

const gs_sharding *gs_part_space_project(gs_part_ctx *c, const gs_part_space *sp,
                                         const gs_part_space_map *m, const gs_sharding *f) {
    return project(c, sp, m, f);
}

bool gs_part_plan_space(gs_part_ctx *c, const gs_instr *in, const gs_part_space *spp,
                        const gs_part_value *lv, const gs_part_value *rv, const gs_sharding *t,
                        gs_part_space_plan *out_plan) {
    const gs_part_space sp = *spp;
    /* Candidates: from the result, the operands (partial operands count as their combined
     * form), their merges, and full replication. */
    const gs_sharding *ls = as_plain(c, lv->sharding), *rs = as_plain(c, rv->sharding);
    const gs_sharding *fo = gs_part_plain(t) ? lift(c, &sp, &sp.out, t) : NULL;
    const gs_sharding *fl = gs_part_plain(ls) ? lift(c, &sp, &sp.lhs, ls) : NULL;
    const gs_sharding *fr = gs_part_plain(rs) ? lift(c, &sp, &sp.rhs, rs) : NULL;
    const gs_sharding *cands[MAX_PLANS];
    int nc = 0;
    add_candidate(c, &sp, fo, cands, &nc);
    add_candidate(c, &sp, merge(c, fl, fo), cands, &nc);
    add_candidate(c, &sp, merge(c, fr, fo), cands, &nc);
    add_candidate(c, &sp, merge(c, merge(c, fl, fr), fo), cands, &nc);
    add_candidate(c, &sp, merge(c, fl, fr), cands, &nc);
    add_candidate(c, &sp, fl, cands, &nc);
    add_candidate(c, &sp, fr, cands, &nc);
    add_candidate(c, &sp, extend(c, &sp, fl, fr), cands, &nc);
    add_candidate(c, &sp, extend(c, &sp, fr, fl), cands, &nc);
    /* An operand in place, the result's split taken on its replicated devices. */
    add_candidate(c, &sp, extend(c, &sp, fl, fo), cands, &nc);
    add_candidate(c, &sp, extend(c, &sp, fr, fo), cands, &nc);
    /* Whole operands (within each manual group, inside a partially manual region). */
    add_candidate(c, &sp,
                  c->manual ? lift(c, &sp, &sp.out, gs_part_replicated(c, in->shape))
                            : gs_sharding_replicated(gs_part_arena(c)),
                  cands, &nc);
    if (c->failed || nc == 0) return false;
    gs_part_space_plan best = {0}, windowed = {0}, inplace = {0}, matched = {0};
    int best_i = -1, windowed_i = -1, inplace_i = -1, matched_i = -1;
    for (int i = 0; i < nc; i++) {
        gs_part_space_plan p;
        int64_t lb, rb, ob, hb;
        if (!eval_plan(c, in, &sp, cands[i], lv, rv, ls, t, &p, &lb, &rb, &ob, &hb)) {
            if (c->failed) return false;
            continue;
        }
        if (best_i < 0 || p.bytes < best.bytes ||
            (p.bytes == best.bytes && p.flops < best.flops)) {
            best = p;
            best_i = i;
        }
        /* XLA's base cases: operands split alike over every device along the batch dims or
         * the contracting dims are used as they are (the result resharded after). */
        if (lb == 0 && rb == 0 && hb == 0 &&
            (in_place_full(c, &sp, cands[i]) || reduced_is(c, p.out, t)) &&
            (inplace_i < 0 || p.bytes < inplace.bytes)) {
            inplace = p;
            inplace_i = i;
        }
        /* XLA's next base cases: an operand whose free dims are split as the result is, over
         * every device (batch dims aside), stays in place with the result; the other operand
         * is replicated across those splits. */
        int side;
        if (ob == 0 && hb == 0 && one_side_split(c, &sp, cands[i], &side) &&
            (side == 0 ? lb : rb) == 0 && (matched_i < 0 || p.bytes < matched.bytes)) {
            matched = p;
            matched_i = i;
        }
        /* XLA loops over one operand where the other and the result stay as they are (the
         * result scattered by the loop itself in the scatter form). */
        int looped = -1;
        bool scatters = false;
        if (p.bytes > 0 && hb == 0 &&
            gs_part_windowed_applies(c, in, &sp, &p, t, &looped, &scatters) &&
            (scatters ? lb + rb == 0 : (looped == 0 ? rb : lb) == 0 && ob == 0) &&
            (windowed_i < 0 || p.bytes < windowed.bytes ||
             (p.bytes == windowed.bytes && p.flops < windowed.flops))) {
            windowed = p;
            windowed_i = i;
        }
    }
    if (c->failed || best_i < 0) return false;
    if (inplace_i >= 0) {
        best = inplace;
        best_i = inplace_i;
    } else if (matched_i >= 0) {
        best = matched;
        best_i = matched_i;
    }
    /* XLA partitions a gather or scatter by one method at a time, and within the device groups
     * one method leaves, the next method applies wherever an operand is still tiled: its
     * tiling is kept on the group's devices (collective-permuted there) rather than gathered.
     * So the plan is extended by what the other operand tiles on the replicated devices. */
    const gs_sharding *f3 = NULL;
    if (sp.compose && sp.third && gs_part_plain(as_plain(c, sp.third->sharding)))
        f3 = lift(c, &sp, &sp.third_map, as_plain(c, sp.third->sharding));
    if (sp.compose)
        for (int pass = 0; pass < 3; pass++) {
            const gs_sharding *ext = extend(c, &sp, best.f, pass == 0 ? fr : pass == 1 ? fl : f3);
            const gs_sharding *one[1];
            int n1 = 0;
            add_candidate(c, &sp, ext, one, &n1);
            gs_part_space_plan p;
            int64_t lb, rb, ob, hb;
            if (n1 && eval_plan(c, in, &sp, one[0], lv, rv, ls, t, &p, &lb, &rb, &ob, &hb))
                best = p;
            if (c->failed) return false;
        }
    /* As XLA, a windowed loop is preferred to a plan that moves data, but never one that
     * computes more: a loop that builds more of the result than the cheapest plan (a fuller
     * result sliced or summed afterwards) does the dot's work several times over. */
    *out_plan = windowed_i >= 0 && best.bytes > 0 && windowed.flops <= best.flops ? windowed
                                                                                   : best;
    return true;
}

/* A ragged-dot's local computation: a ragged-dot of the shards, the group sizes split as the
 * plan splits their prefix; with a ragged batch dim, a dot. */
static gs_instr *local_ragged(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                              const gs_part_space_map *gmap, const gs_sharding *f,
                              const gs_shape *shape, gs_instr *lx, gs_instr *rx) {
    gs_builder *b = gs_part_builder(c);
    if (gmap->rank == 0) { /* ragged batch: the plain dot */
        gs_instr *ops[2] = {lx, rx};
        gs_instr *d = gs_build(b, GS_OP_DOT, shape, 2, ops);
        for (int i = 0; d && i < in->n_attrs; i++)
            if (in->attrs[i].key != GS_ATTR_LHS_RAGGED_DIMS &&
                in->attrs[i].key != GS_ATTR_RHS_GROUP_DIMS)
                gs_build_copy_attr(b, d, &in->attrs[i], NULL, NULL);
        return d;
    }
    gs_part_value gv;
    gs_part_reshard(c, gs_part_operand(c, in, 2), gs_part_space_project(c, sp, gmap, f), &gv);
    gs_instr *ops[3] = {lx, rx, gv.hlo};
    return gv.hlo ? gs_part_clone(c, in, shape, 3, ops) : NULL;
}

bool gs_part_handle_dot(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out) {
    bool scaled = is_block_scaled_dot(in), ragged = in->op == GS_OP_RAGGED_DOT;
    if (in->n_operands != (scaled ? 4 : ragged ? 3 : 2) || !gs_type_is_array(in->shape->type))
        return false;
    gs_part_space sp;
    gs_part_space_map gmap = {0};
    if (ragged) {
        gs_dot_dims dd;
        bool batch = gs_dot_dims_of(in, &dd) && dd.mode == GS_RAGGED_BATCH;
        if (batch ? !build_space(in, &sp) : !build_ragged_space(in, &sp, &gmap)) return false;
    } else if (scaled ? !build_scaled_space(in, &sp)
               : in->op == GS_OP_CONVOLUTION ? !build_conv_space(in, false, &sp)
                                             : !build_space(in, &sp)) {
        return false;
    }
    const gs_part_value *lv = gs_part_operand(c, in, 0), *rv = gs_part_operand(c, in, 1);
    gs_part_space_plan best;
    if (!gs_part_plan_space(c, in, &sp, lv, rv, t, &best)) return false;
    for (int k = 0; scaled && k < 2; k++) {
        /* Each device's part of a blocked dim must hold whole blocks (with their scales). */
        const gs_shape *q = in->operands[k]->shape, *sc = in->operands[k + 2]->shape;
        const gs_sharding *os = k == 0 ? best.lhs : best.rhs;
        for (int i = 0; i < q->rank; i++)
            if (sc->dims[i] != q->dims[i] && sc->dims[i] % gs_sharding_tiles_in_dim(os, i) != 0)
                return false;
    }
    /* A convolution may also split its kernel window (the filter gradient's case), a
     * reversed kernel reversed ahead. */
    gs_part_space kw;
    gs_part_space_plan kbest;
    gs_part_value rev, rev_plan;
    if (in->op == GS_OP_CONVOLUTION && sp.nh > 0 && build_conv_space(in, true, &kw)) {
        /* Planned on the reversed kernel's sharding; reversed only when that plan is taken. */
        gs_part_value shape_only = {NULL, rv->base, rv->sharding, rv->combiner};
        bool ok = !kw.unreversed || kernel_reversed(c, in, kw.unreversed, &shape_only, &rev_plan);
        if (ok && gs_part_plan_space(c, in, &kw, lv, kw.unreversed ? &rev_plan : rv, t, &kbest) &&
            (kbest.bytes < best.bytes || (kbest.bytes == best.bytes && kbest.flops < best.flops))) {
            if (kw.unreversed) {
                if (!kernel_reversed(c, in, kw.unreversed, rv, &rev)) return false;
                rv = &rev;
            }
            sp = kw;
            best = kbest;
        }
    }
    if (c->failed) return false;
    if (!scaled && gs_part_windowed_dot(c, in, &sp, &best, t, out)) return true;
    if (c->failed) return false;
    /* Emit: operands resharded to the plan, contracting padding masked, the local dot. */
    gs_part_value l, r;
    gs_part_reshard(c, lv, best.lhs_read ? best.lhs_read : best.lhs, &l);
    gs_part_reshard(c, rv, best.rhs, &r);
    gs_instr *lx = l.hlo, *rx = r.hlo;
    if (lx && rx) {
        lx = gs_part_mask(c, lx, l.sharding, lv->base->dims, sp.n_lk, sp.lk, NULL);
        rx = gs_part_mask(c, rx, r.sharding, rv->base->dims, sp.n_lk, sp.rk, NULL);
        if (sp.nh > 0) lx = read_windows(c, in, &sp, best.f, lx, l.sharding);
    }
    gs_instr *ops[4] = {lx, rx, NULL, NULL};
    int n_ops = 2;
    if (scaled) { /* the scales split as their operands */
        gs_part_value ls, rs;
        gs_part_reshard(c, gs_part_operand(c, in, 2), best.lhs, &ls);
        gs_part_reshard(c, gs_part_operand(c, in, 3), best.rhs, &rs);
        ops[2] = ls.hlo;
        ops[3] = rs.hlo;
        n_ops = 4;
    }
    gs_type ty = in->shape->type;
    bool partial = gs_part_unreduced_dim(best.out) != -1 && gs_part_unreduced_dim(t) == -1;
    bool narrow = (ty == GS_BF16 || ty == GS_F16) && partial;
    /* An integer convolution saturates its sum (XLA's semantics): partial sums add up in s64
     * and are clamped once at the end. */
    bool saturating = in->op == GS_OP_CONVOLUTION && partial && gs_type_is_int(ty) &&
                      gs_type_size(ty) < 8;
    if (narrow || saturating) {
        /* Partial sums of a narrow float result travel and add up in f32, rounded once at
         * the end, as the single-device dot rounds once. */
        gs_shape *wide = gs_shape_with_type(gs_part_arena(c), in->shape, narrow ? GS_F32 : GS_S64);
        const gs_shape *ws = gs_part_local_shape(c, wide, best.out);
        gs_part_value p = {ragged ? local_ragged(c, in, &sp, &gmap, best.f, ws, lx, rx)
                                  : local_conv(c, in, &sp, best.f, r.sharding, ws, n_ops, ops),
                           wide, best.out, GS_OP_ADD};
        gs_part_value whole;
        gs_part_reshard(c, &p, t, &whole);
        gs_instr *w = whole.hlo;
        if (saturating && w) {
            gs_builder *b = gs_part_builder(c);
            int bits = 8 * gs_type_size(ty);
            bool sgn = gs_type_is_signed_int(ty);
            int64_t lo = sgn ? -((int64_t)1 << (bits - 1)) : 0;
            int64_t hi = sgn ? ((int64_t)1 << (bits - 1)) - 1 : ((int64_t)1 << bits) - 1;
            gs_instr *cl[3] = {gs_build_scalar_i(b, GS_S64, lo), w, gs_build_scalar_i(b, GS_S64, hi)};
            w = gs_build(b, GS_OP_CLAMP, w->shape, 3, cl);
        }
        out->hlo = gs_build_convert(gs_part_builder(c), w, ty);
        out->base = in->shape;
        out->sharding = whole.sharding;
        out->combiner = GS_OP_ADD;
        return out->hlo != NULL;
    }
    const gs_shape *ls = gs_part_local_shape(c, in->shape, best.out);
    out->hlo = ragged ? local_ragged(c, in, &sp, &gmap, best.f, ls, lx, rx)
                      : local_conv(c, in, &sp, best.f, r.sharding, ls, n_ops, ops);
    out->base = in->shape;
    out->sharding = best.out;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}
