/*
 * gspmd/ir.h — the HLO intermediate representation: element types, shapes, attributes,
 * instructions, computations and modules, as XLA defines them.
 *
 * A gs_module owns one arena; every object reachable from it lives there. A module holds
 * computations in the order they were written (callees usually first, the entry last); a
 * computation holds its instructions in order, each with its operands (pointers into the same
 * computation), its decoded attributes (gs_attr, see attrs.def) and the span of the text it came
 * from. The op table (ops.def) and the attribute table (attrs.def) drive everything that
 * dispatches on opcodes or attributes.
 */
#ifndef GSPMD_IR_H
#define GSPMD_IR_H

#include "gspmd/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ element types */

/* XLA primitive types. GS_TUPLE and GS_TOKEN are not array element types. */
typedef enum gs_type {
    GS_INVALID_TYPE = 0,
    GS_PRED,
    GS_S2, GS_S4, GS_S8, GS_S16, GS_S32, GS_S64,
    GS_U2, GS_U4, GS_U8, GS_U16, GS_U32, GS_U64,
    GS_F16, GS_BF16, GS_F32, GS_F64,
    GS_C64, GS_C128,
    GS_F8E5M2, GS_F8E4M3FN, GS_F8E4M3B11FNUZ, GS_F8E5M2FNUZ, GS_F8E4M3FNUZ, GS_F8E4M3,
    GS_F8E3M4, GS_F8E8M0FNU, GS_F4E2M1FN,
    GS_TOKEN,
    GS_TUPLE,
    GS_N_TYPES
} gs_type;

/* "f32", "bf16", ... ; "tuple" for GS_TUPLE. */
const char *gs_type_name(gs_type t);
/* The type named by s[0..n), or GS_INVALID_TYPE. */
gs_type gs_type_from_name(const char *s, size_t n);
/* Bytes per element as gspmd stores it (sub-byte types take a byte; pred a byte). */
int gs_type_size(gs_type t);
/* Bit width as XLA defines it (pred 1, s4 4, f32 32...). */
int gs_type_bits(gs_type t);
bool gs_type_is_float(gs_type t);   /* f16 bf16 f32 f64 and the f8/f4 types */
bool gs_type_is_complex(gs_type t); /* c64 c128 */
bool gs_type_is_signed_int(gs_type t);
bool gs_type_is_unsigned_int(gs_type t);
bool gs_type_is_int(gs_type t); /* signed or unsigned integer, not pred */
bool gs_type_is_array(gs_type t); /* an element type of arrays (not token, not tuple) */

/* ------------------------------------------------------------------ shapes */

enum { GS_MAX_RANK = 32 };

/* An array shape, a tuple shape or a token. Shapes live in the module arena and are treated as
 * immutable once built. */
typedef struct gs_shape gs_shape;
struct gs_shape {
    gs_type type;          /* element type, GS_TUPLE or GS_TOKEN */
    int rank;              /* number of dims (arrays) */
    int64_t *dims;         /* rank sizes (the bound, for dynamic dims; -1: unbounded, `?`) */
    bool *dynamic;         /* rank flags: dim written `<=N` or `?`; NULL when none is dynamic */
    bool has_layout;       /* a layout was written */
    int64_t *minor_to_major; /* rank entries when has_layout and n_minor_to_major == rank */
    int n_minor_to_major;  /* entries written in the layout (rank, or 0 in `{:T(256)}`) */
    const char *layout_extra; /* layout text after ':' (tiles, memory space), or NULL */
    int n_tuple;           /* number of elements (tuples) */
    gs_shape **tuple;      /* n_tuple element shapes (tuples) */
};

/* Shapes built in an arena. Dims are copied. NULL on allocation failure. */
gs_shape *gs_shape_array(gs_arena *a, gs_type type, int rank, const int64_t *dims);
gs_shape *gs_shape_scalar(gs_arena *a, gs_type type);
gs_shape *gs_shape_tuple(gs_arena *a, int n, gs_shape *const *elems);
gs_shape *gs_shape_token(gs_arena *a);
/* Deep copy into arena a. */
gs_shape *gs_shape_clone(gs_arena *a, const gs_shape *s);
/* Copy with another element type (arrays). */
gs_shape *gs_shape_with_type(gs_arena *a, const gs_shape *s, gs_type type);

bool gs_shape_is_array(const gs_shape *s);
bool gs_shape_is_tuple(const gs_shape *s);
/* Number of elements of an array shape (1 for a scalar). */
int64_t gs_shape_elements(const gs_shape *s);
/* Bytes of an array shape's data, or of all leaves of a tuple. */
int64_t gs_shape_bytes(const gs_shape *s);
/* Same element type and dims (and tuple structure); layouts ignored. */
bool gs_shape_equal(const gs_shape *a, const gs_shape *b);
/* Same dims, any element type. */
bool gs_shape_same_dims(const gs_shape *a, const gs_shape *b);
/* The shape at a tuple index path, or NULL when the path leaves the tree. */
const gs_shape *gs_shape_subshape(const gs_shape *s, int n_index, const int64_t *index);
/* Number of array leaves (an array is one leaf). */
int gs_shape_n_leaves(const gs_shape *s);
/* Appends the shape's text (`f32[2,3]{1,0}`, `(f32[], s32[2])`) to sb. */
void gs_shape_print(gs_sb *sb, const gs_shape *s, bool with_layout);
/* The shape's text, allocated in arena a (NULL on allocation failure). */
char *gs_shape_to_string(gs_arena *a, const gs_shape *s);

/* ------------------------------------------------------------------ opcodes */

#define GS_OPF_ELEMENTWISE (1u << 0)  /* result element i depends only on operand elements i */
#define GS_OPF_SIDE_EFFECT (1u << 1)  /* must not be removed or duplicated */
#define GS_OPF_COLLECTIVE (1u << 2)   /* communicates between devices */
#define GS_OPF_ASYNC_START (1u << 3)  /* the start half of an asynchronous pair */
#define GS_OPF_ASYNC_DONE (1u << 4)   /* the done half */

typedef enum gs_op_family {
    GS_FAM_PARAMETER, GS_FAM_CONSTANT, GS_FAM_IOTA, GS_FAM_UNARY, GS_FAM_BINARY, GS_FAM_TERNARY,
    GS_FAM_COMPARE, GS_FAM_CONVERT, GS_FAM_BROADCAST, GS_FAM_RESHAPE, GS_FAM_TRANSPOSE,
    GS_FAM_REVERSE, GS_FAM_SLICE, GS_FAM_DYNAMIC_SLICE, GS_FAM_DYNAMIC_UPDATE_SLICE,
    GS_FAM_CONCATENATE, GS_FAM_PAD, GS_FAM_DOT, GS_FAM_CONVOLUTION, GS_FAM_REDUCE,
    GS_FAM_REDUCE_WINDOW, GS_FAM_SELECT_AND_SCATTER, GS_FAM_GATHER, GS_FAM_SCATTER, GS_FAM_SORT,
    GS_FAM_TOPK, GS_FAM_FFT, GS_FAM_MAP, GS_FAM_SCAN, GS_FAM_WHILE, GS_FAM_CONDITIONAL,
    GS_FAM_CALL, GS_FAM_TUPLE, GS_FAM_GET_TUPLE_ELEMENT, GS_FAM_COPY, GS_FAM_CUSTOM_CALL,
    GS_FAM_BATCH_NORM, GS_FAM_RNG, GS_FAM_ID, GS_FAM_COLLECTIVE, GS_FAM_ASYNC, GS_FAM_TOKEN,
    GS_FAM_DYNAMIC_SHAPE, GS_FAM_LINALG, GS_FAM_OTHER,
    GS_N_FAMILIES
} gs_op_family;

typedef enum gs_opcode {
#define GS_OP(e, text, lo, hi, fam, flags) GS_OP_##e,
#include "gspmd/ops.def"
#undef GS_OP
    GS_N_OPCODES
} gs_opcode;

/* One row of ops.def. */
typedef struct gs_op_info {
    const char *name;    /* HLO text spelling */
    int min_operands;    /* fewest operands */
    int max_operands;    /* most operands, -1 = any */
    gs_op_family family; /* kernel / rule / handler family */
    unsigned flags;      /* GS_OPF_* */
} gs_op_info;

const gs_op_info *gs_op_info_of(gs_opcode op);
const char *gs_op_name(gs_opcode op);
/* The opcode spelled s[0..n), or -1. */
int gs_op_from_name(const char *s, size_t n);
const char *gs_op_family_name(gs_op_family f);
/* Does family f only move its operands' elements: broadcast, reshape, transpose, reverse, slice,
 * dynamic-slice, dynamic-update-slice, concatenate, pad (each result element is an operand
 * element or the padding value, of the operand's type)? */
bool gs_op_family_moves_data(gs_op_family f);

/* ------------------------------------------------------------------ attributes */

typedef enum gs_attr_kind {
    GS_AK_INT, GS_AK_INTS, GS_AK_BOOL, GS_AK_FLOAT, GS_AK_IDENT, GS_AK_STRING, GS_AK_COMP,
    GS_AK_COMPS, GS_AK_SLICE, GS_AK_WINDOW, GS_AK_CONV_DIMS, GS_AK_PADDING, GS_AK_GROUPS,
    GS_AK_PAIRS, GS_AK_SHARDING, GS_AK_RAW
} gs_attr_kind;

typedef enum gs_attr_key {
#define GS_ATTR(e, text, kind) GS_ATTR_##e,
#include "gspmd/attrs.def"
#undef GS_ATTR
    GS_N_ATTRS,
    GS_ATTR_UNKNOWN = GS_N_ATTRS /* an attribute gspmd keeps as raw text under its name */
} gs_attr_key;

const char *gs_attr_name(gs_attr_key k);
gs_attr_kind gs_attr_kind_of(gs_attr_key k);
/* The key named s[0..n), or GS_ATTR_UNKNOWN. */
gs_attr_key gs_attr_from_name(const char *s, size_t n);

typedef struct gs_computation gs_computation;
typedef struct gs_instr gs_instr;
typedef struct gs_module gs_module;
typedef struct gs_sharding gs_sharding; /* see gspmd/sharding.h */
typedef struct gs_mesh_table gs_mesh_table; /* see gspmd/sharding.h */

/* A list of integers. */
typedef struct gs_ints {
    int n;
    const int64_t *v;
} gs_ints;

/* The index of the first x in v, or -1 when v does not hold it. */
int gs_ints_index(gs_ints v, int64_t x);
/* Does v hold x? */
bool gs_ints_contains(gs_ints v, int64_t x);

/* One dimension of slice={[start:limit:stride]}. */
typedef struct gs_slice_dim {
    int64_t start, limit, stride;
} gs_slice_dim;

/* One dimension of a window. Unwritten fields take XLA's defaults (stride, dilations 1). */
typedef struct gs_window_dim {
    int64_t size, stride, pad_lo, pad_hi, lhs_dilate, rhs_dilate;
    bool reversal;
} gs_window_dim;

/* window={...}: one entry per spatial dim. The printer writes the fields XLA writes (size always,
 * the others only when some dim differs from the default). */
typedef struct gs_window {
    int n;
    gs_window_dim *dims;
} gs_window;

/* dim_labels=b01f_01io->b01f. Spatial dims in order of their digit. */
typedef struct gs_conv_dims {
    int n_spatial;
    int64_t in_batch, in_feature, *in_spatial;
    int64_t k_in_feature, k_out_feature, *k_spatial;
    int64_t out_batch, out_feature, *out_spatial;
    int in_rank, k_rank, out_rank; /* ranks the labels describe */
} gs_conv_dims;

/* pad's padding=lo_hi[_interior]x... per dim. */
typedef struct gs_pad_dim {
    int64_t lo, hi, interior;
} gs_pad_dim;
typedef struct gs_padding {
    int n;
    gs_pad_dim *dims;
} gs_padding;

/* replica_groups. Either explicit lists, or XLA's iota form: n_groups groups of group_size
 * devices obtained by reshaping iota(prod(iota_dims)) to iota_dims, transposing by perm, and
 * reshaping to [n_groups, group_size]. The iota form is never expanded in the IR (it stays
 * O(rank) at any device count); gs_replica_groups_device reads one entry of either form. */
typedef struct gs_replica_groups {
    int n_groups;         /* number of groups (0: one group of all devices) */
    int group_size;       /* size of every group when all are equal, else -1 */
    int *sizes;           /* explicit form: n_groups sizes */
    int64_t **groups;     /* explicit form: n_groups lists of device ids */
    bool is_iota;         /* iota form */
    int n_iota_dims;      /* iota form: reshape dims */
    int64_t *iota_dims;
    int *perm;            /* iota form: transpose perm, NULL when none */
} gs_replica_groups;

/* Device number idx of group `group` (both forms), in O(rank). */
int64_t gs_replica_groups_device(const gs_replica_groups *g, int group, int idx);
/* Size of group `group`. */
int gs_replica_groups_size(const gs_replica_groups *g, int group);

/* source_target_pairs. */
typedef struct gs_pairs {
    int n;
    int64_t (*v)[2];
} gs_pairs;

/* One decoded attribute of an instruction. */
typedef struct gs_attr {
    gs_attr_key key;  /* which attribute; GS_ATTR_UNKNOWN keeps `name` */
    const char *name; /* its text name (always set) */
    bool braced;      /* COMPS: written as {..} rather than a single name */
    union {
        int64_t i;                 /* INT */
        bool b;                    /* BOOL */
        double f;                  /* FLOAT */
        const char *s;             /* IDENT, STRING (unescaped), RAW (text) */
        gs_ints ints;              /* INTS */
        gs_computation *comp;      /* COMP */
        struct {
            int n;
            gs_computation **v;
        } comps;                   /* COMPS */
        struct {
            int n;
            gs_slice_dim *v;
        } slice;                   /* SLICE */
        gs_window *window;         /* WINDOW */
        gs_conv_dims *conv;        /* CONV_DIMS */
        gs_padding *padding;       /* PADDING */
        gs_replica_groups *groups; /* GROUPS */
        gs_pairs pairs;            /* PAIRS */
        const gs_sharding *sharding; /* SHARDING */
    } u;
    const char *text; /* FLOAT: the number as written; STRING/IDENT use u.s */
} gs_attr;

/* ------------------------------------------------------------------ literals (constants) */

/* The value of a constant instruction, stored row-major in the element type's native layout
 * (bf16/f16 as 16-bit patterns, pred as one byte, c64 as two floats). Tuples hold elements. */
typedef struct gs_literal_ir {
    bool elided;         /* written as {...}: values unknown */
    size_t n_bytes;      /* bytes of data */
    void *data;          /* array data, in the module arena */
    int n_tuple;         /* tuple literal elements */
    struct gs_literal_ir **tuple;
} gs_literal_ir;

/* ------------------------------------------------------------------ instructions */

struct gs_instr {
    const char *name;        /* unique within the module */
    gs_opcode op;            /* the opcode */
    const char *op_text;     /* spelling when it differs from the table (e.g. negate-start as an
                                async-start wrapping negate); NULL otherwise */
    gs_shape *shape;         /* result shape */
    int n_operands;
    gs_instr **operands;     /* in the same computation */
    int n_attrs;
    gs_attr *attrs;          /* decoded attributes, in canonical print order */
    int64_t parameter_number; /* parameter: its number */
    gs_literal_ir *literal;  /* constant: its value */
    gs_computation *parent;  /* the computation holding it */
    bool is_root;            /* the computation's root */
    int id;                  /* position in parent->instrs */
    gs_span span;            /* where its text starts (the name) */
    void *aux;               /* scratch pointer for passes; owned by whoever sets it */
};

struct gs_computation {
    const char *name;       /* unique within the module */
    bool is_entry;          /* the ENTRY computation */
    int n_instrs;
    gs_instr **instrs;      /* in text order */
    gs_instr *root;         /* the ROOT (the last instruction when none is marked) */
    int n_params;
    gs_instr **params;      /* by parameter number */
    const char *execution_thread; /* `}, execution_thread="..."`, or NULL */
    gs_module *module;
    gs_span span;
    const char *symbol;     /* StableHLO input: the function's name as written (`main` for
                               `@main`); NULL for regions and HLO computations */
    bool is_private;        /* StableHLO input: the function was declared `private` */
    int symbol_order;       /* StableHLO input: its place among the functions as MLIR prints
                               them (the order written; Shardy's export puts the functions it
                               makes after) */
};

/* A module header attribute kept as text (`num_partitions=8`). */
typedef struct gs_module_attr {
    const char *name;
    const char *text;
} gs_module_attr;

struct gs_module {
    gs_arena arena;         /* owns everything below */
    const char *name;
    int n_attrs;
    gs_module_attr *attrs;  /* header attributes in order */
    int64_t num_partitions; /* from the header (1 when absent) */
    int64_t replica_count;  /* from the header (1 when absent) */
    const char *stack_frames; /* FileNames/FunctionNames/FileLocations/StackFrames text, or NULL */
    int n_comps;
    gs_computation **comps; /* in text order */
    gs_computation *entry;
    const gs_source *source; /* the text it was parsed from, or NULL; not owned */
    /* What a StableHLO input declared beyond HLO's model, so that it prints back as written
     * (all NULL/false for HLO text): */
    const gs_mesh_table *meshes; /* its `sdy.mesh @NAME = <...>`s in order (in the arena), or
                                    NULL when it declares none */
    bool mlir_module_op;    /* the text had a `module` op (else bare functions) */
    const char *mlir_symbol; /* that op's `@name` as written, or NULL */
    const char *mlir_attrs; /* that op's attribute dictionary as written (`{...}`), or NULL */
};

/* ------------------------------------------------------------------ queries */

/* The attribute with key k, or NULL. For GS_ATTR_UNKNOWN use gs_instr_attr_named. */
const gs_attr *gs_instr_attr(const gs_instr *in, gs_attr_key k);
const gs_attr *gs_instr_attr_named(const gs_instr *in, const char *name);
/* INTS attribute k, or an empty list. */
gs_ints gs_instr_ints(const gs_instr *in, gs_attr_key k);
/* INT attribute k, or def. */
int64_t gs_instr_int(const gs_instr *in, gs_attr_key k, int64_t def);
/* BOOL attribute k, or def. */
bool gs_instr_bool(const gs_instr *in, gs_attr_key k, bool def);
/* IDENT/STRING/RAW attribute k's text, or NULL. */
const char *gs_instr_str(const gs_instr *in, gs_attr_key k);
/* The integer `key` of a backend_config written as XLA's partitioner writes its internal ops'
 * ("dimension=0,amount=2"); false when absent or not an integer. */
bool gs_instr_config_int(const gs_instr *in, const char *key, int64_t *v);
/* Is in Shardy's sharding group marker as XLA keeps it (a custom-call
 * `xla.sdy.ShardingGroup` of one operand, frontend_attributes={xla.sdy.sharding_group_id="N"})?
 * Sets *id to N. */
bool gs_instr_sharding_group(const gs_instr *in, int64_t *id);
/* Is constant in Shardy's `sdy.constant` (frontend_attributes={xla.sdy.constant="true"}, as
 * XLA keeps it)? */
bool gs_instr_is_sdy_constant(const gs_instr *in);
/* Marks constant in as `sdy.constant`, keeping its other frontend attributes. */
gs_status gs_instr_mark_sdy_constant(gs_module *m, gs_instr *in);
/* COMP attribute k (or the first of COMPS), or NULL. */
gs_computation *gs_instr_comp(const gs_instr *in, gs_attr_key k);
/* The instruction's sharding, or NULL when it has none. */
const gs_sharding *gs_instr_get_sharding(const gs_instr *in);
/* Sets (or with s NULL removes) the instruction's sharding; the sharding must live as long as
 * the module (allocate it in the module's arena). GS_ERR on allocation failure. */
gs_status gs_instr_set_sharding(gs_module *m, gs_instr *in, const gs_sharding *s);
/* Inserts attribute a (replacing one with the same key, or the same name for unknown ones) at
 * its canonical print position. The attribute's values must live in m's arena. */
gs_status gs_instr_set_attr(gs_module *m, gs_instr *in, const gs_attr *a);
/* Canonical print position of an attribute key: attrs.def order, unknown (raw) attributes just
 * before the called computations. */
int gs_attr_print_rank(gs_attr_key k);

/* Every computation the instruction calls, in attribute order. Returns the count; fills up to
 * max entries of out. */
int gs_instr_called(const gs_instr *in, gs_computation **out, int max);

/* Is c a reducer made of one binary op on its two scalar parameters (in either order), of one
 * element type, that reductions can apply directly: add, multiply, maximum or minimum (not on
 * complex), and, or, xor (integers and pred)? Sets *op. */
bool gs_computation_binary_reducer(const gs_computation *c, gs_opcode *op);

/* The computation named name, or NULL. */
gs_computation *gs_module_find_comp(const gs_module *m, const char *name);
/* The instruction named name in any computation, or NULL (linear search). */
gs_instr *gs_module_find_instr(const gs_module *m, const char *name);
/* The device count the module declares (`num_partitions=N` in an HLO header, or
 * `mhlo.num_partitions = N` on an MLIR module), or 0 when it declares none. */
int64_t gs_module_declared_partitions(const gs_module *m);
/* The module's input_output_alias (`{i}: (p, {}, may-alias)` entries): out_param[i] = the
 * entry parameter that output i of the root tuple updates (a training step's state), -1 for
 * an output nothing aliases; n_out outputs (the root tuple's, or 1 for a root that is not a
 * tuple, whose index is `{}`). Nested output or parameter indices are not supported. A located
 * error (GS_ERR) for malformed text, an index out of range, a parameter aliased twice, or an
 * output whose size in bytes is not its parameter's (XLA reuses the buffer: a reshape may
 * alias). */
gs_status gs_module_output_aliases(const gs_module *m, int *out_param, int n_out, gs_diags *d);
/* Frees the module and its arena. */
void gs_module_free(gs_module *m);

/* ------------------------------------------------------------------ verifier */

/* Checks every instruction's operand count, operand and result shapes and attributes against
 * its op's rules (XLA's shape inference). Appends a located error per problem found. */
gs_status gs_module_verify(const gs_module *m, gs_diags *d);

/* Checks that no instruction's shape has an unbounded dynamic dim (`?`): the verifier and
 * propagation accept them, but partitioning and running need every size. `what` names the
 * stage for the message ("partitioning"). Appends a located error for the first one found. */
gs_status gs_module_check_bounded(const gs_module *m, const char *what, gs_diags *d);

/* XLA's shape inference for `in` from its opcode, operands' shapes, attributes and called
 * computations (in->shape is not read). On success *out is the inferred shape (allocated in a),
 * or NULL when the op's result shape cannot be inferred and must be written (broadcast, reshape,
 * convert, iota, constant, parameter, custom-call, rng ...). On invalid operands or attributes
 * returns GS_ERR with an error located at in->span naming the instruction. */
gs_status gs_infer_shape(gs_arena *a, const gs_instr *in, gs_shape **out, gs_diags *d);

/* ------------------------------------------------------------------ building */

/* A new empty module named name. NULL on allocation failure. */
gs_module *gs_module_new(const char *name);
/* A new computation appended to m. */
gs_computation *gs_computation_new(gs_module *m, const char *name);
/* Appends instruction `in` (allocated in m's arena) to c, setting parent and id. */
gs_status gs_computation_append(gs_computation *c, gs_instr *in);

/* XLA's FlattenCallGraph (src/ir/flatten.c): every computation run as a program (call, fusion,
 * while body and condition, conditional branch) gets a single call site, cloned (with fresh
 * names, `NAME.flatN`) for each further one. Reducers and comparators stay shared. */
gs_status gs_module_flatten_calls(gs_module *m, gs_diags *d);

#ifdef __cplusplus
}
#endif
#endif /* GSPMD_IR_H */
