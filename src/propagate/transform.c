/*
 * transform.c — the sharding transforms propagation needs beyond src/sharding/'s, with XLA's
 * hlo_sharding_util semantics: tuple sub-shardings, replicating or removing dims, transposes
 * that drop or add dims, carrying the tiles of some dims to other dims while replicating the
 * rest, reversal and reshape.
 *
 * Everything works on tile assignments through reshape and transpose, so iota assignments stay
 * iota and cost O(rank); only reversal materialises device lists.
 */
#include "internal.h"

#include <stdlib.h>

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
            return r ? r : gs_prop_oom(c);
        }
        return s->tuple[off];
    }
    int n = gs_prop_leaf_count(e);
    if (n == 0) {
        gs_sharding *r = gs_sharding_replicated(c->a);
        return r ? gs_sharding_tuple(c->a, 1, &r) : gs_prop_oom(c);
    }
    if (off + n > s->n_tuple) return s;
    gs_sharding *t = gs_sharding_tuple(c->a, n, s->tuple + off);
    return t ? t : gs_prop_oom(c);
}

const gs_sharding *gs_prop_single_tuple(gs_prop_ctx *c, const gs_shape *shape,
                                        const gs_sharding *leaf) {
    if (!leaf || shape->type != GS_TUPLE) return leaf;
    if (leaf->kind == GS_SHARDING_TUPLE) return leaf;
    int n = gs_prop_required_leaves(shape);
    gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, n);
    if (!v) return gs_prop_oom(c);
    for (int i = 0; i < n; i++) v[i] = (gs_sharding *)leaf;
    gs_sharding *t = gs_sharding_tuple(c->a, n, v);
    return t ? t : gs_prop_oom(c);
}

const gs_sharding *gs_prop_with_sub(gs_prop_ctx *c, const gs_sharding *cur, const gs_shape *shape,
                                    int index, const gs_sharding *sub) {
    if (shape->type != GS_TUPLE) return sub;
    int n = gs_prop_required_leaves(shape);
    gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, n);
    gs_sharding *rep = gs_sharding_replicated(c->a);
    if (!v || !rep) return gs_prop_oom(c);
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
    return t ? t : gs_prop_oom(c);
}

/* ------------------------------------------------------------------ simple transforms */

const gs_sharding *gs_prop_replicate_dims(gs_prop_ctx *c, const gs_sharding *s, int n,
                                          const int64_t *dims) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    gs_sharding *out;
    if (gs_sharding_replicate_dims(c->a, s, n, dims, &out) != GS_OK) return gs_prop_oom(c);
    return out;
}

const gs_sharding *gs_prop_replicate_except(gs_prop_ctx *c, const gs_sharding *s, int n,
                                            const int64_t *keep) {
    if (!s || s->kind != GS_SHARDING_TILED) return s;
    gs_sharding *out;
    if (gs_sharding_replicate_except(c->a, s, n, keep, &out) != GS_OK) return gs_prop_oom(c);
    return out;
}

const gs_sharding *gs_prop_remove_dims(gs_prop_ctx *c, const gs_sharding *s, int n,
                                       const int64_t *dims) {
    if (!s || s->kind != GS_SHARDING_TILED || n == 0) return s;
    gs_sharding *out;
    if (gs_sharding_remove_dims(c->a, s, n, dims, &out) != GS_OK) return gs_prop_oom(c);
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
    if (gs_tile_reshape(c->a, &s->tiles, k, nd, &t) != GS_OK) return gs_prop_oom(c);
    gs_sharding *r = gs_sharding_subgroup(c->a, &t, s->n_subgroups, s->subgroups);
    if (!r) return gs_prop_oom(c);
    if (!r->metadata) r->metadata = s->metadata;
    return r;
}

const gs_sharding *gs_prop_replicate_all(gs_prop_ctx *c, const gs_sharding *s, int data_rank) {
    if (!s) return s;
    if (s->kind == GS_SHARDING_MANUAL) return s;
    if (s->kind != GS_SHARDING_TILED || s->n_subgroups == 0) {
        gs_sharding *r = gs_sharding_replicated(c->a);
        if (!r) return gs_prop_oom(c);
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
    if (gs_sharding_transpose(c->a, s, n, perm, &out) != GS_OK) return gs_prop_oom(c);
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
    if (!v) return gs_prop_oom(c);
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
    if (st != GS_OK) return gs_prop_oom(c);
    gs_sharding *r = gs_sharding_subgroup(c->a, &u, s->n_subgroups, s->subgroups);
    if (!r) return gs_prop_oom(c);
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
        return gs_prop_oom(c);
    return out;
}
