/*
 * ir/analysis.h — analyses of the IR that several passes share (not public): which values count
 * 0, 1, 2, ... along a dim, and the index-parallel dims of a gather or scatter that follow from
 * it (XLA's hlo_sharding_util GetDimensionForIota and GetGatherScatterBatchParallelDims).
 * Propagation and the partitioner read them alike, so a dim one pass treats as parallel the
 * other partitions as parallel. Also a dot's or ragged-dot's dimension numbers, read once.
 */
#ifndef GSPMD_IR_ANALYSIS_H
#define GSPMD_IR_ANALYSIS_H

#include "gspmd/ir.h"

/* What a walk needs beyond the IR: an operand as the pass sees it (a pass may stand an op for
 * its operand) and the instruction calling a computation. */
typedef struct gs_ir_walk {
    /* Operand i of in; NULL: in->operands[i]. */
    const gs_instr *(*operand)(const gs_instr *in, int i, void *ud);
    /* The while or conditional calling the computation `in` belongs to, or NULL. */
    const gs_instr *(*caller)(const gs_instr *in, void *ud);
    void *ud;
} gs_ir_walk;

/* The dim along which `in` holds 0, 1, 2, ... (an iota, an s32 constant that counts, a
 * broadcast of one, a loop-invariant while state or a conditional's argument that is one), or
 * -1. */
int64_t gs_iota_dim(const gs_ir_walk *w, const gs_instr *in);

/* The implicit index-parallel dims of a gather or scatter: pairs (operand dim op_dims[k],
 * indices dim ix_dims[k]) where the index component that addresses the operand dim, a slice of
 * size 1 there, counts along the indices dim, which has the operand dim's size. `indices` is
 * the indices operand, ivd its index vector dim, index_map start_index_map (gather) or
 * scatter_dims_to_operand_dims, idx_batch the explicit indices batching dims (excluded),
 * slice[d] the slice (window) size along operand dim d. Returns the number of pairs; 0 when
 * there are none or two components count along one indices dim. */
int gs_gather_iota_parallel(const gs_ir_walk *w, const gs_instr *indices, int64_t ivd,
                            gs_ints index_map, gs_ints idx_batch, const gs_shape *operand,
                            const int64_t *slice, int64_t *op_dims, int64_t *ix_dims);

/* Which dim of a ragged-dot is ragged (k_dot.c has the semantics of each). */
typedef enum gs_ragged_mode {
    GS_RAGGED_NONE,            /* a dot */
    GS_RAGGED_NON_CONTRACTING, /* an lhs free dim; the rhs has one group dim */
    GS_RAGGED_CONTRACTING,     /* a contracting dim; the result a leading group dim */
    GS_RAGGED_BATCH,           /* a batch dim: a plain dot */
} gs_ragged_mode;

/* The dimension numbers of a dot or ragged-dot. */
typedef struct gs_dot_dims {
    gs_ints lb, rb, lc, rc; /* batch and contracting dims of each side */
    gs_ints rg;             /* the rhs group dims (ragged-dot) */
    int64_t ragged;         /* the lhs ragged dim, or -1 */
    gs_ragged_mode mode;
} gs_dot_dims;

/* Reads in's dimension numbers; false when the lists do not pair up or a ragged-dot does not
 * name one ragged dim (and one rhs group dim exactly when it is a free dim). Dims are not
 * checked against the operands' ranks. */
bool gs_dot_dims_of(const gs_instr *in, gs_dot_dims *d);

#endif /* GSPMD_IR_ANALYSIS_H */
