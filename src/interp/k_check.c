/*
 * src/interp/k_check.c — the StableHLO interpreter's check dialect, as custom-calls whose target
 * starts with `check.` (the MLIR reader, src/mlir/, turns `stablehlo.custom_call @check.X` and
 * `"check.X_const"` into them): each compares an actual value with an expected one and fails
 * the run with a located error naming the check and the first mismatching element.
 *
 * Tolerances (the stablehlo-translate --interpret reference): expect_close ULP distance <= 3
 * (NaNs equal, other non-finite values bitwise); expect_eq and expect_eq_const exact;
 * expect_almost_eq |a-e| <= 1e-3, expect_almost_eq_const 1e-4; check.eq (expected, actual) exact
 * for integers, 1e-4 for floats; complex values per component.
 */
#include "interp/kernels.h"

#include "gspmd/numeric.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum check_kind { CHECK_EXACT, CHECK_ULP, CHECK_ABS } check_kind;

/* The bits of element i of a float array of element size es, as an integer ordered like the
 * floats (negative values below positive ones). */
static int64_t ordered_bits(const void *data, int es, int64_t i) {
    uint64_t bits = 0;
    memcpy(&bits, (const char *)data + (size_t)i * (size_t)es, (size_t)es);
    uint64_t sign = (uint64_t)1 << (es * 8 - 1);
    int64_t mag = (int64_t)(bits & (sign - 1));
    return (bits & sign) ? -mag : mag;
}

/* Do element i of a and e (float type t of element size es) agree under kind? */
static bool float_agrees(const void *a, const void *e, gs_type t, int es, int64_t i,
                         check_kind kind, double tol) {
    double x = gs_elem_get_f(a, t, i), y = gs_elem_get_f(e, t, i);
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
    if (isinf(x) || isinf(y)) return x == y;
    if (kind == CHECK_EXACT) return x == y;
    if (kind == CHECK_ABS) return fabs(x - y) <= tol;
    int64_t d = ordered_bits(a, es, i) - ordered_bits(e, es, i);
    return (d < 0 ? -d : d) <= 3;
}

/* "[i, j]" of flat index k in dims. */
static void index_text(char *buf, size_t n, const gs_value *v, int64_t k) {
    int64_t idx[GS_MAX_RANK];
    for (int d = v->rank - 1; d >= 0; d--) {
        idx[d] = v->dims[d] ? k % v->dims[d] : 0;
        k = v->dims[d] ? k / v->dims[d] : 0;
    }
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < v->rank && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

/* The text of element k of v. */
static void elem_text(char *buf, size_t n, const gs_value *v, int64_t k) {
    if (gs_type_is_complex(v->type)) {
        double re, im;
        gs_elem_get_c(v->data, v->type, k, &re, &im);
        snprintf(buf, n, "(%.9g, %.9g)", re, im);
    } else if (gs_type_is_float(v->type)) {
        snprintf(buf, n, "%.9g", gs_elem_get_f(v->data, v->type, k));
    } else if (gs_type_is_unsigned_int(v->type)) {
        snprintf(buf, n, "%llu", (unsigned long long)gs_elem_get_i(v->data, v->type, k));
    } else {
        snprintf(buf, n, "%lld", (long long)gs_elem_get_i(v->data, v->type, k));
    }
}

gs_status gs_eval_check(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const char *target = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
    const char *name = target + 6;
    check_kind kind;
    double tol = 0;
    bool swapped = false; /* check.eq takes (expected, actual) */
    if (strcmp(name, "expect_eq") == 0 || strcmp(name, "expect_eq_const") == 0) {
        kind = CHECK_EXACT;
    } else if (strcmp(name, "expect_close") == 0) {
        kind = CHECK_ULP;
    } else if (strcmp(name, "expect_almost_eq") == 0) {
        kind = CHECK_ABS;
        tol = 1e-3;
    } else if (strcmp(name, "expect_almost_eq_const") == 0) {
        kind = CHECK_ABS;
        tol = 1e-4;
    } else if (strcmp(name, "eq") == 0) {
        kind = CHECK_ABS;
        tol = 1e-4;
        swapped = true;
    } else {
        return gs_eval_error(ev, in, "unknown check '%s'", target);
    }
    if (in->n_operands != 2) return gs_eval_error(ev, in, "%s needs two operands", target);
    const gs_value *a = ops[swapped ? 1 : 0], *e = ops[swapped ? 0 : 1];
    if (a->type == GS_TUPLE || a->type == GS_TOKEN || a->type != e->type || a->rank != e->rank ||
        memcmp(a->dims, e->dims, sizeof a->dims[0] * (size_t)a->rank) != 0) {
        char sa[64], se[64];
        gs_value_shape_str(a, sa, sizeof sa);
        gs_value_shape_str(e, se, sizeof se);
        return gs_eval_error(ev, in, "%s: the actual value is %s, the expected one %s", target, sa,
                             se);
    }
    bool cplx = gs_type_is_complex(a->type);
    gs_type t = cplx ? (a->type == GS_C64 ? GS_F32 : GS_F64) : a->type;
    int es = gs_type_size(t);
    int64_t n = cplx ? 2 * a->n : a->n;
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        if (gs_type_is_float(t))
            ok = float_agrees(a->data, e->data, t, es, i, kind, tol);
        else
            ok = gs_elem_get_i(a->data, t, i) == gs_elem_get_i(e->data, t, i);
        if (ok) continue;
        int64_t k = cplx ? i / 2 : i;
        char where[256], va[96], ve[96];
        index_text(where, sizeof where, a, k);
        elem_text(va, sizeof va, a, k);
        elem_text(ve, sizeof ve, e, k);
        return gs_eval_error(ev, in, "%s failed: element %s is %s, expected %s", target, where, va,
                             ve);
    }
    if (gs_shape_is_array(in->shape)) { /* check.eq's i1 result */
        gs_value *v = gs_eval_new_result(ev, in);
        if (!v) return GS_ERR;
        for (int64_t i = 0; i < v->n; i++) gs_elem_set_i(v->data, v->type, i, 1);
        *out = v;
        return GS_OK;
    }
    *out = gs_value_new_tuple(0, NULL);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}
