/*
 * args.c — entry arguments for a run: .npy inputs by parameter name, seeded random values for
 * the rest, and gs_interp_run_entry which ties arguments, evaluation and output leaves together.
 */
#include "kernels.h"
#include "gspmd/npy.h"
#include "base/sysalloc.h"
#include "gspmd/numeric.h"
#include "gspmd/sharding.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

gs_status gs_interp_inputs_add(gs_interp_inputs *in, const char *name, size_t name_len,
                               const char *path) {
    char **names = gs_sys_realloc(in->names, sizeof *names * (size_t)(in->n + 1));
    if (!names) return GS_ERR;
    in->names = names;
    char **paths = gs_sys_realloc(in->paths, sizeof *paths * (size_t)(in->n + 1));
    if (!paths) return GS_ERR;
    in->paths = paths;
    char *nm = gs_sys_malloc(name_len + 1), *pt = gs_sys_strdup(path);
    if (!nm || !pt) {
        free(nm);
        free(pt);
        return GS_ERR;
    }
    memcpy(nm, name, name_len);
    nm[name_len] = 0;
    in->names[in->n] = nm;
    in->paths[in->n] = pt;
    in->n++;
    return GS_OK;
}

void gs_interp_inputs_free(gs_interp_inputs *in) {
    for (int i = 0; i < in->n; i++) {
        free(in->names[i]);
        free(in->paths[i]);
    }
    free(in->names);
    free(in->paths);
    memset(in, 0, sizeof *in);
}

/* splitmix64: a small, well-mixed generator; one stream per parameter. Its k-th draw (from 1)
 * mixes seed + k * GOLDEN alone, so any element of a random value can be drawn without the
 * ones before it (gs_random_draw): a device draws its shard alone. */
#define GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Whether a draw of type t is scaled by limit (as an initialiser's weights are). */
static bool scaled(gs_type t, double limit) {
    return limit != 1 && gs_type_is_float(t) && t != GS_F8E8M0FNU;
}

void gs_random_draw(gs_type t, void *dst, int64_t at, uint64_t seed, int64_t first, int64_t len,
                    double limit) {
    bool scale = scaled(t, limit);
    if (t == GS_F32) { /* the common case, vectorisable: the same values as the general path */
        float *o = (float *)dst + at;
        uint64_t z = seed + (uint64_t)(first + 1) * GOLDEN;
        for (int64_t i = 0; i < len; i++, z += GOLDEN) {
            double u = (double)(mix64(z) >> 11) * 0x1.0p-53; /* [0,1) */
            float f = (float)(2 * u - 1);
            o[i] = scale ? (float)((double)f * limit) : f;
        }
        return;
    }
    for (int64_t i = 0; i < len; i++) {
        int64_t g = first + i, k = at + i;
        if (gs_type_is_complex(t)) { /* two draws an element: 2g+1 and 2g+2 */
            uint64_t z = seed + (uint64_t)(2 * g + 1) * GOLDEN;
            double u = (double)(mix64(z) >> 11) * 0x1.0p-53;
            double u2 = (double)(mix64(z + GOLDEN) >> 11) * 0x1.0p-53;
            gs_elem_set_c(dst, t, k, 2 * u - 1, 2 * u2 - 1);
            continue;
        }
        uint64_t r = mix64(seed + (uint64_t)(g + 1) * GOLDEN);
        double u = (double)(r >> 11) * 0x1.0p-53;
        if (t == GS_F8E8M0FNU) { /* scales: powers of two, 2^-4 .. 2^3 */
            gs_elem_set_f(dst, t, k, ldexp(1.0, (int)(r >> 61) - 4));
        } else if (gs_type_is_float(t)) {
            gs_elem_set_f(dst, t, k, 2 * u - 1);
            if (scale) gs_elem_set_f(dst, t, k, gs_elem_get_f(dst, t, k) * limit);
        } else if (t == GS_PRED) {
            gs_elem_set_i(dst, t, k, (int64_t)(r >> 63));
        } else if (gs_type_is_signed_int(t)) {
            gs_elem_set_i(dst, t, k, (int64_t)(r >> 60) - 8);
        } else {
            gs_elem_set_i(dst, t, k, (int64_t)(r >> 60));
        }
    }
}

/* A random value of shape s, its array leaves' floats scaled by limit. */
static gs_value *random_scaled(const gs_shape *s, uint64_t seed, double limit) {
    if (s->type == GS_TUPLE) {
        gs_value **elems = gs_sys_calloc((size_t)(s->n_tuple ? s->n_tuple : 1), sizeof *elems);
        if (!elems) return NULL;
        for (int i = 0; i < s->n_tuple; i++) {
            elems[i] = random_scaled(s->tuple[i], seed * 31 + (uint64_t)i + 1, limit);
            if (!elems[i]) {
                for (int j = 0; j < i; j++) gs_value_free(elems[j]);
                free(elems);
                return NULL;
            }
        }
        gs_value *t = gs_value_new_tuple(s->n_tuple, elems);
        free(elems);
        return t;
    }
    if (s->type == GS_TOKEN) return gs_value_new_token();
    gs_value *v = gs_value_new_array(s->type, s->rank, s->dims);
    if (v) gs_random_draw(s->type, v->data, 0, seed, 0, v->n, limit);
    return v;
}

gs_value *gs_random_value(const gs_shape *s, uint64_t seed) { return random_scaled(s, seed, 1); }

/* ------------------------------------------------------------------ initialiser scales */

/* Where x's value comes from through data movement (convert, copy, reshape, transpose, bitcast,
 * a Sharding custom-call): the instruction, and in *leaf the element a get-tuple-element of it
 * takes (-1: all of it). */
static const gs_instr *origin_of(const gs_instr *x, int *leaf) {
    *leaf = -1;
    for (int hops = 0; x && hops < 64; hops++) {
        switch (x->op) {
        case GS_OP_CONVERT:
        case GS_OP_COPY:
        case GS_OP_RESHAPE:
        case GS_OP_TRANSPOSE:
        case GS_OP_BITCAST: x = x->n_operands == 1 ? x->operands[0] : NULL; continue;
        case GS_OP_CUSTOM_CALL: { /* a sharding annotation (with_sharding_constraint's) */
            const char *t = gs_instr_str(x, GS_ATTR_CUSTOM_CALL_TARGET);
            if (!t || strcmp(t, "Sharding") != 0 || x->n_operands != 1) return x;
            x = x->operands[0];
            continue;
        }
        case GS_OP_GET_TUPLE_ELEMENT:
            if (x->n_operands != 1 || x->operands[0]->op == GS_OP_GET_TUPLE_ELEMENT) return NULL;
            *leaf = (int)gs_instr_int(x, GS_ATTR_INDEX, -1);
            return x->operands[0];
        default: return x;
        }
    }
    return NULL;
}

/* The contraction a weight w of instruction in feeds: a dot's right operand its contracting
 * dims, a convolution's kernel its input features times its window; 0 for other operands. */
static int64_t contraction_of(const gs_instr *in, int operand) {
    int64_t n = 1;
    if (operand != 1 || in->n_operands < 2) return 0;
    const gs_shape *s = in->operands[1]->shape;
    if (!gs_shape_is_array(s)) return 0;
    if (in->op == GS_OP_DOT || in->op == GS_OP_RAGGED_DOT) {
        gs_ints rc = gs_instr_ints(in, GS_ATTR_RHS_CONTRACTING_DIMS);
        for (int i = 0; i < rc.n; i++)
            if (rc.v[i] >= 0 && rc.v[i] < s->rank) n *= s->dims[rc.v[i]];
        return rc.n ? n : 0;
    }
    const gs_attr *da = in->op == GS_OP_CONVOLUTION ? gs_instr_attr(in, GS_ATTR_DIM_LABELS) : NULL;
    if (!da) return 0;
    const gs_conv_dims *cd = da->u.conv;
    if (cd->k_in_feature < 0 || cd->k_in_feature >= s->rank) return 0;
    n = s->dims[cd->k_in_feature];
    for (int i = 0; i < cd->n_spatial; i++)
        if (cd->k_spatial[i] >= 0 && cd->k_spatial[i] < s->rank) n *= s->dims[cd->k_spatial[i]];
    return n;
}

int64_t gs_init_fan_in(const gs_module *m, const gs_instr *value, int leaf) {
    int64_t fan = 0;
    for (int ci = 0; ci < m->n_comps; ci++)
        for (int i = 0; i < m->comps[ci]->n_instrs; i++) {
            const gs_instr *in = m->comps[ci]->instrs[i];
            int64_t k = contraction_of(in, 1);
            if (k <= fan) continue;
            int l;
            if (origin_of(in->operands[1], &l) == value && l == leaf) fan = k;
        }
    return fan;
}

void gs_init_fan_ins(const gs_module *m, int64_t *fan) {
    const gs_computation *e = m->entry;
    for (int i = 0; i < e->n_params; i++) fan[i] = 0;
    /* an origin is in its user's computation: the entry's parameters feed the entry's ops */
    for (int i = 0; i < e->n_instrs; i++) {
        const gs_instr *in = e->instrs[i];
        int64_t k = contraction_of(in, 1);
        if (k <= 0) continue;
        int l;
        const gs_instr *o = origin_of(in->operands[1], &l);
        int64_t p = o && o->op == GS_OP_PARAMETER && l == -1 ? o->parameter_number : -1;
        if (p >= 0 && p < e->n_params && e->params[p] == o && k > fan[p]) fan[p] = k;
    }
}

double gs_init_limit(int64_t fan_in) { return fan_in > 3 ? sqrt(3.0 / (double)fan_in) : 1; }

/* v's float elements times `limit` (v an array). */
static void scale_floats(gs_value *v, double limit) {
    if (limit == 1 || !v || v->type == GS_TUPLE || !gs_type_is_float(v->type) ||
        v->type == GS_F8E8M0FNU)
        return;
    for (int64_t i = 0; i < v->n; i++)
        gs_elem_set_f(v->data, v->type, i, gs_elem_get_f(v->data, v->type, i) * limit);
}

/* A random value for `value` (of shape s), its weights scaled by their fan-in. */
static gs_value *initial_value(const gs_module *m, const gs_instr *value, const gs_shape *s,
                               uint64_t seed, int64_t fan) {
    if (s->type != GS_TUPLE)
        return random_scaled(s, seed, gs_init_limit(fan >= 0 ? fan : gs_init_fan_in(m, value, -1)));
    gs_value *v = gs_random_value(s, seed);
    if (!v) return NULL;
    if (s == value->shape) {
        for (int i = 0; i < v->n_tuple; i++)
            scale_floats(v->tuple[i], gs_init_limit(gs_init_fan_in(m, value, i)));
    }
    return v;
}

/* An error unless every input names an entry parameter. */
static gs_status check_inputs(const gs_module *m, const gs_interp_inputs *inputs, gs_diags *d) {
    const gs_computation *e = m->entry;
    for (int k = 0; inputs && k < inputs->n; k++) {
        bool found = false;
        for (int i = 0; i < e->n_params && !found; i++) found = strcmp(e->params[i]->name, inputs->names[k]) == 0;
        if (!found) {
            gs_sb names = {0};
            for (int i = 0; i < e->n_params; i++) gs_sb_printf(&names, "%s%s", i ? ", " : "", e->params[i]->name);
            gs_error(d, gs_span_none(), "--input %s: the entry computation has no parameter named '%s' (its parameters: %s)",
                     inputs->names[k], inputs->names[k], e->n_params ? gs_sb_str(&names) : "none");
            gs_sb_free(&names);
            return GS_ERR;
        }
    }
    return GS_OK;
}

/* The .npy file the inputs give parameter p, or NULL. */
static const char *input_path(const gs_interp_inputs *inputs, const gs_instr *p) {
    const char *path = NULL;
    for (int k = 0; inputs && k < inputs->n; k++)
        if (strcmp(inputs->names[k], p->name) == 0) path = inputs->paths[k];
    return path;
}

/* Parameter i's stream: every random value of parameter i is drawn from it. */
static uint64_t param_seed(uint64_t seed, int i) { return seed * 1000003ull + (uint64_t)i; }

/* Entry parameter i's global value: read from its .npy input, or drawn (fan: its fan-in, or -1
 * to work it out). */
static gs_status param_value(const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                             int i, int64_t fan, gs_value **out, gs_diags *d) {
    const gs_instr *p = m->entry->params[i];
    const char *path = input_path(inputs, p);
    if (path) {
        if (!gs_shape_is_array(p->shape))
            return gs_error(d, p->span, "--input %s: only array parameters can be read from .npy",
                            p->name);
        return gs_npy_read_as(path, p->shape, p->name, out, d);
    }
    *out = initial_value(m, p, p->shape, param_seed(seed, i), fan);
    return *out ? GS_OK
                : gs_error(d, p->span, "out of memory creating a value for parameter %s", p->name);
}

gs_status gs_interp_make_args(const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                              gs_value ***args, int *n_args, gs_diags *d) {
    const gs_computation *e = m->entry;
    if (check_inputs(m, inputs, d) != GS_OK) return GS_ERR;
    gs_value **a = gs_sys_calloc((size_t)(e->n_params ? e->n_params : 1), sizeof *a);
    int64_t *fan = gs_sys_calloc((size_t)(e->n_params ? e->n_params : 1), sizeof *fan);
    if (!a || !fan) {
        free(a);
        free(fan);
        return gs_error(d, gs_span_none(), "out of memory");
    }
    gs_init_fan_ins(m, fan);
    for (int i = 0; i < e->n_params; i++) {
        if (param_value(m, inputs, seed, i, fan[i], &a[i], d) != GS_OK) {
            for (int j = 0; j < i; j++) gs_value_free(a[j]);
            free(a);
            free(fan);
            return GS_ERR;
        }
    }
    free(fan);
    *args = a;
    *n_args = e->n_params;
    return GS_OK;
}

/* The manual group of device d under manual leaf sharding s (fully manual: d), or -1. */
static int64_t manual_group(const gs_sharding *s, int64_t d) {
    if (s->kind == GS_SHARDING_MANUAL) return d;
    int md = -1;
    for (int i = 0; i < s->n_subgroups; i++)
        if (s->subgroups[i] == GS_SUBGROUP_MANUAL) md = s->data_rank + i;
    int64_t pos = gs_tile_position(&s->tiles, d);
    if (md < 0 || pos < 0) return -1;
    for (int i = s->tiles.rank - 1; i > md; i--) pos /= s->tiles.dims[i];
    return pos % s->tiles.dims[md];
}

static bool is_manual(const gs_sharding *s) {
    if (!s) return false;
    if (s->kind == GS_SHARDING_MANUAL) return true;
    if (s->kind != GS_SHARDING_TILED) return false;
    for (int i = 0; i < s->n_subgroups; i++)
        if (s->subgroups[i] == GS_SUBGROUP_MANUAL) return true;
    return false;
}

/* v (shape sh, sharding s: a tuple sharding's leaves in order, counted by *leaf) with its manual
 * leaves made bundles of n values, one per device: group 0's is v's own, another group's
 * random (seeded from `seed`, the leaf and the group) unless `same` (every group gets v's).
 * Returns a new reference, NULL on allocation failure or a device in no group. */
static gs_value *bundle_manual(const gs_module *m, const gs_instr *p, gs_value *v,
                               const gs_shape *sh, const gs_sharding *s, int *leaf, int64_t n,
                               uint64_t seed, bool same) {
    if (sh->type == GS_TUPLE) {
        gs_value **el = gs_sys_calloc((size_t)(sh->n_tuple ? sh->n_tuple : 1), sizeof *el);
        if (!el) return NULL;
        for (int i = 0; i < sh->n_tuple; i++)
            if (!(el[i] = bundle_manual(m, p, v->tuple[i], sh->tuple[i], s, leaf, n, seed, same))) {
                for (int j = 0; j < i; j++) gs_value_free(el[j]);
                free(el);
                return NULL;
            }
        gs_value *t = gs_value_new_tuple(sh->n_tuple, el);
        free(el);
        return t;
    }
    int k = (*leaf)++;
    const gs_sharding *ls = s && s->kind == GS_SHARDING_TUPLE ? (k < s->n_tuple ? s->tuple[k] : NULL) : s;
    if (!is_manual(ls) || sh->type == GS_TOKEN) return gs_value_ref(v);
    gs_value **parts = gs_sys_calloc((size_t)n, sizeof *parts);
    if (!parts) return NULL;
    for (int64_t d = 0; d < n; d++) {
        int64_t g = manual_group(ls, d);
        for (int64_t e = 0; e < d && !parts[d]; e++) /* an earlier member of the group */
            if (manual_group(ls, e) == g) parts[d] = gs_value_ref(parts[e]);
        if (!parts[d] && g >= 0) {
            if (g == 0 || same)
                parts[d] = gs_value_ref(v);
            else if ((parts[d] = gs_random_value(sh, seed * 7919u + (uint64_t)k * 104729u +
                                                         (uint64_t)g)))
                scale_floats(parts[d], gs_init_limit(gs_init_fan_in(m, p, sh == p->shape ? -1 : k)));
        }
        if (!parts[d]) {
            for (int64_t e = 0; e < d; e++) gs_value_free(parts[e]);
            free(parts);
            return NULL;
        }
    }
    gs_value *b = gs_value_new_tuple((int)n, parts);
    free(parts);
    if (b) b->devices = (int)n;
    return b;
}

/* *v (parameter i's global value) with its manual leaves made bundles of one value per device
 * (bundle_manual): replaced in place. */
static gs_status bundle_param(const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                              int64_t n_devices, int i, gs_value **v, gs_diags *d) {
    const gs_instr *p = m->entry->params[i];
    const gs_sharding *s = gs_instr_get_sharding(p);
    if (!s || n_devices <= 0) return GS_OK;
    int leaf = 0;
    gs_value *b = bundle_manual(m, p, *v, p->shape, s, &leaf, n_devices, param_seed(seed, i),
                                input_path(inputs, p) != NULL);
    if (!b)
        return gs_error(d, p->span, "cannot give parameter %s a value per manual group", p->name);
    gs_value_free(*v);
    *v = b;
    return GS_OK;
}

gs_status gs_interp_make_sharded_args(const gs_module *m, const gs_interp_inputs *inputs,
                                      uint64_t seed, int64_t n_devices, gs_value ***args,
                                      int *n_args, gs_diags *d) {
    if (gs_interp_make_args(m, inputs, seed, args, n_args, d) != GS_OK) return GS_ERR;
    for (int i = 0; i < m->entry->n_params; i++)
        if (bundle_param(m, inputs, seed, n_devices, i, &(*args)[i], d) != GS_OK) {
            for (int j = 0; j < *n_args; j++) gs_value_free((*args)[j]);
            free(*args);
            *args = NULL;
            return GS_ERR;
        }
    return GS_OK;
}

/* ------------------------------------------------------------------ arguments made per device */

struct gs_arg_source {
    const gs_module *m;
    int n;            /* entry parameters */
    gs_value **whole; /* per parameter: its global value, sliced per device; NULL: drawn or
                         read per device */
    gs_npy_info *npy; /* per parameter: its .npy file when read per device (path NULL: none) */
    bool owned;       /* the whole values are the source's (else the caller's) */
    uint64_t *seed;   /* per parameter: its random stream */
    double *limit;    /* per parameter: its initialiser's scale */
};

/* Whether a sharding (or a tuple one's leaf) is manual, fully or in a subgroup. */
static bool any_manual(const gs_sharding *s) {
    if (!s) return false;
    if (s->kind == GS_SHARDING_TUPLE) {
        for (int i = 0; i < s->n_tuple; i++)
            if (any_manual(s->tuple[i])) return true;
        return false;
    }
    return is_manual(s);
}

static gs_arg_source *source_alloc(const gs_module *m) {
    gs_arg_source *a = gs_sys_calloc(1, sizeof *a);
    if (!a) return NULL;
    a->m = m;
    a->n = m->entry->n_params;
    size_t n = (size_t)(a->n ? a->n : 1);
    a->whole = gs_sys_calloc(n, sizeof *a->whole);
    a->seed = gs_sys_calloc(n, sizeof *a->seed);
    a->limit = gs_sys_calloc(n, sizeof *a->limit);
    a->npy = gs_sys_calloc(n, sizeof *a->npy);
    if (!a->whole || !a->seed || !a->limit || !a->npy) {
        free(a->whole);
        free(a->seed);
        free(a->limit);
        free(a->npy);
        free(a);
        return NULL;
    }
    return a;
}

gs_status gs_arg_source_new(const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                            int64_t n_devices, gs_arg_source **out, gs_diags *d) {
    *out = NULL;
    if (check_inputs(m, inputs, d) != GS_OK) return GS_ERR;
    gs_arg_source *a = source_alloc(m);
    int64_t *fan = gs_sys_calloc((size_t)(m->entry->n_params ? m->entry->n_params : 1),
                                 sizeof *fan);
    if (!a || !fan) {
        gs_arg_source_free(a);
        free(fan);
        return gs_error(d, gs_span_none(), "out of memory");
    }
    a->owned = true;
    gs_init_fan_ins(m, fan);
    for (int i = 0; i < a->n; i++) {
        const gs_instr *p = m->entry->params[i];
        a->seed[i] = param_seed(seed, i);
        a->limit[i] = 1;
        const char *path = input_path(inputs, p);
        if (gs_shape_is_array(p->shape) && !any_manual(gs_instr_get_sharding(p))) {
            if (!path) { /* drawn per device */
                a->limit[i] = gs_init_limit(fan[i]);
                continue;
            }
            /* read per device: its part of the file only */
            char *own = gs_sys_strdup(path);
            if (!own || gs_npy_open_as(own, p->shape, p->name, &a->npy[i], d) != GS_OK) {
                if (!own) gs_error(d, gs_span_none(), "out of memory");
                free(own);
                a->npy[i].path = NULL;
                gs_arg_source_free(a);
                free(fan);
                return GS_ERR;
            }
            continue;
        }
        if (param_value(m, inputs, seed, i, fan[i], &a->whole[i], d) != GS_OK ||
            bundle_param(m, inputs, seed, n_devices, i, &a->whole[i], d) != GS_OK) {
            gs_arg_source_free(a);
            free(fan);
            return GS_ERR;
        }
    }
    free(fan);
    *out = a;
    return GS_OK;
}

gs_arg_source *gs_arg_source_of(const gs_module *m, gs_value *const *args) {
    gs_arg_source *a = source_alloc(m);
    if (!a) return NULL;
    for (int i = 0; i < a->n; i++) a->whole[i] = args[i];
    return a;
}

int gs_arg_source_count(const gs_arg_source *src) { return src->n; }

void gs_random_draw_box(gs_value *v, uint64_t seed, const int64_t *gd, const gs_shard_dim *sd,
                        double limit) {
    int r = v->rank;
    int64_t run = r ? sd[r - 1].valid : 1, rows = 1;
    for (int k = 0; k + 1 < r; k++) rows *= sd[k].valid;
    if (run <= 0 || rows <= 0) return;
    int64_t idx[GS_MAX_RANK] = {0};
    for (int64_t row = 0; row < rows; row++) {
        int64_t g = 0, l = 0; /* the row's first element: global and local positions */
        for (int k = 0; k < r; k++) {
            g = g * gd[k] + sd[k].offset + idx[k];
            l = l * sd[k].size + idx[k];
        }
        gs_random_draw(v->type, v->data, l, seed, g, run, limit);
        for (int k = r - 2; k >= 0; k--) {
            if (++idx[k] < sd[k].valid) break;
            idx[k] = 0;
        }
    }
}

gs_status gs_arg_source_part(const gs_arg_source *src, int i, const gs_sharding *s,
                             int64_t device, gs_value **out, gs_diags *d) {
    *out = NULL;
    if (i < 0 || i >= src->n)
        return gs_error(d, gs_span_none(), "no parameter %d of %d", i, src->n);
    if (src->whole[i]) return gs_value_shard(src->whole[i], s, device, out, d);
    if (s && s->kind == GS_SHARDING_TUPLE) s = s->n_tuple > 0 ? s->tuple[0] : NULL;
    if (!s) return gs_error(d, gs_span_none(), "a tuple sharding has fewer leaves than its value");
    const gs_shape *sh = src->m->entry->params[i]->shape;
    int r = sh->rank;
    gs_shard_dim sd[GS_MAX_RANK];
    bool holds = true;
    if (s->kind == GS_SHARDING_TILED) {
        if (gs_shard_box(s, r, sh->dims, device, sd, &holds, d) != GS_OK) return GS_ERR;
    } else { /* the whole value; partial values ({unreduced}) on device 0 alone */
        for (int k = 0; k < r; k++) sd[k] = (gs_shard_dim){0, sh->dims[k], sh->dims[k]};
        holds = s->kind != GS_SHARDING_UNREDUCED || device == 0;
    }
    int64_t dims[GS_MAX_RANK];
    for (int k = 0; k < r; k++) dims[k] = sd[k].size;
    gs_value *v = gs_value_new_array(sh->type, r, dims);
    if (!v) return gs_error(d, gs_span_none(), "out of memory");
    if (holds && src->npy[i].path) {
        if (gs_npy_read_box(&src->npy[i], r, sh->dims, sd, v, d) != GS_OK) {
            gs_value_free(v);
            return GS_ERR;
        }
    } else if (holds) {
        gs_random_draw_box(v, src->seed[i], sh->dims, sd, src->limit[i]);
    }
    *out = v;
    return GS_OK;
}

int gs_arg_source_part_key(const gs_arg_source *src, int i, const gs_sharding *s,
                           int64_t device, int64_t *key) {
    if (i < 0 || i >= src->n || !s) return 0;
    const gs_shape *sh = src->m->entry->params[i]->shape;
    const gs_value *w = src->whole[i];
    if (w ? (w->type == GS_TUPLE || w->type == GS_TOKEN || w->devices > 0)
          : !gs_shape_is_array(sh))
        return 0;
    int r = w ? w->rank : sh->rank;
    const int64_t *dims = w ? w->dims : sh->dims;
    if (s->kind == GS_SHARDING_TUPLE) s = s->n_tuple > 0 ? s->tuple[0] : NULL;
    if (!s || s->kind == GS_SHARDING_MANUAL || is_manual(s)) return 0;
    gs_shard_dim sd[GS_MAX_RANK];
    bool holds = true;
    if (s->kind == GS_SHARDING_TILED) {
        gs_diags quiet = {0};
        gs_status st = gs_shard_box(s, r, dims, device, sd, &holds, &quiet);
        gs_diags_free(&quiet);
        if (st != GS_OK) return 0; /* gs_arg_source_part reports it */
        for (int k = 0; k < r; k++) key[k] = sd[k].offset;
    } else {
        for (int k = 0; k < r; k++) key[k] = 0;
        holds = s->kind != GS_SHARDING_UNREDUCED || device == 0;
    }
    key[r] = holds;
    return r + 1;
}

void gs_arg_source_free(gs_arg_source *src) {
    if (!src) return;
    for (int i = 0; src->owned && i < src->n; i++) gs_value_free(src->whole[i]);
    for (int i = 0; src->npy && i < src->n; i++) free((char *)src->npy[i].path);
    free(src->npy);
    free(src->whole);
    free(src->seed);
    free(src->limit);
    free(src);
}

gs_status gs_interp_run_entry(const gs_module *m, const gs_interp_inputs *inputs, uint64_t seed,
                              gs_value ***outs, int *n_outs, gs_diags *d) {
    return gs_interp_run_entry_steps(m, inputs, seed, 1, NULL, outs, n_outs, d);
}

gs_status gs_step_arguments(const gs_module *m, gs_value *const *args, int n_args,
                            gs_value *result, gs_value **next, gs_diags *d) {
    const gs_instr *root = m->entry->root;
    bool tuple = root->op == GS_OP_TUPLE;
    int n_out = tuple ? root->n_operands : 1;
    int *out_param = calloc((size_t)n_out, sizeof *out_param);
    if (!out_param) return gs_error(d, gs_span_none(), "out of memory");
    gs_status st = gs_module_output_aliases(m, out_param, n_out, d);
    if (st != GS_OK) {
        free(out_param);
        return st;
    }
    for (int i = 0; i < n_args; i++) {
        next[i] = args[i];
        gs_value_ref(next[i]);
    }
    for (int i = 0; st == GS_OK && i < n_out; i++) {
        int j = out_param[i];
        if (j < 0 || j >= n_args) continue;
        gs_value *v = tuple ? (result->type == GS_TUPLE && i < result->n_tuple ? result->tuple[i]
                                                                               : NULL)
                            : result;
        if (!v) {
            st = gs_error(d, gs_span_none(), "internal: no output %d", i);
            break;
        }
        if (!gs_shape_equal(tuple ? root->operands[i]->shape : root->shape,
                            m->entry->params[j]->shape)) {
            st = gs_error(d, m->entry->params[j]->span,
                          "steps: output %d updates parameter %%%s but has another shape: it "
                          "cannot be the next step's argument",
                          i, m->entry->params[j]->name);
            break;
        }
        gs_value_ref(v);
        gs_value_free(next[j]);
        next[j] = v;
    }
    free(out_param);
    return st;
}

gs_status gs_interp_run_entry_steps(const gs_module *m, const gs_interp_inputs *inputs,
                                    uint64_t seed, int steps, double *step_s, gs_value ***outs,
                                    int *n_outs, gs_diags *d) {
    if (steps < 1) return gs_error(d, gs_span_none(), "steps must be at least 1, not %d", steps);
    gs_value **args;
    int n_args;
    if (gs_interp_make_args(m, inputs, seed, &args, &n_args, d) != GS_OK) return GS_ERR;
    gs_value *result = NULL;
    gs_status st = GS_OK;
    for (int step = 0; st == GS_OK && step < steps; step++) {
        if (result) { /* the aliased outputs are the next step's arguments */
            gs_value **next = malloc(sizeof *next * (size_t)(n_args ? n_args : 1));
            st = next ? gs_step_arguments(m, args, n_args, result, next, d)
                      : gs_error(d, gs_span_none(), "out of memory");
            gs_value_free(result);
            result = NULL;
            if (st != GS_OK) {
                free(next);
                break;
            }
            for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
            free(args);
            args = next;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = gs_interp_eval(m, NULL, args, n_args, &result, d);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (step_s)
            step_s[step] = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
    for (int i = 0; i < n_args; i++) gs_value_free(args[i]);
    free(args);
    if (st != GS_OK) {
        gs_value_free(result);
        return GS_ERR;
    }
    gs_value **leaves;
    int n;
    if (gs_value_leaves(result, &leaves, &n) != GS_OK) {
        gs_value_free(result);
        return gs_error(d, gs_span_none(), "out of memory");
    }
    for (int i = 0; i < n; i++) gs_value_ref(leaves[i]);
    gs_value_free(result);
    *outs = leaves;
    *n_outs = n;
    return GS_OK;
}

/* The literal of shape s filled from random value v (tuples element by element), in arena a. */
static bool literal_from(gs_arena *a, gs_literal_ir *lit, const gs_shape *s, const gs_value *v) {
    if (s->type == GS_TUPLE) {
        for (int i = 0; i < s->n_tuple && i < lit->n_tuple; i++)
            if (lit->tuple[i] && !literal_from(a, lit->tuple[i], s->tuple[i], v->tuple[i]))
                return false;
        lit->elided = false;
        return true;
    }
    if (!lit->elided) return true;
    size_t n = gs_value_bytes(v);
    void *data = gs_arena_alloc(a, n ? n : 1);
    if (!data) return false;
    memcpy(data, v->data, n);
    lit->data = data;
    lit->n_bytes = n;
    lit->elided = false;
    return true;
}

static bool has_elided(const gs_literal_ir *lit) {
    if (!lit) return false;
    if (lit->elided) return true;
    for (int i = 0; i < lit->n_tuple; i++)
        if (has_elided(lit->tuple[i])) return true;
    return false;
}

gs_status gs_module_fill_elided(gs_module *m, uint64_t seed, int *n_filled, gs_diags *d) {
    *n_filled = 0;
    for (int ci = 0; ci < m->n_comps; ci++)
        for (int i = 0; i < m->comps[ci]->n_instrs; i++) {
            gs_instr *in = m->comps[ci]->instrs[i];
            if (in->op != GS_OP_CONSTANT || !has_elided(in->literal)) continue;
            uint64_t h = gs_hash_bytes(in->name, strlen(in->name), seed);
            gs_value *v = initial_value(m, in, in->shape, h, -1);
            bool ok = v && literal_from(&m->arena, in->literal, in->shape, v);
            gs_value_free(v);
            if (!ok) return gs_error(d, in->span, "out of memory filling an elided constant");
            (*n_filled)++;
        }
    return GS_OK;
}
