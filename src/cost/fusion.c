/*
 * fusion.c — which values XLA's fusion would compute inside their users' kernels, never in memory
 * of their own, and the memory traffic of the kernels that leaves (cost/internal.h). One rule
 * serves the peak-memory walk (cost.c: a fused value takes no buffer) and the step model (step.c:
 * a fused value moves no bytes and is no kernel of its own; every other instruction that does
 * work is one kernel and pays the machine's op_overhead).
 *
 * The rule follows XLA's GPU instruction fusion, producer into consumer, within one computation
 * (calls inlined first, as XLA's CallInliner does; while bodies and conditional branches stay
 * apart):
 *   - Producers that fuse: elementwise ops (converts included), broadcasts, iotas, scalar
 *     constants, reshapes and bitcasts; and the data movers transpose, reverse, slice,
 *     dynamic-slice, concatenate, pad, gather and copy, these only into a single user (never
 *     duplicated). Reductions, dynamic-update-slice (in place), scatter, sort, dots,
 *     convolutions, collectives, custom-calls and the rest end a kernel: they are never fused.
 *   - Consumers that take their producers into their kernel: the fusible producers above (loop
 *     fusion), reduce and reduce-window (input fusion), and dynamic-update-slice for its update
 *     and indices (not the buffer it updates in place). A reshape or bitcast passes its producer
 *     on only when it is fused itself (otherwise it names its operand's buffer).
 *   - A producer fuses when it is not the graph's output and every user takes it. A value
 *     fused into several kernels is recomputed in each, as loop fusion does, but only while
 *     that moves no more bytes than writing it once and reading it in each (XLA's fusion cost
 *     model refuses such duplication too).
 *   - A transpose read only by dots and convolutions is folded into them as a layout (XLA's
 *     transpose folding and layout assignment): no buffer and no kernel either, and nothing fuses
 *     into it.
 * Not modelled: multi-output (sibling) fusion, fusion into dots (Triton GEMM epilogues and
 * prologues) or into scatter, and XLA's limits on a fusion's size.
 */
#include "gspmd/cost.h"
#include "cost/internal.h"

#include <stdlib.h>
#include <string.h>

/* Calls nested deeper, or met once the graph has this many nodes, stay calls (the step model
 * then walks their computations apart): a bound on what inlining can cost. */
enum { MAX_INLINE_DEPTH = 32, MAX_INLINE_NODES = 1 << 22 };

/* ------------------------------------------------------------------ the graph */

/* Room for one more node with n_ops operands; false when out of memory. */
static bool graph_reserve(gs_cost_graph *g, int n_ops) {
    if (g->n + 1 >= g->cap) {
        int cap = g->cap ? 2 * g->cap : 64;
        const gs_instr **instr = realloc(g->instr, (size_t)cap * sizeof *instr);
        if (instr) g->instr = instr;
        int *off = realloc(g->op_off, (size_t)(cap + 1) * sizeof *off);
        if (off) g->op_off = off;
        char *out = realloc(g->out, (size_t)cap);
        if (out) g->out = out;
        if (!instr || !off || !out) return false;
        g->cap = cap;
    }
    int need = g->op_off[g->n] + n_ops;
    if (need > g->op_cap) {
        int cap = g->op_cap ? 2 * g->op_cap : 128;
        while (cap < need) cap *= 2;
        int *op = realloc(g->op, (size_t)cap * sizeof *op);
        if (!op) return false;
        g->op = op;
        g->op_cap = cap;
    }
    return true;
}

/* Adds computation c's instructions to g; param[k] is the node of parameter k (NULL: parameters
 * are nodes of their own). *root is set to the node of c's root value. False when out of memory. */
int *gs_cost_operands_first(const gs_computation *c) {
    int n = c->n_instrs, k = 0;
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    int *stack = malloc(((size_t)n + 1) * sizeof *stack), *next = calloc((size_t)n + 1, sizeof *next);
    char *state = calloc((size_t)n + 1, 1); /* 0 new, 1 on the stack, 2 placed */
    bool ok = order && stack && next && state;
    for (int r = 0; ok && r < n; r++) {
        if (state[r]) continue;
        int sp = 0;
        stack[sp++] = r;
        state[r] = 1;
        while (ok && sp > 0) {
            int x = stack[sp - 1];
            const gs_instr *in = c->instrs[x];
            if (next[x] < in->n_operands) {
                const gs_instr *o = in->operands[next[x]++];
                if (o->parent != c || o->id < 0 || o->id >= n || c->instrs[o->id] != o) continue;
                if (state[o->id] == 1) ok = false; /* a cycle */
                else if (!state[o->id]) state[o->id] = 1, stack[sp++] = o->id;
                continue;
            }
            state[x] = 2;
            order[k++] = x;
            sp--;
        }
    }
    free(stack);
    free(next);
    free(state);
    if (!ok) free(order);
    return ok ? order : NULL;
}

static bool graph_add(gs_cost_graph *g, const gs_computation *c, const int *param,
                      bool inline_calls, int depth, int *root) {
    int n = c->n_instrs;
    int *value = malloc(((size_t)n + 1) * sizeof *value);
    int *order = gs_cost_operands_first(c);
    if (!value || !order) {
        free(value);
        free(order);
        return false;
    }
    bool ok = true;
    for (int oi = 0; oi < n && ok; oi++) {
        int i = order[oi];
        const gs_instr *in = c->instrs[i];
        if (in->op == GS_OP_PARAMETER && param && in->parameter_number >= 0 &&
            in->parameter_number < c->n_params) {
            value[i] = param[in->parameter_number];
            continue;
        }
        gs_computation *callee[2];
        if (inline_calls && in->op == GS_OP_CALL && depth < MAX_INLINE_DEPTH &&
            g->n < MAX_INLINE_NODES && gs_instr_called(in, callee, 2) == 1 && callee[0] &&
            callee[0] != c && callee[0]->n_params == in->n_operands && callee[0]->root) {
            int *args = malloc(((size_t)in->n_operands + 1) * sizeof *args);
            if (!args) {
                ok = false;
                break;
            }
            for (int k = 0; k < in->n_operands; k++) args[k] = value[in->operands[k]->id];
            ok = graph_add(g, callee[0], args, inline_calls, depth + 1, &value[i]);
            free(args);
            continue;
        }
        if (inline_calls && in->op == GS_OP_GET_TUPLE_ELEMENT && in->n_operands == 1) {
            /* An element of a tuple the graph builds (a call's results): that element's node. */
            int t = value[in->operands[0]->id];
            int64_t k = gs_instr_int(in, GS_ATTR_INDEX, -1);
            if (g->instr[t]->op == GS_OP_TUPLE && k >= 0 && k < g->op_off[t + 1] - g->op_off[t]) {
                value[i] = g->op[g->op_off[t] + k];
                continue;
            }
        }
        if (!graph_reserve(g, in->n_operands)) {
            ok = false;
            break;
        }
        int v = g->n++;
        g->instr[v] = in;
        g->out[v] = 0;
        for (int k = 0; k < in->n_operands; k++)
            g->op[g->op_off[v] + k] = value[in->operands[k]->id];
        g->op_off[v + 1] = g->op_off[v] + in->n_operands;
        value[i] = v;
    }
    if (ok) *root = c->root ? value[c->root->id] : -1;
    free(value);
    free(order);
    return ok;
}

bool gs_cost_graph_build(const gs_computation *c, bool inline_calls, gs_cost_graph *g) {
    memset(g, 0, sizeof *g);
    g->op_off = malloc(sizeof *g->op_off);
    if (!g->op_off) return false;
    g->op_off[0] = 0;
    int root = -1;
    if (!graph_add(g, c, NULL, inline_calls, 0, &root)) {
        gs_cost_graph_free(g);
        return false;
    }
    if (root >= 0) g->out[root] = 1;
    return true;
}

void gs_cost_graph_free(gs_cost_graph *g) {
    free(g->instr);
    free(g->op_off);
    free(g->op);
    free(g->out);
    memset(g, 0, sizeof *g);
}

/* ------------------------------------------------------------------ a kernel's traffic */


/* Bytes a value in memory costs to read: none for a scalar constant (an immediate). */
static double read_bytes(const gs_instr *o) {
    return o->op == GS_OP_CONSTANT && o->shape && o->shape->rank == 0 ? 0 : gs_cost_bytes_of(o->shape);
}

/* The part of operand slot k's elements that `in` reads: what a slice, dynamic-slice or gather
 * keeps of its operand; all of it otherwise. */
static double part_read(const gs_instr *in, int k) {
    if (k != 0 ||
        (in->op != GS_OP_SLICE && in->op != GS_OP_DYNAMIC_SLICE && in->op != GS_OP_GATHER))
        return 1;
    double whole = gs_cost_elements(in->operands[0]->shape), kept = gs_cost_elements(in->shape);
    return whole > 0 && kept < whole ? kept / whole : 1;
}

bool gs_cost_kernels_init(gs_cost_kernels *k, const gs_cost_graph *g, const char *fused) {
    memset(k, 0, sizeof *k);
    size_t n = (size_t)g->n + 1;
    k->g = g;
    k->fused = fused;
    k->seen = calloc(n, sizeof *k->seen);
    k->read = calloc(n, sizeof *k->read);
    k->list = calloc(n, sizeof *k->list);
    k->inputs = calloc(n, sizeof *k->inputs);
    k->need = calloc(n, sizeof *k->need);
    k->part = calloc(n, sizeof *k->part);
    if (k->seen && k->read && k->list && k->inputs && k->need && k->part) return true;
    gs_cost_kernels_free(k);
    return false;
}

void gs_cost_kernels_free(gs_cost_kernels *k) {
    free(k->seen);
    free(k->read);
    free(k->list);
    free(k->inputs);
    free(k->need);
    free(k->part);
    memset(k, 0, sizeof *k);
}

double gs_cost_kernel_writes(const gs_cost_graph *g, int r) {
    const gs_instr *in = g->instr[r];
    if (in->op == GS_OP_DYNAMIC_UPDATE_SLICE && in->n_operands >= 2)
        return gs_cost_bytes_of(in->operands[1]->shape); /* in place: only its update */
    return gs_cost_bytes_of(in->shape);
}

static int by_node_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

double gs_cost_kernel_reads(gs_cost_kernels *k, int r) {
    const gs_cost_graph *g = k->g;
    const char *fused = k->fused;
    const gs_instr *in = g->instr[r];
    bool dus = in->op == GS_OP_DYNAMIC_UPDATE_SLICE;
    double bytes = 0;
    int stamp = ++k->stamp, n_list = 0, n_inputs = 0;
    /* The fused nodes of the kernel. Operands come before their users, so visiting them from the
     * highest number down reaches each after every user that needs it. */
    for (int e = g->op_off[r]; e < g->op_off[r + 1]; e++) {
        int o = g->op[e];
        if (fused[o] && k->seen[o] != stamp) {
            k->seen[o] = stamp;
            k->need[o] = 0;
            k->list[n_list++] = o;
        }
    }
    for (int j = 0; j < n_list; j++)
        for (int e = g->op_off[k->list[j]]; e < g->op_off[k->list[j] + 1]; e++) {
            int o = g->op[e];
            if (fused[o] && k->seen[o] != stamp) {
                k->seen[o] = stamp;
                k->need[o] = 0;
                k->list[n_list++] = o;
            }
        }
    qsort(k->list, (size_t)n_list, sizeof *k->list, by_node_desc);
    for (int e = g->op_off[r]; e < g->op_off[r + 1]; e++) {
        int slot = e - g->op_off[r], o = g->op[e];
        if (dus && slot == 0) continue; /* the buffer it updates in place */
        double f = part_read(in, slot);
        if (fused[o])
            k->need[o] = k->need[o] > f ? k->need[o] : f;
        else
            bytes += f * read_bytes(g->instr[o]);
    }
    for (int j = 0; j < n_list; j++) {
        int v = k->list[j];
        for (int e = g->op_off[v]; e < g->op_off[v + 1]; e++) {
            int o = g->op[e];
            double f = k->need[v] * part_read(g->instr[v], e - g->op_off[v]);
            if (fused[o]) {
                if (f > k->need[o]) k->need[o] = f;
            } else if (k->read[o] != stamp) {
                k->read[o] = stamp;
                k->part[o] = f;
                k->inputs[n_inputs++] = o;
            } else if (f > k->part[o]) {
                k->part[o] = f;
            }
        }
    }
    for (int j = 0; j < n_inputs; j++)
        bytes += k->part[k->inputs[j]] * read_bytes(g->instr[k->inputs[j]]);
    return bytes;
}

/* ------------------------------------------------------------------ the rule */

/* How `in` fuses into its users: never, into every user (cheap to recompute), or into its one
 * user (a data mover, never duplicated). */
typedef enum { PRODUCER_NONE, PRODUCER_CHEAP, PRODUCER_SINGLE } producer_kind;

static bool elementwise(const gs_instr *in) {
    const gs_op_info *info = gs_op_info_of(in->op);
    if (info->flags & GS_OPF_SIDE_EFFECT) return false;
    return (info->flags & GS_OPF_ELEMENTWISE) || info->family == GS_FAM_CONVERT;
}

static producer_kind producer(const gs_instr *in) {
    if (!in->shape || !gs_shape_is_array(in->shape)) return PRODUCER_NONE;
    switch (in->op) {
    case GS_OP_COPY: return PRODUCER_SINGLE;
    case GS_OP_BROADCAST:
    case GS_OP_IOTA:
    case GS_OP_RESHAPE:
    case GS_OP_BITCAST: return PRODUCER_CHEAP;
    case GS_OP_CONSTANT: return in->shape->rank == 0 ? PRODUCER_CHEAP : PRODUCER_NONE;
    case GS_OP_TRANSPOSE:
    case GS_OP_REVERSE:
    case GS_OP_SLICE:
    case GS_OP_DYNAMIC_SLICE:
    case GS_OP_CONCATENATE:
    case GS_OP_PAD:
    case GS_OP_GATHER: return PRODUCER_SINGLE;
    default: return elementwise(in) ? PRODUCER_CHEAP : PRODUCER_NONE;
    }
}

/* Does `u` take the producer at its operand `slot` into its own kernel? (Reshapes and bitcasts
 * are decided by the caller: only when fused themselves.) */
static bool consumer(const gs_instr *u, int slot) {
    switch (u->op) {
    case GS_OP_REDUCE:
    case GS_OP_REDUCE_WINDOW: return true;
    case GS_OP_DYNAMIC_UPDATE_SLICE: return slot > 0;
    case GS_OP_CONSTANT: return false;
    default: return producer(u) != PRODUCER_NONE;
    }
}

void gs_cost_fusion(const gs_cost_graph *g, char *fused) {
    int n = g->n;
    memset(fused, 0, (size_t)n);
    /* Users of each node: (user, slot) pairs, grouped by operand. */
    int n_edges = g->op_off[n];
    int *start = calloc((size_t)n + 2, sizeof *start);
    int *user = malloc(((size_t)n_edges + 1) * sizeof *user);
    int *slot = malloc(((size_t)n_edges + 1) * sizeof *slot);
    if (!start || !user || !slot) {
        free(start);
        free(user);
        free(slot);
        return; /* out of memory: nothing fused, every value its own kernel and buffer */
    }
    for (int e = 0; e < n_edges; e++) start[g->op[e] + 2]++;
    for (int i = 0; i < n; i++) start[i + 2] += start[i + 1];
    for (int u = 0; u < n; u++)
        for (int e = g->op_off[u]; e < g->op_off[u + 1]; e++) {
            int at = start[g->op[e] + 1]++;
            user[at] = u;
            slot[at] = e - g->op_off[u];
        }
    /* Users come after their operands: decide from the last node back, so each user's own fate
     * (fused, folded) is known. */
    for (int i = n - 1; i >= 0; i--) {
        const gs_instr *in = g->instr[i];
        if (g->out[i]) continue;
        int first = start[i], end = start[i + 1];
        if (in->op == GS_OP_TRANSPOSE && end > first) {
            bool contractions = true;
            for (int e = first; e < end && contractions; e++) {
                gs_op_family f = gs_op_info_of(g->instr[user[e]]->op)->family;
                contractions = f == GS_FAM_DOT || f == GS_FAM_CONVOLUTION;
            }
            if (contractions) {
                fused[i] = GS_COST_FOLDED;
                continue;
            }
        }
        producer_kind pk = producer(in);
        if (pk == PRODUCER_NONE) continue;
        bool ok = true;
        for (int e = first; e < end && ok; e++) {
            const gs_instr *u = g->instr[user[e]];
            if (pk == PRODUCER_SINGLE && user[e] != user[first])
                ok = false;
            else if (fused[user[e]] == GS_COST_FOLDED)
                ok = false;
            else if (u->op == GS_OP_RESHAPE || u->op == GS_OP_BITCAST)
                ok = fused[user[e]] == GS_COST_FUSED;
            else
                ok = consumer(u, slot[e]);
        }
        /* A value nobody reads is dead code XLA removes: fused into nothing. */
        if (ok) fused[i] = GS_COST_FUSED;
    }
    /* A value fused into k >= 2 users' kernels is recomputed in each: only while that moves no
     * more bytes than keeping it in memory, (k - 1) x its reads <= (k + 1) x its size (k - 1
     * more reads of its inputs against writing it once and reading it k times), as XLA's fusion
     * cost model weighs duplication. Producers first, so a value's own inputs are final. A
     * reshape or bitcast kept in memory names its operand's buffer, which is kept too. */
    gs_cost_kernels kt;
    bool have_kt = gs_cost_kernels_init(&kt, g, fused);
    for (int i = 0; i < n; i++) {
        if (fused[i] != GS_COST_FUSED) continue;
        int first = start[i], end = start[i + 1], kernels = 0;
        for (int e = first; e < end; e++)
            if (e == first || user[e] != user[e - 1]) kernels++;
        if (kernels < 2) continue;
        double reads = have_kt ? gs_cost_kernel_reads(&kt, i) : 0;
        double size = gs_shape_bytes(g->instr[i]->shape);
        if ((kernels - 1) * reads <= (kernels + 1) * size) continue;
        fused[i] = GS_COST_OWN;
        for (int v = i; g->instr[v]->op == GS_OP_RESHAPE || g->instr[v]->op == GS_OP_BITCAST;) {
            v = g->op[g->op_off[v]];
            if (fused[v] == GS_COST_FUSED) fused[v] = GS_COST_OWN;
        }
    }
    if (have_kt) gs_cost_kernels_free(&kt);
    free(start);
    free(user);
    free(slot);
}
