/*
 * h_elementwise.c — handlers for ops that keep the data where it is: elementwise ops (unary,
 * binary, compare, select, clamp, convert, map, bitcast-convert), copy and
 * opt-barrier, parameters, tuples and get-tuple-element, the Sharding and manual-region
 * custom-calls, and collectives already in the module (kept as written in manual regions).
 *
 * An elementwise op computes on the devices' shards in the instruction's own sharding: every
 * operand is resharded to it (scalar operands of clamp/select stay whole), and the op runs on
 * the per-device shapes. Padding stays padding.
 */
#include "internal.h"

#include <string.h>

/* A bitcast-convert between element types of different widths, which adds or drops a minor
 * dim (the narrow type's elements of one wide element): XLA's HandleBitcastConvert. That dim is
 * whole; the others keep the wider side's sharding (the operand's when it drops the dim, the
 * result's when it adds it), and the result is resharded to its own. */
static bool bitcast_convert_rank(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                 gs_part_value *out) {
    const gs_part_value *v = gs_part_operand(c, in, 0);
    const gs_shape *o = in->operands[0]->shape;
    bool drops = o->rank == in->shape->rank + 1;
    if (!drops && o->rank + 1 != in->shape->rank) return false;
    const gs_sharding *wide = drops ? v->sharding : t;
    if (!gs_part_plain(wide)) return false;
    int extra = drops ? o->rank - 1 : in->shape->rank - 1;
    int64_t extra64 = extra;
    const gs_sharding *with = gs_part_replicate_dims(c, wide, 1, &extra);
    gs_sharding *without = NULL;
    if (c->failed ||
        gs_sharding_remove_dims(gs_part_arena(c), with, 1, &extra64, &without) != GS_OK ||
        !without) {
        gs_part_oom(c);
        return false;
    }
    const gs_sharding *in_sh = drops ? with : without, *out_sh = drops ? without : with;
    gs_part_value r;
    gs_part_reshard(c, v, in_sh, &r);
    gs_part_value local = {
        gs_part_clone(c, in, gs_part_local_shape(c, in->shape, out_sh), 1, &r.hlo), in->shape,
        out_sh, GS_OP_ADD};
    if (!local.hlo) return false;
    gs_part_reshard(c, &local, t, out);
    return out->hlo != NULL;
}

bool gs_part_handle_elementwise(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                gs_part_value *out) {
    if (!gs_type_is_array(in->shape->type) || !gs_part_plain(t)) return false;
    if (in->op == GS_OP_BITCAST_CONVERT) {
        const gs_shape *o = in->operands[0]->shape;
        if (o->rank != in->shape->rank) return bitcast_convert_rank(c, in, t, out);
        if (gs_type_size(o->type) != gs_type_size(in->shape->type)) return false;
    }
    int n = in->n_operands;
    gs_instr *ops[64];
    if (n > 64) return false;
    for (int k = 0; k < n; k++) {
        const gs_part_value *v = gs_part_operand(c, in, k);
        if (!gs_type_is_array(v->base->type)) return false;
        const gs_sharding *want = t;
        if (v->base->rank != in->shape->rank) {
            if (v->base->rank != 0) return false;
            want = gs_part_replicated(c, v->base);
        }
        gs_part_value r;
        gs_part_reshard(c, v, want, &r);
        ops[k] = r.hlo;
    }
    out->hlo = gs_part_clone(c, in, gs_part_local_shape(c, in->shape, t), n, ops);
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}

bool gs_part_handle_parameter(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                              gs_part_value *out) {
    (void)t;
    gs_computation *comp = gs_part_builder(c)->comp;
    int64_t k = in->parameter_number;
    if (k < 0 || k >= comp->n_params || !comp->params[k]) {
        gs_part_error(c, "internal: parameter %lld of %s is missing", (long long)k, comp->name);
        return false;
    }
    /* As the parameter was built: the driver reshards it to its own sharding if that differs. */
    out->hlo = comp->params[k];
    out->base = in->shape;
    out->sharding = c->param_sh[k];
    out->combiner = GS_OP_ADD;
    return true;
}

bool gs_part_handle_tuple(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                          gs_part_value *out) {
    int n = in->n_operands;
    gs_instr **ops = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, n + 1);
    if (!ops) {
        gs_part_oom(c);
        return false;
    }
    for (int k = 0; k < n; k++) {
        gs_part_value r;
        gs_part_reshard(c, gs_part_operand(c, in, k), gs_part_element_sharding(c, t, in->shape, k),
                        &r);
        ops[k] = r.hlo;
    }
    out->hlo = gs_build_tuple(gs_part_builder(c), n, ops);
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}

bool gs_part_handle_gte(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out) {
    (void)t;
    const gs_part_value *v = gs_part_operand(c, in, 0);
    int idx = (int)gs_instr_int(in, GS_ATTR_INDEX, 0);
    if (v->base->type != GS_TUPLE || idx < 0 || idx >= v->base->n_tuple) return false;
    out->hlo = gs_build_gte(gs_part_builder(c), v->hlo, idx);
    out->base = in->shape;
    out->sharding = gs_part_element_sharding(c, v->sharding, v->base, idx);
    out->combiner = v->combiner;
    return out->hlo != NULL;
}

bool gs_part_handle_copy(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out) {
    const gs_part_value *v = gs_part_operand(c, in, 0);
    if (t->kind == GS_SHARDING_MANUAL && v->sharding->kind != GS_SHARDING_MANUAL) return false;
    gs_part_value r;
    gs_part_reshard(c, v, t, &r);
    out->hlo = gs_part_clone(c, in, gs_part_local_shape(c, in->shape, t), 1, &r.hlo);
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}

/* Custom-call targets that return their operand: placement and layout annotations and
 * Shardy's markers. In the partitioned program they are dropped (the value is forwarded). */
static bool identity_target(const char *t) {
    static const char *const names[] = {"LayoutConstraint", "MoveToHost", "MoveToDevice",
                                        "annotate_device_placement", "PinToDevice",
                                        "xla.sdy.FuncResultSharding", "xla.sdy.Sharding",
                                        "xla.sdy.PropagationBarrier", "xla.sdy.ShardingGroup",
                                        "ShardBarrierFrom", "ShardBarrierTo",
                                        /* Shardy's marker ops as the StableHLO reader keeps
                                         * them (a reshard: resharded to its sharding by the
                                         * driver, like a constraint) */
                                        "sdy.data_flow_edge", "sdy.func_data_flow_edge",
                                        "sdy.propagation_barrier", "sdy.reshard"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(t, names[i]) == 0) return true;
    return false;
}

bool gs_part_handle_custom_call(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                gs_part_value *out) {
    const char *target = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
    if (target && strcmp(target, "__op$block_scaled_dot") == 0)
        return gs_part_handle_dot(c, in, t, out);
    if (!target) return false;
    if (strcmp(target, "_SPMDInternalOp_MultiPad") == 0)
        return gs_part_handle_multi_pad(c, in, t, out); /* manual: the default action's */
    if (in->n_operands != 1) return gs_part_single_device(c, in, t, out);
    int64_t group;
    if (gs_instr_sharding_group(in, &group) && gs_shape_is_tuple(in->shape) &&
        in->shape->n_tuple == 0) {
        /* Shardy's sharding group: a propagation hint with no result, dropped (XLA's
         * ShardingRemover); an empty tuple stands for it */
        out->hlo = gs_build_tuple(gs_part_builder(c), 0, NULL);
        out->base = in->shape;
        out->sharding = t;
        out->combiner = GS_OP_ADD;
        return out->hlo != NULL;
    }
    bool edge = strcmp(target, "SPMDFullToShardShape") == 0 ||
                strcmp(target, "SPMDShardToFullShape") == 0 || strcmp(target, "Sharding") == 0 ||
                identity_target(target);
    if (!edge && gs_part_all_manual(t)) return false; /* the default action's manual case: the op
                                                    runs on the devices' own values as written */
    if (strcmp(target, "TopK") == 0) return gs_part_handle_topk(c, in, t, out);
    if (strcmp(target, "_SPMDInternalOp_RotateRight") == 0)
        return gs_part_handle_rotate_right(c, in, t, out);
    if (strcmp(target, "_SPMDInternalOp_MultiRotate") == 0)
        return gs_part_handle_multi_rotate(c, in, t, out);
    if (strcmp(target, "_SPMDInternalOp_Wrap") == 0) return gs_part_handle_wrap(c, in, t, out);
    const gs_part_value *v = gs_part_operand(c, in, 0);
    bool region = strcmp(target, "SPMDFullToShardShape") == 0 ||
                  strcmp(target, "SPMDShardToFullShape") == 0;
    if (strcmp(target, "Sharding") == 0 || identity_target(target)) {
        /* A sharding constraint (the driver reshards the operand's value to it) or an
         * annotation: an identity, so it cannot change the value's shape. */
        if (!gs_shape_equal(in->shape, v->base)) {
            gs_part_error(c,
                          "%%%s: a %s custom-call passes its operand through, so its shape must "
                          "be the operand's (%s), not %s",
                          in->name, target, gs_shape_to_string(gs_part_arena(c), v->base),
                          gs_shape_to_string(gs_part_arena(c), in->shape));
            return false;
        }
        *out = *v;
        return true;
    }
    if (region && t->kind != GS_SHARDING_MANUAL && !gs_part_partial_manual(t) &&
        v->sharding->kind != GS_SHARDING_MANUAL && !gs_part_partial_manual(v->sharding)) {
        if (gs_shape_equal(in->shape, v->base)) {
            /* the edge of a manual computation with no manual axes (Shardy's manual_axes={}):
             * nothing becomes local, so it is an identity, like a sharding constraint */
            *out = *v;
            return true;
        }
        gs_part_error(c,
                      "%%%s: %s marks a manual region's edge, but neither it nor its operand has "
                      "a manual sharding",
                      in->name, target);
        return false;
    }
    if (strcmp(target, "SPMDFullToShardShape") == 0 && gs_part_partial_manual(t) &&
        gs_part_plain(v->sharding) && gs_type_is_array(v->base->type)) {
        /* Into a partially manual region: each device's shard of the operand becomes its part
         * of its manual group's value, as XLA copies it. */
        const gs_shape *ls = gs_part_local_shape(c, in->shape, t);
        if (ls && v->hlo && gs_shape_same_dims(v->hlo->shape, ls)) {
            gs_part_result(out, v->hlo, in->shape, t);
            return true;
        }
    }
    if (strcmp(target, "SPMDFullToShardShape") == 0 && t->kind == GS_SHARDING_MANUAL) {
        /* Into a manual region: each device's shard of the operand becomes its whole value. */
        if (!gs_type_is_array(v->base->type) || !v->hlo ||
            !gs_shape_same_dims(v->hlo->shape, in->shape))
            return false;
        out->hlo = v->hlo;
        out->base = in->shape;
        out->sharding = t;
        out->combiner = GS_OP_ADD;
        return true;
    }
    if (strcmp(target, "SPMDShardToFullShape") == 0 &&
        (v->sharding->kind == GS_SHARDING_MANUAL || gs_part_partial_manual(v->sharding)) &&
        (gs_part_plain(t) || gs_part_partial_manual(t)) && gs_type_is_array(in->shape->type)) {
        /* Out of a manual region (or out of some of its manual axes, into a region manual
         * along fewer): each device's value is its shard of the result, as XLA takes it. */
        gs_shape *ls = gs_part_local_shape(c, in->shape, t);
        if (!ls || !v->hlo || !gs_shape_same_dims(v->hlo->shape, ls)) return false;
        out->hlo = v->hlo;
        out->base = in->shape;
        out->sharding = t;
        out->combiner = GS_OP_ADD;
        return true;
    }
    /* Any other target (a host callback, say) runs once, on its device, when it has one. */
    return gs_part_single_device(c, in, t, out);
}

/* A collective-permute of a partially manual value whose operand is split as it is, each pair
 * joining devices that hold the same tile of their groups' values: each device sends its own
 * tile (the groups' values move whole, tile by tile), as XLA partitions it. */
static bool permute_tiles(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                          gs_part_value *out) {
    const gs_part_value *v = gs_part_operand(c, in, 0);
    const gs_attr *pa = gs_instr_attr(in, GS_ATTR_SOURCE_TARGET_PAIRS);
    if (in->op != GS_OP_COLLECTIVE_PERMUTE || in->n_operands != 1 || !pa || !v->hlo ||
        !gs_part_partial_manual(t) || !gs_sharding_equal(v->sharding, t) ||
        !gs_type_is_array(in->shape->type) || t->data_rank > GS_MAX_RANK)
        return false;
    for (int i = 0; i < pa->u.pairs.n; i++) {
        int64_t a[GS_MAX_RANK], b[GS_MAX_RANK];
        if (!gs_sharding_tile_index(t, pa->u.pairs.v[i][0], a) ||
            !gs_sharding_tile_index(t, pa->u.pairs.v[i][1], b) ||
            memcmp(a, b, sizeof a[0] * (size_t)t->data_rank) != 0)
            return false;
    }
    gs_instr *x = v->hlo;
    gs_part_result(out, gs_part_clone(c, in, x->shape, 1, &x), in->shape, t);
    return out->hlo != NULL;
}

bool gs_part_handle_collective(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                               gs_part_value *out) {
    /* A collective written by hand in a manual region runs as written. Elsewhere the default
     * action keeps its semantics on whole values. */
    if (permute_tiles(c, in, t, out)) return true;
    if (c->failed) return false;
    if (t->kind != GS_SHARDING_MANUAL) return false;
    int n = in->n_operands;
    gs_instr **ops = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, n + 1);
    if (!ops) {
        gs_part_oom(c);
        return false;
    }
    for (int k = 0; k < n; k++) {
        const gs_part_value *v = gs_part_operand(c, in, k);
        if (v->sharding->kind != GS_SHARDING_MANUAL) return false;
        ops[k] = v->hlo;
    }
    out->hlo = gs_part_clone(c, in, in->shape, n, ops);
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}
