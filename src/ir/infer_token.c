/*
 * infer_token.c — shape rules of the ops that order side effects with tokens: after-all,
 * add-dependency, outfeed, send (data, u32[] context, token) and recv-done. infeed and recv
 * have written shapes (infer_written.c).
 */
#include "ir/infer.h"

gs_status gs_infer_after_all(ictx *c, gs_shape **out) {
    for (int k = 0; k < c->in->n_operands; k++)
        if (check_token_operand(c, k) != GS_OK) return GS_ERR;
    return emit(c, out, gs_shape_token(c->a));
}

gs_status gs_infer_add_dependency(ictx *c, gs_shape **out) {
    if (check_token_operand(c, 1) != GS_OK) return GS_ERR;
    return emit(c, out, opnd(c, 0));
}

gs_status gs_infer_outfeed(ictx *c, gs_shape **out) {
    if (check_token_operand(c, 1) != GS_OK) return GS_ERR;
    return emit(c, out, gs_shape_token(c->a));
}

gs_status gs_infer_send(ictx *c, gs_shape **out) {
    if (check_token_operand(c, 1) != GS_OK) return GS_ERR;
    const gs_shape *e[3] = {opnd(c, 0), gs_shape_scalar(c->a, GS_U32), gs_shape_token(c->a)};
    return e[1] && e[2] ? emit(c, out, new_tuple(c, 3, e)) : oom(c);
}

gs_status gs_infer_recv_done(ictx *c, gs_shape **out) {
    const gs_shape *s = opnd(c, 0);
    if (s->type != GS_TUPLE || s->n_tuple < 1)
        return fail(c, "operand must be the tuple of a recv, not %s", sh(c, s));
    const gs_shape *e[2] = {s->tuple[0], gs_shape_token(c->a)};
    return e[1] ? emit(c, out, new_tuple(c, 2, e)) : oom(c);
}
