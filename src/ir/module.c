/*
 * module.c — modules, computations and instructions: construction and attribute queries (and
 * the lookup in an attribute's integer list, gs_ints).
 */
#include "gspmd/ir.h"

#include <stdlib.h>
#include <string.h>

gs_module *gs_module_new(const char *name) {
    gs_module *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    gs_arena_init(&m->arena);
    m->name = gs_arena_strdup(&m->arena, name);
    m->num_partitions = 1;
    m->replica_count = 1;
    if (!m->name) {
        gs_module_free(m);
        return NULL;
    }
    return m;
}

void gs_module_free(gs_module *m) {
    if (!m) return;
    gs_arena_free(&m->arena);
    free(m);
}

gs_computation *gs_computation_new(gs_module *m, const char *name) {
    gs_computation *c = GS_NEW(&m->arena, gs_computation);
    if (!c) return NULL;
    c->name = gs_arena_strdup(&m->arena, name);
    c->module = m;
    gs_computation **comps = GS_NEW_ARRAY(&m->arena, gs_computation *, m->n_comps + 1);
    if (!c->name || !comps) return NULL;
    if (m->n_comps) memcpy(comps, m->comps, sizeof *comps * (size_t)m->n_comps);
    comps[m->n_comps++] = c;
    m->comps = comps;
    return c;
}

gs_status gs_computation_append(gs_computation *c, gs_instr *in) {
    gs_arena *a = &c->module->arena;
    /* Grow by doubling: capacity is the next power of two >= n. */
    int n = c->n_instrs;
    if ((n & (n - 1)) == 0) {
        int cap = n ? n * 2 : 4;
        gs_instr **v = GS_NEW_ARRAY(a, gs_instr *, cap);
        if (!v) return GS_ERR;
        if (n) memcpy(v, c->instrs, sizeof *v * (size_t)n);
        c->instrs = v;
    }
    in->parent = c;
    in->id = n;
    c->instrs[c->n_instrs++] = in;
    return GS_OK;
}

const gs_attr *gs_instr_attr(const gs_instr *in, gs_attr_key k) {
    for (int i = 0; i < in->n_attrs; i++)
        if (in->attrs[i].key == k) return &in->attrs[i];
    return NULL;
}

const gs_attr *gs_instr_attr_named(const gs_instr *in, const char *name) {
    for (int i = 0; i < in->n_attrs; i++)
        if (strcmp(in->attrs[i].name, name) == 0) return &in->attrs[i];
    return NULL;
}

int gs_ints_index(gs_ints v, int64_t x) {
    for (int i = 0; i < v.n; i++)
        if (v.v[i] == x) return i;
    return -1;
}

bool gs_ints_contains(gs_ints v, int64_t x) { return gs_ints_index(v, x) >= 0; }

gs_ints gs_instr_ints(const gs_instr *in, gs_attr_key k) {
    const gs_attr *a = gs_instr_attr(in, k);
    gs_ints none = {0, NULL};
    return a && a->key != GS_ATTR_UNKNOWN && gs_attr_kind_of(k) == GS_AK_INTS ? a->u.ints : none;
}

int64_t gs_instr_int(const gs_instr *in, gs_attr_key k, int64_t def) {
    const gs_attr *a = gs_instr_attr(in, k);
    return a && gs_attr_kind_of(k) == GS_AK_INT ? a->u.i : def;
}

bool gs_instr_bool(const gs_instr *in, gs_attr_key k, bool def) {
    const gs_attr *a = gs_instr_attr(in, k);
    return a && gs_attr_kind_of(k) == GS_AK_BOOL ? a->u.b : def;
}

const char *gs_instr_str(const gs_instr *in, gs_attr_key k) {
    const gs_attr *a = gs_instr_attr(in, k);
    if (!a) return NULL;
    gs_attr_kind kind = gs_attr_kind_of(k);
    return kind == GS_AK_IDENT || kind == GS_AK_STRING || kind == GS_AK_RAW ? a->u.s : NULL;
}

bool gs_instr_config_int(const gs_instr *in, const char *key, int64_t *v) {
    const char *cfg = gs_instr_str(in, GS_ATTR_BACKEND_CONFIG);
    size_t kl = strlen(key);
    for (const char *p = cfg; p && *p; p++) {
        bool start = p == cfg || p[-1] == ',' || p[-1] == '"' || p[-1] == ' ';
        if (!start || strncmp(p, key, kl) != 0 || p[kl] != '=') continue;
        char *end;
        long long x = strtoll(p + kl + 1, &end, 10);
        if (end == p + kl + 1) return false;
        *v = (int64_t)x;
        return true;
    }
    return false;
}

bool gs_instr_sharding_group(const gs_instr *in, int64_t *id) {
    static const char KEY[] = "xla.sdy.sharding_group_id=\"";
    const char *t = in->op == GS_OP_CUSTOM_CALL ? gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET) : NULL;
    const char *fa = gs_instr_str(in, GS_ATTR_FRONTEND_ATTRIBUTES);
    const char *at = fa ? strstr(fa, KEY) : NULL;
    if (!t || strcmp(t, "xla.sdy.ShardingGroup") != 0 || in->n_operands != 1 || !at) return false;
    char *end;
    long long x = strtoll(at + sizeof KEY - 1, &end, 10);
    if (end == at + sizeof KEY - 1 || *end != '"' || x < 0) return false;
    *id = (int64_t)x;
    return true;
}

#define SDY_CONSTANT "xla.sdy.constant=\"true\""

bool gs_instr_is_sdy_constant(const gs_instr *in) {
    const char *fa = gs_instr_str(in, GS_ATTR_FRONTEND_ATTRIBUTES);
    return in->op == GS_OP_CONSTANT && fa && strstr(fa, SDY_CONSTANT) != NULL;
}

gs_status gs_instr_mark_sdy_constant(gs_module *m, gs_instr *in) {
    if (gs_instr_is_sdy_constant(in)) return GS_OK;
    const char *fa = gs_instr_str(in, GS_ATTR_FRONTEND_ATTRIBUTES);
    gs_attr a = {.key = GS_ATTR_FRONTEND_ATTRIBUTES, .name = "frontend_attributes"};
    if (fa && fa[0] == '{' && strcmp(fa, "{}") != 0) /* {k=v} -> {k=v,mark} */
        a.u.s = gs_arena_printf(&m->arena, "%.*s," SDY_CONSTANT "}", (int)strlen(fa) - 1, fa);
    else
        a.u.s = "{" SDY_CONSTANT "}";
    return a.u.s ? gs_instr_set_attr(m, in, &a) : GS_ERR;
}

gs_computation *gs_instr_comp(const gs_instr *in, gs_attr_key k) {
    const gs_attr *a = gs_instr_attr(in, k);
    if (!a) return NULL;
    if (gs_attr_kind_of(k) == GS_AK_COMP) return a->u.comp;
    if (gs_attr_kind_of(k) == GS_AK_COMPS && a->u.comps.n > 0) return a->u.comps.v[0];
    return NULL;
}

int gs_instr_called(const gs_instr *in, gs_computation **out, int max) {
    int n = 0;
    for (int i = 0; i < in->n_attrs; i++) {
        const gs_attr *a = &in->attrs[i];
        if (a->key == GS_ATTR_UNKNOWN) continue;
        if (gs_attr_kind_of(a->key) == GS_AK_COMP) {
            if (n < max) out[n] = a->u.comp;
            n++;
        } else if (gs_attr_kind_of(a->key) == GS_AK_COMPS) {
            for (int j = 0; j < a->u.comps.n; j++) {
                if (n < max) out[n] = a->u.comps.v[j];
                n++;
            }
        }
    }
    return n;
}

bool gs_computation_binary_reducer(const gs_computation *comp, gs_opcode *op) {
    if (!comp || comp->n_params != 2 || !comp->root) return false;
    const gs_instr *r = comp->root;
    if (r->n_operands != 2 || r->shape->rank != 0) return false;
    const gs_instr *p0 = comp->params[0], *p1 = comp->params[1];
    if (!p0 || !p1 || p0->shape->rank != 0 || p1->shape->rank != 0) return false;
    if (!((r->operands[0] == p0 && r->operands[1] == p1) ||
          (r->operands[0] == p1 && r->operands[1] == p0)))
        return false;
    if (r->shape->type != p0->shape->type || p0->shape->type != p1->shape->type) return false;
    gs_type t = r->shape->type;
    switch (r->op) {
    case GS_OP_ADD:
    case GS_OP_MULTIPLY:
    case GS_OP_MAXIMUM:
    case GS_OP_MINIMUM: break;
    case GS_OP_AND:
    case GS_OP_OR:
    case GS_OP_XOR:
        if (gs_type_is_float(t) || gs_type_is_complex(t)) return false;
        break;
    default: return false;
    }
    if ((r->op == GS_OP_MAXIMUM || r->op == GS_OP_MINIMUM) && gs_type_is_complex(t)) return false;
    *op = r->op;
    return true;
}

gs_computation *gs_module_find_comp(const gs_module *m, const char *name) {
    for (int i = 0; i < m->n_comps; i++)
        if (strcmp(m->comps[i]->name, name) == 0) return m->comps[i];
    return NULL;
}

gs_instr *gs_module_find_instr(const gs_module *m, const char *name) {
    for (int i = 0; i < m->n_comps; i++) {
        gs_computation *c = m->comps[i];
        for (int j = 0; j < c->n_instrs; j++)
            if (strcmp(c->instrs[j]->name, name) == 0) return c->instrs[j];
    }
    return NULL;
}

/* Skips blanks. */
static const char *blank(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    return p;
}

gs_status gs_module_output_aliases(const gs_module *m, int *out_param, int n_out, gs_diags *d) {
    for (int i = 0; i < n_out; i++) out_param[i] = -1;
    const gs_instr *root = m->entry ? m->entry->root : NULL;
    bool tuple = root && root->op == GS_OP_TUPLE;
    const char *text = NULL;
    for (int a = 0; a < m->n_attrs; a++) {
        if (strcmp(m->attrs[a].name, "input_output_alias") != 0 || !m->attrs[a].text) continue;
        text = m->attrs[a].text;
        const char *p = blank(text);
        if (*p == '{') p = blank(p + 1);
        while (*p && *p != '}') {
            /* {i}: (param, {}, kind) */
            char *end;
            long out = 0;
            if (*p++ != '{') goto bad;
            p = blank(p);
            if (*p == '}') {
                if (tuple) goto bad; /* {} names a root that is not a tuple */
            } else {
                out = strtol(p, &end, 10);
                if (end == p) goto bad;
                p = blank(end);
            }
            if (*p++ != '}') goto bad;
            p = blank(p);
            if (*p++ != ':') goto bad;
            p = blank(p);
            if (*p++ != '(') goto bad;
            long param = strtol(p, &end, 10);
            if (end == p) goto bad;
            p = blank(end);
            if (*p++ != ',') goto bad;
            p = blank(p);
            if (*p++ != '{') goto bad;
            if (*blank(p) != '}') goto bad; /* a nested parameter index */
            p = strchr(p, ')');
            if (!p) goto bad;
            p = blank(p + 1);
            if (*p == ',') p = blank(p + 1);
            if (out < 0 || out >= n_out || param < 0 || param >= m->entry->n_params)
                return gs_error(d, gs_span_none(),
                                "input_output_alias: output {%ld} or parameter %ld out of range "
                                "(%d outputs, %d parameters)",
                                out, param, n_out, m->entry->n_params);
            for (int i = 0; i < n_out; i++)
                if (out_param[i] == param)
                    return gs_error(d, gs_span_none(),
                                    "input_output_alias: parameter %ld is aliased twice", param);
            const gs_shape *os = tuple ? root->operands[out]->shape : root->shape;
            const gs_shape *ps = m->entry->params[param]->shape;
            if (gs_shape_bytes(os) != gs_shape_bytes(ps))
                return gs_error(d, gs_span_none(),
                                "input_output_alias: output {%ld} does not have the size of "
                                "parameter %ld (%%%s) it updates",
                                out, param, m->entry->params[param]->name);
            out_param[out] = (int)param;
        }
    }
    return GS_OK;
bad:
    for (int i = 0; i < n_out; i++) out_param[i] = -1;
    return gs_error(d, gs_span_none(),
                    "input_output_alias: cannot read '%s' (entries are {i}: (param, {}, kind))",
                    text);
}

int64_t gs_module_declared_partitions(const gs_module *m) {
    for (int i = 0; i < m->n_attrs; i++)
        if (strcmp(m->attrs[i].name, "num_partitions") == 0) return m->num_partitions;
    return 0;
}

int gs_replica_groups_size(const gs_replica_groups *g, int group) {
    return g->is_iota ? g->group_size : g->sizes[group];
}

int64_t gs_replica_groups_device(const gs_replica_groups *g, int group, int idx) {
    if (!g->is_iota) return g->groups[group][idx];
    /* Position in the transposed array, unravelled over the transposed dims, then ravelled
     * back over the original dims. */
    int64_t flat = (int64_t)group * g->group_size + idx;
    int n = g->n_iota_dims;
    int64_t coord[GS_MAX_RANK];
    for (int k = n - 1; k >= 0; k--) {
        int64_t dim = g->iota_dims[g->perm ? g->perm[k] : k];
        coord[k] = flat % dim;
        flat /= dim;
    }
    int64_t orig[GS_MAX_RANK];
    for (int k = 0; k < n; k++) orig[g->perm ? g->perm[k] : k] = coord[k];
    int64_t lin = 0;
    for (int k = 0; k < n; k++) lin = lin * g->iota_dims[k] + orig[k];
    return lin;
}

int gs_attr_print_rank(gs_attr_key k) {
    return k == GS_ATTR_UNKNOWN ? 2 * (int)GS_ATTR_CONDITION - 1 : 2 * (int)k;
}

gs_status gs_instr_set_attr(gs_module *m, gs_instr *in, const gs_attr *a) {
    for (int i = 0; i < in->n_attrs; i++) {
        bool same = a->key == GS_ATTR_UNKNOWN ? strcmp(in->attrs[i].name, a->name) == 0
                                              : in->attrs[i].key == a->key;
        if (same) {
            in->attrs[i] = *a;
            return GS_OK;
        }
    }
    gs_attr *v = GS_NEW_ARRAY(&m->arena, gs_attr, in->n_attrs + 1);
    if (!v) return GS_ERR;
    int at = in->n_attrs, rank = gs_attr_print_rank(a->key);
    for (int i = 0; i < in->n_attrs; i++)
        if (gs_attr_print_rank(in->attrs[i].key) > rank) {
            at = i;
            break;
        }
    if (at) memcpy(v, in->attrs, sizeof *v * (size_t)at);
    v[at] = *a;
    if (in->n_attrs > at) memcpy(v + at + 1, in->attrs + at, sizeof *v * (size_t)(in->n_attrs - at));
    in->attrs = v;
    in->n_attrs++;
    return GS_OK;
}

const gs_sharding *gs_instr_get_sharding(const gs_instr *in) {
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_SHARDING);
    return a ? a->u.sharding : NULL;
}

gs_status gs_instr_set_sharding(gs_module *m, gs_instr *in, const gs_sharding *s) {
    if (!s) {
        for (int i = 0; i < in->n_attrs; i++)
            if (in->attrs[i].key == GS_ATTR_SHARDING) {
                memmove(in->attrs + i, in->attrs + i + 1, sizeof *in->attrs * (size_t)(in->n_attrs - i - 1));
                in->n_attrs--;
                return GS_OK;
            }
        return GS_OK;
    }
    gs_attr a;
    memset(&a, 0, sizeof a);
    a.key = GS_ATTR_SHARDING;
    a.name = gs_attr_name(GS_ATTR_SHARDING);
    a.u.sharding = s;
    return gs_instr_set_attr(m, in, &a);
}
