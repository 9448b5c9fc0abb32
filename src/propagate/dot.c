/*
 * dot.c — dot and convolution (XLA's dot_as_convolution_util and the dot/convolution parts of
 * ShardingPropagation).
 *
 * A dot's dims fall into batch, contracting and non-contracting (lhs or rhs) dims; a
 * convolution's too, once its spatial dims are classified by their window (a window as large as
 * the input is a contraction, a size-1 window over a size-1 kernel an lhs non-contracting dim,
 * and so on); what remains are true spatial dims. Forward: each operand's sharding, with its
 * contracting dims replicated, maps onto the result; when both operands give one, a lookahead
 * along a chain of single users picks the one its eventual user agrees with, else the larger
 * operand wins, and the other refines it when they merge. Backward: the result's sharding, with
 * the other operand's non-contracting dims replicated, maps onto the operand and is merged with
 * what the other operand implies through batch and contracting dims. Convolutions with sharded
 * spatial dims keep the input's sharding when the kernel is small, else only its batch dim.
 */
#include "internal.h"

#include <string.h>

static gs_prop_dim pdim(int64_t lhs, int64_t rhs, int64_t out, int64_t spatial) {
    gs_prop_dim d = {lhs, rhs, out, spatial};
    return d;
}

/* XLA SpatialIsBatch (either representation). */
static bool spatial_is_batch(int64_t lhs_size, const gs_window_dim *w) {
    int64_t m = lhs_size - 1 > 1 ? lhs_size - 1 : 1;
    if (lhs_size == w->size && lhs_size == w->lhs_dilate &&
        ((m == w->stride && w->rhs_dilate == 1) || (m == w->rhs_dilate && w->stride == 1)) &&
        w->pad_hi == 0 && w->pad_lo == 0 && !w->reversal)
        return true;
    return lhs_size == w->size && w->pad_hi == lhs_size - 1 && w->pad_lo == lhs_size - 1 &&
           w->reversal && w->rhs_dilate == 1 && w->stride == lhs_size &&
           w->lhs_dilate == lhs_size - 1;
}

void gs_prop_dot_dims(const gs_instr *in, gs_prop_dot *d) {
    memset(d, 0, sizeof *d);
    const gs_shape *ls = in->operands[0]->shape, *rs = in->operands[1]->shape;
    d->lhs_rank = ls->rank;
    d->rhs_rank = rs->rank;
    d->out_rank = in->shape->type == GS_TUPLE ? 0 : in->shape->rank;
    if (in->op == GS_OP_CONVOLUTION) {
        const gs_attr *la = gs_instr_attr(in, GS_ATTR_DIM_LABELS);
        const gs_attr *wa = gs_instr_attr(in, GS_ATTR_WINDOW);
        if (!la || !la->u.conv) return;
        const gs_conv_dims *cd = la->u.conv;
        d->lhs_nc[d->n_lhs_nc++] = pdim(cd->in_batch, -1, cd->out_batch, -1);
        d->rhs_nc[d->n_rhs_nc++] = pdim(-1, cd->k_out_feature, cd->out_feature, -1);
        d->contract[d->n_contract++] = pdim(cd->in_feature, cd->k_in_feature, -1, -1);
        for (int i = 0; i < cd->n_spatial; i++) {
            int64_t lhs = cd->in_spatial[i], rhs = cd->k_spatial[i], out = cd->out_spatial[i];
            int64_t lsz = ls->dims[lhs], rsz = rs->dims[rhs];
            gs_window_dim def = {1, 1, 0, 0, 1, 1, false};
            const gs_window_dim *w =
                wa && wa->u.window && i < wa->u.window->n ? &wa->u.window->dims[i] : &def;
            gs_prop_dim p = pdim(lhs, rhs, out, i);
            if (spatial_is_batch(lsz, w)) {
                d->batch[d->n_batch++] = p;
            } else if (lsz == w->size && w->lhs_dilate == 1 && w->rhs_dilate == 1 &&
                       w->pad_hi == 0 && w->pad_lo == 0 && !w->reversal) {
                d->contract[d->n_contract++] = p;
            } else if (w->stride == 1 && w->rhs_dilate == 1 && w->lhs_dilate == 1) {
                if (rsz == 1 && w->size == 1 && w->pad_hi == 0 && w->pad_lo == 0 && !w->reversal)
                    d->lhs_nc[d->n_lhs_nc++] = p;
                else if (lsz == 1 && w->size == rsz && w->pad_hi == rsz - 1 &&
                         w->pad_lo == rsz - 1 && w->reversal)
                    d->rhs_nc[d->n_rhs_nc++] = p;
                else
                    d->conv[d->n_conv++] = p;
            } else {
                d->conv[d->n_conv++] = p;
            }
        }
        return;
    }
    gs_ints lb = gs_instr_ints(in, GS_ATTR_LHS_BATCH_DIMS);
    gs_ints rb = gs_instr_ints(in, GS_ATTR_RHS_BATCH_DIMS);
    gs_ints lc = gs_instr_ints(in, GS_ATTR_LHS_CONTRACTING_DIMS);
    gs_ints rc = gs_instr_ints(in, GS_ATTR_RHS_CONTRACTING_DIMS);
    for (int i = 0; i < lb.n && i < rb.n; i++)
        d->batch[d->n_batch++] = pdim(lb.v[i], rb.v[i], i, -1);
    for (int i = 0; i < lc.n && i < rc.n; i++)
        d->contract[d->n_contract++] = pdim(lc.v[i], rc.v[i], -1, -1);
    for (int i = 0; i < ls->rank; i++)
        if (!gs_ints_contains(lb, i) && !gs_ints_contains(lc, i))
            d->lhs_nc[d->n_lhs_nc] = pdim(i, -1, lb.n + d->n_lhs_nc, -1), d->n_lhs_nc++;
    for (int i = 0; i < rs->rank; i++)
        if (!gs_ints_contains(rb, i) && !gs_ints_contains(rc, i))
            d->rhs_nc[d->n_rhs_nc] = pdim(-1, i, lb.n + d->n_lhs_nc + d->n_rhs_nc, -1),
            d->n_rhs_nc++;
}

/* The side (0 lhs, 1 rhs) of a dim correspondence. */
static int64_t side(const gs_prop_dim *p, int index) { return index == 0 ? p->lhs : p->rhs; }

/* The result's sharding implied by operand `index` (XLA's from_operand lambda). */
static const gs_sharding *from_operand(gs_prop_ctx *c, const gs_instr *in, const gs_prop_dot *d,
                                       int index) {
    const gs_sharding *s = GS_PROP_SHARDING(gs_prop_operand(in, index));
    if (gs_prop_tile_maximal(s)) return s;
    int64_t rep[GS_MAX_RANK * 2];
    int nr = 0;
    for (int i = 0; i < d->n_contract; i++) rep[nr++] = side(&d->contract[i], index);
    const gs_prop_dim *onc = index == 0 ? d->rhs_nc : d->lhs_nc;
    int n_onc = index == 0 ? d->n_rhs_nc : d->n_lhs_nc;
    for (int i = 0; i < n_onc; i++)
        if (side(&onc[i], index) >= 0) rep[nr++] = side(&onc[i], index);
    const gs_sharding *r = gs_prop_replicate_dims(c, s, nr, rep);
    if (!r) return NULL;
    int op_rank = index == 0 ? d->lhs_rank : d->rhs_rank;
    int64_t out_to_op[GS_MAX_RANK], op_to_out[GS_MAX_RANK];
    for (int i = 0; i < d->out_rank; i++) out_to_op[i] = -1;
    for (int i = 0; i < op_rank; i++) op_to_out[i] = -1;
    for (int i = 0; i < d->n_batch; i++) {
        out_to_op[d->batch[i].out] = side(&d->batch[i], index);
        op_to_out[side(&d->batch[i], index)] = d->batch[i].out;
    }
    const gs_prop_dim *nc = index == 0 ? d->lhs_nc : d->rhs_nc;
    int n_nc = index == 0 ? d->n_lhs_nc : d->n_rhs_nc;
    for (int i = 0; i < n_nc; i++) {
        out_to_op[nc[i].out] = side(&nc[i], index);
        op_to_out[side(&nc[i], index)] = nc[i].out;
    }
    return gs_prop_transpose_collapsed(c, r, op_rank, op_to_out, d->out_rank, out_to_op);
}

/* XLA LookaheadUserSharding: along a chain of single users, the sharding the first sharded
 * instruction implies for `in`. */
static const gs_sharding *lookahead(gs_prop_ctx *c, gs_instr *in) {
    gs_prop_node *n = GS_PROP_NODE(in);
    if (n->n_users != 1) return NULL;
    enum { MAX_CHAIN = 4096 };
    gs_instr *chain[MAX_CHAIN];
    int len = 0;
    chain[len++] = in;
    gs_instr *cur = n->users[0];
    chain[len++] = cur;
    while (!GS_PROP_SHARDING(cur)) {
        if (GS_PROP_NODE(cur)->n_users != 1 || len >= MAX_CHAIN) return NULL;
        cur = GS_PROP_NODE(cur)->users[0];
        chain[len++] = cur;
    }
    const gs_sharding *s = NULL;
    for (int i = len - 1; i >= 1; i--) {
        s = gs_prop_from_user(c, chain[i - 1], chain[i], 1000);
        if (s && i != 1) {
            GS_PROP_NODE(chain[i - 1])->sh = s;
            continue;
        }
        break;
    }
    for (int i = 1; i < len - 1; i++) GS_PROP_NODE(chain[i])->sh = NULL;
    return s;
}

bool gs_prop_dot_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    gs_prop_dot d;
    gs_prop_dot_dims(in, &d);
    gs_instr *op0 = gs_prop_operand(in, 0), *op1 = gs_prop_operand(in, 1);
    const gs_sharding *cur = GS_PROP_SHARDING(in);
    const gs_sharding *i0 = NULL, *i1 = NULL;
    if (gs_prop_spatial(GS_PROP_SHARDING(op0)))
        i0 = gs_prop_improved(c, from_operand(c, in, &d, 0), cur, in->shape, may, false);
    if (gs_prop_spatial(GS_PROP_SHARDING(op1)))
        i1 = gs_prop_improved(c, from_operand(c, in, &d, 1), cur, in->shape, may, false);
    const char *rule = in->op == GS_OP_DOT ? "dot" : "convolution as dot";
    if (!i0 && !i1) return false;
    if (i0 && !i1) {
        gs_prop_set(c, in, i0, GS_PROP_DIR_FORWARD, op0, rule);
        return true;
    }
    if (!i0 && i1) {
        gs_prop_set(c, in, i1, GS_PROP_DIR_FORWARD, op1, rule);
        return true;
    }
    const gs_sharding *la = lookahead(c, in);
    const gs_sharding *first = i0, *second = i1;
    gs_instr *ffrom = op0, *sfrom = op1;
    bool decided = false;
    if (la) {
        bool s0 = gs_prop_subtiling(c, in->shape, la, i0);
        bool s1 = gs_prop_subtiling(c, in->shape, la, i1);
        if (s0 && !s1) decided = true;
        if (!s0 && s1) {
            first = i1, second = i0, ffrom = op1, sfrom = op0;
            decided = true;
        }
    }
    if (!decided && gs_prop_bytes(op0->shape) < gs_prop_bytes(op1->shape)) {
        first = i1, second = i0, ffrom = op1, sfrom = op0;
    }
    gs_prop_set(c, in, first, GS_PROP_DIR_FORWARD, ffrom, rule);
    gs_prop_improve(c, in, second, may, false, GS_PROP_DIR_FORWARD, sfrom, rule);
    return true;
}

const gs_sharding *gs_prop_dot_operand(gs_prop_ctx *c, const gs_prop_dot *d,
                                       const gs_sharding *dot_sh, const gs_sharding *other,
                                       int index, bool may) {
    int64_t out_rep[GS_MAX_RANK * 2], other_rep[GS_MAX_RANK * 2];
    int n_out = 0, n_other = 0;
    const gs_prop_dim *onc = index == 0 ? d->rhs_nc : d->lhs_nc;
    int n_onc = index == 0 ? d->n_rhs_nc : d->n_lhs_nc;
    for (int i = 0; i < n_onc; i++) {
        out_rep[n_out++] = onc[i].out;
        other_rep[n_other++] = side(&onc[i], 1 - index);
    }
    for (int i = 0; i < d->n_contract; i++)
        if (d->contract[i].out >= 0) out_rep[n_out++] = d->contract[i].out;
    const gs_prop_dim *nc = index == 0 ? d->lhs_nc : d->rhs_nc;
    int n_nc = index == 0 ? d->n_lhs_nc : d->n_rhs_nc;
    for (int i = 0; i < n_nc; i++)
        if (side(&nc[i], 1 - index) >= 0) other_rep[n_other++] = side(&nc[i], 1 - index);
    int op_rank = index == 0 ? d->lhs_rank : d->rhs_rank;
    int other_rank = index == 0 ? d->rhs_rank : d->lhs_rank;
    const gs_sharding *s = gs_sharding_replicated(c->a);
    if (!s) {
        c->oom = true;
        return NULL;
    }
    if (dot_sh) {
        const gs_sharding *r = gs_prop_replicate_dims(c, dot_sh, n_out, out_rep);
        int64_t out_to_op[GS_MAX_RANK], op_to_out[GS_MAX_RANK];
        for (int i = 0; i < d->out_rank; i++) out_to_op[i] = -1;
        for (int i = 0; i < op_rank; i++) op_to_out[i] = -1;
        for (int i = 0; i < d->n_batch; i++) {
            out_to_op[d->batch[i].out] = side(&d->batch[i], index);
            op_to_out[side(&d->batch[i], index)] = d->batch[i].out;
        }
        for (int i = 0; i < n_nc; i++) {
            out_to_op[nc[i].out] = side(&nc[i], index);
            op_to_out[side(&nc[i], index)] = nc[i].out;
        }
        const gs_sharding *t =
            r ? gs_prop_transpose_collapsed(c, r, d->out_rank, out_to_op, op_rank, op_to_out)
              : NULL;
        if (t) s = t;
    }
    if (other && gs_prop_spatial(other)) {
        const gs_sharding *r = gs_prop_replicate_dims(c, other, n_other, other_rep);
        int64_t other_to_op[GS_MAX_RANK], op_to_other[GS_MAX_RANK];
        for (int i = 0; i < other_rank; i++) other_to_op[i] = -1;
        for (int i = 0; i < op_rank; i++) op_to_other[i] = -1;
        for (int i = 0; i < d->n_batch; i++) {
            other_to_op[side(&d->batch[i], 1 - index)] = side(&d->batch[i], index);
            op_to_other[side(&d->batch[i], index)] = side(&d->batch[i], 1 - index);
        }
        for (int i = 0; i < d->n_contract; i++) {
            other_to_op[side(&d->contract[i], 1 - index)] = side(&d->contract[i], index);
            op_to_other[side(&d->contract[i], index)] = side(&d->contract[i], 1 - index);
        }
        const gs_sharding *from_other =
            r ? gs_prop_transpose_collapsed(c, r, other_rank, other_to_op, op_rank, op_to_other)
              : NULL;
        if (from_other && gs_prop_merge(c, s, &from_other, may)) s = from_other;
    }
    return s;
}

/* XLA IsConvolutionKernelSmall. */
static bool kernel_small(const gs_instr *in) {
    const gs_attr *la = gs_instr_attr(in, GS_ATTR_DIM_LABELS);
    if (!la || !la->u.conv) return false;
    const gs_conv_dims *cd = la->u.conv;
    const gs_shape *rs = in->operands[1]->shape;
    int64_t kprod = 1, oprod = 1;
    for (int i = 0; i < cd->n_spatial; i++) {
        int64_t k = rs->dims[cd->k_spatial[i]], o = in->shape->dims[cd->out_spatial[i]];
        kprod *= k;
        oprod *= o;
        if (k >= o && (i < 2 || k > 3 || kprod >= oprod)) return false;
    }
    return true;
}

bool gs_prop_conv_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    gs_prop_dot d;
    gs_prop_dot_dims(in, &d);
    int64_t lparts = 1, rparts = 1;
    const gs_sharding *ls = GS_PROP_SHARDING(gs_prop_operand(in, 0)),
                      *rs = GS_PROP_SHARDING(gs_prop_operand(in, 1));
    for (int i = 0; i < d.n_conv; i++) {
        if (ls) lparts *= gs_sharding_tiles_in_dim(ls, (int)d.conv[i].lhs);
        if (rs) rparts *= gs_sharding_tiles_in_dim(rs, (int)d.conv[i].rhs);
    }
    if (d.n_conv == 0 ||
        (lparts == 1 && rparts == 1 && gs_instr_int(in, GS_ATTR_BATCH_GROUP_COUNT, 1) == 1 &&
         gs_instr_int(in, GS_ATTR_FEATURE_GROUP_COUNT, 1) == 1))
        return gs_prop_dot_forward(c, in, may);
    gs_instr *lhs = gs_prop_operand(in, 0);
    if (!gs_prop_spatial(ls)) return false;
    if (gs_prop_tile_maximal(ls))
        return gs_prop_improve(c, in, ls, may, false, GS_PROP_DIR_FORWARD, lhs, "convolution");
    const gs_conv_dims *cd = gs_instr_attr(in, GS_ATTR_DIM_LABELS)->u.conv;
    if (kernel_small(in)) {
        if (gs_sharding_tiles_in_dim(ls, (int)cd->in_feature) > 1) return false;
        int perm[GS_MAX_RANK];
        perm[cd->out_batch] = (int)cd->in_batch;
        perm[cd->out_feature] = (int)cd->in_feature;
        for (int i = 0; i < cd->n_spatial; i++) perm[cd->out_spatial[i]] = (int)cd->in_spatial[i];
        return gs_prop_improve(c, in, gs_prop_transpose(c, ls, in->shape->rank, perm), may, false,
                               GS_PROP_DIR_FORWARD, lhs, "convolution (small kernel)");
    }
    int64_t keep = cd->in_batch;
    return gs_prop_improve(c, in, gs_prop_replicate_except(c, ls, 1, &keep), may, false,
                           GS_PROP_DIR_FORWARD, lhs, "convolution (large kernel)");
}
