/*
 * from_ir.c — the IR as Shardy's propagation sees it, and its result written back.
 *
 * Values are the array leaves of the instructions of every function (the entry, and what calls
 * call) and of the regions of their while loops and conditionals; a get-tuple-element or a tuple
 * is no op of its own but the leaves it selects (MLIR has multi-result ops, not tuples). Every
 * other instruction is an op whose rule is its gs_op_rule (nothing propagates through an op
 * without a specific rule, as Shardy skips ops without a registered one); a `Sharding`
 * custom-call (sdy.sharding_constraint) is the identity. The entry's tuple root stands for the
 * function's results, each with its own sharding.
 *
 * While loops and conditionals are crossed as Shardy's data-flow edges cross them: each result
 * leaf owns an edge, an identity op from its sources (a loop's operand and its body's returned
 * value; each branch's returned value) to the result, whose sharding the loop's body and
 * condition parameters share (a branch's parameter is the value it was given). An optimization
 * barrier's results own edges from its operands.
 *
 * Only Shardy (named) shardings take part (gs_sharding.named, as `#sdy.sharding` reads): a value
 * with an HLO sharding has none for this pass, and keeps its own.
 */
#include "internal.h"
#include "../internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct builder {
    gs_arena *a;           /* the module's arena (rules, shardings) */
    sdy_graph *g;
    gs_vec values, ops;    /* sdy_value, sdy_op */
    gs_vec meshes;         /* const gs_mesh * */
    gs_vec templates;      /* const gs_named *: a named sharding of each mesh, copied on write */
    int ***leaves;         /* per computation index, per instruction id: the value of each
                              array leaf (-1: none), NULL for an instruction not mapped */
    gs_strmap comp_index;  /* computation name -> its index + 1 */
    gs_vec group_pairs;    /* int64_t[2]: (shard_as group id, value) */
    bool conservative;     /* rules built for conservative propagation */
    bool pipeline;         /* calls crossed as named computations (gs_sdy_options.pipeline) */
    bool shared_calls;     /* ... or, the functions left shared, by edges from every call
                              (gs_sdy_options.dedup_functions_fully) */
    gs_vec func_edges;     /* func_edge: each sdy.func_data_flow_edge, its sources set last */
    bool oom;
} builder;

/* An sdy.func_data_flow_edge marker and its op, whose sources (a function argument's: the
 * operand of every call of the function; a call result's: the value the callee returns) are
 * known once every function is built. */
typedef struct func_edge {
    int op;
    const gs_instr *in;
} func_edge;

static bool mesh_eq(const gs_mesh *x, const gs_mesh *y) {
    if (x == y) return true;
    if (x->n_axes != y->n_axes || x->device_order != y->device_order) return false;
    for (int i = 0; i < x->n_axes; i++)
        if (x->sizes[i] != y->sizes[i] || strcmp(x->names[i], y->names[i]) != 0) return false;
    return !x->device_order || gs_tile_equal(&x->devices, &y->devices);
}

static int intern_mesh(builder *b, const gs_named *nm) {
    for (size_t i = 0; i < b->meshes.n; i++)
        if (mesh_eq(((const gs_mesh **)b->meshes.data)[i], &nm->mesh)) return (int)i;
    const gs_mesh *m = &nm->mesh;
    if (gs_vec_push(&b->meshes, &m) != GS_OK || gs_vec_push(&b->templates, &nm) != GS_OK) {
        b->oom = true;
        return -1;
    }
    return (int)b->meshes.n - 1;
}

/* The Shardy sharding of an IR sharding leaf, or NULL when it has none. */
static sdy_sharding *from_named(builder *b, const gs_sharding *s, int rank) {
    if (!s || !s->named || s->named->form != GS_NAMED_DIMS || s->named->n_dims != rank)
        return NULL;
    const gs_named *nm = s->named;
    int mesh = intern_mesh(b, nm);
    sdy_sharding *out = GS_NEW(b->a, sdy_sharding);
    if (mesh < 0 || !out || (rank && !(out->dims = GS_NEW_ARRAY(b->a, sdy_dim, rank)))) {
        b->oom = true;
        return NULL;
    }
    out->mesh = mesh;
    out->rank = rank;
    for (int d = 0; d < rank; d++) {
        sdy_axes_from_list(&out->dims[d].axes, &nm->dims[d]);
        out->dims[d].closed = !nm->dims[d].open;
        out->dims[d].priority = nm->priorities ? nm->priorities[d] : -1;
    }
    sdy_axes_from_list(&out->replicated, &nm->replicated);
    sdy_axes_from_list(&out->unreduced, &nm->unreduced);
    sdy_axes_from_list(&out->manual, &nm->manual);
    return out;
}

static gs_axis_list to_list(gs_arena *a, const sdy_axes *x, bool open, bool *oom) {
    gs_axis_list l = {x->n, NULL, open};
    if (x->n) {
        gs_axis_ref *v = GS_NEW_ARRAY(a, gs_axis_ref, x->n);
        if (!v) *oom = true;
        else memcpy(v, x->v, sizeof *v * (size_t)x->n);
        l.v = v;
    }
    return l;
}

/* The IR sharding of s (on the graph's mesh), or NULL on OOM. */
static gs_sharding *to_ir(builder *b, const sdy_sharding *s) {
    const gs_named *tpl = ((const gs_named **)b->templates.data)[s->mesh];
    gs_named *nm = GS_NEW(b->a, gs_named);
    if (!nm) return NULL;
    *nm = *tpl;
    nm->form = GS_NAMED_DIMS;
    nm->n_dims = s->rank;
    gs_axis_list *dims = s->rank ? GS_NEW_ARRAY(b->a, gs_axis_list, s->rank) : NULL;
    int64_t *prio = s->rank ? GS_NEW_ARRAY(b->a, int64_t, s->rank) : NULL;
    if (s->rank && (!dims || !prio)) return NULL;
    bool any_prio = false, oom = false;
    for (int d = 0; d < s->rank; d++) {
        dims[d] = to_list(b->a, &s->dims[d].axes, !s->dims[d].closed, &oom);
        prio[d] = s->dims[d].priority;
        any_prio |= prio[d] >= 0;
    }
    nm->dims = dims;
    nm->priorities = any_prio ? prio : NULL;
    nm->replicated = to_list(b->a, &s->replicated, false, &oom);
    nm->unreduced = to_list(b->a, &s->unreduced, false, &oom);
    nm->manual = to_list(b->a, &s->manual, false, &oom);
    nm->reduction = NULL;
    gs_sharding *out;
    if (oom || gs_sharding_from_named(b->a, nm, &out) != GS_OK) return NULL;
    out->named = nm;
    return out;
}

/* Does every axis list of named sharding s fit an sdy_axes? */
static bool fits(const gs_sharding *s) {
    const gs_named *nm = s ? s->named : NULL;
    if (!nm) return true;
    for (int d = 0; nm->form == GS_NAMED_DIMS && d < nm->n_dims; d++)
        if (nm->dims[d].n > SDY_MAX_AXES) return false;
    return nm->replicated.n <= SDY_MAX_AXES && nm->unreduced.n <= SDY_MAX_AXES &&
           nm->manual.n <= SDY_MAX_AXES;
}

static int new_value(builder *b, const gs_shape *s, int def, gs_instr *origin, int leaf,
                     const gs_sharding *sh) {
    sdy_value v = {0};
    v.rank = s->rank;
    v.dims = s->dims;
    v.def = def;
    v.origin = origin;
    v.leaf = leaf;
    v.opaque = !fits(sh);
    v.sh = v.opaque ? NULL : from_named(b, sh, s->rank);
    v.group = -1;
    if (sh && sh->group == GS_SHARD_GROUP_AS) {
        int64_t pair[2] = {sh->group_id, (int64_t)b->values.n};
        if (gs_vec_push(&b->group_pairs, pair) != GS_OK) b->oom = true;
    }
    if (gs_vec_push(&b->values, &v) != GS_OK) b->oom = true;
    return (int)b->values.n - 1;
}

/* The computation's index (into the module's comps), or -1. */
static int comp_index(const builder *b, const gs_computation *c) {
    intptr_t at = c ? (intptr_t)gs_strmap_get(&b->comp_index, c->name) : 0;
    return (int)at - 1;
}

/* The leaf values of instruction x (NULL when not mapped). */
static int *leaves_of(const builder *b, const gs_instr *x) {
    int ci = comp_index(b, x->parent);
    return ci >= 0 && b->leaves[ci] ? b->leaves[ci][x->id] : NULL;
}

/* Room for x's leaf values, all -1. */
static int *new_leaves(builder *b, const gs_instr *x) {
    int ci = comp_index(b, x->parent);
    int n = gs_shape_n_leaves(x->shape);
    int *v = GS_NEW_ARRAY(b->a, int, n + 1);
    if (ci < 0 || !b->leaves[ci] || !v) {
        b->oom = true;
        return NULL;
    }
    for (int i = 0; i < n; i++) v[i] = -1;
    b->leaves[ci][x->id] = v;
    return v;
}

/* Array leaf i (depth first) of shape s, or NULL. */
static const gs_shape *leaf_shape(const gs_shape *s, int i) {
    if (!gs_shape_is_tuple(s)) return i == 0 ? s : NULL;
    for (int k = 0; k < s->n_tuple; k++) {
        int n = gs_shape_n_leaves(s->tuple[k]);
        if (i < n) return leaf_shape(s->tuple[k], i);
        i -= n;
    }
    return NULL;
}

/* New values for every array leaf of x (defined by op def, -1 for a parameter). */
static int *fresh_leaves(builder *b, gs_instr *x, int def) {
    int *v = new_leaves(b, x);
    if (!v) return NULL;
    int n = gs_shape_n_leaves(x->shape);
    const gs_sharding *sh = gs_instr_get_sharding(x);
    for (int i = 0; i < n; i++) {
        const gs_shape *ls = leaf_shape(x->shape, i);
        if (!ls || gs_shape_is_tuple(ls) || ls->type == GS_TOKEN) continue;
        v[i] = new_value(b, ls, def, x, i, sh ? gs_sharding_leaf(sh, x->shape, i) : NULL);
    }
    return v;
}

/* Leaves before element i of tuple shape s. */
static int leaf_offset(const gs_shape *s, int64_t i) {
    int n = 0;
    for (int64_t k = 0; k < i && k < s->n_tuple; k++) n += gs_shape_n_leaves(s->tuple[k]);
    return n;
}

/* A custom-call's target, or NULL for other ops. */
static const char *target_of(const gs_instr *in) {
    return in->op == GS_OP_CUSTOM_CALL ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET) : NULL;
}

/* An identity of Shardy's: a sharding constraint (HLO's `Sharding` custom-call), or one of the
 * marker ops the StableHLO reader keeps as custom-calls of their name. */
static bool is_sharding_call(const gs_instr *in) {
    const char *t = target_of(in);
    return t && (strcmp(t, "Sharding") == 0 || strcmp(t, "sdy.data_flow_edge") == 0 ||
                 strcmp(t, "sdy.func_data_flow_edge") == 0 || strcmp(t, "sdy.reshard") == 0 ||
                 strcmp(t, "sdy.propagation_barrier") == 0);
}

/* sdy.propagation_barrier's allowed direction (its backend_config), or -1 for other ops. */
static int barrier_direction(const gs_instr *in) {
    const char *t = target_of(in);
    if (!t || strcmp(t, "sdy.propagation_barrier") != 0) return -1;
    const char *d = gs_instr_str(in, GS_ATTR_BACKEND_CONFIG);
    if (!d) return SDY_DIR_NONE;
    if (strcmp(d, "FORWARD") == 0) return SDY_DIR_FORWARD;
    if (strcmp(d, "BACKWARD") == 0) return SDY_DIR_BACKWARD;
    if (strcmp(d, "BOTH") == 0) return SDY_DIR_BOTH;
    return SDY_DIR_NONE;
}

/* What op-priority propagation asks of it (SDY_OP_*). */
static unsigned op_kind(const gs_instr *in) {
    const char *t = target_of(in);
    if (t && (strcmp(t, "Sharding") == 0 || strcmp(t, "sdy.reshard") == 0 ||
              strcmp(t, "sdy.propagation_barrier") == 0))
        return SDY_OP_ELEMENTWISE;
    if (t && (strcmp(t, "sdy.data_flow_edge") == 0 || strcmp(t, "sdy.func_data_flow_edge") == 0))
        return SDY_OP_SHAPE;
    if (t && (strcmp(t, "MoveToDevice") == 0 || strcmp(t, "MoveToHost") == 0)) return SDY_OP_SHAPE;
    switch (gs_op_info_of(in->op)->family) {
    case GS_FAM_UNARY:
    case GS_FAM_BINARY:
    case GS_FAM_TERNARY:
    case GS_FAM_COMPARE: return SDY_OP_ELEMENTWISE;
    case GS_FAM_CONVERT: /* bitcast-convert only between equal bit widths */
        return in->n_operands == 1 && in->operands[0]->shape->rank == in->shape->rank
                   ? SDY_OP_ELEMENTWISE
                   : 0;
    case GS_FAM_RESHAPE:
    case GS_FAM_TRANSPOSE: return SDY_OP_SHAPE;
    case GS_FAM_DYNAMIC_SLICE:
    case GS_FAM_DYNAMIC_UPDATE_SLICE: return SDY_OP_SLICE;
    case GS_FAM_BROADCAST: return SDY_OP_BROADCAST;
    default: return 0;
    }
}

static bool is_call_to(const gs_instr *in, const char *target) {
    const char *t = target_of(in);
    return t && strcmp(t, target) == 0;
}

/* An edge into (SPMDFullToShardShape) or out of (SPMDShardToFullShape) a manual computation:
 * the slot outside the region (0: the operand, 1: the result) and the manual axes the side
 * inside names; false for other ops. */
static bool manual_edge(const gs_instr *in, int *outer_slot, const gs_axis_list **manual) {
    bool into = is_call_to(in, "SPMDFullToShardShape");
    if ((!into && !is_call_to(in, "SPMDShardToFullShape")) || in->n_operands != 1 ||
        gs_shape_is_tuple(in->shape) || in->operands[0]->shape->rank != in->shape->rank)
        return false;
    const gs_sharding *inner = gs_instr_get_sharding(into ? in : in->operands[0]);
    if (!inner || !inner->named) return false; /* (manual_axes={} names none) */
    *outer_slot = into ? 0 : 1;
    *manual = &inner->named->manual;
    return true;
}

/* A new op (no rule yet); its index, or -1 on OOM. */
static int push_op(builder *b, int parent, int n_operands, int n_results) {
    sdy_op op = {0};
    op.parent = parent;
    op.fixed_dir = -1;
    op.n_operands = n_operands;
    op.n_results = n_results;
    op.operands = n_operands ? GS_NEW_ARRAY(b->a, int, n_operands) : NULL;
    op.results = n_results ? GS_NEW_ARRAY(b->a, int, n_results) : NULL;
    if ((n_operands && !op.operands) || (n_results && !op.results) ||
        gs_vec_push(&b->ops, &op) != GS_OK) {
        b->oom = true;
        return -1;
    }
    return (int)b->ops.n - 1;
}

static sdy_op *op_at(builder *b, int i) { return &((sdy_op *)b->ops.data)[i]; }

/* The op for instruction in. */
static void add_op(builder *b, gs_instr *in, int parent) {
    int n_res = gs_shape_n_leaves(in->shape);
    int id = push_op(b, parent, in->n_operands, n_res);
    int *res = id >= 0 ? fresh_leaves(b, in, id) : NULL;
    if (!res) return;
    sdy_op *op = op_at(b, id);
    for (int i = 0; i < in->n_operands; i++) {
        const gs_instr *x = in->operands[i];
        const int *xl = leaves_of(b, x);
        op->operands[i] = gs_shape_is_tuple(x->shape) || !xl ? -1 : xl[0];
    }
    for (int i = 0; i < n_res; i++) op->results[i] = res[i];
    op->origin = in;
    op->kind = op_kind(in);
    op->fixed_dir = barrier_direction(in);
    int outer_slot;
    const gs_axis_list *manual;
    int64_t group;
    const int *gv = gs_instr_sharding_group(in, &group) ? leaves_of(b, in->operands[0]) : NULL;
    if (gv) { /* sdy.sharding_group: its operand joins the group, nothing propagates here */
        int64_t pair[2] = {group, gv[0]};
        if (gv[0] >= 0 && gs_vec_push(&b->group_pairs, pair) != GS_OK) b->oom = true;
    } else if (manual_edge(in, &outer_slot, &manual)) {
        /* propagates between the free axes, over the shape inside the region */
        const gs_shape *inner = outer_slot == 0 ? in->shape : in->operands[0]->shape;
        sdy_axes *mv = GS_NEW(b->a, sdy_axes);
        if (mv) sdy_axes_from_list(mv, manual);
        op->rule = sdy_identity_rule(b->a, inner->rank, inner->dims, 1);
        op->manual_view = mv;
        op->outer_slots = 1u << outer_slot;
        op->kind = SDY_OP_SHAPE;
        if (!op->rule || !mv) b->oom = true;
    } else if (is_sharding_call(in) && in->n_operands == 1 && !gs_shape_is_tuple(in->shape)) {
        op->rule = sdy_identity_rule(b->a, in->shape->rank, in->shape->dims, 1);
        if (!op->rule) b->oom = true;
        const char *t = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
        func_edge fe = {id, in};
        if (strcmp(t, "sdy.func_data_flow_edge") == 0 && gs_vec_push(&b->func_edges, &fe) != GS_OK)
            b->oom = true;
    } else {
        gs_op_rule *r;
        gs_op_rule_options ro = {b->conservative};
        if (gs_op_rule_build_opts(b->a, in, &ro, &r) != GS_OK) b->oom = true;
        else if (r->registered) op->rule = r;
    }
}

/* A data-flow edge: the identity from sources (n values, -1 ignored) to value owner. */
static void add_edge(builder *b, int parent, const int *sources, int n, int owner) {
    if (owner < 0) return;
    int k = 0;
    for (int i = 0; i < n; i++) k += sources[i] >= 0;
    const sdy_value *ov = &((sdy_value *)b->values.data)[owner];
    int rank = ov->rank;
    const int64_t *dims = ov->dims;
    int id = push_op(b, parent, k, 1);
    if (id < 0) return;
    sdy_op *op = op_at(b, id);
    k = 0;
    for (int i = 0; i < n; i++) {
        if (sources[i] < 0) continue;
        if (((sdy_value *)b->values.data)[sources[i]].rank != rank) {
            op->rule = NULL; /* not the same tensor: no edge */
            op->n_operands = 0;
            return;
        }
        op->operands[k++] = sources[i];
    }
    op->results[0] = owner;
    /* the owner is defined by its edge, which a change of its sharding revisits */
    ((sdy_value *)b->values.data)[owner].def = id;
    op->origin = ((sdy_value *)b->values.data)[owner].origin;
    op->edge = true;
    op->kind = SDY_OP_SHAPE; /* Shardy's op priorities treat edges as pass-through ops */
    op->rule = sdy_identity_rule(b->a, rank, dims, k);
    if (!op->rule) b->oom = true;
}

static void build(builder *b, gs_computation *c, int parent, const int *const *params);

/* A root copy of an array in a function (the function's result apart from the value it
 * returns, as the StableHLO reader keeps Shardy's two). */
static bool root_copy(const gs_instr *in) {
    return in->is_root && in->op == GS_OP_COPY && in->n_operands == 1 &&
           !gs_shape_is_tuple(in->shape) && in->parent &&
           (in->parent->is_entry || in->parent->symbol);
}

/* The leaves function c returns: its root's, or its root copy's operand's. */
static const int *returned_leaves(const builder *b, const gs_computation *c) {
    if (!c->root) return NULL;
    return leaves_of(b, root_copy(c->root) ? c->root->operands[0] : c->root);
}

/* Builds region c (parent op `parent`) with its parameter p's leaves being params[p]. */
static void build_region(builder *b, gs_computation *c, int parent, const int *const *params) {
    int ci = comp_index(b, c);
    if (ci < 0 || b->leaves[ci]) return; /* unknown, or already built (a shared region) */
    if (!(b->leaves[ci] = GS_NEW_ARRAY(b->a, int *, c->n_instrs + 1))) {
        b->oom = true;
        return;
    }
    for (int k = 0; k <= c->n_instrs; k++) b->leaves[ci][k] = NULL;
    build(b, c, parent, params);
}

/* The branch computations of a conditional (n of them into *out), or 0. */
static int branches(const gs_instr *in, gs_computation **two, gs_computation *const **out) {
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_BRANCH_COMPUTATIONS);
    if (a) {
        *out = a->u.comps.v;
        return a->u.comps.n;
    }
    two[0] = gs_instr_comp(in, GS_ATTR_TRUE_COMPUTATION);
    two[1] = gs_instr_comp(in, GS_ATTR_FALSE_COMPUTATION);
    *out = two;
    return two[0] && two[1] ? 2 : 0;
}

/* A while loop: results, its condition and body (parameters = the results), an edge per leaf
 * from the operand and the body's returned value. */
static void add_while(builder *b, gs_instr *in, int parent) {
    int n = gs_shape_n_leaves(in->shape);
    int id = push_op(b, parent, 0, 0);
    int *res = id >= 0 ? fresh_leaves(b, in, id) : NULL;
    gs_computation *cond = gs_instr_comp(in, GS_ATTR_CONDITION);
    gs_computation *body = gs_instr_comp(in, GS_ATTR_BODY);
    if (!res || !cond || !body || in->n_operands != 1) return;
    const int *params[1] = {res};
    build_region(b, cond, id, params);
    build_region(b, body, id, params);
    const int *init = leaves_of(b, in->operands[0]);
    const int *ret = body->root ? leaves_of(b, body->root) : NULL;
    for (int i = 0; i < n && !b->oom; i++) {
        int src[2] = {init ? init[i] : -1, ret ? ret[i] : -1};
        add_edge(b, parent, src, 2, res[i]);
    }
}

/* A conditional: results, each branch (its parameter = the operand it is given), an edge per
 * leaf from every branch's returned value. */
static void add_conditional(builder *b, gs_instr *in, int parent) {
    gs_computation *two[2];
    gs_computation *const *br;
    int nb = branches(in, two, &br);
    int n = gs_shape_n_leaves(in->shape);
    int id = push_op(b, parent, 0, 0);
    int *res = id >= 0 ? fresh_leaves(b, in, id) : NULL;
    if (!res || nb < 1 || in->n_operands != nb + 1) return;
    for (int k = 0; k < nb; k++) {
        const int *params[1] = {leaves_of(b, in->operands[k + 1])};
        if (br[k] && br[k]->n_params == 1 && params[0]) build_region(b, br[k], id, params);
    }
    int *src = GS_NEW_ARRAY(b->a, int, nb + 1);
    if (!src) {
        b->oom = true;
        return;
    }
    for (int i = 0; i < n && !b->oom; i++) {
        for (int k = 0; k < nb; k++) {
            const int *ret = br[k] && br[k]->root ? leaves_of(b, br[k]->root) : NULL;
            src[k] = ret ? ret[i] : -1;
        }
        add_edge(b, parent, src, nb, res[i]);
    }
}

/* A call as -sdy-propagation-pipeline imports it, a named computation: its results; the
 * callee (its one call site's, the call graph flattened) built here with arguments of its own;
 * an edge per leaf from each operand to the argument and from the returned value to the
 * result. A callee already built (a call the flattening left shared) stays opaque. */
static void add_call(builder *b, gs_instr *in, int parent) {
    gs_computation *f = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    int ci = comp_index(b, f);
    if (ci < 0 || b->leaves[ci] || f->n_params != in->n_operands) {
        add_op(b, in, parent);
        return;
    }
    int id = push_op(b, parent, 0, 0);
    int *res = id >= 0 ? fresh_leaves(b, in, id) : NULL;
    if (!res) return;
    build_region(b, f, id, NULL);
    for (int p = 0; p < f->n_params && !b->oom; p++) {
        const int *pv = f->params[p] ? leaves_of(b, f->params[p]) : NULL;
        const int *ov = leaves_of(b, in->operands[p]);
        int n = gs_shape_n_leaves(in->operands[p]->shape);
        for (int i = 0; pv && ov && i < n; i++) add_edge(b, parent, &ov[i], 1, pv[i]);
    }
    const int *ret = returned_leaves(b, f);
    int n = gs_shape_n_leaves(in->shape);
    for (int i = 0; ret && i < n && !b->oom; i++) add_edge(b, parent, &ret[i], 1, res[i]);
}

/* Does in call a function: one of the StableHLO input's, or any computation a call of HLO
 * text calls (which has no function names)? */
static bool callee_is_function(const gs_instr *in) {
    const gs_computation *f = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    return f && (f->symbol || !in->parent->symbol);
}

/* A manual computation's body (the StableHLO reader's call of a region, every operand an
 * SPMDFullToShardShape): crossed by its data-flow edges whatever the options. */
static bool manual_body(const gs_instr *in) {
    const gs_computation *f = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!f || f->symbol || in->n_operands == 0) return false;
    for (int i = 0; i < in->n_operands; i++)
        if (!is_call_to(in->operands[i], "SPMDFullToShardShape")) return false;
    return true;
}

/* The sources of each sdy.func_data_flow_edge (Shardy's PropagateFuncDataFlowEdgeOp): on a
 * function's argument, that operand of every call of the function; on a call's result, the
 * value the callee returns. None (a function nobody calls): the edge moves nothing. */
static void set_func_edges(builder *b, const gs_module *m) {
    const func_edge *fe = b->func_edges.data;
    for (size_t e = 0; e < b->func_edges.n && !b->oom; e++) {
        const gs_instr *x = fe[e].in->operands[0];
        sdy_op *op = op_at(b, fe[e].op);
        gs_vec src;
        gs_vec_init(&src, sizeof(int));
        int leaf = 0;
        if (x->op == GS_OP_GET_TUPLE_ELEMENT && x->n_operands == 1) {
            leaf = leaf_offset(x->operands[0]->shape, gs_instr_int(x, GS_ATTR_INDEX, 0));
            x = x->operands[0];
        }
        if (x->op == GS_OP_PARAMETER && x->parent) {
            for (int i = 0; i < m->n_comps; i++)
                for (int k = 0; k < m->comps[i]->n_instrs; k++) {
                    const gs_instr *c = m->comps[i]->instrs[k];
                    if (c->op != GS_OP_CALL || gs_instr_comp(c, GS_ATTR_TO_APPLY) != x->parent ||
                        x->parameter_number >= c->n_operands)
                        continue;
                    const int *v = leaves_of(b, c->operands[x->parameter_number]);
                    if (v && v[0] >= 0 && gs_vec_push(&src, &v[0]) != GS_OK) b->oom = true;
                }
        } else if (x->op == GS_OP_CALL) {
            gs_computation *f = gs_instr_comp(x, GS_ATTR_TO_APPLY);
            const int *v = f ? returned_leaves(b, f) : NULL;
            if (v && v[leaf] >= 0 && gs_vec_push(&src, &v[leaf]) != GS_OK) b->oom = true;
        }
        int rank = fe[e].in->shape->rank;
        const int *vs = src.data;
        int k = 0;
        int *ops = src.n ? GS_NEW_ARRAY(b->a, int, src.n) : NULL;
        for (size_t i = 0; ops && i < src.n; i++)
            if (((sdy_value *)b->values.data)[vs[i]].rank == rank) ops[k++] = vs[i];
        op->operands = ops;
        op->n_operands = k;
        op->rule = sdy_identity_rule(b->a, rank, fe[e].in->shape->dims, k);
        if (!op->rule || (src.n && !ops)) b->oom = true;
        gs_vec_free(&src);
    }
}

/* Shardy's AddFuncDataFlowEdges for functions left shared: each argument of a called function
 * is an edge from that operand of every call of it, each call result one from the value the
 * callee returns. */
static void add_shared_call_edges(builder *b, const gs_module *m) {
    /* the calls of functions of the input, in module order */
    gs_vec calls, src;
    gs_vec_init(&calls, sizeof(const gs_instr *));
    gs_vec_init(&src, sizeof(int));
    for (int i = 0; i < m->n_comps && !b->oom; i++)
        for (int k = 0; k < m->comps[i]->n_instrs; k++) {
            const gs_instr *c = m->comps[i]->instrs[k];
            const gs_computation *f =
                c->op == GS_OP_CALL ? gs_instr_comp(c, GS_ATTR_TO_APPLY) : NULL;
            if (f && f->symbol && f != m->entry && gs_vec_push(&calls, &c) != GS_OK) b->oom = true;
        }
    const gs_instr **cv = calls.data;
    for (int fi = 0; fi < m->n_comps && !b->oom; fi++) {
        const gs_computation *f = m->comps[fi];
        for (int p = 0; f->symbol && f != m->entry && p < f->n_params && !b->oom; p++) {
            const int *pv = f->params[p] ? leaves_of(b, f->params[p]) : NULL;
            int n = f->params[p] ? gs_shape_n_leaves(f->params[p]->shape) : 0;
            for (int leaf = 0; pv && leaf < n && !b->oom; leaf++) {
                src.n = 0;
                for (size_t i = 0; i < calls.n; i++) {
                    if (gs_instr_comp(cv[i], GS_ATTR_TO_APPLY) != f || p >= cv[i]->n_operands)
                        continue;
                    const int *v = leaves_of(b, cv[i]->operands[p]);
                    if (v && v[leaf] >= 0 && gs_vec_push(&src, &v[leaf]) != GS_OK) b->oom = true;
                }
                if (src.n) add_edge(b, -1, src.data, (int)src.n, pv[leaf]);
            }
        }
    }
    for (size_t i = 0; i < calls.n && !b->oom; i++) {
        gs_computation *f = gs_instr_comp(cv[i], GS_ATTR_TO_APPLY);
        const int *ret = returned_leaves(b, f), *res = leaves_of(b, cv[i]);
        int n = gs_shape_n_leaves(cv[i]->shape);
        for (int leaf = 0; ret && res && leaf < n; leaf++)
            add_edge(b, -1, &ret[leaf], 1, res[leaf]);
    }
    gs_vec_free(&src);
    gs_vec_free(&calls);
}

/* An optimization barrier: an edge per leaf from its operand's (Shardy's data-flow edges). */
static void add_barrier(builder *b, gs_instr *in, int parent) {
    int n = gs_shape_n_leaves(in->shape);
    int id = push_op(b, parent, 0, 0);
    int *res = id >= 0 ? fresh_leaves(b, in, id) : NULL;
    const int *src = in->n_operands == 1 ? leaves_of(b, in->operands[0]) : NULL;
    for (int i = 0; res && src && i < n && !b->oom; i++) add_edge(b, parent, &src[i], 1, res[i]);
}


static void build(builder *b, gs_computation *c, int parent, const int *const *params) {
    for (int k = 0; k < c->n_instrs && !b->oom; k++) {
        gs_instr *in = c->instrs[k];
        if (in->op == GS_OP_PARAMETER) {
            int64_t p = in->parameter_number;
            if (params && p >= 0 && p < c->n_params && params[p]) {
                int *v = new_leaves(b, in);
                int n = gs_shape_n_leaves(in->shape);
                for (int i = 0; v && i < n; i++) v[i] = params[p][i];
            } else {
                fresh_leaves(b, in, -1);
            }
        } else if (in->op == GS_OP_GET_TUPLE_ELEMENT && in->n_operands == 1) {
            const int *t = leaves_of(b, in->operands[0]);
            int *v = new_leaves(b, in);
            int at = leaf_offset(in->operands[0]->shape, gs_instr_int(in, GS_ATTR_INDEX, 0));
            int n = gs_shape_n_leaves(in->shape);
            for (int i = 0; t && v && i < n; i++) v[i] = t[at + i];
        } else if (in->op == GS_OP_TUPLE) {
            int *v = new_leaves(b, in);
            int at = 0;
            for (int j = 0; v && j < in->n_operands; j++) {
                const int *x = leaves_of(b, in->operands[j]);
                int n = gs_shape_n_leaves(in->operands[j]->shape);
                for (int i = 0; i < n; i++) v[at + i] = x ? x[i] : -1;
                at += n;
            }
        } else if (in->op == GS_OP_WHILE) {
            add_while(b, in, parent);
        } else if (in->op == GS_OP_CONDITIONAL) {
            add_conditional(b, in, parent);
        } else if (in->op == GS_OP_OPTIMIZATION_BARRIER) {
            add_barrier(b, in, parent);
        } else if (in->op == GS_OP_CALL &&
                   ((b->pipeline && callee_is_function(in)) || manual_body(in))) {
            add_call(b, in, parent);
        } else if (root_copy(in)) {
            new_leaves(b, in); /* no value of its own: set_results reads it */
        } else {
            add_op(b, in, parent);
        }
    }
}

/* The values a function returns count as uses (the main function's results are counted
 * through g->result_values). */
static void count_returns(builder *b, const gs_computation *c, bool main) {
    sdy_graph *g = b->g;
    const int *r = c->root ? leaves_of(b, c->root) : NULL;
    if (!r || (main && c->root->op == GS_OP_TUPLE)) return;
    int n = gs_shape_n_leaves(c->root->shape);
    for (int i = 0; i < n; i++)
        if (r[i] >= 0) g->values[r[i]].n_uses++;
}

/* Users of each value, in op order; uses also count the main function's results. */
static bool link_users(sdy_graph *g) {
    for (int o = 0; o < g->n_ops; o++)
        for (int i = 0; i < g->ops[o].n_operands; i++)
            if (g->ops[o].operands[i] >= 0) g->values[g->ops[o].operands[i]].n_users++;
    for (int v = 0; v < g->n_values; v++) {
        sdy_value *val = &g->values[v];
        val->users = val->n_users ? GS_NEW_ARRAY(g->a, int, val->n_users) : NULL;
        if (val->n_users && !val->users) return false;
        val->n_users = 0;
    }
    for (int o = 0; o < g->n_ops; o++)
        for (int i = 0; i < g->ops[o].n_operands; i++) {
            int v = g->ops[o].operands[i];
            if (v >= 0) g->values[v].users[g->values[v].n_users++] = o;
        }
    for (int v = 0; v < g->n_values; v++) g->values[v].n_uses = g->values[v].n_users;
    for (int i = 0; i < g->n_results; i++)
        if (g->result_values[i] >= 0) g->values[g->result_values[i]].n_uses++;
    return true;
}

/* The main function's results: a tuple root's operands, each with its own sharding; or a root
 * copy's operand (the StableHLO reader's way of keeping the returned op's sharding and the
 * function's result sharding apart). */
static bool set_results(builder *b, gs_computation *c) {
    sdy_graph *g = b->g;
    gs_instr *root = c->root;
    if (root && root_copy(root)) {
        const int *xl = leaves_of(b, root->operands[0]);
        g->n_results = 1;
        g->result_values = GS_NEW_ARRAY(b->a, int, 1);
        g->result_sh = GS_NEW_ARRAY(b->a, sdy_sharding *, 1);
        if (!g->result_values || !g->result_sh) return false;
        g->result_values[0] = xl ? xl[0] : -1;
        const gs_sharding *rs = gs_instr_get_sharding(root);
        g->result_sh[0] = fits(rs) ? from_named(b, rs, root->shape->rank) : NULL;
        return !b->oom;
    }
    if (!root || root->op != GS_OP_TUPLE) return true;
    g->n_results = root->n_operands;
    g->result_values = GS_NEW_ARRAY(b->a, int, root->n_operands + 1);
    g->result_sh = GS_NEW_ARRAY(b->a, sdy_sharding *, root->n_operands + 1);
    if (!g->result_values || !g->result_sh) return false;
    const gs_sharding *sh = gs_instr_get_sharding(root);
    for (int i = 0; i < root->n_operands; i++) {
        const gs_instr *x = root->operands[i];
        bool array = !gs_shape_is_tuple(x->shape);
        const int *xl = leaves_of(b, x);
        g->result_values[i] = array && xl ? xl[0] : -1;
        const gs_sharding *ls =
            sh && array ? gs_sharding_leaf(sh, root->shape, leaf_offset(root->shape, i)) : NULL;
        g->result_sh[i] = array && fits(ls) ? from_named(b, ls, x->shape->rank) : NULL;
    }
    return !b->oom;
}

/* The IR sharding for shape s from per-leaf values v (old: the instruction's own, kept where a
 * leaf has none). NULL when no leaf has one; *oom on allocation failure. */
static const gs_sharding *leaf_shardings(builder *b, const gs_shape *s, const int *v,
                                         const gs_sharding *old, bool *oom) {
    sdy_graph *g = b->g;
    int n = gs_shape_n_leaves(s);
    bool any = false;
    for (int i = 0; i < n; i++) any |= v[i] >= 0 && g->values[v[i]].sh != NULL;
    if (!any) return NULL;
    gs_sharding **leaves = GS_NEW_ARRAY(b->a, gs_sharding *, n);
    if (!leaves) return *oom = true, NULL;
    int mesh = -1; /* a leaf with none gets a fully open one on the others' mesh, as Shardy's
                      setSharding fills a sharding per value */
    for (int i = 0; i < n && mesh < 0; i++)
        if (v[i] >= 0 && g->values[v[i]].sh) mesh = g->values[v[i]].sh->mesh;
    for (int i = 0; i < n; i++) {
        const sdy_sharding *x = v[i] >= 0 ? g->values[v[i]].sh : NULL;
        const gs_sharding *ol = old ? gs_sharding_leaf(old, s, i) : NULL;
        leaves[i] = x ? to_ir(b, x) : (gs_sharding *)ol;
        if (x && !leaves[i]) return *oom = true, NULL;
        const gs_shape *ls = leaf_shape(s, i);
        if (!leaves[i] && v[i] >= 0 && ls && gs_shape_is_array(ls)) {
            sdy_sharding open = {.mesh = mesh, .rank = ls->rank};
            open.dims = ls->rank ? GS_NEW_ARRAY(b->a, sdy_dim, ls->rank) : NULL;
            if (ls->rank && !open.dims) return *oom = true, NULL;
            for (int d = 0; d < ls->rank; d++) {
                memset(&open.dims[d], 0, sizeof open.dims[d]);
                open.dims[d].priority = -1;
            }
            if (!(leaves[i] = to_ir(b, &open))) return *oom = true, NULL;
        }
        if (!leaves[i] && !(leaves[i] = gs_sharding_replicated(b->a))) return *oom = true, NULL;
    }
    const gs_sharding *ns = gs_shape_is_tuple(s) ? gs_sharding_tuple(b->a, n, leaves) : leaves[0];
    if (!ns) *oom = true;
    return ns;
}

/* Writes the values' shardings back onto the instructions of c. */
/* Marks in owned[id] the ops of c whose results have explicit sdy.data_flow_edge markers: the
 * edges hold the shardings then, and the op has none of its own (as after Shardy's
 * -sdy-add-data-flow-edges). */
static void mark_edge_owned(const gs_computation *c, bool *owned) {
    for (int k = 0; k < c->n_instrs; k++) {
        const gs_instr *in = c->instrs[k];
        const char *t = in->op == GS_OP_CUSTOM_CALL && in->n_operands == 1
                            ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET)
                            : NULL;
        if (!t || strcmp(t, "sdy.data_flow_edge") != 0) continue;
        const gs_instr *x = in->operands[0];
        /* through get-tuple-elements and tuples of them (a loop carrying outer values) */
        for (int step = 0; step < 4; step++) {
            if (x->op == GS_OP_GET_TUPLE_ELEMENT && x->n_operands == 1)
                x = x->operands[0];
            else if (x->op == GS_OP_TUPLE && x->n_operands > 0 &&
                     x->operands[0]->op == GS_OP_GET_TUPLE_ELEMENT)
                x = x->operands[0]->operands[0];
        }
        if (x->op == GS_OP_WHILE || x->op == GS_OP_CONDITIONAL ||
            x->op == GS_OP_OPTIMIZATION_BARRIER)
            owned[x->id] = true;
    }
}

static bool write_back(builder *b, gs_module *m, gs_computation *c) {
    sdy_graph *g = b->g;
    bool oom = false;
    bool *owned = calloc((size_t)c->n_instrs + 1, sizeof *owned);
    if (!owned) return false;
    mark_edge_owned(c, owned);
    for (int k = 0; k < c->n_instrs; k++) {
        gs_instr *in = c->instrs[k];
        const int *v = leaves_of(b, in);
        if (!v || in->op == GS_OP_GET_TUPLE_ELEMENT || owned[k]) continue;
        if (in->op == GS_OP_TUPLE && in != c->root) continue;
        if (c == m->entry && in == c->root && in->op == GS_OP_TUPLE) continue; /* below */
        const gs_sharding *ns = leaf_shardings(b, in->shape, v, gs_instr_get_sharding(in), &oom);
        if (oom || (ns && gs_instr_set_sharding(m, in, ns) != GS_OK)) {
            free(owned);
            return false;
        }
    }
    free(owned);
    gs_instr *root = c->root;
    if (c == m->entry && root && root_copy(root) && g->n_results == 1 && g->result_sh[0]) {
        gs_sharding *ns = to_ir(b, g->result_sh[0]);
        return ns && gs_instr_set_sharding(m, root, ns) == GS_OK;
    }
    if (c == m->entry && root && root->op == GS_OP_TUPLE && g->n_results) {
        bool any = false;
        for (int i = 0; i < g->n_results; i++) any |= g->result_sh[i] != NULL;
        if (!any) return true;
        const gs_sharding *old = gs_instr_get_sharding(root);
        int n = gs_shape_n_leaves(root->shape);
        gs_sharding **leaves = GS_NEW_ARRAY(b->a, gs_sharding *, n);
        if (!leaves) return false;
        for (int i = 0; i < n; i++) {
            const gs_sharding *ol = old ? gs_sharding_leaf(old, root->shape, i) : NULL;
            leaves[i] = (gs_sharding *)ol;
            if (!leaves[i] && !(leaves[i] = gs_sharding_replicated(b->a))) return false;
        }
        for (int i = 0; i < g->n_results; i++) {
            if (!g->result_sh[i] || gs_shape_is_tuple(root->operands[i]->shape)) continue;
            int at = leaf_offset(root->shape, i);
            if (at < n && !(leaves[at] = to_ir(b, g->result_sh[i]))) return false;
        }
        const gs_sharding *ns = gs_sharding_tuple(b->a, n, leaves);
        if (!ns || gs_instr_set_sharding(m, root, ns) != GS_OK) return false;
    }
    return true;
}

static int cmp_pair(const void *x, const void *y) {
    const int64_t *a = x, *b = y;
    return a[0] != b[0] ? (a[0] < b[0] ? -1 : 1) : (a[1] < b[1] ? -1 : a[1] > b[1]);
}

/* The sharding groups (shard_as ids on the values' shardings) as dense groups of values. */
static bool set_groups(builder *b) {
    sdy_graph *g = b->g;
    size_t n = b->group_pairs.n;
    int64_t (*p)[2] = b->group_pairs.data;
    if (n) qsort(p, n, sizeof *p, cmp_pair);
    int k = 0;
    for (size_t i = 0; i < n; i++) k += i == 0 || p[i][0] != p[i - 1][0];
    g->n_groups = k;
    g->group_first = GS_NEW_ARRAY(b->a, int, k + 1);
    g->group_members = GS_NEW_ARRAY(b->a, int, n + 1);
    if (!g->group_first || !g->group_members) return false;
    k = -1;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || p[i][0] != p[i - 1][0]) g->group_first[++k] = (int)i;
        g->group_members[i] = (int)p[i][1];
        g->values[p[i][1]].group = k;
    }
    g->group_first[g->n_groups] = (int)n;
    return true;
}

/* Marks in is_fn[i] whether m->comps[i] is a function (the entry, a function of the input, or
 * what a call calls), not a region, and in called[i] whether a call calls it. */
static void mark_functions(const builder *b, const gs_module *m, bool *is_fn, bool *called) {
    for (int i = 0; i < m->n_comps; i++) {
        is_fn[i] = m->comps[i] == m->entry || m->comps[i]->symbol;
        called[i] = false;
    }
    for (int i = 0; i < m->n_comps; i++)
        for (int k = 0; k < m->comps[i]->n_instrs; k++) {
            const gs_instr *in = m->comps[i]->instrs[k];
            int at = in->op == GS_OP_CALL ? comp_index(b, gs_instr_comp(in, GS_ATTR_TO_APPLY)) : -1;
            if (at >= 0) is_fn[at] = called[at] = true;
        }
}

/* A value's name for explain: its instruction's, `name#k` for leaf k of several. */
static const char *value_name(gs_sb *sb, const sdy_value *v) {
    const gs_instr *in = v->origin;
    sb->len = 0;
    if (!in) return "?";
    gs_sb_puts(sb, in->name);
    if (gs_shape_n_leaves(in->shape) > 1) gs_sb_printf(sb, "#%d", v->leaf);
    return gs_sb_str(sb);
}

/* Shardy's text for s (`<@mesh, [...]>`). */
static const char *sharding_text(builder *b, gs_sb *sb, const sdy_sharding *s) {
    sb->len = 0;
    const gs_sharding *ir = to_ir(b, s);
    if (!ir || !ir->named) return "?";
    gs_named_print_sdy(sb, ir->named);
    return gs_sb_str(sb);
}

/* The records of explain: the shardings the values started with (from[v]: each one's record),
 * then the events. NULL on OOM. */
static gs_sdy_explain *explain_of(builder *b, const sdy_sharding *const *initial,
                                  const gs_vec *events) {
    sdy_graph *g = b->g;
    gs_sdy_explain *x = sdy_explain_new();
    int *last = calloc((size_t)g->n_values + 1, sizeof *last);
    gs_sb name = {0}, sh = {0}, how = {0}, other = {0};
    bool ok = x && last;
    for (int v = 0; ok && v < g->n_values; v++) {
        last[v] = -1;
        if (!initial[v]) continue;
        ok = sdy_explain_add(x, value_name(&name, &g->values[v]),
                             sharding_text(b, &sh, initial[v]), "annotation", -1);
        last[v] = (int)x->records.n - 1;
    }
    const sdy_event *ev = events->data;
    for (size_t i = 0; ok && i < events->n; i++) {
        const sdy_event *e = &ev[i];
        how.len = 0;
        if (e->source >= 0)
            gs_sb_printf(&how, "from '%s' ", value_name(&other, &g->values[e->source]));
        const sdy_op *op = e->op >= 0 ? &g->ops[e->op] : NULL;
        const gs_instr *oi = op ? op->origin : NULL;
        if (e->group >= 0)
            gs_sb_printf(&how, "as a member of its sharding group");
        else if (!op)
            gs_sb_puts(&how, "from the main function's result");
        else if (op->edge && oi)
            gs_sb_printf(&how, "through the data-flow edge of '%s'", oi->name);
        else if (oi && strncmp(oi->name, gs_op_name(oi->op), strlen(gs_op_name(oi->op))) == 0)
            gs_sb_printf(&how, "through '%s'", oi->name);
        else if (oi)
            gs_sb_printf(&how, "through '%s' (%s)", oi->name, gs_op_name(oi->op));
        else
            gs_sb_puts(&how, "through an op");
        if (e->group < 0 && op) {
            gs_sb_printf(&how, " (%s", e->aggressive ? "aggressive" : "basic");
            if (e->op_round >= 0) gs_sb_printf(&how, ", op-priority round %d", e->op_round);
            if (e->user_round >= 0)
                gs_sb_printf(&how, ", user priority p%lld", (long long)e->user_round);
            gs_sb_putc(&how, ')');
        }
        int from = e->source >= 0 ? last[e->source] : -1;
        ok = !how.failed && sdy_explain_add(x, value_name(&name, &g->values[e->value]),
                                            sharding_text(b, &sh, e->sh), gs_sb_str(&how), from);
        last[e->value] = (int)x->records.n - 1;
    }
    free(last);
    gs_sb_free(&name);
    gs_sb_free(&sh);
    gs_sb_free(&how);
    gs_sb_free(&other);
    if (!ok) {
        sdy_explain_free(x);
        return NULL;
    }
    return x;
}

gs_status gs_sdy_propagate(gs_module *m, const gs_sdy_options *opts, gs_diags *d) {
    return gs_sdy_propagate_ex(m, opts, NULL, d);
}

gs_status gs_sdy_propagate_ex(gs_module *m, const gs_sdy_options *opts, gs_propagate_info **info,
                              gs_diags *d) {
    if (info) *info = NULL;
    gs_sdy_options defaults = {0};
    if (!opts) opts = &defaults;
    if (!m->entry) return GS_OK;
    sdy_graph g = {0};
    /* the import: every call site its own callee (Shardy's FlattenCallGraph) */
    bool shared = opts->pipeline && opts->dedup_functions_fully;
    if (opts->pipeline && !shared && gs_module_flatten_calls(m, d) != GS_OK) return GS_ERR;
    if (opts->pipeline && sdy_split_constants(m, d) != GS_OK) return GS_ERR;
    builder b = {0};
    b.a = &m->arena;
    b.g = &g;
    b.conservative = opts->conservative;
    b.pipeline = opts->pipeline && !shared;
    b.shared_calls = shared;
    gs_vec_init(&b.func_edges, sizeof(func_edge));
    g.a = &m->arena;
    gs_vec_init(&b.values, sizeof(sdy_value));
    gs_vec_init(&b.ops, sizeof(sdy_op));
    gs_vec_init(&b.meshes, sizeof(const gs_mesh *));
    gs_vec_init(&b.templates, sizeof(const gs_named *));
    gs_vec_init(&b.group_pairs, 2 * sizeof(int64_t));
    gs_arena scratch;
    gs_arena_init(&scratch);
    b.leaves = GS_NEW_ARRAY(&scratch, int **, m->n_comps + 1);
    bool *is_fn = GS_NEW_ARRAY(&scratch, bool, m->n_comps + 1);
    bool *called = GS_NEW_ARRAY(&scratch, bool, m->n_comps + 1);
    bool ok = b.leaves && is_fn && called;
    for (int i = 0; ok && i < m->n_comps; i++) {
        b.leaves[i] = NULL;
        ok = gs_strmap_put(&b.comp_index, m->comps[i]->name, (void *)(intptr_t)(i + 1)) == GS_OK;
    }
    if (ok) mark_functions(&b, m, is_fn, called);
    /* functions in module order (regions are built where their op is), those no call calls
     * first: with the pipeline, a callee is built at its call */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; ok && i < m->n_comps; i++) {
            if (!is_fn[i] || called[i] != (pass == 1)) continue;
            build_region(&b, m->comps[i], -1, NULL);
            ok = !b.oom;
        }
    if (ok) set_func_edges(&b, m);
    if (ok && b.shared_calls) add_shared_call_edges(&b, m);
    ok = ok && !b.oom && set_results(&b, m->entry);
    if (ok) {
        g.values = b.values.data;
        g.n_values = (int)b.values.n;
        g.ops = b.ops.data;
        g.n_ops = (int)b.ops.n;
        g.meshes = b.meshes.data;
        g.n_meshes = (int)b.meshes.n;
        ok = link_users(&g) && set_groups(&b);
        for (int i = 0; ok && i < m->n_comps; i++)
            if (is_fn[i] && b.leaves[i]) count_returns(&b, m->comps[i], m->comps[i] == m->entry);
        /* explain: what the values started with, then every change */
        gs_vec events;
        gs_vec_init(&events, sizeof(sdy_event));
        const sdy_sharding **initial =
            info ? GS_NEW_ARRAY(&scratch, const sdy_sharding *, g.n_values + 1) : NULL;
        if (info && !initial) ok = false;
        for (int v = 0; initial && v < g.n_values; v++) initial[v] = g.values[v].sh;
        if (info) g.events = &events;
        ok = ok && sdy_run(&g, opts) && !g.oom;
        if (ok && info) {
            gs_sdy_explain *x = explain_of(&b, initial, &events);
            ok = x && (*info = gs_prop_info_from_sdy(x)) != NULL;
        }
        gs_vec_free(&events);
        for (int i = 0; ok && i < m->n_comps; i++)
            if (b.leaves[i]) ok = write_back(&b, m, m->comps[i]);
    }
    gs_vec_free(&b.func_edges);
    gs_arena_free(&scratch);
    gs_strmap_free(&b.comp_index);
    gs_vec_free(&b.values);
    gs_vec_free(&b.ops);
    gs_vec_free(&b.meshes);
    gs_vec_free(&b.templates);
    gs_vec_free(&b.group_pairs);
    if (!ok) return gs_error(d, gs_span_none(), "out of memory");
    /* the export: functions again, deduplicated */
    return opts->pipeline ? sdy_export_calls(m, shared, d) : GS_OK;
}
