/*
 * infer.c — XLA's shape inference (xla/service/shape_inference.cc).
 *
 * gs_infer_shape computes an instruction's result shape from its opcode, its operands' shapes,
 * its attributes and the computations it calls; on the way it checks what XLA checks there:
 * dimension numbers in range and unique, matching element types, window and padding arithmetic,
 * the signatures of reducers, comparators and called computations. The parser uses it for
 * instructions written without a shape; the verifier (verify.c) runs it on every instruction
 * through gs_infer_written, which also checks the ops whose shape must be written (broadcast,
 * reshape, convert, iota...) and the collectives' replica groups and source-target pairs.
 *
 * Errors read `<opcode> <name>: <what is wrong>`, located at the instruction. One function per
 * op family infers the shape; it sees the written shape (ictx.declared) only when verifying, for
 * the ops whose shape cannot be inferred and for the collectives where XLA itself derives the
 * shard count from the written shape (when the module does not say how many devices there are).
 *
 * This file dispatches on the opcode and holds the checks several families share; the rules
 * themselves are in infer_<family>.c (infer.h lists the files).
 */
#include "gspmd/ir.h"
#include "ir/infer.h"

/* ------------------------------------------------------------------ shape compatibility */

bool gs_shape_dims_compatible(const gs_shape *a, const gs_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (!dim_eq(a->dims[i], b->dims[i])) return false;
    return true;
}

/* XLA's ShapeUtil::Compatible: same tree, element types and dims; layouts and dynamic flags
 * ignored. ignore_fp: any two floating-point types match. */
bool gs_shape_compatible(const gs_shape *a, const gs_shape *b, bool ignore_fp) {
    if (a->type == GS_TUPLE || b->type == GS_TUPLE) {
        if (a->type != b->type || a->n_tuple != b->n_tuple) return false;
        for (int i = 0; i < a->n_tuple; i++)
            if (!gs_shape_compatible(a->tuple[i], b->tuple[i], ignore_fp)) return false;
        return true;
    }
    if (is_token(a) || is_token(b)) return a->type == b->type;
    if (ignore_fp ? !fp_eq(a->type, b->type) : a->type != b->type) return false;
    return gs_shape_dims_compatible(a, b);
}

/* ------------------------------------------------------------------ dimension lists */

/* `dimensions={d}` naming one dimension of s. what names it in messages. */
gs_status gs_infer_need_one_dim(ictx *c, const gs_shape *s, const char *what, int64_t *d) {
    gs_ints v;
    if (need_ints(c, GS_ATTR_DIMENSIONS, &v) != GS_OK) return GS_ERR;
    if (v.n != 1) return fail(c, "dimensions must name one dimension, not %s", ints_text(c, v));
    *d = v.v[0];
    if (*d < 0 || *d >= s->rank)
        return fail(c, "%s %lld is out of range for %s", what, (long long)*d, sh(c, s));
    return GS_OK;
}

/* Each entry of v is a dimension of a rank-`rank` value (shape s when known), none repeats, and
 * (when sorted) they increase. what names one entry ("lhs contracting dimension"). */
gs_status gs_infer_check_dims(ictx *c, gs_ints v, int rank, const gs_shape *s, const char *what,
                              bool sorted) {
    for (int i = 0; i < v.n; i++) {
        if (v.v[i] < 0 || v.v[i] >= rank) {
            if (s)
                return fail(c, "%s %lld is out of range for %s", what, (long long)v.v[i], sh(c, s));
            return fail(c, "%s %lld is out of range for rank %d", what, (long long)v.v[i], rank);
        }
        for (int j = 0; j < i; j++)
            if (v.v[j] == v.v[i]) return fail(c, "%s %lld appears twice", what, (long long)v.v[i]);
        if (sorted && i > 0 && v.v[i] < v.v[i - 1])
            return fail(c, "%ss %s must be sorted", what, ints_text(c, v));
    }
    return GS_OK;
}

/* ------------------------------------------------------------------ called computations */

/* Usable for inference: its root and parameters are known (the parser infers shapes before it
 * has read computations defined later, and while it reads the computation itself). */
bool gs_infer_comp_ready(const gs_computation *f) {
    if (!f || !f->root || !f->root->shape) return false;
    for (int i = 0; i < f->n_params; i++)
        if (!f->params || !f->params[i] || !f->params[i]->shape) return false;
    return true;
}

/* The computation of attribute k: GS_ERR when the attribute is missing; *f NULL when it is not
 * usable yet (the caller then returns no shape). */
gs_status gs_infer_need_comp(ictx *c, gs_attr_key k, const gs_computation **f) {
    const gs_attr *at;
    *f = NULL;
    if (need_attr(c, k, &at) != GS_OK) return GS_ERR;
    const gs_computation *p = NULL;
    if (gs_attr_kind_of(k) == GS_AK_COMP) {
        p = at->u.comp;
    } else {
        if (at->u.comps.n != 1)
            return fail(c, "%s must name one computation, not %d", gs_attr_name(k), at->u.comps.n);
        p = at->u.comps.v[0];
    }
    *f = gs_infer_comp_ready(p) ? p : NULL;
    return GS_OK;
}

/* Checks a reduction computation of n accumulators (XLA's VerifyReducerShape): 2n scalar
 * parameters, a scalar (n == 1) or an n-tuple of scalars as result, accumulator i of init type
 * acc[i] (up to fp precision), parameter n+i taking input elements of type elem[i]. Fills
 * res[i] with the result element types. */
gs_status gs_infer_check_reducer(ictx *c, const gs_computation *f, const char *role, int n,
                                 const gs_type *acc, const gs_type *elem, gs_type *res) {
    if (f->n_params != 2 * n)
        return fail(c, "%s computation %s must take %d parameters, but takes %d", role, f->name,
                    2 * n, f->n_params);
    const gs_shape *root = root_shape(f);
    const gs_shape *const *elems = &root;
    if (root->type == GS_TUPLE ? root->n_tuple != n : n != 1 || !arr(root)) {
        const char *want = n == 1 ? "a scalar" : gs_arena_printf(c->scratch, "%d scalars", n);
        return fail(c, "%s computation %s must return %s, not %s", role, f->name,
                    want ? want : "scalars", sh(c, root));
    }
    if (root->type == GS_TUPLE) elems = (const gs_shape *const *)root->tuple;
    for (int i = 0; i < n; i++) {
        const gs_shape *e = elems[i], *p = param_shape(f, i), *q = param_shape(f, n + i);
        if (!is_scalar(e))
            return fail(c, "%s computation %s must return scalars, not %s", role, f->name,
                        sh(c, root));
        if (!is_scalar(p) || p->type != e->type)
            return fail(c, "parameter %d of %s computation %s is %s, but its result is %s", i, role,
                        f->name, sh(c, p), sh(c, e));
        if (!fp_eq(e->type, acc[i]))
            return fail(c, "%s computation %s accumulates %s, but init value %d is %s", role,
                        f->name, tn(e->type), i, tn(acc[i]));
        if (!is_scalar(q) || !fp_eq(q->type, elem[i]))
            return fail(c, "parameter %d of %s computation %s is %s, but the input elements are %s",
                        n + i, role, f->name, sh(c, q), tn(elem[i]));
        res[i] = e->type;
    }
    return GS_OK;
}

/* ------------------------------------------------------------------ windows, results */

/* Output sizes of a window over base dims (XLA's InferWindowOutputShape). */
gs_status gs_infer_window_out(ictx *c, const gs_window *w, const int64_t *base, int64_t *res) {
    for (int i = 0; i < w->n; i++) {
        const gs_window_dim *d = &w->dims[i];
        if (d->size <= 0)
            return fail(c, "window dimension %d has non-positive size %lld", i, (long long)d->size);
        if (d->stride <= 0 || d->lhs_dilate < 1 || d->rhs_dilate < 1)
            return fail(c, "window dimension %d has a non-positive stride or dilation", i);
        if (base[i] < 0) {
            res[i] = -1;
            continue;
        }
        int64_t dil_base = base[i] == 0 ? 0 : (base[i] - 1) * d->lhs_dilate + 1;
        int64_t padded = d->pad_lo + dil_base + d->pad_hi;
        if (padded < 0)
            return fail(c, "window dimension %d pads a base of %lld to a negative size (%lld)", i,
                        (long long)base[i], (long long)padded);
        int64_t dil_win = (d->size - 1) * d->rhs_dilate + 1;
        res[i] = dil_win > padded ? 0 : (padded - dil_win) / d->stride + 1;
    }
    return GS_OK;
}

/* The operands as the result: the one operand's shape, or a tuple of all of them. */
gs_status gs_infer_operands_as_result(ictx *c, gs_shape **out) {
    int n = c->in->n_operands;
    if (n == 1) return emit(c, out, opnd(c, 0));
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n ? n : 1);
    if (!elems) return oom(c);
    for (int k = 0; k < n; k++) elems[k] = opnd(c, k);
    return emit(c, out, new_tuple(c, n, elems));
}

/* ------------------------------------------------------------------ dispatch */

static gs_status check_operand_count(ictx *c) {
    const gs_op_info *info = gs_op_info_of(c->in->op);
    int n = c->in->n_operands, lo = info->min_operands, hi = info->max_operands;
    if (n >= lo && (hi < 0 || n <= hi)) return GS_OK;
    if (lo == hi)
        return fail(c, "takes %d operand%s, but %d were given", lo, lo == 1 ? "" : "s", n);
    if (hi < 0)
        return fail(c, "takes at least %d operand%s, but %d were given", lo, lo == 1 ? "" : "s", n);
    return fail(c, "takes %d to %d operands, but %d were given", lo, hi, n);
}

static gs_status infer(ictx *c, gs_shape **out) {
    const gs_instr *in = c->in;
    *out = NULL;
    if (check_operand_count(c) != GS_OK) return GS_ERR;
    for (int k = 0; k < in->n_operands; k++)
        if (!in->operands[k] || !in->operands[k]->shape)
            return fail(c, "operand %d has no shape", k);
    switch (gs_op_info_of(in->op)->family) {
    case GS_FAM_UNARY: return gs_infer_unary(c, out);
    case GS_FAM_BINARY:
    case GS_FAM_COMPARE: return gs_infer_binary(c, out);
    default: break;
    }
    switch (in->op) {
    case GS_OP_SELECT: return gs_infer_select(c, out);
    case GS_OP_CLAMP: return gs_infer_clamp(c, out);
    case GS_OP_MAP: return gs_infer_map(c, out);
    case GS_OP_REDUCE_PRECISION: return gs_infer_reduce_precision(c, out);
    case GS_OP_TRANSPOSE: return gs_infer_transpose(c, out);
    case GS_OP_REVERSE: return gs_infer_reverse(c, out);
    case GS_OP_SLICE: return gs_infer_slice(c, out);
    case GS_OP_DYNAMIC_SLICE: return gs_infer_dynamic_slice(c, out);
    case GS_OP_DYNAMIC_UPDATE_SLICE: return gs_infer_dynamic_update_slice(c, out);
    case GS_OP_CONCATENATE: return gs_infer_concatenate(c, out);
    case GS_OP_PAD: return gs_infer_pad(c, out);
    case GS_OP_GATHER: return gs_infer_gather(c, out);
    case GS_OP_SCATTER: return gs_infer_scatter(c, out);
    case GS_OP_DOT:
    case GS_OP_RAGGED_DOT: return gs_infer_dot(c, out);
    case GS_OP_CONVOLUTION: return gs_infer_convolution(c, out);
    case GS_OP_REDUCE: return gs_infer_reduce(c, out);
    case GS_OP_REDUCE_WINDOW: return gs_infer_reduce_window(c, out);
    case GS_OP_SELECT_AND_SCATTER: return gs_infer_select_and_scatter(c, out);
    case GS_OP_SORT: return gs_infer_sort(c, out);
    case GS_OP_TOPK: return gs_infer_topk(c, out);
    case GS_OP_FFT: return gs_infer_fft(c, out);
    case GS_OP_SCAN: return gs_infer_scan(c, out);
    case GS_OP_CHOLESKY: return gs_infer_cholesky(c, out);
    case GS_OP_TRIANGULAR_SOLVE: return gs_infer_triangular_solve(c, out);
    case GS_OP_BATCH_NORM_TRAINING:
    case GS_OP_BATCH_NORM_INFERENCE:
    case GS_OP_BATCH_NORM_GRAD: return gs_infer_batch_norm(c, out);
    case GS_OP_WHILE: return gs_infer_while(c, out);
    case GS_OP_CONDITIONAL: return gs_infer_conditional(c, out);
    case GS_OP_CALL:
    case GS_OP_FUSION: return gs_infer_call(c, out);
    case GS_OP_TUPLE: return gs_infer_tuple(c, out);
    case GS_OP_GET_TUPLE_ELEMENT: return gs_infer_gte(c, out);
    case GS_OP_COPY:
    case GS_OP_DOMAIN:
    case GS_OP_OPTIMIZATION_BARRIER: return emit(c, out, opnd(c, 0));
    case GS_OP_ADD_DEPENDENCY: return gs_infer_add_dependency(c, out);
    case GS_OP_AFTER_ALL: return gs_infer_after_all(c, out);
    case GS_OP_PARTITION_ID:
    case GS_OP_REPLICA_ID: return emit(c, out, gs_shape_scalar(c->a, GS_U32));
    case GS_OP_GET_DIMENSION_SIZE: return gs_infer_get_dimension_size(c, out);
    case GS_OP_SET_DIMENSION_SIZE: return gs_infer_set_dimension_size(c, out);
    case GS_OP_ALL_REDUCE:
    case GS_OP_ALL_REDUCE_START: return gs_infer_all_reduce(c, out);
    case GS_OP_ALL_GATHER:
    case GS_OP_ALL_GATHER_START:
    case GS_OP_REDUCE_SCATTER: return gs_infer_gather_scatter_collective(c, out);
    case GS_OP_ALL_TO_ALL: return gs_infer_all_to_all(c, out);
    case GS_OP_COLLECTIVE_PERMUTE:
    case GS_OP_COLLECTIVE_PERMUTE_START: return gs_infer_collective_permute(c, out);
    case GS_OP_COLLECTIVE_BROADCAST: return gs_infer_collective_broadcast(c, out);
    case GS_OP_RAGGED_ALL_TO_ALL: return gs_infer_ragged_all_to_all(c, out);
    case GS_OP_ALL_REDUCE_DONE: return emit(c, out, opnd(c, 0));
    case GS_OP_COPY_START: return gs_infer_copy_start(c, out);
    case GS_OP_COPY_DONE: return gs_infer_done(c, out, 0);
    case GS_OP_ALL_GATHER_DONE:
    case GS_OP_COLLECTIVE_PERMUTE_DONE:
    case GS_OP_ASYNC_DONE:
    case GS_OP_CALL_DONE: return gs_infer_done(c, out, 1);
    case GS_OP_ASYNC_UPDATE: return in->n_operands == 1 ? emit(c, out, opnd(c, 0)) : GS_OK;
    case GS_OP_OUTFEED: return gs_infer_outfeed(c, out);
    case GS_OP_SEND: return gs_infer_send(c, out);
    case GS_OP_SEND_DONE: return emit(c, out, gs_shape_token(c->a));
    case GS_OP_RECV_DONE: return gs_infer_recv_done(c, out);
    default: return gs_infer_check_written(c);
    }
}

gs_status gs_infer_written(const gs_module *m, const gs_instr *in, gs_arena *scratch, gs_diags *d,
                           gs_shape **inferred) {
    ictx c = {in, in->shape, scratch, scratch, d, m->num_partitions, m->replica_count};
    *inferred = NULL;
    if (!in->shape) return fail(&c, "has no shape");
    return infer(&c, inferred);
}

gs_status gs_infer_shape(gs_arena *a, const gs_instr *in, gs_shape **out, gs_diags *d) {
    const gs_module *m = in->parent ? in->parent->module : NULL;
    gs_arena scratch;
    gs_arena_init(&scratch);
    ictx c = {in, NULL, a, &scratch, d, m ? m->num_partitions : 1, m ? m->replica_count : 1};
    gs_shape *s = NULL;
    gs_status st = infer(&c, &s);
    if (st == GS_OK && s && a->failed) st = oom(&c);
    gs_arena_free(&scratch);
    *out = st == GS_OK ? s : NULL;
    return st;
}
