/*
 * gspmd/sharding.h — the sharding representation every pass shares: XLA's HloSharding with
 * its tile assignments (iota and explicit), parsing and printing of XLA's text, value equality,
 * per-device queries, the transforms propagation needs (transpose, reshape, broadcast, reduce,
 * partial replication, merge), a JAX-style front end (named meshes and PartitionSpecs), pictures
 * of a layout, and the per-op factor rules that propagation, partitioning and the cost model read.
 *
 * Tile assignments stay in XLA's iota form (`devices=[4,2]<=[2,4]T(1,0)`) whenever the device
 * order is one, and every query and transform on an iota assignment costs O(rank), whatever the
 * device count; explicit lists are materialised only when a result has no iota form. Explicit
 * lists that happen to be iota are stored (and printed) in iota form.
 *
 * Every constructor returns a canonical sharding, exactly as XLA canonicalises (HloSharding::
 * PartialTile / Subgroup): a partial tile whose data dims are all 1 is {replicated}, size-1
 * subgroup dims drop, subgroup dims of one type merge and sort (manual, unreduced, replicated),
 * and the members of each replication group are sorted. So structural equality is value
 * equality; metadata never takes part in it.
 *
 * Memory: shardings, tile assignments and meshes live in a caller's arena (usually the module's)
 * and are immutable once built; nothing here frees. Functions that build return GS_ERR (or NULL)
 * only when an allocation fails, except the parsers, which report bad input as diagnostics.
 */
#ifndef GSPMD_SHARDING_H
#define GSPMD_SHARDING_H

#include "gspmd/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most tile dims (data dims plus subgroup dims) and iota reshape dims a sharding may have. */
enum { GS_MAX_TILE_RANK = 48, GS_MAX_IOTA_RANK = 64 };

/* ------------------------------------------------------------------ tile assignments */

/* An N-d array of device ids over the tile dims. Either iota form: the devices 0..n-1 reshaped
 * to `reshape`, transposed by `perm` and reshaped to `dims` (canonical: no size-1 reshape dims,
 * no two transposed-adjacent dims that could merge; one dim [n] when there is no transpose), or
 * an explicit row-major list of distinct non-negative ids. Treat as a value; arrays are in an
 * arena. Invariant: an explicit list is never an iota (constructors convert it). */
typedef struct gs_tile_assignment {
    int rank;                 /* number of tile dims (>= 1) */
    const int64_t *dims;      /* rank sizes, each >= 1 */
    int64_t n;                /* product of dims: the number of tiles (devices) */
    bool iota;                /* iota form; else explicit */
    int n_reshape;            /* iota: number of reshape dims (>= 1) */
    const int64_t *reshape;   /* iota: reshape dims, major to minor */
    const int *perm;          /* iota: transpose perm over the reshape dims */
    const int64_t *strides;   /* iota: row-major stride of each reshape dim */
    const int64_t *devices;   /* explicit: n device ids, row-major over dims */
    const int64_t *by_device; /* explicit: n (device, position) pairs sorted by device */
} gs_tile_assignment;

/* An iota tile assignment over dims (rank entries, product n) from reshape dims and a transpose
 * perm (perm NULL: none; n_reshape 0: the single dim [n]). Canonicalises. The product of the
 * reshape dims must equal the product of dims and perm be a permutation (asserted; the parser
 * checks input). GS_ERR on allocation failure. */
gs_status gs_tile_iota(gs_arena *a, int rank, const int64_t *dims, int n_reshape,
                       const int64_t *reshape, const int *perm, gs_tile_assignment *out);
/* A tile assignment from an explicit row-major list of n = prod(dims) distinct non-negative
 * device ids (copied); stored in iota form when the list is one. GS_ERR on allocation failure
 * or when an id repeats or is negative (the parser reports those first, with a message). */
gs_status gs_tile_explicit(gs_arena *a, int rank, const int64_t *dims, const int64_t *devices,
                           gs_tile_assignment *out);
/* The device at flat (row-major) tile position pos, 0 <= pos < n. O(rank) for iota. */
int64_t gs_tile_device_at(const gs_tile_assignment *t, int64_t pos);
/* The device at a full tile index (rank entries). */
int64_t gs_tile_device(const gs_tile_assignment *t, const int64_t *index);
/* The flat position of device d, or -1 when d is not in the assignment. O(rank) for iota,
 * O(log n) for explicit lists. */
int64_t gs_tile_position(const gs_tile_assignment *t, int64_t device);
/* The same devices in row-major order viewed with other dims (same product). */
gs_status gs_tile_reshape(gs_arena *a, const gs_tile_assignment *t, int rank, const int64_t *dims,
                          gs_tile_assignment *out);
/* Transposes the tile dims: out dim i is t's dim perm[i]. Stays iota when the result has an
 * iota form that a common refinement of the dims shows (the usual case), else materialises. */
gs_status gs_tile_transpose(gs_arena *a, const gs_tile_assignment *t, const int *perm,
                            gs_tile_assignment *out);
/* Writes the n device ids row-major into out (n entries). O(n). */
void gs_tile_materialize(const gs_tile_assignment *t, int64_t *out);
/* Same dims and same device at every index. O(rank) for two iota assignments. */
bool gs_tile_equal(const gs_tile_assignment *x, const gs_tile_assignment *y);

/* Scratch capacity for refined factor lists (tile dims plus reshape dims). */
enum { GS_MAX_FACTORS = GS_MAX_TILE_RANK + GS_MAX_IOTA_RANK };

/* Common refinement of two factorisations x (nx entries) and y (ny entries) of one count, both
 * major to minor (size-1 entries allowed): writes the refined factors major to minor into f
 * (GS_MAX_FACTORS entries), with the index of the x entry and of the y entry each lies in.
 * Returns the number of factors, or -1 when no common refinement exists (e.g. [2,3] against
 * [3,2]). The engine behind O(rank) iota transposes and arithmetic tile indices. */
int gs_tile_refine(const int64_t *x, int nx, const int64_t *y, int ny, int64_t *f, int *ix,
                   int *iy);
/* A hash consistent with gs_tile_equal. */
uint64_t gs_tile_hash(const gs_tile_assignment *t);
/* Appends `[dims]<=[reshape]T(perm)` (iota) or `[dims]d0,d1,...` (explicit). */
void gs_tile_print(gs_sb *sb, const gs_tile_assignment *t);

/* ------------------------------------------------------------------ meshes and named shardings */

/* A reference to a mesh axis or to a sub-axis of it (`'x':(2)4`: the part of size 4 after the
 * major part of size 2). */
typedef struct gs_axis_ref {
    int axis;         /* index into the mesh's axes */
    int64_t pre_size; /* sub-axis: product of the sizes major to it (>= 1); 0 = the whole axis */
    int64_t size;     /* its size (the axis size for a whole axis) */
} gs_axis_ref;

/* An ordered list of axis refs: the axes sharding one tensor dim, major first. */
typedef struct gs_axis_list {
    int n;                /* number of refs */
    const gs_axis_ref *v; /* n refs */
    bool open;            /* named dim sharding written with `?` (open to more axes) */
} gs_axis_list;

/* A named device mesh: axes with names and sizes over devices, row-major by default. */
typedef struct gs_mesh {
    int n_axes;                 /* number of axes (0 for an empty mesh) */
    const char *const *names;   /* n_axes axis names */
    const int64_t *sizes;       /* n_axes axis sizes */
    int64_t n_devices;          /* product of sizes */
    gs_tile_assignment devices; /* rank n_axes (rank 1 [1] when empty): device at each coordinate */
    bool device_order;          /* the device order was written (not the default iota) */
} gs_mesh;

/* What a named (V3) sharding body says. */
typedef enum gs_named_form {
    GS_NAMED_DIMS,       /* `[{'x'}, {}]` dim shardings, maybe with replicated/unreduced/manual */
    GS_NAMED_REPLICATED, /* `mesh[...], replicated` */
    GS_NAMED_UNREDUCED,  /* `mesh[...], unreduced` */
    GS_NAMED_MANUAL,     /* `mesh[...], manual` */
    GS_NAMED_MAXIMAL     /* `maximal_mesh[device_id=N]` */
} gs_named_form;

/* A sharding as XLA's named (V3) text spells it; kept beside the tiled model so that it prints
 * back as written. */
typedef struct gs_named {
    gs_named_form form;       /* which body */
    gs_mesh mesh;             /* the mesh (empty for MAXIMAL) */
    int64_t device;           /* MAXIMAL: the device */
    int n_dims;               /* DIMS: number of tensor dims */
    const gs_axis_list *dims; /* DIMS: n_dims axis lists */
    gs_axis_list replicated;  /* `replicated={...}` axes */
    gs_axis_list unreduced;   /* `unreduced={...}` axes */
    gs_axis_list manual;      /* `manual={...}` axes */
    const char *reduction;    /* `unreduced=max{...}`: "max"; NULL when not written */
    const int64_t *priorities; /* DIMS: n_dims priorities, -1 where none (Shardy's `{...}p1`);
                                  NULL when none was written */
    const char *mesh_name;    /* Shardy: the mesh's name when referenced as `@NAME` (no '@'),
                                  NULL for an inline mesh or XLA's text */
} gs_named;

/* Parses a mesh given on a command line: `data=4,model=2` (devices 0..N-1 row-major), optionally
 * followed by an explicit device order `:3,2,1,0,...` or `:<=[2,4]T(1,0)`. Errors (bad syntax, a
 * name used twice, a size < 1, a device order that is not a permutation of 0..N-1) are reported
 * at span (column offsets added). */
gs_status gs_mesh_parse(gs_arena *a, const char *text, size_t len, gs_mesh *out, gs_diags *d,
                        gs_span span);
/* The meshes a module names (Shardy's `sdy.mesh @NAME = <...>`), for `@NAME` references; a
 * StableHLO module keeps its own in gs_module.meshes. */
struct gs_mesh_table {
    int n;                    /* number of meshes */
    const char *const *names; /* n names (without '@') */
    const gs_mesh *meshes;    /* n meshes */
};

/* Shardy's mesh attribute from `<` (a leading `mesh` is skipped): `<["x"=2, "y"=4]>`,
 * `<["x"=4], device_ids=[3, 2, 1, 0]>`, `<[], device_ids=[5]>` (the maximal mesh of device 5).
 * *used (may be NULL) receives the bytes read; located errors at span (columns added). */
gs_status gs_mesh_parse_sdy(gs_arena *a, const char *text, size_t len, gs_mesh *out,
                            size_t *used, gs_diags *d, gs_span span);
/* The mesh named name[0..len) in t (NULL when t is NULL or has none). */
const gs_mesh *gs_mesh_table_find(const gs_mesh_table *t, const char *name, size_t len);

/* Appends Shardy's mesh attribute: `<["x"=2, "y"=4]>`, `<["x"=4], device_ids=[3, 2, 1, 0]>`
 * (the device ids when an order was written), `<[], device_ids=[5]>`. */
void gs_mesh_print_sdy(gs_sb *sb, const gs_mesh *m);

/* Index of the axis named name[0..len), or -1. */
int gs_mesh_find_axis(const gs_mesh *m, const char *name, size_t len);
/* Appends `name=size,name=size` (and `:order` when written). */
void gs_mesh_print(gs_sb *sb, const gs_mesh *m);

/* ------------------------------------------------------------------ shardings */

typedef enum gs_sharding_kind {
    GS_SHARDING_REPLICATED, /* every device holds all of it */
    GS_SHARDING_MAXIMAL,    /* one device holds all of it */
    GS_SHARDING_MANUAL,     /* partitioned by hand; the compiler leaves it alone */
    GS_SHARDING_UNKNOWN,    /* a placeholder (shard_as/shard_like groups) */
    GS_SHARDING_UNREDUCED,  /* each device holds a partial value still to be summed */
    GS_SHARDING_TILED,      /* split by a tile assignment, maybe with subgroup dims */
    GS_SHARDING_TUPLE       /* one sharding per leaf of a tuple shape */
} gs_sharding_kind;

/* The type of a trailing subgroup dim of a tiled sharding, in XLA's canonical order. */
typedef enum gs_subgroup_kind {
    GS_SUBGROUP_MANUAL,    /* devices along it are manually partitioned */
    GS_SUBGROUP_UNREDUCED, /* devices along it hold partial sums */
    GS_SUBGROUP_REPLICATED /* devices along it hold the same data */
} gs_subgroup_kind;

/* shard_as / shard_like group annotation (any sharding may carry one). */
typedef enum gs_shard_group_kind {
    GS_SHARD_GROUP_NONE,
    GS_SHARD_GROUP_AS,
    GS_SHARD_GROUP_LIKE
} gs_shard_group_kind;

typedef struct gs_sharding gs_sharding;

/* A canonical HloSharding. Immutable; lives in an arena. */
struct gs_sharding {
    gs_sharding_kind kind;         /* which kind */
    int64_t device;                /* MAXIMAL: the device */
    gs_tile_assignment tiles;      /* TILED: data dims, then n_subgroups subgroup dims */
    int data_rank;                 /* TILED: number of data (tensor) dims */
    int n_subgroups;               /* TILED: trailing subgroup dims (0..3) */
    gs_subgroup_kind subgroups[3]; /* TILED: their types, in canonical order, distinct */
    int n_tuple;                   /* TUPLE: number of leaves */
    gs_sharding *const *tuple;     /* TUPLE: n_tuple leaf shardings (never tuples) */
    gs_shard_group_kind group;     /* shard_as / shard_like, or none */
    int64_t group_id;              /* the group id when group != NONE */
    const char *metadata;          /* text inside metadata={...}, or NULL; never compared */
    const gs_named *named;         /* the named (V3) spelling it was written in, or NULL */
};

/* Leaf constructors. NULL on allocation failure. */
gs_sharding *gs_sharding_replicated(gs_arena *a);
gs_sharding *gs_sharding_manual(gs_arena *a);
gs_sharding *gs_sharding_unknown(gs_arena *a);
gs_sharding *gs_sharding_unreduced(gs_arena *a);
gs_sharding *gs_sharding_maximal(gs_arena *a, int64_t device);
/* A tuple of n leaf shardings (copied pointer list; tuple elements are flattened). */
gs_sharding *gs_sharding_tuple(gs_arena *a, int n, gs_sharding *const *elems);
/* The sharding of leaf `leaf` (depth-first) of a value of shape s sharded by sh (a tuple
 * sharding, or one sharding applying to every leaf). */
const gs_sharding *gs_sharding_leaf(const gs_sharding *sh, const gs_shape *s, int leaf);
/* XLA's HloSharding::Tile: every tile dim is a data dim. */
gs_sharding *gs_sharding_tiled(gs_arena *a, const gs_tile_assignment *t);
/* XLA's PartialTile: the last tile dim replicates. Canonicalises (may return {replicated} or a
 * plain tiled sharding) and sorts each replication group. */
gs_sharding *gs_sharding_partial(gs_arena *a, const gs_tile_assignment *t);
/* XLA's Subgroup: the last n_types tile dims are subgroups of the given types. Canonicalises. */
gs_sharding *gs_sharding_subgroup(gs_arena *a, const gs_tile_assignment *t, int n_types,
                                  const gs_subgroup_kind *types);
/* A copy of s with other metadata text (NULL: none) / another shard group. */
gs_sharding *gs_sharding_with_metadata(gs_arena *a, const gs_sharding *s, const char *metadata);
gs_sharding *gs_sharding_with_group(gs_arena *a, const gs_sharding *s, gs_shard_group_kind g,
                                    int64_t id);

/* XLA's iota device list as written after a list of tile or group dims, `[R,...]` (reshape dims)
 * then an optional transpose `T(P,...)`: in `devices=[2,2]<=[4]T(1,0)` and in
 * `replica_groups=[2,2]<=[2,2]T(1,0)`, what follows `<=`. */
typedef struct gs_iota_list {
    int n_reshape;                     /* reshape dims (>= 1) */
    int64_t reshape[GS_MAX_IOTA_RANK]; /* each >= 1 */
    int perm[GS_MAX_IOTA_RANK];        /* the transpose (identity when none is written) */
    bool transposed;                   /* T(...) was written */
} gs_iota_list;

/* Reads one gs_iota_list from the len bytes at text (spaces allowed between tokens): the reshape
 * dims must be positive with a product (*total) of at most 2^40 devices, and P a permutation of
 * as many entries. *used is the count of bytes read. Errors are located from span, the location
 * of text[0], on one line. */
gs_status gs_iota_list_parse(const char *text, size_t len, gs_span span, gs_iota_list *out,
                             int64_t *total, size_t *used, gs_diags *d);

/* Parses XLA's sharding text (text[0..len), e.g. "{devices=[2,1]<=[2]}", a tuple, or a named
 * `{mesh['x'=2] [{'x'}]}`) into a canonical sharding in arena a. On bad input returns GS_ERR
 * with an error at span (its column advanced by the offset of the problem within text, which
 * is exact when the text is the unmodified source line). */
gs_status gs_sharding_parse(gs_arena *a, const char *text, size_t len, gs_sharding **out,
                            gs_diags *d, gs_span span);
/* Appends XLA's canonical text for s, metadata included (tuple elements joined by ", ", without
 * the `index=N` comments XLA adds before every fifth element). A named sharding prints in
 * named form. */
void gs_sharding_print(gs_sb *sb, const gs_sharding *s);
/* The canonical text in arena a (NULL on allocation failure). */
char *gs_sharding_to_string(gs_arena *a, const gs_sharding *s);
/* Value equality as XLA's operator== (metadata and the named spelling ignored; shard groups
 * compared). O(rank) for iota assignments. */
bool gs_sharding_equal(const gs_sharding *x, const gs_sharding *y);
/* A hash consistent with gs_sharding_equal. */
uint64_t gs_sharding_hash(const gs_sharding *s);

/* ------------------------------------------------------------------ queries (non-tuple) */

/* True for TILED. */
bool gs_sharding_is_tiled(const gs_sharding *s);
/* True for REPLICATED and MAXIMAL (XLA's IsTileMaximal). */
bool gs_sharding_is_tile_maximal(const gs_sharding *s);
/* Tuple: whether every leaf is of that kind. */
bool gs_sharding_is_replicated(const gs_sharding *s);
bool gs_sharding_is_manual(const gs_sharding *s);
/* Index of the replication subgroup dim among the tile dims, or -1. */
int gs_sharding_replication_dim(const gs_sharding *s);
/* Index of the manual subgroup dim among the tile dims, or -1. */
int gs_sharding_manual_dim(const gs_sharding *s);
/* Number of tiles along data dim `dim` (1 for non-tiled shardings). */
int64_t gs_sharding_tiles_in_dim(const gs_sharding *s, int dim);
/* Number of distinct data tiles (XLA's NumTiles; 1 for non-tiled). */
int64_t gs_sharding_num_tiles(const gs_sharding *s);
/* Devices a tiled sharding spans (tile dims product); 1 for maximal; 0 when the kind does not
 * say (replicated, manual, unknown, unreduced, tuple). */
int64_t gs_sharding_num_devices(const gs_sharding *s);
/* Does sharding s (NULL: none; tuples leaf by leaf), written on instruction `in`, fit a program
 * of n devices: every tiled leaf spans exactly n devices and names none beyond them, every
 * maximal one puts the value on one of them? Else an error at in's span naming in, what the
 * sharding uses and n. The one check behind partitioning (n from num_partitions), propagation
 * and --shard (n from the module's num_partitions). */
gs_status gs_sharding_check_devices(const gs_sharding *s, const gs_instr *in, int64_t n,
                                    gs_diags *d);
/* The data tile index (data_rank entries) of device d. False when d holds no tile. Non-tiled
 * kinds have no tile dims: true without writing index (maximal: only for its device). */
bool gs_sharding_tile_index(const gs_sharding *s, int64_t device, int64_t *index);
/* The device at a tile index: n == data_rank gives the first device of that replication group
 * (XLA's DeviceForTileIndex), n == tile rank a specific member. -1 if out of range. */
int64_t gs_sharding_device_for_tile(const gs_sharding *s, int n, const int64_t *index);

/* One dim of a device's shard of a shape. */
typedef struct gs_shard_dim {
    int64_t offset; /* start in the full shape: min(tile * size, dim) */
    int64_t size;   /* padded per-device size: ceil(dim / tiles) */
    int64_t valid;  /* elements of real data, 0..size (the rest is padding at the end) */
} gs_shard_dim;

/* Device d's shard of an array of the given dims (rank entries). False when the sharding's data
 * rank differs from rank, or d holds no tile. Replicated/manual/unreduced/maximal: the whole. */
bool gs_sharding_device_shard(const gs_sharding *s, int rank, const int64_t *dims, int64_t device,
                              gs_shard_dim *out);
/* The padded per-device shape dims (rank entries) of an array of the given dims. */
void gs_sharding_shard_dims(const gs_sharding *s, int rank, const int64_t *dims, int64_t *out);

/* Groups of devices that differ only in the tile dims `dims` (n entries, indices among all tile
 * dims): the replica_groups of a collective along those dims. Groups are ordered by the other
 * dims' indices (row-major), members by `dims` (in the order given). Iota form whenever the
 * tile assignment allows (no materialisation). Tiled shardings only. */
gs_status gs_sharding_groups_along(gs_arena *a, const gs_sharding *s, int n, const int *dims,
                                   gs_replica_groups **out);
/* XLA's GroupShardingOnDims device groups: group g holds the devices whose indices on `dims`
 * ravel to g; the complement of gs_sharding_groups_along. */
gs_status gs_sharding_group_by_dims(gs_arena *a, const gs_sharding *s, int n, const int *dims,
                                    gs_replica_groups **out);
/* The replica groups of a partially replicated sharding: devices holding the same data (one
 * group per device when there is no replication). Tiled shardings only. */
gs_status gs_sharding_replica_groups(gs_arena *a, const gs_sharding *s, gs_replica_groups **out);

/* ------------------------------------------------------------------ transforms */

/* All transforms write a new sharding to *out (or NULL where XLA returns no sharding) and return
 * GS_ERR only on allocation failure. Metadata carries over as XLA's does. */

/* XLA's TransposeSharding: result data dim i is s's dim perm[i]; perm has data_rank entries
 * (subgroup dims follow) or covers every tile dim. Maximal/manual shardings pass through. */
gs_status gs_sharding_transpose(gs_arena *a, const gs_sharding *s, int n, const int *perm,
                                gs_sharding **out);
/* XLA's ReshapeSharding: the sharding of a reshape's result from its operand's (split and merge
 * of dims; where only some dims carry over, the rest replicate). *out NULL when none exists. */
gs_status gs_sharding_reshape(gs_arena *a, const gs_sharding *s, int src_rank,
                              const int64_t *src_dims, int dst_rank, const int64_t *dst_dims,
                              gs_sharding **out);
/* XLA's PropagateShardingThroughReshape: like gs_sharding_reshape, but keeps whatever dims carry
 * over when the whole does not (never NULL; may be {replicated}). */
gs_status gs_sharding_reshape_partial(gs_arena *a, const gs_sharding *s, int src_rank,
                                      const int64_t *src_dims, int dst_rank,
                                      const int64_t *dst_dims, gs_sharding **out);
/* XLA's PartiallyReplicateTiledShardingOnDims: replicate along data dims `dims`. */
gs_status gs_sharding_replicate_dims(gs_arena *a, const gs_sharding *s, int n, const int64_t *dims,
                                     gs_sharding **out);
/* XLA's PartiallyReplicateTiledShardingOnAllDimsExcept. */
gs_status gs_sharding_replicate_except(gs_arena *a, const gs_sharding *s, int n,
                                       const int64_t *keep, gs_sharding **out);
/* XLA's RemoveShapeDimensions: drop data dims `dims` (each must have one tile; asserted). */
gs_status gs_sharding_remove_dims(gs_arena *a, const gs_sharding *s, int n, const int64_t *dims,
                                  gs_sharding **out);
/* The sharding of a reduce over data dims `dims` from its operand's: replicate them, then drop
 * them. */
gs_status gs_sharding_reduce_dims(gs_arena *a, const gs_sharding *s, int n, const int64_t *dims,
                                  gs_sharding **out);
/* The sharding of a broadcast's result (rank result_rank) from its operand's: operand dim i
 * becomes result dim dims[i] (the broadcast's dimensions attribute), new dims get one tile. */
gs_status gs_sharding_broadcast(gs_arena *a, const gs_sharding *s, int result_rank, int n,
                                const int64_t *dims, gs_sharding **out);
/* XLA's MergeShardingIfCompatible: combine two partially replicated shardings into one that
 * refines both with at least minimum_tiles tiles. *out NULL when they are not compatible;
 * {maximal/replicated} dst takes to_merge. Not for tuples or manual. */
gs_status gs_sharding_merge_compatible(gs_arena *a, const gs_sharding *to_merge,
                                       int64_t minimum_tiles, const gs_sharding *dst,
                                       gs_sharding **out);
/* XLA's MergeSharding: *out is the merged dst (or dst unchanged); *changed says whether dst is
 * to be replaced (merged, or to_merge is more specific). Tuples merge leaf by leaf. */
gs_status gs_sharding_merge(gs_arena *a, const gs_sharding *to_merge, const gs_sharding *dst,
                            bool may_combine_partial, gs_sharding **out, bool *changed);
/* XLA's IsShardingMoreSpecific: lhs refines rhs (more tiles; manual beats maximal; any tiled
 * beats maximal; maximal beats replicated). Both tuples of one length, or both leaves. */
bool gs_sharding_more_specific(const gs_sharding *lhs, const gs_sharding *rhs);

/* ------------------------------------------------------------------ JAX-style front end */

/* The sharding JAX's NamedSharding(mesh, PartitionSpec) produces, for a tensor of the given
 * rank: spec lists one entry per leading tensor dim, each `None` (or `_`, or empty), an axis
 * name, or `(a,b)` several axes major first (e.g. `data,model`, `(data,model),None`); axes not
 * mentioned replicate. Errors: unknown axis, axis used twice, more entries than rank, syntax. */
gs_status gs_sharding_from_spec(gs_arena *a, const gs_mesh *mesh, const char *spec, size_t len,
                                int rank, gs_sharding **out, gs_diags *d, gs_span span);
/* Shardy's tensor sharding from `<` (what follows `#sdy.sharding`): `<@mesh, [{"x", ?},
 * {"y":(1)2}p1, {}], replicated={"z"}, unreduced={"w"}>`, the mesh named in meshes or written
 * inline (`mesh<[...]>`). Converted to the tiled sharding as XLA's Shardy export does (axes ->
 * tile dims in iota form, the rest replicated or unreduced), with the named form (open dims,
 * priorities) kept in ->named. *used (may be NULL): the bytes read. Errors (an undefined mesh,
 * an axis it lacks, an axis used twice, a sub-axis that does not fit) are located at span. */
gs_status gs_sharding_parse_sdy(gs_arena *a, const gs_mesh_table *meshes, const char *text,
                                size_t len, gs_sharding **out, size_t *used, gs_diags *d,
                                gs_span span);
/* Does Shardy's TensorShardingAttr spell named form n: dim shardings (or the maximal mesh's
 * `[]`) on a mesh named in the module or inline, without manual axes? */
bool gs_named_is_sdy(const gs_named *n);
/* Appends Shardy's text for a gs_named_is_sdy form, from `<` (what follows `#sdy.sharding`):
 * `<@mesh, [{"x", ?}, {"y":(1)2}p1, {}], replicated={"z"}, unreduced={"w"}>`; an inline mesh
 * prints as `mesh<[...]>`. gs_sharding_parse_sdy reads it back. */
void gs_named_print_sdy(gs_sb *sb, const gs_named *n);
/* The Shardy form of sharding s of a tensor of rank `rank` on `mesh` (named mesh_name): s's own
 * named form when it has one on that mesh that still denotes s, else closed dim shardings of
 * whole mesh axes that denote exactly s (replicated: every dim `{}`), found by a bounded search
 * (meshes of up to 8 axes). *out NULL when there is none (maximal, manual, unreduced, tuples,
 * a device order no assignment of axes gives). GS_ERR only on allocation failure. */
gs_status gs_sharding_to_named(gs_arena *a, const gs_sharding *s, int rank, const gs_mesh *mesh,
                               const char *mesh_name, const gs_named **out);
/* The tiled (V2) sharding a named (V3) one denotes (XLA's V3ToV2Sharding). */
gs_status gs_sharding_from_named(gs_arena *a, const gs_named *n, gs_sharding **out);

/* One --shard NAME=SPEC request: instructions whose name matches the glob `pattern` (fnmatch;
 * a leading '%' is ignored) get `spec`, a PartitionSpec (needs a mesh) or XLA sharding text. */
typedef struct gs_shard_request {
    const char *pattern; /* instruction name or glob */
    const char *spec;    /* PartitionSpec or `{...}` sharding text */
} gs_shard_request;

/* Applies requests in order to every computation of m: each matching instruction's `sharding`
 * attribute is set (replaced or added; see gs_instr_set_sharding).
 * Errors name the request: a pattern matching nothing, a bad spec, a spec whose data rank
 * differs from the instruction's rank, a tiled sharding whose device count differs from the
 * module's num_partitions (when that is > 1), a PartitionSpec on a tuple, a PartitionSpec without
 * a mesh. Returns the number of instructions set in *n_set (may be NULL). */
gs_status gs_module_apply_shardings(gs_module *m, const gs_mesh *mesh, int n,
                                    const gs_shard_request *reqs, int *n_set, gs_diags *d);

/* ------------------------------------------------------------------ pictures */

/* Which device holds which block of an array of the given dims, as text (the tools print it):
 * a grid like jax.debug.visualize_array_sharding (rank 2 rows x columns, rank 1 one row,
 * higher ranks one grid per leading tile index), ANSI colours when color is set. n_devices
 * sizes replicated kinds (0: 1 device). */
void gs_sharding_draw_text(gs_sb *sb, const gs_sharding *s, int rank, const int64_t *dims,
                           int64_t n_devices, bool color);
/* The same picture as an SVG document. */
void gs_sharding_draw_svg(gs_sb *sb, const gs_sharding *s, int rank, const int64_t *dims,
                          int64_t n_devices);
/* The layout as JSON: {"sharding", "shape", "num_devices", "devices": [{"device", "tile",
 * "offset", "shard_shape", "valid"}...]}, one entry per device in ascending id order (partially
 * replicated devices included; replicated kinds list devices 0..n_devices-1, a maximal sharding
 * its one device). shape_text is the shape as printed (e.g. "f32[5,7]"). NULL on allocation
 * failure; free() the result. */
char *gs_sharding_layout_json(const gs_sharding *s, const char *shape_text, int rank,
                              const int64_t *dims, int64_t n_devices);

/* ------------------------------------------------------------------ per-op factor rules */

/* How a factor (a slice of the iteration space shared by operand and result dims) may be
 * sharded, as in Shardy's OpShardingRule. */
typedef enum gs_factor_kind {
    GS_FACTOR_PASS_THROUGH,    /* sharded alike in operands and results: no communication */
    GS_FACTOR_REDUCTION,       /* in operands only, summed over: sharding it leaves partial sums */
    GS_FACTOR_PERMUTATION,     /* may be sharded but data moves across shards (pad, concat,
                                   slice, reverse, windows) */
    GS_FACTOR_NEED_REPLICATION /* must be replicated (sort dim, FFT dims, unknown ops) */
} gs_factor_kind;

/* One factor of a rule. */
typedef struct gs_factor {
    gs_factor_kind kind; /* how it may be sharded */
    int64_t size;        /* its extent (1 for a size-1 dim, 0 for a size-0 dim) */
    bool blocked;        /* shardings do not propagate along it (Shardy's
                            blocked_propagation_factors: a dynamic-slice's sliced dims, topk's
                            sorted dim, conservative pad/slice/window dims) */
} gs_factor;

/* The factors making up one tensor dim, major first. As in Shardy, every dim has at least one:
 * a dim no factor reaches gets a pass-through factor of size 1 of its own. */
typedef struct gs_dim_factors {
    int n;              /* number of factors */
    const int *factors; /* n factor indices */
} gs_dim_factors;

/* The factors of each dim of one tensor (an operand, or an array leaf of the result). */
typedef struct gs_tensor_factors {
    int rank;                   /* tensor rank */
    const gs_dim_factors *dims; /* rank entries */
} gs_tensor_factors;

/* An op's sharding rule: an einsum-like map from operand and result dims to shared factors, as
 * Shardy's propagation reads them (XLA-style propagation and the partitioner follow XLA's
 * per-op handlers instead; see src/sharding/rules.c for who reads it). */
typedef struct gs_op_rule {
    const gs_instr *instr;             /* the instruction it describes */
    bool is_default;                   /* no specific rule: every dim its own need-replication
                                           factor */
    bool registered;                   /* Shardy's registry has this rule for the op (what
                                           `sdy-opt -sdy-populate-op-sharding-rules` prints);
                                           false for the ops it leaves without one (constants,
                                           iota, tuples, control flow, unknown custom calls, a
                                           reshape of zero elements) and for default rules */
    bool custom;                       /* written on the op rather than built (printed with
                                           `, custom`); the builder never sets it */
    int n_factors;                     /* number of factors */
    const gs_factor *factors;          /* n_factors factors */
    int n_operands;                    /* = instr->n_operands */
    const gs_tensor_factors *operands; /* one per operand (tuple-shaped operands: rank 0) */
    int n_results;                     /* array leaves of the result shape */
    const gs_tensor_factors *results;  /* one per result leaf, depth-first */
} gs_op_rule;

/* Options of the rule builder, as Shardy's `-sdy-populate-op-sharding-rules` takes them. A zeroed
 * struct is the default. */
typedef struct gs_op_rule_options {
    bool conservative; /* `conservative-propagation=true`: no factor for a concatenate's or a
                          convolution's windowed dims, and pad, slice, reduce-window and
                          select-and-scatter block propagation along their permutation dims */
} gs_op_rule_options;

/* The rule of instruction `in` as Shardy's op_sharding_rule_registry builds it (same factors,
 * same factor order, so the same letters), from its opcode and attributes, in arena a. Ops
 * without a specific rule get the always-correct default (everything need-replication).
 * GS_ERR only on allocation failure. */
gs_status gs_op_rule_build(gs_arena *a, const gs_instr *in, gs_op_rule **out);
/* gs_op_rule_build with options (opts NULL: the defaults). */
gs_status gs_op_rule_build_opts(gs_arena *a, const gs_instr *in, const gs_op_rule_options *opts,
                                gs_op_rule **out);
/* Shardy's op sharding rule attribute as written on an op (`sdy.sharding_rule = ...`), from `<`
 * (a leading `#sdy.op_sharding_rule` is skipped) through its `>`: the text gs_op_rule_print
 * writes inside `<...>`, with an optional `, custom`. When in is not NULL the rule must map as
 * many operands and result leaves as in has, with their ranks, no factor twice in one tensor
 * (Shardy's verifier). The rule (arena a) is registered, not default, for in. *used (may be
 * NULL) receives the bytes read; errors are located at span (columns added). GS_ERR on bad text
 * or allocation failure. */
gs_status gs_op_rule_parse(gs_arena *a, const char *text, size_t len, const gs_instr *in,
                           gs_op_rule **out, size_t *used, gs_diags *d, gs_span span);
/* Whether op family f has a specific rule (else instructions get the default). */
bool gs_op_family_has_rule(gs_op_family f);
/* "pass_through", "reduction", "permutation", "need_replication". */
const char *gs_factor_kind_name(gs_factor_kind k);
/* Appends the text Shardy prints inside `#sdy.op_sharding_rule<...>`:
 * `([i, j], [j, k])->([i, k]) {i=8, j=32, k=16} reduction={j}`, then need_replication={...},
 * permutation={...}, blocked_propagation={...} and `, custom` where they apply (factor letters
 * i, j, k, ... z, then z_1, z_2 ...; no `{...}` when there are no factors). */
void gs_op_rule_print(gs_sb *sb, const gs_op_rule *r);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_SHARDING_H */
