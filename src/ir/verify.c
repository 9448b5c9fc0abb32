/*
 * verify.c — the module verifier (XLA's HloVerifier).
 *
 * gs_module_verify rejects call cycles, then runs shape inference (infer.c) on every instruction
 * of every computation and compares the written shape with the inferred one (element types and
 * dims; layouts and dynamic-dim flags are ignored, and dot/convolution compare dims only since
 * XLA lets them pick a result element type). Inference also makes the checks of XLA's verifier
 * for ops whose shape must be written, replica groups, source-target pairs and token operands.
 * Like XLA's verifier as XLA's own tests run it (mixed precision allowed), it lets one
 * floating-point type stand for another except in ops that only pass data through (tuple,
 * get-tuple-element, while, call...). It reports one located error per faulty instruction and
 * goes on to the next.
 */
#include "gspmd/ir.h"
#include "ir/internal.h"

#include <stdarg.h>
#include <stdlib.h>

/* Appends `<opcode> <name>: <message>` at the instruction and returns GS_ERR. */
__attribute__((format(printf, 3, 4))) static gs_status fail(const gs_instr *in, gs_diags *d,
                                                            const char *fmt, ...) {
    gs_sb sb = {0};
    va_list ap;
    va_start(ap, fmt);
    gs_sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    gs_error(d, in->span, "%s %s: %s", in->op_text ? in->op_text : gs_op_name(in->op), in->name,
             sb.failed ? "out of memory" : gs_sb_str(&sb));
    gs_sb_free(&sb);
    return GS_ERR;
}

/* The shape's text without layout (`f32[2,3]`), kept in the scratch arena. */
static const char *sh(gs_arena *scratch, const gs_shape *s) {
    gs_sb sb = {0};
    gs_shape_print(&sb, s, false);
    const char *r = sb.failed ? NULL : gs_arena_strdup(scratch, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return r ? r : "?";
}

/* dot, ragged-dot and convolution may choose their result element type. */
static bool dims_only(gs_opcode op) {
    return op == GS_OP_DOT || op == GS_OP_RAGGED_DOT || op == GS_OP_CONVOLUTION;
}

/* Ops that only pass data through: XLA compares their shapes exactly. Elsewhere its verifier
 * (as XLA's tests run it, allowing mixed precision) lets one floating-point type stand for
 * another, e.g. a bf16 -> f32 copy. */
static bool exact_types(gs_opcode op) {
    switch (op) {
    case GS_OP_CALL: case GS_OP_CONDITIONAL: case GS_OP_COPY_DONE: case GS_OP_COPY_START:
    case GS_OP_GET_TUPLE_ELEMENT: case GS_OP_OPTIMIZATION_BARRIER: case GS_OP_RECV_DONE:
    case GS_OP_SEND: case GS_OP_SEND_DONE: case GS_OP_OUTFEED: case GS_OP_TUPLE:
    case GS_OP_WHILE: case GS_OP_DYNAMIC_UPDATE_SLICE:
        return true;
    default:
        return false;
    }
}

/* XLA's MaybeUpcast: a dot or convolution may produce another element type than its operands
 * (preferred_element_type), but not a narrower one than a non-floating-point operand type. */
static gs_status check_preferred_type(const gs_instr *in, gs_diags *d, gs_type from) {
    gs_type to = in->shape->type;
    if (to != from && !gs_type_is_float(from) && gs_type_bits(to) < gs_type_bits(from))
        return fail(in, d, "result type %s is narrower than the operand type %s", gs_type_name(to),
                    gs_type_name(from));
    return GS_OK;
}

static gs_status verify_instr(const gs_module *m, const gs_instr *in, gs_arena *scratch,
                              gs_diags *d) {
    gs_shape *inferred;
    if (gs_infer_written(m, in, scratch, d, &inferred) != GS_OK) return GS_ERR;
    if (inferred) {
        bool arrays = gs_type_is_array(in->shape->type) && gs_type_is_array(inferred->type);
        bool ok = dims_only(in->op)
                      ? arrays && gs_shape_dims_compatible(in->shape, inferred)
                      : gs_shape_compatible(in->shape, inferred, !exact_types(in->op));
        if (!ok)
            return fail(in, d, "shape %s does not match the inferred shape %s",
                        sh(scratch, in->shape), sh(scratch, inferred));
        if (dims_only(in->op)) return check_preferred_type(in, d, inferred->type);
    }
    return GS_OK;
}

/* Depth-first search for a computation that calls itself; state per computation index:
 * 0 unvisited, 1 on the stack, 2 done. Reports the first cycle at the call that closes it. */
static bool call_cycle(const gs_module *m, const gs_computation *c, char *state, gs_diags *d) {
    int ci = -1;
    for (int i = 0; i < m->n_comps; i++)
        if (m->comps[i] == c) ci = i;
    if (ci < 0 || state[ci] == 2) return false;
    state[ci] = 1;
    for (int j = 0; j < c->n_instrs; j++) {
        gs_computation *called[64];
        int nc = gs_instr_called(c->instrs[j], called, 64);
        for (int k = 0; k < nc && k < 64; k++) {
            int q = -1;
            for (int i = 0; called[k] && i < m->n_comps; i++)
                if (m->comps[i] == called[k]) q = i;
            if (q < 0) continue;
            if (state[q] == 1) {
                gs_error(d, c->instrs[j]->span,
                         "%%%s in computation %s calls %s, which is already being called: "
                         "computations cannot call themselves (recursion)",
                         c->instrs[j]->name, c->name, called[k]->name);
                return true;
            }
            if (call_cycle(m, called[k], state, d)) return true;
        }
    }
    state[ci] = 2;
    return false;
}

gs_status gs_module_verify(const gs_module *m, gs_diags *d) {
    gs_arena scratch;
    gs_arena_init(&scratch);
    int bad = 0;
    char *state = calloc((size_t)m->n_comps + 1, 1);
    if (!state) return gs_error(d, gs_span_none(), "out of memory");
    for (int i = 0; i < m->n_comps && !bad; i++)
        if (call_cycle(m, m->comps[i], state, d)) bad++;
    free(state);
    for (int i = 0; i < m->n_comps; i++) {
        const gs_computation *comp = m->comps[i];
        for (int j = 0; j < comp->n_instrs; j++) {
            if (verify_instr(m, comp->instrs[j], &scratch, d) != GS_OK) bad++;
            gs_arena_free(&scratch);
        }
    }
    return bad ? GS_ERR : GS_OK;
}

static bool has_unbounded(const gs_shape *s) {
    if (!s) return false;
    for (int i = 0; i < s->n_tuple; i++)
        if (has_unbounded(s->tuple[i])) return true;
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] < 0) return true;
    return false;
}

gs_status gs_module_check_bounded(const gs_module *m, const char *what, gs_diags *d) {
    for (int i = 0; i < m->n_comps; i++) {
        const gs_computation *comp = m->comps[i];
        for (int j = 0; j < comp->n_instrs; j++) {
            const gs_instr *in = comp->instrs[j];
            if (!has_unbounded(in->shape)) continue;
            gs_arena a;
            gs_arena_init(&a);
            const char *text = gs_shape_to_string(&a, in->shape);
            gs_error(d, in->span,
                     "%s needs every dimension's size, but %s has shape %s with an unbounded "
                     "dynamic dimension ('?')",
                     what, in->name, text ? text : "?");
            gs_arena_free(&a);
            return GS_ERR;
        }
    }
    return GS_OK;
}
