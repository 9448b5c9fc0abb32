/*
 * k_elementwise.c — elementwise kernels and scalar semantics: unary and binary arithmetic,
 * select, clamp, compare, convert, bitcast-convert, reduce-precision, iota and map; plus the
 * scalar-reducer helper every reduction kernel uses.
 *
 * Semantics follow XLA's: f16/bf16 (and f8) compute in f32 and round once per op; f32 in float,
 * f64 in double; integers wrap; x/0 is -1 for signed and all-ones for unsigned integers, x%0 is
 * x, INT_MIN/-1 is INT_MIN; shifts by the bit width or more give 0 (or the sign for arithmetic
 * right shifts); max/min propagate NaN.
 */
#include "kernels.h"
#include "base/sysalloc.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ type classes */

typedef enum tclass { TC_PRED, TC_SINT, TC_UINT, TC_FLOAT, TC_DOUBLE, TC_COMPLEX } tclass;

static tclass class_of(gs_type t) {
    if (t == GS_PRED) return TC_PRED;
    if (gs_type_is_signed_int(t)) return TC_SINT;
    if (gs_type_is_unsigned_int(t)) return TC_UINT;
    if (t == GS_F64) return TC_DOUBLE;
    if (gs_type_is_complex(t)) return TC_COMPLEX;
    return TC_FLOAT; /* f32, f16, bf16, f8: compute in float */
}

static double complex get_c(const void *p, gs_type t, int64_t i) {
    double re, im;
    gs_elem_get_c(p, t, i, &re, &im);
    return gs_cmplx(re, im);
}

static void set_c(void *p, gs_type t, int64_t i, double complex z) {
    if (t == GS_C64) {
        /* c64 arithmetic rounds each part to float */
        gs_elem_set_c(p, t, i, (float)creal(z), (float)cimag(z));
    } else {
        gs_elem_set_c(p, t, i, creal(z), cimag(z));
    }
}

static uint64_t umask(gs_type t) {
    int b = gs_type_bits(t);
    return b >= 64 ? ~0ull : (1ull << b) - 1;
}

/* ------------------------------------------------------------------ unary */

/* tanh in float arithmetic as XLA's CPU and GPU backends compute it for f32 (and for f16/bf16,
 * upcast): the argument clamped to [-9, 9], a rational function of degree 13/6 in it, and x
 * itself where |x| < 0.0004. Within 4e-7 relative of the exact tanh (glibc's tanhf: 1.6e-7),
 * branch-free, so that a loop of it vectorises; NaN stays NaN, tanh(+-inf) = +-1. */
static inline float tanh_f32(float x) {
    float c = x > 9.0f ? 9.0f : x;
    c = c < -9.0f ? -9.0f : c;
    float x2 = c * c;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 + -8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    float r = p * c / q; /* computed unconditionally: the selects vectorise */
    return fabsf(x) < 0.0004f ? x : r;
}

static double float_unary(gs_opcode op, double x, bool dbl) {
    /* dbl: f64 math; else float math (result exact in float, rounded later for narrow types) */
#define F(fn) (dbl ? fn(x) : (double)fn##f((float)x))
    switch (op) {
    case GS_OP_ABS: return fabs(x);
    case GS_OP_CBRT: return F(cbrt);
    case GS_OP_CEIL: return ceil(x);
    case GS_OP_COS: return F(cos);
    case GS_OP_ERF: return F(erf);
    case GS_OP_EXP: return F(exp);
    case GS_OP_EXPM1: return F(expm1);
    case GS_OP_FLOOR: return floor(x);
    case GS_OP_LOG: return F(log);
    case GS_OP_LOG1P: return F(log1p);
    case GS_OP_LOGISTIC:
        if (dbl) return 1.0 / (1.0 + exp(-x));
        return (double)(1.0f / (1.0f + expf(-(float)x)));
    case GS_OP_NEGATE: return -x;
    case GS_OP_ROUND_AFZ: return round(x);
    case GS_OP_ROUND_EVEN: return nearbyint(x);
    case GS_OP_RSQRT:
        if (dbl) return 1.0 / sqrt(x);
        return (double)(1.0f / sqrtf((float)x));
    case GS_OP_SIGN:
        if (isnan(x)) return x;
        return x > 0 ? 1.0 : x < 0 ? -1.0 : x; /* keeps the sign of zero */
    case GS_OP_SIN: return F(sin);
    case GS_OP_SQRT: return F(sqrt);
    case GS_OP_TAN: return F(tan);
    case GS_OP_TANH: return dbl ? tanh(x) : (double)tanh_f32((float)x);
    case GS_OP_REAL: return x;
    case GS_OP_IMAG: return 0.0;
    default: return NAN;
    }
#undef F
}

static int64_t int_unary(gs_opcode op, gs_type t, int64_t x) {
    uint64_t u = (uint64_t)x & umask(t);
    int bits = gs_type_bits(t);
    switch (op) {
    case GS_OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case GS_OP_NEGATE: return (int64_t)(0 - (uint64_t)x);
    case GS_OP_NOT: return (int64_t)~(uint64_t)x;
    case GS_OP_SIGN: return gs_type_is_signed_int(t) ? (x > 0) - (x < 0) : (x != 0);
    case GS_OP_POPCNT: return __builtin_popcountll(u);
    case GS_OP_CLZ: return u == 0 ? bits : __builtin_clzll(u) - (64 - bits);
    default: return x; /* ceil, floor, round, real: identity on integers */
    }
}

void gs_scalar_unary(gs_opcode op, gs_type at, const void *a, int64_t ia, gs_type rt, void *out,
                     int64_t io) {
    switch (class_of(at)) {
    case TC_PRED:
        if (op == GS_OP_NOT)
            gs_elem_set_i(out, rt, io, !gs_elem_get_i(a, at, ia));
        else
            gs_elem_set_i(out, rt, io, gs_elem_get_i(a, at, ia));
        return;
    case TC_SINT:
    case TC_UINT:
        gs_elem_set_i(out, rt, io, int_unary(op, at, gs_elem_get_i(a, at, ia)));
        return;
    case TC_FLOAT:
    case TC_DOUBLE: {
        double x = gs_elem_get_f(a, at, ia);
        if (op == GS_OP_IS_FINITE) {
            gs_elem_set_i(out, rt, io, isfinite(x));
            return;
        }
        gs_elem_set_f(out, rt, io, float_unary(op, x, class_of(at) == TC_DOUBLE));
        return;
    }
    case TC_COMPLEX: {
        double complex z = get_c(a, at, ia), r;
        switch (op) {
        case GS_OP_ABS: gs_elem_set_f(out, rt, io, cabs(z)); return;
        case GS_OP_REAL: gs_elem_set_f(out, rt, io, creal(z)); return;
        case GS_OP_IMAG: gs_elem_set_f(out, rt, io, cimag(z)); return;
        case GS_OP_IS_FINITE: gs_elem_set_i(out, rt, io, isfinite(creal(z)) && isfinite(cimag(z))); return;
        case GS_OP_NEGATE: r = -z; break;
        case GS_OP_EXP: r = cexp(z); break;
        case GS_OP_LOG: r = clog(z); break;
        case GS_OP_LOG1P: r = clog(1 + z); break;
        case GS_OP_EXPM1: r = cexp(z) - 1; break;
        case GS_OP_SQRT: r = csqrt(z); break;
        case GS_OP_RSQRT: r = 1 / csqrt(z); break;
        case GS_OP_COS: r = ccos(z); break;
        case GS_OP_SIN: r = csin(z); break;
        case GS_OP_TAN: r = ctan(z); break;
        case GS_OP_TANH: r = ctanh(z); break;
        case GS_OP_LOGISTIC: r = 1 / (1 + cexp(-z)); break;
        case GS_OP_SIGN: {
            double m = cabs(z);
            r = m == 0 ? 0 : z / m;
            break;
        }
        case GS_OP_CBRT: r = cpow(z, 1.0 / 3.0); break;
        default: r = NAN; break;
        }
        set_c(out, rt, io, r);
        return;
    }
    }
}

/* ------------------------------------------------------------------ binary */

static double float_binary(gs_opcode op, double x, double y, bool dbl) {
    if (!dbl) {
        float a = (float)x, b = (float)y;
        switch (op) {
        case GS_OP_ADD: return (double)(a + b);
        case GS_OP_SUBTRACT: return (double)(a - b);
        case GS_OP_MULTIPLY: return (double)(a * b);
        case GS_OP_DIVIDE: return (double)(a / b);
        case GS_OP_REMAINDER: return (double)fmodf(a, b);
        case GS_OP_POWER: return (double)powf(a, b);
        case GS_OP_ATAN2: return (double)atan2f(a, b);
        default: break;
        }
    } else {
        switch (op) {
        case GS_OP_ADD: return x + y;
        case GS_OP_SUBTRACT: return x - y;
        case GS_OP_MULTIPLY: return x * y;
        case GS_OP_DIVIDE: return x / y;
        case GS_OP_REMAINDER: return fmod(x, y);
        case GS_OP_POWER: return pow(x, y);
        case GS_OP_ATAN2: return atan2(x, y);
        default: break;
        }
    }
    switch (op) {
    case GS_OP_MAXIMUM:
        if (isnan(x) || isnan(y)) return NAN;
        return x > y ? x : (y > x ? y : (signbit(x) ? y : x));
    case GS_OP_MINIMUM:
        if (isnan(x) || isnan(y)) return NAN;
        return x < y ? x : (y < x ? y : (signbit(x) ? x : y));
    default: return NAN;
    }
}

static int64_t int_pow(int64_t base, int64_t e, bool is_signed) {
    if (is_signed && e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)base, ue = (uint64_t)e;
    while (ue) {
        if (ue & 1) r *= b;
        b *= b;
        ue >>= 1;
    }
    return (int64_t)r;
}

static int64_t int_binary(gs_opcode op, gs_type t, int64_t x, int64_t y) {
    bool s = gs_type_is_signed_int(t);
    int bits = gs_type_bits(t);
    uint64_t m = umask(t);
    uint64_t ux = (uint64_t)x & m, uy = (uint64_t)y & m;
    int64_t min_s = bits >= 64 ? INT64_MIN : -(int64_t)(1ull << (bits - 1));
    switch (op) {
    case GS_OP_ADD: return (int64_t)((uint64_t)x + (uint64_t)y);
    case GS_OP_SUBTRACT: return (int64_t)((uint64_t)x - (uint64_t)y);
    case GS_OP_MULTIPLY: return (int64_t)((uint64_t)x * (uint64_t)y);
    case GS_OP_DIVIDE:
        if (y == 0) return -1; /* all bits set */
        if (s) return (x == min_s && y == -1) ? min_s : x / y;
        return (int64_t)(ux / uy);
    case GS_OP_REMAINDER:
        if (y == 0) return x;
        if (s) return (x == min_s && y == -1) ? 0 : x % y;
        return (int64_t)(ux % uy);
    case GS_OP_MAXIMUM: return s ? (x > y ? x : y) : (int64_t)(ux > uy ? ux : uy);
    case GS_OP_MINIMUM: return s ? (x < y ? x : y) : (int64_t)(ux < uy ? ux : uy);
    case GS_OP_AND: return x & y;
    case GS_OP_OR: return x | y;
    case GS_OP_XOR: return x ^ y;
    case GS_OP_POWER: return int_pow(x, y, s);
    case GS_OP_SHIFT_LEFT: return uy >= (uint64_t)bits ? 0 : (int64_t)(ux << uy);
    case GS_OP_SHIFT_RIGHT_LOGICAL: return uy >= (uint64_t)bits ? 0 : (int64_t)(ux >> uy);
    case GS_OP_SHIFT_RIGHT_ARITHMETIC: {
        int64_t sx = gs_int_wrap(s ? t : (gs_type)(t - GS_U2 + GS_S2), x); /* as signed */
        if (uy >= (uint64_t)bits) return sx < 0 ? -1 : 0;
        return sx >> uy;
    }
    default: return 0;
    }
}

void gs_scalar_binary(gs_opcode op, gs_type t, const void *a, int64_t ia, const void *b, int64_t ib,
                      gs_type rt, void *out, int64_t io) {
    switch (class_of(t)) {
    case TC_PRED: {
        bool x = gs_elem_get_i(a, t, ia) != 0, y = gs_elem_get_i(b, t, ib) != 0, r;
        switch (op) {
        case GS_OP_AND: case GS_OP_MULTIPLY: case GS_OP_MINIMUM: r = x && y; break;
        case GS_OP_OR: case GS_OP_ADD: case GS_OP_MAXIMUM: r = x || y; break;
        case GS_OP_XOR: case GS_OP_SUBTRACT: r = x != y; break;
        default: r = false; break;
        }
        gs_elem_set_i(out, rt, io, r);
        return;
    }
    case TC_SINT:
    case TC_UINT:
        gs_elem_set_i(out, rt, io, int_binary(op, t, gs_elem_get_i(a, t, ia), gs_elem_get_i(b, t, ib)));
        return;
    case TC_FLOAT:
    case TC_DOUBLE: {
        double x = gs_elem_get_f(a, t, ia), y = gs_elem_get_f(b, t, ib);
        if (op == GS_OP_COMPLEX) {
            gs_elem_set_c(out, rt, io, x, y);
            return;
        }
        gs_elem_set_f(out, rt, io, float_binary(op, x, y, class_of(t) == TC_DOUBLE));
        return;
    }
    case TC_COMPLEX: {
        double complex x = get_c(a, t, ia), y = get_c(b, t, ib), r;
        switch (op) {
        case GS_OP_ADD: r = x + y; break;
        case GS_OP_SUBTRACT: r = x - y; break;
        case GS_OP_MULTIPLY: r = x * y; break;
        case GS_OP_DIVIDE: r = x / y; break;
        case GS_OP_POWER: r = cpow(x, y); break;
        default: r = NAN; break;
        }
        set_c(out, rt, io, r);
        return;
    }
    }
}

/* ------------------------------------------------------------------ compare */

/* Maps a float to an integer key that orders like XLA's TOTALORDER: -NaN < -inf < ... < -0 <
 * +0 < ... < inf < +NaN. */
static int64_t total_order_key(double v) {
    int64_t bits;
    memcpy(&bits, &v, 8);
    return bits < 0 ? bits ^ INT64_MAX : bits; /* negatives: reverse the magnitude order */
}

bool gs_scalar_compare(gs_type t, const void *a, int64_t ia, const void *b, int64_t ib,
                       const char *dir, const char *cmp_type) {
    int c; /* -1, 0, 1, or 2 for unordered */
    tclass tc = class_of(t);
    bool total = cmp_type && strcmp(cmp_type, "TOTALORDER") == 0;
    if (tc == TC_COMPLEX) {
        double complex x = get_c(a, t, ia), y = get_c(b, t, ib);
        bool eq = x == y;
        if (strcmp(dir, "EQ") == 0) return eq;
        if (strcmp(dir, "NE") == 0) return !eq;
        /* Ordered comparisons of complex numbers compare lexicographically (XLA's evaluator). */
        double xr = creal(x), yr = creal(y);
        c = xr < yr ? -1 : xr > yr ? 1 : (cimag(x) < cimag(y) ? -1 : cimag(x) > cimag(y) ? 1 : 0);
    } else if (tc == TC_FLOAT || tc == TC_DOUBLE) {
        double x = gs_elem_get_f(a, t, ia), y = gs_elem_get_f(b, t, ib);
        if (total) {
            int64_t kx = total_order_key(x), ky = total_order_key(y);
            c = kx < ky ? -1 : kx > ky ? 1 : 0;
        } else if (isnan(x) || isnan(y)) {
            c = 2;
        } else {
            c = x < y ? -1 : x > y ? 1 : 0;
        }
    } else if (tc == TC_UINT) {
        uint64_t x = (uint64_t)gs_elem_get_i(a, t, ia), y = (uint64_t)gs_elem_get_i(b, t, ib);
        c = x < y ? -1 : x > y ? 1 : 0;
    } else {
        int64_t x = gs_elem_get_i(a, t, ia), y = gs_elem_get_i(b, t, ib);
        c = x < y ? -1 : x > y ? 1 : 0;
    }
    if (strcmp(dir, "EQ") == 0) return c == 0;
    if (strcmp(dir, "NE") == 0) return c != 0;
    if (strcmp(dir, "LT") == 0) return c == -1;
    if (strcmp(dir, "LE") == 0) return c == -1 || c == 0;
    if (strcmp(dir, "GT") == 0) return c == 1;
    if (strcmp(dir, "GE") == 0) return c == 1 || c == 0;
    return false;
}

/* ------------------------------------------------------------------ convert */

void gs_scalar_convert(gs_type at, const void *a, int64_t ia, gs_type rt, void *out, int64_t io) {
    tclass from = class_of(at), to = class_of(rt);
    if (to == TC_COMPLEX) {
        double re, im;
        gs_elem_get_c(a, at, ia, &re, &im);
        gs_elem_set_c(out, rt, io, re, im);
    } else if (to == TC_PRED) {
        if (from == TC_FLOAT || from == TC_DOUBLE || from == TC_COMPLEX) {
            double re, im;
            gs_elem_get_c(a, at, ia, &re, &im);
            gs_elem_set_i(out, rt, io, re != 0 || im != 0);
        } else {
            gs_elem_set_i(out, rt, io, gs_elem_get_i(a, at, ia) != 0);
        }
    } else if (from == TC_FLOAT || from == TC_DOUBLE || from == TC_COMPLEX) {
        double re, im;
        gs_elem_get_c(a, at, ia, &re, &im);
        gs_elem_set_f(out, rt, io, re); /* to ints: saturating, NaN -> 0 */
    } else if (to == TC_FLOAT || to == TC_DOUBLE) {
        /* Round once from the exact integer (a double would round first above 2^53). */
        int64_t v = gs_elem_get_i(a, at, ia);
        if (rt == GS_F32)
            gs_elem_set_f(out, rt, io, from == TC_UINT ? (float)(uint64_t)v : (float)v);
        else
            gs_elem_set_f(out, rt, io, from == TC_UINT ? (double)(uint64_t)v : (double)v);
    } else {
        gs_elem_set_i(out, rt, io, gs_elem_get_i(a, at, ia));
    }
}

/* ------------------------------------------------------------------ kernels */

/* The same float math as float_unary, without its per-element dispatch. */
bool gs_unary_f32(gs_opcode op, const float *x, float *y, int64_t n) {
#define LOOP(expr)                                                                                \
    for (int64_t i = 0; i < n; i++) {                                                             \
        float v = x[i];                                                                           \
        y[i] = (expr);                                                                            \
    }                                                                                             \
    return true
#define SIMD_UNARY(expr)                                                                          \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = (expr);                           \
    return true
    switch (op) {
    case GS_OP_NEGATE: SIMD_UNARY(-x[i]);
    case GS_OP_ABS: SIMD_UNARY(fabsf(x[i]));
    case GS_OP_TANH: SIMD_UNARY(tanh_f32(x[i]));
    case GS_OP_EXP: LOOP(expf(v));
    case GS_OP_EXPM1: LOOP(expm1f(v));
    case GS_OP_LOG: LOOP(logf(v));
    case GS_OP_LOG1P: LOOP(log1pf(v));
    case GS_OP_SQRT: LOOP(sqrtf(v));
    case GS_OP_RSQRT: LOOP(1.0f / sqrtf(v));
    case GS_OP_LOGISTIC: LOOP(1.0f / (1.0f + expf(-v)));
    case GS_OP_SIN: LOOP(sinf(v));
    case GS_OP_COS: LOOP(cosf(v));
    case GS_OP_ERF: LOOP(erff(v));
    case GS_OP_FLOOR: LOOP(floorf(v));
    case GS_OP_CEIL: LOOP(ceilf(v));
    default: return false;
    }
#undef LOOP
#undef SIMD_UNARY
}

/* `omp simd` (with -fopenmp-simd: no OpenMP runtime) vectorises these loops at -O2: z may be
 * x or y exactly, never a shifted overlap, so no iteration reads what another writes. */
#define SIMD_LOOP(expr)                                                                           \
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) z[i] = (expr);                           \
    return true

bool gs_binary_f32(gs_opcode op, const float *x, const float *y, float *z, int64_t n) {
    switch (op) {
    case GS_OP_ADD: SIMD_LOOP(x[i] + y[i]);
    case GS_OP_SUBTRACT: SIMD_LOOP(x[i] - y[i]);
    case GS_OP_MULTIPLY: SIMD_LOOP(x[i] * y[i]);
    case GS_OP_DIVIDE: SIMD_LOOP(x[i] / y[i]);
    case GS_OP_MAXIMUM: SIMD_LOOP(gs_max_f32(x[i], y[i]));
    case GS_OP_MINIMUM: SIMD_LOOP(gs_min_f32(x[i], y[i]));
    default: return false;
    }
}

/* The integer and predicate cases of gs_scalar_binary as one loop per op (the halo masks the
 * partitioner emits are iota, add, compare and `and` over whole shards): wrapping arithmetic
 * through an unsigned type at least as wide as unsigned int (narrower ones would promote to int,
 * whose overflow is undefined: 65535 * 65535), as int_binary; false for other types and ops
 * (division, remainder, power and shifts keep their scalar rules). */
static bool binary_int(gs_opcode op, gs_type t, const void *a, const void *b, void *out,
                       int64_t n) {
#define INT_LOOPS(T, UT)                                                                          \
    do {                                                                                          \
        const T *x = a, *y = b;                                                                   \
        T *z = out;                                                                               \
        switch (op) {                                                                             \
        case GS_OP_ADD: SIMD_LOOP((T)((UT)x[i] + (UT)y[i]));                                     \
        case GS_OP_SUBTRACT: SIMD_LOOP((T)((UT)x[i] - (UT)y[i]));                                \
        case GS_OP_MULTIPLY: SIMD_LOOP((T)((UT)x[i] * (UT)y[i]));                                \
        case GS_OP_MAXIMUM: SIMD_LOOP(x[i] > y[i] ? x[i] : y[i]);                                \
        case GS_OP_MINIMUM: SIMD_LOOP(x[i] < y[i] ? x[i] : y[i]);                                \
        case GS_OP_AND: SIMD_LOOP(x[i] & y[i]);                                                  \
        case GS_OP_OR: SIMD_LOOP(x[i] | y[i]);                                                   \
        case GS_OP_XOR: SIMD_LOOP(x[i] ^ y[i]);                                                  \
        default: return false;                                                                    \
        }                                                                                         \
    } while (0)
    switch (t) {
    case GS_S32: INT_LOOPS(int32_t, uint32_t);
    case GS_U32: INT_LOOPS(uint32_t, uint32_t);
    case GS_S64: INT_LOOPS(int64_t, uint64_t);
    case GS_U64: INT_LOOPS(uint64_t, uint64_t);
    case GS_S8: INT_LOOPS(int8_t, uint32_t);
    case GS_U8: INT_LOOPS(uint8_t, uint32_t);
    case GS_S16: INT_LOOPS(int16_t, uint32_t);
    case GS_U16: INT_LOOPS(uint16_t, uint32_t);
    case GS_PRED: {
        const unsigned char *x = a, *y = b;
        unsigned char *z = out;
        switch (op) {
        case GS_OP_AND: case GS_OP_MULTIPLY: case GS_OP_MINIMUM: SIMD_LOOP((x[i] != 0) & (y[i] != 0));
        case GS_OP_OR: case GS_OP_ADD: case GS_OP_MAXIMUM: SIMD_LOOP((x[i] != 0) | (y[i] != 0));
        case GS_OP_XOR: case GS_OP_SUBTRACT: SIMD_LOOP((x[i] != 0) ^ (y[i] != 0));
        default: return false;
        }
    }
    default: return false;
    }
#undef INT_LOOPS
}

static gs_status k_unary(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    gs_value *r = gs_eval_new_result_in_place(ev, in);
    if (!r) return GS_ERR;
    const gs_value *a = ops[0];
    if (a->type == GS_F32 && r->type == GS_F32 && gs_unary_f32(in->op, a->data, r->data, a->n)) {
        /* done */
    } else {
        for (int64_t i = 0; i < a->n; i++) gs_scalar_unary(in->op, a->type, a->data, i, r->type, r->data, i);
    }
    *out = r;
    return GS_OK;
}

static gs_status k_binary(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0], *b = ops[1];
    if (a->n != b->n) return gs_eval_error(ev, in, "operands have different element counts");
    gs_value *r = gs_eval_new_result_in_place(ev, in);
    if (!r) return GS_ERR;
    if (a->type == GS_F32 && b->type == GS_F32 && r->type == GS_F32 &&
        gs_binary_f32(in->op, a->data, b->data, r->data, a->n))
        goto done;
    if (a->type == b->type && a->type == r->type &&
        binary_int(in->op, a->type, a->data, b->data, r->data, a->n))
        goto done;
    if (a->type == GS_F64 && b->type == GS_F64 && r->type == GS_F64) {
        const double *x = a->data, *y = b->data;
        double *z = r->data;
        switch (in->op) {
        case GS_OP_ADD: for (int64_t i = 0; i < a->n; i++) z[i] = x[i] + y[i]; goto done;
        case GS_OP_SUBTRACT: for (int64_t i = 0; i < a->n; i++) z[i] = x[i] - y[i]; goto done;
        case GS_OP_MULTIPLY: for (int64_t i = 0; i < a->n; i++) z[i] = x[i] * y[i]; goto done;
        case GS_OP_DIVIDE: for (int64_t i = 0; i < a->n; i++) z[i] = x[i] / y[i]; goto done;
        default: break;
        }
    }
    for (int64_t i = 0; i < a->n; i++)
        gs_scalar_binary(in->op, a->type, a->data, i, b->data, i, r->type, r->data, i);
done:
    *out = r;
    return GS_OK;
}

/* f32 and s32 comparisons as one loop per direction, with gs_scalar_compare's results (C's
 * float comparisons are false on NaN except !=, as XLA's are); false for other cases. */
static bool compare_fast(const gs_value *a, const gs_value *b, const char *dir, const char *type,
                         unsigned char *z) {
    if (a->type != b->type || a->n != b->n || (type && strcmp(type, "TOTALORDER") == 0))
        return false;
    int64_t n = a->n;
#define CMP_LOOPS(T)                                                                              \
    do {                                                                                          \
        const T *x = a->data, *y = b->data;                                                       \
        if (strcmp(dir, "EQ") == 0) for (int64_t i = 0; i < n; i++) z[i] = x[i] == y[i];          \
        else if (strcmp(dir, "NE") == 0) for (int64_t i = 0; i < n; i++) z[i] = x[i] != y[i];     \
        else if (strcmp(dir, "LT") == 0) for (int64_t i = 0; i < n; i++) z[i] = x[i] < y[i];      \
        else if (strcmp(dir, "LE") == 0) for (int64_t i = 0; i < n; i++) z[i] = x[i] <= y[i];     \
        else if (strcmp(dir, "GT") == 0) for (int64_t i = 0; i < n; i++) z[i] = x[i] > y[i];      \
        else if (strcmp(dir, "GE") == 0) for (int64_t i = 0; i < n; i++) z[i] = x[i] >= y[i];     \
        else return false;                                                                        \
        return true;                                                                              \
    } while (0)
    if (a->type == GS_F32) CMP_LOOPS(float);
    if (a->type == GS_S32) CMP_LOOPS(int32_t);
#undef CMP_LOOPS
    return false;
}

static gs_status k_compare(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0], *b = ops[1];
    const char *dir = gs_instr_str(in, GS_ATTR_DIRECTION);
    const char *type = gs_instr_str(in, GS_ATTR_TYPE);
    if (!dir) return gs_eval_error(ev, in, "compare needs direction=");
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    unsigned char *z = r->data;
    if (!compare_fast(a, b, dir, type, z))
        for (int64_t i = 0; i < a->n; i++)
            z[i] = gs_scalar_compare(a->type, a->data, i, b->data, i, dir, type);
    *out = r;
    return GS_OK;
}

static gs_status k_select(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *p = ops[0], *t = ops[1], *f = ops[2];
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    const unsigned char *pv = p->data;
    int size = gs_type_size(r->type);
    bool scalar_pred = p->n == 1 && r->n != 1;
    if (size == 4 && !scalar_pred) { /* f32, s32, u32: one loop */
        const uint32_t *tv = t->data, *fv = f->data;
        uint32_t *rv = r->data;
        /* by masks, so that the loop vectorises */
        _Pragma("omp simd") for (int64_t i = 0; i < r->n; i++) {
            uint32_t m = (uint32_t)0 - (uint32_t)(pv[i] != 0);
            rv[i] = (tv[i] & m) | (fv[i] & ~m);
        }
        *out = r;
        return GS_OK;
    }
    for (int64_t i = 0; i < r->n; i++) {
        bool c = pv[scalar_pred ? 0 : i] != 0;
        gs_copy_elem(r->data, i, c ? t->data : f->data, i, size);
    }
    *out = r;
    return GS_OK;
}

static gs_status k_clamp(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *lo = ops[0], *x = ops[1], *hi = ops[2];
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    for (int64_t i = 0; i < r->n; i++) {
        int64_t il = lo->n == 1 ? 0 : i, ih = hi->n == 1 ? 0 : i;
        /* clamp(lo, x, hi) = min(max(x, lo), hi) */
        gs_scalar_binary(GS_OP_MAXIMUM, r->type, x->data, i, lo->data, il, r->type, r->data, i);
        gs_scalar_binary(GS_OP_MINIMUM, r->type, r->data, i, hi->data, ih, r->type, r->data, i);
    }
    *out = r;
    return GS_OK;
}

static gs_status k_convert(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0];
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    for (int64_t i = 0; i < a->n; i++) gs_scalar_convert(a->type, a->data, i, r->type, r->data, i);
    *out = r;
    return GS_OK;
}

static gs_status k_bitcast_convert(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0];
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    if (gs_value_bytes(r) != gs_value_bytes(a) || gs_type_bits(a->type) % 8 || gs_type_bits(r->type) % 8) {
        gs_value_free(r);
        return gs_eval_error(ev, in, "bitcast-convert between %s and %s changes the byte count",
                             gs_type_name(a->type), gs_type_name(r->type));
    }
    memcpy(r->data, a->data, gs_value_bytes(a));
    *out = r;
    return GS_OK;
}

/* reduce-precision: round the mantissa to `mbits` bits (nearest even) and the exponent range to
 * `ebits` bits (overflow to inf, underflow to zero), as XLA's ReducePrecision does. */
static double reduce_precision(double x, int ebits, int mbits, gs_type t) {
    if (isnan(x)) return x;
    int src_mbits = t == GS_F64 ? 52 : 23;
    if (t == GS_F64) {
        uint64_t u;
        memcpy(&u, &x, 8);
        if (mbits < src_mbits) {
            int shift = src_mbits - mbits;
            uint64_t last = (u >> shift) & 1;
            uint64_t bias = (1ull << (shift - 1)) - 1 + last;
            u = (u + bias) & ~((1ull << shift) - 1);
        }
        if (ebits < 11) {
            int64_t max_exp = (1 << (ebits - 1)) - 1, min_exp = 1 - max_exp;
            int64_t e = (int64_t)((u >> 52) & 0x7ff) - 1023;
            if (e > max_exp) u = (u & (1ull << 63)) | (0x7ffull << 52);
            else if (e < min_exp) u &= 1ull << 63;
        }
        double r;
        memcpy(&r, &u, 8);
        return r;
    }
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (mbits < src_mbits) {
        int shift = src_mbits - mbits;
        uint32_t last = (u >> shift) & 1;
        uint32_t bias = (1u << (shift - 1)) - 1 + last;
        u = (u + bias) & ~((1u << shift) - 1);
    }
    if (ebits < 8) {
        int32_t max_exp = (1 << (ebits - 1)) - 1, min_exp = 1 - max_exp;
        int32_t e = (int32_t)((u >> 23) & 0xff) - 127;
        if (e > max_exp) u = (u & 0x80000000u) | 0x7f800000u;
        else if (e < min_exp) u &= 0x80000000u;
    }
    memcpy(&f, &u, 4);
    return f;
}

static gs_status k_reduce_precision(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_value *a = ops[0];
    int ebits = (int)gs_instr_int(in, GS_ATTR_EXPONENT_BITS, 8);
    int mbits = (int)gs_instr_int(in, GS_ATTR_MANTISSA_BITS, 23);
    if (ebits < 1 || mbits < 0) return gs_eval_error(ev, in, "bad exponent_bits/mantissa_bits");
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    for (int64_t i = 0; i < a->n; i++)
        gs_elem_set_f(r->data, r->type, i, reduce_precision(gs_elem_get_f(a->data, a->type, i), ebits, mbits, a->type));
    *out = r;
    return GS_OK;
}

static gs_status k_iota(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    int64_t dim = gs_instr_int(in, GS_ATTR_IOTA_DIMENSION, 0);
    if (r->rank == 0 || dim < 0 || dim >= r->rank) {
        gs_value_free(r);
        return gs_eval_error(ev, in, "iota_dimension %lld is out of range", (long long)dim);
    }
    int64_t inner = 1;
    for (int i = (int)dim + 1; i < r->rank; i++) inner *= r->dims[i];
    if (r->type == GS_S32 || r->type == GS_U32 || r->type == GS_F32 || r->type == GS_S64) {
        /* runs of `inner` equal values, one loop each */
        int64_t runs = inner > 0 ? r->n / inner : 0;
        for (int64_t k = 0; k < runs; k++) {
            int64_t v = k % r->dims[dim], at = k * inner;
            if (r->type == GS_F32) {
                float *z = (float *)r->data + at;
                for (int64_t i = 0; i < inner; i++) z[i] = (float)v;
            } else if (r->type == GS_S64) {
                int64_t *z = (int64_t *)r->data + at;
                for (int64_t i = 0; i < inner; i++) z[i] = v;
            } else {
                uint32_t *z = (uint32_t *)r->data + at;
                for (int64_t i = 0; i < inner; i++) z[i] = (uint32_t)v;
            }
        }
        *out = r;
        return GS_OK;
    }
    for (int64_t i = 0; i < r->n; i++) {
        int64_t v = (i / inner) % r->dims[dim];
        if (gs_type_is_float(r->type) || gs_type_is_complex(r->type))
            gs_elem_set_f(r->data, r->type, i, (double)v);
        else
            gs_elem_set_i(r->data, r->type, i, v);
    }
    *out = r;
    return GS_OK;
}

/* map: applies to_apply to the i-th elements of all operands. */
static gs_status k_map(gs_eval *ev, const gs_instr *in, gs_value *const *ops, gs_value **out) {
    const gs_computation *c = gs_instr_comp(in, GS_ATTR_TO_APPLY);
    if (!c) return gs_eval_error(ev, in, "map needs to_apply=");
    gs_value *r = gs_eval_new_result(ev, in);
    if (!r) return GS_ERR;
    int n = in->n_operands;
    gs_value **args = gs_sys_calloc((size_t)n, sizeof *args);
    if (!args) {
        gs_value_free(r);
        return gs_eval_oom(ev, in);
    }
    gs_status st = GS_OK;
    for (int k = 0; k < n && st == GS_OK; k++) {
        args[k] = gs_value_new_array(ops[k]->type, 0, NULL);
        if (!args[k]) st = gs_eval_oom(ev, in);
    }
    int rsize = gs_type_size(r->type);
    for (int64_t i = 0; i < r->n && st == GS_OK; i++) {
        for (int k = 0; k < n; k++) gs_copy_elem(args[k]->data, 0, ops[k]->data, i, gs_type_size(ops[k]->type));
        gs_value *y;
        st = gs_eval_call(ev, c, args, n, &y);
        if (st == GS_OK) {
            gs_copy_elem(r->data, i, y->data, 0, rsize);
            gs_value_free(y);
        }
    }
    for (int k = 0; k < n; k++) gs_value_free(args[k]);
    free(args);
    if (st != GS_OK) {
        gs_value_free(r);
        return st;
    }
    *out = r;
    return GS_OK;
}

gs_kernel_fn gs_kernel_elementwise(gs_opcode op) {
    switch (gs_op_info_of(op)->family) {
    case GS_FAM_UNARY: return k_unary;
    case GS_FAM_BINARY: return k_binary;
    case GS_FAM_COMPARE: return k_compare;
    case GS_FAM_IOTA: return k_iota;
    case GS_FAM_MAP: return k_map;
    default: break;
    }
    switch (op) {
    case GS_OP_SELECT: return k_select;
    case GS_OP_CLAMP: return k_clamp;
    case GS_OP_CONVERT: return k_convert;
    case GS_OP_BITCAST_CONVERT: return k_bitcast_convert;
    case GS_OP_REDUCE_PRECISION: return k_reduce_precision;
    default: return NULL;
    }
}

/* ------------------------------------------------------------------ reducers */

gs_status gs_apply_reducer(gs_eval *ev, const gs_instr *in, const gs_computation *comp,
                           int n_vals, const gs_type *types, void *const *accs, int64_t i_acc,
                           const void *const *xs, int64_t i_x) {
    gs_opcode op;
    if (n_vals == 1 && gs_computation_binary_reducer(comp, &op)) {
        gs_scalar_binary(op, types[0], accs[0], i_acc, xs[0], i_x, types[0], accs[0], i_acc);
        return GS_OK;
    }
    /* General path: call the computation on scalars (acc..., x...). */
    if (comp->n_params != 2 * n_vals)
        return gs_eval_error(ev, in, "reducer %s takes %d parameters, expected %d", comp->name,
                             comp->n_params, 2 * n_vals);
    gs_value *args[64] = {0};
    if (2 * n_vals > 64) return gs_eval_error(ev, in, "too many reduced values");
    gs_status st = GS_OK;
    int made = 0;
    for (int k = 0; k < n_vals && st == GS_OK; k++) {
        args[k] = gs_value_new_array(types[k], 0, NULL);
        args[n_vals + k] = gs_value_new_array(types[k], 0, NULL);
        made = k + 1;
        if (!args[k] || !args[n_vals + k]) {
            st = gs_eval_oom(ev, in);
            break;
        }
        int sz = gs_type_size(types[k]);
        gs_copy_elem(args[k]->data, 0, accs[k], i_acc, sz);
        gs_copy_elem(args[n_vals + k]->data, 0, xs[k], i_x, sz);
    }
    gs_value *y = NULL;
    if (st == GS_OK) st = gs_eval_call(ev, comp, args, 2 * n_vals, &y);
    if (st == GS_OK) {
        if (n_vals == 1 && y->type != GS_TUPLE) {
            gs_copy_elem(accs[0], i_acc, y->data, 0, gs_type_size(types[0]));
        } else if (y->type == GS_TUPLE && y->n_tuple == n_vals) {
            for (int k = 0; k < n_vals; k++)
                gs_copy_elem(accs[k], i_acc, y->tuple[k]->data, 0, gs_type_size(types[k]));
        } else {
            st = gs_eval_error(ev, in, "reducer %s returns the wrong number of values", comp->name);
        }
        gs_value_free(y);
    }
    for (int k = 0; k < made; k++) {
        gs_value_free(args[k]);
        gs_value_free(args[n_vals + k]);
    }
    return st;
}
