/*
 * src/mlir/internal.h — private to src/mlir: the StableHLO reader's state (reader), the flattened
 * attribute pairs (kv) and the functions its files share: the cursor (lexer.c), types, literals
 * and attributes (types.c), ops (ops.c), chlo ops decomposed into HLO (chlo.c), shardings
 * (shardings.c), values, regions and functions (reader.c). The library sees only mlir.h.
 */
#ifndef GSPMD_MLIR_PRIVATE_H
#define GSPMD_MLIR_PRIVATE_H

#include "base/internal.h"
#include "gspmd/builder.h"
#include "gspmd/numeric.h"
#include "mlir/mlir.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One named SSA value in scope. */
typedef struct value_ent {
    const char *name; /* without the `%`, NUL-terminated (arena) */
    gs_instr *in;     /* its instruction (a tuple when it has several results) */
    int n_results;    /* results it names (`%0:2` → 2), 1 otherwise */
    size_t hides;     /* 1 + index of the entry of the same name it hides (0: none) */
} value_ent;

/* A key = value of an op's attributes, flattened (`#stablehlo.dot<a = [1]>` gives key a). */
typedef struct kv {
    const char *key; /* attribute name (arena) */
    int n_a, n_b;    /* integers of the value (`[1, 2]`, `3`, `array<i64: 1>`), and after ` x ` */
    int64_t a[GS_MAX_RANK], b[GS_MAX_RANK];
    bool is_int;          /* a single integer (or bool: 0/1) */
    bool is_float;        /* a float (`1.0e-03 : f32`), in f */
    double f;
    const char *ident;    /* a bare word value (`EQ`, `true`), or NULL */
    size_t value_pos;     /* where its value starts (after `=` and spaces) */
    size_t dense_pos;     /* a `dense<` value: position of `dense` (0 when none) */
    gs_shape *dense_type; /* its type */
} kv;

typedef struct reader {
    const gs_source *src;
    const char *s;   /* the text */
    size_t len;      /* its length */
    size_t pos;      /* cursor */
    size_t *line_starts; /* offsets where each line starts (arena; built on first use) */
    size_t n_lines;
    size_t line_hint;  /* the line of the last span found (mlir_span_at) */
    gs_module *m;      /* module being built */
    gs_arena *a;       /* its arena */
    gs_diags *d;       /* diagnostics */
    bool failed;       /* an error was reported */
    int64_t max_lit;   /* the most bytes a dense literal may take (gs_parse_options) */
    gs_names names;    /* instruction and computation names */
    gs_vec values;     /* value_ent, the values in scope */
    gs_strmap value_index; /* name → 1 + index in values of its latest entry (reader.c) */
    gs_strmap types;       /* `tensor<...>` text → its shape, read once (types.c) */
    size_t scope;      /* values[scope..] are the current region's */
    gs_strmap funcs;   /* function name → gs_computation (declared or defined) */
    gs_strmap defined; /* function name → (void *)1 once its body is read */
    int n_defined;     /* functions read so far */
    gs_vec funcs_list; /* gs_computation *, every function in order of first mention */
    gs_vec pending_called; /* mlir_called: a custom-call's called_computations, resolved when
                              every function is read (mlir_resolve_called) */
    gs_builder b;      /* appends to the computation being read */
    gs_vec mesh_names; /* const char *: the `sdy.mesh @NAME`s, in order */
    gs_vec meshes;     /* gs_mesh: their meshes */
    gs_strmap loc_aliases; /* `#loc3` → 1 + position of its `loc(...)` (locations.c) */
    size_t last_loc;       /* position of the last `loc(` skipped as whitespace (0: none) */
    size_t last_loc_end;   /* where the whitespace after it ended */
    const int *region_arg_counts; /* for the next mlir_parse_region: each arg's result count */
    int depth; /* regions being read inside one another (at most MLIR_MAX_DEPTH) */
} reader;

/* Regions nested deeper are an error (each level takes stack in the recursive reader). */
#define MLIR_MAX_DEPTH 64

/* Reports a located error at the cursor (the first error wins; later ones are dropped). */
#define FAIL(r, ...) mlir_fail_at((r), (r)->pos, __VA_ARGS__)

/* ---- lexer.c */
gs_span mlir_span_at(reader *r, size_t off);
__attribute__((format(printf, 3, 4))) bool mlir_fail_at(reader *r, size_t off, const char *fmt,
                                                        ...);
bool mlir_oom(reader *r);
/* The character at the cursor (k ahead of it), 0 at the end. Inline: called per character. */
static inline char mlir_cur(const reader *r) { return r->pos < r->len ? r->s[r->pos] : 0; }
static inline char mlir_ahead(const reader *r, size_t k) {
    return r->pos + k < r->len ? r->s[r->pos + k] : 0;
}
/* Letters, digits, `_`, `$` and `.` (ASCII, as isalnum in the C locale). */
static inline bool mlir_is_id_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '.';
}
bool mlir_skip_balanced(reader *r);
void mlir_skip_ws_slow(reader *r);
/* Skips whitespace, `//` comments and `loc(...)` locations (the common case, a token right at
 * the cursor, inline). */
static inline void mlir_skip_ws(reader *r) {
    char c = mlir_cur(r);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '/' || c == 'l')
        mlir_skip_ws_slow(r);
}
static inline char mlir_peek(reader *r) {
    mlir_skip_ws(r);
    return mlir_cur(r);
}
static inline bool mlir_accept(reader *r, char c) {
    if (mlir_peek(r) != c) return false;
    r->pos++;
    return true;
}
const char *mlir_found(reader *r);
bool mlir_expect(reader *r, char c, const char *context);
size_t mlir_ident_len(reader *r);
bool mlir_at_word(reader *r, const char *w);
bool mlir_accept_word(reader *r, const char *w);
bool mlir_parse_ident(reader *r, const char **out, const char *what);
bool mlir_parse_int(reader *r, int64_t *v, const char *what);
bool mlir_parse_int_list(reader *r, int64_t *v, int *n, const char *what);
bool mlir_parse_string(reader *r, const char **out);
bool mlir_parse_symbol(reader *r, const char **out);
bool mlir_scan_value_name(reader *r, size_t *at, size_t *n, int *index, bool allow_index);
bool mlir_parse_value_name(reader *r, const char **name, int *index, bool allow_index);

/* ---- types.c */
bool mlir_parse_type(reader *r, gs_shape **out);
bool mlir_parse_type_spec(reader *r, gs_shape **ins, int *n_in, gs_shape **outs, int *n_out,
                          int max);
bool mlir_parse_dense_body(reader *r, const gs_shape *s, gs_literal_ir **out);
bool mlir_parse_kv_list(reader *r, gs_vec *out, char close);
bool mlir_parse_attr_value(reader *r, kv *k);

const kv *mlir_find_kv(const gs_vec *v, const char *key);

/* ---- ops.c */
bool mlir_parse_op(reader *r, gs_computation *c, bool *ended);
/* A custom-call's `called_computations = [@f, ...]` (pending: instruction and the position of
 * the list), attached once every function is read: the functions the module defines, in
 * order (a name it does not define is left out, as MLIR's verifier does not check them). */
typedef struct mlir_called {
    gs_instr *in;
    size_t value_pos;
} mlir_called;
bool mlir_resolve_called(reader *r);

/* ---- shardings.c */
bool mlir_parse_mesh_decl(reader *r);
bool mlir_sharding_from_kvs(reader *r, const gs_vec *kvs, const gs_shape *shape,
                            gs_sharding **out);
/* The same, unchecked: an outfeed's HLO sharding is of the data it sends, not of its token. */
bool mlir_sharding_from_kvs_as_written(reader *r, const gs_vec *kvs, gs_sharding **out);
bool mlir_apply_op_sharding(reader *r, gs_instr *in, const gs_vec *kvs);
/* Is s a sharding for a value of shape `shape`? Else a located error at `at`. */
bool mlir_sharding_fits(reader *r, const gs_sharding *s, const gs_shape *shape, size_t at);
/* custom-call @target(ops) of the given shape, with sharding s (may be NULL); NULL when out of
 * memory. */
gs_instr *mlir_custom_call(reader *r, const char *target, const gs_shape *shape, int n,
                           gs_instr **ops, const gs_sharding *s);
bool mlir_parse_sdy_op(reader *r, const char *opname, size_t op_pos, gs_instr **result,
                       int *n_results);
/* ---- chlo.c */
/* Reads the rest of chlo op `opname` (at op_pos; `generic`: the quoted form) and builds its
 * decomposition; *result is the value (a tuple for several results). False after a located
 * error. */
bool mlir_parse_chlo(reader *r, const char *opname, size_t op_pos, bool generic, gs_instr **result);

/* ---- locations.c */
bool mlir_scan_loc_aliases(reader *r);
/* Sets in's metadata from the location right after the op that started at op_pos, if any. */
bool mlir_take_loc(reader *r, gs_instr *in, size_t op_pos);

/* ---- reader.c */
bool mlir_define_value(reader *r, const char *name, gs_instr *in, int n_results);
bool mlir_lookup_value(reader *r, gs_instr **out);
bool mlir_parse_region(reader *r, const char *stem, int n_args, const char **arg_names,
                       gs_shape **arg_types, const gs_shape *tupled, gs_computation **out);
/* The values of the current scope that the region at the cursor (`{`) uses, first use first, at
 * most max (an error beyond); *n their number. The cursor does not move. */
bool mlir_region_captures(reader *r, value_ent *vals, int *n, int max);
bool mlir_parse_capturing_region(reader *r, const char *stem, gs_computation **out,
                                 gs_instr **operand);
bool mlir_set_root(reader *r, gs_computation *c, int n, gs_instr **results, size_t at);
gs_computation *mlir_func_comp(reader *r, const char *name);
#endif
