/*
 * manual.c — partial annotations and manual regions: a Sharding custom-call whose
 * backend_config lists `unspecified_dims` pins only the other dims; propagation may refine the
 * unspecified ones from its operand, its users or its shard group (XLA's
 * InferUnspecifiedDims*). When such an annotation feeds an SPMDFullToShardShape or comes from
 * an SPMDShardToFullShape with the same unspecified dims (a partially manual region,
 * `last_tile_dims={manual, replicated}`), the automatic side and the manual side are refined
 * together so that they keep describing the same devices (RefineManualAutoSharding*).
 */
#include "internal.h"

#include <string.h>

/* The unique user of `in` if it is a manual conversion custom-call with the same unspecified
 * dims; *ok is false when it is one with different dims (XLA then refines nothing). */
static gs_instr *conversion_user(gs_prop_ctx *c, gs_instr *in, bool *ok) {
    gs_prop_node *n = GS_PROP_NODE(in);
    *ok = true;
    if (n->n_users != 1) return NULL;
    gs_instr *u = n->users[0];
    if (!gs_prop_is_cc(u, "SPMDFullToShardShape") && !gs_prop_is_cc(u, "SPMDShardToFullShape"))
        return NULL;
    int64_t *dims;
    int k = gs_prop_parse_unspec(c->a, u, &dims);
    if (k < 0 || k != n->n_unspec || (k && memcmp(dims, n->unspec, sizeof *dims * (size_t)k))) {
        *ok = false;
        return NULL;
    }
    return u;
}

/* Sets a refined sharding when it differs. */
static void refine(gs_prop_ctx *c, gs_instr *in, const gs_sharding *s, const gs_instr *from) {
    if (GS_PROP_SHARDING(in) && gs_sharding_equal(GS_PROP_SHARDING(in), s)) return;
    gs_prop_set(c, in, s, GS_PROP_DIR_REFINE, from, "unspecified dims");
}

/* XLA RefineManualAutoShardingFromAuto. */
static bool from_auto(gs_prop_ctx *c, const gs_sharding *to_merge, const gs_prop_node *n,
                      const gs_sharding **autos, const gs_sharding **manual) {
    const gs_sharding *man = *manual;
    if (!gs_prop_manual_subgroup(man) || gs_prop_manual_subgroup(*autos) ||
        !gs_prop_partial(man) || man->n_subgroups != 2)
        return false;
    const gs_sharding *rep = gs_prop_replicate_except(c, to_merge, n->n_unspec, n->unspec);
    if (!rep || gs_prop_tile_maximal(rep) || rep->kind != GS_SHARDING_TILED) return false;
    const gs_sharding *a2 = gs_prop_merge_compatible(c, rep, gs_prop_num_tiles(*autos) + 1, *autos);
    if (!a2) return false;
    /* Merge into the manual sharding by treating its manual dim as one more data dim. */
    int dr = rep->data_rank;
    int64_t d[GS_MAX_TILE_RANK];
    int k = 0;
    for (int i = 0; i < dr; i++) d[k++] = rep->tiles.dims[i];
    d[k++] = 1;
    for (int i = dr; i < rep->tiles.rank; i++) d[k++] = rep->tiles.dims[i];
    gs_tile_assignment t1;
    if (gs_tile_reshape(c->a, &rep->tiles, k, d, &t1) != GS_OK) {
        c->oom = true;
        return false;
    }
    gs_sharding *rep_m = gs_sharding_partial(c->a, &t1);
    gs_sharding *tmp = gs_sharding_partial(c->a, &man->tiles);
    if (!rep_m || !tmp) {
        c->oom = true;
        return false;
    }
    const gs_sharding *merged = gs_prop_merge_compatible(c, rep_m, gs_prop_num_tiles(tmp) + 1, tmp);
    if (!merged || merged->kind != GS_SHARDING_TILED) return false;
    gs_subgroup_kind types[2] = {GS_SUBGROUP_MANUAL, GS_SUBGROUP_REPLICATED};
    int nt = gs_prop_partial(merged) ? 2 : 1;
    gs_sharding *m2 = gs_sharding_subgroup(c->a, &merged->tiles, nt, types);
    if (!m2) {
        c->oom = true;
        return false;
    }
    *autos = a2;
    *manual = m2;
    return true;
}

/* XLA RefineManualAutoShardingFromManual. */
static bool from_manual(gs_prop_ctx *c, const gs_sharding *to_merge, const gs_prop_node *n,
                        const gs_sharding **autos, const gs_sharding **manual) {
    if (!gs_prop_manual_subgroup(to_merge) || !gs_prop_manual_subgroup(*manual) ||
        !gs_prop_partial(*manual) || gs_prop_manual_subgroup(*autos) ||
        (*manual)->n_subgroups != 2)
        return false;
    const gs_sharding *rep = gs_prop_replicate_except(c, to_merge, n->n_unspec, n->unspec);
    if (!rep || gs_prop_tile_maximal(rep) || rep->kind != GS_SHARDING_TILED) return false;
    const gs_sharding *m2 =
        gs_prop_merge_compatible(c, rep, gs_prop_num_tiles(*manual) + 1, *manual);
    if (!m2) return false;
    gs_subgroup_kind types[3] = {GS_SUBGROUP_REPLICATED, GS_SUBGROUP_REPLICATED,
                                 GS_SUBGROUP_REPLICATED};
    gs_sharding *rep_a = gs_sharding_subgroup(c->a, &rep->tiles, rep->n_subgroups, types);
    if (!rep_a) {
        c->oom = true;
        return false;
    }
    const gs_sharding *a2 =
        gs_prop_merge_compatible(c, rep_a, gs_prop_num_tiles(*autos) + 1, *autos);
    if (!a2) return false;
    *autos = a2;
    *manual = m2;
    return true;
}

/* Refines annotation `in` (and its conversion op `conv`, if any) from sharding `s` coming from
 * `from`; `s_is_auto` says which side `s` describes when there is a conversion op. */
static bool refine_with(gs_prop_ctx *c, gs_instr *in, gs_instr *conv, const gs_sharding *s,
                        bool s_is_auto, const gs_instr *from) {
    gs_prop_node *n = GS_PROP_NODE(in);
    if (!conv) {
        const gs_sharding *rep = gs_prop_replicate_except(c, s, n->n_unspec, n->unspec);
        const gs_sharding *m =
            gs_prop_merge_compatible(c, rep, gs_prop_num_tiles(n->sh) + 1, n->sh);
        if (!m) return false;
        refine(c, in, m, from);
        return true;
    }
    bool to_shard = gs_prop_is_cc(conv, "SPMDFullToShardShape");
    /* Which instruction holds the automatic sharding and which the manual one. */
    gs_instr *auto_in = to_shard ? in : conv, *man_in = to_shard ? conv : in;
    const gs_sharding *autos = GS_PROP_SHARDING(auto_in), *manual = GS_PROP_SHARDING(man_in);
    if (!autos || !manual) return false;
    bool ok = s_is_auto ? from_auto(c, s, n, &autos, &manual)
                        : from_manual(c, s, n, &autos, &manual);
    if (!ok) return false;
    refine(c, auto_in, autos, from);
    refine(c, man_in, manual, from);
    return true;
}

bool gs_prop_unspec_from_operand(gs_prop_ctx *c, gs_instr *in, gs_instr **conv_op) {
    *conv_op = NULL;
    gs_instr *op = gs_prop_operand(in, 0);
    const gs_sharding *os = GS_PROP_SHARDING(op);
    if (!gs_prop_spatial(os) || os->kind != GS_SHARDING_TILED) return false;
    bool ok;
    gs_instr *conv = conversion_user(c, in, &ok);
    if (!ok) return false;
    *conv_op = conv;
    /* Into a full-to-shard conversion the operand is automatic; out of a shard-to-full one the
     * annotation (and its operand) is manual. */
    bool s_is_auto = !conv || gs_prop_is_cc(conv, "SPMDFullToShardShape");
    return refine_with(c, in, conv, os, s_is_auto, op);
}

bool gs_prop_unspec_from_users(gs_prop_ctx *c, gs_instr *in, int level, gs_instr **conv_op) {
    *conv_op = NULL;
    bool ok;
    gs_instr *conv = conversion_user(c, in, &ok);
    if (!ok) return false;
    *conv_op = conv;
    gs_instr *base = conv ? conv : in;
    gs_prop_node *bn = GS_PROP_NODE(base);
    bool changed = false;
    for (int i = 0; i < bn->n_users; i++) {
        gs_instr *user = bn->users[i];
        const gs_sharding *us = GS_PROP_SHARDING(user);
        if (!us || us->kind != GS_SHARDING_TILED) continue;
        const gs_sharding *s = gs_prop_from_user(c, base, user, level);
        if (!s || gs_prop_tile_maximal(s)) continue;
        /* Users of a full-to-shard conversion see manual data; of a shard-to-full, automatic. */
        bool s_is_auto = !conv || gs_prop_is_cc(conv, "SPMDShardToFullShape");
        changed |= refine_with(c, in, conv, s, s_is_auto, user);
    }
    return changed;
}

bool gs_prop_unspec_from_group(gs_prop_ctx *c, gs_instr *in, const gs_prop_group *g) {
    if (gs_prop_is_cc(in, "ShardBarrierTo")) return false;
    bool changed = false;
    for (int i = 0; i < g->n; i++) {
        gs_instr *m = g->members[i];
        if (m == in || gs_prop_is_cc(m, "ShardBarrierFrom")) continue;
        const gs_sharding *ms = GS_PROP_SHARDING(m);
        if (!gs_prop_spatial(ms) || ms->kind != GS_SHARDING_TILED) continue;
        changed |= refine_with(c, in, NULL, ms, true, m);
    }
    return changed;
}
