/*
 * value.c — runtime tensors (gs_value): allocation, reference counting, copies, leaves.
 */
#include "gspmd/interp.h"
#include "base/internal.h"
#include "base/sysalloc.h"

#include <stdlib.h>
#include <string.h>

gs_value *gs_value_new_array(gs_type type, int rank, const int64_t *dims) {
    if (rank < 0 || rank > GS_MAX_RANK || !gs_type_is_array(type)) return NULL;
    gs_value *v = gs_sys_calloc(1, sizeof *v);
    if (!v) return NULL;
    v->type = type;
    v->rank = rank;
    v->n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) {
            free(v);
            return NULL;
        }
        v->dims[i] = dims[i];
        if (__builtin_mul_overflow(v->n, dims[i], &v->n)) { /* no wrapped size reaches calloc */
            free(v);
            return NULL;
        }
    }
    int64_t total;
    if (__builtin_mul_overflow(v->n, (int64_t)gs_type_size(type), &total)) {
        free(v);
        return NULL;
    }
    size_t bytes = (size_t)total;
    v->data = gs_sys_calloc(bytes ? bytes : 1, 1);
    if (!v->data) {
        free(v);
        return NULL;
    }
    v->refs = 1;
    return v;
}

gs_value *gs_value_new_tuple(int n, gs_value **elems) {
    gs_value *v = gs_sys_calloc(1, sizeof *v);
    gs_value **t = gs_sys_calloc(n > 0 ? (size_t)n : 1, sizeof *t);
    if (!v || !t) {
        free(v);
        free(t);
        for (int i = 0; i < n; i++) gs_value_free(elems[i]);
        return NULL;
    }
    v->type = GS_TUPLE;
    v->n_tuple = n;
    v->tuple = t;
    for (int i = 0; i < n; i++) t[i] = elems[i];
    v->refs = 1;
    return v;
}

gs_value *gs_value_new_token(void) {
    gs_value *v = gs_sys_calloc(1, sizeof *v);
    if (!v) return NULL;
    v->type = GS_TOKEN;
    v->refs = 1;
    return v;
}

gs_value *gs_value_from_shape(const gs_shape *s) {
    if (s->type == GS_TOKEN) return gs_value_new_token();
    if (s->type != GS_TUPLE) return gs_value_new_array(s->type, s->rank, s->dims);
    gs_value **elems = gs_sys_calloc(s->n_tuple > 0 ? (size_t)s->n_tuple : 1, sizeof *elems);
    if (!elems) return NULL;
    for (int i = 0; i < s->n_tuple; i++) {
        elems[i] = gs_value_from_shape(s->tuple[i]);
        if (!elems[i]) {
            for (int j = 0; j < i; j++) gs_value_free(elems[j]);
            free(elems);
            return NULL;
        }
    }
    gs_value *v = gs_value_new_tuple(s->n_tuple, elems);
    free(elems);
    return v;
}

/* Reference counts are atomic: the runtime gives replicas on device threads one shared
 * argument (src/runtime/sharded.c), which each device's interpreter references and releases. */
gs_value *gs_value_ref(gs_value *v) {
    if (v) __atomic_add_fetch(&v->refs, 1, __ATOMIC_RELAXED);
    return v;
}

void gs_value_free(gs_value *v) {
    if (!v || __atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    for (int i = 0; i < v->n_tuple; i++) gs_value_free(v->tuple[i]);
    free(v->tuple);
    free(v->data);
    free(v);
}

size_t gs_value_bytes(const gs_value *v) {
    return gs_type_is_array(v->type) ? (size_t)v->n * (size_t)gs_type_size(v->type) : 0;
}

gs_value *gs_value_copy(const gs_value *v) {
    if (v->type == GS_TOKEN) return gs_value_new_token();
    if (v->type == GS_TUPLE) {
        gs_value **elems = gs_sys_calloc(v->n_tuple > 0 ? (size_t)v->n_tuple : 1, sizeof *elems);
        if (!elems) return NULL;
        for (int i = 0; i < v->n_tuple; i++) {
            elems[i] = gs_value_copy(v->tuple[i]);
            if (!elems[i]) {
                for (int j = 0; j < i; j++) gs_value_free(elems[j]);
                free(elems);
                return NULL;
            }
        }
        gs_value *t = gs_value_new_tuple(v->n_tuple, elems);
        free(elems);
        if (t) t->devices = v->devices;
        return t;
    }
    gs_value *c = gs_value_new_array(v->type, v->rank, v->dims);
    if (c) memcpy(c->data, v->data, gs_value_bytes(v));
    return c;
}

bool gs_value_same_bits(const gs_value *a, const gs_value *b) {
    if (a->type != b->type || a->devices != b->devices) return false;
    if (a->type == GS_TUPLE) {
        if (a->n_tuple != b->n_tuple) return false;
        for (int i = 0; i < a->n_tuple; i++)
            if (!gs_value_same_bits(a->tuple[i], b->tuple[i])) return false;
        return true;
    }
    if (a->rank != b->rank || memcmp(a->dims, b->dims, sizeof a->dims[0] * (size_t)a->rank) != 0)
        return false;
    size_t n = gs_value_bytes(a);
    return n == gs_value_bytes(b) && (n == 0 || memcmp(a->data, b->data, n) == 0);
}

bool gs_value_matches(const gs_value *v, const gs_shape *s) {
    if (v->devices > 0) {
        for (int d = 0; d < v->n_tuple; d++)
            if (!gs_value_matches(v->tuple[d], s)) return false;
        return true;
    }
    if (v->type != s->type) return false;
    if (s->type == GS_TUPLE) {
        if (v->n_tuple != s->n_tuple) return false;
        for (int i = 0; i < s->n_tuple; i++)
            if (!gs_value_matches(v->tuple[i], s->tuple[i])) return false;
        return true;
    }
    if (s->type == GS_TOKEN) return true;
    if (v->rank != s->rank) return false;
    for (int i = 0; i < s->rank; i++) {
        bool dynamic = s->dynamic && s->dynamic[i];
        if (dynamic ? v->dims[i] > s->dims[i] : v->dims[i] != s->dims[i]) return false;
    }
    return true;
}

static gs_status collect_leaves(gs_value *v, gs_vec *out) {
    if (v->type == GS_TUPLE && v->devices == 0) {
        for (int i = 0; i < v->n_tuple; i++)
            if (collect_leaves(v->tuple[i], out) != GS_OK) return GS_ERR;
        return GS_OK;
    }
    if (v->type == GS_TOKEN) return GS_OK;
    if (v->devices > 0 && v->n_tuple > 0 && v->tuple[0]->type == GS_TOKEN) return GS_OK;
    return gs_vec_push(out, &v);
}

gs_value *gs_value_bundles_to_leaves(gs_value *v) {
    if (v->type != GS_TUPLE) return gs_value_ref(v);
    bool split = v->devices == 0;
    int n = v->devices == 0 ? v->n_tuple : 0;
    if (v->devices > 0 && v->n_tuple > 0 && v->tuple[0]->type == GS_TUPLE &&
        v->tuple[0]->devices == 0) {
        split = true;
        n = v->tuple[0]->n_tuple;
        for (int k = 1; k < v->n_tuple; k++)
            if (v->tuple[k]->type != GS_TUPLE || v->tuple[k]->n_tuple != n) split = false;
    }
    if (!split) return gs_value_ref(v);
    gs_value **el = gs_sys_calloc((size_t)(n ? n : 1), sizeof *el);
    gs_value **parts = gs_sys_calloc((size_t)(v->n_tuple ? v->n_tuple : 1), sizeof *parts);
    bool ok = el && parts;
    for (int i = 0; ok && i < n; i++) {
        gs_value *e;
        if (v->devices == 0) {
            e = gs_value_ref(v->tuple[i]);
        } else {
            for (int k = 0; k < v->n_tuple; k++) parts[k] = gs_value_ref(v->tuple[k]->tuple[i]);
            e = gs_value_new_tuple(v->n_tuple, parts);
            if (e) e->devices = v->n_tuple;
        }
        el[i] = e ? gs_value_bundles_to_leaves(e) : NULL;
        gs_value_free(e);
        if (!el[i]) {
            for (int j = 0; j < i; j++) gs_value_free(el[j]);
            ok = false;
        }
    }
    gs_value *t = ok ? gs_value_new_tuple(n, el) : NULL;
    free(el);
    free(parts);
    return t;
}

gs_status gs_value_leaves(gs_value *v, gs_value ***leaves, int *n) {
    gs_vec out;
    gs_vec_init(&out, sizeof(gs_value *));
    if (collect_leaves(v, &out) != GS_OK) {
        gs_vec_free(&out);
        return GS_ERR;
    }
    *n = (int)out.n;
    *leaves = out.data ? out.data : gs_sys_calloc(1, sizeof(gs_value *));
    return *leaves ? GS_OK : GS_ERR;
}

void gs_value_shape_str(const gs_value *v, char *buf, size_t size) {
    if (v->devices > 0 && v->n_tuple > 0) {
        gs_value_shape_str(v->tuple[0], buf, size);
        size_t k = strlen(buf);
        if (k < size) snprintf(buf + k, size - k, " per device");
        return;
    }
    if (v->type == GS_TUPLE) {
        snprintf(buf, size, "(tuple of %d)", v->n_tuple);
        return;
    }
    if (v->type == GS_TOKEN) {
        snprintf(buf, size, "token[]");
        return;
    }
    size_t k = (size_t)snprintf(buf, size, "%s[", gs_type_name(v->type));
    for (int i = 0; i < v->rank && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? "," : "", (long long)v->dims[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
}
