/*
 * collectives.c — XLA's collective semantics on top of a communicator (gs_comm_ops), written
 * once for every backend: which devices form a group (XLA's CollectiveOpGroupMode: cross-replica,
 * cross-partition, cross-replica-and-partition, flattened ids; replica groups as lists or iota),
 * the data layout of all-gather / reduce-scatter / all-to-all along a dimension, tuple operands,
 * collective-permute pairs (a device nobody sends to gets zeros), non-builtin reductions (gather,
 * then fold the module's computation in group order), and the -start forms. Plus the checks run
 * before a program starts (gs_check_collectives).
 */
#include "internal.h"
#include "base/sysalloc.h"
#include "gspmd/text.h"

#include <stdlib.h>
#include <string.h>

typedef enum group_mode {
    MODE_CROSS_REPLICA,               /* no channel_id: ids are replica ids */
    MODE_CROSS_PARTITION,             /* channel_id, no use_global_device_ids field: partitions */
    MODE_CROSS_REPLICA_AND_PARTITION, /* channel_id, use_global_device_ids=false: replicas x all partitions */
    MODE_FLATTENED                    /* channel_id, use_global_device_ids=true: global ids */
} group_mode;

/* XLA's GetCollectiveOpGroupMode. all-to-all and collective-permute have no
 * use_global_device_ids field. */
static group_mode mode_of(const gs_instr *in) {
    bool channel = gs_instr_attr(in, GS_ATTR_CHANNEL_ID) != NULL;
    if (!channel) return MODE_CROSS_REPLICA;
    switch (in->op) {
    case GS_OP_ALL_TO_ALL:
    case GS_OP_RAGGED_ALL_TO_ALL:
    case GS_OP_COLLECTIVE_PERMUTE:
    case GS_OP_COLLECTIVE_PERMUTE_START:
    case GS_OP_COLLECTIVE_BROADCAST:
        return MODE_CROSS_PARTITION;
    default:
        return gs_instr_bool(in, GS_ATTR_USE_GLOBAL_DEVICE_IDS, false) ? MODE_FLATTENED
                                                                      : MODE_CROSS_REPLICA_AND_PARTITION;
    }
}

/* Number of ids in the mode's id space. */
static int id_space(group_mode mode, int R, int P) {
    switch (mode) {
    case MODE_CROSS_REPLICA:
    case MODE_CROSS_REPLICA_AND_PARTITION: return R;
    case MODE_CROSS_PARTITION: return P;
    default: return R * P;
    }
}

static int64_t group_entry(const gs_replica_groups *g, int group, int idx) {
    return gs_replica_groups_device(g, group, idx);
}

/* The replicas of a module run: R from the module header, P = devices / R. */
static void run_geometry(const gs_module *m, int n_devices, int *R, int *P) {
    *R = m->replica_count > 0 ? (int)m->replica_count : 1;
    if (n_devices % *R != 0) *R = 1;
    *P = n_devices / *R;
}

/* Fills g (members in `members`, room for n_devices) for device dev. */
static gs_status find_group(const gs_device_ctx *x, const gs_instr *in, int *members, gs_group *g,
                            gs_diags *d) {
    int N = x->comm->n_devices, R, P;
    run_geometry(x->m, N, &R, &P);
    int dev = x->device, r = dev / P, p = dev % P;
    group_mode mode = mode_of(in);
    const gs_attr *ga = gs_instr_attr(in, GS_ATTR_REPLICA_GROUPS);
    const gs_replica_groups *rg = ga ? ga->u.groups : NULL;
    int my_id = mode == MODE_CROSS_PARTITION ? p : mode == MODE_FLATTENED ? dev : r;
    int space = id_space(mode, R, P);
    int n_groups = rg ? rg->n_groups : 0;
    /* The ids of my group, in group order. */
    int *ids = gs_sys_malloc(sizeof(int) * (size_t)(space > 0 ? space : 1));
    if (!ids) return gs_error(d, in->span, "out of memory");
    int n_ids = 0, gid = 0;
    if (n_groups == 0) {
        for (int i = 0; i < space; i++) ids[n_ids++] = i;
    } else {
        bool found = false;
        for (int gi = 0; gi < n_groups && !found; gi++) {
            int sz = gs_replica_groups_size(rg, gi);
            for (int k = 0; k < sz; k++)
                if (group_entry(rg, gi, k) == my_id) found = true;
            if (found) {
                gid = gi;
                if (sz > space) {
                    free(ids);
                    return gs_error(d, in->span, "%s %s: a replica group is larger than the %d ids", gs_op_name(in->op), in->name, space);
                }
                for (int k = 0; k < sz; k++) ids[n_ids++] = (int)group_entry(rg, gi, k);
            }
        }
        if (!found) {
            free(ids);
            return gs_error(d, in->span, "%s %s: device %d (id %d) is in no replica group", gs_op_name(in->op),
                            in->name, dev, my_id);
        }
    }
    int n = 0;
    for (int k = 0; k < n_ids; k++) {
        switch (mode) {
        case MODE_CROSS_REPLICA: members[n++] = ids[k] * P + p; break;
        case MODE_CROSS_PARTITION: members[n++] = r * P + ids[k]; break;
        case MODE_FLATTENED: members[n++] = ids[k]; break;
        case MODE_CROSS_REPLICA_AND_PARTITION:
            for (int pp = 0; pp < P; pp++) members[n++] = ids[k] * P + pp;
            break;
        }
    }
    free(ids);
    g->size = n;
    g->members = members;
    g->index = -1;
    for (int k = 0; k < n; k++)
        if (members[k] == dev) g->index = k;
    g->id = members[0];
    g->n_groups = n_groups ? n_groups : 1;
    (void)gid;
    /* Key: the mode and the groups' text identify the partition of devices into groups. */
    gs_sb sb = {0};
    gs_sb_printf(&sb, "%d:", (int)mode);
    if (ga) gs_print_attr_value(&sb, ga);
    g->key = gs_hash_bytes(gs_sb_str(&sb), sb.len, 0);
    gs_sb_free(&sb);
    if (g->index < 0) return gs_error(d, in->span, "internal: device %d not in its own group", dev);
    return GS_OK;
}

/* ------------------------------------------------------------------ layout helpers */

/* Splits `src` (dims, element size esz) along dim into k equal chunks, writing them one after
 * another into dst (chunk-major). */
static void split_to_blocks(const gs_value *src, int dim, int k, void *dst) {
    int esz = gs_type_size(src->type);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < dim; i++) outer *= src->dims[i];
    for (int i = dim + 1; i < src->rank; i++) inner *= src->dims[i];
    int64_t c = src->dims[dim] / k; /* chunk length along dim */
    int64_t run = c * inner * esz;  /* bytes of one chunk row */
    const char *s = src->data;
    char *t = dst;
    for (int j = 0; j < k; j++)
        for (int64_t o = 0; o < outer; o++)
            memcpy(t + ((int64_t)j * outer + o) * run, s + (o * k + j) * run, (size_t)run);
}

/* The inverse: k chunk-major blocks (each outer x c x inner) into dst concatenated along dim. */
static void blocks_to_concat(const void *src, int k, int64_t outer, int64_t run, void *dst) {
    const char *s = src;
    char *t = dst;
    for (int j = 0; j < k; j++)
        for (int64_t o = 0; o < outer; o++)
            memcpy(t + (o * k + j) * run, s + ((int64_t)j * outer + o) * run, (size_t)run);
}

/* ------------------------------------------------------------------ reductions */

/* Non-builtin reduction: gathers the members' buffers and folds the module's computation over
 * them in group order, element by element. */
static gs_status reduce_general(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                                gs_value *buf, gs_diags *d) {
    const gs_computation *comp = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    size_t bytes = gs_value_bytes(buf);
    char *all = gs_sys_malloc(bytes * (size_t)g->size + 1);
    if (!all) return gs_error(d, in->span, "out of memory");
    gs_status st = x->comm->ops->all_gather(x->comm, x->device, g, buf->data, (int64_t)bytes, all, d);
    gs_value *a = gs_value_new_array(buf->type, 0, NULL), *b = gs_value_new_array(buf->type, 0, NULL);
    if (!a || !b) st = gs_error(d, in->span, "out of memory");
    int esz = gs_type_size(buf->type);
    for (int64_t i = 0; st == GS_OK && i < buf->n; i++) {
        memcpy(a->data, all + i * esz, (size_t)esz);
        for (int k = 1; st == GS_OK && k < g->size; k++) {
            memcpy(b->data, all + (size_t)k * bytes + (size_t)(i * esz), (size_t)esz);
            gs_value *args[2] = {a, b}, *r = NULL;
            st = gs_interp_call(x->m, NULL, comp, args, 2, &r, d);
            if (st == GS_OK) {
                memcpy(a->data, r->data, (size_t)esz);
                gs_value_free(r);
            }
        }
        if (st == GS_OK) memcpy((char *)buf->data + i * esz, a->data, (size_t)esz);
    }
    gs_value_free(a);
    gs_value_free(b);
    free(all);
    return st;
}

static gs_status all_reduce_leaf(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                                 const gs_value *v, gs_value **out, gs_diags *d) {
    gs_value *buf = gs_value_copy(v);
    if (!buf) return gs_error(d, in->span, "out of memory");
    gs_reduce_op op = gs_reduce_op_of(gs_instr_comp(in, GS_ATTR_TO_APPLY));
    gs_status st;
    if (op != GS_RED_NONE)
        st = x->comm->ops->all_reduce(x->comm, x->device, g, buf->type, op, buf->data, buf->n, d);
    else
        st = reduce_general(x, in, g, buf, d);
    if (st != GS_OK) {
        gs_value_free(buf);
        return st;
    }
    *out = buf;
    return GS_OK;
}

/* ------------------------------------------------------------------ one collective per op */

static gs_status do_all_gather(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                               const gs_value *v, gs_value **out, gs_diags *d) {
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    int dim = dims.n ? (int)dims.v[0] : 0;
    if (dim < 0 || dim >= v->rank) return gs_error(d, in->span, "all-gather dimension out of range");
    int64_t rdims[GS_MAX_RANK];
    memcpy(rdims, v->dims, sizeof(int64_t) * (size_t)v->rank);
    rdims[dim] *= g->size;
    gs_value *r = gs_value_new_array(v->type, v->rank, rdims);
    size_t bytes = gs_value_bytes(v);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < dim; i++) outer *= v->dims[i];
    for (int i = dim; i < v->rank; i++) inner *= v->dims[i];
    const gs_comm_ops *ops = x->comm->ops;
    /* Straight into the result when the blocks are its layout (dim 0) or the backend
     * interleaves them; else through a buffer of blocks. */
    bool direct = outer == 1 || ops->all_gather_interleaved;
    char *blocks = direct ? NULL : gs_sys_malloc(bytes * (size_t)g->size + 1);
    if (!r || (!direct && !blocks)) {
        gs_value_free(r);
        free(blocks);
        return gs_error(d, in->span, "out of memory");
    }
    gs_status st;
    if (outer == 1)
        st = ops->all_gather(x->comm, x->device, g, v->data, (int64_t)bytes, r->data, d);
    else if (direct)
        st = ops->all_gather_interleaved(x->comm, x->device, g, v->data, outer,
                                         inner * gs_type_size(v->type), r->data, d);
    else if ((st = ops->all_gather(x->comm, x->device, g, v->data, (int64_t)bytes, blocks, d)) ==
             GS_OK)
        blocks_to_concat(blocks, g->size, outer, inner * gs_type_size(v->type), r->data);
    free(blocks);
    if (st != GS_OK) {
        gs_value_free(r);
        return st;
    }
    *out = r;
    return GS_OK;
}

static gs_status do_reduce_scatter(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                                   const gs_value *v, gs_value **out, gs_diags *d) {
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    int dim = dims.n ? (int)dims.v[0] : 0;
    if (dim < 0 || dim >= v->rank || v->dims[dim] % g->size != 0)
        return gs_error(d, in->span, "%s %s: dimension %d of size %lld does not split into %d parts",
                        gs_op_name(in->op), in->name, dim, dim >= 0 && dim < v->rank ? (long long)v->dims[dim] : -1LL, g->size);
    int64_t rdims[GS_MAX_RANK];
    memcpy(rdims, v->dims, sizeof(int64_t) * (size_t)v->rank);
    rdims[dim] /= g->size;
    gs_value *r = gs_value_new_array(v->type, v->rank, rdims);
    void *blocks = gs_sys_malloc(gs_value_bytes(v) + 1);
    if (!r || !blocks) {
        gs_value_free(r);
        free(blocks);
        return gs_error(d, in->span, "out of memory");
    }
    split_to_blocks(v, dim, g->size, blocks);
    gs_reduce_op op = gs_reduce_op_of(gs_instr_comp(in, GS_ATTR_TO_APPLY));
    gs_status st;
    if (op != GS_RED_NONE) {
        st = x->comm->ops->reduce_scatter(x->comm, x->device, g, v->type, op, blocks, r->n, r->data, d);
    } else {
        /* General reduction: all-reduce the whole (block-major) buffer, keep my block. */
        gs_value *tmp = gs_value_new_array(v->type, 1, &v->n);
        st = tmp ? GS_OK : gs_error(d, in->span, "out of memory");
        if (st == GS_OK) {
            memcpy(tmp->data, blocks, gs_value_bytes(v));
            st = reduce_general(x, in, g, tmp, d);
        }
        if (st == GS_OK)
            memcpy(r->data, (char *)tmp->data + gs_value_bytes(r) * (size_t)g->index, gs_value_bytes(r));
        gs_value_free(tmp);
    }
    free(blocks);
    if (st != GS_OK) {
        gs_value_free(r);
        return st;
    }
    *out = r;
    return GS_OK;
}

static gs_status do_all_to_all_dim(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                                   const gs_value *v, int dim, gs_value **out, gs_diags *d) {
    if (dim < 0 || dim >= v->rank || v->dims[dim] % g->size != 0)
        return gs_error(d, in->span, "all-to-all %s: dimension %d does not split into %d parts", in->name, dim, g->size);
    gs_value *r = gs_value_new_array(v->type, v->rank, v->dims);
    size_t bytes = gs_value_bytes(v);
    char *blocks = gs_sys_malloc(bytes + 1), *recv = gs_sys_malloc(bytes + 1);
    if (!r || !blocks || !recv) {
        gs_value_free(r);
        free(blocks);
        free(recv);
        return gs_error(d, in->span, "out of memory");
    }
    split_to_blocks(v, dim, g->size, blocks);
    gs_status st = x->comm->ops->all_to_all(x->comm, x->device, g, blocks, (int64_t)(bytes / (size_t)g->size), recv, d);
    if (st == GS_OK) {
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < dim; i++) outer *= v->dims[i];
        for (int i = dim + 1; i < v->rank; i++) inner *= v->dims[i];
        int64_t run = v->dims[dim] / g->size * inner * gs_type_size(v->type);
        blocks_to_concat(recv, g->size, outer, run, r->data);
    }
    free(blocks);
    free(recv);
    if (st != GS_OK) {
        gs_value_free(r);
        return st;
    }
    *out = r;
    return GS_OK;
}

/* Tuple all-to-all: operand j goes to member j; result element j comes from member j. */
static gs_status do_all_to_all_tuple(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                                     gs_value *const *ops, int n, gs_value **out, gs_diags *d) {
    if (n != g->size)
        return gs_error(d, in->span, "all-to-all %s: %d operands for a group of %d", in->name, n, g->size);
    size_t bytes = gs_value_bytes(ops[0]);
    for (int j = 1; j < n; j++)
        if (gs_value_bytes(ops[j]) != bytes)
            return gs_error(d, in->span, "all-to-all %s: operands differ in size", in->name);
    char *send = gs_sys_malloc(bytes * (size_t)n + 1), *recv = gs_sys_malloc(bytes * (size_t)n + 1);
    gs_value **elems = gs_sys_calloc((size_t)n, sizeof *elems);
    gs_status st = send && recv && elems ? GS_OK : gs_error(d, in->span, "out of memory");
    for (int j = 0; st == GS_OK && j < n; j++) memcpy(send + (size_t)j * bytes, ops[j]->data, bytes);
    if (st == GS_OK) st = x->comm->ops->all_to_all(x->comm, x->device, g, send, (int64_t)bytes, recv, d);
    for (int j = 0; st == GS_OK && j < n; j++) {
        elems[j] = gs_value_new_array(ops[j]->type, ops[j]->rank, ops[j]->dims);
        if (!elems[j]) st = gs_error(d, in->span, "out of memory");
        else memcpy(elems[j]->data, recv + (size_t)j * bytes, bytes);
    }
    if (st == GS_OK) {
        *out = gs_value_new_tuple(n, elems);
        if (!*out) st = gs_error(d, in->span, "out of memory");
    } else if (elems) {
        for (int j = 0; j < n; j++) gs_value_free(elems[j]);
    }
    free(send);
    free(recv);
    free(elems);
    return st;
}

static gs_status do_permute(const gs_device_ctx *x, const gs_instr *in, const gs_value *v,
                            gs_value **out, gs_diags *d) {
    int N = x->comm->n_devices, R, P;
    run_geometry(x->m, N, &R, &P);
    group_mode mode = mode_of(in);
    int dev = x->device, r = dev / P, p = dev % P;
    int my_id = mode == MODE_CROSS_PARTITION ? p : r;
    const gs_attr *pa = gs_instr_attr(in, GS_ATTR_SOURCE_TARGET_PAIRS);
    int to = -1, from = -1;
    for (int i = 0; pa && i < pa->u.pairs.n; i++) {
        int64_t s = pa->u.pairs.v[i][0], t = pa->u.pairs.v[i][1];
        int gs = mode == MODE_CROSS_PARTITION ? r * P + (int)s : (int)s * P + p;
        int gt = mode == MODE_CROSS_PARTITION ? r * P + (int)t : (int)t * P + p;
        if (s == my_id) to = gt;
        if (t == my_id) from = gs;
    }
    gs_value *res = gs_value_new_array(v->type, v->rank, v->dims); /* zeros */
    if (!res) return gs_error(d, in->span, "out of memory");
    gs_status st = x->comm->ops->permute(x->comm, dev, to, from, v->data, res->data, (int64_t)gs_value_bytes(v), d);
    if (st != GS_OK) {
        gs_value_free(res);
        return st;
    }
    *out = res;
    return GS_OK;
}

/* Applies fn to each operand and tuples the results when there are several. */
typedef gs_status (*leaf_fn)(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                             const gs_value *v, gs_value **out, gs_diags *d);

static gs_status per_operand(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                             gs_value *const *ops, int n, leaf_fn fn, gs_value **out, gs_diags *d) {
    if (n == 1 && ops[0]->type != GS_TUPLE) return fn(x, in, g, ops[0], out, d);
    /* Several operands, or one tuple operand: one result per array leaf. */
    gs_value *const *vals = ops;
    int nv = n;
    if (n == 1) {
        vals = ops[0]->tuple;
        nv = ops[0]->n_tuple;
    }
    gs_value **res = gs_sys_calloc((size_t)(nv ? nv : 1), sizeof *res);
    if (!res) return gs_error(d, in->span, "out of memory");
    gs_status st = GS_OK;
    for (int i = 0; i < nv && st == GS_OK; i++) st = fn(x, in, g, vals[i], &res[i], d);
    if (st == GS_OK) {
        *out = gs_value_new_tuple(nv, res);
        if (!*out) st = gs_error(d, in->span, "out of memory");
    } else {
        for (int i = 0; i < nv; i++) gs_value_free(res[i]);
    }
    free(res);
    return st;
}

static gs_status bcast_leaf(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                            const gs_value *v, gs_value **out, gs_diags *d) {
    size_t bytes = gs_value_bytes(v);
    char *all = gs_sys_malloc(bytes * (size_t)g->size + 1);
    gs_value *r = gs_value_new_array(v->type, v->rank, v->dims);
    gs_status st = all && r ? GS_OK : gs_error(d, in->span, "out of memory");
    if (st == GS_OK) st = x->comm->ops->all_gather(x->comm, x->device, g, v->data, (int64_t)bytes, all, d);
    if (st == GS_OK) memcpy(r->data, all, bytes);
    free(all);
    if (st != GS_OK) {
        gs_value_free(r);
        return st;
    }
    *out = r;
    return GS_OK;
}

static gs_status a2a_leaf(const gs_device_ctx *x, const gs_instr *in, const gs_group *g,
                          const gs_value *v, gs_value **out, gs_diags *d) {
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    return do_all_to_all_dim(x, in, g, v, (int)dims.v[0], out, d);
}

/* A -start op's value in its declared shape: the result itself, or (operands, result, ...). */
gs_status gs_collective_wrap_start(const gs_instr *in, gs_value *const *ops, int n,
                                   gs_value *result, gs_value **out, gs_diags *d) {
    const gs_shape *s = in->shape;
    if (gs_value_matches(result, s) || s->type != GS_TUPLE || s->n_tuple < 2) {
        *out = result;
        return GS_OK;
    }
    gs_value **parts = gs_sys_calloc((size_t)s->n_tuple, sizeof *parts);
    if (!parts) {
        gs_value_free(result);
        return gs_error(d, in->span, "out of memory");
    }
    if (n == 1) {
        parts[0] = gs_value_ref(ops[0]);
    } else {
        gs_value **e = gs_sys_calloc((size_t)n, sizeof *e);
        for (int i = 0; e && i < n; i++) e[i] = gs_value_ref(ops[i]);
        parts[0] = e ? gs_value_new_tuple(n, e) : NULL;
        free(e);
    }
    parts[1] = result;
    for (int i = 2; i < s->n_tuple; i++) parts[i] = gs_value_from_shape(s->tuple[i]);
    *out = gs_value_new_tuple(s->n_tuple, parts);
    free(parts);
    return *out ? GS_OK : gs_error(d, in->span, "out of memory");
}

gs_status gs_collective_run(const gs_device_ctx *x, const gs_instr *in, gs_value *const *ops, int n,
                            gs_value **out, gs_diags *d) {
    int *members = gs_sys_malloc(sizeof(int) * (size_t)x->comm->n_devices);
    if (!members) return gs_error(d, in->span, "out of memory");
    gs_group g;
    gs_status st = GS_OK;
    gs_value *result = NULL;
    bool needs_group = in->op != GS_OP_COLLECTIVE_PERMUTE && in->op != GS_OP_COLLECTIVE_PERMUTE_START;
    if (needs_group) st = find_group(x, in, members, &g, d);
    if (st == GS_OK) {
        switch (in->op) {
        case GS_OP_ALL_REDUCE:
        case GS_OP_ALL_REDUCE_START:
            st = per_operand(x, in, &g, ops, n, all_reduce_leaf, &result, d);
            break;
        case GS_OP_ALL_GATHER:
        case GS_OP_ALL_GATHER_START:
            st = per_operand(x, in, &g, ops, n, do_all_gather, &result, d);
            break;
        case GS_OP_REDUCE_SCATTER:
            st = per_operand(x, in, &g, ops, n, do_reduce_scatter, &result, d);
            break;
        case GS_OP_ALL_TO_ALL:
            if (gs_instr_ints(in, GS_ATTR_DIMENSIONS).n > 0)
                st = per_operand(x, in, &g, ops, n, a2a_leaf, &result, d);
            else
                st = do_all_to_all_tuple(x, in, &g, ops, n, &result, d);
            break;
        case GS_OP_COLLECTIVE_BROADCAST:
            st = per_operand(x, in, &g, ops, n, bcast_leaf, &result, d);
            break;
        case GS_OP_COLLECTIVE_PERMUTE:
        case GS_OP_COLLECTIVE_PERMUTE_START:
            if (n != 1 || ops[0]->type == GS_TUPLE)
                st = gs_error(d, in->span, "collective-permute %s: only the one-operand form is supported", in->name);
            else
                st = do_permute(x, in, ops[0], &result, d);
            break;
        default:
            st = gs_error(d, in->span, "%s %s: not supported by the runtime", gs_op_name(in->op), in->name);
            break;
        }
    }
    free(members);
    if (st != GS_OK) return st;
    *out = result;
    return GS_OK;
}

gs_status gs_collective_execute(void *ctx, const gs_instr *in, gs_value *const *ops, int n,
                                gs_value **out, gs_diags *d) {
    const gs_device_ctx *x = ctx;
    bool start = gs_op_info_of(in->op)->flags & GS_OPF_ASYNC_START;
    /* A -start goes to the helper and the device computes on; while the helper has work, the
     * device's other collectives queue behind it (the devices pair collectives in order). */
    if (x->async && gs_async_start_op(in->op)) return gs_async_start(x->async, in, ops, n, out, d);
    gs_value *result = NULL;
    gs_status st = x->async && gs_async_busy(x->async)
                       ? gs_async_sync(x->async, in, ops, n, &result, d)
                       : gs_collective_run(x, in, ops, n, &result, d);
    if (st != GS_OK) return st;
    if (start) return gs_collective_wrap_start(in, ops, n, result, out, d);
    *out = result;
    return GS_OK;
}

bool gs_collective_finish(void *ctx, const gs_value *start, gs_value **out, gs_status *st,
                          gs_diags *d) {
    const gs_device_ctx *x = ctx;
    return gs_async_finish(x->async, start, out, d, st);
}

/* ------------------------------------------------------------------ checks before running */

static bool module_has_attr(const gs_module *m, const char *name) {
    for (int i = 0; i < m->n_attrs; i++)
        if (strcmp(m->attrs[i].name, name) == 0) return true;
    return false;
}

static gs_status check_groups(const gs_instr *in, group_mode mode, int space, gs_diags *d) {
    const gs_attr *ga = gs_instr_attr(in, GS_ATTR_REPLICA_GROUPS);
    if (!ga || ga->u.groups->n_groups == 0) return GS_OK;
    const gs_replica_groups *rg = ga->u.groups;
    const char *what = mode == MODE_CROSS_PARTITION ? "partition" : mode == MODE_FLATTENED ? "device" : "replica";
    unsigned char *seen = gs_sys_calloc((size_t)space + 1, 1);
    if (!seen) return gs_error(d, in->span, "out of memory");
    gs_status st = GS_OK;
    int size0 = gs_replica_groups_size(rg, 0);
    bool equal_sizes_needed = in->op != GS_OP_ALL_REDUCE && in->op != GS_OP_ALL_REDUCE_START;
    int64_t total = 0;
    for (int gi = 0; gi < rg->n_groups && st == GS_OK; gi++) {
        int sz = gs_replica_groups_size(rg, gi);
        if (equal_sizes_needed && sz != size0)
            st = gs_error(d, in->span, "%s %s: replica groups have different sizes (%d and %d)",
                          gs_op_name(in->op), in->name, size0, sz);
        for (int k = 0; k < sz && st == GS_OK; k++) {
            int64_t id = gs_replica_groups_device(rg, gi, k);
            if (id < 0 || id >= space)
                st = gs_error(d, in->span, "%s %s: replica group names %s %lld, but there are %d %ss%s",
                              gs_op_name(in->op), in->name, what, (long long)id, space, what,
                              mode == MODE_CROSS_REPLICA
                                  ? " (a program of replicas whose module records no "
                                    "replica_count? give it: run --spmd --num-replicas R)"
                                  : "");
            else if (seen[id]++)
                st = gs_error(d, in->span, "%s %s: %s %lld appears in more than one replica group",
                              gs_op_name(in->op), in->name, what, (long long)id);
            total++;
        }
    }
    if (st == GS_OK && total != space) {
        int missing = 0;
        while (missing < space && seen[missing]) missing++;
        st = gs_error(d, in->span, "%s %s: replica groups cover %lld of the %d %ss (%s %d is in none)",
                      gs_op_name(in->op), in->name, (long long)total, space, what, what, missing);
    }
    free(seen);
    return st;
}

static gs_status check_pairs(const gs_instr *in, int space, gs_diags *d) {
    const gs_attr *pa = gs_instr_attr(in, GS_ATTR_SOURCE_TARGET_PAIRS);
    if (!pa) return GS_OK;
    unsigned char *src = gs_sys_calloc((size_t)space + 1, 1), *dst = gs_sys_calloc((size_t)space + 1, 1);
    if (!src || !dst) {
        free(src);
        free(dst);
        return gs_error(d, in->span, "out of memory");
    }
    gs_status st = GS_OK;
    for (int i = 0; i < pa->u.pairs.n && st == GS_OK; i++) {
        int64_t s = pa->u.pairs.v[i][0], t = pa->u.pairs.v[i][1];
        if (s < 0 || s >= space || t < 0 || t >= space)
            st = gs_error(d, in->span, "%s %s: source_target_pair {%lld,%lld} is out of range for %d devices",
                          gs_op_name(in->op), in->name, (long long)s, (long long)t, space);
        else if (src[s]++)
            st = gs_error(d, in->span, "%s %s: device %lld is the source of two pairs", gs_op_name(in->op), in->name, (long long)s);
        else if (dst[t]++)
            st = gs_error(d, in->span, "%s %s: device %lld is the target of two pairs", gs_op_name(in->op), in->name, (long long)t);
    }
    free(src);
    free(dst);
    return st;
}

gs_status gs_check_collectives(const gs_module *m, int n_devices, gs_diags *d) {
    if (n_devices < 1) return gs_error(d, gs_span_none(), "the number of devices must be positive");
    int R = m->replica_count > 0 ? (int)m->replica_count : 1;
    if (n_devices % R != 0)
        return gs_error(d, gs_span_none(), "%d devices do not divide into the module's replica_count=%d", n_devices, R);
    int P = n_devices / R;
    if (module_has_attr(m, "num_partitions") && m->num_partitions != P)
        return gs_error(d, gs_span_none(),
                        "the module says num_partitions=%lld, but the run has %d partitions (%d devices / replica_count %d)",
                        (long long)m->num_partitions, P, n_devices, R);
    gs_status st = GS_OK;
    for (int ci = 0; ci < m->n_comps; ci++) {
        const gs_computation *c = m->comps[ci];
        for (int i = 0; i < c->n_instrs; i++) {
            const gs_instr *in = c->instrs[i];
            if (gs_op_info_of(in->op)->family != GS_FAM_COLLECTIVE) continue;
            group_mode mode = mode_of(in);
            int space = id_space(mode, R, P);
            if (check_groups(in, mode, space, d) != GS_OK) st = GS_ERR;
            if (check_pairs(in, space, d) != GS_OK) st = GS_ERR;
        }
    }
    return st;
}
