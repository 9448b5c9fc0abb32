/*
 * infer_written.c — the ops whose shape is written rather than inferred (broadcast, reshape,
 * dynamic-reshape, the converts, iota, constant, rng, infeed, recv, async-start): when
 * verifying, XLA's checks of the written shape against the operands and attributes.
 */
#include "ir/infer.h"

/* The written shape must be an array (verification only). */
static gs_status declared_array(ictx *c) {
    if (!arr(c->declared)) return fail(c, "shape must be an array, not %s", sh(c, c->declared));
    return GS_OK;
}

static gs_status check_broadcast(ictx *c) {
    const gs_shape *s = opnd(c, 0), *r = c->declared;
    gs_ints v;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (!fp_eq(r->type, s->type))
        return fail(c, "element type of %s differs from the operand's %s", sh(c, r), sh(c, s));
    if (need_ints(c, GS_ATTR_DIMENSIONS, &v) != GS_OK) return GS_ERR;
    if (v.n != s->rank)
        return fail(c, "dimensions %s must map each of the %d dimensions of the operand %s",
                    ints_text(c, v), s->rank, sh(c, s));
    for (int i = 0; i < v.n; i++) {
        if (v.v[i] < 0 || v.v[i] >= r->rank)
            return fail(c, "broadcast dimension %lld is out of range for %s", (long long)v.v[i],
                        sh(c, r));
        if (!dim_eq(r->dims[v.v[i]], s->dims[i]))
            return fail(c,
                        "operand dimension %d of %s has size %lld, but result dimension %lld "
                        "of %s has %lld",
                        i, sh(c, s), (long long)s->dims[i], (long long)v.v[i], sh(c, r),
                        (long long)r->dims[v.v[i]]);
        for (int j = 0; j < i; j++)
            if (v.v[j] == v.v[i])
                return fail(c, "broadcast dimension %lld appears twice", (long long)v.v[i]);
    }
    return GS_OK;
}

static int64_t elements_or_unknown(const gs_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0) return -1;
        n *= s->dims[i];
    }
    return n;
}

static gs_status check_reshape(ictx *c) {
    const gs_shape *s = opnd(c, 0), *r = c->declared;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (!fp_eq(r->type, s->type))
        return fail(c, "element type of %s differs from the operand's %s", sh(c, r), sh(c, s));
    int64_t a = elements_or_unknown(s), b = elements_or_unknown(r);
    if (a >= 0 && b >= 0 && a != b)
        return fail(c, "%s has %lld elements, but the operand %s has %lld", sh(c, r), (long long)b,
                    sh(c, s), (long long)a);
    if (c->in->op == GS_OP_DYNAMIC_RESHAPE) {
        if (c->in->n_operands != r->rank + 1)
            return fail(c,
                        "takes the operand and one size per result dimension (%d), not %d "
                        "operands",
                        r->rank + 1, c->in->n_operands);
        for (int k = 1; k < c->in->n_operands; k++)
            if (!is_scalar(opnd(c, k)) || opnd(c, k)->type != GS_S32)
                return fail(c, "size operand %d must be s32[], not %s", k, sh(c, opnd(c, k)));
    }
    return GS_OK;
}

static gs_status check_convert(ictx *c) {
    const gs_shape *s = opnd(c, 0), *r = c->declared;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (c->in->op == GS_OP_STOCHASTIC_CONVERT) {
        const gs_shape *u = opnd(c, 1);
        if (!gs_type_is_float(s->type))
            return fail(c, "operand must be floating-point, not %s", sh(c, s));
        if (!arr(u) || !gs_type_is_unsigned_int(u->type) ||
            gs_type_bits(u->type) != gs_type_bits(s->type) || !gs_shape_dims_compatible(u, s))
            return fail(c,
                        "random bits %s must be unsigned integers of the operand's width and "
                        "shape %s",
                        sh(c, u), sh(c, s));
    }
    if (c->in->op != GS_OP_BITCAST_CONVERT) {
        if (!gs_shape_dims_compatible(s, r))
            return fail(c, "%s and the operand %s have different dimensions", sh(c, r), sh(c, s));
        return GS_OK;
    }
    if (gs_type_is_complex(s->type) != gs_type_is_complex(r->type))
        return fail(c, "cannot bitcast between complex and real types (%s to %s)", sh(c, s),
                    sh(c, r));
    int ib = gs_type_bits(s->type), ob = gs_type_bits(r->type);
    int hi = ib > ob ? ib : ob, lo = ib > ob ? ob : ib;
    if (lo <= 0 || hi % lo != 0)
        return fail(c, "cannot bitcast %s to %s: bit widths do not divide", tn(s->type),
                    tn(r->type));
    int64_t dims[GS_MAX_RANK + 1];
    int rank = s->rank;
    copy_dims(dims, s);
    if (ib > ob) {
        dims[rank++] = hi / lo;
    } else if (ib < ob) {
        if (rank < 1 || !dim_eq(dims[rank - 1], hi / lo))
            return fail(c, "bitcasting %s to %s needs a last dimension of %d", sh(c, s),
                        tn(r->type), hi / lo);
        rank--;
    }
    bool ok = rank == r->rank;
    for (int i = 0; ok && i < rank; i++) ok = dim_eq(dims[i], r->dims[i]);
    if (!ok)
        return fail(c, "bitcasting %s to %s does not give %s", sh(c, s), tn(r->type), sh(c, r));
    return GS_OK;
}

static gs_status check_iota(ictx *c) {
    const gs_shape *r = c->declared;
    int64_t d;
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (r->rank == 0) return fail(c, "shape must not be a scalar");
    if (r->type == GS_PRED) return fail(c, "shape must be numeric, not %s", sh(c, r));
    if (need_int(c, GS_ATTR_IOTA_DIMENSION, &d) != GS_OK) return GS_ERR;
    if (d < 0 || d >= r->rank)
        return fail(c, "iota_dimension %lld is out of range for %s", (long long)d, sh(c, r));
    return GS_OK;
}

static gs_status check_rng(ictx *c) {
    const gs_shape *a = opnd(c, 0), *b = opnd(c, 1);
    if (!is_scalar(a) || !is_scalar(b) || a->type != b->type)
        return fail(c, "operands must be scalars of one type, not %s and %s", sh(c, a), sh(c, b));
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (!fp_eq(c->declared->type, a->type))
        return fail(c, "element type of %s differs from the operands' %s", sh(c, c->declared),
                    tn(a->type));
    return GS_OK;
}

/* infeed: (data, token); recv: (data, u32[], token). */
static gs_status check_transfer(ictx *c, int n) {
    const gs_shape *r = c->declared;
    if (check_token_operand(c, 0) != GS_OK) return GS_ERR;
    if (r->type != GS_TUPLE || r->n_tuple != n || !is_token(r->tuple[n - 1]) ||
        (n == 3 && (!is_scalar(r->tuple[1]) || r->tuple[1]->type != GS_U32)))
        return fail(c, "shape must be %s, not %s",
                    n == 3 ? "(data, u32[], token[])" : "(data, token[])", sh(c, r));
    return GS_OK;
}

/* async-start, call-start: the shape is ((operands...), result, context...). */
static gs_status check_async_start(ictx *c) {
    const gs_shape *s = c->declared;
    if (!s) return GS_OK;
    if (s->type != GS_TUPLE || s->n_tuple < 2)
        return fail(c, "shape must be a tuple of at least 2 elements, not %s", sh(c, s));
    const gs_shape *args = s->tuple[0];
    if (args->type != GS_TUPLE || args->n_tuple != c->in->n_operands) return GS_OK;
    for (int k = 0; k < c->in->n_operands; k++)
        if (!gs_shape_compatible(args->tuple[k], opnd(c, k), false))
            return fail(c, "operand %d is %s, but the shape holds %s for it", k, sh(c, opnd(c, k)),
                        sh(c, args->tuple[k]));
    return GS_OK;
}

/* Checks of ops without inference; only when verifying (c->declared set). */
gs_status gs_infer_check_written(ictx *c) {
    if (!c->declared) return GS_OK;
    switch (c->in->op) {
    case GS_OP_BROADCAST: return check_broadcast(c);
    case GS_OP_RESHAPE:
    case GS_OP_DYNAMIC_RESHAPE: return check_reshape(c);
    case GS_OP_CONVERT:
    case GS_OP_BITCAST_CONVERT:
    case GS_OP_STOCHASTIC_CONVERT: return check_convert(c);
    case GS_OP_IOTA: return check_iota(c);
    case GS_OP_CONSTANT:
        if (!c->in->literal) return fail(c, "has no literal");
        if (is_token(c->declared)) return fail(c, "a token cannot be a constant");
        return GS_OK;
    case GS_OP_RNG: return check_rng(c);
    case GS_OP_RNG_GET_AND_UPDATE_STATE: {
        const int64_t two = 2;
        const gs_shape *u = new_array(c, GS_U64, 1, &two, NULL);
        if (!u) return oom(c);
        if (!gs_shape_compatible(c->declared, u, false))
            return fail(c, "shape must be u64[2], not %s", sh(c, c->declared));
        return GS_OK;
    }
    case GS_OP_RNG_BIT_GENERATOR: {
        const gs_shape *r = c->declared;
        if (r->type == GS_TUPLE &&
            (r->n_tuple != 2 || !gs_shape_compatible(r->tuple[0], opnd(c, 0), false)))
            return fail(c, "shape must be (state %s, bits), not %s", sh(c, opnd(c, 0)), sh(c, r));
        return GS_OK;
    }
    case GS_OP_INFEED: return check_transfer(c, 2);
    case GS_OP_RECV: return check_transfer(c, 3);
    case GS_OP_ASYNC_START:
    case GS_OP_CALL_START: return check_async_start(c);
    default: return GS_OK;
    }
}
