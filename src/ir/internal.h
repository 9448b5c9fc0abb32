/*
 * ir/internal.h — what the files of src/ir/ share beyond the public gspmd/ir.h: shape
 * inference as the verifier runs it, and the shape comparisons both use.
 */
#ifndef GSPMD_IR_INTERNAL_H
#define GSPMD_IR_INTERNAL_H

#include "gspmd/ir.h"

/* Equal ranks and dims, a `?` (unbounded) dim matching any. */
bool gs_shape_dims_compatible(const gs_shape *a, const gs_shape *b);
/* XLA's ShapeUtil::Compatible: same tree, element types and dims (gs_shape_dims_compatible);
 * layouts and dynamic flags ignored. ignore_fp: any two floating-point types match. */
bool gs_shape_compatible(const gs_shape *a, const gs_shape *b, bool ignore_fp);

/* Shape inference of in against its written shape (which it must have): the checks of the ops
 * whose shape is written and of the collectives run too. *inferred is the inferred shape (in
 * scratch), or NULL for an op whose shape is only written. Errors are located at in. */
gs_status gs_infer_written(const gs_module *m, const gs_instr *in, gs_arena *scratch, gs_diags *d,
                           gs_shape **inferred);

#endif /* GSPMD_IR_INTERNAL_H */
