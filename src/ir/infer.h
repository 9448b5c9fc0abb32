/*
 * ir/infer.h — what the shape-inference files of src/ir/ share: the inference context, the
 * vocabulary every rule is written in (errors located at the instruction, shape text, shape
 * building, attribute lookups: static inline, so each file keeps its short names), the checks
 * that several op families make (infer.c), and the rule of each op family.
 *
 * Files:
 *   infer.c             dispatch on the opcode, the entry points (gs_infer_shape,
 *                       gs_infer_written), shape compatibility, the shared checks
 *   infer_elementwise.c unary, binary, compare, select, clamp, map, reduce-precision
 *   infer_shape.c       transpose, reverse, slice, dynamic-slice, dynamic-update-slice,
 *                       concatenate, pad, get-dimension-size, set-dimension-size
 *   infer_dot.c         dot, ragged-dot, convolution
 *   infer_reduce.c      reduce, reduce-window, select-and-scatter, sort, topk, scan
 *   infer_gather.c      gather, scatter
 *   infer_linalg.c      fft, cholesky, triangular-solve, batch-norm-*
 *   infer_control.c     get-tuple-element, tuple, while, conditional, call, fusion, the
 *                       -start/-done halves of asynchronous ops
 *   infer_collective.c  all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
 *                       collective-broadcast, ragged-all-to-all (replica groups, pairs)
 *   infer_token.c       after-all, add-dependency, outfeed, send, recv-done
 *   infer_written.c     the ops whose shape is written, not inferred (broadcast, reshape,
 *                       convert, iota, constant, rng, infeed, recv, async-start): checks only
 *
 * A rule gs_infer_<op>(c, out) checks c->in and sets *out to its result shape (built in c->a),
 * or leaves *out NULL when a computation it calls is not usable yet; on a violation it appends
 * `<opcode> <name>: <what is wrong>` at the instruction and returns GS_ERR.
 */
#ifndef GSPMD_IR_INFER_H
#define GSPMD_IR_INFER_H

#include "gspmd/ir.h"
#include "ir/internal.h"

#include <stdarg.h>
#include <string.h>

/* ------------------------------------------------------------------ context and errors */

/* What one inference needs. Lives on the stack of gs_infer_shape / gs_module_verify. */
typedef struct ictx {
    const gs_instr *in;       /* the instruction */
    const gs_shape *declared; /* its written shape when verifying; NULL when inferring one */
    gs_arena *a;              /* where the inferred shape is built */
    gs_arena *scratch;        /* message text and temporary arrays */
    gs_diags *d;              /* where errors go */
    int64_t num_partitions;   /* from the module header (1 when absent or unknown) */
    int64_t replica_count;    /* from the module header (1 when absent or unknown) */
} ictx;

static inline const char *op_text(const gs_instr *in) {
    return in->op_text ? in->op_text : gs_op_name(in->op);
}

/* Appends `<opcode> <name>: <message>` at the instruction and returns GS_ERR. */
__attribute__((format(printf, 2, 3))) static inline gs_status fail(ictx *c, const char *fmt, ...) {
    gs_sb sb = {0};
    va_list ap;
    va_start(ap, fmt);
    gs_sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    gs_error(c->d, c->in->span, "%s %s: %s", op_text(c->in), c->in->name,
             sb.failed ? "out of memory" : gs_sb_str(&sb));
    gs_sb_free(&sb);
    return GS_ERR;
}

static inline gs_status oom(ictx *c) { return fail(c, "out of memory"); }

/* The shape's text without layout (`f32[2,3]`), kept in the scratch arena. */
static inline const char *sh(ictx *c, const gs_shape *s) {
    if (!s) return "(none)";
    gs_sb sb = {0};
    gs_shape_print(&sb, s, false);
    const char *r = sb.failed ? NULL : gs_arena_strdup(c->scratch, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return r ? r : "?";
}

/* `{0,1}` */
static inline const char *ints_text(ictx *c, gs_ints v) {
    gs_sb sb = {0};
    gs_sb_putc(&sb, '{');
    for (int i = 0; i < v.n; i++) gs_sb_printf(&sb, i ? ",%lld" : "%lld", (long long)v.v[i]);
    gs_sb_putc(&sb, '}');
    const char *r = sb.failed ? NULL : gs_arena_strdup(c->scratch, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return r ? r : "?";
}

static inline const char *tn(gs_type t) { return gs_type_name(t); }

/* ------------------------------------------------------------------ shape helpers */

static inline const gs_shape *opnd(const ictx *c, int i) { return c->in->operands[i]->shape; }
static inline bool arr(const gs_shape *s) { return gs_type_is_array(s->type); }
static inline bool is_scalar(const gs_shape *s) { return arr(s) && s->rank == 0; }
static inline bool is_token(const gs_shape *s) { return s->type == GS_TOKEN; }
static inline bool dyn_at(const gs_shape *s, int i) { return s->dynamic && s->dynamic[i]; }

/* Equal dims; a `?` (unbounded, stored as -1) matches anything. */
static inline bool dim_eq(int64_t a, int64_t b) { return a == b || a < 0 || b < 0; }

/* Same element type, all floating-point types counting as one (XLA's "ignoring fp precision"). */
static inline bool fp_eq(gs_type a, gs_type b) {
    return a == b || (gs_type_is_float(a) && gs_type_is_float(b));
}

/* The wider of two element types that fp_eq accepts (XLA's HigherPrecisionElementType). */
static inline gs_type higher(gs_type a, gs_type b) {
    return a != b && gs_type_bits(b) > gs_type_bits(a) ? b : a;
}

static inline gs_type component_type(gs_type t) {
    return t == GS_C64 ? GS_F32 : t == GS_C128 ? GS_F64 : t;
}

/* dst[0..rank) = s's dims (a scalar's dims pointer is NULL). */
static inline void copy_dims(int64_t *dst, const gs_shape *s) {
    if (s->rank > 0) memcpy(dst, s->dims, sizeof(int64_t) * (size_t)s->rank);
}

/* A new array shape (in c->a) of type t; dyn (may be NULL) gives the dynamic flags. */
static inline gs_shape *new_array(ictx *c, gs_type t, int rank, const int64_t *dims,
                                  const bool *dyn) {
    gs_shape *s = gs_shape_array(c->a, t, rank, dims);
    if (!s || !dyn) return s;
    for (int i = 0; i < rank; i++) {
        if (!dyn[i]) continue;
        s->dynamic = gs_arena_memdup(c->a, dyn, sizeof(bool) * (size_t)rank);
        return s->dynamic ? s : NULL;
    }
    return s;
}

/* s's dims and dynamic flags with element type t, without layout. */
static inline gs_shape *copy_as(ictx *c, const gs_shape *s, gs_type t) {
    return new_array(c, t, s->rank, s->dims, s->dynamic);
}

static inline gs_shape *new_tuple(ictx *c, int n, const gs_shape *const *elems) {
    return gs_shape_tuple(c->a, n, (gs_shape *const *)elems);
}

/* Stores a freshly built shape; a NULL one means the arena ran out of memory. */
static inline gs_status emit(ictx *c, gs_shape **out, const gs_shape *s) {
    if (!s) return oom(c);
    *out = (gs_shape *)s;
    return GS_OK;
}

static inline gs_status check_token_operand(ictx *c, int k) {
    if (!is_token(opnd(c, k)))
        return fail(c, "operand %d must be a token, not %s", k, sh(c, opnd(c, k)));
    return GS_OK;
}

/* ------------------------------------------------------------------ attributes and computations */

static inline const gs_attr *attr(const ictx *c, gs_attr_key k) { return gs_instr_attr(c->in, k); }

static inline gs_status need_attr(ictx *c, gs_attr_key k, const gs_attr **out) {
    *out = attr(c, k);
    return *out ? GS_OK : fail(c, "missing attribute %s", gs_attr_name(k));
}

static inline gs_status need_ints(ictx *c, gs_attr_key k, gs_ints *v) {
    const gs_attr *at;
    if (need_attr(c, k, &at) != GS_OK) return GS_ERR;
    *v = at->u.ints;
    return GS_OK;
}

static inline gs_status need_int(ictx *c, gs_attr_key k, int64_t *v) {
    const gs_attr *at;
    if (need_attr(c, k, &at) != GS_OK) return GS_ERR;
    *v = at->u.i;
    return GS_OK;
}

static inline const gs_shape *param_shape(const gs_computation *f, int i) {
    return f->params[i]->shape;
}
static inline const gs_shape *root_shape(const gs_computation *f) { return f->root->shape; }

/* ------------------------------------------------------------------ shared checks (infer.c) */

/* `dimensions={d}` naming one dimension of s. what names it in messages. */
gs_status gs_infer_need_one_dim(ictx *c, const gs_shape *s, const char *what, int64_t *d);
/* Each entry of v is a dimension of a rank-`rank` value (shape s when known), none repeats, and
 * (when sorted) they increase. what names one entry ("lhs contracting dimension"). */
gs_status gs_infer_check_dims(ictx *c, gs_ints v, int rank, const gs_shape *s, const char *what,
                              bool sorted);
/* Usable for inference: its root and parameters are known. */
bool gs_infer_comp_ready(const gs_computation *f);
/* The computation of attribute k: GS_ERR when the attribute is missing; *f NULL when it is not
 * usable yet (the caller then returns no shape). */
gs_status gs_infer_need_comp(ictx *c, gs_attr_key k, const gs_computation **f);
/* Checks reduction computation f of n accumulators (XLA's VerifyReducerShape); role names it in
 * messages. acc: the init types, elem: the input element types; fills res with its result
 * element types. */
gs_status gs_infer_check_reducer(ictx *c, const gs_computation *f, const char *role, int n,
                                 const gs_type *acc, const gs_type *elem, gs_type *res);
/* Output sizes res of window w over base dims (XLA's InferWindowOutputShape). */
gs_status gs_infer_window_out(ictx *c, const gs_window *w, const int64_t *base, int64_t *res);
/* The operands as the result: the one operand's shape, or a tuple of all of them. */
gs_status gs_infer_operands_as_result(ictx *c, gs_shape **out);

/* ------------------------------------------------------------------ rules of the op families */

/* infer_elementwise.c (binary also infers compare) */
gs_status gs_infer_unary(ictx *c, gs_shape **out);
gs_status gs_infer_binary(ictx *c, gs_shape **out);
gs_status gs_infer_select(ictx *c, gs_shape **out);
gs_status gs_infer_clamp(ictx *c, gs_shape **out);
gs_status gs_infer_map(ictx *c, gs_shape **out);
gs_status gs_infer_reduce_precision(ictx *c, gs_shape **out);

/* infer_shape.c */
gs_status gs_infer_transpose(ictx *c, gs_shape **out);
gs_status gs_infer_reverse(ictx *c, gs_shape **out);
gs_status gs_infer_slice(ictx *c, gs_shape **out);
gs_status gs_infer_dynamic_slice(ictx *c, gs_shape **out);
gs_status gs_infer_dynamic_update_slice(ictx *c, gs_shape **out);
gs_status gs_infer_concatenate(ictx *c, gs_shape **out);
gs_status gs_infer_pad(ictx *c, gs_shape **out);
gs_status gs_infer_get_dimension_size(ictx *c, gs_shape **out);
gs_status gs_infer_set_dimension_size(ictx *c, gs_shape **out);

/* infer_dot.c (dot also infers ragged-dot) */
gs_status gs_infer_dot(ictx *c, gs_shape **out);
gs_status gs_infer_convolution(ictx *c, gs_shape **out);

/* infer_reduce.c */
gs_status gs_infer_reduce(ictx *c, gs_shape **out);
gs_status gs_infer_reduce_window(ictx *c, gs_shape **out);
gs_status gs_infer_select_and_scatter(ictx *c, gs_shape **out);
gs_status gs_infer_sort(ictx *c, gs_shape **out);
gs_status gs_infer_topk(ictx *c, gs_shape **out);
gs_status gs_infer_scan(ictx *c, gs_shape **out);

/* infer_gather.c */
gs_status gs_infer_gather(ictx *c, gs_shape **out);
gs_status gs_infer_scatter(ictx *c, gs_shape **out);

/* infer_linalg.c (batch_norm infers all three batch-norm ops) */
gs_status gs_infer_fft(ictx *c, gs_shape **out);
gs_status gs_infer_cholesky(ictx *c, gs_shape **out);
gs_status gs_infer_triangular_solve(ictx *c, gs_shape **out);
gs_status gs_infer_batch_norm(ictx *c, gs_shape **out);

/* infer_control.c (call also infers fusion) */
gs_status gs_infer_gte(ictx *c, gs_shape **out);
gs_status gs_infer_tuple(ictx *c, gs_shape **out);
gs_status gs_infer_while(ictx *c, gs_shape **out);
gs_status gs_infer_conditional(ictx *c, gs_shape **out);
gs_status gs_infer_call(ictx *c, gs_shape **out);
gs_status gs_infer_copy_start(ictx *c, gs_shape **out);
/* The element `index` of the operand's tuple (the -done half of an asynchronous pair). */
gs_status gs_infer_done(ictx *c, gs_shape **out, int index);

/* infer_collective.c (all_reduce also infers all-reduce-start; gather_scatter_collective
 * all-gather(-start) and reduce-scatter; collective_permute its -start) */
gs_status gs_infer_all_reduce(ictx *c, gs_shape **out);
gs_status gs_infer_gather_scatter_collective(ictx *c, gs_shape **out);
gs_status gs_infer_all_to_all(ictx *c, gs_shape **out);
gs_status gs_infer_collective_permute(ictx *c, gs_shape **out);
gs_status gs_infer_collective_broadcast(ictx *c, gs_shape **out);
gs_status gs_infer_ragged_all_to_all(ictx *c, gs_shape **out);

/* infer_token.c */
gs_status gs_infer_after_all(ictx *c, gs_shape **out);
gs_status gs_infer_add_dependency(ictx *c, gs_shape **out);
gs_status gs_infer_outfeed(ictx *c, gs_shape **out);
gs_status gs_infer_send(ictx *c, gs_shape **out);
gs_status gs_infer_recv_done(ictx *c, gs_shape **out);

/* infer_written.c: the checks of the ops without an inference rule, against their written shape
 * (c->declared); GS_OK when inferring (nothing written) and for ops without checks. */
gs_status gs_infer_check_written(ictx *c);

#endif /* GSPMD_IR_INFER_H */
