/*
 * reshard.c — one reshard for every partitioned value: from the sharding a value has to the one
 * a user needs, walking a ladder of lowerings, cheapest first. Each rung is a small function
 * that makes progress and hands the rest back to the ladder:
 *
 *   0. equal shardings                                  nothing
 *   1. partial values (unreduced subgroup) to a tiling  reduce-scatter        rung_reduce_scatter
 *      partial values otherwise                         all-reduce            rung_all_reduce
 *   2. to partial values                                keep one replica      rung_to_unreduced
 *   3. from one device (maximal)                        masked all-reduce     rung_from_maximal
 *   4. to replicated / maximal                          all-gather every dim  rung_gather
 *   5. same tile counts, other device order             collective-permute    rung_permute
 *      same shard sizes, other tile counts (more tiles  collective-permute    rung_relabel
 *      than elements)                                   (+ all-reduce)
 *   6. the target refines the source                    dynamic-slice with    rung_refine
 *      (replicated -> tiled, partial -> more tiled)     partition-id offsets  (after a permute
 *                                                                              when the devices
 *                                                                              are not aligned)
 *      the same, shard boundaries not lined up      halo exchange, then   rung_align
 *      (uneven dims; one neighbour's reach)         the dynamic-slice
 *   7. a dim's tiles move to another dim                all-to-all            rung_all_to_all
 *   8. anything else                                    all-gather the dims   rung_gather
 *                                                       that do not refine
 *                                                       (a dim the target
 *                                                       coarsens only within
 *                                                       groups of neighbours:
 *                                                       gather_minor)
 *                                                       (all-reduce of zero-
 *                                                       padded buffers for
 *                                                       dims with more tiles
 *                                                       than elements),
 *                                                       then 5/6
 * Partially manual values (a manual subgroup) take the same ladder on a virtual view where the
 * manual groups are a leading data dim both shardings tile alike, so no collective leaves its
 * manual group (reshard_partial_manual).
 * When step 8 has to gather every tiled dim although the target is tiled, the value is fully
 * rematerialized on every device: XLA's "involuntary full rematerialization", reported as a
 * warning naming the instruction and both shardings.
 *
 * Reshards of an instruction's value are cached by target, so several users needing the same
 * sharding share one set of collectives. gs_part_reshard_cost runs the same ladder in a throwaway
 * output to count the bytes a reshard would move (the dot handler compares plans with it).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static gs_arena *groups_arena(gs_part_ctx *c) { return &c->e->m->arena; }

int gs_part_unreduced_dim(const gs_sharding *s) {
    if (s->kind == GS_SHARDING_UNREDUCED) return -2;
    if (s->kind != GS_SHARDING_TILED) return -1;
    for (int k = 0; k < s->n_subgroups; k++)
        if (s->subgroups[k] == GS_SUBGROUP_UNREDUCED) return s->data_rank + k;
    return -1;
}

static bool is_manual(const gs_sharding *s) {
    if (s->kind == GS_SHARDING_MANUAL) return true;
    return s->kind == GS_SHARDING_TILED && gs_sharding_manual_dim(s) >= 0;
}

/* Replicated-like for the ladder: {replicated}, or an {unknown} placeholder. */
static bool is_repl(const gs_sharding *s) {
    return s->kind == GS_SHARDING_REPLICATED || s->kind == GS_SHARDING_UNKNOWN;
}

bool gs_part_plain(const gs_sharding *s) {
    if (is_repl(s)) return true;
    if (s->kind != GS_SHARDING_TILED) return false;
    for (int k = 0; k < s->n_subgroups; k++)
        if (s->subgroups[k] == GS_SUBGROUP_UNREDUCED) return false;
    return true;
}

bool gs_part_partial_manual(const gs_sharding *s) {
    return s->kind == GS_SHARDING_TILED && gs_sharding_manual_dim(s) >= 0;
}

/* A tiled sharding over t whose last n_sub tile dims are subgroups of the given types. */
static const gs_sharding *make(gs_part_ctx *c, const gs_tile_assignment *t, int n_sub,
                               const gs_subgroup_kind *types) {
    const gs_sharding *s = n_sub ? gs_sharding_subgroup(gs_part_arena(c), t, n_sub, types)
                                 : gs_sharding_tiled(gs_part_arena(c), t);
    if (!s) gs_part_oom(c);
    return s;
}

/* ------------------------------------------------------------------ partially manual values */

/* A partially manual sharding (tile dims [data..., manual M, other subgroups...]) seen as an
 * automatic one with the manual groups as a leading data dim: [M, data..., others...]. Each
 * device then holds a [1, ...] slice of a virtual [M, shape...] value, and the ladder, which never
 * moves a dim both shardings tile alike, keeps every collective inside one manual group. */
static const gs_sharding *virtualize(gs_part_ctx *c, const gs_sharding *s) {
    int md = gs_sharding_manual_dim(s);
    int perm[GS_MAX_TILE_RANK], np = 0;
    gs_subgroup_kind types[3];
    int nt = 0;
    perm[np++] = md;
    for (int i = 0; i < s->data_rank; i++) perm[np++] = i;
    for (int k = 0; k < s->n_subgroups; k++)
        if (s->data_rank + k != md) {
            perm[np++] = s->data_rank + k;
            types[nt++] = s->subgroups[k];
        }
    gs_tile_assignment t;
    if (gs_tile_transpose(gs_part_arena(c), &s->tiles, perm, &t) != GS_OK) {
        gs_part_oom(c);
        return s;
    }
    return make(c, &t, nt, types);
}

/* The inverse of virtualize: data dim 0 of v becomes the manual subgroup again. */
static const gs_sharding *devirtualize(gs_part_ctx *c, const gs_sharding *v) {
    if (v->kind != GS_SHARDING_TILED) return v;
    int perm[GS_MAX_TILE_RANK], np = 0;
    gs_subgroup_kind types[4];
    int nt = 0;
    for (int i = 1; i < v->data_rank; i++) perm[np++] = i;
    perm[np++] = 0;
    types[nt++] = GS_SUBGROUP_MANUAL;
    for (int k = 0; k < v->n_subgroups; k++) {
        perm[np++] = v->data_rank + k;
        types[nt++] = v->subgroups[k];
    }
    gs_tile_assignment t;
    if (gs_tile_transpose(gs_part_arena(c), &v->tiles, perm, &t) != GS_OK) {
        gs_part_oom(c);
        return v;
    }
    return make(c, &t, nt, types);
}

/* v (virtual, rank r + 1) with every data dim but the manual one untiled, reshaped to data
 * rank `rank`. */
static const gs_sharding *virtual_whole(gs_part_ctx *c, const gs_sharding *v, int rank) {
    int64_t keep = 0;
    gs_sharding *w = NULL;
    if (gs_sharding_replicate_except(gs_part_arena(c), v, 1, &keep, &w) != GS_OK || !w) {
        gs_part_oom(c);
        return v;
    }
    if (w->kind != GS_SHARDING_TILED) return w;
    int64_t dims[GS_MAX_TILE_RANK];
    int nd = 0;
    dims[nd++] = w->tiles.dims[0];
    for (int i = 0; i < rank; i++) dims[nd++] = 1;
    for (int i = w->data_rank; i < w->tiles.rank; i++) dims[nd++] = w->tiles.dims[i];
    gs_tile_assignment t;
    if (gs_tile_reshape(gs_part_arena(c), &w->tiles, nd, dims, &t) != GS_OK) {
        gs_part_oom(c);
        return w;
    }
    return make(c, &t, w->n_subgroups, w->subgroups);
}

const gs_sharding *gs_part_manual_whole(gs_part_ctx *c, const gs_sharding *m, int rank) {
    return devirtualize(c, virtual_whole(c, virtualize(c, m), rank));
}

const gs_sharding *gs_part_replicate_dims(gs_part_ctx *c, const gs_sharding *s, int n,
                                          const int *dims) {
    if (s->kind != GS_SHARDING_TILED || n == 0) return s;
    int64_t d64[GS_MAX_RANK];
    for (int i = 0; i < n; i++) d64[i] = dims[i];
    gs_sharding *out = NULL;
    if (gs_sharding_replicate_dims(gs_part_arena(c), s, n, d64, &out) != GS_OK || !out) {
        gs_part_oom(c);
        return s;
    }
    return out;
}

const gs_sharding *gs_part_make_unreduced(gs_part_ctx *c, const gs_sharding *s, int n,
                                          const int *dims) {
    /* Transpose the tile dims to [kept data dims, the `dims`, subgroups], then reshape to [data
     * dims with 1 for the moved ones, their product (unreduced), subgroups]. */
    if (s->kind != GS_SHARDING_TILED || n == 0) return s;
    const gs_tile_assignment *t = &s->tiles;
    bool moved[GS_MAX_TILE_RANK] = {0};
    for (int i = 0; i < n; i++) moved[dims[i]] = true;
    int perm[GS_MAX_TILE_RANK], np = 0;
    for (int i = 0; i < s->data_rank; i++)
        if (!moved[i]) perm[np++] = i;
    for (int i = 0; i < n; i++) perm[np++] = dims[i];
    for (int k = 0; k < s->n_subgroups; k++) perm[np++] = s->data_rank + k;
    int64_t shape[GS_MAX_TILE_RANK], red = 1;
    int ns = 0;
    for (int i = 0; i < s->data_rank; i++) shape[ns++] = moved[i] ? 1 : t->dims[i];
    for (int i = 0; i < n; i++) red *= t->dims[dims[i]];
    shape[ns++] = red;
    gs_subgroup_kind types[4];
    int nt = 0;
    types[nt++] = GS_SUBGROUP_UNREDUCED;
    for (int k = 0; k < s->n_subgroups; k++) {
        types[nt++] = s->subgroups[k];
        shape[ns++] = t->dims[s->data_rank + k];
    }
    gs_tile_assignment u, w;
    if (gs_tile_transpose(gs_part_arena(c), t, perm, &u) != GS_OK ||
        gs_tile_reshape(gs_part_arena(c), &u, ns, shape, &w) != GS_OK) {
        gs_part_oom(c);
        return s;
    }
    return make(c, &w, nt, types);
}

/* The sharding s with its unreduced subgroup replicated instead. */
const gs_sharding *gs_part_reduced_form(gs_part_ctx *c, const gs_sharding *s) {
    if (s->kind != GS_SHARDING_TILED) return gs_sharding_replicated(gs_part_arena(c));
    gs_subgroup_kind types[3];
    for (int k = 0; k < s->n_subgroups; k++)
        types[k] = s->subgroups[k] == GS_SUBGROUP_UNREDUCED ? GS_SUBGROUP_REPLICATED
                                                            : s->subgroups[k];
    return make(c, &s->tiles, s->n_subgroups, types);
}

/* Groups of all n devices in one. */
static gs_replica_groups *all_devices(gs_part_ctx *c) {
    gs_replica_groups *g = GS_NEW(groups_arena(c), gs_replica_groups);
    int64_t *dims = GS_NEW(groups_arena(c), int64_t);
    if (!g || !dims) {
        gs_part_oom(c);
        return NULL;
    }
    dims[0] = c->n;
    g->n_groups = 1;
    g->group_size = (int)c->n;
    g->is_iota = true;
    g->n_iota_dims = 1;
    g->iota_dims = dims;
    return g;
}

gs_replica_groups *gs_part_groups_along(gs_part_ctx *c, const gs_sharding *s, int n,
                                        const int *dims) {
    gs_replica_groups *g = NULL;
    if (gs_sharding_groups_along(groups_arena(c), s, n, dims, &g) != GS_OK) gs_part_oom(c);
    return g;
}

static void local_dims(const gs_shape *base, const gs_sharding *s, int64_t *out) {
    for (int i = 0; i < base->rank; i++) {
        int64_t k = gs_sharding_tiles_in_dim(s, i);
        out[i] = (base->dims[i] + k - 1) / k;
    }
}

/* ------------------------------------------------------------------ rungs */

/* 1b. Partial values combined over their unreduced groups. */
static void rung_all_reduce(gs_part_ctx *c, gs_part_value *v) {
    int ud = gs_part_unreduced_dim(v->sharding);
    gs_replica_groups *g = ud == -2 ? all_devices(c) : gs_part_groups_along(c, v->sharding, 1, &ud);
    v->hlo = gs_part_all_reduce(c, v->hlo, g, v->combiner);
    v->sharding = gs_part_reduced_form(c, v->sharding);
}

/* Tile dims of s with tile dim `from` moved right after tile dim `after` and merged with it
 * (its factor minor); `from` becomes 1 when it is a data dim, else is dropped. */
static bool merge_into(gs_part_ctx *c, const gs_tile_assignment *t, int data_rank, int from,
                       int after, gs_tile_assignment *out) {
    int perm[GS_MAX_TILE_RANK], np = 0;
    for (int i = 0; i < t->rank; i++) {
        if (i == from) continue;
        perm[np++] = i;
        if (i == after) perm[np++] = from;
    }
    gs_tile_assignment u;
    if (gs_tile_transpose(gs_part_arena(c), t, perm, &u) != GS_OK) return false;
    int64_t dims[GS_MAX_TILE_RANK];
    int nd = 0;
    for (int i = 0; i < t->rank; i++) {
        if (i == from) {
            if (i < data_rank) dims[nd++] = 1;
            continue;
        }
        dims[nd++] = i == after ? t->dims[i] * t->dims[from] : t->dims[i];
    }
    return gs_tile_reshape(gs_part_arena(c), &u, nd, dims, out) == GS_OK;
}

const gs_sharding *gs_part_move_tiles(gs_part_ctx *c, const gs_sharding *s, int from, int to) {
    if (s->kind != GS_SHARDING_TILED || from == to || gs_sharding_tiles_in_dim(s, from) == 1)
        return s;
    gs_tile_assignment t;
    if (!merge_into(c, &s->tiles, s->data_rank, from, to, &t)) {
        gs_part_oom(c);
        return s;
    }
    const gs_sharding *out = make(c, &t, s->n_subgroups, s->subgroups);
    return out ? out : s;
}

/* s (partial) with its unreduced tiles moved onto data dim j1, or, when j2 is not -1, split k1
 * ways (major) onto j1 and the rest onto j2 > j1; each part minor to the dim's own tiles. */
static const gs_sharding *scatter_onto(gs_part_ctx *c, const gs_sharding *s, int rank, int j1,
                                       int64_t k1, int j2) {
    int ud = gs_part_unreduced_dim(s);
    if (j1 < 0 || j1 >= rank || (j2 >= 0 && (j2 <= j1 || j2 >= rank || k1 < 2))) return NULL;
    gs_arena *a = gs_part_arena(c);
    gs_tile_assignment t;
    if (ud == -2) { /* {unreduced}: every device along j1 (and j2) */
        if (j2 >= 0 && (c->n % k1 != 0 || c->n / k1 < 2)) return NULL;
        int64_t dims[GS_MAX_RANK];
        for (int i = 0; i < rank; i++)
            dims[i] = i == j1 ? (j2 >= 0 ? k1 : c->n) : i == j2 ? c->n / k1 : 1;
        if (gs_tile_iota(a, rank, dims, 0, NULL, NULL, &t) != GS_OK) {
            gs_part_oom(c);
            return NULL;
        }
        return make(c, &t, 0, NULL);
    }
    if (ud < 0 || (j2 >= 0 ? j2 : j1) >= s->data_rank) return NULL;
    if (j2 < 0) {
        if (!merge_into(c, &s->tiles, s->data_rank, ud, j1, &t)) {
            gs_part_oom(c);
            return NULL;
        }
    } else {
        int64_t u = s->tiles.dims[ud];
        if (u % k1 != 0 || u / k1 < 2 || s->tiles.rank + 1 > GS_MAX_TILE_RANK) return NULL;
        /* The unreduced tile dim split into [k1, u/k1], each part merged into its data dim. */
        int64_t dims[GS_MAX_TILE_RANK];
        int nd = 0;
        for (int i = 0; i < s->tiles.rank; i++) {
            dims[nd++] = i == ud ? k1 : s->tiles.dims[i];
            if (i == ud) dims[nd++] = u / k1;
        }
        gs_tile_assignment split, one;
        if (gs_tile_reshape(a, &s->tiles, nd, dims, &split) != GS_OK ||
            !merge_into(c, &split, s->data_rank, ud + 1, j2, &one) ||
            !merge_into(c, &one, s->data_rank, ud, j1, &t)) {
            gs_part_oom(c);
            return NULL;
        }
    }
    gs_subgroup_kind types[4];
    int nt = 0;
    for (int k = 0; k < s->n_subgroups; k++)
        if (s->subgroups[k] != GS_SUBGROUP_UNREDUCED) types[nt++] = s->subgroups[k];
    return make(c, &t, nt, types);
}

const gs_sharding *gs_part_scatter_target(gs_part_ctx *c, const gs_sharding *s, int rank, int j) {
    return scatter_onto(c, s, rank, j, 0, -1);
}

const gs_sharding *gs_part_scatter_target2(gs_part_ctx *c, const gs_sharding *s, int rank, int j1,
                                           int64_t k1, int j2) {
    return j2 >= 0 ? scatter_onto(c, s, rank, j1, k1, j2) : NULL;
}

static bool same_counts(const gs_sharding *a, const gs_sharding *b) {
    if (a->kind != GS_SHARDING_TILED || b->kind != GS_SHARDING_TILED) return false;
    if (a->data_rank != b->data_rank || a->n_subgroups != b->n_subgroups ||
        a->tiles.rank != b->tiles.rank)
        return false;
    for (int k = 0; k < a->n_subgroups; k++)
        if (a->subgroups[k] != b->subgroups[k]) return false;
    for (int i = 0; i < a->tiles.rank; i++)
        if (a->tiles.dims[i] != b->tiles.dims[i]) return false;
    return true;
}

/* Whether partial sums wanted tiled take one reduce-scatter (rung 1a), or XLA's partitioner's
 * all-reduce and then the refining dynamic-slice (rungs 1b and 6). Costing runs take the
 * reduce-scatter that XLA's ReduceScatterCreator makes of the pair afterwards. */
static bool fuse_reduce_scatter(const gs_part_ctx *c) {
    return c->e->dry || !c->opts || !c->opts->all_reduce_then_slice;
}

/* 1a. Partial values scattered along a data dim the target tiles by the unreduced groups. */
static bool rung_reduce_scatter(gs_part_ctx *c, gs_part_value *v, const gs_sharding *to) {
    const gs_sharding *s = v->sharding;
    int ud = gs_part_unreduced_dim(s);
    if (ud == -1 || !gs_part_plain(to) || to->kind != GS_SHARDING_TILED) return false;
    gs_sharding view;
    if (ud == -2) {
        /* {unreduced}: view it as untiled data dims and one unreduced subgroup of all devices. */
        int r = v->base->rank;
        int64_t dims[GS_MAX_TILE_RANK];
        for (int i = 0; i < r; i++) dims[i] = 1;
        dims[r] = c->n;
        memset(&view, 0, sizeof view);
        view.kind = GS_SHARDING_TILED;
        view.data_rank = r;
        view.n_subgroups = 1;
        view.subgroups[0] = GS_SUBGROUP_UNREDUCED;
        if (gs_tile_iota(gs_part_arena(c), r + 1, dims, 0, NULL, NULL, &view.tiles) != GS_OK) {
            gs_part_oom(c);
            return false;
        }
        s = &view;
        ud = r;
    }
    int64_t u = s->tiles.dims[ud];
    const gs_shape *base = v->base;
    const gs_sharding *best = NULL;
    int best_j = -1;
    for (int j = 0; j < base->rank; j++) {
        int64_t ks = gs_sharding_tiles_in_dim(s, j), n = base->dims[j];
        if (gs_sharding_tiles_in_dim(to, j) != ks * u) continue;
        if (ks > 1 && (n + ks - 1) / ks != u * ((n + ks * u - 1) / (ks * u))) continue;
        gs_tile_assignment t;
        if (!merge_into(c, &s->tiles, s->data_rank, ud, j, &t)) {
            gs_part_oom(c);
            return false;
        }
        gs_subgroup_kind types[3];
        int nt = 0;
        for (int k = 0; k < s->n_subgroups; k++)
            if (s->subgroups[k] != GS_SUBGROUP_UNREDUCED) types[nt++] = s->subgroups[k];
        const gs_sharding *cand = make(c, &t, nt, types);
        if (!cand) return false;
        if (gs_sharding_equal(cand, to)) {
            best = cand;
            best_j = j;
            break;
        }
        if (!best && same_counts(cand, to)) {
            best = cand;
            best_j = j;
        }
    }
    if (!best) return false;
    int j = best_j;
    int64_t ks = gs_sharding_tiles_in_dim(s, j), n = base->dims[j];
    int64_t shard = (n + ks * u - 1) / (ks * u);
    gs_instr *x = v->hlo;
    if (x) {
        int64_t dims[GS_MAX_RANK];
        memcpy(dims, x->shape->dims, sizeof *dims * (size_t)x->shape->rank);
        dims[j] = shard * u;
        if (dims[j] != x->shape->dims[j])
            x = gs_part_pad_to(c, x, dims, gs_part_identity(c, v->combiner, x->shape->type));
    }
    gs_replica_groups *g = gs_part_groups_along(c, s, 1, &ud);
    v->hlo = gs_part_reduce_scatter(c, x, j, u, g, v->combiner);
    v->sharding = best;
    return true;
}

/* 2. A whole value made partial: the first device of each unreduced group keeps it, the others
 * hold the identity. */
static void rung_to_unreduced(gs_part_ctx *c, gs_part_value *v, const gs_sharding *to) {
    const gs_sharding *full = gs_part_reduced_form(c, to);
    gs_part_value w;
    gs_part_reshard_nocache(c, v, full, &w);
    int ud = gs_part_unreduced_dim(to);
    gs_builder *b = gs_part_builder(c);
    gs_instr *idx = ud == -2 ? gs_part_pid(c) : gs_part_tile_index(c, &to->tiles, ud);
    gs_instr *first = gs_build_compare(b, idx, gs_part_s32(c, 0), "EQ");
    gs_instr *x = w.hlo;
    if (x) {
        gs_instr *zero = gs_part_identity(c, GS_OP_ADD, x->shape->type);
        x = gs_build_select(b, gs_part_bcast_scalar(c, first, x->shape), x,
                            gs_part_bcast_scalar(c, zero, x->shape));
    }
    v->hlo = x;
    v->sharding = to;
    v->combiner = GS_OP_ADD;
}

/* 3. A value only device D holds (maximal) broadcast to every device: the others contribute the
 * identity to an all-reduce. */
static void rung_from_maximal(gs_part_ctx *c, gs_part_value *v) {
    gs_builder *b = gs_part_builder(c);
    gs_instr *x = v->hlo;
    gs_instr *mine = gs_build_compare(b, gs_part_pid(c), gs_part_s32(c, v->sharding->device), "EQ");
    if (x) {
        gs_instr *zero = gs_part_identity(c, GS_OP_ADD, x->shape->type);
        x = gs_build_select(b, gs_part_bcast_scalar(c, mine, x->shape), x,
                            gs_part_bcast_scalar(c, zero, x->shape));
    }
    v->hlo = gs_part_all_reduce(c, x, all_devices(c), GS_OP_ADD);
    v->sharding = gs_sharding_replicated(gs_part_arena(c));
}

/* Can every dim of `to` be cut from the device's shard under `from` (tile counts multiply, and
 * shard boundaries line up)? Both plain. */
static bool refinable(const gs_shape *base, const gs_sharding *from, const gs_sharding *to) {
    for (int i = 0; i < base->rank; i++) {
        int64_t ks = gs_sharding_tiles_in_dim(from, i), kt = gs_sharding_tiles_in_dim(to, i),
                n = base->dims[i];
        if (kt % ks != 0) return false;
        if (ks == kt || ks == 1) continue;
        if ((n + ks - 1) / ks != (kt / ks) * ((n + kt - 1) / kt)) return false;
    }
    return true;
}

/* Does every dim of `to` split each of `from`'s tiles into whole tiles (tile counts multiply),
 * with shard boundaries that may not line up, each misaligned dim's window at most one shard
 * away on either side (one collective-permute hop)? Both plain. */
static bool halo_refinable(const gs_shape *base, const gs_sharding *from,
                           const gs_sharding *to) {
    for (int i = 0; i < base->rank; i++) {
        int64_t ks = gs_sharding_tiles_in_dim(from, i), kt = gs_sharding_tiles_in_dim(to, i),
                n = base->dims[i];
        if (kt % ks != 0) return false;
        if (ks == kt || ks == 1) continue;
        int64_t cs = (n + ks - 1) / ks, w = (kt / ks) * ((n + kt - 1) / kt), L, R;
        if (cs == w) continue;
        int64_t live = gs_part_live_tiles(ks, w, n);
        if (!gs_part_halo_extent(from, i, n, 0, w, w, live, &L, &R) || L > cs || R > cs)
            return false;
    }
    return true;
}

/* 6a. Each tile of v (whose tile counts divide the target's) widened or narrowed by halo
 * exchange along every dim whose shard boundaries do not line up with the target's, so that
 * tile t holds [t*w, (t+1)*w) with w the target's shard times the tiles it splits into: what
 * rung_refine then cuts from. */
static void rung_align(gs_part_ctx *c, gs_part_value *v, const gs_sharding *to) {
    const gs_sharding *s = v->sharding;
    for (int i = 0; i < v->base->rank && v->hlo; i++) {
        int64_t ks = gs_sharding_tiles_in_dim(s, i), kt = gs_sharding_tiles_in_dim(to, i),
                n = v->base->dims[i];
        if (ks == kt || ks == 1) continue;
        int64_t w = (kt / ks) * ((n + kt - 1) / kt);
        if ((n + ks - 1) / ks == w) continue;
        int64_t live = gs_part_live_tiles(ks, w, n);
        v->hlo = gs_part_halo_read(c, v->hlo, s, i, n, 0, w, w, live, NULL);
    }
}

/* Tile assignment t with its dims split as `split`, those permuted by perm and merged into
 * `dims` (the last one replicating): that partially replicated sharding, or NULL (out of
 * memory, reported). */
static const gs_sharding *regroup(gs_part_ctx *c, const gs_tile_assignment *t, int ns,
                                  const int64_t *split, const int *perm, int nd,
                                  const int64_t *dims) {
    gs_tile_assignment u, w, z;
    const gs_sharding *s = NULL;
    if (gs_tile_reshape(gs_part_arena(c), t, ns, split, &u) == GS_OK &&
        gs_tile_transpose(gs_part_arena(c), &u, perm, &w) == GS_OK &&
        gs_tile_reshape(gs_part_arena(c), &w, nd, dims, &z) == GS_OK)
        s = gs_sharding_partial(gs_part_arena(c), &z);
    if (!s) gs_part_oom(c);
    return s;
}

/* `to` coarsened to tile counts ks: each dim's tiles split [ks, m] and the m parts moved into
 * replication. Every device keeps the data of its `to` tile's enclosing coarse tile. */
static const gs_sharding *coarsen(gs_part_ctx *c, const gs_sharding *to, int rank,
                                  const int64_t *ks) {
    if (is_repl(to)) return to;
    const gs_tile_assignment *t = &to->tiles;
    int64_t split[GS_MAX_TILE_RANK];
    int ns = 0;
    for (int i = 0; i < rank; i++) {
        split[ns++] = ks[i];
        split[ns++] = t->dims[i] / ks[i];
    }
    int64_t rep = t->rank > rank ? t->dims[rank] : 1;
    split[ns++] = rep;
    int perm[GS_MAX_TILE_RANK], np = 0;
    for (int i = 0; i < rank; i++) perm[np++] = 2 * i;
    for (int i = 0; i < rank; i++) perm[np++] = 2 * i + 1;
    perm[np++] = 2 * rank;
    int64_t dims[GS_MAX_TILE_RANK];
    int64_t r = rep;
    for (int i = 0; i < rank; i++) {
        dims[i] = ks[i];
        r *= t->dims[i] / ks[i];
    }
    dims[rank] = r;
    const gs_sharding *s = regroup(c, t, ns, split, perm, rank + 1, dims);
    return s ? s : to;
}

/* `to` (whose tile counts divide ks in every dim) with its replicated devices split into each
 * dim's minor factor ks / kt: a sharding of tile counts ks whose minor factors, gathered, give
 * `to` with its own device order. NULL when `to` is not plain partial replication. */
static const gs_sharding *uncoarsen(gs_part_ctx *c, const gs_sharding *to, int rank,
                                    const int64_t *ks, int64_t rep_s) {
    if (to->kind != GS_SHARDING_TILED || to->data_rank != rank) return NULL;
    if (to->n_subgroups > 1 ||
        (to->n_subgroups == 1 && to->subgroups[0] != GS_SUBGROUP_REPLICATED))
        return NULL;
    const gs_tile_assignment *t = &to->tiles;
    int64_t rep_t = to->n_subgroups ? t->dims[rank] : 1, f_all = 1;
    int64_t split[GS_MAX_TILE_RANK * 2 + 1];
    int ns = 0;
    if (2 * rank + 1 > GS_MAX_TILE_RANK) return NULL;
    for (int i = 0; i < rank; i++) split[ns++] = t->dims[i];
    for (int i = 0; i < rank; i++) {
        split[ns++] = ks[i] / t->dims[i];
        f_all *= ks[i] / t->dims[i];
    }
    if (f_all * rep_s != rep_t) return NULL;
    split[ns++] = rep_s;
    int perm[GS_MAX_TILE_RANK], np = 0;
    for (int i = 0; i < rank; i++) {
        perm[np++] = i;
        perm[np++] = rank + i;
    }
    perm[np++] = 2 * rank;
    int64_t dims[GS_MAX_TILE_RANK];
    for (int i = 0; i < rank; i++) dims[i] = ks[i];
    dims[rank] = rep_s;
    return regroup(c, t, ns, split, perm, rank + 1, dims);
}

/* Does every dim of `to` take whole unions of neighbouring shards of `from` (tile counts
 * divide, boundaries line up)? Both plain; not every dim equal. */
static bool coarsenable(const gs_shape *base, const gs_sharding *from, const gs_sharding *to) {
    bool coarser = false;
    for (int i = 0; i < base->rank; i++) {
        int64_t ks = gs_sharding_tiles_in_dim(from, i), kt = gs_sharding_tiles_in_dim(to, i),
                n = base->dims[i];
        if (ks % kt != 0 || ks > n) return false;
        if (ks == kt) continue;
        coarser = true;
        if ((n + kt - 1) / kt != (ks / kt) * ((n + ks - 1) / ks)) return false;
    }
    return coarser;
}

/* 5. Same tile counts, other device order: every device receives its tile from the device at
 * the same tile position under the source. */
static void rung_permute(gs_part_ctx *c, gs_part_value *v, const gs_sharding *to) {
    const gs_sharding *s = v->sharding;
    int64_t n = c->n;
    int np = 0;
    int64_t(*pairs)[2] = NULL;
    if (!c->e->dry) {
        pairs = malloc(sizeof *pairs * (size_t)(n ? n : 1));
        if (!pairs) {
            gs_part_oom(c);
            return;
        }
        for (int64_t d = 0; d < n; d++) {
            int64_t pos = gs_tile_position(&to->tiles, d);
            if (pos < 0) continue;
            pairs[np][0] = gs_tile_device_at(&s->tiles, pos);
            pairs[np][1] = d;
            np++;
        }
    }
    bool identity = !c->e->dry;
    for (int i = 0; identity && i < np; i++) identity = pairs[i][0] == pairs[i][1];
    if (!identity) v->hlo = gs_part_permute(c, v->hlo, np, (const int64_t(*)[2])pairs);
    v->sharding = to;
    free(pairs);
}

/* Do s and `to` (both tiled) cut every dim into shards of one size, the tile counts differing
 * only in tiles past the data (a dim of n split into more tiles than ceil(n / shard))? Then
 * tile t holds the same elements under both. */
static bool same_shards(const gs_shape *base, const gs_sharding *s, const gs_sharding *to) {
    if (s->kind != GS_SHARDING_TILED || to->kind != GS_SHARDING_TILED) return false;
    for (int i = 0; i < base->rank; i++) {
        int64_t ks = gs_sharding_tiles_in_dim(s, i), kt = gs_sharding_tiles_in_dim(to, i),
                n = base->dims[i];
        if (ks != kt && (n + ks - 1) / ks != (n + kt - 1) / kt) return false;
    }
    return true;
}

/* Device d's tile under sharding sh (its data dims' indices, linear over live[]), or -1 when
 * the tile is past the data. */
static int64_t live_tile(const gs_sharding *sh, int r, const int64_t *live, int64_t d) {
    const gs_tile_assignment *ta = &sh->tiles;
    int64_t pos = gs_tile_position(ta, d), idx[GS_MAX_TILE_RANK], lin = 0;
    if (pos < 0) return -1;
    for (int i = ta->rank - 1; i >= 0; i--) {
        idx[i] = pos % ta->dims[i];
        pos /= ta->dims[i];
    }
    for (int i = 0; i < r; i++) {
        if (idx[i] >= live[i]) return -1;
        lin = lin * live[i] + idx[i];
    }
    return lin;
}

/* 5b. Same shards, other tile counts (same_shards): each device receives its tile from a device
 * holding it under the source (itself if it does); a device whose tile is past the data
 * receives nothing (zeros, its padding). Where a tile goes to more devices than hold it (the
 * target replicates it), one device of its replica group receives it, the others zeros, and an
 * all-reduce over the group gives it to all (XLA's permute, then all-reduce). O(devices), as the
 * permute's pairs are. False, with nothing emitted, when neither works. */
static bool rung_relabel(gs_part_ctx *c, gs_part_value *v, const gs_sharding *to) {
    const gs_sharding *s = v->sharding;
    const gs_shape *base = v->base;
    int r = base->rank;
    int64_t n = c->n, nt = 1, live[GS_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int64_t k = gs_sharding_tiles_in_dim(s, i), cs = (base->dims[i] + k - 1) / k;
        live[i] = cs ? (base->dims[i] + cs - 1) / cs : 0;
        nt *= live[i] ? live[i] : 1;
    }
    if (nt > n) return false;
    /* held/want: each device's tile under s / to; src: whom it receives from (-1 none);
     * first/next: the devices holding each tile, as linked lists; rep: a tile's receiver. */
    int64_t *buf = malloc(sizeof *buf * (size_t)(5 * n + 2 * nt + 2));
    if (!buf) {
        gs_part_oom(c);
        return false;
    }
    int64_t *held = buf, *want = held + n, *src = want + n, *next = src + n, *sent = next + n,
            *first = sent + n, *rep = first + nt + 1;
    for (int64_t t = 0; t < nt; t++) rep[t] = -1;
    for (int64_t d = 0; d < n; d++) {
        held[d] = live_tile(s, r, live, d);
        want[d] = live_tile(to, r, live, d);
    }
    /* A replicated target (one replica group per tile): one receiver per tile, a device that
     * holds it already if any. */
    int rd = -1;
    if (to->n_subgroups == 1 && to->subgroups[0] == GS_SUBGROUP_REPLICATED) rd = to->data_rank;
    bool ok = false, broadcast = false;
    for (int pass = 0; pass < 2 && !ok; pass++) {
        broadcast = pass == 1;
        if (broadcast && rd < 0) break;
        if (broadcast) {
            for (int64_t d = n - 1; d >= 0; d--)
                if (want[d] >= 0 && (rep[want[d]] < 0 || held[rep[want[d]]] != want[d] ||
                                     held[d] == want[d]))
                    rep[want[d]] = d;
        }
        /* each tile's holders in device order, as linked lists */
        for (int64_t t = 0; t < nt; t++) first[t] = -1;
        for (int64_t d = n - 1; d >= 0; d--) {
            next[d] = held[d] >= 0 ? first[held[d]] : -1;
            if (held[d] >= 0) first[held[d]] = d;
        }
        for (int64_t d = 0; d < n; d++) {
            bool recv = want[d] >= 0 && (!broadcast || rep[want[d]] == d);
            src[d] = !recv ? -1 : held[d] == want[d] ? d : -2;
            sent[d] = src[d] == d;
        }
        ok = true;
        for (int64_t d = 0; d < n && ok; d++) {
            if (src[d] != -2) continue;
            int64_t e = first[want[d]];
            while (e >= 0 && sent[e]) e = next[e];
            if (e >= 0) {
                first[want[d]] = next[e]; /* the ones before are spent */
                src[d] = e;
                sent[e] = 1;
            }
            ok = src[d] >= 0;
        }
    }
    if (ok) {
        int np = 0;
        bool identity = !broadcast;
        for (int64_t d = 0; d < n; d++) {
            if (src[d] >= 0) np++;
            identity &= src[d] == d;
        }
        if (!identity) {
            int64_t(*pairs)[2] = malloc(sizeof *pairs * (size_t)(np ? np : 1));
            if (!pairs) {
                gs_part_oom(c);
                free(buf);
                return false;
            }
            int k = 0;
            for (int64_t d = 0; d < n; d++)
                if (src[d] >= 0) pairs[k][0] = src[d], pairs[k][1] = d, k++;
            v->hlo = gs_part_permute(c, v->hlo, np, (const int64_t(*)[2])pairs);
            free(pairs);
        }
        if (broadcast)
            v->hlo = gs_part_all_reduce(c, v->hlo, gs_part_groups_along(c, to, 1, &rd), GS_OP_ADD);
        v->sharding = to;
    }
    free(buf);
    return ok;
}

/* 6. The target's shard cut from the device's own (to refines the sharding, aligned). */
static void rung_refine(gs_part_ctx *c, gs_part_value *v, const gs_sharding *to) {
    const gs_shape *base = v->base;
    const gs_sharding *s = v->sharding;
    int r = base->rank;
    gs_instr *x = v->hlo;
    int64_t padded[GS_MAX_RANK], sizes[GS_MAX_RANK];
    gs_instr *offs[GS_MAX_RANK];
    local_dims(base, s, padded);
    for (int i = 0; i < r; i++) {
        int64_t ks = gs_sharding_tiles_in_dim(s, i), kt = gs_sharding_tiles_in_dim(to, i),
                n = base->dims[i];
        int64_t shard = (n + kt - 1) / kt;
        sizes[i] = shard;
        if (ks == kt) {
            offs[i] = gs_part_s32(c, 0);
            continue;
        }
        int64_t m = kt / ks;
        if (padded[i] < m * shard) padded[i] = m * shard;
        gs_instr *idx = gs_part_tile_index(c, &to->tiles, i);
        if (ks > 1) idx = gs_part_rem(c, idx, m);
        offs[i] = gs_part_mul(c, idx, shard);
    }
    if (x) {
        x = gs_part_pad_to(c, x, padded, NULL);
        x = gs_build_dynamic_slice(gs_part_builder(c), x, offs, sizes);
    }
    v->hlo = x;
    v->sharding = to;
}

/* Tile assignment t (data rank dr) with tile dim i split into (t->dims[i] / f, f), the factor
 * f minor: rank + 1 tile dims, the new one at i + 1. */
static bool split_tile_dim(gs_part_ctx *c, const gs_tile_assignment *t, int i, int64_t f,
                           gs_tile_assignment *out) {
    int64_t dims[GS_MAX_TILE_RANK + 1];
    int n = 0;
    for (int k = 0; k < t->rank; k++) {
        if (k == i) {
            dims[n++] = t->dims[k] / f;
            dims[n++] = f;
        } else {
            dims[n++] = t->dims[k];
        }
    }
    return n <= GS_MAX_TILE_RANK && gs_tile_reshape(gs_part_arena(c), t, n, dims, out) == GS_OK;
}

/* s with the minor factor f of data dim i's tiles moved onto data dim j (minor to j's own);
 * *groups (when not NULL) gets the groups of devices that differ only in that factor. */
static const gs_sharding *move_factor(gs_part_ctx *c, const gs_sharding *s, int i, int j, int64_t f,
                                      gs_replica_groups **groups) {
    int dr = s->data_rank;
    if (f == s->tiles.dims[i]) {
        gs_tile_assignment t;
        if (!merge_into(c, &s->tiles, dr, i, j, &t)) {
            gs_part_oom(c);
            return NULL;
        }
        if (groups) *groups = gs_part_groups_along(c, s, 1, &i);
        return make(c, &t, s->n_subgroups, s->subgroups);
    }
    gs_tile_assignment u, m, t;
    if (!split_tile_dim(c, &s->tiles, i, f, &u)) {
        gs_part_oom(c);
        return NULL;
    }
    if (groups) {
        const gs_sharding *view = make(c, &u, s->n_subgroups, s->subgroups);
        int fi = i + 1;
        *groups = view ? gs_part_groups_along(c, view, 1, &fi) : NULL;
    }
    /* Merge the factor (tile dim i + 1 of u, a data dim there) into j, then drop its 1. */
    if (!merge_into(c, &u, dr + 1, i + 1, j < i + 1 ? j : j + 1, &m)) {
        gs_part_oom(c);
        return NULL;
    }
    int64_t dims[GS_MAX_TILE_RANK];
    int n = 0;
    for (int k = 0; k < m.rank; k++)
        if (k != i + 1) dims[n++] = m.dims[k];
    if (gs_tile_reshape(gs_part_arena(c), &m, n, dims, &t) != GS_OK) {
        gs_part_oom(c);
        return NULL;
    }
    return make(c, &t, s->n_subgroups, s->subgroups);
}

/* 7. Tiles of data dim i (all of them, or a minor factor f of them) move to data dim j (which
 * then holds them minor to its own): an all-to-all within the groups along those tiles, with
 * dim j split into chunks for the members. */
static bool rung_all_to_all(gs_part_ctx *c, gs_part_value *v, const gs_sharding *to) {
    const gs_sharding *s = v->sharding;
    const gs_shape *base = v->base;
    int r = base->rank;
    if (s->kind != GS_SHARDING_TILED || to->kind != GS_SHARDING_TILED) return false;
    int bi = -1, bj = -1;
    int64_t bf = 0;
    const gs_sharding *best = NULL;
    for (int i = 0; i < r && !(best && gs_sharding_equal(best, to)); i++) {
        int64_t a = gs_sharding_tiles_in_dim(s, i), ti = gs_sharding_tiles_in_dim(to, i);
        if (a == 1) continue;
        /* The factor that leaves i with the target's count; when that count does not divide
         * i's, all of i's tiles move (i is then split anew from the replicated devices, as
         * XLA's all-to-all then dynamic-slice does). */
        int64_t fi = a % ti == 0 ? a / ti : a;
        if (fi == 1) continue;
        for (int j = 0; j < r; j++) {
            if (j == i) continue;
            int64_t ks = gs_sharding_tiles_in_dim(s, j), n = base->dims[j],
                    kt = gs_sharding_tiles_in_dim(to, j);
            /* Dim j gets a minor factor of i's tiles, minor to its own: all of the target's
             * count or a step towards it (several moves by steps). The factor is as much of
             * fi as j takes; what i keeps beyond the target's count is gathered later. */
            if (kt % ks != 0) continue;
            int64_t f = gs_gcd64(fi, kt / ks);
            if (f == 1) continue;
            /* Dim i keeps a / f tiles: its shards must stay whole tiles of the source's. */
            if (f < a && base->dims[i] % a != 0) continue;
            if (ks > 1 && (n + ks - 1) / ks != f * ((n + ks * f - 1) / (ks * f))) continue;
            const gs_sharding *cand = move_factor(c, s, i, j, f, NULL);
            if (!cand) return false;
            /* A move whose device order differs from the target's is fixed by a permute. */
            if (!best || gs_sharding_equal(cand, to)) {
                best = cand;
                bi = i;
                bj = j;
                bf = f;
            }
            if (gs_sharding_equal(cand, to)) break;
        }
    }
    if (!best) return false;
    int i = bi, j = bj;
    int64_t a = bf, ks = gs_sharding_tiles_in_dim(s, j), nj = base->dims[j];
    int64_t t = (nj + ks * a - 1) / (ks * a);
    gs_replica_groups *g = NULL;
    if (!move_factor(c, s, i, j, a, &g) || !g) return false;
    gs_instr *x = v->hlo;
    if (x) {
        gs_builder *b = gs_part_builder(c);
        int64_t dims[GS_MAX_RANK + 1], li = x->shape->dims[i];
        memcpy(dims, x->shape->dims, sizeof *dims * (size_t)r);
        dims[j] = a * t;
        x = gs_part_pad_to(c, x, dims, NULL);
        /* Split dim j into [a, t]. */
        int64_t sp[GS_MAX_RANK + 1];
        int k = 0;
        for (int d = 0; d < r; d++) {
            if (d == j) {
                sp[k++] = a;
                sp[k++] = t;
            } else {
                sp[k++] = dims[d];
            }
        }
        x = gs_build_reshape(b, x, r + 1, sp);
        x = gs_part_all_to_all(c, x, j, g);
        /* Bring the chunk dim (source tile of dim i) just before dim i and merge. */
        int pos_of[GS_MAX_RANK];
        for (int d = 0; d < r; d++) pos_of[d] = d < j ? d : d + 1;
        int pa = j, pt = j + 1, perm[GS_MAX_RANK + 1], np = 0;
        for (int d = 0; d < r; d++) {
            if (d == i) {
                perm[np++] = pa;
                perm[np++] = pos_of[d];
            } else if (d == j) {
                perm[np++] = pt;
            } else {
                perm[np++] = pos_of[d];
            }
        }
        x = gs_build_transpose(b, x, perm);
        int64_t md[GS_MAX_RANK];
        for (int d = 0; d < r; d++) md[d] = d == i ? a * li : d == j ? t : dims[d];
        x = gs_build_reshape(b, x, r, md);
        if (md[i] > base->dims[i]) {
            int64_t st[GS_MAX_RANK] = {0};
            md[i] = base->dims[i];
            x = gs_build_slice(b, x, st, md, NULL);
        }
    }
    v->hlo = x;
    v->sharding = best;
    return true;
}

/* 4/8 (small dims). Dims with more tiles than elements, where an all-gather would move mostly
 * padding: every device writes its shard into a zero buffer (padded to whole tiles) at its
 * offset, the buffers are summed by one all-reduce over the devices along those dims, and the
 * padding is sliced off (XLA replicates such dims the same way). */
static void reduce_dims(gs_part_ctx *c, gs_part_value *v, int n, const int *dims) {
    const gs_sharding *s = v->sharding;
    gs_instr *x = v->hlo;
    if (x) {
        gs_builder *b = gs_part_builder(c);
        int r = x->shape->rank;
        int64_t full[GS_MAX_RANK];
        gs_instr *offs[GS_MAX_RANK];
        memcpy(full, x->shape->dims, sizeof *full * (size_t)r);
        for (int i = 0; i < r; i++) offs[i] = gs_part_s32(c, 0);
        for (int k = 0; k < n; k++) {
            int i = dims[k];
            full[i] = x->shape->dims[i] * gs_sharding_tiles_in_dim(s, i);
            offs[i] = gs_part_shard_offset(c, s, i, x->shape->dims[i]);
        }
        gs_shape fs = {.type = x->shape->type, .rank = r, .dims = full};
        gs_instr *zero = gs_part_bcast_scalar(c, gs_build_scalar_i(b, fs.type, 0), &fs);
        x = gs_build_dynamic_update_slice(b, zero, x, offs);
    }
    gs_replica_groups *g = gs_part_groups_along(c, s, n, dims);
    x = gs_part_all_reduce(c, x, g, x && x->shape->type == GS_PRED ? GS_OP_OR : GS_OP_ADD);
    if (x) {
        int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
        memcpy(lim, x->shape->dims, sizeof *lim * (size_t)x->shape->rank);
        for (int k = 0; k < n; k++) lim[dims[k]] = v->base->dims[dims[k]];
        x = gs_build_slice(gs_part_builder(c), x, st, lim, NULL);
    }
    v->hlo = x;
    v->sharding = gs_part_replicate_dims(c, s, n, dims);
}

/* 4/8. All-gather the data dims in `dims` (one collective per dim, each gathered dim sliced back
 * to its size); dims with more tiles than elements go through reduce_dims. */
static void gather_dims(gs_part_ctx *c, gs_part_value *v, int n, const int *dims) {
    int small[GS_MAX_RANK], ns = 0;
    for (int k = 0; k < n; k++) {
        int i = dims[k];
        const gs_sharding *s = v->sharding;
        int64_t kt = gs_sharding_tiles_in_dim(s, i);
        if (kt == 1) continue;
        if (kt > v->base->dims[i]) {
            small[ns++] = i;
            continue;
        }
        gs_replica_groups *g = gs_part_groups_along(c, s, 1, &i);
        gs_instr *x = gs_part_all_gather(c, v->hlo, i, kt, g);
        if (x && x->shape->dims[i] > v->base->dims[i]) {
            int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
            memcpy(lim, x->shape->dims, sizeof *lim * (size_t)x->shape->rank);
            lim[i] = v->base->dims[i];
            x = gs_build_slice(gs_part_builder(c), x, st, lim, NULL);
        }
        v->hlo = x;
        v->sharding = gs_part_replicate_dims(c, s, 1, &i);
    }
    if (ns > 0) reduce_dims(c, v, ns, small);
}

/* 8 (coarser dims). The minor factor f of data dim i's tiles gathered: an all-gather within the
 * groups of f devices that hold neighbouring shards, leaving dim i with 1/f of its tiles, the
 * rest replicated (the target coarsens dim i, its shards unions of f source shards). */
static void gather_minor(gs_part_ctx *c, gs_part_value *v, int i, int64_t f) {
    const gs_sharding *s = v->sharding;
    gs_tile_assignment u;
    if (!split_tile_dim(c, &s->tiles, i, f, &u)) {
        gs_part_oom(c);
        return;
    }
    const gs_sharding *view = make(c, &u, s->n_subgroups, s->subgroups);
    if (!view) return;
    int fi = i + 1;
    gs_replica_groups *g = gs_part_groups_along(c, view, 1, &fi);
    const gs_sharding *r = gs_part_replicate_dims(c, view, 1, &fi);
    int64_t drop = fi;
    gs_sharding *out = NULL;
    if (gs_sharding_remove_dims(gs_part_arena(c), r, 1, &drop, &out) != GS_OK || !out) {
        gs_part_oom(c);
        return;
    }
    v->hlo = gs_part_all_gather(c, v->hlo, i, f, g);
    v->sharding = out;
}

static void warn_remat(gs_part_ctx *c, const gs_sharding *from, const gs_sharding *to) {
    c->e->stats.n_full_remat++;
    if (c->e->dry || (c->opts && c->opts->no_warnings)) return;
    gs_arena *a = gs_part_arena(c);
    const char *name = c->cur ? c->cur->name : "?";
    gs_warning(c->d, c->cur ? c->cur->span : gs_span_none(),
               "involuntary full rematerialization: resharding %%%s%s from %s to %s replicates "
               "the whole value on every device first",
               name, c->cur ? gs_part_origin(c, c->cur) : "", gs_sharding_to_string(a, from), gs_sharding_to_string(a, to));
}

/* 8. Gather the dims that do not refine; the ladder continues from there. */
static void rung_gather(gs_part_ctx *c, gs_part_value *v, const gs_sharding *to) {
    const gs_sharding *s = v->sharding;
    const gs_shape *base = v->base;
    int dims[GS_MAX_RANK], n = 0, tiled = 0, relabel[GS_MAX_RANK], nr = 0;
    for (int i = 0; i < base->rank; i++) {
        int64_t ks = gs_sharding_tiles_in_dim(s, i), kt = gs_sharding_tiles_in_dim(to, i),
                len = base->dims[i];
        if (ks == 1) continue;
        tiled++;
        bool keep = ks == kt ||
                    (kt % ks == 0 && (len + ks - 1) / ks == (kt / ks) * ((len + kt - 1) / kt));
        /* A dim whose shards the target cuts alike (more tiles than the data fills) stays
         * while others are gathered: rung 5b relabels it then. */
        if (!keep && kt > 1 && (len + ks - 1) / ks == (len + kt - 1) / kt) {
            relabel[nr++] = i;
            continue;
        }
        if (!keep || is_repl(to) || to->kind == GS_SHARDING_MAXIMAL) dims[n++] = i;
    }
    if (n == 0) /* nothing else to gather first: those dims are gathered after all */
        for (int k = 0; k < nr; k++) dims[n++] = relabel[k];
    /* A dim the target coarsens (its shards whole unions of neighbouring source shards) only
     * gathers within those groups; the ladder continues from there. */
    if (to->kind == GS_SHARDING_TILED && !is_repl(to))
        for (int k = 0; k < n; k++) {
            int i = dims[k];
            int64_t ks = gs_sharding_tiles_in_dim(s, i), kt = gs_sharding_tiles_in_dim(to, i),
                    len = base->dims[i];
            if (kt < 2 || ks % kt != 0 || ks > len) continue;
            int64_t f = ks / kt, ct = (len + kt - 1) / kt, held = f * ((len + ks - 1) / ks);
            if (ct == held) {
                gather_minor(c, v, i, f);
                return;
            }
            /* Unions of f shards that do not line up with the target's (uneven dims): each
             * device then holds [t*held, (t+1)*held) and a halo exchange with one neighbour
             * moves that to [t*ct, (t+1)*ct). */
            int64_t live = gs_part_live_tiles(kt, ct, len), L, R;
            gs_part_value w = *v;
            gather_minor(c, &w, i, f);
            if (c->failed ||
                !gs_part_halo_extent(w.sharding, i, kt * held, 0, ct, ct, live, &L, &R) ||
                L > held || R > held)
                continue;
            w.hlo = gs_part_halo_read(c, w.hlo, w.sharding, i, kt * held, 0, ct, ct, live, NULL);
            *v = w;
            return;
        }
    if (n == 0) {
        /* Every dim refines: only the device order is off; rung 6 handles it. */
        return;
    }
    bool to_tiled = to->kind == GS_SHARDING_TILED && gs_sharding_num_tiles(to) > 1;
    if (n == tiled && to_tiled) {
        /* Before gathering everything: a dim whose tiles make up all of another dim's in the
         * target, once that dim is gathered, stays (XLA: all-gather what leaves, then
         * all-to-all what moves), and the ladder moves it next. A move that would still need
         * a finer cut (a halo, a permute) is not worth it: everything is gathered then. */
        int keep[GS_MAX_RANK], nk = 0;
        for (int k = 0; k < n; k++) {
            int i = dims[k];
            int64_t ks = gs_sharding_tiles_in_dim(s, i), kt = gs_sharding_tiles_in_dim(to, i);
            if (ks % kt != 0 || ks / kt == 1) continue;
            bool movable = false;
            for (int j = 0; j < base->rank && !movable; j++) {
                int64_t kj = gs_sharding_tiles_in_dim(to, j);
                bool gathered = gs_sharding_tiles_in_dim(s, j) == 1;
                for (int k2 = 0; k2 < n; k2++) gathered |= dims[k2] == j && k2 != k;
                movable = j != i && gathered && kj > 1 && (ks / kt) % kj == 0;
            }
            if (movable) keep[nk++] = i;
        }
        if (nk > 0 && nk < n) {
            int m = 0;
            for (int k = 0; k < n; k++) {
                bool kept = false;
                for (int x = 0; x < nk; x++) kept |= keep[x] == dims[k];
                if (!kept) dims[m++] = dims[k];
            }
            gather_dims(c, v, m, dims);
            return;
        }
        warn_remat(c, s, to);
    }
    gather_dims(c, v, n, dims);
}

/* ------------------------------------------------------------------ the ladder */

static void relabel(gs_part_value *v, const gs_sharding *to) { v->sharding = to; }

/* Does a value sharded by s serve users wanting `to`? (Replicated serves maximal.) */
static bool satisfies(const gs_sharding *s, const gs_sharding *to) {
    return gs_sharding_equal(s, to) || (to->kind == GS_SHARDING_MAXIMAL && is_repl(s));
}

static void reshard_array(gs_part_ctx *c, const gs_part_value *in, const gs_sharding *to,
                          gs_part_value *out);

/* A partially manual reshard, run as an automatic one on the virtual view: the local value gets
 * a leading dim of 1, the ladder runs over [M, shape...], the dim is dropped again. False when
 * the two shardings group the devices into different manual groups. */
static bool reshard_partial_manual(gs_part_ctx *c, gs_part_value *v, const gs_sharding *to) {
    const gs_sharding *tv = virtualize(c, to);
    const gs_sharding *sv = is_repl(v->sharding) ? virtual_whole(c, tv, v->base->rank)
                                                  : virtualize(c, v->sharding);
    /* The same manual groups (partial values aside). */
    if (!gs_sharding_equal(virtual_whole(c, gs_part_reduced_form(c, sv), v->base->rank),
                           virtual_whole(c, gs_part_reduced_form(c, tv), v->base->rank)))
        return false;
    int r = v->base->rank;
    int64_t dims[GS_MAX_RANK + 1];
    dims[0] = gs_sharding_tiles_in_dim(tv, 0);
    for (int i = 0; i < r; i++) dims[i + 1] = v->base->dims[i];
    gs_shape *vbase = gs_shape_array(gs_part_arena(c), v->base->type, r + 1, dims);
    if (!vbase) {
        gs_part_oom(c);
        return false;
    }
    gs_part_value w = {NULL, vbase, sv, v->combiner}, o;
    if (v->hlo) {
        int64_t ld[GS_MAX_RANK + 1];
        ld[0] = 1;
        for (int i = 0; i < r; i++) ld[i + 1] = v->hlo->shape->dims[i];
        w.hlo = gs_build_reshape(gs_part_builder(c), v->hlo, r + 1, ld);
    }
    reshard_array(c, &w, tv, &o);
    if (o.hlo) {
        int64_t ld[GS_MAX_RANK];
        for (int i = 0; i < r; i++) ld[i] = o.hlo->shape->dims[i + 1];
        o.hlo = gs_build_reshape(gs_part_builder(c), o.hlo, r, ld);
    }
    v->hlo = o.hlo;
    v->sharding = to;
    v->combiner = o.combiner;
    return true;
}

/* Reshards one array value. */
static void reshard_array(gs_part_ctx *c, const gs_part_value *in, const gs_sharding *to,
                          gs_part_value *out) {
    gs_part_value v = *in;
    if (to->kind == GS_SHARDING_UNKNOWN) to = gs_sharding_replicated(gs_part_arena(c));
    for (int step = 0; step < 24 && !c->failed && !c->e->dry_failed; step++) {
        const gs_sharding *s = v.sharding;
        if (satisfies(s, to)) break;
        if (is_repl(s) && to->kind == GS_SHARDING_MANUAL) {
            /* A whole value on every device enters a manual region as it is. */
            relabel(&v, to);
            break;
        }
        if (gs_part_partial_manual(s) && is_repl(to) && v.base->rank >= 0 &&
            gs_type_is_array(v.base->type)) {
            /* A manual subgroup's value has no value across its groups: "replicated" is whole
             * within each manual group (each group's devices hold the group's value). */
            to = gs_part_manual_whole(c, s, v.base->rank);
            continue;
        }
        if (gs_part_partial_manual(to) && (gs_part_partial_manual(s) || is_repl(s)) &&
            reshard_partial_manual(c, &v, to))
            break;
        if (is_manual(s) || is_manual(to)) {
            gs_part_error(c,
                          "cannot reshard %%%s between manual and automatic shardings (%s to %s)",
                          c->cur ? c->cur->name : "?", gs_sharding_to_string(gs_part_arena(c), s),
                          gs_sharding_to_string(gs_part_arena(c), to));
            break;
        }
        if (s->kind == GS_SHARDING_UNKNOWN) {
            relabel(&v, gs_sharding_replicated(gs_part_arena(c)));
            continue;
        }
        if (gs_part_unreduced_dim(s) != -1) {
            if (gs_part_unreduced_dim(to) == -1 && fuse_reduce_scatter(c) &&
                rung_reduce_scatter(c, &v, to))
                continue;
            rung_all_reduce(c, &v);
            continue;
        }
        if (gs_part_unreduced_dim(to) != -1) {
            rung_to_unreduced(c, &v, to);
            break;
        }
        if (s->kind == GS_SHARDING_MAXIMAL) {
            rung_from_maximal(c, &v);
            continue;
        }
        if (is_repl(to) || to->kind == GS_SHARDING_MAXIMAL) {
            if (is_repl(s)) {
                /* A whole value on every device also is what one device needs: stay
                 * replicated, so later users need not broadcast it again. */
                if (to->kind != GS_SHARDING_MAXIMAL) relabel(&v, to);
                break;
            }
            rung_gather(c, &v, to);
            continue;
        }
        /* Both plain tiled or replicated from here. */
        if (!gs_part_plain(s) || !gs_part_plain(to)) {
            gs_part_error(c, "cannot reshard %%%s from %s to %s", c->cur ? c->cur->name : "?",
                          gs_sharding_to_string(gs_part_arena(c), s),
                          gs_sharding_to_string(gs_part_arena(c), to));
            break;
        }
        if (same_counts(s, to)) {
            rung_permute(c, &v, to);
            break;
        }
        if (same_shards(v.base, s, to) && rung_relabel(c, &v, to)) break;
        bool aligned = refinable(v.base, s, to);
        if (aligned || halo_refinable(v.base, s, to)) {
            int64_t ks[GS_MAX_RANK];
            for (int i = 0; i < v.base->rank; i++) ks[i] = gs_sharding_tiles_in_dim(s, i);
            const gs_sharding *mid = coarsen(c, to, v.base->rank, ks);
            if (!gs_sharding_equal(mid, s)) rung_permute(c, &v, mid);
            if (!aligned) rung_align(c, &v, to);
            rung_refine(c, &v, to);
            break;
        }
        if (to->kind == GS_SHARDING_TILED && coarsenable(v.base, s, to)) {
            /* The target only gathers: put the devices in its order first, while the shards
             * are small, so the all-gathers land each tile where the target wants it (XLA's
             * collective-permute to a reshard-compatible sharding, then all-gather). */
            int64_t ks[GS_MAX_RANK], held = 1;
            for (int i = 0; i < v.base->rank; i++) ks[i] = gs_sharding_tiles_in_dim(s, i);
            if (s->kind == GS_SHARDING_TILED)
                for (int k = 0; k < s->n_subgroups; k++) held *= s->tiles.dims[s->data_rank + k];
            const gs_sharding *mid = uncoarsen(c, to, v.base->rank, ks, held);
            if (mid && same_counts(mid, s)) {
                if (!gs_sharding_equal(mid, s)) rung_permute(c, &v, mid);
                for (int i = 0; i < v.base->rank && !c->failed; i++) {
                    int64_t kt = gs_sharding_tiles_in_dim(to, i);
                    if (ks[i] != kt) gather_minor(c, &v, i, ks[i] / kt);
                }
                continue;
            }
        }
        if (rung_all_to_all(c, &v, to)) continue;
        rung_gather(c, &v, to);
    }
    if (!c->failed && !c->e->dry_failed && !satisfies(v.sharding, to) &&
        gs_part_plain(v.sharding) && gs_part_plain(to) && !gs_part_partial_manual(v.sharding) &&
        !gs_part_partial_manual(to)) {
        /* The ladder did not converge (it should not happen): the always-correct path, whole
         * value on every device, then the target's shard. */
        warn_remat(c, v.sharding, to);
        int all[GS_MAX_RANK];
        for (int i = 0; i < v.base->rank; i++) all[i] = i;
        gather_dims(c, &v, v.base->rank, all);
        if (!is_repl(to)) rung_refine(c, &v, to);
        v.sharding = to;
    }
    if (!c->failed && !c->e->dry_failed && !satisfies(v.sharding, to))
        gs_part_error(c, "internal: cannot reshard %%%s from %s to %s", c->cur ? c->cur->name : "?",
                      gs_sharding_to_string(gs_part_arena(c), in->sharding),
                      gs_sharding_to_string(gs_part_arena(c), to));
    *out = v;
}

/* The sub-sharding of tuple element `index` of a value of tuple shape s sharded by sh. */
const gs_sharding *gs_part_element_sharding(gs_part_ctx *c, const gs_sharding *sh,
                                            const gs_shape *s, int index) {
    if (sh->kind != GS_SHARDING_TUPLE) return sh;
    int start = 0;
    for (int i = 0; i < index; i++) start += gs_shape_n_leaves(s->tuple[i]);
    const gs_shape *e = s->tuple[index];
    if (e->type != GS_TUPLE) return start < sh->n_tuple ? sh->tuple[start] : sh;
    int n = gs_shape_n_leaves(e);
    gs_sharding *t = gs_sharding_tuple(gs_part_arena(c), n, sh->tuple + start);
    if (!t) gs_part_oom(c);
    return t ? t : sh;
}

void gs_part_reshard_nocache(gs_part_ctx *c, const gs_part_value *v, const gs_sharding *to,
                             gs_part_value *out) {
    if (c->failed) {
        *out = *v;
        return;
    }
    if (v->base->type == GS_TUPLE) {
        int n = v->base->n_tuple;
        if (gs_sharding_equal(v->sharding, to)) {
            *out = *v;
            return;
        }
        gs_instr **elems = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, n + 1);
        int nlv = gs_shape_n_leaves(v->base);
        gs_sharding **leaves = GS_NEW_ARRAY(gs_part_arena(c), gs_sharding *, nlv + 1);
        if (!elems || !leaves) {
            gs_part_oom(c);
            *out = *v;
            return;
        }
        int nl = 0;
        for (int i = 0; i < n; i++) {
            gs_part_value e = {v->hlo ? gs_build_gte(gs_part_builder(c), v->hlo, i) : NULL,
                               v->base->tuple[i],
                               gs_part_element_sharding(c, v->sharding, v->base, i), v->combiner};
            gs_part_value r;
            gs_part_reshard_nocache(c, &e, gs_part_element_sharding(c, to, v->base, i), &r);
            elems[i] = r.hlo;
            if (r.sharding->kind == GS_SHARDING_TUPLE)
                for (int k = 0; k < r.sharding->n_tuple; k++) leaves[nl++] = r.sharding->tuple[k];
            else
                for (int k = 0; k < gs_shape_n_leaves(v->base->tuple[i]); k++)
                    leaves[nl++] = (gs_sharding *)r.sharding;
        }
        out->hlo = v->hlo ? gs_build_tuple(gs_part_builder(c), n, elems) : NULL;
        out->base = v->base;
        out->sharding = gs_sharding_tuple(gs_part_arena(c), nl, leaves);
        out->combiner = v->combiner;
        if (!out->sharding) gs_part_oom(c);
        return;
    }
    if (!gs_type_is_array(v->base->type) || gs_sharding_equal(v->sharding, to)) {
        *out = *v;
        if (!gs_type_is_array(v->base->type)) out->sharding = to;
        return;
    }
    reshard_array(c, v, to, out);
}

/* ------------------------------------------------------------------ cache */

static uint64_t cache_hash(const gs_instr *from, const gs_sharding *to) {
    uint64_t h = (uint64_t)(uintptr_t)from * 0x9E3779B97F4A7C15ull;
    return h ^ gs_sharding_hash(to);
}

void gs_part_reshard(gs_part_ctx *c, const gs_part_value *v, const gs_sharding *to,
                     gs_part_value *out) {
    if (gs_sharding_equal(v->sharding, to) || c->e->dry || !v->hlo || c->n_cache == 0) {
        gs_part_reshard_nocache(c, v, to, out);
        return;
    }
    uint64_t h = cache_hash(v->hlo, to) & (uint64_t)(c->n_cache - 1);
    for (gs_part_reshard_entry *e = c->cache[h]; e; e = e->next)
        if (e->from == v->hlo && gs_sharding_equal(e->to, to) && e->value.base == v->base) {
            *out = e->value;
            return;
        }
    gs_part_reshard_nocache(c, v, to, out);
    gs_part_reshard_entry *e = GS_NEW(gs_part_arena(c), gs_part_reshard_entry);
    if (!e) {
        gs_part_oom(c);
        return;
    }
    e->from = v->hlo;
    e->to = to;
    e->value = *out;
    e->next = c->cache[h];
    c->cache[h] = e;
}

/* ------------------------------------------------------------------ costing */

static int64_t reshard_cost(gs_part_ctx *c, const gs_shape *base, const gs_sharding *from,
                            gs_opcode red, const gs_sharding *to);

int64_t gs_part_reshard_cost(gs_part_ctx *c, const gs_shape *base, const gs_sharding *from,
                             gs_opcode red, const gs_sharding *to) {
    if (gs_sharding_equal(from, to)) return 0;
    /* Layers repeat: the same reshard of the same shape is costed once. */
    uint64_t h = gs_sharding_hash(from) * 31 + gs_sharding_hash(to) + (uint64_t)red;
    for (int i = 0; i < base->rank; i++) h = h * 1000003u + (uint64_t)base->dims[i];
    h = (h ^ (h >> 29)) & 255;
    for (gs_part_cost_entry *e = c->costs[h]; e; e = e->next)
        if (e->combiner == red && gs_shape_equal(e->base, base) &&
            gs_sharding_equal(e->from, from) && gs_sharding_equal(e->to, to))
            return e->bytes;
    int64_t bytes = reshard_cost(c, base, from, red, to);
    gs_part_cost_entry *e = GS_NEW(gs_part_arena(c), gs_part_cost_entry);
    if (!e) {
        gs_part_oom(c);
        return bytes;
    }
    *e = (gs_part_cost_entry){base, from, to, red, bytes, c->costs[h]};
    c->costs[h] = e;
    return bytes;
}

static int64_t reshard_cost(gs_part_ctx *c, const gs_shape *base, const gs_sharding *from,
                            gs_opcode red, const gs_sharding *to) {
    gs_part_emit dry;
    memset(&dry, 0, sizeof dry);
    dry.dry = true;
    dry.m = gs_module_new("cost");
    if (!dry.m) {
        gs_part_oom(c);
        return 0;
    }
    gs_computation *comp = gs_computation_new(dry.m, "cost");
    if (!comp) {
        gs_module_free(dry.m);
        gs_part_oom(c);
        return 0;
    }
    comp->is_entry = true;
    dry.m->entry = comp;
    gs_builder_init(&dry.b, dry.m, comp, &dry.names);
    gs_part_emit *saved = c->e;
    int64_t channel = c->channel;
    c->e = &dry;
    gs_part_value v = {NULL, base, from, red};
    v.hlo = gs_build_parameter(&dry.b, 0, gs_part_local_shape(c, base, from), "p");
    gs_part_value out;
    gs_part_reshard_nocache(c, &v, to, &out);
    c->e = saved;
    c->channel = channel;
    int64_t bytes = gs_partition_stats_bytes(&dry.stats);
    /* A full rematerialization costs the whole value on every device; an impossible reshard
     * loses to anything. */
    if (dry.stats.n_full_remat) bytes += gs_shape_bytes(base);
    if (dry.dry_failed) bytes = INT64_MAX / 8;
    gs_names_free(&dry.names);
    gs_module_free(dry.m);
    return bytes;
}
