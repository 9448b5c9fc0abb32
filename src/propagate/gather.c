/*
 * gather.c — gather and scatter (XLA's hlo_sharding_util gather/scatter helpers and the gather
 * and scatter parts of ShardingPropagation).
 *
 * Three kinds of dims connect a gather's operand, indices and output (and a scatter's operands,
 * indices and updates):
 *   - index pass-through: the indices' batch dims appear as the output's non-offset dims;
 *   - operand pass-through: an operand dim sliced whole appears as an output offset dim;
 *   - index-parallel (batch) dims: explicit operand_batching_dims / start_indices_batching_dims,
 *     or implicit ones, where the indices along a dim are an iota (possibly through a
 *     concatenate, broadcast, copies, or a loop-invariant tuple element), so the operand dim
 *     they index can be split alike.
 * Each direction carries the tiles of the connected dims and replicates the rest
 * (gs_prop_along_dims). Shardings from pass-through and parallel dims are merged when both
 * apply, the parallel one preferred, as XLA's partitioner does.
 */
#include "internal.h"
#include "ir/analysis.h"

#include <string.h>

/* Dims of one gather/scatter, with the connected-dim lists computed from them. */
typedef struct gdims {
    gs_ints offset;      /* gather offset_dims / scatter update_window_dims */
    gs_ints collapsed;   /* collapsed_slice_dims / inserted_window_dims */
    gs_ints index_map;   /* start_index_map / scatter_dims_to_operand_dims */
    gs_ints op_batch;    /* operand_batching_dims / input_batching_dims */
    gs_ints idx_batch;   /* start_indices_batching_dims / scatter_indices_batching_dims */
    int64_t ivd;         /* index_vector_dim */
    int64_t slice[GS_MAX_RANK]; /* slice sizes over the operand */
    const gs_instr *operand; /* operand (first scatter input) */
    const gs_instr *indices; /* indices */
    int out_rank;        /* rank of the output / updates */
} gdims;

/* Connected dims of two tensors. */
typedef struct conn {
    int n;                          /* entries */
    int64_t operand[GS_MAX_RANK];   /* operand dims */
    int64_t indices[GS_MAX_RANK];   /* indices dims */
    int64_t output[GS_MAX_RANK];    /* output / update dims */
} conn;

static void gather_dims(const gs_instr *g, gdims *d) {
    memset(d, 0, sizeof *d);
    d->offset = gs_instr_ints(g, GS_ATTR_OFFSET_DIMS);
    d->collapsed = gs_instr_ints(g, GS_ATTR_COLLAPSED_SLICE_DIMS);
    d->index_map = gs_instr_ints(g, GS_ATTR_START_INDEX_MAP);
    d->op_batch = gs_instr_ints(g, GS_ATTR_OPERAND_BATCHING_DIMS);
    d->idx_batch = gs_instr_ints(g, GS_ATTR_START_INDICES_BATCHING_DIMS);
    d->ivd = gs_instr_int(g, GS_ATTR_INDEX_VECTOR_DIM, g->operands[1]->shape->rank);
    gs_ints ss = gs_instr_ints(g, GS_ATTR_SLICE_SIZES);
    for (int i = 0; i < ss.n && i < GS_MAX_RANK; i++) d->slice[i] = ss.v[i];
    d->operand = gs_prop_operand(g, 0);
    d->indices = gs_prop_operand(g, 1);
    d->out_rank = g->shape->rank;
}

/* Inputs of a scatter: operands are n inputs, the indices, n updates. */
static int scatter_n(const gs_instr *s) { return (s->n_operands - 1) / 2; }

static void scatter_dims(const gs_instr *s, gdims *d) {
    memset(d, 0, sizeof *d);
    int n = scatter_n(s);
    d->offset = gs_instr_ints(s, GS_ATTR_UPDATE_WINDOW_DIMS);
    d->collapsed = gs_instr_ints(s, GS_ATTR_INSERTED_WINDOW_DIMS);
    d->index_map = gs_instr_ints(s, GS_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS);
    d->op_batch = gs_instr_ints(s, GS_ATTR_INPUT_BATCHING_DIMS);
    d->idx_batch = gs_instr_ints(s, GS_ATTR_SCATTER_INDICES_BATCHING_DIMS);
    d->ivd = gs_instr_int(s, GS_ATTR_INDEX_VECTOR_DIM, s->operands[n]->shape->rank);
    d->operand = gs_prop_operand(s, 0);
    d->indices = gs_prop_operand(s, n);
    const gs_shape *os = s->operands[0]->shape, *us = s->operands[n + 1]->shape;
    int k = 0;
    for (int i = 0; i < os->rank && i < GS_MAX_RANK; i++) {
        if (gs_ints_contains(d->collapsed, i) || gs_ints_contains(d->op_batch, i)) {
            d->slice[i] = 1;
            continue;
        }
        d->slice[i] = k < d->offset.n ? us->dims[d->offset.v[k]] : 1;
        k++;
    }
    d->out_rank = us->rank;
}

/* The output dims the given indices dims appear as (XLA's
 * GetGatherOutputOrScatterUpdateParallelDims / FillOutputDimsWithIndicesDims). */
static void fill_output_dims(const gdims *d, conn *c) {
    for (int k = 0; k < c->n; k++) {
        c->output[k] = -1;
        for (int i = 0, idx = 0; i < d->out_rank; i++) {
            if (gs_ints_contains(d->offset, i)) continue;
            int64_t index_dim = idx < d->ivd ? idx : idx + 1;
            if (index_dim == c->indices[k]) {
                c->output[k] = i;
                break;
            }
            idx++;
        }
    }
}

/* XLA GetGatherConnectedDimsAcrossIndicesAndOutput (no dims excluded). */
static void index_passthrough(const gdims *d, conn *c) {
    c->n = 0;
    int idx_rank = d->indices->shape->rank;
    for (int o = 0, i = 0; o < d->out_rank; o++) {
        if (gs_ints_contains(d->offset, o)) continue;
        if (i == d->ivd) i++;
        if (i >= idx_rank) break;
        c->indices[c->n] = i;
        c->output[c->n++] = o;
        i++;
    }
}

/* XLA GetGatherScatterOperandPassthroughDims. */
static void operand_passthrough(const gdims *d, conn *c) {
    c->n = 0;
    int cb = 0;
    const gs_shape *os = d->operand->shape;
    for (int i = 0; i < os->rank; i++) {
        if (gs_ints_contains(d->collapsed, i) || gs_ints_contains(d->op_batch, i)) {
            cb++;
            continue;
        }
        if (d->slice[i] != os->dims[i]) continue;
        if (i - cb >= d->offset.n) continue;
        c->operand[c->n] = i;
        c->output[c->n++] = d->offset.v[i - cb];
    }
}

static const gs_instr *walk_operand(const gs_instr *in, int i, void *ud) {
    (void)ud;
    return gs_prop_operand(in, i);
}

static const gs_instr *walk_caller(const gs_instr *in, void *ud) {
    (void)ud;
    return in->aux ? GS_PROP_NODE(in)->caller : NULL;
}

/* XLA GetGatherScatterBatchParallelDims: implicit index-parallel dims; false when none. */
static bool implicit_parallel(gs_prop_ctx *c, const gdims *d, conn *out) {
    (void)c;
    gs_ir_walk w = {walk_operand, walk_caller, NULL};
    out->n = gs_gather_iota_parallel(&w, d->indices, d->ivd, d->index_map, d->idx_batch,
                                     d->operand->shape, d->slice, out->operand, out->indices);
    if (out->n == 0) return false;
    fill_output_dims(d, out);
    return true;
}

/* Explicit batching dims as connected dims. */
static void explicit_parallel(const gdims *d, conn *out) {
    out->n = 0;
    for (int i = 0; i < d->op_batch.n && i < d->idx_batch.n; i++) {
        out->operand[out->n] = d->op_batch.v[i];
        out->indices[out->n++] = d->idx_batch.v[i];
    }
    fill_output_dims(d, out);
}

/* Explicit and implicit parallel dims together. */
static void all_parallel(gs_prop_ctx *c, const gdims *d, conn *out) {
    explicit_parallel(d, out);
    conn imp;
    if (implicit_parallel(c, d, &imp))
        for (int k = 0; k < imp.n && out->n < GS_MAX_RANK; k++) {
            out->operand[out->n] = imp.operand[k];
            out->indices[out->n] = imp.indices[k];
            out->output[out->n++] = imp.output[k];
        }
}

/* XLA's rule of merging a parallel and a pass-through sharding. */
static const gs_sharding *merge_pair(gs_prop_ctx *c, const gs_sharding *parallel,
                                     const gs_sharding *pass) {
    if (!pass) return parallel;
    if (!parallel) return pass;
    const gs_sharding *p2 = pass;
    if (gs_prop_merge(c, parallel, &p2, true)) return p2;
    const gs_sharding *p3 = parallel;
    if (gs_prop_merge(c, pass, &p3, true)) return p3;
    return parallel;
}

/* A pass-through result that is tile-maximal counts as none. */
static const gs_sharding *unless_maximal(const gs_sharding *s) {
    return s && gs_prop_tile_maximal(s) ? NULL : s;
}

/* ------------------------------------------------------------------ gather */

bool gs_prop_gather_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    gdims d;
    gather_dims(in, &d);
    bool changed = false;
    gs_instr *op = gs_prop_operand(in, 0), *idx = gs_prop_operand(in, 1);
    int rank = in->shape->rank;
    conn par;
    if (d.op_batch.n > 0) {
        explicit_parallel(&d, &par);
        if (gs_prop_spatial(GS_PROP_SHARDING(op)))
            changed |= gs_prop_improve(
                c, in,
                gs_prop_along_dims(c, GS_PROP_SHARDING(op), par.n, par.operand, par.output, rank),
                may, false, GS_PROP_DIR_FORWARD, op, "gather batch dims");
        if (gs_prop_spatial(GS_PROP_SHARDING(idx)))
            changed |= gs_prop_improve(
                c, in,
                gs_prop_along_dims(c, GS_PROP_SHARDING(idx), par.n, par.indices, par.output, rank),
                may, false, GS_PROP_DIR_FORWARD, idx, "gather batch dims");
    }
    if (gs_prop_spatial(GS_PROP_SHARDING(idx))) {
        conn ip;
        index_passthrough(&d, &ip);
        const gs_sharding *s = GS_PROP_SHARDING(idx);
        if (s->kind == GS_SHARDING_TILED)
            s = gs_prop_along_dims(c, s, ip.n, ip.indices, ip.output, rank);
        changed |= gs_prop_improve(c, in, s, may, false, GS_PROP_DIR_FORWARD, idx,
                                   "gather index pass-through");
    }
    if (c->is_spmd) {
        bool has_par = implicit_parallel(c, &d, &par);
        if (has_par) {
            if (gs_prop_spatial(GS_PROP_SHARDING(op)))
                changed |=
                    gs_prop_improve(c, in,
                                    gs_prop_along_dims(c, GS_PROP_SHARDING(op), par.n, par.operand,
                                                       par.output, rank),
                                    may, false, GS_PROP_DIR_FORWARD, op, "gather parallel dims");
            if (gs_prop_spatial(GS_PROP_SHARDING(idx)))
                changed |=
                    gs_prop_improve(c, in,
                                    gs_prop_along_dims(c, GS_PROP_SHARDING(idx), par.n, par.indices,
                                                       par.output, rank),
                                    may, false, GS_PROP_DIR_FORWARD, idx, "gather parallel dims");
        }
        if (gs_prop_spatial(GS_PROP_SHARDING(op))) {
            const gs_sharding *filtered =
                has_par ? gs_prop_replicate_dims(c, GS_PROP_SHARDING(op), par.n, par.operand)
                        : GS_PROP_SHARDING(op);
            if (filtered && filtered->kind == GS_SHARDING_TILED) {
                conn pt;
                operand_passthrough(&d, &pt);
                const gs_sharding *s = unless_maximal(
                    gs_prop_along_dims(c, filtered, pt.n, pt.operand, pt.output, rank));
                if (s)
                    changed |= gs_prop_improve(c, in, s, may, false, GS_PROP_DIR_FORWARD, op,
                                               "gather operand pass-through");
            }
        }
    }
    return changed;
}

const gs_sharding *gs_prop_gather_from_user(gs_prop_ctx *c, const gs_instr *in,
                                            const gs_instr *user) {
    gdims d;
    gather_dims(user, &d);
    const gs_sharding *us = GS_PROP_SHARDING(user);
    if (in == gs_prop_operand(user, 1)) {
        if (us->kind != GS_SHARDING_TILED) return us;
        conn ip;
        index_passthrough(&d, &ip);
        return gs_prop_along_dims(c, us, ip.n, ip.output, ip.indices, in->shape->rank);
    }
    if (!c->is_spmd) return NULL;
    if (us->kind != GS_SHARDING_TILED) return us;
    conn par;
    all_parallel(c, &d, &par);
    const gs_sharding *parallel =
        par.n ? gs_prop_along_dims(c, us, par.n, par.output, par.operand, in->shape->rank) : NULL;
    conn pt;
    operand_passthrough(&d, &pt);
    const gs_sharding *pass =
        unless_maximal(gs_prop_along_dims(c, us, pt.n, pt.output, pt.operand, in->shape->rank));
    return merge_pair(c, parallel, pass);
}

/* ------------------------------------------------------------------ scatter */

bool gs_prop_scatter_forward(gs_prop_ctx *c, gs_instr *in, bool may) {
    gdims d;
    scatter_dims(in, &d);
    int n = scatter_n(in);
    const gs_shape *shape = in->shape->type == GS_TUPLE ? in->shape->tuple[0] : in->shape;
    int rank = shape->rank;
    gs_instr *idx = gs_prop_operand(in, n);
    bool changed = false;
    /* The parallel inference from operands, indices and updates. */
#define PARALLEL(par, rule)                                                                        \
    do {                                                                                           \
        for (int i = 0; i < n; i++) {                                                              \
            gs_instr *o = gs_prop_operand(in, i);                                                  \
            if (gs_prop_spatial(GS_PROP_SHARDING(o)))                                              \
                changed |=                                                                         \
                    gs_prop_improve_sub(c, in,                                                     \
                                        gs_prop_along_dims(c, GS_PROP_SHARDING(o), (par).n,        \
                                                           (par).operand, (par).operand, rank),    \
                                        i, may, false, GS_PROP_DIR_FORWARD, o, rule);              \
        }                                                                                          \
        if (gs_prop_spatial(GS_PROP_SHARDING(idx))) {                                              \
            const gs_sharding *fi = gs_prop_along_dims(c, GS_PROP_SHARDING(idx), (par).n,          \
                                                       (par).indices, (par).operand, rank);        \
            for (int i = 0; i < n; i++)                                                            \
                changed |=                                                                         \
                    gs_prop_improve_sub(c, in, fi, i, may, false, GS_PROP_DIR_FORWARD, idx, rule); \
        }                                                                                          \
        for (int i = 0; i < n; i++) {                                                              \
            gs_instr *u = gs_prop_operand(in, n + 1 + i);                                          \
            if (gs_prop_spatial(GS_PROP_SHARDING(u)))                                              \
                changed |=                                                                         \
                    gs_prop_improve_sub(c, in,                                                     \
                                        gs_prop_along_dims(c, GS_PROP_SHARDING(u), (par).n,        \
                                                           (par).output, (par).operand, rank),     \
                                        i, may, false, GS_PROP_DIR_FORWARD, u, rule);              \
        }                                                                                          \
    } while (0)
    conn par;
    if (d.op_batch.n > 0) {
        explicit_parallel(&d, &par);
        PARALLEL(par, "scatter batch dims");
    }
    if (!c->is_spmd) {
        gs_sharding *r = gs_sharding_replicated(c->a);
        if (!r) {
            c->oom = true;
            return changed;
        }
        for (int i = 0; i < n; i++)
            changed |= gs_prop_improve_sub(c, in, r, i, may, false, GS_PROP_DIR_FORWARD, NULL,
                                           "scatter (non-SPMD)");
        return changed;
    }
    for (int i = 0; i < n; i++) {
        gs_instr *o = gs_prop_operand(in, i);
        if (gs_prop_spatial(GS_PROP_SHARDING(o)))
            changed |= gs_prop_improve_sub(c, in, GS_PROP_SHARDING(o), i, may, false,
                                           GS_PROP_DIR_FORWARD, o, "scatter operand");
    }
    bool any_update = false;
    for (int i = 0; i < n; i++)
        any_update =
            any_update || gs_prop_spatial(GS_PROP_SHARDING(gs_prop_operand(in, n + 1 + i)));
    if (!gs_prop_spatial(GS_PROP_SHARDING(idx)) && !any_update) return changed;
    if (implicit_parallel(c, &d, &par)) PARALLEL(par, "scatter parallel dims");
#undef PARALLEL
    conn pt;
    operand_passthrough(&d, &pt);
    for (int i = 0; i < n; i++) {
        gs_instr *u = gs_prop_operand(in, n + 1 + i);
        const gs_sharding *us = GS_PROP_SHARDING(u);
        if (!gs_prop_spatial(us) || us->kind != GS_SHARDING_TILED) continue;
        const gs_sharding *s =
            unless_maximal(gs_prop_along_dims(c, us, pt.n, pt.output, pt.operand, rank));
        if (s)
            changed |= gs_prop_improve_sub(c, in, s, i, may, false, GS_PROP_DIR_FORWARD, u,
                                           "scatter update pass-through");
    }
    return changed;
}

const gs_sharding *gs_prop_scatter_from_user(gs_prop_ctx *c, const gs_instr *in,
                                             const gs_instr *user) {
    gdims d;
    scatter_dims(user, &d);
    int n = scatter_n(user);
    const gs_sharding *us = GS_PROP_SHARDING(user);
    for (int i = 0; i < n; i++)
        if (gs_prop_operand(user, i) == in)
            return us->kind == GS_SHARDING_TUPLE ? gs_prop_sub(c, us, user->shape, i) : us;
    gs_instr *idx = gs_prop_operand(user, n);
    conn ip;
    index_passthrough(&d, &ip);
    if (in == idx) {
        const gs_sharding *v[GS_MAX_RANK];
        int k = 0;
        for (int i = 0; i < n && k < GS_MAX_RANK; i++) {
            const gs_sharding *s = GS_PROP_SHARDING(gs_prop_operand(user, n + 1 + i));
            if (!gs_prop_spatial(s)) continue;
            if (s->kind == GS_SHARDING_TILED)
                s = gs_prop_along_dims(c, s, ip.n, ip.output, ip.indices, in->shape->rank);
            if (s) v[k++] = s;
        }
        return k ? gs_prop_common(c, k, v, NULL) : NULL;
    }
    int update = -1;
    for (int i = 0; i < n; i++)
        if (gs_prop_operand(user, n + 1 + i) == in) update = i;
    if (update < 0) return NULL;
    int urank = in->shape->rank;
    const gs_sharding *from_idx = NULL;
    if (gs_prop_spatial(GS_PROP_SHARDING(idx))) {
        from_idx = GS_PROP_SHARDING(idx);
        if (from_idx->kind == GS_SHARDING_TILED)
            from_idx = gs_prop_along_dims(c, from_idx, ip.n, ip.indices, ip.output, urank);
    }
    if (!from_idx && !(from_idx = gs_sharding_replicated(c->a))) {
        c->oom = true;
        return NULL;
    }
    if (c->is_spmd) {
        const gs_sharding *os =
            us->kind == GS_SHARDING_TUPLE ? gs_prop_sub(c, us, user->shape, update) : us;
        const gs_sharding *from_out = NULL;
        if (os && os->kind != GS_SHARDING_TILED) {
            from_out = os;
        } else if (os) {
            conn par;
            all_parallel(c, &d, &par);
            const gs_sharding *parallel =
                par.n ? gs_prop_along_dims(c, os, par.n, par.operand, par.output, urank) : NULL;
            conn pt;
            operand_passthrough(&d, &pt);
            const gs_sharding *pass =
                unless_maximal(gs_prop_along_dims(c, os, pt.n, pt.operand, pt.output, urank));
            from_out = merge_pair(c, parallel, pass);
        }
        if (from_out) {
            const gs_sharding *m =
                gs_prop_merge_compatible(c, from_idx, gs_prop_num_tiles(from_out) + 1, from_out);
            if (m) from_out = m;
            if (!gs_prop_tile_maximal(from_out)) return from_out;
        }
    }
    if (!gs_prop_tile_maximal(from_idx)) return from_idx;
    return NULL;
}
