/*
 * internal.h — helpers shared by the files of src/sharding/ (not part of the public API): small
 * integer utilities, the common-refinement engine behind O(rank) iota transposes, and the
 * group-sorting step of XLA's PartialTile.
 */
#ifndef GSPMD_SHARDING_INTERNAL_H
#define GSPMD_SHARDING_INTERNAL_H

#include "gspmd/sharding.h"

/* Scratch capacity for refined factor lists (tile dims plus reshape dims). */
enum { GS_MAX_FACTORS = GS_MAX_TILE_RANK + GS_MAX_IOTA_RANK };

/* Product of n entries (1 when n == 0). */
int64_t gs_prod(const int64_t *v, int n);
/* ceil(x / y) for x >= 0, y >= 1. */
int64_t gs_ceil_div(int64_t x, int64_t y);

/* Common refinement of two factorisations x (nx entries) and y (ny entries) of one count, both
 * major to minor (size-1 entries allowed): writes the refined factors major to minor into f, with
 * the index of the x entry and of the y entry each lies in. Returns the number of factors, or -1
 * when no common refinement exists (e.g. [2,3] against [3,2]). */
int gs_refine(const int64_t *x, int nx, const int64_t *y, int ny, int64_t *f, int *ix, int *iy);

/* t with the devices of every group along its last dim sorted ascending (XLA's PartialTile
 * order). O(rank) for iota assignments whenever a refinement exists. */
gs_status gs_tile_sort_last(gs_arena *a, const gs_tile_assignment *t, gs_tile_assignment *out);

/* A fresh zeroed leaf sharding of kind k, or NULL. */
gs_sharding *gs_sharding_new(gs_arena *a, gs_sharding_kind k);

/* Prints a named (V3) sharding's body as XLA does (used by gs_sharding_print). */
void gs_named_print(gs_sb *sb, const gs_named *n, const char *metadata);

#endif /* GSPMD_SHARDING_INTERNAL_H */
