/*
 * gspmd/interp.h — tensor values and the reference interpreter.
 *
 * gs_value is a runtime tensor: an array (malloc'd data in row-major order, elements stored as in
 * numeric.h) or a tuple of values. Values are reference counted (single-threaded: each device
 * thread has its own), so tuples and get-tuple-element share data instead of copying.
 *
 * The interpreter runs any module on one device with XLA's semantics: dot and convolution go
 * through OpenBLAS, f16/bf16 compute in f32 and round like XLA, integers wrap, reductions run in
 * a fixed order (results are deterministic). A gs_interp_env says which device it is (partition
 * and replica id) and how to run collectives; with no collective hooks, collectives on a single
 * device behave as XLA's do on one device (identity), and fail clearly otherwise.
 */
#ifndef GSPMD_INTERP_H
#define GSPMD_INTERP_H

#include "gspmd/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ values */

typedef struct gs_value gs_value;
struct gs_value {
    gs_type type;               /* element type, GS_TUPLE or GS_TOKEN */
    int rank;                   /* arrays: number of dims */
    int64_t dims[GS_MAX_RANK];  /* arrays: dim sizes */
    int64_t n;                  /* arrays: number of elements */
    void *data;                 /* arrays: n * gs_type_size(type) bytes (malloc), never NULL */
    int n_tuple;                /* tuples: number of elements */
    gs_value **tuple;           /* tuples: elements (each holds a reference) */
    int refs;                   /* reference count */
    int devices;                /* > 0: a bundle of per-device values, tuple[d] being device
                                   d's: a manual value (shard_map region, or a parameter or
                                   output with a manual sharding) of an unpartitioned module
                                   (see gs_eval_instr); 0 otherwise */
};

/* A new zero-filled array value. NULL on allocation failure. */
gs_value *gs_value_new_array(gs_type type, int rank, const int64_t *dims);
/* A new tuple taking over one reference to each element. NULL on failure (the references are
 * then released). */
gs_value *gs_value_new_tuple(int n, gs_value **elems);
gs_value *gs_value_new_token(void);
/* A zero-filled value of a shape (tuples recursively). */
gs_value *gs_value_from_shape(const gs_shape *s);
/* Adds a reference; returns v. */
gs_value *gs_value_ref(gs_value *v);
/* Drops a reference, freeing at zero. NULL is ignored. */
void gs_value_free(gs_value *v);
/* A deep copy (new data). */
gs_value *gs_value_copy(const gs_value *v);
/* Number of bytes of array data. */
size_t gs_value_bytes(const gs_value *v);
/* Does v have the element type and dims of array shape s (or the structure of tuple s)? A
 * dynamic dim (`<=N`) matches any size up to its bound: values hold only the valid elements of
 * dynamic dims (their current size, set by set-dimension-size / dynamic-reshape). */
bool gs_value_matches(const gs_value *v, const gs_shape *s);
/* Are a and b the same value bit for bit (types, dims, tuple structure, bytes)? */
bool gs_value_same_bits(const gs_value *a, const gs_value *b);
/* The array leaves of v, depth first (a bundle counts as one leaf). *leaves is malloc'd (free
 * it); each entry is borrowed. */
gs_status gs_value_leaves(gs_value *v, gs_value ***leaves, int *n);
/* v with bundles moved to its leaves: a bundle of per-device tuples becomes a tuple of bundles
 * of their elements. A new reference; NULL on allocation failure. */
gs_value *gs_value_bundles_to_leaves(gs_value *v);
/* Text like f32[2,3] for messages (buf of at least 64 bytes recommended). */
void gs_value_shape_str(const gs_value *v, char *buf, size_t size);

/* ------------------------------------------------------------------ environment */

typedef struct gs_interp_env gs_interp_env;

/* How collectives run: filled by the runtime (one device per thread or MPI rank). */
typedef struct gs_collectives {
    /* Executes collective instruction `in` on this device with its operand values; returns the
     * result in *out (a new reference). */
    gs_status (*execute)(void *ctx, const gs_instr *in, gs_value *const *operands, int n_operands,
                         gs_value **out, gs_diags *d);
    void *ctx;
    /* Executes collective `in` for every device at once on manual values of an unpartitioned
     * module: each operand a bundle of n_devices per-device values (or one value every device
     * shares); *out the bundle of the devices' results. NULL: such collectives are errors. */
    gs_status (*execute_bundle)(void *ctx, const gs_instr *in, gs_value *const *operands,
                                int n_operands, int n_devices, gs_value **out, gs_diags *d);
    /* The -done of an asynchronous collective whose -start `execute` handed to another thread
     * (its value `start` a placeholder): waits for it and returns true with *out (a new
     * reference) or an error in *st; false when `start` is no such value (the -done then takes
     * the result from it). NULL: every -start runs its collective at once. */
    bool (*finish)(void *ctx, const gs_value *start, gs_value **out, gs_status *st, gs_diags *d);
} gs_collectives;

/* Work that device threads of one process share (the runtime's src/runtime/share.c): before
 * a dot or convolution the interpreter calls begin, which returns the result another device
 * computed from operands equal bit for bit (a new value), or NULL: then this device computes
 * it, and if *claim was set calls end with its result (NULL when it failed), which the devices
 * waiting for it take (or compute themselves). */
typedef struct gs_work_sharing {
    gs_value *(*begin)(void *ctx, const gs_instr *in, gs_value *const *operands, int n_operands,
                       void **claim);
    void (*end)(void *ctx, void *claim, const gs_value *result);
    void *ctx;
} gs_work_sharing;

/* Told of each instruction an evaluation runs (a fused elementwise chain: its root), with its
 * start and end on CLOCK_MONOTONIC in seconds: `run --trace` records them. */
typedef struct gs_instr_observer {
    void (*done)(void *ctx, const gs_instr *in, double t0_s, double t1_s, const gs_value *result);
    void *ctx;
} gs_instr_observer;

struct gs_interp_env {
    int64_t partition_id;             /* partition-id() */
    int64_t replica_id;               /* replica-id() */
    int64_t num_partitions;           /* devices the program runs on (1 for the interpreter) */
    const gs_collectives *collectives; /* NULL: single-device collective semantics */
    uint64_t rng_seed;                /* seed of rng / rng-get-and-update-state */
    const char *device_label;         /* prefix for error messages ("device 3"), or NULL */
    const gs_work_sharing *sharing;   /* NULL: this device computes everything itself */
    int64_t manual_devices;           /* > 1: the reference of a program for that many devices:
                                         a partition-id whose sharding is manual is evaluated
                                         once per device, with its id (a per-device value) */
    const gs_instr_observer *observer; /* NULL: nobody watches */
};

/* ------------------------------------------------------------------ running */

/* Evaluates the entry computation of m on args (one per entry parameter, borrowed). *result is a
 * new reference. Errors name the instruction and point at its source line. */
gs_status gs_interp_eval(const gs_module *m, const gs_interp_env *env, gs_value *const *args,
                         int n_args, gs_value **result, gs_diags *d);

/* gs_interp_eval that also bounds the rounding error of the result: *bound has the result's
 * structure, and each float leaf holds, per element, an estimate of how far the element may be
 * from the same computation done with its sums in another order (a first-order running error
 * analysis: see src/interp/bounds.c). Leaves of other types (integers, predicates, complex) are
 * the result's own. Both are new references. For comparing a partitioned program's results. */
gs_status gs_interp_eval_bounded(const gs_module *m, const gs_interp_env *env,
                                 gs_value *const *args, int n_args, gs_value **result,
                                 gs_value **bound, gs_diags *d);

/* Evaluates computation c of m on args (borrowed) with env (NULL: single device); *result is a
 * new reference. For runtimes applying a module's reduction computation. */
gs_status gs_interp_call(const gs_module *m, const gs_interp_env *env, const gs_computation *c,
                         gs_value *const *args, int n_args, gs_value **result, gs_diags *d);

/* If computation c is `ROOT r = op(param0, param1)` of scalars for a commutative binary op
 * (add, multiply, maximum, minimum, and, or, xor), returns true and the opcode. */
bool gs_comp_simple_binary(const gs_computation *c, gs_opcode *op);

/* Does the interpreter have a kernel for op? (A unit test walks the op table with this.) */
bool gs_interp_supports(gs_opcode op);

/* Named inputs from the command line: NAME=FILE.npy pairs. Zero-initialise. */
typedef struct gs_interp_inputs {
    int n;
    char **names;
    char **paths;
} gs_interp_inputs;

gs_status gs_interp_inputs_add(gs_interp_inputs *in, const char *name, size_t name_len,
                               const char *path);
void gs_interp_inputs_free(gs_interp_inputs *in);

/* Builds the entry arguments: parameters named in `inputs` are read from .npy (checked against the
 * parameter's type and shape; bf16 from float32), others get seeded random values (floats
 * uniform in [-1,1), signed ints in [-8,8), unsigned in [0,16), preds fair coins; parameter i is
 * seeded from (seed, i)); a weight's floats are scaled as an initialiser would
 * (gs_init_fan_in). An input naming no parameter is an error. *args is malloc'd. */
gs_status gs_interp_make_args(const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                              gs_value ***args, int *n_args, gs_diags *d);
/* As gs_interp_make_args, for a run on n_devices: a parameter leaf with a manual sharding has no
 * single global value, each manual group (each device, when fully manual) holding its own, so
 * it becomes a bundle (gs_value.devices = n_devices) of one value per device, its group's:
 * seeded random per group, or the .npy input for every group. */
gs_status gs_interp_make_sharded_args(const gs_module *m, const gs_interp_inputs *inputs,
                                      uint64_t seed, int64_t n_devices, gs_value ***args,
                                      int *n_args, gs_diags *d);
/* A sharded run's arguments, made per device where they are used: a random parameter's part is
 * drawn alone (each element from its own place in the parameter's stream, so a device's part
 * holds exactly what gs_value_shard of gs_interp_make_sharded_args's value gives it, and no
 * global copy is ever made), while a parameter read from .npy (or a tuple or manual one) is
 * made whole once and sliced. gs_arg_source_part may be called from several threads at once. */
typedef struct gs_arg_source gs_arg_source;
/* The arguments gs_interp_make_sharded_args would make (its errors alike), for n_devices. */
gs_status gs_arg_source_new(const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                            int64_t n_devices, gs_arg_source **out, gs_diags *d);
/* Given global arguments (one per entry parameter of m, borrowed: they must outlive the source),
 * sliced per device. NULL on allocation failure. */
gs_arg_source *gs_arg_source_of(const gs_module *m, gs_value *const *args);
/* The number of arguments (m's entry parameters). */
int gs_arg_source_count(const gs_arg_source *src);
/* Device `device`'s part of argument i under sharding s (as gs_value_shard; a new value). */
gs_status gs_arg_source_part(const gs_arg_source *src, int i, const gs_sharding *s,
                             int64_t device, gs_value **out, gs_diags *d);
/* Which part of argument i device `device` gets under sharding s, as a key (at most
 * GS_MAX_RANK + 1 entries): devices whose keys are equal get equal parts (replicas), so one can
 * be made and copied. Returns the key's length, or 0 when the part is not keyed (tuples, manual
 * values, a sharding that does not fit). */
int gs_arg_source_part_key(const gs_arg_source *src, int i, const gs_sharding *s,
                           int64_t device, int64_t *key);
void gs_arg_source_free(gs_arg_source *src);

/* A seeded random value of shape s (as above). */
gs_value *gs_random_value(const gs_shape *s, uint64_t seed);

/* The fan-in of a weight: the largest contraction that `value` (an entry parameter or a
 * constant; leaf: the element of a tuple one, -1 for an array) feeds through data movement
 * (convert, copy, reshape, transpose, bitcast, get-tuple-element) as a dot's right operand (its
 * contracting dims) or a convolution's kernel (input features times window); 0 for none. Its
 * random floats are drawn uniform in +-gs_init_limit(fan-in) instead of [-1, 1): LeCun's uniform
 * initialiser (variance 1 / fan-in), so that a deep network's activations stay near 1 and
 * verification of its outputs means something (uniform [-1, 1) weights grow them by ~sqrt(fan-in
 * / 3) a layer: 1e13 after a few). */
int64_t gs_init_fan_in(const gs_module *m, const gs_instr *value, int leaf);
/* gs_init_fan_in(m, parameter i, -1) of every entry parameter into fan[i] (n_params entries),
 * in one walk of the program rather than one per parameter. */
void gs_init_fan_ins(const gs_module *m, int64_t *fan);
/* sqrt(3 / fan_in), or 1 for a fan-in of at most 3. */
double gs_init_limit(int64_t fan_in);

/* Gives every constant written with elided values (`{...}`, as XLA prints large literals) a
 * seeded pseudo-random value (as gs_random_value, seeded by the constant's name and `seed`,
 * weights scaled by their fan-in as gs_interp_make_args's), so
 * that a module dumped that way can still be run and a partitioned program compared with it.
 * *n_filled counts them. Fails only on allocation failure. */
gs_status gs_module_fill_elided(gs_module *m, uint64_t seed, int *n_filled, gs_diags *d);

/* make_args + eval + leaves: the outputs' array leaves as new references in *outs (malloc'd). */
gs_status gs_interp_run_entry(const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                              gs_value ***outs, int *n_outs, gs_diags *d);

/* The global arguments of the next step of m after one whose arguments were args and whose
 * global result is `result`: next[i] is the output aliased to parameter i (input_output_alias),
 * else args[i] (new references either way; n_args of them). `eval --steps` and `run --steps
 * --verify` step the reference by it. */
gs_status gs_step_arguments(const gs_module *m, gs_value *const *args, int n_args,
                            gs_value *result, gs_value **next, gs_diags *d);

/* gs_interp_run_entry `steps` times (>= 1), each step's arguments the previous step's by
 * gs_step_arguments; step_s (NULL, or `steps` entries) gets each evaluation's wall seconds.
 * The outputs are the last step's. */
gs_status gs_interp_run_entry_steps(const gs_module *m, const gs_interp_inputs *inputs,
                                    uint64_t seed, int steps, double *step_s, gs_value ***outs,
                                    int *n_outs, gs_diags *d);

/* ------------------------------------------------------------------ sharded values */

/* Device `device`'s part of the global value v under sharding s (a tuple sharding for tuples, or
 * one sharding for every leaf), as a partitioned program's parameter holds it: the shard of each
 * tiled leaf, zero-padded at the end to ceil(dim / tiles); whole values for replicated, maximal
 * and unknown shardings. A bundle leaf (a manual value) gives the device its own part, sliced
 * by the automatic dims of a partially manual sharding. Fails (with an error) when a sharding
 * does not fit its leaf. *out is a new value. */
gs_status gs_value_shard(const gs_value *v, const gs_sharding *s, int64_t device,
                         gs_value **out, gs_diags *d);

/* The global value of shape `shape` reassembled from every device's part (parts[0..n_devices))
 * under sharding s: the valid region of each tile from the devices holding it; a maximal leaf
 * from its device; a manual leaf as a bundle of n_devices values, device d's the value of its
 * manual group. Devices holding the same data (replicas) must agree bitwise, else an error
 * names the two devices and the output leaf. *out is a new value. */
gs_status gs_value_unshard(gs_value *const *parts, int n_devices, const gs_sharding *s,
                           const gs_shape *shape, gs_value **out, gs_diags *d);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_INTERP_H */
