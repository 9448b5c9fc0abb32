/*
 * h_batch_norm.c — batch-norm-inference, batch-norm-training and batch-norm-grad on shards.
 *
 * The operand (and grad's grad_output) keeps a plain sharding s (the instruction's own when it
 * splits at least as much as the operand's, else the operand's); the per-feature vectors (scale,
 * offset, mean, variance, and the statistics results) take fs, the 1-D sharding that tiles the
 * feature dim as s does and is replicated over s's other tiles.
 *
 * Inference is elementwise per feature: the op is cloned with per-device shapes. Training and
 * grad need statistics over every non-feature dim; when s leaves those whole (only the feature
 * dim split, or nothing) the op is cloned too. Otherwise the partitioned program computes them
 * itself, each sum masking the padding of uneven shards to 0 and all-reduced over the devices
 * that split the non-feature dims. Elementwise steps run in f32 for narrower inputs (converted
 * back at the end), else in the input type; the sums and the all-reduced statistics are kept
 * in f64 for f32 inputs (f32 for narrower ones). The interpreter computes batch norm in
 * double and bounds its rounding normwise, so f32 sums of many terms in another order would
 * fail `run --verify`; f64 inputs get no wider type, and large f64 statistics may not verify.
 *
 *   training  mean = allreduce(sum(x)) / N; c = x - mean; var = allreduce(sum(c*c)) / N (two
 *             passes, as the interpreter: no cancellation); y = c * rsqrt(var + eps) * scale
 *             + offset. Two all-reduces of one feature vector each.
 *   grad      inv = rsqrt(var + eps); c = x - mean; [sdy, sdyc] = allreduce(sum(dy),
 *             sum(dy*c)) (one all-reduce of both); grad_offset = sdy; grad_scale = sdyc * inv;
 *             grad_x = scale * inv * (dy - sdy / N - c * inv * grad_scale / N).
 *
 * N is the global count of elements per feature. Partially manual shardings, non-float operands
 * and empty operands take the default action.
 */
#include "internal.h"
#include "base/internal.h"

/* What the three handlers share about one instruction. */
typedef struct bn_plan {
    gs_part_ctx *c;         /* context */
    const gs_instr *in;     /* the batch-norm instruction */
    const gs_shape *base;   /* operand 0's global shape */
    int f;                  /* feature dim */
    const gs_sharding *s;   /* sharding of the full-rank operands and result */
    const gs_sharding *fs;  /* sharding of the per-feature vectors */
    const gs_shape *xl;     /* per-device shape of the full-rank operands */
    int nr;                 /* non-feature dims... */
    int rd[GS_MAX_RANK];    /* ...and their indices */
    int nt;                 /* non-feature dims that s tiles (the partial statistics) */
    int tiled[GS_MAX_RANK]; /* their indices */
    gs_instr *live;         /* pred of the per-device shape: not padding of the non-feature
                               dims (built on first use, NULL until then) */
    gs_type ct;             /* elementwise compute type: f32 for narrower operands, else the
                               widest operand type */
    gs_type at;             /* type the statistics are summed in: f64 for f32 and wider
                               operands (the interpreter sums in double), else f32 */
    double count;           /* elements per feature (global) */
} bn_plan;

static bool usable(const gs_sharding *s, int rank) {
    return s && gs_part_plain(s) && !gs_part_partial_manual(s) &&
           (s->kind != GS_SHARDING_TILED || s->data_rank == rank);
}

/* Devices a plain sharding splits its data into. */
static int64_t split(const gs_sharding *s) {
    int64_t k = 1;
    if (s->kind == GS_SHARDING_TILED)
        for (int i = 0; i < s->data_rank; i++) k *= s->tiles.dims[i];
    return k;
}

/* Fills p for `in` (target t); false to decline. */
static bool plan(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t, bn_plan *p) {
    if (c->manual) return false;
    const gs_shape *base = in->operands[0]->shape;
    int64_t f = gs_instr_int(in, GS_ATTR_FEATURE_INDEX, -1);
    if (!gs_type_is_array(base->type) || !gs_type_is_float(base->type) || f < 0 || f >= base->rank)
        return false;
    for (int k = 0; k < in->n_operands; k++)
        if (!gs_type_is_float(in->operands[k]->shape->type)) return false;
    const gs_sharding *lead =
        t->kind == GS_SHARDING_TUPLE ? (t->n_tuple > 0 ? t->tuple[0] : NULL) : t;
    const gs_sharding *own = gs_part_operand(c, in, 0)->sharding;
    bool lu = usable(lead, base->rank), ou = usable(own, base->rank);
    const gs_sharding *s = lu && (!ou || split(lead) >= split(own)) ? lead
                           : ou                                     ? own
                                                                    : gs_part_replicated(c, base);
    p->c = c;
    p->in = in;
    p->base = base;
    p->f = (int)f;
    p->s = s;
    p->nr = p->nt = 0;
    p->live = NULL;
    p->count = 1;
    for (int d = 0; d < base->rank; d++) {
        if (d == f) continue;
        p->rd[p->nr++] = d;
        p->count *= (double)base->dims[d];
        if (gs_sharding_tiles_in_dim(s, d) > 1) p->tiled[p->nt++] = d;
    }
    const gs_shape *vec = gs_shape_array(gs_part_arena(c), base->type, 1, &base->dims[f]);
    if (!vec) {
        gs_part_oom(c);
        return false;
    }
    if (s->kind == GS_SHARDING_TILED) {
        gs_sharding *fs = NULL;
        const gs_sharding *r = gs_part_replicate_dims(c, s, p->nr, p->rd);
        int64_t rd64[GS_MAX_RANK];
        for (int i = 0; i < p->nr; i++) rd64[i] = p->rd[i];
        if (gs_sharding_remove_dims(gs_part_arena(c), r, p->nr, rd64, &fs) != GS_OK || !fs) {
            gs_part_oom(c);
            return false;
        }
        p->fs = fs;
    } else {
        p->fs = gs_part_replicated(c, vec);
    }
    p->xl = gs_part_local_shape(c, base, s);
    gs_type ct = GS_F32;
    for (int k = 0; k < in->n_operands; k++)
        if (gs_type_bits(in->operands[k]->shape->type) > gs_type_bits(ct))
            ct = in->operands[k]->shape->type;
    p->ct = ct;
    p->at = gs_type_bits(ct) >= 32 ? GS_F64 : GS_F32;
    return p->xl && p->fs && !c->failed;
}

/* Operand k resharded to the full-rank (full) or feature sharding. */
static gs_instr *operand(bn_plan *p, int k, bool full) {
    gs_part_value r;
    gs_part_reshard(p->c, gs_part_operand(p->c, p->in, k), full ? p->s : p->fs, &r);
    return r.hlo;
}

/* The same, converted to the compute type. */
static gs_instr *operand_ct(bn_plan *p, int k, bool full) {
    gs_instr *x = operand(p, k, full);
    return x && x->shape->type != p->ct ? gs_build_convert(gs_part_builder(p->c), x, p->ct) : x;
}

/* x converted to type t (x itself when it has it). */
static gs_instr *as(bn_plan *p, gs_instr *x, gs_type t) {
    return x && x->shape->type != t ? gs_build_convert(gs_part_builder(p->c), x, t) : x;
}

/* Per-feature vector v broadcast along the full-rank per-device shape. */
static gs_instr *bcast(bn_plan *p, gs_instr *v) {
    if (!v) return NULL;
    int64_t fd = p->f;
    return gs_build_broadcast(gs_part_builder(p->c), v, p->xl->rank, p->xl->dims, 1, &fd);
}

/* Scalar constant v of like's type broadcast to like's shape. */
static gs_instr *splat(bn_plan *p, double v, const gs_instr *like) {
    if (!like) return NULL;
    gs_instr *k = gs_build_scalar(gs_part_builder(p->c), like->shape->type, v);
    return gs_part_bcast_scalar(p->c, k, like->shape);
}

static gs_instr *bin(bn_plan *p, gs_opcode op, gs_instr *x, gs_instr *y) {
    return x && y ? gs_build_binary(gs_part_builder(p->c), op, x, y) : NULL;
}

/* x (full-rank, per device) with the padding of the non-feature dims set to 0. */
static gs_instr *masked(bn_plan *p, gs_instr *x) {
    bool uneven = false;
    for (int i = 0; i < p->nr; i++)
        uneven |= gs_part_uneven(p->s, p->rd[i], p->base->dims[p->rd[i]]);
    if (!x || !uneven) return x;
    gs_builder *b = gs_part_builder(p->c);
    if (!p->live) {
        gs_instr *yes = gs_build_scalar_i(b, GS_PRED, 1), *no = gs_build_scalar_i(b, GS_PRED, 0);
        gs_instr *all =
            yes ? gs_build_broadcast(b, yes, x->shape->rank, x->shape->dims, 0, NULL) : NULL;
        p->live = gs_part_mask(p->c, all, p->s, p->base->dims, p->nr, p->rd, no);
        if (!p->live) return NULL;
    }
    return gs_build_select(b, p->live, x, splat(p, 0, x));
}

/* The global per-feature sums of the n full-rank values xs (type at, per-device shards):
 * each masked (padding of the non-feature dims to 0) and reduced over them locally, then all
 * of them all-reduced together (concatenated) over the devices that split those dims. */
static void sums(bn_plan *p, int n, gs_instr *const *xs, gs_instr **out) {
    gs_part_ctx *c = p->c;
    gs_builder *b = gs_part_builder(c);
    int64_t rd64[GS_MAX_RANK];
    for (int i = 0; i < p->nr; i++) rd64[i] = p->rd[i];
    gs_instr *part[2];
    GS_ASSERT(n <= 2);
    gs_instr *zero = gs_build_scalar(b, p->at, 0);
    for (int k = 0; k < n; k++) {
        gs_instr *m = masked(p, xs[k]);
        part[k] = m && zero ? gs_build_reduce(b, m, zero, p->nr, rd64,
                                              gs_part_reducer(c, GS_OP_ADD, p->at))
                            : NULL;
        out[k] = NULL;
        if (!part[k]) return;
    }
    gs_replica_groups *g = gs_part_groups_along(c, p->s, p->nt, p->tiled);
    if (!g) return;
    if (n == 1) {
        out[0] = gs_part_all_reduce(c, part[0], g, GS_OP_ADD);
        return;
    }
    gs_instr *all = gs_part_all_reduce(c, gs_build_concatenate(b, n, part, 0), g, GS_OP_ADD);
    if (!all) return;
    int64_t len = part[0]->shape->dims[0];
    for (int k = 0; k < n; k++) {
        int64_t lo = k * len, hi = lo + len;
        out[k] = gs_build_slice(b, all, &lo, &hi, NULL);
    }
}

/* rsqrt(var + eps) of per-feature vector var. */
static gs_instr *inv_std(bn_plan *p, gs_instr *var) {
    const gs_attr *ea = gs_instr_attr(p->in, GS_ATTR_EPSILON);
    gs_instr *v = bin(p, GS_OP_ADD, var, splat(p, ea ? ea->u.f : 0.0, var));
    return v ? gs_build_unary(gs_part_builder(p->c), GS_OP_RSQRT, v) : NULL;
}

/* The op cloned on the per-device shapes: full-rank operands on s, vectors on fs. */
static bool clone_local(bn_plan *p, gs_part_value *out) {
    gs_part_ctx *c = p->c;
    const gs_instr *in = p->in;
    gs_instr *ops[5];
    for (int k = 0; k < in->n_operands; k++) {
        bool full = k == 0 || (in->op == GS_OP_BATCH_NORM_GRAD && k == 4);
        ops[k] = operand(p, k, full);
        if (!ops[k]) return false;
    }
    gs_arena *a = gs_part_arena(c);
    const gs_shape *shape = p->xl;
    const gs_sharding *sh = p->s;
    if (in->shape->type == GS_TUPLE) {
        if (in->shape->n_tuple != 3) return false;
        gs_shape *leaves[3];
        gs_sharding *lsh[3] = {(gs_sharding *)p->s, (gs_sharding *)p->fs, (gs_sharding *)p->fs};
        for (int i = 0; i < 3; i++) {
            leaves[i] = gs_part_local_shape(c, in->shape->tuple[i], lsh[i]);
            if (!leaves[i]) return false;
        }
        shape = gs_shape_tuple(&gs_part_builder(c)->m->arena, 3, leaves);
        sh = gs_sharding_tuple(a, 3, lsh);
    }
    if (!shape || !sh) {
        gs_part_oom(c);
        return false;
    }
    out->hlo = gs_part_clone(c, in, shape, in->n_operands, ops);
    out->base = in->shape;
    out->sharding = sh;
    out->combiner = GS_OP_ADD;
    return out->hlo != NULL;
}

/* The tuple (y, a, b) with sharding (s, fs, fs), each converted to its result type. */
static bool tuple_result(bn_plan *p, gs_instr *y, gs_instr *u, gs_instr *v, gs_part_value *out) {
    const gs_shape *rs = p->in->shape;
    gs_instr *xs[3] = {as(p, y, rs->tuple[0]->type), as(p, u, rs->tuple[1]->type),
                       as(p, v, rs->tuple[2]->type)};
    if (!xs[0] || !xs[1] || !xs[2]) return false;
    gs_sharding *lsh[3] = {(gs_sharding *)p->s, (gs_sharding *)p->fs, (gs_sharding *)p->fs};
    out->hlo = gs_build_tuple(gs_part_builder(p->c), 3, xs);
    out->base = rs;
    out->sharding = gs_sharding_tuple(gs_part_arena(p->c), 3, lsh);
    out->combiner = GS_OP_ADD;
    if (!out->sharding) gs_part_oom(p->c);
    return out->hlo && out->sharding;
}

static bool tuple3(const gs_instr *in) {
    return in->shape->type == GS_TUPLE && in->shape->n_tuple == 3;
}

bool gs_part_handle_batch_norm_inference(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                         gs_part_value *out) {
    bn_plan p;
    if (in->n_operands != 5 || !gs_type_is_array(in->shape->type) || !plan(c, in, t, &p))
        return false;
    return clone_local(&p, out);
}

bool gs_part_handle_batch_norm_training(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                        gs_part_value *out) {
    bn_plan p;
    if (in->n_operands != 3 || !tuple3(in) || !plan(c, in, t, &p)) return false;
    if (p.nt == 0) return clone_local(&p, out);
    if (p.count <= 0) return false;
    gs_instr *x = operand_ct(&p, 0, true);
    gs_instr *scale = operand_ct(&p, 1, false), *offset = operand_ct(&p, 2, false);
    gs_instr *xa = as(&p, x, p.at), *sum, *sq;
    if (!xa) return false;
    sums(&p, 1, &xa, &sum);
    gs_instr *mean = bin(&p, GS_OP_DIVIDE, sum, splat(&p, p.count, sum));
    gs_instr *cen_a = bin(&p, GS_OP_SUBTRACT, xa, bcast(&p, mean));
    gs_instr *c2 = bin(&p, GS_OP_MULTIPLY, cen_a, cen_a);
    if (!c2) return false;
    sums(&p, 1, &c2, &sq);
    gs_instr *var = bin(&p, GS_OP_DIVIDE, sq, splat(&p, p.count, sq));
    gs_instr *cen = bin(&p, GS_OP_SUBTRACT, x, bcast(&p, as(&p, mean, p.ct)));
    gs_instr *y = bin(&p, GS_OP_MULTIPLY, cen, bcast(&p, as(&p, inv_std(&p, var), p.ct)));
    y = bin(&p, GS_OP_MULTIPLY, y, bcast(&p, scale));
    y = bin(&p, GS_OP_ADD, y, bcast(&p, offset));
    return tuple_result(&p, y, mean, var, out);
}

bool gs_part_handle_batch_norm_grad(gs_part_ctx *c, const gs_instr *in, const gs_sharding *t,
                                    gs_part_value *out) {
    bn_plan p;
    if (in->n_operands != 5 || !tuple3(in) || !plan(c, in, t, &p)) return false;
    if (p.nt == 0) return clone_local(&p, out);
    if (p.count <= 0) return false;
    gs_instr *x = operand_ct(&p, 0, true), *dy = operand_ct(&p, 4, true);
    gs_instr *scale = operand_ct(&p, 1, false), *mean = operand_ct(&p, 2, false);
    gs_instr *var = operand_ct(&p, 3, false);
    gs_instr *inv = inv_std(&p, var);
    gs_instr *cen = bin(&p, GS_OP_SUBTRACT, x, bcast(&p, mean));
    /* The sums in the wider type, from x and mean themselves (no rounded difference). */
    gs_instr *dya = as(&p, dy, p.at);
    gs_instr *cen_a = bin(&p, GS_OP_SUBTRACT, as(&p, x, p.at), bcast(&p, as(&p, mean, p.at)));
    gs_instr *terms[2] = {dya, bin(&p, GS_OP_MULTIPLY, dya, cen_a)}, *s[2];
    if (!terms[0] || !terms[1]) return false;
    sums(&p, 2, terms, s);
    gs_instr *gof = as(&p, s[0], p.ct);
    gs_instr *gsc = bin(&p, GS_OP_MULTIPLY, as(&p, s[1], p.ct), inv);
    /* scale * inv * (dy - sdy / N - c * (inv * grad_scale / N)) */
    gs_instr *mdy = bin(&p, GS_OP_DIVIDE, gof, splat(&p, p.count, gof));
    gs_instr *k = bin(&p, GS_OP_DIVIDE, bin(&p, GS_OP_MULTIPLY, inv, gsc), splat(&p, p.count, inv));
    gs_instr *gx = bin(&p, GS_OP_SUBTRACT, dy, bcast(&p, mdy));
    gx = bin(&p, GS_OP_SUBTRACT, gx, bin(&p, GS_OP_MULTIPLY, cen, bcast(&p, k)));
    gx = bin(&p, GS_OP_MULTIPLY, bcast(&p, bin(&p, GS_OP_MULTIPLY, scale, inv)), gx);
    return tuple_result(&p, gx, gsc, gof, out);
}
