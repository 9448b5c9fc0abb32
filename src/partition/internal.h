/*
 * internal.h — what the files of src/partition/ share: the partitioning context (gs_part_ctx),
 * the partitioned value (gs_part_value) and its reshard, partition offsets and masking, the
 * collective wrappers, and the handler table. Every name here starts gs_part_ (the propagation
 * pass's start gs_prop_). Not part of the public API (see gspmd/partition.h).
 *
 * Files:
 *   partition.c     the driver: validation, entry parameters and root, visiting order, the
 *                   handler table, the default action; no other file calls it
 *   context.c       what every file works through: errors, builder and arena, operands'
 *                   values, shardings as read, clones and copies of called computations,
 *                   scopes, partitioned called computations
 *   reshard.c       the reshard ladder (each rung a small function) and its cache
 *   offsets.c       partition-id arithmetic (tile index of a device from an iota tile assignment,
 *                   tables only for explicit device lists), padding, masking with identities
 *   collectives.c   the collective wrappers (channel ids, reducer computations, counting)
 *   h_elementwise.c elementwise ops, copy, custom-call Sharding, tuples, parameters
 *   h_shape.c       broadcast, reshape, transpose, reverse, slice, pad, concatenate,
 *                   dynamic-slice, dynamic-update-slice, iota, constant, sort, reduce-window
 *   h_reduce.c      reduce
 *   halo.c          halo exchange along a tiled dim (slice, pad)
 *   h_dot.c         dot and convolution: the factor-space plans of the paper and their byte
 *                   costs
 *   h_topk.c        topk and custom-call TopK: local top k, gathered candidates, merged
 *   h_batch_norm.c  batch-norm inference, training, grad: per-feature vectors tiled like the
 *                   feature dim, statistics as masked local sums all-reduced
 *   h_gather.c      gather and scatter as plans in their iteration space (index-parallel,
 *                   passthrough, operand-parallel with masking, partial scatters combined)
 *   h_scan.c        dynamic-(update-)slice of one element along a tiled dim (stacked layers)
 *   h_control.c     while, call, conditional: called computations partitioned for the
 *                   shardings at their call site
 */
#ifndef GSPMD_PARTITION_INTERNAL_H
#define GSPMD_PARTITION_INTERNAL_H

#include "base/internal.h"
#include "gspmd/partition.h"

/* A value of the partitioned program: the per-device instruction `hlo` holds the part of a
 * global value of shape `base` that `sharding` gives the device running it. Arrays are padded
 * at the end of every tiled dim to ceil(dim / tiles); the padding holds unspecified values, which
 * every op that would read them masks first. When the sharding has an unreduced subgroup (or is
 * {unreduced}), the devices of each unreduced group hold partial values that `combiner` combines. A
 * tuple value has a tuple sharding (one leaf sharding per array leaf, depth first). */
typedef struct gs_part_value {
    gs_instr *hlo;               /* per-device value (in the output module), or NULL in a dry run */
    const gs_shape *base;        /* global shape */
    const gs_sharding *sharding; /* never NULL */
    gs_opcode combiner;          /* how partial values combine (GS_OP_ADD unless said) */
} gs_part_value;

/* One cached reshard of an instruction's value. */
typedef struct gs_part_reshard_entry {
    const gs_instr *from;           /* the value's instruction */
    const gs_sharding *to;          /* target sharding */
    gs_part_value value;            /* the resharded value */
    struct gs_part_reshard_entry *next; /* chain */
} gs_part_reshard_entry;

/* A cached reshard cost (gs_part_reshard_cost). */
typedef struct gs_part_cost_entry {
    const gs_shape *base;           /* value shape */
    const gs_sharding *from, *to;   /* the reshard */
    gs_opcode combiner;             /* partial-value combiner */
    int64_t bytes;                  /* its cost */
    struct gs_part_cost_entry *next; /* chain */
} gs_part_cost_entry;

/* A cached per-device scalar (partition-id arithmetic) of the current computation. */
typedef struct gs_part_offset_entry {
    gs_tile_assignment tiles; /* the assignment */
    int dim;                  /* tile dim */
    gs_instr *value;          /* s32 tile index of the device along dim */
    struct gs_part_offset_entry *next;
} gs_part_offset_entry;

/* Where instructions go: one output module and its entry, with the caches that belong to that
 * module. The dot handler costs its candidate plans in a throwaway gs_part_emit. */
typedef struct gs_part_emit {
    gs_module *m;                   /* the module being written */
    gs_names names;                 /* its names */
    gs_builder b;                   /* appends to its entry */
    gs_instr *pid;                  /* s32 partition id (created on first use) */
    gs_instr *s32[64];              /* small s32 constants already created */
    gs_part_offset_entry *offsets;  /* cached tile indices */
    gs_computation *reducers[8][GS_N_TYPES]; /* scalar reduction computations by op and type */
    gs_partition_stats stats;       /* what was emitted */
    bool dry;                       /* costing only: no warnings, no reshard cache */
    bool dry_failed;                /* costing: the reshard is impossible (an error) */
} gs_part_emit;

/* The partitioning context. */
typedef struct gs_part_ctx {
    const gs_module *src;             /* the module being partitioned */
    const gs_partition_options *opts; /* options */
    const gs_collective_ops *coll;    /* collective builders */
    int64_t n;                        /* number of devices */
    gs_diags *d;                      /* errors and warnings */
    gs_arena scratch;                 /* shardings, caches (freed at the end) */
    gs_part_emit *e;                  /* current output */
    gs_part_emit main;                /* the real output */
    const gs_instr *cur;              /* source instruction being partitioned */
    const gs_sharding *manual;        /* the current instruction's partially manual sharding
                                         (a manual subgroup), or NULL: "replicated" then means
                                         whole within each manual group */
    gs_part_value *vals;              /* per instruction of the computation being partitioned
                                         (by id): its partitioned value */
    bool *done;                       /* per instruction: value ready */
    const gs_sharding *const *param_sh; /* the shardings the current computation's parameters
                                         were built with (by parameter number) */
    bool keep_names;                  /* the current computation is the first partitioned copy
                                         of its source: its values take the source names */
    gs_part_reshard_entry **cache;    /* reshard cache buckets */
    int n_cache;                      /* bucket count (power of two) */
    gs_strmap comps;                  /* source computation name -> copied computation */
    gs_strmap parts;                  /* "name|param shardings|root sharding" -> partitioned
                                         computation (one per distinct signature) */
    gs_strmap out_names;              /* computation names used in the output */
    gs_strmap callers;                /* source computation name -> the instruction calling it
                                         (gs_part_caller; built on first use) */
    bool callers_ready;               /* callers is built */
    gs_part_cost_entry *costs[256];   /* reshard costs already found (buckets) */
    int64_t channel;                  /* next channel id */
    bool failed;                      /* sticky: an error was reported (or allocation failed) */
    /* The driver's walk of one computation (partition.c): src partitioned into the empty dst
     * with its parameters sharded by param_sh and its root resharded to root_sh (NULL: as it
     * came). gs_part_partition_called runs it on a called computation, so the handlers reach
     * the driver only through the context. */
    void (*partition_comp)(struct gs_part_ctx *c, const gs_computation *src, gs_computation *dst,
                           const gs_sharding *const *param_sh, const gs_sharding *root_sh,
                           bool keep_names);
} gs_part_ctx;

/* ---- context.c */

/* Reports an error at the current instruction; sets c->failed. */
void gs_part_error(gs_part_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* c->failed after an allocation failure (reported once). */
void gs_part_oom(gs_part_ctx *c);
/* Emitting into another output computation (a loop body the handler builds): enter switches
 * the builder, partition id and constants to dst; leave returns to the caller's. */
typedef struct gs_part_scope gs_part_scope;
gs_part_scope *gs_part_enter_computation(gs_part_ctx *c, gs_computation *dst);
void gs_part_leave_computation(gs_part_ctx *c, gs_part_scope *saved);
/* The builder of the current output. */
gs_builder *gs_part_builder(gs_part_ctx *c);
/* The arena for shardings and scratch. */
gs_arena *gs_part_arena(gs_part_ctx *c);
/* ` (from FILE:LINE)` (or ` (op NAME)`) from the metadata of `in` for messages; "" when it has
 * none. */
const char *gs_part_origin(gs_part_ctx *c, const gs_instr *in);
/* {manual}, or a tuple of {manual} leaves: a value of a manual region. */
bool gs_part_all_manual(const gs_sharding *s);
/* The source instruction that calls the computation `in` belongs to (the first, as XLA's call
 * graph has one caller per computation it partitions), or NULL (the entry, or unknown). */
const gs_instr *gs_part_caller(gs_part_ctx *c, const gs_instr *in);
/* The partitioned value of source operand k of `in`. */
const gs_part_value *gs_part_operand(gs_part_ctx *c, const gs_instr *in, int k);
/* The sharding as the partitioner reads it for a value of shape s (sh NULL: replicated; a tuple
 * sharding for tuple shapes), in arena a; NULL when sh does not fit the shape (*why says how)
 * or allocation fails (*why NULL). */
const gs_sharding *gs_part_normalize(gs_arena *a, const gs_shape *s, const gs_sharding *sh,
                                     const char **why);
/* The sharding of a source instruction as the partitioner reads it: its own, or replicated,
 * expanded to a tuple sharding for tuple shapes. */
const gs_sharding *gs_part_sharding_of(gs_part_ctx *c, const gs_instr *in);
/* A replicated sharding for shape s (tuple of replicated leaves for tuples); inside a partially
 * manual instruction, whole within each manual group (c->manual's groups). */
const gs_sharding *gs_part_replicated(gs_part_ctx *c, const gs_shape *s);
/* The per-device shape of base under sharding s (scratch arena). */
gs_shape *gs_part_local_shape(gs_part_ctx *c, const gs_shape *base, const gs_sharding *s);
/* Computation src (called from the current instruction) partitioned with its parameters sharded
 * by param_sh (one per parameter; each a tuple sharding for tuple parameters) and its root
 * resharded to root_sh, in the output module; one copy per distinct signature (cached). NULL
 * after an error. */
gs_computation *gs_part_partition_called(gs_part_ctx *c, const gs_computation *src,
                                         const gs_sharding *const *param_sh,
                                         const gs_sharding *root_sh);
/* Copies the attributes of source instruction `in` onto out, its called computations replaced:
 * those in from[0..n) by to[0..n), the others copied verbatim. */
void gs_part_copy_attrs(gs_part_ctx *c, const gs_instr *in, gs_instr *out, int n,
                        const gs_computation *const *from, gs_computation *const *to);
/* The instructions of comp with operands first (text order when it already is), in arena a;
 * NULL on allocation failure. */
const gs_instr **gs_part_topo_order(gs_arena *a, const gs_computation *comp);
/* Sets *out to value hlo of base shape `base` sharded by s (whole values: combined by adding). */
void gs_part_result(gs_part_value *out, gs_instr *hlo, const gs_shape *base, const gs_sharding *s);
/* Clones `in` with new operands and result shape (attributes and called computations copied,
 * sharding dropped). */
gs_instr *gs_part_clone(gs_part_ctx *c, const gs_instr *in, const gs_shape *shape, int n,
                        gs_instr *const *ops);

/* ---- reshard.c */

/* v resharded to `to` (same base shape), through the ladder; cached per source instruction
 * when v is an instruction's own value. */
void gs_part_reshard(gs_part_ctx *c, const gs_part_value *v, const gs_sharding *to,
                     gs_part_value *out);
/* The ladder without the cache (used by tests through gs_part_reshard too). */
void gs_part_reshard_nocache(gs_part_ctx *c, const gs_part_value *v, const gs_sharding *to,
                             gs_part_value *out);
/* Bytes (per device) the collectives of resharding a value of shape base from `from` to `to`
 * would move, found by a dry run of the ladder (cached); a full rematerialization adds the whole
 * value, an impossible reshard costs more than anything. */
int64_t gs_part_reshard_cost(gs_part_ctx *c, const gs_shape *base, const gs_sharding *from,
                             gs_opcode red, const gs_sharding *to);
/* The sharding of tuple element `index` of a value of tuple shape s sharded by sh (a tuple
 * sharding of the element's leaves when it is itself a tuple). */
const gs_sharding *gs_part_element_sharding(gs_part_ctx *c, const gs_sharding *sh,
                                            const gs_shape *s, int index);
/* Index of the unreduced tile dim of s, -1 when none; -2 for {unreduced}. */
int gs_part_unreduced_dim(const gs_sharding *s);
/* Tiled s with its data tile dims `dims` (n entries) turned into an unreduced subgroup (the
 * sharding of partial results when those dims are summed over). */
const gs_sharding *gs_part_make_unreduced(gs_part_ctx *c, const gs_sharding *s, int n,
                                          const int *dims);

/* s with its unreduced subgroup replicated instead ({unreduced} -> {replicated}). */
const gs_sharding *gs_part_reduced_form(gs_part_ctx *c, const gs_sharding *s);

/* ---- offsets.c */

/* partition-id as s32 (created once per output). */
gs_instr *gs_part_pid(gs_part_ctx *c);
/* s32 scalar: the tile index along tile dim `dim` of the device running the program. */
gs_instr *gs_part_tile_index(gs_part_ctx *c, const gs_tile_assignment *t, int dim);
/* s32 scalar constant. */
gs_instr *gs_part_s32(gs_part_ctx *c, int64_t v);
/* Scalar arithmetic with constant folding: a op b on s32 scalars. */
gs_instr *gs_part_mul(gs_part_ctx *c, gs_instr *a, int64_t k);
gs_instr *gs_part_add(gs_part_ctx *c, gs_instr *a, gs_instr *b);
gs_instr *gs_part_div(gs_part_ctx *c, gs_instr *a, int64_t k);
gs_instr *gs_part_rem(gs_part_ctx *c, gs_instr *a, int64_t k);
/* s32 scalar: the start offset of the device's shard along data dim `dim` (tile * shard size). */
gs_instr *gs_part_shard_offset(gs_part_ctx *c, const gs_sharding *s, int dim, int64_t shard);
/* x padded at the end of each dim to dims[] with value `v` (a scalar instruction; NULL: zero,
 * created only when padding is needed). */
gs_instr *gs_part_pad_to(gs_part_ctx *c, gs_instr *x, const int64_t *dims, gs_instr *v);
/* pred[like's dims]: true where lo <= offset + i < hi (without has_lo: offset + i < hi), i the
 * position along dim d and offset an s32 scalar. Built along dim d alone (an iota, an add and
 * the compares of like's dim d elements) and broadcast: one pass over the shard, not five. */
gs_instr *gs_part_dim_in_range(gs_part_ctx *c, const gs_shape *like, int d, gs_instr *offset,
                               bool has_lo, int64_t lo, int64_t hi);
/* x with the positions of the padding of the dims in `dims` (n entries; base dims `base`, x
 * sharded by s) replaced by scalar `fill` (NULL: zero). Returns x when nothing is padded. */
gs_instr *gs_part_mask(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, const int64_t *base,
                       int n, const int *dims, gs_instr *fill);
/* Does data dim i of base (size n) sharded by s have padding? */
bool gs_part_uneven(const gs_sharding *s, int i, int64_t n);
/* The identity of reduction op `op` for type t as a scalar constant; NULL when op has none. */
gs_instr *gs_part_identity(gs_part_ctx *c, gs_opcode op, gs_type t);
/* Is instruction x a scalar constant equal to the identity of op? */
bool gs_part_is_identity(const gs_instr *x, gs_opcode op);
/* Zeros of shape s (arrays, or tuples of them; NULL for tokens), in the current output
 * computation. */
gs_instr *gs_part_zeros(gs_part_ctx *c, const gs_shape *s);
/* x broadcast to the shape dims of `like` (x scalar). */
gs_instr *gs_part_bcast_scalar(gs_part_ctx *c, gs_instr *x, const gs_shape *like);

/* ---- halo.c */

/* a / b rounded down (b > 0), for window starts before a dim. */
int64_t gs_part_floor_div(int64_t a, int64_t b);
/* Of k tiles, those whose windows matter: the ones with output (t*out_shard < n_out). */
int64_t gs_part_live_tiles(int64_t k, int64_t out_shard, int64_t n_out);
/* Can device tile t along data dim d of s (size n) read input [a0 + t*step, a0 + t*step + len)
 * for the first `live` tiles by halo exchange? *left and *right get the widest reach beyond the
 * device's own shard (several hops when wider than a shard). */
bool gs_part_halo_extent(const gs_sharding *s, int d, int64_t n, int64_t a0, int64_t step,
                         int64_t len, int64_t live, int64_t *left, int64_t *right);
/* x (the device's shard along d under s) turned into that window by collective-permutes from
 * the neighbours; positions outside [0, n) take scalar `fill` (NULL: left as they are). NULL
 * when no plan. */
gs_instr *gs_part_halo_read(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, int d, int64_t n,
                            int64_t a0, int64_t step, int64_t len, int64_t live, gs_instr *fill);
/* The same, for a consumer that reads nothing past its windows' ends (a convolution or a
 * reduce-window whose last window ends `slack` or fewer positions before the next stride): where
 * every tile's window starts at the start of its exchanged block, the block is used as it is
 * when at most `slack` positions longer than len, instead of being sliced (a copy per step, for
 * every stride-2 1x1 convolution of a ResNet split in space). */
gs_instr *gs_part_halo_read_slack(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, int d,
                                  int64_t n, int64_t a0, int64_t step, int64_t len, int64_t live,
                                  gs_instr *fill, int64_t slack);
/* Base dilation dil along dim d made local: x (the device's shard along d under s, base dims
 * base) with its padding set to `fill` (NULL: zero) and dil - 1 fill values after each
 * element, so tile t holds dilated positions [t*c*dil, (t+1)*c*dil) (c the shard length) of a
 * dim of c*dil*k positions: a window with base dilation over it is an undilated window over
 * these, which gs_part_halo_read can read wherever the dilated window steps are not multiples of
 * dil. */
gs_instr *gs_part_dilate_shard(gs_part_ctx *c, gs_instr *x, const gs_sharding *s,
                               const int64_t *base, int d, int64_t dil, gs_instr *fill);
/* Source-target pairs of a ring along tile dim d of t: each device sends to the one `dist`
 * tiles below it (wrapping). *n gets the count; malloc'ed (free it), NULL on failure. */
int64_t (*gs_part_ring_pairs(const gs_tile_assignment *t, int d, int64_t dist, int *n))[2];
/* Can an op whose output position j (of n_out) reads input position j + start (of n) keep data
 * dim d tiled as s tiles it? *left and *right get the halo sizes. */
bool gs_part_halo_plan(const gs_sharding *s, int d, int64_t n, int64_t start, int64_t n_out,
                       int64_t *left, int64_t *right);
/* The most neighbour hops on either side that the read of gs_part_halo_window below exchanges
 * (positions outside the input are not exchanged); -1 when d is not tiled or n is 0. */
int64_t gs_part_halo_hops(const gs_sharding *s, int d, int64_t n, int64_t start, int64_t n_out);
/* Device tile t's window [a0 + t*step, a0 + t*step + len) along data dim d sliced from x, which
 * holds d whole (size n): t is the device's tile along tile dim tile_dim of `tiling`, positions
 * outside [0, n) are `fill` (NULL: zero); the windows of tiles from `live` on are clamped. No
 * collective: a replicated input's windows, or an all-gathered dim's. */
gs_instr *gs_part_whole_window(gs_part_ctx *c, gs_instr *x, const gs_sharding *tiling,
                               int tile_dim, int d, int64_t n, int64_t a0, int64_t step,
                               int64_t len, int64_t live, gs_instr *fill);
/* x turned into the device's shard of that output along d (gs_part_halo_read with the output's
 * shard as both step and length). */
gs_instr *gs_part_halo_window(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, int d, int64_t n,
                              int64_t start, int64_t n_out, gs_instr *fill);

/* ---- h_dot.c: the iteration space of a contraction (dot, convolution, gather) */

/* How the dims of one tensor map into the iteration space. */
typedef struct gs_part_space_map {
    int rank;              /* tensor rank */
    int64_t to[GS_MAX_RANK]; /* space dim of each tensor dim */
} gs_part_space_map;

typedef struct gs_part_space {
    int ns;                /* space rank */
    int nb, nm, nn, nk;    /* batch, lhs free, rhs free, contracting (dims in this order, then
                              the windowed ones, then the forced ones) */
    int nh;                /* windowed dims (convolution spatial dims of the lhs and the result,
                              tiled by halo exchange), after the contracting ones */
    int nf;                /* forced-whole dims (the kernel's window), after the others */
    uint32_t whole;        /* further space dims no plan may tile (bit i: dim i), such as a
                              ragged-dot's ragged dim */
    int spatial[GS_MAX_RANK]; /* windowed dim i: its index among the convolution's spatial dims */
    bool halo_ok[GS_MAX_RANK]; /* windowed dim i can be tiled */
    uint32_t unreversed;   /* kernel-windowed spatial dims with window reversal (bit i: spatial
                              dim i): the handler reverses the kernel along them first
                              (gs_part_reverse_value), and the local convolution does not */
    bool kernel_windowed;  /* the windowed dims are the lhs's and the kernel's spatial dims
                              (the result's are forced whole): each device convolves with its
                              part of the kernel window, and the result is a partial sum (a
                              filter gradient, whose window is the activations' extent) */
    int64_t size[GS_MAX_RANK]; /* extent of each space dim */
    gs_part_space_map lhs, rhs, out; /* the three tensors */
    int n_lk;              /* contracting dims of the lhs and rhs (for masking) */
    int lk[GS_MAX_RANK], rk[GS_MAX_RANK];
    int64_t groups;        /* convolution feature or batch groups (space dim 0 is the group
                              dim), or 1 */
    bool batch_groups;     /* they are batch groups (batch_group_count) */
    int n_par;             /* convolution spatial dims that are a dot's batch dims (space dims
                              after the group dim): par_spatial[i] is the spatial dim index,
                              par_dim[i] its space dim */
    int par_spatial[GS_MAX_RANK], par_dim[GS_MAX_RANK];
    bool compose;          /* XLA's gather/scatter methods compose: the plan chosen is extended
                              by what the other operands tile on its replicated devices */
    const gs_part_value *third; /* a third operand the plan reshards too (a scatter's indices),
                              or NULL: compose reads its tiling through third_map */
    gs_part_space_map third_map;
} gs_part_space;

/* A space sharding and what it asks of the operands and gives the result. */
typedef struct gs_part_space_plan {
    const gs_sharding *f;          /* space sharding */
    const gs_sharding *lhs, *rhs;  /* operand shardings it needs */
    const gs_sharding *out;        /* result sharding it produces (maybe partial) */
    int64_t bytes;                 /* bytes its reshards move */
    double flops;                  /* local multiply-adds */
    const gs_sharding *lhs_read;   /* a convolution's lhs before its windows are read: lhs with
                                      the windowed dims the lhs holds whole replicated (each
                                      device slices its window there, no halo); else lhs */
} gs_part_space_plan;

/* The cheapest plan for `in` over space sp (operand values lv, rv as the space's lhs and rhs,
 * result sharding t wanted): candidates from the result, the operands, their merges and full
 * replication, costed by the bytes their reshards (and a convolution's halos) move, ties broken
 * by local FLOPs; but a plan a windowed einsum loop carries out (gs_part_windowed_applies),
 * leaving the other operand and the result as they are, is preferred to any plan that moves
 * data, as XLA prefers it. False when none applies. */
bool gs_part_plan_space(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                        const gs_part_value *lv, const gs_part_value *rv, const gs_sharding *t,
                        gs_part_space_plan *best);
/* Space sharding f projected onto a tensor mapped by m (absent dims replicated and dropped). */
const gs_sharding *gs_part_space_project(gs_part_ctx *c, const gs_part_space *sp,
                                         const gs_part_space_map *m, const gs_sharding *f);

/* ---- h_scan.c */

/* dynamic-slice / dynamic-update-slice of one element along dims the operand's value tiles:
 * the device holding it slices (the others contribute zeros to a partial value) or updates it;
 * false when the pattern does not apply. */
bool gs_part_owner_slice(gs_part_ctx *c, const gs_instr *in, gs_part_value *out);
bool gs_part_owner_update(gs_part_ctx *c, const gs_instr *in, gs_part_value *out);

/* ---- collectives.c */

/* Replica groups of the devices that differ only in tile dims dims[0..n) of s (in the
 * output module's arena; NULL after an allocation failure). */
gs_replica_groups *gs_part_groups_along(gs_part_ctx *c, const gs_sharding *s, int n,
                                        const int *dims);
gs_instr *gs_part_all_reduce(gs_part_ctx *c, gs_instr *x, const gs_replica_groups *g, gs_opcode op);
gs_instr *gs_part_all_gather(gs_part_ctx *c, gs_instr *x, int dim, int64_t size,
                             const gs_replica_groups *g);
gs_instr *gs_part_reduce_scatter(gs_part_ctx *c, gs_instr *x, int dim, int64_t size,
                                 const gs_replica_groups *g, gs_opcode op);
gs_instr *gs_part_all_to_all(gs_part_ctx *c, gs_instr *x, int dim, const gs_replica_groups *g);
gs_instr *gs_part_permute(gs_part_ctx *c, gs_instr *x, int n, const int64_t (*pairs)[2]);
/* The scalar computation of op for type t in the current output (cached). */
gs_computation *gs_part_reducer(gs_part_ctx *c, gs_opcode op, gs_type t);

/* ---- handlers (h_*.c). Each returns false to decline (the driver then takes the default
 * action); on success *out holds the result in any sharding, which the driver reshards to the
 * instruction's. */
typedef bool (*gs_part_handler)(gs_part_ctx *c, const gs_instr *in, const gs_sharding *target,
                                gs_part_value *out);
bool gs_part_handle_elementwise(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                gs_part_value *out);
bool gs_part_handle_parameter(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                              gs_part_value *out);
bool gs_part_handle_tuple(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                          gs_part_value *out);
bool gs_part_handle_gte(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out);
bool gs_part_handle_custom_call(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                gs_part_value *out);
bool gs_part_handle_copy(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out);
bool gs_part_handle_collective(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                               gs_part_value *out);
bool gs_part_handle_broadcast(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                              gs_part_value *out);
bool gs_part_handle_reshape(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                            gs_part_value *out);
bool gs_part_handle_transpose(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                              gs_part_value *out);
/* v reversed along its dims dims[0..n) (a split dim: each device reverses its tile, shifted
 * first where the dim is uneven), in v's sharding with those dims' tile order reversed; the
 * local reverse a clone of `like` (its name and metadata) when not NULL. With no v->hlo, only
 * out's sharding (out->hlo NULL), for planning. */
bool gs_part_reverse_value(gs_part_ctx *c, const gs_part_value *v, int n, const int *dims,
                           const gs_instr *like, gs_part_value *out);
bool gs_part_handle_reverse(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                            gs_part_value *out);
bool gs_part_handle_slice(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                          gs_part_value *out);
bool gs_part_handle_pad(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out);
bool gs_part_handle_concatenate(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                gs_part_value *out);
bool gs_part_handle_dynamic_slice(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                  gs_part_value *out);
bool gs_part_handle_dynamic_update_slice(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                         gs_part_value *out);
bool gs_part_handle_iota(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out);
bool gs_part_handle_constant(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                             gs_part_value *out);
bool gs_part_handle_reduce(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                           gs_part_value *out);
bool gs_part_handle_sort(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out);
/* h_fft.c: an FFT or IFFT whose last dim t splits evenly, by the four-step decomposition
 * (all-to-all, local FFT, twiddle, a ring of collective-permutes); false for the other
 * layouts (known before anything is emitted). */
bool gs_part_fft_distributed(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                             gs_part_value *out);
bool gs_part_handle_fft(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out);
bool gs_part_handle_select_and_scatter(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                       gs_part_value *out);
bool gs_part_handle_batched_matrix(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                   gs_part_value *out);
bool gs_part_handle_reduce_window(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                  gs_part_value *out);
bool gs_part_handle_dot(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out);
/* h_windowed.c: would a windowed loop carry out a dot's plan (see gs_partition_options)? Then
 * *looped is the operand it loops over (0 lhs, 1 rhs) and *scatters whether it scatters the
 * partial result. And that loop, emitted; false when it does not apply. */
bool gs_part_windowed_applies(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                              const gs_part_space_plan *plan, const gs_sharding *t,
                              int *looped, bool *scatters);
/* One step of a loop: next[1..n-1] from the state g[0..n-1] (g[0] the step number; next[0] is
 * made by the loop). Built in the loop body's computation. */
typedef void (*gs_part_step_fn)(gs_part_ctx *c, void *ctx, gs_instr *const *g, gs_instr **next);
/* while (step < k) state = f(state), from init (n <= 8 values, the counter first), its body and
 * condition named NAME_body and NAME_cond: the loop (a tuple of the state), or NULL. The
 * program does not grow with k. */
gs_instr *gs_part_build_loop(gs_part_ctx *c, const char *name, int n, gs_instr **init,
                             int64_t k, gs_part_step_fn f, void *ctx);
bool gs_part_windowed_dot(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                          const gs_part_space_plan *best, const gs_sharding *t, gs_part_value *out);
bool gs_part_handle_topk(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out);
/* h_batch_norm.c */
bool gs_part_handle_batch_norm_inference(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                         gs_part_value *out);
bool gs_part_handle_batch_norm_training(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                        gs_part_value *out);
bool gs_part_handle_batch_norm_grad(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                    gs_part_value *out);
/* h_rotate.c: XLA's partitioner-internal custom-calls that shift shards:
 * _SPMDInternalOp_RotateRight, _SPMDInternalOp_MultiRotate (L + R + 1 rotations by L .. -R),
 * _SPMDInternalOp_Wrap (circular padding by L and R), and _SPMDInternalOp_MultiPad ((x, pad
 * value) -> amt + 1 results, result i = x padded by amt - i before and i after). */
bool gs_part_handle_rotate_right(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                 gs_part_value *out);
bool gs_part_handle_multi_rotate(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                 gs_part_value *out);
bool gs_part_handle_wrap(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out);
bool gs_part_handle_multi_pad(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                              gs_part_value *out);
bool gs_part_handle_gather(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                           gs_part_value *out);
bool gs_part_handle_scatter(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                            gs_part_value *out);
bool gs_part_handle_while(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                          gs_part_value *out);
bool gs_part_handle_call(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out);
bool gs_part_handle_conditional(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                gs_part_value *out);
bool gs_part_handle_rng(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out);
/* infeed (h_control.c): each device reads its part of the fed value, its tile where a leaf's
 * sharding splits it evenly. */
bool gs_part_handle_infeed(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                           gs_part_value *out);
/* An instruction with a maximal sharding whose work or effects must happen on that device only
 * (custom-calls): a conditional on partition-id runs it there, the others hold zeros. */
bool gs_part_single_device(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                           gs_part_value *out);

/* Sharding helpers for handlers. */
/* Is s usable by the handlers (replicated, or tiled with only replication and manual
 * subgroups)? */
bool gs_part_plain(const gs_sharding *s);
/* Does tiled s have a manual subgroup (partially manual)? */
bool gs_part_partial_manual(const gs_sharding *s);
/* The sharding whole in every data dim (rank `rank`) within each manual group of partially
 * manual m. */
const gs_sharding *gs_part_manual_whole(gs_part_ctx *c, const gs_sharding *m, int rank);
/* s (plain) with data dims `dims` (n entries) replicated. */
const gs_sharding *gs_part_replicate_dims(gs_part_ctx *c, const gs_sharding *s, int n,
                                          const int *dims);
/* The partial sharding s (of a rank-`rank` value) with its unreduced tiles moved onto data dim
 * j (minor to j's own; {unreduced}: every device along j): what one reduce-scatter along j
 * reaches. NULL when s is not partial. */
const gs_sharding *gs_part_scatter_target(gs_part_ctx *c, const gs_sharding *s, int rank, int j);
/* The same onto two data dims j1 < j2: the unreduced tiles split k1 ways (major) onto j1 and
 * the rest onto j2 (each minor to the dim's own tiles). NULL when s is not partial or they do
 * not split so. */
const gs_sharding *gs_part_scatter_target2(gs_part_ctx *c, const gs_sharding *s, int rank, int j1,
                                           int64_t k1, int j2);
/* s with the tiles of data dim `from` moved onto data dim `to` (minor to its own tiles): what
 * one all-to-all reaches (reshard rung 7). s itself when `from` is not split. */
const gs_sharding *gs_part_move_tiles(gs_part_ctx *c, const gs_sharding *s, int from, int to);

#endif /* GSPMD_PARTITION_INTERNAL_H */
