/*
 * cost/internal.h — what the peak-memory walk (cost.c) and the step model (step.c) share: the
 * dataflow graph of a computation and the fusion rule on it (fusion.c).
 */
#ifndef GSPMD_COST_INTERNAL_H
#define GSPMD_COST_INTERNAL_H

#include "gspmd/cost.h"

/* The values of one computation as a dataflow graph, nodes in an order where operands come
 * before their users. With calls inlined, the instructions of every computation a `call` applies
 * become nodes of their own (per call site): a callee's parameters are its caller's operands, the
 * call is its callee's root, and a get-tuple-element of a tuple the graph builds is that element,
 * as after XLA's CallInliner and tuple simplification. Owns its arrays (gs_cost_graph_free). */
typedef struct gs_cost_graph {
    int n;                  /* nodes */
    const gs_instr **instr; /* the instruction node i computes */
    int *op_off;            /* node i's operands are op[op_off[i]] ... op[op_off[i+1] - 1], one
                               node per operand slot of instr[i] */
    int *op;                /* operand nodes */
    char *out;              /* the node's value leaves the graph (the computation's root) */
    int cap, op_cap;        /* allocated entries of instr/out/op_off and of op */
} gs_cost_graph;

/* Builds c's graph into *g; false when out of memory (*g is then empty). Without inline_calls,
 * node i is c->instrs[i] and its operands are the instruction's. */
bool gs_cost_graph_build(const gs_computation *c, bool inline_calls, gs_cost_graph *g);
void gs_cost_graph_free(gs_cost_graph *g);

/* What fusion makes of a node (gs_cost_fusion). */
enum {
    GS_COST_OWN = 0,    /* in memory of its own when it does work: a kernel's result */
    GS_COST_FUSED = 1,  /* computed inside each of its users' kernels (loop or input fusion) */
    GS_COST_FOLDED = 2, /* a transpose folded into the dots and convolutions that read it */
};

/* XLA's fusion on graph g (the rule is in fusion.c's top comment): fused[i] for each node, one of
 * the values above. fused has g->n entries. Out of memory: nothing fused. */
void gs_cost_fusion(const gs_cost_graph *g, char *fused);

/* Scratch to measure kernels' traffic on one graph (gs_cost_kernels_init ... _free). */
typedef struct gs_cost_kernels {
    const gs_cost_graph *g;
    const char *fused;   /* gs_cost_fusion's answer for g (read as it is at each call) */
    int *seen, *read;    /* == stamp: a node is one of this kernel's fused nodes, inputs */
    int *list, *inputs;  /* those nodes */
    double *need, *part; /* the part of a fused node computed, of an input read */
    int stamp;           /* one per kernel measured */
} gs_cost_kernels;

/* Scratch for graph g with fusion `fused` (which may change between calls); false when out of
 * memory (then nothing to free). */
bool gs_cost_kernels_init(gs_cost_kernels *k, const gs_cost_graph *g, const char *fused);
void gs_cost_kernels_free(gs_cost_kernels *k);
/* Bytes the kernel whose result node r computes writes: its result; a dynamic-update-slice only
 * its update (in place). */
double gs_cost_kernel_writes(const gs_cost_graph *g, int r);
/* Bytes it reads: each of r's operands in memory once per operand slot (not the buffer a
 * dynamic-update-slice updates in place), and through r's operands fused into it, each value in
 * memory they read once; of each, the part read (what a slice, dynamic-slice or gather keeps, the
 * largest part any fused node needs). Scalar constants are immediates. */
double gs_cost_kernel_reads(gs_cost_kernels *k, int r);

/* c's instruction ids (malloc'd, n_instrs of them) with every operand before its users: HLO
 * text may name an operand before it defines it. NULL when out of memory or c has a cycle. */
int *gs_cost_operands_first(const gs_computation *c);

/* step.c: seconds of one collective of kind k (GS_COST_ALL_REDUCE ...) over g devices holding
 * b bytes each (an all-gather's result, a reduce-scatter's operand) on link l, by the
 * algorithm that suits it; *wire gets the bytes each device sends. The search of
 * src/autoshard costs its collectives by it too. */
double gs_cost_coll_time(int k, int g, double b, const gs_link *l, double *wire);

/* Elements of an array shape (0 for others), and its bytes (0 for none), as doubles. */
static inline double gs_cost_elements(const gs_shape *s) {
    if (!s || !gs_shape_is_array(s)) return 0;
    double p = 1;
    for (int i = 0; i < s->rank; i++) p *= (double)s->dims[i];
    return p;
}
static inline double gs_cost_bytes_of(const gs_shape *s) {
    return s ? (double)gs_shape_bytes(s) : 0;
}

#endif
