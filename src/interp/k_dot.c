/*
 * k_dot.c — the contraction kernels: dot (general dimension numbers) and convolution (XLA's
 * dim_labels, windows with stride, padding, base and window dilation and reversal, feature and
 * batch groups, and the rhs sparsity_config materialisation of XLA's evaluator).
 *
 * Both reduce to matrix products through OpenBLAS. Operands are first converted, as XLA's
 * evaluator does, to the result element type and then widened to a compute type: f32 for f32 and
 * the narrow floats (bf16, f16, f8: computed in f32 and rounded once per result element), f64,
 * c64, c128, and int64 for integers and pred. Dot gathers its operands into contiguous
 * [batch, M, K] and [batch, K, N] buffers and calls gemm once per batch; convolution gathers
 * window patches (im2col) into [rows, window*features] blocks, multiplies them by the kernel
 * reshaped to [window*features, out_features] per group, and scatters the rows back. Integer
 * products run in an exact int64 loop (k ascending) with wraparound; for convolution the int64
 * sum is then saturated to the result type as XLA's evaluator does. Every path has a fixed
 * summation order for given shapes, so results are the same from run to run.
 */
#include "kernels.h"
#include "base/sysalloc.h"
#include "ir/analysis.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ compute types */

/* The type a contraction accumulates in. */
typedef enum ctype { CT_F32, CT_F64, CT_C64, CT_C128, CT_I64 } ctype;

/* Compute type for a result element type. */
static ctype ctype_of(gs_type t) {
    if (t == GS_F64) return CT_F64;
    if (t == GS_C64) return CT_C64;
    if (t == GS_C128) return CT_C128;
    if (gs_type_is_float(t)) return CT_F32;
    return CT_I64; /* integers and pred */
}

/* Bytes of one compute-type element. */
static size_t ctype_size(ctype ct) {
    switch (ct) {
    case CT_F32: return 4;
    case CT_F64: return 8;
    case CT_C64: return 8;
    case CT_C128: return 16;
    case CT_I64: return 8;
    }
    return 8;
}

/* Element i of src (type st), converted to the result type rt (XLA converts operands to the
 * result type first) and widened to compute type ct, stored as element j of dst. */
static void load_elem(ctype ct, gs_type st, const void *src, int64_t i, gs_type rt, void *dst,
                      int64_t j) {
    unsigned char tmp[16];
    if (st != rt) {
        gs_scalar_convert(st, src, i, rt, tmp, 0);
        src = tmp;
        i = 0;
        st = rt;
    }
    double re, im;
    switch (ct) {
    case CT_F32: ((float *)dst)[j] = (float)gs_elem_get_f(src, st, i); return;
    case CT_F64: ((double *)dst)[j] = gs_elem_get_f(src, st, i); return;
    case CT_C64:
        gs_elem_get_c(src, st, i, &re, &im);
        ((float *)dst)[2 * j] = (float)re;
        ((float *)dst)[2 * j + 1] = (float)im;
        return;
    case CT_C128:
        gs_elem_get_c(src, st, i, &re, &im);
        ((double *)dst)[2 * j] = re;
        ((double *)dst)[2 * j + 1] = im;
        return;
    case CT_I64: ((int64_t *)dst)[j] = gs_elem_get_i(src, st, i); return;
    }
}

/* Stores compute-type element j of src into element i of dst (type rt), rounding floats once and
 * wrapping integers (or saturating them when `saturate`). */
static void store_elem(ctype ct, const void *src, int64_t j, gs_type rt, void *dst, int64_t i,
                       bool saturate) {
    switch (ct) {
    case CT_F32: gs_elem_set_f(dst, rt, i, (double)((const float *)src)[j]); return;
    case CT_F64: gs_elem_set_f(dst, rt, i, ((const double *)src)[j]); return;
    case CT_C64:
        gs_elem_set_c(dst, rt, i, ((const float *)src)[2 * j], ((const float *)src)[2 * j + 1]);
        return;
    case CT_C128:
        gs_elem_set_c(dst, rt, i, ((const double *)src)[2 * j], ((const double *)src)[2 * j + 1]);
        return;
    case CT_I64: {
        int64_t v = ((const int64_t *)src)[j];
        if (saturate && rt != GS_PRED && gs_type_bits(rt) < 64) {
            int bits = gs_type_bits(rt);
            int64_t lo, hi;
            if (gs_type_is_signed_int(rt)) {
                hi = (int64_t)((1ull << (bits - 1)) - 1);
                lo = -hi - 1;
            } else {
                lo = 0;
                hi = (int64_t)((1ull << bits) - 1);
            }
            v = v < lo ? lo : v > hi ? hi : v;
        }
        gs_elem_set_i(dst, rt, i, v);
        return;
    }
    }
}

/* Copies every element of v, converted to rt and widened to ct, to dst at offset
 * sum(idx[d] * dstride[d]) (a gather-transpose). Walks v in row-major order. */
static void permute_into(ctype ct, const gs_value *v, gs_type rt, const int64_t *dstride,
                         void *dst) {
    if (v->n == 0) return;
    int64_t idx[GS_MAX_RANK] = {0};
    int64_t off = 0;
    bool fast = v->type == rt && ((ct == CT_F32 && rt == GS_F32) || (ct == CT_F64 && rt == GS_F64));
    if (fast && v->rank > 0) {
        /* Row by row: each run along the innermost dim is one copy (a memcpy when it stays
         * contiguous in dst), then the outer index advances. */
        int r = v->rank - 1;
        int64_t run = v->dims[r], ds = dstride[r];
        size_t es = ct == CT_F32 ? 4 : 8;
        for (int64_t i = 0; i < v->n; i += run) {
            const char *src = (const char *)v->data + (size_t)i * es;
            char *to = (char *)dst + (size_t)off * es;
            if (ds == 1) {
                memcpy(to, src, (size_t)run * es);
            } else if (es == 4) {
                for (int64_t j = 0; j < run; j++)
                    ((float *)dst)[off + j * ds] = ((const float *)src)[j];
            } else {
                for (int64_t j = 0; j < run; j++)
                    ((double *)dst)[off + j * ds] = ((const double *)src)[j];
            }
            for (int d = r - 1; d >= 0; d--) {
                off += dstride[d];
                if (++idx[d] < v->dims[d]) break;
                off -= dstride[d] * v->dims[d];
                idx[d] = 0;
            }
        }
        return;
    }
    for (int64_t i = 0; i < v->n; i++) {
        if (fast && ct == CT_F32)
            ((float *)dst)[off] = ((const float *)v->data)[i];
        else if (fast)
            ((double *)dst)[off] = ((const double *)v->data)[i];
        else
            load_elem(ct, v->type, v->data, i, rt, dst, off);
        for (int d = v->rank - 1; d >= 0; d--) {
            off += dstride[d];
            if (++idx[d] < v->dims[d]) break;
            off -= dstride[d] * v->dims[d];
            idx[d] = 0;
        }
    }
}

/* Complex dots up to this many multiply-adds sum whole complex products, k ascending, in the
 * result type, as the StableHLO reference and XLA's CPU backend do. OpenBLAS's c/zgemm kernels
 * sum the real-by-real and imaginary-by-imaginary products apart, which cancels differently:
 * (4096 + 4096i, 1) . (4096 + 4096i, 1) is 1 + 2^25 i, and 0 + 2^25 i from cgemm
 * (tests/mlir/complex_dot.mlir). Larger dots keep BLAS's speed. */
#define NAIVE_COMPLEX_MAX ((int64_t)1 << 24)
#define CDOT_IN_ORDER(T, M, N, K, A, B, C)                                                         \
    do {                                                                                           \
        const T *a_ = (A), *b_ = (B);                                                              \
        T *c_ = (C);                                                                               \
        for (int64_t i_ = 0; i_ < (M); i_++)                                                       \
            for (int64_t j_ = 0; j_ < (N); j_++) {                                                 \
                T re_ = 0, im_ = 0;                                                                \
                for (int64_t k_ = 0; k_ < (K); k_++) {                                             \
                    const T *x_ = a_ + 2 * (i_ * (K) + k_), *y_ = b_ + 2 * (k_ * (N) + j_);        \
                    T pr_ = x_[0] * y_[0] - x_[1] * y_[1], pi_ = x_[0] * y_[1] + x_[1] * y_[0];    \
                    re_ += pr_;                                                                    \
                    im_ += pi_;                                                                    \
                }                                                                                  \
                c_[2 * (i_ * (N) + j_)] = re_;                                                     \
                c_[2 * (i_ * (N) + j_) + 1] = im_;                                                 \
            }                                                                                      \
    } while (0)

/* C = A x B for the real BLAS types with leading dimensions (row-major): a convolution's
 * operands read in place. M, N, K > 0. */
static void gemm_ld(ctype ct, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                    const void *B, int64_t ldb, void *C, int64_t ldc) {
    blasint m = (blasint)M, n = (blasint)N, k = (blasint)K;
    if (ct == CT_F32)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, A, (blasint)lda, B,
                    (blasint)ldb, 0.0f, C, (blasint)ldc);
    else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, A, (blasint)lda, B,
                    (blasint)ldb, 0.0, C, (blasint)ldc);
}

/* C[M,N] = A[M,K] x B[K,N], all row-major and contiguous, in compute type ct. C is overwritten.
 * Integers: exact int64 with wraparound, k ascending per element. */
static void gemm(ctype ct, int64_t M, int64_t N, int64_t K, const void *A, const void *B, void *C) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        memset(C, 0, (size_t)(M * N) * ctype_size(ct));
        return;
    }
    blasint m = (blasint)M, n = (blasint)N, k = (blasint)K;
    switch (ct) {
    case CT_F32:
    case CT_F64: gemm_ld(ct, M, N, K, A, K, B, N, C, N); return;
    case CT_C64: {
        if (M * N * K <= NAIVE_COMPLEX_MAX) {
            CDOT_IN_ORDER(float, M, N, K, A, B, C);
            return;
        }
        const float one[2] = {1.0f, 0.0f}, zero[2] = {0.0f, 0.0f};
        cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, one, A, k, B, n, zero, C,
                    n);
        return;
    }
    case CT_C128: {
        if (M * N * K <= NAIVE_COMPLEX_MAX) {
            CDOT_IN_ORDER(double, M, N, K, A, B, C);
            return;
        }
        const double one[2] = {1.0, 0.0}, zero[2] = {0.0, 0.0};
        cblas_zgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, one, A, k, B, n, zero, C,
                    n);
        return;
    }
    case CT_I64: {
        const uint64_t *a = A, *b = B;
        uint64_t *c = C;
        memset(c, 0, (size_t)(M * N) * sizeof *c);
        for (int64_t i = 0; i < M; i++)
            for (int64_t kk = 0; kk < K; kk++) {
                uint64_t x = a[i * K + kk];
                if (x == 0) continue;
                const uint64_t *brow = b + kk * N;
                uint64_t *crow = c + i * N;
                for (int64_t j = 0; j < N; j++) crow[j] += x * brow[j];
            }
        return;
    }
    }
}

/* A batch of small matrix products runs on one BLAS thread: OpenBLAS's threads cost more to
 * wake and join than a 128x64x128 product takes (attention's batched dots ran up to 20 times
 * slower on two threads than on one). OpenBLAS 0.3.21 has no per-call thread count, so the
 * process-wide one is lowered around the batch and restored (the multi-device runtime already
 * runs every device on one). Returns what to restore (0: nothing). */
enum { SMALL_GEMM_FLOPS = 1 << 24 };
static int small_batch_begin(int64_t B, int64_t M, int64_t N, int64_t K) {
    if (B < 2 || 2.0 * (double)M * (double)N * (double)K >= SMALL_GEMM_FLOPS) return 0;
    int threads = openblas_get_num_threads();
    if (threads <= 1) return 0;
    openblas_set_num_threads(1);
    return threads;
}

static void small_batch_end(int threads) {
    if (threads > 1) openblas_set_num_threads(threads);
}

/* True when a gemm dimension fits OpenBLAS's integer type. */
static bool blas_fits(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* ------------------------------------------------------------------ dot */

/* Position of v in list l, or -1. */
/* Checks that dimension lists name distinct dims of a rank-`rank` operand. */
static bool dims_valid(int rank, gs_ints a, gs_ints b) {
    for (int i = 0; i < a.n; i++) {
        if (a.v[i] < 0 || a.v[i] >= rank || gs_ints_index(b, a.v[i]) >= 0) return false;
        for (int j = 0; j < i; j++)
            if (a.v[j] == a.v[i]) return false;
    }
    for (int i = 0; i < b.n; i++) {
        if (b.v[i] < 0 || b.v[i] >= rank) return false;
        for (int j = 0; j < i; j++)
            if (b.v[j] == b.v[i]) return false;
    }
    return true;
}

/* Destination strides placing operand v's dims into a [batch, free, contracted] buffer (lhs,
 * rows M) or [batch, contracted, free] (rhs, columns N). Batch and contracted dims are linearised
 * in the order the attribute lists them, free dims in operand order. */
static void operand_strides(const gs_value *v, gs_ints batch, gs_ints contr, bool is_lhs,
                            int64_t n_free, int64_t n_contr, int64_t *dstride) {
    int64_t mat = n_free * n_contr;
    int64_t s = mat;
    for (int i = batch.n - 1; i >= 0; i--) {
        dstride[batch.v[i]] = s;
        s *= v->dims[batch.v[i]];
    }
    /* contracted: stride 1 in lhs rows [M,K]; stride n_free in rhs [K,N] */
    s = is_lhs ? 1 : n_free;
    for (int i = contr.n - 1; i >= 0; i--) {
        dstride[contr.v[i]] = s;
        s *= v->dims[contr.v[i]];
    }
    s = is_lhs ? n_contr : 1;
    for (int d = v->rank - 1; d >= 0; d--) {
        if (gs_ints_index(batch, d) >= 0 || gs_ints_index(contr, d) >= 0) continue;
        dstride[d] = s;
        s *= v->dims[d];
    }
}

/* Product of the dims of v listed in l. */
static int64_t dims_product(const gs_value *v, gs_ints l) {
    int64_t p = 1;
    for (int i = 0; i < l.n; i++) p *= v->dims[l.v[i]];
    return p;
}

/* Are the dims in l the consecutive dims first, first+1, ... in that order? */
/* How one operand already in memory is a batch of strided matrices: its contracting dims
 * adjacent and in the listed order, its free dims adjacent and in order, one of the two runs
 * innermost (`k_last`: [.., free, .., K] read as [M,K] with rows `ld` apart; else [.., K, ..,
 * free] read as [K,M]), and the batch dims anywhere (their strides in `bstride`, in the listed
 * order). Attention's [B,T,H,D] operands with batch dims {0,2} are such a layout. False
 * otherwise. */
static bool strided_layout(const gs_value *v, gs_ints batch, gs_ints contr, bool *k_last,
                           int64_t *ld, int64_t *bstride) {
    int64_t st[GS_MAX_RANK];
    gs_strides(v->rank, v->dims, st);
    int n_free = 0, free_first = -1;
    for (int d = 0; d < v->rank; d++) {
        if (gs_ints_index(batch, d) >= 0 || gs_ints_index(contr, d) >= 0) continue;
        if (n_free > 0 && d != free_first + n_free) return false; /* free dims not adjacent */
        if (n_free == 0) free_first = d;
        n_free++;
    }
    for (int i = 1; i < contr.n; i++)
        if (contr.v[i] != contr.v[0] + i) return false;
    int last = v->rank - 1;
    bool k_inner = contr.n > 0 ? contr.v[contr.n - 1] == last : n_free == 0;
    bool f_inner = n_free > 0 && free_first + n_free - 1 == last;
    /* The row step: the last dim of the outer run's stride; -1 when that run is empty (one
     * row: any step will do). */
    if (k_inner) {
        *k_last = true;
        *ld = n_free > 0 ? st[free_first + n_free - 1] : -1;
    } else if (f_inner) {
        *k_last = false;
        *ld = contr.n > 0 ? st[contr.v[contr.n - 1]] : -1;
    } else {
        return false;
    }
    for (int i = 0; i < batch.n; i++) bstride[i] = st[batch.v[i]];
    return true;
}

/* f32 and f64 dots whose operands are batches of strided matrices in memory (strided_layout)
 * run as one gemm per batch straight on the operands' and the result's buffers, transposed and
 * strided as the layout says: no copies. False (nothing done) otherwise. */
static bool direct_gemm(const gs_value *l, const gs_value *r, gs_ints lb, gs_ints lc, gs_ints rb,
                        gs_ints rc, int64_t B, int64_t M, int64_t N, int64_t K, gs_value *res) {
    bool f32 = res->type == GS_F32, f64 = res->type == GS_F64;
    if (!(f32 || f64) || l->type != res->type || r->type != res->type) return false;
    bool lk_last, rk_last;
    int64_t lld, rld, lbs[GS_MAX_RANK], rbs[GS_MAX_RANK];
    if (!strided_layout(l, lb, lc, &lk_last, &lld, lbs) ||
        !strided_layout(r, rb, rc, &rk_last, &rld, rbs))
        return false;
    /* cblas wants the leading dimension at least the row length. */
    if (lld < 0) lld = lk_last ? K : M;
    if (rld < 0) rld = rk_last ? K : N;
    if (lld < (lk_last ? K : M) || rld < (rk_last ? K : N) || !blas_fits(lld) || !blas_fits(rld))
        return false;
    /* lhs [M,K] as is, or [K,M] transposed; rhs [K,N] as is, or [N,K] transposed. */
    enum CBLAS_TRANSPOSE ta = lk_last ? CblasNoTrans : CblasTrans;
    enum CBLAS_TRANSPOSE tb = rk_last ? CblasTrans : CblasNoTrans;
    blasint m = (blasint)M, n = (blasint)N, k = (blasint)K;
    size_t es = f32 ? 4 : 8;
    int64_t idx[GS_MAX_RANK] = {0}, bdims[GS_MAX_RANK];
    for (int i = 0; i < lb.n; i++) bdims[i] = l->dims[lb.v[i]];
    int threads = small_batch_begin(B, M, N, K);
    for (int64_t b = 0; b < B; b++) {
        int64_t lo = 0, ro = 0;
        for (int i = 0; i < lb.n; i++) {
            lo += idx[i] * lbs[i];
            ro += idx[i] * rbs[i];
        }
        const char *A = (const char *)l->data + (size_t)lo * es;
        const char *Bm = (const char *)r->data + (size_t)ro * es;
        char *C = (char *)res->data + (size_t)(b * M * N) * es;
        if (f32)
            cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, (const float *)A, (blasint)lld,
                        (const float *)Bm, (blasint)rld, 0.0f, (float *)C, n);
        else
            cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, (const double *)A, (blasint)lld,
                        (const double *)Bm, (blasint)rld, 0.0, (double *)C, n);
        gs_index_next(lb.n, bdims, idx);
    }
    small_batch_end(threads);
    return true;
}

/* dot: operands gathered to [batch, M, K] and [batch, K, N], one gemm per batch; the result's
 * dims are (batch, lhs free, rhs free), which is the row-major [batch, M, N] product. */
static gs_status dot_of(gs_eval *ev, const gs_instr *in, const gs_value *l, const gs_value *r,
                        gs_value **out) {
    gs_ints lb = gs_instr_ints(in, GS_ATTR_LHS_BATCH_DIMS);
    gs_ints lc = gs_instr_ints(in, GS_ATTR_LHS_CONTRACTING_DIMS);
    gs_ints rb = gs_instr_ints(in, GS_ATTR_RHS_BATCH_DIMS);
    gs_ints rc = gs_instr_ints(in, GS_ATTR_RHS_CONTRACTING_DIMS);
    if (lb.n != rb.n || lc.n != rc.n || !dims_valid(l->rank, lb, lc) ||
        !dims_valid(r->rank, rb, rc))
        return gs_eval_error(ev, in, "invalid dot dimension numbers");
    for (int i = 0; i < lb.n; i++)
        if (l->dims[lb.v[i]] != r->dims[rb.v[i]])
            return gs_eval_error(ev, in, "batch dimension sizes differ");
    for (int i = 0; i < lc.n; i++)
        if (l->dims[lc.v[i]] != r->dims[rc.v[i]])
            return gs_eval_error(ev, in, "contracting dimension sizes differ");
    int64_t B = dims_product(l, lb), K = dims_product(l, lc);
    int64_t M = l->n ? l->n / (B * K) : 1, N = r->n ? r->n / (B * K) : 1;
    if (l->n == 0 || r->n == 0) {
        /* Some dim is zero: recompute the free sizes directly. */
        M = 1;
        N = 1;
        for (int d = 0; d < l->rank; d++)
            if (gs_ints_index(lb, d) < 0 && gs_ints_index(lc, d) < 0) M *= l->dims[d];
        for (int d = 0; d < r->rank; d++)
            if (gs_ints_index(rb, d) < 0 && gs_ints_index(rc, d) < 0) N *= r->dims[d];
    }
    gs_value *res = gs_eval_new_result(ev, in);
    if (!res) return GS_ERR;
    if (res->n != B * M * N) {
        gs_value_free(res);
        return gs_eval_error(ev, in, "result shape does not match the dot's dimension numbers");
    }
    if (!blas_fits(M) || !blas_fits(N) || !blas_fits(K)) {
        gs_value_free(res);
        return gs_eval_error(ev, in, "dot is too large for BLAS");
    }
    if (res->n == 0) {
        *out = res;
        return GS_OK;
    }
    if (K > 0 && direct_gemm(l, r, lb, lc, rb, rc, B, M, N, K, res)) {
        *out = res;
        return GS_OK;
    }
    ctype ct = ctype_of(res->type);
    size_t es = ctype_size(ct);
    void *A = gs_sys_malloc((size_t)(B * M * K) * es + 1),
         *Bm = gs_sys_malloc((size_t)(B * K * N) * es + 1);
    void *C = gs_sys_malloc((size_t)(B * M * N) * es + 1);
    if (!A || !Bm || !C) {
        free(A);
        free(Bm);
        free(C);
        gs_value_free(res);
        return gs_eval_oom(ev, in);
    }
    int64_t ls[GS_MAX_RANK], rs[GS_MAX_RANK];
    operand_strides(l, lb, lc, true, M, K, ls);
    operand_strides(r, rb, rc, false, N, K, rs);
    permute_into(ct, l, res->type, ls, A);
    permute_into(ct, r, res->type, rs, Bm);
    int threads = small_batch_begin(B, M, N, K);
    for (int64_t b = 0; b < B; b++) {
        gemm(ct, M, N, K, (const char *)A + (size_t)(b * M * K) * es,
             (const char *)Bm + (size_t)(b * K * N) * es, (char *)C + (size_t)(b * M * N) * es);
    }
    small_batch_end(threads);
    if (ct == CT_F32 && res->type == GS_F32)
        memcpy(res->data, C, (size_t)res->n * 4);
    else if (ct == CT_F64 && res->type == GS_F64)
        memcpy(res->data, C, (size_t)res->n * 8);
    else
        for (int64_t i = 0; i < res->n; i++) store_elem(ct, C, i, res->type, res->data, i, false);
    free(A);
    free(Bm);
    free(C);
    *out = res;
    return GS_OK;
}

static gs_status k_dot(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    if (in->n_operands != 2)
        return gs_eval_error(ev, in, "sparse dot (a metadata operand) is not supported");
    return dot_of(ev, in, ops[0], ops[1], out);
}

/* ------------------------------------------------------------------ ragged dot */

/* XLA's ragged-dot. group_sizes is [prefix..., g] (or [g], the same sizes for every prefix):
 * consecutive runs of the lhs ragged dim, group i the next group_sizes[i] positions.
 *   non-contracting (the ragged dim is an lhs free dim m; the rhs has a group dim): row m of
 *     the lhs multiplies rhs[group(m)]; rows past the groups' end are zeros. The prefix is the
 *     batch dims, then the lhs free dims before m.
 *   contracting (the ragged dim is a contracting dim k): the result has a leading [g] dim, and
 *     result[i] sums only the k in group i. The prefix is the batch dims, then the contracting
 *     dims listed before k.
 *   batch (the ragged dim is a batch dim): a plain dot, group_sizes unused, as JAX, CHLO's
 *     decomposition and XLA's SPMD partitioner have it (XLA's evaluator alone zeros the
 *     batches past the groups' end).
 * As XLA's evaluator has it, a non-contracting row belongs to the first group whose running
 * end exceeds it, and contracting group i sums the k from the running end of group i-1 to its
 * own, clamped to the dim (with negative sizes, ranges may overlap). Running ends saturate far
 * beyond any dim, so no size overflows. */

/* Saturating running end of the groups. */
static int64_t group_end(int64_t end, int64_t size) {
    const int64_t cap = (int64_t)1 << 62;
    end += size < -cap ? -cap : size > cap ? cap : size;
    return end < -cap ? -cap : end > cap ? cap : end;
}

/* The sizes of prefix row p (rank-1 group sizes: the same row for every p). */
static void group_row(const gs_value *gsz, int64_t p, int64_t g, int64_t *sizes) {
    int64_t base = gsz->rank > 1 ? p * g : 0;
    for (int64_t i = 0; i < g; i++) sizes[i] = gs_elem_get_i(gsz->data, gsz->type, base + i);
}

/* dst += src over n compute-type elements (integers wrap). */
static void add_into(ctype ct, void *dst, const void *src, int64_t n) {
    switch (ct) {
    case CT_F32:
    case CT_C64:
        for (int64_t i = 0; i < n * (ct == CT_C64 ? 2 : 1); i++)
            ((float *)dst)[i] += ((const float *)src)[i];
        return;
    case CT_F64:
    case CT_C128:
        for (int64_t i = 0; i < n * (ct == CT_C128 ? 2 : 1); i++)
            ((double *)dst)[i] += ((const double *)src)[i];
        return;
    case CT_I64:
        for (int64_t i = 0; i < n; i++) ((uint64_t *)dst)[i] += ((const uint64_t *)src)[i];
        return;
    }
}

/* A list of ints: l's first n entries, then extra (when >= 0). */
static gs_ints ints_prefix(int64_t *buf, gs_ints l, int n, int64_t extra) {
    for (int i = 0; i < n; i++) buf[i] = l.v[i];
    if (extra >= 0) buf[n++] = extra;
    return (gs_ints){n, buf};
}

static gs_status k_ragged_dot(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                              gs_value **out) {
    const gs_value *l = ops[0], *r = ops[1], *gsz = ops[2];
    gs_dot_dims dd;
    if (!gs_dot_dims_of(in, &dd) || !dims_valid(l->rank, dd.lb, dd.lc) ||
        !dims_valid(r->rank, dd.rb, dd.rc) || dd.ragged < 0 || dd.ragged >= l->rank ||
        (dd.rg.n && (dd.rg.v[0] < 0 || dd.rg.v[0] >= r->rank)) || gsz->rank < 1 ||
        !gs_type_is_int(gsz->type))
        return gs_eval_error(ev, in, "invalid ragged-dot dimension numbers");
    gs_ints lb = dd.lb, lc = dd.lc, rb = dd.rb, rc = dd.rc, rg = dd.rg;
    int64_t ragged = dd.ragged;
    if (dd.mode == GS_RAGGED_BATCH) return dot_of(ev, in, l, r, out);
    bool contracting = dd.mode == GS_RAGGED_CONTRACTING;
    int64_t G = gsz->dims[gsz->rank - 1];
    if (!contracting && r->dims[rg.v[0]] != G)
        return gs_eval_error(ev, in, "the rhs group dimension is not the number of groups");
    /* Gathered as a dot whose batch is the group sizes' prefix: lhs [P, M, K], rhs [.., K, N]. */
    int64_t pb[GS_MAX_RANK], rbb[GS_MAX_RANK], rcc[GS_MAX_RANK];
    gs_ints lbatch, lcontr, rbatch, rcontr;
    int kpos = contracting ? (int)gs_ints_index(lc, ragged) : 0;
    if (contracting) { /* batch += the contracting dims before k; contracting = k and after */
        lbatch = ints_prefix(pb, lb, lb.n, -1);
        rbatch = ints_prefix(rbb, rb, rb.n, -1);
        for (int i = 0; i < kpos; i++) {
            pb[lbatch.n++] = lc.v[i];
            rbb[rbatch.n++] = rc.v[i];
        }
        lcontr = (gs_ints){lc.n - kpos, lc.v + kpos};
        rcontr = (gs_ints){rc.n - kpos, rc.v + kpos};
    } else { /* batch += the lhs free dims before m; the rhs batch += its group dim */
        lbatch = ints_prefix(pb, lb, lb.n, -1);
        for (int d = 0; d < ragged; d++)
            if (gs_ints_index(lb, d) < 0 && gs_ints_index(lc, d) < 0) pb[lbatch.n++] = d;
        rbatch = ints_prefix(rbb, rb, rb.n, rg.v[0]);
        lcontr = lc;
        rcontr = ints_prefix(rcc, rc, rc.n, -1);
    }
    int64_t B = dims_product(l, lb), P = dims_product(l, lbatch), K = dims_product(l, lcontr);
    int64_t M = 1, N = 1;
    for (int d = 0; d < l->rank; d++)
        if (gs_ints_index(lbatch, d) < 0 && gs_ints_index(lcontr, d) < 0) M *= l->dims[d];
    for (int d = 0; d < r->rank; d++)
        if (gs_ints_index(rbatch, d) < 0 && gs_ints_index(rcontr, d) < 0) N *= r->dims[d];
    int64_t prefix_n = 1;
    for (int d = 0; d + 1 < gsz->rank; d++) prefix_n *= gsz->dims[d];
    if (gsz->rank > 1 && prefix_n != P)
        return gs_eval_error(ev, in, "group sizes do not match the ragged-dot's prefix dims");
    gs_value *res = gs_eval_new_result(ev, in);
    if (!res) return GS_ERR;
    if (res->n != (contracting ? G * B : P) * M * N) {
        gs_value_free(res);
        return gs_eval_error(ev, in, "result shape does not match the ragged-dot's dimensions");
    }
    if (!blas_fits(M) || !blas_fits(N) || !blas_fits(K)) {
        gs_value_free(res);
        return gs_eval_error(ev, in, "ragged-dot is too large for BLAS");
    }
    ctype ct = ctype_of(res->type);
    size_t es = ctype_size(ct);
    /* Per group row of a contracting group: the rows of the lhs's k range, copied together. */
    int64_t Kr = contracting ? l->dims[ragged] : 1, Ks = contracting ? K / (Kr ? Kr : 1) : 1;
    void *A = gs_sys_malloc((size_t)l->n * es + 1);
    void *Bm = gs_sys_malloc((size_t)r->n * es + 1);
    void *C = gs_sys_calloc((size_t)res->n + 1, es);
    void *As = contracting ? gs_sys_malloc((size_t)(M * K) * es + 1) : NULL;
    void *Cs = contracting ? gs_sys_malloc((size_t)(M * N) * es + 1) : NULL;
    int64_t *sizes = gs_sys_malloc(sizeof *sizes * (size_t)(G + 1));
    gs_status st = GS_OK;
    if (!A || !Bm || !C || !sizes || (contracting && (!As || !Cs))) {
        st = gs_eval_oom(ev, in);
        goto done;
    }
    int64_t ls[GS_MAX_RANK], rs[GS_MAX_RANK];
    operand_strides(l, lbatch, lcontr, true, M, K, ls);
    operand_strides(r, rbatch, rcontr, false, N, K, rs);
    permute_into(ct, l, res->type, ls, A);
    permute_into(ct, r, res->type, rs, Bm);
    for (int64_t p = 0; p < P && res->n > 0; p++) {
        group_row(gsz, p, G, sizes);
        const char *Ap = (const char *)A + (size_t)(p * M * K) * es;
        int64_t end = 0, done_to = 0;
        for (int64_t i = 0; i < G; i++) {
            int64_t start = end;
            end = group_end(end, sizes[i]);
            if (!contracting) {
                /* Rows [done_to, end) of the ragged dim, each a run of M / Mr lhs rows. */
                int64_t Mr = l->dims[ragged], S = Mr ? M / Mr : 0;
                int64_t hi = end < Mr ? end : Mr;
                if (hi <= done_to) continue;
                int64_t b = p / (P / B);
                gemm(ct, (hi - done_to) * S, N, K, Ap + (size_t)(done_to * S * K) * es,
                     (const char *)Bm + (size_t)((b * G + i) * K * N) * es,
                     (char *)C + (size_t)((p * M + done_to * S) * N) * es);
                done_to = hi;
                continue;
            }
            int64_t s0 = start < 0 ? 0 : start > Kr ? Kr : start;
            int64_t s1 = end < 0 ? 0 : end > Kr ? Kr : end;
            if (s1 <= s0) continue;
            /* result[i, b] += A[p][:, s0*Ks : s1*Ks] x Bm[p][s0*Ks : s1*Ks, :] */
            int64_t kk = (s1 - s0) * Ks;
            for (int64_t m = 0; m < M; m++)
                memcpy((char *)As + (size_t)(m * kk) * es,
                       Ap + (size_t)(m * K + s0 * Ks) * es, (size_t)kk * es);
            gemm(ct, M, N, kk, As, (const char *)Bm + (size_t)((p * K + s0 * Ks) * N) * es, Cs);
            int64_t b = p / (P / B);
            add_into(ct, (char *)C + (size_t)((i * B + b) * M * N) * es, Cs, M * N);
        }
    }
    for (int64_t i = 0; i < res->n; i++) store_elem(ct, C, i, res->type, res->data, i, false);
done:
    free(A);
    free(Bm);
    free(C);
    free(As);
    free(Cs);
    free(sizes);
    if (st != GS_OK) {
        gs_value_free(res);
        return st;
    }
    *out = res;
    return GS_OK;
}

/* ------------------------------------------------------------------ sparsity */

/* sparsity_config={rhs={sparsity=NxM dimension=D stride=S idx=I}}: the rhs holds N of every M
 * values along dim D (blocks of M positions spaced S apart: S interleaved blocks per run of M*S
 * positions); a metadata operand of the compressed shape gives each kept value's step within its
 * block. */
typedef struct sparsity {
    int64_t n_keep; /* N: kept values per block */
    int64_t block;  /* M: block length */
    int64_t dim;    /* the sparse dim of the operand */
    int64_t stride; /* spacing of a block's positions */
    int64_t idx;    /* operand index of the metadata (-1 when not written) */
} sparsity;

/* Reads the integer after `key` in text s (NULL-terminated); returns def when absent. */
static int64_t find_int(const char *s, const char *key, int64_t def) {
    const char *p = strstr(s, key);
    if (!p) return def;
    return strtoll(p + strlen(key), NULL, 10);
}

/* Parses the rhs part of the sparsity_config attribute. False when there is none or it is not
 * understood (then *bad is set). */
static bool parse_sparsity(const gs_instr *in, sparsity *sp, bool *bad) {
    *bad = false;
    const gs_attr *a = gs_instr_attr_named(in, "sparsity_config");
    if (!a) return false;
    const char *t = a->u.s ? a->u.s : a->text;
    if (!t) {
        *bad = true;
        return false;
    }
    const char *r = strstr(t, "rhs");
    const char *p = r ? strstr(r, "sparsity=") : NULL;
    if (!p) {
        *bad = true;
        return false;
    }
    char *end;
    sp->n_keep = strtoll(p + 9, &end, 10);
    if (*end != 'x') {
        *bad = true;
        return false;
    }
    sp->block = strtoll(end + 1, NULL, 10);
    sp->dim = find_int(r, "dimension=", 0);
    sp->stride = find_int(r, "stride=", 1);
    sp->idx = find_int(r, "idx=", -1);
    return true;
}

/* Expands compressed operand v with metadata meta (same shape, integer steps) into the dense
 * operand. *out is a new value. */
static gs_status materialize(gs_eval *ev, const gs_instr *in, const gs_value *v,
                             const gs_value *meta, const sparsity *sp, gs_value **out) {
    if (sp->n_keep <= 0 || sp->block <= 0 || sp->stride <= 0 || sp->n_keep > sp->block)
        return gs_eval_error(ev, in, "invalid sparsity %lldx%lld", (long long)sp->n_keep,
                             (long long)sp->block);
    if (sp->dim < 0 || sp->dim >= v->rank)
        return gs_eval_error(ev, in, "sparsity dimension %lld is out of range", (long long)sp->dim);
    if (meta->rank != v->rank || memcmp(meta->dims, v->dims, sizeof(int64_t) * (size_t)v->rank) ||
        !(gs_type_is_int(meta->type)))
        return gs_eval_error(ev, in, "sparsity metadata must be integers shaped like the operand");
    int64_t d = sp->dim, comp = v->dims[d];
    if (comp % sp->n_keep)
        return gs_eval_error(ev, in, "sparse dimension size %lld is not a multiple of %lld",
                             (long long)comp, (long long)sp->n_keep);
    int64_t blocks = comp / sp->n_keep;
    if (blocks % sp->stride)
        return gs_eval_error(ev, in, "sparse blocks do not divide into stride %lld",
                             (long long)sp->stride);
    int64_t dims[GS_MAX_RANK];
    memcpy(dims, v->dims, sizeof dims);
    dims[d] = blocks * sp->block;
    gs_value *full = gs_value_new_array(v->type, v->rank, dims);
    if (!full) return gs_eval_oom(ev, in);
    int64_t inner = 1, outer = 1;
    for (int i = (int)d + 1; i < v->rank; i++) inner *= v->dims[i];
    for (int i = 0; i < d; i++) outer *= v->dims[i];
    int size = gs_type_size(v->type);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < comp; c++)
            for (int64_t k = 0; k < inner; k++) {
                int64_t src = (o * comp + c) * inner + k;
                int64_t step = gs_elem_get_i(meta->data, meta->type, src);
                if (step < 0 || step >= sp->block) {
                    gs_value_free(full);
                    return gs_eval_error(ev, in, "sparsity metadata value %lld is out of range",
                                         (long long)step);
                }
                int64_t blk = c / sp->n_keep;
                int64_t pos = (blk / sp->stride) * sp->block * sp->stride + blk % sp->stride +
                              step * sp->stride;
                gs_copy_elem(full->data, (o * dims[d] + pos) * inner + k, v->data, src, size);
            }
    *out = full;
    return GS_OK;
}

/* ------------------------------------------------------------------ convolution */

/* Everything the patch gathering needs about one convolution. */
typedef struct conv_plan {
    const gs_conv_dims *cd;
    int ns;                  /* spatial dims */
    int64_t os[GS_MAX_RANK]; /* output spatial sizes */
    int64_t ws[GS_MAX_RANK]; /* window sizes */
    int64_t stride[GS_MAX_RANK], pad_lo[GS_MAX_RANK], ldil[GS_MAX_RANK], rdil[GS_MAX_RANK];
    bool rev[GS_MAX_RANK];      /* window reversal */
    int64_t lst[GS_MAX_RANK];   /* lhs row-major strides */
    int64_t kst[GS_MAX_RANK];   /* rhs strides */
    int64_t ost[GS_MAX_RANK];   /* output strides */
    int64_t in_sz[GS_MAX_RANK]; /* lhs spatial sizes */
    int64_t n_out, cg, og, kw;  /* output batch, features per group (in, out), window size */
    int64_t G, BG;              /* feature and batch group counts */
    int64_t npos;               /* output spatial positions per batch */
} conv_plan;

/* Fills rows [p0, p0+rows) of the patch matrix A[rows, kw*cg] for group (fg, bg) from the
 * compute-type lhs buffer L. Row p enumerates (batch, output spatial...) in row-major order;
 * column (w, c) a window position (row-major) and an input feature of the group. */
static void gather_patches(const conv_plan *pl, ctype ct, const void *L, int64_t fg, int64_t bg,
                           int64_t p0, int64_t rows, void *A) {
    size_t es = ctype_size(ct);
    int ns = pl->ns;
    const gs_conv_dims *cd = pl->cd;
    int64_t K = pl->kw * pl->cg;
    memset(A, 0, (size_t)(rows * K) * es);
    for (int64_t pr = 0; pr < rows; pr++) {
        int64_t p = p0 + pr, rem = p, opos[GS_MAX_RANK];
        for (int i = ns - 1; i >= 0; i--) {
            opos[i] = rem % pl->os[i];
            rem /= pl->os[i];
        }
        int64_t b = rem;
        int64_t base =
            (bg * pl->n_out + b) * pl->lst[cd->in_batch] + fg * pl->cg * pl->lst[cd->in_feature];
        int64_t w[GS_MAX_RANK] = {0};
        for (int64_t wi = 0; wi < pl->kw; wi++) {
            int64_t off = base;
            bool ok = true;
            for (int i = 0; i < ns && ok; i++) {
                int64_t u = opos[i] * pl->stride[i] - pl->pad_lo[i] + w[i] * pl->rdil[i];
                if (u < 0 || u % pl->ldil[i] != 0) {
                    ok = false;
                    break;
                }
                int64_t li = u / pl->ldil[i];
                if (li >= pl->in_sz[i]) ok = false;
                off += li * pl->lst[cd->in_spatial[i]];
            }
            if (ok) {
                char *dst = (char *)A + (size_t)(pr * K + wi * pl->cg) * es;
                int64_t fs = pl->lst[cd->in_feature];
                if (fs == 1) /* features minor (b01f): one run */
                    memcpy(dst, (const char *)L + (size_t)off * es, (size_t)pl->cg * es);
                else
                    for (int64_t c = 0; c < pl->cg; c++)
                        memcpy(dst + (size_t)c * es, (const char *)L + (size_t)(off + c * fs) * es,
                               es);
            }
            for (int i = ns - 1; i >= 0; i--) {
                if (++w[i] < pl->ws[i]) break;
                w[i] = 0;
            }
        }
    }
}

/* Fills W[kw*cg, og] for output-feature group g from the compute-type rhs buffer R. */
static void gather_kernel(const conv_plan *pl, ctype ct, const void *R, int64_t g, void *W) {
    size_t es = ctype_size(ct);
    const gs_conv_dims *cd = pl->cd;
    int64_t w[GS_MAX_RANK] = {0};
    for (int64_t wi = 0; wi < pl->kw; wi++) {
        int64_t off = 0;
        for (int i = 0; i < pl->ns; i++) {
            int64_t k = pl->rev[i] ? pl->ws[i] - 1 - w[i] : w[i];
            off += k * pl->kst[cd->k_spatial[i]];
        }
        for (int64_t c = 0; c < pl->cg; c++) {
            if (pl->kst[cd->k_out_feature] == 1) { /* output features minor (01io): one run */
                int64_t src = off + c * pl->kst[cd->k_in_feature] + g * pl->og;
                memcpy((char *)W + (size_t)((wi * pl->cg + c) * pl->og) * es,
                       (const char *)R + (size_t)src * es, (size_t)pl->og * es);
                continue;
            }
            for (int64_t o = 0; o < pl->og; o++) {
                int64_t src = off + c * pl->kst[cd->k_in_feature] +
                              (g * pl->og + o) * pl->kst[cd->k_out_feature];
                memcpy((char *)W + (size_t)((wi * pl->cg + c) * pl->og + o) * es,
                       (const char *)R + (size_t)src * es, es);
            }
        }
        for (int i = pl->ns - 1; i >= 0; i--) {
            if (++w[i] < pl->ws[i]) break;
            w[i] = 0;
        }
    }
}

/* Writes rows [p0, p0+rows) of the product P[rows, og] for group g into the compute-type output
 * buffer O (laid out like the result). */
static void scatter_rows(const conv_plan *pl, ctype ct, const void *P, int64_t g, int64_t p0,
                         int64_t rows, void *O) {
    size_t es = ctype_size(ct);
    const gs_conv_dims *cd = pl->cd;
    for (int64_t pr = 0; pr < rows; pr++) {
        int64_t rem = p0 + pr, off = 0;
        for (int i = pl->ns - 1; i >= 0; i--) {
            off += (rem % pl->os[i]) * pl->ost[cd->out_spatial[i]];
            rem /= pl->os[i];
        }
        off += rem * pl->ost[cd->out_batch] + g * pl->og * pl->ost[cd->out_feature];
        if (pl->ost[cd->out_feature] == 1) { /* features minor (b01f): one run */
            memcpy((char *)O + (size_t)off * es, (const char *)P + (size_t)(pr * pl->og) * es,
                   (size_t)pl->og * es);
            continue;
        }
        for (int64_t o = 0; o < pl->og; o++)
            memcpy((char *)O + (size_t)(off + o * pl->ost[cd->out_feature]) * es,
                   (const char *)P + (size_t)(pr * pl->og + o) * es, es);
    }
}

/* Checks the labels against the operand ranks (distinct dims in range). */
static bool labels_valid(const gs_conv_dims *cd, int lr, int kr, int orank) {
    int ns = cd->n_spatial;
    if (lr != ns + 2 || kr != ns + 2 || orank != ns + 2) return false;
    bool seen[3][GS_MAX_RANK + 2] = {{false}};
    int64_t all[3][GS_MAX_RANK + 2];
    for (int i = 0; i < ns; i++) {
        all[0][i] = cd->in_spatial[i];
        all[1][i] = cd->k_spatial[i];
        all[2][i] = cd->out_spatial[i];
    }
    all[0][ns] = cd->in_batch;
    all[0][ns + 1] = cd->in_feature;
    all[1][ns] = cd->k_in_feature;
    all[1][ns + 1] = cd->k_out_feature;
    all[2][ns] = cd->out_batch;
    all[2][ns + 1] = cd->out_feature;
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < ns + 2; i++) {
            int64_t d = all[t][i];
            if (d < 0 || d >= ns + 2 || seen[t][d]) return false;
            seen[t][d] = true;
        }
    return true;
}

/* Which of a convolution's GEMM operands are read or written in place (real BLAS types, so
 * that a leading dimension can stride over the other groups' features), not gathered into or
 * scattered from contiguous blocks: the kernel when its layout is [window..., in, out] with no
 * reversal (ResNet's 01io), the result when it is [batch, spatial..., features] (b01f), and the
 * patches when the window is one element that steps over every input position once (a 1x1
 * convolution of stride 1, no padding or dilation) on a [batch, spatial..., features] input. */
typedef struct conv_inplace {
    bool kernel, result, patches;
} conv_inplace;

/* Whether labels put dims in the order `first`, spatial 0..ns-1, `last` (first < 0: none). */
static bool dims_ordered(const int64_t *spatial, int ns, int64_t first, int64_t last) {
    int at = 0;
    if (first >= 0 && first != at++) return false;
    for (int i = 0; i < ns; i++)
        if (spatial[i] != at++) return false;
    return last == at;
}

static conv_inplace conv_inplace_of(const conv_plan *pl, ctype ct) {
    conv_inplace ip = {false, false, false};
    if (ct != CT_F32 && ct != CT_F64) return ip;
    const gs_conv_dims *cd = pl->cd;
    int ns = pl->ns;
    bool rev = false;
    for (int i = 0; i < ns; i++) rev |= pl->rev[i];
    ip.kernel = !rev && cd->k_in_feature == ns &&
                dims_ordered(cd->k_spatial, ns, -1, cd->k_in_feature) &&
                cd->k_out_feature == ns + 1;
    ip.result = dims_ordered(cd->out_spatial, ns, cd->out_batch, cd->out_feature) &&
                cd->out_batch == 0;
    bool unit = pl->kw == 1 && dims_ordered(cd->in_spatial, ns, cd->in_batch, cd->in_feature) &&
                cd->in_batch == 0;
    for (int i = 0; i < ns && unit; i++)
        unit = pl->stride[i] == 1 && pl->pad_lo[i] == 0 && pl->ldil[i] == 1 &&
               pl->os[i] == pl->in_sz[i];
    ip.patches = unit;
    return ip;
}

/* Rows of patches gathered at once: bounds the im2col buffer to about 4M elements. */
enum { CONV_BLOCK_ELEMS = 1 << 22 };

/* convolution: per group, im2col patch blocks times the reshaped kernel, scattered back into a
 * compute-type result that is converted (saturating integers) at the end. */
/* Checks a convolution's dim_labels, window and group counts against its operands and result
 * (XLA's output size rule included) and fills its plan. */
static gs_status conv_plan_make(gs_eval *ev, const gs_instr *in, const gs_value *lhs,
                                const gs_value *rhs, const gs_value *res, conv_plan *pl) {
    const gs_conv_dims *cd = gs_instr_attr(in, GS_ATTR_DIM_LABELS)->u.conv;
    memset(pl, 0, sizeof *pl);
    pl->cd = cd;
    pl->ns = cd->n_spatial;
    const gs_attr *wa = gs_instr_attr(in, GS_ATTR_WINDOW);
    const gs_window *win = wa ? wa->u.window : NULL;
    int64_t G = gs_instr_int(in, GS_ATTR_FEATURE_GROUP_COUNT, 1);
    int64_t BG = gs_instr_int(in, GS_ATTR_BATCH_GROUP_COUNT, 1);
    pl->G = G;
    pl->BG = BG;
    if (!labels_valid(cd, lhs->rank, rhs->rank, res->rank) || (pl->ns > 0 && !win) ||
        (win && win->n != pl->ns))
        return gs_eval_error(ev, in, "dim_labels or window do not match the operands");
    int64_t n_in = lhs->dims[cd->in_batch], C = lhs->dims[cd->in_feature];
    int64_t O_f = rhs->dims[cd->k_out_feature];
    pl->cg = rhs->dims[cd->k_in_feature];
    if (G < 1 || BG < 1 || (G > 1 && BG > 1) || C != pl->cg * G || O_f % (G * BG) || n_in % BG ||
        res->dims[cd->out_batch] != n_in / BG || res->dims[cd->out_feature] != O_f)
        return gs_eval_error(ev, in, "feature/batch group counts do not match the operands");
    pl->og = O_f / (G * BG);
    pl->n_out = n_in / BG;
    pl->kw = 1;
    int64_t npos = 1;
    for (int i = 0; i < pl->ns; i++) {
        const gs_window_dim *wd = &win->dims[i];
        pl->ws[i] = rhs->dims[cd->k_spatial[i]];
        pl->os[i] = res->dims[cd->out_spatial[i]];
        pl->in_sz[i] = lhs->dims[cd->in_spatial[i]];
        pl->stride[i] = wd->stride;
        pl->pad_lo[i] = wd->pad_lo;
        pl->ldil[i] = wd->lhs_dilate;
        pl->rdil[i] = wd->rhs_dilate;
        pl->rev[i] = wd->reversal;
        if (wd->size != pl->ws[i] || wd->stride < 1 || wd->lhs_dilate < 1 || wd->rhs_dilate < 1)
            return gs_eval_error(ev, in, "window does not match the kernel");
        /* XLA's output size: (padded dilated input - dilated window) / stride + 1. */
        int64_t din = pl->in_sz[i] ? (pl->in_sz[i] - 1) * wd->lhs_dilate + 1 : 0;
        int64_t padded = din + wd->pad_lo + wd->pad_hi;
        int64_t dw = pl->ws[i] ? (pl->ws[i] - 1) * wd->rhs_dilate + 1 : 0;
        int64_t want = padded < dw ? 0 : (padded - dw) / wd->stride + 1;
        if (padded < 0) want = 0;
        if (want != pl->os[i])
            return gs_eval_error(ev, in, "output spatial size %lld differs from the window's %lld",
                                 (long long)pl->os[i], (long long)want);
        pl->kw *= pl->ws[i];
        npos *= pl->os[i];
    }
    gs_strides(lhs->rank, lhs->dims, pl->lst);
    gs_strides(rhs->rank, rhs->dims, pl->kst);
    gs_strides(res->rank, res->dims, pl->ost);
    pl->npos = npos;
    return GS_OK;
}

static gs_status k_convolution(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                               gs_value **out) {
    const gs_attr *la = gs_instr_attr(in, GS_ATTR_DIM_LABELS);
    if (!la || !la->u.conv) return gs_eval_error(ev, in, "convolution needs dim_labels=");
    const gs_value *lhs = ops[0], *rhs = ops[1];
    gs_value *dense = NULL;
    sparsity sp;
    bool bad;
    bool sparse = parse_sparsity(in, &sp, &bad);
    if (bad) return gs_eval_error(ev, in, "sparsity_config is not understood");
    if (sparse) {
        int mi = sp.idx >= 0 ? (int)sp.idx : 2;
        if (mi < 2 || mi >= in->n_operands)
            return gs_eval_error(ev, in, "sparse convolution needs its metadata operand");
        if (materialize(ev, in, rhs, ops[mi], &sp, &dense) != GS_OK) return GS_ERR;
        rhs = dense;
    } else if (in->n_operands != 2) {
        return gs_eval_error(ev, in, "a third operand needs sparsity_config=");
    }
    gs_status st = GS_OK;
    gs_value *res = NULL;
    void *L = NULL, *R = NULL, *O = NULL, *A = NULL, *W = NULL, *P = NULL;
    conv_plan pl;
    res = gs_eval_new_result(ev, in);
    if (!res) {
        st = GS_ERR;
        goto done;
    }
    if ((st = conv_plan_make(ev, in, lhs, rhs, res, &pl)) != GS_OK) goto done;
    int64_t G = pl.G, BG = pl.BG, ngroups = G * BG, npos = pl.npos;
    if (res->n == 0) goto done;
    ctype ct = ctype_of(res->type);
    size_t es = ctype_size(ct);
    int64_t K = pl.kw * pl.cg, rows_total = pl.n_out * npos;
    if (!blas_fits(K) || !blas_fits(pl.og) || !blas_fits(rows_total)) {
        st = gs_eval_error(ev, in, "convolution is too large for BLAS");
        goto done;
    }
    int64_t block = K > 0 ? CONV_BLOCK_ELEMS / K : rows_total;
    if (block < 1) block = 1;
    if (block > rows_total) block = rows_total;
    /* Operands and result already in the compute type are read and written in place. */
    bool native = (ct == CT_F32 && res->type == GS_F32) || (ct == CT_F64 && res->type == GS_F64);
    bool l_native = native && lhs->type == res->type, r_native = native && rhs->type == res->type;
    L = l_native ? NULL : gs_sys_malloc((size_t)lhs->n * es + 1);
    R = r_native ? NULL : gs_sys_malloc((size_t)rhs->n * es + 1);
    O = native ? NULL : gs_sys_calloc((size_t)res->n + 1, es);
    conv_inplace ip = K > 0 && pl.og > 0 ? conv_inplace_of(&pl, ct) : (conv_inplace){0};
    A = ip.patches ? NULL : gs_sys_malloc((size_t)(block * K) * es + 1);
    W = ip.kernel ? NULL : gs_sys_malloc((size_t)(K * pl.og) * es + 1);
    P = ip.result ? NULL : gs_sys_malloc((size_t)(block * pl.og) * es + 1);
    if ((!l_native && !L) || (!r_native && !R) || (!native && !O) || (!ip.patches && !A) ||
        (!ip.kernel && !W) || (!ip.result && !P)) {
        st = gs_eval_oom(ev, in);
        goto done;
    }
    if (!l_native) permute_into(ct, lhs, res->type, pl.lst, L);
    if (!r_native) permute_into(ct, rhs, res->type, pl.kst, R);
    const void *Lr = l_native ? lhs->data : L, *Rr = r_native ? rhs->data : R;
    void *Ow = native ? res->data : O;
    int64_t C_in = lhs->dims[pl.cd->in_feature], O_f = res->dims[pl.cd->out_feature];
    for (int64_t g = 0; g < ngroups; g++) {
        int64_t fg = G > 1 ? g : 0, bg = BG > 1 ? g : 0;
        const void *Wg = ip.kernel ? (const char *)Rr + (size_t)(g * pl.og) * es : W;
        if (!ip.kernel) gather_kernel(&pl, ct, Rr, g, W);
        for (int64_t p0 = 0; p0 < rows_total; p0 += block) {
            int64_t rows = rows_total - p0 < block ? rows_total - p0 : block;
            const void *Ab = A;
            if (ip.patches) /* row p is input position (bg * n_out * npos + p) */
                Ab = (const char *)Lr + (size_t)((bg * rows_total + p0) * C_in + fg * pl.cg) * es;
            else
                gather_patches(&pl, ct, Lr, fg, bg, p0, rows, A);
            void *Pb = ip.result ? (char *)Ow + (size_t)(p0 * O_f + g * pl.og) * es : P;
            if (ip.kernel || ip.patches || ip.result)
                gemm_ld(ct, rows, pl.og, K, Ab, ip.patches ? C_in : K, Wg,
                        ip.kernel ? O_f : pl.og, Pb, ip.result ? O_f : pl.og);
            else
                gemm(ct, rows, pl.og, K, Ab, Wg, Pb);
            if (!ip.result) scatter_rows(&pl, ct, P, g, p0, rows, Ow);
        }
    }
    if (!native)
        for (int64_t i = 0; i < res->n; i++) store_elem(ct, O, i, res->type, res->data, i, true);
done:
    free(L);
    free(R);
    free(O);
    free(A);
    free(W);
    free(P);
    gs_value_free(dense);
    if (st != GS_OK) {
        gs_value_free(res);
        return st;
    }
    *out = res;
    return GS_OK;
}

/* The kernel of dot and convolution (see kernels.h). */
gs_kernel_fn gs_kernel_dot(gs_opcode op) {
    switch (op) {
    case GS_OP_DOT: return k_dot;
    case GS_OP_RAGGED_DOT: return k_ragged_dot;
    case GS_OP_CONVOLUTION: return k_convolution;
    default: return NULL;
    }
}
