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
    int n_pinned_params;           /* entries of pinned_params (0: none pinned) */
    const bool *pinned_params;     /* entry parameters that keep their sharding whatever
                                      to_parameters says (those a user sharded: gs_compile) */
    bool cse_prevention_only;      /* XLA's cse_prevention_only */
    bool record_provenance;        /* keep where each sharding came from (for explain) */
} gs_propagate_options;

/* Propagates shardings through m in place. Fails (with located errors) on conflicting
 * annotations or shardings that do not fit the module (device counts, shard_as groups with
 * incompatible shapes). Warnings (e.g. a while loop and its body annotated differently, which
 * XLA resolves by taking the loop's) go to d as well. */
gs_status gs_propagate(gs_module *m, const gs_propagate_options *opts, gs_diags *d);

/* Provenance kept by a propagation run: for every instruction, each change of its sharding
 * with the instruction it came from, the rule, the direction and the aggressiveness level. */
typedef struct gs_propagate_info gs_propagate_info;

/* Like gs_propagate; when info is non-NULL, records provenance and hands it to the caller in
 * *info (free it with gs_propagate_info_free, before the module). *info is NULL on failure. */
gs_status gs_propagate_ex(gs_module *m, const gs_propagate_options *opts,
                          gs_propagate_info **info, gs_diags *d);

/* Appends to sb the chain the sharding of the instruction named `name` (a leading '%' is
 * ignored) came from: one line per hop back to an annotation, each with the sharding, the
 * direction (forward from an operand, backward from a user, shard group, computation, refined,
 * annotation), the instruction it came from, the rule and the aggressiveness level; then the
 * instruction's own history when its sharding changed more than once. GS_ERR with an error
 * when no instruction has that name. */
gs_status gs_propagate_explain(const gs_propagate_info *info, const char *name, gs_sb *sb,
                               gs_diags *d);
void gs_propagate_info_free(gs_propagate_info *info);

/* ------------------------------------------------------------------ Shardy's propagation */

/* Shardy's propagation strategies (its pass names: -sdy-basic-propagate,
 * -sdy-aggressive-propagate, ...). */
typedef enum gs_sdy_strategy {
    GS_SDY_BASIC,                /* only what every tensor of an op agrees on; skip conflicts */
    GS_SDY_AGGRESSIVE,           /* resolve conflicts: the largest tensor's axes win */
    GS_SDY_BASIC_THEN_AGGRESSIVE /* basic to a fixed point, then aggressive */
} gs_sdy_strategy;

/* Options, as Shardy's propagation passes name them. Zero-initialise for basic propagation;
 * Shardy's full propagation as JAX runs it (-sdy-propagation-pipeline) is
 * {GS_SDY_AGGRESSIVE, .op_priority = true, .user_priority = true, .pipeline = true}. */
typedef struct gs_sdy_options {
    gs_sdy_strategy strategy; /* propagation-strategy */
    bool conservative;        /* conservative-propagation: never split an axis into sub-axes */
    bool op_priority;         /* op-priority propagation: elementwise and shape ops first, then
                                 the rest, in five rounds */
    bool user_priority;       /* user-priority propagation: dims marked p0 first, then p1, ... */
    bool pipeline;            /* the import and export passes of -sdy-propagation-pipeline around
                                 it: every call site gets its own copy of its function, whose
                                 arguments and results are data-flow edges with the call's
                                 operands and results; after, copies with the same shardings are
                                 one function again, named as Shardy's export names them, and a
                                 function's result shardings are its returned values'. Without
                                 it, as in Shardy's single passes, nothing crosses a call but a
                                 sdy.func_data_flow_edge, and only the main function's results
                                 are propagated to. */
    bool dedup_functions_fully; /* with pipeline: its dedup-functions-fully=true. Functions stay
                                 shared: an argument is an edge from that operand of every call,
                                 a call's result one from the callee's returned value
                                 (AddFuncDataFlowEdges); names are kept. */
} gs_sdy_options;

/* Shardy's propagation over m in place: shardings move along each op's factors (gs_op_rule)
 * between Shardy (named) shardings on one mesh; dims written closed are never extended, open
 * ones (`?`) are. Values without a sharding that propagation reaches get one; nothing else
 * changes. GS_ERR only on allocation failure. */
gs_status gs_sdy_propagate(gs_module *m, const gs_sdy_options *opts, gs_diags *d);
/* Like gs_sdy_propagate; when info is non-NULL, records where each sharding came from (the op
 * it went through, the value it came from, the strategy and round) for gs_propagate_explain,
 * and hands it to the caller in *info (free with gs_propagate_info_free). */
gs_status gs_sdy_propagate_ex(gs_module *m, const gs_sdy_options *opts, gs_propagate_info **info,
                              gs_diags *d);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_PROPAGATE_H */
