/*
 * shape.c — array, tuple and token shapes: construction, queries, equality and text.
 */
#include "gspmd/ir.h"

#include <string.h>

gs_shape *gs_shape_array(gs_arena *a, gs_type type, int rank, const int64_t *dims) {
    gs_shape *s = GS_NEW(a, gs_shape);
    if (!s) return NULL;
    s->type = type;
    s->rank = rank;
    if (rank > 0) {
        s->dims = gs_arena_memdup(a, dims, sizeof *dims * (size_t)rank);
        if (!s->dims) return NULL;
    }
    return s;
}

gs_shape *gs_shape_scalar(gs_arena *a, gs_type type) { return gs_shape_array(a, type, 0, NULL); }

gs_shape *gs_shape_tuple(gs_arena *a, int n, gs_shape *const *elems) {
    gs_shape *s = GS_NEW(a, gs_shape);
    if (!s) return NULL;
    s->type = GS_TUPLE;
    s->n_tuple = n;
    if (n > 0) {
        s->tuple = gs_arena_memdup(a, elems, sizeof *elems * (size_t)n);
        if (!s->tuple) return NULL;
    }
    return s;
}

gs_shape *gs_shape_token(gs_arena *a) {
    gs_shape *s = GS_NEW(a, gs_shape);
    if (s) s->type = GS_TOKEN;
    return s;
}

gs_shape *gs_shape_clone(gs_arena *a, const gs_shape *src) {
    gs_shape *s = GS_NEW(a, gs_shape);
    if (!s) return NULL;
    *s = *src;
    if (src->rank > 0) {
        s->dims = gs_arena_memdup(a, src->dims, sizeof *s->dims * (size_t)src->rank);
        if (!s->dims) return NULL;
        if (src->dynamic) {
            s->dynamic = gs_arena_memdup(a, src->dynamic, sizeof(bool) * (size_t)src->rank);
            if (!s->dynamic) return NULL;
        }
    }
    if (src->n_minor_to_major > 0) {
        s->minor_to_major = gs_arena_memdup(a, src->minor_to_major,
                                            sizeof(int64_t) * (size_t)src->n_minor_to_major);
        if (!s->minor_to_major) return NULL;
    }
    if (src->layout_extra) {
        s->layout_extra = gs_arena_strdup(a, src->layout_extra);
        if (!s->layout_extra) return NULL;
    }
    if (src->n_tuple > 0) {
        s->tuple = GS_NEW_ARRAY(a, gs_shape *, src->n_tuple);
        if (!s->tuple) return NULL;
        for (int i = 0; i < src->n_tuple; i++)
            if (!(s->tuple[i] = gs_shape_clone(a, src->tuple[i]))) return NULL;
    }
    return s;
}

gs_shape *gs_shape_with_type(gs_arena *a, const gs_shape *src, gs_type type) {
    gs_shape *s = gs_shape_clone(a, src);
    if (s) s->type = type;
    return s;
}

bool gs_shape_is_array(const gs_shape *s) { return gs_type_is_array(s->type); }
bool gs_shape_is_tuple(const gs_shape *s) { return s->type == GS_TUPLE; }

int64_t gs_shape_elements(const gs_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dims[i];
    return n;
}

int64_t gs_shape_bytes(const gs_shape *s) {
    if (s->type == GS_TUPLE) {
        int64_t n = 0;
        for (int i = 0; i < s->n_tuple; i++) n += gs_shape_bytes(s->tuple[i]);
        return n;
    }
    if (!gs_type_is_array(s->type)) return 0;
    return gs_shape_elements(s) * gs_type_size(s->type);
}

bool gs_shape_same_dims(const gs_shape *a, const gs_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

bool gs_shape_equal(const gs_shape *a, const gs_shape *b) {
    if (a->type != b->type) return false;
    if (a->type == GS_TUPLE) {
        if (a->n_tuple != b->n_tuple) return false;
        for (int i = 0; i < a->n_tuple; i++)
            if (!gs_shape_equal(a->tuple[i], b->tuple[i])) return false;
        return true;
    }
    if (!gs_shape_same_dims(a, b)) return false;
    for (int i = 0; i < a->rank; i++) {
        bool da = a->dynamic && a->dynamic[i], db = b->dynamic && b->dynamic[i];
        if (da != db) return false;
    }
    return true;
}

const gs_shape *gs_shape_subshape(const gs_shape *s, int n_index, const int64_t *index) {
    for (int i = 0; i < n_index; i++) {
        if (s->type != GS_TUPLE || index[i] < 0 || index[i] >= s->n_tuple) return NULL;
        s = s->tuple[index[i]];
    }
    return s;
}

int gs_shape_n_leaves(const gs_shape *s) {
    if (s->type != GS_TUPLE) return 1;
    int n = 0;
    for (int i = 0; i < s->n_tuple; i++) n += gs_shape_n_leaves(s->tuple[i]);
    return n;
}

void gs_shape_print(gs_sb *sb, const gs_shape *s, bool with_layout) {
    if (s->type == GS_TUPLE) {
        gs_sb_putc(sb, '(');
        for (int i = 0; i < s->n_tuple; i++) {
            if (i) gs_sb_puts(sb, ", ");
            gs_shape_print(sb, s->tuple[i], with_layout);
        }
        gs_sb_putc(sb, ')');
        return;
    }
    gs_sb_puts(sb, gs_type_name(s->type));
    gs_sb_putc(sb, '[');
    for (int i = 0; i < s->rank; i++) {
        if (i) gs_sb_putc(sb, ',');
        if (s->dynamic && s->dynamic[i] && s->dims[i] < 0)
            gs_sb_putc(sb, '?'); /* unbounded */
        else if (s->dynamic && s->dynamic[i])
            gs_sb_printf(sb, "<=%lld", (long long)s->dims[i]);
        else
            gs_sb_printf(sb, "%lld", (long long)s->dims[i]);
    }
    gs_sb_putc(sb, ']');
    if (with_layout && s->has_layout) {
        gs_sb_putc(sb, '{');
        for (int i = 0; i < s->n_minor_to_major; i++) {
            if (i) gs_sb_putc(sb, ',');
            gs_sb_printf(sb, "%lld", (long long)s->minor_to_major[i]);
        }
        if (s->layout_extra) {
            gs_sb_putc(sb, ':');
            gs_sb_puts(sb, s->layout_extra);
        }
        gs_sb_putc(sb, '}');
    }
}

char *gs_shape_to_string(gs_arena *a, const gs_shape *s) {
    gs_sb sb = {0};
    gs_shape_print(&sb, s, true);
    char *r = sb.failed ? NULL : gs_arena_strdup(a, gs_sb_str(&sb));
    gs_sb_free(&sb);
    return r;
}
