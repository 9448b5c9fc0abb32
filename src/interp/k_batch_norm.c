/*
 * k_batch_norm.c — the batch-norm kernels: batch-norm-training, -inference and -grad, with the
 * per-feature statistics computed in double precision.
 */
#include "kernels.h"
#include "base/sysalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Per-feature statistics layout: feature dim f; the other dims are reduced. */
typedef struct bn_geom {
    int64_t c;     /* features */
    int64_t inner; /* product of dims after f */
    int64_t outer; /* product of dims before f */
    int64_t count; /* elements per feature */
} bn_geom;

static bool bn_geometry(const gs_value *x, int64_t f, bn_geom *g) {
    if (f < 0 || f >= x->rank) return false;
    g->c = x->dims[f];
    g->inner = 1;
    g->outer = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i < f) g->outer *= x->dims[i];
        if (i > f) g->inner *= x->dims[i];
    }
    g->count = g->inner * g->outer;
    return true;
}

static inline int64_t bn_index(const bn_geom *g, int64_t o, int64_t c, int64_t i) {
    return (o * g->c + c) * g->inner + i;
}

/* Per feature c: the mean and variance batch-norm `in` normalises with, given (inference:
 * operands 3 and 4; grad: 2 and 3) or computed over the batch (training). */
static void bn_statistics(const gs_instr *in, gs_value *const *ops, const bn_geom *g,
                          double *mean, double *var) {
    const gs_value *x = ops[0];
    gs_type t = x->type;
    int given = in->op == GS_OP_BATCH_NORM_INFERENCE ? 3 : in->op == GS_OP_BATCH_NORM_GRAD ? 2 : 0;
    for (int64_t c = 0; c < g->c; c++) {
        if (given) {
            mean[c] = gs_elem_get_f(ops[given]->data, ops[given]->type, c);
            var[c] = gs_elem_get_f(ops[given + 1]->data, ops[given + 1]->type, c);
            continue;
        }
        double s = 0, s2 = 0;
        for (int64_t o = 0; o < g->outer; o++)
            for (int64_t i = 0; i < g->inner; i++) s += gs_elem_get_f(x->data, t, bn_index(g, o, c, i));
        double m = g->count ? s / (double)g->count : 0;
        for (int64_t o = 0; o < g->outer; o++)
            for (int64_t i = 0; i < g->inner; i++) {
                double dv = gs_elem_get_f(x->data, t, bn_index(g, o, c, i)) - m;
                s2 += dv * dv;
            }
        mean[c] = m;
        var[c] = g->count ? s2 / (double)g->count : 0;
    }
}

static gs_status k_batch_norm(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *x = ops[0];
    int64_t f = gs_instr_int(in, GS_ATTR_FEATURE_INDEX, -1);
    const gs_attr *ea = gs_instr_attr(in, GS_ATTR_EPSILON);
    double eps = ea ? ea->u.f : 0.0;
    bn_geom g;
    if (!bn_geometry(x, f, &g)) return gs_eval_error(ev, in, "feature_index is out of range");
    gs_type t = x->type;
    double *mean = gs_sys_calloc((size_t)(g.c ? g.c : 1), sizeof(double));
    double *var = gs_sys_calloc((size_t)(g.c ? g.c : 1), sizeof(double));
    if (!mean || !var) {
        free(mean);
        free(var);
        return gs_eval_oom(ev, in);
    }
    gs_status st = GS_OK;
    gs_value *res[3] = {NULL, NULL, NULL};
    bn_statistics(in, ops, &g, mean, var);
    const gs_value *scale = ops[1];
    if (in->op == GS_OP_BATCH_NORM_GRAD) {
        const gs_value *dy = ops[4];
        res[0] = gs_value_new_array(t, x->rank, x->dims);
        res[1] = gs_value_new_array(scale->type, 1, &g.c);
        res[2] = gs_value_new_array(scale->type, 1, &g.c);
        if (!res[0] || !res[1] || !res[2]) st = gs_eval_oom(ev, in);
        for (int64_t c = 0; st == GS_OK && c < g.c; c++) {
            double inv = 1.0 / sqrt(var[c] + eps), sdy = 0, sdyx = 0;
            for (int64_t o = 0; o < g.outer; o++)
                for (int64_t i = 0; i < g.inner; i++) {
                    int64_t k = bn_index(&g, o, c, i);
                    double d = gs_elem_get_f(dy->data, dy->type, k);
                    sdy += d;
                    sdyx += d * (gs_elem_get_f(x->data, t, k) - mean[c]) * inv;
                }
            double sc = gs_elem_get_f(scale->data, scale->type, c);
            for (int64_t o = 0; o < g.outer; o++)
                for (int64_t i = 0; i < g.inner; i++) {
                    int64_t k = bn_index(&g, o, c, i);
                    double xh = (gs_elem_get_f(x->data, t, k) - mean[c]) * inv;
                    double d = gs_elem_get_f(dy->data, dy->type, k);
                    double n = (double)g.count;
                    gs_elem_set_f(res[0]->data, t, k, sc * inv * (d - sdy / n - xh * sdyx / n));
                }
            gs_elem_set_f(res[1]->data, scale->type, c, sdyx);
            gs_elem_set_f(res[2]->data, scale->type, c, sdy);
        }
    } else {
        const gs_value *offset = ops[2];
        res[0] = gs_value_new_array(t, x->rank, x->dims);
        if (!res[0]) st = gs_eval_oom(ev, in);
        for (int64_t c = 0; st == GS_OK && c < g.c; c++) {
            double inv = 1.0 / sqrt(var[c] + eps);
            double sc = gs_elem_get_f(scale->data, scale->type, c);
            double of = gs_elem_get_f(offset->data, offset->type, c);
            for (int64_t o = 0; o < g.outer; o++)
                for (int64_t i = 0; i < g.inner; i++) {
                    int64_t k = bn_index(&g, o, c, i);
                    gs_elem_set_f(res[0]->data, t, k, (gs_elem_get_f(x->data, t, k) - mean[c]) * inv * sc + of);
                }
        }
        if (st == GS_OK && in->op == GS_OP_BATCH_NORM_TRAINING) {
            res[1] = gs_value_new_array(scale->type, 1, &g.c);
            res[2] = gs_value_new_array(scale->type, 1, &g.c);
            if (!res[1] || !res[2]) st = gs_eval_oom(ev, in);
            for (int64_t c = 0; st == GS_OK && c < g.c; c++) {
                gs_elem_set_f(res[1]->data, scale->type, c, mean[c]);
                gs_elem_set_f(res[2]->data, scale->type, c, var[c]);
            }
        }
    }
    free(mean);
    free(var);
    if (st != GS_OK) {
        for (int i = 0; i < 3; i++) gs_value_free(res[i]);
        return st;
    }
    if (in->op == GS_OP_BATCH_NORM_INFERENCE) {
        *out = res[0];
        return GS_OK;
    }
    *out = gs_value_new_tuple(3, res);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

gs_kernel_fn gs_kernel_batch_norm(gs_opcode op) {
    switch (op) {
    case GS_OP_BATCH_NORM_TRAINING:
    case GS_OP_BATCH_NORM_INFERENCE:
    case GS_OP_BATCH_NORM_GRAD: return k_batch_norm;
    default: return NULL;
    }
}
