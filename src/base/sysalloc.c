/*
 * sysalloc.c — the C library's allocator behind the interpreter's and runtime's heap
 * allocations; weak, so that the allocation-failure test can replace it (see sysalloc.h).
 */
#include "base/sysalloc.h"

#include <stdlib.h>
#include <string.h>

__attribute__((weak)) void *gs_sys_malloc(size_t size) { return malloc(size); }

__attribute__((weak)) void *gs_sys_calloc(size_t n, size_t size) { return calloc(n, size); }

__attribute__((weak)) void *gs_sys_realloc(void *p, size_t size) { return realloc(p, size); }

char *gs_sys_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = gs_sys_malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}
