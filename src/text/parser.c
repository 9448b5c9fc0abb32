/*
 * parser.c — XLA HLO text → gs_module.
 *
 * A recursive-descent parser over characters (HLO's lexical forms — `1x1`, `0_0x1_1`,
 * `b01f_01io->b01f`, `[2,2]<=[4]T(1,0)` — are easier to read as characters than as a token
 * stream). Every parse function reports its first error as `FILE:LINE:COL: error: ...` and
 * returns false; later errors are suppressed so that one mistake gives one message. Names of
 * operands and called computations may refer forward; they are resolved at the end of their
 * computation / of the module.
 *
 * Grammar (whitespace, `// ...` and `/ * ... * /` comments may appear between any two tokens):
 *   module      := 'HloModule' NAME (',' NAME '=' raw)* stack_frames? computation*
 *   stack_frames:= (('FileNames'|'FunctionNames'|'FileLocations'|'StackFrames') (INT raw)*)*
 *   computation := 'ENTRY'? NAME ('(' (NAME ':' shape),* ')' '->' shape)? '{' instruction* '}'
 *                  (',' 'execution_thread' '=' STRING)?
 *   instruction := 'ROOT'? NAME '=' shape OPCODE '(' operands ')' (',' attribute)*
 *   operands    := ε | literal (constant) | INT (parameter) | (shape? NAME) (',' shape? NAME)*
 *   attribute   := NAME '=' value            value: by the attribute's kind (attrs.def)
 *   shape       := '(' shape,* ')' | TYPE '[' (('<=')? INT | '?'),* ']' layout?
 *   layout      := '{' INT,* (':' raw)? '}'   (immediately after ']')
 */
#include "gspmd/numeric.h"
#include "base/internal.h"
#include "mlir/mlir.h"
#include "gspmd/sharding.h"
#include "gspmd/text.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct comp_fixup {
    gs_attr *attr;   /* attribute whose computation(s) to fill in (NULL while pending) */
    int attr_index;  /* while pending: the attribute's index in the instruction's parse order */
    int index;       /* index into comps.v, or -1 for a COMP attribute */
    const char *name; /* the computation's name */
    gs_span span;    /* where the name was written */
} comp_fixup;

typedef struct operand_ref {
    const char *name;
    gs_span span;
} operand_ref;

typedef struct parser {
    const gs_source *src;
    const char *s;      /* text */
    size_t pos;         /* current offset */
    size_t len;         /* text length */
    uint32_t line;      /* current line (1-based) */
    size_t line_start;  /* offset where the current line starts */
    gs_module *m;       /* module being built */
    gs_arena *a;        /* m's arena */
    gs_diags *d;        /* where errors go */
    bool failed;        /* an error has been reported */
    gs_strmap comps;    /* computation name -> gs_computation */
    gs_vec fixups;      /* comp_fixup, resolved at the end of the module */
    gs_vec pending;     /* comp_fixup of the instruction being parsed */
    int attr_index;     /* index of the attribute being parsed */
    int64_t max_lit;    /* the most bytes a constant's data may take (gs_parse_options) */
} parser;

/* ------------------------------------------------------------------ errors and positions */

static gs_span here(const parser *p) {
    gs_span sp = {p->src, p->line, (uint32_t)(p->pos - p->line_start + 1)};
    return sp;
}

__attribute__((format(printf, 3, 4))) static bool fail_at(parser *p, gs_span sp, const char *fmt,
                                                          ...) {
    if (!p->failed) {
        va_list ap;
        va_start(ap, fmt);
        gs_verror(p->d, sp, fmt, ap);
        va_end(ap);
        p->failed = true;
    }
    return false;
}

#define FAIL(p, ...) fail_at((p), here(p), __VA_ARGS__)

static bool oom(parser *p) { return FAIL(p, "out of memory"); }

/* A short description of what is at the cursor, for "expected X, found Y" messages. */
static const char *found(parser *p) {
    static const char *const eof = "end of file";
    if (p->pos >= p->len) return eof;
    size_t n = 0;
    const char *t = p->s + p->pos;
    if (isalnum((unsigned char)t[0]) || t[0] == '_' || t[0] == '%' || t[0] == '-') {
        while (n < 24 && p->pos + n < p->len &&
               (isalnum((unsigned char)t[n]) || strchr("_.%-", t[n])))
            n++;
    } else {
        n = 1;
    }
    char *q = gs_arena_printf(p->a, "'%.*s'", (int)n, t);
    return q ? q : "?";
}

/* ------------------------------------------------------------------ characters */

static char cur(const parser *p) { return p->pos < p->len ? p->s[p->pos] : 0; }
static char ahead(const parser *p, size_t k) { return p->pos + k < p->len ? p->s[p->pos + k] : 0; }

static void adv(parser *p) {
    if (p->pos >= p->len) return;
    if (p->s[p->pos] == '\n') {
        p->line++;
        p->line_start = p->pos + 1;
    }
    p->pos++;
}

static void advn(parser *p, size_t n) {
    while (n--) adv(p);
}

/* Skips whitespace and comments. Returns false on an unterminated block comment. */
static bool skip_ws(parser *p) {
    for (;;) {
        char c = cur(p);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            adv(p);
        } else if (c == '/' && ahead(p, 1) == '/') {
            while (p->pos < p->len && cur(p) != '\n') adv(p);
        } else if (c == '/' && ahead(p, 1) == '*') {
            gs_span sp = here(p);
            advn(p, 2);
            while (p->pos < p->len && !(cur(p) == '*' && ahead(p, 1) == '/')) adv(p);
            if (p->pos >= p->len) return fail_at(p, sp, "unterminated comment");
            advn(p, 2);
        } else {
            return true;
        }
    }
}

static char peek(parser *p) {
    skip_ws(p);
    return cur(p);
}

static bool accept(parser *p, char c) {
    if (peek(p) != c) return false;
    adv(p);
    return true;
}

static bool expect(parser *p, char c, const char *context) {
    if (p->failed) return false;
    if (accept(p, c)) return true;
    if (p->failed) return false;
    return FAIL(p, "expected '%c' %s, found %s", c, context, found(p));
}

static bool accept_word(parser *p, const char *w) {
    skip_ws(p);
    size_t n = strlen(w);
    if (p->pos + n > p->len || memcmp(p->s + p->pos, w, n) != 0) return false;
    char next = ahead(p, n);
    if (isalnum((unsigned char)next) || next == '_' || next == '.' || next == '-') return false;
    advn(p, n);
    return true;
}

static bool is_name_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_name_char(char c) {
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-';
}

/* NAME := '%'? [A-Za-z_][A-Za-z0-9_.-]*  (XLA's lexer rule, with or without the '%': `%0` is
 * not a name, so that what the printer writes without a '%' reads back). The name is returned in
 * the arena. */
static bool parse_name(parser *p, const char **out, gs_span *sp, const char *what) {
    if (p->failed) return false;
    skip_ws(p);
    if (sp) *sp = here(p);
    bool pct = cur(p) == '%';
    if (!is_name_start(pct ? ahead(p, 1) : cur(p)))
        return FAIL(p, "expected %s, found %s", what, found(p));
    if (pct) adv(p);
    size_t start = p->pos;
    while (is_name_char(cur(p)) && !(cur(p) == '-' && ahead(p, 1) == '>')) adv(p);
    *out = gs_arena_strndup(p->a, p->s + start, p->pos - start);
    return *out ? true : oom(p);
}

/* A bare word [A-Za-z0-9_.-]+ (attribute identifiers such as LT, kLoop, rng_default). */
static bool parse_word(parser *p, const char **out, const char *what) {
    if (p->failed) return false;
    skip_ws(p);
    size_t start = p->pos;
    while (is_name_char(cur(p))) adv(p);
    if (p->pos == start) return FAIL(p, "expected %s, found %s", what, found(p));
    *out = gs_arena_strndup(p->a, p->s + start, p->pos - start);
    return *out ? true : oom(p);
}

static bool parse_int(parser *p, int64_t *v, const char *what) {
    if (p->failed) return false;
    skip_ws(p);
    const char *start = p->s + p->pos;
    bool neg = cur(p) == '-';
    size_t k = neg ? 1 : 0;
    if (!isdigit((unsigned char)ahead(p, k))) return FAIL(p, "expected %s, found %s", what, found(p));
    errno = 0;
    char *end;
    long long x = strtoll(start, &end, 10);
    if (errno == ERANGE) return FAIL(p, "integer out of range");
    advn(p, (size_t)(end - start));
    *v = x;
    return true;
}

/* '{' INT (',' INT)* '}' or '{' '}' */
static bool parse_int_list(parser *p, gs_ints *out, char open, char close, const char *what) {
    if (!expect(p, open, what)) return false;
    gs_vec v;
    gs_vec_init(&v, sizeof(int64_t));
    bool ok = true;
    if (!accept(p, close)) {
        do {
            int64_t x;
            if (!(ok = parse_int(p, &x, "an integer"))) break;
            if (gs_vec_push(&v, &x) != GS_OK) {
                ok = oom(p);
                break;
            }
        } while (accept(p, ','));
        if (ok) ok = expect(p, close, "to close the list");
    }
    if (ok) {
        out->n = (int)v.n;
        out->v = v.n ? gs_arena_memdup(p->a, v.data, v.n * sizeof(int64_t)) : NULL;
        if (v.n && !out->v) ok = oom(p);
    }
    gs_vec_free(&v);
    return ok;
}

/* A quoted string with C escapes; returns the unescaped value. */
static bool parse_string(parser *p, const char **out) {
    if (p->failed) return false;
    skip_ws(p);
    if (cur(p) != '"') return FAIL(p, "expected a string, found %s", found(p));
    gs_span sp = here(p);
    adv(p);
    gs_sb sb = {0};
    while (p->pos < p->len && cur(p) != '"') {
        char c = cur(p);
        if (c == '\\') {
            adv(p);
            char e = cur(p);
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case '0': c = '\0'; break;
            default: c = e; break;
            }
        }
        gs_sb_putc(&sb, c);
        adv(p);
    }
    if (p->pos >= p->len) {
        gs_sb_free(&sb);
        return fail_at(p, sp, "unterminated string");
    }
    adv(p);
    *out = gs_arena_strdup(p->a, gs_sb_str(&sb));
    bool ok = !sb.failed && *out;
    gs_sb_free(&sb);
    return ok ? true : oom(p);
}

/* A value kept as text: a balanced run of characters up to ',' or a newline at depth 0 (or an
 * unbalanced closer). Whitespace outside strings collapses to one space, comments drop. */
static bool parse_raw(parser *p, const char **out) {
    if (p->failed) return false;
    skip_ws(p);
    gs_span sp = here(p);
    gs_sb sb = {0};
    int depth = 0;
    bool space = false;
    while (p->pos < p->len) {
        char c = cur(p);
        if (depth == 0 && (c == ',' || c == '\n' || c == ')' || c == '}' || c == ']')) break;
        if (c == '/' && (ahead(p, 1) == '*' || ahead(p, 1) == '/')) {
            if (!skip_ws(p)) break;
            space = true;
            continue;
        }
        if (isspace((unsigned char)c)) {
            space = true;
            adv(p);
            continue;
        }
        if (space && sb.len > 0) gs_sb_putc(&sb, ' ');
        space = false;
        if (c == '"' || c == '\'') { /* strings, and the quoted axis names of named shardings
                                          (`mesh['x(1'=2]`), verbatim */
            gs_sb_putc(&sb, c);
            adv(p);
            while (p->pos < p->len && cur(p) != c) {
                if (cur(p) == '\\' && p->pos + 1 < p->len) {
                    gs_sb_putc(&sb, cur(p));
                    adv(p);
                }
                gs_sb_putc(&sb, cur(p));
                adv(p);
            }
            if (p->pos >= p->len) {
                gs_sb_free(&sb);
                return fail_at(p, sp, "unterminated string");
            }
            gs_sb_putc(&sb, c);
            adv(p);
            continue;
        }
        if (c == '{' || c == '(' || c == '[') depth++;
        if (c == '}' || c == ')' || c == ']') depth--;
        gs_sb_putc(&sb, c);
        adv(p);
    }
    if (depth != 0) {
        gs_sb_free(&sb);
        return fail_at(p, sp, "unbalanced brackets in attribute value");
    }
    if (sb.len == 0 && !sb.failed) {
        gs_sb_free(&sb);
        return fail_at(p, sp, "expected a value, found %s", found(p));
    }
    *out = gs_arena_strdup(p->a, gs_sb_str(&sb));
    bool ok = !sb.failed && *out;
    gs_sb_free(&sb);
    return ok ? true : oom(p);
}

/* ------------------------------------------------------------------ shapes */

static bool parse_shape(parser *p, gs_shape **out);

static bool parse_layout(parser *p, gs_shape *s) {
    /* cur(p) == '{' immediately after ']' */
    adv(p);
    gs_vec v;
    gs_vec_init(&v, sizeof(int64_t));
    bool ok = true;
    while (ok && (skip_ws(p), isdigit((unsigned char)cur(p)))) {
        int64_t x;
        ok = parse_int(p, &x, "a layout dimension");
        if (ok && gs_vec_push(&v, &x) != GS_OK) ok = oom(p);
        if (ok && !accept(p, ',')) break;
    }
    if (ok && accept(p, ':')) {
        /* Tiles, memory space etc.: keep as text up to the matching '}'. */
        skip_ws(p);
        size_t start = p->pos;
        int depth = 0;
        while (p->pos < p->len && !(depth == 0 && cur(p) == '}')) {
            if (cur(p) == '(' || cur(p) == '{') depth++;
            if (cur(p) == ')' || cur(p) == '}') depth--;
            if (cur(p) == '\n') break;
            adv(p);
        }
        size_t end = p->pos;
        while (end > start && isspace((unsigned char)p->s[end - 1])) end--;
        s->layout_extra = gs_arena_strndup(p->a, p->s + start, end - start);
        if (!s->layout_extra) ok = oom(p);
    }
    if (ok) ok = expect(p, '}', "to close the layout");
    if (ok) {
        s->has_layout = true;
        s->n_minor_to_major = (int)v.n;
        if (v.n) {
            s->minor_to_major = gs_arena_memdup(p->a, v.data, v.n * sizeof(int64_t));
            if (!s->minor_to_major) ok = oom(p);
        }
    }
    gs_vec_free(&v);
    return ok;
}

static bool parse_array_shape(parser *p, gs_type type, gs_shape **out) {
    gs_span sp = here(p);
    if (!expect(p, '[', "after the element type")) return false;
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK];
    int rank = 0;
    bool any_dyn = false;
    if (!accept(p, ']')) {
        do {
            if (rank == GS_MAX_RANK) return fail_at(p, sp, "shape has more than %d dimensions", GS_MAX_RANK);
            dyn[rank] = false;
            skip_ws(p);
            if (cur(p) == '?') {
                adv(p);
                dims[rank] = -1;
                dyn[rank] = any_dyn = true;
            } else {
                if (cur(p) == '<' && ahead(p, 1) == '=') {
                    advn(p, 2);
                    dyn[rank] = any_dyn = true;
                }
                if (!parse_int(p, &dims[rank], "a dimension size")) return false;
                if (dims[rank] < 0) return FAIL(p, "negative dimension size %lld", (long long)dims[rank]);
            }
            rank++;
        } while (accept(p, ','));
        if (!expect(p, ']', "to close the dimensions")) return false;
    }
    if (!gs_type_is_array(type) && rank > 0)
        return fail_at(p, sp, "%s cannot have dimensions", gs_type_name(type));
    /* XLA's ValidateShape: the byte size (bounds for dynamic dims) must fit in int64, so that
     * element counts and sizes computed from the shape never overflow. */
    int64_t bytes = gs_type_is_array(type) ? gs_type_size(type) : 0;
    for (int i = 0; i < rank; i++)
        if (dims[i] > 0 && bytes > INT64_MAX / dims[i])
            return fail_at(p, sp, "shape is too large: its size in bytes overflows 64 bits");
        else if (dims[i] >= 0)
            bytes *= dims[i];
    gs_shape *s = type == GS_TOKEN ? gs_shape_token(p->a) : gs_shape_array(p->a, type, rank, dims);
    if (!s) return oom(p);
    if (any_dyn) {
        s->dynamic = gs_arena_memdup(p->a, dyn, sizeof(bool) * (size_t)rank);
        if (!s->dynamic) return oom(p);
    }
    if (cur(p) == '{' && !parse_layout(p, s)) return false;
    if (s->has_layout && s->n_minor_to_major != 0 && s->n_minor_to_major != rank)
        return fail_at(p, sp, "layout has %d entries for a rank-%d shape", s->n_minor_to_major, rank);
    if (s->has_layout && s->n_minor_to_major == rank) {
        bool seen[GS_MAX_RANK] = {0};
        for (int i = 0; i < rank; i++) {
            int64_t d = s->minor_to_major[i];
            if (d < 0 || d >= rank || seen[d])
                return fail_at(p, sp, "layout {...} is not a permutation of the %d dimensions", rank);
            seen[d] = true;
        }
    }
    *out = s;
    return true;
}

static bool parse_shape(parser *p, gs_shape **out) {
    if (p->failed) return false;
    skip_ws(p);
    if (cur(p) == '(') {
        adv(p);
        gs_vec v;
        gs_vec_init(&v, sizeof(gs_shape *));
        bool ok = true;
        if (!accept(p, ')')) {
            do {
                gs_shape *e;
                if (!(ok = parse_shape(p, &e))) break;
                if (gs_vec_push(&v, &e) != GS_OK) {
                    ok = oom(p);
                    break;
                }
            } while (accept(p, ','));
            if (ok) ok = expect(p, ')', "to close the tuple shape");
        }
        if (ok) {
            *out = gs_shape_tuple(p->a, (int)v.n, v.data);
            if (!*out) ok = oom(p);
        }
        gs_vec_free(&v);
        return ok;
    }
    size_t start = p->pos;
    gs_span sp = here(p);
    while (isalnum((unsigned char)cur(p))) adv(p);
    gs_type t = gs_type_from_name(p->s + start, p->pos - start);
    if (t == GS_INVALID_TYPE) {
        p->pos = start; /* only alphanumerics were consumed: the line is unchanged */
        if (start == p->pos && !isalnum((unsigned char)cur(p)))
            return fail_at(p, sp, "expected a shape, found %s", found(p));
        return fail_at(p, sp, "unknown element type %s", found(p));
    }
    return parse_array_shape(p, t, out);
}

/* Is the text at the cursor the start of a shape (a type name then '[' or a '(')? */
static bool at_shape(parser *p) {
    skip_ws(p);
    if (cur(p) == '(') return true;
    size_t k = 0;
    while (isalnum((unsigned char)ahead(p, k))) k++;
    return k > 0 && ahead(p, k) == '[' && gs_type_from_name(p->s + p->pos, k) != GS_INVALID_TYPE;
}

/* ------------------------------------------------------------------ literals */

typedef struct lit_ctx {
    gs_type type;
    void *data;
    int64_t n;     /* elements written */
    int64_t total; /* elements expected */
} lit_ctx;

/* The range of integer type t as doubles, [*lo, *hi) (hi exclusive: 2^63 and 2^64 are exact
 * doubles, INT64_MAX and UINT64_MAX are not). A pred takes any integer (nonzero is true). */
static void int_range(gs_type t, double *lo, double *hi) {
    int bits = t == GS_PRED ? 64 : gs_type_bits(t);
    bool is_signed = t == GS_PRED || gs_type_is_signed_int(t);
    *lo = is_signed ? -ldexp(1.0, bits - 1) : 0.0;
    *hi = ldexp(1.0, is_signed ? bits - 1 : bits);
}

/* Does integer v fit integer type t (XLA rejects a literal value out of its type's range)? */
static bool int_fits(gs_type t, long long v) {
    double lo, hi;
    int_range(t, &lo, &hi);
    int bits = t == GS_PRED ? 64 : gs_type_bits(t);
    if (bits >= 64) return gs_type_is_unsigned_int(t) ? v >= 0 : true;
    return (double)v >= lo && (double)v < hi; /* exact: |v| < 2^63 and the bounds are small */
}

static bool parse_scalar_into(parser *p, lit_ctx *lc) {
    skip_ws(p);
    gs_span sp = here(p);
    if (lc->n >= lc->total)
        return fail_at(p, sp, "too many values in the literal (shape has %lld elements)",
                       (long long)lc->total);
    gs_type t = lc->type;
    if (gs_type_is_complex(t)) {
        double re, im;
        if (!expect(p, '(', "to start a complex value")) return false;
        skip_ws(p);
        char *end;
        re = strtod(p->s + p->pos, &end);
        if (end == p->s + p->pos) return FAIL(p, "expected a number, found %s", found(p));
        advn(p, (size_t)(end - (p->s + p->pos)));
        if (!expect(p, ',', "between the real and imaginary parts")) return false;
        skip_ws(p);
        im = strtod(p->s + p->pos, &end);
        if (end == p->s + p->pos) return FAIL(p, "expected a number, found %s", found(p));
        advn(p, (size_t)(end - (p->s + p->pos)));
        if (!expect(p, ')', "to close a complex value")) return false;
        gs_elem_set_c(lc->data, t, lc->n++, re, im);
        return true;
    }
    if (accept_word(p, "true")) {
        gs_elem_set_i(lc->data, t, lc->n++, 1);
        return true;
    }
    if (accept_word(p, "false")) {
        gs_elem_set_i(lc->data, t, lc->n++, 0);
        return true;
    }
    const char *start = p->s + p->pos;
    char *end = NULL;
    if (gs_type_is_int(t) || t == GS_PRED) {
        errno = 0;
        if (t == GS_U64 && *start != '-') {
            unsigned long long u = strtoull(start, &end, 10);
            if (end != start && !strchr(".eE", *end)) {
                if (errno == ERANGE) return fail_at(p, sp, "integer out of range");
                advn(p, (size_t)(end - start));
                gs_elem_set_i(lc->data, t, lc->n++, (int64_t)u);
                return true;
            }
        } else {
            long long v = strtoll(start, &end, 10);
            if (end != start && !strchr(".eE", *end) && !isalpha((unsigned char)*end)) {
                if (errno == ERANGE) return fail_at(p, sp, "integer out of range");
                if (!int_fits(t, v))
                    return fail_at(p, sp, "value %lld is out of range for %s", v, gs_type_name(t));
                advn(p, (size_t)(end - start));
                gs_elem_set_i(lc->data, t, lc->n++, v);
                return true;
            }
        }
    }
    double v = strtod(start, &end);
    if (end == start) return fail_at(p, sp, "expected a number, found %s", found(p));
    advn(p, (size_t)(end - start));
    /* nan(0x...) payloads */
    if (cur(p) == '(' && isnan(v)) {
        while (p->pos < p->len && cur(p) != ')') adv(p);
        adv(p);
    }
    if (gs_type_is_int(t) || t == GS_PRED) {
        if (v != floor(v) || isinf(v)) return fail_at(p, sp, "%s literal is not an integer", gs_type_name(t));
        double lo, hi;
        int_range(t, &lo, &hi);
        if (v < lo || v >= hi)
            return fail_at(p, sp, "value %.*s is out of range for %s", (int)(end - start), start,
                           gs_type_name(t));
        /* In range, so the conversion is defined; a u64 above INT64_MAX keeps its bits. */
        gs_elem_set_i(lc->data, t, lc->n++, t == GS_U64 ? (int64_t)(uint64_t)v : (int64_t)v);
    } else {
        gs_elem_set_f(lc->data, t, lc->n++, v);
    }
    return true;
}

/* Nested braces of values; `depth` counts open braces (checked against rank loosely). */
static bool parse_array_values(parser *p, lit_ctx *lc) {
    if (peek(p) != '{') return parse_scalar_into(p, lc);
    adv(p);
    if (accept(p, '}')) return true;
    do {
        if (!parse_array_values(p, lc)) return false;
    } while (accept(p, ','));
    return expect(p, '}', "to close the literal");
}

static bool parse_literal(parser *p, const gs_shape *s, gs_literal_ir **out) {
    gs_literal_ir *lit = GS_NEW(p->a, gs_literal_ir);
    if (!lit) return oom(p);
    *out = lit;
    skip_ws(p);
    gs_span sp = here(p);
    if (s->type == GS_TUPLE) {
        if (!expect(p, '(', "to start a tuple literal")) return false;
        lit->n_tuple = s->n_tuple;
        lit->tuple = GS_NEW_ARRAY(p->a, gs_literal_ir *, s->n_tuple ? s->n_tuple : 1);
        if (!lit->tuple) return oom(p);
        for (int i = 0; i < s->n_tuple; i++) {
            if (i && !expect(p, ',', "between tuple literal elements")) return false;
            if (!parse_literal(p, s->tuple[i], &lit->tuple[i])) return false;
        }
        return expect(p, ')', "to close the tuple literal");
    }
    if (s->type == GS_TOKEN) return fail_at(p, sp, "a token has no literal");
    /* Elided values: {...} */
    if (cur(p) == '{' && strncmp(p->s + p->pos, "{...}", 5) == 0) {
        advn(p, 5);
        lit->elided = true;
        return true;
    }
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] < 0)
            return fail_at(p, sp,
                           "a constant of shape %s needs every dimension's size: "
                           "dimension %d is unbounded dynamic ('?')",
                           gs_shape_to_string(p->a, s), i);
    /* The shape's byte size fits in int64 (parse_array_shape checks it). */
    int64_t total = gs_shape_elements(s);
    int64_t n_bytes = total * gs_type_size(s->type);
    if (n_bytes > p->max_lit)
        return fail_at(p, sp,
                       "constant of shape %s would take %lld bytes, more than the limit of %lld",
                       gs_shape_to_string(p->a, s), (long long)n_bytes, (long long)p->max_lit);
    /* Written out, each value takes at least one character: never allocate for more values
     * than the rest of the text could hold (a short literal for a huge shape is reported by
     * the count check below). */
    bool braced = cur(p) == '{';
    int64_t room = (int64_t)(p->len - p->pos);
    int64_t cap = braced && room < total ? room : total;
    lit->n_bytes = (size_t)n_bytes;
    lit->data = gs_arena_alloc(p->a, cap ? (size_t)cap * (size_t)gs_type_size(s->type) : 1);
    if (!lit->data) return oom(p);
    lit_ctx lc = {s->type, lit->data, 0, total};
    if (!braced) {
        /* A scalar; for an array, XLA's parser fills every element with it. */
        uint64_t scratch[2];
        lit_ctx one = {s->type, total > 0 ? lit->data : (void *)scratch, 0, 1};
        if (!parse_scalar_into(p, &one)) return false;
        int sz = gs_type_size(s->type);
        for (int64_t i = 1; i < total; i++)
            memcpy((char *)lit->data + i * sz, lit->data, (size_t)sz);
        lc.n = total;
    } else if (!parse_array_values(p, &lc)) {
        return false;
    }
    if (lc.n != total)
        return fail_at(p, sp, "literal has %lld values, but shape %s has %lld elements",
                       (long long)lc.n, gs_shape_to_string(p->a, s), (long long)total);
    return true;
}

/* ------------------------------------------------------------------ attribute values */

static bool parse_slice(parser *p, gs_attr *at) {
    if (!expect(p, '{', "to start slice")) return false;
    gs_vec v;
    gs_vec_init(&v, sizeof(gs_slice_dim));
    bool ok = true;
    if (!accept(p, '}')) {
        do {
            gs_slice_dim sd = {0, 0, 1};
            ok = expect(p, '[', "to start a slice dimension") &&
                 parse_int(p, &sd.start, "a slice start") && expect(p, ':', "in a slice") &&
                 parse_int(p, &sd.limit, "a slice limit");
            if (ok && accept(p, ':')) ok = parse_int(p, &sd.stride, "a slice stride");
            if (ok) ok = expect(p, ']', "to close a slice dimension");
            if (ok && gs_vec_push(&v, &sd) != GS_OK) ok = oom(p);
        } while (ok && accept(p, ','));
        if (ok) ok = expect(p, '}', "to close slice");
    }
    if (ok) {
        at->u.slice.n = (int)v.n;
        at->u.slice.v = gs_arena_memdup(p->a, v.data, v.n * sizeof(gs_slice_dim));
        if (v.n && !at->u.slice.v) ok = oom(p);
    }
    gs_vec_free(&v);
    return ok;
}

/* Reads `a x b x c` style integer lists separated by 'x' (window fields). */
static bool parse_x_list(parser *p, int64_t *vals, int *n, const char *what) {
    *n = 0;
    do {
        if (*n == GS_MAX_RANK) return FAIL(p, "too many dimensions in %s", what);
        if (!parse_int(p, &vals[(*n)++], what)) return false;
    } while (cur(p) == 'x' && (adv(p), true));
    return true;
}

static bool parse_window(parser *p, gs_attr *at) {
    gs_span sp = here(p);
    if (!expect(p, '{', "to start window")) return false;
    gs_window *w = GS_NEW(p->a, gs_window);
    if (!w) return oom(p);
    int64_t size[GS_MAX_RANK], stride[GS_MAX_RANK], lo[GS_MAX_RANK], hi[GS_MAX_RANK],
        ld[GS_MAX_RANK], rd[GS_MAX_RANK], rev[GS_MAX_RANK];
    int n_size = -1, n_stride = -1, n_pad = -1, n_ld = -1, n_rd = -1, n_rev = -1;
    while (!accept(p, '}')) {
        if (p->failed) return false;
        const char *key;
        gs_span ksp;
        if (!parse_name(p, &key, &ksp, "a window field") || !expect(p, '=', "after a window field"))
            return false;
        skip_ws(p);
        if (strcmp(key, "size") == 0) {
            if (!parse_x_list(p, size, &n_size, "window size")) return false;
        } else if (strcmp(key, "stride") == 0) {
            if (!parse_x_list(p, stride, &n_stride, "window stride")) return false;
        } else if (strcmp(key, "lhs_dilate") == 0) {
            if (!parse_x_list(p, ld, &n_ld, "lhs_dilate")) return false;
        } else if (strcmp(key, "rhs_dilate") == 0) {
            if (!parse_x_list(p, rd, &n_rd, "rhs_dilate")) return false;
        } else if (strcmp(key, "rhs_reversal") == 0) {
            if (!parse_x_list(p, rev, &n_rev, "rhs_reversal")) return false;
        } else if (strcmp(key, "pad") == 0) {
            n_pad = 0;
            do {
                if (n_pad == GS_MAX_RANK) return FAIL(p, "too many dimensions in window pad");
                if (!parse_int(p, &lo[n_pad], "a low padding")) return false;
                if (cur(p) != '_') return FAIL(p, "expected '_' in window pad, found %s", found(p));
                adv(p);
                if (!parse_int(p, &hi[n_pad], "a high padding")) return false;
                n_pad++;
            } while (cur(p) == 'x' && (adv(p), true));
        } else {
            return fail_at(p, ksp, "unknown window field '%s'", key);
        }
    }
    if (n_size < 0 && (n_stride >= 0 || n_pad >= 0 || n_ld >= 0 || n_rd >= 0 || n_rev >= 0))
        return fail_at(p, sp, "window has no size");
    int n = n_size < 0 ? 0 : n_size;
    const int counts[] = {n_stride, n_pad, n_ld, n_rd, n_rev};
    for (int i = 0; i < 5; i++)
        if (counts[i] >= 0 && counts[i] != n)
            return fail_at(p, sp, "window fields have different numbers of dimensions (%d vs %d)",
                           counts[i], n);
    w->n = n;
    w->dims = GS_NEW_ARRAY(p->a, gs_window_dim, n ? n : 1);
    if (!w->dims) return oom(p);
    for (int i = 0; i < n; i++) {
        gs_window_dim *d = &w->dims[i];
        d->size = size[i];
        d->stride = n_stride >= 0 ? stride[i] : 1;
        d->pad_lo = n_pad >= 0 ? lo[i] : 0;
        d->pad_hi = n_pad >= 0 ? hi[i] : 0;
        d->lhs_dilate = n_ld >= 0 ? ld[i] : 1;
        d->rhs_dilate = n_rd >= 0 ? rd[i] : 1;
        d->reversal = n_rev >= 0 ? rev[i] != 0 : false;
        if (d->size < 0 || d->stride < 1 || d->lhs_dilate < 1 || d->rhs_dilate < 1)
            return fail_at(p, sp, "window dimension %d has a non-positive size, stride or dilation", i);
    }
    at->u.window = w;
    return true;
}

/* dim_labels=b01f_01io->b01f */
static bool parse_conv_dims(parser *p, gs_attr *at) {
    skip_ws(p);
    gs_span sp = here(p);
    size_t start = p->pos;
    while (isalnum((unsigned char)cur(p)) || cur(p) == '_' || cur(p) == '-' || cur(p) == '>') adv(p);
    const char *t = p->s + start;
    size_t n = p->pos - start;
    const char *us = memchr(t, '_', n);
    const char *ar = NULL;
    for (size_t i = 0; i + 1 < n; i++)
        if (t[i] == '-' && t[i + 1] == '>') ar = t + i;
    if (!us || !ar || ar < us)
        return fail_at(p, sp, "expected dim_labels like b01f_01io->b01f");
    gs_conv_dims *c = GS_NEW(p->a, gs_conv_dims);
    if (!c) return oom(p);
    const char *parts[3] = {t, us + 1, ar + 2};
    int lens[3] = {(int)(us - t), (int)(ar - us - 1), (int)(t + n - ar - 2)};
    const char *letters[3] = {"bf", "io", "bf"};
    int nsp[3] = {0, 0, 0};
    int64_t sp_pos[3][GS_MAX_RANK];
    int64_t a_pos[3] = {-1, -1, -1}, b_pos[3] = {-1, -1, -1};
    for (int k = 0; k < 3; k++) {
        if (lens[k] > GS_MAX_RANK) return fail_at(p, sp, "dim_labels too long");
        for (int i = 0; i < GS_MAX_RANK; i++) sp_pos[k][i] = -1;
        for (int i = 0; i < lens[k]; i++) {
            char ch = parts[k][i];
            if (ch == letters[k][0] && a_pos[k] < 0) {
                a_pos[k] = i;
            } else if (ch == letters[k][1] && b_pos[k] < 0) {
                b_pos[k] = i;
            } else if (isdigit((unsigned char)ch) && sp_pos[k][ch - '0'] < 0) {
                sp_pos[k][ch - '0'] = i;
                nsp[k]++;
            } else {
                return fail_at(p, sp, "bad character '%c' in dim_labels", ch);
            }
        }
        if (a_pos[k] < 0 || b_pos[k] < 0)
            return fail_at(p, sp, "dim_labels part %d lacks '%c' or '%c'", k + 1, letters[k][0],
                           letters[k][1]);
        for (int i = 0; i < nsp[k]; i++)
            if (sp_pos[k][i] < 0) return fail_at(p, sp, "dim_labels spatial dims are not 0..%d", nsp[k] - 1);
    }
    if (nsp[0] != nsp[1] || nsp[1] != nsp[2])
        return fail_at(p, sp, "dim_labels parts have different numbers of spatial dims");
    int ns = nsp[0];
    c->n_spatial = ns;
    c->in_rank = lens[0];
    c->k_rank = lens[1];
    c->out_rank = lens[2];
    c->in_batch = a_pos[0];
    c->in_feature = b_pos[0];
    c->k_in_feature = a_pos[1];
    c->k_out_feature = b_pos[1];
    c->out_batch = a_pos[2];
    c->out_feature = b_pos[2];
    c->in_spatial = GS_NEW_ARRAY(p->a, int64_t, ns ? ns : 1);
    c->k_spatial = GS_NEW_ARRAY(p->a, int64_t, ns ? ns : 1);
    c->out_spatial = GS_NEW_ARRAY(p->a, int64_t, ns ? ns : 1);
    if (!c->in_spatial || !c->k_spatial || !c->out_spatial) return oom(p);
    for (int i = 0; i < ns; i++) {
        c->in_spatial[i] = sp_pos[0][i];
        c->k_spatial[i] = sp_pos[1][i];
        c->out_spatial[i] = sp_pos[2][i];
    }
    at->u.conv = c;
    return true;
}

/* padding=lo_hi[_interior]x... */
static bool parse_padding(parser *p, gs_attr *at) {
    skip_ws(p);
    gs_padding *pd = GS_NEW(p->a, gs_padding);
    if (!pd) return oom(p);
    gs_pad_dim dims[GS_MAX_RANK];
    int n = 0;
    if (cur(p) == '-' || isdigit((unsigned char)cur(p))) {
        do {
            if (n == GS_MAX_RANK) return FAIL(p, "too many dimensions in padding");
            dims[n].interior = 0;
            if (!parse_int(p, &dims[n].lo, "a low padding")) return false;
            if (cur(p) != '_') return FAIL(p, "expected '_' in padding, found %s", found(p));
            adv(p);
            if (!parse_int(p, &dims[n].hi, "a high padding")) return false;
            if (cur(p) == '_') {
                adv(p);
                if (!parse_int(p, &dims[n].interior, "an interior padding")) return false;
                if (dims[n].interior < 0) return FAIL(p, "interior padding must not be negative");
            }
            n++;
        } while (cur(p) == 'x' && (adv(p), true));
    }
    pd->n = n;
    pd->dims = gs_arena_memdup(p->a, dims, sizeof(gs_pad_dim) * (size_t)(n ? n : 1));
    if (!pd->dims) return oom(p);
    at->u.padding = pd;
    return true;
}

static bool parse_groups(parser *p, gs_attr *at) {
    gs_replica_groups *g = GS_NEW(p->a, gs_replica_groups);
    if (!g) return oom(p);
    at->u.groups = g;
    skip_ws(p);
    gs_span sp = here(p);
    if (cur(p) == '[') {
        /* Iota form: [G,S]<=[dims](T(perm))? */
        gs_ints shape;
        if (!parse_int_list(p, &shape, '[', ']', "to start replica_groups")) return false;
        skip_ws(p);
        if (!(cur(p) == '<' && ahead(p, 1) == '=')) return FAIL(p, "expected '<=' in replica_groups");
        advn(p, 2);
        gs_iota_list il;
        int64_t total;
        size_t used;
        gs_status st =
            gs_iota_list_parse(p->s + p->pos, p->len - p->pos, here(p), &il, &total, &used, p->d);
        if (st != GS_OK) {
            p->failed = true;
            return false;
        }
        advn(p, used);
        if (shape.n != 2) return fail_at(p, sp, "iota replica_groups need [groups,group_size]");
        bool holds = shape.v[0] >= 0 && shape.v[1] > 0 && shape.v[0] <= total / shape.v[1] &&
                     shape.v[0] * shape.v[1] == total;
        if (holds && total > INT32_MAX)
            return fail_at(p, sp, "replica_groups list %lld devices; at most %d are supported",
                           (long long)total, INT32_MAX);
        if (!holds)
            return fail_at(p, sp, "replica_groups [%lld,%lld] do not hold the %lld devices of the iota",
                           (long long)shape.v[0], (long long)shape.v[1], (long long)total);
        g->is_iota = true;
        g->n_groups = (int)shape.v[0];
        g->group_size = (int)shape.v[1];
        g->n_iota_dims = il.n_reshape;
        g->iota_dims = gs_arena_memdup(p->a, il.reshape, sizeof *il.reshape * (size_t)il.n_reshape);
        g->perm = il.transposed
                      ? gs_arena_memdup(p->a, il.perm, sizeof *il.perm * (size_t)il.n_reshape)
                      : NULL;
        if (!g->iota_dims || (il.transposed && !g->perm)) return oom(p);
        return true;
    }
    if (!expect(p, '{', "to start replica_groups")) return false;
    gs_vec groups, sizes;
    gs_vec_init(&groups, sizeof(int64_t *));
    gs_vec_init(&sizes, sizeof(int));
    bool ok = true;
    if (!accept(p, '}')) {
        do {
            gs_ints one;
            if (!(ok = parse_int_list(p, &one, '{', '}', "to start a replica group"))) break;
            int sz = one.n;
            int64_t *v = (int64_t *)one.v;
            if (gs_vec_push(&groups, &v) != GS_OK || gs_vec_push(&sizes, &sz) != GS_OK) {
                ok = oom(p);
                break;
            }
        } while (accept(p, ','));
        if (ok) ok = expect(p, '}', "to close replica_groups");
    }
    if (ok) {
        g->n_groups = (int)groups.n;
        g->groups = gs_arena_memdup(p->a, groups.data, groups.n * sizeof(int64_t *));
        g->sizes = gs_arena_memdup(p->a, sizes.data, sizes.n * sizeof(int));
        if (groups.n && (!g->groups || !g->sizes)) ok = oom(p);
        g->group_size = groups.n ? GS_VEC_AT(&sizes, int, 0) : 0;
        for (size_t i = 0; i < sizes.n; i++)
            if (GS_VEC_AT(&sizes, int, i) != g->group_size) g->group_size = -1;
    }
    gs_vec_free(&groups);
    gs_vec_free(&sizes);
    return ok;
}

static bool parse_pairs(parser *p, gs_attr *at) {
    if (!expect(p, '{', "to start source_target_pairs")) return false;
    gs_vec v;
    gs_vec_init(&v, sizeof(int64_t[2]));
    bool ok = true;
    if (!accept(p, '}')) {
        do {
            int64_t pr[2];
            ok = expect(p, '{', "to start a source-target pair") &&
                 parse_int(p, &pr[0], "a source device") && expect(p, ',', "in a pair") &&
                 parse_int(p, &pr[1], "a target device") && expect(p, '}', "to close a pair");
            if (ok && gs_vec_push(&v, pr) != GS_OK) ok = oom(p);
        } while (ok && accept(p, ','));
        if (ok) ok = expect(p, '}', "to close source_target_pairs");
    }
    if (ok) {
        at->u.pairs.n = (int)v.n;
        at->u.pairs.v = gs_arena_memdup(p->a, v.data, v.n * sizeof(int64_t[2]));
        if (v.n && !at->u.pairs.v) ok = oom(p);
    }
    gs_vec_free(&v);
    return ok;
}

/* Records that attribute number p->attr_index of the current instruction calls `name`; the
 * attribute's final address is known once the instruction's attributes are sorted. */
static bool add_comp_fixup(parser *p, int index, const char *name, gs_span sp) {
    comp_fixup f = {NULL, p->attr_index, index, name, sp};
    return gs_vec_push(&p->pending, &f) == GS_OK ? true : oom(p);
}

static bool parse_comps(parser *p, gs_attr *at) {
    gs_vec names, spans;
    gs_vec_init(&names, sizeof(const char *));
    gs_vec_init(&spans, sizeof(gs_span));
    bool ok = true;
    if (accept(p, '{')) {
        at->braced = true;
        if (!accept(p, '}')) {
            do {
                const char *nm;
                gs_span sp;
                if (!(ok = parse_name(p, &nm, &sp, "a computation name"))) break;
                if (gs_vec_push(&names, &nm) != GS_OK || gs_vec_push(&spans, &sp) != GS_OK) {
                    ok = oom(p);
                    break;
                }
            } while (accept(p, ','));
            if (ok) ok = expect(p, '}', "to close the computation list");
        }
    } else {
        const char *nm;
        gs_span sp;
        ok = parse_name(p, &nm, &sp, "a computation name");
        if (ok && (gs_vec_push(&names, &nm) != GS_OK || gs_vec_push(&spans, &sp) != GS_OK))
            ok = oom(p);
    }
    if (ok) {
        at->u.comps.n = (int)names.n;
        at->u.comps.v = GS_NEW_ARRAY(p->a, gs_computation *, names.n ? names.n : 1);
        if (!at->u.comps.v) ok = oom(p);
        for (size_t i = 0; ok && i < names.n; i++)
            ok = add_comp_fixup(p, (int)i, GS_VEC_AT(&names, const char *, i),
                                GS_VEC_AT(&spans, gs_span, i));
    }
    gs_vec_free(&names);
    gs_vec_free(&spans);
    return ok;
}

static bool parse_attr_value(parser *p, gs_attr *at) {
    gs_attr_kind kind = at->key == GS_ATTR_UNKNOWN ? GS_AK_RAW : gs_attr_kind_of(at->key);
    skip_ws(p);
    switch (kind) {
    case GS_AK_INT: return parse_int(p, &at->u.i, "an integer");
    case GS_AK_INTS: return parse_int_list(p, &at->u.ints, '{', '}', "to start the list");
    case GS_AK_BOOL:
        if (accept_word(p, "true")) {
            at->u.b = true;
            return true;
        }
        if (accept_word(p, "false")) {
            at->u.b = false;
            return true;
        }
        return FAIL(p, "expected true or false, found %s", found(p));
    case GS_AK_FLOAT: {
        const char *start = p->s + p->pos;
        char *end;
        at->u.f = strtod(start, &end);
        if (end == start) return FAIL(p, "expected a number, found %s", found(p));
        advn(p, (size_t)(end - start));
        return true;
    }
    case GS_AK_IDENT: return parse_word(p, &at->u.s, "a word");
    case GS_AK_STRING: return parse_string(p, &at->u.s);
    case GS_AK_COMP: {
        const char *nm;
        gs_span sp;
        return parse_name(p, &nm, &sp, "a computation name") && add_comp_fixup(p, -1, nm, sp);
    }
    case GS_AK_COMPS: return parse_comps(p, at);
    case GS_AK_SLICE: return parse_slice(p, at);
    case GS_AK_WINDOW: return parse_window(p, at);
    case GS_AK_CONV_DIMS: return parse_conv_dims(p, at);
    case GS_AK_PADDING: return parse_padding(p, at);
    case GS_AK_GROUPS: return parse_groups(p, at);
    case GS_AK_PAIRS: return parse_pairs(p, at);
    case GS_AK_SHARDING: {
        gs_span sp = here(p);
        const char *text;
        if (!parse_raw(p, &text)) return false;
        gs_sharding *sh;
        if (gs_sharding_parse(p->a, text, strlen(text), &sh, p->d, sp) != GS_OK) {
            p->failed = true;
            return false;
        }
        at->u.sharding = sh;
        return true;
    }
    case GS_AK_RAW: return parse_raw(p, &at->u.s);
    }
    return FAIL(p, "internal: unhandled attribute kind");
}


/* ------------------------------------------------------------------ instructions */

/* The opcode at the cursor (XLA's generic async spelling `<op>-start` / `-update` / `-done`
 * included: it sets in->op_text); its span in *op_span. */
static bool parse_opcode(parser *p, gs_instr *in, gs_span *op_span) {
    const char *opname;
    skip_ws(p);
    *op_span = here(p);
    if (!parse_word(p, &opname, "an opcode")) return false;
    int op = gs_op_from_name(opname, strlen(opname));
    if (op < 0) {
        size_t n = strlen(opname);
        static const char *const suffix[3] = {"-start", "-update", "-done"};
        static const gs_opcode async_ops[3] = {GS_OP_ASYNC_START, GS_OP_ASYNC_UPDATE,
                                               GS_OP_ASYNC_DONE};
        for (int k = 0; k < 3 && op < 0; k++) {
            size_t sl = strlen(suffix[k]);
            if (n > sl && strcmp(opname + n - sl, suffix[k]) == 0 &&
                gs_op_from_name(opname, n - sl) >= 0) {
                op = (int)async_ops[k];
                in->op_text = opname;
            }
        }
        if (op < 0) return fail_at(p, *op_span, "unknown opcode '%s'", opname);
    }
    in->op = (gs_opcode)op;
    return true;
}

/* What stands between the opcode's parentheses (after the '('): a constant's literal, a
 * parameter's number, or operand names (each optionally after its shape) pushed to refs. */
static bool parse_operands(parser *p, gs_instr *in, gs_span name_span, gs_span op_span,
                           gs_vec *refs) {
    bool ok = true;
    if (in->op == GS_OP_CONSTANT && !in->shape) {
        ok = fail_at(p, op_span,
                     "constant '%s' has no shape: its literal needs one, as in "
                     "`f32[2] constant({1, 2})`",
                     in->name);
    } else if (in->op == GS_OP_CONSTANT) {
        ok = parse_literal(p, in->shape, &in->literal) && expect(p, ')', "after the constant");
    } else if (in->op == GS_OP_PARAMETER) {
        ok = parse_int(p, &in->parameter_number, "a parameter number") &&
             expect(p, ')', "after the parameter number");
        if (ok && in->parameter_number < 0) ok = fail_at(p, name_span, "negative parameter number");
    } else if (!accept(p, ')')) {
        do {
            if (at_shape(p)) {
                gs_shape *ignored;
                if (!(ok = parse_shape(p, &ignored))) break;
            }
            operand_ref r;
            if (!(ok = parse_name(p, &r.name, &r.span, "an operand name"))) break;
            if (gs_vec_push(refs, &r) != GS_OK) {
                ok = oom(p);
                break;
            }
        } while (accept(p, ','));
        if (ok) ok = expect(p, ')', "to close the operand list");
    }
    return ok;
}

/* The `, name=value` attributes after the operands, pushed to attrs in written order. */
static bool parse_attrs(parser *p, gs_vec *attrs) {
    bool ok = true;
    while (ok && peek(p) == ',') {
        /* A ',' followed by something that is not `name=` ends the instruction (a computation's
         * `}, execution_thread=` is handled by the caller; here it cannot occur). */
        adv(p);
        gs_attr at;
        memset(&at, 0, sizeof at);
        gs_span asp;
        const char *an;
        skip_ws(p);
        asp = here(p);
        size_t start = p->pos;
        while (is_name_char(cur(p))) adv(p);
        if (p->pos == start) {
            ok = FAIL(p, "expected an attribute name, found %s", found(p));
            break;
        }
        an = gs_arena_strndup(p->a, p->s + start, p->pos - start);
        if (!an) {
            ok = oom(p);
            break;
        }
        if (!(ok = expect(p, '=', "after the attribute name"))) break;
        at.key = gs_attr_from_name(an, strlen(an));
        at.name = at.key == GS_ATTR_UNKNOWN ? an : gs_attr_name(at.key);
        for (size_t i = 0; i < attrs->n; i++)
            if (strcmp(GS_VEC_AT(attrs, gs_attr, i).name, an) == 0) {
                ok = fail_at(p, asp, "attribute '%s' given twice", an);
                break;
            }
        if (!ok) break;
        p->attr_index = (int)attrs->n;
        if (!(ok = parse_attr_value(p, &at))) break;
        if (gs_vec_push(attrs, &at) != GS_OK) ok = oom(p);
    }
    return ok;
}

/* Stores attrs in in->attrs in canonical order and points the instruction's pending
 * computation references (which index into attrs) at their final attributes. */
static bool place_attrs(parser *p, gs_instr *in, const gs_vec *attrs) {
    bool ok = true;
    /* Stable insertion sort into canonical order; comp fixups point into the vector, so
     * sort first and copy into the arena, then re-point the fixups. */
    gs_attr *v = attrs->data;
    int n = (int)attrs->n;
    int order[256];
    int *ord = n <= 256 ? order : malloc(sizeof(int) * (size_t)n);
    if (!ord) ok = oom(p);
    for (int i = 0; ok && i < n; i++) {
        int j = i;
        while (j > 0 && gs_attr_print_rank(v[ord[j - 1]].key) > gs_attr_print_rank(v[i].key)) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = i;
    }
    if (ok) {
        in->n_attrs = n;
        in->attrs = GS_NEW_ARRAY(p->a, gs_attr, n ? n : 1);
        if (!in->attrs) ok = oom(p);
        for (int i = 0; ok && i < n; i++) in->attrs[i] = v[ord[i]];
        /* Point this instruction's computation references at their final attributes. */
        for (size_t f = 0; ok && f < p->pending.n; f++) {
            comp_fixup fx = GS_VEC_AT(&p->pending, comp_fixup, f);
            for (int i = 0; i < n; i++)
                if (ord[i] == fx.attr_index) fx.attr = &in->attrs[i];
            if (gs_vec_push(&p->fixups, &fx) != GS_OK) ok = oom(p);
        }
    }
    if (ord != order) free(ord);
    return ok;
}

static bool parse_instruction(parser *p, gs_computation *c, gs_vec *refs_per_instr,
                              gs_strmap *names) {
    gs_instr *in = GS_NEW(p->a, gs_instr);
    if (!in) return oom(p);
    bool is_root = accept_word(p, "ROOT");
    gs_span name_span;
    if (!parse_name(p, &in->name, &name_span, "an instruction name")) return false;
    in->span = name_span;
    if (gs_strmap_get(names, in->name))
        return fail_at(p, name_span, "instruction '%s' is defined twice in computation '%s'",
                       in->name, c->name);
    if (gs_strmap_put(names, in->name, in) != GS_OK) return oom(p);
    if (!expect(p, '=', "after the instruction name")) return false;
    /* The shape may be omitted (`t = tuple(a, b)`): it is then inferred once operands are
     * resolved. */
    if (at_shape(p)) {
        if (!parse_shape(p, &in->shape)) return false;
    } else {
        /* `f31[2]` is a shape with an unknown type, not a shape-less instruction. */
        size_t k = 0;
        while (isalnum((unsigned char)ahead(p, k))) k++;
        if (k > 0 && ahead(p, k) == '[') return FAIL(p, "unknown element type %s", found(p));
    }
    gs_span op_span;
    if (!parse_opcode(p, in, &op_span)) return false;
    if (!expect(p, '(', "after the opcode")) return false;
    gs_vec refs;
    gs_vec_init(&refs, sizeof(operand_ref));
    bool ok = parse_operands(p, in, name_span, op_span, &refs);
    /* Attributes, stored in canonical order. */
    gs_vec attrs;
    gs_vec_init(&attrs, sizeof(gs_attr));
    ok = ok && parse_attrs(p, &attrs);
    ok = ok && place_attrs(p, in, &attrs);
    gs_vec_free(&attrs);
    p->pending.n = 0;
    if (ok) {
        in->n_operands = (int)refs.n;
        in->operands = GS_NEW_ARRAY(p->a, gs_instr *, refs.n ? refs.n : 1);
        operand_ref *rv = GS_NEW_ARRAY(p->a, operand_ref, refs.n ? refs.n : 1);
        if (!in->operands || !rv) ok = oom(p);
        if (ok && refs.n) memcpy(rv, refs.data, refs.n * sizeof(operand_ref));
        if (ok) in->aux = rv; /* resolved at the end of the computation */
        if (ok && gs_vec_push(refs_per_instr, &in) != GS_OK) ok = oom(p);
    }
    gs_vec_free(&refs);
    if (!ok) return false;
    in->is_root = is_root;
    if (is_root) {
        if (c->root) return fail_at(p, name_span, "computation '%s' has two ROOT instructions", c->name);
        c->root = in;
    }
    if (gs_computation_append(c, in) != GS_OK) return oom(p);
    return true;
}

/* ------------------------------------------------------------------ computations */

/* Operands may refer forward, so a computation could be cyclic: reject that here (an iterative
 * depth-first search over operands; O(instructions + operands)). */
static bool check_acyclic(parser *p, gs_computation *c) {
    int n = c->n_instrs;
    unsigned char *state = calloc((size_t)(n ? n : 1), 1); /* 0 new, 1 on the stack, 2 done */
    int *stack = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *next = calloc((size_t)(n ? n : 1), sizeof(int));
    bool ok = state && stack && next;
    if (!ok) oom(p);
    for (int start = 0; ok && start < n; start++) {
        if (state[start]) continue;
        int sp = 0;
        stack[sp++] = start;
        state[start] = 1;
        while (ok && sp > 0) {
            gs_instr *in = c->instrs[stack[sp - 1]];
            if (next[in->id] < in->n_operands) {
                gs_instr *o = in->operands[next[in->id]++];
                if (state[o->id] == 1)
                    ok = fail_at(p, o->span, "instruction '%s' depends on itself (operand cycle through '%s')",
                                 o->name, in->name);
                else if (state[o->id] == 0) {
                    state[o->id] = 1;
                    stack[sp++] = o->id;
                }
            } else {
                state[in->id] = 2;
                sp--;
            }
        }
    }
    free(state);
    free(stack);
    free(next);
    return ok;
}

/* Fills in the shapes of instructions written without one, in order. Called computations must
 * already be known for ops whose shape comes from them (call, while...), so those are resolved
 * by name here. */
static bool infer_missing_shapes(parser *p, gs_computation *c) {
    for (int i = 0; i < c->n_instrs; i++) {
        gs_instr *in = c->instrs[i];
        if (in->shape) continue;
        for (int k = 0; k < in->n_operands; k++)
            if (!in->operands[k]->shape)
                return fail_at(p, in->span, "cannot infer the shape of '%s': operand '%s' has no shape yet",
                               in->name, in->operands[k]->name);
        /* Resolve this instruction's called computations now if they are already defined. */
        for (size_t f = 0; f < p->fixups.n; f++) {
            comp_fixup *fx = &GS_VEC_AT(&p->fixups, comp_fixup, f);
            if (fx->attr < in->attrs || fx->attr >= in->attrs + in->n_attrs) continue;
            gs_computation *callee = gs_strmap_get(&p->comps, fx->name);
            if (!callee) continue;
            if (fx->index < 0) fx->attr->u.comp = callee;
            else fx->attr->u.comps.v[fx->index] = callee;
        }
        if (gs_infer_shape(p->a, in, &in->shape, p->d) != GS_OK) {
            p->failed = true;
            return false;
        }
        if (!in->shape)
            return fail_at(p, in->span, "the shape of %s '%s' cannot be inferred; write it",
                           gs_op_name(in->op), in->name);
    }
    return true;
}

static bool parse_computation(parser *p) {
    bool is_entry = accept_word(p, "ENTRY");
    const char *name;
    gs_span sp;
    if (!parse_name(p, &name, &sp, "a computation name")) return false;
    if (gs_strmap_get(&p->comps, name)) return fail_at(p, sp, "computation '%s' is defined twice", name);
    gs_computation *c = gs_computation_new(p->m, name);
    if (!c) return oom(p);
    c->span = sp;
    c->is_entry = is_entry;
    if (gs_strmap_put(&p->comps, c->name, c) != GS_OK) return oom(p);
    if (is_entry) {
        if (p->m->entry) return fail_at(p, sp, "module has two ENTRY computations");
        p->m->entry = c;
    }
    /* Optional signature: (name: shape, ...) -> shape */
    if (peek(p) == '(') {
        adv(p);
        if (!accept(p, ')')) {
            do {
                const char *pn;
                gs_shape *ps;
                if (!parse_name(p, &pn, NULL, "a parameter name") ||
                    !expect(p, ':', "after a parameter name") || !parse_shape(p, &ps))
                    return false;
            } while (accept(p, ','));
            if (!expect(p, ')', "to close the parameter list")) return false;
        }
        skip_ws(p);
        if (!(cur(p) == '-' && ahead(p, 1) == '>')) return FAIL(p, "expected '->' after the parameters, found %s", found(p));
        advn(p, 2);
        gs_shape *rs;
        if (!parse_shape(p, &rs)) return false;
    }
    if (!expect(p, '{', "to start the computation body")) return false;
    gs_vec instrs;
    gs_vec_init(&instrs, sizeof(gs_instr *));
    gs_strmap names = {0};
    bool ok = true;
    while (ok && peek(p) != '}') {
        if (p->pos >= p->len) {
            ok = FAIL(p, "expected '}' to close computation '%s' (opened at line %u), found end of file",
                      name, sp.line);
            break;
        }
        ok = parse_instruction(p, c, &instrs, &names);
    }
    if (ok) adv(p); /* '}' */
    /* Resolve operands. */
    for (size_t i = 0; ok && i < instrs.n; i++) {
        gs_instr *in = GS_VEC_AT(&instrs, gs_instr *, i);
        operand_ref *rv = in->aux;
        for (int k = 0; ok && k < in->n_operands; k++) {
            gs_instr *o = gs_strmap_get(&names, rv[k].name);
            if (!o) ok = fail_at(p, rv[k].span, "unknown operand '%s' in computation '%s'", rv[k].name, name);
            else in->operands[k] = o;
        }
        in->aux = NULL;
    }
    gs_strmap_free(&names);
    gs_vec_free(&instrs);
    if (!ok) return false;
    if (!check_acyclic(p, c)) return false;
    if (!infer_missing_shapes(p, c)) return false;
    if (c->n_instrs == 0) return fail_at(p, sp, "computation '%s' has no instructions", name);
    if (!c->root) c->root = c->instrs[c->n_instrs - 1];
    c->root->is_root = true;
    /* Parameters by number. */
    int64_t n_params = 0;
    for (int i = 0; i < c->n_instrs; i++)
        if (c->instrs[i]->op == GS_OP_PARAMETER && c->instrs[i]->parameter_number + 1 > n_params)
            n_params = c->instrs[i]->parameter_number + 1;
    if (n_params > 100000) return fail_at(p, sp, "computation '%s' has too many parameters", name);
    c->n_params = (int)n_params;
    c->params = GS_NEW_ARRAY(p->a, gs_instr *, n_params ? n_params : 1);
    if (!c->params) return oom(p);
    for (int i = 0; i < c->n_instrs; i++) {
        gs_instr *in = c->instrs[i];
        if (in->op != GS_OP_PARAMETER) continue;
        if (c->params[in->parameter_number])
            return fail_at(p, in->span, "parameter number %lld is used twice in computation '%s'",
                           (long long)in->parameter_number, name);
        c->params[in->parameter_number] = in;
    }
    for (int64_t i = 0; i < n_params; i++)
        if (!c->params[i])
            return fail_at(p, sp, "computation '%s' lacks parameter(%lld)", name, (long long)i);
    /* `}, execution_thread="..."` */
    skip_ws(p);
    if (cur(p) == ',') {
        adv(p);
        if (!accept_word(p, "execution_thread") || !expect(p, '=', "after execution_thread"))
            return FAIL(p, "expected execution_thread= after the computation, found %s", found(p));
        if (!parse_string(p, &c->execution_thread)) return false;
    }
    return true;
}

/* ------------------------------------------------------------------ module */

static bool is_stack_table(parser *p) {
    return accept_word(p, "FileNames") || accept_word(p, "FunctionNames") ||
           accept_word(p, "FileLocations") || accept_word(p, "StackFrames");
}

static bool parse_stack_frames(parser *p) {
    gs_sb sb = {0};
    bool ok = true;
    for (;;) {
        skip_ws(p);
        size_t start = p->pos;
        if (!is_stack_table(p)) break;
        gs_sb_putn(&sb, p->s + start, p->pos - start);
        gs_sb_putc(&sb, '\n');
        while (ok && isdigit((unsigned char)peek(p))) {
            int64_t id;
            const char *val;
            ok = parse_int(p, &id, "an id") && parse_raw(p, &val);
            if (ok) gs_sb_printf(&sb, "%lld %s\n", (long long)id, val);
        }
        if (!ok) break;
    }
    if (ok && sb.len) {
        p->m->stack_frames = gs_arena_strdup(p->a, gs_sb_str(&sb));
        if (!p->m->stack_frames || sb.failed) ok = oom(p);
    }
    gs_sb_free(&sb);
    return ok;
}

static bool parse_computations(parser *p);

static bool parse_module_body(parser *p) {
    skip_ws(p);
    /* XLA also reads a module written without its header (`ENTRY e { ... }`). */
    if (!accept_word(p, "HloModule")) {
        if (!(accept_word(p, "ENTRY") || is_name_start(cur(p)) || cur(p) == '%'))
            return FAIL(p, "expected 'HloModule', found %s", found(p));
        p->pos = 0;
        p->line = 1;
        p->line_start = 0;
        p->m->name = "module";
        return parse_computations(p);
    }
    const char *name;
    if (!parse_name(p, &name, NULL, "a module name")) return false;
    p->m->name = name;
    gs_vec attrs;
    gs_vec_init(&attrs, sizeof(gs_module_attr));
    bool ok = true;
    while (ok && peek(p) == ',') {
        adv(p);
        gs_module_attr ma;
        gs_span asp;
        ok = parse_name(p, &ma.name, &asp, "a module attribute") &&
             expect(p, '=', "after the module attribute name") && parse_raw(p, &ma.text);
        if (!ok) break;
        if (strcmp(ma.name, "num_partitions") == 0 || strcmp(ma.name, "replica_count") == 0) {
            char *end;
            long long v = strtoll(ma.text, &end, 10);
            if (*end || v < 1)
                ok = fail_at(p, asp, "%s must be a positive integer, not '%s'", ma.name, ma.text);
            else if (ma.name[0] == 'n')
                p->m->num_partitions = v;
            else
                p->m->replica_count = v;
        }
        if (ok && gs_vec_push(&attrs, &ma) != GS_OK) ok = oom(p);
    }
    if (ok) {
        p->m->n_attrs = (int)attrs.n;
        p->m->attrs = gs_arena_memdup(p->a, attrs.data, attrs.n * sizeof(gs_module_attr));
        if (attrs.n && !p->m->attrs) ok = oom(p);
    }
    gs_vec_free(&attrs);
    if (!ok || !parse_stack_frames(p)) return false;
    return parse_computations(p);
}

/* computation* to the end of the text, then the module-level checks and name resolution. */
static bool parse_computations(parser *p) {
    while (peek(p) != 0) {
        if (p->failed || !parse_computation(p)) return false;
    }
    if (p->m->n_comps == 0) return FAIL(p, "module '%s' has no computations", p->m->name);
    if (!p->m->entry) {
        p->m->entry = p->m->comps[p->m->n_comps - 1];
        p->m->entry->is_entry = true;
    }
    for (size_t i = 0; i < p->fixups.n; i++) {
        comp_fixup *f = &GS_VEC_AT(&p->fixups, comp_fixup, i);
        gs_computation *c = gs_strmap_get(&p->comps, f->name);
        if (!c) return fail_at(p, f->span, "unknown computation '%s'", f->name);
        if (c == p->m->entry) return fail_at(p, f->span, "the entry computation '%s' cannot be called", f->name);
        if (f->index < 0)
            f->attr->u.comp = c;
        else
            f->attr->u.comps.v[f->index] = c;
    }
    return true;
}

/* A parser at the start of src, allocating in a. */
static void parser_init(parser *p, const gs_source *src, gs_arena *a, gs_diags *d) {
    memset(p, 0, sizeof *p);
    p->src = src;
    p->s = src->text;
    p->len = src->len;
    p->line = 1;
    p->a = a;
    p->d = d;
}

gs_module *gs_parse_module_ex(const gs_source *src, const gs_parse_options *opts, gs_diags *d) {
    gs_module *m = gs_module_new("");
    if (!m) {
        gs_error(d, gs_span_none(), "out of memory");
        return NULL;
    }
    if (opts && opts->fail_alloc_at > 0) {
        /* Count from here so that k indexes the parser's own allocations. */
        m->arena.fail_at = m->arena.n_allocs + opts->fail_alloc_at;
    }
    m->source = src;
    int64_t max_lit =
        opts && opts->max_literal_bytes > 0 ? opts->max_literal_bytes : GS_PARSE_MAX_LITERAL_BYTES;
    if (gs_mlir_detect(src)) {
        /* StableHLO/MLIR text (src/mlir/): read into the same IR */
        if (gs_mlir_read(m, src, max_lit, d) != GS_OK) {
            gs_module_free(m);
            return NULL;
        }
        return m;
    }
    /* A module takes about four bytes of arena per byte of HLO text (MaxText, ResNet): one chunk
     * for it, as gs_mlir_read takes (see gs_arena_reserve) */
    gs_arena_reserve(&m->arena, 6 * src->len);
    parser p;
    parser_init(&p, src, &m->arena, d);
    p.m = m;
    p.max_lit = max_lit;
    gs_vec_init(&p.fixups, sizeof(comp_fixup));
    gs_vec_init(&p.pending, sizeof(comp_fixup));
    bool ok = parse_module_body(&p);
    if (ok && m->arena.failed) ok = oom(&p);
    gs_strmap_free(&p.comps);
    gs_vec_free(&p.fixups);
    gs_vec_free(&p.pending);
    if (!ok) {
        if (!p.failed) gs_error(d, here(&p), "out of memory");
        gs_module_free(m);
        return NULL;
    }
    return m;
}

gs_module *gs_parse_module(const gs_source *src, gs_diags *d) {
    return gs_parse_module_ex(src, NULL, d);
}

gs_status gs_parse_shape(gs_arena *a, const gs_source *src, gs_type default_type,
                         gs_shape **out, gs_diags *d) {
    parser p;
    parser_init(&p, src, a, d);
    skip_ws(&p);
    bool ok = cur(&p) == '[' && default_type != GS_INVALID_TYPE
                  ? parse_array_shape(&p, default_type, out)
                  : parse_shape(&p, out);
    if (ok && (skip_ws(&p), p.pos < p.len)) ok = FAIL(&p, "unexpected %s after the shape", found(&p));
    if (ok && a->failed) ok = oom(&p);
    if (!ok && !p.failed) gs_error(d, here(&p), "out of memory");
    return ok ? GS_OK : GS_ERR;
}
