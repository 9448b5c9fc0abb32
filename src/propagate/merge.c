/*
 * merge.c — combining shardings, with XLA's hlo_sharding_util semantics: merging compatible
 * shardings, the common sharding of a group, and the "improve" test every inference goes through
 * (ReturnImprovedShardingImpl with MergeSharding and IsSubTilingOrEqualSharding).
 *
 * The sub-tiling test works on tile assignments, except for unevenly divided shapes, where it
 * materialises device lists.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ merging */

/* Leaf shardings merge_compatible accepts. */
static bool mergeable_leaf(const gs_sharding *s) {
    return s->kind == GS_SHARDING_TILED || s->kind == GS_SHARDING_REPLICATED ||
           s->kind == GS_SHARDING_MAXIMAL;
}

const gs_sharding *gs_prop_merge_compatible(gs_prop_ctx *c, const gs_sharding *to_merge,
                                            int64_t min_tiles, const gs_sharding *dst) {
    if (!to_merge || !dst || !mergeable_leaf(to_merge) || !mergeable_leaf(dst)) return NULL;
    gs_sharding *out;
    if (gs_sharding_merge_compatible(c->a, to_merge, min_tiles, dst, &out) != GS_OK)
        return gs_prop_oom(c);
    return out;
}

/* A tuple of n leaves copied from a non-tuple sharding (to compare with a tuple). */
static const gs_sharding *as_tuple(gs_prop_ctx *c, const gs_sharding *s, int n) {
    gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, n ? n : 1);
    if (!v) return gs_prop_oom(c);
    for (int i = 0; i < n; i++) v[i] = (gs_sharding *)s;
    gs_sharding *t = gs_sharding_tuple(c->a, n, v);
    return t ? t : gs_prop_oom(c);
}

bool gs_prop_merge(gs_prop_ctx *c, const gs_sharding *to_merge, const gs_sharding **dst,
                   bool may_combine) {
    bool mt = to_merge->kind == GS_SHARDING_TUPLE, dt = (*dst)->kind == GS_SHARDING_TUPLE;
    if (mt != dt) {
        if (mt) {
            const gs_sharding *x = as_tuple(c, *dst, to_merge->n_tuple);
            if (!x) return false;
            *dst = x;
        } else {
            to_merge = as_tuple(c, to_merge, (*dst)->n_tuple);
            if (!to_merge) return false;
        }
    }
    if (mt && to_merge->n_tuple != (*dst)->n_tuple) return false;
    gs_sharding *out;
    bool changed = false;
    if (gs_sharding_merge(c->a, to_merge, *dst, may_combine, &out, &changed) != GS_OK) {
        c->oom = true;
        return false;
    }
    *dst = out;
    return changed;
}

const gs_sharding *gs_prop_common(gs_prop_ctx *c, int n, const gs_sharding *const *v,
                                  const gs_sharding *def) {
    const gs_sharding *common = v[0];
    for (int i = 1; i < n; i++) {
        if (gs_sharding_equal(common, v[i])) continue;
        const gs_sharding *m =
            gs_prop_merge_compatible(c, v[i], gs_prop_num_tiles(common), common);
        if (!m) return def ? def : v[0];
        common = m;
    }
    return common;
}

/* XLA IsShardingStrictlyBetter: manual beats tile-maximal, leaf by leaf for tuples. */
static bool strictly_better(const gs_sharding *lhs, const gs_sharding *rhs) {
    bool lt = lhs->kind == GS_SHARDING_TUPLE, rt = rhs->kind == GS_SHARDING_TUPLE;
    if (lt != rt) return false;
    if (!lt) return lhs->kind == GS_SHARDING_MANUAL && gs_sharding_is_tile_maximal(rhs);
    if (lhs->n_tuple != rhs->n_tuple) return false;
    int mask = 0;
    for (int i = 0; i < lhs->n_tuple; i++) {
        const gs_sharding *l = lhs->tuple[i], *r = rhs->tuple[i];
        if (l->kind == GS_SHARDING_MANUAL && gs_sharding_is_tile_maximal(r)) mask |= 1;
        if (r->kind == GS_SHARDING_MANUAL && gs_sharding_is_tile_maximal(l)) mask |= 2;
    }
    return mask == 1;
}

const gs_sharding *gs_prop_improved(gs_prop_ctx *c, const gs_sharding *from, const gs_sharding *cur,
                                    const gs_shape *shape, bool may_combine, bool aggressive) {
    if (!from) return NULL;
    if (cur && strictly_better(from, cur)) return from;
    if (!gs_prop_spatial(from)) return NULL;
    if (!cur) return from;
    if (gs_prop_manual(from)) return NULL;
    int64_t tiles = gs_prop_num_tiles(from);
    const gs_sharding *merged = from;
    if (!gs_prop_merge(c, cur, &merged, may_combine)) return NULL;
    if (!aggressive && shape->type != GS_TUPLE && !gs_prop_tile_maximal(cur) &&
        gs_prop_num_tiles(merged) == tiles && !gs_prop_subtiling(c, shape, merged, cur))
        return NULL;
    return merged;
}

/* ------------------------------------------------------------------ sub-tiling */

/* The brute-force check: every tile of `p` lies inside the tile `s` gives the same device. */
static bool subtiling_slow(gs_prop_ctx *c, const gs_shape *shape, const gs_sharding *p,
                           const gs_sharding *s, const int64_t *pbase, const int64_t *base) {
    int dr = p->data_rank;
    int64_t n = s->tiles.n;
    if (p->tiles.n != n) return false;
    int64_t *sv = malloc(sizeof *sv * (size_t)n), *pv = malloc(sizeof *pv * (size_t)n);
    int64_t *off = malloc(sizeof *off * (size_t)(n * (dr ? dr : 1)));
    bool ok = sv && pv && off;
    if (!ok) c->oom = true;
    if (ok) {
        gs_tile_materialize(&s->tiles, sv);
        gs_tile_materialize(&p->tiles, pv);
        for (int64_t i = 0; i < n * dr; i++) off[i] = -1;
        int64_t idx[GS_MAX_TILE_RANK] = {0};
        for (int64_t pos = 0; pos < n && ok; pos++) {
            int64_t dev = sv[pos];
            if (dev < 0 || dev >= n) {
                ok = false;
                break;
            }
            for (int j = 0; j < dr; j++) off[dev * dr + j] = base[j] * idx[j];
            for (int k = s->tiles.rank - 1; k >= 0; k--) {
                if (++idx[k] < s->tiles.dims[k]) break;
                idx[k] = 0;
            }
        }
        memset(idx, 0, sizeof idx);
        for (int64_t pos = 0; pos < n && ok; pos++) {
            int64_t dev = pv[pos];
            if (dev < 0 || dev >= n || (dr && off[dev * dr] < 0)) {
                ok = false;
                break;
            }
            for (int j = 0; j < dr && ok; j++) {
                int64_t so = pbase[j] * idx[j], to = off[dev * dr + j];
                if (so < to) ok = false;
                if (so + pbase[j] <= shape->dims[j] && so + pbase[j] > to + base[j]) ok = false;
            }
            for (int k = p->tiles.rank - 1; k >= 0; k--) {
                if (++idx[k] < p->tiles.dims[k]) break;
                idx[k] = 0;
            }
        }
    }
    free(sv);
    free(pv);
    free(off);
    return ok;
}

bool gs_prop_subtiling(gs_prop_ctx *c, const gs_shape *shape, const gs_sharding *potential,
                       const gs_sharding *sharding) {
    if (gs_prop_manual(potential) || gs_prop_manual(sharding)) return false;
    if (gs_prop_tile_maximal(sharding)) return true;
    if (gs_prop_tile_maximal(potential)) return false;
    if (potential->kind != GS_SHARDING_TILED || sharding->kind != GS_SHARDING_TILED) return false;
    int dr = potential->data_rank;
    if (dr != sharding->data_rank || dr != shape->rank) return false;
    int64_t pbase[GS_MAX_TILE_RANK], base[GS_MAX_TILE_RANK];
    int64_t rd[GS_MAX_TILE_RANK + GS_MAX_RANK];
    int nrd = 0;
    bool shortcut = true;
    int split_after[GS_MAX_TILE_RANK];
    int n_split = 0;
    for (int i = 0; i < dr; i++) {
        int64_t d = shape->dims[i], p = potential->tiles.dims[i], s = sharding->tiles.dims[i];
        if (p < s) return false;
        pbase[i] = (d + p - 1) / p;
        base[i] = (d + s - 1) / s;
        if (s != 1 && (p % s != 0 || base[i] % pbase[i] != 0 || d <= (p - 1) * pbase[i] ||
                       d <= (s - 1) * base[i]))
            shortcut = false;
    }
    if (!shortcut) return subtiling_slow(c, shape, potential, sharding, pbase, base);
    if (!gs_prop_partial(sharding)) return gs_sharding_equal(potential, sharding);
    for (int i = 0; i < dr; i++) {
        int64_t p = potential->tiles.dims[i], s = sharding->tiles.dims[i];
        if (p != s) {
            rd[nrd++] = s;
            split_after[n_split++] = nrd;
            rd[nrd++] = p / s;
        } else {
            rd[nrd++] = p;
        }
    }
    for (int i = dr; i < potential->tiles.rank; i++) rd[nrd++] = potential->tiles.dims[i];
    /* Move the split-off parts to the end, in order. */
    int perm[GS_MAX_TILE_RANK + GS_MAX_RANK], np = 0;
    bool moved[GS_MAX_TILE_RANK + GS_MAX_RANK] = {0};
    for (int k = 0; k < n_split; k++) moved[split_after[k]] = true;
    for (int i = 0; i < nrd; i++)
        if (!moved[i]) perm[np++] = i;
    for (int k = 0; k < n_split; k++) perm[np++] = split_after[k];
    if (nrd > GS_MAX_TILE_RANK) return subtiling_slow(c, shape, potential, sharding, pbase, base);
    gs_tile_assignment r, t, u;
    int64_t prod = 1;
    for (int i = 0; i < nrd; i++) prod *= rd[i];
    if (prod != potential->tiles.n || potential->tiles.n != sharding->tiles.n) return false;
    if (gs_tile_reshape(c->a, &potential->tiles, nrd, rd, &r) != GS_OK ||
        gs_tile_transpose(c->a, &r, perm, &t) != GS_OK ||
        gs_tile_reshape(c->a, &t, sharding->tiles.rank, sharding->tiles.dims, &u) != GS_OK) {
        c->oom = true;
        return false;
    }
    /* XLA compares PartialTile(u)'s assignment: replication groups sorted. */
    gs_sharding *ps = gs_sharding_partial(c->a, &u);
    if (!ps) {
        c->oom = true;
        return false;
    }
    return ps->kind == GS_SHARDING_TILED && gs_tile_equal(&ps->tiles, &sharding->tiles);
}
