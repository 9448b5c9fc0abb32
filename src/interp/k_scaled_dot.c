/*
 * k_scaled_dot.c — XLA's block-scaled dot (custom-call `__op$block_scaled_dot`, the MX formats:
 * operands lhs, rhs, lhs_scale, rhs_scale). Each operand is dequantized — multiplied by its
 * scale, one scale per block of operand_dim / scale_dim consecutive elements of each dim (the
 * MX formats' blocks of 32 along the contracting dim) — and the two are contracted along their last dims: a [M,K] x [N,K]
 * -> [M,N] dot, with dim 0 a batch dim at rank 3. Computed in double, rounded once.
 */
#include "kernels.h"
#include "base/sysalloc.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool gs_scaled_dot_dims(const gs_value *const *ops, int64_t *B, int64_t *M, int64_t *N,
                        int64_t *K) {
    const gs_value *l = ops[0], *r = ops[1], *ls = ops[2], *rs = ops[3];
    int rank = l->rank;
    if (rank < 2 || rank > 3 || r->rank != rank || ls->rank != rank || rs->rank != rank)
        return false;
    *B = rank == 3 ? l->dims[0] : 1;
    *M = l->dims[rank - 2];
    *N = r->dims[rank - 2];
    *K = l->dims[rank - 1];
    if (r->dims[rank - 1] != *K || (rank == 3 && r->dims[0] != *B)) return false;
    for (int k = 0; k < 2; k++) {
        const gs_value *q = ops[k], *s = ops[k + 2];
        for (int i = 0; i < rank; i++)
            if (s->dims[i] <= 0 || q->dims[i] % s->dims[i] != 0) return false;
    }
    return true;
}

double *gs_scaled_dot_dequant(const gs_value *q, const gs_value *s, bool absolute) {
    double *x = gs_sys_malloc(sizeof *x * (size_t)(q->n ? q->n : 1));
    if (!x) return NULL;
    int r = q->rank;
    int64_t idx[GS_MAX_RANK] = {0};
    for (int64_t i = 0; i < q->n; i++) {
        int64_t si = 0; /* the scale of the block holding element idx */
        for (int d = 0; d < r; d++) si = si * s->dims[d] + idx[d] / (q->dims[d] / s->dims[d]);
        double v = gs_elem_get_f(q->data, q->type, i) * gs_elem_get_f(s->data, s->type, si);
        x[i] = absolute ? fabs(v) : v;
        for (int d = r - 1; d >= 0; d--) {
            if (++idx[d] < q->dims[d]) break;
            idx[d] = 0;
        }
    }
    return x;
}

void gs_scaled_dot_core(const double *a, const double *b, int64_t B, int64_t M, int64_t N,
                        int64_t K, double *out) {
    for (int64_t t = 0; t < B; t++) {
        double *c = out + t * M * N;
        if (K == 0 || M == 0 || N == 0) {
            memset(c, 0, sizeof *c * (size_t)(M * N));
            continue;
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K,
                    1.0, a + t * M * K, (blasint)K, b + t * N * K, (blasint)K, 0.0, c,
                    (blasint)N);
    }
}

gs_status gs_eval_block_scaled_dot(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                   gs_value **out) {
    int64_t B, M, N, K;
    if (in->n_operands != 4 || !gs_scaled_dot_dims((const gs_value *const *)ops, &B, &M, &N, &K))
        return gs_eval_error(ev, in, "block-scaled dot: expects lhs [B,]M,K, rhs [B,]N,K and "
                                     "their scales with K / blocks elements per block");
    if (!gs_type_is_array(in->shape->type) || in->shape->rank < 2 ||
        gs_shape_elements(in->shape) != B * M * N ||
        in->shape->dims[in->shape->rank - 1] != N)
        return gs_eval_error(ev, in, "block-scaled dot: the result must hold [B,]M,N = %lld x "
                                     "%lld x %lld elements",
                             (long long)B, (long long)M, (long long)N);
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    double *a = gs_scaled_dot_dequant(ops[0], ops[2], false);
    double *b = gs_scaled_dot_dequant(ops[1], ops[3], false);
    double *c = gs_sys_malloc(sizeof *c * (B * M * N > 0 ? (size_t)(B * M * N) : 1));
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        gs_value_free(r);
        return gs_eval_oom(ev, in);
    }
    gs_scaled_dot_core(a, b, B, M, N, K, c);
    for (int64_t i = 0; i < r->n; i++) gs_elem_set_f(r->data, r->type, i, c[i]);
    free(a);
    free(b);
    free(c);
    *out = r;
    return GS_OK;
}
