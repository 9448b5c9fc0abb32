/*
 * reduce.c — elementwise reductions of device buffers for the communicators: dst = dst op src
 * over n elements of any array type, with XLA's per-type semantics (narrow floats round after
 * each op; integers wrap; max/min propagate NaN; pred and/or/xor are logical).
 */
#include "internal.h"

#include <math.h>
#include <string.h>

static double fop(gs_reduce_op op, double a, double b) {
    switch (op) {
    case GS_RED_SUM: return a + b;
    case GS_RED_PROD: return a * b;
    case GS_RED_MIN: return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b);
    case GS_RED_MAX: return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b);
    default: return NAN;
    }
}

static int64_t iop(gs_reduce_op op, int64_t a, int64_t b, bool is_unsigned) {
    switch (op) {
    case GS_RED_SUM: return (int64_t)((uint64_t)a + (uint64_t)b);
    case GS_RED_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
    case GS_RED_MIN:
        return is_unsigned ? ((uint64_t)a < (uint64_t)b ? a : b) : (a < b ? a : b);
    case GS_RED_MAX:
        return is_unsigned ? ((uint64_t)a > (uint64_t)b ? a : b) : (a > b ? a : b);
    case GS_RED_AND: return a & b;
    case GS_RED_OR: return a | b;
    case GS_RED_XOR: return a ^ b;
    default: return 0;
    }
}

void gs_reduce_into(gs_type t, gs_reduce_op op, void *dst, const void *src, int64_t n) {
    if (t == GS_F32) {
        float *restrict x = dst;
        const float *restrict y = src;
        switch (op) {
        case GS_RED_SUM: for (int64_t i = 0; i < n; i++) x[i] += y[i]; return;
        case GS_RED_PROD: for (int64_t i = 0; i < n; i++) x[i] *= y[i]; return;
        default: for (int64_t i = 0; i < n; i++) x[i] = (float)fop(op, x[i], y[i]); return;
        }
    }
    if (t == GS_F64) {
        double *x = dst;
        const double *y = src;
        for (int64_t i = 0; i < n; i++) x[i] = op == GS_RED_SUM ? x[i] + y[i] : fop(op, x[i], y[i]);
        return;
    }
    if (gs_type_is_complex(t)) {
        for (int64_t i = 0; i < n; i++) {
            double ar, ai, br, bi;
            gs_elem_get_c(dst, t, i, &ar, &ai);
            gs_elem_get_c(src, t, i, &br, &bi);
            if (op == GS_RED_PROD)
                gs_elem_set_c(dst, t, i, ar * br - ai * bi, ar * bi + ai * br);
            else
                gs_elem_set_c(dst, t, i, ar + br, ai + bi);
        }
        return;
    }
    if (gs_type_is_float(t)) {
        /* f16, bf16, f8: compute in float, round once per op */
        for (int64_t i = 0; i < n; i++) {
            float a = (float)gs_elem_get_f(dst, t, i), b = (float)gs_elem_get_f(src, t, i);
            float r = op == GS_RED_SUM ? a + b : op == GS_RED_PROD ? a * b : (float)fop(op, a, b);
            gs_elem_set_f(dst, t, i, r);
        }
        return;
    }
    if (t == GS_PRED) {
        unsigned char *x = dst;
        const unsigned char *y = src;
        for (int64_t i = 0; i < n; i++) {
            bool a = x[i] != 0, b = y[i] != 0, r;
            switch (op) {
            case GS_RED_AND: case GS_RED_MIN: case GS_RED_PROD: r = a && b; break;
            case GS_RED_OR: case GS_RED_MAX: case GS_RED_SUM: r = a || b; break;
            case GS_RED_XOR: r = a != b; break;
            default: r = false; break;
            }
            x[i] = r;
        }
        return;
    }
    bool u = gs_type_is_unsigned_int(t);
    for (int64_t i = 0; i < n; i++)
        gs_elem_set_i(dst, t, i, iop(op, gs_elem_get_i(dst, t, i), gs_elem_get_i(src, t, i), u));
}

gs_reduce_op gs_reduce_op_of(const gs_computation *c) {
    gs_opcode op;
    if (!c || !gs_comp_simple_binary(c, &op)) return GS_RED_NONE;
    switch (op) {
    case GS_OP_ADD: return GS_RED_SUM;
    case GS_OP_MULTIPLY: return GS_RED_PROD;
    case GS_OP_MINIMUM: return GS_RED_MIN;
    case GS_OP_MAXIMUM: return GS_RED_MAX;
    case GS_OP_AND: return GS_RED_AND;
    case GS_OP_OR: return GS_RED_OR;
    case GS_OP_XOR: return GS_RED_XOR;
    default: return GS_RED_NONE;
    }
}

void gs_reduce_pair(gs_type t, gs_reduce_op op, void *dst, const void *a, const void *b, int64_t n) {
    if (t == GS_F32 && op == GS_RED_SUM) {
        float *restrict x = dst;
        const float *restrict p = a, *restrict q = b;
        for (int64_t i = 0; i < n; i++) x[i] = p[i] + q[i];
        return;
    }
    memcpy(dst, a, (size_t)(n * gs_type_size(t)));
    gs_reduce_into(t, op, dst, b, n);
}
