/*
 * sysalloc.h — the heap allocations of the interpreter and the runtime (value buffers, per-device
 * tables, collective staging), kept apart from the arenas that hold modules.
 *
 * Each is the C library's function. They are weak symbols so that the allocation-failure test
 * (tests/unit/test_alloc_faults.c) can link its own versions, which fail the k-th call, and walk
 * every allocation of a run: a run whose allocation fails must return an error, never crash,
 * hang or leak. Release with free().
 */
#ifndef GSPMD_BASE_SYSALLOC_H
#define GSPMD_BASE_SYSALLOC_H

#include <stddef.h>

void *gs_sys_malloc(size_t size);
void *gs_sys_calloc(size_t n, size_t size);
void *gs_sys_realloc(void *p, size_t size);
/* A malloc'd copy of s (NULL on failure). */
char *gs_sys_strdup(const char *s);

#endif
