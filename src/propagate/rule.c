/*
 * rule.c — propagation through an op's factor rule (gs_op_rule_build, src/sharding/rules.c) for
 * the ops XLA's pass has no handler for but that the partitioner can split along some dims
 * (topk): a dim of the destination tensor made of exactly one pass-through factor takes the
 * tiles of the source dim made of that same factor; every other dim replicates. Reduction,
 * permutation, need-replication and blocked factors never carry a sharding (size-1 dims have
 * size-1 factors of their own, which carry nothing either).
 */
#include "internal.h"

const gs_sharding *gs_prop_rule_map(gs_prop_ctx *c, const gs_instr *in, bool src_is_result,
                                    int src_index, const gs_sharding *s, bool dst_is_result,
                                    int dst_index) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    gs_op_rule *r;
    if (gs_op_rule_build(c->a, in, &r) != GS_OK) {
        c->oom = true;
        return NULL;
    }
    if (r->is_default) return NULL;
    const gs_tensor_factors *src = src_is_result ? &r->results[src_index] : &r->operands[src_index];
    const gs_tensor_factors *dst = dst_is_result ? &r->results[dst_index] : &r->operands[dst_index];
    if ((src_is_result ? src_index >= r->n_results : src_index >= r->n_operands) ||
        (dst_is_result ? dst_index >= r->n_results : dst_index >= r->n_operands))
        return NULL;
    if (src->rank != s->data_rank) return NULL;
    int64_t sd[GS_MAX_RANK], td[GS_MAX_RANK];
    int n = 0;
    for (int j = 0; j < dst->rank; j++) {
        if (dst->dims[j].n != 1) continue;
        int f = dst->dims[j].factors[0];
        if (r->factors[f].kind != GS_FACTOR_PASS_THROUGH || r->factors[f].blocked) continue;
        for (int i = 0; i < src->rank; i++)
            if (src->dims[i].n == 1 && src->dims[i].factors[0] == f) {
                sd[n] = i;
                td[n++] = j;
                break;
            }
    }
    return gs_prop_along_dims(c, s, n, sd, td, dst->rank);
}
