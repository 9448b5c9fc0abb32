/*
 * k_fft.c — the fft kernel (FFT, IFFT, RFFT, IRFFT over the last fft_length dims).
 *
 * FFTs are computed per 1-D line with a direct DFT in double precision (exact enough for every
 * size the tests use, and simple); multi-dimensional transforms apply it along each transformed
 * dim.
 */
#include "kernels.h"
#include "base/sysalloc.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

gs_kernel_fn gs_kernel_fft(gs_opcode op) { return op == GS_OP_FFT ? k_fft : NULL; }
