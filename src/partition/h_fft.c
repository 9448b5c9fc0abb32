/*
 * h_fft.c — an FFT along a split last dim (XLA's HandleFft): the four-step (Cooley-Tukey)
 * decomposition of the length-N transform over P devices, each holding M = N / P contiguous
 * elements. With n = p + P*m and k = k1 + M*k2,
 *
 *   X[k1 + M*k2] = sum_p w_P^(p*k2) * w_N^(p*k1) * sum_m x[p + P*m] * w_M^(m*k1)
 *
 * (w_L = exp(-2 pi i / L); the inverse transform conjugates every w and scales by 1/N), so:
 *
 *   1. shuffle: device p gathers x[p + P*m], every P-th element from p, by one all-to-all (when
 *      P divides M, a reshape and transpose before it; else each device first places its block
 *      at its offset mod P in a zero buffer, and after the all-to-all a one-hot dot puts the
 *      received elements in order, as XLA's ShuffleWithinEachPartitionUsingOneHot does);
 *   2. the local FFT of length M (and the other transformed dims, which stay whole);
 *   3. the twiddle w_N^(p*k1), an elementwise product;
 *   4. the length-P DFT across the devices: a loop of P - 1 steps in which each device passes
 *      its vector one device down a ring (a collective-permute) and adds the one it received,
 *      times w_P^(p*q), to its own result q: the program does not grow with P.
 *
 * Device q then holds X[M*q, M*q + M), its tile of the result. Other layouts (an uneven split,
 * rfft/irfft, a split transformed dim other than the last) take the whole-dims path of
 * h_shape.c.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fft_step {
    int64_t p;             /* devices along the dim */
    double sign;           /* -1: FFT, +1: IFFT */
    int n_pairs;           /* the ring */
    const int64_t (*pairs)[2];
} fft_step;

/* exp(i * angle) of type ct (c64 or c128), angle an f64 value of any shape. */
static gs_instr *unit_phase(gs_part_ctx *c, gs_instr *angle, gs_type ct) {
    gs_builder *b = gs_part_builder(c);
    gs_instr *re = gs_build_unary(b, GS_OP_COS, angle), *im = gs_build_unary(b, GS_OP_SIN, angle);
    if (!re || !im) return NULL;
    gs_shape *s = gs_shape_with_type(gs_part_arena(c), angle->shape, GS_C128);
    gs_instr *ri[2] = {re, im};
    gs_instr *z = s ? gs_build(b, GS_OP_COMPLEX, s, 2, ri) : NULL;
    return z && ct != GS_C128 ? gs_build_convert(b, z, ct) : z;
}

/* exp(i * sign * 2 pi * (r mod l) / l) for an s32 value r (any shape), of type ct. */
static gs_instr *root_of_unity(gs_part_ctx *c, gs_instr *r, int64_t l, double sign, gs_type ct) {
    gs_builder *b = gs_part_builder(c);
    const gs_shape *s = r->shape;
    gs_instr *m = gs_build_binary(b, GS_OP_REMAINDER, r, gs_part_bcast_scalar(c, gs_part_s32(c, l), s));
    gs_instr *f = m ? gs_build_convert(b, m, GS_F64) : NULL;
    gs_instr *k = gs_build_scalar(b, GS_F64, sign * 2 * M_PI / (double)l);
    if (!f || !k) return NULL;
    gs_instr *angle = gs_build_binary(b, GS_OP_MULTIPLY, f, gs_part_bcast_scalar(c, k, f->shape));
    return angle ? unit_phase(c, angle, ct) : NULL;
}

/* y * v, v broadcast along y's last dim (v rank 1) or everywhere (v scalar). */
static gs_instr *scale_by(gs_part_ctx *c, gs_instr *y, gs_instr *v) {
    gs_builder *b = gs_part_builder(c);
    int64_t last = y->shape->rank - 1;
    gs_instr *bv = v->shape->rank == 0
                       ? gs_part_bcast_scalar(c, v, y->shape)
                       : gs_build_broadcast(b, v, y->shape->rank, y->shape->dims, 1, &last);
    return bv ? gs_build_binary(b, GS_OP_MULTIPLY, y, bv) : NULL;
}

/* Step s of the ring: the vector moves one device down (device q then holds tile q + s), and
 * is added times w_P^(tile * q). State (s, q, vector, sum). */
static void ring_step(gs_part_ctx *c, void *ctx, gs_instr *const *g, gs_instr **next) {
    const fft_step *w = ctx;
    gs_instr *v = gs_part_permute(c, g[2], w->n_pairs, w->pairs);
    gs_instr *tile = gs_part_rem(c, gs_part_add(c, g[1], g[0]), w->p);
    gs_instr *r = gs_build_binary(gs_part_builder(c), GS_OP_MULTIPLY, tile, g[1]);
    gs_instr *tw = r ? root_of_unity(c, r, w->p, w->sign, v ? v->shape->type : GS_C64) : NULL;
    gs_instr *term = v && tw ? scale_by(c, v, tw) : NULL;
    next[1] = g[1];
    next[2] = v;
    next[3] = term ? gs_build_binary(gs_part_builder(c), GS_OP_ADD, g[3], term) : NULL;
}

/* Step 1: device p's x[p + P*m] (m < M) from the devices' blocks x (local [.., M]) along tile
 * dim `dim` of s (P devices, own index p). */
static gs_instr *decimate(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, int dim, int64_t P,
                          gs_instr *own) {
    gs_builder *b = gs_part_builder(c);
    const gs_shape *xs = x->shape;
    int r = xs->rank;
    int64_t M = xs->dims[r - 1];
    gs_replica_groups *g = gs_part_groups_along(c, s, 1, &dim);
    if (!g) return NULL;
    /* Columns per device and destination (one more when the blocks do not start at multiples
     * of P), and the block placed at its offset mod P. */
    bool aligned = M % P == 0;
    int64_t cols = aligned ? M / P : (M + P - 1) / P + 1;
    gs_instr *buf = x;
    if (!aligned) {
        int64_t dims[GS_MAX_RANK];
        for (int i = 0; i < r; i++) dims[i] = xs->dims[i];
        dims[r - 1] = cols * P;
        gs_instr *zero = gs_part_zeros(c, gs_shape_array(gs_part_arena(c), xs->type, r, dims));
        gs_instr *idx[GS_MAX_RANK];
        for (int i = 0; i < r; i++) idx[i] = gs_part_s32(c, 0);
        idx[r - 1] = gs_part_rem(c, gs_part_mul(c, own, M), P);
        buf = zero ? gs_build_dynamic_update_slice(b, zero, x, idx) : NULL;
    }
    if (!buf) return NULL;
    /* [.., cols, P] -> [.., P, cols]: the P-th column goes to device P. */
    int64_t d1[GS_MAX_RANK + 1];
    for (int i = 0; i < r - 1; i++) d1[i] = xs->dims[i];
    d1[r - 1] = cols;
    d1[r] = P;
    int perm[GS_MAX_RANK + 1];
    for (int i = 0; i < r - 1; i++) perm[i] = i;
    perm[r - 1] = r;
    perm[r] = r - 1;
    gs_instr *y = gs_build_reshape(b, buf, r + 1, d1);
    y = y ? gs_build_transpose(b, y, perm) : NULL;
    y = y ? gs_part_all_to_all(c, y, r - 1, g) : NULL; /* [.., P (source), cols] */
    if (!y) return NULL;
    int64_t d2[GS_MAX_RANK];
    for (int i = 0; i < r - 1; i++) d2[i] = xs->dims[i];
    d2[r - 1] = P * cols;
    y = gs_build_reshape(b, y, r, d2);
    if (aligned || !y) return y;
    /* Source d's column c is element m = floor(d*M/P) + c (zero where it held none): a one-hot
     * [P*cols, M] matrix puts them in order. */
    int64_t od[2] = {P * cols, M};
    gs_instr *u = gs_build_iota(b, GS_S32, 2, od, 0), *m = gs_build_iota(b, GS_S32, 2, od, 1);
    const gs_shape *os = u ? u->shape : NULL;
    if (!os || !m) return NULL;
    gs_instr *src = gs_build_binary(b, GS_OP_DIVIDE, u, gs_part_bcast_scalar(c, gs_part_s32(c, cols), os));
    gs_instr *col = gs_build_binary(b, GS_OP_REMAINDER, u, gs_part_bcast_scalar(c, gs_part_s32(c, cols), os));
    gs_instr *start = gs_build_binary(b, GS_OP_MULTIPLY, src, gs_part_bcast_scalar(c, gs_part_s32(c, M), os));
    start = start ? gs_build_binary(b, GS_OP_DIVIDE, start, gs_part_bcast_scalar(c, gs_part_s32(c, P), os)) : NULL;
    gs_instr *at = start && col ? gs_build_binary(b, GS_OP_ADD, start, col) : NULL;
    gs_instr *hot = at ? gs_build_compare(b, m, at, "EQ") : NULL;
    hot = hot ? gs_build_convert(b, hot, xs->type) : NULL;
    if (!hot) return NULL;
    gs_instr *ops[2] = {y, hot};
    gs_instr *d = gs_build(b, GS_OP_DOT, xs, 2, ops);
    int64_t lc = r - 1, rc = 0;
    gs_build_set_ints(b, d, GS_ATTR_LHS_CONTRACTING_DIMS, 1, &lc);
    gs_build_set_ints(b, d, GS_ATTR_RHS_CONTRACTING_DIMS, 1, &rc);
    return d;
}

bool gs_part_fft_distributed(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                             gs_part_value *out) {
    const char *type = gs_instr_str(in, GS_ATTR_FFT_TYPE);
    gs_ints len = gs_instr_ints(in, GS_ATTR_FFT_LENGTH);
    const gs_shape *xs = in->operands[0]->shape;
    int r = in->shape->rank;
    if (!type || (strcmp(type, "FFT") != 0 && strcmp(type, "IFFT") != 0) || len.n < 1 ||
        len.n > r || xs->rank != r || !gs_type_is_complex(xs->type) ||
        xs->type != in->shape->type || t->kind != GS_SHARDING_TILED || !gs_part_plain(t) ||
        gs_part_unreduced_dim(t) != -1)
        return false;
    int last = r - 1;
    int64_t P = gs_sharding_tiles_in_dim(t, last), N = in->shape->dims[last];
    if (P < 2 || N % P != 0 || len.v[len.n - 1] != N || xs->dims[last] != N) return false;
    /* The other transformed dims whole. */
    int whole[GS_MAX_RANK], nw = 0;
    for (int i = r - (int)len.n; i < last; i++) whole[nw++] = i;
    const gs_sharding *s = nw ? gs_part_replicate_dims(c, t, nw, whole) : t;
    if (c->failed) return false;
    gs_part_value v;
    gs_part_reshard(c, gs_part_operand(c, in, 0), s, &v);
    gs_instr *x = v.hlo;
    if (!x) return false;
    gs_builder *b = gs_part_builder(c);
    int64_t M = N / P;
    fft_step w = {P, strcmp(type, "FFT") == 0 ? -1.0 : 1.0, 0, NULL};
    gs_instr *own = gs_part_tile_index(c, &s->tiles, last);
    gs_instr *y = decimate(c, x, s, last, P, own);
    /* 2. The local transform: length M along the split dim. */
    if (y) {
        y = gs_part_clone(c, in, y->shape, 1, &y);
        int64_t lv[3];
        for (int i = 0; i < len.n && i < 3; i++) lv[i] = len.v[i];
        lv[len.n - 1] = M;
        gs_build_set_ints(b, y, GS_ATTR_FFT_LENGTH, (int)len.n, lv);
    }
    /* 3. The twiddle w_N^(p*k1). */
    if (y) {
        gs_instr *k1 = gs_build_iota(b, GS_S32, 1, &M, 0);
        gs_instr *pk = k1 ? gs_build_binary(b, GS_OP_MULTIPLY, k1, gs_part_bcast_scalar(c, own, k1->shape)) : NULL;
        gs_instr *tw = pk ? root_of_unity(c, pk, N, w.sign, y->shape->type) : NULL;
        y = tw ? scale_by(c, y, tw) : NULL;
    }
    /* 4. The length-P DFT across the devices, round a ring. */
    int64_t(*pairs)[2] = gs_part_ring_pairs(&s->tiles, last, 1, &w.n_pairs);
    if (!pairs) {
        gs_part_oom(c);
        return false;
    }
    w.pairs = (const int64_t(*)[2])pairs;
    gs_instr *acc = NULL;
    if (y) {
        gs_instr *qq = gs_build_binary(b, GS_OP_MULTIPLY, own, own);
        gs_instr *tw = qq ? root_of_unity(c, qq, P, w.sign, y->shape->type) : NULL;
        acc = tw ? scale_by(c, y, tw) : NULL;
    }
    gs_instr *init[4] = {gs_part_s32(c, 1), own, y, acc};
    gs_instr *loop = acc ? gs_part_build_loop(c, "fft_ring", 4, init, P, ring_step, &w) : NULL;
    free(pairs);
    gs_instr *z = loop ? gs_build_gte(b, loop, 3) : NULL;
    if (z && w.sign > 0) { /* the inverse's 1/P */
        gs_instr *k = gs_build_scalar(b, GS_F64, 1.0 / (double)P);
        k = k ? gs_build_convert(b, k, z->shape->type) : NULL;
        z = k ? scale_by(c, z, k) : NULL;
    }
    gs_part_result(out, z, in->shape, s);
    return z != NULL;
}
