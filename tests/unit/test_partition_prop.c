/*
 * test_partition_prop.c — property test of the partitioner: random small graphs (elementwise,
 * bitcast-convert to a wider rank and back, broadcast, reshape, transpose, dot and ragged-dot
 * (its three modes), reduce, argmax (variadic reduce), slice, pad, concatenate,
 * sort (keys, or keys and indices), 1-D convolution (and its filter-gradient form, with batch
 * groups), reduce-window, select-and-scatter, gather, batch-norm training and inference,
 * scatter, dynamic-slice and dynamic-update-slice with clamped indices, reverse, calls, while
 * loops, conditionals)
 * with random shardings
 * (JAX-style: each axis of a random mesh of 1-3 axes goes to a tensor dim or to replication, in
 * a random order; the mesh's device order iota, transposed, or an explicit permutation; so iota,
 * transposed-iota and explicit tile assignments, partial replication and uneven dims all occur)
 * on every instruction or none; every fourth case writes them as named (Shardy) shardings, some
 * dims open, and runs Shardy's propagation (a strategy, op and user priorities varying with the
 * case) first. Each module is partitioned (every third case with windowed
 * einsum on at threshold 0, half of those bidirectional, so dots that gather or reduce-scatter
 * run as loops; every fifth with partial sums all-reduced and sliced, as XLA's partitioner
 * writes them, instead of reduce-scattered), the program
 * verified, run on the
 * mesh's devices (threads) through gs_run_partitioned, the path `gspmd run` takes, and compared
 * with the reference interpreter by gs_verify_outputs, the check `gspmd run --verify` makes: f32
 * within GS_VERIFY_MARGIN rounding-error bounds of each element, s32 exactly.
 *
 * Every eighth case (threads) also checks gs_autoshard (issue 27's property): its choice on the
 * case's mesh, the module's shardings ignored, predicts no slower than replicating everything
 * nor than the module's own shardings (pinned, when the solver proves its choice optimal), and
 * partitions as written, runs, and matches the reference (check_autoshard).
 *
 * Under mpirun with GSPMD_PARTITION_MPI=1 (tests/soak_mpi.sh) every rank generates the same
 * cases and runs the ones whose device count is a multiple of the ranks on the MPI backend
 * (device count / ranks devices per rank, threads within a rank), through gs_run_sharded, the
 * path of `mpirun ... gspmd run --backend mpi`; rank 0 compares with the reference.
 *
 * GSPMD_PARTITION_SEED=N picks the seed (under ctest the default is the commit hash, so every
 * CI run covers new graphs), GSPMD_PARTITION_CASES=N the number of cases (default 2000),
 * GSPMD_PARTITION_SECONDS=T stops after T seconds if sooner, GSPMD_PARTITION_FIRST=K starts at case K, GSPMD_PARTITION_KEEP_GOING=1 counts failures instead of stopping at the first. A failure prints the seed, the case number, the module, the partitioned program, and the
 * module minimised (the shortest prefix of its ops that still fails).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gspmd/autoshard.h"
#include "gspmd/compile.h"
#include "gspmd/partition.h"
#include "gspmd/propagate.h"
#include "gspmd/runtime.h"
#include "gspmd/text.h"

enum { MAXV = 24, MAXR = 3 };

static uint64_t rng_state;

static uint64_t next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static int rnd(int n) { return (int)(next() % (uint64_t)n); }

/* Every fourth case is Shardy's: its shardings written as named (V3) ones on a mesh of axes
 * 'a', 'b', 'c' (dims open to more axes at random), propagated by Shardy's propagation before
 * partitioning. Set per case (shardy_case) before the module is generated. */
static bool named_shardings;

static bool shardy_case(int it) { return it % 4 == 3; }

/* A random mesh: axis sizes (product <= 8) and a device order. */
typedef struct mesh {
    int n_axes;
    int size[3];
    int n;            /* devices */
    int order[8];     /* device at each mesh position (row-major over the axes) */
} mesh;

static void random_mesh(mesh *m) {
    static const int sizes[] = {1, 2, 2, 2, 3, 4};
    for (;;) {
        m->n_axes = 1 + rnd(3);
        m->n = 1;
        for (int a = 0; a < m->n_axes; a++) {
            m->size[a] = sizes[rnd(6)];
            m->n *= m->size[a];
        }
        if (m->n <= 8) break;
    }
    for (int i = 0; i < m->n; i++) m->order[i] = i;
    int kind = rnd(3);
    if (kind == 1 && m->n_axes > 1) {
        /* The device order of a transposed mesh (iota with a transpose). */
        int rev[8];
        for (int pos = 0; pos < m->n; pos++) {
            int c[3], p = pos;
            for (int a = m->n_axes - 1; a >= 0; a--) {
                c[a] = p % m->size[a];
                p /= m->size[a];
            }
            int d = 0;
            for (int a = m->n_axes - 1; a >= 0; a--) d = d * m->size[a] + c[a];
            rev[pos] = d;
        }
        memcpy(m->order, rev, sizeof rev);
    } else if (kind == 2) {
        for (int i = m->n - 1; i > 0; i--) {
            int j = rnd(i + 1), t = m->order[i];
            m->order[i] = m->order[j];
            m->order[j] = t;
        }
    }
}

/* Appends a random sharding for a value of the given rank to buf: each mesh axis goes to a
 * tensor dim or stays replicated; returns false for "no sharding". */
static bool random_sharding(const mesh *m, int rank, char *buf, size_t cap) {
    int r = rnd(10);
    if (r < 3) return false;
    if (r == 3 || rank == 0) {
        if (rnd(8) == 0) snprintf(buf, cap, "{maximal device=%d}", rnd(m->n));
        else snprintf(buf, cap, "{replicated}");
        return true;
    }
    int dim_of[3], axes_order[3];
    for (int a = 0; a < m->n_axes; a++) {
        dim_of[a] = rnd(rank + 1) - 1; /* -1: replication */
        axes_order[a] = a;
    }
    if (rnd(2)) { /* axes of one dim in another order */
        for (int i = m->n_axes - 1; i > 0; i--) {
            int j = rnd(i + 1), t = axes_order[i];
            axes_order[i] = axes_order[j];
            axes_order[j] = t;
        }
    }
    bool iota = true;
    for (int pos = 0; pos < m->n; pos++) iota &= m->order[pos] == pos;
    if (named_shardings && iota) { /* `{mesh['a'=2,'b'=2] [{'b', 'a', ?}, {}]}` */
        int k = snprintf(buf, cap, "{mesh[");
        for (int a = 0; a < m->n_axes; a++)
            k += snprintf(buf + k, cap - (size_t)k, "%s'%c'=%d", a ? "," : "", 'a' + a, m->size[a]);
        k += snprintf(buf + k, cap - (size_t)k, "] [");
        for (int d = 0; d < rank; d++) {
            k += snprintf(buf + k, cap - (size_t)k, "%s{", d ? ", " : "");
            int n = 0;
            for (int i = 0; i < m->n_axes; i++) {
                int a = axes_order[i];
                if (dim_of[a] == d)
                    k += snprintf(buf + k, cap - (size_t)k, "%s'%c'", n++ ? ", " : "", 'a' + a);
            }
            if (rnd(3) == 0) k += snprintf(buf + k, cap - (size_t)k, "%s?", n ? ", " : "");
            k += snprintf(buf + k, cap - (size_t)k, "}");
        }
        snprintf(buf + k, cap - (size_t)k, "]}");
        return true;
    }
    int tiles[MAXR + 1];
    for (int i = 0; i < rank; i++) tiles[i] = 1;
    int rep = 1;
    for (int a = 0; a < m->n_axes; a++) {
        if (dim_of[a] < 0) rep *= m->size[a];
        else tiles[dim_of[a]] *= m->size[a];
    }
    int ntiles = 1;
    for (int i = 0; i < rank; i++) ntiles *= tiles[i];
    if (ntiles == 1) {
        snprintf(buf, cap, "{replicated}");
        return true;
    }
    /* The explicit device list over [tiles..., rep], row-major. */
    int list[8];
    for (int pos = 0; pos < m->n; pos++) {
        int c[3], p = pos;
        for (int a = m->n_axes - 1; a >= 0; a--) {
            c[a] = p % m->size[a];
            p /= m->size[a];
        }
        int idx[MAXR + 1] = {0};
        for (int k = 0; k < m->n_axes; k++) {
            int a = axes_order[k];
            if (dim_of[a] >= 0) idx[dim_of[a]] = idx[dim_of[a]] * m->size[a] + c[a];
            else idx[rank] = idx[rank] * m->size[a] + c[a];
        }
        int flat = 0;
        for (int i = 0; i < rank; i++) flat = flat * tiles[i] + idx[i];
        if (rep > 1) flat = flat * rep + idx[rank];
        list[flat] = m->order[pos];
    }
    int k = snprintf(buf, cap, "{devices=[");
    for (int i = 0; i < rank; i++)
        k += snprintf(buf + k, cap - (size_t)k, "%s%d", i ? "," : "", tiles[i]);
    if (rep > 1) k += snprintf(buf + k, cap - (size_t)k, ",%d", rep);
    k += snprintf(buf + k, cap - (size_t)k, "]");
    for (int i = 0; i < m->n; i++)
        k += snprintf(buf + k, cap - (size_t)k, "%s%d", i ? "," : "", list[i]);
    snprintf(buf + k, cap - (size_t)k, "%s}", rep > 1 ? " last_tile_dim_replicate" : "");
    return true;
}

/* A value of the graph being built. */
typedef struct val {
    char name[16];
    int rank;
    int dims[MAXR];
    bool aux; /* a ragged-dot's group sizes (s32): no operand of other ops */
} val;

typedef struct graph {
    char text[16384];
    size_t len;
    char params[2048];
    size_t plen;
    val v[MAXV];
    int n;
    int n_params;
    const char *ty; /* "f32" or "s32" */
    const mesh *m;
    char comps[16384]; /* called computations (bodies, branches, callees) */
    size_t clen;
    int n_comps;
    bool dots; /* favour dots (half the ops) */
    int n_ops; /* ops generated */
} graph;

static void emit(graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(graph *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    g->len += (size_t)vsnprintf(g->text + g->len, sizeof g->text - g->len, fmt, ap);
    va_end(ap);
}

static void emit_comp(graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit_comp(graph *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    g->clen += (size_t)vsnprintf(g->comps + g->clen, sizeof g->comps - g->clen, fmt, ap);
    va_end(ap);
}

/* ", sharding=S" for a random sharding of a value of rank r (or "" for none). */
static const char *sharding_attr(graph *g, int rank, char *buf, size_t cap) {
    char sh[256];
    if (rank > MAXR || !random_sharding(g->m, rank, sh, sizeof sh)) return "";
    snprintf(buf, cap, ", sharding=%s", sh);
    return buf;
}

/* A random elementwise op of x (of shape `s`) into name: tanh/negate/add(x,x)/multiply(x,x). */
static void comp_op(graph *g, const char *name, const char *s, const char *x, int rank) {
    char sa[300];
    bool f32 = strcmp(g->ty, "f32") == 0;
    switch (rnd(4)) {
    case 0: emit_comp(g, "  %%%s = %s %s(%%%s)", name, s, f32 ? "tanh" : "negate", x); break;
    case 1: emit_comp(g, "  %%%s = %s negate(%%%s)", name, s, x); break;
    case 2: emit_comp(g, "  %%%s = %s add(%%%s, %%%s)", name, s, x, x); break;
    default: emit_comp(g, "  %%%s = %s multiply(%%%s, %%%s)", name, s, x, x); break;
    }
    emit_comp(g, "%s\n", sharding_attr(g, rank, sa, sizeof sa));
}

static void shape_text(const graph *g, const val *v, char *buf, size_t cap) {
    int k = snprintf(buf, cap, "%s[", g->ty);
    for (int i = 0; i < v->rank; i++)
        k += snprintf(buf + k, cap - (size_t)k, "%s%d", i ? "," : "", v->dims[i]);
    snprintf(buf + k, cap - (size_t)k, "]");
}

/* Ends the line of a new value: its sharding, if any. */
static void finish(graph *g, const val *v) {
    char sh[256];
    if (v->rank <= MAXR && random_sharding(g->m, v->rank, sh, sizeof sh)) emit(g, ", sharding=%s", sh);
    emit(g, "\n");
}

static val *new_val(graph *g, int rank, const int *dims) {
    val *v = &g->v[g->n];
    snprintf(v->name, sizeof v->name, "v%d", g->n);
    g->n++;
    v->rank = rank;
    v->aux = false;
    for (int i = 0; i < rank; i++) v->dims[i] = dims[i];
    return v;
}

static val *param(graph *g, int rank, const int *dims) {
    val *v = new_val(g, rank, dims);
    char s[64];
    shape_text(g, v, s, sizeof s);
    g->plen += (size_t)snprintf(g->params + g->plen, sizeof g->params - g->plen, "%s%s: %s",
                                g->n_params ? ", " : "", v->name, s);
    emit(g, "  %%%s = %s parameter(%d)", v->name, s, g->n_params++);
    finish(g, v);
    return v;
}

static val *random_param(graph *g) {
    int rank = 1 + rnd(MAXR), dims[MAXR];
    for (int i = 0; i < rank; i++) dims[i] = 1 + rnd(6);
    return param(g, rank, dims);
}

/* A value with the same dims as v (an existing one, or a new parameter). */
static val *same_shape(graph *g, const val *v) {
    for (int t = 0; t < 4; t++) {
        val *w = &g->v[rnd(g->n)];
        if (!w->aux && w->rank == v->rank && memcmp(w->dims, v->dims, sizeof(int) * (size_t)v->rank) == 0)
            return w;
    }
    return param(g, v->rank, v->dims);
}

/* v = element 0 (shape so) + element 1 (s32, shape si) converted, of the pair %<v>.<pair>: so
 * that both results of a key-value sort or an argmax reach the output. */
static void sum_pair(graph *g, val *v, const char *pair, const char *so, const char *si) {
    char sh[320];
    emit(g, "  %%%s.k = %s get-tuple-element(%%%s.%s), index=0%s\n", v->name, so, v->name, pair,
         sharding_attr(g, v->rank, sh, sizeof sh));
    emit(g, "  %%%s.p = %s get-tuple-element(%%%s.%s), index=1\n", v->name, si, v->name, pair);
    emit(g, "  %%%s.c = %s convert(%%%s.p)\n", v->name, so, v->name);
    emit(g, "  %%%s = %s add(%%%s.k, %%%s.c)", v->name, so, v->name, v->name);
    finish(g, v);
}

static void op(graph *g) {
    val *a = &g->v[g->n - 1 - rnd(g->n < 3 ? g->n : 3)];
    for (int i = g->n - 1; a->aux && i >= 0; i--) a = &g->v[i];
    if (a->aux) return;
    char sa[64], so[64];
    int d[MAXR + 1], k = a->rank;
    bool f32 = strcmp(g->ty, "f32") == 0;
    switch (g->dots && rnd(2) ? 6 : rnd(25)) {
    case 0: { /* unary, or a reverse along random dims (split ones, uneven ones), or a
               * bitcast-convert to s16 pairs (a new minor dim of 2) and back */
        if (k < MAXR && rnd(4) == 0) {
            char sh[320];
            val *v = new_val(g, k, a->dims);
            emit(g, "  %%%s.h = s16[", v->name);
            for (int i = 0; i < k; i++) emit(g, "%d,", a->dims[i]);
            emit(g, "2] bitcast-convert(%%%s)%s\n", a->name, sharding_attr(g, k + 1, sh, sizeof sh));
            shape_text(g, v, so, sizeof so);
            emit(g, "  %%%s = %s bitcast-convert(%%%s.h)", v->name, so, v->name);
            finish(g, v);
            break;
        }
        val *v = new_val(g, k, a->dims);
        shape_text(g, v, so, sizeof so);
        if (k > 0 && rnd(3) == 0) {
            emit(g, "  %%%s = %s reverse(%%%s), dimensions={", v->name, so, a->name);
            for (int i = 0, n = 0; i < k; i++)
                if (rnd(2) || (i == k - 1 && n == 0)) emit(g, "%s%d", n++ ? "," : "", i);
            emit(g, "}");
        } else {
            emit(g, "  %%%s = %s %s(%%%s)", v->name, so, f32 && rnd(2) ? "tanh" : "negate",
                 a->name);
        }
        finish(g, v);
        break;
    }
    case 1:
    case 2: { /* binary */
        val *b = same_shape(g, a);
        static const char *ops[] = {"add", "multiply", "maximum", "subtract"};
        val *v = new_val(g, k, a->dims);
        shape_text(g, v, so, sizeof so);
        emit(g, "  %%%s = %s %s(%%%s, %%%s)", v->name, so, ops[rnd(4)], a->name, b->name);
        finish(g, v);
        break;
    }
    case 3: { /* broadcast: a new dim somewhere */
        if (k >= MAXR) return;
        int at = rnd(k + 1), bd[MAXR], nb = 0;
        for (int i = 0, j = 0; i <= k; i++) {
            if (i == at) {
                d[i] = 1 + rnd(4);
            } else {
                d[i] = a->dims[j++];
                bd[nb++] = i;
            }
        }
        val *v = new_val(g, k + 1, d);
        shape_text(g, v, so, sizeof so);
        emit(g, "  %%%s = %s broadcast(%%%s), dimensions={", v->name, so, a->name);
        for (int i = 0; i < nb; i++) emit(g, "%s%d", i ? "," : "", bd[i]);
        emit(g, "}");
        finish(g, v);
        break;
    }
    case 4: { /* reshape: merge two dims, or split one */
        int nr = 0;
        if (k >= 2 && rnd(2)) {
            int at = rnd(k - 1);
            for (int i = 0; i < k; i++) {
                if (i == at) {
                    d[nr++] = a->dims[i] * a->dims[i + 1];
                    i++;
                } else {
                    d[nr++] = a->dims[i];
                }
            }
        } else {
            if (k >= MAXR || k == 0) return;
            int at = rnd(k), n = a->dims[at], f = 1;
            for (int t = 2; t <= n; t++)
                if (n % t == 0 && rnd(2)) {
                    f = t;
                    break;
                }
            for (int i = 0; i < k; i++) {
                if (i == at) {
                    d[nr++] = f;
                    d[nr++] = n / f;
                } else {
                    d[nr++] = a->dims[i];
                }
            }
        }
        val *v = new_val(g, nr, d);
        shape_text(g, v, so, sizeof so);
        emit(g, "  %%%s = %s reshape(%%%s)", v->name, so, a->name);
        finish(g, v);
        break;
    }
    case 5: { /* transpose */
        int p[MAXR];
        for (int i = 0; i < k; i++) p[i] = i;
        for (int i = k - 1; i > 0; i--) {
            int j = rnd(i + 1), t = p[i];
            p[i] = p[j];
            p[j] = t;
        }
        for (int i = 0; i < k; i++) d[i] = a->dims[p[i]];
        val *v = new_val(g, k, d);
        shape_text(g, v, so, sizeof so);
        emit(g, "  %%%s = %s transpose(%%%s), dimensions={", v->name, so, a->name);
        for (int i = 0; i < k; i++) emit(g, "%s%d", i ? "," : "", p[i]);
        emit(g, "}");
        finish(g, v);
        break;
    }
    case 6: { /* dot: contract the last dim (batch over dim 0 sometimes) */
        if (k == 0) return;
        bool batch = k >= 2 && rnd(2);
        int n = 1 + rnd(5), kd = a->dims[k - 1];
        int rd[3], rr = 0;
        if (batch) rd[rr++] = a->dims[0];
        rd[rr++] = kd;
        rd[rr++] = n;
        /* A ragged-dot one time in four: the groups along a free dim of a (the rhs then has a
         * leading group dim), along the contracting dim (a leading group dim in the result),
         * or along the batch dim; group sizes [G] or with their prefix dims, random s32. */
        int mode = rnd(4) == 0 ? rnd(3) : -1, groups = 1 + rnd(4);
        if (mode == 2 && !batch) mode = 1;
        /* (ranks stay within MAXR: the rhs [G, k, n], the result [G, free..., n]) */
        if ((mode == 0 && (batch || k < 2)) || (mode == 1 && k + 1 > MAXR)) mode = -1;
        int ragged = mode == 0 ? batch + rnd(k - 1 - batch) : mode == 1 ? k - 1 : 0;
        if (mode == 0) {
            memmove(rd + 1, rd, sizeof rd[0] * (size_t)rr);
            rd[0] = groups;
            rr++;
        }
        val *b = param(g, rr, rd);
        val *gsz = NULL;
        if (mode >= 0) {
            int gd[MAXR + 1], gr = 0;
            if (rnd(2)) {
                if (batch && mode != 2) gd[gr++] = a->dims[0];
                for (int i = batch; mode == 0 && i < ragged; i++) gd[gr++] = a->dims[i];
            }
            gd[gr++] = groups;
            const char *ty = g->ty;
            g->ty = "s32";
            gsz = gr <= MAXR ? param(g, gr, gd) : NULL;
            g->ty = ty;
            if (gsz) gsz->aux = true;
            else mode = -1;
        }
        int nr = 0;
        if (mode == 1) d[nr++] = groups;
        for (int i = 0; i < k - 1; i++) d[nr++] = a->dims[i];
        d[nr++] = n;
        val *v = new_val(g, nr, d);
        shape_text(g, v, so, sizeof so);
        if (mode >= 0) {
            emit(g, "  %%%s = %s ragged-dot(%%%s, %%%s, %%%s), ", v->name, so, a->name, b->name,
                 gsz->name);
            if (batch) emit(g, "lhs_batch_dims={0}, rhs_batch_dims={%d}, ", mode == 0);
            emit(g, "lhs_contracting_dims={%d}, rhs_contracting_dims={%d}, lhs_ragged_dims={%d}",
                 k - 1, batch + (mode == 0), ragged);
            if (mode == 0) emit(g, ", rhs_group_dims={0}");
        } else if (batch)
            emit(g, "  %%%s = %s dot(%%%s, %%%s), lhs_batch_dims={0}, rhs_batch_dims={0}, "
                    "lhs_contracting_dims={%d}, rhs_contracting_dims={1}",
                 v->name, so, a->name, b->name, k - 1);
        else
            emit(g, "  %%%s = %s dot(%%%s, %%%s), lhs_contracting_dims={%d}, "
                    "rhs_contracting_dims={0}",
                 v->name, so, a->name, b->name, k - 1);
        finish(g, v);
        break;
    }
    case 7: { /* reduce */
        if (k == 0) return;
        bool red[MAXR] = {0}, any = false;
        for (int i = 0; i < k; i++) any |= red[i] = rnd(2);
        if (!any) red[rnd(k)] = true;
        int nr = 0;
        for (int i = 0; i < k; i++)
            if (!red[i]) d[nr++] = a->dims[i];
        val *v = new_val(g, nr, d);
        shape_text(g, v, so, sizeof so);
        bool mx = rnd(2);
        emit(g, "  %%%s.init = %s[] constant(%s)\n", v->name, g->ty,
             mx ? (f32 ? "-inf" : "-2147483648") : (rnd(4) ? "0" : "1"));
        emit(g, "  %%%s = %s reduce(%%%s, %%%s.init), dimensions={", v->name, so, a->name, v->name);
        for (int i = 0, c = 0; i < k; i++)
            if (red[i]) emit(g, "%s%d", c++ ? "," : "", i);
        emit(g, "}, to_apply=%%%s", mx ? "max" : "sum");
        finish(g, v);
        break;
    }
    case 8: { /* slice */
        if (k == 0) return;
        int at = rnd(k), n = a->dims[at];
        int st = rnd(n), lim = st + 1 + rnd(n - st), stride = 1 + rnd(2);
        for (int i = 0; i < k; i++) d[i] = a->dims[i];
        d[at] = (lim - st + stride - 1) / stride;
        val *v = new_val(g, k, d);
        shape_text(g, v, so, sizeof so);
        emit(g, "  %%%s = %s slice(%%%s), slice={", v->name, so, a->name);
        for (int i = 0; i < k; i++) {
            if (i == at) emit(g, "%s[%d:%d:%d]", i ? ", " : "", st, lim, stride);
            else emit(g, "%s[0:%d]", i ? ", " : "", a->dims[i]);
        }
        emit(g, "}");
        finish(g, v);
        break;
    }
    case 9: { /* pad */
        if (k == 0) return;
        int lo[MAXR], hi[MAXR], in[MAXR];
        for (int i = 0; i < k; i++) {
            bool on = rnd(2);
            lo[i] = on ? rnd(3) - (a->dims[i] > 2 && rnd(4) == 0) : 0;
            hi[i] = on ? rnd(3) : 0;
            in[i] = on ? rnd(3) : 0;
            d[i] = lo[i] + hi[i] + a->dims[i] + (a->dims[i] - 1) * in[i];
        }
        val *v = new_val(g, k, d);
        shape_text(g, v, so, sizeof so);
        emit(g, "  %%%s.pv = %s[] constant(%d)\n", v->name, g->ty, rnd(3));
        emit(g, "  %%%s = %s pad(%%%s, %%%s.pv), padding=", v->name, so, a->name, v->name);
        for (int i = 0; i < k; i++) {
            emit(g, "%s%d_%d", i ? "x" : "", lo[i], hi[i]);
            if (in[i]) emit(g, "_%d", in[i]);
        }
        finish(g, v);
        break;
    }
    case 11: { /* sort along a dim (keys only, or keys and an iota, stable) */
        if (k == 0) return;
        int at = rnd(k);
        val *v = new_val(g, k, a->dims);
        shape_text(g, v, so, sizeof so);
        if (rnd(2)) {
            emit(g, "  %%%s = %s sort(%%%s), dimensions={%d}, to_apply=%%lt", v->name, so,
                 a->name, at);
            finish(g, v);
            break;
        }
        char si[64], sh[320];
        snprintf(si, sizeof si, "s32%s", strchr(so, '['));
        emit(g, "  %%%s.i = %s iota(), iota_dimension=%d%s\n", v->name, si, at,
             sharding_attr(g, k, sh, sizeof sh));
        emit(g, "  %%%s.s = (%s, %s) sort(%%%s, %%%s.i), dimensions={%d}, is_stable=true, "
                "to_apply=%%lt2\n", v->name, so, si, a->name, v->name, at);
        sum_pair(g, v, "s", so, si);
        break;
    }
    case 21: { /* argmax: a variadic reduce of (value, iota index) pairs, ties to the lower index
                * and NaN the largest value (a total order, so the reducer is associative) */
        if (k == 0) return;
        int at = rnd(k), nr = 0;
        for (int i = 0; i < k; i++)
            if (i != at) d[nr++] = a->dims[i];
        val *v = new_val(g, nr, d);
        shape_text(g, v, so, sizeof so);
        char si[64], sh[320];
        shape_text(g, a, sa, sizeof sa);
        snprintf(si, sizeof si, "s32%s", strchr(sa, '['));
        char ri[64];
        snprintf(ri, sizeof ri, "s32%s", strchr(so, '['));
        emit(g, "  %%%s.i = %s iota(), iota_dimension=%d%s\n", v->name, si, at,
             sharding_attr(g, k, sh, sizeof sh));
        emit(g, "  %%%s.init = %s[] constant(%s)\n", v->name, g->ty,
             f32 ? "-inf" : "-2147483648");
        emit(g, "  %%%s.zero = s32[] constant(0)\n", v->name);
        emit(g, "  %%%s.r = (%s, %s) reduce(%%%s, %%%s.i, %%%s.init, %%%s.zero), dimensions={%d}, "
                "to_apply=%%argmax\n", v->name, so, ri, a->name, v->name, v->name, v->name, at);
        sum_pair(g, v, "r", so, ri);
        break;
    }
    case 12: { /* 1-D convolution: [batch, spatial, feature] x [window, in, out], with random
                * padding (negative too), stride, window and base dilation, window reversal */
        if (k != 3) return;
        const char *rev = rnd(3) == 0 ? " rhs_reversal=1" : "";
        if (rnd(3) == 0) {
            /* A filter gradient: the lhs read as [in feature, spatial, batch], and a second
             * array [in feature, spatial', out] the kernel whose whole extent is the window (so
             * the kernel window splits, evenly or not, when both arrays are split); with base
             * dilation, padding (negative too), stride and reversal. */
            int rd = 1 + rnd(2), ld = rnd(4) == 0 ? 2 : 1, st = rnd(4) == 0 ? 2 : 1;
            int lo = rnd(3) - (rnd(5) == 0), hi = rnd(3) - (rnd(5) == 0), o = 1 + rnd(3);
            int n_in = (a->dims[1] - 1) * ld + 1 + lo + hi;
            if (n_in < 1) return;
            int w = 1 + rnd((n_in - 1) / rd + 1), eff = (w - 1) * rd + 1;
            /* batch groups (a grouped convolution's filter gradient): a random divisor of
             * the batch, each group's batch convolved with its own output features */
            int bg = 1, nb = a->dims[2];
            for (int f = nb; f > 1; f--)
                if (nb % f == 0 && rnd(3) == 0) {
                    bg = f;
                    break;
                }
            int kd[3] = {a->dims[0], w, o * bg};
            val *kern = param(g, 3, kd);
            d[0] = (n_in - eff) / st + 1;
            d[1] = nb / bg;
            d[2] = o * bg;
            val *v = new_val(g, 3, d);
            shape_text(g, v, so, sizeof so);
            emit(g,
                 "  %%%s = %s convolution(%%%s, %%%s), window={size=%d stride=%d pad=%d_%d "
                 "lhs_dilate=%d rhs_dilate=%d%s}, dim_labels=f0b_i0o->0bf, batch_group_count=%d",
                 v->name, so, a->name, kern->name, w, st, lo, hi, ld, rd, rev, bg);
            finish(g, v);
            break;
        }
        int w = 1 + rnd(3), st = 1 + rnd(3), rd = 1 + rnd(2), ld = rnd(4) == 0 ? 2 : 1;
        int lo = rnd(w + 1) - (rnd(5) == 0), hi = rnd(w + 1) - (rnd(5) == 0), o = 1 + rnd(4);
        if (rnd(6) == 0 && a->dims[1] > 1) {
            /* A dot's batch dim written as a convolution (window n, base dilation n, stride
             * n - 1 over n elements: window j meets element j at kernel position j). */
            w = ld = a->dims[1];
            st = w - 1;
            rd = 1;
            lo = hi = 0;
            rev = "";
        }
        int n_in = (a->dims[1] - 1) * ld + 1 + lo + hi, eff = (w - 1) * rd + 1;
        if (n_in < eff) return;
        int groups = 1, cin = a->dims[2];
        for (int f = cin; f > 1; f--) /* feature groups: a random divisor of the features */
            if (cin % f == 0 && rnd(3) == 0) {
                groups = f;
                break;
            }
        int kd[3] = {w, cin / groups, o * groups};
        val *kern = param(g, 3, kd);
        d[0] = a->dims[0];
        d[1] = (n_in - eff) / st + 1;
        d[2] = o * groups;
        val *v = new_val(g, 3, d);
        shape_text(g, v, so, sizeof so);
        emit(g, "  %%%s = %s convolution(%%%s, %%%s), window={size=%d stride=%d pad=%d_%d "
                "lhs_dilate=%d rhs_dilate=%d%s}, dim_labels=b0f_0io->b0f, feature_group_count=%d",
             v->name, so, a->name, kern->name, w, st, lo, hi, ld, rd, rev, groups);
        finish(g, v);
        break;
    }
    case 13: { /* call: the callee applies two elementwise ops, sharded inside at random */
        int id = g->n_comps++;
        char sh[300], sb[300];
        shape_text(g, a, sh, sizeof sh);
        emit_comp(g, "%%c%d (p: %s) -> %s {\n  %%c%d.p = %s parameter(0)%s\n", id, sh, sh, id, sh,
                  sharding_attr(g, k, sb, sizeof sb));
        char x[32], y[32];
        snprintf(x, sizeof x, "c%d.p", id);
        snprintf(y, sizeof y, "c%d.x", id);
        comp_op(g, y, sh, x, k);
        emit_comp(g, "  ROOT %%c%d.r = %s add(%%%s, %%%s)%s\n}\n\n", id, sh, y, x,
                  sharding_attr(g, k, sb, sizeof sb));
        val *v = new_val(g, k, a->dims);
        emit(g, "  %%%s = %s call(%%%s), to_apply=%%c%d", v->name, sh, a->name, id);
        finish(g, v);
        break;
    }
    case 14: { /* while: 0-3 iterations of an elementwise op on a carried value */
        int id = g->n_comps++, trips = rnd(4);
        char sh[300], st[400], sb[300], ls[300] = "", inner[256];
        shape_text(g, a, sh, sizeof sh);
        snprintf(st, sizeof st, "(s32[], %s)", sh);
        /* One loop sharding on the while and its body and condition parameters (or none). */
        if (random_sharding(g->m, k, inner, sizeof inner))
            snprintf(ls, sizeof ls, ", sharding={{replicated}, %s}", inner);
        emit_comp(g, "%%w%d.cond (s: %s) -> pred[] {\n  %%w%d.cs = %s parameter(0)%s\n"
                     "  %%w%d.ci = s32[] get-tuple-element(%%w%d.cs), index=0\n"
                     "  %%w%d.cn = s32[] constant(%d)\n"
                     "  ROOT %%w%d.cl = pred[] compare(%%w%d.ci, %%w%d.cn), direction=LT\n}\n\n",
                  id, st, id, st, rnd(2) ? ls : "", id, id, id, trips, id, id, id);
        emit_comp(g, "%%w%d.body (s: %s) -> %s {\n  %%w%d.bs = %s parameter(0)%s\n"
                     "  %%w%d.bi = s32[] get-tuple-element(%%w%d.bs), index=0\n"
                     "  %%w%d.bx = %s get-tuple-element(%%w%d.bs), index=1%s\n"
                     "  %%w%d.one = s32[] constant(1)\n"
                     "  %%w%d.bj = s32[] add(%%w%d.bi, %%w%d.one)\n",
                  id, st, st, id, st, rnd(2) ? ls : "", id, id, id, sh, id,
                  sharding_attr(g, k, sb, sizeof sb), id, id, id, id);
        char x[32], y[32];
        snprintf(x, sizeof x, "w%d.bx", id);
        snprintf(y, sizeof y, "w%d.by", id);
        comp_op(g, y, sh, x, k);
        emit_comp(g, "  ROOT %%w%d.bt = %s tuple(%%w%d.bj, %%w%d.by)%s\n}\n\n", id, st, id, id,
                  rnd(2) ? ls : "");
        val *v = new_val(g, k, a->dims);
        emit(g, "  %%%s.z = s32[] constant(0)\n  %%%s.t = %s tuple(%%%s.z, %%%s)\n", v->name,
             v->name, st, v->name, a->name);
        emit(g, "  %%%s.w = %s while(%%%s.t), condition=%%w%d.cond, body=%%w%d.body%s\n", v->name,
             st, v->name, id, id, ls);
        emit(g, "  %%%s = %s get-tuple-element(%%%s.w), index=1", v->name, sh, v->name);
        finish(g, v);
        break;
    }
    case 15: { /* conditional on a selector parameter: 2-3 branches (index) or 2 (predicate) */
        int id = g->n_comps++, nb = 2 + rnd(2);
        bool pred = rnd(3) == 0;
        if (pred) nb = 2;
        char sh[300], sb[300];
        shape_text(g, a, sh, sizeof sh);
        char sel[32]; /* a parameter outside the graph's values (not of its type) */
        snprintf(sel, sizeof sel, "k%d.sel", id);
        g->plen += (size_t)snprintf(g->params + g->plen, sizeof g->params - g->plen, "%s%s: %s[]",
                                    g->n_params ? ", " : "", sel, pred ? "pred" : "s32");
        emit(g, "  %%%s = %s[] parameter(%d)", sel, pred ? "pred" : "s32", g->n_params++);
        emit(g, "%s\n", sharding_attr(g, 0, sb, sizeof sb));
        for (int b = 0; b < nb; b++) {
            emit_comp(g, "%%k%d.b%d (p: %s) -> %s {\n  %%k%d.b%d.p = %s parameter(0)%s\n", id, b, sh,
                      sh, id, b, sh, sharding_attr(g, k, sb, sizeof sb));
            char x[32], y[32];
            snprintf(x, sizeof x, "k%d.b%d.p", id, b);
            snprintf(y, sizeof y, "k%d.b%d.r", id, b);
            comp_op(g, y, sh, x, k);
            emit_comp(g, "  ROOT %%k%d.b%d.o = %s copy(%%%s)\n}\n\n", id, b, sh, y);
        }
        val *v = new_val(g, k, a->dims);
        emit(g, "  %%%s = %s conditional(%%%s", v->name, sh, sel);
        for (int b = 0; b < nb; b++) emit(g, ", %%%s", a->name);
        if (pred) {
            emit(g, "), true_computation=%%k%d.b0, false_computation=%%k%d.b1", id, id);
        } else {
            emit(g, "), branch_computations={");
            for (int b = 0; b < nb; b++) emit(g, "%s%%k%d.b%d", b ? ", " : "", id, b);
            emit(g, "}");
        }
        finish(g, v);
        break;
    }
    case 16:   /* dynamic-slice: random sizes (often one element), clamped random indices */
    case 17: { /* dynamic-update-slice of a new parameter of those sizes */
        if (k == 0) return;
        int sz[MAXR], idx[MAXR];
        for (int i = 0; i < k; i++) {
            sz[i] = rnd(2) ? 1 : 1 + rnd(a->dims[i]);
            idx[i] = rnd(a->dims[i] + 4) - 2;
        }
        bool update = rnd(2);
        val *u = NULL;
        if (update) u = param(g, k, sz);
        val *v = new_val(g, k, update ? a->dims : sz);
        shape_text(g, v, so, sizeof so);
        for (int i = 0; i < k; i++)
            emit(g, "  %%%s.i%d = s32[] constant(%d)\n", v->name, i, idx[i]);
        if (update)
            emit(g, "  %%%s = %s dynamic-update-slice(%%%s, %%%s", v->name, so, a->name, u->name);
        else
            emit(g, "  %%%s = %s dynamic-slice(%%%s", v->name, so, a->name);
        for (int i = 0; i < k; i++) emit(g, ", %%%s.i%d", v->name, i);
        emit(g, ")");
        if (!update) {
            emit(g, ", dynamic_slice_sizes={");
            for (int i = 0; i < k; i++) emit(g, "%s%d", i ? "," : "", sz[i]);
            emit(g, "}");
        }
        finish(g, v);
        break;
    }
    case 18: { /* reduce-window: a random window on every dim, sum or max */
        if (k == 0) return;
        int ws[MAXR], st[MAXR], lo[MAXR], hi[MAXR], bd[MAXR], rdl[MAXR];
        for (int i = 0; i < k; i++) {
            ws[i] = 1 + rnd(3);
            st[i] = 1 + rnd(2);
            lo[i] = rnd(3);
            hi[i] = rnd(3);
            bd[i] = rnd(6) == 0 ? 2 : 1;
            rdl[i] = rnd(6) == 0 ? 2 : 1;
            int n_in = (a->dims[i] - 1) * bd[i] + 1 + lo[i] + hi[i], eff = (ws[i] - 1) * rdl[i] + 1;
            if (n_in < eff) return;
            d[i] = (n_in - eff) / st[i] + 1;
        }
        val *v = new_val(g, k, d);
        shape_text(g, v, so, sizeof so);
        bool mx = rnd(2);
        emit(g, "  %%%s.init = %s[] constant(%s)\n", v->name, g->ty,
             mx ? (f32 ? "-inf" : "-2147483648") : (rnd(4) ? "0" : "1"));
        emit(g, "  %%%s = %s reduce-window(%%%s, %%%s.init), window={size=", v->name, so, a->name,
             v->name);
        for (int i = 0; i < k; i++) emit(g, "%s%d", i ? "x" : "", ws[i]);
        emit(g, " stride=");
        for (int i = 0; i < k; i++) emit(g, "%s%d", i ? "x" : "", st[i]);
        emit(g, " pad=");
        for (int i = 0; i < k; i++) emit(g, "%s%d_%d", i ? "x" : "", lo[i], hi[i]);
        emit(g, " lhs_dilate=");
        for (int i = 0; i < k; i++) emit(g, "%s%d", i ? "x" : "", bd[i]);
        emit(g, " rhs_dilate=");
        for (int i = 0; i < k; i++) emit(g, "%s%d", i ? "x" : "", rdl[i]);
        emit(g, "}, to_apply=%%%s", mx ? "max" : "sum");
        finish(g, v);
        break;
    }
    case 22: { /* select-and-scatter (max-pool backward): random windows, strides (wider or
                * narrower than the window), sometimes padding, selecting the larger or the smaller; the
                * source a new parameter */
        if (k == 0) return;
        int ws[MAXR], st[MAXR], lo[MAXR], hi[MAXR], sd[MAXR] = {0};
        for (int i = 0; i < k; i++) {
            ws[i] = 1 + rnd(3);
            st[i] = 1 + rnd(3);
            lo[i] = rnd(5) == 0 ? rnd(2) : 0;
            hi[i] = rnd(5) == 0 ? rnd(2) : 0;
            int n_in = a->dims[i] + lo[i] + hi[i];
            if (n_in < ws[i]) return;
            sd[i] = (n_in - ws[i]) / st[i] + 1;
        }
        val *src = param(g, k, sd);
        val *v = new_val(g, k, a->dims);
        shape_text(g, v, so, sizeof so);
        emit(g, "  %%%s.init = %s[] constant(%d)\n", v->name, g->ty, rnd(3) ? 0 : 1);
        emit(g, "  %%%s = %s select-and-scatter(%%%s, %%%s, %%%s.init), window={size=", v->name,
             so, a->name, src->name, v->name);
        for (int i = 0; i < k; i++) emit(g, "%s%d", i ? "x" : "", ws[i]);
        emit(g, " stride=");
        for (int i = 0; i < k; i++) emit(g, "%s%d", i ? "x" : "", st[i]);
        emit(g, " pad=");
        for (int i = 0; i < k; i++) emit(g, "%s%d_%d", i ? "x" : "", lo[i], hi[i]);
        emit(g, "}, select=%%%s, scatter=%%sum", rnd(3) ? "ge" : "lt");
        finish(g, v);
        break;
    }
    case 23: { /* batch-norm-training (or -inference) over a random feature dim; the output
                * plus the batch mean broadcast back, so both statistics paths reach it */
        if (k < 2 || !f32) return;
        int fi = rnd(k), c = a->dims[fi];
        int cd[1] = {c};
        val *sc = param(g, 1, cd), *of = param(g, 1, cd);
        val *v = new_val(g, k, a->dims);
        shape_text(g, v, so, sizeof so);
        char sh[320];
        if (rnd(3) == 0) {
            val *mu = param(g, 1, cd), *var = param(g, 1, cd);
            emit(g, "  %%%s.vp = f32[%d] multiply(%%%s, %%%s)\n", v->name, c, var->name,
                 var->name);
            emit(g, "  %%%s = %s batch-norm-inference(%%%s, %%%s, %%%s, %%%s, %%%s.vp), "
                    "epsilon=0.5, feature_index=%d", v->name, so, a->name, sc->name, of->name,
                 mu->name, v->name, fi);
            finish(g, v);
            break;
        }
        emit(g, "  %%%s.bn = (%s, f32[%d], f32[%d]) batch-norm-training(%%%s, %%%s, %%%s), "
                "epsilon=0.001, feature_index=%d\n", v->name, so, c, c, a->name, sc->name,
             of->name, fi);
        emit(g, "  %%%s.y = %s get-tuple-element(%%%s.bn), index=0%s\n", v->name, so, v->name,
             sharding_attr(g, k, sh, sizeof sh));
        emit(g, "  %%%s.m = f32[%d] get-tuple-element(%%%s.bn), index=1\n", v->name, c, v->name);
        emit(g, "  %%%s.mb = %s broadcast(%%%s.m), dimensions={%d}\n", v->name, so, v->name, fi);
        emit(g, "  %%%s = %s add(%%%s.y, %%%s.mb)", v->name, so, v->name, v->name);
        finish(g, v);
        break;
    }
    case 19:   /* gather: random indexed dims, collapsed or sliced, out-of-range indices */
    case 20: { /* scatter: random inserted / window dims, add, max or overwrite */
        if (k == 0) return;
        bool scatter = rnd(2);
        int indexed[MAXR], ni = 0, win[MAXR], nb = 1 + rnd(2), bdims[2];
        bool collapsed[MAXR] = {0};
        for (int i = 0; i < k; i++) {
            bool idx = rnd(2) || (i == k - 1 && ni == 0);
            if (idx) indexed[ni++] = i;
            collapsed[i] = idx && rnd(5) < 3;
            win[i] = collapsed[i] ? 1 : rnd(2) ? a->dims[i] : 1 + rnd(a->dims[i]);
        }
        for (int i = 0; i < nb; i++) bdims[i] = 1 + rnd(4);
        int id = g->n_comps++;
        char ixn[32], ixs[64];
        snprintf(ixn, sizeof ixn, "g%d.idx", id);
        bool implicit = ni == 1 && rnd(2); /* index_vector_dim = rank: one index per position */
        /* Index component it_c (of a collapsed dim) an iota along batch dim it_b of the dim's
         * size: an index-parallel dim (XLA's GetGatherScatterBatchParallelDims). */
        int it_c = -1, it_b = rnd(nb);
        if (!implicit && rnd(3) == 0)
            for (int j = 0; j < ni; j++)
                if (collapsed[indexed[j]] && (it_c < 0 || rnd(2))) it_c = j;
        if (it_c >= 0) bdims[it_b] = a->dims[indexed[it_c]];
        int k2 = snprintf(ixs, sizeof ixs, "s32[");
        for (int i = 0; i < nb; i++) k2 += snprintf(ixs + k2, sizeof ixs - (size_t)k2, "%s%d", i ? "," : "", bdims[i]);
        if (!implicit) k2 += snprintf(ixs + k2, sizeof ixs - (size_t)k2, ",%d", ni);
        snprintf(ixs + k2, sizeof ixs - (size_t)k2, "]");
        char pxn[40];
        snprintf(pxn, sizeof pxn, it_c >= 0 ? "g%d.pidx" : "g%d.idx", id);
        g->plen += (size_t)snprintf(g->params + g->plen, sizeof g->params - g->plen, "%s%s: %s",
                                    g->n_params ? ", " : "", pxn, ixs);
        char sb[300];
        emit(g, "  %%%s = %s parameter(%d)%s\n", pxn, ixs, g->n_params++,
             sharding_attr(g, implicit ? nb : nb + 1, sb, sizeof sb));
        if (it_c >= 0) {
            /* The parameter's components before and after it_c around the iota. */
            char bs[48] = "";
            for (int i = 0, n = 0; i < nb; i++)
                n += snprintf(bs + n, sizeof bs - (size_t)n, "%d,", bdims[i]);
            const char *ops[3];
            char names[3][48];
            int nops = 0;
            if (it_c > 0) {
                snprintf(names[nops], sizeof names[nops], "%s.lo", ixn);
                emit(g, "  %%%s = s32[%s%d] slice(%%%s), slice={", names[nops], bs, it_c, pxn);
                for (int i = 0; i < nb; i++) emit(g, "[0:%d], ", bdims[i]);
                emit(g, "[0:%d]}\n", it_c);
                ops[nops] = names[nops];
                nops++;
            }
            snprintf(names[nops], sizeof names[nops], "%s.it", ixn);
            emit(g, "  %%%s = s32[%s1] iota(), iota_dimension=%d%s\n", names[nops], bs, it_b,
                 sharding_attr(g, nb + 1, sb, sizeof sb));
            ops[nops] = names[nops];
            nops++;
            if (it_c + 1 < ni) {
                snprintf(names[nops], sizeof names[nops], "%s.hi", ixn);
                emit(g, "  %%%s = s32[%s%d] slice(%%%s), slice={", names[nops], bs, ni - it_c - 1,
                     pxn);
                for (int i = 0; i < nb; i++) emit(g, "[0:%d], ", bdims[i]);
                emit(g, "[%d:%d]}\n", it_c + 1, ni);
                ops[nops] = names[nops];
                nops++;
            }
            emit(g, "  %%%s = %s concatenate(", ixn, ixs);
            for (int i = 0; i < nops; i++) emit(g, "%s%%%s", i ? ", " : "", ops[i]);
            emit(g, "), dimensions={%d}%s\n", nb, sharding_attr(g, nb + 1, sb, sizeof sb));
        }
        /* The window dims of the gathered (or scattered) slices: at random positions among the
         * batch dims, in order. */
        int nw = 0, wdims[MAXR];
        for (int i = 0; i < k; i++)
            if (!collapsed[i]) wdims[nw++] = win[i];
        int rr = nb + nw, pos_w[MAXR + 2], pw = 0, sd[MAXR + 2];
        bool is_w[MAXR + 2] = {0};
        for (int i = 0, left = nw; i < rr; i++) {
            bool take = left > 0 && (rr - i == left || rnd(2));
            is_w[i] = take;
            if (take) left--;
        }
        for (int i = 0, bi = 0, wi = 0; i < rr; i++) {
            if (is_w[i]) {
                pos_w[pw++] = i;
                sd[i] = wdims[wi++];
            } else {
                sd[i] = bdims[bi++];
            }
        }
        char list_w[64] = "", list_c[64] = "", list_m[64] = "";
        for (int i = 0, n = 0; i < pw; i++)
            n += snprintf(list_w + n, sizeof list_w - (size_t)n, "%s%d", i ? "," : "", pos_w[i]);
        for (int i = 0, n = 0, c = 0; i < k; i++)
            if (collapsed[i]) n += snprintf(list_c + n, sizeof list_c - (size_t)n, "%s%d", c++ ? "," : "", i);
        for (int i = 0, n = 0; i < ni; i++)
            n += snprintf(list_m + n, sizeof list_m - (size_t)n, "%s%d", i ? "," : "", indexed[i]);
        int ivd = implicit ? nb : nb;
        if (!scatter) {
            if (rr > MAXR) return;
            val *v = new_val(g, rr, sd);
            shape_text(g, v, so, sizeof so);
            emit(g, "  %%%s = %s gather(%%%s, %%%s), offset_dims={%s}, collapsed_slice_dims={%s}, "
                    "start_index_map={%s}, index_vector_dim=%d, slice_sizes={", v->name, so,
                 a->name, ixn, list_w, list_c, list_m, ivd);
            for (int i = 0; i < k; i++) emit(g, "%s%d", i ? "," : "", win[i]);
            emit(g, "}");
            finish(g, v);
        } else {
            if (rr > MAXR + 1) return;
            char us[64];
            int n = snprintf(us, sizeof us, "%s[", g->ty);
            for (int i = 0; i < rr; i++) n += snprintf(us + n, sizeof us - (size_t)n, "%s%d", i ? "," : "", sd[i]);
            snprintf(us + n, sizeof us - (size_t)n, "]");
            char un[32];
            snprintf(un, sizeof un, "g%d.upd", id);
            g->plen += (size_t)snprintf(g->params + g->plen, sizeof g->params - g->plen, "%s%s: %s",
                                        g->n_params ? ", " : "", un, us);
            emit(g, "  %%%s = %s parameter(%d)%s\n", un, us, g->n_params++,
                 sharding_attr(g, rr, sb, sizeof sb));
            static const char *comb[] = {"sum", "max", "ovr"};
            val *v = new_val(g, k, a->dims);
            shape_text(g, v, so, sizeof so);
            emit(g, "  %%%s = %s scatter(%%%s, %%%s, %%%s), update_window_dims={%s}, "
                    "inserted_window_dims={%s}, scatter_dims_to_operand_dims={%s}, "
                    "index_vector_dim=%d, to_apply=%%%s", v->name, so, a->name, ixn, un, list_w,
                 list_c, list_m, ivd, comb[rnd(3)]);
            finish(g, v);
        }
        break;
    }
    case 24: { /* rng of a's shape (uniform, or normal for f32), added to a: every device's
                * draws must stay the reference's, whatever the rng's sharding */
        val *r = new_val(g, k, a->dims);
        shape_text(g, r, so, sizeof so);
        emit(g, "  %%%s.lo = %s[] constant(0)\n  %%%s.hi = %s[] constant(%d)\n", r->name, g->ty,
             r->name, g->ty, f32 ? 1 : 5);
        emit(g, "  %%%s = %s rng(%%%s.lo, %%%s.hi), distribution=%s", r->name, so, r->name,
             r->name, f32 && rnd(2) ? "rng_normal" : "rng_uniform");
        finish(g, r);
        val *v = new_val(g, k, a->dims);
        emit(g, "  %%%s = %s add(%%%s, %%%s)", v->name, so, a->name, r->name);
        finish(g, v);
        break;
    }
    case 10: { /* concatenate */
        if (k == 0) return;
        val *b = same_shape(g, a);
        int at = rnd(k);
        for (int i = 0; i < k; i++) d[i] = a->dims[i] * (i == at ? 2 : 1);
        val *v = new_val(g, k, d);
        shape_text(g, v, so, sizeof so);
        shape_text(g, a, sa, sizeof sa);
        emit(g, "  %%%s = %s concatenate(%%%s, %%%s), dimensions={%d}", v->name, so, a->name,
             b->name, at);
        finish(g, v);
        break;
    }
    }
}

/* Builds a random module; returns its text (static storage) and the device count. */
/* cap: at most that many ops (a prefix of the same graph, for minimising a failure); 0: all. */
static const char *random_module(graph *g, mesh *m, bool dots, int cap) {
    memset(g, 0, sizeof *g);
    g->dots = dots;
    random_mesh(m);
    g->m = m;
    g->ty = rnd(5) == 0 ? "s32" : "f32";
    random_param(g);
    int n_ops = 1 + rnd(7);
    if (cap > 0 && cap < n_ops) n_ops = cap;
    for (int i = 0; i < n_ops && g->n < MAXV - 4; i++) op(g);
    g->n_ops = n_ops;
    const val *last = &g->v[g->n - 1];
    char body[16384];
    memcpy(body, g->text, g->len + 1);
    char rs[64];
    shape_text(g, last, rs, sizeof rs);
    static char out[40000];
    snprintf(out, sizeof out,
             "HloModule prop\n\n"
             "%%sum (x: %s[], y: %s[]) -> %s[] {\n  %%x = %s[] parameter(0)\n"
             "  %%y = %s[] parameter(1)\n  ROOT %%r = %s[] add(%%x, %%y)\n}\n\n"
             "%%max (x: %s[], y: %s[]) -> %s[] {\n  %%x = %s[] parameter(0)\n"
             "  %%y = %s[] parameter(1)\n  ROOT %%r = %s[] maximum(%%x, %%y)\n}\n\n"
             "%%lt (x: %s[], y: %s[]) -> pred[] {\n  %%x = %s[] parameter(0)\n"
             "  %%y = %s[] parameter(1)\n  ROOT %%r = pred[] compare(%%x, %%y), direction=LT\n}\n\n"
             "%%ovr (x: %s[], y: %s[]) -> %s[] {\n  %%x = %s[] parameter(0)\n"
             "  ROOT %%y = %s[] parameter(1)\n}\n\n"
             "%%ge (x: %s[], y: %s[]) -> pred[] {\n  %%x = %s[] parameter(0)\n"
             "  %%y = %s[] parameter(1)\n  ROOT %%r = pred[] compare(%%x, %%y), direction=GE\n}\n\n"
             "%%lt2 (x: %s[], y: %s[], xi: s32[], yi: s32[]) -> pred[] {\n"
             "  %%x = %s[] parameter(0)\n  %%y = %s[] parameter(1)\n"
             "  %%xi = s32[] parameter(2)\n  %%yi = s32[] parameter(3)\n"
             "  ROOT %%r = pred[] compare(%%x, %%y), direction=LT\n}\n\n"
             "%%argmax (x: %s[], xi: s32[], y: %s[], yi: s32[]) -> (%s[], s32[]) {\n"
             "  %%x = %s[] parameter(0)\n  %%xi = s32[] parameter(1)\n"
             "  %%y = %s[] parameter(2)\n  %%yi = s32[] parameter(3)\n"
             "  %%gt = pred[] compare(%%x, %%y), direction=GT\n"
             "  %%eq = pred[] compare(%%x, %%y), direction=EQ\n"
             "  %%lo = pred[] compare(%%xi, %%yi), direction=LT\n"
             "  %%tie = pred[] and(%%eq, %%lo)\n  %%win = pred[] or(%%gt, %%tie)\n"
             "  %%xn = pred[] compare(%%x, %%x), direction=NE\n"
             "  %%yn = pred[] compare(%%y, %%y), direction=NE\n"
             "  %%ynot = pred[] not(%%yn)\n  %%nlo = pred[] or(%%ynot, %%lo)\n"
             "  %%xnan = pred[] and(%%xn, %%nlo)\n  %%num = pred[] and(%%ynot, %%win)\n"
             "  %%pick = pred[] or(%%xnan, %%num)\n"
             "  %%m = %s[] select(%%pick, %%x, %%y)\n  %%i = s32[] select(%%pick, %%xi, %%yi)\n"
             "  ROOT %%r = (%s[], s32[]) tuple(%%m, %%i)\n}\n\n"
             "%s"
             "ENTRY %%main (%s) -> %s {\n%s  ROOT %%out = %s copy(%%%s)%s%s\n}\n",
             g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty,
             g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty,
             g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty, g->ty,
             g->comps, g->params, rs,
             body, rs, last->name, "", "");
    /* The root gets a random sharding too. */
    char sh[256];
    if (random_sharding(m, last->rank, sh, sizeof sh)) {
        size_t n = strlen(out);
        snprintf(out + n - 3, sizeof out - n + 3, ", sharding=%s\n}\n", sh);
    }
    return out;
}

/* Runs p on the MPI backend, k devices per rank (a new communicator per case); every rank
 * must agree that the run succeeded, or the ones that did would wait on the others. */
static gs_status run_mpi(const gs_module *mod, const gs_module *p, int k, gs_value *const *args,
                         int n_args, gs_value **got, gs_diags *d) {
    gs_comm *comm = gs_comm_mpi_new(k, 30, d);
    if (!comm) return GS_ERR;
    gs_status st = gs_run_sharded(mod, p, comm, args, n_args, 1, got, d);
    bool all_ok = false;
    if (!gs_mpi_agree(comm, st == GS_OK, &all_ok)) {
        fprintf(stderr, "rank %d: a rank never finished its case; stopping\n", gs_mpi_rank());
        gs_mpi_exit_now();
    }
    comm->ops->free(comm);
    return all_ok ? GS_OK : GS_ERR;
}

static void seed_case(uint64_t seed, int it) {
    rng_state = seed * 0x9E3779B97F4A7C15ull + (uint64_t)it * 0x2545F4914F6CDD1Dull + 1;
}

/* One generated case and what checking it left behind (freed by case_free). */
typedef struct one_case {
    const char *hlo;
    const mesh *m;
    bool windowed, mpi;
    int it, ranks, rank;  /* shardy_case(it): Shardy's propagation first */
    bool ran_mpi; /* it ran on the MPI backend */
    gs_source *src;
    gs_diags d;
    gs_module *mod, *p;
    gs_value **args, *got;
    int n_args;
} one_case;

static void case_free(one_case *c) {
    gs_value_free(c->got);
    for (int i = 0; i < c->n_args; i++) gs_value_free(c->args[i]);
    free(c->args);
    gs_diags_free(&c->d);
    gs_module_free(c->p);
    gs_module_free(c->mod);
    gs_source_free(c->src);
}

static const char *check_autoshard(one_case *c, double *worst_error);
static int n_autoshard; /* cases whose autoshard property held */

/* Parses, partitions, runs and compares one case: NULL when it passes, else what failed. */
static const char *check_case(one_case *c, double *worst_error) {
    const mesh *m = c->m;
    c->src = gs_source_from_string("prop.hlo", c->hlo);
    c->mod = gs_parse_module(c->src, &c->d);
    const char *what = NULL;
    if (!c->mod || gs_module_verify(c->mod, &c->d) != GS_OK)
        return "the generated module does not parse or verify (a generator bug)";
    if (shardy_case(c->it)) { /* strategy, op and user priorities vary with the case */
        gs_sdy_options so = {(gs_sdy_strategy)(c->it / 4 % 3), c->it / 12 % 2 == 1,
                             c->it / 24 % 2 == 1, c->it / 48 % 2 == 1, c->it / 96 % 2 == 1,
                             c->it / 192 % 2 == 1};
        if (gs_sdy_propagate(c->mod, &so, &c->d) != GS_OK) return "Shardy's propagation failed";
        if (gs_module_verify(c->mod, &c->d) != GS_OK)
            return "the module Shardy's propagation left does not verify";
    }
    gs_partition_options o = {0};
    o.num_partitions = m->n;
    o.no_warnings = true;
    o.windowed_einsum = c->windowed;
    o.bidirectional_windowed_einsum = c->it % 2 == 0; /* half of those both ways */
    o.all_reduce_then_slice = c->it % 5 == 1;         /* XLA's partitioner's form */
    if (gs_partition(c->mod, &o, &c->p, NULL, &c->d) != GS_OK) return "partition failed";
    if (gs_module_verify(c->p, &c->d) != GS_OK) return "the partitioned program does not verify";
    if (gs_interp_make_args(c->mod, NULL, (uint64_t)c->it, &c->args, &c->n_args, &c->d) != GS_OK)
        return "no arguments";
    if (c->mpi ? run_mpi(c->mod, c->p, m->n / c->ranks, c->args, c->n_args, &c->got, &c->d) !=
                     GS_OK
               : gs_run_partitioned(c->mod, c->p, m->n, c->args, c->n_args, 1, 30, &c->got,
                                    &c->d) != GS_OK)
        return "the partitioned program failed";
    c->ran_mpi = c->mpi;
    if (c->mpi && c->rank != 0) return NULL; /* rank 0 compares */
    gs_leaf_check *checks = NULL;
    int n_checks = 0;
    bool all_ok = false;
    if (gs_verify_outputs(c->mod, c->args, c->n_args, 1, c->m->n, c->got, &checks, &n_checks, &all_ok,
                          &c->d) != GS_OK) {
        what = "the reference failed";
    } else {
        for (int i = 0; i < n_checks; i++)
            if (!checks[i].exact && checks[i].limit > 1 && checks[i].error > *worst_error)
                *worst_error = checks[i].error;
    }
    if (checks && !all_ok) {
        what = "output differs from the reference";
        for (int i = 0; i < n_checks; i++)
            if (!checks[i].ok)
                fprintf(stderr, "output %d: error %g (limit %g) at element %lld: got %.9g, want "
                        "%.9g, bound %.3g\n", i, checks[i].error, checks[i].limit,
                        (long long)checks[i].worst, checks[i].got, checks[i].want,
                        checks[i].bound);
    }
    free(checks);
    if (!what && !c->mpi && c->it % 8 == 5) what = check_autoshard(c, worst_error);
    return what;
}

/* Autoshard's property, on every eighth case (threads backend): with the module's own
 * shardings ignored, gs_autoshard on the case's mesh (axes a, b, c) chooses shardings whose
 * estimate is no worse than replicating everything, nor (when the solver proves its choice
 * optimal) than the module's own shardings pinned, where those are candidates; and the
 * annotated module partitions as written, runs, and matches the reference on the case's
 * inputs. NULL when it holds. */
static const char *check_autoshard(one_case *c, double *worst_error) {
    const mesh *m = c->m;
    char spec[64];
    int len = 0;
    for (int a = 0; a < m->n_axes; a++)
        len += snprintf(spec + len, sizeof spec - (size_t)len, "%s%c=%d", a ? "," : "", 'a' + a,
                        m->size[a]);
    gs_arena arena;
    gs_arena_init(&arena);
    gs_mesh gm;
    gs_machine mc;
    gs_diags scratch = {0};
    gs_source *src = gs_source_from_string("prop.hlo", c->hlo);
    gs_module *mine = gs_parse_module(src, &c->d), *own = gs_parse_module(src, &c->d);
    gs_compiled out = {0};
    gs_value *got = NULL;
    const char *what = NULL;
    gs_autoshard_result r, rp;
    if (!mine || !own ||
        gs_mesh_parse(&arena, spec, strlen(spec), &gm, &c->d, gs_span_none()) != GS_OK ||
        !gs_machine_builtin("h100", &mc)) {
        what = "autoshard: the case does not parse, or its mesh (a test bug)";
        goto done;
    }
    gs_autoshard_options o = {.mesh = &gm, .machine = &mc, .ignore_shardings = true};
    if (gs_autoshard(mine, &o, &r, &scratch) != GS_OK) {
        /* a mesh axis larger than every dim of the graph: the one error expected here */
        bool expected = scratch.n_errors == 1 && scratch.n > 0 &&
                        strstr(scratch.items[0].message, "it can split nothing");
        if (!expected) {
            gs_diags_render(&scratch, stderr);
            what = "autoshard failed";
        }
        goto done;
    }
    gs_diags_free(&scratch);
    scratch = (gs_diags){0};
    if (r.objective > r.replicated * (1 + 1e-9)) {
        what = "autoshard's choice predicts slower than replicating everything";
        goto done;
    }
    o.ignore_shardings = false;
    if (r.optimal && gs_autoshard(own, &o, &rp, &scratch) == GS_OK &&
        r.objective > rp.objective * (1 + 1e-6) + 1e-12) {
        fprintf(stderr, "autoshard %g s, the module's own shardings %g s\n", r.objective,
                rp.objective);
        what = "autoshard's choice predicts slower than the module's own shardings";
        goto done;
    }
    gs_compile_options co;
    gs_compile_options_init(&co, m->n);
    co.no_propagate = true;
    co.partition.no_warnings = true;
    if (gs_compile(mine, &co, &out, &c->d) != GS_OK) {
        what = "autoshard's choice does not partition";
        goto done;
    }
    if (gs_run_partitioned(mine, out.program, m->n, c->args, c->n_args, 1, 30, &got, &c->d) !=
        GS_OK) {
        what = "autoshard's choice does not run";
        goto done;
    }
    gs_leaf_check *checks = NULL;
    int n_checks = 0;
    bool all_ok = false;
    if (gs_verify_outputs(c->mod, c->args, c->n_args, 1, m->n, got, &checks, &n_checks, &all_ok,
                          &c->d) != GS_OK || !all_ok)
        what = "autoshard's choice differs from the reference";
    for (int i = 0; i < n_checks; i++)
        if (!checks[i].exact && checks[i].limit > 1 && checks[i].error > *worst_error)
            *worst_error = checks[i].error;
    if (what && mine) {
        char *t = gs_module_to_string(mine);
        fprintf(stderr, "autoshard's choice:\n%s\n", t);
        free(t);
    }
    free(checks);
    n_autoshard += what == NULL;
done:
    gs_value_free(got);
    gs_compiled_free(&out);
    gs_module_free(mine);
    gs_module_free(own);
    gs_source_free(src);
    gs_diags_free(&scratch);
    gs_arena_free(&arena);
    return what;
}

/* A failing case minimised: the shortest prefix of its ops (the same graph cut after its first
 * k ops, the root resharded at random) that still fails, printed. */
static void minimise(graph *g, uint64_t seed, int it, bool windowed, int n_ops) {
    for (int cap = 1; cap < n_ops; cap++) {
        seed_case(seed, it);
        mesh m;
        named_shardings = shardy_case(it);
        const char *hlo = random_module(g, &m, windowed, cap);
        one_case c = {.hlo = hlo, .m = &m, .windowed = windowed, .it = it};
        double worst = 0;
        const char *what = check_case(&c, &worst);
        if (what) {
            fprintf(stderr, "minimised (its first %d of %d ops still fail: %s):\n%s\n", cap,
                    n_ops, what, hlo);
            gs_diags_render(&c.d, stderr);
        }
        case_free(&c);
        if (what) return;
    }
    fprintf(stderr, "minimised: no shorter prefix fails\n");
}

static void test_random_graphs(void **state) {
    (void)state;
    const char *es = getenv("GSPMD_PARTITION_SEED"), *ec = getenv("GSPMD_PARTITION_CASES");
    if (!es) es = getenv("GSPMD_PARTITION_DEFAULT_SEED"); /* ctest: from the commit */
    uint64_t seed = es ? strtoull(es, NULL, 10) : 20261202;
    fprintf(stderr, "partition property test: seed %llu\n", (unsigned long long)seed);
    int cases = ec ? atoi(ec) : 2000;
    graph *g = malloc(sizeof *g);
    assert_non_null(g);
    clock_t t0 = clock();
    int by_devices[9] = {0};
    /* GSPMD_PARTITION_KEEP_GOING=1 counts the failing cases instead of stopping at the first (to
     * measure how many wrong programs the verification catches, with a bug planted on purpose in
     * the partitioner). */
    bool keep_going = getenv("GSPMD_PARTITION_KEEP_GOING") != NULL;
    int n_failed = 0;
    /* Under mpirun: the MPI backend, for the cases whose devices split evenly over the ranks. */
    bool mpi = getenv("GSPMD_PARTITION_MPI") != NULL && gs_mpi_launched();
    int ranks = mpi ? gs_mpi_world_size() : 1, rank = mpi ? gs_mpi_rank() : 0, n_mpi = 0;
    if (mpi) keep_going = true; /* one rank stopping would leave the others waiting */
    double worst_error = 0; /* the largest float error seen, in rounding-error bounds */
    /* GSPMD_PARTITION_SECONDS=T: stop after T seconds (threads only: MPI ranks must agree). */
    const char *et = getenv("GSPMD_PARTITION_SECONDS");
    double limit_s = et && !mpi ? atof(et) : 0;
    time_t started = time(NULL);
    /* GSPMD_PARTITION_FIRST=K starts at case K (to rerun one failure: CASES=K+1 FIRST=K). */
    const char *ef = getenv("GSPMD_PARTITION_FIRST");
    for (int it = ef ? atoi(ef) : 0; it < cases; it++) {
        if (limit_s > 0 && difftime(time(NULL), started) >= limit_s) {
            fprintf(stderr, "stopping after %.0f s (GSPMD_PARTITION_SECONDS)\n", limit_s);
            cases = it;
            break;
        }
        seed_case(seed, it);
        mesh m;
        bool windowed = it % 3 == 0; /* a third of the cases: windowed dots, dots favoured */
        named_shardings = shardy_case(it);
        const char *hlo = random_module(g, &m, windowed, 0);
        if (mpi && m.n % ranks != 0) continue;
        by_devices[m.n]++;
        if (getenv("GSPMD_PARTITION_PRINT"))
            fprintf(stderr, "case %d (%d devices)\n%s\n", it, m.n, hlo);
        one_case c = {.hlo = hlo, .m = &m, .windowed = windowed, .it = it, .mpi = mpi,
                      .ranks = ranks, .rank = rank};
        const char *what = check_case(&c, &worst_error);
        n_mpi += c.ran_mpi;
        if (what && keep_going) {
            n_failed++;
            if (mpi && rank == 0) {
                fprintf(stderr, "FAIL (seed %llu, case %d, %d devices on %d ranks): %s\n%s\n",
                        (unsigned long long)seed, it, m.n, ranks, what, hlo);
                gs_diags_render(&c.d, stderr);
            } else if (getenv("GSPMD_PARTITION_PRINT_FAILED")) {
                fprintf(stderr, "case %d: %s\n", it, what);
            }
        } else if (what) {
            fprintf(stderr, "partition property failed (seed %llu, case %d, %d devices): %s\n%s\n",
                    (unsigned long long)seed, it, m.n, what, hlo);
            gs_diags_render(&c.d, stderr);
            if (c.p) {
                char *t = gs_module_to_string(c.p);
                fprintf(stderr, "partitioned program:\n%s\n", t);
                free(t);
            }
            minimise(g, seed, it, windowed, g->n_ops);
            fprintf(stderr, "reproduce: GSPMD_PARTITION_SEED=%llu and case %d\n",
                    (unsigned long long)seed, it);
            fail();
        }
        case_free(&c);
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (mpi) {
        fprintf(stderr, "rank %d: %d of %d random graphs run on %d MPI ranks\n", rank, n_mpi,
                cases, ranks);
        free(g);
        gs_mpi_finalize();
        if (rank != 0) return;
    }
    fprintf(stderr, "%d random graphs verified (seed %llu; by device count:", mpi ? n_mpi : cases,
            (unsigned long long)seed);
    for (int n = 1; n <= 8; n++)
        if (by_devices[n]) fprintf(stderr, " %d:%d", n, by_devices[n]);
    fprintf(stderr, ") in %.1f s of CPU; largest float error %.3g rounding bounds (limit %g); "
            "autoshard's choice verified on %d\n",
            secs, worst_error, GS_VERIFY_MARGIN, n_autoshard);
    if (keep_going) fprintf(stderr, "%d of %d cases failed\n", n_failed, cases);
    if (!mpi) free(g);
    assert_int_equal(n_failed, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
