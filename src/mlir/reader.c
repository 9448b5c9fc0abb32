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
 *
 * This file holds the structure: values in scope, regions, functions and the module. The
 * cursor is in lexer.c, types and attributes in types.c, ops in ops.c; internal.h shares the
 * reader state between them.
 */
#include "mlir/mlir.h"
#include "mlir/internal.h"

#include "gspmd/sharding.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ values */

/* Values are found by name through r->value_index (name → 1 + index of its latest entry); each
 * entry keeps the one it hides, restored when its region ends. */
bool mlir_define_value(reader *r, const char *name, gs_instr *in, int n_results) {
    value_ent e = {name, in, n_results, 0};
    if (gs_vec_push(&r->values, &e) != GS_OK) return mlir_oom(r);
    void *hides = (void *)(uintptr_t)r->values.n; /* in: its position; out: the one it hides */
    if (gs_strmap_swap(&r->value_index, name, &hides) != GS_OK) return mlir_oom(r);
    GS_VEC_AT(&r->values, value_ent, r->values.n - 1).hides = (size_t)(uintptr_t)hides;
    return true;
}

/* The entry of the value named name[0..n) in the current region, or NULL. */
static value_ent *find_value(reader *r, const char *name, size_t n) {
    size_t at = (size_t)(uintptr_t)gs_strmap_getn(&r->value_index, name, n);
    if (!at || at - 1 < r->scope) return NULL;
    return &GS_VEC_AT(&r->values, value_ent, at - 1);
}

/* Ends the values defined from entry `to` on (a region's or a function's). */
static bool pop_values(reader *r, size_t to) {
    while (r->values.n > to) {
        value_ent *e = &GS_VEC_AT(&r->values, value_ent, r->values.n - 1);
        if (gs_strmap_put(&r->value_index, e->name, (void *)(uintptr_t)e->hides) != GS_OK)
            return mlir_oom(r);
        r->values.n--;
    }
    return true;
}

/* The instruction a use `%name[#i]` names, in the current region. */
bool mlir_lookup_value(reader *r, gs_instr **out) {
    size_t at = (mlir_skip_ws(r), r->pos), name_at, n;
    int index;
    if (!mlir_scan_value_name(r, &name_at, &n, &index, true)) return false;
    const char *name = r->s + name_at;
    int len = (int)n;
    value_ent *e = find_value(r, name, n);
    if (e) {
        if (index < 0) {
            if (e->n_results != 1)
                return mlir_fail_at(r, at, "value '%%%.*s' has %d results: name one as %%%.*s#i",
                                    len, name, e->n_results, len, name);
            *out = e->in;
            return true;
        }
        if (e->n_results == 1 && index == 0) {
            *out = e->in;
            return true;
        }
        if (index >= e->n_results || !gs_shape_is_tuple(e->in->shape))
            return mlir_fail_at(r, at, "value '%%%.*s' has no result %d", len, name, index);
        r->b.span = mlir_span_at(r, at);
        *out = gs_build_gte(&r->b, e->in, index);
        if (!*out) return mlir_oom(r);
        /* result i keeps its part of the op's sharding, as XLA's export gives the element */
        const gs_sharding *sh = gs_instr_get_sharding(e->in);
        if (sh && sh->kind == GS_SHARDING_TUPLE && sh->n_tuple == e->in->shape->n_tuple &&
            !gs_shape_is_tuple((*out)->shape))
            sh = sh->tuple[index];
        else if (sh && sh->kind == GS_SHARDING_TUPLE)
            sh = NULL;
        if (sh && gs_instr_set_sharding(r->m, *out, sh) != GS_OK) return mlir_oom(r);
        return true;
    }
    return mlir_fail_at(r, at, "use of undefined value '%%%.*s'", len, name);
}

static bool parse_ops(reader *r, gs_computation *c, char close, const char *what);

/* A region `{ [^bb0(%a: T, ...):] op* }` (or with args already given in args) read into a new
 * computation named from stem. With tupled (a tuple of the arg types) the computation takes one
 * tuple parameter and the args are its elements, as HLO's while condition and body do. */
bool mlir_parse_region(reader *r, const char *stem, int n_args, const char **arg_names,
                       gs_shape **arg_types, const gs_shape *tupled, gs_computation **out) {
    if (r->depth >= MLIR_MAX_DEPTH) return FAIL(r, "regions nested deeper than %d", MLIR_MAX_DEPTH);
    r->depth++;
    gs_builder saved = r->b;
    size_t saved_scope = r->scope;
    const char *name = gs_names_fresh(&r->names, r->a, stem);
    gs_computation *c = name ? gs_computation_new(r->m, name) : NULL;
    if (!c) return mlir_oom(r);
    c->span = mlir_span_at(r, r->pos);
    gs_builder_init(&r->b, r->m, c, &r->names);
    r->scope = r->values.n;
    if (!mlir_expect(r, '{', "opening a region")) return false;
    const char *names_buf[64];
    gs_shape *types_buf[64];
    if (mlir_peek(r) == '^') {
        while (r->pos < r->len && mlir_is_id_char(mlir_ahead(r, 1))) r->pos++;
        r->pos++;
        n_args = 0;
        arg_names = names_buf;
        arg_types = types_buf;
        if (mlir_accept(r, '(') && !mlir_accept(r, ')')) {
            do {
                int idx;
                if (n_args >= 64) return FAIL(r, "too many block arguments");
                if (!mlir_parse_value_name(r, &names_buf[n_args], &idx, false) ||
                    !mlir_expect(r, ':', "after a block argument") ||
                    !mlir_parse_type(r, &types_buf[n_args]))
                    return false;
                n_args++;
            } while (mlir_accept(r, ','));
            if (!mlir_expect(r, ')', "closing the block arguments")) return false;
        }
        if (!mlir_expect(r, ':', "after the block label")) return false;
        if (tupled && n_args != tupled->n_tuple)
            return FAIL(r, "the region declares %d arguments, its op gives it %d", n_args,
                        tupled->n_tuple);
    }
    r->b.span = c->span;
    gs_instr *tuple = tupled ? gs_build_parameter(&r->b, 0, tupled, NULL) : NULL;
    if (tupled && !tuple) return mlir_oom(r);
    const int *counts = r->region_arg_counts;
    r->region_arg_counts = NULL;
    for (int i = 0; i < n_args; i++) {
        gs_instr *p = tuple ? gs_build_gte(&r->b, tuple, i)
                            : gs_build_parameter(&r->b, i, arg_types[i], NULL);
        if (!p || !mlir_define_value(r, arg_names[i], p, counts ? counts[i] : 1))
            return mlir_oom(r);
    }
    if (!parse_ops(r, c, '}', "region")) return false;
    if (!pop_values(r, r->scope)) return false;
    r->depth--;
    r->scope = saved_scope;
    r->b = saved;
    *out = c;
    return true;
}

/* The values of the current scope that the region at the cursor (`{`) uses: what a region of
 * `case`, `if` or `while` may take from around it (its names are not redefined inside: SSA).
 * Fills vals (up to max, first use first); *n their number. */
bool mlir_region_captures(reader *r, value_ent *vals, int *n, int max) {
    *n = 0;
    size_t save = r->pos, start = (mlir_skip_ws(r), r->pos);
    if (!mlir_skip_balanced(r)) return false;
    size_t end = r->pos;
    r->pos = save;
    char name[128];
    for (size_t i = start; i < end; i++) {
        char c = r->s[i];
        if (c == '"') { /* strings may hold a '%' */
            for (i++; i < end && r->s[i] != '"'; i++)
                if (r->s[i] == '\\') i++;
            continue;
        }
        if (c != '%') continue;
        size_t k = 0;
        while (i + 1 + k < end && k + 1 < sizeof name &&
               (mlir_is_id_char(r->s[i + 1 + k]) || r->s[i + 1 + k] == '-'))
            name[k] = r->s[i + 1 + k], k++;
        name[k] = 0;
        i += k;
        if (!k) continue;
        value_ent *e = find_value(r, name, k);
        if (e) {
            bool seen = false;
            for (int q = 0; q < *n; q++) seen |= vals[q].in == e->in;
            if (!seen) {
                if (*n >= max) return FAIL(r, "a region uses more than %d outer values", max);
                vals[(*n)++] = *e;
            }
        }
    }
    return true;
}

/* A region at the cursor that may use values from around it (a branch of `case` or `if`): a
 * computation of one parameter, the value it uses or a tuple of them (built here); *operand is
 * that value. */
bool mlir_parse_capturing_region(reader *r, const char *stem, gs_computation **out,
                                 gs_instr **operand) {
    value_ent caps[64];
    int n;
    if (!mlir_region_captures(r, caps, &n, 64)) return false;
    const char *names[64];
    gs_shape *types[64];
    gs_instr *ins[64];
    int counts[64];
    for (int i = 0; i < n; i++) {
        names[i] = caps[i].name;
        types[i] = caps[i].in->shape;
        ins[i] = caps[i].in;
        counts[i] = caps[i].n_results;
    }
    r->region_arg_counts = counts;
    if (n == 1) { /* the one value it uses is its parameter */
        *operand = ins[0];
        return mlir_parse_region(r, stem, 1, names, types, NULL, out);
    }
    gs_shape *tupled = gs_shape_tuple(r->a, n, types);
    *operand = tupled ? gs_build_tuple(&r->b, n, ins) : NULL;
    if (!*operand) return mlir_oom(r);
    return mlir_parse_region(r, stem, n, names, types, tupled, out);
}

/* Makes results[0..n) the root of c (a tuple when n != 1). */
bool mlir_set_root(reader *r, gs_computation *c, int n, gs_instr **results, size_t at) {
    gs_instr *root;
    if (n == 1 && !results[0]->is_root) {
        root = results[0];
    } else {
        r->b.span = mlir_span_at(r, at);
        root = gs_build_tuple(&r->b, n, results);
        if (!root) return mlir_oom(r);
    }
    if (c->root) c->root->is_root = false;
    c->root = root;
    root->is_root = true;
    return true;
}

/* The computation for function name (declared on first mention). */
gs_computation *mlir_func_comp(reader *r, const char *name) {
    gs_computation *c = gs_strmap_get(&r->funcs, name);
    if (c) return c;
    char stem[128];
    gs_names_hlo(name, stem, sizeof stem); /* MLIR allows `@.main`, `@0f` */
    const char *cn = gs_names_fresh(&r->names, r->a, stem);
    c = cn ? gs_computation_new(r->m, cn) : NULL;
    if (!c || gs_strmap_put(&r->funcs, name, c) != GS_OK ||
        gs_vec_push(&r->funcs_list, &c) != GS_OK)
        return NULL;
    return c;
}

/* Ops up to `close`; the last must be a return. */
static bool parse_ops(reader *r, gs_computation *c, char close, const char *what) {
    bool ended = false;
    while (!mlir_accept(r, close)) {
        if (r->pos >= r->len) return FAIL(r, "expected '%c' closing the %s", close, what);
        if (ended) return FAIL(r, "an op after the %s's return", what);
        if (!mlir_parse_op(r, c, &ended)) return false;
    }
    if (!ended) return FAIL(r, "the %s has no return", what);
    return true;
}

/* ------------------------------------------------------------------ functions and module */

/* An attribute dictionary `{...}` (skipped) when one is at the cursor. */
static bool skip_dict(reader *r) {
    if (mlir_peek(r) != '{') return true;
    return mlir_skip_balanced(r);
}

/* The sharding in an argument's or result's attribute dictionary (`{mhlo.sharding = "..."}`,
 * `{sdy.sharding = #sdy.sharding<...>}`) when one is at the cursor; NULL when none. */
static bool dict_sharding(reader *r, const gs_shape *t, gs_sharding **out) {
    *out = NULL;
    if (mlir_peek(r) != '{') return true;
    r->pos++;
    gs_vec kvs;
    gs_vec_init(&kvs, sizeof(kv));
    bool ok = mlir_parse_kv_list(r, &kvs, '}') && mlir_sharding_from_kvs(r, &kvs, t, out);
    gs_vec_free(&kvs);
    return ok;
}

/* The function's result shardings (NULL: none given, replicated when another result has one)
 * on its root: the root's own sharding for one result, a tuple sharding for several. A result
 * that is also an argument or another result's value gets a copy to carry its sharding. */
static bool set_result_shardings(reader *r, gs_computation *c, int n, gs_sharding **sh, size_t at) {
    gs_instr *root = c->root;
    int n_root = gs_shape_is_tuple(root->shape) ? root->shape->n_tuple : 1;
    if (n != n_root)
        return mlir_fail_at(r, at, "the function declares %d results and returns %d", n, n_root);
    for (int i = 0; i < n; i++) {
        if (!sh[i] && !(sh[i] = gs_sharding_replicated(r->a))) return mlir_oom(r);
        /* against the value returned (the declared result types are not checked against it) */
        const gs_shape *v = n == 1 ? root->shape : root->shape->tuple[i];
        if (!mlir_sharding_fits(r, sh[i], v, at)) return false;
    }
    const gs_sharding *own = gs_instr_get_sharding(root);
    /* With Shardy's shardings (the module declares meshes) the op's own sharding and the
     * function's result sharding stay two (a copy carries the result's), as Shardy has them;
     * XLA's import of mhlo.sharding makes them one. */
    bool sdy = r->mesh_names.n > 0;
    if (n == 1 && own && gs_sharding_equal(own, sh[0]) && !sdy) return true;
    if (n == 1 && root->op != GS_OP_PARAMETER && !own && !sdy)
        return gs_instr_set_sharding(r->m, root, sh[0]) == GS_OK || mlir_oom(r);
    r->b.span = root->span;
    gs_builder_init(&r->b, r->m, c, &r->names);
    if (n == 1) {
        gs_instr *copy = gs_build(&r->b, GS_OP_COPY, root->shape, 1, &root);
        if (!copy || !mlir_set_root(r, c, 1, &copy, at)) return mlir_oom(r);
        return gs_instr_set_sharding(r->m, copy, sh[0]) == GS_OK || mlir_oom(r);
    }
    gs_sharding *t = gs_sharding_tuple(r->a, n, sh);
    if (!t || gs_instr_set_sharding(r->m, root, t) != GS_OK) return mlir_oom(r);
    return true;
}

/* A function whose one result carries no sharding: with Shardy's shardings, a copy without
 * one is the root, so that the value returned and the function's result keep shardings of
 * their own (Shardy's two, which propagation sets apart). */
static bool unsharded_result(reader *r, gs_computation *c, size_t at) {
    gs_instr *root = c->root;
    if (!r->mesh_names.n || !root || gs_shape_is_tuple(root->shape)) return true;
    r->b.span = root->span;
    gs_builder_init(&r->b, r->m, c, &r->names);
    gs_instr *copy = gs_build(&r->b, GS_OP_COPY, root->shape, 1, &root);
    return (copy && mlir_set_root(r, c, 1, &copy, at)) || mlir_oom(r);
}

/* func.func [public|private] @name(args) [-> results] [attributes {..}] { ops } */
static bool parse_func(reader *r) {
    size_t start = r->pos;
    bool is_private = false;
    if (!mlir_accept_word(r, "public") && !(is_private = mlir_accept_word(r, "private")))
        mlir_accept_word(r, "nested");
    const char *name;
    if (!mlir_parse_symbol(r, &name)) return false;
    if (gs_strmap_get(&r->defined, name))
        return mlir_fail_at(r, start, "function @%s is defined twice", name);
    gs_computation *c = mlir_func_comp(r, name);
    if (!c || gs_strmap_put(&r->defined, name, (void *)1) != GS_OK) return mlir_oom(r);
    c->span = mlir_span_at(r, start);
    c->symbol = name;
    c->is_private = is_private;
    c->symbol_order = r->n_defined++;
    gs_builder_init(&r->b, r->m, c, &r->names);
    r->scope = r->values.n;
    if (!mlir_expect(r, '(', "opening the function's arguments")) return false;
    int n = 0;
    if (!mlir_accept(r, ')')) {
        do {
            const char *an;
            int idx;
            gs_shape *t;
            size_t at = (mlir_skip_ws(r), r->pos);
            gs_sharding *sh;
            if (!mlir_parse_value_name(r, &an, &idx, false) ||
                !mlir_expect(r, ':', "after an argument") || !mlir_parse_type(r, &t) ||
                !dict_sharding(r, t, &sh))
                return false;
            r->b.span = mlir_span_at(r, at);
            char stem[128];
            gs_names_hlo(an, stem, sizeof stem); /* %arg0 → %arg0; MLIR allows `%$`, `%0` */
            const char *pn = gs_names_fresh(&r->names, r->a, stem);
            gs_instr *p = pn ? gs_build_parameter(&r->b, n++, t, pn) : NULL;
            if (!p || !mlir_define_value(r, an, p, 1)) return mlir_oom(r);
            if (sh && gs_instr_set_sharding(r->m, p, sh) != GS_OK) return mlir_oom(r);
        } while (mlir_accept(r, ','));
        if (!mlir_expect(r, ')', "closing the function's arguments")) return false;
    }
    mlir_skip_ws(r);
    gs_vec res_vec; /* gs_sharding *, one per result */
    gs_vec_init(&res_vec, sizeof(gs_sharding *));
    int n_res = 0;
    bool any_sh = false;
    size_t res_at = r->pos;
    if (mlir_cur(r) == '-' && mlir_ahead(r, 1) == '>') {
        r->pos += 2;
        if (mlir_accept(r, '(')) {
            if (!mlir_accept(r, ')')) {
                do {
                    gs_shape *t;
                    gs_sharding *sh;
                    if (!mlir_parse_type(r, &t) || !dict_sharding(r, t, &sh))
                        return gs_vec_free(&res_vec), false;
                    if (gs_vec_push(&res_vec, &sh) != GS_OK)
                        return gs_vec_free(&res_vec), mlir_oom(r);
                    n_res++;
                    any_sh |= sh != NULL;
                } while (mlir_accept(r, ','));
                if (!mlir_expect(r, ')', "closing the function's results"))
                    return gs_vec_free(&res_vec), false;
            }
        } else {
            gs_shape *t;
            if (!mlir_parse_type(r, &t)) return false;
        }
    }
    bool ok = (!mlir_accept_word(r, "attributes") || skip_dict(r)) &&
              mlir_expect(r, '{', "opening the function's body") &&
              parse_ops(r, c, '}', "function") && pop_values(r, r->scope) &&
              (!any_sh || set_result_shardings(r, c, n_res, res_vec.data, res_at)) &&
              (any_sh || unsharded_result(r, c, res_at));
    gs_vec_free(&res_vec);
    return ok;
}

/* The module's attribute dictionary: mhlo.num_partitions and mhlo.num_replicas become the
 * module's num_partitions and replica_count (and header attributes, as HLO text has them). */
static bool module_attrs(reader *r) {
    if (mlir_peek(r) != '{') return FAIL(r, "expected '{' after 'attributes'");
    size_t at = r->pos, end;
    if (!mlir_skip_balanced(r)) return false;
    end = r->pos;
    r->pos = at + 1;
    if (!(r->m->mlir_attrs = gs_arena_strndup(r->a, r->s + at, end - at))) return mlir_oom(r);
    gs_vec kvs;
    gs_vec_init(&kvs, sizeof(kv));
    bool ok = mlir_parse_kv_list(r, &kvs, '}');
    static const struct {
        const char *key, *hlo;
    } KEYS[] = {{"mhlo.num_partitions", "num_partitions"}, {"mhlo.num_replicas", "replica_count"}};
    gs_module_attr attrs[2];
    int n = 0;
    for (size_t i = 0; ok && i < sizeof KEYS / sizeof KEYS[0]; i++) {
        const kv *k = mlir_find_kv(&kvs, KEYS[i].key);
        if (!k) continue;
        if (!k->is_int || k->a[0] < 1) {
            ok = mlir_fail_at(r, k->value_pos, "%s must be a positive integer", KEYS[i].key);
            break;
        }
        if (i == 0)
            r->m->num_partitions = k->a[0];
        else
            r->m->replica_count = k->a[0];
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)k->a[0]);
        attrs[n].name = KEYS[i].hlo;
        attrs[n].text = gs_arena_strdup(r->a, buf);
        if (!attrs[n++].text) ok = mlir_oom(r);
    }
    if (ok && n) {
        r->m->n_attrs = n;
        r->m->attrs = gs_arena_memdup(r->a, attrs, sizeof attrs[0] * (size_t)n);
        if (!r->m->attrs) ok = mlir_oom(r);
    }
    gs_vec_free(&kvs);
    return ok;
}

static bool parse_module(reader *r) {
    bool braced = false;
    mlir_skip_ws(r);
    while (mlir_peek(r) == '#') { /* #loc = loc(...) aliases */
        while (r->pos < r->len && r->s[r->pos] != '\n') r->pos++;
    }
    if (mlir_accept_word(r, "module")) {
        if (mlir_peek(r) == '@') {
            const char *name;
            if (!mlir_parse_symbol(r, &name)) return false;
            r->m->mlir_symbol = name;
            /* an HLO module name: MLIR allows more (`@0$f`) */
            size_t cap = strlen(name) + 2;
            char *hlo = gs_arena_alloc(r->a, cap);
            if (!hlo) return mlir_oom(r);
            gs_names_hlo(name, hlo, cap);
            r->m->name = hlo;
        }
        if (mlir_accept_word(r, "attributes") && !module_attrs(r)) return false;
        if (!mlir_expect(r, '{', "opening the module")) return false;
        braced = true;
        r->m->mlir_module_op = true;
    }
    for (;;) {
        if (mlir_peek(r) == '#') {
            while (r->pos < r->len && r->s[r->pos] != '\n') r->pos++;
            continue;
        }
        if (braced && mlir_accept(r, '}')) break;
        if (!braced && r->pos >= r->len) break;
        if (mlir_accept_word(r, "func.func")) {
            if (!parse_func(r)) return false;
        } else if (mlir_accept_word(r, "sdy.mesh")) {
            if (!mlir_parse_mesh_decl(r)) return false;
        } else {
            return FAIL(r, "expected 'func.func'%s, found %s", braced ? " or '}'" : "",
                        mlir_found(r));
        }
    }
    while (mlir_peek(r) == '#') {
        while (r->pos < r->len && r->s[r->pos] != '\n') r->pos++;
    }
    if (r->pos < r->len) return FAIL(r, "unexpected text after the module: %s", mlir_found(r));
    return true;
}

/* The module's meshes, kept in it (in its arena) for printing. */
static bool keep_meshes(reader *r) {
    int n = (int)r->mesh_names.n;
    if (!n) return true;
    gs_mesh_table *t = GS_NEW(r->a, gs_mesh_table);
    const char **names = gs_arena_memdup(r->a, r->mesh_names.data, sizeof(char *) * (size_t)n);
    gs_mesh *meshes = gs_arena_memdup(r->a, r->meshes.data, sizeof(gs_mesh) * (size_t)n);
    if (!t || !names || !meshes) return mlir_oom(r);
    *t = (gs_mesh_table){n, names, meshes};
    r->m->meshes = t;
    return true;
}

/* Every called function has a body; the entry (@main, else the last public function defined,
 * else the first, none of them called by another function) goes last. */
static bool is_called(const gs_vec *called, const gs_computation *c) {
    for (size_t i = 0; i < called->n; i++)
        if (GS_VEC_AT(called, gs_computation *, i) == c) return true;
    return false;
}

static bool finish(reader *r) {
    if (!keep_meshes(r) || !mlir_resolve_called(r)) return false;
    gs_computation *entry = gs_strmap_get(&r->funcs, "main");
    for (int i = 0; i < r->m->n_comps; i++) {
        gs_computation *c = r->m->comps[i];
        if (!c->root && c->n_instrs == 0)
            return mlir_fail_at(r, 0, "function '%s' is called but never defined", c->name);
    }
    /* the entry is called by no function (HLO's entry cannot be) */
    gs_vec called;
    gs_vec_init(&called, sizeof(gs_computation *));
    for (int i = 0; i < r->m->n_comps; i++)
        for (int k = 0; k < r->m->comps[i]->n_instrs; k++) {
            const gs_instr *in = r->m->comps[i]->instrs[k];
            gs_computation *f = in->op == GS_OP_CALL ? gs_instr_comp(in, GS_ATTR_TO_APPLY) : NULL;
            if (f && gs_vec_push(&called, &f) != GS_OK) return gs_vec_free(&called), mlir_oom(r);
        }
    if (entry && is_called(&called, entry)) entry = NULL;
    for (size_t i = r->funcs_list.n; !entry && i-- > 0;) {
        gs_computation *c = GS_VEC_AT(&r->funcs_list, gs_computation *, i);
        if (!c->is_private && !is_called(&called, c)) entry = c;
    }
    for (size_t i = 0; !entry && i < r->funcs_list.n; i++) {
        gs_computation *c = GS_VEC_AT(&r->funcs_list, gs_computation *, i);
        if (!is_called(&called, c)) entry = c;
    }
    gs_vec_free(&called);
    if (!entry)
        return mlir_fail_at(r, 0, r->funcs_list.n ? "every function is called by another: no "
                                                    "entry function"
                                                  : "the module has no function");
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
    mlir_skip_ws(&r);
    while (mlir_cur(&r) == '#') { /* attribute and location aliases (`#loc1 = loc(...)`) */
        while (r.pos < r.len && r.s[r.pos] != '\n') r.pos++;
        mlir_skip_ws(&r);
    }
    return mlir_at_word(&r, "module") || mlir_at_word(&r, "func.func") ||
           mlir_at_word(&r, "sdy.mesh");
}

gs_status gs_mlir_read(gs_module *m, const gs_source *src, int64_t max_lit, gs_diags *d) {
    reader r = {.src = src,
                .s = src->text,
                .len = src->len,
                .m = m,
                .a = &m->arena,
                .d = d,
                .max_lit = max_lit};
    /* A module takes about five bytes of arena per byte of its text (MaxText, ResNet and Llama
     * dumps): one chunk for it all, rather than chunks grown and freed one after another, which
     * malloc hands back to the system and takes again (page faults) when modules are read in turn */
    gs_arena_reserve(r.a, 8 * src->len);
    gs_vec_init(&r.values, sizeof(value_ent));
    gs_vec_init(&r.funcs_list, sizeof(gs_computation *));
    gs_vec_init(&r.pending_called, sizeof(mlir_called));
    gs_vec_init(&r.mesh_names, sizeof(const char *));
    gs_vec_init(&r.meshes, sizeof(gs_mesh));
    bool ok = mlir_scan_loc_aliases(&r) && parse_module(&r) && finish(&r);
    if (ok && m->arena.failed) ok = mlir_oom(&r);
    gs_vec_free(&r.values);
    gs_vec_free(&r.funcs_list);
    gs_vec_free(&r.pending_called);
    gs_vec_free(&r.mesh_names);
    gs_vec_free(&r.meshes);
    gs_strmap_free(&r.funcs);
    gs_strmap_free(&r.defined);
    gs_strmap_free(&r.loc_aliases);
    gs_strmap_free(&r.value_index);
    gs_strmap_free(&r.types);
    gs_names_free(&r.names);
    if (!ok && !r.failed) gs_error(d, mlir_span_at(&r, r.pos), "out of memory");
    return ok ? GS_OK : GS_ERR;
}
