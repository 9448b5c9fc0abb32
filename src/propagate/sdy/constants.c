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
        for (int k = 0; k < in->n_operands && all; k++) {
            const gs_instr *o = in->operands[k];
            all = o->id < s->n && o->parent == s->c && s->kind[o->id] == K_CONSTANT;
        }
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
        v[k] = o->parent == s->c && o->id < s->n && s->kind[o->id] == K_CONSTANT
                   ? copy_sub(s, o, map)
                   : o;
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
    if (x->parent != s->c || x->id >= s->n) return x;
    if (s->kind[x->id] != K_CONSTANT && s->kind[x->id] != K_SCALAR_EXPANSION) return x;
    memset(map, 0, sizeof *map * (size_t)s->n);
    return copy_sub(s, x, map);
}

/* Marks constant `in` as Shardy's sdy.constant (a frontend attribute the printer reads). */
static void mark_sdy_constant(splitter *s, gs_instr *in) {
    const gs_attr *fa = gs_instr_attr(in, GS_ATTR_FRONTEND_ATTRIBUTES);
    if (fa && fa->u.s && strstr(fa->u.s, "xla.sdy.constant=")) return;
    gs_attr a = {.key = GS_ATTR_FRONTEND_ATTRIBUTES, .name = "frontend_attributes"};
    const char *mark = "xla.sdy.constant=\"true\"";
    if (fa && fa->u.s && fa->u.s[0] == '{' && strcmp(fa->u.s, "{}") != 0) /* {k=v} -> {k=v,mark} */
        a.u.s = gs_arena_printf(&s->m->arena, "%.*s,%s}", (int)strlen(fa->u.s) - 1, fa->u.s, mark);
    else
        a.u.s = gs_arena_printf(&s->m->arena, "{%s}", mark);
    if (!a.u.s || gs_instr_set_attr(s->m, in, &a) != GS_OK) s->oom = true;
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
    bool any = false;
    for (int i = 0; !s->oom && i < n; i++) {
        gs_instr *in = c->instrs[i];
        s->kind[i] = kind_of(s, in);
        any |= s->kind[i] == K_CONSTANT || s->kind[i] == K_SCALAR_EXPANSION;
        if (s->kind[i] == K_GROUP && in->n_operands == 1 && in->operands[0]->parent == c &&
            gs_vec_push(&s->groups[in->operands[0]->id], &in) != GS_OK)
            s->oom = true;
    }
    for (int i = 0; any && !s->oom && i < n; i++) {
        gs_instr *in = c->instrs[i];
        if (s->kind[i] != K_OTHER) continue;
        for (int k = 0; k < in->n_operands && !s->oom; k++)
            in->operands[k] = own_copy(s, in->operands[k], map);
    }
    if (any && !s->oom && c->root) { /* the return is a use too */
        gs_instr *r = own_copy(s, c->root, map);
        if (r != c->root) {
            c->root->is_root = false;
            r->is_root = true;
            c->root = r;
        }
    }
    /* the new order, then the originals left unused go: scalar expansions, then constant
     * expressions from the last (with the group ops that were their only users) */
    size_t total = (size_t)n;
    for (int i = 0; any && i < n; i++) total += s->before[i].n;
    gs_instr **order = any && !s->oom ? GS_NEW_ARRAY(&s->m->arena, gs_instr *, total + 1) : NULL;
    if (any && !s->oom && !order) s->oom = true;
    if (order) {
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            for (size_t k = 0; k < s->before[i].n; k++)
                order[at++] = GS_VEC_AT(&s->before[i], gs_instr *, k);
            order[at++] = c->instrs[i];
        }
        for (size_t j = 0; j < total; j++) { /* uses of the originals, group ops aside */
            const gs_instr *x = order[j];
            int64_t group;
            if (gs_instr_sharding_group(x, &group)) continue;
            for (int k = 0; k < x->n_operands; k++)
                if (x->operands[k]->parent == c && x->operands[k]->id < n &&
                    x->operands[k] == c->instrs[x->operands[k]->id])
                    uses[x->operands[k]->id]++;
        }
        if (c->root && c->root->id < n && c->root == c->instrs[c->root->id]) uses[c->root->id]++;
        bool *gone = calloc((size_t)n + 1, sizeof *gone);
        if (!gone) s->oom = true;
        for (int pass = 0; gone && pass < 2; pass++)
            for (int t = 0; t < n; t++) {
                int i = pass == 0 ? t : n - 1 - t;
                unsigned char want = pass == 0 ? K_SCALAR_EXPANSION : K_CONSTANT;
                if (s->kind[i] != want || uses[i] > 0 || c->instrs[i] == c->root) continue;
                gone[i] = true;
                for (size_t g = 0; g < s->groups[i].n; g++)
                    gone[GS_VEC_AT(&s->groups[i], gs_instr *, g)->id] = true;
                const gs_instr *x = c->instrs[i];
                for (int k = 0; k < x->n_operands; k++)
                    if (x->operands[k]->parent == c && x->operands[k]->id < n &&
                        x->operands[k] == c->instrs[x->operands[k]->id])
                        uses[x->operands[k]->id]--;
            }
        size_t kept = 0;
        for (size_t j = 0; gone && j < total; j++) {
            gs_instr *x = order[j];
            bool original = x->id < n && x == c->instrs[x->id];
            if (original && gone[x->id]) continue;
            order[kept++] = x;
        }
        free(gone);
        if (!s->oom) {
            for (size_t j = 0; j < kept; j++) {
                order[j]->id = (int)j;
                order[j]->parent = c;
                if (order[j]->op == GS_OP_CONSTANT) mark_sdy_constant(s, order[j]);
            }
            c->instrs = order;
            c->n_instrs = (int)kept;
        }
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
