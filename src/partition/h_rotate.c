/*
 * h_rotate.c — XLA's partitioner-internal custom-calls that shift shards:
 *
 * `_SPMDInternalOp_RotateRight` (backend_config "dimension=D,amount=A": out[i] = in[(i - A) mod
 * n] along D), `_SPMDInternalOp_MultiRotate` (several rotations at once), `_SPMDInternalOp_Wrap`
 * (circular padding) and `_SPMDInternalOp_MultiPad` (several paddings at once).
 *
 * Along an untiled D each device rotates its own shard. Along a tiled D (n elements in shards
 * of s) device t's output [t*s, t*s + s) reads input [t*s - A, t*s - A + s): where that is
 * below 0 it wraps to the end of the input. Two halo reads by collective-permute (one of the
 * window shifted by -A, one by n - A) and a select on the global position j < A build it; the
 * positions of the padding are never read.
 */
#include "internal.h"

/* Device tile t's window [a0 + t*step, a0 + t*step + len) of x (its shard along tiled dim d
 * of s; n elements) read circularly: a position j below 0 (`low`) reads j + n, one from n on
 * (`high`) reads j - n, each by its own halo read, chosen by a select on the position. The
 * callers say which wraps their valid outputs reach. NULL when a read has no halo plan. */
static gs_instr *circular_window(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, int d,
                                 int64_t n, int64_t a0, int64_t step, int64_t len, int64_t live,
                                 bool low, bool high) {
    int64_t l, r;
    if (!gs_part_halo_extent(s, d, n, a0, step, len, live, &l, &r) ||
        (low && !gs_part_halo_extent(s, d, n, a0 + n, step, len, live, &l, &r)) ||
        (high && !gs_part_halo_extent(s, d, n, a0 - n, step, len, live, &l, &r)))
        return NULL;
    gs_instr *w = gs_part_halo_read(c, x, s, d, n, a0, step, len, live, NULL);
    if (!w || (!low && !high)) return w;
    gs_builder *b = gs_part_builder(c);
    const gs_shape *ws = w->shape;
    gs_instr *pos = gs_build_iota(b, GS_S32, ws->rank, ws->dims, d);
    gs_instr *off = gs_part_add(c, gs_part_shard_offset(c, s, d, step), gs_part_s32(c, a0));
    pos = gs_build_binary(b, GS_OP_ADD, pos, gs_part_bcast_scalar(c, off, ws));
    for (int side = 0; side < 2 && w; side++) {
        if (!(side == 0 ? low : high)) continue;
        gs_instr *other =
            gs_part_halo_read(c, x, s, d, n, side == 0 ? a0 + n : a0 - n, step, len, live, NULL);
        gs_instr *edge = gs_part_bcast_scalar(c, gs_part_s32(c, side == 0 ? 0 : n), ws);
        gs_instr *wraps = gs_build_compare(b, pos, edge, side == 0 ? "LT" : "GE");
        w = other ? gs_build_select(b, wraps, other, w) : NULL;
    }
    return w;
}

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
    int64_t tiles = gs_sharding_tiles_in_dim(t, (int)dim);
    gs_instr *y;
    if (tiles == 1) {
        y = gs_part_clone(c, in, x->shape, 1, &x);
    } else if (a == 0) {
        y = x;
    } else {
        /* output j reads input j - a: below 0 for the first a positions */
        int64_t s = x->shape->dims[dim];
        if (s < 1) return false;
        y = circular_window(c, x, t, (int)dim, n, -a, s, s, (n + s - 1) / s, true, false);
    }
    gs_part_result(out, y, in->shape, t);
    return y != NULL;
}

/* `_SPMDInternalOp_MultiRotate` (backend_config "dimension=D,left_amount=L,right_amount=R"):
 * L + R + 1 results, result i the operand rotated left by L - i (out[j] = in[(j + L - i) mod
 * n]). Along a tiled D, each device reads one circular window of L + s + R elements (its own
 * shard s, R before it and L after it, wrapping round the ends: XLA's two halos) and slices every
 * result from it. Along an untiled D each device rotates its own shard. */
bool gs_part_handle_multi_rotate(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                 gs_part_value *out) {
    int64_t dim, la, ra;
    if (in->n_operands != 1 || !gs_instr_config_int(in, "dimension", &dim) ||
        !gs_instr_config_int(in, "left_amount", &la) ||
        !gs_instr_config_int(in, "right_amount", &ra) || la < 0 || ra < 0 ||
        in->shape->type != GS_TUPLE || in->shape->n_tuple != la + ra + 1 || la + ra + 1 > 64 ||
        t->kind != GS_SHARDING_TUPLE || t->n_tuple != in->shape->n_tuple)
        return false;
    const gs_shape *xs = in->operands[0]->shape;
    if (!gs_type_is_array(xs->type) || dim < 0 || dim >= xs->rank) return false;
    const gs_sharding *ts = t->tuple[0];
    for (int i = 0; i < in->shape->n_tuple; i++)
        if (!gs_sharding_equal(t->tuple[i], ts) || !gs_shape_equal(in->shape->tuple[i], xs))
            return false;
    if (!gs_part_plain(ts)) return false;
    gs_part_value v;
    gs_part_reshard(c, gs_part_operand(c, in, 0), ts, &v);
    gs_instr *x = v.hlo;
    if (!x) return false;
    int64_t n = xs->dims[dim], k = gs_sharding_tiles_in_dim(ts, (int)dim);
    if (k == 1) {
        const gs_shape *local[64];
        for (int i = 0; i < in->shape->n_tuple; i++) local[i] = x->shape;
        gs_shape *tup = gs_shape_tuple(gs_part_arena(c), in->shape->n_tuple, (gs_shape **)local);
        gs_instr *y = tup ? gs_part_clone(c, in, tup, 1, &x) : NULL;
        gs_part_result(out, y, in->shape, t);
        return y != NULL;
    }
    int64_t s = x->shape->dims[dim];
    if (s < 1 || la >= n || ra >= n) return false;
    gs_instr *ext = circular_window(c, x, ts, (int)dim, n, -ra, s, s + la + ra, (n + s - 1) / s,
                                    ra > 0, la > 0);
    if (!ext) return false;
    gs_builder *b = gs_part_builder(c);
    gs_instr *res[64];
    for (int64_t i = 0; i <= la + ra; i++) {
        int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
        for (int d = 0; d < xs->rank; d++) lim[d] = ext->shape->dims[d];
        st[dim] = la - i + ra;
        lim[dim] = st[dim] + s;
        res[i] = gs_build_slice(b, ext, st, lim, NULL);
    }
    gs_instr *y = gs_build_tuple(b, (int)(la + ra + 1), res);
    gs_part_result(out, y, in->shape, t);
    return y != NULL;
}

/* `_SPMDInternalOp_Wrap` (backend_config "dimension=D,left_amount=L,right_amount=R"): the
 * operand padded circularly along D, L elements from its end before it and R from its start
 * after it (out[j] = in[(j - L) mod n], n + L + R long). Along a tiled D each device's result
 * shard (ps long) reads the circular window [t*ps - L, t*ps - L + ps) of the operand, which is
 * split as the result is. Along an untiled D each device wraps its own shard. */
bool gs_part_handle_wrap(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out) {
    int64_t dim, la, ra;
    if (in->n_operands != 1 || !gs_type_is_array(in->shape->type) || !gs_part_plain(t) ||
        !gs_instr_config_int(in, "dimension", &dim) ||
        !gs_instr_config_int(in, "left_amount", &la) ||
        !gs_instr_config_int(in, "right_amount", &ra) || la < 0 || ra < 0)
        return false;
    const gs_shape *xs = in->operands[0]->shape;
    if (!gs_type_is_array(xs->type) || dim < 0 || dim >= xs->rank || xs->rank != in->shape->rank)
        return false;
    for (int d = 0; d < xs->rank; d++)
        if (in->shape->dims[d] != xs->dims[d] + (d == dim ? la + ra : 0)) return false;
    int64_t n = xs->dims[dim], k = gs_sharding_tiles_in_dim(t, (int)dim);
    if (la > n || ra > n) return false;
    gs_part_value v;
    gs_part_reshard(c, gs_part_operand(c, in, 0), t, &v);
    gs_instr *x = v.hlo;
    if (!x) return false;
    gs_instr *y;
    if (k == 1) {
        y = gs_part_clone(c, in, gs_part_local_shape(c, in->shape, t), 1, &x);
    } else {
        int64_t m = in->shape->dims[dim], ps = (m + k - 1) / k;
        y = circular_window(c, x, t, (int)dim, n, -la, ps, ps, gs_part_live_tiles(k, ps, m),
                            la > 0, ra > 0);
    }
    gs_part_result(out, y, in->shape, t);
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
    gs_part_result(out, gs_build_tuple(b, (int)amt + 1, res), in->shape, t);
    return out->hlo != NULL;
}
