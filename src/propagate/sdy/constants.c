/*
 * constants.c — Shardy's constant splitting, the first import pass of
 * -sdy-propagation-pipeline (ConstantOrScalarSplitter): every use of a constant expression gets
 * a copy of its own, so that the uses can be sharded apart instead of one constant carrying
 * one sharding to all of them.
 *
 * A constant expression is a constant or an iota, or a pure broadcast, reshape, slice or
 * elementwise op whose operands are all constant expressions. A scalar expansion is a broadcast
 * of a scalar. Walking each computation in order, every operand of an op that is neither, and
 * the computation's returned value, that comes from one of them is replaced by a copy of its
 * sub-computation, each copied op placed right before its original, in the order the uses are
 * met; scalars (rank 0) are not copied, since nothing shards them. The originals left without
 * a use then go, and every constant becomes `sdy.constant` (it prints so; Shardy converts them
 * so that folding does not merge them again). A sharding group op using a copied value is
 * copied along with it, for the copy.
 */
#include "internal.h"

#include "gspmd/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct splitter {
    gs_module *m;
    gs_computation *c;
    int n;             /* the computation's instructions before splitting */
    gs_vec *before;    /* by original id: the copies to place before it (gs_instr *) */
    gs_vec *groups;    /* by original id: its sharding group users (gs_instr *) */
    unsigned char *kind; /* by original id: K_* */
    gs_strmap names;   /* every instruction name of the module */
    unsigned serial;
    bool oom;
} splitter;

enum { K_OTHER, K_CONSTANT, K_SCALAR_EXPANSION, K_GROUP };

static bool is_scalar(const gs_instr *x) { return gs_shape_is_array(x->shape) && x->shape->rank == 0; }

/* Is x one of the computation's instructions before splitting (copies keep their original's
 * id until the new order is made)? */
static bool is_original(const splitter *s, const gs_instr *x) {
    return x->parent == s->c && x->id < s->n && s->c->instrs[x->id] == x;
}

/* x's kind when it is an original (classified so far), else K_OTHER. */
static unsigned char original_kind(const splitter *s, const gs_instr *x) {
    return is_original(s, x) ? s->kind[x->id] : K_OTHER;
}

/* May an op whose operands are constant expressions count as one (Shardy's
 * isConstantPreserving)? */
static bool preserves_constants(const gs_instr *in) {
    switch (in->op) {
    case GS_OP_BROADCAST:
    case GS_OP_RESHAPE:
    case GS_OP_SLICE: return true;
    case GS_OP_MAP:
    case GS_OP_COPY:
    case GS_OP_STOCHASTIC_CONVERT: return false;
    default: {
        unsigned f = gs_op_info_of(in->op)->flags;
        return (f & GS_OPF_ELEMENTWISE) && !(f & GS_OPF_SIDE_EFFECT);
    }
    }
}

static unsigned char kind_of(const splitter *s, const gs_instr *in) {
    int64_t group;
    if (gs_instr_sharding_group(in, &group)) return K_GROUP;
    if (gs_shape_is_tuple(in->shape)) return K_OTHER;
    if (in->op == GS_OP_CONSTANT || in->op == GS_OP_IOTA) return K_CONSTANT;
    if (preserves_constants(in) && in->n_operands > 0) {
        bool all = true;
        for (int k = 0; k < in->n_operands && all; k++)
            all = original_kind(s, in->operands[k]) == K_CONSTANT;
        if (all) return K_CONSTANT;
    }
    if (in->op == GS_OP_BROADCAST && in->n_operands == 1 && is_scalar(in->operands[0]))
        return K_SCALAR_EXPANSION;
    return K_OTHER;
}

/* A fresh name for a copy of x, registered. */
static const char *copy_name(splitter *s, const gs_instr *x) {
    char buf[512];
    do snprintf(buf, sizeof buf, "%.480s.split%u", x->name, ++s->serial);
    while (gs_strmap_get(&s->names, buf));
    const char *name = gs_arena_strdup(&s->m->arena, buf);
    if (!name || gs_strmap_put(&s->names, name, (void *)name) != GS_OK) {
        s->oom = true;
        return NULL;
    }
    return name;
}

/* A copy of x with operands ops, placed before original `at`; its attributes are its own
 * (propagation sets each copy's sharding in place). Constant expressions call nothing, so
 * there are no computations to share. */
static gs_instr *place_copy(splitter *s, const gs_instr *x, gs_instr **ops, int at) {
    gs_instr *o = GS_NEW(&s->m->arena, gs_instr);
    gs_instr **v = GS_NEW_ARRAY(&s->m->arena, gs_instr *, x->n_operands + 1);
    gs_attr *attrs = GS_NEW_ARRAY(&s->m->arena, gs_attr, x->n_attrs + 1);
    const char *name = copy_name(s, x);
    if (!o || !v || !attrs || !name || gs_vec_push(&s->before[at], &o) != GS_OK) {
        s->oom = true;
        return NULL;
    }
    *o = *x;
    if (x->n_attrs) memcpy(attrs, x->attrs, sizeof *attrs * (size_t)x->n_attrs);
    o->attrs = attrs;
    o->name = name;
    o->is_root = false;
    o->aux = NULL;
    for (int k = 0; k < x->n_operands; k++) v[k] = ops[k];
    o->operands = v;
    o->parent = s->c;
    return o;
}

/* A copy of the sub-computation of constant expression (or scalar expansion) x, scalars
 * shared; map[id] is what this copy made of each original so far. */
static gs_instr *copy_sub(splitter *s, gs_instr *x, gs_instr **map) {
    if (is_scalar(x)) return x;
    if (map[x->id]) return map[x->id];
    gs_instr *ops[GS_MAX_RANK + 8];
    gs_instr **v = x->n_operands <= (int)(sizeof ops / sizeof *ops)
                       ? ops
                       : GS_NEW_ARRAY(&s->m->arena, gs_instr *, x->n_operands);
    if (!v) {
        s->oom = true;
        return x;
    }
    for (int k = 0; k < x->n_operands; k++) {
        gs_instr *o = x->operands[k];
        v[k] = original_kind(s, o) == K_CONSTANT ? copy_sub(s, o, map) : o;
    }
    gs_instr *c = place_copy(s, x, v, x->id);
    if (!c) return x;
    map[x->id] = c;
    for (size_t g = 0; g < s->groups[x->id].n; g++) { /* the copy joins x's groups */
        const gs_instr *grp = GS_VEC_AT(&s->groups[x->id], gs_instr *, g);
        gs_instr *one[1] = {c};
        if (grp->n_operands == 1) place_copy(s, grp, one, x->id);
    }
    return c;
}

/* The value x used by a non-constant op: a copy of its own when it comes from a constant
 * expression or a scalar expansion, else x. */
static gs_instr *own_copy(splitter *s, gs_instr *x, gs_instr **map) {
    unsigned char k = original_kind(s, x);
    if (k != K_CONSTANT && k != K_SCALAR_EXPANSION) return x;
    memset(map, 0, sizeof *map * (size_t)s->n);
    return copy_sub(s, x, map);
}

/* Classifies the computation's instructions (in order: an op's operands come first) and
 * notes each one's sharding group users. True when there is anything to split. */
static bool classify(splitter *s) {
    bool any = false;
    for (int i = 0; !s->oom && i < s->n; i++) {
        gs_instr *in = s->c->instrs[i];
        s->kind[i] = kind_of(s, in);
        any |= s->kind[i] == K_CONSTANT || s->kind[i] == K_SCALAR_EXPANSION;
        if (s->kind[i] == K_GROUP && is_original(s, in->operands[0]) &&
            gs_vec_push(&s->groups[in->operands[0]->id], &in) != GS_OK)
            s->oom = true;
    }
    return any;
}

/* Gives every use by an op that is neither kind, and the return, a copy of its own. */
static void redirect_uses(splitter *s, gs_instr **map) {
    gs_computation *c = s->c;
    for (int i = 0; !s->oom && i < s->n; i++) {
        gs_instr *in = c->instrs[i];
        if (s->kind[i] != K_OTHER) continue;
        for (int k = 0; k < in->n_operands && !s->oom; k++)
            in->operands[k] = own_copy(s, in->operands[k], map);
    }
    if (s->oom || !c->root) return;
    gs_instr *r = own_copy(s, c->root, map);
    if (r != c->root) {
        c->root->is_root = false;
        r->is_root = true;
        c->root = r;
    }
}

/* Adds d to the use counts of x's operands that are originals. */
static void count_uses(const splitter *s, const gs_instr *x, int *uses, int d) {
    for (int k = 0; k < x->n_operands; k++)
        if (is_original(s, x->operands[k])) uses[x->operands[k]->id] += d;
}

/* The new instruction order: each original's copies before it, then the originals left without
 * a use gone (scalar expansions, then constant expressions from the last, with the group ops
 * that were their only users); constants marked sdy.constant. */
static void reorder(splitter *s, int *uses) {
    gs_computation *c = s->c;
    int n = s->n;
    size_t total = (size_t)n;
    for (int i = 0; i < n; i++) total += s->before[i].n;
    gs_instr **order = GS_NEW_ARRAY(&s->m->arena, gs_instr *, total + 1);
    bool *gone = calloc((size_t)n + 1, sizeof *gone);
    if (!order || !gone) {
        free(gone);
        s->oom = true;
        return;
    }
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        for (size_t k = 0; k < s->before[i].n; k++)
            order[at++] = GS_VEC_AT(&s->before[i], gs_instr *, k);
        order[at++] = c->instrs[i];
    }
    for (size_t j = 0; j < total; j++) { /* uses of the originals, group ops aside */
        int64_t group;
        if (!gs_instr_sharding_group(order[j], &group)) count_uses(s, order[j], uses, 1);
    }
    if (c->root && is_original(s, c->root)) uses[c->root->id]++;
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < n; t++) {
            int i = pass == 0 ? t : n - 1 - t;
            if (s->kind[i] != (pass == 0 ? K_SCALAR_EXPANSION : K_CONSTANT) || uses[i] > 0)
                continue;
            gone[i] = true;
            for (size_t g = 0; g < s->groups[i].n; g++)
                gone[GS_VEC_AT(&s->groups[i], gs_instr *, g)->id] = true;
            count_uses(s, c->instrs[i], uses, -1);
        }
    size_t kept = 0;
    for (size_t j = 0; j < total; j++)
        if (!is_original(s, order[j]) || !gone[order[j]->id]) order[kept++] = order[j];
    free(gone);
    for (size_t j = 0; j < kept && !s->oom; j++) {
        order[j]->id = (int)j;
        if (order[j]->op == GS_OP_CONSTANT && gs_instr_mark_sdy_constant(s->m, order[j]) != GS_OK)
            s->oom = true;
    }
    c->instrs = order;
    c->n_instrs = (int)kept;
}

/* Splits the constant expressions of computation c. */
static void split_comp(splitter *s, gs_computation *c) {
    int n = c->n_instrs;
    s->c = c;
    s->n = n;
    s->before = calloc((size_t)n + 1, sizeof *s->before);
    s->groups = calloc((size_t)n + 1, sizeof *s->groups);
    s->kind = calloc((size_t)n + 1, 1);
    gs_instr **map = calloc((size_t)n + 1, sizeof *map);
    int *uses = calloc((size_t)n + 1, sizeof *uses);
    if (!s->before || !s->groups || !s->kind || !map || !uses) s->oom = true;
    for (int i = 0; !s->oom && i < n; i++) {
        gs_vec_init(&s->before[i], sizeof(gs_instr *));
        gs_vec_init(&s->groups[i], sizeof(gs_instr *));
    }
    if (!s->oom && classify(s)) {
        redirect_uses(s, map);
        if (!s->oom) reorder(s, uses);
    }
    for (int i = 0; s->before && s->groups && i < n; i++) {
        gs_vec_free(&s->before[i]);
        gs_vec_free(&s->groups[i]);
    }
    free(s->before);
    free(s->groups);
    free(s->kind);
    free(map);
    free(uses);
    s->before = s->groups = NULL;
    s->kind = NULL;
}

gs_status sdy_split_constants(gs_module *m, gs_diags *d) {
    splitter s = {.m = m};
    for (int i = 0; !s.oom && i < m->n_comps; i++)
        for (int j = 0; j < m->comps[i]->n_instrs && !s.oom; j++) {
            const char *name = m->comps[i]->instrs[j]->name;
            if (gs_strmap_put(&s.names, name, (void *)name) != GS_OK) s.oom = true;
        }
    for (int i = 0; !s.oom && i < m->n_comps; i++) split_comp(&s, m->comps[i]);
    gs_strmap_free(&s.names);
    return s.oom ? gs_error(d, gs_span_none(), "out of memory") : GS_OK;
}
