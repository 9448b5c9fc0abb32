/*
 * backward.c — inference from users to an operand (XLA's GetShardingFromUser and
 * InferShardingFromUsers) and from the other members of a shard_as / shard_like group
 * (InferShardingFromShardGroup).
 *
 * What a user asks of its operand: the inverse of each forward rule — a transpose's inverse
 * permutation, a reshape mapped back, a broadcast with its new dims dropped (in non-SPMD mode
 * only when they are not sharded), a reduce with the reduced dims re-inserted unsharded and
 * merged with the reduce's other inputs, a concatenate's or dynamic slice's sharding as is (in
 * non-SPMD mode a concatenate hands each operand the devices of its part), a tuple's or
 * get-tuple-element's element, a dot's or dot-like convolution's result mapped to the operand
 * and merged with the other operand's contribution; any user of the same shape hands over its
 * own sharding. A manual user makes an unsharded operand manual.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* The first operand index of `user` that is `in` (aliases looked through), or -1. */
static int operand_index(const gs_instr *user, const gs_instr *in) {
    const gs_prop_slot *s = gs_prop_slot_of(in, user);
    return s ? s->first : -1;
}

/* XLA InferBroadcastOperandSharding. */
static const gs_sharding *broadcast_operand(gs_prop_ctx *c, const gs_instr *user) {
    const gs_sharding *us = GS_PROP_SHARDING(user);
    if (gs_prop_replicated(us) || gs_prop_manual(us)) return us;
    gs_ints dims = gs_instr_ints(user, GS_ATTR_DIMENSIONS);
    int64_t rep[GS_MAX_RANK];
    int n = 0;
    bool needs = false;
    for (int i = 0; i < user->shape->rank; i++) {
        bool kept = false;
        for (int k = 0; k < dims.n; k++) kept = kept || dims.v[k] == i;
        if (kept) continue;
        rep[n++] = i;
        if (gs_sharding_tiles_in_dim(us, i) > 1) needs = true;
    }
    if (!c->is_spmd && needs) return NULL;
    return gs_prop_remove_dims(c, gs_prop_replicate_dims(c, us, n, rep), n, rep);
}

/* The devices of the part of a concatenate's tiles operand `in` covers (non-SPMD mode). */
static const gs_sharding *concat_operand(gs_prop_ctx *c, const gs_instr *in, const gs_instr *user) {
    const gs_sharding *us = GS_PROP_SHARDING(user);
    gs_ints dims = gs_instr_ints(user, GS_ATTR_DIMENSIONS);
    int cdim = dims.n ? (int)dims.v[0] : 0;
    const gs_tile_assignment *t = &us->tiles;
    int64_t start = 0;
    for (int i = 0; i < user->n_operands; i++) {
        gs_instr *op = gs_prop_operand(user, i);
        if (op == in) break;
        start += op->shape->dims[cdim];
    }
    int64_t tile = (user->shape->dims[cdim] + t->dims[cdim] - 1) / t->dims[cdim];
    int64_t lo = start / tile;
    int64_t hi = (start + in->shape->dims[cdim] + tile - 1) / tile;
    if (hi > t->dims[cdim]) hi = t->dims[cdim];
    if (hi <= lo) return NULL;
    int64_t nd[GS_MAX_TILE_RANK];
    int64_t count = 1;
    for (int i = 0; i < t->rank; i++) {
        nd[i] = i == cdim ? hi - lo : t->dims[i];
        count *= nd[i];
    }
    int64_t *v = malloc(sizeof *v * (size_t)count);
    if (!v) {
        c->oom = true;
        return NULL;
    }
    int64_t idx[GS_MAX_TILE_RANK] = {0}, src[GS_MAX_TILE_RANK];
    for (int64_t p = 0; p < count; p++) {
        for (int k = 0; k < t->rank; k++) src[k] = idx[k] + (k == cdim ? lo : 0);
        v[p] = gs_tile_device(t, src);
        for (int k = t->rank - 1; k >= 0; k--) {
            if (++idx[k] < nd[k]) break;
            idx[k] = 0;
        }
    }
    const gs_sharding *r = NULL;
    if (count == 1) {
        r = gs_sharding_maximal(c->a, v[0]);
    } else {
        gs_tile_assignment u;
        if (gs_tile_explicit(c->a, t->rank, nd, v, &u) == GS_OK)
            r = gs_sharding_subgroup(c->a, &u, us->n_subgroups, us->subgroups);
    }
    free(v);
    if (!r) c->oom = true;
    return r;
}

/* The get-tuple-element case: the tuple's sharding with element `index` from the user. */
static const gs_sharding *gte_operand(gs_prop_ctx *c, const gs_instr *in, const gs_instr *user) {
    const gs_sharding *us = GS_PROP_SHARDING(user);
    int index = (int)gs_instr_int(user, GS_ATTR_INDEX, 0);
    const gs_shape *shape = in->shape;
    if (shape->type != GS_TUPLE || index >= shape->n_tuple) return NULL;
    if (us->kind == GS_SHARDING_TUPLE && us->n_tuple == 0) return NULL;
    const gs_sharding *base = GS_PROP_SHARDING(in);
    if (!base) {
        /* Every leaf replicated, keeping the user's manual subgroups. */
        const gs_sharding *proto = us->kind == GS_SHARDING_TUPLE ? us->tuple[0] : us;
        int n = gs_prop_required_leaves(shape);
        gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, n);
        if (!v) {
            c->oom = true;
            return NULL;
        }
        /* Leaf ranks, depth first. */
        int k = 0;
        const gs_shape *stack[256];
        int sp = 0;
        for (int i = shape->n_tuple - 1; i >= 0 && sp < 256; i--) stack[sp++] = shape->tuple[i];
        while (sp > 0 && k < n) {
            const gs_shape *s = stack[--sp];
            if (s->type == GS_TUPLE) {
                for (int i = s->n_tuple - 1; i >= 0 && sp < 256; i--) stack[sp++] = s->tuple[i];
                continue;
            }
            const gs_sharding *r =
                gs_prop_replicate_all(c, proto, s->type == GS_TOKEN ? 0 : s->rank);
            if (!r) return NULL;
            v[k++] = (gs_sharding *)r;
        }
        while (k < n) {
            if (!(v[k++] = gs_sharding_replicated(c->a))) {
                c->oom = true;
                return NULL;
            }
        }
        base = gs_sharding_tuple(c->a, n, v);
        if (!base) {
            c->oom = true;
            return NULL;
        }
    }
    return gs_prop_with_sub(c, base, shape, index, us);
}

/* XLA's reduce case: the user's sharding with the reduced dims put back, merged with the
 * shardings of the reduce's other inputs. */
static const gs_sharding *reduce_operand(gs_prop_ctx *c, const gs_instr *in, const gs_instr *user) {
    if (in->shape->type == GS_TUPLE || in->shape->rank == 0) return NULL;
    int idx = operand_index(user, in);
    const gs_sharding *us = GS_PROP_SHARDING(user);
    if (user->shape->type == GS_TUPLE) us = gs_prop_sub(c, us, user->shape, idx);
    if (!us) return NULL;
    if (us->kind == GS_SHARDING_TILED) {
        gs_ints dims = gs_instr_ints(user, GS_ATTR_DIMENSIONS);
        int64_t t[GS_MAX_TILE_RANK];
        int next = 0;
        for (int i = 0; i < in->shape->rank; i++) {
            bool reduced = false;
            for (int k = 0; k < dims.n; k++) reduced = reduced || dims.v[k] == i;
            t[i] = reduced ? 1 : (next < us->data_rank ? us->tiles.dims[next++] : 1);
        }
        us = gs_prop_retile(c, us, in->shape->rank, t);
        if (!us) return NULL;
    }
    int n_in = user->n_operands / 2;
    for (int i = 0; i < n_in; i++) {
        gs_instr *op = gs_prop_operand(user, i);
        if (op == in || !GS_PROP_SHARDING(op)) continue;
        const gs_sharding *m =
            gs_prop_merge_compatible(c, GS_PROP_SHARDING(op), gs_prop_num_tiles(us) + 1, us);
        if (m) us = m;
    }
    return us;
}

/* scan backward: an input from its scanned output, an init from its carry. */
static const gs_sharding *scan_operand(gs_prop_ctx *c, const gs_instr *in, const gs_instr *user) {
    int carries = (int)gs_instr_int(user, GS_ATTR_NUM_CARRIES, 0);
    int n_in = user->n_operands - carries;
    if (user->shape->type != GS_TUPLE) return NULL;
    int n_out = user->shape->n_tuple - carries;
    int idx = operand_index(user, in);
    int res = idx < n_in ? idx : n_out + (idx - n_in);
    if (res < 0 || res >= user->shape->n_tuple) return NULL;
    if (!gs_prop_compatible(in->shape, user->shape->tuple[res])) return NULL;
    return gs_prop_sub(c, GS_PROP_SHARDING(user), user->shape, res);
}

const gs_sharding *gs_prop_from_user(gs_prop_ctx *c, const gs_instr *in, const gs_instr *user,
                                     int level) {
    if (!gs_prop_level_ok(user, level)) return NULL;
    const gs_sharding *us = GS_PROP_SHARDING(user);
    if (!gs_prop_spatial(us)) return NULL;
    bool may = c->is_spmd && level > 0;
    switch (user->op) {
    case GS_OP_BROADCAST: return broadcast_operand(c, user);
    case GS_OP_CONCATENATE: {
        if (level == 0) return NULL;
        if (gs_prop_replicated(us)) return us;
        gs_ints dims = gs_instr_ints(user, GS_ATTR_DIMENSIONS);
        int cdim = dims.n ? (int)dims.v[0] : 0;
        if (gs_sharding_tiles_in_dim(us, cdim) == 1 || c->is_spmd || us->kind != GS_SHARDING_TILED)
            return us;
        return concat_operand(c, in, user);
    }
    case GS_OP_CONVOLUTION: {
        gs_prop_dot d;
        gs_prop_dot_dims(user, &d);
        if (d.n_conv > 0) return NULL;
        int idx = operand_index(user, in);
        if (idx < 0 || idx > 1) return NULL;
        return gs_prop_dot_operand(c, &d, us, GS_PROP_SHARDING(gs_prop_operand(user, 1 - idx)), idx,
                                   may);
    }
    case GS_OP_DYNAMIC_SLICE:
    case GS_OP_DYNAMIC_UPDATE_SLICE: {
        if (level == 0) return NULL;
        if (gs_prop_replicated(us)) return us;
        if (user->op == GS_OP_DYNAMIC_UPDATE_SLICE && in == gs_prop_operand(user, 0)) return us;
        gs_instr *op = gs_prop_operand(user, user->op == GS_OP_DYNAMIC_SLICE ? 0 : 1);
        if (in != op) return NULL;
        int64_t dims[GS_MAX_RANK];
        int n = 0;
        for (int i = 0; i < user->shape->rank && i < op->shape->rank; i++)
            if (user->shape->dims[i] != op->shape->dims[i]) dims[n++] = i;
        return gs_prop_replicate_dims(c, us, n, dims);
    }
    case GS_OP_REDUCE_WINDOW: {
        int idx = operand_index(user, in);
        if (idx < 0 || idx >= user->n_operands / 2) return NULL;
        if (user->shape->type == GS_TUPLE) return gs_prop_sub(c, us, user->shape, idx);
        return us;
    }
    case GS_OP_RESHAPE: return gs_prop_reshape(c, user->shape, in->shape, us);
    case GS_OP_PAD: return in == gs_prop_operand(user, 0) ? us : NULL;
    case GS_OP_SLICE: return us;
    case GS_OP_TRANSPOSE: {
        gs_ints d = gs_instr_ints(user, GS_ATTR_DIMENSIONS);
        int inv[GS_MAX_RANK];
        for (int i = 0; i < d.n && i < GS_MAX_RANK; i++) inv[d.v[i]] = i;
        return gs_prop_transpose(c, us, d.n, inv);
    }
    case GS_OP_TUPLE: {
        const gs_prop_slot *slot = gs_prop_slot_of(in, user);
        if (!slot) return NULL;
        const gs_sharding *sub = gs_prop_sub(c, us, user->shape, slot->first);
        for (int i = slot->first + 1; slot->count > 1 && i < user->n_operands && sub; i++) {
            if (gs_prop_operand(user, i) != in) continue;
            const gs_sharding *alt = gs_prop_sub(c, us, user->shape, i);
            if (alt && gs_prop_more_specific(alt, sub)) sub = alt;
        }
        return sub;
    }
    case GS_OP_GET_TUPLE_ELEMENT: return gte_operand(c, in, user);
    case GS_OP_DOT: {
        gs_prop_dot d;
        gs_prop_dot_dims(user, &d);
        int idx = operand_index(user, in);
        if (idx < 0 || idx > 1) return NULL;
        return gs_prop_dot_operand(c, &d, us, GS_PROP_SHARDING(gs_prop_operand(user, 1 - idx)), idx,
                                   may);
    }
    case GS_OP_REDUCE: return reduce_operand(c, in, user);
    case GS_OP_SORT: {
        if (us->kind == GS_SHARDING_TUPLE)
            return gs_prop_sub(c, us, user->shape, operand_index(user, in));
        return us;
    }
    case GS_OP_REVERSE: {
        gs_ints d = gs_instr_ints(user, GS_ATTR_DIMENSIONS);
        return gs_prop_reverse(c, us, d.n, d.v);
    }
    case GS_OP_OUTFEED: {
        if (in != gs_prop_operand(user, 0)) return NULL;
        gs_shape *shapes[2];
        for (int i = 0; i < 2 && i < user->n_operands; i++) shapes[i] = user->operands[i]->shape;
        gs_shape *t = gs_shape_tuple(&c->scratch, user->n_operands < 2 ? user->n_operands : 2,
                                     shapes);
        if (!t) {
            c->oom = true;
            return NULL;
        }
        return gs_prop_sub(c, us, t, 0);
    }
    case GS_OP_GATHER: return gs_prop_gather_from_user(c, in, user);
    case GS_OP_SCATTER: return gs_prop_scatter_from_user(c, in, user);
    case GS_OP_TOPK: {
        if (in != gs_prop_operand(user, 0)) return NULL;
        return gs_prop_rule_map(c, user, true, 0, gs_prop_sub(c, us, user->shape, 0), false, 0);
    }
    case GS_OP_SCAN: return scan_operand(c, in, user);
    case GS_OP_CUSTOM_CALL:
        if (GS_PROP_NODE(user)->copy_like) break;
        return gs_prop_compatible(in->shape, user->shape) ? us : NULL;
    default: break;
    }
    return gs_prop_compatible(in->shape, user->shape) ? us : NULL;
}

bool gs_prop_backward(gs_prop_ctx *c, gs_instr *in, int level) {
    gs_prop_node *n = GS_PROP_NODE(in);
    if (level < 2 && in->op == GS_OP_BROADCAST) return false;
    if (n->sh && gs_prop_manual(n->sh)) return false;
    if (!n->sh || gs_prop_tile_maximal(n->sh)) {
        for (int i = 0; i < n->n_users; i++) {
            gs_instr *user = n->users[i];
            const gs_sharding *us = GS_PROP_SHARDING(user);
            if (!us || gs_prop_is_cc(user, "SPMDFullToShardShape")) continue;
            if (in->shape->type != GS_TUPLE && gs_prop_manual(us)) {
                gs_sharding *m = gs_sharding_manual(c->a);
                if (!m) {
                    c->oom = true;
                    return false;
                }
                m->metadata = us->kind == GS_SHARDING_TUPLE ? NULL : us->metadata;
                gs_prop_set(c, in, m, GS_PROP_DIR_BACKWARD, user, "manual");
                return true;
            }
            const gs_sharding *s = gs_prop_from_user(c, in, user, level);
            if (s && gs_prop_manual(s)) {
                gs_prop_set(c, in, s, GS_PROP_DIR_BACKWARD, user, "manual");
                return true;
            }
        }
    }
    if (!gs_prop_supports(c, in, false, c->to_params)) return false;
    bool may = c->is_spmd && level > 0, improved = false;
    for (int i = 0; i < n->n_users; i++) {
        gs_instr *user = n->users[i];
        if (user->op == GS_OP_RNG_BIT_GENERATOR) {
            gs_sharding *r = gs_sharding_replicated(c->a);
            if (!r) {
                c->oom = true;
                return false;
            }
            if (n->sh && gs_sharding_equal(n->sh, r)) return false;
            gs_prop_set(c, in, r, GS_PROP_DIR_BACKWARD, user, "rng-bit-generator seed");
            return true;
        }
        const gs_sharding *s = gs_prop_from_user(c, in, user, level);
        if (s && gs_prop_is_cc(in, "ShardBarrierTo")) {
            s = gs_sharding_replicated(c->a);
            if (!s) c->oom = true;
        }
        if (s)
            improved |= gs_prop_improve(c, in, s, may, false, GS_PROP_DIR_BACKWARD, user,
                                        gs_op_name(user->op));
    }
    return improved;
}

bool gs_prop_from_group(gs_prop_ctx *c, gs_instr *in, int level, const gs_prop_group *g) {
    if (!gs_prop_level_ok(in, level)) return false;
    const gs_sharding *cur = GS_PROP_SHARDING(in);
    if (cur && gs_prop_manual(cur)) return false;
    if (gs_prop_is_cc(in, "ShardBarrierTo")) return false;
    if (!cur || gs_prop_tile_maximal(cur)) {
        for (int i = 0; i < g->n; i++) {
            gs_instr *m = g->members[i];
            if (m == in || !GS_PROP_SHARDING(m) || !gs_prop_manual(GS_PROP_SHARDING(m))) continue;
            gs_prop_set(c, in, GS_PROP_SHARDING(m), GS_PROP_DIR_GROUP, m,
                        g->as ? "shard_as" : "shard_like");
            return true;
        }
    }
    bool may = c->is_spmd && level > 0, changed = false;
    for (int i = 0; i < g->n; i++) {
        gs_instr *m = g->members[i];
        if (m == in || gs_prop_is_cc(m, "ShardBarrierFrom")) continue;
        changed |= gs_prop_improve(c, in, GS_PROP_SHARDING(m), may, false, GS_PROP_DIR_GROUP, m,
                                   g->as ? "shard_as" : "shard_like");
    }
    return changed;
}
