/*
 * src/mlir/ops.c — StableHLO ops into gspmd instructions: each `stablehlo.*` op (pretty or
 * generic form) maps to the opcode and attributes the HLO parser would produce for the same op
 * (dimension numbers, comparison directions, slices, windows, ...); `check.*` custom-calls become
 * the interpreter's checks; `call @f` becomes `call`; reduce regions and `applies` forms become
 * computations; `chlo.*` ops are handed to chlo.c, which decomposes them.
 */
#include "mlir/internal.h"
#include "gspmd/sharding.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ ops */

/* The opcode of stablehlo.NAME (without the dialect), or -1. */
static int opcode_of(const char *name) {
    static const struct {
        const char *mlir;
        gs_opcode op;
    } RENAMES[] = {
        {"broadcast_in_dim", GS_OP_BROADCAST},
        {"dot_general", GS_OP_DOT},
        {"dot", GS_OP_DOT},
        {"count_leading_zeros", GS_OP_CLZ},
        {"get_tuple_element", GS_OP_GET_TUPLE_ELEMENT},
        {"optimization_barrier", GS_OP_OPTIMIZATION_BARRIER},
    };
    for (size_t i = 0; i < sizeof RENAMES / sizeof RENAMES[0]; i++)
        if (strcmp(RENAMES[i].mlir, name) == 0) return (int)RENAMES[i].op;
    char buf[64];
    size_t n = strlen(name);
    if (n >= sizeof buf) return -1;
    for (size_t i = 0; i <= n; i++) buf[i] = name[i] == '_' ? '-' : name[i];
    int op = gs_op_from_name(buf, n);
    /* ops whose HLO spelling means something else, or that need more than a rename */
    if (op == GS_OP_BROADCAST || op == GS_OP_DOT || op == GS_OP_CUSTOM_CALL || op == GS_OP_CALL ||
        op == GS_OP_PARAMETER || op == GS_OP_CONSTANT || op == GS_OP_FUSION || op == GS_OP_MAP)
        return -1;
    return op;
}

/* Sets attribute key k (INTS) from integers. */
static void set_ints(reader *r, gs_instr *in, gs_attr_key k, int n, const int64_t *v) {
    gs_build_set_ints(&r->b, in, k, n, v);
}

/* The integers of a `dense<...> : tensor<...xi64>` attribute value (at most max). */
static bool dense_ints(reader *r, const kv *k, int64_t *v, int max, int *n, size_t op_pos) {
    if (!k->dense_pos || !gs_shape_is_array(k->dense_type) || k->dense_type->type != GS_S64 ||
        gs_shape_elements(k->dense_type) > max)
        return mlir_fail_at(r, op_pos, "%s must be a dense i64 tensor of at most %d elements",
                            k->key, max);
    size_t save = r->pos;
    r->pos = k->dense_pos + 5;
    mlir_skip_ws(r);
    r->pos++;
    gs_literal_ir *lit;
    bool ok = mlir_parse_dense_body(r, k->dense_type, &lit);
    r->pos = save;
    if (!ok) return false;
    *n = (int)gs_shape_elements(k->dense_type);
    memcpy(v, lit->data, (size_t)*n * sizeof *v);
    return true;
}

/* window={...} from reduce_window's and select_and_scatter's window_dimensions, window_strides,
 * base_dilations, window_dilations and padding (an Nx2 dense tensor of low, high). */
static bool set_window(reader *r, gs_instr *in, const gs_vec *kvs, size_t op_pos) {
    const kv *size = mlir_find_kv(kvs, "window_dimensions");
    if (!size) return mlir_fail_at(r, op_pos, "the op needs window_dimensions");
    static const char *const FIELDS[] = {"window_strides", "base_dilations", "window_dilations"};
    const kv *f[3];
    for (int i = 0; i < 3; i++) {
        f[i] = mlir_find_kv(kvs, FIELDS[i]);
        if (f[i] && f[i]->n_a != size->n_a)
            return mlir_fail_at(r, op_pos, "%s has %d dimensions, window_dimensions %d", FIELDS[i],
                                f[i]->n_a, size->n_a);
    }
    int64_t pad[2 * GS_MAX_RANK];
    int n_pad = 0;
    const kv *padding = mlir_find_kv(kvs, "padding");
    if (padding) {
        if (!dense_ints(r, padding, pad, 2 * GS_MAX_RANK, &n_pad, op_pos)) return false;
        if (n_pad != 2 * size->n_a)
            return mlir_fail_at(r, op_pos, "padding needs a (low, high) pair per window dimension");
    }
    gs_window *w = GS_NEW(r->a, gs_window);
    if (!w || !(w->dims = GS_NEW_ARRAY(r->a, gs_window_dim, size->n_a ? size->n_a : 1)))
        return mlir_oom(r);
    w->n = size->n_a;
    for (int i = 0; i < w->n; i++) {
        gs_window_dim *d = &w->dims[i];
        *d = (gs_window_dim){.size = size->a[i],
                             .stride = f[0] ? f[0]->a[i] : 1,
                             .pad_lo = padding ? pad[2 * i] : 0,
                             .pad_hi = padding ? pad[2 * i + 1] : 0,
                             .lhs_dilate = f[1] ? f[1]->a[i] : 1,
                             .rhs_dilate = f[2] ? f[2]->a[i] : 1};
        if (d->size < 0 || d->stride < 1 || d->lhs_dilate < 1 || d->rhs_dilate < 1)
            return mlir_fail_at(
                r, op_pos, "window dimension %d has a non-positive size, stride or dilation", i);
    }
    gs_attr at = {.key = GS_ATTR_WINDOW, .name = "window"};
    at.u.window = w;
    return gs_instr_set_attr(r->m, in, &at) == GS_OK || mlir_oom(r);
}

/* One `[b, 0, 1, f]` part of a convolution's dim_numbers: the positions of letters a and b
 * (batch/feature or input/output feature) and of each spatial dim (by its digit). */
static bool parse_conv_part(reader *r, char la, char lb, int64_t *pa, int64_t *pb, int64_t *sp,
                            int *n_sp, int *rank) {
    *pa = *pb = -1;
    *n_sp = *rank = 0;
    int64_t at_digit[GS_MAX_RANK];
    for (int i = 0; i < GS_MAX_RANK; i++) at_digit[i] = -1;
    if (!mlir_expect(r, '[', "opening convolution dimension numbers")) return false;
    do {
        mlir_skip_ws(r);
        char c = mlir_cur(r);
        if (*rank >= GS_MAX_RANK) return FAIL(r, "convolution dimension numbers too long");
        if (c == la && *pa < 0) {
            *pa = *rank;
        } else if (c == lb && *pb < 0) {
            *pb = *rank;
        } else if (c >= '0' && c < '0' + GS_MAX_RANK && at_digit[c - '0'] < 0) {
            at_digit[c - '0'] = *rank;
            (*n_sp)++;
        } else {
            return FAIL(r, "expected '%c', '%c' or a new spatial dimension, found %s", la, lb,
                        mlir_found(r));
        }
        r->pos++;
        (*rank)++;
    } while (mlir_accept(r, ','));
    if (!mlir_expect(r, ']', "closing convolution dimension numbers")) return false;
    if (*pa < 0 || *pb < 0)
        return FAIL(r, "convolution dimension numbers lack '%c' or '%c'", la, lb);
    for (int i = 0; i < *n_sp; i++) {
        if (at_digit[i] < 0)
            return FAIL(r, "convolution spatial dimensions are not 0..%d", *n_sp - 1);
        sp[i] = at_digit[i];
    }
    return true;
}

/* `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`: HLO's dim_labels=b01f_01io->b01f. */
static bool parse_conv_dims(reader *r, gs_conv_dims **out) {
    gs_conv_dims *c = GS_NEW(r->a, gs_conv_dims);
    int64_t sp[3][GS_MAX_RANK];
    int n_sp[3];
    if (!c) return mlir_oom(r);
    if (!parse_conv_part(r, 'b', 'f', &c->in_batch, &c->in_feature, sp[0], &n_sp[0], &c->in_rank))
        return false;
    mlir_skip_ws(r);
    if (mlir_cur(r) != 'x') return FAIL(r, "expected 'x' in dim_numbers, found %s", mlir_found(r));
    r->pos++;
    if (!parse_conv_part(r, 'i', 'o', &c->k_in_feature, &c->k_out_feature, sp[1], &n_sp[1],
                         &c->k_rank))
        return false;
    mlir_skip_ws(r);
    if (mlir_cur(r) != '-' || mlir_ahead(r, 1) != '>')
        return FAIL(r, "expected '->' in dim_numbers, found %s", mlir_found(r));
    r->pos += 2;
    if (!parse_conv_part(r, 'b', 'f', &c->out_batch, &c->out_feature, sp[2], &n_sp[2],
                         &c->out_rank))
        return false;
    if (n_sp[0] != n_sp[1] || n_sp[1] != n_sp[2])
        return FAIL(r, "dim_numbers parts have different numbers of spatial dimensions");
    int ns = c->n_spatial = n_sp[0];
    int64_t **dst[3] = {&c->in_spatial, &c->k_spatial, &c->out_spatial};
    for (int k = 0; k < 3; k++) {
        if (!(*dst[k] = GS_NEW_ARRAY(r->a, int64_t, ns ? ns : 1))) return mlir_oom(r);
        memcpy(*dst[k], sp[k], (size_t)ns * sizeof sp[k][0]);
    }
    *out = c;
    return true;
}

/* `{stride = [..], pad = [[lo, hi], ..], lhs_dilate = [..], rhs_dilate = [..], reverse = [..]}`
 * of a convolution with n spatial dimensions; the window's sizes are set later. */
/* A window of n dimensions with no stride, padding, dilation or reversal (sizes set later). */
static bool new_conv_window(reader *r, int n, gs_window **out) {
    gs_window *w = GS_NEW(r->a, gs_window);
    if (!w || !(w->dims = GS_NEW_ARRAY(r->a, gs_window_dim, n ? n : 1))) return mlir_oom(r);
    w->n = n;
    for (int i = 0; i < n; i++)
        w->dims[i] = (gs_window_dim){.stride = 1, .lhs_dilate = 1, .rhs_dilate = 1};
    *out = w;
    return true;
}

static bool parse_conv_window(reader *r, int n, gs_window **out) {
    if (!new_conv_window(r, n, out)) return false;
    gs_window *w = *out;
    if (!mlir_expect(r, '{', "opening the convolution window")) return false;
    if (mlir_accept(r, '}')) return true;
    do {
        const char *key;
        size_t key_pos = (mlir_skip_ws(r), r->pos);
        if (!mlir_parse_ident(r, &key, "a window field") ||
            !mlir_expect(r, '=', "after a window field"))
            return false;
        int64_t v[2 * GS_MAX_RANK];
        int nv = 0;
        if (strcmp(key, "pad") == 0) {
            if (!mlir_expect(r, '[', "opening the window padding")) return false;
            do {
                if (nv >= 2 * GS_MAX_RANK) return FAIL(r, "window padding too long");
                if (!mlir_expect(r, '[', "opening a (low, high) pair") ||
                    !mlir_parse_int(r, &v[nv], "a low padding") ||
                    !mlir_expect(r, ',', "in a (low, high) pair") ||
                    !mlir_parse_int(r, &v[nv + 1], "a high padding") ||
                    !mlir_expect(r, ']', "closing a (low, high) pair"))
                    return false;
                nv += 2;
            } while (mlir_accept(r, ','));
            if (!mlir_expect(r, ']', "closing the window padding")) return false;
            nv /= 2;
        } else {
            if (!mlir_expect(r, '[', "opening a window field")) return false;
            if (!mlir_accept(r, ']')) {
                do {
                    if (nv >= GS_MAX_RANK) return FAIL(r, "window field too long");
                    if (mlir_accept_word(r, "true")) {
                        v[nv++] = 1;
                    } else if (mlir_accept_word(r, "false")) {
                        v[nv++] = 0;
                    } else if (!mlir_parse_int(r, &v[nv++], "an integer")) {
                        return false;
                    }
                } while (mlir_accept(r, ','));
                if (!mlir_expect(r, ']', "closing a window field")) return false;
            }
        }
        if (nv != n)
            return mlir_fail_at(r, key_pos, "window field %s has %d dimensions, the convolution %d",
                                key, nv, n);
        for (int i = 0; i < n; i++) {
            gs_window_dim *d = &w->dims[i];
            if (strcmp(key, "pad") == 0) {
                d->pad_lo = v[2 * i];
                d->pad_hi = v[2 * i + 1];
            } else if (strcmp(key, "stride") == 0) {
                d->stride = v[i];
            } else if (strcmp(key, "lhs_dilate") == 0) {
                d->lhs_dilate = v[i];
            } else if (strcmp(key, "rhs_dilate") == 0) {
                d->rhs_dilate = v[i];
            } else if (strcmp(key, "reverse") == 0) {
                d->reversal = v[i] != 0;
            } else {
                return mlir_fail_at(r, key_pos, "unknown window field '%s'", key);
            }
            if (d->stride < 1 || d->lhs_dilate < 1 || d->rhs_dilate < 1)
                return mlir_fail_at(r, key_pos, "window dimension %d has a non-positive %s", i,
                                    key);
        }
    } while (mlir_accept(r, ','));
    return mlir_expect(r, '}', "closing the convolution window");
}

/* Sets a convolution's dim_labels and window (sizes from the kernel's spatial dims). */
static bool set_conv_attrs(reader *r, gs_instr *in, gs_conv_dims *c, gs_window *w, size_t op_pos) {
    if (in->n_operands != 2 || !gs_shape_is_array(in->operands[1]->shape) ||
        in->operands[0]->shape->rank != c->in_rank || in->operands[1]->shape->rank != c->k_rank ||
        !gs_shape_is_array(in->shape) || in->shape->rank != c->out_rank)
        return mlir_fail_at(r, op_pos, "convolution operands or result do not match dim_numbers");
    for (int i = 0; i < w->n; i++) w->dims[i].size = in->operands[1]->shape->dims[c->k_spatial[i]];
    gs_attr at = {.key = GS_ATTR_DIM_LABELS, .name = "dim_labels"};
    at.u.conv = c;
    gs_attr aw = {.key = GS_ATTR_WINDOW, .name = "window"};
    aw.u.window = w;
    if (gs_instr_set_attr(r->m, in, &at) != GS_OK || gs_instr_set_attr(r->m, in, &aw) != GS_OK)
        return mlir_oom(r);
    return true;
}

/* The attributes an op's key-value pairs give, named as the HLO parser names them. */
/* The integers of a 2-D `dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>` value: *rows x *cols. */
static bool dense_matrix(reader *r, const kv *k, int64_t **v, int64_t *rows, int64_t *cols) {
    const gs_shape *t = k->dense_type;
    if (!k->dense_pos || !t || !gs_shape_is_array(t) || t->rank != 2 || !gs_type_is_int(t->type))
        return mlir_fail_at(r, k->value_pos, "'%s' must be a 2-D dense integer tensor", k->key);
    size_t save = r->pos;
    r->pos = k->dense_pos + 5;
    mlir_skip_ws(r);
    r->pos++;
    gs_literal_ir *lit;
    bool ok = mlir_parse_dense_body(r, t, &lit);
    r->pos = save;
    if (!ok) return false;
    *rows = t->dims[0];
    *cols = t->dims[1];
    *v = GS_NEW_ARRAY(r->a, int64_t, *rows * *cols + 1);
    if (!*v) return mlir_oom(r);
    for (int64_t i = 0; i < *rows * *cols; i++) (*v)[i] = gs_elem_get_i(lit->data, t->type, i);
    return true;
}

/* A collective's attributes: replica_groups (rows of device ids, -1 padding), source_target_
 * pairs, channel_handle (flattened to `handle`), use_global_device_ids, and its dimension. */
static bool set_collective_attrs(reader *r, gs_instr *in, const gs_vec *kvs, size_t op_pos) {
    const kv *k;
    if ((k = mlir_find_kv(kvs, "replica_groups"))) {
        int64_t *v, rows, cols;
        if (!dense_matrix(r, k, &v, &rows, &cols)) return false;
        gs_replica_groups *g = GS_NEW(r->a, gs_replica_groups);
        if (!g || !(g->sizes = GS_NEW_ARRAY(r->a, int, rows + 1)) ||
            !(g->groups = GS_NEW_ARRAY(r->a, int64_t *, rows + 1)))
            return mlir_oom(r);
        g->n_groups = (int)rows;
        g->group_size = (int)cols;
        for (int64_t i = 0; i < rows; i++) {
            int n = 0;
            while (n < cols && v[i * cols + n] >= 0) n++;
            g->sizes[i] = n;
            g->groups[i] = v + i * cols;
            if (n != cols) g->group_size = -1;
        }
        if (rows == 1 && cols == 0) g->n_groups = 0;
        gs_build_set_groups(&r->b, in, g);
    }
    if ((k = mlir_find_kv(kvs, "source_target_pairs"))) {
        int64_t *v, rows, cols;
        if (!dense_matrix(r, k, &v, &rows, &cols)) return false;
        if (cols != 2 && rows)
            return mlir_fail_at(r, k->value_pos, "source_target_pairs must be N x 2");
        gs_attr at = {.key = GS_ATTR_SOURCE_TARGET_PAIRS, .name = "source_target_pairs"};
        at.u.pairs.n = (int)rows;
        at.u.pairs.v = (int64_t(*)[2])v;
        if (gs_instr_set_attr(r->m, in, &at) != GS_OK) return mlir_oom(r);
    }
    if ((k = mlir_find_kv(kvs, "handle")) && k->is_int && k->a[0] > 0)
        gs_build_set_int(&r->b, in, GS_ATTR_CHANNEL_ID, k->a[0]);
    if ((k = mlir_find_kv(kvs, "use_global_device_ids")) && (!k->is_int || k->a[0]))
        gs_build_set_bool(&r->b, in, GS_ATTR_USE_GLOBAL_DEVICE_IDS, true);
    const kv *dim = mlir_find_kv(kvs, "all_gather_dim");
    if (!dim) dim = mlir_find_kv(kvs, "scatter_dimension");
    const kv *split = mlir_find_kv(kvs, "split_dimension"),
             *concat = mlir_find_kv(kvs, "concat_dimension");
    if (split && concat && split->a[0] != concat->a[0] && in->n_operands != 1)
        return mlir_fail_at(r, op_pos,
                            "all_to_all of several operands with split_dimension %lld and "
                            "concat_dimension %lld is not supported yet",
                            (long long)split->a[0], (long long)concat->a[0]);
    if (!dim) dim = split; /* split != concat: build_op moves the chunks to concat */
    if (dim && dim->is_int) set_ints(r, in, GS_ATTR_DIMENSIONS, 1, dim->a);
    return true;
}

static bool apply_attrs(reader *r, gs_instr *in, const gs_vec *kvs, size_t op_pos) {
    if (gs_op_info_of(in->op)->family == GS_FAM_COLLECTIVE &&
        !set_collective_attrs(r, in, kvs, op_pos))
        return false;
    for (size_t i = 0; i < kvs->n; i++) {
        const kv *k = &GS_VEC_AT(kvs, kv, i);
        const char *key = k->key;
        if (in->op == GS_OP_DOT &&
            (strcmp(key, "batching_dims") == 0 || strcmp(key, "contracting_dims") == 0)) {
            bool batch = key[0] == 'b';
            set_ints(r, in, batch ? GS_ATTR_LHS_BATCH_DIMS : GS_ATTR_LHS_CONTRACTING_DIMS, k->n_a,
                     k->a);
            set_ints(r, in, batch ? GS_ATTR_RHS_BATCH_DIMS : GS_ATTR_RHS_CONTRACTING_DIMS, k->n_b,
                     k->b);
            continue;
        }
        static const struct {
            const char *mlir, *hlo;
        } KEYS[] = {
            {"lhs_batching_dimensions", "lhs_batch_dims"},
            {"rhs_batching_dimensions", "rhs_batch_dims"},
            {"lhs_contracting_dimensions", "lhs_contracting_dims"},
            {"rhs_contracting_dimensions", "rhs_contracting_dims"},
            {"broadcast_dimensions", "dimensions"},
            {"permutation", "dimensions"},
            {"comparison_direction", "direction"},
            {"sizes", "dynamic_slice_sizes"},
        };
        for (size_t j = 0; j < sizeof KEYS / sizeof KEYS[0]; j++)
            if (strcmp(key, KEYS[j].mlir) == 0) key = KEYS[j].hlo;
        if (strcmp(key, "dims") == 0 || strcmp(key, "dim") == 0 || strcmp(key, "dimension") == 0 ||
            strcmp(key, "iota_dimension") == 0) {
            if (in->op == GS_OP_IOTA) {
                gs_build_set_int(&r->b, in, GS_ATTR_IOTA_DIMENSION, k->a[0]);
            } else {
                set_ints(r, in, GS_ATTR_DIMENSIONS, k->n_a, k->a);
            }
            continue;
        }
        if (in->op == GS_OP_REDUCE_PRECISION && strcmp(key, "format") == 0 && k->ident) {
            /* format = e5m10: exponent_bits=5 mantissa_bits=10 */
            int e, m, used = 0;
            if (sscanf(k->ident, "e%dm%d%n", &e, &m, &used) != 2 || k->ident[used] || e < 1 ||
                m < 0)
                return mlir_fail_at(r, op_pos, "expected a format like e5m10, found '%s'",
                                    k->ident);
            gs_build_set_int(&r->b, in, GS_ATTR_EXPONENT_BITS, e);
            gs_build_set_int(&r->b, in, GS_ATTR_MANTISSA_BITS, m);
            continue;
        }
        if (in->op == GS_OP_RNG_BIT_GENERATOR &&
            (strcmp(key, "rng_algorithm") == 0 || strcmp(key, "algorithm") == 0)) {
            /* DEFAULT, THREE_FRY or PHILOX: HLO's algorithm=rng_default|rng_three_fry|... */
            static const char *const ALGS[][2] = {
                {"DEFAULT", "rng_default"}, {"THREE_FRY", "rng_three_fry"}, {"PHILOX", "rng_philox"}};
            int a = -1;
            for (int j = 0; j < 3 && k->ident; j++)
                if (strcmp(k->ident, ALGS[j][0]) == 0) a = j;
            if (a < 0)
                return mlir_fail_at(r, op_pos, "unknown rng algorithm '%s'",
                                    k->ident ? k->ident : "?");
            if (a > 0) gs_build_set_ident(&r->b, in, GS_ATTR_ALGORITHM, ALGS[a][1]);
            continue;
        }
        if (in->op == GS_OP_FFT && strcmp(key, "type") == 0) key = "fft_type";
        if (in->op == GS_OP_FFT && strcmp(key, "length") == 0) key = "fft_length";
        if (in->op == GS_OP_DYNAMIC_SLICE && strcmp(key, "slice_sizes") == 0)
            key = "dynamic_slice_sizes";
        if (strcmp(key, "direction") == 0 && k->ident) {
            static const char *const DIRS[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
            bool known = false;
            for (int d = 0; d < 6; d++) known |= strcmp(k->ident, DIRS[d]) == 0;
            if (!known)
                return mlir_fail_at(r, op_pos, "unknown comparison direction '%s'", k->ident);
            gs_build_set_ident(&r->b, in, GS_ATTR_DIRECTION, k->ident);
            continue;
        }
        if (strcmp(key, "compare_type") == 0 && k->ident && strcmp(k->ident, "TOTALORDER") == 0) {
            gs_build_set_ident(&r->b, in, GS_ATTR_TYPE, k->ident);
            continue;
        }
        if (in->op == GS_OP_PAD &&
            (strcmp(key, "low") == 0 || strcmp(key, "edge_padding_low") == 0 ||
             strcmp(key, "high") == 0 || strcmp(key, "edge_padding_high") == 0 ||
             strcmp(key, "interior") == 0 || strcmp(key, "interior_padding") == 0))
            continue; /* below */
        if (in->op == GS_OP_SLICE &&
            (strcmp(key, "start_indices") == 0 || strcmp(key, "limit_indices") == 0 ||
             strcmp(key, "strides") == 0))
            continue; /* below */
        gs_attr_key ak = gs_attr_from_name(key, strlen(key));
        if (ak == GS_ATTR_UNKNOWN) continue; /* not used by gspmd (precision, result info...) */
        switch (gs_attr_kind_of(ak)) {
        case GS_AK_INTS: set_ints(r, in, ak, k->n_a, k->a); break;
        case GS_AK_INT:
            if (k->n_a == 1) gs_build_set_int(&r->b, in, ak, k->a[0]);
            break;
        case GS_AK_BOOL:
            if (k->n_a == 1) gs_build_set_bool(&r->b, in, ak, k->a[0] != 0);
            break;
        case GS_AK_IDENT:
            if (k->ident) gs_build_set_ident(&r->b, in, ak, k->ident);
            break;
        case GS_AK_FLOAT:
            if (k->is_float || k->is_int) {
                gs_attr at = {.key = ak, .name = gs_attr_name(ak)};
                at.u.f = k->is_float ? k->f : (double)k->a[0];
                if (gs_instr_set_attr(r->m, in, &at) != GS_OK) return mlir_oom(r);
            }
            break;
        default: break;
        }
    }
    if (in->op == GS_OP_PAD) {
        const kv *lo = mlir_find_kv(kvs, "low"), *hi = mlir_find_kv(kvs, "high"),
                 *it = mlir_find_kv(kvs, "interior");
        if (!lo) lo = mlir_find_kv(kvs, "edge_padding_low");
        if (!hi) hi = mlir_find_kv(kvs, "edge_padding_high");
        if (!it) it = mlir_find_kv(kvs, "interior_padding");
        if (!lo || !hi || !it || lo->n_a != hi->n_a || lo->n_a != it->n_a)
            return mlir_fail_at(r, op_pos, "pad needs low, high and interior of one length each");
        gs_padding *p = GS_NEW(r->a, gs_padding);
        if (!p || !(p->dims = GS_NEW_ARRAY(r->a, gs_pad_dim, lo->n_a ? lo->n_a : 1)))
            return mlir_oom(r);
        p->n = lo->n_a;
        for (int j = 0; j < p->n; j++) p->dims[j] = (gs_pad_dim){lo->a[j], hi->a[j], it->a[j]};
        gs_attr at = {.key = GS_ATTR_PADDING, .name = "padding"};
        at.u.padding = p;
        if (gs_instr_set_attr(r->m, in, &at) != GS_OK) return mlir_oom(r);
    }
    if (in->op == GS_OP_SLICE && mlir_find_kv(kvs, "start_indices")) {
        const kv *st = mlir_find_kv(kvs, "start_indices"), *li = mlir_find_kv(kvs, "limit_indices"),
                 *sd = mlir_find_kv(kvs, "strides");
        if (!li || li->n_a != st->n_a || (sd && sd->n_a != st->n_a))
            return mlir_fail_at(r, op_pos,
                                "slice needs start_indices, limit_indices of one length");
        gs_attr at = {.key = GS_ATTR_SLICE, .name = "slice"};
        gs_slice_dim *v = GS_NEW_ARRAY(r->a, gs_slice_dim, st->n_a ? st->n_a : 1);
        if (!v) return mlir_oom(r);
        for (int j = 0; j < st->n_a; j++)
            v[j] = (gs_slice_dim){st->a[j], li->a[j], sd ? sd->a[j] : 1};
        at.u.slice.n = st->n_a;
        at.u.slice.v = v;
        if (gs_instr_set_attr(r->m, in, &at) != GS_OK) return mlir_oom(r);
    }
    if ((in->op == GS_OP_REDUCE_WINDOW || in->op == GS_OP_SELECT_AND_SCATTER) &&
        !set_window(r, in, kvs, op_pos))
        return false;
    if ((in->op == GS_OP_SCATTER || in->op == GS_OP_GATHER) &&
        !gs_instr_attr(in, GS_ATTR_INDEX_VECTOR_DIM))
        gs_build_set_int(&r->b, in, GS_ATTR_INDEX_VECTOR_DIM, 0);
    return !r->b.failed || mlir_oom(r);
}

/* `reducer(%a: T, %b: T) (%c: T, %d: T) { ... }`: the region of a pretty reduce. Argument
 * pairs are (lhs_i, rhs_i); the computation's parameters are all lhs then all rhs. */
static bool parse_reducer(reader *r, gs_computation **out) {
    const char *names[64];
    gs_shape *types[64];
    const char *ln[32], *rn[32];
    gs_shape *lt[32], *rt[32];
    int n = 0;
    while (mlir_peek(r) == '(') {
        r->pos++;
        int idx;
        if (n >= 32) return FAIL(r, "too many reducer arguments");
        if (!mlir_parse_value_name(r, &ln[n], &idx, false) || !mlir_expect(r, ':', "in reducer") ||
            !mlir_parse_type(r, &lt[n]) || !mlir_expect(r, ',', "in reducer") ||
            !mlir_parse_value_name(r, &rn[n], &idx, false) || !mlir_expect(r, ':', "in reducer") ||
            !mlir_parse_type(r, &rt[n]) || !mlir_expect(r, ')', "closing reducer arguments"))
            return false;
        n++;
    }
    for (int i = 0; i < n; i++) {
        names[i] = ln[i];
        types[i] = lt[i];
        names[n + i] = rn[i];
        types[n + i] = rt[i];
    }
    return mlir_parse_region(r, "region", 2 * n, names, types, NULL, out);
}

/* The computation `(a, b) -> op(a, b)` for `applies stablehlo.OP` over element type t. */
static bool applies_comp(reader *r, const char *opname, gs_type t, gs_computation **out) {
    const char *base = strncmp(opname, "stablehlo.", 10) == 0 ? opname + 10 : opname;
    int op = opcode_of(base);
    if (op < 0 || gs_op_info_of((gs_opcode)op)->family != GS_FAM_BINARY)
        return FAIL(r, "reduction by '%s' is not supported", opname);
    *out = gs_build_scalar_computation(&r->b, "region", (gs_opcode)op, t);
    return *out ? true : mlir_oom(r);
}

/* StableHLO's all_to_all with split_dimension sd != concat_dimension cd, from HLO's along sd (y,
 * whose dim sd holds the N received chunks in order): the chunk axis moves from sd to just
 * before cd (reshape, transpose, reshape), giving the declared result out. */
static gs_instr *all_to_all_concat(reader *r, gs_instr *y, int64_t sd, int64_t cd,
                                   const gs_shape *out, size_t op_pos) {
    const gs_shape *s = y->shape;
    int rank = s->rank;
    if (!gs_shape_is_array(s) || !gs_shape_is_array(out) || out->rank != rank || sd < 0 ||
        cd < 0 || sd >= rank || cd >= rank || rank + 1 > GS_MAX_RANK || out->dims[cd] == 0 ||
        s->dims[cd] == 0 || out->dims[cd] % s->dims[cd] != 0) {
        mlir_fail_at(r, op_pos, "all_to_all's result type does not fit its dimensions");
        return NULL;
    }
    int64_t n = out->dims[cd] / s->dims[cd]; /* split_count */
    if (n < 1 || s->dims[sd] % n != 0 || out->dims[sd] * n != s->dims[sd]) {
        mlir_fail_at(r, op_pos, "all_to_all's result type does not fit its split_count");
        return NULL;
    }
    int64_t split[GS_MAX_RANK + 1];
    int perm[GS_MAX_RANK + 1], k = 0;
    for (int d = 0, j = 0; d < rank; d++) { /* dim sd becomes (n, dims[sd] / n) */
        if (d == sd) {
            split[j++] = n;
            split[j++] = s->dims[d] / n;
        } else {
            split[j++] = s->dims[d];
        }
    }
    int cd1 = (int)(cd < sd ? cd : cd + 1); /* cd's axis in the split shape */
    for (int d = 0; d <= rank; d++) {
        if (d == sd) continue;
        if (d == cd1) perm[k++] = (int)sd;
        perm[k++] = d;
    }
    gs_instr *a = gs_build_reshape(&r->b, y, rank + 1, split);
    gs_instr *t = a ? gs_build_transpose(&r->b, a, perm) : NULL;
    gs_instr *z = t ? gs_build_reshape(&r->b, t, rank, out->dims) : NULL;
    if (!z) mlir_oom(r);
    return z;
}

/* Builds instruction op (result types outs) from operands, attributes kvs and regions. */
static bool build_op(reader *r, const char *opname, size_t op_pos, int n_ops, gs_instr **ops,
                     gs_shape **outs, int n_outs, const gs_vec *kvs, int n_regions,
                     gs_computation **regions, gs_instr **result) {
    const char *base = strncmp(opname, "stablehlo.", 10) == 0 ? opname + 10 : opname;
    int op = opcode_of(base);
    if (op < 0) return mlir_fail_at(r, op_pos, "unknown or unsupported op '%s'", opname);
    gs_shape *shape;
    if (n_outs == 1) {
        shape = outs[0];
    } else {
        shape = gs_shape_tuple(r->a, n_outs, outs);
        if (!shape) return mlir_oom(r);
    }
    r->b.span = mlir_span_at(r, op_pos);
    gs_instr *bcast_in = NULL;
    const kv *bd = mlir_find_kv(kvs, "dims");
    if (!bd) bd = mlir_find_kv(kvs, "broadcast_dimensions");
    if (op == GS_OP_BROADCAST && n_ops == 1 && bd && gs_shape_is_array(ops[0]->shape) &&
        gs_shape_is_array(shape) && bd->n_a == ops[0]->shape->rank) {
        /* StableHLO broadcasts size-1 dims to any size, HLO's broadcast does not: reshape them
         * away first (what XLA's import does) */
        const gs_shape *x = ops[0]->shape;
        int64_t keep_dims[GS_MAX_RANK];
        int n_keep = 0;
        bool any = false;
        for (int i = 0; i < x->rank; i++) {
            int64_t to = bd->a[i];
            if (x->dims[i] == 1 && to >= 0 && to < shape->rank && shape->dims[to] != 1) {
                any = true;
                continue;
            }
            keep_dims[n_keep++] = x->dims[i];
        }
        if (any) {
            bcast_in = gs_build_reshape(&r->b, ops[0], n_keep, keep_dims);
            if (!bcast_in) return mlir_oom(r);
        }
    }
    const kv *a2a_split = op == GS_OP_ALL_TO_ALL ? mlir_find_kv(kvs, "split_dimension") : NULL;
    const kv *a2a_concat = op == GS_OP_ALL_TO_ALL ? mlir_find_kv(kvs, "concat_dimension") : NULL;
    const gs_shape *a2a_out = NULL; /* split != concat: the declared result, after the moves */
    if (a2a_split && a2a_concat && a2a_split->is_int && a2a_concat->is_int &&
        a2a_split->a[0] != a2a_concat->a[0] && n_ops == 1 && n_outs == 1) {
        a2a_out = shape;
        shape = ops[0]->shape; /* HLO's all-to-all splits and concatenates along one dim */
    }
    if (op == GS_OP_RNG) {
        /* stablehlo.rng %a, %b, %shape: HLO's rng(a, b) of the result's shape */
        const gs_shape *sh = n_ops == 3 ? ops[2]->shape : NULL;
        if (!sh || !gs_shape_is_array(sh) || sh->rank != 1 || !gs_type_is_int(sh->type) ||
            !gs_shape_is_array(shape) || sh->dims[0] != shape->rank)
            return mlir_fail_at(r, op_pos, "stablehlo.rng takes a, b and the result's shape (a "
                                           "1-D integer tensor of the result's rank)");
        const gs_literal_ir *lit = ops[2]->op == GS_OP_CONSTANT ? ops[2]->literal : NULL;
        for (int i = 0; lit && lit->data && !lit->elided && i < shape->rank; i++)
            if (gs_elem_get_i(lit->data, sh->type, i) != shape->dims[i])
                return mlir_fail_at(r, op_pos, "stablehlo.rng's shape operand says %lld for "
                                    "dimension %d, its result type %lld", (long long)
                                    gs_elem_get_i(lit->data, sh->type, i), i,
                                    (long long)shape->dims[i]);
        n_ops = 2;
    }
    gs_instr *barrier_in = NULL;
    if (op == GS_OP_OPTIMIZATION_BARRIER && n_ops != 1) {
        /* HLO's barrier takes one operand: the tuple of StableHLO's */
        barrier_in = gs_build_tuple(&r->b, n_ops, ops);
        if (!barrier_in) return mlir_oom(r);
        n_ops = 1;
    }
    gs_instr *in = gs_build(&r->b, (gs_opcode)op, shape, n_ops,
                           barrier_in ? &barrier_in : bcast_in ? &bcast_in : ops);
    if (!in) return mlir_oom(r);
    if (!apply_attrs(r, in, kvs, op_pos)) return false;
    if (op == GS_OP_RNG) { /* distribution = UNIFORM | NORMAL */
        const char *d = gs_instr_str(in, GS_ATTR_DISTRIBUTION);
        const char *hd = !d ? NULL
                         : strcmp(d, "UNIFORM") == 0 ? "rng_uniform"
                         : strcmp(d, "NORMAL") == 0  ? "rng_normal"
                                                     : NULL;
        if (!hd)
            return mlir_fail_at(r, op_pos, "stablehlo.rng needs distribution = UNIFORM or NORMAL");
        gs_build_set_ident(&r->b, in, GS_ATTR_DISTRIBUTION, hd);
    }
    if (a2a_out && !(in = all_to_all_concat(r, in, a2a_split->a[0], a2a_concat->a[0], a2a_out,
                                            op_pos)))
        return false;
    if (strcmp(base, "dot") == 0) {
        /* stablehlo.dot: vector or matrix operands, lhs's last dim against rhs's first */
        if (n_ops != 2 || ops[0]->shape->rank < 1 || ops[0]->shape->rank > 2 ||
            ops[1]->shape->rank < 1 || ops[1]->shape->rank > 2)
            return mlir_fail_at(r, op_pos, "stablehlo.dot takes two vectors or matrices");
        int64_t lc = ops[0]->shape->rank - 1, rc = 0;
        set_ints(r, in, GS_ATTR_LHS_CONTRACTING_DIMS, 1, &lc);
        set_ints(r, in, GS_ATTR_RHS_CONTRACTING_DIMS, 1, &rc);
    }
    if (bcast_in) {
        int64_t dims[GS_MAX_RANK];
        int n = 0;
        for (int i = 0; i < ops[0]->shape->rank; i++) {
            int64_t to = bd->a[i];
            if (!(ops[0]->shape->dims[i] == 1 && to >= 0 && to < shape->rank &&
                  shape->dims[to] != 1))
                dims[n++] = to;
        }
        set_ints(r, in, GS_ATTR_DIMENSIONS, n, dims);
    }
    if (n_regions > 0) {
        gs_attr_key k = op == GS_OP_WHILE ? GS_ATTR_CONDITION : GS_ATTR_TO_APPLY;
        if (op == GS_OP_WHILE && n_regions == 2) {
            gs_build_set_comp(&r->b, in, GS_ATTR_CONDITION, regions[0]);
            gs_build_set_comp(&r->b, in, GS_ATTR_BODY, regions[1]);
        } else if (op == GS_OP_SELECT_AND_SCATTER && n_regions == 2) {
            gs_build_set_comp(&r->b, in, GS_ATTR_SELECT, regions[0]);
            gs_build_set_comp(&r->b, in, GS_ATTR_SCATTER, regions[1]);
        } else if (op == GS_OP_SORT || op == GS_OP_REDUCE || op == GS_OP_SCATTER ||
                   op == GS_OP_REDUCE_WINDOW || op == GS_OP_ALL_REDUCE ||
                   op == GS_OP_REDUCE_SCATTER) {
            gs_build_set_comp(&r->b, in, k, regions[0]);
        } else {
            return mlir_fail_at(r, op_pos, "regions of '%s' are not supported yet", opname);
        }
    }
    if (r->b.failed) return mlir_oom(r);
    *result = in;
    return true;
}

/* `check.*` ops as custom-calls the interpreter evaluates. */
static gs_instr *build_check(reader *r, const char *target, int n_ops, gs_instr **ops,
                             gs_shape *result, size_t at) {
    r->b.span = mlir_span_at(r, at);
    gs_shape *shape = result ? result : gs_shape_tuple(r->a, 0, NULL);
    if (!shape) return NULL;
    gs_instr *in = mlir_custom_call(r, target, shape, n_ops, ops, NULL);
    if (!in) return NULL;
    gs_build_set_bool(&r->b, in, GS_ATTR_CUSTOM_CALL_HAS_SIDE_EFFECT, true);
    return r->b.failed ? NULL : in;
}

/* Operands `%a, %b, ...` (stops at anything else). */
static bool parse_operand_list(reader *r, gs_instr **ops, int *n, int max) {
    while (mlir_peek(r) == '%') {
        if (*n >= max) return FAIL(r, "too many operands");
        if (!mlir_lookup_value(r, &ops[(*n)++])) return false;
        if (!mlir_accept(r, ',')) break;
    }
    return true;
}

/* The result types of an op from its type spec: the function type's results, or for a plain
 * list the last type. */
static bool result_types(reader *r, gs_shape **ins, int n_in, gs_shape **outs, int *n_out) {
    if (*n_out >= 0) return true;
    if (n_in < 1) return FAIL(r, "expected a type");
    outs[0] = ins[n_in - 1];
    *n_out = 1;
    return true;
}

enum { MAX_OPS = 256 };

/* The outer values a while's condition (after `cond`) and body (after `do`) use, appended to
 * the loop state (names, operands ops, types outs, result counts; *n entries). The cursor does
 * not move. */
static bool while_captures(reader *r, const char **names, gs_instr **ops, gs_shape **outs,
                           int *counts, int *n) {
    size_t save = r->pos;
    int errors = r->d->n_errors;
    value_ent caps[64];
    bool ok = true;
    for (int part = 0; part < 2 && ok; part++) {
        int k;
        ok = mlir_accept_word(r, part == 0 ? "cond" : "do") &&
             mlir_region_captures(r, caps, &k, 64);
        for (int i = 0; ok && i < k; i++) {
            bool seen = false;
            for (int j = 0; j < *n && !seen; j++)
                seen = ops[j] == caps[i].in && names[j] == caps[i].name;
            if (seen) continue;
            if (*n >= MAX_OPS) {
                ok = FAIL(r, "a while uses more than %d values", MAX_OPS);
                break;
            }
            names[*n] = caps[i].name;
            ops[*n] = caps[i].in;
            outs[*n] = caps[i].in->shape;
            counts[(*n)++] = caps[i].n_results;
        }
        ok = ok && (mlir_skip_ws(r), mlir_skip_balanced(r));
    }
    r->pos = save;
    /* other syntax errors are reported when the regions are read */
    return r->d->n_errors == errors;
}

/* The body of a while that carries captured values n_own..n_state-1 returns them unchanged. */
static bool pass_captures_on(reader *r, gs_computation *body, int n_own, int n_state,
                             size_t op_pos) {
    if (n_state == n_own) return true;
    gs_instr *root = body->root, *param = body->n_params ? body->params[0] : NULL;
    if (!root || !param) return mlir_fail_at(r, op_pos, "the while's body has no return");
    gs_builder saved = r->b;
    gs_builder_init(&r->b, r->m, body, &r->names);
    gs_instr *vals[MAX_OPS];
    bool ok = true;
    int n = gs_shape_is_tuple(root->shape) && n_own != 1 ? root->shape->n_tuple : 1;
    if (n != n_own)
        ok = mlir_fail_at(r, op_pos, "the while's body returns %d values, not %d", n, n_own);
    for (int i = 0; ok && i < n_own; i++)
        ok = (vals[i] = n_own == 1 ? root : gs_build_gte(&r->b, root, i)) != NULL || mlir_oom(r);
    for (int i = n_own; ok && i < n_state; i++)
        ok = (vals[i] = gs_build_gte(&r->b, param, i)) != NULL || mlir_oom(r);
    ok = ok && mlir_set_root(r, body, n_state, vals, op_pos);
    r->b = saved;
    return ok;
}


/* One operation inside a function or region. Results are defined in scope; `return` ops set
 * c's root and set *ended. */
/* A call of function `callee` on ops with result types outs (a tuple when several). */
static gs_instr *build_call(reader *r, const char *callee, int n_ops, gs_instr **ops,
                            gs_shape **outs, int n_out, size_t op_pos) {
    gs_computation *f = mlir_func_comp(r, callee);
    gs_shape *shape = n_out == 1 ? outs[0] : gs_shape_tuple(r->a, n_out, outs);
    r->b.span = mlir_span_at(r, op_pos);
    gs_instr *in = f && shape ? gs_build(&r->b, GS_OP_CALL, shape, n_ops, ops) : NULL;
    if (!in) return NULL;
    gs_build_set_comp(&r->b, in, GS_ATTR_TO_APPLY, f);
    return r->b.failed ? NULL : in;
}

/* `called_computations = [@f, @g]` of a custom-call (a TopK's comparator, ...): resolved by
 * mlir_resolve_called once every function is read. */
static bool called_computations(reader *r, gs_instr *in, const kv *k) {
    mlir_called c = {in, k->value_pos};
    return gs_vec_push(&r->pending_called, &c) == GS_OK || mlir_oom(r);
}

bool mlir_resolve_called(reader *r) {
    for (size_t i = 0; i < r->pending_called.n; i++) {
        mlir_called pc = GS_VEC_AT(&r->pending_called, mlir_called, i);
        size_t save = r->pos;
        r->pos = pc.value_pos;
        gs_computation *v[64];
        int n = 0;
        bool ok = mlir_expect(r, '[', "opening called_computations");
        if (ok && !mlir_accept(r, ']')) {
            do {
                const char *f;
                if (!(ok = mlir_parse_symbol(r, &f))) break;
                gs_computation *c = gs_strmap_get(&r->funcs, f);
                if (c && c->root && n < 64) v[n++] = c; /* (undefined: left out) */
            } while (mlir_accept(r, ','));
            ok = ok && mlir_expect(r, ']', "closing called_computations");
        }
        r->pos = save;
        if (!ok) return false;
        if (!n) continue;
        gs_computation **keep = GS_NEW_ARRAY(r->a, gs_computation *, n);
        if (!keep) return mlir_oom(r);
        memcpy(keep, v, sizeof v[0] * (size_t)n);
        gs_attr at = {.key = GS_ATTR_CALLED_COMPUTATIONS, .name = "called_computations"};
        at.u.comps.n = n;
        at.u.comps.v = keep;
        if (gs_instr_set_attr(r->m, pc.in, &at) != GS_OK) return mlir_oom(r);
    }
    return true;
}

/* stablehlo.composite: a call of its `decomposition = @f` (the composite's meaning). */
static bool composite(reader *r, size_t op_pos, const gs_vec *kvs, int n_ops, gs_instr **ops,
                      gs_shape **outs, int n_out, gs_instr **result) {
    const kv *k = mlir_find_kv(kvs, "decomposition");
    if (!k || r->s[k->value_pos] != '@')
        return mlir_fail_at(r, op_pos, "stablehlo.composite needs decomposition = @function");
    size_t save = r->pos;
    r->pos = k->value_pos;
    const char *callee;
    bool ok = mlir_parse_symbol(r, &callee);
    r->pos = save;
    if (!ok) return false;
    *result = build_call(r, callee, n_ops, ops, outs, n_out, op_pos);
    return *result ? true : mlir_oom(r);
}

/* `"text"` with its quotes and backslashes escaped, as HLO and MLIR text write a string. */
static char *quoted(gs_arena *a, const char *text) {
    gs_sb sb = {0};
    gs_sb_putc(&sb, '"');
    for (const char *c = text; *c; c++) {
        if (*c == '"' || *c == '\\') gs_sb_putc(&sb, '\\');
        gs_sb_putc(&sb, *c);
    }
    gs_sb_putc(&sb, '"');
    char *out = sb.failed ? NULL : gs_arena_strdup(a, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return out;
}

/* A named attribute HLO text keeps as written (infeed_config="", is_host_transfer=true). */
static bool set_raw(reader *r, gs_instr *in, const char *name, const char *text) {
    gs_attr at = {.key = GS_ATTR_UNKNOWN, .name = name};
    at.u.s = text;
    return (text && gs_instr_set_attr(r->m, in, &at) == GS_OK) || mlir_oom(r);
}

/* "stablehlo.send"(%data..., %token), "stablehlo.recv"(%token), "stablehlo.infeed"(%token),
 * "stablehlo.outfeed"(%data..., %token) as HLO's send/send-done, recv/recv-done, infeed
 * (data as one value, or a tuple of several) and outfeed (of the tuple of the data), each
 * -done result spread back into the op's results. An mhlo.sharding on the op is HLO's sharding
 * of the HLO op (of its tuple forms), put there. */
static bool transfer(reader *r, const char *hlo, size_t op_pos, gs_vec *kvs, int n_ops,
                     gs_instr **ops, gs_shape **outs, int n_out, gs_instr **result) {
    bool send = strcmp(hlo, "send") == 0, outfeed = strcmp(hlo, "outfeed") == 0;
    bool gives = !send && !outfeed; /* recv, infeed: (data..., token) */
    if (n_ops < 1 || ops[n_ops - 1]->shape->type != GS_TOKEN || (gives && n_ops != 1))
        return mlir_fail_at(r, op_pos, "stablehlo.%s takes %sa !stablehlo.token last", hlo,
                            gives ? "only " : "its values and ");
    if (gives ? (n_out < 1 || outs[n_out - 1]->type != GS_TOKEN)
              : (n_out != 1 || outs[0]->type != GS_TOKEN))
        return mlir_fail_at(r, op_pos, "stablehlo.%s gives %sa !stablehlo.token", hlo,
                            gives ? "its values and " : "");
    int n_data = gives ? n_out - 1 : n_ops - 1;
    gs_shape **dt = gives ? outs : NULL;
    gs_shape *dts[MAX_OPS];
    if (!gives)
        for (int i = 0; i < n_data; i++) dts[i] = ops[i]->shape, dt = dts;
    for (int i = 0; i < n_data; i++)
        if (!gs_shape_is_array(dt[i]))
            return mlir_fail_at(r, op_pos, "stablehlo.%s of a %s is not supported", hlo,
                                dt[i]->type == GS_TOKEN ? "token among its values" : "tuple");
    if (strcmp(hlo, "recv") == 0 && n_data != 1)
        return mlir_fail_at(r, op_pos, "stablehlo.recv of %d values is not supported yet", n_data);
    /* the data as HLO has it: one value, or a tuple (outfeed: always a tuple) */
    bool tupled = outfeed || n_data != 1;
    gs_shape *data = tupled || !n_data ? gs_shape_tuple(r->a, n_data, dt) : dt[0];
    gs_shape *u32 = gs_shape_scalar(r->a, GS_U32);
    gs_shape *tok = gs_shape_token(r->a);
    if (!data || !u32 || !tok) return mlir_oom(r);
    r->b.span = mlir_span_at(r, op_pos);
    gs_instr *token = ops[n_ops - 1], *x = NULL, *in = NULL;
    if (!gives) {
        x = tupled ? gs_build_tuple(&r->b, n_data, ops) : ops[0];
        if (!x) return mlir_oom(r);
    }
    const kv *ch = mlir_find_kv(kvs, "handle");
    const kv *host = mlir_find_kv(kvs, "is_host_transfer");
    bool is_host = host && host->is_int && host->a[0];
    /* send, recv: (data, u32[] context, token); infeed: (data, token); outfeed: token */
    gs_shape *el[3] = {data, u32, tok}, *two_el[2] = {data, tok};
    gs_shape *pair = gs_shape_tuple(r->a, 2, two_el);
    gs_shape *shape = outfeed ? tok : strcmp(hlo, "infeed") == 0 ? pair : gs_shape_tuple(r->a, 3, el);
    if (!shape || !pair) return mlir_oom(r);
    gs_opcode op = send      ? GS_OP_SEND
                   : outfeed ? GS_OP_OUTFEED
                   : strcmp(hlo, "recv") == 0 ? GS_OP_RECV
                                              : GS_OP_INFEED;
    gs_instr *two[2] = {x, token};
    in = gs_build(&r->b, op, shape, gives ? 1 : 2, gives ? &token : two);
    if (!in) return mlir_oom(r);
    gs_sharding *sh;
    if (outfeed ? !mlir_sharding_from_kvs_as_written(r, kvs, &sh)
                : !mlir_sharding_from_kvs(r, kvs, shape, &sh))
        return false;
    if (sh && gs_instr_set_sharding(r->m, in, sh) != GS_OK) return mlir_oom(r);
    if (sh && x && x != ops[0] && x->op == GS_OP_TUPLE) {
        /* the tuple of the data sent: the data's part of the op's sharding (all but the
         * token's), as the HLO it came from had on it */
        gs_sharding *xs = sh->kind != GS_SHARDING_TUPLE ? sh
                          : sh->n_tuple == n_data + 1 && n_data > 0
                              ? gs_sharding_tuple(r->a, n_data, (gs_sharding *const *)sh->tuple)
                              : NULL;
        if (xs && gs_instr_set_sharding(r->m, x, xs) != GS_OK) return mlir_oom(r);
    }
    for (size_t i = 0; i < kvs->n; i++) { /* the sharding is the HLO op's, set: not again */
        kv *k = &GS_VEC_AT(kvs, kv, i);
        if (strcmp(k->key, "mhlo.sharding") == 0) k->key = "";
    }
    if (op == GS_OP_INFEED || op == GS_OP_OUTFEED) {
        const char *name = op == GS_OP_INFEED ? "infeed_config" : "outfeed_config";
        const kv *cf = mlir_find_kv(kvs, name);
        if (!set_raw(r, in, name, quoted(r->a, cf && cf->ident ? cf->ident : "")))
            return false;
        *result = in;
        if (op == GS_OP_INFEED && tupled) { /* ((data...), token) -> (data..., token) */
            gs_instr *d = gs_build_gte(&r->b, in, 0), *vals[MAX_OPS];
            for (int i = 0; i < n_data && d; i++) vals[i] = gs_build_gte(&r->b, d, i);
            vals[n_data] = gs_build_gte(&r->b, in, 1);
            *result = d && !r->b.failed ? gs_build_tuple(&r->b, n_data + 1, vals) : NULL;
        }
        return (*result && !r->b.failed) || mlir_oom(r);
    }
    gs_instr *done = gs_build(&r->b, send ? GS_OP_SEND_DONE : GS_OP_RECV_DONE,
                              send ? tok : pair, 1, &in);
    if (!done) return mlir_oom(r);
    if (ch && ch->is_int) {
        gs_build_set_int(&r->b, in, GS_ATTR_CHANNEL_ID, ch->a[0]);
        gs_build_set_int(&r->b, done, GS_ATTR_CHANNEL_ID, ch->a[0]);
    }
    if (is_host && (!set_raw(r, in, "is_host_transfer", "true") ||
                    !set_raw(r, done, "is_host_transfer", "true")))
        return false;
    *result = done;
    return !r->b.failed || mlir_oom(r);
}

/* A branch's parameter (the value or the tuple of values it captures) has the shardings the
 * captured values have, when they all have one, as the HLO a branch came from said. */
static bool share_capture_shardings(reader *r, gs_instr *capture, gs_computation *branch) {
    gs_instr *param = branch->n_params == 1 ? branch->params[0] : NULL;
    if (!param || gs_instr_get_sharding(param)) return true;
    gs_sharding *sh = (gs_sharding *)gs_instr_get_sharding(capture);
    if (!sh && capture->op == GS_OP_TUPLE && capture->n_operands > 0) {
        gs_sharding **el = GS_NEW_ARRAY(r->a, gs_sharding *, capture->n_operands);
        if (!el) return mlir_oom(r);
        for (int i = 0; i < capture->n_operands; i++) {
            const gs_sharding *e = gs_instr_get_sharding(capture->operands[i]);
            if (!e || e->kind == GS_SHARDING_TUPLE) return true;
            el[i] = (gs_sharding *)e;
        }
        if (!(sh = gs_sharding_tuple(r->a, capture->n_operands, el))) return mlir_oom(r);
        if (gs_instr_set_sharding(r->m, capture, sh) != GS_OK) return mlir_oom(r);
    }
    if (sh && gs_instr_set_sharding(r->m, param, sh) != GS_OK) return mlir_oom(r);
    return true;
}

/* "stablehlo.case"(%index) ({...}, {...}) / "stablehlo.if"(%pred) ({true}, {false}) :
 * (type) -> results, after the operands: HLO's conditional, each branch a computation of the
 * tuple of outer values it uses (its operand). */
static bool conditional(reader *r, const char *opname, size_t op_pos, gs_instr *sel,
                        gs_vec *kvs, gs_instr **result, gs_shape **outs, int *n_out) {
    gs_computation *branches[MAX_OPS];
    gs_instr *ops[MAX_OPS + 1];
    int n = 0;
    ops[0] = sel;
    if (!mlir_expect(r, '(', "opening the branches")) return false;
    do {
        if (n >= MAX_OPS) return FAIL(r, "too many branches");
        if (!mlir_parse_capturing_region(r, "branch", &branches[n], &ops[1 + n])) return false;
        n++;
    } while (mlir_accept(r, ','));
    gs_shape *ins[MAX_OPS];
    int n_in;
    bool ok = mlir_expect(r, ')', "closing the branches") &&
              (mlir_peek(r) != '{' || (r->pos++, mlir_parse_kv_list(r, kvs, '}'))) &&
              mlir_expect(r, ':', "before the op's type") &&
              mlir_parse_type_spec(r, ins, &n_in, outs, n_out, MAX_OPS) &&
              result_types(r, ins, n_in, outs, n_out);
    if (!ok) return false;
    for (int k = 0; k < n; k++) /* each branch's parameter: the shardings of what it captures */
        if (!share_capture_shardings(r, ops[1 + k], branches[k])) return false;
    bool is_if = strcmp(opname, "stablehlo.if") == 0;
    if (is_if && n != 2) return mlir_fail_at(r, op_pos, "'stablehlo.if' needs two branches");
    r->b.span = mlir_span_at(r, op_pos);
    gs_shape *shape = *n_out == 1 ? outs[0] : gs_shape_tuple(r->a, *n_out, outs);
    gs_instr *in = shape ? gs_build(&r->b, GS_OP_CONDITIONAL, shape, 1 + n, ops) : NULL;
    gs_computation **v = GS_NEW_ARRAY(r->a, gs_computation *, n);
    if (!in || !v) return mlir_oom(r);
    memcpy(v, branches, sizeof *v * (size_t)n);
    gs_attr at = {.key = GS_ATTR_BRANCH_COMPUTATIONS, .name = "branch_computations"};
    at.u.comps.n = n;
    at.u.comps.v = v;
    if (is_if) {
        gs_build_set_comp(&r->b, in, GS_ATTR_TRUE_COMPUTATION, branches[0]);
        gs_build_set_comp(&r->b, in, GS_ATTR_FALSE_COMPUTATION, branches[1]);
    } else if (gs_instr_set_attr(r->m, in, &at) != GS_OK) {
        return mlir_oom(r);
    }
    *result = in;
    return !r->b.failed || mlir_oom(r);
}

bool mlir_parse_op(reader *r, gs_computation *c, bool *ended) {
    const char *res_names[16];
    int res_counts[16], n_res = 0;
    size_t start = (mlir_skip_ws(r), r->pos);
    while (mlir_peek(r) == '%') {
        int idx;
        if (n_res >= 16) return FAIL(r, "too many result names");
        if (!mlir_parse_value_name(r, &res_names[n_res], &idx, false)) return false;
        res_counts[n_res] = 1;
        if (mlir_cur(r) == ':') {
            r->pos++;
            int64_t k;
            if (!mlir_parse_int(r, &k, "a result count") || k < 1 || k > 4096)
                return mlir_fail_at(r, start, "bad result count");
            res_counts[n_res] = (int)k;
        }
        n_res++;
        if (!mlir_accept(r, ',')) break;
    }
    if (n_res && !mlir_expect(r, '=', "after the result names")) return false;
    size_t op_pos = (mlir_skip_ws(r), r->pos);
    const char *opname;
    bool generic = mlir_cur(r) == '"';
    if (generic ? !mlir_parse_string(r, &opname) : !mlir_parse_ident(r, &opname, "an operation"))
        return false;

    gs_instr *ops[MAX_OPS];
    int n_ops = 0;
    gs_shape *ins[MAX_OPS], *outs[MAX_OPS];
    int n_in = 0, n_out = -1;
    gs_vec kvs;
    gs_vec_init(&kvs, sizeof(kv));
    gs_computation *regions[4];
    int n_regions = 0;
    gs_instr *result = NULL;
    bool ok = false;
    const char *check_target = NULL;
    /* the name after `stablehlo.` ("" for other dialects), compared with many names below */
    const char *hlo = strncmp(opname, "stablehlo.", 10) == 0 ? opname + 10 : "";

    if (strncmp(opname, "chlo.", 5) == 0) {
        ok = mlir_parse_chlo(r, opname, op_pos, generic, &result);
        goto define;
    }
    if (strcmp(opname, "return") == 0 || strcmp(opname, "func.return") == 0 ||
        strcmp(hlo, "return") == 0 || strcmp(opname, "sdy.return") == 0) {
        /* any number of values (a training step returns every updated parameter) */
        gs_vec vals;
        gs_vec_init(&vals, sizeof(gs_instr *));
        ok = !generic || mlir_expect(r, '(', "opening the returned values");
        while (ok && mlir_peek(r) == '%') {
            gs_instr *v;
            ok = mlir_lookup_value(r, &v) && (gs_vec_push(&vals, &v) == GS_OK || mlir_oom(r));
            if (!mlir_accept(r, ',')) break;
        }
        if (ok && generic) {
            /* `"stablehlo.return"(%a, %b) : (T, U) -> ()` */
            ok = mlir_expect(r, ')', "closing the returned values") &&
                 mlir_expect(r, ':', "before the returned types") &&
                 mlir_parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS);
        } else if (ok && vals.n) {
            ok = mlir_expect(r, ':', "before the returned types");
            for (size_t i = 0; ok && i < vals.n; i++) {
                gs_shape *t;
                ok = (i == 0 || mlir_expect(r, ',', "between the returned types")) &&
                     mlir_parse_type(r, &t);
            }
        }
        ok = ok && mlir_set_root(r, c, (int)vals.n, vals.data, op_pos);
        gs_vec_free(&vals);
        *ended = true;
        goto done;
    }
    if (generic) {
        if (!mlir_expect(r, '(', "opening the operands") ||
            !parse_operand_list(r, ops, &n_ops, MAX_OPS) ||
            !mlir_expect(r, ')', "closing the operands"))
            goto done;
        if (mlir_peek(r) == '<') {
            r->pos++;
            if (!mlir_expect(r, '{', "opening the properties") ||
                !mlir_parse_kv_list(r, &kvs, '}') || !mlir_expect(r, '>', "closing the properties"))
                goto done;
        }
        if ((strcmp(hlo, "case") == 0 || strcmp(hlo, "if") == 0) && n_ops == 1) {
            ok = conditional(r, opname, op_pos, ops[0], &kvs, &result, outs, &n_out);
            goto define;
        }
        if (mlir_peek(r) == '(') {
            r->pos++;
            do {
                if (n_regions >= 4) {
                    FAIL(r, "too many regions");
                    goto done;
                }
                if (!mlir_parse_region(r, "region", 0, NULL, NULL, NULL, &regions[n_regions++]))
                    goto done;
            } while (mlir_accept(r, ','));
            if (!mlir_expect(r, ')', "closing the regions")) goto done;
        }
        if (mlir_peek(r) == '{' && (r->pos++, !mlir_parse_kv_list(r, &kvs, '}'))) goto done;
        if (!mlir_expect(r, ':', "before the op's type") ||
            !mlir_parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS) ||
            !result_types(r, ins, n_in, outs, &n_out))
            goto done;
        if (strncmp(opname, "check.", 6) == 0) {
            /* "check.expect_eq_const"(%x) <{value = dense<...>}> */
            const kv *v = mlir_find_kv(&kvs, "value");
            if (!v || !v->dense_pos || n_ops != 1) {
                mlir_fail_at(r, op_pos, "'%s' needs one operand and a dense value", opname);
                goto done;
            }
            size_t save = r->pos;
            r->pos = v->dense_pos + 5;
            mlir_skip_ws(r);
            r->pos++;
            gs_literal_ir *lit;
            if (!mlir_parse_dense_body(r, v->dense_type, &lit)) goto done;
            r->pos = save;
            r->b.span = mlir_span_at(r, op_pos);
            gs_instr *k = gs_build(&r->b, GS_OP_CONSTANT, v->dense_type, 0, NULL);
            if (!k) {
                mlir_oom(r);
                goto done;
            }
            k->literal = lit;
            ops[n_ops++] = k;
            result = build_check(r, opname, n_ops, ops, n_out == 1 ? outs[0] : NULL, op_pos);
            if (!result) {
                mlir_oom(r);
                goto done;
            }
            ok = true;
            goto define;
        }
        if (strncmp(opname, "stablehlo.", 10) != 0) {
            mlir_fail_at(r, op_pos, "unknown or unsupported op '%s'", opname);
            goto done;
        }
        if (strcmp(hlo, "composite") == 0) {
            ok = composite(r, op_pos, &kvs, n_ops, ops, outs, n_out, &result);
            goto define;
        }
        if (strcmp(hlo, "send") == 0 || strcmp(hlo, "recv") == 0 || strcmp(hlo, "infeed") == 0 ||
            strcmp(hlo, "outfeed") == 0) {
            ok = n_regions == 0 ? transfer(r, hlo, op_pos, &kvs, n_ops, ops, outs, n_out, &result)
                                : mlir_fail_at(r, op_pos, "'%s' takes no regions", opname);
            goto define;
        }
        if (strcmp(hlo, "constant") == 0 || strcmp(hlo, "custom_call") == 0) {
            mlir_fail_at(r, op_pos, "the generic form of '%s' is not supported yet", opname);
            goto done;
        }
        ok =
            build_op(r, opname, op_pos, n_ops, ops, outs, n_out, &kvs, n_regions, regions, &result);
        goto define;
    }

    if (strcmp(hlo, "constant") == 0 || strcmp(opname, "sdy.constant") == 0) {
        /* stablehlo.constant [{mhlo.sharding = "..."}] dense<...> : type */
        if (mlir_peek(r) == '{' && (r->pos++, !mlir_parse_kv_list(r, &kvs, '}'))) goto done;
        mlir_skip_ws(r);
        size_t lit_pos = r->pos;
        if (!mlir_accept_word(r, "dense")) {
            FAIL(r, "expected a dense<...> literal, found %s", mlir_found(r));
            goto done;
        }
        mlir_skip_ws(r);
        if (mlir_cur(r) != '<') {
            FAIL(r, "expected '<' after 'dense'");
            goto done;
        }
        if (!mlir_skip_balanced(r) || !mlir_expect(r, ':', "before the constant's type") ||
            !mlir_parse_type(r, &outs[0]))
            goto done;
        size_t end = r->pos;
        r->pos = lit_pos + 5;
        mlir_skip_ws(r);
        r->pos++;
        gs_literal_ir *lit;
        if (!mlir_parse_dense_body(r, outs[0], &lit)) goto done;
        r->pos = end;
        r->b.span = mlir_span_at(r, op_pos);
        result = gs_build(&r->b, GS_OP_CONSTANT, outs[0], 0, NULL);
        if (!result) {
            mlir_oom(r);
            goto done;
        }
        result->literal = lit;
        if (opname[0] == 's' && opname[1] == 'd') {
            /* sdy.constant: kept to print back, as a frontend attribute XLA's HLO reader takes */
            if (gs_instr_mark_sdy_constant(r->m, result) != GS_OK) {
                mlir_oom(r);
                goto done;
            }
        }
        n_out = 1;
        ok = true;
        goto define;
    }
    if (strcmp(opname, "call") == 0 || strcmp(opname, "func.call") == 0 ||
        strcmp(hlo, "custom_call") == 0) {
        const char *callee;
        if (!mlir_parse_symbol(r, &callee) || !mlir_expect(r, '(', "opening the arguments") ||
            !parse_operand_list(r, ops, &n_ops, MAX_OPS) ||
            !mlir_expect(r, ')', "closing the arguments"))
            goto done;
        if (mlir_peek(r) == '{' && (r->pos++, !mlir_parse_kv_list(r, &kvs, '}'))) goto done;
        if (!mlir_expect(r, ':', "before the call's type") ||
            !mlir_parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS) ||
            !result_types(r, ins, n_in, outs, &n_out))
            goto done;
        if (opname[0] == 's' &&
            (strcmp(callee, "Sharding") == 0 || strcmp(callee, "SPMDFullToShardShape") == 0 ||
             strcmp(callee, "SPMDShardToFullShape") == 0)) {
            /* the partitioner's own custom-calls (their mhlo.sharding is set below) */
            if (n_ops != 1 || n_out != 1) {
                mlir_fail_at(r, op_pos, "custom_call @%s takes one operand and has one result",
                             callee);
                goto done;
            }
        }
        if (opname[0] == 's' && strncmp(callee, "check.", 6) != 0) {
            /* any other target: a custom-call of it, as HLO text has (the interpreter and the
             * partitioner say what they do not run) */
            gs_shape *shape = n_out == 1 ? outs[0] : gs_shape_tuple(r->a, n_out, outs);
            r->b.span = mlir_span_at(r, op_pos);
            result = shape ? mlir_custom_call(r, callee, shape, n_ops, ops, NULL) : NULL;
            const kv *se = mlir_find_kv(&kvs, "has_side_effect");
            if (result && se && se->is_int && se->a[0])
                gs_build_set_bool(&r->b, result, GS_ATTR_CUSTOM_CALL_HAS_SIDE_EFFECT, true);
            const kv *bc = mlir_find_kv(&kvs, "backend_config");
            if (result && bc && bc->ident) { /* kept quoted and escaped, as HLO text has it */
                gs_attr at = {.key = GS_ATTR_BACKEND_CONFIG, .name = "backend_config"};
                at.u.s = quoted(r->a, bc->ident);
                if (!at.u.s || gs_instr_set_attr(r->m, result, &at) != GS_OK) result = NULL;
            }
            const kv *cc = mlir_find_kv(&kvs, "called_computations");
            if (result && cc && !called_computations(r, result, cc)) goto done;
            ok = (result && !r->b.failed) || mlir_oom(r);
            goto define;
        }
        if (opname[0] == 's') {
            check_target = callee;
            result = build_check(r, check_target, n_ops, ops, n_out == 1 ? outs[0] : NULL, op_pos);
            if (!result) {
                mlir_oom(r);
                goto done;
            }
            ok = true;
            goto define;
        }
        result = build_call(r, callee, n_ops, ops, outs, n_out, op_pos);
        ok = result || mlir_oom(r);
        goto define;
    }
    if (strncmp(opname, "sdy.", 4) == 0) {
        int n_results;
        if (!mlir_parse_sdy_op(r, opname, op_pos, &result, &n_results)) goto done;
        if (n_results == 0) {
            ok = n_res == 0 || mlir_fail_at(r, start, "'%s' has no results", opname);
            goto done;
        }
        n_out = n_results;
        ok = true;
        goto define;
    }
    if (strncmp(opname, "stablehlo.", 10) != 0) {
        mlir_fail_at(r, op_pos, "unknown or unsupported op '%s'", opname);
        goto done;
    }
    if (strcmp(hlo, "composite") == 0) {
        /* stablehlo.composite "name" %a, %b {decomposition = @f, ...} : (T, T) -> R */
        const char *name;
        if (!mlir_parse_string(r, &name) || !parse_operand_list(r, ops, &n_ops, MAX_OPS) ||
            (mlir_peek(r) == '{' && (r->pos++, !mlir_parse_kv_list(r, &kvs, '}'))) ||
            !mlir_expect(r, ':', "before the composite's type") ||
            !mlir_parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS) ||
            !result_types(r, ins, n_in, outs, &n_out))
            goto done;
        ok = composite(r, op_pos, &kvs, n_ops, ops, outs, n_out, &result);
        goto define;
    }
    if (strcmp(hlo, "while") == 0 && mlir_peek(r) == '(') {
        /* (%a = %x, ...) : T, ... cond { ... } do { ... }: HLO's while over the tuple of them */
        const char *names[MAX_OPS];
        r->pos++;
        do {
            int idx;
            if (n_ops >= MAX_OPS) {
                FAIL(r, "too many while operands");
                goto done;
            }
            if (!mlir_parse_value_name(r, &names[n_ops], &idx, false) ||
                !mlir_expect(r, '=', "after a while argument") ||
                !mlir_lookup_value(r, &ops[n_ops]))
                goto done;
            n_ops++;
        } while (mlir_accept(r, ','));
        if (!mlir_expect(r, ')', "closing the while arguments")) goto done;
        if (mlir_peek(r) == '{' && (r->pos++, !mlir_parse_kv_list(r, &kvs, '}'))) goto done;
        if (!mlir_expect(r, ':', "before the while's types")) goto done;
        n_out = 0;
        do {
            if (n_out >= n_ops) {
                FAIL(r, "more while types than arguments");
                goto done;
            }
            if (!mlir_parse_type(r, &outs[n_out++])) goto done;
        } while (mlir_accept(r, ','));
        if (n_out != n_ops) {
            mlir_fail_at(r, op_pos, "the while has %d arguments and %d types", n_ops, n_out);
            goto done;
        }
        if (mlir_accept_word(r, "attributes") &&
            (!mlir_expect(r, '{', "opening the while's attributes") ||
             !mlir_parse_kv_list(r, &kvs, '}')))
            goto done;
        /* values the regions use from around the loop ride along as extra loop state, which
         * the body passes on unchanged (HLO's regions see only their parameter) */
        int n_state = n_ops, counts[MAX_OPS];
        for (int i = 0; i < n_ops; i++) counts[i] = 1;
        if (!while_captures(r, names, ops, outs, counts, &n_state)) goto done;
        gs_shape *tupled = gs_shape_tuple(r->a, n_state, outs);
        r->b.span = mlir_span_at(r, op_pos);
        gs_instr *init = tupled ? gs_build_tuple(&r->b, n_state, ops) : NULL;
        if (!init) {
            mlir_oom(r);
            goto done;
        }
        if (!mlir_accept_word(r, "cond")) {
            FAIL(r, "expected 'cond' after the while's types, found %s", mlir_found(r));
            goto done;
        }
        r->region_arg_counts = counts;
        if (!mlir_parse_region(r, "region", n_state, names, outs, tupled, &regions[0])) goto done;
        if (!mlir_accept_word(r, "do")) {
            FAIL(r, "expected 'do' after the while's condition, found %s", mlir_found(r));
            goto done;
        }
        r->region_arg_counts = counts;
        if (!mlir_parse_region(r, "region", n_state, names, outs, tupled, &regions[1]) ||
            !pass_captures_on(r, regions[1], n_ops, n_state, op_pos))
            goto done;
        ok = build_op(r, opname, op_pos, 1, &init, &tupled, 1, &kvs, 2, regions, &result);
        if (ok && n_state > n_ops) { /* the loop's own results only */
            gs_instr *own[MAX_OPS];
            for (int i = 0; i < n_ops && ok; i++) ok = (own[i] = gs_build_gte(&r->b, result, i));
            ok = ok && (result = gs_build_tuple(&r->b, n_ops, own));
            if (!ok) mlir_oom(r);
        }
        goto define;
    }
    if (strcmp(hlo, "reduce") == 0) {
        /* (%x init: %i), (%y init: %j) [applies OP] across dimensions = [..] : type [reducer] */
        gs_instr *inits[MAX_OPS / 2];
        int n_inits = 0;
        while (mlir_accept(r, '(')) {
            if (n_ops >= MAX_OPS / 2) {
                FAIL(r, "too many operands");
                goto done;
            }
            if (!mlir_lookup_value(r, &ops[n_ops++]) || !mlir_accept_word(r, "init") ||
                !mlir_expect(r, ':', "after 'init'") || !mlir_lookup_value(r, &inits[n_inits++]) ||
                !mlir_expect(r, ')', "closing a reduce operand"))
                goto done;
            if (!mlir_accept(r, ',')) break;
        }
        for (int i = 0; i < n_inits; i++) ops[n_ops++] = inits[i];
        const char *applies = NULL;
        if (mlir_accept_word(r, "applies") && !mlir_parse_ident(r, &applies, "the reduction op"))
            goto done;
        kv k = {.key = "dimensions"};
        if (!mlir_accept_word(r, "across") || !mlir_accept_word(r, "dimensions") ||
            !mlir_expect(r, '=', "after 'dimensions'") ||
            !mlir_parse_int_list(r, k.a, &k.n_a, "the reduced dimensions")) {
            FAIL(r, "expected 'across dimensions = [...]' in reduce, found %s", mlir_found(r));
            goto done;
        }
        if (gs_vec_push(&kvs, &k) != GS_OK) {
            mlir_oom(r);
            goto done;
        }
        /* an attribute dictionary may follow (`{sdy.sharding = ...}`) */
        if (mlir_peek(r) == '{' && (r->pos++, !mlir_parse_kv_list(r, &kvs, '}'))) goto done;
        if (!mlir_expect(r, ':', "before the reduce's type") ||
            !mlir_parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS) ||
            !result_types(r, ins, n_in, outs, &n_out))
            goto done;
        if (applies) {
            if (n_inits != 1 || !gs_shape_is_array(ops[1]->shape)) {
                mlir_fail_at(r, op_pos, "'applies' needs one operand");
                goto done;
            }
            if (!applies_comp(r, applies, ops[1]->shape->type, &regions[0])) goto done;
        } else {
            if (!mlir_accept_word(r, "reducer")) {
                FAIL(r, "expected 'reducer' after the reduce's type, found %s", mlir_found(r));
                goto done;
            }
            if (!parse_reducer(r, &regions[0])) goto done;
        }
        n_regions = 1;
        ok =
            build_op(r, opname, op_pos, n_ops, ops, outs, n_out, &kvs, n_regions, regions, &result);
        goto define;
    }
    if (strcmp(hlo, "compare") == 0) {
        kv k = {.key = "direction"};
        if (!mlir_parse_ident(r, &k.ident, "a comparison direction") ||
            !mlir_expect(r, ',', "after the direction") || gs_vec_push(&kvs, &k) != GS_OK)
            goto done;
    }
    /* the generic pretty form: operands (parenthesised for convolution), `[slice]`,
     * `key = value` pairs, `{dict}`, `: types` */
    bool parens = strcmp(hlo, "convolution") == 0 && mlir_accept(r, '(');
    if (strcmp(hlo, "optimization_barrier") == 0 && mlir_peek(r) == '{' &&
        (r->pos++, !mlir_parse_kv_list(r, &kvs, '}'))) /* its attributes come first */
        goto done;
    if (!parse_operand_list(r, ops, &n_ops, MAX_OPS) ||
        (parens && !mlir_expect(r, ')', "closing the operands")))
        goto done;
    if (strcmp(hlo, "slice") == 0 && mlir_peek(r) == '[') {
        kv st = {.key = "start_indices"}, li = {.key = "limit_indices"}, sd = {.key = "strides"};
        r->pos++;
        if (!mlir_accept(r, ']')) {
            do {
                if (st.n_a >= GS_MAX_RANK) {
                    FAIL(r, "slice of too many dimensions");
                    goto done;
                }
                int j = st.n_a++;
                li.n_a++;
                sd.n_a++;
                sd.a[j] = 1;
                if (!mlir_parse_int(r, &st.a[j], "a slice start") ||
                    !mlir_expect(r, ':', "in a slice") ||
                    !mlir_parse_int(r, &li.a[j], "a slice limit"))
                    goto done;
                if (mlir_accept(r, ':') && !mlir_parse_int(r, &sd.a[j], "a slice stride"))
                    goto done;
            } while (mlir_accept(r, ','));
            if (!mlir_expect(r, ']', "closing the slice")) goto done;
        }
        if (gs_vec_push(&kvs, &st) != GS_OK || gs_vec_push(&kvs, &li) != GS_OK ||
            gs_vec_push(&kvs, &sd) != GS_OK) {
            mlir_oom(r);
            goto done;
        }
    }
    gs_conv_dims *conv = NULL;
    gs_window *conv_window = NULL;
    if (strcmp(hlo, "convolution") == 0) {
        /* dim_numbers = [b, 0, f]x[0, i, o]->[b, 0, f], window = {...} */
        if (!mlir_accept_word(r, "dim_numbers") || !mlir_expect(r, '=', "after dim_numbers")) {
            FAIL(r, "expected 'dim_numbers = ...' in convolution, found %s", mlir_found(r));
            goto done;
        }
        if (!parse_conv_dims(r, &conv)) goto done;
        if (mlir_accept(r, ',') && mlir_accept_word(r, "window")) {
            if (!mlir_expect(r, '=', "after window") ||
                !parse_conv_window(r, conv->n_spatial, &conv_window))
                goto done;
        }
        if (!conv_window && !new_conv_window(r, conv->n_spatial, &conv_window)) goto done;
    }
    while (mlir_ident_len(r) && !mlir_at_word(r, "reducer")) {
        kv k = {0};
        if (!mlir_parse_ident(r, &k.key, "an attribute name")) goto done;
        if (mlir_accept(r, '=')) {
            if (!mlir_parse_attr_value(r, &k)) goto done;
        } else if (strcmp(hlo, "compare") == 0) {
            k.ident = k.key;
            k.key = "compare_type";
        }
        if (gs_vec_push(&kvs, &k) != GS_OK) {
            mlir_oom(r);
            goto done;
        }
        mlir_accept(r, ',');
    }
    if (mlir_peek(r) == '{' && (r->pos++, !mlir_parse_kv_list(r, &kvs, '}'))) goto done;
    if (!mlir_expect(r, ':', "before the op's type") ||
        !mlir_parse_type_spec(r, ins, &n_in, outs, &n_out, MAX_OPS))
        goto done;
    if (strcmp(opname, "stablehlo.optimization_barrier") == 0 && n_out < 0 && n_in == n_ops) {
        /* `stablehlo.optimization_barrier %a, %b : T, U`: a result per operand */
        for (int i = 0; i < n_in; i++) outs[i] = ins[i];
        n_out = n_in;
    }
    if (!result_types(r, ins, n_in, outs, &n_out)) goto done;
    ok = build_op(r, opname, op_pos, n_ops, ops, outs, n_out, &kvs, 0, regions, &result) &&
         (!conv || set_conv_attrs(r, result, conv, conv_window, op_pos));

define:
    if (!ok || !mlir_apply_op_sharding(r, result, &kvs) || !mlir_take_loc(r, result, op_pos))
        goto done;
    {
        int total = 0;
        for (int i = 0; i < n_res; i++) total += res_counts[i];
        int produced = gs_shape_is_tuple(result->shape) ? result->shape->n_tuple : 1;
        if (check_target && gs_shape_is_tuple(result->shape)) produced = 0;
        if (n_res > 1) {
            /* `%a, %b = op`: one name per result */
            if (total != n_res || check_target) {
                ok = mlir_fail_at(r, start, "several result groups are not supported yet");
                goto done;
            }
            if (total != produced) {
                ok = mlir_fail_at(r, start, "the op has %d results, %d are named", produced, total);
                goto done;
            }
            for (int i = 0; i < n_res && ok; i++) {
                gs_instr *g = gs_build_gte(&r->b, result, i);
                ok = g ? mlir_define_value(r, res_names[i], g, 1) : mlir_oom(r);
            }
            goto done;
        }
        if (total != produced && !(total == 1 && produced != 1 && n_out == 1)) {
            ok = mlir_fail_at(r, start, "the op has %d results, %d are named", produced, total);
            goto done;
        }
        if (n_res == 1) ok = mlir_define_value(r, res_names[0], result, res_counts[0]);
    }
done:
    gs_vec_free(&kvs);
    return ok && !r->failed;
}
