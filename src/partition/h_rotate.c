/*
 * h_rotate.c — XLA's partitioner-internal custom-calls that shift shards:
 *
 * `_SPMDInternalOp_RotateRight` (backend_config "dimension=D,amount=A": out[i] = in[(i - A) mod
 * n] along D).
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

/* `_SPMDInternalOp_MultiPad` (backend_config "dimension=D,amt=A,bufferize=B"): operands x and a
 * scalar pad value p; result i (of A + 1) is x padded by A - i before and i after along D. Each
 * is a window of one extended array [p x A, x, p x A]: along a tiled D whose results split into
 * shards as long as x's, device t reads x's [t*s - A, t*s + s) by one halo exchange (positions
 * outside x the pad value), and result i is its slice [i, i + s). Along an untiled D each
 * device pads its own shard. Other layouts take the default action. */
bool gs_part_handle_multi_pad(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                              gs_part_value *out) {
    int64_t dim, amt;
    if (in->n_operands != 2 || !gs_instr_config_int(in, "dimension", &dim) ||
        !gs_instr_config_int(in, "amt", &amt) || amt < 0 || in->shape->type != GS_TUPLE ||
        in->shape->n_tuple != amt + 1 || t->kind != GS_SHARDING_TUPLE || t->n_tuple != amt + 1)
        return false;
    const gs_shape *xs = in->operands[0]->shape;
    if (!gs_type_is_array(xs->type) || dim < 0 || dim >= xs->rank ||
        in->operands[1]->shape->rank != 0)
        return false;
    const gs_sharding *ts = t->tuple[0];
    for (int i = 0; i <= amt; i++) {
        const gs_shape *r = in->shape->tuple[i];
        if (!gs_sharding_equal(t->tuple[i], ts) || r->type != xs->type || r->rank != xs->rank)
            return false;
        for (int d = 0; d < xs->rank; d++)
            if (r->dims[d] != xs->dims[d] + (d == dim ? amt : 0)) return false;
    }
    if (!gs_part_plain(ts)) return false;
    int64_t n = xs->dims[dim], k = gs_sharding_tiles_in_dim(ts, (int)dim);
    int64_t s = (n + k - 1) / k;
    if (k > 1 && (s < 1 || (n + amt + k - 1) / k != s)) return false;
    gs_part_value v, pv;
    gs_part_reshard(c, gs_part_operand(c, in, 0), ts, &v);
    gs_part_reshard(c, gs_part_operand(c, in, 1), gs_part_replicated(c, in->operands[1]->shape),
                    &pv);
    gs_instr *x = v.hlo, *p = pv.hlo;
    if (!x || !p) return false;
    gs_builder *b = gs_part_builder(c);
    int r = xs->rank;
    gs_instr *ext = x;
    if (k > 1) {
        int64_t live = (n + amt + s - 1) / s, l, h;
        if (live > k) live = k;
        if (!gs_part_halo_extent(ts, (int)dim, n, -amt, s, s + amt, live, &l, &h)) return false;
        ext = gs_part_halo_read(c, x, ts, (int)dim, n, -amt, s, s + amt, live, p);
    } else {
        int64_t lo[GS_MAX_RANK] = {0}, hi[GS_MAX_RANK] = {0};
        lo[dim] = hi[dim] = amt;
        ext = gs_build_pad(b, x, p, lo, hi, NULL);
    }
    if (!ext) return false;
    int64_t len = k > 1 ? s : n;
    gs_instr *res[64];
    if (amt + 1 > 64) return false;
    for (int i = 0; i <= amt; i++) {
        int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
        for (int d = 0; d < r; d++) lim[d] = ext->shape->dims[d];
        st[dim] = i;
        lim[dim] = i + len + (k > 1 ? 0 : amt);
        res[i] = gs_build_slice(b, ext, st, lim, NULL);
    }
    out->hlo = gs_build_tuple(b, (int)amt + 1, res);
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}
