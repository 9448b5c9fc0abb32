/*
 * transform.c — shardings of related shapes, with XLA's hlo_sharding_util semantics: transpose,
 * reshape (split and merge of dims; partial carry-over), partial replication along dims, removal
 * and insertion of dims (reduce, broadcast), merging two compatible partial shardings into one
 * that refines both, and the "more specific" order propagation climbs.
 *
 * All of them work on tile assignments through reshape and transpose, so iota assignments stay
 * iota and cost O(rank); only the second method of merge (arbitrary device orders) materialises.
 */
#include "internal.h"
#include "base/internal.h"

#include <stdlib.h>
#include <string.h>

static gs_status keep(const gs_sharding *s, gs_sharding **out) {
    *out = (gs_sharding *)s;
    return GS_OK;
}

static gs_status done(gs_sharding *s, const char *metadata, gs_sharding **out) {
    if (!s) return GS_ERR;
    if (metadata && !s->metadata && s->kind != GS_SHARDING_TUPLE) s->metadata = metadata;
    *out = s;
    return GS_OK;
}

/* Non-tiled leaves pass through every transform unchanged. */
static bool passes_through(const gs_sharding *s) { return s->kind != GS_SHARDING_TILED; }

/* ------------------------------------------------------------------ transpose */

gs_status gs_sharding_transpose(gs_arena *a, const gs_sharding *s, int n, const int *perm,
                                gs_sharding **out) {
    if (passes_through(s)) return keep(s, out);
    const gs_tile_assignment *t = &s->tiles;
    int full[GS_MAX_TILE_RANK];
    GS_ASSERT(n == s->data_rank || n == t->rank);
    for (int i = 0; i < t->rank; i++) full[i] = i < n ? perm[i] : i;
    gs_tile_assignment u;
    if (gs_tile_transpose(a, t, full, &u) != GS_OK) return GS_ERR;
    gs_subgroup_kind types[GS_MAX_TILE_RANK];
    for (int i = s->data_rank; i < t->rank; i++)
        types[i - s->data_rank] = s->subgroups[full[i] - s->data_rank];
    return done(gs_sharding_subgroup(a, &u, s->n_subgroups, types), s->metadata, out);
}

/* ------------------------------------------------------------------ partial replication */

gs_status gs_sharding_replicate_dims(gs_arena *a, const gs_sharding *s, int n, const int64_t *dims,
                                     gs_sharding **out) {
    if (passes_through(s)) return keep(s, out);
    const gs_tile_assignment *t = &s->tiles;
    int dr = s->data_rank;
    bool rep[GS_MAX_TILE_RANK] = {0};
    int64_t group = 1;
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] >= dr || rep[dims[i]]) continue;
        rep[dims[i]] = true;
        group *= t->dims[dims[i]];
    }
    if (group == 1) return keep(s, out);
    bool only_rep =
        s->n_subgroups == 0 || (s->n_subgroups == 1 && s->subgroups[0] == GS_SUBGROUP_REPLICATED);
    if (group == gs_sharding_num_tiles(s) && only_rep)
        return done(gs_sharding_replicated(a), s->metadata, out);
    /* Kept data dims first, replicated ones after them, subgroups last; then the replicated
     * dims become one new replication subgroup before the existing ones. */
    int perm[GS_MAX_TILE_RANK], np = 0;
    for (int i = 0; i < dr; i++)
        if (!rep[i]) perm[np++] = i;
    for (int i = 0; i < dr; i++)
        if (rep[i]) perm[np++] = i;
    for (int i = dr; i < t->rank; i++) perm[np++] = i;
    gs_tile_assignment u, w;
    if (gs_tile_transpose(a, t, perm, &u) != GS_OK) return GS_ERR;
    int64_t nd[GS_MAX_TILE_RANK];
    int k = 0;
    for (int i = 0; i < dr; i++) nd[k++] = rep[i] ? 1 : t->dims[i];
    nd[k++] = group;
    for (int i = dr; i < t->rank; i++) nd[k++] = t->dims[i];
    if (gs_tile_reshape(a, &u, k, nd, &w) != GS_OK) return GS_ERR;
    gs_subgroup_kind types[4];
    types[0] = GS_SUBGROUP_REPLICATED;
    for (int i = 0; i < s->n_subgroups; i++) types[1 + i] = s->subgroups[i];
    return done(gs_sharding_subgroup(a, &w, 1 + s->n_subgroups, types), s->metadata, out);
}

gs_status gs_sharding_replicate_except(gs_arena *a, const gs_sharding *s, int n,
                                       const int64_t *keep_dims, gs_sharding **out) {
    if (passes_through(s)) return keep(s, out);
    int64_t dims[GS_MAX_TILE_RANK];
    int m = 0;
    for (int i = 0; i < s->data_rank; i++) {
        bool kept = false;
        for (int j = 0; j < n; j++) kept = kept || keep_dims[j] == i;
        if (!kept) dims[m++] = i;
    }
    return gs_sharding_replicate_dims(a, s, m, dims, out);
}

/* ------------------------------------------------------------------ removing / adding dims */

gs_status gs_sharding_remove_dims(gs_arena *a, const gs_sharding *s, int n, const int64_t *dims,
                                  gs_sharding **out) {
    if (passes_through(s) || n == 0) return keep(s, out);
    const gs_tile_assignment *t = &s->tiles;
    int64_t nd[GS_MAX_TILE_RANK];
    int k = 0, removed = 0;
    for (int i = 0; i < t->rank; i++) {
        bool drop = false;
        for (int j = 0; j < n; j++) drop = drop || dims[j] == i;
        if (drop) {
            GS_ASSERT(t->dims[i] == 1);
            removed++;
        } else {
            nd[k++] = t->dims[i];
        }
    }
    if (k == 0) nd[k++] = 1;
    gs_tile_assignment u;
    if (gs_tile_reshape(a, t, k, nd, &u) != GS_OK) return GS_ERR;
    if (s->data_rank - removed == 0 && s->n_subgroups == 0) {
        /* Every data dim removed and nothing else: one tile left. */
        return done(gs_sharding_replicated(a), s->metadata, out);
    }
    return done(gs_sharding_subgroup(a, &u, s->n_subgroups, s->subgroups), s->metadata, out);
}

gs_status gs_sharding_reduce_dims(gs_arena *a, const gs_sharding *s, int n, const int64_t *dims,
                                  gs_sharding **out) {
    gs_sharding *r;
    if (gs_sharding_replicate_dims(a, s, n, dims, &r) != GS_OK) return GS_ERR;
    if (passes_through(r)) return keep(r, out);
    return gs_sharding_remove_dims(a, r, n, dims, out);
}

gs_status gs_sharding_broadcast(gs_arena *a, const gs_sharding *s, int result_rank, int n,
                                const int64_t *dims, gs_sharding **out) {
    if (passes_through(s)) return keep(s, out);
    GS_ASSERT(n == s->data_rank);
    const gs_tile_assignment *t = &s->tiles;
    /* Order the operand dims by their result position first, so the reshape below keeps each
     * tile's devices (the dimensions attribute is normally sorted already). */
    int order[GS_MAX_TILE_RANK];
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && dims[order[j - 1]] > dims[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    const gs_sharding *src = s;
    gs_sharding *sorted;
    bool identity = true;
    for (int i = 0; i < n; i++) identity = identity && order[i] == i;
    if (!identity) {
        if (gs_sharding_transpose(a, s, n, order, &sorted) != GS_OK) return GS_ERR;
        src = sorted;
        if (passes_through(src)) return keep(src, out);
        t = &src->tiles;
    }
    int64_t nd[GS_MAX_TILE_RANK];
    int k = 0;
    for (int i = 0; i < result_rank; i++) {
        int64_t v = 1;
        for (int j = 0; j < n; j++)
            if (dims[order[j]] == i) v = t->dims[j];
        nd[k++] = v;
    }
    for (int i = src->data_rank; i < t->rank; i++) nd[k++] = t->dims[i];
    gs_tile_assignment u;
    if (gs_tile_reshape(a, t, k, nd, &u) != GS_OK) return GS_ERR;
    return done(gs_sharding_subgroup(a, &u, src->n_subgroups, src->subgroups), s->metadata, out);
}

/* ------------------------------------------------------------------ reshape */

/* A small stack of int64 (top = last). */
typedef struct stack {
    int64_t v[2 * GS_MAX_TILE_RANK + 8]; /* entries, bottom first */
    int n;                               /* entries in use */
} stack;

static void push(stack *s, int64_t x) {
    GS_ASSERT(s->n < (int)(sizeof s->v / sizeof s->v[0]));
    s->v[s->n++] = x;
}
static int64_t top(const stack *s) { return s->v[s->n - 1]; }
static int64_t pop(stack *s) { return s->v[--s->n]; }
static int64_t stack_prod(const stack *s) { return gs_prod(s->v, s->n); }

/* XLA's ReshapeSharding walk: matches the source dims (with their tile counts) against the
 * destination dims from the major end, splitting and merging, and writes the destination's tile
 * counts to target (returns how many, or -1 when the tiles cannot follow the reshape). Source
 * dims whose tiles must be replicated first go to to_replicate (*n_rep of them). */
static int reshape_target(const gs_sharding *s, int src_rank, const int64_t *src_dims, int dst_rank,
                          const int64_t *dst_dims, int64_t *target, int64_t *to_replicate,
                          int *n_rep) {
    stack src = {.n = 0}, dst = {.n = 0}, tiles = {.n = 0};
    for (int i = src_rank - 1; i >= 0; i--) {
        push(&src, src_dims[i]);
        push(&tiles, s->tiles.dims[i]);
    }
    for (int i = dst_rank - 1; i >= 0; i--) push(&dst, dst_dims[i]);
    int nt = 0;
    int src_index = -1;
    *n_rep = 0;
    bool inplace = false;
#define APPEND(x)                                                                                  \
    do {                                                                                           \
        if (inplace)                                                                               \
            target[nt - 1] *= (x);                                                                 \
        else                                                                                       \
            target[nt++] = (x);                                                                    \
        inplace = false;                                                                           \
    } while (0)
#define SRC_PUSH(size, parts)                                                                      \
    do {                                                                                           \
        push(&src, size);                                                                          \
        push(&tiles, parts);                                                                       \
        src_index--;                                                                               \
    } while (0)
#define SRC_POP()                                                                                  \
    do {                                                                                           \
        pop(&src);                                                                                 \
        pop(&tiles);                                                                               \
        src_index++;                                                                               \
    } while (0)
    while (src.n > 0 && dst.n > 0 && stack_prod(&tiles) != 1) {
        int64_t product = 1;
        while (tiles.n > 0 && top(&tiles) == 1) {
            product *= top(&src);
            SRC_POP();
        }
        while (dst.n > 0 && top(&dst) > 1 && product % top(&dst) == 0) {
            product /= pop(&dst);
            APPEND(1);
        }
        if (product != 1) SRC_PUSH(product, 1);
        if (src.n == 0 || dst.n == 0) break;
        int64_t s_size = top(&src), s_parts = top(&tiles);
        SRC_POP();
        int64_t t_size = pop(&dst);
        if (s_size == t_size) {
            /* Merged as the minor part of a target dim, a padded dim keeps only the parts that
             * divide it (the rest replicate); alone it keeps them all. */
            int64_t parts = inplace && s_size % s_parts != 0 ? gs_gcd64(s_size, s_parts) : s_parts;
            APPEND(parts);
        } else if (t_size == 1) {
            APPEND(1);
            SRC_PUSH(s_size, s_parts);
        } else if (s_size == 1) {
            push(&dst, t_size);
            if (s_parts > 1) to_replicate[(*n_rep)++] = src_index;
        } else if (s_parts == 1) {
            if (src.n > 0 && top(&tiles) == 1)
                src.v[src.n - 1] *= s_size;
            else
                break;
        } else if (s_size % s_parts != 0) {
            return -1;
        } else {
            int64_t g = gs_gcd64(s_parts, t_size);
            if (g == 1) break;
            SRC_PUSH(s_size / g, s_parts / g);
            push(&dst, t_size / g);
            APPEND(g);
            inplace = true;
        }
        if (nt > GS_MAX_TILE_RANK) return -1;
    }
#undef APPEND
#undef SRC_PUSH
#undef SRC_POP
    return nt;
}

gs_status gs_sharding_reshape(gs_arena *a, const gs_sharding *s, int src_rank,
                              const int64_t *src_dims, int dst_rank, const int64_t *dst_dims,
                              gs_sharding **out) {
    if (passes_through(s)) return keep(s, out);
    GS_ASSERT(s->data_rank == src_rank);
    *out = NULL;
    int64_t target[GS_MAX_TILE_RANK + 4], to_replicate[GS_MAX_TILE_RANK];
    int n_rep;
    int nt =
        reshape_target(s, src_rank, src_dims, dst_rank, dst_dims, target, to_replicate, &n_rep);
    if (nt < 0) return GS_OK;
    if (gs_prod(target, nt) == 1) return GS_OK;
    while (nt < dst_rank) target[nt++] = 1;
    const gs_sharding *sh = s;
    gs_sharding *replicated;
    if (n_rep > 0) {
        if (gs_sharding_replicate_dims(a, s, n_rep, to_replicate, &replicated) != GS_OK)
            return GS_ERR;
        sh = replicated;
        if (passes_through(sh)) return keep(sh, out);
    }
    gs_subgroup_kind types[4];
    int n_types = sh->n_subgroups;
    memcpy(types, sh->subgroups, sizeof types[0] * (size_t)n_types);
    int rep_slot = -1;
    for (int i = sh->data_rank; i < sh->tiles.rank; i++) {
        bool is_rep = sh->subgroups[i - sh->data_rank] == GS_SUBGROUP_REPLICATED;
        if (is_rep) rep_slot = nt;
        target[nt++] = is_rep ? 1 : sh->tiles.dims[i];
    }
    int64_t tp = gs_prod(target, nt);
    GS_ASSERT(sh->tiles.n % tp == 0);
    int64_t quot = sh->tiles.n / tp;
    if (rep_slot >= 0) {
        target[rep_slot] = quot;
    } else if (quot > 1) {
        target[nt++] = quot;
        types[n_types++] = GS_SUBGROUP_REPLICATED;
    }
    gs_tile_assignment u;
    if (gs_tile_reshape(a, &sh->tiles, nt, target, &u) != GS_OK) return GS_ERR;
    return done(gs_sharding_subgroup(a, &u, n_types, types), s->metadata, out);
}

gs_status gs_sharding_reshape_partial(gs_arena *a, const gs_sharding *s, int src_rank,
                                      const int64_t *src_dims, int dst_rank,
                                      const int64_t *dst_dims, gs_sharding **out) {
    if (passes_through(s)) return keep(s, out);
    if (gs_sharding_manual_dim(s) >= 0) {
        /* Manual subgroups: keep them and take whatever the whole reshape gives, else replicate
         * the data dims (a simplification of XLA's grouped recursion). */
        if (gs_sharding_reshape(a, s, src_rank, src_dims, dst_rank, dst_dims, out) != GS_OK)
            return GS_ERR;
        if (*out) return GS_OK;
        int64_t all[GS_MAX_TILE_RANK];
        for (int i = 0; i < src_rank; i++) all[i] = i;
        gs_sharding *r;
        if (gs_sharding_replicate_dims(a, s, src_rank, all, &r) != GS_OK) return GS_ERR;
        if (passes_through(r)) return keep(r, out);
        int64_t nd[GS_MAX_TILE_RANK];
        int k = 0;
        for (int i = 0; i < dst_rank; i++) nd[k++] = 1;
        for (int i = r->data_rank; i < r->tiles.rank; i++) nd[k++] = r->tiles.dims[i];
        gs_tile_assignment u;
        if (gs_tile_reshape(a, &r->tiles, k, nd, &u) != GS_OK) return GS_ERR;
        return done(gs_sharding_subgroup(a, &u, r->n_subgroups, r->subgroups), s->metadata, out);
    }
    gs_sharding *result = gs_sharding_replicated(a);
    if (!result) return GS_ERR;
    const gs_tile_assignment *t = &s->tiles;
    int start = 0;
    while (start < src_rank) {
        bool found = false;
        for (int end = src_rank; end > start; end--) {
            int64_t grouped[GS_MAX_TILE_RANK];
            for (int i = 0; i < src_rank; i++) grouped[i] = i >= start && i < end ? t->dims[i] : 1;
            if (gs_prod(grouped, src_rank) == 1) continue;
            gs_tile_assignment g;
            if (gs_tile_iota(a, src_rank, grouped, 0, NULL, NULL, &g) != GS_OK) return GS_ERR;
            gs_sharding *gs = gs_sharding_tiled(a, &g), *reshaped;
            if (!gs) return GS_ERR;
            if (gs_sharding_reshape(a, gs, src_rank, src_dims, dst_rank, dst_dims, &reshaped) !=
                GS_OK)
                return GS_ERR;
            if (!reshaped || reshaped->kind != GS_SHARDING_TILED) continue;
            int perm[GS_MAX_TILE_RANK], np = 0;
            for (int i = start; i < end; i++) perm[np++] = i;
            for (int i = 0; i < start; i++) perm[np++] = i;
            for (int i = end; i < t->rank; i++) perm[np++] = i;
            int64_t rd[GS_MAX_TILE_RANK + 1];
            int nr = reshaped->tiles.rank;
            memcpy(rd, reshaped->tiles.dims, sizeof rd[0] * (size_t)nr);
            int64_t num_rep = t->n / gs_prod(rd, nr);
            if (nr == dst_rank)
                rd[nr++] = num_rep;
            else
                rd[nr - 1] *= num_rep;
            gs_tile_assignment tt, tr;
            if (gs_tile_transpose(a, t, perm, &tt) != GS_OK ||
                gs_tile_reshape(a, &tt, nr, rd, &tr) != GS_OK)
                return GS_ERR;
            gs_sharding *ungrouped = gs_sharding_partial(a, &tr), *merged;
            if (!ungrouped) return GS_ERR;
            if (gs_sharding_merge_compatible(a, ungrouped, gs_sharding_num_tiles(result) + 1,
                                             result, &merged) != GS_OK)
                return GS_ERR;
            if (merged) {
                result = merged;
                start = end;
                found = true;
                break;
            }
        }
        if (!found) start++;
    }
    gs_sharding *r = gs_sharding_with_metadata(a, result, s->metadata);
    if (!r) return GS_ERR;
    *out = r;
    return GS_OK;
}

/* ------------------------------------------------------------------ merge */

static bool has_partial_replication(const gs_sharding *s) {
    return gs_sharding_replication_dim(s) >= 0;
}

/* Metadata of a merge: dst's, then to_merge's when different. */
static const char *merge_metadata(gs_arena *a, const char *dst, const char *add) {
    if (!add || (dst && strcmp(dst, add) == 0)) return dst;
    if (!dst) return add;
    const char *fmt_d = dst[0] == '{' ? "%s" : "{%s}";
    const char *fmt_a = add[0] == '{' ? "%s" : "{%s}";
    char *x = gs_arena_printf(a, fmt_d, dst), *y = gs_arena_printf(a, fmt_a, add);
    if (!x || !y) return dst;
    if (strstr(x, y)) return x;
    char *r = gs_arena_printf(a, "%s, %s", x, y);
    return r ? r : dst;
}

/* Ravel of a group id: data tile indices over sharding's dims (those of size 1 read as 0), then
 * the manual index. */
static int64_t group_id(const gs_sharding *sh, const int64_t *idx, int man_idx_pos,
                        const int64_t *merged_idx) {
    int64_t g = 0;
    for (int i = 0; i < sh->data_rank; i++) {
        int64_t d = sh->tiles.dims[i];
        g = g * d + (d == 1 ? 0 : idx[i]);
    }
    int md = gs_sharding_manual_dim(sh);
    if (md >= 0) g = g * sh->tiles.dims[md] + merged_idx[man_idx_pos];
    return g;
}

/* Next permutation of v (n entries) in lexicographic order; false after the last. */
static bool next_perm(int *v, int n) {
    int i = n - 2;
    while (i >= 0 && v[i] >= v[i + 1]) i--;
    if (i < 0) return false;
    int j = n - 1;
    while (v[j] <= v[i]) j--;
    int t = v[i];
    v[i] = v[j];
    v[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = v[l];
        v[l] = v[r];
        v[r] = t;
    }
    return true;
}

/* Method 1 of XLA's merge: the tile assignments compatible with `sh` in the merged layout,
 * obtained by splitting its replication dim into the dims the other sharding tiles (in every
 * order) and transposing them into place. */
typedef struct merge_side {
    const gs_sharding *sh;              /* the sharding */
    int64_t old_dims[GS_MAX_TILE_RANK]; /* its tile dims kept as they are */
    int n_old;                          /* entries of old_dims */
    int64_t new_dims[GS_MAX_TILE_RANK]; /* dims taken from its replication */
    int new_index[GS_MAX_TILE_RANK];    /* where each new dim goes in the merged layout */
    int n_new;                          /* entries of new_dims / new_index */
    int perm[GS_MAX_TILE_RANK];         /* merged position -> reshape position (old dims) */
    int counter;                        /* reshape positions used so far */
} merge_side;

static gs_status candidates(gs_arena *a, merge_side *m, int merged_rank, int64_t replication,
                            gs_tile_assignment *out, int *n_out, int max_out) {
    const gs_sharding *sh = m->sh;
    int rd = gs_sharding_replication_dim(sh);
    *n_out = 0;
    if (rd < 0 || sh->tiles.dims[rd] == replication) {
        out[(*n_out)++] = sh->tiles;
        return GS_OK;
    }
    int perm_len = merged_rank;
    if (replication > 1) {
        m->new_dims[m->n_new] = replication;
        m->new_index[m->n_new] = merged_rank - 1;
        m->n_new++;
    }
    int order[GS_MAX_TILE_RANK];
    for (int i = 0; i < m->n_new; i++) order[i] = i;
    do {
        if (*n_out >= max_out) break;
        int local[GS_MAX_TILE_RANK];
        memcpy(local, m->perm, sizeof local[0] * (size_t)perm_len);
        int c = m->counter;
        int64_t reshape[GS_MAX_TILE_RANK];
        int nr = 0;
        for (int i = 0; i < m->n_old; i++) reshape[nr++] = m->old_dims[i];
        for (int i = 0; i < m->n_new; i++) {
            reshape[nr++] = m->new_dims[order[i]];
            local[m->new_index[order[i]]] = c++;
        }
        gs_tile_assignment r, t;
        if (gs_tile_reshape(a, &sh->tiles, nr, reshape, &r) != GS_OK ||
            gs_tile_transpose(a, &r, local, &t) != GS_OK)
            return GS_ERR;
        out[(*n_out)++] = t;
    } while (next_perm(order, m->n_new));
    return GS_OK;
}

/* Method 2 of XLA's MergeShardingIfCompatible: fills the merged tile array (nmd dims `merged`)
 * device by device with the smallest device common to the two groups (of to_merge and of dst)
 * its position belongs to. *found stays false when a position has none. */
static gs_status fill_by_groups(gs_arena *a, const gs_sharding *to_merge, const gs_sharding *dst,
                                int64_t n_merge_groups, int64_t n_dst_groups, int nmd,
                                const int64_t *merged, gs_tile_assignment *compatible,
                                bool *found) {
    int64_t n_devices = to_merge->tiles.n;
    int dr = dst->data_rank;
    int64_t *mv = malloc(sizeof *mv * (size_t)n_devices);
    int64_t *dv = malloc(sizeof *dv * (size_t)n_devices);
    int64_t *res = malloc(sizeof *res * (size_t)n_devices);
    int64_t *mtaken = calloc((size_t)n_devices, sizeof *mtaken);
    int64_t *dtaken = calloc((size_t)n_devices, sizeof *dtaken);
    bool ok = mv && dv && res && mtaken && dtaken;
    gs_status st = ok ? GS_OK : GS_ERR;
    bool compatible_ok = ok;
    if (ok) {
        gs_tile_materialize(&to_merge->tiles, mv);
        gs_tile_materialize(&dst->tiles, dv);
        int64_t mgs = n_devices / n_merge_groups, dgs = n_devices / n_dst_groups;
        int64_t idx[GS_MAX_TILE_RANK] = {0};
        for (int64_t pos = 0; pos < n_devices && compatible_ok; pos++) {
            int64_t gm = group_id(to_merge, idx, dr, idx);
            int64_t gd = group_id(dst, idx, dr, idx);
            /* Smallest device in both groups not yet placed. */
            int64_t best = -1;
            for (int64_t i = 0; i < mgs; i++) {
                int64_t dev = mv[gm * mgs + i];
                if (mtaken[gm * mgs + i] || (best >= 0 && dev >= best)) continue;
                for (int64_t j = 0; j < dgs; j++)
                    if (!dtaken[gd * dgs + j] && dv[gd * dgs + j] == dev) {
                        best = dev;
                        break;
                    }
            }
            if (best < 0) {
                compatible_ok = false;
                break;
            }
            for (int64_t i = 0; i < mgs; i++)
                if (mv[gm * mgs + i] == best) mtaken[gm * mgs + i] = 1;
            for (int64_t j = 0; j < dgs; j++)
                if (dv[gd * dgs + j] == best) dtaken[gd * dgs + j] = 1;
            res[pos] = best;
            for (int i = nmd - 1; i >= 0; i--) {
                if (++idx[i] < merged[i]) break;
                idx[i] = 0;
            }
        }
        if (compatible_ok) {
            if (gs_tile_explicit(a, nmd, merged, res, compatible) != GS_OK)
                st = GS_ERR;
            else
                *found = true;
        }
    }
    free(mv);
    free(dv);
    free(res);
    free(mtaken);
    free(dtaken);
    return st;
}

gs_status gs_sharding_merge_compatible(gs_arena *a, const gs_sharding *to_merge,
                                       int64_t minimum_tiles, const gs_sharding *dst,
                                       gs_sharding **out) {
    GS_ASSERT(to_merge->kind != GS_SHARDING_TUPLE && dst->kind != GS_SHARDING_TUPLE);
    *out = NULL;
    if (gs_sharding_is_tile_maximal(to_merge) || to_merge->kind != GS_SHARDING_TILED) {
        return GS_OK;
    }
    if (gs_sharding_is_tile_maximal(dst)) return keep(to_merge, out);
    if (dst->kind != GS_SHARDING_TILED || !has_partial_replication(dst)) return GS_OK;
    if (dst->data_rank != to_merge->data_rank) return GS_OK;
    int mm = gs_sharding_manual_dim(to_merge), dm = gs_sharding_manual_dim(dst);
    if ((mm >= 0) != (dm >= 0)) return GS_OK;
    int dr = dst->data_rank;
    merge_side ms = {.sh = to_merge}, ds = {.sh = dst};
    int64_t merged[GS_MAX_TILE_RANK];
    int nmd = 0;
    int64_t n_merge_groups = 1, n_dst_groups = 1;
    for (int i = 0; i < dr; i++) {
        int64_t md = to_merge->tiles.dims[i], dd = dst->tiles.dims[i];
        n_merge_groups *= md;
        n_dst_groups *= dd;
        if (dd == md) {
            ms.old_dims[ms.n_old++] = md;
            ms.perm[i] = ms.counter++;
            ds.old_dims[ds.n_old++] = dd;
            ds.perm[i] = ds.counter++;
            merged[nmd++] = dd;
        } else if (dd == 1) {
            ms.old_dims[ms.n_old++] = md;
            ms.perm[i] = ms.counter++;
            ds.new_dims[ds.n_new] = md;
            ds.new_index[ds.n_new++] = i;
            merged[nmd++] = md;
        } else if (md == 1) {
            ms.new_dims[ms.n_new] = dd;
            ms.new_index[ms.n_new++] = i;
            ds.old_dims[ds.n_old++] = dd;
            ds.perm[i] = ds.counter++;
            merged[nmd++] = dd;
        } else {
            return GS_OK;
        }
    }
    int64_t n_devices = to_merge->tiles.n;
    int64_t new_tiles = gs_prod(merged, nmd);
    if (n_devices % new_tiles != 0 || new_tiles < minimum_tiles) return GS_OK;
    int64_t replication, man = 1;
    if (mm >= 0) {
        man = to_merge->tiles.dims[mm];
        if (man != dst->tiles.dims[dm]) return GS_OK;
        ms.old_dims[ms.n_old++] = man;
        ds.old_dims[ds.n_old++] = man;
        ms.perm[dr] = ms.counter++;
        ds.perm[dr] = ds.counter++;
        merged[nmd++] = man;
        n_merge_groups *= man;
        n_dst_groups *= man;
        if (n_devices % (new_tiles * man) != 0) return GS_OK;
    }
    replication = n_devices / (new_tiles * man);
    if (replication > 1) merged[nmd++] = replication;
    /* Method 1: reshape + transpose candidates of each side; a common one is the answer. */
    enum { MAX_CAND = 24 };
    gs_tile_assignment mc[MAX_CAND], dc[MAX_CAND];
    int nmc = 0, ndc = 0;
    bool found = false;
    gs_tile_assignment compatible;
    if (ms.n_new <= 3 && ds.n_new <= 3) {
        if (candidates(a, &ms, nmd, replication, mc, &nmc, MAX_CAND) != GS_OK ||
            candidates(a, &ds, nmd, replication, dc, &ndc, MAX_CAND) != GS_OK)
            return GS_ERR;
        for (int i = 0; i < ndc && !found; i++)
            for (int j = 0; j < nmc && !found; j++)
                if (dc[i].rank == nmd && gs_tile_equal(&dc[i], &mc[j])) {
                    compatible = dc[i];
                    found = true;
                }
    }
    /* Method 2: fill the merged array device by device. */
    if (!found) {
        gs_status st = fill_by_groups(a, to_merge, dst, n_merge_groups, n_dst_groups, nmd, merged,
                                      &compatible, &found);
        if (st != GS_OK) return st;
        if (!found) return GS_OK;
    }
    gs_subgroup_kind types[2];
    int nt = 0;
    if (mm >= 0) types[nt++] = GS_SUBGROUP_MANUAL;
    if (replication > 1) types[nt++] = GS_SUBGROUP_REPLICATED;
    gs_sharding *r = gs_sharding_subgroup(a, &compatible, nt, types);
    if (!r) return GS_ERR;
    r->metadata = merge_metadata(a, dst->metadata, to_merge->metadata);
    *out = r;
    return GS_OK;
}

/* ------------------------------------------------------------------ specificity */

static bool leaf_more_specific(const gs_sharding *lhs, const gs_sharding *rhs) {
    bool lman = lhs->kind == GS_SHARDING_MANUAL, rman = rhs->kind == GS_SHARDING_MANUAL;
    if (lman && gs_sharding_is_tile_maximal(rhs)) return true;
    if (lman || rman) return false;
    if (!gs_sharding_is_tile_maximal(rhs))
        return gs_sharding_num_tiles(lhs) > gs_sharding_num_tiles(rhs);
    return !(rhs->kind == GS_SHARDING_REPLICATED ? lhs->kind == GS_SHARDING_REPLICATED
                                                 : gs_sharding_is_tile_maximal(lhs));
}

bool gs_sharding_more_specific(const gs_sharding *lhs, const gs_sharding *rhs) {
    if (lhs->kind == GS_SHARDING_TUPLE) {
        GS_ASSERT(rhs->kind == GS_SHARDING_TUPLE && lhs->n_tuple == rhs->n_tuple);
        bool better = false;
        for (int i = 0; i < lhs->n_tuple; i++) {
            if (gs_sharding_more_specific(rhs->tuple[i], lhs->tuple[i])) return false;
            if (gs_sharding_more_specific(lhs->tuple[i], rhs->tuple[i])) better = true;
        }
        return better;
    }
    return leaf_more_specific(lhs, rhs);
}

gs_status gs_sharding_merge(gs_arena *a, const gs_sharding *to_merge, const gs_sharding *dst,
                            bool may_combine_partial, gs_sharding **out, bool *changed) {
    if (to_merge->kind == GS_SHARDING_TUPLE) {
        GS_ASSERT(dst->kind == GS_SHARDING_TUPLE && dst->n_tuple == to_merge->n_tuple);
        gs_sharding **v = GS_NEW_ARRAY(a, gs_sharding *, dst->n_tuple ? dst->n_tuple : 1);
        if (!v) return GS_ERR;
        bool any = false;
        for (int i = 0; i < dst->n_tuple; i++) {
            bool c;
            if (gs_sharding_merge(a, to_merge->tuple[i], dst->tuple[i], may_combine_partial, &v[i],
                                  &c) != GS_OK)
                return GS_ERR;
            any = any || c;
        }
        gs_sharding *t = gs_sharding_tuple(a, dst->n_tuple, v);
        if (!t) return GS_ERR;
        *out = t;
        *changed = any;
        return GS_OK;
    }
    *out = (gs_sharding *)dst;
    if (may_combine_partial && to_merge->kind == GS_SHARDING_TILED &&
        dst->kind == GS_SHARDING_TILED && has_partial_replication(to_merge) &&
        has_partial_replication(dst) && to_merge->tiles.n == dst->tiles.n) {
        int64_t nt = gs_sharding_num_tiles(to_merge), nd = gs_sharding_num_tiles(dst);
        gs_sharding *m;
        if (gs_sharding_merge_compatible(a, to_merge, (nt > nd ? nt : nd) + 1, dst, &m) != GS_OK)
            return GS_ERR;
        if (m) {
            *out = m;
            *changed = true;
            return GS_OK;
        }
    }
    *changed = leaf_more_specific(dst, to_merge);
    return GS_OK;
}
