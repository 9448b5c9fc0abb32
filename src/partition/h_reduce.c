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
 * (and variadic reduces) take the default action.
 */
#include "internal.h"

bool gs_h_reduce(gs_pctx *c, const gs_instr *in, const gs_sharding *t, gs_pvalue *out) {
    (void)t;
    if (in->n_operands != 2 || !gs_type_is_array(in->shape->type)) return false;
    gs_opcode op;
    if (!gs_p_reducer_op(gs_instr_comp(in, GS_ATTR_TO_APPLY), &op)) return false;
    const gs_pvalue *v = gs_p_operand(c, in, 0);
    const gs_shape *base = v->base;
    gs_type ty = base->type;
    if (ty != in->shape->type) return false;
    gs_ints rd = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    gs_pvalue x = *v;
    if (!gs_p_plain(x.sharding)) gs_reshard(c, v, gs_p_replicated(c, base), &x);
    const gs_sharding *s = x.sharding;
    int tiled[GS_MAX_RANK], nt = 0, all[GS_MAX_RANK];
    int64_t rd64[GS_MAX_RANK];
    for (int i = 0; i < rd.n; i++) {
        all[i] = (int)rd.v[i];
        rd64[i] = rd.v[i];
        if (gs_p_tiles(s, (int)rd.v[i]) > 1) tiled[nt++] = (int)rd.v[i];
    }
    gs_pvalue init;
    gs_reshard(c, gs_p_operand(c, in, 1), gs_p_replicated(c, in->operands[1]->shape), &init);
    bool identity = gs_p_is_identity(in->operands[1], op);
    gs_instr *id = nt > 0 ? gs_p_identity(c, op, ty) : init.hlo;
    if (!id) return false;
    gs_instr *local = gs_p_mask(c, x.hlo, s, base->dims, rd.n, all, id);
    /* The result's sharding: kept dims as in the operand; the tiled reduced dims become the
     * unreduced subgroup; then the reduced dims drop. */
    const gs_sharding *ps = nt > 0 ? gs_p_make_unreduced(c, s, nt, tiled) : s;
    gs_sharding *rs = NULL;
    if (gs_sharding_remove_dims(gs_p_a(c), ps, rd.n, rd64, &rs) != GS_OK || !rs) {
        gs_p_oom(c);
        return false;
    }
    const gs_shape *ls = gs_p_local_shape(c, in->shape, rs);
    gs_instr *ops[2] = {local, id};
    gs_instr *y = gs_p_clone(c, in, ls, 2, ops);
    out->hlo = y;
    out->base = in->shape;
    out->sharding = rs;
    out->red = op;
    if (nt > 0 && !identity) {
        /* Combine now, then apply the real init once. */
        gs_pvalue whole;
        gs_reshard(c, out, gs_p_reduced_form(c, rs), &whole);
        gs_instr *init_b = gs_p_bcast_scalar(c, init.hlo, whole.hlo ? whole.hlo->shape : ls);
        out->hlo = gs_build_binary(gs_p_b(c), op, whole.hlo, init_b);
        out->sharding = whole.sharding;
        out->red = GS_OP_ADD;
    }
    return out->hlo != NULL;
}
