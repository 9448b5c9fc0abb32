/*
 * base/internal.h — helpers the library's passes share that are not part of the public API:
 * the invariant check (arena.c), growable arrays (vec.c) and a string map (strmap.c)
 * (include/gspmd/base.h has the public ground).
 */
#ifndef GSPMD_BASE_INTERNAL_H
#define GSPMD_BASE_INTERNAL_H

#include "gspmd/base.h"

#include <stdio.h>

/* Internal invariant check: prints file:line and the expression, then aborts. Not for input
 * errors (those are diagnostics). */
#define GS_ASSERT(cond)                                                                        \
    do {                                                                                       \
        if (!(cond)) gs_assert_fail(__FILE__, __LINE__, #cond);                                \
    } while (0)
void gs_assert_fail(const char *file, int line, const char *expr);

/* ------------------------------------------------------------------ growable arrays */

/* A growable array of elements of `elem_size` bytes, for scratch lists during parsing. Its bytes
 * live in a gs_sb; readers use data and n (and may set n to 0 to empty it). Allocation failure
 * is sticky, as in gs_sb. */
typedef struct gs_vec {
    void *data;       /* the elements, n of them (NULL until the first push) */
    size_t n;         /* element count */
    size_t elem_size; /* bytes per element */
    gs_sb bytes;      /* holds them */
} gs_vec;

void gs_vec_init(gs_vec *v, size_t elem_size);
/* Appends one element copied from elem. GS_ERR on allocation failure. */
gs_status gs_vec_push(gs_vec *v, const void *elem);
void gs_vec_free(gs_vec *v);
#define GS_VEC_AT(v, type, i) (((type *)(v)->data)[i])

/* ------------------------------------------------------------------ trace-event JSON */

/* A Chrome trace-event JSON file being written (trace_json.c). */
typedef struct gs_trace_json {
    FILE *f;
    bool first; /* no entry written yet */
} gs_trace_json;

/* Starts the file on f (opened for writing; gs_trace_json_end closes it). */
void gs_trace_json_begin(gs_trace_json *t, FILE *f);
/* Names process pid (a device's track group) and sorts it by its number. */
void gs_trace_json_process(gs_trace_json *t, int pid, const char *name);
/* A complete event: `name` (an instruction's), category and args.op `op`, start and duration
 * in microseconds; bytes (< 0: none) and wait_us (< 0: none) in its args. */
void gs_trace_json_event(gs_trace_json *t, int pid, int tid, const char *name, const char *op,
                         double ts_us, double dur_us, int64_t bytes, double wait_us);
/* Ends and closes the file; false when anything could not be written. */
bool gs_trace_json_end(gs_trace_json *t);

/* ------------------------------------------------------------------ string map */

/* One slot of a gs_strmap (a probe reads one cache line). */
typedef struct gs_strmap_slot {
    const char *key; /* NULL when the slot is empty */
    void *val;       /* its value */
    uint64_t hash;   /* the key's hash (compared before the key is) */
} gs_strmap_slot;

/* Open-addressing hash map from string keys (not copied: they must outlive the map) to
 * pointers. malloc-backed. Zero-initialise; gs_strmap_free releases. */
typedef struct gs_strmap {
    gs_strmap_slot *slots; /* cap of them */
    size_t cap;            /* power of two, or 0 */
    size_t n;              /* keys held */
} gs_strmap;

/* Inserts or replaces. GS_ERR only on allocation failure. */
gs_status gs_strmap_put(gs_strmap *m, const char *key, void *val);
/* Puts *val under key and sets *val to the value it replaces (NULL when absent), in one lookup.
 * GS_ERR only on allocation failure (then nothing changes). */
gs_status gs_strmap_swap(gs_strmap *m, const char *key, void **val);
/* The value, or NULL when absent. */
void *gs_strmap_get(const gs_strmap *m, const char *key);
/* The same for the key s[0..n) (s need not be NUL-terminated). */
void *gs_strmap_getn(const gs_strmap *m, const char *s, size_t n);
void gs_strmap_free(gs_strmap *m);

/* The greatest common divisor of a and b (>= 0; gcd(a, 0) = a). */
static inline int64_t gs_gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

#endif /* GSPMD_BASE_INTERNAL_H */
