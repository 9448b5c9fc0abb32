/*
 * query.c — what propagation asks of shapes and shardings, with XLA's hlo_sharding_util and
 * ShapeUtil semantics: leaf counts and compatibility of shapes, the kind queries (spatially
 * partitioned, tile-maximal, manual, replicated, partial, more specific), and deep copies of
 * shardings into the module's arena.
 */
#include "internal.h"

#include <string.h>

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

bool gs_prop_spatial(const gs_sharding *s) {
    if (!s) return false;
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (gs_prop_spatial(s->tuple[i])) return true;
        return false;
    }
    return !gs_sharding_is_tile_maximal(s) || s->kind == GS_SHARDING_REPLICATED;
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
