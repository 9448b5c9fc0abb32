/*
 * from_ir.c — the IR as Shardy's propagation sees it, and its result written back.
 *
 * Values are the array leaves of the entry computation's instructions; a get-tuple-element or a
 * non-root tuple is no op of its own but the leaves it selects (MLIR has multi-result ops, not
 * tuples). Every other instruction is an op whose rule is its gs_op_rule (the default rule of an
 * op without a specific one means nothing propagates through it, as Shardy skips ops without a
 * registered rule); a `Sharding` custom-call (sdy.sharding_constraint) is the identity. A tuple
 * root stands for the function's results, each with its own sharding.
 *
 * Only Shardy (named) shardings take part (gs_sharding.named, as `#sdy.sharding` reads): a value
 * with an HLO sharding has none for this pass, and keeps its own.
 */
#include "internal.h"

#include <stdint.h>
#include <string.h>

typedef struct builder {
    gs_arena *a;           /* the module's arena (rules, shardings) */
    sdy_graph *g;
    gs_vec values, ops;    /* sdy_value, sdy_op */
    gs_vec meshes;         /* const gs_mesh * */
    gs_vec templates;      /* const gs_named *: a named sharding of each mesh, copied on write */
    int *first;            /* per instruction id: its first leaf's value, or -1 */
    bool oom;
} builder;

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
    memset(&nm->manual, 0, sizeof nm->manual);
    nm->reduction = NULL;
    gs_sharding *out;
    if (oom || gs_sharding_from_named(b->a, nm, &out) != GS_OK) return NULL;
    out->named = nm;
    return out;
}

static int new_value(builder *b, const gs_shape *s, int def, gs_instr *origin, int leaf,
                     const gs_sharding *sh) {
    sdy_value v = {0};
    v.rank = s->rank;
    v.dims = s->dims;
    v.def = def;
    v.origin = origin;
    v.leaf = leaf;
    v.sh = from_named(b, sh, s->rank);
    if (gs_vec_push(&b->values, &v) != GS_OK) b->oom = true;
    return (int)b->values.n - 1;
}

/* Values for the array leaves of shape s, depth first. */
static void leaf_values(builder *b, const gs_shape *s, int def, gs_instr *in, int *leaf,
                        const gs_sharding *sh, const gs_shape *whole) {
    if (gs_shape_is_tuple(s)) {
        for (int i = 0; i < s->n_tuple; i++) leaf_values(b, s->tuple[i], def, in, leaf, sh, whole);
        return;
    }
    const gs_sharding *ls = sh ? gs_sharding_leaf(sh, whole, *leaf) : NULL;
    new_value(b, s, def, in, (*leaf)++, ls);
}

/* Leaves before element i of tuple shape s. */
static int leaf_offset(const gs_shape *s, int64_t i) {
    int n = 0;
    for (int64_t k = 0; k < i && k < s->n_tuple; k++) n += gs_shape_n_leaves(s->tuple[k]);
    return n;
}

static bool is_sharding_call(const gs_instr *in) {
    const char *t = in->op == GS_OP_CUSTOM_CALL ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET) : NULL;
    return t && strcmp(t, "Sharding") == 0;
}

/* What op-priority propagation asks of it (SDY_OP_*). */
static unsigned op_kind(const gs_instr *in) {
    const char *t = in->op == GS_OP_CUSTOM_CALL ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET) : NULL;
    if (t && strcmp(t, "Sharding") == 0) return SDY_OP_ELEMENTWISE;
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

/* The op for instruction in. */
static void add_op(builder *b, gs_instr *in) {
    int id = (int)b->ops.n;
    sdy_op op = {0};
    op.parent = -1;
    op.n_operands = in->n_operands;
    op.operands = in->n_operands ? GS_NEW_ARRAY(b->a, int, in->n_operands) : NULL;
    int n_res = gs_shape_n_leaves(in->shape);
    op.n_results = n_res;
    op.results = n_res ? GS_NEW_ARRAY(b->a, int, n_res) : NULL;
    if ((in->n_operands && !op.operands) || (n_res && !op.results)) {
        b->oom = true;
        return;
    }
    for (int i = 0; i < in->n_operands; i++) {
        const gs_instr *x = in->operands[i];
        op.operands[i] = gs_shape_is_tuple(x->shape) ? -1 : b->first[x->id];
    }
    b->first[in->id] = (int)b->values.n;
    int leaf = 0;
    leaf_values(b, in->shape, id, in, &leaf, gs_instr_get_sharding(in), in->shape);
    for (int i = 0; i < n_res; i++) op.results[i] = b->first[in->id] + i;
    op.kind = op_kind(in);
    if (is_sharding_call(in) && in->n_operands == 1 && !gs_shape_is_tuple(in->shape)) {
        op.rule = sdy_identity_rule(b->a, in->shape->rank, in->shape->dims, 1);
        if (!op.rule) b->oom = true;
    } else {
        gs_op_rule *r;
        if (gs_op_rule_build(b->a, in, &r) != GS_OK) b->oom = true;
        else if (!r->is_default) op.rule = r;
    }
    if (gs_vec_push(&b->ops, &op) != GS_OK) b->oom = true;
}

static void build(builder *b, gs_computation *c) {
    for (int k = 0; k < c->n_instrs && !b->oom; k++) {
        gs_instr *in = c->instrs[k];
        if (in->op == GS_OP_PARAMETER) {
            b->first[in->id] = (int)b->values.n;
            int leaf = 0;
            leaf_values(b, in->shape, -1, in, &leaf, gs_instr_get_sharding(in), in->shape);
        } else if (in->op == GS_OP_GET_TUPLE_ELEMENT && in->n_operands == 1) {
            const gs_instr *t = in->operands[0];
            int64_t idx = gs_instr_int(in, GS_ATTR_INDEX, 0);
            b->first[in->id] = b->first[t->id] < 0 ? -1
                                                    : b->first[t->id] + leaf_offset(t->shape, idx);
        } else if (in->op == GS_OP_TUPLE && in != c->root) {
            b->first[in->id] = -1; /* tuples of tuples are not followed */
        } else if (in->op != GS_OP_TUPLE) {
            add_op(b, in);
        }
    }
}

/* The values a function returns count as uses (the main function's results are counted
 * through g->result_values). */
static void count_returns(sdy_graph *g, const gs_computation *c, const int *first, bool main) {
    const gs_instr *root = c->root;
    if (!root) return;
    if (root->op != GS_OP_TUPLE) {
        if (first[root->id] >= 0) g->values[first[root->id]].n_uses++;
    } else if (!main) {
        for (int i = 0; i < root->n_operands; i++) {
            const gs_instr *x = root->operands[i];
            if (!gs_shape_is_tuple(x->shape) && first[x->id] >= 0) g->values[first[x->id]].n_uses++;
        }
    }
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

/* The main function's results: a tuple root's operands, each with its own sharding. */
static bool set_results(builder *b, gs_computation *c) {
    sdy_graph *g = b->g;
    gs_instr *root = c->root;
    if (!root || root->op != GS_OP_TUPLE) return true;
    g->n_results = root->n_operands;
    g->result_values = GS_NEW_ARRAY(b->a, int, root->n_operands + 1);
    g->result_sh = GS_NEW_ARRAY(b->a, sdy_sharding *, root->n_operands + 1);
    if (!g->result_values || !g->result_sh) return false;
    const gs_sharding *sh = gs_instr_get_sharding(root);
    for (int i = 0; i < root->n_operands; i++) {
        const gs_instr *x = root->operands[i];
        bool array = !gs_shape_is_tuple(x->shape);
        g->result_values[i] = array ? b->first[x->id] : -1;
        const gs_sharding *ls =
            sh && array ? gs_sharding_leaf(sh, root->shape, leaf_offset(root->shape, i)) : NULL;
        g->result_sh[i] = array ? from_named(b, ls, x->shape->rank) : NULL;
    }
    return !b->oom;
}

/* Writes the values' shardings back onto their instructions (only where Shardy's changed). */
static bool write_back(builder *b, gs_module *m, gs_computation *c) {
    sdy_graph *g = b->g;
    for (int k = 0; k < c->n_instrs; k++) {
        gs_instr *in = c->instrs[k];
        if (in->op == GS_OP_GET_TUPLE_ELEMENT || in->op == GS_OP_TUPLE) continue;
        int first = b->first[in->id];
        if (first < 0) continue;
        int n = gs_shape_n_leaves(in->shape);
        bool any = false;
        for (int i = 0; i < n; i++) any |= g->values[first + i].sh != NULL;
        if (!any) continue;
        const gs_sharding *old = gs_instr_get_sharding(in);
        gs_sharding **leaves = GS_NEW_ARRAY(b->a, gs_sharding *, n);
        if (!leaves) return false;
        for (int i = 0; i < n; i++) {
            const sdy_sharding *s = g->values[first + i].sh;
            const gs_sharding *ol = old ? gs_sharding_leaf(old, in->shape, i) : NULL;
            leaves[i] = s ? to_ir(b, s) : (gs_sharding *)ol;
            if (!leaves[i] && !(leaves[i] = gs_sharding_replicated(b->a))) return false;
            if (s && !leaves[i]) return false;
        }
        const gs_sharding *ns = gs_shape_is_tuple(in->shape) ? gs_sharding_tuple(b->a, n, leaves)
                                                             : leaves[0];
        if (!ns || gs_instr_set_sharding(m, in, ns) != GS_OK) return false;
    }
    gs_instr *root = c->root;
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

/* Marks in is_fn[i] whether m->comps[i] is a function (the entry, or what a call calls), not
 * a region. False on OOM. */
static bool mark_functions(const gs_module *m, bool *is_fn) {
    gs_strmap index = {0}; /* computation name -> its index + 1 */
    bool ok = true;
    for (int i = 0; i < m->n_comps && ok; i++) {
        is_fn[i] = m->comps[i] == m->entry;
        ok = gs_strmap_put(&index, m->comps[i]->name, (void *)(intptr_t)(i + 1)) == GS_OK;
    }
    for (int i = 0; i < m->n_comps && ok; i++)
        for (int k = 0; k < m->comps[i]->n_instrs; k++) {
            const gs_instr *in = m->comps[i]->instrs[k];
            const gs_computation *f =
                in->op == GS_OP_CALL ? gs_instr_comp(in, GS_ATTR_TO_APPLY) : NULL;
            intptr_t at = f ? (intptr_t)gs_strmap_get(&index, f->name) : 0;
            if (at > 0) is_fn[at - 1] = true;
        }
    gs_strmap_free(&index);
    return ok;
}

gs_status gs_sdy_propagate(gs_module *m, const gs_sdy_options *opts, gs_diags *d) {
    gs_sdy_options defaults = {0};
    if (!opts) opts = &defaults;
    if (!m->entry) return GS_OK;
    sdy_graph g = {0};
    builder b = {0};
    b.a = &m->arena;
    b.g = &g;
    g.a = &m->arena;
    gs_vec_init(&b.values, sizeof(sdy_value));
    gs_vec_init(&b.ops, sizeof(sdy_op));
    gs_vec_init(&b.meshes, sizeof(const gs_mesh *));
    gs_vec_init(&b.templates, sizeof(const gs_named *));
    gs_arena scratch;
    gs_arena_init(&scratch);
    /* per function: its instructions' first values (NULL: not a function) */
    int **firsts = GS_NEW_ARRAY(&scratch, int *, m->n_comps + 1);
    bool *is_fn = GS_NEW_ARRAY(&scratch, bool, m->n_comps + 1);
    bool ok = firsts && is_fn;
    ok = ok && mark_functions(m, is_fn);
    for (int i = 0; ok && i < m->n_comps; i++) {
        gs_computation *c = m->comps[i];
        firsts[i] = NULL;
        if (!is_fn[i]) continue;
        if (!(firsts[i] = GS_NEW_ARRAY(&scratch, int, c->n_instrs + 1))) {
            ok = false;
            break;
        }
        for (int k = 0; k <= c->n_instrs; k++) firsts[i][k] = -1;
        b.first = firsts[i];
        build(&b, c);
        if (c == m->entry) ok = !b.oom && set_results(&b, c);
        ok = ok && !b.oom;
    }
    if (ok) {
        g.values = b.values.data;
        g.n_values = (int)b.values.n;
        g.ops = b.ops.data;
        g.n_ops = (int)b.ops.n;
        g.meshes = b.meshes.data;
        g.n_meshes = (int)b.meshes.n;
        ok = link_users(&g);
        for (int i = 0; ok && i < m->n_comps; i++)
            if (firsts[i]) count_returns(&g, m->comps[i], firsts[i], m->comps[i] == m->entry);
        ok = ok && sdy_run(&g, opts);
        for (int i = 0; ok && i < m->n_comps; i++) {
            if (!firsts[i]) continue;
            b.first = firsts[i];
            ok = write_back(&b, m, m->comps[i]);
        }
    }
    gs_arena_free(&scratch);
    gs_vec_free(&b.values);
    gs_vec_free(&b.ops);
    gs_vec_free(&b.meshes);
    gs_vec_free(&b.templates);
    if (!ok) gs_error(d, gs_span_none(), "out of memory");
    return ok ? GS_OK : GS_ERR;
}
