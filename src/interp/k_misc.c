/*
 * k_misc.c — the remaining interpreter kernels: fft, rng, rng-bit-generator,
 * rng-get-and-update-state, batch-norm-training / -inference / -grad, cholesky,
 * triangular-solve, dynamic shapes (get-dimension-size, set-dimension-size, dynamic-reshape),
 * outfeed.
 *
 * FFTs are computed per 1-D line with a direct DFT in double precision (exact enough for every
 * size the tests use, and simple); multi-dimensional transforms apply it along each transformed
 * dim. Random numbers are deterministic given the seed (splitmix64 streams); their bits are not
 * XLA's Philox/ThreeFry bits.
 */
#include "kernels.h"
#include "base/sysalloc.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ fft */

/* In-place DFT of n complex values spaced `stride` apart in buf (sign -1 forward, +1 inverse,
 * unscaled). tmp holds n values. */
static void dft_line(double complex *buf, int64_t n, int64_t stride, int sign, double complex *tmp) {
    for (int64_t k = 0; k < n; k++) {
        double complex s = 0;
        for (int64_t j = 0; j < n; j++) {
            double ang = sign * 2.0 * M_PI * (double)((k * j) % n) / (double)n;
            s += buf[j * stride] * gs_cmplx(cos(ang), sin(ang));
        }
        tmp[k] = s;
    }
    for (int64_t k = 0; k < n; k++) buf[k * stride] = tmp[k];
}

/* Applies the DFT along dim d of a complex array with dims `dims` (rank r). */
static void dft_dim(double complex *a, int r, const int64_t *dims, int d, int sign,
                    double complex *tmp) {
    int64_t stride = 1;
    for (int i = d + 1; i < r; i++) stride *= dims[i];
    int64_t n = dims[d];
    int64_t outer = 1;
    for (int i = 0; i < d; i++) outer *= dims[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t s = 0; s < stride; s++) dft_line(a + o * n * stride + s, n, stride, sign, tmp);
}

static gs_status k_fft(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *x = ops[0];
    const char *type = gs_instr_str(in, GS_ATTR_FFT_TYPE);
    gs_ints len = gs_instr_ints(in, GS_ATTR_FFT_LENGTH);
    if (!type || len.n < 1 || len.n > 3 || len.n > x->rank)
        return gs_eval_error(ev, in, "fft needs fft_type= and 1 to 3 fft_length dims");
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    int rank = r->rank, k = len.n;
    bool real_in = strcmp(type, "RFFT") == 0, real_out = strcmp(type, "IRFFT") == 0;
    bool inverse = strcmp(type, "IFFT") == 0 || real_out;
    for (int i = 0; i < k; i++)
        if (len.v[i] == 0) {
            *out = r; /* an empty transform gives zeros */
            return GS_OK;
        }
    /* Work array: full complex data with the transformed dims at their fft_length. */
    int64_t wdims[GS_MAX_RANK], wn = 1;
    for (int i = 0; i < rank; i++) wdims[i] = i >= rank - k ? len.v[i - (rank - k)] : x->dims[i];
    for (int i = 0; i < rank; i++) wn *= wdims[i];
    int64_t maxn = 1;
    for (int i = 0; i < k; i++) maxn = len.v[i] > maxn ? len.v[i] : maxn;
    double complex *w = gs_sys_calloc((size_t)(wn ? wn : 1), sizeof *w);
    double complex *tmp = gs_sys_malloc(sizeof *tmp * (size_t)maxn);
    if (!w || !tmp) {
        free(w);
        free(tmp);
        gs_value_free(r);
        return gs_eval_oom(ev, in);
    }
    /* Load the input, copying the overlap of its dims with the work dims; for IRFFT fill the
     * missing half of the last dim by Hermitian symmetry after the other dims are done. */
    int64_t idx[GS_MAX_RANK] = {0};
    int64_t xs[GS_MAX_RANK], ws[GS_MAX_RANK];
    gs_strides(rank, x->dims, xs);
    gs_strides(rank, wdims, ws);
    if (x->n > 0) {
        do {
            bool inside = true;
            int64_t wi = 0, xi = 0;
            for (int i = 0; i < rank; i++) {
                if (idx[i] >= wdims[i]) inside = false;
                wi += idx[i] * ws[i];
                xi += idx[i] * xs[i];
            }
            if (inside) {
                double re, im;
                gs_elem_get_c(x->data, x->type, xi, &re, &im);
                w[wi] = gs_cmplx(re, real_in ? 0 : im);
            }
        } while (gs_index_next(rank, x->dims, idx));
    }
    if (!real_out) {
        for (int i = rank - k; i < rank; i++) dft_dim(w, rank, wdims, i, inverse ? 1 : -1, tmp);
    } else {
        for (int i = rank - k; i < rank - 1; i++) dft_dim(w, rank, wdims, i, 1, tmp);
        /* Hermitian completion along the last dim: X[n-j] = conj(X[j]). */
        int64_t n = wdims[rank - 1], half = n / 2 + 1, outer = wn / n;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = half; j < n; j++) w[o * n + j] = conj(w[o * n + (n - j)]);
        dft_dim(w, rank, wdims, rank - 1, 1, tmp);
    }
    double scale = 1.0;
    if (inverse)
        for (int i = 0; i < k; i++) scale /= (double)len.v[i];
    /* Store: the result keeps its own dims (RFFT: last dim n/2+1). */
    memset(idx, 0, sizeof idx);
    int64_t rs[GS_MAX_RANK];
    gs_strides(rank, r->dims, rs);
    if (r->n > 0) {
        do {
            int64_t wi = 0, ri = 0;
            for (int i = 0; i < rank; i++) {
                wi += idx[i] * ws[i];
                ri += idx[i] * rs[i];
            }
            double complex z = w[wi] * scale;
            gs_elem_set_c(r->data, r->type, ri, creal(z), cimag(z));
        } while (gs_index_next(rank, r->dims, idx));
    }
    free(w);
    free(tmp);
    *out = r;
    return GS_OK;
}

/* ------------------------------------------------------------------ random numbers */

static uint64_t next_random(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return (double)(next_random(s) >> 11) * 0x1.0p-53; }

/* rng(a, b), distribution=rng_uniform: [a, b); rng_normal: mean a, deviation b. */
static gs_status k_rng(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const char *dist = gs_instr_str(in, GS_ATTR_DISTRIBUTION);
    bool normal = dist && strcmp(dist, "rng_normal") == 0;
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    const gs_value *a = ops[0], *b = ops[1];
    bool is_float = gs_type_is_float(r->type);
    for (int64_t i = 0; i < r->n; i++) {
        if (is_float) {
            double lo = gs_elem_get_f(a->data, a->type, 0), hi = gs_elem_get_f(b->data, b->type, 0);
            double v;
            if (normal) {
                double u1 = uniform01(&ev->rng_state), u2 = uniform01(&ev->rng_state);
                v = lo + hi * sqrt(-2.0 * log(u1 > 0 ? u1 : 0x1.0p-53)) * cos(2 * M_PI * u2);
            } else {
                v = lo + (hi - lo) * uniform01(&ev->rng_state);
                if (v >= hi && hi > lo) v = lo;
            }
            gs_elem_set_f(r->data, r->type, i, v);
        } else {
            int64_t lo = gs_elem_get_i(a->data, a->type, 0), hi = gs_elem_get_i(b->data, b->type, 0);
            uint64_t span = hi > lo ? (uint64_t)hi - (uint64_t)lo : 1;
            gs_elem_set_i(r->data, r->type, i, lo + (int64_t)(next_random(&ev->rng_state) % span));
        }
    }
    *out = r;
    return GS_OK;
}

/* rng-bit-generator(state) -> (new_state, bits): deterministic in the state. */
static gs_status k_rng_bit_generator(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_shape *s = in->shape;
    if (s->type != GS_TUPLE || s->n_tuple != 2) return gs_eval_error(ev, in, "result must be (state, bits)");
    const gs_value *st = ops[0];
    gs_value *ns = gs_value_copy(st);
    gs_value *bits = gs_value_new_array(s->tuple[1]->type, s->tuple[1]->rank, s->tuple[1]->dims);
    if (!ns || !bits) {
        gs_value_free(ns);
        gs_value_free(bits);
        return gs_eval_oom(ev, in);
    }
    uint64_t seed = 0x5851f42d4c957f2dull;
    for (int64_t i = 0; i < st->n; i++) seed = seed * 6364136223846793005ull + (uint64_t)gs_elem_get_i(st->data, st->type, i);
    unsigned char *p = bits->data;
    size_t nbytes = gs_value_bytes(bits);
    uint64_t g = seed;
    for (size_t i = 0; i < nbytes; i += 8) {
        uint64_t v = next_random(&g);
        size_t m = nbytes - i < 8 ? nbytes - i : 8;
        memcpy(p + i, &v, m);
    }
    /* Advance the state: its first word counts the bytes drawn. */
    if (ns->n > 0) gs_elem_set_i(ns->data, ns->type, 0, gs_elem_get_i(ns->data, ns->type, 0) + (int64_t)nbytes);
    gs_value *parts[2] = {ns, bits};
    *out = gs_value_new_tuple(2, parts);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

static gs_status k_rng_state(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    for (int64_t i = 0; i < r->n; i++) gs_elem_set_i(r->data, r->type, i, (int64_t)next_random(&ev->rng_state));
    *out = r;
    return GS_OK;
}

/* ------------------------------------------------------------------ batch norm */

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

/* ------------------------------------------------------------------ linear algebra */

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

/* ------------------------------------------------------------------ shapes and host transfer */

static gs_status k_get_dimension_size(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    if (dims.n != 1 || dims.v[0] < 0 || dims.v[0] >= ops[0]->rank)
        return gs_eval_error(ev, in, "dimensions= must name one dimension of the operand");
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    gs_elem_set_i(r->data, r->type, 0, ops[0]->dims[dims.v[0]]);
    *out = r;
    return GS_OK;
}

/* set-dimension-size(x, size), dimensions={d}: the value keeps the first `size` elements of dim
 * d (values hold only the valid elements of dynamic dims); growing past the operand's current
 * size (up to the bound) adds zeros, XLA's unspecified padding. */
static gs_status k_set_dimension_size(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *x = ops[0];
    gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    if (dims.n != 1 || dims.v[0] < 0 || dims.v[0] >= x->rank)
        return gs_eval_error(ev, in, "dimensions= must name one dimension of the operand");
    int d = (int)dims.v[0];
    int64_t size = gs_elem_get_i(ops[1]->data, ops[1]->type, 0), bound = in->shape->dims[d];
    if (size < 0 || size > bound)
        return gs_eval_error(ev, in, "size %lld is outside [0, %lld]", (long long)size, (long long)bound);
    int64_t rdims[GS_MAX_RANK];
    memcpy(rdims, x->dims, sizeof(int64_t) * (size_t)x->rank);
    rdims[d] = size;
    gs_value *r = gs_value_new_array(x->type, x->rank, rdims);
    if (!r) return gs_eval_oom(ev, in);
    int esz = gs_type_size(x->type);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < d; i++) outer *= x->dims[i];
    for (int i = d + 1; i < x->rank; i++) inner *= x->dims[i];
    int64_t keep = size < x->dims[d] ? size : x->dims[d];
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)r->data + (size_t)(o * size * inner * esz),
               (const char *)x->data + (size_t)(o * x->dims[d] * inner * esz), (size_t)(keep * inner * esz));
    *out = r;
    return GS_OK;
}

/* dynamic-reshape(x, size0, size1, ...): x's elements, row-major, in the dims the size operands
 * give (each within the result's bound). */
static gs_status k_dynamic_reshape(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *x = ops[0];
    const gs_shape *s = in->shape;
    if (in->n_operands != 1 + s->rank)
        return gs_eval_error(ev, in, "needs one size operand per result dimension");
    int64_t rdims[GS_MAX_RANK], n = 1;
    for (int i = 0; i < s->rank; i++) {
        rdims[i] = gs_elem_get_i(ops[1 + i]->data, ops[1 + i]->type, 0);
        if (rdims[i] < 0 || rdims[i] > s->dims[i])
            return gs_eval_error(ev, in, "size %lld of dimension %d is outside [0, %lld]",
                                 (long long)rdims[i], i, (long long)s->dims[i]);
        n *= rdims[i];
    }
    if (n != x->n)
        return gs_eval_error(ev, in, "the operand has %lld elements, the sizes ask for %lld",
                             (long long)x->n, (long long)n);
    gs_value *r = gs_value_new_array(x->type, s->rank, rdims);
    if (!r) return gs_eval_oom(ev, in);
    memcpy(r->data, x->data, gs_value_bytes(x));
    *out = r;
    return GS_OK;
}

static gs_status k_outfeed(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    *out = gs_value_new_token();
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

gs_kernel_fn gs_kernel_misc(gs_opcode op) {
    switch (op) {
    case GS_OP_FFT: return k_fft;
    case GS_OP_RNG: return k_rng;
    case GS_OP_RNG_BIT_GENERATOR: return k_rng_bit_generator;
    case GS_OP_RNG_GET_AND_UPDATE_STATE: return k_rng_state;
    case GS_OP_BATCH_NORM_TRAINING:
    case GS_OP_BATCH_NORM_INFERENCE:
    case GS_OP_BATCH_NORM_GRAD: return k_batch_norm;
    case GS_OP_CHOLESKY: return k_cholesky;
    case GS_OP_TRIANGULAR_SOLVE: return k_triangular_solve;
    case GS_OP_GET_DIMENSION_SIZE: return k_get_dimension_size;
    case GS_OP_SET_DIMENSION_SIZE: return k_set_dimension_size;
    case GS_OP_DYNAMIC_RESHAPE: return k_dynamic_reshape;
    case GS_OP_OUTFEED: return k_outfeed;
    default: return NULL;
    }
}
