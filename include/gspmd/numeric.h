/*
 * gspmd/numeric.h — element encodings: conversions between double and the narrow float formats
 * (bf16, f16, f8 variants) with XLA's round-to-nearest-even, and typed load/store of one element
 * of a buffer by its gs_type. Shared by the parser (constants), the interpreter and npy I/O.
 */
#ifndef GSPMD_NUMERIC_H
#define GSPMD_NUMERIC_H

#include "gspmd/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Round-to-nearest-even conversions. NaN stays NaN, overflow goes to infinity (or, for formats
 * without infinities such as f8e4m3fn, to NaN as XLA's ml_dtypes do). */
uint16_t gs_bf16_from_double(double v);
uint16_t gs_bf16_from_float(float v);
float gs_bf16_to_float(uint16_t b);
uint16_t gs_f16_from_double(double v);
float gs_f16_to_float(uint16_t h);
/* Encode/decode any narrow float type (f16, bf16, f8*, f4) held in up to 16 bits. */
uint16_t gs_narrow_from_double(gs_type t, double v);
double gs_narrow_to_double(gs_type t, uint16_t bits);
/* True when the interpreter can compute with elements of type t. */
bool gs_type_supported(gs_type t);

/* Element i of an array of type t at base, widened. Floats (all widths) as double; integers and
 * pred as int64 (u64 bit pattern preserved) ; complex as two doubles. */
double gs_elem_get_f(const void *base, gs_type t, int64_t i);
int64_t gs_elem_get_i(const void *base, gs_type t, int64_t i);
void gs_elem_get_c(const void *base, gs_type t, int64_t i, double *re, double *im);
/* Stores v into element i, rounding (floats) or wrapping (integers) to type t. */
void gs_elem_set_f(void *base, gs_type t, int64_t i, double v);
void gs_elem_set_i(void *base, gs_type t, int64_t i, int64_t v);
void gs_elem_set_c(void *base, gs_type t, int64_t i, double re, double im);
/* Wraps v to the integer width of t with sign or zero extension (pred: v != 0). */
int64_t gs_int_wrap(gs_type t, int64_t v);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_NUMERIC_H */
