/*
 * internal.h — what the files of src/propagate/ share (not public): the pass context, the
 * per-instruction node (current sharding, users, flags, shard group, provenance), and the
 * helpers each file exports to the others.
 *
 * The pass follows XLA's ShardingPropagation: annotations are read into nodes, then forward
 * (operand -> user) and backward (user -> operand) inference run over every computation in
 * post order at aggressiveness levels 0..3, each level to a fixed point, with shard groups and
 * called computations (while, conditional, call) kept consistent along the way. Shardings live
 * in the module's arena; everything else (nodes, user lists, orders) in a scratch arena freed at
 * the end. Nodes hang off gs_instr.aux while the pass runs.
 *
 * Conventions: a helper returning `const gs_sharding *` returns NULL for "no sharding" (XLA's
 * std::nullopt); an allocation failure also returns NULL and sets the context's sticky `oom`
 * flag, which the driver turns into an error at the end.
 */
#ifndef GSPMD_PROPAGATE_INTERNAL_H
#define GSPMD_PROPAGATE_INTERNAL_H

#include "base/internal.h"
#include "gspmd/propagate.h"
#include "gspmd/sharding.h"

/* How a sharding reached an instruction (provenance). */
typedef enum gs_prop_dir {
    GS_PROP_DIR_ANNOTATION, /* written by the user (attribute, Sharding custom-call, --shard) */
    GS_PROP_DIR_FORWARD,    /* inferred from operands */
    GS_PROP_DIR_BACKWARD,   /* inferred from users */
    GS_PROP_DIR_GROUP,      /* from a member of its shard_as / shard_like group */
    GS_PROP_DIR_CALL,       /* copied between a caller and its called computation */
    GS_PROP_DIR_REFINE,     /* a partial annotation's unspecified dims refined */
    GS_PROP_DIR_FIXUP       /* set by the pass's pre- or post-processing */
} gs_prop_dir;

/* One change of an instruction's sharding. */
typedef struct gs_prop_step {
    const gs_sharding *sharding; /* the sharding it got */
    const gs_instr *from;        /* the instruction it came from, or NULL */
    int from_step;               /* index of `from`'s step current at the time, or -1 */
    const char *rule;            /* the rule that produced it (static text) */
    unsigned char dir;           /* gs_prop_dir */
    signed char level;           /* aggressiveness 0..3, or -1 outside the levels */
} gs_prop_step;

/* Where a node is an operand of one of its users. */
typedef struct gs_prop_slot {
    int first; /* the first operand index */
    int count; /* how many of the user's operands it is */
} gs_prop_slot;

/* Per-instruction state of the pass; gs_instr.aux points here while the pass runs. */
typedef struct gs_prop_node {
    gs_instr *in;               /* the instruction */
    const gs_sharding *sh;      /* current sharding, or NULL */
    gs_instr **users;           /* distinct users in creation (text) order, aliases resolved */
    gs_prop_slot *slots;        /* [i]: where this node is users[i]'s operand */
    int n_users;                /* entries of users */
    int stamp;                  /* scratch: the user last seen reading this node */
    gs_instr *caller;           /* while/conditional/call calling the parent computation, or
                                   NULL (XLA's computation_map) */
    gs_instr *alias;            /* non-NULL: a removed Sharding custom-call standing for this
                                   operand (XLA replaces it by its operand) */
    const int64_t *unspec;      /* sorted unspecified dims of a partial annotation */
    int n_unspec;               /* entries of unspec (valid when has_unspec) */
    bool has_unspec;            /* XLA's unspecified_dims map holds this instruction */
    bool provided;              /* user annotation: never overwritten (XLA provided_shardings) */
    bool copy_like;             /* a Sharding custom-call XLA replaces by a copy */
    bool inf_ops;               /* cache: already inferred from operands this level */
    bool inf_users;             /* cache: already inferred from users this level */
    bool inf_group;             /* cache: already inferred from its shard group this level */
    bool orig_had;              /* cse_prevention_only: had a sharding before the pass */
    const gs_sharding *orig;    /* cse_prevention_only: the sharding before the pass */
    int group;                  /* index into the context's groups, or -1 */
    int mark;                   /* scratch for traversals (post order) */
    int comp;                   /* index of the parent computation in module order */
    gs_prop_step *steps;        /* provenance: every change, oldest first (when recording) */
    int n_steps;                /* entries of steps */
    int cap_steps;              /* capacity of steps */
} gs_prop_node;

/* A shard_as or shard_like group. */
typedef struct gs_prop_group {
    int64_t id;         /* the group id */
    bool as;            /* shard_as (else shard_like) */
    gs_instr **members; /* members in the order they joined */
    int n;              /* members */
    int cap;            /* capacity */
} gs_prop_group;

/* The pass context. */
typedef struct gs_prop_ctx {
    gs_module *m;               /* the module, updated in place */
    gs_arena *a;                /* where transforms allocate: `tmp` while inferring, else the
                                   module arena */
    gs_arena *perm;             /* the module arena: shardings that stay */
    gs_arena tmp;               /* temporaries of one inference step, freed after it (shardings
                                   that are set are copied to `perm`) */
    gs_arena scratch;           /* nodes, user lists, orders, provenance */
    gs_diags *d;                /* errors */
    bool is_spmd;               /* XLA's is_spmd */
    bool to_output;             /* any propagation to the entry's outputs allowed */
    bool to_params;             /* any propagation to the entry's parameters allowed */
    int n_out_vec;              /* entries of out_vec */
    const bool *out_vec;        /* allow_spmd_sharding_propagation_to_output vector */
    int n_par_vec;              /* entries of par_vec */
    const bool *par_vec;        /* allow_spmd_sharding_propagation_to_parameters vector */
    bool cse_only;              /* cse_prevention_only */
    bool record;                /* keep provenance */
    int level;                  /* current aggressiveness (for provenance), -1 outside */
    gs_prop_node *nodes;        /* one per instruction of the module */
    int n_nodes;                /* entries of nodes */
    gs_instr ***orders;         /* per computation (module order): post order */
    int *n_order;               /* per computation: entries of orders[i] */
    gs_prop_group *groups;      /* shard groups */
    int n_groups;               /* entries of groups */
    int cap_groups;             /* capacity of groups */
    gs_instr *entry_root;       /* the entry computation's root */
    bool root_while_free;       /* the entry root is a while XLA would move behind a copy (its
                                   annotation then lives on the copy): not pinned, not a root */
    bool oom;                   /* sticky: an allocation failed */
} gs_prop_ctx;

/* The node of an instruction. */
/* Records an allocation failure (the sticky flag); NULL, for `return gs_prop_oom(c);`. */
static inline const gs_sharding *gs_prop_oom(gs_prop_ctx *c) {
    c->oom = true;
    return NULL;
}

#define GS_PROP_NODE(in) ((gs_prop_node *)(in)->aux)
/* The current sharding of an instruction (NULL: none). */
#define GS_PROP_SHARDING(in) (GS_PROP_NODE(in)->sh)

/* ------------------------------------------------------------------ graph.c */

/* Operand i of `in` with removed Sharding custom-calls looked through. */
gs_instr *gs_prop_operand(const gs_instr *in, int i);
/* Where `in` is an operand of `user` (aliases looked through), or NULL when it is not one. */
const gs_prop_slot *gs_prop_slot_of(const gs_instr *in, const gs_instr *user);
/* Builds nodes, user lists, post orders, the computation map and shard groups, reads the
 * annotations and checks them. GS_ERR with located errors on bad annotations. */
gs_status gs_prop_setup(gs_prop_ctx *c);
/* Whether `in` is a custom-call with that target. */
bool gs_prop_is_cc(const gs_instr *in, const char *target);
/* Whether `in` behaves as a copy (a copy, or a Sharding custom-call XLA replaced by one). */
bool gs_prop_is_copy(const gs_instr *in);
/* XLA's IsElementwise for `in`. */
bool gs_prop_is_elementwise(const gs_instr *in);
/* Number of users that are not the root of their computation (XLA ComputeNonRootUsers). */
int gs_prop_non_root_users(const gs_instr *in);
/* Parses `unspecified_dims=[..]` from a custom-call's backend_config into a sorted list (arena
 * a). Returns the count (0 when absent); -1 on malformed text. */
int gs_prop_parse_unspec(gs_arena *a, const gs_instr *in, int64_t **out);

/* ------------------------------------------------------------------ query.c: shapes */

/* XLA's ShapeUtil::GetLeafCount (arrays and tokens count one; tuples the sum). */
int gs_prop_leaf_count(const gs_shape *s);
/* Leaves a tuple sharding of this shape has (at least 1). */
int gs_prop_required_leaves(const gs_shape *s);
/* XLA's CompatibleIgnoringElementType: same dims / tuple structure, element types ignored. */
bool gs_prop_compatible(const gs_shape *a, const gs_shape *b);
/* Bytes of an array or tuple shape (XLA ByteSizeOf, tokens 0). */
int64_t gs_prop_bytes(const gs_shape *s);

/* ------------------------------------------------------------------ query.c: shardings */

bool gs_prop_spatial(const gs_sharding *s);      /* XLA IsSpatiallyPartitioned */
bool gs_prop_tile_maximal(const gs_sharding *s); /* IsTileMaximal (tuples: every leaf) */
bool gs_prop_manual(const gs_sharding *s);       /* IsManual (tuples: every leaf) */
bool gs_prop_replicated(const gs_sharding *s);   /* IsReplicated (tuples: every leaf) */
bool gs_prop_manual_subgroup(const gs_sharding *s); /* has a manual subgroup dim */
bool gs_prop_partial(const gs_sharding *s);      /* has a replicated subgroup dim */
int64_t gs_prop_num_tiles(const gs_sharding *s); /* NumTiles (1 unless tiled) */
/* The device of a maximal sharding (tuples: when every leaf is the same one), or -1. */
int64_t gs_prop_unique_device(const gs_sharding *s);
/* XLA's IsShardingMoreSpecific (tuples leaf by leaf). */
bool gs_prop_more_specific(const gs_sharding *lhs, const gs_sharding *rhs);
/* Whether s has the `_sharding_propagation_cse_prevention` marker. */
bool gs_prop_is_cse_marked(const gs_sharding *s);
/* A deep copy of s (tile arrays, tuple leaves, metadata) in arena a; NULL on failure. */
gs_sharding *gs_prop_persist(gs_arena *a, const gs_sharding *s);

/* ------------------------------------------------------------------ transform.c */

/* Element `index` of a tuple-shaped value's sharding (the sharding itself when not a tuple). */
const gs_sharding *gs_prop_sub(gs_prop_ctx *c, const gs_sharding *s, const gs_shape *shape,
                               int index);
/* The tuple sharding of `shape` with every leaf `leaf` (XLA SingleTuple); `leaf` for arrays. */
const gs_sharding *gs_prop_single_tuple(gs_prop_ctx *c, const gs_shape *shape,
                                        const gs_sharding *leaf);
/* `cur` (or all-replicated when NULL / not a tuple) with element `index` replaced by `sub`. */
const gs_sharding *gs_prop_with_sub(gs_prop_ctx *c, const gs_sharding *cur, const gs_shape *shape,
                                    int index, const gs_sharding *sub);
const gs_sharding *gs_prop_replicate_dims(gs_prop_ctx *c, const gs_sharding *s, int n,
                                          const int64_t *dims);
const gs_sharding *gs_prop_replicate_except(gs_prop_ctx *c, const gs_sharding *s, int n,
                                            const int64_t *keep);
/* XLA ReplicateAllDataDims; data_rank < 0 keeps the rank. */
const gs_sharding *gs_prop_replicate_all(gs_prop_ctx *c, const gs_sharding *s, int data_rank);
const gs_sharding *gs_prop_remove_dims(gs_prop_ctx *c, const gs_sharding *s, int n,
                                       const int64_t *dims);
/* XLA TransposeSharding: result data dim i is s's dim perm[i] (n = data rank or tile rank). */
const gs_sharding *gs_prop_transpose(gs_prop_ctx *c, const gs_sharding *s, int n, const int *perm);
/* XLA TransposeShardingWithCollapsedDims (NULL when a dropped dim is sharded). */
const gs_sharding *gs_prop_transpose_collapsed(gs_prop_ctx *c, const gs_sharding *s, int n_src,
                                               const int64_t *src_to_tgt, int n_tgt,
                                               const int64_t *tgt_to_src);
/* XLA PropagateShardingAlongDimsAndReplicateOthers. */
const gs_sharding *gs_prop_along_dims(gs_prop_ctx *c, const gs_sharding *s, int n,
                                      const int64_t *src_dims, const int64_t *tgt_dims,
                                      int tgt_rank);
/* XLA ReverseSharding. */
const gs_sharding *gs_prop_reverse(gs_prop_ctx *c, const gs_sharding *s, int n,
                                   const int64_t *dims);
/* XLA PropagateShardingThroughReshape. */
const gs_sharding *gs_prop_reshape(gs_prop_ctx *c, const gs_shape *from, const gs_shape *to,
                                   const gs_sharding *s);
/* s's tile assignment viewed with data dims `dims` (n entries) and the same subgroups. */
const gs_sharding *gs_prop_retile(gs_prop_ctx *c, const gs_sharding *s, int n, const int64_t *dims);

/* ------------------------------------------------------------------ merge.c */

/* XLA MergeShardingIfCompatible: the merged sharding, or NULL when not compatible. */
const gs_sharding *gs_prop_merge_compatible(gs_prop_ctx *c, const gs_sharding *to_merge,
                                            int64_t min_tiles, const gs_sharding *dst);
/* XLA MergeSharding: *dst becomes the merged sharding; returns whether it is better. */
bool gs_prop_merge(gs_prop_ctx *c, const gs_sharding *to_merge, const gs_sharding **dst,
                   bool may_combine);
/* XLA FindCommonSharding (n >= 1). */
const gs_sharding *gs_prop_common(gs_prop_ctx *c, int n, const gs_sharding *const *v,
                                  const gs_sharding *def);
/* XLA ReturnImprovedShardingImpl: the improved sharding of a value of `shape` now sharded
 * `cur` (NULL: none), or NULL when `from` does not improve it. */
const gs_sharding *gs_prop_improved(gs_prop_ctx *c, const gs_sharding *from, const gs_sharding *cur,
                                    const gs_shape *shape, bool may_combine, bool aggressive);
/* XLA's IsSubTilingOrEqualSharding for an array of shape `shape`. */
bool gs_prop_subtiling(gs_prop_ctx *c, const gs_shape *shape, const gs_sharding *potential,
                       const gs_sharding *sharding);

/* ------------------------------------------------------------------ driver.c: state changes */

/* Sets in's sharding (NULL clears) and records provenance. */
void gs_prop_set(gs_prop_ctx *c, gs_instr *in, const gs_sharding *s, gs_prop_dir dir,
                 const gs_instr *from, const char *rule);
/* XLA MaybeImproveInstructionSharding; records provenance on success. */
bool gs_prop_improve(gs_prop_ctx *c, gs_instr *in, const gs_sharding *s, bool may_combine,
                     bool aggressive, gs_prop_dir dir, const gs_instr *from, const char *rule);
/* XLA MaybeImproveInstructionSubSharding for tuple element `index`. */
bool gs_prop_improve_sub(gs_prop_ctx *c, gs_instr *in, const gs_sharding *s, int index,
                         bool may_combine, bool aggressive, gs_prop_dir dir, const gs_instr *from,
                         const char *rule);

/* ------------------------------------------------------------------ forward.c / backward.c */

/* XLA SupportSpatialPartitioning. */
bool gs_prop_supports(gs_prop_ctx *c, const gs_instr *in, bool to_output, bool to_params);
/* XLA CanPropagateThroughAtAggressiveLevel. */
bool gs_prop_level_ok(const gs_instr *in, int level);
/* XLA InferShardingFromOperands. */
bool gs_prop_forward(gs_prop_ctx *c, gs_instr *in, int level);
/* XLA GetShardingFromUser: the sharding `user` asks of operand `in` (NULL: none). */
const gs_sharding *gs_prop_from_user(gs_prop_ctx *c, const gs_instr *in, const gs_instr *user,
                                     int level);
/* XLA InferShardingFromUsers. */
bool gs_prop_backward(gs_prop_ctx *c, gs_instr *in, int level);
/* XLA InferShardingFromShardGroup. */
bool gs_prop_from_group(gs_prop_ctx *c, gs_instr *in, int level, const gs_prop_group *g);

/* ------------------------------------------------------------------ dot.c */

/* One dim correspondence of a dot or dot-like convolution (-1: absent). */
typedef struct gs_prop_dim {
    int64_t lhs, rhs, out, spatial;
} gs_prop_dim;

/* XLA DotConvolutionDimsInfo. */
typedef struct gs_prop_dot {
    int n_batch, n_contract, n_lhs_nc, n_rhs_nc, n_conv; /* entries of each list */
    gs_prop_dim batch[GS_MAX_RANK], contract[GS_MAX_RANK]; /* batch, contracting dims */
    gs_prop_dim lhs_nc[GS_MAX_RANK], rhs_nc[GS_MAX_RANK];  /* non-contracting dims */
    gs_prop_dim conv[GS_MAX_RANK];                         /* true convolution spatial dims */
    int lhs_rank, rhs_rank, out_rank;                    /* ranks */
} gs_prop_dot;

/* XLA ParseDotGeneralFromDot / ParseConvolutionDimsInfo. */
void gs_prop_dot_dims(const gs_instr *in, gs_prop_dot *d);
/* XLA InferDotOperandSharding: the sharding of operand `index` from the dot's sharding `dot_sh`
 * (may be NULL) and, when `other` is given, the other operand's. */
const gs_sharding *gs_prop_dot_operand(gs_prop_ctx *c, const gs_prop_dot *d,
                                       const gs_sharding *dot_sh, const gs_sharding *other,
                                       int index, bool may_combine);
/* Forward inference of dot and convolution. */
bool gs_prop_dot_forward(gs_prop_ctx *c, gs_instr *in, bool may_combine);
bool gs_prop_conv_forward(gs_prop_ctx *c, gs_instr *in, bool may_combine);

/* ------------------------------------------------------------------ gather.c */

bool gs_prop_gather_forward(gs_prop_ctx *c, gs_instr *in, bool may_combine);
bool gs_prop_scatter_forward(gs_prop_ctx *c, gs_instr *in, bool may_combine);
const gs_sharding *gs_prop_gather_from_user(gs_prop_ctx *c, const gs_instr *in,
                                            const gs_instr *user);
const gs_sharding *gs_prop_scatter_from_user(gs_prop_ctx *c, const gs_instr *in,
                                             const gs_instr *user);

/* ------------------------------------------------------------------ manual.c */

/* XLA InferUnspecifiedDimsFromOperand / FromUsers / FromShardGroup for a partial annotation;
 * *conv_op receives the manual conversion custom-call refined with it, if any. */
bool gs_prop_unspec_from_operand(gs_prop_ctx *c, gs_instr *in, gs_instr **conv_op);
bool gs_prop_unspec_from_users(gs_prop_ctx *c, gs_instr *in, int level, gs_instr **conv_op);
bool gs_prop_unspec_from_group(gs_prop_ctx *c, gs_instr *in, const gs_prop_group *g);

/* ------------------------------------------------------------------ rule.c */

/* The sharding of one tensor of `in` (an operand, or a result leaf) from another's through the
 * op's factor rule: dims made of the same single pass-through factor share tiles, every other
 * dim replicates. NULL when the op has only the default rule. */
const gs_sharding *gs_prop_rule_map(gs_prop_ctx *c, const gs_instr *in, bool src_is_result,
                                    int src_index, const gs_sharding *s, bool dst_is_result,
                                    int dst_index);

/* ------------------------------------------------------------------ graph.c (calls) */

/* The instructions XLA keeps sharded alike with `in` (GetRelatedInstructions): a while, its
 * body root and parameter and condition parameter; a conditional and its branch roots; a call
 * and its callee's root; a branch or callee parameter and the caller's operand. Returns the
 * count written to out (capacity max). */
int gs_prop_related(gs_prop_ctx *c, gs_instr *in, gs_instr **out, int max);

/* ------------------------------------------------------------------ explain.c */

/* Appends the provenance chain of `in` (see gs_propagate_explain). */
void gs_prop_explain(const gs_prop_ctx *c, const gs_instr *in, gs_sb *sb);

/* ------------------------------------------------------------------ Shardy's provenance */

/* What a Shardy propagation recorded (src/propagate/sdy/explain.c). */
typedef struct gs_sdy_explain gs_sdy_explain;
gs_status sdy_explain_query(const gs_sdy_explain *x, const char *name, gs_sb *sb, gs_diags *d);
void sdy_explain_free(gs_sdy_explain *x);
/* A provenance holding x (owned), for gs_propagate_explain; NULL (x freed) on OOM. */
gs_propagate_info *gs_prop_info_from_sdy(gs_sdy_explain *x);

#endif /* GSPMD_PROPAGATE_INTERNAL_H */
