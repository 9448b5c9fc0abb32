/*
 * gspmd/builder.h — building HLO: instructions appended to a computation of a module that a pass
 * is writing, with their shapes computed from the operands, module-wide unique names, and the
 * source span of the instruction being processed (so errors on generated code point at the
 * user's line).
 *
 * A gs_names table keeps every name used in one module (instructions and computations); the
 * builders of that module share it. Builders never fail loudly: allocation failure returns NULL
 * and sets the builder's sticky `failed` flag, which the pass checks at its boundary. Shapes must
 * be valid for the op (an internal invariant, asserted); the built module is checked by
 * gs_module_verify in the tests.
 */
#ifndef GSPMD_BUILDER_H
#define GSPMD_BUILDER_H

#include "gspmd/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The names used in one module, and a counter for fresh ones. Zero-initialise; free with
 * gs_names_free. Keys live in the module's arena. */
typedef struct gs_names {
    struct gs_strmap *used; /* every name taken (allocated on first use; private) */
    long next;              /* suffix tried next for a fresh name */
} gs_names;

/* Marks name as used. GS_ERR on allocation failure. */
gs_status gs_names_reserve(gs_names *n, gs_arena *a, const char *name);
/* A fresh name built from stem ("stem", else "stem.N"), reserved, in arena a; NULL on failure. */
const char *gs_names_fresh(gs_names *n, gs_arena *a, const char *stem);
void gs_names_free(gs_names *n);
/* name as an HLO name (XLA's lexer: [A-Za-z_][A-Za-z0-9_.-]*): a '_' in front of a name that
 * does not start with a letter or '_', every other character '_'; "_" for an empty name; at most
 * max - 1 bytes, written to out. */
void gs_names_hlo(const char *name, char *out, size_t max);

/* Appends instructions to one computation. */
typedef struct gs_builder {
    gs_module *m;          /* module being built (owns all it allocates) */
    gs_computation *comp;  /* computation receiving new instructions */
    gs_names *names;       /* the module's name table (shared) */
    gs_span span;          /* span given to new instructions */
    const char *stem;      /* name stem of new instructions, or NULL for the op name */
    bool failed;           /* sticky: an allocation failed */
} gs_builder;

/* A builder appending to comp (in m) with names from `names`. */
void gs_builder_init(gs_builder *b, gs_module *m, gs_computation *comp, gs_names *names);

/* ---- generic */

/* An instruction of opcode op with the given result shape (copied) and operands, no attributes,
 * named fresh (or `name` exactly when non-NULL: it must be unused). */
gs_instr *gs_build_named(gs_builder *b, const char *name, gs_opcode op, const gs_shape *shape,
                         int n_ops, gs_instr *const *ops);
gs_instr *gs_build(gs_builder *b, gs_opcode op, const gs_shape *shape, int n_ops,
                   gs_instr *const *ops);
/* Attribute setters (values copied into the module arena). NULL-safe on in. */
void gs_build_set_int(gs_builder *b, gs_instr *in, gs_attr_key k, int64_t v);
void gs_build_set_ints(gs_builder *b, gs_instr *in, gs_attr_key k, int n, const int64_t *v);
void gs_build_set_bool(gs_builder *b, gs_instr *in, gs_attr_key k, bool v);
void gs_build_set_ident(gs_builder *b, gs_instr *in, gs_attr_key k, const char *s);
void gs_build_set_comp(gs_builder *b, gs_instr *in, gs_attr_key k, gs_computation *c);
void gs_build_set_groups(gs_builder *b, gs_instr *in, const gs_replica_groups *g);
/* A copy of attribute a of another module's instruction, its called computations replaced by
 * map(ctx, callee) (NULL map: kept). */
void gs_build_copy_attr(gs_builder *b, gs_instr *in, const gs_attr *a,
                        gs_computation *(*map)(void *ctx, gs_computation *c), void *ctx);

/* ---- leaves */

gs_instr *gs_build_parameter(gs_builder *b, int64_t number, const gs_shape *shape,
                             const char *name);
/* A constant of array shape `shape` whose data (row-major, the type's storage) is copied. */
gs_instr *gs_build_constant(gs_builder *b, const gs_shape *shape, const void *data);
/* A scalar constant of type t with value v (rounded / wrapped to t; pred: v != 0). */
gs_instr *gs_build_scalar(gs_builder *b, gs_type t, double v);
gs_instr *gs_build_scalar_i(gs_builder *b, gs_type t, int64_t v);
/* The lowest / highest value of t (-inf / +inf for floats), the identities of max / min. */
gs_instr *gs_build_lowest(gs_builder *b, gs_type t);
gs_instr *gs_build_highest(gs_builder *b, gs_type t);
/* s32[n] constant with the given values. */
gs_instr *gs_build_s32_table(gs_builder *b, int64_t n, const int64_t *v);
gs_instr *gs_build_iota(gs_builder *b, gs_type t, int rank, const int64_t *dims, int dim);
/* partition-id() as u32[]. */
gs_instr *gs_build_partition_id(gs_builder *b);

/* ---- elementwise */

gs_instr *gs_build_unary(gs_builder *b, gs_opcode op, gs_instr *x);
/* Same-shape binary op; the result shape is x's. */
gs_instr *gs_build_binary(gs_builder *b, gs_opcode op, gs_instr *x, gs_instr *y);
/* compare(x, y), direction=dir ("LT", "EQ", ...): pred of x's dims. */
gs_instr *gs_build_compare(gs_builder *b, gs_instr *x, gs_instr *y, const char *dir);
gs_instr *gs_build_select(gs_builder *b, gs_instr *p, gs_instr *t, gs_instr *f);
gs_instr *gs_build_convert(gs_builder *b, gs_instr *x, gs_type t);
/* copy(x). */
gs_instr *gs_build_copy(gs_builder *b, gs_instr *x);

/* ---- data movement */

/* broadcast(x) to `dims` (rank entries), x's dim i going to result dim bdims[i]. */
gs_instr *gs_build_broadcast(gs_builder *b, gs_instr *x, int rank, const int64_t *dims, int n_b,
                             const int64_t *bdims);
gs_instr *gs_build_reshape(gs_builder *b, gs_instr *x, int rank, const int64_t *dims);
/* Result dim i is x's dim perm[i]. */
gs_instr *gs_build_transpose(gs_builder *b, gs_instr *x, const int *perm);
/* slice with strides (NULL: all 1). */
gs_instr *gs_build_slice(gs_builder *b, gs_instr *x, const int64_t *start, const int64_t *limit,
                         const int64_t *stride);
/* dynamic-slice(x, idx[0..rank)) of `sizes`. */
gs_instr *gs_build_dynamic_slice(gs_builder *b, gs_instr *x, gs_instr *const *idx,
                                 const int64_t *sizes);
gs_instr *gs_build_dynamic_update_slice(gs_builder *b, gs_instr *x, gs_instr *upd,
                                        gs_instr *const *idx);
/* pad(x, v) with per-dim lo, hi, interior (NULL: 0). */
gs_instr *gs_build_pad(gs_builder *b, gs_instr *x, gs_instr *v, const int64_t *lo,
                       const int64_t *hi, const int64_t *interior);
gs_instr *gs_build_concatenate(gs_builder *b, int n, gs_instr *const *xs, int dim);
/* reduce(x, init) over dims with computation comp (single operand). */
gs_instr *gs_build_reduce(gs_builder *b, gs_instr *x, gs_instr *init, int n, const int64_t *dims,
                          gs_computation *comp);
gs_instr *gs_build_tuple(gs_builder *b, int n, gs_instr *const *xs);
gs_instr *gs_build_gte(gs_builder *b, gs_instr *x, int index);

/* ---- collectives (channel_id given; all-reduce/all-gather/reduce-scatter use global ids) */

gs_instr *gs_build_all_reduce(gs_builder *b, gs_instr *x, const gs_replica_groups *g,
                              gs_computation *comp, int64_t channel);
/* all-gather along dim over groups of group_size devices. */
gs_instr *gs_build_all_gather(gs_builder *b, gs_instr *x, int dim, int64_t group_size,
                              const gs_replica_groups *g, int64_t channel);
gs_instr *gs_build_reduce_scatter(gs_builder *b, gs_instr *x, int dim, int64_t group_size,
                                  const gs_replica_groups *g, gs_computation *comp,
                                  int64_t channel);
/* all-to-all splitting and concatenating dim. */
gs_instr *gs_build_all_to_all(gs_builder *b, gs_instr *x, int dim, const gs_replica_groups *g,
                              int64_t channel);
gs_instr *gs_build_collective_permute(gs_builder *b, gs_instr *x, int n_pairs,
                                      const int64_t (*pairs)[2], int64_t channel);

/* ---- computations */

/* A new computation `(a: t[], b: t[]) -> t[] { ROOT op(a, b) }` named fresh from stem, appended to
 * b->m (before any entry computation so printing keeps callees first). */
gs_computation *gs_build_scalar_computation(gs_builder *b, const char *stem, gs_opcode op,
                                            gs_type t);
/* Inserts computation c (already appended to m) just before m's entry in m->comps. */
void gs_module_move_before_entry(gs_module *m, gs_computation *c);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_BUILDER_H */
