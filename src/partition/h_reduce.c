/*
 * h_reduce.c — reduce (one operand) on shards: each device reduces its shard, the padding of
 * uneven reduced dims masked with the reduction's identity first; when some reduced dim is
 * tiled, the devices along it hold partial results, which the value records as an unreduced
 * subgroup. The driver then combines them as the instruction's sharding asks: an all-reduce
 * (whole result), a reduce-scatter (result tiled along those devices), or nothing when the
 * instruction's sharding is itself partial.
 *
 * Partial results combine correctly only when the local init is the identity; a reduce whose
 * init is anything else reduces locally from the identity, all-reduces, and applies the init
 * once. Reducers other than add, multiply, maximum, minimum, and, or, xor of the two parameters
 * take the default action.
 *
 * A variadic reduce (k inputs reduced together, as argmax reduces values with their indices)
 * has no collective that combines its partial results, so each device reduces its shards (the
 * padding filled with the inits), the k partial results are all-gathered along the devices that
 * split the reduced dims, and reduced once more with the same computation.
 */
#include "internal.h"

#include <string.h>

static bool variadic_reduce(gs_part_ctx *c, const gs_instr *in, gs_part_value *out) {
    int k = in->n_operands / 2;
    if (in->n_operands != 2 * k || k < 2 || in->shape->type != GS_TUPLE || in->shape->n_tuple != k)
        return false;
    const gs_shape *base = in->operands[0]->shape;
    for (int i = 0; i < 2 * k; i++)
        if (!gs_type_is_array(in->operands[i]->shape->type) ||
            (i < k && !gs_shape_same_dims(in->operands[i]->shape, base)))
            return false;
    const gs_part_value *v0 = gs_part_operand(c, in, 0);
    const gs_sharding *s = gs_part_plain(v0->sharding) ? v0->sharding : gs_part_replicated(c, base);
    gs_ints rd = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    int all[GS_MAX_RANK], tiled[GS_MAX_RANK], nt = 0;
    int64_t rd64[GS_MAX_RANK];
    for (int i = 0; i < rd.n; i++) {
        all[i] = (int)rd.v[i];
        rd64[i] = rd.v[i];
        if (gs_sharding_tiles_in_dim(s, (int)rd.v[i]) > 1) tiled[nt++] = (int)rd.v[i];
    }
    gs_instr *ops[2 * GS_MAX_RANK + 16];
    if (2 * k > (int)(sizeof ops / sizeof ops[0])) return false;
    for (int i = 0; i < k; i++) { /* inits, replicated */
        gs_part_value r;
        gs_part_reshard(c, gs_part_operand(c, in, k + i),
                        gs_part_replicated(c, in->operands[k + i]->shape), &r);
        ops[k + i] = r.hlo;
    }
    for (int i = 0; i < k; i++) { /* inputs on s, their padding filled with the inits */
        gs_part_value r;
        gs_part_reshard(c, gs_part_operand(c, in, i), s, &r);
        ops[i] = r.hlo && ops[k + i] ? gs_part_mask(c, r.hlo, s, base->dims, rd.n, all, ops[k + i])
                                     : NULL;
    }
    for (int i = 0; i < 2 * k; i++)
        if (!ops[i]) return false;
    const gs_sharding *fs = nt > 0 ? gs_part_replicate_dims(c, s, nt, tiled) : s;
    gs_sharding *rs = NULL;
    if (gs_sharding_remove_dims(gs_part_arena(c), fs, rd.n, rd64, &rs) != GS_OK || !rs) {
        gs_part_oom(c);
        return false;
    }
    gs_arena *a = gs_part_arena(c);
    gs_shape **leaves = GS_NEW_ARRAY(a, gs_shape *, k);
    gs_sharding **lsh = GS_NEW_ARRAY(a, gs_sharding *, k);
    if (!leaves || !lsh) {
        gs_part_oom(c);
        return false;
    }
    for (int i = 0; i < k; i++) {
        leaves[i] = (gs_shape *)gs_part_local_shape(c, in->shape->tuple[i], rs);
        lsh[i] = rs;
        if (!leaves[i]) return false;
    }
    gs_shape *ts = gs_shape_tuple(&gs_part_builder(c)->m->arena, k, leaves);
    gs_instr *y = ts ? gs_part_clone(c, in, ts, 2 * k, ops) : NULL;
    if (y && nt > 0) {
        /* The partials as arrays with one element per tile along each reduced dim, gathered
         * along the devices that split them, reduced again. */
        gs_builder *b = gs_part_builder(c);
        int64_t pd[GS_MAX_RANK], ld[GS_MAX_RANK];
        const gs_shape *xl = ops[0]->shape;
        for (int d = 0; d < base->rank; d++) {
            bool red = false;
            for (int i = 0; i < rd.n; i++) red |= rd.v[i] == d;
            pd[d] = red ? gs_sharding_tiles_in_dim(s, d) : base->dims[d];
            ld[d] = red ? 1 : xl->dims[d];
        }
        gs_instr *g[2 * GS_MAX_RANK + 16];
        for (int i = 0; i < k && y; i++) {
            gs_instr *part = gs_build_reshape(b, gs_build_gte(b, y, i), base->rank, ld);
            gs_part_value pv = {part, gs_shape_array(a, in->shape->tuple[i]->type, base->rank, pd),
                                s, GS_OP_ADD},
                          whole;
            gs_part_reshard(c, &pv, fs, &whole);
            g[i] = whole.hlo;
            g[k + i] = ops[k + i];
            if (!g[i]) y = NULL;
        }
        if (y) y = gs_part_clone(c, in, ts, 2 * k, g);
    }
    out->hlo = y;
    out->base = in->shape;
    out->sharding = gs_sharding_tuple(a, k, lsh);
    out->combiner = GS_OP_ADD;
    return y != NULL && out->sharding != NULL;
}

bool gs_part_handle_reduce(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                           gs_part_value *out) {
    (void)t;
    if (in->n_operands > 2 && in->n_operands % 2 == 0) return variadic_reduce(c, in, out);
    if (in->n_operands != 2 || !gs_type_is_array(in->shape->type)) return false;
    gs_opcode op;
    if (!gs_computation_binary_reducer(gs_instr_comp(in, GS_ATTR_TO_APPLY), &op)) return false;
    const gs_part_value *v = gs_part_operand(c, in, 0);
    const gs_shape *base = v->base;
    gs_type ty = base->type;
    if (ty != in->shape->type) return false;
    gs_ints rd = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    gs_part_value x = *v;
    if (!gs_part_plain(x.sharding)) gs_part_reshard(c, v, gs_part_replicated(c, base), &x);
    const gs_sharding *s = x.sharding;
    int tiled[GS_MAX_RANK], nt = 0, all[GS_MAX_RANK];
    int64_t rd64[GS_MAX_RANK];
    for (int i = 0; i < rd.n; i++) {
        all[i] = (int)rd.v[i];
        rd64[i] = rd.v[i];
        if (gs_sharding_tiles_in_dim(s, (int)rd.v[i]) > 1) tiled[nt++] = (int)rd.v[i];
    }
    gs_part_value init;
    gs_part_reshard(c, gs_part_operand(c, in, 1), gs_part_replicated(c, in->operands[1]->shape),
                    &init);
    bool identity = gs_part_is_identity(in->operands[1], op);
    gs_instr *id = nt > 0 ? gs_part_identity(c, op, ty) : init.hlo;
    if (!id) return false;
    gs_instr *local = gs_part_mask(c, x.hlo, s, base->dims, rd.n, all, id);
    /* The result's sharding: kept dims as in the operand; the tiled reduced dims become the
     * unreduced subgroup; then the reduced dims drop. */
    const gs_sharding *ps = nt > 0 ? gs_part_make_unreduced(c, s, nt, tiled) : s;
    gs_sharding *rs = NULL;
    if (gs_sharding_remove_dims(gs_part_arena(c), ps, rd.n, rd64, &rs) != GS_OK || !rs) {
        gs_part_oom(c);
        return false;
    }
    const gs_shape *ls = gs_part_local_shape(c, in->shape, rs);
    gs_instr *ops[2] = {local, id};
    gs_instr *y = gs_part_clone(c, in, ls, 2, ops);
    out->hlo = y;
    out->base = in->shape;
    out->sharding = rs;
    out->combiner = op;
    if (nt > 0 && !identity) {
        /* Combine now, then apply the real init once. */
        gs_part_value whole;
        gs_part_reshard(c, out, gs_part_reduced_form(c, rs), &whole);
        gs_instr *init_b = gs_part_bcast_scalar(c, init.hlo, whole.hlo ? whole.hlo->shape : ls);
        out->hlo = gs_build_binary(gs_part_builder(c), op, whole.hlo, init_b);
        out->sharding = whole.sharding;
        out->combiner = GS_OP_ADD;
    }
    return out->hlo != NULL;
}
