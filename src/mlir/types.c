/*
 * src/mlir/types.c — StableHLO types and values of attributes: `tensor<2x3xf32>`, tuples and
 * function types map to gs_shape; `dense<...>` literals (nested lists, splats, hex strings in
 * little-endian raw bytes, i1 one byte per element) to gspmd's literal storage; attribute
 * dictionaries `{k = v}` and `#stablehlo.x<...>` attributes flatten to key = value pairs (kv)
 * that ops.c maps onto gspmd attributes.
 */
#include "mlir/internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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
        {"complex<f32>", GS_C64},
        {"complex<f64>", GS_C128},
    };
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (strlen(TYPES[i].name) == n && memcmp(TYPES[i].name, s, n) == 0) return TYPES[i].t;
    /* Floats: HLO's names (the op table's), with MLIR's capitals (f8E4M3FN is f8e4m3fn). */
    char lower[24];
    if (n == 0 || n >= sizeof lower || (s[0] != 'f' && s[0] != 'b')) return GS_INVALID_TYPE;
    for (size_t i = 0; i < n; i++) lower[i] = (char)tolower((unsigned char)s[i]);
    gs_type t = gs_type_from_name(lower, n);
    return t != GS_INVALID_TYPE && gs_type_is_float(t) ? t : GS_INVALID_TYPE;
}

static bool parse_type(reader *r, gs_shape **out);

/* `tensor<2x3xf32>`, `tensor<f32>`, a bare element type (a scalar), `tuple<...>`,
 * `!stablehlo.token`. A module writes few distinct tensor types many times: each is read once
 * and the shape shared after (r->types; the IR copies a shape it keeps). */
bool mlir_parse_type(reader *r, gs_shape **out) {
    mlir_skip_ws(r);
    size_t start = r->pos, n = 0;
    enum { MAX_KEY = 95 }; /* longer type texts are read each time */
    if (start < r->len && r->len - start > 7 && memcmp(r->s + start, "tensor<", 7) == 0) {
        n = 7;
        while (start + n < r->len && n < MAX_KEY && r->s[start + n] != '>' &&
               r->s[start + n] != '<' && r->s[start + n] != '\n')
            n++;
        if (start + n < r->len && r->s[start + n] == '>' && n < MAX_KEY) {
            n++;
            gs_shape *hit = gs_strmap_getn(&r->types, r->s + start, n);
            if (hit) {
                r->pos = start + n;
                *out = hit;
                return true;
            }
        } else {
            n = 0; /* nested (`complex<f32>`, bounds) or long: not shared */
        }
    }
    if (!parse_type(r, out)) return false;
    if (n && r->pos == start + n) {
        const char *k = gs_arena_strndup(r->a, r->s + start, n);
        if (!k || gs_strmap_put(&r->types, k, *out) != GS_OK) return mlir_oom(r);
    }
    return true;
}

static bool parse_type(reader *r, gs_shape **out) {
    size_t start = r->pos;
    if (mlir_cur(r) == '!') {
        if (r->pos + 16 <= r->len && memcmp(r->s + r->pos, "!stablehlo.token", 16) == 0) {
            r->pos += 16;
            *out = gs_shape_token(r->a);
            return *out ? true : mlir_oom(r);
        }
        return FAIL(r, "type %s is not supported yet", mlir_found(r));
    }
    if (mlir_accept_word(r, "tuple")) {
        gs_shape *el[64];
        int n = 0;
        if (!mlir_expect(r, '<', "after 'tuple'")) return false;
        if (!mlir_accept(r, '>')) {
            do {
                if (n >= 64) return FAIL(r, "tuple type too long");
                if (!mlir_parse_type(r, &el[n++])) return false;
            } while (mlir_accept(r, ','));
            if (!mlir_expect(r, '>', "closing the tuple type")) return false;
        }
        *out = gs_shape_tuple(r->a, n, el);
        return *out ? true : mlir_oom(r);
    }
    bool tensor = mlir_accept_word(r, "tensor");
    if (tensor && !mlir_expect(r, '<', "after 'tensor'")) return false;
    int64_t dims[GS_MAX_RANK];
    bool dyn[GS_MAX_RANK], any_dyn = false;
    int rank = 0;
    while (tensor && (isdigit((unsigned char)mlir_cur(r)) || mlir_cur(r) == '?')) {
        if (rank >= GS_MAX_RANK) return FAIL(r, "tensor rank above %d", GS_MAX_RANK);
        if (mlir_cur(r) == '?') { /* dynamic: unbounded (-1) unless the bounds say */
            r->pos++;
            dims[rank] = -1;
            dyn[rank++] = any_dyn = true;
            if (mlir_cur(r) != 'x')
                return FAIL(r, "expected 'x' after a dimension, found %s", mlir_found(r));
            r->pos++;
            continue;
        }
        dyn[rank] = false;
        char *end;
        errno = 0;
        long long v = strtoll(r->s + r->pos, &end, 10);
        if (errno || v < 0) return FAIL(r, "dimension out of range");
        if (rank >= GS_MAX_RANK) return FAIL(r, "tensor rank above %d", GS_MAX_RANK);
        dims[rank++] = v;
        r->pos += (size_t)(end - (r->s + r->pos));
        if (mlir_cur(r) != 'x')
            return FAIL(r, "expected 'x' after a dimension, found %s", mlir_found(r));
        r->pos++;
    }
    size_t es = r->pos, n = 0;
    if (mlir_cur(r) == '!') return FAIL(r, "element type %s is not supported yet", mlir_found(r));
    while (es + n < r->len && isalnum((unsigned char)r->s[es + n])) n++;
    if (n == 7 && memcmp(r->s + es, "complex", 7) == 0 && es + n < r->len && r->s[es + n] == '<') {
        while (es + n < r->len && r->s[es + n] != '>') n++;
        n++;
    }
    gs_type t = element_type(r->s + es, n);
    if (t == GS_INVALID_TYPE) {
        if (!tensor && n == 0)
            return mlir_fail_at(r, start, "expected a type, found %s", mlir_found(r));
        return mlir_fail_at(r, es, "unknown element type '%.*s'", (int)(n ? n : 1), r->s + es);
    }
    r->pos = es + n;
    if (tensor && mlir_accept(r, ',')) {
        /* `#stablehlo.bounds<8, ?>`: a bound per dim, `?` for static and unbounded ones */
        mlir_skip_ws(r);
        if (!mlir_accept(r, '#') || !mlir_accept_word(r, "stablehlo.bounds") ||
            !mlir_expect(r, '<', "after #stablehlo.bounds"))
            return FAIL(r, "expected a tensor encoding #stablehlo.bounds<...>, found %s",
                        mlir_found(r));
        for (int i = 0; i < rank; i++) {
            if (i && !mlir_expect(r, ',', "between bounds")) return false;
            mlir_skip_ws(r);
            if (mlir_accept(r, '?')) continue;
            size_t at = r->pos;
            int64_t b;
            if (!mlir_parse_int(r, &b, "a bound or '?'")) return false;
            if (!dyn[i])
                return mlir_fail_at(r, at, "a bound on static dimension %d (of size %lld)", i,
                                    (long long)dims[i]);
            if (b < 0) return mlir_fail_at(r, at, "negative bound %lld", (long long)b);
            dims[i] = b;
        }
        if (!mlir_expect(r, '>', "closing the bounds")) return false;
    }
    if (tensor && !mlir_expect(r, '>', "closing the tensor type")) return false;
    /* As the HLO parser (XLA's ValidateShape): the byte size fits in int64, so that element
     * counts and sizes computed from the shape never overflow. */
    int64_t bytes = gs_type_is_array(t) ? gs_type_size(t) : 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] > 0 && bytes > INT64_MAX / dims[i])
            return mlir_fail_at(r, start,
                                "tensor type is too large: its size in bytes overflows "
                                "64 bits");
        if (dims[i] >= 0) bytes *= dims[i];
    }
    *out = gs_shape_array(r->a, t, rank, dims);
    if (!*out) return mlir_oom(r);
    if (any_dyn && !((*out)->dynamic = gs_arena_memdup(r->a, dyn, sizeof(bool) * (size_t)rank)))
        return mlir_oom(r);
    return true;
}

/* `(T, T) -> R`, `(T) -> (R, R)`, or a plain type list `T[, T...]`. Fills ins/outs (up to max
 * each); a plain list gives *n_in = number written and *n_out = -1. */
bool mlir_parse_type_spec(reader *r, gs_shape **ins, int *n_in, gs_shape **outs, int *n_out,
                          int max) {
    *n_in = 0;
    *n_out = -1;
    if (mlir_accept(r, '(')) {
        if (!mlir_accept(r, ')')) {
            do {
                if (*n_in >= max) return FAIL(r, "too many operand types");
                if (!mlir_parse_type(r, &ins[(*n_in)++])) return false;
            } while (mlir_accept(r, ','));
            if (!mlir_expect(r, ')', "closing the operand types")) return false;
        }
        mlir_skip_ws(r);
        if (!(mlir_cur(r) == '-' && mlir_ahead(r, 1) == '>'))
            return FAIL(r, "expected '->' in a function type, found %s", mlir_found(r));
        r->pos += 2;
        *n_out = 0;
        if (mlir_accept(r, '(')) {
            if (mlir_accept(r, ')')) return true;
            do {
                if (*n_out >= max) return FAIL(r, "too many result types");
                if (!mlir_parse_type(r, &outs[(*n_out)++])) return false;
            } while (mlir_accept(r, ','));
            return mlir_expect(r, ')', "closing the result types");
        }
        *n_out = 1;
        return mlir_parse_type(r, &outs[0]);
    }
    do {
        if (*n_in >= max) return FAIL(r, "too many types");
        if (!mlir_parse_type(r, &ins[(*n_in)++])) return false;
    } while (mlir_accept(r, ','));
    return true;
}

/* ------------------------------------------------------------------ literals */

static int hexval(char c) {
    return isdigit((unsigned char)c) ? c - '0' : (tolower((unsigned char)c) - 'a' + 10);
}

/* One part of a complex value: a number, or the bit pattern of its f32 (complex<f32>) or f64
 * part (`0x7FC00000`, as MLIR prints NaN and infinities). */
static bool parse_complex_part(reader *r, bool wide, double *v) {
    mlir_skip_ws(r);
    const char *p = r->s + r->pos;
    char *end;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        uint64_t bits = strtoull(p, &end, 16);
        if (wide) {
            memcpy(v, &bits, sizeof *v);
        } else {
            uint32_t b32 = (uint32_t)bits;
            float f;
            memcpy(&f, &b32, sizeof f);
            *v = f;
        }
    } else {
        *v = strtod(p, &end);
    }
    if (end == p) return FAIL(r, "expected a number, found %s", mlir_found(r));
    r->pos += (size_t)(end - p);
    return true;
}

/* One scalar of a dense literal into element i of data (type t). */
static bool parse_scalar(reader *r, void *data, gs_type t, int64_t i) {
    mlir_skip_ws(r);
    if (gs_type_is_complex(t)) {
        double re, im;
        bool wide = gs_type_size(t) == 16;
        if (!mlir_expect(r, '(', "opening a complex value") || !parse_complex_part(r, wide, &re) ||
            !mlir_expect(r, ',', "in a complex value") || !parse_complex_part(r, wide, &im))
            return false;
        gs_elem_set_c(data, t, i, re, im);
        return mlir_expect(r, ')', "closing a complex value");
    }
    if (mlir_accept_word(r, "true") || mlir_accept_word(r, "false")) {
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
        if (end == p) return FAIL(r, "expected a number, found %s", mlir_found(r));
        r->pos += (size_t)(end - p);
        gs_elem_set_f(data, t, i, v);
        return true;
    }
    if (!(isdigit((unsigned char)p[0]) || p[0] == '-'))
        return FAIL(r, "expected an integer, found %s", mlir_found(r));
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
    if (mlir_accept(r, '[')) {
        if (mlir_accept(r, ']')) return true;
        do {
            if (!parse_nested(r, data, t, n, k)) return false;
        } while (mlir_accept(r, ','));
        return mlir_expect(r, ']', "closing a list of values");
    }
    if (*k >= n) return FAIL(r, "more values than the type's %lld elements", (long long)n);
    return parse_scalar(r, data, t, (*k)++);
}

/* The body of `dense<...>` at the cursor (after `<`) for array shape s: new literal data. */
bool mlir_parse_dense_body(reader *r, const gs_shape *s, gs_literal_ir **out) {
    if (!gs_shape_is_array(s)) return FAIL(r, "a dense literal needs a tensor type");
    if (!gs_type_supported(s->type) || s->type == GS_S2 || s->type == GS_U2 || s->type == GS_S4 ||
        s->type == GS_U4)
        return FAIL(r, "dense literals of %s are not supported yet", gs_type_name(s->type));
    for (int i = 0; i < s->rank; i++)
        if (s->dynamic && s->dynamic[i])
            return FAIL(r, "a dense literal needs every dimension's size: dimension %d is "
                           "dynamic ('?')", i);
    int64_t n = gs_shape_elements(s);
    size_t es = (size_t)gs_type_size(s->type), bytes = (size_t)n * es;
    if ((int64_t)bytes > r->max_lit)
        return FAIL(r,
                    "dense literal of %lld elements would take %zu bytes, more than the limit "
                    "of %lld",
                    (long long)n, bytes, (long long)r->max_lit);
    /* A list writes each value in at least one character: never allocate for more values than
     * the rest of the text could hold. */
    if (mlir_peek(r) == '[' && (int64_t)(r->len - r->pos) < n)
        return FAIL(r, "dense literal is shorter than the type's %lld elements", (long long)n);
    gs_literal_ir *lit = GS_NEW(r->a, gs_literal_ir);
    if (!lit) return mlir_oom(r);
    lit->n_bytes = bytes;
    lit->data = gs_arena_alloc(r->a, bytes ? bytes : 1);
    if (!lit->data) return mlir_oom(r);
    size_t start = r->pos;
    if (mlir_peek(r) == '"' && mlir_ahead(r, 1) == '0' &&
        (mlir_ahead(r, 2) == 'x' || mlir_ahead(r, 2) == 'X')) {
        r->pos += 3;
        size_t h = r->pos, nh = 0;
        while (h + nh < r->len && isxdigit((unsigned char)r->s[h + nh])) nh++;
        if (h + nh >= r->len || r->s[h + nh] != '"' || nh % 2)
            return mlir_fail_at(r, start, "bad hex literal");
        size_t nb = nh / 2;
        if (nb != bytes && nb != es)
            return mlir_fail_at(r, start, "hex literal has %zu bytes, the type needs %zu", nb,
                                bytes);
        unsigned char *d = lit->data;
        for (size_t i = 0; i < nb; i++)
            d[i] = (unsigned char)(hexval(r->s[h + 2 * i]) * 16 + hexval(r->s[h + 2 * i + 1]));
        if (nb == es && nb != bytes)
            for (int64_t i = 1; i < n; i++) memcpy(d + (size_t)i * es, d, es);
        if (s->type == GS_PRED) /* a pred byte is 0 or 1 (`0x0102` is two trues) */
            for (size_t i = 0; i < bytes; i++) d[i] = d[i] != 0;
        r->pos = h + nh + 1;
    } else if (mlir_peek(r) == '[') {
        int64_t k = 0;
        if (!parse_nested(r, lit->data, s->type, n, &k)) return false;
        if (k != n)
            return mlir_fail_at(r, start, "dense literal has %lld values, the type has %lld",
                                (long long)k, (long long)n);
    } else if (n == 0 && mlir_peek(r) == '>') {
        /* dense<> : tensor<0xf32> */
    } else {
        unsigned char one[16];
        if (!parse_scalar(r, n ? lit->data : one, s->type, 0)) return false;
        for (int64_t i = 1; i < n; i++) memcpy((char *)lit->data + (size_t)i * es, lit->data, es);
    }
    if (!mlir_expect(r, '>', "closing the dense literal")) return false;
    *out = lit;
    return true;
}

/* ------------------------------------------------------------------ attributes */

/* A value after `key =` in a pretty op or an attribute dictionary, into kv (what gspmd does not
 * use is skipped). */

/* `key = value, ...` up to `close` (the opening bracket already read). Flattens nested
 * `#dialect.attr<k = v>` values. */
bool mlir_parse_kv_list(reader *r, gs_vec *out, char close) {
    if (mlir_accept(r, close)) return true;
    do {
        kv k = {0};
        size_t n = mlir_ident_len(r);
        if (!n && mlir_peek(r) == '"') {
            if (!mlir_parse_string(r, &k.key)) return false;
        } else if (!mlir_parse_ident(r, &k.key, "an attribute name")) {
            return false;
        }
        if (mlir_accept(r, '=')) {
            size_t before = out->n;
            k.value_pos = (mlir_skip_ws(r), r->pos);
            if (mlir_peek(r) == '#' && strncmp(r->s + r->pos, "#sdy.", 5) != 0) {
                /* #stablehlo.scatter<a = [0], b = 1> flattens; #stablehlo<comparison_direction
                 * EQ> is an ident value */
                size_t save = r->pos;
                r->pos++;
                while (r->pos < r->len && mlir_is_id_char(r->s[r->pos])) r->pos++;
                if (mlir_cur(r) == '<' && mlir_ident_len(r) == 0) {
                    r->pos++;
                    size_t inner = r->pos;
                    size_t n1 = mlir_ident_len(r);
                    if (n1 && (r->pos += n1, mlir_peek(r) == '=')) {
                        r->pos = inner;
                        if (!mlir_parse_kv_list(r, out, '>')) return false;
                        (void)before;
                        continue;
                    }
                    r->pos = inner;
                    if (n1) {
                        /* `#stablehlo<comparison_direction EQ>`: the last word is the value */
                        const char *w = NULL;
                        while (mlir_ident_len(r)) {
                            if (!mlir_parse_ident(r, &w, "a word")) return false;
                        }
                        k.ident = w;
                        if (!mlir_expect(r, '>', "closing the attribute")) return false;
                        if (gs_vec_push(out, &k) != GS_OK) return mlir_oom(r);
                        continue;
                    }
                }
                r->pos = save;
            }
            if (!mlir_parse_attr_value(r, &k)) return false;
        }
        if (gs_vec_push(out, &k) != GS_OK) return mlir_oom(r);
    } while (mlir_accept(r, ','));
    return mlir_expect(r, close, "closing the attributes");
}

/* A `: i64` after a scalar attribute value, when one follows (not an op's `: tensor<..>`). */
static bool skip_scalar_type(reader *r) {
    size_t save = r->pos;
    if (!mlir_accept(r, ':')) return true;
    size_t n = mlir_ident_len(r);
    if (n && !mlir_at_word(r, "tensor") && !mlir_at_word(r, "tuple")) {
        r->pos += n;
        return true;
    }
    r->pos = save;
    return true;
}

bool mlir_parse_attr_value(reader *r, kv *k) {
    char c = mlir_peek(r);
    if (c == '[') {
        /* [1, 2], [DEFAULT, DEFAULT], [1] x [0] */
        size_t save = r->pos;
        r->pos++;
        if (mlir_peek(r) != ']' && !isdigit((unsigned char)mlir_peek(r)) && mlir_peek(r) != '-') {
            r->pos = save;
            return mlir_skip_balanced(r);
        }
        r->pos = save;
        if (!mlir_parse_int_list(r, k->a, &k->n_a, "a list of integers")) return false;
        if (mlir_at_word(r, "x")) {
            r->pos++;
            if (!mlir_parse_int_list(r, k->b, &k->n_b, "a list of integers")) return false;
        }
        return true;
    }
    if (isdigit((unsigned char)c) || c == '-') {
        int64_t v;
        size_t num = r->pos;
        if (!mlir_parse_int(r, &v, "an integer")) return false;
        if (mlir_cur(r) == '.' || mlir_cur(r) == 'e' || mlir_cur(r) == 'E') { /* a float */
            char *end;
            k->f = strtod(r->s + num, &end);
            k->is_float = true;
            r->pos = (size_t)(end - r->s);
        } else {
            k->is_int = true;
            k->a[0] = v;
            k->n_a = 1;
        }
        return skip_scalar_type(r);
    }
    if (c == '"') {
        const char *s;
        if (!mlir_parse_string(r, &s)) return false;
        k->ident = s;
        return skip_scalar_type(r);
    }
    if (mlir_at_word(r, "array")) {
        r->pos += 5;
        if (!mlir_expect(r, '<', "after 'array'")) return false;
        size_t n = mlir_ident_len(r);
        r->pos += n;
        if (mlir_accept(r, '>')) return true;
        if (!mlir_expect(r, ':', "in an array attribute")) return false;
        if (mlir_accept(r, '>')) return true;
        do {
            if (k->n_a >= GS_MAX_RANK) return FAIL(r, "array attribute too long");
            if (mlir_accept_word(r, "true")) {
                k->a[k->n_a++] = 1;
            } else if (mlir_accept_word(r, "false")) {
                k->a[k->n_a++] = 0;
            } else if (!mlir_parse_int(r, &k->a[k->n_a++], "an integer")) {
                return false;
            }
        } while (mlir_accept(r, ','));
        return mlir_expect(r, '>', "closing the array attribute");
    }
    if (mlir_at_word(r, "dense")) {
        k->dense_pos = r->pos;
        r->pos += 5;
        mlir_skip_ws(r);
        if (mlir_cur(r) != '<') return FAIL(r, "expected '<' after 'dense'");
        if (!mlir_skip_balanced(r)) return false;
        if (!mlir_expect(r, ':', "after a dense literal")) return false;
        if (!mlir_parse_type(r, &k->dense_type)) return false;
        /* an integer list, when it is one */
        if (gs_shape_is_array(k->dense_type) && gs_type_is_int(k->dense_type->type) &&
            k->dense_type->rank <= 1 && gs_shape_elements(k->dense_type) <= GS_MAX_RANK) {
            size_t save = r->pos;
            r->pos = k->dense_pos + 5;
            mlir_skip_ws(r);
            r->pos++;
            if (mlir_peek(r) == '[') {
                if (!mlir_parse_int_list(r, k->a, &k->n_a, "a list of integers")) return false;
            } else if (isdigit((unsigned char)mlir_peek(r)) || mlir_peek(r) == '-') {
                if (!mlir_parse_int(r, &k->a[0], "an integer")) return false;
                k->n_a = 1;
            }
            r->pos = save;
        }
        return true;
    }
    if (c == '#' || c == '{' || c == '<' || c == '(' || c == '@') {
        if (c == '#' || c == '@') {
            r->pos++;
            while (r->pos < r->len && (mlir_is_id_char(mlir_cur(r)) || mlir_cur(r) == '"'))
                r->pos++;
            if (mlir_cur(r) != '<') return true;
        }
        return mlir_skip_balanced(r);
    }
    size_t n = mlir_ident_len(r);
    if (n) {
        if (!mlir_parse_ident(r, &k->ident, "a value")) return false;
        if (strcmp(k->ident, "true") == 0 || strcmp(k->ident, "false") == 0) {
            k->is_int = true;
            k->a[0] = k->ident[0] == 't';
            k->n_a = 1;
        }
        if (mlir_peek(r) == '<') return mlir_skip_balanced(r);
        return true;
    }
    return FAIL(r, "expected an attribute value, found %s", mlir_found(r));
}

const kv *mlir_find_kv(const gs_vec *v, const char *key) {
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(GS_VEC_AT(v, kv, i).key, key) == 0) return &GS_VEC_AT(v, kv, i);
    return NULL;
}
