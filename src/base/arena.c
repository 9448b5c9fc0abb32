/*
 * arena.c — the bump allocator that owns a module's memory (see gspmd/base.h).
 *
 * Chunks grow geometrically; an allocation larger than a chunk gets a chunk of its own. What
 * gs_arena_alloc returns is zeroed; copies (memdup, strndup, printf) are written whole and skip
 * the zeroing. Fault injection: when fail_at is set, allocation number fail_at fails, so
 * tests can walk every allocation site of a pass and check it fails cleanly.
 */
#include "gspmd/base.h"
#include "base/internal.h"

#include <stdlib.h>
#include <string.h>

struct gs_arena_chunk {
    gs_arena_chunk *next; /* older chunk */
    size_t size;          /* usable bytes in data */
    _Alignas(16) unsigned char data[];
};

enum { GS_ARENA_MIN_CHUNK = 64 * 1024, GS_ARENA_MAX_CHUNK = 16 * 1024 * 1024 };

void gs_assert_fail(const char *file, int line, const char *expr) {
    fprintf(stderr, "%s:%d: internal error: assertion failed: %s\n", file, line, expr);
    abort();
}

void gs_arena_init(gs_arena *a) { memset(a, 0, sizeof *a); }

void gs_arena_free(gs_arena *a) {
    gs_arena_chunk *c = a->head;
    while (c) {
        gs_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    long fail_at = a->fail_at;
    memset(a, 0, sizeof *a);
    a->fail_at = fail_at;
}

/* Makes a new head chunk of `want` usable bytes (the older head's free tail is left unused).
 * False when malloc fails. */
static bool new_chunk(gs_arena *a, size_t want) {
    gs_arena_chunk *c = malloc(sizeof *c + want);
    if (!c) return false;
    c->size = want;
    c->next = a->head;
    a->head = c;
    a->used = 0;
    return true;
}

/* size bytes, 16-byte aligned. zero: all zeroed; else only the padding after them (for callers
 * that write all size bytes), so that every byte handed out is as gs_arena_alloc leaves it. */
static void *take(gs_arena *a, size_t size, bool zero) {
    a->n_allocs++;
    if (a->fail_at > 0 && a->n_allocs == a->fail_at) {
        a->failed = true;
        return NULL;
    }
    if (size > SIZE_MAX / 2) { /* rounding up (and the chunk header) would wrap around */
        a->failed = true;
        return NULL;
    }
    size_t asked = size;
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    if (!a->head || a->used + size > a->head->size) {
        size_t want = a->head ? a->head->size * 2 : GS_ARENA_MIN_CHUNK;
        if (want > GS_ARENA_MAX_CHUNK) want = GS_ARENA_MAX_CHUNK;
        if (want < size) want = size;
        if (!new_chunk(a, want)) {
            a->failed = true;
            return NULL;
        }
    }
    unsigned char *p = a->head->data + a->used;
    a->used += size;
    a->total += size;
    if (zero)
        memset(p, 0, size);
    else
        memset(p + asked, 0, size - asked);
    return p;
}

void *gs_arena_alloc(gs_arena *a, size_t size) { return take(a, size, true); }

void gs_arena_reset(gs_arena *a) {
    gs_arena_chunk *c = a->head ? a->head->next : NULL;
    while (c) {
        gs_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    if (a->head) a->head->next = NULL;
    a->used = 0;
}

void gs_arena_reserve(gs_arena *a, size_t size) {
    if (size > GS_ARENA_MAX_CHUNK) size = GS_ARENA_MAX_CHUNK;
    size = (size + 15) & ~(size_t)15;
    if (a->head ? a->used + size <= a->head->size : size <= GS_ARENA_MIN_CHUNK) return;
    (void)new_chunk(a, size); /* a hint: without it the arena grows as usual */
}

void *gs_arena_memdup(gs_arena *a, const void *p, size_t n) {
    void *q = take(a, n, false);
    if (q && n) memcpy(q, p, n);
    return q;
}

char *gs_arena_strndup(gs_arena *a, const char *s, size_t n) {
    char *q = take(a, n + 1, false);
    if (!q) return NULL;
    memcpy(q, s, n);
    q[n] = 0;
    return q;
}

char *gs_arena_strdup(gs_arena *a, const char *s) { return gs_arena_strndup(a, s, strlen(s)); }

char *gs_arena_printf(gs_arena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *q = n >= 0 ? take(a, (size_t)n + 1, false) : NULL;
    if (q) vsnprintf(q, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return q;
}
