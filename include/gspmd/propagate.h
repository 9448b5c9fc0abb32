/*
 * gspmd/propagate.h — sharding propagation: from a few annotations to a sharding on every
 * instruction, the way XLA's ShardingPropagation pass does it (GSPMD paper §3.5).
 *
 * The pass reads the shardings already on the module's instructions (user annotations,
 * `custom-call` Sharding constraints, SPMDFullToShardShape / SPMDShardToFullShape manual regions)
 * and writes a sharding on every instruction it can infer one for (gs_instr_set_sharding), in
 * place. Annotations are never overwritten. The result is deterministic.
 */
#ifndef GSPMD_PROPAGATE_H
#define GSPMD_PROPAGATE_H

#include "gspmd/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options, as XLA's ShardingPropagation constructor takes them. Zero-initialise for XLA's
 * defaults (not SPMD, nothing propagated to the entry's outputs or parameters unless the module
 * header's allow_spmd_sharding_propagation_to_* attributes say so). */
typedef struct gs_propagate_options {
    bool is_spmd;                  /* XLA's is_spmd */
    int n_to_output;               /* entries of to_output; 0 = take the module header's */
    const bool *to_output;         /* allow_spmd_sharding_propagation_to_output: one bool for
                                      all outputs, or one per output tuple element */
    int n_to_parameters;           /* entries of to_parameters; 0 = the module header's */
    const bool *to_parameters;     /* allow_spmd_sharding_propagation_to_parameters */
    bool cse_prevention_only;      /* XLA's cse_prevention_only */
    bool record_provenance;        /* keep where each sharding came from (for explain) */
} gs_propagate_options;

/* Propagates shardings through m in place. Fails (with located errors) on conflicting
 * annotations or shardings that do not fit the module (device counts, shard_as groups with
 * incompatible shapes). */
gs_status gs_propagate(gs_module *m, const gs_propagate_options *opts, gs_diags *d);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_PROPAGATE_H */
