/*
 * verify.c — does a partitioned program compute what the unpartitioned module computes?
 *
 * The reference interpreter runs the module on the same global inputs, bounding the rounding
 * error of every float element it computes (gs_interp_eval_bounded, src/interp/bounds.c), and
 * each output leaf of the partitioned run is compared element by element:
 *   integers, predicates   exactly;
 *   real floats            |got - want| <= GS_VERIFY_MARGIN * bound of that element: data
 *                          that was only moved must arrive exactly (bound 0), and a sum done in
 *                          another order may differ by its rounding, however much it cancels;
 *                          NaN must meet NaN and infinities must match;
 *   complex                normwise, within 1e-5 of the reference's largest magnitude (their
 *                          bounds are not tracked).
 * `gspmd run --verify`, the partition property test and the library share this one check.
 */
#include "internal.h"
#include "base/sysalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool same_shape(const gs_value *got, const gs_value *want) {
    if (got->type != want->type || got->rank != want->rank) return false;
    for (int i = 0; i < got->rank; i++)
        if (got->dims[i] != want->dims[i]) return false;
    return true;
}

/* Complex leaves: the largest difference of a part over the reference's largest magnitude. */
static void check_complex(const gs_value *got, const gs_value *want, gs_leaf_check *c) {
    double scale = 0, diff = 0;
    bool mismatch = false;
    for (int64_t i = 0; i < want->n; i++) {
        double g[2], w[2];
        gs_elem_get_c(got->data, got->type, i, &g[0], &g[1]);
        gs_elem_get_c(want->data, want->type, i, &w[0], &w[1]);
        for (int k = 0; k < 2; k++) {
            if (isnan(w[k]) || isnan(g[k]) || isinf(w[k]) || isinf(g[k])) {
                bool same = (isnan(w[k]) && isnan(g[k])) || w[k] == g[k];
                if (!same && !mismatch) {
                    mismatch = true;
                    c->worst = i;
                }
                continue;
            }
            scale = fmax(scale, fabs(w[k]));
            if (fabs(g[k] - w[k]) > diff) {
                diff = fabs(g[k] - w[k]);
                if (!mismatch) c->worst = i;
            }
        }
    }
    c->limit = 1e-5;
    c->error = mismatch ? INFINITY : diff == 0 ? 0 : diff / (scale > 0 ? scale : 1e-300);
}

static bool check_array(const gs_value *got, const gs_value *want, const gs_value *bound,
                        gs_leaf_check *c);

/* Part d of a bundle, or v itself. */
static const gs_value *part(const gs_value *v, int d) {
    return v && v->devices > 0 && d < v->n_tuple ? v->tuple[d] : v;
}

bool gs_check_leaf(const gs_value *got, const gs_value *want, const gs_value *bound,
                   gs_leaf_check *c) {
    int n = got->devices > 0 ? got->devices : want->devices;
    if (n == 0) return check_array(got, want, bound, c);
    /* Manual values: device by device (a value with no bundle stands for every device). */
    if ((got->devices > 0 && got->devices != n) || (want->devices > 0 && want->devices != n)) {
        memset(c, 0, sizeof *c);
        c->worst = c->device = -1;
        return c->ok = false;
    }
    for (int d = 0; d < n; d++) {
        gs_leaf_check cd;
        check_array(part(got, d), part(want, d), part(bound, d), &cd);
        cd.device = d;
        if (d == 0 || (c->ok && (!cd.ok || cd.error > c->error))) *c = cd;
    }
    return c->ok;
}

static bool check_array(const gs_value *got, const gs_value *want, const gs_value *bound,
                        gs_leaf_check *c) {
    memset(c, 0, sizeof *c);
    c->device = -1;
    c->worst = -1;
    c->shape_ok = same_shape(got, want);
    if (!c->shape_ok) return c->ok = false;
    gs_type t = want->type;
    if (gs_type_is_complex(t)) {
        check_complex(got, want, c);
    } else if (!gs_type_is_float(t)) {
        c->exact = true;
        for (int64_t i = 0; i < want->n; i++)
            if (gs_elem_get_i(got->data, t, i) != gs_elem_get_i(want->data, t, i)) {
                if (c->worst < 0) c->worst = i;
                c->error++;
            }
    } else {
        bool have_bound = bound && same_shape(bound, want);
        c->limit = GS_VERIFY_MARGIN;
        for (int64_t i = 0; i < want->n; i++) {
            double g = gs_elem_get_f(got->data, t, i), w = gs_elem_get_f(want->data, t, i);
            double b = have_bound ? gs_elem_get_f(bound->data, t, i) : 0, e;
            if (isnan(g) || isnan(w) || isinf(g) || isinf(w))
                e = (isnan(g) && isnan(w)) || g == w ? 0 : INFINITY;
            else if (g == w || isnan(b) || isinf(b))
                e = 0; /* equal, or no bound: nothing to check */
            else
                e = b > 0 ? fabs(g - w) / b : INFINITY;
            if (e > c->error || (c->worst < 0 && e > 0)) {
                c->error = e;
                c->worst = i;
                c->got = g;
                c->want = w;
                c->bound = b;
            }
        }
    }
    c->ok = c->error <= c->limit;
    return c->ok;
}

gs_status gs_verify_outputs(const gs_module *m, gs_value *const *args, int n_args, uint64_t seed,
                            int n_devices, gs_value *got, gs_leaf_check **checks, int *n_checks,
                            bool *all_ok, gs_diags *d) {
    *checks = NULL;
    *n_checks = 0;
    *all_ok = false;
    gs_collectives manual = {NULL, (void *)m, gs_collective_execute_bundle, NULL};
    gs_interp_env env = {0, 0, 1, &manual, seed, NULL, NULL, n_devices, NULL};
    gs_value *want = NULL, *bound = NULL;
    if (gs_interp_eval_bounded(m, &env, args, n_args, &want, &bound, d) != GS_OK) return GS_ERR;
    gs_value **g = NULL, **w = NULL, **b = NULL;
    int ng = 0, nw = 0, nb = 0;
    gs_status st = GS_OK;
    /* Manual outputs are bundles; the reference's per-device tuples become tuples of them. */
    gs_value *gl = gs_value_bundles_to_leaves(got), *wl = gs_value_bundles_to_leaves(want),
             *bl = gs_value_bundles_to_leaves(bound);
    gs_value_free(want);
    gs_value_free(bound);
    want = wl;
    bound = bl;
    if (!gl || !wl || !bl || gs_value_leaves(gl, &g, &ng) != GS_OK ||
        gs_value_leaves(want, &w, &nw) != GS_OK || gs_value_leaves(bound, &b, &nb) != GS_OK)
        st = gs_error(d, gs_span_none(), "out of memory");
    else if (ng != nw || nb != nw)
        st = gs_error(d, gs_span_none(), "the partitioned program has %d outputs, the module %d",
                      ng, nw);
    gs_leaf_check *c = st == GS_OK ? gs_sys_calloc((size_t)(nw ? nw : 1), sizeof *c) : NULL;
    if (st == GS_OK && !c) st = gs_error(d, gs_span_none(), "out of memory");
    bool ok = true;
    for (int i = 0; st == GS_OK && i < nw; i++) {
        if (w[i]->type == GS_TOKEN) {
            c[i].shape_ok = c[i].ok = c[i].exact = true;
            c[i].worst = c[i].device = -1;
            continue;
        }
        ok = gs_check_leaf(g[i], w[i], b[i], &c[i]) && ok;
    }
    free(g);
    free(w);
    free(b);
    if (gl) gs_value_free(gl);
    gs_value_free(want);
    gs_value_free(bound);
    if (st != GS_OK) {
        free(c);
        return st;
    }
    *checks = c;
    *n_checks = nw;
    *all_ok = ok;
    return GS_OK;
}
