/*
 * infer_collective.c — shape rules of the collectives: all-reduce, all-gather, reduce-scatter,
 * all-to-all, collective-permute, collective-broadcast, ragged-all-to-all, and XLA's checks of
 * their replica groups (group modes, ids, sizes against the module's device counts) and
 * source-target pairs.
 */
#include "ir/infer.h"

/* A computation that combines two scalars into one (the to_apply of all-reduce and friends). */
static gs_status check_binary_combiner(ictx *c) {
    const gs_computation *f;
    if (gs_infer_need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (f->n_params != 2)
        return fail(c, "to_apply computation %s must take 2 parameters, but takes %d", f->name,
                    f->n_params);
    for (int i = 0; i < 2; i++)
        if (!is_scalar(param_shape(f, i)))
            return fail(c, "parameter %d of to_apply computation %s must be a scalar, not %s", i,
                        f->name, sh(c, param_shape(f, i)));
    if (!is_scalar(root_shape(f)))
        return fail(c, "to_apply computation %s must return a scalar, not %s", f->name,
                    sh(c, root_shape(f)));
    return GS_OK;
}

/* XLA's CollectiveOpGroupMode: how replica_groups name devices. */
typedef enum gmode { GM_REPLICA, GM_PARTITION, GM_REPLICA_AND_PARTITION, GM_FLATTENED } gmode;

/* has_ugdi: the op has a use_global_device_ids field (all-reduce, all-gather, reduce-scatter);
 * for the others XLA treats it as unset. */
static gs_status group_mode(ictx *c, bool has_ugdi, gmode *mode) {
    bool channel = attr(c, GS_ATTR_CHANNEL_ID) != NULL;
    bool ugdi = gs_instr_bool(c->in, GS_ATTR_USE_GLOBAL_DEVICE_IDS, false);
    if (!channel) {
        if (ugdi) return fail(c, "use_global_device_ids=true needs a channel_id");
        *mode = GM_REPLICA;
    } else if (!has_ugdi) {
        *mode = GM_PARTITION;
    } else {
        *mode = ugdi ? GM_FLATTENED : GM_REPLICA_AND_PARTITION;
    }
    return GS_OK;
}

static const gs_replica_groups *groups_of(const ictx *c) {
    const gs_attr *at = attr(c, GS_ATTR_REPLICA_GROUPS);
    if (!at || (!at->u.groups->is_iota && at->u.groups->n_groups == 0)) return NULL;
    return at->u.groups;
}

/* XLA's CheckReplicaGroups: no empty group; the groups name each id 0..n-1 exactly once; n
 * is the number of replicas, partitions or both (unless the module leaves that count at 1);
 * uniform: all groups have one size. */
static gs_status check_groups(ictx *c, gmode mode, bool uniform) {
    const gs_replica_groups *g = groups_of(c);
    if (!g) {
        if (mode == GM_FLATTENED)
            return fail(c, "replica_groups must be given when use_global_device_ids=true");
        return GS_OK;
    }
    int64_t n = 0;
    if (g->is_iota) {
        n = (int64_t)g->n_groups * g->group_size;
    } else {
        for (int i = 0; i < g->n_groups; i++) {
            if (g->sizes[i] == 0) return fail(c, "replica group %d is empty", i);
            n += g->sizes[i];
        }
        bool *seen = GS_NEW_ARRAY(c->scratch, bool, n);
        if (!seen) return oom(c);
        for (int i = 0; i < g->n_groups; i++)
            for (int j = 0; j < g->sizes[i]; j++) {
                int64_t id = g->groups[i][j];
                if (id < 0 || id >= n)
                    return fail(c, "replica_groups must name each id 0..%lld once, but name %lld",
                                (long long)n - 1, (long long)id);
                if (seen[id])
                    return fail(c, "id %lld appears twice in replica_groups", (long long)id);
                seen[id] = true;
            }
        if (uniform && g->group_size < 0)
            return fail(c, "replica groups must all have the same size");
    }
    int64_t rc = c->replica_count, np = c->num_partitions;
    int64_t want = mode == GM_PARTITION ? np : mode == GM_FLATTENED ? rc * np : rc;
    const char *what = mode == GM_PARTITION   ? "num_partitions"
                       : mode == GM_FLATTENED ? "replica_count*num_partitions"
                                              : "replica_count";
    if (want != 1 && n != want)
        return fail(c, "replica_groups name %lld ids, but the module has %s=%lld", (long long)n,
                    what, (long long)want);
    return GS_OK;
}

/* The number of devices in one group (XLA's GetSubgroupSize). */
static int64_t subgroup_size(const ictx *c, gmode mode) {
    const gs_replica_groups *g = groups_of(c);
    int64_t first = g ? gs_replica_groups_size(g, 0) : -1;
    switch (mode) {
    case GM_REPLICA: return g ? first : c->replica_count;
    case GM_REPLICA_AND_PARTITION: return (g ? first : c->replica_count) * c->num_partitions;
    case GM_FLATTENED: return g ? first : 1;
    case GM_PARTITION: return g ? first : c->num_partitions;
    }
    return 1;
}

/* The written result for operand k of a (start) collective with n operands, or NULL. */
static const gs_shape *declared_result(const ictx *c, int k, int n) {
    const gs_shape *s = c->declared;
    if (!s) return NULL;
    if (c->in->op == GS_OP_ALL_GATHER_START) {
        if (s->type != GS_TUPLE || s->n_tuple < 2) return NULL;
        s = s->tuple[1];
    }
    if (n > 1) {
        if (s->type != GS_TUPLE || s->n_tuple <= k) return NULL;
        s = s->tuple[k];
    }
    return arr(s) ? s : NULL;
}

/* all-gather(-start) and reduce-scatter: dimension d of each operand grows (gather) or
 * shrinks (scatter) by the group size. When the module leaves the group size at 1, XLA takes
 * the factor from the written shape; so do we. */
gs_status gs_infer_gather_scatter_collective(ictx *c, gs_shape **out) {
    bool gather = c->in->op != GS_OP_REDUCE_SCATTER;
    int n = c->in->n_operands;
    gmode mode;
    int64_t d;
    if (group_mode(c, true, &mode) != GS_OK || check_groups(c, mode, true) != GS_OK) return GS_ERR;
    for (int k = 0; k < n; k++)
        if (!arr(opnd(c, k)))
            return fail(c, "operand %d must be an array, not %s", k, sh(c, opnd(c, k)));
    if (gs_infer_need_one_dim(c, opnd(c, 0), gather ? "all-gather dimension" : "scatter dimension",
                              &d))
        return GS_ERR;
    if (!gather && check_binary_combiner(c) != GS_OK) return GS_ERR;
    int64_t shards = subgroup_size(c, mode);
    const gs_shape *decl = declared_result(c, 0, n);
    if (shards == 1 && decl && decl->rank > d && decl->dims[d] > 0 && opnd(c, 0)->dims[d] > 0) {
        int64_t a = decl->dims[d], b = opnd(c, 0)->dims[d];
        shards = gather ? (a + b - 1) / b : (b + a - 1) / a;
    }
    if (shards < 1) shards = 1;
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n + 1);
    if (!elems) return oom(c);
    for (int k = 0; k < n; k++) {
        const gs_shape *s = opnd(c, k);
        if (d >= s->rank)
            return fail(c, "dimension %lld is out of range for operand %d %s", (long long)d, k,
                        sh(c, s));
        int64_t dims[GS_MAX_RANK];
        copy_dims(dims, s);
        if (dims[d] >= 0 && gather) dims[d] *= shards;
        if (dims[d] >= 0 && !gather) {
            if (dims[d] % shards != 0)
                return fail(c, "dimension %lld of %s does not divide into %lld shards",
                            (long long)d, sh(c, s), (long long)shards);
            dims[d] /= shards;
        }
        if (!(elems[k] = new_array(c, s->type, s->rank, dims, s->dynamic))) return oom(c);
    }
    const gs_shape *res = n == 1 ? elems[0] : new_tuple(c, n, elems);
    if (!res || c->in->op != GS_OP_ALL_GATHER_START) return emit(c, out, res);
    const gs_shape *input = NULL;
    if (n == 1) {
        input = opnd(c, 0);
    } else {
        for (int k = 0; k < n; k++) elems[k] = opnd(c, k);
        input = new_tuple(c, n, elems);
    }
    const gs_shape *pair[2] = {input, res};
    return input ? emit(c, out, new_tuple(c, 2, pair)) : oom(c);
}

gs_status gs_infer_all_reduce(ictx *c, gs_shape **out) {
    gmode mode;
    if (group_mode(c, true, &mode) != GS_OK || check_groups(c, mode, false) != GS_OK) return GS_ERR;
    int n = c->in->n_operands;
    for (int k = 0; k < n; k++) {
        const gs_shape *s = opnd(c, k);
        if (!arr(s) && !(n == 1 && s->type == GS_TUPLE))
            return fail(c, "operand %d must be an array, not %s", k, sh(c, s));
    }
    if (check_binary_combiner(c) != GS_OK) return GS_ERR;
    return gs_infer_operands_as_result(c, out);
}

gs_status gs_infer_all_to_all(ictx *c, gs_shape **out) {
    gmode mode;
    if (group_mode(c, false, &mode) != GS_OK || check_groups(c, mode, true) != GS_OK) return GS_ERR;
    int n = c->in->n_operands;
    int64_t split = subgroup_size(c, mode), d;
    for (int k = 0; k < n; k++)
        if (!arr(opnd(c, k)))
            return fail(c, "operand %d must be an array, not %s", k, sh(c, opnd(c, k)));
    if (attr(c, GS_ATTR_DIMENSIONS)) {
        const gs_shape *s = opnd(c, 0);
        if (n != 1) return fail(c, "the array form takes one operand, not %d", n);
        if (gs_infer_need_one_dim(c, s, "split dimension", &d) != GS_OK) return GS_ERR;
        if (split > 1 && s->dims[d] >= 0 && s->dims[d] % split != 0)
            return fail(c, "dimension %lld of %s does not split into %lld parts", (long long)d,
                        sh(c, s), (long long)split);
        return emit(c, out, copy_as(c, s, s->type));
    }
    for (int k = 1; k < n; k++)
        if (!gs_shape_compatible(opnd(c, k), opnd(c, 0), false))
            return fail(c, "operands %s and %s have different shapes", sh(c, opnd(c, 0)),
                        sh(c, opnd(c, k)));
    if (split > 1 && n != split)
        return fail(c, "the tuple form takes one operand per device of a group (%lld), not %d",
                    (long long)split, n);
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n);
    if (!elems) return oom(c);
    for (int k = 0; k < n; k++) elems[k] = opnd(c, k);
    return emit(c, out, new_tuple(c, n, elems));
}

/* collective-permute(-start): ids in range of the replicas (no channel) or partitions, no
 * source or target twice (unless the in-place form with 4 operands). */
gs_status gs_infer_collective_permute(ictx *c, gs_shape **out) {
    const gs_attr *at = attr(c, GS_ATTR_SOURCE_TARGET_PAIRS);
    bool channel = attr(c, GS_ATTR_CHANNEL_ID) != NULL;
    int64_t limit = channel ? c->num_partitions : c->replica_count;
    int n = c->in->n_operands;
    if (at) {
        gs_pairs p = at->u.pairs;
        for (int i = 0; i < p.n; i++)
            for (int k = 0; k < 2; k++) {
                int64_t id = p.v[i][k];
                const char *what = k ? "target" : "source";
                if (id < 0 || (limit != 1 && id >= limit))
                    return fail(c, "%s %lld in source_target_pairs is out of range for %s=%lld",
                                what, (long long)id, channel ? "num_partitions" : "replica_count",
                                (long long)limit);
                for (int j = 0; n != 4 && j < i; j++)
                    if (p.v[j][k] == id)
                        return fail(c, "%s %lld appears twice in source_target_pairs", what,
                                    (long long)id);
            }
    }
    for (int k = 0; k < n; k++)
        if (!arr(opnd(c, k)) && !(n != 1 && opnd(c, k)->type == GS_TUPLE))
            return fail(c, "operand %d must be an array, not %s", k, sh(c, opnd(c, k)));
    if (c->in->op == GS_OP_COLLECTIVE_PERMUTE_START) return GS_OK;
    if (n == 4) return emit(c, out, opnd(c, 1));
    return gs_infer_operands_as_result(c, out);
}

gs_status gs_infer_collective_broadcast(ictx *c, gs_shape **out) {
    gmode mode;
    if (group_mode(c, false, &mode) != GS_OK || check_groups(c, mode, true) != GS_OK) return GS_ERR;
    return gs_infer_operands_as_result(c, out);
}

gs_status gs_infer_ragged_all_to_all(ictx *c, gs_shape **out) {
    for (int k = 0; k < c->in->n_operands; k++)
        if (!arr(opnd(c, k)))
            return fail(c, "operand %d must be an array, not %s", k, sh(c, opnd(c, k)));
    return emit(c, out, opnd(c, 1));
}
