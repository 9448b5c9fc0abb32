/*
 * gspmd/partition.h — the SPMD partitioner (GSPMD paper §4, after XLA's SpmdPartitioner): rewrites
 * a module whose instructions carry shardings into ONE program that every device runs with its
 * own partition id, with per-device shapes and the collectives that make it compute exactly what
 * the single-device module computes.
 *
 * Instructions without a sharding are replicated (XLA's partitioner semantics). The entry's
 * parameters take the per-device shapes of their shardings (uneven dims padded at the end: a
 * shard is ceil(dim / tiles) long) and the root returns the per-device value of its sharding, so
 * the module's signature changes; a runtime slices the global inputs by the parameter shardings
 * (gs_partition_param_sharding) and reassembles the outputs by the root's.
 *
 * Structure (src/partition/): a driver visits the entry in order and dispatches each instruction
 * to the handler of its op family, whose result it reshards to the instruction's sharding; the
 * default action (replicate operands, compute, reshard) is always correct. A partitioned
 * value (gs_part_value in src/partition/internal.h) has one reshard that walks a documented
 * ladder of lowerings, cheapest first. Collectives are created through a struct of functions
 * (gs_collective_ops) that tests may wrap to count them.
 */
#ifndef GSPMD_PARTITION_H
#define GSPMD_PARTITION_H

#include "gspmd/builder.h"
#include "gspmd/sharding.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kinds of collective the partitioner emits (for counting). */
typedef enum gs_coll_kind {
    GS_COLL_ALL_REDUCE,
    GS_COLL_ALL_GATHER,
    GS_COLL_REDUCE_SCATTER,
    GS_COLL_ALL_TO_ALL,
    GS_COLL_PERMUTE,
    GS_N_COLL_KINDS
} gs_coll_kind;

/* How the partitioner creates collectives: one function per kind, each appending to builder b
 * and returning the new instruction (NULL after b->failed is set). The defaults
 * (gs_collective_ops_default) call gs_build_all_reduce and friends; tests wrap them to count
 * collectives or bytes. ctx is the options' collectives_ctx. */
typedef struct gs_collective_ops {
    gs_instr *(*all_reduce)(void *ctx, gs_builder *b, gs_instr *x, const gs_replica_groups *g,
                            gs_computation *comp, int64_t channel);
    gs_instr *(*all_gather)(void *ctx, gs_builder *b, gs_instr *x, int dim, int64_t group_size,
                            const gs_replica_groups *g, int64_t channel);
    gs_instr *(*reduce_scatter)(void *ctx, gs_builder *b, gs_instr *x, int dim,
                                int64_t group_size, const gs_replica_groups *g,
                                gs_computation *comp, int64_t channel);
    gs_instr *(*all_to_all)(void *ctx, gs_builder *b, gs_instr *x, int dim,
                            const gs_replica_groups *g, int64_t channel);
    gs_instr *(*collective_permute)(void *ctx, gs_builder *b, gs_instr *x, int n_pairs,
                                    const int64_t (*pairs)[2], int64_t channel);
} gs_collective_ops;

/* The builders of gspmd/builder.h behind the interface. */
const gs_collective_ops *gs_collective_ops_default(void);

/* What a partitioning emitted, per kind of collective. */
typedef struct gs_partition_stats {
    int n[GS_N_COLL_KINDS];         /* collectives emitted */
    int64_t bytes[GS_N_COLL_KINDS]; /* bytes of their per-device operands or results,
                                       the larger (a reduce-scatter's operand) */
    int n_full_remat;               /* involuntary full rematerializations (each warned) */
    int n_default;                  /* instructions partitioned by the default action */
    int n_replicated;               /* of those and of the handlers' results, instructions
                                       computed on more of a value than their sharding gives a
                                       device (each warned: "computed whole") */
    int n_instrs;                   /* instructions in the partitioned program (every
                                       computation it partitioned) */
} gs_partition_stats;

/* Total bytes over all kinds. */
int64_t gs_partition_stats_bytes(const gs_partition_stats *s);

/* XLA's threshold_for_windowed_einsum_mib default. */
#define GS_WINDOWED_EINSUM_DEFAULT_MIB 256.0

/* Options. Zero-initialise, then set num_partitions. */
typedef struct gs_partition_options {
    int64_t num_partitions;                /* devices N (>= 1) */
    const gs_collective_ops *collectives;  /* NULL: gs_collective_ops_default() */
    void *collectives_ctx;                 /* passed to every collective function */
    bool no_warnings;                      /* do not warn (full rematerialization, default
                                              action, dims computed whole); still counted */
    bool strict;                           /* those warnings are errors instead */
    bool default_only;                     /* every instruction by the default action (tests
                                              compare the handlers' bytes against it) */
    bool no_windowed_einsum;               /* never build windowed einsum loops (below) */
    bool windowed_einsum;                  /* windowed_einsum_threshold_mib is set (else
                                              GS_WINDOWED_EINSUM_DEFAULT_MIB, XLA's default).
                                              A dot whose plan all-gathers an operand along a
                                              free dim to at least the threshold per device (or
                                              reduce-scatters a partial result that large) runs
                                              as a loop over the shards, each step a partial
                                              dot and a collective-permute to the next device
                                              (XLA's windowed einsum, preferred as XLA prefers
                                              it to any plan that moves data) */
    double windowed_einsum_threshold_mib;  /* MiB (>= 0) */
    bool bidirectional_windowed_einsum;    /* the all-gather loops pass shards both ways round
                                              the ring (about k/2 steps of two dots) */
    bool all_reduce_then_slice;            /* a partial sum wanted tiled is all-reduced, then
                                              each device slices its tile (dynamic-slice), as
                                              XLA's partitioner writes it; XLA's later
                                              ReduceScatterCreator pass makes one reduce-scatter
                                              of the two, which is what gspmd emits without this
                                              (half the bytes). Plans are costed with the
                                              reduce-scatter either way */
    long fail_alloc_at;                    /* fault injection: fail the output module's k-th
                                              arena allocation (0 = never) */
} gs_partition_options;

/* Partitions module m (not modified) for opts->num_partitions devices into *out, a new module
 * (free with gs_module_free) named like m, with num_partitions=N. Fails with located errors
 * when a sharding spans a different number of devices than N, when the module's own
 * num_partitions (if written and > 1) differs from N, or when an instruction cannot be
 * partitioned; warnings go to d too (opts->strict: as errors): a full rematerialization (naming
 * the instruction and both shardings), and every instruction computed on more of its value than
 * its sharding gives a device (the default action on sharded data, or a handler that keeps a
 * tiled dim whole), naming it, its opcode, its source line from metadata when present, the
 * shardings and the bytes gathered. stats may be NULL. */
gs_status gs_partition(const gs_module *m, const gs_partition_options *opts, gs_module **out,
                       gs_partition_stats *stats, gs_diags *d);

/* The sharding the partitioner gives entry parameter `param` of m: its own, or replicated (a
 * tuple of replicated leaves for tuple shapes). Lives in arena a (or in m). NULL on allocation
 * failure. The root's is gs_partition_root_sharding. */
const gs_sharding *gs_partition_param_sharding(gs_arena *a, const gs_module *m, int param);
const gs_sharding *gs_partition_root_sharding(gs_arena *a, const gs_module *m);

/* Checks that every sharding in m spans n devices (tiled and maximal ones), and that m's own
 * num_partitions (when written and > 1) is n. Errors at the instruction. */
gs_status gs_partition_check(const gs_module *m, int64_t n, gs_diags *d);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_PARTITION_H */
