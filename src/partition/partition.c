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
 *
 * The helpers the handlers share (errors, shardings as read, clones, scopes, called
 * computations) are in context.c. This file calls them and the handlers and is called by none
 * of them: a handler partitions a called computation through gs_part_partition_called, which
 * comes back to partition_comp here through the context's pointer.
 */
#include "internal.h"
#include "base/internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ validation */

gs_status gs_partition_check(const gs_module *m, int64_t n, gs_diags *d) {
    if (n < 1) return gs_error(d, gs_span_none(), "the number of partitions must be at least 1");
    if (m->num_partitions > 1 && m->num_partitions != n)
        return gs_error(d, gs_span_none(),
                        "the module says num_partitions=%lld, but it is being partitioned for "
                        "%lld devices",
                        (long long)m->num_partitions, (long long)n);
    if (m->replica_count > 1)
        return gs_error(d, gs_span_none(),
                        "the module says replica_count=%lld: partitioning a module that also runs "
                        "as replicas (replicas x partitions devices) is not supported; give it "
                        "replica_count=1",
                        (long long)m->replica_count);
    if (gs_module_check_bounded(m, "partitioning", d) != GS_OK) return GS_ERR;
    gs_status st = GS_OK;
    for (int ci = 0; ci < m->n_comps; ci++) {
        const gs_computation *comp = m->comps[ci];
        for (int i = 0; i < comp->n_instrs; i++) {
            const gs_instr *in = comp->instrs[i];
            const gs_sharding *s = gs_instr_get_sharding(in);
            if (gs_sharding_check_devices(s, in, n, d) != GS_OK) {
                st = GS_ERR;
                continue;
            }
            if (s && comp->is_entry) {
                const char *why;
                gs_arena a;
                gs_arena_init(&a);
                if (!gs_part_normalize(&a, in->shape, s, &why) && why) {
                    gs_error(d, in->span, "%%%s has %s", in->name, why);
                    st = GS_ERR;
                }
                gs_arena_free(&a);
            }
        }
    }
    return st;
}

/* ------------------------------------------------------------------ default action */

/* The default action: every operand replicated (or, in a manual region, as the devices hold
 * it), the op computed on whole values as written, the result replicated. */
static void default_action(gs_part_ctx *c, const gs_instr *in, gs_part_value *out) {
    int n = in->n_operands;
    gs_instr **ops = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, n + 1);
    if (!ops) {
        gs_part_oom(c);
        return;
    }
    const gs_sharding *target = gs_part_sharding_of(c, in);
    const gs_sharding *written = gs_instr_get_sharding(in);
    /* In a manual region the op runs on the devices' own values as written. */
    bool manual = gs_part_all_manual(target) || (written && gs_part_all_manual(written));
    for (int k = 0; k < n; k++) {
        const gs_part_value *v = gs_part_operand(c, in, k);
        gs_part_value r;
        const gs_sharding *want =
            manual && gs_part_all_manual(v->sharding) ? v->sharding
                                                      : gs_part_replicated(c, v->base);
        gs_part_reshard(c, v, want, &r);
        ops[k] = r.hlo;
    }
    out->hlo = gs_part_clone(c, in, in->shape, n, ops);
    out->base = in->shape;
    out->sharding = manual ? target : gs_part_replicated(c, in->shape);
    out->combiner = GS_OP_ADD;
    if (!out->hlo) gs_part_oom(c);
    c->e->stats.n_default++;
}

/* ------------------------------------------------------------------ handler table */

static gs_part_handler handler_of(const gs_instr *in) {
    switch (in->op) {
    case GS_OP_PARAMETER: return gs_part_handle_parameter;
    case GS_OP_CONSTANT: return gs_part_handle_constant;
    case GS_OP_IOTA: return gs_part_handle_iota;
    case GS_OP_TUPLE: return gs_part_handle_tuple;
    case GS_OP_GET_TUPLE_ELEMENT: return gs_part_handle_gte;
    case GS_OP_COPY:
    case GS_OP_OPTIMIZATION_BARRIER: return gs_part_handle_copy;
    case GS_OP_CUSTOM_CALL: return gs_part_handle_custom_call;
    case GS_OP_BROADCAST: return gs_part_handle_broadcast;
    case GS_OP_RESHAPE:
    case GS_OP_BITCAST: return gs_part_handle_reshape;
    case GS_OP_TRANSPOSE: return gs_part_handle_transpose;
    case GS_OP_REVERSE: return gs_part_handle_reverse;
    case GS_OP_SLICE: return gs_part_handle_slice;
    case GS_OP_PAD: return gs_part_handle_pad;
    case GS_OP_CONCATENATE: return gs_part_handle_concatenate;
    case GS_OP_DYNAMIC_SLICE: return gs_part_handle_dynamic_slice;
    case GS_OP_DYNAMIC_UPDATE_SLICE: return gs_part_handle_dynamic_update_slice;
    case GS_OP_DOT:
    case GS_OP_RAGGED_DOT:
    case GS_OP_CONVOLUTION: return gs_part_handle_dot;
    case GS_OP_REDUCE: return gs_part_handle_reduce;
    case GS_OP_SORT: return gs_part_handle_sort;
    case GS_OP_FFT: return gs_part_handle_fft;
    case GS_OP_CHOLESKY:
    case GS_OP_TRIANGULAR_SOLVE: return gs_part_handle_batched_matrix;
    case GS_OP_REDUCE_WINDOW: return gs_part_handle_reduce_window;
    case GS_OP_SELECT_AND_SCATTER: return gs_part_handle_select_and_scatter;
    case GS_OP_BITCAST_CONVERT: return gs_part_handle_elementwise;
    case GS_OP_TOPK: return gs_part_handle_topk;
    case GS_OP_BATCH_NORM_INFERENCE: return gs_part_handle_batch_norm_inference;
    case GS_OP_BATCH_NORM_TRAINING: return gs_part_handle_batch_norm_training;
    case GS_OP_BATCH_NORM_GRAD: return gs_part_handle_batch_norm_grad;
    case GS_OP_GATHER: return gs_part_handle_gather;
    case GS_OP_SCATTER: return gs_part_handle_scatter;
    case GS_OP_WHILE: return gs_part_handle_while;
    case GS_OP_CALL: return gs_part_handle_call;
    case GS_OP_CONDITIONAL: return gs_part_handle_conditional;
    case GS_OP_RNG: return gs_part_handle_rng;
    case GS_OP_INFEED: return gs_part_handle_infeed;
    default: break;
    }
    const gs_op_info *info = gs_op_info_of(in->op);
    if (info->flags & GS_OPF_COLLECTIVE) return gs_part_handle_collective;
    if ((info->flags & GS_OPF_ELEMENTWISE) && !(info->flags & GS_OPF_SIDE_EFFECT))
        return gs_part_handle_elementwise;
    return NULL;
}

/* ------------------------------------------------------------------ no silent replication */

/* Into how many parts a value sharded by leaf s is computed: its data tiles times its partial
 * (unreduced) groups; manual values count as fully split (they are the user's). */
static int64_t split_of(const gs_sharding *s, int64_t n) {
    if (s->kind == GS_SHARDING_MANUAL || s->kind == GS_SHARDING_UNREDUCED) return n;
    if (s->kind != GS_SHARDING_TILED) return 1;
    int64_t k = 1;
    for (int i = 0; i < s->tiles.rank; i++) {
        bool data = i < s->data_rank;
        int sub = i - s->data_rank;
        if (data || s->subgroups[sub] == GS_SUBGROUP_UNREDUCED) k *= s->tiles.dims[i];
        if (!data && s->subgroups[sub] == GS_SUBGROUP_MANUAL) return n;
    }
    return k;
}

/* Array leaf l (depth first) of shape s, or NULL. */
static const gs_shape *leaf_shape(const gs_shape *s, int *l) {
    if (s->type != GS_TUPLE) return (*l)-- == 0 ? s : NULL;
    for (int i = 0; i < s->n_tuple; i++) {
        const gs_shape *r = leaf_shape(s->tuple[i], l);
        if (r || *l < 0) return r;
    }
    return NULL;
}

static const gs_shape *shape_leaf(const gs_shape *s, int l) { return leaf_shape(s, &l); }

/* Bytes of the per-device part of array leaf `base` under leaf sharding s. */
static int64_t local_bytes(const gs_shape *base, const gs_sharding *s) {
    if (s->kind != GS_SHARDING_TILED || s->data_rank != base->rank) return gs_shape_bytes(base);
    int64_t dims[GS_MAX_RANK], n = 1;
    gs_sharding_shard_dims(s, base->rank, base->dims, dims);
    for (int i = 0; i < base->rank; i++) n *= dims[i];
    return n * gs_type_size(base->type);
}


/* Reports instruction `in` computed on more of its value than its sharding gives a device: the
 * default action on sharded data (took_default), or a handler whose result `got` is split into
 * fewer parts than `target`. A warning (an error with opts->strict), counted in the stats. */
static void report_whole(gs_part_ctx *c, const gs_instr *in, bool took_default,
                         const gs_sharding *target, const gs_sharding *got) {
    if (c->e->dry || in->op == GS_OP_PARAMETER || in->op == GS_OP_GET_TUPLE_ELEMENT ||
        in->op == GS_OP_TUPLE)
        return; /* plumbing: the value is as its producer made it */
    if (in->op == GS_OP_CONSTANT)
        return; /* a literal: nothing is computed, and the reshard to its sharding is a slice of
                   it on each device (XLA's HandleConstant) */
    const char *target_name = in->op == GS_OP_CUSTOM_CALL
                                  ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET)
                                  : NULL;
    if (target_name && strcmp(target_name, "Sharding") == 0) return; /* a reshard marker */
    if (target_name && strcmp(target_name, "xla.debug.Log") == 0)
        return; /* it logs whole values, as in XLA: its gather is what was asked */
    int leaves = in->shape->type == GS_TUPLE ? gs_shape_n_leaves(in->shape) : 1;
    int64_t gathered = 0, want = 0, have = 0;
    bool sharded = false;
    for (int k = 0; took_default && k < in->n_operands; k++) {
        const gs_part_value *v = gs_part_operand(c, in, k);
        int nl = v->base->type == GS_TUPLE ? gs_shape_n_leaves(v->base) : 1;
        for (int l = 0; l < nl; l++) {
            const gs_sharding *ls = gs_sharding_leaf(v->sharding, v->base, l);
            const gs_shape *lb = v->base->type == GS_TUPLE ? shape_leaf(v->base, l) : v->base;
            int64_t k_split = lb ? split_of(ls, c->n) : 1;
            if (k_split > 1 && ls->kind != GS_SHARDING_MANUAL && gs_sharding_manual_dim(ls) < 0) {
                sharded = true;
                gathered += gs_shape_bytes(lb) - local_bytes(lb, ls);
            }
        }
    }
    for (int l = 0; l < leaves; l++) {
        const gs_shape *lb = in->shape->type == GS_TUPLE ? shape_leaf(in->shape, l) : in->shape;
        if (!lb || !gs_type_is_array(lb->type)) continue;
        const gs_sharding *lt = gs_sharding_leaf(target, in->shape, l);
        const gs_sharding *lg = gs_sharding_leaf(got, in->shape, l);
        if (lt->kind == GS_SHARDING_MANUAL || gs_sharding_manual_dim(lt) >= 0)
            continue; /* the user's own per-device values */
        int64_t kt = split_of(lt, c->n), kg = took_default ? 1 : split_of(lg, c->n);
        if (kg < kt) {
            sharded = true;
            want += local_bytes(lb, lt);
            have += took_default ? gs_shape_bytes(lb) : local_bytes(lb, lg);
        }
    }
    if (!sharded) return;
    c->e->stats.n_replicated++;
    if (c->opts && c->opts->no_warnings && !c->opts->strict) return;
    gs_arena *a = gs_part_arena(c);
    char *ts = gs_sharding_to_string(a, target);
    char what[256];
    if (took_default)
        snprintf(what, sizeof what, "no partitioning rule for %s: computed whole on every device",
                 gs_op_name(in->op));
    else
        snprintf(what, sizeof what, "%s computed on more than its sharding gives a device",
                 gs_op_name(in->op));
    char detail[256];
    int len = snprintf(detail, sizeof detail, "its sharding %s", ts ? ts : "?");
    if (gathered > 0)
        len += snprintf(detail + len, sizeof detail - (size_t)len, "; operands gathered: %lld bytes",
                        (long long)gathered);
    if (have > want)
        snprintf(detail + len, sizeof detail - (size_t)len,
                 "; result computed on %lld bytes per device instead of %lld", (long long)have,
                 (long long)want);
    if (c->opts && c->opts->strict)
        gs_part_error(c, "%%%s%s: %s (%s) [--strict]", in->name, gs_part_origin(c, in), what, detail);
    else
        gs_warning(c->d, in->span, "%%%s%s: %s (%s)", in->name, gs_part_origin(c, in), what, detail);
}

/* Does `in`, an op whose result has its operands' element type, mix float types (as XLA's
 * verifier allows for mixed precision)? The handlers build such ops from their operands'
 * types, so they take the default action, which keeps the instruction as written. */
static bool mixed_precision(const gs_instr *in) {
    gs_op_family f = gs_op_info_of(in->op)->family;
    if (!gs_op_family_moves_data(f) && f != GS_FAM_UNARY && f != GS_FAM_BINARY &&
        f != GS_FAM_TERNARY && f != GS_FAM_COPY)
        return false;
    gs_type rt = in->shape->type;
    if (!gs_type_is_float(rt)) return false;
    for (int k = 0; k < in->n_operands; k++) {
        gs_type t = in->operands[k]->shape->type;
        if (gs_type_is_float(t) && t != rt) return true;
    }
    return false;
}

static void partition_instr(gs_part_ctx *c, const gs_instr *in) {
    gs_part_emit *e = c->e;
    c->cur = in;
    e->b.span = in->span;
    const gs_sharding *target = gs_part_sharding_of(c, in);
    /* Inside a partially manual instruction, whole values are whole per manual group. */
    const gs_sharding *lead = target->kind == GS_SHARDING_TUPLE && target->n_tuple > 0
                                  ? target->tuple[0]
                                  : target;
    c->manual = gs_part_partial_manual(lead) ? lead : NULL;
    int start = e->b.comp->n_instrs;
    gs_part_value r = {0};
    gs_part_handler h = handler_of(in);
    bool plumbing = in->op == GS_OP_PARAMETER || in->op == GS_OP_TUPLE ||
                    in->op == GS_OP_GET_TUPLE_ELEMENT;
    if (c->opts && c->opts->default_only && !plumbing) h = NULL;
    /* Inside a manual region an op runs on the devices' own values as written: the default
     * action's manual case (control flow, the region's custom-calls and infeed, which marks
     * what each device reads, keep their handlers). */
    gs_op_family fam = gs_op_info_of(in->op)->family;
    if (gs_part_all_manual(target) && !plumbing && fam != GS_FAM_WHILE && fam != GS_FAM_CALL &&
        fam != GS_FAM_CONDITIONAL && in->op != GS_OP_CUSTOM_CALL && in->op != GS_OP_INFEED)
        h = NULL;
    if (mixed_precision(in)) h = NULL; /* computed as written, so the op's own checks apply */
    bool took_default = false;
    if (!h || !h(c, in, target, &r)) {
        if (c->failed) return;
        default_action(c, in, &r);
        took_default = true;
    }
    if (c->failed) return;
    report_whole(c, in, took_default, target, r.sharding);
    if (c->failed) return;
    GS_ASSERT(r.sharding && (r.sharding->kind != GS_SHARDING_TILED ||
                             r.sharding->data_rank == r.base->rank));
    gs_part_value fin;
    gs_part_reshard(c, &r, target, &fin);
    if (c->failed) return;
    if (c->keep_names && in->op != GS_OP_PARAMETER && fin.hlo && fin.hlo->parent == e->b.comp &&
        fin.hlo->id >= start && fin.hlo->op != GS_OP_PARAMETER)
        fin.hlo->name = gs_arena_strdup(&e->m->arena, in->name); /* reserved for it */
    if (fin.hlo && !fin.hlo->name) gs_part_oom(c);
    c->vals[in->id] = fin;
    c->done[in->id] = true;
    c->manual = NULL;
}

/* ------------------------------------------------------------------ entry point */

static gs_status reserve_names(gs_part_ctx *c) {
    gs_part_emit *e = &c->main;
    for (int ci = 0; ci < c->src->n_comps; ci++) {
        const gs_computation *comp = c->src->comps[ci];
        if (gs_names_reserve(&e->names, &e->m->arena, comp->name) != GS_OK) return GS_ERR;
        for (int i = 0; i < comp->n_instrs; i++)
            if (gs_names_reserve(&e->names, &e->m->arena, comp->instrs[i]->name) != GS_OK)
                return GS_ERR;
    }
    return GS_OK;
}

static gs_status copy_header(gs_part_ctx *c) {
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

/* ------------------------------------------------------------------ computations */

/* Partitions source computation src into the empty output computation dst: its parameters with
 * the per-device shapes of param_sh, every instruction operands first, its root resharded to
 * root_sh (NULL: left as the root's own sharding made it). The caller's scope is kept. */
static void partition_comp(gs_part_ctx *c, const gs_computation *src, gs_computation *dst,
                           const gs_sharding *const *param_sh, const gs_sharding *root_sh,
                           bool keep_names) {
    gs_part_scope *saved = gs_part_enter_computation(c, dst);
    if (!saved) return;
    gs_part_emit *e = c->e;
    int ni = src->n_instrs;
    c->vals = calloc((size_t)ni + 1, sizeof *c->vals);
    c->done = calloc((size_t)ni + 1, sizeof *c->done);
    c->n_cache = 1024;
    while (c->n_cache < ni) c->n_cache *= 2;
    c->cache = calloc((size_t)c->n_cache, sizeof *c->cache);
    c->param_sh = param_sh;
    c->keep_names = keep_names;
    c->manual = NULL;
    if (!c->vals || !c->done || !c->cache) gs_part_oom(c);
    /* The parameters first, with their per-device shapes, in number order. */
    for (int i = 0; i < src->n_params && !c->failed; i++) {
        const gs_instr *p = src->params[i];
        c->cur = p;
        e->b.span = p->span;
        gs_shape *ls = gs_part_local_shape(c, p->shape, param_sh[i]);
        const char *name = keep_names ? p->name : gs_names_fresh(&e->names, &e->m->arena, p->name);
        if (!ls || !name || !gs_build_parameter(&e->b, i, ls, name)) gs_part_oom(c);
    }
    const gs_instr **order = c->failed ? NULL : gs_part_topo_order(gs_part_arena(c), src);
    if (!c->failed && !order) gs_part_oom(c);
    for (int i = 0; i < ni && !c->failed; i++) partition_instr(c, order[i]);
    if (!c->failed && src->root) {
        gs_part_value fin = c->vals[src->root->id];
        c->cur = src->root;
        if (root_sh) gs_part_reshard(c, &c->vals[src->root->id], root_sh, &fin);
        if (!c->failed && !fin.hlo) gs_part_oom(c);
        if (!c->failed) {
            dst->root = fin.hlo;
            fin.hlo->is_root = true;
        }
    }
    free(c->vals);
    free(c->done);
    free(c->cache);
    gs_part_leave_computation(c, saved);
}

/* Orders the output's computations so that each comes after those it calls (the entry last). */
static void order_comps(gs_part_ctx *c) {
    gs_module *m = c->main.m;
    int n = m->n_comps, k = 0;
    gs_computation **out = GS_NEW_ARRAY(gs_part_arena(c), gs_computation *, n + 1);
    gs_strmap placed = {0};
    if (!out) {
        gs_part_oom(c);
        return;
    }
    /* Repeatedly place the computations whose callees are all placed (n is small). */
    for (bool progress = true; progress && k < n;) {
        progress = false;
        for (int i = 0; i < n; i++) {
            gs_computation *comp = m->comps[i];
            if (gs_strmap_get(&placed, comp->name) || (comp == m->entry && k < n - 1)) continue;
            bool ready = true;
            for (int j = 0; ready && j < comp->n_instrs; j++) {
                gs_computation *called[64];
                int nc = gs_instr_called(comp->instrs[j], called, 64);
                for (int q = 0; ready && q < nc && q < 64; q++)
                    ready = !called[q] || called[q] == comp || gs_strmap_get(&placed, called[q]->name);
            }
            if (!ready) continue;
            out[k++] = comp;
            if (gs_strmap_put(&placed, comp->name, comp) != GS_OK) gs_part_oom(c);
            progress = true;
        }
    }
    if (k == n) memcpy(m->comps, out, sizeof *out * (size_t)n);
    gs_strmap_free(&placed);
}

/* Does m look like an SPMD program already (a partitioner's output, or a per-rank dump): its
 * name ends in "_spmd", or it has partition-id or collectives and no sharding anywhere? The
 * instruction that shows it in *why_at (NULL for the name). */
static bool looks_spmd(const gs_module *m, const gs_instr **why_at) {
    *why_at = NULL;
    size_t len = m->name ? strlen(m->name) : 0;
    if (len >= 5 && strcmp(m->name + len - 5, "_spmd") == 0) return true;
    for (int ci = 0; ci < m->n_comps; ci++)
        for (int i = 0; i < m->comps[ci]->n_instrs; i++) {
            const gs_instr *in = m->comps[ci]->instrs[i];
            if (gs_instr_get_sharding(in)) return false;
            bool device_op = in->op == GS_OP_PARTITION_ID ||
                             (gs_op_info_of(in->op)->flags & GS_OPF_COLLECTIVE);
            if (device_op && !*why_at) *why_at = in;
        }
    return *why_at != NULL;
}

gs_status gs_partition(const gs_module *m, const gs_partition_options *opts, gs_module **out,
                       gs_partition_stats *stats, gs_diags *d) {
    *out = NULL;
    if (stats) memset(stats, 0, sizeof *stats);
    if (!m->entry) return gs_error(d, gs_span_none(), "the module has no entry computation");
    int64_t n = opts ? opts->num_partitions : 1;
    if (gs_partition_check(m, n, d) != GS_OK) return GS_ERR;
    const gs_instr *spmd_at;
    if (!(opts && opts->no_warnings) && looks_spmd(m, &spmd_at)) {
        if (spmd_at)
            gs_warning(d, spmd_at->span,
                       "the module looks like an SPMD program already (%s %%%s and no sharding "
                       "anywhere): partitioning takes it as the program of one device; to run it "
                       "as it is, give it to `run --spmd`",
                       gs_op_name(spmd_at->op), spmd_at->name);
        else
            gs_warning(d, gs_span_none(),
                       "the module looks like an SPMD program already (its name '%s' ends in "
                       "_spmd): partitioning takes it as the program of one device; to run it as "
                       "it is, give it to `run --spmd`",
                       m->name);
    }
    gs_part_ctx *c = calloc(1, sizeof *c);
    if (!c) return gs_error(d, gs_span_none(), "partition: out of memory");
    c->src = m;
    c->opts = opts;
    c->coll = opts && opts->collectives ? opts->collectives : gs_collective_ops_default();
    c->n = n;
    c->d = d;
    c->channel = 1;
    c->partition_comp = partition_comp;
    gs_arena_init(&c->scratch);
    c->e = &c->main;
    const gs_computation *entry = m->entry;
    c->main.m = gs_module_new(m->name);
    if (c->main.m && opts && opts->fail_alloc_at > 0)
        c->main.m->arena.fail_at = c->main.m->arena.n_allocs + opts->fail_alloc_at;
    gs_computation *oentry = NULL;
    const gs_sharding **param_sh = NULL;
    if (!c->main.m || reserve_names(c) != GS_OK || copy_header(c) != GS_OK ||
        !(oentry = gs_computation_new(c->main.m, entry->name)) ||
        gs_strmap_put(&c->out_names, entry->name, oentry) != GS_OK ||
        !(param_sh = GS_NEW_ARRAY(gs_part_arena(c), const gs_sharding *, entry->n_params + 1))) {
        gs_part_oom(c);
        goto finish;
    }
    oentry->is_entry = true;
    c->main.m->entry = oentry;
    gs_builder_init(&c->main.b, c->main.m, oentry, &c->main.names);
    for (int i = 0; i < entry->n_params && !c->failed; i++)
        param_sh[i] = gs_part_sharding_of(c, entry->params[i]);
    if (!c->failed) partition_comp(c, entry, oentry, param_sh, NULL, true);
    if (!c->failed) order_comps(c);
    /* Allocation failure is sticky in the arena: checked once here, at the boundary. */
    if (c->main.b.failed || (c->main.m && c->main.m->arena.failed) || c->scratch.failed)
        gs_part_oom(c);
finish:
    c->main.stats.n_instrs = 0;
    for (int i = 0; c->main.m && i < c->main.m->n_comps; i++)
        c->main.stats.n_instrs += c->main.m->comps[i]->n_instrs;
    if (stats) *stats = c->main.stats;
    /* The program must verify as a module for n devices: collectives written in the input (in
     * manual regions, say) may name devices it does not have. Their spans are the input's. */
    if (!c->failed && c->main.m && gs_module_verify(c->main.m, d) != GS_OK) c->failed = true;
    gs_status st = c->failed ? GS_ERR : GS_OK;
    if (st == GS_OK)
        *out = c->main.m;
    else
        gs_module_free(c->main.m);
    gs_names_free(&c->main.names);
    gs_strmap_free(&c->comps);
    gs_strmap_free(&c->parts);
    gs_strmap_free(&c->out_names);
    gs_strmap_free(&c->callers);
    gs_arena_free(&c->scratch);
    free(c);
    return st;
}
