/*
 * iota.c — values that count 0, 1, 2, ... along a dim, and the index-parallel dims of a gather
 * or scatter that follow (XLA's GetDimensionForIota and GetGatherScatterBatchParallelDims).
 */
#include "ir/analysis.h"

static const gs_instr *operand(const gs_ir_walk *w, const gs_instr *in, int i) {
    return w->operand ? w->operand(in, i, w->ud) : in->operands[i];
}

/* Whether an s32 constant counts along dim i (of size > 1): the first such dim, or -1. */
static int64_t counting_constant(const gs_instr *in) {
    const gs_literal_ir *l = in->literal;
    const gs_shape *s = in->shape;
    if (!l || l->elided || !l->data) return -1;
    int64_t n = gs_shape_elements(s);
    if ((size_t)n * sizeof(int32_t) > l->n_bytes) return -1;
    bool is[GS_MAX_RANK];
    for (int i = 0; i < s->rank; i++) is[i] = true;
    int64_t idx[GS_MAX_RANK] = {0};
    const int32_t *v = l->data;
    for (int64_t p = 0; p < n; p++) {
        for (int i = 0; i < s->rank; i++)
            if (v[p] != idx[i]) is[i] = false;
        for (int i = s->rank - 1; i >= 0; i--) {
            if (++idx[i] < s->dims[i]) break;
            idx[i] = 0;
        }
    }
    for (int i = 0; i < s->rank; i++)
        if (is[i] && s->dims[i] > 1) return i;
    return -1;
}

static int64_t iota_dim(const gs_ir_walk *w, const gs_instr *in, int depth) {
    if (depth > 64) return -1;
    if (in->op == GS_OP_IOTA) return gs_instr_int(in, GS_ATTR_IOTA_DIMENSION, 0);
    if (in->shape->type != GS_S32) return -1;
    if (in->op == GS_OP_CONSTANT) return counting_constant(in);
    if (in->op == GS_OP_BROADCAST) {
        int64_t d = iota_dim(w, operand(w, in, 0), depth + 1);
        gs_ints dims = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        return d >= 0 && d < dims.n ? dims.v[d] : -1;
    }
    if (in->op != GS_OP_GET_TUPLE_ELEMENT || operand(w, in, 0)->op != GS_OP_PARAMETER ||
        in->parent->is_entry || !w->caller)
        return -1;
    const gs_instr *caller = w->caller(in, w->ud);
    int64_t index = gs_instr_int(in, GS_ATTR_INDEX, 0);
    if (!caller) return -1;
    /* A while loop's state element the body passes on unchanged: its initial value. */
    if (caller->op == GS_OP_WHILE && operand(w, caller, 0)->op == GS_OP_TUPLE &&
        gs_instr_comp(caller, GS_ATTR_BODY) == in->parent) {
        const gs_instr *root = in->parent->root;
        if (root->op == GS_OP_TUPLE && index < root->n_operands &&
            operand(w, root, (int)index) == in) {
            const gs_instr *init = operand(w, caller, 0);
            if (index < init->n_operands)
                return iota_dim(w, operand(w, init, (int)index), depth + 1);
        }
    }
    /* A branch's argument element. */
    if (caller->op == GS_OP_CONDITIONAL) {
        gs_computation *called[64];
        int k = gs_instr_called(caller, called, 64);
        for (int i = 0; i < k && i + 1 < caller->n_operands; i++) {
            if (called[i] != in->parent) continue;
            const gs_instr *arg = operand(w, caller, i + 1);
            if (arg->op == GS_OP_TUPLE && index < arg->n_operands)
                return iota_dim(w, operand(w, arg, (int)index), depth + 1);
        }
    }
    return -1;
}

int64_t gs_iota_dim(const gs_ir_walk *w, const gs_instr *in) { return iota_dim(w, in, 0); }

int gs_gather_iota_parallel(const gs_ir_walk *w, const gs_instr *indices, int64_t ivd,
                            gs_ints index_map, gs_ints idx_batch, const gs_shape *operand_shape,
                            const int64_t *slice, int64_t *op_dims, int64_t *ix_dims) {
    int nmap = index_map.n;
    if (nmap > GS_MAX_RANK) return 0;
    int64_t par[GS_MAX_RANK];
    for (int i = 0; i < nmap; i++) par[i] = -1;
    /* Through copies to a concatenate along the index vector dim: its pieces are components. */
    const gs_instr *look = indices;
    while (look->op == GS_OP_COPY) look = operand(w, look, 0);
    if (look->op == GS_OP_CONCATENATE) indices = look;
    gs_ints cdims = gs_instr_ints(indices, GS_ATTR_DIMENSIONS);
    if (indices->op == GS_OP_CONCATENATE && cdims.n && cdims.v[0] == ivd) {
        int done = 0;
        for (int j = 0; j < indices->n_operands; j++) {
            const gs_instr *op = operand(w, indices, j);
            int64_t count = op->shape->rank > ivd ? op->shape->dims[ivd] : 1;
            int64_t dim = gs_iota_dim(w, op);
            if (dim >= 0 && dim != ivd)
                for (int k = 0; k < count && done + k < nmap; k++) par[done + k] = dim;
            done += (int)count;
        }
    } else {
        int64_t dim = gs_iota_dim(w, indices);
        if (dim >= 0 && dim != ivd) {
            int64_t count = indices->shape->rank > ivd ? indices->shape->dims[ivd] : 1;
            for (int k = 0; k < count && k < nmap; k++) par[k] = dim;
        }
    }
    int n = 0;
    for (int i = 0; i < nmap; i++) {
        int64_t ip = par[i], opd = index_map.v[i];
        if (ip < 0) continue;
        for (int k = 0; k < n; k++)
            if (ix_dims[k] == ip) return 0;
        if (opd < 0 || opd >= operand_shape->rank) continue;
        if (slice[opd] == 1 && !gs_ints_contains(idx_batch, ip)) {
            if (operand_shape->dims[opd] != indices->shape->dims[ip]) return 0;
            ix_dims[n] = ip;
            op_dims[n++] = opd;
        }
    }
    return n;
}
