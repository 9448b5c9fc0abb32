/*
 * numeric.c — narrow float formats and typed element access (see gspmd/numeric.h).
 *
 * Narrow formats are described by (exponent bits, mantissa bits, bias, kind). Encoding rounds the
 * double's exact value to nearest-even in the target format, handling subnormals; this matches
 * Eigen/ml_dtypes conversions, which XLA uses.
 */
#include "gspmd/numeric.h"

#include <math.h>
#include <string.h>

typedef enum nf_kind {
    NF_IEEE,   /* has inf, NaN = all-ones exponent with nonzero mantissa */
    NF_FN,     /* no inf; NaN = all ones (exp and mantissa) (f8e4m3fn) */
    NF_FNUZ,   /* no inf, no -0; NaN = sign bit alone (0x80) */
    NF_E8M0,   /* exponent only, NaN = 0xff */
    NF_F4      /* f4e2m1fn: no inf, no NaN: saturate */
} nf_kind;

typedef struct nf_format {
    int ebits, mbits, bias;
    nf_kind kind;
} nf_format;

static bool nf_format_of(gs_type t, nf_format *f) {
    switch (t) {
    case GS_F16: *f = (nf_format){5, 10, 15, NF_IEEE}; return true;
    case GS_BF16: *f = (nf_format){8, 7, 127, NF_IEEE}; return true;
    case GS_F8E5M2: *f = (nf_format){5, 2, 15, NF_IEEE}; return true;
    case GS_F8E4M3: *f = (nf_format){4, 3, 7, NF_IEEE}; return true;
    case GS_F8E3M4: *f = (nf_format){3, 4, 3, NF_IEEE}; return true;
    case GS_F8E4M3FN: *f = (nf_format){4, 3, 7, NF_FN}; return true;
    case GS_F8E4M3FNUZ: *f = (nf_format){4, 3, 8, NF_FNUZ}; return true;
    case GS_F8E5M2FNUZ: *f = (nf_format){5, 2, 16, NF_FNUZ}; return true;
    case GS_F8E4M3B11FNUZ: *f = (nf_format){4, 3, 11, NF_FNUZ}; return true;
    case GS_F8E8M0FNU: *f = (nf_format){8, 0, 127, NF_E8M0}; return true;
    case GS_F4E2M1FN: *f = (nf_format){2, 1, 1, NF_F4}; return true;
    default: return false;
    }
}

/* Largest finite magnitude's encoding (without sign) for formats without infinity. */
static uint32_t nf_max_finite(const nf_format *f) {
    uint32_t emax = (1u << f->ebits) - 1, mmax = (1u << f->mbits) - 1;
    switch (f->kind) {
    case NF_FN: return (emax << f->mbits) | (mmax - 1); /* all-ones is NaN */
    default: return (emax << f->mbits) | mmax;
    }
}

static uint16_t nf_nan(const nf_format *f) {
    switch (f->kind) {
    case NF_IEEE: return (uint16_t)(((1u << f->ebits) - 1) << f->mbits | (1u << (f->mbits - 1)));
    case NF_FN: return (uint16_t)((1u << (f->ebits + f->mbits)) - 1);
    case NF_FNUZ: return (uint16_t)(1u << (f->ebits + f->mbits));
    case NF_E8M0: return 0xff;
    case NF_F4: return 0;
    }
    return 0;
}

static uint16_t nf_encode(const nf_format *f, double v) {
    int total = f->ebits + f->mbits;
    uint32_t sign = signbit(v) ? 1u << total : 0;
    if (f->kind == NF_E8M0) {
        if (isnan(v) || v <= 0) return v == 0 ? 0 : 0xff; /* no zero exists; smallest is 2^-127 */
        if (isinf(v)) return 0xff;
        int e;
        frexp(v, &e); /* v = m * 2^e, m in [0.5,1) */
        double m = v / ldexp(1.0, e - 1); /* in [1,2) */
        int ex = e - 1 + (m >= 1.5 ? 1 : 0); /* round to nearest power of two (ties up) */
        int biased = ex + f->bias;
        if (biased < 0) return 0;
        if (biased > 254) return 0xff;
        return (uint16_t)biased;
    }
    if (isnan(v)) return (uint16_t)(nf_nan(f) | (f->kind == NF_IEEE || f->kind == NF_FN ? sign : 0));
    double a = fabs(v);
    uint32_t emax_field = (1u << f->ebits) - 1;
    if (isinf(a)) {
        if (f->kind == NF_IEEE) return (uint16_t)(sign | emax_field << f->mbits);
        if (f->kind == NF_F4) return (uint16_t)(sign | nf_max_finite(f));
        return nf_nan(f) | (uint16_t)(f->kind == NF_FN ? sign : 0);
    }
    if (a == 0) return f->kind == NF_FNUZ ? 0 : (uint16_t)sign;
    /* Scale so that the quantum of the target at this magnitude is 1, then round-to-even. */
    int e;
    frexp(a, &e);
    int exp_unbiased = e - 1;                  /* a in [2^exp, 2^(exp+1)) */
    int min_normal_exp = 1 - f->bias;
    int q_exp = (exp_unbiased < min_normal_exp ? min_normal_exp : exp_unbiased) - f->mbits;
    double scaled = ldexp(a, -q_exp);          /* exact */
    double r = nearbyint(scaled);              /* round-half-even (default rounding mode) */
    uint64_t mant = (uint64_t)r;
    int field_exp;
    if (mant >= (2ull << f->mbits)) {          /* rounding carried into the next binade */
        mant >>= 1;
        q_exp++;
    }
    if (mant < (1ull << f->mbits)) {
        field_exp = 0;                          /* subnormal (or zero after rounding) */
    } else {
        field_exp = q_exp + f->mbits + f->bias;
        mant -= 1ull << f->mbits;
    }
    uint32_t enc = ((uint32_t)field_exp << f->mbits) | (uint32_t)mant;
    bool overflow = false;
    if (f->kind == NF_IEEE) {
        if ((uint32_t)field_exp >= emax_field) return (uint16_t)(sign | emax_field << f->mbits);
    } else {
        if (field_exp > (int)emax_field || enc > nf_max_finite(f)) overflow = true;
    }
    if (overflow) {
        if (f->kind == NF_F4) return (uint16_t)(sign | nf_max_finite(f));
        return nf_nan(f) | (uint16_t)(f->kind == NF_FN ? sign : 0);
    }
    if (f->kind == NF_FNUZ && enc == 0) return 0;
    return (uint16_t)(sign | enc);
}

static double nf_decode(const nf_format *f, uint16_t bits) {
    int total = f->ebits + f->mbits;
    if (f->kind == NF_E8M0) return bits == 0xff ? NAN : ldexp(1.0, (int)bits - f->bias);
    bool neg = (bits >> total) & 1;
    uint32_t field_exp = (bits >> f->mbits) & ((1u << f->ebits) - 1);
    uint32_t mant = bits & ((1u << f->mbits) - 1);
    uint32_t emax_field = (1u << f->ebits) - 1;
    if (f->kind == NF_FNUZ && neg && field_exp == 0 && mant == 0) return NAN;
    if (f->kind == NF_IEEE && field_exp == emax_field)
        return mant ? NAN : (neg ? -INFINITY : INFINITY);
    if (f->kind == NF_FN && field_exp == emax_field && mant == (1u << f->mbits) - 1) return NAN;
    double v;
    if (field_exp == 0)
        v = ldexp((double)mant, 1 - f->bias - f->mbits);
    else
        v = ldexp((double)(mant | (1u << f->mbits)), (int)field_exp - f->bias - f->mbits);
    return neg ? -v : v;
}

uint16_t gs_narrow_from_double(gs_type t, double v) {
    nf_format f;
    return nf_format_of(t, &f) ? nf_encode(&f, v) : 0;
}

double gs_narrow_to_double(gs_type t, uint16_t bits) {
    nf_format f;
    return nf_format_of(t, &f) ? nf_decode(&f, bits) : 0;
}

uint16_t gs_bf16_from_double(double v) { return gs_narrow_from_double(GS_BF16, v); }

uint16_t gs_bf16_from_float(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if (isnan(v)) return (uint16_t)((u >> 16) | 0x40);
    uint32_t lsb = (u >> 16) & 1;
    u += 0x7fff + lsb;
    return (uint16_t)(u >> 16);
}

float gs_bf16_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t gs_f16_from_double(double v) { return gs_narrow_from_double(GS_F16, v); }
float gs_f16_to_float(uint16_t h) { return (float)gs_narrow_to_double(GS_F16, h); }

bool gs_type_supported(gs_type t) {
    return gs_type_is_array(t);
}

int64_t gs_int_wrap(gs_type t, int64_t v) {
    if (t == GS_PRED) return v != 0;
    int bits = gs_type_bits(t);
    if (bits >= 64) return v;
    uint64_t mask = (1ull << bits) - 1;
    uint64_t u = (uint64_t)v & mask;
    if (gs_type_is_signed_int(t) && (u >> (bits - 1)) & 1) u |= ~mask;
    return (int64_t)u;
}

/* Loaders of one stored value of each width at byte address p (any alignment). */
#define LOADER(name, type)                                                                         \
    static type name(const unsigned char *p) {                                                     \
        type v;                                                                                    \
        memcpy(&v, p, sizeof v);                                                                   \
        return v;                                                                                  \
    }
LOADER(load_f32, float)
LOADER(load_f64, double)
LOADER(load_u16, uint16_t)
LOADER(load_s16, int16_t)
LOADER(load_u32, uint32_t)
LOADER(load_s32, int32_t)
LOADER(load_s64, int64_t)
#undef LOADER

double gs_elem_get_f(const void *base, gs_type t, int64_t i) {
    const unsigned char *p = base;
    switch (t) {
    case GS_F32: return load_f32(p + i * 4);
    case GS_F64: return load_f64(p + i * 8);
    case GS_BF16: return gs_bf16_to_float(load_u16(p + i * 2));
    case GS_F16: return gs_narrow_to_double(GS_F16, load_u16(p + i * 2));
    case GS_C64: return load_f32(p + i * 8);   /* the real part */
    case GS_C128: return load_f64(p + i * 16); /* the real part */
    default:
        if (gs_type_is_float(t)) return gs_narrow_to_double(t, p[i]);
        if (t == GS_U64) return (double)(uint64_t)gs_elem_get_i(base, t, i);
        return (double)gs_elem_get_i(base, t, i);
    }
}

int64_t gs_elem_get_i(const void *base, gs_type t, int64_t i) {
    const unsigned char *p = base;
    switch (t) {
    case GS_PRED: return p[i] != 0;
    case GS_S2: case GS_S4: return gs_int_wrap(t, (int8_t)p[i]);
    case GS_U2: case GS_U4: return gs_int_wrap(t, p[i]);
    case GS_S8: return (int8_t)p[i];
    case GS_U8: return p[i];
    case GS_S16: return load_s16(p + i * 2);
    case GS_U16: return load_u16(p + i * 2);
    case GS_S32: return load_s32(p + i * 4);
    case GS_U32: return load_u32(p + i * 4);
    case GS_S64:
    case GS_U64: return load_s64(p + i * 8);
    default: {
        double d = gs_elem_get_f(base, t, i);
        if (isnan(d)) return 0;
        if (d >= 9.2233720368547758e18) return INT64_MAX;
        if (d <= -9.2233720368547758e18) return INT64_MIN;
        return (int64_t)d;
    }
    }
}

void gs_elem_get_c(const void *base, gs_type t, int64_t i, double *re, double *im) {
    const unsigned char *p = base;
    if (t == GS_C64) {
        *re = load_f32(p + i * 8);
        *im = load_f32(p + i * 8 + 4);
    } else if (t == GS_C128) {
        *re = load_f64(p + i * 16);
        *im = load_f64(p + i * 16 + 8);
    } else {
        *re = gs_type_is_float(t) ? gs_elem_get_f(base, t, i)
                                  : (t == GS_U64 ? (double)(uint64_t)gs_elem_get_i(base, t, i)
                                                 : (double)gs_elem_get_i(base, t, i));
        *im = 0;
    }
}

void gs_elem_set_i(void *base, gs_type t, int64_t i, int64_t v) {
    unsigned char *p = base;
    switch (t) {
    case GS_PRED: p[i] = v != 0; return;
    case GS_S2: case GS_S4: case GS_U2: case GS_U4: case GS_S8: case GS_U8:
        p[i] = (unsigned char)gs_int_wrap(t, v);
        return;
    case GS_S16: case GS_U16: {
        uint16_t u = (uint16_t)v;
        memcpy(p + i * 2, &u, 2);
        return;
    }
    case GS_S32: case GS_U32: {
        uint32_t u = (uint32_t)v;
        memcpy(p + i * 4, &u, 4);
        return;
    }
    case GS_S64: case GS_U64: memcpy(p + i * 8, &v, 8); return;
    default: gs_elem_set_f(base, t, i, (double)v); return;
    }
}

void gs_elem_set_f(void *base, gs_type t, int64_t i, double v) {
    unsigned char *p = base;
    switch (t) {
    case GS_F32: {
        float f = (float)v;
        memcpy(p + i * 4, &f, 4);
        return;
    }
    case GS_F64: memcpy(p + i * 8, &v, 8); return;
    case GS_BF16: case GS_F16: {
        uint16_t b = gs_narrow_from_double(t, v);
        memcpy(p + i * 2, &b, 2);
        return;
    }
    case GS_C64: case GS_C128: gs_elem_set_c(base, t, i, v, 0); return;
    default:
        if (gs_type_is_float(t)) {
            p[i] = (unsigned char)gs_narrow_from_double(t, v);
            return;
        }
        /* float -> integer: saturate like XLA's convert; NaN -> 0. */
        if (isnan(v)) {
            gs_elem_set_i(base, t, i, 0);
            return;
        }
        if (t == GS_PRED) {
            p[i] = v != 0;
            return;
        }
        {
            int bits = gs_type_bits(t);
            double lo, hi;
            if (gs_type_is_signed_int(t)) {
                lo = -ldexp(1.0, bits - 1);
                hi = ldexp(1.0, bits - 1) - 1;
            } else {
                lo = 0;
                hi = ldexp(1.0, bits) - 1;
            }
            if (v <= lo) {
                gs_elem_set_i(base, t, i, gs_type_is_signed_int(t) ? (bits == 64 ? INT64_MIN : (int64_t)lo) : 0);
            } else if (v >= hi) {
                if (t == GS_U64)
                    gs_elem_set_i(base, t, i, (int64_t)UINT64_MAX);
                else if (t == GS_S64)
                    gs_elem_set_i(base, t, i, INT64_MAX);
                else
                    gs_elem_set_i(base, t, i, (int64_t)hi);
            } else if (t == GS_U64) {
                gs_elem_set_i(base, t, i, (int64_t)(uint64_t)v);
            } else {
                gs_elem_set_i(base, t, i, (int64_t)v);
            }
        }
        return;
    }
}

void gs_elem_set_c(void *base, gs_type t, int64_t i, double re, double im) {
    unsigned char *p = base;
    if (t == GS_C64) {
        float f[2] = {(float)re, (float)im};
        memcpy(p + i * 8, f, 8);
    } else if (t == GS_C128) {
        double d[2] = {re, im};
        memcpy(p + i * 16, d, 16);
    } else {
        gs_elem_set_f(base, t, i, re);
    }
}
