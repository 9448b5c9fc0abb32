/*
 * src/mlir/lexer.c — the StableHLO reader's cursor over the text: located errors (line/column
 * computed on demand), whitespace and `//` comments, punctuation, words, integers, strings,
 * @symbols and %value names. The reader (reader.c), types (types.c) and ops (ops.c) read their
 * grammar through these.
 */
#include "mlir/internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ errors and positions */

/* The line and column of text offset off: a binary search in the line starts, which are found
 * once (spans are asked for out of order: an op's start after its regions were read). */
gs_span mlir_span_at(reader *r, size_t off) {
    if (off > r->len) off = r->len;
    if (!r->a) { /* a reader without an arena (gs_mlir_detect): count from the start */
        gs_span sp = {r->src, 1, 1};
        for (size_t i = 0; i < off; i++) {
            sp.line += r->s[i] == '\n';
            sp.col = r->s[i] == '\n' ? 1 : sp.col + 1;
        }
        return sp;
    }
    if (!r->line_starts) {
        size_t n = 1;
        const char *end = r->s + r->len;
        for (const char *p = r->s; (p = memchr(p, '\n', (size_t)(end - p))); p++) n++;
        r->line_starts = GS_NEW_ARRAY(r->a, size_t, n);
        if (!r->line_starts) { /* out of memory: no position */
            gs_span none = {r->src, 0, 0};
            return none;
        }
        r->line_starts[0] = 0;
        r->n_lines = 1;
        for (const char *p = r->s; (p = memchr(p, '\n', (size_t)(end - p))); p++)
            r->line_starts[r->n_lines++] = (size_t)(p - r->s) + 1;
    }
    /* the last line start <= off is in [lo, hi); spans are mostly asked for in text order, so
     * the line of the last one, or one of the few after it, is tried first */
    size_t lo = 0, hi = r->n_lines, h = r->line_hint;
    if (h < r->n_lines && r->line_starts[h] <= off) {
        lo = h;
        while (lo + 1 < hi && lo < h + 8 && r->line_starts[lo + 1] <= off) lo++;
        if (lo + 1 < hi && r->line_starts[lo + 1] > off) hi = lo + 1;
    }
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->line_starts[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    r->line_hint = lo;
    gs_span sp = {r->src, (uint32_t)(lo + 1), (uint32_t)(off - r->line_starts[lo] + 1)};
    return sp;
}

__attribute__((format(printf, 3, 4))) bool mlir_fail_at(reader *r, size_t off, const char *fmt,
                                                        ...) {
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        gs_verror(r->d, mlir_span_at(r, off), fmt, ap);
        va_end(ap);
        r->failed = true;
    }
    return false;
}

bool mlir_oom(reader *r) { return FAIL(r, "out of memory"); }

/* ------------------------------------------------------------------ lexing */

/* Skips balanced brackets starting at an opening one (strings respected). */
bool mlir_skip_balanced(reader *r) {
    int depth = 0;
    size_t start = r->pos;
    while (r->pos < r->len) {
        char c = r->s[r->pos];
        if (c == '"') { /* to its closing quote; a '\\' at the very end escapes nothing */
            for (r->pos++; r->pos < r->len && r->s[r->pos] != '"'; r->pos++)
                if (r->s[r->pos] == '\\' && r->pos + 1 < r->len) r->pos++;
            if (r->pos >= r->len) break;
        } else if (c == '(' || c == '[' || c == '{' || c == '<') {
            depth++;
        } else if (c == ')' || c == ']' || c == '}' || (c == '>' && r->s[r->pos - 1] != '-')) {
            if (--depth == 0) {
                r->pos++;
                return true;
            }
        }
        r->pos++;
    }
    return mlir_fail_at(r, start, "unbalanced brackets");
}

/* mlir_skip_ws when the cursor is at a space, `/` or `l` (which may start `loc(`). */
void mlir_skip_ws_slow(reader *r) {
    bool saw_loc = false;
    for (;;) {
        char c = mlir_cur(r);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            r->pos++;
        } else if (c == '/' && mlir_ahead(r, 1) == '/') {
            while (r->pos < r->len && r->s[r->pos] != '\n') r->pos++;
        } else if (c == 'l' && r->pos + 4 <= r->len && memcmp(r->s + r->pos, "loc(", 4) == 0 &&
                   (r->pos == 0 || !mlir_is_id_char(r->s[r->pos - 1]))) {
            r->last_loc = r->pos;
            saw_loc = true;
            r->pos += 3;
            if (!mlir_skip_balanced(r)) return;
        } else {
            if (saw_loc) r->last_loc_end = r->pos;
            return;
        }
    }
}

/* A short description of what is at the cursor. */
const char *mlir_found(reader *r) {
    mlir_skip_ws(r);
    if (r->pos >= r->len) return "end of file";
    size_t n = 0;
    const char *t = r->s + r->pos;
    if (mlir_is_id_char(t[0]) || t[0] == '%' || t[0] == '@' || t[0] == '"') {
        n = 1;
        while (n < 32 && r->pos + n < r->len && (mlir_is_id_char(t[n]) || t[n] == '#')) n++;
    } else {
        n = 1;
    }
    char *q = gs_arena_printf(r->a, "'%.*s'", (int)n, t);
    return q ? q : "?";
}

bool mlir_expect(reader *r, char c, const char *context) {
    if (mlir_accept(r, c)) return true;
    return FAIL(r, "expected '%c' %s, found %s", c, context, mlir_found(r));
}

/* A bare identifier at the cursor (letters, digits, `_`, `$`, `.`): its length, 0 if none. */
size_t mlir_ident_len(reader *r) {
    mlir_skip_ws(r);
    size_t n = 0;
    if (!(isalpha((unsigned char)mlir_cur(r)) || mlir_cur(r) == '_')) return 0;
    while (r->pos + n < r->len && mlir_is_id_char(r->s[r->pos + n])) n++;
    return n;
}

/* Is the next identifier exactly w? */
bool mlir_at_word(reader *r, const char *w) {
    size_t n = mlir_ident_len(r);
    return n == strlen(w) && memcmp(r->s + r->pos, w, n) == 0;
}

bool mlir_accept_word(reader *r, const char *w) {
    if (!mlir_at_word(r, w)) return false;
    r->pos += strlen(w);
    return true;
}

bool mlir_parse_ident(reader *r, const char **out, const char *what) {
    size_t n = mlir_ident_len(r);
    if (!n) return FAIL(r, "expected %s, found %s", what, mlir_found(r));
    *out = gs_arena_strndup(r->a, r->s + r->pos, n);
    r->pos += n;
    return *out ? true : mlir_oom(r);
}

/* An integer (decimal, optionally negative, or 0x hex). */
bool mlir_parse_int(reader *r, int64_t *v, const char *what) {
    mlir_skip_ws(r);
    const char *p = r->s + r->pos;
    char *end;
    errno = 0;
    if (!(isdigit((unsigned char)p[0]) || (p[0] == '-' && isdigit((unsigned char)p[1]))))
        return FAIL(r, "expected %s, found %s", what, mlir_found(r));
    long long x = (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) ? (long long)strtoull(p, &end, 16)
                                                                : strtoll(p, &end, 10);
    if (errno) return FAIL(r, "%s out of range", what);
    r->pos += (size_t)(end - p);
    *v = x;
    return true;
}

/* `[1, 2]` (or `[]`) into v (at most GS_MAX_RANK entries). */
bool mlir_parse_int_list(reader *r, int64_t *v, int *n, const char *what) {
    *n = 0;
    if (!mlir_expect(r, '[', what)) return false;
    if (mlir_accept(r, ']')) return true;
    do {
        if (*n >= GS_MAX_RANK) return FAIL(r, "too many entries in %s", what);
        if (!mlir_parse_int(r, &v[(*n)++], what)) return false;
    } while (mlir_accept(r, ','));
    return mlir_expect(r, ']', what);
}

/* A `"..."` string, unescaped into the arena. */
bool mlir_parse_string(reader *r, const char **out) {
    if (mlir_peek(r) != '"') return FAIL(r, "expected a string, found %s", mlir_found(r));
    size_t start = ++r->pos;
    gs_sb sb = {0};
    while (r->pos < r->len && r->s[r->pos] != '"') {
        char c = r->s[r->pos++];
        if (c == '\\' && r->pos < r->len) {
            char e = r->s[r->pos++];
            if (isxdigit((unsigned char)e) && isxdigit((unsigned char)mlir_cur(r))) {
                char hex[3] = {e, mlir_cur(r), 0};
                r->pos++;
                c = (char)strtol(hex, NULL, 16);
            } else {
                c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            }
        }
        gs_sb_putc(&sb, c);
    }
    if (r->pos >= r->len) {
        gs_sb_free(&sb);
        return mlir_fail_at(r, start - 1, "unterminated string");
    }
    r->pos++;
    *out = gs_arena_strdup(r->a, gs_sb_str(&sb));
    bool bad = sb.failed;
    gs_sb_free(&sb);
    return (*out && !bad) ? true : mlir_oom(r);
}

/* `@name` or `@"name"`. */
bool mlir_parse_symbol(reader *r, const char **out) {
    if (!mlir_accept(r, '@')) return FAIL(r, "expected a symbol (@name), found %s", mlir_found(r));
    if (mlir_cur(r) == '"') return mlir_parse_string(r, out);
    size_t n = 0;
    while (r->pos + n < r->len && (mlir_is_id_char(r->s[r->pos + n]) || r->s[r->pos + n] == '-'))
        n++;
    if (!n) return FAIL(r, "expected a symbol name after '@'");
    *out = gs_arena_strndup(r->a, r->s + r->pos, n);
    r->pos += n;
    return *out ? true : mlir_oom(r);
}

/* `%name` (and `#i` when allow_index): the name without `%` is s[*at..*at + *n), *index the
 * index or -1. Allocates nothing (a use is looked up in place). */
bool mlir_scan_value_name(reader *r, size_t *at, size_t *n, int *index, bool allow_index) {
    if (mlir_peek(r) != '%') return FAIL(r, "expected a value (%%name), found %s", mlir_found(r));
    size_t start = ++r->pos, k = 0;
    while (r->pos + k < r->len && (mlir_is_id_char(r->s[r->pos + k]) || r->s[r->pos + k] == '-'))
        k++;
    if (!k) return mlir_fail_at(r, start - 1, "expected a value name after '%%'");
    *at = r->pos;
    *n = k;
    r->pos += k;
    *index = -1;
    if (allow_index && mlir_cur(r) == '#') {
        r->pos++;
        int64_t i;
        if (!mlir_parse_int(r, &i, "a result index") || i < 0 || i > 1 << 20)
            return mlir_fail_at(r, start, "bad result index");
        *index = (int)i;
    }
    return true;
}

/* The same with the name copied into the arena (a definition, kept while it is in scope). */
bool mlir_parse_value_name(reader *r, const char **name, int *index, bool allow_index) {
    size_t at, n;
    if (!mlir_scan_value_name(r, &at, &n, index, allow_index)) return false;
    *name = gs_arena_strndup(r->a, r->s + at, n);
    return *name ? true : mlir_oom(r);
}
