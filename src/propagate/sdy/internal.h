/*
 * internal.h — Shardy's propagation (issue 26), what the files of src/propagate/sdy/ share.
 *
 * Shardy propagates shardings along factors: each op's rule (gs_op_rule, src/sharding/rules.c)
 * maps operand and result dims to factors; a tensor's dim sharding is projected onto the
 * factors of that dim (projection.c), the axes every tensor agrees on are found for each factor
 * (factor.c), the tensors are expanded to them and projected back to dim shardings. The driver
 * (engine.c) does this op by op with MLIR's greedy worklist until nothing changes.
 *
 * The engine works on a graph of its own (sdy_graph: values, and ops over them with a rule),
 * built from the IR by from_ir.c, so that it needs to know nothing of tuples, get-tuple-element
 * or how the IR keeps a function's result shardings.
 *
 * An axis ref is gs_axis_ref: {axis, pre_size, size}; pre_size 0 means the whole axis (Shardy's
 * AxisRefAttr without sub-axis info), size is always its size. Axis lists are bounded
 * (SDY_MAX_AXES, kept small: shardings are copied on every change, and their size is most of
 * the propagation's time): a list that would grow past it stops growing, which only propagates
 * less, and a value whose own sharding lists more is opaque (read and written by no op).
 */
#ifndef GSPMD_PROPAGATE_SDY_INTERNAL_H
#define GSPMD_PROPAGATE_SDY_INTERNAL_H

#include "base/internal.h"
#include "gspmd/propagate.h"
#include "gspmd/sharding.h"

#define SDY_MAX_AXES 8

/* An ordered list of axis refs, major first. */
typedef struct sdy_axes {
    int n;
    gs_axis_ref v[SDY_MAX_AXES];
} sdy_axes;

/* ------------------------------------------------------------------ axes.c */

int64_t sdy_gcd(int64_t a, int64_t b);
/* Shardy's AxisRefAttr operations; mesh gives the whole axes' sizes. */
int64_t sdy_pre(const gs_axis_ref *a);                         /* pre-size: 1 for a whole axis */
int64_t sdy_next_pre(const gs_axis_ref *a);                    /* pre-size * size */
bool sdy_axis_eq(const gs_axis_ref *a, const gs_axis_ref *b);
bool sdy_contains(const gs_axis_ref *a, const gs_axis_ref *b); /* a contains b */
bool sdy_prefix_of(const gs_axis_ref *a, const gs_axis_ref *b); /* a is a prefix of b */
bool sdy_overlaps(const gs_axis_ref *a, const gs_axis_ref *b);
bool sdy_can_coexist(const gs_axis_ref *a, const gs_axis_ref *b);
/* The largest prefix of a not overlapping b; false when there is none. */
bool sdy_prefix_without_overlap(const gs_axis_ref *a, const gs_axis_ref *b, gs_axis_ref *out);
/* The largest prefix of a overlapping none of list; false when there is none. */
bool sdy_prefix_without_overlap_list(const gs_axis_ref *a, const sdy_axes *list,
                                     gs_axis_ref *out);
/* The greatest common prefix of a and b; false when none. */
bool sdy_common_prefix(const gs_axis_ref *a, const gs_axis_ref *b, gs_axis_ref *out);
/* An axis ref from its parts, made whole when it spans the whole axis. */
gs_axis_ref sdy_make_axis(const gs_mesh *m, int axis, int64_t pre, int64_t size);
/* Appends a, merged into the last entry when they are consecutive sub-axes. */
void sdy_add_or_merge(sdy_axes *l, const gs_axis_ref *a, const gs_mesh *m);
void sdy_push(sdy_axes *l, const gs_axis_ref *a);
bool sdy_axes_eq(const sdy_axes *x, const sdy_axes *y);
/* The greatest common prefix of two lists (getGreatestCommonPrefix). */
void sdy_axes_common_prefix(const sdy_axes *x, const sdy_axes *y, sdy_axes *out);
/* Whether x is a strict prefix of y (isStrictPrefix). */
bool sdy_axes_strict_prefix(const sdy_axes *x, const sdy_axes *y);
/* Product of the sizes. */
int64_t sdy_axes_size(const sdy_axes *l);
void sdy_axes_from_list(sdy_axes *out, const gs_axis_list *l);

/* ------------------------------------------------------------------ shardings */

/* A tensor's sharding as Shardy holds it (TensorShardingAttr on one mesh). */
typedef struct sdy_dim {
    sdy_axes axes;
    bool closed;
    int64_t priority; /* -1 when none */
} sdy_dim;

typedef struct sdy_sharding {
    int mesh;          /* index into the graph's meshes */
    int rank;
    sdy_dim *dims;     /* rank entries */
    sdy_axes replicated;
    sdy_axes unreduced;
    sdy_axes manual;   /* the manual axes of the region holding the value (implicit in Shardy:
                          its shardings inside a manual computation name the free axes only) */
} sdy_sharding;

bool sdy_sharding_eq(const sdy_sharding *a, const sdy_sharding *b);
/* No dim has axes and there are no replicated or unreduced axes (emptyAxes). */
bool sdy_sharding_empty_axes(const sdy_sharding *s);

/* ------------------------------------------------------------------ projection.c */

/* A factor's sharding in one tensor (FactorSharding). */
typedef struct sdy_factor_sh {
    bool mapped;      /* the tensor has this factor */
    bool closed;
    bool minor_most;  /* the last factor of its dim */
    sdy_axes axes;
    sdy_axes overflow;
} sdy_factor_sh;

/* One tensor's factor shardings (TensorFactorShardings). */
typedef struct sdy_tensor_fs {
    sdy_factor_sh *f; /* n_factors entries */
    sdy_axes replicated;
    sdy_axes unreduced;
    sdy_axes manual;  /* never propagated: conflicts like replicated axes */
} sdy_tensor_fs;

/* Operand and result factor shardings of one op under one rule (ShardingProjection). */
typedef struct sdy_projection {
    int n_factors;
    int n_operands, n_results;
    sdy_tensor_fs *t; /* n_operands then n_results */
} sdy_projection;

/* Builds the projection of shardings (NULL entries: none, open) through rule r; NULL on OOM. */
sdy_projection *sdy_project(gs_arena *a, const gs_op_rule *r, const gs_mesh *mesh,
                            const sdy_sharding *const *operands,
                            const sdy_sharding *const *results);
/* The dim sharding of tensor t (its factors per dim in tf) back from the projection. */
bool sdy_unproject(gs_arena *a, const gs_op_rule *r, const gs_tensor_factors *tf,
                   const sdy_tensor_fs *t, int mesh_index, const gs_mesh *mesh,
                   sdy_sharding *out);

/* ------------------------------------------------------------------ factor.c */

/* Directions as bits, so that union is | and intersection is &. */
typedef enum sdy_direction {
    SDY_DIR_NONE = 0,
    SDY_DIR_FORWARD = 1,
    SDY_DIR_BACKWARD = 2,
    SDY_DIR_BOTH = 3
} sdy_direction;

/* Basic factor propagation: expands each factor's sharding in every tensor to the axes all
 * tensors agree on. dirs: one per factor. updated: n_operands + n_results flags, set for the
 * tensors that changed. */
void sdy_propagate_factors(sdy_projection *p, const gs_op_rule *r, const sdy_direction *dirs,
                           const gs_mesh *mesh, bool conservative, bool *updated);
/* Aggressive factor propagation: conflicts resolved by preferring, factor by factor, the axes
 * of the largest tensor already sharded that way (elementwise ops: the most sharded factor),
 * results before operands. Scratch from a; false on OOM. */
bool sdy_propagate_factors_aggressive(gs_arena *a, sdy_projection *p, const gs_op_rule *r,
                                      const sdy_direction *dirs, bool conservative,
                                      bool elementwise, bool *updated);

/* ------------------------------------------------------------------ engine.c */

/* A tensor value: an op result or a function argument. */
typedef struct sdy_value {
    int rank;
    const int64_t *dims;
    sdy_sharding *sh; /* current sharding, or NULL */
    bool opaque;      /* its sharding lists more than SDY_MAX_AXES axes: kept as it is */
    int def;          /* defining op, or -1 (a function argument) */
    int n_users;
    int *users;       /* ops using it, in program order (an op may appear twice) */
    int n_uses;       /* uses by ops and by function returns (MLIR's use count) */
    int group;        /* its sharding group (sdy.sharding_group, HLO's shard_as), or -1 */
    void *origin;     /* what it stands for in the caller's IR */
    int leaf;         /* which array leaf of origin */
} sdy_value;

/* What op-priority propagation asks of an op (Shardy's op properties). */
#define SDY_OP_ELEMENTWISE (1u << 0)  /* elementwise (and sharding constraints) */
#define SDY_OP_SHAPE (1u << 1)        /* reshape, transpose, an offload custom-call */
#define SDY_OP_SLICE (1u << 2)        /* dynamic-slice, dynamic-update-slice */
#define SDY_OP_BROADCAST (1u << 3)    /* broadcast_in_dim */

/* An op: operands and results are values (-1: not a tensor, e.g. a token or a tuple). */
typedef struct sdy_op {
    const gs_op_rule *rule; /* NULL: nothing propagates through it */
    int n_operands, n_results;
    int *operands, *results;
    int parent;             /* enclosing op, or -1 */
    unsigned kind;          /* SDY_OP_* */
    int fixed_dir;          /* a propagation barrier's allowed direction (an sdy_direction),
                               whatever the op priorities say; -1 for other ops */
    const sdy_axes *manual_view; /* the edge into or out of a manual computation (XLA's
                               SPMDFullToShardShape, SPMDShardToFullShape): the manual axes it
                               crosses, or NULL. It propagates between the free axes only: the
                               outer slot's manual axes are dropped before and put back in
                               front after (Shardy's transformTargetSharding) */
    unsigned outer_slots;   /* with manual_view: bit t for each slot t outside the region */
    const void *origin;     /* the instruction it stands for (explain), or NULL */
    bool edge;              /* a data-flow edge (of origin) */
} sdy_op;

/* One change of a value's sharding, recorded for gs_propagate_explain. */
typedef struct sdy_event {
    int value;           /* the value whose sharding changed */
    int op;              /* the op that changed it, or -1 */
    int source;          /* the value it came from, or -1 */
    int group;           /* >= 0: it followed source as a member of this sharding group */
    const sdy_sharding *sh; /* the new sharding */
    bool aggressive;     /* the factor propagation */
    int op_round;        /* the op-priority round, or -1 */
    int64_t user_round;  /* the user-priority round (0, then each priority written), or -1 */
} sdy_event;

/* The program Shardy's propagation sees. */
typedef struct sdy_graph {
    gs_arena *a;
    int n_meshes;
    const gs_mesh **meshes;
    int n_values;
    sdy_value *values;
    int n_ops;
    sdy_op *ops;            /* in program (pre-)order */
    int n_groups;           /* sharding groups: members of group k share one sharding */
    int *group_first;       /* n_groups + 1 offsets into group_members */
    int *group_members;     /* values, group by group */
    int n_results;          /* the main function's results kept apart from the values returned */
    int *result_values;     /* the value each returns */
    sdy_sharding **result_sh; /* its sharding, or NULL */
    gs_vec *events;         /* sdy_event: every change, when recorded (else NULL) */
    int source;             /* the value the change being made comes from (engine scratch) */
    sdy_event now;          /* the run's strategy and rounds (engine scratch) */
    bool oom;               /* recording ran out of memory */
} sdy_graph;

/* The identity rule over a tensor of rank dims (n_operands operands, one result). */
const gs_op_rule *sdy_identity_rule(gs_arena *a, int rank, const int64_t *dims, int n_operands);
/* Gives every member of each sharding group the group's sharding (Shardy's
 * syncGroupMemberShardings): the one its members agree on; a group whose members disagree is
 * left alone. */
void sdy_sync_groups(sdy_graph *g);
/* The export half of -sdy-propagation-pipeline for the functions the import flattened
 * (calls.c): result shardings from returned values, names as Shardy's export gives them,
 * copies with the same shardings one function again, unreachable ones dropped. shared (the
 * functions were not flattened, dedup-functions-fully): names and calls are kept. */
gs_status sdy_export_calls(gs_module *m, bool shared, gs_diags *d);
/* The first import pass of -sdy-propagation-pipeline (constants.c, Shardy's
 * ConstantOrScalarSplitter): each use of a constant expression or of a broadcast scalar gets a
 * copy of its own, placed before the original; originals left unused go; constants print as
 * sdy.constant. */
gs_status sdy_split_constants(gs_module *m, gs_diags *d);
/* What gs_propagate_explain reads of a Shardy propagation (explain.c): one record per
 * sharding a value had, annotations first, then every change in order. */
typedef struct sdy_record {
    const char *value; /* its instruction's name (`name#k` for leaf k of several) */
    const char *sh;    /* the sharding, as Shardy writes it */
    const char *how;   /* where it came from, in words */
    int from;          /* the source's record at the time, or -1 */
} sdy_record;

typedef struct gs_sdy_explain {
    gs_arena a;
    gs_vec records;    /* sdy_record */
    gs_strmap last;    /* value name -> 1 + index of its last record */
} gs_sdy_explain;

gs_sdy_explain *sdy_explain_new(void);
/* Appends a record (its strings copied); false on allocation failure. */
bool sdy_explain_add(gs_sdy_explain *x, const char *value, const char *sh, const char *how,
                     int from);
/* sdy_explain_query, sdy_explain_free and gs_prop_info_from_sdy, which the GSPMD driver calls
 * too, are declared in ../internal.h. */

/* Runs the propagation to a fixed point; false on allocation failure. */
bool sdy_run(sdy_graph *g, const gs_sdy_options *o);

#endif
