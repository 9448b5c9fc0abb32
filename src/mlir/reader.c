/*
 * src/mlir/reader.c — reads StableHLO/MLIR text as JAX (`jax.jit(f).lower(...).as_text()`) and
 * stablehlo-opt print it into the same IR the HLO text parser builds (gs_module), so every later
 * stage runs on it unchanged.
 *
 * Grammar read (a subset of MLIR's, growing):
 *   module   := `module` [@name] [`attributes` dict] `{` func* `}` | func*
 *   func     := `func.func` [public|private] @name `(` [%arg `:` type [dict]]* `)`
 *               [`->` (type | `(` type [dict], ... `)`)] [`attributes` dict] `{` op* `}`
 *   op       := [results `=`] (pretty-op | "generic.op"(operands) [<{props}>] [({regions})]
 *               [dict] `:` function-type)
 *   results  := %name[:N] (`,` %name[:N])*        uses: %name, %name#i
 * Functions become computations (the entry is @main, else the only function); `call @f` becomes
 * a `call` instruction; regions (reduce bodies, scatter combiners) become computations whose
 * block arguments are parameters and whose `stablehlo.return` is the root; values with several
 * results are tuples read through get-tuple-element. Types map to gs_shape, `dense<...>`
 * literals to constant data in gspmd's storage (hex strings are little-endian raw bytes, i1 one
 * byte per element, like gspmd's pred). Each op maps to the opcode and attributes the HLO parser
 * would produce for the same op. `loc(...)` is skipped. Anything not read yet is one located
 * error, never a crash.
 */
#include "mlir/mlir.h"

#include "base/internal.h"
#include "gspmd/builder.h"
#include "gspmd/numeric.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ state */

/* One named SSA value in scope. */
typedef struct value_ent {
    const char *name; /* without the `%`, NUL-terminated (arena) */
    gs_instr *in;     /* its instruction (a tuple when it has several results) */
    int n_results;    /* results it names (`%0:2` → 2), 1 otherwise */
} value_ent;

/* A key = value of an op's attributes, flattened (`#stablehlo.dot<a = [1]>` gives key a). */
typedef struct kv {
    const char *key; /* attribute name (arena) */
    int n_a, n_b;    /* integers of the value (`[1, 2]`, `3`, `array<i64: 1>`), and after ` x ` */
    int64_t a[GS_MAX_RANK], b[GS_MAX_RANK];
    bool is_int;          /* a single integer (or bool: 0/1) */
    const char *ident;    /* a bare word value (`EQ`, `true`), or NULL */
    size_t dense_pos;     /* a `dense<` value: position of `dense` (0 when none) */
    gs_shape *dense_type; /* its type */
} kv;

typedef struct reader {
    const gs_source *src;
    const char *s;   /* the text */
    size_t len;      /* its length */
    size_t pos;      /* cursor */
    size_t span_off; /* position whose line/col span_line/span_col cache */
    uint32_t span_line, span_col;
    gs_module *m;      /* module being built */
    gs_arena *a;       /* its arena */
    gs_diags *d;       /* diagnostics */
    bool failed;       /* an error was reported */
    gs_names names;    /* instruction and computation names */
    gs_vec values;     /* value_ent, the values in scope */
    size_t scope;      /* values[scope..] are the current region's */
    gs_strmap funcs;   /* function name → gs_computation (declared or defined) */
    gs_strmap defined; /* function name → (void *)1 once its body is read */
    gs_vec funcs_list; /* gs_computation *, every function in order of first mention */
    gs_builder b;      /* appends to the computation being read */
} reader;

/* ------------------------------------------------------------------ errors and positions */

static gs_span span_at(reader *r, size_t off) {
    if (off < r->span_off) {
        r->span_off = 0;
        r->span_line = 1;
        r->span_col = 1;
    }
    for (; r->span_off < off && r->span_off < r->len; r->span_off++) {
        if (r->s[r->span_off] == '\n') {
            r->span_line++;
            r->span_col = 1;
        } else {
            r->span_col++;
        }
    }
    gs_span sp = {r->src, r->span_line, r->span_col};
    return sp;
}

__attribute__((format(printf, 3, 4))) static bool fail_at(reader *r, size_t off, const char *fmt,
                                                          ...) {
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        gs_verror(r->d, span_at(r, off), fmt, ap);
        va_end(ap);
        r->failed = true;
    }
    return false;
}

#define FAIL(r, ...) fail_at((r), (r)->pos, __VA_ARGS__)

static bool oom(reader *r) { return FAIL(r, "out of memory"); }

/* ------------------------------------------------------------------ lexing */

static char cur(const reader *r) { return r->pos < r->len ? r->s[r->pos] : 0; }
static char ahead(const reader *r, size_t k) { return r->pos + k < r->len ? r->s[r->pos + k] : 0; }

static bool is_id_char(char c) {
    return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.';
}

/* Skips balanced brackets starting at an opening one (strings respected). */
static bool skip_balanced(reader *r) {
    int depth = 0;
    size_t start = r->pos;
    while (r->pos < r->len) {
        char c = r->s[r->pos];
        if (c == '"') {
            for (r->pos++; r->pos < r->len && r->s[r->pos] != '"'; r->pos++)
                if (r->s[r->pos] == '\\') r->pos++;
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
    return fail_at(r, start, "unbalanced brackets");
}

/* Skips whitespace, `//` comments and `loc(...)` locations. */
static void skip_ws(reader *r) {
    for (;;) {
        char c = cur(r);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            r->pos++;
        } else if (c == '/' && ahead(r, 1) == '/') {
            while (r->pos < r->len && r->s[r->pos] != '\n') r->pos++;
        } else if (c == 'l' && r->pos + 4 <= r->len && memcmp(r->s + r->pos, "loc(", 4) == 0 &&
                   (r->pos == 0 || !is_id_char(r->s[r->pos - 1]))) {
            r->pos += 3;
            if (!skip_balanced(r)) return;
        } else {
            return;
        }
    }
}

static char peek(reader *r) {
    skip_ws(r);
    return cur(r);
}

static bool accept(reader *r, char c) {
    if (peek(r) != c) return false;
    r->pos++;
    return true;
}

/* A short description of what is at the cursor. */
static const char *found(reader *r) {
    skip_ws(r);
    if (r->pos >= r->len) return "end of file";
    size_t n = 0;
    const char *t = r->s + r->pos;
    if (is_id_char(t[0]) || t[0] == '%' || t[0] == '@' || t[0] == '"') {
        n = 1;
        while (n < 32 && r->pos + n < r->len && (is_id_char(t[n]) || t[n] == '#')) n++;
    } else {
        n = 1;
    }
    char *q = gs_arena_printf(r->a, "'%.*s'", (int)n, t);
    return q ? q : "?";
}

static bool expect(reader *r, char c, const char *context) {
    if (accept(r, c)) return true;
    return FAIL(r, "expected '%c' %s, found %s", c, context, found(r));
}

/* A bare identifier at the cursor (letters, digits, `_`, `$`, `.`): its length, 0 if none. */
static size_t ident_len(reader *r) {
    skip_ws(r);
    size_t n = 0;
    if (!(isalpha((unsigned char)cur(r)) || cur(r) == '_')) return 0;
    while (r->pos + n < r->len && is_id_char(r->s[r->pos + n])) n++;
    return n;
}

/* Is the next identifier exactly w? */
static bool at_word(reader *r, const char *w) {
    size_t n = ident_len(r);
    return n == strlen(w) && memcmp(r->s + r->pos, w, n) == 0;
}

static bool accept_word(reader *r, const char *w) {
    if (!at_word(r, w)) return false;
    r->pos += strlen(w);
    return true;
}

static bool parse_ident(reader *r, const char **out, const char *what) {
    size_t n = ident_len(r);
    if (!n) return FAIL(r, "expected %s, found %s", what, found(r));
    *out = gs_arena_strndup(r->a, r->s + r->pos, n);
    r->pos += n;
    return *out ? true : oom(r);
}

/* An integer (decimal, optionally negative, or 0x hex). */
static bool parse_int(reader *r, int64_t *v, const char *what) {
    skip_ws(r);
    const char *p = r->s + r->pos;
    char *end;
    errno = 0;
    if (!(isdigit((unsigned char)p[0]) || (p[0] == '-' && isdigit((unsigned char)p[1]))))
        return FAIL(r, "expected %s, found %s", what, found(r));
    long long x = (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) ? (long long)strtoull(p, &end, 16)
                                                                : strtoll(p, &end, 10);
    if (errno) return FAIL(r, "%s out of range", what);
    r->pos += (size_t)(end - p);
    *v = x;
    return true;
}

/* `[1, 2]` (or `[]`) into v (at most GS_MAX_RANK entries). */
static bool parse_int_list(reader *r, int64_t *v, int *n, const char *what) {
    *n = 0;
    if (!expect(r, '[', what)) return false;
    if (accept(r, ']')) return true;
    do {
        if (*n >= GS_MAX_RANK) return FAIL(r, "too many entries in %s", what);
        if (!parse_int(r, &v[(*n)++], what)) return false;
    } while (accept(r, ','));
    return expect(r, ']', what);
}

/* A `"..."` string, unescaped into the arena. */
static bool parse_string(reader *r, const char **out) {
    if (peek(r) != '"') return FAIL(r, "expected a string, found %s", found(r));
    size_t start = ++r->pos;
    gs_sb sb = {0};
    while (r->pos < r->len && r->s[r->pos] != '"') {
        char c = r->s[r->pos++];
        if (c == '\\' && r->pos < r->len) {
            char e = r->s[r->pos++];
            if (isxdigit((unsigned char)e) && isxdigit((unsigned char)cur(r))) {
                char hex[3] = {e, cur(r), 0};
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
        return fail_at(r, start - 1, "unterminated string");
    }
    r->pos++;
    *out = gs_arena_strdup(r->a, gs_sb_str(&sb));
    bool bad = sb.failed;
    gs_sb_free(&sb);
    return (*out && !bad) ? true : oom(r);
}

/* `@name` or `@"name"`. */
static bool parse_symbol(reader *r, const char **out) {
    if (!accept(r, '@')) return FAIL(r, "expected a symbol (@name), found %s", found(r));
    if (cur(r) == '"') return parse_string(r, out);
    size_t n = 0;
    while (r->pos + n < r->len && (is_id_char(r->s[r->pos + n]) || r->s[r->pos + n] == '-')) n++;
    if (!n) return FAIL(r, "expected a symbol name after '@'");
    *out = gs_arena_strndup(r->a, r->s + r->pos, n);
    r->pos += n;
    return *out ? true : oom(r);
}

/* `%name` (and `#i` when allow_index): the name without `%`, the index or -1. */
static bool parse_value_name(reader *r, const char **name, int *index, bool allow_index) {
    if (peek(r) != '%') return FAIL(r, "expected a value (%%name), found %s", found(r));
    size_t start = ++r->pos, n = 0;
    while (r->pos + n < r->len && (is_id_char(r->s[r->pos + n]) || r->s[r->pos + n] == '-')) n++;
    if (!n) return fail_at(r, start - 1, "expected a value name after '%%'");
    *name = gs_arena_strndup(r->a, r->s + r->pos, n);
    if (!*name) return oom(r);
    r->pos += n;
    *index = -1;
    if (allow_index && cur(r) == '#') {
        r->pos++;
        int64_t i;
        if (!parse_int(r, &i, "a result index") || i < 0 || i > 1 << 20)
            return fail_at(r, start, "bad result index");
        *index = (int)i;
    }
    return true;
}

/* ------------------------------------------------------------------ types */

/* An MLIR element type spelled s[0..n), or GS_INVALID_TYPE. */
static gs_type element_type(const char *s, size_t n) {
    static const struct {
        const char *name;
        gs_type t;
    } TYPES[] = {
        {"i1", GS_PRED},
        {"i2", GS_S2},
        {"i4", GS_S4},
        {"i8", GS_S8},
        {"i16", GS_S16},
        {"i32", GS_S32},
        {"i64", GS_S64},
        {"si2", GS_S2},
        {"si4", GS_S4},
        {"si8", GS_S8},
        {"si16", GS_S16},
        {"si32", GS_S32},
        {"si64", GS_S64},
        {"ui2", GS_U2},
        {"ui4", GS_U4},
        {"ui8", GS_U8},
        {"ui16", GS_U16},
        {"ui32", GS_U32},
        {"ui64", GS_U64},
        {"f16", GS_F16},
        {"bf16", GS_BF16},
        {"f32", GS_F32},
        {"f64", GS_F64},
        {"complex<f32>", GS_C64},
        {"complex<f64>", GS_C128},
        {"f8E5M2", GS_F8E5M2},
        {"f8E4M3FN", GS_F8E4M3FN},
        {"f8E4M3B11FNUZ", GS_F8E4M3B11FNUZ},
        {"f8E5M2FNUZ", GS_F8E5M2FNUZ},
        {"f8E4M3FNUZ", GS_F8E4M3FNUZ},
        {"f8E4M3", GS_F8E4M3},
        {"f8E3M4", GS_F8E3M4},
        {"f8E8M0FNU", GS_F8E8M0FNU},
        {"f4E2M1FN", GS_F4E2M1FN},
    };
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (strlen(TYPES[i].name) == n && memcmp(TYPES[i].name, s, n) == 0) return TYPES[i].t;
    return GS_INVALID_TYPE;
}

static bool parse_type(reader *r, gs_shape **out);

/* `tensor<2x3xf32>`, `tensor<f32>`, a bare element type (a scalar), `tuple<...>`,
 * `!stablehlo.token`. */
static bool parse_type(reader *r, gs_shape **out) {
    skip_ws(r);
    size_t start = r->pos;
    if (cur(r) == '!') {
        if (r->pos + 16 <= r->len && memcmp(r->s + r->pos, "!stablehlo.token", 16) == 0) {
            r->pos += 16;
            *out = gs_shape_token(r->a);
            return *out ? true : oom(r);
        }
        return FAIL(r, "type %s is not supported yet", found(r));
    }
    if (accept_word(r, "tuple")) {
        gs_shape *el[64];
        int n = 0;
        if (!expect(r, '<', "after 'tuple'")) return false;
        if (!accept(r, '>')) {
            do {
                if (n >= 64) return FAIL(r, "tuple type too long");
                if (!parse_type(r, &el[n++])) return false;
            } while (accept(r, ','));
            if (!expect(r, '>', "closing the tuple type")) return false;
        }
        *out = gs_shape_tuple(r->a, n, el);
        return *out ? true : oom(r);
    }
    bool tensor = accept_word(r, "tensor");
    if (tensor && !expect(r, '<', "after 'tensor'")) return false;
    int64_t dims[GS_MAX_RANK];
    int rank = 0;
    while (tensor && (isdigit((unsigned char)cur(r)) || cur(r) == '?')) {
        if (cur(r) == '?') return FAIL(r, "dynamic dimensions ('?') are not supported yet");
        char *end;
        errno = 0;
        long long v = strtoll(r->s + r->pos, &end, 10);
        if (errno || v < 0) return FAIL(r, "dimension out of range");
        if (rank >= GS_MAX_RANK) return FAIL(r, "tensor rank above %d", GS_MAX_RANK);
        dims[rank++] = v;
        r->pos += (size_t)(end - (r->s + r->pos));
        if (cur(r) != 'x') return FAIL(r, "expected 'x' after a dimension, found %s", found(r));
        r->pos++;
    }
    size_t es = r->pos, n = 0;
    if (cur(r) == '!') return FAIL(r, "element type %s is not supported yet", found(r));
    while (es + n < r->len && isalnum((unsigned char)r->s[es + n])) n++;
    if (n == 7 && memcmp(r->s + es, "complex", 7) == 0 && es + n < r->len && r->s[es + n] == '<') {
        while (es + n < r->len && r->s[es + n] != '>') n++;
        n++;
    }
    gs_type t = element_type(r->s + es, n);
    if (t == GS_INVALID_TYPE) {
        if (!tensor && n == 0) return fail_at(r, start, "expected a type, found %s", found(r));
        return fail_at(r, es, "unknown element type '%.*s'", (int)(n ? n : 1), r->s + es);
    }
    r->pos = es + n;
    if (tensor) {
        if (peek(r) == ',') return FAIL(r, "tensor encodings (bounds) are not supported yet");
        if (!expect(r, '>', "closing the tensor type")) return false;
    }
    *out = gs_shape_array(r->a, t, rank, dims);
    return *out ? true : oom(r);
}

/* `(T, T) -> R`, `(T) -> (R, R)`, or a plain type list `T[, T...]`. Fills ins/outs (up to max
 * each); a plain list gives *n_in = number written and *n_out = -1. */
static bool parse_type_spec(reader *r, gs_shape **ins, int *n_in, gs_shape **outs, int *n_out,
                            int max) {
    *n_in = 0;
    *n_out = -1;
    if (accept(r, '(')) {
        if (!accept(r, ')')) {
            do {
                if (*n_in >= max) return FAIL(r, "too many operand types");
                if (!parse_type(r, &ins[(*n_in)++])) return false;
            } while (accept(r, ','));
            if (!expect(r, ')', "closing the operand types")) return false;
        }
        skip_ws(r);
        if (!(cur(r) == '-' && ahead(r, 1) == '>'))
            return FAIL(r, "expected '->' in a function type, found %s", found(r));
        r->pos += 2;
        *n_out = 0;
        if (accept(r, '(')) {
            if (accept(r, ')')) return true;
            do {
                if (*n_out >= max) return FAIL(r, "too many result types");
                if (!parse_type(r, &outs[(*n_out)++])) return false;
            } while (accept(r, ','));
            return expect(r, ')', "closing the result types");
        }
        *n_out = 1;
        return parse_type(r, &outs[0]);
    }
    do {
        if (*n_in >= max) return FAIL(r, "too many types");
        if (!parse_type(r, &ins[(*n_in)++])) return false;
    } while (accept(r, ','));
    return true;
}

/* ------------------------------------------------------------------ literals */

static int hexval(char c) {
    return isdigit((unsigned char)c) ? c - '0' : (tolower((unsigned char)c) - 'a' + 10);
}

/* One scalar of a dense literal into element i of data (type t). */
static bool parse_scalar(reader *r, void *data, gs_type t, int64_t i) {
    skip_ws(r);
    if (gs_type_is_complex(t)) {
        double re, im;
        if (!expect(r, '(', "opening a complex value")) return false;
        const char *p = r->s + r->pos;
        char *end;
        re = strtod(p, &end);
        if (end == p) return FAIL(r, "expected a number, found %s", found(r));
        r->pos += (size_t)(end - p);
        if (!expect(r, ',', "in a complex value")) return false;
        skip_ws(r);
        p = r->s + r->pos;
        im = strtod(p, &end);
        if (end == p) return FAIL(r, "expected a number, found %s", found(r));
        r->pos += (size_t)(end - p);
        gs_elem_set_c(data, t, i, re, im);
        return expect(r, ')', "closing a complex value");
    }
    if (accept_word(r, "true") || accept_word(r, "false")) {
        bool v = r->s[r->pos - 1] == 'e' && r->s[r->pos - 2] == 'u';
        gs_elem_set_i(data, t, i, v);
        return true;
    }
    const char *p = r->s + r->pos;
    char *end;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        /* integers in hex, or a float's bit pattern */
        uint64_t bits = strtoull(p, &end, 16);
        r->pos += (size_t)(end - p);
        if (gs_type_is_float(t)) {
            int nb = gs_type_size(t);
            memcpy((char *)data + (size_t)i * (size_t)nb, &bits, (size_t)nb);
        } else {
            gs_elem_set_i(data, t, i, (int64_t)bits);
        }
        return true;
    }
    if (gs_type_is_float(t)) {
        errno = 0;
        double v = strtod(p, &end);
        if (end == p) return FAIL(r, "expected a number, found %s", found(r));
        r->pos += (size_t)(end - p);
        gs_elem_set_f(data, t, i, v);
        return true;
    }
    if (!(isdigit((unsigned char)p[0]) || p[0] == '-'))
        return FAIL(r, "expected an integer, found %s", found(r));
    errno = 0;
    if (p[0] == '-' || !gs_type_is_unsigned_int(t)) {
        long long v = strtoll(p, &end, 10);
        if (errno) return FAIL(r, "integer out of range");
        gs_elem_set_i(data, t, i, v);
    } else {
        unsigned long long v = strtoull(p, &end, 10);
        if (errno) return FAIL(r, "integer out of range");
        gs_elem_set_i(data, t, i, (int64_t)v);
    }
    r->pos += (size_t)(end - p);
    return true;
}

/* Nested `[...]` lists of scalars, filled in row-major order. */
static bool parse_nested(reader *r, void *data, gs_type t, int64_t n, int64_t *k) {
    if (accept(r, '[')) {
        if (accept(r, ']')) return true;
        do {
            if (!parse_nested(r, data, t, n, k)) return false;
        } while (accept(r, ','));
        return expect(r, ']', "closing a list of values");
    }
    if (*k >= n) return FAIL(r, "more values than the type's %lld elements", (long long)n);
    return parse_scalar(r, data, t, (*k)++);
}

/* The body of `dense<...>` at the cursor (after `<`) for array shape s: new literal data. */
static bool parse_dense_body(reader *r, const gs_shape *s, gs_literal_ir **out) {
    if (!gs_shape_is_array(s)) return FAIL(r, "a dense literal needs a tensor type");
    if (!gs_type_supported(s->type) || s->type == GS_S2 || s->type == GS_U2 || s->type == GS_S4 ||
        s->type == GS_U4)
        return FAIL(r, "dense literals of %s are not supported yet", gs_type_name(s->type));
    int64_t n = gs_shape_elements(s);
    size_t es = (size_t)gs_type_size(s->type), bytes = (size_t)n * es;
    gs_literal_ir *lit = GS_NEW(r->a, gs_literal_ir);
    if (!lit) return oom(r);
    lit->n_bytes = bytes;
    lit->data = gs_arena_alloc(r->a, bytes ? bytes : 1);
    if (!lit->data) return oom(r);
    size_t start = r->pos;
    if (peek(r) == '"' && ahead(r, 1) == '0' && (ahead(r, 2) == 'x' || ahead(r, 2) == 'X')) {
        r->pos += 3;
        size_t h = r->pos, nh = 0;
        while (h + nh < r->len && isxdigit((unsigned char)r->s[h + nh])) nh++;
        if (h + nh >= r->len || r->s[h + nh] != '"' || nh % 2)
            return fail_at(r, start, "bad hex literal");
        size_t nb = nh / 2;
        if (nb != bytes && nb != es)
            return fail_at(r, start, "hex literal has %zu bytes, the type needs %zu", nb, bytes);
        unsigned char *d = lit->data;
        for (size_t i = 0; i < nb; i++)
            d[i] = (unsigned char)(hexval(r->s[h + 2 * i]) * 16 + hexval(r->s[h + 2 * i + 1]));
        if (nb == es && nb != bytes)
            for (int64_t i = 1; i < n; i++) memcpy(d + (size_t)i * es, d, es);
        r->pos = h + nh + 1;
    } else if (peek(r) == '[') {
        int64_t k = 0;
        if (!parse_nested(r, lit->data, s->type, n, &k)) return false;
        if (k != n)
            return fail_at(r, start, "dense literal has %lld values, the type has %lld",
                           (long long)k, (long long)n);
    } else {
        if (n == 0) return fail_at(r, start, "splat literal of an empty tensor");
        if (!parse_scalar(r, lit->data, s->type, 0)) return false;
        for (int64_t i = 1; i < n; i++) memcpy((char *)lit->data + (size_t)i * es, lit->data, es);
    }
    if (!expect(r, '>', "closing the dense literal")) return false;
    *out = lit;
    return true;
}

/* ------------------------------------------------------------------ values */

static bool define_value(reader *r, const char *name, gs_instr *in, int n_results) {
    value_ent e = {name, in, n_results};
    if (gs_vec_push(&r->values, &e) != GS_OK) return oom(r);
    return true;
}

/* The instruction a use `%name[#i]` names, in the current region. */
static bool lookup_value(reader *r, gs_instr **out) {
    size_t at = (skip_ws(r), r->pos);
    const char *name;
    int index;
    if (!parse_value_name(r, &name, &index, true)) return false;
    for (size_t i = r->values.n; i-- > r->scope;) {
        value_ent *e = &GS_VEC_AT(&r->values, value_ent, i);
        if (strcmp(e->name, name) != 0) continue;
        if (index < 0) {
            if (e->n_results != 1)
                return fail_at(r, at, "value '%%%s' has %d results: name one as %%%s#i", name,
                               e->n_results, name);
            *out = e->in;
            return true;
        }
        if (e->n_results == 1 && index == 0) {
            *out = e->in;
            return true;
        }
        if (index >= e->n_results || !gs_shape_is_tuple(e->in->shape))
            return fail_at(r, at, "value '%%%s' has no result %d", name, index);
        r->b.span = span_at(r, at);
        *out = gs_build_gte(&r->b, e->in, index);
        return *out ? true : oom(r);
    }
    return fail_at(r, at, "use of undefined value '%%%s'", name);
}

/* ------------------------------------------------------------------ attributes */

/* A value after `key =` in a pretty op or an attribute dictionary, into kv (what gspmd does not
 * use is skipped). */
static bool parse_attr_value(reader *r, kv *k);

/* `key = value, ...` up to `close` (the opening bracket already read). Flattens nested
 * `#dialect.attr<k = v>` values. */
static bool parse_kv_list(reader *r, gs_vec *out, char close) {
    if (accept(r, close)) return true;
    do {
        kv k = {0};
        size_t n = ident_len(r);
        if (!n && peek(r) == '"') {
            if (!parse_string(r, &k.key)) return false;
        } else if (!parse_ident(r, &k.key, "an attribute name")) {
            return false;
        }
        if (accept(r, '=')) {
            size_t before = out->n;
            if (peek(r) == '#') {
                /* #stablehlo.scatter<a = [0], b = 1> flattens; #stablehlo<comparison_direction
                 * EQ> is an ident value */
                size_t save = r->pos;
                r->pos++;
                while (r->pos < r->len && is_id_char(r->s[r->pos])) r->pos++;
                if (cur(r) == '<' && ident_len(r) == 0) {
                    r->pos++;
                    size_t inner = r->pos;
                    size_t n1 = ident_len(r);
                    if (n1 && (r->pos += n1, peek(r) == '=')) {
                        r->pos = inner;
                        if (!parse_kv_list(r, out, '>')) return false;
                        (void)before;
                        continue;
                    }
                    r->pos = inner;
                    if (n1) {
                        /* `#stablehlo<comparison_direction EQ>`: the last word is the value */
                        const char *w = NULL;
                        while (ident_len(r)) {
                            if (!parse_ident(r, &w, "a word")) return false;
                        }
                        k.ident = w;
                        if (!expect(r, '>', "closing the attribute")) return false;
                        if (gs_vec_push(out, &k) != GS_OK) return oom(r);
                        continue;
                    }
                }
                r->pos = save;
            }
            if (!parse_attr_value(r, &k)) return false;
        }
        if (gs_vec_push(out, &k) != GS_OK) return oom(r);
    } while (accept(r, ','));
    return expect(r, close, "closing the attributes");
}

/* A `: i64` after a scalar attribute value, when one follows (not an op's `: tensor<..>`). */
static bool skip_scalar_type(reader *r) {
    size_t save = r->pos;
    if (!accept(r, ':')) return true;
    size_t n = ident_len(r);
    if (n && !at_word(r, "tensor") && !at_word(r, "tuple")) {
        r->pos += n;
        return true;
    }
    r->pos = save;
    return true;
}

static bool parse_attr_value(reader *r, kv *k) {
    char c = peek(r);
    if (c == '[') {
        /* [1, 2], [DEFAULT, DEFAULT], [1] x [0] */
        size_t save = r->pos;
        r->pos++;
        if (peek(r) != ']' && !isdigit((unsigned char)peek(r)) && peek(r) != '-') {
            r->pos = save;
            return skip_balanced(r);
        }
        r->pos = save;
        if (!parse_int_list(r, k->a, &k->n_a, "a list of integers")) return false;
        if (at_word(r, "x")) {
            r->pos++;
            if (!parse_int_list(r, k->b, &k->n_b, "a list of integers")) return false;
        }
        return true;
    }
    if (isdigit((unsigned char)c) || c == '-') {
        int64_t v;
        if (!parse_int(r, &v, "an integer")) return false;
        if (cur(r) == '.' || cur(r) == 'e') { /* a float: skip it */
            while (r->pos < r->len && (isalnum((unsigned char)cur(r)) || strchr(".+-", cur(r))))
                r->pos++;
        } else {
            k->is_int = true;
            k->a[0] = v;
            k->n_a = 1;
        }
        return skip_scalar_type(r);
    }
    if (c == '"') {
        const char *s;
        if (!parse_string(r, &s)) return false;
        k->ident = s;
        return skip_scalar_type(r);
    }
    if (at_word(r, "array")) {
        r->pos += 5;
        if (!expect(r, '<', "after 'array'")) return false;
        size_t n = ident_len(r);
        r->pos += n;
        if (accept(r, '>')) return true;
        if (!expect(r, ':', "in an array attribute")) return false;
        if (accept(r, '>')) return true;
        do {
            if (k->n_a >= GS_MAX_RANK) return FAIL(r, "array attribute too long");
            if (accept_word(r, "true")) {
                k->a[k->n_a++] = 1;
            } else if (accept_word(r, "false")) {
                k->a[k->n_a++] = 0;
            } else if (!parse_int(r, &k->a[k->n_a++], "an integer")) {
                return false;
            }
        } while (accept(r, ','));
        return expect(r, '>', "closing the array attribute");
    }
    if (at_word(r, "dense")) {
        k->dense_pos = r->pos;
        r->pos += 5;
        skip_ws(r);
        if (cur(r) != '<') return FAIL(r, "expected '<' after 'dense'");
        if (!skip_balanced(r)) return false;
        if (!expect(r, ':', "after a dense literal")) return false;
        if (!parse_type(r, &k->dense_type)) return false;
        /* an integer list, when it is one */
        if (gs_shape_is_array(k->dense_type) && gs_type_is_int(k->dense_type->type) &&
            k->dense_type->rank <= 1 && gs_shape_elements(k->dense_type) <= GS_MAX_RANK) {
            size_t save = r->pos;
            r->pos = k->dense_pos + 5;
            skip_ws(r);
            r->pos++;
            if (peek(r) == '[') {
                if (!parse_int_list(r, k->a, &k->n_a, "a list of integers")) return false;
            } else if (isdigit((unsigned char)peek(r)) || peek(r) == '-') {
                if (!parse_int(r, &k->a[0], "an integer")) return false;
                k->n_a = 1;
            }
            r->pos = save;
        }
        return true;
    }
    if (c == '#' || c == '{' || c == '<' || c == '(' || c == '@') {
        if (c == '#' || c == '@') {
            r->pos++;
            while (r->pos < r->len && (is_id_char(cur(r)) || cur(r) == '"')) r->pos++;
            if (cur(r) != '<') return true;
        }
        return skip_balanced(r);
    }
    size_t n = ident_len(r);
    if (n) {
        if (!parse_ident(r, &k->ident, "a value")) return false;
        if (strcmp(k->ident, "true") == 0 || strcmp(k->ident, "false") == 0) {
            k->is_int = true;
            k->a[0] = k->ident[0] == 't';
            k->n_a = 1;
        }
        if (peek(r) == '<') return skip_balanced(r);
        return true;
    }
    return FAIL(r, "expected an attribute value, found %s", found(r));
}

static const kv *find_kv(const gs_vec *v, const char *key) {
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(GS_VEC_AT(v, kv, i).key, key) == 0) return &GS_VEC_AT(v, kv, i);
    return NULL;
}

/* ------------------------------------------------------------------ ops */

/* The opcode of stablehlo.NAME (without the dialect), or -1. */
static int opcode_of(const char *name) {
    static const struct {
        const char *mlir;
        gs_opcode op;
    } RENAMES[] = {
        {"broadcast_in_dim", GS_OP_BROADCAST},
        {"dot_general", GS_OP_DOT},
        {"count_leading_zeros", GS_OP_CLZ},
        {"get_tuple_element", GS_OP_GET_TUPLE_ELEMENT},
        {"optimization_barrier", GS_OP_OPTIMIZATION_BARRIER},
    };
    for (size_t i = 0; i < sizeof RENAMES / sizeof RENAMES[0]; i++)
        if (strcmp(RENAMES[i].mlir, name) == 0) return (int)RENAMES[i].op;
    char buf[64];
    size_t n = strlen(name);
    if (n >= sizeof buf) return -1;
    for (size_t i = 0; i <= n; i++) buf[i] = name[i] == '_' ? '-' : name[i];
    int op = gs_op_from_name(buf, n);
    /* ops whose HLO spelling means something else, or that need more than a rename */
    if (op == GS_OP_BROADCAST || op == GS_OP_DOT || op == GS_OP_CUSTOM_CALL || op == GS_OP_CALL ||
        op == GS_OP_PARAMETER || op == GS_OP_CONSTANT || op == GS_OP_FUSION || op == GS_OP_MAP)
        return -1;
    return op;
}

/* Sets attribute key k (INTS) from integers. */
static void set_ints(reader *r, gs_instr *in, gs_attr_key k, int n, const int64_t *v) {
    gs_build_set_ints(&r->b, in, k, n, v);
}

/* The attributes an op's key-value pairs give, named as the HLO parser names them. */
static bool apply_attrs(reader *r, gs_instr *in, const gs_vec *kvs, size_t op_pos) {
    for (size_t i = 0; i < kvs->n; i++) {
        const kv *k = &GS_VEC_AT(kvs, kv, i);
        const char *key = k->key;
        if (in->op == GS_OP_DOT &&
            (strcmp(key, "batching_dims") == 0 || strcmp(key, "contracting_dims") == 0)) {
            bool batch = key[0] == 'b';
            set_ints(r, in, batch ? GS_ATTR_LHS_BATCH_DIMS : GS_ATTR_LHS_CONTRACTING_DIMS, k->n_a,
                     k->a);
            set_ints(r, in, batch ? GS_ATTR_RHS_BATCH_DIMS : GS_ATTR_RHS_CONTRACTING_DIMS, k->n_b,
                     k->b);
            continue;
        }
        static const struct {
            const char *mlir, *hlo;
        } KEYS[] = {
            {"lhs_batching_dimensions", "lhs_batch_dims"},
            {"rhs_batching_dimensions", "rhs_batch_dims"},
            {"lhs_contracting_dimensions", "lhs_contracting_dims"},
            {"rhs_contracting_dimensions", "rhs_contracting_dims"},
            {"broadcast_dimensions", "dimensions"},
            {"permutation", "dimensions"},
            {"comparison_direction", "direction"},
            {"sizes", "dynamic_slice_sizes"},
        };
        for (size_t j = 0; j < sizeof KEYS / sizeof KEYS[0]; j++)
            if (strcmp(key, KEYS[j].mlir) == 0) key = KEYS[j].hlo;
        if (strcmp(key, "dims") == 0 || strcmp(key, "dim") == 0 || strcmp(key, "dimension") == 0 ||
            strcmp(key, "iota_dimension") == 0) {
            if (in->op == GS_OP_IOTA) {
                gs_build_set_int(&r->b, in, GS_ATTR_IOTA_DIMENSION, k->a[0]);
            } else {
                set_ints(r, in, GS_ATTR_DIMENSIONS, k->n_a, k->a);
            }
            continue;
        }
        if (in->op == GS_OP_DYNAMIC_SLICE && strcmp(key, "slice_sizes") == 0)
            key = "dynamic_slice_sizes";
        if (strcmp(key, "direction") == 0 && k->ident) {
            gs_build_set_ident(&r->b, in, GS_ATTR_DIRECTION, k->ident);
            continue;
        }
        if (strcmp(key, "compare_type") == 0 && k->ident && strcmp(k->ident, "TOTALORDER") == 0) {
            gs_build_set_ident(&r->b, in, GS_ATTR_TYPE, k->ident);
            continue;
        }
        if (in->op == GS_OP_PAD &&
            (strcmp(key, "low") == 0 || strcmp(key, "edge_padding_low") == 0 ||
             strcmp(key, "high") == 0 || strcmp(key, "edge_padding_high") == 0 ||
             strcmp(key, "interior") == 0 || strcmp(key, "interior_padding") == 0))
            continue; /* below */
        if (in->op == GS_OP_SLICE &&
            (strcmp(key, "start_indices") == 0 || strcmp(key, "limit_indices") == 0 ||
             strcmp(key, "strides") == 0))
            continue; /* below */
        gs_attr_key ak = gs_attr_from_name(key, strlen(key));
        if (ak == GS_ATTR_UNKNOWN) continue; /* not used by gspmd (precision, result info...) */
        switch (gs_attr_kind_of(ak)) {
        case GS_AK_INTS: set_ints(r, in, ak, k->n_a, k->a); break;
        case GS_AK_INT:
            if (k->n_a == 1) gs_build_set_int(&r->b, in, ak, k->a[0]);
            break;
        case GS_AK_BOOL:
            if (k->n_a == 1) gs_build_set_bool(&r->b, in, ak, k->a[0] != 0);
            break;
        case GS_AK_IDENT:
            if (k->ident) gs_build_set_ident(&r->b, in, ak, k->ident);
            break;
        default: break;
        }
    }
    if (in->op == GS_OP_PAD) {
        const kv *lo = find_kv(kvs, "low"), *hi = find_kv(kvs, "high"),
                 *it = find_kv(kvs, "interior");
        if (!lo) lo = find_kv(kvs, "edge_padding_low");
        if (!hi) hi = find_kv(kvs, "edge_padding_high");
        if (!it) it = find_kv(kvs, "interior_padding");
        if (!lo || !hi || !it || lo->n_a != hi->n_a || lo->n_a != it->n_a)
            return fail_at(r, op_pos, "pad needs low, high and interior of one length each");
        gs_padding *p = GS_NEW(r->a, gs_padding);
        if (!p || !(p->dims = GS_NEW_ARRAY(r->a, gs_pad_dim, lo->n_a ? lo->n_a : 1))) return oom(r);
        p->n = lo->n_a;
        for (int j = 0; j < p->n; j++) p->dims[j] = (gs_pad_dim){lo->a[j], hi->a[j], it->a[j]};
        gs_attr at = {.key = GS_ATTR_PADDING, .name = "padding"};
        at.u.padding = p;
        if (gs_instr_set_attr(r->m, in, &at) != GS_OK) return oom(r);
    }
    if (in->op == GS_OP_SLICE && find_kv(kvs, "start_indices")) {
        const kv *st = find_kv(kvs, "start_indices"), *li = find_kv(kvs, "limit_indices"),
                 *sd = find_kv(kvs, "strides");
        if (!li || li->n_a != st->n_a || (sd && sd->n_a != st->n_a))
            return fail_at(r, op_pos, "slice needs start_indices, limit_indices of one length");
        gs_attr at = {.key = GS_ATTR_SLICE, .name = "slice"};
        gs_slice_dim *v = GS_NEW_ARRAY(r->a, gs_slice_dim, st->n_a ? st->n_a : 1);
        if (!v) return oom(r);
        for (int j = 0; j < st->n_a; j++)
            v[j] = (gs_slice_dim){st->a[j], li->a[j], sd ? sd->a[j] : 1};
        at.u.slice.n = st->n_a;
        at.u.slice.v = v;
        if (gs_instr_set_attr(r->m, in, &at) != GS_OK) return oom(r);
    }
    if ((in->op == GS_OP_SCATTER || in->op == GS_OP_GATHER) &&
        !gs_instr_attr(in, GS_ATTR_INDEX_VECTOR_DIM))
        gs_build_set_int(&r->b, in, GS_ATTR_INDEX_VECTOR_DIM, 0);
    return !r->b.failed || oom(r);
}

static bool parse_ops(reader *r, gs_computation *c, char close, const char *what);

/* A region `{ [^bb0(%a: T, ...):] op* }` (or with args already given in args) read into a new
 * computation named from stem. */
static bool parse_region(reader *r, const char *stem, int n_args, const char **arg_names,
                         gs_shape **arg_types, gs_computation **out) {
    gs_builder saved = r->b;
    size_t saved_scope = r->scope;
    const char *name = gs_names_fresh(&r->names, r->a, stem);
    gs_computation *c = name ? gs_computation_new(r->m, name) : NULL;
    if (!c) return oom(r);
    c->span = span_at(r, r->pos);
    gs_builder_init(&r->b, r->m, c, &r->names);
    r->scope = r->values.n;
    if (!expect(r, '{', "opening a region")) return false;
    const char *names_buf[64];
    gs_shape *types_buf[64];
    if (peek(r) == '^') {
        while (r->pos < r->len && is_id_char(ahead(r, 1))) r->pos++;
        r->pos++;
        n_args = 0;
        arg_names = names_buf;
        arg_types = types_buf;
        if (accept(r, '(') && !accept(r, ')')) {
            do {
                int idx;
                if (n_args >= 64) return FAIL(r, "too many block arguments");
                if (!parse_value_name(r, &names_buf[n_args], &idx, false) ||
                    !expect(r, ':', "after a block argument") || !parse_type(r, &types_buf[n_args]))
                    return false;
                n_args++;
            } while (accept(r, ','));
            if (!expect(r, ')', "closing the block arguments")) return false;
        }
        if (!expect(r, ':', "after the block label")) return false;
    }
    for (int i = 0; i < n_args; i++) {
        r->b.span = c->span;
        gs_instr *p = gs_build_parameter(&r->b, i, arg_types[i], NULL);
        if (!p || !define_value(r, arg_names[i], p, 1)) return oom(r);
    }
    if (!parse_ops(r, c, '}', "region")) return false;
    r->values.n = r->scope;
    r->scope = saved_scope;
    r->b = saved;
    *out = c;
    return true;
}

/* Makes results[0..n) the root of c (a tuple when n != 1). */
static bool set_root(reader *r, gs_computation *c, int n, gs_instr **results, size_t at) {
    gs_instr *root;
    if (n == 1 && !results[0]->is_root) {
        root = results[0];
    } else {
        r->b.span = span_at(r, at);
        root = gs_build_tuple(&r->b, n, results);
        if (!root) return oom(r);
    }
    if (c->root) c->root->is_root = false;
    c->root = root;
    root->is_root = true;
    return true;
}

/* The computation for function name (declared on first mention). */
static gs_computation *func_comp(reader *r, const char *name) {
    gs_computation *c = gs_strmap_get(&r->funcs, name);
    if (c) return c;
    char stem[128];
    size_t j = 0;
    for (size_t i = 0; name[i] && j + 1 < sizeof stem; i++)
        stem[j++] = (isalnum((unsigned char)name[i]) || name[i] == '_') ? name[i] : '_';
    stem[j] = 0;
    const char *cn = gs_names_fresh(&r->names, r->a, j ? stem : "f");
    c = cn ? gs_computation_new(r->m, cn) : NULL;
    if (!c || gs_strmap_put(&r->funcs, name, c) != GS_OK ||
        gs_vec_push(&r->funcs_list, &c) != GS_OK)
        return NULL;
    return c;
}

/* `reducer(%a: T, %b: T) (%c: T, %d: T) { ... }`: the region of a pretty reduce. Argument
 * pairs are (lhs_i, rhs_i); the computation's parameters are all lhs then all rhs. */
static bool parse_reducer(reader *r, gs_computation **out) {
    const char *names[64];
    gs_shape *types[64];
    const char *ln[32], *rn[32];
    gs_shape *lt[32], *rt[32];
    int n = 0;
    while (peek(r) == '(') {
        r->pos++;
        int idx;
        if (n >= 32) return FAIL(r, "too many reducer arguments");
        if (!parse_value_name(r, &ln[n], &idx, false) || !expect(r, ':', "in reducer") ||
            !parse_type(r, &lt[n]) || !expect(r, ',', "in reducer") ||
            !parse_value_name(r, &rn[n], &idx, false) || !expect(r, ':', "in reducer") ||
            !parse_type(r, &rt[n]) || !expect(r, ')', "closing reducer arguments"))
            return false;
        n++;
    }
    for (int i = 0; i < n; i++) {
        names[i] = ln[i];
        types[i] = lt[i];
        names[n + i] = rn[i];
        types[n + i] = rt[i];
    }
    return parse_region(r, "region", 2 * n, names, types, out);
}

/* The computation `(a, b) -> op(a, b)` for `applies stablehlo.OP` over element type t. */
static bool applies_comp(reader *r, const char *opname, gs_type t, gs_computation **out) {
    const char *base = strncmp(opname, "stablehlo.", 10) == 0 ? opname + 10 : opname;
    int op = opcode_of(base);
    if (op < 0 || gs_op_info_of((gs_opcode)op)->family != GS_FAM_BINARY)
        return FAIL(r, "reduction by '%s' is not supported", opname);
    *out = gs_build_scalar_computation(&r->b, "region", (gs_opcode)op, t);
    return *out ? true : oom(r);
}

/* Builds instruction op (result types outs) from operands, attributes kvs and regions. */
static bool build_op(reader *r, const char *opname, size_t op_pos, int n_ops, gs_instr **ops,
                     gs_shape **outs, int n_outs, const gs_vec *kvs, int n_regions,
                     gs_computation **regions, gs_instr **result) {
    const char *base = strncmp(opname, "stablehlo.", 10) == 0 ? opname + 10 : opname;
    int op = opcode_of(base);
    if (op < 0) return fail_at(r, op_pos, "unknown or unsupported op '%s'", opname);
    gs_shape *shape;
    if (n_outs == 1) {
        shape = outs[0];
    } else {
        shape = gs_shape_tuple(r->a, n_outs, outs);
        if (!shape) return oom(r);
    }
    r->b.span = span_at(r, op_pos);
    gs_instr *bcast_in = NULL;
    const kv *bd = find_kv(kvs, "dims");
    if (!bd) bd = find_kv(kvs, "broadcast_dimensions");
    if (op == GS_OP_BROADCAST && n_ops == 1 && bd && gs_shape_is_array(ops[0]->shape) &&
        gs_shape_is_array(shape) && bd->n_a == ops[0]->shape->rank) {
        /* StableHLO broadcasts size-1 dims to any size, HLO's broadcast does not: reshape them
         * away first (what XLA's import does) */
        const gs_shape *x = ops[0]->shape;
        int64_t keep_dims[GS_MAX_RANK];
        int n_keep = 0;
        bool any = false;
        for (int i = 0; i < x->rank; i++) {
            int64_t to = bd->a[i];
            if (x->dims[i] == 1 && to >= 0 && to < shape->rank && shape->dims[to] != 1) {
                any = true;
                continue;
            }
            keep_dims[n_keep++] = x->dims[i];
        }
        if (any) {
            bcast_in = gs_build_reshape(&r->b, ops[0], n_keep, keep_dims);
            if (!bcast_in) return oom(r);
        }
    }
    gs_instr *in = gs_build(&r->b, (gs_opcode)op, shape, n_ops, bcast_in ? &bcast_in : ops);
    if (!in) return oom(r);
    if (!apply_attrs(r, in, kvs, op_pos)) return false;
    if (bcast_in) {
        int64_t dims[GS_MAX_RANK];
        int n = 0;
        for (int i = 0; i < ops[0]->shape->rank; i++) {
            int64_t to = bd->a[i];
            if (!(ops[0]->shape->dims[i] == 1 && to >= 0 && to < shape->rank &&
                  shape->dims[to] != 1))
                dims[n++] = to;
        }
        set_ints(r, in, GS_ATTR_DIMENSIONS, n, dims);
    }
    if (n_regions > 0) {
        gs_attr_key k = op == GS_OP_WHILE ? GS_ATTR_CONDITION : GS_ATTR_TO_APPLY;
        if (op == GS_OP_WHILE && n_regions == 2) {
            gs_build_set_comp(&r->b, in, GS_ATTR_CONDITION, regions[0]);
            gs_build_set_comp(&r->b, in, GS_ATTR_BODY, regions[1]);
        } else if (op == GS_OP_SORT || op == GS_OP_REDUCE || op == GS_OP_SCATTER ||
                   op == GS_OP_REDUCE_WINDOW || op == GS_OP_ALL_REDUCE ||
                   op == GS_OP_REDUCE_SCATTER) {
            gs_build_set_comp(&r->b, in, k, regions[0]);
        } else {
            return fail_at(r, op_pos, "regions of '%s' are not supported yet", opname);
        }
    }
    if (r->b.failed) return oom(r);
    *result = in;
    return true;
}

/* `check.*` ops as custom-calls the interpreter evaluates. */
static gs_instr *build_check(reader *r, const char *target, int n_ops, gs_instr **ops,
                             gs_shape *result, size_t at) {
    r->b.span = span_at(r, at);
    gs_shape *shape = result ? result : gs_shape_tuple(r->a, 0, NULL);
    if (!shape) return NULL;
    gs_instr *in = gs_build(&r->b, GS_OP_CUSTOM_CALL, shape, n_ops, ops);
    if (!in) return NULL;
    gs_attr at_t = {.key = GS_ATTR_CUSTOM_CALL_TARGET, .name = "custom_call_target"};
    at_t.u.s = gs_arena_strdup(r->a, target);
    if (!at_t.u.s || gs_instr_set_attr(r->m, in, &at_t) != GS_OK) return NULL;
    gs_build_set_bool(&r->b, in, GS_ATTR_CUSTOM_CALL_HAS_SIDE_EFFECT, true);
    return r->b.failed ? NULL : in;
}

/* Operands `%a, %b, ...` (stops at anything else). */
static bool parse_operand_list(reader *r, gs_instr **ops, int *n, int max) {
    while (peek(r) == '%') {
        if (*n >= max) return FAIL(r, "too many operands");
        if (!lookup_value(r, &ops[(*n)++])) return false;
        if (!accept(r, ',')) break;
    }
    return true;
}

/* The result types of an op from its type spec: the function type's results, or for a plain
 * list the last type. */
static bool result_types(reader *r, gs_shape **ins, int n_in, gs_shape **outs, int *n_out) {
    if (*n_out >= 0) return true;
    if (n_in < 1) return FAIL(r, "expected a type");
    outs[0] = ins[n_in - 1];
    *n_out = 1;
    return true;
}

enum { MAX_OPS = 256 };

/* One operation inside a function or region. Results are defined in scope; `return` ops set
 * c's root and set *ended. */
static bool parse_op(reader *r, gs_computation *c, bool *ended) {
    const char *res_names[16];
    int res_counts[16], n_res = 0;
    size_t start = (skip_ws(r), r->pos);
    while (peek(r) == '%') {
        int idx;
        if (n_res >= 16) return FAIL(r, "too many result names");
        if (!parse_value_name(r, &res_names[n_res], &idx, false)) return false;
        res_counts[n_res] = 1;
        if (cur(r) == ':') {
            r->pos++;
            int64_t k;
            if (!parse_int(r, &k, "a result count") || k < 1 || k > 4096)
                return fail_at(r, start, "bad result count");
            res_counts[n_res] = (int)k;
        }
        n_res++;
        if (!accept(r, ',')) break;
    }
    if (n_res && !expect(r, '=', "after the result names")) return false;
    size_t op_pos = (skip_ws(r), r->pos);
    const char *opname;
    bool generic = cur(r) == '"';
    if (generic ? !parse_string(r, &opname) : !parse_ident(r, &opname, "an operation"))
        return false;

    gs_instr *ops[MAX_OPS];
    int n_ops = 0;
    gs_shape *ins[MAX_OPS], *outs[MAX_OPS];
    int n_in = 0, n_out = -1;
    gs_vec kvs;
    gs_vec_init(&kvs, sizeof(kv));
    gs_computation *regions[4];
    int n_regions = 0;
    gs_instr *result = NULL;
    bool ok = false;
    const char *check_target = NULL;

    if (strcmp(opname, "return") == 0 || strcmp(opname, "func.return") == 0 ||
        strcmp(opname, "stablehlo.return") == 0) {
        if (!parse_operand_list(r, ops, &n_ops, MAX_OPS)) goto done;
        if (n_ops && (!expect(r, ':', "before the returned types") ||
                      !parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS)))
            goto done;
        ok = set_root(r, c, n_ops, ops, op_pos);
        *ended = true;
        goto done;
    }
    if (generic) {
        if (!expect(r, '(', "opening the operands") ||
            !parse_operand_list(r, ops, &n_ops, MAX_OPS) || !expect(r, ')', "closing the operands"))
            goto done;
        if (peek(r) == '<') {
            r->pos++;
            if (!expect(r, '{', "opening the properties") || !parse_kv_list(r, &kvs, '}') ||
                !expect(r, '>', "closing the properties"))
                goto done;
        }
        if (peek(r) == '(') {
            r->pos++;
            do {
                if (n_regions >= 4) {
                    FAIL(r, "too many regions");
                    goto done;
                }
                if (!parse_region(r, "region", 0, NULL, NULL, &regions[n_regions++])) goto done;
            } while (accept(r, ','));
            if (!expect(r, ')', "closing the regions")) goto done;
        }
        if (peek(r) == '{' && (r->pos++, !parse_kv_list(r, &kvs, '}'))) goto done;
        if (!expect(r, ':', "before the op's type") ||
            !parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS) ||
            !result_types(r, ins, n_in, outs, &n_out))
            goto done;
        if (strncmp(opname, "check.", 6) == 0) {
            /* "check.expect_eq_const"(%x) <{value = dense<...>}> */
            const kv *v = find_kv(&kvs, "value");
            if (!v || !v->dense_pos || n_ops != 1) {
                fail_at(r, op_pos, "'%s' needs one operand and a dense value", opname);
                goto done;
            }
            size_t save = r->pos;
            r->pos = v->dense_pos + 5;
            skip_ws(r);
            r->pos++;
            gs_literal_ir *lit;
            if (!parse_dense_body(r, v->dense_type, &lit)) goto done;
            r->pos = save;
            r->b.span = span_at(r, op_pos);
            gs_instr *k = gs_build(&r->b, GS_OP_CONSTANT, v->dense_type, 0, NULL);
            if (!k) {
                oom(r);
                goto done;
            }
            k->literal = lit;
            ops[n_ops++] = k;
            result = build_check(r, opname, n_ops, ops, n_out == 1 ? outs[0] : NULL, op_pos);
            if (!result) {
                oom(r);
                goto done;
            }
            ok = true;
            goto define;
        }
        if (strncmp(opname, "stablehlo.", 10) != 0) {
            fail_at(r, op_pos, "unknown or unsupported op '%s'", opname);
            goto done;
        }
        if (strcmp(opname, "stablehlo.constant") == 0 ||
            strcmp(opname, "stablehlo.custom_call") == 0) {
            fail_at(r, op_pos, "the generic form of '%s' is not supported yet", opname);
            goto done;
        }
        ok =
            build_op(r, opname, op_pos, n_ops, ops, outs, n_out, &kvs, n_regions, regions, &result);
        goto define;
    }

    if (strcmp(opname, "stablehlo.constant") == 0) {
        skip_ws(r);
        size_t lit_pos = r->pos;
        if (!accept_word(r, "dense")) {
            FAIL(r, "expected a dense<...> literal, found %s", found(r));
            goto done;
        }
        skip_ws(r);
        if (cur(r) != '<') {
            FAIL(r, "expected '<' after 'dense'");
            goto done;
        }
        if (!skip_balanced(r) || !expect(r, ':', "before the constant's type") ||
            !parse_type(r, &outs[0]))
            goto done;
        size_t end = r->pos;
        r->pos = lit_pos + 5;
        skip_ws(r);
        r->pos++;
        gs_literal_ir *lit;
        if (!parse_dense_body(r, outs[0], &lit)) goto done;
        r->pos = end;
        r->b.span = span_at(r, op_pos);
        result = gs_build(&r->b, GS_OP_CONSTANT, outs[0], 0, NULL);
        if (!result) {
            oom(r);
            goto done;
        }
        result->literal = lit;
        n_out = 1;
        ok = true;
        goto define;
    }
    if (strcmp(opname, "call") == 0 || strcmp(opname, "func.call") == 0 ||
        strcmp(opname, "stablehlo.custom_call") == 0) {
        const char *callee;
        if (!parse_symbol(r, &callee) || !expect(r, '(', "opening the arguments") ||
            !parse_operand_list(r, ops, &n_ops, MAX_OPS) ||
            !expect(r, ')', "closing the arguments"))
            goto done;
        if (peek(r) == '{' && (r->pos++, !parse_kv_list(r, &kvs, '}'))) goto done;
        if (!expect(r, ':', "before the call's type") ||
            !parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS) ||
            !result_types(r, ins, n_in, outs, &n_out))
            goto done;
        if (opname[0] == 's') {
            if (strncmp(callee, "check.", 6) != 0) {
                fail_at(r, op_pos, "custom_call @%s is not supported yet", callee);
                goto done;
            }
            check_target = callee;
            result = build_check(r, check_target, n_ops, ops, n_out == 1 ? outs[0] : NULL, op_pos);
            if (!result) {
                oom(r);
                goto done;
            }
            ok = true;
            goto define;
        }
        gs_computation *f = func_comp(r, callee);
        if (!f) {
            oom(r);
            goto done;
        }
        gs_shape *shape = n_out == 1 ? outs[0] : gs_shape_tuple(r->a, n_out, outs);
        r->b.span = span_at(r, op_pos);
        result = shape ? gs_build(&r->b, GS_OP_CALL, shape, n_ops, ops) : NULL;
        if (!result) {
            oom(r);
            goto done;
        }
        gs_build_set_comp(&r->b, result, GS_ATTR_TO_APPLY, f);
        ok = !r->b.failed || oom(r);
        goto define;
    }
    if (strncmp(opname, "stablehlo.", 10) != 0) {
        fail_at(r, op_pos, "unknown or unsupported op '%s'", opname);
        goto done;
    }
    if (strcmp(opname, "stablehlo.reduce") == 0) {
        /* (%x init: %i), (%y init: %j) [applies OP] across dimensions = [..] : type [reducer] */
        gs_instr *inits[MAX_OPS / 2];
        int n_inits = 0;
        while (accept(r, '(')) {
            if (n_ops >= MAX_OPS / 2) {
                FAIL(r, "too many operands");
                goto done;
            }
            if (!lookup_value(r, &ops[n_ops++]) || !accept_word(r, "init") ||
                !expect(r, ':', "after 'init'") || !lookup_value(r, &inits[n_inits++]) ||
                !expect(r, ')', "closing a reduce operand"))
                goto done;
            if (!accept(r, ',')) break;
        }
        for (int i = 0; i < n_inits; i++) ops[n_ops++] = inits[i];
        const char *applies = NULL;
        if (accept_word(r, "applies") && !parse_ident(r, &applies, "the reduction op")) goto done;
        kv k = {.key = "dimensions"};
        if (!accept_word(r, "across") || !accept_word(r, "dimensions") ||
            !expect(r, '=', "after 'dimensions'") ||
            !parse_int_list(r, k.a, &k.n_a, "the reduced dimensions")) {
            FAIL(r, "expected 'across dimensions = [...]' in reduce, found %s", found(r));
            goto done;
        }
        if (gs_vec_push(&kvs, &k) != GS_OK) {
            oom(r);
            goto done;
        }
        if (!expect(r, ':', "before the reduce's type") ||
            !parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS) ||
            !result_types(r, ins, n_in, outs, &n_out))
            goto done;
        if (applies) {
            if (n_inits != 1 || !gs_shape_is_array(ops[1]->shape)) {
                fail_at(r, op_pos, "'applies' needs one operand");
                goto done;
            }
            if (!applies_comp(r, applies, ops[1]->shape->type, &regions[0])) goto done;
        } else {
            if (!accept_word(r, "reducer")) {
                FAIL(r, "expected 'reducer' after the reduce's type, found %s", found(r));
                goto done;
            }
            if (!parse_reducer(r, &regions[0])) goto done;
        }
        n_regions = 1;
        ok =
            build_op(r, opname, op_pos, n_ops, ops, outs, n_out, &kvs, n_regions, regions, &result);
        goto define;
    }
    if (strcmp(opname, "stablehlo.compare") == 0) {
        kv k = {.key = "direction"};
        if (!parse_ident(r, &k.ident, "a comparison direction") ||
            !expect(r, ',', "after the direction") || gs_vec_push(&kvs, &k) != GS_OK)
            goto done;
    }
    /* the generic pretty form: operands, `[slice]`, `key = value` pairs, `{dict}`, `: types` */
    if (!parse_operand_list(r, ops, &n_ops, MAX_OPS)) goto done;
    if (strcmp(opname, "stablehlo.slice") == 0 && peek(r) == '[') {
        kv st = {.key = "start_indices"}, li = {.key = "limit_indices"}, sd = {.key = "strides"};
        r->pos++;
        if (!accept(r, ']')) {
            do {
                if (st.n_a >= GS_MAX_RANK) {
                    FAIL(r, "slice of too many dimensions");
                    goto done;
                }
                int j = st.n_a++;
                li.n_a++;
                sd.n_a++;
                sd.a[j] = 1;
                if (!parse_int(r, &st.a[j], "a slice start") || !expect(r, ':', "in a slice") ||
                    !parse_int(r, &li.a[j], "a slice limit"))
                    goto done;
                if (accept(r, ':') && !parse_int(r, &sd.a[j], "a slice stride")) goto done;
            } while (accept(r, ','));
            if (!expect(r, ']', "closing the slice")) goto done;
        }
        if (gs_vec_push(&kvs, &st) != GS_OK || gs_vec_push(&kvs, &li) != GS_OK ||
            gs_vec_push(&kvs, &sd) != GS_OK) {
            oom(r);
            goto done;
        }
    }
    while (ident_len(r) && !at_word(r, "reducer")) {
        kv k = {0};
        if (!parse_ident(r, &k.key, "an attribute name")) goto done;
        if (accept(r, '=')) {
            if (!parse_attr_value(r, &k)) goto done;
        } else if (strcmp(opname, "stablehlo.compare") == 0) {
            k.ident = k.key;
            k.key = "compare_type";
        }
        if (gs_vec_push(&kvs, &k) != GS_OK) {
            oom(r);
            goto done;
        }
        accept(r, ',');
    }
    if (peek(r) == '{' && (r->pos++, !parse_kv_list(r, &kvs, '}'))) goto done;
    if (!expect(r, ':', "before the op's type") ||
        !parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS) ||
        !result_types(r, ins, n_in, outs, &n_out))
        goto done;
    ok = build_op(r, opname, op_pos, n_ops, ops, outs, n_out, &kvs, 0, regions, &result);

define:
    if (!ok) goto done;
    {
        int total = 0;
        for (int i = 0; i < n_res; i++) total += res_counts[i];
        int produced = gs_shape_is_tuple(result->shape) ? result->shape->n_tuple : 1;
        if (check_target && gs_shape_is_tuple(result->shape)) produced = 0;
        if (n_res > 1) {
            ok = fail_at(r, start, "several result groups are not supported yet");
            goto done;
        }
        if (total != produced && !(total == 1 && produced != 1 && n_out == 1)) {
            ok = fail_at(r, start, "the op has %d results, %d are named", produced, total);
            goto done;
        }
        if (n_res == 1) ok = define_value(r, res_names[0], result, res_counts[0]);
    }
done:
    gs_vec_free(&kvs);
    return ok && !r->failed;
}

/* Ops up to `close`; the last must be a return. */
static bool parse_ops(reader *r, gs_computation *c, char close, const char *what) {
    bool ended = false;
    while (!accept(r, close)) {
        if (r->pos >= r->len) return FAIL(r, "expected '%c' closing the %s", close, what);
        if (ended) return FAIL(r, "an op after the %s's return", what);
        if (!parse_op(r, c, &ended)) return false;
    }
    if (!ended) return FAIL(r, "the %s has no return", what);
    return true;
}

/* ------------------------------------------------------------------ functions and module */

/* An attribute dictionary `{...}` (skipped) when one is at the cursor. */
static bool skip_dict(reader *r) {
    if (peek(r) != '{') return true;
    return skip_balanced(r);
}

/* func.func [public|private] @name(args) [-> results] [attributes {..}] { ops } */
static bool parse_func(reader *r) {
    size_t start = r->pos;
    if (!accept_word(r, "public") && !accept_word(r, "private")) accept_word(r, "nested");
    const char *name;
    if (!parse_symbol(r, &name)) return false;
    if (gs_strmap_get(&r->defined, name))
        return fail_at(r, start, "function @%s is defined twice", name);
    gs_computation *c = func_comp(r, name);
    if (!c || gs_strmap_put(&r->defined, name, (void *)1) != GS_OK) return oom(r);
    c->span = span_at(r, start);
    gs_builder_init(&r->b, r->m, c, &r->names);
    r->scope = r->values.n;
    if (!expect(r, '(', "opening the function's arguments")) return false;
    int n = 0;
    if (!accept(r, ')')) {
        do {
            const char *an;
            int idx;
            gs_shape *t;
            size_t at = (skip_ws(r), r->pos);
            if (!parse_value_name(r, &an, &idx, false) || !expect(r, ':', "after an argument") ||
                !parse_type(r, &t) || !skip_dict(r))
                return false;
            r->b.span = span_at(r, at);
            gs_instr *p = gs_build_parameter(&r->b, n++, t, NULL);
            if (!p || !define_value(r, an, p, 1)) return oom(r);
        } while (accept(r, ','));
        if (!expect(r, ')', "closing the function's arguments")) return false;
    }
    skip_ws(r);
    if (cur(r) == '-' && ahead(r, 1) == '>') {
        r->pos += 2;
        if (accept(r, '(')) {
            if (!accept(r, ')')) {
                do {
                    gs_shape *t;
                    if (!parse_type(r, &t) || !skip_dict(r)) return false;
                } while (accept(r, ','));
                if (!expect(r, ')', "closing the function's results")) return false;
            }
        } else {
            gs_shape *t;
            if (!parse_type(r, &t)) return false;
        }
    }
    if (accept_word(r, "attributes") && !skip_dict(r)) return false;
    if (!expect(r, '{', "opening the function's body")) return false;
    if (!parse_ops(r, c, '}', "function")) return false;
    r->values.n = r->scope;
    return true;
}

static bool parse_module(reader *r) {
    bool braced = false;
    skip_ws(r);
    while (peek(r) == '#') { /* #loc = loc(...) aliases */
        while (r->pos < r->len && r->s[r->pos] != '\n') r->pos++;
    }
    if (accept_word(r, "module")) {
        if (peek(r) == '@') {
            const char *name;
            if (!parse_symbol(r, &name)) return false;
            r->m->name = name;
        }
        if (accept_word(r, "attributes") && !skip_dict(r)) return false;
        if (!expect(r, '{', "opening the module")) return false;
        braced = true;
    }
    for (;;) {
        if (peek(r) == '#') {
            while (r->pos < r->len && r->s[r->pos] != '\n') r->pos++;
            continue;
        }
        if (braced && accept(r, '}')) break;
        if (!braced && r->pos >= r->len) break;
        if (accept_word(r, "func.func")) {
            if (!parse_func(r)) return false;
        } else if (at_word(r, "sdy.mesh")) {
            return FAIL(r, "'sdy.mesh' is not supported yet");
        } else {
            return FAIL(r, "expected 'func.func'%s, found %s", braced ? " or '}'" : "", found(r));
        }
    }
    while (peek(r) == '#') {
        while (r->pos < r->len && r->s[r->pos] != '\n') r->pos++;
    }
    if (r->pos < r->len) return FAIL(r, "unexpected text after the module: %s", found(r));
    return true;
}

/* Every called function has a body; the entry (@main, else the only function) goes last. */
static bool finish(reader *r) {
    gs_computation *entry = gs_strmap_get(&r->funcs, "main");
    for (int i = 0; i < r->m->n_comps; i++) {
        gs_computation *c = r->m->comps[i];
        if (!c->root && c->n_instrs == 0)
            return fail_at(r, 0, "function '%s' is called but never defined", c->name);
    }
    if (!entry) {
        if (r->funcs_list.n != 1)
            return fail_at(r, 0, "no @main function (and not exactly one function)");
        entry = GS_VEC_AT(&r->funcs_list, gs_computation *, 0);
    }
    entry->is_entry = true;
    r->m->entry = entry;
    int k = 0;
    for (int i = 0; i < r->m->n_comps; i++)
        if (r->m->comps[i] != entry) r->m->comps[k++] = r->m->comps[i];
    r->m->comps[k] = entry;
    if (!r->m->name || !r->m->name[0]) r->m->name = "module";
    return true;
}

bool gs_mlir_detect(const gs_source *src) {
    reader r = {.src = src, .s = src->text, .len = src->len};
    skip_ws(&r);
    return at_word(&r, "module") || at_word(&r, "func.func");
}

gs_status gs_mlir_read(gs_module *m, const gs_source *src, gs_diags *d) {
    reader r = {.src = src, .s = src->text, .len = src->len, .m = m, .a = &m->arena, .d = d};
    r.span_line = r.span_col = 1;
    gs_vec_init(&r.values, sizeof(value_ent));
    gs_vec_init(&r.funcs_list, sizeof(gs_computation *));
    bool ok = parse_module(&r) && finish(&r);
    if (ok && m->arena.failed) ok = oom(&r);
    gs_vec_free(&r.values);
    gs_vec_free(&r.funcs_list);
    gs_strmap_free(&r.funcs);
    gs_strmap_free(&r.defined);
    gs_names_free(&r.names);
    if (!ok && !r.failed) gs_error(d, span_at(&r, r.pos), "out of memory");
    return ok ? GS_OK : GS_ERR;
}
