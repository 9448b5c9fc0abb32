/*
 * gspmd/sdy.h — Shardy's passes under the names Shardy's `sdy_opt` gives them, and sdy_opt's
 * output: `gspmd sdy-opt FILE ARGS...` runs a StableHLO module through the passes its arguments
 * name and prints the module as sdy_opt (MLIR's printer) does, so that Shardy's own FileCheck
 * tests grade gspmd (../shared/conformance, stage shardy).
 *
 * -sdy-populate-op-sharding-rules: every op with a factor rule in Shardy's registry carries
 * `sdy.sharding_rule = #sdy.op_sharding_rule<...>` (gs_op_rule_build).
 * -sdy-basic-propagate, -sdy-aggressive-propagate, -sdy-op-priority-propagate,
 * -sdy-user-priority-propagate: Shardy's propagation (gs_sdy_propagate) with the strategy and
 * priorities each pass nests. -sdy-propagation-pipeline: user-priority propagation, then every
 * dim closed as Shardy's export closes them. -sdy-add-data-flow-edges and
 * -sdy-sink-data-flow-edges change nothing: gspmd's propagation crosses loops, conditionals
 * and barriers by data-flow edges of its own.
 */
#ifndef GSPMD_SDY_H
#define GSPMD_SDY_H

#include "gspmd/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The passes gspmd knows by their sdy_opt flag. */
typedef enum gs_sdy_pass_kind {
    GS_SDY_POPULATE_OP_SHARDING_RULES, /* -sdy-populate-op-sharding-rules */
    GS_SDY_BASIC_PROPAGATE,            /* -sdy-basic-propagate */
    GS_SDY_AGGRESSIVE_PROPAGATE,       /* -sdy-aggressive-propagate */
    GS_SDY_OP_PRIORITY_PROPAGATE,      /* -sdy-op-priority-propagate */
    GS_SDY_USER_PRIORITY_PROPAGATE,    /* -sdy-user-priority-propagate */
    GS_SDY_PROPAGATION_PIPELINE,       /* -sdy-propagation-pipeline */
    GS_SDY_ADD_DATA_FLOW_EDGES,        /* -sdy-add-data-flow-edges */
    GS_SDY_SINK_DATA_FLOW_EDGES,       /* -sdy-sink-data-flow-edges */
    GS_SDY_N_PASSES
} gs_sdy_pass_kind;

/* One pass of a command line, with its options. */
typedef struct gs_sdy_pass {
    gs_sdy_pass_kind kind;         /* which pass */
    const char *flag;              /* the argument as given (for messages; not owned) */
    const char *options;           /* what follows `=` (`key=value key2=value2`, MLIR's quotes
                                      removed), or NULL; not owned */
    bool conservative_propagation; /* conservative-propagation=true */
    bool keep_sharding_rules;      /* the propagation passes' keep-sharding-rules=true */
    int strategy;                  /* propagation-strategy: a gs_sdy_strategy, or -1 unset */
    bool no_op_priority;           /* run-op-priority-propagation=false */
    bool dedup_functions_fully;    /* the pipeline's dedup-functions-fully=true */
} gs_sdy_pass;

/* The pass an sdy_opt argument names (`-sdy-basic-propagate`, `--sdy-basic-propagate`,
 * `-sdy-populate-op-sharding-rules=conservative-propagation=true`, the options optionally in
 * quotes). GS_ERR with a message in *why (static text) for an unknown pass, or an option the
 * implemented pass does not take. *out points into arg. */
gs_status gs_sdy_pass_parse(const char *arg, gs_sdy_pass *out, const char **why);

/* Runs passes[0..n) on m in order and returns the module printed as sdy_opt prints it
 * (malloc'd; gs_module_to_mlir_ex's sdy_opt form). A pass not implemented yet is an error
 * naming it; NULL with errors in d then, or when the module has no StableHLO form. */
char *gs_sdy_opt(gs_module *m, int n, const gs_sdy_pass *passes, gs_diags *d);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_SDY_H */
