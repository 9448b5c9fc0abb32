/*
 * context.c — what every file of the partitioner works through (see internal.h): errors and
 * allocation failure on the context, the output builder and scratch arena, the partitioned
 * values of operands, the shardings as the partitioner reads them (normalized to the shape,
 * replicated within manual groups, per-device shapes), clones of instructions and verbatim
 * copies of the computations they call, scopes for emitting into another computation, and
 * partitioned copies of called computations (cached by signature).
 *
 * The driver (partition.c) sits above this file: it calls these helpers and the handlers, and
 * is called back only through the context's partition_comp pointer, which
 * gs_part_partition_called runs on a called computation.
 */
#include "internal.h"
#include "base/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ context helpers */

void gs_part_error(gs_part_ctx *c, const char *fmt, ...) {
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

void gs_part_oom(gs_part_ctx *c) {
    if (!c->failed) gs_error(c->d, gs_span_none(), "partition: out of memory");
    c->failed = true;
}

gs_builder *gs_part_builder(gs_part_ctx *c) { return &c->e->b; }
gs_arena *gs_part_arena(gs_part_ctx *c) { return &c->scratch; }

bool gs_part_all_manual(const gs_sharding *s) {
    if (s->kind == GS_SHARDING_MANUAL) return true;
    if (s->kind != GS_SHARDING_TUPLE || s->n_tuple == 0) return false;
    for (int i = 0; i < s->n_tuple; i++)
        if (s->tuple[i]->kind != GS_SHARDING_MANUAL) return false;
    return true;
}

const gs_instr *gs_part_caller(gs_part_ctx *c, const gs_instr *in) {
    if (!c->callers_ready) {
        c->callers_ready = true;
        for (int i = 0; i < c->src->n_comps; i++) {
            const gs_computation *comp = c->src->comps[i];
            for (int j = 0; j < comp->n_instrs; j++) {
                gs_instr *call = comp->instrs[j];
                gs_computation *called[64];
                int k = gs_instr_called(call, called, 64);
                for (int x = 0; x < k && x < 64; x++)
                    if (!gs_strmap_get(&c->callers, called[x]->name) &&
                        gs_strmap_put(&c->callers, called[x]->name, call) != GS_OK) {
                        gs_part_oom(c);
                        return NULL;
                    }
            }
        }
    }
    return in->parent ? gs_strmap_get(&c->callers, in->parent->name) : NULL;
}

const gs_part_value *gs_part_operand(gs_part_ctx *c, const gs_instr *in, int k) {
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

/* Does tiled sharding sh fit every array leaf of tuple shape s (its rank)? */
static bool fits_leaves(const gs_shape *s, const gs_sharding *sh) {
    if (s->type != GS_TUPLE)
        return !gs_type_is_array(s->type) || sh->data_rank == s->rank;
    for (int i = 0; i < s->n_tuple; i++)
        if (!fits_leaves(s->tuple[i], sh)) return false;
    return true;
}

const gs_sharding *gs_part_normalize(gs_arena *a, const gs_shape *s, const gs_sharding *sh,
                                     const char **why) {
    *why = NULL;
    if (s->type == GS_TUPLE) {
        int n = gs_shape_n_leaves(s);
        if (!sh) return tuple_of(a, n, gs_sharding_replicated(a));
        if (sh->kind != GS_SHARDING_TUPLE) {
            /* One sharding for every element: each must have its rank. */
            if (sh->kind == GS_SHARDING_TILED && !fits_leaves(s, sh)) {
                *why = "a sharding whose rank differs from its tuple elements' shapes";
                return NULL;
            }
            return tuple_of(a, n, sh);
        }
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

/* Leaf sharding s of array shape t with t's dynamic dims whole: a device's part of a dim whose
 * size is known only when the program runs has no size of its own, so such a dim is never
 * split (XLA's partitioner does not split them either). NULL on allocation failure. */
static const gs_sharding *dynamic_whole(gs_arena *a, const gs_shape *t, const gs_sharding *s) {
    if (!s || s->kind != GS_SHARDING_TILED || !t || !gs_shape_is_array(t) || !t->dynamic ||
        s->data_rank != t->rank)
        return s;
    int64_t dims[GS_MAX_RANK];
    int n = 0;
    for (int i = 0; i < t->rank; i++)
        if (t->dynamic[i] && s->tiles.dims[i] > 1) dims[n++] = i;
    gs_sharding *out;
    if (!n) return s;
    return gs_sharding_replicate_dims(a, s, n, dims, &out) == GS_OK ? out : NULL;
}

/* Appends the array-or-token leaf shapes of t depth-first. */
static void leaves_of(const gs_shape *t, const gs_shape **out, int *n, int max) {
    if (!gs_shape_is_tuple(t)) {
        if (*n < max) out[*n] = t;
        (*n)++;
        return;
    }
    for (int i = 0; i < t->n_tuple; i++) leaves_of(t->tuple[i], out, n, max);
}

/* Normalized sharding s of shape t with its dynamic dims whole (every leaf). */
static const gs_sharding *keep_dynamic_whole(gs_arena *a, const gs_shape *t,
                                             const gs_sharding *s) {
    if (!s || s->kind != GS_SHARDING_TUPLE) return dynamic_whole(a, t, s);
    int n = s->n_tuple, got = 0;
    const gs_shape **ls = GS_NEW_ARRAY(a, const gs_shape *, n ? n : 1);
    gs_sharding **v = GS_NEW_ARRAY(a, gs_sharding *, n ? n : 1);
    if (!ls || !v) return NULL;
    leaves_of(t, ls, &got, n);
    bool changed = false;
    for (int l = 0; l < n; l++) {
        const gs_sharding *w = dynamic_whole(a, l < got ? ls[l] : NULL, s->tuple[l]);
        if (!w) return NULL;
        changed |= w != s->tuple[l];
        v[l] = (gs_sharding *)w;
    }
    return changed ? gs_sharding_tuple(a, n, v) : s;
}

const gs_sharding *gs_part_sharding_of(gs_part_ctx *c, const gs_instr *in) {
    const char *why;
    const gs_sharding *s =
        gs_part_normalize(gs_part_arena(c), in->shape,
                          without_groups(gs_part_arena(c), gs_instr_get_sharding(in)), &why);
    if (!s) {
        if (why)
            gs_part_error(c, "%%%s has %s", in->name, why);
        else
            gs_part_oom(c);
        return gs_part_replicated(c, in->shape);
    }
    const gs_sharding *w = keep_dynamic_whole(gs_part_arena(c), in->shape, s);
    if (!w) gs_part_oom(c);
    return w ? w : s;
}

const gs_sharding *gs_part_replicated(gs_part_ctx *c, const gs_shape *s) {
    const char *why;
    const gs_sharding *r = NULL;
    if (c->manual && s->type != GS_TUPLE) {
        r = gs_type_is_array(s->type) ? gs_part_manual_whole(c, c->manual, s->rank)
                                      : gs_sharding_replicated(gs_part_arena(c));
    } else if (c->manual) {
        int n = gs_shape_n_leaves(s), k = 0;
        gs_sharding **v = GS_NEW_ARRAY(gs_part_arena(c), gs_sharding *, n + 1);
        for (int i = 0; v && i < s->n_tuple; i++) {
            /* Leaves in order, each whole within the manual groups at its own rank. */
            const gs_shape *e = s->tuple[i];
            const gs_sharding *es = gs_part_replicated(c, e);
            if (!es) break;
            if (es->kind == GS_SHARDING_TUPLE)
                for (int j = 0; j < es->n_tuple; j++) v[k++] = es->tuple[j];
            else
                v[k++] = (gs_sharding *)es;
        }
        r = v && k == n ? gs_sharding_tuple(gs_part_arena(c), n, v) : NULL;
    } else {
        r = gs_part_normalize(gs_part_arena(c), s, NULL, &why);
    }
    if (!r) gs_part_oom(c);
    return r;
}

const gs_sharding *gs_partition_param_sharding(gs_arena *a, const gs_module *m, int param) {
    const gs_instr *p = m->entry->params[param];
    const char *why;
    return keep_dynamic_whole(a, p->shape,
                              gs_part_normalize(a, p->shape, gs_instr_get_sharding(p), &why));
}

const gs_sharding *gs_partition_root_sharding(gs_arena *a, const gs_module *m) {
    const gs_instr *r = m->entry->root;
    const char *why;
    return keep_dynamic_whole(a, r->shape,
                              gs_part_normalize(a, r->shape, gs_instr_get_sharding(r), &why));
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
    gs_shape *r = gs_shape_array(a, base->type, base->rank, dims);
    if (r && base->dynamic) /* a dim kept whole keeps its dynamic size */
        r->dynamic = gs_arena_memdup(a, base->dynamic, sizeof(bool) * (size_t)base->rank);
    return r;
}

gs_shape *gs_part_local_shape(gs_part_ctx *c, const gs_shape *base, const gs_sharding *s) {
    int leaf = 0;
    gs_shape *r = local_shape(gs_part_arena(c), base, s, &leaf);
    if (!r) gs_part_oom(c);
    return r;
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

const gs_instr **gs_part_topo_order(gs_arena *a, const gs_computation *comp) {
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
static const char *comp_name(gs_part_ctx *c, const char *name, bool *first);

void gs_part_result(gs_part_value *out, gs_instr *hlo, const gs_shape *base, const gs_sharding *s) {
    out->hlo = hlo;
    out->base = base;
    out->sharding = s;
    out->combiner = GS_OP_ADD;
}

gs_instr *gs_part_clone(gs_part_ctx *c, const gs_instr *in, const gs_shape *shape, int n,
                        gs_instr *const *ops) {
    gs_builder *b = gs_part_builder(c);
    gs_instr *out = gs_build(b, in->op, shape, n, ops);
    if (!out) return NULL;
    if (in->op_text) out->op_text = gs_arena_strdup(&b->m->arena, in->op_text);
    for (int i = 0; i < in->n_attrs; i++)
        if (in->attrs[i].key != GS_ATTR_CONTROL_PREDECESSORS) /* names of the source program */
            gs_build_copy_attr(b, out, &in->attrs[i], copy_comp, c);
    if (in->literal) {
        out->literal = copy_literal(&b->m->arena, in->literal);
        if (!out->literal) gs_part_oom(c);
    }
    return out;
}

/* A verbatim copy of a called computation in the output (its callees first; cached). */
static gs_computation *copy_comp(void *ctx, gs_computation *src) {
    gs_part_ctx *c = ctx;
    gs_part_emit *e = c->e;
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
    bool first;
    const char *name = e->dry ? src->name : comp_name(c, src->name, &first);
    gs_computation *dst = name ? gs_computation_new(m, name) : NULL;
    const gs_instr **order = gs_part_topo_order(gs_part_arena(c), src);
    gs_instr **map = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, src->n_instrs + 1);
    if (!dst || !order || !map) {
        gs_part_oom(c);
        return NULL;
    }
    gs_module_move_before_entry(m, dst);
    dst->execution_thread =
        src->execution_thread ? gs_arena_strdup(&m->arena, src->execution_thread) : NULL;
    if (!e->dry && gs_strmap_put(&c->comps, src->name, dst) != GS_OK) gs_part_oom(c);
    gs_builder b;
    gs_builder_init(&b, m, dst, &e->names);
    for (int i = 0; i < src->n_instrs; i++) {
        const gs_instr *in = order[i];
        gs_instr *ops[64];
        gs_instr **opv =
            in->n_operands <= 64 ? ops : GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, in->n_operands);
        if (!opv) {
            gs_part_oom(c);
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
            gs_part_oom(c);
            return NULL;
        }
        map[in->id] = out;
    }
    if (b.failed) gs_part_oom(c);
    if (src->root) {
        dst->root = map[src->root->id];
        if (dst->root) dst->root->is_root = true;
    }
    return dst;
}

/* ------------------------------------------------------------------ scopes */

/* What partitioning one computation keeps: saved and restored around a called one. */
typedef struct scope {
    gs_builder b;                  /* appends to the computation */
    gs_instr *pid, *s32[64];       /* its partition id and small constants */
    gs_part_offset_entry *offsets; /* its tile indices */
    gs_part_value *vals;           /* its values */
    bool *done;
    gs_part_reshard_entry **cache; /* its reshards */
    int n_cache;
    const gs_instr *cur;
    const gs_sharding *manual;
    const gs_sharding *const *param_sh;
    bool keep_names;
} scope;

/* Moves the current computation's state from the context into s (save) or back (restore); an
 * allocation failure of the builder while s was out stays recorded. Each field is listed once. */
static void scope_move(gs_part_ctx *c, scope *s, bool save) {
    gs_part_emit *e = c->e;
    bool failed = e->b.failed;
#define MOVE(place, field) (save ? (void)(s->field = (place)) : (void)((place) = s->field))
    MOVE(e->b, b);
    MOVE(e->pid, pid);
    MOVE(e->offsets, offsets);
    MOVE(c->vals, vals);
    MOVE(c->done, done);
    MOVE(c->cache, cache);
    MOVE(c->n_cache, n_cache);
    MOVE(c->cur, cur);
    MOVE(c->manual, manual);
    MOVE(c->param_sh, param_sh);
    MOVE(c->keep_names, keep_names);
#undef MOVE
    if (save) {
        memcpy(s->s32, e->s32, sizeof s->s32);
    } else {
        memcpy(e->s32, s->s32, sizeof s->s32);
        e->b.failed = e->b.failed || failed;
    }
}

gs_part_scope *gs_part_enter_computation(gs_part_ctx *c, gs_computation *dst) {
    scope *s = malloc(sizeof *s);
    if (!s) {
        gs_part_oom(c);
        return NULL;
    }
    scope_move(c, s, true);
    gs_part_emit *e = c->e;
    gs_builder_init(&e->b, e->m, dst, &e->names);
    e->pid = NULL;
    memset(e->s32, 0, sizeof e->s32);
    e->offsets = NULL;
    return (gs_part_scope *)s;
}

void gs_part_leave_computation(gs_part_ctx *c, gs_part_scope *saved) {
    if (!saved) return;
    scope_move(c, (scope *)saved, false);
    free(saved);
}

/* An output name for a partitioned copy of computation `name`: the name itself the first time
 * (*first set), later a fresh one. */
static const char *comp_name(gs_part_ctx *c, const char *name, bool *first) {
    *first = !gs_strmap_get(&c->out_names, name);
    const char *n = *first ? name : gs_names_fresh(&c->e->names, &c->e->m->arena, name);
    if (n && gs_strmap_put(&c->out_names, n, (void *)n) != GS_OK) return NULL;
    return n;
}

gs_computation *gs_part_partition_called(gs_part_ctx *c, const gs_computation *src,
                                         const gs_sharding *const *param_sh,
                                         const gs_sharding *root_sh) {
    gs_sb key = {0};
    gs_sb_puts(&key, src->name);
    for (int i = 0; i < src->n_params; i++) {
        gs_sb_puts(&key, "|");
        gs_sharding_print(&key, param_sh[i]);
    }
    gs_sb_puts(&key, "|->");
    gs_sharding_print(&key, root_sh);
    const char *k = key.failed ? NULL : gs_arena_strdup(gs_part_arena(c), gs_sb_str(&key));
    gs_sb_free(&key);
    if (!k) {
        gs_part_oom(c);
        return NULL;
    }
    gs_computation *done = gs_strmap_get(&c->parts, k);
    if (done) return done;
    gs_part_emit *e = c->e;
    bool first;
    const char *name = comp_name(c, src->name, &first);
    gs_computation *dst = name ? gs_computation_new(e->m, name) : NULL;
    if (!dst || gs_strmap_put(&c->parts, k, dst) != GS_OK) {
        gs_part_oom(c);
        return NULL;
    }
    dst->execution_thread =
        src->execution_thread ? gs_arena_strdup(&e->m->arena, src->execution_thread) : NULL;
    c->partition_comp(c, src, dst, param_sh, root_sh, first);
    return c->failed ? NULL : dst;
}

/* The copy of a called computation for gs_part_copy_attrs: the partitioned one when listed. */
typedef struct attr_map {
    gs_part_ctx *c;
    int n;
    const gs_computation *const *from;
    gs_computation *const *to;
} attr_map;

static gs_computation *map_comp(void *ctx, gs_computation *src) {
    attr_map *am = ctx;
    for (int i = 0; i < am->n; i++)
        if (am->from[i] == src) return am->to[i];
    return copy_comp(am->c, src);
}

void gs_part_copy_attrs(gs_part_ctx *c, const gs_instr *in, gs_instr *out, int n,
                        const gs_computation *const *from, gs_computation *const *to) {
    attr_map am = {c, n, from, to};
    for (int i = 0; i < in->n_attrs; i++)
        if (in->attrs[i].key != GS_ATTR_CONTROL_PREDECESSORS)
            gs_build_copy_attr(gs_part_builder(c), out, &in->attrs[i], map_comp, &am);
}

/* source_file:source_line (or op_name) from the metadata of `in`, "" when it has none. */
const char *gs_part_origin(gs_part_ctx *c, const gs_instr *in) {
    const char *raw = gs_instr_str(in, GS_ATTR_METADATA);
    if (!raw) return "";
    const char *f = strstr(raw, "source_file=\""), *l = strstr(raw, "source_line=");
    if (f) {
        f += strlen("source_file=\"");
        const char *q = strchr(f, '"');
        int len = q ? (int)(q - f) : (int)strlen(f);
        long line = l ? strtol(l + strlen("source_line="), NULL, 10) : 0;
        return gs_arena_printf(gs_part_arena(c), " (from %.*s:%ld)", len, f, line);
    }
    const char *o = strstr(raw, "op_name=\"");
    if (!o) return "";
    o += strlen("op_name=\"");
    const char *q = strchr(o, '"');
    return gs_arena_printf(gs_part_arena(c), " (op %.*s)", q ? (int)(q - o) : (int)strlen(o), o);
}
