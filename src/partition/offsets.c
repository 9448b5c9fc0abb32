/*
 * offsets.c — where a device's shard starts, computed in the partitioned program from its
 * partition id, plus padding and masking of uneven shards.
 *
 * For an iota tile assignment (devices = iota(n) reshaped to R, transposed by P, reshaped to the
 * tile dims D) the tile index of device d along tile dim i is arithmetic: when R (transposed) and
 * D have a common refinement into factors f, each factor of dim i contributes
 * ((d / A) % f) * w, with A the factor's stride among device ids and w its weight within dim i;
 * otherwise the row-major position pos of d is rebuilt and the index is (pos / DS_i) % D_i. Either
 * way O(rank) instructions, whatever the device count. Only an explicit device list gets a
 * constant table indexed by partition id (XLA's MakePartitionOffsets does the same).
 *
 * Scalar arithmetic folds constants (x*1, x+0, x/1, a % n when the range already fits), so the
 * common cases stay a divide and a remainder. Values are cached per output and tile assignment.
 */
#include "internal.h"
#include "base/internal.h"
#include "gspmd/numeric.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ scalars */

/* The value of x when it is an s32 scalar constant. */
static bool const_value(const gs_instr *x, int64_t *v) {
    if (!x || x->op != GS_OP_CONSTANT || x->shape->rank != 0 || x->shape->type != GS_S32 ||
        !x->literal || x->literal->elided)
        return false;
    *v = gs_elem_get_i(x->literal->data, GS_S32, 0);
    return true;
}

gs_instr *gs_part_s32(gs_part_ctx *c, int64_t v) {
    gs_part_emit *e = c->e;
    bool small = v >= 0 && v < (int64_t)(sizeof e->s32 / sizeof e->s32[0]);
    if (small && e->s32[v]) return e->s32[v];
    gs_instr *x = gs_build_scalar_i(gs_part_builder(c), GS_S32, v);
    if (small) e->s32[v] = x;
    return x;
}

gs_instr *gs_part_mul(gs_part_ctx *c, gs_instr *a, int64_t k) {
    int64_t v;
    if (k == 1) return a;
    if (k == 0) return gs_part_s32(c, 0);
    if (const_value(a, &v)) return gs_part_s32(c, v * k);
    return gs_build_binary(gs_part_builder(c), GS_OP_MULTIPLY, a, gs_part_s32(c, k));
}

gs_instr *gs_part_add(gs_part_ctx *c, gs_instr *a, gs_instr *b) {
    int64_t va, vb;
    bool ka = const_value(a, &va), kb = const_value(b, &vb);
    if (ka && kb) return gs_part_s32(c, va + vb);
    if (ka && va == 0) return b;
    if (kb && vb == 0) return a;
    return gs_build_binary(gs_part_builder(c), GS_OP_ADD, a, b);
}

gs_instr *gs_part_div(gs_part_ctx *c, gs_instr *a, int64_t k) {
    int64_t v;
    if (k == 1) return a;
    if (const_value(a, &v)) return gs_part_s32(c, v / k);
    return gs_build_binary(gs_part_builder(c), GS_OP_DIVIDE, a, gs_part_s32(c, k));
}

gs_instr *gs_part_rem(gs_part_ctx *c, gs_instr *a, int64_t k) {
    int64_t v;
    if (k == 1) return gs_part_s32(c, 0);
    if (const_value(a, &v)) return gs_part_s32(c, v % k);
    return gs_build_binary(gs_part_builder(c), GS_OP_REMAINDER, a, gs_part_s32(c, k));
}

gs_instr *gs_part_pid(gs_part_ctx *c) {
    gs_part_emit *e = c->e;
    if (!e->pid)
        e->pid =
            gs_build_convert(gs_part_builder(c), gs_build_partition_id(gs_part_builder(c)), GS_S32);
    return e->pid;
}

/* ------------------------------------------------------------------ tile index */

/* Emits the tile index along dim `dim` of an iota assignment. */
static gs_instr *iota_index(gs_part_ctx *c, const gs_tile_assignment *t, int dim) {
    int nr = t->n_reshape;
    int64_t td[GS_MAX_IOTA_RANK] = {0}, tstride[GS_MAX_IOTA_RANK];
    for (int k = 0; k < nr; k++) td[k] = t->reshape[t->perm ? t->perm[k] : k];
    for (int k = nr - 1; k >= 0; k--) tstride[k] = k == nr - 1 ? 1 : tstride[k + 1] * td[k + 1];
    int64_t f[GS_MAX_FACTORS];
    int ix[GS_MAX_FACTORS], iy[GS_MAX_FACTORS];
    int nf = gs_tile_refine(td, nr, t->dims, t->rank, f, ix, iy);
    gs_instr *pid = gs_part_pid(c);
    if (nf >= 0) {
        gs_instr *sum = gs_part_s32(c, 0);
        for (int j = 0; j < nf; j++) {
            if (iy[j] != dim) continue;
            int64_t inner = 1, w = 1;
            for (int q = j + 1; q < nf; q++) {
                if (ix[q] == ix[j]) inner *= f[q];
                if (iy[q] == dim) w *= f[q];
            }
            int k = ix[j];
            int64_t A = t->strides[t->perm ? t->perm[k] : k] * inner;
            gs_instr *coord = gs_part_div(c, pid, A);
            if (A * f[j] < t->n) coord = gs_part_rem(c, coord, f[j]);
            sum = gs_part_add(c, sum, gs_part_mul(c, coord, w));
        }
        return sum;
    }
    /* No refinement: rebuild the row-major position, then take the dim's digit. */
    gs_instr *pos = gs_part_s32(c, 0);
    for (int k = 0; k < nr; k++) {
        int64_t A = t->strides[t->perm ? t->perm[k] : k];
        gs_instr *coord = gs_part_div(c, pid, A);
        if (A * td[k] < t->n) coord = gs_part_rem(c, coord, td[k]);
        pos = gs_part_add(c, pos, gs_part_mul(c, coord, tstride[k]));
    }
    int64_t ds = 1;
    for (int i = dim + 1; i < t->rank; i++) ds *= t->dims[i];
    gs_instr *idx = gs_part_div(c, pos, ds);
    if (ds * t->dims[dim] < t->n) idx = gs_part_rem(c, idx, t->dims[dim]);
    return idx;
}

/* Emits the tile index along `dim` of an explicit assignment: a table indexed by device. */
static gs_instr *table_index(gs_part_ctx *c, const gs_tile_assignment *t, int dim) {
    if (c->e->dry) return gs_part_s32(c, 0); /* costing needs no table */
    int64_t n = t->n, ds = 1;
    for (int i = dim + 1; i < t->rank; i++) ds *= t->dims[i];
    int64_t *v = GS_NEW_ARRAY(gs_part_arena(c), int64_t, n);
    if (!v) {
        gs_part_oom(c);
        return NULL;
    }
    for (int64_t d = 0; d < n; d++) {
        int64_t pos = gs_tile_position(t, d);
        v[d] = pos < 0 ? 0 : (pos / ds) % t->dims[dim];
    }
    gs_builder *b = gs_part_builder(c);
    gs_instr *table = gs_build_s32_table(b, n, v);
    gs_instr *pid = gs_part_pid(c);
    int64_t one = 1;
    gs_instr *sl = gs_build_dynamic_slice(b, table, &pid, &one);
    return gs_build_reshape(b, sl, 0, NULL);
}

gs_instr *gs_part_tile_index(gs_part_ctx *c, const gs_tile_assignment *t, int dim) {
    if (t->dims[dim] == 1) return gs_part_s32(c, 0);
    gs_part_emit *e = c->e;
    for (gs_part_offset_entry *o = e->offsets; o; o = o->next)
        if (o->dim == dim && gs_tile_equal(&o->tiles, t)) return o->value;
    gs_instr *v = t->iota ? iota_index(c, t, dim) : table_index(c, t, dim);
    gs_part_offset_entry *o = GS_NEW(gs_part_arena(c), gs_part_offset_entry);
    if (!o || !v) {
        gs_part_oom(c);
        return v;
    }
    o->tiles = *t;
    o->dim = dim;
    o->value = v;
    o->next = e->offsets;
    e->offsets = o;
    return v;
}

gs_instr *gs_part_shard_offset(gs_part_ctx *c, const gs_sharding *s, int dim, int64_t shard) {
    if (s->kind != GS_SHARDING_TILED || s->tiles.dims[dim] == 1) return gs_part_s32(c, 0);
    return gs_part_mul(c, gs_part_tile_index(c, &s->tiles, dim), shard);
}

/* ------------------------------------------------------------------ padding and masking */

gs_instr *gs_part_pad_to(gs_part_ctx *c, gs_instr *x, const int64_t *dims, gs_instr *v) {
    if (!x) return NULL;
    int r = x->shape->rank;
    int64_t lo[GS_MAX_RANK] = {0}, hi[GS_MAX_RANK];
    bool any = false;
    for (int i = 0; i < r; i++) {
        hi[i] = dims[i] - x->shape->dims[i];
        GS_ASSERT(hi[i] >= 0);
        any = any || hi[i] > 0;
    }
    if (!any) return x;
    if (!v) v = gs_build_scalar_i(gs_part_builder(c), x->shape->type, 0);
    return gs_build_pad(gs_part_builder(c), x, v, lo, hi, NULL);
}

bool gs_part_uneven(const gs_sharding *s, int i, int64_t n) {
    if (s->kind != GS_SHARDING_TILED || i >= s->data_rank) return false;
    int64_t k = s->tiles.dims[i];
    return k > 1 && n % k != 0;
}

gs_instr *gs_part_bcast_scalar(gs_part_ctx *c, gs_instr *x, const gs_shape *like) {
    if (!x || like->rank == 0) return x;
    return gs_build_broadcast(gs_part_builder(c), x, like->rank, like->dims, 0, NULL);
}

gs_instr *gs_part_dim_in_range(gs_part_ctx *c, const gs_shape *like, int d, gs_instr *offset,
                               bool has_lo, int64_t lo, int64_t hi) {
    if (!offset) return NULL;
    gs_builder *b = gs_part_builder(c);
    int64_t len = like->dims[d], map[1] = {d};
    gs_instr *iota = gs_build_iota(b, GS_S32, 1, &len, 0);
    gs_instr *pos = gs_build_binary(b, GS_OP_ADD, iota, gs_part_bcast_scalar(c, offset, iota->shape));
    gs_instr *in = gs_build_compare(b, pos, gs_part_bcast_scalar(c, gs_part_s32(c, hi), iota->shape),
                                    "LT");
    if (has_lo)
        in = gs_build_binary(
            b, GS_OP_AND,
            gs_build_compare(b, pos, gs_part_bcast_scalar(c, gs_part_s32(c, lo), iota->shape), "GE"),
            in);
    return in ? gs_build_broadcast(b, in, like->rank, like->dims, 1, map) : NULL;
}

gs_instr *gs_part_mask(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, const int64_t *base,
                       int n, const int *dims, gs_instr *fill) {
    if (!x) return NULL;
    gs_builder *b = gs_part_builder(c);
    gs_instr *pred = NULL;
    const gs_shape *ls = x->shape;
    for (int k = 0; k < n; k++) {
        int i = dims[k];
        if (!gs_part_uneven(s, i, base[i])) continue;
        gs_instr *off = gs_part_shard_offset(c, s, i, ls->dims[i]);
        gs_instr *in = gs_part_dim_in_range(c, ls, i, off, false, 0, base[i]);
        pred = pred ? gs_build_binary(b, GS_OP_AND, pred, in) : in;
    }
    if (!pred) return x;
    if (!fill) fill = gs_build_scalar_i(b, x->shape->type, 0);
    return gs_build_select(b, pred, x, gs_part_bcast_scalar(c, fill, x->shape));
}

/* ------------------------------------------------------------------ reductions */

gs_instr *gs_part_identity(gs_part_ctx *c, gs_opcode op, gs_type t) {
    gs_builder *b = gs_part_builder(c);
    switch (op) {
    case GS_OP_ADD:
    case GS_OP_OR:
    case GS_OP_XOR: return gs_build_scalar_i(b, t, 0);
    case GS_OP_MULTIPLY: return gs_build_scalar_i(b, t, 1);
    case GS_OP_MAXIMUM: return gs_build_lowest(b, t);
    case GS_OP_MINIMUM: return gs_build_highest(b, t);
    case GS_OP_AND: return gs_type_is_float(t) ? NULL : gs_build_scalar_i(b, t, -1);
    default: return NULL;
    }
}

bool gs_part_is_identity(const gs_instr *x, gs_opcode op) {
    if (!x || x->op != GS_OP_CONSTANT || x->shape->rank != 0 || !x->literal || x->literal->elided)
        return false;
    gs_type t = x->shape->type;
    const void *p = x->literal->data;
    if (gs_type_is_complex(t)) {
        double re, im;
        gs_elem_get_c(p, t, 0, &re, &im);
        return im == 0 && ((op == GS_OP_ADD && re == 0) || (op == GS_OP_MULTIPLY && re == 1));
    }
    if (gs_type_is_float(t)) {
        double v = gs_elem_get_f(p, t, 0);
        switch (op) {
        case GS_OP_ADD: return v == 0;
        case GS_OP_MULTIPLY: return v == 1;
        case GS_OP_MAXIMUM: return isinf(v) && v < 0;
        case GS_OP_MINIMUM: return isinf(v) && v > 0;
        default: return false;
        }
    }
    int64_t v = gs_elem_get_i(p, t, 0);
    int bits = gs_type_bits(t);
    bool sgn = gs_type_is_signed_int(t);
    int64_t lo = 0, hi = 1;
    if (t == GS_PRED) {
        lo = 0;
        hi = 1;
    } else if (sgn) {
        hi = bits >= 64 ? INT64_MAX : (int64_t)((1ull << (bits - 1)) - 1);
        lo = -hi - 1;
    } else {
        lo = 0;
        hi = gs_int_wrap(t, -1);
    }
    switch (op) {
    case GS_OP_ADD:
    case GS_OP_OR:
    case GS_OP_XOR: return v == 0;
    case GS_OP_MULTIPLY: return v == 1;
    case GS_OP_MAXIMUM: return v == lo;
    case GS_OP_MINIMUM: return v == hi;
    case GS_OP_AND: return t == GS_PRED ? v == 1 : gs_int_wrap(t, v) == gs_int_wrap(t, -1);
    default: return false;
    }
}
