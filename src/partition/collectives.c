/*
 * collectives.c — every collective the partitioner emits goes through here: a fresh channel id,
 * the scalar reduction computation (one per op and type in each output), the struct of functions
 * from the options (so tests can count or replace them), and the statistics (count and per-device
 * result bytes by kind) that the dot handler's costing and the tests read.
 */
#include "internal.h"

static gs_instr *b_all_reduce(void *ctx, gs_builder *b, gs_instr *x, const gs_replica_groups *g,
                              gs_computation *comp, int64_t channel) {
    (void)ctx;
    return gs_build_all_reduce(b, x, g, comp, channel);
}

static gs_instr *b_all_gather(void *ctx, gs_builder *b, gs_instr *x, int dim, int64_t size,
                              const gs_replica_groups *g, int64_t channel) {
    (void)ctx;
    return gs_build_all_gather(b, x, dim, size, g, channel);
}

static gs_instr *b_reduce_scatter(void *ctx, gs_builder *b, gs_instr *x, int dim, int64_t size,
                                  const gs_replica_groups *g, gs_computation *comp,
                                  int64_t channel) {
    (void)ctx;
    return gs_build_reduce_scatter(b, x, dim, size, g, comp, channel);
}

static gs_instr *b_all_to_all(void *ctx, gs_builder *b, gs_instr *x, int dim,
                              const gs_replica_groups *g, int64_t channel) {
    (void)ctx;
    return gs_build_all_to_all(b, x, dim, g, channel);
}

static gs_instr *b_permute(void *ctx, gs_builder *b, gs_instr *x, int n,
                           const int64_t (*pairs)[2], int64_t channel) {
    (void)ctx;
    return gs_build_collective_permute(b, x, n, pairs, channel);
}

static const gs_collective_ops DEFAULT_OPS = {b_all_reduce, b_all_gather, b_reduce_scatter,
                                              b_all_to_all, b_permute};

const gs_collective_ops *gs_collective_ops_default(void) { return &DEFAULT_OPS; }

int64_t gs_partition_stats_bytes(const gs_partition_stats *s) {
    int64_t t = 0;
    for (int k = 0; k < GS_N_COLL_KINDS; k++) t += s->bytes[k];
    return t;
}

static int op_slot(gs_opcode op) {
    switch (op) {
    case GS_OP_ADD: return 0;
    case GS_OP_MULTIPLY: return 1;
    case GS_OP_MAXIMUM: return 2;
    case GS_OP_MINIMUM: return 3;
    case GS_OP_AND: return 4;
    case GS_OP_OR: return 5;
    case GS_OP_XOR: return 6;
    default: return 7;
    }
}

gs_computation *gs_part_reducer(gs_part_ctx *c, gs_opcode op, gs_type t) {
    gs_part_emit *e = c->e;
    int k = op_slot(op);
    if (!e->reducers[k][t]) {
        char stem[64];
        /* Sums over pred are or (XLA reduces pred partial values with or). */
        gs_opcode use = t == GS_PRED && op == GS_OP_ADD ? GS_OP_OR : op;
        snprintf(stem, sizeof stem, "%s.%s.reducer", gs_op_name(use), gs_type_name(t));
        e->reducers[k][t] = gs_build_scalar_computation(gs_part_builder(c), stem, use, t);
        if (!e->reducers[k][t]) gs_part_oom(c);
    }
    return e->reducers[k][t];
}

/* Counts collective r; its bytes are the larger of its per-device operand and result (what a
 * device holds of it: an all-gather's result, a reduce-scatter's operand, which the ring
 * passes on almost whole). */
static void count(gs_part_ctx *c, gs_coll_kind k, gs_instr *r) {
    if (!r) {
        gs_part_oom(c);
        return;
    }
    int64_t b = gs_shape_bytes(r->shape);
    if (r->n_operands == 1 && gs_shape_bytes(r->operands[0]->shape) > b)
        b = gs_shape_bytes(r->operands[0]->shape);
    c->e->stats.n[k]++;
    c->e->stats.bytes[k] += b;
}

static void *ctx_of(gs_part_ctx *c) {
    return c->opts && !c->e->dry ? c->opts->collectives_ctx : NULL;
}

/* The user's collective builders for the real output; the defaults for costing runs. */
static const gs_collective_ops *ops_of(gs_part_ctx *c) {
    return c->e->dry ? gs_collective_ops_default() : c->coll;
}

gs_instr *gs_part_all_reduce(gs_part_ctx *c, gs_instr *x, const gs_replica_groups *g,
                             gs_opcode op) {
    if (!x) return NULL;
    gs_computation *comp = gs_part_reducer(c, op, x->shape->type);
    gs_instr *r = ops_of(c)->all_reduce(ctx_of(c), gs_part_builder(c), x, g, comp, c->channel++);
    count(c, GS_COLL_ALL_REDUCE, r);
    return r;
}

gs_instr *gs_part_all_gather(gs_part_ctx *c, gs_instr *x, int dim, int64_t size,
                             const gs_replica_groups *g) {
    if (!x) return NULL;
    gs_instr *r =
        ops_of(c)->all_gather(ctx_of(c), gs_part_builder(c), x, dim, size, g, c->channel++);
    count(c, GS_COLL_ALL_GATHER, r);
    return r;
}

gs_instr *gs_part_reduce_scatter(gs_part_ctx *c, gs_instr *x, int dim, int64_t size,
                                 const gs_replica_groups *g, gs_opcode op) {
    if (!x) return NULL;
    gs_computation *comp = gs_part_reducer(c, op, x->shape->type);
    gs_instr *r = ops_of(c)->reduce_scatter(ctx_of(c), gs_part_builder(c), x, dim, size, g, comp,
                                            c->channel++);
    count(c, GS_COLL_REDUCE_SCATTER, r);
    return r;
}

gs_instr *gs_part_all_to_all(gs_part_ctx *c, gs_instr *x, int dim, const gs_replica_groups *g) {
    if (!x) return NULL;
    gs_instr *r = ops_of(c)->all_to_all(ctx_of(c), gs_part_builder(c), x, dim, g, c->channel++);
    count(c, GS_COLL_ALL_TO_ALL, r);
    return r;
}

gs_instr *gs_part_permute(gs_part_ctx *c, gs_instr *x, int n, const int64_t (*pairs)[2]) {
    if (!x) return NULL;
    gs_instr *r =
        ops_of(c)->collective_permute(ctx_of(c), gs_part_builder(c), x, n, pairs, c->channel++);
    count(c, GS_COLL_PERMUTE, r);
    return r;
}
