/*
 * sharding.c — shardings: construction in XLA's canonical form (HloSharding::PartialTile and
 * Subgroup), printing XLA's text, value equality and hashing, and the per-device queries every
 * later pass asks (tile index, device at a tile, a device's offset / padded size / valid extent,
 * and device groups for collectives' replica_groups).
 *
 * Canonical form of a tiled sharding: subgroup dims of size 1 are dropped, dims of one type
 * merged, types sorted manual < unreduced < replicated, and when the last subgroup replicates
 * each replication group is sorted; a sharding whose data dims are all 1 with one kind of
 * subgroup is that kind ({replicated}, {manual}, {unreduced}); one device is {replicated}.
 * Queries cost O(rank) for iota tile assignments.
 */
#include "internal.h"
#include "base/internal.h"

#include <string.h>

/* ------------------------------------------------------------------ construction */

gs_sharding *gs_sharding_new(gs_arena *a, gs_sharding_kind k) {
    gs_sharding *s = GS_NEW(a, gs_sharding);
    if (s) s->kind = k;
    return s;
}

gs_sharding *gs_sharding_replicated(gs_arena *a) {
    return gs_sharding_new(a, GS_SHARDING_REPLICATED);
}
gs_sharding *gs_sharding_manual(gs_arena *a) { return gs_sharding_new(a, GS_SHARDING_MANUAL); }
gs_sharding *gs_sharding_unknown(gs_arena *a) { return gs_sharding_new(a, GS_SHARDING_UNKNOWN); }
gs_sharding *gs_sharding_unreduced(gs_arena *a) {
    return gs_sharding_new(a, GS_SHARDING_UNREDUCED);
}

gs_sharding *gs_sharding_maximal(gs_arena *a, int64_t device) {
    gs_sharding *s = gs_sharding_new(a, GS_SHARDING_MAXIMAL);
    if (s) s->device = device;
    return s;
}

gs_sharding *gs_sharding_tuple(gs_arena *a, int n, gs_sharding *const *elems) {
    int total = 0;
    for (int i = 0; i < n; i++)
        total += elems[i]->kind == GS_SHARDING_TUPLE ? elems[i]->n_tuple : 1;
    gs_sharding *s = gs_sharding_new(a, GS_SHARDING_TUPLE);
    gs_sharding **v = GS_NEW_ARRAY(a, gs_sharding *, total ? total : 1);
    if (!s || !v) return NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (elems[i]->kind == GS_SHARDING_TUPLE)
            for (int j = 0; j < elems[i]->n_tuple; j++) v[k++] = elems[i]->tuple[j];
        else
            v[k++] = elems[i];
    }
    s->n_tuple = total;
    s->tuple = v;
    return s;
}

const gs_sharding *gs_sharding_leaf(const gs_sharding *sh, const gs_shape *s, int leaf) {
    (void)s;
    if (sh->kind != GS_SHARDING_TUPLE) return sh;
    return leaf < sh->n_tuple ? sh->tuple[leaf] : sh;
}

/* A tiled sharding over t with the last n_sub dims subgroups of the given (canonical) types. */
static gs_sharding *make_tiled(gs_arena *a, const gs_tile_assignment *t, int n_sub,
                               const gs_subgroup_kind *types) {
    if (t->n == 1) return gs_sharding_replicated(a);
    gs_sharding *s = gs_sharding_new(a, GS_SHARDING_TILED);
    if (!s) return NULL;
    s->tiles = *t;
    s->data_rank = t->rank - n_sub;
    s->n_subgroups = n_sub;
    for (int i = 0; i < n_sub; i++) s->subgroups[i] = types[i];
    return s;
}

gs_sharding *gs_sharding_tiled(gs_arena *a, const gs_tile_assignment *t) {
    return make_tiled(a, t, 0, NULL);
}

gs_sharding *gs_sharding_partial(gs_arena *a, const gs_tile_assignment *t) {
    int k = t->rank;
    int64_t last = t->dims[k - 1];
    if (k == 1 || last == t->n) return gs_sharding_replicated(a);
    gs_tile_assignment u;
    if (last == 1) {
        if (gs_tile_reshape(a, t, k - 1, t->dims, &u) != GS_OK) return NULL;
        return make_tiled(a, &u, 0, NULL);
    }
    if (gs_tile_sort_last(a, t, &u) != GS_OK) return NULL;
    gs_subgroup_kind r = GS_SUBGROUP_REPLICATED;
    return make_tiled(a, &u, 1, &r);
}

gs_sharding *gs_sharding_subgroup(gs_arena *a, const gs_tile_assignment *t, int n_types,
                                  const gs_subgroup_kind *types) {
    if (n_types == 0) return make_tiled(a, t, 0, NULL);
    int k = t->rank, dr = k - n_types;
    GS_ASSERT(dr >= 0);
    bool same = true;
    for (int i = 1; i < n_types; i++) same = same && types[i] == types[0];
    if (same && gs_prod(t->dims, dr) == 1) {
        switch (types[0]) {
        case GS_SUBGROUP_MANUAL: return gs_sharding_manual(a);
        case GS_SUBGROUP_REPLICATED: return gs_sharding_replicated(a);
        case GS_SUBGROUP_UNREDUCED: return gs_sharding_unreduced(a);
        }
    }
    /* Sort subgroup dims by type (dropping size-1 ones to the end) and merge each type. */
    int perm[GS_MAX_TILE_RANK], np = 0;
    int64_t mdims[GS_MAX_TILE_RANK];
    int nm = dr;
    for (int i = 0; i < dr; i++) {
        perm[np++] = i;
        mdims[i] = t->dims[i];
    }
    gs_subgroup_kind mt[3];
    int nt = 0;
    for (int ty = GS_SUBGROUP_MANUAL; ty <= GS_SUBGROUP_REPLICATED; ty++) {
        int64_t size = 1;
        for (int i = 0; i < n_types; i++) {
            if ((int)types[i] != ty || t->dims[dr + i] == 1) continue;
            perm[np++] = dr + i;
            size *= t->dims[dr + i];
        }
        if (size > 1) {
            mdims[nm++] = size;
            mt[nt++] = (gs_subgroup_kind)ty;
        }
    }
    for (int i = 0; i < n_types; i++)
        if (t->dims[dr + i] == 1) perm[np++] = dr + i;
    if (nm == 0) return gs_sharding_replicated(a);
    bool identity = true;
    for (int i = 0; i < k; i++) identity = identity && perm[i] == i;
    gs_tile_assignment u = *t, w;
    if (!identity && gs_tile_transpose(a, t, perm, &u) != GS_OK) return NULL;
    if (gs_tile_reshape(a, &u, nm, mdims, &w) != GS_OK) return NULL;
    if (nt == 1 && mt[0] == GS_SUBGROUP_REPLICATED) return gs_sharding_partial(a, &w);
    if (nt == 1 && mt[0] == GS_SUBGROUP_MANUAL && w.n == mdims[nm - 1])
        return gs_sharding_manual(a);
    /* One unreduced subgroup over untiled data is {unreduced} (XLA checks this only before
     * dropping size-1 subgroups; checking after keeps printing a fixed point). */
    if (nt == 1 && mt[0] == GS_SUBGROUP_UNREDUCED && w.n == mdims[nm - 1])
        return gs_sharding_unreduced(a);
    if (nt > 0 && mt[nt - 1] == GS_SUBGROUP_REPLICATED) {
        gs_tile_assignment v;
        if (gs_tile_sort_last(a, &w, &v) != GS_OK) return NULL;
        return make_tiled(a, &v, nt, mt);
    }
    return make_tiled(a, &w, nt, mt);
}

gs_sharding *gs_sharding_with_metadata(gs_arena *a, const gs_sharding *s, const char *metadata) {
    gs_sharding *c = GS_NEW(a, gs_sharding);
    if (!c) return NULL;
    *c = *s;
    c->metadata = metadata;
    return c;
}

gs_sharding *gs_sharding_with_group(gs_arena *a, const gs_sharding *s, gs_shard_group_kind g,
                                    int64_t id) {
    gs_sharding *c = GS_NEW(a, gs_sharding);
    if (!c) return NULL;
    *c = *s;
    c->group = g;
    c->group_id = g == GS_SHARD_GROUP_NONE ? 0 : id;
    return c;
}

/* ------------------------------------------------------------------ text */

static const char *subgroup_name(gs_subgroup_kind k) {
    switch (k) {
    case GS_SUBGROUP_MANUAL: return "manual";
    case GS_SUBGROUP_UNREDUCED: return "unreduced";
    case GS_SUBGROUP_REPLICATED: return "replicated";
    }
    return "?";
}

/* ` shard_as N` / ` shard_like N` then ` metadata={...}`, as XLA's Print ends a leaf. */
static void print_tail(gs_sb *sb, const gs_sharding *s) {
    if (s->group == GS_SHARD_GROUP_AS) gs_sb_printf(sb, " shard_as %lld", (long long)s->group_id);
    if (s->group == GS_SHARD_GROUP_LIKE)
        gs_sb_printf(sb, " shard_like %lld", (long long)s->group_id);
    if (s->metadata) gs_sb_printf(sb, " metadata={%s}", s->metadata);
}

void gs_sharding_print(gs_sb *sb, const gs_sharding *s) {
    if (s->kind == GS_SHARDING_TUPLE) {
        gs_sb_putc(sb, '{');
        for (int i = 0; i < s->n_tuple; i++) {
            if (i) gs_sb_puts(sb, ", ");
            gs_sharding_print(sb, s->tuple[i]);
        }
        gs_sb_putc(sb, '}');
        return;
    }
    if (s->named) {
        gs_named_print(sb, s->named, s->metadata);
        return;
    }
    switch (s->kind) {
    case GS_SHARDING_REPLICATED: gs_sb_puts(sb, "{replicated"); break;
    case GS_SHARDING_MANUAL: gs_sb_puts(sb, "{manual"); break;
    case GS_SHARDING_UNKNOWN: gs_sb_puts(sb, "{unknown"); break;
    case GS_SHARDING_UNREDUCED: gs_sb_puts(sb, "{unreduced"); break;
    case GS_SHARDING_MAXIMAL: gs_sb_printf(sb, "{maximal device=%lld", (long long)s->device); break;
    case GS_SHARDING_TILED:
        gs_sb_puts(sb, "{devices=");
        gs_tile_print(sb, &s->tiles);
        if (s->n_subgroups == 1 && s->subgroups[0] == GS_SUBGROUP_REPLICATED) {
            gs_sb_puts(sb, " last_tile_dim_replicate");
        } else if (s->n_subgroups > 0) {
            gs_sb_puts(sb, " last_tile_dims={");
            for (int i = 0; i < s->n_subgroups; i++)
                gs_sb_printf(sb, "%s%s", i ? ", " : "", subgroup_name(s->subgroups[i]));
            gs_sb_putc(sb, '}');
        }
        break;
    case GS_SHARDING_TUPLE: break;
    }
    print_tail(sb, s);
    gs_sb_putc(sb, '}');
}

char *gs_sharding_to_string(gs_arena *a, const gs_sharding *s) {
    gs_sb sb = {0};
    gs_sharding_print(&sb, s);
    char *r = sb.failed ? NULL : gs_arena_strdup(a, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return r;
}

/* ------------------------------------------------------------------ equality */

bool gs_sharding_equal(const gs_sharding *x, const gs_sharding *y) {
    if (x == y) return true;
    if (x->kind != y->kind) return false;
    if (x->kind == GS_SHARDING_TUPLE) {
        if (x->n_tuple != y->n_tuple) return false;
        for (int i = 0; i < x->n_tuple; i++)
            if (!gs_sharding_equal(x->tuple[i], y->tuple[i])) return false;
        return true;
    }
    if (x->group != y->group || x->group_id != y->group_id) return false;
    if (x->kind == GS_SHARDING_MAXIMAL) return x->device == y->device;
    if (x->kind != GS_SHARDING_TILED) return true;
    if (x->data_rank != y->data_rank || x->n_subgroups != y->n_subgroups) return false;
    for (int i = 0; i < x->n_subgroups; i++)
        if (x->subgroups[i] != y->subgroups[i]) return false;
    return gs_tile_equal(&x->tiles, &y->tiles);
}

uint64_t gs_sharding_hash(const gs_sharding *s) {
    uint64_t h = gs_hash_bytes(&s->kind, sizeof s->kind, 0x5348);
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++) {
            uint64_t e = gs_sharding_hash(s->tuple[i]);
            h = gs_hash_bytes(&e, sizeof e, h);
        }
        return h;
    }
    int64_t g[2] = {s->group, s->group_id};
    h = gs_hash_bytes(g, sizeof g, h);
    if (s->kind == GS_SHARDING_MAXIMAL) return gs_hash_bytes(&s->device, sizeof s->device, h);
    if (s->kind != GS_SHARDING_TILED) return h;
    int sub[4] = {s->data_rank, s->n_subgroups, 0, 0};
    for (int i = 0; i < s->n_subgroups && i < 2; i++) sub[2 + i] = (int)s->subgroups[i] + 1;
    h = gs_hash_bytes(sub, sizeof sub, h);
    uint64_t t = gs_tile_hash(&s->tiles);
    return gs_hash_bytes(&t, sizeof t, h);
}

/* ------------------------------------------------------------------ queries */

bool gs_sharding_is_tiled(const gs_sharding *s) { return s->kind == GS_SHARDING_TILED; }

bool gs_sharding_is_tile_maximal(const gs_sharding *s) {
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (!gs_sharding_is_tile_maximal(s->tuple[i])) return false;
        return true;
    }
    return s->kind == GS_SHARDING_REPLICATED || s->kind == GS_SHARDING_MAXIMAL;
}

bool gs_sharding_is_replicated(const gs_sharding *s) {
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (!gs_sharding_is_replicated(s->tuple[i])) return false;
        return true;
    }
    return s->kind == GS_SHARDING_REPLICATED;
}

bool gs_sharding_is_manual(const gs_sharding *s) {
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (!gs_sharding_is_manual(s->tuple[i])) return false;
        return true;
    }
    return s->kind == GS_SHARDING_MANUAL;
}

static int subgroup_dim(const gs_sharding *s, gs_subgroup_kind k) {
    if (s->kind != GS_SHARDING_TILED) return -1;
    for (int i = 0; i < s->n_subgroups; i++)
        if (s->subgroups[i] == k) return s->data_rank + i;
    return -1;
}

int gs_sharding_replication_dim(const gs_sharding *s) {
    return subgroup_dim(s, GS_SUBGROUP_REPLICATED);
}

int gs_sharding_manual_dim(const gs_sharding *s) { return subgroup_dim(s, GS_SUBGROUP_MANUAL); }

int64_t gs_sharding_tiles_in_dim(const gs_sharding *s, int dim) {
    if (s->kind != GS_SHARDING_TILED || dim < 0 || dim >= s->data_rank) return 1;
    return s->tiles.dims[dim];
}

int64_t gs_sharding_num_tiles(const gs_sharding *s) {
    if (s->kind != GS_SHARDING_TILED) return 1;
    return gs_prod(s->tiles.dims, s->data_rank);
}

int64_t gs_sharding_num_devices(const gs_sharding *s) {
    if (s->kind == GS_SHARDING_TILED) return s->tiles.n;
    return s->kind == GS_SHARDING_MAXIMAL ? 1 : 0;
}

gs_status gs_sharding_check_devices(const gs_sharding *s, const gs_instr *in, int64_t n,
                                    gs_diags *d) {
    if (!s) return GS_OK;
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (gs_sharding_check_devices(s->tuple[i], in, n, d) != GS_OK) return GS_ERR;
        return GS_OK;
    }
    if (s->kind == GS_SHARDING_TILED && s->tiles.n != n)
        return gs_error(d, in->span,
                        "the sharding of %%%s spans %lld devices, but the program is partitioned "
                        "for %lld devices",
                        in->name, (long long)s->tiles.n, (long long)n);
    /* Every device 0..n-1 must appear (explicit lists may name others). */
    for (int64_t k = 0; s->kind == GS_SHARDING_TILED && !s->tiles.iota && k < s->tiles.n; k++)
        if (gs_tile_device_at(&s->tiles, k) >= n)
            return gs_error(d, in->span,
                            "the sharding of %%%s names device %lld, but the program is "
                            "partitioned for %lld devices",
                            in->name, (long long)gs_tile_device_at(&s->tiles, k), (long long)n);
    if (s->kind == GS_SHARDING_MAXIMAL && (s->device < 0 || s->device >= n))
        return gs_error(d, in->span,
                        "the sharding of %%%s puts it on device %lld, but the program is "
                        "partitioned for %lld devices",
                        in->name, (long long)s->device, (long long)n);
    return GS_OK;
}

/* Full tile index (every tile dim) of device d, or false. */
static bool full_index(const gs_sharding *s, int64_t device, int64_t *index) {
    int64_t pos = gs_tile_position(&s->tiles, device);
    if (pos < 0) return false;
    for (int i = s->tiles.rank - 1; i >= 0; i--) {
        index[i] = pos % s->tiles.dims[i];
        pos /= s->tiles.dims[i];
    }
    return true;
}

bool gs_sharding_tile_index(const gs_sharding *s, int64_t device, int64_t *index) {
    if (s->kind == GS_SHARDING_TUPLE) return false;
    if (s->kind != GS_SHARDING_TILED) return s->kind != GS_SHARDING_MAXIMAL || device == s->device;
    int64_t full[GS_MAX_TILE_RANK];
    if (!full_index(s, device, full)) return false;
    memcpy(index, full, sizeof *index * (size_t)s->data_rank);
    return true;
}

int64_t gs_sharding_device_for_tile(const gs_sharding *s, int n, const int64_t *index) {
    if (s->kind == GS_SHARDING_MAXIMAL) return s->device;
    if (s->kind != GS_SHARDING_TILED) return -1;
    if (n != s->data_rank && n != s->tiles.rank) return -1;
    int64_t pos = 0;
    for (int i = 0; i < s->tiles.rank; i++) {
        int64_t v = i < n ? index[i] : 0;
        if (v < 0 || v >= s->tiles.dims[i]) return -1;
        pos = pos * s->tiles.dims[i] + v;
    }
    return gs_tile_device_at(&s->tiles, pos);
}

bool gs_sharding_device_shard(const gs_sharding *s, int rank, const int64_t *dims, int64_t device,
                              gs_shard_dim *out) {
    if (s->kind == GS_SHARDING_TUPLE) return false;
    if (s->kind != GS_SHARDING_TILED) {
        if (s->kind == GS_SHARDING_MAXIMAL && device != s->device) return false;
        for (int i = 0; i < rank; i++) out[i] = (gs_shard_dim){0, dims[i], dims[i]};
        return true;
    }
    if (rank != s->data_rank) return false;
    int64_t idx[GS_MAX_TILE_RANK];
    if (!full_index(s, device, idx)) return false;
    for (int i = 0; i < rank; i++) {
        int64_t size = gs_ceil_div(dims[i], s->tiles.dims[i]);
        int64_t lo = idx[i] * size, hi = lo + size;
        if (lo > dims[i]) lo = dims[i];
        if (hi > dims[i]) hi = dims[i];
        out[i] = (gs_shard_dim){lo, size, hi - lo};
    }
    return true;
}

void gs_sharding_shard_dims(const gs_sharding *s, int rank, const int64_t *dims, int64_t *out) {
    for (int i = 0; i < rank; i++)
        out[i] = s->kind == GS_SHARDING_TILED && i < s->data_rank
                     ? gs_ceil_div(dims[i], s->tiles.dims[i])
                     : dims[i];
}

/* ------------------------------------------------------------------ device groups */

/* Replica groups from a tile assignment viewed as [n_groups, group_size]: iota form when the
 * assignment is iota, explicit lists otherwise. */
static gs_status groups_from_tiles(gs_arena *a, const gs_tile_assignment *t, int64_t n_groups,
                                   gs_replica_groups **out) {
    gs_replica_groups *g = GS_NEW(a, gs_replica_groups);
    if (!g) return GS_ERR;
    int64_t size = t->n / n_groups;
    g->n_groups = (int)n_groups;
    g->group_size = (int)size;
    if (t->iota) {
        g->is_iota = true;
        g->n_iota_dims = t->n_reshape;
        g->iota_dims = gs_arena_memdup(a, t->reshape, sizeof(int64_t) * (size_t)t->n_reshape);
        if (!g->iota_dims) return GS_ERR;
        if (t->n_reshape > 1) {
            int *p = gs_arena_memdup(a, t->perm, sizeof(int) * (size_t)t->n_reshape);
            if (!p) return GS_ERR;
            g->perm = p;
        }
    } else {
        g->sizes = GS_NEW_ARRAY(a, int, n_groups);
        g->groups = GS_NEW_ARRAY(a, int64_t *, n_groups);
        if (!g->sizes || !g->groups) return GS_ERR;
        for (int64_t i = 0; i < n_groups; i++) {
            g->sizes[i] = (int)size;
            g->groups[i] = GS_NEW_ARRAY(a, int64_t, size);
            if (!g->groups[i]) return GS_ERR;
            for (int64_t j = 0; j < size; j++) g->groups[i][j] = gs_tile_device_at(t, i * size + j);
        }
    }
    *out = g;
    return GS_OK;
}

gs_status gs_sharding_groups_along(gs_arena *a, const gs_sharding *s, int n, const int *dims,
                                   gs_replica_groups **out) {
    GS_ASSERT(s->kind == GS_SHARDING_TILED);
    const gs_tile_assignment *t = &s->tiles;
    int perm[GS_MAX_TILE_RANK], np = 0;
    bool in[GS_MAX_TILE_RANK] = {0};
    for (int i = 0; i < n; i++) in[dims[i]] = true;
    int64_t n_groups = 1;
    for (int i = 0; i < t->rank; i++)
        if (!in[i]) {
            perm[np++] = i;
            n_groups *= t->dims[i];
        }
    for (int i = 0; i < n; i++) perm[np++] = dims[i];
    gs_tile_assignment u;
    if (gs_tile_transpose(a, t, perm, &u) != GS_OK) return GS_ERR;
    return groups_from_tiles(a, &u, n_groups, out);
}

gs_status gs_sharding_group_by_dims(gs_arena *a, const gs_sharding *s, int n, const int *dims,
                                    gs_replica_groups **out) {
    GS_ASSERT(s->kind == GS_SHARDING_TILED);
    /* Groups enumerate `dims` (in the order given); members vary over the other dims. */
    int rest[GS_MAX_TILE_RANK], nr = 0;
    bool in[GS_MAX_TILE_RANK] = {0};
    for (int i = 0; i < n; i++) in[dims[i]] = true;
    for (int i = 0; i < s->tiles.rank; i++)
        if (!in[i]) rest[nr++] = i;
    int perm[GS_MAX_TILE_RANK], np = 0;
    int64_t n_groups = 1;
    for (int i = 0; i < n; i++) {
        perm[np++] = dims[i];
        n_groups *= s->tiles.dims[dims[i]];
    }
    for (int i = 0; i < nr; i++) perm[np++] = rest[i];
    gs_tile_assignment u;
    if (gs_tile_transpose(a, &s->tiles, perm, &u) != GS_OK) return GS_ERR;
    return groups_from_tiles(a, &u, n_groups, out);
}

gs_status gs_sharding_replica_groups(gs_arena *a, const gs_sharding *s, gs_replica_groups **out) {
    GS_ASSERT(s->kind == GS_SHARDING_TILED);
    int r = gs_sharding_replication_dim(s);
    return gs_sharding_groups_along(a, s, r >= 0 ? 1 : 0, &r, out);
}
