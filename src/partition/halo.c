/*
 * halo.c — halo exchange along one tiled dim (GSPMD paper §4, "halo exchange"): an op whose
 * output position j reads input position j + start (slice, pad, shifts) keeps the dim tiled by
 * giving every device the edges of its neighbours' shards it needs.
 *
 * Device tile t holds input [t*si, (t+1)*si) and must produce output [t*so, (t+1)*so), which
 * reads input [t*so + start, (t+1)*so + start). The widest reach left (L) and right (R) over
 * the tiles with real output decide the halos; when neither exceeds one shard, the last L
 * elements of every shard go to the next device and the first R to the previous one (two
 * collective-permutes along the dim), the device concatenates [left halo, own shard, right halo]
 * and cuts its output window at an offset linear in t (partition-id arithmetic). Positions that
 * fall outside the input take a fill value (pad) through a mask. Wider reaches decline, and the
 * handler makes the dim whole instead.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

bool gs_p_halo_plan(const gs_sharding *s, int d, int64_t n, int64_t start, int64_t n_out,
                    int64_t *left, int64_t *right) {
    int64_t k = gs_p_tiles(s, d);
    if (k <= 1) return false;
    int64_t si = (n + k - 1) / k, so = (n_out + k - 1) / k, L = 0, R = 0;
    for (int64_t t = 0; t < k && t * so < n_out; t++) {
        int64_t a = start + t * so;
        if (t * si - a > L) L = t * si - a;
        if (a + so - (t + 1) * si > R) R = a + so - (t + 1) * si;
    }
    *left = L;
    *right = R;
    return L <= si && R <= si;
}

/* Source-target pairs moving each device's data to the device one tile up (dir = +1) or down
 * (dir = -1) along tile dim d. */
static int64_t (*neighbour_pairs(const gs_tile_assignment *t, int d, int dir, int *n))[2] {
    int64_t stride = 1;
    for (int i = d + 1; i < t->rank; i++) stride *= t->dims[i];
    int64_t(*p)[2] = malloc(sizeof *p * (size_t)(t->n ? t->n : 1));
    *n = 0;
    if (!p) return NULL;
    for (int64_t pos = 0; pos < t->n; pos++) {
        int64_t idx = (pos / stride) % t->dims[d];
        if (idx + 1 >= t->dims[d]) continue;
        int64_t lo = gs_tile_device_at(t, pos), hi = gs_tile_device_at(t, pos + stride);
        p[*n][0] = dir > 0 ? lo : hi;
        p[*n][1] = dir > 0 ? hi : lo;
        (*n)++;
    }
    return p;
}

static gs_instr *slice_dim(gs_pctx *c, gs_instr *x, int d, int64_t from, int64_t to) {
    int64_t st[GS_MAX_RANK] = {0}, lim[GS_MAX_RANK];
    memcpy(lim, x->shape->dims, sizeof *lim * (size_t)x->shape->rank);
    st[d] = from;
    lim[d] = to;
    return gs_build_slice(gs_p_b(c), x, st, lim, NULL);
}

/* The halo of size h from the neighbours along d: dir +1 brings the previous device's last h
 * elements, -1 the next device's first h. */
static gs_instr *halo(gs_pctx *c, gs_instr *x, const gs_sharding *s, int d, int64_t h, int dir) {
    int64_t si = x->shape->dims[d];
    gs_instr *part = dir > 0 ? slice_dim(c, x, d, si - h, si) : slice_dim(c, x, d, 0, h);
    int n = 0;
    int64_t(*pairs)[2] = neighbour_pairs(&s->tiles, d, dir, &n);
    if (!pairs) {
        gs_p_oom(c);
        return NULL;
    }
    gs_instr *r = gs_p_permute(c, part, n, (const int64_t(*)[2])pairs);
    free(pairs);
    return r;
}

gs_instr *gs_p_halo_window(gs_pctx *c, gs_instr *x, const gs_sharding *s, int d, int64_t n,
                           int64_t start, int64_t n_out, gs_instr *fill) {
    int64_t L, R;
    if (!x || !gs_p_halo_plan(s, d, n, start, n_out, &L, &R)) return NULL;
    gs_builder *b = gs_p_b(c);
    int64_t k = gs_p_tiles(s, d), si = x->shape->dims[d], so = (n_out + k - 1) / k;
    gs_instr *parts[3];
    int np = 0;
    if (L > 0) parts[np++] = halo(c, x, s, d, L, +1);
    parts[np++] = x;
    if (R > 0) parts[np++] = halo(c, x, s, d, R, -1);
    gs_instr *win = gs_build_concatenate(b, np, parts, d);
    /* The output window starts at a_t - (t*si - L) = start + L + t*(so - si). */
    gs_instr *t = gs_p_tile_index(c, &s->tiles, d);
    gs_instr *off = gs_p_add(c, gs_p_mul(c, t, so - si), gs_p_s32(c, start + L));
    gs_instr *idx[GS_MAX_RANK];
    int64_t sizes[GS_MAX_RANK];
    for (int i = 0; i < x->shape->rank; i++) {
        idx[i] = i == d ? off : gs_p_s32(c, 0);
        sizes[i] = i == d ? so : x->shape->dims[i];
    }
    gs_instr *y = gs_build_dynamic_slice(b, win, idx, sizes);
    if (!fill || !y) return y;
    /* Input positions a_t + j outside [0, n) take the fill value. */
    gs_instr *iota = gs_build_iota(b, GS_S32, y->shape->rank, y->shape->dims, d);
    gs_instr *a = gs_p_add(c, gs_p_mul(c, t, so), gs_p_s32(c, start));
    gs_instr *pos = gs_build_binary(b, GS_OP_ADD, iota, gs_p_bcast_scalar(c, a, iota->shape));
    gs_instr *lo = gs_p_bcast_scalar(c, gs_p_s32(c, 0), iota->shape);
    gs_instr *hi = gs_p_bcast_scalar(c, gs_p_s32(c, n), iota->shape);
    gs_instr *ge = gs_build_compare(b, pos, lo, "GE");
    gs_instr *lt = gs_build_compare(b, pos, hi, "LT");
    gs_instr *in = gs_build_binary(b, GS_OP_AND, ge, lt);
    return gs_build_select(b, in, y, gs_p_bcast_scalar(c, fill, y->shape));
}
