/*
 * k_shape.c — kernels of the data-movement ops: broadcast, reshape, bitcast, transpose, reverse,
 * slice, dynamic-slice, dynamic-update-slice, concatenate, pad, gather and scatter.
 *
 * All but scatter reduce to one primitive, copy_box: it moves an n-dimensional box of elements
 * between two buffers, each side described by a start offset and a stride per dim (a source
 * stride is 0 for broadcast dims and negative for reversed ones). Before touching memory it
 * checks that the box lies inside both buffers, so a kernel whose attributes disagree with its
 * shapes fails with an error instead of reading or writing out of bounds. Dims that are
 * contiguous on both sides are merged, so the inner loop is one memcpy where the layout allows.
 *
 * Index semantics are XLA's. dynamic-slice, dynamic-update-slice and gather clamp each start
 * index so that the slice stays inside the operand; scatter skips an update window that would
 * leave the operand in any dim. Start indices may have any integer type (unsigned values above
 * INT64_MAX count as INT64_MAX). index_vector_dim equal to the rank of the indices means an
 * implicit trailing dim of size 1. Scatter applies to_apply in a fixed order, that of XLA's
 * evaluator: scatter positions in row-major order, and within a window its elements in
 * row-major order.
 */
#include "kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ strided boxes */

/* An n-dimensional box of elements and where it lies in a destination and a source buffer. */
typedef struct box {
    int rank;                  /* number of dims */
    int64_t dims[GS_MAX_RANK]; /* extent per dim (>= 0) */
    int64_t dst[GS_MAX_RANK];  /* destination stride per dim, in elements */
    int64_t src[GS_MAX_RANK];  /* source stride per dim (0: broadcast, < 0: reversed) */
} box;

/* Is any dim of the box empty? */
static bool box_empty(const box *b) {
    for (int d = 0; d < b->rank; d++)
        if (b->dims[d] <= 0) return true;
    return false;
}

/* Does off + sum(i_d * stride_d) stay in [0, n) for every index of the (non-empty) box? */
static bool box_fits(const box *b, const int64_t *stride, int64_t off, int64_t n) {
    int64_t lo = off, hi = off;
    for (int d = 0; d < b->rank; d++) {
        int64_t ext = (b->dims[d] - 1) * stride[d];
        if (ext < 0)
            lo += ext;
        else
            hi += ext;
    }
    return lo >= 0 && hi < n;
}

/* Advances multi-index idx over the first `rank` dims of b (row-major), moving the offsets along;
 * returns false (offsets and idx back at the start) after the last index. */
static bool box_next(const box *b, int rank, int64_t *idx, int64_t *doff, int64_t *soff) {
    for (int d = rank - 1; d >= 0; d--) {
        *doff += b->dst[d];
        *soff += b->src[d];
        if (++idx[d] < b->dims[d]) return true;
        *doff -= b->dst[d] * b->dims[d];
        *soff -= b->src[d] * b->dims[d];
        idx[d] = 0;
    }
    return false;
}

/* Copies n elements of es bytes, t[i * ts] = s[i * ss]; constant sizes let memcpy inline. */
static void copy_run(unsigned char *t, int64_t ts, const unsigned char *s, int64_t ss, int64_t n,
                     int es) {
    if (ts == 1 && ss == 1) {
        memcpy(t, s, (size_t)(n * es));
        return;
    }
#define RUN(SZ)                                                                                    \
    for (int64_t i = 0; i < n; i++) memcpy(t + i * ts * (SZ), s + i * ss * (SZ), (SZ));            \
    return;
    switch (es) {
    case 1: RUN(1)
    case 2: RUN(2)
    case 4: RUN(4)
    case 8: RUN(8)
    case 16: RUN(16)
    default: RUN(es)
    }
#undef RUN
}

/* Copies box b0 from src (n_src elements of es bytes, box origin at element soff) into dst
 * (n_dst elements, origin doff). Returns false, copying nothing, when the box would leave
 * either buffer; an empty box copies nothing and succeeds. */
static bool copy_box(void *dst, int64_t doff, int64_t n_dst, const void *src, int64_t soff,
                     int64_t n_src, const box *b0, int es) {
    if (box_empty(b0)) return true;
    /* Drop unit dims and merge a dim into the one outside it when both sides are contiguous. */
    box b;
    b.rank = 0;
    for (int d = 0; d < b0->rank; d++) {
        if (b0->dims[d] == 1) continue;
        int k = b.rank - 1;
        if (k >= 0 && b.dst[k] == b0->dst[d] * b0->dims[d] &&
            b.src[k] == b0->src[d] * b0->dims[d]) {
            b.dims[k] *= b0->dims[d];
            b.dst[k] = b0->dst[d];
            b.src[k] = b0->src[d];
            continue;
        }
        b.dims[b.rank] = b0->dims[d];
        b.dst[b.rank] = b0->dst[d];
        b.src[b.rank] = b0->src[d];
        b.rank++;
    }
    if (!box_fits(&b, b.dst, doff, n_dst) || !box_fits(&b, b.src, soff, n_src)) return false;
    unsigned char *t = dst;
    const unsigned char *s = src;
    if (b.rank == 0) {
        memcpy(t + doff * es, s + soff * es, (size_t)es);
        return true;
    }
    int inner = b.rank - 1;
    int64_t idx[GS_MAX_RANK] = {0};
    do {
        copy_run(t + doff * es, b.dst[inner], s + soff * es, b.src[inner], b.dims[inner], es);
    } while (box_next(&b, inner, idx, &doff, &soff));
    return true;
}

/* Fills n elements of dst with the element at elem (es bytes), doubling the filled prefix. */
static void fill_elems(void *dst, int64_t n, const void *elem, int es) {
    if (n <= 0) return;
    unsigned char *t = dst;
    memcpy(t, elem, (size_t)es);
    int64_t done = 1;
    while (done < n) {
        int64_t c = done < n - done ? done : n - done;
        memcpy(t + done * es, t, (size_t)(c * es));
        done += c;
    }
}

/* ------------------------------------------------------------------ common checks */

/* Checks that in's result is an array (of element type `type` unless GS_INVALID_TYPE). */
static gs_status check_result(gs_eval *ev, const gs_instr *in, gs_type type) {
    const gs_shape *s = in->shape;
    if (!s || !gs_shape_is_array(s) || s->rank > GS_MAX_RANK)
        return gs_eval_error(ev, in, "the result is not an array of rank <= %d", GS_MAX_RANK);
    if (type != GS_INVALID_TYPE && s->type != type)
        return gs_eval_error(ev, in, "the result type %s differs from the operand type %s",
                             gs_type_name(s->type), gs_type_name(type));
    return GS_OK;
}

/* Checks that operands [0, n) are arrays. */
static gs_status check_arrays(gs_eval *ev, const gs_instr *in, gs_value *const *ops, int n) {
    for (int k = 0; k < n; k++)
        if (!gs_type_is_array(ops[k]->type))
            return gs_eval_error(ev, in, "operand %d is not an array", k);
    return GS_OK;
}

/* Checks that the result's dims equal dims[0, rank). */
static gs_status check_result_dims(gs_eval *ev, const gs_instr *in, int rank,
                                   const int64_t *dims) {
    bool same = in->shape->rank == rank;
    for (int d = 0; same && d < rank; d++) same = in->shape->dims[d] == dims[d];
    if (!same) {
        char want[128];
        gs_value tmp = {.type = in->shape->type, .rank = rank};
        for (int d = 0; d < rank; d++) tmp.dims[d] = dims[d];
        gs_value_shape_str(&tmp, want, sizeof want);
        return gs_eval_error(ev, in, "the operands and attributes give %s, the result differs",
                             want);
    }
    return GS_OK;
}

/* Reports that a copy would leave its buffer (shapes and attributes disagree); frees r. */
static gs_status box_error(gs_eval *ev, const gs_instr *in, gs_value *r) {
    gs_value_free(r);
    return gs_eval_error(ev, in, "internal: a copy would leave its buffer (the attributes "
                                 "disagree with the shapes)");
}

/* Marks the dims listed in l in seen[0, rank); false when one is out of range or repeated. */
static bool mark_dims(gs_ints l, int rank, bool *seen) {
    for (int i = 0; i < l.n; i++) {
        if (l.v[i] < 0 || l.v[i] >= rank || seen[l.v[i]]) return false;
        seen[l.v[i]] = true;
    }
    return true;
}

/* Element i of an index array as int64 (unsigned values beyond INT64_MAX saturate). */
static int64_t read_index(const gs_value *v, int64_t i) {
    int64_t x = gs_elem_get_i(v->data, v->type, i);
    if (x < 0 && gs_type_is_unsigned_int(v->type)) return INT64_MAX;
    return x;
}

/* x clamped to [lo, hi] (lo <= hi). */
static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* Reads `rank` start indices of a dynamic slice: one per scalar operand, or (XLA's older form)
 * all from a single rank-1 operand. */
static gs_status read_starts(gs_eval *ev, const gs_instr *in, gs_value *const *idx, int n,
                             int rank, int64_t *starts) {
    for (int k = 0; k < n; k++)
        if (!gs_type_is_int(idx[k]->type))
            return gs_eval_error(ev, in, "start index %d has type %s, not an integer type", k,
                                 gs_type_name(idx[k]->type));
    bool scalars = n == rank;
    for (int k = 0; scalars && k < n; k++) scalars = idx[k]->rank == 0;
    if (scalars) {
        for (int k = 0; k < n; k++) starts[k] = read_index(idx[k], 0);
        return GS_OK;
    }
    if (n == 1 && idx[0]->rank == 1 && idx[0]->n == rank) {
        for (int k = 0; k < rank; k++) starts[k] = read_index(idx[0], k);
        return GS_OK;
    }
    return gs_eval_error(ev, in, "expected %d scalar start indices (or one rank-1 array of "
                                 "%d), got %d operands", rank, rank, n);
}

/* ------------------------------------------------------------------ broadcast, reshape */

/* broadcast: operand dim i becomes result dim dimensions[i]; other result dims repeat. */
/* dst[0..n) = the element at x (esz bytes: 1, 2, 4 or 8), in one loop per size. */
static void fill(void *dst, int64_t n, const void *x, int esz) {
    switch (esz) {
    case 1: memset(dst, *(const unsigned char *)x, (size_t)n); return;
    case 2: {
        uint16_t v, *z = dst;
        memcpy(&v, x, 2);
        for (int64_t i = 0; i < n; i++) z[i] = v;
        return;
    }
    case 4: {
        uint32_t v, *z = dst;
        memcpy(&v, x, 4);
        for (int64_t i = 0; i < n; i++) z[i] = v;
        return;
    }
    default: {
        uint64_t v, *z = dst;
        memcpy(&v, x, 8);
        for (int64_t i = 0; i < n; i++) z[i] = v;
        return;
    }
    }
}

static gs_status k_broadcast(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                             gs_value **out) {
    const gs_value *a = ops[0];
    if (check_arrays(ev, in, ops, 1) || check_result(ev, in, a->type)) return GS_ERR;
    gs_ints map = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    const gs_shape *s = in->shape;
    if (map.n != a->rank)
        return gs_eval_error(ev, in, "dimensions= has %d entries, the operand has rank %d", map.n,
                             a->rank);
    bool seen[GS_MAX_RANK] = {false};
    if (!mark_dims(map, s->rank, seen))
        return gs_eval_error(ev, in, "dimensions= lists a result dim twice or out of range");
    int64_t as[GS_MAX_RANK], rs[GS_MAX_RANK];
    gs_strides(a->rank, a->dims, as);
    gs_strides(s->rank, s->dims, rs);
    box b = {.rank = s->rank};
    for (int d = 0; d < s->rank; d++) {
        b.dims[d] = s->dims[d];
        b.dst[d] = rs[d];
        b.src[d] = 0;
    }
    for (int i = 0; i < a->rank; i++) {
        if (a->dims[i] != s->dims[map.v[i]])
            return gs_eval_error(ev, in, "operand dim %d (%lld) differs from result dim %lld "
                                 "(%lld)", i, (long long)a->dims[i], (long long)map.v[i],
                                 (long long)s->dims[map.v[i]]);
        b.src[map.v[i]] = as[i];
    }
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    int esz = gs_type_size(a->type);
    if (a->n == 1 && (esz == 1 || esz == 2 || esz == 4 || esz == 8)) { /* a scalar: one fill */
        fill(r->data, r->n, a->data, esz);
        *out = r;
        return GS_OK;
    }
    if (!copy_box(r->data, 0, r->n, a->data, 0, a->n, &b, esz)) return box_error(ev, in, r);
    *out = r;
    return GS_OK;
}

/* reshape and bitcast: the same row-major bytes under new dims (bitcast may change the type). */
static gs_status k_reshape(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                           gs_value **out) {
    const gs_value *a = ops[0];
    bool bitcast = in->op == GS_OP_BITCAST;
    if (check_arrays(ev, in, ops, 1) ||
        check_result(ev, in, bitcast ? GS_INVALID_TYPE : a->type))
        return GS_ERR;
    int64_t bytes = gs_shape_bytes(in->shape);
    if (bytes != (int64_t)gs_value_bytes(a))
        return gs_eval_error(ev, in, "the result has %lld elements (%lld bytes), the operand "
                             "%lld (%lld bytes)", (long long)gs_shape_elements(in->shape),
                             (long long)bytes, (long long)a->n, (long long)gs_value_bytes(a));
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    if (bytes > 0) memcpy(r->data, a->data, (size_t)bytes);
    *out = r;
    return GS_OK;
}

/* ------------------------------------------------------------------ transpose, reverse */

/* transpose: result dim i is operand dim dimensions[i]. */
static gs_status k_transpose(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                             gs_value **out) {
    const gs_value *a = ops[0];
    if (check_arrays(ev, in, ops, 1) || check_result(ev, in, a->type)) return GS_ERR;
    gs_ints perm = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    bool seen[GS_MAX_RANK] = {false};
    if (perm.n != a->rank || !mark_dims(perm, a->rank, seen))
        return gs_eval_error(ev, in, "dimensions= is not a permutation of the operand's %d dims",
                             a->rank);
    int64_t as[GS_MAX_RANK], rs[GS_MAX_RANK], want[GS_MAX_RANK];
    for (int i = 0; i < a->rank; i++) want[i] = a->dims[perm.v[i]];
    if (check_result_dims(ev, in, a->rank, want)) return GS_ERR;
    gs_strides(a->rank, a->dims, as);
    gs_strides(a->rank, want, rs);
    box b = {.rank = a->rank};
    for (int i = 0; i < a->rank; i++) {
        b.dims[i] = want[i];
        b.dst[i] = rs[i];
        b.src[i] = as[perm.v[i]];
    }
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    if (!copy_box(r->data, 0, r->n, a->data, 0, a->n, &b, gs_type_size(a->type)))
        return box_error(ev, in, r);
    *out = r;
    return GS_OK;
}

/* reverse: the listed dims run backwards. */
static gs_status k_reverse(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                           gs_value **out) {
    const gs_value *a = ops[0];
    if (check_arrays(ev, in, ops, 1) || check_result(ev, in, a->type) ||
        check_result_dims(ev, in, a->rank, a->dims))
        return GS_ERR;
    gs_ints rev = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    bool seen[GS_MAX_RANK] = {false};
    if (!mark_dims(rev, a->rank, seen))
        return gs_eval_error(ev, in, "dimensions= lists a dim twice or out of range");
    int64_t st[GS_MAX_RANK];
    gs_strides(a->rank, a->dims, st);
    box b = {.rank = a->rank};
    int64_t soff = 0;
    for (int d = 0; d < a->rank; d++) {
        b.dims[d] = a->dims[d];
        b.dst[d] = st[d];
        b.src[d] = seen[d] ? -st[d] : st[d];
        if (seen[d] && a->dims[d] > 0) soff += (a->dims[d] - 1) * st[d];
    }
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    if (!copy_box(r->data, 0, r->n, a->data, soff, a->n, &b, gs_type_size(a->type)))
        return box_error(ev, in, r);
    *out = r;
    return GS_OK;
}

/* ------------------------------------------------------------------ slices */

/* Whether a slice of `size` from element offset `soff` (strides 1) is all of array a. */
static bool whole(const gs_value *a, const int64_t *size, int64_t soff) {
    if (soff != 0) return false;
    for (int d = 0; d < a->rank; d++)
        if (size[d] != a->dims[d]) return false;
    return true;
}

/* slice: elements start, start+stride, ... below limit, per dim. */
static gs_status k_slice(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0];
    if (check_arrays(ev, in, ops, 1) || check_result(ev, in, a->type)) return GS_ERR;
    const gs_attr *at = gs_instr_attr(in, GS_ATTR_SLICE);
    if (!at || at->u.slice.n != a->rank)
        return gs_eval_error(ev, in, "slice= needs one [start:limit:stride] per operand dim (%d)",
                             a->rank);
    int64_t as[GS_MAX_RANK], rs[GS_MAX_RANK], want[GS_MAX_RANK];
    gs_strides(a->rank, a->dims, as);
    box b = {.rank = a->rank};
    int64_t soff = 0;
    for (int d = 0; d < a->rank; d++) {
        gs_slice_dim sd = at->u.slice.v[d];
        if (sd.start < 0 || sd.start > sd.limit || sd.limit > a->dims[d] || sd.stride < 1)
            return gs_eval_error(ev, in, "slice [%lld:%lld:%lld] is invalid for dim %d of size "
                                 "%lld", (long long)sd.start, (long long)sd.limit,
                                 (long long)sd.stride, d, (long long)a->dims[d]);
        want[d] = (sd.limit - sd.start + sd.stride - 1) / sd.stride;
        b.dims[d] = want[d];
        b.src[d] = as[d] * sd.stride;
        soff += sd.start * as[d];
    }
    if (check_result_dims(ev, in, a->rank, want)) return GS_ERR;
    if (whole(a, want, soff)) { /* the operand itself (values are never written once made) */
        *out = gs_value_ref(ops[0]);
        return GS_OK;
    }
    gs_strides(a->rank, want, rs);
    for (int d = 0; d < a->rank; d++) b.dst[d] = rs[d];
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    if (!copy_box(r->data, 0, r->n, a->data, soff, a->n, &b, gs_type_size(a->type)))
        return box_error(ev, in, r);
    *out = r;
    return GS_OK;
}

/* dynamic-slice: a slice of the result's size at run-time starts, clamped into the operand. */
static gs_status k_dynamic_slice(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                 gs_value **out) {
    const gs_value *a = ops[0];
    if (check_arrays(ev, in, ops, in->n_operands) || check_result(ev, in, a->type))
        return GS_ERR;
    const gs_shape *s = in->shape;
    if (s->rank != a->rank)
        return gs_eval_error(ev, in, "the result has rank %d, the operand %d", s->rank, a->rank);
    int64_t starts[GS_MAX_RANK];
    if (read_starts(ev, in, ops + 1, in->n_operands - 1, a->rank, starts)) return GS_ERR;
    /* a dynamic result dim takes at most what the operand holds (its size at run time) */
    int64_t size[GS_MAX_RANK];
    for (int d = 0; d < a->rank; d++)
        size[d] = s->dynamic && s->dynamic[d] && a->dims[d] < s->dims[d] ? a->dims[d] : s->dims[d];
    int64_t as[GS_MAX_RANK], rs[GS_MAX_RANK];
    gs_strides(a->rank, a->dims, as);
    gs_strides(s->rank, size, rs);
    box b = {.rank = a->rank};
    int64_t soff = 0;
    for (int d = 0; d < a->rank; d++) {
        if (size[d] > a->dims[d])
            return gs_eval_error(ev, in, "slice size %lld exceeds operand dim %d (%lld)",
                                 (long long)size[d], d, (long long)a->dims[d]);
        soff += clamp64(starts[d], 0, a->dims[d] - size[d]) * as[d];
        b.dims[d] = size[d];
        b.dst[d] = rs[d];
        b.src[d] = as[d];
    }
    if (whole(a, size, soff)) { /* the halo exchange's full-size window, for one */
        *out = gs_value_ref(ops[0]);
        return GS_OK;
    }
    gs_value *r = gs_value_new_array(s->type, s->rank, size);
    if (!r) return gs_eval_oom(ev, in), GS_ERR;
    if (!copy_box(r->data, 0, r->n, a->data, soff, a->n, &b, gs_type_size(a->type)))
        return box_error(ev, in, r);
    *out = r;
    return GS_OK;
}

/* dynamic-update-slice: the operand with `update` written at clamped run-time starts. */
static gs_status k_dynamic_update_slice(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                        gs_value **out) {
    const gs_value *a = ops[0], *u = ops[1];
    if (check_arrays(ev, in, ops, in->n_operands) || check_result(ev, in, a->type) ||
        check_result_dims(ev, in, a->rank, a->dims))
        return GS_ERR;
    if (u->type != a->type || u->rank != a->rank)
        return gs_eval_error(ev, in, "the update must have the operand's type and rank");
    int64_t starts[GS_MAX_RANK];
    if (read_starts(ev, in, ops + 2, in->n_operands - 2, a->rank, starts)) return GS_ERR;
    int64_t as[GS_MAX_RANK], us[GS_MAX_RANK];
    gs_strides(a->rank, a->dims, as);
    gs_strides(u->rank, u->dims, us);
    box b = {.rank = a->rank};
    int64_t doff = 0;
    for (int d = 0; d < a->rank; d++) {
        if (u->dims[d] > a->dims[d])
            return gs_eval_error(ev, in, "update dim %d (%lld) exceeds the operand's (%lld)", d,
                                 (long long)u->dims[d], (long long)a->dims[d]);
        doff += clamp64(starts[d], 0, a->dims[d] - u->dims[d]) * as[d];
        b.dims[d] = u->dims[d];
        b.dst[d] = as[d];
        b.src[d] = us[d];
    }
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    memcpy(r->data, a->data, gs_value_bytes(a));
    if (!copy_box(r->data, doff, r->n, u->data, 0, u->n, &b, gs_type_size(a->type)))
        return box_error(ev, in, r);
    *out = r;
    return GS_OK;
}

/* ------------------------------------------------------------------ concatenate, pad */

/* concatenate: the operands one after another along dimensions={d}. */
static gs_status k_concatenate(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                               gs_value **out) {
    int n = in->n_operands;
    if (n < 1) return gs_eval_error(ev, in, "needs an operand");
    if (check_arrays(ev, in, ops, n) || check_result(ev, in, ops[0]->type)) return GS_ERR;
    gs_ints dl = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
    const gs_value *a0 = ops[0];
    int rank = a0->rank;
    if (dl.n != 1 || dl.v[0] < 0 || dl.v[0] >= rank)
        return gs_eval_error(ev, in, "dimensions= must name one dim of the operands (rank %d)",
                             rank);
    int cd = (int)dl.v[0];
    int64_t want[GS_MAX_RANK];
    for (int d = 0; d < rank; d++) want[d] = d == cd ? 0 : a0->dims[d];
    for (int k = 0; k < n; k++) {
        const gs_value *a = ops[k];
        bool ok = a->type == a0->type && a->rank == rank;
        for (int d = 0; ok && d < rank; d++) ok = d == cd || a->dims[d] == a0->dims[d];
        if (!ok)
            return gs_eval_error(ev, in, "operand %d's type or dims (other than dim %d) differ "
                                 "from operand 0's", k, cd);
        want[cd] += a->dims[cd];
    }
    if (check_result_dims(ev, in, rank, want)) return GS_ERR;
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    int64_t rs[GS_MAX_RANK], as[GS_MAX_RANK];
    gs_strides(rank, want, rs);
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        const gs_value *a = ops[k];
        gs_strides(rank, a->dims, as);
        box b = {.rank = rank};
        for (int d = 0; d < rank; d++) {
            b.dims[d] = a->dims[d];
            b.dst[d] = rs[d];
            b.src[d] = as[d];
        }
        if (!copy_box(r->data, at * rs[cd], r->n, a->data, 0, a->n, &b, gs_type_size(a->type)))
            return box_error(ev, in, r);
        at += a->dims[cd];
    }
    *out = r;
    return GS_OK;
}

/* pad: per dim, lo padding elements (negative: cropped), the operand's elements with interior
 * padding elements between neighbours, then hi padding elements (negative: cropped). */
static gs_status k_pad(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0], *pv = ops[1];
    if (check_arrays(ev, in, ops, 2) || check_result(ev, in, a->type)) return GS_ERR;
    if (pv->type != a->type || pv->n != 1)
        return gs_eval_error(ev, in, "the padding value must be one element of the operand's "
                             "type");
    const gs_attr *at = gs_instr_attr(in, GS_ATTR_PADDING);
    if (!at || !at->u.padding || at->u.padding->n != a->rank)
        return gs_eval_error(ev, in, "padding= needs one lo_hi[_interior] per operand dim (%d)",
                             a->rank);
    const gs_pad_dim *pd = at->u.padding->dims;
    int64_t want[GS_MAX_RANK], as[GS_MAX_RANK], rs[GS_MAX_RANK];
    for (int d = 0; d < a->rank; d++) {
        int64_t n = a->dims[d];
        if (pd[d].interior < 0)
            return gs_eval_error(ev, in, "negative interior padding in dim %d", d);
        want[d] = pd[d].lo + pd[d].hi + (n > 0 ? n + (n - 1) * pd[d].interior : 0);
        if (want[d] < 0)
            return gs_eval_error(ev, in, "padding crops dim %d below size 0", d);
    }
    if (check_result_dims(ev, in, a->rank, want)) return GS_ERR;
    gs_strides(a->rank, a->dims, as);
    gs_strides(a->rank, want, rs);
    /* The operand elements that land inside the result: i in [i_lo, i_hi) per dim. */
    box b = {.rank = a->rank};
    int64_t doff = 0, soff = 0;
    for (int d = 0; d < a->rank; d++) {
        int64_t step = pd[d].interior + 1, lo = pd[d].lo;
        int64_t i_lo = lo >= 0 ? 0 : (-lo + step - 1) / step;
        int64_t last = want[d] - 1 - lo; /* the last position (relative to lo) inside */
        int64_t i_hi = last < 0 ? 0 : last / step + 1;
        if (i_hi > a->dims[d]) i_hi = a->dims[d];
        b.dims[d] = i_hi > i_lo ? i_hi - i_lo : 0;
        b.dst[d] = step * rs[d];
        b.src[d] = as[d];
        if (b.dims[d] > 0) {
            doff += (lo + i_lo * step) * rs[d];
            soff += i_lo * as[d];
        }
    }
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    int es = gs_type_size(a->type);
    fill_elems(r->data, r->n, pv->data, es);
    if (!copy_box(r->data, doff, r->n, a->data, soff, a->n, &b, es)) return box_error(ev, in, r);
    *out = r;
    return GS_OK;
}

/* ------------------------------------------------------------------ gather and scatter */

/* Gather and scatter share one description. The "other" array is gather's result or scatter's
 * updates; its dims split into window dims (gather's offset_dims, scatter's update_window_dims)
 * and position dims, which run in step with the dims of the indices other than
 * index_vector_dim. */
typedef struct gplan {
    int rank;                        /* operand rank */
    int64_t op_dims[GS_MAX_RANK];    /* operand dims */
    int64_t op_stride[GS_MAX_RANK];  /* operand row-major strides */
    int64_t extent[GS_MAX_RANK];     /* window size per operand dim (1 if collapsed/batching) */
    int n_vec;                       /* entries of one start index vector */
    int64_t vec_stride;              /* indices stride between them (0 if implicit) */
    int start_map[GS_MAX_RANK];      /* operand dim of vector entry k */
    int n_bat;                       /* batching dim pairs */
    int bat_op_dim[GS_MAX_RANK];     /* operand batching dim i ... */
    int bat_pos[GS_MAX_RANK];        /* ... takes position dim bat_pos[i]'s index */
    box pos;                         /* position dims: dst = other stride, src = indices stride */
    box win;                         /* window dims: dst = other stride, src = operand stride */
} gplan;

/* Names of the attributes of gather (g = 0) and scatter (g = 1) for messages. */
static const char *const WIN_NAME[2] = {"offset_dims", "update_window_dims"};
static const char *const SKIP_NAME[2] = {"collapsed_slice_dims", "inserted_window_dims"};
static const char *const MAP_NAME[2] = {"start_index_map", "scatter_dims_to_operand_dims"};
static const char *const OPB_NAME[2] = {"operand_batching_dims", "input_batching_dims"};
static const char *const IDB_NAME[2] = {"start_indices_batching_dims",
                                        "scatter_indices_batching_dims"};

/* The position dims of p: the indices' dims other than index_vector_dim, in order, and the
 * other array's (o_rank dims) not in the window list `win` (marked in in_win), in order; is and
 * os are the two arrays' strides. */
static gs_status plan_positions(gs_eval *ev, const gs_instr *in, int g, gplan *p,
                                const gs_value *idx, int64_t ivd, const int64_t *is, gs_ints win,
                                bool *in_win, int o_rank, const int64_t *o_dims,
                                const int64_t *os) {
    int i_rank = idx->rank;
    if (!mark_dims(win, o_rank, in_win))
        return gs_eval_error(ev, in, "%s lists a dim twice or out of range", WIN_NAME[g]);
    int n_pos = i_rank - (ivd < i_rank ? 1 : 0);
    if (o_rank - win.n != n_pos)
        return gs_eval_error(ev, in, "%d dims outside %s, but the indices have %d batch dims",
                             o_rank - win.n, WIN_NAME[g], n_pos);
    p->pos.rank = n_pos;
    int j = 0;
    for (int d = 0; d < i_rank; d++) {
        if (d == ivd) continue;
        p->pos.dims[j] = idx->dims[d];
        p->pos.src[j] = is[d];
        j++;
    }
    j = 0;
    for (int d = 0; d < o_rank; d++) {
        if (in_win[d]) continue;
        if (o_dims[d] != p->pos.dims[j])
            return gs_eval_error(ev, in, "dim %d has size %lld, the indices' batch dim %d has %lld",
                                 d, (long long)o_dims[d], j, (long long)p->pos.dims[j]);
        p->pos.dst[j] = os[d];
        j++;
    }
    return GS_OK;
}

/* Builds p from the operand's dims, the indices, the other array's dims and the dimension
 * numbers; checks them against each other (so that no index computed later leaves an array). */
static gs_status plan_build(gs_eval *ev, const gs_instr *in, bool scatter, gplan *p, int rank,
                            const int64_t *op_dims, const gs_value *idx, int o_rank,
                            const int64_t *o_dims) {
    int g = scatter ? 1 : 0;
    gs_ints win = gs_instr_ints(in, scatter ? GS_ATTR_UPDATE_WINDOW_DIMS : GS_ATTR_OFFSET_DIMS);
    gs_ints skip = gs_instr_ints(in, scatter ? GS_ATTR_INSERTED_WINDOW_DIMS
                                             : GS_ATTR_COLLAPSED_SLICE_DIMS);
    gs_ints map = gs_instr_ints(in, scatter ? GS_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS
                                            : GS_ATTR_START_INDEX_MAP);
    gs_ints opb = gs_instr_ints(in, scatter ? GS_ATTR_INPUT_BATCHING_DIMS
                                            : GS_ATTR_OPERAND_BATCHING_DIMS);
    gs_ints idb = gs_instr_ints(in, scatter ? GS_ATTR_SCATTER_INDICES_BATCHING_DIMS
                                            : GS_ATTR_START_INDICES_BATCHING_DIMS);
    int64_t ivd = gs_instr_int(in, GS_ATTR_INDEX_VECTOR_DIM, -1);
    int i_rank = idx->rank;
    if (!gs_type_is_int(idx->type))
        return gs_eval_error(ev, in, "the indices have type %s, not an integer type",
                             gs_type_name(idx->type));
    if (ivd < 0 || ivd > i_rank)
        return gs_eval_error(ev, in, "index_vector_dim=%lld is not in [0, %d]", (long long)ivd,
                             i_rank);
    int64_t is[GS_MAX_RANK], os[GS_MAX_RANK];
    gs_strides(i_rank, idx->dims, is);
    gs_strides(o_rank, o_dims, os);
    p->rank = rank;
    for (int d = 0; d < rank; d++) p->op_dims[d] = op_dims[d];
    gs_strides(rank, op_dims, p->op_stride);

    /* The start index vector. */
    int64_t n_vec = ivd < i_rank ? idx->dims[ivd] : 1;
    p->vec_stride = ivd < i_rank ? is[ivd] : 0;
    bool in_map[GS_MAX_RANK] = {false};
    if (map.n != n_vec || !mark_dims(map, rank, in_map))
        return gs_eval_error(ev, in, "%s must list %lld distinct operand dims (the index vector's "
                             "size)", MAP_NAME[g], (long long)n_vec);
    p->n_vec = map.n;
    for (int k = 0; k < map.n; k++) p->start_map[k] = (int)map.v[k];

    /* Operand dims: window, collapsed (inserted) or batching. */
    bool in_skip[GS_MAX_RANK] = {false}, in_opb[GS_MAX_RANK] = {false};
    if (!mark_dims(skip, rank, in_skip))
        return gs_eval_error(ev, in, "%s lists an operand dim twice or out of range",
                             SKIP_NAME[g]);
    if (!mark_dims(opb, rank, in_opb))
        return gs_eval_error(ev, in, "%s lists an operand dim twice or out of range",
                             OPB_NAME[g]);
    for (int d = 0; d < rank; d++)
        if (in_opb[d] && (in_skip[d] || in_map[d]))
            return gs_eval_error(ev, in, "operand dim %d is a batching dim and also in %s or %s",
                                 d, SKIP_NAME[g], MAP_NAME[g]);

    /* Position dims. */
    bool in_win[GS_MAX_RANK] = {false};
    if (plan_positions(ev, in, g, p, idx, ivd, is, win, in_win, o_rank, o_dims, os) != GS_OK)
        return GS_ERR;

    /* Batching dims pair an operand dim with a position dim. */
    if (idb.n != opb.n)
        return gs_eval_error(ev, in, "%s and %s differ in length", OPB_NAME[g], IDB_NAME[g]);
    bool in_idb[GS_MAX_RANK] = {false};
    if (!mark_dims(idb, i_rank, in_idb) || (ivd < i_rank && in_idb[ivd]))
        return gs_eval_error(ev, in, "%s lists a dim twice, out of range or index_vector_dim",
                             IDB_NAME[g]);
    p->n_bat = opb.n;
    for (int i = 0; i < opb.n; i++) {
        int64_t od = opb.v[i], id = idb.v[i];
        if (op_dims[od] != idx->dims[id])
            return gs_eval_error(ev, in, "batching dims %lld (operand, %lld) and %lld (indices, "
                                 "%lld) differ in size", (long long)od, (long long)op_dims[od],
                                 (long long)id, (long long)idx->dims[id]);
        p->bat_op_dim[i] = (int)od;
        p->bat_pos[i] = (int)(id < ivd ? id : id - 1);
    }

    /* Window: the k-th operand dim that is neither collapsed nor batching pairs with win[k]. */
    int k = 0;
    for (int d = 0; d < rank; d++) {
        p->extent[d] = 1;
        if (in_skip[d] || in_opb[d]) continue;
        if (k >= win.n) break;
        p->extent[d] = o_dims[win.v[k]];
        p->win.dims[k] = o_dims[win.v[k]];
        p->win.dst[k] = os[win.v[k]];
        p->win.src[k] = p->op_stride[d];
        k++;
    }
    int n_window = 0;
    for (int d = 0; d < rank; d++) n_window += !in_skip[d] && !in_opb[d];
    if (n_window != win.n)
        return gs_eval_error(ev, in, "%s has %d dims, the operand has %d window dims",
                             WIN_NAME[g], win.n, n_window);
    p->win.rank = win.n;
    return GS_OK;
}

/* The full operand start of the position whose indices vector starts at ioff (position
 * multi-index pos): start_map entries from the indices, batching dims from pos, others 0. */
static void plan_start(const gplan *p, const gs_value *idx, int64_t ioff, const int64_t *pos,
                       int64_t *start) {
    for (int d = 0; d < p->rank; d++) start[d] = 0;
    for (int k = 0; k < p->n_vec; k++)
        start[p->start_map[k]] = read_index(idx, ioff + k * p->vec_stride);
    for (int i = 0; i < p->n_bat; i++) start[p->bat_op_dim[i]] = pos[p->bat_pos[i]];
}

/* gather: for each batch position, the operand slice of slice_sizes at the (clamped) start
 * the indices give, collapsed and batching dims dropped, laid out along offset_dims. */
static gs_status k_gather(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                          gs_value **out) {
    const gs_value *a = ops[0], *idx = ops[1];
    if (check_arrays(ev, in, ops, 2) || check_result(ev, in, a->type)) return GS_ERR;
    gplan p;
    if (plan_build(ev, in, false, &p, a->rank, a->dims, idx, in->shape->rank, in->shape->dims))
        return GS_ERR;
    gs_ints sizes = gs_instr_ints(in, GS_ATTR_SLICE_SIZES);
    if (sizes.n != a->rank)
        return gs_eval_error(ev, in, "slice_sizes has %d entries, the operand has rank %d",
                             sizes.n, a->rank);
    for (int d = 0; d < a->rank; d++) {
        if (sizes.v[d] != p.extent[d])
            return gs_eval_error(ev, in, "slice_sizes[%d] is %lld, the result gives %lld (1 for "
                                 "collapsed and batching dims)", d, (long long)sizes.v[d],
                                 (long long)p.extent[d]);
        if (p.extent[d] > a->dims[d])
            return gs_eval_error(ev, in, "slice_sizes[%d] = %lld exceeds the operand dim (%lld)",
                                 d, (long long)p.extent[d], (long long)a->dims[d]);
    }
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    int es = gs_type_size(a->type);
    if (r->n > 0) {
        int64_t pos[GS_MAX_RANK] = {0}, start[GS_MAX_RANK];
        int64_t roff = 0, ioff = 0;
        do {
            plan_start(&p, idx, ioff, pos, start);
            int64_t soff = 0;
            for (int d = 0; d < a->rank; d++)
                soff += clamp64(start[d], 0, a->dims[d] - p.extent[d]) * p.op_stride[d];
            if (!copy_box(r->data, roff, r->n, a->data, soff, a->n, &p.win, es))
                return box_error(ev, in, r);
        } while (box_next(&p.pos, p.pos.rank, pos, &roff, &ioff));
    }
    *out = r;
    return GS_OK;
}

/* Does comp just return its update parameters (n..2n-1) in order (scatter's "replace")? */
static bool comp_is_overwrite(const gs_computation *c, int n, gs_value *const *updates) {
    if (c->n_params != 2 * n) return false;
    const gs_instr *r = c->root;
    for (int k = 0; k < n; k++) {
        const gs_instr *e = r;
        if (n > 1) e = r->op == GS_OP_TUPLE && r->n_operands == n ? r->operands[k] : NULL;
        if (!e || e->op != GS_OP_PARAMETER || e->parameter_number != n + k ||
            e->shape->type != updates[k]->type)
            return false;
    }
    return true;
}

/* Runs every scatter position of p: skips windows leaving the operand, combines the others
 * element by element with comp (or copies, when comp is a plain overwrite). */
static gs_status scatter_run(gs_eval *ev, const gs_instr *in, const gplan *p, int n,
                             gs_value **res, const gs_value *idx, gs_value *const *upd,
                             const gs_computation *comp) {
    if (box_empty(&p->pos) || box_empty(&p->win)) return GS_OK;
    gs_type types[GS_MAX_RANK];
    void *accs[GS_MAX_RANK];
    const void *xs[GS_MAX_RANK];
    int sizes[GS_MAX_RANK];
    for (int k = 0; k < n; k++) {
        types[k] = res[k]->type;
        accs[k] = res[k]->data;
        xs[k] = upd[k]->data;
        sizes[k] = gs_type_size(types[k]);
    }
    bool overwrite = comp_is_overwrite(comp, n, upd);
    int64_t pos[GS_MAX_RANK] = {0}, start[GS_MAX_RANK], w[GS_MAX_RANK] = {0};
    int64_t uoff = 0, ioff = 0;
    do {
        plan_start(p, idx, ioff, pos, start);
        bool inside = true;
        int64_t ooff = 0;
        for (int d = 0; inside && d < p->rank; d++) {
            inside = start[d] >= 0 && start[d] <= p->op_dims[d] - p->extent[d];
            ooff += start[d] * p->op_stride[d];
        }
        if (!inside) continue;
        /* Window elements: dst walks the updates, src the operand (the plan's convention). */
        if (!box_fits(&p->win, p->win.dst, uoff, upd[0]->n) ||
            !box_fits(&p->win, p->win.src, ooff, res[0]->n))
            return gs_eval_error(ev, in, "internal: a scatter window leaves its array");
        int64_t u = uoff, o = ooff;
        do {
            if (overwrite) {
                for (int k = 0; k < n; k++) gs_copy_elem(accs[k], o, xs[k], u, sizes[k]);
            } else if (gs_apply_reducer(ev, in, comp, n, types, accs, o, xs, u)) {
                return GS_ERR;
            }
        } while (box_next(&p->win, p->win.rank, w, &u, &o));
    } while (box_next(&p->pos, p->pos.rank, pos, &uoff, &ioff));
    return GS_OK;
}

/* scatter: operands..., indices, updates... (n each); returns the operands with every update
 * window combined into them by to_apply (a tuple when n > 1). */
static gs_status k_scatter(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                           gs_value **out) {
    int n_ops = in->n_operands;
    if (n_ops < 3 || n_ops % 2 == 0)
        return gs_eval_error(ev, in, "needs n operands, the indices and n updates");
    int n = (n_ops - 1) / 2;
    if (n > GS_MAX_RANK) return gs_eval_error(ev, in, "more than %d operands", GS_MAX_RANK);
    if (check_arrays(ev, in, ops, n_ops)) return GS_ERR;
    const gs_value *idx = ops[n];
    gs_value *const *upd = ops + n + 1;
    for (int k = 0; k < n; k++) {
        bool ok = ops[k]->rank == ops[0]->rank && upd[k]->rank == upd[0]->rank &&
                  upd[k]->type == ops[k]->type;
        for (int d = 0; ok && d < ops[0]->rank; d++) ok = ops[k]->dims[d] == ops[0]->dims[d];
        for (int d = 0; ok && d < upd[0]->rank; d++) ok = upd[k]->dims[d] == upd[0]->dims[d];
        if (!ok)
            return gs_eval_error(ev, in, "operand %d or its updates differ in dims from operand 0, "
                                 "or the updates' type from the operand's", k);
    }
    const gs_shape *s = in->shape;
    if (n == 1 ? !gs_shape_is_array(s) || !gs_value_matches(ops[0], s)
               : s->type != GS_TUPLE || s->n_tuple != n)
        return gs_eval_error(ev, in, "the result shape is not that of the operands");
    const gs_computation *comp = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!comp) return gs_eval_error(ev, in, "scatter needs to_apply=");
    gplan p;
    if (plan_build(ev, in, true, &p, ops[0]->rank, ops[0]->dims, idx, upd[0]->rank,
                   upd[0]->dims))
        return GS_ERR;
    gs_value *res[GS_MAX_RANK] = {0};
    gs_status st = GS_OK;
    for (int k = 0; k < n && st == GS_OK; k++) {
        res[k] = gs_value_copy(ops[k]);
        if (!res[k]) st = gs_eval_oom(ev, in);
    }
    if (st == GS_OK) st = scatter_run(ev, in, &p, n, res, idx, upd, comp);
    if (st != GS_OK) {
        for (int k = 0; k < n; k++) gs_value_free(res[k]);
        return st;
    }
    if (n == 1) {
        *out = res[0];
        return GS_OK;
    }
    *out = gs_value_new_tuple(n, res);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

/* ------------------------------------------------------------------ dispatch */

gs_kernel_fn gs_kernel_shape(gs_opcode op) {
    switch (op) {
    case GS_OP_BROADCAST: return k_broadcast;
    case GS_OP_RESHAPE:
    case GS_OP_BITCAST: return k_reshape;
    case GS_OP_TRANSPOSE: return k_transpose;
    case GS_OP_REVERSE: return k_reverse;
    case GS_OP_SLICE: return k_slice;
    case GS_OP_DYNAMIC_SLICE: return k_dynamic_slice;
    case GS_OP_DYNAMIC_UPDATE_SLICE: return k_dynamic_update_slice;
    case GS_OP_CONCATENATE: return k_concatenate;
    case GS_OP_PAD: return k_pad;
    case GS_OP_GATHER: return k_gather;
    case GS_OP_SCATTER: return k_scatter;
    default: return NULL;
    }
}
