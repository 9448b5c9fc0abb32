/*
 * projection.c — dim shardings onto factors and back (Shardy's ShardingProjection).
 *
 * A dim's axes are handed out to its factors major first: a factor that is not the dim's last
 * takes axes (splitting one into sub-axes where needed) until their product reaches its size;
 * when the next axis shares no divisor with what is left of it, that axis and every later one
 * become the factor's overflow axes and the dim's remaining factors get none (closed). The last
 * factor takes everything left. Back from factors, a dim's axes are its factors' axes in order,
 * stopping after a factor not fully sharded (the next would need a strided view).
 */
#include "internal.h"

#include <string.h>

/* What is left of the current axis while handing a dim's axes out. */
typedef struct cursor {
    const sdy_axes *axes;
    int i;          /* index of the current axis; == axes->n when done */
    int64_t pre;    /* current (sub-)axis pre-size, 0 = the axis as written */
    int64_t size;   /* its size */
} cursor;

static void cursor_load(cursor *c) {
    if (c->i < c->axes->n) {
        c->pre = c->axes->v[c->i].pre_size;
        c->size = c->axes->v[c->i].size;
    }
}

static gs_axis_ref cursor_ref(const cursor *c, const gs_mesh *m) {
    const gs_axis_ref *a = &c->axes->v[c->i];
    if (c->pre == 0) return *a;
    return sdy_make_axis(m, a->axis, c->pre, c->size);
}

static void add_remaining(sdy_axes *out, cursor *c, const gs_mesh *m) {
    while (c->i < c->axes->n) {
        gs_axis_ref r = cursor_ref(c, m);
        sdy_add_or_merge(out, &r, m);
        c->i++;
        cursor_load(c);
    }
}

static void build_tensor(const gs_op_rule *r, const gs_tensor_factors *tf, const gs_mesh *m,
                         const sdy_sharding *s, sdy_tensor_fs *out) {
    for (int d = 0; d < tf->rank; d++) {
        const sdy_axes *axes = s && d < s->rank ? &s->dims[d].axes : NULL;
        static const sdy_axes none = {0};
        bool closed = s && d < s->rank ? s->dims[d].closed : false;
        cursor c = {axes ? axes : &none, 0, 0, 0};
        cursor_load(&c);
        bool overflowed = false;
        const gs_dim_factors *df = &tf->dims[d];
        for (int k = 0; k < df->n; k++) {
            int f = df->factors[k];
            sdy_factor_sh *fs = &out->f[f];
            fs->mapped = true;
            fs->minor_most = k == df->n - 1;
            if (overflowed) {
                fs->closed = true;
                break;
            }
            fs->closed = closed;
            int64_t remaining = r->factors[f].size;
            if (fs->minor_most) {
                add_remaining(&fs->axes, &c, m);
                break;
            }
            int64_t g = 1;
            while (c.i < c.axes->n && (c.size == 1 || (g = sdy_gcd(remaining, c.size)) > 1)) {
                const gs_axis_ref *a = &c.axes->v[c.i];
                gs_axis_ref take;
                if (c.size > g && c.size != 1) {
                    int64_t pre = c.pre ? c.pre : 1;
                    take = sdy_make_axis(m, a->axis, pre, g);
                    c.pre = pre * g;
                    c.size /= g;
                    remaining /= g;
                } else {
                    take = cursor_ref(&c, m);
                    remaining /= c.size;
                    c.i++;
                    cursor_load(&c);
                }
                sdy_push(&fs->axes, &take);
            }
            if (remaining > 1 && c.i < c.axes->n) {
                overflowed = true;
                add_remaining(&fs->overflow, &c, m);
            }
        }
    }
    if (s) {
        out->replicated = s->replicated;
        out->unreduced = s->unreduced;
        out->manual = s->manual;
    }
}

sdy_projection *sdy_project(gs_arena *a, const gs_op_rule *r, const gs_mesh *mesh,
                            const sdy_sharding *const *operands,
                            const sdy_sharding *const *results) {
    sdy_projection *p = GS_NEW(a, sdy_projection);
    if (!p) return NULL;
    p->n_factors = r->n_factors;
    p->n_operands = r->n_operands;
    p->n_results = r->n_results;
    int n = p->n_operands + p->n_results;
    p->t = n ? GS_NEW_ARRAY(a, sdy_tensor_fs, n) : NULL;
    if (n && !p->t) return NULL;
    for (int i = 0; i < n; i++) {
        p->t[i].f = r->n_factors ? GS_NEW_ARRAY(a, sdy_factor_sh, r->n_factors) : NULL;
        if (r->n_factors && !p->t[i].f) return NULL;
        memset(p->t[i].f, 0, sizeof(sdy_factor_sh) * (size_t)r->n_factors);
        memset(&p->t[i].replicated, 0, sizeof(sdy_axes));
        memset(&p->t[i].unreduced, 0, sizeof(sdy_axes));
        memset(&p->t[i].manual, 0, sizeof(sdy_axes));
        bool is_op = i < p->n_operands;
        const gs_tensor_factors *tf = is_op ? &r->operands[i] : &r->results[i - p->n_operands];
        const sdy_sharding *s = is_op ? operands[i] : results[i - p->n_operands];
        build_tensor(r, tf, mesh, s, &p->t[i]);
    }
    return p;
}

bool sdy_unproject(gs_arena *a, const gs_op_rule *r, const gs_tensor_factors *tf,
                   const sdy_tensor_fs *t, int mesh_index, const gs_mesh *mesh,
                   sdy_sharding *out) {
    out->mesh = mesh_index;
    out->rank = tf->rank;
    out->dims = tf->rank ? GS_NEW_ARRAY(a, sdy_dim, tf->rank) : NULL;
    if (tf->rank && !out->dims) return false;
    for (int d = 0; d < tf->rank; d++) {
        sdy_dim *dim = &out->dims[d];
        memset(dim, 0, sizeof *dim);
        dim->priority = -1;
        const gs_dim_factors *df = &tf->dims[d];
        for (int k = 0; k < df->n; k++) {
            const sdy_factor_sh *fs = &t->f[df->factors[k]];
            dim->closed |= fs->closed;
            int64_t sharded = 1;
            for (int i = 0; i < fs->axes.n; i++) {
                sharded *= fs->axes.v[i].size;
                if (i == 0) sdy_add_or_merge(&dim->axes, &fs->axes.v[i], mesh);
                else sdy_push(&dim->axes, &fs->axes.v[i]);
            }
            if (fs->overflow.n) {
                for (int i = 0; i < fs->overflow.n; i++) {
                    if (i == 0) sdy_add_or_merge(&dim->axes, &fs->overflow.v[i], mesh);
                    else sdy_push(&dim->axes, &fs->overflow.v[i]);
                }
                break;
            }
            if (sharded < r->factors[df->factors[k]].size) break;
        }
    }
    out->replicated = t->replicated;
    out->unreduced = t->unreduced;
    out->manual = t->manual;
    return true;
}
