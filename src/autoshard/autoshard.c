/*
 * src/autoshard/autoshard.c — gs_autoshard: builds the search problem of a module on a mesh
 * (values, candidates, op strategies and their costs, reshard edges, memory points; see
 * internal.h), has solve.c choose, and writes the chosen shardings on the module.
 *
 * What is searched: the entry and every computation it runs as a loop body or condition, a
 * call or a branch (their values alias the operands and results they are called with), each
 * op's cost counted once per run (a loop body times its known trip count). Reduction bodies
 * and comparators are scalar and keep no sharding.
 *
 * Costs, per device, in seconds on o->machine: an op's compute is max(its FLOPs / peak, its
 * bytes / memory bandwidth) over the devices its strategy splits it on; a strategy that splits
 * a reduction (contracting) factor adds the all-reduce of its result over those axes; a
 * reshard adds, per mesh axis, an all-gather (the axis leaves the value), an all-to-all (it
 * moves to another dim) or nothing (it comes: each device keeps a slice), on the link the axis
 * spans (within a node, or between nodes). Memory: at each point of the entry's schedule the
 * values live there (from their op to their last use; parameters throughout; elementwise
 * values used only by elementwise ops take none, as XLA fuses them), each over its shards.
 */
#include "autoshard/internal.h"
#include "cost/internal.h"
#include "gspmd/builder.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_STRAT = 1024 };

/* ------------------------------------------------------------------ costs */

/* The link mesh axis a's groups use: within a node when they span at most node_devices. */
static const gs_link *axis_link(const as_problem *p, int a) {
    int64_t stride = 1;
    for (int b = a + 1; b < p->n_axes; b++) stride *= p->mesh->sizes[b];
    int64_t span = stride * p->mesh->sizes[a];
    bool intra = p->mc->node_devices <= 0 || span <= p->mc->node_devices;
    return intra ? &p->mc->intra : &p->mc->inter;
}

/* Seconds of one collective of kind k over the g devices of a mesh axis's groups, each
 * holding b bytes: `gspmd cost`'s algorithms (src/cost/step.c), with a kernel's fixed cost. */
static double coll_s(const as_problem *p, int k, int64_t g, double b, const gs_link *l) {
    if (g <= 1) return 0;
    double wire;
    return gs_cost_coll_time(k, (int)g, b, l, &wire) + p->mc->op_overhead;
}

double as_reshard_s(const as_problem *p, const as_cand *f, const as_cand *t, double bytes) {
    /* per dim: is f's list of axes on it (major first, mesh order) a prefix of t's? Then the
     * axes t adds there are local slices; else the shards move between devices */
    bool prefix[GS_MAX_RANK + 1];
    for (int d = 0; d <= GS_MAX_RANK; d++) prefix[d] = true;
    for (int a = 0; a < p->n_axes; a++) {
        int d = f->dim[a];
        if (d < 0) continue;
        if (t->dim[a] != d) prefix[d] = false;
        for (int b = 0; b < a; b++)
            if (t->dim[b] == d && f->dim[b] != d) prefix[d] = false;
    }
    double s = 0;
    for (int a = 0; a < p->n_axes; a++) {
        int fd = f->dim[a], td = t->dim[a];
        int64_t n = p->mesh->sizes[a];
        /* an axis that stays on its dim keeps its slices when the axes major to it there are
         * the same (the minor ones leaving or arriving are their own cost) */
        bool stays = fd >= 0 && fd == td;
        for (int b = 0; b < a && stays; b++)
            stays = (f->dim[b] == fd) == (t->dim[b] == fd);
        if (fd >= 0 && td < 0) /* all-gather: each device ends with its shard */
            s += coll_s(p, GS_COST_ALL_GATHER, n, bytes / (double)t->shards, axis_link(p, a));
        else if ((fd >= 0 && !stays) || (fd < 0 && td >= 0 && !prefix[td]))
            s += coll_s(p, GS_COST_ALL_TO_ALL, n, bytes / (double)f->shards, axis_link(p, a));
        /* (an axis that stays, or comes in order: no communication) */
    }
    return s;
}

/* Peak FLOP/s of a matmul whose result has element type t. */
static double peak_flops(const gs_machine *mc, gs_type t) {
    if (t == GS_F64 || t == GS_C128) return mc->flops_f64 > 0 ? mc->flops_f64 : mc->flops_f32;
    if (t == GS_F32 || t == GS_C64) return mc->flops_f32;
    return mc->flops_bf16 > 0 ? mc->flops_bf16 : mc->flops_f32;
}

/* Bytes op `in` reads and writes (operands and result, whole). */
static double traffic(const gs_instr *in) {
    double b = (double)gs_shape_bytes(in->shape);
    for (int i = 0; i < in->n_operands; i++) b += (double)gs_shape_bytes(in->operands[i]->shape);
    return b;
}

/* Seconds of `in` computed on 1/shards of its work. */
static double compute_s(const as_problem *p, const gs_instr *in, double shards) {
    const gs_machine *mc = p->mc;
    if (in->op == GS_OP_CUSTOM_CALL) { /* a sharding marker: its reshard is all it costs */
        const char *t = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
        if (t && strcmp(t, "Sharding") == 0) return 0;
    }
    double flops = gs_cost_instr_flops(in);
    gs_type t = gs_shape_is_array(in->shape) ? in->shape->type : GS_F32;
    double f = flops > 0 ? flops / peak_flops(mc, t) : 0;
    double b = mc->mem_bandwidth > 0 ? traffic(in) / mc->mem_bandwidth : 0;
    return (f > b ? f : b) / shards + mc->op_overhead;
}

/* ------------------------------------------------------------------ the alias classes */

typedef struct builder {
    as_problem *p;
    gs_module *m;
    gs_diags *d;
    int n_comps;
    const gs_computation **comps; /* what the search covers, in program order */
    double *mult;                 /* runs per step of each */
    gs_strmap comp_index;         /* name -> index + 1 */
    int **base;                   /* [comp][instr id]: its first leaf */
    int n_leaves;
    int *uf;                      /* union-find parent of each leaf */
    const gs_shape **leaf_shape;
    int *leaf_value;              /* the value of each leaf (-1: not an array) */
    int seq;
    gs_status st;
} builder;

static int comp_of(builder *b, const gs_computation *c) {
    return c ? (int)(intptr_t)gs_strmap_get(&b->comp_index, c->name) - 1 : -1;
}

static int n_leaves_of(const gs_shape *s) {
    return gs_shape_is_tuple(s) ? gs_shape_n_leaves(s) : 1;
}

/* Appends the leaf shapes of s depth-first. */
static void leaf_shapes(const gs_shape *s, const gs_shape **out, int *n) {
    if (!gs_shape_is_tuple(s)) {
        out[(*n)++] = s;
        return;
    }
    for (int i = 0; i < s->n_tuple; i++) leaf_shapes(s->tuple[i], out, n);
}

static int find(builder *b, int x) {
    while (b->uf[x] != x) x = b->uf[x] = b->uf[b->uf[x]];
    return x;
}

static void join(builder *b, int x, int y) {
    x = find(b, x), y = find(b, y);
    if (x != y) b->uf[x < y ? y : x] = x < y ? x : y;
}

/* Joins the leaves of x and y (same leaf count) from their first. */
static void join_leaves(builder *b, int x, int y, int n) {
    for (int i = 0; i < n; i++) join(b, x + i, y + i);
}

static int leaf0(builder *b, const gs_instr *in) {
    int ci = comp_of(b, in->parent);
    return ci < 0 ? -1 : b->base[ci][in->id];
}

/* Computations the search covers: the entry and what it runs as loops, calls and branches,
 * with their runs per step. */
static bool collect(builder *b) {
    gs_module *m = b->m;
    int cap = m->n_comps;
    b->comps = GS_NEW_ARRAY(b->p->a, const gs_computation *, cap ? cap : 1);
    b->mult = GS_NEW_ARRAY(b->p->a, double, cap ? cap : 1);
    if (!b->comps || !b->mult) return false;
    b->comps[0] = m->entry;
    b->mult[0] = 1;
    b->n_comps = 1;
    if (gs_strmap_put(&b->comp_index, m->entry->name, (void *)(intptr_t)1) != GS_OK) return false;
    for (int k = 0; k < b->n_comps; k++) {
        const gs_computation *c = b->comps[k];
        for (int i = 0; i < c->n_instrs; i++) {
            const gs_instr *in = c->instrs[i];
            gs_computation *called[64];
            int n = 0;
            double mult = b->mult[k];
            if (in->op == GS_OP_WHILE) {
                int64_t trips;
                if (gs_cost_trip_count(in, &trips) && trips > 0) mult *= (double)trips;
                called[n++] = gs_instr_comp(in, GS_ATTR_BODY);
                called[n++] = gs_instr_comp(in, GS_ATTR_CONDITION);
            } else if (in->op == GS_OP_CALL || in->op == GS_OP_CONDITIONAL) {
                n = gs_instr_called(in, called, 64);
                if (n > 64) n = 64;
            }
            for (int j = 0; j < n; j++) {
                if (!called[j] || comp_of(b, called[j]) >= 0 || b->n_comps >= cap) continue;
                b->comps[b->n_comps] = called[j];
                b->mult[b->n_comps++] = mult;
                if (gs_strmap_put(&b->comp_index, called[j]->name,
                                  (void *)(intptr_t)b->n_comps) != GS_OK)
                    return false;
            }
        }
    }
    return true;
}

static bool elementwise(const gs_instr *in) {
    gs_op_family f = gs_op_info_of(in->op)->family;
    return (f == GS_FAM_UNARY || f == GS_FAM_BINARY || f == GS_FAM_TERNARY ||
            f == GS_FAM_COMPARE || f == GS_FAM_CONVERT) &&
           gs_shape_is_array(in->shape);
}

/* The first operand of elementwise `in` with its result's dims, or -1. */
static int follow_operand(const gs_instr *in) {
    for (int i = 0; i < in->n_operands; i++)
        if (gs_shape_is_array(in->operands[i]->shape) &&
            gs_shape_same_dims(in->operands[i]->shape, in->shape))
            return i;
    return -1;
}

/* The leaf numbering and the alias classes. */
static bool classes(builder *b) {
    int n = 0;
    b->base = GS_NEW_ARRAY(b->p->a, int *, b->n_comps);
    if (!b->base) return false;
    for (int k = 0; k < b->n_comps; k++) {
        const gs_computation *c = b->comps[k];
        b->base[k] = GS_NEW_ARRAY(b->p->a, int, c->n_instrs ? c->n_instrs : 1);
        if (!b->base[k]) return false;
        for (int i = 0; i < c->n_instrs; i++) {
            b->base[k][i] = n;
            n += n_leaves_of(c->instrs[i]->shape);
        }
    }
    b->n_leaves = n;
    b->uf = GS_NEW_ARRAY(b->p->a, int, n ? n : 1);
    b->leaf_shape = GS_NEW_ARRAY(b->p->a, const gs_shape *, n ? n : 1);
    b->leaf_value = GS_NEW_ARRAY(b->p->a, int, n ? n : 1);
    if (!b->uf || !b->leaf_shape || !b->leaf_value) return false;
    for (int i = 0; i < n; i++) b->uf[i] = i;
    for (int k = 0; k < b->n_comps; k++) {
        const gs_computation *c = b->comps[k];
        for (int i = 0; i < c->n_instrs; i++) {
            int cnt = 0;
            leaf_shapes(c->instrs[i]->shape, b->leaf_shape + b->base[k][i], &cnt);
        }
    }
    for (int k = 0; k < b->n_comps; k++) {
        const gs_computation *c = b->comps[k];
        for (int i = 0; i < c->n_instrs; i++) {
            const gs_instr *in = c->instrs[i];
            int me = b->base[k][i], nl = n_leaves_of(in->shape);
            switch (in->op) {
            case GS_OP_TUPLE: {
                int off = me;
                for (int j = 0; j < in->n_operands; j++) {
                    int w = n_leaves_of(in->operands[j]->shape);
                    join_leaves(b, off, leaf0(b, in->operands[j]), w);
                    off += w;
                }
                break;
            }
            case GS_OP_GET_TUPLE_ELEMENT: {
                const gs_shape *t = in->operands[0]->shape;
                int64_t idx = gs_instr_int(in, GS_ATTR_INDEX, 0), off = 0;
                if (!gs_shape_is_tuple(t) || idx < 0 || idx >= t->n_tuple) break;
                for (int j = 0; j < idx; j++) off += n_leaves_of(t->tuple[j]);
                join_leaves(b, me, leaf0(b, in->operands[0]) + (int)off, nl);
                break;
            }
            case GS_OP_OPTIMIZATION_BARRIER:
            case GS_OP_ADD_DEPENDENCY:
                if (in->n_operands && n_leaves_of(in->operands[0]->shape) == nl)
                    join_leaves(b, me, leaf0(b, in->operands[0]), nl);
                break;
            case GS_OP_WHILE: {
                const gs_computation *body = gs_instr_comp(in, GS_ATTR_BODY);
                const gs_computation *cond = gs_instr_comp(in, GS_ATTR_CONDITION);
                if (in->n_operands == 1) join_leaves(b, me, leaf0(b, in->operands[0]), nl);
                if (body && body->n_params == 1 && comp_of(b, body) >= 0) {
                    join_leaves(b, me, leaf0(b, body->params[0]), nl);
                    join_leaves(b, me, leaf0(b, body->root), nl);
                }
                if (cond && cond->n_params == 1 && comp_of(b, cond) >= 0)
                    join_leaves(b, me, leaf0(b, cond->params[0]), nl);
                break;
            }
            case GS_OP_CALL: {
                const gs_computation *f = gs_instr_comp(in, GS_ATTR_TO_APPLY);
                if (!f || comp_of(b, f) < 0) break;
                for (int j = 0; j < in->n_operands && j < f->n_params; j++)
                    join_leaves(b, leaf0(b, f->params[j]), leaf0(b, in->operands[j]),
                                n_leaves_of(in->operands[j]->shape));
                join_leaves(b, me, leaf0(b, f->root), nl);
                break;
            }
            case GS_OP_CONDITIONAL: {
                gs_computation *br[64];
                int nb = gs_instr_called(in, br, 64);
                for (int j = 0; j < nb && j < 64 && j + 1 < in->n_operands; j++) {
                    if (!br[j] || comp_of(b, br[j]) < 0 || br[j]->n_params != 1) continue;
                    join_leaves(b, leaf0(b, br[j]->params[0]), leaf0(b, in->operands[j + 1]),
                                n_leaves_of(in->operands[j + 1]->shape));
                    join_leaves(b, me, leaf0(b, br[j]->root), nl);
                }
                break;
            }
            default:
                if (elementwise(in)) { /* follows its operand, unless pinned otherwise */
                    int f = follow_operand(in);
                    const gs_sharding *rs = gs_instr_get_sharding(in);
                    const gs_sharding *os = f >= 0 ? gs_instr_get_sharding(in->operands[f]) : NULL;
                    if (f >= 0 && (!rs || !os || gs_sharding_equal(rs, os)))
                        join(b, me, leaf0(b, in->operands[f]));
                }
                break;
            }
        }
    }
    return true;
}

/* ------------------------------------------------------------------ values and candidates */

/* The candidates of a value of dims[rank]: each axis splits one dim (evenly) or none, axes on
 * one dim major first in mesh order. Candidate 0 is replicated. */
static bool candidates(as_problem *p, as_value *v) {
    as_cand cur = {{0}, 1}, *out = GS_NEW_ARRAY(p->a, as_cand, MAX_CAND);
    if (!out) return false;
    int n = 0, na = p->n_axes;
    int choice[AS_MAX_AXES];
    for (int a = 0; a < na; a++) choice[a] = -1;
    for (;;) {
        /* this assignment, when every dim divides evenly */
        int64_t per_dim[GS_MAX_RANK];
        for (int i = 0; i < v->rank; i++) per_dim[i] = 1;
        bool ok = true;
        cur.shards = 1;
        for (int a = 0; a < na; a++) {
            cur.dim[a] = (int8_t)choice[a];
            if (choice[a] < 0) continue;
            per_dim[choice[a]] *= p->mesh->sizes[a];
            cur.shards *= p->mesh->sizes[a];
            if (v->dims[choice[a]] % per_dim[choice[a]] != 0) ok = false;
            if (v->dynamic && v->dynamic[choice[a]]) ok = false;
        }
        if (ok && n < MAX_CAND) out[n++] = cur;
        int a = na - 1; /* next assignment: an odometer over the axes, -1..rank-1 each */
        while (a >= 0 && choice[a] == v->rank - 1) choice[a--] = -1;
        if (a < 0) break;
        choice[a]++;
    }
    v->cand = out;
    v->n_cand = n;
    v->node_cost = GS_NEW_ARRAY(p->a, double, n);
    if (!v->node_cost) return false;
    for (int i = 0; i < n; i++) v->node_cost[i] = 0;
    return true;
}

/* The candidate of value v whose axes split `dim` (AS_MAX_AXES entries), or -1. */
static int cand_index(const as_value *v, const int8_t *dim, int na) {
    for (int k = 0; k < v->n_cand; k++)
        if (memcmp(v->cand[k].dim, dim, (size_t)na) == 0) return k;
    return -1;
}

/* The sharding candidate k of v denotes, in arena a: a PartitionSpec on the mesh (NULL on
 * failure). */
static gs_sharding *cand_sharding(as_problem *p, gs_arena *arena, const as_value *v, int k,
                                  gs_diags *d) {
    gs_sb sb = {0};
    for (int i = 0; i < v->rank; i++) {
        int na = 0;
        for (int a = 0; a < p->n_axes; a++) na += v->cand[k].dim[a] == i;
        gs_sb_puts(&sb, i ? "," : "");
        if (!na) gs_sb_puts(&sb, "None");
        if (na > 1) gs_sb_putc(&sb, '(');
        for (int a = 0, j = 0; a < p->n_axes; a++)
            if (v->cand[k].dim[a] == i) gs_sb_printf(&sb, "%s%s", j++ ? "," : "", p->mesh->names[a]);
        if (na > 1) gs_sb_putc(&sb, ')');
    }
    gs_sharding *s = NULL;
    const char *spec = gs_sb_str(&sb);
    if (sb.failed || gs_sharding_from_spec(arena, p->mesh, spec, strlen(spec), v->rank, &s, d,
                                           gs_span_none()) != GS_OK)
        s = NULL;
    gs_sb_free(&sb);
    return s;
}

static bool values(builder *b) {
    as_problem *p = b->p;
    int *of_root = GS_NEW_ARRAY(p->a, int, b->n_leaves ? b->n_leaves : 1);
    if (!of_root) return false;
    int n = 0;
    for (int i = 0; i < b->n_leaves; i++) of_root[i] = -1;
    for (int i = 0; i < b->n_leaves; i++) {
        int r = find(b, i);
        if (gs_shape_is_array(b->leaf_shape[i]) && of_root[r] < 0) of_root[r] = n++;
    }
    p->values = GS_NEW_ARRAY(p->a, as_value, n ? n : 1);
    if (!p->values) return false;
    memset(p->values, 0, sizeof(as_value) * (size_t)(n ? n : 1));
    p->n_values = n;
    for (int i = 0; i < b->n_leaves; i++) {
        int v = gs_shape_is_array(b->leaf_shape[i]) ? of_root[find(b, i)] : -1;
        b->leaf_value[i] = v;
        if (v < 0) continue;
        as_value *x = &p->values[v];
        double bytes = (double)gs_shape_bytes(b->leaf_shape[i]);
        if (!x->dims) {
            x->rank = b->leaf_shape[i]->rank;
            x->dims = b->leaf_shape[i]->dims;
            x->dynamic = b->leaf_shape[i]->dynamic;
            x->pinned = -1;
        }
        if (bytes > x->bytes) x->bytes = bytes;
    }
    for (int v = 0; v < n; v++)
        if (!candidates(p, &p->values[v])) return false;
    return true;
}

/* Pins each value that an instruction's sharding in the input fixes. */
static gs_status pins(builder *b, gs_autoshard_result *r) {
    as_problem *p = b->p;
    for (int k = 0; k < b->n_comps; k++) {
        const gs_computation *c = b->comps[k];
        for (int i = 0; i < c->n_instrs; i++) {
            const gs_instr *in = c->instrs[i];
            const gs_sharding *sh = gs_instr_get_sharding(in);
            int nl = n_leaves_of(in->shape);
            for (int l = 0; sh && l < nl; l++) {
                int v = b->leaf_value[b->base[k][i] + l];
                if (v < 0) continue;
                as_value *x = &p->values[v];
                if (!x->member) x->member = in;
                const gs_sharding *ls = gs_sharding_leaf(sh, in->shape, l);
                if (!ls || ls->kind == GS_SHARDING_UNKNOWN) continue;
                if (ls->kind == GS_SHARDING_MANUAL || ls->kind == GS_SHARDING_MAXIMAL ||
                    gs_sharding_manual_dim(ls) >= 0 || ls->kind == GS_SHARDING_UNREDUCED)
                    return gs_error(b->d, in->span,
                                    "%%%s: autoshard does not choose around %s shardings yet "
                                    "(--ignore-shardings chooses every value anew)",
                                    in->name, ls->kind == GS_SHARDING_MAXIMAL ? "maximal"
                                              : ls->kind == GS_SHARDING_UNREDUCED ? "unreduced"
                                                                                   : "manual");
                int found = -1;
                for (int q = 0; q < x->n_cand && found < 0; q++) {
                    gs_sharding *cs = cand_sharding(p, p->a, x, q, b->d);
                    if (!cs) return GS_ERR;
                    if (gs_sharding_equal(cs, ls)) found = q;
                }
                char *text = gs_sharding_to_string(p->a, ls);
                if (found < 0)
                    return gs_error(b->d, in->span,
                                    "%%%s: its sharding %s is not one autoshard can choose on "
                                    "this mesh (each mesh axis splits one dimension evenly, or "
                                    "none)",
                                    in->name, text ? text : "?");
                if (x->pinned >= 0 && x->pinned != found) {
                    char *other = gs_sharding_to_string(
                        p->a, gs_sharding_leaf(gs_instr_get_sharding(x->pinned_by),
                                               x->pinned_by->shape, 0));
                    return gs_error(b->d, in->span,
                                    "%%%s: its sharding %s conflicts with %s on %%%s, which "
                                    "holds the same value",
                                    in->name, text ? text : "?", other ? other : "?",
                                    x->pinned_by->name);
                }
                if (x->pinned < 0) r->n_pinned++;
                x->pinned = found;
                x->pinned_by = in;
            }
        }
    }
    return GS_OK;
}

/* ------------------------------------------------------------------ ops and strategies */

typedef struct strat_buf {
    int n;
    double cost[MAX_STRAT];
    int *out, *req; /* MAX_STRAT * n_res, MAX_STRAT * n_opd */
} strat_buf;

/* Where factor f sits in tensor t of rule r: the dim it is the major factor of (-1: not in t;
 * -2: in t but not major, so not splittable as a dim sharding). */
static int factor_dim(const gs_tensor_factors *t, int f) {
    for (int d = 0; d < t->rank; d++)
        for (int j = 0; j < t->dims[d].n; j++)
            if (t->dims[d].factors[j] == f) return j == 0 ? d : -2;
    return -1;
}

/* The candidate of value v (a tensor t of a rule) that splitting factor choice[a] by each mesh
 * axis a gives (0 when v is not an array), or -1 when no candidate is that. */
static int tensor_cand(const as_problem *p, const gs_tensor_factors *t, int v, const int *choice) {
    if (v < 0) return 0;
    int8_t dim[AS_MAX_AXES];
    for (int a = 0; a < p->n_axes; a++) {
        int d = choice[a] < 0 ? -1 : factor_dim(t, choice[a]);
        if (d < -1) return -1;
        dim[a] = (int8_t)d;
    }
    return cand_index(&p->values[v], dim, p->n_axes);
}

/* Bytes of op `in`'s partial results, whole: a bf16 or f16 result's partial sums travel in f32
 * (the partitioner rounds once, after the sum). */
static double partial_bytes(const gs_instr *in) {
    double b = (double)gs_shape_bytes(in->shape);
    gs_type t = gs_shape_is_array(in->shape) ? in->shape->type : GS_F32;
    return t == GS_BF16 || t == GS_F16 ? 2 * b : b;
}

/* For strategy k of op `in` (one result), which sums partial results over the mesh axes that
 * split reduction factors: the same strategy with the sum scattered over one result dim by
 * those axes (a reduce-scatter, half an all-reduce's bytes), for each dim whose candidate that
 * is. */
static void scatter_variants(as_problem *p, const gs_instr *in, const int *choice,
                             const gs_op_rule *rule, int rv, int n_opd, double mult, int k,
                             int64_t reduced, int64_t used, strat_buf *s) {
    int na = p->n_axes;
    const as_value *res = &p->values[rv];
    const as_cand *base = &res->cand[s->out[k]];
    double partial = partial_bytes(in) * (double)reduced / (double)used;
    int a0 = 0;
    for (int a = 0; a < na; a++)
        if (choice[a] >= 0 && rule->factors[choice[a]].kind == GS_FACTOR_REDUCTION) a0 = a;
    double t = compute_s(p, in, (double)used) +
               coll_s(p, GS_COST_REDUCE_SCATTER, reduced, partial, axis_link(p, a0));
    for (int d = 0; d < res->rank && s->n < MAX_STRAT; d++) {
        int8_t dim[AS_MAX_AXES];
        for (int a = 0; a < na; a++)
            dim[a] = choice[a] >= 0 && rule->factors[choice[a]].kind == GS_FACTOR_REDUCTION
                         ? (int8_t)d
                         : base->dim[a];
        int c = cand_index(res, dim, na);
        if (c < 0) continue;
        int n = s->n++;
        s->cost[n] = t * mult;
        s->out[n] = c;
        memcpy(&s->req[n * n_opd], &s->req[k * n_opd], sizeof(int) * (size_t)n_opd);
    }
}

/* Adds the strategies of op `in` from its rule: each assignment of mesh axes to splittable
 * factors. */
static void rule_strategies(builder *b, const gs_instr *in, const gs_op_rule *rule,
                            const int *res_value, int n_res, const int *opd_value, int n_opd,
                            double mult, strat_buf *s) {
    as_problem *p = b->p;
    int na = p->n_axes, nf = rule->n_factors;
    if (nf > 32 || rule->n_results != n_res || rule->n_operands != n_opd) return;
    bool splittable[32];
    for (int f = 0; f < nf; f++) {
        const gs_factor *fa = &rule->factors[f];
        splittable[f] = (fa->kind == GS_FACTOR_PASS_THROUGH || fa->kind == GS_FACTOR_REDUCTION) &&
                        fa->size > 1;
        for (int t = 0; t < n_opd && splittable[f]; t++)
            if (rule->operands[t].rank && factor_dim(&rule->operands[t], f) == -2)
                splittable[f] = false;
        for (int t = 0; t < n_res && splittable[f]; t++)
            if (factor_dim(&rule->results[t], f) == -2) splittable[f] = false;
    }
    int choice[AS_MAX_AXES];
    for (int a = 0; a < na; a++) choice[a] = -1;
    for (;;) {
        int64_t per_f[32], used = 1, reduced = 1;
        for (int f = 0; f < nf; f++) per_f[f] = 1;
        bool ok = true, any = false;
        for (int a = 0; a < na && ok; a++) {
            int f = choice[a];
            if (f < 0) continue;
            any = true;
            if (!splittable[f]) ok = false;
            per_f[f] *= p->mesh->sizes[a];
            if (ok && rule->factors[f].size % per_f[f] != 0) ok = false;
            used *= p->mesh->sizes[a];
            if (rule->factors[f].kind == GS_FACTOR_REDUCTION) reduced *= p->mesh->sizes[a];
        }
        if (ok && any && s->n < MAX_STRAT) {
            int k = s->n;
            for (int j = 0; j < n_res && ok; j++)
                ok = (s->out[k * n_res + j] =
                          tensor_cand(p, &rule->results[j], res_value[j], choice)) >= 0;
            for (int i = 0; i < n_opd && ok; i++)
                ok = (s->req[k * n_opd + i] =
                          tensor_cand(p, &rule->operands[i], opd_value[i], choice)) >= 0;
            if (ok) {
                double t = compute_s(p, in, (double)used);
                if (reduced > 1) { /* the partial results are summed */
                    double bytes = partial_bytes(in) * (double)reduced / (double)used;
                    int a0 = 0;
                    for (int a = 0; a < na; a++)
                        if (choice[a] >= 0 && rule->factors[choice[a]].kind == GS_FACTOR_REDUCTION)
                            a0 = a;
                    t += coll_s(p, GS_COST_ALL_REDUCE, reduced, bytes, axis_link(p, a0));
                }
                s->cost[k] = t * mult;
                s->n++;
                if (reduced > 1 && n_res == 1 && res_value[0] >= 0)
                    scatter_variants(p, in, choice, rule, res_value[0], n_opd, mult, k, reduced,
                                     used, s);
            }
        }
        int a = na - 1;
        while (a >= 0 && choice[a] == nf - 1) choice[a--] = -1;
        if (a < 0) break;
        choice[a]++;
    }
}

static bool add_op(builder *b, const gs_instr *in, double mult) {
    as_problem *p = b->p;
    int n_res = n_leaves_of(in->shape), n_opd = in->n_operands;
    int me = leaf0(b, in);
    int *res_value = GS_NEW_ARRAY(p->a, int, n_res ? n_res : 1);
    int *opd_value = GS_NEW_ARRAY(p->a, int, n_opd ? n_opd : 1);
    double *opd_bytes = GS_NEW_ARRAY(p->a, double, n_opd ? n_opd : 1);
    strat_buf *s = GS_NEW(p->a, strat_buf);
    if (!res_value || !opd_value || !opd_bytes || !s) return false;
    s->n = 0;
    s->out = GS_NEW_ARRAY(p->a, int, MAX_STRAT * (n_res ? n_res : 1));
    s->req = GS_NEW_ARRAY(p->a, int, MAX_STRAT * (n_opd ? n_opd : 1));
    if (!s->out || !s->req) return false;
    int n_arr = 0;
    for (int j = 0; j < n_res; j++) n_arr += (res_value[j] = b->leaf_value[me + j]) >= 0;
    if (!n_arr) return true; /* tokens only: nothing to choose */
    for (int i = 0; i < n_opd; i++) {
        const gs_instr *o = in->operands[i];
        opd_value[i] = gs_shape_is_array(o->shape) ? b->leaf_value[leaf0(b, o)] : -1;
        opd_bytes[i] = (double)gs_shape_bytes(o->shape);
    }
    gs_op_rule *rule = NULL;
    if (gs_op_rule_build(p->a, in, &rule) != GS_OK) return false;
    if (rule && !rule->is_default)
        rule_strategies(b, in, rule, res_value, n_res, opd_value, n_opd, mult, s);
    /* compute it whole (operands replicated), keep any slice of one result */
    int first = res_value[0] >= 0 ? res_value[0] : -1;
    int n_keep = n_res == 1 && first >= 0 ? p->values[first].n_cand : 1;
    double whole = compute_s(p, in, 1) * mult;
    int whole_first = s->n;
    for (int c = 0; c < n_keep && s->n < MAX_STRAT; c++) {
        int k = s->n++;
        s->cost[k] = whole;
        for (int j = 0; j < n_res; j++) s->out[k * n_res + j] = j == 0 ? c : 0;
        for (int i = 0; i < n_opd; i++) s->req[k * n_opd + i] = 0;
    }
    as_op *op = &p->ops[p->n_ops++];
    op->in = in;
    op->seq = b->seq++;
    op->n_strat = s->n;
    op->cost = GS_NEW_ARRAY(p->a, double, s->n);
    op->out = GS_NEW_ARRAY(p->a, int, s->n * (n_res ? n_res : 1));
    op->req = GS_NEW_ARRAY(p->a, int, s->n * (n_opd ? n_opd : 1));
    if (!op->cost || !op->out || !op->req) return false;
    memcpy(op->cost, s->cost, sizeof(double) * (size_t)s->n);
    memcpy(op->out, s->out, sizeof(int) * (size_t)(s->n * n_res));
    memcpy(op->req, s->req, sizeof(int) * (size_t)(s->n * n_opd));
    op->n_res = n_res;
    op->n_opd = n_opd;
    op->res_value = res_value;
    op->opd_value = opd_value;
    op->opd_bytes = opd_bytes;
    op->mult = mult;
    op->whole = whole_first;
    op->choice = whole_first;
    return true;
}

static bool is_alias(const gs_instr *in) {
    switch (in->op) {
    case GS_OP_TUPLE:
    case GS_OP_GET_TUPLE_ELEMENT:
    case GS_OP_WHILE:
    case GS_OP_CALL:
    case GS_OP_CONDITIONAL:
    case GS_OP_OPTIMIZATION_BARRIER:
    case GS_OP_ADD_DEPENDENCY:
    case GS_OP_PARAMETER: return true;
    default: return false;
    }
}

/* A source: any sharding of it is free (a parameter arrives so, a constant or an iota is
 * made so). */
static bool is_source(const gs_instr *in) {
    gs_op_family f = gs_op_info_of(in->op)->family;
    return f == GS_FAM_PARAMETER || f == GS_FAM_CONSTANT || f == GS_FAM_IOTA ||
           f == GS_FAM_TOKEN || in->n_operands == 0;
}

/* An op of a program that already is SPMD: its value differs by device, or it talks to the
 * others. */
static bool spmd_only(const gs_instr *in) {
    gs_op_family f = gs_op_info_of(in->op)->family;
    const char *t = in->op == GS_OP_CUSTOM_CALL ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET)
                                                : NULL;
    return in->op == GS_OP_PARTITION_ID || in->op == GS_OP_REPLICA_ID ||
           f == GS_FAM_COLLECTIVE ||
           (t && (strcmp(t, "SPMDFullToShardShape") == 0 ||
                  strcmp(t, "SPMDShardToFullShape") == 0)); /* a manual region's edges */
}

static bool ops(builder *b) {
    as_problem *p = b->p;
    int cap = 0;
    for (int k = 0; k < b->n_comps; k++) cap += b->comps[k]->n_instrs;
    p->ops = GS_NEW_ARRAY(p->a, as_op, cap ? cap : 1);
    p->edges = GS_NEW_ARRAY(p->a, as_edge, cap * 3 + 1);
    if (!p->ops || !p->edges) return false;
    for (int k = 0; k < b->n_comps; k++) {
        const gs_computation *c = b->comps[k];
        double mult = b->mult[k];
        for (int i = 0; i < c->n_instrs; i++) {
            const gs_instr *in = c->instrs[i];
            if (is_alias(in) || is_source(in)) continue;
            int me = b->base[k][i];
            if (elementwise(in) && follow_operand(in) >= 0) {
                int v = b->leaf_value[me];
                if (v < 0) continue;
                as_value *x = &p->values[v];
                for (int q = 0; q < x->n_cand; q++)
                    x->node_cost[q] += compute_s(p, in, (double)x->cand[q].shards) * mult;
                for (int j = 0; j < in->n_operands; j++) { /* the other operands reshard to it */
                    const gs_instr *o = in->operands[j];
                    if (!gs_shape_is_array(o->shape) || !gs_shape_same_dims(o->shape, in->shape))
                        continue;
                    int u = b->leaf_value[leaf0(b, o)];
                    if (u < 0 || u == v) continue;
                    p->edges[p->n_edges++] =
                        (as_edge){u, v, (double)gs_shape_bytes(o->shape), mult, b->seq++};
                }
                continue;
            }
            if (!add_op(b, in, mult)) return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------ memory points */

static bool fused_away(const gs_computation *c, const gs_instr *in) {
    if (!elementwise(in) || in->is_root) return false;
    bool used = false;
    for (int i = in->id + 1; i < c->n_instrs; i++)
        for (int j = 0; j < c->instrs[i]->n_operands; j++)
            if (c->instrs[i]->operands[j] == in) {
                if (!elementwise(c->instrs[i])) return false;
                used = true;
            }
    return used;
}

enum { MAX_POINTS = 64, MAX_NEST = 8 };

/* The values live around a point: each once, with its bytes (whole). */
typedef struct live_set {
    int n;
    int *value;
    double *bytes;
} live_set;

static void add_point(as_problem *p, const as_point *pt) {
    if (p->n_points < MAX_POINTS) {
        p->points[p->n_points++] = *pt;
        return;
    }
    int lo = 0; /* replace the smallest when this one is larger */
    for (int q = 1; q < p->n_points; q++)
        if (p->points[q].whole < p->points[lo].whole) lo = q;
    if (p->points[lo].whole < pt->whole) p->points[lo] = *pt;
}

/* The points of computation c's schedule (comp index k): at each, the values its instructions
 * have made and not yet last used, with `outer` (what the callers hold live meanwhile; a value
 * counted once). A while body's, a call's and a branch's points are their own, with what is
 * live in c at the call added: the memory inside a loop is what a scanned layer's temporaries
 * take, on top of the state and of everything the entry holds across the loop. */
static bool comp_points(builder *b, int k, const live_set *outer, int depth) {
    as_problem *p = b->p;
    const gs_computation *c = b->comps[k];
    int n = c->n_instrs;
    int *last = GS_NEW_ARRAY(p->a, int, n ? n : 1);
    double *acc = GS_NEW_ARRAY(p->a, double, p->n_values ? p->n_values : 1);
    int *vals = GS_NEW_ARRAY(p->a, int, p->n_values ? p->n_values : 1);
    if (!last || !acc || !vals) return false;
    for (int i = 0; i < n; i++) last[i] = c->instrs[i]->is_root ? n - 1 : i;
    for (int i = n - 1; i >= 0; i--) { /* through tuples and get-tuple-elements */
        const gs_instr *in = c->instrs[i];
        for (int j = 0; j < in->n_operands; j++) {
            const gs_instr *o = in->operands[j];
            if (o->parent != c) continue;
            if (last[i] > last[o->id]) last[o->id] = last[i];
        }
    }
    for (int i = 0; i < n; i++)
        if (c->instrs[i]->op == GS_OP_PARAMETER) last[i] = n - 1;
    for (int v = 0; v < p->n_values; v++) acc[v] = 0;
    for (int t = 0; t < n; t++) {
        int nv = 0;
        double whole = 0;
        for (int q = 0; q < outer->n; q++) {
            int v = outer->value[q];
            if (acc[v] == 0) vals[nv++] = v;
            acc[v] += outer->bytes[q];
            whole += outer->bytes[q];
        }
        int n_outer = nv;
        for (int i = 0; i <= t; i++) {
            const gs_instr *in = c->instrs[i];
            if (last[i] < t || in->op == GS_OP_TUPLE || in->op == GS_OP_GET_TUPLE_ELEMENT ||
                fused_away(c, in))
                continue;
            int me = b->base[k][i], nl = n_leaves_of(in->shape);
            for (int l = 0; l < nl; l++) {
                int v = b->leaf_value[me + l];
                if (v < 0) continue;
                bool held = false; /* the callers' value (a loop's state): counted there */
                for (int q = 0; q < n_outer && !held; q++) held = vals[q] == v;
                if (held) continue;
                if (acc[v] == 0) vals[nv++] = v;
                double by = (double)gs_shape_bytes(b->leaf_shape[me + l]);
                acc[v] += by;
                whole += by;
            }
        }
        as_point pt = {nv, GS_NEW_ARRAY(p->a, int, nv ? nv : 1),
                       GS_NEW_ARRAY(p->a, double, nv ? nv : 1), whole, c->instrs[t]};
        if (!pt.value || !pt.bytes) return false;
        for (int q = 0; q < nv; q++) {
            pt.value[q] = vals[q];
            pt.bytes[q] = acc[vals[q]];
            acc[vals[q]] = 0;
        }
        add_point(p, &pt);
        /* what this instruction calls runs here, with all of pt live around it */
        const gs_instr *in = c->instrs[t];
        gs_computation *called[64];
        int nc = 0;
        if (in->op == GS_OP_WHILE) {
            called[nc++] = gs_instr_comp(in, GS_ATTR_BODY);
        } else if (in->op == GS_OP_CALL || in->op == GS_OP_CONDITIONAL) {
            nc = gs_instr_called(in, called, 64);
            if (nc > 64) nc = 64;
        }
        if (depth >= MAX_NEST) nc = 0;
        live_set around = {pt.n, pt.value, pt.bytes};
        for (int j = 0; j < nc; j++) {
            int kc = called[j] ? comp_of(b, called[j]) : -1;
            if (kc > 0 && !comp_points(b, kc, &around, depth + 1)) return false;
        }
    }
    return true;
}

static bool points(builder *b) {
    as_problem *p = b->p;
    p->points = GS_NEW_ARRAY(p->a, as_point, MAX_POINTS);
    if (!p->points) return false;
    live_set none = {0, NULL, NULL};
    return comp_points(b, 0, &none, 0);
}

/* ------------------------------------------------------------------ writing the choice */

static bool set_num_partitions(gs_module *m, int64_t n) {
    m->num_partitions = n;
    char *text = gs_arena_printf(&m->arena, "%lld", (long long)n);
    if (!text) return false;
    for (int i = 0; i < m->n_attrs; i++)
        if (strcmp(m->attrs[i].name, "num_partitions") == 0) {
            m->attrs[i].text = text;
            return true;
        }
    gs_module_attr *a = GS_NEW_ARRAY(&m->arena, gs_module_attr, m->n_attrs + 1);
    if (!a) return false;
    if (m->n_attrs) memcpy(a, m->attrs, sizeof *a * (size_t)m->n_attrs);
    a[m->n_attrs].name = "num_partitions";
    a[m->n_attrs].text = text;
    m->attrs = a;
    m->n_attrs++;
    return true;
}

static gs_status apply(builder *b) {
    as_problem *p = b->p;
    gs_arena *ma = &b->m->arena; /* what the module keeps lives in its arena */
    gs_sharding **chosen = GS_NEW_ARRAY(p->a, gs_sharding *, p->n_values ? p->n_values : 1);
    gs_sharding *repl = gs_sharding_replicated(ma);
    if (!chosen || !repl) return gs_error(b->d, gs_span_none(), "out of memory");
    for (int v = 0; v < p->n_values; v++) {
        const as_value *x = &p->values[v];
        chosen[v] = cand_sharding(p, ma, x, x->choice, b->d);
        if (!chosen[v]) return GS_ERR;
    }
    for (int k = 0; k < b->n_comps; k++) {
        const gs_computation *c = b->comps[k];
        for (int i = 0; i < c->n_instrs; i++) {
            gs_instr *in = c->instrs[i];
            int me = b->base[k][i], nl = n_leaves_of(in->shape);
            if (!nl) continue;
            gs_sharding **leaves = GS_NEW_ARRAY(p->a, gs_sharding *, nl);
            if (!leaves) return gs_error(b->d, gs_span_none(), "out of memory");
            for (int l = 0; l < nl; l++) {
                int v = b->leaf_value[me + l];
                leaves[l] = v >= 0 ? chosen[v] : repl;
            }
            gs_sharding *s = gs_shape_is_tuple(in->shape) ? gs_sharding_tuple(ma, nl, leaves)
                                                           : leaves[0];
            if (!s || gs_instr_set_sharding(b->m, in, s) != GS_OK)
                return gs_error(b->d, gs_span_none(), "out of memory");
        }
    }
    return set_num_partitions(b->m, p->mesh->n_devices) ? GS_OK
                                                       : gs_error(b->d, gs_span_none(),
                                                                  "out of memory");
}

/* ------------------------------------------------------------------ the pass */

/* One search over m: its own shardings pinned or not; the choice written into m when its
 * estimate is below `beat` (GS_OK and r->objective >= beat otherwise: nothing written). */
static gs_status search(gs_module *m, const gs_autoshard_options *o, bool pin, double beat,
                        gs_autoshard_result *r, gs_diags *d) {
    memset(r, 0, sizeof *r);
    gs_arena a;
    gs_arena_init(&a);
    as_problem p = {.a = &a, .mesh = o->mesh, .mc = o->machine, .n_axes = o->mesh->n_axes};
    p.memory_limit = o->memory_limit > 0 ? o->memory_limit : o->machine->mem_capacity;
    builder b = {.p = &p, .m = m, .d = d};
    gs_status st = GS_ERR;
    bool ok = collect(&b) && classes(&b) && values(&b);
    if (!ok) {
        gs_error(d, gs_span_none(), "out of memory");
        goto done;
    }
    if (pin && pins(&b, r) != GS_OK) goto done;
    if (!ops(&b) || !points(&b)) {
        gs_error(d, gs_span_none(), "out of memory");
        goto done;
    }
    for (int k = 0; k < b.n_comps; k++)
        for (int i = 0; i < b.comps[k]->n_instrs; i++) {
            const gs_instr *in = b.comps[k]->instrs[i];
            if (spmd_only(in)) {
                gs_error(d, in->span,
                         "%%%s: autoshard does not choose shardings for a program that "
                         "already is SPMD ('%s' differs by device, talks to the others or "
                         "marks a manual region)",
                         in->name, in->op == GS_OP_CUSTOM_CALL
                                       ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET)
                                       : gs_op_name(in->op));
                goto done;
            }
        }
    /* a mesh axis larger than every dimension of the program can split nothing: an error,
     * not a silent replicate-everything (an axis that only divides no dimension evenly
     * replicates, with the warning below) */
    for (int ax = 0; ax < p.n_axes; ax++) {
        bool used = false;
        for (int v = 0; v < p.n_values && !used; v++)
            for (int c = 0; c < p.values[v].n_cand && !used; c++)
                used = p.values[v].cand[c].dim[ax] >= 0;
        int64_t largest = 0;
        for (int v = 0; v < p.n_values && !used; v++)
            for (int i = 0; i < p.values[v].rank; i++)
                if (p.values[v].dims[i] > largest) largest = p.values[v].dims[i];
        if (!used && largest > 0 && o->mesh->sizes[ax] > largest) {
            gs_error(d, gs_span_none(),
                     "mesh axis '%s' has %lld devices, more than any dimension of the program "
                     "has elements (the largest has %lld): it can split nothing; use a "
                     "smaller mesh",
                     o->mesh->names[ax], (long long)o->mesh->sizes[ax], (long long)largest);
            goto done;
        }
    }
    r->n_values = p.n_values;
    r->n_ops = p.n_ops;
    /* the estimate with everything replicated, for the report */
    for (int v = 0; v < p.n_values; v++) p.values[v].choice = 0;
    for (int k = 0; k < p.n_ops; k++) p.ops[k].choice = p.ops[k].whole;
    r->replicated = as_objective(&p);
    if (as_solve(&p, o, r, d) != GS_OK) goto done;
    if (r->objective < beat) {
        bool all_whole = p.n_values > 0;
        for (int v = 0; v < p.n_values && all_whole; v++) all_whole = p.values[v].choice == 0;
        if (all_whole)
            gs_warning(d, gs_span_none(),
                       "autoshard replicated every value: on %s, no split predicts faster "
                       "(%.3g s per step replicated)",
                       o->machine->name, r->objective);
        st = apply(&b);
    } else {
        st = GS_OK;
    }
done:
    gs_strmap_free(&b.comp_index);
    gs_arena_free(&a);
    return st;
}

static bool has_shardings(const gs_module *m) {
    for (int k = 0; k < m->n_comps; k++)
        for (int i = 0; i < m->comps[k]->n_instrs; i++)
            if (gs_instr_get_sharding(m->comps[k]->instrs[i])) return true;
    return false;
}

gs_status gs_autoshard(gs_module *m, const gs_autoshard_options *o, gs_autoshard_result *r,
                       gs_diags *d) {
    memset(r, 0, sizeof *r);
    if (!o || !o->mesh || !o->machine || !m || !m->entry)
        return gs_error(d, gs_span_none(), "autoshard needs a module, a mesh and a machine");
    if (o->mesh->n_axes < 1 || o->mesh->n_axes > AS_MAX_AXES)
        return gs_error(d, gs_span_none(), "autoshard needs a mesh of 1 to %d axes",
                        AS_MAX_AXES);
    if (gs_module_verify(m, d) != GS_OK) return GS_ERR; /* what the search reads is sound */
    if (m->replica_count > 1)
        return gs_error(d, gs_span_none(),
                        "autoshard does not choose shardings for a module that also runs as "
                        "replicas (replica_count=%lld)",
                        (long long)m->replica_count);
    if (!o->ignore_shardings) return search(m, o, true, INFINITY, r, d);
    /* The input's own shardings pinned (the rest chosen) are a choice too: the result never
     * predicts slower than they do. (The search pinned may reshard a result once for all its
     * users, which the free one cannot express.) */
    gs_autoshard_result own;
    gs_diags quiet = {0};
    bool own_ok = has_shardings(m) && search(m, o, true, -INFINITY, &own, &quiet) == GS_OK;
    gs_diags_free(&quiet);
    double beat = own_ok ? own.objective * (1 - 1e-9) : INFINITY;
    gs_status st = search(m, o, false, beat, r, d);
    if (st != GS_OK || r->objective < beat) return st;
    st = search(m, o, true, INFINITY, r, d);
    r->kept_input = true;
    return st;
}
