/*
 * builder.c — appending instructions to a computation (see gspmd/builder.h): fresh module-wide
 * names, result shapes computed from the operands, attributes copied into the module's arena.
 * Allocation failure sets the builder's sticky flag and returns NULL; shape errors are internal
 * invariants (asserted).
 */
#include <ctype.h>
#include "gspmd/builder.h"
#include "base/internal.h"
#include "gspmd/numeric.h"
#include <ctype.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ names */

/* The table's map, allocated on first use; NULL on allocation failure. */
static gs_strmap *used_map(gs_names *n) {
    if (!n->used) n->used = calloc(1, sizeof *n->used);
    return n->used;
}

gs_status gs_names_reserve(gs_names *n, gs_arena *a, const char *name) {
    gs_strmap *used = used_map(n);
    if (!used) return GS_ERR;
    if (gs_strmap_get(used, name)) return GS_OK;
    const char *k = gs_arena_strdup(a, name);
    if (!k) return GS_ERR;
    return gs_strmap_put(used, k, (void *)1);
}

const char *gs_names_fresh(gs_names *n, gs_arena *a, const char *stem) {
    gs_strmap *used = used_map(n);
    if (!used) return NULL;
    if (!gs_strmap_get(used, stem)) {
        const char *k = gs_arena_strdup(a, stem);
        if (!k || gs_strmap_put(used, k, (void *)1) != GS_OK) return NULL;
        return k;
    }
    char buf[256]; /* "%.200s.%ld", written by hand: this runs once per instruction */
    size_t len = strnlen(stem, 200);
    memcpy(buf, stem, len);
    buf[len++] = '.';
    for (;;) {
        unsigned long v = (unsigned long)++n->next; /* counts up from 0 */
        char digits[24];
        int k = 0;
        do {
            digits[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        size_t at = len;
        while (k) buf[at++] = digits[--k];
        buf[at] = 0;
        if (!gs_strmap_getn(used, buf, at)) break;
    }
    const char *k = gs_arena_strdup(a, buf);
    if (!k || gs_strmap_put(used, k, (void *)1) != GS_OK) return NULL;
    return k;
}

void gs_names_hlo(const char *name, char *out, size_t max) {
    if (max == 0) return;
    size_t j = 0;
    if (j + 1 < max && !isalpha((unsigned char)name[0]) && name[0] != '_') out[j++] = '_';
    for (size_t i = 0; name[i] && j + 1 < max; i++) {
        char c = name[i];
        out[j++] = isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-' ? c : '_';
    }
    out[j] = 0;
}

void gs_names_free(gs_names *n) {
    if (n->used) gs_strmap_free(n->used);
    free(n->used);
    n->used = NULL;
    n->next = 0;
}

/* ------------------------------------------------------------------ generic */

void gs_builder_init(gs_builder *b, gs_module *m, gs_computation *comp, gs_names *names) {
    memset(b, 0, sizeof *b);
    b->m = m;
    b->comp = comp;
    b->names = names;
    b->span = gs_span_none();
}

static gs_arena *ar(gs_builder *b) { return &b->m->arena; }

static void *fail(gs_builder *b) {
    b->failed = true;
    return NULL;
}

gs_instr *gs_build_named(gs_builder *b, const char *name, gs_opcode op, const gs_shape *shape,
                         int n_ops, gs_instr *const *ops) {
    for (int i = 0; i < n_ops; i++)
        if (!ops[i]) return fail(b);
    if (!shape) return fail(b);
    gs_instr *in = GS_NEW(ar(b), gs_instr);
    if (!in) return fail(b);
    if (name) {
        in->name = gs_arena_strdup(ar(b), name);
        if (!in->name || gs_names_reserve(b->names, ar(b), in->name) != GS_OK) return fail(b);
    } else {
        char stem[128]; /* the stem, cut to 127 bytes */
        const char *st = b->stem ? b->stem : gs_op_name(op);
        size_t n = strnlen(st, sizeof stem - 1);
        memcpy(stem, st, n);
        stem[n] = 0;
        in->name = gs_names_fresh(b->names, ar(b), stem);
        if (!in->name) return fail(b);
    }
    in->op = op;
    in->shape = gs_shape_clone(ar(b), shape);
    in->span = b->span;
    if (!in->shape) return fail(b);
    if (n_ops > 0) {
        in->operands = GS_NEW_ARRAY(ar(b), gs_instr *, n_ops);
        if (!in->operands) return fail(b);
        memcpy(in->operands, ops, sizeof *ops * (size_t)n_ops);
    }
    in->n_operands = n_ops;
    if (gs_computation_append(b->comp, in) != GS_OK) return fail(b);
    return in;
}

gs_instr *gs_build(gs_builder *b, gs_opcode op, const gs_shape *shape, int n_ops,
                   gs_instr *const *ops) {
    return gs_build_named(b, NULL, op, shape, n_ops, ops);
}

static void set(gs_builder *b, gs_instr *in, gs_attr *a) {
    if (!in) return;
    a->name = gs_attr_name(a->key);
    if (gs_instr_set_attr(b->m, in, a) != GS_OK) b->failed = true;
}

void gs_build_set_int(gs_builder *b, gs_instr *in, gs_attr_key k, int64_t v) {
    gs_attr a = {.key = k};
    a.u.i = v;
    set(b, in, &a);
}

void gs_build_set_ints(gs_builder *b, gs_instr *in, gs_attr_key k, int n, const int64_t *v) {
    gs_attr a = {.key = k};
    a.u.ints.n = n;
    if (n > 0) {
        int64_t *c = gs_arena_memdup(ar(b), v, sizeof *v * (size_t)n);
        if (!c) {
            b->failed = true;
            return;
        }
        a.u.ints.v = c;
    }
    set(b, in, &a);
}

void gs_build_set_bool(gs_builder *b, gs_instr *in, gs_attr_key k, bool v) {
    gs_attr a = {.key = k};
    a.u.b = v;
    set(b, in, &a);
}

void gs_build_set_ident(gs_builder *b, gs_instr *in, gs_attr_key k, const char *s) {
    gs_attr a = {.key = k};
    a.u.s = gs_arena_strdup(ar(b), s);
    if (!a.u.s) {
        b->failed = true;
        return;
    }
    set(b, in, &a);
}

void gs_build_set_comp(gs_builder *b, gs_instr *in, gs_attr_key k, gs_computation *c) {
    gs_attr a = {.key = k};
    a.u.comp = c;
    set(b, in, &a);
}

void gs_build_set_groups(gs_builder *b, gs_instr *in, const gs_replica_groups *g) {
    gs_attr a = {.key = GS_ATTR_REPLICA_GROUPS};
    a.u.groups = (gs_replica_groups *)g;
    set(b, in, &a);
}

void gs_build_copy_attr(gs_builder *b, gs_instr *in, const gs_attr *src,
                        gs_computation *(*map)(void *ctx, gs_computation *c), void *ctx) {
    if (!in) return;
    gs_attr a = *src;
    a.name = gs_arena_strdup(ar(b), src->name);
    if (!a.name) {
        b->failed = true;
        return;
    }
    /* Values of other kinds are immutable and may be shared only within one module, so copy
     * the ones that point into the source module's arena. */
    gs_attr_kind kind = src->key == GS_ATTR_UNKNOWN ? GS_AK_RAW : gs_attr_kind_of(src->key);
    gs_arena *A = ar(b);
    switch (kind) {
    case GS_AK_IDENT:
    case GS_AK_STRING:
    case GS_AK_RAW:
        a.u.s = src->u.s ? gs_arena_strdup(A, src->u.s) : NULL;
        if (src->u.s && !a.u.s) b->failed = true;
        break;
    case GS_AK_INTS:
        if (src->u.ints.n > 0) {
            a.u.ints.v = gs_arena_memdup(A, src->u.ints.v, sizeof(int64_t) * (size_t)src->u.ints.n);
            if (!a.u.ints.v) b->failed = true;
        }
        break;
    case GS_AK_COMP: a.u.comp = map && src->u.comp ? map(ctx, src->u.comp) : src->u.comp; break;
    case GS_AK_COMPS: {
        gs_computation **v = GS_NEW_ARRAY(A, gs_computation *, src->u.comps.n + 1);
        if (!v) {
            b->failed = true;
            return;
        }
        for (int i = 0; i < src->u.comps.n; i++)
            v[i] = map && src->u.comps.v[i] ? map(ctx, src->u.comps.v[i]) : src->u.comps.v[i];
        a.u.comps.v = v;
        break;
    }
    case GS_AK_SLICE:
        a.u.slice.v = gs_arena_memdup(A, src->u.slice.v,
                                      sizeof(gs_slice_dim) * (size_t)(src->u.slice.n + 1));
        if (!a.u.slice.v) b->failed = true;
        break;
    case GS_AK_WINDOW: {
        gs_window *w = GS_NEW(A, gs_window);
        if (!w) {
            b->failed = true;
            return;
        }
        *w = *src->u.window;
        w->dims = gs_arena_memdup(A, src->u.window->dims,
                                  sizeof(gs_window_dim) * (size_t)(w->n + 1));
        if (!w->dims) b->failed = true;
        a.u.window = w;
        break;
    }
    case GS_AK_CONV_DIMS: {
        gs_conv_dims *c = GS_NEW(A, gs_conv_dims);
        if (!c) {
            b->failed = true;
            return;
        }
        *c = *src->u.conv;
        size_t ns = sizeof(int64_t) * (size_t)(c->n_spatial + 1);
        c->in_spatial = gs_arena_memdup(A, src->u.conv->in_spatial, ns);
        c->k_spatial = gs_arena_memdup(A, src->u.conv->k_spatial, ns);
        c->out_spatial = gs_arena_memdup(A, src->u.conv->out_spatial, ns);
        if (!c->in_spatial || !c->k_spatial || !c->out_spatial) b->failed = true;
        a.u.conv = c;
        break;
    }
    case GS_AK_PADDING: {
        gs_padding *p = GS_NEW(A, gs_padding);
        if (!p) {
            b->failed = true;
            return;
        }
        p->n = src->u.padding->n;
        p->dims = gs_arena_memdup(A, src->u.padding->dims, sizeof(gs_pad_dim) * (size_t)(p->n + 1));
        if (!p->dims) b->failed = true;
        a.u.padding = p;
        break;
    }
    case GS_AK_GROUPS: {
        const gs_replica_groups *g = src->u.groups;
        gs_replica_groups *c = GS_NEW(A, gs_replica_groups);
        if (!c) {
            b->failed = true;
            return;
        }
        *c = *g;
        if (g->is_iota) {
            size_t nd = (size_t)g->n_iota_dims;
            c->iota_dims = gs_arena_memdup(A, g->iota_dims, sizeof(int64_t) * nd);
            if (g->perm) c->perm = gs_arena_memdup(A, g->perm, sizeof(int) * nd);
            if (!c->iota_dims || (g->perm && !c->perm)) b->failed = true;
        } else if (g->n_groups > 0) {
            c->sizes = gs_arena_memdup(A, g->sizes, sizeof(int) * (size_t)g->n_groups);
            c->groups = GS_NEW_ARRAY(A, int64_t *, g->n_groups);
            if (!c->sizes || !c->groups) {
                b->failed = true;
                return;
            }
            for (int i = 0; i < g->n_groups; i++) {
                c->groups[i] = gs_arena_memdup(A, g->groups[i],
                                               sizeof(int64_t) * (size_t)(g->sizes[i] + 1));
                if (!c->groups[i]) b->failed = true;
            }
        }
        a.u.groups = c;
        break;
    }
    case GS_AK_PAIRS:
        if (src->u.pairs.n > 0) {
            a.u.pairs.v =
                gs_arena_memdup(A, src->u.pairs.v, sizeof(int64_t[2]) * (size_t)src->u.pairs.n);
            if (!a.u.pairs.v) b->failed = true;
        }
        break;
    case GS_AK_SHARDING:
        /* Shardings are not copied: the partitioned program carries none but the one the
         * infeed handler sets for a run to feed it (src/partition/h_control.c). */
        return;
    default: break;
    }
    if (gs_instr_set_attr(b->m, in, &a) != GS_OK) b->failed = true;
}

/* ------------------------------------------------------------------ leaves */

gs_instr *gs_build_parameter(gs_builder *b, int64_t number, const gs_shape *shape,
                             const char *name) {
    gs_instr *in = gs_build_named(b, name, GS_OP_PARAMETER, shape, 0, NULL);
    if (!in) return NULL;
    in->parameter_number = number;
    gs_computation *c = b->comp;
    if (number >= c->n_params) {
        /* Capacity: the next power of two (arrays the builder made grow by doubling). */
        int64_t cap = 1, want = number + 1;
        while (cap < c->n_params) cap *= 2;
        if (c->n_params == 0 || want > cap) {
            while (cap < want) cap *= 2;
            gs_instr **v = GS_NEW_ARRAY(ar(b), gs_instr *, cap);
            if (!v) return fail(b);
            if (c->n_params) memcpy(v, c->params, sizeof *v * (size_t)c->n_params);
            c->params = v;
        }
        c->n_params = (int)want;
    }
    c->params[number] = in;
    return in;
}

gs_instr *gs_build_constant(gs_builder *b, const gs_shape *shape, const void *data) {
    gs_instr *in = gs_build(b, GS_OP_CONSTANT, shape, 0, NULL);
    if (!in) return NULL;
    gs_literal_ir *lit = GS_NEW(ar(b), gs_literal_ir);
    if (!lit) return fail(b);
    lit->n_bytes = (size_t)gs_shape_bytes(shape);
    lit->data = gs_arena_alloc(ar(b), lit->n_bytes ? lit->n_bytes : 1);
    if (!lit->data) return fail(b);
    if (lit->n_bytes) memcpy(lit->data, data, lit->n_bytes);
    in->literal = lit;
    return in;
}

gs_instr *gs_build_scalar(gs_builder *b, gs_type t, double v) {
    unsigned char buf[16] = {0};
    if (gs_type_is_float(t))
        gs_elem_set_f(buf, t, 0, v);
    else if (t == GS_PRED)
        gs_elem_set_i(buf, t, 0, v != 0);
    else
        gs_elem_set_i(buf, t, 0, (int64_t)v);
    gs_shape s = {.type = t};
    return gs_build_constant(b, &s, buf);
}

gs_instr *gs_build_scalar_i(gs_builder *b, gs_type t, int64_t v) {
    unsigned char buf[16] = {0};
    if (gs_type_is_float(t))
        gs_elem_set_f(buf, t, 0, (double)v);
    else
        gs_elem_set_i(buf, t, 0, t == GS_PRED ? v != 0 : v);
    gs_shape s = {.type = t};
    return gs_build_constant(b, &s, buf);
}

/* The extreme value of t: lowest (sign -1) or highest (+1). */
static gs_instr *extreme(gs_builder *b, gs_type t, int sign) {
    if (gs_type_is_float(t)) return gs_build_scalar(b, t, sign * INFINITY);
    if (t == GS_PRED) return gs_build_scalar_i(b, t, sign > 0);
    int bits = gs_type_bits(t);
    unsigned char buf[16] = {0};
    if (gs_type_is_unsigned_int(t)) {
        gs_elem_set_i(buf, t, 0, sign > 0 ? -1 : 0); /* all ones wraps to the maximum */
    } else {
        int64_t hi = bits >= 64 ? INT64_MAX : (int64_t)((1ull << (bits - 1)) - 1);
        gs_elem_set_i(buf, t, 0, sign > 0 ? hi : -hi - 1);
    }
    gs_shape s = {.type = t};
    return gs_build_constant(b, &s, buf);
}

gs_instr *gs_build_lowest(gs_builder *b, gs_type t) { return extreme(b, t, -1); }
gs_instr *gs_build_highest(gs_builder *b, gs_type t) { return extreme(b, t, 1); }

gs_instr *gs_build_s32_table(gs_builder *b, int64_t n, const int64_t *v) {
    int32_t *data = GS_NEW_ARRAY(ar(b), int32_t, n + 1);
    if (!data) return fail(b);
    for (int64_t i = 0; i < n; i++) data[i] = (int32_t)v[i];
    gs_shape s = {.type = GS_S32, .rank = 1, .dims = &n};
    return gs_build_constant(b, &s, data);
}

gs_instr *gs_build_iota(gs_builder *b, gs_type t, int rank, const int64_t *dims, int dim) {
    gs_shape s = {.type = t, .rank = rank, .dims = (int64_t *)dims};
    gs_instr *in = gs_build(b, GS_OP_IOTA, &s, 0, NULL);
    gs_build_set_int(b, in, GS_ATTR_IOTA_DIMENSION, dim);
    return in;
}

gs_instr *gs_build_partition_id(gs_builder *b) {
    gs_shape s = {.type = GS_U32};
    return gs_build(b, GS_OP_PARTITION_ID, &s, 0, NULL);
}

/* ------------------------------------------------------------------ elementwise */

gs_instr *gs_build_unary(gs_builder *b, gs_opcode op, gs_instr *x) {
    if (!x) return fail(b);
    return gs_build(b, op, x->shape, 1, &x);
}

gs_instr *gs_build_binary(gs_builder *b, gs_opcode op, gs_instr *x, gs_instr *y) {
    if (!x || !y) return fail(b);
    GS_ASSERT(gs_shape_same_dims(x->shape, y->shape));
    gs_instr *ops[2] = {x, y};
    return gs_build(b, op, x->shape, 2, ops);
}

gs_instr *gs_build_compare(gs_builder *b, gs_instr *x, gs_instr *y, const char *dir) {
    if (!x || !y) return fail(b);
    GS_ASSERT(gs_shape_same_dims(x->shape, y->shape));
    gs_shape s = *x->shape;
    s.type = GS_PRED;
    s.has_layout = false;
    gs_instr *ops[2] = {x, y};
    gs_instr *in = gs_build(b, GS_OP_COMPARE, &s, 2, ops);
    gs_build_set_ident(b, in, GS_ATTR_DIRECTION, dir);
    return in;
}

gs_instr *gs_build_select(gs_builder *b, gs_instr *p, gs_instr *t, gs_instr *f) {
    if (!p || !t || !f) return fail(b);
    gs_instr *ops[3] = {p, t, f};
    return gs_build(b, GS_OP_SELECT, t->shape, 3, ops);
}

gs_instr *gs_build_convert(gs_builder *b, gs_instr *x, gs_type t) {
    if (!x) return fail(b);
    if (x->shape->type == t) return x;
    gs_shape s = *x->shape;
    s.type = t;
    s.has_layout = false;
    return gs_build(b, GS_OP_CONVERT, &s, 1, &x);
}

gs_instr *gs_build_copy(gs_builder *b, gs_instr *x) {
    if (!x) return fail(b);
    return gs_build(b, GS_OP_COPY, x->shape, 1, &x);
}

/* ------------------------------------------------------------------ data movement */

gs_instr *gs_build_broadcast(gs_builder *b, gs_instr *x, int rank, const int64_t *dims, int n_b,
                             const int64_t *bdims) {
    if (!x) return fail(b);
    GS_ASSERT(n_b == x->shape->rank);
    gs_shape s = {.type = x->shape->type, .rank = rank, .dims = (int64_t *)dims};
    gs_instr *in = gs_build(b, GS_OP_BROADCAST, &s, 1, &x);
    gs_build_set_ints(b, in, GS_ATTR_DIMENSIONS, n_b, bdims);
    return in;
}

gs_instr *gs_build_reshape(gs_builder *b, gs_instr *x, int rank, const int64_t *dims) {
    if (!x) return fail(b);
    if (x->shape->rank == rank &&
        (rank == 0 || memcmp(x->shape->dims, dims, sizeof *dims * (size_t)rank) == 0))
        return x;
    gs_shape s = {.type = x->shape->type, .rank = rank, .dims = (int64_t *)dims};
    GS_ASSERT(gs_shape_elements(&s) == gs_shape_elements(x->shape));
    return gs_build(b, GS_OP_RESHAPE, &s, 1, &x);
}

gs_instr *gs_build_transpose(gs_builder *b, gs_instr *x, const int *perm) {
    if (!x) return fail(b);
    int r = x->shape->rank;
    bool id = true;
    int64_t dims[GS_MAX_RANK], p64[GS_MAX_RANK];
    for (int i = 0; i < r; i++) {
        dims[i] = x->shape->dims[perm[i]];
        p64[i] = perm[i];
        id = id && perm[i] == i;
    }
    if (id) return x;
    gs_shape s = {.type = x->shape->type, .rank = r, .dims = dims};
    gs_instr *in = gs_build(b, GS_OP_TRANSPOSE, &s, 1, &x);
    gs_build_set_ints(b, in, GS_ATTR_DIMENSIONS, r, p64);
    return in;
}

gs_instr *gs_build_slice(gs_builder *b, gs_instr *x, const int64_t *start, const int64_t *limit,
                         const int64_t *stride) {
    if (!x) return fail(b);
    int r = x->shape->rank;
    bool id = true;
    int64_t dims[GS_MAX_RANK];
    gs_slice_dim *sd = GS_NEW_ARRAY(ar(b), gs_slice_dim, r + 1);
    if (!sd) return fail(b);
    for (int i = 0; i < r; i++) {
        int64_t st = stride ? stride[i] : 1;
        GS_ASSERT(start[i] >= 0 && limit[i] <= x->shape->dims[i] && start[i] <= limit[i]);
        sd[i] = (gs_slice_dim){start[i], limit[i], st};
        dims[i] = (limit[i] - start[i] + st - 1) / st;
        id = id && start[i] == 0 && limit[i] == x->shape->dims[i] && st == 1;
    }
    if (id) return x;
    gs_shape s = {.type = x->shape->type, .rank = r, .dims = dims};
    gs_instr *in = gs_build(b, GS_OP_SLICE, &s, 1, &x);
    if (!in) return NULL;
    gs_attr a = {.key = GS_ATTR_SLICE};
    a.u.slice.n = r;
    a.u.slice.v = sd;
    set(b, in, &a);
    return in;
}

gs_instr *gs_build_dynamic_slice(gs_builder *b, gs_instr *x, gs_instr *const *idx,
                                 const int64_t *sizes) {
    if (!x) return fail(b);
    int r = x->shape->rank;
    gs_instr *ops[GS_MAX_RANK + 1];
    ops[0] = x;
    for (int i = 0; i < r; i++) ops[i + 1] = idx[i];
    gs_shape s = {.type = x->shape->type, .rank = r, .dims = (int64_t *)sizes};
    bool dyn[GS_MAX_RANK], any = false; /* a dynamic dim taken whole stays dynamic */
    for (int i = 0; i < r; i++)
        any |= dyn[i] = x->shape->dynamic && x->shape->dynamic[i] && sizes[i] == x->shape->dims[i];
    if (any) s.dynamic = dyn;
    gs_instr *in = gs_build(b, GS_OP_DYNAMIC_SLICE, &s, r + 1, ops);
    gs_build_set_ints(b, in, GS_ATTR_DYNAMIC_SLICE_SIZES, r, sizes);
    return in;
}

gs_instr *gs_build_dynamic_update_slice(gs_builder *b, gs_instr *x, gs_instr *upd,
                                        gs_instr *const *idx) {
    if (!x || !upd) return fail(b);
    int r = x->shape->rank;
    gs_instr *ops[GS_MAX_RANK + 2];
    ops[0] = x;
    ops[1] = upd;
    for (int i = 0; i < r; i++) ops[i + 2] = idx[i];
    return gs_build(b, GS_OP_DYNAMIC_UPDATE_SLICE, x->shape, r + 2, ops);
}

gs_instr *gs_build_pad(gs_builder *b, gs_instr *x, gs_instr *v, const int64_t *lo,
                       const int64_t *hi, const int64_t *interior) {
    if (!x || !v) return fail(b);
    int r = x->shape->rank;
    bool id = true;
    int64_t dims[GS_MAX_RANK];
    gs_padding *p = GS_NEW(ar(b), gs_padding);
    gs_pad_dim *pd = GS_NEW_ARRAY(ar(b), gs_pad_dim, r + 1);
    if (!p || !pd) return fail(b);
    for (int i = 0; i < r; i++) {
        int64_t in_ = interior ? interior[i] : 0, n = x->shape->dims[i];
        pd[i] = (gs_pad_dim){lo[i], hi[i], in_};
        dims[i] = lo[i] + hi[i] + n + (n > 0 ? (n - 1) * in_ : 0);
        id = id && lo[i] == 0 && hi[i] == 0 && in_ == 0;
    }
    if (id) return x;
    p->n = r;
    p->dims = pd;
    gs_shape s = {.type = x->shape->type, .rank = r, .dims = dims};
    gs_instr *ops[2] = {x, v};
    gs_instr *in = gs_build(b, GS_OP_PAD, &s, 2, ops);
    if (!in) return NULL;
    gs_attr a = {.key = GS_ATTR_PADDING};
    a.u.padding = p;
    set(b, in, &a);
    return in;
}

gs_instr *gs_build_concatenate(gs_builder *b, int n, gs_instr *const *xs, int dim) {
    if (n == 1) return xs[0];
    int64_t dims[GS_MAX_RANK];
    for (int i = 0; i < n; i++)
        if (!xs[i]) return fail(b);
    memcpy(dims, xs[0]->shape->dims, sizeof *dims * (size_t)xs[0]->shape->rank);
    dims[dim] = 0;
    for (int i = 0; i < n; i++) dims[dim] += xs[i]->shape->dims[dim];
    gs_shape s = {.type = xs[0]->shape->type, .rank = xs[0]->shape->rank, .dims = dims};
    gs_instr *in = gs_build(b, GS_OP_CONCATENATE, &s, n, xs);
    int64_t d = dim;
    gs_build_set_ints(b, in, GS_ATTR_DIMENSIONS, 1, &d);
    return in;
}

gs_instr *gs_build_reduce(gs_builder *b, gs_instr *x, gs_instr *init, int n, const int64_t *dims,
                          gs_computation *comp) {
    if (!x || !init || !comp) return fail(b);
    int r = x->shape->rank, k = 0;
    int64_t out[GS_MAX_RANK];
    for (int i = 0; i < r; i++) {
        bool red = false;
        for (int j = 0; j < n; j++) red = red || dims[j] == i;
        if (!red) out[k++] = x->shape->dims[i];
    }
    gs_shape s = {.type = x->shape->type, .rank = k, .dims = out};
    gs_instr *ops[2] = {x, init};
    gs_instr *in = gs_build(b, GS_OP_REDUCE, &s, 2, ops);
    gs_build_set_ints(b, in, GS_ATTR_DIMENSIONS, n, dims);
    gs_build_set_comp(b, in, GS_ATTR_TO_APPLY, comp);
    return in;
}

gs_instr *gs_build_tuple(gs_builder *b, int n, gs_instr *const *xs) {
    gs_shape *el[256];
    gs_shape **elems = n <= 256 ? el : GS_NEW_ARRAY(ar(b), gs_shape *, n);
    if (!elems) return fail(b);
    for (int i = 0; i < n; i++) {
        if (!xs[i]) return fail(b);
        elems[i] = xs[i]->shape;
    }
    gs_shape *s = gs_shape_tuple(ar(b), n, elems);
    return gs_build(b, GS_OP_TUPLE, s, n, xs);
}

gs_instr *gs_build_gte(gs_builder *b, gs_instr *x, int index) {
    if (!x) return fail(b);
    GS_ASSERT(x->shape->type == GS_TUPLE && index < x->shape->n_tuple);
    gs_instr *in = gs_build(b, GS_OP_GET_TUPLE_ELEMENT, x->shape->tuple[index], 1, &x);
    gs_build_set_int(b, in, GS_ATTR_INDEX, index);
    return in;
}

/* ------------------------------------------------------------------ collectives */

gs_instr *gs_build_all_reduce(gs_builder *b, gs_instr *x, const gs_replica_groups *g,
                              gs_computation *comp, int64_t channel) {
    if (!x) return fail(b);
    gs_instr *in = gs_build(b, GS_OP_ALL_REDUCE, x->shape, 1, &x);
    gs_build_set_int(b, in, GS_ATTR_CHANNEL_ID, channel);
    gs_build_set_groups(b, in, g);
    gs_build_set_bool(b, in, GS_ATTR_USE_GLOBAL_DEVICE_IDS, true);
    gs_build_set_comp(b, in, GS_ATTR_TO_APPLY, comp);
    return in;
}

/* The dynamic flags of x's dims but `except` (which a collective concatenates or splits: its
 * size is static) into dyn; whether any is set. */
static bool dynamic_but(const gs_shape *x, int except, bool *dyn) {
    bool any = false;
    for (int i = 0; i < x->rank; i++)
        any |= dyn[i] = i != except && x->dynamic && x->dynamic[i];
    return any;
}

gs_instr *gs_build_all_gather(gs_builder *b, gs_instr *x, int dim, int64_t group_size,
                              const gs_replica_groups *g, int64_t channel) {
    if (!x) return fail(b);
    int64_t dims[GS_MAX_RANK], d = dim;
    memcpy(dims, x->shape->dims, sizeof *dims * (size_t)x->shape->rank);
    dims[dim] *= group_size;
    gs_shape s = {.type = x->shape->type, .rank = x->shape->rank, .dims = dims};
    bool dyn[GS_MAX_RANK]; /* the other dims keep their run-time sizes */
    if (dynamic_but(x->shape, dim, dyn)) s.dynamic = dyn;
    gs_instr *in = gs_build(b, GS_OP_ALL_GATHER, &s, 1, &x);
    gs_build_set_int(b, in, GS_ATTR_CHANNEL_ID, channel);
    gs_build_set_groups(b, in, g);
    gs_build_set_ints(b, in, GS_ATTR_DIMENSIONS, 1, &d);
    gs_build_set_bool(b, in, GS_ATTR_USE_GLOBAL_DEVICE_IDS, true);
    return in;
}

gs_instr *gs_build_reduce_scatter(gs_builder *b, gs_instr *x, int dim, int64_t group_size,
                                  const gs_replica_groups *g, gs_computation *comp,
                                  int64_t channel) {
    if (!x) return fail(b);
    int64_t dims[GS_MAX_RANK], d = dim;
    memcpy(dims, x->shape->dims, sizeof *dims * (size_t)x->shape->rank);
    GS_ASSERT(dims[dim] % group_size == 0);
    dims[dim] /= group_size;
    gs_shape s = {.type = x->shape->type, .rank = x->shape->rank, .dims = dims};
    bool dyn[GS_MAX_RANK];
    if (dynamic_but(x->shape, dim, dyn)) s.dynamic = dyn;
    gs_instr *in = gs_build(b, GS_OP_REDUCE_SCATTER, &s, 1, &x);
    gs_build_set_int(b, in, GS_ATTR_CHANNEL_ID, channel);
    gs_build_set_groups(b, in, g);
    gs_build_set_ints(b, in, GS_ATTR_DIMENSIONS, 1, &d);
    gs_build_set_bool(b, in, GS_ATTR_USE_GLOBAL_DEVICE_IDS, true);
    gs_build_set_comp(b, in, GS_ATTR_TO_APPLY, comp);
    return in;
}

gs_instr *gs_build_all_to_all(gs_builder *b, gs_instr *x, int dim, const gs_replica_groups *g,
                              int64_t channel) {
    if (!x) return fail(b);
    int64_t d = dim;
    gs_instr *in = gs_build(b, GS_OP_ALL_TO_ALL, x->shape, 1, &x);
    gs_build_set_int(b, in, GS_ATTR_CHANNEL_ID, channel);
    gs_build_set_groups(b, in, g);
    gs_build_set_ints(b, in, GS_ATTR_DIMENSIONS, 1, &d);
    return in;
}

gs_instr *gs_build_collective_permute(gs_builder *b, gs_instr *x, int n_pairs,
                                      const int64_t (*pairs)[2], int64_t channel) {
    if (!x) return fail(b);
    gs_instr *in = gs_build(b, GS_OP_COLLECTIVE_PERMUTE, x->shape, 1, &x);
    gs_build_set_int(b, in, GS_ATTR_CHANNEL_ID, channel);
    if (!in) return NULL;
    gs_attr a = {.key = GS_ATTR_SOURCE_TARGET_PAIRS};
    a.u.pairs.n = n_pairs;
    if (n_pairs > 0) {
        a.u.pairs.v = gs_arena_memdup(ar(b), pairs, sizeof(int64_t[2]) * (size_t)n_pairs);
        if (!a.u.pairs.v) return fail(b);
    }
    set(b, in, &a);
    return in;
}

/* ------------------------------------------------------------------ computations */

void gs_module_move_before_entry(gs_module *m, gs_computation *c) {
    int at = -1, ei = -1;
    for (int i = 0; i < m->n_comps; i++) {
        if (m->comps[i] == c) at = i;
        if (m->comps[i]->is_entry) ei = i;
    }
    if (at < 0 || ei < 0 || at < ei) return;
    memmove(m->comps + ei + 1, m->comps + ei, sizeof *m->comps * (size_t)(at - ei));
    m->comps[ei] = c;
}

gs_computation *gs_build_scalar_computation(gs_builder *b, const char *stem, gs_opcode op,
                                            gs_type t) {
    const char *name = gs_names_fresh(b->names, ar(b), stem);
    if (!name) return fail(b);
    gs_computation *c = gs_computation_new(b->m, name);
    if (!c) return fail(b);
    gs_module_move_before_entry(b->m, c);
    gs_builder cb;
    gs_builder_init(&cb, b->m, c, b->names);
    cb.stem = NULL;
    gs_shape s = {.type = t};
    gs_instr *x = gs_build_parameter(&cb, 0, &s, gs_names_fresh(b->names, ar(b), "x"));
    gs_instr *y = gs_build_parameter(&cb, 1, &s, gs_names_fresh(b->names, ar(b), "y"));
    gs_instr *r = gs_build_binary(&cb, op, x, y);
    if (cb.failed || !r) return fail(b);
    r->is_root = true;
    c->root = r;
    return c;
}
