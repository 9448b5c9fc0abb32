/*
 * scalar.c — fast calls of scalar computations: comparators of sort, reducers that are not one
 * binary op, scatter combiners, select-and-scatter's select. They run once per element (millions
 * of times for one sort), so a computation whose parameters and instructions are all scalars of
 * at most 8 bytes and whose ops are elementwise (unary, binary, compare, select, clamp, convert,
 * bitcast-convert), constants and tuples of scalars is compiled once per evaluation into a list
 * of steps over 8-byte slots, and each call runs the steps: no allocation, no planning. Anything
 * else takes the general path (gs_eval_call). Results are bit-identical to the general path:
 * the steps call the same scalar functions the kernels use.
 */
#include "kernels.h"
#include "base/sysalloc.h"

#include <stdlib.h>
#include <string.h>

/* Steps with a direct form (the common ones of comparators: 4-byte integer arithmetic, compares
 * of 4-byte and pred values, bf16 to f32), else FAST_NONE and the scalar functions. */
enum {
    FAST_NONE,
    FAST_ADD32,
    FAST_SUB32,
    FAST_MUL32,
    FAST_CMP_S32,
    FAST_CMP_U32,
    FAST_CMP_F32,
    FAST_CMP_U8,
    FAST_BF16_F32
};
enum { DIR_EQ, DIR_NE, DIR_LT, DIR_LE, DIR_GT, DIR_GE };

/* One instruction of a compiled scalar computation. */
typedef struct step {
    const gs_instr *in;    /* the instruction (opcode, types, attributes) */
    int a, b, c;           /* operand slots (-1: none) */
    int fast, dir;         /* FAST_*, DIR_* */
    gs_op_family family;   /* the opcode's, looked up once */
    gs_type ot, rt;        /* operand 0's and the result's types */
    const char *direction; /* compare's attributes, looked up once */
    const char *cmp_type;
} step;

static int direction_of(const char *d) {
    static const char *const names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
    for (int i = 0; d && i < 6; i++)
        if (strcmp(d, names[i]) == 0) return i;
    return -1;
}

/* Fills s's looked-up fields and picks its direct form. */
static void resolve(step *s) {
    const gs_instr *in = s->in;
    s->family = gs_op_info_of(in->op)->family;
    s->rt = in->shape->type;
    s->ot = in->n_operands > 0 ? in->operands[0]->shape->type : s->rt;
    s->fast = FAST_NONE;
    bool w32 = s->ot == GS_S32 || s->ot == GS_U32;
    if (s->family == GS_FAM_BINARY && w32 && s->rt == s->ot &&
        in->operands[1]->shape->type == s->ot) {
        s->fast = in->op == GS_OP_ADD        ? FAST_ADD32
                  : in->op == GS_OP_SUBTRACT ? FAST_SUB32
                  : in->op == GS_OP_MULTIPLY ? FAST_MUL32
                                             : FAST_NONE;
    } else if (s->family == GS_FAM_COMPARE) {
        s->direction = gs_instr_str(in, GS_ATTR_DIRECTION);
        s->cmp_type = gs_instr_str(in, GS_ATTR_TYPE);
        s->dir = direction_of(s->direction);
        bool total = s->cmp_type && strcmp(s->cmp_type, "TOTALORDER") == 0;
        if (s->dir >= 0 && !total && in->operands[1]->shape->type == s->ot)
            s->fast = s->ot == GS_S32                      ? FAST_CMP_S32
                      : s->ot == GS_U32                    ? FAST_CMP_U32
                      : s->ot == GS_F32                    ? FAST_CMP_F32
                      : s->ot == GS_PRED || s->ot == GS_U8 ? FAST_CMP_U8
                                                           : FAST_NONE;
    } else if (in->op == GS_OP_CONVERT && s->ot == GS_BF16 && s->rt == GS_F32) {
        s->fast = FAST_BF16_F32;
    }
}

/* x dir y with C's comparisons (false on NaN except NE, as gs_scalar_compare). */
#define CMP_DIR(dir, x, y)                                                                         \
    ((dir) == DIR_EQ   ? (x) == (y)                                                                \
     : (dir) == DIR_NE ? (x) != (y)                                                                \
     : (dir) == DIR_LT ? (x) < (y)                                                                 \
     : (dir) == DIR_LE ? (x) <= (y)                                                                \
     : (dir) == DIR_GT ? (x) > (y)                                                                 \
                       : (x) >= (y))

/* A compiled scalar computation: slot i holds instruction i's value. */
struct gs_scalar_prog {
    const gs_computation *comp; /* its source */
    bool ok;                    /* compiled (else: take the general path) */
    int n_slots;
    uint64_t *init; /* slot values before a call: the constants */
    step *steps;    /* in evaluation order, parameters and constants excluded */
    int n_steps;
    int *param_slot; /* slot of parameter k */
    int root;        /* root slot, or -1 when the root is a tuple */
    int *out_slots;  /* the root tuple's operand slots */
    int n_out;
    gs_scalar_prog *next; /* the cache's chain */
};

static bool scalar_shape(const gs_shape *s) {
    return gs_shape_is_array(s) && s->rank == 0 && gs_type_size(s->type) <= 8 &&
           !gs_type_is_complex(s->type);
}

/* Can the step run on slots? */
static bool compilable(const gs_instr *in) {
    if (in->op == GS_OP_TUPLE) {
        for (int k = 0; k < in->n_operands; k++)
            if (!scalar_shape(in->operands[k]->shape)) return false;
        return in->is_root;
    }
    if (!scalar_shape(in->shape)) return false;
    for (int k = 0; k < in->n_operands; k++)
        if (!scalar_shape(in->operands[k]->shape)) return false;
    switch (gs_op_info_of(in->op)->family) {
    case GS_FAM_PARAMETER:
    case GS_FAM_CONSTANT:
    case GS_FAM_UNARY:
    case GS_FAM_BINARY:
    case GS_FAM_COMPARE:
    case GS_FAM_TERNARY: return in->op != GS_OP_CONSTANT || (in->literal && !in->literal->elided);
    case GS_FAM_CONVERT:
        return in->op == GS_OP_CONVERT ||
               (in->op == GS_OP_BITCAST_CONVERT &&
                gs_type_size(in->shape->type) == gs_type_size(in->operands[0]->shape->type));
    case GS_FAM_COPY: return in->op == GS_OP_COPY && in->n_operands == 1;
    default: return false;
    }
}

static gs_scalar_prog *compile(const gs_computation *c) {
    gs_scalar_prog *p = gs_sys_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->comp = c;
    int n = c->n_instrs;
    bool ok = c->root != NULL && n <= 4096;
    for (int i = 0; ok && i < n; i++) ok = compilable(c->instrs[i]);
    if (!ok) return p; /* p->ok false: general path */
    p->n_slots = n;
    p->init = gs_sys_calloc((size_t)n + 1, sizeof *p->init);
    p->steps = gs_sys_calloc((size_t)n + 1, sizeof *p->steps);
    p->param_slot = gs_sys_calloc((size_t)c->n_params + 1, sizeof *p->param_slot);
    char *done = gs_sys_calloc((size_t)n + 1, 1);
    if (!p->init || !p->steps || !p->param_slot || !done) {
        free(done);
        return p;
    }
    /* Evaluation order: repeatedly the instructions whose operands are ready (n is small). */
    int placed = 0;
    for (int i = 0; i < n; i++) {
        const gs_instr *in = c->instrs[i];
        if (in->op == GS_OP_PARAMETER) {
            if (in->parameter_number < c->n_params) p->param_slot[in->parameter_number] = i;
            done[i] = 1;
            placed++;
        } else if (in->op == GS_OP_CONSTANT) {
            memcpy(&p->init[i], in->literal->data, (size_t)gs_type_size(in->shape->type));
            done[i] = 1;
            placed++;
        }
    }
    for (bool progress = true; progress && placed < n;) {
        progress = false;
        for (int i = 0; i < n; i++) {
            const gs_instr *in = c->instrs[i];
            if (done[i] || in->op == GS_OP_TUPLE) continue;
            bool ready = true;
            for (int k = 0; k < in->n_operands; k++) ready = ready && done[in->operands[k]->id];
            if (!ready) continue;
            step *s = &p->steps[p->n_steps++];
            s->in = in;
            s->a = in->n_operands > 0 ? in->operands[0]->id : -1;
            s->b = in->n_operands > 1 ? in->operands[1]->id : -1;
            s->c = in->n_operands > 2 ? in->operands[2]->id : -1;
            resolve(s);
            done[i] = 1;
            placed++;
            progress = true;
        }
    }
    if (c->root->op == GS_OP_TUPLE) {
        p->root = -1;
        p->n_out = c->root->n_operands;
        p->out_slots = gs_sys_calloc((size_t)p->n_out + 1, sizeof *p->out_slots);
        for (int k = 0; p->out_slots && k < p->n_out; k++)
            p->out_slots[k] = c->root->operands[k]->id;
        ok = p->out_slots != NULL;
        placed++; /* the root tuple */
    } else {
        p->root = c->root->id;
    }
    free(done);
    /* Unreached instructions (dead code) are fine; a cycle would leave the root unplaced. */
    p->ok = ok && (p->root < 0 || p->root < n);
    return p;
}

/* The compiled form of c, from ev's cache (compiled on first use). NULL on allocation failure. */
static gs_scalar_prog *program(gs_eval *ev, const gs_computation *c) {
    for (gs_scalar_prog *p = ev->scalars; p; p = p->next)
        if (p->comp == c) return p;
    gs_scalar_prog *p = compile(c);
    if (!p) return NULL;
    p->next = ev->scalars;
    ev->scalars = p;
    return p;
}

void gs_scalar_progs_free(gs_scalar_prog *p) {
    while (p) {
        gs_scalar_prog *next = p->next;
        free(p->init);
        free(p->steps);
        free(p->param_slot);
        free(p->out_slots);
        free(p);
        p = next;
    }
}

/* Runs the steps on slots (sized n_slots, constants and parameters filled). */
static void run_steps(const gs_scalar_prog *p, uint64_t *slot) {
    for (int i = 0; i < p->n_steps; i++) {
        const step *s = &p->steps[i];
        const gs_instr *in = s->in;
        gs_type rt = s->rt;
        void *out = &slot[in->id];
        if (s->fast == FAST_BF16_F32) {
            /* exact; a signalling NaN comes out quiet, as through the double the general
             * conversion takes */
            uint16_t h;
            memcpy(&h, &slot[s->a], 2);
            float f = gs_bf16_to_float(h);
            uint32_t z;
            memcpy(&z, &f, 4);
            if ((z & 0x7f800000u) == 0x7f800000u && (z & 0x007fffffu)) z |= 0x00400000u;
            slot[in->id] = 0;
            memcpy(out, &z, 4);
            continue;
        }
        if (s->fast != FAST_NONE) {
            uint32_t x = 0, y = 0;
            if (s->fast == FAST_CMP_U8) {
                x = *(const unsigned char *)&slot[s->a];
                y = *(const unsigned char *)&slot[s->b];
            } else {
                memcpy(&x, &slot[s->a], 4);
                memcpy(&y, &slot[s->b], 4);
            }
            uint32_t z = 0;
            bool r = false;
            switch (s->fast) {
            case FAST_ADD32: z = x + y; break;
            case FAST_SUB32: z = x - y; break;
            case FAST_MUL32: z = x * y; break;
            case FAST_CMP_S32: r = CMP_DIR(s->dir, (int32_t)x, (int32_t)y); break;
            case FAST_CMP_U32:
            case FAST_CMP_U8: r = CMP_DIR(s->dir, x, y); break;
            default: {
                float u, v;
                memcpy(&u, &x, 4);
                memcpy(&v, &y, 4);
                r = CMP_DIR(s->dir, u, v);
            }
            }
            slot[in->id] = 0;
            if (s->family == GS_FAM_COMPARE)
                *(unsigned char *)out = r;
            else
                memcpy(out, &z, 4);
            continue;
        }
        switch (s->family) {
        case GS_FAM_UNARY: gs_scalar_unary(in->op, s->ot, &slot[s->a], 0, rt, out, 0); break;
        case GS_FAM_BINARY:
            gs_scalar_binary(in->op, s->ot, &slot[s->a], 0, &slot[s->b], 0, rt, out, 0);
            break;
        case GS_FAM_COMPARE: {
            bool r =
                gs_scalar_compare(s->ot, &slot[s->a], 0, &slot[s->b], 0, s->direction, s->cmp_type);
            slot[in->id] = 0;
            *(unsigned char *)out = r;
            break;
        }
        case GS_FAM_TERNARY:
            if (in->op == GS_OP_SELECT) {
                slot[in->id] = *(unsigned char *)&slot[s->a] ? slot[s->b] : slot[s->c];
            } else { /* clamp(lo, x, hi) */
                gs_scalar_binary(GS_OP_MAXIMUM, rt, &slot[s->a], 0, &slot[s->b], 0, rt, out, 0);
                gs_scalar_binary(GS_OP_MINIMUM, rt, out, 0, &slot[s->c], 0, rt, out, 0);
            }
            break;
        case GS_FAM_CONVERT:
            if (in->op == GS_OP_BITCAST_CONVERT)
                slot[in->id] = slot[s->a];
            else
                gs_scalar_convert(s->ot, &slot[s->a], 0, rt, out, 0);
            break;
        default: /* copy */ slot[in->id] = slot[s->a]; break;
        }
    }
}

gs_status gs_eval_scalar_call(gs_eval *ev, const gs_computation *c, gs_value *const *args,
                              int n_args, gs_value **out, bool *handled) {
    *handled = false;
    gs_scalar_prog *p = program(ev, c);
    if (!p || !p->ok || n_args != c->n_params) return GS_OK;
    for (int k = 0; k < n_args; k++)
        if (!gs_value_matches(args[k], c->params[k]->shape) || args[k]->devices) return GS_OK;
    uint64_t stack[64],
        *slot = p->n_slots <= 64 ? stack : gs_sys_malloc(sizeof *slot * (size_t)p->n_slots);
    if (!slot) return gs_eval_oom(ev, c->root);
    memcpy(slot, p->init, sizeof *slot * (size_t)p->n_slots);
    for (int k = 0; k < n_args; k++)
        memcpy(&slot[p->param_slot[k]], args[k]->data, (size_t)gs_type_size(args[k]->type));
    run_steps(p, slot);
    gs_status st = GS_OK;
    if (p->root >= 0) {
        gs_value *r = gs_value_new_array(c->root->shape->type, 0, NULL);
        if (r) memcpy(r->data, &slot[p->root], (size_t)gs_type_size(r->type));
        *out = r;
        if (!r) st = gs_eval_oom(ev, c->root);
    } else {
        gs_value *el[64];
        int n = p->n_out <= 64 ? p->n_out : 0;
        for (int k = 0; k < n; k++) {
            const gs_shape *s = c->root->operands[k]->shape;
            el[k] = gs_value_new_array(s->type, 0, NULL);
            if (el[k]) memcpy(el[k]->data, &slot[p->out_slots[k]], (size_t)gs_type_size(s->type));
        }
        bool all = p->n_out <= 64;
        for (int k = 0; all && k < n; k++) all = el[k] != NULL;
        *out = all ? gs_value_new_tuple(n, el) : NULL;
        if (!*out) {
            for (int k = 0; k < n && !all; k++) gs_value_free(el[k]);
            st = gs_eval_oom(ev, c->root);
        }
    }
    if (slot != stack) free(slot);
    *handled = st == GS_OK;
    return st;
}

gs_status gs_eval_scalar_pred(gs_eval *ev, const gs_computation *c, const gs_type *types,
                              const void *const *data, const int64_t *index, int n_args,
                              bool *result, bool *handled) {
    *handled = false;
    gs_scalar_prog *p = program(ev, c);
    if (!p || !p->ok || n_args != c->n_params || p->root < 0 || c->root->shape->type != GS_PRED)
        return GS_OK;
    for (int k = 0; k < n_args; k++)
        if (c->params[k]->shape->type != types[k]) return GS_OK;
    uint64_t stack[64],
        *slot = p->n_slots <= 64 ? stack : gs_sys_malloc(sizeof *slot * (size_t)p->n_slots);
    if (!slot) return gs_eval_oom(ev, c->root);
    memcpy(slot, p->init, sizeof *slot * (size_t)p->n_slots);
    for (int k = 0; k < n_args; k++) {
        int sz = gs_type_size(types[k]);
        memcpy(&slot[p->param_slot[k]], (const char *)data[k] + index[k] * sz, (size_t)sz);
    }
    run_steps(p, slot);
    *result = *(unsigned char *)&slot[p->root] != 0;
    if (slot != stack) free(slot);
    *handled = true;
    return GS_OK;
}
