/*
 * gspmd/base.h — the ground every module stands on: arenas, source spans, diagnostics
 * (errors as values), a string builder and a string-keyed hash map.
 *
 * Memory: a module owns one gs_arena; everything reachable from the module (instructions,
 * shapes, names, attribute values) lives there and is freed at once with gs_arena_free.
 * Allocation failure is a value: gs_arena_alloc returns NULL and sets the arena's sticky
 * `failed` flag; callers report it as an error at their boundary. For fault-injection tests an
 * arena can be told to fail its k-th allocation.
 *
 * Errors: fallible functions return gs_status (GS_OK or GS_ERR) and append a gs_diag to a
 * gs_diags list passed by the caller. Library code never prints; the CLI renders diagnostics as
 * `FILE:LINE:COL: error: message` followed by the source line and a caret.
 */
#ifndef GSPMD_BASE_H
#define GSPMD_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ status */

/* Result of a fallible function. Details go to a gs_diags list. */
typedef enum gs_status { GS_OK = 0, GS_ERR = 1 } gs_status;


/* ------------------------------------------------------------------ arena */

typedef struct gs_arena_chunk gs_arena_chunk;

/* A bump allocator. Zero-initialise (or gs_arena_init) before use; gs_arena_free releases all. */
typedef struct gs_arena {
    gs_arena_chunk *head;  /* newest chunk (singly linked to older ones) */
    size_t used;           /* bytes used in head */
    size_t total;          /* bytes handed out over the arena's life */
    long n_allocs;         /* allocations made so far */
    long fail_at;          /* fault injection: fail allocation number fail_at (1-based); 0 = never */
    bool failed;           /* sticky: some allocation failed */
} gs_arena;

void gs_arena_init(gs_arena *a);
/* Frees every chunk; the arena can be reused afterwards. */
void gs_arena_free(gs_arena *a);
/* Forgets everything allocated but keeps the newest chunk for what comes next: scratch space
 * reused many times costs no malloc (nor fresh pages) while it fits. */
void gs_arena_reset(gs_arena *a);
/* size bytes, 16-byte aligned, zeroed. NULL (and a->failed set) on failure. */
void *gs_arena_alloc(gs_arena *a, size_t size);
/* A hint that about size more bytes will be allocated: they come from one chunk (at most the
 * largest the arena makes) instead of several growing ones. Neither fails nor counts as an
 * allocation (fault injection); without it the arena grows as usual. */
void gs_arena_reserve(gs_arena *a, size_t size);
/* Copy of n bytes / of a string (NUL-terminated copy of s[0..n)). NULL on failure. */
void *gs_arena_memdup(gs_arena *a, const void *p, size_t n);
char *gs_arena_strndup(gs_arena *a, const char *s, size_t n);
char *gs_arena_strdup(gs_arena *a, const char *s);
/* printf into the arena. NULL on failure. */
char *gs_arena_printf(gs_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define GS_NEW(arena, type) ((type *)gs_arena_alloc((arena), sizeof(type)))
#define GS_NEW_ARRAY(arena, type, n) ((type *)gs_arena_alloc((arena), sizeof(type) * (size_t)(n)))

/* ------------------------------------------------------------------ sources and spans */

/* A named text buffer that diagnostics point into. Owned by whoever loaded it. */
typedef struct gs_source {
    const char *name; /* file name as the user gave it ("-" for stdin) */
    const char *text; /* NUL-terminated contents */
    size_t len;       /* strlen(text) */
} gs_source;

/* A location in a source; src may be NULL for synthesized code. line and col are 1-based. */
typedef struct gs_span {
    const gs_source *src;
    uint32_t line;
    uint32_t col;
} gs_span;

/* Reads a whole file ("-" = stdin) into a malloc'd source. NULL and *err set on failure. */
gs_source *gs_source_read_file(const char *path, char *err, size_t err_size);
/* A source over a copy of text. */
gs_source *gs_source_from_string(const char *name, const char *text);
void gs_source_free(gs_source *s);

/* ------------------------------------------------------------------ diagnostics */

typedef enum gs_severity { GS_SEV_ERROR, GS_SEV_WARNING, GS_SEV_NOTE } gs_severity;

typedef struct gs_diag {
    gs_severity severity; /* error, warning or note */
    gs_span span;         /* where; span.src NULL when no location applies */
    char *message;        /* malloc'd */
} gs_diag;

/* A growable list of diagnostics. Zero-initialise; gs_diags_free releases. */
typedef struct gs_diags {
    gs_diag *items;
    int n;
    int cap;
    int n_errors;
} gs_diags;

/* Appends an error at span and returns GS_ERR, so callers can `return gs_error(...)`.
 * d may be NULL (the diagnostic is dropped). */
gs_status gs_error(gs_diags *d, gs_span span, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
gs_status gs_verror(gs_diags *d, gs_span span, const char *fmt, va_list ap);
void gs_warning(gs_diags *d, gs_span span, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void gs_note(gs_diags *d, gs_span span, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A span with no location. */
gs_span gs_span_none(void);
/* Writes every diagnostic as `FILE:LINE:COL: error: msg` plus the source line and a caret. */
void gs_diags_render(const gs_diags *d, FILE *out);
void gs_diags_clear(gs_diags *d);
void gs_diags_free(gs_diags *d);

/* ------------------------------------------------------------------ string builder */

/* A growable, always NUL-terminated string (malloc). Zero-initialise; gs_sb_free releases.
 * On allocation failure `failed` is set and further appends are ignored. */
typedef struct gs_sb {
    char *buf;
    size_t len;
    size_t cap;
    bool failed;
} gs_sb;

void gs_sb_putc(gs_sb *sb, char c);
void gs_sb_puts(gs_sb *sb, const char *s);
void gs_sb_putn(gs_sb *sb, const char *s, size_t n);
void gs_sb_printf(gs_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gs_sb_vprintf(gs_sb *sb, const char *fmt, va_list ap);
/* The text so far ("" when empty). Valid until the next append. */
const char *gs_sb_str(const gs_sb *sb);
/* Hands the buffer to the caller (free() it) and resets sb. Never NULL unless sb failed. */
char *gs_sb_take(gs_sb *sb);
void gs_sb_free(gs_sb *sb);

/* Shortest decimal text that reads back (strtod) as exactly the same double / float. */
void gs_format_double(char *buf, size_t size, double v);
void gs_format_float(char *buf, size_t size, float v);

/* A 64-bit hash of n bytes (FNV-1a style), chained through seed. */
uint64_t gs_hash_bytes(const void *p, size_t n, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_BASE_H */
