/*
 * partition.c — the driver of the SPMD partitioner (see gspmd/partition.h): it checks the
 * shardings against the device count, gives the entry's parameters their per-device shapes,
 * visits the entry's instructions operands first, sends each to the handler of its op family
 * (the table below), reshards the handler's result to the instruction's sharding, and makes the
 * root's value the program's result.
 *
 * A handler may decline; then the default action runs, which is always correct: every operand
 * resharded to replicated, the instruction computed on whole values exactly as written (its
 * called computations copied verbatim), the result resharded to the instruction's sharding. Ops
 * without a handler yet (convolution, gather, scatter, sort, windows, control flow...) take it
 * too: slower, never wrong.
 *
 * Names: every source name is reserved up front; the instruction that computes a source
 * instruction's value takes that name, everything else (reshards, offsets) a fresh one. New
 * instructions carry the span of the source instruction being partitioned.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ context helpers */

void gs_p_error(gs_pctx *c, const char *fmt, ...) {
    if (c->e->dry) {
        /* A plan being costed is impossible: that plan loses, the partitioning goes on. */
        c->e->dry_failed = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    gs_verror(c->d, c->cur ? c->cur->span : gs_span_none(), fmt, ap);
    va_end(ap);
    c->failed = true;
}

void gs_p_oom(gs_pctx *c) {
    if (!c->failed) gs_error(c->d, gs_span_none(), "partition: out of memory");
    c->failed = true;
}

gs_builder *gs_p_b(gs_pctx *c) { return &c->e->b; }
gs_arena *gs_p_a(gs_pctx *c) { return &c->scratch; }

const gs_pvalue *gs_p_operand(gs_pctx *c, const gs_instr *in, int k) {
    return &c->vals[in->operands[k]->id];
}

/* ------------------------------------------------------------------ shardings */

/* A tuple sharding of n copies of leaf. */
static const gs_sharding *tuple_of(gs_arena *a, int n, const gs_sharding *leaf) {
    gs_sharding **v = GS_NEW_ARRAY(a, gs_sharding *, n + 1);
    if (!v) return NULL;
    for (int i = 0; i < n; i++) v[i] = (gs_sharding *)leaf;
    return gs_sharding_tuple(a, n, v);
}

/* The sharding as the partitioner reads it for a value of shape s (NULL: replicated), or NULL
 * when it does not fit the shape (*why says how). */
static const gs_sharding *normalize(gs_arena *a, const gs_shape *s, const gs_sharding *sh,
                                    const char **why) {
    *why = NULL;
    if (s->type == GS_TUPLE) {
        int n = gs_shape_n_leaves(s);
        if (!sh) return tuple_of(a, n, gs_sharding_replicated(a));
        if (sh->kind != GS_SHARDING_TUPLE) return tuple_of(a, n, sh);
        if (sh->n_tuple != n) {
            *why = "a tuple sharding whose number of elements differs from the shape's leaves";
            return NULL;
        }
        return sh;
    }
    if (!sh || s->type == GS_TOKEN) return gs_sharding_replicated(a); /* tokens carry no data */
    if (sh->kind == GS_SHARDING_TUPLE) {
        if (sh->n_tuple == 1) sh = sh->tuple[0];
        else {
            *why = "a tuple sharding on an array";
            return NULL;
        }
    }
    if (sh->kind == GS_SHARDING_TILED && gs_type_is_array(s->type) && sh->data_rank != s->rank) {
        *why = "a sharding whose rank differs from the shape's";
        return NULL;
    }
    return sh;
}

const gs_sharding *gs_sharding_leaf(const gs_sharding *sh, const gs_shape *s, int leaf) {
    (void)s;
    if (sh->kind != GS_SHARDING_TUPLE) return sh;
    return leaf < sh->n_tuple ? sh->tuple[leaf] : sh;
}

/* s without shard_as / shard_like groups (they matter to propagation only). */
static const gs_sharding *without_groups(gs_arena *a, const gs_sharding *s) {
    if (!s) return s;
    if (s->kind == GS_SHARDING_TUPLE) {
        bool any = false;
        for (int i = 0; i < s->n_tuple; i++) any = any || s->tuple[i]->group != GS_SHARD_GROUP_NONE;
        if (!any) return s;
        gs_sharding **v = GS_NEW_ARRAY(a, gs_sharding *, s->n_tuple + 1);
        if (!v) return NULL;
        for (int i = 0; i < s->n_tuple; i++)
            v[i] = (gs_sharding *)without_groups(a, s->tuple[i]);
        return gs_sharding_tuple(a, s->n_tuple, v);
    }
    if (s->group == GS_SHARD_GROUP_NONE) return s;
    return gs_sharding_with_group(a, s, GS_SHARD_GROUP_NONE, 0);
}

const gs_sharding *gs_p_sharding_of(gs_pctx *c, const gs_instr *in) {
    const char *why;
    const gs_sharding *s = normalize(gs_p_a(c), in->shape,
                                     without_groups(gs_p_a(c), gs_instr_get_sharding(in)), &why);
    if (!s) {
        if (why)
            gs_p_error(c, "%%%s has %s", in->name, why);
        else
            gs_p_oom(c);
        return gs_p_replicated(c, in->shape);
    }
    return s;
}

const gs_sharding *gs_p_replicated(gs_pctx *c, const gs_shape *s) {
    const char *why;
    const gs_sharding *r = NULL;
    if (c->manual && s->type != GS_TUPLE) {
        r = gs_type_is_array(s->type) ? gs_p_manual_whole(c, c->manual, s->rank)
                                      : gs_sharding_replicated(gs_p_a(c));
    } else if (c->manual) {
        int n = gs_shape_n_leaves(s), k = 0;
        gs_sharding **v = GS_NEW_ARRAY(gs_p_a(c), gs_sharding *, n + 1);
        for (int i = 0; v && i < s->n_tuple; i++) {
            /* Leaves in order, each whole within the manual groups at its own rank. */
            const gs_shape *e = s->tuple[i];
            const gs_sharding *es = gs_p_replicated(c, e);
            if (!es) break;
            if (es->kind == GS_SHARDING_TUPLE)
                for (int j = 0; j < es->n_tuple; j++) v[k++] = es->tuple[j];
            else
                v[k++] = (gs_sharding *)es;
        }
        r = v && k == n ? gs_sharding_tuple(gs_p_a(c), n, v) : NULL;
    } else {
        r = normalize(gs_p_a(c), s, NULL, &why);
    }
    if (!r) gs_p_oom(c);
    return r;
}

const gs_sharding *gs_partition_param_sharding(gs_arena *a, const gs_module *m, int param) {
    const gs_instr *p = m->entry->params[param];
    const char *why;
    return normalize(a, p->shape, gs_instr_get_sharding(p), &why);
}

const gs_sharding *gs_partition_root_sharding(gs_arena *a, const gs_module *m) {
    const gs_instr *r = m->entry->root;
    const char *why;
    return normalize(a, r->shape, gs_instr_get_sharding(r), &why);
}

static gs_shape *local_shape(gs_arena *a, const gs_shape *base, const gs_sharding *s, int *leaf) {
    if (base->type == GS_TUPLE) {
        gs_shape **el = GS_NEW_ARRAY(a, gs_shape *, base->n_tuple + 1);
        if (!el) return NULL;
        for (int i = 0; i < base->n_tuple; i++)
            if (!(el[i] = local_shape(a, base->tuple[i], s, leaf))) return NULL;
        return gs_shape_tuple(a, base->n_tuple, el);
    }
    const gs_sharding *ls = gs_sharding_leaf(s, base, (*leaf)++);
    if (!gs_type_is_array(base->type) || ls->kind != GS_SHARDING_TILED) {
        gs_shape *c = gs_shape_clone(a, base);
        if (c) c->has_layout = false;
        return c;
    }
    int64_t dims[GS_MAX_RANK];
    gs_sharding_shard_dims(ls, base->rank, base->dims, dims);
    return gs_shape_array(a, base->type, base->rank, dims);
}

gs_shape *gs_p_local_shape(gs_pctx *c, const gs_shape *base, const gs_sharding *s) {
    int leaf = 0;
    gs_shape *r = local_shape(gs_p_a(c), base, s, &leaf);
    if (!r) gs_p_oom(c);
    return r;
}

/* ------------------------------------------------------------------ validation */

static gs_status check_one(const gs_instr *in, const gs_sharding *s, int64_t n, gs_diags *d) {
    if (!s) return GS_OK;
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (check_one(in, s->tuple[i], n, d) != GS_OK) return GS_ERR;
        return GS_OK;
    }
    if (s->kind == GS_SHARDING_TILED && s->tiles.n != n)
        return gs_error(d, in->span,
                        "the sharding of %%%s spans %lld devices, but the program is partitioned "
                        "for %lld (--num-partitions)",
                        in->name, (long long)s->tiles.n, (long long)n);
    if (s->kind == GS_SHARDING_TILED) {
        /* Every device 0..n-1 must appear (explicit lists may name others). */
        for (int64_t k = 0; !s->tiles.iota && k < s->tiles.n; k++)
            if (gs_tile_device_at(&s->tiles, k) >= n)
                return gs_error(d, in->span, "the sharding of %%%s names device %lld, but the "
                                "program is partitioned for %lld devices", in->name,
                                (long long)gs_tile_device_at(&s->tiles, k), (long long)n);
    }
    if (s->kind == GS_SHARDING_MAXIMAL && (s->device < 0 || s->device >= n))
        return gs_error(d, in->span,
                        "the sharding of %%%s puts it on device %lld, but the program is "
                        "partitioned for %lld devices",
                        in->name, (long long)s->device, (long long)n);
    return GS_OK;
}

gs_status gs_partition_check(const gs_module *m, int64_t n, gs_diags *d) {
    if (n < 1) return gs_error(d, gs_span_none(), "the number of partitions must be at least 1");
    if (m->num_partitions > 1 && m->num_partitions != n)
        return gs_error(d, gs_span_none(),
                        "the module says num_partitions=%lld, but it is being partitioned for "
                        "%lld devices",
                        (long long)m->num_partitions, (long long)n);
    gs_status st = GS_OK;
    for (int ci = 0; ci < m->n_comps; ci++) {
        const gs_computation *comp = m->comps[ci];
        for (int i = 0; i < comp->n_instrs; i++) {
            const gs_instr *in = comp->instrs[i];
            const gs_sharding *s = gs_instr_get_sharding(in);
            if (check_one(in, s, n, d) != GS_OK) {
                st = GS_ERR;
                continue;
            }
            if (s && comp->is_entry) {
                const char *why;
                gs_arena a;
                gs_arena_init(&a);
                if (!normalize(&a, in->shape, s, &why) && why) {
                    gs_error(d, in->span, "%%%s has %s", in->name, why);
                    st = GS_ERR;
                }
                gs_arena_free(&a);
            }
        }
    }
    return st;
}

/* ------------------------------------------------------------------ copies */

static gs_literal_ir *copy_literal(gs_arena *a, const gs_literal_ir *l) {
    if (!l) return NULL;
    gs_literal_ir *c = GS_NEW(a, gs_literal_ir);
    if (!c) return NULL;
    *c = *l;
    if (l->data && l->n_bytes) {
        c->data = gs_arena_memdup(a, l->data, l->n_bytes);
        if (!c->data) return NULL;
    }
    if (l->n_tuple) {
        c->tuple = GS_NEW_ARRAY(a, gs_literal_ir *, l->n_tuple);
        if (!c->tuple) return NULL;
        for (int i = 0; i < l->n_tuple; i++)
            if (!(c->tuple[i] = copy_literal(a, l->tuple[i]))) return NULL;
    }
    return c;
}

/* Instructions of comp in an order with operands first (text order when it already is). */
static const gs_instr **topo_order(gs_arena *a, const gs_computation *comp) {
    int n = comp->n_instrs;
    const gs_instr **order = GS_NEW_ARRAY(a, const gs_instr *, n + 1);
    char *state = GS_NEW_ARRAY(a, char, n + 1);
    const gs_instr **stack = GS_NEW_ARRAY(a, const gs_instr *, n + 1);
    int *next = GS_NEW_ARRAY(a, int, n + 1);
    if (!order || !state || !stack || !next) return NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (state[i]) continue;
        int sp = 0;
        stack[sp] = comp->instrs[i];
        next[sp++] = 0;
        state[i] = 1;
        while (sp > 0) {
            const gs_instr *top = stack[sp - 1];
            if (next[sp - 1] < top->n_operands) {
                const gs_instr *op = top->operands[next[sp - 1]++];
                if (op->parent == comp && !state[op->id]) {
                    state[op->id] = 1;
                    stack[sp] = op;
                    next[sp++] = 0;
                }
            } else {
                order[k++] = top;
                state[top->id] = 2;
                sp--;
            }
        }
    }
    return order;
}

static gs_computation *copy_comp(void *ctx, gs_computation *src);

gs_instr *gs_p_clone(gs_pctx *c, const gs_instr *in, const gs_shape *shape, int n,
                     gs_instr *const *ops) {
    gs_builder *b = gs_p_b(c);
    gs_instr *out = gs_build(b, in->op, shape, n, ops);
    if (!out) return NULL;
    if (in->op_text) out->op_text = gs_arena_strdup(&b->m->arena, in->op_text);
    for (int i = 0; i < in->n_attrs; i++)
        if (in->attrs[i].key != GS_ATTR_CONTROL_PREDECESSORS) /* names of the source program */
            gs_build_copy_attr(b, out, &in->attrs[i], copy_comp, c);
    if (in->literal) {
        out->literal = copy_literal(&b->m->arena, in->literal);
        if (!out->literal) gs_p_oom(c);
    }
    return out;
}

/* A verbatim copy of a called computation in the output (its callees first; cached). */
static gs_computation *copy_comp(void *ctx, gs_computation *src) {
    gs_pctx *c = ctx;
    gs_emit *e = c->e;
    gs_computation *done = e->dry ? NULL : gs_strmap_get(&c->comps, src->name);
    if (done) return done;
    if (e->dry) {
        gs_computation *f = gs_module_find_comp(e->m, src->name);
        if (f) return f;
    }
    for (int i = 0; i < src->n_instrs; i++) {
        gs_computation *called[64];
        int nc = gs_instr_called(src->instrs[i], called, 64);
        for (int k = 0; k < nc && k < 64; k++)
            if (called[k]) copy_comp(c, called[k]);
    }
    gs_module *m = e->m;
    gs_computation *dst = gs_computation_new(m, src->name);
    const gs_instr **order = topo_order(gs_p_a(c), src);
    gs_instr **map = GS_NEW_ARRAY(gs_p_a(c), gs_instr *, src->n_instrs + 1);
    if (!dst || !order || !map) {
        gs_p_oom(c);
        return NULL;
    }
    gs_module_move_before_entry(m, dst);
    dst->execution_thread =
        src->execution_thread ? gs_arena_strdup(&m->arena, src->execution_thread) : NULL;
    if (!e->dry && gs_strmap_put(&c->comps, src->name, dst) != GS_OK) gs_p_oom(c);
    gs_builder b;
    gs_builder_init(&b, m, dst, &e->names);
    for (int i = 0; i < src->n_instrs; i++) {
        const gs_instr *in = order[i];
        gs_instr *ops[64];
        gs_instr **opv =
            in->n_operands <= 64 ? ops : GS_NEW_ARRAY(gs_p_a(c), gs_instr *, in->n_operands);
        if (!opv) {
            gs_p_oom(c);
            return NULL;
        }
        for (int k = 0; k < in->n_operands; k++) opv[k] = map[in->operands[k]->id];
        b.span = in->span;
        gs_instr *out;
        if (in->op == GS_OP_PARAMETER) {
            out = gs_build_parameter(&b, in->parameter_number, in->shape, in->name);
        } else {
            out = gs_build_named(&b, in->name, in->op, in->shape, in->n_operands, opv);
            if (out && in->op_text) out->op_text = gs_arena_strdup(&m->arena, in->op_text);
            for (int k = 0; out && k < in->n_attrs; k++)
                gs_build_copy_attr(&b, out, &in->attrs[k], copy_comp, c);
            if (out && in->literal) out->literal = copy_literal(&m->arena, in->literal);
        }
        if (!out) {
            gs_p_oom(c);
            return NULL;
        }
        map[in->id] = out;
    }
    if (b.failed) gs_p_oom(c);
    if (src->root) {
        dst->root = map[src->root->id];
        if (dst->root) dst->root->is_root = true;
    }
    return dst;
}

/* ------------------------------------------------------------------ default action */

/* {manual}, or a tuple of {manual} leaves. */
static bool all_manual(const gs_sharding *s) {
    if (s->kind == GS_SHARDING_MANUAL) return true;
    if (s->kind != GS_SHARDING_TUPLE || s->n_tuple == 0) return false;
    for (int i = 0; i < s->n_tuple; i++)
        if (s->tuple[i]->kind != GS_SHARDING_MANUAL) return false;
    return true;
}

void gs_p_default(gs_pctx *c, const gs_instr *in, gs_pvalue *out) {
    int n = in->n_operands;
    gs_instr **ops = GS_NEW_ARRAY(gs_p_a(c), gs_instr *, n + 1);
    if (!ops) {
        gs_p_oom(c);
        return;
    }
    const gs_sharding *target = gs_p_sharding_of(c, in);
    const gs_sharding *written = gs_instr_get_sharding(in);
    /* In a manual region the op runs on the devices' own values as written. */
    bool manual = all_manual(target) || (written && all_manual(written));
    for (int k = 0; k < n; k++) {
        const gs_pvalue *v = gs_p_operand(c, in, k);
        gs_pvalue r;
        const gs_sharding *want =
            manual && all_manual(v->sharding) ? v->sharding : gs_p_replicated(c, v->base);
        gs_reshard(c, v, want, &r);
        ops[k] = r.hlo;
    }
    out->hlo = gs_p_clone(c, in, in->shape, n, ops);
    out->base = in->shape;
    out->sharding = manual ? target : gs_p_replicated(c, in->shape);
    out->red = GS_OP_ADD;
    if (!out->hlo) gs_p_oom(c);
    c->e->stats.n_default++;
}

/* ------------------------------------------------------------------ handler table */

static gs_handler handler_of(const gs_instr *in) {
    switch (in->op) {
    case GS_OP_PARAMETER: return gs_h_parameter;
    case GS_OP_CONSTANT: return gs_h_constant;
    case GS_OP_IOTA: return gs_h_iota;
    case GS_OP_TUPLE: return gs_h_tuple;
    case GS_OP_GET_TUPLE_ELEMENT: return gs_h_gte;
    case GS_OP_COPY:
    case GS_OP_OPTIMIZATION_BARRIER: return gs_h_copy;
    case GS_OP_CUSTOM_CALL: return gs_h_custom_call;
    case GS_OP_BROADCAST: return gs_h_broadcast;
    case GS_OP_RESHAPE:
    case GS_OP_BITCAST: return gs_h_reshape;
    case GS_OP_TRANSPOSE: return gs_h_transpose;
    case GS_OP_REVERSE: return gs_h_reverse;
    case GS_OP_SLICE: return gs_h_slice;
    case GS_OP_PAD: return gs_h_pad;
    case GS_OP_CONCATENATE: return gs_h_concatenate;
    case GS_OP_DYNAMIC_SLICE: return gs_h_dynamic_slice;
    case GS_OP_DYNAMIC_UPDATE_SLICE: return gs_h_dynamic_update_slice;
    case GS_OP_DOT:
    case GS_OP_CONVOLUTION: return gs_h_dot;
    case GS_OP_REDUCE: return gs_h_reduce;
    case GS_OP_SORT: return gs_h_sort;
    case GS_OP_REDUCE_WINDOW: return gs_h_reduce_window;
    case GS_OP_BITCAST_CONVERT: return gs_h_elementwise;
    default: break;
    }
    const gs_op_info *info = gs_op_info_of(in->op);
    if (info->flags & GS_OPF_COLLECTIVE) return gs_h_collective;
    if ((info->flags & GS_OPF_ELEMENTWISE) && !(info->flags & GS_OPF_SIDE_EFFECT))
        return gs_h_elementwise;
    return NULL;
}

static void partition_instr(gs_pctx *c, const gs_instr *in) {
    gs_emit *e = c->e;
    c->cur = in;
    e->b.span = in->span;
    const gs_sharding *target = gs_p_sharding_of(c, in);
    /* Inside a partially manual instruction, whole values are whole per manual group. */
    const gs_sharding *lead = target->kind == GS_SHARDING_TUPLE && target->n_tuple > 0
                                  ? target->tuple[0]
                                  : target;
    c->manual = gs_p_partial_manual(lead) ? lead : NULL;
    int start = e->b.comp->n_instrs;
    gs_pvalue r = {0};
    gs_handler h = handler_of(in);
    if (c->opts && c->opts->default_only && in->op != GS_OP_PARAMETER &&
        in->op != GS_OP_TUPLE && in->op != GS_OP_GET_TUPLE_ELEMENT)
        h = NULL;
    if (!h || !h(c, in, target, &r)) {
        if (c->failed) return;
        gs_p_default(c, in, &r);
    }
    if (c->failed) return;
    GS_ASSERT(r.sharding && (r.sharding->kind != GS_SHARDING_TILED ||
                             r.sharding->data_rank == r.base->rank));
    gs_pvalue fin;
    gs_reshard(c, &r, target, &fin);
    if (c->failed) return;
    if (fin.hlo && fin.hlo->parent == e->b.comp && fin.hlo->id >= start &&
        fin.hlo->op != GS_OP_PARAMETER)
        fin.hlo->name = gs_arena_strdup(&e->m->arena, in->name); /* reserved for it */
    if (fin.hlo && !fin.hlo->name) gs_p_oom(c);
    c->vals[in->id] = fin;
    c->done[in->id] = true;
    c->manual = NULL;
}

/* ------------------------------------------------------------------ entry point */

static gs_status reserve_names(gs_pctx *c) {
    gs_emit *e = &c->main;
    for (int ci = 0; ci < c->src->n_comps; ci++) {
        const gs_computation *comp = c->src->comps[ci];
        if (gs_names_reserve(&e->names, &e->m->arena, comp->name) != GS_OK) return GS_ERR;
        for (int i = 0; i < comp->n_instrs; i++)
            if (gs_names_reserve(&e->names, &e->m->arena, comp->instrs[i]->name) != GS_OK)
                return GS_ERR;
    }
    return GS_OK;
}

static gs_status copy_header(gs_pctx *c) {
    const gs_module *src = c->src;
    gs_module *m = c->main.m;
    m->attrs = GS_NEW_ARRAY(&m->arena, gs_module_attr, src->n_attrs + 1);
    if (!m->attrs) return GS_ERR;
    bool wrote_np = false;
    for (int i = 0; i < src->n_attrs; i++) {
        const gs_module_attr *a = &src->attrs[i];
        if (strcmp(a->name, "entry_computation_layout") == 0) continue;
        gs_module_attr *o = &m->attrs[m->n_attrs++];
        o->name = gs_arena_strdup(&m->arena, a->name);
        if (strcmp(a->name, "num_partitions") == 0) {
            o->text = gs_arena_printf(&m->arena, "%lld", (long long)c->n);
            wrote_np = true;
        } else {
            o->text = gs_arena_strdup(&m->arena, a->text);
        }
        if (!o->name || !o->text) return GS_ERR;
    }
    if (!wrote_np) {
        gs_module_attr *v = GS_NEW_ARRAY(&m->arena, gs_module_attr, m->n_attrs + 1);
        if (!v) return GS_ERR;
        memcpy(v, m->attrs, sizeof *v * (size_t)m->n_attrs);
        v[m->n_attrs].name = "num_partitions";
        v[m->n_attrs].text = gs_arena_printf(&m->arena, "%lld", (long long)c->n);
        if (!v[m->n_attrs].text) return GS_ERR;
        m->attrs = v;
        m->n_attrs++;
    }
    m->num_partitions = c->n;
    m->replica_count = src->replica_count;
    if (src->stack_frames) m->stack_frames = gs_arena_strdup(&m->arena, src->stack_frames);
    return GS_OK;
}

gs_status gs_partition(const gs_module *m, const gs_partition_options *opts, gs_module **out,
                       gs_partition_stats *stats, gs_diags *d) {
    *out = NULL;
    if (stats) memset(stats, 0, sizeof *stats);
    if (!m->entry) return gs_error(d, gs_span_none(), "the module has no entry computation");
    int64_t n = opts ? opts->num_partitions : 1;
    if (gs_partition_check(m, n, d) != GS_OK) return GS_ERR;
    gs_pctx *c = calloc(1, sizeof *c);
    if (!c) return gs_error(d, gs_span_none(), "partition: out of memory");
    c->src = m;
    c->opts = opts;
    c->coll = opts && opts->collectives ? opts->collectives : gs_collective_ops_default();
    c->n = n;
    c->d = d;
    c->channel = 1;
    gs_arena_init(&c->scratch);
    c->e = &c->main;
    const gs_computation *entry = m->entry;
    int ni = entry->n_instrs;
    c->vals = calloc((size_t)ni + 1, sizeof *c->vals);
    c->done = calloc((size_t)ni + 1, sizeof *c->done);
    c->n_cache = 1024;
    while (c->n_cache < ni) c->n_cache *= 2;
    c->cache = calloc((size_t)c->n_cache, sizeof *c->cache);
    c->main.m = gs_module_new(m->name);
    if (c->main.m && opts && opts->fail_alloc_at > 0)
        c->main.m->arena.fail_at = c->main.m->arena.n_allocs + opts->fail_alloc_at;
    gs_computation *oentry = NULL;
    if (!c->vals || !c->done || !c->cache || !c->main.m || reserve_names(c) != GS_OK ||
        copy_header(c) != GS_OK || !(oentry = gs_computation_new(c->main.m, entry->name))) {
        gs_p_oom(c);
        goto finish;
    }
    oentry->is_entry = true;
    c->main.m->entry = oentry;
    gs_builder_init(&c->main.b, c->main.m, oentry, &c->main.names);
    /* The parameters first, with their per-device shapes, in number order. */
    for (int i = 0; i < entry->n_params && !c->failed; i++) {
        const gs_instr *p = entry->params[i];
        c->cur = p;
        c->main.b.span = p->span;
        const gs_sharding *s = gs_p_sharding_of(c, p);
        gs_shape *ls = gs_p_local_shape(c, p->shape, s);
        if (!gs_build_parameter(&c->main.b, i, ls, p->name)) gs_p_oom(c);
    }
    const gs_instr **order = c->failed ? NULL : topo_order(gs_p_a(c), entry);
    if (!c->failed && !order) gs_p_oom(c);
    for (int i = 0; i < ni && !c->failed; i++) partition_instr(c, order[i]);
    if (!c->failed) {
        gs_instr *root = c->vals[entry->root->id].hlo;
        if (!root) {
            gs_p_oom(c);
        } else {
            oentry->root = root;
            root->is_root = true;
        }
    }
    /* Allocation failure is sticky in the arena: checked once here, at the boundary. */
    if (c->main.b.failed || (c->main.m && c->main.m->arena.failed) || c->scratch.failed)
        gs_p_oom(c);
finish:
    c->main.stats.n_instrs = oentry ? oentry->n_instrs : 0;
    if (stats) *stats = c->main.stats;
    gs_status st = c->failed ? GS_ERR : GS_OK;
    if (st == GS_OK)
        *out = c->main.m;
    else
        gs_module_free(c->main.m);
    gs_names_free(&c->main.names);
    gs_strmap_free(&c->comps);
    gs_arena_free(&c->scratch);
    free(c->vals);
    free(c->done);
    free(c->cache);
    free(c);
    return st;
}
