/*
 * h_windowed.c — windowed einsum (XLA's loops that overlap a dot with collective-permutes).
 *
 * Three forms, each a `while` loop of k steps over the k devices of a ring (the devices that split
 * one dim), whose body is one partial dot and one collective-permute: the program does not grow
 * with the device count, and a runtime that runs the permute asynchronously overlaps it with the
 * next step's dot.
 *
 *   all-gather form   the plan h_dot.c chose all-gathers operand X along one of its free dims
 *                     (the output holds that dim whole). Instead each device starts with its own
 *                     shard; at step i it multiplies the shard it holds — tile (j + i) mod k, j
 *                     its own — with the other operand, writes the product into that block of
 *                     the output, and passes the shard one tile down the ring. Only one shard of
 *                     X is ever resident.
 *   reduce-scatter    the plan leaves partial sums (a split contracting dim) that the result
 *   form              scatters along an output dim made by X's free dim (or along two, the
 *                     group's tiles split between them: block b is (b / k2, b % k2)). Instead
 *                     the partial sum of one output block travels up the ring: device j at
 *                     step i adds its product for block (j + k - 1 - i) mod k (a dynamic-slice
 *                     of X) to the sum it received, so after k steps it holds block j whole.
 *                     The whole partial output is never materialised.
 *   contracting form  the plan all-gathers X along a contracting dim (the other operand Y holds
 *                     it whole). Instead the shard travels as in the all-gather form and each
 *                     step adds the product of the shard with the matching block of Y (a
 *                     dynamic-slice of Y padded to k blocks). Only where the output has no
 *                     replicas: each device sums in its own order round the ring, and two
 *                     devices holding the same tile must agree bit for bit. f32/f64 only.
 *
 * Chosen, as XLA does, over any plan that moves data (h_dot.c asks gs_part_windowed_applies of
 * each candidate whose other operand, and whose result unless the loop scatters it, stay as
 * they are: XLA keeps an operand that matches the result and loops over the other) when the
 * gathered operand (or the partial output) is at least the threshold
 * per device (gs_partition_options: XLA's threshold_for_windowed_einsum_mib, 256 MiB unless
 * set), for dots (not convolutions) outside manual regions; an uneven dim is padded to k
 * whole blocks and the padding sliced off. With bidirectional_windowed_einsum the shards (or
 * sums) travel both ways round the ring, about k/2 steps of two dots each.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of a per-device shape. */
static double bytes_of(const gs_shape *s) {
    double n = gs_type_size(s->type);
    for (int i = 0; i < s->rank; i++) n *= (double)s->dims[i];
    return n;
}

/* Is plan sharding `want` (for operand value v, free tensor dim xd) v's sharding with dim xd
 * gathered, and does the rest fit the loop? */
static bool gathers_dim(gs_part_ctx *c, const gs_part_value *v, const gs_sharding *want, int xd) {
    const gs_sharding *s = v->sharding;
    if (!v->hlo || !gs_part_plain(s) || s->kind != GS_SHARDING_TILED || gs_part_partial_manual(s))
        return false;
    int64_t k = gs_sharding_tiles_in_dim(s, xd);
    if (k < 2 || gs_part_unreduced_dim(s) != -1) return false;
    return gs_sharding_equal(gs_part_replicate_dims(c, s, 1, &xd), want);
}

/* What a step needs. State: (step, own tile index, X, Y, output). */
typedef struct window_step {
    const gs_instr *in;       /* the dot */
    int xi;                   /* which operand X is (0 lhs, 1 rhs) */
    int xd, od;               /* X's dim and the output's dim that the loop walks */
    int64_t k, chunk;         /* shards in the ring, and their length along xd / od */
    int xd2, od2;             /* reduce-scatter form over two output dims: the second (-1
                                 when none); block b is (b / k2, b % k2) along (od, od2) */
    int64_t k2, chunk2;       /* blocks along od2 (1 when none), and their length */
    const gs_shape *cs;       /* one step's product */
    int n_pairs;              /* the ring's collective-permute */
    const int64_t (*pairs)[2];
    int n_back;               /* bidirectional: the permute the other way round */
    const int64_t (*back)[2];
} window_step;


/* The loop over ring tile dim `dim` of `ring` (w->k devices; each step's permute sends `dist`
 * tiles down): while (step < k) state = f(state), from (0, own tile index, x0, y0, zeros of
 * shape acc). The final output (element 4), or NULL. */
static gs_instr *ring_loop(gs_part_ctx *c, window_step *w, const gs_tile_assignment *ring, int dim,
                           int64_t dist, gs_instr *x0, gs_instr *y0, const gs_shape *acc,
                           gs_part_step_fn f) {
    int64_t(*pairs)[2] = gs_part_ring_pairs(ring, dim, dist, &w->n_pairs);
    if (!pairs) {
        gs_part_oom(c);
        return NULL;
    }
    w->pairs = (const int64_t(*)[2])pairs;
    gs_instr *zero = gs_part_zeros(c, acc);
    gs_instr *init[5] = {gs_part_s32(c, 0), gs_part_tile_index(c, ring, dim), x0, y0, zero};
    gs_instr *loop = gs_part_build_loop(c, "windowed_dot", 5, init, w->k, f, w);
    free(pairs);
    return loop ? gs_build_gte(gs_part_builder(c), loop, 4) : NULL;
}

gs_instr *gs_part_build_loop(gs_part_ctx *c, const char *name, int n, gs_instr **init,
                            int64_t k, gs_part_step_fn f, void *ctx) {
    gs_builder *b = gs_part_builder(c);
    gs_arena *ma = &b->m->arena;
    gs_shape *leaf[8];
    for (int i = 0; i < n; i++) {
        if (!init[i]) return NULL;
        leaf[i] = init[i]->shape;
    }
    gs_shape *ts = gs_shape_tuple(ma, n, leaf);
    gs_instr *state = gs_build_tuple(b, n, init);
    char bname[64], cname[64];
    snprintf(bname, sizeof bname, "%s_body", name);
    snprintf(cname, sizeof cname, "%s_cond", name);
    const char *bn = gs_names_fresh(&c->e->names, ma, bname);
    const char *cn = gs_names_fresh(&c->e->names, ma, cname);
    gs_computation *body = bn ? gs_computation_new(b->m, bn) : NULL;
    gs_computation *cond = cn ? gs_computation_new(b->m, cn) : NULL;
    if (!ts || !state || !body || !cond) {
        gs_part_oom(c);
        return NULL;
    }
    gs_part_scope *sc = gs_part_enter_computation(c, body);
    if (sc) {
        gs_builder *bb = gs_part_builder(c);
        gs_instr *p = gs_build_parameter(bb, 0, ts, gs_names_fresh(&c->e->names, ma, "state"));
        gs_instr *g[8], *next[8] = {0};
        for (int i = 0; i < n; i++) g[i] = gs_build_gte(bb, p, i);
        f(c, ctx, g, next);
        next[0] = gs_part_add(c, g[0], gs_part_s32(c, 1));
        gs_instr *root = gs_build_tuple(bb, n, next);
        if (root) {
            root->is_root = true;
            body->root = root;
        }
        gs_part_leave_computation(c, sc);
    }
    sc = gs_part_enter_computation(c, cond);
    if (sc) {
        gs_builder *cb = gs_part_builder(c);
        gs_instr *p = gs_build_parameter(cb, 0, ts, gs_names_fresh(&c->e->names, ma, "state"));
        gs_instr *lt = gs_build_compare(cb, gs_build_gte(cb, p, 0), gs_part_s32(c, k), "LT");
        if (lt) {
            lt->is_root = true;
            cond->root = lt;
        }
        gs_part_leave_computation(c, sc);
    }
    if (c->failed || !body->root || !cond->root) return NULL;
    b = gs_part_builder(c);
    gs_instr *loop = gs_build(b, GS_OP_WHILE, ts, 1, &state);
    if (!loop) return NULL;
    gs_build_set_comp(b, loop, GS_ATTR_BODY, body);
    gs_build_set_comp(b, loop, GS_ATTR_CONDITION, cond);
    return loop;
}

static gs_instr *step_dot(gs_part_ctx *c, const window_step *w, gs_instr *x, gs_instr *y) {
    gs_instr *ops[2] = {w->xi == 0 ? x : y, w->xi == 0 ? y : x};
    return gs_part_clone(c, w->in, w->cs, 2, ops);
}

/* All-gather form: out[block (j + i) mod k] = X shard · Y; the shard moves one tile down the
 * ring. */
static void gather_step(gs_part_ctx *c, void *ctx, gs_instr *const *g, gs_instr **next) {
    const window_step *w = ctx;
    gs_instr *d = step_dot(c, w, g[2], g[3]);
    gs_instr *blk = gs_part_rem(c, gs_part_add(c, g[1], g[0]), w->k);
    gs_instr *idx[GS_MAX_RANK];
    for (int i = 0; i < w->cs->rank; i++)
        idx[i] = i == w->od ? gs_part_mul(c, blk, w->chunk) : gs_part_s32(c, 0);
    next[1] = g[1];
    next[2] = gs_part_permute(c, g[2], w->n_pairs, w->pairs);
    next[3] = g[3];
    next[4] = gs_build_dynamic_update_slice(gs_part_builder(c), g[4], d, idx);
}

/* out with the product of shard x and y written at block `blk` along the output dim. */
static gs_instr *put_block(gs_part_ctx *c, const window_step *w, gs_instr *out, gs_instr *x,
                           gs_instr *y, gs_instr *blk) {
    gs_instr *idx[GS_MAX_RANK];
    for (int i = 0; i < w->cs->rank; i++)
        idx[i] = i == w->od ? gs_part_mul(c, blk, w->chunk) : gs_part_s32(c, 0);
    return gs_build_dynamic_update_slice(gs_part_builder(c), out, step_dot(c, w, x, y), idx);
}

/* Bidirectional all-gather form, state (step i, own tile j, shard a, shard b, Y, output): a
 * holds tile (j + i) mod k and moves down the ring, b holds tile (j - i) mod k and moves up, so
 * each step fills two blocks and the loop takes about k/2 steps. */
static void gather2_step(gs_part_ctx *c, void *ctx, gs_instr *const *g, gs_instr **next) {
    const window_step *w = ctx;
    gs_instr *up = gs_part_rem(c, gs_part_add(c, g[1], g[0]), w->k);
    gs_instr *down = gs_part_rem(
        c, gs_part_add(c, gs_part_s32(c, w->k), gs_part_add(c, g[1], gs_part_mul(c, g[0], -1))),
        w->k);
    gs_instr *o = put_block(c, w, g[5], g[2], g[4], up);
    next[1] = g[1];
    next[2] = gs_part_permute(c, g[2], w->n_pairs, w->pairs);
    next[3] = gs_part_permute(c, g[3], w->n_back, w->back);
    next[4] = g[4];
    next[5] = put_block(c, w, o, g[3], g[4], down);
}

/* Reduce-scatter form: the partial sum of one output block travels up the ring, each device
 * adding its part: device j at step i adds block (j + k - 1 - i) mod k, so after k steps it
 * holds the whole sum of its own block j. */
/* This device's product for output block (my + off - i) mod k (off a constant, i the step). */
static gs_instr *block_product(gs_part_ctx *c, const window_step *w, gs_instr *x, gs_instr *y,
                               gs_instr *my, int64_t off, gs_instr *i, int64_t sign) {
    gs_instr *at = gs_part_add(c, my, gs_part_s32(c, off + w->k));
    if (i) at = gs_part_add(c, at, gs_part_mul(c, i, -sign));
    gs_instr *blk = gs_part_rem(c, at, w->k);
    gs_instr *b1 = blk, *b2 = NULL;
    if (w->xd2 >= 0) {
        b1 = gs_part_div(c, blk, w->k2);
        b2 = gs_part_rem(c, blk, w->k2);
    }
    gs_instr *idx[GS_MAX_RANK];
    int64_t sizes[GS_MAX_RANK];
    for (int d = 0; d < x->shape->rank; d++) {
        idx[d] = d == w->xd    ? gs_part_mul(c, b1, w->chunk)
                 : d == w->xd2 ? gs_part_mul(c, b2, w->chunk2)
                               : gs_part_s32(c, 0);
        sizes[d] = d == w->xd ? w->chunk : d == w->xd2 ? w->chunk2 : x->shape->dims[d];
    }
    return step_dot(c, w, gs_build_dynamic_slice(gs_part_builder(c), x, idx, sizes), y);
}

static void scatter_step(gs_part_ctx *c, void *ctx, gs_instr *const *g, gs_instr **next) {
    const window_step *w = ctx;
    gs_instr *acc = gs_part_permute(c, g[4], w->n_pairs, w->pairs);
    next[1] = g[1];
    next[2] = g[2];
    next[3] = g[3];
    next[4] = gs_build_binary(gs_part_builder(c), GS_OP_ADD, acc,
                              block_product(c, w, g[2], g[3], g[1], -1, g[0], 1));
}

/* Bidirectional reduce-scatter form, state (step i, own tile j, X, Y, A, B): the sum A bound
 * for tile t passes up through tiles t - ma .. t - 1, each adding its product for block t,
 * and B down through t + mb .. t + 1 (ma + mb = k - 1, ma = mb or mb + 1); device j at step i
 * adds block j + mb - i to B and, ma being mb + 1 with one A step taken before the loop, block
 * j + ma - 1 - i to A. */
static void scatter2_step(gs_part_ctx *c, void *ctx, gs_instr *const *g, gs_instr **next) {
    const window_step *w = ctx;
    gs_builder *b = gs_part_builder(c);
    int64_t mb = (w->k - 1) / 2, ma = w->k - 1 - mb, sa = ma > mb ? 1 : 0;
    gs_instr *a = gs_build_binary(b, GS_OP_ADD, g[4],
                                  block_product(c, w, g[2], g[3], g[1], ma - sa, g[0], 1));
    gs_instr *bb = gs_build_binary(b, GS_OP_ADD, g[5],
                                   block_product(c, w, g[2], g[3], g[1], -mb, g[0], -1));
    next[1] = g[1];
    next[2] = g[2];
    next[3] = g[3];
    next[4] = gs_part_permute(c, a, w->n_pairs, w->pairs);
    next[5] = gs_part_permute(c, bb, w->n_back, w->back);
}

/* The bidirectional reduce-scatter loop over ring tile dim `dim`: the own block's product plus
 * the two sums that arrive from either side. */
static gs_instr *scatter_both_ways(gs_part_ctx *c, window_step *w, const gs_tile_assignment *ring,
                                   int dim, gs_instr *x0, gs_instr *y0, const gs_shape *acc) {
    int64_t(*upw)[2] = gs_part_ring_pairs(ring, dim, -1, &w->n_pairs);
    int64_t(*dnw)[2] = gs_part_ring_pairs(ring, dim, 1, &w->n_back);
    gs_instr *r = NULL;
    if (upw && dnw) {
        w->pairs = (const int64_t(*)[2])upw;
        w->back = (const int64_t(*)[2])dnw;
        gs_builder *b = gs_part_builder(c);
        int64_t mb = (w->k - 1) / 2, ma = w->k - 1 - mb;
        gs_instr *my = gs_part_tile_index(c, ring, dim);
        gs_instr *zero = gs_part_zeros(c, acc);
        gs_instr *a0 = zero;
        if (ma > mb) /* A's first step, which B does not take */
            a0 = gs_part_permute(c, block_product(c, w, x0, y0, my, ma, NULL, 1), w->n_pairs,
                                 w->pairs);
        gs_instr *init[6] = {gs_part_s32(c, 0), my, x0, y0, a0, zero};
        gs_instr *loop = gs_part_build_loop(c, "windowed_dot", 6, init, mb, scatter2_step, w);
        if (loop) {
            b = gs_part_builder(c);
            gs_instr *own = block_product(c, w, x0, y0, my, 0, NULL, 1);
            r = gs_build_binary(b, GS_OP_ADD, gs_build_gte(b, loop, 4), gs_build_gte(b, loop, 5));
            r = gs_build_binary(b, GS_OP_ADD, r, own);
        }
    } else {
        gs_part_oom(c);
    }
    free(upw);
    free(dnw);
    return r;
}

/* The operands as plan `best` wants them, contracting padding masked: X (operand xi) from
 * sharding sx, Y from the plan. */
static bool operands(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                     const gs_part_space_plan *best, int xi, const gs_sharding *sx, gs_instr **x,
                     gs_instr **y) {
    const gs_part_value *xv = gs_part_operand(c, in, xi), *yv = gs_part_operand(c, in, 1 - xi);
    gs_part_value xr, yr;
    gs_part_reshard(c, xv, sx, &xr);
    gs_part_reshard(c, yv, xi == 0 ? best->rhs : best->lhs, &yr);
    if (!xr.hlo || !yr.hlo) return false;
    const int *xk = xi == 0 ? sp->lk : sp->rk, *yk = xi == 0 ? sp->rk : sp->lk;
    *x = gs_part_mask(c, xr.hlo, sx, xv->base->dims, sp->n_lk, xk, NULL);
    *y = gs_part_mask(c, yr.hlo, yr.sharding, yv->base->dims, sp->n_lk, yk, NULL);
    return *x && *y;
}

/* The bidirectional all-gather loop: the own block first, then m = (k-1)/2 steps of two
 * blocks (the shard passed down the ring and the one passed up), then, for even k, the block
 * opposite on the ring. The output, or NULL. */
static gs_instr *gather_both_ways(gs_part_ctx *c, window_step *w, const gs_tile_assignment *ring,
                                  gs_instr *x0, gs_instr *y0, const gs_shape *acc) {
    int xd = w->xd;
    int64_t(*down)[2] = gs_part_ring_pairs(ring, xd, 1, &w->n_pairs);
    int64_t(*up)[2] = gs_part_ring_pairs(ring, xd, -1, &w->n_back);
    gs_instr *r = NULL;
    if (down && up) {
        w->pairs = (const int64_t(*)[2])down;
        w->back = (const int64_t(*)[2])up;
        gs_builder *b = gs_part_builder(c);
        gs_instr *my = gs_part_tile_index(c, ring, xd);
        gs_instr *zero = gs_part_zeros(c, acc);
        gs_instr *o = put_block(c, w, zero, x0, y0, my);
        gs_instr *init[6] = {gs_part_s32(c, 1),
                             my,
                             gs_part_permute(c, x0, w->n_pairs, w->pairs),
                             gs_part_permute(c, x0, w->n_back, w->back),
                             y0,
                             o};
        int64_t m = (w->k - 1) / 2;
        gs_instr *loop = gs_part_build_loop(c, "windowed_dot", 6, init, m + 1, gather2_step, w);
        if (loop) {
            b = gs_part_builder(c);
            r = gs_build_gte(b, loop, 5);
            if (w->k % 2 == 0 && r) /* a now holds tile j + k/2 */
                r = put_block(c, w, r, gs_build_gte(b, loop, 2), y0,
                              gs_part_rem(c, gs_part_add(c, my, gs_part_s32(c, w->k / 2)), w->k));
        }
    } else {
        gs_part_oom(c);
    }
    free(down);
    free(up);
    return r;
}

/* The all-gather form for X = operand xi gathered along its tensor dim xd (output dim od). */
static bool emit_gather(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                        const gs_part_space_plan *best, int xi, int xd, int od,
                        gs_part_value *out) {
    gs_builder *b = gs_part_builder(c);
    gs_arena *ma = &b->m->arena;
    const gs_sharding *sx = gs_part_operand(c, in, xi)->sharding;
    window_step w = {.in = in, .xi = xi, .xd = xd, .od = od, .k = gs_sharding_tiles_in_dim(sx, xd),
                     .xd2 = -1, .od2 = -1, .k2 = 1};
    gs_instr *x0, *y0;
    if (!operands(c, in, sp, best, xi, sx, &x0, &y0)) return false;
    const gs_shape *ol = gs_part_local_shape(c, in->shape, best->out);
    if (!ol) return false;
    /* The output holds k blocks of X's shard length (the last padded when the dim is uneven:
     * sliced off after the loop). */
    w.chunk = x0->shape->dims[xd];
    int64_t whole = ol->dims[od];
    gs_shape *cs = gs_shape_with_type(ma, ol, ol->type);
    gs_shape *as = gs_shape_with_type(ma, ol, ol->type);
    if (!cs || !as) {
        gs_part_oom(c);
        return false;
    }
    cs->dims[od] = w.chunk;
    as->dims[od] = w.chunk * w.k;
    w.cs = cs;
    gs_instr *r = c->opts->bidirectional_windowed_einsum && w.k > 2
                      ? gather_both_ways(c, &w, &sx->tiles, x0, y0, as)
                      : ring_loop(c, &w, &sx->tiles, xd, 1, x0, y0, as, gather_step);
    b = gs_part_builder(c);
    if (r && as->dims[od] != whole) {
        int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
        for (int i = 0; i < as->rank; i++) lim[i] = i == od ? whole : as->dims[i];
        r = gs_build_slice(b, r, st, lim, NULL);
    }
    out->hlo = r;
    out->base = in->shape;
    out->sharding = best->out;
    out->combiner = GS_OP_ADD;
    return r != NULL;
}

/* Contracting form: out += X shard · Y's block (j + i) mod k along Y's contracting dim w->od
 * (the block the shard multiplies); the shard moves one tile down the ring. */
static void contract_step(gs_part_ctx *c, void *ctx, gs_instr *const *g, gs_instr **next) {
    const window_step *w = ctx;
    gs_instr *blk = gs_part_rem(c, gs_part_add(c, g[1], g[0]), w->k);
    gs_instr *y = g[3], *idx[GS_MAX_RANK];
    int64_t sizes[GS_MAX_RANK];
    for (int d = 0; d < y->shape->rank; d++) {
        idx[d] = d == w->od ? gs_part_mul(c, blk, w->chunk) : gs_part_s32(c, 0);
        sizes[d] = d == w->od ? w->chunk : y->shape->dims[d];
    }
    gs_instr *part =
        step_dot(c, w, g[2], gs_build_dynamic_slice(gs_part_builder(c), y, idx, sizes));
    next[1] = g[1];
    next[2] = gs_part_permute(c, g[2], w->n_pairs, w->pairs);
    next[3] = g[3];
    next[4] = gs_build_binary(gs_part_builder(c), GS_OP_ADD, g[4], part);
}

/* The contracting form for X = operand xi gathered along its contracting dim xd, which is Y's
 * dim yd: Y (whole along yd in the plan) is padded to k blocks of X's shard length, and the
 * loop sums the k products of each shard with its block of Y. */
static bool emit_contract(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                          const gs_part_space_plan *best, int xi, int xd, int yd,
                          gs_part_value *out) {
    const gs_sharding *sx = gs_part_operand(c, in, xi)->sharding;
    window_step w = {.in = in, .xi = xi, .xd = xd, .od = yd, .k = gs_sharding_tiles_in_dim(sx, xd),
                     .xd2 = -1, .od2 = -1, .k2 = 1};
    gs_instr *x0, *y0;
    if (!operands(c, in, sp, best, xi, sx, &x0, &y0)) return false;
    const gs_shape *ol = gs_part_local_shape(c, in->shape, best->out);
    if (!ol) return false;
    w.chunk = x0->shape->dims[xd];
    int64_t pd[GS_MAX_RANK];
    for (int i = 0; i < y0->shape->rank; i++)
        pd[i] = i == yd ? w.chunk * w.k : y0->shape->dims[i];
    if (pd[yd] < y0->shape->dims[yd]) return false;
    y0 = gs_part_pad_to(c, y0, pd, NULL);
    w.cs = ol;
    out->hlo = ring_loop(c, &w, &sx->tiles, xd, 1, x0, y0, ol, contract_step);
    out->base = in->shape;
    out->sharding = best->out;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}

/* The reduce-scatter form: the plan leaves partial sums over a ring of k devices that the
 * target scatters along output dim od, which operand xi's free dim xd makes (and, when xd2 is
 * not -1, along od2 too, which X's free dim xd2 makes: k/k2 blocks along od, k2 along od2). */
static bool emit_scatter(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                         const gs_part_space_plan *best, const gs_sharding *t, int xi, int xd,
                         int od, int xd2, int od2, gs_part_value *out) {
    gs_builder *b = gs_part_builder(c);
    gs_arena *ma = &b->m->arena;
    /* The ring: the devices of one unreduced group, along their tile dim. */
    const gs_sharding *po = best->out;
    int ud = gs_part_unreduced_dim(po);
    gs_tile_assignment ring = po->tiles;
    if (ud == -2) {
        int64_t n = c->n;
        ud = 0;
        if (gs_tile_iota(gs_part_arena(c), 1, &n, 0, NULL, NULL, &ring) != GS_OK) {
            gs_part_oom(c);
            return false;
        }
    }
    if (ud < 0) return false;
    window_step w = {.in = in, .xi = xi, .xd = xd, .od = od, .k = ring.dims[ud],
                     .xd2 = xd2, .od2 = od2, .k2 = 1};
    if (xd2 >= 0) w.k2 = gs_sharding_tiles_in_dim(t, od2);
    gs_instr *x0, *y0;
    if (!operands(c, in, sp, best, xi, xi == 0 ? best->lhs : best->rhs, &x0, &y0)) return false;
    const gs_shape *tl = gs_part_local_shape(c, in->shape, t);
    if (!tl) return false;
    w.chunk = tl->dims[od];
    w.chunk2 = xd2 >= 0 ? tl->dims[od2] : 0;
    /* X padded to whole blocks along xd (and xd2), so that every block's slice is in range. */
    int64_t pd[GS_MAX_RANK];
    for (int i = 0; i < x0->shape->rank; i++)
        pd[i] = i == xd    ? w.chunk * (w.k / w.k2)
                : i == xd2 ? w.chunk2 * w.k2
                           : x0->shape->dims[i];
    if (pd[xd] < x0->shape->dims[xd] || (xd2 >= 0 && pd[xd2] < x0->shape->dims[xd2]))
        return false;
    x0 = gs_part_pad_to(c, x0, pd, NULL);
    gs_shape *cs = gs_shape_with_type(ma, tl, tl->type);
    if (!cs || !x0) {
        gs_part_oom(c);
        return false;
    }
    w.cs = cs;
    out->hlo = c->opts->bidirectional_windowed_einsum && w.k > 2
                   ? scatter_both_ways(c, &w, &ring, ud, x0, y0, cs)
                   : ring_loop(c, &w, &ring, ud, -1, x0, y0, cs, scatter_step);
    out->base = in->shape;
    out->sharding = t;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}

/* Which windowed loop, if any, would carry out plan `best` of dot `in` (result wanted as t). */
typedef enum { WINDOW_GATHER, WINDOW_SCATTER, WINDOW_CONTRACT } window_form;
typedef struct window_choice {
    window_form form;
    int xi, xd, od; /* the operand looped over, its dim, and the output dim it makes (the
                       contracting form: the other operand's dim it contracts with) */
    int xd2, od2;   /* the reduce-scatter form over two output dims: the second, else -1 */
} window_choice;

static double threshold_bytes(const gs_partition_options *o) {
    return (o->windowed_einsum ? o->windowed_einsum_threshold_mib
                               : GS_WINDOWED_EINSUM_DEFAULT_MIB) * 1048576.0;
}

static bool choose(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                   const gs_part_space_plan *best, const gs_sharding *t, window_choice *wc) {
    const gs_partition_options *o = c->opts;
    if (!o || o->no_windowed_einsum || c->manual || in->op != GS_OP_DOT) return false;
    gs_type ty = in->shape->type;
    bool wide = ty == GS_F32 || ty == GS_F64; /* sums in the loop round as the dot's would */
    bool partial = gs_part_unreduced_dim(best->out) != -1;
    if (partial && !wide) return false;
    double limit = threshold_bytes(o);
    int k0 = sp->nb + sp->nm + sp->nn;
    for (int xi = 0; xi < 2; xi++) {
        const gs_part_value *xv = gs_part_operand(c, in, xi);
        const gs_sharding *want = xi == 0 ? best->lhs : best->rhs;
        const gs_part_space_map *m = xi == 0 ? &sp->lhs : &sp->rhs;
        int lo = xi == 0 ? sp->nb : sp->nb + sp->nm, hi = lo + (xi == 0 ? sp->nm : sp->nn);
        for (int xd = 0; xd < m->rank; xd++) {
            int64_t s = m->to[xd];
            if (s >= k0 && s < k0 + sp->nk && wide &&
                gs_sharding_num_tiles(best->out) == c->n) {
                /* X gathered along a contracting dim: sum its shards' products instead. Each
                 * device sums them in its own order round the ring, so only where no two
                 * devices hold the same output tile (replicas must agree bit for bit). */
                const gs_part_space_map *ym = xi == 0 ? &sp->rhs : &sp->lhs;
                const gs_shape *gl = gs_part_local_shape(c, xv->base, want);
                for (int yd = 0; yd < ym->rank; yd++)
                    if (ym->to[yd] == s && gathers_dim(c, xv, want, xd) && gl &&
                        bytes_of(gl) >= limit) {
                        *wc = (window_choice){WINDOW_CONTRACT, xi, xd, yd, -1, -1};
                        return true;
                    }
                continue;
            }
            if (s < lo || s >= hi) continue; /* a free dim of X */
            int od = -1;
            for (int i = 0; i < sp->out.rank; i++)
                if (sp->out.to[i] == s) od = i;
            if (od < 0 || gs_sharding_tiles_in_dim(best->out, od) != 1) continue;
            *wc = (window_choice){WINDOW_GATHER, xi, xd, od, -1, -1};
            /* X gathered along xd for the dot: loop over its shards instead. */
            const gs_shape *gl = gs_part_local_shape(c, xv->base, want);
            if (gathers_dim(c, xv, want, xd) && gl && bytes_of(gl) >= limit) return true;
            /* Partial sums reduce-scattered along od: loop over its blocks instead. */
            const gs_sharding *rs =
                partial ? gs_part_scatter_target(c, best->out, sp->out.rank, od) : NULL;
            const gs_shape *ol = gs_part_local_shape(c, in->shape, best->out);
            wc->form = WINDOW_SCATTER;
            if (rs && gs_part_plain(t) && gs_sharding_equal(rs, t) && ol && bytes_of(ol) >= limit)
                return true;
            /* ... or along od and a later output dim that X's free dim xd2 makes, the
             * partial sums' group split over both (the first major). */
            for (int xd2 = 0; partial && xd2 < m->rank; xd2++) {
                int64_t s2 = m->to[xd2];
                if (xd2 == xd || s2 < lo || s2 >= hi) continue;
                int od2 = -1;
                for (int i = 0; i < sp->out.rank; i++)
                    if (sp->out.to[i] == s2) od2 = i;
                if (od2 <= od || gs_sharding_tiles_in_dim(best->out, od2) != 1) continue;
                const gs_sharding *rs2 = gs_part_scatter_target2(
                    c, best->out, sp->out.rank, od, gs_sharding_tiles_in_dim(t, od), od2);
                if (rs2 && gs_part_plain(t) && gs_sharding_equal(rs2, t) && ol &&
                    bytes_of(ol) >= limit) {
                    wc->xd2 = xd2;
                    wc->od2 = od2;
                    return true;
                }
            }
        }
    }
    return false;
}

bool gs_part_windowed_applies(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                              const gs_part_space_plan *plan, const gs_sharding *t,
                              int *looped, bool *scatters) {
    window_choice wc;
    if (!choose(c, in, sp, plan, t, &wc)) return false;
    *looped = wc.xi;
    *scatters = wc.form == WINDOW_SCATTER;
    return true;
}

bool gs_part_windowed_dot(gs_part_ctx *c, const gs_instr *in, const gs_part_space *sp,
                          const gs_part_space_plan *best, const gs_sharding *t,
                          gs_part_value *out) {
    window_choice wc;
    if (c->e->dry || !choose(c, in, sp, best, t, &wc)) return false;
    switch (wc.form) {
    case WINDOW_SCATTER:
        return emit_scatter(c, in, sp, best, t, wc.xi, wc.xd, wc.od, wc.xd2, wc.od2, out);
    case WINDOW_CONTRACT: return emit_contract(c, in, sp, best, wc.xi, wc.xd, wc.od, out);
    default: return emit_gather(c, in, sp, best, wc.xi, wc.xd, wc.od, out);
    }
}
