/*
 * gspmd/text.h — XLA HLO text: the parser and the canonical printer.
 *
 * The parser reads everything XLA's HloModule::ToString prints and what real JAX dumps contain
 * (module header attributes, stack-frame tables, long and short computation headers, optional
 * `%`, typed operands, comments, every attribute of the ops in ops.def; attributes it does not
 * decode are kept as text). The printer writes XLA's canonical form; printing is a fixed point:
 * print(parse(print(m))) == print(m). gs_module_to_mlir prints the same IR as StableHLO text.
 */
#ifndef GSPMD_TEXT_H
#define GSPMD_TEXT_H

#include "gspmd/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The default limit on one constant's data: 1 GiB. */
#define GS_PARSE_MAX_LITERAL_BYTES ((int64_t)1 << 30)

/* Knobs for gs_parse_module_ex. Zero-initialise for the defaults. */
typedef struct gs_parse_options {
    long fail_alloc_at; /* fault injection: fail the module arena's k-th allocation (0 = never) */
    int64_t max_literal_bytes; /* a constant whose data would take more is an error (0 = the
                                  default, GS_PARSE_MAX_LITERAL_BYTES) */
} gs_parse_options;

/* Parses src into a new module. On error returns NULL and appends located diagnostics
 * (`FILE:LINE:COL: error: ...`) to d. The module keeps a pointer to src (for spans): src must
 * outlive it. The caller frees the module with gs_module_free. */
gs_module *gs_parse_module(const gs_source *src, gs_diags *d);
gs_module *gs_parse_module_ex(const gs_source *src, const gs_parse_options *opts, gs_diags *d);

/* Parses the whole of src as one shape in HLO's grammar (`f32[5,7]`, `(s32[], f32[2]{0})`),
 * into arena a. A shape starting at `[` takes default_type, unless that is GS_INVALID_TYPE.
 * Located errors, as in a module. */
gs_status gs_parse_shape(gs_arena *a, const gs_source *src, gs_type default_type,
                         gs_shape **out, gs_diags *d);

/* Appends the canonical text of the module / one instruction / one computation to sb. */
void gs_print_module(gs_sb *sb, const gs_module *m);
void gs_print_computation(gs_sb *sb, const gs_computation *c);
void gs_print_instr(gs_sb *sb, const gs_instr *in);
/* Appends one attribute's value text (what follows `name=`). */
void gs_print_attr_value(gs_sb *sb, const gs_attr *a);
/* The module's text as a malloc'd string (NULL on allocation failure). */
char *gs_module_to_string(const gs_module *m);

/* The module as StableHLO text in MLIR's pretty form (src/mlir/printer.c), as a malloc'd string
 * the caller frees: `module @NAME attributes {mhlo.num_partitions = N : i32, ...}`, the entry as
 * `func.func public @main`, called computations as private functions, reducers and loop bodies
 * inline as regions, shardings as `mhlo.sharding` attributes. gspmd's StableHLO reader reads it
 * back, and printing what it reads is a fixed point. On an op with no StableHLO form (or
 * allocation failure) returns NULL with one error, located at the instruction, in d. */
char *gs_module_to_mlir(const gs_module *m, gs_diags *d);

/* How gs_module_to_mlir_ex prints. Zero-initialised: gs_module_to_mlir's form. */
typedef struct gs_mlir_print_options {
    bool sdy_opt;        /* as Shardy's sdy_opt (MLIR's printer) prints: the input's function
                            names, visibility (`func.func @f`, `func.func private @g`) and order,
                            its module op only as written (`module {` when it had none), single
                            results without parentheses */
    bool sharding_rules; /* each op with a specific factor rule (gs_op_rule_build) carries
                            `sdy.sharding_rule = #sdy.op_sharding_rule<...>`
                            (-sdy-populate-op-sharding-rules) */
    bool conservative_propagation; /* the rules' conservative-propagation option; read where
                                      the printer builds rules (print_rule in printer.c) */
} gs_mlir_print_options;

/* gs_module_to_mlir with options o. Shardings print as Shardy's (`sdy.sharding`) wherever they
 * have that form when the module declares meshes (gs_module.meshes), as gs_module_to_mlir
 * does. Same ownership and errors. */
char *gs_module_to_mlir_ex(const gs_module *m, const gs_mlir_print_options *o, gs_diags *d);
/* Is src StableHLO/MLIR text (it starts with `module` or `func.func`), which gs_parse_module
 * reads with the StableHLO reader? */
bool gs_source_is_mlir(const gs_source *src);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_TEXT_H */
