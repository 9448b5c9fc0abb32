/*
 * internal.h — helpers shared by the files of src/sharding/ (not part of the public API): small
 * integer utilities and the group-sorting step of XLA's PartialTile. (The common-refinement
 * engine, gs_tile_refine, is public in gspmd/sharding.h: the partitioner uses it too.)
 */
#ifndef GSPMD_SHARDING_INTERNAL_H
#define GSPMD_SHARDING_INTERNAL_H

#include "gspmd/sharding.h"

/* Product of n entries (1 when n == 0). */
int64_t gs_prod(const int64_t *v, int n);
/* ceil(x / y) for x >= 0, y >= 1. */
int64_t gs_ceil_div(int64_t x, int64_t y);

/* t with the devices of every group along its last dim sorted ascending (XLA's PartialTile
 * order). O(rank) for iota assignments whenever a refinement exists. */
gs_status gs_tile_sort_last(gs_arena *a, const gs_tile_assignment *t, gs_tile_assignment *out);

/* A fresh zeroed leaf sharding of kind k, or NULL. */
gs_sharding *gs_sharding_new(gs_arena *a, gs_sharding_kind k);

/* Prints a named (V3) sharding's body as XLA does (used by gs_sharding_print). */
void gs_named_print(gs_sb *sb, const gs_named *n, const char *metadata);

#endif /* GSPMD_SHARDING_INTERNAL_H */
