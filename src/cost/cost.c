/*
 * cost.c — FLOPs and peak memory of a module (gspmd/cost.h), one function per op family that
 * has a cost, walked over every computation reachable from the entry once per call site.
 * Computations applied per element (the to_apply of reduce, sort, scatter, map, all-reduce...)
 * are scalar and not counted.
 */
#include "gspmd/cost.h"
#include "cost/internal.h"

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
    /* A ragged contracting dim: the result's leading group dim splits the k range. */
    gs_ints lr = gs_instr_ints(in, GS_ATTR_LHS_RAGGED_DIMS);
    double groups = in->op == GS_OP_RAGGED_DOT && lr.n == 1 && gs_ints_contains(lc, lr.v[0]) &&
                            in->shape->rank > 0 && in->shape->dims[0] > 0
                        ? (double)in->shape->dims[0]
                        : 1;
    return 2 * product(in->shape) * k / groups;
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

/* Does `in` read its operands' storage instead of holding a new value (a tuple of buffers; a
 * reshape, XLA's bitcast: the same bytes with other dims)? Their operands live as long as they
 * do. A get-tuple-element takes its element over (counted as its own: the rest of the tuple may
 * die), and parameters are their caller's. */
static bool aliases(const gs_instr *in) {
    return in->op == GS_OP_TUPLE || in->op == GS_OP_RESHAPE || in->op == GS_OP_BITCAST;
}

/* What a contraction's kernel holds beside its operands and result while it runs (k_dot.c):
 * both operands and the result, gathered and widened to the compute type (f32 for the narrow
 * floats, int64 for integers), the convolution's patch and weight blocks within that. An upper
 * bound: f32 operands already in place are not copied. */
static int64_t kernel_scratch(const gs_instr *in) {
    if ((in->op != GS_OP_DOT && in->op != GS_OP_RAGGED_DOT && in->op != GS_OP_CONVOLUTION) ||
        in->n_operands < 2 || !gs_shape_is_array(in->shape))
        return 0;
    gs_type t = in->shape->type;
    int64_t es = t == GS_C128 ? 16 : t == GS_F64 || t == GS_C64 || !gs_type_is_float(t) ? 8 : 4;
    double n = product(in->shape);
    for (int k = 0; k < 2; k++)
        if (gs_shape_is_array(in->operands[k]->shape)) n += product(in->operands[k]->shape);
    return n * (double)es < 9.0e18 ? (int64_t)(n * (double)es) : INT64_MAX / 4;
}

/* The walk over computations (depth guards against recursion the verifier would reject). */
typedef struct walk {
    const gs_module *m;
    int depth;
    bool materialise; /* every value its own buffer (run_peak_bytes) */
} walk;

static void comp_cost(walk *w, const gs_computation *c, gs_cost *out);

/* Peak of c's live values beyond its parameters (an instruction with in_place[id] set is
 * written into a donated parameter's buffer and takes none), with its called computations'
 * peaks added at their call sites; flops and counts accumulate into out. */
static void comp_cost_in_place(walk *w, const gs_computation *c, const bool *in_place,
                               gs_cost *out);

static void comp_cost(walk *w, const gs_computation *c, gs_cost *out) {
    comp_cost_in_place(w, c, NULL, out);
}

static void comp_cost_in_place(walk *w, const gs_computation *c, const bool *in_place,
                               gs_cost *out) {
    memset(out, 0, sizeof *out);
    if (w->depth > 64) return; /* recursion: the verifier rejects it; stay finite */
    w->depth++;
    int n = c->n_instrs;
    /* positions in an order with operands before users (the text may name an operand first) */
    int *order = gs_cost_operands_first(c);
    int *pos = calloc((size_t)n + 1, sizeof *pos);
    int *last = calloc((size_t)n + 1, sizeof *last);
    int64_t *free_at = calloc((size_t)n + 1, sizeof *free_at);
    /* A value XLA's fusion computes inside its users' kernels never exists in memory; nor does a
     * transpose folded into the dots that read it (fusion.c). By instruction id. */
    char *fused = calloc((size_t)n + 1, 1), *fused_node = NULL;
    gs_cost_graph g;
    bool ok = order && pos && last && free_at && fused;
    if (ok && !w->materialise) {
        bool built = gs_cost_graph_build(c, false, &g);
        if (built && (fused_node = calloc((size_t)g.n + 1, 1)) != NULL) {
            gs_cost_fusion(&g, fused_node);
            for (int v = 0; v < g.n; v++) fused[g.instr[v]->id] = fused_node[v];
        }
        ok = fused_node != NULL;
        if (built) gs_cost_graph_free(&g);
        free(fused_node);
    }
    if (!ok) {
        free(order);
        free(pos);
        free(last);
        free(free_at);
        free(fused);
        w->depth--;
        return;
    }
    for (int p = 0; p < n; p++) pos[order[p]] = p;
    for (int p = 0; p < n; p++) last[p] = c->instrs[order[p]]->is_root ? n : p;
    for (int p = 0; p < n; p++) {
        const gs_instr *in = c->instrs[order[p]];
        for (int k = 0; k < in->n_operands; k++) {
            const gs_instr *o = in->operands[k];
            if (o->parent == c && last[pos[o->id]] < p) last[pos[o->id]] = p;
        }
    }
    /* Storage an alias reads, and the operands of a fused value, live as long as it does
     * (latest users first). */
    for (int p = n - 1; p >= 0; p--) {
        const gs_instr *in = c->instrs[order[p]];
        if (!aliases(in) && !fused[in->id]) continue;
        for (int k = 0; k < in->n_operands; k++) {
            const gs_instr *o = in->operands[k];
            if (o->parent == c && last[pos[o->id]] < last[p]) last[pos[o->id]] = last[p];
        }
    }
    int64_t live = 0, peak = 0;
    for (int p = 0; p < n; p++) {
        const gs_instr *in = c->instrs[order[p]];
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
        if (w->materialise && kernel_scratch(in) > inner) inner = kernel_scratch(in);
        bool free_slot = aliases(in) || in->op == GS_OP_PARAMETER || fused[in->id] ||
                         (in_place && in_place[in->id]);
        int64_t bytes = free_slot ? 0 : gs_shape_bytes(in->shape);
        if (in->op == GS_OP_WHILE) {
            /* The loop state is updated in place: an initial value that dies at the loop is the
             * loop's own buffer. */
            live -= free_at[p];
            free_at[p] = 0;
        }
        if (live + inner + bytes > peak) peak = live + inner + bytes;
        live += bytes;
        if (last[p] < n) free_at[last[p]] += bytes;
        live -= free_at[p];
    }
    out->peak_bytes = peak;
    free(order);
    free(pos);
    free(last);
    free(free_at);
    free(fused);
    w->depth--;
}

void gs_cost_module(const gs_module *m, gs_cost *out) {
    memset(out, 0, sizeof *out);
    if (!m->entry) return;
    walk w = {m, 0, false};
    const gs_instr *root = m->entry->root;
    int n_out = root && root->op == GS_OP_TUPLE ? root->n_operands : 0;
    int *out_param = calloc((size_t)n_out + 1, sizeof *out_param);
    bool *in_place = calloc((size_t)m->entry->n_instrs + 1, sizeof *in_place);
    if (out_param && in_place) {
        gs_module_output_aliases(m, out_param, n_out, NULL); /* (none where malformed) */
        for (int i = 0; i < n_out; i++) {
            const gs_instr *o = root->operands[i];
            /* Through bitcasts to the instruction that writes the bytes. */
            while ((o->op == GS_OP_RESHAPE || o->op == GS_OP_BITCAST) && o->n_operands == 1)
                o = o->operands[0];
            if (out_param[i] >= 0 && o->op != GS_OP_PARAMETER && o->parent == m->entry)
                in_place[o->id] = true;
        }
    }
    comp_cost_in_place(&w, m->entry, in_place, out);
    for (int i = 0; i < m->entry->n_params; i++)
        out->param_bytes += gs_shape_bytes(m->entry->params[i]->shape);
    out->peak_bytes += out->param_bytes;
    gs_cost all;
    walk wm = {m, 0, true};
    comp_cost_in_place(&wm, m->entry, NULL, &all);
    out->run_peak_bytes = all.peak_bytes + out->param_bytes;
    free(out_param);
    free(in_place);
}
