/*
 * gspmd/npy.h — NumPy .npy files (format versions 1.0–3.0, little-endian, C order) in and out.
 *
 * Types map to numpy dtypes one to one (pred ↔ bool, s32 ↔ int32, f16 ↔ float16, c64 ↔
 * complex64, ...), except bf16, which numpy lacks: it is written widened exactly to float32, and
 * a bf16 parameter reads a float32 file (rounded to nearest even).
 */
#ifndef GSPMD_NPY_H
#define GSPMD_NPY_H

#include "gspmd/interp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes array value v to path. */
gs_status gs_npy_write(const char *path, const gs_value *v, gs_diags *d);
/* Reads path into a new array value (of the file's dtype; bf16 never appears). */
gs_status gs_npy_read(const char *path, gs_value **out, gs_diags *d);
/* Reads path and converts it to `want` (an array shape): the dims must match exactly; the dtype
 * must be the shape's (or float32 for bf16). */
gs_status gs_npy_read_as(const char *path, const gs_shape *want, const char *param_name,
                         gs_value **out, gs_diags *d);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_NPY_H */
