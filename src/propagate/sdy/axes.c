/*
 * axes.c — axis refs and axis lists as Shardy compares them: whole axes and sub-axes
 * (`"x":(pre)size`), containment, prefixes, overlap, and merging consecutive sub-axes.
 */
#include "internal.h"

int64_t sdy_gcd(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a < 0 ? -a : a;
}

int64_t sdy_pre(const gs_axis_ref *a) { return a->pre_size ? a->pre_size : 1; }

int64_t sdy_next_pre(const gs_axis_ref *a) { return sdy_pre(a) * a->size; }

bool sdy_axis_eq(const gs_axis_ref *a, const gs_axis_ref *b) {
    return a->axis == b->axis && a->pre_size == b->pre_size && (a->pre_size == 0 || a->size == b->size);
}

bool sdy_contains(const gs_axis_ref *a, const gs_axis_ref *b) {
    if (a->axis != b->axis) return false;
    if (!a->pre_size) return true;
    if (!b->pre_size) return false;
    return sdy_pre(a) <= sdy_pre(b) && sdy_next_pre(a) >= sdy_next_pre(b);
}

bool sdy_prefix_of(const gs_axis_ref *a, const gs_axis_ref *b) {
    return sdy_contains(b, a) && sdy_pre(a) == sdy_pre(b);
}

bool sdy_overlaps(const gs_axis_ref *a, const gs_axis_ref *b) {
    if (a->axis != b->axis) return false;
    if (!a->pre_size || !b->pre_size) return true;
    return sdy_pre(a) < sdy_next_pre(b) && sdy_pre(b) < sdy_next_pre(a);
}

static bool sub_axes_coexist(int64_t min_pre, int64_t max_pre, int64_t min_next,
                             int64_t max_next) {
    if (min_next > max_pre)
        return min_next % max_pre == 0 && max_pre % min_pre == 0 && max_next % min_next == 0;
    return max_pre % min_next == 0;
}

bool sdy_can_coexist(const gs_axis_ref *a, const gs_axis_ref *b) {
    if (a->axis != b->axis || !a->pre_size || !b->pre_size) return true;
    int64_t pa = sdy_pre(a), pb = sdy_pre(b), na = sdy_next_pre(a), nb = sdy_next_pre(b);
    return sub_axes_coexist(pa < pb ? pa : pb, pa < pb ? pb : pa, na < nb ? na : nb,
                            na < nb ? nb : na);
}

/* A sub-axis ref (pre, size) of a's axis; whole when it covers the axis (size known from a). */
static gs_axis_ref sub(const gs_axis_ref *a, int64_t pre, int64_t size) {
    gs_axis_ref r = {a->axis, pre, size};
    return r;
}

bool sdy_prefix_without_overlap(const gs_axis_ref *a, const gs_axis_ref *b, gs_axis_ref *out) {
    if (!sdy_can_coexist(a, b)) return false;
    if (!sdy_overlaps(a, b)) {
        *out = *a;
        return true;
    }
    int64_t pa = sdy_pre(a), pb = sdy_pre(b);
    if (pa >= pb) return false;
    *out = sub(a, pa, pb / pa);
    return true;
}

bool sdy_prefix_without_overlap_list(const gs_axis_ref *a, const sdy_axes *list,
                                     gs_axis_ref *out) {
    gs_axis_ref r = *a;
    for (int i = 0; i < list->n; i++)
        if (!sdy_prefix_without_overlap(&r, &list->v[i], &r)) return false;
    *out = r;
    return true;
}

bool sdy_common_prefix(const gs_axis_ref *a, const gs_axis_ref *b, gs_axis_ref *out) {
    if (!sdy_can_coexist(a, b)) return false;
    if (sdy_prefix_of(a, b)) {
        *out = *a;
        return true;
    }
    if (sdy_prefix_of(b, a)) {
        *out = *b;
        return true;
    }
    return false;
}

gs_axis_ref sdy_make_axis(const gs_mesh *m, int axis, int64_t pre, int64_t size) {
    gs_axis_ref r = {axis, pre, size};
    if (pre <= 1 && size == m->sizes[axis]) r.pre_size = 0;
    else if (pre < 1) r.pre_size = 1;
    return r;
}

void sdy_push(sdy_axes *l, const gs_axis_ref *a) {
    if (l->n < SDY_MAX_AXES) l->v[l->n++] = *a;
}

void sdy_add_or_merge(sdy_axes *l, const gs_axis_ref *a, const gs_mesh *m) {
    if (l->n) {
        gs_axis_ref *last = &l->v[l->n - 1];
        if (last->axis == a->axis && last->pre_size && a->pre_size &&
            sdy_next_pre(last) == sdy_pre(a)) {
            *last = sdy_make_axis(m, a->axis, sdy_pre(last), last->size * a->size);
            return;
        }
    }
    sdy_push(l, a);
}

bool sdy_axes_eq(const sdy_axes *x, const sdy_axes *y) {
    if (x->n != y->n) return false;
    for (int i = 0; i < x->n; i++)
        if (!sdy_axis_eq(&x->v[i], &y->v[i])) return false;
    return true;
}

void sdy_axes_common_prefix(const sdy_axes *x, const sdy_axes *y, sdy_axes *out) {
    sdy_axes r = {0};
    int n = x->n < y->n ? x->n : y->n;
    for (int i = 0; i < n; i++) {
        if (sdy_axis_eq(&x->v[i], &y->v[i])) {
            sdy_push(&r, &x->v[i]);
            continue;
        }
        gs_axis_ref p;
        if (sdy_common_prefix(&x->v[i], &y->v[i], &p)) sdy_push(&r, &p);
        break;
    }
    *out = r;
}

bool sdy_axes_strict_prefix(const sdy_axes *x, const sdy_axes *y) {
    if (x->n == 0) return y->n > 0;
    if (x->n > y->n) return false;
    for (int i = 0; i + 1 < x->n; i++)
        if (!sdy_axis_eq(&x->v[i], &y->v[i])) return false;
    const gs_axis_ref *a = &x->v[x->n - 1], *b = &y->v[x->n - 1];
    if (x->n == y->n && sdy_axis_eq(a, b)) return false;
    if (sdy_axis_eq(a, b)) return true; /* x shorter, same up to its end */
    return sdy_prefix_of(a, b);
}

int64_t sdy_axes_size(const sdy_axes *l) {
    int64_t s = 1;
    for (int i = 0; i < l->n; i++) s *= l->v[i].size;
    return s;
}

void sdy_axes_from_list(sdy_axes *out, const gs_axis_list *l) {
    out->n = 0;
    for (int i = 0; i < l->n; i++) sdy_push(out, &l->v[i]);
}

bool sdy_sharding_eq(const sdy_sharding *a, const sdy_sharding *b) {
    if (a->mesh != b->mesh || a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d].closed != b->dims[d].closed ||
            a->dims[d].priority != b->dims[d].priority ||
            !sdy_axes_eq(&a->dims[d].axes, &b->dims[d].axes))
            return false;
    return sdy_axes_eq(&a->replicated, &b->replicated) &&
           sdy_axes_eq(&a->unreduced, &b->unreduced) && sdy_axes_eq(&a->manual, &b->manual);
}

bool sdy_sharding_empty_axes(const sdy_sharding *s) {
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d].axes.n) return false;
    return s->replicated.n == 0 && s->unreduced.n == 0;
}
