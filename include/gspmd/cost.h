/*
 * gspmd/cost.h — what a program costs: arithmetic (dot and convolution FLOPs) and memory (the
 * peak of live values), each computation counted once per call site reachable from the entry
 * (a while body once per loop, every branch of a conditional), so a module and its partitioned
 * program compare fairly: per-device FLOPs against the unpartitioned FLOPs / N is how well the
 * work is divided (1.0 is perfect, N means it runs whole on every device).
 */
#ifndef GSPMD_COST_H
#define GSPMD_COST_H

#include "gspmd/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kinds of collective the step cost counts. */
typedef enum gs_cost_coll {
    GS_COST_ALL_REDUCE,
    GS_COST_ALL_GATHER,
    GS_COST_REDUCE_SCATTER,
    GS_COST_ALL_TO_ALL,
    GS_COST_PERMUTE,
    GS_N_COST_COLL
} gs_cost_coll;

/* Their names ("all-reduce", ...). */
const char *gs_cost_coll_name(gs_cost_coll k);

/* What running a module's entry costs one device. */
typedef struct gs_cost {
    double flops;        /* dot and convolution FLOPs (a multiply-add counts 2) */
    int64_t n_dots;      /* dots counted (per call site) */
    int64_t n_convs;     /* convolutions counted */
    int64_t param_bytes; /* bytes of the entry's parameters */
    int64_t peak_bytes;  /* peak of parameters plus live values: each value from its
                            instruction to its last use; tuples, get-tuple-element and
                            parameters alias their operands; a called computation's peak adds
                            to its caller's live set at the call; an output that
                            input_output_alias lets reuse a parameter's buffer (donated) is
                            written in place; values XLA's fusion computes inside their users'
                            kernels take no memory (elementwise ops, broadcasts, converts and
                            the like read only by ops that fuse them: elementwise ops,
                            reductions, data movement; a transpose read only by dots): the rule
                            the step model forms its kernels by (src/cost/fusion.c) */
    int64_t run_peak_bytes; /* the same peak with every value in memory of its own (no fusion,
                               no donated buffers): what gspmd's interpreter and executor hold
                               at most (they free each value after its last use) */
} gs_cost;

/* FLOPs of one instruction on its own (dot: 2 x result elements x contracted size;
 * convolution: 2 x result elements x window size x input features per group; 0 otherwise). */
double gs_cost_instr_flops(const gs_instr *in);

/* The cost of running module m's entry computation once. */
void gs_cost_module(const gs_module *m, gs_cost *out);

/* ------------------------------------------------------------------ machines */

/* How devices are connected along a link class. */
typedef enum gs_topology { GS_TOPO_SWITCH, GS_TOPO_RING, GS_TOPO_TORUS } gs_topology;

/* One class of link: per device, per direction. */
typedef struct gs_link {
    double bandwidth;     /* bytes/s */
    double latency;       /* seconds per message (per step of a ring) */
    gs_topology topology;
} gs_link;

/* A machine profile: what one device can do and how devices talk. */
typedef struct gs_machine {
    char name[64];
    char description[160];
    double flops_bf16;    /* peak FLOP/s of matmuls in bf16/f16/f8 */
    double flops_f32;     /* ... in f32 */
    double flops_f64;     /* ... in f64 */
    double vector_flops;  /* peak FLOP/s of elementwise arithmetic */
    double transcendentals; /* elementwise exp, log, tanh, ... per second (0: 8 vector FLOPs) */
    double mem_bandwidth; /* bytes/s of device memory */
    double mem_capacity;  /* bytes of device memory */
    double op_overhead;   /* seconds each kernel (gs_step_cost.kernels: a fusion as XLA would
                             form it, a dot, a collective...) costs beyond its arithmetic,
                             traffic and link latency: a kernel launch, or an interpreter's
                             dispatch; 0 for whole-program compilers */
    int node_devices;     /* devices that share the fast link (`intra`); 0: all of them */
    gs_link intra;        /* links within a node (NVLink, TPU ICI, shared memory) */
    gs_link inter;        /* links between nodes (InfiniBand, DCN, MPI over the network) */
} gs_machine;

/* The built-in profiles: tpu-v3 (one core, as the GSPMD paper counts devices), tpu-v4, a100,
 * h100, h200, mi300x, mi350x and this-cpu (one core of a typical x86 server;
 * gs_machine_calibrate in gspmd/runtime.h measures the real one). NULL-terminated. */
const char *const *gs_machine_names(void);
/* Fills *out with built-in profile `name`; false when there is none. */
bool gs_machine_builtin(const char *name, gs_machine *out);
/* Reads a profile from text: `key = value` lines, `#` comments. Keys: name, description,
 * flops.bf16, flops.f32, flops.f64, flops.vector, transcendentals, memory.bandwidth, memory.capacity,
 * op.overhead, node.devices, and for link in {intra, inter}: link.bandwidth, link.latency, link.topology
 * (switch, ring or torus). Numbers may use e-notation and the suffixes K M G T (powers of 1000)
 * or Ki Mi Gi Ti (of 1024). `base = NAME` starts from a built-in profile. Errors are located. */
gs_status gs_machine_parse(const gs_source *src, gs_machine *out, gs_diags *d);
/* Writes m as profile text (what gs_machine_parse reads). */
void gs_machine_print(const gs_machine *m, FILE *out);

/* ------------------------------------------------------------------ a step on a machine */

/* The collectives of one step of a program, per kind (kinds as the partitioner counts them). */
typedef struct gs_collective_cost {
    double count;      /* executions per step (a loop's collectives once per iteration) */
    double bytes;      /* bytes each device holds of the data (all-gather: the result) */
    double wire_bytes; /* bytes each device sends by the algorithm chosen */
    double seconds;    /* time of all of them, one after the other */
} gs_collective_cost;

/* One execution of a module's entry on one device of machine mc: while loops run their known
 * trip count (XLA's known_trip_count, or a counter compared with a constant), conditionals
 * their most expensive branch. */
typedef struct gs_step_cost {
    double matmul_flops;      /* dot and convolution FLOPs */
    double matmul_flops_lowp; /* ... of them in bf16/f16/f8 */
    double vector_flops;      /* elementwise and reduction FLOPs (one per element and op) */
    double transcendentals;   /* elementwise exp, log, tanh, logistic, ... (one per element),
                                 as XLA's cost analysis counts them apart */
    double bytes;             /* memory traffic, per kernel: its result written once, its inputs
                                 in memory read (once per operand of the kernel's last op, once
                                 per kernel through the ops fused into it); values fused into
                                 their users take none; slices, dynamic slices and gathers read
                                 only what they keep, and dynamic-update-slice writes its update
                                 in place */
    double kernels;           /* kernels launched, as XLA's fusion would form them: one per
                                 fusion (an elementwise chain with its consumer, a reduction with
                                 its elementwise producers), dot, convolution, collective,
                                 custom-call...; parameters, constants, tuples, reshapes and
                                 values fused into their users none (src/cost/fusion.c) */
    double compute_s;         /* sum over instructions of max(FLOPs / peak, bytes / bandwidth),
                                 plus op_overhead per kernel */
    gs_collective_cost coll[GS_N_COST_COLL];
    double comm_s;            /* time of all collectives (each with its kernel's op_overhead) */
    double exposed_comm_s;    /* the part of comm_s not hidden behind compute: synchronous
                                 collectives wholly, asynchronous ones (-start ... -done) less the
                                 compute scheduled between their halves */
    double step_s;            /* compute_s + exposed_comm_s */
    int64_t peak_bytes;       /* gs_cost_module's peak_bytes */
    bool fits;                /* peak_bytes <= mc->mem_capacity */
    int unknown_trip_counts;  /* while loops whose trip count is unknown (counted once) */
} gs_step_cost;

/* The cost of one step of module m (a partitioned program: per device) on machine mc. GS_ERR (a
 * located error) when some value's dimension has no size ('?'): a step's cost needs them all. */
gs_status gs_cost_step(const gs_module *m, const gs_machine *mc, gs_step_cost *out,
                       gs_diags *d);

/* gs_cost_step's prediction laid out in time, written to `path` as Chrome trace-event JSON (the
 * format `gspmd run --trace` writes, so prediction and measurement open side by side in
 * ui.perfetto.dev): one process (device 0: every device runs the same program), each kernel,
 * collective and called computation on thread 0 at the time the model predicts, the
 * asynchronous collectives on thread 1 beside the compute that hides them; a loop's iterations
 * each in turn (after 2M events, the rest left out and the process name says so). */
gs_status gs_cost_trace_write(const gs_module *m, const gs_machine *mc, const char *path,
                              gs_diags *d);
/* The trip count of while loop w when it is known; false otherwise. */
bool gs_cost_trip_count(const gs_instr *w, int64_t *trips);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_COST_H */
