/*
 * flatten.c — XLA's FlattenCallGraph: every computation run as a program (the callee of a call
 * or fusion, a while's body and condition, a conditional's branches) is given a single call
 * site, by cloning it for each further one (its own callees cloned with it as needed). Sharding
 * propagation needs it: a computation's instructions carry one sharding each, so a function
 * called at several places with differently sharded arguments (JAX's nested jit of relu, say)
 * would otherwise get one compromise (usually replicated) for all of them. Computations applied
 * per element (reducers, comparators, scatter combiners) stay shared.
 */
#include "base/internal.h"
#include "gspmd/builder.h"
#include "gspmd/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Attributes naming computations run as programs, for the ops that run them. */
static bool runs_as_program(const gs_instr *in, gs_attr_key k) {
    switch (in->op) {
    case GS_OP_CALL: return k == GS_ATTR_TO_APPLY || k == GS_ATTR_CALLS;
    case GS_OP_FUSION: return k == GS_ATTR_CALLS;
    case GS_OP_WHILE: return k == GS_ATTR_BODY || k == GS_ATTR_CONDITION;
    case GS_OP_CONDITIONAL:
        return k == GS_ATTR_TRUE_COMPUTATION || k == GS_ATTR_FALSE_COMPUTATION ||
               k == GS_ATTR_BRANCH_COMPUTATIONS;
    default: return false;
    }
}

typedef struct flat {
    gs_module *m;
    gs_strmap names;   /* every instruction and computation name in use */
    gs_strmap claimed; /* computation name -> its one call site's computation (claimed) */
    int serial;        /* the next clone suffix */
    bool failed;
} flat;

/* name.flatN for clone number n (one suffix per clone), unused so far (registered). */
static const char *fresh(flat *f, const char *name, int n) {
    for (int extra = 0;; extra++) {
        char buf[512];
        if (extra == 0)
            snprintf(buf, sizeof buf, "%s.flat%d", name, n);
        else
            snprintf(buf, sizeof buf, "%s.flat%d.%d", name, n, extra);
        if (!gs_strmap_get(&f->names, buf)) {
            const char *s = gs_arena_strdup(&f->m->arena, buf);
            if (!s || gs_strmap_put(&f->names, s, (void *)s) != GS_OK) {
                f->failed = true;
                return NULL;
            }
            return s;
        }
    }
}

/* A copy of computation c in the same module, with fresh names (its attributes copied so that
 * redirecting a call site in the copy leaves the original alone). */
static gs_computation *clone(flat *f, const gs_computation *c) {
    gs_module *m = f->m;
    int n = ++f->serial;
    const char *name = fresh(f, c->name, n);
    gs_computation *d = name ? gs_computation_new(m, name) : NULL;
    if (d) gs_module_move_before_entry(m, d);
    gs_instr **map = calloc((size_t)c->n_instrs + 1, sizeof *map);
    if (!d || !map) {
        free(map);
        f->failed = true;
        return NULL;
    }
    d->execution_thread = c->execution_thread;
    d->span = c->span;
    d->symbol = c->symbol; /* the same function, called from one more place */
    d->is_private = c->is_private;
    d->symbol_order = c->symbol_order;
    /* Instructions in an order with operands first (text order is one for parsed modules, but
     * do not rely on it). */
    int done = 0;
    while (done < c->n_instrs && !f->failed) {
        int before = done;
        for (int i = 0; i < c->n_instrs; i++) {
            const gs_instr *in = c->instrs[i];
            if (map[in->id]) continue;
            bool ready = true;
            for (int k = 0; k < in->n_operands && ready; k++) ready = map[in->operands[k]->id];
            if (!ready) continue;
            gs_instr *o = GS_NEW(&m->arena, gs_instr);
            gs_instr **ops = GS_NEW_ARRAY(&m->arena, gs_instr *, in->n_operands + 1);
            gs_attr *attrs = GS_NEW_ARRAY(&m->arena, gs_attr, in->n_attrs + 1);
            if (!o || !ops || !attrs) {
                f->failed = true;
                break;
            }
            *o = *in;
            o->name = fresh(f, in->name, n);
            for (int k = 0; k < in->n_operands; k++) ops[k] = map[in->operands[k]->id];
            o->operands = ops;
            if (in->n_attrs) memcpy(attrs, in->attrs, sizeof *attrs * (size_t)in->n_attrs);
            for (int k = 0; k < in->n_attrs; k++)
                if (gs_attr_kind_of(attrs[k].key) == GS_AK_COMPS && attrs[k].u.comps.n > 0) {
                    gs_computation **v =
                        GS_NEW_ARRAY(&m->arena, gs_computation *, attrs[k].u.comps.n);
                    if (!v)
                        f->failed = true;
                    else
                        memcpy(v, attrs[k].u.comps.v, sizeof *v * (size_t)attrs[k].u.comps.n);
                    attrs[k].u.comps.v = v;
                }
            o->attrs = attrs;
            o->aux = NULL;
            if (!o->name || gs_computation_append(d, o) != GS_OK) {
                f->failed = true;
                break;
            }
            if (in->op == GS_OP_PARAMETER) {
                if (d->n_params <= in->parameter_number) {
                    gs_instr **p = GS_NEW_ARRAY(&m->arena, gs_instr *, c->n_params + 1);
                    if (!p) {
                        f->failed = true;
                        break;
                    }
                    if (d->n_params) memcpy(p, d->params, sizeof *p * (size_t)d->n_params);
                    d->params = p;
                    d->n_params = c->n_params;
                }
                d->params[in->parameter_number] = o;
            }
            map[in->id] = o;
            done++;
        }
        if (done == before) f->failed = true; /* a cycle: the verifier reports it */
    }
    if (!f->failed && c->root) d->root = map[c->root->id];
    free(map);
    return f->failed ? NULL : d;
}

static void visit(flat *f, gs_computation *c, int depth);

/* Claims callee for this call site, cloning it when another site has it; returns the one to
 * call. */
static gs_computation *claim(flat *f, gs_computation *callee, int depth) {
    if (gs_strmap_get(&f->claimed, callee->name)) callee = clone(f, callee);
    if (!callee) return NULL;
    if (gs_strmap_put(&f->claimed, callee->name, callee) != GS_OK) {
        f->failed = true;
        return NULL;
    }
    visit(f, callee, depth + 1);
    return callee;
}

static void visit(flat *f, gs_computation *c, int depth) {
    if (depth > 256 || f->failed) return; /* recursion: the verifier reports it */
    for (int i = 0; i < c->n_instrs && !f->failed; i++) {
        gs_instr *in = c->instrs[i];
        for (int k = 0; k < in->n_attrs && !f->failed; k++) {
            gs_attr *a = &in->attrs[k];
            if (!runs_as_program(in, a->key)) continue;
            gs_attr_kind kind = gs_attr_kind_of(a->key);
            if (kind == GS_AK_COMP && a->u.comp) {
                gs_computation *to = claim(f, a->u.comp, depth);
                if (to) a->u.comp = to;
            } else if (kind == GS_AK_COMPS) {
                for (int j = 0; j < a->u.comps.n && !f->failed; j++) {
                    /* A branch listed twice is one call site. */
                    bool seen = false;
                    for (int q = 0; q < j; q++) seen = seen || a->u.comps.v[q] == a->u.comps.v[j];
                    if (seen || !a->u.comps.v[j]) continue;
                    gs_computation *to = claim(f, a->u.comps.v[j], depth);
                    if (to) {
                        gs_computation *from = a->u.comps.v[j];
                        for (int q = j; q < a->u.comps.n; q++)
                            if (a->u.comps.v[q] == from) a->u.comps.v[q] = to;
                    }
                }
            }
        }
    }
}

gs_status gs_module_flatten_calls(gs_module *m, gs_diags *d) {
    if (!m->entry) return GS_OK;
    flat f = {m, {0}, {0}, 0, false};
    for (int i = 0; i < m->n_comps && !f.failed; i++) {
        const gs_computation *c = m->comps[i];
        if (gs_strmap_put(&f.names, c->name, (void *)c->name) != GS_OK) f.failed = true;
        for (int j = 0; j < c->n_instrs && !f.failed; j++)
            if (gs_strmap_put(&f.names, c->instrs[j]->name, (void *)c->instrs[j]->name) != GS_OK)
                f.failed = true;
    }
    if (!f.failed && gs_strmap_put(&f.claimed, m->entry->name, m->entry) != GS_OK) f.failed = true;
    if (!f.failed) visit(&f, m->entry, 0);
    gs_strmap_free(&f.names);
    gs_strmap_free(&f.claimed);
    return f.failed ? gs_error(d, gs_span_none(), "flattening the call graph: out of memory")
                    : GS_OK;
}
