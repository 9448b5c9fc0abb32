/*
 * tile.c — tile assignments: the N-d array of device ids behind a tiled sharding, kept in XLA's
 * iota form `[dims]<=[reshape]T(perm)` (devices 0..n-1 reshaped, transposed, reshaped again)
 * whenever the order is one, or as an explicit list otherwise.
 *
 * Every query on an iota assignment is arithmetic on its O(rank) description: the device at a
 * position unravels the position over the transposed reshape dims; the position of a device
 * unravels the device over the reshape dims. Transposing the tile dims stays in iota form through
 * a common refinement of the tile dims and the transposed reshape dims: both are factorisations
 * of the same flat index, so each refined factor is a sub-dim of one tile dim and of one reshape
 * dim, and a transpose of tile dims is a permutation of refined factors. Only when no refinement
 * exists (e.g. tile dims [2,3] over reshape dims [3,2]) is the array materialised, and explicit
 * results are turned back into iota form when they are one, so equality stays structural.
 */
#include "internal.h"
#include "base/internal.h"

#include <stdlib.h>
#include <string.h>

int64_t gs_prod(const int64_t *v, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

int64_t gs_ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

/* ------------------------------------------------------------------ iota canonical form */

/* Canonicalises iota reshape dims r and perm p (n entries) in place, as XLA's
 * CanonicalizeIotaDims: size-1 dims drop, and two dims adjacent in both the reshape and the
 * transposed order merge. Returns the new count (>= 1: [1] for a single device). */
static int iota_canon(int64_t *r, int *p, int n) {
    for (;;) {
        int map[GS_MAX_FACTORS];
        int m = 0;
        for (int i = 0; i < n; i++) map[i] = r[i] == 1 ? -1 : m++;
        if (m != n) {
            int64_t nr[GS_MAX_FACTORS];
            int np[GS_MAX_FACTORS], k = 0;
            for (int i = 0; i < n; i++)
                if (map[i] >= 0) nr[map[i]] = r[i];
            for (int i = 0; i < n; i++)
                if (map[p[i]] >= 0) np[k++] = map[p[i]];
            memcpy(r, nr, sizeof *r * (size_t)m);
            memcpy(p, np, sizeof *p * (size_t)m);
            n = m;
        }
        bool merged = false;
        for (int i = 0; i + 1 < n; i++) {
            if (p[i + 1] == p[i] + 1) {
                r[p[i]] *= r[p[i] + 1];
                r[p[i] + 1] = 1;
                merged = true;
                break;
            }
        }
        if (!merged) break;
    }
    if (n == 0) {
        r[0] = 1;
        p[0] = 0;
        n = 1;
    }
    return n;
}

/* Fills out as an iota assignment from canonical reshape dims (copies everything into a). */
static gs_status make_iota(gs_arena *a, int rank, const int64_t *dims, const int64_t *r,
                           const int *p, int nr, gs_tile_assignment *out) {
    memset(out, 0, sizeof *out);
    int64_t *d = GS_NEW_ARRAY(a, int64_t, rank);
    int64_t *rr = GS_NEW_ARRAY(a, int64_t, nr);
    int *pp = GS_NEW_ARRAY(a, int, nr);
    int64_t *st = GS_NEW_ARRAY(a, int64_t, nr);
    if (!d || !rr || !pp || !st) return GS_ERR;
    memcpy(d, dims, sizeof *d * (size_t)rank);
    memcpy(rr, r, sizeof *rr * (size_t)nr);
    memcpy(pp, p, sizeof *pp * (size_t)nr);
    int64_t s = 1;
    for (int j = nr - 1; j >= 0; j--) {
        st[j] = s;
        s *= r[j];
    }
    out->rank = rank;
    out->dims = d;
    out->n = gs_prod(dims, rank);
    out->iota = true;
    out->n_reshape = nr;
    out->reshape = rr;
    out->perm = pp;
    out->strides = st;
    GS_ASSERT(s == out->n);
    return GS_OK;
}

gs_status gs_tile_iota(gs_arena *a, int rank, const int64_t *dims, int n_reshape,
                       const int64_t *reshape, const int *perm, gs_tile_assignment *out) {
    GS_ASSERT(rank >= 1 && rank <= GS_MAX_TILE_RANK && n_reshape <= GS_MAX_FACTORS);
    int64_t r[GS_MAX_FACTORS];
    int p[GS_MAX_FACTORS];
    int nr = n_reshape;
    if (nr == 0) {
        r[0] = gs_prod(dims, rank);
        p[0] = 0;
        nr = 1;
    } else {
        for (int i = 0; i < nr; i++) {
            r[i] = reshape[i];
            p[i] = perm ? perm[i] : i;
        }
    }
    GS_ASSERT(gs_prod(r, nr) == gs_prod(dims, rank));
    nr = iota_canon(r, p, nr);
    return make_iota(a, rank, dims, r, p, nr, out);
}

/* ------------------------------------------------------------------ explicit lists */

/* Whether the flat list v (n ids) is an iota order; if so writes its canonical reshape dims and
 * perm. Peels transposed dims from the minor end: the next dim's stride is the value at the
 * first position not yet covered and its size the longest arithmetic run at that step; then
 * checks the strides form a mixed radix and verifies every entry. O(n * rank). */
static bool detect_iota(const int64_t *v, int64_t n, int64_t *r, int *p, int *nr) {
    if (n < 1 || v[0] != 0) return false;
    int64_t fs[64], fm[64];
    int k = 0;
    int64_t block = 1;
    while (block < n) {
        int64_t s = v[block];
        if (s <= 0 || k >= 64) return false;
        int64_t m = 1, ms;
        while (m * block < n && !__builtin_mul_overflow(m, s, &ms) && v[m * block] == ms) m++;
        if (m < 2 || n % (block * m) != 0) return false;
        fs[k] = s;
        fm[k] = m;
        k++;
        block *= m;
    }
    if (k == 0) {
        r[0] = 1;
        p[0] = 0;
        *nr = 1;
        return true;
    }
    /* Reshape dims are the factors by decreasing stride. */
    int order[64];
    for (int i = 0; i < k; i++) {
        int j = i;
        while (j > 0 && fs[order[j - 1]] < fs[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    int rank_of[64];
    int64_t expect = 1;
    for (int i = k - 1; i >= 0; i--) {
        if (fs[order[i]] != expect) return false;
        expect *= fm[order[i]];
    }
    for (int i = 0; i < k; i++) {
        r[i] = fm[order[i]];
        rank_of[order[i]] = i;
    }
    /* The transposed order, major to minor, is the peeled factors from the last peeled. */
    for (int t = 0; t < k; t++) p[t] = rank_of[k - 1 - t];
    int m = iota_canon(r, p, k);
    /* Verify every entry with an odometer over the transposed dims. */
    int64_t st[64], s = 1;
    for (int j = m - 1; j >= 0; j--) {
        st[j] = s;
        s *= r[j];
    }
    int64_t digit[64] = {0};
    int64_t val = 0;
    for (int64_t pos = 0; pos < n; pos++) {
        if (v[pos] != val) return false;
        for (int t = m - 1; t >= 0; t--) {
            int j = p[t];
            digit[t]++;
            val += st[j];
            if (digit[t] < r[j]) break;
            val -= st[j] * r[j];
            digit[t] = 0;
        }
    }
    *nr = m;
    return true;
}

static int cmp_pair(const void *x, const void *y) {
    const int64_t *a = x, *b = y;
    return a[0] < b[0] ? -1 : a[0] > b[0];
}

gs_status gs_tile_explicit(gs_arena *a, int rank, const int64_t *dims, const int64_t *devices,
                           gs_tile_assignment *out) {
    GS_ASSERT(rank >= 1 && rank <= GS_MAX_TILE_RANK);
    int64_t n = gs_prod(dims, rank);
    int64_t r[GS_MAX_FACTORS];
    int p[GS_MAX_FACTORS], nr;
    if (detect_iota(devices, n, r, p, &nr)) return make_iota(a, rank, dims, r, p, nr, out);
    memset(out, 0, sizeof *out);
    int64_t *d = GS_NEW_ARRAY(a, int64_t, rank);
    int64_t *dev = GS_NEW_ARRAY(a, int64_t, n);
    int64_t *pairs = GS_NEW_ARRAY(a, int64_t, 2 * n);
    if (!d || !dev || !pairs) return GS_ERR;
    memcpy(d, dims, sizeof *d * (size_t)rank);
    memcpy(dev, devices, sizeof *dev * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        if (devices[i] < 0) return GS_ERR;
        pairs[2 * i] = devices[i];
        pairs[2 * i + 1] = i;
    }
    qsort(pairs, (size_t)n, 2 * sizeof(int64_t), cmp_pair);
    for (int64_t i = 1; i < n; i++)
        if (pairs[2 * i] == pairs[2 * i - 2]) return GS_ERR;
    out->rank = rank;
    out->dims = d;
    out->n = n;
    out->devices = dev;
    out->by_device = pairs;
    return GS_OK;
}

/* ------------------------------------------------------------------ queries */

int64_t gs_tile_device_at(const gs_tile_assignment *t, int64_t pos) {
    if (!t->iota) return t->devices[pos];
    int64_t v = 0;
    for (int k = t->n_reshape - 1; k >= 0; k--) {
        int j = t->perm[k];
        int64_t d = t->reshape[j];
        v += (pos % d) * t->strides[j];
        pos /= d;
    }
    return v;
}

int64_t gs_tile_device(const gs_tile_assignment *t, const int64_t *index) {
    int64_t pos = 0;
    for (int i = 0; i < t->rank; i++) pos = pos * t->dims[i] + index[i];
    return gs_tile_device_at(t, pos);
}

int64_t gs_tile_position(const gs_tile_assignment *t, int64_t device) {
    if (t->iota) {
        if (device < 0 || device >= t->n) return -1;
        int64_t pos = 0;
        for (int k = 0; k < t->n_reshape; k++) {
            int j = t->perm[k];
            pos = pos * t->reshape[j] + (device / t->strides[j]) % t->reshape[j];
        }
        return pos;
    }
    int64_t lo = 0, hi = t->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (t->by_device[2 * mid] < device)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->by_device[2 * lo] == device ? t->by_device[2 * lo + 1] : -1;
}

void gs_tile_materialize(const gs_tile_assignment *t, int64_t *out) {
    if (!t->iota) {
        memcpy(out, t->devices, sizeof *out * (size_t)t->n);
        return;
    }
    for (int64_t pos = 0; pos < t->n; pos++) out[pos] = gs_tile_device_at(t, pos);
}

/* ------------------------------------------------------------------ transforms */

gs_status gs_tile_reshape(gs_arena *a, const gs_tile_assignment *t, int rank, const int64_t *dims,
                          gs_tile_assignment *out) {
    GS_ASSERT(rank >= 1 && rank <= GS_MAX_TILE_RANK && gs_prod(dims, rank) == t->n);
    int64_t *d = GS_NEW_ARRAY(a, int64_t, rank);
    if (!d) return GS_ERR;
    memcpy(d, dims, sizeof *d * (size_t)rank);
    *out = *t;
    out->rank = rank;
    out->dims = d;
    return GS_OK;
}

int gs_tile_refine(const int64_t *x, int nx, const int64_t *y, int ny, int64_t *f, int *ix,
                   int *iy) {
    int k = 0, i = nx, j = ny;
    int64_t cx = 1, cy = 1;
    for (;;) {
        while (cx == 1 && i > 0) cx = x[--i];
        while (cy == 1 && j > 0) cy = y[--j];
        if (cx == 1 || cy == 1) break;
        int64_t lo = cx < cy ? cx : cy, hi = cx < cy ? cy : cx;
        if (hi % lo != 0 || k >= GS_MAX_FACTORS) return -1;
        f[k] = lo;
        ix[k] = i;
        iy[k] = j;
        k++;
        cx /= lo;
        cy /= lo;
    }
    if (cx != 1 || cy != 1) return -1;
    for (int l = 0; l < k / 2; l++) {
        int64_t tf = f[l];
        f[l] = f[k - 1 - l];
        f[k - 1 - l] = tf;
        int tx = ix[l];
        ix[l] = ix[k - 1 - l];
        ix[k - 1 - l] = tx;
        int ty = iy[l];
        iy[l] = iy[k - 1 - l];
        iy[k - 1 - l] = ty;
    }
    return k;
}

/* Refines an iota assignment's tile dims against its transposed reshape dims. On success writes
 * the refined factors, the tile dim of each (ix), and the index each takes among new reshape
 * dims that split every old reshape dim into its factors (newidx; new dims in r2, count *nr2).
 * Returns the factor count or -1. */
static int refine_iota(const gs_tile_assignment *t, int64_t *f, int *ix, int *newidx, int64_t *r2,
                       int *nr2) {
    int64_t s[GS_MAX_FACTORS];
    int iy[GS_MAX_FACTORS];
    for (int k = 0; k < t->n_reshape; k++) s[k] = t->reshape[t->perm[k]];
    int nf = gs_tile_refine(t->dims, t->rank, s, t->n_reshape, f, ix, iy);
    if (nf < 0) return -1;
    int m = 0;
    for (int j = 0; j < t->n_reshape; j++)
        for (int l = 0; l < nf; l++)
            if (t->perm[iy[l]] == j) {
                newidx[l] = m;
                r2[m++] = f[l];
            }
    *nr2 = m;
    return nf;
}

gs_status gs_tile_transpose(gs_arena *a, const gs_tile_assignment *t, const int *perm,
                            gs_tile_assignment *out) {
    int rank = t->rank;
    int64_t nd[GS_MAX_TILE_RANK];
    for (int i = 0; i < rank; i++) nd[i] = t->dims[perm[i]];
    if (t->iota) {
        int64_t f[GS_MAX_FACTORS], r2[GS_MAX_FACTORS];
        int ix[GS_MAX_FACTORS], newidx[GS_MAX_FACTORS], nr2;
        int nf = refine_iota(t, f, ix, newidx, r2, &nr2);
        if (nf >= 0) {
            int p2[GS_MAX_FACTORS], c = 0;
            for (int i = 0; i < rank; i++)
                for (int l = 0; l < nf; l++)
                    if (ix[l] == perm[i]) p2[c++] = newidx[l];
            nr2 = iota_canon(r2, p2, nr2);
            return make_iota(a, rank, nd, r2, p2, nr2, out);
        }
    }
    /* Materialise: walk the result row-major, reading the source through permuted strides. */
    int64_t n = t->n;
    int64_t *src = malloc(sizeof *src * (size_t)n), *dst = malloc(sizeof *dst * (size_t)n);
    gs_status st = GS_ERR;
    if (src && dst) {
        gs_tile_materialize(t, src);
        int64_t sstride[GS_MAX_TILE_RANK], s = 1;
        for (int i = rank - 1; i >= 0; i--) {
            sstride[i] = s;
            s *= t->dims[i];
        }
        int64_t idx[GS_MAX_TILE_RANK] = {0}, spos = 0;
        for (int64_t pos = 0; pos < n; pos++) {
            dst[pos] = src[spos];
            for (int i = rank - 1; i >= 0; i--) {
                idx[i]++;
                spos += sstride[perm[i]];
                if (idx[i] < nd[i]) break;
                spos -= sstride[perm[i]] * nd[i];
                idx[i] = 0;
            }
        }
        st = gs_tile_explicit(a, rank, nd, dst, out);
    }
    free(src);
    free(dst);
    return st;
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

gs_status gs_tile_sort_last(gs_arena *a, const gs_tile_assignment *t, gs_tile_assignment *out) {
    int rank = t->rank;
    if (t->iota) {
        int64_t f[GS_MAX_FACTORS], r2[GS_MAX_FACTORS];
        int ix[GS_MAX_FACTORS], newidx[GS_MAX_FACTORS], nr2;
        int nf = refine_iota(t, f, ix, newidx, r2, &nr2);
        if (nf >= 0) {
            /* Factors of the last dim reordered by reshape dim (major first) list each group in
             * increasing order, since row-major strides decrease. */
            int p2[GS_MAX_FACTORS], c = 0;
            for (int l = 0; l < nf; l++)
                if (ix[l] != rank - 1) p2[c++] = newidx[l];
            int first = c;
            for (int l = 0; l < nf; l++) {
                if (ix[l] != rank - 1) continue;
                int j = c++;
                while (j > first && p2[j - 1] > newidx[l]) {
                    p2[j] = p2[j - 1];
                    j--;
                }
                p2[j] = newidx[l];
            }
            nr2 = iota_canon(r2, p2, nr2);
            return make_iota(a, rank, t->dims, r2, p2, nr2, out);
        }
    }
    int64_t n = t->n, g = t->dims[rank - 1];
    int64_t *v = malloc(sizeof *v * (size_t)n);
    if (!v) return GS_ERR;
    gs_tile_materialize(t, v);
    for (int64_t i = 0; i < n; i += g) qsort(v + i, (size_t)g, sizeof *v, cmp_i64);
    gs_status st = gs_tile_explicit(a, rank, t->dims, v, out);
    free(v);
    return st;
}

/* ------------------------------------------------------------------ equality, hash, text */

bool gs_tile_equal(const gs_tile_assignment *x, const gs_tile_assignment *y) {
    if (x->rank != y->rank || x->iota != y->iota) return false;
    if (memcmp(x->dims, y->dims, sizeof *x->dims * (size_t)x->rank) != 0) return false;
    if (x->iota)
        return x->n_reshape == y->n_reshape &&
               memcmp(x->reshape, y->reshape, sizeof *x->reshape * (size_t)x->n_reshape) == 0 &&
               memcmp(x->perm, y->perm, sizeof *x->perm * (size_t)x->n_reshape) == 0;
    return memcmp(x->devices, y->devices, sizeof *x->devices * (size_t)x->n) == 0;
}

uint64_t gs_tile_hash(const gs_tile_assignment *t) {
    uint64_t h = gs_hash_bytes(t->dims, sizeof *t->dims * (size_t)t->rank, 0x7469);
    if (t->iota) {
        h = gs_hash_bytes(t->reshape, sizeof *t->reshape * (size_t)t->n_reshape, h);
        return gs_hash_bytes(t->perm, sizeof *t->perm * (size_t)t->n_reshape, h);
    }
    return gs_hash_bytes(t->devices, sizeof *t->devices * (size_t)t->n, h ^ 1);
}

static void print_list(gs_sb *sb, const int64_t *v, int n) {
    for (int i = 0; i < n; i++) gs_sb_printf(sb, "%s%lld", i ? "," : "", (long long)v[i]);
}

void gs_tile_print(gs_sb *sb, const gs_tile_assignment *t) {
    gs_sb_putc(sb, '[');
    print_list(sb, t->dims, t->rank);
    gs_sb_putc(sb, ']');
    if (!t->iota) {
        for (int64_t i = 0; i < t->n; i++)
            gs_sb_printf(sb, "%s%lld", i ? "," : "", (long long)t->devices[i]);
        return;
    }
    gs_sb_puts(sb, "<=[");
    print_list(sb, t->reshape, t->n_reshape);
    gs_sb_putc(sb, ']');
    if (t->n_reshape > 1) {
        gs_sb_puts(sb, "T(");
        for (int i = 0; i < t->n_reshape; i++) gs_sb_printf(sb, "%s%d", i ? "," : "", t->perm[i]);
        gs_sb_putc(sb, ')');
    }
}
