/*
 * runtime_internal.h — helpers shared by the runtime's files (not a public interface).
 */
#ifndef GSPMD_RUNTIME_INTERNAL_H
#define GSPMD_RUNTIME_INTERNAL_H

#include "gspmd/numeric.h"
#include "gspmd/runtime.h"

/* dst[i] = dst[i] op src[i] for n elements of type t (op a builtin, not GS_RED_NONE). */
void gs_reduce_into(gs_type t, gs_reduce_op op, void *dst, const void *src, int64_t n);
/* dst[i] = a[i] op b[i] (dst distinct from a and b): the first step of a fold, in one pass. */
void gs_reduce_pair(gs_type t, gs_reduce_op op, void *dst, const void *a, const void *b, int64_t n);
/* The builtin reduction a computation performs, or GS_RED_NONE. */
gs_reduce_op gs_reduce_op_of(const gs_computation *c);

#endif
