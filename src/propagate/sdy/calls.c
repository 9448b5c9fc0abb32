/*
 * calls.c — the export half of Shardy's -sdy-propagation-pipeline for functions.
 *
 * The import (from_ir.c) flattens the call graph, so that every call site has a callee of its
 * own, and crosses each call as Shardy crosses the named computation it makes of it: data-flow
 * edges from the operands to the callee's arguments and from its returned values to the
 * call's results. After propagation Shardy turns every named computation back into a function
 * (ExportNamedComputations), sets each function's result shardings to its returned values'
 * (PropagateToFuncResults), and makes the copies with the same origin and the same argument and
 * result shardings one function again (UnflattenCallGraph); what no call reaches is dropped
 * (SymbolDCE). This file does the same to the IR, names included: a function made at export
 * is named after its origin, or `origin_N` when that name is taken, N counting up across the
 * module as MLIR's symbol table counts, in the order MLIR's post-order walk meets them.
 */
#include "internal.h"

#include "gspmd/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct exporter {
    gs_module *m;
    gs_strmap taken;     /* function names in use */
    unsigned counter;    /* the symbol table's uniquing counter */
    int next_order;      /* symbol_order of the next function made */
    const char **origin; /* by computation index: the function's name before export */
    gs_strmap index;     /* computation name -> index + 1 */
    bool oom;
} exporter;

static int index_of(const exporter *e, const gs_computation *c) {
    return c ? (int)(intptr_t)gs_strmap_get(&e->index, c->name) - 1 : -1;
}

/* Is c a function of the input (not a region, not an HLO computation)? */
static bool is_function(const gs_computation *c) { return c && c->symbol; }

static gs_computation *callee(const gs_instr *in) {
    gs_computation *f = in->op == GS_OP_CALL ? gs_instr_comp(in, GS_ATTR_TO_APPLY) : NULL;
    return is_function(f) ? f : NULL;
}

/* A function's result sharding is its returned value's (PropagateToFuncResults): a root copy
 * takes its operand's; no sharding where the value has none. */
static void results_from_returns(exporter *e, gs_computation *c) {
    gs_instr *root = c->root;
    if (c == e->m->entry || !root || root->op != GS_OP_COPY || root->n_operands != 1 ||
        gs_shape_is_tuple(root->shape))
        return;
    const gs_sharding *s = gs_instr_get_sharding(root->operands[0]);
    if (gs_instr_set_sharding(e->m, root, s) != GS_OK) e->oom = true;
}

/* name, or name_N with the module's counter when name is taken; registered. */
static const char *unique_name(exporter *e, const char *name) {
    const char *out = name;
    char buf[512];
    while (gs_strmap_get(&e->taken, out)) {
        snprintf(buf, sizeof buf, "%.480s_%u", name, e->counter++);
        out = buf;
    }
    out = gs_arena_strdup(&e->m->arena, out);
    if (!out || gs_strmap_put(&e->taken, out, (void *)1) != GS_OK) e->oom = true;
    return out;
}

/* Post-order over the calls under c, as MLIR walks ops (the ops of an op's regions before
 * it): each callee is named when its call is met, after those inside it. */
static void name_calls(exporter *e, const gs_computation *c, int depth) {
    if (depth > 256 || e->oom) return;
    for (int k = 0; k < c->n_instrs; k++) {
        const gs_instr *in = c->instrs[k];
        gs_computation *f = callee(in);
        for (int a = 0; a < in->n_attrs; a++) {
            const gs_attr *at = &in->attrs[a];
            gs_attr_kind kind = gs_attr_kind_of(at->key);
            if (kind == GS_AK_COMP && at->u.comp && at->u.comp != f)
                name_calls(e, at->u.comp, depth + 1);
            for (int j = 0; kind == GS_AK_COMPS && j < at->u.comps.n; j++)
                if (at->u.comps.v[j]) name_calls(e, at->u.comps.v[j], depth + 1);
        }
        if (!f) continue;
        name_calls(e, f, depth + 1);
        int fi = index_of(e, f);
        if (fi < 0 || e->origin[fi] != f->symbol) continue; /* named already (a shared one) */
        f->symbol = unique_name(e, e->origin[fi]);
        f->symbol_order = e->next_order++;
    }
}

/* Do shardings x and y (either may be NULL) say the same, Shardy's spelling included? */
static bool same_sharding(const gs_sharding *x, const gs_sharding *y) {
    if (!x || !y) return x == y;
    if (!gs_sharding_equal(x, y)) return false;
    if (x->kind == GS_SHARDING_TUPLE || y->kind == GS_SHARDING_TUPLE) {
        if (x->kind != y->kind || x->n_tuple != y->n_tuple) return false;
        for (int i = 0; i < x->n_tuple; i++)
            if (!same_sharding(x->tuple[i], y->tuple[i])) return false;
        return true;
    }
    if (!x->named || !y->named) return !x->named && !y->named;
    gs_sb a = {0}, b = {0};
    gs_named_print_sdy(&a, x->named);
    gs_named_print_sdy(&b, y->named);
    bool eq = !a.failed && !b.failed && strcmp(gs_sb_str(&a), gs_sb_str(&b)) == 0;
    const char *ma = x->named->mesh_name, *mb = y->named->mesh_name;
    eq = eq && ((!ma && !mb) || (ma && mb && strcmp(ma, mb) == 0));
    gs_sb_free(&a);
    gs_sb_free(&b);
    return eq;
}

/* UnflattenCallGraph's key: the same origin, argument and result shardings. */
static bool same_function(const exporter *e, const gs_computation *f, const gs_computation *g) {
    int fi = index_of(e, f), gi = index_of(e, g);
    if (fi < 0 || gi < 0 || strcmp(e->origin[fi], e->origin[gi]) != 0) return false;
    if (f->n_params != g->n_params) return false;
    for (int p = 0; p < f->n_params; p++)
        if (!f->params[p] || !g->params[p] ||
            !same_sharding(gs_instr_get_sharding(f->params[p]),
                           gs_instr_get_sharding(g->params[p])))
            return false;
    return f->root && g->root &&
           same_sharding(gs_instr_get_sharding(f->root), gs_instr_get_sharding(g->root));
}

/* The calls of c (and of its regions) in walk order, into *calls. */
static void collect_calls(exporter *e, const gs_computation *c, gs_vec *calls, int depth) {
    if (depth > 256 || e->oom) return;
    for (int k = 0; k < c->n_instrs; k++) {
        gs_instr *in = c->instrs[k];
        gs_computation *f = callee(in);
        for (int a = 0; a < in->n_attrs; a++) {
            const gs_attr *at = &in->attrs[a];
            gs_attr_kind kind = gs_attr_kind_of(at->key);
            if (kind == GS_AK_COMP && at->u.comp && at->u.comp != f)
                collect_calls(e, at->u.comp, calls, depth + 1);
            for (int j = 0; kind == GS_AK_COMPS && j < at->u.comps.n; j++)
                if (at->u.comps.v[j]) collect_calls(e, at->u.comps.v[j], calls, depth + 1);
        }
        if (f && gs_vec_push(calls, &in) != GS_OK) e->oom = true;
    }
}

static int by_symbol_order(const void *x, const void *y) {
    const gs_computation *a = *(gs_computation *const *)x, *b = *(gs_computation *const *)y;
    return (a->symbol_order > b->symbol_order) - (a->symbol_order < b->symbol_order);
}

/* Marks what c reaches through computation attributes. */
static void reach(const exporter *e, const gs_computation *c, bool *live) {
    int ci = index_of(e, c);
    if (ci < 0 || live[ci]) return;
    live[ci] = true;
    for (int k = 0; k < c->n_instrs; k++) {
        const gs_instr *in = c->instrs[k];
        for (int a = 0; a < in->n_attrs; a++) {
            const gs_attr *at = &in->attrs[a];
            gs_attr_kind kind = gs_attr_kind_of(at->key);
            if (kind == GS_AK_COMP && at->u.comp) reach(e, at->u.comp, live);
            for (int j = 0; kind == GS_AK_COMPS && j < at->u.comps.n; j++)
                if (at->u.comps.v[j]) reach(e, at->u.comps.v[j], live);
        }
    }
}

gs_status sdy_export_calls(gs_module *m, bool shared, gs_diags *d) {
    exporter e = {.m = m};
    int n = m->n_comps;
    e.origin = calloc((size_t)n + 1, sizeof *e.origin);
    bool *called = calloc((size_t)n + 1, sizeof *called);
    bool *live = calloc((size_t)n + 1, sizeof *live);
    gs_computation **fns = calloc((size_t)n + 1, sizeof *fns);
    gs_vec calls;
    gs_vec_init(&calls, sizeof(gs_instr *));
    e.oom = !e.origin || !called || !live || !fns;
    for (int i = 0; !e.oom && i < n; i++) {
        const gs_computation *c = m->comps[i];
        e.origin[i] = c->symbol;
        if (gs_strmap_put(&e.index, c->name, (void *)(intptr_t)(i + 1)) != GS_OK) e.oom = true;
        if (c->symbol && c->symbol_order >= e.next_order) e.next_order = c->symbol_order + 1;
        for (int k = 0; k < c->n_instrs; k++) {
            int at = index_of(&e, callee(c->instrs[k]));
            if (at >= 0) called[at] = true;
        }
    }
    /* the functions no call calls, in the order written; the private ones among them are
     * dropped (SymbolDCE), the others keep their names */
    int n_fns = 0;
    for (int i = 0; !e.oom && i < n; i++) {
        gs_computation *c = m->comps[i];
        if (!is_function(c)) continue;
        results_from_returns(&e, c);
        if (called[i]) continue;
        if (c->is_private && c != m->entry) continue;
        fns[n_fns++] = c;
        if (gs_strmap_put(&e.taken, c->symbol, (void *)1) != GS_OK) e.oom = true;
    }
    qsort(fns, (size_t)n_fns, sizeof *fns, by_symbol_order);
    for (int i = 0; !e.oom && !shared && i < n_fns; i++) name_calls(&e, fns[i], 0);
    /* every call to the first function met with its key, walking the functions in order */
    int n_all = 0;
    for (int i = 0; !e.oom && i < n; i++)
        if (is_function(m->comps[i]) &&
            (called[i] || !m->comps[i]->is_private || m->comps[i] == m->entry))
            fns[n_all++] = m->comps[i];
    qsort(fns, (size_t)n_all, sizeof *fns, by_symbol_order);
    for (int i = 0; !e.oom && i < n_all; i++) collect_calls(&e, fns[i], &calls, 0);
    gs_instr **cv = calls.data;
    for (size_t i = 0; !e.oom && !shared && i < calls.n; i++) {
        gs_computation *f = callee(cv[i]);
        for (size_t j = 0; j < i; j++) {
            gs_computation *g = callee(cv[j]);
            if (g != f && same_function(&e, g, f)) {
                gs_attr at = {.key = GS_ATTR_TO_APPLY, .name = "to_apply"};
                at.u.comp = g;
                if (gs_instr_set_attr(m, cv[i], &at) != GS_OK) e.oom = true;
                break;
            }
        }
    }
    /* what the functions kept reach; the rest is dropped */
    for (int i = 0; !e.oom && i < n; i++) {
        gs_computation *c = m->comps[i];
        if (c == m->entry || (is_function(c) && !called[i] && !c->is_private)) reach(&e, c, live);
    }
    if (!e.oom) {
        int k = 0;
        for (int i = 0; i < n; i++)
            if (live[i]) m->comps[k++] = m->comps[i];
        m->n_comps = k;
    }
    gs_vec_free(&calls);
    gs_strmap_free(&e.taken);
    gs_strmap_free(&e.index);
    free(e.origin);
    free(called);
    free(live);
    free(fns);
    return e.oom ? gs_error(d, gs_span_none(), "out of memory") : GS_OK;
}
