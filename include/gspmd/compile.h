/*
 * gspmd/compile.h — the whole compile in one call, as `gspmd partition`, `run`, `cost` and
 * `propagate` do it before they print, run or cost the result (src/compile/):
 *
 *   verify → sizes known → apply shardings (mesh + requests; pin the parameters they set)
 *   → fill elided constants → propagate → partition for N devices → the runtime can run it
 *
 * Every check an input needs is made here, so that a caller cannot reach one stage with input
 * an earlier stage would have rejected; errors are located and go to the caller's gs_diags.
 */
#ifndef GSPMD_COMPILE_H
#define GSPMD_COMPILE_H

#include "gspmd/partition.h"
#include "gspmd/propagate.h"
#include "gspmd/sharding.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What to compile for. Fill with gs_compile_options_init, then set what differs. */
/* Which sharding propagation a compile runs. */
typedef enum gs_propagation_algorithm {
    GS_PROPAGATE_AUTO,   /* the default: Shardy's when the module carries Shardy's shardings
                            (it declares sdy.mesh, as JAX writes it), GSPMD's otherwise */
    GS_PROPAGATE_GSPMD,  /* XLA's ShardingPropagation (gs_propagate) */
    GS_PROPAGATE_SHARDY  /* Shardy's propagation (gs_sdy_propagate) */
} gs_propagation_algorithm;

typedef struct gs_compile_options {
    int64_t num_partitions;             /* devices N (>= 1; unused with no_partition) */
    const gs_mesh *mesh;                /* named mesh of the requests' PartitionSpecs, or NULL */
    int n_requests;                     /* --shard requests, applied in order; the entry */
    const gs_shard_request *requests;   /*   parameters they set keep their sharding whatever
                                           the header's allow_..._to_parameters says */
    bool no_propagate;                  /* partition the shardings as written (unannotated
                                           instructions replicate: XLA's partitioner alone) */
    gs_propagate_options propagate;     /* the propagation's options (init: is_spmd, as XLA's
                                           SPMD pipeline runs it); pinned_params is set here */
    gs_propagation_algorithm algorithm; /* which propagation (GS_PROPAGATE_AUTO: see below) */
    gs_sdy_options sdy;                 /* Shardy's propagation's options */
    bool keep_provenance;               /* keep where each sharding came from (result.info) */
    bool no_partition;                  /* stop after propagation (result.program is NULL) */
    gs_partition_options partition;     /* the partitioner's (num_partitions is taken above) */
    bool spmd_input;                    /* the module already is the SPMD program: check it
                                           (and with runnable, its collectives) and stop */
    bool runnable;                      /* the runtime must be able to run the program */
    bool fill_elided;                   /* give constants whose values were elided ({...})
                                           seeded random values, before partitioning, so the
                                           module and the program share them */
    uint64_t seed;                      /* their seed */
} gs_compile_options;

/* What a compile produced. Free with gs_compiled_free. */
typedef struct gs_compiled {
    gs_module *program;           /* the SPMD program, or NULL (no_partition, spmd_input) */
    gs_partition_stats stats;     /* what partitioning emitted */
    int n_set;                    /* instructions the requests gave a sharding */
    int n_filled;                 /* elided constants filled (fill_elided) */
    gs_propagate_info *info;      /* provenance (keep_provenance and propagation ran), or NULL */
} gs_compiled;

/* Whether a compile of m with algorithm a runs Shardy's propagation. */
bool gs_compile_uses_shardy(const gs_module *m, gs_propagation_algorithm a);

/* Zeroes o and sets the defaults: N devices, propagation in SPMD mode. */
void gs_compile_options_init(gs_compile_options *o, int64_t num_partitions);

/* Compiles m (changed in place: its shardings applied and propagated) as o says into *out.
 * On failure *out holds nothing to free and d says why, located where the input is. */
gs_status gs_compile(gs_module *m, const gs_compile_options *o, gs_compiled *out, gs_diags *d);

void gs_compiled_free(gs_compiled *c);

#ifdef __cplusplus
}
#endif

#endif /* GSPMD_COMPILE_H */
