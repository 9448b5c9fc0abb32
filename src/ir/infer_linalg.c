/*
 * infer_linalg.c — shape rules of the numerical ops with their own signatures: fft (FFT, IFFT,
 * RFFT, IRFFT over 1 to 3 innermost dims), cholesky, triangular-solve and batch-norm-training,
 * -inference and -grad.
 */
#include "ir/infer.h"

#include <string.h>

gs_status gs_infer_fft(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    const char *ty = gs_instr_str(c->in, GS_ATTR_FFT_TYPE);
    gs_ints len;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (!ty) return fail(c, "missing attribute fft_type");
    if (need_ints(c, GS_ATTR_FFT_LENGTH, &len) != GS_OK) return GS_ERR;
    int n = len.n, r = s->rank;
    if (n < 1 || n > 3) return fail(c, "fft_length must have 1 to 3 entries, not %d", n);
    for (int i = 0; i < n; i++)
        if (len.v[i] < 0) return fail(c, "fft_length %s has a negative entry", ints_text(c, len));
    if (r < n)
        return fail(c, "an FFT of rank %d needs an operand of rank >= %d, not %s", n, n, sh(c, s));
    int64_t dims[GS_MAX_RANK];
    copy_dims(dims, s);
    if (strcmp(ty, "FFT") == 0 || strcmp(ty, "IFFT") == 0) {
        if (!gs_type_is_complex(s->type))
            return fail(c, "%s needs a complex operand, not %s", ty, sh(c, s));
        /* An empty extent on either side (XLA's evaluator gives zeros, or nothing) is the one
         * mismatch allowed. */
        for (int i = 0; i < n; i++)
            if (!dim_eq(s->dims[r - n + i], len.v[i]) && s->dims[r - n + i] != 0 && len.v[i] != 0)
                return fail(c, "%s needs the innermost dimensions of %s to equal fft_length %s", ty,
                            sh(c, s), ints_text(c, len));
        return emit(c, out, copy_as(c, s, s->type));
    }
    if (strcmp(ty, "RFFT") == 0) {
        if (s->type != GS_F32 && s->type != GS_F64)
            return fail(c, "RFFT needs an f32 or f64 operand, not %s", sh(c, s));
        for (int i = 0; i < n; i++)
            if (!dim_eq(s->dims[r - n + i], len.v[i]))
                return fail(c, "RFFT needs the innermost dimensions of %s to equal fft_length %s",
                            sh(c, s), ints_text(c, len));
        if (len.v[n - 1] != 0) dims[r - 1] = len.v[n - 1] / 2 + 1;
        return emit(c, out, new_array(c, s->type == GS_F32 ? GS_C64 : GS_C128, r, dims, NULL));
    }
    if (strcmp(ty, "IRFFT") == 0) {
        if (!gs_type_is_complex(s->type))
            return fail(c, "IRFFT needs a complex operand, not %s", sh(c, s));
        for (int i = 0; i < n - 1; i++)
            if (!dim_eq(s->dims[r - n + i], len.v[i]))
                return fail(c,
                            "IRFFT needs the innermost dimensions of %s but the last to equal "
                            "fft_length %s",
                            sh(c, s), ints_text(c, len));
        int64_t last = s->dims[r - 1], want = len.v[n - 1] / 2 + 1;
        if ((last != 0 || len.v[n - 1] != 0) && !dim_eq(last, want))
            return fail(c, "IRFFT needs the last dimension of %s to be fft_length/2+1 = %lld",
                        sh(c, s), (long long)want);
        dims[r - 1] = len.v[n - 1];
        return emit(c, out, new_array(c, component_type(s->type), r, dims, NULL));
    }
    return fail(c, "fft_type %s is not one of FFT, IFFT, RFFT, IRFFT", ty);
}

gs_status gs_infer_cholesky(ictx *c, gs_shape **out) {
    const gs_shape *a = opnd(c, 0);
    if (!arr(a) || (!gs_type_is_float(a->type) && !gs_type_is_complex(a->type)))
        return fail(c, "operand must be a floating-point or complex array, not %s", sh(c, a));
    if (a->rank < 2 || !dim_eq(a->dims[a->rank - 1], a->dims[a->rank - 2]))
        return fail(c, "operand %s must have rank >= 2 and square minor dimensions", sh(c, a));
    return emit(c, out, copy_as(c, a, a->type));
}

gs_status gs_infer_triangular_solve(ictx *c, gs_shape **out) {
    const gs_shape *a = opnd(c, 0), *b = opnd(c, 1);
    if (!arr(a) || !arr(b) || a->type != b->type ||
        (!gs_type_is_float(a->type) && !gs_type_is_complex(a->type)))
        return fail(c,
                    "a and b must be floating-point or complex arrays of one type, not %s and "
                    "%s",
                    sh(c, a), sh(c, b));
    int r = a->rank;
    if (r < 2 || b->rank != r || !dim_eq(a->dims[r - 1], a->dims[r - 2]))
        return fail(c, "a %s must be square with rank >= 2, and b %s of the same rank", sh(c, a),
                    sh(c, b));
    bool left = gs_instr_bool(c->in, GS_ATTR_LEFT_SIDE, false);
    if (!dim_eq(a->dims[r - 1], b->dims[r - (left ? 2 : 1)]))
        return fail(c, "the shared dimension of a %s and b %s differs", sh(c, a), sh(c, b));
    for (int i = 0; i < r - 2; i++)
        if (!dim_eq(a->dims[i], b->dims[i]))
            return fail(c, "the batch dimensions of a %s and b %s differ", sh(c, a), sh(c, b));
    return emit(c, out, copy_as(c, b, b->type));
}

/* batch-norm-training (operand, scale, offset), -inference (operand, scale, offset, mean,
 * variance), -grad (operand, scale, mean, variance, grad_output). */
gs_status gs_infer_batch_norm(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    int64_t fi;
    if (!arr(s) || !gs_type_is_float(s->type) || s->rank < 1)
        return fail(c, "operand must be a floating-point array of rank >= 1, not %s", sh(c, s));
    if (need_int(c, GS_ATTR_FEATURE_INDEX, &fi) != GS_OK) return GS_ERR;
    if (fi < 0 || fi >= s->rank)
        return fail(c, "feature_index %lld is out of range for %s", (long long)fi, sh(c, s));
    int64_t nf = s->dims[fi];
    bool grad = c->in->op == GS_OP_BATCH_NORM_GRAD;
    for (int k = 1; k < c->in->n_operands; k++) {
        const gs_shape *v = opnd(c, k);
        bool is_grad_out = grad && k == 4;
        if (!arr(v) || !fp_eq(v->type, s->type))
            return fail(c, "operand %d must be a %s array, not %s", k, tn(s->type), sh(c, v));
        if (is_grad_out ? !gs_shape_dims_compatible(v, s) : v->rank != 1 || !dim_eq(v->dims[0], nf))
            return fail(c, "operand %d %s does not fit the %lld features of %s", k, sh(c, v),
                        (long long)nf, sh(c, s));
    }
    if (c->in->op == GS_OP_BATCH_NORM_INFERENCE) return emit(c, out, copy_as(c, s, s->type));
    const gs_shape *e[3] = {copy_as(c, s, s->type), new_array(c, s->type, 1, &nf, NULL), NULL};
    e[2] = e[1];
    if (!e[0] || !e[1]) return oom(c);
    return emit(c, out, new_tuple(c, 3, e));
}
