/*
 * runtime/internal.h — helpers shared by the runtime's files (not a public interface).
 */
#ifndef GSPMD_RUNTIME_INTERNAL_H
#define GSPMD_RUNTIME_INTERNAL_H

#include "gspmd/numeric.h"
#include "gspmd/runtime.h"

/* Appends from's errors and notes to `to` (a device thread's diagnostics to the caller's). */
void gs_append_diags(gs_diags *to, const gs_diags *from);

/* dst[i] = dst[i] op src[i] for n elements of type t (op a builtin, not GS_RED_NONE). */
void gs_reduce_into(gs_type t, gs_reduce_op op, void *dst, const void *src, int64_t n);
/* dst[i] = a[i] op b[i] (dst distinct from a and b): the first step of a fold, in one pass. */
void gs_reduce_pair(gs_type t, gs_reduce_op op, void *dst, const void *a, const void *b, int64_t n);
/* The builtin reduction a computation performs, or GS_RED_NONE. */
gs_reduce_op gs_reduce_op_of(const gs_computation *c);

/* ---- async.c: -start collectives on a helper thread per device (gs_comm.async_collectives) */
typedef struct gs_async gs_async;
/* The helper of device ctx (which must outlive it); NULL on failure. */
gs_async *gs_async_new(const gs_device_ctx *ctx);
/* Waits for the helper's jobs to end, stops it and frees what is left. */
void gs_async_free(gs_async *a);
/* Has the helper collectives not yet finished (so others must queue behind them)? */
bool gs_async_busy(gs_async *a);
/* A synchronous collective behind the helper's queue: waits for its result. */
gs_status gs_async_sync(gs_async *a, const gs_instr *in, gs_value *const *ops, int n,
                        gs_value **out, gs_diags *d);
/* Is op a -start whose collective the helper can carry (all-reduce, all-gather,
 * collective-permute)? */
bool gs_async_start_op(gs_opcode op);
/* A -start handed to the helper: *out is its value with a placeholder result. */
gs_status gs_async_start(gs_async *a, const gs_instr *in, gs_value *const *ops, int n,
                         gs_value **out, gs_diags *d);
/* The -done of `start`, if it is one of a's: waits, then *out / *st (see gs_collectives). */
bool gs_async_finish(gs_async *a, const gs_value *start, gs_value **out, gs_diags *d,
                     gs_status *st);
/* Runs collective `in` on device x's operands now (the helper's and the direct path); a -start
 * gives its bare result. */
gs_status gs_collective_run(const gs_device_ctx *x, const gs_instr *in, gs_value *const *ops, int n,
                            gs_value **out, gs_diags *d);
/* The value a -start has in its declared shape, around `result` (taken over). */
gs_status gs_collective_wrap_start(const gs_instr *in, gs_value *const *ops, int n,
                                   gs_value *result, gs_value **out, gs_diags *d);

/* ---- share.c: dots and convolutions computed once for the device threads holding equal
 * operands (gs_comm.share_work); the hooks of gs_work_sharing, ctx a gs_share. */
typedef struct gs_share gs_share;
gs_share *gs_share_new(void);
void gs_share_free(gs_share *s);
gs_value *gs_share_begin(void *ctx, const gs_instr *in, gs_value *const *ops, int n, void **claim);
void gs_share_end(void *ctx, void *claim, const gs_value *result);
/* Results taken instead of computed. */
int64_t gs_share_reused(const gs_share *s);
/* OpenBLAS on one thread, its idle workers stopped: what a process running device threads (or
 * one device of several, under MPI) wants before it makes arguments or runs (executor.c). */
void gs_blas_single_thread(void);
/* Should a process running `local` device threads share their work (more threads than cores)? */
bool gs_share_default(int local);

#endif
