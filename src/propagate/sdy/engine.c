/*
 * engine.c — the driver of Shardy's basic propagation over an sdy_graph.
 *
 * As Shardy's BasicPropagationPass: first the main function's result shardings are pushed to
 * the values it returns (an identity rule between each), then every op with a rule is visited
 * with MLIR's greedy worklist (top-down: ops in program order, kept on a stack; an op whose
 * operand or result sharding changes is pushed again, unless already waiting), and last the
 * values returned are pushed back to the function's results. Visiting an op projects its
 * operands' and results' shardings onto its rule's factors, runs the factor propagation and
 * projects back every tensor that changed.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

const gs_op_rule *sdy_identity_rule(gs_arena *a, int rank, const int64_t *dims, int n_operands) {
    gs_op_rule *r = GS_NEW(a, gs_op_rule);
    gs_factor *f = rank ? GS_NEW_ARRAY(a, gs_factor, rank) : NULL;
    gs_dim_factors *df = rank ? GS_NEW_ARRAY(a, gs_dim_factors, rank) : NULL;
    int *ids = rank ? GS_NEW_ARRAY(a, int, rank) : NULL;
    gs_tensor_factors *ops = GS_NEW_ARRAY(a, gs_tensor_factors, n_operands + 1);
    if (!r || !ops || (rank && (!f || !df || !ids))) return NULL;
    for (int d = 0; d < rank; d++) {
        f[d] = (gs_factor){GS_FACTOR_PASS_THROUGH, dims[d], false};
        ids[d] = d;
        df[d] = (gs_dim_factors){1, &ids[d]};
    }
    for (int i = 0; i <= n_operands; i++) ops[i] = (gs_tensor_factors){rank, df};
    memset(r, 0, sizeof *r);
    r->registered = true;
    r->n_factors = rank;
    r->factors = f;
    r->n_operands = n_operands;
    r->operands = ops;
    r->n_results = 1;
    r->results = &ops[n_operands];
    return r;
}

/* A mesh without axes or devices (`<[]>`): its shardings fit any mesh. */
static bool empty_mesh(const sdy_graph *g, int mesh) {
    return g->meshes[mesh]->n_axes == 0 && !g->meshes[mesh]->device_order;
}

/* The mesh all present shardings use (those on the empty mesh aside), or -1 (none, or
 * several). */
static int common_mesh(const sdy_graph *g, const sdy_sharding *const *sh, int n) {
    int mesh = -1;
    for (int i = 0; i < n; i++) {
        if (!sh[i] || empty_mesh(g, sh[i]->mesh)) continue;
        if (mesh >= 0 && sh[i]->mesh != mesh) return -1;
        mesh = sh[i]->mesh;
    }
    return mesh;
}

/* The worklist: a stack of ops, each at most once. */
typedef struct worklist {
    int *stack;
    int n;
    bool *queued;
} worklist;

static void push(worklist *w, int op) {
    if (op < 0 || w->queued[op]) return;
    w->queued[op] = true;
    w->stack[w->n++] = op;
}

/* An op changed (and so its enclosing ops, as MLIR's driver adds ancestors). */
static void notify_op(const sdy_graph *g, worklist *w, int op, int current) {
    for (; op >= 0; op = g->ops[op].parent)
        if (op != current) push(w, op);
}

/* Value v's sharding changed: its defining op and its users are visited again. */
static void notify_one(const sdy_graph *g, worklist *w, int v, int current) {
    if (!w) return;
    const sdy_value *val = &g->values[v];
    notify_op(g, w, val->def, current);
    for (int i = 0; i < val->n_users; i++) notify_op(g, w, val->users[i], current);
}

/* Value v gets sharding s; so does every member of its sharding group. */
/* Records that value v got sharding s (explain), from g->source through op. */
static void record(sdy_graph *g, int v, const sdy_sharding *s, int op, int source, int group) {
    if (!g->events) return;
    sdy_event e = g->now;
    e.value = v;
    e.op = op;
    e.source = source;
    e.group = group;
    e.sh = s;
    if (gs_vec_push(g->events, &e) != GS_OK) g->oom = true;
}

static void set_value(sdy_graph *g, worklist *w, int v, sdy_sharding *s, int current) {
    g->values[v].sh = s;
    record(g, v, s, current, g->source, -1);
    notify_one(g, w, v, current);
    int k = g->values[v].group;
    if (k < 0) return;
    for (int i = g->group_first[k]; i < g->group_first[k + 1]; i++) {
        int u = g->group_members[i];
        if (u == v || g->values[u].rank != s->rank || g->values[u].opaque) continue;
        g->values[u].sh = s;
        record(g, u, s, -1, v, k);
        notify_one(g, w, u, current);
    }
}

/* The tensor (of n_t slots) a change to slot t most likely came from, for explain: the first
 * other slot with axes, results first for an operand and operands first for a result. */
static int source_of(const sdy_graph *g, sdy_sharding *const *slots, const int *values, int n_t,
                     int n_operands, int t) {
    if (!g->events) return -1;
    for (int pass = 0; pass < 2; pass++)
        for (int u = 0; u < n_t; u++) {
            bool other_side = (u < n_operands) != (t < n_operands);
            if (u == t || other_side != (pass == 0) || !slots[u] || values[u] < 0) continue;
            if (!sdy_sharding_empty_axes(slots[u])) return values[u];
        }
    return -1;
}

/* Fully replicated and open: no axes, every dim open (isFullyReplicatedAndOpen). */
static bool replicated_open(const sdy_sharding *s) {
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d].axes.n != 0 || s->dims[d].closed) return false;
    return s->replicated.n == 0 && s->unreduced.n == 0;
}

void sdy_sync_groups(sdy_graph *g) {
    for (int k = 0; k < g->n_groups; k++) {
        sdy_sharding *common = NULL;
        bool conflict = false;
        for (int i = g->group_first[k]; i < g->group_first[k + 1] && !conflict; i++) {
            sdy_sharding *s = g->values[g->group_members[i]].sh;
            if (!s || replicated_open(s)) continue;
            if (!common) common = s;
            else conflict = !sdy_sharding_eq(common, s);
        }
        if (!common || conflict) continue;
        for (int i = g->group_first[k]; i < g->group_first[k + 1]; i++) {
            sdy_value *v = &g->values[g->group_members[i]];
            if (v->rank != common->rank || v->sh == common || v->opaque) continue;
            v->sh = common;
            record(g, g->group_members[i], common, -1, -1, k);
        }
    }
}

/* One propagation run: which factor propagation, and the op-priority round (-1: none). */
/* The shardings propagation made, each kept once (most values end with one of a few). */
typedef struct interned {
    sdy_sharding **slots; /* open addressing, cap entries (a power of two), NULL: free */
    size_t cap, n;
} interned;

typedef struct run {
    sdy_graph *g;
    const gs_sdy_options *o;
    bool aggressive;
    int op_round;
    gs_arena *scratch; /* one op's projections, reset for the next */
    interned *kept;
} run;

static uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 0x100000001b3ull; }

static uint64_t axes_hash(uint64_t h, const sdy_axes *l) {
    h = mix(h, (uint64_t)l->n);
    for (int i = 0; i < l->n; i++)
        h = mix(mix(mix(h, (uint64_t)l->v[i].axis), (uint64_t)l->v[i].pre_size),
                (uint64_t)l->v[i].size);
    return h;
}

static uint64_t sharding_hash(const sdy_sharding *s) {
    uint64_t h = mix(mix(0xcbf29ce484222325ull, (uint64_t)s->mesh), (uint64_t)s->rank);
    for (int d = 0; d < s->rank; d++)
        h = axes_hash(mix(mix(h, s->dims[d].closed), (uint64_t)s->dims[d].priority),
                      &s->dims[d].axes);
    return axes_hash(axes_hash(axes_hash(h, &s->replicated), &s->unreduced), &s->manual);
}

/* s (built in scratch) as a sharding that lives as long as the graph: one already kept that
 * equals it, else a copy. Shardings are never changed in place, so values share them. NULL
 * on OOM. */
static sdy_sharding *keep(run *ru, const sdy_sharding *s) {
    interned *t = ru->kept;
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        sdy_sharding **slots = calloc(cap, sizeof *slots);
        if (!slots) return NULL;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i]) continue;
            size_t k = (size_t)sharding_hash(t->slots[i]) & (cap - 1);
            while (slots[k]) k = (k + 1) & (cap - 1);
            slots[k] = t->slots[i];
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    size_t k = (size_t)sharding_hash(s) & (t->cap - 1);
    for (; t->slots[k]; k = (k + 1) & (t->cap - 1))
        if (sdy_sharding_eq(t->slots[k], s)) return t->slots[k];
    sdy_graph *g = ru->g;
    sdy_sharding *ns = gs_arena_memdup(g->a, s, sizeof *s);
    if (!ns || (s->rank && !(ns->dims = gs_arena_memdup(g->a, s->dims,
                                                        sizeof *s->dims * (size_t)s->rank))))
        return NULL;
    t->slots[k] = ns;
    t->n++;
    return ns;
}

/* getDirectionBasedOnUses: none when an operand (not a scalar) has other uses. */
static sdy_direction by_uses(const sdy_graph *g, const sdy_op *x, bool allow_multi) {
    if (allow_multi) return SDY_DIR_BOTH;
    for (int i = 0; i < x->n_operands; i++) {
        int v = x->operands[i];
        if (v >= 0 && g->values[v].n_uses != 1 && g->values[v].rank > 0) return SDY_DIR_NONE;
    }
    return SDY_DIR_BOTH;
}

/* The op-priority schedule's round k for factor f of op x. */
static sdy_direction schedule(const sdy_graph *g, const sdy_op *x, const gs_op_rule *r, int f,
                              int k) {
    switch (k) {
    case 0:
    case 1:
        if (x->kind & (SDY_OP_ELEMENTWISE | SDY_OP_SHAPE)) return by_uses(g, x, k == 1);
        if (x->kind & SDY_OP_SLICE) return by_uses(g, x, k == 1) & SDY_DIR_FORWARD;
        return SDY_DIR_NONE;
    case 2:
        if (r && r->factors[f].kind != GS_FACTOR_PASS_THROUGH) return SDY_DIR_NONE;
        return x->kind & SDY_OP_BROADCAST ? SDY_DIR_BACKWARD : SDY_DIR_BOTH;
    case 3: return x->kind & SDY_OP_BROADCAST ? SDY_DIR_BACKWARD : SDY_DIR_BOTH;
    default: return SDY_DIR_BOTH;
    }
}

static sdy_direction direction(const run *ru, const sdy_op *x, const gs_op_rule *r, int f) {
    if (r->factors[f].blocked) return SDY_DIR_NONE;
    if (x && x->fixed_dir >= 0) return (sdy_direction)x->fixed_dir;
    if (!x || ru->op_round < 0) return SDY_DIR_BOTH;
    unsigned d = SDY_DIR_NONE;
    for (int k = 0; k <= ru->op_round; k++) d |= schedule(ru->g, x, r, f, k);
    return (sdy_direction)d;
}

/* Propagates through one rule between tensors; setting a value's sharding notifies w (unless
 * NULL). slots: the sharding slots (n_operands + n_results), values: the value each is (-1
 * for a slot that is no value, e.g. a function result); x the op (NULL: a function's results).
 * Returns false on OOM. */
static bool propagate_tensors(run *ru, const gs_op_rule *r, sdy_sharding **slots,
                              const int *values, const sdy_op *x, worklist *w, int current) {
    sdy_graph *g = ru->g;
    int n_t = r->n_operands + r->n_results;
    int mesh = common_mesh(g, (const sdy_sharding *const *)slots, n_t);
    if (mesh < 0) return true;
    const gs_mesh *m = g->meshes[mesh];
    if (m->n_axes == 0) return true; /* a maximal mesh: Shardy does not propagate it */
    gs_arena *scratch = ru->scratch;
    gs_arena_reset(scratch);
    bool ok = false;
    sdy_projection *p = sdy_project(scratch, r, m, (const sdy_sharding *const *)slots,
                                    (const sdy_sharding *const *)slots + r->n_operands);
    sdy_direction *dirs = GS_NEW_ARRAY(scratch, sdy_direction, r->n_factors + 1);
    bool *updated = GS_NEW_ARRAY(scratch, bool, n_t + 1);
    if (!p || !dirs || !updated) goto done;
    /* a tensor that had no sharding takes the region's manual axes from one that has */
    const sdy_axes *manual = NULL;
    for (int t = 0; t < n_t && !manual; t++)
        if (slots[t]) manual = &slots[t]->manual;
    for (int t = 0; t < n_t; t++)
        if (!slots[t] && manual) p->t[t].manual = *manual;
    for (int f = 0; f < r->n_factors; f++) dirs[f] = direction(ru, x, r, f);
    memset(updated, 0, sizeof(bool) * (size_t)(n_t + 1));
    if (!ru->aggressive)
        sdy_propagate_factors(p, r, dirs, m, ru->o->conservative, updated);
    else if (!sdy_propagate_factors_aggressive(scratch, p, r, dirs, ru->o->conservative,
                                               x && (x->kind & SDY_OP_ELEMENTWISE), updated))
        goto done;
    for (int t = 0; t < n_t; t++) {
        if (!updated[t]) continue;
        const gs_tensor_factors *tf =
            t < r->n_operands ? &r->operands[t] : &r->results[t - r->n_operands];
        sdy_sharding tmp; /* in scratch; kept (copied) only when it is a change */
        if (!sdy_unproject(scratch, r, tf, &p->t[t], mesh, m, &tmp)) goto done;
        sdy_sharding *old = slots[t];
        if ((!old && sdy_sharding_empty_axes(&tmp)) || (old && sdy_sharding_eq(&tmp, old)))
            continue;
        sdy_sharding *ns = keep(ru, &tmp);
        if (!ns) goto done;
        slots[t] = ns;
        g->source = source_of(g, slots, values, n_t, r->n_operands, t);
        if (values[t] >= 0) set_value(g, w, values[t], ns, current);
    }
    ok = true;
done:
    return ok && !scratch->failed;
}

/* The main function's results and the values returned, both ways. */
static bool propagate_results(run *ru) {
    sdy_graph *g = ru->g;
    for (int i = 0; i < g->n_results; i++) {
        int v = g->result_values[i];
        if (v < 0 || g->values[v].opaque) continue;
        sdy_value *val = &g->values[v];
        const gs_op_rule *r = sdy_identity_rule(g->a, val->rank, val->dims, 1);
        if (!r) return false;
        sdy_sharding *slots[2] = {val->sh, g->result_sh[i]};
        int values[2] = {v, -1};
        if (!propagate_tensors(ru, r, slots, values, NULL, NULL, -1)) return false;
        g->result_sh[i] = slots[1];
    }
    return true;
}

static bool is_manual_axis(const sdy_axes *manual, const gs_axis_ref *a) {
    for (int i = 0; i < manual->n; i++)
        if (manual->v[i].axis == a->axis) return true;
    return false;
}

/* Only the axes of l that are manual (keep) or free (!keep). */
static void filter_axes(sdy_axes *l, const sdy_axes *manual, bool keep) {
    int k = 0;
    for (int i = 0; i < l->n; i++)
        if (is_manual_axis(manual, &l->v[i]) == keep) l->v[k++] = l->v[i];
    l->n = k;
}

/* s seen from inside a manual computation: its free axes (eraseManualAxes), marked with the
 * region's manual axes. */
static sdy_sharding *inner_view(gs_arena *a, const sdy_sharding *s, const sdy_axes *manual) {
    sdy_sharding *o = GS_NEW(a, sdy_sharding);
    sdy_dim *dims = s->rank ? GS_NEW_ARRAY(a, sdy_dim, s->rank) : NULL;
    if (!o || (s->rank && !dims)) return NULL;
    *o = *s;
    for (int d = 0; d < s->rank; d++) {
        dims[d] = s->dims[d];
        filter_axes(&dims[d].axes, manual, false);
    }
    o->dims = dims;
    filter_axes(&o->replicated, manual, false);
    filter_axes(&o->unreduced, manual, false);
    o->manual = *manual;
    return o;
}

/* outer with its free axes replaced by inner's (addFreeAxesToManualComputationSharding): each
 * dim keeps its manual axes in front, then inner's; open or closed and priority as inner's. */
static sdy_sharding *outer_view(gs_arena *a, const sdy_sharding *outer, const sdy_sharding *inner,
                                const sdy_axes *manual) {
    sdy_sharding *o = GS_NEW(a, sdy_sharding);
    sdy_dim *dims = inner->rank ? GS_NEW_ARRAY(a, sdy_dim, inner->rank) : NULL;
    if (!o || (inner->rank && !dims)) return NULL;
    *o = *inner;
    for (int d = 0; d < inner->rank; d++) {
        dims[d] = inner->dims[d];
        sdy_axes front = {0};
        if (outer && d < outer->rank) {
            front = outer->dims[d].axes;
            filter_axes(&front, manual, true);
        }
        for (int i = 0; i < inner->dims[d].axes.n; i++) sdy_push(&front, &inner->dims[d].axes.v[i]);
        dims[d].axes = front;
    }
    o->dims = dims;
    o->replicated = outer ? outer->replicated : (sdy_axes){0};
    o->unreduced = outer ? outer->unreduced : (sdy_axes){0};
    o->manual = outer ? outer->manual : (sdy_axes){0};
    return o;
}

/* An edge into or out of a manual computation (sdy_op.manual_view). */
static bool visit_manual_edge(run *ru, int op, worklist *w, const gs_op_rule *r,
                              sdy_sharding **slots, int *values, int n_t) {
    sdy_graph *g = ru->g;
    const sdy_op *x = &g->ops[op];
    sdy_sharding *outer[64], *seen[64];
    int outer_values[64];
    for (int t = 0; t < n_t; t++) {
        outer[t] = slots[t];
        outer_values[t] = -1;
        if (!(x->outer_slots & (1u << t))) continue;
        outer_values[t] = values[t];
        values[t] = -1; /* set below, in the outer view */
        if (slots[t] && !(slots[t] = inner_view(g->a, slots[t], x->manual_view))) return false;
    }
    for (int t = 0; t < n_t; t++) seen[t] = slots[t];
    if (!propagate_tensors(ru, r, slots, values, x, w, op)) return false;
    for (int t = 0; t < n_t; t++) {
        if (outer_values[t] < 0 || slots[t] == seen[t]) continue;
        sdy_sharding *ns = outer_view(g->a, outer[t], slots[t], x->manual_view);
        if (!ns) return false;
        g->source = g->events ? values[1 - t] : -1; /* the edge's other side */
        set_value(g, w, outer_values[t], ns, op);
    }
    return true;
}

static bool visit(run *ru, int op, worklist *w) {
    sdy_graph *g = ru->g;
    const sdy_op *x = &g->ops[op];
    const gs_op_rule *r = x->rule;
    if (!r || r->n_operands != x->n_operands || r->n_results != x->n_results) return true;
    int n_t = x->n_operands + x->n_results;
    sdy_sharding *slots[64];
    int values[64] = {0};
    if (n_t > 64) return true;
    for (int t = 0; t < n_t; t++) {
        int v = t < x->n_operands ? x->operands[t] : x->results[t - x->n_operands];
        values[t] = v;
        slots[t] = v >= 0 ? g->values[v].sh : NULL;
        const gs_tensor_factors *tf =
            t < r->n_operands ? &r->operands[t] : &r->results[t - r->n_operands];
        if (v < 0 || g->values[v].rank != tf->rank) return true; /* not a tensor it describes */
        if (g->values[v].opaque) return true; /* a sharding too long to hold: left alone */
    }
    if (x->manual_view) return visit_manual_edge(ru, op, w, r, slots, values, n_t);
    return propagate_tensors(ru, r, slots, values, x, w, op);
}

/* BasicPropagationPassImpl::propagate with one factor propagation and op-priority round. */
static bool run_once(run *ru) {
    sdy_graph *g = ru->g;
    g->now.aggressive = ru->aggressive;
    g->now.op_round = ru->op_round;
    if (!propagate_results(ru)) return false;
    worklist w = {0};
    gs_arena scratch;
    gs_arena_init(&scratch);
    w.stack = GS_NEW_ARRAY(&scratch, int, g->n_ops + 1);
    w.queued = GS_NEW_ARRAY(&scratch, bool, g->n_ops + 1);
    bool ok = w.stack && w.queued;
    if (ok) {
        memset(w.queued, 0, sizeof(bool) * (size_t)(g->n_ops + 1));
        for (int i = g->n_ops - 1; i >= 0; i--) push(&w, i);
    }
    while (ok && w.n > 0) {
        int op = w.stack[--w.n];
        w.queued[op] = false;
        ok = visit(ru, op, &w);
    }
    gs_arena_free(&scratch);
    return ok && propagate_results(ru);
}

/* Aggressive propagation: its strategy's factor propagations in turn. */
static bool run_strategy(run *ru) {
    gs_sdy_strategy s = ru->o->strategy;
    if (s == GS_SDY_BASIC || s == GS_SDY_BASIC_THEN_AGGRESSIVE) {
        ru->aggressive = false;
        if (!run_once(ru)) return false;
    }
    if (s == GS_SDY_AGGRESSIVE || s == GS_SDY_BASIC_THEN_AGGRESSIVE) {
        ru->aggressive = true;
        if (!run_once(ru)) return false;
    }
    return true;
}

/* Op-priority propagation: five rounds, each allowing more ops and directions. */
static bool run_op_priority(run *ru) {
    if (!ru->o->op_priority) {
        ru->op_round = -1;
        return run_strategy(ru);
    }
    for (int k = 0; k < 5; k++) {
        ru->op_round = k;
        if (!run_strategy(ru)) return false;
    }
    return true;
}

/* ------------------------------------------------------------------ user priorities */

/* A sharding for the first round: dims with a priority above 0 empty and closed, their axes
 * replicated (sorted as the mesh orders them), the others without priority. */
static sdy_sharding *initial(gs_arena *a, const sdy_sharding *s, bool *has_later) {
    sdy_sharding *n = GS_NEW(a, sdy_sharding);
    if (!n) return NULL;
    *n = *s;
    n->dims = s->rank ? GS_NEW_ARRAY(a, sdy_dim, s->rank) : NULL;
    if (s->rank && !n->dims) return NULL;
    *has_later = false;
    for (int d = 0; d < s->rank; d++) {
        n->dims[d] = s->dims[d];
        if (s->dims[d].priority <= 0) {
            n->dims[d].priority = -1;
            continue;
        }
        *has_later = true;
        for (int i = 0; i < s->dims[d].axes.n; i++) sdy_push(&n->replicated, &s->dims[d].axes.v[i]);
        n->dims[d].axes.n = 0;
        n->dims[d].closed = true;
        n->dims[d].priority = -1;
    }
    /* replicated axes in mesh order: by axis, then sub-axis pre-size */
    sdy_axes *r = &n->replicated;
    for (int i = 1; i < r->n; i++)
        for (int j = i; j > 0; j--) {
            gs_axis_ref *x = &r->v[j - 1], *y = &r->v[j];
            bool after = x->axis > y->axis || (x->axis == y->axis && sdy_pre(x) > sdy_pre(y));
            if (!after) break;
            gs_axis_ref t = *x;
            *x = *y;
            *y = t;
        }
    return n;
}

/* The dims of cur whose original priority is p get their original axes back (no priority);
 * those axes leave the replicated set. */
static sdy_sharding *at_priority(gs_arena *a, const sdy_sharding *cur, const sdy_sharding *orig,
                                 int64_t p) {
    sdy_sharding *n = GS_NEW(a, sdy_sharding);
    if (!n) return NULL;
    *n = *cur;
    n->dims = cur->rank ? GS_NEW_ARRAY(a, sdy_dim, cur->rank) : NULL;
    if (cur->rank && !n->dims) return NULL;
    sdy_axes seen = {0};
    for (int d = 0; d < cur->rank; d++) {
        n->dims[d] = cur->dims[d];
        if (d < orig->rank && orig->dims[d].priority == p) {
            n->dims[d] = orig->dims[d];
            n->dims[d].priority = -1;
            for (int i = 0; i < orig->dims[d].axes.n; i++) sdy_push(&seen, &orig->dims[d].axes.v[i]);
        }
    }
    n->replicated.n = 0;
    for (int i = 0; i < cur->replicated.n; i++) {
        bool drop = false;
        for (int k = 0; k < seen.n && !drop; k++)
            drop = sdy_axis_eq(&seen.v[k], &cur->replicated.v[i]);
        if (!drop) sdy_push(&n->replicated, &cur->replicated.v[i]);
    }
    return n;
}

/* Every sharding slot of the graph: values, then the function's results. */
static sdy_sharding **slot(sdy_graph *g, int i) {
    return i < g->n_values ? &g->values[i].sh : &g->result_sh[i - g->n_values];
}

static bool run_user_priority(run *ru) {
    sdy_graph *g = ru->g;
    if (!ru->o->user_priority) return run_op_priority(ru);
    int n = g->n_values + g->n_results;
    gs_arena scratch;
    gs_arena_init(&scratch);
    const sdy_sharding **orig = GS_NEW_ARRAY(&scratch, const sdy_sharding *, n + 1);
    int64_t *prios = GS_NEW_ARRAY(&scratch, int64_t, 1);
    bool ok = orig != NULL;
    gs_vec later; /* int64_t: priorities above 0, sorted, distinct */
    gs_vec_init(&later, sizeof(int64_t));
    (void)prios;
    for (int i = 0; ok && i < n; i++) {
        sdy_sharding **s = slot(g, i);
        orig[i] = *s;
        if (!*s) continue;
        bool has_later;
        sdy_sharding *init = initial(g->a, *s, &has_later);
        if (!init) {
            ok = false;
            break;
        }
        *s = init;
        for (int d = 0; d < orig[i]->rank; d++) {
            int64_t p = orig[i]->dims[d].priority;
            if (p <= 0) continue;
            size_t k = 0;
            while (k < later.n && ((int64_t *)later.data)[k] < p) k++;
            if (k < later.n && ((int64_t *)later.data)[k] == p) continue;
            if (gs_vec_push(&later, &p) != GS_OK) {
                ok = false;
                break;
            }
            int64_t *v = later.data;
            for (size_t j = later.n - 1; j > k; j--) v[j] = v[j - 1];
            v[k] = p;
        }
    }
    g->now.user_round = 0;
    ok = ok && run_op_priority(ru);
    for (size_t k = 0; ok && k < later.n; k++) {
        int64_t p = ((int64_t *)later.data)[k];
        g->now.user_round = p;
        for (int i = 0; ok && i < n; i++) {
            sdy_sharding **s = slot(g, i);
            if (!orig[i] || !*s) continue;
            bool has = false;
            for (int d = 0; d < orig[i]->rank; d++) has |= orig[i]->dims[d].priority == p;
            if (has && !(*s = at_priority(g->a, *s, orig[i], p))) ok = false;
        }
        ok = ok && run_op_priority(ru);
    }
    gs_vec_free(&later);
    gs_arena_free(&scratch);
    return ok;
}

bool sdy_run(sdy_graph *g, const gs_sdy_options *o) {
    gs_arena scratch;
    gs_arena_init(&scratch);
    interned kept = {0};
    run ru = {g, o, false, -1, &scratch, &kept};
    g->source = -1;
    g->now.user_round = -1;
    sdy_sync_groups(g);
    bool ok = run_user_priority(&ru);
    gs_arena_free(&scratch);
    free(kept.slots);
    return ok;
}
