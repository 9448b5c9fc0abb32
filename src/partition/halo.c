/*
 * halo.c — halo exchange along one tiled dim (GSPMD paper §4, "halo exchange"): an op whose
 * device-local output reads a window of the input that reaches into the neighbours' shards
 * (slice, pad, convolution, reduce-window) keeps the dim tiled by giving every device the edges
 * of the neighbouring shards it needs.
 *
 * The general read (gs_part_halo_read): device tile t holds input [t*si, (t+1)*si) and needs input
 * [a0 + t*step, a0 + t*step + len) — a window whose start moves by `step` per tile (for a
 * convolution: the output shard times the stride, a0 = -padding). The widest reach left (L) and
 * right (R) over the tiles decide the halos; each device receives the last L elements of the
 * shards before it and the first R of the shards after it, by collective-permutes (one per
 * neighbour distance: a halo wider than a shard takes several hops), concatenates [left halo,
 * own shard, right halo], and cuts its window at an offset linear in t (partition-id arithmetic).
 * Positions outside the input [0, n) (padding, and the padding of an uneven last shard) take a
 * fill value through a mask: over the window when shards are uneven; over the received halos
 * alone when they are even (the own shard then lies inside), and none where no window reads
 * outside or the fill is a zero the halos already hold.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int64_t gs_part_floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

int64_t gs_part_live_tiles(int64_t k, int64_t out_shard, int64_t n_out) {
    if (out_shard <= 0) return k;
    int64_t m = (n_out + out_shard - 1) / out_shard;
    return m < k ? m : k;
}

bool gs_part_halo_extent(const gs_sharding *s, int d, int64_t n, int64_t a0, int64_t step,
                         int64_t len, int64_t live, int64_t *left, int64_t *right) {
    int64_t k = gs_sharding_tiles_in_dim(s, d);
    if (k <= 1) return false;
    int64_t si = (n + k - 1) / k, L = 0, R = 0;
    for (int64_t t = 0; t < k && t < live; t++) {
        int64_t a = a0 + t * step;
        if (t * si - a > L) L = t * si - a;
        if (a + len - (t + 1) * si > R) R = a + len - (t + 1) * si;
    }
    *left = L;
    *right = R;
    /* Any number of hops; reach beyond the first or last tile reads no data (positions outside
     * the dim), so gs_part_halo_read pads the window there instead. */
    return true;
}

bool gs_part_halo_plan(const gs_sharding *s, int d, int64_t n, int64_t start, int64_t n_out,
                       int64_t *left, int64_t *right) {
    int64_t k = gs_sharding_tiles_in_dim(s, d);
    if (k <= 1) return false;
    int64_t so = (n_out + k - 1) / k;
    return gs_part_halo_extent(s, d, n, start, so, so, gs_part_live_tiles(k, so, n_out), left,
                               right);
}

/* Source-target pairs moving each device's data `dist` tiles up (dir = +1) or down (dir = -1)
 * along tile dim d. */
static int64_t (*neighbour_pairs(const gs_tile_assignment *t, int d, int dir, int64_t dist,
                                 int *n))[2] {
    int64_t stride = 1;
    for (int i = d + 1; i < t->rank; i++) stride *= t->dims[i];
    int64_t(*p)[2] = malloc(sizeof *p * (size_t)(t->n ? t->n : 1));
    *n = 0;
    if (!p) return NULL;
    for (int64_t pos = 0; pos < t->n; pos++) {
        int64_t idx = (pos / stride) % t->dims[d];
        if (idx + dist >= t->dims[d]) continue;
        int64_t lo = gs_tile_device_at(t, pos), hi = gs_tile_device_at(t, pos + dist * stride);
        p[*n][0] = dir > 0 ? lo : hi;
        p[*n][1] = dir > 0 ? hi : lo;
        (*n)++;
    }
    return p;
}

int64_t (*gs_part_ring_pairs(const gs_tile_assignment *t, int d, int64_t dist, int *n))[2] {
    int64_t stride = 1, k = t->dims[d];
    for (int i = d + 1; i < t->rank; i++) stride *= t->dims[i];
    int64_t(*p)[2] = malloc(sizeof *p * (size_t)(t->n ? t->n : 1));
    *n = 0;
    if (!p) return NULL;
    for (int64_t pos = 0; pos < t->n; pos++) {
        int64_t idx = (pos / stride) % k, to = ((idx - dist) % k + k) % k;
        p[*n][0] = gs_tile_device_at(t, pos);
        p[*n][1] = gs_tile_device_at(t, pos + (to - idx) * stride);
        (*n)++;
    }
    return p;
}

static gs_instr *slice_dim(gs_part_ctx *c, gs_instr *x, int d, int64_t from, int64_t to) {
    int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
    memcpy(lim, x->shape->dims, sizeof *lim * (size_t)x->shape->rank);
    st[d] = from;
    lim[d] = to;
    return gs_build_slice(gs_part_builder(c), x, st, lim, NULL);
}

/* h elements from the shard `dist` tiles away along d: dir +1 brings the last h of the shard
 * before, -1 the first h of the shard after. */
static gs_instr *halo(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, int d, int64_t h,
                      int64_t dist, int dir) {
    int64_t si = x->shape->dims[d];
    gs_instr *part = h == si   ? x
                     : dir > 0 ? slice_dim(c, x, d, si - h, si)
                               : slice_dim(c, x, d, 0, h);
    int n = 0;
    int64_t(*pairs)[2] = neighbour_pairs(&s->tiles, d, dir, dist, &n);
    if (!pairs) {
        gs_part_oom(c);
        return NULL;
    }
    gs_instr *r = gs_part_permute(c, part, n, (const int64_t(*)[2])pairs);
    free(pairs);
    return r;
}

/* Does any live tile t (whose window is input [a0 + t*step, a0 + t*step + len)) read the halo
 * part at input [t*si + rel, t*si + rel + amount) that a neighbour sends it? A hop no window
 * reads (a far slice's tiles other than the one that holds it) is not exchanged. */
static bool hop_read(int64_t k, int64_t si, int64_t a0, int64_t step, int64_t len, int64_t live,
                     int64_t dist, int64_t rel, int64_t amount) {
    for (int64_t t = 0; t < k && t < live; t++) {
        if (t + dist < 0 || t + dist >= k) continue; /* no tile there sends */
        int64_t lo = t * si + rel, hi = lo + amount, wlo = a0 + t * step, whi = wlo + len;
        if (lo < whi && wlo < hi) return true;
    }
    return false;
}

/* Zeros in place of x's first `amount` positions along d (a hop nobody reads). */
static gs_instr *zeros(gs_part_ctx *c, gs_instr *x, int d, int64_t amount) {
    int64_t dims[GS_MAX_RANK];
    memcpy(dims, x->shape->dims, sizeof *dims * (size_t)x->shape->rank);
    dims[d] = amount;
    gs_shape *sh = gs_shape_array(gs_part_arena(c), x->shape->type, x->shape->rank, dims);
    if (!sh) {
        gs_part_oom(c);
        return NULL;
    }
    return gs_part_bcast_scalar(c, gs_part_identity(c, GS_OP_ADD, x->shape->type), sh);
}

/* The reach left (*ld) and right (*rd) beyond a tile's own shard (si per tile) of the windows'
 * positions inside the input [0, n): what the neighbours must send. Positions outside it are
 * padding or fill, never exchanged. */
static void data_reach(int64_t k, int64_t si, int64_t n, int64_t a0, int64_t step, int64_t len,
                       int64_t live, int64_t *ld, int64_t *rd) {
    *ld = *rd = 0;
    for (int64_t t = 0; t < k && t < live; t++) {
        int64_t lo = a0 + t * step, hi = lo + len;
        if (lo < 0) lo = 0;
        if (hi > n) hi = n;
        if (lo >= hi) continue;
        if (t * si - lo > *ld) *ld = t * si - lo;
        if (hi - (t + 1) * si > *rd) *rd = hi - (t + 1) * si;
    }
}

/* Whether fill is a constant whose bits are all zero (+0 for floats). */
static bool zero_constant(const gs_instr *fill) {
    if (fill->op != GS_OP_CONSTANT || !fill->literal || fill->literal->elided ||
        !fill->literal->data)
        return false;
    const unsigned char *p = fill->literal->data;
    for (size_t i = 0; i < fill->literal->n_bytes; i++)
        if (p[i]) return false;
    return true;
}

/* Whether some live tile's window [a0 + t*step, + len) reads positions before 0 (side < 0) or
 * from n on (side > 0) where the neighbours' parts lie: [t*si - Lf, t*si) on the left,
 * [(t+1)*si, + Rf) on the right. */
static bool side_reads_outside(int side, int64_t k, int64_t si, int64_t n, int64_t a0,
                               int64_t step, int64_t len, int64_t live, int64_t reach) {
    for (int64_t t = 0; t < k && t < live; t++) {
        int64_t lo = a0 + t * step;
        if (side < 0 && lo < 0 && t * si - reach < 0) return true;
        if (side > 0 && lo + len > n && (t + 1) * si + reach > n) return true;
    }
    return false;
}

/* The parts beside a shard (np of them; or a whole window) as one block along d whose
 * positions first + j (first: an s32 scalar) outside [0, n) hold fill. */
static gs_instr *masked_side(gs_part_ctx *c, gs_instr **parts, int np, int d, gs_instr *first,
                             int64_t n, gs_instr *fill) {
    gs_builder *b = gs_part_builder(c);
    gs_instr *side = np == 1 ? parts[0] : gs_build_concatenate(b, np, parts, d);
    if (!side) return NULL;
    gs_instr *in = gs_part_dim_in_range(c, side->shape, d, first, true, 0, n);
    return gs_build_select(b, in, side, gs_part_bcast_scalar(c, fill, side->shape));
}

int64_t gs_part_halo_hops(const gs_sharding *s, int d, int64_t n, int64_t start, int64_t n_out) {
    int64_t k = gs_sharding_tiles_in_dim(s, d);
    if (k <= 1 || n <= 0) return -1;
    int64_t si = (n + k - 1) / k, so = (n_out + k - 1) / k, ld, rd;
    data_reach(k, si, n, start, so, so, gs_part_live_tiles(k, so, n_out), &ld, &rd);
    int64_t hl = (ld + si - 1) / si, hr = (rd + si - 1) / si;
    return hl > hr ? hl : hr;
}

gs_instr *gs_part_halo_read(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, int d, int64_t n,
                            int64_t a0, int64_t step, int64_t len, int64_t live, gs_instr *fill) {
    return gs_part_halo_read_slack(c, x, s, d, n, a0, step, len, live, fill, 0);
}

gs_instr *gs_part_halo_read_slack(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, int d,
                                  int64_t n, int64_t a0, int64_t step, int64_t len, int64_t live,
                                  gs_instr *fill, int64_t slack) {
    int64_t L, R;
    if (!x || !gs_part_halo_extent(s, d, n, a0, step, len, live, &L, &R)) return NULL;
    gs_builder *b = gs_part_builder(c);
    int64_t si = x->shape->dims[d], Lf, Rf; /* what the other tiles hold that windows read */
    data_reach(gs_sharding_tiles_in_dim(s, d), si, n, a0, step, len, live, &Lf, &Rf);
    int64_t hl = (Lf + si - 1) / si, hr = (Rf + si - 1) / si;
    gs_instr **parts = GS_NEW_ARRAY(gs_part_arena(c), gs_instr *, hl + hr + 2);
    if (!parts) {
        gs_part_oom(c);
        return NULL;
    }
    int np = 0;
    int64_t k = gs_sharding_tiles_in_dim(s, d);
    /* Shards without padding (k*si = n) hold only positions inside [0, n): those outside lie
     * beside the shard, so the fill goes there alone (the pad, and a mask over the
     * neighbours' parts, where a part no one sends is zeros) instead of a mask over the whole
     * window; with a zero fill, the zeros are already the fill. */
    bool beside = fill && k * si == n;
    bool mask_beside = beside && !zero_constant(fill);
    gs_instr *t = gs_part_tile_index(c, &s->tiles, d);
    for (int64_t h = hl; h >= 1; h--) { /* farthest first */
        int64_t amount = Lf - (h - 1) * si < si ? Lf - (h - 1) * si : si;
        parts[np++] = hop_read(k, si, a0, step, len, live, -h, (-h + 1) * si - amount, amount)
                          ? halo(c, x, s, d, amount, h, +1)
                          : zeros(c, x, d, amount);
    }
    if (np > 0 && mask_beside && side_reads_outside(-1, k, si, n, a0, step, len, live, Lf)) {
        parts[0] = masked_side(c, parts, np, d, gs_part_add(c, gs_part_mul(c, t, si),
                                                            gs_part_s32(c, -Lf)), n, fill);
        np = 1;
    }
    parts[np++] = x;
    int right = np;
    for (int64_t h = 1; h <= hr; h++) {
        int64_t amount = Rf - (h - 1) * si < si ? Rf - (h - 1) * si : si;
        parts[np++] = hop_read(k, si, a0, step, len, live, h, h * si, amount)
                          ? halo(c, x, s, d, amount, h, -1)
                          : zeros(c, x, d, amount);
    }
    if (np > right && mask_beside && side_reads_outside(1, k, si, n, a0, step, len, live, Rf)) {
        parts[right] = masked_side(c, parts + right, np - right, d,
                                   gs_part_add(c, gs_part_mul(c, t, si), gs_part_s32(c, si)), n,
                                   fill);
        np = right + 1;
    }
    gs_instr *win = np == 1 ? x : gs_build_concatenate(b, np, parts, d);
    if (win && (L > Lf || R > Rf)) { /* positions outside the input: no data */
        int64_t lo[GS_MAX_RANK] = {0}, hi[GS_MAX_RANK] = {0}, inr[GS_MAX_RANK] = {0};
        lo[d] = L - Lf;
        hi[d] = R - Rf;
        win = gs_build_pad(b, win, beside ? fill : gs_part_identity(c, GS_OP_ADD, x->shape->type),
                           lo, hi, inr);
    }
    /* The window starts at a0 + t*step - (t*si - L) = a0 + L + t*(step - si): on every tile
     * the whole of win where that is 0 and len long (or up to slack longer). */
    bool whole = step == si && a0 + L == 0 && win && win->shape->dims[d] >= len &&
                 win->shape->dims[d] - len <= slack;
    gs_instr *off = gs_part_add(c, gs_part_mul(c, t, step - si), gs_part_s32(c, a0 + L));
    gs_instr *idx[GS_MAX_RANK];
    int64_t sizes[GS_MAX_RANK];
    for (int i = 0; i < x->shape->rank; i++) {
        idx[i] = i == d ? off : gs_part_s32(c, 0);
        sizes[i] = i == d ? len : x->shape->dims[i];
    }
    gs_instr *y = whole ? win : gs_build_dynamic_slice(b, win, idx, sizes);
    if (!fill || !y || beside) return y;
    /* Input positions a0 + t*step + j outside [0, n) (the padding of an uneven last shard
     * among them) take the fill value. */
    return masked_side(c, &y, 1, d, gs_part_add(c, gs_part_mul(c, t, step), gs_part_s32(c, a0)),
                       n, fill);
}

gs_instr *gs_part_whole_window(gs_part_ctx *c, gs_instr *x, const gs_sharding *tiling,
                               int tile_dim, int d, int64_t n, int64_t a0, int64_t step,
                               int64_t len, int64_t live, gs_instr *fill) {
    if (!x) return NULL;
    gs_builder *b = gs_part_builder(c);
    int rank = x->shape->rank;
    int64_t lo[GS_MAX_RANK] = {0}, hi[GS_MAX_RANK] = {0}, sizes[GS_MAX_RANK];
    int64_t end = a0 + (live - 1) * step + len; /* the last live window's end */
    lo[d] = a0 < 0 ? -a0 : 0;
    hi[d] = end > n ? end - n : 0;
    if (lo[d] || hi[d]) {
        if (!fill) fill = gs_build_scalar_i(b, x->shape->type, 0);
        x = gs_build_pad(b, x, fill, lo, hi, NULL);
    }
    if (!x) return NULL;
    memcpy(sizes, x->shape->dims, sizeof *sizes * (size_t)rank);
    sizes[d] = len;
    gs_instr *idx[GS_MAX_RANK];
    for (int i = 0; i < rank; i++) idx[i] = gs_part_s32(c, 0);
    idx[d] = gs_part_add(c, gs_part_shard_offset(c, tiling, tile_dim, step),
                         gs_part_s32(c, a0 + lo[d]));
    return gs_build_dynamic_slice(b, x, idx, sizes);
}

gs_instr *gs_part_halo_window(gs_part_ctx *c, gs_instr *x, const gs_sharding *s, int d, int64_t n,
                              int64_t start, int64_t n_out, gs_instr *fill) {
    int64_t k = gs_sharding_tiles_in_dim(s, d);
    if (k <= 1) return NULL;
    int64_t so = (n_out + k - 1) / k;
    return gs_part_halo_read(c, x, s, d, n, start, so, so, gs_part_live_tiles(k, so, n_out), fill);
}

gs_instr *gs_part_dilate_shard(gs_part_ctx *c, gs_instr *x, const gs_sharding *s,
                               const int64_t *base, int d, int64_t dil, gs_instr *fill) {
    if (!x) return NULL;
    int dims[1] = {d};
    x = gs_part_mask(c, x, s, base, 1, dims, fill);
    int64_t lo[GS_MAX_RANK] = {0}, hi[GS_MAX_RANK] = {0}, inr[GS_MAX_RANK] = {0};
    hi[d] = dil - 1;
    inr[d] = dil - 1;
    return gs_build_pad(gs_part_builder(c), x,
                        fill ? fill : gs_build_scalar_i(gs_part_builder(c), x->shape->type, 0), lo,
                        hi, inr);
}
