/*
 * gspmd/cost.h — what a program costs: arithmetic (dot and convolution FLOPs) and memory (the
 * peak of live values), each computation counted once per call site reachable from the entry
 * (a while body once per loop, every branch of a conditional), so a module and its partitioned
 * program compare fairly: per-device FLOPs against the unpartitioned FLOPs / N is how well the
 * work is divided (1.0 is perfect, N means it runs whole on every device).
 */
#ifndef GSPMD_COST_H
#define GSPMD_COST_H

#include "gspmd/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What running a module's entry costs one device. */
typedef struct gs_cost {
    double flops;        /* dot and convolution FLOPs (a multiply-add counts 2) */
    int64_t n_dots;      /* dots counted (per call site) */
    int64_t n_convs;     /* convolutions counted */
    int64_t param_bytes; /* bytes of the entry's parameters */
    int64_t peak_bytes;  /* peak of parameters plus live values: each value from its
                            instruction to its last use; tuples, get-tuple-element and
                            parameters alias their operands; a called computation's peak adds
                            to its caller's live set at the call; an output that
                            input_output_alias lets reuse a parameter's buffer (donated) is
                            written in place; elementwise values (and broadcast
                            scalars) used only by elementwise ops take no memory, as XLA's loop
                            fusion computes them inside their users */
    int64_t run_peak_bytes; /* the same peak with every value in memory of its own (no fusion,
                               no donated buffers): what gspmd's interpreter and executor hold
                               at most (they free each value after its last use) */
} gs_cost;

/* FLOPs of one instruction on its own (dot: 2 x result elements x contracted size;
 * convolution: 2 x result elements x window size x input features per group; 0 otherwise). */
double gs_cost_instr_flops(const gs_instr *in);

/* The cost of running module m's entry computation once. */
void gs_cost_module(const gs_module *m, gs_cost *out);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_COST_H */
