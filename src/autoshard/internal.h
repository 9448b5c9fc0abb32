/*
 * src/autoshard/internal.h — the search problem gs_autoshard builds (problem.c) and solves
 * (solve.c).
 *
 * Values are alias classes of array leaves: a tuple's element and its operand, a while's state
 * and its body's parameter and root, a call's operands and its parameters are one value. Each
 * value has candidate shardings (each mesh axis splits one of its dimensions, or none:
 * candidate 0 is replicated). Elementwise ops follow their first operand (their result joins
 * its value; their compute is a cost of that value's candidates); any other op has strategies
 * (which factor of its rule each mesh axis splits, plus "compute it whole, keep a slice"),
 * each giving its results' candidates and wanting its operands' candidates.
 */
#ifndef GSPMD_AUTOSHARD_INTERNAL_H
#define GSPMD_AUTOSHARD_INTERNAL_H

#include "gspmd/autoshard.h"
#include "base/internal.h"

enum { AS_MAX_AXES = 8, MAX_CAND = 128 };

/* One candidate sharding of a value: the dim each mesh axis splits (-1: none). */
typedef struct as_cand {
    int8_t dim[AS_MAX_AXES];
    int64_t shards; /* product of the sizes of the axes that split */
} as_cand;

/* A value (an alias class of array leaves). */
typedef struct as_value {
    int rank;               /* its dims (every member has them) */
    const int64_t *dims;
    const bool *dynamic;    /* rank flags (NULL: none): a dynamic dim is never split */
    double bytes;           /* bytes of its largest member, whole */
    int n_cand;             /* candidates; 0 replicated */
    as_cand *cand;
    double *node_cost;      /* per candidate: seconds of the elementwise ops that follow it */
    int pinned;             /* the candidate a sharding of the input fixes, or -1 */
    const gs_instr *pinned_by;
    const gs_instr *member; /* one instruction it is a value of (for messages) */
    int choice;             /* the chosen candidate */
} as_value;

/* An op with a choice of strategy. */
typedef struct as_op {
    const gs_instr *in;
    int seq;                /* its place in program order */
    int n_strat;
    double *cost;           /* per strategy: seconds (times the runs of its computation) */
    int n_res, n_opd;       /* result leaves, operands */
    int *res_value;         /* n_res values (-1: a leaf that is not an array) */
    int *opd_value;         /* n_opd values (-1: a tuple or token operand) */
    double *opd_bytes;      /* n_opd bytes of each operand, whole */
    int *out;               /* [k * n_res + j]: the candidate strategy k gives result j */
    int *req;               /* [k * n_opd + i]: the candidate strategy k wants of operand i */
    double mult;            /* runs of its computation per step */
    int whole;              /* the strategy that computes it whole, replicated */
    int choice;             /* the chosen strategy */
} as_op;

/* A reshard between two values (an elementwise op's other operand and its result). */
typedef struct as_edge {
    int from, to;
    double bytes, mult;
    int seq;
} as_edge;

/* A point of the entry's schedule: the values live there and their bytes (whole). */
typedef struct as_point {
    int n;
    int *value;
    double *bytes;
    double whole; /* the sum of bytes */
    const gs_instr *at; /* the entry instruction it is at */
} as_point;

typedef struct as_problem {
    gs_arena *a;
    const gs_mesh *mesh;
    const gs_machine *mc;
    int n_axes;
    int n_values;
    as_value *values;
    int n_ops;
    as_op *ops;
    int n_edges;
    as_edge *edges;
    int n_points;
    as_point *points;
    double memory_limit;
} as_problem;

/* Seconds to reshard a value of `bytes` (whole) from candidate f to candidate t. */
double as_reshard_s(const as_problem *p, const as_cand *f, const as_cand *t, double bytes);

/* The cost and peak of the choices in p->values[].choice and p->ops[].choice. */
double as_objective(const as_problem *p);
double as_peak(const as_problem *p);

/* Chooses every value's candidate and op's strategy (values' and ops' choice): by CBC when
 * built with it and o->greedy is false, else (or when it finds nothing in time) greedily.
 * Fills r's solver fields. GS_ERR (located) when no choice fits the memory limit. */
gs_status as_solve(as_problem *p, const gs_autoshard_options *o, gs_autoshard_result *r,
                   gs_diags *d);

#endif
