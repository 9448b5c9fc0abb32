/*
 * h_scan.c — the scan pattern JAX emits for layers in a loop: a stack of per-layer weights read
 * with dynamic-slice at the loop counter, per-layer outputs written into a stacked buffer with
 * dynamic-update-slice. When the stacked dim is tiled (layers spread over devices), the general
 * rule (make the indexed dim whole) would all-gather the whole stack every iteration. Instead,
 * along a tiled dim indexed one element at a time, exactly one device holds the element:
 *
 *   dynamic-slice         each device slices its own shard at the index made local (clamped as
 *                         XLA clamps the global index), zeroes it when another device holds the
 *                         element, and the result is a partial value over that dim's device
 *                         groups: the driver's reshard combines it with one all-reduce of the
 *                         slice, not a gather of the stack;
 *   dynamic-update-slice  each device updates its own shard where it holds the element and keeps
 *                         it elsewhere: no communication at all.
 */
#include "internal.h"

#include <string.h>

/* Along the dims of `in` where a dynamic index selects one element of a dim the operand's value
 * (sharding s, global dims base) tiles, fills tiled[] (returns their count); -1 when some other
 * indexed dim is tiled (then the general rule applies). window[] holds the slice / update sizes. */
static int owner_dims(const gs_sharding *s, const gs_shape *base, const int64_t *window,
                      int *tiled) {
    int n = 0;
    for (int i = 0; i < base->rank; i++) {
        if (window[i] == base->dims[i] || gs_sharding_tiles_in_dim(s, i) == 1) continue;
        if (window[i] != 1) return -1;
        tiled[n++] = i;
    }
    return n;
}

/* The s32 index operand k of `in` (a scalar, replicated). */
static gs_instr *index_s32(gs_part_ctx *c, const gs_instr *in, int k) {
    const gs_part_value *v = gs_part_operand(c, in, k);
    gs_part_value r;
    gs_part_reshard(c, v, gs_part_replicated(c, v->base), &r);
    if (!r.hlo) return NULL;
    return r.hlo->shape->type == GS_S32 ? r.hlo
                                        : gs_build_convert(gs_part_builder(c), r.hlo, GS_S32);
}

/* For each dim i: the local start index (into the device's shard along owner dims, the global
 * one along whole dims, 0 along tiled dims the window covers) and, in *mine, whether this device
 * holds the window (a pred scalar; NULL when every device does). first = operand number of the
 * first index. */
static bool local_indices(gs_part_ctx *c, const gs_instr *in, int first, const gs_sharding *s,
                          const gs_shape *base, const gs_shape *local, const int64_t *window,
                          gs_instr **idx, gs_instr **mine) {
    gs_builder *b = gs_part_builder(c);
    *mine = NULL;
    for (int i = 0; i < base->rank; i++) {
        int64_t k = gs_sharding_tiles_in_dim(s, i);
        if (window[i] == base->dims[i]) {
            idx[i] = gs_part_s32(c, 0);
            continue;
        }
        gs_instr *g = index_s32(c, in, first + i);
        if (!g) return false;
        if (k == 1) {
            idx[i] = g;
            continue;
        }
        /* XLA clamps the start to [0, dim - 1] (the window is one element); then local. */
        gs_instr *lo = gs_part_s32(c, 0), *hi = gs_part_s32(c, base->dims[i] - 1);
        gs_instr *cl = gs_build(b, GS_OP_CLAMP, g->shape, 3, (gs_instr *[]){lo, g, hi});
        gs_instr *li =
            gs_build_binary(b, GS_OP_SUBTRACT, cl, gs_part_shard_offset(c, s, i, local->dims[i]));
        gs_instr *ge = gs_build_compare(b, li, gs_part_s32(c, 0), "GE");
        gs_instr *lt = gs_build_compare(b, li, gs_part_s32(c, local->dims[i]), "LT");
        gs_instr *in_i = gs_build_binary(b, GS_OP_AND, ge, lt);
        *mine = *mine ? gs_build_binary(b, GS_OP_AND, *mine, in_i) : in_i;
        idx[i] = li;
    }
    return !c->failed;
}

bool gs_part_owner_slice(gs_part_ctx *c, const gs_instr *in, gs_part_value *out) {
    const gs_part_value *v = gs_part_operand(c, in, 0);
    const gs_sharding *s = v->sharding;
    const gs_shape *base = in->operands[0]->shape;
    if (!gs_part_plain(s) || s->kind != GS_SHARDING_TILED || gs_part_unreduced_dim(s) != -1 ||
        gs_part_partial_manual(s) || in->n_operands != base->rank + 1)
        return false;
    int tiled[GS_MAX_RANK];
    int n = owner_dims(s, base, in->shape->dims, tiled);
    if (n <= 0) return false;
    const gs_shape *local = v->hlo->shape;
    gs_instr *idx[GS_MAX_RANK], *mine;
    if (!local_indices(c, in, 1, s, base, local, in->shape->dims, idx, &mine)) return false;
    int64_t sizes[GS_MAX_RANK];
    for (int i = 0; i < base->rank; i++)
        sizes[i] = in->shape->dims[i] == base->dims[i] ? local->dims[i] : in->shape->dims[i];
    gs_builder *b = gs_part_builder(c);
    gs_instr *x = gs_build_dynamic_slice(b, v->hlo, idx, sizes);
    gs_instr *zero = gs_build_scalar_i(b, x ? x->shape->type : GS_F32, 0);
    gs_instr *m =
        gs_build(b, GS_OP_BROADCAST,
                 gs_shape_array(&b->m->arena, GS_PRED, x->shape->rank, x->shape->dims), 1, &mine);
    gs_build_set_ints(b, m, GS_ATTR_DIMENSIONS, 0, NULL);
    gs_instr *y = gs_build_select(b, m, x, gs_part_bcast_scalar(c, zero, x->shape));
    out->hlo = y;
    out->base = in->shape;
    out->sharding = gs_part_make_unreduced(c, s, n, tiled);
    out->combiner = in->shape->type == GS_PRED ? GS_OP_OR : GS_OP_ADD;
    return y != NULL && out->sharding != NULL;
}

bool gs_part_owner_update(gs_part_ctx *c, const gs_instr *in, gs_part_value *out) {
    const gs_part_value *v = gs_part_operand(c, in, 0);
    const gs_sharding *s = v->sharding;
    const gs_shape *base = in->shape, *us = in->operands[1]->shape;
    if (!gs_part_plain(s) || s->kind != GS_SHARDING_TILED || gs_part_unreduced_dim(s) != -1 ||
        gs_part_partial_manual(s) || in->n_operands != base->rank + 2 || us->rank != base->rank)
        return false;
    int tiled[GS_MAX_RANK];
    int n = owner_dims(s, base, us->dims, tiled);
    if (n <= 0) return false;
    /* The update: tiled like the buffer along the dims it covers, whole along the others. */
    int moved[GS_MAX_RANK], nm = 0;
    for (int i = 0; i < base->rank; i++)
        if (us->dims[i] != base->dims[i]) moved[nm++] = i;
    const gs_sharding *usharding = gs_part_replicate_dims(c, s, nm, moved);
    gs_part_value u;
    gs_part_reshard(c, gs_part_operand(c, in, 1), usharding, &u);
    const gs_shape *local = v->hlo->shape;
    gs_instr *idx[GS_MAX_RANK], *mine;
    if (!u.hlo || !local_indices(c, in, 2, s, base, local, us->dims, idx, &mine)) return false;
    gs_builder *b = gs_part_builder(c);
    gs_instr *upd = gs_build_dynamic_update_slice(b, v->hlo, u.hlo, idx);
    gs_instr *m =
        gs_build(b, GS_OP_BROADCAST,
                 gs_shape_array(&b->m->arena, GS_PRED, local->rank, local->dims), 1, &mine);
    gs_build_set_ints(b, m, GS_ATTR_DIMENSIONS, 0, NULL);
    out->hlo = gs_build_select(b, m, upd, v->hlo);
    out->base = base;
    out->sharding = s;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}
