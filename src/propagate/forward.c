/*
 * forward.c — inference from operands to an instruction (XLA's InferShardingFromOperands), the
 * aggressiveness gate every inference passes (CanPropagateThroughAtAggressiveLevel), and which
 * instructions take part at all (SupportSpatialPartitioning).
 *
 * Per op family: elementwise ops take the most specific operand sharding (at level > 0 in SPMD
 * mode every operand's, merged); transpose, reshape, reverse, broadcast (level 3 only), reduce,
 * reduce-window, select-and-scatter, sort, dynamic slices, concatenate, tuple and
 * get-tuple-element map their operand's tiles dim by dim; dot, convolution, gather and scatter
 * have files of their own; parameters of conditional branches and called computations take the
 * caller's operand; manual shardings spread to every array-shaped user. An op that cannot be
 * partitioned becomes replicated when an operand is replicated. topk and scan, which XLA leaves
 * alone, follow their factor rules (src/sharding/rules.c): pass-through dims carry over, the
 * sorted / scanned dim replicates.
 */
#include "internal.h"

#include <string.h>

/* Custom-calls XLA propagates through as if elementwise (IsPassthroughCustomOps). */
static bool passthrough_cc(const gs_instr *in) {
    if (in->op != GS_OP_CUSTOM_CALL || in->n_operands < 1) return false; /* nothing to pass */
    if (gs_prop_is_cc(in, "Sharding") || gs_prop_is_cc(in, "X64Combine") ||
        gs_prop_is_cc(in, "LayoutConstraint"))
        return true;
    if (in->n_operands != 1 || in->shape->type == GS_TUPLE ||
        in->operands[0]->shape->type == GS_TUPLE || in->operands[0]->shape->rank != in->shape->rank)
        return false;
    static const char *const targets[] = {"ResizeNearest",      "ResizeBilinear",
                                          "ResizeNearestGrad",  "ResizeBilinearGrad",
                                          "Cholesky",           "MoveToDevice",
                                          "MoveToHost",         "PinToDevice"};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (gs_prop_is_cc(in, targets[i])) return true;
    return false;
}

/* The shard-barrier custom-calls XLA registers partitioners for. */
static bool is_barrier(const gs_instr *in) {
    return gs_prop_is_cc(in, "ShardBarrierFrom") || gs_prop_is_cc(in, "ShardBarrierTo");
}

static bool has_side_effect(const gs_instr *in) {
    if (gs_op_info_of(in->op)->flags & GS_OPF_SIDE_EFFECT) return true;
    return in->op == GS_OP_CUSTOM_CALL &&
           gs_instr_bool(in, GS_ATTR_CUSTOM_CALL_HAS_SIDE_EFFECT, false);
}

bool gs_prop_level_ok(const gs_instr *in, int level) {
    if (gs_prop_is_elementwise(in) || gs_prop_is_cc(in, "Sharding")) return true;
    switch (in->op) {
    case GS_OP_CALL:
    case GS_OP_CONCATENATE:
    case GS_OP_COPY:
    case GS_OP_DYNAMIC_SLICE:
    case GS_OP_DYNAMIC_UPDATE_SLICE:
    case GS_OP_GET_TUPLE_ELEMENT:
    case GS_OP_OPTIMIZATION_BARRIER:
    case GS_OP_RESHAPE:
    case GS_OP_TUPLE:
    case GS_OP_TRANSPOSE:
    case GS_OP_WHILE: return true;
    case GS_OP_BROADCAST: return level >= 2;
    default: return level >= 1;
    }
}

bool gs_prop_supports(gs_prop_ctx *c, const gs_instr *in, bool to_output, bool to_params) {
    const gs_prop_node *n = GS_PROP_NODE(in);
    bool is_entry_root = in == c->entry_root;
    if (in->parent->root == in && !n->caller && !(is_entry_root && to_output) &&
        !(is_entry_root && c->root_while_free))
        return false;
    if (gs_prop_is_elementwise(in) && (in->op != GS_OP_RNG || c->is_spmd)) return true;
    switch (in->op) {
    case GS_OP_BROADCAST:
    case GS_OP_CONCATENATE:
    case GS_OP_CONDITIONAL:
    case GS_OP_CONSTANT:
    case GS_OP_CONVOLUTION:
    case GS_OP_OPTIMIZATION_BARRIER:
    case GS_OP_DOT:
    case GS_OP_DYNAMIC_SLICE:
    case GS_OP_DYNAMIC_UPDATE_SLICE:
    case GS_OP_GATHER:
    case GS_OP_GET_TUPLE_ELEMENT:
    case GS_OP_INFEED:
    case GS_OP_IOTA:
    case GS_OP_PAD:
    case GS_OP_REDUCE_WINDOW:
    case GS_OP_RESHAPE:
    case GS_OP_SCATTER:
    case GS_OP_SELECT_AND_SCATTER:
    case GS_OP_SLICE:
    case GS_OP_SORT:
    case GS_OP_TRANSPOSE:
    case GS_OP_TUPLE:
    case GS_OP_WHILE:
    case GS_OP_REDUCE:
    case GS_OP_RNG_BIT_GENERATOR:
    case GS_OP_ALL_REDUCE:
    case GS_OP_REDUCE_SCATTER: return true;
    case GS_OP_TOPK:
    case GS_OP_SCAN:
    case GS_OP_BATCH_NORM_TRAINING:
    case GS_OP_BATCH_NORM_INFERENCE:
    case GS_OP_BATCH_NORM_GRAD:
    case GS_OP_FFT:
    case GS_OP_CHOLESKY:
    case GS_OP_TRIANGULAR_SOLVE: return c->is_spmd; /* partitioned by handlers of their own */
    case GS_OP_PARAMETER: return to_params || n->caller != NULL;
    case GS_OP_REVERSE: return c->is_spmd;
    case GS_OP_CUSTOM_CALL:
        if (!c->is_spmd) return false;
        return is_barrier(in) || passthrough_cc(in);
    default: return false;
    }
}

/* XLA PickRepresentativeOperand (aliases looked through); NULL when none. */
static gs_instr *representative(const gs_instr *in) {
    switch (in->op) {
    case GS_OP_MAP:
    case GS_OP_PAD:
    case GS_OP_POWER:
    case GS_OP_OPTIMIZATION_BARRIER:
    case GS_OP_RAGGED_ALL_TO_ALL:
    case GS_OP_REVERSE:
    case GS_OP_SLICE:
    case GS_OP_SHIFT_LEFT:
    case GS_OP_SHIFT_RIGHT_ARITHMETIC:
    case GS_OP_SHIFT_RIGHT_LOGICAL: {
        gs_instr *op = gs_prop_operand(in, 0);
        return GS_PROP_SHARDING(op) ? op : NULL;
    }
    case GS_OP_CUSTOM_CALL:
        if (GS_PROP_NODE(in)->copy_like) break;
        return passthrough_cc(in) ? gs_prop_operand(in, 0) : NULL;
    case GS_OP_RNG:
    case GS_OP_DOMAIN:
    case GS_OP_ADD_DEPENDENCY: return NULL;
    default: break;
    }
    gs_op_family f = gs_op_info_of(in->op)->family;
    bool any = f == GS_FAM_UNARY || f == GS_FAM_BINARY || f == GS_FAM_COMPARE ||
               f == GS_FAM_TERNARY || f == GS_FAM_CONVERT || in->op == GS_OP_CONCATENATE ||
               in->op == GS_OP_COPY || in->op == GS_OP_ALL_GATHER || in->op == GS_OP_ALL_REDUCE ||
               in->op == GS_OP_REDUCE_SCATTER || in->op == GS_OP_ALL_TO_ALL ||
               in->op == GS_OP_COLLECTIVE_BROADCAST || in->op == GS_OP_COLLECTIVE_PERMUTE ||
               in->op == GS_OP_TOPK || in->op == GS_OP_SORT || in->op == GS_OP_WHILE ||
               gs_prop_is_copy(in);
    if (!any) return NULL;
    gs_instr *best = NULL;
    for (int i = 0; i < in->n_operands; i++) {
        gs_instr *op = gs_prop_operand(in, i);
        if (GS_PROP_SHARDING(op) &&
            (!best || gs_prop_more_specific(GS_PROP_SHARDING(op), GS_PROP_SHARDING(best))))
            best = op;
    }
    return best;
}

/* Whether the tiles of a sort operand on its sort dim can later move to another dim. */
static bool sort_movable(const gs_shape *shape, const gs_sharding *s, int64_t sort_dim) {
    if (shape->rank < 2 || shape->dims[sort_dim] == 1) return false;
    if (s->kind != GS_SHARDING_TILED || gs_sharding_tiles_in_dim(s, (int)sort_dim) == 1)
        return false;
    for (int d = 0; d < shape->rank; d++) {
        if (d == sort_dim) continue;
        int64_t t = gs_sharding_tiles_in_dim(s, (int)sort_dim) * gs_sharding_tiles_in_dim(s, d);
        if (shape->dims[d] % t == 0) return true;
    }
    return false;
}

/* The manual sharding for an instruction's shape (tuples: every leaf). */
static const gs_sharding *manual_for(gs_prop_ctx *c, const gs_instr *in, const gs_sharding *from) {
    gs_sharding *m = gs_sharding_manual(c->a);
    if (!m) {
        c->oom = true;
        return NULL;
    }
    m->metadata = from && from->kind != GS_SHARDING_TUPLE ? from->metadata : NULL;
    return gs_prop_single_tuple(c, in->shape, m);
}

/* The reduce family: inputs are the first half of the operands. */
static bool reduce_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    int n_in = in->n_operands / 2;
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    bool aggr = gs_prop_non_root_users(in) == 1, changed = false;
    for (int i = 0; i < n_in; i++) {
        gs_instr *op = gs_prop_operand(in, i);
        const gs_sharding *s = GS_PROP_SHARDING(op);
        if (!gs_prop_spatial(s)) continue;
        if (gs_prop_manual(s)) {
            changed |=
                gs_prop_improve_sub(c, in, s, i, may, aggr, GS_PROP_DIR_FORWARD, op, "reduce");
            continue;
        }
        bool reduces_tiled = false;
        for (int k = 0; k < dims.n; k++)
            reduces_tiled = reduces_tiled || gs_sharding_tiles_in_dim(s, (int)dims.v[k]) > 1;
        if (gs_prop_replicated(s) || (!c->is_spmd && reduces_tiled)) {
            const gs_sharding *r = gs_prop_replicate_all(c, s, -1);
            changed |= gs_prop_improve(c, in, gs_prop_single_tuple(c, in->shape, r), may, aggr,
                                       GS_PROP_DIR_FORWARD, op, "reduce");
            continue;
        }
        const gs_sharding *after = gs_prop_replicate_dims(c, s, dims.n, dims.v);
        if (!after) continue;
        if (gs_prop_replicated(after)) {
            changed |= gs_prop_improve(c, in, gs_prop_single_tuple(c, in->shape, after), may, aggr,
                                       GS_PROP_DIR_FORWARD, op, "reduce");
            continue;
        }
        const gs_sharding *r = gs_prop_remove_dims(c, after, dims.n, dims.v);
        changed |= gs_prop_improve(c, in, gs_prop_single_tuple(c, in->shape, r), may, aggr,
                                   GS_PROP_DIR_FORWARD, op, "reduce");
    }
    return changed;
}

static bool broadcast_forward(gs_prop_ctx *c, gs_instr *in, int level, bool may) {
    if (level < 3) return false;
    gs_instr *op = gs_prop_operand(in, 0);
    const gs_sharding *s = GS_PROP_SHARDING(op);
    if (!gs_prop_spatial(s) || gs_prop_replicated(s)) return false;
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    int64_t t[GS_MAX_TILE_RANK];
    for (int i = 0; i < in->shape->rank; i++) {
        t[i] = 1;
        for (int k = 0; k < dims.n; k++)
            if (dims.v[k] == i) {
                t[i] = gs_sharding_tiles_in_dim(s, k);
                break;
            }
    }
    const gs_sharding *r = s->kind == GS_SHARDING_TILED ? gs_prop_retile(c, s, in->shape->rank, t)
                                                        : s;
    return gs_prop_improve(c, in, r, may, gs_prop_non_root_users(in) == 1, GS_PROP_DIR_FORWARD, op,
                           "broadcast");
}

/* XLA AggressiveConcatOperandShardingCanPassThrough. */
static bool concat_operand_passes(const gs_instr *op) {
    const gs_sharding *s = GS_PROP_SHARDING(op);
    if (!gs_prop_spatial(s) || gs_prop_num_tiles(s) <= 1 || op->op != GS_OP_RESHAPE) return false;
    gs_instr *src = gs_prop_operand(op, 0);
    return src->op == GS_OP_PARAMETER || src->op == GS_OP_GET_TUPLE_ELEMENT;
}

static bool concat_forward(gs_prop_ctx *c, gs_instr *in, int level, bool may) {
    gs_instr *op = representative(in);
    if (!op || !gs_prop_spatial(GS_PROP_SHARDING(op))) return false;
    if (level == 0) {
        gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        for (int i = 0; i < in->n_operands; i++) {
            gs_instr *o = gs_prop_operand(in, i);
            if (!concat_operand_passes(o)) return false;
            for (int k = 0; k < dims.n; k++)
                if (gs_sharding_tiles_in_dim(GS_PROP_SHARDING(o), (int)dims.v[k]) > 1) return false;
        }
    }
    return gs_prop_improve(c, in, GS_PROP_SHARDING(op), may, gs_prop_non_root_users(in) == 1,
                           GS_PROP_DIR_FORWARD, op, "concatenate");
}

static bool window_has_dilation(const gs_instr *in, bool base_only) {
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_WINDOW);
    if (!a || !a->u.window) return false;
    for (int i = 0; i < a->u.window->n; i++) {
        const gs_window_dim *w = &a->u.window->dims[i];
        if (w->lhs_dilate > 1 || (!base_only && w->rhs_dilate > 1)) return true;
    }
    return false;
}

/* XLA InferDynamicUpdateSliceShardingFromOperand1: the sliced operand's sharding with the
 * sliced dims replicated. */
static bool dynamic_slice_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    gs_instr *op = gs_prop_operand(in, in->op == GS_OP_DYNAMIC_SLICE ? 0 : 1);
    const gs_sharding *s = GS_PROP_SHARDING(op);
    if (!gs_prop_spatial(s) || gs_prop_manual(s)) return false;
    int64_t dims[GS_MAX_RANK];
    int n = 0;
    for (int i = 0; i < in->shape->rank && i < op->shape->rank; i++)
        if (in->shape->dims[i] != op->shape->dims[i]) dims[n++] = i;
    return gs_prop_improve(c, in, gs_prop_replicate_dims(c, s, n, dims), may,
                           gs_prop_non_root_users(in) == 1, GS_PROP_DIR_FORWARD, op,
                           in->op == GS_OP_DYNAMIC_SLICE ? "dynamic-slice"
                                                         : "dynamic-update-slice update");
}

static bool tuple_forward(gs_prop_ctx *c, gs_instr *in) {
    bool any = false;
    for (int i = 0; i < in->n_operands; i++)
        any = any || gs_prop_spatial(GS_PROP_SHARDING(gs_prop_operand(in, i)));
    if (!any) return false;
    const gs_shape *shape = in->shape;
    int n = gs_prop_required_leaves(shape);
    const gs_sharding *cur = GS_PROP_SHARDING(in);
    gs_sharding **sub = GS_NEW_ARRAY(c->a, gs_sharding *, n);
    gs_sharding *rep = gs_sharding_replicated(c->a);
    if (!sub || !rep) {
        c->oom = true;
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (cur && cur->kind == GS_SHARDING_TUPLE && i < cur->n_tuple)
            sub[i] = cur->tuple[i];
        else
            sub[i] = cur ? (gs_sharding *)cur : rep;
    }
    const gs_instr *from = NULL;
    int idx = 0;
    for (int i = 0; i < in->n_operands && i < shape->n_tuple; i++) {
        gs_instr *op = gs_prop_operand(in, i);
        const gs_sharding *os = GS_PROP_SHARDING(op);
        int leaves = gs_prop_leaf_count(op->shape);
        if (os) {
            if (op->shape->type == GS_TUPLE) {
                for (int j = 0; j < leaves && idx + j < n; j++) {
                    const gs_sharding *l =
                        os->kind == GS_SHARDING_TUPLE ? (j < os->n_tuple ? os->tuple[j] : rep) : os;
                    if (!cur || gs_prop_more_specific(l, sub[idx + j])) {
                        sub[idx + j] = (gs_sharding *)l;
                        from = op;
                    }
                }
            } else if (idx < n) {
                const gs_sharding *l = os;
                if (op->op == GS_OP_OUTFEED && os->kind == GS_SHARDING_TUPLE && os->n_tuple > 0)
                    l = os->tuple[os->n_tuple - 1];
                if (!cur || gs_prop_more_specific(l, sub[idx])) {
                    sub[idx] = (gs_sharding *)l;
                    from = op;
                }
            }
        }
        idx += leaves;
    }
    gs_sharding *t = gs_sharding_tuple(c->a, n, sub);
    if (!t) {
        c->oom = true;
        return false;
    }
    if (cur && gs_sharding_equal(t, cur)) return false;
    gs_prop_set(c, in, t, GS_PROP_DIR_FORWARD, from, "tuple");
    return true;
}

static bool parameter_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    gs_instr *caller = GS_PROP_NODE(in)->caller;
    if (!caller) return false;
    if (caller->op == GS_OP_CONDITIONAL) {
        gs_computation *called[64];
        int k = gs_instr_called(caller, called, 64);
        for (int i = 0; i < k && i + 1 < caller->n_operands; i++) {
            if (called[i] != in->parent) continue;
            gs_instr *op = gs_prop_operand(caller, i + 1);
            if (!GS_PROP_SHARDING(op)) return false;
            return gs_prop_improve(c, in, GS_PROP_SHARDING(op), may, false, GS_PROP_DIR_CALL, op,
                                   "conditional operand");
        }
        return false;
    }
    if (caller->op == GS_OP_CALL && in->parameter_number < caller->n_operands) {
        gs_instr *op = gs_prop_operand(caller, (int)in->parameter_number);
        if (!GS_PROP_SHARDING(op)) return false;
        return gs_prop_improve(c, in, GS_PROP_SHARDING(op), may, false, GS_PROP_DIR_CALL, op,
                               "call operand");
    }
    return false;
}

/* topk: its factor rule (batch dims pass through, the sorted dim replicates). */
static bool topk_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    gs_instr *op = gs_prop_operand(in, 0);
    const gs_sharding *s = GS_PROP_SHARDING(op);
    if (!gs_prop_spatial(s)) return false;
    const gs_sharding *r = gs_prop_rule_map(c, in, false, 0, s, true, 0);
    if (!r) return false;
    return gs_prop_improve(c, in, gs_prop_single_tuple(c, in->shape, r), may,
                           gs_prop_non_root_users(in) == 1, GS_PROP_DIR_FORWARD, op, "topk rule");
}

/* batch-norm, fft, cholesky, triangular-solve: their factor rules from the first operand with a
 * spatial sharding, to every result leaf (a leaf no dim of it reaches is replicated). */
static bool rule_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    gs_instr *op = NULL;
    int k = 0;
    for (; k < in->n_operands && !op; k++)
        if (gs_prop_spatial(GS_PROP_SHARDING(gs_prop_operand(in, k)))) op = gs_prop_operand(in, k);
    if (!op) return false;
    bool tuple = in->shape->type == GS_TUPLE;
    int n = tuple ? in->shape->n_tuple : 1;
    gs_sharding **leaves = GS_NEW_ARRAY(c->a, gs_sharding *, n);
    if (!leaves) {
        c->oom = true;
        return false;
    }
    for (int r = 0; r < n; r++) {
        const gs_sharding *m = gs_prop_rule_map(c, in, false, k - 1, GS_PROP_SHARDING(op), true, r);
        leaves[r] = (gs_sharding *)(m ? m : gs_sharding_replicated(c->a));
        if (!leaves[r]) return false;
    }
    const gs_sharding *t = tuple ? gs_sharding_tuple(c->a, n, leaves) : leaves[0];
    if (!t) {
        c->oom = true;
        return false;
    }
    return gs_prop_improve(c, in, t, may, gs_prop_non_root_users(in) == 1, GS_PROP_DIR_FORWARD, op,
                           "factor rule");
}

/* scan: each scanned output takes its input's sharding, each carry its init's. */
static bool scan_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    int carries = (int)gs_instr_int(in, GS_ATTR_NUM_CARRIES, 0);
    int n_in = in->n_operands - carries;
    if (in->shape->type != GS_TUPLE || n_in < 0) return false;
    int n_out = in->shape->n_tuple - carries;
    bool any = false;
    for (int i = 0; i < in->n_operands; i++)
        any = any || gs_prop_spatial(GS_PROP_SHARDING(gs_prop_operand(in, i)));
    if (!any) return false;
    const gs_sharding *t = NULL;
    const gs_instr *from = NULL;
    for (int i = 0; i < in->shape->n_tuple; i++) {
        int opi = i < n_out ? i : n_in + (i - n_out);
        const gs_sharding *s = NULL;
        if (opi >= 0 && opi < in->n_operands) {
            gs_instr *op = gs_prop_operand(in, opi);
            if (GS_PROP_SHARDING(op) && gs_prop_compatible(op->shape, in->shape->tuple[i])) {
                s = GS_PROP_SHARDING(op);
                from = op;
            }
        }
        if (!s) s = gs_sharding_replicated(c->a);
        t = gs_prop_with_sub(c, t, in->shape, i, s);
        if (!t) return false;
    }
    return gs_prop_improve(c, in, t, may, gs_prop_non_root_users(in) == 1, GS_PROP_DIR_FORWARD,
                           from, "scan rule");
}

/* Manual shardings spread to array-shaped users (and correlated tuples): *handled when `in`
 * took (or must not take) one; returns whether it changed. */
static bool manual_forward(gs_prop_ctx *c, gs_instr *in, int level, const gs_sharding *cur,
                           bool *handled) {
    *handled = false;
    bool cc_tuple = in->op == GS_OP_CUSTOM_CALL && in->shape->type == GS_TUPLE;
    /* Asynchronous ops run their computation inside the manual region as a whole. */
    bool async = in->op == GS_OP_ASYNC_START || in->op == GS_OP_ASYNC_UPDATE ||
                 in->op == GS_OP_ASYNC_DONE || in->op == GS_OP_CALL_START ||
                 in->op == GS_OP_CALL_DONE;
    if ((cur && !gs_prop_tile_maximal(cur)) ||
        (in->shape->type == GS_TUPLE && in->op != GS_OP_REDUCE && in->op != GS_OP_SORT &&
         in->op != GS_OP_REDUCE_WINDOW && !cc_tuple && !async))
        return false;
    for (int i = 0; i < in->n_operands; i++) {
        gs_instr *op = gs_prop_operand(in, i);
        if (!GS_PROP_SHARDING(op) || !gs_prop_manual(GS_PROP_SHARDING(op))) continue;
        *handled = true;
        if (gs_prop_is_cc(in, "SPMDShardToFullShape")) return false;
        if (level == 0 && (in->op == GS_OP_CONCATENATE || in->op == GS_OP_DYNAMIC_SLICE))
            return false;
        gs_prop_set(c, in, manual_for(c, in, GS_PROP_SHARDING(op)), GS_PROP_DIR_FORWARD, op,
                    "manual");
        return true;
    }
    return false;
}

/* An op propagation has no rule for: only a replicated operand's sharding passes on. */
static bool unsupported_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    if (in->shape->type == GS_TUPLE || in->n_operands == 0 || in == in->parent->root ||
        has_side_effect(in))
        return false;
    for (int i = 0; i < in->n_operands; i++) {
        gs_instr *op = gs_prop_operand(in, i);
        const gs_sharding *s = GS_PROP_SHARDING(op);
        if (s && gs_prop_tile_maximal(s) && gs_prop_unique_device(s) < 0)
            return gs_prop_improve(c, in, s, may, false, GS_PROP_DIR_FORWARD, op,
                                   "replicated operand of an unpartitionable op");
    }
    return false;
}

/* Ops without a case of their own: elementwise ones from each operand, others from their
 * representative operand. */
static bool default_forward(gs_prop_ctx *c, gs_instr *in, bool may, bool aggr) {
    if (gs_prop_is_elementwise(in) && may) {
        bool changed = false;
        for (int i = 0; i < in->n_operands; i++) {
            gs_instr *op = gs_prop_operand(in, i);
            if (!gs_prop_spatial(GS_PROP_SHARDING(op))) continue;
            if (in->op == GS_OP_RNG) {
                changed |= gs_prop_improve(
                    c, in, gs_prop_replicate_all(c, GS_PROP_SHARDING(op), in->shape->rank), may,
                    aggr, GS_PROP_DIR_FORWARD, op, "rng");
                continue;
            }
            changed |=
                gs_prop_improve(c, in, GS_PROP_SHARDING(op), may, in->n_operands == 1 && aggr,
                                GS_PROP_DIR_FORWARD, op, "elementwise");
        }
        return changed;
    }
    gs_instr *op = representative(in);
    if (!op || !gs_prop_spatial(GS_PROP_SHARDING(op))) return false;
    return gs_prop_improve(c, in, GS_PROP_SHARDING(op), may, aggr, GS_PROP_DIR_FORWARD, op,
                           gs_prop_is_elementwise(in) ? "elementwise" : gs_op_name(in->op));
}

bool gs_prop_forward(gs_prop_ctx *c, gs_instr *in, int level) {
    if (!gs_prop_level_ok(in, level)) return false;
    const gs_sharding *cur = GS_PROP_SHARDING(in);
    if (cur && gs_prop_manual(cur)) return false;
    bool handled, took_manual = manual_forward(c, in, level, cur, &handled);
    if (handled) return took_manual;
    bool may = c->is_spmd && level > 0;
    if (!gs_prop_supports(c, in, c->to_output, false)) return unsupported_forward(c, in, may);
    bool aggr = gs_prop_non_root_users(in) == 1;
    switch (in->op) {
    case GS_OP_GET_TUPLE_ELEMENT: {
        gs_instr *op = gs_prop_operand(in, 0);
        if (!gs_prop_spatial(GS_PROP_SHARDING(op))) return false;
        const gs_sharding *s = gs_prop_sub(c, GS_PROP_SHARDING(op), op->shape,
                                           (int)gs_instr_int(in, GS_ATTR_INDEX, 0));
        if (!s) return false;
        if (gs_prop_manual(s)) {
            if (cur && gs_sharding_equal(cur, s)) return false;
            gs_prop_set(c, in, s, GS_PROP_DIR_FORWARD, op, "get-tuple-element");
            return true;
        }
        return gs_prop_improve(c, in, s, may, aggr, GS_PROP_DIR_FORWARD, op, "get-tuple-element");
    }
    case GS_OP_TUPLE: return tuple_forward(c, in);
    case GS_OP_REDUCE: return reduce_forward(c, in, may);
    case GS_OP_BROADCAST: return broadcast_forward(c, in, level, may);
    case GS_OP_CONCATENATE: return concat_forward(c, in, level, may);
    case GS_OP_CONVOLUTION: return gs_prop_conv_forward(c, in, may);
    case GS_OP_TRANSPOSE: {
        gs_instr *op = gs_prop_operand(in, 0);
        if (!gs_prop_spatial(GS_PROP_SHARDING(op))) return false;
        gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        int perm[GS_MAX_RANK];
        for (int i = 0; i < d.n && i < GS_MAX_RANK; i++) perm[i] = (int)d.v[i];
        return gs_prop_improve(c, in, gs_prop_transpose(c, GS_PROP_SHARDING(op), d.n, perm), may,
                               aggr, GS_PROP_DIR_FORWARD, op, "transpose");
    }
    case GS_OP_REDUCE_WINDOW: {
        if (window_has_dilation(in, false)) return false;
        bool changed = false;
        for (int i = 0; i < in->n_operands / 2; i++) {
            gs_instr *op = gs_prop_operand(in, i);
            if (!gs_prop_spatial(GS_PROP_SHARDING(op))) continue;
            changed |=
                gs_prop_improve(c, in, gs_prop_single_tuple(c, in->shape, GS_PROP_SHARDING(op)),
                                may, aggr, GS_PROP_DIR_FORWARD, op, "reduce-window");
        }
        return changed;
    }
    case GS_OP_SELECT_AND_SCATTER: {
        gs_instr *op = gs_prop_operand(in, 0);
        if (!gs_prop_spatial(GS_PROP_SHARDING(op)) || window_has_dilation(in, true)) return false;
        return gs_prop_improve(c, in, GS_PROP_SHARDING(op), may, aggr, GS_PROP_DIR_FORWARD, op,
                               "select-and-scatter");
    }
    case GS_OP_RESHAPE: {
        gs_instr *op = gs_prop_operand(in, 0);
        if (!gs_prop_spatial(GS_PROP_SHARDING(op))) return false;
        return gs_prop_improve(c, in,
                               gs_prop_reshape(c, op->shape, in->shape, GS_PROP_SHARDING(op)), may,
                               aggr, GS_PROP_DIR_FORWARD, op, "reshape");
    }
    case GS_OP_REVERSE: {
        gs_instr *op = gs_prop_operand(in, 0);
        if (!gs_prop_spatial(GS_PROP_SHARDING(op))) return false;
        gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        return gs_prop_improve(c, in, gs_prop_reverse(c, GS_PROP_SHARDING(op), d.n, d.v), may, aggr,
                               GS_PROP_DIR_FORWARD, op, "reverse");
    }
    case GS_OP_DOT: return gs_prop_dot_forward(c, in, may);
    case GS_OP_PARAMETER: return parameter_forward(c, in, may);
    case GS_OP_SORT: {
        gs_instr *op = representative(in);
        if (!op || !gs_prop_spatial(GS_PROP_SHARDING(op))) return false;
        int64_t sort_dim = gs_instr_ints(in, GS_ATTR_DIMENSIONS).n
                               ? gs_instr_ints(in, GS_ATTR_DIMENSIONS).v[0]
                               : 0;
        const gs_sharding *s = GS_PROP_SHARDING(op);
        if (s->kind == GS_SHARDING_TILED && gs_sharding_tiles_in_dim(s, (int)sort_dim) != 1 &&
            !sort_movable(op->shape, s, sort_dim))
            return false;
        return gs_prop_improve(c, in, gs_prop_single_tuple(c, in->shape, s), may, aggr,
                               GS_PROP_DIR_FORWARD, op, "sort");
    }
    case GS_OP_DYNAMIC_SLICE: return dynamic_slice_forward(c, in, may);
    case GS_OP_DYNAMIC_UPDATE_SLICE: {
        bool changed = dynamic_slice_forward(c, in, may);
        gs_instr *op = gs_prop_operand(in, 0);
        if (gs_prop_spatial(GS_PROP_SHARDING(op)))
            changed |= gs_prop_improve(c, in, GS_PROP_SHARDING(op), may, false, GS_PROP_DIR_FORWARD,
                                       op, "dynamic-update-slice operand");
        return changed;
    }
    case GS_OP_GATHER: return gs_prop_gather_forward(c, in, may);
    case GS_OP_SCATTER: return gs_prop_scatter_forward(c, in, may);
    case GS_OP_WHILE: {
        gs_instr *op = gs_prop_operand(in, 0);
        if (!GS_PROP_SHARDING(op)) return false;
        const gs_sharding *s = GS_PROP_SHARDING(op);
        if (cur) gs_prop_merge(c, cur, &s, may);
        return gs_prop_improve(c, in, s, may, false, GS_PROP_DIR_FORWARD, op, "while init");
    }
    case GS_OP_TOPK: return topk_forward(c, in, may);
    case GS_OP_SCAN: return scan_forward(c, in, may);
    case GS_OP_BATCH_NORM_TRAINING:
    case GS_OP_BATCH_NORM_INFERENCE:
    case GS_OP_BATCH_NORM_GRAD:
    case GS_OP_FFT:
    case GS_OP_CHOLESKY:
    case GS_OP_TRIANGULAR_SOLVE: return rule_forward(c, in, may);
    case GS_OP_CUSTOM_CALL: {
        if (gs_prop_is_cc(in, "ShardBarrierFrom")) return false;
        gs_instr *op;
        if (gs_prop_is_cc(in, "ShardBarrierTo")) {
            op = gs_prop_operand(in, 0);
            if (!GS_PROP_SHARDING(op)) return false;
        } else {
            op = representative(in);
            if (!op || !gs_prop_spatial(GS_PROP_SHARDING(op))) return false;
        }
        return gs_prop_improve(c, in, GS_PROP_SHARDING(op), may, aggr, GS_PROP_DIR_FORWARD, op,
                               "pass-through custom-call");
    }
    default: break;
    }
    return default_forward(c, in, may, aggr);
}
