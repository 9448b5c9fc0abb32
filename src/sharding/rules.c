/*
 * rules.c — per-op sharding rules (Shardy's OpShardingRule): each op maps its operand and result
 * dims to shared factors, each pass-through, reduction, permutation or need-replication, built
 * from the op's family in ops.def and its attributes.
 *
 * Who reads it, and who does not: this table is the description Shardy's propagation works
 * from (sdy's per-op rules); gspmd's Shardy propagation (issue 26) is to read it for every op,
 * and nothing else should describe an op's factors a second time. XLA's
 * ShardingPropagation and SpmdPartitioner are instead written op by op, with choices a factor
 * rule does not express (which operand wins, when a dim is worth resharding, halos, windowed
 * einsum), and gspmd's propagate/ and partition/ follow them so that XLA's own tests pass; of
 * those, only the ops XLA has no handler for (topk: propagate/rule.c) go through this table.
 * The cost model reads the partitioned program, not rules.
 *
 * A factor shared by an operand dim and a result dim lets a sharding flow between them; a factor
 * only in operands is summed over (reduction) or must be whole (need-replication); a permutation
 * factor may be sharded but its data moves between shards. Dims of size 1 have no factors. Ops
 * without a specific rule get the default: every dim of every tensor its own need-replication
 * factor, which is always correct (replicate, compute, reshard).
 */
#include "internal.h"
#include "base/internal.h"

#include <stdlib.h>
#include <string.h>

/* Rule under construction. */
typedef struct builder {
    gs_arena *a;             /* where the rule goes */
    const gs_instr *in;      /* the instruction */
    gs_vec factors;          /* gs_factor */
    gs_tensor_factors *ops;  /* n_operands tensors */
    gs_tensor_factors *res;  /* n_results tensors */
    int n_res;               /* result leaves */
    const gs_shape **leaves; /* their shapes */
    bool failed;             /* an allocation failed */
} builder;

/* A new factor; -1 for size 1 (size-1 dims get no factor). */
static int factor(builder *b, gs_factor_kind k, int64_t size) {
    if (size == 1) return -1;
    gs_factor f = {k, size};
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

/* Appends factor f to dim d of t (no-op for f < 0). */
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

static const gs_shape *op_shape(const builder *b, int i) { return b->in->operands[i]->shape; }
static int op_rank(const builder *b, int i) {
    return gs_shape_is_array(op_shape(b, i)) ? op_shape(b, i)->rank : 0;
}

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
            add(b, &b->ops[i], d, factor(b, k, op_shape(b, i)->dims[d]));
    for (int r = 0; r < b->n_res; r++)
        for (int d = 0; d < b->res[r].rank; d++)
            add(b, &b->res[r], d, factor(b, k, b->leaves[r]->dims[d]));
}

/* ------------------------------------------------------------------ family rules */

/* Elementwise: result dim d is one pass-through factor, shared by every operand of the result's
 * rank (scalar operands, e.g. select's predicate or clamp's bounds, have none). */
static bool rule_elementwise(builder *b) {
    if (b->n_res != 1) return false;
    const gs_shape *rs = b->leaves[0];
    for (int i = 0; i < b->in->n_operands; i++) {
        int r = op_rank(b, i);
        if (r != 0 && r != rs->rank) return false;
        if (!gs_shape_is_array(op_shape(b, i))) return false;
    }
    for (int d = 0; d < rs->rank; d++) {
        int f = factor(b, GS_FACTOR_PASS_THROUGH, rs->dims[d]);
        add(b, &b->res[0], d, f);
        for (int i = 0; i < b->in->n_operands; i++)
            if (op_rank(b, i) == rs->rank) add(b, &b->ops[i], d, f);
    }
    return true;
}

/* Ops with no operand dims: every result dim a pass-through factor of its own. */
static bool rule_source(builder *b) {
    for (int i = 0; i < b->in->n_operands; i++)
        if (op_rank(b, i) != 0) return false;
    for (int r = 0; r < b->n_res; r++)
        for (int d = 0; d < b->res[r].rank; d++)
            add(b, &b->res[r], d, factor(b, GS_FACTOR_PASS_THROUGH, b->leaves[r]->dims[d]));
    return true;
}

static bool rule_broadcast(builder *b) {
    gs_ints dims = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    if (b->n_res != 1 || dims.n != op_rank(b, 0)) return false;
    const gs_shape *rs = b->leaves[0];
    for (int d = 0; d < rs->rank; d++) {
        int f = factor(b, GS_FACTOR_PASS_THROUGH, rs->dims[d]);
        add(b, &b->res[0], d, f);
        int j = gs_ints_index(dims, d);
        if (j >= 0 && op_shape(b, 0)->dims[j] == rs->dims[d]) add(b, &b->ops[0], j, f);
    }
    return true;
}

static bool rule_transpose(builder *b) {
    gs_ints perm = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    if (b->n_res != 1 || perm.n != b->leaves[0]->rank || perm.n != op_rank(b, 0)) return false;
    for (int d = 0; d < perm.n; d++) {
        int f = factor(b, GS_FACTOR_PASS_THROUGH, b->leaves[0]->dims[d]);
        add(b, &b->res[0], d, f);
        add(b, &b->ops[0], (int)perm.v[d], f);
    }
    return true;
}

static int64_t gcd64(int64_t a, int64_t c) {
    while (c) {
        int64_t t = a % c;
        a = c;
        c = t;
    }
    return a;
}

/* Reshape: the common major factors of operand and result dims, walking both major to minor;
 * once none exists the rest are need-replication factors of their own. */
static bool rule_reshape(builder *b) {
    if (b->n_res != 1 || !gs_shape_is_array(op_shape(b, 0))) return false;
    const gs_shape *is = op_shape(b, 0), *os = b->leaves[0];
    if (gs_shape_elements(is) != gs_shape_elements(os)) return false;
    int i = 0, j = 0;
    int64_t ci = 1, cj = 1;
    for (;;) {
        while (ci == 1 && i < is->rank) ci = is->dims[i++];
        while (cj == 1 && j < os->rank) cj = os->dims[j++];
        if (ci == 1 || cj == 1) break;
        int64_t g = gcd64(ci, cj);
        if (g == 1) break;
        int f = factor(b, GS_FACTOR_PASS_THROUGH, g);
        add(b, &b->ops[0], i - 1, f);
        add(b, &b->res[0], j - 1, f);
        ci /= g;
        cj /= g;
    }
    if (ci != 1) add(b, &b->ops[0], i - 1, factor(b, GS_FACTOR_NEED_REPLICATION, ci));
    for (; i < is->rank; i++)
        add(b, &b->ops[0], i, factor(b, GS_FACTOR_NEED_REPLICATION, is->dims[i]));
    if (cj != 1) add(b, &b->res[0], j - 1, factor(b, GS_FACTOR_NEED_REPLICATION, cj));
    for (; j < os->rank; j++)
        add(b, &b->res[0], j, factor(b, GS_FACTOR_NEED_REPLICATION, os->dims[j]));
    return true;
}

/* Dims where `same` holds are pass-through between operand 0 and the result; the others get a
 * factor of kind k in each (not shared). */
static void per_dim(builder *b, const bool *same, gs_factor_kind k) {
    const gs_shape *rs = b->leaves[0], *os = op_shape(b, 0);
    for (int d = 0; d < rs->rank; d++) {
        if (same[d]) {
            int f = factor(b, GS_FACTOR_PASS_THROUGH, rs->dims[d]);
            add(b, &b->res[0], d, f);
            add(b, &b->ops[0], d, f);
        } else {
            add(b, &b->res[0], d, factor(b, k, rs->dims[d]));
            add(b, &b->ops[0], d, factor(b, k, os->dims[d]));
        }
    }
}

static bool same_rank_array(builder *b) {
    return b->n_res == 1 && gs_shape_is_array(op_shape(b, 0)) &&
           op_rank(b, 0) == b->leaves[0]->rank;
}

static bool rule_reverse(builder *b) {
    if (!same_rank_array(b)) return false;
    gs_ints dims = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    bool same[GS_MAX_RANK];
    for (int d = 0; d < op_rank(b, 0); d++) same[d] = !gs_ints_contains(dims, d);
    per_dim(b, same, GS_FACTOR_PERMUTATION);
    return true;
}

static bool rule_slice(builder *b) {
    if (!same_rank_array(b)) return false;
    const gs_attr *at = gs_instr_attr(b->in, GS_ATTR_SLICE);
    const gs_shape *os = op_shape(b, 0);
    bool same[GS_MAX_RANK];
    for (int d = 0; d < os->rank; d++) {
        same[d] = os->dims[d] == b->leaves[0]->dims[d];
        if (at && d < at->u.slice.n) {
            const gs_slice_dim *sd = &at->u.slice.v[d];
            same[d] = sd->start == 0 && sd->limit == os->dims[d] && sd->stride == 1;
        }
    }
    per_dim(b, same, GS_FACTOR_PERMUTATION);
    return true;
}

static bool rule_dynamic_slice(builder *b) {
    if (!same_rank_array(b)) return false;
    bool same[GS_MAX_RANK];
    for (int d = 0; d < op_rank(b, 0); d++)
        same[d] = op_shape(b, 0)->dims[d] == b->leaves[0]->dims[d];
    per_dim(b, same, GS_FACTOR_PERMUTATION);
    return true;
}

static bool rule_dynamic_update_slice(builder *b) {
    if (!same_rank_array(b) || b->in->n_operands < 2 || op_rank(b, 1) != op_rank(b, 0))
        return false;
    const gs_shape *rs = b->leaves[0], *us = op_shape(b, 1);
    for (int d = 0; d < rs->rank; d++) {
        int f = factor(b, GS_FACTOR_PASS_THROUGH, rs->dims[d]);
        add(b, &b->res[0], d, f);
        add(b, &b->ops[0], d, f);
        add(b, &b->ops[1], d,
            us->dims[d] == rs->dims[d] ? f : factor(b, GS_FACTOR_PERMUTATION, us->dims[d]));
    }
    return true;
}

static bool rule_concatenate(builder *b) {
    gs_ints dims = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    if (b->n_res != 1 || dims.n != 1) return false;
    const gs_shape *rs = b->leaves[0];
    for (int i = 0; i < b->in->n_operands; i++)
        if (op_rank(b, i) != rs->rank) return false;
    for (int d = 0; d < rs->rank; d++) {
        if (d == dims.v[0]) {
            add(b, &b->res[0], d, factor(b, GS_FACTOR_PERMUTATION, rs->dims[d]));
            for (int i = 0; i < b->in->n_operands; i++)
                add(b, &b->ops[i], d, factor(b, GS_FACTOR_PERMUTATION, op_shape(b, i)->dims[d]));
            continue;
        }
        int f = factor(b, GS_FACTOR_PASS_THROUGH, rs->dims[d]);
        add(b, &b->res[0], d, f);
        for (int i = 0; i < b->in->n_operands; i++) add(b, &b->ops[i], d, f);
    }
    return true;
}

static bool rule_pad(builder *b) {
    if (!same_rank_array(b)) return false;
    const gs_attr *at = gs_instr_attr(b->in, GS_ATTR_PADDING);
    bool same[GS_MAX_RANK];
    for (int d = 0; d < op_rank(b, 0); d++) {
        same[d] = op_shape(b, 0)->dims[d] == b->leaves[0]->dims[d];
        if (at && d < at->u.padding->n) {
            const gs_pad_dim *p = &at->u.padding->dims[d];
            same[d] = p->lo == 0 && p->hi == 0 && p->interior == 0;
        }
    }
    per_dim(b, same, GS_FACTOR_PERMUTATION);
    return true;
}

static bool rule_dot(builder *b) {
    if (b->in->op != GS_OP_DOT || b->in->n_operands != 2 || b->n_res != 1) return false;
    gs_ints lb = gs_instr_ints(b->in, GS_ATTR_LHS_BATCH_DIMS);
    gs_ints rb = gs_instr_ints(b->in, GS_ATTR_RHS_BATCH_DIMS);
    gs_ints lc = gs_instr_ints(b->in, GS_ATTR_LHS_CONTRACTING_DIMS);
    gs_ints rc = gs_instr_ints(b->in, GS_ATTR_RHS_CONTRACTING_DIMS);
    const gs_shape *ls = op_shape(b, 0), *rs = op_shape(b, 1), *os = b->leaves[0];
    if (lb.n != rb.n || lc.n != rc.n || !gs_shape_is_array(ls) || !gs_shape_is_array(rs))
        return false;
    int out = 0;
    for (int k = 0; k < lb.n; k++) {
        int f = factor(b, GS_FACTOR_PASS_THROUGH, ls->dims[lb.v[k]]);
        add(b, &b->ops[0], (int)lb.v[k], f);
        add(b, &b->ops[1], (int)rb.v[k], f);
        add(b, &b->res[0], out++, f);
    }
    for (int d = 0; d < ls->rank; d++) {
        if (gs_ints_contains(lb, d) || gs_ints_contains(lc, d)) continue;
        int f = factor(b, GS_FACTOR_PASS_THROUGH, ls->dims[d]);
        add(b, &b->ops[0], d, f);
        add(b, &b->res[0], out++, f);
    }
    for (int d = 0; d < rs->rank; d++) {
        if (gs_ints_contains(rb, d) || gs_ints_contains(rc, d)) continue;
        int f = factor(b, GS_FACTOR_PASS_THROUGH, rs->dims[d]);
        add(b, &b->ops[1], d, f);
        add(b, &b->res[0], out++, f);
    }
    for (int k = 0; k < lc.n; k++) {
        int f = factor(b, GS_FACTOR_REDUCTION, ls->dims[lc.v[k]]);
        add(b, &b->ops[0], (int)lc.v[k], f);
        add(b, &b->ops[1], (int)rc.v[k], f);
    }
    return out == os->rank;
}

static bool trivial_window_dim(const gs_window_dim *w) {
    return w->size == 1 && w->stride == 1 && w->pad_lo == 0 && w->pad_hi == 0 &&
           w->lhs_dilate == 1 && w->rhs_dilate == 1;
}

static bool rule_convolution(builder *b) {
    const gs_attr *cd = gs_instr_attr(b->in, GS_ATTR_DIM_LABELS);
    if (!cd || b->in->n_operands != 2 || b->n_res != 1) return false;
    const gs_conv_dims *c = cd->u.conv;
    const gs_attr *wa = gs_instr_attr(b->in, GS_ATTR_WINDOW);
    const gs_window *win = wa ? wa->u.window : NULL;
    const gs_shape *is = op_shape(b, 0), *ks = op_shape(b, 1), *os = b->leaves[0];
    if (c->in_rank != is->rank || c->k_rank != ks->rank || c->out_rank != os->rank) return false;
    int64_t fgc = gs_instr_int(b->in, GS_ATTR_FEATURE_GROUP_COUNT, 1);
    int64_t bgc = gs_instr_int(b->in, GS_ATTR_BATCH_GROUP_COUNT, 1);
    if (bgc == 1) {
        int f = factor(b, GS_FACTOR_PASS_THROUGH, is->dims[c->in_batch]);
        add(b, &b->ops[0], (int)c->in_batch, f);
        add(b, &b->res[0], (int)c->out_batch, f);
    } else {
        add(b, &b->ops[0], (int)c->in_batch,
            factor(b, GS_FACTOR_NEED_REPLICATION, is->dims[c->in_batch]));
        add(b, &b->res[0], (int)c->out_batch,
            factor(b, GS_FACTOR_NEED_REPLICATION, os->dims[c->out_batch]));
    }
    if (fgc == 1 && is->dims[c->in_feature] == ks->dims[c->k_in_feature]) {
        int f = factor(b, GS_FACTOR_REDUCTION, is->dims[c->in_feature]);
        add(b, &b->ops[0], (int)c->in_feature, f);
        add(b, &b->ops[1], (int)c->k_in_feature, f);
    } else {
        add(b, &b->ops[0], (int)c->in_feature,
            factor(b, GS_FACTOR_NEED_REPLICATION, is->dims[c->in_feature]));
        add(b, &b->ops[1], (int)c->k_in_feature,
            factor(b, GS_FACTOR_NEED_REPLICATION, ks->dims[c->k_in_feature]));
    }
    int fo = factor(b, fgc == 1 && bgc == 1 ? GS_FACTOR_PASS_THROUGH : GS_FACTOR_NEED_REPLICATION,
                    ks->dims[c->k_out_feature]);
    add(b, &b->ops[1], (int)c->k_out_feature, fo);
    add(b, &b->res[0], (int)c->out_feature, fo);
    for (int s = 0; s < c->n_spatial; s++) {
        gs_window_dim w = {ks->dims[c->k_spatial[s]], 1, 0, 0, 1, 1, false};
        if (win && s < win->n) w = win->dims[s];
        int64_t isz = is->dims[c->in_spatial[s]], osz = os->dims[c->out_spatial[s]];
        if (trivial_window_dim(&w) && isz == osz) {
            int f = factor(b, GS_FACTOR_PASS_THROUGH, isz);
            add(b, &b->ops[0], (int)c->in_spatial[s], f);
            add(b, &b->res[0], (int)c->out_spatial[s], f);
        } else {
            add(b, &b->ops[0], (int)c->in_spatial[s], factor(b, GS_FACTOR_PERMUTATION, isz));
            add(b, &b->res[0], (int)c->out_spatial[s], factor(b, GS_FACTOR_PERMUTATION, osz));
        }
        add(b, &b->ops[1], (int)c->k_spatial[s],
            factor(b, GS_FACTOR_NEED_REPLICATION, ks->dims[c->k_spatial[s]]));
    }
    return true;
}

/* reduce / reduce-window: the first half of the operands are inputs (same dims), the second
 * half scalar init values; one result per input. */
static bool rule_reduce(builder *b) {
    int n = b->in->n_operands / 2;
    if (n < 1 || b->in->n_operands != 2 * n || b->n_res != n) return false;
    gs_ints rd = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    const gs_shape *is = op_shape(b, 0);
    for (int i = 0; i < n; i++)
        if (!gs_shape_is_array(op_shape(b, i)) || !gs_shape_same_dims(op_shape(b, i), is))
            return false;
    for (int r = 0; r < n; r++)
        if (b->leaves[r]->rank != is->rank - rd.n) return false;
    int out = 0;
    for (int d = 0; d < is->rank; d++) {
        bool reduced = gs_ints_contains(rd, d);
        int f = factor(b, reduced ? GS_FACTOR_REDUCTION : GS_FACTOR_PASS_THROUGH, is->dims[d]);
        for (int i = 0; i < n; i++) add(b, &b->ops[i], d, f);
        if (!reduced) {
            for (int r = 0; r < n; r++) add(b, &b->res[r], out, f);
            out++;
        }
    }
    return true;
}

static bool rule_reduce_window(builder *b) {
    int n = b->in->n_operands / 2;
    if (n < 1 || b->in->n_operands != 2 * n || b->n_res != n) return false;
    const gs_attr *wa = gs_instr_attr(b->in, GS_ATTR_WINDOW);
    const gs_shape *is = op_shape(b, 0);
    for (int i = 0; i < n; i++)
        if (!gs_shape_is_array(op_shape(b, i)) || !gs_shape_same_dims(op_shape(b, i), is))
            return false;
    for (int r = 0; r < n; r++)
        if (b->leaves[r]->rank != is->rank) return false;
    for (int d = 0; d < is->rank; d++) {
        bool trivial = is->dims[d] == b->leaves[0]->dims[d];
        if (wa && d < wa->u.window->n) trivial = trivial_window_dim(&wa->u.window->dims[d]);
        if (trivial) {
            int f = factor(b, GS_FACTOR_PASS_THROUGH, is->dims[d]);
            for (int i = 0; i < n; i++) add(b, &b->ops[i], d, f);
            for (int r = 0; r < n; r++) add(b, &b->res[r], d, f);
        } else {
            int f = factor(b, GS_FACTOR_PERMUTATION, is->dims[d]);
            for (int i = 0; i < n; i++) add(b, &b->ops[i], d, f);
            int g = factor(b, GS_FACTOR_PERMUTATION, b->leaves[0]->dims[d]);
            for (int r = 0; r < n; r++) add(b, &b->res[r], d, g);
        }
    }
    return true;
}

/* sort: every operand and result share dims; the sort dim needs replication. */
static bool rule_sort(builder *b) {
    int n = b->in->n_operands;
    if (b->n_res != n) return false;
    const gs_shape *is = op_shape(b, 0);
    for (int i = 0; i < n; i++)
        if (!gs_shape_is_array(op_shape(b, i)) || !gs_shape_same_dims(op_shape(b, i), is) ||
            !gs_shape_same_dims(b->leaves[i], is))
            return false;
    gs_ints sd = gs_instr_ints(b->in, GS_ATTR_DIMENSIONS);
    for (int d = 0; d < is->rank; d++) {
        int f =
            factor(b, gs_ints_contains(sd, d) ? GS_FACTOR_NEED_REPLICATION : GS_FACTOR_PASS_THROUGH,
                   is->dims[d]);
        for (int i = 0; i < n; i++) {
            add(b, &b->ops[i], d, f);
            add(b, &b->res[i], d, f);
        }
    }
    return true;
}

/* topk: leading dims pass through to both results; the last dim needs replication. */
static bool rule_topk(builder *b) {
    const gs_shape *is = op_shape(b, 0);
    if (!gs_shape_is_array(is) || is->rank < 1 || b->n_res != 2) return false;
    for (int r = 0; r < 2; r++)
        if (b->leaves[r]->rank != is->rank) return false;
    int last = is->rank - 1;
    for (int d = 0; d < last; d++) {
        int f = factor(b, GS_FACTOR_PASS_THROUGH, is->dims[d]);
        add(b, &b->ops[0], d, f);
        add(b, &b->res[0], d, f);
        add(b, &b->res[1], d, f);
    }
    add(b, &b->ops[0], last, factor(b, GS_FACTOR_NEED_REPLICATION, is->dims[last]));
    int g = factor(b, GS_FACTOR_NEED_REPLICATION, b->leaves[0]->dims[last]);
    add(b, &b->res[0], last, g);
    add(b, &b->res[1], last, g);
    return true;
}

/* fft: the transformed (last fft_length) dims need replication; leading dims pass through. */
static bool rule_fft(builder *b) {
    if (!same_rank_array(b)) return false;
    int nf = gs_instr_ints(b->in, GS_ATTR_FFT_LENGTH).n;
    int rank = op_rank(b, 0);
    bool same[GS_MAX_RANK];
    for (int d = 0; d < rank; d++) same[d] = d < rank - nf;
    per_dim(b, same, GS_FACTOR_NEED_REPLICATION);
    return true;
}

/* cholesky / triangular-solve: batch dims pass through; the matrix dims need replication. */
static bool rule_linalg(builder *b) {
    if (b->n_res != 1) return false;
    const gs_shape *rs = b->leaves[0];
    if (rs->rank < 2) return false;
    for (int i = 0; i < b->in->n_operands; i++)
        if (op_rank(b, i) != rs->rank) return false;
    for (int d = 0; d < rs->rank - 2; d++) {
        int f = factor(b, GS_FACTOR_PASS_THROUGH, rs->dims[d]);
        add(b, &b->res[0], d, f);
        for (int i = 0; i < b->in->n_operands; i++) add(b, &b->ops[i], d, f);
    }
    /* The result shares its matrix dims with the last operand (cholesky's input, the solve's
     * right-hand side). */
    int last = b->in->n_operands - 1;
    for (int d = rs->rank - 2; d < rs->rank; d++) {
        int f = factor(b, GS_FACTOR_NEED_REPLICATION, rs->dims[d]);
        add(b, &b->res[0], d, f);
        add(b, &b->ops[last], d, f);
        for (int i = 0; i < last; i++)
            add(b, &b->ops[i], d, factor(b, GS_FACTOR_NEED_REPLICATION, op_shape(b, i)->dims[d]));
    }
    return true;
}

/* batch-norm: the feature dim passes through everything; the other operand dims pass through to
 * the full-rank results. */
static bool rule_batch_norm(builder *b) {
    const gs_shape *is = op_shape(b, 0);
    int64_t fi = gs_instr_int(b->in, GS_ATTR_FEATURE_INDEX, -1);
    if (!gs_shape_is_array(is) || fi < 0 || fi >= is->rank) return false;
    /* Every dim passes through the full-rank tensors: operand 0, the result leaf 0, and grad's
     * operand 4 (grad_output). The feature dim also reaches the 1-D operands and results; the
     * others are summed over for the statistics, which the partitioner does by local sums and
     * an all-reduce (src/partition/h_batch_norm.c), so they may stay split. */
    gs_tensor_factors *full[3] = {&b->ops[0], &b->res[0], NULL};
    int n_full = 2;
    if (b->in->op == GS_OP_BATCH_NORM_GRAD) {
        if (b->in->n_operands < 5 || op_rank(b, 4) != is->rank) return false;
        full[n_full++] = &b->ops[4];
    }
    if (b->leaves[0]->rank != is->rank) return false;
    for (int d = 0; d < is->rank; d++) {
        int f = factor(b, GS_FACTOR_PASS_THROUGH, is->dims[d]);
        for (int t = 0; t < n_full; t++) add(b, full[t], d, f);
        if (d != fi) continue;
        for (int i = 1; i < b->in->n_operands; i++)
            if (op_rank(b, i) == 1) add(b, &b->ops[i], 0, f);
        for (int r = 1; r < b->n_res; r++)
            if (b->res[r].rank == 1) add(b, &b->res[r], 0, f);
    }
    return true;
}

/* gather: batch dims of the indices pass through to the output's batch dims (with the operand's
 * batching dims); operand dims taken whole pass through to their offset dims; indexed operand
 * dims need replication. */
static bool rule_gather(builder *b) {
    if (b->in->n_operands != 2 || b->n_res != 1) return false;
    const gs_shape *os = op_shape(b, 0), *xs = op_shape(b, 1), *rs = b->leaves[0];
    gs_ints offset = gs_instr_ints(b->in, GS_ATTR_OFFSET_DIMS);
    gs_ints collapsed = gs_instr_ints(b->in, GS_ATTR_COLLAPSED_SLICE_DIMS);
    gs_ints start_map = gs_instr_ints(b->in, GS_ATTR_START_INDEX_MAP);
    gs_ints obatch = gs_instr_ints(b->in, GS_ATTR_OPERAND_BATCHING_DIMS);
    gs_ints ibatch = gs_instr_ints(b->in, GS_ATTR_START_INDICES_BATCHING_DIMS);
    gs_ints sizes = gs_instr_ints(b->in, GS_ATTR_SLICE_SIZES);
    int64_t ivd = gs_instr_int(b->in, GS_ATTR_INDEX_VECTOR_DIM, xs->rank);
    if (sizes.n != os->rank || !gs_shape_is_array(xs)) return false;
    /* Output batch dims <-> indices dims other than index_vector_dim, in order. */
    int xd = 0;
    for (int d = 0; d < rs->rank; d++) {
        if (gs_ints_contains(offset, d)) continue;
        if (xd == ivd) xd++;
        if (xd >= xs->rank) return false;
        int f = factor(b, GS_FACTOR_PASS_THROUGH, rs->dims[d]);
        add(b, &b->res[0], d, f);
        add(b, &b->ops[1], xd, f);
        int k = gs_ints_index(ibatch, xd);
        if (k >= 0 && k < obatch.n) add(b, &b->ops[0], (int)obatch.v[k], f);
        xd++;
    }
    if (ivd < xs->rank)
        add(b, &b->ops[1], (int)ivd, factor(b, GS_FACTOR_NEED_REPLICATION, xs->dims[ivd]));
    /* Operand dims that are not collapsed or batching <-> offset dims, in order. */
    int k = 0;
    for (int d = 0; d < os->rank; d++) {
        if (gs_ints_contains(obatch, d)) continue;
        if (gs_ints_contains(collapsed, d)) {
            add(b, &b->ops[0], d, factor(b, GS_FACTOR_NEED_REPLICATION, os->dims[d]));
            continue;
        }
        if (k >= offset.n) return false;
        int od = (int)offset.v[k++];
        if (sizes.v[d] == os->dims[d] && !gs_ints_contains(start_map, d)) {
            int f = factor(b, GS_FACTOR_PASS_THROUGH, os->dims[d]);
            add(b, &b->ops[0], d, f);
            add(b, &b->res[0], od, f);
        } else {
            add(b, &b->ops[0], d, factor(b, GS_FACTOR_NEED_REPLICATION, os->dims[d]));
            add(b, &b->res[0], od, factor(b, GS_FACTOR_PERMUTATION, rs->dims[od]));
        }
    }
    return true;
}

static bool custom_call_is(const gs_instr *in, const char *target) {
    const char *t = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
    return t && strcmp(t, target) == 0;
}

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
    case GS_FAM_GATHER:
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

/* The specific rule of the instruction's family; false when it has none or does not apply. */
static bool family_rule(builder *b) {
    const gs_instr *in = b->in;
    switch (gs_op_info_of(in->op)->family) {
    case GS_FAM_PARAMETER:
    case GS_FAM_CONSTANT:
    case GS_FAM_IOTA:
    case GS_FAM_RNG: return rule_source(b);
    case GS_FAM_UNARY:
    case GS_FAM_BINARY:
    case GS_FAM_TERNARY:
    case GS_FAM_COMPARE:
    case GS_FAM_MAP: return rule_elementwise(b);
    case GS_FAM_CONVERT:
        if (in->op == GS_OP_BITCAST_CONVERT && op_rank(b, 0) != b->leaves[0]->rank) return false;
        return rule_elementwise(b);
    case GS_FAM_COPY:
        if (in->op == GS_OP_ADD_DEPENDENCY || in->op == GS_OP_OPTIMIZATION_BARRIER) return false;
        return rule_elementwise(b);
    case GS_FAM_CUSTOM_CALL:
        return custom_call_is(in, "Sharding") && in->n_operands == 1 && rule_elementwise(b);
    case GS_FAM_BROADCAST: return rule_broadcast(b);
    case GS_FAM_RESHAPE: return rule_reshape(b);
    case GS_FAM_TRANSPOSE: return rule_transpose(b);
    case GS_FAM_REVERSE: return rule_reverse(b);
    case GS_FAM_SLICE: return rule_slice(b);
    case GS_FAM_DYNAMIC_SLICE: return rule_dynamic_slice(b);
    case GS_FAM_DYNAMIC_UPDATE_SLICE: return rule_dynamic_update_slice(b);
    case GS_FAM_CONCATENATE: return rule_concatenate(b);
    case GS_FAM_PAD: return rule_pad(b);
    case GS_FAM_DOT: return rule_dot(b);
    case GS_FAM_CONVOLUTION: return rule_convolution(b);
    case GS_FAM_REDUCE: return rule_reduce(b);
    case GS_FAM_REDUCE_WINDOW: return rule_reduce_window(b);
    case GS_FAM_GATHER: return rule_gather(b);
    case GS_FAM_SORT: return rule_sort(b);
    case GS_FAM_TOPK: return rule_topk(b);
    case GS_FAM_FFT: return rule_fft(b);
    case GS_FAM_LINALG: return rule_linalg(b);
    case GS_FAM_BATCH_NORM: return rule_batch_norm(b);
    default: return false;
    }
}

/* Fresh, empty tensors for every operand and result leaf. */
static void reset(builder *b) {
    b->factors.n = 0;
    for (int i = 0; i < b->in->n_operands; i++) shape_tensor(b, &b->ops[i], op_rank(b, i));
    for (int r = 0; r < b->n_res; r++) shape_tensor(b, &b->res[r], b->leaves[r]->rank);
}

gs_status gs_op_rule_build(gs_arena *a, const gs_instr *in, gs_op_rule **out) {
    builder b = {.a = a, .in = in};
    gs_vec_init(&b.factors, sizeof(gs_factor));
    gs_op_rule *r = GS_NEW(a, gs_op_rule);
    int n_leaves = gs_shape_n_leaves(in->shape);
    b.leaves = GS_NEW_ARRAY(a, const gs_shape *, n_leaves ? n_leaves : 1);
    b.ops = GS_NEW_ARRAY(a, gs_tensor_factors, in->n_operands ? in->n_operands : 1);
    b.res = GS_NEW_ARRAY(a, gs_tensor_factors, n_leaves ? n_leaves : 1);
    if (!r || !b.leaves || !b.ops || !b.res) return GS_ERR;
    collect_leaves(in->shape, b.leaves, &b.n_res);
    reset(&b);
    bool specific = !b.failed && family_rule(&b);
    if (!specific && !b.failed) {
        reset(&b);
        own_factors(&b, GS_FACTOR_NEED_REPLICATION);
    }
    gs_status st = GS_OK;
    if (b.failed) {
        st = GS_ERR;
    } else {
        r->instr = in;
        r->is_default = !specific;
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

void gs_op_rule_print(gs_sb *sb, const gs_op_rule *r) {
    print_tensors(sb, r->n_operands, r->operands);
    gs_sb_puts(sb, "->");
    print_tensors(sb, r->n_results, r->results);
    gs_sb_puts(sb, " {");
    for (int f = 0; f < r->n_factors; f++) {
        if (f) gs_sb_puts(sb, ", ");
        factor_name(sb, f);
        gs_sb_printf(sb, "=%lld", (long long)r->factors[f].size);
    }
    gs_sb_putc(sb, '}');
    for (int k = GS_FACTOR_REDUCTION; k <= GS_FACTOR_NEED_REPLICATION; k++) {
        bool any = false;
        for (int f = 0; f < r->n_factors; f++) {
            if ((int)r->factors[f].kind != k) continue;
            gs_sb_puts(sb, any ? ", " : " ");
            if (!any) gs_sb_printf(sb, "%s={", gs_factor_kind_name((gs_factor_kind)k));
            any = true;
            factor_name(sb, f);
        }
        if (any) gs_sb_putc(sb, '}');
    }
}
