/*
 * src/mlir/shardings.c — the shardings a StableHLO module carries, read into the IR's shardings
 * the way XLA's import and Shardy's export give them to the SPMD partitioner:
 *   - `mhlo.sharding = "{devices=[2,1]<=[2]}"`: HLO sharding text, on function arguments and
 *     results and on ops (gs_sharding_parse);
 *   - Shardy: `sdy.mesh @mesh = <["x"=2, "y"=4]>` at module level, `#sdy.sharding<@mesh,
 *     [{"x"}, {}]>` on arguments and results, `#sdy.sharding_per_value<[<...>, ...]>` on ops
 *     (gs_sharding_parse_sdy keeps the named form: open dims and priorities);
 *   - `sdy.sharding_constraint %x <@mesh, [...]>`: a `Sharding` custom-call;
 *   - `sdy.manual_computation(%a) in_shardings=[...] out_shardings=[...] manual_axes={"x"}
 *     (%b: local type) { ... sdy.return ... }`: shard_map's manual region, as XLA's export
 *     writes it: per operand `Sharding` then `SPMDFullToShardShape` (manual on the manual
 *     axes, the rest still tiled), a call of the region, per result `Sharding` then
 *     `SPMDShardToFullShape`;
 *   - `sdy.constant`: a constant; `sdy.sharding_group`: XLA's `xla.sdy.ShardingGroup`
 *     custom-call with no result (the group id in its frontend attributes);
 *   - `sdy.data_flow_edge`, `sdy.reshard`, `sdy.func_data_flow_edge`,
 *     `sdy.propagation_barrier`: custom-calls of their own name (printed back as written).
 * A sharding that does not fit its value (rank, tuple size, undefined mesh or axis) is one
 * located error.
 */
#include "mlir/internal.h"

#include "gspmd/sharding.h"

#include <string.h>

/* ------------------------------------------------------------------ meshes */

static gs_mesh_table mesh_table(const reader *r) {
    gs_mesh_table t = {(int)r->mesh_names.n, r->mesh_names.data, r->meshes.data};
    return t;
}

/* `@name = <["x"=2, ...]>` after `sdy.mesh`. */
bool mlir_parse_mesh_decl(reader *r) {
    size_t at = (mlir_skip_ws(r), r->pos);
    const char *name;
    if (!mlir_parse_symbol(r, &name) || !mlir_expect(r, '=', "after the mesh name")) return false;
    gs_mesh_table t = mesh_table(r);
    if (gs_mesh_table_find(&t, name, strlen(name)))
        return mlir_fail_at(r, at, "mesh @%s is defined twice", name);
    mlir_skip_ws(r);
    gs_mesh mesh;
    size_t used;
    if (gs_mesh_parse_sdy(r->a, r->s + r->pos, r->len - r->pos, &mesh, &used, r->d,
                          mlir_span_at(r, r->pos)) != GS_OK)
        return r->failed = true, false;
    r->pos += used;
    if (gs_vec_push(&r->mesh_names, &name) != GS_OK || gs_vec_push(&r->meshes, &mesh) != GS_OK)
        return mlir_oom(r);
    return true;
}

/* ------------------------------------------------------------------ one sharding */

/* Is s a sharding for a value of shape `shape`? Else a located error at `at`. */
static bool check_fits(reader *r, const gs_sharding *s, const gs_shape *shape, size_t at) {
    if (gs_shape_is_tuple(shape)) {
        if (s->kind != GS_SHARDING_TUPLE) return true; /* one sharding for every element */
        if (s->n_tuple != gs_shape_n_leaves(shape))
            return mlir_fail_at(r, at, "a sharding of %d values on an op with %d results",
                                s->n_tuple, gs_shape_n_leaves(shape));
        for (int i = 0; i < shape->n_tuple; i++)
            if (!check_fits(r, s->tuple[i], shape->tuple[i], at)) return false;
        return true;
    }
    if (s->kind == GS_SHARDING_TUPLE && s->n_tuple != 1)
        return mlir_fail_at(r, at, "a sharding of %d values on one tensor", s->n_tuple);
    if (s->kind == GS_SHARDING_TUPLE) s = s->tuple[0];
    if (s->kind == GS_SHARDING_TILED && gs_shape_is_array(shape) && s->data_rank != shape->rank)
        return mlir_fail_at(r, at, "the sharding splits %d dimensions, the tensor has rank %d",
                            s->data_rank, shape->rank);
    return true;
}

bool mlir_sharding_fits(reader *r, const gs_sharding *s, const gs_shape *shape, size_t at) {
    return check_fits(r, s, shape, at);
}

/* A Shardy tensor sharding at the cursor (`<@mesh, [...]>`, or with `#sdy.sharding` before). */
static bool parse_sdy(reader *r, gs_sharding **out) {
    mlir_skip_ws(r);
    if (mlir_cur(r) == '#') {
        r->pos++;
        if (!mlir_accept_word(r, "sdy.sharding"))
            return FAIL(r, "expected a #sdy.sharding, found %s", mlir_found(r));
        mlir_skip_ws(r);
    }
    if (mlir_cur(r) != '<')
        return FAIL(r, "expected '<' opening a sharding, found %s", mlir_found(r));
    gs_mesh_table t = mesh_table(r);
    size_t used;
    if (gs_sharding_parse_sdy(r->a, &t, r->s + r->pos, r->len - r->pos, out, &used, r->d,
                              mlir_span_at(r, r->pos)) != GS_OK)
        return r->failed = true, false;
    r->pos += used;
    return true;
}

/* `[<...>, <...>]`: n (≤ max) Shardy tensor shardings. */
static bool parse_sdy_list(reader *r, gs_sharding **v, int *n, int max) {
    *n = 0;
    if (!mlir_expect(r, '[', "opening a list of shardings")) return false;
    if (mlir_accept(r, ']')) return true;
    do {
        if (*n >= max) return FAIL(r, "too many shardings");
        if (!parse_sdy(r, &v[(*n)++])) return false;
    } while (mlir_accept(r, ','));
    return mlir_expect(r, ']', "closing the list of shardings");
}

/* The sharding an attribute pair gives (`mhlo.sharding` or `sdy.sharding`), or NULL when it is
 * neither. */
static bool sharding_of(reader *r, const kv *k, gs_sharding **out) {
    *out = NULL;
    if (strcmp(k->key, "mhlo.sharding") == 0) {
        if (!k->ident || r->s[k->value_pos] != '"')
            return mlir_fail_at(r, k->value_pos, "mhlo.sharding must be a string");
        if (gs_sharding_parse(r->a, k->ident, strlen(k->ident), out, r->d,
                              mlir_span_at(r, k->value_pos + 1)) != GS_OK)
            return r->failed = true, false;
        return true;
    }
    if (strcmp(k->key, "sdy.sharding") != 0) return true;
    size_t save = r->pos;
    r->pos = k->value_pos;
    bool ok;
    if (mlir_cur(r) == '#' && (r->pos++, mlir_accept_word(r, "sdy.sharding_per_value"))) {
        gs_sharding *v[64];
        int n;
        ok = mlir_expect(r, '<', "after #sdy.sharding_per_value") && parse_sdy_list(r, v, &n, 64) &&
             mlir_expect(r, '>', "closing #sdy.sharding_per_value");
        if (ok) {
            *out = n == 1 ? v[0] : gs_sharding_tuple(r->a, n, v);
            if (!*out) ok = mlir_oom(r);
        }
    } else {
        r->pos = k->value_pos;
        ok = parse_sdy(r, out);
    }
    r->pos = save;
    return ok;
}

/* The sharding among attribute pairs kvs (NULL when none) for a value of shape `shape`. */
bool mlir_sharding_from_kvs(reader *r, const gs_vec *kvs, const gs_shape *shape,
                            gs_sharding **out) {
    *out = NULL;
    for (size_t i = 0; i < kvs->n; i++) {
        const kv *k = &GS_VEC_AT(kvs, kv, i);
        gs_sharding *s;
        if (!sharding_of(r, k, &s)) return false;
        if (!s) continue;
        if (!check_fits(r, s, shape, k->value_pos)) return false;
        *out = s;
    }
    return true;
}

bool mlir_sharding_from_kvs_as_written(reader *r, const gs_vec *kvs, gs_sharding **out) {
    *out = NULL;
    for (size_t i = 0; i < kvs->n; i++) {
        gs_sharding *s;
        if (!sharding_of(r, &GS_VEC_AT(kvs, kv, i), &s)) return false;
        if (s) *out = s;
    }
    return true;
}

/* `sdy.sharding_rule = #sdy.op_sharding_rule<...>` on an op: checked against it, kept in its
 * frontend attributes as XLA keeps it in HLO (`xla.sdy.sharding_rule="..."`), where the rule
 * builder (gs_op_rule_build) finds it. */
static bool keep_sharding_rule(reader *r, gs_instr *in, const gs_vec *kvs) {
    const kv *k = mlir_find_kv(kvs, "sdy.sharding_rule");
    if (!k) return true;
    gs_op_rule *rule;
    size_t used;
    gs_span at = mlir_span_at(r, k->value_pos);
    if (gs_op_rule_parse(r->a, r->s + k->value_pos, r->len - k->value_pos, in, &rule, &used, r->d,
                         at) != GS_OK) {
        r->failed = true;
        return false;
    }
    gs_sb sb = {0};
    gs_sb_puts(&sb, "{xla.sdy.sharding_rule=\"");
    gs_sb_putn(&sb, r->s + k->value_pos, used);
    gs_sb_puts(&sb, "\"}");
    gs_attr fa = {.key = GS_ATTR_FRONTEND_ATTRIBUTES, .name = "frontend_attributes"};
    fa.u.s = gs_arena_strdup(r->a, gs_sb_str(&sb));
    gs_sb_free(&sb);
    if (!fa.u.s || gs_instr_set_attr(r->m, in, &fa) != GS_OK) return mlir_oom(r);
    return true;
}

bool mlir_apply_op_sharding(reader *r, gs_instr *in, const gs_vec *kvs) {
    gs_sharding *s;
    if (!mlir_sharding_from_kvs(r, kvs, in->shape, &s)) return false;
    if (s && gs_instr_set_sharding(r->m, in, s) != GS_OK) return mlir_oom(r);
    return keep_sharding_rule(r, in, kvs);
}

/* ------------------------------------------------------------------ sdy ops */

gs_instr *mlir_custom_call(reader *r, const char *target, const gs_shape *shape, int n,
                           gs_instr **ops, const gs_sharding *s) {
    gs_instr *in = gs_build(&r->b, GS_OP_CUSTOM_CALL, shape, n, ops);
    if (!in) return NULL;
    gs_attr t = {.key = GS_ATTR_CUSTOM_CALL_TARGET, .name = "custom_call_target"};
    t.u.s = gs_arena_strdup(r->a, target);
    if (!t.u.s) return NULL;
    if (gs_instr_set_attr(r->m, in, &t) != GS_OK) return NULL;
    if (s && gs_instr_set_sharding(r->m, in, s) != GS_OK) return NULL;
    return r->b.failed ? NULL : in;
}

/* Appends ref to list l (arena copy). */
static bool list_add(reader *r, gs_axis_list *l, gs_axis_ref ref) {
    gs_axis_ref *v = GS_NEW_ARRAY(r->a, gs_axis_ref, l->n + 1);
    if (!v) return false;
    if (l->n) memcpy(v, l->v, sizeof *v * (size_t)l->n);
    v[l->n++] = ref;
    l->v = v;
    return true;
}

/* The sharding of a manual region's local value: `global`'s named form with the manual axes
 * (manual[0..n_manual), mesh axis indices) taken out of its dims and marked manual. */
static bool local_sharding(reader *r, const gs_sharding *global, const int *manual, int n_manual,
                           size_t at, gs_sharding **out) {
    const gs_named *g = global->named;
    if (!g || g->form != GS_NAMED_DIMS)
        return mlir_fail_at(r, at, "a manual computation's shardings must be #sdy shardings");
    gs_named *nm = GS_NEW(r->a, gs_named);
    gs_axis_list *dims = GS_NEW_ARRAY(r->a, gs_axis_list, g->n_dims ? g->n_dims : 1);
    if (!nm || !dims) return mlir_oom(r);
    *nm = *g;
    memset(&nm->replicated, 0, sizeof nm->replicated);
    memset(&nm->manual, 0, sizeof nm->manual);
    for (int a = 0; a < n_manual; a++) {
        gs_axis_ref ref = {manual[a], 0, g->mesh.sizes[manual[a]]};
        if (!list_add(r, &nm->manual, ref)) return mlir_oom(r);
    }
    for (int d = 0; d < g->n_dims; d++) {
        dims[d] = (gs_axis_list){0};
        dims[d].open = g->dims[d].open;
        for (int j = 0; j < g->dims[d].n; j++) {
            bool is_manual = false;
            for (int a = 0; a < n_manual; a++) is_manual |= g->dims[d].v[j].axis == manual[a];
            if (!is_manual && !list_add(r, &dims[d], g->dims[d].v[j])) return mlir_oom(r);
        }
    }
    for (int j = 0; j < g->replicated.n; j++) {
        bool is_manual = false;
        for (int a = 0; a < n_manual; a++) is_manual |= g->replicated.v[j].axis == manual[a];
        if (!is_manual && !list_add(r, &nm->replicated, g->replicated.v[j])) return mlir_oom(r);
    }
    nm->dims = dims;
    if (gs_sharding_from_named(r->a, nm, out) != GS_OK) return mlir_oom(r);
    (*out)->named = nm; /* its manual axes: for Shardy's propagation, and printing back */
    return true;
}

/* Shardy's verifier on one edge of a manual computation: in each dim of sharding s (of the
 * global shape g) the manual axes come before the free ones, and the local shape l is g with
 * each dim divided by its manual axes. what/i name the edge in the error ("operand", 0). */
static bool check_local_type(reader *r, const gs_sharding *s, const gs_shape *g, const gs_shape *l,
                             const int *manual, int n_manual, const char *what, int i, size_t at) {
    const gs_named *nm = s->named;
    if (!nm || nm->form != GS_NAMED_DIMS || !gs_shape_is_array(g)) return true;
    int64_t want[GS_MAX_RANK];
    for (int d = 0; d < g->rank && d < nm->n_dims; d++) {
        int64_t div = 1;
        bool free_seen = false;
        for (int j = 0; j < nm->dims[d].n; j++) {
            const gs_axis_ref *ax = &nm->dims[d].v[j];
            bool is_manual = false;
            for (int a = 0; a < n_manual; a++) is_manual |= ax->axis == manual[a];
            if (is_manual && free_seen)
                return mlir_fail_at(r, at,
                                    "the manual computation's %s %d: in dim %d a manual axis comes "
                                    "after a free one (manual axes must be major-most)",
                                    what, i, d);
            free_seen |= !is_manual;
            if (is_manual) div *= ax->size;
        }
        if (div <= 0 || g->dims[d] % div != 0)
            return mlir_fail_at(r, at,
                                "the manual computation's %s %d: dim %d of size %lld does not "
                                "split over its manual axes (%lld ways)",
                                what, i, d, (long long)g->dims[d], (long long)div);
        want[d] = g->dims[d] / div;
    }
    bool same = gs_shape_is_array(l) && l->rank == g->rank && l->type == g->type;
    for (int d = 0; same && d < g->rank; d++) same = l->dims[d] == want[d];
    if (same) return true;
    gs_shape w = *g;
    w.dims = want;
    return mlir_fail_at(r, at, "the manual computation's %s %d is %s in its body, not %s (%s "
                               "split over its manual axes)",
                        what, i, gs_shape_to_string(r->a, l), gs_shape_to_string(r->a, &w),
                        gs_shape_to_string(r->a, g));
}

/* In a partly manual region the shardings written on its ops name only the free axes: each
 * becomes its local form, the region's manual axes marked manual (as on its arguments), so that
 * propagation and partitioning see the manual subgroup. */
static bool manual_inside(reader *r, gs_computation *body, const int *manual, int n_manual,
                          size_t at) {
    for (int i = 0; i < body->n_instrs; i++) {
        gs_instr *in = body->instrs[i];
        const gs_sharding *s = gs_instr_get_sharding(in);
        if (!s) continue;
        int n = s->kind == GS_SHARDING_TUPLE ? s->n_tuple : 1;
        gs_sharding **leaves = GS_NEW_ARRAY(r->a, gs_sharding *, n);
        if (!leaves) return mlir_oom(r);
        bool changed = false;
        for (int k = 0; k < n; k++) {
            gs_sharding *l = s->kind == GS_SHARDING_TUPLE ? s->tuple[k] : (gs_sharding *)s;
            leaves[k] = l;
            if (!l->named || l->named->form != GS_NAMED_DIMS) continue;
            if (!local_sharding(r, l, manual, n_manual, at, &leaves[k])) return false;
            changed = true;
        }
        if (!changed) continue;
        gs_sharding *ns = s->kind == GS_SHARDING_TUPLE ? gs_sharding_tuple(r->a, n, leaves)
                                                       : leaves[0];
        if (!ns || gs_instr_set_sharding(r->m, in, ns) != GS_OK) return mlir_oom(r);
    }
    return true;
}

/* `manual_axes={"x", "y"}` into mesh axis indices of `mesh`. */
static bool parse_manual_axes(reader *r, const gs_mesh *mesh, int *axes, int *n) {
    *n = 0;
    if (!mlir_accept_word(r, "manual_axes") || !mlir_expect(r, '=', "after manual_axes") ||
        !mlir_expect(r, '{', "opening the manual axes"))
        return FAIL(r, "expected manual_axes={...}, found %s", mlir_found(r));
    if (mlir_accept(r, '}')) return true;
    do {
        size_t at = (mlir_skip_ws(r), r->pos);
        const char *name;
        if (!mlir_parse_string(r, &name)) return false;
        int ax = mesh ? gs_mesh_find_axis(mesh, name, strlen(name)) : -1;
        if (ax < 0) return mlir_fail_at(r, at, "the mesh has no axis \"%s\"", name);
        if (*n >= GS_MAX_RANK) return mlir_fail_at(r, at, "too many manual axes");
        axes[(*n)++] = ax;
    } while (mlir_accept(r, ','));
    return mlir_expect(r, '}', "closing the manual axes");
}

/* sdy.manual_computation(operands) in_shardings=[..] out_shardings=[..] manual_axes={..}
 * (block args) { region } : (types) -> types. */
static bool manual_computation(reader *r, size_t op_pos, gs_instr **result, int *n_results) {
    gs_instr *ops[64];
    int n_ops = 0;
    if (!mlir_expect(r, '(', "opening the operands")) return false;
    if (!mlir_accept(r, ')')) {
        do {
            if (n_ops >= 64) return FAIL(r, "too many operands");
            if (!mlir_lookup_value(r, &ops[n_ops++])) return false;
        } while (mlir_accept(r, ','));
        if (!mlir_expect(r, ')', "closing the operands")) return false;
    }
    gs_sharding *ins[64], *outs[64];
    int n_in, n_out, manual[GS_MAX_RANK], n_manual;
    size_t in_at = (mlir_skip_ws(r), r->pos);
    if (!mlir_accept_word(r, "in_shardings") || !mlir_expect(r, '=', "after in_shardings") ||
        !parse_sdy_list(r, ins, &n_in, 64))
        return r->failed ? false : mlir_fail_at(r, in_at, "expected in_shardings=[...]");
    size_t out_at = (mlir_skip_ws(r), r->pos);
    if (!mlir_accept_word(r, "out_shardings") || !mlir_expect(r, '=', "after out_shardings") ||
        !parse_sdy_list(r, outs, &n_out, 64))
        return r->failed ? false : mlir_fail_at(r, out_at, "expected out_shardings=[...]");
    if (n_in != n_ops)
        return mlir_fail_at(r, in_at, "%d in_shardings for %d operands", n_in, n_ops);
    const gs_mesh *mesh = n_in                      ? &ins[0]->named->mesh
                          : n_out && outs[0]->named ? &outs[0]->named->mesh
                                                    : NULL;
    if (!parse_manual_axes(r, mesh, manual, &n_manual)) return false;
    /* block arguments: the operands' local types */
    const char *names[64];
    gs_shape *local[64];
    int n_args = 0;
    if (!mlir_expect(r, '(', "opening the region's arguments")) return false;
    if (!mlir_accept(r, ')')) {
        do {
            int idx;
            if (n_args >= 64) return FAIL(r, "too many region arguments");
            if (!mlir_parse_value_name(r, &names[n_args], &idx, false) ||
                !mlir_expect(r, ':', "after a region argument") ||
                !mlir_parse_type(r, &local[n_args]))
                return false;
            n_args++;
        } while (mlir_accept(r, ','));
        if (!mlir_expect(r, ')', "closing the region's arguments")) return false;
    }
    if (n_args != n_ops)
        return mlir_fail_at(r, op_pos, "the region takes %d arguments for %d operands", n_args,
                            n_ops);
    gs_computation *body;
    if (!mlir_parse_region(r, "shmap_body", n_args, names, local, NULL, &body)) return false;
    gs_shape *ts_in[64], *ts_out[64];
    int n_tin, n_tout;
    if (!mlir_expect(r, ':', "before the manual computation's type") ||
        !mlir_parse_type_spec(r, ts_in, &n_tin, ts_out, &n_tout, 64))
        return false;
    if (n_tout < 0 || n_tin != n_ops || n_tout != n_out)
        return mlir_fail_at(r, op_pos,
                            "the manual computation's type does not match its "
                            "%d operands and %d out_shardings",
                            n_ops, n_out);
    r->b.span = mlir_span_at(r, op_pos);
    /* into the region */
    gs_instr *args[64];
    for (int i = 0; i < n_ops; i++) {
        gs_sharding *ls;
        if (!check_fits(r, ins[i], ops[i]->shape, in_at) ||
            !check_local_type(r, ins[i], ops[i]->shape, local[i], manual, n_manual, "operand", i,
                              op_pos) ||
            !local_sharding(r, ins[i], manual, n_manual, in_at, &ls))
            return false;
        gs_instr *cs = mlir_custom_call(r, "Sharding", ops[i]->shape, 1, &ops[i], ins[i]);
        args[i] = cs ? mlir_custom_call(r, "SPMDFullToShardShape", local[i], 1, &cs, ls) : NULL;
        if (!args[i]) return mlir_oom(r);
    }
    /* the region, called; its results */
    gs_shape *root = body->root ? body->root->shape : NULL;
    int n_body = root && gs_shape_is_tuple(root) ? root->n_tuple : 1;
    if (!root || n_body != n_out)
        return mlir_fail_at(r, op_pos, "the region returns %d values for %d out_shardings", n_body,
                            n_out);
    gs_instr *call = gs_build(&r->b, GS_OP_CALL, root, n_ops, args);
    if (!call) return mlir_oom(r);
    gs_build_set_comp(&r->b, call, GS_ATTR_TO_APPLY, body);
    gs_sharding *louts[64];
    bool all_manual = true;
    for (int i = 0; i < n_ops; i++)
        all_manual &= gs_sharding_is_manual(gs_instr_get_sharding(args[i]));
    for (int j = 0; j < n_out; j++) {
        const gs_shape *ret = n_out == 1 ? root : root->tuple[j];
        if (!check_fits(r, outs[j], ts_out[j], out_at) ||
            !check_local_type(r, outs[j], ts_out[j], ret, manual, n_manual, "result", j, op_pos) ||
            !local_sharding(r, outs[j], manual, n_manual, out_at, &louts[j]))
            return false;
        all_manual &= gs_sharding_is_manual(louts[j]);
    }
    if (!all_manual && !manual_inside(r, body, manual, n_manual, op_pos)) return false;
    if (all_manual) {
        /* Every device holds its own values in a fully manual region: each instruction of the
         * body is manual, as XLA's export marks them, so that partitioning needs no
         * propagation. Partly manual bodies keep their open shardings for propagation. */
        gs_sharding *mn = gs_sharding_manual(r->a);
        if (!mn || gs_instr_set_sharding(r->m, call, mn) != GS_OK) return mlir_oom(r);
        for (int i = 0; i < body->n_instrs; i++)
            if (!gs_instr_get_sharding(body->instrs[i]) &&
                gs_instr_set_sharding(r->m, body->instrs[i], mn) != GS_OK)
                return mlir_oom(r);
    }
    gs_instr *res[64];
    for (int j = 0; j < n_out; j++) {
        gs_sharding *ls = louts[j];
        gs_instr *v = n_out == 1 ? call : gs_build_gte(&r->b, call, j);
        gs_instr *cs = v ? mlir_custom_call(r, "Sharding", v->shape, 1, &v, ls) : NULL;
        res[j] =
            cs ? mlir_custom_call(r, "SPMDShardToFullShape", ts_out[j], 1, &cs, outs[j]) : NULL;
        if (!res[j]) return mlir_oom(r);
    }
    *n_results = n_out;
    *result = n_out == 1 ? res[0] : gs_build_tuple(&r->b, n_out, res);
    return *result ? true : mlir_oom(r);
}

/* Shardy's one-operand markers, kept as custom-calls of their own name (printer.c prints them
 * back): `sdy.data_flow_edge %x [sharding=<...>] : T`, `sdy.reshard %x <...> : T`,
 * `sdy.func_data_flow_edge %x [{sdy.sharding = ...}] : T`,
 * `sdy.propagation_barrier %x allowed_direction=D : T` (D in backend_config). */
static bool sdy_marker(reader *r, const char *opname, size_t op_pos, gs_instr **result) {
    gs_instr *x;
    gs_sharding *s = NULL;
    const char *dir = NULL;
    gs_shape *t;
    if (!mlir_lookup_value(r, &x)) return false;
    size_t at = (mlir_skip_ws(r), r->pos);
    if (strcmp(opname, "sdy.reshard") == 0) {
        if (!parse_sdy(r, &s)) return false;
    } else if (strcmp(opname, "sdy.data_flow_edge") == 0 && mlir_accept_word(r, "sharding")) {
        if (!mlir_expect(r, '=', "after sharding") || !parse_sdy(r, &s)) return false;
    } else if (strcmp(opname, "sdy.propagation_barrier") == 0) {
        if (!mlir_accept_word(r, "allowed_direction") ||
            !mlir_expect(r, '=', "after allowed_direction") ||
            !mlir_parse_ident(r, &dir, "a direction"))
            return r->failed ? false
                             : FAIL(r, "expected allowed_direction=D, found %s", mlir_found(r));
    }
    if (mlir_peek(r) == '{') { /* an attribute dictionary: `{sdy.sharding = ...}` */
        r->pos++;
        gs_vec kvs;
        gs_vec_init(&kvs, sizeof(kv));
        bool ok = mlir_parse_kv_list(r, &kvs, '}') &&
                  mlir_sharding_from_kvs(r, &kvs, x->shape, s ? &(gs_sharding *){0} : &s);
        gs_vec_free(&kvs);
        if (!ok) return false;
    }
    if (!mlir_expect(r, ':', "before the op's type") || !mlir_parse_type(r, &t)) return false;
    if (s && !check_fits(r, s, x->shape, at)) return false;
    r->b.span = mlir_span_at(r, op_pos);
    *result = mlir_custom_call(r, opname, x->shape, 1, &x, s);
    if (*result && dir) {
        gs_attr bc = {.key = GS_ATTR_BACKEND_CONFIG, .name = "backend_config"};
        bc.u.s = gs_arena_strdup(r->a, dir);
        if (!bc.u.s || gs_instr_set_attr(r->m, *result, &bc) != GS_OK) return mlir_oom(r);
    }
    return *result ? true : mlir_oom(r);
}

bool mlir_parse_sdy_op(reader *r, const char *opname, size_t op_pos, gs_instr **result,
                       int *n_results) {
    *result = NULL;
    *n_results = 1;
    if (strcmp(opname, "sdy.sharding_constraint") == 0) {
        /* %y = sdy.sharding_constraint %x <@mesh, [...]> : tensor<...> */
        gs_instr *x;
        gs_sharding *s;
        gs_shape *t;
        size_t at;
        if (!mlir_lookup_value(r, &x) || (at = (mlir_skip_ws(r), r->pos), !parse_sdy(r, &s)) ||
            !mlir_expect(r, ':', "before the constraint's type") || !mlir_parse_type(r, &t))
            return false;
        if (!check_fits(r, s, x->shape, at)) return false;
        r->b.span = mlir_span_at(r, op_pos);
        *result = mlir_custom_call(r, "Sharding", x->shape, 1, &x, s);
        return *result ? true : mlir_oom(r);
    }
    if (strcmp(opname, "sdy.sharding_group") == 0) {
        /* sdy.sharding_group %x group_id=0 : tensor<...>: no result, a propagation hint */
        gs_instr *x;
        gs_shape *t;
        int64_t id;
        if (!mlir_lookup_value(r, &x) || !mlir_accept_word(r, "group_id") ||
            !mlir_expect(r, '=', "after group_id") || !mlir_parse_int(r, &id, "a group id") ||
            !mlir_expect(r, ':', "before the group's type") || !mlir_parse_type(r, &t))
            return r->failed ? false : FAIL(r, "expected group_id=N, found %s", mlir_found(r));
        if (id < 0) return mlir_fail_at(r, op_pos, "a sharding group id must not be negative");
        /* as XLA keeps it in HLO: a custom-call with no result, the id a frontend attribute */
        r->b.span = mlir_span_at(r, op_pos);
        gs_shape *none = gs_shape_tuple(r->a, 0, NULL);
        gs_instr *g = none ? mlir_custom_call(r, "xla.sdy.ShardingGroup", none, 1, &x, NULL) : NULL;
        gs_attr fa = {.key = GS_ATTR_FRONTEND_ATTRIBUTES, .name = "frontend_attributes"};
        fa.u.s = gs_arena_printf(r->a, "{xla.sdy.sharding_group_id=\"%lld\"}", (long long)id);
        if (!g || !fa.u.s || gs_instr_set_attr(r->m, g, &fa) != GS_OK) return mlir_oom(r);
        *n_results = 0;
        return true;
    }
    if (strcmp(opname, "sdy.manual_computation") == 0)
        return manual_computation(r, op_pos, result, n_results);
    if (strcmp(opname, "sdy.data_flow_edge") == 0 || strcmp(opname, "sdy.reshard") == 0 ||
        strcmp(opname, "sdy.func_data_flow_edge") == 0 ||
        strcmp(opname, "sdy.propagation_barrier") == 0)
        return sdy_marker(r, opname, op_pos, result);
    return mlir_fail_at(r, op_pos, "unknown or unsupported op '%s'", opname);
}
