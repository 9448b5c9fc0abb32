/*
 * src/mlir/printer.c — gs_module → StableHLO text in MLIR's pretty form, the form JAX and
 * stablehlo-opt print and gspmd's own reader (reader.c, ops.c) reads back.
 *
 * The entry becomes `func.func public @main`, computations run by `call` (and fusions) become
 * `func.func private` functions, and computations used as regions (reducers, comparators, while
 * conditions and bodies, scatter combiners, ...) are printed inline where they are used. HLO's
 * tuples become MLIR's multi-result values where MLIR has them (`%3:2 = stablehlo.while`, used
 * as `%3#1`) and function results; a tuple op is printed (`stablehlo.tuple`) only where a whole
 * tuple value is needed, a get-tuple-element only where the element is not already a value.
 * Shardings are written as Shardy's when the module declares meshes (`sdy.mesh @mesh = <...>`
 * lines first; `sdy.sharding = #sdy.sharding<@mesh, [...]>` on arguments and results,
 * `#sdy.sharding_per_value<[...]>` on ops, `sdy.sharding_constraint` for a `Sharding`
 * custom-call) wherever the sharding has Shardy's form on one of them (its own named form, or
 * one found exactly: gs_sharding_to_named), else as `mhlo.sharding = "{...}"` (HLO sharding
 * text). gs_module_to_mlir_ex's sdy_opt form prints as Shardy's sdy_opt does (MLIR's printer):
 * the input's function names, visibility and order, its module op as written, and on request
 * each op's `sdy.sharding_rule`. Common ops use their pretty form, the others MLIR's generic form
 * `"stablehlo.op"(...) <{props}> ({regions}) : (types) -> types`.
 *
 * Values are numbered %0, %1, ... per function and block arguments %argN, so the text does not
 * depend on the IR's instruction names: printing what the reader reads back prints the same.
 * An op with no StableHLO form (async pairs, send/recv, domain-free custom structure...) is an
 * error located at the instruction, never a crash.
 */
#include "base/internal.h"
#include "gspmd/numeric.h"
#include "gspmd/sharding.h"
#include "gspmd/text.h"
#include "mlir/mlir.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* How an instruction's value is named in the text. */
typedef enum ref_kind {
    REF_VALUE, /* one SSA value (any type, tuples included): name */
    REF_MULTI, /* results of a multi-result op: name#i */
    REF_TUPLE, /* a tuple op not printed: elements are its operands' values */
    REF_ITER,  /* a while region's tuple parameter: elements are the iteration arguments */
} ref_kind;

typedef struct ref {
    ref_kind kind;
    const char *name;      /* VALUE, MULTI: "%3", "%arg0" */
    int n;                 /* MULTI, TUPLE, ITER: element count */
    const char **elems;    /* ITER: element names; VALUE (tuple type): printed elements, lazily */
    const char *whole;     /* MULTI, TUPLE, ITER: the materialized tuple value, once printed */
    const gs_instr *tuple; /* TUPLE: the tuple instruction */
    struct ref *sub0;      /* ITER: element 0 when it is a tuple of named values (infeed data) */
} ref;

/* One computation being printed (a function body or a region). */
typedef struct manual_group manual_group;

typedef struct scope {
    const gs_computation *c;
    ref *refs;              /* one per instruction, by id */
    bool *skip;             /* by id: printed as part of another op (NULL: none) */
    manual_group **manuals; /* by id: the manual computation a call prints as (NULL: none) */
    int n_ret;              /* values its return prints: the first n_ret (-1: all) */
} scope;

/* sdy_opt: what a dry run of a function learnt of one computation's region (MLIR numbers a
 * region's values only after all of its parent region's). */
typedef struct region_info {
    const gs_computation *c; /* the computation printed as a region (or the function) */
    int n_values;            /* numbered values it defines itself */
    int n_conflicts;         /* conflict ids its own names took */
    unsigned used;           /* names taken in it and around it (NAME_* bits) */
} region_info;

/* Names MLIR gives results and block arguments instead of numbers (sdy_opt). */
enum { NAME_C = 1, NAME_CST = 2, NAME_ITER = 4, NAME_OUTPUT_STATE = 8, NAME_OUTPUT = 16 };

typedef struct printer {
    gs_sb *sb;      /* output */
    gs_arena a;     /* names and scopes */
    gs_diags *d;    /* the first error */
    bool failed;    /* an error was reported (or allocation failed) */
    int next_value; /* %N of the function being printed */
    int next_arg;   /* %argN of the function being printed */
    int indent;     /* current indentation, in levels of two spaces */
    const gs_module *m;
    const char **func_names;        /* by computation index: its function symbol, or NULL */
    const gs_mlir_print_options *o; /* how to print */
    bool sdy; /* shardings as Shardy's (`sdy.sharding`) where they have that form: the module
                 declares meshes */
    /* sdy_opt: MLIR's naming (its SSANameState). A region's values are numbered after all of
     * its parent region's, its block arguments after the parent's; constants are `%c` (`%cst`
     * for floats) and a while's arguments `%iterArg`, then NAME_K with K from a conflict counter;
     * sibling regions start alike. A dry run of each function learns each region's counts. */
    bool dry;                  /* this is the dry run (output discarded) */
    const gs_computation *ctx; /* the computation whose region is being printed */
    int value0;                /* its first value number */
    int arg_end;               /* the argument number after its block arguments */
    int conflict0, conflict;   /* its first and next conflict id */
    unsigned used;             /* NAME_* taken in it and around it */
    region_info *info;         /* what the dry run learnt, n_info entries (arena) */
    int n_info, cap_info;
    int manual_depth; /* bodies of sdy.manual_computation being printed */
} printer;

/* The state enter_region saves. */
typedef struct naming {
    const gs_computation *ctx;
    int next_value, next_arg, value0, arg_end, conflict0, conflict;
    unsigned used;
} naming;

static region_info *info_of(printer *p, const gs_computation *c) {
    for (int i = 0; i < p->n_info; i++)
        if (p->info[i].c == c) return &p->info[i];
    return NULL;
}

/* Records (dry run) what the region of the current context took. */
static void record_region(printer *p) {
    if (!p->dry) return;
    region_info *r = info_of(p, p->ctx);
    if (!r) {
        if (p->n_info == p->cap_info) {
            int cap = p->cap_info ? 2 * p->cap_info : 16;
            region_info *v = GS_NEW_ARRAY(&p->a, region_info, cap);
            if (!v) {
                p->failed = true;
                return;
            }
            if (p->n_info) memcpy(v, p->info, sizeof *v * (size_t)p->n_info);
            p->info = v;
            p->cap_info = cap;
        }
        r = &p->info[p->n_info++];
    }
    *r = (region_info){p->ctx, p->next_value - p->value0, p->conflict - p->conflict0, p->used};
}

/* Enters the region of computation c, nested in the current one: in sdy_opt form its numbering
 * starts where MLIR's does. Returns what leave_region restores. */
static naming enter_region(printer *p, const gs_computation *c) {
    naming saved = {p->ctx,     p->next_value, p->next_arg, p->value0,
                    p->arg_end, p->conflict0,  p->conflict, p->used};
    if (!p->o->sdy_opt) return saved;
    const region_info *parent = p->dry ? NULL : info_of(p, p->ctx);
    p->value0 = parent ? p->value0 + parent->n_values : p->next_value;
    p->next_value = p->value0;
    p->next_arg = p->arg_end;
    p->conflict0 = parent ? p->conflict0 + parent->n_conflicts : p->conflict;
    p->conflict = p->conflict0;
    if (parent) p->used = parent->used;
    p->ctx = c;
    return saved;
}

/* Leaves the region entered with enter_region (recording it in the dry run when record). */
static void leave_region(printer *p, naming saved, bool record) {
    if (!p->o->sdy_opt) return;
    if (record) record_region(p);
    p->ctx = saved.ctx;
    p->next_value = saved.next_value;
    p->next_arg = saved.next_arg;
    p->value0 = saved.value0;
    p->arg_end = saved.arg_end;
    p->conflict0 = saved.conflict0;
    p->conflict = saved.conflict;
    p->used = saved.used;
}

/* `%NAME`, or `%NAME_K` when NAME is taken (sdy_opt). */
static const char *unique_name(printer *p, const char *name, unsigned bit) {
    const char *s;
    if (!(p->used & bit)) {
        p->used |= bit;
        s = gs_arena_printf(&p->a, "%%%s", name);
    } else {
        s = gs_arena_printf(&p->a, "%%%s_%d", name, p->conflict++);
    }
    if (!s) p->failed = true;
    return s ? s : "%?";
}

static bool fail(printer *p, const gs_instr *in, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail(printer *p, const gs_instr *in, const char *fmt, ...) {
    if (!p->failed) {
        va_list ap;
        va_start(ap, fmt);
        gs_verror(p->d, in ? in->span : gs_span_none(), fmt, ap);
        va_end(ap);
    }
    p->failed = true;
    return false;
}

static const char *fresh(printer *p, const char *fmt, int k) {
    const char *s = gs_arena_printf(&p->a, fmt, k);
    if (!s) p->failed = true;
    return s ? s : "%?";
}

static void newline(printer *p) {
    gs_sb_putc(p->sb, '\n');
    for (int i = 0; i < p->indent; i++) gs_sb_puts(p->sb, "  ");
}

static void print_escaped(gs_sb *sb, const char *s) {
    gs_sb_putc(sb, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') gs_sb_putc(sb, '\\');
        if (*s == '\n') {
            gs_sb_puts(sb, "\\n");
            continue;
        }
        gs_sb_putc(sb, *s);
    }
    gs_sb_putc(sb, '"');
}

static void print_ints(gs_sb *sb, const int64_t *v, int n) {
    for (int i = 0; i < n; i++) gs_sb_printf(sb, "%s%" PRId64, i ? ", " : "", v[i]);
}

/* `[1, 2]` */
static void print_list(gs_sb *sb, gs_ints v) {
    gs_sb_putc(sb, '[');
    print_ints(sb, v.v, v.n);
    gs_sb_putc(sb, ']');
}

/* `array<i64: 1, 2>` */
static void print_array(gs_sb *sb, const int64_t *v, int n) {
    gs_sb_puts(sb, n ? "array<i64: " : "array<i64");
    print_ints(sb, v, n);
    gs_sb_putc(sb, '>');
}

/* ------------------------------------------------------------------ types */

static const char *element_name(gs_type t) {
    switch (t) {
    case GS_PRED: return "i1";
    case GS_S2: return "i2";
    case GS_S4: return "i4";
    case GS_S8: return "i8";
    case GS_S16: return "i16";
    case GS_S32: return "i32";
    case GS_S64: return "i64";
    case GS_U2: return "ui2";
    case GS_U4: return "ui4";
    case GS_U8: return "ui8";
    case GS_U16: return "ui16";
    case GS_U32: return "ui32";
    case GS_U64: return "ui64";
    case GS_F16: return "f16";
    case GS_BF16: return "bf16";
    case GS_F32: return "f32";
    case GS_F64: return "f64";
    case GS_C64: return "complex<f32>";
    case GS_C128: return "complex<f64>";
    case GS_F8E5M2: return "f8E5M2";
    case GS_F8E4M3FN: return "f8E4M3FN";
    case GS_F8E4M3B11FNUZ: return "f8E4M3B11FNUZ";
    case GS_F8E5M2FNUZ: return "f8E5M2FNUZ";
    case GS_F8E4M3FNUZ: return "f8E4M3FNUZ";
    case GS_F8E4M3: return "f8E4M3";
    case GS_F8E3M4: return "f8E3M4";
    case GS_F8E8M0FNU: return "f8E8M0FNU";
    case GS_F4E2M1FN: return "f4E2M1FN";
    default: return "none";
    }
}

/* `tensor<2x3xf32>`, `tuple<...>`, `!stablehlo.token`; dynamic dims as `?`, with
 * `#stablehlo.bounds<...>` when some of them is bounded (an unbounded one alone has none). */
static void print_type(gs_sb *sb, const gs_shape *s) {
    if (s->type == GS_TOKEN) {
        gs_sb_puts(sb, "!stablehlo.token");
        return;
    }
    if (s->type == GS_TUPLE) {
        gs_sb_puts(sb, "tuple<");
        for (int i = 0; i < s->n_tuple; i++) {
            if (i) gs_sb_puts(sb, ", ");
            print_type(sb, s->tuple[i]);
        }
        gs_sb_putc(sb, '>');
        return;
    }
    gs_sb_puts(sb, "tensor<");
    bool dyn = false;
    for (int i = 0; i < s->rank; i++) {
        bool d = s->dynamic && s->dynamic[i];
        dyn |= d && s->dims[i] >= 0;
        if (d)
            gs_sb_puts(sb, "?x");
        else
            gs_sb_printf(sb, "%" PRId64 "x", s->dims[i]);
    }
    gs_sb_puts(sb, element_name(s->type));
    if (dyn) {
        gs_sb_puts(sb, ", #stablehlo.bounds<");
        for (int i = 0; i < s->rank; i++) {
            if (i) gs_sb_puts(sb, ", ");
            if (s->dynamic[i] && s->dims[i] >= 0)
                gs_sb_printf(sb, "%" PRId64, s->dims[i]);
            else
                gs_sb_putc(sb, '?');
        }
        gs_sb_putc(sb, '>');
    }
    gs_sb_putc(sb, '>');
}

/* The elements a value of shape s has as separate MLIR values: a tuple's elements (1 for a
 * one-element tuple, kept whole), else 1. */
static int n_results(const gs_shape *s) {
    return gs_shape_is_tuple(s) && s->n_tuple != 1 ? s->n_tuple : 1;
}

/* ------------------------------------------------------------------ literals */

/* Shortest decimal text that the reader (strtod, then rounding to t) reads back as exactly the
 * same bits; always with a '.' or an exponent, as MLIR wants for floats. With mlir (sdy_opt's
 * form), MLIR's own choice first: `%.6e` when it reads back exactly. */
static void print_float(gs_sb *sb, gs_type t, double v, bool mlir) {
    char buf[64];
    int nb = gs_type_size(t);
    unsigned char want[8] = {0}, got[8] = {0};
    gs_elem_set_f(want, t, 0, v);
    if (mlir) { /* MLIR's printer: 7 significant digits (`1.000000e-01`) when they read back */
        snprintf(buf, sizeof buf, "%.6e", v);
        gs_elem_set_f(got, t, 0, strtod(buf, NULL));
        if (memcmp(want, got, (size_t)nb) == 0) {
            gs_sb_puts(sb, buf);
            return;
        }
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
        memset(got, 0, sizeof got);
        gs_elem_set_f(got, t, 0, strtod(buf, NULL));
        if (memcmp(want, got, (size_t)nb) == 0) break;
    }
    /* %.Ne writes "1e+00" for prec 1: MLIR wants a '.' in the mantissa */
    char *e = strchr(buf, 'e');
    if (e && !strchr(buf, '.')) {
        char tail[32];
        snprintf(tail, sizeof tail, "%s", e);
        snprintf(e, sizeof buf - (size_t)(e - buf), ".0%s", tail);
    }
    gs_sb_puts(sb, buf);
}

/* Is element i of a float literal finite (printable in decimal)? */
static bool finite_at(gs_type t, const void *data, int64_t i) {
    if (gs_type_is_complex(t)) {
        double re, im;
        gs_elem_get_c(data, t, i, &re, &im);
        return isfinite(re) && isfinite(im);
    }
    return !gs_type_is_float(t) || isfinite(gs_elem_get_f(data, t, i));
}

static void print_scalar(gs_sb *sb, gs_type t, const void *data, int64_t i, bool mlir) {
    if (t == GS_PRED) {
        gs_sb_puts(sb, gs_elem_get_i(data, t, i) ? "true" : "false");
    } else if (gs_type_is_complex(t)) {
        double re, im;
        gs_elem_get_c(data, t, i, &re, &im);
        gs_type part = t == GS_C64 ? GS_F32 : GS_F64;
        gs_sb_putc(sb, '(');
        print_float(sb, part, re, mlir);
        gs_sb_puts(sb, ", ");
        print_float(sb, part, im, mlir);
        gs_sb_putc(sb, ')');
    } else if (gs_type_is_float(t)) {
        double v = gs_elem_get_f(data, t, i);
        if (isfinite(v)) {
            print_float(sb, t, v, mlir);
        } else {
            /* NaN and infinities as their bit pattern, as MLIR prints them */
            int nb = gs_type_size(t);
            const unsigned char *b = (const unsigned char *)data + (size_t)i * (size_t)nb;
            gs_sb_puts(sb, "0x");
            for (int k = nb; k-- > 0;) gs_sb_printf(sb, "%02X", b[k]);
        }
    } else if (gs_type_is_unsigned_int(t)) {
        gs_sb_printf(sb, "%" PRIu64, (uint64_t)gs_elem_get_i(data, t, i));
    } else {
        gs_sb_printf(sb, "%" PRId64, gs_elem_get_i(data, t, i));
    }
}

static void print_nested(gs_sb *sb, const gs_shape *s, const void *data, int d, int64_t *next,
                         bool mlir) {
    if (d == s->rank) {
        print_scalar(sb, s->type, data, (*next)++, mlir);
        return;
    }
    gs_sb_putc(sb, '[');
    for (int64_t i = 0; i < s->dims[d]; i++) {
        if (i) gs_sb_puts(sb, ", ");
        print_nested(sb, s, data, d + 1, next, mlir);
    }
    gs_sb_putc(sb, ']');
}

/* `dense<...>` of an array literal: a splat when every element is the same, raw little-endian
 * hex for large tensors (and complex ones holding NaN or infinities), else nested lists. */
static void print_dense(gs_sb *sb, const gs_shape *s, const gs_literal_ir *lit, bool mlir) {
    int64_t n = gs_shape_elements(s);
    size_t es = (size_t)gs_type_size(s->type);
    const unsigned char *b = lit->data;
    bool splat = n > 1;
    for (int64_t i = 1; i < n && splat; i++) splat = memcmp(b, b + (size_t)i * es, es) == 0;
    bool hex = n > 64 && !splat && s->type != GS_PRED;
    for (int64_t i = 0; i < n && !hex; i++)
        hex = gs_type_is_complex(s->type) && !finite_at(s->type, b, i);
    gs_sb_puts(sb, "dense<");
    if (hex) {
        static const char HEX[] = "0123456789ABCDEF";
        size_t nbytes = splat ? es : (size_t)n * es;
        gs_sb_puts(sb, "\"0x");
        for (size_t i = 0; i < nbytes; i++) {
            gs_sb_putc(sb, HEX[b[i] >> 4]);
            gs_sb_putc(sb, HEX[b[i] & 15]);
        }
        gs_sb_putc(sb, '"');
    } else if (splat || (n == 1 && s->rank == 0)) {
        print_scalar(sb, s->type, b, 0, mlir);
    } else {
        int64_t next = 0;
        print_nested(sb, s, b, 0, &next, mlir);
    }
    gs_sb_putc(sb, '>');
}

/* ------------------------------------------------------------------ shardings */

/* `{mhlo.sharding = "..."}` entries: sharding sh of a value of shape s, or of its results
 * first..first+count (a tuple's elements, leaves counted depth-first). */
static void print_sharding_text(gs_sb *sb, const gs_sharding *sh) {
    gs_sb tmp = {0};
    gs_sharding_print(&tmp, sh);
    print_escaped(sb, gs_sb_str(&tmp));
    gs_sb_free(&tmp);
}

/* The sharding of tuple element `elem` of shape s sharded by sh, printed as an attribute value;
 * false when there is none to print. */
static bool print_elem_sharding(gs_sb *sb, const gs_sharding *sh, const gs_shape *s, int elem) {
    if (!sh) return false;
    if (!gs_shape_is_tuple(s) || sh->kind != GS_SHARDING_TUPLE) {
        print_sharding_text(sb, sh);
        return true;
    }
    int first = 0;
    for (int i = 0; i < elem; i++) first += gs_shape_n_leaves(s->tuple[i]);
    int count = gs_shape_n_leaves(s->tuple[elem]);
    if (first + count > sh->n_tuple) return false;
    if (!gs_shape_is_tuple(s->tuple[elem])) {
        print_sharding_text(sb, sh->tuple[first]);
        return true;
    }
    gs_sb tmp = {0};
    gs_sb_putc(&tmp, '{');
    for (int i = 0; i < count; i++) {
        if (i) gs_sb_puts(&tmp, ", ");
        gs_sharding_print(&tmp, sh->tuple[first + i]);
    }
    gs_sb_putc(&tmp, '}');
    print_escaped(sb, gs_sb_str(&tmp));
    gs_sb_free(&tmp);
    return true;
}

/* The sharding of tuple element `elem` of shape s sharded by sh when that element is one array
 * (sh itself when sh is not a tuple sharding); NULL otherwise. */
static const gs_sharding *elem_leaf(const gs_sharding *sh, const gs_shape *s, int elem) {
    if (!sh || !gs_shape_is_tuple(s) || sh->kind != GS_SHARDING_TUPLE) return sh;
    if (elem >= s->n_tuple || gs_shape_is_tuple(s->tuple[elem])) return NULL;
    int first = 0;
    for (int i = 0; i < elem; i++) first += gs_shape_n_leaves(s->tuple[i]);
    return first < sh->n_tuple ? sh->tuple[first] : NULL;
}

/* Appends Shardy's `<@mesh, [...]>` for sharding sh of an array of shape s, when the module
 * declares meshes and sh has Shardy's form on one of them: its own named form, else one found
 * on the module's meshes in order (gs_sharding_to_named). False when it has none. */
static bool print_sdy_leaf(printer *p, gs_sb *sb, const gs_sharding *sh, const gs_shape *s) {
    if (!p->sdy || !sh || !s || !gs_shape_is_array(s)) return false;
    if (sh->kind == GS_SHARDING_TUPLE) {
        if (sh->n_tuple != 1) return false;
        sh = sh->tuple[0];
    }
    if (p->manual_depth && sh->named && sh->named->form == GS_NAMED_DIMS &&
        sh->named->manual.n && sh->named->mesh_name) {
        /* inside sdy.manual_computation the region's manual axes are implicit */
        gs_named local = *sh->named;
        local.manual = (gs_axis_list){0};
        gs_named_print_sdy(sb, &local);
        return true;
    }
    const gs_named *nm = NULL;
    if (gs_sharding_to_named(&p->a, sh, s->rank, NULL, NULL, &nm) != GS_OK)
        return p->failed = true, false;
    const gs_mesh_table *t = p->m->meshes;
    for (int i = 0; !nm && i < t->n; i++)
        if (gs_sharding_to_named(&p->a, sh, s->rank, &t->meshes[i], t->names[i], &nm) != GS_OK)
            return p->failed = true, false;
    if (!nm) return false;
    gs_named_print_sdy(sb, nm);
    return true;
}

/* The attribute for a function argument or result: element elem (-1: all) of a value of shape s
 * sharded by sh, as `sdy.sharding = #sdy.sharding<...>` where Shardy spells it, else as
 * `mhlo.sharding = "..."`. False (nothing written) when there is no sharding to print. */
static bool print_value_sharding(printer *p, gs_sb *sb, const gs_sharding *sh, const gs_shape *s,
                                 int elem) {
    if (!sh) return false;
    const gs_sharding *leaf = elem < 0 ? sh : elem_leaf(sh, s, elem);
    const gs_shape *ls = elem < 0 ? s : s->tuple[elem];
    gs_sb tmp = {0};
    bool sdy = leaf && print_sdy_leaf(p, &tmp, leaf, ls);
    if (sdy) gs_sb_printf(sb, "sdy.sharding = #sdy.sharding%s", gs_sb_str(&tmp));
    gs_sb_free(&tmp);
    if (sdy) return true;
    gs_sb_puts(sb, "mhlo.sharding = ");
    return elem < 0 ? (print_sharding_text(sb, sh), true) : print_elem_sharding(sb, sh, s, elem);
}

/* ------------------------------------------------------------------ values */

static scope *new_scope(printer *p, const gs_computation *c) {
    scope *s = GS_NEW(&p->a, scope);
    if (s) s->refs = GS_NEW_ARRAY(&p->a, ref, c->n_instrs ? c->n_instrs : 1);
    if (!s || !s->refs) {
        p->failed = true;
        return NULL;
    }
    memset(s->refs, 0, sizeof(ref) * (size_t)(c->n_instrs ? c->n_instrs : 1));
    s->c = c;
    s->n_ret = -1;
    return s;
}

static ref *ref_of(scope *s, const gs_instr *x) { return &s->refs[x->id]; }

static const char *elem_of(printer *p, scope *s, const gs_instr *x, int i);
static void print_names(gs_sb *sb, const char **v, int n);

/* The name of one SSA value holding all of x (printing a stablehlo.tuple when x's elements are
 * separate values). */
static const char *whole_of(printer *p, scope *s, const gs_instr *x) {
    ref *r = ref_of(s, x);
    if (r->kind == REF_VALUE) return r->name;
    if (r->whole) return r->whole;
    const char *el[256];
    if (r->n > 256) return fail(p, x, "tuple of %d elements: too many to print", r->n), "%?";
    for (int i = 0; i < r->n; i++) el[i] = elem_of(p, s, x, i);
    const char *name = fresh(p, "%%%d", p->next_value++);
    newline(p);
    gs_sb_printf(p->sb, "%s = stablehlo.tuple ", name);
    for (int i = 0; i < r->n; i++) gs_sb_printf(p->sb, "%s%s", i ? ", " : "", el[i]);
    gs_sb_puts(p->sb, " : ");
    print_type(p->sb, x->shape);
    r->whole = name;
    return name;
}

/* The name of one SSA value holding element i of the tuple-shaped x. */
static const char *elem_of(printer *p, scope *s, const gs_instr *x, int i) {
    ref *r = ref_of(s, x);
    switch (r->kind) {
    case REF_TUPLE: return whole_of(p, s, r->tuple->operands[i]);
    case REF_MULTI: {
        const char *e = gs_arena_printf(&p->a, "%s#%d", r->name, i);
        if (!e) p->failed = true;
        return e ? e : "%?";
    }
    case REF_ITER:
        if (!r->elems[i] && i == 0 && r->sub0) { /* an infeed's data as one tuple value */
            const ref *d = r->sub0;
            const char *name = fresh(p, "%%%d", p->next_value++);
            newline(p);
            gs_sb_printf(p->sb, "%s = stablehlo.tuple ", name);
            print_names(p->sb, d->elems, d->n);
            gs_sb_puts(p->sb, " : ");
            print_type(p->sb, x->shape->tuple[0]);
            r->elems[0] = name;
        }
        return r->elems[i] ? r->elems[i] : "%?";
    case REF_VALUE: break;
    }
    if (!gs_shape_is_tuple(x->shape) || i >= x->shape->n_tuple)
        return fail(p, x, "element %d of a value that is not a tuple", i), "%?";
    if (!r->elems) {
        r->elems = GS_NEW_ARRAY(&p->a, const char *, x->shape->n_tuple ? x->shape->n_tuple : 1);
        if (!r->elems) return p->failed = true, "%?";
        memset(r->elems, 0, sizeof(char *) * (size_t)x->shape->n_tuple);
    }
    if (r->elems[i]) return r->elems[i];
    const char *name = fresh(p, "%%%d", p->next_value++);
    newline(p);
    gs_sb_printf(p->sb, "%s = \"stablehlo.get_tuple_element\"(%s) <{index = %d : i32}> : (", name,
                 r->name, i);
    print_type(p->sb, x->shape);
    gs_sb_puts(p->sb, ") -> ");
    print_type(p->sb, x->shape->tuple[i]);
    r->elems[i] = name;
    return name;
}

/* The values a tuple-shaped x spreads into (results, returns, while arguments): its elements,
 * or x itself when it is not a tuple or a one-element tuple. Returns the count. */
static int spread(printer *p, scope *s, const gs_instr *x, const char **out, int max) {
    int n = n_results(x->shape);
    if (n > max) return fail(p, x, "%d values: too many to print", n), 0;
    if (!gs_shape_is_tuple(x->shape) || x->shape->n_tuple == 1) {
        out[0] = whole_of(p, s, x);
        return 1;
    }
    for (int i = 0; i < n; i++) out[i] = elem_of(p, s, x, i);
    return n;
}

/* The type of value i of what spread gives for shape sh. */
static const gs_shape *spread_type(const gs_shape *sh, int i) {
    return n_results(sh) == 1 && !(gs_shape_is_tuple(sh) && sh->n_tuple == 0) ? sh : sh->tuple[i];
}

/* ------------------------------------------------------------------ op pieces */

static bool print_region(printer *p, const gs_computation *c);
static bool print_conditional(printer *p, scope *s, const gs_instr *in);
static bool print_body(printer *p, scope *s, const char *ret);
static bool find_manuals(printer *p, scope *s);
static bool print_manual(printer *p, scope *s, const gs_instr *call, const manual_group *g);

enum { MAX_VALUES = 1024 };

/* Does op print as an MLIR op with several results when its shape is a tuple? */
static bool multi_result_op(gs_opcode op) {
    switch (op) {
    case GS_OP_WHILE:
    case GS_OP_SORT:
    case GS_OP_REDUCE:
    case GS_OP_REDUCE_WINDOW:
    case GS_OP_SCATTER:
    case GS_OP_CALL:
    case GS_OP_FUSION:
    case GS_OP_ALL_REDUCE:
    case GS_OP_ALL_GATHER:
    case GS_OP_ALL_TO_ALL:
    case GS_OP_REDUCE_SCATTER:
    case GS_OP_COLLECTIVE_PERMUTE:
    case GS_OP_CUSTOM_CALL:
    case GS_OP_RNG_BIT_GENERATOR:
    case GS_OP_BATCH_NORM_TRAINING:
    case GS_OP_BATCH_NORM_GRAD:
    case GS_OP_OPTIMIZATION_BARRIER:
    case GS_OP_RECV_DONE:
    case GS_OP_TOPK:
    case GS_OP_CONDITIONAL: return true;
    default: return false;
    }
}

/* Names in's result(s) and prints `%N = ` (`%N:K = `; nothing for an op with no results). */
static void result_prefix(printer *p, scope *s, const gs_instr *in) {
    ref *r = ref_of(s, in);
    bool multi = multi_result_op(in->op) && gs_shape_is_tuple(in->shape) && in->shape->n_tuple != 1;
    /* An op with no results takes no number, as MLIR numbers them (a use of its empty value
     * prints a stablehlo.tuple of nothing: whole_of). */
    bool none = multi && in->shape->n_tuple == 0;
    r->name = fresh(p, "%%%d", none ? p->next_value : p->next_value++);
    newline(p);
    if (multi) {
        r->kind = REF_MULTI;
        r->n = in->shape->n_tuple;
        if (r->n) gs_sb_printf(p->sb, "%s:%d = ", r->name, r->n);
    } else {
        r->kind = REF_VALUE;
        gs_sb_printf(p->sb, "%s = ", r->name);
    }
}

/* The whole values of in's operands. */
static int operand_names(printer *p, scope *s, const gs_instr *in, const char **out) {
    if (in->n_operands > MAX_VALUES) return fail(p, in, "too many operands to print"), 0;
    for (int i = 0; i < in->n_operands; i++) out[i] = whole_of(p, s, in->operands[i]);
    return in->n_operands;
}

/* The operands' values (printing what they need), then in's result names: the operand count,
 * or -1 after an error. */
static int operands_and_result(printer *p, scope *s, const gs_instr *in, const char **ops) {
    int n = operand_names(p, s, in, ops);
    if (p->failed) return -1;
    result_prefix(p, s, in);
    return n;
}

static void print_names(gs_sb *sb, const char **v, int n) {
    for (int i = 0; i < n; i++) gs_sb_printf(sb, "%s%s", i ? ", " : "", v[i]);
}

/* The result types: `T`, `(T, U)` for several results, `()` for none. */
static void print_result_types(gs_sb *sb, const gs_instr *in) {
    bool multi = multi_result_op(in->op) && gs_shape_is_tuple(in->shape) && in->shape->n_tuple != 1;
    if (!multi) {
        print_type(sb, in->shape);
        return;
    }
    gs_sb_putc(sb, '(');
    for (int i = 0; i < in->shape->n_tuple; i++) {
        if (i) gs_sb_puts(sb, ", ");
        print_type(sb, in->shape->tuple[i]);
    }
    gs_sb_putc(sb, ')');
}

/* ` : (T, U) -> R` */
static void print_fn_type(gs_sb *sb, const gs_instr *in) {
    gs_sb_puts(sb, " : (");
    for (int i = 0; i < in->n_operands; i++) {
        if (i) gs_sb_puts(sb, ", ");
        print_type(sb, in->operands[i]->shape);
    }
    gs_sb_puts(sb, ") -> ");
    print_result_types(sb, in);
}

/* ` : T` when every operand has the result's type, else the function type. */
static void print_short_type(gs_sb *sb, const gs_instr *in) {
    bool same = in->n_operands > 0;
    for (int i = 0; i < in->n_operands && same; i++)
        same = gs_shape_equal(in->operands[i]->shape, in->shape) &&
               in->operands[i]->shape->type == in->shape->type;
    if (!same) {
        print_fn_type(sb, in);
        return;
    }
    gs_sb_puts(sb, " : ");
    print_type(sb, in->shape);
}

/* An op's sharding sh: `sdy.sharding = #sdy.sharding_per_value<[<...>, ...]>` (one entry per
 * result) where Shardy spells every result's, else `mhlo.sharding = "..."`. */
static void print_op_sharding(printer *p, gs_sb *sb, const gs_instr *in, const gs_sharding *sh) {
    bool multi = multi_result_op(in->op) && gs_shape_is_tuple(in->shape) && in->shape->n_tuple != 1;
    int n = multi ? in->shape->n_tuple : 1;
    gs_sb tmp = {0};
    /* An op without results (a side-effecting custom_call) keeps the one sharding Shardy
     * allows it, as it was written: there is no value to find its form from. */
    const gs_sharding *lone = sh && sh->kind == GS_SHARDING_TUPLE && sh->n_tuple == 1
                                  ? sh->tuple[0]
                                  : sh;
    if (p->sdy && multi && n == 0 && lone && lone->kind != GS_SHARDING_TUPLE && lone->named &&
        lone->named->mesh_name) {
        gs_named_print_sdy(&tmp, lone->named);
        gs_sb_printf(sb, "sdy.sharding = #sdy.sharding_per_value<[%s]>", gs_sb_str(&tmp));
        gs_sb_free(&tmp);
        return;
    }
    bool sdy = p->sdy && n > 0;
    for (int i = 0; i < n && sdy; i++) {
        if (i) gs_sb_puts(&tmp, ", ");
        sdy = multi ? print_sdy_leaf(p, &tmp, elem_leaf(sh, in->shape, i), in->shape->tuple[i])
                    : print_sdy_leaf(p, &tmp, sh, in->shape);
    }
    if (sdy) {
        gs_sb_printf(sb, "sdy.sharding = #sdy.sharding_per_value<[%s]>", gs_sb_str(&tmp));
    } else {
        gs_sb_puts(sb, "mhlo.sharding = ");
        print_sharding_text(sb, sh);
    }
    gs_sb_free(&tmp);
}

/* `sdy.sharding_rule = #sdy.op_sharding_rule<...>`: the one the input wrote on in (the reader
 * keeps it in the op's frontend attributes, where gs_op_rule_build finds it: printed with
 * `, custom`), else when the options ask for rules and Shardy's registry has one for the op
 * (the rule is registered). False when nothing was written. */
static bool print_rule(printer *p, gs_sb *sb, const gs_instr *in) {
    const char *fa = gs_instr_str(in, GS_ATTR_FRONTEND_ATTRIBUTES);
    bool written = fa && strstr(fa, "xla.sdy.sharding_rule=");
    if (!written && !p->o->sharding_rules) return false;
    gs_op_rule_options ro = {p->o->conservative_propagation};
    gs_op_rule *r;
    if (gs_op_rule_build_opts(&p->a, in, &ro, &r) != GS_OK) return p->failed = true, false;
    if (!r || !(written || r->registered)) return false;
    gs_sb_puts(sb, "sdy.sharding_rule = #sdy.op_sharding_rule<");
    gs_op_rule_print(sb, r);
    gs_sb_putc(sb, '>');
    return true;
}

/* The instruction a function returns, looking through an unsharded root copy (or domain) of
 * a value of the same type when the module carries no Shardy shardings: the text has no copy
 * (the printer aliases it), so what reads back returns its operand, whose sharding is then the
 * result's. With Shardy's shardings a root copy keeps the result apart from the op. */
static bool same_type(const gs_shape *a, const gs_shape *b);

static const gs_instr *returned(const printer *p, const gs_computation *c) {
    const gs_instr *r = c->root;
    while (!p->sdy && r && (r->op == GS_OP_COPY || r->op == GS_OP_DOMAIN) && r->n_operands == 1 &&
           !gs_instr_get_sharding(r) && same_type(r->shape, r->operands[0]->shape))
        r = r->operands[0];
    return r;
}

/* The symbol function c prints as, or NULL when it is not printed as one. */
static const char *func_name_of(const printer *p, const gs_computation *c) {
    for (int i = 0; i < p->m->n_comps; i++)
        if (p->m->comps[i] == c) return p->func_names[i];
    return NULL;
}

/* Is c printed as a func.func (the entry, a called function), not as a region? */
static bool printed_as_func(const printer *p, const gs_computation *c) {
    if (c == p->m->entry) return true;
    for (int i = 0; i < p->m->n_comps; i++)
        if (p->m->comps[i] == c) return p->func_names[i] != NULL;
    return false;
}

/* ` {extra, mhlo.sharding = "...", sdy.sharding_rule = ...}` (nothing when all are empty):
 * MLIR's attribute dictionary order (by name) for the entries gspmd writes after `extra`. */
static void print_attr_dict(printer *p, gs_sb *sb, const gs_instr *in, const char *extra) {
    const gs_sharding *sh = gs_instr_get_sharding(in);
    /* A function's one result carries its root's sharding (print_func), which the reader puts
     * back on the root: printed once, there, so that printing is a fixed point. (A region's
     * return, a manual computation's body's, has no sharding of its own: the op keeps it.) */
    if (in->parent && in == returned(p, in->parent) && !p->o->sdy_opt &&
        printed_as_func(p, in->parent) &&
        !(gs_shape_is_tuple(in->shape) && in->shape->n_tuple != 1))
        sh = NULL; /* (sdy_opt prints both: the value and the result each have one) */
    /* the reader marks every op of a fully manual body {manual} */
    if (sh && p->manual_depth && gs_sharding_is_manual(sh)) sh = NULL;
    gs_sb rule = {0};
    bool has_rule = print_rule(p, &rule, in);
    bool has_extra = extra && extra[0];
    if (sh || has_extra || has_rule) {
        gs_sb_puts(sb, " {");
        if (has_extra) gs_sb_puts(sb, extra);
        if (sh) {
            if (has_extra) gs_sb_puts(sb, ", ");
            print_op_sharding(p, sb, in, sh);
        }
        if (has_rule) gs_sb_printf(sb, "%s%s", has_extra || sh ? ", " : "", gs_sb_str(&rule));
        gs_sb_putc(sb, '}');
    }
    gs_sb_free(&rule);
}

/* Appends ", " to a property list that is not empty. */
static void sep(gs_sb *sb) {
    if (gs_sb_str(sb)[0]) gs_sb_puts(sb, ", ");
}

/* `dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>` of replica groups (all of one size). */
static bool print_groups(printer *p, gs_sb *sb, const gs_instr *in) {
    const gs_attr *a = gs_instr_attr(in, GS_ATTR_REPLICA_GROUPS);
    if (!a) return true;
    const gs_replica_groups *g = a->u.groups;
    int size = g->n_groups ? gs_replica_groups_size(g, 0) : 0;
    for (int i = 1; i < g->n_groups; i++)
        if (gs_replica_groups_size(g, i) != size)
            return fail(p, in, "replica groups of different sizes have no StableHLO form");
    sep(sb);
    gs_sb_puts(sb, "replica_groups = dense<");
    if (g->n_groups) gs_sb_putc(sb, '[');
    for (int i = 0; i < g->n_groups; i++) {
        gs_sb_puts(sb, i ? ", [" : "[");
        for (int j = 0; j < size; j++)
            gs_sb_printf(sb, "%s%" PRId64, j ? ", " : "", gs_replica_groups_device(g, i, j));
        gs_sb_putc(sb, ']');
    }
    if (g->n_groups) gs_sb_putc(sb, ']');
    gs_sb_printf(sb, "> : tensor<%dx%dxi64>", g->n_groups, size);
    return true;
}

static void print_channel(gs_sb *sb, const gs_instr *in) {
    const gs_attr *c = gs_instr_attr(in, GS_ATTR_CHANNEL_ID);
    if (!c) return;
    sep(sb);
    gs_sb_printf(sb, "channel_handle = #stablehlo.channel_handle<handle = %" PRId64 ", type = 1>",
                 c->u.i);
}

/* Field f of a window dimension: 0 stride, 1 lhs (base) dilation, 2 rhs (window) dilation, 3
 * reversal; and whether any dimension of w differs from its default (1, 1, 1, false). */
static int64_t window_field(const gs_window_dim *d, int f) {
    return f == 0 ? d->stride : f == 1 ? d->lhs_dilate : f == 2 ? d->rhs_dilate : d->reversal;
}
static bool window_differs(const gs_window *w, int f) {
    for (int i = 0; i < w->n; i++)
        if (window_field(&w->dims[i], f) != (f == 3 ? 0 : 1)) return true;
    return false;
}
static bool window_padded(const gs_window *w) {
    for (int i = 0; i < w->n; i++)
        if (w->dims[i].pad_lo || w->dims[i].pad_hi) return true;
    return false;
}

/* `[[lo, hi], ...]` */
static void print_window_pad(gs_sb *sb, const gs_window *w) {
    gs_sb_putc(sb, '[');
    for (int i = 0; i < w->n; i++)
        gs_sb_printf(sb, "%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "", w->dims[i].pad_lo,
                     w->dims[i].pad_hi);
    gs_sb_putc(sb, ']');
}

/* A window attribute's fields as reduce_window / select_and_scatter properties. */
static void print_window_props(gs_sb *sb, const gs_window *w, bool dilations) {
    static const char *const KEYS[3] = {"window_strides", "base_dilations", "window_dilations"};
    int64_t v[GS_MAX_RANK];
    int n = w->n < GS_MAX_RANK ? w->n : GS_MAX_RANK;
    for (int i = 0; i < n; i++) v[i] = w->dims[i].size;
    sep(sb);
    gs_sb_puts(sb, "window_dimensions = ");
    print_array(sb, v, n);
    for (int f = 0; f < (dilations ? 3 : 1); f++) {
        if (!window_differs(w, f)) continue;
        for (int i = 0; i < n; i++) v[i] = window_field(&w->dims[i], f);
        gs_sb_printf(sb, ", %s = ", KEYS[f]);
        print_array(sb, v, n);
    }
    if (window_padded(w)) {
        gs_sb_puts(sb, ", padding = dense<");
        print_window_pad(sb, w);
        gs_sb_printf(sb, "> : tensor<%dx2xi64>", n);
    }
}

/* `"stablehlo.NAME"(ops) <{props}> ({regions}) {dict} : (T) -> R`, regions from in's called
 * computations in the order given. */
static bool print_generic(printer *p, scope *s, const gs_instr *in, const char *name,
                          const char *props, int n_regions, gs_computation *const *regions) {
    const char *ops[MAX_VALUES];
    int n = operands_and_result(p, s, in, ops);
    if (n < 0) return false;
    gs_sb_printf(p->sb, "\"stablehlo.%s\"(", name);
    print_names(p->sb, ops, n);
    gs_sb_putc(p->sb, ')');
    if (props && props[0]) gs_sb_printf(p->sb, " <{%s}>", props);
    if (n_regions) {
        gs_sb_puts(p->sb, " (");
        for (int i = 0; i < n_regions; i++) {
            if (i) gs_sb_puts(p->sb, ", ");
            if (!regions[i]) return fail(p, in, "'%s' lacks a called computation", name);
            if (!print_region(p, regions[i])) return false;
        }
        gs_sb_putc(p->sb, ')');
    }
    print_attr_dict(p, p->sb, in, NULL);
    print_fn_type(p->sb, in);
    return !p->failed;
}

/* `stablehlo.NAME %a, %b ATTRS {dict} : T` (the short type when the types allow). */
static bool print_pretty(printer *p, scope *s, const gs_instr *in, const char *name,
                         const char *attrs, bool fn_type) {
    const char *ops[MAX_VALUES];
    int n = operands_and_result(p, s, in, ops);
    if (n < 0) return false;
    gs_sb_printf(p->sb, "stablehlo.%s", name);
    if (n) gs_sb_putc(p->sb, ' ');
    print_names(p->sb, ops, n);
    if (attrs && attrs[0]) gs_sb_printf(p->sb, "%s%s", n ? ", " : " ", attrs);
    print_attr_dict(p, p->sb, in, NULL);
    if (n == 0) {
        gs_sb_puts(p->sb, " : ");
        print_type(p->sb, in->shape);
    } else if (fn_type) {
        print_fn_type(p->sb, in);
    } else {
        print_short_type(p->sb, in);
    }
    return !p->failed;
}

/* StableHLO's name of an HLO opcode: dashes become underscores, with MLIR's own names where
 * they differ. */
static const char *mlir_op_name(printer *p, gs_opcode op) {
    switch (op) {
    case GS_OP_BROADCAST: return "broadcast_in_dim";
    case GS_OP_DOT: return "dot_general";
    case GS_OP_OPTIMIZATION_BARRIER: return "optimization_barrier";
    case GS_OP_BITCAST: return "reshape";
    default: break;
    }
    char *s = gs_arena_strdup(&p->a, gs_op_name(op));
    if (!s) return p->failed = true, "?";
    for (char *c = s; *c; c++)
        if (*c == '-') *c = '_';
    return s;
}

/* ------------------------------------------------------------------ ops */

/* `[b, 0, 1, f]` */
static void print_conv_part(gs_sb *sb, int rank, int64_t a, char ca, int64_t b, char cb,
                            const int64_t *spatial, int ns) {
    gs_sb_putc(sb, '[');
    for (int i = 0; i < rank; i++) {
        if (i) gs_sb_puts(sb, ", ");
        if (i == a) {
            gs_sb_putc(sb, ca);
        } else if (i == b) {
            gs_sb_putc(sb, cb);
        } else {
            for (int k = 0; k < ns; k++)
                if (spatial[k] == i) gs_sb_printf(sb, "%d", k);
        }
    }
    gs_sb_putc(sb, ']');
}

static bool print_convolution(printer *p, scope *s, const gs_instr *in) {
    const gs_attr *dl = gs_instr_attr(in, GS_ATTR_DIM_LABELS);
    const gs_attr *wa = gs_instr_attr(in, GS_ATTR_WINDOW);
    if (!dl || in->n_operands != 2)
        return fail(p, in, "a convolution needs dim_labels and two operands to print");
    const gs_conv_dims *c = dl->u.conv;
    const char *ops[2] = {whole_of(p, s, in->operands[0]), whole_of(p, s, in->operands[1])};
    if (p->failed) return false;
    result_prefix(p, s, in);
    gs_sb *sb = p->sb;
    gs_sb_printf(sb, "stablehlo.convolution(%s, %s) dim_numbers = ", ops[0], ops[1]);
    print_conv_part(sb, c->in_rank, c->in_batch, 'b', c->in_feature, 'f', c->in_spatial,
                    c->n_spatial);
    gs_sb_putc(sb, 'x');
    print_conv_part(sb, c->k_rank, c->k_in_feature, 'i', c->k_out_feature, 'o', c->k_spatial,
                    c->n_spatial);
    gs_sb_puts(sb, "->");
    print_conv_part(sb, c->out_rank, c->out_batch, 'b', c->out_feature, 'f', c->out_spatial,
                    c->n_spatial);
    gs_sb_puts(sb, ", window = {");
    static const char *const KEYS[4] = {"stride", "lhs_dilate", "rhs_dilate", "reverse"};
    const gs_window *w = wa ? wa->u.window : NULL;
    const char *lead = "";
    for (int f = 0; w && f < 4; f++) {
        if (f == 1 && window_padded(w)) {
            gs_sb_printf(sb, "%spad = ", lead);
            print_window_pad(sb, w);
            lead = ", ";
        }
        if (!window_differs(w, f)) continue;
        gs_sb_printf(sb, "%s%s = [", lead, KEYS[f]);
        for (int i = 0; i < w->n; i++) {
            int64_t v = window_field(&w->dims[i], f);
            if (f == 3)
                gs_sb_printf(sb, "%s%s", i ? ", " : "", v ? "true" : "false");
            else
                gs_sb_printf(sb, "%s%" PRId64, i ? ", " : "", v);
        }
        gs_sb_putc(sb, ']');
        lead = ", ";
    }
    gs_sb_putc(sb, '}');
    char extra[128];
    snprintf(extra, sizeof extra,
             "batch_group_count = %" PRId64 " : i64, feature_group_count = %" PRId64 " : i64",
             gs_instr_int(in, GS_ATTR_BATCH_GROUP_COUNT, 1),
             gs_instr_int(in, GS_ATTR_FEATURE_GROUP_COUNT, 1));
    print_attr_dict(p, sb, in, extra);
    print_fn_type(sb, in);
    return !p->failed;
}

/* `%N:K = stablehlo.while(%iterArgA = %x, ...) : T, ... cond { ... } do { ... }` */
/* Is x get-tuple-element i of t? */
static bool is_gte(const gs_instr *x, const gs_instr *t, int i) {
    return x->op == GS_OP_GET_TUPLE_ELEMENT && x->n_operands == 1 && x->operands[0] == t &&
           gs_instr_int(x, GS_ATTR_INDEX, -1) == i;
}

/* How many of a while's n state values are its own, the rest being values from around the loop
 * that its regions use (StableHLO's regions may; HLO's loop carries them, as the reader makes
 * it): the body returns each of the rest unchanged, and the loop's value is used only as the
 * reader leaves it, get-tuple-elements of the own values gathered by one tuple. n when none. */
static int while_own_values(const gs_instr *in, const gs_computation *body, int n) {
    const gs_instr *root = body->root, *param = body->params[0];
    if (!gs_shape_is_tuple(in->shape) || n < 2 || !root || root->op != GS_OP_TUPLE ||
        root->n_operands != n)
        return n;
    int own = n;
    while (own > 0 && is_gte(root->operands[own - 1], param, own - 1)) own--;
    if (own == n || own == 0) return n;
    /* the users: a get-tuple-element per own value, gathered in order by one tuple */
    const gs_computation *c = in->parent;
    const gs_instr *gathered = NULL;
    int seen = 0;
    for (int k = in->id + 1; k < c->n_instrs; k++) {
        const gs_instr *u = c->instrs[k];
        for (int j = 0; j < u->n_operands; j++) {
            if (u->operands[j] != in) continue;
            if (!is_gte(u, in, seen) || seen >= own) return n;
            seen++;
        }
        if (u->op == GS_OP_TUPLE && u->n_operands == own && is_gte(u->operands[0], in, 0))
            gathered = u;
    }
    if (seen != own || !gathered || in->is_root) return n;
    for (int i = 0; i < own; i++)
        if (!is_gte(gathered->operands[i], in, i)) return n;
    return own;
}

/* A copy of in whose shape and sharding keep its first k tuple elements (printing only). */
static const gs_instr *first_elements(printer *p, const gs_instr *in, int k) {
    gs_instr *c = GS_NEW(&p->a, gs_instr);
    gs_attr *attrs = GS_NEW_ARRAY(&p->a, gs_attr, in->n_attrs + 1);
    gs_shape *t = gs_shape_tuple(&p->a, k, in->shape->tuple);
    if (!c || !attrs || !t) return p->failed = true, in;
    *c = *in;
    c->shape = t;
    if (in->n_attrs) memcpy(attrs, in->attrs, sizeof *attrs * (size_t)in->n_attrs);
    c->attrs = attrs;
    const gs_sharding *sh = gs_instr_get_sharding(in);
    for (int i = 0; i < c->n_attrs; i++) {
        if (attrs[i].key != GS_ATTR_SHARDING || !sh) continue;
        if (sh->kind != GS_SHARDING_TUPLE || sh->n_tuple < k) continue;
        gs_sharding *ts = gs_sharding_tuple(&p->a, k, sh->tuple);
        if (!ts) return p->failed = true, in;
        attrs[i].u.sharding = ts;
    }
    return c;
}

static bool print_while(printer *p, scope *s, const gs_instr *in) {
    gs_computation *cond = gs_instr_comp(in, GS_ATTR_CONDITION);
    gs_computation *body = gs_instr_comp(in, GS_ATTR_BODY);
    if (!cond || !body || in->n_operands != 1 || cond->n_params != 1 || body->n_params != 1)
        return fail(p, in, "a while needs one operand, a condition and a body to print");
    const gs_instr *init = in->operands[0];
    const char *vals[MAX_VALUES];
    int n = spread(p, s, init, vals, MAX_VALUES);
    if (p->failed) return false;
    /* values from around the loop print as themselves, not as iteration arguments */
    int own = while_own_values(in, body, n);
    const char **iter = GS_NEW_ARRAY(&p->a, const char *, n ? n : 1);
    if (!iter) return p->failed = true, false;
    if (p->o->sdy_opt) { /* the regions' block arguments, named in a region's context */
        naming sv = enter_region(p, cond);
        for (int i = 0; i < own; i++) iter[i] = unique_name(p, "iterArg", NAME_ITER);
        leave_region(p, sv, false);
    } else {
        for (int i = 0; i < own; i++) iter[i] = fresh(p, "%%iterArg_%d", p->next_arg++);
    }
    for (int i = own; i < n; i++) iter[i] = vals[i];
    if (own < n) {
        ref *r = ref_of(s, in);
        const char *name = fresh(p, "%%%d", p->next_value++);
        newline(p);
        gs_sb_printf(p->sb, own == 1 ? "%s = " : "%s:%d = ", name, own);
        r->kind = REF_ITER; /* element i: the result (#i), unused beyond own */
        r->n = n;
        r->elems = GS_NEW_ARRAY(&p->a, const char *, n);
        if (!r->elems) return p->failed = true, false;
        for (int i = 0; i < n; i++)
            r->elems[i] = own == 1 ? name : gs_arena_printf(&p->a, "%s#%d", name, i < own ? i : 0);
    } else {
        result_prefix(p, s, in);
    }
    gs_sb_puts(p->sb, "stablehlo.while(");
    for (int i = 0; i < own; i++)
        gs_sb_printf(p->sb, "%s%s = %s", i ? ", " : "", iter[i], vals[i]);
    gs_sb_puts(p->sb, ") : ");
    for (int i = 0; i < own; i++) {
        if (i) gs_sb_puts(p->sb, ", ");
        print_type(p->sb, spread_type(init->shape, i));
    }
    gs_sb dict = {0}; /* MLIR's while writes its attributes after the types */
    print_attr_dict(p, &dict, own < n ? first_elements(p, in, own) : in, NULL);
    if (gs_sb_str(&dict)[0]) gs_sb_printf(p->sb, " attributes%s", gs_sb_str(&dict));
    gs_sb_free(&dict);
    const gs_computation *regions[2] = {cond, body};
    for (int k = 0; k < 2; k++) {
        p->indent++;
        newline(p);
        gs_sb_puts(p->sb, k ? "} do {" : "cond {");
        scope *rs = new_scope(p, regions[k]);
        if (!rs) return false;
        naming sv = enter_region(p, regions[k]);
        for (int i = 0; p->o->sdy_opt && i < own; i++) unique_name(p, "iterArg", NAME_ITER);
        p->arg_end = p->next_arg;
        ref *pr = ref_of(rs, regions[k]->params[0]);
        if (n == 1 && n_results(regions[k]->params[0]->shape) == 1 &&
            !gs_shape_is_tuple(regions[k]->params[0]->shape)) {
            pr->kind = REF_VALUE;
            pr->name = iter[0];
        } else {
            pr->kind = REF_ITER;
            pr->n = n;
            pr->elems = iter;
        }
        p->indent++;
        rs->n_ret = k ? own : -1; /* the body returns its own values */
        if (!print_body(p, rs, "stablehlo.return")) return false;
        p->indent -= 2;
        leave_region(p, sv, true);
    }
    p->indent++;
    newline(p);
    gs_sb_putc(p->sb, '}');
    p->indent--;
    return !p->failed;
}

/* sdy_opt: a constant's name, as StableHLO's printer gives it (`%cst` for floats, else `%c`). */
static const char *constant_name(printer *p, const gs_shape *s) {
    return gs_type_is_float(s->type) ? unique_name(p, "cst", NAME_CST)
                                     : unique_name(p, "c", NAME_C);
}

/* `%N = stablehlo.constant dense<...> : T` (a tuple constant: its elements, then a tuple). */
static bool print_constant(printer *p, scope *s, const gs_instr *in) {
    const gs_literal_ir *lit = in->literal;
    if (!lit) return fail(p, in, "a constant without a value cannot be printed");
    if (gs_shape_is_tuple(in->shape)) {
        ref *r = ref_of(s, in);
        r->kind = REF_ITER;
        r->n = in->shape->n_tuple;
        r->elems = GS_NEW_ARRAY(&p->a, const char *, r->n ? r->n : 1);
        if (!r->elems) return p->failed = true, false;
        for (int i = 0; i < r->n; i++) {
            const gs_shape *es = in->shape->tuple[i];
            if (!gs_shape_is_array(es))
                return fail(p, in, "a nested tuple constant cannot be printed");
            const char *name =
                p->o->sdy_opt ? constant_name(p, es) : fresh(p, "%%%d", p->next_value++);
            newline(p);
            gs_sb_printf(p->sb, "%s = stablehlo.constant ", name);
            if (lit->tuple[i]->elided)
                return fail(p, in, "a constant whose value is elided ({...}) cannot be printed");
            print_dense(p->sb, es, lit->tuple[i], p->o->sdy_opt);
            gs_sb_puts(p->sb, " : ");
            print_type(p->sb, es);
            r->elems[i] = name;
        }
        return !p->failed;
    }
    if (lit->elided)
        return fail(p, in, "a constant whose value is elided ({...}) cannot be printed");
    /* `sdy.constant` as the reader read it (frontend_attributes={xla.sdy.constant="true"}
     * marks it): numbered, as MLIR names an op that gives its result no name */
    bool sdy = gs_instr_is_sdy_constant(in);
    if (p->o->sdy_opt && !sdy) {
        ref *r = ref_of(s, in);
        r->kind = REF_VALUE;
        r->name = constant_name(p, in->shape);
        newline(p);
        gs_sb_printf(p->sb, "%s = ", r->name);
    } else {
        result_prefix(p, s, in);
    }
    gs_sb_puts(p->sb, sdy ? "sdy.constant" : "stablehlo.constant");
    print_attr_dict(p, p->sb, in, NULL);
    gs_sb_putc(p->sb, ' ');
    print_dense(p->sb, in->shape, lit, p->o->sdy_opt);
    gs_sb_puts(p->sb, " : ");
    print_type(p->sb, in->shape);
    return !p->failed;
}

/* `%N = call @f(%a) : (T) -> R` */
static bool print_call(printer *p, scope *s, const gs_instr *in, const gs_computation *f) {
    if (!f) return fail(p, in, "a call without a computation cannot be printed");
    int idx = -1;
    for (int i = 0; i < p->m->n_comps; i++)
        if (p->m->comps[i] == f) idx = i;
    if (idx < 0 || !p->func_names[idx]) return fail(p, in, "'%s' is not a function", f->name);
    const char *ops[MAX_VALUES];
    int n = operands_and_result(p, s, in, ops);
    if (n < 0) return false;
    gs_sb_printf(p->sb, "call @%s(", p->func_names[idx]);
    print_names(p->sb, ops, n);
    gs_sb_putc(p->sb, ')');
    print_attr_dict(p, p->sb, in, NULL);
    print_fn_type(p->sb, in);
    return !p->failed;
}

/* `%N = sdy.sharding_constraint %x <@mesh, [...]> : T` for a `Sharding` custom-call whose
 * sharding Shardy spells (what the reader makes of one); false when it is not one. */
static bool print_constraint(printer *p, scope *s, const gs_instr *in, const char *target) {
    const gs_sharding *sh = gs_instr_get_sharding(in);
    if (!p->sdy || strcmp(target, "Sharding") != 0 || in->n_operands != 1 || !sh || in->is_root ||
        gs_instr_attr(in, GS_ATTR_BACKEND_CONFIG) ||
        !gs_shape_equal(in->shape, in->operands[0]->shape))
        return false;
    gs_sb tmp = {0};
    bool ok = print_sdy_leaf(p, &tmp, sh, in->shape);
    if (ok) {
        const char *x = whole_of(p, s, in->operands[0]);
        result_prefix(p, s, in);
        gs_sb_printf(p->sb, "sdy.sharding_constraint %s %s : ", x, gs_sb_str(&tmp));
        print_type(p->sb, in->shape);
    }
    gs_sb_free(&tmp);
    return ok;
}

/* An unused s64[rank] constant before the rng in its computation whose values are its
 * result's dimensions (what the reader leaves of stablehlo.rng's shape operand), or NULL. */
static const gs_instr *shape_constant(const gs_instr *rng) {
    const gs_computation *c = rng->parent;
    const gs_shape *t = rng->shape;
    const gs_instr *found = NULL;
    for (int k = 0; c && k < c->n_instrs && c->instrs[k] != rng; k++) {
        const gs_instr *x = c->instrs[k];
        const gs_literal_ir *lit = x->literal;
        if (x->op != GS_OP_CONSTANT || x->is_root || !gs_shape_is_array(x->shape) ||
            x->shape->type != GS_S64 || x->shape->rank != 1 || x->shape->dims[0] != t->rank ||
            !lit || lit->elided || !lit->data)
            continue;
        bool same = true;
        for (int i = 0; i < t->rank; i++) same &= gs_elem_get_i(lit->data, GS_S64, i) == t->dims[i];
        if (same) found = x;
    }
    for (int k = 0; found && k < c->n_instrs; k++)
        for (int j = 0; j < c->instrs[k]->n_operands; j++)
            if (c->instrs[k]->operands[j] == found) return NULL; /* used: not the reader's */
    return found;
}

/* HLO's rng(a, b), distribution=rng_uniform|rng_normal as `stablehlo.rng %a, %b, %shape,
 * distribution = UNIFORM|NORMAL`, the result's shape a constant before it. */
static bool print_rng_distribution(printer *p, scope *s, const gs_instr *in) {
    const char *d = gs_instr_str(in, GS_ATTR_DISTRIBUTION);
    const char *md = !d ? NULL
                     : strcmp(d, "rng_uniform") == 0 ? "UNIFORM"
                     : strcmp(d, "rng_normal") == 0  ? "NORMAL"
                                                     : NULL;
    if (!md || in->n_operands != 2 || !gs_shape_is_array(in->shape))
        return fail(p, in, "an rng needs two operands and distribution=rng_uniform|rng_normal");
    const char *a = whole_of(p, s, in->operands[0]), *b = whole_of(p, s, in->operands[1]);
    if (p->failed) return false;
    const gs_shape *t = in->shape;
    /* the shape constant read from StableHLO text (left unused by HLO's rng): printed again,
     * once, so that printing is a fixed point */
    const gs_instr *k = shape_constant(in);
    const char *shape = k ? whole_of(p, s, k) : fresh(p, "%%%d", p->next_value++);
    if (!k) {
        newline(p);
        gs_sb_printf(p->sb, "%s = stablehlo.constant dense<", shape);
        bool splat = t->rank > 1; /* one value for all, as MLIR prints it */
        for (int i = 1; i < t->rank; i++) splat &= t->dims[i] == t->dims[0];
        if (splat) gs_sb_printf(p->sb, "%" PRId64, t->dims[0]);
        if (t->rank > 0 && !splat) gs_sb_putc(p->sb, '[');
        for (int i = 0; i < t->rank && !splat; i++)
            gs_sb_printf(p->sb, "%s%" PRId64, i ? ", " : "", t->dims[i]);
        if (t->rank > 0 && !splat) gs_sb_putc(p->sb, ']');
        gs_sb_printf(p->sb, "> : tensor<%dxi64>", t->rank);
    }
    if (p->failed) return false;
    result_prefix(p, s, in);
    gs_sb_printf(p->sb, "stablehlo.rng %s, %s, %s, distribution = %s", a, b, shape, md);
    print_attr_dict(p, p->sb, in, NULL);
    gs_sb_puts(p->sb, " : (");
    print_type(p->sb, in->operands[0]->shape);
    gs_sb_puts(p->sb, ", ");
    print_type(p->sb, in->operands[1]->shape);
    gs_sb_printf(p->sb, ", tensor<%dxi64>) -> ", t->rank);
    print_type(p->sb, t);
    return !p->failed;
}

/* ------------------------------------------------------------------ transfers */

/* Is in used only by instructions of opcode op (and not returned)? */
static bool only_used_by(const gs_instr *in, gs_opcode op) {
    const gs_computation *c = in->parent;
    if (!c || in->is_root) return false;
    for (int k = 0; k < c->n_instrs; k++) {
        const gs_instr *u = c->instrs[k];
        for (int j = 0; j < u->n_operands; j++)
            if (u->operands[j] == in && u->op != op) return false;
    }
    return true;
}

/* The attribute dictionary of a transfer op: its channel (type 1 device to device, 2 device
 * to host, 3 host to device), is_host_transfer, its config string and its HLO sharding as
 * written (these ops' shardings cover HLO's own tuple forms, so they stay HLO text). */
static void print_transfer_attrs(printer *p, const gs_instr *in, int host_type,
                                 const char *config) {
    const gs_attr *host = gs_instr_attr_named(in, "is_host_transfer");
    bool is_host = host && host->u.s && strcmp(host->u.s, "true") == 0;
    gs_sb d = {0};
    const gs_attr *c = gs_instr_attr(in, GS_ATTR_CHANNEL_ID);
    if (c)
        gs_sb_printf(&d, "channel_handle = #stablehlo.channel_handle<handle = %" PRId64
                     ", type = %d>", c->u.i, is_host ? host_type : 1);
    if (is_host) {
        sep(&d);
        gs_sb_puts(&d, "is_host_transfer = true");
    }
    const gs_attr *cf = config ? gs_instr_attr_named(in, config) : NULL;
    if (config) {
        sep(&d);
        gs_sb_printf(&d, "%s = ", config);
        const char *v = cf && cf->u.s ? cf->u.s : "";
        size_t len = strlen(v);
        if (len >= 2 && v[0] == '"' && v[len - 1] == '"')
            gs_sb_puts(&d, v);
        else
            print_escaped(&d, v);
    }
    const gs_sharding *sh = gs_instr_get_sharding(in);
    if (sh) {
        sep(&d);
        gs_sb_puts(&d, "mhlo.sharding = ");
        print_sharding_text(&d, sh);
    }
    if (gs_sb_str(&d)[0]) gs_sb_printf(p->sb, " {%s}", gs_sb_str(&d));
    if (d.failed) p->failed = true;
    gs_sb_free(&d);
}

/* The values a send or outfeed sends: data's elements when it is a tuple (of arrays), else
 * data. Returns the count, -1 after an error. */
static int transfer_values(printer *p, scope *s, const gs_instr *in, const gs_instr *data,
                           const char **vals, const gs_shape **types) {
    if (!gs_shape_is_tuple(data->shape)) {
        vals[0] = whole_of(p, s, data);
        types[0] = data->shape;
        return p->failed ? -1 : 1;
    }
    if (data->shape->n_tuple >= MAX_VALUES - 1)
        return fail(p, in, "too many values to print"), -1;
    for (int i = 0; i < data->shape->n_tuple; i++) {
        if (!gs_shape_is_array(data->shape->tuple[i]))
            return fail(p, in, "a '%s' of nested tuples has no StableHLO form",
                        gs_op_name(in->op)), -1;
        vals[i] = elem_of(p, s, data, i);
        types[i] = data->shape->tuple[i];
    }
    return p->failed ? -1 : data->shape->n_tuple;
}

/* HLO's send/send-done, recv/recv-done pairs as StableHLO's one `stablehlo.send` and
 * `stablehlo.recv` (printed at the -done half, which gives the op's results), infeed and
 * outfeed with their data tuples spread into values, as XLA's MLIR import writes them. */
static bool print_transfer(printer *p, scope *s, const gs_instr *in) {
    const char *vals[MAX_VALUES];
    const gs_shape *types[MAX_VALUES];
    switch (in->op) {
    case GS_OP_SEND:
    case GS_OP_RECV: {
        gs_opcode done = in->op == GS_OP_SEND ? GS_OP_SEND_DONE : GS_OP_RECV_DONE;
        if (!only_used_by(in, done))
            return fail(p, in, "a '%s' whose value is used other than by its '%s' has no "
                        "StableHLO form", gs_op_name(in->op), gs_op_name(done));
        if (in->op == GS_OP_RECV && !(gs_shape_is_tuple(in->shape) && in->shape->n_tuple == 3 &&
                                      gs_shape_is_array(in->shape->tuple[0])))
            return fail(p, in, "a recv of a tuple has no StableHLO form in gspmd's printer");
        return true; /* printed by its -done */
    }
    case GS_OP_SEND_DONE:
    case GS_OP_RECV_DONE: {
        const gs_instr *x = in->n_operands == 1 ? in->operands[0] : NULL;
        gs_opcode start = in->op == GS_OP_SEND_DONE ? GS_OP_SEND : GS_OP_RECV;
        if (!x || x->op != start || x->n_operands != (start == GS_OP_SEND ? 2 : 1))
            return fail(p, in, "a '%s' of no '%s' has no StableHLO form", gs_op_name(in->op),
                        gs_op_name(start));
        int n = 0;
        if (start == GS_OP_SEND && (n = transfer_values(p, s, x, x->operands[0], vals, types)) < 0)
            return false;
        const char *tok = whole_of(p, s, x->operands[start == GS_OP_SEND ? 1 : 0]);
        if (p->failed) return false;
        result_prefix(p, s, in);
        gs_sb_printf(p->sb, "\"stablehlo.%s\"(", start == GS_OP_SEND ? "send" : "recv");
        print_names(p->sb, vals, n);
        gs_sb_printf(p->sb, "%s%s)", n ? ", " : "", tok);
        print_transfer_attrs(p, x, start == GS_OP_SEND ? 2 : 3, NULL);
        gs_sb_puts(p->sb, " : (");
        for (int i = 0; i < n; i++) {
            print_type(p->sb, types[i]);
            gs_sb_puts(p->sb, ", ");
        }
        gs_sb_puts(p->sb, "!stablehlo.token) -> ");
        print_result_types(p->sb, in);
        return !p->failed;
    }
    case GS_OP_OUTFEED: {
        if (in->n_operands != 2) return fail(p, in, "an outfeed needs data and a token");
        int n = transfer_values(p, s, in, in->operands[0], vals, types);
        if (n < 0) return false;
        const char *tok = whole_of(p, s, in->operands[1]);
        if (p->failed) return false;
        result_prefix(p, s, in);
        gs_sb_puts(p->sb, "\"stablehlo.outfeed\"(");
        print_names(p->sb, vals, n);
        gs_sb_printf(p->sb, "%s%s)", n ? ", " : "", tok);
        print_transfer_attrs(p, in, 1, "outfeed_config");
        gs_sb_puts(p->sb, " : (");
        for (int i = 0; i < n; i++) {
            print_type(p->sb, types[i]);
            gs_sb_puts(p->sb, ", ");
        }
        gs_sb_puts(p->sb, "!stablehlo.token) -> !stablehlo.token");
        return !p->failed;
    }
    default: break;
    }
    /* infeed: ((data...) or data, token) */
    const gs_shape *t = in->shape;
    if (in->n_operands != 1 || !gs_shape_is_tuple(t) || t->n_tuple != 2)
        return fail(p, in, "an infeed gives its data and a token");
    const gs_shape *data = t->tuple[0];
    bool spread_data = gs_shape_is_tuple(data);
    int n = spread_data ? data->n_tuple : 1;
    if (n >= MAX_VALUES) return fail(p, in, "too many values to print");
    for (int i = 0; i < n; i++) {
        types[i] = spread_data ? data->tuple[i] : data;
        if (!gs_shape_is_array(types[i]))
            return fail(p, in, "an infeed of nested tuples has no StableHLO form");
    }
    const char *tok = whole_of(p, s, in->operands[0]);
    if (p->failed) return false;
    ref *r = ref_of(s, in);
    r->name = fresh(p, "%%%d", p->next_value++);
    newline(p);
    if (n)
        gs_sb_printf(p->sb, "%s:%d = ", r->name, n + 1);
    else
        gs_sb_printf(p->sb, "%s = ", r->name);
    if (!spread_data) {
        r->kind = REF_MULTI;
        r->n = 2;
    } else {
        ref *d = GS_NEW(&p->a, ref);
        const char **el = GS_NEW_ARRAY(&p->a, const char *, n + 1);
        r->elems = GS_NEW_ARRAY(&p->a, const char *, 2);
        if (!d || !el || !r->elems) return p->failed = true, false;
        for (int i = 0; i < n; i++) el[i] = gs_arena_printf(&p->a, "%s#%d", r->name, i);
        memset(d, 0, sizeof *d);
        d->kind = REF_ITER;
        d->n = n;
        d->elems = el;
        r->kind = REF_ITER;
        r->n = 2;
        r->elems[0] = NULL;
        r->elems[1] = n ? gs_arena_printf(&p->a, "%s#%d", r->name, n) : r->name;
        r->sub0 = d;
    }
    gs_sb_printf(p->sb, "\"stablehlo.infeed\"(%s)", tok);
    print_transfer_attrs(p, in, 1, "infeed_config");
    gs_sb_puts(p->sb, " : (!stablehlo.token) -> ");
    if (n) gs_sb_putc(p->sb, '(');
    for (int i = 0; i < n; i++) {
        print_type(p->sb, types[i]);
        gs_sb_puts(p->sb, ", ");
    }
    gs_sb_puts(p->sb, n ? "!stablehlo.token)" : "!stablehlo.token");
    return !p->failed;
}

/* A copy that carries a sharding is where the user pinned a value's sharding (XLA's
 * `copy(x), sharding=...`, what jax.lax.with_sharding_constraint lowered to): StableHLO has no
 * copy, so it prints as the annotation JAX writes, `sdy.sharding_constraint` or
 * `stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "..."}`, never dropped. */
static bool print_sharded_copy(printer *p, scope *s, const gs_instr *in) {
    if (print_constraint(p, s, in, "Sharding")) return !p->failed;
    const char *x = whole_of(p, s, in->operands[0]);
    if (p->failed) return false;
    result_prefix(p, s, in);
    gs_sb_printf(p->sb, "stablehlo.custom_call @Sharding(%s)", x);
    print_attr_dict(p, p->sb, in, NULL);
    print_fn_type(p->sb, in);
    return !p->failed;
}

/* A get-tuple-element printed as the value it names (an op's result, a tuple's operand) that
 * has a sharding of its own, other than the value's (had): pinned after it as XLA's export
 * would write a sharded get-tuple-element, `stablehlo.custom_call @Sharding(%v)`. */
static bool pin_element_sharding(printer *p, scope *s, const gs_instr *gte, const gs_sharding *had) {
    const gs_sharding *sh = gs_instr_get_sharding(gte);
    if (!sh || (had && gs_sharding_equal(sh, had)) || gte->is_root ||
        !gs_shape_is_array(gte->shape) || (p->manual_depth && gs_sharding_is_manual(sh)))
        return true;
    const char *x = ref_of(s, gte)->name;
    if (!x) return true;
    result_prefix(p, s, gte);
    gs_sb_printf(p->sb, "stablehlo.custom_call @Sharding(%s)", x);
    print_attr_dict(p, p->sb, gte, NULL);
    gs_sb_puts(p->sb, " : (");
    print_type(p->sb, gte->shape);
    gs_sb_puts(p->sb, ") -> ");
    print_type(p->sb, gte->shape);
    return !p->failed;
}

/* Shardy's markers the reader keeps as custom-calls of their own name: `%N =
 * sdy.data_flow_edge %x sharding=<...> : T`, `sdy.reshard %x <...> : T`,
 * `sdy.func_data_flow_edge %x {sdy.sharding = ...} : T`, `sdy.propagation_barrier %x
 * allowed_direction=D : T`. False when in is not one, or its sharding has no Shardy form. */
static bool print_sdy_marker(printer *p, scope *s, const gs_instr *in, const char *target) {
    static const char *const MARKERS[] = {"sdy.data_flow_edge", "sdy.reshard",
                                          "sdy.func_data_flow_edge", "sdy.propagation_barrier"};
    int k = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(target, MARKERS[i]) == 0) k = i;
    const gs_sharding *sh = gs_instr_get_sharding(in);
    const char *dir = gs_instr_str(in, GS_ATTR_BACKEND_CONFIG);
    if (k < 0 || in->n_operands != 1 || (k == 1 && !sh) || (k == 3 && !dir) ||
        !gs_shape_equal(in->shape, in->operands[0]->shape))
        return false;
    gs_sb tmp = {0};
    bool ok = !sh || print_sdy_leaf(p, &tmp, sh, in->shape);
    if (ok) {
        const char *x = whole_of(p, s, in->operands[0]);
        result_prefix(p, s, in);
        gs_sb_printf(p->sb, "%s %s", target, x);
        if (k == 0 && sh) gs_sb_printf(p->sb, " sharding=%s", gs_sb_str(&tmp));
        if (k == 1) gs_sb_printf(p->sb, " %s", gs_sb_str(&tmp));
        if (k == 2 && sh)
            gs_sb_printf(p->sb, " {sdy.sharding = #sdy.sharding_per_value<[%s]>}", gs_sb_str(&tmp));
        if (k == 3) gs_sb_printf(p->sb, " allowed_direction=%s", dir);
        if (k == 3 && sh)
            gs_sb_printf(p->sb, " {sdy.sharding = #sdy.sharding_per_value<[%s]>}", gs_sb_str(&tmp));
        gs_sb_puts(p->sb, " : ");
        print_type(p->sb, in->shape);
    }
    gs_sb_free(&tmp);
    return ok;
}

static bool print_custom_call(printer *p, scope *s, const gs_instr *in) {
    const char *target = gs_instr_str(in, GS_ATTR_CUSTOM_CALL_TARGET);
    if (!target) return fail(p, in, "a custom-call without a target cannot be printed");
    if (print_constraint(p, s, in, target) || print_sdy_marker(p, s, in, target)) return !p->failed;
    int64_t group;
    if (gs_instr_sharding_group(in, &group) && gs_shape_is_tuple(in->shape) &&
        in->shape->n_tuple == 0) { /* `sdy.sharding_group %x group_id=N : T` (no result) */
        const char *x = whole_of(p, s, in->operands[0]);
        newline(p);
        gs_sb_printf(p->sb, "sdy.sharding_group %s group_id=%lld : ", x, (long long)group);
        print_type(p->sb, in->operands[0]->shape);
        return !p->failed;
    }
    const char *ops[MAX_VALUES];
    int n = operands_and_result(p, s, in, ops);
    if (n < 0) return false;
    bool plain = target[0] != 0;
    for (const char *c = target; *c; c++)
        plain &= (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '_' || *c == '.' || *c == '$';
    gs_sb_puts(p->sb, "stablehlo.custom_call @");
    if (plain)
        gs_sb_puts(p->sb, target);
    else
        print_escaped(p->sb, target);
    gs_sb_putc(p->sb, '(');
    print_names(p->sb, ops, n);
    gs_sb_putc(p->sb, ')');
    gs_sb extra = {0};
    if (gs_instr_bool(in, GS_ATTR_CUSTOM_CALL_HAS_SIDE_EFFECT, false))
        gs_sb_puts(&extra, "has_side_effect = true");
    const char *cfg = gs_instr_str(in, GS_ATTR_BACKEND_CONFIG);
    if (cfg) { /* HLO keeps it as written: a quoted string (or other text, quoted here) */
        gs_sb_puts(&extra, gs_sb_str(&extra)[0] ? ", backend_config = " : "backend_config = ");
        size_t len = strlen(cfg);
        if (len >= 2 && cfg[0] == '"' && cfg[len - 1] == '"')
            gs_sb_puts(&extra, cfg);
        else
            print_escaped(&extra, cfg);
    }
    const gs_attr *cc = gs_instr_attr(in, GS_ATTR_CALLED_COMPUTATIONS);
    if (cc && cc->u.comps.n) { /* `called_computations = [@f]`: each printed as a function */
        gs_sb_puts(&extra, gs_sb_str(&extra)[0] ? ", called_computations = [" :
                                                   "called_computations = [");
        for (int i = 0; i < cc->u.comps.n; i++) {
            const char *f = func_name_of(p, cc->u.comps.v[i]);
            if (!f) return fail(p, in, "a called computation is not a function");
            gs_sb_printf(&extra, "%s@%s", i ? ", " : "", f);
        }
        gs_sb_putc(&extra, ']');
    }
    print_attr_dict(p, p->sb, in, gs_sb_str(&extra));
    if (extra.failed) p->failed = true;
    gs_sb_free(&extra);
    print_fn_type(p->sb, in);
    return !p->failed;
}

/* `%N:K = stablehlo.optimization_barrier {dict} %a, %b : T, U` (its pretty form: a result per
 * operand, as the reader's one tuple operand of several values is printed too); the generic
 * form when the operands are not the results' values (a tuple value). */
static bool print_barrier(printer *p, scope *s, const gs_instr *in) {
    const gs_shape *t = in->shape;
    /* the values: the operands, or the elements of a tuple op that is not printed */
    const gs_instr *const *vals = (const gs_instr *const *)in->operands;
    int n_vals = in->n_operands;
    if (n_vals == 1 && gs_shape_is_tuple(t) && t->n_tuple > 1 &&
        ref_of(s, in->operands[0])->kind == REF_TUPLE) {
        const gs_instr *tup = ref_of(s, in->operands[0])->tuple;
        vals = (const gs_instr *const *)tup->operands;
        n_vals = tup->n_operands;
    }
    bool pretty = n_vals > 0;
    if (gs_shape_is_tuple(t)) {
        pretty &= t->n_tuple == n_vals && t->n_tuple != 1;
        for (int i = 0; pretty && i < n_vals; i++)
            pretty = !gs_shape_is_tuple(t->tuple[i]) && gs_shape_equal(t->tuple[i], vals[i]->shape);
    } else {
        pretty &= n_vals == 1 && gs_shape_equal(t, vals[0]->shape);
    }
    if (!pretty) return print_generic(p, s, in, "optimization_barrier", NULL, 0, NULL);
    const char *ops[MAX_VALUES];
    if (n_vals > MAX_VALUES) return fail(p, in, "too many operands to print");
    for (int i = 0; i < n_vals; i++) ops[i] = whole_of(p, s, vals[i]);
    if (p->failed) return false;
    result_prefix(p, s, in);
    gs_sb_puts(p->sb, "stablehlo.optimization_barrier");
    print_attr_dict(p, p->sb, in, NULL);
    gs_sb_putc(p->sb, ' ');
    print_names(p->sb, ops, n_vals);
    gs_sb_puts(p->sb, " : ");
    for (int i = 0; i < n_vals; i++) {
        if (i) gs_sb_puts(p->sb, ", ");
        print_type(p->sb, vals[i]->shape);
    }
    return !p->failed;
}

/* `%output_state, %output = stablehlo.rng_bit_generator %s, algorithm = M {dict} : (S) -> (S, T)`
 * (its pretty form; sdy_opt names the results as MLIR does, else `%N:2`). */
static bool print_rng(printer *p, scope *s, const gs_instr *in, const char *alg) {
    const char *x = whole_of(p, s, in->operands[0]);
    if (p->failed) return false;
    if (p->o->sdy_opt) {
        ref *r = ref_of(s, in);
        r->kind = REF_ITER;
        r->n = 2;
        r->elems = GS_NEW_ARRAY(&p->a, const char *, 2);
        if (!r->elems) return p->failed = true, false;
        r->elems[0] = unique_name(p, "output_state", NAME_OUTPUT_STATE);
        r->elems[1] = unique_name(p, "output", NAME_OUTPUT);
        newline(p);
        gs_sb_printf(p->sb, "%s, %s = ", r->elems[0], r->elems[1]);
    } else {
        result_prefix(p, s, in);
    }
    gs_sb_printf(p->sb, "stablehlo.rng_bit_generator %s, algorithm =  %s", x, alg);
    print_attr_dict(p, p->sb, in, NULL);
    print_fn_type(p->sb, in);
    return !p->failed;
}

/* Do a and b print as one StableHLO type (layouts aside)? */
static bool same_type(const gs_shape *a, const gs_shape *b) {
    if (a->type != b->type) return false;
    if (a->type != GS_TUPLE) return gs_shape_same_dims(a, b);
    if (a->n_tuple != b->n_tuple) return false;
    for (int i = 0; i < a->n_tuple; i++)
        if (!same_type(a->tuple[i], b->tuple[i])) return false;
    return true;
}

/* in's value is its operand's (copies and markers StableHLO does not have). */
static bool alias(scope *s, const gs_instr *in) {
    s->refs[in->id] = *ref_of(s, in->operands[0]);
    return true;
}

static bool print_instr(printer *p, scope *s, const gs_instr *in) {
    gs_sb at = {0};
    bool ok;
    const char *name = mlir_op_name(p, in->op);
    const gs_op_info *info = gs_op_info_of(in->op);
    gs_computation *to_apply = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    switch (in->op) {
    case GS_OP_TUPLE: {
        ref *r = ref_of(s, in);
        r->kind = REF_TUPLE;
        r->n = in->n_operands;
        r->tuple = in;
        return true;
    }
    case GS_OP_GET_TUPLE_ELEMENT: {
        const gs_instr *t = in->operands[0];
        int64_t i = gs_instr_int(in, GS_ATTR_INDEX, 0);
        if (!gs_shape_is_tuple(t->shape) || i < 0 || i >= t->shape->n_tuple)
            return fail(p, in, "get-tuple-element index out of range");
        ref *tr = ref_of(s, t);
        if (tr->kind == REF_TUPLE) {
            s->refs[in->id] = *ref_of(s, tr->tuple->operands[i]);
            return pin_element_sharding(p, s, in, gs_instr_get_sharding(tr->tuple->operands[i]));
        }
        if (tr->kind == REF_ITER && i == 0 && tr->sub0 && !tr->elems[0]) {
            s->refs[in->id] = *tr->sub0;
            return true;
        }
        if (tr->kind == REF_VALUE && gs_instr_get_sharding(in)) {
            /* its own get_tuple_element, which keeps its sharding (a tuple parameter's
             * elements, each sharded) */
            result_prefix(p, s, in);
            gs_sb_printf(p->sb, "\"stablehlo.get_tuple_element\"(%s) <{index = %d : i32}>",
                         tr->name, (int)i);
            print_attr_dict(p, p->sb, in, NULL);
            print_fn_type(p->sb, in);
            return !p->failed;
        }
        const char *e = elem_of(p, s, t, (int)i);
        ref *r = ref_of(s, in);
        r->kind = REF_VALUE;
        r->name = e;
        if (tr->kind != REF_MULTI || p->failed) return !p->failed;
        const gs_sharding *ts = gs_instr_get_sharding(t);
        if (ts && ts->kind == GS_SHARDING_TUPLE)
            ts = ts->n_tuple == t->shape->n_tuple ? ts->tuple[i] : NULL;
        return pin_element_sharding(p, s, in, ts);
    }
    case GS_OP_COPY:
    case GS_OP_DOMAIN:
    case GS_OP_ADD_DEPENDENCY:
        /* its value is its operand's: only when the types agree (an unverified module may
         * say otherwise, and the printed text would then read back differently) */
        if (!in->n_operands || !same_type(in->shape, in->operands[0]->shape))
            return fail(p, in, "'%s' whose type differs from its operand's cannot be printed",
                        gs_op_name(in->op));
        if (in->op == GS_OP_COPY && !in->is_root && gs_instr_get_sharding(in))
            return print_sharded_copy(p, s, in);
        return alias(s, in);
    case GS_OP_SEND:
    case GS_OP_RECV:
    case GS_OP_SEND_DONE:
    case GS_OP_RECV_DONE:
    case GS_OP_INFEED:
    case GS_OP_OUTFEED: return print_transfer(p, s, in);
    case GS_OP_CONSTANT: return print_constant(p, s, in);
    case GS_OP_WHILE: return print_while(p, s, in);
    case GS_OP_CALL: return print_call(p, s, in, to_apply);
    case GS_OP_FUSION: return print_call(p, s, in, gs_instr_comp(in, GS_ATTR_CALLS));
    case GS_OP_CUSTOM_CALL: return print_custom_call(p, s, in);
    case GS_OP_CONDITIONAL: return print_conditional(p, s, in);
    case GS_OP_CONVOLUTION: return print_convolution(p, s, in);
    case GS_OP_COMPARE: {
        const char *dir = gs_instr_str(in, GS_ATTR_DIRECTION);
        const char *type = gs_instr_str(in, GS_ATTR_TYPE);
        if (!dir || in->n_operands != 2) return fail(p, in, "a compare needs a direction");
        const char *a = whole_of(p, s, in->operands[0]), *b = whole_of(p, s, in->operands[1]);
        if (p->failed) return false;
        result_prefix(p, s, in);
        gs_sb_printf(p->sb, "stablehlo.compare  %s, %s, %s", dir, a, b);
        if (type) gs_sb_printf(p->sb, ",  %s", type);
        print_attr_dict(p, p->sb, in, NULL);
        print_fn_type(p->sb, in);
        return !p->failed;
    }
    case GS_OP_BROADCAST:
    case GS_OP_TRANSPOSE:
    case GS_OP_REVERSE:
        gs_sb_puts(&at, "dims = ");
        print_list(&at, gs_instr_ints(in, GS_ATTR_DIMENSIONS));
        ok = print_pretty(p, s, in, name, gs_sb_str(&at), in->op != GS_OP_REVERSE);
        gs_sb_free(&at);
        return ok;
    case GS_OP_CONCATENATE: {
        gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        gs_sb_printf(&at, "dim = %" PRId64, d.n ? d.v[0] : 0);
        ok = print_pretty(p, s, in, name, gs_sb_str(&at), true);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_IOTA:
        gs_sb_printf(&at, "dim = %" PRId64, gs_instr_int(in, GS_ATTR_IOTA_DIMENSION, 0));
        ok = print_pretty(p, s, in, name, gs_sb_str(&at), false);
        gs_sb_free(&at);
        return ok;
    case GS_OP_SLICE: {
        const gs_attr *sl = gs_instr_attr(in, GS_ATTR_SLICE);
        const char *x = whole_of(p, s, in->operands[0]);
        if (!sl) return fail(p, in, "a slice needs slice={...}");
        if (p->failed) return false;
        result_prefix(p, s, in);
        gs_sb_printf(p->sb, "stablehlo.slice %s [", x);
        for (int i = 0; i < sl->u.slice.n; i++) {
            const gs_slice_dim *d = &sl->u.slice.v[i];
            gs_sb_printf(p->sb, "%s%" PRId64 ":%" PRId64, i ? ", " : "", d->start, d->limit);
            if (d->stride != 1) gs_sb_printf(p->sb, ":%" PRId64, d->stride);
        }
        gs_sb_putc(p->sb, ']');
        print_attr_dict(p, p->sb, in, NULL);
        print_fn_type(p->sb, in);
        return !p->failed;
    }
    case GS_OP_DOT: {
        gs_ints lb = gs_instr_ints(in, GS_ATTR_LHS_BATCH_DIMS);
        gs_ints rb = gs_instr_ints(in, GS_ATTR_RHS_BATCH_DIMS);
        gs_ints lc = gs_instr_ints(in, GS_ATTR_LHS_CONTRACTING_DIMS);
        gs_ints rc = gs_instr_ints(in, GS_ATTR_RHS_CONTRACTING_DIMS);
        if (in->n_operands != 2)
            return fail(p, in,
                        "a dot of %d operands (sparse) cannot be "
                        "printed",
                        in->n_operands);
        if (lb.n || rb.n) {
            gs_sb_puts(&at, "batching_dims = ");
            print_list(&at, lb);
            gs_sb_puts(&at, " x ");
            print_list(&at, rb);
        }
        if (lc.n || rc.n) {
            sep(&at);
            gs_sb_puts(&at, "contracting_dims = ");
            print_list(&at, lc);
            gs_sb_puts(&at, " x ");
            print_list(&at, rc);
        }
        ok = print_pretty(p, s, in, name, gs_sb_str(&at), true);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_DYNAMIC_SLICE:
        gs_sb_puts(&at, "sizes = ");
        print_list(&at, gs_instr_ints(in, GS_ATTR_DYNAMIC_SLICE_SIZES));
        ok = print_pretty(p, s, in, name, gs_sb_str(&at), true);
        gs_sb_free(&at);
        return ok;
    case GS_OP_PAD: {
        const gs_attr *pa = gs_instr_attr(in, GS_ATTR_PADDING);
        if (!pa) return fail(p, in, "a pad needs padding=...");
        const gs_padding *pd = pa->u.padding;
        static const char *const KEYS[3] = {"low", "high", "interior"};
        for (int k = 0; k < 3; k++) {
            gs_sb_printf(&at, "%s%s = [", k ? ", " : "", KEYS[k]);
            for (int i = 0; i < pd->n; i++) {
                int64_t v = k == 0   ? pd->dims[i].lo
                            : k == 1 ? pd->dims[i].hi
                                     : pd->dims[i].interior;
                gs_sb_printf(&at, "%s%" PRId64, i ? ", " : "", v);
            }
            gs_sb_putc(&at, ']');
        }
        ok = print_pretty(p, s, in, name, gs_sb_str(&at), true);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_REDUCE_PRECISION:
        gs_sb_printf(&at, "format = e%" PRId64 "m%" PRId64,
                     gs_instr_int(in, GS_ATTR_EXPONENT_BITS, 8),
                     gs_instr_int(in, GS_ATTR_MANTISSA_BITS, 23));
        ok = print_pretty(p, s, in, name, gs_sb_str(&at), false);
        gs_sb_free(&at);
        return ok;
    case GS_OP_RESHAPE:
    case GS_OP_BITCAST:
    case GS_OP_CONVERT:
    case GS_OP_BITCAST_CONVERT:
    case GS_OP_DYNAMIC_UPDATE_SLICE: return print_pretty(p, s, in, name, NULL, true);
    case GS_OP_PARTITION_ID:
    case GS_OP_REPLICA_ID:
    case GS_OP_AFTER_ALL: return print_pretty(p, s, in, name, NULL, false);
    case GS_OP_REDUCE: {
        gs_sb_puts(&at, "dimensions = ");
        gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        print_array(&at, d.v, d.n);
        ok = print_generic(p, s, in, name, gs_sb_str(&at), 1, &to_apply);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_REDUCE_WINDOW:
    case GS_OP_SELECT_AND_SCATTER: {
        const gs_attr *w = gs_instr_attr(in, GS_ATTR_WINDOW);
        if (!w) return fail(p, in, "'%s' needs a window", gs_op_name(in->op));
        print_window_props(&at, w->u.window, in->op == GS_OP_REDUCE_WINDOW);
        gs_computation *regs[2] = {to_apply, NULL};
        int nr = 1;
        if (in->op == GS_OP_SELECT_AND_SCATTER) {
            regs[0] = gs_instr_comp(in, GS_ATTR_SELECT);
            regs[1] = gs_instr_comp(in, GS_ATTR_SCATTER);
            nr = 2;
        }
        ok = print_generic(p, s, in, name, gs_sb_str(&at), nr, regs);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_SORT: {
        gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        gs_sb_printf(&at, "dimension = %" PRId64 " : i64", d.n ? d.v[0] : 0);
        if (gs_instr_bool(in, GS_ATTR_IS_STABLE, false)) gs_sb_puts(&at, ", is_stable = true");
        ok = print_generic(p, s, in, name, gs_sb_str(&at), 1, &to_apply);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_GATHER:
    case GS_OP_SCATTER: {
        bool g = in->op == GS_OP_GATHER;
        static const gs_attr_key GATHER_KEYS[] = {
            GS_ATTR_OFFSET_DIMS, GS_ATTR_COLLAPSED_SLICE_DIMS, GS_ATTR_OPERAND_BATCHING_DIMS,
            GS_ATTR_START_INDICES_BATCHING_DIMS, GS_ATTR_START_INDEX_MAP};
        static const gs_attr_key SCATTER_KEYS[] = {
            GS_ATTR_UPDATE_WINDOW_DIMS, GS_ATTR_INSERTED_WINDOW_DIMS, GS_ATTR_INPUT_BATCHING_DIMS,
            GS_ATTR_SCATTER_INDICES_BATCHING_DIMS, GS_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS};
        const gs_attr_key *keys = g ? GATHER_KEYS : SCATTER_KEYS;
        gs_sb_puts(&at, g ? "dimension_numbers = #stablehlo.gather<"
                          : "scatter_dimension_numbers = #stablehlo.scatter<");
        for (int k = 0; k < 5; k++) {
            gs_ints v = gs_instr_ints(in, keys[k]);
            if (!v.n) continue;
            gs_sb_printf(&at, "%s = ", gs_attr_name(keys[k]));
            print_list(&at, v);
            gs_sb_puts(&at, ", ");
        }
        gs_sb_printf(&at, "index_vector_dim = %" PRId64 ">",
                     gs_instr_int(in, GS_ATTR_INDEX_VECTOR_DIM, 0));
        if (gs_instr_bool(in, GS_ATTR_INDICES_ARE_SORTED, false))
            gs_sb_puts(&at, ", indices_are_sorted = true");
        if (g) {
            gs_ints ss = gs_instr_ints(in, GS_ATTR_SLICE_SIZES);
            gs_sb_puts(&at, ", slice_sizes = ");
            print_array(&at, ss.v, ss.n);
        } else if (gs_instr_bool(in, GS_ATTR_UNIQUE_INDICES, false)) {
            gs_sb_puts(&at, ", unique_indices = true");
        }
        ok = print_generic(p, s, in, name, gs_sb_str(&at), g ? 0 : 1, &to_apply);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_OPTIMIZATION_BARRIER: return print_barrier(p, s, in);
    case GS_OP_ALL_REDUCE:
    case GS_OP_ALL_GATHER:
    case GS_OP_ALL_TO_ALL:
    case GS_OP_REDUCE_SCATTER:
    case GS_OP_COLLECTIVE_BROADCAST:
    case GS_OP_COLLECTIVE_PERMUTE: {
        gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        if (in->op == GS_OP_ALL_GATHER || in->op == GS_OP_REDUCE_SCATTER) {
            gs_sb_printf(&at, "%s = %" PRId64 " : i64",
                         in->op == GS_OP_ALL_GATHER ? "all_gather_dim" : "scatter_dimension",
                         d.n ? d.v[0] : 0);
        } else if (in->op == GS_OP_ALL_TO_ALL) {
            const gs_attr *g = gs_instr_attr(in, GS_ATTR_REPLICA_GROUPS);
            int64_t count = g && g->u.groups->n_groups ? gs_replica_groups_size(g->u.groups, 0)
                                                       : p->m->num_partitions;
            if (!d.n) {
                gs_sb_free(&at);
                return fail(p, in, "a tuple all-to-all has no StableHLO form");
            }
            gs_sb_printf(&at,
                         "split_dimension = %" PRId64 " : i64, concat_dimension = %" PRId64
                         " : i64, split_count = %" PRId64 " : i64",
                         d.v[0], d.v[0], count);
        } else if (in->op == GS_OP_COLLECTIVE_PERMUTE) {
            const gs_attr *pr = gs_instr_attr(in, GS_ATTR_SOURCE_TARGET_PAIRS);
            int n = pr ? pr->u.pairs.n : 0;
            gs_sb_puts(&at, "source_target_pairs = dense<");
            if (n) gs_sb_putc(&at, '[');
            for (int i = 0; i < n; i++)
                gs_sb_printf(&at, "%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "",
                             pr->u.pairs.v[i][0], pr->u.pairs.v[i][1]);
            if (n) gs_sb_putc(&at, ']');
            gs_sb_printf(&at, "> : tensor<%dx2xi64>", n);
        }
        if (in->op != GS_OP_COLLECTIVE_PERMUTE && !print_groups(p, &at, in)) {
            gs_sb_free(&at);
            return false;
        }
        print_channel(&at, in);
        if (gs_instr_bool(in, GS_ATTR_USE_GLOBAL_DEVICE_IDS, false)) {
            sep(&at);
            gs_sb_puts(&at, "use_global_device_ids");
        }
        bool reg = in->op == GS_OP_ALL_REDUCE || in->op == GS_OP_REDUCE_SCATTER;
        ok = print_generic(p, s, in, name, gs_sb_str(&at), reg ? 1 : 0, &to_apply);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_FFT: {
        gs_ints l = gs_instr_ints(in, GS_ATTR_FFT_LENGTH);
        const char *t = gs_instr_str(in, GS_ATTR_FFT_TYPE);
        gs_sb_printf(&at, "fft_length = ");
        print_array(&at, l.v, l.n);
        gs_sb_printf(&at, ", fft_type = #stablehlo<fft_type %s>", t ? t : "FFT");
        ok = print_generic(p, s, in, name, gs_sb_str(&at), 0, NULL);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_CHOLESKY:
        gs_sb_printf(&at, "lower = %s", gs_instr_bool(in, GS_ATTR_LOWER, false) ? "true" : "false");
        ok = print_generic(p, s, in, name, gs_sb_str(&at), 0, NULL);
        gs_sb_free(&at);
        return ok;
    case GS_OP_TRIANGULAR_SOLVE: {
        const char *ta = gs_instr_str(in, GS_ATTR_TRANSPOSE_A);
        gs_sb_printf(&at,
                     "left_side = %s, lower = %s, transpose_a = #stablehlo<transpose %s>, "
                     "unit_diagonal = %s",
                     gs_instr_bool(in, GS_ATTR_LEFT_SIDE, false) ? "true" : "false",
                     gs_instr_bool(in, GS_ATTR_LOWER, false) ? "true" : "false",
                     ta ? ta : "NO_TRANSPOSE",
                     gs_instr_bool(in, GS_ATTR_UNIT_DIAGONAL, false) ? "true" : "false");
        ok = print_generic(p, s, in, name, gs_sb_str(&at), 0, NULL);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_BATCH_NORM_TRAINING:
    case GS_OP_BATCH_NORM_INFERENCE:
    case GS_OP_BATCH_NORM_GRAD: {
        const gs_attr *e = gs_instr_attr(in, GS_ATTR_EPSILON);
        gs_sb_puts(&at, "epsilon = ");
        print_float(&at, GS_F32, e ? e->u.f : 0.0, p->o->sdy_opt);
        gs_sb_printf(&at, " : f32, feature_index = %" PRId64 " : i64",
                     gs_instr_int(in, GS_ATTR_FEATURE_INDEX, 0));
        ok = print_generic(p, s, in, name, gs_sb_str(&at), 0, NULL);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_RNG_BIT_GENERATOR: {
        const char *alg = gs_instr_str(in, GS_ATTR_ALGORITHM);
        const char *m = "DEFAULT";
        if (alg && strcmp(alg, "rng_three_fry") == 0) m = "THREE_FRY";
        if (alg && strcmp(alg, "rng_philox") == 0) m = "PHILOX";
        if (in->n_operands == 1 && gs_shape_is_tuple(in->shape) && in->shape->n_tuple == 2)
            return print_rng(p, s, in, m);
        gs_sb_printf(&at, "rng_algorithm = #stablehlo<rng_algorithm %s>", m);
        ok = print_generic(p, s, in, name, gs_sb_str(&at), 0, NULL);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_RNG: return print_rng_distribution(p, s, in);
    case GS_OP_SET_DIMENSION_SIZE:
    case GS_OP_GET_DIMENSION_SIZE: { /* `stablehlo.set_dimension_size %x, %n, dim = D : ...` */
        gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        if (d.n != 1) return fail(p, in, "'%s' needs one dimension", gs_op_name(in->op));
        gs_sb_printf(&at, "dim = %" PRId64, d.v[0]);
        ok = print_pretty(p, s, in, name, gs_sb_str(&at), true);
        gs_sb_free(&at);
        return ok;
    }
    case GS_OP_TOPK: {
        /* `%N:2 = chlo.top_k(%x, k = K) : T -> (V, I)`: the largest only (chlo has no other) */
        const gs_attr *k = gs_instr_attr(in, GS_ATTR_K);
        if (!k || !gs_instr_bool(in, GS_ATTR_LARGEST, true) || in->n_operands != 1 ||
            !gs_shape_is_tuple(in->shape) || in->shape->n_tuple != 2)
            return fail(p, in, "a topk of the smallest values has no StableHLO form");
        const char *x = whole_of(p, s, in->operands[0]);
        if (p->failed) return false;
        result_prefix(p, s, in);
        gs_sb_printf(p->sb, "chlo.top_k(%s, k = %" PRId64 ")", x, k->u.i);
        print_attr_dict(p, p->sb, in, NULL);
        gs_sb_puts(p->sb, " : ");
        print_type(p->sb, in->operands[0]->shape);
        gs_sb_puts(p->sb, " -> ");
        print_result_types(p->sb, in);
        return !p->failed;
    }
    case GS_OP_RAGGED_DOT: {
        /* `"chlo.ragged_dot"(%l, %r, %g) {ragged_dot_dimension_numbers = #chlo.ragged_dot<...>,
         * precision_config = [...]} : (L, R, G) -> T`, as JAX writes it */
        const char *ops[MAX_VALUES];
        int n = operands_and_result(p, s, in, ops);
        if (n < 0) return false;
        gs_sb_puts(&at, "ragged_dot_dimension_numbers = #chlo.ragged_dot<");
        for (int i = 0; i < MLIR_N_RAGGED_DIMS; i++) {
            gs_sb_printf(&at, "%s%s = ", i ? ", " : "", MLIR_RAGGED_DIMS[i].mlir);
            print_list(&at, gs_instr_ints(in, MLIR_RAGGED_DIMS[i].key));
        }
        gs_sb_puts(&at, ">, precision_config = [#chlo<precision DEFAULT>, #chlo<precision "
                        "DEFAULT>]");
        gs_sb_puts(p->sb, "\"chlo.ragged_dot\"(");
        print_names(p->sb, ops, n);
        gs_sb_putc(p->sb, ')');
        print_attr_dict(p, p->sb, in, gs_sb_str(&at));
        print_fn_type(p->sb, in);
        gs_sb_free(&at);
        return !p->failed;
    }
    case GS_OP_MAP: {
        gs_ints d = gs_instr_ints(in, GS_ATTR_DIMENSIONS);
        gs_sb_puts(&at, "dimensions = ");
        print_array(&at, d.v, d.n);
        ok = print_generic(p, s, in, name, gs_sb_str(&at), 1, &to_apply);
        gs_sb_free(&at);
        return ok;
    }
    default: break;
    }
    if (info->family == GS_FAM_UNARY || info->family == GS_FAM_BINARY ||
        info->family == GS_FAM_TERNARY)
        return print_pretty(p, s, in, name, NULL, false);
    return fail(p, in, "'%s' has no StableHLO form in gspmd's printer", gs_op_name(in->op));
}

/* ------------------------------------------------------------------ functions */

/* `%argN: T, ...`: the parameters of s's computation as a region's block arguments. */
static void print_block_args(printer *p, scope *s) {
    const gs_computation *c = s->c;
    for (int i = 0; i < c->n_params; i++) {
        ref *r = ref_of(s, c->params[i]);
        r->kind = REF_VALUE;
        r->name = fresh(p, "%%arg%d", p->next_arg++);
        gs_sb_printf(p->sb, "%s%s: ", i ? ", " : "", r->name);
        print_type(p->sb, c->params[i]->shape);
    }
    p->arg_end = p->next_arg;
}

/* ------------------------------------------------------------------ manual computations */

/* sdy.manual_computation as the reader lowers it (shardings.c): per operand a `Sharding`
 * custom-call (the global sharding) and `SPMDFullToShardShape` (the local one, manual on the
 * manual axes), a call of the body, per result [a get-tuple-element,] `Sharding` (local) and
 * `SPMDShardToFullShape` (global). With Shardy's shardings it prints back as one op. */
struct manual_group {
    int n_in, n_out;
    const gs_instr *in_cs[64], *in_fs[64];                 /* per operand */
    const gs_instr *out_gte[64], *out_cs[64], *out_fs[64]; /* per result (gte NULL for one) */
    const gs_named *local; /* a local sharding's named form: its manual axes */
};

/* Is x a one-operand custom-call to `target`? */
static bool is_call_to(const gs_instr *x, const char *target) {
    const char *t = x->op == GS_OP_CUSTOM_CALL && x->n_operands == 1
                        ? gs_instr_str(x, GS_ATTR_CUSTOM_CALL_TARGET)
                        : NULL;
    return t && strcmp(t, target) == 0;
}

/* The one instruction of x's computation using x (NULL: none, several, or x is the root). */
static const gs_instr *only_user(const gs_instr *x) {
    const gs_computation *c = x->parent;
    const gs_instr *u = NULL;
    if (x->is_root) return NULL;
    for (int i = x->id + 1; i < c->n_instrs; i++)
        for (int k = 0; k < c->instrs[i]->n_operands; k++)
            if (c->instrs[i]->operands[k] == x) {
                if (u && u != c->instrs[i]) return NULL;
                u = c->instrs[i];
            }
    return u;
}

/* The named form of x's sharding when it has manual axes, else NULL. */
static const gs_named *manual_named(const gs_instr *x) {
    const gs_sharding *sh = gs_instr_get_sharding(x);
    return sh && sh->named ? sh->named : NULL; /* manual_axes={} has none */
}

/* Fills g when call is the lowered form of a manual computation whose global shardings have
 * Shardy's spelling. */
static bool manual_group_of(printer *p, const gs_instr *call, manual_group *g) {
    if (!p->sdy || call->op != GS_OP_CALL || call->is_root || call->n_operands > 64 ||
        !gs_instr_comp(call, GS_ATTR_TO_APPLY))
        return false;
    memset(g, 0, sizeof *g);
    g->n_in = call->n_operands;
    for (int i = 0; i < g->n_in; i++) {
        const gs_instr *fs = call->operands[i];
        if (!is_call_to(fs, "SPMDFullToShardShape") || only_user(fs) != call) return false;
        const gs_instr *cs = fs->operands[0];
        if (!is_call_to(cs, "Sharding") || only_user(cs) != fs) return false;
        g->in_fs[i] = fs;
        g->in_cs[i] = cs;
        if (!g->local) g->local = manual_named(fs);
    }
    bool multi = gs_shape_is_tuple(call->shape);
    g->n_out = multi ? call->shape->n_tuple : 1;
    if (g->n_out > 64) return false;
    const gs_computation *c = call->parent;
    for (int i = call->id + 1; multi && i < c->n_instrs; i++) {
        const gs_instr *u = c->instrs[i];
        for (int k = 0; k < u->n_operands; k++) {
            if (u->operands[k] != call) continue;
            int64_t j = gs_instr_int(u, GS_ATTR_INDEX, -1);
            if (u->op != GS_OP_GET_TUPLE_ELEMENT || j < 0 || j >= g->n_out || g->out_gte[j])
                return false;
            g->out_gte[j] = u;
        }
    }
    for (int j = 0; j < g->n_out; j++) {
        const gs_instr *v = multi ? g->out_gte[j] : call;
        const gs_instr *cs = v ? only_user(v) : NULL;
        const gs_instr *fs = cs && is_call_to(cs, "Sharding") ? only_user(cs) : NULL;
        if (!fs || !is_call_to(fs, "SPMDShardToFullShape") || !gs_instr_get_sharding(fs))
            return false;
        g->out_cs[j] = cs;
        g->out_fs[j] = fs;
        if (!g->local) g->local = manual_named(cs);
    }
    if (!g->local) return false;
    gs_sb tmp = {0};
    bool ok = true;
    for (int i = 0; i < g->n_in && ok; i++)
        ok = print_sdy_leaf(p, &tmp, gs_instr_get_sharding(g->in_cs[i]), g->in_cs[i]->shape);
    for (int j = 0; j < g->n_out && ok; j++)
        ok = print_sdy_leaf(p, &tmp, gs_instr_get_sharding(g->out_fs[j]), g->out_fs[j]->shape);
    gs_sb_free(&tmp);
    return ok;
}

/* Finds the manual computations among s's instructions; their pieces print with the call. */
static bool find_manuals(printer *p, scope *s) {
    const gs_computation *c = s->c;
    if (!p->sdy) return true;
    for (int i = 0; i < c->n_instrs; i++) {
        manual_group g;
        if (c->instrs[i]->op != GS_OP_CALL || !manual_group_of(p, c->instrs[i], &g)) continue;
        if (!s->skip) {
            s->skip = GS_NEW_ARRAY(&p->a, bool, c->n_instrs);
            s->manuals = GS_NEW_ARRAY(&p->a, manual_group *, c->n_instrs);
            if (!s->skip || !s->manuals) return p->failed = true, false;
            memset(s->skip, 0, sizeof(bool) * (size_t)c->n_instrs);
            memset(s->manuals, 0, sizeof(manual_group *) * (size_t)c->n_instrs);
        }
        manual_group *mg = GS_NEW(&p->a, manual_group);
        if (!mg) return p->failed = true, false;
        *mg = g;
        s->manuals[i] = mg;
        for (int k = 0; k < g.n_in; k++) s->skip[g.in_cs[k]->id] = s->skip[g.in_fs[k]->id] = true;
        for (int k = 0; k < g.n_out; k++) {
            if (g.out_gte[k]) s->skip[g.out_gte[k]->id] = true;
            s->skip[g.out_cs[k]->id] = s->skip[g.out_fs[k]->id] = true;
        }
    }
    return true;
}

/* `%N = sdy.manual_computation(%x) in_shardings=[<...>] out_shardings=[<...>]
 * manual_axes={"a"} (%argK: local T) { ... sdy.return %v : T } : (T) -> R` */
static bool print_manual(printer *p, scope *s, const gs_instr *call, const manual_group *g) {
    const gs_computation *body = gs_instr_comp(call, GS_ATTR_TO_APPLY);
    const char *xs[64];
    for (int i = 0; i < g->n_in; i++) xs[i] = whole_of(p, s, g->in_cs[i]->operands[0]);
    if (p->failed) return false;
    const char *name = fresh(p, "%%%d", p->next_value++);
    for (int j = 0; j < g->n_out; j++) {
        ref *r = ref_of(s, g->out_fs[j]);
        r->kind = REF_VALUE;
        r->name = g->n_out == 1 ? name : gs_arena_printf(&p->a, "%s#%d", name, j);
        if (!r->name) return p->failed = true, false;
    }
    newline(p);
    if (g->n_out == 1)
        gs_sb_printf(p->sb, "%s = ", name);
    else if (g->n_out)
        gs_sb_printf(p->sb, "%s:%d = ", name, g->n_out);
    gs_sb_puts(p->sb, "sdy.manual_computation(");
    print_names(p->sb, xs, g->n_in);
    gs_sb_puts(p->sb, ") in_shardings=[");
    for (int i = 0; i < g->n_in; i++) {
        if (i) gs_sb_puts(p->sb, ", ");
        print_sdy_leaf(p, p->sb, gs_instr_get_sharding(g->in_cs[i]), g->in_cs[i]->shape);
    }
    gs_sb_puts(p->sb, "] out_shardings=[");
    for (int j = 0; j < g->n_out; j++) {
        if (j) gs_sb_puts(p->sb, ", ");
        print_sdy_leaf(p, p->sb, gs_instr_get_sharding(g->out_fs[j]), g->out_fs[j]->shape);
    }
    gs_sb_puts(p->sb, "] manual_axes={");
    for (int k = 0; k < g->local->manual.n; k++)
        gs_sb_printf(p->sb, "%s\"%s\"", k ? ", " : "",
                     g->local->mesh.names[g->local->manual.v[k].axis]);
    gs_sb_puts(p->sb, "} (");
    scope *rs = new_scope(p, body);
    if (!rs) return false;
    naming sv = enter_region(p, body);
    print_block_args(p, rs);
    gs_sb_puts(p->sb, ") {");
    p->indent++;
    p->manual_depth++;
    bool ok = print_body(p, rs, "sdy.return");
    p->manual_depth--;
    p->indent--;
    leave_region(p, sv, true);
    newline(p);
    gs_sb_puts(p->sb, "} : (");
    for (int i = 0; i < g->n_in; i++) {
        if (i) gs_sb_puts(p->sb, ", ");
        print_type(p->sb, g->in_cs[i]->shape);
    }
    gs_sb_puts(p->sb, ") -> ");
    if (g->n_out != 1) gs_sb_putc(p->sb, '(');
    for (int j = 0; j < g->n_out; j++) {
        if (j) gs_sb_puts(p->sb, ", ");
        print_type(p->sb, g->out_fs[j]->shape);
    }
    if (g->n_out != 1) gs_sb_putc(p->sb, ')');
    return ok && !p->failed;
}

/* Prints the ops of s's computation and its return: `ret %a, %b : T, U`. */
static bool print_body(printer *p, scope *s, const char *ret) {
    const gs_computation *c = s->c;
    if (!find_manuals(p, s)) return false;
    for (int i = 0; i < c->n_instrs; i++) {
        const gs_instr *in = c->instrs[i];
        if (in->op == GS_OP_PARAMETER || (s->skip && s->skip[i])) continue;
        bool ok = s->manuals && s->manuals[i] ? print_manual(p, s, in, s->manuals[i])
                                              : print_instr(p, s, in);
        if (!ok) return false;
    }
    if (!c->root) return fail(p, NULL, "computation '%s' has no root", c->name);
    const char *vals[MAX_VALUES];
    int n = spread(p, s, c->root, vals, MAX_VALUES);
    if (p->failed) return false;
    if (s->n_ret >= 0 && s->n_ret < n) n = s->n_ret;
    newline(p);
    gs_sb_puts(p->sb, ret);
    if (n) {
        gs_sb_putc(p->sb, ' ');
        print_names(p->sb, vals, n);
        gs_sb_puts(p->sb, " : ");
        for (int i = 0; i < n; i++) {
            if (i) gs_sb_puts(p->sb, ", ");
            print_type(p->sb, spread_type(c->root->shape, i));
        }
    }
    return !p->failed;
}

/* Prints computation c as a region `{ ^bb0(%argN: T, ...): ops stablehlo.return ... }`. */
static bool print_region(printer *p, const gs_computation *c) {
    scope *s = new_scope(p, c);
    if (!s) return false;
    naming sv = enter_region(p, c);
    gs_sb_puts(p->sb, "{");
    p->indent++;
    newline(p);
    gs_sb_puts(p->sb, "^bb0(");
    print_block_args(p, s);
    gs_sb_puts(p->sb, "):");
    p->indent++;
    bool ok = print_body(p, s, "stablehlo.return");
    p->indent -= 2;
    newline(p);
    gs_sb_putc(p->sb, '}');
    leave_region(p, sv, true);
    return ok;
}

/* Prints computation c as a region without arguments whose parameter is the value `arg` of the
 * enclosing scope (stablehlo.if/case branches capture their operands). */
/* `%N = stablehlo.custom_call @Sharding(%v) {mhlo.sharding = "..."}` naming value v (of
 * shape t) as sharded by sh, in place of v from then on; NULL after an error. */
static const char *pin_value(printer *p, const char *v, const gs_shape *t, const gs_sharding *sh) {
    const char *name = fresh(p, "%%%d", p->next_value++);
    newline(p);
    gs_sb_printf(p->sb, "%s = stablehlo.custom_call @Sharding(%s) {mhlo.sharding = ", name, v);
    print_sharding_text(p->sb, sh);
    gs_sb_puts(p->sb, "} : (");
    print_type(p->sb, t);
    gs_sb_puts(p->sb, ") -> ");
    print_type(p->sb, t);
    return p->failed ? NULL : name;
}

/* A branch's parameter sharded otherwise than the values it captures (HLO gives a branch
 * parameter a sharding of its own; a StableHLO branch uses the outer values): each such value
 * pinned at the top of the region, as a sharded copy would be. */
static bool pin_branch_shardings(printer *p, scope *s, scope *outer, const gs_instr *param,
                                 const gs_instr *arg) {
    const gs_sharding *sh = gs_instr_get_sharding(param);
    ref *r = ref_of(s, param);
    if (!sh || p->sdy || p->o->sdy_opt || (p->manual_depth && gs_sharding_is_manual(sh)))
        return true;
    if (r->kind == REF_VALUE && gs_shape_is_array(param->shape)) {
        const gs_sharding *had = gs_instr_get_sharding(arg);
        if (sh->kind == GS_SHARDING_TUPLE || (had && gs_sharding_equal(had, sh))) return true;
        const char *v = pin_value(p, r->name, param->shape, sh);
        if (!v) return false;
        r->name = v;
        return true;
    }
    if (r->kind != REF_ITER || sh->kind != GS_SHARDING_TUPLE || sh->n_tuple != r->n ||
        !gs_shape_is_tuple(param->shape) || param->shape->n_tuple != r->n ||
        ref_of(outer, arg)->kind != REF_TUPLE)
        return true;
    const gs_instr *tup = ref_of(outer, arg)->tuple;
    for (int i = 0; i < r->n; i++) {
        const gs_sharding *had = gs_instr_get_sharding(tup->operands[i]);
        const gs_shape *t = param->shape->tuple[i];
        if (!gs_shape_is_array(t) || sh->tuple[i]->kind == GS_SHARDING_TUPLE ||
            (had && gs_sharding_equal(had, sh->tuple[i])))
            continue;
        const char *v = pin_value(p, r->elems[i], t, sh->tuple[i]);
        if (!v) return false;
        r->elems[i] = v;
    }
    return true;
}

static bool print_capturing_region(printer *p, const gs_computation *c, scope *outer,
                                   const gs_instr *arg) {
    scope *s = new_scope(p, c);
    if (!s) return false;
    if (c->n_params != (arg ? 1 : 0))
        return fail(p, arg, "branch '%s' takes %d parameters, not one", c->name, c->n_params);
    if (arg) {
        ref *o = ref_of(outer, arg);
        s->refs[c->params[0]->id] = *o;
        if (o->kind == REF_TUPLE) {
            /* its elements are values of the enclosing scope: name them there (print_conditional
             * printed them before the op) */
            ref *it = &s->refs[c->params[0]->id];
            const char **el = GS_NEW_ARRAY(&p->a, const char *, o->n ? o->n : 1);
            if (!el) return fail(p, arg, "out of memory");
            for (int i = 0; i < o->n; i++) el[i] = elem_of(p, outer, arg, i);
            it->kind = REF_ITER;
            it->elems = el;
        }
    }
    gs_sb_puts(p->sb, "{");
    p->indent += 2;
    naming sv = enter_region(p, c);
    bool ok = !arg || pin_branch_shardings(p, s, outer, c->params[0], arg);
    ok = ok && print_body(p, s, "stablehlo.return");
    leave_region(p, sv, true);
    p->indent -= 2;
    p->indent++;
    newline(p);
    p->indent--;
    gs_sb_putc(p->sb, '}');
    return ok;
}

/* `%N:K = "stablehlo.if"(%pred) ({...}, {...})` or `"stablehlo.case"(%index) ({...}, ...)`:
 * HLO's conditional with its branch operands captured by the branches. */
static bool print_conditional(printer *p, scope *s, const gs_instr *in) {
    gs_computation *br[64];
    int n = 0;
    const gs_attr *bc = gs_instr_attr(in, GS_ATTR_BRANCH_COMPUTATIONS);
    bool pred = !bc;
    if (bc) {
        if (bc->u.comps.n > 64 || bc->u.comps.n != in->n_operands - 1)
            return fail(p, in, "a conditional needs one operand per branch");
        for (n = 0; n < bc->u.comps.n; n++) br[n] = bc->u.comps.v[n];
    } else {
        br[0] = gs_instr_comp(in, GS_ATTR_TRUE_COMPUTATION);
        br[1] = gs_instr_comp(in, GS_ATTR_FALSE_COMPUTATION);
        n = 2;
        if (!br[0] || !br[1] || in->n_operands != 3)
            return fail(p, in, "a conditional needs true and false computations");
    }
    const char *sel = whole_of(p, s, in->operands[0]);
    for (int i = 1; i < in->n_operands; i++) { /* a tuple of captured values: its elements */
        ref *r = ref_of(s, in->operands[i]);
        if (r->kind != REF_TUPLE) whole_of(p, s, in->operands[i]);
        for (int k = 0; r->kind == REF_TUPLE && k < r->n; k++) elem_of(p, s, in->operands[i], k);
    }
    if (p->failed) return false;
    result_prefix(p, s, in);
    gs_sb_printf(p->sb, "\"stablehlo.%s\"(%s) (", pred ? "if" : "case", sel);
    for (int i = 0; i < n; i++) {
        if (i) gs_sb_puts(p->sb, ", ");
        if (!br[i]) return fail(p, in, "a conditional lacks branch %d", i);
        if (!print_capturing_region(p, br[i], s, in->operands[i + 1])) return false;
    }
    gs_sb_putc(p->sb, ')');
    print_attr_dict(p, p->sb, in, NULL);
    gs_sb_puts(p->sb, " : (");
    print_type(p->sb, in->operands[0]->shape);
    gs_sb_puts(p->sb, ") -> ");
    print_result_types(p->sb, in);
    return !p->failed;
}

/* `func.func public @main(%arg0: T {mhlo.sharding = ".."}) -> (R {..}) { ... }`; in sdy_opt
 * form as MLIR prints it: `func.func @f(...) -> R {` (no `public`; parentheses around the
 * results only when there are several or one has attributes; no `->` without results). */
static bool print_func_once(printer *p, const gs_computation *c, const char *sym) {
    p->next_value = 0;
    p->next_arg = 0;
    p->ctx = c;
    p->value0 = p->conflict0 = p->conflict = 0;
    p->used = 0;
    scope *s = new_scope(p, c);
    if (!s) return false;
    newline(p);
    if (p->o->sdy_opt)
        gs_sb_printf(p->sb, "func.func %s@%s(", c->is_private ? "private " : "", sym);
    else
        gs_sb_printf(p->sb, "func.func %s @%s(", c->is_entry ? "public" : "private", sym);
    for (int i = 0; i < c->n_params; i++) {
        const gs_instr *pa = c->params[i];
        if (!pa) return fail(p, NULL, "computation '%s' lacks parameter %d", c->name, i);
        ref *r = ref_of(s, pa);
        r->kind = REF_VALUE;
        r->name = fresh(p, "%%arg%d", p->next_arg++);
        gs_sb_printf(p->sb, "%s%s: ", i ? ", " : "", r->name);
        print_type(p->sb, pa->shape);
        gs_sb tmp = {0};
        if (print_value_sharding(p, &tmp, gs_instr_get_sharding(pa), pa->shape, -1))
            gs_sb_printf(p->sb, " {%s}", gs_sb_str(&tmp));
        gs_sb_free(&tmp);
    }
    gs_sb_putc(p->sb, ')');
    const gs_shape *rs = c->root->shape;
    int n = gs_shape_is_tuple(rs) && rs->n_tuple != 1 ? rs->n_tuple : 1;
    if (gs_shape_is_tuple(rs) && rs->n_tuple == 0) n = 0;
    const gs_instr *ret = returned(p, c);
    /* an outfeed's sharding is of the data it sends (printed on the op), not of its token */
    const gs_sharding *rsh = ret && ret->op == GS_OP_OUTFEED ? NULL : gs_instr_get_sharding(ret);
    gs_sb res = {0};
    bool attrs = false;
    for (int i = 0; i < n; i++) {
        if (i) gs_sb_puts(&res, ", ");
        print_type(&res, spread_type(rs, i));
        gs_sb tmp = {0};
        /* the reader fills the results a function leaves unsharded with {replicated} when
         * another has one: with Shardy's shardings, they print unsharded again */
        const gs_sharding *leaf = n == 1 ? NULL : elem_leaf(rsh, rs, i);
        bool filler = p->sdy && leaf && leaf->kind == GS_SHARDING_REPLICATED && !leaf->named;
        bool has = !filler && print_value_sharding(p, &tmp, rsh, rs, n == 1 ? -1 : i);
        if (has) gs_sb_printf(&res, " {%s}", gs_sb_str(&tmp));
        attrs |= has;
        gs_sb_free(&tmp);
    }
    if (!p->o->sdy_opt || n > 1 || attrs)
        gs_sb_printf(p->sb, " -> (%s)", gs_sb_str(&res));
    else if (n == 1)
        gs_sb_printf(p->sb, " -> %s", gs_sb_str(&res));
    if (res.failed) p->failed = true;
    gs_sb_free(&res);
    gs_sb_puts(p->sb, " {");
    p->arg_end = p->next_arg;
    p->indent++;
    bool ok = print_body(p, s, "return");
    p->indent--;
    newline(p);
    gs_sb_putc(p->sb, '}');
    record_region(p);
    return ok;
}

/* Prints function c; in sdy_opt form after a dry run that learns its regions' numbering. */
static bool print_func(printer *p, const gs_computation *c, const char *sym) {
    if (p->o->sdy_opt) {
        gs_sb *out = p->sb, scratch = {0};
        int indent = p->indent;
        p->sb = &scratch;
        p->dry = true;
        p->n_info = 0;
        bool ok = print_func_once(p, c, sym);
        p->dry = false;
        p->sb = out;
        p->indent = indent;
        gs_sb_free(&scratch);
        if (!ok) return false;
    }
    return print_func_once(p, c, sym);
}

/* A symbol for computation name: MLIR's bare-id characters, unique among names[0..n). */
static const char *func_symbol(printer *p, const char *name, const char **names, int n) {
    size_t len = strlen(name);
    char *s = gs_arena_alloc(&p->a, len + 16);
    if (!s) return p->failed = true, "f";
    size_t j = 0;
    if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
          name[0] == '_'))
        s[j++] = '_';
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '$';
        s[j++] = ok ? c : '_';
    }
    s[j] = 0;
    for (int k = 2;; k++) {
        bool taken = strcmp(s, "main") == 0;
        for (int i = 0; i < n && !taken; i++) taken = names[i] && strcmp(names[i], s) == 0;
        if (!taken) return s;
        snprintf(s + j, 16, "_%d", k);
    }
}

/* Computation indexes in the order functions print: each after the computations it calls (a
 * post-order from the entry, callees in the order their calls appear), then the ones the entry
 * does not reach, in module order. The reader adds computations in the order the text first
 * names them, so an order taken from the module would change from one printing to the next.
 * NULL when out of memory. */
static int *print_order(printer *p) {
    const gs_module *m = p->m;
    int n = m->n_comps, k = 0;
    int *order = GS_NEW_ARRAY(&p->a, int, n ? n : 1);
    char *state = GS_NEW_ARRAY(&p->a, char, n ? n : 1); /* 0 new, 1 on the stack, 2 placed */
    struct frame {
        int c, instr, called;
    } *st = GS_NEW_ARRAY(&p->a, struct frame, n ? n : 1);
    gs_strmap idx = {0};
    bool ok = order && state && st;
    for (int i = 0; ok && i < n; i++) {
        state[i] = 0;
        ok = gs_strmap_put(&idx, m->comps[i]->name, (void *)(intptr_t)(i + 1)) == GS_OK;
    }
    for (int s0 = -1; ok && s0 < n; s0++) {
        int root = s0 >= 0 ? s0
                   : m->entry ? (int)(intptr_t)gs_strmap_get(&idx, m->entry->name) - 1
                              : -1;
        if (root < 0 || state[root]) continue;
        int sp = 0;
        st[sp++] = (struct frame){root, 0, 0};
        state[root] = 1;
        while (sp > 0) {
            struct frame *f = &st[sp - 1];
            const gs_computation *c = m->comps[f->c];
            int next = -1;
            while (next < 0 && f->instr < c->n_instrs) {
                gs_computation *called[64];
                int nc = gs_instr_called(c->instrs[f->instr], called, 64);
                if (nc > 64) nc = 64;
                while (next < 0 && f->called < nc) {
                    int j = (int)(intptr_t)gs_strmap_get(&idx, called[f->called++]->name) - 1;
                    if (j >= 0 && !state[j]) next = j;
                }
                if (next < 0) f->instr++, f->called = 0;
            }
            if (next >= 0) {
                state[next] = 1;
                st[sp++] = (struct frame){next, 0, 0};
            } else {
                state[f->c] = 2;
                order[k++] = f->c;
                sp--;
            }
        }
    }
    gs_strmap_free(&idx);
    if (!ok) p->failed = true;
    return ok ? order : NULL;
}

/* Does function a come before b in the text (functions in the order written, or as Shardy's
 * export placed those it made)? */
static bool written_before(const gs_computation *a, const gs_computation *b) {
    if (a->symbol && b->symbol && a->symbol_order != b->symbol_order)
        return a->symbol_order < b->symbol_order;
    return a->span.line < b->span.line ||
           (a->span.line == b->span.line && a->span.col < b->span.col);
}

/* `sdy.mesh @NAME = <[...]>` for each mesh the module declares. */
static void print_meshes(printer *p) {
    const gs_mesh_table *t = p->m->meshes;
    for (int i = 0; t && i < t->n; i++) {
        newline(p);
        gs_sb_printf(p->sb, "sdy.mesh @%s = ", t->names[i]);
        gs_mesh_print_sdy(p->sb, &t->meshes[i]);
    }
}

/* The module op: `module @NAME attributes {...} {` as gspmd writes it; in sdy_opt form only
 * what the input wrote (`module {` when it had none, as MLIR wraps bare functions). */
static void print_module_header(printer *p) {
    const gs_module *m = p->m;
    if (!p->o->sdy_opt) {
        const char *mod = func_symbol(p, m->name && m->name[0] ? m->name : "module", NULL, 0);
        gs_sb_printf(p->sb,
                     "module @%s attributes {mhlo.num_partitions = %" PRId64
                     " : i32, mhlo.num_replicas = %" PRId64 " : i32} {",
                     mod, m->num_partitions, m->replica_count);
        return;
    }
    gs_sb_puts(p->sb, "module");
    if (m->mlir_symbol) gs_sb_printf(p->sb, " @%s", m->mlir_symbol);
    if (m->mlir_attrs) {
        gs_sb_puts(p->sb, " attributes ");
        for (const char *c = m->mlir_attrs; *c; c++) { /* on one line, as MLIR prints it */
            if (*c == '\n' || *c == '\r') {
                while (c[1] == ' ' || c[1] == '\n' || c[1] == '\r') c++;
                if (c[1] != '}') gs_sb_putc(p->sb, ' ');
                continue;
            }
            gs_sb_putc(p->sb, *c);
        }
    }
    gs_sb_puts(p->sb, " {");
}

char *gs_module_to_mlir(const gs_module *m, gs_diags *d) {
    gs_mlir_print_options o = {0};
    return gs_module_to_mlir_ex(m, &o, d);
}

char *gs_module_to_mlir_ex(const gs_module *m, const gs_mlir_print_options *o, gs_diags *d) {
    printer p = {.d = d, .m = m, .o = o, .sdy = m->meshes && m->meshes->n > 0};
    gs_sb sb = {0};
    p.sb = &sb;
    gs_arena_init(&p.a);
    p.func_names = GS_NEW_ARRAY(&p.a, const char *, m->n_comps ? m->n_comps : 1);
    if (!p.func_names || !m->entry) {
        gs_arena_free(&p.a);
        if (!m->entry) gs_error(d, gs_span_none(), "the module has no entry computation");
        return NULL;
    }
    /* functions: the entry, and what call and fusion instructions call, named in the order
     * they print */
    int *dfs = print_order(&p);
    for (int i = 0; i < m->n_comps; i++) p.func_names[i] = NULL;
    for (int ii = 0; dfs && ii < m->n_comps; ii++) {
        const gs_computation *c = m->comps[dfs[ii]];
        for (int k = 0; k < c->n_instrs; k++) {
            const gs_instr *in = c->instrs[k];
            gs_computation *f = in->op == GS_OP_CALL     ? gs_instr_comp(in, GS_ATTR_TO_APPLY)
                                : in->op == GS_OP_FUSION ? gs_instr_comp(in, GS_ATTR_CALLS)
                                                         : NULL;
            manual_group g;
            if (f && manual_group_of(&p, in, &g)) continue; /* its body prints inline */
            const gs_attr *cc = in->op == GS_OP_CUSTOM_CALL
                                    ? gs_instr_attr(in, GS_ATTR_CALLED_COMPUTATIONS)
                                    : NULL;
            for (int e = -1; e < (cc ? cc->u.comps.n : 0); e++) { /* f, then a custom-call's */
                gs_computation *fn = e < 0 ? f : cc->u.comps.v[e];
                for (int j = 0; fn && j < m->n_comps; j++)
                    if (m->comps[j] == fn && !p.func_names[j] && fn != m->entry)
                        p.func_names[j] = func_symbol(&p, fn->name, p.func_names, m->n_comps);
            }
        }
    }
    for (int i = 0; i < m->n_comps; i++)
        if (m->comps[i] == m->entry) p.func_names[i] = "main";
    /* sdy_opt: every function of the input under its own name, in the order written */
    int *order = o->sdy_opt ? GS_NEW_ARRAY(&p.a, int, m->n_comps ? m->n_comps : 1) : dfs;
    if (!order) p.failed = true;
    for (int i = 0; order && o->sdy_opt && i < m->n_comps; i++) {
        const gs_computation *c = m->comps[i];
        if (c->symbol) p.func_names[i] = c->symbol;
        int j = i;
        while (o->sdy_opt && j > 0 && written_before(c, m->comps[order[j - 1]])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    print_module_header(&p);
    p.indent = 1;
    print_meshes(&p);
    for (int k = 0; order && k < m->n_comps && !p.failed; k++) {
        int i = order[k];
        if (p.func_names[i]) print_func(&p, m->comps[i], p.func_names[i]);
    }
    gs_sb_puts(&sb, "\n}\n");
    gs_arena_free(&p.a);
    if (p.failed) {
        if (!d->n_errors) gs_error(d, gs_span_none(), "out of memory");
        gs_sb_free(&sb);
        return NULL;
    }
    return gs_sb_take(&sb);
}

bool gs_source_is_mlir(const gs_source *src) { return gs_mlir_detect(src); }
