/*
 * interp.c — the reference interpreter's driver: evaluation order, value lifetimes, calls,
 * control flow (while, conditional, call, async wrappers) and structural ops (parameter,
 * constant, tuple, get-tuple-element, copy-like ops, tokens, device ids, collectives on one
 * device). Everything else dispatches to the kernel files through kernels.h.
 *
 * Each computation is evaluated in a post-order from its root (what XLA's evaluator visits);
 * a value is released right after its last use, so memory stays near the live set.
 */
#include "kernels.h"
#include "base/sysalloc.h"
#include "interp/fusion.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { GS_MAX_CALL_DEPTH = 256 };

/* ------------------------------------------------------------------ errors */

static gs_status verror_at(gs_eval *ev, const gs_instr *in, const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const char *label = ev->env && ev->env->device_label ? ev->env->device_label : NULL;
    return gs_error(ev->d, in->span, "%s%s%s %s: %s", label ? label : "", label ? ": " : "",
                    gs_op_name(in->op), in->name, msg);
}

gs_status gs_eval_error(gs_eval *ev, const gs_instr *in, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verror_at(ev, in, fmt, ap);
    va_end(ap);
    return GS_ERR;
}

gs_status gs_eval_oom(gs_eval *ev, const gs_instr *in) { return gs_eval_error(ev, in, "out of memory"); }

gs_value *gs_eval_new_result(gs_eval *ev, const gs_instr *in) {
    gs_value *v = gs_value_new_array(in->shape->type, in->shape->rank, in->shape->dims);
    if (!v) gs_eval_oom(ev, in);
    return v;
}

gs_value *gs_eval_new_result_in_place(gs_eval *ev, const gs_instr *in) {
    gs_value *d = ev->donor;
    ev->donor = NULL;
    if (d && gs_value_matches(d, in->shape)) return gs_value_ref(d);
    /* The caller overwrites every element: a spare of the same size serves, unzeroed. */
    const gs_shape *s = in->shape;
    if (s && gs_type_is_array(s->type) && s->rank <= GS_MAX_RANK) {
        size_t bytes = (size_t)gs_shape_elements(s) * (size_t)gs_type_size(s->type);
        for (int k = 0; k < GS_EVAL_SPARES; k++) {
            gs_value *v = ev->spares[k];
            if (!v || (size_t)v->n * (size_t)gs_type_size(v->type) != bytes) continue;
            ev->spares[k] = NULL;
            v->type = s->type;
            v->rank = s->rank;
            for (int i = 0; i < s->rank; i++) v->dims[i] = s->dims[i];
            v->n = gs_shape_elements(s);
            return v;
        }
    }
    return gs_eval_new_result(ev, in);
}

void gs_eval_release(gs_eval *ev, gs_value *v) {
    if (!v) return;
    if (gs_value_refs(v) != 1 || v->type == GS_TUPLE || v->type == GS_TOKEN || v->devices > 0 ||
        (size_t)v->n * (size_t)gs_type_size(v->type) < GS_EVAL_SPARE_MIN_BYTES) {
        gs_value_free(v);
        return;
    }
    int slot = 0; /* an empty slot, else the oldest (slot 0) makes room */
    for (int k = 0; k < GS_EVAL_SPARES; k++)
        if (!ev->spares[k]) {
            slot = k;
            break;
        }
    if (ev->spares[slot]) {
        gs_value_free(ev->spares[0]);
        memmove(ev->spares, ev->spares + 1, sizeof ev->spares[0] * (GS_EVAL_SPARES - 1));
        slot = GS_EVAL_SPARES - 1;
    }
    ev->spares[slot] = v;
}

void gs_eval_free_spares(gs_eval *ev) {
    for (int k = 0; k < GS_EVAL_SPARES; k++) {
        gs_value_free(ev->spares[k]);
        ev->spares[k] = NULL;
    }
}

/* ------------------------------------------------------------------ index helpers */

void gs_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

bool gs_index_next(int rank, const int64_t *dims, int64_t *idx) {
    for (int i = rank - 1; i >= 0; i--) {
        if (++idx[i] < dims[i]) return true;
        idx[i] = 0;
    }
    return false;
}

/* ------------------------------------------------------------------ evaluation order */

/* Post-order of the instructions reachable from c's root. *order is malloc'd. */
/* Moves each asynchronous -done in order[0..n) to just before its first user (XLA's latency
 * hiding, simply): what is computed between a start and its done then runs while the runtime's
 * helper carries the collective (src/runtime/async.c). The other instructions keep their order
 * (rng draws too); mark is scratch of one byte per instruction. */
static void defer_dones(const gs_instr **order, int n, unsigned char *mark) {
    int held = 0;
    for (int i = 0; i < n; i++) {
        mark[order[i]->id] = 0;
        held += (gs_op_info_of(order[i]->op)->flags & GS_OPF_ASYNC_DONE) != 0;
    }
    if (held == 0) return;
    const gs_instr **done = gs_sys_malloc(sizeof *done * (size_t)held);
    const gs_instr **copy = gs_sys_malloc(sizeof *copy * (size_t)n);
    if (!done || !copy) { /* keep the plain order */
        free(done);
        free(copy);
        return;
    }
    memcpy(copy, order, sizeof *copy * (size_t)n);
    int k = 0, nd = 0;
    for (int i = 0; i < n; i++) {
        const gs_instr *in = copy[i];
        if (gs_op_info_of(in->op)->flags & GS_OPF_ASYNC_DONE) {
            done[nd++] = in;
            mark[in->id] = 1; /* held */
            continue;
        }
        for (int j = 0; j < in->n_operands; j++) { /* the held dones it needs, now */
            const gs_instr *o = in->operands[j];
            if (mark[o->id] != 1) continue;
            order[k++] = o;
            mark[o->id] = 2;
        }
        order[k++] = in;
    }
    for (int q = 0; q < nd; q++) /* none is left unless nothing uses it */
        if (mark[done[q]->id] == 1) order[k++] = done[q];
    free(done);
    free(copy);
}

static gs_status plan_order(gs_eval *ev, const gs_computation *c, const gs_instr ***order, int *n) {
    int N = c->n_instrs;
    const gs_instr **out = gs_sys_malloc(sizeof *out * (size_t)(N ? N : 1));
    unsigned char *state = gs_sys_calloc((size_t)(N ? N : 1), 1); /* 0 new, 1 on stack, 2 done */
    const gs_instr **stack = gs_sys_malloc(sizeof *stack * (size_t)(N ? N : 1));
    int *next_op = gs_sys_calloc((size_t)(N ? N : 1), sizeof(int));
    if (!out || !state || !stack || !next_op) {
        free(out);
        free(state);
        free(stack);
        free(next_op);
        return gs_eval_oom(ev, c->root);
    }
    int k = 0, sp = 0;
    gs_status st = GS_OK;
    /* Side-effecting custom-calls (checks) run even when the root does not use them, as in
     * XLA; then everything the root needs. */
    for (int seed = 0; seed <= N && st == GS_OK; seed++) {
        const gs_instr *s = seed < N ? c->instrs[seed] : c->root;
        if (seed < N && (s->op != GS_OP_CUSTOM_CALL ||
                         !gs_instr_bool(s, GS_ATTR_CUSTOM_CALL_HAS_SIDE_EFFECT, false)))
            continue;
        if (state[s->id] != 0) continue;
        stack[sp++] = s;
        state[s->id] = 1;
        while (sp > 0 && st == GS_OK) {
            const gs_instr *in = stack[sp - 1];
            if (next_op[in->id] < in->n_operands) {
                const gs_instr *o = in->operands[next_op[in->id]++];
                if (state[o->id] == 1) {
                    st = gs_eval_error(ev, in, "operand '%s' depends on itself (a cycle)", o->name);
                } else if (state[o->id] == 0) {
                    state[o->id] = 1;
                    stack[sp++] = o;
                }
            } else {
                state[in->id] = 2;
                out[k++] = in;
                sp--;
            }
        }
    }
    free(stack);
    free(next_op);
    if (st != GS_OK) {
        free(state);
        free(out);
        return st;
    }
    defer_dones(out, k, state);
    free(state);
    *order = out;
    *n = k;
    return GS_OK;
}

/* ------------------------------------------------------------------ structural ops */

static gs_status literal_to_value(gs_eval *ev, const gs_instr *in, const gs_shape *s,
                                  const gs_literal_ir *lit, gs_value **out) {
    if (s->type == GS_TUPLE) {
        gs_value **elems = gs_sys_calloc((size_t)(s->n_tuple ? s->n_tuple : 1), sizeof *elems);
        if (!elems) return gs_eval_oom(ev, in);
        for (int i = 0; i < s->n_tuple; i++) {
            if (literal_to_value(ev, in, s->tuple[i], lit->tuple[i], &elems[i]) != GS_OK) {
                for (int j = 0; j < i; j++) gs_value_free(elems[j]);
                free(elems);
                return GS_ERR;
            }
        }
        *out = gs_value_new_tuple(s->n_tuple, elems);
        free(elems);
        return *out ? GS_OK : gs_eval_oom(ev, in);
    }
    if (lit->elided)
        return gs_eval_error(ev, in, "the constant's value was elided ({...}); it cannot be "
                                     "evaluated (--fill-elided gives it seeded random values)");
    gs_value *v = gs_value_new_array(s->type, s->rank, s->dims);
    if (!v) return gs_eval_oom(ev, in);
    memcpy(v->data, lit->data, gs_value_bytes(v));
    *out = v;
    return GS_OK;
}

static gs_status k_tuple(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    gs_value **elems = gs_sys_calloc((size_t)(in->n_operands ? in->n_operands : 1), sizeof *elems);
    if (!elems) return gs_eval_oom(ev, in);
    for (int i = 0; i < in->n_operands; i++) elems[i] = gs_value_ref(ops[i]);
    *out = gs_value_new_tuple(in->n_operands, elems);
    free(elems);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

static gs_status k_get_tuple_element(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                     gs_value **out) {
    int64_t idx = gs_instr_int(in, GS_ATTR_INDEX, -1);
    if (ops[0]->type != GS_TUPLE || idx < 0 || idx >= ops[0]->n_tuple)
        return gs_eval_error(ev, in, "tuple index %lld is out of range", (long long)idx);
    *out = gs_value_ref(ops[0]->tuple[idx]);
    return GS_OK;
}

/* copy, opt-barrier, domain, add-dependency: the (first) operand itself (values are immutable).
 * A copy whose result type differs from its operand's converts (XLA's evaluator does). */
static gs_status k_identity(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0];
    if (in->op == GS_OP_COPY && gs_type_is_array(a->type) && in->shape->type != a->type) {
        gs_value *r = gs_eval_new_result(ev, in);
        if (!r) return GS_ERR;
        for (int64_t i = 0; i < a->n && i < r->n; i++)
            gs_scalar_convert(a->type, a->data, i, r->type, r->data, i);
        *out = r;
        return GS_OK;
    }
    *out = gs_value_ref(ops[0]);
    return GS_OK;
}

static gs_status k_call(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_computation *c = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!c) c = gs_instr_comp(in, GS_ATTR_CALLS);
    if (!c) return gs_eval_error(ev, in, "no computation to call");
    return gs_eval_call(ev, c, ops, in->n_operands, out);
}

static gs_status k_while(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_computation *cond = gs_instr_comp(in, GS_ATTR_CONDITION);
    const gs_computation *body = gs_instr_comp(in, GS_ATTR_BODY);
    if (!cond || !body) return gs_eval_error(ev, in, "while needs condition= and body=");
    gs_value *state = gs_value_ref(ops[0]);
    for (;;) {
        gs_value *p;
        if (gs_eval_call(ev, cond, &state, 1, &p) != GS_OK) {
            gs_value_free(state);
            return GS_ERR;
        }
        bool go = false;
        gs_status st = gs_eval_predicate(ev, in, p, &go);
        gs_value_free(p);
        if (st != GS_OK) {
            gs_value_free(state);
            return st;
        }
        if (!go) break;
        gs_value *next;
        if (gs_eval_call(ev, body, &state, 1, &next) != GS_OK) {
            gs_value_free(state);
            return GS_ERR;
        }
        gs_value_free(state);
        state = next;
    }
    *out = state;
    return GS_OK;
}

gs_status gs_eval_branch(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                         const gs_computation **branch_out, int *operand) {
    const gs_computation *branch;
    const gs_value *sel = ops[0];
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_BRANCH_COMPUTATIONS);
    int bi = 0;
    if (sel->type == GS_PRED) {
        bool b = ((unsigned char *)sel->data)[0] != 0;
        bi = b ? 0 : 1;
        branch = gs_instr_comp(in, b ? GS_ATTR_TRUE_COMPUTATION : GS_ATTR_FALSE_COMPUTATION);
        /* The branch_computations form with a pred selector: {true, false}. */
        if (!branch && a && a->u.comps.n == 2) branch = a->u.comps.v[bi];
    } else {
        if (!a || a->u.comps.n == 0) return gs_eval_error(ev, in, "no branch_computations");
        int64_t idx = gs_elem_get_i(sel->data, sel->type, 0);
        /* XLA: an out-of-range index runs the last branch. */
        if (idx < 0 || idx >= a->u.comps.n) idx = a->u.comps.n - 1;
        bi = (int)idx;
        branch = a->u.comps.v[idx];
    }
    if (!branch) return gs_eval_error(ev, in, "missing branch computation");
    /* Operand i+1 is the argument of branch i. */
    if (1 + bi >= in->n_operands) return gs_eval_error(ev, in, "branch %d has no operand", bi);
    *branch_out = branch;
    *operand = 1 + bi;
    return GS_OK;
}

static gs_status k_conditional(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_computation *branch;
    int k;
    if (gs_eval_branch(ev, in, ops, &branch, &k) != GS_OK) return GS_ERR;
    return gs_eval_call(ev, branch, &ops[k], branch->n_params, out);
}

/* after-all and outfeed: a token (an outfeed's data goes nowhere). */
static gs_status k_token(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    *out = gs_value_new_token();
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

static gs_status k_device_id(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    gs_value *v = gs_eval_new_result(ev, in);
    if (!v) return GS_ERR;
    int64_t id = in->op == GS_OP_PARTITION_ID ? ev->env->partition_id : ev->env->replica_id;
    gs_elem_set_i(v->data, v->type, 0, id);
    *out = v;
    return GS_OK;
}

/* A collective outside any manual region, in the reference of a program for N devices: the
 * partitioned program runs it on every device's copy of the whole value (XLA's partitioner
 * replicates its operands), so the reference runs it on N copies by the runtime's own code. The
 * devices must then agree, as the result is one value; else an error says that its sharding
 * cannot hold what it computes. */
static gs_status replicated_collective(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                       gs_value **out) {
    const gs_collectives *c = ev->env->collectives;
    int n = (int)ev->env->manual_devices;
    gs_value *b = NULL;
    if (c->execute_bundle(c->ctx, in, ops, in->n_operands, n, &b, ev->d) != GS_OK || !b)
        return GS_ERR;
    bool same = b->n_tuple == n && n > 0;
    for (int d = 1; same && d < n; d++) same = gs_value_same_bits(b->tuple[0], b->tuple[d]);
    if (!same) {
        gs_value_free(b);
        return gs_eval_error(ev, in,
                             "outside a manual region this collective gives the %d devices "
                             "different values, which no sharding of one value holds (put it in "
                             "a manual region)",
                             n);
    }
    *out = gs_value_ref(b->tuple[0]);
    gs_value_free(b);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

/* Collectives: through the runtime's hooks, or XLA's single-device semantics. */
static gs_status k_collective(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    if (ev->env->collectives && ev->env->collectives->execute)
        return ev->env->collectives->execute(ev->env->collectives->ctx, in, ops, in->n_operands,
                                             out, ev->d);
    if (ev->env->num_partitions > 1 || ev->m->replica_count > 1)
        return gs_eval_error(ev, in, "collectives need the multi-device runtime (gspmd run)");
    const gs_collectives *hooks = ev->env->collectives;
    if (ev->env->manual_devices > 1 && hooks && hooks->execute_bundle)
        return replicated_collective(ev, in, ops, out);
    /* One device: every group is {0}; all-reduce, all-gather, all-to-all, reduce-scatter and
     * collective-broadcast return their operands; collective-permute returns the operand when
     * some pair is {0,0}, else zeros. */
    gs_opcode op = in->op;
    if (op == GS_OP_COLLECTIVE_PERMUTE || op == GS_OP_COLLECTIVE_PERMUTE_START) {
        const gs_attr *a = gs_instr_attr(in, GS_ATTR_SOURCE_TARGET_PAIRS);
        bool self = false;
        for (int i = 0; a && i < a->u.pairs.n; i++) self |= a->u.pairs.v[i][0] == 0 && a->u.pairs.v[i][1] == 0;
        gs_value *r = self ? gs_value_ref(ops[0]) : gs_value_copy(ops[0]);
        if (!r) return gs_eval_oom(ev, in);
        if (!self && r->type != GS_TUPLE) memset(r->data, 0, gs_value_bytes(r));
        *out = r;
    } else if (in->n_operands == 1) {
        *out = gs_value_ref(ops[0]);
    } else {
        return k_tuple(ev, in, ops, out);
    }
    return GS_OK;
}

/* Async wrappers run their work at -start and hand it over at -done. The start's value is
 * ((operands), result, context) as XLA shapes it; -update passes it through. */
static gs_status k_async(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_op_info *info = gs_op_info_of(in->op);
    if (info->flags & GS_OPF_ASYNC_DONE) {
        const gs_value *s = ops[0];
        if (s->type != GS_TUPLE || s->n_tuple < 2)
            return gs_eval_error(ev, in, "operand is not an asynchronous start's value");
        *out = gs_value_ref(s->tuple[1]);
        return GS_OK;
    }
    if (in->op == GS_OP_ASYNC_UPDATE) {
        *out = gs_value_ref(ops[0]);
        return GS_OK;
    }
    /* A start: compute the wrapped result now. */
    gs_value *result = NULL;
    gs_status st;
    if (in->op == GS_OP_COPY_START) {
        result = gs_value_ref(ops[0]);
        st = GS_OK;
    } else {
        const gs_computation *c = gs_instr_comp(in, GS_ATTR_CALLS);
        if (!c) c = gs_instr_comp(in, GS_ATTR_TO_APPLY);
        if (c) {
            st = gs_eval_call(ev, c, ops, in->n_operands, &result);
        } else if (in->op_text) {
            /* `negate-start(x)`: the wrapped op is the one the spelling names, with this
             * instruction's attributes; its result is element {1} of our shape. */
            size_t n = strlen(in->op_text) - strlen("-start");
            int wop = gs_op_from_name(in->op_text, n);
            if (wop < 0 || in->shape->type != GS_TUPLE || in->shape->n_tuple < 2)
                return gs_eval_error(ev, in, "cannot run the wrapped op of %s", in->op_text);
            gs_instr tmp = *in;
            tmp.op = (gs_opcode)wop;
            tmp.op_text = NULL;
            tmp.shape = in->shape->tuple[1];
            st = gs_eval_instr(ev, &tmp, ops, &result);
        } else {
            return gs_eval_error(ev, in, "asynchronous start without a computation");
        }
    }
    if (st != GS_OK) return st;
    /* Assemble the start's value in its declared shape: element 0 holds the operands (a tuple
     * of them, or the single operand for copy-start), element 1 the result, later elements
     * (contexts) zeros. */
    const gs_shape *ds = in->shape;
    if (ds->type != GS_TUPLE || ds->n_tuple < 2) {
        gs_value_free(result);
        return gs_eval_error(ev, in, "an asynchronous start must have a tuple shape (operands, result, ...)");
    }
    gs_value **parts = gs_sys_calloc((size_t)ds->n_tuple, sizeof *parts);
    if (!parts) {
        gs_value_free(result);
        return gs_eval_oom(ev, in);
    }
    st = GS_OK;
    if (ds->tuple[0]->type == GS_TUPLE) {
        gs_value **elems = gs_sys_malloc(sizeof *elems * (size_t)(in->n_operands + 1));
        if (elems) {
            for (int i = 0; i < in->n_operands; i++) elems[i] = gs_value_ref(ops[i]);
            parts[0] = gs_value_new_tuple(in->n_operands, elems);
            free(elems);
        }
    } else if (in->n_operands == 1) {
        parts[0] = gs_value_ref(ops[0]);
    }
    parts[1] = result;
    for (int i = 2; i < ds->n_tuple; i++) parts[i] = gs_value_from_shape(ds->tuple[i]);
    for (int i = 0; i < ds->n_tuple; i++)
        if (!parts[i]) st = GS_ERR;
    if (st != GS_OK) {
        for (int i = 0; i < ds->n_tuple; i++) gs_value_free(parts[i]);
        free(parts);
        return gs_eval_error(ev, in, "cannot assemble the asynchronous start's value");
    }
    *out = gs_value_new_tuple(ds->n_tuple, parts);
    free(parts);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

/* Copies x into r along dim: r's position j (of m) takes x's position (j + shift) mod n. */
static void copy_circular(const gs_value *x, gs_value *r, int64_t dim, int64_t shift) {
    int64_t n = x->dims[dim], m = r->dims[dim], outer = 1, row = gs_type_size(x->type);
    for (int i = 0; i < dim; i++) outer *= x->dims[i];
    for (int i = (int)dim + 1; i < x->rank; i++) row *= x->dims[i];
    int64_t base = n > 0 ? ((shift % n) + n) % n : 0;
    for (int64_t o = 0; n > 0 && o < outer; o++)
        for (int64_t j = 0; j < m; j++)
            memcpy((char *)r->data + (o * m + j) * row,
                   (const char *)x->data + (o * n + (j + base) % n) * row, (size_t)row);
}

/* XLA's partitioner-internal rotate: out[.., i, ..] = in[.., (i - amount) mod n, ..] along
 * `dimension` (backend_config "dimension=D,amount=A", A >= 0). */
static gs_status eval_rotate_right(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                   gs_value **out) {
    const gs_value *x = ops[0];
    int64_t dim, amount;
    if (!gs_instr_config_int(in, "dimension", &dim) || !gs_instr_config_int(in, "amount", &amount))
        return gs_eval_error(ev, in, "_SPMDInternalOp_RotateRight needs backend_config "
                                     "\"dimension=D,amount=A\"");
    if (x->type == GS_TUPLE || dim < 0 || dim >= x->rank || amount < 0)
        return gs_eval_error(ev, in, "rotate: dimension %lld or amount %lld out of range",
                             (long long)dim, (long long)amount);
    gs_value *r = gs_value_new_array(x->type, x->rank, x->dims);
    if (!r) return gs_eval_oom(ev, in);
    copy_circular(x, r, dim, x->dims[dim] > 0 ? -(amount % x->dims[dim]) : 0);
    *out = r;
    return GS_OK;
}

/* XLA's partitioner-internal multi-rotate and wrap (backend_config
 * "dimension=D,left_amount=L,right_amount=R"; XLA defines them by how its partitioner splits
 * them): multi-rotate gives L + R + 1 results, result i the operand rotated left by L - i
 * (out[j] = x[(j + L - i) mod n]); wrap pads circularly, out[j] = x[(j - L) mod n] for j in
 * [0, n + L + R). */
static gs_status eval_rotate_family(gs_eval *ev, const gs_instr *in, const char *target,
                                    gs_value *const *ops, gs_value **out) {
    bool wrap = strcmp(target, "_SPMDInternalOp_Wrap") == 0;
    const gs_value *x = ops[0];
    int64_t dim, la, ra;
    if (!gs_instr_config_int(in, "dimension", &dim) ||
        !gs_instr_config_int(in, "left_amount", &la) ||
        !gs_instr_config_int(in, "right_amount", &ra))
        return gs_eval_error(ev, in, "%s needs backend_config "
                                     "\"dimension=D,left_amount=L,right_amount=R\"",
                             target);
    const gs_shape *s = in->shape;
    bool ok = x->type != GS_TUPLE && dim >= 0 && dim < x->rank && la >= 0 && ra >= 0 &&
              la < 1024 && ra < 1024 && x->dims[dim] > 0;
    if (ok && wrap) {
        ok = gs_shape_is_array(s) && s->type == x->type && s->rank == x->rank;
        for (int d = 0; ok && d < x->rank; d++)
            ok = s->dims[d] == x->dims[d] + (d == dim ? la + ra : 0);
    } else if (ok) {
        ok = s->type == GS_TUPLE && s->n_tuple == la + ra + 1;
        for (int i = 0; ok && i < s->n_tuple; i++)
            ok = s->tuple[i]->type == x->type && s->tuple[i]->rank == x->rank &&
                 memcmp(s->tuple[i]->dims, x->dims, sizeof x->dims[0] * (size_t)x->rank) == 0;
    }
    if (!ok)
        return gs_eval_error(ev, in, "%s: dimension %lld or amounts %lld, %lld do not fit its "
                                     "operand and result shapes",
                             target, (long long)dim, (long long)la, (long long)ra);
    if (wrap) {
        gs_value *r = gs_value_new_array(x->type, x->rank, s->dims);
        if (!r) return gs_eval_oom(ev, in);
        copy_circular(x, r, dim, -la);
        *out = r;
        return GS_OK;
    }
    int n = s->n_tuple;
    gs_value **parts = calloc((size_t)n, sizeof *parts);
    if (!parts) return gs_eval_oom(ev, in);
    gs_status st = GS_OK;
    for (int i = 0; i < n && st == GS_OK; i++) {
        parts[i] = gs_value_new_array(x->type, x->rank, x->dims);
        if (!parts[i]) st = gs_eval_oom(ev, in);
        else copy_circular(x, parts[i], dim, la - i);
    }
    if (st != GS_OK) {
        for (int i = 0; i < n; i++) gs_value_free(parts[i]);
        free(parts);
        return st;
    }
    *out = gs_value_new_tuple(n, parts); /* frees the parts when it fails */
    free(parts);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

/* XLA's partitioner-internal multi-pad: (x, scalar p) with backend_config
 * "dimension=D,amt=A,..." gives A + 1 arrays, result i = x padded with p by A - i before and i
 * after along D. */
static gs_status eval_multi_pad(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                gs_value **out) {
    const gs_value *x = ops[0], *p = ops[1];
    int64_t dim, amt;
    if (!gs_instr_config_int(in, "dimension", &dim) || !gs_instr_config_int(in, "amt", &amt))
        return gs_eval_error(ev, in, "_SPMDInternalOp_MultiPad needs backend_config "
                                     "\"dimension=D,amt=A\"");
    const gs_shape *s = in->shape;
    bool ok = x->type != GS_TUPLE && p->type == x->type && p->rank == 0 && dim >= 0 &&
              dim < x->rank && amt >= 0 && amt < 1024 && s->type == GS_TUPLE &&
              s->n_tuple == amt + 1;
    for (int i = 0; ok && i <= amt; i++) {
        const gs_shape *r = s->tuple[i];
        ok = r->type == x->type && r->rank == x->rank;
        for (int d = 0; ok && d < x->rank; d++)
            ok = r->dims[d] == x->dims[d] + (d == dim ? amt : 0);
    }
    if (!ok)
        return gs_eval_error(ev, in, "multi-pad: the results must be %lld + 1 arrays of the "
                                     "operand's shape grown by %lld along dimension %lld",
                             (long long)amt, (long long)amt, (long long)dim);
    int64_t n = x->dims[dim], outer = 1, inner = 1, es = gs_type_size(x->type);
    for (int d = 0; d < dim; d++) outer *= x->dims[d];
    for (int d = (int)dim + 1; d < x->rank; d++) inner *= x->dims[d];
    gs_value **parts = calloc((size_t)amt + 1, sizeof *parts);
    if (!parts) return gs_eval_oom(ev, in);
    gs_status st = GS_OK;
    for (int64_t i = 0; i <= amt && st == GS_OK; i++) {
        gs_value *r = gs_value_new_array(x->type, x->rank, s->tuple[i]->dims);
        if (!r) {
            st = gs_eval_oom(ev, in);
            break;
        }
        for (int64_t e = 0; e < r->n; e++)
            memcpy((char *)r->data + e * es, p->data, (size_t)es);
        int64_t m = n + amt, row = inner * es;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)r->data + (o * m + (amt - i)) * row, (const char *)x->data + o * n * row,
                   (size_t)(n * row));
        parts[i] = r;
    }
    if (st != GS_OK) {
        for (int64_t i = 0; i <= amt; i++) gs_value_free(parts[i]);
        free(parts);
        return st;
    }
    *out = gs_value_new_tuple((int)amt + 1, parts); /* frees the parts when it fails */
    free(parts);
    return *out ? GS_OK : gs_eval_oom(ev, in);
}

/* XLA's 64-bit emulation: X64Combine(low, high) puts two 32-bit values' bits side by side into
 * one 64-bit value (high << 32 | low); X64SplitLow / X64SplitHigh take them apart. */
static gs_status eval_x64(gs_eval *ev, const gs_instr *in, const char *target,
                          gs_value *const *ops, gs_value **out) {
    bool combine = strcmp(target, "X64Combine") == 0;
    const gs_shape *s = in->shape;
    int want_ops = combine ? 2 : 1, in_size = combine ? 4 : 8, out_size = combine ? 8 : 4;
    bool ok = in->n_operands == want_ops && gs_shape_is_array(s) &&
              gs_type_size(s->type) == out_size && !gs_type_is_complex(s->type);
    for (int i = 0; ok && i < want_ops; i++)
        ok = ops[i]->type != GS_TUPLE && gs_type_size(ops[i]->type) == in_size &&
             ops[i]->n == gs_shape_elements(s) && ops[i]->rank == s->rank &&
             !gs_type_is_complex(ops[i]->type);
    if (!ok)
        return gs_eval_error(ev, in, "%s takes %s and gives %s of the same shape", target,
                             combine ? "two 32-bit arrays" : "a 64-bit array",
                             combine ? "a 64-bit one" : "a 32-bit one");
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return gs_eval_oom(ev, in);
    for (int64_t i = 0; i < r->n; i++) {
        if (combine) {
            uint32_t lo, hi;
            memcpy(&lo, (const char *)ops[0]->data + 4 * i, 4);
            memcpy(&hi, (const char *)ops[1]->data + 4 * i, 4);
            uint64_t v = (uint64_t)hi << 32 | lo;
            memcpy((char *)r->data + 8 * i, &v, 8);
        } else {
            uint64_t v;
            memcpy(&v, (const char *)ops[0]->data + 8 * i, 8);
            uint32_t half = strcmp(target, "X64SplitHigh") == 0 ? (uint32_t)(v >> 32) : (uint32_t)v;
            memcpy((char *)r->data + 4 * i, &half, 4);
        }
    }
    *out = r;
    return GS_OK;
}

static gs_status k_custom_call(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const char *target = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
    if (!target) target = "";
    /* A propagation hint with no result, and XLA's debug log (jax.debug.log: its values go to
     * a host callback, which a run here has none of; the program goes on as if logged). */
    if ((strcmp(target, "xla.sdy.ShardingGroup") == 0 || strcmp(target, "xla.debug.Log") == 0) &&
        gs_shape_is_tuple(in->shape) && in->shape->n_tuple == 0) {
        *out = gs_value_new_tuple(0, NULL);
        return *out ? GS_OK : gs_eval_oom(ev, in);
    }
    if (strcmp(target, "Sharding") == 0 || strcmp(target, "SPMDFullToShardShape") == 0 ||
        strcmp(target, "SPMDShardToFullShape") == 0 || strncmp(target, "xla.sdy.", 8) == 0 ||
        strcmp(target, "sdy.data_flow_edge") == 0 || strcmp(target, "sdy.func_data_flow_edge") == 0 ||
        strcmp(target, "sdy.propagation_barrier") == 0 || strcmp(target, "sdy.reshard") == 0 ||
        strcmp(target, "ShardBarrierFrom") == 0 || strcmp(target, "ShardBarrierTo") == 0 ||
        strcmp(target, "LayoutConstraint") == 0 ||
        strcmp(target, "MoveToHost") == 0 || strcmp(target, "MoveToDevice") == 0 ||
        strcmp(target, "annotate_device_placement") == 0 || strcmp(target, "PinToDevice") == 0) {
        if (in->n_operands < 1) return gs_eval_error(ev, in, "custom-call %s needs an operand", target);
        if (in->n_operands == 1) {
            *out = gs_value_ref(ops[0]);
            return GS_OK;
        }
        return k_tuple(ev, in, ops, out);
    }
    if (strcmp(target, "X64Combine") == 0 || strcmp(target, "X64SplitLow") == 0 ||
        strcmp(target, "X64SplitHigh") == 0)
        return eval_x64(ev, in, target, ops, out);
    if (strncmp(target, "check.", 6) == 0) return gs_eval_check(ev, in, ops, out);
    if (strcmp(target, "TopK") == 0 && in->n_operands == 1) return gs_eval_topk(ev, in, ops, out);
    if (strcmp(target, "__op$block_scaled_dot") == 0) return gs_eval_block_scaled_dot(ev, in, ops, out);
    if (strcmp(target, "_SPMDInternalOp_RotateRight") == 0 && in->n_operands == 1)
        return eval_rotate_right(ev, in, ops, out);
    if (strcmp(target, "_SPMDInternalOp_MultiPad") == 0 && in->n_operands == 2)
        return eval_multi_pad(ev, in, ops, out);
    if ((strcmp(target, "_SPMDInternalOp_MultiRotate") == 0 ||
         strcmp(target, "_SPMDInternalOp_Wrap") == 0) &&
        in->n_operands == 1)
        return eval_rotate_family(ev, in, target, ops, out);
    if (strcmp(target, "GetRngSeed") == 0 && in->n_operands == 0 && gs_shape_is_array(in->shape) &&
        in->shape->rank == 0 && !gs_type_is_float(in->shape->type)) {
        /* The seed of the run's random numbers (the same on every device). */
        gs_value *v = gs_eval_new_result(ev, in);
        if (!v) return GS_ERR;
        gs_elem_set_i(v->data, v->type, 0, (int64_t)ev->env->rng_seed);
        *out = v;
        return GS_OK;
    }
    return gs_eval_error(ev, in, "custom-call target \"%s\" is not supported by the interpreter", target);
}

/* The done half of an asynchronous collective: its start's value is the result itself, or a
 * tuple (operands, result, ...) whose element 1 is the result. */
static gs_status k_collective_done(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *s = ops[0];
    const gs_collectives *cl = ev->env ? ev->env->collectives : NULL;
    gs_status st = GS_OK;
    if (cl && cl->finish && cl->finish(cl->ctx, s, out, &st, ev->d)) {
        /* the runtime ran the start's collective on another thread */
        if (st == GS_OK && !gs_value_matches(*out, in->shape)) {
            gs_value_free(*out);
            *out = NULL;
            return gs_eval_error(ev, in, "the collective's result does not have the -done's shape");
        }
        return st;
    }
    if (gs_value_matches(s, in->shape)) {
        *out = gs_value_ref(ops[0]);
        return GS_OK;
    }
    if (s->type == GS_TUPLE && s->n_tuple >= 2 && gs_value_matches(s->tuple[1], in->shape)) {
        *out = gs_value_ref(s->tuple[1]);
        return GS_OK;
    }
    return gs_eval_error(ev, in, "operand is not the value of an asynchronous collective start");
}

static gs_status k_infeed(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    (void)ops;
    return gs_eval_infeed(ev, in, out);
}

/* ------------------------------------------------------------------ dispatch */

static gs_kernel_fn structural_kernel(gs_opcode op) {
    switch (op) {
    case GS_OP_TUPLE: return k_tuple;
    case GS_OP_GET_TUPLE_ELEMENT: return k_get_tuple_element;
    case GS_OP_COPY:
    case GS_OP_OPTIMIZATION_BARRIER:
    case GS_OP_DOMAIN:
    case GS_OP_ADD_DEPENDENCY: return k_identity;
    case GS_OP_CALL:
    case GS_OP_FUSION: return k_call;
    case GS_OP_WHILE: return k_while;
    case GS_OP_CONDITIONAL: return k_conditional;
    case GS_OP_AFTER_ALL:
    case GS_OP_OUTFEED: return k_token;
    case GS_OP_INFEED: return k_infeed;
    case GS_OP_PARTITION_ID:
    case GS_OP_REPLICA_ID: return k_device_id;
    case GS_OP_CUSTOM_CALL: return k_custom_call;
    default: break;
    }
    const gs_op_info *info = gs_op_info_of(op);
    if (info->family == GS_FAM_COLLECTIVE) return k_collective;
    if (info->family == GS_FAM_ASYNC) {
        if (op == GS_OP_ALL_REDUCE_DONE || op == GS_OP_ALL_GATHER_DONE ||
            op == GS_OP_COLLECTIVE_PERMUTE_DONE)
            return k_collective_done;
        return k_async;
    }
    return NULL;
}

/* The kernel of an opcode, or NULL. Parameters and constants are handled by the driver. */
static gs_kernel_fn kernel_of(gs_opcode op) {
    gs_kernel_fn k = structural_kernel(op);
    if (!k) k = gs_kernel_elementwise(op);
    if (!k) k = gs_kernel_shape(op);
    if (!k) k = gs_kernel_dot(op);
    if (!k) k = gs_kernel_reduce(op);
    if (!k) k = gs_kernel_dynamic_shape(op);
    if (!k) k = gs_kernel_fft(op);
    if (!k) k = gs_kernel_random(op);
    if (!k) k = gs_kernel_batch_norm(op);
    if (!k) k = gs_kernel_linalg(op);
    return k;
}

bool gs_interp_supports(gs_opcode op) {
    return op == GS_OP_PARAMETER || op == GS_OP_CONSTANT || kernel_of(op) != NULL;
}

/* Dynamic shapes: when an operand's value is smaller than its instruction's shape (a dynamic
 * dim below its bound), the instruction runs as if written with the operands' actual shapes:
 * tmp (with operand stand-ins in ops_tmp, shapes in arena a) gets the shape inferred from them.
 * Returns false when no operand is dynamic or the op's shape cannot be inferred. */
static bool shape_for_dynamic_operands(gs_arena *a, const gs_instr *in, gs_value *const *ops,
                                       gs_instr *tmp, gs_instr *ops_tmp, gs_instr **op_ptrs) {
    bool dyn = false;
    for (int k = 0; k < in->n_operands; k++) {
        const gs_shape *s = in->operands[k]->shape;
        if (gs_type_is_array(ops[k]->type) && s->rank == ops[k]->rank && !gs_shape_is_tuple(s))
            for (int i = 0; i < s->rank; i++) dyn |= ops[k]->dims[i] != s->dims[i];
    }
    if (!dyn) return false;
    *tmp = *in;
    for (int k = 0; k < in->n_operands; k++) {
        ops_tmp[k] = *in->operands[k];
        if (gs_type_is_array(ops[k]->type))
            ops_tmp[k].shape = gs_shape_array(a, ops[k]->type, ops[k]->rank, ops[k]->dims);
        if (!ops_tmp[k].shape) return false;
        op_ptrs[k] = &ops_tmp[k];
    }
    tmp->operands = op_ptrs;
    gs_shape *inferred = NULL;
    if (gs_infer_shape(a, tmp, &inferred, NULL) != GS_OK || !inferred || !gs_shape_is_array(inferred))
        return false;
    inferred->type = in->shape->type;
    tmp->shape = inferred;
    return true;
}

static gs_status eval_on_device(gs_eval *ev, const gs_instr *in, gs_value *const *ops,
                                gs_value *const *bops, gs_value **out, gs_value **bout) {
    (void)bops;
    (void)bout;
    return gs_eval_instr(ev, in, ops, out);
}

/* Do the operands of an elementwise op that computes in one type (binary, compare, select's
 * and clamp's value operands) have different element types, or a result type other than
 * theirs? k when operands k - 1 and k differ, -k - 1 when the result differs from operand k,
 * else 0. XLA's verifier allows mixed precision; the kernels read every operand as one
 * type, so such ops are refused. */
static int mixed_operands(const gs_instr *in, gs_value *const *ops) {
    gs_op_family f = gs_op_info_of(in->op)->family;
    int first = 0;
    if (f == GS_FAM_TERNARY && in->op == GS_OP_SELECT) first = 1;
    else if (f != GS_FAM_BINARY && f != GS_FAM_COMPARE && f != GS_FAM_TERNARY) return 0;
    for (int k = first + 1; k < in->n_operands; k++)
        if (gs_type_is_array(ops[k]->type) && gs_type_is_array(ops[k - 1]->type) &&
            ops[k]->type != ops[k - 1]->type)
            return k; /* operands k - 1 and k differ */
    /* The result has the operands' type, but for compare (pred) and complex (re, im). */
    if (f != GS_FAM_COMPARE && in->op != GS_OP_COMPLEX && in->shape &&
        gs_type_is_array(in->shape->type) && first < in->n_operands &&
        gs_type_is_array(ops[first]->type) && in->shape->type != ops[first]->type)
        return -first - 1;
    return 0;
}

gs_status gs_eval_instr(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    gs_kernel_fn k = kernel_of(in->op);
    if (!k) return gs_eval_error(ev, in, "the interpreter does not support %s", gs_op_name(in->op));
    *out = NULL;
    /* Manual regions: per-device parts (manual.c). */
    if (gs_manual_is_enter(in) && in->n_operands == 1) return gs_manual_enter(ev, in, ops[0], out);
    if (gs_manual_is_exit(in) && in->n_operands == 1 && ops[0]->devices > 0)
        return gs_manual_exit(ev, in, ops[0], out);
    int n_dev = gs_bundle_devices(ops, in->n_operands);
    if (n_dev == 0) n_dev = gs_manual_id_devices(ev, in);
    if (n_dev > 0 && in->op == GS_OP_CALL)
        /* A call inside a manual region (shard_map's body, as Shardy's export calls it): the
         * body runs on the per-device values, so that a collective in it sees every device's
         * part at once. */
        return k_call(ev, in, ops, out);
    if (n_dev > 0 && gs_op_info_of(in->op)->family == GS_FAM_COLLECTIVE) {
        /* A collective between the devices of a manual value: all of them at once. */
        const gs_collectives *c = ev->env->collectives;
        if (!c || !c->execute_bundle)
            return gs_eval_error(ev, in, "a collective on per-device (manual) values needs the "
                                         "multi-device runtime (gspmd run --verify)");
        gs_status st = c->execute_bundle(c->ctx, in, ops, in->n_operands, n_dev, out, ev->d);
        if (st == GS_OK && *out) (*out)->devices = n_dev;
        return st;
    }
    if (n_dev > 0) return gs_per_device(ev, in, n_dev, ops, NULL, out, NULL, eval_on_device);
    int mk = mixed_operands(in, ops);
    if (mk < 0)
        return gs_eval_error(ev, in, "the result type %s differs from the operand type %s "
                                     "(mixed precision is not run: convert first)",
                             gs_type_name(in->shape->type), gs_type_name(ops[-mk - 1]->type));
    if (mk > 0)
        return gs_eval_error(ev, in, "the operand types %s and %s differ (mixed precision is "
                                     "not run: convert one first)",
                             gs_type_name(ops[mk - 1]->type), gs_type_name(ops[mk]->type));
    gs_status st;
    if (in->shape && in->shape->dynamic && in->n_operands <= 16) {
        gs_arena a;
        gs_arena_init(&a);
        gs_instr tmp, ops_tmp[16], *op_ptrs[16];
        if (shape_for_dynamic_operands(&a, in, ops, &tmp, ops_tmp, op_ptrs))
            st = k(ev, &tmp, ops, out);
        else
            st = k(ev, in, ops, out);
        gs_arena_free(&a);
    } else {
        st = k(ev, in, ops, out);
    }
    if (st == GS_OK && !*out) return gs_eval_error(ev, in, "internal: kernel returned no value");
    if (st == GS_OK && in->shape && !gs_value_matches(*out, in->shape)) {
        char got[128];
        gs_value_shape_str(*out, got, sizeof got);
        gs_value_free(*out);
        *out = NULL;
        return gs_eval_error(ev, in, "internal: kernel produced %s, the instruction's shape differs", got);
    }
    return st;
}

/* One use of each operand of `in` is over (of its members' operands, for a fused root): values
 * (and bounds) with no use left are freed, except c's root. */
static void release_operands(gs_eval *ev, const gs_computation *c, const gs_instr *in,
                             const signed char *plan, int *uses, gs_value **vals,
                             gs_value **bvals) {
    for (int k = 0; k < in->n_operands; k++) {
        const gs_instr *o = in->operands[k];
        if (plan && plan[o->id] == GS_FUSED_MEMBER) {
            release_operands(ev, c, o, plan, uses, vals, bvals);
            continue;
        }
        if (--uses[o->id] == 0 && o != c->root) {
            if (bvals) gs_value_free(vals[o->id]);
            else gs_eval_release(ev, vals[o->id]);
            vals[o->id] = NULL;
            if (bvals) {
                gs_value_free(bvals[o->id]);
                bvals[o->id] = NULL;
            }
        }
    }
}

/* Evaluates instruction in of c (not a parameter or constant) on its operands' values (and
 * bounds, when bounded), letting an elementwise kernel write into an operand that dies here. */
static gs_status eval_operation(gs_eval *ev, const gs_computation *c, const gs_instr *in,
                                gs_value *const *vals, gs_value *const *bvals, const int *uses,
                                bool bounded, gs_value **r, gs_value **br) {
    bool big = in->n_operands > 16;
    gs_value *opbuf[16], *bopbuf[16];
    gs_value **ops = big ? gs_sys_malloc(sizeof *ops * (size_t)in->n_operands) : opbuf;
    gs_value **bops = !bounded ? NULL
                      : big    ? gs_sys_malloc(sizeof *bops * (size_t)in->n_operands)
                               : bopbuf;
    if (!ops || (bounded && !bops)) {
        if (ops != opbuf) free(ops);
        if (bops != bopbuf) free(bops);
        return gs_eval_oom(ev, in);
    }
    for (int k = 0; k < in->n_operands; k++) {
        ops[k] = vals[in->operands[k]->id];
        if (bounded) bops[k] = bvals[in->operands[k]->id];
    }
    /* An array operand used for the last time here and held by nothing else (not an
     * argument, not the root) can take the result of an elementwise kernel. */
    ev->donor = NULL;
    for (int k = 0; !bounded && k < in->n_operands && !ev->donor; k++) {
        const gs_instr *o = in->operands[k];
        gs_value *v = ops[k];
        if (uses[o->id] == 1 && o != c->root && v && gs_value_refs(v) == 1 && v->type != GS_TUPLE && v->data)
            ev->donor = v;
    }
    gs_status st;
    const gs_work_sharing *ws = ev->env ? ev->env->sharing : NULL;
    if (bounded) {
        st = gs_bound_instr(ev, in, ops, bops, r, br);
    } else if (ws && (in->op == GS_OP_DOT || in->op == GS_OP_CONVOLUTION)) {
        /* another device's result on equal operands, or computed here and offered */
        void *claim = NULL;
        gs_value *shared = ws->begin(ws->ctx, in, ops, in->n_operands, &claim);
        if (shared) {
            *r = shared;
            st = GS_OK;
        } else {
            st = gs_eval_instr(ev, in, ops, r);
            if (claim) ws->end(ws->ctx, claim, st == GS_OK ? *r : NULL);
        }
    } else {
        st = gs_eval_instr(ev, in, ops, r);
    }
    ev->donor = NULL;
    if (ops != opbuf) free(ops);
    if (bops != bopbuf) free(bops);
    return st;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Evaluates c on args; in bound mode (bargs non-NULL) also every value's rounding-error bound
 * (bounds.c), with the results' bound in *bout. */
static gs_status eval_comp(gs_eval *ev, const gs_computation *c, gs_value *const *args,
                           gs_value *const *bargs, int n_args, gs_value **out, gs_value **bout) {
    if (n_args != c->n_params)
        return gs_error(ev->d, c->span, "computation %s takes %d arguments, given %d", c->name,
                        c->n_params, n_args);
    if (ev->depth >= GS_MAX_CALL_DEPTH)
        return gs_error(ev->d, c->span, "calls nest deeper than %d (recursion?)", GS_MAX_CALL_DEPTH);
    ev->depth++;
    const gs_instr **order = NULL;
    int n = 0;
    if (plan_order(ev, c, &order, &n) != GS_OK) {
        ev->depth--;
        return GS_ERR;
    }
    int N = c->n_instrs;
    bool bounded = bargs != NULL;
    gs_value **vals = gs_sys_calloc((size_t)(N ? N : 1), sizeof *vals);
    gs_value **bvals = bounded ? gs_sys_calloc((size_t)(N ? N : 1), sizeof *bvals) : NULL;
    int *uses = gs_sys_calloc((size_t)(N ? N : 1), sizeof(int));
    gs_status st = vals && uses && (bvals || !bounded) ? GS_OK : gs_eval_oom(ev, c->root);
    /* Remaining uses of each value within this evaluation. */
    for (int i = 0; st == GS_OK && i < n; i++)
        for (int k = 0; k < order[i]->n_operands; k++) uses[order[i]->operands[k]->id]++;
    /* Elementwise chains run fused (fusion.c), except in the bounded reference. */
    signed char *plan = NULL;
    if (st == GS_OK && !bounded && gs_fusion_plan(c, order, n, uses, &plan) != GS_OK)
        st = gs_eval_oom(ev, c->root);
    const gs_instr_observer *obs = ev->env ? ev->env->observer : NULL;
    for (int i = 0; st == GS_OK && i < n; i++) {
        const gs_instr *in = order[i];
        gs_value *r = NULL, *br = NULL;
        if (plan && plan[in->id] == GS_FUSED_MEMBER) continue; /* computed in its user's loop */
        double t0 = obs ? now_s() : 0;
        if (plan && plan[in->id] == GS_FUSED_ROOT) {
            st = gs_fusion_eval(ev, c, in, plan, vals, uses, &r);
        } else if (in->op == GS_OP_PARAMETER) {
            r = gs_value_ref(args[in->parameter_number]);
            if (!gs_value_matches(r, in->shape)) {
                char got[128];
                gs_value_shape_str(r, got, sizeof got);
                gs_value_free(r);
                st = gs_eval_error(ev, in, "argument is %s, the parameter's shape differs", got);
                break;
            }
            if (bounded) br = gs_value_ref(bargs[in->parameter_number]);
        } else if (in->op == GS_OP_CONSTANT) {
            st = literal_to_value(ev, in, in->shape, in->literal, &r);
            if (st == GS_OK && bounded && !(br = gs_bound_exact(r))) {
                gs_value_free(r);
                st = gs_eval_oom(ev, in);
            }
        } else {
            st = eval_operation(ev, c, in, vals, bvals, uses, bounded, &r, &br);
        }
        if (st != GS_OK) break;
        if (obs) obs->done(obs->ctx, in, t0, now_s(), r);
        vals[in->id] = r;
        if (bounded) bvals[in->id] = br;
        release_operands(ev, c, in, plan, uses, vals, bvals);
    }
    if (st == GS_OK) {
        *out = vals[c->root->id];
        vals[c->root->id] = NULL;
        if (bounded) {
            *bout = bvals[c->root->id];
            bvals[c->root->id] = NULL;
        }
    }
    for (int i = 0; vals && i < N; i++) gs_value_free(vals[i]);
    for (int i = 0; bvals && i < N; i++) gs_value_free(bvals[i]);
    free(vals);
    free(bvals);
    free(uses);
    free(order);
    free(plan);
    ev->depth--;
    return st;
}

gs_status gs_eval_call(gs_eval *ev, const gs_computation *c, gs_value *const *args, int n_args,
                       gs_value **out) {
    bool handled;
    if (gs_eval_scalar_call(ev, c, args, n_args, out, &handled) != GS_OK) return GS_ERR;
    if (handled) return GS_OK;
    return eval_comp(ev, c, args, NULL, n_args, out, NULL);
}

gs_status gs_eval_call_bounded(gs_eval *ev, const gs_computation *c, gs_value *const *args,
                               gs_value *const *bargs, int n_args, gs_value **out,
                               gs_value **bout) {
    return eval_comp(ev, c, args, bargs, n_args, out, bout);
}

gs_status gs_interp_call(const gs_module *m, const gs_interp_env *env, const gs_computation *c,
                         gs_value *const *args, int n_args, gs_value **result, gs_diags *d) {
    gs_interp_env default_env = {0, 0, 1, NULL, 0, NULL, NULL, 0, NULL};
    gs_eval ev = {m, env ? env : &default_env, d, 0, 0, NULL, NULL, {NULL}, 0};
    ev.rng_state = ev.env->rng_seed ^ 0x9e3779b97f4a7c15ull;
    gs_status st = gs_eval_call(&ev, c, args, n_args, result);
    gs_scalar_progs_free(ev.scalars);
    gs_eval_free_spares(&ev);
    return st;
}

gs_status gs_interp_eval(const gs_module *m, const gs_interp_env *env, gs_value *const *args,
                         int n_args, gs_value **result, gs_diags *d) {
    *result = NULL;
    if (gs_module_check_bounded(m, "evaluation", d) != GS_OK) return GS_ERR;
    return gs_interp_call(m, env, m->entry, args, n_args, result, d);
}

bool gs_comp_simple_binary(const gs_computation *c, gs_opcode *op) {
    return gs_computation_binary_reducer(c, op);
}
