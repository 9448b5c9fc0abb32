/*
 * tables.c — element types, the op table (ops.def) and the attribute table (attrs.def) as
 * data, with lookups by name.
 */
#include "gspmd/ir.h"
#include "base/internal.h"

#include <string.h>

typedef struct type_info {
    const char *name;
    int size; /* bytes per stored element */
    int bits; /* XLA bit width */
} type_info;

static const type_info TYPES[GS_N_TYPES] = {
    [GS_INVALID_TYPE] = {"invalid", 0, 0},
    [GS_PRED] = {"pred", 1, 1},
    [GS_S2] = {"s2", 1, 2},
    [GS_S4] = {"s4", 1, 4},
    [GS_S8] = {"s8", 1, 8},
    [GS_S16] = {"s16", 2, 16},
    [GS_S32] = {"s32", 4, 32},
    [GS_S64] = {"s64", 8, 64},
    [GS_U2] = {"u2", 1, 2},
    [GS_U4] = {"u4", 1, 4},
    [GS_U8] = {"u8", 1, 8},
    [GS_U16] = {"u16", 2, 16},
    [GS_U32] = {"u32", 4, 32},
    [GS_U64] = {"u64", 8, 64},
    [GS_F16] = {"f16", 2, 16},
    [GS_BF16] = {"bf16", 2, 16},
    [GS_F32] = {"f32", 4, 32},
    [GS_F64] = {"f64", 8, 64},
    [GS_C64] = {"c64", 8, 64},
    [GS_C128] = {"c128", 16, 128},
    [GS_F8E5M2] = {"f8e5m2", 1, 8},
    [GS_F8E4M3FN] = {"f8e4m3fn", 1, 8},
    [GS_F8E4M3B11FNUZ] = {"f8e4m3b11fnuz", 1, 8},
    [GS_F8E5M2FNUZ] = {"f8e5m2fnuz", 1, 8},
    [GS_F8E4M3FNUZ] = {"f8e4m3fnuz", 1, 8},
    [GS_F8E4M3] = {"f8e4m3", 1, 8},
    [GS_F8E3M4] = {"f8e3m4", 1, 8},
    [GS_F8E8M0FNU] = {"f8e8m0fnu", 1, 8},
    [GS_F4E2M1FN] = {"f4e2m1fn", 1, 4},
    [GS_TOKEN] = {"token", 0, 0},
    [GS_TUPLE] = {"tuple", 0, 0},
};

/* Is a table's name s[0..n)? (The first character rules out most names before strlen.) */
static bool name_is(const char *name, const char *s, size_t n) {
    return (n == 0 || name[0] == s[0]) && strlen(name) == n && memcmp(name, s, n) == 0;
}

const char *gs_type_name(gs_type t) {
    return (unsigned)t < GS_N_TYPES ? TYPES[t].name : "invalid";
}

gs_type gs_type_from_name(const char *s, size_t n) {
    for (int t = 1; t < GS_N_TYPES; t++) {
        if (t == GS_TUPLE) continue;
        if (name_is(TYPES[t].name, s, n)) return (gs_type)t;
    }
    return GS_INVALID_TYPE;
}

int gs_type_size(gs_type t) { return (unsigned)t < GS_N_TYPES ? TYPES[t].size : 0; }
int gs_type_bits(gs_type t) { return (unsigned)t < GS_N_TYPES ? TYPES[t].bits : 0; }

bool gs_type_is_float(gs_type t) {
    return t == GS_F16 || t == GS_BF16 || t == GS_F32 || t == GS_F64 ||
           (t >= GS_F8E5M2 && t <= GS_F4E2M1FN);
}
bool gs_type_is_complex(gs_type t) { return t == GS_C64 || t == GS_C128; }
bool gs_type_is_signed_int(gs_type t) { return t >= GS_S2 && t <= GS_S64; }
bool gs_type_is_unsigned_int(gs_type t) { return t >= GS_U2 && t <= GS_U64; }
bool gs_type_is_int(gs_type t) { return gs_type_is_signed_int(t) || gs_type_is_unsigned_int(t); }
bool gs_type_is_array(gs_type t) { return t > GS_INVALID_TYPE && t < GS_TOKEN; }

static const gs_op_info OPS[GS_N_OPCODES] = {
#define GS_OP(e, text, lo, hi, fam, flags) [GS_OP_##e] = {text, lo, hi, GS_FAM_##fam, flags},
#include "gspmd/ops.def"
#undef GS_OP
};

const gs_op_info *gs_op_info_of(gs_opcode op) {
    GS_ASSERT((unsigned)op < GS_N_OPCODES);
    return &OPS[op];
}

const char *gs_op_name(gs_opcode op) { return gs_op_info_of(op)->name; }

int gs_op_from_name(const char *s, size_t n) {
    for (int i = 0; i < GS_N_OPCODES; i++)
        if (name_is(OPS[i].name, s, n)) return i;
    return -1;
}

static const char *const FAMILIES[GS_N_FAMILIES] = {
    "parameter", "constant", "iota", "unary", "binary", "ternary", "compare", "convert",
    "broadcast", "reshape", "transpose", "reverse", "slice", "dynamic-slice",
    "dynamic-update-slice", "concatenate", "pad", "dot", "convolution", "reduce",
    "reduce-window", "select-and-scatter", "gather", "scatter", "sort", "topk", "fft", "map",
    "scan", "while", "conditional", "call", "tuple", "get-tuple-element", "copy", "custom-call",
    "batch-norm", "rng", "id", "collective", "async", "token", "dynamic-shape", "linalg", "other",
};

const char *gs_op_family_name(gs_op_family f) {
    return (unsigned)f < GS_N_FAMILIES ? FAMILIES[f] : "?";
}

bool gs_op_family_moves_data(gs_op_family f) {
    switch (f) {
    case GS_FAM_BROADCAST:
    case GS_FAM_RESHAPE:
    case GS_FAM_TRANSPOSE:
    case GS_FAM_REVERSE:
    case GS_FAM_SLICE:
    case GS_FAM_DYNAMIC_SLICE:
    case GS_FAM_DYNAMIC_UPDATE_SLICE:
    case GS_FAM_CONCATENATE:
    case GS_FAM_PAD: return true;
    default: return false;
    }
}

typedef struct attr_info {
    const char *name;
    gs_attr_kind kind;
} attr_info;

static const attr_info ATTRS[GS_N_ATTRS] = {
#define GS_ATTR(e, text, kind) [GS_ATTR_##e] = {text, GS_AK_##kind},
#include "gspmd/attrs.def"
#undef GS_ATTR
};

const char *gs_attr_name(gs_attr_key k) { return (unsigned)k < GS_N_ATTRS ? ATTRS[k].name : "?"; }

gs_attr_kind gs_attr_kind_of(gs_attr_key k) {
    return (unsigned)k < GS_N_ATTRS ? ATTRS[k].kind : GS_AK_RAW;
}

gs_attr_key gs_attr_from_name(const char *s, size_t n) {
    for (int i = 0; i < GS_N_ATTRS; i++)
        if (name_is(ATTRS[i].name, s, n)) return (gs_attr_key)i;
    return GS_ATTR_UNKNOWN;
}
