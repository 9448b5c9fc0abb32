/*
 * fusion.h — loop fusion of f32 elementwise chains in the interpreter's plan (fusion.c): which
 * instructions of a computation run inside another's loop, and the fused loop itself.
 */
#ifndef GSPMD_INTERP_FUSION_H
#define GSPMD_INTERP_FUSION_H

#include "interp/kernels.h"

/* Per instruction id: 0 (evaluated alone), GS_FUSED_MEMBER (computed inside its only user's
 * loop, never materialised) or GS_FUSED_ROOT (computes its tree of members in one loop). */
enum { GS_FUSED_MEMBER = 1, GS_FUSED_ROOT = 2 };

/* The fusion plan of computation c evaluated in `order` (n instructions, operands first) with
 * uses[id] users each: *plan (malloc'd, indexed by instruction id), or NULL when nothing fuses.
 * GS_ERR only on allocation failure. */
gs_status gs_fusion_plan(const gs_computation *c, const gs_instr *const *order, int n,
                         const int *uses, signed char **plan);

/* Evaluates fused root `root` of c and its members from the values of its leaves (vals, by
 * instruction id; uses[id]: their remaining uses, for writing the result over a leaf that dies
 * here). *out is a new reference. */
gs_status gs_fusion_eval(gs_eval *ev, const gs_computation *c, const gs_instr *root,
                         const signed char *plan, gs_value *const *vals, const int *uses,
                         gs_value **out);

#endif
