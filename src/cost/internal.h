/*
 * cost/internal.h — what the peak-memory walk (cost.c) and the step model (step.c) share.
 */
#ifndef GSPMD_COST_INTERNAL_H
#define GSPMD_COST_INTERNAL_H

#include "gspmd/cost.h"

/* XLA's loop fusion on computation c: fused[id] is set for each value computed inside its
 * users' loops, never in memory of its own (an elementwise op, iota, scalar constant or
 * broadcast of a scalar, not the root, every user of which is one of those too). fused has
 * c->n_instrs entries. */
void gs_cost_loop_fused(const gs_computation *c, char *fused);

#endif
