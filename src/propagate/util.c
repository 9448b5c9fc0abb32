/*
 * util.c — the sharding arithmetic propagation needs beyond src/sharding/'s transforms, with
 * XLA's hlo_sharding_util semantics: tuple sub-shardings, the "improve" test every inference goes
 * through (ReturnImprovedShardingImpl with MergeSharding and IsSubTilingOrEqualSharding),
 * transposes that drop or add dims, carrying the tiles of some dims to other dims while
 * replicating the rest, reversal, and common shardings of groups.
 *
 * Everything works on tile assignments through reshape and transpose, so iota assignments stay
 * iota and cost O(rank); only reversal, and the sub-tiling test of unevenly divided shapes,
 * materialise device lists.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Records an allocation failure; returns NULL for convenience. */
static const gs_sharding *fail(gs_prop_ctx *c) {
    c->oom = true;
    return NULL;
}

/* ------------------------------------------------------------------ shapes */

int gs_prop_leaf_count(const gs_shape *s) {
    if (s->type != GS_TUPLE) return 1;
    int n = 0;
    for (int i = 0; i < s->n_tuple; i++) n += gs_prop_leaf_count(s->tuple[i]);
    return n;
}

int gs_prop_required_leaves(const gs_shape *s) {
    int n = gs_prop_leaf_count(s);
    return n == 0 ? 1 : n;
}

bool gs_prop_compatible(const gs_shape *a, const gs_shape *b) {
    if ((a->type == GS_TUPLE) != (b->type == GS_TUPLE)) return false;
    if (a->type == GS_TUPLE) {
        if (a->n_tuple != b->n_tuple) return false;
        for (int i = 0; i < a->n_tuple; i++)
            if (!gs_prop_compatible(a->tuple[i], b->tuple[i])) return false;
        return true;
    }
    if ((a->type == GS_TOKEN) != (b->type == GS_TOKEN)) return false;
    return gs_shape_same_dims(a, b);
}

int64_t gs_prop_bytes(const gs_shape *s) { return gs_shape_bytes(s); }

/* ------------------------------------------------------------------ queries */

static bool leaf_tile_maximal(const gs_sharding *s) {
    return s->kind == GS_SHARDING_REPLICATED || s->kind == GS_SHARDING_MAXIMAL;
}

bool gs_prop_spatial(const gs_sharding *s) {
    if (!s) return false;
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (gs_prop_spatial(s->tuple[i])) return true;
        return false;
    }
    return !leaf_tile_maximal(s) || s->kind == GS_SHARDING_REPLICATED;
}

bool gs_prop_tile_maximal(const gs_sharding *s) { return gs_sharding_is_tile_maximal(s); }
bool gs_prop_manual(const gs_sharding *s) { return gs_sharding_is_manual(s); }
bool gs_prop_replicated(const gs_sharding *s) { return gs_sharding_is_replicated(s); }

bool gs_prop_manual_subgroup(const gs_sharding *s) {
    return s->kind == GS_SHARDING_TILED && gs_sharding_manual_dim(s) >= 0;
}

bool gs_prop_partial(const gs_sharding *s) {
    return s->kind == GS_SHARDING_TILED && gs_sharding_replication_dim(s) >= 0;
}

int64_t gs_prop_num_tiles(const gs_sharding *s) {
    return s->kind == GS_SHARDING_TILED ? gs_sharding_num_tiles(s) : 1;
}

int64_t gs_prop_unique_device(const gs_sharding *s) {
    if (!s) return -1;
    if (s->kind == GS_SHARDING_MAXIMAL) return s->device;
    if (s->kind != GS_SHARDING_TUPLE || s->n_tuple == 0) return -1;
    int64_t d = gs_prop_unique_device(s->tuple[0]);
    for (int i = 1; i < s->n_tuple && d >= 0; i++)
        if (gs_prop_unique_device(s->tuple[i]) != d) d = -1;
    return d;
}

bool gs_prop_more_specific(const gs_sharding *lhs, const gs_sharding *rhs) {
    bool lt = lhs->kind == GS_SHARDING_TUPLE, rt = rhs->kind == GS_SHARDING_TUPLE;
    if (lt != rt) return false;
    if (lt && lhs->n_tuple != rhs->n_tuple) return false;
    return gs_sharding_more_specific(lhs, rhs);
}

bool gs_prop_is_cse_marked(const gs_sharding *s) {
    if (!s) return false;
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (gs_prop_is_cse_marked(s->tuple[i])) return true;
        return false;
    }
    return s->metadata && strstr(s->metadata, "_sharding_propagation_cse_prevention");
}

/* ------------------------------------------------------------------ copies */

/* Copies n elements of size sz into a (NULL stays NULL); *ok cleared on failure. */
static const void *dup(gs_arena *a, const void *p, size_t n, size_t sz, bool *ok) {
    if (!p || n == 0) return p;
    void *q = gs_arena_memdup(a, p, n * sz);
    if (!q) *ok = false;
    return q;
}

gs_sharding *gs_prop_persist(gs_arena *a, const gs_sharding *s) {
    if (s->kind == GS_SHARDING_TUPLE) {
        gs_sharding **v = GS_NEW_ARRAY(a, gs_sharding *, s->n_tuple ? s->n_tuple : 1);
        if (!v) return NULL;
        for (int i = 0; i < s->n_tuple; i++)
            if (!(v[i] = gs_prop_persist(a, s->tuple[i]))) return NULL;
        return gs_sharding_tuple(a, s->n_tuple, v);
    }
    gs_sharding *r = GS_NEW(a, gs_sharding);
    if (!r) return NULL;
    *r = *s;
    bool ok = true;
    if (s->metadata && !(r->metadata = gs_arena_strdup(a, s->metadata))) ok = false;
    if (s->kind == GS_SHARDING_TILED) {
        gs_tile_assignment *t = &r->tiles;
        t->dims = dup(a, s->tiles.dims, (size_t)s->tiles.rank, sizeof *t->dims, &ok);
        if (s->tiles.iota) {
            size_t nr = (size_t)s->tiles.n_reshape;
            t->reshape = dup(a, s->tiles.reshape, nr, sizeof *t->reshape, &ok);
            t->perm = dup(a, s->tiles.perm, nr, sizeof *t->perm, &ok);
            t->strides = dup(a, s->tiles.strides, nr, sizeof *t->strides, &ok);
        } else {
            size_t n = (size_t)s->tiles.n;
            t->devices = dup(a, s->tiles.devices, n, sizeof *t->devices, &ok);
            t->by_device = dup(a, s->tiles.by_device, 2 * n, sizeof *t->by_device, &ok);
        }
    }
    return ok ? r : NULL;
}

/* ------------------------------------------------------------------ tuples */

const gs_sharding *gs_prop_sub(gs_prop_ctx *c, const gs_sharding *s, const gs_shape *shape,
                               int index) {
    if (!s || s->kind != GS_SHARDING_TUPLE || shape->type != GS_TUPLE) return s;
    if (index < 0 || index >= shape->n_tuple) return s;
    int off = 0;
    for (int i = 0; i < index; i++) off += gs_prop_leaf_count(shape->tuple[i]);
    const gs_shape *e = shape->tuple[index];
    if (e->type != GS_TUPLE) {
        if (off >= s->n_tuple) {
            gs_sharding *r = gs_sharding_replicated(c->a);
            return r ? r : fail(c);
        }
        return s->tuple[off];
    }
    int n = gs_prop_leaf_count(e);
    if (n == 0) {
        gs_sharding *r = gs_sharding_replicated(c->a);
        return r ? gs_sharding_tuple(c->a, 1, &r) : fail(c);
    }
    if (off + n > s->n_tuple) return s;
    gs_sharding *t = gs_sharding_tuple(c->a, n, s->tuple + off);
    return t ? t : fail(c);
}

const gs_sharding *gs_prop_single_tuple(gs_prop_ctx *c, const gs_shape *shape,
                                        const gs_sharding *leaf) {
    if (!leaf || shape->type != GS_TUPLE) return leaf;
    if (leaf->kind == GS_SHARDING_TUPLE) return leaf;
    int n = gs_prop_required_leaves(shape);
    gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, n);
    if (!v) return fail(c);
    for (int i = 0; i < n; i++) v[i] = (gs_sharding *)leaf;
    gs_sharding *t = gs_sharding_tuple(c->a, n, v);
    return t ? t : fail(c);
}

const gs_sharding *gs_prop_with_sub(gs_prop_ctx *c, const gs_sharding *cur, const gs_shape *shape,
                                    int index, const gs_sharding *sub) {
    if (shape->type != GS_TUPLE) return sub;
    int n = gs_prop_required_leaves(shape);
    gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, n);
    gs_sharding *rep = gs_sharding_replicated(c->a);
    if (!v || !rep) return fail(c);
    for (int i = 0; i < n; i++) {
        if (cur && cur->kind == GS_SHARDING_TUPLE && i < cur->n_tuple)
            v[i] = cur->tuple[i];
        else
            v[i] = cur && cur->kind != GS_SHARDING_TUPLE ? (gs_sharding *)cur : rep;
    }
    int off = 0;
    for (int i = 0; i < index && i < shape->n_tuple; i++)
        off += gs_prop_leaf_count(shape->tuple[i]);
    int m = index < shape->n_tuple ? gs_prop_leaf_count(shape->tuple[index]) : 0;
    for (int i = 0; i < m && off + i < n; i++) {
        if (sub->kind == GS_SHARDING_TUPLE)
            v[off + i] = i < sub->n_tuple ? sub->tuple[i] : rep;
        else
            v[off + i] = (gs_sharding *)sub;
    }
    gs_sharding *t = gs_sharding_tuple(c->a, n, v);
    return t ? t : fail(c);
}

/* ------------------------------------------------------------------ simple transforms */

const gs_sharding *gs_prop_replicate_dims(gs_prop_ctx *c, const gs_sharding *s, int n,
                                          const int64_t *dims) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    gs_sharding *out;
    if (gs_sharding_replicate_dims(c->a, s, n, dims, &out) != GS_OK) return fail(c);
    return out;
}

const gs_sharding *gs_prop_replicate_except(gs_prop_ctx *c, const gs_sharding *s, int n,
                                            const int64_t *keep) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    gs_sharding *out;
    if (gs_sharding_replicate_except(c->a, s, n, keep, &out) != GS_OK) return fail(c);
    return out;
}

const gs_sharding *gs_prop_remove_dims(gs_prop_ctx *c, const gs_sharding *s, int n,
                                       const int64_t *dims) {
    if (!s || s->kind != GS_SHARDING_TILED || n == 0) return s;
    gs_sharding *out;
    if (gs_sharding_remove_dims(c->a, s, n, dims, &out) != GS_OK) return fail(c);
    return out;
}

const gs_sharding *gs_prop_retile(gs_prop_ctx *c, const gs_sharding *s, int n,
                                  const int64_t *dims) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    int64_t nd[GS_MAX_TILE_RANK];
    int k = 0;
    for (int i = 0; i < n; i++) nd[k++] = dims[i];
    for (int i = s->data_rank; i < s->tiles.rank; i++) nd[k++] = s->tiles.dims[i];
    if (k == 0) nd[k++] = 1;
    gs_tile_assignment t;
    if (gs_tile_reshape(c->a, &s->tiles, k, nd, &t) != GS_OK) return fail(c);
    gs_sharding *r = gs_sharding_subgroup(c->a, &t, s->n_subgroups, s->subgroups);
    if (!r) return fail(c);
    if (!r->metadata) r->metadata = s->metadata;
    return r;
}

const gs_sharding *gs_prop_replicate_all(gs_prop_ctx *c, const gs_sharding *s, int data_rank) {
    if (!s) return s;
    if (s->kind == GS_SHARDING_MANUAL) return s;
    if (s->kind != GS_SHARDING_TILED || s->n_subgroups == 0) {
        gs_sharding *r = gs_sharding_replicated(c->a);
        if (!r) return fail(c);
        r->metadata = s->kind == GS_SHARDING_TUPLE ? NULL : s->metadata;
        return r;
    }
    const gs_sharding *r = gs_prop_replicate_except(c, s, 0, NULL);
    if (!r || r->kind != GS_SHARDING_TILED || data_rank < 0 || data_rank == r->data_rank)
        return r;
    int64_t ones[GS_MAX_TILE_RANK];
    for (int i = 0; i < data_rank; i++) ones[i] = 1;
    return gs_prop_retile(c, r, data_rank, ones);
}

const gs_sharding *gs_prop_transpose(gs_prop_ctx *c, const gs_sharding *s, int n, const int *perm) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    bool identity = true;
    for (int i = 0; i < n; i++) identity = identity && perm[i] == i;
    if (identity) return s;
    gs_sharding *out;
    if (gs_sharding_transpose(c->a, s, n, perm, &out) != GS_OK) return fail(c);
    return out;
}

const gs_sharding *gs_prop_transpose_collapsed(gs_prop_ctx *c, const gs_sharding *s, int n_src,
                                               const int64_t *src_to_tgt, int n_tgt,
                                               const int64_t *tgt_to_src) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    int dr = s->data_rank;
    if (n_src != dr) return NULL;
    /* Source dims that survive, ordered by their target position; dropped dims after them. */
    int perm[GS_MAX_TILE_RANK], np = 0;
    for (int t = 0; t < n_tgt; t++) {
        int64_t src = tgt_to_src[t];
        if (src >= 0 && src < dr && src_to_tgt[src] == t) perm[np++] = (int)src;
    }
    for (int i = 0; i < dr; i++) {
        if (src_to_tgt[i] >= 0 && src_to_tgt[i] < n_tgt && tgt_to_src[src_to_tgt[i]] == i)
            continue;
        if (s->tiles.dims[i] > 1) return NULL;
        perm[np++] = i;
    }
    const gs_sharding *t = gs_prop_transpose(c, s, dr, perm);
    if (!t) return NULL;
    int64_t dims[GS_MAX_TILE_RANK];
    for (int j = 0; j < n_tgt; j++) {
        int64_t src = tgt_to_src[j];
        dims[j] = src >= 0 && src < dr ? s->tiles.dims[src] : 1;
    }
    return gs_prop_retile(c, t, n_tgt, dims);
}

const gs_sharding *gs_prop_along_dims(gs_prop_ctx *c, const gs_sharding *s, int n,
                                      const int64_t *src_dims, const int64_t *tgt_dims,
                                      int tgt_rank) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    const gs_sharding *r = gs_prop_replicate_except(c, s, n, src_dims);
    if (!r || r->kind != GS_SHARDING_TILED) return r;
    /* Kept dims in the order of their targets, then the (now untiled) others. */
    int order[GS_MAX_TILE_RANK], np = 0;
    int idx[GS_MAX_TILE_RANK];
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && tgt_dims[idx[j - 1]] > tgt_dims[idx[j]]; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    bool used[GS_MAX_TILE_RANK] = {0};
    for (int i = 0; i < n; i++) {
        int d = (int)src_dims[idx[i]];
        if (d < 0 || d >= r->data_rank || used[d]) continue;
        used[d] = true;
        order[np++] = d;
    }
    for (int i = 0; i < r->data_rank; i++)
        if (!used[i]) order[np++] = i;
    const gs_sharding *t = gs_prop_transpose(c, r, r->data_rank, order);
    if (!t) return NULL;
    int64_t dims[GS_MAX_TILE_RANK];
    for (int i = 0; i < tgt_rank; i++) dims[i] = 1;
    for (int i = 0; i < n; i++)
        if (tgt_dims[i] >= 0 && tgt_dims[i] < tgt_rank)
            dims[tgt_dims[i]] = gs_sharding_tiles_in_dim(s, (int)src_dims[i]);
    return gs_prop_retile(c, t, tgt_rank, dims);
}

const gs_sharding *gs_prop_reverse(gs_prop_ctx *c, const gs_sharding *s, int n,
                                   const int64_t *dims) {
    if (!s || s->kind != GS_SHARDING_TILED || n == 0) return s;
    bool any = false;
    for (int i = 0; i < n; i++) any = any || gs_sharding_tiles_in_dim(s, (int)dims[i]) > 1;
    if (!any) return s;
    const gs_tile_assignment *t = &s->tiles;
    int64_t *v = malloc(sizeof *v * (size_t)t->n);
    if (!v) return fail(c);
    int64_t idx[GS_MAX_TILE_RANK] = {0}, src[GS_MAX_TILE_RANK];
    for (int64_t pos = 0; pos < t->n; pos++) {
        for (int k = 0; k < t->rank; k++) src[k] = idx[k];
        for (int i = 0; i < n; i++)
            if (dims[i] >= 0 && dims[i] < s->data_rank)
                src[dims[i]] = t->dims[dims[i]] - 1 - idx[dims[i]];
        v[pos] = gs_tile_device(t, src);
        for (int k = t->rank - 1; k >= 0; k--) {
            if (++idx[k] < t->dims[k]) break;
            idx[k] = 0;
        }
    }
    gs_tile_assignment u;
    gs_status st = gs_tile_explicit(c->a, t->rank, t->dims, v, &u);
    free(v);
    if (st != GS_OK) return fail(c);
    gs_sharding *r = gs_sharding_subgroup(c->a, &u, s->n_subgroups, s->subgroups);
    if (!r) return fail(c);
    r->metadata = s->metadata;
    return r;
}

const gs_sharding *gs_prop_reshape(gs_prop_ctx *c, const gs_shape *from, const gs_shape *to,
                                   const gs_sharding *s) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    if (s->data_rank != from->rank) return NULL;
    gs_sharding *out;
    if (gs_sharding_reshape_partial(c->a, s, from->rank, from->dims, to->rank, to->dims, &out) !=
        GS_OK)
        return fail(c);
    return out;
}

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
        return fail(c);
    return out;
}

/* A tuple of n leaves copied from a non-tuple sharding (to compare with a tuple). */
static const gs_sharding *as_tuple(gs_prop_ctx *c, const gs_sharding *s, int n) {
    gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, n ? n : 1);
    if (!v) return fail(c);
    for (int i = 0; i < n; i++) v[i] = (gs_sharding *)s;
    gs_sharding *t = gs_sharding_tuple(c->a, n, v);
    return t ? t : fail(c);
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
    if (!lt) return lhs->kind == GS_SHARDING_MANUAL && leaf_tile_maximal(rhs);
    if (lhs->n_tuple != rhs->n_tuple) return false;
    int mask = 0;
    for (int i = 0; i < lhs->n_tuple; i++) {
        const gs_sharding *l = lhs->tuple[i], *r = rhs->tuple[i];
        if (l->kind == GS_SHARDING_MANUAL && leaf_tile_maximal(r)) mask |= 1;
        if (r->kind == GS_SHARDING_MANUAL && leaf_tile_maximal(l)) mask |= 2;
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
