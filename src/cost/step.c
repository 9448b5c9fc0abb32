/*
 * step.c — the time of one step of a program on a machine profile (gspmd/cost.h): arithmetic
 * and memory traffic per instruction (a roofline: whichever takes longer), collectives by the
 * algorithm that suits their size and group, and the overlap the program allows.
 *
 * Kernels are formed as XLA's fusion would form them (fusion.c, on each computation with its
 * calls inlined): a value fused into its users moves no bytes and launches nothing; every other
 * instruction that does work is one kernel, which writes its result, reads its inputs in memory
 * (through its fused operands: their inputs) and pays the machine's op_overhead once. A
 * collective is a kernel too; control flow is what its computations cost.
 *
 * Collective algorithms, for a group of g devices each holding B bytes, on links of bandwidth
 * W and latency L (the node's fast link when the whole group is in one node, else the slow one):
 *   all-reduce      ring: 2(g-1)/g B/W + 2(g-1) L;  tree (small B): 2 log2(g) (L + B/W);
 *                   the faster of the two
 *   all-gather      ring: (g-1)/g B_result/W + (g-1) L
 *   reduce-scatter  ring: (g-1)/g B/W + (g-1) L
 *   all-to-all      (g-1)/g B/W + (g-1) L on a switch; a ring or torus carries it over its
 *                   bisection, g/4 times slower per byte on a ring (sqrt(g)/4 on a 2D torus)
 *   permute         B/W + L
 * Loops: a while body runs its trip count (XLA's known_trip_count, or a counter from a
 * constant compared with a constant), its condition once more; unknown trip counts count once
 * and are reported. Conditionals cost their most expensive branch.
 */
#include "gspmd/cost.h"
#include "cost/internal.h"
#include "base/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gs_cost_coll_name(gs_cost_coll k) {
    static const char *const names[] = {"all-reduce", "all-gather", "reduce-scatter",
                                        "all-to-all", "collective-permute"};
    return k >= 0 && k < GS_N_COST_COLL ? names[k] : "?";
}

/* ------------------------------------------------------------------ trip counts */

/* The integer value of scalar constant c; false when c is none. */
static bool scalar_int(const gs_instr *c, int64_t *v) {
    if (!c || c->op != GS_OP_CONSTANT || !c->literal || c->literal->elided || !c->shape ||
        c->shape->rank != 0 || !c->literal->data)
        return false;
    const void *p = c->literal->data;
    switch (c->shape->type) {
    case GS_S32: *v = *(const int32_t *)p; return true;
    case GS_S64: *v = *(const int64_t *)p; return true;
    case GS_U32: *v = *(const uint32_t *)p; return true;
    case GS_S16: *v = *(const int16_t *)p; return true;
    case GS_S8: *v = *(const int8_t *)p; return true;
    default: return false;
    }
}

/* The tuple index i when x is get-tuple-element(parameter 0 of its computation, i). */
static bool counter_index(const gs_instr *x, int64_t *i) {
    if (!x || x->op != GS_OP_GET_TUPLE_ELEMENT || x->n_operands != 1 ||
        x->operands[0]->op != GS_OP_PARAMETER)
        return false;
    *i = gs_instr_int(x, GS_ATTR_INDEX, -1);
    return *i >= 0;
}

/* The known_trip_count in w's backend_config ({"known_trip_count":{"n":"8"}}). */
static bool config_trips(const gs_instr *w, int64_t *trips) {
    const char *cfg = gs_instr_str(w, GS_ATTR_BACKEND_CONFIG);
    const char *k = cfg ? strstr(cfg, "known_trip_count") : NULL;
    const char *n = k ? strstr(k, "\"n\"") : NULL;
    if (!n) return false;
    n += 3;
    while (*n == ':' || *n == ' ' || *n == '"') n++;
    char *end;
    long long v = strtoll(n, &end, 10);
    if (end == n || v < 0) return false;
    *trips = v;
    return true;
}

bool gs_cost_trip_count(const gs_instr *w, int64_t *trips) {
    if (w->op != GS_OP_WHILE) return false;
    if (config_trips(w, trips)) return true;
    const gs_computation *cond = gs_instr_comp(w, GS_ATTR_CONDITION);
    const gs_computation *body = gs_instr_comp(w, GS_ATTR_BODY);
    if (!cond || !body || w->n_operands != 1) return false;
    const gs_instr *cmp = cond->root;
    if (cmp->op != GS_OP_COMPARE || cmp->n_operands != 2) return false;
    const char *dir = gs_instr_str(cmp, GS_ATTR_DIRECTION);
    if (!dir) return false;
    int64_t idx, limit;
    bool lt;
    if (counter_index(cmp->operands[0], &idx) && scalar_int(cmp->operands[1], &limit))
        lt = strcmp(dir, "LT") == 0 ? true : strcmp(dir, "LE") == 0 ? (limit++, true) : false;
    else if (counter_index(cmp->operands[1], &idx) && scalar_int(cmp->operands[0], &limit))
        lt = strcmp(dir, "GT") == 0 ? true : strcmp(dir, "GE") == 0 ? (limit++, true) : false;
    else
        return false;
    if (!lt) return false;
    /* The counter starts at a constant and the body adds a positive constant to it. */
    const gs_instr *init = w->operands[0];
    if (init->op != GS_OP_TUPLE || idx >= init->n_operands) return false;
    int64_t start, step;
    if (!scalar_int(init->operands[idx], &start)) return false;
    const gs_instr *next = body->root;
    if (next->op != GS_OP_TUPLE || idx >= next->n_operands) return false;
    const gs_instr *add = next->operands[idx];
    if (add->op != GS_OP_ADD || add->n_operands != 2) return false;
    int64_t j;
    if (counter_index(add->operands[0], &j) && j == idx && scalar_int(add->operands[1], &step)) {
    } else if (counter_index(add->operands[1], &j) && j == idx &&
               scalar_int(add->operands[0], &step)) {
    } else {
        return false;
    }
    if (step <= 0) return false;
    *trips = limit > start ? (limit - start + step - 1) / step : 0;
    return true;
}

/* ------------------------------------------------------------------ per instruction */


static bool low_precision(gs_type t) {
    return t == GS_BF16 || t == GS_F16 || gs_type_size(t) == 1;
}

/* Peak matmul FLOP/s of mc for operands of type t. */
static double matmul_peak(const gs_machine *mc, gs_type t) {
    if (low_precision(t)) return mc->flops_bf16;
    if (t == GS_F64 || t == GS_C128) return mc->flops_f64 > 0 ? mc->flops_f64 : mc->flops_f32 / 2;
    return mc->flops_f32;
}

/* Elementwise ops a device computes by a polynomial or a library call, not one instruction. */
static bool transcendental(gs_opcode op) {
    switch (op) {
    case GS_OP_EXP: case GS_OP_EXPM1: case GS_OP_LOG: case GS_OP_LOG1P: case GS_OP_TANH:
    case GS_OP_LOGISTIC: case GS_OP_SIN: case GS_OP_COS: case GS_OP_TAN: case GS_OP_ERF:
    case GS_OP_POWER: case GS_OP_ATAN2: case GS_OP_RSQRT: case GS_OP_SQRT: case GS_OP_CBRT:
        return true;
    default: return false;
    }
}

/* Instructions that move no data of their own and launch nothing (aliases, tuples, parameters,
 * constants, barriers). */
static bool free_instr(const gs_instr *in) {
    switch (in->op) {
    case GS_OP_PARAMETER: case GS_OP_TUPLE: case GS_OP_GET_TUPLE_ELEMENT: case GS_OP_RESHAPE:
    case GS_OP_BITCAST: case GS_OP_CONSTANT: case GS_OP_PARTITION_ID: case GS_OP_REPLICA_ID:
    case GS_OP_AFTER_ALL: case GS_OP_OPTIMIZATION_BARRIER: case GS_OP_DOMAIN:
    case GS_OP_ADD_DEPENDENCY:
        return true;
    default: return false;
    }
}

/* The collective kind of `in`, or -1. */
static int coll_kind(const gs_instr *in) {
    switch (in->op) {
    case GS_OP_ALL_REDUCE: case GS_OP_ALL_REDUCE_START: return GS_COST_ALL_REDUCE;
    case GS_OP_ALL_GATHER: case GS_OP_ALL_GATHER_START: return GS_COST_ALL_GATHER;
    case GS_OP_REDUCE_SCATTER: return GS_COST_REDUCE_SCATTER;
    case GS_OP_ALL_TO_ALL: case GS_OP_RAGGED_ALL_TO_ALL: return GS_COST_ALL_TO_ALL;
    case GS_OP_COLLECTIVE_PERMUTE: case GS_OP_COLLECTIVE_PERMUTE_START: return GS_COST_PERMUTE;
    default: return -1;
    }
}

/* Size of the groups of collective `in` and whether the first group lies in one node. */
static int group_of(const gs_instr *in, const gs_module *m, const gs_machine *mc, bool *one_node) {
    int64_t all = m->num_partitions > 1 ? m->num_partitions : 1;
    if (m->replica_count > 1) all *= m->replica_count;
    *one_node = mc->node_devices <= 0 || all <= mc->node_devices;
    if (in->op == GS_OP_COLLECTIVE_PERMUTE || in->op == GS_OP_COLLECTIVE_PERMUTE_START) {
        const gs_attr *a = gs_instr_attr(in, GS_ATTR_SOURCE_TARGET_PAIRS);
        if (a && mc->node_devices > 0 && !*one_node) {
            *one_node = true;
            for (int k = 0; k < a->u.pairs.n && *one_node; k++)
                *one_node = a->u.pairs.v[k][0] / mc->node_devices ==
                            a->u.pairs.v[k][1] / mc->node_devices;
        }
        return 2;
    }
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_REPLICA_GROUPS);
    const gs_replica_groups *g = a ? a->u.groups : NULL;
    if (!g || g->n_groups == 0) return (int)all;
    int size = gs_replica_groups_size(g, 0);
    if (mc->node_devices > 0 && size > 0) {
        int64_t node = gs_replica_groups_device(g, 0, 0) / mc->node_devices;
        *one_node = true;
        for (int k = 1; k < size && *one_node; k++)
            *one_node = gs_replica_groups_device(g, 0, k) / mc->node_devices == node;
    }
    return size > 0 ? size : 1;
}

/* Seconds and wire bytes of one collective of kind k over g devices holding b bytes each. */
double gs_cost_coll_time(int k, int g, double b, const gs_link *l, double *wire) {
    if (g <= 1) {
        *wire = 0;
        return 0;
    }
    double W = l->bandwidth, L = l->latency, f = (double)(g - 1) / g;
    switch (k) {
    case GS_COST_ALL_REDUCE: {
        double ring = 2 * f * b / W + 2 * (g - 1) * L;
        double tree = 2 * ceil(log2((double)g)) * (L + b / W);
        *wire = ring <= tree ? 2 * f * b : 2 * ceil(log2((double)g)) * b;
        return ring <= tree ? ring : tree;
    }
    case GS_COST_ALL_GATHER:
    case GS_COST_REDUCE_SCATTER: *wire = f * b; return f * b / W + (g - 1) * L;
    case GS_COST_ALL_TO_ALL: {
        double slow = l->topology == GS_TOPO_RING ? fmax(1, g / 4.0)
                      : l->topology == GS_TOPO_TORUS ? fmax(1, sqrt((double)g) / 4)
                                                     : 1;
        *wire = f * b;
        return f * b / W * slow + (g - 1) * L;
    }
    default: *wire = b; return b / W + L;
    }
}

/* ------------------------------------------------------------------ the walk */

/* One event of the predicted timeline (gs_cost_trace_write). */
typedef struct tl_event {
    const gs_instr *in;
    double t0, dur; /* seconds from the step's start */
    int64_t bytes;  /* a collective's, else -1 */
    int tid;        /* 0 the device's stream, 1 its asynchronous collectives */
} tl_event;

/* The predicted timeline: events (tl_event) in the order the walk lays them out. */
typedef struct timeline {
    gs_vec ev;
    bool cut; /* later loop iterations left out (too many events) */
    bool oom;
} timeline;

enum { TIMELINE_MAX_EVENTS = 1 << 21 };

typedef struct step_walk {
    const gs_module *m;
    const gs_machine *mc;
    int depth;
    timeline *tl; /* NULL: costs only */
    double clock; /* with tl: the predicted time so far (compute and exposed communication) */
    /* asynchronous collectives in flight: their time and the compute since their start */
    double pending_comm[64], compute_since[64];
    const gs_instr *pending[64];
    int n_pending;
} step_walk;

/* Lays out an event of `in` from t0 for dur seconds (with a timeline). */
static void emit(step_walk *w, const gs_instr *in, double t0, double dur, int64_t bytes, int tid) {
    timeline *tl = w->tl;
    if (!tl || tl->oom) return;
    if (tl->ev.n >= TIMELINE_MAX_EVENTS) {
        tl->cut = true;
        return;
    }
    tl_event e = {in, t0, dur, bytes, tid};
    if (gs_vec_push(&tl->ev, &e) != GS_OK) tl->oom = true;
}

/* Events [from, to) again, shifted by `by` seconds (a loop's later iteration). */
static void repeat_events(step_walk *w, int64_t from, int64_t to, double by) {
    for (int64_t i = from; w->tl && i < to && !w->tl->oom && !w->tl->cut; i++) {
        tl_event e = GS_VEC_AT(&w->tl->ev, tl_event, i);
        emit(w, e.in, e.t0 + by, e.dur, e.bytes, e.tid);
    }
}

static void add_cost(gs_step_cost *to, const gs_step_cost *c, double times) {
    to->matmul_flops += times * c->matmul_flops;
    to->matmul_flops_lowp += times * c->matmul_flops_lowp;
    to->vector_flops += times * c->vector_flops;
    to->transcendentals += times * c->transcendentals;
    to->bytes += times * c->bytes;
    to->kernels += times * c->kernels;
    to->compute_s += times * c->compute_s;
    to->comm_s += times * c->comm_s;
    to->exposed_comm_s += times * c->exposed_comm_s;
    for (int k = 0; k < GS_N_COST_COLL; k++) {
        to->coll[k].count += times * c->coll[k].count;
        to->coll[k].bytes += times * c->coll[k].bytes;
        to->coll[k].wire_bytes += times * c->coll[k].wire_bytes;
        to->coll[k].seconds += times * c->coll[k].seconds;
    }
    to->unknown_trip_counts += c->unknown_trip_counts;
}

static void step_comp(step_walk *w, const gs_computation *c, gs_step_cost *out);

/* Compute time passes: every asynchronous collective in flight hides that much. */
static void compute_passes(step_walk *w, double s) {
    for (int k = 0; k < w->n_pending; k++) w->compute_since[k] += s;
}

/* A while, call, conditional or async start: the called computations' costs, times how often
 * they run (a loop's body its trip count, its condition once more; a conditional's most
 * expensive branch). */
static void step_called(step_walk *w, const gs_instr *in, gs_step_cost *out) {
    gs_computation *called[64];
    int nc = gs_instr_called(in, called, 64);
    int64_t trips = 1;
    bool known = in->op != GS_OP_WHILE || gs_cost_trip_count(in, &trips);
    if (!known) out->unknown_trip_counts++;
    gs_step_cost best = {0};
    const gs_computation *best_c = NULL;
    double c0 = w->clock;
    int64_t e0 = w->tl ? (int64_t)w->tl->ev.n : 0, from[64], to[64];
    double dur[64], start[64], times_k[64];
    for (int k = 0; k < nc && k < 64; k++) {
        times_k[k] = 0;
        if (!called[k] || called[k] == in->parent) continue;
        gs_step_cost sub = {0};
        start[k] = w->clock;
        from[k] = w->tl ? (int64_t)w->tl->ev.n : 0;
        step_comp(w, called[k], &sub);
        to[k] = w->tl ? (int64_t)w->tl->ev.n : 0;
        dur[k] = w->clock - start[k];
        if (in->op == GS_OP_CONDITIONAL) {
            if (sub.compute_s + sub.exposed_comm_s >= best.compute_s + best.exposed_comm_s) {
                best = sub;
                best_c = called[k];
            }
            if (w->tl) { /* the timeline takes the branch chosen, laid out again below */
                w->tl->ev.n = (size_t)e0;
                w->clock = c0;
            }
            continue;
        }
        bool is_cond = in->op == GS_OP_WHILE && called[k] == gs_instr_comp(in, GS_ATTR_CONDITION);
        double times = (double)trips + (is_cond ? 1 : 0);
        times_k[k] = times;
        add_cost(out, &sub, times);
        compute_passes(w, (times - 1) * sub.compute_s); /* the walk passed it once */
    }
    if (in->op == GS_OP_CONDITIONAL) {
        add_cost(out, &best, 1);
        if (w->tl && best_c) {
            gs_step_cost again;
            step_comp(w, best_c, &again);
        }
    } else if (w->tl) { /* a loop's later iterations: each called computation again */
        for (double r = 1;; r++) {
            bool more = false;
            for (int k = 0; k < nc && k < 64; k++) {
                if (times_k[k] <= r) continue;
                if (w->tl->cut || w->tl->oom) { /* no more events: the time only */
                    w->clock += dur[k] * (times_k[k] - r);
                    times_k[k] = 0;
                    continue;
                }
                repeat_events(w, from[k], to[k], w->clock - start[k]);
                w->clock += dur[k];
                more = true;
            }
            if (!more) break;
        }
    }
    if (w->tl) emit(w, in, c0, w->clock - c0, -1, 0);
}

/* A collective of kind `kind`: its time by algorithm over the link its group uses, plus the
 * fixed cost of its kernel; exposed unless it is the start of an asynchronous pair. */
static void step_collective(step_walk *w, const gs_instr *in, int kind, gs_step_cost *out) {
    const gs_machine *mc = w->mc;
    const gs_op_info *info = gs_op_info_of(in->op);
    bool one_node;
    int g = group_of(in, w->m, mc, &one_node);
    double b = 0;
    if (kind == GS_COST_ALL_GATHER) { /* the gathered result (of -start: its last element) */
        const gs_shape *r = in->shape;
        if (!gs_shape_is_array(r) && r->n_tuple > 0) r = r->tuple[r->n_tuple - 1];
        b = gs_cost_bytes_of(r);
    } else {
        for (int k = 0; k < in->n_operands; k++) b += gs_cost_bytes_of(in->operands[k]->shape);
    }
    double wire, s = gs_cost_coll_time(kind, g, b, one_node ? &mc->intra : &mc->inter, &wire);
    if (g > 1) { /* one kernel (NCCL's, RCCL's) with its fixed cost; a group of one is none */
        s += mc->op_overhead;
        out->kernels += 1;
    }
    out->coll[kind].count += 1;
    out->coll[kind].bytes += b;
    out->coll[kind].wire_bytes += wire;
    out->coll[kind].seconds += s;
    out->comm_s += s;
    if ((info->flags & GS_OPF_ASYNC_START) && w->n_pending < 64) {
        w->pending[w->n_pending] = in;
        w->pending_comm[w->n_pending] = s;
        w->compute_since[w->n_pending] = 0;
        w->n_pending++;
        emit(w, in, w->clock, s, (int64_t)b, 1); /* beside the compute that hides it */
    } else {
        out->exposed_comm_s += s;
        emit(w, in, w->clock, s, (int64_t)b, 0);
        w->clock += s;
    }
}

/* The done half of an asynchronous pair: what of its collective's time the compute since its
 * start did not hide is exposed. */
static void step_done(step_walk *w, const gs_instr *in, gs_step_cost *out) {
    for (int k = 0; k < w->n_pending; k++)
        if (in->n_operands == 1 && w->pending[k] == in->operands[0]) {
            double hidden = fmin(w->pending_comm[k], w->compute_since[k]);
            out->exposed_comm_s += w->pending_comm[k] - hidden;
            emit(w, in, w->clock, w->pending_comm[k] - hidden, -1, 0); /* the wait left */
            w->clock += w->pending_comm[k] - hidden;
            w->n_pending--;
            w->pending[k] = w->pending[w->n_pending];
            w->pending_comm[k] = w->pending_comm[w->n_pending];
            w->compute_since[k] = w->compute_since[w->n_pending];
            break;
        }
}

/* One computation's walk: its graph, what fusion makes of each node, and the scratch that
 * measures a kernel's traffic. */
typedef struct comp_walk {
    gs_cost_graph g;
    char *fused;         /* gs_cost_fusion */
    gs_cost_kernels kt;  /* gs_cost_kernel_reads */
} comp_walk;

/* Control flow and asynchronous starts: they cost what the computations they call cost. */
static bool runs_called(const gs_instr *in) {
    const gs_op_info *info = gs_op_info_of(in->op);
    return in->op == GS_OP_WHILE || in->op == GS_OP_CALL || in->op == GS_OP_CONDITIONAL ||
           (info->family == GS_FAM_ASYNC && (info->flags & GS_OPF_ASYNC_START));
}

/* Node i of the computation's graph: a kernel of its own (a fused value's arithmetic is counted
 * where it is, its traffic and overhead in the kernels that compute it), a collective, or the
 * computations it calls. */
static void step_node(step_walk *w, comp_walk *cw, int i, gs_step_cost *out) {
    const gs_machine *mc = w->mc;
    const gs_instr *in = cw->g.instr[i];
    const gs_op_info *info = gs_op_info_of(in->op);
    if (runs_called(in)) {
        step_called(w, in, out);
        return;
    }
    int kind = coll_kind(in);
    if (kind >= 0) {
        step_collective(w, in, kind, out);
        return;
    }
    if (info->flags & GS_OPF_ASYNC_DONE) {
        step_done(w, in, out);
        return;
    }
    if (free_instr(in)) return;
    /* Arithmetic. */
    double mm = gs_cost_instr_flops(in), vec = 0, trans = 0;
    gs_type t = in->n_operands > 0 && in->operands[0]->shape ? in->operands[0]->shape->type
                                                             : in->shape->type;
    if (mm > 0) {
        out->matmul_flops += mm;
        if (low_precision(t)) out->matmul_flops_lowp += mm;
    } else if (transcendental(in->op)) {
        trans = gs_cost_elements(in->shape);
    } else if (info->flags & GS_OPF_ELEMENTWISE) {
        vec = gs_cost_elements(in->shape);
    } else if (in->op == GS_OP_REDUCE || in->op == GS_OP_REDUCE_WINDOW) {
        for (int k = 0; k < in->n_operands / 2; k++) vec += gs_cost_elements(in->operands[k]->shape);
    }
    out->vector_flops += vec;
    out->transcendentals += trans;
    /* A kernel of its own: its memory traffic and the machine's fixed cost of a kernel. */
    double bytes = 0, s = 0;
    if (!cw->fused[i]) {
        bytes = gs_cost_kernel_writes(&cw->g, i) + gs_cost_kernel_reads(&cw->kt, i);
        out->bytes += bytes;
        out->kernels += 1;
        s = mc->op_overhead;
    }
    double work = 0;
    if (mm > 0) work = fmax(work, mm / matmul_peak(mc, t));
    if (vec > 0) work = fmax(work, vec / mc->vector_flops);
    if (trans > 0)
        work = fmax(work, trans / (mc->transcendentals > 0 ? mc->transcendentals
                                                           : mc->vector_flops / 8));
    if (bytes > 0) work = fmax(work, bytes / mc->mem_bandwidth);
    s += work;
    out->compute_s += s;
    compute_passes(w, s);
    if (s > 0) emit(w, in, w->clock, s, -1, 0);
    w->clock += s;
}

/* The nodes a run computes (live[i] = 1): what the root needs, and side-effecting
 * custom-calls (checks) with what they need, as the interpreter orders a computation; dead code
 * costs nothing, as after XLA's dead-code elimination. Operands come before their users, so one
 * pass from the last node back suffices. */
static void mark_live(const gs_cost_graph *g, char *live) {
    for (int i = g->n - 1; i >= 0; i--) {
        const gs_instr *in = g->instr[i];
        if (g->out[i] || (in->op == GS_OP_CUSTOM_CALL &&
                          gs_instr_bool(in, GS_ATTR_CUSTOM_CALL_HAS_SIDE_EFFECT, false)))
            live[i] = 1;
        if (!live[i]) continue;
        for (int k = g->op_off[i]; k < g->op_off[i + 1]; k++)
            if (g->op[k] >= 0) live[g->op[k]] = 1;
    }
}

static void step_comp(step_walk *w, const gs_computation *c, gs_step_cost *out) {
    memset(out, 0, sizeof *out);
    if (w->depth > 64) return;
    w->depth++;
    comp_walk cw;
    memset(&cw, 0, sizeof cw);
    if (gs_cost_graph_build(c, true, &cw.g)) {
        cw.fused = calloc((size_t)cw.g.n + 1, 1);
        char *live = calloc((size_t)cw.g.n + 1, 1);
        if (cw.fused && live && gs_cost_kernels_init(&cw.kt, &cw.g, cw.fused)) {
            gs_cost_fusion(&cw.g, cw.fused);
            mark_live(&cw.g, live);
            for (int i = 0; i < cw.g.n; i++)
                if (live[i]) step_node(w, &cw, i, out);
        }
        gs_cost_kernels_free(&cw.kt);
        free(live);
        free(cw.fused);
        gs_cost_graph_free(&cw.g);
    }
    w->depth--;
}

/* gs_cost_step, laying its events out on tl (NULL: none). */
static gs_status cost_step(const gs_module *m, const gs_machine *mc, timeline *tl,
                           gs_step_cost *out, gs_diags *d) {
    memset(out, 0, sizeof *out);
    if (gs_module_check_bounded(m, "the cost model", d) != GS_OK) return GS_ERR;
    if (!m->entry) return GS_OK;
    step_walk w = {.m = m, .mc = mc, .tl = tl};
    step_comp(&w, m->entry, out);
    /* Asynchronous collectives never waited for are exposed. */
    for (int k = 0; k < w.n_pending; k++) out->exposed_comm_s += w.pending_comm[k];
    out->step_s = out->compute_s + out->exposed_comm_s;
    gs_cost c;
    gs_cost_module(m, &c);
    out->peak_bytes = c.peak_bytes;
    out->fits = (double)c.peak_bytes <= mc->mem_capacity;
    return GS_OK;
}

gs_status gs_cost_step(const gs_module *m, const gs_machine *mc, gs_step_cost *out,
                       gs_diags *d) {
    return cost_step(m, mc, NULL, out, d);
}

gs_status gs_cost_trace_write(const gs_module *m, const gs_machine *mc, const char *path,
                              gs_diags *d) {
    FILE *f = fopen(path, "w");
    if (!f)
        return gs_error(d, gs_span_none(), "cannot write the trace '%s': %s", path,
                        strerror(errno));
    timeline tl = {0};
    gs_vec_init(&tl.ev, sizeof(tl_event));
    gs_step_cost c;
    gs_status st = cost_step(m, mc, &tl, &c, d);
    gs_trace_json j;
    gs_trace_json_begin(&j, f);
    char name[160];
    snprintf(name, sizeof name, "device 0, predicted on %s: %.4g s a step%s", mc->name, c.step_s,
             tl.oom ? " (some events lost: out of memory)"
             : tl.cut ? " (events of later loop iterations left out)" : "");
    gs_trace_json_process(&j, 0, name);
    for (size_t i = 0; st == GS_OK && i < tl.ev.n; i++) {
        const tl_event *e = &GS_VEC_AT(&tl.ev, tl_event, i);
        gs_trace_json_event(&j, 0, e->tid, e->in->name, gs_op_name(e->in->op), e->t0 * 1e6,
                            e->dur * 1e6, e->bytes, -1);
    }
    bool ok = gs_trace_json_end(&j);
    gs_vec_free(&tl.ev);
    if (st == GS_OK && !ok)
        st = gs_error(d, gs_span_none(), "cannot write the trace '%s': %s", path,
                      strerror(errno));
    return st;
}
