/*
 * sdy.c — Shardy's passes by their sdy_opt names (gspmd/sdy.h) and the sdy_opt driver: parse
 * a pass flag, run the passes in order, print the module in MLIR's form.
 *
 * -sdy-populate-op-sharding-rules attaches each op's factor rule, which the printer writes as
 * `sdy.sharding_rule` (gs_mlir_print_options.sharding_rules): the IR has no place for MLIR's
 * discardable attributes, and the rule is a function of the op, so it is built where it is
 * printed. The propagation passes run gs_sdy_propagate (src/propagate/sdy/) with the strategy
 * and priorities each nests.
 */
#include "gspmd/sdy.h"

#include "gspmd/propagate.h"
#include "gspmd/sharding.h"
#include "gspmd/text.h"
#include "base/internal.h"

#include <stdlib.h>
#include <string.h>

/* sdy_opt's flags, by gs_sdy_pass_kind. */
static const char *const PASS_NAMES[GS_SDY_N_PASSES] = {
    "sdy-populate-op-sharding-rules", "sdy-basic-propagate",         "sdy-aggressive-propagate",
    "sdy-op-priority-propagate",      "sdy-user-priority-propagate", "sdy-propagation-pipeline",
    "sdy-add-data-flow-edges",        "sdy-sink-data-flow-edges",
};

/* A boolean option's value: `key` alone or `key=true|1` is true, `key=false|0` false. */
static bool bool_value(const char *eq, size_t vlen, bool *out) {
    if (!eq || (vlen == 4 && memcmp(eq + 1, "true", 4) == 0) || (vlen == 1 && eq[1] == '1'))
        return *out = true, true;
    if ((vlen == 5 && memcmp(eq + 1, "false", 5) == 0) || (vlen == 1 && eq[1] == '0'))
        return *out = false, true;
    return false;
}

/* A pass's options, `key[=value]` separated by spaces as MLIR's pass options are; those the
 * pass does not take are errors. */
static gs_status pass_options(const char *opts, gs_sdy_pass *out, const char **why) {
    bool propagation = out->kind >= GS_SDY_BASIC_PROPAGATE && out->kind <= GS_SDY_USER_PRIORITY_PROPAGATE;
    const char *p = opts;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        size_t len = strcspn(p, " ");
        const char *eq = memchr(p, '=', len);
        size_t key = eq ? (size_t)(eq - p) : len, vlen = eq ? len - key - 1 : 0;
#define IS(k) (key == sizeof(k) - 1 && memcmp(p, k, key) == 0)
        bool ok;
        if (IS("conservative-propagation") &&
            (out->kind == GS_SDY_POPULATE_OP_SHARDING_RULES || propagation)) {
            ok = bool_value(eq, vlen, &out->conservative_propagation);
        } else if (IS("keep-sharding-rules") && propagation) {
            ok = bool_value(eq, vlen, &out->keep_sharding_rules);
        } else if (IS("run-op-priority-propagation") &&
                   (out->kind == GS_SDY_OP_PRIORITY_PROPAGATE ||
                    out->kind == GS_SDY_USER_PRIORITY_PROPAGATE)) {
            bool run;
            ok = bool_value(eq, vlen, &run);
            out->no_op_priority = !run;
        } else if (IS("dedup-functions-fully") && out->kind == GS_SDY_PROPAGATION_PIPELINE) {
            ok = bool_value(eq, vlen, &out->dedup_functions_fully);
        } else if (IS("propagation-strategy") && propagation &&
                   out->kind != GS_SDY_BASIC_PROPAGATE && eq) {
            static const char *const NAMES[] = {"basic", "aggressive", "basic-then-aggressive"};
            ok = false;
            for (int k = 0; k < 3 && !ok; k++)
                if (strlen(NAMES[k]) == vlen && memcmp(eq + 1, NAMES[k], vlen) == 0) {
                    out->strategy = k;
                    ok = true;
                }
        } else {
            return *why = "unknown option of this pass", GS_ERR;
        }
#undef IS
        if (!ok) return *why = "bad option value", GS_ERR;
        p += len;
    }
    return GS_OK;
}

gs_status gs_sdy_pass_parse(const char *arg, gs_sdy_pass *out, const char **why) {
    memset(out, 0, sizeof *out);
    out->flag = arg;
    const char *name = arg;
    if (*name == '-') name++;
    if (*name == '-') name++;
    size_t len = strcspn(name, "=");
    int kind = -1;
    for (int k = 0; k < GS_SDY_N_PASSES; k++)
        if (strlen(PASS_NAMES[k]) == len && memcmp(PASS_NAMES[k], name, len) == 0) kind = k;
    if (name == arg || kind < 0) return *why = "unknown pass", GS_ERR;
    out->kind = (gs_sdy_pass_kind)kind;
    if (name[len] == '=') out->options = name + len + 1;
    out->strategy = -1;
    if (out->options) {
        /* `="a=b c=d"` as a shell left it: the quotes are MLIR's, not part of the options */
        char buf[256];
        size_t n = strlen(out->options);
        if (n >= sizeof buf) return *why = "pass options too long", GS_ERR;
        memcpy(buf, out->options, n + 1);
        if (n >= 2 && (buf[0] == '"' || buf[0] == '\'') && buf[n - 1] == buf[0]) {
            buf[n - 1] = 0;
            return pass_options(buf + 1, out, why);
        }
        return pass_options(buf, out, why);
    }
    return GS_OK;
}

/* Every dim of every named sharding closed, and its replicated axes dropped (Shardy's export
 * closes them so, TensorShardingAttr::getClosedLike). */
static gs_status close_shardings(gs_module *m, gs_diags *d) {
    for (int i = 0; i < m->n_comps; i++)
        for (int k = 0; k < m->comps[i]->n_instrs; k++) {
            gs_instr *in = m->comps[i]->instrs[k];
            const gs_sharding *s = gs_instr_get_sharding(in);
            if (!s) continue;
            int n = s->kind == GS_SHARDING_TUPLE ? s->n_tuple : 1;
            gs_sharding **leaves = GS_NEW_ARRAY(&m->arena, gs_sharding *, n);
            if (!leaves) return gs_error(d, gs_span_none(), "out of memory");
            bool changed = false;
            for (int j = 0; j < n; j++) {
                gs_sharding *l = s->kind == GS_SHARDING_TUPLE ? s->tuple[j] : (gs_sharding *)s;
                leaves[j] = l;
                const gs_named *nm = l->named;
                bool open = false;
                for (int dd = 0; nm && nm->form == GS_NAMED_DIMS && dd < nm->n_dims; dd++)
                    open |= nm->dims[dd].open;
                if (!open && !(nm && nm->form == GS_NAMED_DIMS && nm->replicated.n)) continue;
                gs_named *c = GS_NEW(&m->arena, gs_named);
                gs_axis_list *dims = GS_NEW_ARRAY(&m->arena, gs_axis_list, nm->n_dims);
                gs_sharding *cl = GS_NEW(&m->arena, gs_sharding);
                if (!c || !dims || !cl) return gs_error(d, gs_span_none(), "out of memory");
                *c = *nm;
                for (int dd = 0; dd < nm->n_dims; dd++) {
                    dims[dd] = nm->dims[dd];
                    dims[dd].open = false;
                }
                c->dims = dims;
                c->replicated = (gs_axis_list){0};
                *cl = *l;
                cl->named = c;
                leaves[j] = cl;
                changed = true;
            }
            if (!changed) continue;
            gs_sharding *ns = s->kind == GS_SHARDING_TUPLE ? gs_sharding_tuple(&m->arena, n, leaves)
                                                           : leaves[0];
            if (!ns || gs_instr_set_sharding(m, in, ns) != GS_OK)
                return gs_error(d, gs_span_none(), "out of memory");
        }
    return GS_OK;
}

static bool is_constraint(const gs_instr *in) {
    const char *t = in->op == GS_OP_CUSTOM_CALL ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET) : NULL;
    return t && strcmp(t, "Sharding") == 0 && in->n_operands == 1;
}

/* The export's sharding constraints: one nothing uses is gone (MLIR's rewrite driver erases
 * trivially dead ops), the others become sdy.reshard (ShardingConstraintToReshard). */
static gs_status constraints_to_reshards(gs_module *m, gs_diags *d) {
    for (int i = 0; i < m->n_comps; i++) {
        gs_computation *c = m->comps[i];
        int *uses = calloc((size_t)c->n_instrs + 1, sizeof *uses);
        if (!uses) return gs_error(d, gs_span_none(), "out of memory");
        for (int k = 0; k < c->n_instrs; k++)
            for (int j = 0; j < c->instrs[k]->n_operands; j++) uses[c->instrs[k]->operands[j]->id]++;
        int kept = 0;
        for (int k = c->n_instrs - 1; k >= 0; k--) {
            gs_instr *in = c->instrs[k];
            if (is_constraint(in) && !uses[in->id] && !in->is_root && in != c->root) {
                uses[in->operands[0]->id]--;
                uses[in->id] = -1; /* dead */
            }
        }
        for (int k = 0; k < c->n_instrs; k++) {
            gs_instr *in = c->instrs[k];
            if (uses[k] < 0) continue;
            in->id = kept;
            c->instrs[kept++] = in;
        }
        c->n_instrs = kept;
        free(uses);
        for (int k = 0; k < c->n_instrs; k++) {
            gs_instr *in = c->instrs[k];
            const gs_sharding *s = gs_instr_get_sharding(in);
            if (!is_constraint(in) || !s || !s->named) continue;
            gs_attr t = {.key = GS_ATTR_CUSTOM_CALL_TARGET, .name = "custom_call_target"};
            t.u.s = "sdy.reshard";
            if (gs_instr_set_attr(m, in, &t) != GS_OK)
                return gs_error(d, gs_span_none(), "out of memory");
        }
    }
    return GS_OK;
}

char *gs_sdy_opt(gs_module *m, int n, const gs_sdy_pass *passes, gs_diags *d) {
    gs_mlir_print_options o = {.sdy_opt = true};
    for (int i = 0; i < n; i++) {
        const gs_sdy_pass *p = &passes[i];
        gs_sdy_options so = {GS_SDY_AGGRESSIVE, p->conservative_propagation, false, false, false, false};
        switch (p->kind) {
        case GS_SDY_POPULATE_OP_SHARDING_RULES:
            o.sharding_rules = true;
            o.conservative_propagation = p->conservative_propagation;
            continue;
        case GS_SDY_ADD_DATA_FLOW_EDGES:
        case GS_SDY_SINK_DATA_FLOW_EDGES: continue;
        case GS_SDY_BASIC_PROPAGATE: so.strategy = GS_SDY_BASIC; break;
        case GS_SDY_AGGRESSIVE_PROPAGATE: break;
        case GS_SDY_OP_PRIORITY_PROPAGATE: so.op_priority = !p->no_op_priority; break;
        case GS_SDY_USER_PRIORITY_PROPAGATE:
        case GS_SDY_PROPAGATION_PIPELINE:
            so.op_priority = !p->no_op_priority;
            so.user_priority = true;
            so.pipeline = p->kind == GS_SDY_PROPAGATION_PIPELINE;
            so.dedup_functions_fully = p->dedup_functions_fully;
            break;
        default: break;
        }
        if (p->strategy >= 0) so.strategy = (gs_sdy_strategy)p->strategy;
        if (gs_sdy_propagate(m, &so, d) != GS_OK) return NULL;
        if (p->kind == GS_SDY_PROPAGATION_PIPELINE &&
            (constraints_to_reshards(m, d) != GS_OK || close_shardings(m, d) != GS_OK))
            return NULL;
        /* the rules a propagation built stay on the ops only when asked to */
        o.sharding_rules = p->keep_sharding_rules;
        o.conservative_propagation = p->conservative_propagation;
    }
    return gs_module_to_mlir_ex(m, &o, d);
}
