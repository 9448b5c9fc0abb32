/*
 * k_reduce.c — the kernels that fold, window, order or scan with a called computation: reduce,
 * reduce-window, select-and-scatter, sort, topk and scan.
 *
 * Orders are fixed so results are deterministic and match XLA's evaluator:
 *   reduce         every output element folds its inputs in row-major order, starting from the
 *                  init value: acc = f(acc, x) (variadic: f(acc..., x...));
 *   reduce-window  every output element folds its window positions in row-major order, starting
 *                  from the init value; positions in padding or in base-dilation holes are
 *                  skipped (XLA's evaluator: they contribute nothing beyond the init value);
 *   select-and-scatter  per source element, the window is walked row-major; the first valid
 *                  position is selected and a later one replaces it when select(selected, cur)
 *                  is false; padding is never selected; out = scatter(source, out) at the
 *                  selected position, out starting as the init value;
 *   sort           a stable bottom-up merge sort per line (is_stable or not);
 *   topk           values sorted largest (or smallest) first, ties keep the lower index first;
 *   scan           XLA's scan: operands are inputs then num_carries initial carries; for each
 *                  index along the dim (last to first with is_reverse), to_apply(input slices...,
 *                  carries...) returns (output slices..., new carries...); the result is
 *                  (outputs..., final carries...).
 * Reductions with a simple binary computation (add, max, ...) skip calling it.
 */
#include "kernels.h"
#include "base/sysalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ reducer */

/* A reduction computation applied to n parallel values. */
typedef struct reducer {
    const gs_computation *comp; /* the computation */
    int n;                      /* values reduced together */
    const gs_type *types;       /* their (accumulator) types */
    bool simple;                /* comp is one binary op on its two parameters (n == 1) */
    gs_opcode op;               /* that op */
} reducer;

/* Describes comp applied to n values of the given types (types is borrowed). */
static void reducer_init(reducer *rd, const gs_computation *comp, int n, const gs_type *types) {
    rd->comp = comp;
    rd->n = n;
    rd->types = types;
    rd->simple = n == 1 && gs_computation_binary_reducer(comp, &rd->op) &&
                 comp->root->shape->type == types[0];
}

/* accs[k][ia] = comp(accs[k][ia]..., xs[k][ix]...). */
static gs_status reducer_step(gs_eval *ev, const gs_instr *in, const reducer *rd,
                              void *const *accs, int64_t ia, const void *const *xs, int64_t ix) {
    if (rd->simple) {
        if (rd->types[0] == GS_F32 && rd->op == GS_OP_ADD) {
            ((float *)accs[0])[ia] += ((const float *)xs[0])[ix];
            return GS_OK;
        }
        gs_scalar_binary(rd->op, rd->types[0], accs[0], ia, xs[0], ix, rd->types[0], accs[0], ia);
        return GS_OK;
    }
    return gs_apply_reducer(ev, in, rd->comp, rd->n, rd->types, accs, ia, xs, ix);
}

/* ------------------------------------------------------------------ helpers */

/* v itself (a new reference) when its type is t, else a converted copy. NULL on OOM. */
static gs_value *as_type(gs_value *v, gs_type t) {
    if (v->type == t) return gs_value_ref(v);
    gs_value *r = gs_value_new_array(t, v->rank, v->dims);
    if (!r) return NULL;
    for (int64_t i = 0; i < v->n; i++) gs_scalar_convert(v->type, v->data, i, t, r->data, i);
    return r;
}

/* The array shape of result leaf k (the shape itself when it is not a tuple). */
static const gs_shape *leaf_shape(const gs_instr *in, int k) {
    if (in->shape->type == GS_TUPLE) return k < in->shape->n_tuple ? in->shape->tuple[k] : NULL;
    return k == 0 ? in->shape : NULL;
}

/* A new array of leaf shape s converted from n_elems accumulators acc (type at). NULL on OOM. */
static gs_value *value_from_acc(const gs_shape *s, gs_type at, const void *acc) {
    gs_value *v = gs_value_new_array(s->type, s->rank, s->dims);
    if (!v) return NULL;
    if (at == v->type)
        memcpy(v->data, acc, gs_value_bytes(v));
    else
        for (int64_t i = 0; i < v->n; i++) gs_scalar_convert(at, acc, i, v->type, v->data, i);
    return v;
}

/* Wraps n leaves as the instruction's result: a tuple when its shape is one, else leaves[0].
 * Takes over the references. */
static gs_status wrap_result(gs_eval *ev, const gs_instr *in, int n, gs_value **leaves,
                             gs_value **out) {
    if (in->shape->type == GS_TUPLE) {
        *out = gs_value_new_tuple(n, leaves);
        return *out ? GS_OK : gs_eval_oom(ev, in);
    }
    for (int k = 1; k < n; k++) gs_value_free(leaves[k]);
    *out = leaves[0];
    return GS_OK;
}

/* Frees n values and the array holding them. */
static void free_values(gs_value **v, int n) {
    if (!v) return;
    for (int i = 0; i < n; i++) gs_value_free(v[i]);
    free(v);
}

/* Checks that the result has n array leaves, each of the given rank and dims. */
static bool leaves_have_dims(const gs_instr *in, int n, int rank, const int64_t *dims) {
    int want = in->shape->type == GS_TUPLE ? in->shape->n_tuple : 1;
    if (want != n) return false;
    for (int k = 0; k < n; k++) {
        const gs_shape *s = leaf_shape(in, k);
        if (!s || !gs_type_is_array(s->type) || s->rank != rank) return false;
        for (int i = 0; i < rank; i++)
            if (s->dims[i] != dims[i]) return false;
    }
    return true;
}

/* ------------------------------------------------------------------ reduce */

/* A float sum (or an f32 maximum or minimum, as float_binary computes them) over a run of
 * adjacent dims, the input seen as [A, R, B] (A kept dims before the run, R the reduced run, B
 * kept dims after): acc[a, b] = acc[a, b] op x[a, r, b] for r ascending, the order the
 * row-major walk takes, as loops over contiguous memory. False (nothing done) for other
 * reductions. */
static bool add_block(const reducer *rd, const gs_value *x, const bool *reduced, const void *xs,
                      void *acc) {
    if (!rd->simple || rd->n != 1) return false;
    gs_type t = rd->types[0];
    if (rd->op == GS_OP_MAXIMUM || rd->op == GS_OP_MINIMUM) {
        if (t != GS_F32) return false;
    } else if (rd->op != GS_OP_ADD || (t != GS_F32 && t != GS_F64)) {
        return false;
    }
    int first = -1, last = -1;
    for (int d = 0; d < x->rank; d++)
        if (reduced[d]) {
            if (first < 0) first = d;
            else if (last != d - 1) return false; /* not one run */
            last = d;
        }
    if (first < 0) return false;
    int64_t A = 1, R = 1, B = 1;
    for (int d = 0; d < x->rank; d++) *(d < first ? &A : d <= last ? &R : &B) *= x->dims[d];
    if (B == 1 && t == GS_F32 && rd->op == GS_OP_ADD) { /* adjacent elements: a register sum */
        for (int64_t a = 0; a < A; a++) {
            const float *xv = (const float *)xs + a * R;
            float sum = ((float *)acc)[a];
            for (int64_t r = 0; r < R; r++) sum += xv[r];
            ((float *)acc)[a] = sum;
        }
        return true;
    }
    if (rd->op != GS_OP_ADD) { /* f32 maximum or minimum: one element at a time, in order */
        float *av = acc;
        const float *xv = xs;
        bool mx = rd->op == GS_OP_MAXIMUM;
        for (int64_t a = 0; a < A; a++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t b = 0; b < B; b++) {
                    float u = av[a * B + b], v = xv[(a * R + r) * B + b];
                    av[a * B + b] = mx ? gs_max_f32(u, v) : gs_min_f32(u, v);
                }
        return true;
    }
    for (int64_t a = 0; a < A; a++)
        for (int64_t r = 0; r < R; r++) {
            int64_t in0 = (a * R + r) * B, out0 = a * B;
            if (t == GS_F32) {
                const float *xv = (const float *)xs + in0;
                float *av = (float *)acc + out0;
                if (B == 1) av[0] += xv[0];
                else
                    for (int64_t b = 0; b < B; b++) av[b] += xv[b];
            } else {
                const double *xv = (const double *)xs + in0;
                double *av = (double *)acc + out0;
                for (int64_t b = 0; b < B; b++) av[b] += xv[b];
            }
        }
    return true;
}

/* reduce: N inputs folded over `dimensions` into N results (a tuple when N > 1). */
static gs_status k_reduce(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    int n = in->n_operands / 2;
    const gs_computation *comp = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!comp) return gs_eval_error(ev, in, "reduce needs to_apply=");
    if (n < 1 || in->n_operands != 2 * n || n > 32)
        return gs_eval_error(ev, in, "reduce needs N inputs and N init values");
    const gs_value *x0 = ops[0];
    for (int k = 0; k < n; k++) {
        if (ops[k]->rank != x0->rank ||
            memcmp(ops[k]->dims, x0->dims, sizeof(int64_t) * (size_t)x0->rank) ||
            ops[n + k]->rank != 0)
            return gs_eval_error(ev, in, "reduce inputs must share dims and inits be scalars");
    }
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    bool reduced[GS_MAX_RANK] = {false};
    for (int i = 0; i < dims.n; i++) {
        if (dims.v[i] < 0 || dims.v[i] >= x0->rank || reduced[dims.v[i]])
            return gs_eval_error(ev, in, "invalid reduce dimensions");
        reduced[dims.v[i]] = true;
    }
    int64_t odims[GS_MAX_RANK], ost[GS_MAX_RANK], step[GS_MAX_RANK];
    int orank = 0;
    for (int d = 0; d < x0->rank; d++)
        if (!reduced[d]) odims[orank++] = x0->dims[d];
    if (!leaves_have_dims(in, n, orank, odims))
        return gs_eval_error(ev, in, "result shape does not match the reduced dims");
    gs_strides(orank, odims, ost);
    int64_t on = 1;
    for (int i = 0; i < orank; i++) on *= odims[i];
    for (int d = 0, j = 0; d < x0->rank; d++) step[d] = reduced[d] ? 0 : ost[j++];

    gs_type types[32];
    void *accs[32] = {0};
    gs_value *xs_v[32] = {0};
    const void *xs[32];
    gs_value *leaves[32] = {0};
    gs_status st = GS_OK;
    for (int k = 0; k < n && st == GS_OK; k++) {
        types[k] = ops[n + k]->type;
        int sz = gs_type_size(types[k]);
        accs[k] = gs_sys_malloc((size_t)(on ? on : 1) * (size_t)sz);
        xs_v[k] = as_type(ops[k], types[k]);
        if (!accs[k] || !xs_v[k]) {
            st = gs_eval_oom(ev, in);
            break;
        }
        xs[k] = xs_v[k]->data;
        for (int64_t o = 0; o < on; o++) gs_copy_elem(accs[k], o, ops[n + k]->data, 0, sz);
    }
    reducer rd;
    memset(&rd, 0, sizeof rd);
    if (st == GS_OK) reducer_init(&rd, comp, n, types);
    /* Walking the input row-major visits each output's inputs in row-major order of the reduced
     * dims, so per output element the fold order is the required one. */
    int64_t idx[GS_MAX_RANK] = {0}, o = 0;
    if (st == GS_OK && add_block(&rd, x0, reduced, xs[0], accs[0])) o = -1; /* done */
    for (int64_t i = 0; st == GS_OK && o >= 0 && i < x0->n; i++) {
        st = reducer_step(ev, in, &rd, accs, o, xs, i);
        for (int d = x0->rank - 1; d >= 0; d--) {
            o += step[d];
            if (++idx[d] < x0->dims[d]) break;
            o -= step[d] * x0->dims[d];
            idx[d] = 0;
        }
    }
    for (int k = 0; k < n && st == GS_OK; k++) {
        leaves[k] = value_from_acc(leaf_shape(in, k), types[k], accs[k]);
        if (!leaves[k]) st = gs_eval_oom(ev, in);
    }
    for (int k = 0; k < n; k++) {
        free(accs[k]);
        gs_value_free(xs_v[k]);
    }
    if (st != GS_OK) {
        for (int k = 0; k < n; k++) gs_value_free(leaves[k]);
        return st;
    }
    return wrap_result(ev, in, n, leaves, out);
}

/* ------------------------------------------------------------------ windows */

/* A window over an operand of rank `rank` (reduce-window, select-and-scatter). */
typedef struct win {
    int rank;
    int64_t size[GS_MAX_RANK], stride[GS_MAX_RANK], pad_lo[GS_MAX_RANK], pad_hi[GS_MAX_RANK];
    int64_t base_dil[GS_MAX_RANK], win_dil[GS_MAX_RANK];
    int64_t n_pos; /* positions in one window */
} win;

/* Reads window= for an operand of the given rank (absent: all sizes 1). */
static gs_status win_read(gs_eval *ev, const gs_instr *in, int rank, win *w) {
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_WINDOW);
    const gs_window *wd = a ? a->u.window : NULL;
    if (wd && wd->n != rank)
        return gs_eval_error(ev, in, "window has %d dims, the operand %d", wd->n, rank);
    if (!wd && rank > 0) return gs_eval_error(ev, in, "missing window=");
    w->rank = rank;
    w->n_pos = 1;
    for (int i = 0; i < rank; i++) {
        const gs_window_dim *d = &wd->dims[i];
        w->size[i] = d->size;
        w->stride[i] = d->stride;
        w->pad_lo[i] = d->pad_lo;
        w->pad_hi[i] = d->pad_hi;
        w->base_dil[i] = d->lhs_dilate;
        w->win_dil[i] = d->rhs_dilate;
        if (d->size < 0 || d->stride < 1 || d->lhs_dilate < 1 || d->rhs_dilate < 1)
            return gs_eval_error(ev, in, "invalid window");
        w->n_pos *= d->size;
    }
    return GS_OK;
}

/* XLA's windowed output size along dim i of an operand of size n. */
static int64_t win_out_size(const win *w, int i, int64_t n) {
    int64_t dn = n ? (n - 1) * w->base_dil[i] + 1 : 0;
    int64_t padded = dn + w->pad_lo[i] + w->pad_hi[i];
    int64_t dw = w->size[i] ? (w->size[i] - 1) * w->win_dil[i] + 1 : 0;
    if (padded < dw || padded < 0) return 0;
    return (padded - dw) / w->stride[i] + 1;
}

/* Offsets (in an operand with dims and row-major strides st) of the valid positions of the
 * window placed at output index oidx, in row-major window order. Returns their count. */
static int64_t win_positions(const win *w, const int64_t *dims, const int64_t *st,
                             const int64_t *oidx, int64_t *offs) {
    int64_t wi[GS_MAX_RANK] = {0}, n = 0;
    for (int64_t p = 0; p < w->n_pos; p++) {
        int64_t off = 0;
        bool ok = true;
        for (int i = 0; i < w->rank; i++) {
            int64_t u = oidx[i] * w->stride[i] + wi[i] * w->win_dil[i] - w->pad_lo[i];
            if (u < 0 || u % w->base_dil[i]) {
                ok = false;
                break;
            }
            u /= w->base_dil[i];
            if (u >= dims[i]) {
                ok = false;
                break;
            }
            off += u * st[i];
        }
        if (ok) offs[n++] = off;
        for (int i = w->rank - 1; i >= 0; i--) {
            if (++wi[i] < w->size[i]) break;
            wi[i] = 0;
        }
    }
    return n;
}

/* Whether a reduce-window of rank r folds whole rows of its last dim: one f32 input, a
 * simple reducer gs_binary_f32 has, a window one wide there (stride 1, no padding) and no base
 * dilation anywhere. */
static bool rows_along_last(const reducer *rd, const win *w, int r, gs_type t) {
    if (r < 1 || rd->n != 1 || !rd->simple || t != GS_F32) return false;
    if (rd->op != GS_OP_ADD && rd->op != GS_OP_MAXIMUM && rd->op != GS_OP_MINIMUM &&
        rd->op != GS_OP_MULTIPLY)
        return false;
    for (int i = 0; i < r; i++)
        if (w->base_dil[i] != 1) return false;
    return w->size[r - 1] == 1 && w->stride[r - 1] == 1 && w->pad_lo[r - 1] == 0 &&
           w->pad_hi[r - 1] == 0;
}

/* reduce-window: N inputs folded per window position into N results. */
static gs_status k_reduce_window(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                 gs_value **out) {
    int n = in->n_operands / 2;
    const gs_computation *comp = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!comp) return gs_eval_error(ev, in, "reduce-window needs to_apply=");
    if (n < 1 || in->n_operands != 2 * n || n > 32)
        return gs_eval_error(ev, in, "reduce-window needs N inputs and N init values");
    const gs_value *x0 = ops[0];
    for (int k = 0; k < n; k++)
        if (ops[k]->rank != x0->rank ||
            memcmp(ops[k]->dims, x0->dims, sizeof(int64_t) * (size_t)x0->rank) ||
            ops[n + k]->rank != 0)
            return gs_eval_error(ev, in, "inputs must share dims and inits be scalars");
    win w;
    if (win_read(ev, in, x0->rank, &w) != GS_OK) return GS_ERR;
    int64_t odims[GS_MAX_RANK], xst[GS_MAX_RANK], on = 1;
    for (int i = 0; i < x0->rank; i++) {
        odims[i] = win_out_size(&w, i, x0->dims[i]);
        on *= odims[i];
    }
    if (!leaves_have_dims(in, n, x0->rank, odims))
        return gs_eval_error(ev, in, "result shape does not match the window");
    gs_strides(x0->rank, x0->dims, xst);

    gs_type types[32];
    void *accs[32] = {0};
    gs_value *xs_v[32] = {0};
    const void *xs[32];
    gs_value *leaves[32] = {0};
    int64_t *offs = gs_sys_malloc(sizeof *offs * (size_t)(w.n_pos ? w.n_pos : 1));
    gs_status st = offs ? GS_OK : gs_eval_oom(ev, in);
    for (int k = 0; k < n && st == GS_OK; k++) {
        types[k] = ops[n + k]->type;
        accs[k] = gs_sys_malloc((size_t)(on ? on : 1) * (size_t)gs_type_size(types[k]));
        xs_v[k] = as_type(ops[k], types[k]);
        if (!accs[k] || !xs_v[k]) {
            st = gs_eval_oom(ev, in);
            break;
        }
        xs[k] = xs_v[k]->data;
    }
    reducer rd;
    memset(&rd, 0, sizeof rd);
    if (st == GS_OK) reducer_init(&rd, comp, n, types);
    int64_t oidx[GS_MAX_RANK] = {0};
    int r = x0->rank;
    if (st == GS_OK && rows_along_last(&rd, &w, r, types[0])) {
        /* f32 windows that take the last dim whole, one element wide (NHWC pooling): each
         * position adds a run of the last dim at once, in the same row-major window order */
        int64_t c = odims[r - 1], rows = c > 0 ? on / c : 0;
        float *acc = accs[0];
        float init = *(const float *)ops[n]->data;
        for (int64_t o = 0; o < rows; o++, acc += c) {
            for (int64_t i = 0; i < c; i++) acc[i] = init;
            int64_t np = win_positions(&w, x0->dims, xst, oidx, offs);
            for (int64_t p = 0; p < np; p++)
                gs_binary_f32(rd.op, acc, (const float *)xs[0] + offs[p], acc, c);
            if (r > 1) gs_index_next(r - 1, odims, oidx);
        }
        on = 0; /* done */
    }
    for (int64_t o = 0; st == GS_OK && o < on; o++) {
        for (int k = 0; k < n; k++)
            gs_copy_elem(accs[k], o, ops[n + k]->data, 0, gs_type_size(types[k]));
        int64_t np = win_positions(&w, x0->dims, xst, oidx, offs);
        for (int64_t p = 0; p < np && st == GS_OK; p++)
            st = reducer_step(ev, in, &rd, accs, o, xs, offs[p]);
        gs_index_next(x0->rank, odims, oidx);
    }
    for (int k = 0; k < n && st == GS_OK; k++) {
        leaves[k] = value_from_acc(leaf_shape(in, k), types[k], accs[k]);
        if (!leaves[k]) st = gs_eval_oom(ev, in);
    }
    for (int k = 0; k < n; k++) {
        free(accs[k]);
        gs_value_free(xs_v[k]);
    }
    free(offs);
    if (st != GS_OK) {
        for (int k = 0; k < n; k++) gs_value_free(leaves[k]);
        return st;
    }
    return wrap_result(ev, in, n, leaves, out);
}

/* ------------------------------------------------------------------ scalar calls */

/* A comparator that is one compare of operand k's two elements (see comp_is_fast_compare). */
typedef struct fast_cmp {
    int operand;          /* k */
    bool swap;            /* the compare's first argument is the second element (param 2k+1) */
    const char *dir;      /* direction */
    const char *cmp_type; /* compare type, or NULL */
} fast_cmp;

/* If c is `ROOT compare(param p, param q)` with p, q in {2k, 2k+1} for one k (a comparison of one
 * operand's two elements), fills fc and returns true. */
static bool comp_is_fast_compare(const gs_computation *c, fast_cmp *fc) {
    const gs_instr *r = c->root;
    if (r->op != GS_OP_COMPARE || r->n_operands != 2) return false;
    const gs_instr *a = r->operands[0], *b = r->operands[1];
    if (a->op != GS_OP_PARAMETER || b->op != GS_OP_PARAMETER) return false;
    int64_t p = a->parameter_number, q = b->parameter_number;
    if (p / 2 != q / 2 || p == q) return false;
    fc->dir = gs_instr_str(r, GS_ATTR_DIRECTION);
    if (!fc->dir) return false;
    fc->cmp_type = gs_instr_str(r, GS_ATTR_TYPE);
    fc->operand = (int)(p / 2);
    fc->swap = p % 2 == 1;
    return true;
}

/* Scalar argument values for calling a computation on elements of arrays. */
typedef struct scalar_args {
    int n;           /* number of arguments */
    gs_value **v;    /* n scalar values, refilled before each call */
} scalar_args;

/* Allocates n scalars of the given types. */
static gs_status scalar_args_init(gs_eval *ev, const gs_instr *in, scalar_args *sa, int n,
                                  const gs_type *types) {
    sa->n = n;
    sa->v = gs_sys_calloc((size_t)(n ? n : 1), sizeof *sa->v);
    if (!sa->v) return gs_eval_oom(ev, in);
    for (int i = 0; i < n; i++) {
        sa->v[i] = gs_value_new_array(types[i], 0, NULL);
        if (!sa->v[i]) return gs_eval_oom(ev, in);
    }
    return GS_OK;
}

/* Frees the scalars. */
static void scalar_args_free(scalar_args *sa) {
    free_values(sa->v, sa->n);
    sa->v = NULL;
}

/* Calls c on sa's values and reads a pred result into *res. */
static gs_status call_pred(gs_eval *ev, const gs_instr *in, const gs_computation *c,
                           scalar_args *sa, bool *res) {
    gs_value *y;
    if (gs_eval_call(ev, c, sa->v, sa->n, &y) != GS_OK) return GS_ERR;
    if (y->type != GS_PRED || y->n != 1) {
        gs_value_free(y);
        return gs_eval_error(ev, in, "computation %s must return pred[]", c->name);
    }
    *res = ((unsigned char *)y->data)[0] != 0;
    gs_value_free(y);
    return GS_OK;
}

/* ------------------------------------------------------------------ select-and-scatter */

/* select-and-scatter(operand, source, init): see the file comment for the order. */
static gs_status k_select_and_scatter(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                      gs_value **out) {
    const gs_value *x = ops[0], *src = ops[1], *init = ops[2];
    const gs_computation *sel = gs_instr_comp(in, GS_ATTR_SELECT);
    const gs_computation *sca = gs_instr_comp(in, GS_ATTR_SCATTER);
    if (!sel || !sca) return gs_eval_error(ev, in, "select-and-scatter needs select= and scatter=");
    if (init->rank != 0 || src->type != x->type || init->type != x->type)
        return gs_eval_error(ev, in, "operand, source and init value types differ");
    win w;
    if (win_read(ev, in, x->rank, &w) != GS_OK) return GS_ERR;
    if (src->rank != x->rank) return gs_eval_error(ev, in, "source rank differs from the operand");
    for (int i = 0; i < x->rank; i++)
        if (src->dims[i] != win_out_size(&w, i, x->dims[i]))
            return gs_eval_error(ev, in, "source dims do not match the windows");
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    if (r->type != x->type || r->n != x->n) {
        gs_value_free(r);
        return gs_eval_error(ev, in, "result shape differs from the operand");
    }
    gs_type t = x->type;
    int sz = gs_type_size(t);
    for (int64_t i = 0; i < r->n; i++) gs_copy_elem(r->data, i, init->data, 0, sz);
    int64_t xst[GS_MAX_RANK];
    gs_strides(x->rank, x->dims, xst);
    fast_cmp fc;
    bool fast_sel = comp_is_fast_compare(sel, &fc) && fc.operand == 0 && sel->n_params == 2;
    gs_opcode sop;
    bool fast_sca = gs_computation_binary_reducer(sca, &sop) && sca->root->shape->type == t;
    gs_type tt[2] = {t, t};
    scalar_args sa = {0, NULL};
    int64_t *offs = gs_sys_malloc(sizeof *offs * (size_t)(w.n_pos ? w.n_pos : 1));
    gs_status st = offs ? scalar_args_init(ev, in, &sa, 2, tt) : gs_eval_oom(ev, in);
    int64_t sidx[GS_MAX_RANK] = {0};
    for (int64_t s = 0; st == GS_OK && s < src->n; s++) {
        int64_t np = win_positions(&w, x->dims, xst, sidx, offs);
        gs_index_next(src->rank, src->dims, sidx);
        if (np == 0) continue;
        int64_t best = offs[0];
        for (int64_t p = 1; p < np && st == GS_OK; p++) {
            bool keep = true;
            if (fast_sel) {
                int64_t a = fc.swap ? offs[p] : best, b = fc.swap ? best : offs[p];
                keep = gs_scalar_compare(t, x->data, a, x->data, b, fc.dir, fc.cmp_type);
            } else {
                gs_copy_elem(sa.v[0]->data, 0, x->data, best, sz);
                gs_copy_elem(sa.v[1]->data, 0, x->data, offs[p], sz);
                st = call_pred(ev, in, sel, &sa, &keep);
            }
            if (!keep) best = offs[p];
        }
        if (st != GS_OK) break;
        if (fast_sca) {
            gs_scalar_binary(sop, t, src->data, s, r->data, best, t, r->data, best);
        } else {
            gs_copy_elem(sa.v[0]->data, 0, src->data, s, sz);
            gs_copy_elem(sa.v[1]->data, 0, r->data, best, sz);
            gs_value *y;
            st = gs_eval_call(ev, sca, sa.v, 2, &y);
            if (st == GS_OK) {
                if (y->type != t || y->n != 1)
                    st = gs_eval_error(ev, in, "scatter computation must return %s[]",
                                       gs_type_name(t));
                else
                    gs_copy_elem(r->data, best, y->data, 0, sz);
                gs_value_free(y);
            }
        }
    }
    free(offs);
    scalar_args_free(&sa);
    if (st != GS_OK) {
        gs_value_free(r);
        return st;
    }
    *out = r;
    return GS_OK;
}

/* ------------------------------------------------------------------ merge sort */

/* Orders two positions; sets an error status in its context instead of failing. */
typedef bool (*less_fn)(void *ctx, int64_t a, int64_t b);

/* Stable bottom-up merge sort of v[0..n) (tmp has room for n). */
static void merge_sort(int64_t *v, int64_t *tmp, int64_t n, less_fn less, void *ctx) {
    int64_t *src = v, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            /* Take from the right run only when strictly before the left head: stable. */
            while (i < mid && j < hi) dst[k++] = less(ctx, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, sizeof *v * (size_t)n);
}

/* ------------------------------------------------------------------ sort */

/* Comparison context of one sort line. */
typedef struct sort_ctx {
    gs_eval *ev;
    const gs_instr *in;
    const gs_computation *comp;
    gs_value *const *ops;  /* the operands */
    int n_ops;
    int64_t base, stride;  /* element j of the line is at base + j * stride */
    bool fast;             /* fc applies */
    fast_cmp fc;
    scalar_args sa;        /* general path: 2 * n_ops scalars */
    gs_status st;          /* the first error */
} sort_ctx;

/* Comparator of sort: the fast compare, or a call of the comparator on 2N scalars. */
static bool sort_less(void *vctx, int64_t a, int64_t b) {
    sort_ctx *c = vctx;
    if (c->st != GS_OK) return false;
    int64_t ia = c->base + a * c->stride, ib = c->base + b * c->stride;
    if (c->fast) {
        const gs_value *v = c->ops[c->fc.operand];
        int64_t x = c->fc.swap ? ib : ia, y = c->fc.swap ? ia : ib;
        return gs_scalar_compare(v->type, v->data, x, v->data, y, c->fc.dir, c->fc.cmp_type);
    }
    bool r = false, handled = false;
    if (c->n_ops <= 32) {
        /* A compiled comparator reads the elements in place. */
        gs_type types[64];
        const void *data[64];
        int64_t index[64];
        for (int k = 0; k < c->n_ops; k++) {
            types[2 * k] = types[2 * k + 1] = c->ops[k]->type;
            data[2 * k] = data[2 * k + 1] = c->ops[k]->data;
            index[2 * k] = ia;
            index[2 * k + 1] = ib;
        }
        c->st = gs_eval_scalar_pred(c->ev, c->comp, types, data, index, 2 * c->n_ops, &r, &handled);
        if (c->st != GS_OK || handled) return r;
    }
    for (int k = 0; k < c->n_ops; k++) {
        int sz = gs_type_size(c->ops[k]->type);
        gs_copy_elem(c->sa.v[2 * k]->data, 0, c->ops[k]->data, ia, sz);
        gs_copy_elem(c->sa.v[2 * k + 1]->data, 0, c->ops[k]->data, ib, sz);
    }
    c->st = call_pred(c->ev, c->in, c->comp, &c->sa, &r);
    return r;
}

/* sort: N operands permuted together along `dimensions` by a stable merge sort per line. */
static gs_status k_sort(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    int n = in->n_operands;
    const gs_computation *comp = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!comp) return gs_eval_error(ev, in, "sort needs to_apply=");
    if (n > 32) return gs_eval_error(ev, in, "too many sort operands");
    const gs_value *x0 = ops[0];
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    int64_t d = dims.n > 0 ? dims.v[0] : x0->rank - 1;
    if (x0->rank == 0 || d < 0 || d >= x0->rank)
        return gs_eval_error(ev, in, "sort dimension is out of range");
    for (int k = 0; k < n; k++)
        if (ops[k]->rank != x0->rank ||
            memcmp(ops[k]->dims, x0->dims, sizeof(int64_t) * (size_t)x0->rank))
            return gs_eval_error(ev, in, "sort operands must share dims");
    if (comp->n_params != 2 * n)
        return gs_eval_error(ev, in, "comparator takes %d parameters, expected %d",
                             comp->n_params, 2 * n);
    if (!leaves_have_dims(in, n, x0->rank, x0->dims))
        return gs_eval_error(ev, in, "result shape differs from the operands");
    int64_t len = x0->dims[d], inner = 1, outer = 1;
    for (int i = (int)d + 1; i < x0->rank; i++) inner *= x0->dims[i];
    for (int i = 0; i < d; i++) outer *= x0->dims[i];

    sort_ctx c;
    memset(&c, 0, sizeof c);
    c.ev = ev;
    c.in = in;
    c.comp = comp;
    c.ops = ops;
    c.n_ops = n;
    c.stride = inner;
    c.fast = comp_is_fast_compare(comp, &c.fc);
    gs_value *leaves[32] = {0};
    int64_t *perm = gs_sys_malloc(sizeof *perm * (size_t)(len ? len : 1));
    int64_t *tmp = gs_sys_malloc(sizeof *tmp * (size_t)(len ? len : 1));
    gs_status st = perm && tmp ? GS_OK : gs_eval_oom(ev, in);
    if (st == GS_OK && !c.fast) {
        gs_type types[64];
        for (int k = 0; k < n; k++) types[2 * k] = types[2 * k + 1] = ops[k]->type;
        st = scalar_args_init(ev, in, &c.sa, 2 * n, types);
    }
    for (int k = 0; k < n && st == GS_OK; k++) {
        leaves[k] = gs_value_new_array(ops[k]->type, ops[k]->rank, ops[k]->dims);
        if (!leaves[k]) st = gs_eval_oom(ev, in);
    }
    for (int64_t o = 0; o < outer && st == GS_OK; o++)
        for (int64_t i = 0; i < inner && st == GS_OK; i++) {
            c.base = o * len * inner + i;
            for (int64_t j = 0; j < len; j++) perm[j] = j;
            merge_sort(perm, tmp, len, sort_less, &c);
            st = c.st;
            for (int k = 0; k < n && st == GS_OK; k++) {
                int sz = gs_type_size(ops[k]->type);
                for (int64_t j = 0; j < len; j++)
                    gs_copy_elem(leaves[k]->data, c.base + j * inner, ops[k]->data,
                                 c.base + perm[j] * inner, sz);
            }
        }
    free(perm);
    free(tmp);
    scalar_args_free(&c.sa);
    if (st != GS_OK) {
        for (int k = 0; k < n; k++) gs_value_free(leaves[k]);
        return st;
    }
    return wrap_result(ev, in, n, leaves, out);
}

/* ------------------------------------------------------------------ topk */

/* Comparison context of one topk row. */
typedef struct topk_ctx {
    const gs_value *x;
    int64_t base;
    const char *dir;      /* GT for largest, LT for smallest */
    const char *cmp_type; /* TOTALORDER for floats */
} topk_ctx;

/* Comparator of topk: strictly before (GT for largest, LT for smallest). */
static bool topk_less(void *vctx, int64_t a, int64_t b) {
    topk_ctx *c = vctx;
    return gs_scalar_compare(c->x->type, c->x->data, c->base + a, c->x->data, c->base + b, c->dir,
                             c->cmp_type);
}

/* The custom-call TopK's order: its comparator computation's direction (GT, largest first,
 * unless it compares LT). */
static bool topk_cc_largest(const gs_instr *in) {
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_CALLED_COMPUTATIONS);
    const gs_computation *cmp = a && a->u.comps.n > 0 ? a->u.comps.v[0] : NULL;
    if (!cmp || !cmp->root || cmp->root->op != GS_OP_COMPARE) return true;
    const char *dir = gs_instr_str(cmp->root, GS_ATTR_DIRECTION);
    return !dir || (strcmp(dir, "LT") != 0 && strcmp(dir, "LE") != 0);
}

/* topk, and custom-call TopK (k from its result's last dim): (values, indices) of the k first
 * elements of each last-dim row. */
static gs_status k_topk(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *x = ops[0];
    bool cc = in->op == GS_OP_CUSTOM_CALL;
    const gs_shape *r0 = cc && in->shape->type == GS_TUPLE && in->shape->n_tuple == 2
                             ? in->shape->tuple[0]
                             : NULL;
    int64_t k = cc ? (r0 && r0->rank > 0 ? r0->dims[r0->rank - 1] : -1)
                   : gs_instr_int(in, GS_ATTR_K, -1);
    bool largest = cc ? topk_cc_largest(in) : gs_instr_bool(in, GS_ATTR_LARGEST, true);
    if (x->rank == 0) return gs_eval_error(ev, in, "topk needs an operand of rank >= 1");
    int64_t len = x->dims[x->rank - 1];
    if (k < 0 || k > len)
        return gs_eval_error(ev, in, "k=%lld is out of range for a last dim of %lld",
                             (long long)k, (long long)len);
    int64_t odims[GS_MAX_RANK];
    memcpy(odims, x->dims, sizeof odims);
    odims[x->rank - 1] = k;
    const gs_shape *vs = leaf_shape(in, 0), *is = leaf_shape(in, 1);
    if (in->shape->type != GS_TUPLE || in->shape->n_tuple != 2 || !vs || !is ||
        vs->type != x->type || !gs_type_is_int(is->type) ||
        !leaves_have_dims(in, 2, x->rank, odims))
        return gs_eval_error(ev, in, "result must be (values, indices) with last dim k");
    gs_value *leaves[2];
    leaves[0] = gs_value_new_array(vs->type, vs->rank, vs->dims);
    leaves[1] = gs_value_new_array(is->type, is->rank, is->dims);
    int64_t *perm = gs_sys_malloc(sizeof *perm * (size_t)(len ? len : 1));
    int64_t *tmp = gs_sys_malloc(sizeof *tmp * (size_t)(len ? len : 1));
    if (!leaves[0] || !leaves[1] || !perm || !tmp) {
        gs_value_free(leaves[0]);
        gs_value_free(leaves[1]);
        free(perm);
        free(tmp);
        return gs_eval_oom(ev, in);
    }
    topk_ctx c = {x, 0, largest ? "GT" : "LT",
                  gs_type_is_float(x->type) ? "TOTALORDER" : NULL};
    int64_t rows = len ? x->n / len : 0;
    int sz = gs_type_size(x->type);
    for (int64_t r = 0; r < rows; r++) {
        c.base = r * len;
        for (int64_t j = 0; j < len; j++) perm[j] = j;
        merge_sort(perm, tmp, len, topk_less, &c);
        for (int64_t j = 0; j < k; j++) {
            gs_copy_elem(leaves[0]->data, r * k + j, x->data, c.base + perm[j], sz);
            gs_elem_set_i(leaves[1]->data, is->type, r * k + j, perm[j]);
        }
    }
    free(perm);
    free(tmp);
    return wrap_result(ev, in, 2, leaves, out);
}

/* ------------------------------------------------------------------ scan */

/* Copies slice t along dim d of v (all other dims kept) into s (dims of v without d), or back
 * when `back`. */
static void slice_copy(gs_value *v, int d, int64_t t, gs_value *s, bool back) {
    int64_t inner = 1, outer = 1, len = v->dims[d];
    for (int i = d + 1; i < v->rank; i++) inner *= v->dims[i];
    for (int i = 0; i < d; i++) outer *= v->dims[i];
    size_t bytes = (size_t)inner * (size_t)gs_type_size(v->type);
    for (int64_t o = 0; o < outer; o++) {
        char *a = (char *)v->data + (size_t)((o * len + t) * inner) * (size_t)gs_type_size(v->type);
        char *b = (char *)s->data + (size_t)o * bytes;
        if (back)
            memcpy(a, b, bytes);
        else
            memcpy(b, a, bytes);
    }
}

/* dims without dim d. */
static void drop_dim(int rank, const int64_t *dims, int d, int64_t *outd) {
    for (int i = 0, j = 0; i < rank; i++)
        if (i != d) outd[j++] = dims[i];
}

/* scan: see the file comment. */
/* The length of scan `in` along dim d: its inputs' and outputs' extent there (all equal). */
static gs_status scan_length(gs_eval *ev, const gs_instr *in, gs_value *const *ops, int n_in,
                             int n_out, int d, int64_t *len) {
    *len = -1;
    for (int k = 0; k < n_in; k++) {
        if (d < 0 || d >= ops[k]->rank) return gs_eval_error(ev, in, "scan dimension out of range");
        if (*len >= 0 && ops[k]->dims[d] != *len)
            return gs_eval_error(ev, in, "scan inputs differ along the scanned dim");
        *len = ops[k]->dims[d];
    }
    for (int k = 0; k < n_out; k++) {
        const gs_shape *s = leaf_shape(in, k);
        if (!s || d < 0 || d >= s->rank || (*len >= 0 && s->dims[d] != *len))
            return gs_eval_error(ev, in, "scan output %d does not have the scanned dim", k);
        *len = s->dims[d];
    }
    if (*len < 0) *len = 0;
    return GS_OK;
}

/* One step's to_apply result y: its n_out outputs copied into slice t (along d) of leaves, its
 * nc carries replacing carries[] for the next step. */
static gs_status scan_store(gs_eval *ev, const gs_instr *in, gs_value *y, gs_value **leaves,
                            int n_out, gs_value **carries, int nc, int d, int64_t t) {
    int ny = y->type == GS_TUPLE ? y->n_tuple : 1;
    if (ny != n_out + nc)
        return gs_eval_error(ev, in, "to_apply returns %d values, expected %d", ny, n_out + nc);
    for (int k = 0; k < n_out + nc; k++) {
        gs_value *e = y->type == GS_TUPLE ? y->tuple[k] : y;
        if (k < n_out) {
            gs_value *o = leaves[k];
            int64_t sd[GS_MAX_RANK];
            drop_dim(o->rank, o->dims, d, sd);
            if (e->type != o->type || e->rank != o->rank - 1 ||
                memcmp(e->dims, sd, sizeof(int64_t) * (size_t)e->rank))
                return gs_eval_error(ev, in, "to_apply output %d has the wrong shape", k);
            slice_copy(o, d, t, e, true);
        } else {
            gs_value *old = carries[k - n_out];
            if (e->type != old->type || e->n != old->n)
                return gs_eval_error(ev, in, "to_apply carry %d has the wrong shape", k - n_out);
            carries[k - n_out] = gs_value_ref(e);
            gs_value_free(old);
        }
    }
    return GS_OK;
}

static gs_status k_scan(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_computation *comp = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!comp) return gs_eval_error(ev, in, "scan needs to_apply=");
    int64_t nc = gs_instr_int(in, GS_ATTR_NUM_CARRIES, 0);
    bool rev = gs_instr_bool(in, GS_ATTR_IS_REVERSE, false);
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    int n_in = in->n_operands - (int)nc;
    int n_leaves = in->shape->type == GS_TUPLE ? in->shape->n_tuple : 1;
    int n_out = n_leaves - (int)nc;
    if (nc < 0 || n_in < 0 || n_out < 0 || dims.n != 1)
        return gs_eval_error(ev, in, "scan needs dimensions={d}, inputs and num_carries inits");
    if (comp->n_params != n_in + nc)
        return gs_eval_error(ev, in, "to_apply takes %d parameters, expected %d", comp->n_params,
                             n_in + (int)nc);
    int d = (int)dims.v[0];
    int64_t len;
    if (scan_length(ev, in, ops, n_in, n_out, d, &len) != GS_OK) return GS_ERR;
    int n_args = n_in + (int)nc;
    gs_value **args = gs_sys_calloc((size_t)(n_args + 1), sizeof *args);
    gs_value **leaves = gs_sys_calloc((size_t)(n_leaves + 1), sizeof *leaves);
    gs_status st = args && leaves ? GS_OK : gs_eval_oom(ev, in);
    for (int k = 0; k < n_in && st == GS_OK; k++) {
        int64_t sd[GS_MAX_RANK];
        drop_dim(ops[k]->rank, ops[k]->dims, d, sd);
        args[k] = gs_value_new_array(ops[k]->type, ops[k]->rank - 1, sd);
        if (!args[k]) st = gs_eval_oom(ev, in);
    }
    for (int k = 0; k < nc && st == GS_OK; k++) args[n_in + k] = gs_value_ref(ops[n_in + k]);
    for (int k = 0; k < n_out && st == GS_OK; k++) {
        const gs_shape *s = leaf_shape(in, k);
        leaves[k] = gs_value_new_array(s->type, s->rank, s->dims);
        if (!leaves[k]) st = gs_eval_oom(ev, in);
    }
    for (int64_t step = 0; step < len && st == GS_OK; step++) {
        int64_t t = rev ? len - 1 - step : step;
        for (int k = 0; k < n_in; k++) {
            /* A slice may still be referenced by the previous step's results: refill a fresh
             * one then. */
            if (gs_value_refs(args[k]) > 1) {
                gs_value *f = gs_value_new_array(args[k]->type, args[k]->rank, args[k]->dims);
                gs_value_free(args[k]);
                args[k] = f;
                if (!f) {
                    st = gs_eval_oom(ev, in);
                    break;
                }
            }
            slice_copy(ops[k], d, t, args[k], false);
        }
        if (st != GS_OK) break;
        gs_value *y;
        st = gs_eval_call(ev, comp, args, n_args, &y);
        if (st != GS_OK) break;
        st = scan_store(ev, in, y, leaves, n_out, args + n_in, (int)nc, d, t);
        gs_value_free(y);
    }
    for (int k = 0; k < nc && st == GS_OK; k++) leaves[n_out + k] = gs_value_ref(args[n_in + k]);
    free_values(args, n_args);
    if (st != GS_OK) {
        free_values(leaves, n_leaves);
        return st;
    }
    st = wrap_result(ev, in, n_leaves, leaves, out);
    free(leaves);
    return st;
}

/* The kernel of the reduction, window, sort and scan ops (see kernels.h). */
gs_status gs_eval_topk(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    return k_topk(ev, in, ops, out);
}

gs_kernel_fn gs_kernel_reduce(gs_opcode op) {
    switch (op) {
    case GS_OP_REDUCE: return k_reduce;
    case GS_OP_REDUCE_WINDOW: return k_reduce_window;
    case GS_OP_SELECT_AND_SCATTER: return k_select_and_scatter;
    case GS_OP_SORT: return k_sort;
    case GS_OP_TOPK: return k_topk;
    case GS_OP_SCAN: return k_scan;
    default: return NULL;
    }
}
