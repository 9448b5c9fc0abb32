/*
 * graph.c — the pass's view of the module: one node per instruction with its distinct users,
 * XLA's post order per computation, the computation map (which while / conditional / call runs
 * a computation), and the reading of annotations, done the way XLA's ShardingPropagation::Run
 * prepares them:
 *
 *   - annotations are checked against their instruction (tile rank, tuple leaves, device count
 *     against num_partitions) and rejected with a located error;
 *   - `custom-call` Sharding constraints become copies carrying the annotation (XLA replaces
 *     them by kCopy); an unknown one that only names a shard group is looked through, its group
 *     moving to its operand; a fully specified one also annotates an unsharded operand;
 *     `unspecified_dims` in backend_config make the annotation partial;
 *   - shard_as / shard_like groups are collected (members must have the same dims);
 *   - a while body holding a channel instruction pinned to one device pins the loop to it;
 *   - the shardings of a while, its body root and parameter and condition parameter (likewise
 *     a conditional and its branch roots, a call and its callee's root) are made equal;
 *   - annotations become `provided`: never overwritten (parameters and the entry root only
 *     when propagation to them is off); unknown shardings turn into replicated ones.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

gs_instr *gs_prop_operand(const gs_instr *in, int i) {
    gs_instr *op = in->operands[i];
    while (op->aux && GS_PROP_NODE(op)->alias) op = GS_PROP_NODE(op)->alias;
    return op;
}

const gs_prop_slot *gs_prop_slot_of(const gs_instr *in, const gs_instr *user) {
    const gs_prop_node *n = in->aux ? GS_PROP_NODE(in) : NULL;
    for (int i = 0; n && i < n->n_users; i++)
        if (n->users[i] == user) return &n->slots[i];
    return NULL;
}

bool gs_prop_is_cc(const gs_instr *in, const char *target) {
    if (in->op != GS_OP_CUSTOM_CALL) return false;
    const char *t = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
    return t && strcmp(t, target) == 0;
}

bool gs_prop_is_copy(const gs_instr *in) {
    return in->op == GS_OP_COPY || (in->aux && GS_PROP_NODE(in)->copy_like);
}

bool gs_prop_is_elementwise(const gs_instr *in) {
    if (gs_prop_is_copy(in)) return true;
    if (in->op == GS_OP_RNG) return true;
    if (in->op == GS_OP_BITCAST_CONVERT)
        return in->n_operands == 1 && in->shape->type != GS_TUPLE &&
               gs_type_bits(in->shape->type) == gs_type_bits(in->operands[0]->shape->type);
    return (gs_op_info_of(in->op)->flags & GS_OPF_ELEMENTWISE) != 0;
}

int gs_prop_non_root_users(const gs_instr *in) {
    const gs_prop_node *n = GS_PROP_NODE(in);
    int k = 0;
    for (int i = 0; i < n->n_users; i++)
        if (n->users[i] != in->parent->root) k++;
    return k;
}

int gs_prop_parse_unspec(gs_arena *a, const gs_instr *in, int64_t **out) {
    *out = NULL;
    const gs_attr *at = gs_instr_attr(in, GS_ATTR_BACKEND_CONFIG);
    const char *t = at ? at->u.s : NULL;
    if (!t) return 0;
    const char *p = strstr(t, "unspecified_dims=");
    if (!p) return 0;
    p += strlen("unspecified_dims=");
    if (*p != '[') return -1;
    p++;
    int64_t v[GS_MAX_RANK];
    int n = 0;
    while (*p && *p != ']') {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ']') break;
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p || x < 0 || n >= GS_MAX_RANK) return -1;
        v[n++] = x;
        p = end;
    }
    if (*p != ']') return -1;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            int64_t x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    if (n == 0) return 0;
    *out = GS_NEW_ARRAY(a, int64_t, n);
    if (!*out) return -2;
    memcpy(*out, v, sizeof *v * (size_t)n);
    return n;
}

/* ------------------------------------------------------------------ users and post order */

/* Walks every (operand, user) pair once per distinct operand of each user (aliases looked
 * through), in text order: counts each node's users, or with `fill` also stores them and where
 * they read it. A node's stamp says which user read it last (*stamp counts users), so a user
 * with many operands (a program's root tuple) is walked once, not once per operand. */
static void visit_users(gs_prop_ctx *c, bool fill, int *stamp) {
    for (int ci = 0; ci < c->m->n_comps; ci++) {
        gs_computation *comp = c->m->comps[ci];
        for (int k = 0; k < comp->n_instrs; k++) {
            gs_instr *in = comp->instrs[k];
            if (GS_PROP_NODE(in)->alias) continue;
            int me = ++*stamp;
            for (int j = 0; j < in->n_operands; j++) {
                gs_prop_node *n = GS_PROP_NODE(gs_prop_operand(in, j));
                if (n->stamp == me) { /* read again by this user, the last one it was given */
                    if (fill) n->slots[n->n_users - 1].count++;
                    continue;
                }
                n->stamp = me;
                if (fill) {
                    n->users[n->n_users] = in;
                    n->slots[n->n_users] = (gs_prop_slot){j, 1};
                }
                n->n_users++;
            }
        }
    }
}

/* Fills every node's distinct users (aliases looked through), in text order. */
static gs_status build_users(gs_prop_ctx *c) {
    int stamp = 0;
    for (int i = 0; i < c->n_nodes; i++) c->nodes[i].n_users = 0;
    visit_users(c, false, &stamp);
    for (int i = 0; i < c->n_nodes; i++) {
        gs_prop_node *n = &c->nodes[i];
        n->users = n->n_users ? GS_NEW_ARRAY(&c->scratch, gs_instr *, n->n_users) : NULL;
        n->slots = n->n_users ? GS_NEW_ARRAY(&c->scratch, gs_prop_slot, n->n_users) : NULL;
        if (n->n_users && (!n->users || !n->slots)) return GS_ERR;
        n->n_users = 0;
    }
    visit_users(c, true, &stamp);
    return GS_OK;
}

/* XLA's MakeInstructionPostOrder: a depth-first post order from every instruction without
 * users, in instruction order, visiting operands first to last. */
static gs_status build_orders(gs_prop_ctx *c) {
    int n_comps = c->m->n_comps;
    c->orders = GS_NEW_ARRAY(&c->scratch, gs_instr **, n_comps ? n_comps : 1);
    c->n_order = GS_NEW_ARRAY(&c->scratch, int, n_comps ? n_comps : 1);
    if (!c->orders || !c->n_order) return GS_ERR;
    int max = 1;
    for (int ci = 0; ci < n_comps; ci++)
        if (c->m->comps[ci]->n_instrs > max) max = c->m->comps[ci]->n_instrs;
    gs_instr **stack = malloc(sizeof *stack * (size_t)(max * 8 + 16));
    size_t cap = (size_t)max * 8 + 16;
    if (!stack) return GS_ERR;
    gs_status st = GS_OK;
    for (int ci = 0; ci < n_comps && st == GS_OK; ci++) {
        gs_computation *comp = c->m->comps[ci];
        gs_instr **order = GS_NEW_ARRAY(&c->scratch, gs_instr *, comp->n_instrs ? comp->n_instrs
                                                                                 : 1);
        if (!order) {
            st = GS_ERR;
            break;
        }
        int n = 0;
        for (int k = 0; k < comp->n_instrs; k++) GS_PROP_NODE(comp->instrs[k])->mark = 0;
        for (int k = 0; k < comp->n_instrs && st == GS_OK; k++) {
            gs_instr *root = comp->instrs[k];
            if (GS_PROP_NODE(root)->alias || GS_PROP_NODE(root)->n_users > 0) continue;
            size_t sp = 0;
            stack[sp++] = root;
            while (sp > 0) {
                gs_instr *cur = stack[sp - 1];
                gs_prop_node *cn = GS_PROP_NODE(cur);
                if (cn->mark) {
                    sp--;
                    if (cn->mark == 1) {
                        order[n++] = cur;
                        cn->mark = 2;
                    }
                    continue;
                }
                cn->mark = 1;
                if (sp + (size_t)cur->n_operands >= cap) {
                    size_t ncap = cap * 2 + (size_t)cur->n_operands;
                    gs_instr **ns = realloc(stack, sizeof *ns * ncap);
                    if (!ns) {
                        st = GS_ERR;
                        break;
                    }
                    stack = ns;
                    cap = ncap;
                }
                for (int j = cur->n_operands - 1; j >= 0; j--) {
                    gs_instr *op = gs_prop_operand(cur, j);
                    if (op->parent == comp && GS_PROP_NODE(op)->mark != 2) stack[sp++] = op;
                }
            }
        }
        c->orders[ci] = order;
        c->n_order[ci] = n;
    }
    free(stack);
    return st;
}

/* ------------------------------------------------------------------ annotations */

/* Whether annotation s fits instruction in; else a located error. */
static gs_status check_fit(gs_prop_ctx *c, const gs_instr *in, const gs_sharding *s) {
    const gs_shape *sh = in->shape;
    if (in->op == GS_OP_OUTFEED && s->kind == GS_SHARDING_TUPLE && in->n_operands > 0) {
        /* XLA shards an outfeed over its data's leaves and the token. */
        int need = gs_prop_leaf_count(in->operands[0]->shape) + 1;
        if (s->n_tuple != need)
            return gs_error(c->d, in->span,
                            "the tuple sharding of outfeed '%s' has %d elements but its data and "
                            "token have %d leaves",
                            in->name, s->n_tuple, need);
        return GS_OK;
    }
    if (s->kind == GS_SHARDING_TUPLE) {
        if (sh->type != GS_TUPLE)
            return gs_error(c->d, in->span,
                            "'%s' has a tuple sharding but its shape is not a tuple", in->name);
        int need = gs_prop_required_leaves(sh);
        if (s->n_tuple != need)
            return gs_error(c->d, in->span,
                            "the tuple sharding of '%s' has %d elements but its shape has %d "
                            "leaves",
                            in->name, s->n_tuple, need);
    }
    int n = s->kind == GS_SHARDING_TUPLE ? s->n_tuple : 1;
    int off = 0;
    for (int i = 0; i < n; i++) {
        const gs_sharding *l = s->kind == GS_SHARDING_TUPLE ? s->tuple[i] : s;
        /* The leaf shape this element shards (every leaf for a non-tuple sharding). */
        const gs_shape *leaf = sh;
        if (sh->type == GS_TUPLE && s->kind == GS_SHARDING_TUPLE) {
            /* Depth-first leaf number off + i. */
            int want = i, stack_n = 0;
            const gs_shape *stack[GS_MAX_RANK * 4];
            int idx[GS_MAX_RANK * 4];
            const gs_shape *cur = sh;
            int pos = 0;
            (void)off;
            leaf = NULL;
            stack[stack_n] = cur;
            idx[stack_n++] = 0;
            while (stack_n > 0 && !leaf) {
                const gs_shape *top = stack[stack_n - 1];
                if (top->type != GS_TUPLE) {
                    if (pos == want) leaf = top;
                    pos++;
                    stack_n--;
                    continue;
                }
                if (idx[stack_n - 1] >= top->n_tuple || stack_n >= GS_MAX_RANK * 4) {
                    stack_n--;
                    continue;
                }
                const gs_shape *child = top->tuple[idx[stack_n - 1]++];
                stack[stack_n] = child;
                idx[stack_n++] = 0;
            }
        }
        if (l->kind == GS_SHARDING_TILED && leaf && leaf->type != GS_TUPLE &&
            leaf->type != GS_TOKEN && l->data_rank != leaf->rank)
            return gs_error(c->d, in->span,
                            "the sharding of '%s' has %d tile dims but the instruction has "
                            "rank %d",
                            in->name, l->data_rank, leaf ? leaf->rank : 0);
    }
    /* A module that says num_partitions fixes the devices its shardings may use. */
    if (c->m->num_partitions > 1)
        return gs_sharding_check_devices(s, in, c->m->num_partitions, c->d);
    return GS_OK;
}

/* The group with that id and kind, created when absent; NULL on allocation failure. */
static gs_prop_group *group_for(gs_prop_ctx *c, int64_t id, bool as) {
    for (int i = 0; i < c->n_groups; i++)
        if (c->groups[i].id == id && c->groups[i].as == as) return &c->groups[i];
    if (c->n_groups == c->cap_groups) {
        int cap = c->cap_groups ? c->cap_groups * 2 : 4;
        gs_prop_group *v = GS_NEW_ARRAY(&c->scratch, gs_prop_group, cap);
        if (!v) return NULL;
        if (c->n_groups) memcpy(v, c->groups, sizeof *v * (size_t)c->n_groups);
        c->groups = v;
        c->cap_groups = cap;
    }
    gs_prop_group *g = &c->groups[c->n_groups++];
    memset(g, 0, sizeof *g);
    g->id = id;
    g->as = as;
    return g;
}

/* Adds `in` to the shard group its sharding names and clears the group from the sharding. */
static gs_status join_group(gs_prop_ctx *c, gs_instr *in) {
    const gs_sharding *s = GS_PROP_SHARDING(in);
    bool as = s->group == GS_SHARD_GROUP_AS;
    gs_prop_group *g = group_for(c, s->group_id, as);
    if (!g) return GS_ERR;
    if (g->n > 0 && !gs_shape_same_dims(g->members[0]->shape, in->shape)) {
        char *a = gs_shape_to_string(&c->scratch, in->shape);
        char *b = gs_shape_to_string(&c->scratch, g->members[0]->shape);
        return gs_error(c->d, in->span,
                        "'%s' (%s) is in %s group %lld with '%s' of shape %s: members of a "
                        "group must have the same dims",
                        in->name, a ? a : "?", as ? "shard_as" : "shard_like",
                        (long long)g->id, g->members[0]->name, b ? b : "?");
    }
    if (g->n == g->cap) {
        int cap = g->cap ? g->cap * 2 : 4;
        gs_instr **v = GS_NEW_ARRAY(&c->scratch, gs_instr *, cap);
        if (!v) return GS_ERR;
        if (g->n) memcpy(v, g->members, sizeof *v * (size_t)g->n);
        g->members = v;
        g->cap = cap;
    }
    g->members[g->n++] = in;
    GS_PROP_NODE(in)->group = (int)(g - c->groups);
    gs_sharding *cleared = gs_sharding_with_group(c->a, s, GS_SHARD_GROUP_NONE, 0);
    if (!cleared) return GS_ERR;
    GS_PROP_NODE(in)->sh = cleared;
    return GS_OK;
}

/* XLA's ProcessShardingInstruction over one computation (reverse post order). */
static gs_status process_sharding_ccs(gs_prop_ctx *c, int ci, bool replace) {
    gs_instr **order = c->orders[ci];
    for (int k = c->n_order[ci] - 1; k >= 0; k--) {
        gs_instr *in = order[k];
        gs_prop_node *n = GS_PROP_NODE(in);
        if (!gs_prop_is_cc(in, "Sharding")) {
            if (replace && n->sh && n->sh->group != GS_SHARD_GROUP_NONE &&
                join_group(c, in) != GS_OK)
                return c->d->n_errors ? GS_ERR : (c->oom = true, GS_ERR);
            continue;
        }
        if (!n->sh)
            return gs_error(c->d, in->span,
                            "the Sharding custom-call '%s' has no sharding attribute", in->name);
        if (in->n_operands != 1)
            return gs_error(c->d, in->span,
                            "the Sharding custom-call '%s' must have one operand", in->name);
        int64_t *unspec = NULL;
        int nu = gs_prop_parse_unspec(&c->scratch, in, &unspec);
        if (nu == -1)
            return gs_error(c->d, in->span,
                            "malformed unspecified_dims in the backend_config of '%s'", in->name);
        if (nu < -1) return GS_ERR;
        gs_instr *op = gs_prop_operand(in, 0);
        bool unknown = n->sh->kind == GS_SHARDING_UNKNOWN;
        bool replaced = replace && (!unknown || op->op == GS_OP_PARAMETER);
        n->copy_like = replaced;
        bool remove = false;
        if (replace && n->sh->group != GS_SHARD_GROUP_NONE) {
            if (!replaced) {
                /* Only names a group: its operand joins the group instead. */
                const gs_sharding *base = GS_PROP_SHARDING(op);
                if (!base) base = gs_sharding_unknown(c->a);
                gs_sharding *g = base ? gs_sharding_with_group(c->a, base, n->sh->group,
                                                               n->sh->group_id)
                                      : NULL;
                if (!g) return GS_ERR;
                GS_PROP_NODE(op)->sh = g;
                remove = true;
            } else if (join_group(c, in) != GS_OK) {
                return c->d->n_errors ? GS_ERR : (c->oom = true, GS_ERR);
            }
        }
        if (nu > 0) {
            n->unspec = unspec;
            n->n_unspec = nu;
            n->has_unspec = true;
        } else if (!GS_PROP_SHARDING(op)) {
            gs_prop_set(c, op, n->sh, GS_PROP_DIR_ANNOTATION, in, "Sharding custom-call");
        }
        if (remove) n->alias = op;
    }
    return GS_OK;
}

/* ------------------------------------------------------------------ computation map */

int gs_prop_related(gs_prop_ctx *c, gs_instr *in, gs_instr **out, int max) {
    (void)c;
    int n = 0;
    gs_computation *called[64];
    if (in->op == GS_OP_WHILE) {
        gs_computation *body = gs_instr_comp(in, GS_ATTR_BODY);
        gs_computation *cond = gs_instr_comp(in, GS_ATTR_CONDITION);
        if (!body || !cond || body->n_params < 1 || cond->n_params < 1 || max < 4) return 0;
        out[n++] = in;
        out[n++] = body->root;
        out[n++] = body->params[0];
        out[n++] = cond->params[0];
        return n;
    }
    if (in->op == GS_OP_CONDITIONAL) {
        int k = gs_instr_called(in, called, 64);
        out[n++] = in;
        for (int i = 0; i < k && n < max; i++) out[n++] = called[i]->root;
        return n;
    }
    if (in->op == GS_OP_CALL) {
        int k = gs_instr_called(in, called, 64);
        if (k < 1 || max < 2) return 0;
        out[n++] = in;
        out[n++] = called[0]->root;
        return n;
    }
    if (in->op == GS_OP_PARAMETER && GS_PROP_NODE(in)->caller) {
        gs_instr *caller = GS_PROP_NODE(in)->caller;
        if (caller->op == GS_OP_CONDITIONAL) {
            int k = gs_instr_called(caller, called, 64);
            for (int i = 0; i < k && i + 1 < caller->n_operands; i++)
                if (called[i] == in->parent && max >= 2) {
                    out[n++] = in;
                    out[n++] = gs_prop_operand(caller, i + 1);
                    return n;
                }
        }
        if (caller->op == GS_OP_CALL && in->parameter_number < caller->n_operands && max >= 2) {
            out[n++] = in;
            out[n++] = gs_prop_operand(caller, (int)in->parameter_number);
            return n;
        }
    }
    return 0;
}

/* The error of an instruction pinned to another device than the loop's channel instruction. */
static gs_status device_conflict(gs_prop_ctx *c, const gs_instr *in, int64_t dev, int64_t unique,
                                 const gs_instr *channel) {
    return gs_error(c->d, in->span,
                    "instruction '%s' is on device %lld, which conflicts with device %lld of "
                    "channel instruction '%s'",
                    in->name, (long long)dev, (long long)unique, channel->name);
}

/* XLA CheckAndUpdateDeviceAssignmentsInWhileBody: a while body holding a channel instruction
 * (send/recv that is not a host transfer, all-reduce/reduce-scatter with a channel id) pinned
 * to one device keeps every pinned instruction on that device and pins its root there. */
static gs_status check_while_devices(gs_prop_ctx *c, gs_instr *w) {
    gs_computation *body = gs_instr_comp(w, GS_ATTR_BODY);
    if (!body) return GS_OK;
    int64_t unique = -1;
    gs_instr *channel = NULL;
    /* Devices seen before the channel instruction, the last instruction on each (XLA's map). */
    enum { MAX_SEEN = 64 };
    int64_t seen_dev[MAX_SEEN];
    gs_instr *seen_in[MAX_SEEN];
    int n_seen = 0;
    for (int k = 0; k < body->n_instrs; k++) {
        gs_instr *in = body->instrs[k];
        int64_t dev = gs_prop_unique_device(GS_PROP_SHARDING(in));
        if (dev < 0) continue;
        const gs_attr *host = gs_instr_attr_named(in, "is_host_transfer");
        bool is_host = host && host->u.s && strcmp(host->u.s, "true") == 0;
        bool is_channel =
            ((in->op == GS_OP_SEND || in->op == GS_OP_RECV) && !is_host) ||
            ((in->op == GS_OP_ALL_REDUCE || in->op == GS_OP_REDUCE_SCATTER) &&
             gs_instr_attr(in, GS_ATTR_CHANNEL_ID));
        if (unique >= 0) {
            if (dev != unique) return device_conflict(c, in, dev, unique, channel);
        } else if (is_channel) {
            channel = in;
            unique = dev;
            /* Ascending device order, as XLA's std::map iterates. */
            gs_instr *bad = NULL;
            int64_t bad_dev = -1;
            for (int i = 0; i < n_seen; i++)
                if (seen_dev[i] != unique && (!bad || seen_dev[i] < bad_dev)) {
                    bad = seen_in[i];
                    bad_dev = seen_dev[i];
                }
            if (bad) return device_conflict(c, bad, bad_dev, unique, channel);
        } else {
            int i = 0;
            while (i < n_seen && seen_dev[i] != dev) i++;
            if (i == n_seen && n_seen < MAX_SEEN) seen_dev[n_seen++] = dev;
            if (i < MAX_SEEN) seen_in[i] = in;
        }
    }
    if (unique < 0) return GS_OK;
    int64_t wdev = gs_prop_unique_device(GS_PROP_SHARDING(w));
    if (wdev >= 0 && wdev != unique) return device_conflict(c, w, wdev, unique, channel);
    gs_instr *root = body->root;
    int64_t rdev = gs_prop_unique_device(GS_PROP_SHARDING(root));
    if (rdev < 0) {
        gs_sharding *m = gs_sharding_maximal(c->a, unique);
        const gs_sharding *s = m ? gs_prop_single_tuple(c, root->shape, m) : NULL;
        if (!s) return GS_ERR;
        gs_prop_set(c, root, s, GS_PROP_DIR_FIXUP, channel, "while channel device");
    } else if (rdev != unique) {
        return device_conflict(c, root, rdev, unique, channel);
    }
    return GS_OK;
}

/* ------------------------------------------------------------------ setup */

/* The computation map (each called computation's instructions know their caller) and the
 * shardings a loop, branch or call shares with its computations' parameters and roots. */
static gs_status share_called_shardings(gs_prop_ctx *c) {
    gs_module *m = c->m;
    for (int ci = 0; ci < m->n_comps; ci++) {
        gs_computation *comp = m->comps[ci];
        for (int i = 0; i < comp->n_instrs; i++) {
            gs_instr *in = comp->instrs[i];
            if (in->op == GS_OP_WHILE && check_while_devices(c, in) != GS_OK) return GS_ERR;
        }
    }
    for (int ci = 0; ci < m->n_comps; ci++) {
        gs_computation *comp = m->comps[ci];
        for (int i = 0; i < comp->n_instrs; i++) {
            gs_instr *in = comp->instrs[i];
            if (in->op != GS_OP_WHILE && in->op != GS_OP_CONDITIONAL && in->op != GS_OP_CALL)
                continue;
            gs_instr *rel[66];
            int nr = gs_prop_related(c, in, rel, 66);
            gs_instr *sharded = NULL;
            for (int r = 0; r < nr && !sharded; r++)
                if (GS_PROP_SHARDING(rel[r])) sharded = rel[r];
            if (sharded) {
                const gs_sharding *s = GS_PROP_SHARDING(sharded);
                for (int r = 0; r < nr; r++) {
                    if (rel[r] == sharded) continue;
                    const gs_sharding *old = GS_PROP_SHARDING(rel[r]);
                    if (old && !gs_sharding_equal(old, s))
                        gs_warning(c->d, rel[r]->span,
                                   "the sharding of '%s' conflicts with that of '%s', which must "
                                   "be the same; using the latter's (as XLA does)",
                                   rel[r]->name, sharded->name);
                    if (!old || !gs_sharding_equal(old, s))
                        gs_prop_set(c, rel[r], s, GS_PROP_DIR_CALL, sharded, "shared with caller");
                }
            }
            gs_computation *called[64];
            int nc = gs_instr_called(in, called, 64);
            if (in->op == GS_OP_WHILE) {
                gs_computation *body = gs_instr_comp(in, GS_ATTR_BODY);
                gs_computation *cond = gs_instr_comp(in, GS_ATTR_CONDITION);
                nc = 0;
                if (body) called[nc++] = body;
                if (cond) called[nc++] = cond;
            }
            for (int j = 0; j < nc; j++)
                for (int l = 0; l < called[j]->n_instrs; l++)
                    GS_PROP_NODE(called[j]->instrs[l])->caller = in;
        }
    }
    return GS_OK;
}

/* Shardings the user provided: annotations other than the entry's root and parameters, and
 * those too unless propagation to outputs / parameters is allowed. */
static void mark_provided(gs_prop_ctx *c) {
    gs_module *m = c->m;
    for (int i = 0; i < c->n_nodes; i++) {
        gs_prop_node *n = &c->nodes[i];
        if (!n->sh || n->alias) continue;
        if (n->in == c->entry_root || n->in->op == GS_OP_PARAMETER) continue;
        if (n->sh->kind == GS_SHARDING_UNKNOWN) continue;
        n->provided = true;
    }
    if (c->entry_root) {
        gs_prop_node *rn = GS_PROP_NODE(c->entry_root);
        if (!c->to_output && (!rn->sh || rn->sh->kind != GS_SHARDING_UNKNOWN)) {
            /* XLA pins the output through a copy when the root is a while, so that shardings
             * still flow into the loop; the while itself stays free. */
            if (c->entry_root->op == GS_OP_WHILE)
                c->root_while_free = true;
            else
                rn->provided = true;
        }
    }
    if (!c->to_params && m->entry) {
        for (int i = 0; i < m->entry->n_params; i++) {
            gs_prop_node *n = GS_PROP_NODE(m->entry->params[i]);
            if (n->sh && n->sh->kind != GS_SHARDING_UNKNOWN) n->provided = true;
        }
    }
}

/* Unknown shardings take part as replicated. */
static gs_status unknown_as_replicated(gs_prop_ctx *c) {
    for (int i = 0; i < c->n_nodes; i++) {
        gs_prop_node *n = &c->nodes[i];
        if (!n->sh) continue;
        if (n->sh->kind == GS_SHARDING_UNKNOWN) {
            gs_sharding *r = gs_sharding_replicated(c->a);
            if (!r) return GS_ERR;
            r->metadata = n->sh->metadata;
            n->sh = r;
        } else if (n->sh->kind == GS_SHARDING_TUPLE) {
            bool any = false;
            for (int j = 0; j < n->sh->n_tuple; j++)
                any = any || n->sh->tuple[j]->kind == GS_SHARDING_UNKNOWN;
            if (!any) continue;
            gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, n->sh->n_tuple);
            if (!v) return GS_ERR;
            for (int j = 0; j < n->sh->n_tuple; j++) {
                v[j] = n->sh->tuple[j];
                if (v[j]->kind == GS_SHARDING_UNKNOWN && !(v[j] = gs_sharding_replicated(c->a)))
                    return GS_ERR;
            }
            gs_sharding *t = gs_sharding_tuple(c->a, n->sh->n_tuple, v);
            if (!t) return GS_ERR;
            n->sh = t;
        }
    }
    return GS_OK;
}

gs_status gs_prop_setup(gs_prop_ctx *c) {
    gs_module *m = c->m;
    int total = 0;
    for (int ci = 0; ci < m->n_comps; ci++) total += m->comps[ci]->n_instrs;
    c->n_nodes = total;
    c->nodes = GS_NEW_ARRAY(&c->scratch, gs_prop_node, total ? total : 1);
    if (!c->nodes) return GS_ERR;
    int k = 0;
    for (int ci = 0; ci < m->n_comps; ci++) {
        gs_computation *comp = m->comps[ci];
        for (int i = 0; i < comp->n_instrs; i++) {
            gs_instr *in = comp->instrs[i];
            gs_prop_node *n = &c->nodes[k++];
            n->in = in;
            n->group = -1;
            n->comp = ci;
            in->aux = n;
        }
    }
    c->entry_root = m->entry ? m->entry->root : NULL;
    /* Annotations. */
    for (int i = 0; i < c->n_nodes; i++) {
        gs_prop_node *n = &c->nodes[i];
        const gs_sharding *s = gs_instr_get_sharding(n->in);
        if (!s) continue;
        if (check_fit(c, n->in, s) != GS_OK) return GS_ERR;
        n->orig_had = true;
        n->orig = s;
        if (!c->cse_only && gs_prop_is_cse_marked(s)) continue;
        n->sh = s;
        if (c->record) gs_prop_set(c, n->in, s, GS_PROP_DIR_ANNOTATION, NULL, "sharding attribute");
    }
    if (build_users(c) != GS_OK || build_orders(c) != GS_OK) return GS_ERR;
    /* Sharding custom-calls and shard groups. */
    bool any_alias = false;
    for (int ci = 0; ci < m->n_comps; ci++) {
        if (process_sharding_ccs(c, ci, !c->cse_only) != GS_OK) return GS_ERR;
    }
    for (int i = 0; i < c->n_nodes; i++) any_alias = any_alias || c->nodes[i].alias;
    if (any_alias && (build_users(c) != GS_OK || build_orders(c) != GS_OK)) return GS_ERR;
    if (share_called_shardings(c) != GS_OK) return GS_ERR;
    mark_provided(c);
    return unknown_as_replicated(c);
}
