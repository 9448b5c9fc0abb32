/*
 * dot_dims.c — the dimension numbers of a dot or ragged-dot, read once for the passes that
 * need them all (the interpreter's ragged-dot kernel, the partitioner's contraction space).
 */
#include "ir/analysis.h"

bool gs_dot_dims_of(const gs_instr *in, gs_dot_dims *d) {
    d->lb = gs_instr_ints(in, GS_ATTR_LHS_BATCH_DIMS);
    d->rb = gs_instr_ints(in, GS_ATTR_RHS_BATCH_DIMS);
    d->lc = gs_instr_ints(in, GS_ATTR_LHS_CONTRACTING_DIMS);
    d->rc = gs_instr_ints(in, GS_ATTR_RHS_CONTRACTING_DIMS);
    d->rg = gs_instr_ints(in, GS_ATTR_RHS_GROUP_DIMS);
    d->ragged = -1;
    d->mode = GS_RAGGED_NONE;
    if (d->lb.n != d->rb.n || d->lc.n != d->rc.n) return false;
    if (in->op != GS_OP_RAGGED_DOT) return true;
    gs_ints lr = gs_instr_ints(in, GS_ATTR_LHS_RAGGED_DIMS);
    if (lr.n != 1) return false;
    d->ragged = lr.v[0];
    d->mode = gs_ints_contains(d->lb, d->ragged)   ? GS_RAGGED_BATCH
              : gs_ints_contains(d->lc, d->ragged) ? GS_RAGGED_CONTRACTING
                                                   : GS_RAGGED_NON_CONTRACTING;
    return (d->mode == GS_RAGGED_NON_CONTRACTING) == (d->rg.n == 1) && d->rg.n <= 1;
}
