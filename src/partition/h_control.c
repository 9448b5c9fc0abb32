/*
 * h_control.c — while, call and conditional: the computations they call are partitioned for the
 * shardings at the call site (gs_part_partition_called: one partitioned copy per distinct signature
 * of parameter and root shardings), so loops, called functions and branches run sharded like the
 * entry instead of whole on every device.
 *
 *   while        one loop sharding S for the carried tuple: the while's own sharding, else its
 *                body parameter's, else replicated. The operand is resharded to S before the
 *                loop; the body is partitioned with S as its parameter and root sharding (a
 *                loop-carried value keeps its sharding across iterations: nothing is resharded
 *                on the back edge), the condition with S as its parameter and a replicated
 *                predicate. A body or condition parameter whose own sharding contradicts S is an
 *                error.
 *   call         the callee's parameters take its own parameter shardings where written, else
 *                the operands' shardings as they are; its root takes the call's sharding.
 *   conditional  the selector (predicate or branch index) is replicated (a manual one stays
 *                each device's own); each branch is
 *                partitioned like a call with its operand, its root with the conditional's
 *                sharding.
 * Computations used as reducers and comparators (to_apply of reduce, sort, scatter, all-reduce)
 * are not partitioned: they stay scalar and are copied as they are.
 */
#include "internal.h"

#include <string.h>

/* The sharding a callee's parameter p gets from operand value v: p's own when written, else v's
 * (partial values combined first). */
static const gs_sharding *param_sharding(gs_part_ctx *c, const gs_instr *p,
                                         const gs_part_value *v) {
    if (gs_instr_get_sharding(p)) return gs_part_sharding_of(c, p);
    if (gs_part_unreduced_dim(v->sharding) != -1) return gs_part_reduced_form(c, v->sharding);
    return v->sharding;
}

/* The per-device values of the operands of `in` from `first` on, resharded to sh[]. */
static bool reshard_operands(gs_part_ctx *c, const gs_instr *in, int first, int n,
                             const gs_sharding *const *sh, gs_instr **ops) {
    for (int k = 0; k < n; k++) {
        gs_part_value r;
        gs_part_reshard(c, gs_part_operand(c, in, first + k), sh[k], &r);
        if (c->failed) return false;
        ops[k] = r.hlo;
    }
    return true;
}

/* Is the written sharding of parameter p, if any, the loop's S? Reports the contradiction. */
static bool agrees(gs_part_ctx *c, const gs_instr *loop, const gs_instr *p, const char *what,
                   const gs_sharding *S) {
    if (!gs_instr_get_sharding(p)) return true;
    const gs_sharding *own = gs_part_sharding_of(c, p);
    if (gs_sharding_equal(own, S)) return true;
    char *a = gs_sharding_to_string(gs_part_arena(c), S),
         *b = gs_sharding_to_string(gs_part_arena(c), own);
    gs_part_error(c,
                  "the loop %%%s carries its state sharded %s, but the parameter %%%s of its %s "
                  "%s is sharded %s",
                  loop->name, a ? a : "?", p->name, what, p->parent->name, b ? b : "?");
    return false;
}

bool gs_part_handle_while(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                          gs_part_value *out) {
    const gs_computation *body = gs_instr_comp(in, GS_ATTR_BODY);
    const gs_computation *cond = gs_instr_comp(in, GS_ATTR_CONDITION);
    if (!body || !cond || body->n_params != 1 || cond->n_params != 1 || in->n_operands != 1)
        return false;
    const gs_sharding *S = t;
    if (!gs_instr_get_sharding(in) && gs_instr_get_sharding(body->params[0]))
        S = gs_part_sharding_of(c, body->params[0]);
    if (!agrees(c, in, body->params[0], "body", S) ||
        !agrees(c, in, cond->params[0], "condition", S))
        return false;
    gs_instr *init;
    if (!reshard_operands(c, in, 0, 1, &S, &init)) return false;
    /* Every device must take the same branch: the predicate is replicated (or, in a manual
     * region, each device's own as the program wrote it). */
    const gs_sharding *pred = gs_part_sharding_of(c, cond->root);
    if (pred->kind != GS_SHARDING_MANUAL) pred = gs_part_replicated(c, cond->root->shape);
    gs_computation *pb = gs_part_partition_called(c, body, &S, S);
    gs_computation *pc = pb ? gs_part_partition_called(c, cond, &S, pred) : NULL;
    if (!pb || !pc) return false;
    const gs_shape *ls = gs_part_local_shape(c, in->shape, S);
    gs_instr *w = ls ? gs_build(gs_part_builder(c), GS_OP_WHILE, ls, 1, &init) : NULL;
    if (!w) {
        gs_part_oom(c);
        return false;
    }
    const gs_computation *from[2] = {body, cond};
    gs_computation *to[2] = {pb, pc};
    gs_part_copy_attrs(c, in, w, 2, from, to);
    out->hlo = w;
    out->base = in->shape;
    out->sharding = S;
    out->combiner = GS_OP_ADD;
    return true;
}

bool gs_part_handle_call(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                         gs_part_value *out) {
    const gs_computation *callee = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!callee) callee = gs_instr_comp(in, GS_ATTR_CALLS);
    int n = in->n_operands;
    if (!callee || callee->n_params != n) return false;
    const gs_sharding **sh = GS_NEW_ARRAY(gs_part_arena(c), const gs_sharding *, n + 1);
    gs_instr **ops = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, n + 1);
    if (!sh || !ops) {
        gs_part_oom(c);
        return false;
    }
    for (int k = 0; k < n; k++)
        sh[k] = param_sharding(c, callee->params[k], gs_part_operand(c, in, k));
    if (!reshard_operands(c, in, 0, n, sh, ops)) return false;
    gs_computation *pc = gs_part_partition_called(c, callee, sh, t);
    if (!pc) return false;
    const gs_shape *ls = gs_part_local_shape(c, in->shape, t);
    gs_instr *call = ls ? gs_build(gs_part_builder(c), in->op, ls, n, ops) : NULL;
    if (!call) {
        gs_part_oom(c);
        return false;
    }
    gs_part_copy_attrs(c, in, call, 1, &callee, &pc);
    out->hlo = call;
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return true;
}

bool gs_part_handle_conditional(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                gs_part_value *out) {
    const gs_computation *br[2];
    const gs_computation *const *branches = br;
    int nb;
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_BRANCH_COMPUTATIONS);
    if (a) {
        nb = a->u.comps.n;
        branches = (const gs_computation *const *)a->u.comps.v;
    } else {
        br[0] = gs_instr_comp(in, GS_ATTR_TRUE_COMPUTATION);
        br[1] = gs_instr_comp(in, GS_ATTR_FALSE_COMPUTATION);
        nb = 2;
        if (!br[0] || !br[1]) return false;
    }
    if (nb < 1 || in->n_operands != nb + 1) return false;
    for (int i = 0; i < nb; i++)
        if (!branches[i] || branches[i]->n_params != 1) return false;
    const gs_sharding **sh = GS_NEW_ARRAY(gs_part_arena(c), const gs_sharding *, nb + 2);
    gs_instr **ops = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, nb + 2);
    gs_computation **pb = GS_NEW_ARRAY(gs_part_arena(c), gs_computation *, nb + 1);
    if (!sh || !ops || !pb) {
        gs_part_oom(c);
        return false;
    }
    /* Every device must take the same branch: the selector is replicated (or, in a manual
     * region, each device's own as the program wrote it). */
    sh[0] = gs_part_operand(c, in, 0)->sharding->kind == GS_SHARDING_MANUAL
                ? gs_part_operand(c, in, 0)->sharding
                : gs_part_replicated(c, in->operands[0]->shape);
    for (int i = 0; i < nb; i++) {
        sh[i + 1] = param_sharding(c, branches[i]->params[0], gs_part_operand(c, in, i + 1));
        /* A computation listed twice takes one signature (its copy is shared). */
        for (int j = 0; j < i; j++)
            if (branches[j] == branches[i]) sh[i + 1] = sh[j + 1];
    }
    if (!reshard_operands(c, in, 0, nb + 1, sh, ops)) return false;
    for (int i = 0; i < nb; i++)
        if (!(pb[i] = gs_part_partition_called(c, branches[i], &sh[i + 1], t))) return false;
    const gs_shape *ls = gs_part_local_shape(c, in->shape, t);
    gs_instr *cond = ls ? gs_build(gs_part_builder(c), GS_OP_CONDITIONAL, ls, nb + 1, ops) : NULL;
    if (!cond) {
        gs_part_oom(c);
        return false;
    }
    gs_part_copy_attrs(c, in, cond, nb, branches, pb);
    out->hlo = cond;
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return true;
}

/* ------------------------------------------------------------------ one device's work */

gs_instr *gs_part_zeros(gs_part_ctx *c, const gs_shape *s) {
    gs_builder *b = gs_part_builder(c);
    if (s->type == GS_TUPLE) {
        gs_instr *leaf[64];
        if (s->n_tuple > 64) return NULL;
        for (int i = 0; i < s->n_tuple; i++)
            if (!(leaf[i] = gs_part_zeros(c, s->tuple[i]))) return NULL;
        return gs_build_tuple(b, s->n_tuple, leaf);
    }
    if (!gs_type_is_array(s->type)) return NULL;
    return gs_build_broadcast(b, gs_build_scalar(b, s->type, 0), s->rank, s->dims, 0, NULL);
}

static bool has_token(const gs_shape *s) {
    if (s->type == GS_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (has_token(s->tuple[i])) return true;
        return false;
    }
    return !gs_type_is_array(s->type);
}

/* A branch of the single-device conditional: the operands' tuple as its parameter, and either
 * `in` on them or zeros. */
static gs_computation *single_branch(gs_part_ctx *c, const gs_instr *in, const gs_shape *ps,
                                     bool run) {
    gs_part_emit *e = c->e;
    const char *name = gs_names_fresh(&e->names, &e->m->arena, run ? "on_device" : "elsewhere");
    gs_computation *comp = name ? gs_computation_new(e->m, name) : NULL;
    gs_part_scope *sc = comp ? gs_part_enter_computation(c, comp) : NULL;
    if (!sc) {
        gs_part_oom(c);
        return NULL;
    }
    gs_builder *b = gs_part_builder(c);
    gs_instr *p = gs_build_parameter(b, 0, ps, gs_names_fresh(&e->names, &e->m->arena, "args"));
    gs_instr *r = NULL;
    if (run) {
        gs_instr *ops[64];
        for (int i = 0; i < in->n_operands; i++) ops[i] = gs_build_gte(b, p, i);
        r = gs_part_clone(c, in, in->shape, in->n_operands, ops);
    } else {
        r = gs_part_zeros(c, in->shape);
    }
    if (r) {
        r->is_root = true;
        comp->root = r;
    }
    gs_part_leave_computation(c, sc);
    return r ? comp : NULL;
}

bool gs_part_single_device(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                           gs_part_value *out) {
    if (t->kind != GS_SHARDING_MAXIMAL || in->n_operands > 64 || has_token(in->shape) ||
        c->e->dry)
        return false;
    gs_instr *ops[64];
    gs_shape *shapes[64];
    for (int i = 0; i < in->n_operands; i++) {
        gs_part_value v;
        gs_part_reshard(c, gs_part_operand(c, in, i), t, &v);
        if (!v.hlo || has_token(v.hlo->shape)) return false;
        ops[i] = v.hlo;
        shapes[i] = v.hlo->shape;
    }
    gs_builder *b = gs_part_builder(c);
    gs_shape *ps = gs_shape_tuple(&b->m->arena, in->n_operands, shapes);
    gs_instr *args = ps ? gs_build_tuple(b, in->n_operands, ops) : NULL;
    gs_computation *yes = args ? single_branch(c, in, ps, true) : NULL;
    gs_computation *no = yes ? single_branch(c, in, ps, false) : NULL;
    if (!no) return false;
    b = gs_part_builder(c);
    gs_instr *mine = gs_build_compare(b, gs_part_pid(c), gs_part_s32(c, t->device), "EQ");
    gs_instr *cops[3] = {mine, args, args};
    gs_instr *cond = gs_build(b, GS_OP_CONDITIONAL, in->shape, 3, cops);
    if (!cond) return false;
    gs_build_set_comp(b, cond, GS_ATTR_TRUE_COMPUTATION, yes);
    gs_build_set_comp(b, cond, GS_ATTR_FALSE_COMPUTATION, no);
    out->hlo = cond;
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return true;
}

bool gs_part_handle_rng(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                        gs_part_value *out) {
    /* Every device draws the whole value from replicated operands, and the value is one
     * device's (its own when maximal, else device 0's): the driver's reshard of that maximal
     * value broadcasts it (an all-reduce of it and the others' zeros, then each device's shard
     * cut). So every device holds the same bits even where devices draw different ones (XLA
     * draws a replicated rng on one device), and the bits do not depend on N. Drawing on every
     * device, rather than on the chosen one only, keeps each device's stream of draws the
     * reference's: a later rng that every device draws itself (manual, tuple-shaped) then
     * draws what the reference does on every device (fuzz_pipeline found the divergence). */
    if (c->manual || t->kind == GS_SHARDING_MANUAL || !gs_type_is_array(in->shape->type) ||
        in->n_operands > 64)
        return false;
    const gs_sharding *rep = gs_sharding_replicated(gs_part_arena(c));
    const gs_sharding *one =
        gs_sharding_maximal(gs_part_arena(c), t->kind == GS_SHARDING_MAXIMAL ? t->device : 0);
    if (!rep || !one) {
        gs_part_oom(c);
        return false;
    }
    gs_instr *ops[64];
    for (int i = 0; i < in->n_operands; i++) {
        gs_part_value v;
        gs_part_reshard(c, gs_part_operand(c, in, i), rep, &v);
        ops[i] = v.hlo;
    }
    out->hlo = c->e->dry ? NULL : gs_part_clone(c, in, in->shape, in->n_operands, ops);
    out->base = in->shape;
    out->sharding = one;
    out->combiner = GS_OP_ADD;
    return true;
}

/* ------------------------------------------------------------------ infeed */

/* Whether a device reads its own tile of leaf shape s under leaf sharding ls: a tiled sharding
 * (replicated subgroups allowed, not partial ones) that splits every dim evenly. */
static bool reads_tile(const gs_shape *s, const gs_sharding *ls) {
    if (!gs_type_is_array(s->type) || ls->kind != GS_SHARDING_TILED || ls->data_rank != s->rank)
        return false;
    for (int i = ls->data_rank; i < ls->tiles.rank; i++)
        if (ls->subgroups[i - ls->data_rank] != GS_SUBGROUP_REPLICATED) return false;
    for (int k = 0; k < s->rank; k++)
        if (s->dims[k] % ls->tiles.dims[k] != 0) return false;
    return true;
}

/* The shape a device reads of subtree s of the infeed (its leaves from *leaf on, depth first,
 * tokens counted), each leaf's device sharding into dev[]. NULL: out of memory. */
static gs_shape *read_shape(gs_part_ctx *c, const gs_shape *s, const gs_shape *whole,
                            const gs_sharding *t, int *leaf, gs_sharding **dev) {
    gs_arena *pa = gs_part_arena(c); /* the builder copies the shape into the output */
    if (s->type == GS_TUPLE) {
        gs_shape **elems = GS_NEW_ARRAY(pa, gs_shape *, s->n_tuple + 1);
        for (int i = 0; elems && i < s->n_tuple; i++)
            if (!(elems[i] = read_shape(c, s->tuple[i], whole, t, leaf, dev))) return NULL;
        return elems ? gs_shape_tuple(pa, s->n_tuple, elems) : NULL;
    }
    int l = (*leaf)++;
    const gs_sharding *ls = gs_sharding_leaf(t, whole, l);
    if (reads_tile(s, ls)) {
        dev[l] = (gs_sharding *)ls;
        return gs_part_local_shape(c, s, ls);
    }
    dev[l] = ls->kind == GS_SHARDING_MANUAL ? gs_sharding_manual(pa) : gs_sharding_replicated(pa);
    return dev[l] ? (gs_shape *)s : NULL;
}

/* Sets sharding ds (in the partitioner's arena) on output instruction x: a copy in the output
 * module's arena, which outlives the partitioner's. */
static bool mark_feed(gs_part_ctx *c, gs_instr *x, const gs_sharding *ds) {
    gs_module *m = gs_part_builder(c)->m;
    const char *text = gs_sharding_to_string(gs_part_arena(c), ds);
    gs_sharding *copy = NULL;
    gs_diags quiet = {0};
    bool ok = text && gs_sharding_parse(&m->arena, text, strlen(text), &copy, &quiet,
                                        gs_span_none()) == GS_OK &&
              gs_instr_set_sharding(m, x, copy) == GS_OK;
    gs_diags_free(&quiet);
    return ok;
}

bool gs_part_handle_infeed(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                           gs_part_value *out) {
    /* XLA's HandleInfeed: each device reads the part of the fed value its sharding gives it: a
     * leaf split evenly, its tile; a manual leaf, its own values; any other leaf (replicated,
     * maximal, split unevenly, partial) the whole value. The new infeed carries, as its
     * sharding, what each leaf is on a device: that is how a run feeds it (interp/infeed.c). */
    if (c->manual || in->n_operands != 1) return false;
    int n = gs_shape_n_leaves(in->shape), leaf = 0;
    gs_sharding **dev = GS_NEW_ARRAY(gs_part_arena(c), gs_sharding *, n + 1);
    gs_shape *s = dev ? read_shape(c, in->shape, in->shape, t, &leaf, dev) : NULL;
    const gs_sharding *ds = s && leaf == n ? gs_sharding_tuple(gs_part_arena(c), n, dev) : NULL;
    if (!ds) {
        gs_part_oom(c);
        return false;
    }
    gs_instr *token = gs_part_operand(c, in, 0)->hlo;
    out->hlo = c->e->dry ? NULL : gs_part_clone(c, in, s, 1, &token);
    if (out->hlo && !mark_feed(c, out->hlo, ds)) gs_part_oom(c);
    out->base = in->shape;
    out->sharding = ds;
    out->combiner = GS_OP_ADD;
    return true;
}
