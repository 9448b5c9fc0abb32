/*
 * mesh.c — named meshes and named (V3) shardings: the conversion to the tiled model (XLA's
 * V3ToV2Sharding, which JAX's NamedSharding + PartitionSpec also reduces to) and printing of the
 * named form and of command-line meshes.
 *
 * Conversion: every mesh axis is cut at the boundaries of the sub-axes that refer to it (a
 * sub-axis `'x':(p)s` covers the part of x after a major part of size p, of size s), giving
 * segments ordered major to minor, axis by axis. The tile assignment is the mesh's device array
 * reshaped to those segments and transposed so that the segments sharding dim 0 come first
 * (in the order written), then dim 1's ... , then manual, unreduced, and last the segments no one
 * mentions (replicated); then reshaped to one dim per tensor dim plus the subgroup dims. For the
 * default row-major mesh this is one iota, O(rank) at any device count.
 */
#include "internal.h"
#include "base/internal.h"

#include <ctype.h>
#include <string.h>

/* One segment of one mesh axis. */
typedef struct segment {
    int axis;     /* mesh axis */
    int64_t pre;  /* product of the axis's segments major to it */
    int64_t size; /* its size */
} segment;

/* Index of the segment ref covers; refs cut the axes, so each ref is exactly one segment. */
static int find_segment(const segment *seg, int n, const gs_axis_ref *ref) {
    int64_t pre = ref->pre_size ? ref->pre_size : 1;
    for (int i = 0; i < n; i++)
        if (seg[i].axis == ref->axis && seg[i].pre == pre) return i;
    return -1;
}

static void add_cut(int64_t *cuts, int *n, int64_t v) {
    for (int i = 0; i < *n; i++)
        if (cuts[i] == v) return;
    int j = (*n)++;
    while (j > 0 && cuts[j - 1] > v) {
        cuts[j] = cuts[j - 1];
        j--;
    }
    cuts[j] = v;
}

static void cut_axis(const gs_axis_list *l, int axis, int64_t *cuts, int *n) {
    for (int i = 0; i < l->n; i++) {
        if (l->v[i].axis != axis || !l->v[i].pre_size) continue;
        add_cut(cuts, n, l->v[i].pre_size);
        add_cut(cuts, n, l->v[i].pre_size * l->v[i].size);
    }
}

gs_status gs_sharding_from_named(gs_arena *a, const gs_named *nm, gs_sharding **out) {
    switch (nm->form) {
    case GS_NAMED_MAXIMAL: *out = gs_sharding_maximal(a, nm->device); return *out ? GS_OK : GS_ERR;
    case GS_NAMED_REPLICATED: *out = gs_sharding_replicated(a); return *out ? GS_OK : GS_ERR;
    case GS_NAMED_UNREDUCED: *out = gs_sharding_unreduced(a); return *out ? GS_OK : GS_ERR;
    case GS_NAMED_MANUAL: *out = gs_sharding_manual(a); return *out ? GS_OK : GS_ERR;
    case GS_NAMED_DIMS: break;
    }
    const gs_mesh *m = &nm->mesh;
    if (m->n_devices <= 1) {
        *out = gs_sharding_replicated(a);
        return *out ? GS_OK : GS_ERR;
    }
    /* Segments, axis by axis, major to minor. */
    segment seg[GS_MAX_FACTORS];
    int n_seg = 0;
    for (int ax = 0; ax < m->n_axes; ax++) {
        int64_t cuts[GS_MAX_FACTORS];
        int nc = 0;
        add_cut(cuts, &nc, 1);
        add_cut(cuts, &nc, m->sizes[ax]);
        for (int d = 0; d < nm->n_dims; d++) cut_axis(&nm->dims[d], ax, cuts, &nc);
        cut_axis(&nm->replicated, ax, cuts, &nc);
        cut_axis(&nm->unreduced, ax, cuts, &nc);
        cut_axis(&nm->manual, ax, cuts, &nc);
        for (int i = 0; i + 1 < nc; i++)
            if (n_seg < GS_MAX_FACTORS)
                seg[n_seg++] = (segment){ax, cuts[i], cuts[i + 1] / cuts[i]};
    }
    GS_ASSERT(n_seg <= GS_MAX_TILE_RANK);
    int64_t reshape[GS_MAX_TILE_RANK];
    for (int i = 0; i < n_seg; i++) reshape[i] = seg[i].size;
    bool used[GS_MAX_FACTORS] = {0};
    int perm[GS_MAX_TILE_RANK], np = 0;
    int64_t tdims[GS_MAX_TILE_RANK];
    int nt = 0;
    gs_subgroup_kind types[3];
    int n_types = 0;
    for (int d = 0; d < nm->n_dims; d++) {
        int64_t size = 1;
        for (int i = 0; i < nm->dims[d].n; i++) {
            int k = find_segment(seg, n_seg, &nm->dims[d].v[i]);
            if (k < 0) continue; /* a size-1 axis */
            perm[np++] = k;
            used[k] = true;
            size *= seg[k].size;
        }
        tdims[nt++] = size;
    }
    const gs_axis_list *sub[2] = {&nm->manual, &nm->unreduced};
    const gs_subgroup_kind sub_kind[2] = {GS_SUBGROUP_MANUAL, GS_SUBGROUP_UNREDUCED};
    for (int s = 0; s < 2; s++) {
        int64_t size = 1;
        for (int i = 0; i < sub[s]->n; i++) {
            int k = find_segment(seg, n_seg, &sub[s]->v[i]);
            if (k < 0) continue;
            perm[np++] = k;
            used[k] = true;
            size *= seg[k].size;
        }
        if (sub[s]->n) {
            tdims[nt++] = size;
            types[n_types++] = sub_kind[s];
        }
    }
    int64_t rep = 1;
    for (int k = 0; k < n_seg; k++)
        if (!used[k]) {
            perm[np++] = k;
            rep *= seg[k].size;
        }
    if (rep > 1) {
        tdims[nt++] = rep;
        types[n_types++] = GS_SUBGROUP_REPLICATED;
    }
    if (nt == 0) {
        *out = gs_sharding_replicated(a);
        return *out ? GS_OK : GS_ERR;
    }
    gs_tile_assignment r, t, u;
    if (gs_tile_reshape(a, &m->devices, n_seg, reshape, &r) != GS_OK ||
        gs_tile_transpose(a, &r, perm, &t) != GS_OK ||
        gs_tile_reshape(a, &t, nt, tdims, &u) != GS_OK)
        return GS_ERR;
    *out = gs_sharding_subgroup(a, &u, n_types, types);
    return *out ? GS_OK : GS_ERR;
}

/* ------------------------------------------------------------------ printing */

/* The named form prints as the conformance corpus (XLA at its commit) writes it:
 * `{mesh['x'=2,'y'=2] [{'x'}, {}], replicated={'y'}}`, a space between the mesh and the body.
 * (Later XLA prints a comma there; the parser accepts both.) */

/* An axis name as the parser reads it back: bare when bare_ok and it is a word (a letter or
 * '_', then letters, digits, '_' or '.'), else quoted with ', or with " when it holds a '
 * (the parser's quoted names hold no quote of their own kind, so one of the two fits). */
static void print_name(gs_sb *sb, const char *name, bool bare_ok) {
    bool word = isalpha((unsigned char)name[0]) || name[0] == '_';
    for (const char *p = name; *p && word; p++)
        word = isalnum((unsigned char)*p) || *p == '_' || *p == '.';
    if (bare_ok && word) gs_sb_puts(sb, name);
    else if (!strchr(name, '\'')) gs_sb_printf(sb, "'%s'", name);
    else gs_sb_printf(sb, "\"%s\"", name);
}

/* One axis ref: quoted as XLA's named text reads it back, or (sdy) always double-quoted as
 * Shardy writes it (the names hold no '"': neither parser reads one). */
static void print_ref(gs_sb *sb, const gs_mesh *m, const gs_axis_ref *r, bool sdy) {
    if (sdy)
        gs_sb_printf(sb, "\"%s\"", m->names[r->axis]);
    else
        print_name(sb, m->names[r->axis], false);
    if (r->pre_size) gs_sb_printf(sb, ":(%lld)%lld", (long long)r->pre_size, (long long)r->size);
}

/* `{'x', 'y':(1)2, ?}` (sdy: `{"x", "y":(1)2, ?}`) */
static void print_refs(gs_sb *sb, const gs_mesh *m, const gs_axis_list *l, bool sdy) {
    gs_sb_putc(sb, '{');
    for (int i = 0; i < l->n; i++) {
        if (i) gs_sb_puts(sb, ", ");
        print_ref(sb, m, &l->v[i], sdy);
    }
    if (l->open) gs_sb_puts(sb, l->n ? ", ?" : "?");
    gs_sb_putc(sb, '}');
}

/* The device order after `device_ids=(` or `:`: `[R]T(P)` for a transposed iota, else a list. */
static void print_order(gs_sb *sb, const gs_tile_assignment *t, bool arrow) {
    if (t->iota) {
        gs_sb_puts(sb, arrow ? "<=[" : "[");
        for (int i = 0; i < t->n_reshape; i++)
            gs_sb_printf(sb, "%s%lld", i ? "," : "", (long long)t->reshape[i]);
        gs_sb_putc(sb, ']');
        if (t->n_reshape > 1) {
            gs_sb_puts(sb, "T(");
            for (int i = 0; i < t->n_reshape; i++)
                gs_sb_printf(sb, "%s%d", i ? "," : "", t->perm[i]);
            gs_sb_putc(sb, ')');
        }
        return;
    }
    for (int64_t i = 0; i < t->n; i++)
        gs_sb_printf(sb, "%s%lld", i ? "," : "", (long long)t->devices[i]);
}

/* Whether a mesh's devices are in the default row-major order. */
static bool default_order(const gs_mesh *m) { return m->devices.iota && m->devices.n_reshape == 1; }

void gs_named_print(gs_sb *sb, const gs_named *n, const char *metadata) {
    if (n->form == GS_NAMED_MAXIMAL) {
        gs_sb_printf(sb, "{maximal_mesh[device_id=%lld]", (long long)n->device);
    } else {
        const gs_mesh *m = &n->mesh;
        gs_sb_puts(sb, "{mesh[");
        for (int i = 0; i < m->n_axes; i++) {
            if (i) gs_sb_putc(sb, ',');
            print_name(sb, m->names[i], false);
            gs_sb_printf(sb, "=%lld", (long long)m->sizes[i]);
        }
        gs_sb_putc(sb, ']');
        if (!default_order(m)) {
            gs_sb_puts(sb, ", device_ids=(");
            print_order(sb, &m->devices, false);
            gs_sb_putc(sb, ')');
        }
        switch (n->form) {
        case GS_NAMED_REPLICATED: gs_sb_puts(sb, " replicated"); break;
        case GS_NAMED_UNREDUCED: gs_sb_puts(sb, " unreduced"); break;
        case GS_NAMED_MANUAL: gs_sb_puts(sb, " manual"); break;
        default:
            gs_sb_puts(sb, " [");
            for (int i = 0; i < n->n_dims; i++) {
                if (i) gs_sb_puts(sb, ", ");
                print_refs(sb, m, &n->dims[i], false);
            }
            gs_sb_putc(sb, ']');
            break;
        }
        if (n->replicated.n) {
            gs_sb_puts(sb, ", replicated=");
            print_refs(sb, m, &n->replicated, false);
        }
        if (n->unreduced.n) {
            gs_sb_printf(sb, ", unreduced=%s", n->reduction ? n->reduction : "");
            print_refs(sb, m, &n->unreduced, false);
        }
        if (n->manual.n) {
            gs_sb_puts(sb, ", manual=");
            print_refs(sb, m, &n->manual, false);
        }
    }
    if (metadata) gs_sb_printf(sb, ", metadata={%s}", metadata);
    gs_sb_putc(sb, '}');
}

void gs_mesh_print(gs_sb *sb, const gs_mesh *m) {
    for (int i = 0; i < m->n_axes; i++) {
        if (i) gs_sb_putc(sb, ',');
        print_name(sb, m->names[i], true);
        gs_sb_printf(sb, "=%lld", (long long)m->sizes[i]);
    }
    if (!default_order(m)) {
        gs_sb_putc(sb, ':');
        print_order(sb, &m->devices, true);
    }
}

/* ------------------------------------------------------------------ Shardy's spelling */

void gs_mesh_print_sdy(gs_sb *sb, const gs_mesh *m) {
    gs_sb_puts(sb, "<[");
    for (int i = 0; i < m->n_axes; i++)
        gs_sb_printf(sb, "%s\"%s\"=%lld", i ? ", " : "", m->names[i], (long long)m->sizes[i]);
    gs_sb_putc(sb, ']');
    if (m->device_order) {
        gs_sb_puts(sb, ", device_ids=[");
        for (int64_t i = 0; i < m->devices.n; i++)
            gs_sb_printf(sb, "%s%lld", i ? ", " : "", (long long)gs_tile_device_at(&m->devices, i));
        gs_sb_putc(sb, ']');
    }
    gs_sb_putc(sb, '>');
}

bool gs_named_is_sdy(const gs_named *n) {
    if (n->manual.n) return false;
    if (n->form == GS_NAMED_MAXIMAL) return n->mesh_name != NULL && n->n_dims == 0;
    return n->form == GS_NAMED_DIMS;
}

void gs_named_print_sdy(gs_sb *sb, const gs_named *n) {
    const gs_mesh *m = &n->mesh;
    gs_sb_putc(sb, '<');
    if (n->mesh_name) {
        gs_sb_printf(sb, "@%s", n->mesh_name);
    } else {
        gs_sb_puts(sb, "mesh");
        gs_mesh_print_sdy(sb, m);
    }
    gs_sb_puts(sb, ", [");
    for (int i = 0; i < n->n_dims; i++) {
        if (i) gs_sb_puts(sb, ", ");
        print_refs(sb, m, &n->dims[i], true);
        if (n->priorities && n->priorities[i] >= 0)
            gs_sb_printf(sb, "p%lld", (long long)n->priorities[i]);
    }
    gs_sb_putc(sb, ']');
    if (n->replicated.n) {
        gs_sb_puts(sb, ", replicated=");
        print_refs(sb, m, &n->replicated, true);
    }
    if (n->unreduced.n) {
        gs_sb_puts(sb, ", unreduced=");
        print_refs(sb, m, &n->unreduced, true);
    }
    gs_sb_putc(sb, '>');
}

/* The search of gs_sharding_to_named: dims[0..rank) get ordered lists of whole mesh axes. */
typedef struct to_named {
    gs_arena *a;                 /* the result's arena */
    gs_arena scratch;            /* the candidates' tiled shardings, freed after the search */
    const gs_sharding *want;     /* the sharding to spell */
    gs_named *nm;                /* the candidate, its dims pointing at lists[] */
    gs_axis_list *lists;         /* rank lists */
    gs_axis_ref *refs;           /* rank x n_axes refs */
    bool used[GS_MAX_TILE_RANK]; /* mesh axes taken */
    int budget;                  /* candidates left to try */
} to_named;

/* Fills dims d.. with axes whose sizes multiply to their tile counts; true when the complete
 * candidate denotes the wanted sharding (or on allocation failure, with t->a failed). */
static bool search_named(to_named *t, int d, int64_t left) {
    const gs_mesh *m = &t->nm->mesh;
    int rank = t->nm->n_dims;
    if (d == rank) {
        if (t->budget-- <= 0) return false;
        gs_sharding *s;
        if (gs_sharding_from_named(&t->scratch, t->nm, &s) != GS_OK) return true;
        return gs_sharding_equal(s, t->want);
    }
    if (left == 1) {
        int64_t next = d + 1 < rank ? gs_sharding_tiles_in_dim(t->want, d + 1) : 1;
        return search_named(t, d + 1, next);
    }
    for (int ax = 0; ax < m->n_axes; ax++) {
        if (t->used[ax] || m->sizes[ax] <= 1 || left % m->sizes[ax] != 0) continue;
        gs_axis_list *l = &t->lists[d];
        t->refs[d * m->n_axes + l->n] = (gs_axis_ref){ax, 0, m->sizes[ax]};
        l->n++;
        t->used[ax] = true;
        if (search_named(t, d, left / m->sizes[ax])) return true;
        t->used[ax] = false;
        l->n--;
        if (t->budget <= 0) return false;
    }
    return false;
}

gs_status gs_sharding_to_named(gs_arena *a, const gs_sharding *s, int rank, const gs_mesh *mesh,
                               const char *mesh_name, const gs_named **out) {
    *out = NULL;
    const gs_named *own = s->named;
    if (own && gs_named_is_sdy(own)) {
        bool same_mesh = own->mesh_name && mesh_name && strcmp(own->mesh_name, mesh_name) == 0;
        gs_sharding *back;
        if (gs_sharding_from_named(a, own, &back) != GS_OK) return GS_ERR;
        if ((same_mesh || !mesh) && gs_sharding_equal(back, s) &&
            (own->form != GS_NAMED_DIMS || own->n_dims == rank)) {
            *out = own;
            return GS_OK;
        }
    }
    if (!mesh || mesh->n_axes > 8 || rank > GS_MAX_RANK) return GS_OK;
    if (s->kind != GS_SHARDING_REPLICATED && s->kind != GS_SHARDING_TILED) return GS_OK;
    if (s->kind == GS_SHARDING_TILED) {
        if (s->data_rank != rank || s->tiles.n != mesh->n_devices) return GS_OK;
        for (int k = 0; k < s->n_subgroups; k++)
            if (s->subgroups[k] != GS_SUBGROUP_REPLICATED) return GS_OK;
    }
    gs_named *nm = GS_NEW(a, gs_named);
    gs_axis_list *lists = GS_NEW_ARRAY(a, gs_axis_list, rank ? rank : 1);
    gs_axis_ref *refs =
        GS_NEW_ARRAY(a, gs_axis_ref, (size_t)(rank ? rank : 1) * (size_t)(mesh->n_axes + 1));
    if (!nm || !lists || !refs) return GS_ERR;
    memset(nm, 0, sizeof *nm);
    nm->form = GS_NAMED_DIMS;
    nm->mesh = *mesh;
    nm->mesh_name = mesh_name;
    nm->n_dims = rank;
    for (int d = 0; d < rank; d++) lists[d] = (gs_axis_list){0, refs + d * mesh->n_axes, false};
    nm->dims = lists;
    if (s->kind == GS_SHARDING_REPLICATED) {
        *out = nm;
        return GS_OK;
    }
    to_named t = {.a = a, .want = s, .nm = nm, .lists = lists, .refs = refs, .budget = 1024};
    gs_arena_init(&t.scratch);
    bool found = rank > 0 && search_named(&t, 0, gs_sharding_tiles_in_dim(s, 0));
    bool failed = t.scratch.failed;
    gs_arena_free(&t.scratch);
    if (failed || a->failed) return GS_ERR;
    if (found) *out = nm;
    return GS_OK;
}
