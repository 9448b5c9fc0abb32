/*
 * h_topk.c — topk and the custom-call TopK (the k largest, or smallest, of each last-dim row,
 * with their indices; ties keep the lower index first), as XLA partitions them:
 *
 *   rows split (the last dim whole): each device takes the top k of its own rows;
 *   the last dim split in T shards: each device takes the top k' = min(k, shard) of its shard
 *   (padding masked with the lowest value first), turns the positions into global indices (plus
 *   the shard's offset), the T candidate lists are all-gathered along the last dim, and a stable
 *   sort of (values, indices) by value followed by a slice keeps the k first — the candidates
 *   come shard by shard in index order, so ties still resolve to the lower index.
 *
 * The result keeps the operand's row sharding; its last dim is whole.
 */
#include "internal.h"

#include <string.h>

/* Does `in` take the k largest (true) or smallest? */
static bool largest_first(const gs_instr *in) {
    if (in->op == GS_OP_TOPK) return gs_instr_bool(in, GS_ATTR_LARGEST, true);
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_CALLED_COMPUTATIONS);
    const gs_computation *cmp = a && a->u.comps.n > 0 ? a->u.comps.v[0] : NULL;
    if (!cmp || !cmp->root || cmp->root->op != GS_OP_COMPARE) return true;
    const char *dir = gs_instr_str(cmp->root, GS_ATTR_DIRECTION);
    return !dir || (strcmp(dir, "LT") != 0 && strcmp(dir, "LE") != 0);
}

/* A `topk` of x (k per row) in the output: (values, s32 indices). */
static gs_instr *build_topk(gs_part_ctx *c, gs_instr *x, int64_t k, bool largest) {
    const gs_shape *xs = x->shape;
    int64_t dims[GS_MAX_RANK];
    memcpy(dims, xs->dims, sizeof *dims * (size_t)xs->rank);
    dims[xs->rank - 1] = k;
    gs_arena *a = &gs_part_builder(c)->m->arena;
    gs_shape *leaves[2] = {gs_shape_array(a, xs->type, xs->rank, dims),
                           gs_shape_array(a, GS_S32, xs->rank, dims)};
    gs_shape *ts = leaves[0] && leaves[1] ? gs_shape_tuple(a, 2, leaves) : NULL;
    gs_instr *t = ts ? gs_build(gs_part_builder(c), GS_OP_TOPK, ts, 1, &x) : NULL;
    gs_build_set_int(gs_part_builder(c), t, GS_ATTR_K, k);
    gs_build_set_bool(gs_part_builder(c), t, GS_ATTR_LARGEST, largest);
    return t;
}

/* The comparator (a, b: type; i, j: s32) -> a GT b (or LT), total order, in the output. */
static gs_computation *comparator(gs_part_ctx *c, gs_type type, bool largest) {
    gs_builder *ob = gs_part_builder(c);
    gs_module *m = ob->m;
    const char *name = gs_names_fresh(ob->names, &m->arena, largest ? "topk.gt" : "topk.lt");
    gs_computation *comp = name ? gs_computation_new(m, name) : NULL;
    if (!comp) return NULL;
    gs_module_move_before_entry(m, comp);
    gs_builder b;
    gs_builder_init(&b, m, comp, ob->names);
    gs_shape *s = gs_shape_array(&m->arena, type, 0, NULL);
    gs_shape *i = gs_shape_array(&m->arena, GS_S32, 0, NULL);
    gs_instr *p0 = gs_build_parameter(&b, 0, s, NULL);
    gs_instr *p1 = gs_build_parameter(&b, 1, s, NULL);
    gs_build_parameter(&b, 2, i, NULL);
    gs_build_parameter(&b, 3, i, NULL);
    gs_instr *r = gs_build_compare(&b, p0, p1, largest ? "GT" : "LT");
    if (gs_type_is_float(type)) gs_build_set_ident(&b, r, GS_ATTR_TYPE, "TOTALORDER");
    if (b.failed || !r) return NULL;
    comp->root = r;
    r->is_root = true;
    return comp;
}

bool gs_part_handle_topk(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out) {
    (void)t;
    if (in->n_operands != 1 || in->shape->type != GS_TUPLE || in->shape->n_tuple != 2) return false;
    const gs_shape *xb = in->operands[0]->shape, *vb = in->shape->tuple[0];
    if (!gs_shape_is_array(xb) || xb->rank < 1 || vb->rank != xb->rank) return false;
    int last = xb->rank - 1;
    int64_t k = vb->dims[last];
    bool largest = largest_first(in);
    const gs_part_value *v = gs_part_operand(c, in, 0);
    gs_part_value x = *v;
    if (!gs_part_plain(x.sharding) || gs_part_unreduced_dim(x.sharding) != -1 ||
        gs_part_partial_manual(x.sharding))
        gs_part_reshard(c, v, gs_part_replicated(c, xb), &x);
    if (c->failed) return false;
    const gs_sharding *s = x.sharding;
    int64_t tiles = gs_sharding_tiles_in_dim(s, last);
    const gs_sharding *rs = gs_part_replicate_dims(c, s, 1, &last);
    gs_sharding *pair[2] = {(gs_sharding *)rs, (gs_sharding *)rs};
    const gs_sharding *ts = gs_sharding_tuple(gs_part_arena(c), 2, pair);
    const gs_shape *ls = ts ? gs_part_local_shape(c, in->shape, ts) : NULL;
    if (!ts || !ls) {
        gs_part_oom(c);
        return false;
    }
    gs_builder *b = gs_part_builder(c);
    if (tiles == 1) {
        /* Rows split: each device's own rows. */
        gs_instr *r = in->op == GS_OP_TOPK ? gs_part_clone(c, in, ls, 1, &x.hlo)
                                           : build_topk(c, x.hlo, k, largest);
        if (!r) gs_part_oom(c);
        out->hlo = r;
        out->base = in->shape;
        out->sharding = ts;
        out->combiner = GS_OP_ADD;
        return r != NULL;
    }
    /* The last dim split: local candidates, gathered, merged. */
    int64_t shard = x.hlo->shape->dims[last], kk = k < shard ? k : shard;
    gs_instr *fill = largest ? gs_build_lowest(b, xb->type) : gs_build_highest(b, xb->type);
    gs_instr *masked = gs_part_mask(c, x.hlo, s, xb->dims, 1, &last, fill);
    gs_instr *local = build_topk(c, masked, kk, largest);
    gs_instr *vals = gs_build_gte(b, local, 0), *idx = gs_build_gte(b, local, 1);
    gs_instr *off = gs_part_shard_offset(c, s, last, shard);
    idx = gs_build_binary(b, GS_OP_ADD, idx, gs_part_bcast_scalar(c, off, idx ? idx->shape : NULL));
    if (c->failed || !vals || !idx) {
        gs_part_oom(c);
        return false;
    }
    /* The candidates as values of [rows..., tiles * k'] sharded like the operand: an all-gather
     * along the last dim makes every device's row complete. */
    int64_t cd[GS_MAX_RANK];
    memcpy(cd, xb->dims, sizeof *cd * (size_t)xb->rank);
    cd[last] = tiles * kk;
    gs_part_value cv = {vals, gs_shape_array(gs_part_arena(c), xb->type, xb->rank, cd), s,
                        GS_OP_ADD};
    gs_part_value ci = {idx, gs_shape_array(gs_part_arena(c), GS_S32, xb->rank, cd), s, GS_OP_ADD};
    gs_part_value gv, gi;
    gs_part_reshard(c, &cv, rs, &gv);
    gs_part_reshard(c, &ci, rs, &gi);
    gs_computation *cmp = c->failed ? NULL : comparator(c, xb->type, largest);
    if (c->failed || !cmp || !gv.hlo || !gi.hlo) {
        if (!c->failed) gs_part_oom(c);
        return false;
    }
    gs_instr *both[2] = {gv.hlo, gi.hlo};
    gs_shape *sl[2] = {(gs_shape *)gv.hlo->shape, (gs_shape *)gi.hlo->shape};
    gs_shape *sts = gs_shape_tuple(&b->m->arena, 2, sl);
    gs_instr *sorted = sts ? gs_build(b, GS_OP_SORT, sts, 2, both) : NULL;
    int64_t dim = last;
    gs_build_set_ints(b, sorted, GS_ATTR_DIMENSIONS, 1, &dim);
    gs_build_set_bool(b, sorted, GS_ATTR_IS_STABLE, true);
    gs_build_set_comp(b, sorted, GS_ATTR_TO_APPLY, cmp);
    int64_t start[GS_MAX_RANK] = {0}, limit[GS_MAX_RANK];
    memcpy(limit, gv.hlo->shape->dims, sizeof *limit * (size_t)xb->rank);
    limit[last] = k;
    gs_instr *res[2];
    for (int i = 0; i < 2; i++)
        res[i] = gs_build_slice(b, gs_build_gte(b, sorted, i), start, limit, NULL);
    out->hlo = gs_build_tuple(b, 2, res);
    out->base = in->shape;
    out->sharding = ts;
    out->combiner = GS_OP_ADD;
    if (!out->hlo) gs_part_oom(c);
    return out->hlo != NULL;
}
