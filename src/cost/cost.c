/*
 * cost.c — FLOPs and peak memory of a module (gspmd/cost.h), one function per op family that
 * has a cost, walked over every computation reachable from the entry once per call site.
 * Computations applied per element (the to_apply of reduce, sort, scatter, map, all-reduce...)
 * are scalar and not counted.
 */
#include "gspmd/cost.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_CALLED = 64 };

static double product(const gs_shape *s) {
    double p = 1;
    for (int i = 0; i < s->rank; i++) p *= (double)s->dims[i];
    return p;
}

static double dot_flops(const gs_instr *in) {
    if (in->n_operands < 2 || !gs_shape_is_array(in->shape)) return 0;
    const gs_shape *lhs = in->operands[0]->shape;
    gs_ints lc = gs_instr_ints(in, GS_ATTR_LHS_CONTRACTING_DIMS);
    double k = 1;
    for (int i = 0; i < lc.n; i++)
        if (lc.v[i] >= 0 && lc.v[i] < lhs->rank) k *= (double)lhs->dims[lc.v[i]];
    return 2 * product(in->shape) * k;
}

static double convolution_flops(const gs_instr *in) {
    const gs_attr *la = gs_instr_attr(in, GS_ATTR_DIM_LABELS);
    if (in->n_operands < 2 || !la || !la->u.conv || !gs_shape_is_array(in->shape)) return 0;
    const gs_shape *k = in->operands[1]->shape;
    int64_t of = la->u.conv->k_out_feature;
    if (of < 0 || of >= k->rank || k->dims[of] == 0) return 0;
    return 2 * product(in->shape) * product(k) / (double)k->dims[of];
}

double gs_cost_instr_flops(const gs_instr *in) {
    switch (gs_op_info_of(in->op)->family) {
    case GS_FAM_DOT: return dot_flops(in);
    case GS_FAM_CONVOLUTION: return convolution_flops(in);
    default: return 0;
    }
}

/* Does `in` run the computations it calls as programs (control flow, calls), rather than per
 * element (reductions, comparators)? */
static bool runs_called(const gs_instr *in) {
    gs_op_family f = gs_op_info_of(in->op)->family;
    return f == GS_FAM_WHILE || f == GS_FAM_CONDITIONAL || f == GS_FAM_CALL ||
           (f == GS_FAM_ASYNC && (gs_op_info_of(in->op)->flags & GS_OPF_ASYNC_START));
}

/* Does `in` alias its operands' storage instead of holding a new value? */
static bool aliases(const gs_instr *in) {
    return in->op == GS_OP_PARAMETER || in->op == GS_OP_TUPLE ||
           in->op == GS_OP_GET_TUPLE_ELEMENT;
}

/* The walk over computations (depth guards against recursion the verifier would reject). */
typedef struct walk {
    const gs_module *m;
    int depth;
} walk;

static void comp_cost(walk *w, const gs_computation *c, gs_cost *out);

/* Peak of c's live values beyond its parameters, with its called computations' peaks added at
 * their call sites; flops and counts accumulate into out. */
static void comp_cost(walk *w, const gs_computation *c, gs_cost *out) {
    memset(out, 0, sizeof *out);
    if (w->depth > 64) return; /* recursion: the verifier rejects it; stay finite */
    w->depth++;
    int n = c->n_instrs;
    int *last = calloc((size_t)n + 1, sizeof *last);
    int64_t *free_at = calloc((size_t)n + 1, sizeof *free_at);
    if (!last || !free_at) {
        free(last);
        free(free_at);
        w->depth--;
        return;
    }
    for (int i = 0; i < n; i++) last[i] = c->instrs[i]->is_root ? n : i;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < c->instrs[i]->n_operands; k++) {
            const gs_instr *o = c->instrs[i]->operands[k];
            if (o->parent == c && last[o->id] < i) last[o->id] = i;
        }
    int64_t live = 0, peak = 0;
    for (int i = 0; i < n; i++) {
        const gs_instr *in = c->instrs[i];
        out->flops += gs_cost_instr_flops(in);
        if (in->op == GS_OP_DOT) out->n_dots++;
        if (in->op == GS_OP_CONVOLUTION) out->n_convs++;
        int64_t inner = 0;
        if (runs_called(in)) {
            gs_computation *called[MAX_CALLED];
            int nc = gs_instr_called(in, called, MAX_CALLED);
            for (int k = 0; k < nc && k < MAX_CALLED; k++) {
                if (!called[k] || called[k] == c) continue;
                gs_cost sub;
                comp_cost(w, called[k], &sub);
                out->flops += sub.flops;
                out->n_dots += sub.n_dots;
                out->n_convs += sub.n_convs;
                if (sub.peak_bytes > inner) inner = sub.peak_bytes;
            }
        }
        int64_t bytes = aliases(in) ? 0 : gs_shape_bytes(in->shape);
        if (live + inner + bytes > peak) peak = live + inner + bytes;
        live += bytes;
        if (last[i] < n) free_at[last[i]] += bytes;
        live -= free_at[i];
    }
    out->peak_bytes = peak;
    free(last);
    free(free_at);
    w->depth--;
}

void gs_cost_module(const gs_module *m, gs_cost *out) {
    memset(out, 0, sizeof *out);
    if (!m->entry) return;
    walk w = {m, 0};
    comp_cost(&w, m->entry, out);
    for (int i = 0; i < m->entry->n_params; i++)
        out->param_bytes += gs_shape_bytes(m->entry->params[i]->shape);
    out->peak_bytes += out->param_bytes;
}
