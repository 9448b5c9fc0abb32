/*
 * rules.c — per-op sharding rules (Shardy's OpShardingRule): each op maps its operand and result
 * dims to shared factors, each pass-through, reduction, permutation or need-replication, and
 * maybe blocked, built op by op exactly as Shardy's op_sharding_rule_registry builds them (same
 * factors added in the same order, so `sdy-opt -sdy-populate-op-sharding-rules` prints the same
 * letters).
 *
 * Who reads it, and who does not: this table is the description Shardy's propagation works
 * from (sdy's per-op rules); gspmd's Shardy propagation (issue 26) is to read it for every op,
 * and nothing else should describe an op's factors a second time. XLA's
 * ShardingPropagation and SpmdPartitioner are instead written op by op, with choices a factor
 * rule does not express (which operand wins, when a dim is worth resharding, halos, windowed
 * einsum), and gspmd's propagate/ and partition/ follow them so that XLA's own tests pass; of
 * those, only the ops XLA has no handler for (topk, batch-norm, fft, cholesky, triangular-solve:
 * propagate/rule.c) go through this table, along their pass-through factors only.
 * The cost model reads the partitioned program, not rules.
 *
 * A factor shared by an operand dim and a result dim lets a sharding flow between them; a factor
 * only in operands is summed over (reduction) or must be whole (need-replication); a permutation
 * factor may be sharded but its data moves between shards; a blocked factor carries no sharding.
 * As in Shardy's OpShardingRuleBuilder, a factor added to many tensors at once (`all`) reaches
 * every tensor of rank >= 1, while one added dim by dim (`fac`) skips a dim that already has a
 * factor when its own size is 1; once built, every dim without a factor gets a size-1 factor of
 * its own, operands first. Ops without a specific rule get the default: every dim of every
 * tensor its own need-replication factor, which is always correct (replicate, compute, reshard).
 */
#include "internal.h"
#include "base/internal.h"

#include <stdlib.h>
#include <string.h>

/* Rule under construction. */
typedef struct builder {
    gs_arena *a;             /* where the rule goes */
    const gs_instr *in;      /* the instruction */
    bool conservative;       /* gs_op_rule_options.conservative */
    gs_vec factors;          /* gs_factor */
    gs_tensor_factors *ops;  /* n_operands tensors */
    gs_tensor_factors *res;  /* n_res tensors */
    int n_res;               /* result leaves */
    const gs_shape **leaves; /* their shapes */
    int *od;                 /* per operand: its dim for the next `fac`, -1 for none */
    int *rd;                 /* per result leaf: likewise */
    bool registered;         /* Shardy's registry has the rule */
    bool failed;             /* an allocation failed */
} builder;

/* Where `all` adds a factor. */
enum { ALL_OPS = 1, ALL_RES = 2, ALL = 3 };

/* A new factor. */
static int new_factor(builder *b, gs_factor_kind k, int64_t size, bool blocked) {
    gs_factor f = {k, size, blocked};
    if (gs_vec_push(&b->factors, &f) != GS_OK) {
        b->failed = true;
        return -1;
    }
    return (int)b->factors.n - 1;
}

/* Room for rank dims on tensor t. */
static void shape_tensor(builder *b, gs_tensor_factors *t, int rank) {
    t->rank = rank;
    t->dims = rank ? GS_NEW_ARRAY(b->a, gs_dim_factors, rank) : NULL;
    if (rank && !t->dims) b->failed = true;
}

/* Appends factor f to dim d of t (no-op for f < 0 or a dim t lacks). */
static void add(builder *b, gs_tensor_factors *t, int d, int f) {
    if (f < 0 || b->failed || d < 0 || d >= t->rank) return;
    gs_dim_factors *df = (gs_dim_factors *)&t->dims[d];
    int *v = GS_NEW_ARRAY(b->a, int, df->n + 1);
    if (!v) {
        b->failed = true;
        return;
    }
    if (df->n) memcpy(v, df->factors, sizeof *v * (size_t)df->n);
    v[df->n] = f;
    df->factors = v;
    df->n++;
}

/* Shardy's addFactor(operandDims, resultDims, ...): a new factor on dim b->od[i] of each operand
 * and b->rd[r] of each result (-1: none), except dims that already have a factor when size is 1.
 * Resets od and rd to -1. */
static int fac(builder *b, int64_t size, gs_factor_kind k, bool blocked) {
    int f = new_factor(b, k, size, blocked);
    for (int i = 0; i < b->in->n_operands; i++) {
        int d = b->od[i];
        b->od[i] = -1;
        if (d < 0 || d >= b->ops[i].rank || (size == 1 && b->ops[i].dims[d].n)) continue;
        add(b, &b->ops[i], d, f);
    }
    for (int r = 0; r < b->n_res; r++) {
        int d = b->rd[r];
        b->rd[r] = -1;
        if (d < 0 || d >= b->res[r].rank || (size == 1 && b->res[r].dims[d].n)) continue;
        add(b, &b->res[r], d, f);
    }
    return f;
}

/* fac on dim o0 of operand 0, o1 of operand 1 (when there is one) and r0 of result 0 (-1: none),
 * the common case of ops with one result and at most two array operands. */
static int fac_at(builder *b, int o0, int o1, int r0, int64_t size, gs_factor_kind k) {
    b->od[0] = o0;
    if (b->in->n_operands > 1) b->od[1] = o1;
    b->rd[0] = r0;
    return fac(b, size, k, false);
}

/* Shardy's addFactor(dim, ...) (where ALL), addFactorSameForAllOperands (ALL_OPS) and
 * ...ForAllResults (ALL_RES): a new factor on dim d of every such tensor of rank >= 1. */
static int all(builder *b, int where, int d, int64_t size, gs_factor_kind k, bool blocked) {
    int f = new_factor(b, k, size, blocked);
    if (where & ALL_OPS)
        for (int i = 0; i < b->in->n_operands; i++) add(b, &b->ops[i], d, f);
    if (where & ALL_RES)
        for (int r = 0; r < b->n_res; r++) add(b, &b->res[r], d, f);
    return f;
}

static const gs_shape *op_shape(const builder *b, int i) { return b->in->operands[i]->shape; }
static bool op_array(const builder *b, int i) { return gs_shape_is_array(op_shape(b, i)); }
static int op_rank(const builder *b, int i) { return op_array(b, i) ? op_shape(b, i)->rank : 0; }
static int64_t op_dim(const builder *b, int i, int d) { return op_shape(b, i)->dims[d]; }
static int64_t res_dim(const builder *b, int r, int d) { return b->leaves[r]->dims[d]; }

static void collect_leaves(const gs_shape *s, const gs_shape **out, int *n) {
    if (gs_shape_is_tuple(s)) {
        for (int i = 0; i < s->n_tuple; i++) collect_leaves(s->tuple[i], out, n);
    } else if (gs_shape_is_array(s)) {
        out[(*n)++] = s;
    }
}

/* Every dim of every tensor its own factor of kind k. */
static void own_factors(builder *b, gs_factor_kind k) {
    for (int i = 0; i < b->in->n_operands; i++)
        for (int d = 0; d < b->ops[i].rank; d++)
            add(b, &b->ops[i], d, new_factor(b, k, op_dim(b, i, d), false));
    for (int r = 0; r < b->n_res; r++)
        for (int d = 0; d < b->res[r].rank; d++)
            add(b, &b->res[r], d, new_factor(b, k, res_dim(b, r, d), false));
}

/* Shardy's addPointwise: `all` over dims of shape s (rank n) with kind k[d] (NULL: all
 * pass-through) and blocked[d] (NULL: none). */
static void pointwise(builder *b, int n, const int64_t *s, const gs_factor_kind *k,
                      const bool *blocked) {
    for (int d = 0; d < n; d++)
        all(b, ALL, d, s[d], k ? k[d] : GS_FACTOR_PASS_THROUGH, blocked ? blocked[d] : false);
}

/* Shardy's addPointwiseWithDiffTypeForMismatch: pass-through where operand 0 and result 0 have
 * the same size, else a factor of the operand's size of kind k (blocked if asked). */
static bool pointwise_mismatch(builder *b, gs_factor_kind k, bool blocked) {
    if (b->n_res < 1 || !op_array(b, 0) || op_rank(b, 0) != b->leaves[0]->rank) return false;
    for (int d = 0; d < op_rank(b, 0); d++) {
        if (op_dim(b, 0, d) == res_dim(b, 0, d))
            all(b, ALL, d, op_dim(b, 0, d), GS_FACTOR_PASS_THROUGH, false);
        else
            all(b, ALL, d, op_dim(b, 0, d), k, blocked);
    }
    return true;
}

/* reshape, once the factor products so far (smaller on the side behind, larger) diverged: the
 * factor that makes them meet when next (the side's remaining size) allows it, else next
 * without the gcd g of both sides' remaining sizes, else next. */
static int64_t diverged_factor(int64_t next, int64_t g, int64_t smaller, int64_t larger) {
    if (larger % smaller == 0 && next % (larger / smaller) == 0) return larger / smaller;
    if (next > g) return next / g;
    return next;
}

/* ------------------------------------------------------------------ op rules */

/* Shardy's buildPointwise: the first result's dims are the factors; dim d of every tensor is
 * factor d. Operands must all have the result's rank. */
static bool rule_pointwise(builder *b) {
    if (b->n_res < 1) return false;
    const gs_shape *rs = b->leaves[0];
    for (int i = 0; i < b->in->n_operands; i++)
        if (op_rank(b, i) != rs->rank) return false;
    for (int r = 0; r < b->n_res; r++)
        if (b->leaves[r]->rank != rs->rank) return false;
    for (int d = 0; d < rs->rank; d++) new_factor(b, GS_FACTOR_PASS_THROUGH, rs->dims[d], false);
    for (int d = 0; d < rs->rank; d++) {
        for (int i = 0; i < b->in->n_operands; i++) add(b, &b->ops[i], d, d);
        for (int r = 0; r < b->n_res; r++) add(b, &b->res[r], d, d);
    }
    return true;
}

/* select (a scalar predicate takes no factor) and clamp (scalar bounds likewise): the dims of
 * shape s (select: the result's; clamp: its middle operand's), each shared by every tensor of
 * rank >= 1. */
static bool rule_pointwise_scalars(builder *b, const gs_shape *s) {
    if (b->n_res != 1 || !gs_shape_is_array(s)) return false;
    for (int i = 0; i < b->in->n_operands; i++)
        if (op_rank(b, i) != 0 && op_rank(b, i) != s->rank) return false;
    pointwise(b, s->rank, s->dims, NULL, NULL);
    return true;
}

/* Ops with no operand dims (parameter, constant, iota, rng), which Shardy gives no rule: every
 * result dim a pass-through factor of its own. */
static bool rule_source(builder *b) {
    for (int i = 0; i < b->in->n_operands; i++)
        if (op_rank(b, i) != 0) return false;
    for (int r = 0; r < b->n_res; r++)
        for (int d = 0; d < b->res[r].rank; d++)
            add(b, &b->res[r], d, new_factor(b, GS_FACTOR_PASS_THROUGH, res_dim(b, r, d), false));
    return true;
}

/* all-gather, reduce-scatter, all-to-all: the other dims pointwise; each collective dim a
 * need-replication factor in the operands and another in the results. */
static bool rule_collective_dims(builder *b, int64_t d1, int64_t d2) {
    if (b->n_res != b->in->n_operands) return false;
    const gs_shape *is = op_shape(b, 0);
    if (!gs_shape_is_array(is) || d1 < 0 || d1 >= is->rank || d2 < 0 || d2 >= is->rank)
        return false;
    for (int i = 0; i < b->in->n_operands; i++)
        if (op_rank(b, i) != is->rank || b->leaves[i]->rank != is->rank) return false;
    for (int d = 0; d < is->rank; d++)
        if (d != d1 && d != d2) all(b, ALL, d, is->dims[d], GS_FACTOR_PASS_THROUGH, false);
    all(b, ALL_OPS, (int)d1, is->dims[d1], GS_FACTOR_NEED_REPLICATION, false);
    all(b, ALL_RES, (int)d1, res_dim(b, 0, (int)d1), GS_FACTOR_NEED_REPLICATION, false);
    if (d2 != d1) {
        all(b, ALL_OPS, (int)d2, is->dims[d2], GS_FACTOR_NEED_REPLICATION, false);
        all(b, ALL_RES, (int)d2, res_dim(b, 0, (int)d2), GS_FACTOR_NEED_REPLICATION, false);
    }
    return true;
}

static int64_t first_dim(const gs_instr *in) {
    gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    return d.n ? d.v[0] : -1;
}

static bool rule_all_to_all(builder *b) {
    int64_t split = gs_instr_int(b->in, GS_ATTR_SPLIT_DIMENSION, first_dim(b->in));
    int64_t concat = gs_instr_int(b->in, GS_ATTR_CONCAT_DIMENSION, first_dim(b->in));
    return rule_collective_dims(b, split, concat);
}

/* bitcast-convert: pointwise over the shorter shape; the extra minor dim of the other needs
 * replication. */
static bool rule_bitcast_convert(builder *b) {
    if (b->n_res != 1 || !op_array(b, 0)) return false;
    const gs_shape *is = op_shape(b, 0), *os = b->leaves[0];
    const gs_shape *s = is->rank < os->rank ? is : os;
    if (is->rank != os->rank && abs(is->rank - os->rank) != 1) return false;
    pointwise(b, s->rank, s->dims, NULL, NULL);
    if (is->rank < os->rank) {
        b->rd[0] = os->rank - 1;
        fac(b, os->dims[os->rank - 1], GS_FACTOR_NEED_REPLICATION, false);
    } else if (is->rank > os->rank) {
        b->od[0] = is->rank - 1;
        fac(b, is->dims[is->rank - 1], GS_FACTOR_NEED_REPLICATION, false);
    }
    return true;
}

/* batch-norm-inference: every dim of the operand passes through to the result; the feature dim
 * also reaches the four 1-D operands. */
static bool rule_batch_norm_inference(builder *b) {
    const gs_shape *is = op_shape(b, 0);
    int64_t fi = gs_instr_int(b->in, GS_ATTR_FEATURE_INDEX, -1);
    if (!gs_shape_is_array(is) || fi < 0 || fi >= is->rank || b->n_res != 1) return false;
    for (int d = 0; d < is->rank; d++) {
        for (int i = 1; i < b->in->n_operands; i++) b->od[i] = d == fi ? 0 : -1;
        b->od[0] = d;
        b->rd[0] = d;
        fac(b, is->dims[d], GS_FACTOR_PASS_THROUGH, false);
    }
    return true;
}

/* batch-norm-training / -grad (no Shardy rule): the feature dim passes through everything;
 * the other operand dims pass through to the full-rank tensors. */
static bool rule_batch_norm(builder *b) {
    const gs_shape *is = op_shape(b, 0);
    int64_t fi = gs_instr_int(b->in, GS_ATTR_FEATURE_INDEX, -1);
    if (!gs_shape_is_array(is) || fi < 0 || fi >= is->rank || b->n_res < 1) return false;
    if (b->leaves[0]->rank != is->rank) return false;
    /* Full-rank tensors: operand 0, result leaf 0 and grad's operand 4 (grad_output). The
     * partitioner sums the statistics over the other dims by local sums and an all-reduce
     * (src/partition/h_batch_norm.c), so they may stay split. */
    bool grad = b->in->op == GS_OP_BATCH_NORM_GRAD;
    if (grad && (b->in->n_operands < 5 || op_rank(b, 4) != is->rank)) return false;
    for (int d = 0; d < is->rank; d++) {
        b->od[0] = d;
        b->rd[0] = d;
        if (grad) b->od[4] = d;
        if (d == fi) {
            for (int i = 1; i < b->in->n_operands; i++)
                if (op_rank(b, i) == 1) b->od[i] = 0;
            for (int r = 1; r < b->n_res; r++)
                if (b->res[r].rank == 1) b->rd[r] = 0;
        }
        fac(b, is->dims[d], GS_FACTOR_PASS_THROUGH, false);
    }
    return true;
}

/* broadcast: each result dim one factor, shared with the operand dim it comes from; an operand
 * dim of size 1 expanded in place gets a size-1 factor of its own first. */
static bool rule_broadcast(builder *b) {
    gs_ints dims = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    if (b->n_res != 1 || dims.n != op_rank(b, 0)) return false;
    const gs_shape *rs = b->leaves[0];
    for (int d = 0; d < rs->rank; d++) {
        int j = gs_ints_index(dims, d);
        if (j >= 0 && op_dim(b, 0, j) != rs->dims[d]) {
            if (op_dim(b, 0, j) != 1) return false;
            b->od[0] = j;
            fac(b, 1, GS_FACTOR_PASS_THROUGH, false);
            j = -1;
        }
        b->od[0] = j;
        b->rd[0] = d;
        fac(b, rs->dims[d], GS_FACTOR_PASS_THROUGH, false);
    }
    return true;
}

/* cholesky: batch dims pass through; the two matrix dims need replication. */
static bool rule_cholesky(builder *b) {
    if (b->n_res != 1 || op_rank(b, 0) < 2 || b->leaves[0]->rank != op_rank(b, 0)) return false;
    int n = op_rank(b, 0);
    gs_factor_kind k[GS_MAX_RANK];
    for (int d = 0; d < n; d++)
        k[d] = d < n - 2 ? GS_FACTOR_PASS_THROUGH : GS_FACTOR_NEED_REPLICATION;
    pointwise(b, n, op_shape(b, 0)->dims, k, NULL);
    return true;
}

/* Is v a slice? */
static bool is_slice(const gs_instr *v) { return v->op == GS_OP_SLICE; }
/* v, or the operand of v when v is a slice. */
static const gs_instr *before_slice(const gs_instr *v) { return is_slice(v) ? v->operands[0] : v; }

/* concatenate: the other dims pass through; the concatenated dim is a permutation factor when
 * every operand is a slice, or all are (slices of) one tensor and one is a slice, else
 * need-replication; with conservative propagation it has no factor at all. */
static bool rule_concatenate(builder *b) {
    gs_ints dims = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    if (b->n_res != 1 || dims.n != 1) return false;
    const gs_shape *rs = b->leaves[0];
    for (int i = 0; i < b->in->n_operands; i++)
        if (op_rank(b, i) != rs->rank) return false;
    const gs_instr *in = b->in;
    bool all_slices = true, any_slice = false, same = true;
    const gs_instr *base = before_slice(in->operands[0]);
    for (int i = 0; i < in->n_operands; i++) {
        all_slices &= is_slice(in->operands[i]);
        any_slice |= is_slice(in->operands[i]);
        same &= before_slice(in->operands[i]) == base;
    }
    gs_factor_kind ck =
        all_slices || (same && any_slice) ? GS_FACTOR_PERMUTATION : GS_FACTOR_NEED_REPLICATION;
    for (int d = 0; d < rs->rank; d++) {
        if (d != dims.v[0])
            all(b, ALL, d, rs->dims[d], GS_FACTOR_PASS_THROUGH, false);
        else if (!b->conservative)
            all(b, ALL, d, rs->dims[d], ck, false);
    }
    return true;
}

/* convolution: batch groups, per-group batch, spatial dims (number of windows as a permutation
 * factor and window size as a reduction factor, the larger first, neither with conservative
 * propagation), feature groups, input features (reduction), per-group output features. */
static bool rule_convolution(builder *b) {
    const gs_attr *cd = gs_instr_attr(b->in, GS_ATTR_DIM_LABELS);
    if (!cd || b->in->n_operands < 2 || b->n_res != 1) return false;
    const gs_conv_dims *c = cd->u.conv;
    const gs_shape *is = op_shape(b, 0), *ks = op_shape(b, 1), *os = b->leaves[0];
    if (!gs_shape_is_array(is) || !gs_shape_is_array(ks)) return false;
    if (c->in_rank != is->rank || c->k_rank != ks->rank || c->out_rank != os->rank) return false;
    int64_t fgc = gs_instr_int(b->in, GS_ATTR_FEATURE_GROUP_COUNT, 1);
    int64_t bgc = gs_instr_int(b->in, GS_ATTR_BATCH_GROUP_COUNT, 1);
    if (fgc < 1 || bgc < 1) return false;
    const gs_factor_kind pt = GS_FACTOR_PASS_THROUGH;
    if (bgc > 1) fac_at(b, (int)c->in_batch, (int)c->k_out_feature, (int)c->out_feature, bgc, pt);
    fac_at(b, (int)c->in_batch, -1, (int)c->out_batch, os->dims[c->out_batch], pt);
    for (int s = 0; !b->conservative && s < c->n_spatial; s++) {
        int ld = (int)c->in_spatial[s], kd = (int)c->k_spatial[s], od = (int)c->out_spatial[s];
        int64_t windows = os->dims[od], wsize = ks->dims[kd], left = is->dims[ld];
        for (int t = 0; t < 2; t++) {
            /* t = 0: the larger of the two (windows on a tie); t = 1: the other. */
            bool contracting = (windows >= wsize) == (t == 1);
            int64_t size = contracting ? wsize : windows;
            if (left < size) size = left;
            if (size <= 1) continue;
            if (contracting)
                fac_at(b, ld, kd, -1, size, GS_FACTOR_REDUCTION);
            else
                fac_at(b, ld, -1, od, size, GS_FACTOR_PERMUTATION);
            left /= size;
        }
    }
    if (fgc > 1) fac_at(b, (int)c->in_feature, (int)c->k_out_feature, (int)c->out_feature, fgc, pt);
    fac_at(b, (int)c->in_feature, (int)c->k_in_feature, -1, ks->dims[c->k_in_feature],
           GS_FACTOR_REDUCTION);
    int64_t out_features = os->dims[c->out_feature] / (bgc * fgc);
    if (out_features > 1)
        fac_at(b, -1, (int)c->k_out_feature, (int)c->out_feature, out_features, pt);
    return true;
}

/* dot (dot_general): batch factors, lhs free dims, rhs free dims (in dim order), then the
 * contracting dims as reduction factors. */
static bool rule_dot(builder *b) {
    if (b->in->n_operands != 2 || b->n_res != 1) return false;
    gs_ints lb = gs_instr_ints(b->in, GS_ATTR_LHS_BATCH_DIMS);
    gs_ints rb = gs_instr_ints(b->in, GS_ATTR_RHS_BATCH_DIMS);
    gs_ints lc = gs_instr_ints(b->in, GS_ATTR_LHS_CONTRACTING_DIMS);
    gs_ints rc = gs_instr_ints(b->in, GS_ATTR_RHS_CONTRACTING_DIMS);
    const gs_shape *ls = op_shape(b, 0), *rs = op_shape(b, 1);
    if (lb.n != rb.n || lc.n != rc.n || !gs_shape_is_array(ls) || !gs_shape_is_array(rs))
        return false;
    if (ls->rank - lb.n - lc.n + rs->rank - rb.n - rc.n + lb.n != b->leaves[0]->rank) return false;
    const gs_factor_kind pt = GS_FACTOR_PASS_THROUGH;
    int out = 0;
    for (int k = 0; k < lb.n; k++)
        fac_at(b, (int)lb.v[k], (int)rb.v[k], out++, ls->dims[lb.v[k]], pt);
    for (int d = 0; d < ls->rank; d++)
        if (!gs_ints_contains(lb, d) && !gs_ints_contains(lc, d))
            fac_at(b, d, -1, out++, ls->dims[d], pt);
    for (int d = 0; d < rs->rank; d++)
        if (!gs_ints_contains(rb, d) && !gs_ints_contains(rc, d))
            fac_at(b, -1, d, out++, rs->dims[d], pt);
    for (int k = 0; k < lc.n; k++)
        fac_at(b, (int)lc.v[k], (int)rc.v[k], -1, ls->dims[lc.v[k]], GS_FACTOR_REDUCTION);
    return true;
}

/* ragged-dot (XLA's rule for Shardy, mhlo_extensions): batch factors (on the group sizes'
 * prefix too, but for a ragged batch dim), the lhs free dims (those before a ragged free dim on
 * the group sizes' prefix; the ragged one need-replication), the rhs free dims, the contracting
 * dims as reductions (those before a ragged contracting dim on the prefix; the ragged one
 * need-replication), then the groups, need-replication: the rhs group dim and the group
 * sizes' last dim, or the result's leading dim and that last dim. */
static bool rule_ragged_dot(builder *b) {
    if (b->in->n_operands != 3 || b->n_res != 1 || !op_array(b, 2)) return false;
    gs_ints lb = gs_instr_ints(b->in, GS_ATTR_LHS_BATCH_DIMS);
    gs_ints rb = gs_instr_ints(b->in, GS_ATTR_RHS_BATCH_DIMS);
    gs_ints lc = gs_instr_ints(b->in, GS_ATTR_LHS_CONTRACTING_DIMS);
    gs_ints rc = gs_instr_ints(b->in, GS_ATTR_RHS_CONTRACTING_DIMS);
    gs_ints lr = gs_instr_ints(b->in, GS_ATTR_LHS_RAGGED_DIMS);
    gs_ints rg = gs_instr_ints(b->in, GS_ATTR_RHS_GROUP_DIMS);
    const gs_shape *ls = op_shape(b, 0), *rs = op_shape(b, 1), *gs = op_shape(b, 2);
    if (lb.n != rb.n || lc.n != rc.n || lr.n != 1 || !gs_shape_is_array(ls) ||
        !gs_shape_is_array(rs) || gs->rank < 1)
        return false;
    int64_t ragged = lr.v[0];
    enum { NON_CONTRACTING, CONTRACTING, BATCH } mode =
        gs_ints_contains(lc, ragged) ? CONTRACTING
        : gs_ints_contains(lb, ragged) ? BATCH
                                        : NON_CONTRACTING;
    if ((mode == NON_CONTRACTING) != (rg.n == 1) || rg.n > 1) return false;
    /* Rank-1 group sizes stand for every prefix (no factor reaches them but the groups). */
    bool prefixed = gs->rank > 1;
    int gd = 0, out = mode == CONTRACTING ? 1 : 0;
    const gs_factor_kind pt = GS_FACTOR_PASS_THROUGH;
    for (int k = 0; k < lb.n; k++) {
        b->od[0] = (int)lb.v[k];
        b->od[1] = (int)rb.v[k];
        b->od[2] = mode != BATCH && prefixed ? gd++ : -1;
        b->rd[0] = out++;
        fac(b, ls->dims[lb.v[k]], pt, false);
    }
    bool on_sizes = mode == NON_CONTRACTING;
    for (int d = 0; d < ls->rank; d++) {
        if (gs_ints_contains(lb, d) || gs_ints_contains(lc, d)) continue;
        gs_factor_kind k = pt;
        if (d == ragged) {
            on_sizes = false;
            k = GS_FACTOR_NEED_REPLICATION;
        }
        b->od[0] = d;
        b->od[2] = on_sizes && prefixed ? gd++ : -1;
        b->rd[0] = out++;
        fac(b, ls->dims[d], k, false);
    }
    for (int d = 0; d < rs->rank; d++)
        if (!gs_ints_contains(rb, d) && !gs_ints_contains(rc, d) && !gs_ints_contains(rg, d))
            fac_at(b, -1, d, out++, rs->dims[d], pt);
    on_sizes = mode == CONTRACTING;
    for (int k = 0; k < lc.n; k++) {
        gs_factor_kind kind = GS_FACTOR_REDUCTION;
        if (lc.v[k] == ragged) {
            on_sizes = false;
            kind = GS_FACTOR_NEED_REPLICATION;
        }
        b->od[0] = (int)lc.v[k];
        b->od[1] = (int)rc.v[k];
        b->od[2] = on_sizes && prefixed ? gd++ : -1;
        fac(b, ls->dims[lc.v[k]], kind, false);
    }
    if (prefixed && gd != gs->rank - 1) return false;
    int64_t groups = gs->dims[gs->rank - 1];
    if (mode == NON_CONTRACTING) {
        b->od[1] = (int)rg.v[0];
        b->od[2] = gs->rank - 1;
        fac(b, rs->dims[rg.v[0]], GS_FACTOR_NEED_REPLICATION, false);
    } else if (mode == CONTRACTING) {
        b->od[2] = gs->rank - 1;
        b->rd[0] = 0;
        fac(b, groups, GS_FACTOR_NEED_REPLICATION, false);
    }
    return true;
}

/* dynamic-slice: sliced dims need replication and block propagation. */
static bool rule_dynamic_slice(builder *b) {
    return pointwise_mismatch(b, GS_FACTOR_NEED_REPLICATION, true);
}

/* dynamic-update-slice: dims the update covers whole pass through everything; on the others
 * the operand and result share a pass-through factor and the update has its own, which needs
 * replication unless every start index is a constant. */
static bool rule_dynamic_update_slice(builder *b) {
    const gs_instr *in = b->in;
    if (b->n_res != 1 || in->n_operands < 2 || !op_array(b, 0) || op_rank(b, 1) != op_rank(b, 0))
        return false;
    bool constant = true;
    for (int i = 2; i < in->n_operands; i++) constant &= in->operands[i]->op == GS_OP_CONSTANT;
    for (int d = 0; d < op_rank(b, 0); d++) {
        int64_t n = op_dim(b, 0, d), u = op_dim(b, 1, d);
        if (n == u) {
            all(b, ALL, d, n, GS_FACTOR_PASS_THROUGH, false);
            continue;
        }
        b->od[0] = d;
        b->rd[0] = d;
        fac(b, n, GS_FACTOR_PASS_THROUGH, false);
        b->od[1] = d;
        fac(b, u, constant ? GS_FACTOR_PASS_THROUGH : GS_FACTOR_NEED_REPLICATION, false);
    }
    return true;
}

/* fft: leading dims pass through; the transformed dims need replication, the last one blocked
 * when the transform changes its size (rfft, irfft). */
static bool rule_fft(builder *b) {
    if (b->n_res != 1 || !op_array(b, 0) || op_rank(b, 0) != b->leaves[0]->rank) return false;
    int n = op_rank(b, 0), nf = gs_instr_ints(b->in, GS_ATTR_FFT_LENGTH).n;
    if (n < 1) return false;
    for (int d = 0; d < n; d++) {
        int64_t s = op_dim(b, 0, d);
        if (d < n - nf)
            all(b, ALL, d, s, GS_FACTOR_PASS_THROUGH, false);
        else if (d < n - 1)
            all(b, ALL, d, s, GS_FACTOR_NEED_REPLICATION, false);
        else
            all(b, ALL, d, s, GS_FACTOR_NEED_REPLICATION, s != res_dim(b, 0, n - 1));
    }
    return true;
}

/* The dims of a gather or a scatter, named as Shardy's addGatherScatterFactors names them. */
typedef struct gather_dims {
    const gs_shape *input, *slices, *indices; /* operand / scatter input; result / updates */
    int64_t ivd;                              /* index_vector_dim */
    gs_ints offset, collapsed;                /* offset_dims / update_window_dims; collapsed /
                                                 inserted_window_dims */
    gs_ints input_batching, indices_batching; /* the batching dims of each */
    bool scatter;                             /* a scatter (else a gather) */
    bool scatter_reduces;                     /* scatter: its combiner is a plain reduction */
    int n_inputs;                             /* scatter: number of inputs (and updates) */
} gather_dims;

/* A factor on the given input, indices and slices dims (-1: none), placed as a gather or a
 * scatter places them (a scatter's results follow its inputs). */
static void gather_factor(builder *b, const gather_dims *g, int input, int indices, int slices,
                          int64_t size, gs_factor_kind k, bool blocked) {
    if (!g->scatter) {
        b->od[0] = input;
        b->od[1] = indices;
        b->rd[0] = slices;
    } else {
        for (int i = 0; i < g->n_inputs; i++) {
            b->od[i] = input;
            b->od[g->n_inputs + 1 + i] = slices;
            b->rd[i] = input;
        }
        b->od[g->n_inputs] = indices;
    }
    fac(b, size, k, blocked);
}

/* Shardy's gather/scatter rule: slices dims in order (offset dims from their input dim, whole
 * ones pass through; batch dims from the indices, with the input's batching dim), then the
 * collapsed dims, then the index vector dim. */
static bool gather_scatter(builder *b, const gather_dims *g) {
    int input = 0, batch = 0;
    const gs_shape *is = g->input, *ss = g->slices, *xs = g->indices;
    for (int sd = 0; sd < ss->rank; sd++) {
        int64_t ssize = ss->dims[sd];
        if (gs_ints_contains(g->offset, sd)) {
            while (gs_ints_contains(g->collapsed, input) ||
                   gs_ints_contains(g->input_batching, input))
                input++;
            if (input >= is->rank) return false;
            int64_t isize = is->dims[input];
            if (isize == ssize) {
                gather_factor(b, g, input, -1, sd, isize, GS_FACTOR_PASS_THROUGH, false);
            } else if (g->scatter) {
                gather_factor(b, g, input, -1, -1, isize, GS_FACTOR_NEED_REPLICATION, false);
                gather_factor(b, g, -1, -1, sd, ssize, GS_FACTOR_NEED_REPLICATION, false);
            } else if (ssize == 1) {
                gather_factor(b, g, input, -1, -1, isize, GS_FACTOR_REDUCTION, false);
                gather_factor(b, g, -1, -1, sd, ssize, GS_FACTOR_NEED_REPLICATION, false);
            } else {
                gather_factor(b, g, input, -1, sd, isize, GS_FACTOR_NEED_REPLICATION, true);
            }
            input++;
        } else {
            int xd = batch < g->ivd ? batch : batch + 1;
            if (xd >= xs->rank) return false;
            int k = gs_ints_index(g->indices_batching, xd);
            int ib = k >= 0 && k < g->input_batching.n ? (int)g->input_batching.v[k] : -1;
            gs_factor_kind kind = GS_FACTOR_PASS_THROUGH;
            if (g->scatter && k < 0)
                kind = g->scatter_reduces ? GS_FACTOR_REDUCTION : GS_FACTOR_NEED_REPLICATION;
            gather_factor(b, g, ib, xd, sd, ssize, kind, false);
            batch++;
        }
    }
    for (int k = 0; k < g->collapsed.n; k++) {
        int d = (int)g->collapsed.v[k];
        if (d < 0 || d >= is->rank) return false;
        gs_factor_kind kind = g->scatter         ? GS_FACTOR_PASS_THROUGH
                              : is->dims[d] == 1 ? GS_FACTOR_NEED_REPLICATION
                                                 : GS_FACTOR_REDUCTION;
        gather_factor(b, g, d, -1, -1, is->dims[d], kind, false);
    }
    if (g->ivd < xs->rank)
        gather_factor(b, g, -1, (int)g->ivd, -1, xs->dims[g->ivd], GS_FACTOR_NEED_REPLICATION,
                      false);
    return true;
}

static bool rule_gather(builder *b) {
    if (b->in->n_operands != 2 || b->n_res != 1 || !op_array(b, 0) || !op_array(b, 1)) return false;
    gather_dims g = {
        .input = op_shape(b, 0),
        .slices = b->leaves[0],
        .indices = op_shape(b, 1),
        .ivd = gs_instr_int(b->in, GS_ATTR_INDEX_VECTOR_DIM, op_rank(b, 1)),
        .offset = gs_instr_ints(b->in, GS_ATTR_OFFSET_DIMS),
        .collapsed = gs_instr_ints(b->in, GS_ATTR_COLLAPSED_SLICE_DIMS),
        .input_batching = gs_instr_ints(b->in, GS_ATTR_OPERAND_BATCHING_DIMS),
        .indices_batching = gs_instr_ints(b->in, GS_ATTR_START_INDICES_BATCHING_DIMS),
    };
    return gather_scatter(b, &g);
}

/* Is the scatter's combiner, for every input i, one add, multiply, maximum or minimum (and, or
 * on pred) of its parameters i and i + n, all of one opcode (Shardy's
 * getCommonSupportedReductionOp)? */
static bool scatter_reduces(const gs_instr *in, int n) {
    const gs_computation *c = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!c || !c->root || c->n_params != 2 * n) return false;
    const gs_instr *root = c->root;
    if (n > 1 && (root->op != GS_OP_TUPLE || root->n_operands != n)) return false;
    gs_opcode common = GS_OP_PARAMETER;
    for (int i = 0; i < n; i++) {
        const gs_instr *v = n > 1 ? root->operands[i] : root;
        if (v->n_operands != 2 || !gs_shape_is_array(v->shape)) return false;
        bool logical = v->shape->type == GS_PRED && (v->op == GS_OP_AND || v->op == GS_OP_OR);
        if (!logical && v->op != GS_OP_ADD && v->op != GS_OP_MULTIPLY && v->op != GS_OP_MAXIMUM &&
            v->op != GS_OP_MINIMUM)
            return false;
        if (i > 0 && v->op != common) return false;
        common = v->op;
        const gs_instr *x = v->operands[0], *y = v->operands[1];
        if (x->op != GS_OP_PARAMETER || y->op != GS_OP_PARAMETER) return false;
        int64_t px = x->parameter_number, py = y->parameter_number;
        if (!((px == i && py == i + n) || (px == i + n && py == i))) return false;
    }
    return true;
}

static bool rule_scatter(builder *b) {
    int n = (b->in->n_operands - 1) / 2;
    if (n < 1 || b->in->n_operands != 2 * n + 1 || b->n_res != n) return false;
    for (int i = 0; i < b->in->n_operands; i++)
        if (!op_array(b, i)) return false;
    gather_dims g = {
        .input = op_shape(b, 0),
        .slices = op_shape(b, n + 1),
        .indices = op_shape(b, n),
        .ivd = gs_instr_int(b->in, GS_ATTR_INDEX_VECTOR_DIM, op_rank(b, n)),
        .offset = gs_instr_ints(b->in, GS_ATTR_UPDATE_WINDOW_DIMS),
        .collapsed = gs_instr_ints(b->in, GS_ATTR_INSERTED_WINDOW_DIMS),
        .input_batching = gs_instr_ints(b->in, GS_ATTR_INPUT_BATCHING_DIMS),
        .indices_batching = gs_instr_ints(b->in, GS_ATTR_SCATTER_INDICES_BATCHING_DIMS),
        .scatter = true,
        .scatter_reduces = scatter_reduces(b->in, n),
        .n_inputs = n,
    };
    return gather_scatter(b, &g);
}

/* pad and slice: dims whose size changes are permutation factors, blocked with conservative
 * propagation. */
static bool rule_pad_slice(builder *b) {
    return pointwise_mismatch(b, GS_FACTOR_PERMUTATION, b->conservative);
}

/* reduce: the first half of the operands are inputs (same dims), the second half scalar init
 * values; one result per input. Reduced dims are reduction factors. */
static bool rule_reduce(builder *b) {
    int n = b->in->n_operands / 2;
    if (n < 1 || b->in->n_operands != 2 * n || b->n_res != n) return false;
    gs_ints rd = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    const gs_shape *is = op_shape(b, 0);
    for (int i = 0; i < n; i++)
        if (!op_array(b, i) || !gs_shape_same_dims(op_shape(b, i), is)) return false;
    for (int r = 0; r < n; r++)
        if (b->leaves[r]->rank != is->rank - rd.n) return false;
    int out = 0;
    for (int d = 0; d < is->rank; d++) {
        bool reduced = gs_ints_contains(rd, d);
        for (int i = 0; i < n; i++) b->od[i] = d;
        if (!reduced) {
            for (int r = 0; r < n; r++) b->rd[r] = out;
            out++;
        }
        fac(b, is->dims[d], reduced ? GS_FACTOR_REDUCTION : GS_FACTOR_PASS_THROUGH, false);
    }
    return true;
}

/* Shardy's isWindowPassthroughDim: no padding, stride 1, window size 1 (dilations are not
 * looked at). */
static bool window_passthrough(const gs_window_dim *w) {
    return w->pad_lo == 0 && w->pad_hi == 0 && w->stride == 1 && w->size == 1;
}

/* reduce-window: pointwise over the result's dims; windowed dims are permutation factors,
 * blocked with conservative propagation. */
static bool rule_reduce_window(builder *b) {
    int n = b->in->n_operands / 2;
    if (n < 1 || b->in->n_operands != 2 * n || b->n_res != n) return false;
    const gs_attr *wa = gs_instr_attr(b->in, GS_ATTR_WINDOW);
    const gs_shape *rs = b->leaves[0];
    for (int i = 0; i < n; i++)
        if (op_rank(b, i) != rs->rank || b->leaves[i]->rank != rs->rank) return false;
    if (!wa || wa->u.window->n != rs->rank) return false;
    gs_factor_kind k[GS_MAX_RANK];
    bool blocked[GS_MAX_RANK];
    for (int d = 0; d < rs->rank; d++) {
        bool pass = window_passthrough(&wa->u.window->dims[d]);
        k[d] = pass ? GS_FACTOR_PASS_THROUGH : GS_FACTOR_PERMUTATION;
        blocked[d] = b->conservative && !pass;
    }
    pointwise(b, rs->rank, rs->dims, k, blocked);
    return true;
}

/* select-and-scatter (operand, source, init): unwindowed dims pass through; a windowed dim is a
 * need-replication factor of the source and a permutation factor of the operand and result
 * (both blocked with conservative propagation). */
static bool rule_select_and_scatter(builder *b) {
    const gs_attr *wa = gs_instr_attr(b->in, GS_ATTR_WINDOW);
    if (b->in->n_operands != 3 || b->n_res != 1 || !wa) return false;
    const gs_shape *rs = b->leaves[0];
    if (op_rank(b, 0) != rs->rank || op_rank(b, 1) != rs->rank || wa->u.window->n != rs->rank)
        return false;
    for (int d = 0; d < rs->rank; d++) {
        if (window_passthrough(&wa->u.window->dims[d])) {
            all(b, ALL, d, rs->dims[d], GS_FACTOR_PASS_THROUGH, false);
            continue;
        }
        b->od[1] = d;
        fac(b, op_dim(b, 1, d), GS_FACTOR_NEED_REPLICATION, b->conservative);
        b->od[0] = d;
        b->rd[0] = d;
        fac(b, rs->dims[d], GS_FACTOR_PERMUTATION, b->conservative);
    }
    return true;
}

/* reshape: Shardy's factorisation, walking operand and result dims major to minor: size-1 dims
 * get a size-1 factor; while the products so far agree, the gcd of the next sizes is a common
 * factor (or, when it is 1, each side takes its next size alone); once they diverge, the side
 * behind takes the factor that makes the products meet again, else what keeps the gcd for the
 * next step. A reshape of zero elements has no rule. */
static bool rule_reshape(builder *b) {
    if (b->n_res != 1 || !op_array(b, 0)) return false;
    const gs_shape *is = op_shape(b, 0), *os = b->leaves[0];
    if (gs_shape_elements(is) != gs_shape_elements(os) || gs_shape_elements(is) == 0) return false;
    int ir = is->rank, orr = os->rank, i = 0, o = 0;
    int64_t dims_in = 1, dims_out = 1, fin = 1, fout = 1;
    while (i < ir || o < orr) {
        if (b->failed) return false;
        if (i < ir && is->dims[i] == 1) {
            b->od[0] = i++;
            fac(b, 1, GS_FACTOR_PASS_THROUGH, false);
            continue;
        }
        if (o < orr && os->dims[o] == 1) {
            b->rd[0] = o++;
            fac(b, 1, GS_FACTOR_PASS_THROUGH, false);
            continue;
        }
        if (i < ir && dims_in == fin) dims_in *= is->dims[i];
        if (o < orr && dims_out == fout) dims_out *= os->dims[o];
        int64_t next_in = dims_in / fin, next_out = dims_out / fout;
        int64_t g = gs_gcd64(next_in, next_out);
        if (fin == fout) {
            if (g > 1) {
                b->od[0] = i;
                b->rd[0] = o;
                fac(b, g, GS_FACTOR_PASS_THROUGH, false);
                fin *= g;
                fout *= g;
            } else {
                if (next_in <= 1 || next_out <= 1) return false;
                b->od[0] = i;
                fac(b, next_in, GS_FACTOR_PASS_THROUGH, false);
                fin *= next_in;
                b->rd[0] = o;
                fac(b, next_out, GS_FACTOR_PASS_THROUGH, false);
                fout *= next_out;
            }
        } else if (fin < fout) {
            next_in = diverged_factor(next_in, g, fin, fout);
            b->od[0] = i;
            fac(b, next_in, GS_FACTOR_PASS_THROUGH, false);
            fin *= next_in;
        } else {
            next_out = diverged_factor(next_out, g, fout, fin);
            b->rd[0] = o;
            fac(b, next_out, GS_FACTOR_PASS_THROUGH, false);
            fout *= next_out;
        }
        if (i < ir && dims_in == fin) i++;
        if (o < orr && dims_out == fout) o++;
    }
    return true;
}

/* reverse: reversed dims are permutation factors. */
static bool rule_reverse(builder *b) {
    if (b->n_res != 1 || op_rank(b, 0) != b->leaves[0]->rank) return false;
    gs_ints dims = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    gs_factor_kind k[GS_MAX_RANK];
    for (int d = 0; d < b->leaves[0]->rank; d++)
        k[d] = gs_ints_contains(dims, d) ? GS_FACTOR_PERMUTATION : GS_FACTOR_PASS_THROUGH;
    pointwise(b, b->leaves[0]->rank, b->leaves[0]->dims, k, NULL);
    return true;
}

/* rng-bit-generator: the state and the output state share blocked need-replication factors;
 * the output's dims are pass-through factors of their own. */
static bool rule_rng_bit_generator(builder *b) {
    if (b->n_res != 2 || !op_array(b, 0)) return false;
    for (int d = 0; d < op_rank(b, 0); d++) {
        b->od[0] = d;
        b->rd[0] = d;
        fac(b, op_dim(b, 0, d), GS_FACTOR_NEED_REPLICATION, true);
    }
    for (int d = 0; d < b->leaves[1]->rank; d++) {
        b->rd[1] = d;
        fac(b, res_dim(b, 1, d), GS_FACTOR_PASS_THROUGH, false);
    }
    return true;
}

/* sort: the sort dim needs replication (blocked when every other dim has size 1); the others
 * pass through every operand and result. */
static bool rule_sort(builder *b) {
    int n = b->in->n_operands;
    const gs_shape *is = op_shape(b, 0);
    if (b->n_res != n || !gs_shape_is_array(is)) return false;
    for (int i = 0; i < n; i++)
        if (!op_array(b, i) || !gs_shape_same_dims(op_shape(b, i), is) ||
            !gs_shape_same_dims(b->leaves[i], is))
            return false;
    int64_t sd = first_dim(b->in);
    bool blocked = true;
    for (int d = 0; d < is->rank; d++) blocked &= d == sd || is->dims[d] == 1;
    for (int d = 0; d < is->rank; d++) {
        if (d == sd)
            all(b, ALL, d, is->dims[d], GS_FACTOR_NEED_REPLICATION, blocked);
        else
            all(b, ALL, d, is->dims[d], GS_FACTOR_PASS_THROUGH, false);
    }
    return true;
}

/* transpose: result dim d and operand dim perm[d] share a factor. */
static bool rule_transpose(builder *b) {
    gs_ints perm = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    if (b->n_res != 1 || perm.n != b->leaves[0]->rank || perm.n != op_rank(b, 0)) return false;
    for (int d = 0; d < perm.n; d++)
        fac_at(b, (int)perm.v[d], -1, d, op_dim(b, 0, (int)perm.v[d]), GS_FACTOR_PASS_THROUGH);
    return true;
}

/* triangular-solve (a, b): batch dims pass through; the matrix dims need replication, a's
 * non-contracting dim shared with b, the result's non-contracting dim with b, and a's
 * contracting dim with the result. */
static bool rule_triangular_solve(builder *b) {
    if (b->in->n_operands != 2 || b->n_res != 1) return false;
    int n = op_rank(b, 0);
    if (n < 2 || op_rank(b, 1) != n || b->leaves[0]->rank != n) return false;
    pointwise(b, n - 2, op_shape(b, 0)->dims, NULL, NULL);
    int d1 = n - 2, d2 = n - 1;
    const char *t = gs_instr_str(b->in, GS_ATTR_TRANSPOSE_A);
    bool tr = t && (strcmp(t, "TRANSPOSE") == 0 || strcmp(t, "ADJOINT") == 0);
    const gs_factor_kind nr = GS_FACTOR_NEED_REPLICATION;
    const int64_t *as = op_shape(b, 0)->dims, *bs = op_shape(b, 1)->dims;
    if (gs_instr_bool(b->in, GS_ATTR_LEFT_SIDE, false)) {
        /* op(a) @ result = b */
        int anc = tr ? d2 : d1, ac = tr ? d1 : d2;
        fac_at(b, anc, d1, -1, as[anc], nr);
        fac_at(b, -1, d2, d2, bs[d2], nr);
        fac_at(b, ac, -1, d1, as[ac], nr);
    } else {
        /* result @ op(a) = b */
        int anc = tr ? d1 : d2, ac = tr ? d2 : d1;
        fac_at(b, -1, d1, d1, bs[d1], nr);
        fac_at(b, anc, d2, -1, as[anc], nr);
        fac_at(b, ac, -1, d2, as[ac], nr);
    }
    return true;
}

/* topk (operand -> values, indices), as Shardy's rule for the mhlo.topk custom call: dims of
 * equal size pass through; the sorted dim is one blocked need-replication factor of the
 * operand's size, shared by all three. `always` makes the last dim that factor even when k is
 * its whole size (gspmd's topk partitioner never splits it). */
static bool rule_topk(builder *b, bool always) {
    const gs_shape *is = op_shape(b, 0);
    if (b->in->n_operands != 1 || !gs_shape_is_array(is) || is->rank < 1 || b->n_res != 2)
        return false;
    for (int r = 0; r < 2; r++)
        if (b->leaves[r]->rank != is->rank) return false;
    for (int d = 0; d < is->rank; d++) {
        bool same = is->dims[d] == res_dim(b, 0, d) && !(always && d == is->rank - 1);
        all(b, ALL, d, is->dims[d], same ? GS_FACTOR_PASS_THROUGH : GS_FACTOR_NEED_REPLICATION,
            !same);
    }
    return true;
}

/* ------------------------------------------------------------------ custom calls */

/* Custom-call targets Shardy treats as pointwise. */
static const char *const POINTWISE_TARGETS[] = {
    "annotate_device_placement",
    "Cholesky",
    "CompactWyHelper",
    "InspectSharding",
    "InvertDiagBlocksLowerTriangular",
    "InvertDiagBlocksUpperTriangular",
    "LayoutConstraint",
    "mhlo.erf",
    "MoveToDevice",
    "MoveToHost",
    "X64SplitHigh",
    "X64SplitLow",
    "xla.megascale.provide_metadata",
    "_SPMDInternalOp_MultiPad",
    "_SPMDInternalOp_RotateRight",
    "_SPMDInternalOp_MultiRotate",
    "_SPMDInternalOp_MultiSlice",
    "_SPMDInternalOp_Wrap",
    "Sharding", /* sdy.sharding_constraint / mhlo.sharding, as XLA writes it */
};

/* Eigh, Qr and QrDecompositionBlock (one operand, two results), and
 * ProductOfElementaryHouseholderReflectors (two operands, one result), as in jax.lax.linalg:
 * batch dims pointwise, then the matrix dims. */
static bool rule_linalg_call(builder *b, const char *t) {
    bool householder = strcmp(t, "ProductOfElementaryHouseholderReflectors") == 0;
    int n_ops = householder ? 2 : 1, n_res = householder ? 1 : 2;
    if (b->in->n_operands != n_ops || b->n_res != n_res) return false;
    const gs_shape *is = op_shape(b, 0);
    if (!gs_shape_is_array(is) || is->rank < 2) return false;
    int n1 = is->rank - 2, n2 = is->rank - 1;
    pointwise(b, n1, is->dims, NULL, NULL);
    bool eigh = strcmp(t, "Eigh") == 0;
    if (householder ? op_rank(b, 1) <= n1 : b->leaves[1]->rank <= n1) return false;
    /* The matrix dims correspond between operand 0 and result 0 (Eigh: pass-through, with the
     * eigenvalues' dim on the last); then Qr's second result or the taus have a dim of their
     * own. */
    const gs_factor_kind k = eigh ? GS_FACTOR_PASS_THROUGH : GS_FACTOR_NEED_REPLICATION;
    fac_at(b, n1, -1, n1, is->dims[n1], k);
    if (eigh) b->rd[1] = n1;
    fac_at(b, n2, -1, n2, is->dims[n2], k);
    if (householder) {
        fac_at(b, -1, n1, -1, op_dim(b, 1, n1), k);
    } else if (!eigh) {
        b->rd[1] = n1;
        fac(b, res_dim(b, 1, n1), k, false);
    }
    return true;
}

/* ApproxTopK / PartialReduce (operand, iota, two scalar inits -> values, indices): equal dims
 * pass through; the reduced dim is a pass-through factor of the operand and iota and a blocked
 * need-replication factor of the results. */
static bool rule_approx_topk(builder *b) {
    if (b->in->n_operands != 4 || b->n_res != 2 || !op_array(b, 0)) return false;
    const gs_shape *is = op_shape(b, 0), *os = b->leaves[0];
    if (is->rank != os->rank) return false;
    for (int d = 0; d < is->rank; d++) {
        if (is->dims[d] == os->dims[d]) {
            all(b, ALL, d, is->dims[d], GS_FACTOR_PASS_THROUGH, false);
            continue;
        }
        b->od[0] = b->od[1] = d;
        fac(b, is->dims[d], GS_FACTOR_PASS_THROUGH, false);
        b->rd[0] = b->rd[1] = d;
        fac(b, os->dims[d], GS_FACTOR_NEED_REPLICATION, true);
    }
    return true;
}

/* X64Combine: pointwise, unless a rng-bit-generator uses it: then its one dim is a blocked
 * need-replication factor (the generator's state must stay whole). */
static bool rule_x64_combine(builder *b) {
    const gs_computation *c = b->in->parent;
    bool rng = false;
    for (int k = 0; c && k < c->n_instrs && !rng; k++) {
        const gs_instr *u = c->instrs[k];
        if (u->op != GS_OP_RNG_BIT_GENERATOR) continue;
        for (int i = 0; i < u->n_operands; i++) rng |= u->operands[i] == b->in;
    }
    if (!rng) return rule_pointwise(b);
    if (b->n_res != 1 || b->leaves[0]->rank != 1) return false;
    all(b, ALL, 0, res_dim(b, 0, 0), GS_FACTOR_NEED_REPLICATION, true);
    return true;
}

static bool rule_custom_call(builder *b) {
    const char *t = gs_instr_str(b->in, GS_ATTR_CUSTOM_CALL_TARGET);
    if (!t) return false;
    for (size_t k = 0; k < sizeof POINTWISE_TARGETS / sizeof POINTWISE_TARGETS[0]; k++)
        if (strcmp(t, POINTWISE_TARGETS[k]) == 0) return rule_pointwise(b);
    if (strcmp(t, "Eigh") == 0 || strcmp(t, "Qr") == 0 || strcmp(t, "QrDecompositionBlock") == 0 ||
        strcmp(t, "ProductOfElementaryHouseholderReflectors") == 0)
        return rule_linalg_call(b, t);
    if (strcmp(t, "mhlo.topk") == 0) return rule_topk(b, false);
    if (strcmp(t, "ApproxTopK") == 0 || strcmp(t, "PartialReduce") == 0) return rule_approx_topk(b);
    if (strcmp(t, "X64Combine") == 0) return rule_x64_combine(b);
    return false;
}

/* ------------------------------------------------------------------ dispatch */

bool gs_op_family_has_rule(gs_op_family f) {
    if (gs_op_family_moves_data(f)) return true;
    switch (f) {
    case GS_FAM_PARAMETER:
    case GS_FAM_CONSTANT:
    case GS_FAM_IOTA:
    case GS_FAM_UNARY:
    case GS_FAM_BINARY:
    case GS_FAM_TERNARY:
    case GS_FAM_COMPARE:
    case GS_FAM_CONVERT:
    case GS_FAM_DOT:
    case GS_FAM_CONVOLUTION:
    case GS_FAM_REDUCE:
    case GS_FAM_REDUCE_WINDOW:
    case GS_FAM_SELECT_AND_SCATTER:
    case GS_FAM_GATHER:
    case GS_FAM_SCATTER:
    case GS_FAM_SORT:
    case GS_FAM_TOPK:
    case GS_FAM_FFT:
    case GS_FAM_MAP:
    case GS_FAM_COPY:
    case GS_FAM_RNG:
    case GS_FAM_BATCH_NORM:
    case GS_FAM_LINALG: return true;
    default: return false;
    }
}

/* The specific rule of the instruction; false when it has none or it does not apply. Sets
 * b->registered to whether Shardy's registry has it. Opcodes with no StableHLO counterpart
 * Shardy knows (erf, map, copy, bitcast, topk, batch-norm training and grad, the sources) keep
 * a rule of their own for gspmd's other readers but are not registered. */
static bool op_rule(builder *b) {
    const gs_instr *in = b->in;
    b->registered = true;
    switch (in->op) {
    case GS_OP_SELECT: return rule_pointwise_scalars(b, b->n_res ? b->leaves[0] : in->shape);
    case GS_OP_CLAMP: return in->n_operands == 3 && rule_pointwise_scalars(b, op_shape(b, 1));
    case GS_OP_BITCAST_CONVERT: return rule_bitcast_convert(b);
    case GS_OP_ALL_REDUCE:
    case GS_OP_COLLECTIVE_PERMUTE:
    case GS_OP_COLLECTIVE_BROADCAST: return rule_pointwise(b);
    case GS_OP_ALL_GATHER:
    case GS_OP_REDUCE_SCATTER: return rule_collective_dims(b, first_dim(in), first_dim(in));
    case GS_OP_ALL_TO_ALL: return rule_all_to_all(b);
    case GS_OP_BATCH_NORM_INFERENCE: return rule_batch_norm_inference(b);
    case GS_OP_BROADCAST: return rule_broadcast(b);
    case GS_OP_CHOLESKY: return rule_cholesky(b);
    case GS_OP_CONCATENATE: return rule_concatenate(b);
    case GS_OP_CONVOLUTION: return rule_convolution(b);
    case GS_OP_CUSTOM_CALL: return rule_custom_call(b);
    case GS_OP_DOT: return rule_dot(b);
    case GS_OP_RAGGED_DOT: return rule_ragged_dot(b);
    case GS_OP_DYNAMIC_SLICE: return rule_dynamic_slice(b);
    case GS_OP_DYNAMIC_UPDATE_SLICE: return rule_dynamic_update_slice(b);
    case GS_OP_FFT: return rule_fft(b);
    case GS_OP_GATHER: return rule_gather(b);
    case GS_OP_PAD:
    case GS_OP_SLICE: return rule_pad_slice(b);
    case GS_OP_REDUCE: return rule_reduce(b);
    case GS_OP_REDUCE_WINDOW: return rule_reduce_window(b);
    case GS_OP_RESHAPE: return rule_reshape(b);
    case GS_OP_REVERSE: return rule_reverse(b);
    case GS_OP_RNG_BIT_GENERATOR: return rule_rng_bit_generator(b);
    case GS_OP_SCATTER: return rule_scatter(b);
    case GS_OP_SELECT_AND_SCATTER: return rule_select_and_scatter(b);
    case GS_OP_SORT: return rule_sort(b);
    case GS_OP_TRANSPOSE: return rule_transpose(b);
    case GS_OP_TRIANGULAR_SOLVE: return rule_triangular_solve(b);
    default: break;
    }
    switch (gs_op_info_of(in->op)->family) {
    case GS_FAM_UNARY:
    case GS_FAM_BINARY:
    case GS_FAM_COMPARE:
    case GS_FAM_CONVERT:
        if (in->op == GS_OP_ERF || in->op == GS_OP_STOCHASTIC_CONVERT) break;
        return rule_pointwise(b);
    default: break;
    }
    b->registered = false;
    switch (in->op) {
    case GS_OP_ERF:
    case GS_OP_STOCHASTIC_CONVERT:
    case GS_OP_MAP:
    case GS_OP_COPY: return rule_pointwise(b);
    case GS_OP_BITCAST: return rule_reshape(b);
    case GS_OP_TOPK: return rule_topk(b, true);
    case GS_OP_BATCH_NORM_TRAINING:
    case GS_OP_BATCH_NORM_GRAD: return rule_batch_norm(b);
    case GS_OP_PARAMETER:
    case GS_OP_CONSTANT:
    case GS_OP_IOTA:
    case GS_OP_RNG: return rule_source(b);
    default: return false;
    }
}

/* Fresh, empty tensors for every operand and result leaf, no pending dims. */
static void reset(builder *b) {
    b->factors.n = 0;
    for (int i = 0; i < b->in->n_operands; i++) {
        shape_tensor(b, &b->ops[i], op_rank(b, i));
        b->od[i] = -1;
    }
    for (int r = 0; r < b->n_res; r++) {
        shape_tensor(b, &b->res[r], b->leaves[r]->rank);
        b->rd[r] = -1;
    }
}

/* Shardy's build(): each dim still without a factor gets a size-1 factor, operands first. */
static void fill_empty(builder *b) {
    for (int i = 0; i < b->in->n_operands; i++)
        for (int d = 0; d < b->ops[i].rank; d++)
            if (!b->ops[i].dims[d].n)
                add(b, &b->ops[i], d, new_factor(b, GS_FACTOR_PASS_THROUGH, 1, false));
    for (int r = 0; r < b->n_res; r++)
        for (int d = 0; d < b->res[r].rank; d++)
            if (!b->res[r].dims[d].n)
                add(b, &b->res[r], d, new_factor(b, GS_FACTOR_PASS_THROUGH, 1, false));
}

/* The rule text an op carries from Shardy (`frontend_attributes={xla.sdy.sharding_rule="..."}`,
 * as XLA keeps `sdy.sharding_rule` in HLO), or NULL; *len its length. */
static const char *written_rule(const gs_instr *in, size_t *len) {
    static const char KEY[] = "xla.sdy.sharding_rule=\"";
    const char *fa = gs_instr_str(in, GS_ATTR_FRONTEND_ATTRIBUTES);
    const char *at = fa ? strstr(fa, KEY) : NULL;
    if (!at) return NULL;
    at += sizeof KEY - 1;
    size_t n = 0;
    while (at[n] && at[n] != '"') n += at[n] == '\\' && at[n + 1] ? 2 : 1;
    if (at[n] != '"') return NULL;
    *len = n;
    return at;
}

gs_status gs_op_rule_build_opts(gs_arena *a, const gs_instr *in, const gs_op_rule_options *opts,
                                gs_op_rule **out) {
    size_t wlen;
    const char *w = written_rule(in, &wlen);
    if (w) { /* a rule written on the op wins (one that does not fit the op is ignored) */
        gs_diags d = {0};
        gs_status st = gs_op_rule_parse(a, w, wlen, in, out, NULL, &d, gs_span_none());
        gs_diags_free(&d);
        if (st == GS_OK) return GS_OK;
    }
    builder b = {.a = a, .in = in, .conservative = opts && opts->conservative};
    gs_vec_init(&b.factors, sizeof(gs_factor));
    gs_op_rule *r = GS_NEW(a, gs_op_rule);
    int n_leaves = gs_shape_n_leaves(in->shape);
    int n_ops = in->n_operands ? in->n_operands : 1;
    b.leaves = GS_NEW_ARRAY(a, const gs_shape *, n_leaves ? n_leaves : 1);
    b.ops = GS_NEW_ARRAY(a, gs_tensor_factors, n_ops);
    b.res = GS_NEW_ARRAY(a, gs_tensor_factors, n_leaves ? n_leaves : 1);
    b.od = GS_NEW_ARRAY(a, int, n_ops);
    b.rd = GS_NEW_ARRAY(a, int, n_leaves ? n_leaves : 1);
    if (!r || !b.leaves || !b.ops || !b.res || !b.od || !b.rd) return GS_ERR;
    collect_leaves(in->shape, b.leaves, &b.n_res);
    reset(&b);
    bool specific = !b.failed && op_rule(&b);
    if (!specific && !b.failed) {
        reset(&b);
        b.registered = false;
        own_factors(&b, GS_FACTOR_NEED_REPLICATION);
    }
    if (!b.failed) fill_empty(&b);
    gs_status st = GS_OK;
    if (b.failed) {
        st = GS_ERR;
    } else {
        r->instr = in;
        r->is_default = !specific;
        r->registered = specific && b.registered;
        r->n_factors = (int)b.factors.n;
        r->factors = b.factors.n
                         ? gs_arena_memdup(a, b.factors.data, b.factors.n * sizeof(gs_factor))
                         : NULL;
        if (b.factors.n && !r->factors) st = GS_ERR;
        r->n_operands = in->n_operands;
        r->operands = b.ops;
        r->n_results = b.n_res;
        r->results = b.res;
        *out = r;
    }
    gs_vec_free(&b.factors);
    return st;
}

gs_status gs_op_rule_build(gs_arena *a, const gs_instr *in, gs_op_rule **out) {
    return gs_op_rule_build_opts(a, in, NULL, out);
}

/* ------------------------------------------------------------------ text */

const char *gs_factor_kind_name(gs_factor_kind k) {
    switch (k) {
    case GS_FACTOR_PASS_THROUGH: return "pass_through";
    case GS_FACTOR_REDUCTION: return "reduction";
    case GS_FACTOR_PERMUTATION: return "permutation";
    case GS_FACTOR_NEED_REPLICATION: return "need_replication";
    }
    return "?";
}

/* Shardy's factor symbols: i..z for factors 0..17, then z_1, z_2, ... */
static void factor_name(gs_sb *sb, int f) {
    if (f < 18)
        gs_sb_putc(sb, (char)('i' + f));
    else
        gs_sb_printf(sb, "z_%d", f - 17);
}

static void print_tensors(gs_sb *sb, int n, const gs_tensor_factors *t) {
    gs_sb_putc(sb, '(');
    for (int i = 0; i < n; i++) {
        gs_sb_puts(sb, i ? ", [" : "[");
        for (int d = 0; d < t[i].rank; d++) {
            if (d) gs_sb_puts(sb, ", ");
            if (t[i].dims[d].n == 0) gs_sb_putc(sb, '1');
            for (int k = 0; k < t[i].dims[d].n; k++) factor_name(sb, t[i].dims[d].factors[k]);
        }
        gs_sb_putc(sb, ']');
    }
    gs_sb_putc(sb, ')');
}

/* ` name={f, g}` over the factors of that kind, or the blocked ones (nothing when none is). */
static void print_factor_set(gs_sb *sb, const gs_op_rule *r, const char *name, int kind,
                             bool blocked) {
    bool any = false;
    for (int f = 0; f < r->n_factors; f++) {
        if (blocked ? !r->factors[f].blocked : (int)r->factors[f].kind != kind) continue;
        gs_sb_puts(sb, any ? ", " : " ");
        if (!any) gs_sb_printf(sb, "%s={", name);
        any = true;
        factor_name(sb, f);
    }
    if (any) gs_sb_putc(sb, '}');
}

void gs_op_rule_print(gs_sb *sb, const gs_op_rule *r) {
    print_tensors(sb, r->n_operands, r->operands);
    gs_sb_puts(sb, "->");
    print_tensors(sb, r->n_results, r->results);
    if (r->n_factors) {
        gs_sb_puts(sb, " {");
        for (int f = 0; f < r->n_factors; f++) {
            if (f) gs_sb_puts(sb, ", ");
            factor_name(sb, f);
            gs_sb_printf(sb, "=%lld", (long long)r->factors[f].size);
        }
        gs_sb_putc(sb, '}');
    }
    print_factor_set(sb, r, "reduction", GS_FACTOR_REDUCTION, false);
    print_factor_set(sb, r, "need_replication", GS_FACTOR_NEED_REPLICATION, false);
    print_factor_set(sb, r, "permutation", GS_FACTOR_PERMUTATION, false);
    print_factor_set(sb, r, "blocked_propagation", 0, true);
    if (r->custom) gs_sb_puts(sb, ", custom");
}
