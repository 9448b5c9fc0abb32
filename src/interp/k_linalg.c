/*
 * k_linalg.c — the linear-algebra kernels: cholesky and triangular-solve, per batch matrix in
 * double precision.
 */
#include "kernels.h"
#include "base/sysalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* cholesky: per batch matrix a (n x n, symmetric positive definite), lower=true gives L with
 * a = L L^T (upper: U with a = U^T U); the other triangle is zero. A matrix that is not positive
 * definite gives NaNs, as XLA does. */
static gs_status k_cholesky(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0];
    if (a->rank < 2 || a->dims[a->rank - 1] != a->dims[a->rank - 2])
        return gs_eval_error(ev, in, "cholesky needs square matrices in the last two dims");
    bool lower = gs_instr_bool(in, GS_ATTR_LOWER, false);
    int64_t n = a->dims[a->rank - 1], batch = n ? a->n / (n * n) : 0;
    gs_value *r = gs_eval_new_result(ev, in);
    double *l = gs_sys_malloc(sizeof(double) * (size_t)(n > 0 ? n * n : 1));
    if (!r || !l) {
        gs_value_free(r);
        free(l);
        return gs_eval_oom(ev, in);
    }
    for (int64_t b = 0; b < batch; b++) {
        int64_t base = b * n * n;
        memset(l, 0, sizeof(double) * (size_t)(n * n));
        for (int64_t j = 0; j < n; j++) {
            for (int64_t i = j; i < n; i++) {
                /* element (i, j) of a, read from the triangle the op uses */
                double s = lower ? gs_elem_get_f(a->data, a->type, base + i * n + j)
                                 : gs_elem_get_f(a->data, a->type, base + j * n + i);
                for (int64_t k = 0; k < j; k++) s -= l[i * n + k] * l[j * n + k];
                if (i == j)
                    l[i * n + j] = sqrt(s);
                else
                    l[i * n + j] = s / l[j * n + j];
            }
        }
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++)
                gs_elem_set_f(r->data, r->type, base + i * n + j, lower ? l[i * n + j] : l[j * n + i]);
    }
    free(l);
    *out = r;
    return GS_OK;
}

/* triangular-solve(a, b): solves op(a) x = b (left_side) or x op(a) = b, a triangular. */
static gs_status k_triangular_solve(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0], *b = ops[1];
    if (a->rank < 2 || b->rank != a->rank) return gs_eval_error(ev, in, "operands must be batched matrices");
    bool left = gs_instr_bool(in, GS_ATTR_LEFT_SIDE, false);
    bool lower = gs_instr_bool(in, GS_ATTR_LOWER, false);
    bool unit = gs_instr_bool(in, GS_ATTR_UNIT_DIAGONAL, false);
    const char *tr = gs_instr_str(in, GS_ATTR_TRANSPOSE_A);
    bool trans = tr && strcmp(tr, "NO_TRANSPOSE") != 0;
    int64_t n = a->dims[a->rank - 1];
    int64_t m = b->dims[b->rank - 2], k = b->dims[b->rank - 1];
    int64_t batch = n ? a->n / (n * n) : 0;
    gs_value *r = gs_eval_new_result(ev, in);
    double *x = gs_sys_malloc(sizeof(double) * (size_t)(m > 0 && k > 0 ? m * k : 1));
    if (!r || !x) {
        gs_value_free(r);
        free(x);
        return gs_eval_oom(ev, in);
    }
    for (int64_t bt = 0; bt < batch; bt++) {
        int64_t ab = bt * n * n, bb = bt * m * k;
        /* Effective matrix t = op(a), read through the triangle. */
#define AT(i, j) (trans ? gs_elem_get_f(a->data, a->type, ab + (j) * n + (i)) \
                        : gs_elem_get_f(a->data, a->type, ab + (i) * n + (j)))
        bool eff_lower = trans ? !lower : lower;
        for (int64_t i = 0; i < m * k; i++) x[i] = gs_elem_get_f(b->data, b->type, bb + i);
        if (left) {
            /* t (m x m) x (m x k) = b */
            for (int64_t c = 0; c < k; c++) {
                for (int64_t s = 0; s < m; s++) {
                    int64_t i = eff_lower ? s : m - 1 - s;
                    double v = x[i * k + c];
                    for (int64_t j = 0; j < m; j++) {
                        bool before = eff_lower ? j < i : j > i;
                        if (before) v -= AT(i, j) * x[j * k + c];
                    }
                    x[i * k + c] = unit ? v : v / AT(i, i);
                }
            }
        } else {
            /* x (m x k) t (k x k) = b: solve column by column */
            for (int64_t rr = 0; rr < m; rr++) {
                for (int64_t s = 0; s < k; s++) {
                    int64_t j = eff_lower ? k - 1 - s : s;
                    double v = x[rr * k + j];
                    for (int64_t i = 0; i < k; i++) {
                        bool after = eff_lower ? i > j : i < j;
                        if (after) v -= x[rr * k + i] * AT(i, j);
                    }
                    x[rr * k + j] = unit ? v : v / AT(j, j);
                }
            }
        }
#undef AT
        for (int64_t i = 0; i < m * k; i++) gs_elem_set_f(r->data, r->type, bb + i, x[i]);
    }
    free(x);
    *out = r;
    return GS_OK;
}

gs_kernel_fn gs_kernel_linalg(gs_opcode op) {
    switch (op) {
    case GS_OP_CHOLESKY: return k_cholesky;
    case GS_OP_TRIANGULAR_SOLVE: return k_triangular_solve;
    default: return NULL;
    }
}
