/*
 * ir/analysis.h — analyses of the IR that several passes share (not public): which values count
 * 0, 1, 2, ... along a dim, and the index-parallel dims of a gather or scatter that follow from
 * it (XLA's hlo_sharding_util GetDimensionForIota and GetGatherScatterBatchParallelDims).
 * Propagation and the partitioner read them alike, so a dim one pass treats as parallel the
 * other partitions as parallel.
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

#endif /* GSPMD_IR_ANALYSIS_H */
