/*
 * k_dynamic_shape.c — the kernels of the dynamic-shape ops: get-dimension-size,
 * set-dimension-size and dynamic-reshape. A value holds only the valid elements of a dynamic dim
 * (its dims are the current sizes, within the instruction's bounds).
 */
#include "kernels.h"

#include <string.h>

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

gs_kernel_fn gs_kernel_dynamic_shape(gs_opcode op) {
    switch (op) {
    case GS_OP_GET_DIMENSION_SIZE: return k_get_dimension_size;
    case GS_OP_SET_DIMENSION_SIZE: return k_set_dimension_size;
    case GS_OP_DYNAMIC_RESHAPE: return k_dynamic_reshape;
    default: return NULL;
    }
}
