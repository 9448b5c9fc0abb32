/*
 * parse.c — reading sharding text: XLA's HLO sharding syntax (the `{...}` after `sharding=`,
 * tuples included), its named (V3) mesh form, the command line's `--mesh` axes, JAX-style
 * PartitionSpecs and Shardy's op sharding rules (`#sdy.op_sharding_rule<...>`). Every error is
 * a diagnostic at the caller's span with the column of the problem, naming what is wrong;
 * nothing here aborts on input.
 *
 * Grammar (whitespace and comments allowed between tokens):
 *   sharding  := '{' ( tuple | named | leaf ) '}'
 *   tuple     := ( sharding ( ',' sharding )* )?          (when the first token is '{' or '}')
 *   leaf      := attr*
 *   attr      := 'replicated' | 'manual' | 'unknown' | 'unreduced' | 'maximal' | 'device=' INT
 *              | 'devices=' '[' INT,* ']' ( '<=' '[' INT,* ']' ( 'T' '(' INT,* ')' )? | INT,* )
 *              | 'last_tile_dim_replicate' | 'last_tile_dims=' '{' TYPE,* '}'
 *              | 'shard_as' INT | 'shard_like' INT | 'metadata=' '{' balanced '}'
 *   named     := 'maximal_mesh' '[' 'device_id' '=' INT ']' meta?
 *              | 'mesh' '[' (NAME '=' INT),* ']' (','? 'device_ids=' '(' order ')')? ','?
 *                ( '[' dim,* ']' | 'replicated' | 'unreduced' | 'manual' )
 *                ( ','? ('replicated' | 'unreduced' | 'manual') '=' IDENT? '{' ref,* '}' )* meta?
 *   dim       := '{' ref,* (','? '?')? '}'           ref := NAME ( ':' '(' INT ')' INT )?
 *   order     := '[' INT,* ']' ( 'T' '(' INT,* ')' )? | INT,*
 * NAME is quoted ('x' or "x") or a bare identifier.
 *   rule      := '#sdy.op_sharding_rule'? '<' maps '->' maps ( '{' (SYM '=' INT),* '}' )?
 *                ( KIND '=' '{' SYM,* '}' )* ( ',' 'custom' )? '>'
 *   maps      := '(' ( '[' SYM+,* ']' ),* ')'     SYM := 'i'..'z' | 'z_' INT
 *   KIND      := 'reduction' | 'need_replication' | 'permutation' | 'blocked_propagation'
 */
#include "internal.h"
#include "base/internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Largest tile or device count accepted (keeps products far from overflow). */
#define MAX_DEVICES ((int64_t)1 << 40)

/* A read position in one piece of text, with where to report problems. */
typedef struct cursor {
    const char *s; /* the text */
    size_t n;      /* its length */
    size_t i;      /* current offset */
    gs_arena *a;   /* where results go */
    gs_diags *d;   /* where errors go */
    gs_span span;  /* the location of s[0] */
    bool failed;   /* an error was reported */
} cursor;

static bool fail_at(cursor *c, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail_at(cursor *c, size_t at, const char *fmt, ...) {
    if (c->failed) return false;
    c->failed = true;
    gs_span sp = c->span;
    if (sp.src) sp.col += (uint32_t)at;
    va_list ap;
    va_start(ap, fmt);
    gs_verror(c->d, sp, fmt, ap);
    va_end(ap);
    return false;
}

static void skip_ws(cursor *c) {
    while (c->i < c->n) {
        char ch = c->s[c->i];
        if (isspace((unsigned char)ch)) {
            c->i++;
        } else if (ch == '/' && c->i + 1 < c->n && c->s[c->i + 1] == '*') {
            const char *end = NULL;
            for (size_t j = c->i + 2; j + 1 < c->n; j++)
                if (c->s[j] == '*' && c->s[j + 1] == '/') {
                    end = c->s + j + 2;
                    break;
                }
            c->i = end ? (size_t)(end - c->s) : c->n;
        } else {
            break;
        }
    }
}

static char peek(cursor *c) {
    skip_ws(c);
    return c->i < c->n ? c->s[c->i] : 0;
}

static bool accept(cursor *c, char ch) {
    if (peek(c) != ch) return false;
    c->i++;
    return true;
}

/* Describes what is at the cursor for messages: `'x'` or `the end`. */
static const char *found(cursor *c, char *buf, size_t size) {
    char ch = peek(c);
    if (!ch) return "the end";
    snprintf(buf, size, "'%c'", ch);
    return buf;
}

static bool expect(cursor *c, char ch, const char *where) {
    if (accept(c, ch)) return true;
    char buf[8];
    return fail_at(c, c->i, "expected '%c' %s, found %s", ch, where, found(c, buf, sizeof buf));
}

/* A bare word [A-Za-z_][A-Za-z0-9_.]*; sets *w and *len (0 when none). */
static bool word(cursor *c, const char **w, size_t *len) {
    skip_ws(c);
    size_t j = c->i;
    if (j < c->n && (isalpha((unsigned char)c->s[j]) || c->s[j] == '_')) {
        while (j < c->n && (isalnum((unsigned char)c->s[j]) || c->s[j] == '_' || c->s[j] == '.'))
            j++;
    }
    *w = c->s + c->i;
    *len = j - c->i;
    c->i = j;
    return *len > 0;
}

static bool is_word(const char *w, size_t len, const char *kw) {
    return strlen(kw) == len && memcmp(w, kw, len) == 0;
}

/* Accepts the keyword kw when it is the next word. */
static bool accept_word(cursor *c, const char *kw) {
    size_t save = c->i;
    const char *w;
    size_t len;
    if (word(c, &w, &len) && is_word(w, len, kw)) return true;
    c->i = save;
    return false;
}

static bool parse_int(cursor *c, int64_t *v, const char *what) {
    skip_ws(c);
    size_t j = c->i;
    bool neg = j < c->n && c->s[j] == '-';
    if (neg) j++;
    if (j >= c->n || !isdigit((unsigned char)c->s[j])) {
        char buf[8];
        return fail_at(c, c->i, "expected %s, found %s", what, found(c, buf, sizeof buf));
    }
    int64_t x = 0;
    while (j < c->n && isdigit((unsigned char)c->s[j])) {
        if (x > (INT64_MAX - 9) / 10) return fail_at(c, c->i, "%s is too large", what);
        x = x * 10 + (c->s[j++] - '0');
    }
    c->i = j;
    *v = neg ? -x : x;
    return true;
}

/* INT (',' INT)* between open and close, into v (max entries). */
static bool parse_ints(cursor *c, char open, char close, int64_t *v, int max, int *n,
                       const char *what) {
    *n = 0;
    char buf[8];
    if (!accept(c, open))
        return fail_at(c, c->i, "expected '%c' to open %s, found %s", open, what,
                       found(c, buf, sizeof buf));
    if (accept(c, close)) return true;
    do {
        if (*n >= max) return fail_at(c, c->i, "too many entries in %s (at most %d)", what, max);
        if (!parse_int(c, &v[(*n)++], "an integer")) return false;
    } while (accept(c, ','));
    if (accept(c, close)) return true;
    return fail_at(c, c->i, "expected '%c' to close %s, found %s", close, what,
                   found(c, buf, sizeof buf));
}

/* A growable list of int64 from INT (',' INT)* (no brackets). */
static bool parse_int_run(cursor *c, gs_vec *v) {
    do {
        int64_t x;
        if (!parse_int(c, &x, "a device id")) return false;
        if (gs_vec_push(v, &x) != GS_OK) return fail_at(c, c->i, "out of memory");
    } while (accept(c, ','));
    return true;
}

/* The text of a balanced `{...}` (after the '{'), up to the matching '}', strings respected;
 * stored trimmed in the arena. */
static bool parse_balanced(cursor *c, const char **out) {
    size_t start = c->i;
    if (!expect(c, '{', "to open metadata")) return false;
    size_t body = c->i;
    int depth = 1, other = 0; /* other: ( and [ open, which HLO text must balance too */
    bool quote = false;
    while (c->i < c->n) {
        char ch = c->s[c->i];
        if ((unsigned char)ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
            return fail_at(c, c->i, "a control character (0x%02x) in metadata", (unsigned)ch);
        if (quote) {
            if (ch == '\\')
                c->i++;
            else if (ch == '"')
                quote = false;
        } else if (ch == '"') {
            quote = true;
        } else if (ch == '/' && c->i + 1 < c->n && (c->s[c->i + 1] == '/' || c->s[c->i + 1] == '*')) {
            /* HLO text would read it as a comment (found by tests/fuzz/fuzz_front). */
            return fail_at(c, c->i, "'%c%c' in metadata outside a string (a module could not read "
                           "it back: it starts a comment)", ch, c->s[c->i + 1]);
        } else if (ch == '{') {
            depth++;
        } else if (ch == '}' && --depth == 0) {
            break;
        } else if (ch == '(' || ch == '[') {
            other++;
        } else if ((ch == ')' || ch == ']') && --other < 0) {
            break;
        }
        c->i++;
    }
    if (depth != 0 && other >= 0) return fail_at(c, start, "unterminated metadata: expected '}'");
    if (other != 0)
        return fail_at(c, start, "unbalanced brackets in metadata (a module could not read it back)");
    size_t a = body, b = c->i;
    while (a < b && isspace((unsigned char)c->s[a])) a++;
    while (b > a && isspace((unsigned char)c->s[b - 1])) b--;
    c->i++;
    /* Canonical text: each run of spaces outside strings becomes one space, as HLO text reads
     * it back (found by tests/fuzz/fuzz_front: a run of spaces printed, then read as one). */
    char *t = gs_arena_alloc(c->a, b - a + 1);
    if (!t) return fail_at(c, start, "out of memory");
    size_t n = 0;
    bool in_string = false;
    for (size_t i = a; i < b; i++) {
        char ch = c->s[i];
        if (in_string) {
            t[n++] = ch;
            if (ch == '\\' && i + 1 < b) t[n++] = c->s[++i];
            else if (ch == '"') in_string = false;
        } else if (isspace((unsigned char)ch)) {
            if (n == 0 || t[n - 1] != ' ') t[n++] = ' ';
        } else {
            t[n++] = ch;
            in_string = ch == '"';
        }
    }
    t[n] = 0;
    *out = t;
    return true;
}

static bool check_perm(cursor *c, size_t at, const int64_t *p, int n, const char *what) {
    bool seen[GS_MAX_FACTORS] = {0};
    for (int i = 0; i < n; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]])
            return fail_at(c, at, "%s is not a permutation of 0..%d", what, n - 1);
        seen[p[i]] = true;
    }
    return true;
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* Checks an explicit device list: n ids, distinct, non-negative, and (when dense) exactly 0..n-1.
 * at is where the list starts. */
static bool check_devices(cursor *c, size_t at, const int64_t *v, int64_t n, bool dense) {
    int64_t *sorted = malloc(sizeof *sorted * (size_t)(n ? n : 1));
    if (!sorted) return fail_at(c, at, "out of memory");
    memcpy(sorted, v, sizeof *sorted * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0) {
            free(sorted);
            return fail_at(c, at, "device id %lld is negative", (long long)v[i]);
        }
    }
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_i64);
    for (int64_t i = 1; i < n; i++) {
        if (sorted[i] == sorted[i - 1]) {
            int64_t dup = sorted[i];
            free(sorted);
            return fail_at(c, at, "device %lld is listed twice", (long long)dup);
        }
    }
    bool ok = true;
    if (dense)
        for (int64_t i = 0; i < n && ok; i++)
            if (sorted[i] != i)
                ok = fail_at(c, at, "the device order is not a permutation of 0..%lld",
                             (long long)(n - 1));
    free(sorted);
    return ok;
}

/* Product of dims with the running bound; false when some dim < 1 or it grows too large. */
static bool checked_prod(cursor *c, size_t at, const int64_t *v, int n, const char *what,
                         int64_t *out) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] < 1)
            return fail_at(c, at, "%s sizes must be >= 1, found %lld", what, (long long)v[i]);
        if (p > MAX_DEVICES / v[i]) return fail_at(c, at, "%s has too many devices", what);
        p *= v[i];
    }
    *out = p;
    return true;
}

/* The iota list `[R,...]` with an optional transpose `T(P,...)` at the cursor (see
 * gs_iota_list_parse); *total is the product of R. */
static bool iota_list(cursor *c, gs_iota_list *il, int64_t *total) {
    int64_t p[GS_MAX_IOTA_RANK];
    int np = 0;
    size_t rat = c->i;
    if (!parse_ints(c, '[', ']', il->reshape, GS_MAX_IOTA_RANK, &il->n_reshape,
                    "iota reshape dims"))
        return false;
    if (!checked_prod(c, rat, il->reshape, il->n_reshape, "iota reshape dims", total)) return false;
    if (il->n_reshape == 0) return fail_at(c, rat, "iota reshape dims are empty");
    size_t tat = c->i;
    il->transposed = peek(c) == 'T';
    if (il->transposed) {
        c->i++;
        if (!parse_ints(c, '(', ')', p, GS_MAX_IOTA_RANK, &np, "the transpose T(...)"))
            return false;
        if (np != il->n_reshape)
            return fail_at(c, tat, "T(...) has %d entries but the iota has %d reshape dims", np,
                           il->n_reshape);
        if (!check_perm(c, tat, p, np, "T(...)")) return false;
    }
    for (int i = 0; i < il->n_reshape; i++) il->perm[i] = np ? (int)p[i] : i;
    return true;
}

gs_status gs_iota_list_parse(const char *text, size_t len, gs_span span, gs_iota_list *out,
                             int64_t *total, size_t *used, gs_diags *d) {
    cursor c = {text, len, 0, NULL, d, span, false};
    bool ok = memchr(text, 0, len) == NULL || fail_at(&c, 0, "unexpected NUL byte");
    ok = ok && iota_list(&c, out, total);
    *used = c.i;
    return ok ? GS_OK : GS_ERR;
}

/* A device order over `dims` (rank entries, n devices): `<=[R]T(P)` or `[R]T(P)` iota, or an
 * explicit list (dense: a permutation of 0..n-1). what/unit name the owner in messages
 * ("devices=[2,2]", "tiles"). */
static bool parse_order(cursor *c, int rank, const int64_t *dims, int64_t n, bool dense,
                        const char *what, const char *unit, gs_tile_assignment *out) {
    size_t at = c->i;
    char ch = peek(c);
    bool iota = false;
    if (ch == '<' && c->i + 1 < c->n && c->s[c->i + 1] == '=') {
        c->i += 2;
        iota = true;
    } else if (ch == '[') {
        iota = true;
    }
    if (iota) {
        gs_iota_list il;
        int64_t total;
        if (!iota_list(c, &il, &total)) return false;
        if (total != n)
            return fail_at(c, at, "%s has %lld %s but the iota lists %lld devices", what,
                           (long long)n, unit, (long long)total);
        if (gs_tile_iota(c->a, rank, dims, il.n_reshape, il.reshape, il.perm, out) != GS_OK)
            return fail_at(c, at, "out of memory");
        return true;
    }
    gs_vec v;
    gs_vec_init(&v, sizeof(int64_t));
    bool ok = parse_int_run(c, &v);
    if (ok && (int64_t)v.n != n)
        ok = fail_at(c, at, "%s needs %lld device ids, found %zu", what, (long long)n, v.n);
    if (ok) ok = check_devices(c, at, v.data, n, dense);
    if (ok && gs_tile_explicit(c->a, rank, dims, v.data, out) != GS_OK)
        ok = fail_at(c, at, "out of memory");
    gs_vec_free(&v);
    return ok;
}

/* ------------------------------------------------------------------ names and meshes */

/* A mesh axis name: 'x', "x" or a bare identifier; copied into the arena. */
static bool parse_name(cursor *c, const char **out, size_t *len) {
    char ch = peek(c);
    size_t at = c->i;
    if (ch == '\'' || ch == '"') {
        c->i++;
        size_t start = c->i;
        while (c->i < c->n && c->s[c->i] != ch) c->i++;
        if (c->i >= c->n) return fail_at(c, at, "unterminated axis name");
        *len = c->i - start;
        *out = c->s + start;
        c->i++;
        if (*len == 0) return fail_at(c, at, "an axis name must not be empty");
        if (memchr(*out, 0, *len)) return fail_at(c, at, "an axis name must not hold a NUL byte");
    } else if (!word(c, out, len)) {
        char buf[8];
        return fail_at(c, at, "expected a mesh axis name, found %s", found(c, buf, sizeof buf));
    }
    return true;
}

/* `name=size (, name=size)*` up to (not including) stop; fills mesh axes (without devices). */
static bool parse_axes(cursor *c, char stop, gs_mesh *m) {
    const char *names[GS_MAX_TILE_RANK];
    int64_t sizes[GS_MAX_TILE_RANK] = {0};
    int n = 0;
    if (peek(c) != stop) {
        do {
            size_t at = c->i;
            const char *nm;
            size_t len;
            if (!parse_name(c, &nm, &len)) return false;
            if (n >= GS_MAX_TILE_RANK) return fail_at(c, at, "too many mesh axes");
            for (int i = 0; i < n; i++)
                if (strlen(names[i]) == len && memcmp(names[i], nm, len) == 0)
                    return fail_at(c, at, "mesh axis '%.*s' is defined twice", (int)len, nm);
            if (!expect(c, '=', "after the mesh axis name")) return false;
            size_t sat = c->i;
            if (!parse_int(c, &sizes[n], "a mesh axis size")) return false;
            if (sizes[n] < 1)
                return fail_at(c, sat, "mesh axis '%.*s' has size %lld; sizes must be >= 1",
                               (int)len, nm, (long long)sizes[n]);
            names[n] = gs_arena_strndup(c->a, nm, len);
            if (!names[n]) return fail_at(c, at, "out of memory");
            n++;
        } while (accept(c, ','));
    }
    int64_t total;
    if (!checked_prod(c, c->i, sizes, n, "the mesh", &total)) return false;
    const char **nv = GS_NEW_ARRAY(c->a, const char *, n ? n : 1);
    int64_t *sv = GS_NEW_ARRAY(c->a, int64_t, n ? n : 1);
    if (!nv || !sv) return fail_at(c, c->i, "out of memory");
    memcpy(nv, names, sizeof *nv * (size_t)n);
    memcpy(sv, sizes, sizeof *sv * (size_t)n);
    m->n_axes = n;
    m->names = nv;
    m->sizes = sv;
    m->n_devices = total;
    int64_t one = 1;
    if (gs_tile_iota(c->a, n ? n : 1, n ? sv : &one, 0, NULL, NULL, &m->devices) != GS_OK)
        return fail_at(c, c->i, "out of memory");
    return true;
}

/* The device order of a mesh (`:order` on the command line, `device_ids=(order)` in text). */
static bool parse_mesh_order(cursor *c, gs_mesh *m) {
    int64_t one = 1;
    gs_tile_assignment t;
    if (!parse_order(c, m->n_axes ? m->n_axes : 1, m->n_axes ? m->sizes : &one, m->n_devices, true,
                     "the mesh", "devices", &t))
        return false;
    m->devices = t;
    m->device_order = true;
    return true;
}

int gs_mesh_find_axis(const gs_mesh *m, const char *name, size_t len) {
    for (int i = 0; i < m->n_axes; i++)
        if (strlen(m->names[i]) == len && memcmp(m->names[i], name, len) == 0) return i;
    return -1;
}

gs_status gs_mesh_parse(gs_arena *a, const char *text, size_t len, gs_mesh *out, gs_diags *d,
                        gs_span span) {
    cursor c = {text, len, 0, a, d, span, false};
    memset(out, 0, sizeof *out);
    if (peek(&c) == 0) {
        fail_at(&c, 0, "the mesh is empty: expected NAME=SIZE,...");
        return GS_ERR;
    }
    if (!parse_axes(&c, ':', out)) return GS_ERR;
    if (out->n_axes == 0) {
        fail_at(&c, 0, "the mesh has no axes: expected NAME=SIZE,... before the device order");
        return GS_ERR;
    }
    if (accept(&c, ':') && !parse_mesh_order(&c, out)) return GS_ERR;
    if (peek(&c) != 0) {
        char buf[8];
        fail_at(&c, c.i, "unexpected %s in the mesh", found(&c, buf, sizeof buf));
        return GS_ERR;
    }
    return GS_OK;
}

/* ------------------------------------------------------------------ named (V3) shardings */

/* One axis ref as written, kept to check overlaps (refs on one axis must be disjoint parts). */
typedef struct ref_use {
    gs_axis_ref ref; /* the ref */
    size_t at;       /* where it was written */
} ref_use;

/* What the refs of one named sharding are checked against. */
typedef struct named_ctx {
    gs_mesh *mesh; /* the mesh being referred to */
    gs_vec uses;   /* ref_use of every ref so far */
    bool sdy;      /* Shardy's syntax: dims may carry a priority `p<N>`, the body ends at '>' */
} named_ctx;

static bool parse_ref(cursor *c, named_ctx *nc, gs_axis_ref *out) {
    size_t at = c->i;
    const char *nm;
    size_t len;
    if (!parse_name(c, &nm, &len)) return false;
    int ax = gs_mesh_find_axis(nc->mesh, nm, len);
    if (ax < 0) return fail_at(c, at, "mesh axis '%.*s' does not exist", (int)len, nm);
    int64_t size = nc->mesh->sizes[ax];
    out->axis = ax;
    out->pre_size = 0;
    out->size = size;
    if (accept(c, ':')) {
        int64_t pre, sub;
        if (!expect(c, '(', "before the sub-axis pre-size") ||
            !parse_int(c, &pre, "a sub-axis pre-size") || !expect(c, ')', "after the pre-size") ||
            !parse_int(c, &sub, "a sub-axis size"))
            return false;
        if (pre < 1 || sub < 2 || sub >= size || pre > size / sub || size % (pre * sub) != 0)
            return fail_at(c, at,
                           "sub-axis '%.*s':(%lld)%lld does not fit axis '%.*s' of size "
                           "%lld",
                           (int)len, nm, (long long)pre, (long long)sub, (int)len, nm,
                           (long long)size);
        out->pre_size = pre;
        out->size = sub;
    }
    /* Disjointness against every earlier use of the axis. */
    int64_t lo = out->pre_size ? out->pre_size : 1, hi = lo * out->size;
    for (size_t i = 0; i < nc->uses.n; i++) {
        const gs_axis_ref *r = &GS_VEC_AT(&nc->uses, ref_use, i).ref;
        if (r->axis != ax) continue;
        int64_t rlo = r->pre_size ? r->pre_size : 1, rhi = rlo * r->size;
        if (lo < rhi && rlo < hi)
            return fail_at(c, at, "mesh axis '%.*s' is used twice", (int)len, nm);
        int64_t big = lo > rlo ? lo : rlo, small_next = lo > rlo ? rhi : hi;
        if (big % small_next != 0)
            return fail_at(c, at, "sub-axes of mesh axis '%.*s' overlap", (int)len, nm);
    }
    ref_use u = {*out, at};
    if (gs_vec_push(&nc->uses, &u) != GS_OK) return fail_at(c, at, "out of memory");
    return true;
}

/* A list of refs up to close (the opener already read); `?` allowed when open_ok. */
static bool parse_refs(cursor *c, named_ctx *nc, char close, bool open_ok, gs_axis_list *out) {
    gs_vec v;
    gs_vec_init(&v, sizeof(gs_axis_ref));
    bool ok = true;
    out->open = false;
    if (!accept(c, close)) {
        for (;;) {
            if (open_ok && accept(c, '?')) {
                out->open = true;
                ok = expect(c, close, "after '?'");
                break;
            }
            gs_axis_ref r;
            if (!(ok = parse_ref(c, nc, &r))) break;
            if (gs_vec_push(&v, &r) != GS_OK) {
                ok = fail_at(c, c->i, "out of memory");
                break;
            }
            if (accept(c, close)) break;
            if (!(ok = expect(c, ',', "between axes"))) break;
        }
    }
    if (ok) {
        out->n = (int)v.n;
        out->v = v.n ? gs_arena_memdup(c->a, v.data, v.n * sizeof(gs_axis_ref)) : NULL;
        if (v.n && !out->v) ok = fail_at(c, c->i, "out of memory");
    }
    gs_vec_free(&v);
    return ok;
}

static gs_sharding *finish_named(cursor *c, size_t at, gs_named *nm, const char *metadata) {
    gs_sharding *s;
    if (gs_sharding_from_named(c->a, nm, &s) != GS_OK) {
        fail_at(c, at, "out of memory");
        return NULL;
    }
    gs_sharding *r = gs_sharding_with_metadata(c->a, s, metadata);
    if (!r) {
        fail_at(c, at, "out of memory");
        return NULL;
    }
    r->named = nm;
    return r;
}

/* The body of a named sharding after the opening '{' (the cursor is at `mesh` or
 * `maximal_mesh`), through the closing '}'. */
/* maximal_mesh[device_id=N] (the word read), its metadata and the closing '}'. */
static gs_sharding *parse_named_maximal(cursor *c, size_t start, gs_named *nm) {
    const char *metadata = NULL;
    nm->form = GS_NAMED_MAXIMAL;
    if (!expect(c, '[', "after maximal_mesh") || !accept_word(c, "device_id")) {
        if (!c->failed) fail_at(c, c->i, "expected device_id=N in maximal_mesh[...]");
        return NULL;
    }
    if (!expect(c, '=', "after device_id") || !parse_int(c, &nm->device, "a device id") ||
        !expect(c, ']', "to close maximal_mesh[...]"))
        return NULL;
    if (accept(c, ',')) {
        if (!accept_word(c, "metadata")) {
            fail_at(c, c->i, "expected metadata={...} after maximal_mesh[...]");
            return NULL;
        }
        if (!expect(c, '=', "after metadata") || !parse_balanced(c, &metadata)) return NULL;
    }
    if (!expect(c, '}', "to close the sharding")) return NULL;
    return finish_named(c, start, nm, metadata);
}

/* After the mesh: [dim shardings], replicated, unreduced or manual. */
static bool parse_named_form(cursor *c, named_ctx *nc, gs_named *nm) {
    bool ok = true;
    accept(c, ',');
    size_t bat = c->i;
    if (accept(c, '[')) {
        nm->form = GS_NAMED_DIMS;
        gs_vec dims, prio;
        gs_vec_init(&dims, sizeof(gs_axis_list));
        gs_vec_init(&prio, sizeof(int64_t));
        bool any_prio = false;
        if (!accept(c, ']')) {
            do {
                gs_axis_list l;
                int64_t p = -1;
                if (!(ok = expect(c, '{', "to open a dim sharding") &&
                           parse_refs(c, nc, '}', true, &l)))
                    break;
                if (nc->sdy && c->i < c->n && c->s[c->i] == 'p') { /* `}p1`: a priority */
                    c->i++;
                    size_t pat = c->i;
                    if (!(ok = parse_int(c, &p, "a priority"))) break;
                    if (p < 0) ok = fail_at(c, pat, "a priority must be >= 0");
                    any_prio = true;
                }
                if (ok && (gs_vec_push(&dims, &l) != GS_OK || gs_vec_push(&prio, &p) != GS_OK))
                    ok = fail_at(c, c->i, "out of memory");
            } while (ok && accept(c, ','));
            if (ok) ok = expect(c, ']', "to close the dim shardings");
        }
        if (ok) {
            nm->n_dims = (int)dims.n;
            nm->dims =
                dims.n ? gs_arena_memdup(c->a, dims.data, dims.n * sizeof(gs_axis_list)) : NULL;
            if (dims.n && !nm->dims) ok = fail_at(c, bat, "out of memory");
            if (ok && any_prio) {
                nm->priorities = gs_arena_memdup(c->a, prio.data, prio.n * sizeof(int64_t));
                if (!nm->priorities) ok = fail_at(c, bat, "out of memory");
            }
        }
        gs_vec_free(&dims);
        gs_vec_free(&prio);
    } else if (accept_word(c, "replicated")) {
        nm->form = GS_NAMED_REPLICATED;
    } else if (accept_word(c, "unreduced")) {
        nm->form = GS_NAMED_UNREDUCED;
    } else if (accept_word(c, "manual")) {
        nm->form = GS_NAMED_MANUAL;
    } else {
        char buf[8];
        ok = fail_at(c, bat,
                     "expected [dim shardings], replicated, unreduced or manual "
                     "after the mesh, found %s",
                     found(c, buf, sizeof buf));
    }
    return ok;
}

/* The attributes after the form, up to the closing '}': metadata, replicated={...},
 * unreduced[ kind]={...}, manual={...}. */
static bool parse_named_attrs(cursor *c, named_ctx *nc, gs_named *nm, const char **metadata) {
    bool ok = true;
    char close = nc->sdy ? '>' : '}';
    while (ok && !accept(c, close)) {
        accept(c, ',');
        size_t wat = c->i;
        const char *w;
        size_t len;
        if (!word(c, &w, &len)) {
            char buf[8];
            return fail_at(c, wat, "expected '%c' to close the sharding, found %s", close,
                           found(c, buf, sizeof buf));
        }
        if (!nc->sdy && is_word(w, len, "metadata")) {
            ok = expect(c, '=', "after metadata") && parse_balanced(c, metadata);
            continue;
        }
        gs_axis_list *l = is_word(w, len, "replicated")  ? &nm->replicated
                          : is_word(w, len, "unreduced") ? &nm->unreduced
                          : is_word(w, len, "manual")    ? &nm->manual
                                                         : NULL;
        if (!l) return fail_at(c, wat, "unknown attribute '%.*s' in a named sharding", (int)len, w);
        if (l->n) return fail_at(c, wat, "'%.*s={...}' is given twice", (int)len, w);
        if (!expect(c, '=', "after the attribute name")) return false;
        const char *red;
        size_t rlen;
        if (l == &nm->unreduced && peek(c) != '{' && word(c, &red, &rlen)) {
            nm->reduction = gs_arena_strndup(c->a, red, rlen);
            if (!nm->reduction) ok = fail_at(c, wat, "out of memory");
        }
        ok = ok && expect(c, '{', "to open the axis list") && parse_refs(c, nc, '}', false, l);
    }
    return ok;
}

/* Bounds the tile dims (a dim per tensor dim, up to three subgroups) and the mesh segments
 * (each sub-axis cuts its axis at most twice). */
static bool named_fits(cursor *c, size_t start, const named_ctx *nc, const gs_named *nm) {
    int n_sub = 0;
    for (size_t i = 0; i < nc->uses.n; i++)
        n_sub += GS_VEC_AT(&nc->uses, ref_use, i).ref.pre_size != 0;
    if (nm->n_dims + 3 > GS_MAX_TILE_RANK || nm->mesh.n_axes + 2 * n_sub > GS_MAX_TILE_RANK)
        return fail_at(c, start, "the named sharding has too many dims or sub-axes");
    return true;
}

static gs_sharding *parse_named(cursor *c, size_t start) {
    gs_named *nm = GS_NEW(c->a, gs_named);
    if (!nm) {
        fail_at(c, start, "out of memory");
        return NULL;
    }
    if (accept_word(c, "maximal_mesh")) return parse_named_maximal(c, start, nm);
    if (!accept_word(c, "mesh")) {
        fail_at(c, c->i, "expected mesh[...]");
        return NULL;
    }
    if (!expect(c, '[', "after mesh") || !parse_axes(c, ']', &nm->mesh) ||
        !expect(c, ']', "to close the mesh axes"))
        return NULL;
    named_ctx nc = {&nm->mesh, {0}, false};
    gs_vec_init(&nc.uses, sizeof(ref_use));
    gs_sharding *result = NULL;
    const char *metadata = NULL;
    bool ok = true;
    size_t save = c->i;
    accept(c, ',');
    if (accept_word(c, "device_ids")) {
        ok = expect(c, '=', "after device_ids") && expect(c, '(', "after device_ids=") &&
             parse_mesh_order(c, &nm->mesh) && expect(c, ')', "to close device_ids=(...)");
    } else {
        c->i = save;
    }
    ok = ok && parse_named_form(c, &nc, nm) && parse_named_attrs(c, &nc, nm, &metadata);
    if (ok && !c->failed && named_fits(c, start, &nc, nm))
        result = finish_named(c, start, nm, metadata);
    gs_vec_free(&nc.uses);
    return result;
}

/* ------------------------------------------------------------------ Shardy (sdy) attributes */

/* Shardy's mesh body `<[NAME=INT, ...] (, device_ids=[INT, ...])?>` (the '<' next). A mesh with
 * no axes and one device id is the maximal mesh of that device. */
static bool parse_sdy_mesh(cursor *c, gs_mesh *m) {
    memset(m, 0, sizeof *m);
    if (!expect(c, '<', "to open the mesh") || !expect(c, '[', "before the mesh axes") ||
        !parse_axes(c, ']', m) || !expect(c, ']', "to close the mesh axes"))
        return false;
    if (accept(c, ',')) {
        size_t at = c->i;
        if (!accept_word(c, "device_ids"))
            return fail_at(c, at, "expected device_ids=[...] after the mesh axes");
        if (!expect(c, '=', "after device_ids") || !expect(c, '[', "after device_ids="))
            return false;
        size_t lat = c->i;
        gs_vec v;
        gs_vec_init(&v, sizeof(int64_t));
        bool ok = parse_int_run(c, &v) && expect(c, ']', "to close device_ids");
        int64_t one = 1;
        if (ok && (int64_t)v.n != m->n_devices)
            ok = fail_at(c, lat, "the mesh has %lld devices but device_ids lists %zu",
                         (long long)m->n_devices, v.n);
        if (ok && m->n_axes > 0) ok = check_devices(c, lat, v.data, m->n_devices, true);
        if (ok && m->n_axes == 0 && GS_VEC_AT(&v, int64_t, 0) < 0)
            ok = fail_at(c, lat, "a device id must be >= 0");
        if (ok && gs_tile_explicit(c->a, m->n_axes ? m->n_axes : 1, m->n_axes ? m->sizes : &one,
                                   v.data, &m->devices) != GS_OK)
            ok = fail_at(c, lat, "out of memory");
        m->device_order = true;
        gs_vec_free(&v);
        if (!ok) return false;
    }
    return expect(c, '>', "to close the mesh");
}

gs_status gs_mesh_parse_sdy(gs_arena *a, const char *text, size_t len, gs_mesh *out,
                            size_t *used, gs_diags *d, gs_span span) {
    cursor c = {text, len, 0, a, d, span, false};
    accept_word(&c, "mesh");
    bool ok = parse_sdy_mesh(&c, out);
    if (used) *used = c.i;
    return ok ? GS_OK : GS_ERR;
}

const gs_mesh *gs_mesh_table_find(const gs_mesh_table *t, const char *name, size_t len) {
    for (int i = 0; t && i < t->n; i++)
        if (strlen(t->names[i]) == len && memcmp(t->names[i], name, len) == 0) return &t->meshes[i];
    return NULL;
}

/* `@NAME` (looked up in meshes; *name is the table's copy of NAME) or an inline `mesh<...>`
 * (*name NULL), into *m. */
static bool parse_sdy_mesh_ref(cursor *c, const gs_mesh_table *meshes, gs_mesh *m,
                               const char **name) {
    *name = NULL;
    size_t at = c->i;
    if (!accept(c, '@')) {
        if (!accept_word(c, "mesh")) return fail_at(c, at, "expected @MESH or mesh<...>");
        return parse_sdy_mesh(c, m);
    }
    const char *nm;
    size_t len;
    if (!parse_name(c, &nm, &len)) return false;
    const gs_mesh *found_mesh = gs_mesh_table_find(meshes, nm, len);
    if (!found_mesh) return fail_at(c, at, "mesh @%.*s is not defined", (int)len, nm);
    *m = *found_mesh;
    *name = meshes->names[found_mesh - meshes->meshes];
    return true;
}

gs_status gs_sharding_parse_sdy(gs_arena *a, const gs_mesh_table *meshes, const char *text,
                                size_t len, gs_sharding **out, size_t *used, gs_diags *d,
                                gs_span span) {
    cursor c = {text, len, 0, a, d, span, false};
    *out = NULL;
    gs_named *nm = GS_NEW(a, gs_named);
    if (!nm) {
        fail_at(&c, 0, "out of memory");
        return GS_ERR;
    }
    named_ctx nc = {&nm->mesh, {0}, true};
    gs_vec_init(&nc.uses, sizeof(ref_use));
    bool ok = expect(&c, '<', "to open the sharding") && parse_sdy_mesh_ref(&c, meshes, &nm->mesh, &nm->mesh_name) &&
              expect(&c, ',', "after the mesh") && parse_named_form(&c, &nc, nm) &&
              parse_named_attrs(&c, &nc, nm, NULL) && named_fits(&c, 0, &nc, nm);
    gs_vec_free(&nc.uses);
    if (ok && nm->mesh.n_axes == 0 && nm->mesh.device_order) {
        /* The maximal mesh of one device. */
        nm->form = GS_NAMED_MAXIMAL;
        nm->device = gs_tile_device_at(&nm->mesh.devices, 0);
    }
    if (ok && gs_sharding_from_named(a, nm, out) != GS_OK) ok = fail_at(&c, 0, "out of memory");
    if (ok) (*out)->named = nm;
    if (used) *used = c.i;
    return ok ? GS_OK : GS_ERR;
}

/* ------------------------------------------------------------------ XLA sharding text */

static gs_sharding *parse_sharding(cursor *c, int depth);

static bool parse_subgroup_types(cursor *c, gs_subgroup_kind *types, int *n) {
    *n = 0;
    if (!expect(c, '{', "after last_tile_dims=")) return false;
    if (accept(c, '}')) return true;
    do {
        size_t at = c->i;
        const char *w;
        size_t len;
        word(c, &w, &len);
        gs_subgroup_kind k;
        if (is_word(w, len, "manual"))
            k = GS_SUBGROUP_MANUAL;
        else if (is_word(w, len, "replicated"))
            k = GS_SUBGROUP_REPLICATED;
        else if (is_word(w, len, "unreduced"))
            k = GS_SUBGROUP_UNREDUCED;
        else if (len)
            return fail_at(c, at,
                           "unknown subgroup type '%.*s' in last_tile_dims (expected "
                           "manual, replicated or unreduced)",
                           (int)len, w);
        else
            return fail_at(c, at, "expected a subgroup type in last_tile_dims");
        if (*n >= GS_MAX_TILE_RANK) return fail_at(c, at, "too many subgroup types");
        types[(*n)++] = k;
    } while (accept(c, ','));
    return expect(c, '}', "to close last_tile_dims");
}

/* A leaf in XLA's V2 syntax, after the opening '{', through the closing '}'. */
/* What the words of one leaf sharding said (parse_leaf_words), before it is built. */
enum { K_NONE, K_REPLICATED, K_MANUAL, K_UNKNOWN, K_UNREDUCED, K_MAXIMAL };
static const char *const LEAF_KIND_NAMES[] = {"",        "replicated", "manual",
                                              "unknown", "unreduced",  "maximal"};
typedef struct leaf_words {
    int kind;
    bool has_device, has_tiles, last_rep, has_types;
    int64_t device;
    size_t tiles_at, types_at;
    gs_tile_assignment tiles;
    int64_t tdims[GS_MAX_TILE_RANK];
    int rank, n_types;
    gs_subgroup_kind types[GS_MAX_TILE_RANK];
    gs_shard_group_kind group;
    int64_t group_id;
    const char *metadata;
    char what[256]; /* devices=[...] as written, for messages */
} leaf_words;

/* devices=[dims]<order>: the tile dims and assignment into l. */
static bool parse_leaf_devices(cursor *c, size_t at, leaf_words *l) {
    if (l->has_tiles) {
        fail_at(c, at, "devices=[...] is given twice");
        return false;
    }
    l->tiles_at = at;
    if (!expect(c, '=', "after devices")) return false;
    size_t dat = c->i;
    if (!parse_ints(c, '[', ']', l->tdims, GS_MAX_TILE_RANK, &l->rank, "devices=[...]"))
        return false;
    int64_t total;
    if (l->rank == 0) {
        fail_at(c, dat, "devices=[] has no dims");
        return false;
    }
    if (!checked_prod(c, dat, l->tdims, l->rank, "devices=[...]", &total)) return false;
    int wp = snprintf(l->what, sizeof l->what, "devices=[");
    for (int i = 0; i < l->rank && wp < (int)sizeof l->what - 24; i++)
        wp += snprintf(l->what + wp, sizeof l->what - (size_t)wp, "%s%lld", i ? "," : "",
                       (long long)l->tdims[i]);
    snprintf(l->what + wp, sizeof l->what - (size_t)wp, "]");
    if (!parse_order(c, l->rank, l->tdims, total, false, l->what, "tiles", &l->tiles))
        return false;
    l->has_tiles = true;
    return true;
}

/* The words of a leaf sharding up to its closing '}'. */
static bool parse_leaf_words(cursor *c, size_t start, leaf_words *l) {
    for (;;) {
        if (accept(c, '}')) return true;
        size_t at = c->i;
        if (at >= c->n) {
            fail_at(c, start, "unterminated sharding: expected '}'");
            return false;
        }
        const char *w;
        size_t len;
        if (!word(c, &w, &len)) {
            fail_at(c, at, "unexpected '%c' in sharding", c->s[at]);
            return false;
        }
        int k = is_word(w, len, "replicated")  ? K_REPLICATED
                : is_word(w, len, "manual")    ? K_MANUAL
                : is_word(w, len, "unknown")   ? K_UNKNOWN
                : is_word(w, len, "unreduced") ? K_UNREDUCED
                : is_word(w, len, "maximal")   ? K_MAXIMAL
                                               : K_NONE;
        if (k != K_NONE) {
            if (l->kind != K_NONE && l->kind != k) {
                fail_at(c, at, "conflicting sharding kinds '%s' and '%s'",
                        LEAF_KIND_NAMES[l->kind], LEAF_KIND_NAMES[k]);
                return false;
            }
            l->kind = k;
        } else if (is_word(w, len, "device")) {
            if (!expect(c, '=', "after device") || !parse_int(c, &l->device, "a device id"))
                return false;
            l->has_device = true;
        } else if (is_word(w, len, "devices")) {
            if (!parse_leaf_devices(c, at, l)) return false;
        } else if (is_word(w, len, "last_tile_dim_replicate")) {
            l->last_rep = true;
        } else if (is_word(w, len, "last_tile_dims")) {
            l->types_at = at;
            if (!expect(c, '=', "after last_tile_dims") ||
                !parse_subgroup_types(c, l->types, &l->n_types))
                return false;
            l->has_types = true;
        } else if (is_word(w, len, "shard_as") || is_word(w, len, "shard_like")) {
            l->group = w[6] == 'a' ? GS_SHARD_GROUP_AS : GS_SHARD_GROUP_LIKE;
            if (!parse_int(c, &l->group_id, "a shard group id")) return false;
        } else if (is_word(w, len, "metadata")) {
            if (!expect(c, '=', "after metadata") || !parse_balanced(c, &l->metadata))
                return false;
        } else {
            fail_at(c, at, "unknown sharding attribute '%.*s'", (int)len, w);
            return false;
        }
    }
}

/* The tiled sharding the words describe (no kind word): partial or with subgroup types. */
static gs_sharding *build_tiled_leaf(cursor *c, size_t start, leaf_words *l) {
    if (!l->has_tiles) {
        fail_at(c, start,
                l->has_device ? "device=N needs the word maximal"
                              : "expected replicated, maximal, manual, unknown, "
                                "unreduced or devices=[...] in the sharding");
        return NULL;
    }
    if (l->last_rep && l->has_types) {
        fail_at(c, l->types_at,
                "last_tile_dim_replicate and last_tile_dims cannot both be "
                "given");
        return NULL;
    }
    if (l->n_types > l->rank) {
        fail_at(c, l->types_at, "last_tile_dims lists %d types but %s has only %d dims",
                l->n_types, l->what, l->rank);
        return NULL;
    }
    gs_sharding *s = l->last_rep ? gs_sharding_partial(c->a, &l->tiles)
                                 : gs_sharding_subgroup(c->a, &l->tiles, l->n_types, l->types);
    if (!s) fail_at(c, start, "out of memory");
    return s;
}

static gs_sharding *parse_leaf(cursor *c, size_t start) {
    leaf_words l = {.kind = K_NONE, .group = GS_SHARD_GROUP_NONE, .what = "devices=[...]"};
    if (!parse_leaf_words(c, start, &l)) return NULL;
    gs_sharding *s = NULL;
    if (l.kind == K_MAXIMAL) {
        if (!l.has_device) {
            fail_at(c, start, "a maximal sharding needs device=N");
            return NULL;
        }
        if (l.has_tiles) {
            fail_at(c, l.tiles_at, "a maximal sharding takes device=N, not devices=[...]");
            return NULL;
        }
        s = gs_sharding_maximal(c->a, l.device);
    } else if (l.kind != K_NONE) {
        if (l.has_tiles || l.has_device) {
            fail_at(c, l.has_tiles ? l.tiles_at : start,
                    "%s shardings should not have any devices "
                    "assigned",
                    LEAF_KIND_NAMES[l.kind]);
            return NULL;
        }
        s = l.kind == K_REPLICATED ? gs_sharding_replicated(c->a)
            : l.kind == K_MANUAL   ? gs_sharding_manual(c->a)
            : l.kind == K_UNKNOWN  ? gs_sharding_unknown(c->a)
                                   : gs_sharding_unreduced(c->a);
    } else {
        s = build_tiled_leaf(c, start, &l);
        if (!s) return NULL;
    }
    if (s && (l.group != GS_SHARD_GROUP_NONE || l.metadata)) {
        s = gs_sharding_with_group(c->a, s, l.group, l.group_id);
        if (s) s->metadata = l.metadata;
    }
    if (!s) fail_at(c, start, "out of memory");
    return s;
}

static gs_sharding *parse_sharding(cursor *c, int depth) {
    size_t start = c->i;
    char buf[8];
    if (peek(c) != '{') {
        fail_at(c, c->i, "expected '{' to start a sharding, found %s", found(c, buf, sizeof buf));
        return NULL;
    }
    start = c->i;
    c->i++;
    char ch = peek(c);
    if (ch == '{' || ch == '}') {
        if (depth > 0) {
            fail_at(c, start, "tuple shardings cannot nest");
            return NULL;
        }
        gs_vec v;
        gs_vec_init(&v, sizeof(gs_sharding *));
        gs_sharding *s = NULL;
        bool ok = true;
        if (!accept(c, '}')) {
            do {
                gs_sharding *e = parse_sharding(c, depth + 1);
                if (!e || gs_vec_push(&v, &e) != GS_OK) {
                    ok = e ? fail_at(c, c->i, "out of memory") : false;
                    break;
                }
            } while (accept(c, ','));
            if (ok) ok = expect(c, '}', "to close the tuple sharding");
        }
        if (ok) {
            s = gs_sharding_tuple(c->a, (int)v.n, v.data);
            if (!s) fail_at(c, start, "out of memory");
        }
        gs_vec_free(&v);
        return s;
    }
    size_t save = c->i;
    const char *w;
    size_t len;
    if (word(c, &w, &len) && (is_word(w, len, "mesh") || is_word(w, len, "maximal_mesh"))) {
        c->i = save;
        return parse_named(c, start);
    }
    c->i = save;
    return parse_leaf(c, start);
}

gs_status gs_sharding_parse(gs_arena *a, const char *text, size_t len, gs_sharding **out,
                            gs_diags *d, gs_span span) {
    cursor c = {text, len, 0, a, d, span, false};
    *out = NULL;
    /* Names and metadata are stored as C strings: a NUL would cut them short, and what prints
     * would no longer parse (found by tests/fuzz/fuzz_sharding). HLO text never holds one. */
    const char *nul = memchr(text, 0, len);
    if (nul) {
        fail_at(&c, (size_t)(nul - text), "unexpected NUL byte in the sharding text");
        return GS_ERR;
    }
    gs_sharding *s = parse_sharding(&c, 0);
    if (s && peek(&c) != 0) {
        fail_at(&c, c.i, "unexpected text after the sharding");
        s = NULL;
    }
    if (!s) {
        if (!c.failed) fail_at(&c, 0, "invalid sharding");
        return GS_ERR;
    }
    *out = s;
    return GS_OK;
}

/* ------------------------------------------------------------------ PartitionSpecs */

gs_status gs_sharding_from_spec(gs_arena *a, const gs_mesh *mesh, const char *spec, size_t len,
                                int rank, gs_sharding **out, gs_diags *d, gs_span span) {
    cursor c = {spec, len, 0, a, d, span, false};
    *out = NULL;
    gs_axis_list entries[GS_MAX_TILE_RANK];
    bool wrapped = false;
    size_t save = c.i;
    if ((accept_word(&c, "P") || accept_word(&c, "PartitionSpec")) && accept(&c, '('))
        wrapped = true;
    else
        c.i = save;
    bool used[GS_MAX_TILE_RANK] = {0};
    int n = 0;
    bool ok = true;
    bool more = peek(&c) != 0 && !(wrapped && peek(&c) == ')');
    while (ok && more) {
        size_t at = c.i;
        gs_axis_ref refs[GS_MAX_TILE_RANK];
        int nr = 0;
        bool group = accept(&c, '(');
        for (;;) {
            char ch = peek(&c);
            if (group && ch == ')') break;
            if (!group && (ch == ',' || ch == 0 || (wrapped && ch == ')'))) break;
            size_t nat = c.i;
            const char *w;
            size_t wl;
            if (!(ok = parse_name(&c, &w, &wl))) break;
            if (!group && (is_word(w, wl, "None") || is_word(w, wl, "_"))) break;
            int ax = gs_mesh_find_axis(mesh, w, wl);
            if (ax < 0) {
                gs_sb sb = {0};
                for (int i = 0; i < mesh->n_axes; i++)
                    gs_sb_printf(&sb, "%s%s", i ? ", " : "", mesh->names[i]);
                ok = fail_at(&c, nat, "mesh axis '%.*s' does not exist (the mesh has %s)", (int)wl,
                             w, mesh->n_axes ? gs_sb_str(&sb) : "no axes");
                gs_sb_free(&sb);
                break;
            }
            if (used[ax]) {
                ok = fail_at(&c, nat, "mesh axis '%.*s' is used twice in the PartitionSpec",
                             (int)wl, w);
                break;
            }
            used[ax] = true;
            refs[nr++] = (gs_axis_ref){ax, 0, mesh->sizes[ax]};
            if (!group || !accept(&c, ',')) break;
        }
        if (ok && group) ok = expect(&c, ')', "to close the axis group");
        if (!ok) break;
        if (n >= GS_MAX_TILE_RANK) {
            ok = fail_at(&c, at, "the PartitionSpec has too many entries");
            break;
        }
        entries[n].n = nr;
        entries[n].open = false;
        entries[n].v = nr ? gs_arena_memdup(a, refs, sizeof refs[0] * (size_t)nr) : NULL;
        if (nr && !entries[n].v) return GS_ERR;
        n++;
        if (!accept(&c, ',')) break;
        more = !(wrapped && peek(&c) == ')') && peek(&c) != 0;
    }
    if (ok && wrapped) ok = expect(&c, ')', "to close P(...)");
    if (ok && peek(&c) != 0) {
        char buf[8];
        ok = fail_at(&c, c.i, "unexpected %s in the PartitionSpec", found(&c, buf, sizeof buf));
    }
    if (ok && n > rank)
        ok = fail_at(&c, 0, "the PartitionSpec has %d entries but the tensor has rank %d", n, rank);
    if (!ok) return GS_ERR;
    gs_named *nm = GS_NEW(a, gs_named);
    gs_axis_list *dims = GS_NEW_ARRAY(a, gs_axis_list, rank ? rank : 1);
    if (!nm || !dims) return GS_ERR;
    for (int i = 0; i < rank; i++) dims[i] = i < n ? entries[i] : (gs_axis_list){0, NULL, false};
    nm->form = GS_NAMED_DIMS;
    nm->mesh = *mesh;
    nm->n_dims = rank;
    nm->dims = dims;
    return gs_sharding_from_named(a, nm, out);
}

/* ------------------------------------------------------------------ Shardy op sharding rules */

/* Most factors a written rule may have (symbols i..z, z_1..z_238). */
enum { MAX_RULE_FACTORS = 256 };

/* A factor symbol at the cursor (no whitespace skipped): `i`..`z` are 0..17, `z_N` is 17+N;
 * -1 (nothing read) when there is none. */
static int rule_symbol(cursor *c) {
    if (c->i >= c->n || c->s[c->i] < 'i' || c->s[c->i] > 'z') return -1;
    size_t j = c->i + 1;
    if (c->s[c->i] == 'z' && j + 1 < c->n && c->s[j] == '_' &&
        isdigit((unsigned char)c->s[j + 1])) {
        int64_t x = 0;
        for (j++; j < c->n && isdigit((unsigned char)c->s[j]) && x < MAX_RULE_FACTORS; j++)
            x = x * 10 + (c->s[j] - '0');
        c->i = j;
        return x < 1 || x >= MAX_RULE_FACTORS ? MAX_RULE_FACTORS : 17 + (int)x;
    }
    c->i = j;
    return c->s[j - 1] - 'i';
}

/* `[` dim,* `]` `,`-separated between `(` and `)`: each dim one or more symbols run together.
 * Fills the tensors (arena) and counts them in *n; *max_sym receives the largest symbol. */
static bool parse_rule_tensors(cursor *c, gs_tensor_factors **out, int *n, int *max_sym) {
    gs_vec tensors, dims, syms;
    gs_vec_init(&tensors, sizeof(gs_tensor_factors));
    gs_vec_init(&dims, sizeof(gs_dim_factors));
    gs_vec_init(&syms, sizeof(int));
    bool ok = expect(c, '(', "to open the tensor mappings");
    if (ok && !accept(c, ')')) {
        do {
            ok = expect(c, '[', "to open a tensor mapping");
            dims.n = 0;
            if (ok && !accept(c, ']')) {
                do {
                    skip_ws(c);
                    size_t at = c->i;
                    syms.n = 0;
                    int f;
                    while (ok && (f = rule_symbol(c)) >= 0) {
                        if (f >= MAX_RULE_FACTORS)
                            ok = fail_at(c, at, "a factor symbol past z_%d", MAX_RULE_FACTORS - 18);
                        else if (gs_vec_push(&syms, &f) != GS_OK)
                            ok = fail_at(c, at, "out of memory");
                        if (f > *max_sym) *max_sym = f;
                    }
                    if (ok && !syms.n) ok = fail_at(c, at, "expected factor symbols (i, j, ...)");
                    if (!ok) break;
                    gs_dim_factors df = {(int)syms.n,
                                         gs_arena_memdup(c->a, syms.data, syms.n * sizeof(int))};
                    if (!df.factors || gs_vec_push(&dims, &df) != GS_OK)
                        ok = fail_at(c, at, "out of memory");
                } while (ok && accept(c, ','));
                ok = ok && expect(c, ']', "to close a tensor mapping");
            }
            if (!ok) break;
            gs_tensor_factors t = {(int)dims.n, NULL};
            if (dims.n) t.dims = gs_arena_memdup(c->a, dims.data, dims.n * sizeof(gs_dim_factors));
            if ((dims.n && !t.dims) || gs_vec_push(&tensors, &t) != GS_OK)
                ok = fail_at(c, c->i, "out of memory");
        } while (ok && accept(c, ','));
        ok = ok && expect(c, ')', "to close the tensor mappings");
    }
    *n = (int)tensors.n;
    *out = GS_NEW_ARRAY(c->a, gs_tensor_factors, tensors.n ? tensors.n : 1);
    if (ok && !*out) ok = fail_at(c, c->i, "out of memory");
    if (ok && tensors.n) memcpy(*out, tensors.data, tensors.n * sizeof(gs_tensor_factors));
    gs_vec_free(&tensors);
    gs_vec_free(&dims);
    gs_vec_free(&syms);
    return ok;
}

/* Checks the mapped tensors against the instruction's operands (or result leaves), as Shardy's
 * verifier does: as many, with their ranks, no factor twice in one tensor. (A factor's size need
 * not make its dim's: a slice's permutation factor has the operand's size in the result too.) */
static bool check_rule_tensors(cursor *c, int n_factors, int n, const gs_tensor_factors *t,
                               int n_shapes, const gs_shape *const *shapes, const char *what) {
    if (n != n_shapes)
        return fail_at(c, 0, "the rule maps %d %s tensors but the op has %d", n, what, n_shapes);
    bool *seen = GS_NEW_ARRAY(c->a, bool, n_factors ? n_factors : 1);
    if (!seen) return fail_at(c, 0, "out of memory");
    for (int i = 0; i < n; i++) {
        int rank = gs_shape_is_array(shapes[i]) ? shapes[i]->rank : 0;
        if (t[i].rank != rank)
            return fail_at(c, 0, "%s %d has rank %d but the rule maps %d dims", what, i, rank,
                           t[i].rank);
        memset(seen, 0, sizeof *seen * (size_t)(n_factors ? n_factors : 1));
        for (int d = 0; d < rank; d++)
            for (int k = 0; k < t[i].dims[d].n; k++) {
                int f = t[i].dims[d].factors[k];
                if (seen[f]) return fail_at(c, 0, "%s %d maps a factor twice", what, i);
                seen[f] = true;
            }
    }
    return true;
}

static void collect_array_leaves(const gs_shape *s, const gs_shape **out, int *n) {
    if (gs_shape_is_tuple(s)) {
        for (int i = 0; i < s->n_tuple; i++) collect_array_leaves(s->tuple[i], out, n);
    } else if (gs_shape_is_array(s)) {
        out[(*n)++] = s;
    }
}

gs_status gs_op_rule_parse(gs_arena *a, const char *text, size_t len, const gs_instr *in,
                           gs_op_rule **out, size_t *used, gs_diags *d, gs_span span) {
    cursor c = {text, len, 0, a, d, span, false};
    if (peek(&c) == '#') {
        c.i++;
        const char *w;
        size_t wl;
        if (!word(&c, &w, &wl) || !is_word(w, wl, "sdy.op_sharding_rule")) {
            fail_at(&c, 0, "expected #sdy.op_sharding_rule<...>");
            goto done;
        }
    }
    gs_op_rule *r = GS_NEW(a, gs_op_rule);
    gs_factor *f = GS_NEW_ARRAY(a, gs_factor, MAX_RULE_FACTORS);
    if (!r || !f) return GS_ERR;
    int max_sym = -1;
    if (!expect(&c, '<', "to open the rule") ||
        !parse_rule_tensors(&c, (gs_tensor_factors **)&r->operands, &r->n_operands, &max_sym))
        goto done;
    if (!expect(&c, '-', "before '>' in '->'") || !expect(&c, '>', "after '-' in '->'") ||
        !parse_rule_tensors(&c, (gs_tensor_factors **)&r->results, &r->n_results, &max_sym))
        goto done;
    /* {i=8, j=4}: the factors in symbol order. */
    if (accept(&c, '{')) {
        do {
            skip_ws(&c);
            size_t at = c.i;
            int s = rule_symbol(&c);
            if (s != r->n_factors) {
                if (r->n_factors < 18)
                    fail_at(&c, at, "expected factor %c here", 'i' + r->n_factors);
                else
                    fail_at(&c, at, "expected factor z_%d here", r->n_factors - 17);
                goto done;
            }
            int64_t size;
            if (!expect(&c, '=', "after a factor symbol") || !parse_int(&c, &size, "a size"))
                goto done;
            if (size < 0) {
                fail_at(&c, at, "a factor size must not be negative");
                goto done;
            }
            f[r->n_factors++] = (gs_factor){GS_FACTOR_PASS_THROUGH, size, false};
        } while (r->n_factors < MAX_RULE_FACTORS && accept(&c, ','));
        if (!expect(&c, '}', "to close the factor sizes")) goto done;
    }
    if (max_sym >= r->n_factors) {
        fail_at(&c, 0, "the rule uses a factor it gives no size");
        goto done;
    }
    /* reduction={...} need_replication={...} permutation={...} blocked_propagation={...} */
    static const char *const kinds[] = {"reduction", "need_replication", "permutation",
                                        "blocked_propagation"};
    static const gs_factor_kind kind_of[] = {GS_FACTOR_REDUCTION, GS_FACTOR_NEED_REPLICATION,
                                             GS_FACTOR_PERMUTATION, GS_FACTOR_PASS_THROUGH};
    for (int k = 0; k < 4; k++) {
        if (!accept_word(&c, kinds[k])) continue;
        if (!expect(&c, '=', "after the factor kind") || !expect(&c, '{', "to open the factors"))
            goto done;
        do {
            skip_ws(&c);
            size_t at = c.i;
            int s = rule_symbol(&c);
            if (s < 0 || s >= r->n_factors) {
                fail_at(&c, at, "expected a factor of the rule");
                goto done;
            }
            if (k == 3)
                f[s].blocked = true;
            else
                f[s].kind = kind_of[k];
        } while (accept(&c, ','));
        if (!expect(&c, '}', "to close the factors")) goto done;
    }
    if (accept(&c, ',')) {
        if (!accept_word(&c, "custom")) {
            fail_at(&c, c.i, "expected 'custom'");
            goto done;
        }
        r->custom = true;
    }
    if (!expect(&c, '>', "to close the rule")) goto done;
    r->factors = f;
    r->instr = in;
    r->registered = true;
    if (in) {
        const gs_shape **shapes =
            GS_NEW_ARRAY(a, const gs_shape *, in->n_operands + gs_shape_n_leaves(in->shape) + 1);
        if (!shapes) return GS_ERR;
        for (int i = 0; i < in->n_operands; i++) shapes[i] = in->operands[i]->shape;
        int n_leaves = 0;
        collect_array_leaves(in->shape, shapes + in->n_operands, &n_leaves);
        if (!check_rule_tensors(&c, r->n_factors, r->n_operands, r->operands, in->n_operands,
                                shapes, "operand") ||
            !check_rule_tensors(&c, r->n_factors, r->n_results, r->results, n_leaves,
                                shapes + in->n_operands, "result"))
            goto done;
    }
    *out = r;
done:
    if (used) *used = c.i;
    return c.failed ? GS_ERR : GS_OK;
}
