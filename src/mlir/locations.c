/*
 * src/mlir/locations.c — MLIR source locations (`loc(...)`) as each instruction's metadata, the
 * way XLA's import turns them into HLO `metadata={op_name=... source_file=... source_line=...}`,
 * so that warnings name the user's line (partition's "computed whole" warnings do).
 *
 * JAX writes an op's location after it, usually through an alias defined at the end of the
 * module: `%0 = stablehlo.add ... loc(#loc3)` with `#loc3 = loc("jit(f)/add"(#loc1))` and
 * `#loc1 = loc("/home/me/f.py":12:10)`. Read here: file:line:col, a name wrapping a location
 * (the op name), `callsite(A at B)` (A, the innermost frame, first), `fused[...]` (the first
 * that has a file) and `unknown`. The lexer skips locations as whitespace and remembers where
 * the last one was (mlir_skip_ws); an op's own location is the one right after its last token.
 */
#include "mlir/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Records every `#name = loc(...)` alias definition (at the start of a line) in the text. */
bool mlir_scan_loc_aliases(reader *r) {
    for (size_t i = 0, next; i + 4 < r->len; i = next) { /* i: a line start */
        const char *nl = memchr(r->s + i, '\n', r->len - i);
        next = nl ? (size_t)(nl - r->s) + 1 : r->len;
        if (r->s[i] != '#') continue;
        size_t n = 1;
        while (i + n < r->len && mlir_is_id_char(r->s[i + n])) n++;
        size_t j = i + n;
        while (j < r->len && r->s[j] == ' ') j++;
        if (j >= r->len || r->s[j] != '=') continue;
        j++;
        while (j < r->len && r->s[j] == ' ') j++;
        if (j + 4 > r->len || memcmp(r->s + j, "loc(", 4) != 0) continue;
        char *name = gs_arena_alloc(r->a, n + 1);
        if (!name) return mlir_oom(r);
        memcpy(name, r->s + i, n);
        name[n] = 0;
        if (gs_strmap_put(&r->loc_aliases, name, (void *)(uintptr_t)(j + 1)) != GS_OK)
            return mlir_oom(r);
    }
    return true;
}

typedef struct where {
    const char *name; /* op name (the outermost `"name"(...)`), or NULL */
    size_t name_len;
    const char *file; /* source file, or NULL */
    size_t file_len;
    long line;
} where;

/* A quoted string at s[*i] (no escapes inside; JAX's names and paths have none): its text. */
static bool quoted(const reader *r, size_t *i, const char **text, size_t *len) {
    if (*i >= r->len || r->s[*i] != '"') return false;
    size_t j = *i + 1;
    while (j < r->len && r->s[j] != '"' && r->s[j] != '\n') j++;
    if (j >= r->len || r->s[j] != '"') return false;
    *text = r->s + *i + 1;
    *len = j - *i - 1;
    *i = j + 1;
    return true;
}

static void skip_spaces(const reader *r, size_t *i) {
    while (*i < r->len && (r->s[*i] == ' ' || r->s[*i] == '\n')) (*i)++;
}

/* The location at s[i] (after `loc(`, or inside one), up to depth levels of aliases. */
static void resolve(const reader *r, size_t i, int depth, where *w) {
    if (depth > 16) return;
    skip_spaces(r, &i);
    if (i >= r->len) return;
    if (r->s[i] == '#') { /* an alias */
        char name[64] = "#";
        size_t n = 1;
        while (i + n < r->len && n + 1 < sizeof name && mlir_is_id_char(r->s[i + n]))
            name[n] = r->s[i + n], n++;
        name[n] = 0;
        void *at = gs_strmap_get(&r->loc_aliases, name);
        if (at) resolve(r, (size_t)(uintptr_t)at + 3, depth + 1, w);
        return;
    }
    if (r->len - i > 8 && memcmp(r->s + i, "callsite", 8) == 0) {
        i += 8;
        skip_spaces(r, &i);
        if (i < r->len && r->s[i] == '(') resolve(r, i + 1, depth + 1, w);
        return;
    }
    if (r->len - i > 5 && memcmp(r->s + i, "fused", 5) == 0) {
        i += 5;
        if (i < r->len && r->s[i] == '<') { /* fused<"metadata">[...] */
            while (i < r->len && r->s[i] != '>') i++;
            i++;
        }
        if (i >= r->len || r->s[i] != '[') return;
        i++;
        /* each element until one gives a file */
        for (int k = 0; k < 64 && i < r->len && !w->file; k++) {
            resolve(r, i, depth + 1, w);
            int level = 0; /* on to the next top-level comma */
            while (i < r->len) {
                char c = r->s[i];
                if (c == '(' || c == '[') level++;
                if (c == ')' || c == ']') {
                    if (level == 0) return;
                    level--;
                }
                if (c == '"') {
                    const char *t;
                    size_t tl;
                    if (!quoted(r, &i, &t, &tl)) return;
                    continue;
                }
                i++;
                if (c == ',' && level == 0) break;
            }
        }
        return;
    }
    const char *t;
    size_t tl;
    if (!quoted(r, &i, &t, &tl)) return; /* unknown, or what is not read */
    if (i < r->len && r->s[i] == ':') {  /* "file":line:col */
        if (!w->file) {
            w->file = t;
            w->file_len = tl;
            w->line = strtol(r->s + i + 1, NULL, 10);
        }
        return;
    }
    if (i < r->len && r->s[i] == '(') { /* "name"(inner) */
        if (!w->name) {
            w->name = t;
            w->name_len = tl;
        }
        resolve(r, i + 1, depth + 1, w);
    }
}

/* The metadata of an op whose location starts at `loc_pos` (the `l` of `loc(`), or NULL. */
static const char *metadata_at(reader *r, size_t loc_pos) {
    where w = {0};
    resolve(r, loc_pos + 4, 0, &w);
    if (!w.name && !w.file) return NULL;
    gs_sb sb = {0};
    gs_sb_puts(&sb, "{");
    if (w.name) gs_sb_printf(&sb, "op_name=\"%.*s\"", (int)w.name_len, w.name);
    if (w.file)
        gs_sb_printf(&sb, "%ssource_file=\"%.*s\" source_line=%ld", w.name ? " " : "",
                     (int)w.file_len, w.file, w.line);
    gs_sb_puts(&sb, "}");
    const char *text = gs_sb_str(&sb) ? gs_arena_strdup(r->a, gs_sb_str(&sb)) : NULL;
    gs_sb_free(&sb);
    return text;
}

bool mlir_take_loc(reader *r, gs_instr *in, size_t op_pos) {
    mlir_skip_ws(r);
    if (!in || !r->last_loc || r->last_loc < op_pos || r->last_loc_end != r->pos) return true;
    if (gs_instr_str(in, GS_ATTR_METADATA)) return true;
    const char *md = metadata_at(r, r->last_loc);
    if (!md) return true;
    gs_attr a = {.key = GS_ATTR_METADATA, .name = "metadata"};
    a.u.s = md;
    return gs_instr_set_attr(r->m, in, &a) == GS_OK || mlir_oom(r);
}
