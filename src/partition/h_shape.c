/*
 * h_shape.c — handlers for data movement: broadcast, reshape, transpose, reverse, slice, pad,
 * concatenate, dynamic-slice, dynamic-update-slice, iota and constant.
 *
 * The rule they share: dims that pass through unchanged keep the instruction's tiling, dims
 * whose contents move (sliced, padded, reversed, concatenated, dynamically indexed) are made
 * whole on every device first, the op runs on the per-device shapes, and the result (whole along
 * those dims) is cut down to the instruction's sharding by the driver's reshard — a local
 * dynamic-slice, no communication. Reshape keeps the tiling when the sharding transforms
 * exactly through it (XLA's ReshapeSharding) and no tiled dim is padded; otherwise it reshards
 * its operand or declines to the default action. Iota adds the device's shard offset along a
 * tiled iota dimension. Sort keeps the tiling of the other dims with the sort dim whole;
 * reduce-window keeps the tiling of the dims its window leaves alone, and of windowed dims by
 * halo exchange (the reduction's identity filling positions outside the input).
 */
#include "internal.h"

#include <math.h>
#include <string.h>

static gs_instr *resharded(gs_part_ctx *c, const gs_instr *in, int k, const gs_sharding *s) {
    gs_part_value r;
    gs_part_reshard(c, gs_part_operand(c, in, k), s, &r);
    return r.hlo;
}

/* The operands of `in` from k on, each resharded to replicated (index scalars, pad values). */
static void replicated_rest(gs_part_ctx *c, const gs_instr *in, int k, gs_instr **ops) {
    for (int i = k; i < in->n_operands; i++) {
        const gs_part_value *v = gs_part_operand(c, in, i);
        gs_part_value r;
        gs_part_reshard(c, v, gs_part_replicated(c, v->base), &r);
        ops[i] = r.hlo;
    }
}

static bool plain_array(const gs_instr *in, const gs_sharding *t) {
    return gs_type_is_array(in->shape->type) && gs_part_plain(t);
}

/* ------------------------------------------------------------------ broadcast */

bool gs_part_handle_broadcast(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                              gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    gs_ints bd = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    int r = in->shape->rank;
    bool is_operand[GS_MAX_RANK] = {0};
    for (int i = 0; i < bd.n; i++) {
        if (bd.v[i] < 0 || bd.v[i] >= r || (i > 0 && bd.v[i] <= bd.v[i - 1])) return false;
        is_operand[bd.v[i]] = true;
    }
    int added[GS_MAX_RANK], na = 0;
    int64_t added64[GS_MAX_RANK];
    for (int i = 0; i < r; i++)
        if (!is_operand[i]) {
            added[na] = i;
            added64[na++] = i;
        }
    const gs_sharding *s = gs_part_replicate_dims(c, t, na, added);
    gs_sharding *op_s = NULL;
    if (gs_sharding_remove_dims(gs_part_arena(c), s, na, added64, &op_s) != GS_OK || !op_s) {
        gs_part_oom(c);
        return false;
    }
    gs_instr *x = resharded(c, in, 0, op_s);
    const gs_shape *ls = gs_part_local_shape(c, in->shape, t);
    if (!ls) return false;
    gs_part_result(out, gs_build_broadcast(gs_part_builder(c), x, r, ls->dims, bd.n, bd.v), in->shape, t);
    return out->hlo != NULL;
}

/* ------------------------------------------------------------------ reshape */

static bool even(const gs_shape *s, const gs_sharding *sh) {
    for (int i = 0; i < s->rank; i++)
        if (gs_part_uneven(sh, i, s->dims[i])) return false;
    return true;
}

/* The sharding of a reshape from `from` (shape a) to shape b, when a local reshape of the
 * per-device shards computes it exactly; NULL otherwise. */
static const gs_sharding *local_reshape(gs_part_ctx *c, const gs_shape *a, const gs_sharding *from,
                                        const gs_shape *b) {
    if (!gs_part_plain(from) || !even(a, from)) return NULL;
    gs_sharding *to = NULL;
    if (gs_sharding_reshape(gs_part_arena(c), from, a->rank, a->dims, b->rank, b->dims, &to) !=
        GS_OK) {
        gs_part_oom(c);
        return NULL;
    }
    if (!to || !gs_part_plain(to) || !even(b, to)) return NULL;
    if (gs_sharding_num_tiles(to) != gs_sharding_num_tiles(from)) return NULL;
    gs_shape *la = gs_part_local_shape(c, a, from), *lb = gs_part_local_shape(c, b, to);
    if (!la || !lb || gs_shape_elements(la) != gs_shape_elements(lb)) return NULL;
    return to;
}

/* x (held along dim d under s, of global shape base) turned into each device's window
 * [t*w, t*w + w) along d (t its tile along d, positions past the dim padding) when the windows
 * reach further than a neighbour: the dim all-gathered, then the window sliced at the device's
 * offset. A constant number of collectives whatever the device count, where a halo exchange
 * would need a hop per shard of reach. */
static gs_instr *gathered_window(gs_part_ctx *c, gs_instr *x, const gs_sharding *s,
                                 const gs_shape *base, int d, int64_t w) {
    int k = (int)gs_sharding_tiles_in_dim(s, d);
    gs_part_value v = {.hlo = x, .base = base, .sharding = s, .combiner = GS_OP_ADD};
    gs_part_value whole;
    gs_part_reshard(c, &v, gs_part_replicate_dims(c, s, 1, &d), &whole);
    if (!whole.hlo) return NULL;
    int64_t n = base->dims[d];
    return gs_part_whole_window(c, whole.hlo, s, d, d, n, 0, w, w, k, NULL);
}

/* A reshape whose shards do not line up: the operand split k ways along dim d, which leads its
 * group of merged or split dims (the dims before it hold as many elements as the result's dims
 * before e, the result dim its group starts with), and the result's shards along e are not the
 * operand's shards reshaped (an uneven dim on either side). Tile t holds the group's elements
 * [t*ca*ma, (t+1)*ca*ma) (ca the operand's shard, ma the elements per index of d) and needs
 * [t*cb*mb, (t+1)*cb*mb). Either the shard reshapes locally into whole rows of e (ma a
 * multiple of mb) and a halo exchange along e moves those rows into place, or (mb a multiple of
 * ma) a halo exchange along d first gives each device the rows of d its result shard is made
 * of, which then reshape locally. A halo that would reach beyond two neighbours, or move as
 * much as gathering, is read from the all-gathered dim instead (gathered_window). *rs gets the
 * result's sharding; NULL when the pattern does not apply. */
static gs_instr *realigned_reshape(gs_part_ctx *c, const gs_shape *a, const gs_sharding *from,
                                   gs_instr *x, const gs_shape *b, int d, const gs_sharding **rs) {
    int64_t k = gs_sharding_tiles_in_dim(from, d), na = a->dims[d], ca = (na + k - 1) / k;
    int64_t lead = 1, ma = 1, blead = 1, mb = 1;
    for (int i = 0; i < d; i++) lead *= a->dims[i];
    for (int i = d + 1; i < a->rank; i++) ma *= a->dims[i];
    int e = 0;
    while (e < b->rank && blead < lead) blead *= b->dims[e++];
    while (e + 1 < b->rank && b->dims[e] == 1) e++; /* unit dims join either group */
    if (blead != lead || e >= b->rank) return NULL;
    for (int i = e + 1; i < b->rank; i++) mb *= b->dims[i];
    int64_t nb = b->dims[e], cb = (nb + k - 1) / k;
    if (na * ma != nb * mb) return NULL;
    gs_arena *ar = gs_part_arena(c);
    gs_shape *av = gs_shape_with_type(ar, a, a->type), *bv = gs_shape_with_type(ar, b, b->type);
    if (!av || !bv) {
        gs_part_oom(c);
        return NULL;
    }
    bool rows_first = ma % mb == 0; /* reshape, then the halo along e */
    if (!rows_first && mb % ma != 0) return NULL;
    /* The padded shapes the local reshape maps between. */
    av->dims[d] = rows_first ? k * ca : k * (cb * (mb / ma));
    bv->dims[e] = rows_first ? k * ca * (ma / mb) : k * cb;
    const gs_sharding *to = local_reshape(c, av, from, bv);
    if (!to || gs_sharding_tiles_in_dim(to, e) != k) return NULL;
    for (int i = 0; i < b->rank; i++)
        if (i != e && gs_part_uneven(to, i, b->dims[i])) return NULL;
    /* The halo: along e of the reshaped shard, or along d of the operand's. */
    const gs_sharding *hs = rows_first ? to : from;
    int hd = rows_first ? e : d;
    int64_t n = rows_first ? bv->dims[e] : na, held = rows_first ? ca * (ma / mb) : ca;
    int64_t w = rows_first ? cb : av->dims[d] / k, span = rows_first ? nb : na;
    int64_t live = gs_part_live_tiles(k, w, span), L, R;
    /* XLA's partial halo exchange: a permute per hop. Up to two hops each way, while the
     * halos are smaller than gathering the dim; farther windows read the gathered dim. */
    bool near = gs_part_halo_extent(hs, hd, n, 0, w, w, live, &L, &R) && L <= 2 * held &&
                R <= 2 * held && L + R < (k - 1) * held;
    const gs_shape *lv = gs_part_local_shape(c, bv, to);
    if (!lv) return NULL;
    gs_builder *bl = gs_part_builder(c);
    gs_instr *y = x;
    if (rows_first) y = gs_build_reshape(bl, y, lv->rank, lv->dims);
    if (near) {
        y = gs_part_halo_read(c, y, hs, hd, n, 0, w, w, live, NULL);
    } else {
        gs_shape *hb = gs_shape_with_type(ar, rows_first ? bv : a, a->type);
        if (!hb) {
            gs_part_oom(c);
            return NULL;
        }
        hb->dims[hd] = n;
        y = y ? gathered_window(c, y, hs, hb, hd, w) : NULL;
    }
    if (!rows_first && y) y = gs_build_reshape(bl, y, lv->rank, lv->dims);
    *rs = to;
    return y;
}

static gs_instr *uneven_reshape(gs_part_ctx *c, const gs_shape *a, const gs_sharding *from,
                                gs_instr *x, const gs_shape *b, const gs_sharding **rs) {
    if (!gs_part_plain(from) || from->kind != GS_SHARDING_TILED || !x) return NULL;
    for (int d = 0; d < a->rank; d++) {
        if (gs_sharding_tiles_in_dim(from, d) < 2) continue;
        gs_instr *y = realigned_reshape(c, a, from, x, b, d, rs);
        if (y || c->failed) return y;
    }
    return NULL;
}

bool gs_part_handle_reshape(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                            gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    const gs_part_value *v = gs_part_operand(c, in, 0);
    const gs_shape *a = v->base, *b = in->shape;
    if (!gs_type_is_array(a->type) || a->type != b->type) return false;
    if (gs_shape_elements(a) != gs_shape_elements(b)) return false;
    gs_instr *x = NULL;
    const gs_sharding *rs = NULL;
    bool same_dims = a->rank == b->rank;
    for (int i = 0; same_dims && i < a->rank; i++) same_dims = a->dims[i] == b->dims[i];
    if (same_dims && gs_part_plain(v->sharding)) {
        /* A reshape to its own dims (even, or uneven when more tiles than elements): the value. */
        const gs_sharding *want = gs_part_plain(t) ? t : v->sharding;
        gs_part_value same;
        gs_part_reshard(c, v, want, &same);
        if (!same.hlo) return false;
        gs_part_result(out, gs_build_copy(gs_part_builder(c), same.hlo), b, want);
        return out->hlo != NULL;
    }
    const gs_sharding *fwd =
        gs_part_plain(v->sharding) ? local_reshape(c, a, v->sharding, b) : NULL;
    if (fwd && gs_sharding_equal(fwd, t)) {
        x = v->hlo;
        rs = fwd;
    } else {
        /* The operand sharding that reshapes to t, if any. */
        gs_sharding *back = NULL;
        if (gs_sharding_reshape(gs_part_arena(c), t, b->rank, b->dims, a->rank, a->dims, &back) !=
            GS_OK) {
            gs_part_oom(c);
            return false;
        }
        const gs_sharding *check = back ? local_reshape(c, a, back, b) : NULL;
        if (check && gs_sharding_equal(check, t)) {
            x = resharded(c, in, 0, back);
            rs = t;
        } else if (fwd) {
            x = v->hlo;
            rs = fwd;
        } else {
            gs_instr *y = uneven_reshape(c, a, v->sharding, v->hlo, b, &rs);
            if (!y) return false;
            gs_part_result(out, y, b, rs);
            return true;
        }
    }
    const gs_shape *ls = gs_part_local_shape(c, b, rs);
    if (!ls || !x) return false;
    if (gs_shape_elements(ls) != gs_shape_elements(x->shape)) return false; /* not a local one */
    gs_part_result(out, gs_build_reshape(gs_part_builder(c), x, ls->rank, ls->dims), b, rs);
    if (out->hlo && out->hlo == x) {
        /* Same per-device shape: keep a distinct instruction for the result's name. */
        out->hlo = gs_build_copy(gs_part_builder(c), x);
    }
    return out->hlo != NULL;
}

/* ------------------------------------------------------------------ transpose */

bool gs_part_handle_transpose(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                              gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    gs_ints p = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    int r = in->shape->rank;
    if (p.n != r) return false;
    int inv[GS_MAX_RANK], perm[GS_MAX_RANK];
    for (int i = 0; i < r; i++) {
        perm[i] = (int)p.v[i];
        inv[p.v[i]] = i;
    }
    gs_sharding *op_s = NULL;
    if (gs_sharding_transpose(gs_part_arena(c), t, r, inv, &op_s) != GS_OK || !op_s) {
        gs_part_oom(c);
        return false;
    }
    gs_instr *x = resharded(c, in, 0, op_s);
    if (!x) return false;
    gs_instr *y = gs_build_transpose(gs_part_builder(c), x, perm);
    if (y == x) y = gs_build_copy(gs_part_builder(c), x);
    gs_part_result(out, y, in->shape, t);
    return out->hlo != NULL;
}

/* ------------------------------------------------------------------ dims that move */

/* Runs `in` on per-device shards whose data dims `moved` (n entries) are whole: the operands
 * from 0 to n_data-1 are resharded to t with those dims replicated (each for its own shape), the
 * rest replicated; the op is cloned with per-device shapes; the result keeps that sharding. */
static bool with_whole_dims(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t, int n,
                            const int *moved, int n_data, gs_part_value *out) {
    const gs_sharding *s = gs_part_replicate_dims(c, t, n, moved);
    int k = in->n_operands;
    gs_instr **ops = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, k + 1);
    if (!ops) {
        gs_part_oom(c);
        return false;
    }
    for (int i = 0; i < n_data; i++) ops[i] = resharded(c, in, i, s);
    replicated_rest(c, in, n_data, ops);
    const gs_shape *ls = gs_part_local_shape(c, in->shape, s);
    if (!ls) return false;
    gs_part_result(out, NULL, in->shape, s);
    out->hlo = gs_part_clone(c, in, ls, k, ops);
    return out->hlo != NULL;
}

/* t with its tile order reversed along data dims dims[0..n) (XLA's ReverseSharding): the tiles
 * of a reversed dim, reversed in place, are the result's tiles in the reversed order. An
 * explicit device list (a collective-permute names every device anyway). */
static const gs_sharding *reverse_sharding(gs_part_ctx *c, const gs_sharding *t, int n,
                                           const int *dims) {
    if (t->kind != GS_SHARDING_TILED) return t;
    const gs_tile_assignment *ta = &t->tiles;
    gs_arena *a = gs_part_arena(c);
    int64_t *dev = GS_NEW_ARRAY(a, int64_t, ta->n), *rev = GS_NEW_ARRAY(a, int64_t, ta->n);
    if (!dev || !rev) {
        gs_part_oom(c);
        return NULL;
    }
    gs_tile_materialize(ta, dev);
    for (int64_t pos = 0; pos < ta->n; pos++) {
        int64_t idx[GS_MAX_TILE_RANK], rem = pos, src = 0;
        for (int i = ta->rank - 1; i >= 0; i--) {
            idx[i] = rem % ta->dims[i];
            rem /= ta->dims[i];
        }
        for (int k = 0; k < n; k++) idx[dims[k]] = ta->dims[dims[k]] - 1 - idx[dims[k]];
        for (int i = 0; i < ta->rank; i++) src = src * ta->dims[i] + idx[i];
        rev[pos] = dev[src];
    }
    gs_tile_assignment r;
    gs_sharding *out = NULL;
    if (gs_tile_explicit(a, ta->rank, ta->dims, rev, &r) == GS_OK)
        out = gs_sharding_subgroup(a, &r, t->n_subgroups, t->subgroups);
    if (!out) gs_part_oom(c);
    return out;
}

/* v reversed along dims[0..n) (a clone of `like`, when given, else a new reverse): along a
 * split dim each device reverses its own tile, which is the result's tile in the reversed tile
 * order (reverse_sharding); where the dim is uneven (padding at the end), the tile is first
 * shifted left by the padding with a halo exchange, so that after the local reverse the padding
 * is at the end again (XLA's HandleReverse). With no v->hlo, only out->sharding (planning). */
bool gs_part_reverse_value(gs_part_ctx *c, const gs_part_value *v, int n, const int *dims,
                           const gs_instr *like, gs_part_value *out) {
    const gs_sharding *s = v->sharding;
    const gs_shape *sh = v->base;
    if (!gs_part_plain(s) || n < 1) return false;
    int split[GS_MAX_RANK], ns = 0;
    int64_t rd[GS_MAX_RANK];
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] >= sh->rank) return false;
        rd[i] = dims[i];
        if (gs_sharding_tiles_in_dim(s, dims[i]) > 1) split[ns++] = dims[i];
    }
    gs_instr *x = v->hlo;
    for (int i = 0; i < ns && x; i++) {
        int dd = split[i];
        int64_t k = gs_sharding_tiles_in_dim(s, dd), len = sh->dims[dd], so = (len + k - 1) / k;
        int64_t pad = so * k - len;
        if (pad > 0) x = gs_part_halo_read(c, x, s, dd, len, -pad, so, so, k, NULL);
    }
    const gs_sharding *rs = ns ? reverse_sharding(c, s, ns, split) : s;
    if (!rs) return false;
    if (!x) { /* the sharding only (planning) */
        *out = (gs_part_value){NULL, sh, rs, v->combiner};
        return !v->hlo;
    }
    gs_builder *b = gs_part_builder(c);
    gs_instr *y = like ? gs_part_clone(c, like, x->shape, 1, &x)
                       : gs_build(b, GS_OP_REVERSE, x->shape, 1, &x);
    if (!y) return false;
    if (!like) gs_build_set_ints(b, y, GS_ATTR_DIMENSIONS, n, rd);
    *out = (gs_part_value){y, sh, rs, v->combiner};
    return true;
}

/* reverse: the operand in the reversed tile order of the result's sharding, reversed there
 * (gs_part_reverse_value). */
bool gs_part_handle_reverse(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                            gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    const gs_shape *sh = in->shape;
    int dims[GS_MAX_RANK], split[GS_MAX_RANK], ns = 0;
    if (d.n < 1 || d.n > GS_MAX_RANK) return false;
    for (int i = 0; i < d.n; i++) {
        if (d.v[i] < 0 || d.v[i] >= sh->rank) return false;
        dims[i] = (int)d.v[i];
        if (gs_sharding_tiles_in_dim(t, dims[i]) > 1) split[ns++] = dims[i];
    }
    const gs_sharding *rs = ns ? reverse_sharding(c, t, ns, split) : t;
    if (!rs) return false;
    gs_part_value v;
    gs_part_reshard(c, gs_part_operand(c, in, 0), rs, &v);
    if (!gs_part_reverse_value(c, &v, (int)d.n, dims, in, out)) return false;
    out->sharding = t;
    return true;
}

/* fft transforms its last len(fft_length) dims: those are made whole, the leading (batch) dims
 * keep their tiles. */
bool gs_part_handle_fft(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    gs_ints len = gs_instr_ints(in, GS_ATTR_FFT_LENGTH);
    int r = in->shape->rank;
    if (len.n < 1 || len.n > r || in->operands[0]->shape->rank != r) return false;
    if (gs_part_fft_distributed(c, in, t, out)) return true;
    if (c->failed) return false;
    int moved[GS_MAX_RANK];
    for (int i = 0; i < len.n; i++) moved[i] = r - len.n + i;
    return with_whole_dims(c, in, t, (int)len.n, moved, 1, out);
}

/* cholesky and triangular-solve work on the matrices in their last two dims: those are made
 * whole (for every operand), the leading batch dims keep their tiles. */
bool gs_part_handle_batched_matrix(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                   gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    int r = in->shape->rank;
    if (r < 2) return false;
    for (int k = 0; k < in->n_operands; k++)
        if (in->operands[k]->shape->rank != r) return false;
    int moved[2] = {r - 2, r - 1};
    return with_whole_dims(c, in, t, 2, moved, in->n_operands, out);
}

/* The slice computed in sharding t (its sliced dims made whole where no one-hop halo reaches
 * the window; with must_keep, such a dim fails instead). */
static bool slice_in(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t, bool must_keep,
                     gs_part_value *out) {
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_SLICE);
    const gs_shape *os = in->operands[0]->shape;
    if (!a || a->u.slice.n != os->rank) return false;
    /* Sliced dims the result tiles keep their tiling through a halo exchange when one hop
     * reaches; the other sliced dims are made whole. */
    int moved[GS_MAX_RANK], n = 0;
    bool halo[GS_MAX_RANK] = {0}, whole[GS_MAX_RANK] = {0};
    for (int i = 0; i < os->rank; i++) {
        const gs_slice_dim *sd = &a->u.slice.v[i];
        if (sd->start == 0 && sd->limit == os->dims[i] && sd->stride == 1) continue;
        int64_t l, r;
        if (sd->stride == 1 &&
            gs_part_halo_plan(t, i, os->dims[i], sd->start, in->shape->dims[i], &l, &r))
            halo[i] = true;
        else if (must_keep && gs_sharding_tiles_in_dim(t, i) > 1)
            return false;
        else
            whole[i] = true, moved[n++] = i;
    }
    const gs_sharding *s = gs_part_replicate_dims(c, t, n, moved);
    gs_instr *x = resharded(c, in, 0, s);
    if (!x) return false;
    int64_t st[GS_MAX_RANK], lim[GS_MAX_RANK], str[GS_MAX_RANK];
    for (int i = 0; i < os->rank; i++) {
        const gs_slice_dim *sd = &a->u.slice.v[i];
        st[i] = whole[i] ? sd->start : 0;
        lim[i] = whole[i] ? sd->limit : x->shape->dims[i];
        str[i] = whole[i] ? sd->stride : 1;
    }
    gs_instr *y = gs_build_slice(gs_part_builder(c), x, st, lim, str);
    for (int i = 0; i < os->rank && y; i++)
        if (halo[i])
            y = gs_part_halo_window(c, y, s, i, os->dims[i], a->u.slice.v[i].start,
                                    in->shape->dims[i], NULL);
    if (y == x) y = gs_build_copy(gs_part_builder(c), x);
    gs_part_result(out, y, in->shape, s);
    return out->hlo != NULL;
}

bool gs_part_handle_slice(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                          gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    /* An operand split into more tiles than the result is sliced where it lies (XLA's
     * HandleSlice): only the slice then moves to the result's sharding, not the operand. */
    const gs_sharding *s = gs_part_operand(c, in, 0)->sharding;
    if (gs_part_plain(s) && s->kind == GS_SHARDING_TILED &&
        gs_sharding_num_tiles(s) > gs_sharding_num_tiles(t) && slice_in(c, in, s, true, out))
        return true;
    if (c->failed) return false;
    return slice_in(c, in, t, false, out);
}

/* Positions a dim of n elements split k ways spans once each shard is dilated locally by d
 * (gs_part_dilate_shard); n itself when d is 1. */
static int64_t dilated_len(int64_t n, int64_t k, int64_t d) {
    return d > 1 ? (n + k - 1) / k * d * k : n;
}

bool gs_part_handle_pad(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_PADDING);
    int r = in->shape->rank;
    const gs_shape *os = in->operands[0]->shape;
    if (!a || a->u.padding->n != r) return false;
    /* Padded dims the result tiles go through a halo exchange (the positions outside the
     * operand masked with the pad value) when one hop reaches. With interior padding, as XLA
     * reads a pad as a window with base dilation, each shard is dilated locally first (its
     * holes the pad value) and its output window read from the dilated positions. The other
     * padded dims are made whole. */
    int moved[GS_MAX_RANK], n = 0;
    bool halo[GS_MAX_RANK] = {0}, dil[GS_MAX_RANK] = {0};
    for (int i = 0; i < r; i++) {
        const gs_pad_dim *p = &a->u.padding->dims[i];
        if (p->lo == 0 && p->hi == 0 && p->interior == 0) continue;
        int64_t l, h, k = gs_sharding_tiles_in_dim(t, i), o = in->shape->dims[i];
        int64_t so = (o + k - 1) / k;
        if (p->interior == 0 &&
            gs_part_halo_plan(t, i, os->dims[i], -p->lo, in->shape->dims[i], &l, &h))
            halo[i] = true;
        else if (p->interior > 0 && k > 1 && os->dims[i] > 0 && so > 0 &&
                 gs_part_halo_extent(t, i, dilated_len(os->dims[i], k, p->interior + 1), -p->lo,
                                     so, so, (o + so - 1) / so, &l, &h))
            dil[i] = true;
        else
            moved[n++] = i;
    }
    const gs_sharding *s = gs_part_replicate_dims(c, t, n, moved);
    gs_instr *x = resharded(c, in, 0, s);
    gs_instr *ops[2] = {x, NULL};
    replicated_rest(c, in, 1, ops);
    if (!x || !ops[1]) return false;
    for (int i = 0; i < r && x; i++) {
        if (!dil[i]) continue;
        const gs_pad_dim *p = &a->u.padding->dims[i];
        int64_t k = gs_sharding_tiles_in_dim(s, i), o = in->shape->dims[i], so = (o + k - 1) / k;
        x = gs_part_dilate_shard(c, x, s, os->dims, i, p->interior + 1, ops[1]);
        x = gs_part_halo_read(c, x, s, i, dilated_len(os->dims[i], k, p->interior + 1), -p->lo,
                              so, so, (o + so - 1) / so, ops[1]);
    }
    if (!x) return false;
    int64_t lo[GS_MAX_RANK], hi[GS_MAX_RANK], inr[GS_MAX_RANK];
    for (int i = 0; i < r; i++) {
        const gs_pad_dim *p = &a->u.padding->dims[i];
        bool local = halo[i] || dil[i];
        lo[i] = local ? 0 : p->lo;
        hi[i] = local ? 0 : p->hi;
        inr[i] = local ? 0 : p->interior;
    }
    gs_instr *y = gs_build_pad(gs_part_builder(c), x, ops[1], lo, hi, inr);
    for (int i = 0; i < r && y; i++)
        if (halo[i])
            y = gs_part_halo_window(c, y, s, i, os->dims[i], -a->u.padding->dims[i].lo,
                                    in->shape->dims[i], ops[1]);
    if (y == x) y = gs_build_copy(gs_part_builder(c), x);
    gs_part_result(out, y, in->shape, s);
    return out->hlo != NULL;
}

/* A concatenate along a tiled dim whose operands each reach their part of the device's result
 * window in a few neighbour hops (the pipeline's shifting buffer: [new slot, stages 0..S-2]):
 * every operand is read as a halo window at its offset (gs_part_halo_window), and the windows
 * are merged by the result position (iota + shard offset) against the operands' starts. The
 * hop count does not grow with the device count; wider reaches make the dim whole instead. */
#define CONCAT_MAX_HOPS 2
static bool concat_by_halos(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t, int d,
                            gs_part_value *out) {
    int64_t n_out = in->shape->dims[d], at = 0;
    for (int j = 0; j < in->n_operands; j++) {
        int64_t n = in->operands[j]->shape->dims[d];
        int64_t h = n > 0 ? gs_part_halo_hops(t, d, n, -at, n_out) : 0;
        if (h < 0 || h > CONCAT_MAX_HOPS) return false;
        at += n;
    }
    const gs_shape *ls = gs_part_local_shape(c, in->shape, t);
    if (!ls) return false;
    gs_builder *b = gs_part_builder(c);
    gs_instr *acc = NULL, *pos = NULL;
    at = 0;
    for (int j = 0; j < in->n_operands; j++) {
        int64_t n = in->operands[j]->shape->dims[d];
        if (n == 0) continue;
        gs_instr *w = gs_part_halo_window(c, resharded(c, in, j, t), t, d, n, -at, n_out, NULL);
        if (!w) return false;
        if (acc) {
            if (!pos) {
                int64_t so = ls->dims[d];
                gs_instr *iota = gs_build_iota(b, GS_S32, ls->rank, ls->dims, d);
                pos = gs_build_binary(
                    b, GS_OP_ADD, iota,
                    gs_part_bcast_scalar(c, gs_part_shard_offset(c, t, d, so), iota->shape));
            }
            gs_instr *start = gs_part_bcast_scalar(c, gs_part_s32(c, at), pos->shape);
            /* acc before w: the interpreter runs operands in order (rng draws stay in order) */
            acc = gs_build_select(b, gs_build_compare(b, pos, start, "LT"), acc, w);
        } else {
            acc = w;
        }
        at += n;
    }
    if (!acc) return false;
    gs_part_result(out, acc, in->shape, t);
    return out->hlo != NULL;
}

bool gs_part_handle_concatenate(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    if (d.n != 1) return false;
    int dim = (int)d.v[0];
    if (dim < 0 || dim >= in->shape->rank) return false;
    if (concat_by_halos(c, in, t, dim, out)) return true;
    if (c->failed) return false;
    return with_whole_dims(c, in, t, 1, &dim, in->n_operands, out);
}

bool gs_part_handle_dynamic_slice(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                  gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    if (gs_part_owner_slice(c, in, out)) return true; /* a stacked layer (h_scan.c) */
    if (c->failed) return false;
    const gs_shape *os = in->operands[0]->shape;
    if (in->n_operands != os->rank + 1) return false; /* the old form with one index vector */
    int moved[GS_MAX_RANK], n = 0;
    for (int i = 0; i < os->rank; i++)
        if (in->shape->dims[i] != os->dims[i]) moved[n++] = i;
    const gs_sharding *s = gs_part_replicate_dims(c, t, n, moved);
    gs_instr *ops[GS_MAX_RANK + 1];
    ops[0] = resharded(c, in, 0, s);
    replicated_rest(c, in, 1, ops);
    const gs_shape *ls = gs_part_local_shape(c, in->shape, s);
    if (!ops[0] || !ls) return false;
    gs_part_result(out, gs_build_dynamic_slice(gs_part_builder(c), ops[0], ops + 1, ls->dims), in->shape,
           s);
    return out->hlo != NULL;
}

bool gs_part_handle_dynamic_update_slice(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                         gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    if (gs_part_owner_update(c, in, out)) return true; /* into a stacked buffer (h_scan.c) */
    if (c->failed) return false;
    const gs_shape *os = in->shape, *us = in->operands[1]->shape;
    int r = os->rank;
    if (in->n_operands != r + 2 || us->rank != r) return false;
    /* A dim the update covers keeps the result's tiles (its start clamps to 0). Along a split
     * dim it does not cover, the update is whole on every device, and each device writes the
     * part of it that falls in its shard: its shard padded by the update's length on both
     * sides takes the update at the start made local (the global start, clamped, minus the
     * shard's offset, plus the padding; the local clamp sends an update that misses the shard
     * into the padding), and the padding is sliced off again. No data moves (XLA's
     * HandleDynamicUpdateSlice). */
    int whole[GS_MAX_RANK], nw = 0, split[GS_MAX_RANK], ns = 0;
    for (int i = 0; i < r; i++) {
        if (us->dims[i] == os->dims[i]) continue;
        whole[nw++] = i;
        if (gs_sharding_tiles_in_dim(t, i) > 1) split[ns++] = i;
    }
    if (ns == 0 || os->dynamic || us->dynamic) return with_whole_dims(c, in, t, nw, whole, 2, out);
    gs_instr *x = resharded(c, in, 0, t);
    gs_instr *u = resharded(c, in, 1, gs_part_replicate_dims(c, t, nw, whole));
    gs_instr *idx[GS_MAX_RANK + 2];
    replicated_rest(c, in, 2, idx);
    const gs_shape *ls = gs_part_local_shape(c, os, t);
    if (!x || !u || !ls) return false;
    gs_builder *b = gs_part_builder(c);
    int64_t lo[GS_MAX_RANK] = {0}, hi[GS_MAX_RANK] = {0}, in0[GS_MAX_RANK] = {0};
    gs_instr *starts[GS_MAX_RANK];
    for (int i = 0; i < r; i++) {
        gs_instr *v = idx[i + 2];
        if (!v) return false;
        /* s64 starts: an unsigned start less the offset must go negative. */
        starts[i] = gs_build_convert(b, v, GS_S64);
    }
    for (int k = 0; k < ns; k++) {
        int i = split[k];
        int64_t ud = us->dims[i];
        gs_instr *cl[3] = {gs_build_scalar_i(b, GS_S64, 0), starts[i],
                           gs_build_scalar_i(b, GS_S64, os->dims[i] - ud)};
        gs_instr *g = gs_build(b, GS_OP_CLAMP, cl[1]->shape, 3, cl);
        gs_instr *off = gs_build_convert(b, gs_part_shard_offset(c, t, i, ls->dims[i]), GS_S64);
        starts[i] = gs_build_binary(b, GS_OP_ADD, gs_build_binary(b, GS_OP_SUBTRACT, g, off),
                                    gs_build_scalar_i(b, GS_S64, ud));
        lo[i] = hi[i] = ud;
    }
    gs_instr *z = gs_build_scalar_i(b, os->type, 0);
    gs_instr *padded = gs_build_pad(b, x, z, lo, hi, in0);
    gs_instr *w = gs_build_dynamic_update_slice(b, padded, u, starts);
    int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
    for (int i = 0; i < r; i++) {
        st[i] = lo[i];
        lim[i] = lo[i] + ls->dims[i];
    }
    gs_part_result(out, w ? gs_build_slice(b, w, st, lim, NULL) : NULL, os, t);
    return out->hlo != NULL;
}

/* ------------------------------------------------------------------ iota, constant */

bool gs_part_handle_iota(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out) {
    if (!plain_array(in, t)) return false;
    gs_type ty = in->shape->type;
    if (ty == GS_PRED || gs_type_is_complex(ty)) return false;
    int k = (int)gs_instr_int(in, GS_ATTR_IOTA_DIMENSION, 0);
    const gs_shape *ls = gs_part_local_shape(c, in->shape, t);
    if (!ls || k < 0 || k >= ls->rank) return false;
    gs_builder *b = gs_part_builder(c);
    gs_instr *x = gs_build_iota(b, ty, ls->rank, ls->dims, k);
    if (gs_sharding_tiles_in_dim(t, k) > 1) {
        gs_instr *off = gs_build_convert(b, gs_part_shard_offset(c, t, k, ls->dims[k]), ty);
        x = gs_build_binary(b, GS_OP_ADD, x, gs_part_bcast_scalar(c, off, ls));
    }
    gs_part_result(out, x, in->shape, t);
    return x != NULL;
}

bool gs_part_handle_constant(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                             gs_part_value *out) {
    (void)t;
    /* The whole literal on every device; the driver's reshard cuts the shard (a local
     * dynamic-slice). */
    gs_part_result(out, gs_part_clone(c, in, in->shape, 0, NULL), in->shape,
           gs_part_replicated(c, in->shape));
    return out->hlo != NULL;
}

/* ------------------------------------------------------------------ sort, reduce-window */

bool gs_part_handle_sort(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out) {
    gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    int n = in->n_operands;
    if (d.n != 1 || n < 1) return false;
    const gs_shape *s0 = in->operands[0]->shape;
    const gs_sharding *lead = t->kind == GS_SHARDING_TUPLE ? t->tuple[0] : t;
    if (!gs_part_plain(lead)) lead = gs_sharding_replicated(gs_part_arena(c));
    if (lead->kind == GS_SHARDING_TILED && lead->data_rank != s0->rank) return false;
    int dim = (int)d.v[0];
    /* The sorted dim must be whole on each device. Its tiles move onto a dim no one splits (an
     * all-to-all there and back, as XLA does) -- the one they divide evenly, else the largest
     * with at least as many elements as tiles -- or, when there is none, are gathered. */
    int64_t a = gs_sharding_tiles_in_dim(lead, dim);
    int free_dim = -1;
    for (int j = 0; j < s0->rank && a > 1; j++) {
        if (j == dim || gs_sharding_tiles_in_dim(lead, j) != 1 || s0->dims[j] < a) continue;
        if (free_dim < 0) {
            free_dim = j;
            continue;
        }
        bool even_j = s0->dims[j] % a == 0, even_f = s0->dims[free_dim] % a == 0;
        if (even_j > even_f || (even_j == even_f && s0->dims[j] > s0->dims[free_dim]))
            free_dim = j;
    }
    const gs_sharding *s = free_dim >= 0 ? gs_part_move_tiles(c, lead, dim, free_dim)
                                         : gs_part_replicate_dims(c, lead, 1, &dim);
    gs_instr **ops = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, n + 1);
    gs_sharding **leaves = GS_NEW_ARRAY(gs_part_arena(c), gs_sharding *, n + 1);
    if (!ops || !leaves) {
        gs_part_oom(c);
        return false;
    }
    for (int k = 0; k < n; k++) {
        if (!gs_shape_same_dims(in->operands[k]->shape, s0)) return false;
        ops[k] = resharded(c, in, k, s);
        leaves[k] = (gs_sharding *)s;
    }
    const gs_sharding *rs = s;
    if (in->shape->type == GS_TUPLE) {
        rs = gs_sharding_tuple(gs_part_arena(c), n, leaves);
        if (!rs) {
            gs_part_oom(c);
            return false;
        }
    }
    const gs_shape *ls = gs_part_local_shape(c, in->shape, rs);
    if (!ls) return false;
    gs_part_result(out, gs_part_clone(c, in, ls, n, ops), in->shape, rs);
    return out->hlo != NULL;
}

bool gs_part_handle_reduce_window(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                  gs_part_value *out) {
    if (!plain_array(in, t) || in->n_operands != 2) return false;
    const gs_attr *wa = gs_instr_attr(in, GS_ATTR_WINDOW);
    const gs_shape *is = in->operands[0]->shape;
    if (!wa || wa->u.window->n != is->rank || is->rank != in->shape->rank) return false;
    /* Windowed dims the result tiles keep their tiling: each device reads its window by halo
     * exchange, positions outside the input taking the reduction's identity (which is what
     * skipping them means); that needs a reduction with an identity. A base-dilated dim is
     * dilated locally first (its holes the identity too) and read undilated. The other
     * windowed dims are made whole. */
    gs_opcode rop;
    const gs_computation *comp = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    gs_instr *id = comp && gs_computation_binary_reducer(comp, &rop)
                       ? gs_part_identity(c, rop, is->type)
                       : NULL;
    int moved[GS_MAX_RANK], n = 0;
    bool halo[GS_MAX_RANK] = {0};
    for (int i = 0; i < is->rank; i++) {
        const gs_window_dim *w = &wa->u.window->dims[i];
        bool trivial = w->size == 1 && w->stride == 1 && w->pad_lo == 0 && w->pad_hi == 0 &&
                       w->lhs_dilate == 1 && w->rhs_dilate == 1;
        if (trivial) continue;
        int64_t k = gs_sharding_tiles_in_dim(t, i), o = in->shape->dims[i], so = (o + k - 1) / k;
        int64_t eff = w->size > 0 ? (w->size - 1) * w->rhs_dilate + 1 : 0, L, R;
        /* A dilated window reduces its holes too: d times the work over 1/k of the output,
         * so base dilation d only while d <= k. */
        halo[i] = id && k > 1 && w->lhs_dilate >= 1 && w->lhs_dilate <= k &&
                  gs_part_halo_extent(t, i, dilated_len(is->dims[i], k, w->lhs_dilate), -w->pad_lo,
                                      so * w->stride, (so - 1) * w->stride + eff,
                                      so ? (o + so - 1) / so : 0, &L, &R);
        if (!halo[i]) moved[n++] = i;
    }
    const gs_sharding *s = gs_part_replicate_dims(c, t, n, moved);
    gs_instr *ops[2] = {resharded(c, in, 0, s), NULL};
    replicated_rest(c, in, 1, ops);
    const gs_shape *ls = gs_part_local_shape(c, in->shape, s);
    if (!ops[0] || !ops[1] || !ls) return false;
    for (int i = 0; i < is->rank && ops[0]; i++) {
        if (!halo[i]) continue;
        const gs_window_dim *w = &wa->u.window->dims[i];
        int64_t k = gs_sharding_tiles_in_dim(s, i), o = in->shape->dims[i], so = (o + k - 1) / k;
        int64_t eff = (w->size - 1) * w->rhs_dilate + 1;
        if (w->lhs_dilate > 1)
            ops[0] = gs_part_dilate_shard(c, ops[0], s, is->dims, i, w->lhs_dilate, id);
        /* The local window is undilated: positions past the last window that start none
         * (fewer than a stride) change nothing. */
        ops[0] = gs_part_halo_read_slack(c, ops[0], s, i,
                                         dilated_len(is->dims[i], k, w->lhs_dilate), -w->pad_lo,
                                         so * w->stride, (so - 1) * w->stride + eff,
                                         (o + so - 1) / so, id, w->stride - 1);
    }
    gs_part_result(out, gs_part_clone(c, in, ls, 2, ops), in->shape, s);
    if (!out->hlo) return false;
    /* The halo read filled the padding (and the holes) in. */
    gs_window *w = gs_instr_attr(out->hlo, GS_ATTR_WINDOW)->u.window;
    for (int i = 0; i < is->rank; i++)
        if (halo[i]) {
            w->dims[i].pad_lo = w->dims[i].pad_hi = 0;
            w->dims[i].lhs_dilate = 1;
        }
    return true;
}

/* How a device reads a select-and-scatter windowed dim whose shards hold whole strides (so a
 * multiple of the stride; pad_lo positions of padding before the dim): the source windows
 * touching its shard are j0 + [0, nwin) (j0 = t * so / stride + jl, t its tile), and the operand
 * positions they cover, and at least the shard itself, start at t * so + a0 (a0 <= 0) and span
 * reach. False when the first window touching a shard starts after it (windows narrower than
 * their stride that a padding shifts). */
typedef struct sas_dim {
    int64_t jl, nwin, a0, reach;
} sas_dim;

static bool sas_plan(const gs_window_dim *w, int64_t so, sas_dim *p) {
    /* jl = ceil((pad - size + 1) / stride) */
    p->jl = -gs_part_floor_div(w->size - 1 - w->pad_lo, w->stride);
    int64_t jh = gs_part_floor_div(so - 1 + w->pad_lo, w->stride);
    p->nwin = jh - p->jl + 1;
    p->a0 = p->jl * w->stride - w->pad_lo;
    if (p->a0 > 0 || p->nwin < 1) return false;
    int64_t cover = (p->nwin - 1) * w->stride + w->size;
    p->reach = cover > so - p->a0 ? cover : so - p->a0;
    return true;
}

/* The value positions outside a windowed dim (its padding) hold so that a window selects
 * exactly what it selects without them, as padding is never selected; NULL where no value
 * does. The select must be `compare(a, b)` (or `compare(b, a)`) GE/GT/LE/LT of the current
 * choice a and the next position b, and the padding come first in every window (`before`: the
 * low padding of the first windowed dim) or last (the high padding). First, the padding must
 * never stay chosen, select(pad, x) false for every x: NaN for floats (no ordered compare
 * holds), and for integers the lowest or highest value under a strict compare. Last, it must
 * never replace a choice, select(x, pad) true for every x: for integers the lowest or highest
 * under a non-strict one; no float is (NaN, chosen last, is replaced by anything). Where
 * padding comes on both sides or between positions, no value is exact (XLA pads with -inf,
 * which a window of -inf data selects wrongly): edge_variants computes the edge tiles apart. */
static gs_instr *padding_fill(gs_part_ctx *c, const gs_instr *in, gs_type type, bool before) {
    const gs_computation *sel = gs_instr_comp(in, GS_ATTR_SELECT);
    const gs_instr *root = sel ? sel->root : NULL;
    if (!root || root->op != GS_OP_COMPARE || sel->n_params != 2 || root->n_operands != 2 ||
        gs_instr_str(root, GS_ATTR_TYPE))
        return NULL;
    const char *dir = gs_instr_str(root, GS_ATTR_DIRECTION);
    if (!dir) return NULL;
    bool larger = strcmp(dir, "GE") == 0 || strcmp(dir, "GT") == 0;
    bool strict = strcmp(dir, "GT") == 0 || strcmp(dir, "LT") == 0;
    if (!larger && strcmp(dir, "LE") != 0 && strcmp(dir, "LT") != 0) return NULL;
    if (root->operands[0] == sel->params[1] && root->operands[1] == sel->params[0])
        larger = !larger; /* compare(b, a) GT is compare(a, b) LT */
    else if (root->operands[0] != sel->params[0] || root->operands[1] != sel->params[1])
        return NULL;
    gs_builder *b = gs_part_builder(c);
    if (gs_type_is_float(type))
        return before ? gs_build_scalar(b, type, NAN) : NULL;
    if (!gs_type_is_int(type) || strict != before) return NULL;
    return larger ? gs_build_lowest(b, type) : gs_build_highest(b, type);
}

/* How far tile t's read [t*so + a0, + reach) reaches before the dim [0, n) (*lo) and past it
 * (*hi); whether it reaches outside at all. */
static bool reads_outside(int64_t n, int64_t so, int64_t a0, int64_t reach, int64_t t,
                          int64_t *lo, int64_t *hi) {
    int64_t g0 = t * so + a0;
    *lo = g0 < 0 ? -g0 : 0;
    *hi = g0 + reach > n ? g0 + reach - n : 0;
    return *lo > 0 || *hi > 0;
}

/* Whether a dim's padding can be computed apart on its edge tiles (edge_variants): only the
 * first and last live tiles read outside the dim, and those still read some position inside;
 * *all: every live tile is such an edge (no tile runs the op unpadded). */
static bool edges_apart(int64_t n, int64_t so, int64_t a0, int64_t reach, int64_t live,
                        bool *all) {
    *all = live <= 2;
    for (int64_t t = 0, lo, hi; t < live; t++) {
        bool out = reads_outside(n, so, a0, reach, t, &lo, &hi);
        bool edge = t == 0 || t == live - 1;
        if (out && (!edge || lo + hi >= reach)) return false;
        *all &= out;
    }
    return true;
}

/* The device's select-and-scatter of x (its other operands ops[1], ops[2]): the window's halo
 * dims unpadded (the halo read put the padding in), but dim d (-1: none), padded lo and hi. */
static gs_instr *local_select_and_scatter(gs_part_ctx *c, const gs_instr *in, const bool *halo,
                                          gs_instr *x, gs_instr *const *ops, int d, int64_t lo,
                                          int64_t hi) {
    gs_instr *vops[3] = {x, ops[1], ops[2]};
    gs_instr *y = x ? gs_part_clone(c, in, x->shape, 3, vops) : NULL;
    if (!y) return NULL;
    gs_window *w = gs_instr_attr(y, GS_ATTR_WINDOW)->u.window;
    for (int i = 0; i < w->n; i++)
        if (halo[i]) w->dims[i].pad_lo = w->dims[i].pad_hi = 0;
    if (d >= 0) {
        w->dims[d].pad_lo = lo;
        w->dims[d].pad_hi = hi;
    }
    return y;
}

/* y (the unpadded op on x = ops[0], of reach positions along dim d read from t*so + a0 on tile
 * t; NULL where no tile needs it) with the first and last live tiles' results computed apart
 * where they read outside the dim [0, n): there the positions outside are cut from x and become
 * the op's own padding, which it never selects, whatever the data (no value is exact there: see
 * padding_fill). Each tile keeps its own result by its tile index. */
static gs_instr *edge_variants(gs_part_ctx *c, const gs_instr *in, const gs_sharding *s,
                               const bool *halo, int d, int64_t n, int64_t so, int64_t a0,
                               int64_t live, gs_instr *const *ops, gs_instr *y) {
    gs_builder *b = gs_part_builder(c);
    int rank = ops[0]->shape->rank;
    int64_t reach = ops[0]->shape->dims[d];
    gs_instr *t = gs_part_tile_index(c, &s->tiles, d);
    for (int64_t e = 0, lo, hi; e < live; e += live - 1 > 0 ? live - 1 : live) {
        if (!reads_outside(n, so, a0, reach, e, &lo, &hi)) continue;
        int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK], plo[GS_MAX_RANK] = {0},
                phi[GS_MAX_RANK] = {0};
        memcpy(lim, ops[0]->shape->dims, sizeof *lim * (size_t)rank);
        st[d] = plo[d] = lo;
        lim[d] = reach - hi;
        phi[d] = hi;
        gs_instr *v = local_select_and_scatter(c, in, halo, gs_build_slice(b, ops[0], st, lim, NULL),
                                               ops, d, lo, hi);
        v = v ? gs_build_pad(b, v, ops[2], plo, phi, NULL) : NULL; /* back to y's shape */
        if (!v) return NULL;
        if (!y) { /* no tile runs the unpadded op: this edge's result is the default */
            y = v;
            continue;
        }
        gs_instr *mine = gs_build_compare(b, t, gs_part_s32(c, e), "EQ");
        y = mine ? gs_build_select(b, gs_part_bcast_scalar(c, mine, y->shape), v, y) : NULL;
        if (!y) return NULL;
    }
    return y;
}

/* select-and-scatter (max-pool backward). Dims without a window keep their tiles. A windowed
 * dim keeps them when it has no dilation, padding where a value makes it exact (see
 * padding_fill: the padding holds it, as XLA's partitioner masks it) or, on one dim, where its
 * edge tiles can run the op with the padding as its own (edge_variants), and its shards hold
 * whole strides: each device reads, by halo exchange, the source windows that touch its shard
 * (sas_plan) and the operand they cover (operand positions outside the dim holding the
 * padding's value; source windows outside it the scatter's identity, so that they add
 * nothing), selects and scatters them all, and keeps its own shard of the result; when windows
 * do not overlap and shards start at windows, there is no halo. Other windowed dims are made
 * whole. */
bool gs_part_handle_select_and_scatter(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                       gs_part_value *out) {
    if (!plain_array(in, t) || in->n_operands != 3) return false;
    const gs_attr *wa = gs_instr_attr(in, GS_ATTR_WINDOW);
    const gs_shape *is = in->operands[0]->shape, *ss = in->operands[1]->shape;
    int r = is->rank;
    if (!wa || wa->u.window->n != r || ss->rank != r) return false;
    gs_opcode sop;
    const gs_computation *sca = gs_instr_comp(in, GS_ATTR_SCATTER);
    gs_instr *id =
        sca && gs_computation_binary_reducer(sca, &sop) ? gs_part_identity(c, sop, is->type) : NULL;
    /* Padding comes first or last in every window only along the first dim whose windows hold
     * more than one position, and only that dim's padding can be read as a value. */
    int first = -1;
    for (int i = 0; i < r && first < 0; i++)
        if (wa->u.window->dims[i].size > 1) first = i;
    int moved[GS_MAX_RANK], n = 0, apart = -1; /* apart: the dim edge_variants computes */
    bool halo[GS_MAX_RANK] = {0}, all_apart = false;
    gs_instr *fill[GS_MAX_RANK] = {0};
    sas_dim plan[GS_MAX_RANK];
    for (int i = 0; i < r; i++) {
        const gs_window_dim *w = &wa->u.window->dims[i];
        bool trivial = w->size == 1 && w->stride == 1 && w->pad_lo == 0 && w->pad_hi == 0 &&
                       w->lhs_dilate == 1 && w->rhs_dilate == 1;
        int64_t k = gs_sharding_tiles_in_dim(t, i);
        if (trivial || k == 1) continue;
        int64_t so = (is->dims[i] + k - 1) / k, live = (is->dims[i] + so - 1) / so, L, R;
        bool padded = w->pad_lo != 0 || w->pad_hi != 0;
        fill[i] = !padded ? id
                  : i == first && (w->pad_lo == 0 || w->pad_hi == 0)
                      ? padding_fill(c, in, is->type, w->pad_lo > 0)
                      : NULL;
        bool edges = padded && !fill[i] && apart < 0; /* no exact value: edge tiles apart */
        if (edges) fill[i] = id;
        sas_dim *p = &plan[i];
        halo[i] = id && fill[i] && w->lhs_dilate == 1 && w->rhs_dilate == 1 && w->size >= 1 &&
                  w->stride >= 1 && w->pad_lo >= 0 && w->pad_hi >= 0 && so % w->stride == 0 &&
                  sas_plan(w, so, p);
        if (halo[i])
            halo[i] = gs_part_halo_extent(t, i, is->dims[i], p->a0, so, p->reach, live, &L, &R) &&
                      gs_part_halo_extent(t, i, ss->dims[i], p->jl, so / w->stride, p->nwin,
                                          live, &L, &R);
        if (halo[i] && edges) {
            bool all;
            halo[i] = edges_apart(is->dims[i], so, p->a0, p->reach, live, &all);
            if (halo[i]) apart = i, all_apart = all;
        }
        if (!halo[i]) moved[n++] = i;
    }
    const gs_sharding *s = gs_part_replicate_dims(c, t, n, moved);
    gs_instr *ops[3] = {resharded(c, in, 0, s), resharded(c, in, 1, s), NULL};
    replicated_rest(c, in, 2, ops);
    const gs_shape *ls = gs_part_local_shape(c, in->shape, s);
    if (!ops[0] || !ops[1] || !ops[2] || !ls) return false;
    int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
    for (int i = 0; i < r; i++) lim[i] = ls->dims[i];
    bool cut = false;
    for (int i = 0; i < r && ops[0] && ops[1]; i++) {
        if (!halo[i]) continue;
        const gs_window_dim *w = &wa->u.window->dims[i];
        int64_t so = ls->dims[i], live = (is->dims[i] + so - 1) / so;
        const sas_dim *p = &plan[i];
        /* Positions outside the dim (padding) are never selected; without padding, only
         * windows past the end read them, which have no source and add the identity wherever
         * they select. */
        ops[0] = gs_part_halo_read(c, ops[0], s, i, is->dims[i], p->a0, so, p->reach, live,
                                   fill[i]);
        ops[1] = gs_part_halo_read(c, ops[1], s, i, ss->dims[i], p->jl, so / w->stride,
                                   p->nwin, live, id);
        st[i] = -p->a0;
        lim[i] = st[i] + so;
        cut |= ops[0] && ops[0]->shape->dims[i] != so;
    }
    if (!ops[0] || !ops[1]) return false;
    gs_instr *y = all_apart ? NULL : local_select_and_scatter(c, in, halo, ops[0], ops, -1, 0, 0);
    if (apart >= 0 && (y || all_apart)) {
        int64_t na = is->dims[apart], sa = ls->dims[apart];
        y = edge_variants(c, in, s, halo, apart, na, sa, plan[apart].a0, (na + sa - 1) / sa, ops,
                          y);
    }
    if (y && cut) y = gs_build_slice(gs_part_builder(c), y, st, lim, NULL);
    gs_part_result(out, y, in->shape, s);
    return out->hlo != NULL;
}
