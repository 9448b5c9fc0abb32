/*
 * h_gather.c — gather and scatter, XLA's strategies (gather_scatter_handler.cc) expressed as
 * plans in an iteration space, chosen by the same planner as dot (gs_part_plan_space):
 *
 * gather (lhs = operand, rhs = indices):
 *   b  batching dims (operand_batching_dims with start_indices_batching_dims): shared, local;
 *   n  the indices' other dims (the result's batch dims): index-parallel, each device gathers
 *      for its own indices;
 *   m  operand dims sliced whole (passthrough): each device gathers from its own slice;
 *   k  indexed dims sliced one element at a time (collapsed, or kept as a dim of 1: XLA's
 *      trivially sliced dims): operand-parallel — each device gathers at the
 *      index made local (after XLA's clamp), zeroes the rows another device holds, and the
 *      result is a partial value the driver all-reduces (Megatron's vocab-parallel embedding);
 *   forced: partially sliced dims and the index vector dim stay whole.
 *
 * scatter (lhs = operand, rhs = updates; the indices follow the updates' scatter dims):
 *   b  batching dims and window dims the updates cover whole: local;
 *   m  inserted (indexed, size-1 window) dims: each device scatters into its own shard at the
 *      index made local; out-of-range windows are skipped by scatter's own semantics;
 *   k  the updates' scatter dims: each device scatters its share of the updates into the
 *      combiner's identity, the partial results are combined across devices by an all-reduce
 *      with the combiner, and then with the operand (add, multiply, max, min, and, or; an
 *      overwrite cannot split its updates);
 *   forced: partial windows and the index vector dim stay whole.
 *
 * Any other combiner, or a layout the space cannot express, takes the default action (warned).
 */
#include "internal.h"

#include "ir/analysis.h"

#include <string.h>

/* ------------------------------------------------------------------ gather */

/* The batching pairs of a gather or scatter: operand dim op.v[i] with indices dim ix.v[i], the
 * explicit ones (operand/input and indices batching dims), then the implicit ones. */
typedef struct batch_pairs {
    gs_ints op, ix;
    int n_implicit;                            /* pairs at the end that are implicit */
    int64_t op_v[GS_MAX_RANK], ix_v[GS_MAX_RANK]; /* storage of op and ix */
} batch_pairs;

typedef struct gather_dims {
    gs_ints offset, collapsed, start_map, sizes;
    batch_pairs pairs;
    int64_t ivd; /* index vector dim (== indices rank: implicit) */
} gather_dims;

/* ------------------------------------------------------------------ implicit parallel dims */

/* The partitioner's view of the source graph for gs_gather_iota_parallel: a Sharding
 * custom-call stands for its operand, and computations know their callers. */
static const gs_instr *walk_operand(const gs_instr *in, int i, void *ud) {
    (void)ud;
    const gs_instr *op = in->operands[i];
    for (int depth = 0; depth < 64 && op->op == GS_OP_CUSTOM_CALL && op->n_operands == 1; depth++) {
        const char *t = gs_instr_str(op, GS_ATTR_CUSTOM_CALL_TARGET);
        if (!t || strcmp(t, "Sharding") != 0) break;
        op = op->operands[0];
    }
    return op;
}

static const gs_instr *walk_caller(const gs_instr *in, void *ud) {
    return gs_part_caller(ud, in);
}

/* The explicit pairs (op, ix: the batching dims' attributes) and then the implicit ones
 * (indices that count along a dim address a collapsed operand dim of that size, as XLA's
 * GetGatherScatterBatchParallelDims finds them): each device then works on its own rows, its
 * index made local by a subtraction. False when the explicit ones do not pair up. */
static bool read_pairs(gs_part_ctx *c, gs_ints op, gs_ints ix, const gs_instr *indices,
                       int64_t ivd, gs_ints index_map, const gs_shape *operand,
                       const int64_t *slice, gs_ints collapsed, batch_pairs *p) {
    p->op = op;
    p->ix = ix;
    p->n_implicit = 0;
    if (op.n != ix.n || op.n > GS_MAX_RANK) return false;
    for (int i = 0; i < op.n; i++) {
        p->op_v[i] = op.v[i];
        p->ix_v[i] = ix.v[i];
    }
    int n = op.n;
    int64_t od[GS_MAX_RANK], xd[GS_MAX_RANK];
    gs_ir_walk w = {walk_operand, walk_caller, c};
    int k = n < GS_MAX_RANK
                ? gs_gather_iota_parallel(&w, indices, ivd, index_map, ix, operand, slice, od, xd)
                : 0;
    for (int i = 0; i < k && n < GS_MAX_RANK; i++) {
        if (!gs_ints_contains(collapsed, od[i])) continue; /* a size-1 offset dim stays whole */
        p->op_v[n] = od[i];
        p->ix_v[n++] = xd[i];
        p->n_implicit++;
    }
    p->op = (gs_ints){n, p->op_v};
    p->ix = (gs_ints){n, p->ix_v};
    return true;
}

/* Whether operand dim d is the operand side of an implicit pair. */
static bool implicit_dim(const batch_pairs *p, int64_t d) {
    for (int i = p->op.n - p->n_implicit; i < p->op.n; i++)
        if (p->op.v[i] == d) return true;
    return false;
}

/* False when the dims do not fit together. */
static bool read_gather(gs_part_ctx *c, const gs_instr *in, gather_dims *g) {
    g->offset = gs_instr_ints(in, GS_ATTR_OFFSET_DIMS);
    g->collapsed = gs_instr_ints(in, GS_ATTR_COLLAPSED_SLICE_DIMS);
    g->start_map = gs_instr_ints(in, GS_ATTR_START_INDEX_MAP);
    g->sizes = gs_instr_ints(in, GS_ATTR_SLICE_SIZES);
    g->ivd = gs_instr_int(in, GS_ATTR_INDEX_VECTOR_DIM, in->operands[1]->shape->rank);
    const gs_shape *a = in->operands[0]->shape;
    return g->sizes.n == a->rank &&
           read_pairs(c, gs_instr_ints(in, GS_ATTR_OPERAND_BATCHING_DIMS),
                      gs_instr_ints(in, GS_ATTR_START_INDICES_BATCHING_DIMS), in->operands[1],
                      g->ivd, g->start_map, a, g->sizes.v, g->collapsed, &g->pairs);
}

/* Space: [b: batching pairs] [m: whole-sliced operand dims] [n: other index dims] [k: indexed
 * dims sliced one element at a time] [forced: other operand dims, then the index vector dim]. */
static bool gather_space(const gs_instr *in, const gather_dims *g, gs_part_space *sp) {
    const gs_shape *a = in->operands[0]->shape, *ix = in->operands[1]->shape, *o = in->shape;
    if (a->rank + ix->rank + 1 > GS_MAX_RANK) return false;
    memset(sp, 0, sizeof *sp);
    sp->groups = 1;
    sp->compose = true;
    int ri = ix->rank;
    /* Output dims: offset dims in order take the operand's non-collapsed, non-batching dims;
     * the others the indices' dims other than the index vector dim, in order. */
    int op_of_offset[GS_MAX_RANK], ix_of_batch[GS_MAX_RANK], no = 0, nbo = 0;
    for (int d = 0; d < a->rank; d++)
        if (!gs_ints_contains(g->collapsed, d) && !gs_ints_contains(g->pairs.op, d))
            op_of_offset[no++] = d;
    for (int d = 0; d < ri; d++)
        if (d != g->ivd) ix_of_batch[nbo++] = d;
    if (no != g->offset.n || no + nbo != o->rank) return false;
    int out_of_op[GS_MAX_RANK], out_of_ix[GS_MAX_RANK];
    for (int d = 0; d < a->rank; d++) out_of_op[d] = -1;
    for (int d = 0; d < ri; d++) out_of_ix[d] = -1;
    for (int i = 0, j = 0, od = 0; od < o->rank; od++) {
        if (gs_ints_contains(g->offset, od))
            out_of_op[op_of_offset[i++]] = od;
        else
            out_of_ix[ix_of_batch[j++]] = od;
    }
    /* Classify. */
    int kind_op[GS_MAX_RANK]; /* 0 b, 1 m, 2 k, 3 forced */
    int kind_ix[GS_MAX_RANK]; /* 0 b, 1 n, 3 forced */
    int pair_of_op[GS_MAX_RANK];
    for (int d = 0; d < a->rank; d++) {
        pair_of_op[d] = gs_ints_index(g->pairs.op, d);
        if (pair_of_op[d] >= 0)
            kind_op[d] = 0;
        else if (gs_ints_contains(g->start_map, d) && g->sizes.v[d] == 1 && a->dims[d] > 1)
            kind_op[d] = 2; /* a one-element slice, collapsed or kept as a dim of 1 */
        else if (gs_ints_contains(g->collapsed, d))
            kind_op[d] = 3;
        else
            kind_op[d] = g->sizes.v[d] == a->dims[d] ? 1 : 3;
    }
    for (int d = 0; d < ri; d++)
        kind_ix[d] = d == g->ivd ? 3 : gs_ints_contains(g->pairs.ix, d) ? 0 : 1;
    int cnt[4] = {0};
    for (int d = 0; d < a->rank; d++) cnt[kind_op[d]]++;
    int nn = 0;
    for (int d = 0; d < ri; d++) nn += kind_ix[d] == 1;
    sp->nb = cnt[0];
    sp->nm = cnt[1];
    sp->nn = nn;
    sp->nk = cnt[2];
    sp->nf = cnt[3] + (g->ivd < ri);
    sp->ns = sp->nb + sp->nm + sp->nn + sp->nk + sp->nf;
    if (sp->ns > GS_MAX_RANK) return false;
    sp->lhs.rank = a->rank;
    sp->rhs.rank = ri;
    sp->out.rank = o->rank;
    int next[4] = {0, sp->nb, sp->nb + sp->nm + sp->nn, sp->nb + sp->nm + sp->nn + sp->nk};
    /* Batching pairs in pair order share one dim each. */
    for (int d = 0; d < a->rank; d++) {
        int s;
        switch (kind_op[d]) {
        case 0: s = pair_of_op[d]; break;
        case 1: s = next[1]++; break;
        case 2: s = next[2]++; break;
        default: s = next[3]++; break;
        }
        sp->lhs.to[d] = s;
        sp->size[s] = kind_op[d] == 3 && out_of_op[d] >= 0 ? o->dims[out_of_op[d]] : a->dims[d];
        if (out_of_op[d] >= 0) sp->out.to[out_of_op[d]] = s;
    }
    int nidx = sp->nb + sp->nm;
    for (int d = 0; d < ri; d++) {
        int s;
        if (kind_ix[d] == 0)
            s = gs_ints_index(g->pairs.ix, d);
        else if (kind_ix[d] == 1)
            s = nidx++;
        else
            s = next[3]++;
        sp->rhs.to[d] = s;
        if (kind_ix[d] != 0) sp->size[s] = ix->dims[d];
        if (out_of_ix[d] >= 0) sp->out.to[out_of_ix[d]] = s;
    }
    return true;
}

/* Component j of indices x (along the index vector dim ivd; the whole of x when implicit). */
static gs_instr *component(gs_part_ctx *c, gs_instr *x, int64_t ivd, int j) {
    if (ivd >= x->shape->rank) return x;
    int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
    memcpy(lim, x->shape->dims, sizeof *lim * (size_t)x->shape->rank);
    st[ivd] = j;
    lim[ivd] = j + 1;
    return gs_build_slice(gs_part_builder(c), x, st, lim, NULL);
}

/* Indices x with component j replaced by v (same shape as the component). */
static gs_instr *replace_component(gs_part_ctx *c, gs_instr *x, int64_t ivd, int j, gs_instr *v) {
    if (ivd >= x->shape->rank) return v;
    int n = (int)x->shape->dims[ivd];
    gs_instr *parts[GS_MAX_RANK];
    int np = 0;
    if (j > 0) {
        int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
        memcpy(lim, x->shape->dims, sizeof *lim * (size_t)x->shape->rank);
        lim[ivd] = j;
        parts[np++] = gs_build_slice(gs_part_builder(c), x, st, lim, NULL);
    }
    parts[np++] = v;
    if (j + 1 < n) {
        int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
        memcpy(lim, x->shape->dims, sizeof *lim * (size_t)x->shape->rank);
        st[ivd] = j + 1;
        parts[np++] = gs_build_slice(gs_part_builder(c), x, st, lim, NULL);
    }
    return np == 1 ? v : gs_build_concatenate(gs_part_builder(c), np, parts, (int)ivd);
}

static gs_instr *scalar_of(gs_part_ctx *c, gs_type t, int64_t v, const gs_shape *like) {
    return gs_part_bcast_scalar(c, gs_build_scalar_i(gs_part_builder(c), t, v), like);
}

/* For operand dim d (indexed by component j), tiled by s with shards of `shard`: the indices
 * with that component made local (clamped first to [0, dim - size] when `clamp`, as gather
 * does), and in *in_range (pred, the component's shape) whether this device holds it. */
static gs_instr *localize(gs_part_ctx *c, gs_instr *idx, int64_t ivd, int j, const gs_sharding *s,
                          int d, int64_t dim, int64_t size, int64_t shard, bool clamp,
                          gs_instr **in_range) {
    gs_builder *b = gs_part_builder(c);
    gs_instr *x = component(c, idx, ivd, j);
    gs_type t = x->shape->type;
    if (clamp) {
        gs_instr *cl[3] = {scalar_of(c, t, 0, x->shape), x, scalar_of(c, t, dim - size, x->shape)};
        x = gs_build(b, GS_OP_CLAMP, x->shape, 3, cl);
    }
    gs_instr *off = gs_part_shard_offset(c, s, d, shard);
    if (t != GS_S32) off = gs_build_convert(b, off, t);
    gs_instr *lx = gs_build_binary(b, GS_OP_SUBTRACT, x, gs_part_bcast_scalar(c, off, x->shape));
    if (in_range) {
        gs_instr *ge = gs_build_compare(b, lx, scalar_of(c, t, 0, x->shape), "GE");
        gs_instr *lt = gs_build_compare(b, lx, scalar_of(c, t, shard, x->shape), "LT");
        if (!gs_type_is_signed_int(t)) /* unsigned: a negative difference wraps above */
            ge = lt;
        *in_range = gs_build_binary(b, GS_OP_AND, ge, lt);
    }
    return replace_component(c, idx, ivd, j, lx);
}

bool gs_part_handle_gather(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                           gs_part_value *out) {
    if (in->n_operands != 2 || !gs_type_is_array(in->shape->type) || !gs_part_plain(t))
        return false;
    gather_dims g;
    gs_part_space sp;
    if (!read_gather(c, in, &g) || !gather_space(in, &g, &sp)) return false;
    const gs_part_value *av = gs_part_operand(c, in, 0), *iv = gs_part_operand(c, in, 1);
    gs_part_space_plan best;
    if (!gs_part_plan_space(c, in, &sp, av, iv, t, &best)) return false;
    gs_part_value a, ix;
    gs_part_reshard(c, av, best.lhs, &a);
    gs_part_reshard(c, iv, best.rhs, &ix);
    if (c->failed || !a.hlo || !ix.hlo) return false;
    const gs_shape *ash = in->operands[0]->shape;
    gs_instr *idx = ix.hlo, *mask = NULL;
    /* Indexed dims the operand is tiled along: local indices, rows held elsewhere masked. */
    for (int j = 0; j < g.start_map.n; j++) {
        int d = (int)g.start_map.v[j];
        /* Only one-element slices (XLA's trivially sliced dims, collapsed or not); a whole
         * slice's index is clamped to 0 anyway. */
        if (d < 0 || d >= ash->rank || gs_sharding_tiles_in_dim(a.sharding, d) <= 1 ||
            g.sizes.v[d] != 1)
            continue;
        if (implicit_dim(&g.pairs, d)) {
            /* An implicit pair: the indices hold this device's own rows, all in its shard. */
            idx = localize(c, idx, g.ivd, j, a.sharding, d, ash->dims[d], g.sizes.v[d],
                           a.hlo->shape->dims[d], false, NULL);
            continue;
        }
        gs_instr *ok;
        idx = localize(c, idx, g.ivd, j, a.sharding, d, ash->dims[d], g.sizes.v[d],
                       a.hlo->shape->dims[d], true, &ok);
        mask = mask ? gs_build_binary(gs_part_builder(c), GS_OP_AND, mask, ok) : ok;
    }
    const gs_shape *ls = gs_part_local_shape(c, in->shape, best.out);
    gs_instr *ops[2] = {a.hlo, idx};
    gs_instr *r = ls ? gs_part_clone(c, in, ls, 2, ops) : NULL;
    if (!r) {
        gs_part_oom(c);
        return false;
    }
    /* Whole slices of tiled operand dims are the local slices. */
    const gs_attr *sa = gs_instr_attr(r, GS_ATTR_SLICE_SIZES);
    if (sa) {
        int64_t *v = (int64_t *)sa->u.ints.v; /* the output module's own copy */
        for (int d = 0; d < ash->rank; d++)
            if (g.sizes.v[d] == ash->dims[d]) v[d] = a.hlo->shape->dims[d];
    }
    if (mask) {
        /* The mask has the indices' batch dims, which are the result's non-offset dims. */
        int64_t bd[GS_MAX_RANK];
        int nb = 0;
        for (int od = 0; od < in->shape->rank; od++)
            if (!gs_ints_contains(g.offset, od)) bd[nb++] = od;
        gs_builder *b = gs_part_builder(c);
        if (g.ivd < idx->shape->rank) {
            /* Drop the size-1 index vector dim. */
            int64_t dims[GS_MAX_RANK];
            int k = 0;
            for (int i = 0; i < mask->shape->rank; i++)
                if (i != g.ivd) dims[k++] = mask->shape->dims[i];
            mask = gs_build_reshape(b, mask, k, dims);
        }
        gs_instr *m = gs_build_broadcast(b, mask, r->shape->rank, r->shape->dims, nb, bd);
        gs_instr *zero = gs_build_scalar_i(b, r->shape->type, 0);
        r = gs_build_select(b, m, r, gs_part_bcast_scalar(c, zero, r->shape));
    }
    out->hlo = r;
    out->base = in->shape;
    out->sharding = best.out;
    out->combiner = in->shape->type == GS_PRED ? GS_OP_OR : GS_OP_ADD;
    return r != NULL;
}

/* ------------------------------------------------------------------ scatter */

typedef struct scatter_dims {
    gs_ints window, inserted, to_operand;
    batch_pairs pairs;
    int64_t ivd;
} scatter_dims;

/* False when the dims do not fit together. */
static bool read_scatter(gs_part_ctx *c, const gs_instr *in, scatter_dims *g) {
    g->window = gs_instr_ints(in, GS_ATTR_UPDATE_WINDOW_DIMS);
    g->inserted = gs_instr_ints(in, GS_ATTR_INSERTED_WINDOW_DIMS);
    g->to_operand = gs_instr_ints(in, GS_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS);
    g->ivd = gs_instr_int(in, GS_ATTR_INDEX_VECTOR_DIM, in->operands[1]->shape->rank);
    gs_ints op = gs_instr_ints(in, GS_ATTR_INPUT_BATCHING_DIMS);
    const gs_shape *a = in->operands[0]->shape, *u = in->operands[2]->shape;
    if (a->rank > GS_MAX_RANK) return false;
    /* Window sizes: 1 along inserted and batching dims, else the updates' window dim's. */
    int64_t win[GS_MAX_RANK];
    for (int d = 0, k = 0; d < a->rank; d++) {
        if (gs_ints_contains(g->inserted, d) || gs_ints_contains(op, d)) {
            win[d] = 1;
            continue;
        }
        win[d] = k < g->window.n && g->window.v[k] < u->rank ? u->dims[g->window.v[k]] : 1;
        k++;
    }
    return read_pairs(c, op, gs_instr_ints(in, GS_ATTR_SCATTER_INDICES_BATCHING_DIMS),
                      in->operands[1], g->ivd, g->to_operand, a, win, g->inserted, &g->pairs);
}

/* Space: [b: batching pairs, then whole windows] [m: inserted indexed dims] [k: the updates'
 * other scatter dims, when the combiner can split them] [forced: the rest]. ixmap receives how
 * the indices' dims map into it (their index vector dim forced). */
static bool scatter_space(const gs_instr *in, const scatter_dims *g, bool splittable,
                          gs_part_space *sp, gs_part_space_map *ixmap) {
    const gs_shape *a = in->operands[0]->shape, *ix = in->operands[1]->shape;
    const gs_shape *u = in->operands[2]->shape;
    int ra = a->rank, ri = ix->rank, ru = u->rank;
    if (ra + ri + ru + 1 > GS_MAX_RANK) return false;
    memset(sp, 0, sizeof *sp);
    sp->groups = 1;
    sp->compose = true;
    /* The updates' window dims in order take the operand's dims that are neither inserted nor
     * batching; its other dims (scatter dims) in order the indices' dims but the vector dim. */
    int op_of_win[GS_MAX_RANK], ix_of_sc[GS_MAX_RANK], nw = 0, nsc = 0;
    for (int d = 0; d < ra; d++)
        if (!gs_ints_contains(g->inserted, d) && !gs_ints_contains(g->pairs.op, d))
            op_of_win[nw++] = d;
    if (nw != g->window.n) return false;
    for (int d = 0; d < ri; d++)
        if (d != g->ivd) ix_of_sc[nsc++] = d;
    if (nw + nsc != ru) return false;
    int u_of_op[GS_MAX_RANK], u_of_ix[GS_MAX_RANK];
    for (int d = 0; d < ra; d++) u_of_op[d] = -1;
    for (int d = 0; d < ri; d++) u_of_ix[d] = -1;
    for (int i = 0, j = 0, ud = 0; ud < ru; ud++) {
        if (gs_ints_contains(g->window, ud))
            u_of_op[op_of_win[i++]] = ud;
        else
            u_of_ix[ix_of_sc[j++]] = ud;
    }
    /* Space dims by role; count first. */
    int role_op[GS_MAX_RANK], role_ix[GS_MAX_RANK]; /* 0 b, 1 m, 2 k, 3 forced */
    for (int d = 0; d < ra; d++) {
        if (gs_ints_contains(g->pairs.op, d))
            role_op[d] = 0;
        else if (gs_ints_contains(g->inserted, d))
            role_op[d] = gs_ints_contains(g->to_operand, d) ? 1 : 3;
        else
            role_op[d] = u->dims[u_of_op[d]] == a->dims[d] ? 0 : 3;
    }
    for (int d = 0; d < ri; d++)
        role_ix[d] = d == g->ivd ? 3 : gs_ints_contains(g->pairs.ix, d) ? 0 : splittable ? 2 : 3;
    int nb = 0, nm = 0, nk = 0, nf = 0;
    for (int d = 0; d < ra; d++) {
        nb += role_op[d] == 0;
        nm += role_op[d] == 1;
        nf += role_op[d] == 3;
    }
    for (int d = 0; d < ri; d++) {
        nk += role_ix[d] == 2;
        nf += role_ix[d] == 3;
    }
    sp->nb = nb;
    sp->nm = nm;
    sp->nk = nk;
    sp->nf = nf;
    sp->ns = nb + nm + nk + nf;
    if (sp->ns > GS_MAX_RANK) return false;
    sp->lhs.rank = sp->out.rank = ra;
    sp->rhs.rank = ru;
    ixmap->rank = ri;
    int next_b = 0, next_m = nb, next_k = nb + nm, next_f = nb + nm + nk;
    int space_of_pair[GS_MAX_RANK];
    for (int i = 0; i < g->pairs.op.n; i++) space_of_pair[i] = next_b++;
    for (int d = 0; d < ra; d++) {
        int s;
        if (role_op[d] == 0 && gs_ints_contains(g->pairs.op, d))
            s = space_of_pair[gs_ints_index(g->pairs.op, d)];
        else if (role_op[d] == 0)
            s = next_b++;
        else if (role_op[d] == 1)
            s = next_m++;
        else
            s = next_f++;
        sp->lhs.to[d] = sp->out.to[d] = s;
        sp->size[s] = a->dims[d];
        if (u_of_op[d] >= 0) sp->rhs.to[u_of_op[d]] = s;
    }
    for (int d = 0; d < ri; d++) {
        int s;
        if (role_ix[d] == 0)
            s = space_of_pair[gs_ints_index(g->pairs.ix, d)];
        else if (role_ix[d] == 2)
            s = next_k++;
        else
            s = next_f++;
        ixmap->to[d] = s;
        if (role_ix[d] != 0) sp->size[s] = ix->dims[d];
        if (u_of_ix[d] >= 0) sp->rhs.to[u_of_ix[d]] = s;
    }
    return true;
}

bool gs_part_handle_scatter(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                            gs_part_value *out) {
    if (in->n_operands != 3 || !gs_type_is_array(in->shape->type) || !gs_part_plain(t))
        return false;
    scatter_dims g;
    if (!read_scatter(c, in, &g)) return false;
    gs_opcode rop;
    const gs_computation *comp = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    gs_type ty = in->shape->type;
    bool splittable =
        comp && gs_computation_binary_reducer(comp, &rop) && gs_part_identity(c, rop, ty) != NULL;
    gs_part_space sp;
    gs_part_space_map ixmap;
    if (!scatter_space(in, &g, splittable, &sp, &ixmap)) return false;
    const gs_part_value *av = gs_part_operand(c, in, 0), *uv = gs_part_operand(c, in, 2);
    sp.third = gs_part_operand(c, in, 1);
    sp.third_map = ixmap;
    gs_part_space_plan best;
    if (!gs_part_plan_space(c, in, &sp, av, uv, t, &best)) return false;
    gs_part_value a, u, ix;
    gs_part_reshard(c, av, best.lhs, &a);
    gs_part_reshard(c, uv, best.rhs, &u);
    gs_part_reshard(c, gs_part_operand(c, in, 1), gs_part_space_project(c, &sp, &ixmap, best.f),
                    &ix);
    if (c->failed || !a.hlo || !u.hlo || !ix.hlo) return false;
    const gs_shape *ash = in->shape;
    gs_instr *idx = ix.hlo;
    /* Inserted dims the operand is tiled along: local indices (windows outside the shard are
     * skipped by scatter itself). */
    for (int j = 0; j < g.to_operand.n; j++) {
        int d = (int)g.to_operand.v[j];
        /* Only inserted one-element windows; a whole window's index must be 0 anyway. */
        if (d < 0 || d >= ash->rank || gs_sharding_tiles_in_dim(a.sharding, d) <= 1 ||
            !gs_ints_contains(g.inserted, d))
            continue;
        idx = localize(c, idx, g.ivd, j, a.sharding, d, ash->dims[d], 1, a.hlo->shape->dims[d],
                       false, NULL);
    }
    gs_builder *b = gs_part_builder(c);
    bool partial = gs_part_unreduced_dim(best.out) != -1;
    gs_instr *base = a.hlo, *upd = u.hlo;
    if (partial) {
        /* This device's updates, combined into the identity; the padding of the updates' split
         * scatter dims holds no update, so it becomes the identity too. */
        gs_instr *id = gs_part_identity(c, rop, ty);
        base = gs_part_bcast_scalar(c, id, a.hlo->shape);
        int split[GS_MAX_RANK], ns = 0, k0 = sp.nb + sp.nm + sp.nn;
        for (int d = 0; d < uv->base->rank; d++)
            if (sp.rhs.to[d] >= k0 && sp.rhs.to[d] < k0 + sp.nk) split[ns++] = d;
        upd = gs_part_mask(c, upd, u.sharding, uv->base->dims, ns, split, id);
    }
    gs_instr *ops[3] = {base, idx, upd};
    gs_instr *r = gs_part_clone(c, in, a.hlo->shape, 3, ops);
    if (!r) {
        gs_part_oom(c);
        return false;
    }
    if (!partial) {
        out->hlo = r;
        out->base = in->shape;
        out->sharding = best.out;
        out->combiner = GS_OP_ADD;
        return true;
    }
    /* Combine the devices' partial results, then with the operand. */
    gs_part_value p = {r, in->shape, best.out, rop}, whole;
    gs_part_reshard(c, &p, gs_part_reduced_form(c, best.out), &whole);
    if (c->failed || !whole.hlo) return false;
    gs_part_value base_v;
    gs_part_reshard(c, &a, whole.sharding, &base_v);
    out->hlo = gs_build_binary(b, rop, base_v.hlo, whole.hlo);
    out->base = in->shape;
    out->sharding = whole.sharding;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}
