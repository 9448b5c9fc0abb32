/*
 * fusion.c — loop fusion of f32 elementwise chains in the executor's plan (not in the HLO).
 *
 * A chain such as GELU's `g*g*g*c1 + g`, `tanh`, `+1`, `*0.5*g`, `+res` computed one
 * instruction at a time writes and re-reads a whole array per op, and broadcasts of scalars are
 * materialised as arrays of their own. Here, as XLA's loop fusion does, an elementwise
 * instruction whose only user is another elementwise instruction of the same shape becomes a
 * *member* of its user's group; the group's *root* (an instruction some other kind of op, or
 * several ops, or the computation's root uses) computes the whole tree in one pass over blocks
 * of elements that stay in cache: only the root's result is written to memory, and broadcasts
 * inside the tree are read from their operand, never materialised.
 *
 * Fused: f32 unary ops and add, subtract, multiply, divide, maximum, minimum on f32 arrays of
 * static shape, select of f32 arrays by a predicate array (a halo exchange's edge mask), and
 * broadcasts (of any operand, predicates for a select's first) feeding them. Each op runs the kernels' own loop
 * (gs_unary_f32, gs_binary_f32), so a fused chain is bit for bit what the kernels compute one
 * instruction at a time. The reference of `--verify` (the bounded evaluation) never fuses.
 * Anything unexpected at run time (a per-device bundle, another type) takes the plain path: the
 * members evaluated one by one by gs_eval_instr.
 */
#include "base/sysalloc.h"
#include "interp/fusion.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK 1024    /* elements per pass: every node's block stays in L1/L2 */
#define MAX_NODES 64  /* nodes of one fused tree (larger trees run unfused) */

static bool is_unary(gs_opcode op) {
    float x = 0, y;
    return gs_unary_f32(op, &x, &y, 0);
}

static bool is_binary(gs_opcode op) {
    float x = 0, y = 0, z;
    return gs_binary_f32(op, &x, &y, &z, 0);
}

static bool static_f32_array(const gs_shape *s) {
    return s && s->type == GS_F32 && !s->dynamic;
}

static bool same_dims(const gs_shape *a, const gs_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

static bool static_pred_array(const gs_shape *s) {
    return s && s->type == GS_PRED && !s->dynamic;
}

/* A broadcast of predicates: a member only as a select's first operand. */
static bool pred_broadcast(const gs_instr *in) {
    return in->op == GS_OP_BROADCAST && in->n_operands == 1 && static_pred_array(in->shape) &&
           static_pred_array(in->operands[0]->shape);
}

/* Can `in` be a node of a fused tree (a member, or a root)? */
static bool fusible(const gs_instr *in) {
    if (!static_f32_array(in->shape)) return false;
    if (in->op == GS_OP_BROADCAST)
        return in->n_operands == 1 && static_f32_array(in->operands[0]->shape);
    if (in->op == GS_OP_SELECT)
        return in->n_operands == 3 && static_pred_array(in->operands[0]->shape) &&
               same_dims(in->operands[0]->shape, in->shape) &&
               static_f32_array(in->operands[1]->shape) &&
               same_dims(in->operands[1]->shape, in->shape) &&
               static_f32_array(in->operands[2]->shape) &&
               same_dims(in->operands[2]->shape, in->shape);
    if (!(in->n_operands == 1 && is_unary(in->op)) && !(in->n_operands == 2 && is_binary(in->op)))
        return false;
    for (int k = 0; k < in->n_operands; k++)
        if (!static_f32_array(in->operands[k]->shape) || !same_dims(in->operands[k]->shape, in->shape))
            return false;
    return true;
}

gs_status gs_fusion_plan(const gs_computation *c, const gs_instr *const *order, int n,
                         const int *uses, signed char **plan) {
    *plan = NULL;
    int N = c->n_instrs;
    signed char *p = gs_sys_calloc((size_t)(N ? N : 1), 1);
    int *size = gs_sys_calloc((size_t)(N ? N : 1), sizeof *size); /* nodes of each tree so far */
    if (!p || !size) {
        free(p);
        free(size);
        return GS_ERR;
    }
    bool any = false;
    /* In evaluation order a user comes after its operands: each instruction takes its fusible
     * single-use operands as members while its tree stays within MAX_NODES nodes (so that
     * every walk of a tree is shallow). A broadcast's operand is always a leaf. */
    for (int i = 0; i < n; i++) {
        const gs_instr *u = order[i];
        size[u->id] = 1;
        if (u->op == GS_OP_BROADCAST || !fusible(u)) continue;
        for (int k = 0; k < u->n_operands; k++) {
            const gs_instr *o = u->operands[k];
            bool kind = u->op == GS_OP_SELECT && k == 0 ? pred_broadcast(o) : fusible(o);
            bool member = o != c->root && uses[o->id] == 1 && kind &&
                          size[u->id] + size[o->id] + (u->n_operands - 1 - k) <= MAX_NODES;
            size[u->id] += member ? size[o->id] : 1;
            if (!member) continue;
            p[o->id] = GS_FUSED_MEMBER; /* was a root of its own tree, perhaps */
            p[u->id] = GS_FUSED_ROOT;
            any = true;
        }
    }
    free(size);
    if (!any) {
        free(p);
        return GS_OK;
    }
    *plan = p;
    return GS_OK;
}

/* ------------------------------------------------------------------ the tree */

typedef enum node_kind {
    NODE_LEAF,
    NODE_BROADCAST,
    NODE_UNARY,
    NODE_BINARY,
    NODE_SELECT
} node_kind;

typedef struct node {
    node_kind kind;
    const gs_instr *in;
    int a, b, c;            /* operand nodes (unary, binary, select: predicate, true, false) */
    int first;              /* the first node of this node's subtree (nodes are in post-order) */
    int es;                 /* bytes an element: 4 (f32), 1 (a select's predicates) */
    const void *data;       /* leaf: its array; broadcast: its operand's array */
    int rank;               /* broadcast: result rank */
    int64_t dims[GS_MAX_RANK];
    int64_t src_stride[GS_MAX_RANK]; /* broadcast: operand stride per result dim (0: repeated) */
    float *buf;             /* this node's block (not for leaves) */
} node;

typedef struct tree {
    node nodes[MAX_NODES];
    int n;
    const signed char *plan;
    gs_value *const *vals;
} tree;

/* Adds the subtree of `in` (of type `type`: f32, or pred for a select's first operand) in
 * post-order; returns its node, or -1 when it cannot be fused as the values stand (the caller
 * then takes the plain path). */
static int add_node(tree *t, const gs_instr *in, gs_type type, bool top) {
    if (t->n == MAX_NODES) return -1;
    int es = type == GS_PRED ? 1 : 4;
    if (!top && t->plan[in->id] != GS_FUSED_MEMBER) { /* a leaf: a value computed already */
        const gs_value *v = t->vals[in->id];
        if (!v || v->type != type || v->devices > 0 || !gs_value_matches(v, in->shape)) return -1;
        node *x = &t->nodes[t->n];
        *x = (node){.kind = NODE_LEAF, .in = in, .es = es, .data = v->data, .first = t->n};
        return t->n++;
    }
    node x = {.in = in, .es = es};
    if (in->op == GS_OP_BROADCAST) {
        const gs_instr *o = in->operands[0];
        const gs_value *v = t->vals[o->id];
        gs_ints map = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        if (!v || v->type != type || v->devices > 0 || !gs_value_matches(v, o->shape) ||
            map.n != v->rank)
            return -1;
        x.kind = NODE_BROADCAST;
        x.data = v->data;
        x.rank = in->shape->rank;
        int64_t vs[GS_MAX_RANK];
        gs_strides(v->rank, v->dims, vs);
        for (int d = 0; d < x.rank; d++) {
            x.dims[d] = in->shape->dims[d];
            x.src_stride[d] = 0;
        }
        for (int i = 0; i < map.n; i++) {
            int64_t d = map.v[i];
            if (d < 0 || d >= x.rank || x.src_stride[d] != 0 || v->dims[i] != x.dims[d]) return -1;
            x.src_stride[d] = v->dims[i] == 1 ? 0 : vs[i];
        }
    } else if (in->op == GS_OP_SELECT) {
        if ((x.a = add_node(t, in->operands[0], GS_PRED, false)) < 0 ||
            (x.b = add_node(t, in->operands[1], GS_F32, false)) < 0 ||
            (x.c = add_node(t, in->operands[2], GS_F32, false)) < 0)
            return -1;
        x.kind = NODE_SELECT;
    } else {
        int a = add_node(t, in->operands[0], GS_F32, false);
        if (a < 0) return -1;
        x.a = a;
        x.kind = NODE_UNARY;
        if (in->n_operands == 2) {
            int b = add_node(t, in->operands[1], GS_F32, false);
            if (b < 0) return -1;
            x.b = b;
            x.kind = NODE_BINARY;
        }
    }
    if (t->n == MAX_NODES) return -1;
    x.first = x.kind == NODE_BROADCAST ? t->n : t->nodes[x.a].first;
    t->nodes[t->n] = x;
    return t->n++;
}

/* The run of broadcast node x's result from element i to the end of its minor dim (or to
 * `end`): its length, and in *src where its first element is in the operand. */
static int64_t broadcast_run(const node *x, int64_t i, int64_t end, int64_t *src) {
    int r = x->rank;
    int64_t rem = i, idx_minor = 0;
    *src = 0;
    for (int d = r - 1; d >= 0; d--) {
        int64_t idx = rem % x->dims[d];
        rem /= x->dims[d];
        *src += idx * x->src_stride[d];
        if (d == r - 1) idx_minor = idx;
    }
    int64_t run = x->dims[r - 1] - idx_minor;
    return run > end - i ? end - i : run;
}

/* Fills out[0..len) with broadcast node x's elements i0 .. i0+len of its result: floats, or
 * bytes (predicates). */
static void broadcast_block(const node *x, int64_t i0, int64_t len, void *out) {
    int64_t s = x->rank ? x->src_stride[x->rank - 1] : 0, src;
    if (x->es == 1) {
        const unsigned char *data = x->data;
        if (x->rank == 0) {
            memset(out, data[0], (size_t)len);
            return;
        }
        for (int64_t i = i0, run; i < i0 + len; i += run) {
            run = broadcast_run(x, i, i0 + len, &src);
            unsigned char *o = (unsigned char *)out + (i - i0);
            if (s == 0)
                memset(o, data[src], (size_t)run);
            else
                for (int64_t j = 0; j < run; j++) o[j] = data[src + j * s];
        }
        return;
    }
    const float *data = x->data;
    if (x->rank == 0) {
        ((float *)out)[0] = data[0];
        return;
    }
    for (int64_t i = i0, run; i < i0 + len; i += run) {
        run = broadcast_run(x, i, i0 + len, &src);
        float *o = (float *)out + (i - i0);
        if (s == 0) {
            float v = data[src];
            _Pragma("omp simd") for (int64_t j = 0; j < run; j++) o[j] = v;
        } else if (s == 1) {
            memcpy(o, data + src, (size_t)run * sizeof *o);
        } else {
            for (int64_t j = 0; j < run; j++) o[j] = data[src + j * s];
        }
    }
}

/* select's kernel loop (k_select): the chosen operand's bits, NaN payloads included. */
static void select_block(const unsigned char *p, const void *on_true, const void *on_false,
                         float *out, int64_t len) {
    const uint32_t *tv = on_true, *fv = on_false;
    uint32_t *o = (uint32_t *)out;
    _Pragma("omp simd") for (int64_t j = 0; j < len; j++) {
        uint32_t m = (uint32_t)0 - (uint32_t)(p[j] != 0);
        o[j] = (tv[j] & m) | (fv[j] & ~m);
    }
}

/* Evaluates nodes lo..hi of the tree on elements i0 .. i0+len (the root's into `result`); at[k]:
 * node k's block. */
static void run_nodes(tree *t, int lo, int hi, float *result, int64_t i0, int64_t len,
                      const void **at) {
    for (int k = lo; k <= hi; k++) {
        node *x = &t->nodes[k];
        float *o = k == t->n - 1 ? result + i0 : x->buf;
        switch (x->kind) {
        case NODE_LEAF: at[k] = (const char *)x->data + (size_t)i0 * (size_t)x->es; continue;
        case NODE_BROADCAST: broadcast_block(x, i0, len, o); break;
        case NODE_UNARY: gs_unary_f32(x->in->op, at[x->a], o, len); break;
        case NODE_BINARY: gs_binary_f32(x->in->op, at[x->a], at[x->b], o, len); break;
        case NODE_SELECT: select_block(at[x->a], at[x->b], at[x->c], o, len); break;
        }
        at[k] = o;
    }
}

/* Runs the tree over the result's elements, `block` at a time (scratch holds a block per node),
 * into `result`. A select written over its own on-true leaf (a halo exchange's edge mask, whose
 * value dies there) leaves alone every block whose predicates are all true: only the rows it
 * masks are written. */
static void run_tree(tree *t, float *result, int64_t n_elems, float *scratch, int64_t block) {
    for (int k = 0; k < t->n; k++) t->nodes[k].buf = scratch + (size_t)k * (size_t)block;
    const node *root = &t->nodes[t->n - 1];
    bool masks = root->kind == NODE_SELECT && t->nodes[root->b].kind == NODE_LEAF &&
                 t->nodes[root->b].data == result;
    for (int64_t i0 = 0; i0 < n_elems; i0 += block) {
        int64_t len = n_elems - i0 < block ? n_elems - i0 : block;
        const void *at[MAX_NODES];
        if (masks) {
            run_nodes(t, t->nodes[root->a].first, root->a, result, i0, len, at);
            if (!memchr(at[root->a], 0, (size_t)len)) continue;
        }
        run_nodes(t, 0, t->n - 1, result, i0, len, at);
    }
}

/* The plain path: `in` evaluated by gs_eval_instr after its member operands, recursively. */
static gs_status eval_plain(gs_eval *ev, const gs_instr *in, const signed char *plan,
                            gs_value *const *vals, gs_value **out) {
    gs_value *ops[3] = {NULL, NULL, NULL}, *owned[3] = {NULL, NULL, NULL};
    gs_status st = GS_OK;
    for (int k = 0; k < in->n_operands && k < 3 && st == GS_OK; k++) {
        const gs_instr *o = in->operands[k];
        if (plan[o->id] == GS_FUSED_MEMBER) {
            st = eval_plain(ev, o, plan, vals, &owned[k]);
            ops[k] = owned[k];
        } else {
            ops[k] = vals[o->id];
        }
    }
    if (st == GS_OK) st = gs_eval_instr(ev, in, ops, out);
    for (int k = 0; k < 3; k++) gs_value_free(owned[k]);
    return st;
}

gs_status gs_fusion_eval(gs_eval *ev, const gs_computation *c, const gs_instr *root,
                         const signed char *plan, gs_value *const *vals, const int *uses,
                         gs_value **out) {
    *out = NULL;
    tree *t = gs_sys_malloc(sizeof *t);
    if (!t) return gs_eval_oom(ev, root);
    t->n = 0;
    t->plan = plan;
    t->vals = vals;
    gs_status st = GS_OK;
    if (add_node(t, root, GS_F32, true) < 0) {
        free(t);
        return eval_plain(ev, root, plan, vals, out);
    }
    /* A leaf read only by this tree, held by nothing else, and read elementwise (not through a
     * broadcast) can take the result: each block reads it before the root writes there. */
    ev->donor = NULL;
    for (int k = 0; k < t->n && !ev->donor; k++) {
        const node *x = &t->nodes[k];
        if (x->kind != NODE_LEAF) continue;
        int reads = 0;
        for (int j = 0; j < t->n; j++)
            if (t->nodes[j].kind == NODE_LEAF && t->nodes[j].in == x->in) reads++;
        gs_value *v = vals[x->in->id];
        if (x->in != c->root && uses[x->in->id] == reads && gs_value_refs(v) == 1) ev->donor = v;
    }
    gs_value *r = gs_eval_new_result_in_place(ev, root);
    int64_t elems = gs_shape_elements(root->shape);
    int64_t block = elems < 1 ? 1 : elems < BLOCK ? elems : BLOCK;
    float *scratch = gs_sys_malloc((size_t)t->n * (size_t)block * sizeof(float));
    if (!r || !scratch) {
        gs_value_free(r);
        st = gs_eval_oom(ev, root);
    } else {
        run_tree(t, r->data, r->n, scratch, block);
        *out = r;
    }
    free(scratch);
    free(t);
    return st;
}
