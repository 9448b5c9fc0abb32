/*
 * shard.c — global values to and from per-device values under a sharding: slicing a value by its
 * sharding (zero-padded shards) and reassembling one from every device's part (replicas must
 * agree bitwise). The runtime slices a partitioned program's inputs and reassembles its outputs
 * with them; the interpreter runs manual regions (shard_map) of an unpartitioned module per
 * device with them.
 */
#include "kernels.h"
#include "base/sysalloc.h"
#include "gspmd/sharding.h"

#include <stdlib.h>
#include <string.h>

/* Copies the box of sizes `size` from src (dims sd) at offset so to dst (dims dd) at offset do.
 * Element size esz. Rank r. */
static void copy_box(char *dst, const int64_t *dd, const int64_t *dof, const char *src,
                     const int64_t *sd, const int64_t *sof, const int64_t *size, int r, int esz) {
    for (int i = 0; i < r; i++)
        if (size[i] <= 0) return;
    if (r == 0) {
        memcpy(dst, src, (size_t)esz);
        return;
    }
    int64_t idx[GS_MAX_RANK] = {0};
    int64_t run = size[r - 1] * esz;
    for (;;) {
        int64_t so = 0, doff = 0;
        for (int i = 0; i < r; i++) {
            so = so * sd[i] + sof[i] + idx[i];
            doff = doff * dd[i] + dof[i] + idx[i];
        }
        memcpy(dst + doff * esz, src + so * esz, (size_t)run);
        int k = r - 2;
        while (k >= 0) {
            if (++idx[k] < size[k]) break;
            idx[k--] = 0;
        }
        if (k < 0) return;
    }
}

/* Compares the box like copy_box; true when equal. */
static bool same_box(const char *a, const int64_t *ad, const int64_t *aof, const char *b,
                     const int64_t *bd, const int64_t *bof, const int64_t *size, int r, int esz) {
    for (int i = 0; i < r; i++)
        if (size[i] <= 0) return true;
    if (r == 0) return memcmp(a, b, (size_t)esz) == 0;
    int64_t idx[GS_MAX_RANK] = {0};
    int64_t run = size[r - 1] * esz;
    for (;;) {
        int64_t ao = 0, bo = 0;
        for (int i = 0; i < r; i++) {
            ao = ao * ad[i] + aof[i] + idx[i];
            bo = bo * bd[i] + bof[i] + idx[i];
        }
        if (memcmp(a + ao * esz, b + bo * esz, (size_t)run) != 0) return false;
        int k = r - 2;
        while (k >= 0) {
            if (++idx[k] < size[k]) break;
            idx[k--] = 0;
        }
        if (k < 0) return true;
    }
}

/* The full tile index (every tile dim) of device d under tiled s; false when d holds none. */
static bool full_index(const gs_sharding *s, int64_t d, int64_t *idx) {
    int64_t pos = gs_tile_position(&s->tiles, d);
    if (pos < 0) return false;
    for (int i = s->tiles.rank - 1; i >= 0; i--) {
        idx[i] = pos % s->tiles.dims[i];
        pos /= s->tiles.dims[i];
    }
    return true;
}

/* Index of s's subgroup dim of kind k among its tile dims, or -1. */
static int subgroup_dim(const gs_sharding *s, gs_subgroup_kind k) {
    if (s->kind != GS_SHARDING_TILED) return -1;
    for (int i = 0; i < s->n_subgroups; i++)
        if (s->subgroups[i] == k) return s->data_rank + i;
    return -1;
}

/* dst box += src box (element type t; pred: or). */
static void add_box(char *dst, const int64_t *dd, const int64_t *dof, const char *src,
                    const int64_t *sd, const int64_t *sof, const int64_t *size, int r, gs_type t) {
    int64_t total = 1;
    for (int i = 0; i < r; i++) total *= size[i];
    int64_t idx[GS_MAX_RANK] = {0};
    for (int64_t e = 0; e < total; e++) {
        int64_t so = 0, doff = 0;
        for (int i = 0; i < r; i++) {
            so = so * sd[i] + sof[i] + idx[i];
            doff = doff * dd[i] + dof[i] + idx[i];
        }
        if (gs_type_is_complex(t)) {
            double a, b, x, y;
            gs_elem_get_c(dst, t, doff, &a, &b);
            gs_elem_get_c(src, t, so, &x, &y);
            gs_elem_set_c(dst, t, doff, a + x, b + y);
        } else if (gs_type_is_float(t)) {
            gs_elem_set_f(dst, t, doff, gs_elem_get_f(dst, t, doff) + gs_elem_get_f(src, t, so));
        } else if (t == GS_PRED) {
            gs_elem_set_i(dst, t, doff, gs_elem_get_i(dst, t, doff) | gs_elem_get_i(src, t, so));
        } else {
            gs_elem_set_i(dst, t, doff,
                          (int64_t)((uint64_t)gs_elem_get_i(dst, t, doff) +
                                    (uint64_t)gs_elem_get_i(src, t, so)));
        }
        for (int i = r - 1; i >= 0; i--) {
            if (++idx[i] < size[i]) break;
            idx[i] = 0;
        }
    }
}

static const gs_sharding *leaf_of(const gs_sharding *s, int *leaf) {
    if (s->kind != GS_SHARDING_TUPLE) {
        (*leaf)++;
        return s;
    }
    int i = (*leaf)++;
    return i < s->n_tuple ? s->tuple[i] : NULL;
}

static gs_status shard_leaf(const gs_value *v, const gs_sharding *s, int64_t device,
                            gs_value **out, gs_diags *d) {
    if (v->type == GS_TOKEN) {
        *out = gs_value_new_token();
        return *out ? GS_OK : gs_error(d, gs_span_none(), "out of memory");
    }
    if (!s) return gs_error(d, gs_span_none(), "a tuple sharding has fewer leaves than its value");
    if (v->devices > 0) {
        /* A manual value: one value per device (its manual group's), sliced by the rest. */
        if (device < 0 || device >= v->n_tuple)
            return gs_error(d, gs_span_none(), "a manual value of %d devices has no part for "
                            "device %lld", v->n_tuple, (long long)device);
        v = v->tuple[device];
    }
    if (s->kind == GS_SHARDING_MANUAL) {
        *out = gs_value_copy(v);
        return *out ? GS_OK : gs_error(d, gs_span_none(), "out of memory");
    }
    if (s->kind != GS_SHARDING_TILED) {
        /* Partial values ({unreduced}): device 0 holds the value, the others zeros. */
        bool zero = s->kind == GS_SHARDING_UNREDUCED && device != 0;
        *out = zero ? gs_value_new_array(v->type, v->rank, v->dims) : gs_value_copy(v);
        return *out ? GS_OK : gs_error(d, gs_span_none(), "out of memory");
    }
    gs_shard_dim sd[GS_MAX_RANK];
    bool holds;
    if (gs_shard_box(s, v->rank, v->dims, device, sd, &holds, d) != GS_OK) return GS_ERR;
    int64_t dims[GS_MAX_RANK], off[GS_MAX_RANK], size[GS_MAX_RANK], zero[GS_MAX_RANK] = {0};
    for (int i = 0; i < v->rank; i++) {
        dims[i] = sd[i].size;
        off[i] = sd[i].offset;
        size[i] = sd[i].valid;
    }
    gs_value *r = gs_value_new_array(v->type, v->rank, dims);
    if (!r) return gs_error(d, gs_span_none(), "out of memory");
    if (holds)
        copy_box(r->data, dims, zero, v->data, v->dims, off, size, v->rank,
                 gs_type_size(v->type));
    *out = r;
    return GS_OK;
}

gs_status gs_shard_box(const gs_sharding *s, int rank, const int64_t *dims, int64_t device,
                       gs_shard_dim *sd, bool *holds, gs_diags *d) {
    *holds = true;
    if (s->data_rank != rank)
        return gs_error(d, gs_span_none(), "a sharding of rank %d on an input of rank %d",
                        s->data_rank, rank);
    if (!gs_sharding_device_shard(s, rank, dims, device, sd))
        return gs_error(d, gs_span_none(), "device %lld holds no shard of an input",
                        (long long)device);
    int ud = subgroup_dim(s, GS_SUBGROUP_UNREDUCED);
    int64_t full[GS_MAX_TILE_RANK];
    if (ud >= 0 && full_index(s, device, full) && full[ud] != 0)
        *holds = false; /* partial values: only the first of each unreduced group holds the data */
    return GS_OK;
}

static gs_status shard_rec(const gs_value *v, const gs_sharding *s, int64_t device, int *leaf,
                           gs_value **out, gs_diags *d) {
    if (v->devices > 0 && device >= 0 && device < v->n_tuple && v->tuple[device]->type == GS_TUPLE)
        v = v->tuple[device]; /* a manual tuple: this device's */
    if (v->type != GS_TUPLE || v->devices > 0) return shard_leaf(v, leaf_of(s, leaf), device, out, d);
    gs_value **el = gs_sys_calloc((size_t)(v->n_tuple ? v->n_tuple : 1), sizeof *el);
    if (!el) return gs_error(d, gs_span_none(), "out of memory");
    for (int i = 0; i < v->n_tuple; i++)
        if (shard_rec(v->tuple[i], s, device, leaf, &el[i], d) != GS_OK) {
            for (int k = 0; k < i; k++) gs_value_free(el[k]);
            free(el);
            return GS_ERR;
        }
    *out = gs_value_new_tuple(v->n_tuple, el);
    free(el);
    return *out ? GS_OK : gs_error(d, gs_span_none(), "out of memory");
}

gs_status gs_value_shard(const gs_value *v, const gs_sharding *s, int64_t device,
                         gs_value **out, gs_diags *d) {
    int leaf = 0;
    return shard_rec(v, s, device, &leaf, out, d);
}

/* ------------------------------------------------------------------ reassembly */

static gs_status unshard_tiled(gs_value *const *parts, int n, const gs_sharding *s,
                               const gs_shape *shape, int leaf, int md, int64_t group,
                               gs_value *g, gs_value **out, gs_diags *d);

/* A manual leaf has no single global value: each manual group (each device, when fully manual)
 * holds its own. Its reassembly is a bundle of n_devices values, device d's part the value of
 * d's group (reassembled from the group's tiles when partially manual). */
static gs_status unshard_manual(gs_value *const *parts, int n, const gs_sharding *s,
                                const gs_shape *shape, int leaf, gs_value **out, gs_diags *d) {
    gs_value **el = gs_sys_calloc((size_t)(n ? n : 1), sizeof *el);
    if (!el) return gs_error(d, gs_span_none(), "out of memory");
    gs_status st = GS_OK;
    int md = subgroup_dim(s, GS_SUBGROUP_MANUAL);
    for (int k = 0; k < n && st == GS_OK; k++) {
        if (s->kind == GS_SHARDING_MANUAL) {
            if (!gs_value_matches(parts[k], shape))
                st = gs_error(d, gs_span_none(), "output %d of device %d has the wrong shape",
                              leaf, k);
            else if (!(el[k] = gs_value_copy(parts[k])))
                st = gs_error(d, gs_span_none(), "out of memory");
            continue;
        }
        int64_t idx[GS_MAX_TILE_RANK];
        if (!full_index(s, k, idx)) {
            st = gs_error(d, gs_span_none(), "output %d: device %d is in no manual group", leaf,
                          k);
            break;
        }
        for (int j = 0; j < k && !el[k]; j++) { /* an earlier member of the group built it */
            int64_t jdx[GS_MAX_TILE_RANK];
            if (full_index(s, j, jdx) && jdx[md] == idx[md]) el[k] = gs_value_ref(el[j]);
        }
        if (el[k]) continue;
        gs_value *g = gs_value_new_array(shape->type, shape->rank, shape->dims);
        st = g ? unshard_tiled(parts, n, s, shape, leaf, md, idx[md], g, &el[k], d)
               : gs_error(d, gs_span_none(), "out of memory");
    }
    if (st != GS_OK) {
        for (int k = 0; k < n; k++) gs_value_free(el[k]);
        free(el);
        return st;
    }
    *out = gs_value_new_tuple(n, el); /* frees the parts when it fails */
    free(el);
    if (!*out) return gs_error(d, gs_span_none(), "out of memory");
    (*out)->devices = n;
    return GS_OK;
}

static gs_status unshard_leaf(gs_value *const *parts, int n, const gs_sharding *s,
                              const gs_shape *shape, int leaf, gs_value **out, gs_diags *d) {
    if (shape->type == GS_TOKEN) {
        *out = gs_value_new_token();
        return *out ? GS_OK : gs_error(d, gs_span_none(), "out of memory");
    }
    if (!s) return gs_error(d, gs_span_none(), "output %d has no sharding", leaf);
    if (s->kind == GS_SHARDING_MANUAL || subgroup_dim(s, GS_SUBGROUP_MANUAL) >= 0)
        return unshard_manual(parts, n, s, shape, leaf, out, d);
    int r = shape->rank;
    for (int k = 0; k < n; k++)
        if (parts[k]->type != shape->type)
            return gs_error(d, gs_span_none(), "output %d of device %d has type %s, not %s", leaf,
                            k, gs_type_name(parts[k]->type), gs_type_name(shape->type));
    if (shape->dynamic && s->kind != GS_SHARDING_TILED) {
        /* Dynamic dims (the bound in the shape, the valid size in the value): every device
         * holds the whole value, the same size on all. */
        int64_t src = s->kind == GS_SHARDING_MAXIMAL ? s->device : 0;
        if (src < 0 || src >= n)
            return gs_error(d, gs_span_none(), "output %d lives on device %lld of %d", leaf,
                            (long long)src, n);
        for (int k = 0; k < n; k++) {
            const gs_value *p = parts[k];
            bool ok = p->rank == r;
            for (int i = 0; i < r && ok; i++)
                ok = p->dims[i] == parts[src]->dims[i] &&
                     (shape->dynamic[i] ? p->dims[i] <= shape->dims[i] : p->dims[i] == shape->dims[i]);
            if (!ok)
                return gs_error(d, gs_span_none(), "output %d of device %d has the wrong shape",
                                leaf, k);
        }
        *out = gs_value_copy(parts[src]);
        if (*out && s->kind == GS_SHARDING_UNREDUCED) {
            /* Partial values: their sum, in device order, at the devices' common size. */
            int64_t zero[GS_MAX_RANK] = {0};
            const int64_t *dims = (*out)->dims;
            for (int k = 1; k < n; k++)
                add_box((*out)->data, dims, zero, parts[k]->data, dims, zero, dims, r,
                        shape->type);
        }
        return *out ? GS_OK : gs_error(d, gs_span_none(), "out of memory");
    }
    gs_shape actual; /* tiled with dynamic dims, which the partitioner keeps whole: their
                        size at run time, the same on every device */
    int64_t actual_dims[GS_MAX_RANK];
    if (shape->dynamic && s->kind == GS_SHARDING_TILED && n > 0) {
        actual = *shape;
        actual.dynamic = NULL;
        actual.dims = actual_dims;
        for (int i = 0; i < r; i++) {
            actual_dims[i] = shape->dims[i];
            if (!shape->dynamic[i]) continue;
            if (i >= s->data_rank || s->tiles.dims[i] != 1 || parts[0]->rank != r ||
                parts[0]->dims[i] > shape->dims[i])
                return gs_error(d, gs_span_none(),
                                "output %d splits dynamic dim %d, whose size is known only at "
                                "run time",
                                leaf, i);
            actual_dims[i] = parts[0]->dims[i];
        }
        shape = &actual;
    }
    if (s->kind != GS_SHARDING_TILED) {
        int64_t src = s->kind == GS_SHARDING_MAXIMAL ? s->device : 0;
        if (src < 0 || src >= n)
            return gs_error(d, gs_span_none(), "output %d lives on device %lld of %d", leaf,
                            (long long)src, n);
        for (int k = 0; k < n; k++) {
            const gs_value *p = parts[k];
            if (p->rank != r ||
                (r > 0 && memcmp(p->dims, shape->dims, sizeof(int64_t) * (size_t)r) != 0))
                return gs_error(d, gs_span_none(), "output %d of device %d has the wrong shape",
                                leaf, k);
        }
        size_t bytes = gs_value_bytes(parts[src]);
        if (s->kind != GS_SHARDING_UNREDUCED) { /* replicas agree; the source's is the value */
            for (int k = 0; s->kind != GS_SHARDING_MAXIMAL && bytes > 0 && k < n; k++)
                if (parts[k]->data != parts[src]->data && /* a part replicas share: equal */
                    memcmp(parts[k]->data, parts[src]->data, bytes) != 0)
                    return gs_error(d, gs_span_none(),
                                    "output %d is replicated, but devices %lld and %d hold "
                                    "different values",
                                    leaf, (long long)src, k);
            *out = gs_value_ref(parts[src]);
            return GS_OK;
        }
        /* Partial values: their sum, in device order. */
        int64_t zero[GS_MAX_RANK] = {0};
        gs_value *g = gs_value_copy(parts[src]);
        if (!g) return gs_error(d, gs_span_none(), "out of memory");
        for (int k = 1; k < n; k++)
            add_box(g->data, shape->dims, zero, parts[k]->data, shape->dims, zero, shape->dims, r,
                    shape->type);
        *out = g;
        return GS_OK;
    }
    gs_value *g = gs_value_new_array(shape->type, r, shape->dims);
    if (!g) return gs_error(d, gs_span_none(), "out of memory");
    return unshard_tiled(parts, n, s, shape, leaf, -1, 0, g, out, d);
}

/* The tiled leaf g of shape `shape` from the parts of the devices whose index along tile dim md
 * is `group` (every device when md < 0): the first device of each tile writes it, its replicas
 * must agree. Takes over g. */
static gs_status unshard_tiled(gs_value *const *parts, int n, const gs_sharding *s,
                               const gs_shape *shape, int leaf, int md, int64_t group,
                               gs_value *g, gs_value **out, gs_diags *d) {
    int r = shape->rank, esz = gs_type_size(shape->type);
    int64_t zero[GS_MAX_RANK] = {0};
    int64_t ntiles = gs_sharding_num_tiles(s);
    int *first = gs_sys_malloc(sizeof(int) * (size_t)(ntiles ? ntiles : 1));
    if (!first) {
        gs_value_free(g);
        return gs_error(d, gs_span_none(), "out of memory");
    }
    for (int64_t t = 0; t < ntiles; t++) first[t] = -1;
    gs_status st = GS_OK;
    int ud = subgroup_dim(s, GS_SUBGROUP_UNREDUCED), rd = subgroup_dim(s, GS_SUBGROUP_REPLICATED);
    for (int k = 0; k < n && st == GS_OK; k++) {
        gs_shard_dim sd[GS_MAX_RANK];
        int64_t idx[GS_MAX_TILE_RANK];
        if (!gs_sharding_device_shard(s, r, shape->dims, k, sd) || !full_index(s, k, idx))
            continue;
        if (md >= 0 && idx[md] != group) continue;         /* another manual group */
        if (ud >= 0 && rd >= 0 && idx[rd] != 0) continue; /* replicas of partial values */
        const gs_value *p = parts[k];
        int64_t off[GS_MAX_RANK], size[GS_MAX_RANK], tile = 0;
        bool ok = p->rank == r && p->type == shape->type;
        for (int i = 0; i < r && ok; i++) {
            off[i] = sd[i].offset;
            size[i] = sd[i].valid;
            ok = p->dims[i] == sd[i].size;
            tile = tile * s->tiles.dims[i] + idx[i];
        }
        if (!ok) {
            st = gs_error(d, gs_span_none(), "output %d of device %d has the wrong shape", leaf, k);
            break;
        }
        if (first[tile] < 0) {
            first[tile] = k;
            copy_box(g->data, shape->dims, off, p->data, p->dims, zero, size, r, esz);
        } else if (ud >= 0) {
            add_box(g->data, shape->dims, off, p->data, p->dims, zero, size, r, shape->type);
        } else if (p->data != parts[first[tile]]->data && /* a shared part: equal */
                   !same_box(g->data, shape->dims, off, p->data, p->dims, zero, size, r, esz)) {
            st = gs_error(d, gs_span_none(),
                          "output %d: devices %d and %d hold the same tile but different values",
                          leaf, first[tile], k);
        }
    }
    free(first);
    if (st != GS_OK) {
        gs_value_free(g);
        return st;
    }
    *out = g;
    return GS_OK;
}

static gs_status unshard_rec(gs_value *const *parts, int n, const gs_sharding *s,
                             const gs_shape *shape, int *leaf, gs_value **out, gs_diags *d) {
    if (shape->type != GS_TUPLE) {
        int l = *leaf;
        return unshard_leaf(parts, n, leaf_of(s, leaf), shape, l, out, d);
    }
    int m = shape->n_tuple;
    gs_value **el = gs_sys_calloc((size_t)(m ? m : 1), sizeof *el);
    gs_value **sub = gs_sys_calloc((size_t)(n ? n : 1), sizeof *sub);
    gs_status st = el && sub ? GS_OK : gs_error(d, gs_span_none(), "out of memory");
    int done = 0;
    for (int i = 0; i < m && st == GS_OK; i++) {
        for (int k = 0; k < n && st == GS_OK; k++) {
            if (parts[k]->type != GS_TUPLE || parts[k]->n_tuple != m)
                st = gs_error(d, gs_span_none(),
                              "the output of device %d is not the expected tuple", k);
            else
                sub[k] = parts[k]->tuple[i];
        }
        if (st == GS_OK) st = unshard_rec(sub, n, s, shape->tuple[i], leaf, &el[i], d);
        if (st == GS_OK) done++;
    }
    if (st == GS_OK) {
        *out = gs_value_new_tuple(m, el);
        if (!*out) st = gs_error(d, gs_span_none(), "out of memory");
    } else {
        for (int k = 0; el && k < done; k++) gs_value_free(el[k]);
    }
    free(el);
    free(sub);
    return st;
}

gs_status gs_value_unshard(gs_value *const *parts, int n_devices, const gs_sharding *s,
                           const gs_shape *shape, gs_value **out, gs_diags *d) {
    int leaf = 0;
    return unshard_rec(parts, n_devices, s, shape, &leaf, out, d);
}

