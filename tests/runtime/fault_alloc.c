/*
 * fault_alloc.c — the heap allocations of the interpreter and the runtime (src/base/sysalloc.h)
 * for gspmd_faulty, the CLI built for tests/runtime/mpi_alloc_faults.py: the k-th call fails
 * when GSPMD_FAIL_ALLOC=k (1-based) is set, on the MPI rank GSPMD_FAIL_RANK (default 0; the rank
 * is Open MPI's OMPI_COMM_WORLD_RANK); with GSPMD_COUNT_ALLOC set, the count of calls is printed
 * to stderr at exit as `gspmd_faulty: N allocations`. These strong definitions replace the
 * library's weak ones, as tests/unit/test_alloc_faults.c does in process for the threads backend.
 */
#include "base/sysalloc.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_long calls;
static long fail_at = -1; /* read once, before the device threads start */
static int ready;

static void report(void) {
    fprintf(stderr, "gspmd_faulty: %ld allocations\n", (long)atomic_load(&calls));
}

static void setup(void) {
    ready = 1;
    const char *k = getenv("GSPMD_FAIL_ALLOC"), *r = getenv("GSPMD_FAIL_RANK");
    const char *mine = getenv("OMPI_COMM_WORLD_RANK");
    int rank = mine ? atoi(mine) : 0, target = r ? atoi(r) : 0;
    if (k && rank == target) fail_at = atol(k);
    if (getenv("GSPMD_COUNT_ALLOC") && rank == target) atexit(report);
}

static int fails(void) {
    if (!ready) setup();
    return atomic_fetch_add(&calls, 1) + 1 == fail_at;
}

void *gs_sys_malloc(size_t size) { return fails() ? NULL : malloc(size); }
void *gs_sys_calloc(size_t n, size_t size) { return fails() ? NULL : calloc(n, size); }
void *gs_sys_realloc(void *p, size_t size) { return fails() ? NULL : realloc(p, size); }
