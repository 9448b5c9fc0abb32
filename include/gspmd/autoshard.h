/*
 * gspmd/autoshard.h — automatic sharding: choose a sharding for every value of a module by
 * predicted cost, within memory (src/autoshard/), as XLA's auto-sharding pass and Alpa's
 * intra-operator pass formulate it:
 *
 *   values → candidate shardings on a mesh (each mesh axis splits one dimension, or none)
 *   ops    → strategies from their factor rule (gs_op_rule: which factor each axis splits)
 *            with a cost each (compute per device, the all-reduce a split contraction needs)
 *   edges  → the cost of resharding an operand from its value's sharding to what a strategy
 *            wants
 *   one integer program over all of them (one-hot strategy per value and op, a memory
 *   constraint per point of the entry's schedule), solved by CBC; a greedy choice when the
 *   solver is not built in, or finds nothing in time.
 *
 * Shardings already in the module are kept: they pin their values. The result is the module
 * annotated on every instruction of its entry and of the loop bodies, calls and branches it
 * runs, ready for gs_compile (with or without propagation).
 */
#ifndef GSPMD_AUTOSHARD_H
#define GSPMD_AUTOSHARD_H

#include "gspmd/cost.h"
#include "gspmd/sharding.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gs_autoshard_options {
    const gs_mesh *mesh;       /* the devices, as named axes (required) */
    const gs_machine *machine; /* what the costs are of (required) */
    double memory_limit;       /* bytes per device the values may take at once; 0: the
                                  machine's memory capacity */
    double time_limit;         /* seconds the solver may take; 0: 60 */
    bool greedy;               /* the greedy choice, without the solver */
    bool ignore_shardings;     /* choose every value, the input's shardings aside */
} gs_autoshard_options;

/* What the search did. */
typedef struct gs_autoshard_result {
    int n_values;        /* values (alias classes: a while's state, tuple elements...) */
    int n_pinned;        /* of them pinned by a sharding in the input */
    int n_ops;           /* ops with a choice of strategy */
    int n_columns;       /* variables of the integer program (0: not built) */
    int n_rows;          /* its constraints */
    const char *solver;  /* "cbc" or "greedy" */
    const char *why_greedy; /* why the greedy choice was taken (NULL when the solver's was) */
    bool optimal;        /* the solver proved its choice optimal (within its gap) */
    double objective;    /* the search's own estimate of the step, in seconds */
    double bound;        /* the solver's lower bound on it (= objective when optimal) */
    double replicated;   /* the same estimate with every value replicated */
    double peak_bytes;   /* the search's estimate of the peak per device */
    double solve_s;      /* seconds the solver took */
    bool kept_input;     /* ignore_shardings: the input's own shardings, pinned (the rest
                            chosen), predicted faster than the choice made without them, and
                            were kept (the result never predicts slower than they do) */
} gs_autoshard_result;

/* Whether this build has the CBC solver and its library loads here (else the choice is always
 * greedy). */
bool gs_autoshard_has_solver(void);

/* Chooses and writes the shardings of m (in place) for o->mesh; sets m->num_partitions to the
 * mesh's device count. Errors (located): a pinned sharding no candidate on the mesh denotes,
 * two pinned shardings of one value that differ, a memory limit nothing fits in (with the
 * smallest peak found). */
gs_status gs_autoshard(gs_module *m, const gs_autoshard_options *o, gs_autoshard_result *r,
                       gs_diags *d);

#ifdef __cplusplus
}
#endif

#endif /* GSPMD_AUTOSHARD_H */
