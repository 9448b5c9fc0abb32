/*
 * infer.c — XLA's shape inference (xla/service/shape_inference.cc).
 *
 * gs_infer_shape computes an instruction's result shape from its opcode, its operands' shapes,
 * its attributes and the computations it calls; on the way it checks what XLA checks there:
 * dimension numbers in range and unique, matching element types, window and padding arithmetic,
 * the signatures of reducers, comparators and called computations. The parser uses it for
 * instructions written without a shape; the verifier (verify.c) runs it on every instruction
 * through gs_infer_written, which also checks the ops whose shape must be written (broadcast,
 * reshape, convert, iota...) and the collectives' replica groups and source-target pairs.
 *
 * Errors read `<opcode> <name>: <what is wrong>`, located at the instruction. One function per
 * op family infers the shape; it sees the written shape (ictx.declared) only when verifying, for
 * the ops whose shape cannot be inferred and for the collectives where XLA itself derives the
 * shard count from the written shape (when the module does not say how many devices there are).
 */
#include "gspmd/ir.h"
#include "ir/internal.h"

#include <stdlib.h>
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

static const char *op_text(const gs_instr *in) {
    return in->op_text ? in->op_text : gs_op_name(in->op);
}

/* Appends `<opcode> <name>: <message>` at the instruction and returns GS_ERR. */
__attribute__((format(printf, 2, 3))) static gs_status fail(ictx *c, const char *fmt, ...) {
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

static gs_status oom(ictx *c) { return fail(c, "out of memory"); }

/* The shape's text without layout (`f32[2,3]`), kept in the scratch arena. */
static const char *sh(ictx *c, const gs_shape *s) {
    if (!s) return "(none)";
    gs_sb sb = {0};
    gs_shape_print(&sb, s, false);
    const char *r = sb.failed ? NULL : gs_arena_strdup(c->scratch, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return r ? r : "?";
}

/* `{0,1}` */
static const char *ints_text(ictx *c, gs_ints v) {
    gs_sb sb = {0};
    gs_sb_putc(&sb, '{');
    for (int i = 0; i < v.n; i++) gs_sb_printf(&sb, i ? ",%lld" : "%lld", (long long)v.v[i]);
    gs_sb_putc(&sb, '}');
    const char *r = sb.failed ? NULL : gs_arena_strdup(c->scratch, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return r ? r : "?";
}

static const char *tn(gs_type t) { return gs_type_name(t); }

/* ------------------------------------------------------------------ shape helpers */

static const gs_shape *opnd(const ictx *c, int i) { return c->in->operands[i]->shape; }
static bool arr(const gs_shape *s) { return gs_type_is_array(s->type); }
static bool is_scalar(const gs_shape *s) { return arr(s) && s->rank == 0; }
static bool is_token(const gs_shape *s) { return s->type == GS_TOKEN; }
static bool dyn_at(const gs_shape *s, int i) { return s->dynamic && s->dynamic[i]; }

/* Equal dims; a `?` (unbounded, stored as -1) matches anything. */
static bool dim_eq(int64_t a, int64_t b) { return a == b || a < 0 || b < 0; }

bool gs_shape_dims_compatible(const gs_shape *a, const gs_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (!dim_eq(a->dims[i], b->dims[i])) return false;
    return true;
}

/* Same element type, all floating-point types counting as one (XLA's "ignoring fp precision"). */
static bool fp_eq(gs_type a, gs_type b) {
    return a == b || (gs_type_is_float(a) && gs_type_is_float(b));
}

/* The wider of two element types that fp_eq accepts (XLA's HigherPrecisionElementType). */
static gs_type higher(gs_type a, gs_type b) {
    return a != b && gs_type_bits(b) > gs_type_bits(a) ? b : a;
}

/* XLA's ShapeUtil::Compatible: same tree, element types and dims; layouts and dynamic flags
 * ignored. ignore_fp: any two floating-point types match. */
bool gs_shape_compatible(const gs_shape *a, const gs_shape *b, bool ignore_fp) {
    if (a->type == GS_TUPLE || b->type == GS_TUPLE) {
        if (a->type != b->type || a->n_tuple != b->n_tuple) return false;
        for (int i = 0; i < a->n_tuple; i++)
            if (!gs_shape_compatible(a->tuple[i], b->tuple[i], ignore_fp)) return false;
        return true;
    }
    if (is_token(a) || is_token(b)) return a->type == b->type;
    if (ignore_fp ? !fp_eq(a->type, b->type) : a->type != b->type) return false;
    return gs_shape_dims_compatible(a, b);
}

static gs_type component_type(gs_type t) {
    return t == GS_C64 ? GS_F32 : t == GS_C128 ? GS_F64 : t;
}

/* dst[0..rank) = s's dims (a scalar's dims pointer is NULL). */
static void copy_dims(int64_t *dst, const gs_shape *s) {
    if (s->rank > 0) memcpy(dst, s->dims, sizeof(int64_t) * (size_t)s->rank);
}

static bool in_list(gs_ints v, int64_t x) {
    for (int i = 0; i < v.n; i++)
        if (v.v[i] == x) return true;
    return false;
}

/* A new array shape (in c->a) of type t; dyn (may be NULL) gives the dynamic flags. */
static gs_shape *new_array(ictx *c, gs_type t, int rank, const int64_t *dims, const bool *dyn) {
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
static gs_shape *copy_as(ictx *c, const gs_shape *s, gs_type t) {
    return new_array(c, t, s->rank, s->dims, s->dynamic);
}

static gs_shape *new_tuple(ictx *c, int n, const gs_shape *const *elems) {
    return gs_shape_tuple(c->a, n, (gs_shape *const *)elems);
}

/* Stores a freshly built shape; a NULL one means the arena ran out of memory. */
static gs_status emit(ictx *c, gs_shape **out, const gs_shape *s) {
    if (!s) return oom(c);
    *out = (gs_shape *)s;
    return GS_OK;
}

/* ------------------------------------------------------------------ attributes */

static const gs_attr *attr(const ictx *c, gs_attr_key k) { return gs_instr_attr(c->in, k); }

static gs_status need_attr(ictx *c, gs_attr_key k, const gs_attr **out) {
    *out = attr(c, k);
    return *out ? GS_OK : fail(c, "missing attribute %s", gs_attr_name(k));
}

static gs_status need_ints(ictx *c, gs_attr_key k, gs_ints *v) {
    const gs_attr *at;
    if (need_attr(c, k, &at) != GS_OK) return GS_ERR;
    *v = at->u.ints;
    return GS_OK;
}

static gs_status need_int(ictx *c, gs_attr_key k, int64_t *v) {
    const gs_attr *at;
    if (need_attr(c, k, &at) != GS_OK) return GS_ERR;
    *v = at->u.i;
    return GS_OK;
}

/* `dimensions={d}` naming one dimension of s. what names it in messages. */
static gs_status need_one_dim(ictx *c, const gs_shape *s, const char *what, int64_t *d) {
    gs_ints v;
    if (need_ints(c, GS_ATTR_DIMENSIONS, &v) != GS_OK) return GS_ERR;
    if (v.n != 1) return fail(c, "dimensions must name one dimension, not %s", ints_text(c, v));
    *d = v.v[0];
    if (*d < 0 || *d >= s->rank)
        return fail(c, "%s %lld is out of range for %s", what, (long long)*d, sh(c, s));
    return GS_OK;
}

/* Each entry of v is a dimension of a rank-`rank` value (shape s when known), none repeats, and
 * (when sorted) they increase. what names one entry ("lhs contracting dimension"). */
static gs_status check_dims(ictx *c, gs_ints v, int rank, const gs_shape *s, const char *what,
                            bool sorted) {
    for (int i = 0; i < v.n; i++) {
        if (v.v[i] < 0 || v.v[i] >= rank) {
            if (s)
                return fail(c, "%s %lld is out of range for %s", what, (long long)v.v[i], sh(c, s));
            return fail(c, "%s %lld is out of range for rank %d", what, (long long)v.v[i], rank);
        }
        for (int j = 0; j < i; j++)
            if (v.v[j] == v.v[i]) return fail(c, "%s %lld appears twice", what, (long long)v.v[i]);
        if (sorted && i > 0 && v.v[i] < v.v[i - 1])
            return fail(c, "%ss %s must be sorted", what, ints_text(c, v));
    }
    return GS_OK;
}

/* ------------------------------------------------------------------ called computations */

/* Usable for inference: its root and parameters are known (the parser infers shapes before it
 * has read computations defined later, and while it reads the computation itself). */
static bool comp_ready(const gs_computation *f) {
    if (!f || !f->root || !f->root->shape) return false;
    for (int i = 0; i < f->n_params; i++)
        if (!f->params || !f->params[i] || !f->params[i]->shape) return false;
    return true;
}

/* The computation of attribute k: GS_ERR when the attribute is missing; *f NULL when it is not
 * usable yet (the caller then returns no shape). */
static gs_status need_comp(ictx *c, gs_attr_key k, const gs_computation **f) {
    const gs_attr *at;
    *f = NULL;
    if (need_attr(c, k, &at) != GS_OK) return GS_ERR;
    const gs_computation *p = NULL;
    if (gs_attr_kind_of(k) == GS_AK_COMP) {
        p = at->u.comp;
    } else {
        if (at->u.comps.n != 1)
            return fail(c, "%s must name one computation, not %d", gs_attr_name(k), at->u.comps.n);
        p = at->u.comps.v[0];
    }
    *f = comp_ready(p) ? p : NULL;
    return GS_OK;
}

static const gs_shape *param_shape(const gs_computation *f, int i) { return f->params[i]->shape; }
static const gs_shape *root_shape(const gs_computation *f) { return f->root->shape; }

/* Checks a reduction computation of n accumulators (XLA's VerifyReducerShape): 2n scalar
 * parameters, a scalar (n == 1) or an n-tuple of scalars as result, accumulator i of init type
 * acc[i] (up to fp precision), parameter n+i taking input elements of type elem[i]. Fills
 * res[i] with the result element types. */
static gs_status check_reducer(ictx *c, const gs_computation *f, const char *role, int n,
                               const gs_type *acc, const gs_type *elem, gs_type *res) {
    if (f->n_params != 2 * n)
        return fail(c, "%s computation %s must take %d parameters, but takes %d", role, f->name,
                    2 * n, f->n_params);
    const gs_shape *root = root_shape(f);
    const gs_shape *const *elems = &root;
    if (root->type == GS_TUPLE ? root->n_tuple != n : n != 1 || !arr(root)) {
        const char *want = n == 1 ? "a scalar" : gs_arena_printf(c->scratch, "%d scalars", n);
        return fail(c, "%s computation %s must return %s, not %s", role, f->name,
                    want ? want : "scalars", sh(c, root));
    }
    if (root->type == GS_TUPLE) elems = (const gs_shape *const *)root->tuple;
    for (int i = 0; i < n; i++) {
        const gs_shape *e = elems[i], *p = param_shape(f, i), *q = param_shape(f, n + i);
        if (!is_scalar(e))
            return fail(c, "%s computation %s must return scalars, not %s", role, f->name,
                        sh(c, root));
        if (!is_scalar(p) || p->type != e->type)
            return fail(c, "parameter %d of %s computation %s is %s, but its result is %s", i, role,
                        f->name, sh(c, p), sh(c, e));
        if (!fp_eq(e->type, acc[i]))
            return fail(c, "%s computation %s accumulates %s, but init value %d is %s", role,
                        f->name, tn(e->type), i, tn(acc[i]));
        if (!is_scalar(q) || !fp_eq(q->type, elem[i]))
            return fail(c, "parameter %d of %s computation %s is %s, but the input elements are %s",
                        n + i, role, f->name, sh(c, q), tn(elem[i]));
        res[i] = e->type;
    }
    return GS_OK;
}

/* A computation that combines two scalars into one (the to_apply of all-reduce and friends). */
static gs_status check_binary_combiner(ictx *c) {
    const gs_computation *f;
    if (need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (f->n_params != 2)
        return fail(c, "to_apply computation %s must take 2 parameters, but takes %d", f->name,
                    f->n_params);
    for (int i = 0; i < 2; i++)
        if (!is_scalar(param_shape(f, i)))
            return fail(c, "parameter %d of to_apply computation %s must be a scalar, not %s", i,
                        f->name, sh(c, param_shape(f, i)));
    if (!is_scalar(root_shape(f)))
        return fail(c, "to_apply computation %s must return a scalar, not %s", f->name,
                    sh(c, root_shape(f)));
    return GS_OK;
}

/* ------------------------------------------------------------------ elementwise */

static gs_status infer_unary(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    gs_type t = s->type, r = t;
    bool fl = gs_type_is_float(t), cx = gs_type_is_complex(t), in = gs_type_is_int(t);
    const char *want = NULL;
    switch (c->in->op) {
    case GS_OP_FLOOR:
    case GS_OP_CEIL:
    case GS_OP_ROUND_AFZ:
    case GS_OP_ROUND_EVEN:
        if (!fl) want = "a floating-point";
        break;
    case GS_OP_IS_FINITE:
        if (!fl) want = "a floating-point";
        r = GS_PRED;
        break;
    case GS_OP_CLZ:
    case GS_OP_POPCNT:
        if (!in) want = "an integer";
        break;
    case GS_OP_NOT:
        if (!in && t != GS_PRED) want = "a pred or integer";
        break;
    case GS_OP_NEGATE:
        if (!in && !fl && !cx) want = "a numeric";
        break;
    case GS_OP_ABS:
    case GS_OP_SIGN:
        if (!gs_type_is_signed_int(t) && !fl && !cx) want = "a signed, floating-point or complex";
        if (c->in->op == GS_OP_ABS) r = component_type(t);
        break;
    case GS_OP_REAL:
    case GS_OP_IMAG:
        if (!fl && !cx) want = "a floating-point or complex";
        r = component_type(t);
        break;
    default: /* transcendental functions */
        if (!fl && !cx) want = "a floating-point or complex";
        break;
    }
    if (want) return fail(c, "expects %s operand, not %s", want, sh(c, s));
    return emit(c, out, copy_as(c, s, r));
}

/* Dims of a and b with the dynamic flags of either. */
static gs_shape *merge_dyn(ictx *c, const gs_shape *a, const gs_shape *b, gs_type t) {
    bool dyn[GS_MAX_RANK];
    for (int i = 0; i < a->rank; i++) dyn[i] = dyn_at(a, i) || dyn_at(b, i);
    return new_array(c, t, a->rank, a->dims, dyn);
}

static gs_status check_compare_attrs(ictx *c) {
    static const char *const dirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
    const char *dir = gs_instr_str(c->in, GS_ATTR_DIRECTION);
    if (!dir) return fail(c, "missing attribute direction");
    bool ok = false;
    for (int i = 0; i < 6; i++) ok = ok || strcmp(dir, dirs[i]) == 0;
    if (!ok) return fail(c, "direction %s is not one of EQ, NE, LT, LE, GT, GE", dir);
    const char *ty = gs_instr_str(c->in, GS_ATTR_TYPE);
    if (!ty) return GS_OK;
    gs_type t = opnd(c, 0)->type;
    bool fl_kind = strcmp(ty, "FLOAT") == 0 || strcmp(ty, "TOTALORDER") == 0;
    if (!fl_kind && strcmp(ty, "SIGNED") != 0 && strcmp(ty, "UNSIGNED") != 0)
        return fail(c, "comparison type %s is not one of FLOAT, TOTALORDER, SIGNED, UNSIGNED", ty);
    bool fits = gs_type_is_float(t) || gs_type_is_complex(t) ? fl_kind
                : gs_type_is_signed_int(t)                   ? strcmp(ty, "SIGNED") == 0
                                                             : strcmp(ty, "UNSIGNED") == 0;
    if (!fits) return fail(c, "comparison type %s does not suit %s operands", ty, tn(t));
    return GS_OK;
}

static gs_status infer_binary(ictx *c, gs_shape **out) {
    const gs_shape *l = opnd(c, 0), *r = opnd(c, 1);
    gs_opcode op = c->in->op;
    if (!arr(l) || !arr(r))
        return fail(c, "operands must be arrays, not %s and %s", sh(c, l), sh(c, r));
    if (!fp_eq(l->type, r->type))
        return fail(c, "operand element types differ: %s and %s", sh(c, l), sh(c, r));
    gs_type t = l->type;
    switch (op) {
    case GS_OP_SUBTRACT:
    case GS_OP_ATAN2:
    case GS_OP_POWER:
    case GS_OP_DIVIDE:
    case GS_OP_REMAINDER:
    case GS_OP_SHIFT_LEFT:
    case GS_OP_SHIFT_RIGHT_ARITHMETIC:
    case GS_OP_SHIFT_RIGHT_LOGICAL:
        if (t == GS_PRED) return fail(c, "expects arithmetic operands, not %s", sh(c, l));
        break;
    case GS_OP_AND:
    case GS_OP_OR:
    case GS_OP_XOR:
        if (t != GS_PRED && !gs_type_is_int(t))
            return fail(c, "expects pred or integer operands, not %s", sh(c, l));
        break;
    case GS_OP_COMPARE:
        if (check_compare_attrs(c) != GS_OK) return GS_ERR;
        break;
    default: break;
    }
    if (!gs_shape_dims_compatible(l, r))
        return fail(c, "operand shapes differ: %s and %s (HLO has no implicit broadcast)", sh(c, l),
                    sh(c, r));
    gs_type rt = higher(l->type, r->type);
    if (op == GS_OP_COMPARE) rt = GS_PRED;
    if (op == GS_OP_COMPLEX) {
        if (l->type == GS_F32 && r->type == GS_F32)
            rt = GS_C64;
        else if (l->type == GS_F64 && r->type == GS_F64)
            rt = GS_C128;
        else
            return fail(c, "expects two f32 or two f64 operands, not %s and %s", sh(c, l),
                        sh(c, r));
    }
    return emit(c, out, merge_dyn(c, l, r, rt));
}

static gs_status infer_select(ictx *c, gs_shape **out) {
    const gs_shape *p = opnd(c, 0), *t = opnd(c, 1), *f = opnd(c, 2);
    if (!arr(p) || !arr(t) || !arr(f))
        return fail(c, "operands must be arrays, not %s, %s and %s", sh(c, p), sh(c, t), sh(c, f));
    if (p->type != GS_PRED) return fail(c, "predicate must be pred, not %s", sh(c, p));
    if (!fp_eq(t->type, f->type) || !gs_shape_dims_compatible(t, f))
        return fail(c, "on_true and on_false shapes differ: %s and %s", sh(c, t), sh(c, f));
    if (p->rank != 0 && !gs_shape_dims_compatible(p, t))
        return fail(c, "predicate shape %s does not match the operand shape %s", sh(c, p),
                    sh(c, t));
    return emit(c, out, merge_dyn(c, t, f, higher(t->type, f->type)));
}

static gs_status infer_clamp(ictx *c, gs_shape **out) {
    const gs_shape *lo = opnd(c, 0), *x = opnd(c, 1), *hi = opnd(c, 2);
    if (!arr(lo) || !arr(x) || !arr(hi))
        return fail(c, "operands must be arrays, not %s, %s and %s", sh(c, lo), sh(c, x),
                    sh(c, hi));
    if (!fp_eq(lo->type, x->type) || !fp_eq(hi->type, x->type))
        return fail(c, "element types differ: %s, %s and %s", sh(c, lo), sh(c, x), sh(c, hi));
    if ((lo->rank != 0 && !gs_shape_dims_compatible(lo, x)) ||
        (hi->rank != 0 && !gs_shape_dims_compatible(hi, x)))
        return fail(c, "min %s and max %s must be scalars or have the operand's shape %s",
                    sh(c, lo), sh(c, hi), sh(c, x));
    return emit(c, out, copy_as(c, x, x->type));
}

static gs_status infer_map(ictx *c, gs_shape **out) {
    const gs_shape *s0 = opnd(c, 0);
    for (int i = 0; i < c->in->n_operands; i++) {
        const gs_shape *s = opnd(c, i);
        if (!arr(s)) return fail(c, "operand %d must be an array, not %s", i, sh(c, s));
        if (!gs_shape_dims_compatible(s, s0))
            return fail(c, "operands must have the same dimensions, not %s and %s", sh(c, s0),
                        sh(c, s));
    }
    const gs_attr *dims = attr(c, GS_ATTR_DIMENSIONS);
    if (dims) {
        bool ok = dims->u.ints.n == s0->rank;
        for (int i = 0; ok && i < dims->u.ints.n; i++) ok = dims->u.ints.v[i] == i;
        if (!ok)
            return fail(c, "dimensions %s must list every dimension of %s in order",
                        ints_text(c, dims->u.ints), sh(c, s0));
    }
    const gs_computation *f;
    if (need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (f->n_params != c->in->n_operands)
        return fail(c, "to_apply computation %s must take %d parameters, but takes %d", f->name,
                    c->in->n_operands, f->n_params);
    for (int i = 0; i < f->n_params; i++) {
        const gs_shape *p = param_shape(f, i);
        if (!is_scalar(p) || !fp_eq(p->type, opnd(c, i)->type))
            return fail(c, "parameter %d of to_apply computation %s is %s, expected a %s scalar", i,
                        f->name, sh(c, p), tn(opnd(c, i)->type));
    }
    if (!is_scalar(root_shape(f)))
        return fail(c, "to_apply computation %s must return a scalar, not %s", f->name,
                    sh(c, root_shape(f)));
    return emit(c, out, copy_as(c, s0, root_shape(f)->type));
}

/* ------------------------------------------------------------------ data movement */

static gs_status infer_transpose(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    gs_ints p;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (need_ints(c, GS_ATTR_DIMENSIONS, &p) != GS_OK) return GS_ERR;
    bool ok = p.n == s->rank;
    bool seen[GS_MAX_RANK] = {false};
    for (int i = 0; ok && i < p.n; i++) {
        ok = p.v[i] >= 0 && p.v[i] < s->rank && !seen[p.v[i]];
        if (ok) seen[p.v[i]] = true;
    }
    if (!ok)
        return fail(c, "dimensions %s are not a permutation of the dimensions of %s",
                    ints_text(c, p), sh(c, s));
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    for (int i = 0; i < p.n; i++) {
        dims[i] = s->dims[p.v[i]];
        dyn[i] = dyn_at(s, (int)p.v[i]);
    }
    return emit(c, out, new_array(c, s->type, s->rank, dims, dyn));
}

static gs_status infer_reverse(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    gs_ints v;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (need_ints(c, GS_ATTR_DIMENSIONS, &v) != GS_OK) return GS_ERR;
    if (check_dims(c, v, s->rank, s, "reverse dimension", false) != GS_OK) return GS_ERR;
    return emit(c, out, copy_as(c, s, s->type));
}

static gs_status infer_slice(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    const gs_attr *at;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (need_attr(c, GS_ATTR_SLICE, &at) != GS_OK) return GS_ERR;
    if (at->u.slice.n != s->rank)
        return fail(c, "slice has %d dimensions, but the operand %s has rank %d", at->u.slice.n,
                    sh(c, s), s->rank);
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    for (int i = 0; i < s->rank; i++) {
        gs_slice_dim sd = at->u.slice.v[i];
        if (sd.start < 0)
            return fail(c, "slice start %lld of dimension %d is negative", (long long)sd.start, i);
        if (s->dims[i] >= 0 && sd.limit > s->dims[i])
            return fail(c, "slice limit %lld of dimension %d exceeds its size in %s",
                        (long long)sd.limit, i, sh(c, s));
        if (sd.start > sd.limit)
            return fail(c, "slice start %lld of dimension %d exceeds its limit %lld",
                        (long long)sd.start, i, (long long)sd.limit);
        if (sd.stride <= 0)
            return fail(c, "slice stride %lld of dimension %d is not positive",
                        (long long)sd.stride, i);
        dims[i] = (sd.limit - sd.start + sd.stride - 1) / sd.stride;
        dyn[i] = dims[i] != 1 && dyn_at(s, i);
    }
    return emit(c, out, new_array(c, s->type, s->rank, dims, dyn));
}

/* The start indices (operands first..) of a dynamic-(update-)slice of a rank-`rank` operand:
 * one integer vector of rank entries, or rank integer scalars of one type. */
static gs_status check_start_indices(ictx *c, int first, int rank) {
    int n = c->in->n_operands - first;
    const gs_shape *i0 = n > 0 ? opnd(c, first) : NULL;
    if (n >= 1 && arr(i0) && i0->rank == 1) {
        if (n != 1) return fail(c, "takes one start-index vector, but %d index operands", n);
        if (!gs_type_is_int(i0->type))
            return fail(c, "start indices must be integers, not %s", sh(c, i0));
        if (!dim_eq(i0->dims[0], rank))
            return fail(c, "start-index vector %s does not hold %d indices", sh(c, i0), rank);
        return GS_OK;
    }
    if (n != rank)
        return fail(c, "takes %d start indices for a rank-%d operand, but %d were given", rank,
                    rank, n);
    for (int k = 0; k < n; k++) {
        const gs_shape *s = opnd(c, first + k);
        if (!is_scalar(s) || !gs_type_is_int(s->type))
            return fail(c, "start index %d must be an integer scalar, not %s", k, sh(c, s));
        if (s->type != i0->type)
            return fail(c, "start indices have different types: %s and %s", sh(c, i0), sh(c, s));
    }
    return GS_OK;
}

static gs_status infer_dynamic_slice(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    gs_ints z;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (check_start_indices(c, 1, s->rank) != GS_OK) return GS_ERR;
    if (need_ints(c, GS_ATTR_DYNAMIC_SLICE_SIZES, &z) != GS_OK) return GS_ERR;
    if (z.n != s->rank)
        return fail(c, "dynamic_slice_sizes has %d entries, but the operand %s has rank %d", z.n,
                    sh(c, s), s->rank);
    for (int i = 0; i < z.n; i++)
        if (z.v[i] < 0 || (s->dims[i] >= 0 && z.v[i] > s->dims[i]))
            return fail(c, "slice size %lld of dimension %d is out of range for %s",
                        (long long)z.v[i], i, sh(c, s));
    return emit(c, out, new_array(c, s->type, z.n, z.v, NULL));
}

static gs_status infer_dynamic_update_slice(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0), *u = opnd(c, 1);
    if (!arr(s) || !arr(u))
        return fail(c, "operand and update must be arrays, not %s and %s", sh(c, s), sh(c, u));
    if (check_start_indices(c, 2, s->rank) != GS_OK) return GS_ERR;
    if (u->rank != s->rank)
        return fail(c, "update %s and operand %s have different ranks", sh(c, u), sh(c, s));
    if (!fp_eq(u->type, s->type))
        return fail(c, "update %s and operand %s have different element types", sh(c, u), sh(c, s));
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] >= 0 && u->dims[i] > s->dims[i])
            return fail(c, "update %s is larger than the operand %s in dimension %d", sh(c, u),
                        sh(c, s), i);
    return emit(c, out, copy_as(c, s, s->type));
}

static gs_status infer_concatenate(ictx *c, gs_shape **out) {
    const gs_shape *s0 = opnd(c, 0);
    int64_t d;
    if (!arr(s0)) return fail(c, "operand 0 must be an array, not %s", sh(c, s0));
    if (need_one_dim(c, s0, "concatenate dimension", &d) != GS_OK) return GS_ERR;
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    gs_type t = s0->type;
    for (int i = 0; i < s0->rank; i++) {
        dims[i] = s0->dims[i];
        dyn[i] = dyn_at(s0, i);
    }
    for (int k = 1; k < c->in->n_operands; k++) {
        const gs_shape *s = opnd(c, k);
        if (!arr(s)) return fail(c, "operand %d must be an array, not %s", k, sh(c, s));
        if (s->rank != s0->rank)
            return fail(c, "operands %s and %s have different ranks", sh(c, s0), sh(c, s));
        if (!fp_eq(s->type, s0->type))
            return fail(c, "operands %s and %s have different element types", sh(c, s0), sh(c, s));
        for (int i = 0; i < s->rank; i++) {
            if (i != d && !dim_eq(s->dims[i], s0->dims[i]))
                return fail(c,
                            "operands %s and %s differ in dimension %d, which is not the "
                            "concatenate dimension %lld",
                            sh(c, s0), sh(c, s), i, (long long)d);
            dyn[i] = dyn[i] || dyn_at(s, i);
        }
        dims[d] = dims[d] < 0 || s->dims[d] < 0 ? -1 : dims[d] + s->dims[d];
        t = higher(t, s->type);
    }
    return emit(c, out, new_array(c, t, s0->rank, dims, dyn));
}

static gs_status infer_pad(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0), *v = opnd(c, 1);
    const gs_attr *at;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (!is_scalar(v)) return fail(c, "padding value must be a scalar, not %s", sh(c, v));
    if (!fp_eq(v->type, s->type))
        return fail(c, "padding value %s and operand %s have different element types", sh(c, v),
                    sh(c, s));
    if (need_attr(c, GS_ATTR_PADDING, &at) != GS_OK) return GS_ERR;
    const gs_padding *p = at->u.padding;
    if (p->n != s->rank)
        return fail(c, "padding has %d dimensions, but the operand %s has rank %d", p->n, sh(c, s),
                    s->rank);
    int64_t dims[GS_MAX_RANK];
    for (int i = 0; i < s->rank; i++) {
        gs_pad_dim pd = p->dims[i];
        if (pd.interior < 0)
            return fail(c, "interior padding %lld of dimension %d is negative",
                        (long long)pd.interior, i);
        int64_t n = s->dims[i];
        dims[i] = n < 0 ? -1 : n + pd.lo + pd.hi + (n > 0 ? n - 1 : 0) * pd.interior;
        if (n >= 0 && dims[i] < 0)
            return fail(c, "padding makes dimension %d of %s negative (%lld)", i, sh(c, s),
                        (long long)dims[i]);
    }
    return emit(c, out, new_array(c, higher(s->type, v->type), s->rank, dims, s->dynamic));
}

/* ------------------------------------------------------------------ dot and convolution */

/* XLA's dot dimension-number rules for one pair of operands. sparse: a sparse dot (metadata
 * operands follow), whose compressed operand has shorter contracting dims. */
static gs_status check_dot_dims(ictx *c, const gs_shape *l, const gs_shape *r, gs_ints lb,
                                gs_ints lc, gs_ints rb, gs_ints rc, bool sparse) {
    if (check_dims(c, lb, l->rank, l, "lhs batch dimension", false) != GS_OK ||
        check_dims(c, lc, l->rank, l, "lhs contracting dimension", false) != GS_OK ||
        check_dims(c, rb, r->rank, r, "rhs batch dimension", false) != GS_OK ||
        check_dims(c, rc, r->rank, r, "rhs contracting dimension", false) != GS_OK)
        return GS_ERR;
    for (int i = 0; i < lc.n; i++)
        if (in_list(lb, lc.v[i]))
            return fail(c, "lhs dimension %lld is both a batch and a contracting dimension",
                        (long long)lc.v[i]);
    for (int i = 0; i < rc.n; i++)
        if (in_list(rb, rc.v[i]))
            return fail(c, "rhs dimension %lld is both a batch and a contracting dimension",
                        (long long)rc.v[i]);
    if (lc.n != rc.n)
        return fail(c, "lhs has %d contracting dimensions, but rhs has %d", lc.n, rc.n);
    if (lb.n != rb.n) return fail(c, "lhs has %d batch dimensions, but rhs has %d", lb.n, rb.n);
    for (int i = 0; i < lc.n && !sparse; i++)
        if (!dim_eq(l->dims[lc.v[i]], r->dims[rc.v[i]]))
            return fail(c,
                        "contracting dimension sizes differ: lhs dimension %lld of %s and rhs "
                        "dimension %lld of %s",
                        (long long)lc.v[i], sh(c, l), (long long)rc.v[i], sh(c, r));
    for (int i = 0; i < lb.n; i++)
        if (!dim_eq(l->dims[lb.v[i]], r->dims[rb.v[i]]))
            return fail(c,
                        "batch dimension sizes differ: lhs dimension %lld of %s and rhs "
                        "dimension %lld of %s",
                        (long long)lb.v[i], sh(c, l), (long long)rb.v[i], sh(c, r));
    return GS_OK;
}

/* dot and ragged-dot: batch dims, then lhs free dims, then rhs free dims (element type of
 * lhs; verification compares dims only). */
static gs_status infer_dot(ictx *c, gs_shape **out) {
    const gs_shape *l = opnd(c, 0), *r = opnd(c, 1);
    if (!arr(l) || !arr(r))
        return fail(c, "lhs and rhs must be arrays, not %s and %s", sh(c, l), sh(c, r));
    gs_ints lb = gs_instr_ints(c->in, GS_ATTR_LHS_BATCH_DIMS);
    gs_ints lc = gs_instr_ints(c->in, GS_ATTR_LHS_CONTRACTING_DIMS);
    gs_ints rb = gs_instr_ints(c->in, GS_ATTR_RHS_BATCH_DIMS);
    gs_ints rc = gs_instr_ints(c->in, GS_ATTR_RHS_CONTRACTING_DIMS);
    gs_ints rg = {0, NULL};
    int64_t n_groups = -1; /* ragged-dot with a ragged contracting dim: leading group dim */
    if (c->in->op == GS_OP_RAGGED_DOT) {
        const gs_shape *g = opnd(c, 2);
        gs_ints lr;
        if (!arr(g) || !gs_type_is_int(g->type) || g->rank < 1)
            return fail(c, "group sizes must be an integer array, not %s", sh(c, g));
        if (need_ints(c, GS_ATTR_LHS_RAGGED_DIMS, &lr) != GS_OK) return GS_ERR;
        if (lr.n != 1)
            return fail(c, "lhs_ragged_dims must name one dimension, not %s", ints_text(c, lr));
        if (check_dims(c, lr, l->rank, l, "lhs ragged dimension", false) != GS_OK) return GS_ERR;
        rg = gs_instr_ints(c->in, GS_ATTR_RHS_GROUP_DIMS);
        if (check_dims(c, rg, r->rank, r, "rhs group dimension", false) != GS_OK) return GS_ERR;
        if (in_list(lc, lr.v[0]))
            n_groups = g->dims[g->rank - 1];
        else if (!in_list(lb, lr.v[0]) && rg.n != 1)
            return fail(c, "a ragged non-contracting lhs dimension needs one rhs group dimension");
        if (n_groups >= 0 || in_list(lb, lr.v[0])) rg.n = 0;
    }
    bool sparse = c->in->op == GS_OP_DOT && c->in->n_operands > 2;
    if (check_dot_dims(c, l, r, lb, lc, rb, rc, sparse) != GS_OK) return GS_ERR;
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    int n = 0;
    int total = (n_groups >= 0) + l->rank - lc.n + r->rank - rc.n - rb.n - rg.n;
    if (total > GS_MAX_RANK)
        return fail(c, "result would have more than %d dimensions", GS_MAX_RANK);
    if (n_groups >= 0) {
        dyn[n] = false;
        dims[n++] = n_groups;
    }
    for (int i = 0; i < lb.n; i++) {
        dyn[n] = dyn_at(l, (int)lb.v[i]);
        dims[n++] = l->dims[lb.v[i]];
    }
    for (int i = 0; i < l->rank; i++)
        if (!in_list(lb, i) && !in_list(lc, i)) {
            dyn[n] = dyn_at(l, i);
            dims[n++] = l->dims[i];
        }
    for (int i = 0; i < r->rank; i++)
        if (!in_list(rb, i) && !in_list(rc, i) && !in_list(rg, i)) {
            dyn[n] = dyn_at(r, i);
            dims[n++] = r->dims[i];
        }
    return emit(c, out, new_array(c, l->type, n, dims, dyn));
}

/* Output sizes of a window over base dims (XLA's InferWindowOutputShape). */
static gs_status window_out(ictx *c, const gs_window *w, const int64_t *base, int64_t *res) {
    for (int i = 0; i < w->n; i++) {
        const gs_window_dim *d = &w->dims[i];
        if (d->size <= 0)
            return fail(c, "window dimension %d has non-positive size %lld", i, (long long)d->size);
        if (d->stride <= 0 || d->lhs_dilate < 1 || d->rhs_dilate < 1)
            return fail(c, "window dimension %d has a non-positive stride or dilation", i);
        if (base[i] < 0) {
            res[i] = -1;
            continue;
        }
        int64_t dil_base = base[i] == 0 ? 0 : (base[i] - 1) * d->lhs_dilate + 1;
        int64_t padded = d->pad_lo + dil_base + d->pad_hi;
        if (padded < 0)
            return fail(c, "window dimension %d pads a base of %lld to a negative size (%lld)", i,
                        (long long)base[i], (long long)padded);
        int64_t dil_win = (d->size - 1) * d->rhs_dilate + 1;
        res[i] = dil_win > padded ? 0 : (padded - dil_win) / d->stride + 1;
    }
    return GS_OK;
}

static gs_status infer_convolution(ictx *c, gs_shape **out) {
    const gs_shape *l = opnd(c, 0), *r = opnd(c, 1);
    const gs_attr *at;
    if (!arr(l) || !arr(r))
        return fail(c, "lhs and rhs must be arrays, not %s and %s", sh(c, l), sh(c, r));
    int64_t fgc = gs_instr_int(c->in, GS_ATTR_FEATURE_GROUP_COUNT, 1);
    int64_t bgc = gs_instr_int(c->in, GS_ATTR_BATCH_GROUP_COUNT, 1);
    if (fgc <= 0) return fail(c, "feature_group_count must be positive, not %lld", (long long)fgc);
    if (bgc <= 0) return fail(c, "batch_group_count must be positive, not %lld", (long long)bgc);
    if (fgc > 1 && bgc > 1)
        return fail(c, "feature_group_count %lld and batch_group_count %lld cannot both exceed 1",
                    (long long)fgc, (long long)bgc);
    if (need_attr(c, GS_ATTR_DIM_LABELS, &at) != GS_OK) return GS_ERR;
    const gs_conv_dims *cd = at->u.conv;
    int ns = cd->n_spatial;
    const gs_attr *wa = attr(c, GS_ATTR_WINDOW);
    gs_window none = {0, NULL};
    const gs_window *w = wa ? wa->u.window : &none;
    if (w->n != ns)
        return fail(c, "window has %d dimensions, but dim_labels has %d spatial dimensions", w->n,
                    ns);
    if (l->rank != cd->in_rank)
        return fail(c, "lhs %s has rank %d, but dim_labels describes rank %d", sh(c, l), l->rank,
                    cd->in_rank);
    if (r->rank != cd->k_rank)
        return fail(c, "rhs %s has rank %d, but dim_labels describes rank %d", sh(c, r), r->rank,
                    cd->k_rank);
    if (cd->out_rank != ns + 2)
        return fail(c, "dim_labels output has rank %d, expected %d", cd->out_rank, ns + 2);
    int64_t in_f = l->dims[cd->in_feature], in_b = l->dims[cd->in_batch];
    int64_t k_in = r->dims[cd->k_in_feature], k_out = r->dims[cd->k_out_feature];
    if (k_out >= 0 && k_out % bgc != 0)
        return fail(c,
                    "kernel output features (%lld) must be a multiple of batch_group_count "
                    "%lld",
                    (long long)k_out, (long long)bgc);
    bool sparse = c->in->n_operands > 2; /* sparsity metadata: the kernel is compressed */
    if (in_f >= 0 && k_in >= 0 && !sparse && (in_f % fgc != 0 || in_f / fgc != k_in))
        return fail(c,
                    "lhs features (%lld) must equal kernel input features (%lld) times "
                    "feature_group_count (%lld)",
                    (long long)in_f, (long long)k_in, (long long)fgc);
    if (k_out >= 0 && k_out % fgc != 0)
        return fail(c,
                    "kernel output features (%lld) must be a multiple of feature_group_count "
                    "%lld",
                    (long long)k_out, (long long)fgc);
    if (in_b >= 0 && in_b % bgc != 0)
        return fail(c, "lhs batch (%lld) must be a multiple of batch_group_count %lld",
                    (long long)in_b, (long long)bgc);
    int64_t base[GS_MAX_RANK], sp[GS_MAX_RANK], dims[GS_MAX_RANK];
    for (int i = 0; i < ns; i++) {
        int64_t k = r->dims[cd->k_spatial[i]];
        if (!dim_eq(w->dims[i].size, k))
            return fail(c,
                        "window size %lld of spatial dimension %d does not match the kernel "
                        "%s",
                        (long long)w->dims[i].size, i, sh(c, r));
        base[i] = l->dims[cd->in_spatial[i]];
    }
    if (window_out(c, w, base, sp) != GS_OK) return GS_ERR;
    dims[cd->out_batch] = in_b < 0 ? -1 : in_b / bgc;
    dims[cd->out_feature] = k_out;
    for (int i = 0; i < ns; i++) dims[cd->out_spatial[i]] = sp[i];
    return emit(c, out, new_array(c, l->type, ns + 2, dims, NULL));
}

/* ------------------------------------------------------------------ reductions and windows */

/* The first half of the operands (inputs) are arrays of the same dims, the second half
 * (init values) scalars. Fills the element types. */
static gs_status check_inputs_inits(ictx *c, int n, gs_type *in_t, gs_type *init_t) {
    if (c->in->n_operands % 2 != 0)
        return fail(c, "takes inputs then as many init values, but has %d operands",
                    c->in->n_operands);
    const gs_shape *s0 = opnd(c, 0);
    for (int i = 0; i < n; i++) {
        const gs_shape *s = opnd(c, i), *v = opnd(c, n + i);
        if (!arr(s)) return fail(c, "input %d must be an array, not %s", i, sh(c, s));
        if (!gs_shape_dims_compatible(s, s0))
            return fail(c, "inputs %s and %s have different dimensions", sh(c, s0), sh(c, s));
        if (!is_scalar(v)) return fail(c, "init value %d must be a scalar, not %s", i, sh(c, v));
        in_t[i] = s->type;
        init_t[i] = v->type;
    }
    return GS_OK;
}

static gs_status infer_reduce(ictx *c, gs_shape **out) {
    int n = c->in->n_operands / 2;
    gs_type *in_t = GS_NEW_ARRAY(c->scratch, gs_type, 3 * n);
    if (!in_t) return oom(c);
    gs_type *init_t = in_t + n, *res_t = in_t + 2 * n;
    gs_ints v;
    if (check_inputs_inits(c, n, in_t, init_t) != GS_OK) return GS_ERR;
    const gs_shape *s0 = opnd(c, 0);
    if (need_ints(c, GS_ATTR_DIMENSIONS, &v) != GS_OK) return GS_ERR;
    if (check_dims(c, v, s0->rank, s0, "reduce dimension", false) != GS_OK) return GS_ERR;
    const gs_computation *f;
    if (need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (check_reducer(c, f, "to_apply", n, init_t, in_t, res_t) != GS_OK) return GS_ERR;
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    int k = 0;
    for (int i = 0; i < s0->rank; i++)
        if (!in_list(v, i)) {
            dyn[k] = dyn_at(s0, i);
            dims[k++] = s0->dims[i];
        }
    if (root_shape(f)->type != GS_TUPLE) return emit(c, out, new_array(c, res_t[0], k, dims, dyn));
    gs_shape **elems = GS_NEW_ARRAY(c->scratch, gs_shape *, n);
    if (!elems) return oom(c);
    for (int i = 0; i < n; i++)
        if (!(elems[i] = new_array(c, res_t[i], k, dims, dyn))) return oom(c);
    return emit(c, out, new_tuple(c, n, (const gs_shape *const *)elems));
}

static gs_status need_window(ictx *c, int rank, const gs_window **w) {
    const gs_attr *at;
    if (need_attr(c, GS_ATTR_WINDOW, &at) != GS_OK) return GS_ERR;
    *w = at->u.window;
    if ((*w)->n != rank)
        return fail(c, "window has %d dimensions, but the operand %s has rank %d", (*w)->n,
                    sh(c, opnd(c, 0)), rank);
    return GS_OK;
}

static gs_status infer_reduce_window(ictx *c, gs_shape **out) {
    int n = c->in->n_operands / 2;
    gs_type *in_t = GS_NEW_ARRAY(c->scratch, gs_type, 3 * n);
    if (!in_t) return oom(c);
    gs_type *init_t = in_t + n, *res_t = in_t + 2 * n;
    if (check_inputs_inits(c, n, in_t, init_t) != GS_OK) return GS_ERR;
    const gs_shape *s0 = opnd(c, 0);
    const gs_window *w;
    int64_t dims[GS_MAX_RANK];
    if (need_window(c, s0->rank, &w) != GS_OK) return GS_ERR;
    if (window_out(c, w, s0->dims, dims) != GS_OK) return GS_ERR;
    const gs_computation *f;
    if (need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (check_reducer(c, f, "to_apply", n, init_t, in_t, res_t) != GS_OK) return GS_ERR;
    if (root_shape(f)->type != GS_TUPLE)
        return emit(c, out, new_array(c, init_t[0], s0->rank, dims, s0->dynamic));
    gs_shape **elems = GS_NEW_ARRAY(c->scratch, gs_shape *, n);
    if (!elems) return oom(c);
    for (int i = 0; i < n; i++)
        if (!(elems[i] = new_array(c, init_t[i], s0->rank, dims, s0->dynamic))) return oom(c);
    return emit(c, out, new_tuple(c, n, (const gs_shape *const *)elems));
}

static gs_status infer_select_and_scatter(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0), *src = opnd(c, 1), *init = opnd(c, 2);
    if (!arr(s) || !arr(src))
        return fail(c, "operand and source must be arrays, not %s and %s", sh(c, s), sh(c, src));
    if (!is_scalar(init)) return fail(c, "init value must be a scalar, not %s", sh(c, init));
    const gs_window *w;
    int64_t dims[GS_MAX_RANK];
    if (need_window(c, s->rank, &w) != GS_OK) return GS_ERR;
    if (window_out(c, w, s->dims, dims) != GS_OK) return GS_ERR;
    bool fits = src->rank == s->rank;
    for (int i = 0; fits && i < s->rank; i++) fits = dim_eq(src->dims[i], dims[i]);
    if (!fits) {
        const gs_shape *win = gs_shape_array(c->scratch, src->type, s->rank, dims);
        return fail(c, "source %s does not match the windowed operand %s", sh(c, src),
                    win ? sh(c, win) : "?");
    }
    const gs_computation *sel, *sc;
    if (need_comp(c, GS_ATTR_SELECT, &sel) != GS_OK) return GS_ERR;
    if (need_comp(c, GS_ATTR_SCATTER, &sc) != GS_OK) return GS_ERR;
    if (sel) {
        if (sel->n_params != 2)
            return fail(c, "select computation %s must take 2 parameters, but takes %d", sel->name,
                        sel->n_params);
        for (int i = 0; i < 2; i++) {
            const gs_shape *p = param_shape(sel, i);
            if (!is_scalar(p) || !fp_eq(p->type, s->type))
                return fail(c,
                            "parameter %d of select computation %s is %s, expected a %s "
                            "scalar",
                            i, sel->name, sh(c, p), tn(s->type));
        }
        const gs_shape *rs = root_shape(sel);
        if (!is_scalar(rs) || rs->type != GS_PRED)
            return fail(c, "select computation %s must return pred[], not %s", sel->name,
                        sh(c, rs));
    }
    if (sc) {
        gs_type res;
        if (check_reducer(c, sc, "scatter", 1, &init->type, &src->type, &res) != GS_OK)
            return GS_ERR;
    }
    if (!sel || !sc) return GS_OK;
    return emit(c, out, copy_as(c, s, s->type));
}

/* ------------------------------------------------------------------ gather and scatter */

/* Start indices (or scatter indices) dims with the implicit trailing 1 when index_vector_dim
 * equals their rank. */
static gs_status expand_indices(ictx *c, const gs_shape *ix, int64_t ivd, int64_t *exp, int *n) {
    if (!arr(ix) || !gs_type_is_int(ix->type))
        return fail(c, "indices must be an integer array, not %s", sh(c, ix));
    if (ivd < 0 || ivd > ix->rank)
        return fail(c, "index_vector_dim %lld is out of range for indices %s", (long long)ivd,
                    sh(c, ix));
    *n = ix->rank;
    copy_dims(exp, ix);
    if (ivd == ix->rank) exp[(*n)++] = 1;
    return GS_OK;
}

/* Batching dims: operand dims obd[i] pair with index dims ibd[i]; neither side repeats, the
 * index side avoids index_vector_dim, and paired sizes agree. */
static gs_status check_batching(ictx *c, const gs_shape *op, gs_ints obd, const char *oname,
                                const int64_t *exp, int n_exp, int64_t ivd, gs_ints ibd,
                                const char *iname) {
    if (check_dims(c, ibd, n_exp, NULL, iname, false) != GS_OK) return GS_ERR;
    if (obd.n != ibd.n)
        return fail(c, "%ss %s and %ss %s have different lengths", oname, ints_text(c, obd), iname,
                    ints_text(c, ibd));
    for (int i = 0; i < ibd.n; i++) {
        if (ibd.v[i] == ivd)
            return fail(c, "%s %lld is the index_vector_dim", iname, (long long)ibd.v[i]);
        if (!dim_eq(op->dims[obd.v[i]], exp[ibd.v[i]]))
            return fail(c,
                        "batching dimension sizes differ: %s %lld of %s has %lld, %s %lld "
                        "has %lld",
                        oname, (long long)obd.v[i], sh(c, op), (long long)op->dims[obd.v[i]], iname,
                        (long long)ibd.v[i], (long long)exp[ibd.v[i]]);
    }
    return GS_OK;
}

static gs_status disjoint(ictx *c, gs_ints a, gs_ints b, const char *an, const char *bn) {
    for (int i = 0; i < a.n; i++)
        if (in_list(b, a.v[i]))
            return fail(c, "dimension %lld is both a %s and a %s", (long long)a.v[i], an, bn);
    return GS_OK;
}

static gs_status infer_gather(ictx *c, gs_shape **out) {
    const gs_shape *op = opnd(c, 0), *ix = opnd(c, 1);
    if (!arr(op)) return fail(c, "operand must be an array, not %s", sh(c, op));
    gs_ints offset = gs_instr_ints(c->in, GS_ATTR_OFFSET_DIMS);
    gs_ints collapsed = gs_instr_ints(c->in, GS_ATTR_COLLAPSED_SLICE_DIMS);
    gs_ints sim = gs_instr_ints(c->in, GS_ATTR_START_INDEX_MAP);
    gs_ints obd = gs_instr_ints(c->in, GS_ATTR_OPERAND_BATCHING_DIMS);
    gs_ints ibd = gs_instr_ints(c->in, GS_ATTR_START_INDICES_BATCHING_DIMS);
    gs_ints sizes;
    int64_t ivd, exp[GS_MAX_RANK + 1];
    int n_exp;
    if (need_int(c, GS_ATTR_INDEX_VECTOR_DIM, &ivd) != GS_OK) return GS_ERR;
    if (expand_indices(c, ix, ivd, exp, &n_exp) != GS_OK) return GS_ERR;
    if (need_ints(c, GS_ATTR_SLICE_SIZES, &sizes) != GS_OK) return GS_ERR;
    int out_rank = offset.n + n_exp - 1;
    if (out_rank > GS_MAX_RANK)
        return fail(c, "result would have more than %d dimensions", GS_MAX_RANK);
    if (check_dims(c, offset, out_rank, NULL, "offset dimension", true) != GS_OK) return GS_ERR;
    if (!dim_eq(sim.n, exp[ivd]))
        return fail(c,
                    "start_index_map has %d entries, but the index vector (dimension %lld of "
                    "%s) has %lld",
                    sim.n, (long long)ivd, sh(c, ix), (long long)exp[ivd]);
    if (check_dims(c, sim, op->rank, op, "start_index_map entry", false) != GS_OK ||
        check_dims(c, collapsed, op->rank, op, "collapsed slice dimension", true) != GS_OK ||
        check_dims(c, obd, op->rank, op, "operand batching dimension", true) != GS_OK ||
        disjoint(c, collapsed, obd, "collapsed slice dimension", "operand batching dimension") ||
        disjoint(c, sim, obd, "start_index_map entry", "operand batching dimension") ||
        check_batching(c, op, obd, "operand batching dimension", exp, n_exp, ivd, ibd,
                       "start indices batching dimension") != GS_OK)
        return GS_ERR;
    if (sizes.n != op->rank)
        return fail(c, "slice_sizes has %d entries, but the operand %s has rank %d", sizes.n,
                    sh(c, op), op->rank);
    if (offset.n + collapsed.n + obd.n != op->rank)
        return fail(c,
                    "offset_dims (%d), collapsed_slice_dims (%d) and operand_batching_dims "
                    "(%d) must together cover the %d operand dimensions",
                    offset.n, collapsed.n, obd.n, op->rank);
    for (int i = 0; i < sizes.n; i++) {
        if (sizes.v[i] < 0 || (op->dims[i] >= 0 && sizes.v[i] > op->dims[i]))
            return fail(c, "slice size %lld of dimension %d is out of range for %s",
                        (long long)sizes.v[i], i, sh(c, op));
        if ((in_list(collapsed, i) || in_list(obd, i)) && sizes.v[i] > 1)
            return fail(c,
                        "slice size of collapsed or batching dimension %d must be 0 or 1, "
                        "not %lld",
                        i, (long long)sizes.v[i]);
    }
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    int oi = 0, bi = 0;
    for (int i = 0; i < out_rank; i++) {
        if (in_list(offset, i)) {
            while (in_list(collapsed, oi) || in_list(obd, oi)) oi++;
            dyn[i] = sizes.v[oi] == op->dims[oi] && dyn_at(op, oi);
            dims[i] = sizes.v[oi++];
        } else {
            if (bi == ivd) bi++;
            dyn[i] = bi < ix->rank && dyn_at(ix, bi);
            dims[i] = exp[bi++];
        }
    }
    return emit(c, out, new_array(c, op->type, out_rank, dims, dyn));
}

static gs_status infer_scatter(ictx *c, gs_shape **out) {
    int n_ops = c->in->n_operands;
    if (n_ops % 2 == 0)
        return fail(c, "takes operands, indices and as many updates (an odd count), not %d", n_ops);
    int n = n_ops / 2;
    const gs_shape *ix = opnd(c, n);
    gs_ints uwd = gs_instr_ints(c->in, GS_ATTR_UPDATE_WINDOW_DIMS);
    gs_ints iwd = gs_instr_ints(c->in, GS_ATTR_INSERTED_WINDOW_DIMS);
    gs_ints sdod = gs_instr_ints(c->in, GS_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS);
    gs_ints ibd = gs_instr_ints(c->in, GS_ATTR_INPUT_BATCHING_DIMS);
    gs_ints sibd = gs_instr_ints(c->in, GS_ATTR_SCATTER_INDICES_BATCHING_DIMS);
    int64_t ivd, exp[GS_MAX_RANK + 1];
    int n_exp;
    if (need_int(c, GS_ATTR_INDEX_VECTOR_DIM, &ivd) != GS_OK) return GS_ERR;
    if (expand_indices(c, ix, ivd, exp, &n_exp) != GS_OK) return GS_ERR;
    gs_type *types = GS_NEW_ARRAY(c->scratch, gs_type, 3 * n);
    if (!types) return oom(c);
    for (int k = 0; k < n; k++) {
        const gs_shape *op = opnd(c, k), *up = opnd(c, n + 1 + k);
        if (!arr(op) || !arr(up))
            return fail(c, "operand %d and its updates must be arrays, not %s and %s", k, sh(c, op),
                        sh(c, up));
        if (!gs_shape_dims_compatible(op, opnd(c, 0)))
            return fail(c, "operands %s and %s have different dimensions", sh(c, opnd(c, 0)),
                        sh(c, op));
        types[k] = op->type;
        types[n + k] = up->type;
        int64_t want_rank = n_exp - 1 + uwd.n;
        if (up->rank != want_rank)
            return fail(c, "updates %s must have rank %lld", sh(c, up), (long long)want_rank);
        if (check_dims(c, uwd, up->rank, up, "update window dimension", true) != GS_OK ||
            check_dims(c, iwd, op->rank, op, "inserted window dimension", true) != GS_OK ||
            check_dims(c, ibd, op->rank, op, "input batching dimension", true) != GS_OK ||
            disjoint(c, iwd, ibd, "inserted window dimension", "input batching dimension"))
            return GS_ERR;
        if (uwd.n + iwd.n + ibd.n != op->rank)
            return fail(c,
                        "update_window_dims (%d), inserted_window_dims (%d) and "
                        "input_batching_dims (%d) must together cover the %d operand dimensions",
                        uwd.n, iwd.n, ibd.n, op->rank);
        if (!dim_eq(sdod.n, exp[ivd]))
            return fail(c,
                        "scatter_dims_to_operand_dims has %d entries, but the index vector "
                        "(dimension %lld of %s) has %lld",
                        sdod.n, (long long)ivd, sh(c, ix), (long long)exp[ivd]);
        if (check_dims(c, sdod, op->rank, op, "scatter_dims_to_operand_dims entry", false) ||
            disjoint(c, sdod, ibd, "scatter_dims_to_operand_dims entry",
                     "input batching dimension") ||
            check_batching(c, op, ibd, "input batching dimension", exp, n_exp, ivd, sibd,
                           "scatter indices batching dimension") != GS_OK)
            return GS_ERR;
        int w = 0;
        for (int i = 0; i < op->rank; i++) {
            if (in_list(iwd, i) || in_list(ibd, i)) continue;
            int64_t ud = up->dims[uwd.v[w++]];
            if (op->dims[i] >= 0 && ud > op->dims[i])
                return fail(c,
                            "update window dimension %lld of %s exceeds operand dimension %d "
                            "of %s",
                            (long long)uwd.v[w - 1], sh(c, up), i, sh(c, op));
        }
        int bi = 0;
        for (int i = 0; i < up->rank; i++) {
            if (in_list(uwd, i)) continue;
            if (bi == ivd) bi++;
            if (!dim_eq(up->dims[i], exp[bi]))
                return fail(c,
                            "update scatter dimension %d of %s differs from dimension %d of "
                            "the indices %s",
                            i, sh(c, up), bi, sh(c, ix));
            bi++;
        }
    }
    const gs_computation *f;
    if (need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (check_reducer(c, f, "to_apply", n, types, types + n, types + 2 * n) != GS_OK) return GS_ERR;
    if (n == 1) return emit(c, out, copy_as(c, opnd(c, 0), opnd(c, 0)->type));
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n);
    if (!elems) return oom(c);
    for (int k = 0; k < n; k++) elems[k] = opnd(c, k);
    return emit(c, out, new_tuple(c, n, elems));
}

/* ------------------------------------------------------------------ sort, top-k, fft, scan */

/* The operands as the result: the one operand's shape, or a tuple of all of them. */
static gs_status operands_as_result(ictx *c, gs_shape **out) {
    int n = c->in->n_operands;
    if (n == 1) return emit(c, out, opnd(c, 0));
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n ? n : 1);
    if (!elems) return oom(c);
    for (int k = 0; k < n; k++) elems[k] = opnd(c, k);
    return emit(c, out, new_tuple(c, n, elems));
}

static gs_status infer_sort(ictx *c, gs_shape **out) {
    int n = c->in->n_operands;
    const gs_shape *s0 = opnd(c, 0);
    int64_t d;
    for (int k = 0; k < n; k++) {
        const gs_shape *s = opnd(c, k);
        if (!arr(s)) return fail(c, "operand %d must be an array, not %s", k, sh(c, s));
        if (!gs_shape_dims_compatible(s, s0))
            return fail(c, "operands %s and %s have different dimensions", sh(c, s0), sh(c, s));
    }
    if (need_one_dim(c, s0, "sort dimension", &d) != GS_OK) return GS_ERR;
    const gs_computation *f;
    if (need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (f->n_params != 2 * n)
        return fail(c, "comparator %s must take %d parameters, but takes %d", f->name, 2 * n,
                    f->n_params);
    for (int i = 0; i < 2 * n; i++) {
        const gs_shape *p = param_shape(f, i);
        if (!is_scalar(p) || !fp_eq(p->type, opnd(c, i / 2)->type))
            return fail(c, "parameter %d of comparator %s is %s, expected a %s scalar", i, f->name,
                        sh(c, p), tn(opnd(c, i / 2)->type));
    }
    const gs_shape *rs = root_shape(f);
    if (!is_scalar(rs) || rs->type != GS_PRED)
        return fail(c, "comparator %s must return pred[], not %s", f->name, sh(c, rs));
    return operands_as_result(c, out);
}

static gs_status infer_topk(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    int64_t k;
    if (!arr(s) || s->rank < 1)
        return fail(c, "operand must be an array of rank >= 1, not %s", sh(c, s));
    if (need_int(c, GS_ATTR_K, &k) != GS_OK) return GS_ERR;
    int64_t last = s->dims[s->rank - 1];
    if (k < 0 || (last >= 0 && k > last))
        return fail(c, "k=%lld is out of range for the last dimension of %s", (long long)k,
                    sh(c, s));
    int64_t dims[GS_MAX_RANK];
    copy_dims(dims, s);
    dims[s->rank - 1] = k;
    const gs_shape *e[2] = {new_array(c, s->type, s->rank, dims, NULL),
                            new_array(c, GS_S32, s->rank, dims, NULL)};
    if (!e[0] || !e[1]) return oom(c);
    return emit(c, out, new_tuple(c, 2, e));
}

static gs_status infer_fft(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    const char *ty = gs_instr_str(c->in, GS_ATTR_FFT_TYPE);
    gs_ints len;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (!ty) return fail(c, "missing attribute fft_type");
    if (need_ints(c, GS_ATTR_FFT_LENGTH, &len) != GS_OK) return GS_ERR;
    int n = len.n, r = s->rank;
    if (n < 1 || n > 3) return fail(c, "fft_length must have 1 to 3 entries, not %d", n);
    for (int i = 0; i < n; i++)
        if (len.v[i] < 0) return fail(c, "fft_length %s has a negative entry", ints_text(c, len));
    if (r < n)
        return fail(c, "an FFT of rank %d needs an operand of rank >= %d, not %s", n, n, sh(c, s));
    int64_t dims[GS_MAX_RANK];
    copy_dims(dims, s);
    if (strcmp(ty, "FFT") == 0 || strcmp(ty, "IFFT") == 0) {
        if (!gs_type_is_complex(s->type))
            return fail(c, "%s needs a complex operand, not %s", ty, sh(c, s));
        /* An empty extent on either side (XLA's evaluator gives zeros, or nothing) is the one
         * mismatch allowed. */
        for (int i = 0; i < n; i++)
            if (!dim_eq(s->dims[r - n + i], len.v[i]) && s->dims[r - n + i] != 0 && len.v[i] != 0)
                return fail(c, "%s needs the innermost dimensions of %s to equal fft_length %s", ty,
                            sh(c, s), ints_text(c, len));
        return emit(c, out, copy_as(c, s, s->type));
    }
    if (strcmp(ty, "RFFT") == 0) {
        if (s->type != GS_F32 && s->type != GS_F64)
            return fail(c, "RFFT needs an f32 or f64 operand, not %s", sh(c, s));
        for (int i = 0; i < n; i++)
            if (!dim_eq(s->dims[r - n + i], len.v[i]))
                return fail(c, "RFFT needs the innermost dimensions of %s to equal fft_length %s",
                            sh(c, s), ints_text(c, len));
        if (len.v[n - 1] != 0) dims[r - 1] = len.v[n - 1] / 2 + 1;
        return emit(c, out, new_array(c, s->type == GS_F32 ? GS_C64 : GS_C128, r, dims, NULL));
    }
    if (strcmp(ty, "IRFFT") == 0) {
        if (!gs_type_is_complex(s->type))
            return fail(c, "IRFFT needs a complex operand, not %s", sh(c, s));
        for (int i = 0; i < n - 1; i++)
            if (!dim_eq(s->dims[r - n + i], len.v[i]))
                return fail(c,
                            "IRFFT needs the innermost dimensions of %s but the last to equal "
                            "fft_length %s",
                            sh(c, s), ints_text(c, len));
        int64_t last = s->dims[r - 1], want = len.v[n - 1] / 2 + 1;
        if ((last != 0 || len.v[n - 1] != 0) && !dim_eq(last, want))
            return fail(c, "IRFFT needs the last dimension of %s to be fft_length/2+1 = %lld",
                        sh(c, s), (long long)want);
        dims[r - 1] = len.v[n - 1];
        return emit(c, out, new_array(c, component_type(s->type), r, dims, NULL));
    }
    return fail(c, "fft_type %s is not one of FFT, IFFT, RFFT, IRFFT", ty);
}

/* scan: inputs then num_carries carries; to_apply maps (input slices..., carries...) to
 * (outputs..., carries...); outputs are stacked along the scan dimension. */
static gs_status infer_scan(ictx *c, gs_shape **out) {
    int n = c->in->n_operands;
    int64_t nc = gs_instr_int(c->in, GS_ATTR_NUM_CARRIES, 0), d;
    if (nc < 0 || nc > n)
        return fail(c, "num_carries %lld is out of range for %d operands", (long long)nc, n);
    int n_in = n - (int)nc;
    if (n_in == 0) return GS_OK;
    const gs_shape *s0 = opnd(c, 0);
    if (!arr(s0)) return fail(c, "input 0 must be an array, not %s", sh(c, s0));
    if (need_one_dim(c, s0, "scan dimension", &d) != GS_OK) return GS_ERR;
    int64_t len = s0->dims[d];
    for (int i = 0; i < n_in; i++) {
        const gs_shape *s = opnd(c, i);
        if (!arr(s) || s->rank <= d || !dim_eq(s->dims[d], len))
            return fail(c,
                        "input %d %s does not have the length %lld of input 0 along scan "
                        "dimension %lld",
                        i, sh(c, s), (long long)len, (long long)d);
    }
    const gs_computation *f;
    if (need_comp(c, GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    if (f->n_params != n)
        return fail(c, "to_apply computation %s must take %d parameters, but takes %d", f->name, n,
                    f->n_params);
    for (int i = 0; i < n; i++) {
        const gs_shape *s = opnd(c, i), *p = param_shape(f, i);
        bool ok;
        if (i < n_in) {
            int64_t dims[GS_MAX_RANK];
            int k = 0;
            for (int j = 0; j < s->rank; j++)
                if (j != d) dims[k++] = s->dims[j];
            ok = arr(p) && fp_eq(p->type, s->type) && p->rank == k;
            for (int j = 0; ok && j < k; j++) ok = dim_eq(p->dims[j], dims[j]);
        } else {
            ok = gs_shape_compatible(p, s, true);
        }
        if (!ok)
            return fail(c,
                        "parameter %d of to_apply computation %s is %s, which does not fit "
                        "operand %d %s",
                        i, f->name, sh(c, p), i, sh(c, s));
    }
    const gs_shape *rs = root_shape(f);
    int n_res = rs->type == GS_TUPLE ? rs->n_tuple : 1;
    const gs_shape *const *res = rs->type == GS_TUPLE ? (const gs_shape *const *)rs->tuple : &rs;
    int n_out = n_res - (int)nc;
    if (n_out < 0)
        return fail(c, "to_apply computation %s returns %d values, fewer than the %lld carries",
                    f->name, n_res, (long long)nc);
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n_res);
    if (!elems) return oom(c);
    for (int i = 0; i < n_res; i++) {
        const gs_shape *e = res[i];
        if (i >= n_out) {
            const gs_shape *carry = opnd(c, n_in + i - n_out);
            if (!gs_shape_compatible(e, carry, true))
                return fail(c, "to_apply computation %s returns carry %s for carry operand %s",
                            f->name, sh(c, e), sh(c, carry));
            elems[i] = carry;
            continue;
        }
        if (!arr(e) || e->rank + 1 > GS_MAX_RANK)
            return fail(c, "to_apply computation %s returns output %s, not an array", f->name,
                        sh(c, e));
        int64_t dims[GS_MAX_RANK];
        int at = d <= e->rank ? (int)d : e->rank, k = 0;
        for (int j = 0; j <= e->rank; j++) dims[j] = j == at ? len : e->dims[k++];
        if (!(elems[i] = new_array(c, e->type, e->rank + 1, dims, NULL))) return oom(c);
    }
    if (n_res == 1) return emit(c, out, elems[0]);
    return emit(c, out, new_tuple(c, n_res, elems));
}

/* ------------------------------------------------------------------ linear algebra, batch norm */

static gs_status infer_cholesky(ictx *c, gs_shape **out) {
    const gs_shape *a = opnd(c, 0);
    if (!arr(a) || (!gs_type_is_float(a->type) && !gs_type_is_complex(a->type)))
        return fail(c, "operand must be a floating-point or complex array, not %s", sh(c, a));
    if (a->rank < 2 || !dim_eq(a->dims[a->rank - 1], a->dims[a->rank - 2]))
        return fail(c, "operand %s must have rank >= 2 and square minor dimensions", sh(c, a));
    return emit(c, out, copy_as(c, a, a->type));
}

static gs_status infer_triangular_solve(ictx *c, gs_shape **out) {
    const gs_shape *a = opnd(c, 0), *b = opnd(c, 1);
    if (!arr(a) || !arr(b) || a->type != b->type ||
        (!gs_type_is_float(a->type) && !gs_type_is_complex(a->type)))
        return fail(c,
                    "a and b must be floating-point or complex arrays of one type, not %s and "
                    "%s",
                    sh(c, a), sh(c, b));
    int r = a->rank;
    if (r < 2 || b->rank != r || !dim_eq(a->dims[r - 1], a->dims[r - 2]))
        return fail(c, "a %s must be square with rank >= 2, and b %s of the same rank", sh(c, a),
                    sh(c, b));
    bool left = gs_instr_bool(c->in, GS_ATTR_LEFT_SIDE, false);
    if (!dim_eq(a->dims[r - 1], b->dims[r - (left ? 2 : 1)]))
        return fail(c, "the shared dimension of a %s and b %s differs", sh(c, a), sh(c, b));
    for (int i = 0; i < r - 2; i++)
        if (!dim_eq(a->dims[i], b->dims[i]))
            return fail(c, "the batch dimensions of a %s and b %s differ", sh(c, a), sh(c, b));
    return emit(c, out, copy_as(c, b, b->type));
}

/* batch-norm-training (operand, scale, offset), -inference (operand, scale, offset, mean,
 * variance), -grad (operand, scale, mean, variance, grad_output). */
static gs_status infer_batch_norm(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    int64_t fi;
    if (!arr(s) || !gs_type_is_float(s->type) || s->rank < 1)
        return fail(c, "operand must be a floating-point array of rank >= 1, not %s", sh(c, s));
    if (need_int(c, GS_ATTR_FEATURE_INDEX, &fi) != GS_OK) return GS_ERR;
    if (fi < 0 || fi >= s->rank)
        return fail(c, "feature_index %lld is out of range for %s", (long long)fi, sh(c, s));
    int64_t nf = s->dims[fi];
    bool grad = c->in->op == GS_OP_BATCH_NORM_GRAD;
    for (int k = 1; k < c->in->n_operands; k++) {
        const gs_shape *v = opnd(c, k);
        bool is_grad_out = grad && k == 4;
        if (!arr(v) || !fp_eq(v->type, s->type))
            return fail(c, "operand %d must be a %s array, not %s", k, tn(s->type), sh(c, v));
        if (is_grad_out ? !gs_shape_dims_compatible(v, s) : v->rank != 1 || !dim_eq(v->dims[0], nf))
            return fail(c, "operand %d %s does not fit the %lld features of %s", k, sh(c, v),
                        (long long)nf, sh(c, s));
    }
    if (c->in->op == GS_OP_BATCH_NORM_INFERENCE) return emit(c, out, copy_as(c, s, s->type));
    const gs_shape *e[3] = {copy_as(c, s, s->type), new_array(c, s->type, 1, &nf, NULL), NULL};
    e[2] = e[1];
    if (!e[0] || !e[1]) return oom(c);
    return emit(c, out, new_tuple(c, 3, e));
}

/* ------------------------------------------------------------------ control flow and calls */

static gs_status infer_gte(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    int64_t i;
    if (s->type != GS_TUPLE) return fail(c, "operand must be a tuple, not %s", sh(c, s));
    if (need_int(c, GS_ATTR_INDEX, &i) != GS_OK) return GS_ERR;
    if (i < 0 || i >= s->n_tuple)
        return fail(c, "index %lld is out of range for %s", (long long)i, sh(c, s));
    return emit(c, out, s->tuple[i]);
}

static gs_status infer_while(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    const gs_computation *cond, *body;
    if (need_comp(c, GS_ATTR_CONDITION, &cond) != GS_OK) return GS_ERR;
    if (need_comp(c, GS_ATTR_BODY, &body) != GS_OK) return GS_ERR;
    if (cond) {
        if (cond->n_params != 1)
            return fail(c, "condition %s must take 1 parameter, but takes %d", cond->name,
                        cond->n_params);
        if (!gs_shape_compatible(param_shape(cond, 0), s, false))
            return fail(c, "condition %s takes %s, but the loop state is %s", cond->name,
                        sh(c, param_shape(cond, 0)), sh(c, s));
        const gs_shape *rs = root_shape(cond);
        if (!is_scalar(rs) || rs->type != GS_PRED)
            return fail(c, "condition %s must return pred[], not %s", cond->name, sh(c, rs));
    }
    if (!body) return GS_OK;
    if (body->n_params != 1)
        return fail(c, "body %s must take 1 parameter, but takes %d", body->name, body->n_params);
    if (!gs_shape_compatible(param_shape(body, 0), s, false))
        return fail(c, "body %s takes %s, but the loop state is %s", body->name,
                    sh(c, param_shape(body, 0)), sh(c, s));
    if (!gs_shape_compatible(root_shape(body), s, false))
        return fail(c, "body %s returns %s, but the loop state is %s", body->name,
                    sh(c, root_shape(body)), sh(c, s));
    return cond ? emit(c, out, root_shape(body)) : GS_OK;
}

static gs_status infer_conditional(ictx *c, gs_shape **out) {
    const gs_shape *ix = opnd(c, 0);
    const gs_attr *br = attr(c, GS_ATTR_BRANCH_COMPUTATIONS);
    const gs_attr *ta = attr(c, GS_ATTR_TRUE_COMPUTATION), *fa = attr(c, GS_ATTR_FALSE_COMPUTATION);
    gs_computation *two[2];
    gs_computation *const *v;
    int n;
    if (br) {
        v = br->u.comps.v;
        n = br->u.comps.n;
    } else if (ta && fa) {
        two[0] = ta->u.comp;
        two[1] = fa->u.comp;
        v = two;
        n = 2;
    } else {
        return fail(c, "missing attribute branch_computations (or true_computation and "
                       "false_computation)");
    }
    if (!is_scalar(ix) || (ix->type != GS_PRED && ix->type != GS_S32))
        return fail(c, "branch index must be pred[] or s32[], not %s", sh(c, ix));
    if (ix->type == GS_PRED && n != 2)
        return fail(c, "a pred branch index needs 2 branches, not %d", n);
    if (n < 1) return fail(c, "has no branch computations");
    if (c->in->n_operands != n + 1)
        return fail(c,
                    "takes the branch index and one operand per branch (%d), but has %d "
                    "operands",
                    n + 1, c->in->n_operands);
    const gs_shape *res = NULL;
    bool all = true;
    for (int j = 0; j < n; j++) {
        const gs_computation *f = v[j];
        if (!comp_ready(f)) {
            all = false;
            continue;
        }
        if (f->n_params != 1)
            return fail(c, "branch computation %s must take 1 parameter, but takes %d", f->name,
                        f->n_params);
        if (!gs_shape_compatible(param_shape(f, 0), opnd(c, j + 1), false))
            return fail(c, "branch computation %s takes %s, but operand %d is %s", f->name,
                        sh(c, param_shape(f, 0)), j + 1, sh(c, opnd(c, j + 1)));
        if (!res)
            res = root_shape(f);
        else if (!gs_shape_compatible(res, root_shape(f), false))
            return fail(c, "branch computations return different shapes: %s and %s (%s)",
                        sh(c, res), sh(c, root_shape(f)), f->name);
    }
    return all ? emit(c, out, res) : GS_OK;
}

/* call (to_apply) and fusion (calls): parameters match the operands; the result is the
 * callee's root. A fusion may leave trailing operands without a parameter. */
static gs_status infer_call(ictx *c, gs_shape **out) {
    bool fusion = c->in->op == GS_OP_FUSION;
    const gs_computation *f;
    if (need_comp(c, fusion ? GS_ATTR_CALLS : GS_ATTR_TO_APPLY, &f) != GS_OK) return GS_ERR;
    if (!f) return GS_OK;
    int n = c->in->n_operands;
    if (fusion ? f->n_params > n : f->n_params != n)
        return fail(c, "computation %s takes %d parameters, but %d operands are given", f->name,
                    f->n_params, n);
    for (int i = 0; i < f->n_params; i++)
        if (!gs_shape_compatible(param_shape(f, i), opnd(c, i), false))
            return fail(c, "parameter %d of %s is %s, but operand %d is %s", i, f->name,
                        sh(c, param_shape(f, i)), i, sh(c, opnd(c, i)));
    return emit(c, out, root_shape(f));
}

/* ------------------------------------------------------------------ collectives */

/* XLA's CollectiveOpGroupMode: how replica_groups name devices. */
typedef enum gmode { GM_REPLICA, GM_PARTITION, GM_REPLICA_AND_PARTITION, GM_FLATTENED } gmode;

/* has_ugdi: the op has a use_global_device_ids field (all-reduce, all-gather, reduce-scatter);
 * for the others XLA treats it as unset. */
static gs_status group_mode(ictx *c, bool has_ugdi, gmode *mode) {
    bool channel = attr(c, GS_ATTR_CHANNEL_ID) != NULL;
    bool ugdi = gs_instr_bool(c->in, GS_ATTR_USE_GLOBAL_DEVICE_IDS, false);
    if (!channel) {
        if (ugdi) return fail(c, "use_global_device_ids=true needs a channel_id");
        *mode = GM_REPLICA;
    } else if (!has_ugdi) {
        *mode = GM_PARTITION;
    } else {
        *mode = ugdi ? GM_FLATTENED : GM_REPLICA_AND_PARTITION;
    }
    return GS_OK;
}

static const gs_replica_groups *groups_of(const ictx *c) {
    const gs_attr *at = attr(c, GS_ATTR_REPLICA_GROUPS);
    if (!at || (!at->u.groups->is_iota && at->u.groups->n_groups == 0)) return NULL;
    return at->u.groups;
}

/* XLA's CheckReplicaGroups: no empty group; the groups name each id 0..n-1 exactly once; n
 * is the number of replicas, partitions or both (unless the module leaves that count at 1);
 * uniform: all groups have one size. */
static gs_status check_groups(ictx *c, gmode mode, bool uniform) {
    const gs_replica_groups *g = groups_of(c);
    if (!g) {
        if (mode == GM_FLATTENED)
            return fail(c, "replica_groups must be given when use_global_device_ids=true");
        return GS_OK;
    }
    int64_t n = 0;
    if (g->is_iota) {
        n = (int64_t)g->n_groups * g->group_size;
    } else {
        for (int i = 0; i < g->n_groups; i++) {
            if (g->sizes[i] == 0) return fail(c, "replica group %d is empty", i);
            n += g->sizes[i];
        }
        bool *seen = GS_NEW_ARRAY(c->scratch, bool, n);
        if (!seen) return oom(c);
        for (int i = 0; i < g->n_groups; i++)
            for (int j = 0; j < g->sizes[i]; j++) {
                int64_t id = g->groups[i][j];
                if (id < 0 || id >= n)
                    return fail(c, "replica_groups must name each id 0..%lld once, but name %lld",
                                (long long)n - 1, (long long)id);
                if (seen[id])
                    return fail(c, "id %lld appears twice in replica_groups", (long long)id);
                seen[id] = true;
            }
        if (uniform && g->group_size < 0)
            return fail(c, "replica groups must all have the same size");
    }
    int64_t rc = c->replica_count, np = c->num_partitions;
    int64_t want = mode == GM_PARTITION ? np : mode == GM_FLATTENED ? rc * np : rc;
    const char *what = mode == GM_PARTITION   ? "num_partitions"
                       : mode == GM_FLATTENED ? "replica_count*num_partitions"
                                              : "replica_count";
    if (want != 1 && n != want)
        return fail(c, "replica_groups name %lld ids, but the module has %s=%lld", (long long)n,
                    what, (long long)want);
    return GS_OK;
}

/* The number of devices in one group (XLA's GetSubgroupSize). */
static int64_t subgroup_size(const ictx *c, gmode mode) {
    const gs_replica_groups *g = groups_of(c);
    int64_t first = g ? gs_replica_groups_size(g, 0) : -1;
    switch (mode) {
    case GM_REPLICA: return g ? first : c->replica_count;
    case GM_REPLICA_AND_PARTITION: return (g ? first : c->replica_count) * c->num_partitions;
    case GM_FLATTENED: return g ? first : 1;
    case GM_PARTITION: return g ? first : c->num_partitions;
    }
    return 1;
}

/* The written result for operand k of a (start) collective with n operands, or NULL. */
static const gs_shape *declared_result(const ictx *c, int k, int n) {
    const gs_shape *s = c->declared;
    if (!s) return NULL;
    if (c->in->op == GS_OP_ALL_GATHER_START) {
        if (s->type != GS_TUPLE || s->n_tuple < 2) return NULL;
        s = s->tuple[1];
    }
    if (n > 1) {
        if (s->type != GS_TUPLE || s->n_tuple <= k) return NULL;
        s = s->tuple[k];
    }
    return arr(s) ? s : NULL;
}

/* all-gather(-start) and reduce-scatter: dimension d of each operand grows (gather) or
 * shrinks (scatter) by the group size. When the module leaves the group size at 1, XLA takes
 * the factor from the written shape; so do we. */
static gs_status infer_gather_scatter_collective(ictx *c, gs_shape **out) {
    bool gather = c->in->op != GS_OP_REDUCE_SCATTER;
    int n = c->in->n_operands;
    gmode mode;
    int64_t d;
    if (group_mode(c, true, &mode) != GS_OK || check_groups(c, mode, true) != GS_OK) return GS_ERR;
    for (int k = 0; k < n; k++)
        if (!arr(opnd(c, k)))
            return fail(c, "operand %d must be an array, not %s", k, sh(c, opnd(c, k)));
    if (need_one_dim(c, opnd(c, 0), gather ? "all-gather dimension" : "scatter dimension", &d))
        return GS_ERR;
    if (!gather && check_binary_combiner(c) != GS_OK) return GS_ERR;
    int64_t shards = subgroup_size(c, mode);
    const gs_shape *decl = declared_result(c, 0, n);
    if (shards == 1 && decl && decl->rank > d && decl->dims[d] > 0 && opnd(c, 0)->dims[d] > 0) {
        int64_t a = decl->dims[d], b = opnd(c, 0)->dims[d];
        shards = gather ? (a + b - 1) / b : (b + a - 1) / a;
    }
    if (shards < 1) shards = 1;
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n + 1);
    if (!elems) return oom(c);
    for (int k = 0; k < n; k++) {
        const gs_shape *s = opnd(c, k);
        if (d >= s->rank)
            return fail(c, "dimension %lld is out of range for operand %d %s", (long long)d, k,
                        sh(c, s));
        int64_t dims[GS_MAX_RANK];
        copy_dims(dims, s);
        if (dims[d] >= 0 && gather) dims[d] *= shards;
        if (dims[d] >= 0 && !gather) {
            if (dims[d] % shards != 0)
                return fail(c, "dimension %lld of %s does not divide into %lld shards",
                            (long long)d, sh(c, s), (long long)shards);
            dims[d] /= shards;
        }
        if (!(elems[k] = new_array(c, s->type, s->rank, dims, s->dynamic))) return oom(c);
    }
    const gs_shape *res = n == 1 ? elems[0] : new_tuple(c, n, elems);
    if (!res || c->in->op != GS_OP_ALL_GATHER_START) return emit(c, out, res);
    const gs_shape *input = NULL;
    if (n == 1) {
        input = opnd(c, 0);
    } else {
        for (int k = 0; k < n; k++) elems[k] = opnd(c, k);
        input = new_tuple(c, n, elems);
    }
    const gs_shape *pair[2] = {input, res};
    return input ? emit(c, out, new_tuple(c, 2, pair)) : oom(c);
}

static gs_status infer_all_reduce(ictx *c, gs_shape **out) {
    gmode mode;
    if (group_mode(c, true, &mode) != GS_OK || check_groups(c, mode, false) != GS_OK) return GS_ERR;
    int n = c->in->n_operands;
    for (int k = 0; k < n; k++) {
        const gs_shape *s = opnd(c, k);
        if (!arr(s) && !(n == 1 && s->type == GS_TUPLE))
            return fail(c, "operand %d must be an array, not %s", k, sh(c, s));
    }
    if (check_binary_combiner(c) != GS_OK) return GS_ERR;
    return operands_as_result(c, out);
}

static gs_status infer_all_to_all(ictx *c, gs_shape **out) {
    gmode mode;
    if (group_mode(c, false, &mode) != GS_OK || check_groups(c, mode, true) != GS_OK) return GS_ERR;
    int n = c->in->n_operands;
    int64_t split = subgroup_size(c, mode), d;
    for (int k = 0; k < n; k++)
        if (!arr(opnd(c, k)))
            return fail(c, "operand %d must be an array, not %s", k, sh(c, opnd(c, k)));
    if (attr(c, GS_ATTR_DIMENSIONS)) {
        const gs_shape *s = opnd(c, 0);
        if (n != 1) return fail(c, "the array form takes one operand, not %d", n);
        if (need_one_dim(c, s, "split dimension", &d) != GS_OK) return GS_ERR;
        if (split > 1 && s->dims[d] >= 0 && s->dims[d] % split != 0)
            return fail(c, "dimension %lld of %s does not split into %lld parts", (long long)d,
                        sh(c, s), (long long)split);
        return emit(c, out, copy_as(c, s, s->type));
    }
    for (int k = 1; k < n; k++)
        if (!gs_shape_compatible(opnd(c, k), opnd(c, 0), false))
            return fail(c, "operands %s and %s have different shapes", sh(c, opnd(c, 0)),
                        sh(c, opnd(c, k)));
    if (split > 1 && n != split)
        return fail(c, "the tuple form takes one operand per device of a group (%lld), not %d",
                    (long long)split, n);
    const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, n);
    if (!elems) return oom(c);
    for (int k = 0; k < n; k++) elems[k] = opnd(c, k);
    return emit(c, out, new_tuple(c, n, elems));
}

/* collective-permute(-start): ids in range of the replicas (no channel) or partitions, no
 * source or target twice (unless the in-place form with 4 operands). */
static gs_status infer_collective_permute(ictx *c, gs_shape **out) {
    const gs_attr *at = attr(c, GS_ATTR_SOURCE_TARGET_PAIRS);
    bool channel = attr(c, GS_ATTR_CHANNEL_ID) != NULL;
    int64_t limit = channel ? c->num_partitions : c->replica_count;
    int n = c->in->n_operands;
    if (at) {
        gs_pairs p = at->u.pairs;
        for (int i = 0; i < p.n; i++)
            for (int k = 0; k < 2; k++) {
                int64_t id = p.v[i][k];
                const char *what = k ? "target" : "source";
                if (id < 0 || (limit != 1 && id >= limit))
                    return fail(c, "%s %lld in source_target_pairs is out of range for %s=%lld",
                                what, (long long)id, channel ? "num_partitions" : "replica_count",
                                (long long)limit);
                for (int j = 0; n != 4 && j < i; j++)
                    if (p.v[j][k] == id)
                        return fail(c, "%s %lld appears twice in source_target_pairs", what,
                                    (long long)id);
            }
    }
    for (int k = 0; k < n; k++)
        if (!arr(opnd(c, k)) && !(n != 1 && opnd(c, k)->type == GS_TUPLE))
            return fail(c, "operand %d must be an array, not %s", k, sh(c, opnd(c, k)));
    if (c->in->op == GS_OP_COLLECTIVE_PERMUTE_START) return GS_OK;
    if (n == 4) return emit(c, out, opnd(c, 1));
    return operands_as_result(c, out);
}

/* The element `index` of the operand's tuple (the -done half of an asynchronous pair). */
static gs_status infer_done(ictx *c, gs_shape **out, int index) {
    const gs_shape *s = opnd(c, 0);
    if (s->type != GS_TUPLE || s->n_tuple <= index)
        return fail(c, "operand must be the tuple of a start op, not %s", sh(c, s));
    return emit(c, out, s->tuple[index]);
}

/* async-start, call-start: the shape is ((operands...), result, context...). */
static gs_status check_async_start(ictx *c) {
    const gs_shape *s = c->declared;
    if (!s) return GS_OK;
    if (s->type != GS_TUPLE || s->n_tuple < 2)
        return fail(c, "shape must be a tuple of at least 2 elements, not %s", sh(c, s));
    const gs_shape *args = s->tuple[0];
    if (args->type != GS_TUPLE || args->n_tuple != c->in->n_operands) return GS_OK;
    for (int k = 0; k < c->in->n_operands; k++)
        if (!gs_shape_compatible(args->tuple[k], opnd(c, k), false))
            return fail(c, "operand %d is %s, but the shape holds %s for it", k, sh(c, opnd(c, k)),
                        sh(c, args->tuple[k]));
    return GS_OK;
}

/* ------------------------------------------------------------------ ops whose shape is written */

/* The written shape must be an array (verification only). */
static gs_status declared_array(ictx *c) {
    if (!arr(c->declared)) return fail(c, "shape must be an array, not %s", sh(c, c->declared));
    return GS_OK;
}

static gs_status check_broadcast(ictx *c) {
    const gs_shape *s = opnd(c, 0), *r = c->declared;
    gs_ints v;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (!fp_eq(r->type, s->type))
        return fail(c, "element type of %s differs from the operand's %s", sh(c, r), sh(c, s));
    if (need_ints(c, GS_ATTR_DIMENSIONS, &v) != GS_OK) return GS_ERR;
    if (v.n != s->rank)
        return fail(c, "dimensions %s must map each of the %d dimensions of the operand %s",
                    ints_text(c, v), s->rank, sh(c, s));
    for (int i = 0; i < v.n; i++) {
        if (v.v[i] < 0 || v.v[i] >= r->rank)
            return fail(c, "broadcast dimension %lld is out of range for %s", (long long)v.v[i],
                        sh(c, r));
        if (!dim_eq(r->dims[v.v[i]], s->dims[i]))
            return fail(c,
                        "operand dimension %d of %s has size %lld, but result dimension %lld "
                        "of %s has %lld",
                        i, sh(c, s), (long long)s->dims[i], (long long)v.v[i], sh(c, r),
                        (long long)r->dims[v.v[i]]);
        for (int j = 0; j < i; j++)
            if (v.v[j] == v.v[i])
                return fail(c, "broadcast dimension %lld appears twice", (long long)v.v[i]);
    }
    return GS_OK;
}

static int64_t elements_or_unknown(const gs_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0) return -1;
        n *= s->dims[i];
    }
    return n;
}

static gs_status check_reshape(ictx *c) {
    const gs_shape *s = opnd(c, 0), *r = c->declared;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (!fp_eq(r->type, s->type))
        return fail(c, "element type of %s differs from the operand's %s", sh(c, r), sh(c, s));
    int64_t a = elements_or_unknown(s), b = elements_or_unknown(r);
    if (a >= 0 && b >= 0 && a != b)
        return fail(c, "%s has %lld elements, but the operand %s has %lld", sh(c, r), (long long)b,
                    sh(c, s), (long long)a);
    if (c->in->op == GS_OP_DYNAMIC_RESHAPE) {
        if (c->in->n_operands != r->rank + 1)
            return fail(c,
                        "takes the operand and one size per result dimension (%d), not %d "
                        "operands",
                        r->rank + 1, c->in->n_operands);
        for (int k = 1; k < c->in->n_operands; k++)
            if (!is_scalar(opnd(c, k)) || opnd(c, k)->type != GS_S32)
                return fail(c, "size operand %d must be s32[], not %s", k, sh(c, opnd(c, k)));
    }
    return GS_OK;
}

static gs_status check_convert(ictx *c) {
    const gs_shape *s = opnd(c, 0), *r = c->declared;
    if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (c->in->op == GS_OP_STOCHASTIC_CONVERT) {
        const gs_shape *u = opnd(c, 1);
        if (!gs_type_is_float(s->type))
            return fail(c, "operand must be floating-point, not %s", sh(c, s));
        if (!arr(u) || !gs_type_is_unsigned_int(u->type) ||
            gs_type_bits(u->type) != gs_type_bits(s->type) || !gs_shape_dims_compatible(u, s))
            return fail(c,
                        "random bits %s must be unsigned integers of the operand's width and "
                        "shape %s",
                        sh(c, u), sh(c, s));
    }
    if (c->in->op != GS_OP_BITCAST_CONVERT) {
        if (!gs_shape_dims_compatible(s, r))
            return fail(c, "%s and the operand %s have different dimensions", sh(c, r), sh(c, s));
        return GS_OK;
    }
    if (gs_type_is_complex(s->type) != gs_type_is_complex(r->type))
        return fail(c, "cannot bitcast between complex and real types (%s to %s)", sh(c, s),
                    sh(c, r));
    int ib = gs_type_bits(s->type), ob = gs_type_bits(r->type);
    int hi = ib > ob ? ib : ob, lo = ib > ob ? ob : ib;
    if (lo <= 0 || hi % lo != 0)
        return fail(c, "cannot bitcast %s to %s: bit widths do not divide", tn(s->type),
                    tn(r->type));
    int64_t dims[GS_MAX_RANK + 1];
    int rank = s->rank;
    copy_dims(dims, s);
    if (ib > ob) {
        dims[rank++] = hi / lo;
    } else if (ib < ob) {
        if (rank < 1 || !dim_eq(dims[rank - 1], hi / lo))
            return fail(c, "bitcasting %s to %s needs a last dimension of %d", sh(c, s),
                        tn(r->type), hi / lo);
        rank--;
    }
    bool ok = rank == r->rank;
    for (int i = 0; ok && i < rank; i++) ok = dim_eq(dims[i], r->dims[i]);
    if (!ok)
        return fail(c, "bitcasting %s to %s does not give %s", sh(c, s), tn(r->type), sh(c, r));
    return GS_OK;
}

static gs_status check_iota(ictx *c) {
    const gs_shape *r = c->declared;
    int64_t d;
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (r->rank == 0) return fail(c, "shape must not be a scalar");
    if (r->type == GS_PRED) return fail(c, "shape must be numeric, not %s", sh(c, r));
    if (need_int(c, GS_ATTR_IOTA_DIMENSION, &d) != GS_OK) return GS_ERR;
    if (d < 0 || d >= r->rank)
        return fail(c, "iota_dimension %lld is out of range for %s", (long long)d, sh(c, r));
    return GS_OK;
}

static gs_status check_rng(ictx *c) {
    const gs_shape *a = opnd(c, 0), *b = opnd(c, 1);
    if (!is_scalar(a) || !is_scalar(b) || a->type != b->type)
        return fail(c, "operands must be scalars of one type, not %s and %s", sh(c, a), sh(c, b));
    if (declared_array(c) != GS_OK) return GS_ERR;
    if (!fp_eq(c->declared->type, a->type))
        return fail(c, "element type of %s differs from the operands' %s", sh(c, c->declared),
                    tn(a->type));
    return GS_OK;
}

static gs_status check_token_operand(ictx *c, int k) {
    if (!is_token(opnd(c, k)))
        return fail(c, "operand %d must be a token, not %s", k, sh(c, opnd(c, k)));
    return GS_OK;
}

/* infeed: (data, token); recv: (data, u32[], token). */
static gs_status check_transfer(ictx *c, int n) {
    const gs_shape *r = c->declared;
    if (check_token_operand(c, 0) != GS_OK) return GS_ERR;
    if (r->type != GS_TUPLE || r->n_tuple != n || !is_token(r->tuple[n - 1]) ||
        (n == 3 && (!is_scalar(r->tuple[1]) || r->tuple[1]->type != GS_U32)))
        return fail(c, "shape must be %s, not %s",
                    n == 3 ? "(data, u32[], token[])" : "(data, token[])", sh(c, r));
    return GS_OK;
}

/* Checks of ops without inference; only when verifying (c->declared set). */
static gs_status check_written(ictx *c) {
    if (!c->declared) return GS_OK;
    switch (c->in->op) {
    case GS_OP_BROADCAST: return check_broadcast(c);
    case GS_OP_RESHAPE:
    case GS_OP_DYNAMIC_RESHAPE: return check_reshape(c);
    case GS_OP_CONVERT:
    case GS_OP_BITCAST_CONVERT:
    case GS_OP_STOCHASTIC_CONVERT: return check_convert(c);
    case GS_OP_IOTA: return check_iota(c);
    case GS_OP_CONSTANT:
        if (!c->in->literal) return fail(c, "has no literal");
        if (is_token(c->declared)) return fail(c, "a token cannot be a constant");
        return GS_OK;
    case GS_OP_RNG: return check_rng(c);
    case GS_OP_RNG_GET_AND_UPDATE_STATE: {
        const int64_t two = 2;
        const gs_shape *u = new_array(c, GS_U64, 1, &two, NULL);
        if (!u) return oom(c);
        if (!gs_shape_compatible(c->declared, u, false))
            return fail(c, "shape must be u64[2], not %s", sh(c, c->declared));
        return GS_OK;
    }
    case GS_OP_RNG_BIT_GENERATOR: {
        const gs_shape *r = c->declared;
        if (r->type == GS_TUPLE &&
            (r->n_tuple != 2 || !gs_shape_compatible(r->tuple[0], opnd(c, 0), false)))
            return fail(c, "shape must be (state %s, bits), not %s", sh(c, opnd(c, 0)), sh(c, r));
        return GS_OK;
    }
    case GS_OP_INFEED: return check_transfer(c, 2);
    case GS_OP_RECV: return check_transfer(c, 3);
    case GS_OP_ASYNC_START:
    case GS_OP_CALL_START: return check_async_start(c);
    default: return GS_OK;
    }
}

/* ------------------------------------------------------------------ dispatch */

static gs_status check_operand_count(ictx *c) {
    const gs_op_info *info = gs_op_info_of(c->in->op);
    int n = c->in->n_operands, lo = info->min_operands, hi = info->max_operands;
    if (n >= lo && (hi < 0 || n <= hi)) return GS_OK;
    if (lo == hi)
        return fail(c, "takes %d operand%s, but %d were given", lo, lo == 1 ? "" : "s", n);
    if (hi < 0)
        return fail(c, "takes at least %d operand%s, but %d were given", lo, lo == 1 ? "" : "s", n);
    return fail(c, "takes %d to %d operands, but %d were given", lo, hi, n);
}

static gs_status infer(ictx *c, gs_shape **out) {
    const gs_instr *in = c->in;
    *out = NULL;
    if (check_operand_count(c) != GS_OK) return GS_ERR;
    for (int k = 0; k < in->n_operands; k++)
        if (!in->operands[k] || !in->operands[k]->shape)
            return fail(c, "operand %d has no shape", k);
    switch (gs_op_info_of(in->op)->family) {
    case GS_FAM_UNARY: return infer_unary(c, out);
    case GS_FAM_BINARY:
    case GS_FAM_COMPARE: return infer_binary(c, out);
    default: break;
    }
    switch (in->op) {
    case GS_OP_SELECT: return infer_select(c, out);
    case GS_OP_CLAMP: return infer_clamp(c, out);
    case GS_OP_MAP: return infer_map(c, out);
    case GS_OP_REDUCE_PRECISION: {
        const gs_shape *s = opnd(c, 0);
        int64_t e, m;
        if (!arr(s) || !gs_type_is_float(s->type))
            return fail(c, "operand must be a floating-point array, not %s", sh(c, s));
        if (need_int(c, GS_ATTR_EXPONENT_BITS, &e) != GS_OK ||
            need_int(c, GS_ATTR_MANTISSA_BITS, &m) != GS_OK)
            return GS_ERR;
        if (e < 1) return fail(c, "exponent_bits must be >= 1, not %lld", (long long)e);
        if (m < 0) return fail(c, "mantissa_bits must be >= 0, not %lld", (long long)m);
        return emit(c, out, copy_as(c, s, s->type));
    }
    case GS_OP_TRANSPOSE: return infer_transpose(c, out);
    case GS_OP_REVERSE: return infer_reverse(c, out);
    case GS_OP_SLICE: return infer_slice(c, out);
    case GS_OP_DYNAMIC_SLICE: return infer_dynamic_slice(c, out);
    case GS_OP_DYNAMIC_UPDATE_SLICE: return infer_dynamic_update_slice(c, out);
    case GS_OP_CONCATENATE: return infer_concatenate(c, out);
    case GS_OP_PAD: return infer_pad(c, out);
    case GS_OP_GATHER: return infer_gather(c, out);
    case GS_OP_SCATTER: return infer_scatter(c, out);
    case GS_OP_DOT:
    case GS_OP_RAGGED_DOT: return infer_dot(c, out);
    case GS_OP_CONVOLUTION: return infer_convolution(c, out);
    case GS_OP_REDUCE: return infer_reduce(c, out);
    case GS_OP_REDUCE_WINDOW: return infer_reduce_window(c, out);
    case GS_OP_SELECT_AND_SCATTER: return infer_select_and_scatter(c, out);
    case GS_OP_SORT: return infer_sort(c, out);
    case GS_OP_TOPK: return infer_topk(c, out);
    case GS_OP_FFT: return infer_fft(c, out);
    case GS_OP_SCAN: return infer_scan(c, out);
    case GS_OP_CHOLESKY: return infer_cholesky(c, out);
    case GS_OP_TRIANGULAR_SOLVE: return infer_triangular_solve(c, out);
    case GS_OP_BATCH_NORM_TRAINING:
    case GS_OP_BATCH_NORM_INFERENCE:
    case GS_OP_BATCH_NORM_GRAD: return infer_batch_norm(c, out);
    case GS_OP_WHILE: return infer_while(c, out);
    case GS_OP_CONDITIONAL: return infer_conditional(c, out);
    case GS_OP_CALL:
    case GS_OP_FUSION: return infer_call(c, out);
    case GS_OP_TUPLE: {
        const gs_shape **elems = GS_NEW_ARRAY(c->scratch, const gs_shape *, in->n_operands + 1);
        if (!elems) return oom(c);
        for (int k = 0; k < in->n_operands; k++) elems[k] = opnd(c, k);
        return emit(c, out, new_tuple(c, in->n_operands, elems));
    }
    case GS_OP_GET_TUPLE_ELEMENT: return infer_gte(c, out);
    case GS_OP_COPY:
    case GS_OP_DOMAIN:
    case GS_OP_OPTIMIZATION_BARRIER: return emit(c, out, opnd(c, 0));
    case GS_OP_ADD_DEPENDENCY:
        if (check_token_operand(c, 1) != GS_OK) return GS_ERR;
        return emit(c, out, opnd(c, 0));
    case GS_OP_AFTER_ALL:
        for (int k = 0; k < in->n_operands; k++)
            if (check_token_operand(c, k) != GS_OK) return GS_ERR;
        return emit(c, out, gs_shape_token(c->a));
    case GS_OP_PARTITION_ID:
    case GS_OP_REPLICA_ID: return emit(c, out, gs_shape_scalar(c->a, GS_U32));
    case GS_OP_GET_DIMENSION_SIZE: {
        int64_t d;
        if (!arr(opnd(c, 0))) return fail(c, "operand must be an array, not %s", sh(c, opnd(c, 0)));
        if (need_one_dim(c, opnd(c, 0), "dimension", &d) != GS_OK) return GS_ERR;
        return emit(c, out, gs_shape_scalar(c->a, GS_S32));
    }
    case GS_OP_SET_DIMENSION_SIZE: {
        const gs_shape *s = opnd(c, 0), *v = opnd(c, 1);
        int64_t d;
        if (!arr(s)) return fail(c, "operand must be an array, not %s", sh(c, s));
        if (need_one_dim(c, s, "dimension", &d) != GS_OK) return GS_ERR;
        if (!is_scalar(v) || v->type != GS_S32)
            return fail(c, "size must be s32[], not %s", sh(c, v));
        bool dyn[GS_MAX_RANK];
        for (int i = 0; i < s->rank; i++) dyn[i] = dyn_at(s, i) || i == d;
        return emit(c, out, new_array(c, s->type, s->rank, s->dims, dyn));
    }
    case GS_OP_ALL_REDUCE:
    case GS_OP_ALL_REDUCE_START: return infer_all_reduce(c, out);
    case GS_OP_ALL_GATHER:
    case GS_OP_ALL_GATHER_START:
    case GS_OP_REDUCE_SCATTER: return infer_gather_scatter_collective(c, out);
    case GS_OP_ALL_TO_ALL: return infer_all_to_all(c, out);
    case GS_OP_COLLECTIVE_PERMUTE:
    case GS_OP_COLLECTIVE_PERMUTE_START: return infer_collective_permute(c, out);
    case GS_OP_COLLECTIVE_BROADCAST: {
        gmode mode;
        if (group_mode(c, false, &mode) != GS_OK || check_groups(c, mode, true) != GS_OK)
            return GS_ERR;
        return operands_as_result(c, out);
    }
    case GS_OP_RAGGED_ALL_TO_ALL:
        for (int k = 0; k < in->n_operands; k++)
            if (!arr(opnd(c, k)))
                return fail(c, "operand %d must be an array, not %s", k, sh(c, opnd(c, k)));
        return emit(c, out, opnd(c, 1));
    case GS_OP_ALL_REDUCE_DONE: return emit(c, out, opnd(c, 0));
    case GS_OP_COPY_START: {
        const gs_shape *e[3] = {opnd(c, 0), opnd(c, 0), gs_shape_scalar(c->a, GS_U32)};
        return e[2] ? emit(c, out, new_tuple(c, 3, e)) : oom(c);
    }
    case GS_OP_COPY_DONE: return infer_done(c, out, 0);
    case GS_OP_ALL_GATHER_DONE:
    case GS_OP_COLLECTIVE_PERMUTE_DONE:
    case GS_OP_ASYNC_DONE:
    case GS_OP_CALL_DONE: return infer_done(c, out, 1);
    case GS_OP_ASYNC_UPDATE: return in->n_operands == 1 ? emit(c, out, opnd(c, 0)) : GS_OK;
    case GS_OP_OUTFEED:
        if (check_token_operand(c, 1) != GS_OK) return GS_ERR;
        return emit(c, out, gs_shape_token(c->a));
    case GS_OP_SEND: {
        if (check_token_operand(c, 1) != GS_OK) return GS_ERR;
        const gs_shape *e[3] = {opnd(c, 0), gs_shape_scalar(c->a, GS_U32), gs_shape_token(c->a)};
        return e[1] && e[2] ? emit(c, out, new_tuple(c, 3, e)) : oom(c);
    }
    case GS_OP_SEND_DONE: return emit(c, out, gs_shape_token(c->a));
    case GS_OP_RECV_DONE: {
        const gs_shape *s = opnd(c, 0);
        if (s->type != GS_TUPLE || s->n_tuple < 1)
            return fail(c, "operand must be the tuple of a recv, not %s", sh(c, s));
        const gs_shape *e[2] = {s->tuple[0], gs_shape_token(c->a)};
        return e[1] ? emit(c, out, new_tuple(c, 2, e)) : oom(c);
    }
    default: return check_written(c);
    }
}

gs_status gs_infer_written(const gs_module *m, const gs_instr *in, gs_arena *scratch, gs_diags *d,
                           gs_shape **inferred) {
    ictx c = {in, in->shape, scratch, scratch, d, m->num_partitions, m->replica_count};
    *inferred = NULL;
    if (!in->shape) return fail(&c, "has no shape");
    return infer(&c, inferred);
}

gs_status gs_infer_shape(gs_arena *a, const gs_instr *in, gs_shape **out, gs_diags *d) {
    const gs_module *m = in->parent ? in->parent->module : NULL;
    gs_arena scratch;
    gs_arena_init(&scratch);
    ictx c = {in, NULL, a, &scratch, d, m ? m->num_partitions : 1, m ? m->replica_count : 1};
    gs_shape *s = NULL;
    gs_status st = infer(&c, &s);
    if (st == GS_OK && s && a->failed) st = oom(&c);
    gs_arena_free(&scratch);
    *out = st == GS_OK ? s : NULL;
    return st;
}
