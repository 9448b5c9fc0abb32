/*
 * printer.c — gs_module → canonical XLA HLO text.
 *
 * The form is XLA's HloModule::ToString with `%` names, operand names without shapes, long
 * computation headers (`%name (p: f32[]) -> f32[] {`), attributes in canonical order
 * (attrs.def), window/slice/padding fields written only when not default, and every constant
 * value written out. Printing is a fixed point: what the parser reads back prints the same.
 */
#include "gspmd/numeric.h"
#include "gspmd/sharding.h"
#include "gspmd/text.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void print_ints(gs_sb *sb, const int64_t *v, int n, const char *sep) {
    for (int i = 0; i < n; i++) {
        if (i) gs_sb_puts(sb, sep);
        gs_sb_printf(sb, "%" PRId64, v[i]);
    }
}

static void print_escaped(gs_sb *sb, const char *s) {
    gs_sb_putc(sb, '"');
    for (; *s; s++) {
        switch (*s) {
        case '"': gs_sb_puts(sb, "\\\""); break;
        case '\\': gs_sb_puts(sb, "\\\\"); break;
        case '\n': gs_sb_puts(sb, "\\n"); break;
        case '\t': gs_sb_puts(sb, "\\t"); break;
        default: gs_sb_putc(sb, *s); break;
        }
    }
    gs_sb_putc(sb, '"');
}

/* ------------------------------------------------------------------ literals */

static void print_element(gs_sb *sb, gs_type t, const void *data, int64_t i) {
    char buf[64];
    if (t == GS_PRED) {
        gs_sb_puts(sb, gs_elem_get_i(data, t, i) ? "true" : "false");
    } else if (gs_type_is_complex(t)) {
        double re, im;
        gs_elem_get_c(data, t, i, &re, &im);
        if (t == GS_C64) {
            char b2[64];
            gs_format_float(buf, sizeof buf, (float)re);
            gs_format_float(b2, sizeof b2, (float)im);
            gs_sb_printf(sb, "(%s, %s)", buf, b2);
        } else {
            char b2[64];
            gs_format_double(buf, sizeof buf, re);
            gs_format_double(b2, sizeof b2, im);
            gs_sb_printf(sb, "(%s, %s)", buf, b2);
        }
    } else if (t == GS_F64) {
        gs_format_double(buf, sizeof buf, gs_elem_get_f(data, t, i));
        gs_sb_puts(sb, buf);
    } else if (t == GS_F32) {
        gs_format_float(buf, sizeof buf, (float)gs_elem_get_f(data, t, i));
        gs_sb_puts(sb, buf);
    } else if (gs_type_is_float(t)) {
        /* Narrow floats: the shortest decimal that encodes back to the same bits. */
        double v = gs_elem_get_f(data, t, i);
        uint16_t bits = gs_narrow_from_double(t, v);
        if (isnan(v) || isinf(v)) {
            gs_format_double(buf, sizeof buf, v);
        } else {
            for (int p = 1; p <= 17; p++) {
                snprintf(buf, sizeof buf, "%.*g", p, v);
                if (gs_narrow_from_double(t, strtod(buf, NULL)) == bits) break;
            }
        }
        gs_sb_puts(sb, buf);
    } else if (t == GS_U64) {
        gs_sb_printf(sb, "%" PRIu64, (uint64_t)gs_elem_get_i(data, t, i));
    } else {
        gs_sb_printf(sb, "%" PRId64, gs_elem_get_i(data, t, i));
    }
}

/* Writes dims [d..rank) of the array starting at element *next. */
static void print_array_level(gs_sb *sb, const gs_shape *s, const void *data, int d, int64_t *next) {
    if (d == s->rank) {
        print_element(sb, s->type, data, (*next)++);
        return;
    }
    gs_sb_putc(sb, '{');
    bool inner = d + 1 < s->rank;
    if (inner) gs_sb_putc(sb, ' ');
    for (int64_t i = 0; i < s->dims[d]; i++) {
        if (i) gs_sb_puts(sb, ", ");
        print_array_level(sb, s, data, d + 1, next);
    }
    if (inner) gs_sb_putc(sb, ' ');
    gs_sb_putc(sb, '}');
}

static void print_literal(gs_sb *sb, const gs_shape *s, const gs_literal_ir *lit) {
    if (s->type == GS_TUPLE) {
        gs_sb_putc(sb, '(');
        for (int i = 0; i < s->n_tuple; i++) {
            if (i) gs_sb_puts(sb, ", ");
            print_literal(sb, s->tuple[i], lit->tuple[i]);
        }
        gs_sb_putc(sb, ')');
        return;
    }
    if (lit->elided) {
        gs_sb_puts(sb, "{...}");
        return;
    }
    int64_t next = 0;
    if (s->rank == 0)
        print_element(sb, s->type, lit->data, 0);
    else
        print_array_level(sb, s, lit->data, 0, &next);
}

/* ------------------------------------------------------------------ attributes */

static void print_window(gs_sb *sb, const gs_window *w) {
    gs_sb_putc(sb, '{');
    if (w->n > 0) {
        bool stride = false, pad = false, ld = false, rd = false, rev = false;
        for (int i = 0; i < w->n; i++) {
            const gs_window_dim *d = &w->dims[i];
            stride |= d->stride != 1;
            pad |= d->pad_lo != 0 || d->pad_hi != 0;
            ld |= d->lhs_dilate != 1;
            rd |= d->rhs_dilate != 1;
            rev |= d->reversal;
        }
        gs_sb_puts(sb, "size=");
        for (int i = 0; i < w->n; i++) gs_sb_printf(sb, "%s%" PRId64, i ? "x" : "", w->dims[i].size);
        if (stride) {
            gs_sb_puts(sb, " stride=");
            for (int i = 0; i < w->n; i++)
                gs_sb_printf(sb, "%s%" PRId64, i ? "x" : "", w->dims[i].stride);
        }
        if (pad) {
            gs_sb_puts(sb, " pad=");
            for (int i = 0; i < w->n; i++)
                gs_sb_printf(sb, "%s%" PRId64 "_%" PRId64, i ? "x" : "", w->dims[i].pad_lo,
                             w->dims[i].pad_hi);
        }
        if (ld) {
            gs_sb_puts(sb, " lhs_dilate=");
            for (int i = 0; i < w->n; i++)
                gs_sb_printf(sb, "%s%" PRId64, i ? "x" : "", w->dims[i].lhs_dilate);
        }
        if (rd) {
            gs_sb_puts(sb, " rhs_dilate=");
            for (int i = 0; i < w->n; i++)
                gs_sb_printf(sb, "%s%" PRId64, i ? "x" : "", w->dims[i].rhs_dilate);
        }
        if (rev) {
            gs_sb_puts(sb, " rhs_reversal=");
            for (int i = 0; i < w->n; i++) gs_sb_printf(sb, "%s%d", i ? "x" : "", w->dims[i].reversal ? 1 : 0);
        }
    }
    gs_sb_putc(sb, '}');
}

static void print_conv_part(gs_sb *sb, int rank, int64_t a, char ca, int64_t b, char cb,
                            const int64_t *spatial, int ns) {
    for (int i = 0; i < rank; i++) {
        char ch = '?';
        if (i == a) ch = ca;
        else if (i == b) ch = cb;
        else
            for (int k = 0; k < ns; k++)
                if (spatial[k] == i) ch = (char)('0' + k);
        gs_sb_putc(sb, ch);
    }
}

static void print_conv_dims(gs_sb *sb, const gs_conv_dims *c) {
    print_conv_part(sb, c->in_rank, c->in_batch, 'b', c->in_feature, 'f', c->in_spatial, c->n_spatial);
    gs_sb_putc(sb, '_');
    print_conv_part(sb, c->k_rank, c->k_in_feature, 'i', c->k_out_feature, 'o', c->k_spatial,
                    c->n_spatial);
    gs_sb_puts(sb, "->");
    print_conv_part(sb, c->out_rank, c->out_batch, 'b', c->out_feature, 'f', c->out_spatial,
                    c->n_spatial);
}

static void print_groups(gs_sb *sb, const gs_replica_groups *g) {
    if (g->is_iota) {
        gs_sb_printf(sb, "[%d,%d]<=[", g->n_groups, g->group_size);
        print_ints(sb, g->iota_dims, g->n_iota_dims, ",");
        gs_sb_putc(sb, ']');
        if (g->perm) {
            gs_sb_puts(sb, "T(");
            for (int i = 0; i < g->n_iota_dims; i++) gs_sb_printf(sb, "%s%d", i ? "," : "", g->perm[i]);
            gs_sb_putc(sb, ')');
        }
        return;
    }
    gs_sb_putc(sb, '{');
    for (int i = 0; i < g->n_groups; i++) {
        if (i) gs_sb_putc(sb, ',');
        gs_sb_putc(sb, '{');
        print_ints(sb, g->groups[i], g->sizes[i], ",");
        gs_sb_putc(sb, '}');
    }
    gs_sb_putc(sb, '}');
}

void gs_print_attr_value(gs_sb *sb, const gs_attr *a) {
    gs_attr_kind kind = a->key == GS_ATTR_UNKNOWN ? GS_AK_RAW : gs_attr_kind_of(a->key);
    char buf[64];
    switch (kind) {
    case GS_AK_INT: gs_sb_printf(sb, "%" PRId64, a->u.i); break;
    case GS_AK_INTS:
        gs_sb_putc(sb, '{');
        print_ints(sb, a->u.ints.v, a->u.ints.n, ",");
        gs_sb_putc(sb, '}');
        break;
    case GS_AK_BOOL: gs_sb_puts(sb, a->u.b ? "true" : "false"); break;
    case GS_AK_FLOAT:
        gs_format_double(buf, sizeof buf, a->u.f);
        gs_sb_puts(sb, buf);
        break;
    case GS_AK_IDENT: gs_sb_puts(sb, a->u.s); break;
    case GS_AK_STRING: print_escaped(sb, a->u.s); break;
    case GS_AK_COMP: gs_sb_printf(sb, "%%%s", a->u.comp ? a->u.comp->name : "?"); break;
    case GS_AK_COMPS:
        if (a->braced || a->u.comps.n != 1) gs_sb_putc(sb, '{');
        for (int i = 0; i < a->u.comps.n; i++)
            gs_sb_printf(sb, "%s%%%s", i ? ", " : "", a->u.comps.v[i] ? a->u.comps.v[i]->name : "?");
        if (a->braced || a->u.comps.n != 1) gs_sb_putc(sb, '}');
        break;
    case GS_AK_SLICE:
        gs_sb_putc(sb, '{');
        for (int i = 0; i < a->u.slice.n; i++) {
            const gs_slice_dim *d = &a->u.slice.v[i];
            if (i) gs_sb_puts(sb, ", ");
            if (d->stride == 1)
                gs_sb_printf(sb, "[%" PRId64 ":%" PRId64 "]", d->start, d->limit);
            else
                gs_sb_printf(sb, "[%" PRId64 ":%" PRId64 ":%" PRId64 "]", d->start, d->limit, d->stride);
        }
        gs_sb_putc(sb, '}');
        break;
    case GS_AK_WINDOW: print_window(sb, a->u.window); break;
    case GS_AK_CONV_DIMS: print_conv_dims(sb, a->u.conv); break;
    case GS_AK_PADDING:
        for (int i = 0; i < a->u.padding->n; i++) {
            const gs_pad_dim *d = &a->u.padding->dims[i];
            if (i) gs_sb_putc(sb, 'x');
            gs_sb_printf(sb, "%" PRId64 "_%" PRId64, d->lo, d->hi);
            if (d->interior) gs_sb_printf(sb, "_%" PRId64, d->interior);
        }
        break;
    case GS_AK_GROUPS: print_groups(sb, a->u.groups); break;
    case GS_AK_PAIRS:
        gs_sb_putc(sb, '{');
        for (int i = 0; i < a->u.pairs.n; i++)
            gs_sb_printf(sb, "%s{%" PRId64 ",%" PRId64 "}", i ? "," : "", a->u.pairs.v[i][0],
                         a->u.pairs.v[i][1]);
        gs_sb_putc(sb, '}');
        break;
    case GS_AK_SHARDING: gs_sharding_print(sb, a->u.sharding); break;
    case GS_AK_RAW: gs_sb_puts(sb, a->u.s); break;
    }
}

/* ------------------------------------------------------------------ instructions */

void gs_print_instr(gs_sb *sb, const gs_instr *in) {
    gs_sb_printf(sb, "%%%s = ", in->name);
    gs_shape_print(sb, in->shape, true);
    gs_sb_printf(sb, " %s(", in->op_text ? in->op_text : gs_op_name(in->op));
    if (in->op == GS_OP_CONSTANT && in->literal) {
        print_literal(sb, in->shape, in->literal);
    } else if (in->op == GS_OP_PARAMETER) {
        gs_sb_printf(sb, "%" PRId64, in->parameter_number);
    } else {
        for (int i = 0; i < in->n_operands; i++)
            gs_sb_printf(sb, "%s%%%s", i ? ", " : "", in->operands[i]->name);
    }
    gs_sb_putc(sb, ')');
    for (int i = 0; i < in->n_attrs; i++) {
        gs_sb_printf(sb, ", %s=", in->attrs[i].name);
        gs_print_attr_value(sb, &in->attrs[i]);
    }
}

void gs_print_computation(gs_sb *sb, const gs_computation *c) {
    if (c->is_entry) gs_sb_puts(sb, "ENTRY ");
    gs_sb_printf(sb, "%%%s (", c->name);
    for (int i = 0; i < c->n_params; i++) {
        if (i) gs_sb_puts(sb, ", ");
        gs_sb_printf(sb, "%s: ", c->params[i]->name);
        gs_shape_print(sb, c->params[i]->shape, true);
    }
    gs_sb_puts(sb, ") -> ");
    gs_shape_print(sb, c->root->shape, true);
    gs_sb_puts(sb, " {\n");
    for (int i = 0; i < c->n_instrs; i++) {
        const gs_instr *in = c->instrs[i];
        gs_sb_puts(sb, in == c->root ? "  ROOT " : "  ");
        gs_print_instr(sb, in);
        gs_sb_putc(sb, '\n');
    }
    gs_sb_putc(sb, '}');
    if (c->execution_thread) {
        gs_sb_puts(sb, ", execution_thread=");
        print_escaped(sb, c->execution_thread);
    }
    gs_sb_putc(sb, '\n');
}

void gs_print_module(gs_sb *sb, const gs_module *m) {
    gs_sb_printf(sb, "HloModule %s", m->name);
    for (int i = 0; i < m->n_attrs; i++) gs_sb_printf(sb, ", %s=%s", m->attrs[i].name, m->attrs[i].text);
    gs_sb_puts(sb, "\n");
    if (m->stack_frames) {
        gs_sb_putc(sb, '\n');
        gs_sb_puts(sb, m->stack_frames);
    }
    for (int i = 0; i < m->n_comps; i++) {
        gs_sb_putc(sb, '\n');
        gs_print_computation(sb, m->comps[i]);
    }
}

char *gs_module_to_string(const gs_module *m) {
    gs_sb sb = {0};
    gs_print_module(&sb, m);
    return gs_sb_take(&sb);
}
