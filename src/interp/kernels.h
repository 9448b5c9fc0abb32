/*
 * kernels.h — the interpreter's internal interface between the driver (interp.c) and the kernel
 * files (one per op family group: k_elementwise.c, k_shape.c, k_dynamic_shape.c, k_dot.c,
 * k_scaled_dot.c, k_reduce.c, k_fft.c, k_random.c, k_batch_norm.c, k_linalg.c).
 *
 * A kernel computes one instruction from its operand values into a new value. Operands are
 * borrowed; the result is a new reference owned by the caller. Kernels report problems with
 * gs_eval_error, which locates the message at the instruction's source line and names it.
 * Kernels may assume the module passed gs_module_verify (shapes and attributes are consistent),
 * but must still never crash on values they read (indices are clamped as XLA defines).
 */
#ifndef GSPMD_INTERP_KERNELS_H
#define GSPMD_INTERP_KERNELS_H

#include "gspmd/interp.h"
#include "gspmd/numeric.h"
#include "gspmd/sharding.h"

#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The complex number re + im*i, exactly (an inf or NaN part stays in its place, unlike
 * `re + im * I`). Stands in for C11's CMPLX, which glibc defines only for GCC; C11 lays out a
 * complex as an array of its two parts (6.2.5p13). */
static inline double complex gs_cmplx(double re, double im) {
    const double parts[2] = {re, im};
    double complex z;
    memcpy(&z, parts, sizeof z);
    return z;
}

typedef struct gs_scalar_prog gs_scalar_prog;

/* Spare arrays an evaluation keeps (and the smallest size kept: smaller ones are cheap). */
#define GS_EVAL_SPARES 4
#define GS_EVAL_SPARE_MIN_BYTES ((size_t)1 << 20)

/* State of one evaluation (one device, one run). */
typedef struct gs_eval {
    const gs_module *m;       /* the module being run */
    const gs_interp_env *env; /* device identity and collective hooks */
    gs_diags *d;              /* where errors go */
    uint64_t rng_state;       /* state of rng / rng-get-and-update-state */
    int depth;                /* nesting of computation calls (guards runaway recursion) */
    gs_scalar_prog *scalars;  /* compiled scalar computations (scalar.c); freed at the end */
    gs_value *donor;          /* an operand of the instruction being run that dies there and is
                                 held by nothing else: an elementwise kernel may write its
                                 result into it (gs_eval_new_result_in_place) */
    gs_value *spares[GS_EVAL_SPARES]; /* large arrays that died, kept for the next results of
                                 their size that will be wholly overwritten, so that a loop
                                 body or a layer stack does not map, fault in and zero fresh
                                 pages per instruction (gs_eval_keep_spare) */
    int64_t feeds_read;       /* values read from the (made-up) infeed queue: infeed.c */
} gs_eval;

/* ---- infeed.c */

/* One run of infeed `in`: (data, token), the data made up as infeed.c says. */
gs_status gs_eval_infeed(gs_eval *ev, const gs_instr *in, gs_value **out);

/* Frees the spare arrays of ev (at the end of an evaluation). */
void gs_eval_free_spares(gs_eval *ev);
/* Releases value v, which died in ev: a large array held by nothing else is kept as a spare
 * instead of being freed. */
void gs_eval_release(gs_eval *ev, gs_value *v);

/* ---- scalar.c: fast calls of scalar computations */

/* Runs scalar computation c on scalar args when it compiles (*handled set; *out a new value),
 * else leaves *handled false for the general path. Fails only on allocation failure. */
gs_status gs_eval_scalar_call(gs_eval *ev, const gs_computation *c, gs_value *const *args,
                              int n_args, gs_value **out, bool *handled);
/* The same for a predicate computation on element index[k] of data[k] (of types[k]) for each
 * parameter k: *result, without allocating. */
gs_status gs_eval_scalar_pred(gs_eval *ev, const gs_computation *c, const gs_type *types,
                              const void *const *data, const int64_t *index, int n_args,
                              bool *result, bool *handled);
/* Frees a chain of compiled computations. */
void gs_scalar_progs_free(gs_scalar_prog *p);

typedef gs_status (*gs_kernel_fn)(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                  gs_value **out);

/* Reports an error about `in` (prefixed with the device label, naming the instruction and its
 * opcode, located at its span). Returns GS_ERR. */
gs_status gs_eval_error(gs_eval *ev, const gs_instr *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "out of memory" error about `in`. */
gs_status gs_eval_oom(gs_eval *ev, const gs_instr *in);

/* Runs computation c on args (borrowed); *out is a new reference. */
gs_status gs_eval_call(gs_eval *ev, const gs_computation *c, gs_value *const *args, int n_args,
                       gs_value **out);

/* Bound mode: runs c like gs_eval_call and also propagates rounding-error bounds (bounds.c):
 * bargs bound args, *bout bounds *out (new references). */
gs_status gs_eval_call_bounded(gs_eval *ev, const gs_computation *c, gs_value *const *args,
                               gs_value *const *bargs, int n_args, gs_value **out,
                               gs_value **bout);

/* One instruction in bound mode (bounds.c): its value (*out) and bound (*bout) from its operands'
 * values and bounds. */
gs_status gs_bound_instr(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                         gs_value *const *bops, gs_value **out, gs_value **bout);

/* The bound of an exactly known value: zeros for float leaves, the value itself for the others
 * (bounds.c). NULL on allocation failure. */
gs_value *gs_bound_exact(gs_value *v);

/* The branch a conditional takes for its selector ops[0]: *branch and the index of the operand
 * it is called with. */
gs_status gs_eval_branch(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                         const gs_computation **branch, int *operand);

/* Evaluates one instruction (any opcode) on operand values; what gs_eval_call does per
 * instruction, exposed for wrappers that run an op under another spelling (async starts). */
gs_status gs_eval_instr(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out);

/* A new array value for instruction `in`'s (array) result shape; NULL after reporting OOM. */
gs_value *gs_eval_new_result(gs_eval *ev, const gs_instr *in);

/* ---- k_elementwise.c: f32 elementwise loops, one per op (shared with fusion.c, so that a fused
 * chain computes bit for bit what the kernels compute one op at a time) */

/* XLA's maximum and minimum of two floats: NaN if either is, and -0 below +0. Branch-free so
 * that loops over them vectorise: equal values are the same bits except +-0, where the AND of
 * the bits is +0 (the maximum) and the OR is -0 (the minimum). */
static inline float gs_max_f32(float u, float v) {
    uint32_t a, b, t;
    memcpy(&a, &u, 4);
    memcpy(&b, &v, 4);
    t = a & b;
    float tie, r = u > v ? u : v;
    memcpy(&tie, &t, 4);
    r = u == v ? tie : r;
    return u != u || v != v ? NAN : r;
}
static inline float gs_min_f32(float u, float v) {
    uint32_t a, b, t;
    memcpy(&a, &u, 4);
    memcpy(&b, &v, 4);
    t = a | b;
    float tie, r = u < v ? u : v;
    memcpy(&tie, &t, 4);
    r = u == v ? tie : r;
    return u != u || v != v ? NAN : r;
}

/* y[i] = op(x[i]) for the f32 unary ops (negate, abs, tanh, exp, expm1, log, log1p, sqrt, rsqrt,
 * logistic, sin, cos, erf, floor, ceil); false (nothing written) for other ops. */
bool gs_unary_f32(gs_opcode op, const float *x, float *y, int64_t n);
/* z[i] = op(x[i], y[i]) for add, subtract, multiply, divide, maximum, minimum; false for
 * other ops. z may be x or y. */
bool gs_binary_f32(gs_opcode op, const float *x, const float *y, float *z, int64_t n);
/* The same, or ev->donor when it has the result's type and dims (a new reference to it), or a
 * spare array of the same size (its contents left as they were), for kernels whose element i
 * of the result reads only element i of each operand and which write every element. */
gs_value *gs_eval_new_result_in_place(gs_eval *ev, const gs_instr *in);

/* ------------------------------------------------------------------ manual regions (manual.c) */

/* Is `in` the custom-call entering (SPMDFullToShardShape) / leaving (SPMDShardToFullShape) a
 * manual region? */
bool gs_manual_is_enter(const gs_instr *in);
bool gs_manual_is_exit(const gs_instr *in);
/* The device count of the first bundle among ops[0..n), 0 when none is one. */
int gs_bundle_devices(gs_value *const *ops, int n);
/* The devices instruction `in` is evaluated on one by one although no operand is per-device: a
 * partition-id with a manual sharding in a reference with env->manual_devices > 1; else 0. */
int gs_manual_id_devices(const gs_eval *ev, const gs_instr *in);
/* op cut into the bundle of its per-device parts by its instruction's sharding. */
gs_status gs_manual_enter(gs_eval *ev, const gs_instr *in, gs_value *op, gs_value **out);
/* The global value reassembled from bundle op by in's sharding. */
gs_status gs_manual_exit(gs_eval *ev, const gs_instr *in, gs_value *op, gs_value **out);
/* One instruction on its own operands (and bounds: bops, bout; NULL in value mode). */
typedef gs_status (*gs_per_device_fn)(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                      gs_value *const *bops, gs_value **out, gs_value **bout);
/* Runs fn once per device of an n_dev bundle, with partition-id d and device d's parts of the
 * bundle operands (others as they are); the results (and bounds) bundled. */
gs_status gs_per_device(gs_eval *ev, const gs_instr *in, int n_dev, gs_value *const *ops,
                        gs_value *const *bops, gs_value **out, gs_value **bout,
                        gs_per_device_fn fn);
/* The value of a loop condition p (a bundle's devices must agree). */
gs_status gs_eval_predicate(gs_eval *ev, const gs_instr *in, const gs_value *p, bool *go);

/* ------------------------------------------------------------------ scalar semantics */

/* Applies an elementwise unary op (UNARY family) to element ia of a (type at) and stores into
 * element io of out (type rt). */
void gs_scalar_unary(gs_opcode op, gs_type at, const void *a, int64_t ia, gs_type rt, void *out,
                     int64_t io);
/* Applies an elementwise binary op (BINARY family) to elements of a and b (both type t). */
void gs_scalar_binary(gs_opcode op, gs_type t, const void *a, int64_t ia, const void *b, int64_t ib,
                      gs_type rt, void *out, int64_t io);
/* compare: returns the predicate for direction dir ("EQ", ...) and compare type ("FLOAT",
 * "TOTALORDER", "SIGNED", "UNSIGNED", or NULL for the type's default). */
bool gs_scalar_compare(gs_type t, const void *a, int64_t ia, const void *b, int64_t ib,
                       const char *dir, const char *cmp_type);
/* convert element ia of a (type at) into element io of out (type rt), XLA's convert. */
void gs_scalar_convert(gs_type at, const void *a, int64_t ia, gs_type rt, void *out, int64_t io);

/* Applies a scalar reduction computation: acc[i_acc] = comp(acc[i_acc], x[i_x]) elementwise over
 * n_vals parallel arrays (variadic reductions). accs/xs hold n_vals arrays (types in types).
 * Uses the fast path when the computation is a simple binary op. */
gs_status gs_apply_reducer(gs_eval *ev, const gs_instr *in, const gs_computation *comp,
                           int n_vals, const gs_type *types, void *const *accs, int64_t i_acc,
                           const void *const *xs, int64_t i_x);

/* ------------------------------------------------------------------ index helpers */

/* Row-major strides of dims. */
void gs_strides(int rank, const int64_t *dims, int64_t *strides);
/* Advances a row-major multi-index; returns false after the last one. */
bool gs_index_next(int rank, const int64_t *dims, int64_t *idx);
/* Copies element i of src into element j of dst (same type of size `size`). */
static inline void gs_copy_elem(void *dst, int64_t j, const void *src, int64_t i, int size) {
    const unsigned char *s = (const unsigned char *)src + i * size;
    unsigned char *t = (unsigned char *)dst + j * size;
    for (int k = 0; k < size; k++) t[k] = s[k];
}

/* topk, also for the custom-call TopK (k_reduce.c). */
gs_status gs_eval_topk(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out);

/* ---- k_check.c: custom-calls `check.*` (StableHLO's check dialect): compare the actual and the
 * expected value, failing with a located error naming the check and the first mismatch. */
gs_status gs_eval_check(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out);

/* k_scaled_dot.c: the block-scaled dot (custom-call __op$block_scaled_dot). The dims of its
 * operands (lhs, rhs, lhs_scale, rhs_scale) as a batch of [M,K] x [N,K] products; false when
 * they do not fit (each scale dim must divide its operand's dim: one scale per block). */
bool gs_scaled_dot_dims(const gs_value *const *ops, int64_t *B, int64_t *M, int64_t *N,
                        int64_t *K);
/* Operand q times its block scales s, as doubles (malloc'd; |.| when `absolute`). */
double *gs_scaled_dot_dequant(const gs_value *q, const gs_value *s, bool absolute);
/* out[t,m,n] = sum_k a[t,m,k] b[t,n,k], in double. */
void gs_scaled_dot_core(const double *a, const double *b, int64_t B, int64_t M, int64_t N,
                        int64_t K, double *out);
gs_status gs_eval_block_scaled_dot(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                   gs_value **out);

/* ------------------------------------------------------------------ kernel families */

/* Each returns the kernel for an opcode of its family, or NULL if not handled there. */
gs_kernel_fn gs_kernel_elementwise(gs_opcode op);
gs_kernel_fn gs_kernel_shape(gs_opcode op);
gs_kernel_fn gs_kernel_dot(gs_opcode op);
gs_kernel_fn gs_kernel_reduce(gs_opcode op);
gs_kernel_fn gs_kernel_dynamic_shape(gs_opcode op);
gs_kernel_fn gs_kernel_fft(gs_opcode op);
gs_kernel_fn gs_kernel_random(gs_opcode op);
gs_kernel_fn gs_kernel_batch_norm(gs_opcode op);
gs_kernel_fn gs_kernel_linalg(gs_opcode op);

/* v's reference count now (read atomically: a shared argument's count changes on other device
 * threads; a count of 1 means this evaluation alone holds v and may reuse its buffer). */
static inline int gs_value_refs(const gs_value *v) {
    return __atomic_load_n(&v->refs, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ arguments (args.c, shard.c) */

/* Elements [first, first + len) of gs_random_value's array of type t seeded `seed` (each
 * element drawn from its own position in the stream, so any range alone), their floats scaled
 * by limit as an initialiser's weights are (1: not), into dst's elements [at, at + len). */
void gs_random_draw(gs_type t, void *dst, int64_t at, uint64_t seed, int64_t first, int64_t len,
                    double limit);
/* Draws into v (an array of the box's sizes) the box sd (v->rank dims) of the random value of
 * stream `seed` and dims `gdims`, as gs_random_draw draws it (floats scaled by limit). */
void gs_random_draw_box(gs_value *v, uint64_t seed, const int64_t *gdims, const gs_shard_dim *sd,
                        double limit);

/* A .npy file checked against a parameter's shape (gs_npy_open_as, npy.c): where its data
 * starts and its dtype (the parameter's, or f32 for a bf16 parameter). */
typedef struct gs_npy_info {
    const char *path; /* borrowed */
    long data_at;
    gs_type file_type, type;
} gs_npy_info;
gs_status gs_npy_open_as(const char *path, const gs_shape *want, const char *param_name,
                         gs_npy_info *info, gs_diags *d);
/* The box sd (rank entries; valid sizes at offsets) of the file's array of `dims`, read into v
 * (the part: dims sd[k].size) in the parameter's type; only those bytes are read. */
gs_status gs_npy_read_box(const gs_npy_info *info, int rank, const int64_t *dims,
                          const gs_shard_dim *sd, gs_value *v, gs_diags *d);

/* Device `device`'s box of an array of `dims` under tiled sharding s: per dim its offset,
 * padded size and valid size (sd, rank entries); *holds false when the device's part is zeros
 * (partial values: only the first device of an unreduced group holds them). A located error
 * when s does not fit the array or the device holds no tile. */
gs_status gs_shard_box(const gs_sharding *s, int rank, const int64_t *dims, int64_t device,
                       gs_shard_dim *sd, bool *holds, gs_diags *d);

#endif /* GSPMD_INTERP_KERNELS_H */
