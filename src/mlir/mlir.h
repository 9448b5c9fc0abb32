/*
 * src/mlir/mlir.h — the StableHLO/MLIR reader's entry point inside the library: the HLO text
 * parser (src/text/parser.c) hands it any text that starts with `module` or `func.func`.
 */
#ifndef GSPMD_MLIR_INTERNAL_H
#define GSPMD_MLIR_INTERNAL_H

#include "gspmd/ir.h"

/* Does src (after whitespace and `//` comments) start with `module` or `func.func`? */
bool gs_mlir_detect(const gs_source *src);

/* Reads StableHLO text (as JAX and stablehlo-opt print it) into m, which is empty and owns the
 * result. Functions become computations (the entry is @main, else the only function), calls
 * become `call`, regions become computations, multi-result values tuples. On error returns
 * GS_ERR with one located diagnostic in d. */
gs_status gs_mlir_read(gs_module *m, const gs_source *src, int64_t max_lit, gs_diags *d);

/* The fields of #chlo.ragged_dot<...> in the order StableHLO prints them, and the HLO attribute
 * each is (chlo.c reads them, printer.c writes them back). */
typedef struct mlir_ragged_dim {
    const char *mlir;
    gs_attr_key key;
} mlir_ragged_dim;
enum { MLIR_N_RAGGED_DIMS = 6 };
extern const mlir_ragged_dim MLIR_RAGGED_DIMS[MLIR_N_RAGGED_DIMS];

#endif
