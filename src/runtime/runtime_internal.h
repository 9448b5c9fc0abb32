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

/* ---- share.c: dots and convolutions computed once for the device threads holding equal
 * operands (gs_comm.share_work); the hooks of gs_work_sharing, ctx a gs_share. */
typedef struct gs_share gs_share;
gs_share *gs_share_new(void);
void gs_share_free(gs_share *s);
gs_value *gs_share_begin(void *ctx, const gs_instr *in, gs_value *const *ops, int n, void **claim);
void gs_share_end(void *ctx, void *claim, const gs_value *result);
/* Results taken instead of computed. */
int64_t gs_share_reused(const gs_share *s);
/* Should a process running `local` device threads share their work (more threads than cores)? */
bool gs_share_default(int local);

#endif
