/*
 * h_rotate.c — XLA's partitioner-internal custom-call `_SPMDInternalOp_RotateRight`
 * (backend_config "dimension=D,amount=A": out[i] = in[(i - A) mod n] along D).
 *
 * Along an untiled D each device rotates its own shard. Along a tiled D (n elements in shards
 * of s) device t's output [t*s, t*s + s) reads input [t*s - A, t*s - A + s): where that is
 * below 0 it wraps to the end of the input. Two halo reads by collective-permute (one of the
 * window shifted by -A, one by n - A) and a select on the global position j < A build it; the
 * positions of the padding are never read.
 */
#include "internal.h"

bool gs_part_handle_rotate_right(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                 gs_part_value *out) {
    int64_t dim, amount;
    if (!gs_type_is_array(in->shape->type) || !gs_part_plain(t) ||
        !gs_instr_config_int(in, "dimension", &dim) ||
        !gs_instr_config_int(in, "amount", &amount) || dim < 0 || dim >= in->shape->rank ||
        amount < 0 || in->n_operands != 1 || !gs_shape_same_dims(in->operands[0]->shape, in->shape))
        return false; /* not a rotation as XLA writes it: the default action */
    gs_part_value v;
    gs_part_reshard(c, gs_part_operand(c, in, 0), t, &v);
    gs_instr *x = v.hlo;
    if (!x) return false;
    int64_t n = in->shape->dims[dim], a = n > 0 ? amount % n : 0;
    int64_t tiles = t->kind == GS_SHARDING_TILED ? t->tiles.dims[dim] : 1;
    gs_instr *y;
    if (tiles == 1) {
        y = gs_part_clone(c, in, x->shape, 1, &x);
    } else if (a == 0) {
        y = x;
    } else {
        int64_t s = x->shape->dims[dim];
        if (s < 1) return false;
        int64_t live = (n + s - 1) / s;
        int64_t l, r;
        if (!gs_part_halo_extent(t, (int)dim, n, -a, s, s, live, &l, &r) ||
            !gs_part_halo_extent(t, (int)dim, n, n - a, s, s, live, &l, &r))
            return false;
        gs_instr *head = gs_part_halo_read(c, x, t, (int)dim, n, -a, s, s, live, NULL);
        gs_instr *wrap = gs_part_halo_read(c, x, t, (int)dim, n, n - a, s, s, live, NULL);
        if (!head || !wrap) return false;
        gs_builder *b = gs_part_builder(c);
        const gs_shape *ls = x->shape;
        gs_instr *pos = gs_build_iota(b, GS_S32, ls->rank, ls->dims, (int)dim);
        gs_instr *off = gs_part_shard_offset(c, t, (int)dim, s);
        pos = gs_build_binary(b, GS_OP_ADD, pos, gs_part_bcast_scalar(c, off, ls));
        gs_instr *wraps =
            gs_build_compare(b, pos, gs_part_bcast_scalar(c, gs_part_s32(c, a), ls), "LT");
        y = gs_build_select(b, wraps, wrap, head);
    }
    out->hlo = y;
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return y != NULL;
}
