/*
 * gspmd/runtime.h — runs one SPMD program on N devices.
 *
 * Every device runs the same module with its own partition id (the reference interpreter per
 * device), and the module's collectives go through a communicator: a struct of function
 * pointers (gs_comm_ops) with two implementations, threads in one process (comm_threads.c, the
 * default: nothing to install) and MPI ranks across processes and machines (comm_mpi.c, built
 * when MPI is found). The collective semantics (replica groups, dimensions, reductions, tuple
 * operands) live above the communicator in collectives.c, written once for both.
 *
 * Failures: a device that fails stops the run; devices waiting in a collective wake up and
 * report which device failed; a collective that some device never reaches times out and names
 * the devices that did not arrive. Nothing hangs.
 */
#ifndef GSPMD_RUNTIME_H
#define GSPMD_RUNTIME_H

#include "gspmd/cost.h"
#include "gspmd/interp.h"
#include "gspmd/sharding.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ communicator */

/* Element-wise reductions the communicators implement natively. GS_RED_NONE means "not a
 * builtin": collectives.c then gathers and applies the module's reduction computation. */
typedef enum gs_reduce_op {
    GS_RED_NONE, GS_RED_SUM, GS_RED_PROD, GS_RED_MIN, GS_RED_MAX, GS_RED_AND, GS_RED_OR, GS_RED_XOR
} gs_reduce_op;

/* A group of devices taking part in one collective: its members' global device numbers in
 * group order (the order results are concatenated and reductions applied in). */
typedef struct gs_group {
    int size;            /* number of members */
    const int *members;  /* global device numbers, in group order */
    int index;           /* the calling device's position in members */
    int id;              /* which group of the collective this is (0..n_groups-1) */
    int n_groups;        /* number of groups the devices are split into */
    uint64_t key;        /* identifies the partition of devices into groups (for caching) */
} gs_group;

typedef struct gs_comm gs_comm;

/* The communicator interface. Every function is called by every device of the run in the same
 * order (SPMD), each with its own `dev`; buffers are the calling device's. Errors name the
 * devices concerned and are returned as values. */
typedef struct gs_comm_ops {
    /* Sums (etc.) n elements of type t across the group, in place in buf. Deterministic: the
     * result is bitwise the same on every member and from run to run. */
    gs_status (*all_reduce)(gs_comm *c, int dev, const gs_group *g, gs_type t, gs_reduce_op op,
                            void *buf, int64_t n, gs_diags *d);
    /* out (group size * bytes) = the members' `in` blocks concatenated in group order. */
    gs_status (*all_gather)(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                            void *out, gs_diags *d);
    /* in holds group-size blocks of `bytes`; block j goes to member j; out block j comes from
     * member j. */
    gs_status (*all_to_all)(gs_comm *c, int dev, const gs_group *g, const void *in, int64_t bytes,
                            void *out, gs_diags *d);
    /* Reduces in (group size * n elements) across the group and leaves block `index` of the
     * result (n elements) in out. */
    gs_status (*reduce_scatter)(gs_comm *c, int dev, const gs_group *g, gs_type t, gs_reduce_op op,
                                const void *in, int64_t n, void *out, gs_diags *d);
    /* Sends `bytes` of in to device `to` (-1: none) and receives into out from device `from`
     * (-1: none; out is left untouched). Every device calls it once per collective-permute. */
    gs_status (*permute)(gs_comm *c, int dev, int to, int from, const void *in, void *out,
                         int64_t bytes, gs_diags *d);
    /* Called once per process (not per device thread) after a run: gathers `bytes` from each
     * of this process's devices (local[i] for local device i) to the process running device 0,
     * whose out (n_devices * bytes, in device order) receives them. */
    gs_status (*gather_root)(gs_comm *c, const void *const *local, int64_t bytes, void *out,
                             gs_diags *d);
    /* Waits until every device arrives. */
    gs_status (*barrier)(gs_comm *c, int dev, gs_diags *d);
    /* Tells every device that `dev` failed (so waiting devices stop). */
    void (*abort)(gs_comm *c, int dev);
    /* Releases the communicator. */
    void (*free)(gs_comm *c);
    /* As all_gather, each member's block being `outer` pieces of `run` bytes that land
     * interleaved: member j's piece o at out + (o * group size + j) * run (a concatenation
     * along a dim with `outer` elements before it), with no intermediate copy. NULL: the
     * caller gathers blocks with all_gather and interleaves them. */
    gs_status (*all_gather_interleaved)(gs_comm *c, int dev, const gs_group *g, const void *in,
                                        int64_t outer, int64_t run, void *out, gs_diags *d);
} gs_comm_ops;

struct gs_comm {
    const gs_comm_ops *ops; /* the implementation */
    int n_devices;          /* devices in the run */
    int first_device;       /* first device number this process runs (MPI: rank * per_rank) */
    int local_devices;      /* devices this process runs */
    double timeout_s;       /* how long a collective waits for the others */
    bool share_work;        /* this process's device threads compute a dot or convolution once
                               for all of them that hold the same operands (replicas), the
                               others taking a copy (src/runtime/share.c); the constructors set
                               it when the process runs more device threads than it has cores */
    int64_t work_reused;    /* results taken that way, over the runs on this communicator */
    bool async_collectives; /* each device's -start collectives run on a helper thread while
                               the device computes on (src/runtime/async.c; threads backend) */
    struct gs_trace *trace; /* NULL, or where this process's devices record what they ran
                               (run --trace; gs_trace_new) */
};

/* A timeline of the instructions a process's devices ran (src/runtime/trace.c), for `run
 * --trace`: each device's instructions (a fused elementwise chain as its root) with their
 * start and end, collectives with their bytes. */
typedef struct gs_trace gs_trace;
/* A recorder for local_devices devices numbered from first_device. NULL on allocation failure. */
gs_trace *gs_trace_new(int local_devices, int first_device);
void gs_trace_free(gs_trace *t);
/* Device k (local) spent `seconds` blocked in the communicator (waiting for the other devices;
 * under MPI, the blocking exchange as a whole): counted into its next collective's event.
 * Safe from any thread; t may be NULL. */
void gs_trace_add_wait(gs_trace *t, int k, double seconds);
/* The observer device k (local) evaluates with (gspmd/interp.h). */
const gs_instr_observer *gs_trace_observer(gs_trace *t, int k);
/* Writes the timeline as Chrome trace-event JSON (what Perfetto and chrome://tracing open):
 * one process per device, complete ("X") events in microseconds from the first one; a
 * located error when path cannot be written. */
gs_status gs_trace_write(const gs_trace *t, const char *path, gs_diags *d);

/* The threads communicator: n devices, all in this process. NULL on allocation failure. */
gs_comm *gs_comm_threads_new(int n_devices, double timeout_s);
/* The MPI communicator: world size * devices_per_rank devices, devices r*k .. r*k+k-1 on rank r.
 * With one device per rank collectives map to MPI's; with several, each rank's devices are
 * threads that meet locally, one of them exchanges the rank's buffers with the other ranks
 * (MPI_Allgather), and every device computes its result from all inputs in group order.
 * Calls MPI_Init if needed. NULL (and an error) when MPI is unavailable. */
gs_comm *gs_comm_mpi_new(int devices_per_rank, double timeout_s, gs_diags *d);
/* Was gspmd built with MPI, and does the environment look like an mpirun launch? */
bool gs_mpi_available(void);
bool gs_mpi_launched(void);
/* MPI rank and world size (0 and 1 without MPI). */
int gs_mpi_rank(void);
int gs_mpi_world_size(void);
/* MPI_Finalize when MPI was initialised by gspmd. */
void gs_mpi_finalize(void);
/* The end of an MPI run: every rank says whether it succeeded; *all_ok tells whether all did.
 * Returns false when some rank never came (stuck or killed) within the timeout: the caller
 * must then exit at once with gs_mpi_exit_now, without finalizing. With the threads
 * communicator *all_ok = ok. (All ranks must agree before finalizing: Debian's Open MPI 4.1
 * mpirun hangs or crashes when ranks end differently.) */
bool gs_mpi_agree(gs_comm *c, bool ok, bool *all_ok);
/* Exits with status 1 without finalizing MPI (after gs_mpi_agree returned false). */
void gs_mpi_exit_now(void);
/* Ends the whole MPI job with status 1 (MPI_Abort), for a rank that cannot take part in a run
 * (its communicator could not be made): the other ranks would otherwise wait for it. Without
 * MPI, or before MPI_Init, it exits this process. */
void gs_mpi_abort_job(void);

/* ------------------------------------------------------------------ running */

typedef enum gs_backend { GS_BACKEND_THREADS, GS_BACKEND_MPI } gs_backend;

/* Options of a run. Zero-initialise, then set what you need. */
typedef struct gs_run_options {
    int n_devices;       /* number of partitions (devices) */
    gs_backend backend;  /* threads (default) or MPI */
    double timeout_s;    /* collective timeout; 0 = 60 seconds */
    uint64_t seed;       /* seed of random inputs and rng ops */
} gs_run_options;

/* Runs SPMD module m on every device of comm (this process's devices), each with its own
 * arguments args[local_device][param] (borrowed). On success results[local_device] holds each
 * local device's result (new references; the caller frees them and the array). Errors name the
 * failing device and instruction. */
gs_status gs_run_spmd(const gs_module *m, gs_comm *comm, gs_value **const *args,
                      gs_value ***results, uint64_t seed, gs_diags *d);

/* Collects every device's result on device 0 (the process running device 0): all[device] for
 * all n_devices (new references; free them and the array). Processes without device 0 get
 * *all = NULL. `local` are this process's results (borrowed). */
gs_status gs_gather_results(gs_comm *comm, const gs_module *m, gs_value *const *local,
                            gs_value ***all, gs_diags *d);

/* Checks, before running, that the module's collectives are consistent with n devices:
 * replica groups cover devices 0..n-1 exactly once with equal group sizes, source_target_pairs
 * are in range with no device sending or receiving twice, and num_partitions in the module (if
 * written) equals n. */
gs_status gs_check_collectives(const gs_module *m, int n_devices, gs_diags *d);

/* The executor of one collective instruction on one device (used by the interpreter through
 * gs_collectives). ctx is a gs_device_ctx. */
typedef struct gs_device_ctx {
    gs_comm *comm;          /* the communicator */
    int device;             /* this device's global number */
    const gs_module *m;     /* the module (for reduction computations) */
    struct gs_async *async; /* the helper thread of its asynchronous collectives, or NULL */
} gs_device_ctx;

gs_status gs_collective_execute(void *ctx, const gs_instr *in, gs_value *const *operands,
                                int n_operands, gs_value **out, gs_diags *d);
/* gs_collectives.finish for gs_collective_execute's asynchronous starts. */
bool gs_collective_finish(void *ctx, const gs_value *start, gs_value **out, gs_status *st,
                          gs_diags *d);
/* gs_collectives.execute_bundle for the reference interpreter (src/runtime/bundle.c): runs
 * collective `in` on the per-device values of manual operands, one thread per device on a
 * threads communicator. ctx is the module (const gs_module *). */
gs_status gs_collective_execute_bundle(void *ctx, const gs_instr *in, gs_value *const *operands,
                                       int n_operands, int n_devices, gs_value **out,
                                       gs_diags *d);

/* Runs partitioned program p, made from module m by gs_partition for comm's devices, on this
 * process's devices of comm (threads, or MPI ranks): the global arguments `args` (one per entry
 * parameter of m, borrowed; the same on every process) are sliced per device by m's parameter
 * shardings, every device runs p, the results are gathered to the process running device 0, and
 * the global result is reassembled there by m's root sharding into *out (a new value; NULL on
 * the other processes). The one path by which the CLI, the tests and library users run a
 * sharded module. */
gs_status gs_run_sharded(const gs_module *m, const gs_module *p, gs_comm *comm,
                         gs_value *const *args, int n_args, uint64_t seed, gs_value **out,
                         gs_diags *d);

/* gs_run_sharded `steps` times (>= 1), its arguments from `args` (each local device's parts
 * made by the device's own thread: random ones drawn for the device alone, gs_arg_source_new),
 * the arguments staying on the devices: where m declares
 * input_output_alias (a training step: parameters and optimizer state in, updated ones out),
 * step k's outputs are step k+1's arguments on each device (each aliased output must be sharded
 * as its parameter: a located error before the first step otherwise); the other arguments stay
 * as they were. step_s (NULL, or `steps` entries) gets each step's wall seconds on this process
 * (the run of the program only: slicing, gathering and reassembling are outside); progress
 * (NULL: none) is told after each step. *out is the last step's global result. */
typedef struct gs_step_progress {
    /* after step k (0-based) of `steps`, with the steps' times so far */
    void (*step_done)(void *ctx, int k, int steps, const double *step_s);
    void *ctx;
} gs_step_progress;
gs_status gs_run_sharded_steps(const gs_module *m, const gs_module *p, gs_comm *comm,
                               const gs_arg_source *args, uint64_t seed, int steps,
                               double *step_s, const gs_step_progress *progress,
                               gs_value **out, gs_diags *d);

/* gs_run_sharded on n_devices threads of this process (a new threads communicator). */
gs_status gs_run_partitioned(const gs_module *m, const gs_module *p, int n_devices,
                             gs_value *const *args, int n_args, uint64_t seed, double timeout_s,
                             gs_value **out, gs_diags *d);

/* ------------------------------------------------------------------ verification */

/* How far a float element may be from the reference, in units of its rounding-error bound. */
#define GS_VERIFY_MARGIN 16.0

/* How one output leaf of a partitioned run compares with the reference (src/runtime/verify.c). */
typedef struct gs_leaf_check {
    bool shape_ok;  /* got has the reference's element type and dims */
    bool exact;     /* integers and predicates: compared exactly */
    double error;   /* exact: the number of differing elements; real floats: the largest
                     * |got - want| / bound over the elements (0 when all equal, infinity where
                     * exactly known data differs or NaN/infinity do not match); complex: the
                     * largest difference over the reference's largest magnitude */
    double limit;   /* the largest acceptable error: 0, GS_VERIFY_MARGIN, or 1e-5 (complex) */
    int64_t worst;  /* row-major index of the element with the largest error; -1 when none */
    double got, want, bound; /* real floats: the values and bound at `worst` */
    bool ok;        /* error <= limit */
    int device;     /* manual outputs (a value per device): the device whose part is reported
                     * (the first that fails, else the largest error); -1 for other outputs */
} gs_leaf_check;

/* Compares leaf `got` with the reference's `want`, whose rounding-error bound is `bound` (from
 * gs_interp_eval_bounded; NULL: every float element must be equal). Fills *c; returns c->ok. */
bool gs_check_leaf(const gs_value *got, const gs_value *want, const gs_value *bound,
                   gs_leaf_check *c);

/* Runs the reference interpreter (gs_interp_eval_bounded, rng seed `seed`) on module m with the
 * global args and compares its result with `got`, the partitioned program's global result on
 * n_devices devices, leaf by leaf: *checks (malloc'd, one per output leaf, *n_checks of them),
 * *all_ok. A manual partition-id is evaluated once per device (env.manual_devices). Fails only
 * when the reference fails or the outputs' structure differs. */
gs_status gs_verify_outputs(const gs_module *m, gs_value *const *args, int n_args, uint64_t seed,
                            int n_devices, gs_value *got, gs_leaf_check **checks, int *n_checks,
                            bool *all_ok, gs_diags *d);

/* ------------------------------------------------------------------ calibration */

/* Measures this machine as one device of gspmd's threads backend (src/runtime/calibrate.c) for
 * the cost model's `this-cpu` profile: sgemm and dgemm on one thread, an elementwise loop,
 * memcpy bandwidth, the interpreter's cost per instruction, and all-reduces between 2 device
 * threads (bandwidth and latency; the same figures stand for inter-node links). Takes a few
 * seconds. GS_ERR only on allocation failure. */
gs_status gs_machine_calibrate(gs_machine *out, gs_diags *d);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_RUNTIME_H */
