/*
 * driver.c — the pass (gs_propagate): set-up, the fixed point per aggressiveness level, shard_as
 * alignment, and XLA's post-processing of entry parameters and outputs.
 *
 * Levels 0..3 (XLA's aggressiveness) each run to a fixed point. One sweep visits every
 * computation in module order and, in each, (1) lets shard-group members take each other's
 * shardings, (2) infers forward in post order, (3) infers backward in reverse post order. An
 * instruction is not re-inferred from the same side until a neighbour changes (XLA's
 * already_inferred caches, kept as node flags). Level 0 passes only through ops that lose
 * nothing (elementwise, transpose, reshape, tuples, while, dynamic-slice, concatenate, copies);
 * broadcasts wait for level 2 backward and level 3 forward; partial shardings merge only in SPMD
 * mode above level 0. A change to a while, conditional or call (or to a parameter or root of
 * what they call) is copied to its related instructions at once.
 *
 * After the levels: shard_as groups adopt one common sharding, shard barriers hand theirs to
 * their operand, one more level-3 fixed point runs; cse_prevention_only keeps only the new
 * shardings of scalar broadcasts (marked); entry outputs and parameters not open to propagation
 * get their annotations back, and propagated ones that do not divide their shape evenly become
 * replicated. Shardings are written to the instructions only at the end.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ state changes */

void gs_prop_set(gs_prop_ctx *c, gs_instr *in, const gs_sharding *s, gs_prop_dir dir,
                 const gs_instr *from, const char *rule) {
    gs_prop_node *n = GS_PROP_NODE(in);
    if (s && c->a != c->perm) {
        /* Inferred in the step's temporary arena: keep a copy. */
        gs_sharding *p = gs_prop_persist(c->perm, s);
        if (!p) {
            c->oom = true;
            return;
        }
        s = p;
    }
    n->sh = s;
    if (!c->record || !s) return;
    if (n->n_steps == n->cap_steps) {
        int cap = n->cap_steps ? n->cap_steps * 2 : 2;
        gs_prop_step *v = GS_NEW_ARRAY(&c->scratch, gs_prop_step, cap);
        if (!v) {
            c->oom = true;
            return;
        }
        if (n->n_steps) memcpy(v, n->steps, sizeof *v * (size_t)n->n_steps);
        n->steps = v;
        n->cap_steps = cap;
    }
    gs_prop_step *st = &n->steps[n->n_steps++];
    st->sharding = s;
    st->from = from;
    st->from_step = from && from->aux ? GS_PROP_NODE(from)->n_steps - 1 : -1;
    st->rule = rule;
    st->dir = (unsigned char)dir;
    st->level = (signed char)c->level;
}

bool gs_prop_improve(gs_prop_ctx *c, gs_instr *in, const gs_sharding *s, bool may_combine,
                     bool aggressive, gs_prop_dir dir, const gs_instr *from, const char *rule) {
    const gs_sharding *r =
        gs_prop_improved(c, s, GS_PROP_SHARDING(in), in->shape, may_combine, aggressive);
    if (!r) return false;
    gs_prop_set(c, in, r, dir, from, rule);
    return true;
}

bool gs_prop_improve_sub(gs_prop_ctx *c, gs_instr *in, const gs_sharding *s, int index,
                         bool may_combine, bool aggressive, gs_prop_dir dir, const gs_instr *from,
                         const char *rule) {
    if (!s) return false;
    if (in->shape->type != GS_TUPLE)
        return gs_prop_improve(c, in, s, may_combine, aggressive, dir, from, rule);
    if (index < 0 || index >= in->shape->n_tuple) return false;
    const gs_sharding *cur = GS_PROP_SHARDING(in);
    const gs_sharding *sub = cur ? gs_prop_sub(c, cur, in->shape, index) : NULL;
    const gs_sharding *r = gs_prop_improved(c, s, sub, in->shape->tuple[index], may_combine,
                                            aggressive);
    if (!r) return false;
    const gs_sharding *t = gs_prop_with_sub(c, cur, in->shape, index, r);
    if (!t) return false;
    gs_prop_set(c, in, t, dir, from, rule);
    return true;
}

/* ------------------------------------------------------------------ caches */

/* XLA's clear_cache: neighbours of `hlo` (users of `for_users`) may infer again. */
static void clear_cache(gs_prop_ctx *c, gs_instr *hlo, gs_instr *for_users) {
    for (int i = 0; i < hlo->n_operands; i++)
        GS_PROP_NODE(gs_prop_operand(hlo, i))->inf_users = false;
    if (!for_users) for_users = hlo;
    gs_prop_node *fn = GS_PROP_NODE(for_users);
    for (int i = 0; i < fn->n_users; i++) {
        gs_instr *u = fn->users[i];
        GS_PROP_NODE(u)->inf_ops = false;
        gs_computation *called[64];
        int k = gs_instr_called(u, called, 64);
        for (int j = 0; j < k; j++)
            for (int p = 0; p < called[j]->n_params; p++)
                GS_PROP_NODE(called[j]->params[p])->inf_ops = false;
    }
    int g = GS_PROP_NODE(hlo)->group;
    if (g >= 0)
        for (int i = 0; i < c->groups[g].n; i++)
            if (c->groups[g].members[i] != hlo)
                GS_PROP_NODE(c->groups[g].members[i])->inf_group = false;
}

/* A growable list of instructions changed by computation propagation. */
typedef struct ilist {
    gs_instr **v; /* entries (malloc) */
    int n;        /* entries in use */
    int cap;      /* capacity */
    bool failed;  /* an allocation failed */
} ilist;

static void ilist_push(ilist *l, gs_instr *in) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        gs_instr **v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) {
            l->failed = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = in;
}

static void comp_prop(gs_prop_ctx *c, gs_instr *in, ilist *changed, int depth);

/* XLA's propagate_to_instruction: when `in` is related to `search`, copies its sharding to
 * the other related instructions that are not annotated. */
static void prop_to(gs_prop_ctx *c, gs_instr *in, gs_instr *search, ilist *changed, int depth) {
    gs_instr *rel[66];
    int nr = gs_prop_related(c, search, rel, 66);
    bool member = false;
    for (int i = 0; i < nr; i++) member = member || rel[i] == in;
    if (!member) return;
    const gs_sharding *s = GS_PROP_SHARDING(in);
    if (!s) return;
    for (int i = 0; i < nr; i++) {
        gs_instr *r = rel[i];
        gs_prop_node *rn = GS_PROP_NODE(r);
        if (rn->provided || (rn->sh && gs_sharding_equal(rn->sh, s))) continue;
        gs_prop_set(c, r, s, GS_PROP_DIR_CALL, in,
                    search->op == GS_OP_WHILE         ? "while loop"
                    : search->op == GS_OP_CONDITIONAL ? "conditional"
                                                      : "call");
        ilist_push(changed, r);
        comp_prop(c, r, changed, depth + 1);
    }
}

/* XLA MaybeComputationPropagation. */
static void comp_prop(gs_prop_ctx *c, gs_instr *in, ilist *changed, int depth) {
    if (depth > 256) return;
    if (in->op == GS_OP_CONDITIONAL || in->op == GS_OP_WHILE || in->op == GS_OP_CALL)
        prop_to(c, in, in, changed, depth);
    if (in->op == GS_OP_PARAMETER || in->parent->root == in) {
        gs_instr *caller = GS_PROP_NODE(in)->caller;
        if (caller) {
            prop_to(c, in, caller, changed, depth);
            if (in->op == GS_OP_PARAMETER &&
                (caller->op == GS_OP_CONDITIONAL || caller->op == GS_OP_CALL))
                prop_to(c, in, in, changed, depth);
        }
    }
}

/* After `in` changed: computation propagation and cache clearing. */
static void after_change(gs_prop_ctx *c, gs_instr *in) {
    ilist l = {0};
    comp_prop(c, in, &l, 0);
    clear_cache(c, in, NULL);
    for (int i = 0; i < l.n; i++) clear_cache(c, l.v[i], NULL);
    if (l.failed) c->oom = true;
    free(l.v);
}

/* ------------------------------------------------------------------ the fixed point */

/* XLA RunToFixPoint at one aggressiveness level. */
static void run_level(gs_prop_ctx *c, int level, bool groups) {
    c->level = level;
    c->a = &c->tmp;
    for (int i = 0; i < c->n_nodes; i++) {
        c->nodes[i].inf_ops = false;
        c->nodes[i].inf_users = false;
        c->nodes[i].inf_group = false;
    }
    bool may_merge = c->is_spmd && level > 0;
    bool changed_last = true;
    /* A fixed point is reached since shardings only improve; the bound guards against rules
     * that would oscillate. */
    int sweeps = 0, max_sweeps = 64 + c->n_nodes / 8;
    while (changed_last && !c->oom && sweeps++ < max_sweeps) {
        changed_last = false;
        for (int ci = 0; ci < c->m->n_comps; ci++) {
            gs_instr **order = c->orders[ci];
            int n = c->n_order[ci];
            if (groups) {
                for (int k = 0; k < n; k++) {
                    gs_instr *in = order[k];
                    gs_prop_node *nd = GS_PROP_NODE(in);
                    if (nd->inf_group || nd->group < 0) continue;
                    const gs_prop_group *g = &c->groups[nd->group];
                    if (nd->provided) {
                        if (!may_merge) continue;
                        if (nd->has_unspec && gs_prop_unspec_from_group(c, in, g)) {
                            clear_cache(c, in, NULL);
                            nd->inf_group = true;
                            changed_last = true;
                        }
                        continue;
                    }
                    nd->inf_group = true;
                    if (gs_prop_from_group(c, in, level, g)) {
                        after_change(c, in);
                        changed_last = true;
                    }
                    if (c->tmp.head) gs_arena_free(&c->tmp);
                }
            }
            for (int k = 0; k < n; k++) {
                gs_instr *in = order[k];
                gs_prop_node *nd = GS_PROP_NODE(in);
                if (nd->inf_ops) continue;
                if (nd->provided) {
                    if (!may_merge) continue;
                    gs_instr *conv = NULL;
                    if (nd->has_unspec && gs_prop_unspec_from_operand(c, in, &conv)) {
                        clear_cache(c, in, conv);
                        nd->inf_ops = true;
                        changed_last = true;
                    }
                    continue;
                }
                nd->inf_ops = true;
                if (gs_prop_forward(c, in, level)) {
                    after_change(c, in);
                    changed_last = true;
                }
                if (c->tmp.head) gs_arena_free(&c->tmp);
            }
            for (int k = n - 1; k >= 0; k--) {
                gs_instr *in = order[k];
                gs_prop_node *nd = GS_PROP_NODE(in);
                if ((gs_prop_is_cc(in, "SPMDFullToShardShape") ||
                     gs_prop_is_cc(in, "SPMDShardToFullShape")) &&
                    !nd->inf_users && in->n_operands > 0)
                    GS_PROP_NODE(gs_prop_operand(in, 0))->inf_users = false;
                if (nd->inf_users) continue;
                if (nd->provided) {
                    if (!may_merge) continue;
                    gs_instr *conv = NULL;
                    if (nd->has_unspec && gs_prop_unspec_from_users(c, in, level, &conv)) {
                        clear_cache(c, in, conv);
                        nd->inf_users = true;
                        if (conv) GS_PROP_NODE(conv)->inf_users = true;
                        changed_last = true;
                    }
                    continue;
                }
                nd->inf_users = true;
                if (gs_prop_backward(c, in, level)) {
                    after_change(c, in);
                    changed_last = true;
                }
                if (c->tmp.head) gs_arena_free(&c->tmp);
            }
        }
    }
    gs_arena_free(&c->tmp);
    c->a = c->perm;
    if (changed_last && !c->oom)
        gs_warning(c->d, gs_span_none(),
                   "sharding propagation stopped after %d sweeps at aggressiveness %d without "
                   "reaching a fixed point",
                   max_sweeps, level);
}

/* ------------------------------------------------------------------ post-processing */

/* shard_as groups adopt one common sharding (XLA's alignment after the levels). */
static void align_groups(gs_prop_ctx *c) {
    c->level = -1;
    for (int gi = 0; gi < c->n_groups; gi++) {
        gs_prop_group *g = &c->groups[gi];
        if (!g->as) continue;
        const gs_sharding **v = malloc(sizeof *v * (size_t)(g->n ? g->n : 1));
        if (!v) {
            c->oom = true;
            return;
        }
        int k = 0;
        const gs_sharding *def = NULL;
        gs_instr *def_from = NULL;
        for (int i = 0; i < g->n; i++) {
            gs_instr *m = g->members[i];
            if (!GS_PROP_SHARDING(m)) continue;
            v[k++] = GS_PROP_SHARDING(m);
            if (!gs_prop_is_cc(m, "ShardBarrierFrom") && (!def || gs_prop_replicated(def))) {
                def = GS_PROP_SHARDING(m);
                def_from = m;
            }
        }
        if (!def) {
            gs_sharding *r = gs_sharding_replicated(c->a);
            if (!r) {
                free(v);
                c->oom = true;
                return;
            }
            def = r;
        }
        const gs_sharding *common = k ? gs_prop_common(c, k, v, def) : def;
        free(v);
        if (!common) continue;
        for (int i = 0; i < g->n; i++) {
            gs_instr *m = g->members[i];
            if (gs_prop_is_cc(m, "ShardBarrierTo")) continue;
            if (GS_PROP_SHARDING(m) && gs_sharding_equal(GS_PROP_SHARDING(m), common)) continue;
            gs_prop_set(c, m, common, GS_PROP_DIR_GROUP, def_from, "shard_as alignment");
        }
    }
}

/* Shard barriers in a shard_as group hand their sharding to their operand. */
static void relay_barriers(gs_prop_ctx *c) {
    for (int i = 0; i < c->n_nodes; i++) {
        gs_prop_node *n = &c->nodes[i];
        gs_instr *in = n->in;
        if (!gs_prop_is_cc(in, "ShardBarrierFrom") || n->group < 0 || !c->groups[n->group].as ||
            !n->sh || in->n_operands < 1)
            continue;
        gs_instr *op = gs_prop_operand(in, 0);
        const gs_sharding *s = n->sh;
        if (GS_PROP_SHARDING(op)) {
            const gs_sharding *m =
                gs_prop_merge_compatible(c, GS_PROP_SHARDING(op), gs_prop_num_tiles(s), s);
            if (m) s = m;
        }
        if (!GS_PROP_SHARDING(op) || !gs_sharding_equal(GS_PROP_SHARDING(op), s))
            gs_prop_set(c, op, s, GS_PROP_DIR_GROUP, in, "shard barrier");
    }
}

/* cse_prevention_only: keep new shardings only on scalar broadcasts, marked. */
static void cse_post(gs_prop_ctx *c) {
    for (int i = 0; i < c->n_nodes; i++) {
        gs_prop_node *n = &c->nodes[i];
        if (!n->sh) continue;
        gs_instr *in = n->in;
        bool target = in->op == GS_OP_BROADCAST && in->n_operands == 1 &&
                      in->operands[0]->shape->type != GS_TUPLE &&
                      in->operands[0]->shape->rank == 0;
        if (target) {
            if (!n->orig_had) {
                const char *md = "op_name=\"_sharding_propagation_cse_prevention\"";
                gs_sharding *s = n->sh->kind == GS_SHARDING_TUPLE
                                     ? NULL
                                     : gs_sharding_with_metadata(c->a, n->sh, md);
                if (s) n->sh = s;
            }
            continue;
        }
        n->sh = n->orig_had ? n->orig : NULL;
    }
}

/* Whether an array leaf's tiles divide its dims. */
static bool leaf_evenly(const gs_shape *shape, const gs_sharding *s) {
    if (s->kind != GS_SHARDING_TILED || shape->type == GS_TUPLE) return true;
    for (int i = 0; i < shape->rank && i < s->data_rank; i++)
        if (shape->dims[i] % s->tiles.dims[i] != 0) return false;
    return true;
}

/* Walks the leaves of shape depth first against the leaves of tuple sharding s from *k. */
static bool tuple_evenly(const gs_shape *shape, const gs_sharding *s, int *k) {
    if (shape->type != GS_TUPLE) {
        bool ok = *k >= s->n_tuple || leaf_evenly(shape, s->tuple[*k]);
        (*k)++;
        return ok;
    }
    for (int i = 0; i < shape->n_tuple; i++)
        if (!tuple_evenly(shape->tuple[i], s, k)) return false;
    return true;
}

/* XLA's evenly_partitions: every tiled leaf divides its shape. */
static bool evenly(const gs_shape *shape, const gs_sharding *s) {
    if (!s) return true;
    if (s->kind == GS_SHARDING_TUPLE) {
        int k = 0;
        return shape->type != GS_TUPLE || tuple_evenly(shape, s, &k);
    }
    return leaf_evenly(shape, s);
}

/* Entry outputs and parameters: restore those closed to propagation, replicate uneven ones. */
static void fix_entry(gs_prop_ctx *c, const gs_sharding *saved_root,
                      const gs_sharding *const *saved_params) {
    gs_computation *e = c->m->entry;
    if (!e) return;
    c->level = -1;
    gs_instr *root = e->root;
    gs_prop_node *rn = GS_PROP_NODE(root);
    gs_sharding *rep = gs_sharding_replicated(c->a);
    if (!rep) {
        c->oom = true;
        return;
    }
    if (saved_root && saved_root->kind == GS_SHARDING_TUPLE &&
        saved_root->n_tuple == c->n_out_vec && rn->sh && rn->sh->kind == GS_SHARDING_TUPLE &&
        rn->sh->n_tuple == saved_root->n_tuple) {
        const gs_sharding *t = rn->sh;
        for (int i = 0; i < saved_root->n_tuple; i++) {
            if (c->out_vec[i] || saved_root->tuple[i]->kind == GS_SHARDING_UNKNOWN) continue;
            gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, t->n_tuple);
            if (!v) {
                c->oom = true;
                return;
            }
            memcpy(v, t->tuple, sizeof *v * (size_t)t->n_tuple);
            v[i] = saved_root->tuple[i];
            t = gs_sharding_tuple(c->a, t->n_tuple, v);
            if (!t) {
                c->oom = true;
                return;
            }
        }
        if (t != rn->sh) gs_prop_set(c, root, t, GS_PROP_DIR_FIXUP, NULL, "output annotation kept");
    }
    if (c->to_params) {
        if (c->n_par_vec == e->n_params) {
            for (int i = 0; i < e->n_params; i++) {
                if (c->par_vec[i]) continue;
                const gs_sharding *s = saved_params[i];
                if (s && s->kind == GS_SHARDING_UNKNOWN) s = NULL;
                gs_prop_set(c, e->params[i], s, GS_PROP_DIR_FIXUP, NULL,
                            "parameter annotation kept");
            }
        } else if (e->n_params == 1 && saved_params[0] && e->params[0]->shape->type == GS_TUPLE &&
                   e->params[0]->shape->n_tuple == c->n_par_vec) {
            gs_instr *p = e->params[0];
            const gs_sharding *t = GS_PROP_SHARDING(p);
            for (int i = 0; i < p->shape->n_tuple && t; i++) {
                const gs_sharding *saved = gs_prop_sub(c, saved_params[0], p->shape, i);
                if (c->par_vec[i] || !saved || saved->kind == GS_SHARDING_UNKNOWN) continue;
                t = gs_prop_with_sub(c, t, p->shape, i, saved);
            }
            if (t && t != GS_PROP_SHARDING(p))
                gs_prop_set(c, p, t, GS_PROP_DIR_FIXUP, NULL, "parameter annotation kept");
        }
    }
    if (c->to_output && rn->sh) {
        if (root->shape->type == GS_TUPLE && c->n_out_vec == root->shape->n_tuple) {
            const gs_sharding *t = rn->sh;
            for (int i = 0; i < root->shape->n_tuple && t; i++) {
                const gs_sharding *sub = gs_prop_sub(c, t, root->shape, i);
                if (c->out_vec[i] && !evenly(root->shape->tuple[i], sub))
                    t = gs_prop_with_sub(c, t, root->shape, i, rep);
            }
            if (t && t != rn->sh) gs_prop_set(c, root, t, GS_PROP_DIR_FIXUP, NULL, "uneven output");
        } else if (root->shape->type != GS_TUPLE && !evenly(root->shape, rn->sh)) {
            gs_prop_set(c, root, rep, GS_PROP_DIR_FIXUP, NULL, "uneven output");
        }
    }
    if (c->to_params) {
        if (c->n_par_vec == e->n_params) {
            for (int i = 0; i < e->n_params; i++) {
                gs_instr *p = e->params[i];
                if (GS_PROP_SHARDING(p) && c->par_vec[i] && !evenly(p->shape, GS_PROP_SHARDING(p)))
                    gs_prop_set(c, p, rep, GS_PROP_DIR_FIXUP, NULL, "uneven parameter");
            }
        } else if (e->n_params == 1 && e->params[0]->shape->type == GS_TUPLE &&
                   GS_PROP_SHARDING(e->params[0]) && e->params[0]->shape->n_tuple == c->n_par_vec) {
            gs_instr *p = e->params[0];
            const gs_sharding *t = GS_PROP_SHARDING(p);
            for (int i = 0; i < p->shape->n_tuple && t; i++) {
                const gs_sharding *sub = gs_prop_sub(c, t, p->shape, i);
                if (c->par_vec[i] && !evenly(p->shape->tuple[i], sub))
                    t = gs_prop_with_sub(c, t, p->shape, i, rep);
            }
            if (t && t != GS_PROP_SHARDING(p))
                gs_prop_set(c, p, t, GS_PROP_DIR_FIXUP, NULL, "uneven parameter");
        }
    }
}

/* Shardings without metadata (XLA's default, propagate_metadata off). */
static const gs_sharding *strip_metadata(gs_prop_ctx *c, const gs_sharding *s) {
    if (!s) return s;
    if (s->kind == GS_SHARDING_TUPLE) {
        bool any = false;
        for (int i = 0; i < s->n_tuple; i++) any = any || s->tuple[i]->metadata;
        if (!any) return s;
        gs_sharding **v = GS_NEW_ARRAY(c->a, gs_sharding *, s->n_tuple);
        if (!v) return NULL;
        for (int i = 0; i < s->n_tuple; i++) {
            v[i] = s->tuple[i]->metadata ? gs_sharding_with_metadata(c->a, s->tuple[i], NULL)
                                         : s->tuple[i];
            if (!v[i]) return NULL;
        }
        return gs_sharding_tuple(c->a, s->n_tuple, v);
    }
    return s->metadata ? gs_sharding_with_metadata(c->a, s, NULL) : s;
}

/* ------------------------------------------------------------------ options */

/* Parses a header attribute `{true,false}` / `true` into a malloc'd vector *v; returns the
 * count, 0 when absent or malformed (*v NULL), -1 on allocation failure. */
static int header_bools(const gs_module *m, const char *name, bool **v) {
    *v = NULL;
    for (int i = 0; i < m->n_attrs; i++) {
        if (strcmp(m->attrs[i].name, name) != 0) continue;
        const char *t = m->attrs[i].text;
        int cap = 1;
        for (const char *p = t; *p; p++) cap += *p == ',';
        bool *out = malloc(sizeof *out * (size_t)cap);
        if (!out) return -1;
        int n = 0;
        const char *p = t;
        while (*p && n < cap) {
            while (*p == '{' || *p == ' ' || *p == ',' || *p == '}') p++;
            if (strncmp(p, "true", 4) == 0) {
                out[n++] = true;
                p += 4;
            } else if (strncmp(p, "false", 5) == 0) {
                out[n++] = false;
                p += 5;
            } else if (*p) {
                free(out);
                return 0;
            }
        }
        *v = out;
        return n;
    }
    return 0;
}

/* ------------------------------------------------------------------ the pass */

struct gs_propagate_info {
    gs_prop_ctx ctx;     /* the pass's context (nodes, provenance), kept for explain */
    gs_strmap by_name;   /* instruction name -> node */
    gs_sdy_explain *sdy; /* a Shardy propagation's record instead (ctx unused), or NULL */
};

gs_propagate_info *gs_prop_info_from_sdy(gs_sdy_explain *x) {
    gs_propagate_info *pi = calloc(1, sizeof *pi);
    if (!pi) {
        sdy_explain_free(x);
        return NULL;
    }
    pi->sdy = x;
    return pi;
}

/* Runs the pass with context c already zeroed but for the options. */
static gs_status run_pass(gs_prop_ctx *c) {
    gs_module *m = c->m;
    if (gs_prop_setup(c) != GS_OK) return GS_ERR;
    c->level = -1;
    /* Annotations saved for the entry's outputs and parameters. */
    const gs_sharding *saved_root = NULL;
    const gs_sharding **saved_params = NULL;
    if (m->entry) {
        saved_params = GS_NEW_ARRAY(&c->scratch, const gs_sharding *,
                                    m->entry->n_params ? m->entry->n_params : 1);
        if (!saved_params) return GS_ERR;
        for (int i = 0; i < m->entry->n_params; i++) {
            const gs_prop_node *n = GS_PROP_NODE(m->entry->params[i]);
            saved_params[i] = n->orig_had ? gs_instr_get_sharding(n->in) : NULL;
            if (n->sh && !n->orig_had) saved_params[i] = n->sh;
        }
        const gs_prop_node *rn = GS_PROP_NODE(m->entry->root);
        saved_root = rn->orig_had ? gs_instr_get_sharding(rn->in) : NULL;
    }
    for (int i = 0; i < c->n_nodes; i++) {
        const gs_sharding *s = strip_metadata(c, c->nodes[i].sh);
        if (c->nodes[i].sh && !s) return GS_ERR;
        c->nodes[i].sh = s;
    }
    for (int level = 0; level < 4 && !c->oom; level++) run_level(c, level, true);
    align_groups(c);
    relay_barriers(c);
    if (!c->oom) run_level(c, 3, true);
    relay_barriers(c);
    c->level = -1;
    if (c->cse_only) cse_post(c);
    fix_entry(c, saved_root, saved_params);
    if (c->oom) return GS_ERR;
    /* Write the shardings back. */
    for (int i = 0; i < c->n_nodes; i++) {
        gs_prop_node *n = &c->nodes[i];
        const gs_sharding *s = n->alias ? GS_PROP_SHARDING(gs_prop_operand(n->in, 0)) : n->sh;
        const gs_sharding *old = gs_instr_get_sharding(n->in);
        if (s == old) continue;
        if (gs_instr_set_sharding(m, n->in, s) != GS_OK) return GS_ERR;
    }
    return GS_OK;
}

gs_status gs_propagate_ex(gs_module *m, const gs_propagate_options *opts,
                          gs_propagate_info **info, gs_diags *d) {
    if (info) *info = NULL;
    gs_propagate_options defaults;
    memset(&defaults, 0, sizeof defaults);
    if (!opts) opts = &defaults;
    /* One call site per computation run as a program, as XLA flattens the call graph before
     * SPMD partitioning: each call site's shardings then get their own copy to live on. */
    if (opts->is_spmd && gs_module_flatten_calls(m, d) != GS_OK) return GS_ERR;
    gs_propagate_info *pi = calloc(1, sizeof *pi);
    if (!pi) return gs_error(d, gs_span_none(), "out of memory");
    gs_prop_ctx *c = &pi->ctx;
    gs_arena_init(&c->scratch);
    c->m = m;
    c->a = &m->arena;
    c->perm = &m->arena;
    gs_arena_init(&c->tmp);
    c->d = d;
    c->is_spmd = opts->is_spmd;
    c->cse_only = opts->cse_prevention_only;
    c->record = opts->record_provenance || info != NULL;
    c->level = -1;
    bool *hdr_out = NULL, *hdr_par = NULL;
    gs_status st = GS_OK;
    c->n_out_vec = opts->n_to_output;
    c->out_vec = opts->to_output;
    if (c->n_out_vec == 0) {
        c->n_out_vec = header_bools(m, "allow_spmd_sharding_propagation_to_output", &hdr_out);
        c->out_vec = hdr_out;
    }
    c->n_par_vec = opts->n_to_parameters;
    c->par_vec = opts->to_parameters;
    if (c->n_par_vec == 0) {
        c->n_par_vec = header_bools(m, "allow_spmd_sharding_propagation_to_parameters", &hdr_par);
        c->par_vec = hdr_par;
    }
    bool *allowed = NULL;
    if (c->n_par_vec > 0 && m->entry && opts->pinned_params &&
        opts->n_pinned_params == m->entry->n_params &&
        (c->n_par_vec == 1 || c->n_par_vec == m->entry->n_params)) {
        /* Pinned parameters: not allowed, whatever the vector says. */
        int np = m->entry->n_params;
        allowed = malloc(sizeof *allowed * (size_t)(np ? np : 1));
        if (!allowed) {
            c->n_par_vec = -1;
        } else {
            for (int i = 0; i < np; i++)
                allowed[i] = c->par_vec[c->n_par_vec == 1 ? 0 : i] && !opts->pinned_params[i];
            c->n_par_vec = np;
            c->par_vec = allowed;
        }
    }
    if (c->n_out_vec < 0 || c->n_par_vec < 0) {
        st = gs_error(d, gs_span_none(), "out of memory");
        c->n_out_vec = c->n_par_vec = 0;
    }
    for (int i = 0; i < c->n_out_vec; i++) c->to_output = c->to_output || c->out_vec[i];
    for (int i = 0; i < c->n_par_vec; i++) c->to_params = c->to_params || c->par_vec[i];
    if (st == GS_OK && m->entry && c->to_params) {
        int n = c->n_par_vec, np = m->entry->n_params;
        bool tuple_ok = np == 1 && m->entry->params[0]->shape->type == GS_TUPLE &&
                        m->entry->params[0]->shape->n_tuple == n;
        if (n != 1 && n != np && !tuple_ok)
            st = gs_error(d, m->entry->span,
                          "--propagate-to-parameters has %d values but the entry computation has "
                          "%d parameters",
                          n, np);
    }
    if (st == GS_OK && m->entry && c->to_output && c->n_out_vec != 1) {
        const gs_shape *rs = m->entry->root->shape;
        if (rs->type != GS_TUPLE || rs->n_tuple != c->n_out_vec)
            st = gs_error(d, m->entry->root->span,
                          "--propagate-to-output has %d values but the entry root has %d "
                          "outputs",
                          c->n_out_vec, rs->type == GS_TUPLE ? rs->n_tuple : 1);
    }
    if (st == GS_OK) {
        int before = d ? d->n_errors : 0;
        st = run_pass(c);
        if (st != GS_OK && (!d || d->n_errors == before))
            gs_error(d, gs_span_none(), "out of memory during sharding propagation");
    }
    /* The options' vectors may not outlive the call. */
    c->out_vec = NULL;
    c->par_vec = NULL;
    free(hdr_out);
    free(hdr_par);
    free(allowed);
    c->n_out_vec = c->n_par_vec = 0;
    for (int i = 0; i < c->n_nodes; i++) c->nodes[i].in->aux = NULL;
    if (st == GS_OK && info) {
        for (int i = 0; i < c->n_nodes && st == GS_OK; i++)
            if (gs_strmap_put(&pi->by_name, c->nodes[i].in->name, &c->nodes[i]) != GS_OK)
                st = gs_error(d, gs_span_none(), "out of memory");
    }
    if (st != GS_OK || !info) {
        gs_propagate_info_free(pi);
        return st;
    }
    *info = pi;
    return GS_OK;
}

gs_status gs_propagate(gs_module *m, const gs_propagate_options *opts, gs_diags *d) {
    return gs_propagate_ex(m, opts, NULL, d);
}

void gs_propagate_info_free(gs_propagate_info *info) {
    if (!info) return;
    sdy_explain_free(info->sdy);
    gs_strmap_free(&info->by_name);
    gs_arena_free(&info->ctx.scratch);
    gs_arena_free(&info->ctx.tmp);
    free(info);
}

gs_status gs_propagate_explain(const gs_propagate_info *info, const char *name, gs_sb *sb,
                               gs_diags *d) {
    if (!info) return gs_error(d, gs_span_none(), "no provenance was recorded");
    if (info->sdy) return sdy_explain_query(info->sdy, name, sb, d);
    const gs_prop_node *n =
        name ? gs_strmap_get(&info->by_name, name[0] == '%' ? name + 1 : name) : NULL;
    if (!n) return gs_error(d, gs_span_none(), "no instruction named '%s'", name ? name : "");
    /* Re-attach nodes while explaining (aux is free again after the pass). */
    gs_prop_ctx *c = (gs_prop_ctx *)&info->ctx;
    for (int i = 0; i < c->n_nodes; i++) c->nodes[i].in->aux = &c->nodes[i];
    gs_prop_explain(c, n->in, sb);
    for (int i = 0; i < c->n_nodes; i++) c->nodes[i].in->aux = NULL;
    return GS_OK;
}
